#include "planners/timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/pipeline_schedule.h"
#include "planners/cost_model.h"

namespace cs::plan {

namespace {

using detail::Knobs;
using detail::StageCost;

std::int64_t ns(double seconds) {
  return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

using Op = PipelinePass;

void add(Timeline& t, int stage, int lane, double start, double end, trace::Category category,
         trace::EventKind kind, trace::Collective collective, std::string name,
         int micro_batch = -1, int chunk = -1) {
  const std::int64_t s = ns(start);
  const std::int64_t e = ns(end);
  if (e <= s) return;
  t.spans.push_back(
      {stage, lane, s, e, category, kind, collective, std::move(name), micro_batch, chunk});
}

}  // namespace

Result<Timeline> predict_timeline(const Plan& plan) {
  const std::vector<Problem> problems = check_plan(plan);
  if (!problems.empty()) {
    return Error{"predict_timeline: " + problems.front().pointer + ": " + problems.front().message};
  }
  const detail::Machine m = detail::machine_of(plan.cluster);
  const detail::Model x = detail::model_of(plan.workload);
  const Knobs k = detail::knobs_of(plan.parallel, plan.precision);
  // The timeline draws every chunk pass of every stage (about ten spans
  // each): 400 000 passes took 30 s and 600 MB, and a global batch of 2^30
  // (2^29 micro-batches a replica) ended in 'internal error: std::bad_alloc'.
  // The estimate has no such limit.
  const std::int64_t micro_batches =
      k.global_batch / std::max<std::int64_t>(std::int64_t{k.dp} * k.micro_batch, 1);
  const std::int64_t passes = micro_batches * k.pp * k.v;
  if (passes > kMaxTimelinePasses) {
    return Error{"predict_timeline: /parallel/global_batch: " + std::to_string(micro_batches) +
                 " micro-batches a replica on " + std::to_string(k.pp) +
                 (k.pp == 1 ? " stage" : " stages") +
                 (k.v > 1 ? " of " + std::to_string(k.v) + " chunks" : std::string()) + " are " +
                 std::to_string(passes) + " passes to draw, more than the " +
                 std::to_string(kMaxTimelinePasses) +
                 " a predicted timeline holds: a smaller global batch or a larger micro-batch "
                 "draws one step (the estimate itself has no such limit)"};
  }
  const detail::LayerCosts costs = detail::layer_costs(m, x, k);
  const detail::PipelineCosts pipe = detail::pipeline_costs(m, x, k, costs);
  const int p = k.pp;
  const int v = k.v;
  const int mb = std::max(pipe.micro_batches, 1);
  const double layers_per_chunk = x.transformer ? x.layers / (p * v) : 1;
  const double hop = detail::p2p_seconds(m, x, k, costs.activation_element_bytes);
  const bool sp = k.sp;
  const trace::Collective tp_collective =
      sp ? trace::Collective::all_gather : trace::Collective::all_reduce;
  const char* tp_name = sp ? "tp all-gather / reduce-scatter" : "tp all-reduce";

  // Costs of one chunk on one stage.
  auto chunk = [&](int stage, int c) {
    const bool embedding = stage == 0 && c == 0;
    const bool head = stage == p - 1 && c == v - 1;
    return detail::chunk_cost(x, k, costs, layers_per_chunk, embedding, head);
  };

  // Simulate: each stage runs its ops in order; an op starts when the stage
  // is free and its input has arrived (one hop after the producer finished).
  std::vector<std::vector<Op>> ops(p);
  for (int s = 0; s < p; ++s)
    ops[s] = pipeline_schedule(p, s, mb, v);
  if (k.inference) {
    for (auto& list : ops) {
      list.erase(std::remove_if(list.begin(), list.end(), [](const Op& o) { return !o.forward; }),
                 list.end());
      std::stable_sort(list.begin(), list.end(), [](const Op& a, const Op& b) {
        return a.micro_batch != b.micro_batch ? a.micro_batch < b.micro_batch : a.chunk < b.chunk;
      });
    }
  }
  const double unset = -1;
  auto index = [&](int micro_batch, int c) {
    return static_cast<std::size_t>(micro_batch) * v + c;
  };
  std::vector<std::vector<double>> forward_end(
      p, std::vector<double>(static_cast<std::size_t>(mb) * v, unset));
  std::vector<std::vector<double>> backward_end = forward_end;
  std::vector<std::size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);

