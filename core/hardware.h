#pragma once
// The hardware vocabulary: a GPU's datasheet, the links between GPUs, and a
// cluster built from them. Units are SI inside the program (bytes, bytes/s,
// seconds, FLOP/s, watts); JSON uses the units of datasheets (see model_json.h).

#include <optional>
#include <string>
#include <vector>

#include "core/precision.h"

namespace cs {

// Dense (no sparsity) peak throughput per precision in FLOP/s (OP/s for INT8);
// 0 means the GPU has no such tensor-core path.
struct PeakRates {
  double fp32 = 0;
  double tf32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;
  double int8 = 0;

  // INT4 falls back to the INT8 rate (INT4 weights are dequantised to compute).
  double of(Precision p) const;
};

// The optimizer's cost per parameter at one parameter count of a rank.
struct OptimizerPoint {
  double parameters = 0;
  double ns = 0;
};

// Devices whose non-GEMM work runs as plain loops (the CPU engine: one
// rank's share of the cores): measured time per element of each kind of
// operation. 0 keeps the GPU model for that kind (a memory-bound kernel at
// memory_max of the bandwidth; the attention core as batched GEMMs).
struct LoopCosts {
  double norm_ns = 0;                 // layer norm forward, per element
  double norm_backward_ns = 0;        // layer norm backward, per element
  double activation_ns = 0;           // GELU forward, per element
  double activation_backward_ns = 0;  // GELU backward, per element
  double elementwise_ns =
      0;                  // residual add, embedding lookup and its gradient, GEMM bias, per element
  double softmax_ns = 0;  // cross-entropy forward and backward together, per logit
  double optimizer_ns = 0;      // per updated parameter and step: AdamW, gradient scaling and norm
  double attention_gflops = 0;  // causal attention as loops: GFLOP/s of 4·b·s²·h (the full square)
  double attention_backward_gflops = 0;  // its backward: GFLOP/s of 8·b·s²·h
  // The precision the attention rates were measured in: a run in another
  // does the attention's matmuls at its own GEMM rate (the planner moves
  // their FLOPs from the one rate to the other). Unset: none is moved.
  std::optional<Precision> attention_precision;
  // optimizer_ns by the rank's parameter count, counts increasing, where the
  // cost depends on it: a CPU rank's optimizer reads lines its GEMM threads
  // left in each other's caches while its state fits there (1.7 ns per
  // parameter at 0.9 M parameters on the development VM), and streams them
  // from memory once it does not (0.9 ns at 4.9 M). Empty: optimizer_ns.
  std::vector<OptimizerPoint> optimizer_by_size;

