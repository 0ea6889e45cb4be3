#pragma once
// Where a tracer's activity records wait between the producer (CUPTI's
// buffer callbacks, or a replay) and the decoding thread: a pool of fixed-size
// buffers whose total is capped, and a queue of completed buffers.
//
// Lock rules: both take only their own short lock and never call out while
// holding it, so they are safe from CUPTI's callbacks, which may run on any
// thread, including inside cuptiActivityFlushAll.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace cs::profiler {

// A completed buffer of activity records laid out as CUPTI lays them out.
struct ActivityBuffer {
  std::uint8_t* data = nullptr;
  std::size_t capacity = 0;  // bytes
  std::size_t valid = 0;     // bytes of records
  // The records came from CUPTI itself: out-of-line data some records point
  // to (CUpti_ActivityOverhead3::overheadData) is the reader's to free.
  bool from_cupti = false;
};

class BufferPool {
 public:
  // Hands out buffers of `buffer_bytes` until `cap_bytes` are out (at least one).
  BufferPool(std::size_t buffer_bytes, std::size_t cap_bytes);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer (8-byte aligned, as CUPTI requires), or nullptr when the cap is
  // reached; each refusal is counted.
  std::uint8_t* acquire();
  // Gives a buffer from acquire() back for reuse.
  void release(std::uint8_t* data);

  std::size_t buffer_bytes() const { return buffer_bytes_; }
  std::uint64_t refused() const { return refused_.load(); }
  std::size_t peak_in_use() const;

 private:
  const std::size_t buffer_bytes_;
  const std::size_t max_buffers_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<std::uint8_t[]>> owned_;
  std::vector<std::uint8_t*> free_;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
  std::atomic<std::uint64_t> refused_{0};
};

class BufferQueue {
 public:
  void push(const ActivityBuffer& buffer);
  // The oldest buffer; waits while the queue is empty and open. Nothing once
  // closed and drained.
  std::optional<ActivityBuffer> pop();
  // Wakes pop(); buffers pushed before or after still come out.
  void close();
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ActivityBuffer> buffers_;
  bool closed_ = false;
};

}  // namespace cs::profiler