  Timeline t;
  t.stages = p;
  const bool zero3 = k.zero >= 3;
  // ZeRO-2 and -3 reduce each micro-batch's gradients under its backward
  // (their buffers hold a shard only); the others once, after the last.
  const bool reduce_each_backward = k.zero >= 2 && k.dp > 1 && !k.inference;
  const trace::Collective dp_collective = detail::gradient_reduction(k.zero);
  const double pp_hop = p > 1 ? hop : 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < ops[s].size()) {
        const Op op = ops[s][next[s]];
        double ready = 0;
        bool remote = false;
        if (op.forward) {
          if (s > 0) {
            ready = forward_end[s - 1][index(op.micro_batch, op.chunk)];
            remote = true;
          } else if (op.chunk > 0) {
            ready = forward_end[p - 1][index(op.micro_batch, op.chunk - 1)];
            remote = p > 1;
          }
        } else if (s < p - 1) {
          ready = backward_end[s + 1][index(op.micro_batch, op.chunk)];
          remote = true;
        } else if (op.chunk < v - 1) {
          ready = backward_end[0][index(op.micro_batch, op.chunk + 1)];
          remote = p > 1;
        } else {
          ready = forward_end[s][index(op.micro_batch, op.chunk)];
        }
        if (ready == unset) break;  // input not produced yet
        const double arrival = ready + (remote ? pp_hop : 0);
        const double start = std::max(free_at[s], arrival);
        if (remote && pp_hop > 0) {
          add(t, s, 1, arrival - pp_hop, arrival, trace::Category::communication,
              trace::EventKind::p2p, trace::Collective::recv,
              op.forward ? "pp recv activations" : "pp recv gradients", op.micro_batch, op.chunk);
        }
        // Idle until the input arrives; the transfer itself is the recv span.
        const double idle_end = (remote && pp_hop > 0) ? std::min(start, arrival - pp_hop) : start;
        if (idle_end > free_at[s]) {
          add(t, s, 0, free_at[s], idle_end, trace::Category::other, trace::EventKind::annotation,
              trace::Collective::none, "bubble");
        }
        const StageCost c = chunk(s, op.chunk);
        double at = start;
        // ZeRO-3 gathers every parameter again in each pass, layer by layer
        // ahead of the compute: the pass waits for the part not hidden.
        const double gather_wait =
            zero3 ? (op.forward ? pipe.zero3_forward_exposed : pipe.zero3_backward_exposed) : 0;
        if (gather_wait > 0) {
          add(t, s, 1, at, at + pipe.zero3_gather, trace::Category::communication,
              trace::EventKind::collective, trace::Collective::all_gather,
              op.forward ? "zero-3 parameter all-gather (forward)"
                         : "zero-3 parameter all-gather (backward)",
              op.micro_batch, op.chunk);
          add(t, s, 0, at, at + gather_wait, trace::Category::communication,
              trace::EventKind::collective, trace::Collective::all_gather,
              "waiting for the parameter gather", op.micro_batch, op.chunk);
          at += gather_wait;
        }
        if (op.forward) {
          add(t, s, 0, at, at + c.forward, trace::Category::compute, trace::EventKind::kernel,
              trace::Collective::none, "forward", op.micro_batch, op.chunk);
          at += c.forward;
          add(t, s, 0, at, at + c.tp_forward, trace::Category::communication,
              trace::EventKind::collective, tp_collective, tp_name, op.micro_batch, op.chunk);
          at += c.tp_forward;
          forward_end[s][index(op.micro_batch, op.chunk)] = at;
        } else {
          add(t, s, 0, at, at + c.recompute, trace::Category::compute, trace::EventKind::kernel,
              trace::Collective::none, "recompute", op.micro_batch, op.chunk);
          at += c.recompute;
          add(t, s, 0, at, at + c.backward, trace::Category::compute, trace::EventKind::kernel,
              trace::Collective::none, "backward", op.micro_batch, op.chunk);
          at += c.backward;
          add(t, s, 0, at, at + c.tp_backward, trace::Category::communication,
              trace::EventKind::collective, tp_collective, tp_name, op.micro_batch, op.chunk);
          at += c.tp_backward;
          if (reduce_each_backward) {
            const double total = (pipe.dp_total - pipe.zero3_gathers - pipe.zero_param_gather) / mb;
            const double exposed = pipe.dp_exposed / mb;
            add(t, s, 1, at - (total - exposed), at + exposed, trace::Category::communication,
                trace::EventKind::collective, dp_collective,
                zero3 ? "dp gradient reduce-scatter" : "dp gradient reduction", op.micro_batch,
                op.chunk);
            at += exposed;
          }
          backward_end[s][index(op.micro_batch, op.chunk)] = at;
        }
        free_at[s] = at;
        // 1F1B and forward-only: Megatron-LM waits on every batched
        // isend/irecv (overlap_p2p_comm is forced off without virtual
        // stages), so the sending stage is held for the hop. Interleaved
        // sends overlap the next pass and hold no one.
        const bool sends = op.forward ? s < p - 1 : s > 0;
        if (v == 1 && pp_hop > 0 && sends) {
          add(t, s, 0, at, at + pp_hop, trace::Category::communication, trace::EventKind::p2p,
              trace::Collective::send, op.forward ? "pp send activations" : "pp send gradients",
              op.micro_batch, op.chunk);
          free_at[s] = at + pp_hop;
        }
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    if (next[s] < ops[s].size()) {
      return Error{"predict_timeline: the schedule of stage " + std::to_string(s) + " deadlocked"};
    }
  }

