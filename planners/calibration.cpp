#include "planners/calibration.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/launched_kernels.h"
#include "core/median.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "planners/collectives.h"

namespace cs::plan {

namespace {

using nlohmann::json;

// --- small weighted least squares -----------------------------------------

// Solves min sum_i w_i (x_i . beta - y_i)^2 by the normal equations (the
// problems here have at most a handful of unknowns). Empty when singular.
std::optional<std::vector<double>> least_squares(const std::vector<std::vector<double>>& x,
                                                 const std::vector<double>& y,
                                                 const std::vector<double>& w) {
  if (x.empty()) return std::nullopt;
  const std::size_t k = x.front().size();
  std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0.0));
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (std::size_t r = 0; r < k; ++r) {
      for (std::size_t c = 0; c < k; ++c)
        a[r][c] += w[i] * x[i][r] * x[i][c];
      a[r][k] += w[i] * x[i][r] * y[i];
    }
  }
  // Gaussian elimination with partial pivoting.
  for (std::size_t col = 0; col < k; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < k; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (std::fabs(a[pivot][col]) < 1e-300) return std::nullopt;
    std::swap(a[col], a[pivot]);
    for (std::size_t r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (std::size_t c = col; c <= k; ++c)
        a[r][c] -= f * a[col][c];
    }
  }
  std::vector<double> beta(k);
  for (std::size_t r = 0; r < k; ++r)
    beta[r] = a[r][k] / a[r][r];
  return beta;
}

FitQuality quality_of(std::vector<FitPoint> points) {
  FitQuality q;
  if (points.empty()) return q;
  double mean = 0;
  for (const FitPoint& p : points)
    mean += p.measured_s;
  mean /= static_cast<double>(points.size());
  double ss_res = 0, ss_tot = 0, sq = 0;
  for (const FitPoint& p : points) {
    ss_res += (p.predicted_s - p.measured_s) * (p.predicted_s - p.measured_s);
    ss_tot += (p.measured_s - mean) * (p.measured_s - mean);
    sq += p.error() * p.error();
    q.max_error = std::max(q.max_error, std::fabs(p.error()));
  }
  q.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1 : 0);
  q.rms_error = std::sqrt(sq / static_cast<double>(points.size()));
  std::sort(points.begin(), points.end(),
            [](const FitPoint& a, const FitPoint& b) { return a.size < b.size; });
  q.points = std::move(points);
  return q;
}

// BLAS threads per rank of a CPU-engine configuration: as recorded, else
// the worker's default (the cores shared out among the ranks).
int threads_per_rank(int ranks, int threads, int cpu_cores) {
  return threads > 0 ? threads : std::max(1, cpu_cores / std::max(1, ranks));
}
int threads_per_rank(const DeviceFit& fit, int cpu_cores) {
  return threads_per_rank(fit.ranks, fit.threads, cpu_cores);
}

// --- what the store holds ----------------------------------------------------

// The typical time of one operation. A sweep's: the median of its samples;
// on a machine that other work shares, a few are preempted for a whole
// scheduler slice (milliseconds on a microsecond kernel), which a mean
// would fold into the device's speed.
// A run's step is the sum of its operations, and each one's times lean long
// (caches, the scheduler), so their medians add up short: in CPU-engine runs
// of 1 and 2 ranks on the 2-core VM (passes YY-CCC) the sum of each
// operation's median fell 1-10 % short of the median step's compute, the
// sum of their means over the steady steps (steady_steps) within 2.5 % in
// 22 of 25 runs. A CPU-engine run's is therefore the mean over its steady
// steps (a GPU's kernels wait for no scheduler of the host's), and of
// several runs the lower median of theirs: a run that other work slowed
// throughout (one of YY's took its GEMMs 193 % longer than the other run of
// that plan) says nothing of the machine's speed, and of two runs the
// faster is kept.
// A CPU-engine run's collective of one size is its median call (the calls
// wait for the scheduler now and then, and a mean would fold that into the
// link), and of several runs the lower median likewise: the development
// VM's two modes put one run's 18.7 MiB gradient reduction at 11.9 ms and
// the next one's at 5.95, and the median of all their calls had learnt the
// slow one (DP 2 large then predicted +95 %).
struct OpTimes {
  std::vector<double> samples;     // a sweep's, or a run's whose ranks share cores
  std::vector<double> run_means;   // per run store: its mean over its steady steps, or its
                                   // median call (a collective's)
  std::int64_t count = 0;
  void add(double seconds) {
    samples.push_back(seconds);
    ++count;
  }
  void add_from_run(double seconds) {
    store_run_samples.push_back(seconds);
    ++count;
  }
  void add_run_median(const std::vector<double>& calls) {
    if (calls.empty()) return;
    run_means.push_back(middle_sample(calls));
    count += static_cast<std::int64_t>(calls.size());
  }
  // The store's samples are all in: their mean is kept, to pool with others'.
  void end_store() {
    if (store_run_samples.empty()) return;
    double sum = 0;
    for (double v : store_run_samples)
      sum += v;
    run_means.push_back(sum / static_cast<double>(store_run_samples.size()));
    store_run_samples.clear();
  }
  double typical() const {
    if (run_means.empty()) return middle_sample(samples);
    std::vector<double> means = run_means;
    const auto lower = means.begin() + static_cast<std::ptrdiff_t>((means.size() - 1) / 2);
    std::nth_element(means.begin(), lower, means.end());
    return *lower;
  }
  double total() const { return typical() * static_cast<double>(count); }
  void absorb(const OpTimes& other) {
    samples.insert(samples.end(), other.samples.begin(), other.samples.end());
    run_means.insert(run_means.end(), other.run_means.begin(), other.run_means.end());
    count += other.count;
  }

 private:
  std::vector<double> store_run_samples;  // this store's run samples, until end_store()
};

struct GemmKey {
  Precision precision;
  double flops;
  double bytes;
  auto operator<=>(const GemmKey&) const = default;
};

// The loop kinds of LoopCosts and the trace names that measure them. The
// optimizer's cost per parameter is the sum of its passes' costs.
struct LoopName {
  std::string_view name;
  std::string_view kind;
};
constexpr LoopName kLoopNames[] = {
    {"layernorm", "norm"},
    {"layernorm backward", "norm_backward"},
    {"gelu", "activation"},
    {"gelu backward", "activation_backward"},
    {"residual", "elementwise"},
    {"embedding", "elementwise"},
    {"embedding backward", "elementwise"},
    {"cross-entropy", "softmax"},
    {"adamw", "optimizer:adamw"},
    {"gradient norm", "optimizer:gradient norm"},
    {"scale", "optimizer:scale"},
    {"zero", "optimizer:zero"},
    {"convert", "optimizer:convert"},
    {"attention", "attention"},
    {"attention backward", "attention_backward"},
};

std::optional<std::string_view> loop_kind_of(std::string_view name) {
  for (const LoopName& l : kLoopNames) {
    if (l.name == name) return l.kind;
  }
  return std::nullopt;
}

struct PhaseData {
  CalibrationPhase phase;
  std::map<GemmKey, OpTimes> gemm;
  std::map<double, OpTimes> memory;  // by bytes
  // kind -> size (elements, or FLOPs for attention) -> times
  std::map<std::string, std::map<double, OpTimes>> loops;
  std::map<std::tuple<std::string, int, double>, OpTimes> collectives;  // (collective, ranks, bytes)
  // ... and those met with their buffers out of the caches: the cold sweep,
  // a CPU-engine run's gradient reductions.
  std::map<std::tuple<std::string, int, double>, OpTimes> cold_collectives;
  // GEMMs of a GPU run recorded without their operand bytes: not fitted,
  // since the planner adds their operand traffic to their FLOPs' time.
  std::int64_t gemms_without_bytes = 0;
  // A run store's optimizer step per parameter, one point per run (see
  // add_run_optimizer_points); a sweep's comes from its passes' sizes instead.
  std::vector<OptimizerPoint> run_optimizer;
  // CPU-engine ranks sharing cores: an operation of theirs runs at a core's
  // speed or at a share of it, as its partners compute or wait, and the
  // planner adds the share itself (GpuEfficiency::core_share); a run's
  // median keeps the core's speed, where a mean would add the share twice.
  bool shares_cores = false;
  // The precision the operation sweep ran in (a run's, its own): the phases
  // of one rank count are fitted together, the first one's precision
  // standing for them all (the optimizer's passes are summed as that one's),
  // and a GPU's sweep times the operations in one of them (bf16) among its
  // GEMMs' five.
  std::string loops_precision;
  // CPU engine: what timing an op added to its span, one figure per rank
  // (trace::kOpTimingCostCounter), seconds; empty in stores recorded before.
  std::vector<double> timing_costs;

  // Each operation's times, to end a store's samples (OpTimes::end_store).
  void end_store() {
    for (auto& [k, t] : gemm) t.end_store();
    for (auto& [k, t] : memory) t.end_store();
    for (auto& [kind, sizes] : loops) {
      for (auto& [k, t] : sizes) t.end_store();
    }
  }

  // Pools another store's operations of the same configuration into these.
  void absorb(const PhaseData& other) {
    if (loops_precision.empty()) loops_precision = other.loops_precision;
    gemms_without_bytes += other.gemms_without_bytes;
    run_optimizer.insert(run_optimizer.end(), other.run_optimizer.begin(),
                         other.run_optimizer.end());
    timing_costs.insert(timing_costs.end(), other.timing_costs.begin(), other.timing_costs.end());
    for (const auto& [k, m] : other.gemm) gemm[k].absorb(m);
    for (const auto& [k, m] : other.memory) memory[k].absorb(m);
    for (const auto& [kind, sizes] : other.loops) {
      for (const auto& [k, m] : sizes) loops[kind][k].absorb(m);
    }
    for (const auto& [k, m] : other.collectives) collectives[k].absorb(m);
    for (const auto& [k, m] : other.cold_collectives) cold_collectives[k].absorb(m);
  }
};

std::optional<Precision> precision_of_name(std::string_view name) {
  const auto space = name.rfind(' ');
  if (space == std::string_view::npos) return std::nullopt;
  return precision_from_string(name.substr(space + 1));
}

