#include "core/trace_reader.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "core/kernel_names.h"
#include "core/parse_count.h"
#include "core/trace_reader_internal.h"

namespace cs::trace {

namespace {

constexpr std::int64_t kMinTime = std::numeric_limits<std::int64_t>::min() / 4;
constexpr std::int64_t kMaxTime = kTraceTimeLimitNs;

const std::string kEmpty;

// One level-of-detail row or one raw event, as the folder sees it.
struct Item {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t count = 1;
  std::int64_t event_id = 0;
  std::uint32_t name = 0;
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
};

// Folds items, depth by depth, into at most about one span per pixel: items
// narrower than `wide` join the pending fold of their depth while they start
// less than a pixel after it ends.
class Folder {
 public:
  Folder(std::int64_t pixel_ns, std::int64_t wide_ns) : pixel_(pixel_ns), wide_(wide_ns) {}

  void add(std::int32_t depth, const Item& item) {
    if (pending_.size() <= static_cast<std::size_t>(depth)) pending_.resize(depth + 1);
    Pending& p = pending_[depth];
    if (item.count == 1 && item.end - item.start >= wide_) {
      flush(depth);
      emit(depth, item);
      return;
    }
    if (p.open && item.start < p.item.end + pixel_) {
      p.item.end = std::max(p.item.end, item.end);
      p.item.count += item.count;
      p.item.event_id = 0;
      if (item.end - item.start > p.longest) {
        p.longest = item.end - item.start;
        p.item.name = item.name;
        p.item.kind = item.kind;
        p.item.category = item.category;
      }
      return;
    }
    flush(depth);
    p.open = true;
    p.item = item;
    p.longest = item.end - item.start;
  }

  std::vector<Span> finish() {
    for (std::size_t d = 0; d < pending_.size(); ++d)
      flush(static_cast<std::int32_t>(d));
    std::sort(out_.begin(), out_.end(), [](const Span& a, const Span& b) {
      return a.depth != b.depth ? a.depth < b.depth : a.start_ns < b.start_ns;
    });
    return std::move(out_);
  }

 private:
  struct Pending {
    bool open = false;
    std::int64_t longest = 0;
    Item item;
  };

  void flush(std::int32_t depth) {
    Pending& p = pending_[depth];
    if (!p.open) return;
    emit(depth, p.item);
    p.open = false;
  }
  void emit(std::int32_t depth, const Item& i) {
    out_.push_back({i.start, i.end, i.count, i.count == 1 ? i.event_id : 0, StringId{i.name},
                    i.kind, i.category, depth});
  }

