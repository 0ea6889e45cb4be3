#include "core/trace_writer.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include "core/file_beside.h"
#include "core/file_exists.h"
#include "core/parse_count.h"
#include "core/text_file.h"
#include "core/trace_store_internal.h"
#include "core/unfinished_file.h"
#include "core/utf8.h"

namespace cs::trace {

namespace {

using Clock = std::chrono::steady_clock;

// Events in blocks that never move: growing the buffer copies nothing, and
// cleared blocks are reused by the next batch.
class EventBuffer {
 public:
  static constexpr std::size_t kBlock = 4096;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Event& push_back(const Event& e) {
    if (size_ == blocks_.size() * kBlock) blocks_.push_back(std::make_unique<Event[]>(kBlock));
    Event& slot = blocks_[size_ / kBlock][size_ % kBlock];
    slot = e;
    ++size_;
    return slot;
  }
  const Event& operator[](std::size_t i) const { return blocks_[i / kBlock][i % kBlock]; }
  void clear() { size_ = 0; }

 private:
  std::vector<std::unique_ptr<Event[]>> blocks_;
  std::size_t size_ = 0;
};

// The values of an event's row in the events table, in the insert's order.
constexpr int kEventRowColumns = 8;

// ---------------------------------------------------------------------------

struct LaneRow {
  std::uint32_t id = 0;
  std::int32_t rank = 0;
  LaneKind kind = LaneKind::gpu_stream;
  std::string name;
  std::int32_t sort_index = 0;
};

// Rows other than events, committed in the transaction of the batch that
// carries them.
struct OtherRows {
  std::vector<StepMetrics> steps;
  std::vector<CounterSample> counters;
  std::vector<std::pair<std::uint32_t, std::string>> strings;
  std::vector<RankInfo> ranks;
  std::vector<LaneRow> lanes;
  std::vector<std::pair<std::string, std::string>> meta;

  std::size_t size() const {
    return steps.size() + counters.size() + strings.size() + ranks.size() + lanes.size() +
           meta.size();
  }
  void clear() {
    steps.clear();
    counters.clear();
    strings.clear();
    ranks.clear();
    lanes.clear();
    meta.clear();
  }
};

// What waits to be written. The flusher swaps it out whole, so one batch
// always carries the strings and lanes its events refer to.
struct Pending {
  EventBuffer events;
  // The launches of some of them, by their place in `events`.
  std::vector<std::pair<std::uint32_t, KernelLaunch>> launches;
  OtherRows other;

  std::size_t rows() const { return events.size() + other.size(); }
  void clear() {
    events.clear();
    launches.clear();
    other.clear();
  }
};

// A batch as the flusher prepared it: every row the committer writes in its
// one transaction, events ordered and encoded.
struct PreparedBatch {
  OtherRows other;
  // kEventRowColumns values per event, in (lane, start, end descending)
  // order; their ids are first_event_id onwards.
  std::vector<std::int64_t> event_rows;
  std::int64_t first_event_id = 0;
  std::size_t event_count = 0;                                        // also when dropped
  std::vector<std::pair<std::int64_t, store::EventDetails>> details;  // by event id
  std::vector<std::pair<std::int64_t, KernelLaunch>> launches;        // by event id
  std::vector<store::Segment> segments;                               // one per lane
  std::vector<store::SealedChunk> chunks;
  std::uint64_t flush_target = 0;  // the flush() requests it answers once committed
  bool drop = false;               // a write failed before it: counted, not written

