#include "profiler/profile_run.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/made_folders.h"
#include "core/trace_merge.h"
#include "core/trace_store.h"
#include "core/trace_writer.h"
#include "core/unfinished_file.h"
#include "profiler/process_tree.h"

namespace fs = std::filesystem;

namespace cs::profiler {

namespace {

constexpr const char* kLibraryName = "libclusterscope-inject.so";

std::string signal_name(int number) {
  switch (number) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(number);
  }
}

// What the signal handlers leave for run_command's loop, which does the
// work (reading /proc, signalling) outside them: a handler only counts and
// writes a byte to the wake pipe (async-signal-safe).
std::atomic<int> g_interrupts{0};
std::atomic<int> g_first_signal{0};
std::atomic<bool> g_first_from_terminal{false};
std::atomic<int> g_wake{-1};
// SIGHUP (the terminal closed, the ssh connection dropped) as an interrupt:
// it ended the profiler at once, leaving the command's processes that were
// not in the terminal's group running and what they recorded ungathered.
constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
constexpr int kHandledCount = int(std::size(kHandled));

void wake() {
  const int fd = g_wake.load();
  if (fd < 0) return;
  const int saved = errno;
  const ssize_t ignored = write(fd, "", 1);  // a full pipe already wakes the loop
  (void)ignored;
  errno = saved;
}

void note_interrupt(int number, siginfo_t* info, void*) {
  int none = 0;
  if (g_first_signal.compare_exchange_strong(none, number)) {
    // SI_KERNEL and the like (si_code > 0): a terminal, which already
    // signalled its foreground process group.
    g_first_from_terminal.store(info && info->si_code > 0);
  }
  ++g_interrupts;  // counted last: the loop reads the first one's details once it sees it
  wake();
}

void note_child(int) {
  wake();
}

void say(const std::string& text) {
  const ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

// The command's processes: the command and every process it started, found
// below this one (a subreaper, so that none escapes by leaving the process
// group or the session), less those that ended.
std::vector<ProcessEntry> live_descendants() {
  std::vector<ProcessEntry> live;
  for (const ProcessEntry& process : descendant_processes(getpid()))
    if (process.state != 'Z') live.push_back(process);
  return live;
}

// The n-th interrupt. The first is passed on to the command's processes,
// except to those a terminal already reached (its foreground process group,
// this one's). Processes that ignore it (a trap, a stuck job) are ended by a
// second one (SIGTERM), then killed by a third (SIGKILL): Ctrl-C did
// nothing, however often it was pressed.
// `command`: its pid while it runs, else 0.
void pass_on_interrupt(int nth, pid_t command) {
  const pid_t self = getpid();
  // Without /proc (not mounted) no process can be listed: the command itself
  // is still signalled, as it was before the profiler read the tree.
  const bool unlisted = command > 0 && access("/proc/self/stat", R_OK) != 0;
  if (nth == 1) {
    const bool from_terminal = g_first_from_terminal.load();
    signal_descendants(self, g_first_signal.load(), from_terminal ? getpgrp() : 0);
    if (unlisted && !from_terminal) kill(command, g_first_signal.load());
    say("clusterscope: the command was interrupted; interrupt again to end it (SIGTERM)\n");
  } else if (nth == 2) {
    signal_descendants(self, SIGTERM);
    if (unlisted) kill(command, SIGTERM);
    say("clusterscope: ending the command (SIGTERM); interrupt again to kill it (SIGKILL)\n");
  } else if (nth == 3) {
    signal_descendants(self, SIGKILL);
    if (unlisted) kill(command, SIGKILL);
    say("clusterscope: killing the command (SIGKILL)\n");
  }
}

std::string pid_list(const std::vector<ProcessEntry>& processes) {
  std::string text;
  for (const ProcessEntry& process : processes)
    text += (text.empty() ? "" : ", ") + std::to_string(process.pid);
  return text;
}

fs::path this_program() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path() : self;
}

Status copy_store_file(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, error);
  if (error)
    return Error{"cannot copy " + from.string() + " to " + to.string() + ": " + error.message()};
  return {};
}

