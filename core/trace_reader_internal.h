#pragma once
// Internal to core: the reader's state, shared with the analyses and the
// merge so that they scan events with the same code the timeline uses.

#include <map>
#include <memory>
#include <unordered_map>

#include "core/trace_reader.h"
#include "core/trace_store_internal.h"

namespace cs::trace {

// What a store just written kept of the `sent` events: its event count, with
// what its writer could not keep in `losses` (times past what a trace holds:
// a session start or clock offset far off; trace info's warnings). An error
// when it kept none of them: an import said "137 events" over an empty store.
Result<std::int64_t> count_kept_events(const std::string& store, std::int64_t sent,
                                       std::vector<std::string>& losses);

struct TraceReader::Impl {
  sql::Database db;
  std::string path;
  StoreState state;
  std::vector<RankInfo> ranks;
  std::vector<LaneInfo> lanes;
  std::unordered_map<std::uint32_t, std::size_t> lane_index;  // lane id -> lanes[i]
  struct LodRange {
    int finest = -1;
    int coarsest = -1;
  };
  std::unordered_map<std::uint32_t, LodRange> lod;
  std::int64_t data_version = -1;

  // Caches, dropped when another connection commits (a live writer).
  std::map<std::uint32_t, std::vector<store::Segment>> segments;
  std::unordered_map<std::uint32_t, std::string> strings;

  // Statements every query uses, prepared once.
  sql::Statement version_stmt;
  sql::Statement string_stmt;
  sql::Statement lod_before;  // the last level-of-detail row starting before a time
  sql::Statement lod_range;   // the rows starting in [a, b)
  sql::Statement launch_stmt;  // a kernel's launch; unprepared while unused
  bool launches_checked = false;
  bool has_launches = false;  // the store has a kernel_launches table

  Status load();
  Status prepare_lod();
  Result<std::int64_t> read_version();
  // Drops the caches if the file changed since they were filled.
  Status check_version();
  std::map<std::uint32_t, std::vector<store::Chunk>> chunks;

  Result<const std::vector<store::Segment>*> lane_segments(std::uint32_t lane);
  Result<const std::vector<store::Chunk>*> lane_chunks(std::uint32_t lane);
  // Events of `lanes` (all when empty) starting in [from, to), in time
  // order: from the chunks of a finalized store, else from its rows.
  Result<std::unique_ptr<store::EventScan>> scan(const std::vector<LaneId>& lanes,
                                                 std::int64_t from, std::int64_t to,
                                                 store::ScanColumns columns);
  Result<std::vector<store::Segment>> segments_of(const std::vector<LaneId>& lanes);
  LaneInfo* find_lane(std::uint32_t id);
  std::int32_t rank_of(std::uint32_t lane) const;
};

// Converts a scanned row into the public event form.
StoredEvent to_stored_event(const store::ScanRow& row, std::int32_t rank);

}  // namespace cs::trace
