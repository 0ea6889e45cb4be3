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

// Model chunk `chunk` of pipeline rank `pp_rank` is virtual stage
// chunk x pp + pp_rank of pp x virtual_stages: its layers, and the
// embeddings or the head where that virtual stage is the first or the last.
ModelParallel chunk_parallel(const TrainConfig& config, int tp_rank, int pp_rank, int chunk) {
  return {config.tp, tp_rank, config.pp * config.virtual_stages, chunk * config.pp + pp_rank,
          config.sequence_parallel};
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
  if (config_.zero_stage < 0 || config_.zero_stage > 3) {
    throw std::invalid_argument("the worker implements ZeRO stages 0 to 3");
  }
  const int v = config_.virtual_stages;
  if (v < 1) throw std::invalid_argument("virtual stages must be >= 1");
  if (v > 1 && (config_.pp < 2 || config_.accumulation % config_.pp != 0)) {
    throw std::invalid_argument(
        "the interleaved schedule needs a pipeline (pp >= 2) and the micro-batches per step (" +
        std::to_string(config_.accumulation) + ") a multiple of pp (" + std::to_string(config_.pp) +
        ")");
  }
  if (config_.model.layers % (config_.pp * v) != 0) {
    throw std::invalid_argument("pp x virtual stages = " + std::to_string(config_.pp * v) +
                                " must divide the " + std::to_string(config_.model.layers) +
                                " layers");
  }
  schedule_ = pipeline_schedule(config_.pp, config_.pp_rank, config_.accumulation, v);
  slots_ = pipeline_in_flight(schedule_, v);
  if (v > 1) activation_pool_ = std::make_unique<ActivationPool>(backend_);
  // Groups of parameters of all the chunks, in flat order.
  std::vector<ParameterGroup> groups;
  std::vector<int> group_chunk;
  for (int c = 0; c < v; ++c) {
    const ModelParallel mp = chunk_parallel(config_, config_.tp_rank, config_.pp_rank, c);
    auto& chunk = chunks_.emplace_back(std::make_unique<GptModel>(
        backend_, config_.model, mp, config_.compute, config_.micro_batch,
        std::max(1, slots_[static_cast<std::size_t>(c)]), config_.tp > 1 ? &tp_ : nullptr,
        config_.recompute,
        [this](std::string_view what, std::int64_t start_ns) { annotate(what, start_ns); },
        activation_pool_.get()));
    chunk_base_.push_back(n_);
    for (const ParameterGroup& g : chunk->parameter_groups()) {
      groups.push_back({n_ + g.begin, n_ + g.end});
      group_chunk.push_back(c);
    }
    n_ += chunk->num_params();
  }
  sharded_ = config_.zero_stage >= 1 && config_.dp > 1;
  staged_ = config_.zero_stage >= 2 && config_.dp > 1;
  gathered_ = config_.zero_stage == 3 && config_.dp > 1;
  std::int64_t largest_group = 0;
  for (const ParameterGroup& g : groups)
    largest_group = std::max(largest_group, g.end - g.begin);
  if (gathered_) {
    padded_ = n_;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const ParameterGroup& g = groups[i];
      const std::int64_t piece = (g.end - g.begin + config_.dp - 1) / config_.dp;
      group_shards_.push_back({group_chunk[i], g.begin, g.end, piece, shard_});
      const std::int64_t lo = std::min(g.end, g.begin + config_.dp_rank * piece);
      const std::int64_t hi = std::min(g.end, lo + piece);
      if (lo < hi) shard_runs_.push_back({lo, hi, shard_});
      shard_ += piece;
      largest_group = std::max(largest_group, piece * config_.dp);
    }
  } else {
    padded_ = sharded_ ? (n_ + config_.dp - 1) / config_.dp * config_.dp : n_;
    shard_ = sharded_ ? padded_ / config_.dp : padded_;
    const std::int64_t lo = std::min(n_, sharded_ ? config_.dp_rank * shard_ : 0);
    const std::int64_t hi = std::min(n_, lo + shard_);
    if (lo < hi) shard_runs_.push_back({lo, hi, 0});
  }

  weights_ = backend_.alloc(gathered_ ? shard_ : padded_, config_.compute, "weights");
  if (!staged_) grads_ = backend_.alloc(padded_, DType::f32, "gradients");
  Tensor full_master = backend_.alloc(padded_, DType::f32, "init");
  for (std::size_t c = 0; c < chunks_.size(); ++c)
    chunks_[c]->initialize(config_.seed,
                           full_master.slice(chunk_base_[c], chunks_[c]->num_params()));

  const std::int64_t shard_begin = sharded_ && !gathered_ ? config_.dp_rank * shard_ : 0;
  master_aliases_weights_ = config_.compute == DType::f32;
  if (gathered_) {
    // This rank's pieces of the groups; the padding past a group's end is 0.
    master_ =
        master_aliases_weights_ ? weights_ : backend_.alloc(shard_, DType::f32, "master weights");
    backend_.zero(master_);
    for (const ShardRun& run : shard_runs_) {
      const std::int64_t count = run.flat_end - run.flat_begin;
      backend_.convert(master_.slice(run.shard_at, count),
                       full_master.slice(run.flat_begin, count));
    }
    if (!master_aliases_weights_) backend_.convert(weights_, master_);
  } else if (master_aliases_weights_) {
    backend_.convert(weights_, full_master);
    master_ = weights_.slice(shard_begin, shard_);
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
  if (gathered_) {
    for (WeightGather& w : gathers_)
      w.buffer = backend_.alloc(largest_group, config_.compute, "gathered weights");
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      chunks_[c]->set_weight_window(
          [this, base = chunk_base_[c]](std::int64_t begin, std::int64_t, bool backward) {
            return open_weight_group(base + begin, backward);
          });
    }
  } else {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      chunks_[c]->bind_weights(weights_.slice(chunk_base_[c], chunks_[c]->num_params()));
  }
  if (staged_) {
    grad_shard_ = backend_.alloc(shard_, DType::f32, "gradients");
    // ZeRO-2: a bucket holds whole groups: at least the largest one, and no
    // more than the whole model. ZeRO-3: a bucket is a group, padded.
    const std::int64_t per_bucket = std::max<std::int64_t>(1, config_.bucket_bytes / 4);
    stage_capacity_ = gathered_ ? largest_group : std::min(n_, std::max(largest_group, per_bucket));
    for (GradientStage& stage : stages_) {
      stage.buffer = backend_.alloc(stage_capacity_, DType::f32, "gradient bucket");
    }
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      chunks_[c]->set_gradient_window(
          [this, base = chunk_base_[c]](std::int64_t begin, std::int64_t end) {
            return gathered_ ? open_sharded_gradients(base + begin, base + end)
                             : open_gradient_group(base + begin, base + end);
          });
    }
  } else {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      chunks_[c]->bind_gradients(grads_.slice(chunk_base_[c], chunks_[c]->num_params()));
  }
  if (v > 1) {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      std::vector<Tensor>& sends = gradient_sends_.emplace_back();
      if (chunks_[c]->first_stage()) continue;  // sends no input gradient
      const Tensor g = chunks_[c]->input_grad();
      for (int slot = 0; slot < slots_[c]; ++slot)
        sends.push_back(backend_.alloc(g.numel, g.dtype, "pipeline gradient sends"));
    }
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
  // No prefetch is in flight between steps (a pass's last group has no next).
  for (WeightGather& w : gathers_) {
    if (!w.buffer.empty()) backend_.release(w.buffer);
  }
  for (std::vector<Tensor>& sends : gradient_sends_) {
    for (Tensor& t : sends)
      backend_.release(t);
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
  // A group that does not continue the bucket downwards (interleaving
  // passes from one chunk to another) starts the next one.
  if (stage->launched ||
      (!empty && (end != stage->begin || stage->end - begin > stage_capacity_))) {
    if (!stage->launched) launch_stage(*stage);
    filling_ ^= 1;
    stage = &stages_[filling_];
    finish_stage(*stage);
  }
  if (stage->begin == stage->end) stage->begin = stage->end = end;
  if (end - begin > stage_capacity_) {
    throw std::logic_error("ZeRO-2: a group of gradients larger than a bucket");
  }
  stage->begin = begin;
  Tensor group = stage->buffer.slice(begin - (stage->end - stage_capacity_), end - begin);
  backend_.zero(group);
  return group;
}