  void clear() {
    other.clear();
    event_rows.clear();
    details.clear();
    launches.clear();
    segments.clear();
    chunks.clear();
    event_count = 0;
    drop = false;
  }
};

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class SqliteTraceWriter final : public TraceWriter {
 public:
  SqliteTraceWriter(std::string path, WriterOptions options, sql::Database db)
      : path_(std::move(path)), options_(options), db_(std::move(db)) {
    if (options_.flush_rows == 0) options_.flush_rows = 1;
    if (options_.max_buffered_rows < options_.flush_rows)
      options_.max_buffered_rows = options_.flush_rows;
    strings_.emplace(std::string(), 0);
  }

  ~SqliteTraceWriter() override {
    // Destroyed while an exception unwinds (a rank that failed): the store
    // must not say the run completed.
    if (!closed_) (void)close(std::uncaught_exceptions() > 0 ? "failed" : "complete");
  }

  Status start() {
    event_rows_ = sql::IntRows::attach(db_, "cs_event_batch", kEventRowColumns);
    if (!event_rows_) return db_.error("cannot register the batch table");
    auto prepare = [&](sql::Statement& out, const char* text) -> Status {
      auto stmt = db_.prepare(text, true);
      if (!stmt) return stmt.error();
      out = std::move(stmt).value();
      return {};
    };
    Status s;
    if (!(s = prepare(insert_events_,
                      // No id: SQLite appends with max(id) + 1, which is the
                      // batch's next id (checked after), without a lookup per row.
                      "INSERT INTO events(lane, kind, category, start_ns, end_ns, name, "
                      "correlation, step) SELECT * FROM cs_event_batch")))
      return s;
    if (!(s = prepare(insert_string_, "INSERT OR REPLACE INTO strings(id, value) VALUES(?, ?)")))
      return s;
    if (!(s = prepare(insert_rank_,
                      "INSERT OR REPLACE INTO ranks(rank, host, device, pid, clock_offset_ns, "
                      "clock_offset_measured) VALUES(?, ?, ?, ?, ?, ?)")))
      return s;
    if (!(s = prepare(insert_lane_,
                      "INSERT INTO lanes(id, rank, kind, name, sort_index) VALUES(?, ?, ?, ?, ?)")))
      return s;
    if (!(s = prepare(insert_meta_, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)")))
      return s;
    if (!(s = prepare(insert_details_,
                      "INSERT INTO event_details(event_id, bytes, flops, collective, dtype, "
                      "count, peer, group_size) VALUES(?, ?, ?, ?, ?, ?, ?, ?)")))
      return s;
    const std::string insert_launch = std::string("INSERT INTO kernel_launches(event_id, ") +
                                      store::kLaunchColumns +
                                      ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    if (!(s = prepare(insert_launch_, insert_launch.c_str()))) return s;
    if (!(s = prepare(insert_segment_,
                      "INSERT INTO segments(lane, first_id, last_id, start_min, start_max, "
                      "end_max, duration_max) VALUES(?, ?, ?, ?, ?, ?, ?)")))
      return s;
    if (!(s = prepare(insert_step_,
                      "INSERT OR REPLACE INTO steps(rank, step, start_ns, end_ns, loss, tokens, "
                      "loss_scale) VALUES(?, ?, ?, ?, ?, ?, ?)")))
      return s;
    if (!(s = prepare(insert_chunk_, store::kInsertChunkSql))) return s;
    if (!(s = prepare(insert_counter_,
                      "INSERT INTO counters(rank, name, time_ns, value) VALUES(?, ?, ?, ?)")))
      return s;
    for (int i = 0; i < 2; ++i)
      free_batches_.push_back(std::make_unique<PreparedBatch>());
    committer_ = std::thread([this] { committer_loop(); });
    try {
      flusher_ = std::thread([this] { flusher_loop(); });
    } catch (...) {
      no_more_batches();  // else close() waits for the committer forever
      throw;
    }
    // Without a second connection the writer still works; close() then
    // copies the whole WAL into the file itself.
    if (auto second = sql::Database::open(path_, SQLITE_OPEN_READWRITE)) {
      checkpointer_ =
          std::thread([this, db = std::make_shared<sql::Database>(std::move(second).value())] {
            checkpointer_loop(*db);
          });
    }
    return {};
  }

  void add_rank(const RankInfo& rank) override {
    std::lock_guard lock(mu_);
    if (closed_) return;  // after close() nothing more is written
    note_pending();
    RankInfo& stored = pending_.other.ranks.emplace_back(rank);
    stored.host = valid_utf8(stored.host);
    stored.device = valid_utf8(stored.device);
  }

  LaneId add_lane(std::int32_t rank, LaneKind kind, std::string_view raw_name,
                  std::int32_t sort_index) override {
    std::string key = lane_key(rank, kind, valid_utf8(raw_name));
    std::lock_guard lock(mu_);
    if (auto it = lane_ids_.find(key); it != lane_ids_.end()) return LaneId{it->second};
    const std::uint32_t id = next_lane_++;
    const std::string name = key.substr(kLaneKeyPrefix);
    lane_ids_.emplace(std::move(key), id);
    note_pending();
    pending_.other.lanes.push_back({id, rank, kind, name, sort_index});
    return LaneId{id};
  }

  StringId intern(std::string_view raw) override {
    std::string fixed;  // only for text that is not UTF-8, rare
    const std::string_view text = is_valid_utf8(raw) ? raw : (fixed = valid_utf8(raw));
    std::lock_guard lock(mu_);
    if (auto it = strings_.find(text); it != strings_.end()) return StringId{it->second};
    const std::uint32_t id = next_string_++;
    strings_.emplace(std::string(text), id);
    note_pending();
    pending_.other.strings.emplace_back(id, std::string(text));
    return StringId{id};
  }

  void add(const Event& event) override {
    std::unique_lock lock(mu_);
    add_locked(event, lock);
  }

  void add(const Event& event, const KernelLaunch& launch) override {
    std::unique_lock lock(mu_);
    if (add_locked(event, lock)) {
      pending_.launches.emplace_back(static_cast<std::uint32_t>(pending_.events.size() - 1),
                                     launch);
    }
  }

  // Whether the event was kept (it is pending_.events' last).
  bool add_locked(const Event& event, std::unique_lock<std::mutex>& lock) {
    if (closed_) return false;  // after close() nothing more is written
    if (event.lane.value == 0 || event.lane.value >= next_lane_) {
      ++unknown_lane_;  // not a lane of this writer: dropped, counted in meta
      return false;
    }
    // Compared, not std::abs'd: an import's time can be INT64_MIN, whose
    // absolute value is undefined behaviour.
    auto outside = [](std::int64_t t) { return t <= -kTraceTimeLimitNs || t >= kTraceTimeLimitNs; };
    if (outside(event.start_ns) || outside(event.end_ns)) {
      ++out_of_time_;  // a span of such times overflows the readers: dropped, counted in meta
      return false;
    }
    if (pending_.events.size() >= options_.max_buffered_rows && !stop_) {
      wake_.notify_one();
      drained_.wait(lock, [&] {
        return pending_.events.size() < options_.max_buffered_rows || stop_ || !error_.ok();
      });
    }
    note_pending();
    Event& stored = pending_.events.push_back(event);
    if (stored.end_ns < stored.start_ns) {
      stored.end_ns = stored.start_ns;
      ++ends_before_start_;
    }
    if (pending_.events.size() == options_.flush_rows) wake_.notify_one();
    return true;
  }

  void add(const StepMetrics& metrics) override {
    std::lock_guard lock(mu_);
    if (closed_) return;  // after close() nothing more is written
    // SQLite stores a NaN as NULL, which the steps table refuses, and the
    // failed insert would take the whole batch, events too, with it: the
    // row is dropped instead, counted in meta.
    if (std::isnan(metrics.loss) || std::isnan(metrics.tokens) || std::isnan(metrics.loss_scale)) {
      ++nan_rows_;
      return;
    }
    note_pending();
    pending_.other.steps.push_back(metrics);
  }

  void add(const CounterSample& sample) override {
    std::lock_guard lock(mu_);
    if (closed_) return;  // after close() nothing more is written
    if (std::isnan(sample.value)) {  // as a step's NaN above
      ++nan_rows_;
      return;
    }
    if (sample.time_ns <= -kTraceTimeLimitNs || sample.time_ns >= kTraceTimeLimitNs) {
      ++samples_out_of_time_;  // as events' times: the views' spans would overflow
      return;
    }
    note_pending();
    pending_.other.counters.push_back(sample);
  }

  void set_meta(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mu_);
    if (closed_) return;  // after close() nothing more is written
    note_pending();
    pending_.other.meta.emplace_back(valid_utf8(key), valid_utf8(value));
  }

  Status flush() override {
    std::unique_lock lock(mu_);
    if (closed_ || stop_) return error_;
    const std::uint64_t target = ++requested_;
    wake_.notify_one();
    drained_.wait(lock, [&] { return completed_ >= target || flusher_done_; });
    return error_;
  }

  Status close(std::string_view status) override {
    {
      std::unique_lock lock(mu_);
      if (closed_) return error_;
      closed_ = true;
      stop_ = true;
      wake_.notify_one();
    }
    if (flusher_.joinable()) flusher_.join();
    if (committer_.joinable()) committer_.join();
    // The pages committed so far are copied into the file while finalize
    // builds the level of detail; the last checkpoint below copies the rest.
    request_checkpoint(/*last=*/true);

    Status result;
    {
      std::lock_guard lock(mu_);
      result = error_;
    }
    // The status and counts are written even after a failure when the disk
    // allows it; what was committed before stays readable either way.
    {
      sql::Transaction tx(db_);
      Status s = tx.begin_status();
      if (s) s = write_meta("status", status);
      if (s && ends_before_start_ > 0)
        s = write_meta("events_with_end_before_start", std::to_string(ends_before_start_));
      if (s && unknown_lane_ > 0)
        s = write_meta("events_dropped_with_unknown_lane", std::to_string(unknown_lane_));
      if (s && out_of_time_ > 0)
        s = write_meta("events_dropped_outside_the_time_a_trace_holds", std::to_string(out_of_time_));
      if (s && samples_out_of_time_ > 0) {
        s = write_meta("samples_dropped_outside_the_time_a_trace_holds",
                       std::to_string(samples_out_of_time_));
      }
      if (s && nan_rows_ > 0)
        s = write_meta("steps_and_samples_dropped_with_nan", std::to_string(nan_rows_));
      if (s && dropped_events_ > 0)
        s = write_meta("events_dropped_after_write_failure", std::to_string(dropped_events_));
      if (s) s = tx.commit();
      if (!s && result.ok())
        result = Error{path_ + ": cannot record the store's status: " + s.message()};
    }
    if (result.ok()) {
      auto chunked = close_chunks();
      if (!chunked)
        result = chunked.error();
      else if (Status s = store::finalize(db_, status, *chunked); !s)
        result = s;
    }
    if (checkpointer_.joinable()) checkpointer_.join();
    if (Status s = db_.exec("PRAGMA wal_checkpoint(TRUNCATE)"); !s && result.ok()) result = s;
    if (result.ok()) store::leave_wal(db_);
    db_.close();
    return result;
  }

  Status error() const override {
    std::lock_guard lock(mu_);
    return error_;
  }

  std::int64_t committed_steps() const override { return committed_steps_.load(); }

  const std::string& path() const override { return path_; }

 private:
  // A lane is one per (rank, kind, name): the key is those, the name last.
  static constexpr std::size_t kLaneKeyPrefix = sizeof(std::int32_t) + sizeof(LaneKind);
  static std::string lane_key(std::int32_t rank, LaneKind kind, std::string name) {
    std::string key(kLaneKeyPrefix, '\0');
    std::memcpy(key.data(), &rank, sizeof rank);
    std::memcpy(key.data() + sizeof rank, &kind, sizeof kind);
    return key + name;
  }

  // Under mu_: remembers when the oldest waiting row arrived.
  void note_pending() {
    if (pending_empty_) {
      oldest_ = Clock::now();
      pending_empty_ = false;
      wake_.notify_one();
    }
  }

  // The flusher takes what waits and prepares it (prepare); the committer
  // writes it (write_batch). While one batch commits, the next is ordered and
  // encoded on the other core.
  void flusher_loop() {
    std::uint64_t taken = 0;  // the flush() requests the batches handed over answer
    while (true) {
      std::unique_ptr<PreparedBatch> batch = take_free_batch();
      std::unique_lock lock(mu_);
      auto due = [&] {
        return stop_ || requested_ > taken || pending_.events.size() >= options_.flush_rows ||
               pending_.events.size() >= options_.max_buffered_rows ||
               (!pending_empty_ && Clock::now() >= oldest_ + options_.flush_interval);
      };
      while (!due()) {
        if (pending_empty_)
          wake_.wait(lock);
        else
          wake_.wait_until(lock, oldest_ + options_.flush_interval);
      }
      taken = requested_;
      std::swap(pending_, spare_);
      pending_empty_ = true;
      const bool failed = !error_.ok();
      drained_.notify_all();
      lock.unlock();

      batch->flush_target = taken;
      batch->event_count = spare_.events.size();
      batch->drop = failed;
      if (!failed) prepare(spare_, *batch);
      spare_.clear();
      hand_over(std::move(batch));

      lock.lock();
      if (stop_ && pending_empty_ && pending_.rows() == 0) break;
    }
    no_more_batches();
  }

  void committer_loop() {
    bool failed = false;  // after a failed write, nothing more is written
    while (std::unique_ptr<PreparedBatch> batch = take_ready_batch()) {
      Status s;
      if (batch->drop || failed) {
        dropped_events_ += batch->event_count;
      } else if (batch->event_count > 0 || batch->other.size() > 0) {
        s = write_batch(*batch);
        if (!s) {
          dropped_events_ += batch->event_count;
          failed = true;
        }
      }
      const std::uint64_t target = batch->flush_target;
      batch->clear();
      give_back(std::move(batch));

      std::lock_guard lock(mu_);
      if (!s && error_.ok()) error_ = s;
      completed_ = std::max(completed_, target);
      drained_.notify_all();
    }
    std::lock_guard lock(mu_);
    flusher_done_ = true;
    drained_.notify_all();
  }

  // Two batches go round: one prepared by the flusher while the committer
  // writes the other.
  std::unique_ptr<PreparedBatch> take_free_batch() {
    std::unique_lock lock(handoff_mu_);
    handoff_wake_.wait(lock, [&] { return !free_batches_.empty(); });
    std::unique_ptr<PreparedBatch> batch = std::move(free_batches_.back());
    free_batches_.pop_back();
    return batch;
  }
  void hand_over(std::unique_ptr<PreparedBatch> batch) {
    std::unique_lock lock(handoff_mu_);
    handoff_wake_.wait(lock, [&] { return !ready_batch_; });
    ready_batch_ = std::move(batch);
    handoff_wake_.notify_all();
  }
  void no_more_batches() {
    std::lock_guard lock(handoff_mu_);
    no_more_batches_ = true;
    handoff_wake_.notify_all();
  }
  // Null once the flusher has ended and every batch is taken.
  std::unique_ptr<PreparedBatch> take_ready_batch() {
    std::unique_lock lock(handoff_mu_);
    handoff_wake_.wait(lock, [&] { return ready_batch_ || no_more_batches_; });
    std::unique_ptr<PreparedBatch> batch = std::move(ready_batch_);
    handoff_wake_.notify_all();
    return batch;
  }
  void give_back(std::unique_ptr<PreparedBatch> batch) {
    std::lock_guard lock(handoff_mu_);
    free_batches_.push_back(std::move(batch));
    handoff_wake_.notify_all();
  }

  Status write_meta(std::string_view key, std::string_view value) {
    insert_meta_.reset();
    insert_meta_.bind(1, key).bind(2, value);
    if (const int rc = insert_meta_.step(); rc != SQLITE_DONE) return db_.error("write failed", rc);
    return {};
  }

  Status step_done(sql::Statement& stmt) {
    if (const int rc = stmt.step(); rc != SQLITE_DONE) return db_.error("write failed", rc);
    return {};
  }

  // The checkpointer copies committed pages from the WAL into the file on its
  // own connection, beside the flusher (SQLite lets one checkpoint run while
  // another connection writes). A fully copied WAL is rewound by the next
  // commit, so the WAL stays small and close() has little left to copy.
  void checkpointer_loop(sql::Database& db) {
    std::unique_lock lock(checkpoint_mu_);
    std::uint64_t done = 0;
    while (true) {
      checkpoint_wake_.wait(lock,
                            [&] { return checkpoint_last_ || checkpoints_requested_ > done; });
      const bool last = checkpoint_last_;
      done = checkpoints_requested_;
      lock.unlock();
      // Best effort: what it cannot copy now, close() copies.
      (void)db.exec("PRAGMA wal_checkpoint(PASSIVE)");
      lock.lock();
      if (last) break;
    }
    lock.unlock();
    db.close();
  }

  void request_checkpoint(bool last) {
    {
      std::lock_guard lock(checkpoint_mu_);
      ++checkpoints_requested_;
      if (last) checkpoint_last_ = true;
    }
    checkpoint_wake_.notify_one();
  }

  // Committer thread only: commits one batch, or nothing of it.
  Status write_batch(PreparedBatch& batch) {
    sql::Transaction tx(db_);
    if (!tx.begin_status()) return db_.error("write failed");
    Status s;
    const OtherRows& other = batch.other;
    for (const auto& [id, text] : other.strings) {
      insert_string_.reset();
      insert_string_.bind(1, id).bind(2, text);
      if (!(s = step_done(insert_string_))) return s;
    }
    for (const RankInfo& r : other.ranks) {
      insert_rank_.reset();
      insert_rank_.bind(1, r.rank)
          .bind(2, r.host)
          .bind(3, r.device)
          .bind(4, r.pid)
          .bind(5, r.clock_offset_ns)
          .bind(6, r.clock_offset_measured ? 1 : 0);
      if (!(s = step_done(insert_rank_))) return s;
    }
    for (const LaneRow& l : other.lanes) {
      insert_lane_.reset();
      insert_lane_.bind(1, l.id)
          .bind(2, l.rank)
          .bind(3, static_cast<int>(l.kind))
          .bind(4, l.name)
          .bind(5, l.sort_index);
      if (!(s = step_done(insert_lane_))) return s;
    }
    for (const auto& [key, value] : other.meta) {
      if (!(s = write_meta(key, value))) return s;
    }
    if (!batch.event_rows.empty()) {
      if (!(s = write_events(batch))) return s;
    }
    for (const StepMetrics& m : other.steps) {
      insert_step_.reset();
      insert_step_.bind(1, m.rank)
          .bind(2, m.step)
          .bind(3, m.start_ns)
          .bind(4, m.end_ns)
          .bind(5, m.loss)
          .bind(6, m.tokens)
          .bind(7, m.loss_scale);
      if (!(s = step_done(insert_step_))) return s;
    }
    for (const CounterSample& c : other.counters) {
      insert_counter_.reset();
      insert_counter_.bind(1, c.rank).bind(2, c.name.value).bind(3, c.time_ns).bind(4, c.value);
      if (!(s = step_done(insert_counter_))) return s;
    }
    if (!(s = tx.commit())) return db_.error("write failed");
    committed_steps_ += static_cast<std::int64_t>(other.steps.size());
    events_since_checkpoint_ += batch.event_count;
    // By size, and at least every few seconds: a slow run's rows would stay
    // in the -wal for minutes, where a copy of the .db alone misses them.
    if (events_since_checkpoint_ >= kEventsPerCheckpoint ||
        Clock::now() - last_checkpoint_ > kCheckpointInterval) {
      request_checkpoint(/*last=*/false);
      events_since_checkpoint_ = 0;
      last_checkpoint_ = Clock::now();
    }
    return {};
  }

  // Committer thread: the batch's events, their details, its segments and
  // the chunks prepare() sealed.
  Status write_events(const PreparedBatch& batch) {
    event_rows_->set(batch.event_rows.data(), batch.event_count);
    insert_events_.reset();
    const int rc = insert_events_.step();
    event_rows_->set(nullptr, 0);
    if (rc != SQLITE_DONE) return db_.error("write failed", rc);
    const std::int64_t last_id =
        batch.first_event_id + static_cast<std::int64_t>(batch.event_count) - 1;
    if (sqlite3_last_insert_rowid(db_.get()) != last_id) {
      return Error{path_ + ": write failed: event ids out of step (" +
                   std::to_string(sqlite3_last_insert_rowid(db_.get())) + ", expected " +
                   std::to_string(last_id) + ")"};
    }
    Status s;
    for (const auto& [id, d] : batch.details) {
      insert_details_.reset();
      insert_details_.bind(1, id)
          .bind(2, d.bytes)
          .bind(3, d.flops)
          .bind(4, static_cast<int>(d.collective))
          .bind(5, static_cast<int>(d.dtype))
          .bind(6, d.count)
          .bind(7, d.peer)
          .bind(8, d.group_size);
      if (!(s = step_done(insert_details_))) return s;
    }
    for (const auto& [id, l] : batch.launches) {
      insert_launch_.reset();
      insert_launch_.bind(1, id)
          .bind(2, l.grid[0])
          .bind(3, l.grid[1])
          .bind(4, l.grid[2])
          .bind(5, l.block[0])
          .bind(6, l.block[1])
          .bind(7, l.block[2])
          .bind(8, l.registers_per_thread)
          .bind(9, l.shared_memory_bytes)
          .bind(10, l.dynamic_shared_memory_bytes);
      if (!(s = step_done(insert_launch_))) return s;
    }
    for (const store::Segment& g : batch.segments) {
      insert_segment_.reset();
      insert_segment_.bind(1, static_cast<std::int64_t>(g.lane))
          .bind(2, g.first_id)
          .bind(3, g.last_id)
          .bind(4, g.start_min)
          .bind(5, g.start_max)
          .bind(6, g.end_max)
          .bind(7, g.duration_max);
      if (!(s = step_done(insert_segment_))) return s;
    }
    for (const store::SealedChunk& chunk : batch.chunks) {
      if (!(s = store::insert_chunk(db_, insert_chunk_, chunk))) return s;
    }
    return {};
  }

  // Flusher thread: orders the batch's events by (lane, start, end
  // descending) — a counting sort by lane, then a sort only of the lanes
  // whose events came out of order — gives them their ids, and makes every
  // row write_batch writes: the events, their details, one segment per lane,
  // the chunks of the lanes whose events arrive in time order.
  void prepare(Pending& pending, PreparedBatch& out) {
    std::swap(out.other, pending.other);
    const EventBuffer& events = pending.events;
    if (events.empty()) return;
    std::uint32_t max_lane = 0;
    for (std::size_t i = 0; i < events.size(); ++i)
      max_lane = std::max(max_lane, events[i].lane.value);
    lane_offsets_.assign(static_cast<std::size_t>(max_lane) + 2, 0);
    for (std::size_t i = 0; i < events.size(); ++i)
      ++lane_offsets_[events[i].lane.value + 1];
    for (std::size_t i = 1; i < lane_offsets_.size(); ++i)
      lane_offsets_[i] += lane_offsets_[i - 1];
    order_.resize(events.size());
    {
      std::vector<std::uint32_t> fill(lane_offsets_.begin(), lane_offsets_.end() - 1);
      for (std::uint32_t i = 0; i < events.size(); ++i)
        order_[fill[events[i].lane.value]++] = i;
    }
    auto before = [&](std::uint32_t a, std::uint32_t b) {
      const Event& x = events[a];
      const Event& y = events[b];
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      return x.end_ns > y.end_ns;
    };
    for (std::size_t lane = 0; lane + 1 < lane_offsets_.size(); ++lane) {
      auto first = order_.begin() + lane_offsets_[lane];
      auto last = order_.begin() + lane_offsets_[lane + 1];
      if (!std::is_sorted(first, last, before)) std::stable_sort(first, last, before);
    }

    out.first_event_id = next_event_id_;
    next_event_id_ += static_cast<std::int64_t>(events.size());
    out.event_rows.resize(events.size() * kEventRowColumns);
    has_details_.resize(events.size());
    std::int64_t* row = out.event_rows.data();
    for (std::size_t i = 0; i < order_.size(); ++i, row += kEventRowColumns) {
      const Event& e = events[order_[i]];
      const std::int64_t values[kEventRowColumns] = {e.lane.value,
                                                     static_cast<std::int64_t>(e.kind),
                                                     static_cast<std::int64_t>(e.category),
                                                     e.start_ns,
                                                     e.end_ns,
                                                     e.name.value,
                                                     e.correlation,
                                                     e.step};
      std::copy(values, values + kEventRowColumns, row);
      const auto d = store::EventDetails::of(e);
      has_details_[i] = !d.is_default();
      if (has_details_[i])
        out.details.emplace_back(out.first_event_id + static_cast<std::int64_t>(i), d);
    }
    if (!pending.launches.empty()) {
      // An event's id is first_event_id + its place in order_.
      place_.resize(events.size());
      for (std::uint32_t i = 0; i < order_.size(); ++i)
        place_[order_[i]] = i;
      for (const auto& [index, launch] : pending.launches)
        out.launches.emplace_back(out.first_event_id + place_[index], launch);
    }
    for (std::size_t lane = 0; lane + 1 < lane_offsets_.size(); ++lane) {
      const std::uint32_t begin = lane_offsets_[lane], end = lane_offsets_[lane + 1];
      if (begin == end) continue;
      store::Segment g;
      g.lane = static_cast<std::uint32_t>(lane);
      g.first_id = out.first_event_id + begin;
      g.last_id = out.first_event_id + end - 1;
      g.start_min = events[order_[begin]].start_ns;
      g.start_max = events[order_[end - 1]].start_ns;
      g.end_max = std::numeric_limits<std::int64_t>::min();
      for (std::uint32_t i = begin; i < end; ++i) {
        const Event& e = events[order_[i]];
        g.end_max = std::max(g.end_max, e.end_ns);
        g.duration_max = std::max(g.duration_max, e.end_ns - e.start_ns);
      }
      out.segments.push_back(g);
    }
    seal_chunks(events, out);
  }

  // A lane whose batches arrive in time order gets its chunks here, committed
  // with the batch, so close() need not read its rows back. A lane with a
  // late event gets them from finalize instead.
  void seal_chunks(const EventBuffer& events, PreparedBatch& out) {
    for (std::size_t lane = 0; lane + 1 < lane_offsets_.size(); ++lane) {
      const std::uint32_t begin = lane_offsets_[lane], end = lane_offsets_[lane + 1];
      if (begin == end) continue;
      LaneChunks& c = chunks_[static_cast<std::uint32_t>(lane)];
      if (c.out_of_order) continue;
      const Event& first = events[order_[begin]];
      if (c.any && !(first.start_ns > c.last_start ||
                     (first.start_ns == c.last_start && first.end_ns <= c.last_end))) {
        c.out_of_order = true;
        c.open = {};
        continue;
      }
      for (std::uint32_t i = begin; i < end; ++i) {
        const Event& e = events[order_[i]];
        store::ScanRow row;
        row.id = out.first_event_id + i;
        row.lane = static_cast<std::uint32_t>(lane);
        row.start = e.start_ns;
        row.end = e.end_ns;
        row.name = e.name.value;
        row.kind = e.kind;
        row.category = e.category;
        row.correlation = e.correlation;
        row.step = e.step;
        c.open.add(row, has_details_[i]);
        if (c.open.full()) out.chunks.push_back(c.open.seal(row.lane, c.seq++));
      }
      const Event& last = events[order_[end - 1]];
      c.any = true;
      c.last_start = last.start_ns;
      c.last_end = last.end_ns;
    }
  }

  // close(): the last, partial chunk of each in-order lane; returns those lanes.
  Result<std::set<std::uint32_t>> close_chunks() {
    std::set<std::uint32_t> done;
    sql::Transaction tx(db_);
    if (!tx.begin_status()) return db_.error("write failed");
    for (auto& [lane, c] : chunks_) {
      if (c.out_of_order) continue;
      if (!c.open.empty()) {
        if (Status s = c.open.write(db_, insert_chunk_, lane, c.seq++); !s) return s.error();
      }
      done.insert(lane);
    }
    if (Status s = tx.commit(); !s) return db_.error("write failed");
    return done;
  }

  const std::string path_;
  WriterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_;     // the flusher waits here
  std::condition_variable drained_;  // flush() and a blocked add() wait here
  Pending pending_;
  bool pending_empty_ = true;
  Clock::time_point oldest_;
  std::uint64_t requested_ = 0;
  std::uint64_t completed_ = 0;
  bool stop_ = false;
  bool closed_ = false;
  bool flusher_done_ = false;
  Status error_;
  std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>> strings_;
  std::uint32_t next_string_ = 1;
  std::unordered_map<std::string, std::uint32_t> lane_ids_;  // by lane_key
  std::uint32_t next_lane_ = 1;
  std::int64_t ends_before_start_ = 0;
  std::int64_t unknown_lane_ = 0;
  std::int64_t nan_rows_ = 0;
  std::size_t out_of_time_ = 0;                   // events past +-kTraceTimeLimitNs
  std::size_t samples_out_of_time_ = 0;           // counter samples past it
  std::atomic<std::int64_t> committed_steps_{0};  // written by the flusher, read by anyone

  // The committer's own (and close()'s, after it ended).
  sql::Database db_;
  sql::IntRows* event_rows_ = nullptr;  // the connection's
  sql::Statement insert_events_, insert_string_, insert_rank_, insert_lane_, insert_meta_,
      insert_details_, insert_launch_, insert_segment_, insert_step_, insert_counter_,
      insert_chunk_;
  std::size_t events_since_checkpoint_ = 0;
  std::size_t dropped_events_ = 0;
  std::thread committer_;

  // The flusher's own (and close()'s, after it ended).
  Pending spare_;
  std::vector<std::uint32_t> order_;
  std::vector<std::uint32_t> lane_offsets_;
  std::vector<std::uint8_t> has_details_;  // per event, in order_'s order
  std::vector<std::uint32_t> place_;       // per event of the batch: its place in order_
  std::int64_t next_event_id_ = 1;
  // Per lane, the event chunks built as batches arrive (see seal_chunks).
  struct LaneChunks {
    store::ChunkEncoder open;
    std::int64_t seq = 0;
    bool any = false;
    bool out_of_order = false;
    std::int64_t last_start = 0;
    std::int64_t last_end = 0;
  };
  std::unordered_map<std::uint32_t, LaneChunks> chunks_;
  std::thread flusher_;

  // Between the two (see take_free_batch).
  std::mutex handoff_mu_;
  std::condition_variable handoff_wake_;
  std::vector<std::unique_ptr<PreparedBatch>> free_batches_;
  std::unique_ptr<PreparedBatch> ready_batch_;
  bool no_more_batches_ = false;

  // About 60 MB of WAL between checkpoints, or 10 s.
  static constexpr std::size_t kEventsPerCheckpoint = std::size_t{1} << 20;
  static constexpr std::chrono::seconds kCheckpointInterval{10};
  Clock::time_point last_checkpoint_ = Clock::now();
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_wake_;
  std::uint64_t checkpoints_requested_ = 0;
  bool checkpoint_last_ = false;
  std::thread checkpointer_;
};

}  // namespace

namespace {

// Why the SQLite database at `path` cannot be read now because another
// process holds it locked (SQLite's words); empty when it can be read, or
// fails for another reason (damage). Read as "not a store" it was replaced,
// under that process: another program's data gone, its journal too.
std::string held_by_another_process(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || !is_sqlite_file(path)) return {};
  auto db = sql::Database::open(path, SQLITE_OPEN_READONLY);
  if (!db) return {};
  auto busy = [&db] {
    const int primary = sqlite3_extended_errcode(db->get()) & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
  };
  auto id = db->prepare("SELECT count(*) FROM sqlite_master");
  if (!id) return busy() ? sqlite3_errmsg(db->get()) : std::string();
  if (const int rc = id->step(); rc != SQLITE_ROW && busy()) return sqlite3_errmsg(db->get());
  return {};
}

// What lies at `path` when it is not a trace store (nor empty, nor a store
// too damaged to tell): empty when a store may replace it.
std::string not_a_store_there(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0 || ec)
    return {};
  if (!is_sqlite_file(path)) return "a file that is not a trace store";
  // SQLite reads the write-ahead log too: a store whose writer died before
  // its first checkpoint still says it is one.
  auto db = sql::Database::open(path, SQLITE_OPEN_READONLY);
  if (!db) return {};
  auto id = db->prepare("PRAGMA application_id");
  if (!id || id->step() != SQLITE_ROW) return {};
  if (id->int64_at(0) == kApplicationId) {
    // A store of a newer schema (or one whose version does not tell) holds
    // what this build cannot read back: replaced, it would be lost to the
    // build that wrote it.
    const std::string newer = ", written by a newer ClusterScope (this build writes version " +
                              std::to_string(kSchemaVersion) + ")";
    if (auto user = db->prepare("PRAGMA user_version");
        user && user->step() == SQLITE_ROW && user->int64_at(0) > kSchemaVersion)
      return "a trace store of schema version " + std::to_string(user->int64_at(0)) + newer;
    // +key: a scan, as store::kMetaLookup is.
    if (auto meta = db->prepare("SELECT value FROM meta WHERE +key = 'schema_version'");
        meta && meta->step() == SQLITE_ROW) {
      const std::string said(meta->text_at(0));
      int said_version = 0;
      const auto [end, parsed] =
          std::from_chars(said.data(), said.data() + said.size(), said_version);
      if (parsed != std::errc{} || end != said.data() + said.size() || said_version < 1)
        return "a trace store whose meta table gives the schema version as '" + said +
               "', not a version number";
      if (said_version > kSchemaVersion) return "a trace store of schema version " + said + newer;
    }
    return {};
  }
  auto tables = db->prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  if (tables && tables->step() == SQLITE_ROW && tables->int64_at(0) == 0) return {};
  return "another program's SQLite database";
}

// The process (host:pid) still writing the trace store at `path`; empty when
// none is (or it is no store).
std::string live_writer_of(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || !is_sqlite_file(path)) return {};
  auto db = sql::Database::open(path, SQLITE_OPEN_READONLY);
  if (!db) return {};
  auto id = db->prepare("PRAGMA application_id");
  if (!id || id->step() != SQLITE_ROW || id->int64_at(0) != kApplicationId) return {};
  auto meta = db->prepare("SELECT key, value FROM meta WHERE +key IN ('status', 'writer')");
  if (!meta) return {};
  std::string status, writer;
  while (meta->step() == SQLITE_ROW) {
    if (meta->text_at(0) == "status") status = meta->text_at(1);
    if (meta->text_at(0) == "writer") writer = meta->text_at(1);
  }
  if (status != "writing" || !store::process_alive(writer)) return {};
  return store::identity_for_people(std::move(writer));
}

