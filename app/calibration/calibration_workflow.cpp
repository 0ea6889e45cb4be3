#include "app/calibration/calibration_workflow.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/calibration_meta.h"
#include "core/format.h"
#include "core/host_probe.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/machine_probe.h"
#include "core/model_json.h"
#include "core/shown_name.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "planners/estimate.h"
#include "planners/estimate_json.h"
#include "planners/machine_probe.h"
#include "profiler/plan_run.h"
#include "profiler/worker_shape.h"

namespace cs::calib {

namespace fs = std::filesystem;

namespace {

template <class T>
void replace_named(std::vector<T>& items, const T& item) {
  auto it =
      std::find_if(items.begin(), items.end(), [&](const T& t) { return t.name == item.name; });
  if (it == items.end()) {
    items.push_back(item);
  } else {
    *it = item;
  }
}

fs::path presets_dir_or_default(const fs::path& dir) {
  return dir.empty() ? user_presets_dir() : dir;
}

}  // namespace

fs::path presets_file_for(const fs::path& dir, std::string_view host, std::string_view engine) {
  // The same spelling as the presets' names.
  std::string name = plan::calibrated_name(host, engine, 1, "cluster");
  if (engine == "cpu") name = name.substr(0, name.size() - std::string("-cpu1").size()) + "-cpu";
  return dir / (name + ".json");
}

Status prepare_presets_dir(const fs::path& dir, std::vector<fs::path>* made) {
  std::error_code ec;
  std::vector<fs::path> missing_folders;
  fs::path missing = fs::absolute(dir, ec).lexically_normal();
  if (missing.filename().empty()) missing = missing.parent_path();  // "presets/"
  for (; !missing.empty() && missing != missing.parent_path() && !fs::exists(missing, ec);
       missing = missing.parent_path())
    missing_folders.push_back(missing);
  fs::create_directories(dir, ec);
  if (ec || access(dir.c_str(), W_OK) != 0) {
    const std::string why = ec ? ec.message() : std::string(std::strerror(errno));
    for (const fs::path& folder : missing_folders)  // deepest first; only an empty one goes
      fs::remove(folder, ec);
    return Error{dir.string() + ": the calibrated presets cannot be saved there (" + why + ")"};
  }
  if (made) *made = std::move(missing_folders);
  return Status{};
}

fs::path presets_file_to_save(const fs::path& dir, const PresetBundle& bundle,
                              const PresetCatalog& catalog, std::string_view host,
                              std::string_view engine) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    // Only the files the catalog loads: a FIFO named *.json blocked here.
    std::error_code entry_ec;
    if (entry.path().extension() != ".json" || !entry.is_regular_file(entry_ec)) continue;
    auto defined = read_preset_bundle(entry.path(), catalog);
    if (!defined) continue;
    for (const Cluster& c : defined->clusters) {
      for (const Cluster& mine : bundle.clusters) {
        if (c.name == mine.name) return entry.path();
      }
    }
  }
  return presets_file_for(dir, host, engine);
}

namespace {

// The presets folder refuses a name two of its files define, so a preset
// is saved only where no other file of `file`'s folder defines its name: a
// second definition made every later command refuse the whole folder.
Status check_defined_nowhere_else(const fs::path& file, const PresetBundle& bundle,
                                  const PresetCatalog& catalog) {
  std::error_code ec;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    std::error_code entry_ec;
    if (entry.path().extension() != ".json" || !entry.is_regular_file(entry_ec)) continue;
    if (entry.path().filename() == file.filename()) continue;
    auto other = read_preset_bundle(entry.path(), catalog);
    if (!other) continue;  // not loaded either (a file of plans), or already an error of its own
    auto clash = [&](const char* kind, const auto& mine, const auto& theirs) -> Status {
      for (const auto& m : mine) {
        for (const auto& t : theirs) {
          if (m.name != t.name) continue;
          return Error{entry.path().string() + " already defines the " + kind + " \"" + m.name +
                       "\": saved in " + file.string() +
                       " too, the presets folder would not load (not saved: remove or rename "
                       "one of them)"};
        }
      }
      return {};
    };
    if (Status s = clash("GPU", bundle.gpus, other->gpus); !s) return s;
    if (Status s = clash("link", bundle.links, other->links); !s) return s;
    if (Status s = clash("model", bundle.models, other->models); !s) return s;
    if (Status s = clash("cluster", bundle.clusters, other->clusters); !s) return s;
  }
  return {};
}

}  // namespace

Status merge_into_presets_file(const fs::path& file, const PresetBundle& bundle,
                               const PresetCatalog& catalog) {
  PresetBundle merged;
  std::error_code ec;
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec))
    return Error{file.string() + ": is not a regular file: calibrated presets are not written there"};
  if (fs::exists(file, ec)) {
    auto existing = read_preset_bundle(file, catalog);
    if (!existing) return existing.error();
    merged = std::move(existing).value();
  }
  for (const GpuSpec& g : bundle.gpus)
    replace_named(merged.gpus, g);
  for (const Link& l : bundle.links)
    replace_named(merged.links, l);
  for (const Workload& w : bundle.models)
    replace_named(merged.models, w);
  for (const Cluster& c : bundle.clusters)
    replace_named(merged.clusters, c);
  if (Status s = check_defined_nowhere_else(file, bundle, catalog); !s) return s;
  return write_preset_bundle(file, merged);
}

Result<MachineCalibration> fit_calibration_store(const std::string& store,
                                                 const std::optional<GpuSpec>& datasheet) {
  auto reader = trace::TraceReader::open(store);
  if (!reader) return reader.error();
  // A run store or an imported trace measured no sweeps: fitted as if it had,
  // it replaced the machine's calibration (a bf16 peak of 0 from a run in fp32).
  if (!(*reader)->meta(kCalibrationMetaKey)) {
    const std::string source = (*reader)->run().source;
    return Error{store + " is not a calibration store (it is " +
                 (source.empty() ? std::string("a trace") : "a " + source + " store") +
                 "): a run refines the calibrated presets with --learn"};
  }
  plan::FitOptions fit_options;
  fit_options.datasheet = datasheet;
  auto fit = plan::fit_store(**reader, fit_options);
  if (!fit) return fit.error();
  if (datasheet && fit->engine == "cpu") {
    // Fitted against a GPU's peaks, a CPU's sweeps made a "GPU" of the CPU.
    return Error{store + " was swept on the CPU engine: a GPU's datasheet (" + datasheet->name +
                 ") does not describe it; fit it without one"};
  }
  MachineCalibration out;
  out.record.store = store;
  out.fit = std::move(fit).value();
  out.presets = plan::calibrated_presets(out.fit, datasheet);
  // A device measured without a GEMM (nor a datasheet) has no peak: its
  // preset would make every later command refuse the presets folder. Its
  // link (a sweep of collectives alone) is still kept.
  PresetBundle& p = out.presets;
  auto no_peak = [](const GpuSpec& g) { return !(g.peak.fp32 > 0); };
  const auto dropped = std::count_if(p.gpus.begin(), p.gpus.end(), no_peak);
  std::erase_if(p.gpus, no_peak);
  std::erase_if(p.clusters, [&](const Cluster& c) { return c.gpu && no_peak(*c.gpu); });
  if (p.gpus.empty() && p.links.empty()) {
    std::string why;
    for (const std::string& note : out.fit.notes)
      why += "; " + note;
    return Error{store + ": nothing to calibrate from: no GEMM with FLOPs or collective measured" +
                 why + " (no preset written)"};
  }
  if (dropped > 0) {
    out.fit.notes.push_back(std::to_string(dropped) +
                            " device(s) with no GEMM measured: no GPU or cluster preset of them, "
                            "their link presets only");
  }
  return out;
}

bool is_calibration_store(const std::string& store) {
  auto reader = trace::TraceReader::open(store, trace::TraceReader::Options{.repair = false});
  return reader && (*reader)->meta(kCalibrationMetaKey).has_value();
}

Result<std::optional<GpuSpec>> datasheet_of_calibration_store(const std::string& store,
                                                              const PresetCatalog& catalog) {
  auto reader = trace::TraceReader::open(store, trace::TraceReader::Options{.repair = false});
  if (!reader) return std::optional<GpuSpec>();  // said by the fit, which opens it again
  const auto text = (*reader)->meta(kCalibrationMetaKey);
  if (!text) return std::optional<GpuSpec>();
  auto info = calibration_info_from_json(*text, store + ": meta calibration");
  if (!info || info->engine != "cuda")
    return std::optional<GpuSpec>();  // the fit says what is wrong
  const std::string& device = info->device;
  if (const GpuSpec* g = catalog.match_device(device)) return std::optional<GpuSpec>(*g);
  // Sweeps imported with a datasheet record its display name as the device.
  for (const GpuSpec& g : catalog.gpus())
    if (g.display_name == device) return std::optional<GpuSpec>(g);
  return Error{store + ": the sweeps ran on \"" + device + "\", which no GPU preset names"};
}

