// Sweep JSON lines of clusterscope-worker --sweep, imported into a
// calibration store.

#include <cstddef>
#include <cstdint>

#include "core/import_sweeps.h"
#include "tests/fuzz/fuzz_temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string input = cs::fuzz::temp_path("sweeps.jsonl");
  static const std::string store = cs::fuzz::temp_path("sweeps.sqlite");
  cs::fuzz::write_file(input, data, size);
  cs::fuzz::remove_store(store);
  (void)cs::trace::read_sweep_file(input);
  (void)cs::trace::import_sweep_lines({input}, store, "cpu", "fuzz");
  cs::fuzz::remove_store(store);
  return 0;
}