Status move_store_file(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (!error) return {};
  if (error != std::errc::cross_device_link) {
    return Error{"cannot move " + from.string() + " to " + to.string() + ": " + error.message()};
  }
  if (Status copied = copy_store_file(from, to); !copied) return copied;
  fs::remove(from, error);
  return {};
}

// Whether a process of the command may still write the store `path`: it is
// not closed ("writing", or not readable yet while it is being created) and
// its writer runs, or the process its name gives (rank<R>-pid<P>.db) does.
bool still_written(const std::string& path) {
  const auto state = trace::inspect_store(path);
  if (state && state->status != "writing") return false;
  if (state && state->writer_alive) return true;
  const std::string name = fs::path(path).stem().string();
  const auto at = name.rfind("-pid");
  if (at == std::string::npos) return false;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + at + 4, &end, 10);
  if (pid <= 0 || *end != '\0') return false;
  return process_running(pid_t(pid));
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal) return "was killed by " + signal_name(signal);
  return "exited with status " + std::to_string(code);
}

Result<std::string> find_injection_library(const Environment& env) {
  if (auto it = env.find("CLUSTERSCOPE_INJECT"); it != env.end() && !it->second.empty()) {
    std::error_code error;
    if (!fs::is_regular_file(it->second, error)) {
      return Error{"CLUSTERSCOPE_INJECT=" + it->second + " is not a file"};
    }
    return fs::absolute(it->second).string();
  }
  const fs::path bin = this_program().parent_path();
  std::vector<fs::path> candidates = {bin / ".." / "lib" / kLibraryName};
  if (std::string(CLUSTERSCOPE_INSTALL_LIBDIR) != "lib") {
    candidates.push_back(bin / ".." / CLUSTERSCOPE_INSTALL_LIBDIR / kLibraryName);
  }
  std::string looked;
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (fs::is_regular_file(candidate, error)) return fs::weakly_canonical(candidate).string();
    looked += (looked.empty() ? "" : ", ") + candidate.lexically_normal().string();
  }
  if (!CLUSTERSCOPE_BUILT_WITH_CUDA) {
    return Error{
        "this build has no CUDA tracer (it was built without the CUDA toolkit), so it cannot "
        "profile"};
  }
  return Error{"cannot find " + std::string(kLibraryName) + " (looked at " + looked +
               "); set CLUSTERSCOPE_INJECT to its path"};
}

std::vector<std::string> find_process_stores(const std::string& dir) {
  std::vector<std::string> stores;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error) && entry.path().extension() == ".db") {
      stores.push_back(entry.path().string());
    }
  }
  std::sort(stores.begin(), stores.end());
  return stores;
}

Status gather_process_stores(const std::vector<std::string>& parts, const std::string& out,
                             bool keep_parts,
                             const std::vector<std::pair<std::string, std::string>>& meta) {
  if (parts.empty()) return Error{"no CUDA process was traced, so there is no store to gather"};
  // A stale write-ahead log beside the old run store would be read as part of the new one.
  std::error_code error;
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    fs::remove(out + suffix, error);
  if (parts.size() == 1 && meta.empty()) {
    // One process: its store is the run store, with its write-ahead log when
    // the process ended before checkpointing.
    auto place = keep_parts ? copy_store_file : move_store_file;
    if (Status placed = place(parts[0], out); !placed) return placed;
    if (fs::exists(parts[0] + "-wal", error)) {
      if (Status placed = place(parts[0] + "-wal", out + "-wal"); !placed) return placed;
    }
    return {};
  }
  trace::MergeOptions options;
  options.run.source = "cupti";
  options.writers_ended = true;  // the profiled command has exited
  options.meta = meta;
  auto merged = trace::merge_stores(parts, out, options);
  if (!merged) return merged.error();
  if (!keep_parts) {
    for (const std::string& part : parts) {
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(part + suffix, error);
    }
  }
  return {};
}