Result<std::vector<CalibrationPhase>> phases_of(const trace::TraceReader& r, Calibration& out) {
  std::vector<CalibrationPhase> phases;
  if (auto text = r.meta(kCalibrationMetaKey); text && !text->empty()) {
    auto info = calibration_info_from_json(*text, r.path() + ": meta calibration");
    if (!info) return info.error();
    out.engine = info->engine;
    out.host = info->host;
    out.device = info->device;
    out.host_memory_bytes = info->host_memory_bytes;
    out.cpu_cores = info->cpu_cores;
    return info->phases;
  }
  // A run store: one configuration, its world.
  CalibrationPhase ph;
  ph.ranks = std::max(1, r.world_size());
  ph.first_rank = std::numeric_limits<int>::max();
  for (const trace::RankInfo& rank : r.ranks())
    ph.first_rank = std::min(ph.first_rank, rank.rank);
  if (ph.first_rank == std::numeric_limits<int>::max()) ph.first_rank = 0;
  if (auto parallel = r.meta("parallel")) {
    // A broken meta row is the store's own analyses' to report; the
    // defaults stand.
    if (const json p = parse_json_text(*parallel); p.is_object()) {
      try {
        ph.threads = p.value("threads", 0);
        ph.precision = p.value("precision", "fp32");
        out.engine = p.value("backend", "");
      } catch (const json::exception&) {
      }
    }
  }
  if (auto plan = r.meta("plan_json")) {
    // As above: the run's own analyses report a broken plan.
    if (const json p = parse_json_text(*plan); p.is_object() && p.contains("cluster")) {
      try {
        out.cpu_cores = p["cluster"].value("cpu_cores_per_node", 0);
      } catch (const json::exception&) {
      }
    }
  }
  const trace::RunInfo run = r.run();
  if (out.engine.empty()) {
    // A GPU's run: the CUDA engine's, a profiled program's, or one imported
    // from a GPU profile (Kineto, Nsight Systems), whose streams say so.
    const bool gpu_streams =
        std::any_of(r.lanes().begin(), r.lanes().end(),
                    [](const trace::LaneInfo& l) { return l.kind == trace::LaneKind::gpu_stream; });
    out.engine = run.source == trace::kCudaEngineSource || run.source == "cupti" || gpu_streams
                     ? "cuda"
                     : "cpu";
  }
  out.host = run.host;
  if (!r.ranks().empty()) out.device = r.ranks().front().device;
  phases.push_back(ph);
  return phases;
}

// One operation of the worker as a sample of its kind: a loop by its name,
// else a GEMM by its FLOPs.
struct OpSample {
  std::string_view name;
  double flops = 0;
  double bytes = 0;
  std::int64_t count = 0;
  trace::DataType dtype = trace::DataType::none;
  double seconds = 0;
  // What its kernels computed in, where they say (a GPU's fp32 GEMM on TF32
  // tensor cores); else its name's, its type's, the phase's.
  std::optional<Precision> computed_in;
};

std::optional<Precision> sample_precision(const PhaseData& d, const OpSample& op) {
  if (op.computed_in) return op.computed_in;
  auto precision = precision_of_name(op.name);
  if (!precision) precision = trace::precision_of(op.dtype);
  if (!precision) precision = precision_from_string(d.phase.precision);
  return precision;
}

// `from_run`: a sample from a run's steady step (OpTimes).
void add_sample(PhaseData& d, const OpSample& op, bool gpu, bool from_run) {
  auto add = [&](OpTimes& times) {
    if (from_run && !d.shares_cores) {
      times.add_from_run(op.seconds);
    } else {
      times.add(op.seconds);
    }
  };
  if (auto kind = loop_kind_of(op.name)) {
    const bool attention = kind->starts_with("attention");
    const double size = attention ? op.flops : static_cast<double>(op.count);
    if (size > 0) add(d.loops[std::string(*kind)][size]);
    return;
  }
  if (op.name == "accumulate" && op.bytes > 0) {
    add(d.memory[op.bytes]);
    return;
  }
  if (op.flops <= 0) return;
  if (gpu && op.bytes <= 0) {
    ++d.gemms_without_bytes;
    return;
  }
  if (auto precision = sample_precision(d, op)) add(d.gemm[{*precision, op.flops, op.bytes}]);
}

// A run's optimizer step, rank by rank and step by step: the time of all
// its passes and the parameters its update covered.
struct OptimizerStep {
  double seconds = 0;
  double parameters = 0;
};
using OptimizerSteps = std::map<std::tuple<PhaseData*, std::int32_t, int>, OptimizerStep>;

void note_optimizer(OptimizerSteps& steps, PhaseData& d, std::int32_t rank, int step,
                    const OpSample& op) {
  const auto kind = loop_kind_of(op.name);
  if (!kind || !kind->starts_with("optimizer:")) return;
  OptimizerStep& s = steps[{&d, rank, step}];
  s.seconds += op.seconds;
  if (*kind == "optimizer:adamw") s.parameters += static_cast<double>(op.count);
}

// One point per run and configuration: the whole step over the parameters
// updated (a run's gradient norm and zeroing go tensor by tensor, its
// update over all of them at once, so the passes' own sizes do not add
// up), the median of a rank's steps, of the rank that ran it fastest.
// Ranks sharing cores run theirs while the others compute or poll in
// their waits; a slowed rank's rate holds the share, which the planner
// adds itself (DP 2 x PP 2 on 2 cores: the last stage's step at 2.0 ns per
// parameter, the first stage's, updating while the last polled for its
// next activations, 2.9).
void add_run_optimizer_points(const OptimizerSteps& steps) {
  std::map<std::pair<PhaseData*, std::int32_t>, std::vector<OptimizerPoint>> by_rank;
  for (const auto& [key, s] : steps) {
    const auto& [d, rank, step] = key;
    if (s.parameters > 0 && s.seconds > 0)
      by_rank[{d, rank}].push_back({s.parameters, s.seconds / s.parameters * 1e9});
  }
  std::map<PhaseData*, OptimizerPoint> fastest;
  for (auto& [key, points] : by_rank) {
    std::sort(points.begin(), points.end(),
              [](const OptimizerPoint& a, const OptimizerPoint& b) { return a.ns < b.ns; });
    const OptimizerPoint typical = points[points.size() / 2];
    auto [it, fresh] = fastest.try_emplace(key.first, typical);
    if (!fresh && typical.ns < it->second.ns) it->second = typical;
  }
  for (const auto& [d, point] : fastest)
    d->run_optimizer.push_back(point);
}

// A GPU rank's operations: the worker's host-side ranges (its GEMMs, with
// their FLOPs and bytes) take the GPU time of the kernels launched inside
// them (trace::LaunchedKernels).
struct GpuRank {
  struct HostOp {
    std::int64_t start_ns = 0, end_ns = 0;
    OpSample op;
    int step = 0;
    int kernels = 0;
  };
  std::vector<HostOp> ops;
  trace::LaunchedKernels launched;
};

// The worker's host range names a GEMM "gemm <op>": the op is what the
// sample is named for. Its batched attention GEMMs are part of the
// attention core, which the planner times as one operation: not a GEMM
// sample of the linear layers.
std::optional<std::string_view> gpu_sample_name(std::string_view host_op) {
  if (!host_op.starts_with("gemm ")) return host_op;
  host_op.remove_prefix(5);
  if (host_op.starts_with("attention")) return std::nullopt;
  return host_op;
}

// A CPU-engine run's data-parallel gradient reductions ("dp all-reduce",
// "dp reduce-scatter") meet their buffers out of the caches, as the cold
// sweep does.
bool gradient_reduction(std::string_view name) {
  return name.starts_with("dp ") && name.find("all-gather") == std::string_view::npos;
}

// A run's steady steps, per rank: past its warm-up (trace::warm_up_steps)
// and at most a quarter longer than the median of those. A longer step was
// disturbed (other work, the scheduler) and says nothing of its operations'
// own time. A rank that recorded no steps has no entry.
Result<std::map<std::int32_t, std::set<int>>> steady_steps(const trace::TraceReader& r) {
  auto steps = r.steps();
  if (!steps) return steps.error();
  std::map<std::int32_t, std::vector<std::pair<int, double>>> by_rank;  // (step, seconds)
  for (const trace::StepMetrics& s : *steps)
    by_rank[s.rank].emplace_back(s.step, static_cast<double>(s.end_ns - s.start_ns));
  std::map<std::int32_t, std::set<int>> out;
  for (auto& [rank, list] : by_rank) {
    std::sort(list.begin(), list.end());
    std::vector<double> lengths;
    for (const auto& [step, length] : list)
      lengths.push_back(length);
    const std::size_t first = trace::warm_up_steps(lengths);
    std::vector<double> after(lengths.begin() + static_cast<std::ptrdiff_t>(first), lengths.end());
    if (after.empty()) continue;
    const double median = middle_sample(after);
    std::set<int>& steady = out[rank];
    for (std::size_t i = first; i < list.size(); ++i) {
      if (lengths[i] <= 1.25 * median) steady.insert(list[i].first);
    }
  }
  return out;
}

