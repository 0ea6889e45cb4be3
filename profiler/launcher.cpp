#include "profiler/launcher.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/format.h"
#include "core/host_name.h"
#include "core/json_reader.h"
#include "core/parse_count.h"
#include "core/run_clock.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "core/trace_writer.h"
#include "profiler/launch_env.h"
#include "profiler/mpirun_output.h"

extern char** environ;

namespace cs::launch {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kLastLines = 20;     // kept per rank
constexpr std::size_t kMpirunLines = 400;  // mpirun's own lines kept (it says little)
constexpr std::size_t kRanksNamed = 16;    // ranks named one by one in a message

bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Characters a #SBATCH value may hold: they are read by sbatch, not a shell,
// and cannot be quoted there.
bool plain_sbatch_value(std::string_view v) {
  if (v.empty()) return false;
  for (unsigned char c : v) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ',' || c == ':' || c == '/' ||
                    c == '%' || c == '+' || c == '=';
    if (!ok) return false;
  }
  return true;
}

std::string job_name(std::string_view title) {
  std::string name;
  for (unsigned char c : title) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    name += ok ? static_cast<char>(c) : '_';
    if (name.size() >= 64) break;
  }
  return name.empty() ? "clusterscope" : name;
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g s", static_cast<double>(d.count()) / 1000.0);
  return buffer;
}

int cpu_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// A child process with its stdout and stderr on pipes, in its own process
// group (so that a terminal's Ctrl-C reaches the launcher, which cancels
// cleanly), with default signal handling whatever the caller blocked.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

// `with_this_thread`: the child is killed when the thread that started it
// ends, the launcher's process included (PR_SET_PDEATHSIG): mpirun's ranks
// then see mpirun die and close their stores (the worker's own death
// signal). Killed with SIGKILL, the launcher left mpirun and its ranks
// training on (until mpirun's next write to the closed pipe), and the ranks'
// stores in use, so that a rerun with the same --out was refused. SIGKILL,
// not SIGTERM: a dying process's threads each hand the child on and signal
// it again, and mpirun's second SIGTERM ends it at once anyway. The death
// signal follows the thread, not the process: the caller must keep that
// thread until the child is reaped.
Result<Child> spawn(const std::vector<std::string>& argv, bool with_this_thread = false) {
  if (argv.empty()) return Error{"no command to run"};
  const auto program = find_program(argv[0]);
  if (!program) return Error{argv[0] + ": not found (is it installed and on PATH?)"};
  int out_pipe[2];
  int err_pipe[2];
  int exec_pipe[2];  // the child's errno when exec fails; closed by a good exec
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Error{std::string("pipe: ") + std::strerror(errno)};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Error{std::string("pipe: ") + std::strerror(e)};
  }
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    return Error{std::string("pipe: ") + std::strerror(e)};
  }
  // Everything the child needs is made before fork: between fork and exec
  // only async-signal-safe calls (other threads may hold malloc's locks).
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const char* path = program->c_str();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD})
      sigaction(s, &dfl, nullptr);
    if (with_this_thread) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      // The launcher died before the line above: no signal will come.
      if (getppid() != parent) _exit(127);
    }
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != 0) {
      dup2(null_fd, 0);
      close(null_fd);
    }
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execve(path, args.data(), environ);
    const int e = errno;
    [[maybe_unused]] const ssize_t n = write(exec_pipe[1], &e, sizeof e);
    _exit(127);
  }
  const int fork_errno = errno;
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_pipe[1]);
  if (pid < 0) {
    for (int fd : {out_pipe[0], err_pipe[0], exec_pipe[0]})
      close(fd);
    return Error{*program + ": cannot start: " + std::strerror(fork_errno)};
  }
  int exec_errno = 0;
  ssize_t got = 0;
  while ((got = read(exec_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Error{*program + ": cannot start: " + std::strerror(exec_errno)};
  }
  return Child{pid, out_pipe[0], err_pipe[0]};
}

// Runs a short command to its end and returns its exit status and output.
struct Captured {
  int status = -1;
  std::string out;
  std::string err;
};

Result<Captured> run_to_end(const std::vector<std::string>& argv) {
  auto child = spawn(argv);
  if (!child) return child.error();
  Captured c;
  pollfd fds[2] = {{child->out_fd, POLLIN, 0}, {child->err_fd, POLLIN, 0}};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? c.out : c.err).append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return c;
}

std::string join_last(const std::vector<std::string>& lines, std::size_t count) {
  std::string out;
  const std::size_t from = lines.size() > count ? lines.size() - count : 0;
  for (std::size_t i = from; i < lines.size(); ++i)
    out += (out.empty() ? "" : "\n") + lines[i];
  return out;
}

// mpirun's first lines say what went wrong; the rest is advice.
std::string join_first(const std::vector<std::string>& lines, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < count; ++i)
    out += (out.empty() ? "" : "\n") + lines[i];
  return out;
}

}  // namespace

// --- Commands ---------------------------------------------------------------

std::string rank_store_pattern(const std::string& run_store) {
  return run_store_stem(run_store) + ".ranks/rank{rank}.db";
}

std::string run_store_stem(const std::string& run_store) {
  if (run_store.size() > 3 && run_store.ends_with(".db"))
    return run_store.substr(0, run_store.size() - 3);
  return run_store;
}

namespace {

std::string run_lock_path(const std::string& run_store) {
  return run_store_stem(run_store) + ".ranks/run.lock";
}

// A Slurm job's script holds the run's lock on this descriptor while its
// ranks run and its last command merges them; it names it here so that the
// merge, its child, is not refused by its own job's lock.
constexpr const char* kHeldLockFdVariable = "CLUSTERSCOPE_RUN_LOCK_FD";
constexpr int kSlurmLockFd = 9;

// The validated hostfile copies of runs with no store to sit beside (or
// whose hostfile is that place) go to the temporary folder as
// "clusterscope-<pid>-<n>.hosts", removed when the run ends. A launcher
// killed outright (SIGKILL, the machine's OOM killer) cannot; the next one
// removes those whose process is gone. (A pid in use again keeps its file
// until a later start: left, never wrongly taken.)
std::string temp_hostfile_path(int n) {
  return (fs::temp_directory_path() /
          ("clusterscope-" + std::to_string(getpid()) + "-" + std::to_string(n) + ".hosts"))
      .string();
}

void remove_stale_hostfile_copies() {
  std::error_code ec;
  const fs::path folder = fs::temp_directory_path(ec);
  if (ec) return;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("clusterscope-") || !name.ends_with(".hosts")) continue;
    const std::string_view rest = std::string_view(name).substr(13);
    const auto dash = rest.find('-');
    if (dash == std::string_view::npos) continue;
    const auto pid = parse_count(rest.substr(0, dash));
    if (!pid || *pid <= 0 || *pid == getpid()) continue;
    if (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno != ESRCH)
      continue;  // alive, or not ours to tell
    std::error_code remove_ec;
    fs::remove(entry.path(), remove_ec);  // another user's stays (the sticky /tmp)
  }
}

// Whether `fd` is the file now at `path` (not one removed from there).
bool is_file_at(int fd, const std::string& path) {
  struct stat open_file{};
  struct stat at_path{};
  return ::fstat(fd, &open_file) == 0 && ::stat(path.c_str(), &at_path) == 0 &&
         open_file.st_dev == at_path.st_dev && open_file.st_ino == at_path.st_ino;
}

// Whether this process holds `run_store`'s lock through the descriptor its
// parent named.
bool lock_held_by_parent(const std::string& run_store) {
  const char* named = std::getenv(kHeldLockFdVariable);
  const std::optional<int> fd = named ? parse_count(named) : std::nullopt;
  return fd && is_file_at(*fd, run_lock_path(run_store));
}

// Takes the run's lock on `run_store`: the open lock file, -1 where there is
// no lock to take (no lock file when `create` is false; a file system
// without locks, ENOLCK or EOPNOTSUPP, where the run goes unguarded), or an
// error when another run holds it. Opened for writing: NFS emulates flock
// with fcntl locks, whose exclusive lock needs it.
Result<int> take_run_lock(const std::string& run_store, bool create) {
  const std::string path = run_lock_path(run_store);
  // A run that ends removes the lock file, then lets go of it: a lock taken
  // meanwhile on the removed file guards nothing, so it is taken again on
  // the file now at the path.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0) {
      if (!create) return -1;
      return Error{path + ": cannot create: " + std::strerror(errno)};
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const bool held = errno == EWOULDBLOCK;
      ::close(fd);
      if (held) {
        return Error{run_store + ": another run is writing it (its rank stores in " +
                     run_store_stem(run_store) + ".ranks are in use): wait for it to end, or " +
                     "give another --out"};
      }
      return -1;
    }
    if (is_file_at(fd, path)) return fd;
    ::close(fd);
    if (!create) return -1;  // removed: the run that held it has ended
  }
  return Error{path + ": the lock file keeps being replaced: is another run starting?"};
}

}  // namespace

