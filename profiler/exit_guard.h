#pragma once
// Runs a traced process's last step (finish and close its trace store) once,
// however the process ends:
//   - at exit (atexit): finish("complete");
//   - on SIGINT or SIGTERM, where the program left them at their default
//     action: a watcher thread runs finish("cancelled"), then the signal ends
//     the process as it would have (same signal, same exit status). A program
//     that handles the signal itself keeps its handler, and usually exits,
//     which runs the atexit path.
// The signal handler only writes a byte to a pipe (async-signal-safe); the
// work happens on an ordinary thread. Finishing is bounded by a timeout, so a
// wedged GPU or store cannot hang the exit. A forked child (which has none of
// the tracer's threads) never finishes, and gets default signal actions back.

#include <chrono>
#include <functional>

#include "core/result.h"

namespace cs::profiler::exit_guard {

// `finish` gets "complete" or "cancelled". Once per process; a second call fails.
Status install(std::function<void(const char* how)> finish, std::chrono::milliseconds timeout);

// Runs finish now, if installed and not run yet; otherwise waits (up to the
// timeout) for the run in progress.
void finish_now(const char* how);

}  // namespace cs::profiler::exit_guard
