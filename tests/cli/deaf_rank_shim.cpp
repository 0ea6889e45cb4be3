// Preloaded into the workers of tst_run_cli's second-interrupt test: the
// worker's handlers for the stop (SIGUSR1) and SIGTERM are replaced by
// "ignore", so the ranks train on through a run's stop as ranks stuck in a
// long store close would, and only the launcher's SIGKILL ends them.

#include <dlfcn.h>
#include <signal.h>

extern "C" int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  using Real = int (*)(int, const struct sigaction*, struct sigaction*);
  static const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "sigaction"));
  if (act != nullptr && (sig == SIGUSR1 || sig == SIGTERM)) {
    struct sigaction ignored = *act;
    ignored.sa_handler = SIG_IGN;
    ignored.sa_flags &= ~SA_SIGINFO;
    return real(sig, &ignored, old);
  }
  return real(sig, act, old);
}
