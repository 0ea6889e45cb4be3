#pragma once
// The run clock: the clock every recorder of a run (the worker, the CUPTI
// tracer, the injection library) reads its event times from, in nanoseconds
// since the Unix epoch, so that the stores of one host's ranks and processes
// line up as they are; stores of different hosts are aligned when merged
// (core/trace_merge.h).

#include <cstdint>
#include <ctime>
#include <string_view>

namespace cs::trace {

// What a store's RunInfo::clock and the tracer's meta name the clock.
inline constexpr std::string_view kRunClockName = "CLOCK_REALTIME";

// Now on the run clock, in ns.
inline std::int64_t run_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace cs::trace