Result<MachineCalibration> fit_and_save_calibration_store(const std::string& store,
                                                          const PresetCatalog& catalog,
                                                          const fs::path& presets_dir) {
  auto datasheet = datasheet_of_calibration_store(store, catalog);
  if (!datasheet) return datasheet.error();
  auto out = fit_calibration_store(store, *datasheet);
  if (!out) return out.error();
  out->presets_file =
      presets_file_to_save(presets_dir, out->presets, catalog, out->fit.host, out->fit.engine);
  if (Status s = merge_into_presets_file(out->presets_file, out->presets, catalog); !s)
    return s.error();
  return out;
}

Workload reference_workload() {
  Workload w;
  w.name = "calibration-reference";
  w.display_name = "Calibration reference GPT";
  w.source = "clusterscope calibrate";
  TransformerShape& s = w.transformer;
  // Between the sizes the CPU engine trains (widths 64-256, 64-128 tokens a
  // sequence), so that its GEMMs and loops lie inside what plans meet.
  s.layers = 2;
  s.hidden = 192;
  s.heads = s.kv_heads = 6;
  s.ffn_hidden = 4 * s.hidden;
  s.seq_len = 96;
  s.vocab = 768;
  return w;
}

std::vector<ReferenceLayout> reference_layouts(int ranks) {
  // Micro-batches of 2 and 1 sequences: the same weights meet twice and
  // once as many tokens, so that a GEMM's operand cost and its FLOPs can be
  // told apart (one token count makes them grow together).
  if (ranks >= 2 && ranks % 2 == 0) return {{ranks, 1, 2}, {ranks / 2, 2, 1}};
  return {{ranks, 1, 2}, {ranks, 1, 1}};
}

std::string to_string(const ReferenceLayout& l) {
  return "dp " + std::to_string(l.dp) + (l.tp > 1 ? " x tp " + std::to_string(l.tp) : "") +
         ", micro-batch " + std::to_string(l.micro_batch);
}

namespace {

using Progress = std::function<void(const launch::CalibrationProgress&)>;
// A reference run's steps finished by its slowest rank, of its steps.
using StepProgress = std::function<void(int step, int steps)>;

// The reference model's plan on `cluster`: a step of two sequences per
// replica, in micro-batches of the layout's size.
Plan reference_plan(const Cluster& cluster, const ReferenceLayout& l) {
  Plan plan;
  plan.cluster = cluster;
  plan.workload = reference_workload();
  plan.parallel.dp = l.dp;
  plan.parallel.tp = l.tp;
  plan.parallel.pp = 1;
  plan.parallel.micro_batch = l.micro_batch;
  plan.parallel.global_batch = 2 * l.dp;
  plan.precision = PrecisionPlan::for_compute(Precision::fp32);
  return plan;
}

}  // namespace

// Looser than the 15 % a run is held to. Ranks sharing cores probe far
// from the model on an undisturbed machine (4 ranks on 2 cores: GEMM 0.65
// times the model in both runs of one calibration): theirs is not read.
constexpr double kProbeTolerance = 1.4;
bool machine_moved(const ReferenceRun& r) {
  if (r.shares_cores) return false;
  for (double ratio : {r.probe_gemm_ratio, r.probe_loop_ratio}) {
    if (ratio > 0 && std::max(ratio, 1 / ratio) > kProbeTolerance) return true;
  }
  return false;
}
std::optional<double> wait_in_transfer(const trace::PredictedStep& prediction,
                                       const trace::StepParts& measured) {
  auto predicted = [&](const char* name) {
    const auto it = prediction.breakdown.find(name);
    return it == prediction.breakdown.end() ? 0.0 : it->second;
  };
  const double waiting = predicted("wait");
  if (waiting <= 0) return std::nullopt;
  const double transfer_predicted = predicted("communication.tp") + predicted("communication.dp");
  const double transfer_measured =
      measured.part("communication.tp") + measured.part("communication.dp");
  return std::clamp((transfer_measured - transfer_predicted) / waiting, 0.0, 1.0);
}

double share_for_step(const std::function<double(double share)>& step_at, double measured) {
  double lo = 0.05, hi = 1.0;
  if (step_at(hi) >= measured) return hi;
  if (step_at(lo) <= measured) return lo;
  for (int i = 0; i < 40; ++i) {
    const double mid = std::sqrt(lo * hi);
    (step_at(mid) > measured ? lo : hi) = mid;
  }
  return std::sqrt(lo * hi);
}

bool far_from_sweeps(const ReferenceRun& r) {
  return r.predicted_sweeps_s > 0 && r.measured_step_s > 0 &&
         std::max(r.measured_step_s / r.predicted_sweeps_s,
                  r.predicted_sweeps_s / r.measured_step_s) > 1.3;
}

