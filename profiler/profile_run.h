#pragma once
// Profiling any CUDA program: run a command with the injection library on
// every CUDA process it starts (CUDA_INJECTION64_PATH is inherited, so
// torchrun's or mpirun's workers are traced too), each writing its own store
// into a parts directory, then gather those stores into one run store.
//
// The command is started with fork/exec from an argument list, never through
// a shell. The profiler is a subreaper (Linux), so every process the command
// starts stays below it, even one that leaves the process group or the
// session (setsid): SIGINT, SIGTERM and SIGHUP sent to the profiler alone
// (kill, timeout, a scheduler, the app's close) are passed on to all of them,
// and the profiler waits for all of them, as `nsys profile --wait=all` does,
// before it gathers their stores (WaitFor::primary: for the command alone).
// A terminal's Ctrl-C already reaches the foreground process group and is
// passed on only to the processes outside it, as is the SIGHUP of a terminal
// that closed; the profiler still gathers what was recorded.

#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "core/result.h"
#include "profiler/launch_env.h"

namespace cs::profiler {

// What the profile waits for, as nsys profile --wait: every process the
// command starts (all), or the command alone (primary): the processes it
// leaves running then run on, neither signalled nor waited for, and the
// stores they still write are not gathered.
enum class WaitFor { all, primary };

struct ProfileRequest {
  std::vector<std::string> command;  // program and arguments; the program is looked up in PATH
  std::string out;                   // the run store to write
  std::string keep_parts;  // keep the per-process stores here ("" = a temporary directory, removed)
  std::string inject_library;  // libclusterscope-inject.so; "" = find_injection_library()
  bool nvtx = true;            // route NVTX ranges to CUPTI (NVTX_INJECTION64_PATH)
  // Record only between the program's cudaProfilerStart and cudaProfilerStop
  // (nsys profile --capture-range=cudaProfilerApi; CLUSTERSCOPE_CAPTURE_RANGE).
  bool capture_profiler_api = false;
  WaitFor wait = WaitFor::all;
  // More meta rows for the run store: "predicted_step", the planner's
  // prediction of the plan the program runs (`clusterscope profile --plan`).
  std::vector<std::pair<std::string, std::string>> meta;
};

struct ExitStatus {
  int code = 0;    // exit status when it exited
  int signal = 0;  // the signal that ended it, or 0

  bool success() const { return code == 0 && signal == 0; }
  // What a shell would report: the code, or 128 + the signal.
  int shell_code() const { return signal ? 128 + signal : code; }
  // "exited with status 3", "was killed by SIGTERM"
  std::string describe() const;
};

// How the command ended, and (WaitFor::primary) what it left running.
struct CommandEnd {
  ExitStatus status;                // of the command
  std::vector<pid_t> left_running;  // its processes still running when it ended, not waited for
};

struct ProfileOutcome {
  ExitStatus status;        // of the command
  std::string parts_dir;    // where the per-process stores were written
  bool parts_kept = false;  // parts_dir is still there (asked for, gathering failed, or in use)
  std::vector<std::string> parts;  // the stores found there to gather, sorted
  // WaitFor::primary: the command's processes still running when it ended,
  // and the stores in parts_dir they were still writing, not gathered.
  std::vector<pid_t> left_running;
  std::vector<std::string> still_written;
  Status gathered;                 // the run store written, or why not
  std::vector<std::string> notes;  // e.g. an inherited CUDA_INJECTION64_PATH that was replaced
};

// libclusterscope-inject.so: CLUSTERSCOPE_INJECT when set, else beside this
// program's binary in ../lib (the build tree, and an install under a prefix),
// else in ../<CMAKE_INSTALL_LIBDIR>.
Result<std::string> find_injection_library(const Environment& env);

// Runs the command traced, then gathers the stores it left into
// request.out. A temporary parts directory is removed once gathered, and kept
// when gathering failed, or (WaitFor::primary) while it holds anything more:
// a store that a process left running still writes, say. Errors only for
// what stops the command from running (no injection library, no parts
// directory, a command that cannot start); the command failing and
// gathering failing are in the outcome.
Result<ProfileOutcome> run_profiled(const ProfileRequest& request);

// The per-process stores (*.db) in a directory, sorted by name.
std::vector<std::string> find_process_stores(const std::string& dir);

// Gathers the per-process stores into the run store `out`, replacing it.
// `keep_parts`: leave the per-process stores where they are. `meta`: rows
// added to the run store's meta table (a lone process's store is then
// merged, not moved).
Status gather_process_stores(const std::vector<std::string>& parts, const std::string& out,
                             bool keep_parts,
                             const std::vector<std::pair<std::string, std::string>>& meta = {});

// Runs `command` (fork/exec, PATH lookup) with `set` added to this process's
// environment, and waits for it and every process it started, even those
// it left running when it ended (said on stderr, with their pids); with
// WaitFor::primary for the command alone, and what it left running is
// returned, unsignalled (unless an interrupt came first: it was passed on to
// them too, and they are waited for as with WaitFor::all). An interrupt
// (SIGINT, SIGTERM, SIGHUP) while it waits is passed on to all of them; a
// second sends them SIGTERM, a third SIGKILL. The status is the command's own. This process is a
// subreaper meanwhile, and reaps any child of its own that ends.
Result<CommandEnd> run_command(const std::vector<std::string>& command,
                               const std::vector<std::pair<std::string, std::string>>& set,
                               WaitFor wait = WaitFor::all);

}  // namespace cs::profiler
