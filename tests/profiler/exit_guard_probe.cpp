// A process that installs the exit guard and ends in the way its first
// argument says, for tst_exit_guard. The finish step appends "<how> <pid>" to
// the file in the second argument.
// Usage: cs_exit_guard_probe exit|signal|handled|fork|hang|twice FILE

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profiler/exit_guard.h"

namespace {

std::string g_file;
volatile sig_atomic_t g_own_handler_ran = 0;

void record(const char* how) {
  std::ofstream(g_file, std::ios::app) << how << ' ' << getpid() << '\n';
}

void own_handler(int) {
  g_own_handler_ran = 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  g_file = argv[2];
  using namespace std::chrono_literals;
  namespace guard = cs::profiler::exit_guard;

  if (mode == "handled") signal(SIGTERM, own_handler);  // the program's own, before the guard
  auto finish = [mode](const char* how) {               // by value: it runs after main returns
    if (mode == "hang") {
      record("started");
      std::this_thread::sleep_for(1000s);
    }
    record(how);
  };
  const cs::Status installed = guard::install(finish, mode == "hang" ? 300ms : 10000ms);
  if (!installed) {
    std::printf("install failed: %s\n", installed.message().c_str());
    return 3;
  }
  if (mode == "twice") {
    const cs::Status again = guard::install(finish, 1000ms);
    std::printf("%s\n", again ? "installed twice" : again.message().c_str());
    return 0;
  }
  if (mode == "fork") {
    const pid_t child = fork();
    if (child == 0) std::exit(0);  // runs the exit handlers of a child that has no tracer
    int status = 0;
    waitpid(child, &status, 0);
    return 0;
  }
  if (mode == "signal" || mode == "handled") {
    std::printf("ready\n");
    std::fflush(stdout);
    for (int i = 0; i < 600 && !g_own_handler_ran; ++i)
      std::this_thread::sleep_for(100ms);
    return g_own_handler_ran ? 7 : 1;
  }
  return 0;  // "exit" and "hang": leave main
}