namespace {

// Trains the reference model once on `cluster` (a calibrated cluster of
// its rank count) and measures its step. An error says why the run failed.
Result<ReferenceRun> run_reference(const MachineCalibrationOptions& o, const PresetCatalog& catalog,
                                   const Cluster& cluster, const ReferenceLayout& layout,
                                   const std::string& store, const std::string& host,
                                   const launch::StopRequest* stop, const StepProgress& on_step) {
  const Plan plan = reference_plan(cluster, layout);
  launch::PlanRunOptions run;
  run.backend = "cpu";
  run.steps = o.reference_steps;
  run.run_store = store;
  run.title = "Calibration reference run, " + to_string(layout);
  run.threads = o.run.threads;
  run.hang_timeout = o.run.hang_timeout;
  run.worker = o.run.worker;
  run.mpirun = o.run.mpirun;
  std::error_code ec;
  fs::remove(store, ec);
  auto made = launch::plan_run(plan, run);
  if (!made) return made.error();
  launch::RunSpec spec = made->spec;
  ReferenceRun out;
  out.layout = layout;
  out.ranks = layout.dp * layout.tp;
  out.store = store;
  out.shares_cores = cluster.gpu && cluster.gpu->efficiency.core_share < 1;
  auto prediction = predict_run(catalog, plan, "cpu", out.ranks, host, cluster);
  if (!prediction) return Error{"predicting it: " + prediction.message()};
  spec.extra_meta.emplace_back(trace::kPredictedStepMetaKey,
                               json_text(trace::to_json(*prediction)));
  out.predicted_sweeps_s = prediction->step_seconds;
  // The slowest rank's finished steps; events come on the launcher's one thread.
  launch::SlowestRank slowest(out.ranks);
  launch::Launcher launcher(spec, [&](const launch::LaunchEvent& e) {
    if (!on_step || e.kind != launch::LaunchEvent::Kind::step) return;
    if (const std::optional<int> done = slowest.advance(e.rank, e.step + 1))
      on_step(*done, e.steps > 0 ? e.steps : o.reference_steps);
  });
  if (Status s = launcher.start(); !s) return s.error();
  const launch::RunReport report = launcher.wait(stop);
  // The caller words a stop (and whether the ranks were killed). The
  // unfinished run is no measurement: its store, the ranks' stores and the
  // plan it wrote go (they stayed beside the calibration's store).
  if (stop && stop->requested()) {
    fs::remove(store, ec);
    fs::remove_all(launch::run_store_stem(store) + ".ranks", ec);
    fs::remove(made->plan_path, ec);
    return Error{"cancelled"};
  }
  if (report.outcome != launch::Outcome::completed || report.run_store.empty())
    return Error{launch::failure_text(report)};
  auto reader = trace::TraceReader::open(report.run_store);
  if (!reader) return reader.error();
  auto parts = trace::measure_step_parts(**reader);
  if (!parts) return parts.error();
  out.measured_step_s = parts->step_s;
  // The machine probe every rank ran before the first step, against what
  // the sweeps' presets say it takes.
  const std::optional<MachineProbe>& model = prediction->machine_probe;
  if (const auto recorded = (*reader)->meta(std::string(kMachineProbeMetaKey)); recorded && model) {
    auto measured = machine_probe_from_json(*recorded, store + ": meta machine_probe");
    if (measured) {
      const MachineDrift drift{*measured, *model};
      out.probe_gemm_ratio = drift.gemm_ratio();
      out.probe_loop_ratio = drift.loop_ratio();
    }
  }
  return out;
}

// run_reference, and once more where the run is more than 30 % from the
// sweeps' prediction (either way) or its probe found another machine: a
// machine that other work slowed for a few seconds (on the development VM,
// a 2-rank run at 47 ms against 20-24 ms in every other calibration, its
// GEMM probe 1.8 times the sweeps') would teach the presets that moment.
// Of the two, the one whose probe found the machine as swept, then the
// faster, is kept under `store` (the other's store is removed); the caller
// learns from none whose probe found the machine moved.
Result<ReferenceRun> run_reference_checked(const MachineCalibrationOptions& o,
                                           const PresetCatalog& catalog, const Cluster& cluster,
                                           const ReferenceLayout& layout, const std::string& store,
                                           const std::string& host, const launch::StopRequest* stop,
                                           const StepProgress& on_step) {
  auto run = run_reference(o, catalog, cluster, layout, store, host, stop, on_step);
  if (!run || (stop && stop->requested()) || !(far_from_sweeps(*run) || machine_moved(*run)))
    return run;
  // The same store name (and plan file) for the second run; the first
  // waits aside until the better one is known.
  std::string first = store;
  first.insert(first.size() - (store.ends_with(".db") ? 3 : 0), ".first");
  std::error_code ec;
  fs::rename(store, first, ec);
  if (ec) return Error{"moving " + store + " aside: " + ec.message()};
  auto again = run_reference(o, catalog, cluster, layout, store, host, stop, on_step);
  const bool better = again && (machine_moved(*run) != machine_moved(*again)
                                    ? machine_moved(*run)
                                    : again->measured_step_s < run->measured_step_s);
  if (better) {
    fs::remove(first, ec);
    run = std::move(again);
  } else {
    fs::remove(store, ec);
    fs::rename(first, store, ec);
    if (ec) return Error{"putting " + store + " back: " + ec.message()};
  }
  run->retried = true;
  return run;
}

// The mean of `values` (one or more), set as `field` of the refined
// cluster's GPU and of its GPU preset.
double set_mean_efficiency(RunRefinement& refined, double GpuEfficiency::*field,
                           const std::vector<double>& values) {
  double sum = 0;
  for (double v : values)
    sum += v;
  const double mean = sum / static_cast<double>(values.size());
  Cluster& cluster = refined.presets.clusters.front();
  cluster.gpu->efficiency.*field = mean;
  for (GpuSpec& g : refined.presets.gpus) {
    if (g.name == cluster.gpu->name) g.efficiency.*field = mean;
  }
  return mean;
}

// Ranks sharing cores: the share of a core each gets where ranks meet in
// collectives (GpuEfficiency::collective_core_share), fitted to the learnt
// reference runs' steps on the refined cluster, each run's share averaged;
// the refined presets carry it, a note says what it came to.
Status fit_collective_share(const PresetCatalog& catalog, const std::string& host,
                            const std::vector<ReferenceRun>& runs, RunRefinement& refined,
                            std::vector<std::string>& notes) {
  Cluster& cluster = refined.presets.clusters.front();
  if (!cluster.gpu || cluster.gpu->efficiency.core_share >= 1) return Status{};
  std::vector<double> shares;
  std::string each;
  for (const ReferenceRun& r : runs) {
    if (!r.learnt || r.measured_step_s <= 0) continue;
    std::string failed;
    const double share = share_for_step(
        [&](double s) {
          Cluster c = cluster;
          c.gpu->efficiency.collective_core_share = s;
          auto predicted =
              predict_run(catalog, reference_plan(c, r.layout), "cpu", r.ranks, host, c);
          if (!predicted) {
            failed = predicted.message();
            return 0.0;
          }
          return predicted->step_seconds;
        },
        r.measured_step_s);
    if (!failed.empty())
      return Error{"fitting the core share to reference run " + to_string(r.layout) + ": " +
                   failed};
    shares.push_back(share);
    each += (each.empty() ? "" : ", ") + to_string(r.layout) + ": " + format_fixed(share, 2);
  }
  if (shares.empty()) return Status{};
  const double fitted = set_mean_efficiency(refined, &GpuEfficiency::collective_core_share, shares);
  notes.push_back("ranks sharing cores (" + std::to_string(runs.front().ranks) +
                  " ranks): where they meet in collectives each got " + format_fixed(fitted, 2) +
                  " of a core (" + format_fixed(cluster.gpu->efficiency.core_share, 2) +
                  " by the core count), fitted to the reference runs' steps (" + each + ")");
  return Status{};
}

// Ranks sharing cores: of the time the share costs in collectives, the
// part the last rank to arrive spends there too
// (GpuEfficiency::shared_wait_in_transfer), fitted to the learnt reference
// runs' parts on the refined cluster (its collective share fitted): each
// run's measured transfer beyond the predicted, over the predicted
// waiting, averaged; for tensor-parallel groups
// (shared_wait_in_tp_transfer) the runs with tensor parallelism alone. The
// refined presets carry them, a note says what they came to.
Status fit_shared_wait_in_transfer(const PresetCatalog& catalog, const std::string& host,
                                   const std::vector<ReferenceRun>& runs, RunRefinement& refined,
                                   std::vector<std::string>& notes) {
  Cluster& cluster = refined.presets.clusters.front();
  if (!cluster.gpu || cluster.gpu->efficiency.core_share >= 1) return Status{};
  // Predicted without it; where no run fits it, the cluster and its GPU
  // preset both keep none.
  set_mean_efficiency(refined, &GpuEfficiency::shared_wait_in_transfer, {0.0});
  set_mean_efficiency(refined, &GpuEfficiency::shared_wait_in_tp_transfer, {0.0});
  std::vector<double> fractions, tp_fractions;
  std::string each;
  for (const ReferenceRun& r : runs) {
    if (!r.learnt || r.measured_step_s <= 0) continue;
    auto predicted =
        predict_run(catalog, reference_plan(cluster, r.layout), "cpu", r.ranks, host, cluster);
    if (!predicted) {
      return Error{"fitting the waits' transfer to reference run " + to_string(r.layout) + ": " +
                   predicted.message()};
    }
    auto reader = trace::TraceReader::open(r.store);
    if (!reader) return reader.error();
    auto parts = trace::measure_step_parts(**reader);
    if (!parts) return parts.error();
    const auto fraction = wait_in_transfer(*predicted, *parts);
    if (!fraction) continue;
    fractions.push_back(*fraction);
    if (r.layout.tp > 1) tp_fractions.push_back(*fraction);
    each += (each.empty() ? "" : ", ") + to_string(r.layout) + ": " + format_fixed(*fraction, 2);
  }
  if (fractions.empty()) return Status{};
  // Every run's for the data-parallel reductions: fitted to the DP 4 run
  // alone it came out 0.01-0.21 in ten calibrations, where the 4-rank
  // plans' runs showed 0.2-0.3 (docs/calibration.md).
  const double fitted =
      set_mean_efficiency(refined, &GpuEfficiency::shared_wait_in_transfer, fractions);
  std::string tp_text;
  if (!tp_fractions.empty()) {
    const double tp_fitted =
        set_mean_efficiency(refined, &GpuEfficiency::shared_wait_in_tp_transfer, tp_fractions);
    tp_text = " (tensor-parallel groups: " + format_fixed(tp_fitted, 2) +
              ", their runs' alone)";
  }
  notes.push_back("ranks sharing cores (" + std::to_string(runs.front().ranks) +
                  " ranks): of the time they waited for each other in collectives, " +
                  format_fixed(fitted, 2) + tp_text +
                  " was in the last rank's call too (its partners descheduled), fitted to the "
                  "reference runs' parts (" +
                  each + ")");
  return Status{};
}

// Trains the reference model on every rank count calibrated and refines
// that rank count's presets in `out` by what its runs show. A run that
// fails leaves its rank count's presets as the sweeps made them, and says
// so in out.notes; cancelling is an error.
Status learn_from_reference_runs(const MachineCalibrationOptions& o, MachineCalibration& out,
                                 const Progress& progress, const launch::StopRequest* stop) {
  auto catalog = PresetCatalog::load_default();
  if (!catalog) return catalog.error();
  std::string stem = out.record.store;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
  // Numbered after the sweep's phases, so that a progress bar goes on.
  const int swept = static_cast<int>(out.record.info.phases.size());
  int total = 0, done = 0;
  for (const plan::DeviceFit& d : out.fit.devices)
    total += static_cast<int>(reference_layouts(d.ranks).size());
  // The sweeps took minutes: said how to keep them (the message left the
  // store to the user, without a word of what it is good for).
  auto cancelled = [&] {
    return Error{
        "calibration cancelled during the reference runs; nothing was saved" +
        std::string(stop->kill ? " (the run's ranks were killed on a second interrupt)" : "") +
        ". The sweeps are kept in " + out.record.store + ": `clusterscope calibrate --from-store " +
        launch::shell_quote(out.record.store) +
        "` (or, in the app, Learn from runs... with that store) fits and saves them, "
        "without the reference runs"};
  };
  for (const plan::DeviceFit& device : out.fit.devices) {
    const std::string name =
        plan::calibrated_name(out.fit.host, out.fit.engine, device.ranks, "cluster");
    auto cluster = std::find_if(out.presets.clusters.begin(), out.presets.clusters.end(),
                                [&](const Cluster& c) { return c.name == name; });
    if (cluster == out.presets.clusters.end() || !cluster->gpu) continue;
    std::vector<ReferenceRun> runs;
    for (const ReferenceLayout& layout : reference_layouts(device.ranks)) {
      const std::string store = stem + ".reference-" + std::to_string(device.ranks) + "r-dp" +
                                std::to_string(layout.dp) + "-tp" + std::to_string(layout.tp) +
                                "-mb" + std::to_string(layout.micro_batch) + ".db";
      const int phase = swept + done;
      const std::string text = "reference run " + std::to_string(done + 1) + "/" +
                               std::to_string(total) + ": " + reference_workload().display_name +
                               ", " + to_string(layout);
      if (progress) progress({.phase = phase, .phases = swept + total, .text = text});
      ++done;
      // Its steps are the phase's points. A run made again (far from the
      // sweeps' prediction) counts from its first step anew: the bar holds
      // at the first run's steps until the second passes them.
      int shown = 0, last = 0;
      bool again = false;
      auto on_step = [&](int step, int steps) {
        if (!progress) return;
        again = again || step <= last;
        last = step;
        shown = std::max(shown, step);
        progress({.phase = phase,
                  .phases = swept + total,
                  .point = shown,
                  .points = steps,
                  .measured = true,
                  .text = text + ", step " + std::to_string(step) + " of " + std::to_string(steps) +
                          (again ? " (run again)" : "")});
      };
      auto run =
          run_reference_checked(o, *catalog, *cluster, layout, store, out.fit.host, stop, on_step);
      if (stop && stop->requested()) return cancelled();
      if (!run) {
        out.notes.push_back("reference run " + to_string(layout) + " (" + store +
                            "): " + run.message() + "; " + name + " keeps the sweeps' figures");
        runs.clear();
        break;
      }
      if (machine_moved(*run)) {
        char ratios[96];
        std::snprintf(ratios, sizeof ratios, "GEMM %.2f, loop %.2f times", run->probe_gemm_ratio,
                      run->probe_loop_ratio);
        out.notes.push_back("reference run " + to_string(layout) +
                            ": the machine probe before its first step found the machine "
                            "not as swept (" +
                            ratios + " the sweeps' model), twice: not learnt from");
      } else {
        run->learnt = true;
      }
      runs.push_back(std::move(run).value());
    }
    std::vector<std::unique_ptr<trace::TraceReader>> readers;
    std::vector<const trace::TraceReader*> stores;
    std::vector<std::string> paths;
    for (const ReferenceRun& r : runs) {
      if (!r.learnt) continue;
      auto reader = trace::TraceReader::open(r.store);
      if (!reader) return reader.error();
      stores.push_back(reader->get());
      readers.push_back(std::move(reader).value());
      paths.push_back(r.store);
    }
    if (stores.empty()) {
      for (ReferenceRun& r : runs) {
        r.predicted_s = r.predicted_sweeps_s;
        out.reference_runs.push_back(std::move(r));
      }
      continue;
    }
    auto refined = refine_cluster(*cluster, stores, paths);
    if (!refined) {
      out.notes.push_back("learning from the reference runs of " + std::to_string(device.ranks) +
                          (device.ranks == 1 ? " rank: " : " ranks: ") + refined.message());
      for (ReferenceRun& r : runs)
        r.predicted_s = r.predicted_sweeps_s;
    } else {
      if (Status s = fit_collective_share(*catalog, out.fit.host, runs, *refined, out.notes); !s)
        return s;
      if (Status s = fit_shared_wait_in_transfer(*catalog, out.fit.host, runs, *refined, out.notes);
          !s)
        return s;
      for (const GpuSpec& g : refined->presets.gpus)
        replace_named(out.presets.gpus, g);
      for (const Link& l : refined->presets.links)
        replace_named(out.presets.links, l);
      for (const Cluster& c : refined->presets.clusters)
        replace_named(out.presets.clusters, c);
      const Cluster& learnt = refined->presets.clusters.front();
      for (ReferenceRun& r : runs) {
        auto again = predict_run(*catalog, reference_plan(learnt, r.layout), "cpu", r.ranks,
                                 out.fit.host, learnt);
        r.predicted_s = again ? again->step_seconds : 0;
      }
      out.reference_fits.push_back(std::move(refined->fit));
    }
    for (ReferenceRun& r : runs)
      out.reference_runs.push_back(std::move(r));
  }
  return Status{};
}

}  // namespace