Result<CommandEnd> run_command(const std::vector<std::string>& command,
                               const std::vector<std::pair<std::string, std::string>>& set,
                               WaitFor wait) {
  if (command.empty() || command.front().empty()) return Error{"no command to run"};
  // Everything the child needs is built before fork: nothing allocates after it.
  std::vector<std::string> environment;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    const bool replaced =
        std::any_of(set.begin(), set.end(), [&](const auto& v) { return v.first == name; });
    if (!replaced) environment.push_back(text);
  }
  for (const auto& [name, value] : set)
    environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& text : environment)
    envp.push_back(text.data());
  envp.push_back(nullptr);
  std::vector<std::string> args(command);
  std::vector<char*> argv;
  for (std::string& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  int exec_error[2];
  if (pipe2(exec_error, O_CLOEXEC) != 0) {
    return Error{std::string("cannot start the command: ") + std::strerror(errno)};
  }
  int wake_pipe[2];
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int code = errno;
    close(exec_error[0]);
    close(exec_error[1]);
    return Error{std::string("cannot start the command: ") + std::strerror(code)};
  }
  // A subreaper: a process of the command whose parent ends is re-parented
  // here, not to init, so that one that left the process group or the
  // session (setsid) is still found, signalled and waited for.
  int was_subreaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  g_interrupts.store(0);
  g_first_signal.store(0);
  g_wake.store(wake_pipe[1]);
  struct sigaction previous[kHandledCount] {};
  struct sigaction interrupt {};
  interrupt.sa_sigaction = note_interrupt;
  sigemptyset(&interrupt.sa_mask);
  interrupt.sa_flags = SA_SIGINFO | SA_RESTART;
  struct sigaction child_ended {};
  child_ended.sa_handler = note_child;
  sigemptyset(&child_ended.sa_mask);
  child_ended.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int i = 0; i < kHandledCount; ++i)
    sigaction(kHandled[i], kHandled[i] == SIGCHLD ? &child_ended : &interrupt, &previous[i]);
  // Held until the child runs: the child must not run the handlers, and they
  // wait for the loop below anyway.
  sigset_t handled, unblocked;
  sigemptyset(&handled);
  for (int number : kHandled)
    sigaddset(&handled, number);
  sigprocmask(SIG_BLOCK, &handled, &unblocked);

  const pid_t child = fork();
  if (child == 0) {
    // The child takes the default dispositions and the mask the profiler had
    // (the CLI's handler that removes its unfinished files is not the child's).
    for (int i = 0; i < kHandledCount; ++i)
      sigaction(kHandled[i], &previous[i], nullptr);
    cs::default_signal_actions_in_child();
    // The CLI ignores SIGPIPE and SIGXFSZ for itself; an ignored signal stays
    // ignored across exec, and the user's command must see the usual ones.
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    sigprocmask(SIG_SETMASK, &unblocked, nullptr);
    close(exec_error[0]);
    execvpe(argv[0], argv.data(), envp.data());
    const int code = errno;
    const ssize_t ignored = write(exec_error[1], &code, sizeof code);
    (void)ignored;
    _exit(127);
  }
  auto restore = [&] {
    sigprocmask(SIG_BLOCK, &handled, nullptr);
    for (int i = 0; i < kHandledCount; ++i)
      sigaction(kHandled[i], &previous[i], nullptr);
    g_wake.store(-1);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
    sigprocmask(SIG_SETMASK, &unblocked, nullptr);
  };
  close(exec_error[1]);
  if (child < 0) {
    const int code = errno;
    close(exec_error[0]);
    restore();
    return Error{std::string("cannot start the command: ") + std::strerror(code)};
  }
  sigprocmask(SIG_SETMASK, &unblocked, nullptr);  // what arrived meanwhile is handled below
  int exec_code = 0;
  ssize_t got = 0;
  do {
    got = read(exec_error[0], &exec_code, sizeof exec_code);
  } while (got < 0 && errno == EINTR);
  close(exec_error[0]);

  // Until every process of the command has ended: the command, and what it
  // left running (their stores are finished only when they end); or, with
  // WaitFor::primary, until the command has. Each wake (a child ended, an
  // interrupt) reaps what ended, then passes interrupts on.
  CommandEnd result;
  bool ended = false;
  bool announced = false;
  int interrupts = 0;
  int lost = 0;
  for (;;) {
    int status = 0;
    const pid_t reaped = waitpid(-1, &status, WNOHANG);
    if (reaped > 0) {
      if (reaped == child) {
        ended = true;
        if (WIFEXITED(status)) result.status.code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) result.status.signal = WTERMSIG(status);
      }
      continue;
    }
    if (reaped < 0 && errno == EINTR) continue;
    if (reaped < 0) {
      lost = ended ? 0 : errno;  // ECHILD once all have ended
      break;
    }
    while (interrupts < g_interrupts.load())
      pass_on_interrupt(++interrupts, ended ? 0 : child);
    // Killing: also what was started since.
    if (interrupts >= 3) signal_descendants(getpid(), SIGKILL);
    if (ended && wait == WaitFor::primary && interrupts == 0) {
      // What it left runs on, no longer ours: not signalled, not waited for.
      // Once interrupted, they were asked to end with it: as with
      // WaitFor::all, they are waited for, so that what they recorded is
      // gathered, finished (a next interrupt ends them, as said below).
      for (const ProcessEntry& process : live_descendants())
        result.left_running.push_back(process.pid);
      break;
    }
    if (ended && !announced && interrupts < 3) {
      announced = true;
      const std::vector<ProcessEntry> left = live_descendants();
      if (!left.empty()) {
        const bool one = left.size() == 1;
        const std::string them = one ? "it" : "them";
        say("clusterscope: the command ended; waiting for the " +
            (one ? std::string("process") : std::to_string(left.size()) + " processes") +
            " it left running (" + (one ? "pid " : "pids ") + pid_list(left) + "); " +
            (interrupts == 0   ? "an interrupt ends " + them
             : interrupts == 1 ? "interrupt again to end " + them + " (SIGTERM)"
                               : "interrupt again to kill " + them + " (SIGKILL)") +
            "\n");
      }
    }
    pollfd woken{wake_pipe[0], POLLIN, 0};
    poll(&woken, 1, -1);  // EINTR: a handler ran, and wrote to the pipe
    char drained[64];
    while (read(wake_pipe[0], drained, sizeof drained) > 0) {
    }
  }
  restore();
  if (got == sizeof exec_code) {
    return Error{"cannot run " + command.front() + ": " + std::strerror(exec_code)};
  }
  if (lost) return Error{std::string("lost track of the command: ") + std::strerror(lost)};
  return result;
}

