#include "app/cli/signal_cancel.h"

#include <chrono>
#include <ctime>
#include <iostream>
#include <utility>

namespace cs::cli {

CancelOnSignal::CancelOnSignal(std::function<void()> on_signal, std::string message,
                               std::function<void()> on_again, std::string again_message) {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&set_, s);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  thread_ = std::thread([this, on_signal = std::move(on_signal), message = std::move(message),
                         on_again = std::move(on_again), again_message = std::move(again_message)] {
    bool signalled = false;
    std::chrono::steady_clock::time_point first_at;
    // Woken every 200 ms to see whether the destructor waits for it.
    while (!stop_) {
      timespec timeout{0, 200'000'000};
      if (sigtimedwait(&set_, nullptr, &timeout) > 0) {
        // One stop sent twice at once (GNU timeout signals the command, then
        // its process group) is no second Ctrl-C: it killed the ranks before
        // they could close their stores, and blamed "a second interrupt".
        const auto now = std::chrono::steady_clock::now();
        if (signalled && now - first_at < kSameStop) continue;
        if (!signalled) first_at = now;
        const bool again = signalled && on_again;
        signalled = true;
        std::cerr << "\nclusterscope: " << (again ? again_message : message) << '\n';
        if (again) {
          on_again();
        } else {
          on_signal();
        }
      }
    }
  });
}

CancelOnSignal::~CancelOnSignal() {
  stop_ = true;
  thread_.join();
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace cs::cli
