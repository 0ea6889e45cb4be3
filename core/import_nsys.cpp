// Nsight Systems SQLite export → trace store.
//
// Every table and column is looked up by name, because exports of different
// Nsight Systems versions differ: the metadata table is EXPORT_META_DATA
// (2022 and before) or META_DATA_EXPORT, columns come and go, and a table
// may carry a version suffix (CUPTI_ACTIVITY_KIND_KERNEL_V2). A column the
// import cannot do without is reported by table and name; an optional one
// that is missing is read as absent.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <unordered_map>

#include "core/bounded_regex.h"
#include "core/file_exists.h"
#include "core/kernel_names.h"
#include "core/parse_count.h"
#include "core/step_names.h"
#include "core/trace_import.h"
#include "core/trace_import_internal.h"
#include "core/trace_sqlite.h"

namespace cs::trace {

namespace {

constexpr std::int64_t kNvtxPushPopRange = 59;
constexpr std::int64_t kNvtxStartEndRange = 60;
// The same ranges read from an .nvtxt file, which Nsight's nvtx_sum counts too.
constexpr std::int64_t kNvtxtPushPopRange = 70;
constexpr std::int64_t kNvtxtStartEndRange = 71;
constexpr std::int64_t kNvtxDomainCreate = 75;

struct Table {
  std::string name;
  std::set<std::string> columns;
};

class Export {
 public:
  Export(sql::Database db, std::string file) : db_(std::move(db)), file_(std::move(file)) {}

  sql::Database& db() { return db_; }
  const std::string& file() const { return file_; }
  std::string schema_version;
  std::string product_version;

  // The table named `base`, or its highest versioned variant (BASE_V3); a
  // view of that name reads as one (an export someone reshaped).
  Result<std::optional<Table>> table(const std::string& base) {
    auto stmt = db_.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')");
    if (!stmt) return stmt.error();
    const std::regex versioned(base + "_[Vv]?([0-9]+)");
    std::string best;
    int best_version = -1;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      const std::string name(stmt->text_at(0));
      std::smatch m;
      if (name == base && best_version < 0) {
        best = name;
        best_version = 0;
      } else if (bounded_regex_match(name, m, versioned)) {
        const std::optional<int> version = parse_count(m[1].str());
        if (version && *version > best_version) {
          best = name;
          best_version = *version;
        }
      }
    }
    if (rc != SQLITE_DONE) return unreadable("the list of tables", rc);
    if (best.empty()) return std::optional<Table>{};
    Table t{best, {}};
    auto info = db_.prepare("SELECT name FROM pragma_table_info(?)");
    if (!info) return info.error();
    info->bind(1, best);
    while ((rc = info->step()) == SQLITE_ROW)
      t.columns.emplace(info->text_at(0));
    if (rc != SQLITE_DONE) return unreadable(best, rc);
    return std::optional<Table>{std::move(t)};
  }

  // Calls row() for each row of `stmt`, a query of table `t`, until it
  // returns false. A read that fails part way (a damaged page) is an error
  // naming the file and the table: rows cut short would read as a valid
  // export (a session clock of 0, ranks from the file order).
  template <typename Row>
  Status each_row(sql::Statement& stmt, const Table& t, Row&& row) {
    int rc;
    while ((rc = stmt.step()) == SQLITE_ROW) {
      if (!row()) return {};
    }
    if (rc != SQLITE_DONE) return unreadable(t.name, rc);
    return {};
  }

  Error unreadable(const std::string& what, int rc) const {
    const int primary = rc & 0xff;
    if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB)
      return Error{file_ + " is damaged: cannot read " + what + " (" + sqlite3_errstr(rc) + ")"};
    return db_.error("cannot read " + what, rc);
  }

  // SELECT over named columns, in the order given: a required one must exist
  // (else an error naming the table and the column); an optional one reads as
  // NULL when absent. "a|b" takes the first of the names present.
  struct Column {
    std::string names;
    bool required = true;
  };
  Result<sql::Statement> select(const Table& t, const std::vector<Column>& columns,
                                const std::string& tail = "") {
    std::string sql = "SELECT ";
    bool first = true;
    for (const Column& c : columns) {
      std::string chosen;
      std::size_t start = 0;
      for (;;) {
        const std::size_t bar = c.names.find('|', start);
        const std::string option = c.names.substr(start, bar - start);
        if (t.columns.count(option)) {
          chosen = option;
          break;
        }
        if (bar == std::string::npos) break;
        start = bar + 1;
      }
      if (chosen.empty() && c.required) {
        std::string names = c.names;
        std::replace(names.begin(), names.end(), '|', '/');
        return Error{file_ + ": table " + t.name + " has no column '" + names +
                     "', which the import needs (Nsight Systems export schema " +
                     (schema_version.empty() ? "unknown" : schema_version) + ")"};
      }
      sql += first ? "" : ", ";
      sql += chosen.empty() ? "NULL" : "\"" + chosen + "\"";
      first = false;
    }
    sql += " FROM \"" + t.name + "\" " + tail;
    return db_.prepare(sql);
  }

