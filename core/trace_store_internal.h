#pragma once
// Internal to core: the trace store's schema, how a store file is opened and
// checked, how it is finalized, and ordered iteration over events.
//
// Events are appended in batches. The writer sorts each batch by (lane,
// start, end descending) before giving ids, so the events of one lane in one
// batch are a contiguous id range sorted by time: a *segment*, recorded in
// the segments table. Reading a lane in time order is a merge of its
// segments (they rarely overlap), each a plain rowid range scan; no index on
// the events table is needed, and writing stays a pure append.

#include <cstdint>
#include <queue>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/trace_sqlite.h"
#include "core/trace_store.h"
#include "core/trace_types.h"

namespace cs::trace::store {

// Level of detail: level L groups events narrower than 2 * W(L) into tiles of
// width W(L) = 2^(kLodBaseShift + L) ns and keeps wider ones as they are.
inline constexpr int kLodBaseShift = 10;
inline constexpr int kLodMaxLevel = 50;
// Lanes with fewer events are read raw; a level is kept only when it has at
// most 1/kLodRowsDivisor of the lane's events as rows.
inline constexpr std::int64_t kLodMinEvents = 2048;
inline constexpr std::int64_t kLodRowsDivisor = 8;
inline std::int64_t lod_width(int level) {
  return std::int64_t{1} << (kLodBaseShift + level);
}

Status create_schema(sql::Database& db);
// Connection settings for speed: page cache, memory mapping, temp storage.
Status tune_connection(sql::Database& db, bool writer);

// "host:pid:start-time" of this process, recorded as the store's writer.
std::string this_process_identity();
// True when `identity` names a live process on this host. A process on
// another host cannot be checked and counts as gone.
bool process_alive(const std::string& identity);

// Opens a store and checks its identity and version (messages name the file).
// `state` receives what the meta table says.
Result<sql::Database> open_store(const std::string& path, bool writable, StoreState* state);

// Builds lane statistics and level-of-detail tables, in one transaction.
Status finalize(sql::Database& db, std::string_view status_if_unclosed);

struct Segment {
  std::uint32_t lane = 0;
  std::int64_t first_id = 0;
  std::int64_t last_id = 0;
  std::int64_t start_min = 0;
  std::int64_t start_max = 0;
  std::int64_t end_max = 0;
  std::int64_t duration_max = 0;
};

// Segments of the given lanes (all lanes when empty), sorted by start_min.
Result<std::vector<Segment>> load_segments(sql::Database& db,
                                           const std::vector<std::uint32_t>& lanes = {});

// The columns of event_details: an event has a row there only when one of
// them differs from its default.
struct EventDetails {
  std::int64_t bytes = 0;
  double flops = 0;
  Collective collective = Collective::none;
  DataType dtype = DataType::none;
  std::int64_t count = 0;
  std::int32_t peer = -1;
  std::int32_t group_size = 0;

  static EventDetails of(const Event& e) {
    return {e.bytes, e.flops, e.collective, e.dtype, e.count, e.peer, e.group_size};
  }
  bool is_default() const {
    return bytes == 0 && flops == 0 && collective == Collective::none && dtype == DataType::none &&
           count == 0 && peer < 0 && group_size == 0;
  }
};

struct ScanRow {
  std::int64_t id = 0;
  std::uint32_t lane = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint32_t name = 0;
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
  std::int64_t correlation = 0;
  std::int32_t step = -1;
  EventDetails details;  // only with ScanColumns::full
};

enum class ScanColumns { light, full };

// Events of a set of segments with start in [from, to), in (start, end
// descending, id) order. Opens segments lazily, so a scan over thousands of
// disjoint segments holds one or two statements at a time.
class SegmentMerge {
 public:
  SegmentMerge(sql::Database& db, std::vector<Segment> segments, std::int64_t from, std::int64_t to,
               ScanColumns columns = ScanColumns::light);
  bool next(ScanRow& row);
  const Status& status() const { return status_; }

 private:
  struct Source {
    sql::Statement stmt;
    ScanRow head;
  };
  struct Later {
    const std::vector<Source>* sources;
    bool operator()(int a, int b) const;
  };

  void open_until(std::int64_t start);
  bool open_segment(const Segment& s);
  bool advance(Source& src);
  std::int64_t first_id_at_or_after(const Segment& s, std::int64_t start);

  sql::Database& db_;
  std::vector<Segment> segments_;
  std::size_t next_segment_ = 0;
  std::int64_t from_;
  std::int64_t to_;
  ScanColumns columns_;
  std::vector<Source> sources_;
  std::vector<int> free_sources_;
  std::priority_queue<int, std::vector<int>, Later> heap_;
  sql::Statement probe_;
  Status status_;
};

}  // namespace cs::trace::store