Status collect(const trace::TraceReader& r, std::vector<PhaseData>& data, bool cpu_engine) {
  auto phase_of = [&](std::int32_t rank) -> PhaseData* {
    for (PhaseData& d : data) {
      if (rank >= d.phase.first_rank && rank < d.phase.first_rank + d.phase.ranks) return &d;
    }
    return nullptr;
  };
  // Ranks with a GPU stream: their compute is their kernels' (CUDA engine,
  // profiled programs); the others' is the worker's own events (CPU engine).
  std::map<std::int32_t, GpuRank> gpu;
  std::set<std::uint32_t> stream_lanes;
  for (const trace::LaneInfo& l : r.lanes()) {
    if (l.kind == trace::LaneKind::gpu_stream) {
      gpu[l.rank];
      stream_lanes.insert(l.id.value);
    }
  }
  // The cold sweep's span on each rank (read from the annotation lanes only).
  std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> cold_spans;
  const trace::TimeRange range = r.time_range();
  std::vector<trace::LaneId> annotation_lanes;
  for (const trace::LaneInfo& l : r.lanes()) {
    if (l.kind == trace::LaneKind::annotation) annotation_lanes.push_back(l.id);
  }
  if (cpu_engine && !annotation_lanes.empty()) {
    Status spans = r.for_each_event(annotation_lanes, range.start_ns, range.end_ns + 1, [&](const trace::StoredEvent& se) {
      if (se.event.kind == trace::EventKind::annotation &&
          r.string(se.event.name) == kColdCollectivesAnnotation) {
        cold_spans[se.rank].emplace_back(se.event.start_ns, se.event.end_ns);
      }
      return true;
    });
    if (!spans) return spans;
  }
  auto in_cold_span = [&](std::int32_t rank, std::int64_t t) {
    auto it = cold_spans.find(rank);
    if (it == cold_spans.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](const auto& s) { return t >= s.first && t < s.second; });
  };
  // Each collective call, per rank in the order it made them: (start, seconds)
  // under (configuration, collective, ranks, bytes, event name, cold).
  using CallKey = std::tuple<PhaseData*, std::string, int, double, std::string, bool>;
  std::map<CallKey, std::map<std::int32_t, std::vector<std::pair<std::int64_t, double>>>> calls;
  const bool run_store = !r.meta(kCalibrationMetaKey);
  std::map<std::int32_t, std::set<int>> steady;
  if (run_store) {
    auto found = steady_steps(r);
    if (!found) return found.error();
    steady = std::move(*found);
  }
  // Whether a run's operation in `step` is from a steady step; empty where
  // its rank recorded no steps (its samples then count as a sweep's).
  auto steady_step = [&](std::int32_t rank, int step) -> std::optional<bool> {
    auto it = steady.find(rank);
    if (it == steady.end()) return std::nullopt;
    return it->second.count(step) > 0;
  };
  // A run's CPU-engine ops are timed on CPU: the time their thread was off
  // it (trace::kOffCpuCounter) the planner counts apart, as descheduled
  // compute (a communication thread overlapping backward took DP 2 small's
  // ops 2.6 ms a step). A sweep's keep it: where its ranks share cores
  // their medians are read as holding the share (unsliced_loops).
  std::map<std::int32_t, std::map<std::int64_t, std::int64_t>> off_cpu;
  if (run_store && cpu_engine) {
    for (const trace::RankInfo& rank : r.ranks()) {
      auto of_rank = trace::off_cpu_by_op_end(r, rank.rank);
      if (!of_rank) return of_rank.error();
      off_cpu[rank.rank] = std::move(*of_rank);
    }
  }
  if (cpu_engine) {
    if (const std::optional<trace::StringId> cost = r.find_string(trace::kOpTimingCostCounter)) {
      for (const trace::RankInfo& rank : r.ranks()) {
        PhaseData* d = phase_of(rank.rank);
        if (!d) continue;
        auto samples = r.counters(rank.rank, *cost);
        if (!samples) return samples.error();
        for (const trace::CounterSample& c : *samples) {
          // Clock reads take micro-, not milliseconds: a larger figure is no
          // measurement (a damaged or edited store) and is left out.
          if (c.value >= 0 && c.value < 1e6) d->timing_costs.push_back(c.value * 1e-9);
        }
      }
    }
  }
  auto seconds_on_cpu = [&](std::int32_t rank, const trace::Event& e, double seconds) {
    const auto of_rank = off_cpu.find(rank);
    if (of_rank == off_cpu.end()) return seconds;
    const auto off = of_rank->second.find(e.end_ns);
    return off == of_rank->second.end()
               ? seconds
               : std::max(0.0, seconds - static_cast<double>(off->second) * 1e-9);
  };
  OptimizerSteps optimizer_steps;
  // A sweep's first pass of each operation on a rank touches freshly
  // allocated buffers (AdamW over 4.19 M parameters: 120-250 ms, against
  // 4-8 ms after), and a size swept only three times would take its median
  // from it: each rank's earliest pass of each operation is left out (held
  // here until an earlier one replaces it), unless it is the only one (an
  // imported sweep's lines). A run's first step is already.
  struct FirstPass {
    std::int64_t start = 0;
    OpSample op;
    bool alone = true;
  };
  using SweepKey =
      std::tuple<PhaseData*, std::int32_t, std::string_view, std::int64_t, double, double>;
  std::map<SweepKey, FirstPass> first_pass;
  Status walked = r.for_each_event({}, range.start_ns, range.end_ns + 1, [&](const trace::StoredEvent& se) {
    const trace::Event& e = se.event;
    PhaseData* d = phase_of(se.rank);
    if (!d) return true;
    auto on_gpu = gpu.find(se.rank);
    if (on_gpu != gpu.end()) {
      // Launches and kernels carry no step: their host op's says.
      if (on_gpu->second.launched.take(e, stream_lanes.count(e.lane.value) > 0, r.string(e.name)))
        return true;
    }
    // The first step warms caches up and allocates: measured from the second.
    if (e.step == 0) return true;
    const double seconds = static_cast<double>(e.end_ns - e.start_ns) * 1e-9;
    if (seconds <= 0) return true;
    const std::string& name = r.string(e.name);
    // Collectives: the engines' own events, or NCCL's kernels sized from its
    // NVTX ranges.
    const bool sized_collective = e.kind == trace::EventKind::collective ||
                                  (e.kind == trace::EventKind::kernel &&
                                   e.category == trace::Category::communication);
    if (sized_collective && e.collective != trace::Collective::none && e.bytes > 0) {
      const int ranks = e.group_size > 0 ? e.group_size : d->phase.ranks;
      if (ranks > 1) {
        const bool cold = cpu_engine && (in_cold_span(se.rank, e.start_ns) ||
                                         (e.kind == trace::EventKind::collective &&
                                          run_store && gradient_reduction(name)));
        calls[{d, std::string(trace::to_string(e.collective)), ranks, static_cast<double>(e.bytes),
               name, cold}][se.rank]
            .emplace_back(e.start_ns, seconds);
      }
      return true;
    }
    // A GPU rank's host operator with FLOPs is a GEMM whose kernels it
    // launched: the engines' compute ranges, or PyTorch's aten::mm and kin
    // in an imported profile (their shapes recorded).
    const bool host_gemm = on_gpu != gpu.end() && e.kind == trace::EventKind::cpu_op && e.flops > 0;
    if (e.category != trace::Category::compute && !host_gemm) return true;
    const OpSample op{
        name,    e.flops, static_cast<double>(e.bytes),
        e.count, e.dtype, on_gpu == gpu.end() ? seconds_on_cpu(se.rank, e, seconds) : seconds};
    if (on_gpu != gpu.end()) {
      if (e.kind == trace::EventKind::cpu_op)
        on_gpu->second.ops.push_back({e.start_ns, e.end_ns, op, e.step, 0});
      return true;
    }
    if (e.kind == trace::EventKind::kernel && !run_store) {
      const SweepKey key{d, se.rank, op.name, op.count, op.flops, op.bytes};
      auto [held, fresh] = first_pass.try_emplace(key, FirstPass{e.start_ns, op, true});
      if (fresh) return true;
      held->second.alone = false;
      if (e.start_ns < held->second.start) {
        add_sample(*d, held->second.op, false, false);
        held->second.start = e.start_ns;
        held->second.op = op;
        return true;
      }
      add_sample(*d, op, false, false);
    } else if (e.kind == trace::EventKind::kernel) {
      const std::optional<bool> in_steady = steady_step(se.rank, e.step);
      if (in_steady.value_or(true)) add_sample(*d, op, false, in_steady.has_value());
      note_optimizer(optimizer_steps, *d, se.rank, e.step, op);
    }
    return true;
  });
  if (!walked) return walked;
  for (const auto& [key, held] : first_pass) {
    if (held.alone) add_sample(*std::get<0>(key), held.op, false, false);
  }
  for (auto& [rank, g] : gpu) {
    PhaseData* d = phase_of(rank);
    if (!d) continue;
    std::sort(g.ops.begin(), g.ops.end(), [](const GpuRank::HostOp& a, const GpuRank::HostOp& b) {
      return a.start_ns < b.start_ns;
    });
    std::vector<trace::LaunchedKernels::Span> spans;
    spans.reserve(g.ops.size());
    for (const GpuRank::HostOp& op : g.ops)
      spans.push_back({op.start_ns, op.end_ns});
    const auto times = g.launched.attribute(spans);
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      OpSample& op = g.ops[i].op;
      op.seconds = static_cast<double>(times[i].kernel_ns) * 1e-9;
      op.computed_in = times[i].computed_in(sample_precision(*d, op));
      g.ops[i].kernels = times[i].work_recorded() ? times[i].kernels : 0;
    }
    for (const GpuRank::HostOp& op : g.ops) {
      if (op.kernels == 0 || op.step == 0 || op.op.seconds <= 0) continue;
      auto name = gpu_sample_name(op.op.name);
      if (!name) continue;
      OpSample sample = op.op;
      sample.name = *name;
      // A GPU's kernels wait for no scheduler of the host's: their median.
      add_sample(*d, sample, true, false);
      if (run_store) note_optimizer(optimizer_steps, *d, rank, op.step, sample);
    }
  }
  add_run_optimizer_points(optimizer_steps);
  // One sample per call: its transfer, the shortest of the ranks' durations
  // (trace::shortest_of_each_call); the others waited for the last to come,
  // which is not the link's time.
  std::map<OpTimes*, std::vector<double>> run_calls;
  for (auto& [key, by_rank] : calls) {
    const auto& [d, collective, ranks, bytes, name, cold] = key;
    std::vector<std::vector<double>> durations;
    for (auto& [rank, list] : by_rank) {
      std::sort(list.begin(), list.end());
      std::vector<double>& seconds = durations.emplace_back();
      for (const auto& [start, s] : list)
        seconds.push_back(s);
    }
    OpTimes& samples = (cold ? d->cold_collectives : d->collectives)[{collective, ranks, bytes}];
    const std::vector<double> shortest = trace::shortest_of_each_call(durations);
    if (cpu_engine && run_store && !d->shares_cores) {
      // Every call of this size in the store, whatever its name, makes one median.
      std::vector<double>& calls_of_size = run_calls[&samples];
      calls_of_size.insert(calls_of_size.end(), shortest.begin(), shortest.end());
    } else {
      for (double s : shortest)
        samples.add(s);
    }
  }
  for (const auto& [samples, calls_of_size] : run_calls)
    samples->add_run_median(calls_of_size);
  return {};
}

// --- fits ------------------------------------------------------------------

void fit_memory(const PhaseData& d, DeviceFit& fit) {
  if (d.memory.empty()) return;
  double bytes = 0, seconds = 0;
  for (const auto& [b, m] : d.memory) {
    bytes += b * static_cast<double>(m.count);
    seconds += m.total();
  }
  if (seconds <= 0) return;
  // The bus-streaming rate of the largest buffers: small ones live in cache.
  const double largest = d.memory.rbegin()->first;
  const OpTimes& big = d.memory.rbegin()->second;
  const double rate = largest / big.typical();
  fit.memory_rate = rate;
  std::vector<FitPoint> points;
  for (const auto& [b, m] : d.memory) {
    points.push_back({"stream " + format_bytes(b), b, m.typical(), b / rate, m.count});
  }
  fit.memory_quality = quality_of(std::move(points));
  (void)bytes;
}

// Joint fit of every precision's rate and one ramp:
//   t = gemm_time(F a_p + b, bytes / memory_rate, overlap) + launch,
// with the memory rate known (a GPU's HBM, measured by the bandwidth sweep)
// and the overlap (GpuEfficiency::gemm_memory_overlap) the one of
// kGemmOverlaps that explains the times best with each rate held to its
// datasheet peak, unless the datasheet's own explains them within
// kOverlapMargin of it (a training run's GEMMs share their rows and inner
// size, their bytes grow with their FLOPs, and every overlap explains them
// alike); or, on the CPU (where BLAS keeps operands in cache and pays for
// packing them instead), t = F a_p + b + bytes c, the rate the GEMMs stream
// their operands at (`operand_rate`, 1 / c) fitted with the rest.
constexpr double kGemmOverlaps[] = {0, 0.25, 0.5, 0.75, 1};
constexpr double kOverlapMargin = 0.01;  // RMS relative error

