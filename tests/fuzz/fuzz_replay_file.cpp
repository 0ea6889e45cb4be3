// CUPTI replay files (recorded activity buffers with pointer fixups).

#include <cstddef>
#include <cstdint>

#include "profiler/replay_file.h"
#include "tests/fuzz/fuzz_temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = cs::fuzz::temp_path("replay.bin");
  cs::fuzz::write_file(path, data, size);
  (void)cs::profiler::read_replay(path);
  return 0;
}
