#include "core/trace_sqlite.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace cs::trace::sql {

Result<Database> Database::open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Database db;
  db.db_ = raw;
  db.path_ = path;
  if (rc != SQLITE_OK) {
    std::string why = raw ? std::string(sqlite3_errmsg(raw)) : std::string(sqlite3_errstr(rc));
    // What the system said ("Permission denied"): SQLite's own words are
    // only "unable to open database file".
    if (raw && sqlite3_system_errno(raw) != 0)
      why += std::string(" (") + std::strerror(sqlite3_system_errno(raw)) + ")";
    return Error{path + ": cannot open: " + why};
  }
  sqlite3_extended_result_codes(raw, 1);
  // A reader waits a little for a writer's checkpoint instead of failing at once.
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

void Database::close() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

Error Database::error(std::string_view context) const {
  if (!db_) return {path_ + ": " + std::string(context) + ": no database"};
  return error(context, sqlite3_extended_errcode(db_));
}

Error Database::error(std::string_view context, int code) const {
  // The connection's message is of its latest call, which may be another
  // statement's (a read that failed, then one that ended: "no more rows").
  std::string message = db_ && sqlite3_extended_errcode(db_) == code ? sqlite3_errmsg(db_) : "";
  if (message.empty() || message == "not an error") message = sqlite3_errstr(code);
  // For a failed read or write, what the operating system said ("No space
  // left on device", "File too large").
  const int primary = code & 0xff;
  if (db_ && (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN)) {
    if (const int os = sqlite3_system_errno(db_); os != 0)
      message += std::string(" (") + std::strerror(os) + ")";
  }
  // After the busy timeout: who, and what to do ("database is locked" alone
  // read as damage).
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    message += ": another process holds it; try again once that process is done with it";
  return {path_ + ": " + std::string(context) + ": " + message};
}

Status Database::exec(std::string_view sql) {
  const std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  std::string what = message ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  const int primary = rc & 0xff;
  if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN) {
    if (const int os = sqlite3_system_errno(db_); os != 0)
      what += std::string(" (") + std::strerror(os) + ")";
  }
  return Error{path_ + ": " + what};
}

Result<Statement> Database::prepare(std::string_view sql, bool persistent) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    persistent ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return error("cannot prepare query", rc);
  }
  return Statement(stmt, damage_.get());
}

bool Database::has_table(std::string_view name) {
  auto stmt = prepare("SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = ?");
  if (!stmt) return false;
  stmt->bind(1, name);
  return stmt->step() == SQLITE_ROW;
}

Transaction::Transaction(Database& db, bool immediate) : db_(db) {
  begin_ = db_.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN");
  open_ = begin_.ok();
}

Transaction::~Transaction() {
  if (open_) (void)db_.exec("ROLLBACK");
}

Status Transaction::commit() {
  if (!open_) return begin_.ok() ? Status{} : begin_;
  Status s = db_.exec("COMMIT");
  if (s) open_ = false;
  return s;
}

