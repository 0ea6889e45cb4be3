// PyTorch profiler (Kineto) / Chrome trace JSON, imported into a store.

#include <cstddef>
#include <cstdint>

#include "core/trace_import.h"
#include "tests/fuzz/fuzz_temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string input = cs::fuzz::temp_path("kineto.json");
  static const std::string store = cs::fuzz::temp_path("kineto.sqlite");
  cs::fuzz::write_file(input, data, size);
  cs::fuzz::remove_store(store);
  cs::trace::ImportOptions options;
  options.max_text_bytes = 64 << 20;
  (void)cs::trace::import_kineto({input}, store, options);
  cs::fuzz::remove_store(store);
  return 0;
}
