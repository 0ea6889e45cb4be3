// Open MPI hostfiles: what passes must format back to a hostfile that reads
// back the same.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "profiler/hostfile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hosts = cs::launch::parse_hostfile(text, "fuzz-hostfile");
  if (!hosts) return 0;
  (void)cs::launch::total_slots(*hosts);
  const std::string again = cs::launch::format_hostfile(*hosts);
  auto reread = cs::launch::parse_hostfile(again, "formatted");
  if (!reread || reread->size() != hosts->size()) std::abort();
  return 0;
}
