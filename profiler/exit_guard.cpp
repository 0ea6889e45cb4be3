#include "profiler/exit_guard.h"

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

namespace cs::profiler::exit_guard {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};

// Never destroyed: exit handlers and detached threads may use it to the end.
struct State {
  std::function<void(const char*)> finish;
  std::chrono::milliseconds timeout{0};
  pid_t pid = 0;
  std::mutex mutex;
  std::condition_variable finished;
  bool running = false;
  bool done = false;
};

std::atomic<State*> g_state{nullptr};
std::atomic<bool> g_forked_child{false};
pid_t g_pid = 0;  // read by the signal handler
int g_pipe[2] = {-1, -1};

void say(const std::string& text) {
  const std::string line = "clusterscope-inject: " + text + "\n";
  const ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void on_exit() {
  finish_now("complete");
}

void on_signal(int number) {
  if (g_forked_child.load() || getpid() != g_pid) {
    signal(number, SIG_DFL);
    raise(number);
    return;
  }
  const unsigned char byte = static_cast<unsigned char>(number);
  const ssize_t ignored = write(g_pipe[1], &byte, 1);
  (void)ignored;
}

void watch_signals() {
  unsigned char byte = 0;
  ssize_t got = 0;
  do {
    got = read(g_pipe[0], &byte, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) return;
  finish_now("cancelled");
  signal(byte, SIG_DFL);
  kill(getpid(), byte);
}

void on_fork_child() {
  g_forked_child.store(true);
  for (int number : kSignals) {
    struct sigaction current {};
    if (sigaction(number, nullptr, &current) == 0 && current.sa_handler == on_signal) {
      signal(number, SIG_DFL);
    }
  }
}

}  // namespace

Status install(std::function<void(const char*)> finish, std::chrono::milliseconds timeout) {
  auto* state = new State;
  state->finish = std::move(finish);
  state->timeout = timeout;
  state->pid = getpid();
  State* expected = nullptr;
  if (!g_state.compare_exchange_strong(expected, state)) {
    delete state;
    return Error{"the exit guard is already installed in this process"};
  }
  g_pid = state->pid;
  std::atexit(on_exit);
  pthread_atfork(nullptr, nullptr, on_fork_child);
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    return Error{std::string("no signal pipe (") + std::strerror(errno) +
                 "): the trace is finished at exit only"};
  }
  bool any = false;
  for (int number : kSignals) {
    struct sigaction previous {};
    if (sigaction(number, nullptr, &previous) != 0) continue;
    if ((previous.sa_flags & SA_SIGINFO) || previous.sa_handler != SIG_DFL) continue;
    struct sigaction mine {};
    mine.sa_handler = on_signal;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = SA_RESTART;
    if (sigaction(number, &mine, nullptr) == 0) any = true;
  }
  if (any) std::thread(watch_signals).detach();
  return {};
}

void finish_now(const char* how) {
  State* s = g_state.load();
  if (!s || g_forked_child.load() || getpid() != s->pid) return;
  {
    std::unique_lock lock(s->mutex);
    if (s->running || s->done) {
      s->finished.wait_for(lock, s->timeout, [s] { return s->done; });
      return;
    }
    s->running = true;
  }
  std::thread worker([s, how] {
    s->finish(how);
    {
      std::lock_guard lock(s->mutex);
      s->done = true;
    }
    s->finished.notify_all();
  });
  std::unique_lock lock(s->mutex);
  if (s->finished.wait_for(lock, s->timeout, [s] { return s->done; })) {
    lock.unlock();
    worker.join();
    return;
  }
  lock.unlock();
  worker.detach();
  say("gave up waiting for the trace to be written after " + std::to_string(s->timeout.count()) +
      " ms; the store keeps what was committed");
}

}  // namespace cs::profiler::exit_guard