  // ZeRO-0 and -1's gradient reduction, overlapped with the last backward;
  // then every rank waits for the slowest before the optimizer step.
  // (ZeRO-2 and -3 reduced in each backward, above.)
  std::vector<double> reduced(p);
  for (int s = 0; s < p; ++s) {
    const double end = free_at[s];
    reduced[s] = end;
    if (k.inference || k.dp <= 1 || reduce_each_backward) continue;
    const double exposed = pipe.dp_exposed;
    const double hidden = std::max(0.0, pipe.dp_total - exposed - pipe.zero_param_gather);
    add(t, s, 1, end - hidden, end + exposed, trace::Category::communication,
        trace::EventKind::collective, dp_collective, "dp gradient reduction");
    reduced[s] = end + exposed;
  }
  const double tied = pipe.tied_embedding_sync;
  double sync = *std::max_element(reduced.begin(), reduced.end());
  if (tied > 0) {
    for (int s : {0, p - 1}) {
      add(t, s, 1, sync, sync + tied, trace::Category::communication, trace::EventKind::collective,
          trace::Collective::all_reduce, "embedding gradient sync");
    }
    sync += tied;
  }
  double end = sync;
  for (int s = 0; s < p; ++s) {
    if (sync > reduced[s] + 1e-12) {
      add(t, s, 0, reduced[s], sync, trace::Category::other, trace::EventKind::annotation,
          trace::Collective::none, "bubble");
    }
    if (k.inference) continue;
    add(t, s, 0, sync, sync + pipe.optimizer, trace::Category::compute, trace::EventKind::kernel,
        trace::Collective::none, "optimizer");
    end = std::max(end, sync + pipe.optimizer);
    if (pipe.zero_param_gather > 0) {
      add(t, s, 0, sync + pipe.optimizer, sync + pipe.optimizer + pipe.zero_param_gather,
          trace::Category::communication, trace::EventKind::collective,
          trace::Collective::all_gather, "zero parameter all-gather");
      end = std::max(end, sync + pipe.optimizer + pipe.zero_param_gather);
    }
  }
  t.step_ns = ns(end);
  std::stable_sort(t.spans.begin(), t.spans.end(),
                   [](const TimelineSpan& a, const TimelineSpan& b) {
                     if (a.stage != b.stage) return a.stage < b.stage;
                     if (a.lane != b.lane) return a.lane < b.lane;
                     return a.start_ns < b.start_ns;
                   });
  return t;
}

double category_seconds(const Timeline& timeline, int stage, trace::Category category) {
  // Lane 0 spans of the category, plus the part of lane 1 spans of it that
  // no lane 0 span other than a bubble covers.
  std::vector<std::pair<std::int64_t, std::int64_t>> busy;
  std::int64_t total = 0;
  for (const TimelineSpan& s : timeline.spans) {
    if (s.stage != stage || s.lane != 0) continue;
    if (s.category == category) total += s.duration_ns();
    if (s.category != trace::Category::other) busy.emplace_back(s.start_ns, s.end_ns);
  }
  std::sort(busy.begin(), busy.end());
  for (const TimelineSpan& s : timeline.spans) {
    if (s.stage != stage || s.lane != 1 || s.category != category) continue;
    std::int64_t covered = 0;
    for (const auto& [b, e] : busy) {
      if (e <= s.start_ns) continue;
      if (b >= s.end_ns) break;
      covered += std::min(e, s.end_ns) - std::max(b, s.start_ns);
    }
    total += s.duration_ns() - covered;
  }
  return static_cast<double>(total) / 1e9;
}

}  // namespace cs::plan
