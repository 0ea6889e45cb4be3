#pragma once
// Doors in: traces recorded by other profilers become trace stores, so the
// same timeline, analyses and exports serve them.
//
// - PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, one file per
//   rank (the rank is read from distributedInfo.rank).
// - Nsight Systems SQLite exports (`nsys export --type sqlite`), one file per
//   rank (the rank is read from an "MPI Rank N" thread name, or the order of
//   the files).
// Several files make one run store: each is imported into a store of its own
// and the stores are merged with their clocks aligned (see trace_merge.h).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/trace_merge.h"
#include "core/trace_writer.h"

namespace cs::trace {

struct ImportOptions {
  ClockAlignment alignment = ClockAlignment::automatic;  // for several files
  std::string title;                                     // default: the first file's name
  WriterOptions writer;
  // The most bytes of JSON one file may hold, once decompressed (0: half this
  // machine's memory): a small gzip can hold gigabytes of whitespace.
  std::size_t max_text_bytes = 0;
  // More meta rows for the store: "predicted_step", the planner's prediction
  // of the plan the traced program ran (`trace import --plan`).
  std::vector<std::pair<std::string, std::string>> meta;
};

struct ImportReport {
  std::string format;  // "kineto", "nsys", or "clusterscope export" (a Chrome trace of ours)
  std::int32_t ranks = 0;
  std::int64_t events = 0;      // events the store kept
  std::vector<std::string> losses;  // what its writer could not keep (trace info's warnings)
  std::int64_t bytes_read = 0;  // input bytes parsed (uncompressed JSON; SQLite file size)
  // Records not imported, by what they are ("flow events (ph s/f)": 12345).
  std::map<std::string, std::int64_t> skipped;
  std::string clock_alignment;  // with several files: how their clocks were aligned
  // The times are on the run's one clock already (this product's own export):
  // several such files are merged with the offsets they record, not realigned.
  bool on_one_clock = false;
  std::vector<std::string> warnings;
};

enum class TraceFormat { unknown, kineto_json, nsys_sqlite, trace_store };

// By content: gzip, '{' or '[' → Kineto (Chrome trace-event) JSON; SQLite
// with StringIds → nsys export; SQLite with the store's application id → a trace store.
TraceFormat detect_trace_format(const std::string& path);

// What another program's trace is, for a file that is no trace store but
// that the import reads: "an Nsight Systems SQLite export" or "a PyTorch
// profiler (Kineto) or Chrome JSON trace"; "" for anything else, and for an
// SQLite file cut short (its damage is what to say).
std::string importable_trace_kind(const std::string& path);

Result<ImportReport> import_kineto(const std::vector<std::string>& files, const std::string& output,
                                   const ImportOptions& options = {});
Result<ImportReport> import_nsys(const std::vector<std::string>& files, const std::string& output,
                                 const ImportOptions& options = {});
// Detects the format of the files (which must agree) and imports them.
Result<ImportReport> import_traces(const std::vector<std::string>& files, const std::string& output,
                                   const ImportOptions& options = {});

}  // namespace cs::trace
