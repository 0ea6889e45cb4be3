#pragma once
// One rank's training loop: the micro-batch schedule (gradient accumulation,
// pipeline 1F1B or Megatron's interleaved 1F1B over several model chunks a
// rank), data-parallel gradient reduction in buckets overlapping
// backward (or ZeRO-1: reduce-scatter, a sharded optimizer, all-gather; or
// ZeRO-2: gradients sharded too, each micro-batch's reduced bucket by bucket
// to their shards' ranks; or ZeRO-3: the weights sharded too, each group of
// parameters gathered before its forward and its backward, its gradients
// reduce-scattered), AdamW with fp32 master weights, and the step's trace
// rows and metrics.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/pipeline_schedule.h"
#include "core/plans.h"
#include "profiler/worker/gpt_model.h"

namespace cs::worker {

class OpTracer;

struct TrainConfig {
  GptConfig model;
  int dp = 1, tp = 1, pp = 1;
  int dp_rank = 0, tp_rank = 0, pp_rank = 0;
  // Model chunks per pipeline rank (Megatron's virtual pipeline stages):
  // > 1 runs the interleaved schedule, rank r holding virtual stages r,
  // r + pp, ... of pp x virtual_stages. Needs the micro-batches per step to
  // be a multiple of pp.
  int virtual_stages = 1;
  int zero_stage = 0;  // 0 to 3
  Recompute recompute = Recompute::none;
  int micro_batch = 1;
  int accumulation = 1;  // micro-batches per replica per step
  DType compute = DType::f32;
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  std::uint64_t seed = 1234;
  std::int64_t bucket_bytes = 1 << 20;  // data-parallel gradient bucket
  bool overlap_dp = true;  // start buckets during backward (false: after it)
  bool sequence_parallel = false;  // Megatron's, with tp > 1 (GptModel)
  // FP16: scale the loss so small gradients survive, skip steps whose
  // gradients overflow and halve the scale, double it after a clean window.
  bool dynamic_loss_scale = false;
  float initial_loss_scale = 65536.0f;
  int loss_scale_window = 2000;
  // Growth stops here (Apex's max_loss_scale): doubling every clean window
  // for ever reaches fp32's infinity after some 250,000 steps, and an
  // infinite scale overflows every step after it, halving to infinity.
  float max_loss_scale = 16777216.0f;  // 2^24

  int global_batch() const { return dp * micro_batch * accumulation; }
};

struct StepResult {
  int step = 0;
  double loss = 0;       // mean over the global batch (every rank gets it)
  double seconds = 0;    // this rank's step time
  double tokens = 0;     // tokens of the global batch
  double loss_scale = 0; // the scale used (0 without loss scaling)
  bool skipped = false;  // gradients overflowed: no update this step
  double grad_norm = 0;  // L2 norm of the whole model's averaged gradient (every rank gets it)
};

class Trainer {
 public:
  Trainer(Backend& backend, Communicator& dp, Communicator& tp, Communicator& pp,
          const TrainConfig& config, std::string_view corpus, OpTracer* tracer);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  StepResult step();
  std::int64_t num_params() const { return n_; }  // this rank's, all its chunks

  // This rank's fp32 weights, whole (ZeRO shards gathered), in its layout.
  std::vector<float> local_weights();
  // The whole model's fp32 weights on world rank 0 in the unsplit layout
  // (gpt_parameter_layout with tp = pp = 1); other ranks send theirs. `world`
  // orders ranks in Megatron's rank order (core/rank_order.h).
  std::vector<float> gather_full_weights(Communicator& world);

 private:
  void launch_ready_buckets(std::int64_t ready_from);
  // ZeRO-2's gradient staging (see stages_).
  Tensor open_gradient_group(std::int64_t begin, std::int64_t end);
  // ZeRO-3's windows (see gathers_ and group_shards_).
  Tensor open_weight_group(std::int64_t begin, bool backward);
  void gather_group(int group, int buffer);
  Tensor open_sharded_gradients(std::int64_t begin, std::int64_t end);
  int group_at(std::int64_t begin) const;
  struct GradientStage;
  void launch_stage(GradientStage& stage);
  void finish_stage(GradientStage& stage);
  void reduce_gradients();
  void optimizer_step();
  bool gradients_overflowed();
  void record_memory(std::int64_t at_ns);  // counters of memory in use, whole and by part
  // The whole model's gradient norm: each parameter counted once whatever
  // the split (replicated over tp: on tp rank 0; ZeRO: per shard).
  double gradient_norm();
  void annotate(std::string_view what, std::int64_t start_ns);

