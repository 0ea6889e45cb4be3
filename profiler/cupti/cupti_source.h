#pragma once
// CUPTI's Activity API as an activity source: kernels (CONCURRENT_KERNEL),
// copies (MEMCPY, MEMCPY2), MEMSET, RUNTIME and DRIVER calls,
// SYNCHRONIZATION, NVTX (MARKER, MARKER_DATA), CUPTI's OVERHEAD and
// EXTERNAL_CORRELATION.
//
// Buffers: CUPTI asks for one in its buffer-requested callback and gets one
// from the tracer's capped pool, or none once the cap is reached (CUPTI then
// drops records and counts them; rejecting a request is safe from CUPTI API
// version 27, and libcupti.so.13 is at least 130000). The buffer-completed
// callback only pushes the buffer on the queue under the queue's short lock.
//
// Clock: a timestamp callback gives CUPTI clock_gettime(CLOCK_REALTIME)
// nanoseconds, the run clock of every ClusterScope store. It is also CUPTI's
// default on Linux, but not everywhere (WSL uses CLOCK_MONOTONIC_RAW), and
// registering it makes the choice explicit rather than a default that could
// change. GPU timestamps are converted by CUPTI onto that clock.
//
// Thread ids in records are the kernel's (gettid), not pthread_self().
//
// NVTX ranges reach CUPTI only when NVTX loads an injection that forwards to
// it: NVTX_INJECTION64_PATH must name libcupti, or the injection library,
// which forwards to the libcupti this code uses (see profiler/inject).

#include <cstdint>
#include <memory>

#include "profiler/cupti/activity_source.h"
#include "profiler/cupti/capture_range.h"

namespace cs::profiler {

struct CuptiSourceOptions {
  // cuptiFinalize() once decoding is done: CUPTI warns that a 10-20 %
  // slowdown can remain otherwise.
  bool finalize_cupti = true;
  // Opened at the program's cudaProfilerStart / cuProfilerStart and closed
  // at its cudaProfilerStop / cuProfilerStop, through CUPTI's callback API
  // (one subscriber a process: where another tool holds it, the range is
  // opened throughout and a warning says so). Null: no callbacks.
  std::shared_ptr<CaptureRange> capture_range;
};

// What the program's cudaProfilerStart and cudaProfilerStop (and the
// driver's cuProfilerStart/Stop) do to a capture range, as CUPTI's callback
// API reports each call (its domain, callback id and CUpti_CallbackData):
// a start opens the range at its entry, a stop closes it at its entry, on
// the run clock; any other call or site does nothing.
void follow_profiler_call(CaptureRange& range, int domain, std::uint32_t cbid, const void* data);

// Only one CUPTI source runs in a process at a time: CUPTI's callbacks are
// process-wide. A second start() fails with a sentence saying so.
std::unique_ptr<ActivitySource> make_cupti_source(CuptiSourceOptions options = {});

// CUPTI_API_VERSION of the libcupti loaded in this process (e.g. 130001), 0 if unknown.
std::uint32_t loaded_cupti_version();

// The external-correlation kind that carries training steps
// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2): GPU work launched by a thread
// between push_step_correlation(s) and pop_step_correlation() gets step s.
inline constexpr int kStepCorrelationKind = 5;
void push_step_correlation(std::int32_t step);
void pop_step_correlation();

}  // namespace cs::profiler
