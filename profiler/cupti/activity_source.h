#pragma once
// The seam between where CUPTI activity records come from and the decoder:
// CUPTI itself on a GPU (cupti_source.h), or a recording replayed without one
// (replay_source.h). A source fills buffers from the tracer's pool and hands
// completed ones to its queue; the tracer's decoding thread takes them from there.

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "profiler/activity_buffers.h"

namespace cs::profiler {

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;

  // "CUPTI 130001", "replay of FILE".
  virtual std::string describe() const = 0;
  // Starts collecting. Fails with one readable sentence (no driver, no GPU,
  // CUPTI refused) and leaves nothing running.
  virtual Status start(BufferPool& pool, BufferQueue& queue) = 0;
  // Hands every buffer that holds records to the queue, finished or not.
  // Blocks. The caller must hold no lock the queue's producer path takes:
  // CUPTI calls its buffer-completed callback from inside this call.
  virtual void flush() = 0;
  // Hands over the buffers whose records are all complete; cheap enough to
  // call every second so that a killed process loses little.
  virtual void flush_completed() {}
  // Records the source could not keep since the last call (no buffer was free).
  virtual std::uint64_t take_dropped_records() = 0;
  // Stops collecting and flushes: no buffer is handed over after it returns.
  virtual void stop() = 0;
  // Releases the source's resources once every handed-over buffer has been
  // decoded (CUPTI owns the kernel names its records point to until then).
  virtual void finalize() {}
  // What did not work but did not stop the source (a record kind CUPTI refused).
  virtual std::vector<std::string> warnings() const { return {}; }
};

}  // namespace cs::profiler