// What a non-regular file at `path` is, for people; empty for a regular file,
// a folder, or nothing there.
std::string special_file_kind(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_fifo(path, ec)) return "a named pipe";
  return device_kind(path);
}

}  // namespace

Status check_store_path(const std::string& path) {
  // "-" names standard input or output where a command reads or prints
  // JSON; a store is a SQLite file, which a pipe cannot hold (it was written
  // to a file named "-" in the working folder).
  if (path == "-") {
    return Error{
        "-: a trace store is a SQLite file, which standard output cannot hold: give a file "
        "name (./- for a file named -)"};
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error{path + ": is a folder; give the store's file name (for example " +
                 (std::filesystem::path(path) / "run.db").string() + ")"};
  if (Status s = check_not_read_only(path); !s) return s;
  // Replaced, a device (root's /dev/null) or a pipe would be gone for every
  // other program.
  if (const std::string kind = special_file_kind(path); !kind.empty())
    return Error{path + ": is " + kind +
                 "; a trace store replaces only an earlier store: give a "
                 "file name"};
  if (const std::string held = held_by_another_process(path); !held.empty())
    return Error{path + ": cannot tell what it is: another process holds it locked (" + held +
                 "); it is not replaced: try again once that process is done with it, or give "
                 "another name"};
  // Replaced under its writer, a live store (another run's rank store) loses
  // what that run records from then on, and the run reads another's rows.
  if (const std::string writer = live_writer_of(path); !writer.empty())
    return Error{path + ": is a trace store that process " + writer +
                 " is still writing: wait for it to end, or give another name"};
  // A store replaces an earlier store (a run again), never another file: a
  // plan given as --out, a text file, an Nsight Systems export.
  if (const std::string what = not_a_store_there(path); !what.empty()) {
    return Error{path + ": is " + what + "; a trace store replaces only an earlier store: " +
                 "remove it or give another name"};
  }
  return {};
}

Status build_store_then_replace(const std::string& named,
                                const std::function<Status(const std::string& temporary)>& build) {
  if (Status s = check_store_path(named); !s) return s;
  std::error_code ec;
  // A link named as the output (latest.db into a runs folder) is kept, and
  // its target replaced, as an export writes through one: the link itself
  // was replaced by a file. Messages name what was given.
  std::string path = named;
  if (std::filesystem::is_symlink(named, ec)) {
    if (const auto target = std::filesystem::canonical(named, ec); !ec) path = target.string();
    ec.clear();
  }
  const auto folder = std::filesystem::path(path).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec))
    return Error{named + ": the folder " + folder.string() + " does not exist"};
  // Said before SQLite tries: its error named the errno of its last,
  // read-only attempt ("No such file or directory" on a read-only mount).
  if (const std::string in = folder.empty() ? "." : folder.string();
      ::access(in.c_str(), W_OK) != 0)
    return Error{named + ": cannot write in " + in + ": " + std::strerror(errno)};
  const std::string temporary = path + "." + std::to_string(::getpid()) + ".partial";
  auto remove_with_log = [&ec](const std::string& store) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(store + suffix, ec);
  };
  auto naming_path = [&](std::string message) {
    for (std::size_t at = message.find(temporary); at != std::string::npos;
         at = message.find(temporary, at + named.size()))
      message.replace(at, temporary.size(), named);
    return Error{std::move(message)};
  };
  remove_with_log(temporary);
  // Ctrl-C or a kill during the build removes them too (core/unfinished_file.h).
  const UnfinishedFile unfinished[] = {
      UnfinishedFile(temporary), UnfinishedFile(temporary + "-journal"),
      UnfinishedFile(temporary + "-wal"), UnfinishedFile(temporary + "-shm")};
  // Partial stores of earlier builds whose process died (kill -9 during a
  // merge) stayed beside the store for good.
  {
    const std::string prefix = std::filesystem::path(path).filename().string() + ".";
    std::vector<std::string> stale;
    for (auto it = std::filesystem::directory_iterator(folder.empty() ? "." : folder, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(prefix) || !name.ends_with(".partial")) continue;
      const std::optional<long> pid =
          parse_count<long>(name.substr(prefix.size(), name.size() - prefix.size() - 8));
      if (pid && *pid > 0 && ::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH)
        stale.push_back(it->path().string());
    }
    for (const std::string& partial : stale)
      remove_with_log(partial);
    ec.clear();
  }
  // An exception from the build leaves no partial store behind either.
  Status built = [&] {
    try {
      return build(temporary);
    } catch (...) {
      remove_with_log(temporary);
      throw;
    }
  }();
  if (!built) {
    remove_with_log(temporary);
    return naming_path(built.message());
  }
  // The earlier store's log must not be read with the new file; the new
  // store's log (what its last close did not fold in) goes with it.
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    if (std::filesystem::exists(file, ec) && !std::filesystem::remove(file, ec)) {
      remove_with_log(temporary);
      return Error{file + ": cannot replace: " + ec.message()};
    }
  }
  std::filesystem::remove(temporary + "-shm", ec);  // rebuilt from the log when needed
  ec.clear();
  // The renames go whole: a signal between them would remove the new store
  // and leave its log beside the old one.
  const SignalsHeld held;
  if (std::filesystem::exists(temporary + "-wal", ec))
    std::filesystem::rename(temporary + "-wal", path + "-wal", ec);
  if (!ec) std::filesystem::rename(temporary, path, ec);
  if (ec) {
    const std::string why = ec.message();
    remove_with_log(temporary);
    return Error{named + ": cannot put the new store in place: " + why};
  }
  return {};
}

