#include "core/pipeline_schedule.h"

#include <algorithm>

namespace cs {

std::vector<PipelinePass> pipeline_schedule(int stages, int stage, int micro_batches, int chunks) {
  chunks = std::max(chunks, 1);
  const int total = micro_batches * chunks;
  auto forward_pass = [&](int k) {
    if (chunks == 1) return PipelinePass{true, k, 0};
    const int group = k / (stages * chunks);
    const int in_group = k % (stages * chunks);
    return PipelinePass{true, group * stages + in_group % stages, in_group / stages};
  };
  auto backward_pass = [&](int k) {
    PipelinePass pass = forward_pass(k);
    pass.forward = false;
    pass.chunk = chunks - 1 - pass.chunk;
    return pass;
  };
  const int warmup = std::clamp(
      chunks == 1 ? stages - stage - 1 : 2 * (stages - stage - 1) + (chunks - 1) * stages, 0,
      total);
  std::vector<PipelinePass> passes;
  passes.reserve(2 * static_cast<std::size_t>(std::max(total, 0)));
  for (int k = 0; k < warmup; ++k)
    passes.push_back(forward_pass(k));
  for (int k = 0; k < total - warmup; ++k) {
    passes.push_back(forward_pass(warmup + k));
    passes.push_back(backward_pass(k));
  }
  for (int k = std::max(total - warmup, 0); k < total; ++k)
    passes.push_back(backward_pass(k));
  return passes;
}

std::vector<int> pipeline_in_flight(const std::vector<PipelinePass>& passes, int chunks) {
  std::vector<int> now(static_cast<std::size_t>(std::max(chunks, 1)), 0);
  std::vector<int> most = now;
  for (const PipelinePass& pass : passes) {
    int& n = now[static_cast<std::size_t>(pass.chunk)];
    n += pass.forward ? 1 : -1;
    most[static_cast<std::size_t>(pass.chunk)] =
        std::max(most[static_cast<std::size_t>(pass.chunk)], n);
  }
  return most;
}

}  // namespace cs