void fit_gemm(const PhaseData& d, const FitOptions& options, double memory_rate, bool operand_rate,
              DeviceFit& fit, std::vector<std::string>& notes) {
  if (d.gemm.empty()) return;
  std::vector<Precision> precisions;
  for (const auto& [key, m] : d.gemm) {
    if (std::find(precisions.begin(), precisions.end(), key.precision) == precisions.end()) {
      precisions.push_back(key.precision);
    }
  }
  const std::size_t k = precisions.size();
  auto column = [&](Precision p) {
    return static_cast<std::size_t>(std::find(precisions.begin(), precisions.end(), p) -
                                    precisions.begin());
  };
  const double known_rate = operand_rate ? 0.0 : memory_rate;
  // The fixed cost per op (a GPU's datasheet launch, the CPU engine's
  // timing), which the planner adds to every GEMM: the ramp fitted is what a
  // GEMM takes beyond it.
  const double launch =
      options.datasheet ? options.datasheet->efficiency.kernel_launch_us * 1e-6 : fit.launch;
  auto memory_time = [&](double bytes) { return known_rate > 0 ? bytes / known_rate : 0.0; };
  auto peak_of = [&](Precision p) {
    return options.datasheet ? options.datasheet->peak.of(p) : 0.0;
  };

  // The fit at one overlap: the columns a_p, then c (bytes) and b (ramp).
  // GEMMs whose traffic outlasts their compute pay (1 - overlap) of the
  // compute on top of it; which those are follows from the fit, so it is
  // solved again while they change.
  auto solve = [&](double overlap) -> std::optional<std::vector<double>> {
    std::set<const GemmKey*> memory_bound;
    std::optional<std::vector<double>> result;
    for (int regime = 0; regime < 3; ++regime) {
      // Columns k (bytes) and k + 1 (ramp) are dropped when they come out negative.
      bool use_bytes = operand_rate, use_ramp = true;
      std::optional<std::vector<double>> beta;
      for (int attempt = 0; attempt < 3; ++attempt) {
        std::vector<std::vector<double>> x;
        std::vector<double> y, w;
        for (const auto& [key, m] : d.gemm) {
          const double t = m.typical();
          const double memory = memory_time(key.bytes);
          const double scale = memory_bound.count(&key) ? 1 - overlap : 1.0;
          std::vector<double> active(k, 0.0);
          active[column(key.precision)] = scale * key.flops;
          if (use_bytes) active.push_back(key.bytes);
          if (use_ramp) active.push_back(scale);
          x.push_back(std::move(active));
          y.push_back(t - launch - (memory_bound.count(&key) ? memory : (1 - overlap) * memory));
          // Relative error, each size counted once whatever its repetitions.
          w.push_back(1 / (t * t));
        }
        auto solved = least_squares(x, y, w);
        if (!solved) {
          // Too few sizes apart for every column (a run's few GEMM shapes): the
          // bytes, then the fixed cost, are dropped as below.
          if (use_bytes) {
            use_bytes = false;
            continue;
          }
          if (use_ramp) {
            use_ramp = false;
            continue;
          }
          break;
        }
        std::vector<double> full(k + 2, 0.0);
        std::size_t i = 0;
        for (; i < k; ++i)
          full[i] = (*solved)[i];
        if (use_bytes) full[k] = (*solved)[i++];
        if (use_ramp) full[k + 1] = (*solved)[i++];
        beta = full;
        // A negative term, or a rate that is not one (sizes whose FLOPs and
        // bytes grow together let the bytes' column take the FLOPs' time on a
        // noisy machine): the bytes, then the fixed cost, are dropped.
        const bool no_rate =
            std::any_of(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(k),
                        [](double a) { return !(a > 0); });
        if (use_bytes && (full[k] < 0 || no_rate)) {
          use_bytes = false;
          continue;
        }
        if (use_ramp && (full[k + 1] < 0 || no_rate)) {
          use_ramp = false;
          continue;
        }
        break;
      }
      result = beta;
      if (!beta || overlap <= 0) break;
      std::set<const GemmKey*> now;
      for (const auto& [key, m] : d.gemm) {
        const double a = (*beta)[column(key.precision)];
        if (memory_time(key.bytes) > key.flops * a + std::max(0.0, (*beta)[k + 1]))
          now.insert(&key);
      }
      if (now == memory_bound) break;
      memory_bound = std::move(now);
    }
    return result;
  };
  // A fit's prediction of one GEMM, each rate held to its datasheet peak as
  // the preset holds it.
  auto predict = [&](const std::vector<double>& beta, double overlap, const GemmKey& key) {
    double a = beta[column(key.precision)];
    if (peak_of(key.precision) > 0) a = std::max(a, 1 / peak_of(key.precision));
    const double compute = key.flops * a + std::max(0.0, beta[k + 1]);
    const double c = operand_rate ? std::max(0.0, beta[k]) : 0.0;
    return gemm_time(compute, memory_time(key.bytes), overlap) + c * key.bytes + launch;
  };
  struct Candidate {
    double overlap = 0;
    std::vector<double> beta;
    double rms = 0;
  };
  std::vector<Candidate> candidates;
  const double datasheet_overlap =
      options.datasheet ? options.datasheet->efficiency.gemm_memory_overlap : 0.0;
  std::vector<double> overlaps = {datasheet_overlap};
  if (!operand_rate && known_rate > 0)
    overlaps.insert(overlaps.end(), std::begin(kGemmOverlaps), std::end(kGemmOverlaps));
  for (double o : overlaps) {
    auto solved = solve(o);
    if (!solved) continue;
    double error = 0;
    for (const auto& [key, m] : d.gemm) {
      const double e = predict(*solved, o, key) / m.typical() - 1;
      error += e * e;
    }
    candidates.push_back({o, std::move(*solved), std::sqrt(error / d.gemm.size())});
  }
  std::optional<std::vector<double>> beta;
  double overlap = 0;
  if (!candidates.empty()) {
    auto best =
        std::min_element(candidates.begin(), candidates.end(),
                         [](const Candidate& a, const Candidate& b) { return a.rms < b.rms; });
    if (candidates.front().overlap == datasheet_overlap &&
        candidates.front().rms <= best->rms + kOverlapMargin)
      best = candidates.begin();
    beta = best->beta;
    overlap = best->overlap;
  }
  if (!beta) {
    notes.push_back("the GEMM sizes measured cannot separate a rate from a fixed cost");
    return;
  }
  fit.ramp = std::max(0.0, (*beta)[k + 1]);
  fit.gemm_memory_overlap = overlap;
  if (operand_rate && (*beta)[k] > 0) fit.gemm_operand_rate = 1 / (*beta)[k];
  for (Precision p : precisions) {
    const double a = (*beta)[column(p)];
    if (!(a > 0)) {
      notes.push_back(std::string(to_string(p)) + " GEMMs: no rate could be fitted");
      continue;
    }
    GemmCurve curve;
    curve.precision = p;
    const double rate = 1 / a;
    const double datasheet = peak_of(p);
    if (datasheet > 0) {
      curve.peak = datasheet;
      curve.efficiency = std::min(1.0, rate / datasheet);
      if (rate > datasheet) {
        // An fp32 GEMM above the fp32 peak ran on the tensor cores: PyTorch
        // runs fp32 matmuls in TF32 where it is allowed, which no trace says.
        const bool tf32 = p == Precision::fp32 && peak_of(Precision::tf32) > datasheet;
        notes.push_back(std::string(to_string(p)) + " GEMMs ran above the datasheet peak (" +
                        format_rate(rate, "FLOP/s") + " against " +
                        format_rate(datasheet, "FLOP/s") + ")" +
                        (tf32 ? ", in TF32 (PyTorch's fp32 matmuls are where "
                                "torch.backends.cuda.matmul.allow_tf32 is set)"
                              : "") +
                        ": efficiency 1 kept");
      }
    } else {
      curve.peak = rate;
      curve.efficiency = 1;
    }
    std::vector<FitPoint> points;
    for (const auto& [key, m] : d.gemm) {
      if (key.precision != p) continue;
      char label[64];
      std::snprintf(label, sizeof label, "gemm %.3g GFLOP %s", key.flops / 1e9,
                    std::string(to_string(p)).c_str());
      points.push_back({label, key.flops, m.typical(), predict(*beta, overlap, key), m.count});
    }
    curve.quality = quality_of(std::move(points));
    fit.gemm.push_back(std::move(curve));
  }
}

// Ranks sharing cores run the sweep's operations all at once, and the
// scheduler hands a core over every few milliseconds (4.1 ms on the
// development VM: a preempted 55 µs pass took 4.1 ms more). A pass longer
// than that is sliced every time, and its median holds the share, which
// the planner adds itself (4 ranks on 2 cores: AdamW over 4.19 M
// parameters took 8.0-20 ms, 1.9-4.8 ns per parameter, where one rank
// alone took 1.05; over 1.05 M, 0.96 ms). Where ranks share cores, the sizes
// whose median passes 2 ms are left out, unless no size of the kind is
// shorter.
constexpr double kSlicedPassSeconds = 2e-3;

using LoopSizes = std::map<std::string, std::map<double, OpTimes>>;

LoopSizes unsliced_loops(const LoopSizes& loops, double core_share) {
  if (core_share >= 1) return loops;
  LoopSizes out;
  for (const auto& [kind, sizes] : loops) {
    std::map<double, OpTimes> kept;
    for (const auto& [s, m] : sizes) {
      if (m.typical() <= kSlicedPassSeconds) kept.emplace(s, m);
    }
    out[kind] = kept.empty() ? sizes : std::move(kept);
  }
  return out;
}

