#include "core/launched_kernels.h"

#include <algorithm>
#include <iterator>

namespace cs::trace {

bool engine_kernel(std::string_view kernel_name) {
  return kernel_name.find("cs::worker::") != std::string_view::npos;
}

bool LaunchedKernels::take(const Event& e, bool on_stream, std::string_view name) {
  if (e.kind == EventKind::api_call && e.correlation > 0) {
    launch_ns_.emplace(e.correlation, e.start_ns);  // the earliest call of an id stays
    return true;
  }
  if (e.kind == EventKind::kernel && e.category == Category::compute && e.correlation > 0 &&
      on_stream) {
    if (!engine_kernel(name)) kernels_.emplace_back(e.correlation, e.end_ns - e.start_ns);
    return true;
  }
  return false;
}

std::vector<LaunchedKernels::Time> LaunchedKernels::attribute(std::span<const Span> ops) const {
  std::vector<Time> out(ops.size());
  for (const auto& [correlation, ns] : kernels_) {
    auto launch = launch_ns_.find(correlation);
    if (launch == launch_ns_.end()) continue;
    const std::int64_t t = launch->second;
    auto it = std::upper_bound(ops.begin(), ops.end(), t,
                               [](std::int64_t v, const Span& o) { return v < o.start_ns; });
    if (it == ops.begin() || std::prev(it)->end_ns <= t) continue;
    Time& time = out[static_cast<std::size_t>(std::prev(it) - ops.begin())];
    time.kernel_ns += ns;
    ++time.kernels;
  }
  return out;
}

}  // namespace cs::trace
