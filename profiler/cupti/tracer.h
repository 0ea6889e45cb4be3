#pragma once
// The CUPTI tracer of one process, writing into that process's trace store:
//   - an activity source (CUPTI on a GPU, or a replayed recording) filling
//     buffers from a pool capped in total (128 MiB of 4 MiB buffers by
//     default; past the cap CUPTI drops records and the drops are reported);
//   - a decoding thread that turns completed buffers into events;
//   - a housekeeping thread that samples GPU memory in use (every 100 ms) as
//     a counter and has CUPTI hand over its completed buffers every second, so
//     that a process killed without warning loses about a second at most.
// Measured on an H200 (PyTorch DDP, 3 ms steps of small kernels): tracing
// added no measurable step time with the memory counter off, and about 20 %
// with it every 10 ms (each read goes through the CUDA driver and contends
// with the program's launches); hence 100 ms by default.
// No lock of the tracer is held while it calls into CUPTI.
//
// The writer must outlive the tracer; the tracer never closes it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/trace_writer.h"
#include "profiler/cupti/activity_decoder.h"
#include "profiler/cupti/activity_source.h"

namespace cs::profiler {

struct TracerOptions {
  // The rank row written to the store. When `device` is empty it is filled
  // with the first GPU the program uses ("NVIDIA H200 (GPU 0)"), and the row
  // is written then (or at the end when the program used none).
  trace::RankInfo rank;
  std::size_t buffer_bytes = std::size_t{4} << 20;
  std::size_t buffer_cap_bytes = std::size_t{128} << 20;
  std::chrono::milliseconds memory_sample_period{100};  // 0: no GPU memory counter
  std::chrono::milliseconds flush_period{1000};
  std::uint32_t max_wait_buffers = 8;  // see DecoderOptions
  std::vector<std::int32_t> p2p_peer_ranks;  // see DecoderOptions
  bool steps_from_ranges = false;            // see DecoderOptions
  // Record only its spans (see capture_range.h; the CUPTI source opens and
  // closes them); null: everything. The GPU memory counter too.
  std::shared_ptr<CaptureRange> capture_range;
  // Also record the raw buffers to this file (a replay recording), up to
  // capture_cap_bytes: a fixture for replay tests, taken on a real GPU.
  std::string capture_path;
  std::size_t capture_cap_bytes = std::size_t{256} << 20;
};

struct TracerReport {
  std::string source;
  DecoderCounts counts;
  std::uint64_t dropped_records = 0;  // records lost for want of a buffer
  std::uint64_t refused_buffers = 0;  // buffer requests turned down at the cap
  std::size_t peak_buffer_bytes = 0;
  std::uint64_t memory_samples = 0;
  std::vector<std::string> warnings;

  // "1234 events: 100 kernels (20 NCCL, 18 sized), ... 0 records dropped"
  std::string summary() const;
};

class Tracer {
 public:
  // Starts the source and the threads; fails with the source's sentence
  // (no GPU, no driver) and leaves nothing running.
  static Result<std::unique_ptr<Tracer>> start(std::unique_ptr<ActivitySource> source,
                                               trace::TraceWriter& writer, TracerOptions options);
  ~Tracer();  // finalizes
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Stops the source (forced flush), decodes what is left, writes the report
  // into the store's meta table and flushes the writer. Idempotent.
  const TracerReport& finalize();

 private:
  struct Impl;
  explicit Tracer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cs::profiler
