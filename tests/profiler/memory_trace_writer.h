#pragma once
// A TraceWriter that keeps every row in memory, for tests of what the tracers
// write. Thread-safe like the real writer (the tracer writes from its
// decoding and housekeeping threads).

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/trace_writer.h"

namespace cs::test {

class MemoryTraceWriter final : public trace::TraceWriter {
 public:
  struct Lane {
    std::int32_t rank = 0;
    trace::LaneKind kind = trace::LaneKind::cpu_thread;
    std::string name;
    std::int32_t sort_index = 0;
  };

  void add_rank(const trace::RankInfo& rank) override {
    std::lock_guard lock(mutex_);
    ranks.push_back(rank);
  }
  trace::LaneId add_lane(std::int32_t rank, trace::LaneKind kind, std::string_view name,
                         std::int32_t sort_index) override {
    std::lock_guard lock(mutex_);
    lanes.push_back({rank, kind, std::string(name), sort_index});
    return trace::LaneId{static_cast<std::uint32_t>(lanes.size())};  // 1-based
  }
  trace::StringId intern(std::string_view text) override {
    std::lock_guard lock(mutex_);
    if (text.empty()) return trace::StringId{0};
    auto it = ids_.find(std::string(text));
    if (it != ids_.end()) return it->second;
    strings.emplace_back(text);
    const trace::StringId id{static_cast<std::uint32_t>(strings.size())};
    ids_.emplace(std::string(text), id);
    return id;
  }
  void add(const trace::Event& event) override {
    std::lock_guard lock(mutex_);
    events.push_back(event);
  }
  void add(const trace::Event& event, const trace::KernelLaunch& launch) override {
    std::lock_guard lock(mutex_);
    launches.emplace_back(events.size(), launch);
    events.push_back(event);
  }
  void add(const trace::StepMetrics& metrics) override {
    std::lock_guard lock(mutex_);
    steps.push_back(metrics);
  }
  void add(const trace::CounterSample& sample) override {
    std::lock_guard lock(mutex_);
    counters.push_back(sample);
  }
  void set_meta(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mutex_);
    meta[std::string(key)] = std::string(value);
  }
  Status flush() override { return {}; }
  Status close(std::string_view status) override {
    std::lock_guard lock(mutex_);
    closed_as = std::string(status);
    return {};
  }
  Status error() const override { return {}; }
  std::int64_t committed_steps() const override {
    std::lock_guard lock(mutex_);
    return static_cast<std::int64_t>(steps.size());
  }
  const std::string& path() const override { return path_; }

  // Read after the tracer finished.
  std::string text(trace::StringId id) const {
    return id.value == 0 || id.value > strings.size() ? std::string() : strings[id.value - 1];
  }
  const Lane& lane(trace::LaneId id) const { return lanes.at(id.value - 1); }

  std::vector<trace::RankInfo> ranks;
  std::vector<Lane> lanes;
  std::vector<std::string> strings;
  std::vector<trace::Event> events;
  std::vector<std::pair<std::size_t, trace::KernelLaunch>> launches;  // by index into events
  std::vector<trace::StepMetrics> steps;
  std::vector<trace::CounterSample> counters;
  std::map<std::string, std::string> meta;
  std::string closed_as;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, trace::StringId> ids_;
  std::string path_ = "(memory)";
};

}  // namespace cs::test
