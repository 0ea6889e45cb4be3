#include "core/launched_kernels.h"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace cs::trace {

bool engine_kernel(std::string_view kernel_name) {
  return kernel_name.find("cs::worker::") != std::string_view::npos;
}

namespace {

// Whether `text` holds `lower` (lower case) in any case; no copy: it is
// asked of every kernel of a store.
bool contains_any_case(std::string_view text, std::string_view lower) {
  return std::search(text.begin(), text.end(), lower.begin(), lower.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         }) != text.end();
}

}  // namespace

bool tf32_kernel(std::string_view kernel_name) {
  if (contains_any_case(kernel_name, "3xtf32")) return false;
  if (contains_any_case(kernel_name, "tf32")) return true;
  constexpr std::string_view kCutlassFp32 = "tensorop_s1688gemm_";
  const auto at = kernel_name.find(kCutlassFp32);
  if (at == std::string_view::npos) return false;
  const std::string_view after = kernel_name.substr(at + kCutlassFp32.size());
  return !after.starts_with("f16") && !after.starts_with("bf16");  // half operands (Turing's)
}

bool gemm_reduction_kernel(std::string_view kernel_name) {
  return kernel_name.find("splitKreduce") != std::string_view::npos;
}

bool LaunchedKernels::take(const Event& e, bool on_stream, std::string_view name) {
  if (e.kind == EventKind::api_call && e.correlation > 0) {
    launch_ns_.emplace(e.correlation, e.start_ns);  // the earliest call of an id stays
    return true;
  }
  if (e.kind == EventKind::kernel && e.category == Category::compute && e.correlation > 0 &&
      on_stream) {
    if (!engine_kernel(name))
      kernels_.push_back(
          {e.correlation, e.end_ns - e.start_ns, tf32_kernel(name), gemm_reduction_kernel(name)});
    return true;
  }
  return false;
}

std::vector<LaunchedKernels::Time> LaunchedKernels::attribute(std::span<const Span> ops) const {
  std::vector<Time> out(ops.size());
  for (const Kernel& kernel : kernels_) {
    auto launch = launch_ns_.find(kernel.correlation);
    if (launch == launch_ns_.end()) continue;
    const std::int64_t t = launch->second;
    auto it = std::upper_bound(ops.begin(), ops.end(), t,
                               [](std::int64_t v, const Span& o) { return v < o.start_ns; });
    if (it == ops.begin() || std::prev(it)->end_ns <= t) continue;
    Time& time = out[static_cast<std::size_t>(std::prev(it) - ops.begin())];
    time.kernel_ns += kernel.ns;
    ++time.kernels;
    time.tf32_kernels += kernel.tf32;
    time.reduction_kernels += kernel.reduction;
  }
  return out;
}

}  // namespace cs::trace
