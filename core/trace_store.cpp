#include "core/trace_store.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <sstream>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/file_exists.h"
#include "core/host_name.h"
#include "core/parse_count.h"
#include "core/trace_store_internal.h"
#include "core/unfinished_file.h"

namespace cs::trace {

namespace store {

namespace {

// Version 2 (version 1 had no chunks table; stores written before kernel
// launches were kept have no kernel_launches table, which readers allow).
// Comments in docs/trace-schema.md;
// keep both in step.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE ranks(
  rank INTEGER PRIMARY KEY, host TEXT NOT NULL, device TEXT NOT NULL, pid INTEGER NOT NULL,
  clock_offset_ns INTEGER NOT NULL, clock_offset_measured INTEGER NOT NULL);
CREATE TABLE lanes(
  id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, kind INTEGER NOT NULL, name TEXT NOT NULL,
  sort_index INTEGER NOT NULL);
CREATE TABLE strings(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events(
  id INTEGER PRIMARY KEY, lane INTEGER NOT NULL, kind INTEGER NOT NULL,
  category INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  name INTEGER NOT NULL, correlation INTEGER NOT NULL, step INTEGER NOT NULL);
CREATE TABLE segments(
  lane INTEGER NOT NULL, first_id INTEGER NOT NULL, last_id INTEGER NOT NULL,
  start_min INTEGER NOT NULL, start_max INTEGER NOT NULL, end_max INTEGER NOT NULL,
  duration_max INTEGER NOT NULL, PRIMARY KEY(lane, first_id)) WITHOUT ROWID;
CREATE TABLE event_details(
  event_id INTEGER PRIMARY KEY, bytes INTEGER NOT NULL, flops REAL NOT NULL,
  collective INTEGER NOT NULL, dtype INTEGER NOT NULL, count INTEGER NOT NULL,
  peer INTEGER NOT NULL, group_size INTEGER NOT NULL);
CREATE TABLE steps(
  rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL, loss REAL NOT NULL, tokens REAL NOT NULL, loss_scale REAL NOT NULL,
  PRIMARY KEY(rank, step)) WITHOUT ROWID;
CREATE TABLE counters(
  rank INTEGER NOT NULL, name INTEGER NOT NULL, time_ns INTEGER NOT NULL, value REAL NOT NULL);
CREATE INDEX counters_by_series ON counters(rank, name, time_ns);
CREATE TABLE lane_stats(
  lane INTEGER PRIMARY KEY, event_count INTEGER NOT NULL, first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL, max_duration_ns INTEGER NOT NULL, max_depth INTEGER NOT NULL,
  lod_finest_level INTEGER NOT NULL, lod_coarsest_level INTEGER NOT NULL);
CREATE TABLE lod(
  lane INTEGER NOT NULL, level INTEGER NOT NULL, depth INTEGER NOT NULL,
  start_ns INTEGER NOT NULL, seq INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  count INTEGER NOT NULL, name INTEGER NOT NULL, kind INTEGER NOT NULL,
  category INTEGER NOT NULL, event_id INTEGER NOT NULL,
  PRIMARY KEY(lane, level, depth, start_ns, seq)) WITHOUT ROWID;
CREATE TABLE chunks(
  id INTEGER PRIMARY KEY, lane INTEGER NOT NULL, first_start INTEGER NOT NULL,
  last_start INTEGER NOT NULL, end_max INTEGER NOT NULL, count INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE TABLE kernel_launches(
  event_id INTEGER PRIMARY KEY, grid_x INTEGER NOT NULL, grid_y INTEGER NOT NULL,
  grid_z INTEGER NOT NULL, block_x INTEGER NOT NULL, block_y INTEGER NOT NULL,
  block_z INTEGER NOT NULL, registers_per_thread INTEGER NOT NULL,
  shared_memory_bytes INTEGER NOT NULL, dynamic_shared_memory_bytes INTEGER NOT NULL);
CREATE VIEW event_view AS
  SELECT e.id, l.rank, e.lane, l.name AS lane_name, e.kind, e.category, e.start_ns, e.end_ns,
         e.end_ns - e.start_ns AS duration_ns, s.value AS name, e.correlation, e.step,
         coalesce(d.bytes, 0) AS bytes, coalesce(d.flops, 0) AS flops,
         coalesce(d.collective, 0) AS collective, coalesce(d.dtype, 0) AS dtype,
         coalesce(d.count, 0) AS count, coalesce(d.peer, -1) AS peer,
         coalesce(d.group_size, 0) AS group_size
  FROM events e JOIN lanes l ON l.id = e.lane JOIN strings s ON s.id = e.name
  LEFT JOIN event_details d ON d.event_id = e.id;
)sql";

constexpr const char* kRequiredTables[] = {"meta",     "ranks",      "lanes",         "strings",
                                           "events",   "segments",   "event_details", "steps",
                                           "counters", "lane_stats", "lod",           "chunks"};
// Tables of the schema a store may lack (written before they were), whose
// columns are checked where they are present.
constexpr const char* kOptionalTables[] = {"kernel_launches"};

// The columns kSchemaSql gives each table, read from a database it built in
// memory: the schema stays the one home of what a store holds.
const std::map<std::string, std::set<std::string>, std::less<>>& schema_columns() {
  static const auto columns = [] {
    std::map<std::string, std::set<std::string>, std::less<>> out;
    auto db = sql::Database::open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (!db || !db->exec(kSchemaSql)) return out;
    for (const auto tables : {std::span<const char* const>(kRequiredTables),
                              std::span<const char* const>(kOptionalTables)}) {
      for (const char* table : tables) {
        auto info = db->prepare("SELECT name FROM pragma_table_info('" + std::string(table) + "')");
        while (info && info->step() == SQLITE_ROW)
          out[table].emplace(info->text_at(0));
      }
    }
    return out;
  }();
  return columns;
}

std::string read_meta(sql::Database& db, std::string_view key) {
  auto stmt = db.prepare(kMetaLookup);
  if (!stmt) return {};
  stmt->bind(1, key);
  if (stmt->step() == SQLITE_ROW) return std::string(stmt->text_at(0));
  return {};
}

Status write_meta(sql::Database& db, std::string_view key, std::string_view value) {
  auto stmt = db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
  if (!stmt) return stmt.error();
  stmt->bind(1, key).bind(2, value);
  if (stmt->step() != SQLITE_DONE) return db.error("cannot write meta '" + std::string(key) + "'");
  return {};
}

// Field 22 of /proc/<pid>/stat: the start time in clock ticks since boot. With
// the pid it names one process, even after the pid is reused.
std::string process_start_time(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) return field;
  }
  return {};
}

// The names of the database's tables.
Result<std::set<std::string, std::less<>>> table_names(sql::Database& db) {
  std::set<std::string, std::less<>> tables;
  auto stmt = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!stmt) return stmt.error();
  while (stmt->step() == SQLITE_ROW)
    tables.emplace(stmt->text_at(0));
  return tables;
}

std::string list_tables(sql::Database& db) {
  auto stmt = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  if (!stmt) return {};
  std::string out;
  int n = 0;
  while (stmt->step() == SQLITE_ROW) {
    if (n == 6) {
      out += ", ...";
      break;
    }
    if (n++ > 0) out += ", ";
    out += stmt->text_at(0);
  }
  return out;
}

// Chunk encoding, per event, each field against the previous event of the
// chunk: id (zigzag delta), start (zigzag delta), duration, name, kind (bit 7:
// has an event_details row), category, correlation (zigzag delta), step
// (zigzag). Integers are LEB128 varints.
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
// Deltas are taken and added modulo 2^64, as unsigned numbers: a damaged
// chunk's varints can be anything, and so can the correlations an import
// reads (a signed overflow is undefined behaviour). Wrapped values round-trip
// exactly; the decoder checks what the sums come to.
std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t wrapping_sub(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}
// False when the blob ends early (a damaged chunk).
bool get_varint(const unsigned char*& p, const unsigned char* end, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const unsigned char b = *p++;
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

}  // namespace

void ChunkEncoder::add(const ScanRow& r, bool has_details) {
  if (count_ == 0) {
    first_start_ = r.start;
    end_max_ = r.end;
  }
  put_varint(data_, zigzag(wrapping_sub(r.id, prev_id_)));
  put_varint(data_, zigzag(wrapping_sub(r.start, prev_start_)));
  put_varint(data_, static_cast<std::uint64_t>(r.end - r.start));
  put_varint(data_, r.name);
  data_ += static_cast<char>(static_cast<unsigned>(r.kind) | (has_details ? 0x80u : 0u));
  data_ += static_cast<char>(r.category);
  put_varint(data_, zigzag(wrapping_sub(r.correlation, prev_correlation_)));
  put_varint(data_, zigzag(r.step));
  prev_id_ = r.id;
  prev_start_ = r.start;
  prev_correlation_ = r.correlation;
  last_start_ = r.start;
  end_max_ = std::max(end_max_, r.end);
  ++count_;
}