void fit_loops(const PhaseData& d, DeviceFit& fit) {
  const LoopSizes loops = unsliced_loops(d.loops, fit.core_share);
  // Each op's cost beyond the fixed one the planner adds to it (fit.launch:
  // on the CPU engine its timing, 1.3 µs where it times the op's time off
  // CPU, as much as an 8 K-element residual add itself).
  auto own = [&](const OpTimes& m) { return std::max(0.0, m.typical() - fit.launch); };
  // Each kind through the origin: the median over sizes of the cost per
  // element. Not a work-weighted mean: the largest size can fall out of the
  // caches and cost several times more per element, and one such point
  // would then set the cost of the model's (usually smaller) loops. The
  // optimizer's passes are the exception: they stream every parameter, its
  // gradient and state once a step, out of the caches, so the largest size
  // is theirs.
  std::map<std::string, double> value;
  for (const auto& [kind, sizes] : loops) {
    std::vector<double> rates;  // seconds per element (or per FLOP)
    for (const auto& [s, m] : sizes) {
      if (s > 0 && m.typical() > 0) rates.push_back(own(m) / s);
    }
    if (rates.empty()) continue;
    double rate = 0;
    if (kind.starts_with("optimizer:")) {
      rate = rates.back();  // the sizes are in increasing order
    } else {
      std::sort(rates.begin(), rates.end());
      const std::size_t half = rates.size() / 2;
      rate = rates.size() % 2 ? rates[half] : (rates[half - 1] + rates[half]) / 2;
    }
    if (rate <= 0) continue;  // every op within its fixed cost: nothing to fit
    const bool attention = kind.starts_with("attention");
    LoopFit f;
    f.kind = kind;
    f.value = attention ? 1 / rate / 1e9 : rate * 1e9;  // GFLOP/s or ns
    std::vector<FitPoint> points;
    for (const auto& [s, m] : sizes) {
      const double predicted =
          (attention ? s / (f.value * 1e9) : s * f.value * 1e-9) + (s > 0 ? fit.launch : 0.0);
      char label[80];
      std::snprintf(label, sizeof label, "%s %s %.3g", kind.c_str(), attention ? "GFLOP" : "x",
                    attention ? s / 1e9 : s);
      points.push_back({label, s, m.typical(), predicted, m.count});
    }
    f.quality = quality_of(std::move(points));
    value[kind] = f.value;
    fit.loops.push_back(std::move(f));
  }
  LoopCosts& c = fit.loop_costs;
  const std::string& loops_precision =
      d.loops_precision.empty() ? d.phase.precision : d.loops_precision;
  auto get = [&](const char* kind) { return value.count(kind) ? value.at(kind) : 0.0; };
  c.norm_ns = get("norm");
  c.norm_backward_ns = get("norm_backward");
  c.activation_ns = get("activation");
  c.activation_backward_ns = get("activation_backward");
  c.elementwise_ns = get("elementwise");
  c.softmax_ns = get("softmax");
  c.attention_gflops = get("attention");
  c.attention_backward_gflops = get("attention_backward");
  if (c.attention_gflops > 0 || c.attention_backward_gflops > 0)
    c.attention_precision = precision_from_string(loops_precision);
  // One optimizer step per parameter: the update and the passes around it
  // (gradient norm, averaging, zeroing for the next step; the cast of
  // low-precision working weights when there are any).
  std::vector<std::string> passes = {"optimizer:adamw", "optimizer:gradient norm",
                                     "optimizer:scale", "optimizer:zero"};
  if (d.phase.precision != "fp32") passes.push_back("optimizer:convert");
  for (const std::string& pass : passes)
    c.optimizer_ns += get(pass.c_str());
  // ... and by parameter count. A sweep runs every pass at each of its
  // counts: at each count the update ran at, the sum of the passes at their
  // counts nearest it.
  auto ns_near = [&](const std::string& pass, double parameters) {
    const auto it = loops.find(pass);
    if (it == loops.end()) return 0.0;
    double best = 0, distance = std::numeric_limits<double>::infinity();
    for (const auto& [s, m] : it->second) {
      if (s <= 0 || m.typical() <= 0) continue;
      if (const double far = std::fabs(std::log(s / parameters)); far < distance) {
        distance = far;
        best = own(m) / s * 1e9;
      }
    }
    return best;
  };
  if (!d.run_optimizer.empty()) {
    // Runs: their steps as measured; of two runs at one count, the faster.
    std::vector<OptimizerPoint> points = d.run_optimizer;
    std::sort(points.begin(), points.end(), [](const OptimizerPoint& a, const OptimizerPoint& b) {
      return a.parameters < b.parameters || (a.parameters == b.parameters && a.ns < b.ns);
    });
    for (const OptimizerPoint& p : points) {
      if (c.optimizer_by_size.empty() || c.optimizer_by_size.back().parameters != p.parameters)
        c.optimizer_by_size.push_back(p);
    }
    c.optimizer_ns = c.optimizer_by_size.back().ns;
  } else if (const auto update = loops.find("optimizer:adamw"); update != loops.end()) {
    for (const auto& [s, m] : update->second) {
      if (s <= 0 || m.typical() <= 0) continue;
      OptimizerPoint point{s, 0};
      for (const std::string& pass : passes)
        point.ns += ns_near(pass, s);
      c.optimizer_by_size.push_back(point);
    }
  }
  // Where the planner goes by count, each pass shows its own cost at each
  // count: the one rate against them misses the counts in the caches by
  // design (1.7 ns a parameter there, 0.9 streamed), not for noise.
  if (!c.optimizer_by_size.empty()) {
    for (LoopFit& f : fit.loops) {
      const auto it = loops.find(f.kind);
      if (!f.kind.starts_with("optimizer:") || it == loops.end()) continue;
      for (const auto& [s, m] : it->second) {
        if (s > 0 && m.typical() > 0) f.by_count.push_back({s, own(m) / s * 1e9});
      }
    }
  }
  if (c.optimizer_ns > 0) {
    LoopFit f;
    f.kind = "optimizer";
    f.value = c.optimizer_ns;
    fit.loops.push_back(f);
  }
}

// The bus bandwidth each message size reached beyond `latency`: where one
// line does not hold every size (the CPU engine's gradient all-reduce after
// backward pays more per byte for large messages than for small ones). Only
// where every point has the same latency steps (one group size: sizes of
// two group sizes would give one size two figures), and only sizes whose
// bytes make at least half their time (below, the figure is the latency's
// noise). Fewer than two such sizes: none.
std::vector<LinkPoint> bandwidth_by_size(const std::vector<AlphaBetaPoint>& points,
                                         double latency) {
  struct Sums {
    double bytes = 0, beyond = 0, measured = 0;
  };
  std::map<double, Sums> by_size;  // message size -> sums over its points
  double steps = -1;
  for (const AlphaBetaPoint& p : points) {
    if (p.seconds <= 0 || p.bytes <= 0) continue;
    if (steps >= 0 && p.steps != steps) return {};
    steps = p.steps;
    Sums& sums = by_size[p.size > 0 ? p.size : p.bytes];
    sums.bytes += p.bytes;
    sums.measured += p.seconds - p.offset;
    sums.beyond += p.seconds - p.offset - p.steps * latency;
  }
  std::vector<LinkPoint> out;
  for (const auto& [size, sums] : by_size) {
    if (sums.beyond > 0 && sums.beyond >= 0.5 * sums.measured)
      out.push_back({size, sums.bytes / sums.beyond});
  }
  if (out.size() < 2) return {};
  return out;
}

// A fit whose R² or RMS error is not a number rests on times whose sums
// overflow: it is no fit (an R² of NaN passed every "below" check, and the
// link was saved).
Status finite_quality(const FitQuality& q) {
  if (std::isfinite(q.r2) && std::isfinite(q.rms_error)) return {};
  return Error{
      "the fit's R² is not a number (its sums of the times overflow): they are no real "
      "collective's, and no link is fitted from them"};
}

}  // namespace

Result<LinkFit> fit_alpha_beta(const std::vector<AlphaBetaPoint>& points) {
  std::vector<std::vector<double>> x;
  std::vector<double> y, w;
  for (const AlphaBetaPoint& p : points) {
    if (p.seconds <= 0 || p.bytes <= 0) continue;
    x.push_back({p.steps, p.bytes});
    y.push_back(p.seconds - p.offset);
    w.push_back(1 / (p.seconds * p.seconds));
  }
  if (x.size() < 2)
    return Error{"a link needs collectives of at least two sizes over 2 or more ranks"};
  auto beta = least_squares(x, y, w);
  if (beta && (*beta)[0] < 0) {
    // No fixed cost shows: bandwidth alone.
    std::vector<std::vector<double>> x1;
    for (const auto& row : x)
      x1.push_back({row[1]});
    beta = least_squares(x1, y, w);
    if (beta) beta = std::vector<double>{0.0, (*beta)[0]};
  }
  if (!beta || !((*beta)[1] > 0)) {
    return Error{
        "the collectives measured show no bandwidth term (messages too small, or "
        "times not growing with size)"};
  }
  LinkFit fit;
  fit.latency = (*beta)[0];
  fit.bandwidth = 1 / (*beta)[1];
  fit.by_size = bandwidth_by_size(points, fit.latency);
  std::vector<FitPoint> fitted;
  for (const AlphaBetaPoint& p : points) {
    if (p.seconds <= 0 || p.bytes <= 0) continue;
    fitted.push_back({p.label, p.size > 0 ? p.size : p.bytes, p.seconds,
                      p.offset + p.steps * fit.latency + p.bytes / fit.bandwidth, p.samples});
  }
  fit.quality = quality_of(std::move(fitted));
  if (Status s = finite_quality(fit.quality); !s) return s.error();
  return fit;
}

Result<LinkFit> fit_link_latency(const std::vector<CollectiveSample>& samples, double bandwidth) {
  if (!(bandwidth > 0)) return Error{"the link's bandwidth must be > 0 to fit its latency alone"};
  // Weighted least squares on relative error through the origin:
  // α = Σ w s r / Σ w s², r = t - bytes / B, w = 1 / t².
  double num = 0, den = 0;
  std::set<int> sizes;
  std::vector<FitPoint> fitted;
  for (const CollectiveSample& s : samples) {
    auto op = collective_op(s.collective);
    if (!op) return Error{"unknown collective \"" + s.collective + "\""};
    if (s.ranks < 2 || s.seconds <= 0 || s.bytes <= 0) continue;
    const double steps = ring_steps(*op, s.ranks);
    const double w = 1 / (s.seconds * s.seconds);
    num += w * steps * (s.seconds - bytes_per_rank(*op, s.ranks, s.bytes) / bandwidth);
    den += w * steps * steps;
    sizes.insert(s.ranks);
  }
  if (den <= 0) return Error{"no collective over 2 or more ranks to fit a latency from"};
  LinkFit fit;
  fit.latency = std::max(0.0, num / den);
  fit.bandwidth = bandwidth;
  fit.group_sizes.assign(sizes.begin(), sizes.end());
  for (const CollectiveSample& s : samples) {
    auto op = collective_op(s.collective);
    if (s.ranks < 2 || s.seconds <= 0 || s.bytes <= 0) continue;
    const double t =
        ring_steps(*op, s.ranks) * fit.latency + bytes_per_rank(*op, s.ranks, s.bytes) / bandwidth;
    fitted.push_back(
        {s.collective + " " + format_bytes(s.bytes) + " / " + std::to_string(s.ranks) + " ranks",
         s.bytes, s.seconds, t, s.samples});
  }
  fit.quality = quality_of(std::move(fitted));
  if (Status s = finite_quality(fit.quality); !s) return s.error();
  return fit;
}