  bool any() const {
    return norm_ns > 0 || norm_backward_ns > 0 || activation_ns > 0 || activation_backward_ns > 0 ||
           elementwise_ns > 0 || softmax_ns > 0 || optimizer_ns > 0 || attention_gflops > 0 ||
           attention_backward_gflops > 0;
  }
  // ns per parameter for a rank updating `parameters`: optimizer_by_size
  // interpolated in log(parameters), its ends held; else optimizer_ns.
  double optimizer_ns_at(double parameters) const;
};

// What a real kernel reaches against the datasheet: properties of the GPU,
// used by the planners' roofline with size-dependent efficiency. The fields
// after kernel_launch_us are optional refinements (calibration sets them);
// their defaults leave the datasheet model as it is.
struct GpuEfficiency {
  double gemm_max = 0.80;         // fraction of peak that a large GEMM reaches
  double gemm_half_gflop = 1.0;   // GEMM work (GFLOP) at which half of gemm_max is reached
  double memory_max = 0.85;       // fraction of memory bandwidth a streaming kernel reaches
  double kernel_launch_us = 4.0;  // fixed cost of one kernel, launch and tail
  // How much of a GEMM's operand and result traffic its kernels hide under
  // their compute, [0, 1]: 0 adds the two (the datasheet model, checked
  // against the published runs), 1 takes the longer. Calibration fits it.
  double gemm_memory_overlap = 0;
  // gemm_max per compute precision (fractions; 0 = gemm_max), for GPUs whose
  // GEMMs reach a different share of each precision's peak.
  PeakRates gemm_max_by_precision;
  // The least time any operation takes: what the host spends issuing it (an
  // eager framework: about 10 µs per operation; the CPU engine: none).
  double host_dispatch_us = 10.0;
  LoopCosts loops;
  // Compute slows by this fraction of the communication time it overlaps
  // (a communication thread sharing the cores with compute); 0 on GPUs.
  double overlap_slowdown = 0;
  // The share of a core each of a rank's compute threads gets while every
  // rank computes (the CPU engine with more threads than cores: cores /
  // (ranks x threads)); 1 on GPUs. Compute takes 1 / share as long, and the
  // pipeline's fill and drain, where a stage would wait, go to the other
  // ranks' work instead.
  double core_share = 1;
  // CPU engine: the BLAS threads per rank the calibration measured with; a
  // run with another count computes at another rate. 0: not recorded.
  int blas_threads = 0;
  // The same while ranks meet in collectives (tensor-parallel ranks, data-
  // parallel replicas): their waits poll and take part of the cores from
  // the ranks computing. Fitted to the calibration's reference runs of
  // ranks sharing cores; 0: core_share.
  double collective_core_share = 0;
  // Of the time the share costs where ranks meet in collectives, the part
  // the last rank to arrive spends there too: its partners, descheduled
  // while they waited, take a while to run again. A trace shows it in that
  // rank's call, the transfer; the rest is the others' waiting. Fitted to
  // the calibration's reference runs of ranks sharing cores; 0: all waiting.
  double shared_wait_in_transfer = 0;
  // The same for tensor-parallel groups, which meet within every layer:
  // fitted to the reference runs with tensor parallelism alone (0.26-0.46
  // where the runs of every layout gave 0.13-0.30; docs/calibration.md).
  // 0: shared_wait_in_transfer.
  double shared_wait_in_tp_transfer = 0;
};

// A GEMM's time from its compute and its memory traffic (seconds) on a
// device that hides `overlap` of the shorter under the longer
// (GpuEfficiency::gemm_memory_overlap): the sum at 0, the longer at 1.
inline double gemm_time(double compute, double memory, double overlap) {
  return compute + memory - overlap * (compute < memory ? compute : memory);
}

struct GpuSpec {
  std::string name;          // preset key, e.g. "h100-sxm"
  std::string display_name;  // e.g. "NVIDIA H100 SXM5 80GB"
  std::string vendor;
  std::string architecture;  // e.g. "hopper"
  double memory_bytes = 0;
  double memory_bandwidth = 0;  // bytes/s
  PeakRates peak;
  double tdp_watts = 0;
  GpuEfficiency efficiency;
  // Substrings of the CUDA device name that identify this model, so that
  // "this machine" finds its datasheet (e.g. "H200", "H100 80GB HBM3").
  std::vector<std::string> device_names;
  // Link preset between the GPUs of a node when nothing else is said: the
  // board's own fabric ("nvlink4"), or a PCIe card's generation ("pcie5");
  // "" for pcie4.
  std::string board_link;
  // Bytes/s per direction of the GPU's own PCIe link to its host, which its
  // traffic to the NICs crosses (PCIe 5.0 x16: 63 GB/s): a GPU gets no more
  // of its node's NICs than this. 0: not known, no cap.
  double host_link_bandwidth = 0;
  std::string source;  // where the figures come from
};

// A calibration of the CPU engine (clusterscope calibrate: "calibrated-..."
// of architecture "cpu") that did not sweep `p`, a precision the engine
// computes in (fp32, tf32 run as fp32, bf16): its preset gives no rate for
// `p`, but the device has the path, and `calibrate --precisions` measures it.
// Errors say so, not "has no bf16 path".
bool calibrated_without(const GpuSpec& gpu, Precision p);

enum class LinkKind { nvlink, pcie, infiniband, roce, ethernet, infinity_fabric, shared_memory };
std::string_view to_string(LinkKind kind);
std::optional<LinkKind> link_kind_from_string(std::string_view text);

// A link's bandwidth at one message size (Link::cold_by_size).
struct LinkPoint {
  double bytes = 0;      // the message (an all-reduce's whole buffer)
  double bandwidth = 0;  // bytes/s, as Link::cold_bandwidth
};
// The bandwidth of `by_size` (sizes increasing) at `bytes`, interpolated in
// log(bytes), its ends held; `otherwise` when it is empty.
double bandwidth_at(const std::vector<LinkPoint>& by_size, double bytes, double otherwise);

// One tier of the network: bandwidth per direction of one port (one GPU's
// share inside a node; one NIC between nodes).
struct Link {
  std::string name;
  std::string display_name;
  LinkKind kind = LinkKind::nvlink;
  double bandwidth = 0;      // bytes/s, per direction, per port
  double latency = 0;        // seconds, one message end to end (the alpha of alpha-beta)
  double efficiency = 0.85;  // fraction of bandwidth that collectives reach as bus bandwidth
  // Collectives whose buffers a training step has pushed out of the caches
  // (the CPU engine's gradient all-reduce after backward), as the
  // calibration's cold all-reduce sweep measured them: bus bandwidth and
  // alpha. 0: no different from the above.
  double cold_bandwidth = 0;
  double cold_latency = 0;
  // The cold bandwidth measured per message size, where one line does not
  // hold every size (on a 2-core VM the CPU engine's 19.6 MB gradient
  // all-reduce after backward ran at 3.4 GB/s, its 3.47 MB one at 4.5):
  // with cold_latency, each point gives the time measured at its size.
  // Sizes increasing; empty: cold_bandwidth at every size.
  std::vector<LinkPoint> cold_by_size;
  std::string source;

