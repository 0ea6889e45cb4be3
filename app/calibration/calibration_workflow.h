#pragma once
// The calibration loop as the CLI and the GUI run it (Qt-free): calibrate
// this machine (record the sweeps, fit them, save presets), learn from a
// run store, read nccl-tests logs, and predict a run before it starts so
// that its store holds the plan's estimate.
//
// For the GUI: call calibrate_machine() on a worker thread; `progress` is
// called on that thread (post it to the GUI thread), and setting `stop`'s
// cancel (or kill) stops the sweep running (the call then returns an error
// saying so). The fit and the presets come back as values; the presets file is written to
// the user's presets folder unless `save` is off, and the catalog reloads
// with PresetCatalog::load_default().

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/plans.h"
#include "core/predicted_step.h"
#include "core/presets.h"
#include "core/result.h"
#include "planners/calibration.h"
#include "planners/nccl_tests.h"
#include "profiler/calibration_run.h"
#include "profiler/launcher.h"

namespace cs::trace {
class TraceReader;
struct StepParts;
}

namespace cs::calib {

// ---- calibrating this machine

struct MachineCalibrationOptions {
  launch::CalibrationRunOptions run;  // what to sweep; run.store is the calibration store
  // The GPU's datasheet (CUDA engine): efficiencies are fitted against its
  // peaks. Empty for the CPU engine.
  std::optional<GpuSpec> datasheet;
  bool save = true;                   // write the presets file
  std::filesystem::path presets_dir;  // where (default: user_presets_dir())
  // CPU engine: after the sweeps, train the reference model a few steps on
  // each rank count and learn from those runs (see ReferenceRun).
  bool reference_runs = true;
  int reference_steps = 12;
};

// A short training run of the calibration's reference model (a GPT of its
// own shape, not one the user plans) on one rank count, made right after
// the sweeps and learnt from before the presets are saved. The sweeps time
// each operation alone, repeated on warm caches and with every rank doing
// the same; training interleaves them, and its operations meet operands
// that other operations and ranks just used. On the development VM the
// sweeps alone left 2-rank plans 10-17 % slower than predicted in every
// calibration; learning from runs closed that gap (docs/calibration.md).
// The run's store is kept beside the calibration store.
struct ReferenceLayout {
  int dp = 1, tp = 1;
  int micro_batch = 2;  // sequences; a step is two per data-parallel replica
};
std::string to_string(const ReferenceLayout& layout);  // "dp 2 x tp 2, micro-batch 1"

struct ReferenceRun {
  ReferenceLayout layout;
  int ranks = 1;
  std::string store;
  double measured_step_s = 0;     // the critical rank's median step
  double predicted_sweeps_s = 0;  // by the sweeps' presets
  double predicted_s = 0;         // by the presets saved (after learning from the reference runs)
  // The machine probe before the first step against the sweeps' model
  // (measured / predicted; 0 when the run has none).
  double probe_gemm_ratio = 0, probe_loop_ratio = 0;
  bool shares_cores = false;  // more compute threads than cores: the probe is not read
  bool retried = false;  // run twice (far from the prediction, or the probe); one kept
  bool learnt = false;   // false: its probe found the machine not as swept
};

struct MachineCalibration {
  launch::CalibrationRecord record;
  plan::Calibration fit;
  PresetBundle presets;
  std::filesystem::path presets_file;  // written, or empty
  std::vector<ReferenceRun> reference_runs;
  double reference_seconds = 0;  // the reference runs' wall time (record.seconds: the sweeps')
  std::vector<plan::Calibration> reference_fits;  // what each rank count's reference runs showed
  std::vector<std::string> notes;  // what the reference runs could not do, and why
};

// A reference run is run once more when it is more than 30 % from the
// sweeps' prediction either way (far_from_sweeps), or when its machine
// probe found the machine not as the sweeps measured it: its GEMM or loop
// probe more than 40 % from their model (machine_moved; another speed,
// other work; not read where ranks share cores). A run whose probe still
// says so is not learnt from.
bool far_from_sweeps(const ReferenceRun& run);
bool machine_moved(const ReferenceRun& run);

// The share of a core at which the planner's step (`step_at`, shrinking as
// the share grows) is `measured`: bisection between 0.05 and 1, the ends
// held. Ranks sharing cores get less than their share where they meet in
// collectives, whose waits poll (4 ranks on 2 cores: 0.43-0.46 fitted on
// the development VM, against 0.5); the calibration fits
// GpuEfficiency::collective_core_share to its reference runs of those ranks
// with it, each run's share, averaged.
double share_for_step(const std::function<double(double share)>& step_at, double measured);

// Ranks sharing cores: of the waiting a prediction (meta "predicted_step",
// made with GpuEfficiency::shared_wait_in_transfer 0) has in collectives,
// the part the run measured in its transfers beyond the predicted ones
// (tensor- and data-parallel), between 0 and 1; none when the prediction
// has no waiting. The calibration fits shared_wait_in_transfer to its
// reference runs of ranks sharing cores with it, averaged (0.18-0.38 in
// the eight calibrations QQ-XX of docs/calibration.md, 4 ranks on 2 cores).
std::optional<double> wait_in_transfer(const trace::PredictedStep& predicted,
                                       const trace::StepParts& measured);

// The reference model's shape (ReferenceRun), and the layouts trained on
// `ranks` ranks: data parallel over all of them in micro-batches of 2, and
// then with ranks even tensor parallel 2 (both kinds of collective a plan
// meets), else the same in micro-batches of 1.
Workload reference_workload();
std::vector<ReferenceLayout> reference_layouts(int ranks);

Result<MachineCalibration> calibrate_machine(
    const MachineCalibrationOptions& options,
    const std::function<void(const launch::CalibrationProgress&)>& progress = {},
    const launch::StopRequest* stop = nullptr);

// Fits a calibration store already recorded (or imported) and makes its presets.
Result<MachineCalibration> fit_calibration_store(const std::string& store,
                                                 const std::optional<GpuSpec>& datasheet);

// Whether `store` opens as a calibration store (its sweeps), not a run's.
bool is_calibration_store(const std::string& store);

// The datasheet of the GPU a calibration store's sweeps ran on, looked up in
// `catalog`: none for the CPU engine's (or a store that does not open or say,
// which the fit then names); an error where no GPU preset names the device.
Result<std::optional<GpuSpec>> datasheet_of_calibration_store(const std::string& store,
                                                              const PresetCatalog& catalog);

// What clusterscope calibrate --from-store does: the store fitted with its
// own datasheet, its presets merged into this host's file in `presets_dir`.
Result<MachineCalibration> fit_and_save_calibration_store(const std::string& store,
                                                          const PresetCatalog& catalog,
                                                          const std::filesystem::path& presets_dir);

// The presets file of one host and engine in `dir`: calibrated-<host>-<engine>.json.
std::filesystem::path presets_file_for(const std::filesystem::path& dir, std::string_view host,
                                       std::string_view engine);

// Where presets of this host and engine are saved in `dir`: the user file
// that already defines one of the bundle's clusters (a file the user
// renamed, say), else presets_file_for. A second file defining the same
// name would make the whole folder unreadable.
std::filesystem::path presets_file_to_save(const std::filesystem::path& dir,
                                           const PresetBundle& bundle,
                                           const PresetCatalog& catalog, std::string_view host,
                                           std::string_view engine);

// Before minutes of measuring: makes the presets folder `dir` where it is
// missing and checks that it can be written ("DIR: the calibrated presets
// cannot be saved there (Permission denied)"). `made` gets the folders it
// made, deepest first, for the caller to remove again when nothing is saved
// in them; on an error those are removed already.
Status prepare_presets_dir(const std::filesystem::path& dir,
                           std::vector<std::filesystem::path>* made = nullptr);

// Adds (replacing entries of the same name) `bundle` to the presets file
// `file`, keeping what else it holds. Refused, with the file named, where
// another file of its folder defines one of the bundle's names.
Status merge_into_presets_file(const std::filesystem::path& file, const PresetBundle& bundle,
                               const PresetCatalog& catalog);

// ---- learning from a run

struct RunRefinement {
  std::vector<std::string> runs;       // the run stores learnt from together
  plan::Calibration fit;               // what the runs' kernels and collectives show
  std::string base_cluster;            // the preset refined
  PresetBundle presets;                // the refined device, link and cluster
  std::filesystem::path presets_file;  // written, or empty
};

// Fits the run stores and refines, per rank count, this machine's
// calibrated cluster for it (or `base_cluster` with every run): the runs of
// one rank count are fitted together (their GEMMs, loops and collectives
// pooled), so runs of two model sizes teach one fit rather than the later
// overwriting the earlier. A base that is not the runs' host's own (a
// shipped cluster, another host's) is saved as a copy named for the host
// (plan::learnt_name: hgx-h200-8-learnt-<host>, its GPU h200-learnt-<host>),
// so that the presets it came from stay. Saves into the presets file of the
// host unless `save` is off. One refinement per cluster refined, in the
// order of each one's first run. `plan_cluster`, where given, is refined
// for GPU runs of a host with no calibration of its GPU, as if named as
// `base_cluster` (the app's current plan's cluster: it has no --base), with
// a note saying so; without it those runs are an error that asks for one.
Result<std::vector<RunRefinement>> refine_from_runs(
    const std::vector<std::string>& run_stores, const PresetCatalog& catalog,
    const std::string& base_cluster, bool save, const std::filesystem::path& presets_dir = {},
    const std::optional<Cluster>& plan_cluster = std::nullopt);

// Refines `base` (its device and link) by what the run stores show, fitted
// together, without saving: refine_from_runs for a cluster at hand (the
// calibration learning from its reference runs before it saves).
Result<RunRefinement> refine_cluster(const Cluster& base,
                                     const std::vector<const trace::TraceReader*>& stores,
                                     const std::vector<std::string>& runs);

// ---- nccl-tests

struct NetworkCalibration {
  std::vector<plan::NcclTestsLog> logs;
  plan::NetworkFit fit;
  Link link;  // the fitted tier as a link preset
};
// `name` names the link preset; `kind` its type; `intra` the link inside a
// node (needed for logs that span hosts). A log named "-" is
// `standard_input`, the text read from it (named "standard input").
Result<NetworkCalibration> calibrate_network(const std::vector<std::string>& logs,
                                             const std::string& name, LinkKind kind,
                                             const std::optional<Link>& intra, int nics_per_node,
                                             std::string_view collective = {},
                                             std::string_view standard_input = {});

// ---- predicting a run

// The workload a worker trains for a plan (what clusterscope-worker --plan
// does: scaled to the machine, its layers a multiple of pp x `chunks`, the
// plan's virtual stages), as the planner's Workload.
Result<Workload> executed_workload(const Workload& planned, int tp, int pp, int chunks,
                                   std::string* scaled);

// The planner's estimate for a run about to start: the plan as the engines
// run it (the worker's scaled shape, naive attention, the gradient bucket
// plan_run gives the workers, fp32 gradients, no recomputation or sequence
// parallelism) and the machine probe's two operations, on this
// machine's calibrated cluster for `ranks` ranks (the CPU engine) or its
// calibrated GPU (CUDA, else the plan's cluster with datasheet figures). An
// error says why there is none (no calibration for the CPU engine).
// `cluster`, when given, is used instead (a preset the user names). The
// result is what the run store's meta "predicted_step" holds, with the
// cluster predicted on, whether it was calibrated, and notes on how.
// `threads`: the BLAS threads per rank of a CPU-engine run (0: the worker's
// default, this machine's cores shared out); a count other than the
// calibration's is said in the notes.
Result<trace::PredictedStep> predict_run(const PresetCatalog& catalog, const Plan& plan,
                                         std::string_view backend, int ranks, std::string_view host,
                                         const std::optional<Cluster>& cluster = std::nullopt,
                                         int threads = 0);

// The planner's prediction of `plan` as it stands (no engine's shape, no
// calibration, no machine probe): what a run of a program of the user's own
// (a profiled PyTorch job, an imported trace) is held against when the user
// names the plan it ran (`trace stats --plan`, `profile --plan`). `source`
// names the plan in errors ("plan.json"). `ranks`, the run's rank count
// when known (0: not), against the plan's GPU count: a note when they differ.
Result<trace::PredictedStep> predict_plan(const Plan& plan, const std::string& source,
                                          int ranks = 0);

// Said where a run of `ranks` ranks is held against a plan of another GPU
// count ("the plan runs on 8 GPUs, the run has 2 ranks: ..."); "" when they
// agree.
std::string plan_size_note(const Plan& plan, int ranks);

// Why no prediction can be made of the run in `store`, whatever the presets:
// a calibration store, or a trace that holds no plan of the engines (an
// imported one); nothing when predict_recorded_run can try.
std::optional<std::string> why_not_predictable(const trace::TraceReader& store);

// Why no plan of the user's can be held against `store` (trace stats --plan,
// the app's Predict with the current plan): a calibration store, whose
// configurations ran sweeps, not the steps of a plan. Nothing when one can
// (a run, a profile, an import).
std::optional<std::string> why_no_plan_holds(const trace::TraceReader& store);

// The prediction of a recorded run made now, with the presets at hand, as
// predict_run makes it for a run about to start: the run's plan (meta
// "plan_json"; a worker started by hand leaves only "parallel" and
// "worker_shape", and its GPU's name), its backend, rank count and host.
// `cluster_name` names the cluster preset to predict on instead. For a run
// recorded before its machine was calibrated, or after learning from runs.
Result<trace::PredictedStep> predict_recorded_run(const PresetCatalog& catalog,
                                                  const trace::TraceReader& store,
                                                  const std::string& cluster_name = {});

// Puts this machine's prediction of a local run into its store (meta
// "predicted_step"), as `clusterscope run` and the app's runs do, and says
// in `notes` what was predicted, or why nothing was.
void add_prediction(launch::RunSpec& spec, std::vector<std::string>& notes,
                    const PresetCatalog& catalog, const Plan& plan, std::string_view backend,
                    int threads = 0);

// Says in `notes` each rule the plan breaks on its own cluster (as
// `clusterscope validate` finds them): the engines run the plan as they can
// all the same (they scale the model to their size), but neither the plan
// nor its prediction holds there. Nothing for a cluster without GPUs (this
// machine), which a plan's GPU rules cannot apply to.
void note_plan_problems(const Plan& plan, std::vector<std::string>& notes);

}  // namespace cs::calib