  Backend& backend_;
  Communicator& dp_;
  Communicator& tp_;
  Communicator& pp_;
  TrainConfig config_;
  OpTracer* tracer_;
  // This rank's model chunks (one without interleaving), their parameters
  // side by side in the flat buffers: chunk c's from chunk_base_[c].
  // Interleaved, the chunks' activation stacks are shared (declared
  // before the chunks: it outlives them).
  std::unique_ptr<ActivationPool> activation_pool_;
  std::vector<std::unique_ptr<GptModel>> chunks_;
  std::vector<std::int64_t> chunk_base_;
  std::vector<PipelinePass> schedule_;  // the passes of a step
  std::vector<int> slots_;              // activation sets of each chunk
  // Interleaved: each chunk's input gradients leave from a buffer per
  // activation set, so a send waits only for the receive it feeds (see
  // Communicator::wait_sends_from).
  std::vector<std::vector<Tensor>> gradient_sends_;
  std::string_view corpus_;

  std::int64_t n_ = 0;       // parameters of this rank
  std::int64_t padded_ = 0;  // n_ rounded up to a multiple of dp (ZeRO shards)
  std::int64_t shard_ = 0;   // padded_ / dp
  bool sharded_ = false;     // ZeRO-1, -2 or -3 over more than one replica
  bool staged_ = false;      // ZeRO-2 or -3 over more than one replica
  bool gathered_ = false;    // ZeRO-3 over more than one replica
  Tensor weights_;           // compute type, padded_ (ZeRO-3: this rank's shard)
  Tensor grads_;             // fp32, padded_ (none with ZeRO-2)
  Tensor master_;      // fp32: whole (ZeRO-0) or this rank's shard (ZeRO-1, -2); may alias weights_
  Tensor grad_shard_;  // ZeRO-1: this rank's summed shard, a view of grads_; ZeRO-2: its own
  Tensor adam_m_, adam_v_;   // fp32, sized like master_
  Tensor scalar_;            // fp32, 1: the loss on its way to every rank
  bool master_aliases_weights_ = false;

  // Where this rank's shard sits in the flat parameters: runs of flat
  // offsets [flat_begin, flat_end) at shard_at in the shard (ZeRO-0: the
  // whole buffer; ZeRO-1 and -2: the rank's slice; ZeRO-3: its piece of
  // every group).
  struct ShardRun {
    std::int64_t flat_begin, flat_end, shard_at;
  };
  std::vector<ShardRun> shard_runs_;

  // ZeRO-3 splits each group of parameters (GptModel::parameter_groups),
  // padded to a multiple of dp, into dp equal pieces, as DeepSpeed's stage 3
  // splits each parameter: piece r of every group is rank r's. A group is
  // gathered whole (one all-gather) into one of two buffers before each
  // pass over it, the next group's prefetched into the other with overlap;
  // its gradients are reduce-scattered to the pieces.
  struct GroupShard {
    int chunk;
    std::int64_t begin, end;  // flat
    std::int64_t piece;       // elements of each rank's piece
    std::int64_t shard_at;    // this rank's piece in the shard
  };
  std::vector<GroupShard> group_shards_;
  struct WeightGather {
    Tensor buffer;  // compute type, the largest padded group
    int group = -1;
    bool backward = false;
    bool pending = false;  // launched, not waited for
    std::uint64_t ticket = 0;
  };
  WeightGather gathers_[2];

  struct Bucket {
    std::int64_t begin, end;
    bool launched = false;
    std::uint64_t ticket = 0;
  };
  std::vector<Bucket> buckets_;  // from the end of the buffer to its start

  // ZeRO-2 as DeepSpeed's stage 2 runs it: two bucket buffers take turns.
  // Backward writes groups of whole parameters into one, from the top down,
  // until the next group would not fit; then the bucket is reduced, piece by
  // piece, to the ranks whose shards hold them (in the background with
  // overlap), while backward fills the other. A buffer is used again once
  // its reductions have ended and its owner added its piece to its shard.
  struct GradientStage {
    Tensor buffer;  // fp32, stage_capacity_: flat offset x at x - (end - capacity)
    std::int64_t begin = 0, end = 0;  // the flat range held; empty when equal
    bool launched = false;
    struct Piece {
      std::uint64_t ticket;
      std::int64_t buffer_at, shard_at, count;
      bool mine;  // this rank's shard holds it
    };
    std::vector<Piece> pieces;  // launched, not yet ended
  };
  GradientStage stages_[2];
  int filling_ = 0;  // the stage backward writes into
  std::int64_t stage_capacity_ = 0;
  int step_ = 0;
  int adam_updates_ = 0;  // updates applied: Adam's step count, skipped steps left out
  float loss_scale_ = 1.0f;
  int clean_steps_ = 0;
};

}  // namespace cs::worker
