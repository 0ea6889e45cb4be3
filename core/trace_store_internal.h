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
#include <set>
#include <string>
#include <vector>

#include "core/kernel_launch.h"
#include "core/result.h"
#include "core/trace_sqlite.h"
#include "core/trace_store.h"
#include "core/trace_types.h"

namespace cs::trace::store {

// kernel_launches' columns after event_id, in the order launch_at reads them.
inline constexpr const char* kLaunchColumns =
    "grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread, "
    "shared_memory_bytes, dynamic_shared_memory_bytes";
// The launch in a row's columns [first, first + 9) of kLaunchColumns, when it
// is one a GPU could have made (checked_launch: an edited row is not).
inline std::optional<KernelLaunch> launch_at(const sql::Statement& s, int first) {
  KernelLaunch l;
  for (int i = 0; i < 3; ++i) {
    l.grid[i] = s.int64_at(first + i);
    l.block[i] = s.int64_at(first + 3 + i);
  }
  l.registers_per_thread = s.int64_at(first + 6);
  l.shared_memory_bytes = s.int64_at(first + 7);
  l.dynamic_shared_memory_bytes = s.int64_at(first + 8);
  return checked_launch(l);
}

// Level of detail: level L groups events narrower than 2 * W(L) into tiles of
// width W(L) = 2^(kLodBaseShift + L) ns and keeps wider ones as they are.
inline constexpr int kLodBaseShift = 10;
inline constexpr int kLodMaxLevel = 50;
// Lanes with fewer events are read raw; a level is kept only when it has at
// most 1/kLodRowsDivisor of the lane's events as rows.
inline constexpr std::int64_t kLodMinEvents = 2048;
inline constexpr std::int64_t kLodRowsDivisor = 16;
inline std::int64_t lod_width(int level) {
  return std::int64_t{1} << (kLodBaseShift + level);
}

// One meta row's value, found by a scan of the meta table (+key keeps SQLite
// from searching its key): a search compares keys with the rows on its way
// and reads each such row whole, and a plan over a large cluster (meta
// plan_json, tens of MB) made every lookup near it read the plan (trace
// info took seconds). A scan reads only the keys and the row it returns;
// every meta read takes this form.
inline constexpr const char* kMetaLookup = "SELECT value FROM meta WHERE +key = ?";

Status create_schema(sql::Database& db);
// Connection settings for speed: page cache, memory mapping, temp storage.
Status tune_connection(sql::Database& db, bool writer);

// "host:pid:start-time" of this process, recorded as the store's writer.
std::string this_process_identity();

// Meta rows a store writes of itself when created or finalized (format,
// status, writer, ...) or from its RunInfo (title, source, ...): a store
// made from another's rows (a merge, an import of this product's export)
// writes its own, and copies only the others.
bool is_own_meta_row(std::string_view key);
// True when `identity` names a live process on this host. A process on
// another host cannot be checked and counts as gone.
bool process_alive(const std::string& identity);
// "host:pid:start" (a writer's identity) as people read it: "host:pid".
std::string identity_for_people(std::string identity);
// True when `identity` was recorded by a process of this host.
bool written_on_this_host(const std::string& identity);

// Opens a store and checks its identity and version (messages name the file).
// `state` receives what the meta table says.
Result<sql::Database> open_store(const std::string& path, bool writable, StoreState* state);

// Builds lane statistics, level-of-detail tables and event chunks, in one
// transaction. `chunked` lists lanes whose chunks a writer already wrote in
// full while writing (their events came in time order); the others' chunks
// are rebuilt from the rows.
Status finalize(sql::Database& db, std::string_view status_if_unclosed,
                const std::set<std::uint32_t>& chunked = {});

// A finished store leaves write-ahead logging (after its last checkpoint):
// a reader without write access to a WAL store leaves -wal and -shm files
// beside it, and a finished store has no writer left to read beside. When
// another connection still holds the store, it stays in WAL; no harm.
void leave_wal(sql::Database& db);

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
  EventDetails details;  // only with ScanColumns::full or ::transfers
};

// light: no event_details columns; full: all; transfers: event_details only
// for the events that move bytes, communication and copies (what the
// analyses need).
enum class ScanColumns { light, full, transfers };

