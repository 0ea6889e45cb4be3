#pragma once
// A GPU rank's host operations timed by the kernels they launched: each
// compute kernel on one of its GPU streams is tied by its correlation id to
// the runtime or driver call that launched it, and belongs to the host
// operation whose span [start, end) holds that call's start (the innermost,
// the latest to start, where operations nest). The CUDA engine's GEMM
// ranges ("gemm <op>", around its cuBLAS calls) and a PyTorch profile's
// aten::mm and kin are timed so: what calibrate --learn fits and what
// `trace stats` rates.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/trace_types.h"

namespace cs::trace {

// The CUDA engine's own kernels (its bias add, FP8 casts) inside a GEMM's
// range are not the GEMM library's: they are not the GEMM's time (the
// planner assumes the bias fused into the GEMM, as Megatron-style
// frameworks run it, and times the casts apart).
bool engine_kernel(std::string_view kernel_name);

// Whether a kernel's name says it computed an FP32 GEMM on TF32 tensor
// cores: cuBLAS's "..._tf32f32_..." and CUTLASS's "s1688tf32gemm", and
// CUTLASS's "tensorop_s1688gemm" over float operands (rounded to TF32 on
// Ampere and later). Not "3xtf32", FP32 emulated at FP32's accuracy.
bool tf32_kernel(std::string_view kernel_name);
// Whether a kernel is cuBLAS's split-K reduction: it sums the partial
// products of a GEMM kernel launched before it, and is no GEMM's work alone.
bool gemm_reduction_kernel(std::string_view kernel_name);

class LaunchedKernels {
 public:
  // Takes one of the rank's events: a launching call (an API call with a
  // correlation id), or a compute kernel with one on a GPU stream
  // (`on_stream`; the engine's own kernels are taken and not counted).
  // False for any other event, which the caller reads on.
  bool take(const Event& e, bool on_stream, std::string_view name);
  // Whether a call of this correlation id was taken.
  bool launched(std::int64_t correlation) const { return launch_ns_.count(correlation) > 0; }

  struct Span {
    std::int64_t start_ns = 0, end_ns = 0;
  };
  struct Time {
    std::int64_t kernel_ns = 0;  // the GPU time of the kernels it launched
    int kernels = 0;
    int tf32_kernels = 0;  // of them, those that ran on TF32 tensor cores (tf32_kernel)
    int reduction_kernels = 0;  // of them, split-K reductions (gemm_reduction_kernel)
    // Whether a kernel that did its work was recorded: a trace that lost
    // events (Kineto's buffers full, a sampled trace) may hold a split-K
    // GEMM's reduction alone, which timed it 3-10 times too fast.
    bool work_recorded() const { return kernels > reduction_kernels; }
    // The precision they computed in, of an operation of `typed`: an fp32
    // operation that launched a TF32 GEMM kernel computed in TF32 (PyTorch's
    // fp32 matmuls where allow_tf32 is set, which no trace records), its
    // other kernels (cuBLAS's split-K reduction) beside it.
    std::optional<Precision> computed_in(std::optional<Precision> typed) const {
      return typed == Precision::fp32 && tf32_kernels > 0 ? Precision::tf32 : typed;
    }
  };
  // The kernels' time of each operation of `ops`, sorted by start; a
  // kernel whose call no operation holds, or whose call was not recorded,
  // counts for none.
  std::vector<Time> attribute(std::span<const Span> ops) const;

 private:
  std::unordered_map<std::int64_t, std::int64_t> launch_ns_;    // the call's start by correlation
  struct Kernel {
    std::int64_t correlation = 0, ns = 0;
    bool tf32 = false;
    bool reduction = false;
  };
  std::vector<Kernel> kernels_;
};

}  // namespace cs::trace
