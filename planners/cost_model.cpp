#include "planners/cost_model.h"

#include <algorithm>
#include <cmath>

#include "planners/formulas.h"
#include "planners/machine_probe.h"
#include "planners/seed_formulas.h"

namespace cs::plan::detail {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// NCCL keeps NCCL_BUFFSIZE (4 MiB) per channel and direction; 8 channels
// is what it opens on one NVLink or InfiniBand ring of a DGX.
constexpr double kNcclPerCommunicator = 4 * kMiB * 2 * 8;
// CUDA context (with lazy module loading), cuBLAS and cuDNN workspaces,
// the framework's own pools; capped at 5 % of a small device.
constexpr double kFrameworkReserve = 0.75 * kGiB;
// The caching allocator reserves more than it hands out (block rounding,
// streams, fragmentation): about 5 % in steady-state training.
constexpr double kFragmentation = 0.05;
// Fused attention's backward recomputes the scores: 5 matmuls against the
// forward's 2, in FLOPs 2.5 times its forward.
constexpr double kFusedAttentionBackward = 2.5;

bool is_integer(Precision p) {
  return p == Precision::int8 || p == Precision::int4;
}

// Forward FLOPs each weight matrix does per token (2 per multiply-add); the
// same figure is the model FLOPs of one linear layer.
double linear_flops(double tokens, double n, double k) {
  return 2 * tokens * n * k;
}

// The GPU's timing primitives. Every kernel takes at least the host's
// dispatch time (m.dispatch; GpuEfficiency::host_dispatch_us).
struct Kernels {
  const Machine& m;
  double linear_peak;     // GEMMs of the linear layers
  double attention_peak;  // attention matmuls (16-bit when linear layers are FP8/INT8)
  double ramp;            // seconds: the hyperbolic efficiency's half-work point
  double linear_max;      // gemm_max at the linear layers' precision
  double attention_max;   // ... and at the attention matmuls'
  double backward_peak;   // the linear layers' backward GEMMs (16-bit where FP8 runs them so)
  double backward_max;

  double floor(double seconds) const { return std::max(seconds, m.dispatch); }

