#pragma once
// Measurements of the machine at hand through an engine's own backend and
// communicators: GEMM throughput over sizes, memory bandwidth, and collective
// bandwidth over message sizes (with nccl-tests' bus-bandwidth factors). The
// GPU check and calibration run these; with a tracer set, every measured
// operation also lands in the rank's trace store.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/machine_probe.h"
#include "profiler/worker/backend.h"
#include "profiler/worker/comm.h"

namespace cs::worker {

struct GemmSample {
  std::int64_t m = 0, n = 0, k = 0;
  std::string layout = "nt";  // the layer sweep: "forward", "dgrad", "wgrad"
  double seconds = 0;  // one GEMM, averaged over the repetitions
  double flops_per_second = 0;
  // The types its timed GEMMs ran in (Backend::take_gemm_ran_as: "bf16" for
  // an fp8 sample that fell back); empty where the backend does not tell.
  std::string ran_as;
};

struct BandwidthSample {
  std::int64_t bytes = 0;  // bytes read and written by one pass
  double seconds = 0;
  double bytes_per_second = 0;
};

struct CollectiveSample {
  std::string operation;   // "all_reduce"
  std::int64_t bytes = 0;  // message size per rank
  int ranks = 0;
  double seconds = 0;
  double algorithm_bandwidth = 0;  // bytes / seconds
  double bus_bandwidth = 0;        // algbw x 2(n-1)/n for all-reduce
};

// Square GEMMs out[n,n] = a[n,n] . b[n,n]^T in the backend's compute type.
std::vector<GemmSample> gemm_sweep(Backend& backend, DType storage, const std::vector<int>& sizes,
                                   double seconds_per_size,
                                   const std::function<void(const GemmSample&)>& on_sample = {});

// The GEMMs of a transformer layer of width h (each size): h tokens through
// a linear layer of h -> h (the attention projection) and h -> 4h (the MLP),
// forward with its bias, then backward (data and weight gradients, the bias
// gradient) as training runs them, one after the other. A step's GEMMs are
// skinnier than squares of their FLOPs and come in three layouts; the
// planner calibrated on these predicts a training step's GEMM time, where
// squares make it 15-25 % too fast. Each repetition takes the next of
// several copies of the operands (8 MiB at least), so that they are not
// all in the core's L2 as a step's are not. One sample per GEMM shape and layout
// (forward, dgrad, wgrad: m x n x k as out = m x k . k x n).
std::vector<GemmSample> layer_gemm_sweep(Backend& backend, DType storage,
                                         const std::vector<int>& widths, double seconds_per_size,
                                         const std::function<void(const GemmSample&)>& on_sample = {});

// accumulate(dst, src) over tensors of each size: reads 2 and writes 1.
// `on_sample` is called as each size is measured, as the other sweeps call
// it (a calibration's progress, and what keeps its hang timeout from
// counting a whole sweep as one silence).
std::vector<BandwidthSample> bandwidth_sweep(
    Backend& backend, const std::vector<std::int64_t>& bytes, int repetitions,
    const std::function<void(const BandwidthSample&)>& on_sample = {});

// All-reduce of fp32 messages of each size across the communicator's group;
// every rank of the group must call it with the same sizes.
std::vector<CollectiveSample> all_reduce_sweep(
    Backend& backend, Communicator& comm, const std::vector<std::int64_t>& bytes, int repetitions,
    const std::function<void(const CollectiveSample&)>& on_sample = {});

// The same all-reduces as a training step meets its gradients after
// backward: before each call (untimed) every rank streams through a buffer
// larger than the caches, then writes its message, as backward writes the
// gradients; the ranks then start the call together, each timed alone. Host
// memory only (the CPU engine).
std::vector<CollectiveSample> cold_all_reduce_sweep(
    Backend& backend, Communicator& comm, const std::vector<std::int64_t>& bytes, int repetitions,
    const std::function<void(const CollectiveSample&)>& on_sample = {});

// The machine probe (core/machine_probe.h), untraced when no tracer is set:
// the layer GEMM's forward as the layer sweep times it (about `seconds` of
// it), the layer norm's backward as the operation sweep times it (as long),
// and the median of 20 all-reduces over `world`, which every rank of the
// run must call at once.
MachineProbe probe_machine(Backend& backend, Communicator& world, DType storage,
                           const MachineProbeShape& shape, double seconds);

// One measured point of the operation sweep: an operation of the model at
// one size, repeated; the backend's tracer records every repetition.
struct OpSample {
  std::string operation;     // the traced name: "layernorm", "gelu backward", "attention", ...
  std::int64_t elements = 0;  // what the operation processed (scores for attention)
  double flops = 0;           // attention: the full square's FLOPs, as the tracer counts them
  int repetitions = 0;
  double seconds = 0;  // one operation, averaged
};

// The model's non-GEMM operations (layer norm, GELU, residual add, attention,
// cross-entropy, embedding, AdamW and the gradient passes around it) at
// sizes around a small GPT's on the CPU and a GPT-2's on a GPU,
// `seconds_per_point` each, in `storage`. The per-element costs of a
// device (core/hardware.h LoopCosts) are fitted from what they measure.
std::vector<OpSample> op_sweep(Backend& backend, DType storage, double seconds_per_point,
                               const std::function<void(const OpSample&)>& on_sample = {});
// How many samples op_sweep makes on `backend` in `storage`, before it runs
// (a calibration's progress counts them).
int op_sweep_points(const Backend& backend, DType storage);

}  // namespace cs::worker
