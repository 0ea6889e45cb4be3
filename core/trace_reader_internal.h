#pragma once
// Internal to core: the reader's state, shared with the analyses and the
// merge so that they scan events with the same code the timeline uses.

#include <map>
#include <unordered_map>

#include "core/trace_reader.h"
#include "core/trace_store_internal.h"

namespace cs::trace {

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

  Status load();
  // Drops the caches if the file changed since they were filled.
  Status check_version();
  Result<const std::vector<store::Segment>*> lane_segments(std::uint32_t lane);
  Result<std::vector<store::Segment>> segments_of(const std::vector<LaneId>& lanes);
  LaneInfo* find_lane(std::uint32_t id);
  std::int32_t rank_of(std::uint32_t lane) const;
};

// Converts a scanned row into the public event form.
StoredEvent to_stored_event(const store::ScanRow& row, std::int32_t rank);

}  // namespace cs::trace
