// The UTF-8 helpers: valid_utf8 always gives valid UTF-8, and keeps valid
// text as it is.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = cs::is_valid_utf8(text);
  const std::string repaired = cs::valid_utf8(text);
  if (!cs::is_valid_utf8(repaired)) std::abort();
  if (valid && repaired != text) std::abort();
  return 0;
}
