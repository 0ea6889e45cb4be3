#pragma once
// Internal to planners: the cost model behind estimate(), search() and
// predict_timeline(). A Machine and a Model hold the plain numbers read once
// from a Cluster and a Workload; evaluate() turns one candidate into an
// Estimate without allocating, so that the search can time a million of them.
// The search caches the per-layer costs (layer_costs) that do not depend on
// data or pipeline parallelism.

#include <string>
#include <vector>

#include "core/plans.h"
#include "core/problem.h"
#include "planners/collectives.h"
#include "planners/estimate.h"

namespace cs::plan::detail {

// The cluster, as the cost model reads it.
struct Machine {
  bool has_gpu = false;
  double peak[7] = {};  // FLOP/s by Precision
  double gemm_max = 0.8;
  double gemm_max_of[7] = {};  // by Precision, when the GPU sets one (0: gemm_max)
  double gemm_ramp_flops =
      1e9;                  // GEMM work at which half of gemm_max is reached, at the 16-bit rate
  double rate16 = 0;        // the GPU's 16-bit tensor rate (bf16, else fp16, else fp32)
  double memory_rate = 0;   // bytes/s a streaming kernel reaches
  double launch = 4e-6;     // seconds per kernel
  double gemm_memory_overlap = 0;  // GpuEfficiency::gemm_memory_overlap
  double dispatch = 10e-6;  // the least time of any kernel: the host issuing it
  LoopCosts loops;          // per-element costs as the GPU preset has them (ns, GFLOP/s)
  bool cpu_engine = false;  // the CPU engine's device (architecture "cpu")
  double overlap_slowdown = 0;
  double core_share = 1;    // GpuEfficiency::core_share
  double collective_core_share = 1;  // GpuEfficiency::collective_core_share, else core_share
  double shared_wait_in_transfer = 0;  // GpuEfficiency::shared_wait_in_transfer
  double shared_wait_in_tp_transfer = 0;  // ... _tp_transfer, else shared_wait_in_transfer
  double memory_bytes = 0;  // per GPU
  int gpus_per_node = 1;
  int nodes = 1;
  Tier intra;  // per GPU inside a node
  // GPUs wired to each other directly, one link per peer and no switch
  // (AMD Infinity Fabric): the number of links `intra` counts; 0 switched.
  int mesh_links = 0;
  Tier inter;  // per GPU's share of the node's NICs
  bool has_inter = false;
  Tier intra_cold;  // inside a node, buffers out of the caches (Link::cold_*)
  bool has_cold = false;
  double price_per_gpu_hour = 0;
  double power_watts = 0;

