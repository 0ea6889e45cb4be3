#pragma once
// The processes below one process in the process tree, read from /proc
// (Linux). A process whose parent ends is re-parented to the nearest
// subreaper above it (prctl PR_SET_CHILD_SUBREAPER), so below a subreaper
// the tree holds every process started from it, even those that left its
// process group or session (setsid, daemons).

#include <vector>

#include <sys/types.h>

namespace cs::profiler {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t parent = 0;
  pid_t group = 0;   // process group
  char state = '?';  // as /proc/PID/stat says: R, S, D, Z (ended, not yet reaped), ...
};

// Every process below `root` (its children, theirs, ...), parents before
// their children; empty when /proc cannot be read. A snapshot: a process may
// end, or start, just after.
std::vector<ProcessEntry> descendant_processes(pid_t root);

// Whether process `pid` exists and has not ended (an ended one not yet
// reaped is a zombie); without /proc, whether kill(pid, 0) finds it.
bool process_running(pid_t pid);

// Sends `signal` to every process below `root` that has not ended; with
// `skip_group` > 0, not to those in that process group. Returns how many.
int signal_descendants(pid_t root, int signal, pid_t skip_group = 0);

}  // namespace cs::profiler
