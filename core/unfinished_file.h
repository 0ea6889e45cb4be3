#pragma once
// Files a command is still writing (an export's ".partial", a store being
// built beside its path): removed if the process is killed by SIGINT,
// SIGTERM or SIGHUP before they are finished, so that Ctrl-C leaves no
// half file behind (a 40 MB "p.csv.partial" stayed). A failure or an
// exception already removes them (FileBeside, the store's build).

#include <string>

#include <signal.h>

namespace cs {

class UnfinishedFile {
 public:
  explicit UnfinishedFile(std::string path);
  ~UnfinishedFile() { release(); }
  UnfinishedFile(const UnfinishedFile&) = delete;
  UnfinishedFile& operator=(const UnfinishedFile&) = delete;
  // Finished (renamed into place) or removed: a signal no longer removes it.
  void release();

 private:
  std::string path_;
  int slot_ = -1;  // -1: not registered (more files at once than slots)
};

// Installs the handlers that remove the unfinished files and then end the
// process by the same signal, for those of the three signals whose action
// is the default. A command that handles a signal itself replaces them.
void remove_unfinished_files_on_signal();

// In a child between fork and exec: those handlers back to the default
// actions, so that a signal there ends the child without touching the
// parent's files (exec would reset them, but only at exec).
void default_signal_actions_in_child();

// Blocks the three signals while it lives (renaming a finished file into
// place: a signal between two renames would remove half of it).
class SignalsHeld {
 public:
  SignalsHeld();
  ~SignalsHeld();
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t old_{};
};

}  // namespace cs