 private:
  sql::Database db_;
  std::string file_;
};

// CUpti_ActivityMemcpyKind's kinds by our names (as the CUPTI tracer's);
// a kind past them (newer exports' unified-memory copies) by the label of
// the export's own ENUM_CUDA_MEMCPY_OPER, else by its number: one "Memcpy"
// row merged them with each other and with unknown copies.
std::string memcpy_name(std::int64_t kind, const std::map<std::int64_t, std::string>& labels) {
  static const char* const names[] = {"Memcpy",      "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
                                      "Memcpy AtoH", "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
                                      "Memcpy DtoD", "Memcpy HtoH", "Memcpy PtoP"};
  if (kind >= 0 && kind <= 10) return names[kind];
  auto label = labels.find(kind);
  return label != labels.end() && !label->second.empty()
             ? "Memcpy " + label->second
             : "Memcpy (kind " + std::to_string(kind) + ")";
}

std::int64_t pid_of(std::int64_t global_id) {
  return (global_id >> 24) & 0xFFFFFF;
}
std::int64_t tid_of(std::int64_t global_id) {
  return global_id & 0xFFFFFF;
}

Result<ImportReport> import_one_nsys(const std::string& file, const std::string& output,
                                     int first_rank, const ImportOptions& options) {
  if (Status there = check_file_exists(file); !there) return there.error();
  auto opened = sql::Database::open(file, SQLITE_OPEN_READONLY);
  if (!opened) return opened.error();
  Export x(std::move(opened).value(), file);
  ImportReport report;
  report.format = "nsys";
  std::error_code ec;
  report.bytes_read = static_cast<std::int64_t>(std::filesystem::file_size(file, ec));

  if (!x.db().has_table("StringIds")) {
    auto probe = x.db().prepare("SELECT count(*) FROM sqlite_master");
    if (!probe || probe->step() != SQLITE_ROW)
      return Error{file + " is not an Nsight Systems export: not an SQLite database"};
    return Error{file + " is not an Nsight Systems export: it has no StringIds table"};
  }

  // Export metadata: the table's name changed in 2023.
  for (const char* meta : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
    auto t = x.table(meta);
    if (!t) return t.error();
    if (!*t) continue;
    auto stmt = x.select(**t, {{"name"}, {"value"}});
    if (!stmt) return stmt.error();
    Status read = x.each_row(*stmt, **t, [&] {
      const std::string name(stmt->text_at(0));
      if (name == "EXPORT_SCHEMA_VERSION") x.schema_version = stmt->text_at(1);
      if (name == "EXPORT_PRODUCT_VERSION") x.product_version = stmt->text_at(1);
      return true;
    });
    if (!read) return read.error();
    break;
  }

  std::unordered_map<std::int64_t, std::string> strings;
  {
    auto t = x.table("StringIds");
    if (!t) return t.error();
    if (!*t) return Error{file + " is not an Nsight Systems export: it has no StringIds table"};
    auto stmt = x.select(**t, {{"id"}, {"value"}});
    if (!stmt) return stmt.error();
    Status read = x.each_row(*stmt, **t, [&] {
      strings[stmt->int64_at(0)] = stmt->text_at(1);
      return true;
    });
    if (!read) return read.error();
  }
  auto text_of = [&](std::int64_t id) -> std::string {
    auto it = strings.find(id);
    return it == strings.end() ? std::string() : it->second;
  };
  // A record's name by its StringIds reference; one the table lacks (a
  // damaged or edited export) is named by its id and counted, not left empty.
  std::int64_t names_missing = 0;
  auto name_of = [&](std::int64_t id) -> std::string {
    auto it = strings.find(id);
    if (it != strings.end()) return it->second;
    ++names_missing;
    return "(name " + std::to_string(id) + " not in StringIds)";
  };

  // Optional tables: one the export lacks is read as absent, as is one
  // without the columns read here (other versions' schemas) unless
  // `columns_needed`; one that is there is read to its end, or the import
  // fails (a damaged page read as the table's end gave a session clock of 0
  // and ranks from the file order, silently).
  auto read_optional = [&](const char* base, const std::vector<Export::Column>& columns,
                           const std::string& tail, bool columns_needed, auto&& row) -> Status {
    auto t = x.table(base);
    if (!t) return t.error();
    if (!*t) return {};
    auto stmt = x.select(**t, columns, tail);
    if (!stmt) return columns_needed ? Status(stmt.error()) : Status();
    return x.each_row(*stmt, **t, [&] { return row(*stmt); });
  };
  std::int64_t session_start = 0;
  Status read = read_optional("TARGET_INFO_SESSION_START_TIME", {{"utcEpochNs"}}, "", false,
                              [&](const sql::Statement& row) {
                                if (!row.is_null(0)) session_start = row.int64_at(0);
                                return false;
                              });
  if (!read) return read.error();
  std::string host;
  read = read_optional("TARGET_INFO_SYSTEM_ENV", {{"name"}, {"value"}}, "WHERE name = 'Hostname'",
                       false, [&](const sql::Statement& row) {
                         host = row.text_at(1);
                         return false;
                       });
  if (!read) return read.error();
  std::map<std::int64_t, std::string> gpu_names;
  read = read_optional("TARGET_INFO_GPU", {{"id"}, {"name", false}}, "", false,
                       [&](const sql::Statement& row) {
                         gpu_names[row.int64_at(0)] = row.text_at(1);
                         return true;
                       });
  if (!read) return read.error();
  std::map<std::int64_t, std::string> thread_names;  // by globalTid
  read = read_optional("ThreadNames", {{"nameId"}, {"globalTid"}}, "", true,
                       [&](const sql::Statement& row) {
                         thread_names[row.int64_at(1)] = text_of(row.int64_at(0));
                         return true;
                       });
  if (!read) return read.error();
  // Newer exports name their enums' values in ENUM_* tables.
  std::map<std::int64_t, std::string> copy_kind_labels;
  read = read_optional("ENUM_CUDA_MEMCPY_OPER", {{"id"}, {"label|name"}}, "", false,
                       [&](const sql::Statement& row) {
                         copy_kind_labels[row.int64_at(0)] = row.text_at(1);
                         return true;
                       });
  if (!read) return read.error();
  // The MPI rank of each thread that made MPI calls (nsys --trace=mpi).
  std::map<std::int64_t, std::int32_t> mpi_rank_of_pid;
  read = read_optional(
      "MPI_RANKS", {{"globalTid"}, {"rank"}}, "", false, [&](const sql::Statement& row) {
        const std::int64_t rank = row.int64_at(1);
        if (rank >= 0 && rank <= std::numeric_limits<std::int32_t>::max())
          mpi_rank_of_pid[pid_of(row.int64_at(0))] = static_cast<std::int32_t>(rank);
        return true;
      });
  if (!read) return read.error();
  std::map<std::int64_t, std::string> process_names;  // by pid
  read = read_optional("PROCESSES", {{"pid"}, {"name", false}}, "", false,
                       [&](const sql::Statement& row) {
                         process_names[row.int64_at(0)] = row.text_at(1);
                         return true;
                       });
  if (!read) return read.error();

  // Read every record first: ranks and lanes are known only once all are
  // seen. Lanes and names are held once each, records refer to them by
  // index (a record held its kernel's name: 2.5 M records took 1 GB).
  struct Record {
    EventKind kind;
    Category category;
    Collective collective = Collective::none;
    DataType dtype = DataType::none;
    std::uint32_t lane = 0;    // into lanes_seen
    std::uint32_t name = 0;    // into names_seen
    std::uint32_t launch = 0;  // kernels': 1 + its index in launches; 0: none
    std::int64_t start, end;
    std::int64_t pid;
    std::int64_t device = -1;  // GPU records only
    std::int64_t stream = -1;
    std::int64_t correlation = 0;
    std::int64_t bytes = 0;
    std::int32_t step = -1;
  };
  std::vector<Record> records;
  std::vector<KernelLaunch> launches;
  {
    // Held at once: reserved whole, not grown by doubling (twice the
    // records for a moment, copied).
    std::int64_t rows = 0;
    for (const char* table : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}) {
      auto t = x.table(table);
      if (!t) return t.error();
      if (!*t) continue;
      auto stmt = x.db().prepare("SELECT count(*) FROM \"" + (*t)->name + "\"");
      if (stmt && stmt->step() == SQLITE_ROW) rows += std::max<std::int64_t>(0, stmt->int64_at(0));
    }
    // A damaged count is only a hint: what is read is what counts.
    records.reserve(static_cast<std::size_t>(std::min<std::int64_t>(rows, 1LL << 32)));
  }
  struct LaneSeen {
    LaneKind kind;
    std::string name;
    std::int32_t sort;
  };
  std::vector<LaneSeen> lanes_seen;
  // "gpu:pid:device:stream", "cpu:globalTid", "nvtx:globalTid:domain"
  std::unordered_map<std::string, std::uint32_t> lane_of_key;
  // The index of the lane `key`, made by `describe` the first time.
  auto lane_index = [&](const std::string& key, auto describe) {
    auto [it, added] = lane_of_key.try_emplace(key, static_cast<std::uint32_t>(lanes_seen.size()));
    if (added) lanes_seen.push_back(describe());
    return it->second;
  };
  std::vector<std::string> names_seen;
  std::unordered_map<std::string, std::uint32_t> name_index_of;
  auto name_index = [&](std::string text) {
    auto [it, added] =
        name_index_of.try_emplace(text, static_cast<std::uint32_t>(names_seen.size()));
    if (added) names_seen.push_back(std::move(text));
    return it->second;
  };

  auto gpu_lane = [&](std::int64_t pid, std::int64_t device, std::int64_t stream) {
    const std::string key =
        "gpu:" + std::to_string(pid) + ":" + std::to_string(device) + ":" + std::to_string(stream);
    return lane_index(key, [&] {
      // Ids are whatever the file holds: held to 2^20 (real ones are far
      // smaller), so that the sort index cannot overflow an int.
      const std::int64_t d = std::clamp<std::int64_t>(device, -(1 << 20), 1 << 20);
      const std::int64_t s = std::clamp<std::int64_t>(stream, -(1 << 20), 1 << 20);
      return LaneSeen{LaneKind::gpu_stream,
                      "GPU " + std::to_string(device) + " stream " + std::to_string(stream),
                      static_cast<std::int32_t>(1000 + d * 1000 + s)};
    });
  };
  auto cpu_lane = [&](std::int64_t global_tid) {
    return lane_index("cpu:" + std::to_string(global_tid), [&] {
      auto tn = thread_names.find(global_tid);
      std::string name = "thread " + std::to_string(tid_of(global_tid));
      if (tn != thread_names.end() && !tn->second.empty()) name += " (" + tn->second + ")";
      return LaneSeen{LaneKind::cpu_thread, name,
                      static_cast<std::int32_t>(tid_of(global_tid) % 100000)};
    });
  };

  // A time that is not a whole number of nanoseconds (text, a real): SQLite
  // would read it as 0 or cut it, and a kernel as long as the session.
  const std::string bad_time = "records whose start or end is not a whole number of nanoseconds";
  // Times count from the session's start: one before it is a damaged
  // record, which would stretch the run back past its start.
  auto before_session = [&](const sql::Statement& stmt) {
    if (stmt.int64_at(0) >= 0) return false;
    ++report.skipped["records that start before the session (a negative start)"];
    return true;
  };
  std::int64_t graph_launches = 0;
  auto read_gpu_table = [&](const std::string& base, EventKind kind) -> Status {
    auto t = x.table(base);
    if (!t) return t.error();
    if (!*t) return {};
    // Columns 0-3 are common; 4 is the name (kernels), the graph (graphs
    // traced whole) or the bytes.
    const bool graph = base == "CUPTI_ACTIVITY_KIND_GRAPH_TRACE";
    const Export::Column fourth = graph ? Export::Column{"graphId"}
                                  : kind == EventKind::kernel
                                      ? Export::Column{"demangledName|shortName|name"}
                                  : kind == EventKind::memcpy ? Export::Column{"bytes"}
                                                              : Export::Column{"bytes", false};
    // A kernel's launch (columns 8-16), where the export has them.
    const bool kernels = kind == EventKind::kernel && !graph;
    auto launch_column = [&](const char* name) {
      return Export::Column{kernels ? name : "", false};
    };
    auto stmt = x.select(**t, {{"start"},
                               {"end"},
                               {"deviceId"},
                               {"streamId"},
                               fourth,
                               {"correlationId", false},
                               {"globalPid", false},
                               {"copyKind", false},
                               launch_column("gridX"),
                               launch_column("gridY"),
                               launch_column("gridZ"),
                               launch_column("blockX"),
                               launch_column("blockY"),
                               launch_column("blockZ"),
                               launch_column("registersPerThread"),
                               launch_column("staticSharedMemory"),
                               launch_column("dynamicSharedMemory")});
    if (!stmt) return stmt.error();
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      if (!stmt->is_whole_number(0) || !stmt->is_whole_number(1)) {
        ++report.skipped[bad_time];
        continue;
      }
      if (before_session(*stmt)) continue;
      Record r;
      r.kind = kind;
      r.category = kind == EventKind::kernel ? Category::compute : Category::memory;
      r.start = saturating_add(stmt->int64_at(0), session_start);
      r.end = saturating_add(stmt->int64_at(1), session_start);
      r.pid = stmt->is_null(6) ? 0 : pid_of(stmt->int64_at(6));
      r.device = stmt->int64_at(2);
      r.stream = stmt->int64_at(3);
      r.lane = gpu_lane(r.pid, r.device, r.stream);
      r.correlation = stmt->is_null(5) ? 0 : stmt->int64_at(5);
      if (graph) {
        r.name = name_index("CUDA graph " + std::to_string(stmt->int64_at(4)));
        ++graph_launches;
      } else if (kind == EventKind::kernel) {
        // The name column is a StringIds reference; very old exports held text.
        std::string name = stmt->is_null(4) ? "" : name_of(stmt->int64_at(4));
        if (auto nccl = parse_nccl_kernel_name(name)) {
          r.category = Category::communication;
          r.kind = nccl->point_to_point ? EventKind::p2p : EventKind::collective;
          r.collective = nccl->collective;
          r.dtype = nccl->dtype;
        }
        r.name = name_index(std::move(name));
        if (kernels && stmt->is_whole_number(8) && stmt->is_whole_number(11)) {
          KernelLaunch l;
          for (int i = 0; i < 3; ++i) {
            l.grid[i] = stmt->is_whole_number(8 + i) ? stmt->int64_at(8 + i) : 0;
            l.block[i] = stmt->is_whole_number(11 + i) ? stmt->int64_at(11 + i) : 0;
          }
          if (stmt->is_whole_number(14)) l.registers_per_thread = stmt->int64_at(14);
          // Sizes past a terabyte are no GPU's (and their sum could overflow).
          auto size_at = [&](int c) {
            return stmt->is_whole_number(c) && stmt->int64_at(c) >= 0 &&
                           stmt->int64_at(c) < (std::int64_t{1} << 40)
                       ? stmt->int64_at(c)
                       : std::int64_t{-1};
          };
          if (size_at(15) >= 0 && size_at(16) >= 0) {
            l.dynamic_shared_memory_bytes = size_at(16);
            l.shared_memory_bytes = size_at(15) + size_at(16);
          }
          if (auto checked = checked_launch(l)) {
            launches.push_back(*checked);
            r.launch = static_cast<std::uint32_t>(launches.size());
          }
        }
      } else if (kind == EventKind::memcpy) {
        r.bytes = stmt->int64_at(4);
        r.name =
            name_index(memcpy_name(stmt->is_null(7) ? 0 : stmt->int64_at(7), copy_kind_labels));
      } else {
        r.bytes = stmt->is_null(4) ? 0 : stmt->int64_at(4);
        r.name = name_index("Memset");
      }
      records.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return x.unreadable(t->value().name, rc);
    return {};
  };
  if (auto s = read_gpu_table("CUPTI_ACTIVITY_KIND_KERNEL", EventKind::kernel); !s)
    return s.error();
  // CUDA graphs traced whole (nsys --cuda-graph-trace=graph): one row per
  // launch, on its stream; their kernels are not in the kernel table.
  if (auto s = read_gpu_table("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", EventKind::kernel); !s)
    return s.error();
  if (graph_launches > 0)
    report.warnings.push_back(std::to_string(graph_launches) +
                              " CUDA graph launches imported as one event each, named by graph "
                              "(traced whole; nsys --cuda-graph-trace=node records their kernels)");
  if (auto s = read_gpu_table("CUPTI_ACTIVITY_KIND_MEMCPY", EventKind::memcpy); !s)
    return s.error();
  if (auto s = read_gpu_table("CUPTI_ACTIVITY_KIND_MEMSET", EventKind::memset); !s)
    return s.error();

  // A call whose stack nsys recorded (--cudabacktrace) has a second row, of
  // this event class, with the same times give or take and correlation id:
  // it was counted as a second call (cudaMemcpy beside cudaMemcpy_v3020),
  // doubling the API time. Newer exports name their classes; 67 in older ones.
  std::int64_t backtrace_class = 67;
  read = read_optional("ENUM_NSYS_EVENT_CLASS", {{"id"}, {"name"}},
                       "WHERE name = 'TRACE_PROCESS_EVENT_CUDABACKTRACE'", false,
                       [&](const sql::Statement& row) {
                         backtrace_class = row.int64_at(0);
                         return false;
                       });
  if (!read) return read.error();
  if (auto t = x.table("CUPTI_ACTIVITY_KIND_RUNTIME"); !t) {
    return t.error();
  } else if (*t) {
    auto stmt = x.select(**t, {{"start"},
                               {"end"},
                               {"globalTid"},
                               {"nameId"},
                               {"correlationId", false},
                               {"eventClass", false}});
    if (!stmt) return stmt.error();
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      if (!stmt->is_null(5) && stmt->int64_at(5) == backtrace_class) {
        ++report.skipped["CUDA backtrace records (each repeats a call, to give its stack)"];
        continue;
      }
      if (!stmt->is_whole_number(0) || !stmt->is_whole_number(1)) {
        ++report.skipped[bad_time];
        continue;
      }
      if (before_session(*stmt)) continue;
      Record r;
      // As `nsys stats` and the CUPTI tracer name it: cudaMemcpy, not cudaMemcpy_v3020.
      std::string name(api_name_without_version(name_of(stmt->int64_at(3))));
      const bool sync = importing::is_synchronizing_api(name);
      r.name = name_index(std::move(name));
      r.kind = sync ? EventKind::sync : EventKind::api_call;
      r.category = sync ? Category::synchronization : Category::other;
      r.start = saturating_add(stmt->int64_at(0), session_start);
      r.end = saturating_add(stmt->int64_at(1), session_start);
      r.pid = pid_of(stmt->int64_at(2));
      r.lane = cpu_lane(stmt->int64_at(2));
      r.correlation = stmt->is_null(4) ? 0 : stmt->int64_at(4);
      records.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return x.unreadable((*t)->name, rc);
  }

  if (names_missing > 0)
    report.warnings.push_back(std::to_string(names_missing) +
                              " kernels or CUDA calls name a StringIds entry the export lacks: "
                              "named \"(name N not in StringIds)\"");
  // An export with no kernels or calls is a valid one (nsys without
  // --trace=cuda), but its breakdown would show no compute: say why.
  const std::pair<const char*, const char*> traced[] = {
      {"CUPTI_ACTIVITY_KIND_KERNEL", "GPU kernels"},
      {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUDA runtime calls"}};
  for (const auto& [table, what] : traced) {
    auto t = x.table(table);
    if (!t) return t.error();
    if (!*t)
      report.warnings.push_back(std::string("the export has no ") + table + " table: no " + what +
                                " were traced (nsys profile --trace=cuda records them)");
  }

  if (auto t = x.table("NVTX_EVENTS"); !t) {
    return t.error();
  } else if (*t) {
    auto stmt = x.select(**t,
                         {{"start"},
                          {"eventType"},
                          {"globalTid"},
                          {"end", false},
                          {"text", false},
                          {"textId", false},
                          {"domainId", false}},
                         "ORDER BY start");
    if (!stmt) return stmt.error();
    std::map<std::int64_t, std::string> domains = {{0, "default"}};
    std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::string>>
        ranges;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
      const std::int64_t type = stmt->int64_at(1);
      const std::int64_t domain = stmt->is_null(6) ? 0 : stmt->int64_at(6);
      std::string text = stmt->is_null(4) ? (stmt->is_null(5) ? "" : text_of(stmt->int64_at(5)))
                                          : std::string(stmt->text_at(4));
      if (type == kNvtxDomainCreate) {
        domains[domain] = text;
        ++report.skipped["NVTX domain registrations"];
        continue;
      }
      const bool range = type == kNvtxPushPopRange || type == kNvtxStartEndRange ||
                         type == kNvtxtPushPopRange || type == kNvtxtStartEndRange;
      if (!range) {
        ++report.skipped["NVTX records other than ranges (marks, thread names, ...)"];
        continue;
      }
      if (stmt->is_null(3)) {
        ++report.skipped["NVTX ranges never closed (no end)"];
        continue;
      }
      if (!stmt->is_whole_number(0) || !stmt->is_whole_number(3)) {
        ++report.skipped[bad_time];
        continue;
      }
      ranges.emplace_back(stmt->int64_at(0), stmt->int64_at(3), stmt->int64_at(2), domain,
                          std::move(text));
    }
    if (rc != SQLITE_DONE) return x.unreadable((*t)->name, rc);
    // A process's steps: its ranges named as a step, as StepRanges picks
    // them (core/step_names.h; the CUPTI tracer's rule for a program under
    // `clusterscope profile`). The ranges come in the order they start.
    std::map<std::int64_t, StepRanges> steps_of_pid;
    for (auto& [start, end, tid, domain, text] : ranges) {
      Record r;
      r.kind = EventKind::annotation;
      r.category = Category::other;
      r.start = saturating_add(start, session_start);
      r.end = saturating_add(end, session_start);
      r.pid = pid_of(tid);
      const auto named = domains.find(domain);
      StepRanges& steps = steps_of_pid[r.pid];
      const auto step = steps.started(static_cast<std::uint64_t>(tid),
                                      named != domains.end() ? named->second : "", text, start);
      if (step) {
        steps.ended(end);
        r.kind = EventKind::step;
        r.step = *step;
        r.name = name_index(std::move(text));
        r.lane = lane_index("steps:" + std::to_string(r.pid), [] {
          return LaneSeen{LaneKind::steps, "steps", -1};
        });
        records.push_back(std::move(r));
        continue;
      }
      r.name = name_index(std::move(text));
      r.lane = lane_index("nvtx:" + std::to_string(tid) + ":" + std::to_string(domain), [&] {
        const std::string d =
            domains.count(domain) ? domains[domain] : "domain " + std::to_string(domain);
        return LaneSeen{
            LaneKind::annotation, "NVTX " + d + " (thread " + std::to_string(tid_of(tid)) + ")",
            static_cast<std::int32_t>(500 + std::clamp<std::int64_t>(domain, -(1 << 20), 1 << 20))};
      });
      records.push_back(std::move(r));
    }
  }
  for (const char* skipped_table :
       {"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "OSRT_API", "CUDA_GPU_MEMORY_USAGE_EVENTS"}) {
    auto t = x.table(skipped_table);
    if (!t) return t.error();
    if (!*t) continue;
    auto stmt = x.db().prepare("SELECT count(*) FROM \"" + (*t)->name + "\"");
    if (!stmt) continue;
    Status counted = x.each_row(*stmt, **t, [&] {
      if (stmt->int64_at(0) > 0)
        report.skipped[(*t)->name + " rows (not imported)"] += stmt->int64_at(0);
      return false;
    });
    if (!counted) return counted.error();
  }
  // GPU records of exports without globalPid belong to the process whose
  // runtime call launched them (same correlation id), else to the only one.
  if (std::any_of(records.begin(), records.end(),
                  [](const Record& r) { return r.device >= 0 && r.pid == 0; })) {
    std::unordered_map<std::int64_t, std::int64_t> launcher;
    std::set<std::int64_t> cpu_pids;
    for (const Record& r : records) {
      if (r.kind == EventKind::api_call || r.kind == EventKind::sync) {
        cpu_pids.insert(r.pid);
        if (r.correlation != 0) launcher.emplace(r.correlation, r.pid);
      }
    }
    for (Record& r : records) {
      if (r.device < 0 || r.pid != 0) continue;
      auto it = launcher.find(r.correlation);
      if (it != launcher.end())
        r.pid = it->second;
      else if (cpu_pids.size() == 1)
        r.pid = *cpu_pids.begin();
      r.lane = gpu_lane(r.pid, r.device, r.stream);
    }
  }
  if (records.empty()) {
    return Error{file + ": no CUDA kernels, copies, sets, runtime calls or NVTX ranges to import"};
  }

  // Ranks: each process that did CUDA work, and each that is an MPI rank
  // with NVTX ranges only (a rank computing on the CPU). The export's
  // MPI_RANKS, else "MPI Rank N" thread names give the rank; otherwise the
  // process order, after the ranks of the files before this one.
  std::map<std::int64_t, std::int32_t> rank_of_pid;
  std::set<std::int64_t> cuda_pids;
  {
    const std::regex mpi_rank(R"(MPI Rank (\d+))");
    auto named_rank = [&](std::int64_t pid) -> std::optional<std::int32_t> {
      if (auto mpi = mpi_rank_of_pid.find(pid); mpi != mpi_rank_of_pid.end()) return mpi->second;
      for (const auto& [tid, name] : thread_names) {
        std::smatch m;
        if (pid_of(tid) == pid && bounded_regex_search(name, m, mpi_rank)) {
          if (auto n = parse_count(m[1].str())) return *n;  // a rank past an int is no rank
        }
      }
      return std::nullopt;
    };
    std::set<std::int64_t> pids, annotation_pids;
    for (const Record& r : records) {
      if (r.kind != EventKind::annotation) {
        cuda_pids.insert(r.pid);
      } else {
        annotation_pids.insert(r.pid);
      }
    }
    pids = cuda_pids;
    std::map<std::int64_t, std::int32_t> named;
    for (std::int64_t pid : annotation_pids) {
      if (cuda_pids.count(pid)) continue;
      if (auto rank = named_rank(pid)) {
        pids.insert(pid);
        named[pid] = *rank;
      }
    }
    if (pids.empty()) pids.insert(records.front().pid);
    int next = 0;
    for (std::int64_t pid : pids) {
      std::optional<std::int32_t> rank = named.count(pid) ? named[pid] : named_rank(pid);
      if (!rank) {
        rank = first_rank + next;
        report.warnings.push_back("process " + std::to_string(pid) +
                                  " has no \"MPI Rank N\" thread name: rank " +
                                  std::to_string(*rank) + " from the file order");
      }
      rank_of_pid[pid] = *rank;
      ++next;
    }
    // Processes of NVTX ranges only that are no rank (a launcher, a data
    // loader): their lanes are shown under the first process's rank, named
    // with their process.
    for (std::int64_t pid : annotation_pids) {
      if (rank_of_pid.count(pid)) continue;
      report.warnings.push_back(
          "process " + std::to_string(pid) +
          " recorded NVTX ranges only and is no MPI rank: its ranges are shown under rank " +
          std::to_string(rank_of_pid.begin()->second) + ", in lanes that name the process");
    }
  }

  RunInfo run;
  run.title =
      options.title.empty() ? std::filesystem::path(file).filename().string() : options.title;
  run.source = "nsys-import";
  run.start_utc_ns = session_start;
  run.clock = session_start != 0 ? "CLOCK_REALTIME (Nsight Systems session start + offsets)"
                                 : "Nsight Systems session clock";
  run.host = host;
  run.command_line = file;
  if (!x.product_version.empty())
    run.tool_versions_json = "{\"nsight-systems\": \"" + x.product_version + "\"}";
  auto created = TraceWriter::create(output, run, options.writer);
  if (!created) return created.error();
  TraceWriter& w = **created;
  importing::add_caller_meta(w, options);
  if (!x.schema_version.empty()) w.set_meta("nsys_export_schema_version", x.schema_version);
  for (const auto& [pid, rank] : rank_of_pid) {
    // A rank with no CUDA work computed on its host.
    std::string device = cuda_pids.count(pid) ? "GPU" : "CPU (no CUDA activity recorded)";
    for (const Record& r : records) {
      if (r.pid == pid && r.device >= 0) {
        auto g = gpu_names.find(r.device);
        device =
            (g != gpu_names.end() ? g->second : "GPU") + " (GPU " + std::to_string(r.device) + ")";
        break;
      }
    }
    w.add_rank({rank, host, device, pid, 0, false});
  }
  std::vector<std::optional<LaneId>> lanes(lanes_seen.size());
  std::vector<std::optional<StringId>> names(names_seen.size());
  for (const Record& r : records) {
    // As the Kineto import: an event that ends before it starts is left out
    // and counted (it vanished from the analyses, imported).
    if (r.end < r.start) {
      ++report.skipped["records that end before they start"];
      continue;
    }
    std::optional<LaneId>& lane = lanes[r.lane];
    if (!lane) {
      const LaneSeen& seen = lanes_seen[r.lane];
      const bool own = rank_of_pid.count(r.pid) > 0;
      const auto rank = own ? rank_of_pid[r.pid] : rank_of_pid.begin()->second;
      std::string lane_name = seen.name;
      if (!own) {
        // "NVTX default (thread 42)" -> "NVTX default (thread 42 of process 41)"
        if (lane_name.ends_with(')')) {
          lane_name.insert(lane_name.size() - 1, " of process " + std::to_string(r.pid));
        } else {
          lane_name += " (process " + std::to_string(r.pid) + ")";
        }
      }
      lane = w.add_lane(rank, seen.kind, lane_name, seen.sort);
    }
    std::optional<StringId>& name = names[r.name];
    if (!name) name = w.intern(names_seen[r.name]);
    Event e;
    e.lane = *lane;
    e.kind = r.kind;
    e.category = r.category;
    e.start_ns = r.start;
    e.end_ns = r.end;
    e.name = *name;
    e.correlation = r.correlation;
    e.bytes = r.bytes;
    e.step = r.step;
    e.collective = r.collective;
    e.dtype = r.dtype;
    w.add_with_launch(
        e, r.launch ? std::optional<KernelLaunch>(launches[r.launch - 1]) : std::nullopt);
    ++report.events;
  }
  if (Status s = w.close("complete"); !s) return s.error();
  report.ranks = static_cast<std::int32_t>(rank_of_pid.size());
  return report;
}

}  // namespace

Result<ImportReport> import_nsys(const std::vector<std::string>& files, const std::string& output,
                                 const ImportOptions& options) {
  return importing::import_files(files, output, options, import_one_nsys);
}

}  // namespace cs::trace
