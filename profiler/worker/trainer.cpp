#include "profiler/worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/predicted_step.h"
#include "core/rank_order.h"
#include "core/trace_writer.h"
#include "profiler/worker/corpus.h"
#include "profiler/worker/op_tracer.h"

namespace cs::worker {

namespace {

struct ScheduledOp {
  bool forward;
  int micro_batch;
};

// Pipeline 1F1B (Narayanan et al. 2021): stage s of p runs p - s - 1 warm-up
// forwards, then alternates one forward and one backward, then drains the
// backwards. Without a pipeline it is forward, backward per micro-batch.
std::vector<ScheduledOp> one_f_one_b(int pp, int stage, int micro_batches) {
  const int warmup = std::min(pp - stage - 1, micro_batches);
  std::vector<ScheduledOp> ops;
  int next_forward = 0;
  int next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({true, next_forward});
  while (next_forward < micro_batches) {
    ops.push_back({true, next_forward++});
    ops.push_back({false, next_backward++});
  }
  while (next_backward < micro_batches) ops.push_back({false, next_backward++});
  return ops;
}

// "training diverged: the loss is nan at step 3 (is the learning rate 0.1
// too large?)": `step` counted from 1, as the progress lines count; `note`
// follows the step.
std::runtime_error divergence(const char* what, double value, int step, const char* note,
                              float lr) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", static_cast<double>(lr));
  return std::runtime_error(std::string("training diverged: the ") + what + " is " +
                            (std::isnan(value) ? "nan" : "infinite") + " at step " +
                            std::to_string(step) + note + " (is the learning rate " + rate +
                            " too large?)");
}

}  // namespace

Trainer::Trainer(Backend& backend, Communicator& dp, Communicator& tp, Communicator& pp,
                 const TrainConfig& config, std::string_view corpus, OpTracer* tracer)
    : backend_(backend),
      dp_(dp),
      tp_(tp),
      pp_(pp),
      config_(config),
      tracer_(tracer),
      corpus_(corpus) {
  if (config_.zero_stage < 0 || config_.zero_stage > 2) {
    throw std::invalid_argument("the worker implements ZeRO stages 0, 1 and 2");
  }
  const int slots = std::min(config_.pp - config_.pp_rank, config_.accumulation);
  ModelParallel mp{config_.tp, config_.tp_rank, config_.pp, config_.pp_rank};
  model_ = std::make_unique<GptModel>(
      backend_, config_.model, mp, config_.compute, config_.micro_batch, std::max(1, slots),
      config_.tp > 1 ? &tp_ : nullptr, config_.recompute,
      [this](std::string_view what, std::int64_t start_ns) { annotate(what, start_ns); });

  n_ = model_->num_params();
  sharded_ = config_.zero_stage >= 1 && config_.dp > 1;
  staged_ = config_.zero_stage == 2 && config_.dp > 1;
  padded_ = sharded_ ? (n_ + config_.dp - 1) / config_.dp * config_.dp : n_;
  shard_ = sharded_ ? padded_ / config_.dp : padded_;

  weights_ = backend_.alloc(padded_, config_.compute, "weights");
  if (!staged_) grads_ = backend_.alloc(padded_, DType::f32, "gradients");
  Tensor full_master = backend_.alloc(padded_, DType::f32, "init");
  model_->initialize(config_.seed, full_master.slice(0, n_));

  const std::int64_t shard_begin = sharded_ ? config_.dp_rank * shard_ : 0;
  if (config_.compute == DType::f32) {
    backend_.convert(weights_, full_master);
    master_ = weights_.slice(shard_begin, shard_);
    master_aliases_weights_ = true;
  } else {
    backend_.convert(weights_, full_master);
    master_ = backend_.alloc(shard_, DType::f32, "master weights");
    backend_.convert(master_, full_master.slice(shard_begin, shard_));
  }
  backend_.release(full_master);
  adam_m_ = backend_.alloc(shard_, DType::f32, "adam.m");
  adam_v_ = backend_.alloc(shard_, DType::f32, "adam.v");
  // ZeRO-1 reduce-scatters inside the gradient buffer, as Megatron's
  // distributed optimizer does: the shard is a view, no second fp32 copy.
  if (sharded_ && !staged_) grad_shard_ = grads_.slice(shard_begin, shard_);
  scalar_ = backend_.alloc(1, DType::f32, "loss");
  model_->bind_weights(weights_.slice(0, n_));
  if (staged_) {
    grad_shard_ = backend_.alloc(shard_, DType::f32, "gradients");
    // A bucket holds whole groups: at least the largest one, and no more
    // than the whole model.
    std::int64_t largest_group = 0;
    std::int64_t group_end = n_;
    for (std::int64_t begin : model_->gradient_group_begins()) {
      largest_group = std::max(largest_group, group_end - begin);
      group_end = begin;
    }
    const std::int64_t per_bucket = std::max<std::int64_t>(1, config_.bucket_bytes / 4);
    stage_capacity_ = std::min(n_, std::max(largest_group, per_bucket));
    for (GradientStage& stage : stages_) {
      stage.buffer = backend_.alloc(stage_capacity_, DType::f32, "gradient bucket");
    }
    model_->set_gradient_window(
        [this](std::int64_t begin, std::int64_t end) { return open_gradient_group(begin, end); });
  } else {
    model_->bind_gradients(grads_.slice(0, n_));
  }

  if (config_.dynamic_loss_scale) loss_scale_ = config_.initial_loss_scale;
  if (config_.dp > 1 && !sharded_) {
    const std::int64_t per_bucket = std::max<std::int64_t>(1, config_.bucket_bytes / 4);
    for (std::int64_t end = n_; end > 0; end -= per_bucket) {
      buckets_.push_back({std::max<std::int64_t>(0, end - per_bucket), end});
    }
  }
}

