#include "profiler/activity_buffers.h"

#include <algorithm>

namespace cs::profiler {

BufferPool::BufferPool(std::size_t buffer_bytes, std::size_t cap_bytes)
    : buffer_bytes_((std::max<std::size_t>(buffer_bytes, 1024) + 7) / 8 * 8),
      max_buffers_(std::max<std::size_t>(1, cap_bytes / buffer_bytes_)) {}

std::uint8_t* BufferPool::acquire() {
  std::lock_guard lock(mutex_);
  if (in_use_ >= max_buffers_) {
    refused_.fetch_add(1);
    return nullptr;
  }
  std::uint8_t* data = nullptr;
  if (!free_.empty()) {
    data = free_.back();
    free_.pop_back();
  } else {
    // new[] aligns to __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16 on x86-64 and
    // aarch64), above CUPTI's 8.
    owned_.emplace_back(new std::uint8_t[buffer_bytes_]);
    data = owned_.back().get();
  }
  ++in_use_;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return data;
}

void BufferPool::release(std::uint8_t* data) {
  if (!data) return;
  std::lock_guard lock(mutex_);
  free_.push_back(data);
  if (in_use_ > 0) --in_use_;
}

std::size_t BufferPool::peak_in_use() const {
  std::lock_guard lock(mutex_);
  return peak_in_use_;
}

void BufferQueue::push(const ActivityBuffer& buffer) {
  {
    std::lock_guard lock(mutex_);
    buffers_.push_back(buffer);
  }
  ready_.notify_one();
}

std::optional<ActivityBuffer> BufferQueue::pop() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [this] { return closed_ || !buffers_.empty(); });
  if (buffers_.empty()) return std::nullopt;
  ActivityBuffer buffer = buffers_.front();
  buffers_.pop_front();
  return buffer;
}

void BufferQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

std::size_t BufferQueue::size() const {
  std::lock_guard lock(mutex_);
  return buffers_.size();
}

}  // namespace cs::profiler
