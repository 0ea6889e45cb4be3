#pragma once
// How a workload is split over GPUs (ParallelPlan) and in which number
// formats it computes and stores (PrecisionPlan).

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/hardware.h"
#include "core/precision.h"
#include "core/rank_order.h"
#include "core/workload.h"

namespace cs {

enum class Recompute { none, selective, full };
enum class PipelineSchedule { one_f_one_b, interleaved };

std::string_view to_string(Recompute r);
std::string_view to_string(PipelineSchedule s);
std::optional<Recompute> recompute_from_string(std::string_view text);

struct ParallelPlan {
  int dp = 1;              // data-parallel replicas
  int tp = 1;              // tensor-parallel degree (Megatron column/row split)
  int pp = 1;              // pipeline stages
  int virtual_stages = 1;  // model chunks per pipeline rank (interleaved schedule)
  bool sequence_parallel = false;
  int zero_stage = 0;    // 0-3: what the data-parallel group shards
  int micro_batch = 1;   // sequences (samples) per micro-batch
  int global_batch = 1;  // sequences (samples) per optimizer step, all replicas
  Recompute recompute = Recompute::none;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  bool flash_attention = true;  // fused attention that never stores the s x s scores
  // Backward's input-gradient all-reduce of a tensor-parallel layer runs
  // while its weight gradient is computed (Megatron's asynchronous
  // tensor-parallel all-reduce); false: it blocks before it, as the
  // ClusterScope engines do.
  bool async_tp_allreduce = true;
  // The token embedding and the LM head split over the tensor-parallel group
  // by vocabulary (Megatron's vocabulary-parallel embedding and
  // cross-entropy); false: every tensor-parallel rank holds and computes
  // them whole, as the ClusterScope engines do.
  bool vocab_parallel = true;
  // Attention without fused kernels keeps its score matrix and the
  // scores' gradients in fp32 and splits and merges the heads by copies,
  // as the ClusterScope engines do; false: in the compute type (Megatron's
  // unfused attention).
  bool fp32_attention_scores = false;
  // The data-parallel gradient reduction runs bucket by bucket while
  // backward computes (PyTorch DDP, FSDP, Megatron-LM with
  // --overlap-grad-reduce); false: after backward, as Megatron-LM does
  // without that flag and DeepSpeed without overlap_comm.
  bool overlap_grad_reduce = true;
  double bucket_mib = 25;  // data-parallel gradient bucket (PyTorch DDP's default)

  friend bool operator==(const ParallelPlan&, const ParallelPlan&) = default;
  int world_size() const { return dp * tp * pp; }
  RankOrder rank_order() const { return {dp, tp, pp}; }
  // Sequences one micro-batch of every replica holds: dp x micro_batch,
  // which need not fit an int in a plan that is not checked yet.
  std::int64_t samples_per_micro_step() const { return std::int64_t{dp} * micro_batch; }
  // Micro-batches each replica runs per step; exact when the plan is valid.
  int gradient_accumulation() const {
    const std::int64_t per_step = samples_per_micro_step();
    return per_step > 0 ? static_cast<int>(global_batch / per_step) : 0;
  }
};

enum class LossScaling { none, fixed, dynamic };
enum class Fp8Format { e4m3, hybrid };  // hybrid: E4M3 forward, E5M2 gradients
enum class Fp8Recipe { delayed, current };

std::string_view to_string(LossScaling l);
std::string_view to_string(Fp8Format f);
std::string_view to_string(Fp8Recipe r);

struct Fp8Options {
  Fp8Format format = Fp8Format::hybrid;
  Fp8Recipe recipe = Fp8Recipe::delayed;
  int amax_history = 1024;  // delayed scaling keeps this many amax values per tensor
  // The GEMMs' inputs kept for backward as their 1-byte FP8 copies, as
  // Transformer Engine keeps them; false: in 16 bits, the FP8 copies the
  // GEMM's own (ClusterScope's CUDA engine).
  bool saved_inputs_fp8 = true;
  // The backward GEMMs (input and weight gradients) in FP8 too, the
  // gradients in E5M2 with the hybrid format, as Transformer Engine runs
  // them; false: in 16 bits (ClusterScope's CUDA engine).
  bool backward_fp8 = true;
};

struct IntQuantOptions {
  bool symmetric = false;   // symmetric: zero point 0; else asymmetric with a zero point
  bool per_channel = true;  // one scale per output channel, else per tensor
};

struct PrecisionPlan {
  Precision compute = Precision::bf16;    // GEMM input type
  Precision weights = Precision::bf16;    // the working copy of the weights
  bool master_weights = true;             // an fp32 copy the optimizer updates
  Precision gradients = Precision::bf16;  // gradient type communicated
  bool fp32_main_grad = false;            // Megatron accumulates into an fp32 main gradient
  Precision optimizer_state = Precision::fp32;
  LossScaling loss_scaling = LossScaling::none;
  double initial_loss_scale = 65536;
  Fp8Options fp8;          // when compute == fp8
  IntQuantOptions quant;   // when weights are int8 / int4
  bool inference = false;  // no gradients or optimizer: weights only

  // The usual plan for a compute type: fp32 and tf32 keep everything in fp32;
  // bf16/fp16/fp8 train with fp32 master weights and Adam state (fp16 with
  // dynamic loss scaling); int8/int4 are weight-only inference.
  static PrecisionPlan for_compute(Precision compute);
};

// Everything a run or an estimate needs: what to train, on what, and how.
struct Plan {
  Cluster cluster;
  Workload workload;
  ParallelPlan parallel;
  PrecisionPlan precision;
};

}  // namespace cs