  std::int64_t pixel_;
  std::int64_t wide_;
  std::vector<Pending> pending_;
  std::vector<Span> out_;
};

Item lod_item(const sql::Statement& s) {
  return {s.int64_at(0),
          s.int64_at(1),
          s.int64_at(2),
          s.int64_at(6),
          static_cast<std::uint32_t>(s.int64_at(3)),
          static_cast<EventKind>(s.int_at(4)),
          static_cast<Category>(s.int_at(5))};
}

Item row_item(const store::ScanRow& r) {
  return {r.start, r.end, 1, r.id, r.name, r.kind, r.category};
}

int floor_log2(std::int64_t v) {
  return 63 - std::countl_zero(static_cast<std::uint64_t>(v));
}

// The long events of `lane` that contain `time` and started before it, one
// per depth, from the finest level of detail: every event longer than twice
// that level's tile width is kept there whole.
Result<std::vector<std::pair<std::int32_t, Item>>> seeds_at(TraceReader::Impl& d,
                                                            std::uint32_t lane, int level,
                                                            std::int32_t max_depth,
                                                            std::int64_t time) {
  if (Status s = d.prepare_lod(); !s) return s.error();
  std::vector<std::pair<std::int32_t, Item>> out;
  for (std::int32_t depth = 0; depth <= max_depth; ++depth) {
    d.lod_before.reset();
    d.lod_before.bind(1, lane).bind(2, level).bind(3, depth).bind(4, time);
    const int rc = d.lod_before.step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return d.db.error("cannot read the level of detail", rc);
    const Item item = lod_item(d.lod_before);
    if (item.count != 1 || item.end <= time) break;
    out.emplace_back(depth, item);
  }
  return out;
}

// One event with its details, in the columns event_row() reads.
constexpr const char* kEventRowSelect =
    "SELECT e.id, e.start_ns, e.end_ns, e.name, e.kind, e.category, e.correlation, e.step, "
    "d.bytes, d.flops, d.collective, d.dtype, d.count, d.peer, d.group_size, e.lane "
    "FROM events e LEFT JOIN event_details d ON d.event_id = e.id";

store::ScanRow event_row(const sql::Statement& stmt) {
  store::ScanRow r;
  r.id = stmt.int64_at(0);
  r.start = stmt.int64_at(1);
  r.end = stmt.int64_at(2);
  r.name = static_cast<std::uint32_t>(stmt.int64_at(3));
  r.kind = static_cast<EventKind>(stmt.int_at(4));
  r.category = static_cast<Category>(stmt.int_at(5));
  r.correlation = stmt.int64_at(6);
  r.step = stmt.int_at(7);
  if (!stmt.is_null(8)) {
    r.details = {stmt.int64_at(8),
                 stmt.double_at(9),
                 static_cast<Collective>(stmt.int_at(10)),
                 static_cast<DataType>(stmt.int_at(11)),
                 stmt.int64_at(12),
                 stmt.int_at(13),
                 stmt.int_at(14)};
  }
  r.lane = static_cast<std::uint32_t>(stmt.int64_at(15));
  return r;
}

}  // namespace

StoredEvent to_stored_event(const store::ScanRow& row, std::int32_t rank) {
  StoredEvent s;
  s.id = row.id;
  s.rank = rank;
  Event& e = s.event;
  e.lane = LaneId{row.lane};
  e.kind = row.kind;
  e.category = row.category;
  e.start_ns = row.start;
  e.end_ns = row.end;
  e.name = StringId{row.name};
  e.correlation = row.correlation;
  e.step = row.step;
  e.bytes = row.details.bytes;
  e.flops = row.details.flops;
  e.collective = row.details.collective;
  e.dtype = row.details.dtype;
  e.count = row.details.count;
  e.peer = row.details.peer;
  e.group_size = row.details.group_size;
  return s;
}

// ---------------------------------------------------------------------------
// Impl

Status TraceReader::Impl::load() {
  ranks.clear();
  lanes.clear();
  lane_index.clear();
  lod.clear();
  segments.clear();
  chunks.clear();
  {
    // A live writer may have closed and finalized the store since it was opened.
    // A scan (+key), as store::kMetaLookup is.
    auto stmt = db.prepare("SELECT key, value FROM meta WHERE +key IN ('status', 'finalized')");
    if (!stmt) return stmt.error();
    state.finalized = false;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      if (stmt->text_at(0) == "status") state.status = std::string(stmt->text_at(1));
      if (stmt->text_at(0) == "finalized") state.finalized = stmt->text_at(1) == "1";
    }
    if (rc != SQLITE_DONE) return db.error("cannot read the status", rc);
    if (state.status != "writing") state.writer_alive = false;
  }
  {
    auto stmt = db.prepare(
        "SELECT rank, host, device, pid, clock_offset_ns, clock_offset_measured FROM ranks "
        "ORDER BY rank");
    if (!stmt) return stmt.error();
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      // A rank no int holds would wrap (2^31 read as -2^31).
      const std::int64_t rank = stmt->int64_at(0);
      if (rank < 0 || rank > INT32_MAX)
        return Error{path + " is damaged: the ranks table holds rank " + std::to_string(rank)};
      ranks.push_back({static_cast<int>(rank), std::string(stmt->text_at(1)),
                       std::string(stmt->text_at(2)), stmt->int64_at(3), stmt->int64_at(4),
                       stmt->int_at(5) != 0});
    }
    if (rc != SQLITE_DONE) return db.error("cannot read ranks", rc);
  }
  {
    auto stmt = db.prepare(
        "SELECT l.id, l.rank, l.kind, l.name, l.sort_index, s.event_count, s.first_ns, "
        "s.last_ns, s.max_duration_ns, s.max_depth, s.lod_finest_level, s.lod_coarsest_level, "
        "s.lane IS NOT NULL AND (typeof(s.event_count) <> 'integer' OR "
        "typeof(s.first_ns) <> 'integer' OR typeof(s.last_ns) <> 'integer' OR "
        "typeof(s.max_duration_ns) <> 'integer' OR typeof(s.max_depth) <> 'integer' OR "
        "typeof(s.lod_finest_level) <> 'integer' OR typeof(s.lod_coarsest_level) <> 'integer') "
        "FROM lanes l LEFT JOIN lane_stats s ON s.lane = l.id "
        "ORDER BY l.rank, l.sort_index, l.id");
    if (!stmt) return stmt.error();
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      LaneInfo l;
      l.id = LaneId{static_cast<std::uint32_t>(stmt->int64_at(0))};
      const std::int64_t rank = stmt->int64_at(1), kind = stmt->int64_at(2);
      if (rank < 0 || rank > INT32_MAX) {
        return Error{path + " is damaged: lane " + std::to_string(l.id.value) +
                     " belongs to rank " + std::to_string(rank)};
      }
      if (kind < 0 || kind > static_cast<int>(LaneKind::predicted)) {
        return Error{path + " is damaged: lane " + std::to_string(l.id.value) +
                     " is of kind " + std::to_string(kind) + ", which no trace store has"};
      }
      l.rank = static_cast<int>(rank);
      l.kind = static_cast<LaneKind>(kind);
      l.name = std::string(stmt->text_at(3));
      l.sort_index = stmt->int_at(4);
      // A statistic of text read as 0 events: the lane showed as empty.
      if (state.finalized && stmt->int_at(12) != 0) {
        return Error{path + " is damaged: the statistics of lane " + std::to_string(l.id.value) +
                     " are not all whole numbers"};
      }
      if (state.finalized && !stmt->is_null(5)) {
        l.event_count = stmt->int64_at(5);
        l.first_ns = stmt->int64_at(6);
        l.last_ns = stmt->int64_at(7);
        l.max_duration_ns = stmt->int64_at(8);
        l.max_depth = stmt->int_at(9);
        lod[l.id.value] = {stmt->int_at(10), stmt->int_at(11)};
      }
      lanes.push_back(std::move(l));
    }
    if (rc != SQLITE_DONE) return db.error("cannot read lanes", rc);
  }
  for (std::size_t i = 0; i < lanes.size(); ++i)
    lane_index[lanes[i].id.value] = i;
  {
    // Names are interned with ids counted from 0, every one kept: a gap is
    // names lost, and the events that carry them would read as unnamed
    // (and be counted as other work).
    auto stmt = db.prepare("SELECT count(*), coalesce(max(id), 0) FROM strings WHERE id > 0");
    if (!stmt) return stmt.error();
    if (stmt->step() != SQLITE_ROW) return db.error("cannot read the names");
    const std::int64_t count = stmt->int64_at(0), last = stmt->int64_at(1);
    if (count < last) {
      return Error{path + " is damaged: the strings table misses " + std::to_string(last - count) +
                   " of the names its ids count (" + std::to_string(count) + " left, ids up to " +
                   std::to_string(last) + ")"};
    }
  }

  if (!state.finalized) {
    // No statistics yet: derive them from the segments.
    auto all = store::load_segments(db);
    if (!all) return all.error();
    for (LaneInfo& l : lanes)
      l.first_ns = kMaxTime;
    for (const store::Segment& s : *all) {
      LaneInfo* l = find_lane(s.lane);
      if (!l) continue;
      l->event_count += s.last_id - s.first_id + 1;
      l->first_ns = std::min(l->first_ns, s.start_min);
      l->last_ns = std::max(l->last_ns, s.end_max);
      l->max_duration_ns = std::max(l->max_duration_ns, s.duration_max);
    }
    for (LaneInfo& l : lanes) {
      if (l.event_count == 0) l.first_ns = 0;
    }
  }
  {
    // The lanes' counts size what the analyses reserve: a count the events
    // table cannot hold is damage (2^32 asked for hundreds of gigabytes, a
    // negative one for more than a vector holds). Events have the ids 1 to
    // `held`, read after the counts: a live writer's commits only add events.
    auto stmt = db.prepare("SELECT coalesce(max(id), 0) FROM events");
    if (!stmt) return stmt.error();
    if (const int rc = stmt->step(); rc != SQLITE_ROW) return db.error("cannot read events", rc);
    const std::int64_t held = stmt->int64_at(0);
    std::int64_t counted = 0;
    for (const LaneInfo& l : lanes) {
      if (l.event_count < 0 || l.event_count > held) {
        return Error{path + " is damaged: lane " + std::to_string(l.id.value) + " counts " +
                     std::to_string(l.event_count) + " events, but its events table holds " +
                     std::to_string(held)};
      }
      if (l.event_count > held - counted) {
        return Error{path + " is damaged: its lanes count more events than its events table " +
                     "holds (" + std::to_string(held) + ")"};
      }
      counted += l.event_count;
    }
  }
  auto version = read_version();
  if (!version) return version.error();
  data_version = *version;
  return {};
}