  // One GEMM (m x k) . (k x n): the tensor-core time at gemm_max of peak
  // (slowed below the ramp work) and the time to stream its operands and
  // result, less the part of the shorter that the kernel hides under the
  // longer (gemm_memory_overlap). The datasheet model adds them, which the
  // published runs' large GEMMs bear out; a Hopper's kernels stream while
  // the tensor cores work (the CUDA engine's K = 768 GEMMs on an H200 ran
  // within 0-23 % of the longer, 30-85 % under the sum), which calibration
  // finds. A CPU's BLAS packs its operands before it computes: the sum, at
  // the operand rate fitted with its GEMMs (calibration.h).
  double gemm(double peak, double efficiency, double rows, double cols, double inner,
              double in_bytes, double out_bytes) const {
    if (rows <= 0 || cols <= 0 || inner <= 0) return 0;
    const double flops = 2 * rows * cols * inner;
    const double compute = flops / (peak * efficiency) + ramp;
    const double memory =
        ((rows * inner + inner * cols) * in_bytes + rows * cols * out_bytes) / m.memory_rate;
    return floor(gemm_time(compute, memory, m.gemm_memory_overlap) + m.launch);
  }
  double linear(double rows, double cols, double inner, double in_bytes, double out_bytes) const {
    return gemm(linear_peak, linear_max, rows, cols, inner, in_bytes, out_bytes);
  }
  // Forward GEMM plus its two backward GEMMs (input gradient, weight gradient).
  double linear_dgrad(double rows, double cols, double inner, double e) const {
    return gemm(backward_peak, backward_max, rows, inner, cols, e, e);
  }
  double linear_wgrad(double rows, double cols, double inner, double e) const {
    // accumulates into an fp32 (or e-byte) weight gradient
    return gemm(backward_peak, backward_max, inner, cols, rows, e, 4);
  }
  // A memory-bound kernel moving `bytes`.
  double stream(double bytes) const {
    return bytes > 0 ? floor(bytes / m.memory_rate + m.launch) : 0;
  }
  // An operation over `elements` at `ns_per_element` on a device that runs it
  // as a loop (LoopCosts), else the memory-bound kernel moving `bytes`.
  // Elements 0 with a loop cost: the device does it inside another operation.
  double loop(double ns_per_element, double elements, double bytes) const {
    if (ns_per_element <= 0) return stream(bytes);
    return elements > 0 ? floor(elements * ns_per_element * 1e-9 + m.launch) : 0;
  }
  // A fused kernel with both FLOPs and traffic (fused attention).
  double fused(double peak, double flops, double bytes) const {
    const double compute = flops / (peak * attention_max) + ramp;
    return floor(std::max(compute, bytes / m.memory_rate) + m.launch);
  }
};

Kernels kernels_of(const Machine& m, const Knobs& k) {
  Kernels kn{m,
             m.peak_of(k.compute),
             m.peak_of(k.compute),
             0,
             m.gemm_max_for(k.compute),
             m.gemm_max_for(k.compute),
             0,
             0};
  if (k.compute == Precision::fp8 || is_integer(k.compute)) {
    kn.attention_peak = m.rate16;
    kn.attention_max =
        m.gemm_max_for(m.peak_of(Precision::bf16) > 0 ? Precision::bf16 : Precision::fp16);
  }
  if (kn.linear_peak <= 0) {
    kn.linear_peak = m.peak_of(Precision::fp32);
    kn.linear_max = m.gemm_max_for(Precision::fp32);
  }
  if (kn.attention_peak <= 0) {
    kn.attention_peak = m.peak_of(Precision::fp32);
    kn.attention_max = m.gemm_max_for(Precision::fp32);
  }
  kn.ramp = m.rate16 > 0 ? m.gemm_ramp_flops / (m.rate16 * m.gemm_max) : 0;
  kn.backward_peak = kn.linear_peak;
  kn.backward_max = kn.linear_max;
  if (k.compute == Precision::fp8 && !k.fp8_backward && kn.attention_peak > 0) {
    kn.backward_peak = kn.attention_peak;  // the 16-bit rate
    kn.backward_max = kn.attention_max;
  }
  return kn;
}

double activation_bytes_of(Precision compute) {
  return (compute == Precision::fp32 || compute == Precision::tf32) ? 4.0 : 2.0;
}

// Where a data-parallel group sits with Megatron's rank order (tensor rank
// fastest, then data, then pipeline: core/rank_order.h).
GroupPlacement dp_placement(const Machine& m, const Knobs& k) {
  const int per_node = std::clamp(m.gpus_per_node / std::max(k.tp, 1), 1, k.dp);
  return {per_node, (k.dp + per_node - 1) / per_node};
}

// Pipeline neighbours are tp x dp ranks apart: on the network as soon as
// the pipeline leaves one node.
bool pipeline_crosses_nodes(const Machine& m, const Knobs& k) {
  return static_cast<long long>(k.tp) * k.dp * k.pp > m.gpus_per_node;
}

// The intra-node tier a GPU has towards `peers` others of its node. On a
// mesh (an 8-GPU MI300X board: 7 links of 64 GB/s each way, no switch) it
// reaches them over `peers` of its links, where the link's bandwidth counts
// them all: tp 2 gets one link's 64 GB/s, not the board's 448 (RCCL's
// collectives use the direct links; AMD ROCm blog, "Understanding RCCL
// Bandwidth and xGMI Performance on MI300X").
Tier intra_towards(const Machine& m, const Tier& intra, int peers) {
  Tier t = intra;
  if (m.mesh_links > 0 && peers < m.mesh_links)
    t.bandwidth *= static_cast<double>(std::max(peers, 1)) / m.mesh_links;
  return t;
}

double collective(const Machine& m, trace::Collective op, double bytes, const GroupPlacement& g) {
  const Tier intra = intra_towards(m, m.intra, g.per_node - 1);
  return group_seconds(op, bytes, g, intra, m.has_inter ? m.inter : intra);
}

// The tensor-parallel group: tp consecutive ranks, inside one node when the
// rules hold; spread over nodes otherwise (estimated, and refused by the rules).
GroupPlacement tp_placement(const Machine& m, int tp) {
  if (tp <= m.gpus_per_node) return {tp, 1};
  return {m.gpus_per_node, (tp + m.gpus_per_node - 1) / m.gpus_per_node};
}

struct StageParams {
  double layers = 0;     // transformer parameters on this GPU
  double embedding = 0;  // embedding / LM head parameters on this GPU
  double total() const { return layers + embedding; }
};

// The vocabulary rows each tensor rank holds of the embedding and the head.
// Split by vocabulary, Megatron pads the vocabulary to a multiple of 128 x tp
// (--make-vocab-size-divisible-by 128): GPT-3's 50 257 rows are 51 200 at
// TP 8, 6400 a rank (50 257 / 8 gave 6282.1). Kept whole on every rank, as
// the ClusterScope engines do, it is not padded.
double vocab_rows_per_rank(const Model& x, const Knobs& k) {
  if (!k.vocab_parallel) return x.vocab;
  const double multiple = 128.0 * k.tp;
  return std::ceil(x.vocab / multiple) * multiple / k.tp;
}

StageParams stage_params(const Model& x, const Knobs& k, bool first, bool last) {
  StageParams s;
  if (!x.transformer) {
    s.layers = x.params_total;
    return s;
  }
  const double t = k.tp;
  const double per_layer = (x.params_layer - x.params_layer_norms) / t + x.params_layer_norms;
  s.layers = per_layer * (x.layers / k.pp);
  const double vocab_table = vocab_rows_per_rank(x, k) * x.hidden;  // the embedding's or head's
  if (first) s.embedding += vocab_table + x.params_positions;
  if (last) {
    s.embedding += x.params_final_norm;
    if (x.params_lm_head > 0) {
      s.embedding += vocab_table;
    } else if (k.pp > 1) {
      s.embedding += vocab_table;  // the tied head keeps its own copy on the last stage
    }
  }
  return s;
}

// The most parameters ZeRO-3 gathers at once on this GPU: a group is the
// embeddings, a layer, or the final norm with the LM head, as the engines
// (and DeepSpeed's stage 3, module by module) gather them. A generic model's
// tenth.
double largest_parameter_group(const Model& x, const Knobs& k, bool first, bool last) {
  if (!x.transformer) return 0.1 * x.params_total;
  const double layer = (x.params_layer - x.params_layer_norms) / k.tp + x.params_layer_norms;
  const double vocab_table = vocab_rows_per_rank(x, k) * x.hidden;
  double largest = layer;
  if (first) largest = std::max(largest, vocab_table + x.params_positions);
  if (last) {
    const bool own_head = x.params_lm_head > 0 || k.pp > 1;
    largest = std::max(largest, x.params_final_norm + (own_head ? vocab_table : 0.0));
  }
  return largest;
}

// The groups of parameters ZeRO-3 gathers one at a time on a stage.
double parameter_groups(const Model& x, const Knobs& k, bool first, bool last) {
  if (!x.transformer) return 1;
  return std::max(x.layers / k.pp, 1.0) + (first ? 1 : 0) + (last ? 1 : 0);
}

struct StateBytes {
  double weights = 0, gradients = 0, optimizer = 0;  // per parameter, after ZeRO sharding
};

StateBytes state_bytes(const Model& x, const Knobs& k) {
  StateBytes b;
  const double dp = k.dp;
  b.weights = bytes_per_element(k.weights);
  if (!k.inference) {
    b.gradients = k.fp32_main_grad ? 4.0 : bytes_per_element(k.gradients);
    b.optimizer =
        (k.master_weights ? 4.0 : 0.0) + x.optimizer_words * bytes_per_element(k.optimizer_state);
  }
  if (k.zero >= 1) b.optimizer /= dp;
  if (k.zero >= 2) b.gradients /= dp;
  if (k.zero >= 3) b.weights /= dp;
  return b;
}

// Bytes one optimizer step streams per parameter, pass by pass as
// Megatron-LM runs them: the gradient norm (read gradients), the update
// (read gradients, master weights and moments; write master weights and
// moments), the copy of the master weights into the working weights, and
// zeroing the gradients for the next step.
double optimizer_bytes_per_param(const Model& x, const Knobs& k) {
  const double g = k.fp32_main_grad ? 4.0 : bytes_per_element(k.gradients);
  const double w = bytes_per_element(k.weights);
  const double moments = 2 * x.optimizer_words * bytes_per_element(k.optimizer_state);
  const double weights = k.master_weights ? 2 * 4.0 + 4.0 + w : 2 * w;
  return 3 * g + weights + moments;
}

MemoryBreakdown stage_memory(const Machine& m, const Model& x, const Knobs& k, double e, bool first,
                             bool last) {
  MemoryBreakdown mem;
  const StageParams params = stage_params(x, k, first, last);
  const StateBytes per = state_bytes(x, k);
  const double t = k.tp;
  const int micro_batches = k.global_batch / std::max(k.dp * k.micro_batch, 1);

  mem.weights = params.total() * per.weights;
  mem.gradients = params.total() * per.gradients;
  mem.optimizer_state = params.total() * per.optimizer;
  mem.embedding_model_state = params.embedding * (per.weights + per.gradients + per.optimizer);
  if (k.compute == Precision::fp8 && x.transformer) {
    // Transformer Engine keeps an FP8 copy of each weight and its transpose
    // (weights stored in FP8 are their own copy: the transpose alone), and
    // per GEMM an amax history of its input, weight and gradient.
    const double fp8_copies = k.weights == Precision::fp8 ? 1.0 : 2.0;
    mem.weights += params.layers * fp8_copies / (k.zero >= 3 ? k.dp : 1);
    mem.weights += (x.layers / k.pp) * 4 * 3 * k.fp8_amax_history * 4.0;
  }
  if (is_integer(k.weights) && x.transformer) {
    mem.weights += params.total() * 2.0 / x.hidden;  // one fp16 scale per output channel
  }

  const double tokens = static_cast<double>(k.micro_batch) * x.seq;
  const double sp_share = k.sp ? 1.0 / t : 1.0;
  if (x.transformer) {
    // Inference runs in eval mode: no dropout.
    const LayerShape shape{
        x.seq,   static_cast<double>(k.micro_batch), x.hidden, x.heads, x.kv_heads, x.ffn,
        x.gated, x.dropout && !k.inference};
    const double logits = 4 * tokens * vocab_rows_per_rank(x, k);  // fp32
    if (k.inference) {
      // Forward only: one layer's tensors live at a time.
      mem.activation_workspace =
          activation_bytes_per_layer(shape, k.tp, k.sp, Recompute::none, k.flash, e);
      if (last) mem.activation_workspace += logits;
    } else {
      // FP8 training keeps the GEMMs' inputs as their FP8 copies (Transformer Engine).
      const double gemm_inputs = k.compute == Precision::fp8 && k.fp8_saved_inputs ? 1.0 : e;
      const double per_layer =
          activation_bytes_per_layer(shape, k.tp, k.sp, k.recompute, k.flash, e, gemm_inputs);
      const int rank = first ? 0 : k.pp - 1;
      const int chunks = chunks_in_flight(k.pp, rank, k.v, micro_batches);
      mem.activations = chunks * (x.layers / (k.pp * k.v)) * per_layer;
      if (first) {
        const int in_flight = (chunks + k.v - 1) / k.v;
        if (x.dropout)
          mem.embedding_activations += in_flight * tokens * x.hidden * sp_share;  // its mask
      }
      if (last) {
        mem.embedding_activations +=
            2 * e * tokens * x.hidden * sp_share + logits;  // norm, head input
      }
      mem.activations += mem.embedding_activations;
      // Backward's gradients of one layer's activations, live while it runs:
      // of its input, norm and output (hidden wide, split only by sequence
      // parallelism), of q, k, v (grouped-query: k and v kv_heads wide) and
      // the attention's output, and of the MLP's (two, three gated), those
      // split by tensor parallelism.
      const double qkv_out = 2 * x.hidden + 2 * x.hidden * (x.kv_heads / x.heads);
      const double mlp = (x.gated ? 3 : 2) * x.ffn;
      double layer_gradients = e * tokens * (3 * x.hidden * sp_share + (qkv_out + mlp) / t);
      // Unfused attention's backward: the gradients of one layer's
      // probabilities and scores, score-sized (in fp32 where the scores are).
      if (!k.flash) {
        const double score_bytes = k.fp32_scores ? 4 : e;
        layer_gradients += 2 * score_bytes * x.heads * x.seq * x.seq * k.micro_batch / t;
      }
      // The last stage's logits' gradient is freed once the head's backward
      // has used it, before the layers' begins: the larger of the two.
      mem.activation_workspace += last ? std::max(logits, layer_gradients) : layer_gradients;
      if (k.recompute == Recompute::full) {
        // The recomputed layer keeps what a stored one would, FP8 copies too.
        mem.activation_workspace +=
            activation_bytes_per_layer(shape, k.tp, k.sp, Recompute::none, k.flash, e, gemm_inputs);
      } else if (k.recompute == Recompute::selective && !k.flash) {
        mem.activation_workspace += stored_scores_bytes(shape, k.tp, e);
      }
    }
  } else {
    const double per_sample = x.generic_activation_bytes * e / 4.0;
    if (k.inference) {
      mem.activation_workspace = per_sample * k.micro_batch;
    } else {
      mem.activations = per_sample * k.micro_batch;
    }
  }

  int communicators = 0;
  if (k.tp > 1) ++communicators;
  if (k.dp > 1) ++communicators;
  if (k.pp > 1) ++communicators;
  mem.nccl_channels = communicators * kNcclPerCommunicator;
  // Up to ZeRO-1, no data-parallel buckets of their own: Megatron's (and
  // the engines') are views of the contiguous gradient buffer, counted in
  // the gradients. ZeRO-2 keeps only a shard of the gradients, and stages
  // the whole ones in two buckets (DeepSpeed's reduce buckets), of at most
  // the whole gradients each (as the engines size them).
  mem.communication_buffers = mem.nccl_channels;
  if (k.dp > 1 && k.zero == 2 && !k.inference) {
    const double whole_gradients = params.total() * per.gradients * k.dp;
    mem.communication_buffers += 2 * std::min(k.bucket_bytes, whole_gradients);
  }
  if (k.pp > 1) mem.communication_buffers += 2 * 2 * e * tokens * x.hidden;
  if (k.zero >= 3 && k.dp > 1 && !k.inference) {
    // Two buffers of the largest group take turns (one gathered while the
    // other is computed), for the weights and for the gradients on their
    // way to their shards.
    const double largest = largest_parameter_group(x, k, first, last);
    const double grad_element = k.fp32_main_grad ? 4.0 : bytes_per_element(k.gradients);
    mem.communication_buffers += 2 * largest * (bytes_per_element(k.weights) + grad_element);
  }

  mem.framework_reserve = std::min(kFrameworkReserve, 0.05 * m.memory_bytes);
  mem.fragmentation = kFragmentation * (mem.total() - mem.framework_reserve);
  return mem;
}

}  // namespace

Machine machine_of(const Cluster& c) {
  Machine m;
  if (c.gpu && c.gpus_per_node > 0) {
    m.has_gpu = true;
    const GpuSpec& g = *c.gpu;
    for (Precision p : kAllPrecisions)
      m.peak[static_cast<int>(p)] = g.peak.of(p);
    m.gemm_max = g.efficiency.gemm_max;
    for (Precision p : kAllPrecisions)
      m.gemm_max_of[static_cast<int>(p)] = g.efficiency.gemm_max_by_precision.of(p);
    m.gemm_ramp_flops = g.efficiency.gemm_half_gflop * 1e9;
    m.gemm_memory_overlap = g.efficiency.gemm_memory_overlap;
    m.rate16 = g.peak.bf16 > 0 ? g.peak.bf16 : (g.peak.fp16 > 0 ? g.peak.fp16 : g.peak.fp32);
    m.memory_rate = g.memory_bandwidth * g.efficiency.memory_max;
    m.launch = g.efficiency.kernel_launch_us * 1e-6;
    m.dispatch = g.efficiency.host_dispatch_us * 1e-6;
    m.loops = g.efficiency.loops;
    m.cpu_engine = g.architecture == "cpu";
    m.overlap_slowdown = g.efficiency.overlap_slowdown;
    m.core_share = g.efficiency.core_share;
    m.collective_core_share = g.efficiency.collective_core_share > 0
                                  ? g.efficiency.collective_core_share
                                  : g.efficiency.core_share;
    m.shared_wait_in_transfer = g.efficiency.shared_wait_in_transfer;
    m.shared_wait_in_tp_transfer = g.efficiency.shared_wait_in_tp_transfer > 0
                                       ? g.efficiency.shared_wait_in_tp_transfer
                                       : g.efficiency.shared_wait_in_transfer;
    m.memory_bytes = g.memory_bytes;
  }
  m.gpus_per_node = std::max(c.gpus_per_node, 1);
  m.nodes = std::max(c.nodes, 1);
  m.intra = tier_of(c.intra_node, c.intra_node.bandwidth);
  if (c.intra_node.kind == LinkKind::infinity_fabric) m.mesh_links = m.gpus_per_node - 1;
  if (c.inter_node) {
    m.has_inter = true;
    m.inter = tier_of(*c.inter_node, per_gpu_nic_bandwidth(c));
  }
  if (m.intra.bandwidth <= 0) m.intra = m.has_inter ? m.inter : Tier{1e12, 1, 0};
  if (c.intra_node.cold_bandwidth > 0) {
    m.has_cold = true;
    m.intra_cold = Tier{c.intra_node.cold_bandwidth, c.intra_node.efficiency,
                        c.intra_node.cold_latency, c.intra_node.cold_by_size};
  }
  m.price_per_gpu_hour = c.price_per_gpu_hour;
  m.power_watts = gpu_power_watts(c);
  return m;
}