Trainer::~Trainer() {
  for (Tensor* t : {&weights_, &adam_m_, &adam_v_, &scalar_}) {
    backend_.release(*t);
  }
  if (staged_) {
    backend_.release(grad_shard_);
    for (GradientStage& stage : stages_)
      backend_.release(stage.buffer);
  } else {
    backend_.release(grads_);
  }
  if (!master_aliases_weights_) backend_.release(master_);
}

void Trainer::annotate(std::string_view what, std::int64_t start_ns) {
  if (!tracer_) return;
  tracer_->record(tracer_->phase_lane(), trace::EventKind::annotation, trace::Category::other,
                  start_ns, OpTracer::now_ns(), what);
}

void Trainer::launch_ready_buckets(std::int64_t ready_from) {
  for (Bucket& b : buckets_) {
    if (!b.launched && b.begin >= ready_from) {
      b.launched = true;
      b.ticket = dp_.all_reduce_async(grads_.slice(b.begin, b.end - b.begin));
    }
  }
}

Tensor Trainer::open_gradient_group(std::int64_t begin, std::int64_t end) {
  GradientStage* stage = &stages_[filling_];
  const bool empty = stage->begin == stage->end;
  if (stage->launched || (!empty && stage->end - begin > stage_capacity_)) {
    if (!stage->launched) launch_stage(*stage);
    filling_ ^= 1;
    stage = &stages_[filling_];
    finish_stage(*stage);
  }
  if (stage->begin == stage->end) stage->begin = stage->end = end;
  if (end != stage->begin || end - begin > stage_capacity_) {
    throw std::logic_error("ZeRO-2: a group of gradients out of order or larger than a bucket");
  }
  stage->begin = begin;
  Tensor group = stage->buffer.slice(begin - (stage->end - stage_capacity_), end - begin);
  backend_.zero(group);
  return group;
}

void Trainer::launch_stage(GradientStage& stage) {
  const std::int64_t base = stage.end - stage_capacity_;
  for (int r = 0; r < config_.dp; ++r) {
    const std::int64_t lo = std::max(stage.begin, r * shard_);
    const std::int64_t hi = std::min(stage.end, (r + 1) * shard_);
    if (lo >= hi) continue;
    const auto ticket = dp_.reduce_async(stage.buffer.slice(lo - base, hi - lo), r);
    stage.pieces.push_back({ticket, lo, hi, r == config_.dp_rank});
  }
  stage.launched = true;
  if (!config_.overlap_dp) finish_stage(stage);
}

void Trainer::finish_stage(GradientStage& stage) {
  const std::int64_t base = stage.end - stage_capacity_;
  const std::int64_t shard_begin = config_.dp_rank * shard_;
  for (const GradientStage::Piece& piece : stage.pieces) {
    dp_.wait(piece.ticket);
    const std::int64_t count = piece.end - piece.begin;
    if (piece.mine) {
      backend_.accumulate(grad_shard_.slice(piece.begin - shard_begin, count),
                          stage.buffer.slice(piece.begin - base, count));
    }
  }
  stage.pieces.clear();
  stage.launched = false;
  stage.begin = stage.end = 0;
}

