#pragma once
// What a run's time went to, per rank and per step, with the definitions of
// Holistic Trace Analysis (HTA) so the numbers can be cross-checked:
//
// - The device events of a rank are its kernels, copies, sets, collectives
//   and point-to-point transfers on its GPU streams (for the CPU engine, which
//   has no GPU stream: on its compute and communication lanes, with the
//   compute thread's waits for a collective as synchronization). They are
//   classed by category: compute, communication, memory, synchronization,
//   other (HTA: communication = name starts with "nccl", memory =
//   Memcpy/Memset, compute = the rest; importers and tracers set categories
//   that way).
// - span = last device end − first device start; busy = the union of all
//   device events; idle = span − busy; compute = the union of compute events;
//   communication = the union of communication events; overlap = the time a
//   communication and a compute event both run; exposed communication =
//   communication − overlap; overlap % = overlap / communication.
// - Idle gaps (no device event at all) are split: host wait when the next
//   device event was launched (its API call, matched by correlation id)
//   after the previous device activity ended; kernel wait when the gap is
//   shorter than `kernel_wait_ns` (HTA's consecutive_kernel_delay, 30 ns);
//   other otherwise.
// - Per step: the same quantities inside each step's time window (steps
//   table rows, or else step events), all steps included (HTA drops the last
//   ProfilerStep by default; this does not).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gemm_rates.h"
#include "core/machine_probe.h"
#include "core/predicted_step.h"
#include "core/result.h"
#include "core/trace_reader.h"
#include "core/trace_types.h"

namespace cs::trace {

struct Breakdown {
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  std::int64_t span_ns = 0;
  std::int64_t busy_ns = 0;
  std::int64_t compute_ns = 0;
  std::int64_t communication_ns = 0;
  std::int64_t overlap_ns = 0;  // communication under compute
  std::int64_t exposed_communication_ns = 0;
  std::int64_t memory_ns = 0;
  std::int64_t exposed_memory_ns = 0;           // memory under neither compute nor communication
  std::int64_t exposed_synchronization_ns = 0;  // synchronization events under none of the above
  std::int64_t other_busy_ns = 0;               // busy time left: other device work
  std::int64_t idle_ns = 0;
  std::int64_t idle_host_wait_ns = 0;
  std::int64_t idle_kernel_wait_ns = 0;
  std::int64_t idle_other_ns = 0;
  std::int64_t events = 0;  // device events that start in the window