int Trainer::group_at(std::int64_t begin) const {
  for (std::size_t g = 0; g < group_shards_.size(); ++g) {
    if (group_shards_[g].begin == begin) return static_cast<int>(g);
  }
  throw std::logic_error("ZeRO-3: no group of parameters begins at " + std::to_string(begin));
}

// All ranks gather the group's pieces into buffer `buffer` (in the
// background; its ticket is waited for before the weights are read).
void Trainer::gather_group(int group, int buffer) {
  const GroupShard& g = group_shards_[static_cast<std::size_t>(group)];
  WeightGather& w = gathers_[buffer];
  w.group = group;
  w.pending = true;
  w.ticket = dp_.all_gather_async(weights_.slice(g.shard_at, g.piece),
                                  w.buffer.slice(0, g.piece * config_.dp));
}

Tensor Trainer::open_weight_group(std::int64_t begin, bool backward) {
  const int group = group_at(begin);
  int use = -1;
  for (int i = 0; i < 2; ++i) {
    if (gathers_[i].pending && gathers_[i].group == group && gathers_[i].backward == backward)
      use = i;
  }
  if (use < 0) {
    // Not prefetched (a pass's first group, or no overlap): gather it now.
    for (WeightGather& w : gathers_) {
      if (w.pending) dp_.wait(w.ticket);
      w.pending = false;
    }
    use = 0;
    gather_group(group, use);
    gathers_[use].backward = backward;
  }
  WeightGather& w = gathers_[use];
  dp_.wait(w.ticket);
  w.pending = false;
  // The pass's next group into the other buffer, under this one's compute.
  // Within the chunk: the pass after this one may be another chunk's.
  const int next = backward ? group - 1 : group + 1;
  if (config_.overlap_dp && next >= 0 && next < static_cast<int>(group_shards_.size()) &&
      group_shards_[static_cast<std::size_t>(next)].chunk ==
          group_shards_[static_cast<std::size_t>(group)].chunk) {
    gather_group(next, use ^ 1);
    gathers_[use ^ 1].backward = backward;
  }
  const GroupShard& g = group_shards_[static_cast<std::size_t>(group)];
  return w.buffer.slice(0, g.end - g.begin);
}

