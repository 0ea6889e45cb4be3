#pragma once
// The spans of a run to record, as nsys profile --capture-range=cudaProfilerApi
// takes them: a span opens when the program calls cudaProfilerStart (or the
// driver's cuProfilerStart; PyTorch: torch.cuda.profiler.start(), Megatron-LM's
// --profile) and closes at cudaProfilerStop. Opened and closed by the CUPTI
// source's callbacks on the program's threads, read by the tracer's decoding
// thread: an event is kept when the time it belongs to falls in a span (a
// call's start; GPU work's, the start of the call that launched it), or, for
// an NVTX range or a step, when it meets one. A record is decoded only after that time has passed,
// so every span's opening and closing before it is known by then.
//
// CUPTI records throughout (its overhead is the same); what falls outside is
// counted, not written.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

namespace cs::profiler {

class CaptureRange {
 public:
  // Times on the run clock (trace::run_clock_ns). Opening an open range or
  // closing a closed one does nothing (cudaProfilerStart reaches CUPTI as a
  // runtime and a driver call).
  void open(std::int64_t time) {
    std::lock_guard lock(mutex_);
    if (!spans_.empty() && spans_.back().second == kOpen) return;
    spans_.emplace_back(time, kOpen);
  }
  void close(std::int64_t time) {
    std::lock_guard lock(mutex_);
    if (spans_.empty() || spans_.back().second != kOpen) return;
    spans_.back().second = std::max(time, spans_.back().first);
  }
  // Records everything from the start (the callbacks could not be had).
  void open_throughout() { open(std::numeric_limits<std::int64_t>::min()); }

  bool holds(std::int64_t time) const {
    std::lock_guard lock(mutex_);
    // Latest first: what is decoded is mostly recent.
    for (auto it = spans_.rbegin(); it != spans_.rend(); ++it) {
      if (time >= it->first) return time < it->second;
    }
    return false;
  }
  // Whether [start, end) meets a span (a range or step that straddles the
  // start or the stop is the capture's).
  bool overlaps(std::int64_t start, std::int64_t end) const {
    std::lock_guard lock(mutex_);
    for (auto it = spans_.rbegin(); it != spans_.rend(); ++it) {
      if (start < it->second && it->first < std::max(end, start + 1)) return true;
    }
    return false;
  }
  int spans() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(spans_.size());
  }

 private:
  static constexpr std::int64_t kOpen = std::numeric_limits<std::int64_t>::max();
  mutable std::mutex mutex_;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;  // [start, end), in time order
};

}  // namespace cs::profiler