void Trainer::reduce_gradients() {
  if (config_.dp == 1) return;
  const std::int64_t start = tracer_ ? OpTracer::now_ns() : 0;
  const float average = 1.0f / config_.dp;
  if (staged_) {
    // Each micro-batch's buckets were reduced as backward went; the last
    // ones may still be on their way. The older stage ends first.
    finish_stage(stages_[filling_ ^ 1]);
    finish_stage(stages_[filling_]);
    backend_.scale(grad_shard_, average);
  } else if (sharded_) {
    dp_.wait(dp_.reduce_scatter_async(grads_, grad_shard_));
    backend_.scale(grad_shard_, average);
  } else {
    launch_ready_buckets(0);
    for (Bucket& b : buckets_) dp_.wait(b.ticket);
    backend_.scale(grads_, average);
  }
  annotate("gradient reduction", start);
}

double Trainer::gradient_norm() {
  const std::int64_t begin = sharded_ ? config_.dp_rank * shard_ : 0;
  const std::int64_t end = std::min(n_, begin + shard_);
  const Tensor grads = sharded_ ? grad_shard_ : grads_;  // element i is flat offset begin + i
  // One sum per run of adjacent parameters counted (all of them but a
  // tensor-parallel copy): a sum per parameter cost the CUDA engine a copy
  // to the host and a wait each, about 150 a step.
  double local = 0;
  std::int64_t run_lo = 0, run_hi = 0;  // the run not summed yet, as flat offsets
  auto sum_run = [&] {
    if (run_lo < run_hi)
      local += backend_.sum_of_squares(grads.slice(run_lo - begin, run_hi - run_lo));
    run_lo = run_hi = 0;
  };
  for (const ParamInfo& p : model_->params()) {
    if (p.replicated_over_tp && config_.tp_rank != 0) {
      sum_run();
      continue;
    }
    const std::int64_t lo = std::max(p.offset, begin);
    const std::int64_t hi = std::min(p.offset + p.numel(), end);
    if (lo >= hi) continue;
    if (run_lo < run_hi && lo == run_hi) {
      run_hi = hi;
    } else {
      sum_run();
      run_lo = lo;
      run_hi = hi;
    }
  }
  sum_run();
  float total = static_cast<float>(local);
  backend_.upload(scalar_, &total);
  if (config_.tp > 1) tp_.all_reduce(scalar_);
  if (config_.pp > 1) pp_.all_reduce(scalar_);
  if (sharded_) dp_.all_reduce(scalar_);
  backend_.download(&total, scalar_);
  return std::sqrt(static_cast<double>(total));
}

void Trainer::optimizer_step() {
  const std::int64_t start = tracer_ ? OpTracer::now_ns() : 0;
  const std::int64_t shard_begin = sharded_ ? config_.dp_rank * shard_ : 0;
  Tensor grads = sharded_ ? grad_shard_ : grads_;
  // Adam counts the updates it applied, not the steps: a step skipped for
  // overflowed gradients is none (as PyTorch's GradScaler and Megatron skip it).
  backend_.adamw(master_, grads, adam_m_, adam_v_, config_.lr, config_.beta1, config_.beta2,
                 config_.eps, config_.weight_decay, ++adam_updates_);
  if (!master_aliases_weights_) backend_.convert(weights_.slice(shard_begin, shard_), master_);
  if (sharded_) {
    // Every rank updated its shard; all gather the new weights.
    dp_.wait(dp_.all_gather_async(weights_.slice(shard_begin, shard_), weights_));
  }
  annotate("optimizer", start);
}