Model model_of(const Workload& w) {
  Model x;
  x.transformer = w.kind == WorkloadKind::transformer;
  x.optimizer_words = optimizer_state_words(w.optimizer);
  x.training_tokens = w.training_tokens;
  x.training_samples = training_samples(w);
  x.dataset_samples = w.dataset_samples;
  x.epochs = w.epochs;
  if (x.transformer) {
    const TransformerShape& s = w.transformer;
    x.layers = s.layers;
    x.hidden = s.hidden;
    x.heads = s.heads;
    x.kv_heads = s.kv_heads > 0 ? s.kv_heads : s.heads;
    x.head_dim = s.heads > 0 ? static_cast<double>(s.hidden) / s.heads : 0;
    x.ffn = s.ffn_hidden > 0 ? s.ffn_hidden : 4.0 * s.hidden;
    x.seq = s.seq_len;
    x.vocab = s.vocab;
    x.gated = s.gated_mlp;
    x.tied = s.tied_embeddings;
    x.bias = s.bias;
    x.dropout = s.dropout;
    x.learned_positions = s.positions == PositionEmbedding::learned;
    x.layernorm = s.norm == Norm::layernorm;
    const ParameterCount c = parameter_count(s);
    x.params_total = c.total;
    x.params_layer = c.per_layer;
    const double norm = x.layernorm ? 2 * x.hidden : x.hidden;
    x.params_layer_norms = 2 * norm + (x.bias ? 2 * x.hidden : 0);  // norms and row-parallel biases
    x.params_embedding = static_cast<double>(s.vocab) * s.hidden;
    x.params_positions = x.learned_positions ? static_cast<double>(s.seq_len) * s.hidden : 0;
    x.params_final_norm = c.final_norm;
    x.params_lm_head = c.lm_head;
  } else {
    x.params_total = w.generic.parameters;
    x.generic_forward_flops = w.generic.forward_flops_per_sample;
    x.generic_activation_bytes = w.generic.activation_bytes_per_sample;
    x.generic_layers = w.generic.weight_layers;
  }
  return x;
}

trace::Collective gradient_reduction(int zero_stage) {
  if (zero_stage == 0) return trace::Collective::all_reduce;
  return zero_stage == 2 ? trace::Collective::reduce : trace::Collective::reduce_scatter;
}

Knobs knobs_of(const ParallelPlan& p, const PrecisionPlan& q) {
  Knobs k;
  k.dp = p.dp;
  k.tp = p.tp;
  k.pp = p.pp;
  k.v = p.schedule == PipelineSchedule::interleaved ? std::max(p.virtual_stages, 1) : 1;
  k.sp = p.sequence_parallel;
  k.zero = p.zero_stage;
  k.micro_batch = p.micro_batch;
  k.global_batch = p.global_batch;
  k.recompute = p.recompute;
  k.flash = p.flash_attention;
  k.async_tp = p.async_tp_allreduce;
  k.vocab_parallel = p.vocab_parallel;
  k.fp32_scores = p.fp32_attention_scores;
  k.overlap_dp = p.overlap_grad_reduce;
  k.bucket_bytes = p.bucket_mib * kMiB;
  k.compute = q.compute;
  k.weights = q.weights;
  k.symmetric_quant = q.quant.symmetric;
  k.fp8_saved_inputs = q.fp8.saved_inputs_fp8;
  k.fp8_backward = q.fp8.backward_fp8;
  k.gradients = q.gradients;
  k.optimizer_state = q.optimizer_state;
  k.master_weights = q.master_weights;
  k.fp32_main_grad = q.fp32_main_grad;
  k.inference = q.inference;
  k.fp8_amax_history = q.fp8.amax_history;
  return k;
}