Result<std::int64_t> TraceReader::Impl::read_version() {
  if (!version_stmt) {
    auto stmt = db.prepare("PRAGMA data_version", true);
    if (!stmt) return stmt.error();
    version_stmt = std::move(stmt).value();
  }
  version_stmt.reset();
  if (version_stmt.step() != SQLITE_ROW) return db.error("cannot read the data version");
  return version_stmt.int64_at(0);
}

Status TraceReader::Impl::check_version() {
  auto version = read_version();
  if (!version) return version.error();
  if (*version != data_version) return load();
  return {};
}

Status TraceReader::Impl::prepare_lod() {
  if (lod_before) return {};
  const std::string columns =
      "SELECT start_ns, end_ns, count, name, kind, category, event_id FROM lod ";
  auto before = db.prepare(columns +
                               "WHERE lane = ? AND level = ? AND depth = ? AND start_ns < ? "
                               "ORDER BY start_ns DESC LIMIT 1",
                           true);
  if (!before) return before.error();
  auto range = db.prepare(columns +
                              "WHERE lane = ? AND level = ? AND depth = ? AND start_ns >= ? AND "
                              "start_ns < ? ORDER BY start_ns",
                          true);
  if (!range) return range.error();
  lod_before = std::move(before).value();
  lod_range = std::move(range).value();
  return {};
}

LaneInfo* TraceReader::Impl::find_lane(std::uint32_t id) {
  auto it = lane_index.find(id);
  return it == lane_index.end() ? nullptr : &lanes[it->second];
}

std::int32_t TraceReader::Impl::rank_of(std::uint32_t lane) const {
  auto it = lane_index.find(lane);
  return it == lane_index.end() ? -1 : lanes[it->second].rank;
}