  int total_gpus() const { return gpus_per_node * nodes; }
  double peak_of(Precision p) const { return peak[static_cast<int>(p)]; }
  double gemm_max_for(Precision p) const {
    const double f = gemm_max_of[static_cast<int>(p)];
    return f > 0 ? f : gemm_max;
  }
};

// The workload, as the cost model reads it.
struct Model {
  bool transformer = true;
  double layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, seq = 0, vocab = 0;
  bool gated = false, tied = true, bias = true, learned_positions = true, layernorm = true,
       dropout = true;
  double params_total = 0;
  double params_layer = 0;  // one transformer block
  double params_layer_norms =
      0;  // of which replicated over tensor-parallel ranks (norms, row biases)
  double params_embedding = 0;  // token embedding (vocab x hidden)
  double params_positions = 0;  // learned positions (replicated)
  double params_final_norm = 0;
  double params_lm_head = 0;  // untied head; 0 when tied
  int optimizer_words = 2;
  // Generic models
  double generic_forward_flops = 0;     // per sample
  double generic_activation_bytes = 0;  // per sample at 4 bytes per element
  double generic_layers = 0;            // layers with weights; 0 when unknown
  // Training length
  double training_samples = 0;
  double dataset_samples = 0, epochs = 1;
  double training_tokens = 0;
};

Machine machine_of(const Cluster& cluster);
Model model_of(const Workload& workload);

// The knobs of one candidate.
struct Knobs {
  int dp = 1, tp = 1, pp = 1, v = 1;
  bool sp = false;
  int zero = 0;
  int micro_batch = 1;
  int global_batch = 1;
  Recompute recompute = Recompute::none;
  bool flash = true;
  bool async_tp = true;  // ParallelPlan::async_tp_allreduce
  bool vocab_parallel = true;  // ParallelPlan::vocab_parallel
  bool fp32_scores = false;    // ParallelPlan::fp32_attention_scores
  bool overlap_dp = true;      // ParallelPlan::overlap_grad_reduce
  double bucket_bytes = 25.0 * 1024 * 1024;
  Precision compute = Precision::bf16;
  Precision weights = Precision::bf16;
  bool symmetric_quant = false;  // integer weights: zero point 0, [-(2^(b-1)-1), 2^(b-1)-1]
  bool fp8_saved_inputs = true;  // FP8: the GEMMs' inputs kept for backward in 1 byte
  bool fp8_backward = true;      // FP8: the backward GEMMs in FP8 too (Fp8Options::backward_fp8)
  Precision gradients = Precision::bf16;
  Precision optimizer_state = Precision::fp32;
  bool master_weights = true;
  bool fp32_main_grad = false;
  bool inference = false;
  int fp8_amax_history = 1024;
};
Knobs knobs_of(const ParallelPlan& parallel, const PrecisionPlan& precision);

// The collective that reduces the data-parallel gradients under a ZeRO
// stage: an all-reduce (0); a reduce-scatter (1, Megatron's distributed
// optimizer; 3); ZeRO-2 as DeepSpeed's stage 2 and the ClusterScope engines
// run it, each bucket's pieces reduced to the ranks whose shards hold them.
trace::Collective gradient_reduction(int zero_stage);

// Compute seconds by kind of operation (what a trace names them: GEMMs, the
// attention core, layer norms, the MLP activation, elementwise kernels, the
// loss over the logits); they add up to the compute they split.
struct KindTimes {
  double gemm = 0, attention = 0, norm = 0, activation = 0, elementwise = 0, loss = 0;
  double total() const { return gemm + attention + norm + activation + elementwise + loss; }
  KindTimes& operator+=(const KindTimes& o) {
    gemm += o.gemm;
    attention += o.attention;
    norm += o.norm;
    activation += o.activation;
    elementwise += o.elementwise;
    loss += o.loss;
    return *this;
  }
  KindTimes operator*(double f) const {
    return {gemm * f, attention * f, norm * f, activation * f, elementwise * f, loss * f};
  }
};

// One transformer layer, one micro-batch, one GPU. Seconds unless named.
struct LayerCost {
  double forward = 0;  // compute and memory-bound kernels, no communication
  double backward = 0;
  KindTimes forward_kinds, backward_kinds;  // forward and backward split by kind
  KindTimes attention_core_kinds;           // attention_core split by kind
  double attention_core = 0;  // forward s x s part that selective recomputation repeats
  double tp_forward = 0;      // tensor-parallel collectives in forward (all exposed)
  double tp_backward_exposed = 0;
  double tp_backward_total = 0;
  double flops_forward = 0;  // executed
  // Executed by forward and backward: fused causal attention does half the
  // square forward and recomputes the scores backward (2.5x its forward).
  double flops_training = 0;
  double flops_attention_core = 0;
  double model_flops_forward = 0;  // what model FLOPs count (full attention, no recomputation)
};

// Embedding (first stage) and LM head (last stage), one micro-batch, one GPU.
struct EdgeCost {
  double forward = 0, backward = 0;
  KindTimes forward_kinds, backward_kinds;
  double tp_forward = 0, tp_backward = 0;  // backward: exposed
  double tp_backward_total = 0;
  double flops_forward = 0;
  double model_flops_forward = 0;
};

// Costs that depend only on (tp, sp, micro-batch, precision, fused attention).
struct LayerCosts {
  LayerCost layer;
  EdgeCost embedding;
  EdgeCost head;
  double activation_element_bytes = 2;
  // The device's elementwise operation, for work whose size depends on
  // more than these knobs (ZeRO's gradient staging, on dp): per element
  // where the device has a loop cost, else memory-bound on its bytes.
  struct Elementwise {
    double ns = 0, memory_rate = 0, launch = 0, dispatch = 0;
    double seconds(double elements, double bytes) const;
  } elementwise;
};
LayerCosts layer_costs(const Machine& m, const Model& x, const Knobs& k);

// What rule messages name: the GPU's and the model's display names.
struct Names {
  std::string gpu;    // "NVIDIA A100 SXM4 80GB"
  std::string model;  // "GPT-3 175B"
  // Precisions a calibration of the CPU engine did not sweep (core's
  // calibrated_without): the device has the path, its preset no rate.
  std::vector<Precision> calibrated_without;
};

// True when every rule passes. With `problems`, collects every broken rule
// (messages are built only then, so the search checks cheaply without).
bool check_rules(const Machine& m, const Model& x, const Knobs& k, const Names* names,
                 std::vector<Problem>* problems);

// The estimate of a candidate whose rules pass; fills every numeric field of
// `out` (not notes). `costs` must come from layer_costs with the same knobs.
void evaluate(const Machine& m, const Model& x, const Knobs& k, const LayerCosts& costs,
              Estimate& out);

// Only memory (for pruning before timing): the most loaded GPU's total bytes.
double memory_total(const Machine& m, const Model& x, const Knobs& k,
                    double activation_element_bytes);

// Per-micro-batch figures of one pipeline stage, for the timeline.
struct StageCost {
  double forward = 0;   // compute of one micro-batch through all the stage's chunks
  double backward = 0;  // backward compute (recomputation apart)
  double recompute = 0;
  double tp_forward = 0;
  double tp_backward = 0;  // exposed
  double tp_backward_total = 0;
  double p2p = 0;          // one send/receive of activations or gradients
  KindTimes kinds;         // forward + backward + recompute by kind
};
// One model chunk of `layers` transformer layers (with the embedding and/or
// the LM head), one micro-batch: recomputation as the plan asks.
StageCost chunk_cost(const Model& x, const Knobs& k, const LayerCosts& costs, double layers,
                     bool embedding, bool head);
// One send/receive of a micro-batch's activations (or gradients) between stages.
double p2p_seconds(const Machine& m, const Model& x, const Knobs& k, double element_bytes);

struct PipelineCosts {
  StageCost first, middle, last;
  int micro_batches = 0;
  double dp_total = 0, dp_exposed = 0;
  // Of dp_exposed: compute the reduction's thread took from the backward it
  // overlapped (overlap_slowdown), not the reduction's own time.
  double dp_descheduled = 0;
  double zero3_exposed = 0;
  double zero3_gathers = 0;  // ZeRO-3: every parameter gather, before overlap (in dp_total)
  // ZeRO-3, per micro-batch: one pass's gather of every parameter, and the
  // part of it the forward and the backward wait for (zero3_exposed is
  // micro_batches x their sum).
  double zero3_gather = 0, zero3_forward_exposed = 0, zero3_backward_exposed = 0;
  double optimizer = 0;
  double tied_embedding_sync = 0;
  double zero_param_gather = 0;  // ZeRO-1/2 all-gather after the optimizer
};
PipelineCosts pipeline_costs(const Machine& m, const Model& x, const Knobs& k,
                             const LayerCosts& costs);

}  // namespace cs::plan::detail