SealedChunk ChunkEncoder::seal(std::uint32_t lane, std::int64_t seq) {
  SealedChunk chunk{(static_cast<std::int64_t>(lane) << 32) | seq,
                    lane,
                    first_start_,
                    last_start_,
                    end_max_,
                    count_,
                    std::move(data_)};
  *this = {};
  return chunk;
}

Status insert_chunk(sql::Database& db, sql::Statement& insert, const SealedChunk& chunk) {
  insert.reset();
  insert.bind(1, chunk.id)
      .bind(2, chunk.lane)
      .bind(3, chunk.first_start)
      .bind(4, chunk.last_start)
      .bind(5, chunk.end_max)
      .bind(6, chunk.count);
  sqlite3_bind_blob(insert.get(), 7, chunk.data.data(), static_cast<int>(chunk.data.size()),
                    SQLITE_STATIC);
  const int rc = insert.step();
  if (rc != SQLITE_DONE) return db.error("cannot write event chunks", rc);
  return {};
}

Status ChunkEncoder::write(sql::Database& db, sql::Statement& insert, std::uint32_t lane,
                           std::int64_t seq) {
  return insert_chunk(db, insert, seal(lane, seq));
}

Status create_schema(sql::Database& db) {
  if (auto s = db.exec("PRAGMA application_id = " + std::to_string(kApplicationId)); !s) return s;
  if (auto s = db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)); !s) return s;
  return db.exec(kSchemaSql);
}

Status tune_connection(sql::Database& db, bool writer) {
  // 64 MiB page cache. No memory-mapped reads: a store cut short while open
  // (copied over in place, a scp in progress) raised SIGBUS on the mapped
  // pages past its new end, and the app died; read() fails with an error.
  (void)writer;
  return db.exec("PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY; PRAGMA mmap_size = 0;");
}

bool is_own_meta_row(std::string_view key) {
  static const std::set<std::string, std::less<>> kOwn = {
      // of the file
      "format", "schema_version", "status", "writer", "created_utc_ns", "finalized",
      // its RunInfo
      "title", "source", "start_utc_ns", "clock", "host", "command_line", "plan_json",
      "tool_versions_json"};
  return kOwn.count(key) > 0;
}

std::string this_process_identity() {
  const long pid = static_cast<long>(getpid());
  return this_host_name() + ":" + std::to_string(pid) + ":" + process_start_time(pid);
}

namespace {

// A writer's "host:pid:start", split; nullopt when malformed. The host may
// itself hold no ':'.
struct WriterIdentity {
  std::string host, pid, start;
};
std::optional<WriterIdentity> split_identity(const std::string& identity) {
  const auto last = identity.rfind(':');
  if (last == std::string::npos || last == 0) return std::nullopt;
  const auto middle = identity.rfind(':', last - 1);
  if (middle == std::string::npos) return std::nullopt;
  return WriterIdentity{identity.substr(0, middle), identity.substr(middle + 1, last - middle - 1),
                        identity.substr(last + 1)};
}

}  // namespace

bool written_on_this_host(const std::string& identity) {
  const auto id = split_identity(identity);
  return id && id->host == this_host_name();
}

std::string identity_for_people(std::string identity) {
  if (const auto last = identity.rfind(':'); last != std::string::npos) identity.resize(last);
  return identity;
}

bool process_alive(const std::string& identity) {
  const auto id = split_identity(identity);
  if (!id || id->host != this_host_name()) return false;
  const long pid = parse_count<long>(id->pid).value_or(0);
  if (pid <= 0) return false;
  const std::string now = process_start_time(pid);
  if (now.empty() || now != id->start) return false;
  // A process that has ended but is not yet reaped (a rank whose mpirun
  // exited first, left to an init that reaps late) keeps its /proc entry: it
  // writes no more ("still being written" was said of such a rank's store).
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  const char state = close != std::string::npos && close + 2 < text.size() ? text[close + 2] : 0;
  return state != 'Z' && state != 'X' && state != 0;
}

namespace {

// Upgrades `db`, a version-1 store named `path` in messages, to the current
// version; `advice` ends a failure's message.
Status migrate_from_version_1(sql::Database& db, const std::string& path,
                              const std::string& advice) {
  {
    auto stmt = db.prepare("PRAGMA user_version");
    if (!stmt || stmt->step() != SQLITE_ROW) return db.error("cannot read the schema version");
    if (stmt->int_at(0) != 1) return {};
  }
  // A file that says it is a version-1 store but lacks its tables is not
  // touched: the upgrade added a table to it, then failed on the next.
  bool had_chunks = false;
  {
    auto tables = table_names(db);
    if (!tables) return tables.error();
    for (const char* table : kRequiredTables) {
      if (std::string_view(table) == "chunks") {
        had_chunks = tables->count(std::string_view(table)) > 0;
      } else if (!tables->count(std::string_view(table))) {
        return Error{path + " is damaged: the trace store table '" + std::string(table) +
                     "' is missing (the store, of schema version 1, is unchanged)"};
      }
    }
  }
  // A damaged file is not written to: the upgrade rolled back when it could
  // not read its rows, but its table made and dropped had changed the file.
  {
    auto check = db.prepare("PRAGMA quick_check(1)");
    const int rc = check ? check->step() : SQLITE_ERROR;
    std::string verdict =
        rc == SQLITE_ROW ? std::string(check->text_at(0)) : std::string(sqlite3_errmsg(db.get()));
    if (verdict != "ok") {
      // Its first row names the database on a line of its own.
      if (verdict.rfind("*** in database", 0) == 0 && verdict.find('\n') != std::string::npos)
        verdict.erase(0, verdict.find('\n') + 1);
      std::replace(verdict.begin(), verdict.end(), '\n', ' ');
      return Error{path + " is damaged (SQLite's check: " + verdict +
                   "): the store, of trace schema version 1, was not upgraded and is unchanged"};
    }
  }
  if (auto s = tune_connection(db, true); !s) return s;
  if (auto s = db.exec("CREATE TABLE IF NOT EXISTS chunks(id INTEGER PRIMARY KEY, lane INTEGER "
                       "NOT NULL, first_start INTEGER NOT NULL, last_start INTEGER NOT NULL, "
                       "end_max INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL)");
      !s) {
    return Error{path + ": cannot upgrade from trace schema version 1: " + s.message() + advice};
  }
  // Every lane's chunks and level of detail rebuilt from its rows; a store
  // whose writer died keeps "interrupted" as its status, like finalize_store.
  // A failed rebuild rolls back; the table it would fill goes too.
  if (auto s = finalize(db, "interrupted"); !s) {
    if (!had_chunks) (void)db.exec("DROP TABLE IF EXISTS chunks");
    return Error{path + ": cannot upgrade from trace schema version 1: " + s.message() + advice};
  }
  if (auto s = write_meta(db, "schema_version", std::to_string(kSchemaVersion)); !s) return s;
  if (auto s = db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)); !s) return s;
  return {};
}

Status migrate_from_version_1(const std::string& path) {
  // What to do when the upgrade cannot write where the store is (a full
  // disk): the store is left as it was.
  const std::string advice =
      " (the store is unchanged: copy it to a folder with room that you can write, and open the "
      "copy)";
  auto opened = sql::Database::open(path, SQLITE_OPEN_READWRITE);
  if (!opened) {
    return Error{path + " uses trace schema version 1 and must be upgraded to version " +
                 std::to_string(kSchemaVersion) +
                 " in place, but it cannot be opened for writing: " + opened.message() + advice};
  }
  sql::Database db = std::move(opened).value();
  // Another reader may be upgrading the same file: wait for it, then find
  // the work done.
  sqlite3_busy_timeout(db.get(), 120000);
  return migrate_from_version_1(db, path, advice);
}

// A version-1 store that cannot be written here (a shared copy, a
// read-only folder) is read through an upgraded copy in the temporary
// folder, made once a process (the analysis opens a reader per thread, the
// app reopens by path) and removed at its exit or on a signal; the store
// stays as it is.
struct UpgradedCopy {
  std::string path;
  std::optional<UnfinishedFile> removed_on_signal;
  ~UpgradedCopy() {
    std::error_code ec;
    for (const char* suffix : {"", "-journal", "-wal", "-shm"})
      std::filesystem::remove(path + suffix, ec);
  }
};