Result<const std::vector<store::Segment>*> TraceReader::Impl::lane_segments(std::uint32_t lane) {
  auto it = segments.find(lane);
  if (it == segments.end()) {
    auto loaded = store::load_segments(db, {lane});
    if (!loaded) return loaded.error();
    it = segments.emplace(lane, std::move(loaded).value()).first;
  }
  return &it->second;
}

Result<const std::vector<store::Chunk>*> TraceReader::Impl::lane_chunks(std::uint32_t lane) {
  auto it = chunks.find(lane);
  if (it == chunks.end()) {
    auto loaded = store::load_chunks(db, lane);
    if (!loaded) return loaded.error();
    it = chunks.emplace(lane, std::move(loaded).value()).first;
  }
  return &it->second;
}

Result<std::unique_ptr<store::EventScan>> TraceReader::Impl::scan(const std::vector<LaneId>& wanted,
                                                                  std::int64_t from,
                                                                  std::int64_t to,
                                                                  store::ScanColumns columns) {
  if (!state.finalized) {
    auto segs = segments_of(wanted);
    if (!segs) return segs.error();
    return std::unique_ptr<store::EventScan>(
        new store::SegmentMerge(db, std::move(segs).value(), from, to, columns));
  }
  std::vector<const std::vector<store::Chunk>*> lists;
  auto add = [&](std::uint32_t lane) -> Status {
    auto c = lane_chunks(lane);
    if (!c) return c.error();
    lists.push_back(*c);
    return {};
  };
  if (wanted.empty()) {
    for (const LaneInfo& l : lanes) {
      if (Status s = add(l.id.value); !s) return s.error();
    }
  } else {
    for (LaneId l : wanted) {
      if (Status s = add(l.value); !s) return s.error();
    }
  }
  return std::unique_ptr<store::EventScan>(new store::ChunkMerge(db, lists, from, to, columns));
}

Result<std::vector<store::Segment>> TraceReader::Impl::segments_of(
    const std::vector<LaneId>& wanted) {
  std::vector<store::Segment> out;
  std::vector<std::uint32_t> ids;
  if (wanted.empty()) {
    for (const LaneInfo& l : lanes)
      ids.push_back(l.id.value);
  } else {
    for (LaneId l : wanted)
      ids.push_back(l.value);
  }
  for (std::uint32_t id : ids) {
    auto segs = lane_segments(id);
    if (!segs) return segs.error();
    out.insert(out.end(), (*segs)->begin(), (*segs)->end());
  }
  return out;
}

// ---------------------------------------------------------------------------
// TraceReader

TraceReader::TraceReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceReader::~TraceReader() = default;

Result<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path, Options options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  auto db = store::open_store(path, false, &impl->state);
  if (!db) return db.error();
  if (!impl->state.finalized && !impl->state.writer_alive && options.repair &&
      (!impl->state.writer_elsewhere || options.writers_ended)) {
    // The writer died before closing: complete the store once, in place.
    db->close();
    if (Status s = finalize_store(path, options.writers_ended); s) {
      db = store::open_store(path, false, &impl->state);
      if (!db) return db.error();
    } else {
      db = store::open_store(path, false, &impl->state);  // read it as it is
      if (!db) return db.error();
      impl->state.not_completed = s.message();
    }
  }
  impl->db = std::move(db).value();
  if (Status s = impl->load(); !s) return s.error();
  return std::unique_ptr<TraceReader>(new TraceReader(std::move(impl)));
}

const std::string& TraceReader::path() const {
  return impl_->path;
}
const StoreState& TraceReader::state() const {
  return impl_->state;
}

Status TraceReader::damage() const {
  const std::string& found = impl_->db.damage();
  if (found.empty()) return {};
  return Error{impl_->path + " is damaged: " + found +
               " (found while reading it: some of its rows could not be read)"};
}

std::optional<std::string> TraceReader::meta(std::string_view key) const {
  auto stmt = impl_->db.prepare(store::kMetaLookup);
  if (!stmt) return std::nullopt;
  stmt->bind(1, key);
  if (stmt->step() != SQLITE_ROW) return std::nullopt;
  return std::string(stmt->text_at(0));
}

std::vector<std::pair<std::string, std::string>> TraceReader::all_meta() const {
  std::vector<std::pair<std::string, std::string>> out;
  auto stmt = impl_->db.prepare("SELECT key, value FROM meta ORDER BY key");
  if (!stmt) return out;
  while (stmt->step() == SQLITE_ROW)
    out.emplace_back(std::string(stmt->text_at(0)), std::string(stmt->text_at(1)));
  return out;
}

Result<std::int64_t> count_kept_events(const std::string& store, std::int64_t sent,
                                       std::vector<std::string>& losses) {
  auto reader = TraceReader::open(store);
  if (!reader) return reader.error();
  losses = (*reader)->losses();
  const std::int64_t kept = (*reader)->event_count();
  if (kept == 0 && sent > 0) {
    std::string why;
    for (const std::string& loss : losses)
      why += "; " + loss;
    return Error{store + ": none of the " + std::to_string(sent) + " events could be kept" + why};
  }
  return kept;
}