Result<LinkFit> fit_link(const std::vector<CollectiveSample>& samples) {
  std::vector<AlphaBetaPoint> points;
  std::set<int> sizes;
  for (const CollectiveSample& s : samples) {
    auto op = collective_op(s.collective);
    if (!op) return Error{"unknown collective \"" + s.collective + "\""};
    if (s.ranks < 2 || s.seconds <= 0 || s.bytes <= 0) continue;
    AlphaBetaPoint p;
    p.label =
        s.collective + " " + format_bytes(s.bytes) + " / " + std::to_string(s.ranks) + " ranks";
    p.steps = ring_steps(*op, s.ranks);
    p.bytes = bytes_per_rank(*op, s.ranks, s.bytes);
    p.seconds = s.seconds;
    p.size = s.bytes;
    p.samples = s.samples;
    points.push_back(p);
    sizes.insert(s.ranks);
  }
  auto fit = fit_alpha_beta(points);
  if (fit) fit->group_sizes.assign(sizes.begin(), sizes.end());
  return fit;
}

namespace {

// One tier's alpha-beta from its collectives (none without any). When the
// sizes do not show a bandwidth term (noise on a busy machine, or one size
// in a run), the latency alone, at `known_bandwidth` (the link being
// refined), else at the best bandwidth any message reached.
std::optional<LinkFit> fit_tier(const std::map<std::tuple<std::string, int, double>, OpTimes>& calls,
                                double known_bandwidth, const std::string& what,
                                std::vector<std::string>& notes) {
  std::vector<CollectiveSample> samples;
  for (const auto& [key, m] : calls) {
    const auto& [collective, ranks, bytes] = key;
    if (!collective_op(collective)) continue;
    samples.push_back({collective, bytes, ranks, m.typical(), m.count});
  }
  if (samples.empty()) return std::nullopt;
  auto link = fit_link(samples);
  if (link) return std::move(link).value();
  double bandwidth = known_bandwidth;
  const char* which = "the known bandwidth";
  if (bandwidth <= 0) {
    which = "the best bandwidth a message reached";
    for (const CollectiveSample& c : samples) {
      auto op = collective_op(c.collective);
      if (op && c.ranks > 1 && c.seconds > 0) {
        bandwidth = std::max(bandwidth, bytes_per_rank(*op, c.ranks, c.bytes) / c.seconds);
      }
    }
  }
  auto latency = fit_link_latency(samples, bandwidth);
  if (!latency) {
    notes.push_back(what + ": " + link.message());
    return std::nullopt;
  }
  notes.push_back(what + ": " + link.message() + ": the latency alone was fitted, at " + which);
  return std::move(latency).value();
}

// Stores whose medians of one collective size differ by more than this
// are named: one of them met a slower machine. Only sizes of 1 MiB or more,
// whose time is the link's bandwidth: a few bytes' latency varies by twice
// from run to run on an idle machine (the loss's 4-byte all-reduce: 11.6
// and 23.2 us).
constexpr double kStoresDisagree = 1.5;
constexpr double kStoresCompareBytes = 1 << 20;

// Each store's median of each collective size: (ranks, cold, collective,
// group, bytes) -> (store, seconds).
using SizeMedians = std::map<std::tuple<int, bool, std::string, int, double>,
                             std::vector<std::pair<std::string, double>>>;

// `cpu_runs`: of CPU-engine runs, whose collectives the fit takes as the
// lower median of the runs' medians (OpTimes).
std::vector<std::string> disagreeing_stores(const SizeMedians& size_medians, bool cpu_runs) {
  std::vector<std::string> notes;
  for (const auto& [key, medians] : size_medians) {
    if (medians.size() < 2 || std::get<4>(key) < kStoresCompareBytes) continue;
    const auto [fastest, slowest] = std::minmax_element(
        medians.begin(), medians.end(),
        [](const auto& a, const auto& b) { return a.second < b.second; });
    if (fastest->second <= 0 || slowest->second < kStoresDisagree * fastest->second) continue;
    const auto& [ranks, cold, collective, group, bytes] = key;
    notes.push_back(std::to_string(ranks) + (ranks == 1 ? " rank: " : " ranks: ") +
                    (cold ? "caches cold: " : "") + collective + " of " + format_bytes(bytes) +
                    " over " + std::to_string(group) + " ranks took " +
                    format_seconds(slowest->second) + " in " + slowest->first + " and " +
                    format_seconds(fastest->second) + " in " + fastest->first +
                    " (each store's median): the machine was not the same in both; the fit "
                    "takes " +
                    (cpu_runs ? "the lower median of the runs' medians (of two, the faster)"
                              : "the median of all their calls"));
  }
  return notes;
}

// Stores whose GEMMs, taken together, took this much longer in one than in
// another are named too: the development VM's slow mode made every GEMM of
// a run 15-20 % slower than in the run before. Not the loops: their size
// (elements) does not say their shape (a norm over rows of 128 or of 256),
// so two models' loops of one size may differ by their shape alone.
constexpr double kStoresGemmsDisagree = 1.15;

// Each store's typical time (OpTimes) of each GEMM shape: ranks -> (precision, FLOPs,
// bytes) -> store -> seconds.
using GemmMedians = std::map<int, std::map<GemmKey, std::map<std::string, double>>>;

// `cpu_runs`: of CPU-engine runs, whose GEMMs the fit takes as the lower
// median of the runs' means (OpTimes).
std::vector<std::string> slower_gemm_stores(const GemmMedians& gemm_medians, bool cpu_runs) {
  std::vector<std::string> notes;
  for (const auto& [ranks, operations] : gemm_medians) {
    std::set<std::string> stores;
    for (const auto& [op, by_store] : operations) {
      for (const auto& [store, seconds] : by_store)
        stores.insert(store);
    }
    // Of every two stores, the time each took over the operations both
    // measured (runs of different plans share few shapes); the two most
    // apart are named.
    struct Pair {
      std::string slow, fast;
      double ratio = 0;
      int shared = 0;
    } worst;
    for (auto a = stores.begin(); a != stores.end(); ++a) {
      for (auto b = std::next(a); b != stores.end(); ++b) {
        double ta = 0, tb = 0;
        int shared = 0;
        for (const auto& [op, by_store] : operations) {
          auto ia = by_store.find(*a), ib = by_store.find(*b);
          if (ia == by_store.end() || ib == by_store.end()) continue;
          ta += ia->second;
          tb += ib->second;
          ++shared;
        }
        if (shared == 0 || ta <= 0 || tb <= 0) continue;
        const Pair p = ta > tb ? Pair{*a, *b, ta / tb, shared} : Pair{*b, *a, tb / ta, shared};
        if (p.ratio > worst.ratio) worst = p;
      }
    }
    if (worst.ratio < kStoresGemmsDisagree) continue;
    notes.push_back(std::to_string(ranks) + (ranks == 1 ? " rank: " : " ranks: ") +
                    "the GEMMs took " + format_fixed(100 * (worst.ratio - 1), 0) +
                    " % longer in " + worst.slow + " than in " + worst.fast + " (" +
                    std::to_string(worst.shared) + (worst.shared == 1 ? " shape" : " shapes") +
                    " both measured, each store's " + (cpu_runs ? "means" : "medians") +
                    "): the machine was not the same in both; the fit takes " +
                    (cpu_runs ? "the lower median of the runs' means (of two, the faster)"
                              : "the median of all their calls"));
  }
  return notes;
}

}  // namespace

std::vector<std::string> poor_fit_notes(const DeviceFit& fit) {
  std::vector<std::string> notes;
  auto check = [&](const std::string& what, const FitQuality& q) {
    // Written so that a NaN (times that are not finite) fails them too.
    if (q.points.size() >= 3 && !(q.r2 >= 0)) {
      char r2[32];
      std::snprintf(r2, sizeof r2, "%.2f", q.r2);
      notes.push_back(what + ": the fit explains the times worse than their mean would (R² " + r2 +
                      "): its measurements disagree with each other (other work on the machine, "
                      "or a slow mode?); calibrate again before planning with it");
    } else if (q.points.size() >= 2 && !(q.rms_error <= kPoorFitRmsError)) {
      // Too few points for R² to say much, but far off them (R² 0.004 and
      // 836 % RMS over 2 points were saved without a word).
      char rms[32];
      std::snprintf(rms, sizeof rms, "%.0f", 100 * q.rms_error);
      notes.push_back(what + ": the fit is " + rms + " % off its own " +
                      std::to_string(q.points.size()) +
                      " points (RMS): they do not follow the model (other work on the machine, or "
                      "a slow mode?); calibrate again before planning with it");
    }
  };
  for (const GemmCurve& g : fit.gemm) check(std::string(to_string(g.precision)) + " GEMMs", g.quality);
  if (fit.memory_rate) check("memory streaming", fit.memory_quality);
  for (const LoopFit& l : fit.loops) {
    if (l.by_count.empty()) check(l.kind, l.quality);  // else the planner does not use the line
  }
  if (fit.link) check("the link", fit.link->quality);
  if (fit.cold_link) check("the link with the caches cold", fit.cold_link->quality);
  return notes;
}

Result<Calibration> fit_store(const trace::TraceReader& store, const FitOptions& options) {
  return fit_stores({&store}, options);
}

