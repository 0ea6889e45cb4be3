#include "core/unfinished_file.h"

#include <atomic>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

namespace cs {

namespace {

// A fixed table, read by the signal handler: lock-free and allocation-free.
constexpr int kSlots = 32;
std::atomic<const char*> g_unfinished[kSlots];

extern "C" void remove_and_end(int signal_number) {
  for (std::atomic<const char*>& slot : g_unfinished) {
    if (const char* path = slot.load()) ::unlink(path);  // async-signal-safe
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

}  // namespace

UnfinishedFile::UnfinishedFile(std::string path) : path_(std::move(path)) {
  for (int i = 0; i < kSlots; ++i) {
    const char* empty = nullptr;
    if (g_unfinished[i].compare_exchange_strong(empty, path_.c_str())) {
      slot_ = i;
      return;
    }
  }
}

void UnfinishedFile::release() {
  if (slot_ < 0) return;
  g_unfinished[slot_].store(nullptr);
  slot_ = -1;
}

void remove_unfinished_files_on_signal() {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL)
      continue;
    struct sigaction action {};
    action.sa_handler = remove_and_end;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
  }
}

void default_signal_actions_in_child() {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == remove_and_end)
      ::signal(signal_number, SIG_DFL);
  }
}

SignalsHeld::SignalsHeld() {
  sigset_t held;
  sigemptyset(&held);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&held, signal_number);
  ::pthread_sigmask(SIG_BLOCK, &held, &old_);
}

SignalsHeld::~SignalsHeld() {
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace cs