Status check_run_store_free(const std::string& run_store) {
  if (lock_held_by_parent(run_store)) return {};
  auto lock = take_run_lock(run_store, /*create=*/false);
  if (!lock) return lock.error();
  if (*lock >= 0) ::close(*lock);  // the probe's lock, released
  return {};
}

Status check_rank_store_paths(const std::string& run_store, int ranks) {
  std::error_code ec;
  const std::string ranks_dir = run_store_stem(run_store) + ".ranks";
  if (fs::exists(ranks_dir, ec) && !fs::is_directory(ranks_dir, ec))
    return Error{ranks_dir +
                 ": is not a folder: the run keeps its rank stores there; remove it "
                 "or give --out another name"};
  for (int r = 0; r < ranks; ++r) {
    if (Status st = trace::check_store_path(rank_store_path(run_store, r)); !st)
      return Error{st.message() + " (the run keeps rank " + std::to_string(r) + "'s store there)"};
  }
  return {};
}

std::optional<int> rank_of_store_file(std::string_view file_name) {
  if (!file_name.starts_with("rank") || !file_name.ends_with(".db")) return std::nullopt;
  const std::string_view digits = file_name.substr(4, file_name.size() - 7);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  // Past an int is past any plan: read as the largest rank, not passed over.
  return parse_count(digits).value_or(std::numeric_limits<int>::max());
}

std::string rank_store_path(const std::string& run_store, int rank) {
  return run_store_stem(run_store) + ".ranks/rank" + std::to_string(rank) + ".db";
}

std::vector<std::string> worker_command(const RunSpec& spec) {
  std::vector<std::string> argv{spec.worker};
  argv.insert(argv.end(), spec.worker_args.begin(), spec.worker_args.end());
  if (!spec.run_id.empty()) {
    argv.push_back("--run-id");
    argv.push_back(spec.run_id);
  }
  if (!spec.run_store.empty()) {
    argv.push_back("--out");
    argv.push_back(rank_store_pattern(spec.run_store));
  }
  if (!spec.title.empty()) {
    argv.push_back("--title");
    argv.push_back(spec.title);
  }
  return argv;
}

std::vector<std::string> mpirun_command(const RunSpec& spec, const std::string& hostfile_copy) {
  std::vector<std::string> argv{spec.mpirun, "-n", std::to_string(spec.ranks), "--tag-output"};
  // The worker sizes its BLAS threads to the cores: binding each rank to one
  // core would serialise them.
  argv.insert(argv.end(), {"--bind-to", "none"});
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  if (spec.placement == Placement::hostfile) {
    argv.push_back("--hostfile");
    argv.push_back(hostfile_copy);
  } else if (spec.ranks > cpu_cores()) {
    argv.push_back("--oversubscribe");
  }
  const auto worker = worker_command(spec);
  argv.insert(argv.end(), worker.begin(), worker.end());
  return argv;
}

std::string shell_quote(std::string_view argument) {
  if (!argument.empty() && std::all_of(argument.begin(), argument.end(), [](unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '/' || c == '=' || c == ',' || c == ':' ||
               c == '+' || c == '@' || c == '%';
      })) {
    return std::string(argument);
  }
  std::string out = "'";
  for (char c : argument) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv)
    out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

Result<std::string> slurm_script(const RunSpec& spec) {
  const SlurmOptions& s = spec.slurm;
  auto check = [](std::string_view field, const std::string& value) -> Status {
    if (value.empty() || plain_sbatch_value(value)) return {};
    return Error{
        "Slurm " + std::string(field) + " \"" + value +
        "\" holds characters a #SBATCH line cannot carry (letters, digits and -_.,:/%+= only)"};
  };
  for (const auto& [field, value] :
       {std::pair<std::string_view, const std::string&>{"partition", s.partition},
        {"account", s.account},
        {"time limit", s.time_limit}}) {
    if (Status st = check(field, value); !st) return st.error();
  }
  const std::string output =
      run_store_stem(spec.run_store.empty() ? "clusterscope-run" : spec.run_store) + ".slurm-%j.out";
  if (Status st = check("output path", output); !st) return st.error();
  if (spec.ranks < 1) return Error{"a Slurm job needs at least one rank"};

  std::ostringstream out;
  out << "#!/bin/bash\n";
  out << "# ClusterScope training run, generated by the launcher. Every value below\n";
  out << "# is quoted: nothing from the plan or the title is run by the shell.\n";
  out << "#SBATCH --job-name=" << job_name(spec.title) << '\n';
  out << "#SBATCH --ntasks=" << spec.ranks << '\n';
  if (s.nodes > 0) out << "#SBATCH --nodes=" << s.nodes << '\n';
  if (s.cpus_per_task > 0) out << "#SBATCH --cpus-per-task=" << s.cpus_per_task << '\n';
  if (!s.partition.empty()) out << "#SBATCH --partition=" << s.partition << '\n';
  if (!s.account.empty()) out << "#SBATCH --account=" << s.account << '\n';
  if (!s.time_limit.empty()) out << "#SBATCH --time=" << s.time_limit << '\n';
  out << "#SBATCH --output=" << output << '\n';
  out << "set -u\n";
  if (!spec.run_store.empty()) {
    out << "mkdir -p " << shell_quote(run_store_stem(spec.run_store) + ".ranks") << '\n';
    // The run's lock, held by the job until it ends (as a run from mpirun
    // holds it): a second run given the same store is refused instead of
    // writing over this one's rank stores.
    const std::string busy = "clusterscope: " + spec.run_store + ": another run is writing it " +
                             "(its rank stores in " + run_store_stem(spec.run_store) +
                             ".ranks are in use): this job starts nothing";
    out << "if command -v flock > /dev/null 2>&1; then\n"
        << "  exec " << kSlurmLockFd << ">> " << shell_quote(run_lock_path(spec.run_store)) << '\n'
        << "  if ! flock -n " << kSlurmLockFd << "; then\n"
        << "    echo " << shell_quote(busy) << " >&2\n"
        << "    exit 1\n"
        << "  fi\n"
        << "  export " << kHeldLockFdVariable << '=' << kSlurmLockFd << '\n'
        << "fi\n";
  }
  std::vector<std::string> srun{"srun", "--mpi=" + (s.srun_mpi.empty() ? "pmix" : s.srun_mpi),
                                "--kill-on-bad-exit=1"};
  std::vector<std::string> worker = worker_command(spec);
  if (s.cpus_per_task > 0) {
    worker.insert(worker.begin() + 1, {"--threads", std::to_string(s.cpus_per_task)});
  }
  srun.insert(srun.end(), worker.begin(), worker.end());
  out << command_text(srun) << '\n';
  out << "status=$?\n";
  if (!s.after_command.empty()) {
    // The job fails with the merge too (it says how the ranks ended).
    out << command_text(s.after_command) << '\n';
    out << "merged=$?\n";
    out << "if [ \"$status\" -eq 0 ]; then status=$merged; fi\n";
  }
  out << "exit $status\n";
  return out.str();
}

std::optional<std::string> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (is_executable(name)) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    const std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    if (is_executable(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

std::optional<std::string> find_beside_or_on_path(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string beside = (self.parent_path() / name).string();
    if (is_executable(beside)) return beside;
  }
  return find_program(name);
}

std::optional<std::string> find_worker() {
  return find_beside_or_on_path("clusterscope-worker");
}

Status check_mpirun_found(const std::string& mpirun) {
  if (find_program(mpirun)) return {};
  return Error{mpirun + ": not found (is Open MPI installed, and its mpirun on PATH?)"};
}

std::string_view to_string(RankState s) {
  switch (s) {
    case RankState::starting:
      return "starting";
    case RankState::running:
      return "running";
    case RankState::done:
      return "done";
    case RankState::cancelled:
      return "cancelled";
    case RankState::failed:
      return "failed";
    case RankState::lost:
      return "lost";
  }
  return "unknown";
}

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::completed:
      return "complete";
    case Outcome::cancelled:
      return "cancelled";
    case Outcome::crashed:
      return "crashed";
    case Outcome::hung:
      return "hung";
    case Outcome::failed:
      return "failed";
    case Outcome::submitted:
      return "submitted";
    case Outcome::script_only:
      return "script-only";
  }
  return "unknown";
}

