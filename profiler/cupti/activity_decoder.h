#pragma once
// Turns CUPTI activity records into trace events, on the tracer's decoding
// thread (one thread; not thread-safe except ignore_thread).
//
// What becomes what:
//   kernels       -> kernel, compute, on the lane of their (device, stream);
//                    NCCL kernels -> collective (SendRecv: p2p), communication,
//                    with collective and element type from the name and, when
//                    NCCL's NVTX range around the launch carries them, the
//                    message size, element count and peer or root
//   MEMCPY(2), MEMSET -> memcpy / memset, memory, with bytes
//   RUNTIME, DRIVER   -> api_call on the lane of the calling thread, minus the
//                    noisy calls (api_filter.h)
//   SYNCHRONIZATION   -> sync, synchronization, on the lane of the thread that
//                    made the call (found through the correlation id)
//   MARKER(_DATA)     -> annotation, one lane per NVTX domain and thread;
//                    with steps_from_ranges, the ranges of one thread named
//                    as a step (core/step_names.h) -> step, on the rank's
//                    steps lane
//   OVERHEAD          -> overhead, on the thread it hit or a tracer lane
//   EXTERNAL_CORRELATION of kind CUSTOM2 -> the step of the API call and of
//                    the GPU work with its correlation id
// Every launch and the work it launched share Event::correlation. Times are
// CUPTI's nanoseconds (see cupti_source.h for the clock). Records without
// timestamps (start = end = 0) are counted, not written.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/trace_writer.h"
#include "profiler/activity_buffers.h"
#include "profiler/cupti/capture_range.h"

namespace cs::profiler {

struct DecoderCounts {
  std::uint64_t records = 0;  // every record read
  std::uint64_t kernels = 0;  // NCCL kernels included
  std::uint64_t nccl_kernels = 0;
  std::uint64_t nccl_annotated = 0;  // NCCL kernels with size from an NVTX range
  std::uint64_t memcpys = 0;
  std::uint64_t memsets = 0;
  std::uint64_t api_calls = 0;
  std::uint64_t filtered_api_calls = 0;  // noisy calls and the tracer's own
  std::uint64_t syncs = 0;
  std::uint64_t nvtx_ranges = 0;
  std::uint64_t nvtx_marks = 0;
  std::uint64_t steps = 0;  // NVTX ranges taken as steps (steps_from_ranges)
  std::uint64_t outside_capture_range = 0;  // events not written: outside the capture range
  std::uint64_t gpu_work_written = 0;       // kernels, copies, sets and collectives written
  std::uint64_t overheads = 0;
  std::uint64_t external_correlations = 0;
  std::uint64_t without_timestamps = 0;
  std::uint64_t unclosed_ranges = 0;       // NVTX ranges still open at the end
  std::uint64_t unmatched_range_ends = 0;  // NVTX range ends whose start was not seen
  std::uint64_t other_kinds = 0;           // records of kinds the decoder does not use
  std::uint64_t invalid_buffers = 0;       // buffers CUPTI could not walk to the end
  std::uint64_t events = 0;                // events written
};

struct DecoderOptions {
  std::int32_t rank = 0;
  // How many later buffers an NCCL kernel waits for the NVTX range and the
  // launch that describe it before it is written without them.
  std::uint32_t max_wait_buffers = 8;
  // The store's rank of each rank of the communicator the program's sends
  // and receives go through, by the rank NCCL names (its group's): the CUDA
  // engine's pipeline group, split from the world. Empty: NCCL's numbers are
  // kept (a program traced from outside, whose communicators are unknown).
  std::vector<std::int32_t> p2p_peer_ranks;
  // NVTX ranges named as a step ("step 12", "iteration 3", "ProfilerStep#7";
  // core/step_names.h) are the rank's steps: a program traced from outside
  // (`clusterscope profile`) says so where its steps are. They are taken
  // as core/step_names.h's StepRanges picks them (the first thread to start
  // one, outermost ranges, any NVTX domain but NCCL's); the others stay
  // annotations. Off where the program records its steps itself (the CUDA
  // engine's worker).
  bool steps_from_ranges = false;
  // Only what falls in its spans is written (capture_range.h); null: all.
  std::shared_ptr<const CaptureRange> capture_range;
};

class ActivityDecoder {
 public:
  ActivityDecoder(trace::TraceWriter& writer, DecoderOptions options);
  ~ActivityDecoder();
  ActivityDecoder(const ActivityDecoder&) = delete;
  ActivityDecoder& operator=(const ActivityDecoder&) = delete;

  // Decodes every record of the buffer. Frees the out-of-line data of
  // CUPTI's own records (OVERHEAD details) when buffer.from_cupti.
  void decode(const ActivityBuffer& buffer);
  // Writes what still waits (the end of a run); counts NVTX ranges left open.
  void finish();
  // API calls made by this thread are the tracer's, not the program's
  // (the GPU-memory sampler). Safe from any thread; up to 4 threads.
  void ignore_thread(std::uint32_t system_thread_id);

  const DecoderCounts& counts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::array<std::atomic<std::uint32_t>, 4> ignored_threads_{};
};

}  // namespace cs::profiler
