#pragma once
// Internal to core: a thin RAII layer over sqlite3 for the trace store and the
// importers. It includes sqlite3.h, so only core's .cpp files include it;
// public headers stay free of SQLite types.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <sqlite3.h>

#include "core/result.h"

namespace cs::trace::sql {

class Statement {
 public:
  Statement() = default;
  // `damage`: where the first sign of a damaged file is kept (its database's).
  Statement(sqlite3_stmt* stmt, std::string* damage) : stmt_(stmt), damage_(damage) {}
  Statement(Statement&& other) noexcept
      : stmt_(std::exchange(other.stmt_, nullptr)),
        damage_(std::exchange(other.damage_, nullptr)) {}
  Statement& operator=(Statement&& other) noexcept {
    if (this != &other) {
      sqlite3_finalize(stmt_);
      stmt_ = std::exchange(other.stmt_, nullptr);
      damage_ = std::exchange(other.damage_, nullptr);
    }
    return *this;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  explicit operator bool() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() const { return stmt_; }

  // Parameters count from 1, as in sqlite3_bind_*.
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, int v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, std::uint32_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // The text is copied: the view may die before the statement runs.
  Statement& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code. A loop that reads rows while
  // step() gives SQLITE_ROW ends early on a damaged page as if the rows had
  // ended: the damage is kept for Database::damage(), which readers check.
  int step() {
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && damage_ && damage_->empty() && is_damage(rc))
      *damage_ = sqlite3_errmsg(sqlite3_db_handle(stmt_));
    return rc;
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // Columns count from 0.
  std::int64_t int64_at(int c) const { return sqlite3_column_int64(stmt_, c); }
  int int_at(int c) const { return sqlite3_column_int(stmt_, c); }
  double double_at(int c) const { return sqlite3_column_double(stmt_, c); }
  bool is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  // A whole number, stored as an integer or as a real (a table rebuilt by
  // other tools may hold 1.5e9 for 1500000000); not text or NULL, which
  // int64_at reads as 0, nor a fraction it would cut.
  bool is_whole_number(int c) const {
    const int type = sqlite3_column_type(stmt_, c);
    if (type == SQLITE_INTEGER) return true;
    if (type != SQLITE_FLOAT) return false;
    const double v = sqlite3_column_double(stmt_, c);
    return v > -9.2e18 && v < 9.2e18 && v == static_cast<double>(static_cast<std::int64_t>(v));
  }
  std::string_view text_at(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
    if (!p) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c))};
  }
  int column_count() const { return sqlite3_column_count(stmt_); }

 private:
  static bool is_damage(int rc) {
    const int primary = rc & 0xff;
    return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR;
  }
  sqlite3_stmt* stmt_ = nullptr;
  std::string* damage_ = nullptr;
};

class Database {
 public:
  Database() = default;
  Database(Database&& other) noexcept
      : db_(std::exchange(other.db_, nullptr)),
        path_(std::move(other.path_)),
        damage_(std::move(other.damage_)) {}
  Database& operator=(Database&& other) noexcept {
    if (this != &other) {
      close();
      db_ = std::exchange(other.db_, nullptr);
      path_ = std::move(other.path_);
      damage_ = std::move(other.damage_);
    }
    return *this;
  }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database() { close(); }

  // flags: SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE [| SQLITE_OPEN_CREATE].
  // Each connection is used by one thread at a time (SQLITE_OPEN_NOMUTEX).
  static Result<Database> open(const std::string& path, int flags);

  void close();
  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  // The name messages give (a copy in memory names the file it came from).
  void name_as(std::string path) { path_ = std::move(path); }
  explicit operator bool() const { return db_ != nullptr; }

  // "<path>: <context>: <sqlite's message>"
  Error error(std::string_view context) const;
  Error error(std::string_view context, int code) const;

  Status exec(std::string_view sql);
  Result<Statement> prepare(std::string_view sql, bool persistent = false);
  bool has_table(std::string_view name);
  std::int64_t changes() const { return sqlite3_changes64(db_); }

  // SQLite's words for the first damaged page or failed read any statement
  // of this connection met ("database disk image is malformed"); empty if none.
  const std::string& damage() const {
    static const std::string none;
    return damage_ ? *damage_ : none;
  }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  // On the heap: statements keep its address, and the database may move.
  std::unique_ptr<std::string> damage_ = std::make_unique<std::string>();
};

// Commits on commit(), rolls back when destroyed without it.
class Transaction {
 public:
  explicit Transaction(Database& db, bool immediate = false);
  ~Transaction();
  Status begin_status() const { return begin_; }
  Status commit();

 private:
  Database& db_;
  Status begin_;
  bool open_ = false;
};

// A table SQLite reads from memory, rows of whole numbers: `INSERT INTO t
// SELECT * FROM <name>` writes a whole batch in one statement, not one
// statement per row, which is what makes millions of rows a second possible.
// Eponymous (read with no CREATE) and owned by its connection.
class IntRows {
 public:
  // Registers `name`, of `columns` columns c0, c1, ..., on db; null when
  // SQLite refuses. Registering the same name again replaces the table.
  static IntRows* attach(Database& db, const char* name, int columns);

  // What the next statement that reads the table sees: `count` rows of
  // `columns` values each, row after row. They must outlive the statement.
  void set(const std::int64_t* values, std::size_t count) {
    values_ = values;
    count_ = count;
  }

  int columns() const { return columns_; }
  std::int64_t at(std::size_t row, int column) const {
    return values_[row * static_cast<std::size_t>(columns_) + static_cast<std::size_t>(column)];
  }
  std::size_t count() const { return count_; }

 private:
  explicit IntRows(int columns) : columns_(columns) {}
  int columns_;
  const std::int64_t* values_ = nullptr;
  std::size_t count_ = 0;
};

// An error naming a file cut short (a copy that stopped half way), from
// the page count SQLite's header gives; nothing for a whole file, one that
// is not SQLite, or one whose write-ahead log holds pages.
Status check_not_cut_short(const std::string& path);

}  // namespace cs::trace::sql
