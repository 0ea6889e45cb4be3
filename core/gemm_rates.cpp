#include "core/gemm_rates.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/format.h"
#include "core/json_reader.h"
#include "core/launched_kernels.h"
#include "core/presets.h"
#include "core/trace_analysis.h"

namespace cs::trace {

namespace {

// The precision the run computed in, where it recorded one (the engines'
// meta "parallel"): what an operation of no recorded type ran in. An fp8
// run records the type of each GEMM it ran in FP8 (and of those in BF16);
// the rest (its attention's batched GEMMs) run in its storage type, BF16.
std::optional<Precision> run_precision(const TraceReader& r) {
  const auto parallel = r.meta("parallel");
  if (!parallel) return std::nullopt;
  const nlohmann::json p = parse_json_text(*parallel);
  if (!p.is_object() || !p.contains("precision") || !p["precision"].is_string())
    return std::nullopt;
  const auto precision = precision_from_string(p["precision"].get<std::string>());
  return precision == Precision::fp8 ? Precision::bf16 : precision;
}

// What an operation of type `dtype` computed in: its type's precision, else
// the run's; on a GPU rank (`kernels`), TF32 where an fp32 one launched a
// TF32 GEMM kernel (LaunchedKernels::Time::computed_in).
std::optional<Precision> computed_precision(DataType dtype, const std::optional<Precision>& of_run,
                                            const LaunchedKernels::Time* kernels) {
  std::optional<Precision> typed = precision_of(dtype);
  if (!typed) typed = of_run;
  return kernels ? kernels->computed_in(typed) : typed;
}

// A rate's precision and, on a GPU rank whose device is a preset's
// (`spec`), that GPU and its datasheet peak for the precision.
void set_precision(GemmRate& rate, const std::optional<Precision>& precision, const GpuSpec* spec) {
  if (precision) rate.precision = std::string(to_string(*precision));
  if (!spec) return;
  rate.gpu = spec->name;
  if (precision) rate.peak_flops = spec->peak.of(*precision);
}

struct Op {
  LaunchedKernels::Span span;
  std::uint32_t name = 0;
  double flops = 0;
  DataType dtype = DataType::none;
};

}  // namespace

std::optional<double> GemmRate::percent_of_peak() const {
  if (peak_flops <= 0 || time_ns <= 0) return std::nullopt;
  return 100.0 * flops_per_second() / peak_flops;
}

Result<GemmRates> gemm_rates(const TraceReader& r, const std::optional<TimeRange>& window,
                             const PresetCatalog* presets) {
  GemmRates out;
  out.presets = presets != nullptr;
  out.windowed = window.has_value();
  const std::optional<Precision> of_run = run_precision(r);
  std::map<std::int32_t, std::string> device_of;
  for (const RankInfo& k : r.ranks())
    device_of[k.rank] = k.device;
  // Each rank's GPU streams, and the other lanes its operations and
  // launches are on (a planner's predicted lanes are no measurement).
  std::map<std::int32_t, std::pair<std::vector<LaneId>, std::vector<LaneId>>> lanes;
  for (const LaneInfo& l : r.lanes()) {
    if (l.kind == LaneKind::predicted) continue;
    auto& [streams, host] = lanes[l.rank];
    (l.kind == LaneKind::gpu_stream ? streams : host).push_back(l.id);
  }
  using Key = std::tuple<std::string, std::string, bool, std::string>;
  std::map<Key, GemmRate> rows;
  const TimeRange all = r.time_range();
  for (const auto& [rank, rank_lanes] : lanes) {
    const auto& [streams, host] = rank_lanes;
    const bool gpu = !streams.empty();
    std::vector<Op> ops;
    LaunchedKernels launched;
    const std::set<std::uint32_t> stream_ids = [&] {
      std::set<std::uint32_t> ids;
      for (LaneId l : streams)
        ids.insert(l.value);
      return ids;
    }();
    auto visit = [&](const StoredEvent& se) {
      const Event& e = se.event;
      if (gpu && launched.take(e, stream_ids.count(e.lane.value) > 0, r.string(e.name)))
        return true;
      if (e.flops <= 0 || stream_ids.count(e.lane.value)) return true;
      if (window && !counts_in_window(e.start_ns, e.end_ns, *window)) return true;
      ops.push_back({{e.start_ns, e.end_ns}, e.name.value, e.flops, e.dtype});
      return true;
    };
    if (host.empty()) continue;
    if (Status s = r.for_each_event(host, all.start_ns, all.end_ns + 1, visit); !s)
      return s.error();
    if (ops.empty()) continue;
    if (gpu) {
      if (Status s = r.for_each_event(streams, all.start_ns, all.end_ns + 1, visit); !s)
        return s.error();
    }
    const GpuSpec* spec = gpu && presets ? presets->match_device(device_of[rank]) : nullptr;
    std::sort(ops.begin(), ops.end(),
              [](const Op& a, const Op& b) { return a.span.start_ns < b.span.start_ns; });
    std::vector<LaunchedKernels::Time> times;
    if (gpu) {
      std::vector<LaunchedKernels::Span> spans;
      spans.reserve(ops.size());
      for (const Op& op : ops)
        spans.push_back(op.span);
      times = launched.attribute(spans);
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      std::int64_t ns = op.span.end_ns - op.span.start_ns;
      if (gpu) {
        if (!times[i].work_recorded()) {
          ++out.without_kernels;
          continue;
        }
        ns = times[i].kernel_ns;
      }
      const std::optional<Precision> precision =
          computed_precision(op.dtype, of_run, gpu ? &times[i] : nullptr);
      out.tf32_by_kernels += gpu && precision != computed_precision(op.dtype, of_run, nullptr);
      const std::string p = precision ? std::string(to_string(*precision)) : std::string();
      GemmRate& row =
          rows[{r.string(StringId{op.name}), p, gpu, spec ? spec->name : std::string()}];
      if (row.count == 0) {
        row.name = r.string(StringId{op.name});
        row.kernel_time = gpu;
        set_precision(row, precision, spec);
      }
      ++row.count;
      row.flops += op.flops;
      row.time_ns += ns;
    }
  }
  std::int64_t total = 0;
  for (auto& [key, row] : rows) {
    total += row.time_ns;
    out.rows.push_back(std::move(row));
  }
  for (GemmRate& row : out.rows)
    row.share = total > 0 ? static_cast<double>(row.time_ns) / static_cast<double>(total) : 0;
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const GemmRate& a, const GemmRate& b) { return a.time_ns > b.time_ns; });
  return out;
}