RunInfo TraceReader::run() const {
  RunInfo r;
  auto get = [&](std::string_view key) { return meta(key).value_or(""); };
  r.title = get("title");
  r.source = get("source");
  r.start_utc_ns = parse_integer<std::int64_t>(get("start_utc_ns")).value_or(0);
  r.clock = get("clock");
  r.host = get("host");
  r.command_line = get("command_line");
  r.plan_json = get("plan_json");
  r.tool_versions_json = get("tool_versions_json");
  return r;
}

int TraceReader::world_size() const {
  const int recorded = std::max<int>(1, static_cast<int>(impl_->ranks.size()));
  // Only a whole number, no smaller than the ranks recorded and within what
  // a store can hold (ranks fit in an int): "2abc" read as 2, and a world of
  // a billion was taken for the run's rank count.
  if (auto w = meta("world_size")) {
    const std::optional<int> n = parse_count(*w);
    if (n && *n >= recorded && *n <= kMaxWorldSize) return *n;
  }
  return recorded;
}

std::vector<std::string> TraceReader::losses() const {
  std::vector<std::string> lines;
  for (const LossCount& loss : kLossCounts) {
    const std::optional<std::string> value = meta(loss.key);
    if (!value) continue;
    const std::optional<std::int64_t> n = parse_count<std::int64_t>(*value);
    if (n && *n == 0) continue;
    lines.push_back((n ? std::to_string(*n) : "\"" + *value + "\"") + " " +
                    (n == 1 ? loss.one : loss.many));
  }
  return lines;
}

const std::vector<RankInfo>& TraceReader::ranks() const {
  return impl_->ranks;
}
const std::vector<LaneInfo>& TraceReader::lanes() const {
  return impl_->lanes;
}

std::vector<LaneInfo> TraceReader::lanes_of(std::int32_t rank) const {
  std::vector<LaneInfo> out;
  for (const LaneInfo& l : impl_->lanes) {
    if (l.rank == rank) out.push_back(l);
  }
  return out;
}

const LaneInfo* TraceReader::lane(LaneId id) const {
  return impl_->find_lane(id.value);
}

TimeRange TraceReader::time_range() const {
  TimeRange r{kMaxTime, kMinTime};
  for (const LaneInfo& l : impl_->lanes) {
    if (l.event_count == 0) continue;
    r.start_ns = std::min(r.start_ns, l.first_ns);
    r.end_ns = std::max(r.end_ns, l.last_ns);
  }
  if (r.start_ns > r.end_ns) return {};
  return r;
}

std::int64_t TraceReader::event_count() const {
  std::int64_t n = 0;
  for (const LaneInfo& l : impl_->lanes)
    n += l.event_count;
  return n;
}

const std::string& TraceReader::string(StringId id) const {
  if (id.value == 0) return kEmpty;
  auto& cache = impl_->strings;
  if (auto it = cache.find(id.value); it != cache.end()) return it->second;
  sql::Statement& stmt = impl_->string_stmt;
  if (!stmt) {
    auto prepared = impl_->db.prepare("SELECT value FROM strings WHERE id = ?", true);
    if (!prepared) return kEmpty;
    stmt = std::move(prepared).value();
  }
  stmt.reset();
  stmt.bind(1, id.value);
  if (stmt.step() != SQLITE_ROW) return kEmpty;
  return cache.emplace(id.value, std::string(stmt.text_at(0))).first->second;
}

std::optional<StringId> TraceReader::find_string(std::string_view text) const {
  if (text.empty()) return StringId{0};
  auto stmt = impl_->db.prepare("SELECT id FROM strings WHERE value = ?");
  if (!stmt) return std::nullopt;
  stmt->bind(1, text);
  if (stmt->step() != SQLITE_ROW) return std::nullopt;
  return StringId{static_cast<std::uint32_t>(stmt->int64_at(0))};
}