Result<std::string> upgraded_copy(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<UpgradedCopy>> copies;
  // The same file as it is now: its size and time of change say a new one.
  struct stat file {};
  if (::stat(path.c_str(), &file) != 0) return Error{path + ": " + std::strerror(errno)};
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(path, ec).string() + "\n" +
                          std::to_string(file.st_size) + "\n" + std::to_string(file.st_mtime) +
                          "." + std::to_string(file.st_mtim.tv_nsec);
  const std::lock_guard lock(mutex);
  if (auto it = copies.find(key); it != copies.end()) return it->second->path;
  static int made = 0;
  auto copy = std::make_unique<UpgradedCopy>();
  copy->path = (std::filesystem::temp_directory_path(ec) /
                ("clusterscope-upgraded-" + std::to_string(::getpid()) + "-" +
                 std::to_string(++made) + ".cstrace"))
                   .string();
  copy->removed_on_signal.emplace(copy->path);
  const std::string advice =
      " (the store is unchanged; it cannot be written here, and its upgraded copy in " +
      std::filesystem::path(copy->path).parent_path().string() +
      " could not be made: free room there, or set TMPDIR to a folder with room)";
  std::filesystem::copy_file(path, copy->path, ec);
  if (ec) {
    return Error{path + " uses trace schema version 1 and must be upgraded: cannot copy it to " +
                 copy->path + ": " + ec.message() + advice};
  }
  auto opened = sql::Database::open(copy->path, SQLITE_OPEN_READWRITE);
  if (!opened) return Error{opened.message() + advice};
  opened->name_as(path);  // messages name the store, not its copy
  if (Status s = migrate_from_version_1(*opened, path, advice); !s) return s.error();
  const std::string made_path = copy->path;
  copies.emplace(key, std::move(copy));
  return made_path;
}

// Whether the store may be changed in place: the file and its folder
// writable, on a file system mounted for writing, and the file not marked
// read-only (chmod a-w, which root could write through).
bool can_write_in_place(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const char* dir = folder.empty() ? "." : folder.c_str();
  struct stat file {};
  struct statvfs fs {};
  return ::stat(path.c_str(), &file) == 0 && (file.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) != 0 &&
         ::statvfs(dir, &fs) == 0 && (fs.f_flag & ST_RDONLY) == 0 &&
         ::access(path.c_str(), W_OK) == 0 && ::access(dir, W_OK) == 0;
}

}  // namespace

namespace {

// Opens the file for writing so that SQLite rolls back the journal beside
// it; false, with SQLite's reason, when it cannot.
bool roll_back_journal(const std::string& path, std::string& why) {
  auto db = sql::Database::open(path, SQLITE_OPEN_READWRITE);
  if (!db) {
    why = db.message();
    return false;
  }
  auto stmt = db->prepare("PRAGMA application_id");
  if (stmt && stmt->step() == SQLITE_ROW) return true;
  why = sqlite3_errmsg(db->get());
  return false;
}

thread_local bool rolling_back_journal = false;

}  // namespace

Result<sql::Database> open_store(const std::string& path, bool writable, StoreState* state) {
  std::error_code ec;
  if (Status there = check_file_exists(path); !there) return there.error();
  if (std::filesystem::is_directory(path, ec))
    return Error{path + " is not a ClusterScope trace store: it is a directory"};
  // A FIFO or a device blocks the reader that opens it (the app's view then
  // waited forever, and the app could not quit): a store is a regular file.
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error{path + " is not a ClusterScope trace store: it is not a regular file (a pipe, "
                 "socket or device)"};
  }
  const auto size = std::filesystem::file_size(path, ec);
  const std::string refuse = path + " is not a ClusterScope trace store: ";
  if (!ec && size == 0) return Error{refuse + "the file is empty"};

  if (auto s = sql::check_not_cut_short(path); !s) return s.error();
  // A store whose writer died keeps its last writes in the write-ahead log,
  // which SQLite reads only through a "-shm" file made beside it: in a
  // read-only folder it cannot be, and SQLite's own words were "unable to
  // open database file (No such file or directory)".
  if (!writable) {
    const std::string wal = path + "-wal";
    const auto wal_size = std::filesystem::file_size(wal, ec);
    std::error_code shm_ec;
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    if (!ec && wal_size > 0 && !std::filesystem::exists(path + "-shm", shm_ec) &&
        ::access(folder.empty() ? "." : folder.c_str(), W_OK) != 0) {
      return Error{path + ": its writer did not close it, and its last writes are in " + wal +
                   ", which SQLite reads only with a file it makes beside it; this folder is "
                   "read-only: copy the store and its -wal file to a writable folder and open "
                   "the copy"};
    }
    ec.clear();
  }

  auto opened = sql::Database::open(path, writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY);
  if (!opened) return opened.error();
  sql::Database db = std::move(opened).value();

  std::int64_t application_id = 0;
  bool journal_to_roll_back = false;
  {
    auto stmt = db.prepare("PRAGMA application_id");
    if (!stmt) {
      const int code = sqlite3_extended_errcode(db.get());
      if ((code & 0xff) == SQLITE_NOTADB) return Error{refuse + "not an SQLite database"};
      return stmt.error();
    }
    const int rc = stmt->step();
    if ((rc & 0xff) == SQLITE_NOTADB) return Error{refuse + "not an SQLite database"};
    if ((rc & 0xff) == SQLITE_CORRUPT) return db.error("the file is damaged", rc);
    journal_to_roll_back = (rc & 0xff) == SQLITE_READONLY && !writable && !rolling_back_journal;
    if (rc != SQLITE_ROW && !journal_to_roll_back) return db.error("cannot read the file", rc);
    if (!journal_to_roll_back) application_id = stmt->int64_at(0);
  }
  if (journal_to_roll_back) {
    // A rollback journal beside the file (a write that stopped half way):
    // SQLite reads nothing until the journal is rolled back, which takes a
    // writable open; done once here, the store is then read as usual.
    db = sql::Database{};
    std::string why;
    if (!roll_back_journal(path, why)) {
      return Error{path + ": cannot read the file: " + path +
                   "-journal beside it holds a write that stopped half way, which SQLite must "
                   "roll back first, and the file cannot be written here (" + why + ")"};
    }
    rolling_back_journal = true;
    auto again = open_store(path, writable, state);
    rolling_back_journal = false;
    return again;
  }
  // SQLite reads the schema at the first statement that names a table: a
  // damaged one failed each command at its first query ("cannot prepare
  // query: malformed database schema ...").
  if (auto schema = db.prepare("SELECT count(*) FROM sqlite_master"); !schema) {
    if ((sqlite3_extended_errcode(db.get()) & 0xff) == SQLITE_CORRUPT) {
      return Error{path + " is damaged: SQLite cannot read its schema (" +
                   sqlite3_errmsg(db.get()) + ")"};
    }
    return schema.error();
  }
  if (application_id != kApplicationId) {
    const std::string tables = list_tables(db);
    if (tables.empty()) return Error{refuse + "an SQLite database with no tables"};
    return Error{refuse + "an SQLite database of another kind (tables: " + tables + ")"};
  }

  int version = 0;
  {
    auto stmt = db.prepare("PRAGMA user_version");
    if (!stmt || stmt->step() != SQLITE_ROW) return db.error("cannot read the schema version");
    version = stmt->int_at(0);
  }
  if (version > kSchemaVersion) {
    return Error{path + " uses trace schema version " + std::to_string(version) +
                 ", newer than this build of ClusterScope reads (up to " +
                 std::to_string(kSchemaVersion) + "): open it with a newer ClusterScope"};
  }
  // The meta table names the version too: a store whose meta says a newer
  // or an unreadable one was written by something this build does not know,
  // and read as current it would be misread. No meta table is the table
  // check's to report below.
  // +key: a scan, as store::kMetaLookup is.
  if (auto meta = db.prepare("SELECT value FROM meta WHERE +key = 'schema_version'");
      meta && meta->step() == SQLITE_ROW) {
    const std::string said(meta->text_at(0));
    int said_version = 0;
    const auto [end, parsed] =
        std::from_chars(said.data(), said.data() + said.size(), said_version);
    if (parsed != std::errc{} || end != said.data() + said.size() || said_version < 1) {
      return Error{path + " is damaged: its meta table gives the schema version as '" + said +
                   "', not a version number (this build reads version " +
                   std::to_string(kSchemaVersion) + ")"};
    }
    if (said_version > kSchemaVersion) {
      return Error{path +
                   " was written by a newer ClusterScope: its meta table gives trace "
                   "schema version " +
                   said + ", and this build reads up to version " + std::to_string(kSchemaVersion) +
                   ": open it with a newer ClusterScope"};
    }
  }
  bool upgraded_in_a_copy = false;
  if (version == 1) {
    // Version 1 kept events only as rows: version 2 adds their packed chunks,
    // rebuilt from the rows in place (with the level of detail) on first
    // open; in a copy (upgraded_copy) where the file cannot be written.
    db = sql::Database{};
    if (!writable && !can_write_in_place(path)) {
      auto copy = upgraded_copy(path);
      if (!copy) return copy.error();
      auto upgraded = sql::Database::open(*copy, SQLITE_OPEN_READONLY);
      if (!upgraded) return upgraded.error();
      db = std::move(upgraded).value();
      db.name_as(path);  // messages name the store, not its copy
      version = kSchemaVersion;
      upgraded_in_a_copy = true;
    } else {
      if (auto s = migrate_from_version_1(path); !s) return s.error();
      auto again = open_store(path, writable, state);
      if (again && state) state->upgraded = StoreState::Upgrade::in_place;
      return again;
    }
  }
  if (version < kSchemaVersion) {
    return Error{path + " uses trace schema version " + std::to_string(version) +
                 ", which this build cannot read or migrate (it reads version " +
                 std::to_string(kSchemaVersion) + ")"};
  }
  {
    auto tables = table_names(db);
    if (!tables) return tables.error();
    for (const char* table : kRequiredTables) {
      if (!tables->count(std::string_view(table))) {
        return Error{path + " is damaged: the trace store table '" + std::string(table) +
                     "' is missing"};
      }
    }
    // A column renamed or dropped: queries failed later with "no such
    // column", naming neither the table nor the damage.
    for (const auto& [table, expected] : schema_columns()) {
      if (!tables->count(std::string_view(table))) continue;  // an optional table
      std::set<std::string, std::less<>> present;
      auto info = db.prepare("SELECT name FROM pragma_table_info('" + table + "')");
      if (!info) return info.error();
      while (info->step() == SQLITE_ROW)
        present.emplace(info->text_at(0));
      for (const std::string& column : expected) {
        if (!present.count(column)) {
          return Error{path + " is damaged: the trace store table '" + table +
                       "' has no column '" + column + "'"};
        }
      }
    }
  }
  if (auto s = tune_connection(db, writable); !s) return s.error();

  if (state) {
    state->schema_version = version;
    if (upgraded_in_a_copy) state->upgraded = StoreState::Upgrade::in_a_copy;
    auto meta =
        db.prepare("SELECT key, value FROM meta WHERE +key IN ('status', 'writer', 'finalized')");
    if (!meta) return meta.error();
    int rc;
    while ((rc = meta->step()) == SQLITE_ROW) {
      const std::string_view key = meta->text_at(0);
      if (key == "status") state->status = meta->text_at(1);
      if (key == "writer") state->writer = meta->text_at(1);
      if (key == "finalized") state->finalized = meta->text_at(1) == "1";
    }
    if (rc != SQLITE_DONE) return db.error("cannot read the meta table", rc);
    state->writer_alive = state->status == "writing" && process_alive(state->writer);
    state->writer_elsewhere = state->status == "writing" && !state->writer_alive &&
                              !state->writer.empty() && !written_on_this_host(state->writer);
    auto stmt = db.prepare("SELECT coalesce(max(id), 0) FROM events");
    if (!stmt) return stmt.error();
    rc = stmt->step();
    if (rc != SQLITE_ROW) return db.error("cannot read events", rc);
    state->events = stmt->int64_at(0);
    state->writer = identity_for_people(std::move(state->writer));
  }
  return db;
}