LayerCosts layer_costs(const Machine& m, const Model& x, const Knobs& k) {
  LayerCosts out;
  const Kernels kn = kernels_of(m, k);
  const double e = activation_bytes_of(k.compute);
  out.activation_element_bytes = e;
  out.elementwise = {m.loops.elementwise_ns, m.memory_rate, m.launch, m.dispatch};

  if (!x.transformer) {
    // Generic model: its FLOPs at GEMM efficiency, and the activations it
    // keeps streamed once forward (write, read) and backward (read saved and
    // incoming gradient, write gradient). Each layer with weights runs about
    // three kernels forward (convolution, normalisation, activation) and five
    // backward (input and weight gradients, normalisation, activation,
    // residual), none shorter than the host takes to issue it.
    const double b = k.micro_batch;
    const double flops = x.generic_forward_flops * b;
    const double bytes = x.generic_activation_bytes * e / 4.0 * b;
    LayerCost& l = out.layer;
    l.forward = flops / (kn.linear_peak * kn.linear_max) + kn.ramp + bytes * 2 / m.memory_rate;
    l.backward =
        2 * flops / (kn.linear_peak * kn.linear_max) + 2 * kn.ramp + bytes * 3 / m.memory_rate;
    l.forward =
        std::max(l.forward + 3 * x.generic_layers * m.launch, 3 * x.generic_layers * m.dispatch);
    l.backward =
        std::max(l.backward + 5 * x.generic_layers * m.launch, 5 * x.generic_layers * m.dispatch);
    l.forward_kinds.gemm = l.forward;
    l.backward_kinds.gemm = l.backward;
    l.flops_forward = flops;
    l.flops_training = 3 * flops;
    l.model_flops_forward = flops;
    return out;
  }

  const double t = k.tp;
  const double tokens = static_cast<double>(k.micro_batch) * x.seq;
  const double local_tokens = k.sp ? tokens / t : tokens;  // outside the tensor-parallel region
  const double h = x.hidden;
  const double d = x.head_dim;
  const double heads = x.heads / t;
  const double kv = x.kv_heads / t;
  const double qkv_cols = (heads + 2 * kv) * d;
  const double ffn = x.ffn / t;
  const double up_cols = (x.gated ? 2 : 1) * ffn;
  // FP8 linear layers read FP8 inputs; everything else moves e-byte elements.
  const double in_e = (k.compute == Precision::fp8) ? 1.0 : e;
  // ... and of the backward GEMMs, which an FP8 plan may run in 16 bits.
  const double grad_e = (k.compute == Precision::fp8 && k.fp8_backward) ? 1.0 : e;
  const LoopCosts& lc = m.loops;
  // A device calibrated on a ClusterScope engine (loop costs) is timed as
  // the engines run a step, with their bookkeeping operations; a datasheet
  // GPU as Megatron-LM runs it.
  const bool engine = lc.any();

  // --- forward, one layer. Bytes of the memory-bound kernels first: the
  // backward kernels read about twice what the forward ones did. A device
  // with loop costs (the CPU engine) times each kind per element instead:
  // no dropout, the residual gradient accumulated inside the norm backward.
  const double norm_bytes = 2 * local_tokens * h * e;
  const double dropout_residual_bytes = local_tokens * h * (3 * e + (x.dropout ? 1 : 0));
  const double activation_bytes = (x.gated ? 3 : 2) * tokens * ffn * e;
  const double activation_elements = tokens * ffn;
  // FP8: the projection and down-projection inputs are cast by their own
  // kernels (the other two are cast inside the fused layer norm).
  const bool fp8 = k.compute == Precision::fp8;
  const double cast_bytes[2] = {fp8 ? 3 * tokens * heads * d : 0, fp8 ? 3 * tokens * ffn : 0};
  const double norm = kn.loop(lc.norm_ns, local_tokens * h, norm_bytes);
  const double dropout_residual =
      kn.loop(lc.elementwise_ns, local_tokens * h, dropout_residual_bytes);
  // GEMM biases. The CPU engine adds each inside its GEMM operation, one
  // pass over the output, forward and backward. A GPU calibrated on the CUDA
  // engine (loop costs of its own kernels) adds it in a kernel of its own in
  // the GEMM's range, reading and writing the output, and sums its gradient
  // in another that reads the output's gradient once, counted elementwise
  // as its trace counts it. A datasheet GPU fuses both into the GEMMs
  // (Megatron's epilogues): no time of their own.
  double bias = 0, bias_gradient = 0;
  if (x.bias && lc.elementwise_ns > 0) {
    const double outputs = tokens * (qkv_cols + h + up_cols + h);
    if (m.cpu_engine || !m.has_gpu) {
      bias = outputs * lc.elementwise_ns * 1e-9;
    } else {
      for (const double columns : {qkv_cols, h, up_cols, h}) {
        bias += kn.stream(2 * tokens * columns * e);
        bias_gradient += kn.stream(tokens * columns * e);
      }
    }
  }
  const double qkv = kn.linear(tokens, qkv_cols, h, in_e, e);
  const double proj = kn.linear(tokens, h, heads * d, in_e, e);
  const double up = kn.linear(tokens, up_cols, h, in_e, e);
  const double down = kn.linear(tokens, h, ffn, in_e, e);
  const double activation = kn.loop(lc.activation_ns, activation_elements, activation_bytes);
  const double casts = kn.stream(cast_bytes[0]) + kn.stream(cast_bytes[1]);

  const double scores = k.micro_batch * heads * x.seq * x.seq;  // s x s elements, this rank's heads
  const double attention_flops = 4 * tokens * x.seq * heads * d;  // QK^T and AV, full square
  double attention_forward = 0;
  double attention_backward = 0;
  double attention_executed = attention_flops;
  if (k.flash) {
    // One fused kernel; with causal masking it skips the upper triangle.
    attention_executed = attention_flops / 2;
    const double io = tokens * (qkv_cols + heads * d) * e;
    attention_forward = kn.fused(kn.attention_peak, attention_executed, io);
    attention_backward =
        kn.fused(kn.attention_peak, kFusedAttentionBackward * attention_executed, 2 * io);
  } else if (lc.attention_gflops > 0) {
    // Loops over the causal triangle (scores, softmax and the weighted sum
    // in one pass), at the device's measured rate on the full-square FLOPs.
    // Measured in another precision than the run's, the attention's matmuls
    // (QK^T and AV, the full square: the CUDA engine's batched GEMMs) move
    // from that precision's GEMM rate to the run's: the H200's fp32 run
    // took its attention 32.7 ms a step against bf16's 13.2 (its batched
    // fp32 GEMMs without tensor cores), where the bf16 rate alone said 13.5.
    double per_flop = 0;
    if (lc.attention_precision) {
      const double measured =
          m.peak_of(*lc.attention_precision) * m.gemm_max_for(*lc.attention_precision);
      const double now = kn.attention_peak * kn.attention_max;
      if (measured > 0 && now > 0) per_flop = 1 / now - 1 / measured;
    }
    auto at = [&](double flops, double gflops) {
      return kn.floor(std::max(0.0, flops / (gflops * 1e9) + flops * per_flop) + m.launch);
    };
    attention_forward = at(attention_flops, lc.attention_gflops);
    attention_backward =
        at(2 * attention_flops,
           lc.attention_backward_gflops > 0 ? lc.attention_backward_gflops : lc.attention_gflops);
  } else {
    // QK^T and AV as batched GEMMs over micro-batch x heads (K = head
    // dimension): the scores go out to memory and come back, timed like
    // every GEMM (compute plus traffic).
    // The score GEMMs write `se`-byte scores (the engines: fp32), which the
    // softmax reads; the probabilities it writes are e bytes.
    const double se = k.fp32_scores ? 4 : e;
    const double matmul =
        2 * tokens * x.seq * heads * d / (kn.attention_peak * kn.attention_max) + kn.ramp;
    const double qk =
        kn.floor(matmul + (tokens * (heads + kv) * d * e + scores * se) / m.memory_rate + m.launch);
    const double av =
        kn.floor(matmul + (scores * e + tokens * (kv + heads) * d * e) / m.memory_rate + m.launch);
    // The engines' causal softmax reads the scores below the diagonal only
    // and writes every probability (zeros above it); Megatron's fused
    // scale-mask-softmax reads them all.
    const double softmax = kn.stream(scores * ((k.fp32_scores ? se / 2 : se) + e));
    const double dropout = x.dropout ? kn.stream(scores * (2 * e + 1)) : 0;
    // The engines merge the heads' output back by a copy (forward) and join
    // Q, K and V's gradients into one tensor (backward). (Their copies
    // splitting Q, K and V into heads run before the attention operation
    // and are timed with none.)
    const double head_bytes = tokens * (heads + 2 * kv) * d * e;
    const double head_copies = k.fp32_scores ? kn.stream(2 * tokens * heads * d * e) : 0;
    const double head_copies_back = k.fp32_scores ? kn.stream(2 * head_bytes) : 0;
    attention_forward = qk + softmax + dropout + av + head_copies;
    // Two matmuls per forward matmul: the scores' gradient written as the
    // scores were (`se` bytes), the three others reading e-byte scores;
    // softmax and dropout backward read output and gradient and write a
    // gradient. The engines' causal softmax backward reads the probabilities
    // and their `se`-byte gradient below the diagonal and writes the e-byte
    // gradient the next GEMMs read (no float copy to convert).
    const double softmax_back =
        k.fp32_scores ? kn.stream(scores * ((se + e) / 2 + e)) : kn.stream(scores * (2 * se + e));
    attention_backward = qk + 3 * av + softmax_back + head_copies_back +
                         (x.dropout ? kn.stream(scores * (2 * e + 1)) : 0);
  }

  LayerCost& l = out.layer;
  KindTimes& fk = l.forward_kinds;
  fk.norm = 2 * norm;
  fk.gemm = qkv + proj + up + down + bias;
  fk.attention = attention_forward;
  fk.elementwise = 2 * dropout_residual + casts;
  fk.activation = activation;
  l.forward = fk.total();
  // Selective recomputation re-runs core attention in backward, fused or
  // not: Megatron-core checkpoints the core-attention module either way
  // (with fused attention it saves little memory, but the time is spent).
  l.attention_core = attention_forward;
  l.attention_core_kinds.attention = l.attention_core;

  // --- backward: input-gradient and weight-gradient GEMMs, elementwise
  // kernels reading twice what they read forward.
  const double qkv_dgrad = kn.linear_dgrad(tokens, qkv_cols, h, grad_e);
  const double qkv_wgrad = kn.linear_wgrad(tokens, qkv_cols, h, grad_e);
  const double up_dgrad = kn.linear_dgrad(tokens, up_cols, h, grad_e);
  const double up_wgrad = kn.linear_wgrad(tokens, up_cols, h, grad_e);
  const double proj_back =
      kn.linear_dgrad(tokens, h, heads * d, grad_e) + kn.linear_wgrad(tokens, h, heads * d, grad_e);
  const double down_back =
      kn.linear_dgrad(tokens, h, ffn, grad_e) + kn.linear_wgrad(tokens, h, ffn, grad_e);
  KindTimes& bk = l.backward_kinds;
  bk.gemm = qkv_dgrad + qkv_wgrad + up_dgrad + up_wgrad + proj_back + down_back +
            (bias_gradient > 0 ? 0 : bias);
  bk.attention = attention_backward;
  bk.norm = 2 * kn.loop(lc.norm_backward_ns, local_tokens * h, 2 * norm_bytes);
  bk.elementwise = 2 * kn.loop(lc.elementwise_ns, 0, 2 * dropout_residual_bytes) +
                   kn.stream(2 * cast_bytes[0]) + kn.stream(2 * cast_bytes[1]) + bias_gradient;
  bk.activation = kn.loop(lc.activation_backward_ns, activation_elements, 2 * activation_bytes);
  // The engines under sequence parallelism: each norm's weight and bias
  // gradients, of this rank's tokens only, are summed over the group at
  // once in backward (one small blocking all-reduce per norm, latency
  // bound), in a zeroed buffer of their own, then added to the gradients.
  const bool sp_norm_sums = k.tp > 1 && k.sp && engine;
  const double norm_params = x.layernorm ? 2 * h : h;  // weight (and bias), fp32 gradients
  const double sp_norm_reduce = sp_norm_sums ? collective(m, trace::Collective::all_reduce,
                                                          4 * norm_params, tp_placement(m, k.tp))
                                             : 0.0;
  const double sp_norm_elementwise =
      sp_norm_sums ? kn.loop(lc.elementwise_ns, norm_params, 4 * norm_params) +
                         (x.layernorm ? 2 : 1) * kn.loop(lc.elementwise_ns, h, 12 * h)
                   : 0.0;
  bk.elementwise += 2 * sp_norm_elementwise;
  l.backward = bk.total();

  // --- tensor-parallel collectives on b x s x h activations
  if (k.tp > 1) {
    const GroupPlacement g = tp_placement(m, k.tp);
    const double bytes = tokens * h * e;
    if (k.sp) {
      const double ag = collective(m, trace::Collective::all_gather, bytes, g);
      const double rs = collective(m, trace::Collective::reduce_scatter, bytes, g);
      // Forward: all-gather before QKV and MLP-up, reduce-scatter after the
      // projection and MLP-down. Backward: the all-gathers that undo the
      // reduce-scatters are exposed; the reduce-scatter of the input
      // gradient hides behind the weight-gradient GEMM, and the re-gather
      // of the saved sharded input behind the input-gradient GEMM.
      l.tp_forward = 2 * (ag + rs);
      l.tp_backward_total = 2 * (2 * ag + rs);
      l.tp_backward_exposed = 2 * ag + std::max(0.0, ag - qkv_dgrad) +
                              std::max(0.0, rs - qkv_wgrad) + std::max(0.0, ag - up_dgrad) +
                              std::max(0.0, rs - up_wgrad);
    } else {
      const double ar = collective(m, trace::Collective::all_reduce, bytes, g);
      // Forward: all-reduce after the projection and MLP-down. Backward: the
      // all-reduce of the input gradient before QKV and MLP-up runs while the
      // weight gradient is computed.
      l.tp_forward = 2 * ar;
      l.tp_backward_total = 2 * ar;
      l.tp_backward_exposed = std::max(0.0, ar - qkv_wgrad) + std::max(0.0, ar - up_wgrad);
    }
    // Blocking all-reduces hide behind nothing.
    if (!k.async_tp) l.tp_backward_exposed = l.tp_backward_total;
    l.tp_backward_total += 2 * sp_norm_reduce;  // the norms' sums, above
    l.tp_backward_exposed += 2 * sp_norm_reduce;
  }

  const double linear_fwd = linear_flops(tokens, qkv_cols, h) + linear_flops(tokens, h, heads * d) +
                            linear_flops(tokens, up_cols, h) + linear_flops(tokens, h, ffn);
  l.flops_forward = linear_fwd + attention_executed;
  l.flops_training = 3 * linear_fwd + (k.flash ? attention_executed * (1 + kFusedAttentionBackward)
                                               : 3 * attention_flops);
  l.flops_attention_core = attention_executed;
  l.model_flops_forward = linear_fwd + attention_flops;

  // --- embedding: vocabulary-parallel lookup, combined over the tensor group
  EdgeCost& emb = out.embedding;
  emb.forward_kinds.elementwise = kn.loop(lc.elementwise_ns, tokens * h, 2 * tokens * h * e) +
                                  kn.loop(lc.elementwise_ns, 0, local_tokens * h * (3 * e + 1));
  emb.backward_kinds.elementwise =
      kn.loop(lc.elementwise_ns, tokens * h, tokens * h * (e + 8)) +
      kn.loop(lc.elementwise_ns, 0, 2 * local_tokens * h * (2 * e + 1));
  emb.forward = emb.forward_kinds.total();
  emb.backward = emb.backward_kinds.total();
  if (k.tp > 1 && k.vocab_parallel) {
    const GroupPlacement g = tp_placement(m, k.tp);
    const double bytes = tokens * h * e;
    emb.tp_forward = collective(
        m, k.sp ? trace::Collective::reduce_scatter : trace::Collective::all_reduce, bytes, g);
    emb.tp_backward = k.sp ? collective(m, trace::Collective::all_gather, bytes, g) : 0;
    emb.tp_backward_total = emb.tp_backward;
  } else if (k.tp > 1 && k.sp) {
    // A whole embedding: every rank looks up every token and keeps its
    // shard; its gradient needs every token's (gathered), the same on
    // every rank, as the engines compute it.
    emb.tp_backward =
        collective(m, trace::Collective::all_gather, tokens * h * e, tp_placement(m, k.tp));
    emb.tp_backward_total = emb.tp_backward;
  }

  // --- LM head and vocabulary-parallel cross-entropy (fp32 logits); a loop
  // device computes the loss and its gradient in one forward pass.
  EdgeCost& head = out.head;
  // Each rank's share of the vocabulary; the whole of it where every rank
  // keeps the head whole (and its input gradient, the same on every rank,
  // needs no all-reduce).
  const double vocab = vocab_rows_per_rank(x, k);
  const double head_gemm = kn.linear(tokens, vocab, h, in_e, e);
  const double head_wgrad = kn.linear_wgrad(tokens, vocab, h, grad_e);
  head.forward_kinds.norm = kn.loop(lc.norm_ns, local_tokens * h, 2 * local_tokens * h * e);
  head.forward_kinds.gemm = head_gemm;
  head.forward_kinds.loss = kn.loop(lc.softmax_ns, tokens * vocab, tokens * vocab * (e + 12));
  head.backward_kinds.loss = kn.loop(lc.softmax_ns, 0, tokens * vocab * (8 + e));
  head.backward_kinds.gemm = kn.linear_dgrad(tokens, vocab, h, grad_e) + head_wgrad;
  head.backward_kinds.norm =
      kn.loop(lc.norm_backward_ns, local_tokens * h, 4 * local_tokens * h * e);
  if (engine) {
    // The engines scale the logits' gradient by the loss's weight in an
    // operation of its own (read and write, fp32), and zero the residual
    // stream's gradient the final norm's backward accumulates into.
    head.backward_kinds.elementwise =
        kn.loop(lc.elementwise_ns, tokens * vocab, 8 * tokens * vocab) +
        kn.loop(lc.elementwise_ns, local_tokens * h, local_tokens * h * e);
  }
  head.backward_kinds.elementwise += sp_norm_elementwise;  // the final norm's, as a layer's
  head.forward = head.forward_kinds.total();
  head.backward = head.backward_kinds.total();
  if (k.tp > 1 && k.vocab_parallel) {
    const GroupPlacement g = tp_placement(m, k.tp);
    const double bytes = tokens * h * e;
    // Cross-entropy combines max, sum and target logits: three small all-reduces.
    const double small = 3 * collective(m, trace::Collective::all_reduce, tokens * 4, g);
    head.tp_forward = small + (k.sp ? collective(m, trace::Collective::all_gather, bytes, g) : 0);
    const double back = collective(
        m, k.sp ? trace::Collective::reduce_scatter : trace::Collective::all_reduce, bytes, g);
    head.tp_backward_total = back;
    head.tp_backward = k.async_tp ? std::max(0.0, back - head_wgrad) : back;
  } else if (k.tp > 1 && k.sp) {
    // A whole head still needs every token of the sequence-parallel shards;
    // its input gradient is whole on every rank, each keeps its own shard.
    head.tp_forward =
        collective(m, trace::Collective::all_gather, tokens * h * e, tp_placement(m, k.tp));
  }
  head.tp_backward += sp_norm_reduce;  // the final norm's sum
  head.tp_backward_total += sp_norm_reduce;
  head.flops_forward = linear_flops(tokens, vocab, h);
  head.model_flops_forward =
      linear_flops(tokens, x.vocab / t, h);  // the rank's share of the model's
  return out;
}