Result<MachineCalibration> calibrate_machine(
    const MachineCalibrationOptions& options,
    const std::function<void(const launch::CalibrationProgress&)>& progress,
    const launch::StopRequest* stop) {
  launch::CalibrationRunOptions run = options.run;
  if (run.host.empty() || run.host_memory_bytes <= 0 || run.cpu_cores <= 0) {
    const HostInfo host = probe_host();
    if (run.host.empty()) run.host = host.hostname;
    if (run.host_memory_bytes <= 0) run.host_memory_bytes = host.memory_bytes;
    if (run.cpu_cores <= 0) run.cpu_cores = host.cpu_cores;
  }
  // The sweeps' progress counts the reference runs to come too, so that the
  // count does not restart ([2/2], then [3/6]).
  int reference_count = 0;
  if (options.reference_runs && run.backend == "cpu") {
    for (int ranks : run.rank_counts)
      reference_count += static_cast<int>(reference_layouts(ranks).size());
  }
  std::function<void(const launch::CalibrationProgress&)> sweep_progress;
  if (progress) {
    sweep_progress = [&](const launch::CalibrationProgress& p) {
      launch::CalibrationProgress counted = p;
      counted.phases += reference_count;
      progress(counted);
    };
  }
  if (options.save) {
    // Refused before the sweeps, not after them (the app ran minutes of them
    // for a presets folder it could not write; the CLI checks this too).
    const fs::path dir = presets_dir_or_default(options.presets_dir);
    if (dir.empty())
      return Error{"no presets folder to save into: set CLUSTERSCOPE_USER_PRESETS or HOME"};
    if (Status s = prepare_presets_dir(dir); !s)
      return Error{s.message() + "; nothing was measured"};
  }
  auto record = launch::record_calibration(run, sweep_progress, stop);
  if (!record) return record.error();
  auto out = fit_calibration_store(record->store, options.datasheet);
  if (!out) return out.error();
  out->record = std::move(record).value();
  if (options.reference_runs && out->fit.engine == "cpu") {
    const auto started = std::chrono::steady_clock::now();
    if (Status s = learn_from_reference_runs(options, *out, progress, stop); !s) return s.error();
    out->reference_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  if (options.save) {
    auto catalog = PresetCatalog::load_default();
    if (!catalog) return catalog.error();
    const fs::path dir = presets_dir_or_default(options.presets_dir);
    if (dir.empty())
      return Error{"no presets folder to save into: set CLUSTERSCOPE_USER_PRESETS or HOME"};
    out->presets_file =
        presets_file_to_save(dir, out->presets, *catalog, out->fit.host, out->fit.engine);
    if (Status s = merge_into_presets_file(out->presets_file, out->presets, *catalog); !s) {
      return s.error();
    }
  }
  return out;
}

namespace {

// A device recorded without its model: a trace that did not say which GPU
// ("GPU 0" from a Kineto trace without deviceProperties, "GPU (GPU 0)" from
// an Nsight export without its GPU table).
bool unnamed_gpu(std::string_view device) {
  if (const auto open = device.rfind(" (GPU "); open != std::string_view::npos)
    device = device.substr(0, open);
  if (device == "GPU" || device.empty()) return true;
  if (!device.starts_with("GPU ")) return false;
  const std::string_view number = device.substr(4);
  return !number.empty() &&
         std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// refine_cluster with the runs' first fit (no datasheet, no link) made.
Result<RunRefinement> refine_cluster_from(const Cluster& base,
                                          const std::vector<const trace::TraceReader*>& stores,
                                          const std::vector<std::string>& runs,
                                          Result<plan::Calibration> fit) {
  RunRefinement out;
  out.runs = runs;
  std::string run_list;
  for (const std::string& r : runs)
    run_list += (run_list.empty() ? "" : ", ") + r;
  if (!base.gpu) return Error{"cluster " + base.name + " has no device to refine"};
  if (!fit) return fit.error();
  // Runs of two hosts are two machines, and the presets are named for one
  // of them: pooled, the second host's runs were learnt under the first's name.
  auto host_of = [](const trace::TraceReader* store) {
    const std::string host = store->meta("host").value_or("");
    return host.empty() ? std::string("an unnamed host") : host;
  };
  for (std::size_t i = 1; i < stores.size() && i < runs.size(); ++i) {
    if (host_of(stores[i]) != host_of(stores[0])) {
      return Error{runs[0] + " ran on " + host_of(stores[0]) + ", " + runs[i] + " on " +
                   host_of(stores[i]) + ": learn from the runs of one host at a time; cluster " +
                   base.name + " left as it was"};
    }
  }
  if (fit->devices.empty()) return Error{run_list + ": no configuration to learn from"};
  // The runs refine the device they ran on, not another: a CPU run taught an
  // H200 cluster (and every plan naming its GPU) CPU speeds, 5 ms a step
  // becoming 1.3 s, and A100 kernels taught an H200.
  const GpuSpec& base_device = *base.gpu;
  const bool gpu_runs = fit->engine == "cuda" || fit->device.find("NVIDIA") != std::string::npos ||
                        fit->device.find("GPU") != std::string::npos;
  const bool cpu_device = base_device.architecture == "cpu" || base_device.vendor == "CPU";
  const bool named = names_device(base_device, fit->device);
  // Runs that do not say which GPU are taken as the cluster's, which the
  // user named, and a note says so.
  const bool assumed = gpu_runs && !cpu_device && !named && unnamed_gpu(fit->device);
  if (gpu_runs == cpu_device ||
      (gpu_runs && !base_device.device_names.empty() && !named && !assumed)) {
    const std::string ran_on = fit->device.empty() ? (gpu_runs ? "a GPU" : "a CPU") : fit->device;
    return Error{run_list + " ran on " + ran_on + ", but cluster " + base.name + "'s device is " +
                 shown_name(base_device) +
                 ": learn from runs on that device, or refine a cluster of the device they ran on; "
                 "cluster " +
                 base.name + " left as it was"};
  }
  plan::FitOptions options;
  // A GPU's GEMMs are fitted against its datasheet, their operands at its
  // memory rate, as the calibration fits them.
  if (fit->engine != "cpu") options.datasheet = base.gpu;
  // The runs' collectives may not show a bandwidth: then their latency
  // is fitted at the link's (the first fit took the best a message reached).
  if (!base.intra_node.name.empty()) {
    options.link_bandwidth = base.intra_node.bandwidth * base.intra_node.efficiency;
    if (base.intra_node.cold_bandwidth > 0)
      options.cold_link_bandwidth = base.intra_node.cold_bandwidth * base.intra_node.efficiency;
  }
  if (options.datasheet || options.link_bandwidth) {
    auto again = plan::fit_stores(stores, options);
    if (again && !again->devices.empty()) fit = std::move(again);
  }
  // After the fit again, which makes its notes anew.
  if (assumed) {
    fit->notes.push_back(run_list + " does not say which GPU it ran on (" +
                         (fit->device.empty() ? std::string("none recorded") : fit->device) +
                         "): learnt as cluster " + base.name + "'s " + shown_name(base_device));
  }
  plan::DeviceFit& device = fit->devices.front();
  if (device.core_share < 1 && (device.link || device.cold_link)) {
    // Ranks sharing cores meet in a collective when the scheduler next runs
    // the partner they wait for: their collectives time the scheduler, not
    // the link, and the planner adds the share itself (DP 2 x TP 2 on 2
    // cores taught a 132 MB/s link where the sweep measured 5 GB/s, and the
    // planner then predicted its tensor-parallel waits twice over).
    device.link.reset();
    device.cold_link.reset();
    fit->notes.push_back("the link is not learnt from runs of ranks sharing cores (" +
                         std::to_string(device.ranks) + " ranks on " +
                         std::to_string(fit->cpu_cores) +
                         " cores): their collectives wait for the scheduler to run their partners");
  }
  if (device.gemm.empty() && !device.memory_rate && device.loops.empty() && !device.link &&
      !device.cold_link) {
    std::string why;
    for (const std::string& n : fit->notes)
      why += (why.empty() ? "" : "; ") + n;
    return Error{run_list + ": nothing to learn" + (why.empty() ? "" : " (" + why + ")") +
                 "; cluster " + base.name + " left as it was"};
  }
  // A run that failed (diverged, a rank lost) or was stopped still timed
  // the steps it completed; said, since the user may not mean to learn it.
  for (std::size_t i = 0; i < stores.size() && i < runs.size(); ++i) {
    const std::string status = stores[i]->meta("status").value_or("complete");
    if (status != "complete") {
      fit->notes.push_back(runs[i] + " ended " + status +
                           ": learnt from the operations of the steps it recorded");
    }
  }
  out.base_cluster = base.name;
  std::string source = runs.size() == 1 ? "the run " : "the runs ";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    source += (i > 0 ? ", " : "") + fs::path(runs[i]).filename().string();
  }
  // Saved under names of the runs' host where the base is not already its
  // own (plan::learnt_name): the shipped presets, and other hosts', stay.
  const std::string host = fit->host;
  auto rename = [&](std::string& name, std::string& display_name) {
    const std::string learnt = plan::learnt_name(name, host);
    if (learnt == name) return;
    name = learnt;
    display_name =
        (display_name.empty() ? name : display_name) + " (learnt on " +
        (host.empty() ? std::string("an unnamed host") : host) + ")";
  };
  Cluster refined = base;
  refined.gpu = plan::refine_device(*base.gpu, device, source);
  rename(refined.gpu->name, refined.gpu->display_name);
  if ((device.link || device.cold_link) && !base.intra_node.name.empty()) {
    refined.intra_node = plan::refine_link(base.intra_node, device.link, device.cold_link, source);
    rename(refined.intra_node.name, refined.intra_node.display_name);
    out.presets.links.push_back(refined.intra_node);
  }
  rename(refined.name, refined.display_name);
  refined.source = base.source + "; refined by " + source;
  out.presets.gpus.push_back(*refined.gpu);
  out.presets.clusters.push_back(refined);
  out.fit = std::move(fit).value();
  return out;
}

}  // namespace

Result<RunRefinement> refine_cluster(const Cluster& base,
                                     const std::vector<const trace::TraceReader*>& stores,
                                     const std::vector<std::string>& runs) {
  return refine_cluster_from(base, stores, runs, plan::fit_stores(stores));
}

Result<std::vector<RunRefinement>> refine_from_runs(const std::vector<std::string>& run_stores,
                                                    const PresetCatalog& catalog,
                                                    const std::string& base_cluster, bool save,
                                                    const fs::path& presets_dir,
                                                    const std::optional<Cluster>& plan_cluster) {
  // Runs of one rank count refine one cluster, learnt together (or all of
  // them the cluster named): in the order of their first run.
  std::vector<std::unique_ptr<trace::TraceReader>> readers;
  std::vector<std::pair<int, std::vector<std::size_t>>> groups;  // ranks -> runs
  for (std::size_t i = 0; i < run_stores.size(); ++i) {
    // One store given twice (run.db ./run.db) counted its samples twice.
    std::error_code ec;
    const bool again = std::any_of(run_stores.begin(), run_stores.begin() + static_cast<long>(i),
                                   [&](const std::string& earlier) {
                                     return fs::equivalent(earlier, run_stores[i], ec);
                                   });
    if (again) {
      readers.push_back(nullptr);
      continue;
    }
    auto reader = trace::TraceReader::open(run_stores[i]);
    if (!reader) return reader.error();
    // A calibration store's sweeps learnt as a run replaced what runs had
    // taught the preset with the sweeps' figures.
    if ((*reader)->meta(kCalibrationMetaKey)) {
      return Error{run_stores[i] +
                   " is a calibration store (sweeps, not a run): fit it with --from-store; "
                   "--learn learns from the stores of runs"};
    }
    // One rank's store of a larger run (RUN.ranks/rank0.db) was learnt as a
    // run of one rank: its collectives, of the whole run's ranks, went into
    // the 1-rank preset.
    if (const auto parallel_text = (*reader)->meta("parallel")) {
      const nlohmann::json parallel = parse_json_text(*parallel_text);
      if (parallel.is_object()) {
        long long planned = 1;
        for (const char* key : {"dp", "tp", "pp"}) {
          if (parallel.contains(key) && parallel[key].is_number_integer())
            planned *= std::max<long long>(1, parallel[key].get<long long>());
        }
        if (planned > (*reader)->world_size()) {
          return Error{run_stores[i] + " holds " + std::to_string((*reader)->world_size()) +
                       " of its run's " + std::to_string(planned) +
                       " ranks (one rank's store?): learn from the run store the ranks were "
                       "merged into, which holds them all"};
        }
      }
    }
    const int ranks = base_cluster.empty() ? std::max(1, (*reader)->world_size()) : 0;
    readers.push_back(std::move(reader).value());
    auto group =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == ranks; });
    if (group == groups.end()) {
      groups.push_back({ranks, {i}});
    } else {
      group->second.push_back(i);
    }
  }
  std::vector<RunRefinement> refinements;
  for (const auto& [ranks_hint, members] : groups) {
    std::vector<const trace::TraceReader*> stores;
    RunRefinement out;
    for (std::size_t i : members) {
      stores.push_back(readers[i].get());
      out.runs.push_back(run_stores[i]);
    }
    auto fit = plan::fit_stores(stores);
    if (!fit) return fit.error();
    if (fit->devices.empty()) return Error{out.runs.front() + ": no configuration to learn from"};
    if (fit->devices.size() > 1 && fit->devices[0].ranks == fit->devices[1].ranks) {
      // Runs of one rank count with different BLAS threads per rank are two
      // machines to the planner, but one preset name: refuse, not overwrite.
      std::string runs;
      for (const std::string& r : out.runs)
        runs += (runs.empty() ? "" : ", ") + r;
      return Error{runs + ": these runs of " + std::to_string(fit->devices.front().ranks) +
                   " ranks ran with different BLAS threads per rank (" +
                   std::to_string(fit->devices[0].threads) + " and " +
                   std::to_string(fit->devices[1].threads) +
                   "): learn from the runs of one thread count at a time"};
    }
    const int ranks = fit->devices.front().ranks;
    const std::string name = base_cluster.empty()
                                 ? plan::calibrated_name(fit->host, fit->engine, ranks, "cluster")
                                 : base_cluster;
    auto base = catalog.cluster(name);
    // The cluster named, or the plan's where the host has none of its GPU.
    std::string chosen = base_cluster;
    std::string plan_note;
    // Only a cluster of the runs' GPU (or this host's copy of it) is theirs
    // to refine.
    const GpuSpec* ran_on = catalog.match_device(fit->device);
    const bool plan_of_their_gpu =
        plan_cluster && plan_cluster->gpu && ran_on &&
        (plan_cluster->gpu->name == ran_on->name ||
         plan_cluster->gpu->name == plan::learnt_name(ran_on->name, fit->host));
    if (!base && base_cluster.empty() && fit->engine != "cpu" && plan_of_their_gpu) {
      base = *plan_cluster;
      chosen = plan_cluster->name;
      plan_note = "no calibration of this host's GPU (no preset " + name +
                  "): refined the current plan's cluster, " + shown_name(*plan_cluster) + " (" +
                  chosen + ")";
    }
    if (!base && base_cluster.empty()) {
      // The reason first: the preset's name is only where it was looked for.
      const std::string host = fit->host.empty() ? std::string("an unnamed host") : fit->host;
      if (fit->engine != "cpu") {
        // One calibration of a host's GPU serves every rank count.
        std::string clusters;
        if (const GpuSpec* gpu = catalog.match_device(fit->device)) {
          for (const std::string& c : catalog.clusters_of(*gpu))
            clusters += (clusters.empty() ? "" : ", ") + c;
          if (!clusters.empty())
            clusters = "; clusters of its " + shown_name(*gpu) + ": " + clusters;
        }
        if (plan_cluster) {
          // The app, which has no --base: its plan's cluster is refined.
          return Error{"no calibration of the GPU of " + host + " to refine (no preset " + name +
                       "), and the current plan's cluster " + plan_cluster->name +
                       " is not of the runs' GPU (" + fit->device +
                       "): calibrate that machine first, or plan on a cluster of its GPU and "
                       "learn again" +
                       clusters};
        }
        return Error{"no calibration of the GPU of " + host + " to refine (no preset " + name +
                     "): run clusterscope calibrate --backend cuda there first, or name the "
                     "cluster the runs ran on (--base" +
                     clusters + ")"};
      }
      return Error{"no calibration of " + std::to_string(ranks) +
                   (ranks == 1 ? " rank" : " ranks") + " on " + host + " to refine (no preset " +
                   name + "): run clusterscope calibrate --ranks " + std::to_string(ranks) +
                   " first, or name a cluster to refine (--base)"};
    }
    if (!base) return base.error();
    // What this host learnt before is refined, not made again from the
    // base: learning twice with --base h200-1 (from a bf16 run, then an fp32
    // one) replaced the copy of the first with one of the datasheet, and
    // what the first runs taught was lost with no word.
    std::vector<std::string> earlier;
    if (!chosen.empty()) {
      const std::string copy = plan::learnt_name(base->name, fit->host);
      if (copy != base->name) {
        if (auto learnt = catalog.cluster(copy)) {
          earlier.push_back(copy + ", this host's copy of " + base->name + ", learnt before");
          base = std::move(learnt);
        }
      }
      // Its GPU and link as last learnt (another cluster of the same GPU
      // refined them since, or the copy is first made now).
      if (base->gpu) {
        if (const GpuSpec* gpu = catalog.find_gpu(plan::learnt_name(base->gpu->name, fit->host));
            gpu && gpu->name != base->gpu->name) {
          earlier.push_back("GPU " + gpu->name + ", this host's copy of " + base->gpu->name +
                            ", learnt before");
          base->gpu = *gpu;
        } else if (gpu) {
          base->gpu = *gpu;
        }
      }
      if (!base->intra_node.name.empty()) {
        if (const Link* link =
                catalog.find_link(plan::learnt_name(base->intra_node.name, fit->host));
            link && link->name != base->intra_node.name) {
          earlier.push_back("link " + link->name + ", this host's copy of " +
                            base->intra_node.name + ", learnt before");
          base->intra_node = *link;
        } else if (link) {
          base->intra_node = *link;
        }
      }
    }
    auto refined = refine_cluster_from(*base, stores, out.runs, std::move(fit));
    if (!refined) return refined.error();
    out = std::move(refined).value();
    if (!plan_note.empty()) out.fit.notes.insert(out.fit.notes.begin(), plan_note);
    if (!earlier.empty()) {
      std::string list;
      for (const std::string& e : earlier)
        list += (list.empty() ? "" : "; ") + e;
      out.fit.notes.push_back("refined what this host learnt before (" + list +
                              "), not the preset " + chosen +
                              " afresh: remove the host's copies from its presets file to learn "
                              "from " +
                              chosen + " again");
    }
    if (save) {
      const fs::path dir = presets_dir_or_default(presets_dir);
      if (dir.empty())
        return Error{"no presets folder to save into: set CLUSTERSCOPE_USER_PRESETS or HOME"};
      out.presets_file =
          presets_file_to_save(dir, out.presets, catalog, out.fit.host, out.fit.engine);
    }
    refinements.push_back(std::move(out));
  }
  // Saved once every group has been learnt: a later group's error used to
  // leave the earlier groups' presets changed, with no word of it.
  if (save) {
    // Every group's names checked first: a clash of the second left the
    // first's file written.
    for (const RunRefinement& r : refinements) {
      if (Status s = check_defined_nowhere_else(r.presets_file, r.presets, catalog); !s)
        return s.error();
    }
    for (const RunRefinement& r : refinements) {
      if (Status s = merge_into_presets_file(r.presets_file, r.presets, catalog); !s)
        return s.error();
    }
  }
  return refinements;
}