Result<std::vector<Segment>> load_segments(sql::Database& db,
                                           const std::vector<std::uint32_t>& lanes) {
  std::vector<Segment> out;
  auto stmt = db.prepare(
      lanes.empty() ? "SELECT lane, first_id, last_id, start_min, start_max, end_max, duration_max "
                      "FROM segments"
                    : "SELECT lane, first_id, last_id, start_min, start_max, end_max, duration_max "
                      "FROM segments WHERE lane = ?");
  if (!stmt) return stmt.error();
  auto read_all = [&]() -> Status {
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      out.push_back({static_cast<std::uint32_t>(stmt->int64_at(0)), stmt->int64_at(1),
                     stmt->int64_at(2), stmt->int64_at(3), stmt->int64_at(4), stmt->int64_at(5),
                     stmt->int64_at(6)});
    }
    if (rc != SQLITE_DONE) return db.error("cannot read segments", rc);
    return {};
  };
  if (lanes.empty()) {
    if (auto s = read_all(); !s) return s.error();
  } else {
    for (std::uint32_t lane : lanes) {
      stmt->reset();
      stmt->bind(1, lane);
      if (auto s = read_all(); !s) return s.error();
    }
  }
  // Events have the ids 1 to `held`, read after the segments (a live
  // writer's commits in between only add events). A segment's ids past them
  // are damage: its count sizes what readers reserve, and its ids are read.
  auto last = db.prepare("SELECT coalesce(max(id), 0) FROM events");
  if (!last) return last.error();
  if (const int rc = last->step(); rc != SQLITE_ROW) return db.error("cannot read events", rc);
  const std::int64_t held = last->int64_at(0);
  for (const Segment& s : out) {
    if (s.first_id < 1 || s.last_id < s.first_id - 1 || s.last_id > held) {
      return Error{db.path() + " is damaged: its segments table gives lane " +
                   std::to_string(s.lane) + " the events " + std::to_string(s.first_id) + " to " +
                   std::to_string(s.last_id) + ", which its events table (ids 1 to " +
                   std::to_string(held) + ") does not hold"};
    }
  }
  std::sort(out.begin(), out.end(), [](const Segment& a, const Segment& b) {
    return a.start_min != b.start_min ? a.start_min < b.start_min : a.first_id < b.first_id;
  });
  return out;
}

// ---------------------------------------------------------------------------
// SegmentMerge

bool SegmentMerge::Later::operator()(int a, int b) const {
  const ScanRow& x = (*sources)[a].head;
  const ScanRow& y = (*sources)[b].head;
  if (x.start != y.start) return x.start > y.start;
  if (x.end != y.end) return x.end < y.end;
  return x.id > y.id;
}

SegmentMerge::SegmentMerge(sql::Database& db, std::vector<Segment> segments, std::int64_t from,
                           std::int64_t to, ScanColumns columns)
    : db_(db), from_(from), to_(to), columns_(columns), heap_(Later{&sources_}) {
  std::erase_if(segments,
                [&](const Segment& s) { return s.start_max < from || s.start_min >= to; });
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) {
    return a.start_min != b.start_min ? a.start_min < b.start_min : a.first_id < b.first_id;
  });
  segments_ = std::move(segments);
}