StepResult Trainer::step() {
  const std::int64_t step_start = OpTracer::now_ns();
  if (tracer_) tracer_->set_step(step_);
  backend_.zero(staged_ ? grad_shard_ : grads_);
  for (Bucket& b : buckets_) b.launched = false;

  const int M = config_.accumulation;
  const int B = config_.micro_batch;
  const GptModel& model = *model_;
  Sampler sampler(corpus_, config_.model.seq, config_.seed);
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> targets;
  const int replica_first = config_.dp_rank * B * M;
  const int slots = std::max(1, std::min(config_.pp - config_.pp_rank, M));
  const bool overlap = config_.overlap_dp && !buckets_.empty();

  double loss_sum = 0;
  for (const ScheduledOp& op : one_f_one_b(config_.pp, config_.pp_rank, M)) {
    const int slot = op.micro_batch % slots;
    const std::int64_t start = tracer_ ? OpTracer::now_ns() : 0;
    if (op.forward) {
      if (!model.first_stage()) pp_.recv(model_->stage_input(slot), config_.pp_rank - 1);
      sampler.fill(step_, replica_first + op.micro_batch * B, B, tokens, targets);
      loss_sum += model_->forward(slot, tokens.data(), targets.data());
      if (!model.last_stage()) pp_.send(model_->stage_output(slot), config_.pp_rank + 1);
      annotate("forward " + std::to_string(op.micro_batch), start);
    } else {
      if (!model.last_stage()) pp_.recv(model_->output_grad(), config_.pp_rank + 1);
      const bool last = op.micro_batch == M - 1;
      model_->backward(slot, loss_scale_ / M, [&](std::int64_t ready_from) {
        if (last && overlap) launch_ready_buckets(ready_from);
      });
      // ZeRO-2: the micro-batch's last bucket goes now, under the next forward.
      GradientStage& filling = stages_[filling_];
      if (staged_ && filling.end > filling.begin && !filling.launched) launch_stage(filling);
      if (!model.first_stage()) {
        pp_.send(model_->input_grad(), config_.pp_rank - 1);
        // The gradient buffer is reused by the next backward: the send must end first.
        pp_.wait_sends();
      }
      annotate("backward " + std::to_string(op.micro_batch), start);
    }
  }
  pp_.wait_sends();
  reduce_gradients();
  bool skipped = false;
  const float used_scale = loss_scale_;
  if (config_.dynamic_loss_scale) {
    skipped = gradients_overflowed();
    if (skipped) {
      loss_scale_ = std::max(1.0f, loss_scale_ / 2);
      clean_steps_ = 0;
    } else {
      backend_.scale(sharded_ ? grad_shard_ : grads_, 1.0f / used_scale);
      if (++clean_steps_ == config_.loss_scale_window) {
        loss_scale_ = std::max(loss_scale_, std::min(loss_scale_ * 2, config_.max_loss_scale));
        clean_steps_ = 0;
      }
    }
  }
  // Overflowed gradients have no norm worth reporting: infinity (null in JSON).
  const double grad_norm = skipped ? std::numeric_limits<double>::infinity() : gradient_norm();
  if (!skipped && !std::isfinite(grad_norm)) {
    // Applied, they made every weight NaN, and the run stopped a step later
    // on its loss, naming the wrong step. The norm is the whole model's on
    // every rank (reduced over tp, pp and ZeRO's shards; dp's gradients are
    // already the same): all stop here together.
    throw divergence("gradient norm", grad_norm, step_ + 1, "; the weights were not updated",
                     config_.lr);
  }
  if (!skipped) optimizer_step();

  // The step's loss: the last stage's mean, averaged over replicas, sent to
  // every stage.
  float loss = model.last_stage() ? static_cast<float>(loss_sum / M) : 0.0f;
  backend_.upload(scalar_, &loss);
  if (config_.dp > 1) dp_.all_reduce(scalar_);
  if (config_.pp > 1) pp_.all_reduce(scalar_);
  backend_.download(&loss, scalar_);
  if (config_.dp > 1) loss /= config_.dp;
  backend_.synchronize();
  if (!std::isfinite(loss)) {
    // Every rank holds the same reduced loss, so all stop here together; the
    // steps recorded so far stay in the store (a NaN loss cannot be stored).
    throw divergence("loss", loss, step_ + 1, "", config_.lr);
  }

  const std::int64_t step_end = OpTracer::now_ns();
  StepResult r;
  r.step = step_;
  r.loss = loss;
  r.seconds = (step_end - step_start) * 1e-9;
  r.tokens = static_cast<double>(config_.global_batch()) * config_.model.seq;
  r.loss_scale = config_.dynamic_loss_scale ? used_scale : 0;
  r.skipped = skipped;
  r.grad_norm = grad_norm;
  if (tracer_) {
    tracer_->record(tracer_->steps_lane(), trace::EventKind::step, trace::Category::other,
                    step_start, step_end, "step " + std::to_string(step_));
    trace::StepMetrics m;
    m.rank = tracer_->rank();
    m.step = step_;
    m.start_ns = step_start;
    m.end_ns = step_end;
    m.loss = loss;
    m.tokens = r.tokens / config_.dp;
    m.loss_scale = r.loss_scale;
    tracer_->writer().add(m);
    record_memory(step_end);
  }
  ++step_;
  return r;
}