// A file cut short (a copy that stopped half way): SQLite's header says how
// many pages the database has, and SQLite itself would only call the file
// "malformed", or read it as far as it goes. Read before SQLite opens the
// file, from the header itself (https://www.sqlite.org/fileformat.html 1.3):
// the page count holds only where the change counter equals its
// version-valid-for number, and only when no write-ahead log holds pages.
namespace {

struct IntRowsTable {
  sqlite3_vtab base;
  const IntRows* rows;
};

struct IntRowsCursor {
  sqlite3_vtab_cursor base;
  const IntRows* rows;
  std::size_t row;
};

int int_rows_connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  const auto* rows = static_cast<const IntRows*>(aux);
  std::string schema = "CREATE TABLE x(";
  for (int c = 0; c < rows->columns(); ++c)
    schema += (c ? ", c" : "c") + std::to_string(c);
  schema += ")";
  if (const int rc = sqlite3_declare_vtab(db, schema.c_str()); rc != SQLITE_OK) return rc;
  auto* table = static_cast<IntRowsTable*>(sqlite3_malloc(sizeof(IntRowsTable)));
  if (!table) return SQLITE_NOMEM;
  std::memset(table, 0, sizeof(IntRowsTable));
  table->rows = rows;
  *out = &table->base;
  return SQLITE_OK;
}
int int_rows_disconnect(sqlite3_vtab* table) {
  sqlite3_free(table);
  return SQLITE_OK;
}
int int_rows_best_index(sqlite3_vtab*, sqlite3_index_info* info) {
  info->estimatedCost = 1e6;
  return SQLITE_OK;
}
int int_rows_open(sqlite3_vtab* table, sqlite3_vtab_cursor** out) {
  auto* cursor = static_cast<IntRowsCursor*>(sqlite3_malloc(sizeof(IntRowsCursor)));
  if (!cursor) return SQLITE_NOMEM;
  std::memset(cursor, 0, sizeof(IntRowsCursor));
  cursor->rows = reinterpret_cast<IntRowsTable*>(table)->rows;
  *out = &cursor->base;
  return SQLITE_OK;
}
int int_rows_close(sqlite3_vtab_cursor* cursor) {
  sqlite3_free(cursor);
  return SQLITE_OK;
}
int int_rows_filter(sqlite3_vtab_cursor* cursor, int, const char*, int, sqlite3_value**) {
  reinterpret_cast<IntRowsCursor*>(cursor)->row = 0;
  return SQLITE_OK;
}
int int_rows_next(sqlite3_vtab_cursor* cursor) {
  reinterpret_cast<IntRowsCursor*>(cursor)->row++;
  return SQLITE_OK;
}
int int_rows_eof(sqlite3_vtab_cursor* cursor) {
  const auto* c = reinterpret_cast<IntRowsCursor*>(cursor);
  return c->row >= c->rows->count();
}
int int_rows_column(sqlite3_vtab_cursor* cursor, sqlite3_context* ctx, int column) {
  const auto* c = reinterpret_cast<IntRowsCursor*>(cursor);
  if (column < 0 || column >= c->rows->columns())
    sqlite3_result_null(ctx);
  else
    sqlite3_result_int64(ctx, c->rows->at(c->row, column));
  return SQLITE_OK;
}
int int_rows_rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* rowid) {
  *rowid = static_cast<sqlite3_int64>(reinterpret_cast<IntRowsCursor*>(cursor)->row);
  return SQLITE_OK;
}

// No xCreate: eponymous only, read as `FROM name` with no CREATE.
const sqlite3_module kIntRowsModule = {0,
                                       nullptr,
                                       int_rows_connect,
                                       int_rows_best_index,
                                       int_rows_disconnect,
                                       nullptr,
                                       int_rows_open,
                                       int_rows_close,
                                       int_rows_filter,
                                       int_rows_next,
                                       int_rows_eof,
                                       int_rows_column,
                                       int_rows_rowid};

}  // namespace

IntRows* IntRows::attach(Database& db, const char* name, int columns) {
  auto* rows = new IntRows(columns);
  // SQLite owns it from here: it calls the destructor when the connection
  // closes, the name is registered again, or registering fails.
  const int rc = sqlite3_create_module_v2(db.get(), name, &kIntRowsModule, rows,
                                          [](void* p) { delete static_cast<IntRows*>(p); });
  return rc == SQLITE_OK ? rows : nullptr;
}

Status check_not_cut_short(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto wal_size = std::filesystem::file_size(path + "-wal", ec);
  if (!ec && wal_size > 0) return {};
  unsigned char header[100] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header), sizeof header);
  const auto got = static_cast<std::size_t>(in.gcount());
  static constexpr char kMagic[] = "SQLite format 3";  // with its NUL: 16 bytes
  if (got < sizeof kMagic || std::memcmp(header, kMagic, sizeof kMagic) != 0) return {};
  if (got < sizeof header) {
    return Error{path + " is damaged: the file is cut short (" + std::to_string(got) +
                 " bytes, less than an SQLite header)"};
  }
  const auto be32 = [&](int at) {
    return std::uint32_t{header[at]} << 24 | std::uint32_t{header[at + 1]} << 16 |
           std::uint32_t{header[at + 2]} << 8 | std::uint32_t{header[at + 3]};
  };
  const std::uint32_t page_size_field = std::uint32_t{header[16]} << 8 | header[17];
  const std::uintmax_t page_size = page_size_field == 1 ? 65536 : page_size_field;
  const std::uint32_t pages = be32(28);
  if (be32(24) != be32(92) || pages == 0) return {};
  const std::uintmax_t expected = page_size * pages;
  if (size < expected) {
    // More than the disk holds: no copy of it was ever that long, its header
    // is what is damaged ("cut short (294912 of 35184372072448 bytes)").
    const auto disk = std::filesystem::space(path, ec);
    if (!ec && expected > disk.capacity) {
      return Error{path + " is damaged: its SQLite header gives " + std::to_string(pages) +
                   " pages (" + std::to_string(expected) +
                   " bytes), more than its disk holds; the file has " + std::to_string(size)};
    }
    return Error{path + " is damaged: the file is cut short (" + std::to_string(size) + " of " +
                 std::to_string(expected) + " bytes)"};
  }
  return {};
}

}  // namespace cs::trace::sql
