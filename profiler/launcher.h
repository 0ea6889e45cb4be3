#pragma once
// Starts the ranks of a training run and watches them: locally or on the
// hosts of a hostfile through Open MPI's mpirun, or as a Slurm batch script.
// It streams the workers' progress (their JSON lines) to the caller, cancels
// cleanly (every rank closes its store, then the job ends), notices a
// crashed rank (which one, how it ended, its last lines) and a hung run (no
// progress for a set time), and merges the per-rank trace stores into one
// run store recording the plan, the command line and how the run ended.
//
// Commands are argument vectors run with fork and exec, never through a shell;
// the one shell text made (the Slurm script) quotes every value. Qt-free:
// the CLI and the GUI drive the same object, from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "profiler/hostfile.h"

namespace cs::launch {

enum class Placement {
  local,     // mpirun on this machine
  hostfile,  // mpirun on the hosts of a hostfile
  slurm,     // a Slurm batch script, submitted with sbatch when it is found
};

struct SlurmOptions {
  std::string script_path;  // default: the run store's path with ".sbatch"
  std::string partition;
  std::string account;
  std::string time_limit;         // as sbatch takes it: "30", "1:00:00", "2-00:00:00"
  int nodes = 0;                  // 0: let Slurm choose
  int cpus_per_task = 0;          // 0: Slurm's default
  std::string srun_mpi = "pmix";  // srun --mpi=...
  bool submit = true;             // run sbatch when it is on PATH
  // Run after srun inside the job (e.g. the merge of the rank stores); empty: none.
  std::vector<std::string> after_command;
};

struct RunSpec {
  std::string title;
  std::string worker;                    // the clusterscope-worker executable
  std::vector<std::string> worker_args;  // its options, without --out and --title
  int ranks = 1;
  Placement placement = Placement::local;
  std::string hostfile;  // Placement::hostfile
  // Its hosts as plan_run read them; empty: the launcher reads the file. A
  // hostfile read once (`--hostfile <(...)`, a pipe) is not there to read again.
  std::vector<Host> hosts;
  std::string mpirun = "mpirun";
  // The merged run store ("" records nothing). Rank stores go to
  // rank_store_path(run_store, rank); with several hosts that folder must be
  // on a file system every host shares.
  std::string run_store;
  // Every rank records it (the worker's --run-id), so that a merge refuses
  // rank stores of two runs of one command. Launcher::start() draws one when
  // empty (profiler::new_run_id), except for Slurm, whose workers take their
  // job step's id (profiler::shared_run_id).
  std::string run_id;
  bool keep_rank_stores = false;  // after a merge of a complete run
  // No new step from any rank for this long: the run is hung (0: never).
  std::chrono::milliseconds hang_timeout{std::chrono::minutes(5)};
  // Until every rank has started (mpirun spawning, MPI and NCCL set-up,
  // model initialisation) the wait is the longer of this and hang_timeout.
  std::chrono::milliseconds startup_timeout{std::chrono::minutes(2)};
  // Cancel and hang: how long the ranks get to close their stores (after
  // SIGUSR1, forwarded by mpirun; ranks on this host that were stopped get
  // SIGCONT) before the job is ended with SIGTERM.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(30)};
  // Recorded in the run store.
  std::string plan_json;     // the Plan (cluster, workload, parallel, precision) as JSON
  std::string command_line;  // what the user typed
  // More meta rows for the run store (e.g. "predicted_step": the planner's
  // estimate of this run, docs/calibration.md).
  std::vector<std::pair<std::string, std::string>> extra_meta;
  SlurmOptions slurm;
};

// The run store's path without ".db": the run's rank store folder, plan,
// hostfile and Slurm files are named from it ("<stem>.ranks", "<stem>.plan.json").
std::string run_store_stem(const std::string& run_store);
// Where rank `rank`'s store of a run goes: "<run store>.ranks/rank<N>.db".
std::string rank_store_path(const std::string& run_store, int rank);
// The rank a file name of that folder is the store of ("rank3.db": 3,
// "rank007.db": 7; digits past an int read as the largest int, past any
// plan), or none for a name of another kind.
std::optional<int> rank_of_store_file(std::string_view file_name);
std::string rank_store_pattern(const std::string& run_store);  // with "{rank}"
// Refuses a run store that a run on this host is writing (it holds the lock
// in "<stem>.ranks"), before anything beside it is written: a second run
// given the same --out replaced the first one's plan and rank stores.
Status check_run_store_free(const std::string& run_store);
// Refuses rank store paths a run cannot take: "<stem>.ranks" not a folder,
// or a rank's store path holding what is not an earlier store (a file of the
// user's, a folder, a pipe, a store another process writes). Checked before
// the run's plan is written beside it, and again under the run's lock.
Status check_rank_store_paths(const std::string& run_store, int ranks);

// The commands, as argument vectors (program first).
std::vector<std::string> worker_command(const RunSpec& spec);
// `hostfile_copy` is the validated hostfile handed to mpirun (hostfile placement).
std::vector<std::string> mpirun_command(const RunSpec& spec, const std::string& hostfile_copy = {});
// The Slurm batch script's text; every value from the spec is quoted.
Result<std::string> slurm_script(const RunSpec& spec);
// One argument as a POSIX shell word: 'it'\''s'.
std::string shell_quote(std::string_view argument);
// The argument vector as one line a user could paste into a shell.
std::string command_text(const std::vector<std::string>& argv);

// Where a program is: `name` with a '/' as it is, else the first match on PATH.
std::optional<std::string> find_program(const std::string& name);
// A program of ClusterScope's beside the running executable, else on PATH.
std::optional<std::string> find_beside_or_on_path(const std::string& name);
// clusterscope-worker, found so.
std::optional<std::string> find_worker();
// Fails, naming it, where `mpirun` is not found: checked before anything of
// a run is written (its plan, its rank store folder), which a run that
// could not start left behind.
Status check_mpirun_found(const std::string& mpirun);

// lost: the job ended while the rank had said neither that it finished nor
// how it stopped (mpirun killed, the node gone).
enum class RankState { starting, running, done, cancelled, failed, lost };
std::string_view to_string(RankState s);

struct RankStatus {
  int rank = 0;
  RankState state = RankState::starting;
  std::string host;
  std::int64_t pid = 0;
  int step = -1;  // last finished step, -1 before the first
  int steps = 0;  // steps of the run
  int samples = 0;  // a calibration's rank: the sweep samples it measured
  int sample_points = 0;  // of all its sweeps, as it said at their start (0: not said)
  double loss = 0;
  double grad_norm = 0;  // NaN where not finite (a step skipped for overflowed FP16 gradients)
  double step_seconds = 0;
  double cpu_seconds = 0;  // CPU time of the rank's process over its last step
  double tokens_per_second = 0;
  std::int64_t memory_bytes = 0;
  std::string store;                    // its trace store, "" when not tracing
  std::string error;                    // its "error" line, when it sent one
  std::vector<std::string> last_lines;  // its last stderr (and non-JSON stdout) lines
};

struct LaunchEvent {
  enum class Kind {
    started,       // mpirun (or sbatch) runs; text: the command
    rank_started,  // a rank reported in (rank, text: host and pid)
    step,          // a rank finished a step (rank, step, loss, ...)
    rank_done,     // a rank finished training
    rank_failed,   // a rank crashed or reported an error (rank, text: what happened)
    message,       // mpirun's own line, or the launcher's note (text)
    hung,          // no progress for the hang timeout (text: last step of each rank)
    stopping,      // cancel or hang: the ranks are asked to close their stores
    merging,       // merging the rank stores into the run store
    finished,      // the run ended (text: the report's message)
    // A calibration's rank measured a sweep point (rank; step: the samples it
    // measured, 1 for the first; steps: of all its sweeps', 0 when not said;
    // sweep: which, "all-reduces"; text: the point, "1.0 MiB over 2 ranks").
    sample,
  };
  Kind kind = Kind::message;
  int rank = -1;
  int step = -1;
  int steps = 0;
  double loss = 0;
  double grad_norm = 0;
  double step_seconds = 0;
  double cpu_seconds = 0;
  double tokens_per_second = 0;
  std::string sweep;  // sample: the sweep it belongs to
  std::string text;
};

enum class Outcome {
  completed,
  cancelled,
  crashed,  // a rank died (signal, non-zero exit) or mpirun failed
  hung,
  failed,       // did not start, or a rank reported an error
  submitted,    // Slurm: the job was submitted
  script_only,  // Slurm: sbatch was not found; the script was written
};
std::string_view to_string(Outcome o);

// What a user reads for one of the worker's sweeps (its --sweep id:
// "layer_gemm", "bandwidth", "ops", "all_reduce"), as the progress of its
// points names it; `precisions` ("fp32", "fp32,bf16") for the GEMMs'.
std::string sweep_title(std::string_view sweep, std::string_view precisions = {});

struct RankFailure {
  int rank = -1;
  std::string host;
  std::int64_t pid = 0;
  int signal = 0;           // the signal that ended it, or 0
  int exit_code = -1;       // its exit status, or -1
  std::string description;  // "killed by signal 9 (Killed)", "exited with status 3", ...
  std::vector<std::string> last_lines;
};

// A rank named when the run hung: one the system held stopped (SIGSTOP, a
// debugger) on this host, and the last op its store held then.
struct HungRank {
  int rank = -1;
  std::string host;
  std::int64_t pid = 0;
  std::string state;                // "is stopped (SIGSTOP or a debugger)"
  std::string last_op;              // "gemm mlp_up on its compute lane"; "" when none was read
  std::int64_t last_op_end_ns = 0;  // run clock (UTC nanoseconds)
};

struct RunReport {
  Outcome outcome = Outcome::failed;
  std::string message;               // what happened, in a sentence or a few
  std::vector<std::string> command;  // what was run (mpirun ... or sbatch ...)
  int exit_status = -1;              // mpirun's (128 + signal when killed)
  std::vector<RankStatus> ranks;
  std::optional<RankFailure> failure;     // crashed / failed: the first rank that failed
  std::vector<HungRank> hung_ranks;       // hung: the ranks held stopped when it was seen
  std::vector<std::string> mpirun_lines;  // mpirun's own last lines
  std::string run_store;                  // the merged store, "" when none was made
  std::string merge_note;                 // about the merge: missing ranks, or why none
  std::string slurm_script;               // Slurm: the script written
  std::string slurm_job;                  // Slurm: the job id sbatch gave
  bool killed = false;                    // ended by kill(), before the ranks had stopped
};

// A caller's request to stop a run, set from another thread (the signal
// thread of the CLI, the app's Cancel): `cancel` lets every rank close its
// store first; `kill` ends the ranks at once (a second Ctrl-C while they
// close). Either is one-way: once set, it stays set.
struct StopRequest {
  std::atomic<bool> cancel{false};
  std::atomic<bool> kill{false};
  bool requested() const { return cancel || kill; }
};

class Launcher {
 public:
  using Callback = std::function<void(const LaunchEvent&)>;

