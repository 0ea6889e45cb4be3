// Nsight Systems SQLite exports, imported into a store. Seed it with real
// exports: mutations of one reach far more of the reader than random bytes.

#include <cstddef>
#include <cstdint>

#include "core/trace_import.h"
#include "tests/fuzz/fuzz_temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string input = cs::fuzz::temp_path("nsys.sqlite");
  static const std::string store = cs::fuzz::temp_path("nsys-out.sqlite");
  cs::fuzz::remove_store(input);
  cs::fuzz::write_file(input, data, size);
  cs::fuzz::remove_store(store);
  (void)cs::trace::import_nsys({input}, store);
  cs::fuzz::remove_store(store);
  return 0;
}
