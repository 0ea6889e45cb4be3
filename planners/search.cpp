#include "planners/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <system_error>
#include <thread>

#include "core/format.h"
#include "core/shown_name.h"
#include "planners/cost_model.h"

namespace cs::plan {

std::string mfu_across_precisions_note(const std::vector<RankedPlan>& plans,
                                       std::string_view rate) {
  const bool differ = std::any_of(plans.begin(), plans.end(), [&](const RankedPlan& r) {
    return r.precision.compute != plans.front().precision.compute;
  });
  if (!differ) return {};
  return "MFU is of each plan's own precision's dense peak: compare plans of different "
         "precisions by " +
         std::string(rate);
}

std::string_view to_string(Objective o) {
  switch (o) {
    case Objective::throughput:
      return "throughput";
    case Objective::cost:
      return "cost";
    case Objective::time_to_train:
      return "time";
    case Objective::memory_headroom:
      return "memory";
    case Objective::gpus:
      return "gpus";
  }
  return "throughput";
}

std::optional<Objective> objective_from_string(std::string_view text) {
  for (Objective o : {Objective::throughput, Objective::cost, Objective::time_to_train,
                      Objective::memory_headroom, Objective::gpus}) {
    if (to_string(o) == text) return o;
  }
  if (text == "time_to_train" || text == "time-to-train") return Objective::time_to_train;
  if (text == "memory_headroom" || text == "headroom") return Objective::memory_headroom;
  return std::nullopt;
}

namespace {

using detail::Knobs;
using detail::LayerCosts;
using detail::Machine;
using detail::Model;
using Clock = std::chrono::steady_clock;

// Divisors of n, ascending, in O(sqrt n).
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int d = 1; static_cast<long long>(d) * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// One outer unit of work: everything the per-layer costs depend on.
struct Unit {
  int cluster = 0;  // index into the cluster sizes
  int global_batch = 0;
  Precision precision = Precision::bf16;
  int tp = 1;
  bool sp = false;
  int micro_batch = 1;
  bool flash = true;
};

// The inner combinations of one unit, in a fixed order.
struct Inner {
  int pp = 1, dp = 1, v = 1, zero = 0;
  Recompute recompute = Recompute::none;
};

struct Sizes {
  Cluster cluster;
  Machine machine;
};

// A candidate kept by a worker: enough to rebuild and rank it.
struct Kept {
  double score = 0;
  double tokens = 0;
  double memory = 0;
  int gpus = 0;
  long long id = 0;  // enumeration order, for deterministic ties
  int cluster = 0;
  Knobs knobs;
  Estimate estimate;
};

// a ranks before b: higher score, then throughput, then fewer GPUs, then
// less memory per GPU (of two plans as fast, the one with more headroom:
// ZeRO or recomputation that costs nothing), then enumeration order.
// Scores and throughputs compare to float precision (7 digits): two plans
// the model times alike differ in their last digits by the order of their
// sums, and a ZeRO-1 plan then ranked before the ZeRO-2 plan as fast with
// 13 GiB less. (Rounding, not a tolerance, keeps the order transitive.)
float to_float_precision(double figure) { return static_cast<float>(figure); }

bool better(const Kept& a, const Kept& b) {
  const float score_a = to_float_precision(a.score), score_b = to_float_precision(b.score);
  if (score_a != score_b) return score_a > score_b;
  const float tokens_a = to_float_precision(a.tokens), tokens_b = to_float_precision(b.tokens);
  if (tokens_a != tokens_b) return tokens_a > tokens_b;
  if (a.gpus != b.gpus) return a.gpus < b.gpus;
  if (a.memory != b.memory) return a.memory < b.memory;
  return a.id < b.id;
}

double score_of(Objective objective, const Estimate& e) {
  switch (objective) {
    case Objective::throughput:
      return e.throughput.tokens_per_second;
    case Objective::cost:
      if (e.training.cost_usd > 0) return -e.training.cost_usd;
      if (e.training.gpu_hours > 0) return -e.training.gpu_hours;
      return -e.gpus / std::max(e.throughput.tokens_per_second, 1e-30);  // GPU-seconds per token
    case Objective::time_to_train:
      if (e.training.seconds > 0) return -e.training.seconds;
      return -1.0 / std::max(e.throughput.tokens_per_second, 1e-30);
    case Objective::memory_headroom:
      return e.headroom_bytes;
    case Objective::gpus:
      return -static_cast<double>(e.gpus);
  }
  return 0;
}

// Non-dominated points: maximise tokens, minimise `x` (memory or GPUs).
// Throughputs compare to float precision, as in the ranking: a plan as fast
// but for its last digits, with more memory, is dominated.
class Front {
 public:
  explicit Front(bool by_gpus) : by_gpus_(by_gpus) {}
  double x_of(const Kept& k) const { return by_gpus_ ? k.gpus : k.memory; }
  // Cheap test before copying an estimate in. A point as fast and as large
  // as one kept is a tie, which add() settles as the ranking does (else
  // which one stayed depended on how the threads shared the work).
  bool would_keep(double tokens, double x) const {
    for (const Kept& p : points_) {
      const float pt = to_float_precision(p.tokens), t = to_float_precision(tokens);
      const double px = x_of(p);
      if (pt >= t && px <= x && !(pt == t && px == x)) return false;
    }
    return true;
  }
  void add(const Kept& k) {
    const double x = x_of(k);
    if (!would_keep(k.tokens, x)) return;
    for (Kept& p : points_) {
      if (to_float_precision(p.tokens) == to_float_precision(k.tokens) && x_of(p) == x) {
        if (better(k, p)) p = k;
        return;
      }
    }
    points_.erase(
        std::remove_if(points_.begin(), points_.end(),
                       [&](const Kept& p) {
                         return to_float_precision(k.tokens) >= to_float_precision(p.tokens) &&
                                x <= x_of(p);
                       }),
        points_.end());
    points_.push_back(k);
  }
  const std::vector<Kept>& points() const { return points_; }