// ZeRO-3: a group's gradients a bucket of their own, padded to the pieces.
Tensor Trainer::open_sharded_gradients(std::int64_t begin, std::int64_t end) {
  GradientStage* stage = &stages_[filling_];
  if (stage->begin != stage->end) {
    if (!stage->launched) launch_stage(*stage);
    filling_ ^= 1;
    stage = &stages_[filling_];
    finish_stage(*stage);
  }
  const GroupShard& g = group_shards_[static_cast<std::size_t>(group_at(begin))];
  stage->begin = begin;
  stage->end = end;
  backend_.zero(stage->buffer.slice(0, g.piece * config_.dp));
  return stage->buffer.slice(0, end - begin);
}

void Trainer::launch_stage(GradientStage& stage) {
  if (gathered_) {
    // The group's buffer, padded, reduce-scattered: piece r to rank r,
    // in place.
    const GroupShard& g = group_shards_[static_cast<std::size_t>(group_at(stage.begin))];
    const Tensor mine = stage.buffer.slice(config_.dp_rank * g.piece, g.piece);
    const auto ticket = dp_.reduce_scatter_async(stage.buffer.slice(0, g.piece * config_.dp), mine);
    stage.pieces.push_back({ticket, config_.dp_rank * g.piece, g.shard_at, g.piece, true});
  } else {
    const std::int64_t base = stage.end - stage_capacity_;
    for (int r = 0; r < config_.dp; ++r) {
      const std::int64_t lo = std::max(stage.begin, r * shard_);
      const std::int64_t hi = std::min(stage.end, (r + 1) * shard_);
      if (lo >= hi) continue;
      const auto ticket = dp_.reduce_async(stage.buffer.slice(lo - base, hi - lo), r);
      stage.pieces.push_back({ticket, lo - base, lo - r * shard_, hi - lo, r == config_.dp_rank});
    }
  }
  stage.launched = true;
  if (!config_.overlap_dp) finish_stage(stage);
}

