#pragma once
// A GPT-style decoder (token and position embeddings, L blocks of causal
// multi-head self-attention and a GELU MLP with pre-layer norms and residual
// connections, a final layer norm, an untied LM head, cross-entropy) with
// its own forward and backward passes, written once against Backend.
//
// Parallelism inside the model: tensor parallelism splits attention by heads
// and the MLP by its inner width (Megatron: QKV and fc column-parallel,
// the projections row-parallel, an all-reduce after each in forward and
// before each layer norm in backward); pipeline parallelism gives each stage
// a contiguous range of layers (the first holds the embeddings, the last the
// final norm and the LM head). Data parallelism and ZeRO live in the trainer.
//
// Sequence parallelism (Korthikanti et al. 2022, Megatron-LM's
// --sequence-parallel): outside the tensor-parallel GEMMs each rank keeps a
// tp-th of the micro-batch's tokens (the residual stream, the layer norms
// and what they keep for backward); an all-gather of the tokens comes before
// each column-parallel GEMM (again in backward, for the weight gradient) and
// a reduce-scatter replaces the all-reduce after each row-parallel one (in
// backward the other way round). The tokens are split in runs of rows of the
// [B, T] batch, as Megatron's [T, B] layout splits them by sequence
// position: every op out there is per token, so any split computes the
// same. The layer norms' weight gradients, summed over a rank's tokens, are
// all-reduced over the tensor-parallel group.
//
// Activation recomputation, as Megatron's: selective keeps no attention
// scores and recomputes them (the attention core's forward) before the
// attention's backward; full keeps only each layer's input and runs the
// whole layer's forward again, its tensor-parallel all-reduces included,
// before the layer's backward. What they recompute goes into buffers of one
// layer shared by all layers and slots (the workspace, not the activations).
//
// Parameters of this rank sit in one flat buffer, embeddings first and the LM
// head last, so that backward produces gradients from the end of the buffer
// towards its start (what bucketed data-parallel reduction relies on).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/worker/backend.h"
#include "profiler/worker/comm.h"

namespace cs {
enum class Recompute;  // core/plans.h
}

namespace cs::worker {

struct GptConfig {
  int vocab = 256;   // byte-level tokens
  int seq = 64;      // T
  int layers = 2;    // L
  int hidden = 64;   // C
  int heads = 4;     // NH
  int ffn = 256;     // F, usually 4C
};

struct ModelParallel {
  int tp = 1;
  int tp_rank = 0;
  int pp = 1;
  int pp_rank = 0;
  // Megatron's sequence parallelism (tp > 1): see GptModel.
  bool sequence_parallel = false;
};

// The rows and columns of a parameter's full (unsplit) matrix that this rank
// holds: element (i, j) of the shard is (rows[i], col_begin + j) of the full one.
struct ParamInfo {
  std::string name;
  std::int64_t full_rows = 0;
  std::int64_t full_cols = 1;     // 1 for vectors
  std::vector<std::int64_t> rows;  // full-matrix rows held, in order
  std::int64_t col_begin = 0;
  std::int64_t cols = 1;          // columns held
  std::int64_t offset = 0;        // in the flat buffer
  float init_std = 0;             // normal(0, std); 0 means constant init_value
  float init_value = 0;
  bool replicated_over_tp = true;

  std::int64_t numel() const { return static_cast<std::int64_t>(rows.size()) * cols; }
};

// The parameters a rank holds, in flat-buffer order, for any split; the
// unsplit layout (tp = pp = 1) is the canonical order of a whole model.
std::vector<ParamInfo> gpt_parameter_layout(const GptConfig& config, const ModelParallel& parallel);

// The groups of parameters that are gathered, and whose gradients are
// produced, together: the embeddings (first stage), each layer, the final
// norm and the LM head (last stage). Flat ranges [begin, end) of `layout`,
// in flat (forward) order; backward produces them in the reverse order.
struct ParameterGroup {
  std::int64_t begin = 0, end = 0;
};
std::vector<ParameterGroup> gpt_parameter_groups(const std::vector<ParamInfo>& layout);

// What one micro-batch leaves on a stage's layers for backward: each
// layer's input, the stage's output and what each layer keeps.
struct ActivationStack;

// Activation stacks shared by the model chunks of one rank (the
// interleaved schedule), whose chunks have as many layers each: a stack a
// chunk's backward gives back serves any chunk's next forward, so the rank
// holds as many as it has micro-batches in flight at once, as Megatron
// does, not each chunk's most in flight. Outlives the models using it.
class ActivationPool {
 public:
  explicit ActivationPool(Backend& backend) : backend_(backend) {}
  ~ActivationPool();
  ActivationPool(const ActivationPool&) = delete;
  ActivationPool& operator=(const ActivationPool&) = delete;
  std::int64_t bytes() const { return bytes_; }  // every stack made, in use or not