Result<std::vector<Span>> TraceReader::spans(LaneId lane_id, std::int64_t t0, std::int64_t t1,
                                             int pixels, int min_span_pixels) const {
  Impl& d = *impl_;
  if (Status s = d.check_version(); !s) return s.error();
  LaneInfo* lane = d.find_lane(lane_id.value);
  if (!lane) return Error{d.path + ": no lane " + std::to_string(lane_id.value)};
  if (pixels <= 0 || t1 <= t0 || lane->event_count == 0) return std::vector<Span>{};
  const std::int64_t pixel = std::max<std::int64_t>(1, (t1 - t0 + pixels - 1) / pixels);
  Folder folder(pixel, pixel * std::max(1, min_span_pixels));
  const Impl::LodRange lod = d.lod.count(lane_id.value) ? d.lod[lane_id.value] : Impl::LodRange{};

  if (lod.finest >= 0 && pixel >= store::lod_width(lod.finest)) {
    const int level =
        std::clamp(floor_log2(pixel) - store::kLodBaseShift, lod.finest, lod.coarsest);
    // A tile row reaches at most 3 widths past its start (its tile, plus an
    // event narrower than 2 widths); longer rows are single events, found as
    // the last row before the scanned range.
    const std::int64_t reach = 3 * store::lod_width(level);
    if (Status s = d.prepare_lod(); !s) return s.error();
    for (std::int32_t depth = 0; depth <= lane->max_depth; ++depth) {
      d.lod_before.reset();
      d.lod_before.bind(1, lane_id.value).bind(2, level).bind(3, depth).bind(4, t0 - reach);
      int rc = d.lod_before.step();
      if (rc == SQLITE_ROW) {
        const Item item = lod_item(d.lod_before);
        if (item.end > t0) folder.add(depth, item);
      } else if (rc != SQLITE_DONE) {
        return d.db.error("cannot read the level of detail", rc);
      }
      d.lod_range.reset();
      d.lod_range.bind(1, lane_id.value)
          .bind(2, level)
          .bind(3, depth)
          .bind(4, t0 - reach)
          .bind(5, t1);
      while ((rc = d.lod_range.step()) == SQLITE_ROW) {
        const Item item = lod_item(d.lod_range);
        if (item.end > t0 || item.start >= t0) folder.add(depth, item);
      }
      if (rc != SQLITE_DONE) return d.db.error("cannot read the level of detail", rc);
    }
    return folder.finish();
  }

  // Raw events. Every event that overlaps t0 and started more than two
  // finest-level widths before it is a seed; the rest start after scan_from.
  std::int64_t scan_from;
  std::vector<std::int64_t> open_ends;
  if (lod.finest >= 0) {
    scan_from = t0 - 2 * store::lod_width(lod.finest);
    auto seeds = seeds_at(d, lane_id.value, lod.finest, lane->max_depth, scan_from);
    if (!seeds) return seeds.error();
    for (const auto& [depth, item] : *seeds) {
      open_ends.push_back(item.end);
      if (item.end > t0) folder.add(depth, item);
    }
  } else {
    scan_from = t0 - lane->max_duration_ns - 1;
  }
  auto scan = d.scan({lane_id}, scan_from, t1, store::ScanColumns::light);
  if (!scan) return scan.error();
  store::ScanRow row;
  while ((*scan)->next(row)) {
    while (!open_ends.empty() && open_ends.back() <= row.start)
      open_ends.pop_back();
    const auto depth = static_cast<std::int32_t>(open_ends.size());
    open_ends.push_back(row.end);
    if (depth > lane->max_depth && !d.state.finalized) lane->max_depth = depth;
    if (row.end > t0 || row.start >= t0) folder.add(depth, row_item(row));
  }
  if (!(*scan)->status()) return (*scan)->status().error();
  return folder.finish();
}

Result<StoredEvent> TraceReader::event(std::int64_t id) const {
  Impl& d = *impl_;
  auto stmt = d.db.prepare(std::string(kEventRowSelect) + " WHERE e.id = ?");
  if (!stmt) return stmt.error();
  stmt->bind(1, id);
  const int rc = stmt->step();
  if (rc == SQLITE_DONE) return Error{d.path + ": no event " + std::to_string(id)};
  if (rc != SQLITE_ROW) return d.db.error("cannot read event " + std::to_string(id), rc);
  const store::ScanRow r = event_row(*stmt);
  StoredEvent out = to_stored_event(r, d.rank_of(r.lane));
  if (may_have_launch(out.event.kind)) {
    auto launch = kernel_launch(id);
    if (!launch) return launch.error();
    out.launch = *launch;
  }
  return out;
}