namespace {

StageCost stage_cost(const Model& x, const Knobs& k, const LayerCosts& c, bool first, bool last) {
  return chunk_cost(x, k, c, x.transformer ? x.layers / k.pp : 1, first, last);
}

double stage_total(const StageCost& s, bool inference) {
  if (inference) return s.forward + s.tp_forward;
  return s.forward + s.backward + s.recompute + s.tp_forward + s.tp_backward;
}

// Reduction of `bytes` in buckets: every full bucket and the last one.
struct Bucketed {
  double total = 0;
  double last = 0;
};
// The data-parallel reduction of the gradients: where the link was measured
// with its buffers out of the caches (as backward leaves them on a CPU),
// at those figures inside the node.
double gradient_collective(const Machine& m, trace::Collective op, double bytes,
                           const GroupPlacement& g) {
  if (!m.has_cold) return collective(m, op, bytes, g);
  const Tier intra = intra_towards(m, m.intra_cold, g.per_node - 1);
  return group_seconds(op, bytes, g, intra, m.has_inter ? m.inter : intra);
}

Bucketed bucketed(const Machine& m, trace::Collective op, double bytes, double bucket,
                  const GroupPlacement& g) {
  Bucketed b;
  if (bytes <= 0 || g.size() <= 1) return b;
  const double full = std::floor(bytes / bucket);
  const double rest = bytes - full * bucket;
  const double one = gradient_collective(m, op, bucket, g);
  b.last = rest > 0 ? gradient_collective(m, op, rest, g) : one;
  b.total = full * one + (rest > 0 ? b.last : 0);
  return b;
}

// ZeRO-2 and -3 hold a shard of the gradients only: every micro-batch,
// each group of parameters (the embeddings, a layer, the final norm with
// the head) has its whole gradients zeroed in a bucket before its
// backward, and the rank's reduced piece added into its shard after it
// (the engines' gradient buckets; DeepSpeed's copy of each reduced
// partition into its fp32 one), fp32 both: memory-bound compute beside
// the reduction.
double gradient_staging(const Model& x, const Knobs& k, const LayerCosts& c, double layers,
                        bool embedding, bool head) {
  if (k.zero < 2 || k.dp <= 1 || k.inference || !x.transformer) return 0;
  auto group = [&](double params) {
    if (params <= 0) return 0.0;
    const double piece = params / k.dp;
    return c.elementwise.seconds(params, 4 * params) + c.elementwise.seconds(piece, 12 * piece);
  };
  const double vocab_table = vocab_rows_per_rank(x, k) * x.hidden;
  double seconds =
      layers * group((x.params_layer - x.params_layer_norms) / k.tp + x.params_layer_norms);
  if (embedding) seconds += group(vocab_table + x.params_positions);
  if (head) {
    const bool own_head = x.params_lm_head > 0 || k.pp > 1;
    seconds += group(x.params_final_norm + (own_head ? vocab_table : 0.0));
  }
  return seconds;
}

}  // namespace

double LayerCosts::Elementwise::seconds(double elements, double bytes) const {
  const double t = ns > 0 ? (elements > 0 ? elements * ns * 1e-9 + launch : 0)
                          : (bytes > 0 ? bytes / memory_rate + launch : 0);
  return t > 0 ? std::max(t, dispatch) : 0;
}

StageCost chunk_cost(const Model& x, const Knobs& k, const LayerCosts& c, double layers,
                     bool embedding, bool head) {
  StageCost s;
  const LayerCost& l = c.layer;
  s.forward = layers * l.forward;
  s.backward = layers * l.backward;
  s.tp_forward = layers * l.tp_forward;
  s.tp_backward = layers * l.tp_backward_exposed;
  s.tp_backward_total = layers * l.tp_backward_total;
  s.kinds = l.forward_kinds * layers;
  if (!k.inference) s.kinds += l.backward_kinds * layers;
  if (k.recompute == Recompute::selective) {
    s.recompute = layers * l.attention_core;
    s.kinds += l.attention_core_kinds * layers;
  } else if (k.recompute == Recompute::full) {
    s.recompute = layers * l.forward;
    s.kinds += l.forward_kinds * layers;
    s.tp_backward += layers * l.tp_forward;  // the recomputed forward repeats its collectives
    s.tp_backward_total += layers * l.tp_forward;
  }
  const double staging = gradient_staging(x, k, c, layers, embedding, head);
  s.backward += staging;
  s.kinds.elementwise += staging;
  if (x.transformer && embedding) {
    s.forward += c.embedding.forward;
    s.backward += c.embedding.backward;
    s.kinds += c.embedding.forward_kinds;
    if (!k.inference) s.kinds += c.embedding.backward_kinds;
    s.tp_forward += c.embedding.tp_forward;
    s.tp_backward += c.embedding.tp_backward;
    s.tp_backward_total += c.embedding.tp_backward_total;
  }
  if (x.transformer && head) {
    s.forward += c.head.forward;
    s.backward += c.head.backward;
    s.kinds += c.head.forward_kinds;
    if (!k.inference) s.kinds += c.head.backward_kinds;
    s.tp_forward += c.head.tp_forward;
    s.tp_backward += c.head.tp_backward;
    s.tp_backward_total += c.head.tp_backward_total;
  }
  return s;
}

double p2p_seconds(const Machine& m, const Model& x, const Knobs& k, double e) {
  if (k.pp <= 1) return 0;
  // Megatron sends 1/t of the activation from each tensor rank and
  // gathers it on the receiving node.
  const double tokens = static_cast<double>(k.micro_batch) * x.seq;
  const Tier tier =
      (pipeline_crosses_nodes(m, k) && m.has_inter) ? m.inter : intra_towards(m, m.intra, 1);
  const double bytes = tokens * x.hidden * e / k.tp;
  double hop = tier.latency + bytes / (tier.bandwidth * tier.efficiency);
  if (k.tp > 1 && !k.sp) {
    hop +=
        collective(m, trace::Collective::all_gather, tokens * x.hidden * e, tp_placement(m, k.tp));
  }
  return hop;
}

