#pragma once
// Doors out: a trace store as Chrome trace-event JSON (opens in Perfetto and
// chrome://tracing, reads in Holistic Trace Analysis), as CSV tables, and as
// a self-contained HTML report.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"

namespace cs::trace {

struct ExportReport {
  std::vector<std::string> files;  // written
  std::int64_t events = 0;
  std::int64_t bytes = 0;
  std::vector<std::string> warnings;
};

// Browsers (and the Perfetto UI, which loads the file in the browser) choke
// on JSON traces of a few hundred megabytes: past this the export warns and
// suggests a time window or fewer ranks.
inline constexpr std::int64_t kLargeJsonBytes = 256ll << 20;

// This product's own Chrome trace export says so in otherData
// ({"producer": "ClusterScope", "clusterscope_export_version": 1}): its import
// then takes each pid as a rank and reads back what the export carries there
// and in each event's args (docs/trace-schema.md, "Exporting").
inline constexpr const char* kExportProducerKey = "producer";
inline constexpr const char* kExportProducer = "ClusterScope";
inline constexpr const char* kExportVersionKey = "clusterscope_export_version";
inline constexpr int kExportVersion = 1;

// A counter as a Chrome trace "C" event. Perfetto names a counter's track
// "<event name> <args key>" (it read "memory in use (bytes) memory in use
// (bytes)" when both were the stored name); chrome://tracing names the track
// by the event name and each args key a series of it. So the stored name is
// written split at its last space, {"memory in use", "(bytes)"}: Perfetto
// joins it back, chrome://tracing shows the name once. A name that does not
// split so (one word, or one whose last word is "value" or repeats the rest)
// goes whole, its key "value".
struct ChromeCounter {
  std::string_view name;
  std::string_view key;
};
ChromeCounter chrome_counter(std::string_view stored_name);
// The stored name of a counter event this product's export wrote: its name
// and key joined, or its name alone where the key is "value" or repeats it
// (exports before the split wrote the stored name as both).
std::string stored_counter_name(std::string_view name, std::string_view key);

// Whether an export may be written at `path`: it replaces an earlier export
// (or any other file named as its output), never an SQLite database (a trace
// store, an Nsight Systems export), a read-only file or a folder, which it
// refuses by name.
Status check_export_path(const std::string& path);

struct ChromeTraceOptions {
  // Only events overlapping [start, end) (their parents too, so slices nest).
  std::optional<TimeRange> window;
  std::vector<std::int32_t> ranks;  // all when empty
  // One file per rank (<stem>.rank<N>.json), each with its own
  // distributedInfo.rank, the layout Holistic Trace Analysis reads.
  bool file_per_rank = false;
  bool counters = true;
  // Each step's critical path on a process of its own ("Critical path", pid
  // kCriticalPathPid, named in otherData's "critical_path_pid"). Not with
  // file_per_rank: a path crosses the ranks.
  bool critical_path = false;
  std::int64_t warn_bytes = kLargeJsonBytes;  // a file larger than this gets a warning
};
inline constexpr std::int64_t kCriticalPathPid = 1000000000;  // above any rank

// Layout: one process (pid) per rank, one thread (tid) per lane, so that the
// slices of a lane nest; process and thread names and sort indexes as "M"
// events; ts and dur in microseconds with three decimals (nanoseconds kept
// exactly), counted from the export's time base (baseTimeNanoseconds, the
// earliest event or counter sample exported, as PyTorch 2 writes it) so that
// doubles hold them exactly; Kineto's
// categories (kernel, gpu_memcpy, cuda_runtime, cpu_op, user_annotation...)
// and args.stream / args.correlation, which HTA reads.
Result<ExportReport> export_chrome_trace(const TraceReader& reader, const std::string& path,
                                         const ChromeTraceOptions& options = {});

// Whether an event of `ranks` (all when empty) overlaps `window`: what a
// Chrome trace or the events table of the window would hold. Asked before
// writing, so that a window in a gap of the trace is refused with no file
// touched.
Result<bool> window_holds_events(const TraceReader& reader, const TimeRange& window,
                                 const std::vector<std::int32_t>& ranks = {});

enum class CsvTable {
  events,
  breakdown,
  kernels,
  collectives,
  stragglers,
  prediction,
  api_calls,    // the CUDA API calls by name (trace stats' "api_calls")
  memory_ops,   // the device's copies and sets by kind, with their bytes
  annotations,  // the annotation ranges by name
};
// Every table, in the order `trace export --table all` and the app write them.
inline constexpr CsvTable kAllCsvTables[] = {
    CsvTable::events,      CsvTable::breakdown,  CsvTable::kernels,
    CsvTable::collectives, CsvTable::stragglers, CsvTable::prediction,
    CsvTable::api_calls,   CsvTable::memory_ops, CsvTable::annotations};
std::string_view to_string(CsvTable t);
std::optional<CsvTable> csv_table_from_string(std::string_view text);

// One table as CSV (RFC 4180 quoting, a header row). `analysis` is needed by
// every table but `events` (analysed over the window for a range's tables);
// `window` limits the events table to the events overlapping it (as the
// Chrome trace).
Result<ExportReport> export_csv(const TraceReader& reader, const RunAnalysis* analysis,
                                CsvTable table, const std::string& path,
                                std::optional<TimeRange> window = {});

// A single HTML file with no external resource: run metadata, the per-rank
// breakdown as inline SVG charts and tables, steps, top kernels, collectives
// with bandwidths, stragglers and predicted against measured (per category
// and part, each part of the step with the verdict, and the machine probe:
// what `clusterscope trace stats` prints, from the same comparison).
// `notes` say what the figures cover: a range of the run (the analysis'
// window), and damage found in the store (verify_store's message, which
// names the store; else the damage the analysis met), shown under the title
// so that a colleague reading the file knows.
struct ReportNotes {
  std::optional<TimeRange> window;
  std::string damage;
};
Result<ExportReport> export_html_report(const TraceReader& reader, const RunAnalysis& analysis,
                                        const std::string& path, const ReportNotes& notes = {});

}  // namespace cs::trace