Result<NetworkCalibration> calibrate_network(const std::vector<std::string>& logs,
                                             const std::string& name, LinkKind kind,
                                             const std::optional<Link>& intra, int nics_per_node,
                                             std::string_view collective,
                                             std::string_view standard_input) {
  NetworkCalibration out;
  for (const std::string& path : logs) {
    auto log = path == "-" ? plan::parse_nccl_tests(standard_input, "standard input", collective)
                           : plan::read_nccl_tests(path, collective);
    if (!log) return log.error();
    if (log->errors > 0) {
      return Error{log->file + ": nccl-tests found " + std::to_string(log->errors) +
                   " wrong values: its times do not describe a working network"};
    }
    out.logs.push_back(std::move(log).value());
  }
  auto fit = plan::fit_nccl_tests(out.logs, intra, nics_per_node);
  if (!fit) return fit.error();
  out.fit = std::move(fit).value();
  Link& l = out.link;
  l.name = name;
  l.display_name = name + " (nccl-tests)";
  l.kind = kind;
  l.bandwidth = out.fit.port_bandwidth;
  l.latency = out.fit.fit.latency;
  l.efficiency = 1.0;
  std::string files;
  for (const plan::NcclTestsLog& log : out.logs) {
    files += (files.empty() ? "" : ", ") + fs::path(log.file).filename().string();
  }
  char quality[128];
  std::snprintf(quality, sizeof quality, "R² %.3f, RMS error %.1f %%", out.fit.fit.quality.r2,
                100 * out.fit.fit.quality.rms_error);
  l.source = "nccl-tests (" + files + "), " + std::to_string(out.logs.front().ranks) +
             " ranks on " + std::to_string(out.fit.nodes) +
             (out.fit.nodes == 1 ? " host" : " hosts") + ", " + quality +
             "; bandwidth per port, busbw = algbw × the nccl-tests factors";
  return out;
}