Result<std::optional<KernelLaunch>> TraceReader::kernel_launch(std::int64_t id) const {
  Impl& d = *impl_;
  if (!d.launches_checked) {
    // Stores written before launches were kept have no such table.
    d.has_launches = d.db.has_table("kernel_launches");
    d.launches_checked = true;
  }
  if (!d.has_launches) return std::optional<KernelLaunch>{};
  if (!d.launch_stmt) {
    auto stmt = d.db.prepare(
        std::string("SELECT ") + store::kLaunchColumns + " FROM kernel_launches WHERE event_id = ?",
        true);
    if (!stmt) return stmt.error();
    d.launch_stmt = std::move(stmt).value();
  }
  sql::Statement& s = d.launch_stmt;
  s.reset();
  s.bind(1, id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<KernelLaunch>{};
  if (rc != SQLITE_ROW)
    return d.db.error("cannot read the launch of event " + std::to_string(id), rc);
  // An edited store's row that no launch could be is not shown as one.
  return store::launch_at(s, 0);
}

Result<std::optional<StoredEvent>> TraceReader::event_at(LaneId lane_id, std::int64_t time) const {
  Impl& d = *impl_;
  if (Status s = d.check_version(); !s) return s.error();
  const LaneInfo* lane = d.find_lane(lane_id.value);
  if (!lane) return Error{d.path + ": no lane " + std::to_string(lane_id.value)};
  const Impl::LodRange lod = d.lod.count(lane_id.value) ? d.lod[lane_id.value] : Impl::LodRange{};

  struct Best {
    std::int32_t depth = -1;
    std::int64_t start = 0;
    std::int64_t id = 0;
  } best;
  auto consider = [&](std::int32_t depth, std::int64_t start, std::int64_t end, std::int64_t id) {
    const bool contains = start <= time && (time < end || (start == end && start == time));
    if (contains && (depth > best.depth || (depth == best.depth && start >= best.start)))
      best = {depth, start, id};
  };
  std::int64_t scan_from;
  std::vector<std::int64_t> open_ends;
  if (lod.finest >= 0) {
    scan_from = time - 2 * store::lod_width(lod.finest);
    auto seeds = seeds_at(d, lane_id.value, lod.finest, lane->max_depth, scan_from);
    if (!seeds) return seeds.error();
    for (const auto& [depth, item] : *seeds) {
      open_ends.push_back(item.end);
      consider(depth, item.start, item.end, item.event_id);
    }
  } else {
    scan_from = time - lane->max_duration_ns - 1;
  }
  auto scan = d.scan({lane_id}, scan_from, time + 1, store::ScanColumns::light);
  if (!scan) return scan.error();
  store::ScanRow row;
  while ((*scan)->next(row)) {
    while (!open_ends.empty() && open_ends.back() <= row.start)
      open_ends.pop_back();
    const auto depth = static_cast<std::int32_t>(open_ends.size());
    open_ends.push_back(row.end);
    consider(depth, row.start, row.end, row.id);
  }
  if (!(*scan)->status()) return (*scan)->status().error();
  if (best.depth < 0) return std::optional<StoredEvent>{};
  auto e = event(best.id);
  if (!e) return e.error();
  return std::optional<StoredEvent>{std::move(e).value()};
}

Result<std::vector<StoredEvent>> TraceReader::find_events(std::string_view text, NameMatch match,
                                                          std::size_t limit,
                                                          std::optional<std::int32_t> rank,
                                                          FindOrder order) const {
  Impl& d = *impl_;
  // A substring names the names holding it, in ASCII letters of either case
  // (as SQL's LIKE), whole or in their short form (kernel_short_name): the
  // CLI's tables show "cs::worker::convert_kernel<float>" for "void
  // cs::worker::(anonymous namespace)::convert_kernel<float>(float*)", which
  // found nothing. Their ids go to the query as a JSON array.
  std::string ids = "[";
  if (match == NameMatch::substring) {
    auto lower = [](std::string_view v) {
      std::string out(v);
      for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      return out;
    };
    const std::string needle = lower(text);
    auto names = d.db.prepare("SELECT id, value FROM strings");
    if (!names) return names.error();
    int rc;
    while ((rc = names->step()) == SQLITE_ROW) {
      const std::string_view value = names->text_at(1);
      if (lower(value).find(needle) == std::string::npos &&
          lower(kernel_short_name(value)).find(needle) == std::string::npos)
        continue;
      if (ids.size() > 1) ids += ',';
      ids += std::to_string(names->int64_at(0));
    }
    if (rc != SQLITE_DONE) return d.db.error("cannot search the names", rc);
  }
  ids += ']';
  std::string sql = std::string(kEventRowSelect) + " WHERE e.name IN ";
  sql += match == NameMatch::exact ? "(SELECT id FROM strings WHERE value = ?1)"
                                   : "(SELECT value FROM json_each(?1))";
  if (rank) sql += " AND e.lane IN (SELECT id FROM lanes WHERE rank = ?3)";
  // By time: SQLite keeps the first `limit` in a sorter (0.4 s over 3 M events).
  sql += order == FindOrder::time ? " ORDER BY e.start_ns, e.id LIMIT ?2" : " ORDER BY e.id LIMIT ?2";
  auto stmt = d.db.prepare(sql);
  if (!stmt) return stmt.error();
  stmt->bind(1, match == NameMatch::exact ? text : std::string_view(ids));
  stmt->bind(2, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  if (rank) stmt->bind(3, *rank);
  std::vector<StoredEvent> out;
  int rc;
  while ((rc = stmt->step()) == SQLITE_ROW) {
    const store::ScanRow r = event_row(*stmt);
    out.push_back(to_stored_event(r, d.rank_of(r.lane)));
  }
  if (rc != SQLITE_DONE) return d.db.error("cannot search events", rc);
  return out;
}

Status TraceReader::for_each_event(const std::vector<LaneId>& lanes, std::int64_t t0,
                                   std::int64_t t1,
                                   const std::function<bool(const StoredEvent&)>& visit) const {
  Impl& d = *impl_;
  if (Status s = d.check_version(); !s) return s;
  auto scan = d.scan(lanes, t0, t1, store::ScanColumns::full);
  if (!scan) return scan.error();
  store::ScanRow row;
  while ((*scan)->next(row)) {
    if (!visit(to_stored_event(row, d.rank_of(row.lane)))) return {};
  }
  return (*scan)->status();
}

Result<std::vector<StepMetrics>> TraceReader::steps(std::optional<std::int32_t> rank) const {
  Impl& d = *impl_;
  auto stmt = d.db.prepare(
      rank ? "SELECT rank, step, start_ns, end_ns, loss, tokens, loss_scale FROM steps "
             "WHERE rank = ? ORDER BY rank, step"
           : "SELECT rank, step, start_ns, end_ns, loss, tokens, loss_scale FROM steps "
             "ORDER BY rank, step");
  if (!stmt) return stmt.error();
  if (rank) stmt->bind(1, *rank);
  std::vector<StepMetrics> out;
  int rc;
  while ((rc = stmt->step()) == SQLITE_ROW) {
    out.push_back({stmt->int_at(0), stmt->int_at(1), stmt->int64_at(2), stmt->int64_at(3),
                   stmt->double_at(4), stmt->double_at(5), stmt->double_at(6)});
    const StepMetrics& s = out.back();
    if (s.end_ns < s.start_ns) {
      return Error{d.path + " is damaged: step " + std::to_string(s.step) + " of rank " +
                   std::to_string(s.rank) + " ends before it starts"};
    }
  }
  if (rc != SQLITE_DONE) return d.db.error("cannot read steps", rc);
  return out;
}

Result<std::vector<CounterSeries>> TraceReader::counter_series() const {
  Impl& d = *impl_;
  auto stmt = d.db.prepare(
      // A value that is not a number (an edited store's text) is left out
      // of the bounds: SQLite ranks text above every number.
      "SELECT rank, name, COUNT(*), MIN(CASE WHEN typeof(value) IN ('real', 'integer') THEN "
      "value END), MAX(CASE WHEN typeof(value) IN ('real', 'integer') THEN value END), "
      "MIN(time_ns), MAX(time_ns) FROM counters GROUP BY rank, name ORDER BY rank, name");
  if (!stmt) return stmt.error();
  std::vector<CounterSeries> out;
  int rc;
  while ((rc = stmt->step()) == SQLITE_ROW) {
    out.push_back({stmt->int_at(0), StringId{static_cast<std::uint32_t>(stmt->int64_at(1))},
                   stmt->int64_at(2), stmt->double_at(3), stmt->double_at(4), stmt->int64_at(5),
                   stmt->int64_at(6)});
  }
  if (rc != SQLITE_DONE) return d.db.error("cannot read counters", rc);
  return out;
}

Result<std::vector<CounterSample>> TraceReader::counters(std::int32_t rank, StringId name) const {
  Impl& d = *impl_;
  auto stmt = d.db.prepare(
      "SELECT time_ns, value FROM counters WHERE rank = ? AND name = ? ORDER BY time_ns, rowid");
  if (!stmt) return stmt.error();
  stmt->bind(1, rank).bind(2, name.value);
  std::vector<CounterSample> out;
  int rc;
  while ((rc = stmt->step()) == SQLITE_ROW)
    out.push_back({rank, name, stmt->int64_at(0), stmt->double_at(1)});
  if (rc != SQLITE_DONE) return d.db.error("cannot read counters", rc);
  return out;
}

Result<CounterView> TraceReader::counter_view(std::int32_t rank, StringId name, std::int64_t t0,
                                              std::int64_t t1, int pixels) const {
  Impl& d = *impl_;
  CounterView out;
  auto before = d.db.prepare(
      "SELECT value FROM counters WHERE rank = ? AND name = ? AND time_ns < ? "
      "ORDER BY time_ns DESC, rowid DESC LIMIT 1");
  if (!before) return before.error();
  before->bind(1, rank).bind(2, name.value).bind(3, t0);
  int rc = before->step();
  if (rc == SQLITE_ROW) {
    out.held = before->double_at(0);
  } else if (rc != SQLITE_DONE) {
    return d.db.error("cannot read counters", rc);
  }
  if (t1 <= t0) return out;
  auto stmt = d.db.prepare(
      "SELECT time_ns, value FROM counters WHERE rank = ? AND name = ? AND time_ns >= ? "
      "AND time_ns < ? ORDER BY time_ns, rowid");
  if (!stmt) return stmt.error();
  stmt->bind(1, rank).bind(2, name.value).bind(3, t0).bind(4, t1);
  // Columns a pixel's time wide, rounded up as the spans' query rounds
  // (at 1 ns a pixel, a column a nanosecond). Unsigned differences: a
  // damaged store's times can be any int64, and t1 > t0 here. Samples of
  // one time keep the order they were written in (rowid): an allocation and
  // a free at one nanosecond leave the free's value.
  const std::uint64_t span = std::uint64_t(t1) - std::uint64_t(t0);
  const std::uint64_t width = std::uint64_t(std::max(1, pixels));
  const std::uint64_t pixel = std::max<std::uint64_t>(1, span / width + (span % width != 0));
  std::uint64_t column = 0;
  while ((rc = stmt->step()) == SQLITE_ROW) {
    const std::int64_t t = stmt->int64_at(0);
    const double v = stmt->double_at(1);
    const std::uint64_t k = (std::uint64_t(t) - std::uint64_t(t0)) / pixel;
    if (k != column || out.columns.empty()) {
      out.columns.push_back({t, t, 1, v, v, v});
      column = k;
      continue;
    }
    CounterColumn& c = out.columns.back();
    c.last_ns = t;
    ++c.samples;
    c.low = std::min(c.low, v);
    c.high = std::max(c.high, v);
    c.last = v;
  }
  if (rc != SQLITE_DONE) return d.db.error("cannot read counters", rc);
  return out;
}

}  // namespace cs::trace
