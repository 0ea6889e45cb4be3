#pragma once
// Reads a trace store: run metadata, ranks, lanes, and events — for the
// timeline reduced to what a pixel width can show, by name, under a time, or
// in time order for analyses and exports. No SQLite type crosses this header.
//
// A reader is not thread-safe: open one per thread (opening is cheap and
// readers never block each other or a writer).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/trace_store.h"
#include "core/trace_types.h"
#include "core/trace_writer.h"

namespace cs::trace {

struct LaneInfo {
  LaneId id;
  std::int32_t rank = 0;
  LaneKind kind = LaneKind::gpu_stream;
  std::string name;
  std::int32_t sort_index = 0;
  std::int64_t event_count = 0;
  std::int64_t first_ns = 0;  // earliest start
  std::int64_t last_ns = 0;   // latest end
  std::int64_t max_duration_ns = 0;
  std::int32_t max_depth = 0;  // deepest nesting (0: no event inside another)
};

// Of the annotation lanes, only the Kineto import's gpu_user_annotation lanes
// ("GPU 0 stream 7 annotations", the GPU-side projections of host ranges)
// are on the device; NVTX ranges, the engines' phases and a tracer's
// annotations are host-side.
inline bool gpu_side_annotations(const LaneInfo& lane) {
  return lane.kind == LaneKind::annotation && lane.name.starts_with("GPU ") &&
         lane.name.ends_with(" annotations");
}

// One drawable item of a lane: a single event (count == 1, event_id set) or
// `count` narrow events folded into one, named after the longest of them.
struct Span {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t count = 1;
  std::int64_t event_id = 0;  // 0 for a fold
  StringId name;
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
  std::int32_t depth = 0;  // nesting level in the lane, 0 outermost
};

// One counter series of a rank and what its samples span.
struct CounterSeries {
  std::int32_t rank = 0;
  StringId name;
  std::int64_t samples = 0;
  double low = 0, high = 0;  // its least and greatest value
  std::int64_t first_ns = 0, last_ns = 0;
};

// The samples of a counter that fall in one pixel of the timeline: the
// least, the greatest and the last of them (the value held after it).
struct CounterColumn {
  std::int64_t start_ns = 0;  // its first sample's time
  std::int64_t last_ns = 0;   // its last sample's
  std::int64_t samples = 0;
  double low = 0, high = 0, last = 0;
};

struct CounterView {
  std::optional<double> held;  // the last sample before the window, if any
  std::vector<CounterColumn> columns;
};

struct StoredEvent {
  std::int64_t id = 0;
  std::int32_t rank = 0;
  Event event;
  // How a kernel was launched, where the store kept it: read by event() and
  // event_at() (a point read); the scans and searches leave it empty.
  std::optional<KernelLaunch> launch;
};

struct TimeRange {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  bool empty() const { return end_ns <= start_ns; }
};

enum class NameMatch { exact, substring };
// The order find_events keeps its first `limit` matches in: the store's (by
// rank, as written) or time's, across the ranks (a capped search then
// covers the trace's beginning on every rank, not one rank's).
enum class FindOrder { id, time };

class TraceReader {
 public:
  struct Options {
    // A store whose writer died before closing it is finalized in place when
    // the file is writable (lane statistics and level of detail are built and
    // its status becomes "interrupted"); otherwise it is read as it is, slower.
    bool repair = true;
    // Every writer has exited (a launcher after its ranks): a store left
    // "writing" by a process of another host is repaired too. Otherwise such
    // a store is read as it is: its writer may still be running there.
    bool writers_ended = false;
  };

  static Result<std::unique_ptr<TraceReader>> open(const std::string& path, Options options);
  static Result<std::unique_ptr<TraceReader>> open(const std::string& path) {
    return open(path, Options{});
  }
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::string& path() const;
  const StoreState& state() const;
  RunInfo run() const;
  std::optional<std::string> meta(std::string_view key) const;
  std::vector<std::pair<std::string, std::string>> all_meta() const;
  // The run's world size: meta "world_size" when recorded (a whole number
  // from the ranks recorded to kMaxWorldSize), else the number of ranks.
  static constexpr int kMaxWorldSize = 1 << 24;
  int world_size() const;
  // One line per loss the writer counted (kLossCounts), e.g. "6033 events
  // lost after a write failed (a full disk?)"; empty when nothing was lost.
  std::vector<std::string> losses() const;
  // A damaged page or a failed read met by any query so far: a query that
  // met one may have returned fewer rows than the store holds (the meta, a
  // collective's bytes), so whatever is made from them says so instead.
  // "<path> is damaged: <SQLite's words>"; ok while none was met.
  Status damage() const;

  // For a store still being written, these are reloaded when the writer
  // commits more: a reference is valid until the next query.
  const std::vector<RankInfo>& ranks() const;
  const std::vector<LaneInfo>& lanes() const;  // by rank, then sort index, then id
  std::vector<LaneInfo> lanes_of(std::int32_t rank) const;
  const LaneInfo* lane(LaneId id) const;
  TimeRange time_range() const;  // of all events
  std::int64_t event_count() const;

  // The string of an id ("" for an unknown id); cached.
  const std::string& string(StringId id) const;
  std::optional<StringId> find_string(std::string_view text) const;

  // The timeline's query: the events of `lane` that overlap [t0, t1), for a
  // view `pixels` wide. Events narrower than `min_span_pixels` fold with their
  // neighbours less than a pixel away, so the result holds at most about one
  // span per pixel and nesting depth. Sorted by depth, then start.
  Result<std::vector<Span>> spans(LaneId lane, std::int64_t t0, std::int64_t t1, int pixels,
                                  int min_span_pixels = 3) const;

  // The innermost event of `lane` running at `time_ns` ([start, end)).
  Result<std::optional<StoredEvent>> event_at(LaneId lane, std::int64_t time_ns) const;
  Result<StoredEvent> event(std::int64_t id) const;
  // How event `id` was launched; empty for an event with no launch kept
  // (not a kernel, a CPU engine's, a store written before launches were).
  Result<std::optional<KernelLaunch>> kernel_launch(std::int64_t id) const;
  // Events whose name matches, in `order`, at most `limit`; all ranks when
  // `rank` is empty.
  Result<std::vector<StoredEvent>> find_events(std::string_view text, NameMatch match,
                                               std::size_t limit,
                                               std::optional<std::int32_t> rank = {},
                                               FindOrder order = FindOrder::id) const;

  // Events of the given lanes (all lanes when empty) starting in [t0, t1), in
  // start order. The callback returns false to stop early.
  Status for_each_event(const std::vector<LaneId>& lanes, std::int64_t t0, std::int64_t t1,
                        const std::function<bool(const StoredEvent&)>& visit) const;

  Result<std::vector<StepMetrics>> steps(std::optional<std::int32_t> rank = {}) const;
  // The counter series present, by rank and name.
  Result<std::vector<CounterSeries>> counter_series() const;
  Result<std::vector<CounterSample>> counters(std::int32_t rank, StringId name) const;
  // The timeline's query of a counter: its samples in [t0, t1) reduced to
  // at most one column per pixel of a view `pixels` wide, with the value
  // held when the window opens. Reads the window's samples once, through
  // the series' index.
  Result<CounterView> counter_view(std::int32_t rank, StringId name, std::int64_t t0,
                                   std::int64_t t1, int pixels) const;

  // For the analyses and the merge, which live beside the reader in core.
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit TraceReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cs::trace