namespace {

// The planner's Workload for what the worker trains: `c`'s shape, with the
// worker's fixed choices (its own LM head, biases, layer norm, learned
// positions, AdamW).
Workload trained_workload(const Workload& planned, const worker::GptConfig& c) {
  Workload w = planned;
  w.kind = WorkloadKind::transformer;
  w.name = planned.name + "-worker";
  w.display_name = planned.display_name + " (as the worker trains it)";
  TransformerShape& s = w.transformer;
  s.layers = c.layers;
  s.hidden = c.hidden;
  s.heads = c.heads;
  s.kv_heads = c.heads;
  s.ffn_hidden = c.ffn;
  s.gated_mlp = false;
  s.seq_len = c.seq;
  s.vocab = c.vocab;
  s.tied_embeddings = false;  // the worker's LM head is its own matrix
  s.bias = true;
  s.dropout = false;  // the engines train without dropout
  s.norm = Norm::layernorm;
  s.positions = PositionEmbedding::learned;
  w.optimizer = Optimizer::adamw;
  return w;
}

// The planner's estimate of `plan` (`what` it is, for an error) as a run
// store holds it: the parts, the cluster preset it was made on and how
// (`calibrated`, `notes`), and the plan itself, which the app draws the
// predicted timeline from.
Result<trace::PredictedStep> stored_prediction(const Plan& plan, std::string_view what,
                                               std::string cluster, bool calibrated,
                                               std::vector<std::string> notes) {
  auto estimate = plan::estimate(plan);
  if (!estimate)
    return Error{"the planner cannot estimate " + std::string(what) + ": " + estimate.message()};
  trace::PredictedStep step = plan::predicted_step(*estimate);
  step.cluster = std::move(cluster);
  step.calibrated = calibrated;
  step.workload = shown_name(plan.workload);
  step.notes = std::move(notes);
  step.plan_json = json_text(to_json(plan));
  return step;
}

// The estimate of a plan whose workload is already what the worker trains,
// as the engines run it (naive attention, blocking tensor-parallel
// collectives, the workers' gradient buckets, fp32 gradients; sequence
// parallelism and recomputation as the plan asks).
// `notes` say how the prediction was made so far.
Result<trace::PredictedStep> predict_trained(const PresetCatalog& catalog, Plan plan,
                                             std::string_view backend, int ranks,
                                             std::string_view host,
                                             const std::optional<Cluster>& cluster,
                                             double bucket_kib, int threads,
                                             std::vector<std::string> notes) {
  ParallelPlan& p = plan.parallel;
  p.flash_attention = false;     // the engines compute attention from the full score matrix
  p.async_tp_allreduce = false;  // ... and all-reduce the input gradient before the weight's
  p.vocab_parallel = false;      // ... and keep the embedding and LM head whole on every rank
  p.fp32_attention_scores = true;  // ... with the scores in fp32
  if (backend != "cpu") {          // the CUDA engine runs an interleaved plan as 1F1B
    p.schedule = PipelineSchedule::one_f_one_b;
    p.virtual_stages = 1;
  }
  p.bucket_mib = bucket_kib / 1024;
  // The CUDA engine's FP8 GEMMs cast their inputs for themselves; what
  // backward reads stays 16-bit, and its GEMMs run in BF16.
  plan.precision.fp8.saved_inputs_fp8 = false;
  plan.precision.fp8.backward_fp8 = false;
  // Gradients and optimizer state stay fp32 in both engines.
  plan.precision.fp32_main_grad =
      plan.precision.compute != Precision::fp32 && plan.precision.compute != Precision::tf32;

  const std::string name = plan::calibrated_name(host, backend, ranks, "cluster");
  std::string predicted_on;  // the cluster preset
  bool is_calibrated = false;
  if (cluster) {
    plan.cluster = *cluster;
    predicted_on = cluster->name;
    is_calibrated = cluster->name.starts_with("calibrated-") ||
                    plan::learnt_name(cluster->name, host) == cluster->name;
  } else if (auto calibrated = catalog.cluster(name)) {
    plan.cluster = std::move(calibrated).value();
    predicted_on = name;
    is_calibrated = true;
  } else if (backend == "cpu") {
    return Error{"no calibration of the CPU engine with " + std::to_string(ranks) +
                 (ranks == 1 ? " rank" : " ranks") + " on " + std::string(host) + " (preset " +
                 name + "): run clusterscope calibrate --ranks " + std::to_string(ranks) +
                 " for a prediction"};
  } else if (const GpuSpec* learnt = plan.cluster.gpu ? catalog.find_gpu(plan::learnt_name(
                                                            plan.cluster.gpu->name, host))
                                                      : nullptr) {
    // This host's copy of the plan's GPU (and link), refined by its runs
    // (calibrate --learn --base saves them as <name>-learnt-<host>), in the
    // plan's own layout.
    notes.push_back("no calibration of this GPU: predicted with " + learnt->name +
                    ", learnt from runs on " + std::string(host));
    plan.cluster.gpu = *learnt;
    if (const Link* link = catalog.find_link(plan::learnt_name(plan.cluster.intra_node.name, host)))
      plan.cluster.intra_node = *link;
    predicted_on = plan.cluster.name;
    is_calibrated = true;
  } else {
    predicted_on = plan.cluster.name;
    notes.push_back("no calibration of this GPU: predicted with the datasheet of " +
                    (plan.cluster.gpu ? plan.cluster.gpu->name : std::string("the cluster's GPU")));
  }
  if (backend == "cpu" && threads > 0 && plan.cluster.gpu &&
      plan.cluster.gpu->efficiency.blas_threads > 0 &&
      plan.cluster.gpu->efficiency.blas_threads != threads) {
    // Another thread count computes at another rate, which the preset did
    // not measure (the prediction was 34 % off, and said nothing).
    const int calibrated = plan.cluster.gpu->efficiency.blas_threads;
    notes.push_back(predicted_on + " was calibrated with " + std::to_string(calibrated) +
                    " BLAS threads per rank, the run has " + std::to_string(threads) +
                    ": its compute is predicted at the calibrated rate (clusterscope calibrate "
                    "--ranks " +
                    std::to_string(ranks) + " --threads " + std::to_string(threads) +
                    " measures this layout)");
  }
  if (plan.cluster.total_gpus() < p.world_size()) {
    const int devices = plan.cluster.total_gpus();
    return Error{"cluster " + predicted_on + " has " + std::to_string(devices) +
                 (devices == 1 ? " device" : " devices") + ", the run " +
                 std::to_string(p.world_size()) + " ranks: predict it on a cluster of " +
                 std::to_string(p.world_size()) + " devices or more"};
  }
  // A calibration that did not sweep the run's precision has no rate for it
  // (it read "the CPU has no bf16 path", which it has).
  if (is_calibrated && plan.cluster.gpu && plan.cluster.gpu->peak.of(plan.precision.compute) <= 0) {
    const std::string precision(to_string(plan.precision.compute));
    return Error{predicted_on + " was calibrated without " + precision +
                 ": run clusterscope calibrate --ranks " + std::to_string(ranks) +
                 " --precisions " + precision + " (with the others the runs use) for a prediction"};
  }
  // The plan as predicted (the engines' shape on the calibrated cluster): the
  // app draws its predicted timeline from this one, not from the plan the
  // user asked for (LLaMA-2 7B on H100s under a scaled CPU run).
  auto predicted =
      stored_prediction(plan, "the run", predicted_on, is_calibrated, std::move(notes));
  if (!predicted) return predicted;
  trace::PredictedStep& step = *predicted;
  // The probe every rank measures before its first step, as this cluster
  // predicts it: the comparison tells a changed machine from a wrong model.
  // (The CPU engine runs a tf32 plan in fp32, and probes fp32.)
  const Precision probed = backend == "cpu" && plan.precision.compute == Precision::tf32
                               ? Precision::fp32
                               : plan.precision.compute;
  step.machine_probe = plan::predict_machine_probe(
      plan.cluster, machine_probe_shape(backend, to_string(probed), ranks));
  return predicted;
}

}  // namespace