  double overlap_percent() const {
    return communication_ns > 0
               ? 100.0 * static_cast<double>(overlap_ns) / static_cast<double>(communication_ns)
               : 0.0;
  }
  // HTA's non-compute time: span − compute − idle.
  std::int64_t non_compute_ns() const { return span_ns - compute_ns - idle_ns; }
};

struct StepBreakdown {
  std::int32_t step = 0;
  Breakdown breakdown;  // window = the step's [start, end)
};

struct KernelStats {
  std::string name;
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  double mean_ns = 0;
  double median_ns = 0;
  double stddev_ns =
      0;             // the sample standard deviation (n - 1), as Nsight Systems' StdDev; 0 for one
  double share = 0;  // of the summed duration of all device events summarised (0..1)
};

// One kind of device copy or set, all ranks together (Nsight Systems'
// cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum; HTA's memory bandwidth
// summary). time.share: of all copies' and sets' time.
struct MemoryOpStats {
  KernelStats time;
  std::int64_t total_bytes = 0;
  std::int64_t min_bytes = 0;
  std::int64_t max_bytes = 0;
  double mean_bytes = 0;
  double median_bytes = 0;
  double throughput_gbps = 0;  // total bytes / total time, in GB/s (10^9 bytes per second)
};

struct CollectiveStats {
  Collective collective = Collective::none;
  std::string name;  // the collective ("all_reduce") or, when its type is unknown, the kernel name
  DataType dtype = DataType::none;
  std::int64_t bytes = 0;  // the nccl-tests "size" (see docs/trace-schema.md); 0 = unknown
  // n: the communicator's size (its group size, else the world size); 2 for
  // a send or receive, which joins a pair whatever its communicator.
  std::int32_t ranks = 0;
  std::int64_t count = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  double mean_ns = 0;
  double median_ns = 0;
  double stddev_ns = 0;   // as KernelStats'
  double algbw_gbps = 0;  // bytes / mean time, in GB/s (10^9 bytes per second)
  double busbw_gbps = 0;  // algbw × bus_bandwidth_factor (trace_types.h)
  // The mean above includes the time a rank waited for its peers to join.
  // Run-wide, each call is matched across the ranks that made it and timed
  // by its transfer (shortest_of_each_call: the rank that joined last, which
  // waited for no one), as nccl-tests times a collective after a barrier:
  // the transfers' median, and the bus bandwidth it gives. 0 where nothing
  // matched (a single rank, counts that differ, point-to-point, no size),
  // and in one rank's stats.
  double transfer_median_ns = 0;
  double transfer_busbw_gbps = 0;
};

// HTA's CUDA kernel launch statistics: each kernel (NCCL's included) and
// each asynchronous copy or memset (cudaMemcpyAsync, cudaMemsetAsync) paired
// with the runtime or driver call that launched it (their correlation id).
// Synchronous copies and sets (cudaMemcpy, cudaMemset) are not launches:
// their call lasts until the copy ends. They are only counted, apart.
// The launch delay is the device event's start less the call's end.
struct LaunchStats {
  std::int64_t launches = 0;              // kernels and asynchronous copies paired with their call
  std::int64_t synchronous_left_out = 0;  // synchronous copies and sets with a call, left out
  std::int64_t short_kernels = 0;     // ran shorter on the GPU than their call took on the host
  std::int64_t runtime_outliers = 0;  // calls longer than AnalysisOptions::runtime_cutoff_ns
  std::int64_t delay_outliers = 0;    // delays longer than AnalysisOptions::launch_delay_cutoff_ns
  double call_median_ns = 0, call_p95_ns = 0;
  double delay_median_ns = 0, delay_p95_ns = 0, delay_max_ns = 0;
};

// HTA's idle time breakdown per stream (get_idle_time_breakdown): the gaps
// between one stream's consecutive device events, each by its cause as the
// rank's idle gaps are: host wait when the next event's launching call
// started after the stream's previous event ended, kernel wait when shorter
// than kernel_wait_ns, other otherwise. A rank's idle time is when no stream
// works; a stream's is when it does not, so a stream that waits for another
// shows its wait here. Over the events of the analysed range, as the kernel
// table.
struct StreamIdle {
  LaneId lane;
  std::string name;          // the stream's (lane's) name
  std::int64_t events = 0;   // device events on it
  std::int64_t span_ns = 0;  // its first event's start to its last event's end
  std::int64_t busy_ns = 0;  // the union of its events
  std::int64_t idle_host_wait_ns = 0;
  std::int64_t idle_kernel_wait_ns = 0;
  std::int64_t idle_other_ns = 0;
  std::int64_t idle_ns() const { return idle_host_wait_ns + idle_kernel_wait_ns + idle_other_ns; }
  // HTA's queue length: the operations launched on the stream (from their
  // call's start) that have not started yet. Over its events with a
  // launching call (0 without: the CPU engine, traces without runtime calls);
  // the mean is the queue's time average over the stream's span.
  std::int64_t launched = 0;
  std::int64_t queue_max = 0;
  double queue_mean = 0;
};

struct RankAnalysis {
  std::int32_t rank = 0;
  bool gpu = true;  // false: the CPU engine's lanes stood in for GPU streams
  Breakdown total;
  LaunchStats launches;  // empty (0 launches) without runtime calls and GPU streams
  std::vector<StreamIdle> streams;  // by lane id; the CPU engine's compute and communication lanes
  std::vector<StepBreakdown> steps;
  std::vector<KernelStats> kernels;          // by total time, descending
  std::vector<CollectiveStats> collectives;  // by total time, descending
  // This rank's share of the run's tables of the same names (RunAnalysis).
  std::vector<KernelStats> api_calls;
  std::vector<MemoryOpStats> memory_ops;
  std::vector<KernelStats> annotations;
};

struct RankStraggler {
  std::int32_t rank = 0;
  double step_ns = 0;            // median step time; 0 when the rank has no steps
  double step_excess = 0;        // step_ns / (median over ranks; of two, the faster) − 1
  double late_start_ns = 0;      // mean lateness of its collective starts against the median rank
  std::int64_t collectives = 0;  // collectives compared (sends and receives are not)
  bool straggler = false;
  std::string reason;
};

struct StragglerReport {
  std::vector<RankStraggler> ranks;
  std::vector<std::int32_t> stragglers;
};

struct PredictedVsMeasured {
  std::string name;
  double predicted_s = 0;
  std::optional<double> measured_s;  // empty when nothing in the trace measures it
};

// The planner's memory per device against what the run's counters sampled:
// the greatest value over the ranks (and devices).
struct MemoryVsMeasured {
  // "allocated": what the process allocated itself, the engines' "memory in
  // use (bytes)" (a PyTorch profile's "GPU N memory allocated (bytes)");
  // then its parts (kMemoryPartNames' keys: "weights", ...), the engines'
  // "memory in use: weights (bytes)" and the like, of the rank whose
  // "allocated" was measured; "device": the device memory in use, the CUDA
  // tracer's "GPU N memory used" (cudaMemGetInfo: the whole device).
  std::string name;
  bool part = false;  // one of allocated's parts
  double predicted_bytes = 0;
  std::optional<double> measured_bytes;  // empty when the run sampled no such counter
  std::string counter;                   // the counter measured
  std::int32_t rank = -1;                // whose was the greatest
  // With a pipeline, "first stage" and "last stage": what the ranks of that
  // stage allocated (as "allocated"), against the planner's figure for it.
  std::int32_t stage = -1;  // the stage's index; -1 on every other row
  // Shown under "allocated" (its parts and its stages).
  bool under_allocated() const { return part || stage >= 0; }
};

// How `trace stats` and the report name a memory row: "allocated by the
// process", "in use on the device", a part's label ("weights") or a stage's
// ("stage 0 (first)"; the text table indents both under the whole).
std::string memory_row_label(const MemoryVsMeasured& row);
// What measured it: "\"memory in use (bytes)\" of rank 0", or "no counter
// sampled it".
std::string memory_row_source(const MemoryVsMeasured& row);
// The note under the rows: what each figure counts.
inline constexpr const char* kMemoryRowsNote =
    "allocated: model state, activations, workspaces and pipeline buffers; on the device also "
    "the CUDA context, the libraries' workspaces, NCCL's channels and the allocator's slack "
    "(the device's counter counts every process on it)";

// The planner's estimate (meta "predicted_step") against the mean measured
// step (each rank's warm-up steps left out: warm_up_steps).
// Measured categories: compute = compute; communication = exposed
// communication; memory = exposed memory; synchronization = exposed
// synchronization; other = other device work + idle; they add up to the
// step. A part is measured by the annotation ranges named exactly like it.
struct PredictionComparison {
  double predicted_step_s = 0;
  double measured_step_s = 0;
  int steps = 0;  // steps averaged (over all ranks); 0: the whole trace counted as one
  int warm_up_steps = 0;  // steps left out as warm-up (all ranks together)
  std::vector<PredictedVsMeasured> categories;
  std::vector<PredictedVsMeasured> parts;
  // The prediction's "breakdown" (compute per operation kind, communication
  // per kind, bubble, optimizer, idle) against measure_rank_parts() of the
  // critical rank: one of the stage the planner timed (the last stage, which
  // computes the loss, when the prediction has a loss part), the one with
  // the most compute. Its median step and parts; empty when the prediction
  // has none.
  std::vector<PredictedVsMeasured> breakdown;
  // The prediction's memory against the counters; empty when the prediction
  // has none (stores written before it was recorded).
  std::vector<MemoryVsMeasured> memory;
  std::string memory_note;  // why there are no memory rows, when the prediction's is unreadable
  std::int32_t critical_rank = -1;
  double measured_step_median_s = 0;  // the critical rank's median step
  int critical_steps = 0;             // ... over this many steps
  int critical_warm_up = 0;           // ... after its first this many, the warm-up
  int largest = -1;                   // index in breakdown of the largest disagreement
  // "the plan said 1.8 s per step, the run took 2.3 s, and 0.4 s of the
  // difference is exposed data-parallel communication, which the model
  // under-rated"; empty without a breakdown.
  std::string verdict;
  // The run's machine probe (meta "machine_probe") against the one the
  // prediction holds: how far the machine stood from the one predicted.
  std::optional<MachineDrift> machine;
  std::string machine_note;  // why there is no `machine` when one side has a probe
};

// The parts of a step before "idle", in the order StepParts lists them.
// clang-format off
inline constexpr std::array<std::string_view, 14> kStepPartNames = {
    "compute.gemm",        "compute.attention", "compute.norm",        "compute.activation",
    "compute.elementwise", "compute.loss",      "optimizer",           "descheduled",
    "communication.tp",    "communication.dp",  "communication.pp",    "communication.other",
    "wait",                "bubble"};
// clang-format on

// What each part of a step took, measured from a store's events, on the
// critical rank (of the stage the planner times, the pipeline's pacing one;
// among its ranks, the one with the most compute), as the median over its steps past the warm-up
// (warm_up_steps). Parts (seconds per step):
// - "compute.<kind>": compute events by operation_kind(); on a rank with
//   forward/backward annotations, kernels of no known kind outside them are
//   "optimizer" work (zeroing, averaging, casting around the update);
// - "optimizer": the optimizer's kernels (adamw, gradient norm) and the above;
// - "descheduled": the time within those ops their thread was off CPU, where
//   the CPU engine measured it (kOffCpuCounter: ranks sharing cores), taken
//   out of the ops' own parts;
// - "communication.tp" / ".dp" / ".pp" / ".other": communication (and waits
//   on it, "wait dp") of each group not under compute, by the group its name
//   starts with ("tp all-reduce", "wait dp"; point-to-point is pp); of a
//   collective, only its transfer (shortest_of_each_call), the end of it;
// - "wait": the rest of the collectives, at their start: a rank that came
//   early waiting for the others (Scalasca's "wait at N x N"), not under
//   compute;
// - "bubble": the part of pipeline receives beyond the transfer itself (a
//   receive takes at least its fastest time; the rest is waiting for the
//   other stage);
// - "idle": the step's time none of the above covers.
struct StepParts {
  std::int32_t rank = -1;
  int steps = 0;    // steps measured
  int warm_up = 0;  // the steps before them, left out (warm_up_steps)
  double step_s = 0;
  std::vector<std::pair<std::string, double>> parts;  // in the order above
  double part(std::string_view name) const;
  double compute() const;  // the compute parts, the optimizer and their time descheduled
};
Result<StepParts> measure_step_parts(const TraceReader& reader);
// A rank's CPU-engine ops' time off CPU (kOffCpuCounter), in ns by the op's
// end time: the one reading of those samples; empty where none were taken.
Result<std::map<std::int64_t, std::int64_t>> off_cpu_by_op_end(const TraceReader& reader,
                                                               std::int32_t rank);
// Each rank's parts, by rank.
Result<std::vector<StepParts>> measure_rank_parts(const TraceReader& reader);

// Collective calls matched across ranks: the n-th call of one collective
// (one name, size, operation, group size and communicator) on each rank that made it is
// one call, and its shortest duration is the rank that arrived last, which
// waited for no one: the transfer. The others' durations add the time they
// waited for it (in a training step, for the slowest rank's compute).
// `durations[r][n]` is rank r's n-th call; returns each n's shortest.
std::vector<double> shortest_of_each_call(const std::vector<std::vector<double>>& durations);

// Which communicator ran a rank's collective, where the run says: the
// engines name their calls by group ("dp all-reduce", "tp all-gather") and
// record their degrees (meta "parallel"), so a "dp" call of rank 0 and one of
// rank 2 in a dp 2 x pp 2 run are two data-parallel groups' calls, not one
// call. Calls are matched across ranks, and timed by their transfer, only
// within one communicator. 0 (one pool, as for an import) where unknown.
class Communicators {
 public:
  static Communicators of(const TraceReader& reader);
  int of_call(std::int32_t rank, std::string_view name) const;