Result<ProfileOutcome> run_profiled(const ProfileRequest& request) {
  if (request.command.empty()) return Error{"no command to profile (give it after --)"};
  if (request.out.empty()) return Error{"no run store to write (--out)"};
  // Checked before the command runs: its work would be lost at the end.
  if (Status s = trace::check_store_path(request.out); !s) return s.error();
  {
    std::error_code ec;
    const fs::path parent = fs::absolute(request.out, ec).parent_path();
    if (!fs::is_directory(parent, ec))
      return Error{request.out + ": its folder " + parent.string() + " does not exist"};
  }
  const Environment env = current_environment();
  std::string library = request.inject_library;
  if (library.empty()) {
    auto found = find_injection_library(env);
    if (!found) return found.error();
    library = std::move(found).value();
  }

  ProfileOutcome outcome;
  std::error_code error;
  // The folders --keep-parts made: removed again while they hold nothing
  // (no process was traced, the command did not start), where they were
  // left behind, empty.
  MadeFolders made;
  if (!request.keep_parts.empty()) {
    error = made.make(request.keep_parts);
    if (error) return Error{"cannot create " + request.keep_parts + ": " + error.message()};
    if (!find_process_stores(request.keep_parts).empty()) {
      return Error{request.keep_parts +
                   " already holds trace stores (*.db); give an empty directory"};
    }
    outcome.parts_dir = fs::absolute(request.keep_parts).string();
    outcome.parts_kept = true;
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/clusterscope-profile-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      return Error{"cannot create a temporary directory from " + pattern + ": " +
                   std::strerror(errno)};
    }
    outcome.parts_dir = pattern;
  }

  for (const char* name : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty() && it->second != library &&
        (request.nvtx || std::string(name) != "NVTX_INJECTION64_PATH")) {
      outcome.notes.push_back(std::string(name) + "=" + it->second + " was replaced by " + library);
    }
  }
  std::vector<std::pair<std::string, std::string>> set = {
      {"CUDA_INJECTION64_PATH", library},
      {"CLUSTERSCOPE_PROFILE_DIR", outcome.parts_dir},
      // Every process of the command records it (shared_run_id): a merge
      // of stores of two profiled runs is refused.
      {kRunIdVariable, new_run_id()},
  };
  if (request.nvtx) set.emplace_back("NVTX_INJECTION64_PATH", library);
  // Always set: one the user's environment holds does not decide it.
  set.emplace_back("CLUSTERSCOPE_CAPTURE_RANGE",
                   request.capture_profiler_api ? "cudaProfilerApi" : "");

  auto ended = run_command(request.command, set, request.wait);
  if (!ended) {
    if (!outcome.parts_kept) fs::remove_all(outcome.parts_dir, error);
    made.remove_empty();
    return ended.error();
  }
  outcome.status = ended->status;
  outcome.left_running = ended->left_running;
  // Only the command has ended: a store may still be written (and without
  // /proc, what runs on cannot be listed, but its store is still found).
  const bool primary = request.wait == WaitFor::primary;
  for (const std::string& part : find_process_stores(outcome.parts_dir)) {
    if (primary && still_written(part)) {
      outcome.still_written.push_back(part);
    } else {
      outcome.parts.push_back(part);
    }
  }
  if (!outcome.still_written.empty() && outcome.parts.empty()) {
    outcome.gathered = Error{"no process that ended left a store"};
  } else {
    outcome.gathered =
        gather_process_stores(outcome.parts, request.out, outcome.parts_kept, request.meta);
  }
  if (!outcome.parts_kept) {
    if (!outcome.gathered.ok() && !outcome.parts.empty()) {
      outcome.parts_kept = true;
    } else if (!primary) {
      fs::remove_all(outcome.parts_dir, error);
    } else {
      // Processes left running may write there still (their open stores, or
      // one they start now): removed only while empty, which rmdir checks
      // and creating a file in it cannot race.
      for (const std::string& part : outcome.parts) {
        for (const char* suffix : {"-shm", "-journal"})
          fs::remove(part + suffix, error);
      }
      outcome.parts_kept = !fs::remove(outcome.parts_dir, error) && fs::exists(outcome.parts_dir);
    }
  }
  if (!outcome.left_running.empty()) {
    const bool one = outcome.left_running.size() == 1;
    std::string pids;
    for (const pid_t pid : outcome.left_running)
      pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    outcome.notes.push_back(
        std::string("the command ended leaving ") + (one ? "a process" : "processes") +
        " running (" + (one ? "pid " : "pids ") + pids + "), not waited for (--wait primary): " +
        (one ? "it runs" : "they run") + " on, unsignalled, and a store " + (one ? "it" : "they") +
        " still write" + (one ? "s" : "") + " is not gathered");
  }
  for (const std::string& part : outcome.still_written) {
    std::string note =
        part + " is still being written by a process left running: not gathered, left in place";
    if (outcome.gathered.ok()) {
      note +=
          "; once its process has ended, merge it with the run store: clusterscope trace "
          "merge --out ALL.db " +
          request.out + " " + part;
    }
    outcome.notes.push_back(std::move(note));
  }
  if (primary && outcome.parts_kept && request.keep_parts.empty() && outcome.gathered.ok()) {
    outcome.notes.push_back("the temporary parts directory " + outcome.parts_dir +
                            " is kept: it is not empty, and processes left running may write "
                            "there still; remove it once they have ended");
  }
  // Not while processes run on (--wait primary): they may write there yet.
  if (outcome.parts.empty() && outcome.still_written.empty() && outcome.left_running.empty())
    made.remove_empty();
  return outcome;
}

}  // namespace cs::profiler