namespace {

// A new store at `path` (nothing there), its schema and meta committed.
Result<sql::Database> new_store(const std::string& path, const RunInfo& run) {
  auto opened = sql::Database::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!opened) return opened.error();
  sql::Database db = std::move(opened).value();
  // Page size before WAL; no automatic checkpoints (the writer checkpoints
  // itself, rarely); NORMAL sync: a killed process loses nothing committed.
  if (auto s = db.exec("PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; "
                       "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;");
      !s)
    return Error{path + ": cannot create the trace store: " + s.message()};
  if (auto s = store::tune_connection(db, true); !s) return s.error();
  {
    sql::Transaction tx(db);
    if (auto s = store::create_schema(db); !s)
      return Error{path + ": cannot create the trace store: " + s.message()};
    auto meta = db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
    if (!meta) return meta.error();
    auto put = [&](std::string_view key, std::string_view value) -> Status {
      meta->reset();
      meta->bind(1, key).bind(2, value);
      if (const int rc = meta->step(); rc != SQLITE_DONE)
        return db.error("cannot create the trace store", rc);
      return {};
    };
    const std::string created =
        std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    const std::pair<std::string_view, std::string> rows[] = {
        {"format", "clusterscope-trace"},
        {"schema_version", std::to_string(kSchemaVersion)},
        {"status", "writing"},
        {"writer", store::this_process_identity()},
        {"created_utc_ns", created},
        {"title", run.title},
        {"source", run.source},
        {"start_utc_ns", std::to_string(run.start_utc_ns)},
        {"clock", run.clock},
        {"host", run.host},
        {"command_line", run.command_line},
        {"plan_json", run.plan_json},
        {"tool_versions_json", run.tool_versions_json},
    };
    for (const auto& [key, value] : rows) {
      if (auto s = put(key, valid_utf8(value)); !s) return s.error();
    }
    auto empty = db.exec("INSERT INTO strings(id, value) VALUES(0, '')");
    if (!empty) return empty.error();
    if (auto s = tx.commit(); !s)
      return Error{path + ": cannot create the trace store: " + s.message()};
  }
  // The schema and meta into the file itself: until the first checkpoint
  // everything was in the -wal, and a copy of the .db alone made during the
  // run read as "an SQLite database with no tables".
  (void)db.exec("PRAGMA wal_checkpoint(PASSIVE)");
  return db;
}

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::string& path,
                                                         const RunInfo& run,
                                                         WriterOptions options) {
  if (Status s = check_store_path(path); !s) return s.error();
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    if (std::filesystem::exists(file, ec) && !std::filesystem::remove(file, ec))
      return Error{file + ": cannot replace: " + ec.message()};
  }
  auto made = new_store(path, run);
  if (!made) {
    // What the failed attempt left (on a full disk: an empty file, or a
    // database without tables and its log) is no store: left there, it read
    // as one that is damaged, and a run's merge named it so.
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path + suffix, ec);
    return made.error();
  }
  sql::Database db = std::move(made).value();
  auto writer = std::make_unique<SqliteTraceWriter>(path, options, std::move(db));
  if (auto s = writer->start(); !s) return s.error();
  return std::unique_ptr<TraceWriter>(std::move(writer));
}

}  // namespace cs::trace
