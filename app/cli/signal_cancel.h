#pragma once
// Ctrl-C (SIGINT), kill (SIGTERM) and a closed terminal (SIGHUP) cancel a
// long command cleanly instead of killing it, so that every rank closes its
// store. While one of these lives, the three signals are blocked on the
// thread that made it and on the threads it starts afterwards (children that
// the launcher spawns get them unblocked again); a thread of its own waits
// for them and calls `on_signal` once per signal, after writing `message` to
// stderr. Given `on_again`, a second signal (and any after it) calls that
// instead, after writing `again_message`: a second Ctrl-C escalates a stop
// that is taking too long. Signals within kSameStop of the first are that
// one stop (GNU timeout sends SIGTERM to the command and its group at once). The destructor
// restores the signal mask.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <signal.h>

namespace cs::cli {

class CancelOnSignal {
 public:
  // Signals this soon after the first are the same stop, not a second one.
  static constexpr std::chrono::milliseconds kSameStop{500};

  CancelOnSignal(std::function<void()> on_signal, std::string message,
                 std::function<void()> on_again = {}, std::string again_message = {});
  ~CancelOnSignal();
  CancelOnSignal(const CancelOnSignal&) = delete;
  CancelOnSignal& operator=(const CancelOnSignal&) = delete;

 private:
  sigset_t set_{}, old_{};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cs::cli