std::string plan_size_note(const Plan& plan, int ranks) {
  const int gpus = plan.parallel.world_size();
  if (ranks <= 0 || ranks == gpus) return {};
  return "the plan runs on " + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") +
         " (dp x tp x pp), the run has " + std::to_string(ranks) +
         (ranks == 1 ? " rank" : " ranks") +
         ": each rank is held against one of the plan's, which may not do its work";
}

Result<trace::PredictedStep> predict_plan(const Plan& plan, const std::string& source, int ranks) {
  std::vector<std::string> notes;
  if (std::string note = plan_size_note(plan, ranks); !note.empty()) notes.push_back(note);
  return stored_prediction(plan, source, shown_name(plan.cluster), false, std::move(notes));
}

Result<Workload> executed_workload(const Workload& planned, int tp, int pp, int chunks,
                                   std::string* scaled) {
  auto shape = worker_shape_for(planned, tp, pp, chunks);
  if (!shape) return shape.error();
  if (scaled) *scaled = shape->scaled;
  return trained_workload(planned, shape->config);
}

Result<trace::PredictedStep> predict_run(const PresetCatalog& catalog, const Plan& planned,
                                         std::string_view backend, int ranks, std::string_view host,
                                         const std::optional<Cluster>& cluster, int threads) {
  std::vector<std::string> notes;
  std::string scaled;
  auto workload = executed_workload(planned.workload, planned.parallel.tp, planned.parallel.pp,
                                    planned.parallel.virtual_stages, &scaled);
  if (!workload) return workload.error();
  if (!scaled.empty())
    notes.push_back("predicted for the shape the worker trains (" + scaled + ")");
  auto bucket_kib = launch::worker_bucket_kib(planned);  // what plan_run gives the workers
  if (!bucket_kib) return bucket_kib.error();
  Plan plan = planned;
  plan.workload = *workload;
  if (threads <= 0) {  // the worker's default: this machine's cores shared out
    threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, ranks));
  }
  return predict_trained(catalog, plan, backend, ranks, host, cluster, *bucket_kib, threads,
                         std::move(notes));
}