std::int64_t SegmentMerge::first_id_at_or_after(const Segment& s, std::int64_t start) {
  if (start <= s.start_min) return s.first_id;
  if (!probe_) {
    auto p = db_.prepare("SELECT start_ns FROM events WHERE id = ?", true);
    if (!p) {
      status_ = p.error();
      return s.last_id + 1;
    }
    probe_ = std::move(p).value();
  }
  std::int64_t lo = s.first_id, hi = s.last_id + 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    probe_.reset();
    probe_.bind(1, mid);
    const int rc = probe_.step();
    if (rc != SQLITE_ROW) {
      status_ = db_.error("cannot read event " + std::to_string(mid), rc);
      return s.last_id + 1;
    }
    if (probe_.int64_at(0) < start)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

bool SegmentMerge::advance(Source& src) {
  const int rc = src.stmt.step();
  if (rc == SQLITE_ROW) {
    ScanRow& r = src.head;
    r.id = src.stmt.int64_at(0);
    r.start = src.stmt.int64_at(1);
    r.end = src.stmt.int64_at(2);
    // The writer keeps only times within +-kTraceTimeLimitNs, end >= start,
    // and known kinds and categories: a row otherwise is damage (an edited
    // store), refused by name as a damaged chunk is. Read as it was, a span
    // of its times overflowed the readers (end - start past int64).
    const std::int64_t kind = src.stmt.int64_at(4), category = src.stmt.int64_at(5);
    if (r.start <= -kTraceTimeLimitNs || r.end >= kTraceTimeLimitNs || r.end < r.start ||
        kind < 0 || kind > static_cast<std::int64_t>(EventKind::overhead) || category < 0 ||
        category > static_cast<std::int64_t>(Category::other)) {
      status_ = Error{db_.path() + " is damaged: event " + std::to_string(r.id) +
                      " holds a time, kind or category no store holds"};
      return false;
    }
    r.name = static_cast<std::uint32_t>(src.stmt.int64_at(3));
    r.kind = static_cast<EventKind>(kind);
    r.category = static_cast<Category>(category);
    r.correlation = src.stmt.int64_at(6);
    r.step = src.stmt.int_at(7);
    if (columns_ != ScanColumns::light) {
      if (src.stmt.is_null(8)) {
        r.details = {};
      } else {
        r.details.bytes = src.stmt.int64_at(8);
        r.details.flops = src.stmt.double_at(9);
        r.details.collective = static_cast<Collective>(src.stmt.int_at(10));
        r.details.dtype = static_cast<DataType>(src.stmt.int_at(11));
        r.details.count = src.stmt.int64_at(12);
        r.details.peer = src.stmt.int_at(13);
        r.details.group_size = src.stmt.int_at(14);
      }
    }
    return r.start < to_;
  }
  if (rc != SQLITE_DONE) status_ = db_.error("cannot read events", rc);
  return false;
}

bool SegmentMerge::open_segment(const Segment& s) {
  const std::int64_t first = first_id_at_or_after(s, from_);
  if (!status_ || first > s.last_id) return false;
  int index;
  if (!free_sources_.empty()) {
    index = free_sources_.back();
    free_sources_.pop_back();
  } else {
    const char* sql =
        columns_ != ScanColumns::light
            ? "SELECT e.id, e.start_ns, e.end_ns, e.name, e.kind, e.category, e.correlation, "
              "e.step, d.bytes, d.flops, d.collective, d.dtype, d.count, d.peer, d.group_size "
              "FROM events e LEFT JOIN event_details d ON d.event_id = e.id "
              "WHERE e.id >= ? AND e.id <= ?"
            : "SELECT id, start_ns, end_ns, name, kind, category, correlation, step "
              "FROM events WHERE id >= ? AND id <= ?";
    auto stmt = db_.prepare(sql, true);
    if (!stmt) {
      status_ = stmt.error();
      return false;
    }
    sources_.push_back({std::move(stmt).value(), {}});
    index = static_cast<int>(sources_.size()) - 1;
  }
  Source& src = sources_[index];
  src.stmt.reset();
  src.stmt.bind(1, first).bind(2, s.last_id);
  src.head.lane = s.lane;
  if (advance(src)) {
    heap_.push(index);
    return true;
  }
  free_sources_.push_back(index);
  return false;
}

void SegmentMerge::open_until(std::int64_t start) {
  while (next_segment_ < segments_.size() && status_ &&
         (heap_.empty() || segments_[next_segment_].start_min <= start)) {
    open_segment(segments_[next_segment_++]);
    if (!heap_.empty()) start = sources_[heap_.top()].head.start;
  }
}

bool SegmentMerge::next(ScanRow& row) {
  if (!status_) return false;
  open_until(heap_.empty() ? std::numeric_limits<std::int64_t>::min()
                           : sources_[heap_.top()].head.start);
  if (heap_.empty() || !status_) return false;
  const int index = heap_.top();
  heap_.pop();
  row = sources_[index].head;
  const std::uint32_t lane = row.lane;
  if (advance(sources_[index])) {
    sources_[index].head.lane = lane;
    heap_.push(index);
  } else {
    free_sources_.push_back(index);
  }
  return status_.ok();
}

// ---------------------------------------------------------------------------
// Chunks

Result<std::vector<Chunk>> load_chunks(sql::Database& db, std::uint32_t lane) {
  auto stmt = db.prepare(
      "SELECT id, first_start, last_start, end_max, count FROM chunks "
      "WHERE id >= ? AND id < ? ORDER BY id");
  if (!stmt) return stmt.error();
  const std::int64_t base = static_cast<std::int64_t>(lane) << 32;
  stmt->bind(1, base).bind(2, base + (std::int64_t{1} << 32));
  std::vector<Chunk> out;
  int rc;
  while ((rc = stmt->step()) == SQLITE_ROW) {
    out.push_back({lane, stmt->int64_at(0) - base, stmt->int64_at(1), stmt->int64_at(2),
                   stmt->int64_at(3), stmt->int64_at(4)});
  }
  if (rc != SQLITE_DONE) return db.error("cannot read event chunks", rc);
  return out;
}

bool ChunkMerge::Later::operator()(int a, int b) const {
  const ScanRow& x = (*cursors)[a].rows[(*cursors)[a].at];
  const ScanRow& y = (*cursors)[b].rows[(*cursors)[b].at];
  if (x.start != y.start) return x.start > y.start;
  if (x.end != y.end) return x.end < y.end;
  return x.id > y.id;
}

ChunkMerge::ChunkMerge(sql::Database& db, const std::vector<const std::vector<Chunk>*>& lanes,
                       std::int64_t from, std::int64_t to, ScanColumns columns)
    : db_(db), from_(from), to_(to), columns_(columns), heap_(Later{&cursors_}) {
  cursors_.reserve(lanes.size());
  for (const std::vector<Chunk>* chunks : lanes) {
    if (!chunks || chunks->empty()) continue;
    Cursor c;
    c.chunks = chunks;
    // The first chunk that can hold a start >= from: chunks are in time order.
    c.next_chunk = static_cast<std::size_t>(
        std::lower_bound(chunks->begin(), chunks->end(), from,
                         [](const Chunk& k, std::int64_t t) { return k.last_start < t; }) -
        chunks->begin());
    cursors_.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < cursors_.size(); ++i) {
    if (settle(cursors_[i])) heap_.push(static_cast<int>(i));
    if (!status_) return;
  }
}

bool ChunkMerge::decode(Cursor& c, const Chunk& chunk) {
  if (!blob_) {
    auto stmt = db_.prepare("SELECT data FROM chunks WHERE id = ?", true);
    if (!stmt) {
      status_ = stmt.error();
      return false;
    }
    blob_ = std::move(stmt).value();
  }
  blob_.reset();
  blob_.bind(1, (static_cast<std::int64_t>(chunk.lane) << 32) | chunk.seq);
  const int rc = blob_.step();
  if (rc != SQLITE_ROW) {
    status_ = db_.error("cannot read an event chunk", rc);
    return false;
  }
  const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(blob_.get(), 0));
  const int bytes = sqlite3_column_bytes(blob_.get(), 0);
  const unsigned char* end = p + bytes;
  // An event takes 8 bytes at least: a count beyond that is not this blob's.
  if (chunk.count < 0 || chunk.count > bytes / 8) {
    status_ = Error{db_.path() + " is damaged: an event chunk of lane " +
                    std::to_string(chunk.lane) + " says it holds " + std::to_string(chunk.count) +
                    " events in " + std::to_string(bytes) + " bytes"};
    return false;
  }
  // Damage that still decodes (bytes overwritten inside the blob) is caught
  // by what the chunk's row says of it: its first and last start, its
  // latest end, its events in time order and its bytes all used. Analyses
  // and exports then refuse the store instead of reading other events.
  auto damaged = [&](const char* what) {
    status_ = Error{db_.path() + " is damaged: an event chunk of lane " +
                    std::to_string(chunk.lane) + " " + what};
    return false;
  };
  c.rows.resize(static_cast<std::size_t>(chunk.count));
  c.has_details.resize(c.rows.size());
  std::int64_t id = 0, start = 0, correlation = 0;
  std::int64_t end_max = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    std::uint64_t v[6];
    if (!get_varint(p, end, v[0]) || !get_varint(p, end, v[1]) || !get_varint(p, end, v[2]) ||
        !get_varint(p, end, v[3]) || end - p < 2) {
      status_ = Error{db_.path() + " is damaged: an event chunk of lane " +
                      std::to_string(chunk.lane) + " ends early"};
      return false;
    }
    const unsigned kind = *p++;
    const unsigned category = *p++;
    if (!get_varint(p, end, v[4]) || !get_varint(p, end, v[5])) {
      status_ = Error{db_.path() + " is damaged: an event chunk of lane " +
                      std::to_string(chunk.lane) + " ends early"};
      return false;
    }
    ScanRow& r = c.rows[i];
    const std::int64_t previous_start = start;
    id = wrapping_add(id, unzigzag(v[0]));
    start = wrapping_add(start, unzigzag(v[1]));
    correlation = wrapping_add(correlation, unzigzag(v[4]));
    if ((kind & 0x7f) > static_cast<unsigned>(EventKind::overhead) ||
        category > static_cast<unsigned>(Category::other)) {
      return damaged("holds an event of no known kind or category");
    }
    if (start <= -kTraceTimeLimitNs || start >= kTraceTimeLimitNs ||
        v[2] >= static_cast<std::uint64_t>(2 * kTraceTimeLimitNs)) {
      return damaged("does not decode to times a store holds");
    }
    if (i > 0 && start < previous_start) return damaged("does not decode to events in time order");
    r.id = id;
    r.lane = chunk.lane;
    r.start = start;
    r.end = start + static_cast<std::int64_t>(v[2]);
    r.name = static_cast<std::uint32_t>(v[3]);
    r.kind = static_cast<EventKind>(kind & 0x7f);
    r.category = static_cast<Category>(category);
    r.correlation = correlation;
    r.step = static_cast<std::int32_t>(unzigzag(v[5]));
    r.details = {};
    c.has_details[i] = (kind & 0x80) != 0;
    end_max = std::max(end_max, r.end);
  }
  if (p != end) return damaged("holds bytes past its events");
  if (!c.rows.empty() && (c.rows.front().start != chunk.first_start ||
                          c.rows.back().start != chunk.last_start || end_max != chunk.end_max)) {
    return damaged("does not decode to the times its row gives");
  }
  c.at = 0;
  return true;
}