  // cold_by_size interpolated in log(bytes), its ends held; else cold_bandwidth.
  double cold_bandwidth_at(double bytes) const;
};

struct Cluster {
  std::string name;
  std::string display_name;
  // At most this many nodes of at most 1024 GPUs, so that the GPUs count in an int.
  static constexpr int kMaxNodes = 1 << 20;
  static constexpr int kMaxGpusPerNode = 1024;
  static constexpr int kMaxNicsPerNode = 1024;  // one a GPU, as many as GPUs at most
  int nodes = 1;
  int gpus_per_node = 0;        // 0: a machine with no GPU (the CPU engine runs there)
  std::optional<GpuSpec> gpu;   // present exactly when gpus_per_node > 0
  Link intra_node;              // between the GPUs of one node
  std::optional<Link> inter_node;  // between nodes; required when nodes > 1
  int nics_per_node = 0;        // ports of inter_node per node
  double price_per_gpu_hour = 0;  // USD; 0 when unknown
  double power_per_gpu_watts = 0; // board power used for energy; 0: the GPU's TDP
  int cpu_cores_per_node = 0;
  double host_memory_bytes = 0;
  std::string source;

  int total_gpus() const { return nodes * gpus_per_node; }
};

// Figures derived from a cluster, as `clusterscope describe` shows them.
struct ClusterTotals {
  int gpus = 0;
  PeakRates peak;             // aggregate FLOP/s per precision
  double gpu_memory_bytes = 0;
  double per_gpu_intra_bandwidth = 0;  // bytes/s per direction
  double per_gpu_inter_bandwidth = 0;  // bytes/s per direction, NIC share per GPU
  double bisection_bandwidth = 0;      // bytes/s per direction across the worst cut in half
  double power_watts = 0;
  double price_per_hour = 0;           // USD for the whole cluster
};

ClusterTotals totals(const Cluster& cluster);
// One GPU's share of its node's NICs (bytes/s per direction): the NICs'
// bandwidth over the GPUs, capped by the GPU's host link; 0 with no NICs.
double per_gpu_nic_bandwidth(const Cluster& cluster);
// Whether the GPU's host link, not the NICs, sets per_gpu_nic_bandwidth.
bool nic_share_capped_by_host_link(const Cluster& cluster);
double gpu_power_watts(const Cluster& cluster);

}  // namespace cs