std::string sweep_title(std::string_view sweep, std::string_view precisions) {
  if (sweep == "layer_gemm" || sweep == "gemm") {
    std::string listed;
    for (char c : precisions)
      listed += c == ',' ? std::string(", ") : std::string(1, c);
    return listed.empty() ? "GEMMs" : "GEMMs in " + listed;
  }
  if (sweep == "bandwidth") return "memory bandwidth";
  if (sweep == "ops") return "operations";
  if (sweep == "all_reduce") return "all-reduces";
  return std::string(sweep);
}

// --- The running launcher -----------------------------------------------------

struct Launcher::State {
  RunSpec spec;
  Callback callback;

  mutable std::mutex mutex;
  std::condition_variable done_cv;
  std::deque<LaunchEvent> queue;
  std::vector<RankStatus> ranks;
  std::vector<std::string> mpirun_lines;
  RunReport report;
  bool started = false;
  bool done = false;
  std::atomic<bool> cancel_requested{false};
  std::atomic<bool> kill_requested{false};
  bool killed = false;  // by kill_requested (monitor thread)
  std::thread thread;
  // The validated hostfile written to the temporary folder when the run has
  // no store to sit beside; removed when the run ends.
  std::string temp_hostfile;

  // Owned by the monitor thread.
  Child child;
  MpirunNotices notices;
  TaggedLineAssembler assembler[2];  // mpirun's stdout, stderr
  std::string out_buffer, err_buffer;
  Clock::time_point last_progress;
  // Stopping a run (cancel, hang): SIGUSR1 to mpirun, which forwards it to
  // every rank on every host; each closes its store and idles. Once every
  // rank has said so (or kill_grace has passed), SIGTERM to mpirun, which
  // ends the ranks; SIGKILL if that has not worked 10 s later. (A SIGTERM
  // first would not do: mpirun kills the ranks one second after forwarding
  // it, too soon to close a large store.)
  int mpirun_signal = 0;  // the signal that ended mpirun, 0 when it exited
  enum class Stop { none, closing, terminating, killed };
  Stop stop = Stop::none;
  Clock::time_point stop_deadline;
  bool hung = false;
  std::chrono::milliseconds hung_after{0};  // the patience the hang outlasted
  std::string stopped_when_hung;  // the ranks held stopped when the hang was seen

  void emit(LaunchEvent e) {
    if (callback) {
      callback(e);
      return;
    }
    std::lock_guard lock(mutex);
    queue.push_back(std::move(e));
  }

  void note(std::string text) {
    LaunchEvent e;
    e.kind = LaunchEvent::Kind::message;
    e.text = std::move(text);
    emit(std::move(e));
  }

  RankStatus* rank_status(int rank) {
    if (rank < 0 || rank >= static_cast<int>(ranks.size())) return nullptr;
    return &ranks[static_cast<std::size_t>(rank)];
  }

  static void keep_last(std::vector<std::string>& lines, std::string line, std::size_t limit) {
    lines.push_back(std::move(line));
    if (lines.size() > limit) lines.erase(lines.begin(), lines.begin() + (lines.size() - limit));
  }

