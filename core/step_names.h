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
#include <optional>
#include <string_view>

namespace cs::trace {

std::optional<std::int32_t> step_of_range_name(std::string_view name);

}  // namespace cs::trace
