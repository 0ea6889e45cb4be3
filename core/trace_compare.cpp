#include "core/trace_compare.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>

#include "core/format.h"
#include "core/median.h"

namespace cs::trace {

namespace {

int steps_of(const RunAnalysis& a) {
  std::size_t most = 0;
  for (const RankAnalysis& r : a.ranks)
    most = std::max(most, r.steps.size());
  return static_cast<int>(most);
}

double median_step(const RunAnalysis& a) {
  std::vector<double> steps;
  for (const RankStraggler& s : a.stragglers.ranks) {
    if (s.step_ns > 0) steps.push_back(s.step_ns);
  }
  return median(std::move(steps));
}

std::string collective_label(const CollectiveStats& c) {
  if (c.collective == Collective::none) return c.name;
  std::string label = std::string(to_string(c.collective));
  if (c.dtype != DataType::none) label += " " + std::string(to_string(c.dtype));
  label += c.bytes > 0 ? " " + format_bytes(static_cast<double>(c.bytes)) : " (size unknown)";
  return label + " x" + std::to_string(c.ranks);
}

void sort_by_change(std::vector<ComparedFigure>& figures) {
  std::stable_sort(figures.begin(), figures.end(), [](const auto& x, const auto& y) {
    return std::fabs(x.change_ns()) > std::fabs(y.change_ns());
  });
}

// Kernels or collectives of both runs by label, each run's total scaled to
// per rank (and step), by the size of their change.
template <class Stats, class Label>
std::vector<ComparedFigure> compare_lists(const std::vector<Stats>& a, const std::vector<Stats>& b,
                                          double a_scale, double b_scale, Label label) {
  std::map<std::string, ComparedFigure> by_label;
  for (const Stats& x : a) {
    ComparedFigure& f = by_label[label(x)];
    f.a_ns += static_cast<double>(x.total_ns) * a_scale;
    f.a_count += x.count;
  }
  for (const Stats& x : b) {
    ComparedFigure& f = by_label[label(x)];
    f.b_ns += static_cast<double>(x.total_ns) * b_scale;
    f.b_count += x.count;
  }
  std::vector<ComparedFigure> out;
  for (auto& [name, f] : by_label) {
    f.name = name;
    out.push_back(f);
  }
  sort_by_change(out);
  return out;
}

}  // namespace

RunComparison compare_runs(const RunAnalysis& a, const RunAnalysis& b) {
  RunComparison out;
  out.a_ranks = static_cast<int>(a.ranks.size());
  out.b_ranks = static_cast<int>(b.ranks.size());
  out.a_steps = steps_of(a);
  out.b_steps = steps_of(b);
  out.per_step = out.a_steps > 0 && out.b_steps > 0;
  out.a_step_ns = median_step(a);
  out.b_step_ns = median_step(b);
  // Totals of all ranks to per rank (and step): over the steps the ranks
  // recorded, a rank that stopped early counted for its own (one of two ranks
  // with half the steps was averaged over steps it never ran, 25 % low).
  auto scale = [&](const RunAnalysis& run, int most_steps) {
    if (!out.per_step) return 1.0 / std::max<std::size_t>(1, run.ranks.size());
    double rank_steps = 0;
    for (const RankAnalysis& r : run.ranks)  // a rank with no step marks spans them all
      rank_steps += r.steps.empty() ? most_steps : static_cast<double>(r.steps.size());
    return 1.0 / std::max(1.0, rank_steps);
  };
  const double a_scale = scale(a, out.a_steps);
  const double b_scale = scale(b, out.b_steps);

  // Where the time went: HTA's parts, which add up to the span.
  struct Part {
    const char* name;
    double (*of)(const Breakdown&);
  };
  static constexpr Part kParts[] = {
      {"compute", [](const Breakdown& x) { return static_cast<double>(x.compute_ns); }},
      {"exposed communication",
       [](const Breakdown& x) { return static_cast<double>(x.exposed_communication_ns); }},
      {"exposed memory",
       [](const Breakdown& x) { return static_cast<double>(x.exposed_memory_ns); }},
      {"other (synchronization, ...)",
       [](const Breakdown& x) {
         return static_cast<double>(x.exposed_synchronization_ns + x.other_busy_ns);
       }},
      {"idle", [](const Breakdown& x) { return static_cast<double>(x.idle_ns); }},
      {"device span", [](const Breakdown& x) { return static_cast<double>(x.span_ns); }},
  };
  for (const Part& p : kParts) {
    ComparedFigure f;
    f.name = p.name;
    for (const RankAnalysis& r : a.ranks)
      f.a_ns += p.of(r.total) * a_scale;
    for (const RankAnalysis& r : b.ranks)
      f.b_ns += p.of(r.total) * b_scale;
    out.parts.push_back(f);
  }

  auto compute_kernels = [](const std::vector<KernelStats>& all) {
    std::vector<KernelStats> compute;
    std::copy_if(all.begin(), all.end(), std::back_inserter(compute),
                 [](const KernelStats& k) { return k.category == Category::compute; });
    return compute;
  };
  out.operation_kinds =
      compare_lists(compute_kernels(a.kernels), compute_kernels(b.kernels), a_scale, b_scale,
                    [](const KernelStats& k) {
                      const std::string kind(operation_kind(k.name));
                      return describe_part(kind == "optimizer" ? kind : "compute." + kind);
                    });
  out.kernels = compare_lists(a.kernels, b.kernels, a_scale, b_scale,
                              [](const KernelStats& k) { return k.name; });
  out.collectives = compare_lists(a.collectives, b.collectives, a_scale, b_scale,
                                  [](const CollectiveStats& c) { return collective_label(c); });
  auto by_name = [](const KernelStats& k) { return k.name; };
  out.api_calls = compare_lists(a.api_calls, b.api_calls, a_scale, b_scale, by_name);
  out.annotations = compare_lists(a.annotations, b.annotations, a_scale, b_scale, by_name);
  auto times = [](const std::vector<MemoryOpStats>& ops) {
    std::vector<KernelStats> timed;
    for (const MemoryOpStats& m : ops)
      timed.push_back(m.time);
    return timed;
  };
  out.memory_ops =
      compare_lists(times(a.memory_ops), times(b.memory_ops), a_scale, b_scale, by_name);
  return out;
}

namespace {

// From the first step's start to the last one's end, over all ranks; none
// when the run records no step.
Result<std::optional<TimeRange>> steps_extent(const TraceReader& r) {
  auto steps = job_step_windows(r);
  if (!steps) return steps.error();
  if (steps->empty()) return std::optional<TimeRange>{};
  TimeRange extent{steps->front().start, steps->front().end};
  for (const StepWindow& w : *steps) {
    extent.start_ns = std::min(extent.start_ns, w.start);
    extent.end_ns = std::max(extent.end_ns, w.end);
  }
  return std::optional<TimeRange>{extent};
}

}  // namespace

Result<RunComparison> compare_stores(const TraceReader& a, const TraceReader& b,
                                     AnalysisOptions options) {
  auto a_steps = steps_extent(a);
  if (!a_steps) return a_steps.error();
  auto b_steps = steps_extent(b);
  if (!b_steps) return b_steps.error();
  const bool per_step = a_steps->has_value() && b_steps->has_value();
  AnalysisOptions a_options = options, b_options = options;
  if (per_step) {
    a_options.window = **a_steps;
    b_options.window = **b_steps;
  }
  auto a_run = analyze_run(a, a_options);
  if (!a_run) return a_run.error();
  auto b_run = analyze_run(b, b_options);
  if (!b_run) return b_run.error();
  // Figures lacking the rows of a damaged page would compare as a change.
  if (!a_run->damage.empty()) return Error{a_run->damage};
  if (!b_run->damage.empty()) return Error{b_run->damage};
  return compare_runs(*a_run, *b_run);
}

}  // namespace cs::trace