// What the rank's tensors hold as the step ends, whole and by the parts a
// prediction holds (kMemoryPartNames): the rest of what is in use, the
// backend's scratch and the gradient buffers, is the workspace.
void Trainer::record_memory(std::int64_t at_ns) {
  const std::int64_t in_use = backend_.bytes_in_use();
  const std::int64_t weights = weights_.bytes();
  // ZeRO-1's shard is a view of the whole buffer; ZeRO-2's buckets are workspace.
  const std::int64_t gradients = staged_ ? grad_shard_.bytes() : grads_.bytes();
  const std::int64_t optimizer =
      (master_aliases_weights_ ? 0 : master_.bytes()) + adam_m_.bytes() + adam_v_.bytes();
  const std::int64_t activations = model_->activation_bytes();
  const std::int64_t parts[] = {weights, gradients, optimizer, activations,
                                in_use - weights - gradients - optimizer - activations};
  static_assert(std::size(parts) == std::size(trace::kMemoryPartNames));
  tracer_->counter("memory in use (bytes)", at_ns, static_cast<double>(in_use));
  for (std::size_t i = 0; i < std::size(parts); ++i) {
    tracer_->counter(trace::memory_part_counter(trace::kMemoryPartNames[i].label), at_ns,
                     static_cast<double>(parts[i]));
  }
}

// Every rank must skip together: any rank's overflow counts.
bool Trainer::gradients_overflowed() {
  float overflow = backend_.all_finite(sharded_ ? grad_shard_ : grads_) ? 0.0f : 1.0f;
  backend_.upload(scalar_, &overflow);
  if (config_.dp > 1) dp_.all_reduce(scalar_);
  if (config_.tp > 1) tp_.all_reduce(scalar_);
  if (config_.pp > 1) pp_.all_reduce(scalar_);
  backend_.download(&overflow, scalar_);
  return overflow > 0;
}

std::vector<float> Trainer::local_weights() {
  std::vector<float> out(static_cast<std::size_t>(n_));
  Tensor whole = backend_.alloc(padded_, DType::f32, "weights export");
  if (sharded_) {
    // The fp32 master is sharded: gather it.
    dp_.wait(dp_.all_gather_async(master_, whole));
  } else {
    backend_.convert(whole, master_aliases_weights_ ? weights_ : master_);
  }
  std::vector<float> host(static_cast<std::size_t>(padded_));
  backend_.download(host.data(), whole);
  backend_.release(whole);
  std::copy(host.begin(), host.begin() + n_, out.begin());
  return out;
}

std::vector<float> Trainer::gather_full_weights(Communicator& world) {
  // Every rank takes part in the ZeRO gather; replicas 1.. hold copies.
  std::vector<float> mine = local_weights();
  const GptConfig& c = config_.model;
  const std::vector<ParamInfo> canonical = gpt_parameter_layout(c, ModelParallel{});
  std::int64_t total = 0;
  for (const ParamInfo& p : canonical) total += p.numel();

  Tensor buffer{};
  if (world.rank() != 0) {
    if (config_.dp_rank == 0) {
      buffer = backend_.alloc(n_, DType::f32, "weights export");
      backend_.upload(buffer, mine.data());
      world.send(buffer, 0);
      world.wait_sends();
      backend_.release(buffer);
    }
    return {};
  }
  std::vector<float> full(static_cast<std::size_t>(total));
  auto place = [&](const std::vector<ParamInfo>& layout, const std::vector<float>& values) {
    for (const ParamInfo& p : layout) {
      const ParamInfo* target = nullptr;
      for (const ParamInfo& q : canonical) {
        if (q.name == p.name) target = &q;
      }
      for (std::size_t i = 0; i < p.rows.size(); ++i) {
        for (std::int64_t j = 0; j < p.cols; ++j) {
          full[target->offset + p.rows[i] * p.full_cols + p.col_begin + j] =
              values[p.offset + i * p.cols + j];
        }
      }
    }
  };
  for (int pp_rank = 0; pp_rank < config_.pp; ++pp_rank) {
    for (int tp_rank = 0; tp_rank < config_.tp; ++tp_rank) {
      const int source = RankOrder{config_.dp, config_.tp, config_.pp}.rank({0, tp_rank, pp_rank});
      const auto layout = gpt_parameter_layout(c, ModelParallel{config_.tp, tp_rank, config_.pp, pp_rank});
      if (source == 0) {
        place(layout, mine);
        continue;
      }
      std::int64_t count = 0;
      for (const ParamInfo& p : layout) count += p.numel();
      buffer = backend_.alloc(count, DType::f32, "weights import");
      world.recv(buffer, source);
      std::vector<float> values(static_cast<std::size_t>(count));
      backend_.download(values.data(), buffer);
      backend_.release(buffer);
      place(layout, values);
    }
  }
  return full;
}

}  // namespace cs::worker
