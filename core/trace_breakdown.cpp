// The parts of a step as a run measured them, for the comparison with the
// planner's prediction (core/trace_analysis.h: measure_step_parts).

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/json_reader.h"
#include "core/median.h"
#include "core/rank_order.h"
#include "core/trace_analysis.h"
#include "core/window_index.h"

namespace cs::trace {

namespace {

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// a minus b, for merged interval lists.
std::vector<Interval> outside(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  std::size_t j = 0;
  for (const Interval& i : a) {
    std::int64_t start = i.first;
    while (j < b.size() && b[j].second <= start)
      ++j;
    std::size_t k = j;
    while (start < i.second) {
      if (k >= b.size() || b[k].first >= i.second) {
        out.emplace_back(start, i.second);
        break;
      }
      if (b[k].first > start) out.emplace_back(start, b[k].first);
      start = std::max(start, b[k].second);
      ++k;
    }
  }
  return out;
}

std::int64_t total_length(const std::vector<Interval>& v) {
  std::int64_t total = 0;
  for (const Interval& i : v)
    total += i.second - i.first;
  return total;
}

// The 10th percentile of the lengths (0 for none): the time an operation
// takes when nothing holds it up, robust to one lucky call.
std::int64_t fastest(std::vector<std::int64_t> lengths) {
  if (lengths.empty()) return 0;
  std::sort(lengths.begin(), lengths.end());
  return lengths[lengths.size() / 10];
}

struct P2p {
  Interval when;
  bool send = false;
  std::int64_t bytes = 0;
};

// A collective call of a rank (or a communication kernel), matched across
// ranks by its step, name, size, operation, group size and communicator
// (Communicators).
struct CollectiveCall {
  Interval when;
  std::string_view group;
  std::tuple<std::string_view, std::int64_t, Collective, std::int32_t, int> key;
  // Its step: the event's own, else the index of the step it started in;
  // -1 outside every step.
  int step = -1;
  std::int64_t transfer_ns = 0;  // set once every rank is read
};

struct RankEvents {
  std::vector<Interval> steps;
  std::vector<Interval> passes;  // forward / backward annotations
  struct Compute {
    Interval when;
    std::string_view kind;
    // The host time a GPU kernel was launched, when its call is known: the
    // GPU runs behind the host, so a kernel of the backward pass can run
    // after the pass's host range ended.
    std::int64_t launched_ns = -1;
    std::int64_t off_cpu_ns = 0;  // of its time, descheduled (kOffCpuCounter)
  };
  std::vector<Compute> compute;
  // GPU kernels take the kind of the host operation whose range their launch
  // fell in (the worker names its GEMMs there: "gemm attention" launches
  // cuBLAS kernels whose own names say only "gemm"), else their own.
  struct Kernel {
    Interval when;
    std::int64_t correlation;
    std::string_view kind;
  };
  std::vector<Kernel> kernels;
  std::vector<HostRange> host_ops;
  std::map<std::int64_t, std::int64_t> launch_ns;  // API call start by correlation
  // The pipeline's transfers and waits, and its own collectives.
  std::map<std::string, std::vector<Interval>> communication;
  // A thread waiting on another's collective ("wait dp": the CPU engine's
  // compute thread on its background data-parallel all-reduce), by group.
  std::map<std::string, std::vector<Interval>> sync_waits;
  std::vector<CollectiveCall> collectives;
  std::vector<P2p> pp;  // the pipeline's sends and receives
};

// One step's pipeline transfers, split into transfer and waiting once every
// rank's transfers are known.
struct PipelineStep {
  double exposed_ns = 0;   // pipeline communication outside compute
  std::vector<P2p> calls;  // clipped to the step
};

// One step of a rank, its compute measured.
struct PendingStep {
  Interval window;
  std::map<std::string, double> part;  // compute parts
  std::vector<Interval> compute;       // their union
};

// What a rank measured, its communication not yet split into transfer and
// waiting (that needs every rank's calls).
struct PendingRank {
  std::int32_t rank = -1;
  int warm_up = 0;  // leading steps left out
  std::vector<Interval> windows;  // the steps measured, past the warm-up, by start
  std::vector<double> step_lengths;
  std::vector<PendingStep> steps;
  std::map<std::string, std::vector<Interval>> communication;
  std::map<std::string, std::vector<Interval>> sync_waits;
  std::vector<CollectiveCall> collectives;
  std::map<std::string, std::vector<double>> per_part;  // per step
  std::vector<PipelineStep> pipeline;                   // per step
};

}  // namespace

std::string_view communication_group(std::string_view name, EventKind kind) {
  if (kind == EventKind::p2p) return "pp";
  if (name.starts_with("wait ")) name.remove_prefix(5);
  for (std::string_view g : {"tp", "dp", "pp"}) {
    if (name.starts_with(g) && (name.size() == 2 || name[2] == ' ' || name[2] == '.')) return g;
  }
  return "other";
}

std::string_view operation_kind(std::string_view name) {
  std::string n = lower(name);
  // FBGEMM's namespace ("fbgemm_gpu::FixedDivisor" in an embedding kernel's
  // arguments) says nothing of the operation: it is no GEMM.
  for (std::size_t at = n.find("fbgemm"); at != std::string::npos; at = n.find("fbgemm", at))
    n.replace(at, 6, "fb");
  if (contains(n, "adamw") || contains(n, "adam_") || n == "gradient norm" ||
      contains(n, "optimizer")) {
    return "optimizer";
  }
  // "attention", and the worker's "gemm attention" (its batched Q.K^T and P.V)
  // with its kernels splitting and joining heads (split_single: the output
  // gradient split into heads before the attention backward's range).
  if (contains(n, "attention") || contains(n, "softmax_backward") ||
      contains(n, "causal_softmax") || contains(n, "split_heads") || contains(n, "split_single") ||
      contains(n, "merge_heads") || contains(n, "join_heads") || contains(n, "flash") ||
      contains(n, "fmha") || contains(n, "attn_")) {
    return "attention";
  }
  if (contains(n, "layernorm") || contains(n, "layer_norm") || contains(n, "rmsnorm") ||
      contains(n, "rms_norm")) {
    return "norm";
  }
  if (contains(n, "gelu") || contains(n, "silu") || contains(n, "swiglu")) return "activation";
  if (contains(n, "cross-entropy") || contains(n, "crossentropy") || contains(n, "cross_entropy") ||
      contains(n, "nll_loss")) {
    return "loss";
  }
  if (contains(n, "gemm") || contains(n, "nvjet") || contains(n, "cutlass") ||
      contains(n, "xmma") || contains(n, "sgemm") || contains(n, "attn.") || contains(n, "mlp.") ||
      contains(n, "lm_head") || contains(n, "matmul")) {
    return "gemm";
  }
  return "elementwise";
}

std::string describe_steps(int steps, int warm_up) {
  std::string out = std::to_string(steps) + (steps == 1 ? " step" : " steps");
  if (warm_up == 1) return out + " after the first (the warm-up)";
  if (warm_up > 1) return out + " after the warm-up (the first " + std::to_string(warm_up) + ")";
  return out;
}

std::string describe_part(std::string_view part) {
  static const std::map<std::string_view, std::string_view> kText = {
      {"compute.gemm", "GEMM compute"},
      {"compute.attention", "attention compute"},
      {"compute.norm", "layer-norm compute"},
      {"compute.activation", "activation (GELU) compute"},
      {"compute.elementwise", "elementwise compute"},
      {"compute.loss", "the loss over the logits"},
      {"optimizer", "the optimizer step"},
      {"descheduled", "compute waiting for a core (its ops off CPU)"},
      {"communication.tp", "exposed tensor-parallel communication"},
      {"communication.dp", "exposed data-parallel communication"},
      {"communication.pp", "pipeline transfers"},
      {"communication.other", "other exposed communication"},
      {"wait", "waiting in collectives for slower ranks"},
      {"bubble", "the pipeline bubble"},
      {"idle", "idle time (host work no traced operation covers)"}};
  auto it = kText.find(part);
  return it == kText.end() ? std::string(part) : std::string(it->second);
}

Communicators Communicators::of(const TraceReader& reader) {
  Communicators c;
  const std::optional<std::string> text = reader.meta("parallel");
  if (!text) return c;
  const nlohmann::json p = parse_json_text(*text);
  auto degree = [&](const char* key) {
    const auto it = p.is_object() ? p.find(key) : p.end();
    return it != p.end() && it->is_number_integer() && *it >= 1 && *it <= (1 << 20) ? it->get<int>()
                                                                                    : 0;
  };
  const int dp = degree("dp"), tp = degree("tp"), pp = degree("pp");
  // Degrees that are not this run's world (a store cut to some ranks keeps
  // its world size) say nothing of its ranks.
  if (dp == 0 || tp == 0 || pp == 0 ||
      static_cast<std::int64_t>(dp) * tp * pp != reader.world_size())
    return c;
  c.dp_ = dp;
  c.tp_ = tp;
  c.pp_ = pp;
  return c;
}

int Communicators::of_call(std::int32_t rank, std::string_view name) const {
  if (dp_ == 0 || rank < 0) return 0;
  const RankOrder order{dp_, tp_, pp_};
  if (rank >= order.world_size()) return 0;
  const RankCoordinates at = order.coordinates(rank);
  const std::string_view group = communication_group(name, EventKind::collective);
  // 1 + the kind's offset + the group's index: distinct for every group.
  const int world = order.world_size();
  if (group == "dp") return 1 + order.data_parallel_group(at);
  if (group == "tp") return 1 + world + order.tensor_parallel_group(at);
  if (group == "pp") return 1 + 2 * world + order.pipeline_group(at);
  return 0;
}

std::vector<double> shortest_of_each_call(const std::vector<std::vector<double>>& durations) {
  std::size_t most = 0;
  for (const auto& calls : durations)
    most = std::max(most, calls.size());
  std::vector<double> shortest(most, std::numeric_limits<double>::infinity());
  for (const auto& calls : durations) {
    for (std::size_t n = 0; n < calls.size(); ++n)
      shortest[n] = std::min(shortest[n], calls[n]);
  }
  return shortest;
}

std::size_t warm_up_steps(const std::vector<double>& lengths) {
  const std::size_t n = lengths.size();
  if (n < 3) return 0;
  const double steady =
      median(std::vector<double>(lengths.begin() + static_cast<std::ptrdiff_t>(n / 2), lengths.end()));
  std::size_t first = 1;
  while (first < n / 2 && lengths[first] > 1.5 * steady)
    ++first;
  return first;
}

double expected_step_seconds(const std::vector<double>& lengths) {
  if (lengths.empty()) return 0;
  const std::size_t first = warm_up_steps(lengths);
  double sum = 0;
  for (std::size_t i = first; i < lengths.size(); ++i)
    sum += lengths[i];
  return sum / static_cast<double>(lengths.size() - first);
}

double StepParts::part(std::string_view name) const {
  for (const auto& [n, v] : parts) {
    if (n == name) return v;
  }
  return 0;
}

Result<std::vector<StepParts>> measure_rank_parts(const TraceReader& reader) {
  std::vector<std::int32_t> ranks;
  for (const RankInfo& r : reader.ranks())
    ranks.push_back(r.rank);
  for (const LaneInfo& l : reader.lanes()) {
    if (std::find(ranks.begin(), ranks.end(), l.rank) == ranks.end()) ranks.push_back(l.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) return Error{reader.path() + ": no rank to measure"};

  std::vector<PendingRank> pending_ranks;
  // Every pipeline call's length, by direction (send or not) and size.
  std::map<std::pair<bool, std::int64_t>, std::vector<std::int64_t>> call_lengths;
  const Communicators communicators = Communicators::of(reader);
  // operation_kind reads a name in lower case, whole: once per name, not per
  // event (a run of kernels named in 200,000 characters took seconds here).
  std::unordered_map<std::uint32_t, std::string_view> kinds;
  auto kind_of = [&](StringId id, std::string_view name) {
    auto [it, added] = kinds.try_emplace(id.value);
    if (added) it->second = operation_kind(name);
    return it->second;
  };
  for (std::int32_t rank : ranks) {
    RankEvents ev;
    auto off_cpu = off_cpu_by_op_end(reader, rank);
    if (!off_cpu) return off_cpu.error();
    const std::map<std::int64_t, std::int64_t>& off_cpu_by_end = *off_cpu;
    auto metrics = reader.steps(rank);
    if (!metrics) return metrics.error();
    for (const StepMetrics& m : *metrics) {
      if (m.end_ns > m.start_ns) ev.steps.emplace_back(m.start_ns, m.end_ns);
    }
    std::vector<LaneId> lanes;
    bool gpu = false;
    for (const LaneInfo& l : reader.lanes_of(rank)) {
      lanes.push_back(l.id);
      gpu = gpu || l.kind == LaneKind::gpu_stream;
    }
    if (lanes.empty()) continue;
    const TimeRange range = reader.time_range();
    const bool from_step_events = ev.steps.empty();
    Status s =
        reader.for_each_event(lanes, range.start_ns, range.end_ns + 1, [&](const StoredEvent& se) {
          const Event& e = se.event;
          const Interval when{e.start_ns, e.end_ns};
          const std::string& name = reader.string(e.name);
          switch (e.kind) {
            case EventKind::step:
              if (from_step_events) ev.steps.push_back(when);
              return true;
            case EventKind::annotation:
              if (name.starts_with("forward") || name.starts_with("backward"))
                ev.passes.push_back(when);
              return true;
            case EventKind::collective:
              // The pipeline's own collectives (the loss shared among its
              // stages) wait for the other stages: that is its bubble.
              if (communication_group(name, e.kind) == "pp") {
                ev.communication["pp"].push_back(when);
              } else {
                ev.collectives.push_back(
                    {when,
                     communication_group(name, e.kind),
                     {name, e.bytes, e.collective, e.group_size, communicators.of_call(rank, name)},
                     e.step});
              }
              return true;
            case EventKind::p2p:
              ev.communication["pp"].push_back(when);
              ev.pp.push_back({when, e.collective != Collective::recv, e.bytes});
              return true;
            case EventKind::sync:
              if (name.starts_with("wait ")) {
                const std::string group(communication_group(name, e.kind));
                (group == "pp" ? ev.communication : ev.sync_waits)[group].push_back(when);
              }
              return true;
            case EventKind::kernel:
              if (e.category == Category::communication &&
                  communication_group(name, e.kind) == "pp") {
                ev.communication["pp"].push_back(when);
              } else if (e.category == Category::communication) {
                ev.collectives.push_back(
                    {when,
                     communication_group(name, e.kind),
                     {name, e.bytes, e.collective, e.group_size, communicators.of_call(rank, name)},
                     e.step});
              } else if (e.category == Category::compute) {
                if (gpu && e.correlation > 0) {
                  ev.kernels.push_back({when, e.correlation, kind_of(e.name, name)});
                } else {
                  const auto off = off_cpu_by_end.find(e.end_ns);
                  ev.compute.push_back({when, kind_of(e.name, name), -1,
                                        off == off_cpu_by_end.end()
                                            ? 0
                                            : std::min(off->second, e.end_ns - e.start_ns)});
                }
              }
              return true;
            case EventKind::cpu_op:
              // Host-side ranges stand for compute only where no GPU stream
              // does; there they name the kernels launched inside them.
              if (!gpu && e.category == Category::compute)
                ev.compute.push_back({when, kind_of(e.name, name)});
              if (gpu) ev.host_ops.push_back({when, kind_of(e.name, name)});
              return true;
            case EventKind::api_call:
              if (gpu && e.correlation > 0) ev.launch_ns.emplace(e.correlation, e.start_ns);
              return true;
            default:
              return true;
          }
        });
    if (!s) return s.error();
    std::sort(ev.host_ops.begin(), ev.host_ops.end(),
              [](const HostRange& a, const HostRange& b) { return a.when < b.when; });
    for (const RankEvents::Kernel& k : ev.kernels) {
      std::string_view kind = k.kind;
      std::int64_t launched = -1;
      if (auto launch = ev.launch_ns.find(k.correlation); launch != ev.launch_ns.end()) {
        launched = launch->second;
        kind = kind_at(ev.host_ops, launched, kind);
      }
      ev.compute.push_back({k.when, kind, launched});
    }
    std::sort(ev.steps.begin(), ev.steps.end());
    if (ev.steps.empty()) ev.steps.emplace_back(range.start_ns, range.end_ns);
    for (CollectiveCall& call : ev.collectives) {
      if (call.step >= 0) continue;
      auto it =
          std::upper_bound(ev.steps.begin(), ev.steps.end(),
                           Interval{call.when.first, std::numeric_limits<std::int64_t>::max()});
      if (it != ev.steps.begin() && std::prev(it)->second > call.when.first)
        call.step = static_cast<int>(std::prev(it) - ev.steps.begin());
    }
    const std::vector<Interval> passes = merged(ev.passes);
    for (const P2p& call : ev.pp)
      call_lengths[{call.send, call.bytes}].push_back(call.when.second - call.when.first);

    // Per step: the compute parts; communication once every rank is read.
    PendingRank pending;
    pending.rank = rank;
    std::vector<double> lengths;
    for (const Interval& w : ev.steps)
      lengths.push_back(static_cast<double>(w.second - w.first));
    const std::size_t first = warm_up_steps(lengths);
    pending.warm_up = static_cast<int>(first);
    pending.windows.assign(ev.steps.begin() + static_cast<std::ptrdiff_t>(first), ev.steps.end());
    for (const Interval& w : pending.windows) {
      pending.step_lengths.push_back(static_cast<double>(w.second - w.first));
      pending.steps.emplace_back().window = w;
      pending.pipeline.emplace_back();
    }
    const WindowIndex steps(pending.windows);
    for (const P2p& call : ev.pp) {
      steps.for_each_overlap(call.when, [&](std::size_t si, const Interval& c) {
        pending.pipeline[si].calls.push_back({c, call.send, call.bytes});
      });
    }
    for (const RankEvents::Compute& c : ev.compute) {
      std::string_view kind = c.kind;
      // Elementwise work outside the forward and backward passes is the
      // optimizer's; a kernel is placed by its launch.
      if (kind == "elementwise" && !passes.empty() &&
          !inside(passes, c.launched_ns >= 0 ? c.launched_ns : c.when.first)) {
        kind = "optimizer";
      }
      const std::string part = kind == "optimizer" ? "optimizer" : "compute." + std::string(kind);
      // Its time off CPU, spread over its span (where in it is not known).
      const double length = static_cast<double>(c.when.second - c.when.first);
      const double off_share = length > 0 ? static_cast<double>(c.off_cpu_ns) / length : 0;
      steps.for_each_overlap(c.when, [&](std::size_t si, const Interval& i) {
        pending.steps[si].compute.push_back(i);
        const double in_step = static_cast<double>(i.second - i.first);
        pending.steps[si].part[part] += in_step * (1 - off_share);
        if (off_share > 0) pending.steps[si].part["descheduled"] += in_step * off_share;
      });
    }
    for (PendingStep& step : pending.steps)
      step.compute = merged(std::move(step.compute));
    pending.communication = std::move(ev.communication);
    pending.sync_waits = std::move(ev.sync_waits);
    pending.collectives = std::move(ev.collectives);
    std::sort(pending.collectives.begin(), pending.collectives.end(),
              [](const CollectiveCall& a, const CollectiveCall& b) { return a.when < b.when; });
    pending_ranks.push_back(std::move(pending));
  }
  if (pending_ranks.empty()) return Error{reader.path() + ": no rank with events to measure"};

  // Each collective's transfer: the n-th call of one collective in a step on
  // every rank that made it is one call, and its shortest duration the
  // transfer (shortest_of_each_call). The rest of a rank's call, at its
  // start, is waiting for the others. Where the ranks made different numbers
  // of such calls (a rank's events lost), the order pairs nothing: each call
  // is all transfer.
  {
    using Key = std::tuple<int, std::string_view, std::int64_t, Collective, std::int32_t, int>;
    std::map<Key, std::vector<std::vector<CollectiveCall*>>> by_key;  // per rank, in order
    for (std::size_t ri = 0; ri < pending_ranks.size(); ++ri) {
      std::map<Key, std::vector<CollectiveCall*>> own;
      for (CollectiveCall& call : pending_ranks[ri].collectives)
        own[std::tuple_cat(std::tuple{call.step}, call.key)].push_back(&call);
      for (auto& [key, calls] : own)
        by_key[key].push_back(std::move(calls));
    }
    for (auto& [key, ranks_calls] : by_key) {
      // The first rank's size is named before the lambda: clang 14 cannot
      // capture a structured binding (the fuzzing build uses it).
      const std::size_t first_size = ranks_calls.front().size();
      const bool paired =
          std::all_of(ranks_calls.begin(), ranks_calls.end(),
                      [&](const auto& calls) { return calls.size() == first_size; });
      if (!paired) {
        for (auto& calls : ranks_calls) {
          for (CollectiveCall* c : calls)
            c->transfer_ns = c->when.second - c->when.first;
        }
        continue;
      }
      std::vector<std::vector<double>> durations;
      for (const auto& calls : ranks_calls) {
        std::vector<double>& d = durations.emplace_back();
        for (const CollectiveCall* c : calls)
          d.push_back(static_cast<double>(c->when.second - c->when.first));
      }
      const std::vector<double> transfer = shortest_of_each_call(durations);
      for (auto& calls : ranks_calls) {
        for (std::size_t n = 0; n < calls.size(); ++n)
          calls[n]->transfer_ns = static_cast<std::int64_t>(transfer[n]);
      }
    }
  }

  for (PendingRank& pending : pending_ranks) {
    std::map<std::string, std::vector<Interval>> communication = pending.communication;
    for (const CollectiveCall& call : pending.collectives) {
      const std::int64_t split = call.when.second - call.transfer_ns;
      if (split > call.when.first) communication["wait"].emplace_back(call.when.first, split);
      communication[std::string(call.group)].emplace_back(std::max(split, call.when.first),
                                                          call.when.second);
    }
    // A thread waiting on a collective that is itself waiting for the other
    // ranks is waiting too, not transferring.
    const std::vector<Interval> waiting = merged(communication["wait"]);
    for (auto& [group, intervals] : pending.sync_waits) {
      for (const Interval& i : outside(merged(intervals), waiting))
        communication[group].push_back(i);
    }
    // Each group's intervals placed in the steps they overlap, once.
    const WindowIndex steps(pending.windows);
    std::map<std::string, std::vector<std::vector<Interval>>> by_step;
    for (const auto& [group, intervals] : communication) {
      std::vector<std::vector<Interval>>& in = by_step[group];
      in.resize(pending.steps.size());
      for (const Interval& i : intervals)
        steps.for_each_overlap(i, [&](std::size_t si, const Interval& c) { in[si].push_back(c); });
    }
    for (std::size_t si = 0; si < pending.steps.size(); ++si) {
      const PendingStep& step = pending.steps[si];
      std::map<std::string, double> part = step.part;
      double accounted = 0;
      for (const auto& [k, v] : part)
        accounted += v;
      for (auto& [group, in] : by_step) {
        const std::vector<Interval> u = merged(std::move(in[si]));
        const double exposed = static_cast<double>(total_length(outside(u, step.compute)));
        if (group == "pp") {
          pending.pipeline[si].exposed_ns += exposed;
        } else {
          part[group == "wait" ? "wait" : "communication." + group] += exposed;
        }
        accounted += exposed;
      }
      part["idle"] = std::max(0.0, pending.step_lengths[si] - accounted);
      for (std::string_view name : kStepPartNames)
        pending.per_part[std::string(name)].push_back(part[std::string(name)]);
      pending.per_part["idle"].push_back(part["idle"]);
    }
  }

  // A pipeline receive takes at least the time the same message takes
  // anywhere in the run: the transfer; the rest of it is waiting for the
  // other stage. So does a send: a large message waits for its receive to
  // be posted (MPI's rendezvous, NCCL's pairing). Run-wide, because a stage
  // may wait in every one of its receives (a first stage whose gradients
  // come back from a busier last stage).
  std::map<std::pair<bool, std::int64_t>, std::int64_t> transfer_ns;
  for (auto& [key, lengths] : call_lengths)
    transfer_ns[key] = fastest(lengths);
  std::vector<StepParts> out;
  for (PendingRank& pending : pending_ranks) {
    for (std::size_t si = 0; si < pending.pipeline.size(); ++si) {
      const PipelineStep& step = pending.pipeline[si];
      double transfer = 0;
      for (const P2p& call : step.calls) {
        transfer += static_cast<double>(
            std::min(call.when.second - call.when.first, transfer_ns[{call.send, call.bytes}]));
      }
      transfer = std::min(step.exposed_ns, transfer);
      pending.per_part["communication.pp"][si] = transfer;
      pending.per_part["bubble"][si] = step.exposed_ns - transfer;
    }
    StepParts parts;
    parts.rank = pending.rank;
    parts.steps = static_cast<int>(pending.step_lengths.size());
    parts.warm_up = pending.warm_up;
    parts.step_s = median(pending.step_lengths) * 1e-9;
    for (std::string_view name : kStepPartNames) {
      parts.parts.emplace_back(std::string(name),
                               median(pending.per_part[std::string(name)]) * 1e-9);
    }
    parts.parts.emplace_back("idle", median(pending.per_part["idle"]) * 1e-9);
    out.push_back(std::move(parts));
  }
  return out;
}

Result<std::map<std::int64_t, std::int64_t>> off_cpu_by_op_end(const TraceReader& reader,
                                                               std::int32_t rank) {
  std::map<std::int64_t, std::int64_t> out;
  const std::optional<StringId> counter = reader.find_string(kOffCpuCounter);
  if (!counter) return out;
  auto samples = reader.counters(rank, *counter);
  if (!samples) return samples.error();
  for (const CounterSample& c : *samples)
    out[c.time_ns] = static_cast<std::int64_t>(std::max(0.0, c.value));
  return out;
}

double StepParts::compute() const {
  double total = 0;
  for (const auto& [name, v] : parts) {
    if (name.starts_with("compute.") || name == "optimizer" || name == "descheduled") total += v;
  }
  return total;
}

Result<StepParts> measure_step_parts(const TraceReader& reader) {
  auto ranks = measure_rank_parts(reader);
  if (!ranks) return ranks.error();
  return *std::max_element(
      ranks->begin(), ranks->end(),
      [](const StepParts& a, const StepParts& b) { return a.compute() < b.compute(); });
}

}  // namespace cs::trace