bool ChunkMerge::settle(Cursor& c) {
  for (;;) {
    while (c.at < c.rows.size() && c.rows[c.at].start < from_)
      ++c.at;
    if (c.at < c.rows.size()) return c.rows[c.at].start < to_;
    if (c.next_chunk >= c.chunks->size()) return false;
    const Chunk& chunk = (*c.chunks)[c.next_chunk++];
    if (chunk.first_start >= to_) {
      c.next_chunk = c.chunks->size();
      c.rows.clear();
      return false;
    }
    if (!decode(c, chunk)) return false;
  }
}

bool ChunkMerge::next(ScanRow& row) {
  if (!status_ || heap_.empty()) return false;
  const int index = heap_.top();
  heap_.pop();
  Cursor& c = cursors_[static_cast<std::size_t>(index)];
  row = c.rows[c.at];
  if (c.has_details[c.at] &&
      (columns_ == ScanColumns::full ||
       (columns_ == ScanColumns::transfers &&
        (row.category == Category::communication || row.category == Category::memory)))) {
    if (!details_) {
      auto stmt = db_.prepare(
          "SELECT bytes, flops, collective, dtype, count, peer, group_size FROM event_details "
          "WHERE event_id = ?",
          true);
      if (!stmt) {
        status_ = stmt.error();
        return false;
      }
      details_ = std::move(stmt).value();
    }
    details_.reset();
    details_.bind(1, row.id);
    if (details_.step() == SQLITE_ROW) {
      row.details = {details_.int64_at(0),
                     details_.double_at(1),
                     static_cast<Collective>(details_.int_at(2)),
                     static_cast<DataType>(details_.int_at(3)),
                     details_.int64_at(4),
                     details_.int_at(5),
                     details_.int_at(6)};
    }
  }
  ++c.at;
  if (settle(c)) heap_.push(index);
  return status_.ok();
}

// ---------------------------------------------------------------------------
// Finalize: lane statistics and level-of-detail tables.

namespace {

struct LodRow {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t count = 0;
  std::int64_t event_id = 0;  // the event, when count == 1
  std::uint32_t name = 0;
  EventKind kind = EventKind::kernel;
  Category category = Category::compute;
  std::int32_t depth = 0;
};

struct Tile {
  bool open = false;
  std::int64_t index = 0;
  std::int64_t longest = -1;  // duration of the event that names the tile
  LodRow row;
};

struct LaneStats {
  std::int64_t count = 0;
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t max_duration = 0;
  std::int32_t max_depth = 0;
  int finest = -1;
  int coarsest = -1;
};

// Builds levels [lo, hi] in one pass over a lane in time order. Counting
// (no sink): only counts each level's rows, and gives up on a level past
// `cap` rows. Emitting: hands every row of every level to the sink as soon
// as it is complete, holding nothing but one open tile per level and depth.
class LodBuilder {
 public:
  using Sink = std::function<Status(int level, const LodRow&)>;

  LodBuilder(int lo, int hi, std::int64_t cap, Sink sink)
      : lo_(lo), cap_(cap), sink_(std::move(sink)) {
    levels_.resize(static_cast<std::size_t>(hi - lo + 1));
  }

  static int top_level(std::int64_t span) {
    int top = 0;
    while (top < kLodMaxLevel && lod_width(top) < span)
      ++top;
    return top;
  }

  void add(const ScanRow& e, std::int32_t depth) {
    const std::int64_t duration = e.end - e.start;
    for (std::size_t l = lowest_alive_; l < levels_.size() && status_; ++l) {
      Level& level = levels_[l];
      if (!level.alive) continue;
      const int shift = kLodBaseShift + lo_ + static_cast<int>(l);
      if (duration >= (std::int64_t{2} << shift)) {
        emit(l, {e.start, e.end, 1, e.id, e.name, e.kind, e.category, depth});
      } else {
        if (level.tiles.size() <= static_cast<std::size_t>(depth)) level.tiles.resize(depth + 1);
        Tile& tile = level.tiles[depth];
        const std::int64_t index = e.start >> shift;
        if (tile.open && tile.index == index) {
          // The event joins its tile at every coarser level too: the events
          // since this tile opened all started inside it, so the coarser
          // tiles holding it are still open. Counting, that adds no row;
          // writing, those tiles take the event without a lookup.
          join(tile, e, duration);
          if (!sink_) return;
          for (std::size_t m = l + 1; m < levels_.size(); ++m) {
            if (levels_[m].alive)
              join(levels_[m].tiles[static_cast<std::size_t>(depth)], e, duration);
          }
          return;
        } else {
          if (tile.open) {
            const LodRow done = tile.row;
            emit(l, done);  // may give the level up, freeing its tiles
            if (!level.alive) continue;
          }
          tile.open = true;
          tile.index = index;
          tile.longest = duration;
          tile.row = {e.start, e.end, 1, e.id, e.name, e.kind, e.category, depth};
        }
      }
    }
  }

  // Emits the open tiles. Counting: returns the levels to keep — every level
  // from the finest one whose coarser levels all stayed within the cap.
  std::pair<int, int> finish() {
    for (std::size_t l = 0; l < levels_.size(); ++l) {
      Level& level = levels_[l];
      // An emit may give the level up and free its tiles: checked each time.
      for (std::size_t depth = 0; level.alive && depth < level.tiles.size(); ++depth) {
        Tile& tile = level.tiles[depth];
        if (!tile.open) continue;
        tile.open = false;
        const LodRow row = tile.row;
        emit(l, row);
      }
    }
    int finest = static_cast<int>(levels_.size());
    while (finest > 0 && levels_[finest - 1].alive)
      --finest;
    if (finest == static_cast<int>(levels_.size())) return {-1, -1};
    return {lo_ + finest, lo_ + static_cast<int>(levels_.size()) - 1};
  }

  const Status& status() const { return status_; }

 private:
  static void join(Tile& tile, const ScanRow& e, std::int64_t duration) {
    tile.row.end = std::max(tile.row.end, e.end);
    tile.row.count += 1;
    tile.row.event_id = 0;
    if (duration > tile.longest) {
      tile.longest = duration;
      tile.row.name = e.name;
      tile.row.kind = e.kind;
      tile.row.category = e.category;
    }
  }

  struct Level {
    bool alive = true;
    std::int64_t rows = 0;
    std::vector<Tile> tiles;  // one per depth
  };

  void emit(std::size_t l, const LodRow& row) {
    Level& level = levels_[l];
    ++level.rows;
    if (sink_) {
      if (Status s = sink_(lo_ + static_cast<int>(l), row); !s) status_ = s;
      return;
    }
    if (level.rows > cap_) {
      level.alive = false;
      std::vector<Tile>().swap(level.tiles);
      while (lowest_alive_ < levels_.size() && !levels_[lowest_alive_].alive)
        ++lowest_alive_;
    }
  }