 private:
  bool by_gpus_;
  std::vector<Kept> points_;
};

struct Worker {
  std::vector<Kept> best;  // at most top_k, unsorted until the end
  Front memory_front{false};
  Front gpu_front{true};
  long long valid = 0, fitting = 0, kept = 0;
  double smallest_memory = 0;  // of the valid candidates; 0 before the first
};

void keep_best(std::vector<Kept>& best, std::size_t top_k, const Kept& k) {
  if (best.size() < top_k) {
    best.push_back(k);
    return;
  }
  auto worst = std::min_element(best.begin(), best.end(),
                                [](const Kept& a, const Kept& b) { return better(b, a); });
  if (better(k, *worst)) *worst = k;
}

std::vector<Inner> inner_combinations(const Model& x, const SearchSpace& space, int gpus,
                                      int global_batch, int tp, int micro_batch,
                                      const std::vector<Recompute>& recomputes,
                                      const std::vector<int>& zeros) {
  std::vector<Inner> out;
  const int layers = x.transformer ? static_cast<int>(x.layers) : 1;
  for (int pp : divisors(layers)) {
    if (static_cast<long long>(tp) * pp > gpus) break;
    if (!x.transformer && pp > 1) break;
    // dp must divide the micro-batches of a step: try only those divisors.
    std::vector<int> dps;
    if (space.use_all_gpus) {
      if (gpus % (tp * pp) != 0) continue;
      dps.push_back(gpus / (tp * pp));
    } else if (global_batch % micro_batch == 0) {
      for (int dp : divisors(global_batch / micro_batch)) {
        if (static_cast<long long>(dp) * tp * pp > gpus) break;
        dps.push_back(dp);
      }
    }
    for (int dp : dps) {
      // 64-bit: dp x micro-batch passes an int on a cluster of 2^30 GPUs, and
      // wrapped to 0 it divided by zero (the app's search crashed).
      const long long samples = static_cast<long long>(dp) * micro_batch;
      if (samples > global_batch || global_batch % samples != 0) continue;
      const int micro_batches = static_cast<int>(global_batch / samples);
      std::vector<int> vs = {1};
      if (pp > 1) {
        for (int v = 2; v <= space.max_virtual_stages; ++v) {
          if ((layers / pp) % v == 0 && micro_batches % pp == 0) vs.push_back(v);
        }
      }
      for (int v : vs) {
        for (int zero : zeros) {
          if (zero > 0 && dp == 1) continue;  // nothing to shard over
          if (zero >= 2 && pp > 1) continue;  // the rules refuse it
          for (Recompute r : recomputes) {
            if (!x.transformer && r != Recompute::none) continue;
            out.push_back({pp, dp, v, zero, r});
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

Result<SearchResult> search(const Cluster& cluster, const Workload& workload,
                            const SearchSpace& space, Objective objective,
                            const SearchLimits& limits, const SearchControl& control) {
  const auto started = Clock::now();
  if (!cluster.gpu || cluster.gpus_per_node <= 0) {
    return Error{"search: the cluster \"" + cluster.name + "\" has no GPU to plan for"};
  }
  if (space.global_batches.empty()) return Error{"search: give at least one global batch"};
  for (int gb : space.global_batches) {
    if (gb < 1) return Error{"search: global batch must be >= 1 (got " + std::to_string(gb) + ")"};
  }
  if (limits.top_k < 1) return Error{"search: top_k must be >= 1"};
  if (workload.kind == WorkloadKind::transformer &&
      (workload.transformer.layers < 1 || workload.transformer.heads < 1)) {
    return Error{"search: the workload \"" + workload.name + "\" has no layers or heads"};
  }

  // Cluster sizes.
  std::vector<Sizes> sizes;
  std::vector<int> node_counts = space.node_counts;
  if (node_counts.empty()) node_counts.push_back(cluster.nodes);
  for (int n : node_counts) {
    if (n < 1) return Error{"search: node counts must be >= 1 (got " + std::to_string(n) + ")"};
    if (n > 1 && !cluster.inter_node) {
      return Error{"search: the cluster \"" + cluster.name +
                   "\" has no link between nodes, so it cannot "
                   "grow to " +
                   std::to_string(n) + " nodes"};
    }
    Sizes s;
    s.cluster = cluster;
    s.cluster.nodes = n;
    s.machine = detail::machine_of(s.cluster);
    sizes.push_back(std::move(s));
  }
  const Model x = detail::model_of(workload);

  // What to try.
  std::vector<Precision> precisions = space.precisions;
  for (Precision p : precisions) {
    // Asked for by name, a precision the GPU cannot compute in is an error,
    // not a search that finds nothing.
    if (cluster.gpu->peak.of(p) <= 0) {
      const std::string gpu = shown_name(*cluster.gpu);
      const std::string name(to_string(p));
      if (calibrated_without(*cluster.gpu, p)) {
        return Error{"search: the " + gpu + " was calibrated without " + name +
                     " (its preset gives no " + name +
                     " rate): calibrate again with --precisions " + name +
                     " to measure it, or search other precisions"};
      }
      return Error{"search: the " + gpu + " has no " + name + " path (its preset gives no " +
                   name + " rate, peak_tflops." + name + "): no plan can compute in " + name};
    }
  }
  // A plan that serves (INT8/INT4 weights: forward only, no backward or
  // optimizer) ranked above every plan that trains by its tokens/s, its
  // "time to train" a forward pass over the tokens.
  if (!precisions.empty()) {
    const auto serves = [](Precision p) { return PrecisionPlan::for_compute(p).inference; };
    const auto serving = std::find_if(precisions.begin(), precisions.end(), serves);
    const auto training = std::find_if_not(precisions.begin(), precisions.end(), serves);
    if (serving != precisions.end() && training != precisions.end()) {
      const std::string s(to_string(*serving)), t(to_string(*training));
      return Error{"search: " + s +
                   " plans serve (forward passes only, no backward or optimizer) "
                   "and " +
                   t +
                   " plans train: their steps, tokens/s and times do not compare; "
                   "search them apart"};
    }
  }
  if (precisions.empty()) {
    const PeakRates& peak = cluster.gpu->peak;
    for (Precision p :
         {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16, Precision::fp8}) {
      // fp16 at bf16's rate estimates the same as bf16 and needs loss
      // scaling: its rows only doubled the list (ask for it by name).
      if (p == Precision::fp16 && peak.of(Precision::bf16) >= peak.of(p)) continue;
      if (peak.of(p) > 0) precisions.push_back(p);
    }
  }
  std::vector<Recompute> recomputes = space.recomputes;
  if (recomputes.empty()) recomputes = {Recompute::none, Recompute::selective, Recompute::full};
  std::vector<int> zeros = space.zero_stages;
  if (zeros.empty()) zeros = {0, 1, 2, 3};
  std::vector<int> micro_batches = space.micro_batches;
  if (micro_batches.empty()) {
    for (std::int64_t mb = 1; mb <= std::max(space.max_micro_batch, 1); mb *= 2)
      micro_batches.push_back(static_cast<int>(mb));
  }

  // A unit's inner combinations. Listed again by the worker that takes the
  // unit, not kept from the count: kept, 50 million of them took 1.3 GB
  // before a search too wide was refused.
  const auto inners_of = [&](const Unit& u) {
    // With fused attention selective recomputation saves no memory over
    // none and re-runs core attention: never better.
    std::vector<Recompute> tried = recomputes;
    if (u.flash)
      tried.erase(std::remove(tried.begin(), tried.end(), Recompute::selective), tried.end());
    return inner_combinations(x, space, sizes[u.cluster].cluster.total_gpus(), u.global_batch, u.tp,
                              u.micro_batch, tried, zeros);
  };

  // Outer units, each with its inner combinations counted up front.
  std::vector<Unit> units;
  long long total = 0;
  const int heads = x.transformer ? static_cast<int>(x.heads) : 1;
  // Listing the units of a wide search takes seconds: a stop asked for
  // meanwhile is taken here, not once the listing is done.
  bool stopped_while_listing = false;
  [&] {
  for (int c = 0; c < static_cast<int>(sizes.size()); ++c) {
    const int gpus = sizes[c].cluster.total_gpus();
    for (int gb : space.global_batches) {
      for (Precision p : precisions) {
        if (cluster.gpu->peak.of(p) <= 0) continue;
        for (int tp : divisors(cluster.gpus_per_node)) {
          if (tp > gpus || heads % tp != 0) continue;
          if (!x.transformer && tp > 1) continue;
          for (int spv = 0; spv < 2; ++spv) {
            const bool sp = spv == 1;
            if (sp && (tp < 2 || !space.try_sequence_parallel)) continue;
            for (int mb : micro_batches) {
              if (mb > gb) continue;
              if (control.stop.stop_requested()) {
                stopped_while_listing = true;
                return;
              }
              for (int fl = 1; fl >= 0; --fl) {
                if (fl == 0 && (!space.try_without_flash_attention || !x.transformer)) continue;
                const Unit u{c, gb, p, tp, sp, mb, fl == 1};
                const std::size_t count = inners_of(u).size();
                if (count == 0) continue;
                total += static_cast<long long>(count);
                if (total > limits.max_candidates) return;
                units.push_back(u);
              }
            }
          }
        }
      }
    }
  }
  }();
  if (total > limits.max_candidates) {
    return Error{"search: the space holds more than " +
                 format_count(double(limits.max_candidates)) + " candidate plans (" +
                 std::to_string(sizes.size()) + " cluster sizes, " +
                 std::to_string(space.global_batches.size()) + " global batches, " +
                 std::to_string(micro_batches.size()) +
                 " micro-batch sizes, with every split of the GPUs): narrow it (fewer node "
                 "counts or global batches, a smaller largest micro-batch)"};
  }

  const int threads =
      std::max(1, limits.threads > 0 ? limits.threads
                                     : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<Worker> workers(threads);
  std::atomic<std::size_t> next_unit{0};
  std::atomic<long long> evaluated{0};
  std::atomic<long long> fitting_so_far{0};
  std::atomic<bool> stop{stopped_while_listing};
  std::atomic<double> best_score{-std::numeric_limits<double>::infinity()};
  const std::size_t top_k = static_cast<std::size_t>(limits.top_k);

  auto work_unit = [&](std::size_t index, Worker& w) {
    const Unit& u = units[index];
    const Sizes& s = sizes[u.cluster];
    Knobs k;
    k.tp = u.tp;
    k.sp = u.sp;
    k.micro_batch = u.micro_batch;
    k.global_batch = u.global_batch;
    k.flash = u.flash;
    const PrecisionPlan precision = PrecisionPlan::for_compute(u.precision);
    k.compute = precision.compute;
    k.weights = precision.weights;
    k.gradients = precision.gradients;
    k.optimizer_state = precision.optimizer_state;
    k.master_weights = precision.master_weights;
    k.fp32_main_grad = space.fp32_main_grad && !precision.inference;
    k.inference = precision.inference;
    k.fp8_amax_history = precision.fp8.amax_history;
    k.fp8_backward = precision.fp8.backward_fp8;
    const LayerCosts costs = detail::layer_costs(s.machine, x, k);
    Kept candidate;
    long long local_fitting = 0;
    const std::vector<Inner> in = inners_of(u);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Inner& c = in[i];
      k.pp = c.pp;
      k.dp = c.dp;
      k.v = c.v;
      k.zero = c.zero;
      k.recompute = c.recompute;
      if (!detail::check_rules(s.machine, x, k, nullptr, nullptr)) continue;
      ++w.valid;
      // Memory first: most candidates of a large model stop here.
      const double memory = detail::memory_total(s.machine, x, k, costs.activation_element_bytes);
      if (w.smallest_memory == 0 || memory < w.smallest_memory) w.smallest_memory = memory;
      if (memory > s.machine.memory_bytes) continue;
      ++w.fitting;
      ++local_fitting;
      detail::evaluate(s.machine, x, k, costs, candidate.estimate);
      const Estimate& e = candidate.estimate;
      if (e.headroom_bytes < limits.min_headroom_bytes) continue;
      if (limits.max_days > 0 && e.training.seconds > limits.max_days * 86400) continue;
      if (limits.max_cost_usd > 0 && e.training.cost_usd > limits.max_cost_usd) continue;
      ++w.kept;
      candidate.score = score_of(objective, e);
      double seen = best_score.load(std::memory_order_relaxed);
      while (candidate.score > seen &&
             !best_score.compare_exchange_weak(seen, candidate.score, std::memory_order_relaxed)) {
      }
      candidate.tokens = e.throughput.tokens_per_second;
      candidate.memory = e.memory.total();
      candidate.gpus = e.gpus;
      candidate.id = static_cast<long long>(index) * 1000000 + static_cast<long long>(i);
      candidate.cluster = u.cluster;
      candidate.knobs = k;
      keep_best(w.best, top_k, candidate);
      w.memory_front.add(candidate);
      w.gpu_front.add(candidate);
    }
    evaluated.fetch_add(static_cast<long long>(in.size()), std::memory_order_relaxed);
    fitting_so_far.fetch_add(local_fitting, std::memory_order_relaxed);
  };

  auto run_worker = [&](Worker& w) {
    while (!stop.load(std::memory_order_relaxed)) {
      const std::size_t index = next_unit.fetch_add(1);
      if (index >= units.size()) break;
      work_unit(index, w);
    }
  };

  auto report = [&]() {
    if (!control.on_progress) return;
    SearchProgress progress;
    progress.evaluated = evaluated.load();
    progress.total = total;
    progress.fitting = fitting_so_far.load();
    progress.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    const double best = best_score.load();
    progress.best_score = std::isfinite(best) ? best : 0;
    control.on_progress(progress);
  };

  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    // A thread the system will not start (its limit reached) leaves its
    // share of the units to the others.
    try {
      pool.emplace_back([&, t] { run_worker(workers[t]); });
    } catch (const std::system_error&) {
      break;
    }
  }
  // The calling thread works too, and reports progress between its units.
  auto last_report = Clock::now();
  while (!stop.load()) {
    if (control.stop.stop_requested()) {
      stop = true;
      break;
    }
    const std::size_t index = next_unit.fetch_add(1);
    if (index >= units.size()) break;
    work_unit(index, workers[0]);
    if (Clock::now() - last_report > std::chrono::milliseconds(50)) {
      report();
      last_report = Clock::now();
    }
  }
  // Other threads watch `stop`; the stop token is polled here while they finish.
  while (true) {
    if (control.stop.stop_requested()) stop = true;
    bool busy = next_unit.load() < units.size() && !stop.load();
    if (!busy) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (std::thread& t : pool)
    t.join();

  // Merge.
  SearchResult result;
  result.threads = static_cast<int>(pool.size()) + 1;
  result.candidates = evaluated.load();
  result.cancelled = stopped_while_listing || (stop.load() && result.candidates < total);
  std::vector<Kept> best;
  Front memory_front(false);
  Front gpu_front(true);
  for (Worker& w : workers) {
    result.valid += w.valid;
    result.fitting += w.fitting;
    result.kept += w.kept;
    if (w.smallest_memory > 0 && (result.smallest_memory_bytes == 0 ||
                                  w.smallest_memory < result.smallest_memory_bytes))
      result.smallest_memory_bytes = w.smallest_memory;
    if (!sizes.empty()) result.gpu_memory_bytes = sizes.front().machine.memory_bytes;
    for (const Kept& k : w.best)
      keep_best(best, top_k, k);
    for (const Kept& k : w.memory_front.points())
      memory_front.add(k);
    for (const Kept& k : w.gpu_front.points())
      gpu_front.add(k);
  }
  std::sort(best.begin(), best.end(), better);

  auto ranked = [&](const Kept& k) {
    RankedPlan r;
    const Sizes& s = sizes[k.cluster];
    r.nodes = s.cluster.nodes;
    const Knobs& kn = k.knobs;
    r.parallel.dp = kn.dp;
    r.parallel.tp = kn.tp;
    r.parallel.pp = kn.pp;
    r.parallel.virtual_stages = kn.v;
    r.parallel.schedule = kn.v > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
    r.parallel.sequence_parallel = kn.sp;
    r.parallel.zero_stage = kn.zero;
    r.parallel.micro_batch = kn.micro_batch;
    r.parallel.global_batch = kn.global_batch;
    r.parallel.recompute = kn.recompute;
    r.parallel.flash_attention = kn.flash;
    r.precision = PrecisionPlan::for_compute(kn.compute);
    r.precision.fp32_main_grad = kn.fp32_main_grad;
    // The full estimate (with its notes) of the plan as a user would enter it.
    Plan plan{s.cluster, workload, r.parallel, r.precision};
    auto e = estimate(plan);
    r.estimate = e ? std::move(e).value() : k.estimate;
    r.score = k.score;
    return r;
  };
  for (const Kept& k : best)
    result.best.push_back(ranked(k));
  std::vector<Kept> mem = memory_front.points();
  std::sort(mem.begin(), mem.end(), [](const Kept& a, const Kept& b) {
    return a.memory != b.memory ? a.memory < b.memory : a.id < b.id;
  });
  for (const Kept& k : mem)
    result.pareto_memory.push_back(ranked(k));
  std::vector<Kept> gp = gpu_front.points();
  std::sort(gp.begin(), gp.end(), [](const Kept& a, const Kept& b) {
    return a.gpus != b.gpus ? a.gpus < b.gpus : a.id < b.id;
  });
  for (const Kept& k : gp)
    result.pareto_gpus.push_back(ranked(k));
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  report();
  return result;
}

}  // namespace cs::plan