  // With a callback, events are delivered to it on the launcher's own thread;
  // without, they queue up for take_events().
  explicit Launcher(RunSpec spec, Callback on_event = {});
  ~Launcher();  // cancels a run still going and waits for it
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Starts the run (or writes and submits the Slurm script) and returns;
  // fails when nothing could be started (bad hostfile, no mpirun, ...).
  Status start();
  // Asks the run to stop: every rank closes its store (SIGUSR1, which mpirun
  // forwards), then SIGTERM ends the job (SIGKILL if that fails).
  void cancel();
  // Ends the run now, without the grace a cancel gives: SIGKILL to mpirun's
  // process group and to the ranks on this host, as a stop does when the
  // grace has passed. For a second Ctrl-C while a cancel is still waiting on
  // the ranks. The rank stores keep what they had committed, and are merged
  // as a cancelled run's are (RunReport::killed says so).
  void kill();
  bool finished() const;
  // Blocks until the run has ended and its stores are merged.
  RunReport wait();
  // The same, cancelling or killing the run as soon as `stop` (may be null)
  // asks for it.
  RunReport wait(const StopRequest* stop);
  // Events since the last call (when constructed without a callback).
  std::vector<LaunchEvent> take_events();
  // Every rank's latest status.
  std::vector<RankStatus> ranks() const;
  const RunSpec& spec() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Why a run did not complete, for an error message: the report's message,
// the failing rank's last line, the merge's note.
std::string failure_text(const RunReport& report);

// Merges the rank stores of a finished run into spec.run_store, recording the
// plan, the command line and the outcome. Ranks whose store is missing or
// unreadable are named in `note`; the merge fails only when none is readable.
Status merge_run_stores(const RunSpec& spec, Outcome outcome, std::string& note);

// How a run ended, read from its rank stores when the launcher did not watch
// it (a Slurm job): complete when every store is; cancelled when one was
// cancelled; failed when one failed; crashed when one was cut short (its
// writer died) or is missing. A store that is there but cannot be read (a
// damaged or truncated file) says nothing of how its rank ended: the other
// stores decide, and `unreadable` gets "rank N: why" for it.
Outcome outcome_from_rank_stores(const RunSpec& spec,
                                 std::vector<std::string>* unreadable = nullptr);
// Whether the rank stores beside spec.run_store are of a run of spec.ranks
// ranks, as each store's recorded layout (meta "parallel": dp x tp x pp)
// says: an error naming the store and both counts when one is not (a
// merge with another plan's flags made a store of the wrong world size,
// replacing a good one, and called its missing ranks a crash).
Status check_rank_stores_world(const RunSpec& spec);

}  // namespace cs::launch