void Trainer::finish_stage(GradientStage& stage) {
  for (const GradientStage::Piece& piece : stage.pieces) {
    dp_.wait(piece.ticket);
    if (piece.mine) {
      backend_.accumulate(grad_shard_.slice(piece.shard_at, piece.count),
                          stage.buffer.slice(piece.buffer_at, piece.count));
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
  const Tensor grads = sharded_ ? grad_shard_ : grads_;
  // One sum per run of adjacent values counted (all of them but a
  // tensor-parallel copy): a sum per parameter cost the CUDA engine a copy
  // to the host and a wait each, about 150 a step.
  double local = 0;
  std::int64_t run_lo = 0, run_hi = 0;  // the run not summed yet, in the shard
  auto sum_run = [&] {
    if (run_lo < run_hi) local += backend_.sum_of_squares(grads.slice(run_lo, run_hi - run_lo));
    run_lo = run_hi = 0;
  };
  for (const ShardRun& held : shard_runs_) {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      for (const ParamInfo& p : chunks_[c]->params()) {
        if (p.replicated_over_tp && config_.tp_rank != 0) {
          sum_run();
          continue;
        }
        const std::int64_t offset = chunk_base_[c] + p.offset;
        const std::int64_t lo = std::max(offset, held.flat_begin);
        const std::int64_t hi = std::min(offset + p.numel(), held.flat_end);
        if (lo >= hi) continue;
        const std::int64_t at = held.shard_at + (lo - held.flat_begin);
        if (run_lo < run_hi && at == run_hi) {
          run_hi = at + (hi - lo);
        } else {
          sum_run();
          run_lo = at;
          run_hi = at + (hi - lo);
        }
      }
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
  const std::int64_t shard_begin = sharded_ && !gathered_ ? config_.dp_rank * shard_ : 0;
  Tensor grads = sharded_ ? grad_shard_ : grads_;
  // Adam counts the updates it applied, not the steps: a step skipped for
  // overflowed gradients is none (as PyTorch's GradScaler and Megatron skip it).
  backend_.adamw(master_, grads, adam_m_, adam_v_, config_.lr, config_.beta1, config_.beta2,
                 config_.eps, config_.weight_decay, ++adam_updates_);
  if (!master_aliases_weights_) backend_.convert(weights_.slice(shard_begin, shard_), master_);
  if (sharded_ && !gathered_) {
    // Every rank updated its shard; all gather the new weights (ZeRO-3
    // gathers each group before it is used).
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
  Sampler sampler(corpus_, config_.model.seq, config_.seed);
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> targets;
  const int replica_first = config_.dp_rank * B * M;
  const bool overlap = config_.overlap_dp && !buckets_.empty();
  const bool interleaved = chunks_.size() > 1;
  // Interleaved, the last stage's chunks pass to the first stage's next ones.
  const int previous = (config_.pp_rank + config_.pp - 1) % config_.pp;
  const int next = (config_.pp_rank + 1) % config_.pp;

  double loss_sum = 0;
  for (const PipelinePass& op : schedule_) {
    const std::size_t c = static_cast<std::size_t>(op.chunk);
    GptModel& model = *chunks_[c];
    const int slot = op.micro_batch % slots_[c];
    const std::string chunk_name = interleaved ? " (chunk " + std::to_string(op.chunk) + ")" : "";
    const std::int64_t start = tracer_ ? OpTracer::now_ns() : 0;
    if (op.forward) {
      model.claim(slot);
      if (!model.first_stage()) pp_.recv(model.stage_input(slot), previous);
      sampler.fill(step_, replica_first + op.micro_batch * B, B, tokens, targets);
      loss_sum += model.forward(slot, tokens.data(), targets.data());
      if (!model.last_stage()) pp_.send(model.stage_output(slot), next);
      annotate("forward " + std::to_string(op.micro_batch) + chunk_name, start);
    } else {
      if (!model.last_stage()) pp_.recv(model.output_grad(), next);
      // The chunk's last backward (interleaving ends the chunks' last
      // micro-batches from the last chunk to the first, so the later flat
      // offsets are final first).
      const bool last = op.micro_batch == M - 1;
      model.backward(slot, loss_scale_ / M, [&](std::int64_t ready_from) {
        if (last && overlap) launch_ready_buckets(chunk_base_[c] + ready_from);
      });
      // ZeRO-2: the micro-batch's last bucket goes now, under the next forward.
      GradientStage& filling = stages_[filling_];
      if (staged_ && filling.end > filling.begin && !filling.launched) launch_stage(filling);
      if (!model.first_stage()) {
        if (interleaved) {
          const Tensor send = gradient_sends_[c][static_cast<std::size_t>(slot)];
          pp_.wait_sends_from(send);
          backend_.convert(send, model.input_grad());
          pp_.send(send, previous);
        } else {
          pp_.send(model.input_grad(), previous);
          // The gradient buffer is reused by the next backward: the send must end first.
          pp_.wait_sends();
        }
      }
      if (interleaved) {
        // The stack goes to the next forward of any chunk: its output, sent
        // to the next stage, has arrived (that stage's backward came back).
        if (!model.last_stage()) pp_.wait_sends_from(model.stage_output(slot));
        model.release(slot);
      }
      annotate("backward " + std::to_string(op.micro_batch) + chunk_name, start);
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
  float loss = chunks_.back()->last_stage() ? static_cast<float>(loss_sum / M) : 0.0f;
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
  // ZeRO-1's shard is a view of the whole buffer; ZeRO-2's and -3's buckets,
  // and ZeRO-3's gathered weights, are workspace.
  const std::int64_t gradients = staged_ ? grad_shard_.bytes() : grads_.bytes();
  const std::int64_t optimizer =
      (master_aliases_weights_ ? 0 : master_.bytes()) + adam_m_.bytes() + adam_v_.bytes();
  std::int64_t activations = activation_pool_ ? activation_pool_->bytes() : 0;
  for (const auto& chunk : chunks_)
    activations += chunk->activation_bytes();
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
  if (gathered_) {
    // Each group's pieces gathered, the padding left out.
    Tensor group = backend_.alloc(gathers_[0].buffer.numel, DType::f32, "weights export");
    for (const GroupShard& g : group_shards_) {
      dp_.wait(dp_.all_gather_async(master_.slice(g.shard_at, g.piece),
                                    group.slice(0, g.piece * config_.dp)));
      backend_.convert(whole.slice(g.begin, g.end - g.begin), group.slice(0, g.end - g.begin));
    }
    backend_.release(group);
  } else if (sharded_) {
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
      // The rank's chunks side by side, as its flat buffer holds them.
      std::vector<ParamInfo> layout;
      std::int64_t base = 0;
      for (int chunk = 0; chunk < config_.virtual_stages; ++chunk) {
        std::int64_t size = 0;
        for (ParamInfo& p :
             gpt_parameter_layout(c, chunk_parallel(config_, tp_rank, pp_rank, chunk))) {
          size += p.numel();
          p.offset += base;
          layout.push_back(std::move(p));
        }
        base += size;
      }
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