// Events in (start, end descending, id) order with start in [from, to).
class EventScan {
 public:
  virtual ~EventScan() = default;
  virtual bool next(ScanRow& row) = 0;
  virtual const Status& status() const = 0;
};

// Reads the events rows of a set of segments. Opens segments lazily, so a
// scan over thousands of disjoint segments holds one or two statements at a
// time. Works on every store, finalized or not.
class SegmentMerge final : public EventScan {
 public:
  SegmentMerge(sql::Database& db, std::vector<Segment> segments, std::int64_t from, std::int64_t to,
               ScanColumns columns = ScanColumns::light);
  bool next(ScanRow& row) override;
  const Status& status() const override { return status_; }

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

// Chunks: a finalized store also keeps each lane's events in time order,
// kChunkEvents to a blob, delta- and varint-encoded. They are derived data
// (finalize builds them from the rows) that make scans a decode of a few
// blobs instead of a statement step per event.
inline constexpr int kChunkEvents = 4096;

struct Chunk {
  std::uint32_t lane = 0;
  std::int64_t seq = 0;
  std::int64_t first_start = 0;
  std::int64_t last_start = 0;
  std::int64_t end_max = 0;
  std::int64_t count = 0;
};

// Chunk encoding, per event, each field against the previous event of the
// chunk: id (zigzag delta), start (zigzag delta), duration, name, kind (bit 7:
// has an event_details row), category, correlation (zigzag delta), step
// (zigzag). Integers are LEB128 varints.
// A chunk encoded and ready to insert: one row of the chunks table.
struct SealedChunk {
  std::int64_t id = 0;  // lane << 32 | seq
  std::uint32_t lane = 0;
  std::int64_t first_start = 0, last_start = 0, end_max = 0, count = 0;
  std::string data;
};
// Inserts it with `insert`, the statement of kInsertChunkSql.
Status insert_chunk(sql::Database& db, sql::Statement& insert, const SealedChunk& chunk);

class ChunkEncoder {
 public:
  void add(const ScanRow& r, bool has_details);
  bool full() const { return count_ >= kChunkEvents; }
  bool empty() const { return count_ == 0; }
  // The chunk (lane, seq) as it stands; the encoder starts an empty one.
  SealedChunk seal(std::uint32_t lane, std::int64_t seq);
  // seal(), then insert_chunk().
  Status write(sql::Database& db, sql::Statement& insert, std::uint32_t lane, std::int64_t seq);

 private:
  std::string data_;
  std::int64_t count_ = 0;
  std::int64_t prev_id_ = 0, prev_start_ = 0, prev_correlation_ = 0;
  std::int64_t first_start_ = 0, last_start_ = 0, end_max_ = 0;
};
inline constexpr const char* kInsertChunkSql =
    "INSERT INTO chunks(id, lane, first_start, last_start, end_max, count, data) "
    "VALUES(?,?,?,?,?,?,?)";

// A lane's chunks, in order.
Result<std::vector<Chunk>> load_chunks(sql::Database& db, std::uint32_t lane);

// Events of several lanes' chunks in start order.
class ChunkMerge final : public EventScan {
 public:
  ChunkMerge(sql::Database& db, const std::vector<const std::vector<Chunk>*>& lanes,
             std::int64_t from, std::int64_t to, ScanColumns columns = ScanColumns::light);
  bool next(ScanRow& row) override;
  const Status& status() const override { return status_; }

 private:
  struct Cursor {
    const std::vector<Chunk>* chunks = nullptr;
    std::size_t next_chunk = 0;
    std::vector<ScanRow> rows;  // the decoded chunk
    std::vector<std::uint8_t> has_details;
    std::size_t at = 0;
  };
  // Moves c to its next row that starts in [from, to); false at its end.
  bool settle(Cursor& c);
  bool decode(Cursor& c, const Chunk& chunk);
  struct Later {
    const std::vector<Cursor>* cursors;
    bool operator()(int a, int b) const;
  };

  sql::Database& db_;
  std::int64_t from_;
  std::int64_t to_;
  ScanColumns columns_;
  std::vector<Cursor> cursors_;
  std::priority_queue<int, std::vector<int>, Later> heap_;
  sql::Statement blob_;
  sql::Statement details_;
  Status status_;
};

}  // namespace cs::trace::store
