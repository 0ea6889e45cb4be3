// TEST ONLY: a TraceWriter::create that writes JSON lines instead of SQLite,
// so that the injection library can be run end to end on a GPU machine before
// the trace store's SQLite writer is part of the build. It is linked only into
// the test build of the injection library made by
// scripts/gpu/cupti_device_check.sh, never into libclusterscope-inject.so.
//
// One JSON object per line: {"t":"run"|"rank"|"lane"|"string"|"event"|
// "counter"|"meta"|"close", ...}; enums as their integer values.

#include <atomic>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/trace_writer.h"

namespace cs::trace {

namespace {

class JsonLinesWriter final : public TraceWriter {
 public:
  JsonLinesWriter(std::string path, std::ofstream out)
      : path_(std::move(path)), out_(std::move(out)) {}

  void add_rank(const RankInfo& r) override {
    line({{"t", "rank"}, {"rank", r.rank}, {"host", r.host}, {"device", r.device}, {"pid", r.pid}});
  }
  LaneId add_lane(std::int32_t rank, LaneKind kind, std::string_view name,
                  std::int32_t sort) override {
    std::lock_guard lock(mutex_);
    const LaneId id{++lanes_};
    write({{"t", "lane"},
           {"id", id.value},
           {"rank", rank},
           {"kind", int(kind)},
           {"name", name},
           {"sort", sort}});
    return id;
  }
  StringId intern(std::string_view text) override {
    std::lock_guard lock(mutex_);
    if (text.empty()) return StringId{0};
    auto it = strings_.find(std::string(text));
    if (it != strings_.end()) return it->second;
    const StringId id{static_cast<std::uint32_t>(strings_.size() + 1)};
    strings_.emplace(std::string(text), id);
    write({{"t", "string"}, {"id", id.value}, {"text", text}});
    return id;
  }
  void add(const Event& e) override {
    line({{"t", "event"},
          {"lane", e.lane.value},
          {"kind", int(e.kind)},
          {"category", int(e.category)},
          {"start", e.start_ns},
          {"end", e.end_ns},
          {"name", e.name.value},
          {"corr", e.correlation},
          {"bytes", e.bytes},
          {"collective", int(e.collective)},
          {"dtype", int(e.dtype)},
          {"count", e.count},
          {"peer", e.peer},
          {"step", e.step}});
  }
  void add(const Event& e, const KernelLaunch&) override { add(e); }
  void add(const StepMetrics& m) override {
    ++steps_;
    line({{"t", "step"},
          {"rank", m.rank},
          {"step", m.step},
          {"start", m.start_ns},
          {"end", m.end_ns}});
  }
  void add(const CounterSample& s) override {
    line({{"t", "counter"},
          {"rank", s.rank},
          {"name", s.name.value},
          {"time", s.time_ns},
          {"value", s.value}});
  }
  void set_meta(std::string_view key, std::string_view value) override {
    line({{"t", "meta"}, {"key", key}, {"value", value}});
  }
  Status flush() override {
    std::lock_guard lock(mutex_);
    out_.flush();
    return out_ ? Status{} : Status{Error{path_ + ": write failed"}};
  }
  Status close(std::string_view status) override {
    line({{"t", "close"}, {"status", status}});
    return flush();
  }
  Status error() const override { return {}; }
  std::int64_t committed_steps() const override { return steps_; }
  const std::string& path() const override { return path_; }

 private:
  void line(const nlohmann::json& j) {
    std::lock_guard lock(mutex_);
    write(j);
  }
  void write(const nlohmann::json& j) { out_ << j.dump() << '\n'; }

  std::string path_;
  std::ofstream out_;
  std::mutex mutex_;
  std::uint32_t lanes_ = 0;
  std::atomic<std::int64_t> steps_{0};
  std::map<std::string, StringId> strings_;
};

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::string& path,
                                                         const RunInfo& run, WriterOptions) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Error{path + ": cannot create the file"};
  auto writer = std::make_unique<JsonLinesWriter>(path, std::move(out));
  writer->set_meta("run.title", run.title);
  writer->set_meta("run.source", run.source);
  writer->set_meta("run.clock", run.clock);
  writer->set_meta("run.start_utc_ns", std::to_string(run.start_utc_ns));
  writer->set_meta("run.command_line", run.command_line);
  writer->set_meta("run.tool_versions", run.tool_versions_json);
  return std::unique_ptr<TraceWriter>(std::move(writer));
}

}  // namespace cs::trace