PipelineCosts pipeline_costs(const Machine& m, const Model& x, const Knobs& k,
                             const LayerCosts& c) {
  PipelineCosts p;
  const bool single = k.pp == 1;
  p.first = stage_cost(x, k, c, true, single);
  p.last = stage_cost(x, k, c, single, true);
  p.middle = stage_cost(x, k, c, false, false);
  p.micro_batches = k.global_batch / std::max(k.dp * k.micro_batch, 1);

  const double e = c.activation_element_bytes;
  if (k.pp > 1) {
    p.first.p2p = p.middle.p2p = p.last.p2p = p2p_seconds(m, x, k, e);
    if (x.transformer && x.tied && !k.inference) {
      // The tied embedding's gradient is summed between the first and last stage.
      const double bytes_grad = vocab_rows_per_rank(x, k) * x.hidden *
                                (k.fp32_main_grad ? 4.0 : bytes_per_element(k.gradients));
      const GroupPlacement pair =
          pipeline_crosses_nodes(m, k) ? GroupPlacement{1, 2} : GroupPlacement{2, 1};
      p.tied_embedding_sync = collective(m, trace::Collective::all_reduce, bytes_grad, pair);
    }
  }

  if (k.inference) return p;

  // Data-parallel gradient reduction of stage 0 (the last to finish backward).
  const StageParams params = stage_params(x, k, true, single);
  const double grad_element = k.fp32_main_grad ? 4.0 : bytes_per_element(k.gradients);
  const double grad_bytes = params.total() * grad_element;
  const double weight_bytes = params.total() * bytes_per_element(k.weights);
  const StageCost& s0 = p.first;
  const double backward_window = s0.backward + s0.recompute + s0.tp_backward;
  // Without overlap the gradient reduction starts after backward: nothing hides it.
  const double reduce_window = k.overlap_dp ? backward_window : 0;
  const double forward_window = s0.forward + s0.tp_forward;
  if (k.dp > 1) {
    const GroupPlacement g = dp_placement(m, k);
    const int mb = p.micro_batches;
    if (k.zero <= 1) {
      const Bucketed r = bucketed(m, gradient_reduction(k.zero), grad_bytes, k.bucket_bytes, g);
      p.dp_total = r.total;
      p.dp_exposed = std::max(r.total - reduce_window, r.last);
      // A communication thread sharing the cores slows the backward it
      // overlaps: that compute is descheduled for the time it hides.
      p.dp_descheduled = m.overlap_slowdown * std::max(0.0, r.total - p.dp_exposed);
      p.dp_exposed += p.dp_descheduled;
    } else if (k.zero == 2) {
      const Bucketed r = bucketed(m, gradient_reduction(2), grad_bytes, k.bucket_bytes, g);
      p.dp_total = mb * r.total;
      p.dp_exposed = mb * std::max(r.total - reduce_window, r.last);
      p.dp_descheduled = m.overlap_slowdown * std::max(0.0, p.dp_total - p.dp_exposed);
      p.dp_exposed += p.dp_descheduled;
    } else {
      // A group at a time (the embeddings, a layer, the head): gathered
      // before its forward and again before its backward, the next one
      // prefetched (at least one group's gather is exposed a pass), its
      // gradients reduce-scattered once its backward is done.
      const double groups = parameter_groups(x, k, true, true);
      const double gather =
          groups * collective(m, trace::Collective::all_gather, weight_bytes / groups, g);
      const Bucketed r =
          bucketed(m, trace::Collective::reduce_scatter, grad_bytes, grad_bytes / groups, g);
      p.zero3_gather = gather;
      p.zero3_forward_exposed = std::max(gather - forward_window, gather / groups);
      p.zero3_backward_exposed = std::max(gather - backward_window, gather / groups);
      p.zero3_exposed = mb * (p.zero3_forward_exposed + p.zero3_backward_exposed);
      p.zero3_gathers = mb * 2 * gather;
      p.dp_total = p.zero3_gathers + mb * r.total;
      p.dp_exposed = mb * std::max(r.total - std::max(0.0, reduce_window - gather), r.last);
      // The gathers and reductions hidden under compute slow it, as above.
      p.dp_descheduled =
          m.overlap_slowdown * std::max(0.0, p.dp_total - p.dp_exposed - p.zero3_exposed);
      p.dp_exposed += p.dp_descheduled;
    }
    if (k.zero == 1 || k.zero == 2) {
      // The updated shards are gathered back after the optimizer step.
      p.zero_param_gather = collective(m, trace::Collective::all_gather, weight_bytes, g);
      p.dp_total += p.zero_param_gather;
    }
  }

  // Optimizer: memory-bound over this GPU's (sharded) parameters.
  const StageParams last_params = stage_params(x, k, single, true);
  const double params_updated =
      std::max(params.total(), last_params.total()) / (k.zero >= 1 ? k.dp : 1);
  if (m.loops.optimizer_ns > 0) {
    p.optimizer = params_updated * m.loops.optimizer_ns_at(params_updated) * 1e-9 + 4 * m.launch;
  } else {
    p.optimizer = params_updated * optimizer_bytes_per_param(x, k) / m.memory_rate + 4 * m.launch;
  }
  return p;
}

bool check_rules(const Machine& m, const Model& x, const Knobs& k, const Names* names,
                 std::vector<Problem>* problems) {
  bool ok = true;
  // Adds a problem (building its message only when someone reads it).
  auto fail = [&](const char* pointer, auto message) {
    ok = false;
    if (problems) problems->push_back({pointer, message()});
    return problems != nullptr;  // keep checking only when collecting
  };
  const std::string gpu = names && !names->gpu.empty() ? names->gpu : std::string("the GPU");
  const std::string model =
      names && !names->model.empty() ? names->model : std::string("the model");
  auto n = [](double v) { return std::to_string(static_cast<long long>(v)); };

  if (!m.has_gpu) {
    if (!fail("/cluster/gpus_per_node", [&] {
          return std::string(
              "the cluster has no GPU to plan for (give a GPU preset and gpus_per_node; "
              "this machine's CPUs, which `clusterscope run` trains on, are planned for once "
              "calibrated: `clusterscope calibrate --ranks N`, then the cluster "
              "calibrated-<host>-cpuN)");
        }))
      return false;
    return ok;
  }
  // Documents read from JSON already obey these; a GUI editing a model may not.
  if (!(m.memory_bytes > 0) || !(m.peak_of(Precision::fp32) > 0) || !(m.memory_rate > 0)) {
    if (!fail("/cluster/gpu",
              [&] { return gpu + " needs memory, memory bandwidth and an fp32 peak above 0"; }))
      return false;
    return ok;
  }
  if (x.transformer && !(x.layers >= 1 && x.hidden >= 1 && x.heads >= 1 && x.seq >= 1 &&
                         x.vocab >= 1 && x.kv_heads >= 1 && x.ffn >= 1)) {
    if (!fail("/workload", [&] {
          return model +
                 " needs layers, hidden, heads, kv_heads, ffn_hidden, seq_len and vocab >= 1";
        }))
      return false;
    return ok;
  }
  if (!x.transformer && !(x.params_total > 0 && x.generic_forward_flops > 0)) {
    if (!fail("/workload",
              [&] { return model + " needs parameters and forward_flops_per_sample above 0"; }))
      return false;
    return ok;
  }
  const long long world = static_cast<long long>(k.dp) * k.tp * k.pp;
  if (world > m.total_gpus()) {
    if (!fail("/parallel/dp", [&] {
          return "dp x tp x pp = " + n(k.dp) + " x " + n(k.tp) + " x " + n(k.pp) + " = " +
                 n(world) + " GPUs, but the cluster has " + n(m.total_gpus());
        }))
      return false;
  }
  if (m.peak_of(k.compute) <= 0) {
    if (!fail("/precision/compute", [&] {
          const std::string wanted(to_string(k.compute));
          if (names && std::find(names->calibrated_without.begin(), names->calibrated_without.end(),
                                 k.compute) != names->calibrated_without.end()) {
            return gpu + " was calibrated without " + wanted + " (its preset gives no " + wanted +
                   " rate): calibrate again with --precisions " + wanted + " to measure it";
          }
          return gpu + " has no " + wanted + " path (its peak is 0 in the GPU preset)";
        }))
      return false;
  }
  if (k.inference && k.recompute != Recompute::none) {
    if (!fail("/parallel/recompute", [&] {
          return std::string(
              "an inference plan keeps no activations for backward: recompute must be none");
        }))
      return false;
  }
  if (k.inference && k.zero > 0) {
    // ZeRO shards what training keeps (optimizer state, gradients, weights
    // between updates); a forward-only plan would pay ZeRO-3's weight
    // all-gather on every pass, which this model does not time.
    if (!fail("/parallel/zero_stage", [&] {
          return "an inference plan has no optimizer state or gradients to shard: zero_stage "
                 "must be 0 (ZeRO-" +
                 n(k.zero) + " asked)";
        }))
      return false;
  }
  if (k.zero >= 2 && k.pp > 1) {
    if (!fail("/parallel/zero_stage", [&] {
          return "ZeRO-" + n(k.zero) +
                 " shards gradients every micro-batch and does not combine with "
                 "pipeline parallelism (pp " +
                 n(k.pp) + "): use ZeRO-1 or pp 1";
        }))
      return false;
  }

  if (!x.transformer) {
    if (k.tp > 1 && !fail("/parallel/tp", [&] {
          return model +
                 " is a generic model: it splits by data parallelism and ZeRO only, so tp must be "
                 "1";
        }))
      return false;
    if (k.pp > 1 && !fail("/parallel/pp", [&] {
          return model +
                 " is a generic model: it splits by data parallelism and ZeRO only, so pp must be "
                 "1";
        }))
      return false;
    if (k.recompute != Recompute::none && !fail("/parallel/recompute", [&] {
          return model + " is a generic model (no layer structure known): recompute must be none";
        }))
      return false;
    return ok;
  }

  const long long heads = static_cast<long long>(x.heads);
  const long long kv = static_cast<long long>(x.kv_heads);
  const long long layers = static_cast<long long>(x.layers);
  if (heads % k.tp != 0 && !fail("/parallel/tp", [&] {
        return "must divide the " + n(heads) + " attention heads of " + model + " (got " + n(k.tp) +
               ")";
      }))
    return false;
  if (kv != heads && kv % k.tp != 0 && !fail("/parallel/tp", [&] {
        return "must divide the " + n(kv) + " key/value heads of " + model + " (got " + n(k.tp) +
               ")";
      }))
    return false;
  if (static_cast<long long>(x.ffn) % k.tp != 0 && !fail("/parallel/tp", [&] {
        return "must divide the MLP width " + n(x.ffn) + " of " + model + " (got " + n(k.tp) + ")";
      }))
    return false;
  if ((k.tp > m.gpus_per_node || m.gpus_per_node % k.tp != 0) && !fail("/parallel/tp", [&] {
        const std::string gpus =
            m.gpus_per_node == 1 ? "the 1 GPU" : "the " + n(m.gpus_per_node) + " GPUs";
        return "tensor parallelism must stay inside a node: tp " + n(k.tp) +
               (k.tp > m.gpus_per_node ? " is more than " + gpus + " of a node"
                                       : " does not divide " + gpus + " per node") +
               " (its collectives run every layer)";
      }))
    return false;
  // Megatron-LM refuses it too: the layer norms and dropouts outside the
  // tensor-parallel region each take seq_len / tp of the sequence.
  if (k.sp && k.tp > 1 && static_cast<long long>(x.seq) % k.tp != 0 &&
      !fail("/parallel/sequence_parallel", [&] {
        return "splits the sequence over the tensor-parallel ranks: the sequence length " +
               n(x.seq) + " of " + model + " must be a multiple of tp " + n(k.tp);
      }))
    return false;
  if (layers % k.pp != 0 && !fail("/parallel/pp", [&] {
        return "must divide the " + n(layers) + " layers of " + model + " (got " + n(k.pp) + ")";
      }))
    return false;
  if (k.v > 1) {
    if (layers % (static_cast<long long>(k.pp) * k.v) != 0 && layers % k.pp == 0 &&
        !fail("/parallel/virtual_stages", [&] {
          return "pp x virtual_stages = " + n(k.pp) + " x " + n(k.v) + " = " + n(static_cast<double>(k.pp) * k.v) +
                 " must divide the " + n(layers) + " layers of " + model;
        }))
      return false;
    const int micro_batches = k.global_batch / std::max(k.dp * k.micro_batch, 1);
    if (micro_batches % k.pp != 0 && !fail("/parallel/virtual_stages", [&] {
          return "the interleaved schedule needs the micro-batches per step (" + n(micro_batches) +
                 ") to be a multiple of pp (" + n(k.pp) + ")";
        }))
      return false;
  }
  return ok;
}