namespace {

// The shape the run trained (meta "worker_shape", which the worker writes).
Result<worker::GptConfig> trained_shape(const trace::TraceReader& store) {
  const std::string where = store.path() + ": meta worker_shape";
  const auto text = store.meta("worker_shape");
  if (!text || text->empty())
    return Error{store.path() + ": no meta worker_shape: the run does not say what it trained"};
  const nlohmann::json shape = parse_json_text(*text);
  if (!shape.is_object()) return Error{where + ": not a JSON object"};
  worker::GptConfig c;
  for (auto [key, field] : {std::pair{"layers", &c.layers}, std::pair{"hidden", &c.hidden},
                            std::pair{"heads", &c.heads}, std::pair{"ffn", &c.ffn},
                            std::pair{"seq", &c.seq}, std::pair{"vocab", &c.vocab}}) {
    if (!shape.contains(key) || !shape[key].is_number_integer() || shape[key].get<int>() <= 0)
      return Error{where + ": /" + key + ": must be a positive integer"};
    *field = shape[key].get<int>();
  }
  return c;
}

// A worker started by hand records no plan: its parallel layout stands in
// for one, on a machine of its GPUs (the datasheet of the preset that
// matches the GPU's name).
Result<Plan> plan_of_worker_run(const PresetCatalog& catalog, const trace::TraceReader& store,
                                const nlohmann::json& parallel, std::string_view backend) {
  Plan plan;
  plan.workload.name = "recorded";
  plan.workload.display_name = "The recorded run's model";
  ParallelPlan& p = plan.parallel;
  p.dp = parallel.value("dp", 1);
  p.tp = parallel.value("tp", 1);
  p.pp = parallel.value("pp", 1);
  p.virtual_stages = parallel.value("virtual_stages", 1);
  if (p.virtual_stages > 1) p.schedule = PipelineSchedule::interleaved;
  p.zero_stage = parallel.value("zero_stage", 0);
  const std::string recompute = parallel.value("recompute", "none");
  if (const auto r = recompute_from_string(recompute)) {
    p.recompute = *r;
  } else {
    return Error{store.path() + ": meta parallel: unknown recompute \"" + recompute + "\""};
  }
  p.micro_batch = parallel.value("micro_batch", 1);
  p.global_batch = p.dp * p.micro_batch * std::max(1, parallel.value("accumulation", 1));
  p.overlap_grad_reduce = parallel.value("overlap", true);  // the worker's --no-overlap
  const std::string precision = parallel.value("precision", "fp32");
  const auto compute = precision_from_string(precision);
  if (!compute)
    return Error{store.path() + ": meta parallel: unknown precision \"" + precision + "\""};
  plan.precision = PrecisionPlan::for_compute(*compute);
  HostInfo host;
  host.hostname = store.meta("host").value_or("");
  if (backend == "cuda") {
    GpuDevice d;
    d.name = store.meta("gpu.0.name").value_or("");
    host.gpus.assign(static_cast<std::size_t>(p.world_size()), d);
  }
  plan.cluster = this_machine_cluster(host, catalog);
  // The store does not record the board's memory: the datasheet's.
  if (plan.cluster.gpu && !host.gpus.empty()) {
    if (const GpuSpec* preset = catalog.match_device(host.gpus.front().name))
      plan.cluster.gpu->memory_bytes = preset->memory_bytes;
  }
  return plan;
}

}  // namespace

std::optional<std::string> why_not_predictable(const trace::TraceReader& store) {
  if (store.meta(kCalibrationMetaKey))
    return "a calibration store, not a training run: nothing to predict";
  const auto parallel_text = store.meta("parallel");
  if (!parallel_text || parallel_text->empty()) {
    return "not a training run of the ClusterScope engines (it holds no plan to predict again: "
           "an imported trace or a sweep)";
  }
  return std::nullopt;
}

std::optional<std::string> why_no_plan_holds(const trace::TraceReader& store) {
  // Held against a plan, its sweeps of every configuration read as one step
  // of the plan's (the plan's step 99 % short of them), where
  // --predict-again refused it.
  if (store.meta(kCalibrationMetaKey))
    return "a calibration store (the sweeps of its configurations), not a run of a plan: no plan "
           "can be held against it";
  return std::nullopt;
}

Result<trace::PredictedStep> predict_recorded_run(const PresetCatalog& catalog,
                                                  const trace::TraceReader& store,
                                                  const std::string& cluster_name) {
  if (auto why = why_not_predictable(store)) return Error{store.path() + ": " + *why};
  const auto parallel_text = store.meta("parallel");
  const nlohmann::json parallel = parse_json_text(*parallel_text);
  if (!parallel.is_object()) return Error{store.path() + ": meta parallel: not a JSON object"};
  std::string backend;
  try {
    backend = parallel.value("backend", "cpu");
  } catch (const nlohmann::json::exception& e) {
    return Error{store.path() + ": meta parallel: " + e.what()};
  }
  auto shape = trained_shape(store);
  if (!shape) return shape.error();
  Plan plan;
  const auto plan_text = store.meta("plan_json");
  if (plan_text && !plan_text->empty()) {
    const nlohmann::json j = parse_json_text(*plan_text);
    if (j.is_discarded()) return Error{store.path() + ": meta plan_json: not valid JSON"};
    auto parsed = plan_from_json(j, store.path() + ": meta plan_json", &catalog);
    if (!parsed) return parsed.error();
    plan = std::move(parsed).value();
  } else {
    try {
      auto made = plan_of_worker_run(catalog, store, parallel, backend);
      if (!made) return made.error();
      plan = std::move(made).value();
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
      return Error{store.path() + ": meta parallel: " + e.what()};
    }
  }
  // The bucket the workers had: recorded by the worker; else what plan_run
  // gave them for the recorded plan; else the worker's default, 1 MiB.
  double bucket_kib = 1024;
  if (parallel.contains("bucket_kib") && parallel["bucket_kib"].is_number() &&
      parallel["bucket_kib"].get<double>() > 0) {
    bucket_kib = parallel["bucket_kib"].get<double>();
  } else if (plan_text && !plan_text->empty()) {
    if (auto planned = launch::worker_bucket_kib(plan)) bucket_kib = *planned;
  }
  plan.workload = trained_workload(plan.workload, *shape);
  int ranks = plan.parallel.world_size();
  if (store.meta("world_size")) ranks = store.world_size();
  std::optional<Cluster> cluster;
  if (!cluster_name.empty()) {
    auto named = catalog.cluster(cluster_name);
    if (!named) return Error{"--cluster: " + named.message()};
    cluster = std::move(named).value();
  }
  const int threads = parallel.contains("threads") && parallel["threads"].is_number_integer()
                          ? parallel["threads"].get<int>()
                          : 0;
  return predict_trained(catalog, plan, backend, ranks, store.meta("host").value_or(""), cluster,
                         bucket_kib, threads, {});
}

void add_prediction(launch::RunSpec& spec, std::vector<std::string>& notes,
                    const PresetCatalog& catalog, const Plan& plan, std::string_view backend,
                    int threads) {
  auto prediction =
      predict_run(catalog, plan, backend, spec.ranks, probe_host().hostname, std::nullopt, threads);
  if (!prediction) {
    notes.push_back("no prediction in the run store: " + prediction.message());
    return;
  }
  spec.extra_meta.emplace_back(trace::kPredictedStepMetaKey,
                               json_text(trace::to_json(*prediction)));
  notes.push_back("the planner predicts " + format_seconds(prediction->step_seconds) +
                  " per step on " + prediction->cluster.value_or("?") +
                  (prediction->calibrated.value_or(false) ? " (calibrated)" : ""));
  for (const std::string& n : prediction->notes.value_or(std::vector<std::string>{}))
    notes.push_back("prediction: " + n);
}

void note_plan_problems(const Plan& plan, std::vector<std::string>& notes) {
  if (plan.cluster.total_gpus() == 0) return;
  const std::vector<Problem> problems = plan::check_plan(plan);
  for (const Problem& p : problems) {
    notes.push_back("the plan does not hold on its cluster (" + shown_name(plan.cluster) +
                    "): " + p.pointer + ": " + p.message + "; the engines run it here as they can");
  }
}

}  // namespace cs::calib