  int lo_;
  std::int64_t cap_;
  Sink sink_;
  std::vector<Level> levels_;
  std::size_t lowest_alive_ = 0;
  Status status_;
};

// The level-of-detail rows wait here and go in by thousands: one statement
// per row took as long as the rest of finalize.
constexpr int kLodColumns = 11;
constexpr std::size_t kLodRowsPerInsert = 16384;

struct FinalizeStatements {
  sql::Statement insert_lod, insert_stats, insert_chunk;
  sql::IntRows* lod_rows = nullptr;
  std::vector<std::int64_t> lod_waiting;  // kLodColumns per row
  // Per lane, the sorted ids of its events that have an event_details row.
  std::map<std::uint32_t, std::vector<std::int64_t>> with_details;
};

Status insert_lod_rows(sql::Database& db, FinalizeStatements& q) {
  if (q.lod_waiting.empty()) return {};
  q.lod_rows->set(q.lod_waiting.data(), q.lod_waiting.size() / kLodColumns);
  q.insert_lod.reset();
  const int rc = q.insert_lod.step();
  q.lod_rows->set(nullptr, 0);
  q.lod_waiting.clear();
  if (rc != SQLITE_DONE) return db.error("cannot write level-of-detail rows", rc);
  return {};
}

Status finalize_lane(sql::Database& db, std::uint32_t lane, bool chunked, FinalizeStatements& q,
                     std::int64_t& seq) {
  auto segments = load_segments(db, {lane});
  if (!segments) return segments.error();
  LaneStats stats;
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  for (const Segment& s : *segments) {
    stats.count += s.last_id - s.first_id + 1;
    first = std::min(first, s.start_min);
    last = std::max(last, s.end_max);
    stats.max_duration = std::max(stats.max_duration, s.duration_max);
  }
  if (stats.count > 0) {
    stats.first = first;
    stats.last = last;
  }

  // Pass 1 counts the rows of every level (no rows kept); pass 2, over the
  // chunks, writes the levels worth keeping.
  std::optional<LodBuilder> lod;
  const int top = LodBuilder::top_level(stats.last - stats.first);
  if (stats.count >= kLodMinEvents) lod.emplace(0, top, stats.count / kLodRowsDivisor, nullptr);

  // The lane's events in time order: from the chunks the writer already
  // wrote, or from the rows (then its chunks are written here).
  constexpr std::int64_t kAll = std::numeric_limits<std::int64_t>::max();
  std::vector<Chunk> chunks;
  std::unique_ptr<EventScan> scan;
  if (chunked) {
    auto loaded = load_chunks(db, lane);
    if (!loaded) return loaded.error();
    chunks = std::move(loaded).value();
    scan = std::make_unique<ChunkMerge>(db, std::vector<const std::vector<Chunk>*>{&chunks}, -kAll,
                                        kAll);
  } else {
    auto erase = db.prepare("DELETE FROM chunks WHERE id >= ? AND id < ?");
    if (!erase) return erase.error();
    const std::int64_t base = static_cast<std::int64_t>(lane) << 32;
    erase->bind(1, base).bind(2, base + (std::int64_t{1} << 32));
    if (const int rc = erase->step(); rc != SQLITE_DONE)
      return db.error("cannot rebuild event chunks", rc);
    scan = std::make_unique<SegmentMerge>(db, *segments, -kAll, kAll);
  }
  const std::vector<std::int64_t>& with_details = q.with_details[lane];

  std::vector<std::int64_t> open_ends;
  ChunkEncoder chunk;
  std::int64_t chunk_seq = 0;
  ScanRow row;
  while (scan->next(row)) {
    while (!open_ends.empty() && open_ends.back() <= row.start)
      open_ends.pop_back();
    const auto depth = static_cast<std::int32_t>(open_ends.size());
    open_ends.push_back(row.end);
    stats.max_depth = std::max(stats.max_depth, depth);
    if (lod) lod->add(row, depth);
    if (!chunked) {
      chunk.add(row, std::binary_search(with_details.begin(), with_details.end(), row.id));
      if (chunk.full()) {
        if (Status s = chunk.write(db, q.insert_chunk, lane, chunk_seq++); !s) return s;
      }
    }
  }
  if (!scan->status()) return scan->status();
  if (!chunk.empty()) {
    if (Status s = chunk.write(db, q.insert_chunk, lane, chunk_seq++); !s) return s;
  }

  if (lod) {
    std::tie(stats.finest, stats.coarsest) = lod->finish();
    if (stats.finest >= 0) {
      auto written = load_chunks(db, lane);
      if (!written) return written.error();
      ChunkMerge again(db, std::vector<const std::vector<Chunk>*>{&*written}, -kAll, kAll);
      LodBuilder write(stats.finest, stats.coarsest, 0, [&](int level, const LodRow& r) -> Status {
        const std::int64_t values[kLodColumns] = {lane,
                                                  level,
                                                  r.depth,
                                                  r.start,
                                                  ++seq,
                                                  r.end,
                                                  r.count,
                                                  r.name,
                                                  static_cast<std::int64_t>(r.kind),
                                                  static_cast<std::int64_t>(r.category),
                                                  r.event_id};
        q.lod_waiting.insert(q.lod_waiting.end(), values, values + kLodColumns);
        if (q.lod_waiting.size() < kLodRowsPerInsert * kLodColumns) return {};
        return insert_lod_rows(db, q);
      });
      open_ends.clear();
      while (again.next(row) && write.status()) {
        while (!open_ends.empty() && open_ends.back() <= row.start)
          open_ends.pop_back();
        const auto depth = static_cast<std::int32_t>(open_ends.size());
        open_ends.push_back(row.end);
        write.add(row, depth);
      }
      if (!again.status()) return again.status();
      write.finish();
      if (!write.status()) return write.status();
      if (Status s = insert_lod_rows(db, q); !s) return s;
    }
  }

  q.insert_stats.reset();
  q.insert_stats.bind(1, lane)
      .bind(2, stats.count)
      .bind(3, stats.first)
      .bind(4, stats.last)
      .bind(5, stats.max_duration)
      .bind(6, stats.max_depth)
      .bind(7, stats.finest)
      .bind(8, stats.coarsest);
  if (const int rc = q.insert_stats.step(); rc != SQLITE_DONE)
    return db.error("cannot write lane statistics", rc);
  return {};
}

}  // namespace

void leave_wal(sql::Database& db) { (void)db.exec("PRAGMA journal_mode = DELETE"); }

Status finalize(sql::Database& db, std::string_view status_if_unclosed,
                const std::set<std::uint32_t>& chunked) {
  sql::Transaction tx(db, true);
  if (!tx.begin_status()) return tx.begin_status();
  if (auto s = db.exec("DELETE FROM lod; DELETE FROM lane_stats;"); !s) return s;

  std::vector<std::uint32_t> lanes;
  {
    auto stmt = db.prepare("SELECT id FROM lanes ORDER BY id");
    if (!stmt) return stmt.error();
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
      lanes.push_back(static_cast<std::uint32_t>(stmt->int64_at(0)));
    if (rc != SQLITE_DONE) return db.error("cannot read lanes", rc);
  }
  FinalizeStatements q;
  q.lod_rows = sql::IntRows::attach(db, "cs_lod_rows", kLodColumns);
  if (!q.lod_rows) return db.error("cannot register the level-of-detail rows");
  const std::pair<sql::Statement*, const char*> statements[] = {
      {&q.insert_lod,
       "INSERT INTO lod(lane, level, depth, start_ns, seq, end_ns, count, name, kind, category, "
       "event_id) SELECT * FROM cs_lod_rows"},
      {&q.insert_stats,
       "INSERT INTO lane_stats(lane, event_count, first_ns, last_ns, max_duration_ns, max_depth, "
       "lod_finest_level, lod_coarsest_level) VALUES(?,?,?,?,?,?,?,?)"},
      {&q.insert_chunk, kInsertChunkSql},
  };
  for (const auto& [stmt, text] : statements) {
    auto prepared = db.prepare(text, true);
    if (!prepared) return prepared.error();
    *stmt = std::move(prepared).value();
  }
  {
    // CROSS JOIN keeps event_details (few rows) as the outer loop.
    auto details = db.prepare(
        "SELECT e.lane, d.event_id FROM event_details d CROSS JOIN events e "
        "ON e.id = d.event_id");
    if (!details) return details.error();
    int rc;
    while ((rc = details->step()) == SQLITE_ROW) {
      q.with_details[static_cast<std::uint32_t>(details->int64_at(0))].push_back(
          details->int64_at(1));
    }
    if (rc != SQLITE_DONE) return db.error("cannot read event details", rc);
    for (auto& [lane, ids] : q.with_details)
      std::sort(ids.begin(), ids.end());
  }
  std::int64_t seq = 0;
  for (std::uint32_t lane : lanes) {
    if (auto s = finalize_lane(db, lane, chunked.count(lane) > 0, q, seq); !s) return s;
  }
  if (read_meta(db, "status") == "writing" || read_meta(db, "status").empty()) {
    if (auto s = write_meta(db, "status", status_if_unclosed); !s) return s;
  }
  if (auto s = write_meta(db, "finalized", "1"); !s) return s;
  return tx.commit();
}

}  // namespace store

std::string upgrade_note(const std::string& path, const StoreState& state) {
  switch (state.upgraded) {
    case StoreState::Upgrade::in_place:
      return path + " was of trace schema version 1: upgraded in place to version " +
             std::to_string(state.schema_version);
    case StoreState::Upgrade::in_a_copy:
      return path +
             " is of trace schema version 1 and cannot be written here: read through a copy "
             "upgraded in the temporary folder (the file is unchanged)";
    case StoreState::Upgrade::none:
      break;
  }
  return {};
}

Result<StoreState> inspect_store(const std::string& path) {
  StoreState state;
  auto db = store::open_store(path, false, &state);
  if (!db) return db.error();
  return state;
}