Result<OperationRate> gemm_rate_of(const TraceReader& r, const StoredEvent& op,
                                   const PresetCatalog* presets) {
  OperationRate out;
  GemmRate& rate = out.rate;
  const Event& e = op.event;
  rate.name = r.string(e.name);
  rate.flops = e.flops;
  const std::optional<Precision> of_run = run_precision(r);
  std::vector<LaneId> streams, host;
  bool on_stream = false;
  for (const LaneInfo& l : r.lanes_of(op.rank)) {
    if (l.kind == LaneKind::predicted) continue;
    (l.kind == LaneKind::gpu_stream ? streams : host).push_back(l.id);
    on_stream |= l.kind == LaneKind::gpu_stream && l.id.value == e.lane.value;
  }
  if (streams.empty() || on_stream) {
    rate.count = 1;
    rate.time_ns = e.duration_ns();
    set_precision(rate, computed_precision(e.dtype, of_run, nullptr), nullptr);
    return out;
  }
  rate.kernel_time = true;
  // The calls within its span, and the operations with FLOPs that start in
  // it (itself, and any nested one, which takes its own calls' kernels).
  LaunchedKernels launched;
  std::set<std::int64_t> unseen;
  std::vector<LaunchedKernels::Span> ops;
  Status read = r.for_each_event(host, e.start_ns, e.end_ns, [&](const StoredEvent& se) {
    const Event& h = se.event;
    if (launched.take(h, false, {})) {
      if (h.kind == EventKind::api_call) unseen.insert(h.correlation);
    } else if (h.flops > 0 && h.end_ns > h.start_ns) {
      ops.push_back({h.start_ns, h.end_ns});
    }
    return true;
  });
  if (!read) return read.error();
  // Their kernels run after the calls, in launch order on each stream: the
  // read stops once each call's work was seen and a later launch's started
  // after it.
  if (!unseen.empty()) {
    std::int64_t last_end = e.start_ns;
    read = r.for_each_event(streams, e.start_ns, r.time_range().end_ns + 1,
                            [&](const StoredEvent& se) {
                              const Event& k = se.event;
                              if (k.correlation > 0 && launched.launched(k.correlation)) {
                                unseen.erase(k.correlation);
                                last_end = std::max(last_end, k.end_ns);
                                launched.take(k, true, r.string(k.name));
                                return true;
                              }
                              return !unseen.empty() || k.start_ns < last_end;
                            });
    if (!read) return read.error();
  }
  std::sort(ops.begin(), ops.end(),
            [](const LaunchedKernels::Span& a, const LaunchedKernels::Span& b) {
              return a.start_ns < b.start_ns;
            });
  const auto times = launched.attribute(ops);
  LaunchedKernels::Time mine;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].start_ns == e.start_ns && ops[i].end_ns == e.end_ns) {
      mine = times[i];
      break;
    }
  }
  out.kernels = mine.kernels;
  if (mine.work_recorded()) {
    rate.count = 1;
    rate.time_ns = mine.kernel_ns;
  }
  std::string device;
  for (const RankInfo& k : r.ranks())
    if (k.rank == op.rank) device = k.device;
  set_precision(rate, computed_precision(e.dtype, of_run, mine.work_recorded() ? &mine : nullptr),
                presets ? presets->match_device(device) : nullptr);
  return out;
}