 private:
  friend class GptModel;
  Backend& backend_;
  std::vector<ActivationStack*> all_, free_;
  std::int64_t bytes_ = 0;
};

class GptModel {
 public:
  // `tp_comm` is null when tp == 1. `slots` activation sets are kept, one per
  // micro-batch in flight (pipeline 1F1B keeps up to pp - stage).
  // `annotate` (may be empty) is told each recomputation's name and start
  // as it ends, for the trace's phases.
  // With `pool`, a slot's activation stack is claimed from it (claim) and
  // given back (release) instead of being the slot's own.
  GptModel(Backend& backend, const GptConfig& config, const ModelParallel& parallel, DType compute,
           int micro_batch, int slots, Communicator* tp_comm, Recompute recompute,
           std::function<void(std::string_view, std::int64_t)> annotate = {},
           ActivationPool* pool = nullptr);
  ~GptModel();
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  const GptConfig& config() const { return config_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  std::int64_t num_params() const { return num_params_; }  // this rank, unpadded
  bool first_stage() const { return parallel_.pp_rank == 0; }
  bool last_stage() const { return parallel_.pp_rank == parallel_.pp - 1; }
  int micro_batch() const { return B_; }
  // Floating-point work of one micro-batch's forward on this rank (GEMMs and attention).
  double forward_flops() const;
  // Bytes of the activations every slot keeps for backward (with the
  // tokens and targets; a pool's stacks are the pool's to count);
  // recomputation's one-layer buffers are not counted.
  std::int64_t activation_bytes() const;
  // With a pool: takes a stack for `slot` before its micro-batch's receive
  // or forward, and gives it back after its backward (once nothing reads
  // the stage output any more). Without one, nothing to do.
  void claim(int slot);
  void release(int slot);

  // Fills fp32 master values from `seed`, the same numbers whatever the split,
  // so that a split run starts from exactly the unsplit model's weights.
  void initialize(std::uint64_t seed, Tensor master);
  // Points the model at its weights in the compute type (flat, num_params()).
  void bind_weights(Tensor weights) {
    weights_ = weights;
    weights_view_ = weights;
    weights_base_ = 0;
  }
  // gpt_parameter_groups of this rank's parameters.
  const std::vector<ParameterGroup>& parameter_groups() const { return groups_; }
  // ZeRO-3 keeps no whole weights: before each group's forward and again
  // before its backward, the model asks `window` for a buffer (compute type,
  // end - begin elements) holding the group's weights and reads them there.
  using WeightWindow = std::function<Tensor(std::int64_t begin, std::int64_t end, bool backward)>;
  void set_weight_window(WeightWindow window) { weight_window_ = std::move(window); }
  // Parameter gradients (fp32, flat) that backward accumulates into.
  void bind_gradients(Tensor grads) { grads_ = grads; }
  // ZeRO-2 keeps no whole gradient buffer: before each group of parameters
  // (the head, a layer, the embeddings: flat range [begin, end), from the end
  // of the buffer towards its start) backward asks `window` for a zeroed
  // fp32 buffer of end - begin elements and writes that group's gradients
  // there, in place of the bound buffer.
  using GradientWindow = std::function<Tensor(std::int64_t begin, std::int64_t end)>;
  void set_gradient_window(GradientWindow window) { window_ = std::move(window); }

  // The residual stream entering this stage (written by the pipeline's
  // receive on later stages) and leaving it (sent to the next stage).
  Tensor stage_input(int slot) const;
  Tensor stage_output(int slot) const;
  // Gradient of the loss with respect to stage_output (received from the
  // next stage) and to stage_input (sent to the previous stage).
  Tensor output_grad() const { return d_output_; }
  Tensor input_grad() const { return d_residual_; }

  // Forward of one micro-batch in activation slot `slot`. tokens/targets are
  // host arrays of B*T ids (tokens used on the first stage, targets on the
  // last). Returns the mean loss on the last stage, else 0.
  double forward(int slot, const std::int32_t* tokens, const std::int32_t* targets);
  // Backward of the micro-batch in `slot`; dloss scales the loss gradient
  // (1 / micro-batches, times the loss scale). After each layer's parameter
  // gradients are final for this micro-batch, calls on_grads_ready with the
  // lowest flat offset whose gradients are now complete.
  void backward(int slot, float dloss, const std::function<void(std::int64_t)>& on_grads_ready);

 private:
  friend struct ActivationStack;
  // What one layer's forward leaves for its backward.
  struct LayerActivations {
    Tensor ln1, ln1_mean, ln1_rstd, qkv, att, atty, residual2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu;
    template <class F>
    void for_each(F f) {
      for (Tensor* t : {&ln1, &ln1_mean, &ln1_rstd, &qkv, &att, &atty, &residual2, &ln2, &ln2_mean,
                        &ln2_rstd, &fch, &fch_gelu})
        f(*t);
    }
  };
  struct Slot;
  ActivationStack* make_stack();
  // The slot's stack; a logic error when a pool's slot has not claimed one.
  ActivationStack& stack_of(int slot) const;
  Tensor weight(int index) const;
  Tensor grad(int index) const;
  void alloc_activations();
  LayerActivations allocate_layer(bool with_scores);
  // Layer `li`'s activations in `slot`, or the recomputation buffers where
  // they are not kept.
  LayerActivations layer(Slot& slot, int li) const;
  // One layer's forward from `input` into `output` (output empty: the
  // residual add is left out, as backward does not read it).
  void layer_forward(int li, const LayerActivations& a, Tensor input, Tensor output,
                     Tensor projection);

  Backend& backend_;
  GptConfig config_;
  ModelParallel parallel_;
  DType compute_;
  int B_;
  int slot_count_;
  Communicator* tp_comm_;
  Recompute recompute_;
  std::function<void(std::string_view, std::int64_t)> annotate_;
  ActivationPool* pool_;
  int first_layer_ = 0;
  int last_layer_ = 0;
  int local_heads_ = 0;
  int local_ffn_ = 0;

  std::vector<ParamInfo> params_;
  std::int64_t num_params_ = 0;
  // Index of each named parameter: embeddings, per-layer block, final.
  int wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, lm_head_ = -1;
  struct LayerParams {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
  };
  std::vector<LayerParams> layer_params_;

  // Opens group `index` of groups_ for a pass: its weights (and, in
  // backward, its gradients) are read and written where the windows say.
  void open_group(std::size_t index, bool backward);

  std::vector<ParameterGroup> groups_;
  // Sequence parallelism: the rows in tp-th that the norms compute on
  // (N / tp of the micro-batch's N tokens; N without it).
  bool sp_ = false;
  int rows_ = 0;
  // Its buffers: a gathered layer-norm output (forward and backward), a
  // row-parallel GEMM's output before its reduce-scatter, the residual
  // gradient gathered, a norm's input gradient after its reduce-scatter,
  // the final norm's rows before their gather, and a norm's weight
  // gradients before their all-reduce.
  Tensor gathered_, proj_full_, d_full_, d_ln_rows_, lnf_rows_, norm_grads_;
  // The layer-norm input `rows` (this rank's rows under sequence
  // parallelism) gathered to every row for a column-parallel GEMM.
  Tensor all_rows(Tensor rows, Tensor into);
  // Layer norm backward over this rank's rows, whose weight and bias
  // gradients are summed over the tensor-parallel group's rows under
  // sequence parallelism.
  void norm_backward(Tensor dinp, int weight_index, int bias_index, Tensor dout, Tensor inp,
                     Tensor mean, Tensor rstd);

  Tensor weights_;
  Tensor grads_;
  GradientWindow window_;
  WeightWindow weight_window_;
  // Where weight() points: weights_, or the window's buffer of the group
  // being computed, whose first flat offset is weights_base_.
  Tensor weights_view_;
  std::int64_t weights_base_ = 0;
  // Where grad() points: grads_, or the window's buffer of the group that
  // backward is producing, whose first flat offset is grads_base_.
  Tensor grads_view_;
  std::int64_t grads_base_ = 0;
  std::vector<Slot*> slots_;
  // Gradient buffers shared by all slots (one backward at a time).
  Tensor d_residual_, d_ln_, d_qkv_, d_atty_, d_fch_, d_fch_gelu_, d_output_, tokens_, targets_;
  // Recomputation's buffers of one layer, shared by all layers and slots:
  // full, a whole layer's; selective, the scores and the attention output.
  LayerActivations recomputed_;
};

}  // namespace cs::worker
