#include "app/cli/signal_cancel.h"

#include <ctime>
#include <iostream>
#include <utility>

namespace cs::cli {

CancelOnSignal::CancelOnSignal(std::function<void()> on_signal, std::string message) {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&set_, s);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  thread_ = std::thread([this, on_signal = std::move(on_signal), message = std::move(message)] {
    // Woken every 200 ms to see whether the destructor waits for it.
    while (!stop_) {
      timespec timeout{0, 200'000'000};
      if (sigtimedwait(&set_, nullptr, &timeout) > 0) {
        std::cerr << "\nclusterscope: " << message << '\n';
        on_signal();
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