std::string gemm_rates_title(const GemmRates& rates) {
  return rates.windowed ? "Operations with FLOPs (all ranks; those in the window)"
                        : "Operations with FLOPs (all ranks, all steps)";
}

std::string gemm_rates_caption(const GemmRates& rates) {
  const bool kernel = std::any_of(rates.rows.begin(), rates.rows.end(),
                                  [](const GemmRate& g) { return g.kernel_time; });
  const bool own = std::any_of(rates.rows.begin(), rates.rows.end(),
                               [](const GemmRate& g) { return !g.kernel_time; });
  const std::string gpu_time =
      "the GPU time of the kernels each launched (the CUDA engine's own bias and cast kernels "
      "left out)";
  const std::string own_time = "each operation's own duration";
  std::string time = kernel && own
                         ? "on a GPU rank " + gpu_time + ", on a rank without a GPU " + own_time
                     : kernel ? gpu_time
                              : own_time + " (no GPU)";
  return "time: " + time + "; FLOP/s: their FLOPs over their time; share: of all their time; " +
         (kernel ? "% of peak: of the GPU preset's datasheet peak for the precision"
                 : "% of peak: none without a GPU");
}

std::vector<std::string> gemm_rates_notes(const GemmRates& rates) {
  std::vector<std::string> notes;
  std::set<std::string> gpus;
  bool no_peak = false;
  for (const GemmRate& g : rates.rows) {
    if (!g.gpu.empty()) gpus.insert(g.gpu);
    if (g.kernel_time && g.peak_flops <= 0) no_peak = true;
  }
  if (!gpus.empty()) {
    std::string list;
    for (const std::string& g : gpus)
      list += (list.empty() ? "" : ", ") + g;
    notes.push_back("peak: of the GPU preset " + list + " (its dense datasheet figure)");
  }
  if (no_peak && !rates.presets)
    notes.push_back("no % of peak: no GPU presets were read");
  else if (no_peak)
    notes.push_back(
        "no % of peak where the rank's device matches no GPU preset or the precision is not "
        "known");
  if (rates.tf32_by_kernels > 0)
    notes.push_back(std::to_string(rates.tf32_by_kernels) +
                    (rates.tf32_by_kernels == 1 ? " fp32 operation" : " fp32 operations") +
                    " ran on TF32 tensor cores (their GEMM kernels' names say so, as where "
                    "PyTorch allows TF32): rated as tf32");
  if (rates.without_kernels > 0)
    notes.push_back(
        std::to_string(rates.without_kernels) +
        (rates.without_kernels == 1 ? " operation" : " operations") +
        " with FLOPs on a GPU rank launched no recorded kernel (or only cuBLAS's split-K "
        "reduction, its GEMM's lost): no GPU time, left out");
  return notes;
}

std::string gemm_rates_absent(const GemmRates& rates) {
  if (rates.without_kernels > 0)
    return "No operation with FLOPs has GPU time: the " + std::to_string(rates.without_kernels) +
           " on GPU ranks launched no recorded kernel.";
  return "No operation carries FLOPs (the engines' GEMMs, a PyTorch profile's matrix multiplies "
         "recorded with record_shapes): no FLOP/s to show.";
}

}  // namespace cs::trace