Status verify_store(const std::string& path) {
  StoreState state;
  auto db = store::open_store(path, false, &state);
  if (!db) return db.error();
  {
    // SQLite stops counting at the limit; the first few problems are named.
    constexpr int kCounted = 100, kNamed = 3;
    auto check = db->prepare("PRAGMA quick_check(" + std::to_string(kCounted) + ")");
    if (!check) return Error{path + " is damaged: " + check.message()};
    int rc;
    int found = 0;
    std::string named;
    while ((rc = check->step()) == SQLITE_ROW) {
      const std::string line(check->text_at(0));
      if (line == "ok") continue;
      // A problem a row; the first row also names the database ("*** in
      // database main ***") on a line of its own.
      std::size_t from = 0;
      while (from < line.size()) {
        std::size_t end = line.find('\n', from);
        if (end == std::string::npos) end = line.size();
        const std::string problem = line.substr(from, end - from);
        from = end + 1;
        if (problem.empty() || problem.rfind("*** in database", 0) == 0) continue;
        if (found++ < kNamed) named += (named.empty() ? "" : "; ") + problem;
      }
    }
    // The check itself may stop at damage it cannot step over: what it named
    // before goes with the reason.
    if (rc != SQLITE_DONE) {
      return Error{path + " is damaged: " + sqlite3_errmsg(db->get()) +
                   (found > 0 ? " (SQLite's check found first: " + named +
                                    (found > kNamed ? "; ..." : "") + ")"
                              : std::string())};
    }
    if (found > 0) {
      const std::string count = found >= kCounted ? std::to_string(kCounted) + " or more"
                                                  : std::to_string(found);
      return Error{path + " is damaged: SQLite's check finds " + count + " problem" +
                   (found == 1 ? "" : "s") + " (" + named + (found > kNamed ? "; ..." : "") +
                   "): what is read from it may be wrong or missing"};
    }
  }
  // Every name an event or a lane's counter carries is in the strings table
  // (a name past its end read as "", and nameless kernels merged into one).
  std::int64_t last_name = 0;
  {
    auto names = db->prepare("SELECT coalesce(max(id), 0) FROM strings");
    if (!names || names->step() != SQLITE_ROW) return Error{path + ": cannot read the names"};
    last_name = names->int64_at(0);
    // A finalized store's event names are checked as its chunks decode
    // below; a full scan of the events table (no index on names) would
    // repeat it.
    std::vector<const char*> queries = {"SELECT coalesce(max(name), 0) FROM counters"};
    if (!state.finalized) queries.push_back("SELECT coalesce(max(name), 0) FROM events");
    for (const char* query : queries) {
      auto used = db->prepare(query);
      if (!used || used->step() != SQLITE_ROW) return Error{path + ": cannot read the names used"};
      if (used->int64_at(0) > last_name) {
        return Error{path + " is damaged: its events and counters use name ids up to " +
                     std::to_string(used->int64_at(0)) + ", but the strings table ends at " +
                     std::to_string(last_name)};
      }
    }
    auto steps = db->prepare("SELECT rank, step FROM steps WHERE end_ns < start_ns LIMIT 1");
    if (!steps) return steps.error();
    if (steps->step() == SQLITE_ROW) {
      return Error{path + " is damaged: step " + std::to_string(steps->int64_at(1)) + " of rank " +
                   std::to_string(steps->int64_at(0)) + " ends before it starts"};
    }
  }
  // Events of a lane the lanes table lacks (its row deleted) are read by no
  // analysis: every figure would leave them out without a word.
  {
    auto orphan = db->prepare(
        state.finalized
            ? "SELECT lane FROM chunks WHERE lane NOT IN (SELECT id FROM lanes) UNION ALL "
              "SELECT lane FROM segments WHERE lane NOT IN (SELECT id FROM lanes) LIMIT 1"
            : "SELECT lane FROM events WHERE lane NOT IN (SELECT id FROM lanes) LIMIT 1");
    if (!orphan) return orphan.error();
    if (const int rc = orphan->step(); rc == SQLITE_ROW) {
      return Error{path + " is damaged: it holds events of lane " +
                   std::to_string(orphan->int64_at(0)) + ", which its lanes table lacks"};
    } else if (rc != SQLITE_DONE) {
      return db->error("cannot read the lanes of its events", rc);
    }
  }
  // Each event row as a writer writes it: readers of the rows (event_view,
  // exports, an upgrade) take them as they stand, and the chunks below are
  // checked against their count only. One pass over the table; the first few
  // rows are named.
  {
    const std::string sql =
        "SELECT id, wrong FROM (SELECT id, CASE"
        " WHEN typeof(kind) <> 'integer' OR kind NOT BETWEEN 0 AND " +
        std::to_string(static_cast<int>(EventKind::overhead)) +
        " THEN 'its kind ' || quote(kind) || ' is no event kind'"
        " WHEN typeof(category) <> 'integer' OR category NOT BETWEEN 0 AND " +
        std::to_string(static_cast<int>(Category::other)) +
        " THEN 'its category ' || quote(category) || ' is no event category'"
        " WHEN typeof(start_ns) <> 'integer' OR typeof(end_ns) <> 'integer'"
        " THEN 'its times (' || quote(start_ns) || ', ' || quote(end_ns) ||"
        " ') are not whole nanoseconds'"
        " WHEN end_ns < start_ns THEN 'it ends (' || end_ns || ') before it starts (' ||"
        " start_ns || ')'"
        " WHEN lane NOT IN (SELECT id FROM lanes)"
        " THEN 'its lane ' || quote(lane) || ' is not in the lanes table'"
        " END AS wrong FROM events) WHERE wrong IS NOT NULL ORDER BY id";
    auto bad = db->prepare(sql);
    if (!bad) return bad.error();
    constexpr std::int64_t kNamed = 5;
    std::int64_t found = 0;
    std::string named;
    int rc;
    while ((rc = bad->step()) == SQLITE_ROW) {
      if (found++ < kNamed) {
        named += std::string(named.empty() ? "" : "; ") + "row " +
                 std::to_string(bad->int64_at(0)) + ": " + std::string(bad->text_at(1));
      }
    }
    if (rc != SQLITE_DONE) return db->error("cannot read its events table", rc);
    if (found > 0) {
      return Error{
          path + " is damaged: " + std::to_string(found) + " row" + (found == 1 ? "" : "s") +
          " of its events table " + (found == 1 ? "is not an event" : "are not events") +
          " a writer writes (" + named +
          (found > kNamed ? "; and " + std::to_string(found - kNamed) + " more" : "") + ")"};
    }
  }
  if (!state.finalized) return {};
  // Each lane's chunks hold exactly its events, in time order; all of them
  // the rows of the events table (a merge copies the rows).
  std::int64_t in_chunks = 0;
  auto lanes = db->prepare("SELECT id FROM lanes");
  if (!lanes) return lanes.error();
  while (lanes->step() == SQLITE_ROW) {
    const auto lane = static_cast<std::uint32_t>(lanes->int64_at(0));
    auto segments = store::load_segments(*db, {lane});
    if (!segments) return segments.error();
    std::int64_t rows = 0;
    for (const store::Segment& seg : *segments)
      rows += seg.last_id - seg.first_id + 1;
    auto chunks = store::load_chunks(*db, lane);
    if (!chunks) return chunks.error();
    store::ChunkMerge scan(*db, {&*chunks}, std::numeric_limits<std::int64_t>::min(),
                           std::numeric_limits<std::int64_t>::max());
    store::ScanRow row;
    std::int64_t seen = 0, previous = std::numeric_limits<std::int64_t>::min();
    while (scan.next(row)) {
      if (row.name > last_name) {
        return Error{path + " is damaged: its events and counters use name ids up to " +
                     std::to_string(row.name) + " (lane " + std::to_string(lane) +
                     "), but the strings table ends at " + std::to_string(last_name)};
      }
      if (row.start < previous || row.end < row.start || row.id < 1 || row.id > state.events) {
        return Error{path + " is damaged: the event chunks of lane " + std::to_string(lane) +
                     " do not decode to its events"};
      }
      previous = row.start;
      ++seen;
    }
    if (!scan.status()) return scan.status();
    if (seen != rows) {
      return Error{path + " is damaged: lane " + std::to_string(lane) + " has " +
                   std::to_string(rows) + " events but its chunks hold " + std::to_string(seen)};
    }
    in_chunks += seen;
  }
  auto rows = db->prepare("SELECT count(*) FROM events");
  if (!rows) return rows.error();
  if (const int rc = rows->step(); rc != SQLITE_ROW)
    return db->error("cannot count the events", rc);
  if (rows->int64_at(0) != in_chunks) {
    return Error{path + " is damaged: its lanes' chunks hold " + std::to_string(in_chunks) +
                 " events but its events table " + std::to_string(rows->int64_at(0))};
  }
  return {};
}

bool is_unmade_store(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return false;
  if (size == 0) return true;
  // Read with its log: a schema committed there makes it a store.
  auto db = sql::Database::open(path, SQLITE_OPEN_READONLY);
  if (!db) return false;
  auto stmt = db->prepare("SELECT count(*) FROM sqlite_master");
  return stmt && stmt->step() == SQLITE_ROW && stmt->int64_at(0) == 0;
}

Status finalize_store(const std::string& path, bool writers_ended) {
  StoreState state;
  auto db = store::open_store(path, true, &state);
  if (!db) return db.error();
  if (state.finalized) return {};
  if (state.writer_alive) {
    return Error{path + ": still being written by process " + state.writer +
                 "; it is finalized when that writer closes it"};
  }
  if (state.writer_elsewhere && !writers_ended) {
    return Error{path + ": being written by process " + state.writer +
                 " of another host, or left so when it died: finalize it there, or once its "
                 "run has ended"};
  }
  if (auto s = store::finalize(*db, "interrupted"); !s) return s;
  if (auto s = db->exec("PRAGMA wal_checkpoint(TRUNCATE)"); !s) return s;
  store::leave_wal(*db);
  return {};
}

}  // namespace cs::trace