Result<Calibration> fit_stores(const std::vector<const trace::TraceReader*>& stores,
                               const FitOptions& options) {
  Calibration out;
  // Configurations of the same rank and thread counts pool their operations
  // (several runs learnt at once), so each quantity is fitted once over all.
  std::vector<PhaseData> data;
  // Each store's median of each collective size, to tell the user where the
  // stores disagree: the machine moved between them, and the pooled median
  // lies between two speeds (DP 2 large's 19.6 MB reduction on the
  // development VM: 12.7-16.6 ms a step in one run, 5.5-7.8 in the next).
  SizeMedians size_medians;
  GemmMedians gemm_medians;  // ... and its typical time of each GEMM shape
  // OpTimes::typical() takes the runs' figures once any store is a run.
  bool any_run = false;
  for (const trace::TraceReader* store : stores) {
    if (!store->meta(kCalibrationMetaKey)) any_run = true;  // as collect() tells them
    Calibration info;
    auto phases = phases_of(*store, info);
    if (!phases) return phases.error();
    if (out.engine.empty()) {
      out.engine = info.engine;
      out.host = info.host;
      out.device = info.device;
    }
    out.host_memory_bytes = std::max(out.host_memory_bytes, info.host_memory_bytes);
    out.cpu_cores = std::max(out.cpu_cores, info.cpu_cores);
    std::vector<PhaseData> own;
    for (const CalibrationPhase& p : *phases) {
      PhaseData& d = own.emplace_back();
      d.phase = p;
      const int threads = threads_per_rank(p.ranks, p.threads, info.cpu_cores);
      d.shares_cores = info.engine == "cpu" && info.cpu_cores > 0 && p.ranks * threads > info.cpu_cores;
    }
    if (Status s = collect(*store, own, info.engine == "cpu"); !s) {
      // Named once: the reader's own messages name the store already.
      if (s.message().starts_with(store->path())) return s.error();
      return Error{store->path() + ": " + s.message()};
    }
    // A damaged page ends a query early: the fit would be of part of the run.
    if (Status damaged = store->damage(); !damaged) return damaged.error();
    for (PhaseData& d : own) {
      d.end_store();
      if (!d.loops.empty()) d.loops_precision = d.phase.precision;
    }
    for (const PhaseData& d : own) {
      // Ranks sharing cores wait for the scheduler in their collectives,
      // which are not learnt (refine_link): their speed says nothing.
      if (d.shares_cores) continue;
      for (const auto& [key, m] : d.gemm)
        gemm_medians[d.phase.ranks][key][store->path()] = m.typical();
      for (bool cold : {false, true}) {
        for (const auto& [key, m] : cold ? d.cold_collectives : d.collectives) {
          const auto& [collective, group, bytes] = key;
          size_medians[{d.phase.ranks, cold, collective, group, bytes}].emplace_back(store->path(),
                                                                                     m.typical());
        }
      }
    }
    for (PhaseData& d : own) {
      auto same = std::find_if(data.begin(), data.end(), [&](const PhaseData& x) {
        return x.phase.ranks == d.phase.ranks && x.phase.threads == d.phase.threads;
      });
      if (same == data.end()) {
        data.push_back(std::move(d));
      } else {
        same->absorb(d);
      }
    }
  }

  const bool cpu_runs = out.engine == "cpu" && any_run;
  out.notes = disagreeing_stores(size_medians, cpu_runs);
  for (std::string& note : slower_gemm_stores(gemm_medians, cpu_runs))
    out.notes.push_back(std::move(note));

  for (const PhaseData& d : data) {
    DeviceFit fit;
    fit.ranks = d.phase.ranks;
    fit.threads = d.phase.threads;
    if (out.engine == "cpu" && out.cpu_cores > 0) {
      const int threads = threads_per_rank(fit, out.cpu_cores);
      fit.core_share = std::min(1.0, static_cast<double>(out.cpu_cores) / (fit.ranks * threads));
    }
    // The CPU engine's fixed cost of an op is the timing its tracer adds
    // (the ops themselves start at once): measured, not fitted. (A GPU's is
    // its datasheet's launch, which its kernels' times leave out.)
    if (out.engine == "cpu") fit.launch = median(d.timing_costs);
    std::vector<std::string> notes;
    fit_memory(d, fit);
    double memory_rate = fit.memory_rate.value_or(0);
    if (memory_rate <= 0 && options.datasheet) {
      memory_rate = options.datasheet->memory_bandwidth * options.datasheet->efficiency.memory_max;
    }
    // Without a datasheet (the CPU engine) the GEMMs' operand traffic is fitted with them.
    fit_gemm(d, options, memory_rate, !options.datasheet, fit, notes);
    fit_loops(d, fit);
    fit.link = fit_tier(d.collectives, options.link_bandwidth.value_or(0), "link", notes);
    fit.cold_link =
        fit_tier(d.cold_collectives, options.cold_link_bandwidth.value_or(0), "cold link", notes);
    if (d.gemms_without_bytes > 0) {
      notes.push_back(std::to_string(d.gemms_without_bytes) +
                      " GEMMs carry no operand bytes (recorded by an engine before it recorded "
                      "them): not learnt, since the planner adds their operand traffic to the "
                      "time of their FLOPs");
    }
    if (fit.gemm.empty() && !fit.memory_rate && fit.loops.empty() && !fit.link && !fit.cold_link) {
      notes.push_back("nothing to fit among the events of " + std::to_string(d.phase.ranks) +
                      "-rank configuration (no GEMM with FLOPs, streaming kernel, known loop or "
                      "sized collective)");
    }
    for (std::string& n : poor_fit_notes(fit))
      notes.push_back(std::move(n));
    for (std::string& n : notes) {
      out.notes.push_back(std::to_string(d.phase.ranks) +
                          (d.phase.ranks == 1 ? " rank: " : " ranks: ") + std::move(n));
    }
    out.devices.push_back(std::move(fit));
  }
  return out;
}

namespace {

// A host name as preset names carry it: lower case letters, digits and '-'.
std::string host_in_name(std::string_view host) {
  std::string h;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    h += ok ? c : (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : '-');
  }
  return h.empty() ? "host" : h;
}

}  // namespace

std::string calibrated_name(std::string_view host, std::string_view engine, int ranks,
                            std::string_view what) {
  std::string name = "calibrated-" + host_in_name(host) + "-";
  if (engine == "cpu") {
    name += (what == "link" ? "mpi" : "cpu") + std::to_string(ranks);
  } else {
    name += std::string(what == "link" ? "nccl" : "cuda");
  }
  return name;
}

std::string learnt_name(std::string_view base, std::string_view host) {
  const std::string h = host_in_name(host);
  const std::string suffix = "-learnt-" + h;
  if (base.ends_with(suffix)) return std::string(base);
  // Exactly calibrated_name's: "calibrated-vm-" also starts host vm-7's names.
  const std::string own = "calibrated-" + h + "-";
  if (base.starts_with(own)) {
    const std::string_view rest = base.substr(own.size());
    auto counted = [&](std::string_view word) {
      return rest.size() > word.size() && rest.starts_with(word) &&
             std::all_of(rest.begin() + static_cast<long>(word.size()), rest.end(),
                         [](char c) { return c >= '0' && c <= '9'; });
    };
    if (rest == "cuda" || rest == "nccl" || counted("cpu") || counted("mpi")) return std::string(base);
  }
  return std::string(base) + suffix;
}

namespace {

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", std::gmtime(&now));
  return buffer;
}

std::string quality_text(const FitQuality& q) {
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "R² %.3f, RMS error %.1f %% over %zu points", q.r2,
                100 * q.rms_error, q.points.size());
  return buffer;
}

void apply_gemm(GpuSpec& g, const DeviceFit& fit, bool cpu) {
  for (const GemmCurve& c : fit.gemm) {
    if (cpu) {
      // The CPU "datasheet" is the measured asymptote of each precision.
      switch (c.precision) {
        case Precision::fp32:
          g.peak.fp32 = c.peak;
          g.peak.tf32 = c.peak;  // tf32 computes as fp32 on the CPU
          break;
        case Precision::bf16:
          g.peak.bf16 = c.peak;
          break;
        case Precision::fp16:
          g.peak.fp16 = c.peak;
          break;
        default:
          break;
      }
    }
  }
  const double rate16 =
      g.peak.bf16 > 0 ? g.peak.bf16 : (g.peak.fp16 > 0 ? g.peak.fp16 : g.peak.fp32);
  if (!cpu) {
    // gemm_max at the 16-bit rate's precision (else the first measured); the
    // others as per-precision fractions.
    const Precision base = g.peak.bf16 > 0 ? Precision::bf16 : Precision::fp16;
    const GemmCurve* main = nullptr;
    for (const GemmCurve& c : fit.gemm) {
      if (c.precision == base) main = &c;
    }
    if (!main && !fit.gemm.empty()) main = &fit.gemm.front();
    if (main) g.efficiency.gemm_max = main->efficiency;
    for (const GemmCurve& c : fit.gemm) {
      const double value = c.efficiency;
      switch (c.precision) {
        case Precision::fp32:
          g.efficiency.gemm_max_by_precision.fp32 = value;
          break;
        case Precision::tf32:
          g.efficiency.gemm_max_by_precision.tf32 = value;
          break;
        case Precision::bf16:
          g.efficiency.gemm_max_by_precision.bf16 = value;
          break;
        case Precision::fp16:
          g.efficiency.gemm_max_by_precision.fp16 = value;
          break;
        case Precision::fp8:
          g.efficiency.gemm_max_by_precision.fp8 = value;
          break;
        case Precision::int8:
        case Precision::int4:
          g.efficiency.gemm_max_by_precision.int8 = value;
          break;
      }
    }
  } else {
    g.efficiency.gemm_max = 1.0;
  }
  if (!fit.gemm.empty() && rate16 > 0) {
    // The planner's ramp is gemm_half_gflop at the 16-bit rate and gemm_max.
    g.efficiency.gemm_half_gflop = fit.ramp * rate16 * g.efficiency.gemm_max / 1e9;
  }
  if (!fit.gemm.empty()) g.efficiency.gemm_memory_overlap = fit.gemm_memory_overlap;
}

}  // namespace

