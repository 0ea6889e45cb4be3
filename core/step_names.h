#pragma once
// Annotation ranges that mark a training step, told by their names: how a
// program ClusterScope did not launch says where its steps are. NVTX ranges
// (a program under `clusterscope profile`, an Nsight Systems export) named
//   ProfilerStep#N                 PyTorch's profiler
//   step N, iteration N, iter N    in any case, N after a space, '#', '_',
//                                  '-' or ':', or right after the word
// are step N (0 to 2^31 - 1); no other name is (step, stepper 3, step 3 of
// 10, train step 3).

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace cs::trace {

std::optional<std::int32_t> step_of_range_name(std::string_view name);

// Which of a process's ranges are its steps, one rule for every source (the
// CUPTI tracer, the Nsight Systems import): ranges named as a step, outside
// NCCL's NVTX domain, of the first thread to start one, and outermost there
// (one that starts inside the step before it, a "step N" inside PyTorch's
// "ProfilerStep#N", stays an annotation). Ranges are given in the order they
// start on each thread.
class StepRanges {
 public:
  // A range that starts: its step when it is one. The caller then gives its
  // end with ended().
  std::optional<std::int32_t> started(std::uint64_t thread, std::string_view domain,
                                      std::string_view name, std::int64_t start);
  // The end of the range started() last took as a step.
  void ended(std::int64_t end) { busy_until_ = end; }

 private:
  std::optional<std::uint64_t> thread_;
  std::int64_t busy_until_ = std::numeric_limits<std::int64_t>::min();  // the last step's end
};

}  // namespace cs::trace
