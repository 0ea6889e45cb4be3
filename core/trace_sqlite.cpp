#include "core/trace_sqlite.h"

#include <cstring>

namespace cs::trace::sql {

Result<Database> Database::open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Database db;
  db.db_ = raw;
  db.path_ = path;
  if (rc != SQLITE_OK) {
    Error e{path + ": cannot open: " +
            (raw ? std::string(sqlite3_errmsg(raw)) : std::string(sqlite3_errstr(rc)))};
    return e;
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
  std::string message = db_ ? sqlite3_errmsg(db_) : "";
  if (message.empty() || message == "not an error") message = sqlite3_errstr(code);
  // For a failed read or write, what the operating system said ("No space
  // left on device", "File too large").
  const int primary = code & 0xff;
  if (db_ && (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN)) {
    if (const int os = sqlite3_system_errno(db_); os != 0)
      message += std::string(" (") + std::strerror(os) + ")";
  }
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
  return Statement(stmt);
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

}  // namespace cs::trace::sql