 private:
  int dp_ = 0, tp_ = 0, pp_ = 0;  // 0: the run recorded no degrees
};

// A training step's time window: on one rank, or across the ranks.
struct StepWindow {
  std::int32_t step = 0;
  std::int64_t start = 0;  // ns
  std::int64_t end = 0;    // ns
};
// Each step of the run across its ranks, from its earliest start to its
// latest end, in time order: the steps table, or else each rank's step
// events (a step without a number is its index on its rank). Read when
// asked: a store still being written gains steps.
Result<std::vector<StepWindow>> job_step_windows(const TraceReader& reader);

// How many of a rank's first steps (their lengths in order) are warm-up,
// left out of what a run measured: with three steps or more, the first
// (allocation, library initialisation, cuBLAS's heuristics: on a GPU a
// hundred times a later step), and after it every step still longer than
// 1.5 times the median of the run's second half, up to half the steps.
// CPU-engine runs of 2 and 4 ranks on a 2-core VM took 1.5-3.8 times their
// steady step in their second to fifth steps.
std::size_t warm_up_steps(const std::vector<double>& lengths);

// What each step still to come will take, from the lengths of the steps so
// far (in order): the mean of those past the warm-up (warm_up_steps), since
// the time left is their sum; 0 before the first. A live ETA from the mean
// of every step would count a GPU run's first step, a hundred times a later
// one, into each step left.
double expected_step_seconds(const std::vector<double>& lengths);

// The kind of operation a compute event's name says: "gemm", "attention",
// "norm", "activation", "loss", "optimizer", else "elementwise".
std::string_view operation_kind(std::string_view name);

// The communication group an event's name starts with ("tp all-reduce",
// "wait dp"; a point-to-point transfer is "pp"): "tp", "dp", "pp", else
// "other" (NCCL kernels, imports, unnamed groups).
std::string_view communication_group(std::string_view name, EventKind kind);

// "exposed data-parallel communication", "GEMM compute", ... for a part name.
std::string describe_part(std::string_view part);

// The steps a median was taken over: "6 steps after the warm-up (the first
// 4)", "6 steps after the first (the warm-up)", "2 steps".
std::string describe_steps(int steps, int warm_up);

// Whether an event [start_ns, end_ns) counts in an analysis's window
// [window.start_ns, window.end_ns): one that ends where the window starts
// ran before it (an instant there counts), one that starts where it ends
// after it. The tables of a range hold these; so does the list of a row's
// instances.
bool counts_in_window(std::int64_t start_ns, std::int64_t end_ns, TimeRange window);

struct AnalysisOptions {
  std::int64_t kernel_wait_ns = 30;
  bool per_step = true;
  int threads = 0;  // ranks analysed at once; 0 = one per hardware thread
  // Only time inside this window counts (all when unset).
  std::optional<TimeRange> window;
  // The steps the window was made of (--steps A-B): each rank's step rows
  // and its median step (the straggler search) hold exactly these. A window
  // without them (a range, --from/--to) has the rows of the steps it
  // reaches, and the medians of the steps wholly inside it: a step cut by
  // the range is no step length.
  struct StepRange {
    std::int32_t first = 0, last = 0;
  };
  std::optional<StepRange> steps;
  // Straggler thresholds: a rank whose median step is this much slower than
  // the median rank, or whose collectives start this fraction of a step late
  // on average (and beyond 3 median absolute deviations of all ranks).
  double straggler_step_excess = 0.05;
  double straggler_late_fraction = 0.02;
  // Launch statistics' outliers, HTA's defaults (runtime_cutoff 50 us,
  // launch_delay_cutoff 100 us).
  std::int64_t runtime_cutoff_ns = 50'000;
  std::int64_t launch_delay_cutoff_ns = 100'000;
  // A prediction to hold the run against instead of the one the store
  // recorded (meta "predicted_step").
  std::optional<PredictedStep> prediction;
  // RunAnalysis::gemms: one more pass over every rank's host lanes (a
  // tenth of a second per million events), which only `trace stats` and
  // the report show; off, the views that do not show it open faster.
  bool gemm_rates = false;
  // Where the GPUs' peaks come from (RunAnalysis::gemms); none without.
  const PresetCatalog* presets = nullptr;
};

// One rank's sampled counter (GPU memory in use, a profile's allocated
// bytes) over the run or the window: its peak, as PyTorch's
// max_memory_allocated and Nsight's memory rows give it.
struct CounterStats {
  std::int32_t rank = 0;
  std::string name;
  std::int64_t samples = 0;
  double least = 0, greatest = 0, last = 0;
  std::int64_t greatest_at_ns = 0;  // the first sample at the greatest value
  bool bytes = false;               // counter_in_bytes(name)
};

// A sample of `counter` as `trace stats` and the report write it: bytes as
// "9.54 GiB", other values as numbers.
std::string counter_value_text(const CounterStats& counter, double value);

struct RunAnalysis {
  std::vector<RankAnalysis> ranks;
  std::vector<KernelStats> kernels;          // all ranks together
  std::vector<CollectiveStats> collectives;  // all ranks together
  // The CUDA runtime and driver calls of all ranks, by name and total time
  // (Nsight Systems' cuda_api_sum); share: of all calls' time.
  std::vector<KernelStats> api_calls;
  // Copies and sets by kind ("Memcpy HtoD", "Memset", ...), by total time.
  std::vector<MemoryOpStats> memory_ops;
  // Annotation ranges (NVTX, the engines' phases, PyTorch's
  // record_function) of all ranks by name and total time (Nsight Systems'
  // nvtx_sum); share: of all ranges' time, nested ones counted in full.
  std::vector<KernelStats> annotations;
  // Every rank's counters with a sample in the window, by rank and name.
  std::vector<CounterStats> counters;
  // The operations with FLOPs by name and precision, their achieved FLOP/s
  // (gemm_rates, over the window); none unless AnalysisOptions::gemm_rates.
  std::optional<GemmRates> gemms;
  StragglerReport stragglers;
  std::optional<PredictionComparison> prediction;  // none for a window (options.window)
  // Why the store's recorded prediction is left out: its meta does not read
  // (it stopped every figure, not only the comparison). Empty otherwise.
  std::string prediction_error;
  // A damaged page met while reading (TraceReader::damage's message): the
  // figures lack the rows it held. Empty when none was met.
  std::string damage;
};

Result<RankAnalysis> analyze_rank(const TraceReader& reader, std::int32_t rank,
                                  const AnalysisOptions& options = {});

// Every rank (in parallel, a reader per thread), the run-wide summaries,
// stragglers, and the prediction comparison when the store holds one.
Result<RunAnalysis> analyze_run(const TraceReader& reader, const AnalysisOptions& options = {});

Result<StragglerReport> find_stragglers(const TraceReader& reader,
                                        const std::vector<RankAnalysis>& ranks,
                                        const AnalysisOptions& options = {});

// The run's measured parts against `prediction` (analyze_run reads the
// store's own "predicted_step"; the app a prediction made again).
Result<PredictionComparison> compare_with_prediction(const TraceReader& reader,
                                                     const std::vector<RankAnalysis>& ranks,
                                                     const PredictedStep& prediction);

}  // namespace cs::trace
