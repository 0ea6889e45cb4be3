#pragma once
// The trace store file: its identity, schema version and state. The schema is
// documented in docs/trace-schema.md. TraceWriter creates stores,
// TraceReader reads them; these functions look at a file without reading its
// events, and complete a store whose writer did not close it.

#include <cstdint>
#include <string>

#include "core/result.h"

namespace cs::trace {

// The schema this build writes and reads. Stores of an older version are
// migrated when opened for writing (there is none yet); newer ones are refused.
inline constexpr int kSchemaVersion = 2;
// PRAGMA application_id of every store: "CSTR".
inline constexpr std::int32_t kApplicationId = 0x43535452;

// What a writer counted and left out, recorded as meta rows at close (a
// merge sums them over its inputs): the key, and what it counts (for one,
// for more).
struct LossCount {
  const char* key;
  const char* one;
  const char* many;
};
inline constexpr LossCount kLossCounts[] = {
    {"events_dropped_after_write_failure", "event lost after a write failed (a full disk?)",
     "events lost after a write failed (a full disk?)"},
    {"events_dropped_with_unknown_lane", "event dropped for a lane id the writer never gave",
     "events dropped for a lane id the writer never gave"},
    {"events_dropped_outside_the_time_a_trace_holds",
     "event dropped for a time past what a trace holds",
     "events dropped for a time past what a trace holds"},
    {"steps_and_samples_dropped_with_nan", "step row or counter sample dropped for a NaN",
     "step rows and counter samples dropped for a NaN"},
    {"events_with_end_before_start", "event kept with end = start (its end came first)",
     "events kept with end = start (their end came first)"},
};

struct StoreState {
  int schema_version = 0;
  // "writing" while a writer has it open (or died before closing it), then
  // what close() recorded: "complete", "cancelled", "crashed", ..., or
  // "interrupted" when finalize_store() completed a store whose writer died.
  std::string status;
  bool finalized = false;     // level-of-detail tables and lane statistics are built
  bool writer_alive = false;  // a writer process on this host still has it open
  // Status "writing" by a process of another host: whether it still runs
  // cannot be told from here, so the store is not repaired (finalized in
  // place under a live writer, the run's next write failed and it died).
  bool writer_elsewhere = false;
  std::string writer;         // "host:pid" of the process that created it
  // Status "writing" by a writer that has ended (a kill, or a close that
  // failed on a full disk): why the reader could not complete the store
  // (TraceReader::open), "" when it was not tried or when it was completed.
  std::string not_completed;
  std::int64_t events = 0;    // committed events
  // A store of schema version 1 is upgraded when opened: in place, or, where
  // the file cannot be written, in a copy in the temporary folder, made once
  // a process.
  enum class Upgrade { none, in_place, in_a_copy };
  Upgrade upgraded = Upgrade::none;
};

// What an upgrade did to the store `path`, to say where one changed a file
// or read a copy ("" for none): the CLI's note and the app's header.
std::string upgrade_note(const std::string& path, const StoreState& state);

// Opens `path` read-only and checks that it is a trace store this build can
// read. A non-SQLite file, a foreign SQLite database, an empty file and a
// newer schema are refused with a message that names the file.
Result<StoreState> inspect_store(const std::string& path);

// Whether `path` is what a writer leaves when it fails to make a store there
// (TraceWriter::create on a full disk, or killed while creating it): an empty
// file, or an SQLite database with no tables. It holds nothing recorded.
bool is_unmade_store(const std::string& path);

// Builds what a closed store has and a store cut short lacks (lane statistics,
// level-of-detail tables) and records status "interrupted". Refused while the
// writer is alive. A finalized store is left as it is.
// A store left "writing" by another host's process is refused unless the
// caller knows its writers have ended.
Status finalize_store(const std::string& path, bool writers_ended = false);

// Reads the whole file to check it: SQLite's own structure check, then, for
// a finalized store, that its event chunks decode and agree with its rows.
// Slow (it reads everything); for `clusterscope trace info --check` and the
// app's run view (on a worker thread, after the analysis).
Status verify_store(const std::string& path);

}  // namespace cs::trace