double memory_total(const Machine& m, const Model& x, const Knobs& k, double e) {
  const bool single = k.pp == 1;
  const double first = stage_memory(m, x, k, e, true, single).total();
  if (single) return first;
  return std::max(first, stage_memory(m, x, k, e, false, true).total());
}

void evaluate(const Machine& m, const Model& x, const Knobs& k, const LayerCosts& c,
              Estimate& out) {
  const bool single = k.pp == 1;
  const double e = c.activation_element_bytes;
  const PipelineCosts p = pipeline_costs(m, x, k, c);
  const int mb = p.micro_batches;

  out.gpus = k.dp * k.tp * k.pp;
  out.micro_batches = mb;
  out.layers_per_stage = x.transformer ? static_cast<int>(x.layers) / k.pp : 0;
  out.parameters = x.params_total;
  out.inference = k.inference;

  // --- memory
  out.first_stage = stage_memory(m, x, k, e, true, single);
  out.last_stage = single ? out.first_stage : stage_memory(m, x, k, e, false, true);
  const bool last_heavier = out.last_stage.total() > out.first_stage.total();
  out.memory = last_heavier ? out.last_stage : out.first_stage;
  out.most_loaded_stage = last_heavier ? k.pp - 1 : 0;
  out.parameters_per_gpu =
      std::max(stage_params(x, k, true, single).total(), stage_params(x, k, single, true).total());
  out.memory_capacity = m.memory_bytes;
  out.headroom_bytes = m.memory_bytes - out.memory.total();
  out.fits = out.headroom_bytes >= 0;

  // --- time: the slowest stage sets the pace; fill and drain pass every stage once per chunk
  const double t_first = stage_total(p.first, k.inference);
  const double t_last = stage_total(p.last, k.inference);
  const double t_middle = stage_total(p.middle, k.inference);
  // 1F1B and forward-only: Megatron-LM waits on every batched isend/irecv
  // (overlap_p2p_comm is forced off without virtual stages), so each send
  // holds its stage for a hop, while a receive from a faster neighbour has
  // arrived already. A stage's period per micro-batch is its compute and its
  // sends: the first stage sends activations, the last gradients (none in
  // inference), a middle stage both. The longest period sets the pace.
  const bool held_sends = k.pp > 1 && k.v == 1;
  const double hop_passes = k.inference ? 1.0 : 2.0;
  const double sends_first = held_sends ? 1.0 : 0.0;
  const double sends_last = held_sends && !k.inference ? 1.0 : 0.0;
  const double sends_middle = held_sends ? hop_passes : 0.0;
  const StageCost* slow = &p.first;
  double period = t_first + sends_first * p.first.p2p;
  double sends_slow = sends_first;
  if (k.pp > 1 && t_last + sends_last * p.last.p2p > period) {
    slow = &p.last;
    period = t_last + sends_last * p.last.p2p;
    sends_slow = sends_last;
  }
  if (k.pp > 2 && t_middle + sends_middle * p.middle.p2p > period) {
    slow = &p.middle;
    sends_slow = sends_middle;
  }
  out.pacing_stage = slow == &p.first ? 0 : slow == &p.last ? k.pp - 1 : 1;
  out.pipeline_stages = k.pp;
  out.ranks_per_stage = k.dp * k.tp;
  const double t_slow = stage_total(*slow, k.inference);
  const double average = k.pp == 1 ? t_first : (t_first + t_last + (k.pp - 2) * t_middle) / k.pp;

  TimeBreakdown& time = out.time;
  time = {};
  time.forward = mb * slow->forward;
  time.tp_communication = mb * slow->tp_forward;
  // Every tensor-parallel collective of the slowest stage, hidden or not.
  double tp_total = time.tp_communication;
  const KindTimes kinds = slow->kinds * mb;
  out.compute_by_kind = {kinds.gemm,       kinds.attention,   kinds.norm,
                         kinds.activation, kinds.elementwise, kinds.loss};
  if (!k.inference) {
    time.backward = mb * slow->backward;
    time.recompute = mb * slow->recompute;
    time.tp_communication += mb * slow->tp_backward;
    tp_total += mb * slow->tp_backward_total;
    time.optimizer = p.optimizer;
    time.dp_communication = p.dp_exposed - p.dp_descheduled + p.zero_param_gather;
    time.descheduled = p.dp_descheduled;
    time.zero_gather = p.zero3_exposed;
  }
  if (k.pp > 1) {
    // Without interleaving the first micro-batch fills the stages before
    // the pacing one and the last drains them: the bubble is the other
    // stages' time (p - 1 average stages counted a heavy LM head's excess).
    time.pipeline_bubble = k.v == 1 ? k.pp * average - t_slow : (k.pp - 1.0) / k.v * average;
    // Hops on the critical path. 1F1B and forward-only: the pacing stage's
    // held sends, once per micro-batch (above), and the fill and the drain,
    // where the first micro-batch's activations cross the p - 1 stage
    // boundaries and its gradients cross them back. Interleaved training:
    // overlap_p2p_comm (this schedule's default) posts the steady state's
    // sends and receives after a pass and waits only before the chunk that
    // uses them, hidden behind the other pass; only the fill and the drain
    // are exposed, across all p v - 1 chunk boundaries and back.
    // predict_timeline runs the same rules.
    // The pacing stage's last send is the next stage's arrival, counted in
    // the drain: one hop less when it sends.
    const double exchanges =
        held_sends     ? mb * sends_slow + hop_passes * (k.pp - 1.0) - (sends_slow > 0 ? 1.0 : 0.0)
        : !k.inference ? hop_passes * (static_cast<double>(k.pp) * k.v - 1)
                       : hop_passes * (static_cast<double>(mb) * k.v + k.pp - 1);
    time.pp_communication = exchanges * slow->p2p + p.tied_embedding_sync;
  }
  out.bubble_fraction = pipeline_bubble_fraction(k.pp, mb, k.v);
  if (m.core_share > 0 && m.core_share < 1) {
    // Ranks sharing cores (the CPU engine, more threads than cores): while
    // all compute, each gets the share, so compute takes 1 / share as long.
    const double compute = time.forward + time.backward + time.recompute + time.optimizer;
    const double added = (1 / m.core_share - 1) * compute;
    // Where ranks meet in collectives, whose waits poll, the ranks computing
    // get less than their share (the fitted collective_core_share).
    const double collective_share = std::clamp(m.collective_core_share, 0.01, 1.0);
    const double added_in_collectives = (1 / collective_share - 1) * compute;
    // Time the share costs in a group's collectives: the waiting, and the
    // part of it the last to arrive spends there too (its transfer).
    auto wait_in = [&](double& group_communication, double seconds, double in_transfer) {
      in_transfer = std::clamp(in_transfer, 0.0, 1.0);
      group_communication += in_transfer * seconds;
      time.collective_wait += (1 - in_transfer) * seconds;
    };
    if (k.tp > 1) {
      // Tensor-parallel ranks meet in a collective within every layer and
      // give their core away at each meeting, long before the scheduler
      // would take it: a rank computes at full speed while its partners
      // wait for it, and what the share costs is spent waiting in those
      // collectives (measured on the CPU engine: DP 2 x TP 2 on 2 cores ran
      // every compute part at its one-rank speed).
      // The collectives themselves run on the ranks' share of a core, the
      // replicas' gradient reductions all at once (DP 2 x TP 2 on 2 cores:
      // its 1.8 MiB reduction took 1.8-2.3 ms where DP 2 alone reduces twice
      // the bytes in 1.1).
      time.tp_communication /= collective_share;
      tp_total /= collective_share;
      const double exposed_before_wait = time.tp_communication;
      wait_in(time.tp_communication, added_in_collectives, m.shared_wait_in_tp_transfer);
      tp_total += time.tp_communication - exposed_before_wait;
      time.dp_communication /= collective_share;
    } else if (k.dp > 1 && k.pp == 1) {
      // Data-parallel replicas alone compute at once: each op waits for a
      // core what the share adds to it (measured on the CPU engine as the
      // ops' time off CPU, DP 4 small on 2 cores: 6.6-7.0 ms a step beside
      // 7.9 of compute on CPU), up to what the collective share costs in
      // all; the rest of that is spent waiting in the gradient reduction.
      const double descheduled = std::min(added, added_in_collectives);
      time.descheduled += descheduled;
      wait_in(time.dp_communication, added_in_collectives - descheduled, m.shared_wait_in_transfer);
    } else if (k.pp > 1) {
      // Pipeline stages: a stage waits its own bubble (the other stage then
      // runs alone on the cores it left). The step is compute and the
      // larger of the bubble and the time the share adds, the core count's
      // even with data-parallel partners, whose reduction runs at it (DP 2
      // x PP 2 large on 2 cores, re-predicted from the stores of 7 runs
      // whose ops record their time off CPU: the step +18 % to +23 % with
      // the fitted collective share, 0.43, the reduction +75 % to +171 %;
      // with the core count's -10 % to +6 %, the reduction -24 % to +17 %).
      // Of that time, the stage's compute waits for a core (descheduled)
      // only while the other stages compute too: all of the others' chunks
      // but their first forward (the fill) and last backward (the drain),
      // (m v - 1) / (m v) of their compute, falls within this stage's. On
      // the CPU engine, DP 2 x PP 2 large on 2 cores (2 micro-batches, the
      // first stage 0.97 of the last): the last stage's ops were off CPU
      // 25.4-31.9 ms a step in 7 runs, where this rule says 0.48 x (1 / 0.5
      // - 1) x 59.4 ms of compute on CPU = 28.5. The rest is waiting for
      // the other stages, in the bubble.
      const double extra = std::max(0.0, added - time.pipeline_bubble);
      const double chunks = mb * k.v;
      const double others = (k.pp * average - t_slow) / (k.pp - 1.0);
      const double overlap =
          t_slow > 0 ? std::clamp((chunks - 1) / chunks * others / t_slow, 0.0, 1.0) : 0.0;
      const double descheduled = std::min(extra, overlap * added);
      time.descheduled += descheduled;
      time.pipeline_bubble += extra - descheduled;
      time.dp_communication /= m.core_share;
    } else {
      // One rank with more threads than cores: all of its compute waits.
      time.descheduled += added;
    }
    // A stage waiting in the pipeline's fill or drain leaves its core to
    // the others: the bubble hides up to the time added.
    if (k.tp > 1) time.pipeline_bubble = std::max(0.0, time.pipeline_bubble - added);
  }

  CommunicationDetail& comm = out.communication;
  comm = {};
  comm.tp_seconds = tp_total;
  comm.pp_seconds = time.pp_communication;
  comm.dp_seconds = p.dp_total;
  comm.dp_overlapped = std::max(0.0, p.dp_total - time.dp_communication - time.zero_gather);
  comm.zero3_seconds = p.zero3_gathers;  // without the gradients' reduce-scatter
  const StageParams params0 = stage_params(x, k, true, single);
  // One exchange's gradient bytes (the seed article's S). ZeRO-2 and -3
  // reduce-scatter every micro-batch's gradients (their buffers hold a
  // shard only), the others once per step.
  double gradient_bytes = 0;
  if (k.dp > 1 && !k.inference) {
    gradient_bytes = params0.total() * (k.fp32_main_grad ? 4.0 : bytes_per_element(k.gradients));
    const double exchanges = k.zero >= 2 ? p.micro_batches : 1;
    const double buckets = std::ceil(gradient_bytes / k.bucket_bytes);
    comm.dp_bytes_per_gpu = exchanges * gradient_bytes;
    comm.dp_buckets = static_cast<std::int64_t>(std::min(9e18, exchanges * buckets));
  }

  // --- throughput
  const double step = time.step();
  Throughput& th = out.throughput;
  th = {};
  const double samples = k.global_batch;
  const double tokens_per_sample = x.transformer ? x.seq : 1;
  // Model FLOPs: forward + backward of every matrix multiply, attention over
  // the full square (Narayanan et al. 2021), whatever the kernels do: MFU
  // compares plans and papers. Hardware FLOPs are what the kernels execute:
  // fused causal attention half the square forward and its recomputation of
  // the scores backward, plus what recomputation repeats (Korthikanti et al.
  // 2022, Appendix A), so that HFU stays under what the GPU sustains.
  const double passes = k.inference ? 1.0 : 3.0;  // forward, or forward + 2 x backward
  double model_forward = 0;
  double hardware = 0;
  if (x.transformer) {
    model_forward = x.layers * c.layer.model_flops_forward + c.head.model_flops_forward;
    if (k.inference) {
      hardware = x.layers * c.layer.flops_forward + c.head.flops_forward;
    } else {
      hardware = x.layers * c.layer.flops_training + 3 * c.head.flops_forward;
      if (k.recompute == Recompute::selective) hardware += x.layers * c.layer.flops_attention_core;
      if (k.recompute == Recompute::full) hardware += x.layers * c.layer.flops_forward;
    }
    // Per micro-batch per tensor rank -> whole step, all ranks.
    const double scale = static_cast<double>(mb) * k.dp * k.tp;
    model_forward *= scale;
    hardware *= scale;
  } else {
    model_forward = c.layer.model_flops_forward * mb * k.dp;
    hardware = passes * model_forward;
  }
  th.model_flops_per_step = passes * model_forward;
  th.hardware_flops_per_step = hardware;
  if (step > 0) {
    th.samples_per_second = samples / step;
    th.tokens_per_second = th.samples_per_second * tokens_per_sample;
    th.has_tokens = x.transformer;
    th.model_tflops_per_gpu = th.model_flops_per_step / step / out.gpus / 1e12;
    th.hardware_tflops_per_gpu = th.hardware_flops_per_step / step / out.gpus / 1e12;
    const double peak = m.peak_of(k.compute);
    if (peak > 0) {
      th.mfu = th.model_tflops_per_gpu * 1e12 / peak;
      th.hfu = th.hardware_tflops_per_gpu * 1e12 / peak;
    }
  }

  // --- the whole training run
  TrainingCost& run = out.training;
  run = {};
  if (x.transformer) {
    run.steps = x.training_samples > 0 ? std::ceil(x.training_samples / samples) : 0;
    run.flops_6pd = six_pd_flops(x.params_total, x.training_tokens);
  } else {
    run.steps = iterations_per_run(x.dataset_samples, samples, x.epochs);
    // 6PD is a transformer's (each parameter used once per token); a
    // convolution reuses its weights across the image (ResNet-18: 56.3
    // TFLOP against a "6PD" of 17.5): none is given.
    run.flops_6pd = 0;
  }
  run.seconds = run.steps * step;
  run.gpu_hours = run.seconds * out.gpus / 3600.0;
  run.cost_usd = run.gpu_hours * m.price_per_gpu_hour;
  run.energy_kwh = m.power_watts * out.gpus * run.seconds / 3.6e6;
  // The model FLOPs of every sample trained on: the last step of an epoch
  // (or of the run) holds only what is left, not a full batch.
  const double samples_trained =
      x.transformer ? x.training_samples : x.dataset_samples * x.epochs;
  run.flops = run.steps > 0 ? th.model_flops_per_step / samples * samples_trained : 0;
  // An inference plan's "run" is one forward pass over the workload's
  // tokens: 6PD (training's forward and backward) does not describe it.
  if (k.inference) run.flops_6pd = 0;

  // --- the seed article's communication model beside the ring
  SeedCommunication& seed = out.seed_communication;
  seed = {};
  if (k.dp > 1 && !k.inference) {
    const GroupPlacement g = dp_placement(m, k);
    const Tier slowest =
        (g.nodes > 1 && m.has_inter) ? m.inter : intra_towards(m, m.intra, g.per_node - 1);
    seed.gradient_bytes = gradient_bytes;
    seed.ranks = k.dp;
    seed.bandwidth = slowest.bandwidth;
    seed.latency = slowest.latency;
    seed.simple_seconds =
        simple_communication_seconds(seed.gradient_bytes, k.dp, seed.bandwidth, seed.latency);
    seed.ring_seconds =
        ring_all_reduce_seconds(seed.gradient_bytes, k.dp, seed.bandwidth, seed.latency);
  }

  QuantizationSummary& q = out.quantization;
  q = {};
  if (is_integer(k.weights)) {
    q.bits = k.weights == Precision::int8 ? 8 : 4;
    // Symmetric leaves out the most negative integer, so that the range is
    // even about 0: one step fewer over the same range.
    q.levels = (1 << q.bits) - (k.symmetric_quant ? 1 : 0);
    const double step_fraction = 1.0 / (q.levels - 1);
    q.relative_max_error = step_fraction / 2;
    q.relative_rms_error = step_fraction / std::sqrt(12.0);
    q.weight_bytes_saved = out.parameters_per_gpu * (2.0 - bytes_per_element(k.weights));
  }
}

}  // namespace cs::plan::detail