  // A figure of a step line. JSON has no infinity nor NaN: the worker's
  // null (the gradient norm of a step skipped for overflowed FP16
  // gradients) reads as NaN. It threw here, and the whole step line was
  // taken for text: the step was not counted, nor progress seen.
  static double number_or_nan(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end()) return 0;
    if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
    return it->get<double>();
  }

  // A sweep sample's sweep and point, for a progress line.
  static void describe_sample(const std::string& event, const nlohmann::json& j, LaunchEvent& e) {
    if (event == "gemm") {
      const std::string layout = j.value("layout", "");
      e.sweep = sweep_title("layer_gemm", j.value("precision", std::string("?")));
      e.text = std::to_string(j.value("m", std::int64_t{0})) + "x" +
               std::to_string(j.value("n", std::int64_t{0})) + "x" +
               std::to_string(j.value("k", std::int64_t{0})) +
               (layout.empty() || layout == "nt" ? "" : " " + layout);
    } else if (event == "bandwidth") {
      // The sample's bytes are the pass's: two buffers read, one written.
      e.sweep = sweep_title("bandwidth");
      e.text = format_bytes(j.value("bytes", 0.0) / 3) + " buffers";
    } else if (event == "op") {
      e.sweep = sweep_title("ops");
      e.text = j.value("operation", std::string("?")) + ", " +
               format_count(j.value("elements", 0.0)) + " elements";
    } else {
      e.sweep = sweep_title("all_reduce") + (j.value("cold", false) ? ", caches cold" : "");
      const int ranks = j.value("ranks", 0);
      e.text = format_bytes(j.value("bytes", 0.0)) + " over " + std::to_string(ranks) +
               (ranks == 1 ? " rank" : " ranks");
    }
  }

  void handle_rank_json(int rank, const nlohmann::json& j) {
    const std::string event = j.value("event", "");
    LaunchEvent e;
    e.rank = rank;
    {
      std::lock_guard lock(mutex);
      RankStatus* r = rank_status(rank);
      if (!r) return;
      // A calibration's ranks announce their sweeps instead of training: their
      // pid too, without which a stop or a kill could not reach them.
      if (event == "start" || event == "sweep_start") {
        r->state = RankState::running;
        r->host = j.value("host", "");
        r->pid = j.value("pid", std::int64_t{0});
        r->steps = j.value("steps", 0);
        r->store = j.value("store", "");
        r->sample_points = j.value("points", 0);
        e.kind = LaunchEvent::Kind::rank_started;
        e.steps = r->steps;
        e.text = "rank " + std::to_string(rank) + " started" +
                 (r->host.empty() ? "" : " on " + r->host) +
                 (r->pid ? " (pid " + std::to_string(r->pid) + ")" : "");
        last_progress = Clock::now();
      } else if (event == "step") {
        r->step = j.value("step", -1);
        r->steps = j.value("steps", r->steps);
        r->loss = number_or_nan(j, "loss");
        r->grad_norm = number_or_nan(j, "grad_norm");
        r->step_seconds = j.value("step_seconds", 0.0);
        r->cpu_seconds = j.value("cpu_seconds", 0.0);
        r->tokens_per_second = j.value("tokens_per_second", 0.0);
        r->memory_bytes = j.value("memory_bytes", std::int64_t{0});
        e.kind = LaunchEvent::Kind::step;
        e.step = r->step;
        e.steps = r->steps;
        e.loss = r->loss;
        e.grad_norm = r->grad_norm;
        e.step_seconds = r->step_seconds;
        e.cpu_seconds = r->cpu_seconds;
        e.tokens_per_second = r->tokens_per_second;
        last_progress = Clock::now();
      } else if (event == "done") {
        r->state = RankState::done;
        e.kind = LaunchEvent::Kind::rank_done;
        e.step = r->step;
        e.text = "rank " + std::to_string(rank) + " finished";
      } else if (event == "cancelled") {
        // A rank that reported an error before the job's end reached it failed.
        if (r->state != RankState::failed) r->state = RankState::cancelled;
        e.kind = LaunchEvent::Kind::message;
        e.text = "rank " + std::to_string(rank) + " stopped (signal " +
                 std::to_string(j.value("signal", 0)) + ")";
        // A close that failed (a full disk) leaves the store as committed
        // before; "closed its store" said otherwise, and so it did of a rank
        // that had made none (a signal before it had, or a failed create).
        const std::string close_error = j.value("close_error", "");
        const std::string store = j.value("store", "");
        if (!close_error.empty()) {
          e.text +=
              "; its store holds what it committed before, as its close failed: " + close_error;
        } else if (store == "none") {
          e.text += "; it had made no store";
        } else if (store == "closed") {
          e.text += "; its store was closed before";
        } else {
          e.text += " and closed its store";
        }
      } else if (event == "gemm" || event == "bandwidth" || event == "op" ||
                 event == "collective") {
        // A calibration's sample: its progress, as a step is a run's (a
        // sweep making samples for longer than the hang timeout was
        // stopped as hung).
        ++r->samples;
        last_progress = Clock::now();
        e.kind = LaunchEvent::Kind::sample;
        e.step = r->samples;
        e.steps = r->sample_points;
        describe_sample(event, j, e);
      } else if (event == "error") {
        r->state = RankState::failed;
        r->error = j.value("message", "");
        e.kind = LaunchEvent::Kind::rank_failed;
        e.text = "rank " + std::to_string(rank) + ": " + r->error;
      } else {
        return;
      }
    }
    emit(std::move(e));
  }

  void handle_line(bool from_stderr, std::string_view line) {
    assembler[from_stderr].feed(line, [this](const TaggedLine& tagged) { handle_tagged(tagged); });
  }

  void handle_tagged(const TaggedLine& tagged) {
    const std::string_view line = tagged.text;
    if (tagged.rank < 0) {
      notices.feed(line);
      const bool rule = line.find_first_not_of('-') == std::string_view::npos;
      if (line.empty() || rule) return;
      {
        std::lock_guard lock(mutex);
        keep_last(mpirun_lines, std::string(line), kMpirunLines);
      }
      note(std::string(line));
      return;
    }
    if (!tagged.stderr_stream && tagged.text.starts_with("{")) {
      const auto j = parse_json_text(tagged.text);
      if (j.is_object() && j.contains("event")) {
        try {
          handle_rank_json(tagged.rank, j);
          return;
        } catch (const nlohmann::json::exception&) {
          // A field of the wrong type: not a line of ours; kept as text below.
        }
      }
    }
    std::lock_guard lock(mutex);
    if (RankStatus* r = rank_status(tagged.rank)) {
      keep_last(r->last_lines, std::string(tagged.text), kLastLines);
    }
  }

  // Splits what arrived into lines; a partial last line waits for its end.
  void consume(std::string& buffer, bool from_stderr, const char* data, std::size_t n) {
    buffer.append(data, n);
    std::size_t start = 0;
    for (;;) {
      const std::size_t end = buffer.find('\n', start);
      if (end == std::string::npos) break;
      handle_line(from_stderr, std::string_view(buffer).substr(start, end - start));
      start = end + 1;
    }
    buffer.erase(0, start);
  }

  void request_stop(const std::string& why) {
    if (stop != Stop::none) return;
    stop = Stop::closing;
    stop_deadline = Clock::now() + spec.kill_grace;
    tell_ranks_to_stop();
    LaunchEvent e;
    e.kind = LaunchEvent::Kind::stopping;
    e.text = why;
    emit(std::move(e));
  }

  // Ranks that had started when they were last told to stop. A rank that
  // starts after the stop was asked for (a Ctrl-C just after mpirun began)
  // missed it: mpirun forwards a signal only to the ranks it has, and had
  // none then. Told again as ranks start, it stops within a step instead of
  // training on until the grace runs out.
  std::size_t ranks_told = 0;

  std::size_t ranks_started() {
    std::lock_guard lock(mutex);
    return static_cast<std::size_t>(
        std::count_if(ranks.begin(), ranks.end(),
                      [](const RankStatus& r) { return r.state != RankState::starting; }));
  }

  void tell_ranks_to_stop() {
    ranks_told = ranks_started();
    // mpirun stopped (SIGSTOP, a debugger) would hold the signal it forwards:
    // continued first.
    if (child.pid > 0) {
      ::kill(child.pid, SIGCONT);
      ::kill(child.pid, SIGUSR1);
    }
    // A stopped rank (SIGSTOP, ^Z) would hold SIGUSR1 until mpirun's SIGTERM
    // continued it, and mpirun kills a second later: too soon, on a busy
    // machine, to commit what the rank had buffered. Continued now, it
    // closes its store like the others. The ranks on this host are also told
    // directly, whatever state mpirun is in (a second SIGUSR1 changes nothing).
    // SIGUSR1 first: pending as a stopped rank resumes, it closes the
    // store at once (what a stall held in flight is not work: OpTracer).
    for (const auto& [rank, pid] : local_ranks()) {
      ::kill(static_cast<pid_t>(pid), SIGUSR1);
      ::kill(static_cast<pid_t>(pid), SIGCONT);
    }
  }

  bool every_rank_closed() {
    std::lock_guard lock(mutex);
    return std::all_of(ranks.begin(), ranks.end(), [](const RankStatus& r) {
      return r.state == RankState::cancelled || r.state == RankState::done ||
             r.state == RankState::failed;
    });
  }

  void advance_stop() {
    if (stop == Stop::closing && ranks_started() > ranks_told) tell_ranks_to_stop();
    if (stop == Stop::closing && (every_rank_closed() || Clock::now() > stop_deadline)) {
      stop = Stop::terminating;
      stop_deadline = Clock::now() + std::chrono::seconds(10);
      if (child.pid > 0) ::kill(child.pid, SIGTERM);
    } else if (stop == Stop::terminating && Clock::now() > stop_deadline) {
      stop = Stop::killed;
      force_kill("the job did not end 10 s after SIGTERM: killed it (SIGKILL)");
    }
  }

  // The ranks on this host that have reported their pid, and whose pid is
  // still this run's worker: a rank of another host of the same name, or in
  // a PID namespace of its own (a container), reports a pid that is another
  // process here, which must never be signalled.
  std::vector<std::pair<int, std::int64_t>> local_ranks() {
    std::vector<std::pair<int, std::int64_t>> candidates;
    {
      std::lock_guard lock(mutex);
      const std::string host = this_host_name();
      for (const RankStatus& r : ranks) {
        if (r.pid > 0 && (r.host.empty() || r.host == host)) candidates.emplace_back(r.rank, r.pid);
      }
    }
    std::vector<std::pair<int, std::int64_t>> out;
    for (const auto& rank_pid : candidates) {
      if (runs_the_worker(rank_pid.second)) out.push_back(rank_pid);
    }
    return out;
  }

  bool runs_the_worker(std::int64_t pid) const {
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string program;
    std::getline(cmdline, program, '\0');
    return !program.empty() &&
           fs::path(program).filename() == fs::path(spec.worker).filename();
  }

  void force_kill(const std::string& why) {
    if (child.pid > 0) ::kill(-child.pid, SIGKILL);
    for (const auto& [rank, pid] : local_ranks())
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    note(why);
  }

  // A process's state letter from /proc ('R', 'S', 'T' stopped, 'Z' a
  // zombie...), 0 when there is no such process.
  static char process_state(std::int64_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    // "pid (command) S ...": the state follows the command's closing parenthesis.
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) return 0;
    return line[close + 2];
  }
  static bool stopped(char state) { return state == 'T' || state == 't'; }

  // Ranks on this host that the system holds stopped (SIGSTOP, a debugger):
  // one such rank stalls every other in its collectives, so the steps alone
  // do not say which rank hangs the run. Each is named with its host, pid
  // and the last op its store holds (kept in hung_ranks for the report).
  std::string stopped_ranks_text() {
    std::string out;
    // mpirun stopped relays no output and forwards no signal: every rank
    // stalls writing its progress, and none would close its store.
    if (child.pid > 0 && stopped(process_state(child.pid))) {
      out += "; " + spec.mpirun + " (pid " + std::to_string(child.pid) +
             ") is stopped (SIGSTOP or a debugger)";
    }
    std::vector<std::int64_t> named;
    const std::string here = this_host_name();
    for (const auto& [rank, pid] : local_ranks()) {
      named.push_back(pid);
      if (stopped(process_state(pid))) {
        out += "; " + held_rank(rank, pid, here, "is stopped (SIGSTOP or a debugger)");
      }
    }
    // A rank stopped before it said it had started has told no pid: found
    // among mpirun's descendants, its rank read from the environment mpirun
    // gave it.
    if (child.pid <= 0) return out;
    for (const std::int64_t pid : descendants_of(child.pid)) {
      if (std::find(named.begin(), named.end(), pid) != named.end() || !stopped(process_state(pid)))
        continue;
      const std::optional<int> rank = rank_in_environment(pid);
      if (rank && !rank_started(*rank)) {
        out += "; " +
               held_rank(*rank, pid, here, ", not yet started, is stopped (SIGSTOP or a debugger)");
      } else if (rank) {
        out += "; " + held_rank(*rank, pid, here, "is stopped (SIGSTOP or a debugger)");
      } else {
        out += "; pid " + std::to_string(pid) + " of the job is stopped (SIGSTOP or a debugger)";
      }
    }
    return out;
  }

  // "rank 1 (host, pid 123) is stopped ...; its last recorded op: ...", and
  // the rank kept in hung_ranks.
  std::string held_rank(int rank, std::int64_t pid, const std::string& host,
                        const std::string& state) {
    HungRank h;
    h.rank = rank;
    h.host = host;
    h.pid = pid;
    h.state = state.starts_with(", ") ? state.substr(2) : state;
    std::string unread;
    if (!spec.run_store.empty()) {
      const LastOp op = last_recorded_op(rank_store_path(spec.run_store, rank));
      h.last_op = op.name;
      h.last_op_end_ns = op.end_ns;
      unread = op.error;
    }
    hung_ranks.push_back(h);
    return "rank " + std::to_string(rank) + " (" + host + ", pid " + std::to_string(pid) + ")" +
           (state.starts_with(",") ? "" : " ") + state + last_op_text(h, unread);
  }

  std::vector<HungRank> hung_ranks;  // the ranks named in the hang's text

  // The op a rank's store holds last (the latest end on a lane of work:
  // compute, communication, a GPU stream), of what it has committed (up to
  // half a second behind); no name when it holds none, and why when the
  // store cannot be read.
  struct LastOp {
    std::string name;
    std::int64_t end_ns = 0;
    std::string error;
  };
  static LastOp last_recorded_op(const std::string& store) {
    trace::TraceReader::Options as_it_is;
    as_it_is.repair = false;  // its writer is alive, stopped
    auto reader = trace::TraceReader::open(store, as_it_is);
    if (!reader) return LastOp{{}, 0, reader.message()};
    const trace::TraceReader& r = **reader;
    // Ids do not follow time (the writer appends a batch a lane): the lane
    // whose events end last, and the op running at its end.
    const trace::LaneInfo* last = nullptr;
    for (const trace::LaneInfo& lane : r.lanes()) {
      const bool work = lane.kind == trace::LaneKind::cpu_thread ||
                        lane.kind == trace::LaneKind::communication ||
                        lane.kind == trace::LaneKind::gpu_stream;
      if (work && lane.event_count > 0 && (!last || lane.last_ns > last->last_ns)) last = &lane;
    }
    if (!last) return {};
    auto e = r.event_at(last->id, last->last_ns - 1);
    if (!e) return LastOp{{}, 0, e.message()};
    if (!*e) return {};
    return LastOp{
        r.string((*e)->event.name) + " on its " + last->name + " lane", (*e)->event.end_ns, {}};
  }

  // "; its last recorded op: NAME, ended at 12:00:03.123 UTC (4.2 s before the
  // hang was seen)", or that its store holds none.
  std::string last_op_text(const HungRank& h, const std::string& unread) const {
    if (spec.run_store.empty()) return {};
    if (!unread.empty()) return "; its store cannot be read for its last op: " + unread;
    if (h.last_op.empty()) return "; its store holds no op yet (it commits every half second)";
    const std::int64_t now = trace::run_clock_ns();
    const std::time_t seconds = static_cast<std::time_t>(h.last_op_end_ns / 1'000'000'000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char clock[64];
    std::snprintf(clock, sizeof clock, "%02d:%02d:%02d.%03d UTC", utc.tm_hour, utc.tm_min,
                  utc.tm_sec, static_cast<int>(h.last_op_end_ns / 1'000'000 % 1000));
    char before[32];
    std::snprintf(before, sizeof before, "%.1f s", (now - h.last_op_end_ns) * 1e-9);
    return "; its last recorded op: " + h.last_op + ", ended at " + clock + " (" + before +
           " before the hang was seen)";
  }

  bool rank_started(int rank) {
    std::lock_guard lock(mutex);
    return rank >= 0 && rank < static_cast<int>(ranks.size()) &&
           ranks[static_cast<std::size_t>(rank)].state != RankState::starting;
  }

  // Every process below `root` (children, grandchildren...), from /proc.
  static std::vector<std::int64_t> descendants_of(std::int64_t root) {
    std::vector<std::pair<std::int64_t, std::int64_t>> parent_of;  // (pid, parent)
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      const std::optional<std::int64_t> pid = parse_count<std::int64_t>(name);
      if (!pid) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      // "pid (command) S ppid ...": fields after the command's parenthesis.
      const std::size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 1));
      std::string state;
      std::int64_t parent = 0;
      if (rest >> state >> parent) parent_of.emplace_back(*pid, parent);
    }
    std::vector<std::int64_t> out{root};
    for (std::size_t i = 0; i < out.size(); ++i) {
      for (const auto& [pid, parent] : parent_of)
        if (parent == out[i]) out.push_back(pid);
    }
    out.erase(out.begin());
    return out;
  }

  // The rank MPI or Slurm gave a process, from its environment: mpirun's
  // own first, since its ranks inherit a batch step's SLURM_PROCID.
  static std::optional<int> rank_in_environment(std::int64_t pid) {
    static constexpr std::string_view kKeys[] = {
        "OMPI_COMM_WORLD_RANK=", "PMIX_RANK=", "PMI_RANK=", "SLURM_PROCID="};
    std::optional<int> found[std::size(kKeys)];
    std::ifstream environ("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string entry;
    while (std::getline(environ, entry, '\0')) {
      for (std::size_t k = 0; k < std::size(kKeys); ++k) {
        if (entry.starts_with(kKeys[k]))
          found[k] = parse_count(std::string_view(entry).substr(kKeys[k].size()));
      }
    }
    for (const std::optional<int>& rank : found)
      if (rank) return rank;
    return std::nullopt;
  }

  // Ranks mpirun left running when a signal ended it (kill -9, the OOM
  // killer) see it gone and close their stores as cancelled; merged before
  // they have, the run lost their last steps and its rank stores read as
  // still written. Told to close now, waited for up to kill_grace, then
  // killed; a rank whose store is closed already is ended at once.
  void wait_for_orphaned_ranks() {
    {
      std::vector<std::int64_t> closed;
      {
        std::lock_guard lock(mutex);
        for (const RankStatus& r : ranks) {
          if (r.state == RankState::cancelled || r.state == RankState::done ||
              r.state == RankState::failed)
            closed.push_back(r.pid);
        }
      }
      for (const auto& [rank, pid] : local_ranks()) {
        if (std::find(closed.begin(), closed.end(), pid) != closed.end())
          ::kill(static_cast<pid_t>(pid), SIGKILL);
      }
    }
    auto alive = [](std::int64_t pid) {
      const char state = process_state(pid);
      return state != 0 && state != 'Z' && state != 'X';
    };
    const auto deadline = Clock::now() + spec.kill_grace;
    bool told = false;
    for (;;) {
      std::vector<std::pair<int, std::int64_t>> left;
      for (const auto& rank_pid : local_ranks()) {
        if (alive(rank_pid.second)) left.push_back(rank_pid);
      }
      if (left.empty()) return;
      if (!told) {
        // Told to close now, as a cancelled run's ranks are.
        for (const auto& [rank, pid] : left) {
          ::kill(static_cast<pid_t>(pid), SIGCONT);
          ::kill(static_cast<pid_t>(pid), SIGUSR1);
        }
        told = true;
      }
      if (Clock::now() > deadline) {
        for (const auto& [rank, pid] : left)
          ::kill(static_cast<pid_t>(pid), SIGKILL);
        note("ranks outlived " + spec.mpirun + " by " + seconds_text(spec.kill_grace) +
             ": killed them (SIGKILL)");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Each rank's steps done; past kRanksNamed ranks, the first few and a
  // count of the others (100,000 ranks made a line of megabytes).
  std::string last_steps_text() {
    std::lock_guard lock(mutex);
    std::string out;
    const std::size_t named = ranks.size() <= kRanksNamed ? ranks.size() : kRanksNamed / 2;
    for (std::size_t i = 0; i < named; ++i) {
      const RankStatus& r = ranks[i];
      // A count, not a step's number: the timeline numbers steps from 0 (as
      // PyTorch's ProfilerStep#0), the progress lines count from 1.
      const std::string rank = "rank " + std::to_string(r.rank);
      out += (out.empty() ? "" : ", ") +
             (r.state == RankState::starting ? rank + " not started"
              : r.step >= 0                  ? std::to_string(r.step + 1) + " by " + rank
              : r.samples > 0 ? "none by " + rank + " (" + std::to_string(r.samples) +
                                    (r.samples == 1 ? " sweep sample)" : " sweep samples)")
                              : "none by " + rank);
    }
    if (named == ranks.size()) return out;
    std::size_t not_started = 0, without_step = 0, with_steps = 0;
    int fewest = std::numeric_limits<int>::max(), most = 0;
    for (std::size_t i = named; i < ranks.size(); ++i) {
      const RankStatus& r = ranks[i];
      if (r.state == RankState::starting) {
        ++not_started;
      } else if (r.step < 0) {
        ++without_step;
      } else {
        ++with_steps;
        fewest = std::min(fewest, r.step + 1);
        most = std::max(most, r.step + 1);
      }
    }
    std::string rest;
    auto part = [&rest](std::size_t n, const std::string& what) {
      if (n > 0) rest += (rest.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    part(not_started, "not started");
    part(without_step, "with none");
    part(with_steps, fewest == most
                         ? "with " + std::to_string(most)
                         : "with " + std::to_string(fewest) + " to " + std::to_string(most));
    return out + ", and " + std::to_string(ranks.size() - named) + " more ranks (" + rest + ")";
  }

  bool every_rank_started() {
    std::lock_guard lock(mutex);
    return std::none_of(ranks.begin(), ranks.end(),
                        [](const RankStatus& r) { return r.state == RankState::starting; });
  }

  void monitor() {
    {
      LaunchEvent e;
      e.kind = LaunchEvent::Kind::started;
      e.text = command_text(report.command);  // set before this thread started
      emit(std::move(e));
    }
    last_progress = Clock::now();
    pollfd fds[2] = {{child.out_fd, POLLIN, 0}, {child.err_fd, POLLIN, 0}};
    bool reaped = false;
    int status = 0;
    Clock::time_point reaped_at;
    char buffer[65536];
    for (;;) {
      const bool pipes_open = fds[0].fd >= 0 || fds[1].fd >= 0;
      if (pipes_open) {
        const int n = poll(fds, 2, 100);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
          if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          const ssize_t got = read(fds[i].fd, buffer, sizeof buffer);
          if (got > 0) {
            consume(i == 0 ? out_buffer : err_buffer, i == 1, buffer,
                    static_cast<std::size_t>(got));
          } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
            close(fds[i].fd);
            fds[i].fd = -1;
          }
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!reaped) {
        const pid_t r = waitpid(child.pid, &status, WNOHANG);
        if (r == child.pid) {
          reaped = true;
          reaped_at = Clock::now();
        }
      }
      // mpirun has ended: its pipes close with it, unless ranks it left
      // behind still hold them; those are ended (they are in its process
      // group) after a moment.
      if (reaped && !(fds[0].fd >= 0 || fds[1].fd >= 0)) break;
      if (reaped && Clock::now() - reaped_at > std::chrono::seconds(2)) {
        ::kill(-child.pid, SIGKILL);
        note("ranks outlived mpirun: killed them (SIGKILL)");
        break;
      }
      if (reaped) continue;
      // Before the cancel below: both asked at once, the job is killed
      // without first being told to close.
      if (kill_requested && stop != Stop::killed) {
        cancel_requested = true;  // reported and merged as a cancelled run
        stop = Stop::killed;
        killed = true;
        force_kill("killed the job at once, as asked (SIGKILL), without waiting for the ranks");
      }
      if (cancel_requested && stop == Stop::none) {
        request_stop("cancelling: every rank closes its store, then the job ends");
      }
      const auto patience = every_rank_started() ? spec.hang_timeout
                                                 : std::max(spec.hang_timeout, spec.startup_timeout);
      if (stop == Stop::none && spec.hang_timeout.count() > 0 &&
          Clock::now() - last_progress > patience) {
        hung = true;
        hung_after = patience;
        stopped_when_hung = stopped_ranks_text();
        const std::string text = "no progress for " + seconds_text(patience) +
                                 "; steps done: " + last_steps_text() + stopped_when_hung;
        LaunchEvent e;
        e.kind = LaunchEvent::Kind::hung;
        e.text = text;
        emit(std::move(e));
        request_stop("the run is hung: every rank closes its store, then the job ends");
      }
      advance_stop();
    }
    for (pollfd& f : fds) {
      if (f.fd >= 0) close(f.fd);
    }
    if (!out_buffer.empty()) handle_line(false, out_buffer);
    if (!err_buffer.empty()) handle_line(true, err_buffer);
    if (!reaped) {
      while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (WIFSIGNALED(status)) wait_for_orphaned_ranks();
    const int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    mpirun_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    finish(exit_status);
  }

  void finish(int exit_status) {
    RunReport r;
    {
      std::lock_guard lock(mutex);
      r.command = report.command;
      r.exit_status = exit_status;
      r.mpirun_lines = mpirun_lines;
      r.ranks = ranks;
    }
    r.killed = killed;
    const bool all_done = std::all_of(r.ranks.begin(), r.ranks.end(), [](const RankStatus& s) {
      return s.state == RankState::done;
    });
    const bool any_started = std::any_of(r.ranks.begin(), r.ranks.end(), [](const RankStatus& s) {
      return s.state != RankState::starting;
    });
    const RankStatus* errored = nullptr;
    for (const RankStatus& s : r.ranks) {
      if (!s.error.empty()) {
        errored = &s;
        break;
      }
    }
    const auto& notice = notices.failure();
    // A rank killed by a signal the job's stop never sends (kill -9 when the
    // launcher killed nothing, a segfault) before it closed its store: a
    // crash, though a cancel was asked. Reported as cancelled, the run store
    // hid the rank's loss. (A rank still starting dies of the stop's own
    // SIGUSR1, SIGINT or SIGTERM: that is the cancel.)
    const auto crash_signal = [](int signal) {
      return signal == SIGKILL || signal == SIGSEGV || signal == SIGABRT || signal == SIGBUS ||
             signal == SIGFPE || signal == SIGILL;
    };
    bool died_while_cancelled = false;
    if (cancel_requested && notice && crash_signal(notice->signal) && stop != Stop::killed) {
      const auto rank = std::find_if(r.ranks.begin(), r.ranks.end(),
                                     [&](const RankStatus& s) { return s.rank == notice->rank; });
      died_while_cancelled = rank == r.ranks.end() || (rank->state != RankState::cancelled &&
                                                       rank->state != RankState::done);
    }

    auto failure_of = [&](int rank) {
      RankFailure f;
      f.rank = rank;
      if (rank >= 0 && rank < static_cast<int>(r.ranks.size())) {
        const RankStatus& s = r.ranks[static_cast<std::size_t>(rank)];
        f.host = s.host;
        f.pid = s.pid;
        f.last_lines = s.last_lines;
      }
      return f;
    };

    if (all_done && exit_status == 0) {
      r.outcome = Outcome::completed;
      const int steps = r.ranks.empty() ? 0 : r.ranks.front().step + 1;
      r.message = "the run completed: " + std::to_string(r.ranks.size()) +
                  (r.ranks.size() == 1 ? " rank, " : " ranks, ") + std::to_string(steps) +
                  (steps == 1 ? " step" : " steps");
    } else if (cancel_requested && !died_while_cancelled) {
      r.outcome = Outcome::cancelled;
      r.message = "the run was cancelled; steps done: " + last_steps_text();
    } else if (hung) {
      r.outcome = Outcome::hung;
      r.hung_ranks = hung_ranks;
      r.message = "the run hung (no progress for " + seconds_text(hung_after) +
                  ") and was stopped; steps done: " + last_steps_text() + stopped_when_hung;
    } else if (errored) {
      r.outcome = Outcome::failed;
      RankFailure f = failure_of(errored->rank);
      f.exit_code = notice && notice->rank == errored->rank ? notice->exit_code : -1;
      f.description = "reported an error: " + errored->error;
      r.failure = f;
      r.message = "rank " + std::to_string(errored->rank) + " failed: " + errored->error;
    } else if (notice) {
      r.outcome = any_started ? Outcome::crashed : Outcome::failed;
      RankFailure f = failure_of(notice->rank);
      if (f.host.empty()) f.host = notice->host;
      if (f.pid == 0) f.pid = notice->pid;
      f.signal = notice->signal;
      f.exit_code = notice->exit_code;
      if (notice->signal) {
        f.description = "killed by signal " + std::to_string(notice->signal) +
                        (notice->signal_name.empty() ? "" : " (" + notice->signal_name + ")");
      } else if (notice->mpi_abort) {
        f.description =
            "called MPI_Abort" + (notice->exit_code >= 0
                                      ? " with error code " + std::to_string(notice->exit_code)
                                      : std::string());
      } else {
        f.description = "exited with status " + std::to_string(notice->exit_code);
      }
      r.message = "rank " + std::to_string(f.rank) + (f.host.empty() ? "" : " on " + f.host) + " " +
                  f.description + (died_while_cancelled ? " while the run was cancelled" : "");
      if (!f.last_lines.empty()) r.message += "; its last lines:\n" + join_last(f.last_lines, 10);
      r.failure = f;
    } else {
      r.outcome = any_started ? Outcome::crashed : Outcome::failed;
      r.message = spec.mpirun +
                  (mpirun_signal != 0 ? " was killed by signal " + std::to_string(mpirun_signal) +
                                            " (" + strsignal(mpirun_signal) + ")"
                                      : " exited with status " + std::to_string(exit_status)) +
                  (any_started ? " before every rank finished" : " before any rank started");
      if (!r.mpirun_lines.empty()) r.message += ":\n" + join_first(r.mpirun_lines, 12);
    }
    // Ranks that neither finished nor said why: the failed one, or stopped.
    for (RankStatus& s : r.ranks) {
      if (r.failure && s.rank == r.failure->rank) {
        s.state = RankState::failed;
      } else if (s.state == RankState::starting || s.state == RankState::running) {
        s.state = RankState::lost;  // the job is over: it runs no more (it said "running")
      }
    }

    if (!spec.run_store.empty()) remove_unmade_rank_stores();
    const std::string no_store = spec.run_store.empty() ? std::string() : no_rank_store_text(r);
    if (!no_store.empty()) r.merge_note = no_store;
    if (!spec.run_store.empty() && any_started && no_store.empty()) {
      LaunchEvent e;
      e.kind = LaunchEvent::Kind::merging;
      e.text = "merging the rank stores into " + spec.run_store;
      emit(std::move(e));
      std::string note_text;
      if (Status st = merge_run_stores(spec, r.outcome, note_text); st) {
        r.run_store = spec.run_store;
        r.merge_note = note_text;
        if (r.outcome == Outcome::completed && !spec.keep_rank_stores && note_text.empty()) {
          // Only what this run wrote there: the rank stores, then the folder
          // if nothing else is in it (a user's file there is not the run's).
          std::error_code ec;
          for (int rank = 0; rank < spec.ranks; ++rank) {
            const std::string store = rank_store_path(spec.run_store, rank);
            for (const char* suffix : {"", "-wal", "-shm", "-journal"})
              fs::remove(store + suffix, ec);
          }
          release_run_lock();
          fs::remove(run_store_stem(spec.run_store) + ".ranks", ec);
        }
      } else {
        r.merge_note = st.message();
      }
    }

    remove_temp_hostfile();
    release_run_lock();
    if (!spec.run_store.empty()) {
      // The folder the run made for its rank stores, when none was left in it.
      std::error_code ec;
      fs::remove(run_store_stem(spec.run_store) + ".ranks", ec);
    }
    LaunchEvent e;
    e.kind = LaunchEvent::Kind::finished;
    e.text = r.message;
    {
      std::lock_guard lock(mutex);
      report = r;
    }
    emit(std::move(e));
    {
      std::lock_guard lock(mutex);
      done = true;
    }
    done_cv.notify_all();
  }

  // What a rank left at its store's path without making a store of it (an
  // empty file, a database without tables: a create that failed on a full
  // disk, or a rank killed while creating it) is removed: it was read as a
  // damaged store ("an SQLite database with no tables"), and `--merge-only`
  // refused it. Whatever is there is this run's: start() removed the last
  // run's rank stores and refused any other file.
  void remove_unmade_rank_stores() {
    for (int rank = 0; rank < spec.ranks; ++rank) {
      const std::string store = rank_store_path(spec.run_store, rank);
      if (!trace::is_unmade_store(store)) continue;
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        fs::remove(store + suffix, ec);
    }
  }

  // Why no run store can be made: no rank left a store (each rank's reason,
  // the first few named); "" when one did.
  std::string no_rank_store_text(const RunReport& r) {
    std::string reasons;
    int unnamed = 0;
    for (int rank = 0; rank < spec.ranks; ++rank) {
      const std::string path = rank_store_path(spec.run_store, rank);
      auto state = trace::inspect_store(path);
      if (state) return {};
      if (rank >= static_cast<int>(kRanksNamed / 4)) {
        ++unnamed;
        continue;
      }
      const RankStatus* s = rank < static_cast<int>(r.ranks.size())
                                ? &r.ranks[static_cast<std::size_t>(rank)]
                                : nullptr;
      // A file that does not read, as it does not; the rank's error where it
      // is about its store (a create that failed): that is why there is none;
      // else how the rank ended, said once above.
      std::error_code ec;
      std::string why;
      if (fs::exists(path, ec)) {
        why = state.message();
      } else if (s && !s->error.empty() && s->error.find(path) != std::string::npos) {
        // Once: the failed rank's error is the report's message already.
        why = r.message.find(s->error) != std::string::npos ? "its error, said above" : s->error;
      } else if (s && !s->error.empty()) {
        why = "it failed before it made one";
      } else if (r.failure && r.failure->rank == rank && !r.failure->description.empty()) {
        why = r.failure->description + " before it made one";
      } else if (s && s->state == RankState::cancelled) {
        why = "stopped before it made one";
      } else if (s && s->pid == 0 && s->host.empty()) {
        why = "it never started";
      } else {
        why = "it ended before it made one";
      }
      reasons += (reasons.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + ": " + why);
    }
    if (unnamed > 0) {
      reasons += "; " + std::to_string(unnamed) + " more rank" + (unnamed == 1 ? "" : "s") +
                 " without one";
    }
    return "no run store was written: no rank made a store to merge into " + spec.run_store + " (" +
           reasons + ")";
  }

  // Held while the run writes its rank stores, so that a second run given
  // the same store is refused instead of removing the first one's rank
  // stores under its workers (the first run then merged nothing, exit 0).
  std::string run_lock_path;
  int run_lock_fd = -1;

  void release_run_lock() {
    if (run_lock_fd < 0) return;
    std::error_code ec;
    fs::remove(run_lock_path, ec);  // before the folder, which must be empty to go
    ::close(run_lock_fd);
    run_lock_fd = -1;
  }

  // With the run's lock free, a live writer of its rank stores is a rank of
  // a run whose launcher was killed: its mpirun got SIGTERM then (spawn) and
  // the ranks are closing their stores, which takes a moment. A rerun made at
  // once waits for them (up to 10 s) instead of being refused.
  void wait_for_writers_of_an_ended_run() {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    bool said = false;
    for (;;) {
      std::string writer;
      for (int rank = 0; rank < spec.ranks && writer.empty(); ++rank) {
        const auto state = trace::inspect_store(rank_store_path(spec.run_store, rank));
        if (state && state->writer_alive) writer = state->writer;
      }
      if (writer.empty() || Clock::now() > deadline) return;
      if (!said) {
        note("waiting for the ranks of an earlier run whose launcher has ended (process " + writer +
             ") to close their stores in " + run_store_stem(spec.run_store) + ".ranks");
        said = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void remove_temp_hostfile() {
    if (temp_hostfile.empty()) return;
    std::error_code ec;
    fs::remove(temp_hostfile, ec);
    temp_hostfile.clear();
  }

  void run_slurm() {
    RunReport r;
    auto script = slurm_script(spec);
    if (!script) {
      r.outcome = Outcome::failed;
      r.message = script.message();
      return conclude(std::move(r));
    }
    const std::string path =
        spec.slurm.script_path.empty()
            ? run_store_stem(spec.run_store.empty() ? "clusterscope-run" : spec.run_store) + ".sbatch"
            : spec.slurm.script_path;
    {
      std::ofstream out(path, std::ios::trunc);
      out << *script;
      out.close();
      if (!out) {
        r.outcome = Outcome::failed;
        r.message = path + ": cannot write the Slurm script";
        return conclude(std::move(r));
      }
      fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    }
    r.slurm_script = path;
    const auto sbatch = spec.slurm.submit ? find_program("sbatch") : std::nullopt;
    if (!sbatch) {
      r.outcome = Outcome::script_only;
      r.message = spec.slurm.submit
                      ? "sbatch is not on PATH: wrote the batch script " + path +
                            "; submit it with `sbatch " + shell_quote(path) + "` where Slurm runs"
                      : "wrote the batch script " + path;
      return conclude(std::move(r));
    }
    r.command = {*sbatch, "--parsable", path};
    {
      LaunchEvent e;
      e.kind = LaunchEvent::Kind::started;
      e.text = command_text(r.command);
      emit(std::move(e));
    }
    auto captured = run_to_end(r.command);
    if (!captured) {
      r.outcome = Outcome::failed;
      r.message = captured.message();
      return conclude(std::move(r));
    }
    r.exit_status = captured->status;
    if (captured->status != 0) {
      r.outcome = Outcome::failed;
      r.message = "sbatch refused the job (status " + std::to_string(captured->status) +
                  "): " + captured->err;
      return conclude(std::move(r));
    }
    std::string job = captured->out;
    job.erase(std::remove_if(job.begin(), job.end(), [](char c) { return c == '\n' || c == '\r'; }),
              job.end());
    r.slurm_job = job.substr(0, job.find(';'));
    r.outcome = Outcome::submitted;
    r.message = "submitted Slurm job " + r.slurm_job + " (" + path + ")";
    conclude(std::move(r));
  }

  void conclude(RunReport r) {
    LaunchEvent e;
    e.kind = LaunchEvent::Kind::finished;
    e.text = r.message;
    {
      std::lock_guard lock(mutex);
      report = std::move(r);
    }
    emit(std::move(e));
    {
      std::lock_guard lock(mutex);
      done = true;
    }
    done_cv.notify_all();
  }
};

Launcher::Launcher(RunSpec spec, Callback on_event) : state_(std::make_unique<State>()) {
  state_->spec = std::move(spec);
  state_->callback = std::move(on_event);
}

Launcher::~Launcher() {
  if (state_->thread.joinable()) {
    cancel();
    state_->thread.join();
  }
}

const RunSpec& Launcher::spec() const {
  return state_->spec;
}

Status Launcher::start() {
  State& s = *state_;
  if (s.started) return Error{"the launcher was already started"};
  RunSpec& spec = s.spec;
  if (spec.ranks < 1) return Error{"a run needs at least one rank"};
  // Refused before anything runs: the run's work would be lost at its end.
  if (!spec.run_store.empty()) {
    if (Status st = trace::check_store_path(spec.run_store); !st) return st;
  }
  if (spec.run_id.empty() && spec.placement != Placement::slurm)
    spec.run_id = profiler::new_run_id();
  s.ranks.clear();
  for (int r = 0; r < spec.ranks; ++r) {
    RankStatus st;
    st.rank = r;
    s.ranks.push_back(st);
  }
  if (spec.placement == Placement::slurm) {
    s.started = true;
    s.thread = std::thread([&s] { s.run_slurm(); });
    return {};
  }
  if (spec.worker.empty()) return Error{"no worker executable given"};
  if (!find_program(spec.worker))
    return Error{spec.worker + ": the worker is not an executable file"};
  if (Status st = check_mpirun_found(spec.mpirun); !st) return st;

  remove_stale_hostfile_copies();
  std::string hostfile_copy;
  if (spec.placement == Placement::hostfile) {
    auto hosts =
        spec.hosts.empty() ? read_hostfile(spec.hostfile) : Result<std::vector<Host>>(spec.hosts);
    if (!hosts) return hosts.error();
    const int slots = total_slots(*hosts);
    if (slots < spec.ranks) {
      return Error{spec.hostfile + ": lists " + std::to_string(slots) + " slots on " +
                   std::to_string(hosts->size()) + " hosts, but the run needs " +
                   std::to_string(spec.ranks) + " ranks (add slots=N to the host lines)"};
    }
    // mpirun reads only the validated hosts, written afresh.
    static std::atomic<int> copies{0};
    const std::string beside = spec.run_store.empty() ? "" : run_store_stem(spec.run_store) + ".hosts";
    std::error_code same_ec;
    // Never over the user's own hostfile (--hostfile run.hosts --out run.db).
    const bool over_input = !beside.empty() && fs::exists(beside, same_ec) &&
                            fs::equivalent(beside, spec.hostfile, same_ec);
    hostfile_copy = beside.empty() || over_input ? temp_hostfile_path(++copies) : beside;
    std::ofstream out(hostfile_copy, std::ios::trunc);
    if (hostfile_copy != beside) s.temp_hostfile = hostfile_copy;
    out << format_hostfile(*hosts);
    out.close();
    if (!out) {
      s.remove_temp_hostfile();
      return Error{hostfile_copy + ": cannot write the validated hostfile"};
    }
  }
  if (!spec.run_store.empty()) {
    std::error_code ec;
    const fs::path ranks_dir = run_store_stem(spec.run_store) + ".ranks";
    fs::create_directories(ranks_dir, ec);
    if (ec) {
      s.remove_temp_hostfile();
      return Error{ranks_dir.string() + ": cannot create: " + ec.message()};
    }
    auto lock = take_run_lock(spec.run_store, /*create=*/true);
    if (!lock) {
      s.remove_temp_hostfile();
      return lock.error();
    }
    s.run_lock_path = run_lock_path(spec.run_store);
    s.run_lock_fd = *lock;
    s.wait_for_writers_of_an_ended_run();
    // The last run's rank stores go; a file of the user's by that name (not
    // a store, or a store another process writes) stays, and the run is refused.
    if (Status st = check_rank_store_paths(spec.run_store, spec.ranks); !st) {
      s.release_run_lock();
      s.remove_temp_hostfile();
      return st;
    }
    for (int r = 0; r < spec.ranks; ++r)
      fs::remove(rank_store_path(spec.run_store, r), ec);
  }

  // mpirun is started by the thread that watches it, and that thread lasts
  // until mpirun is reaped: mpirun's death signal (spawn) follows the thread
  // that started it, and a caller's thread (a pool's) may end first.
  const std::vector<std::string> argv = mpirun_command(spec, hostfile_copy);
  s.report.command = argv;
  std::promise<Status> spawned;
  std::future<Status> spawn_result = spawned.get_future();
  s.thread = std::thread([&s, argv, spawned = std::move(spawned)]() mutable {
    auto child = spawn(argv, /*with_this_thread=*/true);
    if (!child) {
      spawned.set_value(child.error());
      return;
    }
    s.child = *child;
    spawned.set_value(Status{});
    s.monitor();
  });
  if (Status st = spawn_result.get(); !st) {
    s.thread.join();
    s.report.command.clear();
    s.remove_temp_hostfile();
    s.release_run_lock();
    if (!spec.run_store.empty()) {
      // The folder made for the rank stores, empty: nothing ran.
      std::error_code ec;
      fs::remove(run_store_stem(spec.run_store) + ".ranks", ec);
    }
    return st;
  }
  s.started = true;
  return {};
}

void Launcher::cancel() {
  state_->cancel_requested = true;
}

void Launcher::kill() {
  state_->kill_requested = true;
}

bool Launcher::finished() const {
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

RunReport Launcher::wait(const StopRequest* stop) {
  while (!finished()) {
    if (stop && stop->cancel) cancel();
    if (stop && stop->kill) kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return wait();
}

std::string failure_text(const RunReport& report) {
  std::string why = report.message;
  if (report.failure && !report.failure->last_lines.empty()) {
    // The worker's own words, where it said why: Open MPI's MPI_ABORT notice
    // comes after them and says nothing of the cause.
    const std::vector<std::string>& lines = report.failure->last_lines;
    const auto own = std::find_if(lines.rbegin(), lines.rend(), [](const std::string& line) {
      return line.starts_with("clusterscope-worker");
    });
    const std::string& line = own != lines.rend() ? *own : lines.back();
    // Said already when the rank reported its error itself.
    const std::size_t said = line.rfind("error: ");
    const std::string core = said == std::string::npos ? line : line.substr(said + 7);
    if (why.find(core) == std::string::npos) why += ": " + line;
  }
  if (!report.merge_note.empty()) why += " (" + report.merge_note + ")";
  return why;
}

RunReport Launcher::wait() {
  State& s = *state_;
  if (!s.started) {
    RunReport r;
    r.message = "the run was not started";
    return r;
  }
  {
    std::unique_lock lock(s.mutex);
    s.done_cv.wait(lock, [&] { return s.done; });
  }
  if (s.thread.joinable()) s.thread.join();
  std::lock_guard lock(s.mutex);
  return s.report;
}

std::vector<LaunchEvent> Launcher::take_events() {
  std::lock_guard lock(state_->mutex);
  std::vector<LaunchEvent> out(state_->queue.begin(), state_->queue.end());
  state_->queue.clear();
  return out;
}

std::vector<RankStatus> Launcher::ranks() const {
  std::lock_guard lock(state_->mutex);
  return state_->ranks;
}

}  // namespace cs::launch
