// nccl-tests logs (all_reduce_perf and friends), parsed and fitted.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planners/nccl_tests.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto log = cs::plan::parse_nccl_tests(text, "fuzz.log", "all_reduce");
  if (!log) return 0;
  (void)cs::plan::fit_nccl_tests({*log});
  (void)cs::plan::fit_nccl_tests({*log, *log}, std::nullopt, 1);
  return 0;
}