namespace cs::plan {

MachineProbe predict_machine_probe(const Cluster& cluster, const MachineProbeShape& shape) {
  using namespace detail;
  MachineProbe p;
  p.shape = shape;
  Machine m = machine_of(cluster);
  // The CPU engine probes untraced: its ops carry no timing cost.
  if (m.cpu_engine) m.launch = 0;
  Knobs k;
  k.compute = precision_from_string(shape.precision).value_or(Precision::fp32);
  const Kernels kn = kernels_of(m, k);
  const double e = activation_bytes_of(k.compute);
  const double in_e = k.compute == Precision::fp8 ? 1.0 : e;
  // Every rank probes at once: ranks sharing cores each get their share
  // (the probe's times are means over repetitions, preemptions included).
  const double share = std::clamp(m.core_share, 0.01, 1.0);
  p.gemm_seconds = kn.linear(shape.tokens(), shape.out(), shape.width, in_e, e) / share;
  // As layer_costs times a layer norm's backward.
  const double elements = static_cast<double>(shape.loop_elements());
  p.loop_seconds = kn.loop(m.loops.norm_backward_ns, elements, 4 * elements * e) / share;
  if (shape.ranks > 1) {
    const int per_node = std::clamp(m.gpus_per_node, 1, shape.ranks);
    const GroupPlacement g{per_node, (shape.ranks + per_node - 1) / per_node};
    p.all_reduce_seconds = collective(m, trace::Collective::all_reduce,
                                      static_cast<double>(shape.all_reduce_bytes), g);
  }
  return p;
}

}  // namespace cs::plan
