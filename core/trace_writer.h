#pragma once
// Writes a trace store (SQLite, schema in docs/trace-schema.md): run metadata,
// ranks, lanes, interned names, events, step metrics and counters. Rows are
// buffered and committed in batches inside transactions (WAL), when a bound of
// rows or of time is reached, so that a writer killed mid-run leaves a store
// that opens with everything committed before the kill. Every add is safe to
// call from several threads (a tracer's decoding thread, the worker's
// compute and communication threads).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/kernel_launch.h"
#include "core/result.h"
#include "core/trace_types.h"

namespace cs::trace {

// What the store records about the run (its meta table).
struct RunInfo {
  std::string title;
  std::string source;            // "cpu-engine", "cuda-engine", "cupti", "nsys-import", "kineto-import", "planner", ...
  std::int64_t start_utc_ns = 0; // wall-clock start, UTC nanoseconds
  std::string clock;             // the clock event times are on, e.g. "CLOCK_REALTIME"
  std::string host;
  std::string command_line;
  std::string plan_json;         // the Plan (cluster, workload, parallel, precision) as JSON, or ""
  std::string tool_versions_json;  // {"clusterscope": "0.1.0", "cuda": "13.0", "nccl": "2.28.9", ...}
};

// The meta row naming the run a rank store is of: an id the launcher draws
// for each run, the same on every rank, which a merge compares
// (trace_merge.h); a run store merged from them keeps it.
inline constexpr const char* kRunIdMeta = "run_id";

// The sources the worker writes: a run ClusterScope's own engines trained
// (its command line and plan are the worker's, the same on every rank).
inline constexpr const char* kCpuEngineSource = "cpu-engine";
inline constexpr const char* kCudaEngineSource = "cuda-engine";
inline bool trained_by_engine(const RunInfo& run) {
  return run.source == kCpuEngineSource || run.source == kCudaEngineSource;
}

struct RankInfo {
  std::int32_t rank = 0;
  std::string host;
  std::string device;            // "NVIDIA H200 (GPU 0)", "CPU"
  std::int64_t pid = 0;
  std::int64_t clock_offset_ns = 0;  // add to this rank's times to reach the run clock
  bool clock_offset_measured = false;  // the tracer measured the offset (even when it is 0)
};

struct WriterOptions {
  std::size_t flush_rows = 65536;  // commit when this many rows wait
  std::chrono::milliseconds flush_interval{500};  // ... or when the oldest waits this long
  // add() blocks while this many events wait, so a writer that cannot keep
  // up bounds its memory instead of growing without end.
  std::size_t max_buffered_rows = 1 << 19;
};

// Whether a store may be written at `path`: not where a folder is (even an
// empty one: the user meant a file in it), nor over a file that is not a
// trace store (a plan, a text file, another program's database).
Status check_store_path(const std::string& path);

// Builds a store under a temporary name beside `path` (`build` writes it and
// closes it) and moves it onto `path` only when `build` succeeded: an earlier
// store there stays whole until then, and as it was after a failure (a full
// disk, a bad input), with the temporary removed. Errors name `path`. For
// imports and merges; a run writes its store in place, where it is watched.
Status build_store_then_replace(const std::string& path,
                                const std::function<Status(const std::string& temporary)>& build);

class TraceWriter {
 public:
  // Creates the store at `path`, replacing any file there (check_store_path).
  static Result<std::unique_ptr<TraceWriter>> create(const std::string& path, const RunInfo& run,
                                                     WriterOptions options = {});
  // Closes as "complete" if close() was not called, as "failed" when
  // destroyed while an exception unwinds.
  virtual ~TraceWriter() = default;

  virtual void add_rank(const RankInfo& rank) = 0;
  virtual LaneId add_lane(std::int32_t rank, LaneKind kind, std::string_view name,
                          std::int32_t sort_index = 0) = 0;
  virtual StringId intern(std::string_view text) = 0;
  virtual void add(const Event& event) = 0;
  // A kernel and how it was launched (kept in kernel_launches).
  virtual void add(const Event& event, const KernelLaunch& launch) = 0;
  // An event, with its launch where it is a kernel its source gave one for.
  void add_with_launch(const Event& event, const std::optional<KernelLaunch>& launch) {
    if (launch)
      add(event, *launch);
    else
      add(event);
  }
  virtual void add(const StepMetrics& metrics) = 0;
  virtual void add(const CounterSample& sample) = 0;
  virtual void set_meta(std::string_view key, std::string_view value) = 0;

  // Commits everything buffered so far.
  virtual Status flush() = 0;
  // Flushes and records how the run ended: "complete", "cancelled", "crashed", ...
  virtual Status close(std::string_view status = "complete") = 0;
  // The first write failure (a full disk, ...); rows committed before it stay.
  virtual Status error() const = 0;
  // Step rows committed so far: what a reader finds after a failure.
  virtual std::int64_t committed_steps() const = 0;
  virtual const std::string& path() const = 0;
};

}  // namespace cs::trace
