// mpirun's output, line by line: tagged rank lines (split and reassembled)
// and mpirun's notices of a failed rank.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "profiler/mpirun_output.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  cs::launch::TaggedLineAssembler assembler;
  cs::launch::MpirunNotices notices;
  std::size_t total = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    (void)cs::launch::parse_tagged_line(line);
    assembler.feed(line, [&](const cs::launch::TaggedLine& l) {
      total += l.text.size();
      if (l.rank < 0) notices.feed(l.text);
    });
    notices.feed(line);
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return total == static_cast<std::size_t>(-1);
}