PresetBundle calibrated_presets(const Calibration& cal, const std::optional<GpuSpec>& datasheet,
                                std::string_view source) {
  PresetBundle bundle;
  const bool cpu = cal.engine == "cpu";
  // A store that does not name its host (an imported trace) read "... on ".
  const std::string host = cal.host.empty() ? "an unnamed host" : cal.host;
  const std::string origin = std::string(source) + " on " + host + ", " + today();
  for (const DeviceFit& fit : cal.devices) {
    GpuSpec g;
    if (!cpu && datasheet) g = *datasheet;
    g.name = calibrated_name(cal.host, cal.engine, fit.ranks, "gpu");
    g.device_names.clear();
    if (cpu) {
      g.display_name =
          "CPU-engine rank (1 of " + std::to_string(fit.ranks) + " on " + host + ")";
      g.vendor = "CPU";
      g.architecture = "cpu";
      g.memory_bytes =
          cal.host_memory_bytes > 0 ? cal.host_memory_bytes / fit.ranks : 4.0 * (1 << 30);
      // On a loop device the memory rate only times GEMM operands (every
      // other kind has its loop cost): the rate the GEMMs were fitted with.
      // With no operand cost showing, a rate that makes it vanish.
      g.memory_bandwidth =
          fit.gemm_operand_rate.value_or(fit.gemm.empty() ? fit.memory_rate.value_or(10e9) : 1e15);
      g.efficiency.memory_max = 1.0;
      g.efficiency.kernel_launch_us = fit.launch * 1e6;
      g.efficiency.host_dispatch_us = 0;  // the engine's ops start at once; no framework in between
      g.efficiency.loops = fit.loop_costs;
      // Each rank's communication thread needs a core of its own to overlap
      // backward; when the compute threads take every core, what it hides
      // costs compute the same time (not measured: the core count decides).
      const int threads = threads_per_rank(fit, cal.cpu_cores);
      g.efficiency.overlap_slowdown =
          cal.cpu_cores > 0 && fit.ranks * (threads + 1) > cal.cpu_cores ? 1.0 : 0.0;
      g.efficiency.core_share = fit.core_share;
      g.efficiency.blas_threads = threads;
      g.tdp_watts = 0;
    } else {
      g.display_name = (datasheet ? datasheet->display_name : cal.device) + " (calibrated)";
      if (fit.memory_rate && g.memory_bandwidth > 0) {
        g.efficiency.memory_max = std::min(1.0, *fit.memory_rate / g.memory_bandwidth);
      } else if (fit.memory_rate) {
        g.memory_bandwidth = *fit.memory_rate;
        g.efficiency.memory_max = 1.0;
      }
      if (fit.loop_costs.any()) g.efficiency.loops = fit.loop_costs;
    }
    apply_gemm(g, fit, cpu);
    std::string why =
        origin + ": " + std::to_string(fit.ranks) + (fit.ranks == 1 ? " rank" : " ranks at once") +
        (fit.threads > 0 ? ", " + std::to_string(fit.threads) + " BLAS threads each" : "");
    if (fit.core_share < 1) {
      char share[96];
      std::snprintf(share, sizeof share, "; %.2f of a core per thread while all compute",
                    fit.core_share);
      why += share;
    }
    for (const GemmCurve& c : fit.gemm) {
      why += "; " + std::string(to_string(c.precision)) + " GEMMs " + quality_text(c.quality);
    }
    if (fit.memory_rate) why += "; streaming " + quality_text(fit.memory_quality);
    if (!fit.loops.empty()) why += "; " + std::to_string(fit.loops.size()) + " loop kinds";
    g.source = why;
    bundle.gpus.push_back(g);

    Cluster c;
    c.name = calibrated_name(cal.host, cal.engine, fit.ranks, "cluster");
    c.display_name = cpu ? "This machine, CPU engine, " + std::to_string(fit.ranks) +
                               (fit.ranks == 1 ? " rank" : " ranks") + " (calibrated)"
                         : "This machine (calibrated)";
    c.nodes = 1;
    c.gpus_per_node = fit.ranks;
    c.gpu = g;
    c.cpu_cores_per_node = cal.cpu_cores;
    c.host_memory_bytes = cal.host_memory_bytes;
    if (fit.link) {
      Link l;
      l.name = calibrated_name(cal.host, cal.engine, fit.ranks, "link");
      l.display_name = cpu ? "MPI between " + std::to_string(fit.ranks) + " ranks on " + host
                           : "NCCL on " + host;
      l.kind = cpu ? LinkKind::shared_memory : LinkKind::nvlink;
      l.bandwidth = fit.link->bandwidth;
      l.latency = fit.link->latency;
      l.efficiency = 1.0;
      l.source = origin + ": all-reduces over " + std::to_string(fit.link->group_sizes.size()) +
                 " group size(s), " + quality_text(fit.link->quality);
      if (fit.cold_link) {
        l.cold_bandwidth = fit.cold_link->bandwidth;
        l.cold_latency = fit.cold_link->latency;
        l.cold_by_size = fit.cold_link->by_size;
        l.source += "; with the caches cold, " + quality_text(fit.cold_link->quality);
      }
      bundle.links.push_back(l);
      c.intra_node = l;
    }
    c.source = origin + " (" + (cpu ? "CPU engine" : "CUDA engine") + ")";
    bundle.clusters.push_back(std::move(c));
  }
  return bundle;
}

std::vector<OptimizerPoint> merge_optimizer_points(const std::vector<OptimizerPoint>& base,
                                                   const std::vector<OptimizerPoint>& run) {
  std::vector<OptimizerPoint> out = run;
  for (const OptimizerPoint& b : base) {
    const bool replaced = std::any_of(run.begin(), run.end(), [&](const OptimizerPoint& r) {
      return std::fabs(std::log2(b.parameters / r.parameters)) < 1;
    });
    if (!replaced) out.push_back(b);
  }
  std::sort(out.begin(), out.end(), [](const OptimizerPoint& a, const OptimizerPoint& b) {
    return a.parameters < b.parameters;
  });
  return out;
}

std::string optimizer_by_size_text(const LoopCosts& loops) {
  return by_count_text(loops.optimizer_by_size);
}

std::string by_count_text(const std::vector<OptimizerPoint>& by_count) {
  std::string text;
  for (const OptimizerPoint& p : by_count) {
    text += (text.empty() ? "" : ", ") + format_fixed(p.ns, 2) + " ns at " +
            format_count(p.parameters) + " parameters";
  }
  return text;
}

std::string bandwidth_by_size_text(const std::vector<LinkPoint>& by_size) {
  std::string text;
  for (const LinkPoint& p : by_size) {
    text += (text.empty() ? "" : ", ") + format_bytes(p.bytes) + " at " +
            format_rate(p.bandwidth, "B/s");
  }
  return text;
}

GpuSpec refine_device(const GpuSpec& base, const DeviceFit& run, std::string_view source) {
  GpuSpec g = base;
  const bool cpu = base.vendor == "CPU";
  for (const GemmCurve& c : run.gemm) {
    if (cpu) {
      // The CPU's "datasheet" is the measured asymptote: the run's rate
      // replaces it, with the operand rate it was fitted with (below). A
      // rate capped at the calibration's peak would pair the run's operand
      // cost with the sweep's rate and count the operands twice.
      switch (c.precision) {
        case Precision::fp32:
        case Precision::tf32:
          g.peak.fp32 = g.peak.tf32 = c.peak * c.efficiency;
          g.efficiency.gemm_max_by_precision.fp32 = 0;
          g.efficiency.gemm_max_by_precision.tf32 = 0;
          break;
        case Precision::bf16:
          g.peak.bf16 = c.peak * c.efficiency;
          g.efficiency.gemm_max_by_precision.bf16 = 0;
          break;
        case Precision::fp16:
          g.peak.fp16 = c.peak * c.efficiency;
          g.efficiency.gemm_max_by_precision.fp16 = 0;
          break;
        default:
          break;
      }
      continue;
    }
    // What the run's GEMMs reached, against the base's peak at that precision.
    const double peak = base.peak.of(c.precision);
    if (peak <= 0) continue;
    const double efficiency = std::min(1.0, c.peak * c.efficiency / peak);
    const bool main = c.precision == Precision::bf16 && base.peak.bf16 > 0;
    if (main) g.efficiency.gemm_max = efficiency;
    // The precision's own fraction too where the base has one (a calibrated
    // preset has every precision's): it is what the planner reads, and a
    // learnt bf16 rate left behind it was never used.
    if (!main || base.efficiency.gemm_max_by_precision.of(c.precision) > 0) {
      switch (c.precision) {
        case Precision::fp32:
          g.efficiency.gemm_max_by_precision.fp32 = efficiency;
          break;
        case Precision::tf32:
          g.efficiency.gemm_max_by_precision.tf32 = efficiency;
          break;
        case Precision::bf16:
          g.efficiency.gemm_max_by_precision.bf16 = efficiency;
          break;
        case Precision::fp16:
          g.efficiency.gemm_max_by_precision.fp16 = efficiency;
          break;
        case Precision::fp8:
          g.efficiency.gemm_max_by_precision.fp8 = efficiency;
          break;
        default:
          break;
      }
    }
  }
  if (!run.gemm.empty()) {
    const double rate16 =
        g.peak.bf16 > 0 ? g.peak.bf16 : (g.peak.fp16 > 0 ? g.peak.fp16 : g.peak.fp32);
    g.efficiency.gemm_half_gflop = run.ramp * rate16 * g.efficiency.gemm_max / 1e9;
    if (!cpu) g.efficiency.gemm_memory_overlap = run.gemm_memory_overlap;
  }
  if (cpu && !run.gemm.empty()) {
    // The operand rate the run's GEMMs were fitted with; where their sizes
    // showed no operand cost, none (the base's rate would add one to the
    // run's rate, which already holds it).
    g.memory_bandwidth = run.gemm_operand_rate.value_or(1e15);
  } else if (!cpu && run.memory_rate && g.memory_bandwidth > 0) {
    g.efficiency.memory_max = std::min(1.0, *run.memory_rate / g.memory_bandwidth);
  }
  const LoopCosts& r = run.loop_costs;
  LoopCosts& c = g.efficiency.loops;
  for (auto [from, to] :
       {std::pair{r.norm_ns, &c.norm_ns}, std::pair{r.norm_backward_ns, &c.norm_backward_ns},
        std::pair{r.activation_ns, &c.activation_ns},
        std::pair{r.activation_backward_ns, &c.activation_backward_ns},
        std::pair{r.elementwise_ns, &c.elementwise_ns}, std::pair{r.softmax_ns, &c.softmax_ns},
        std::pair{r.optimizer_ns, &c.optimizer_ns},
        std::pair{r.attention_gflops, &c.attention_gflops},
        std::pair{r.attention_backward_gflops, &c.attention_backward_gflops}}) {
    if (from > 0) *to = from;
  }
  if ((r.attention_gflops > 0 || r.attention_backward_gflops > 0) && r.attention_precision)
    c.attention_precision = r.attention_precision;
  c.optimizer_by_size = merge_optimizer_points(c.optimizer_by_size, r.optimizer_by_size);
  // What the run's ops were learnt beyond: its own timing cost (none in a
  // store recorded before the tracer measured it, whose ops then hold it).
  if (cpu && (r.any() || !run.gemm.empty())) g.efficiency.kernel_launch_us = run.launch * 1e6;
  g.source = base.source + "; refined by " + std::string(source);
  return g;
}

Link refine_link(const Link& base, const std::optional<LinkFit>& run,
                 const std::optional<LinkFit>& cold, std::string_view source) {
  Link l = base;
  std::string quality;
  if (run) {
    l.latency = run->latency;
    l.bandwidth = run->bandwidth;
    l.efficiency = 1.0;
    quality = quality_text(run->quality);
  }
  if (cold) {
    // Cold figures are bus bandwidth at the warm tier's efficiency.
    const double efficiency = l.efficiency > 0 ? l.efficiency : 1.0;
    l.cold_latency = cold->latency;
    l.cold_bandwidth = cold->bandwidth / efficiency;
    l.cold_by_size = cold->by_size;
    for (LinkPoint& point : l.cold_by_size)
      point.bandwidth /= efficiency;
    quality += (quality.empty() ? "cold: " : "; cold: ") + quality_text(cold->quality);
  }
  l.source = base.source + "; refined by " + std::string(source) + " (" + quality + ")";
  return l;
}

}  // namespace cs::plan
