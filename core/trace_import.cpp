#include "core/trace_import.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/file_exists.h"
#include "core/trace_import_internal.h"
#include "core/trace_reader.h"
#include "core/trace_reader_internal.h"
#include "core/trace_sqlite.h"
#include "core/trace_store.h"
#include "core/trace_writer.h"

namespace cs::trace {

namespace importing {

namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The files as one store at `output`: one file written there, several into
// parts beside it and merged.
Result<ImportReport> import_into(const std::vector<std::string>& files, const std::string& output,
                                 const ImportOptions& options, const ImportOne& import_one) {
  std::error_code ec;
  if (files.size() == 1) return import_one(files[0], output, 0, options);

  std::vector<std::string> parts;
  auto remove_parts = [&] {
    for (const std::string& p : parts) {
      for (const char* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(p + suffix, ec);
    }
  };
  // A part's failure (a full disk) names the store being made, not the
  // temporary part it was writing ("x.db.part0.tmp").
  auto naming_output = [&](std::string message) {
    for (const std::string& part : parts) {
      for (std::size_t at = message.find(part); at != std::string::npos;
           at = message.find(part, at + output.size()))
        message.replace(at, part.size(), output);
    }
    return Error{std::move(message)};
  };
  ImportReport total;
  bool on_one_clock = true;
  // Ranks a file does not name follow those of the files before it (one
  // past the highest): by the file's place, an export of several unnamed
  // processes (nsys profile torchrun, on each node) took ranks 1.. of the
  // next file's, and the import failed as "rank 1 is in both".
  int first_rank = 0;
  // A rank in two files is an error that names the files, not the temporaries.
  std::map<std::int32_t, std::size_t> owner;
  for (std::size_t i = 0; i < files.size(); ++i) {
    parts.push_back(output + ".part" + std::to_string(i) + ".tmp");
    auto one = import_one(files[i], parts.back(), first_rank, options);
    if (!one) {
      remove_parts();
      return naming_output(one.message());
    }
    total.format = one->format;
    on_one_clock = on_one_clock && one->on_one_clock;
    total.bytes_read += one->bytes_read;
    for (const auto& [what, n] : one->skipped)
      total.skipped[what] += n;
    for (const std::string& w : one->warnings)
      total.warnings.push_back(files[i] + ": " + w);
    auto reader = TraceReader::open(parts[i]);
    if (!reader) {
      remove_parts();
      return naming_output(reader.message());
    }
    for (const RankInfo& r : (*reader)->ranks()) {
      auto [it, fresh] = owner.emplace(r.rank, i);
      if (!fresh) {
        remove_parts();
        return Error{"import: rank " + std::to_string(r.rank) + " is in both " + files[it->second] +
                     " and " + files[i]};
      }
      if (r.rank < INT32_MAX) first_rank = std::max(first_rank, r.rank + 1);
    }
  }
  MergeOptions merge;
  merge.alignment = options.alignment == ClockAlignment::automatic && on_one_clock
                        ? ClockAlignment::recorded
                        : options.alignment;
  merge.run.title = options.title;
  merge.writer = options.writer;
  auto merged = merge_stores(parts, output, merge);
  remove_parts();
  if (!merged) {
    // Named by the files the user gave, not their temporary stores.
    std::string message = merged.message();
    for (std::size_t i = 0; i < parts.size(); ++i) {
      for (std::size_t at = message.find(parts[i]); at != std::string::npos;
           at = message.find(parts[i], at + files[i].size()))
        message.replace(at, parts[i].size(), files[i]);
    }
    return Error{std::move(message)};
  }
  total.ranks = merged->ranks;
  total.events = merged->events;
  total.clock_alignment = merged->method;
  for (const std::string& w : merged->warnings)
    total.warnings.push_back(w);
  return total;
}

}  // namespace

Result<ImportReport> import_files(const std::vector<std::string>& files, const std::string& output,
                                  const ImportOptions& options, const ImportOne& import_one) {
  if (files.empty()) return Error{"import: no input files"};
  std::error_code ec;
  for (const std::string& f : files) {
    if (std::filesystem::exists(output, ec) && std::filesystem::equivalent(f, output, ec))
      return Error{output + ": the output is also an input"};
  }
  // Built beside the output: a failed import keeps the store an earlier one wrote.
  ImportReport report;
  const Status built = build_store_then_replace(output, [&](const std::string& temporary) {
    auto imported = import_into(files, temporary, options, import_one);
    if (!imported) return Status(imported.error());
    report = std::move(imported).value();
    auto kept = count_kept_events(temporary, report.events, report.losses);
    if (!kept) return Status(kept.error());
    report.events = *kept;
    return Status();
  });
  if (!built) return built.error();
  return report;
}

void add_caller_meta(TraceWriter& writer, const ImportOptions& options) {
  for (const auto& [key, value] : options.meta)
    writer.set_meta(key, value);
}

DataType data_type_from_any(std::string_view text) {
  const std::string t = lower(text);
  if (t == "float" || t == "float32" || t == "f32" || t == "fp32") return DataType::fp32;
  if (t == "bfloat16" || t == "bf16") return DataType::bf16;
  if (t == "half" || t == "float16" || t == "f16" || t == "fp16") return DataType::fp16;
  if (t == "double" || t == "float64" || t == "f64" || t == "fp64") return DataType::fp64;
  if (t == "int" || t == "int32" || t == "int32_t" || t == "i32") return DataType::int32;
  if (t == "long" || t == "int64" || t == "int64_t" || t == "i64") return DataType::int64;
  if (t == "char" || t == "int8" || t == "int8_t" || t == "i8") return DataType::int8;
  if (t == "byte" || t == "uint8" || t == "uint8_t" || t == "u8" || t == "bool")
    return DataType::uint8;
  // The fnuz variants (AMD's) differ in their range, not their size.
  if (t == "float8_e4m3fn" || t == "float8_e4m3fnuz" || t == "f8e4m3" || t == "fp8_e4m3")
    return DataType::fp8_e4m3;
  if (t == "float8_e5m2" || t == "float8_e5m2fnuz" || t == "f8e5m2" || t == "fp8_e5m2")
    return DataType::fp8_e5m2;
  return DataType::none;
}

bool is_synchronizing_api(std::string_view name) {
  return contains(name, "Synchronize") || contains(name, "StreamWaitEvent") ||
         contains(name, "cuStreamWaitEvent") || contains(name, "EventSynchronize") ||
         contains(name, "StreamQuery") || contains(name, "EventQuery");
}

}  // namespace importing

TraceFormat detect_trace_format(const std::string& path) {
  // A pipe or a device would block here, or give its first bytes to this
  // look and not to the import that opens it again.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return TraceFormat::unknown;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return TraceFormat::unknown;
  // Enough to pass a byte-order mark and the spaces a pretty-printer puts
  // before the first bracket (16 bytes read JSON indented further as
  // "not JSON").
  unsigned char head[4096] = {};
  const std::size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b) return TraceFormat::kineto_json;
  if (n >= 16 && std::string_view(reinterpret_cast<char*>(head), 15) == "SQLite format 3") {
    auto state = inspect_store(path);
    if (state) return TraceFormat::trace_store;
    auto db = sql::Database::open(path, SQLITE_OPEN_READONLY);
    if (db && db->has_table("StringIds")) return TraceFormat::nsys_sqlite;
    return TraceFormat::unknown;
  }
  const std::size_t bom = n >= 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf ? 3 : 0;
  for (std::size_t i = bom; i < n; ++i) {
    if (std::isspace(head[i])) continue;
    // {"traceEvents": [...]}, or Chrome's bare array of events.
    return head[i] == '{' || head[i] == '[' ? TraceFormat::kineto_json : TraceFormat::unknown;
  }
  return TraceFormat::unknown;
}

std::string importable_trace_kind(const std::string& path) {
  if (!sql::check_not_cut_short(path)) return "";
  switch (detect_trace_format(path)) {
    case TraceFormat::nsys_sqlite:
      return "an Nsight Systems SQLite export";
    case TraceFormat::kineto_json:
      return "a PyTorch profiler (Kineto) or Chrome JSON trace";
    case TraceFormat::trace_store:
    case TraceFormat::unknown:
      break;
  }
  return "";
}

Result<ImportReport> import_traces(const std::vector<std::string>& files, const std::string& output,
                                   const ImportOptions& options) {
  if (files.empty()) return Error{"import: no input files"};
  TraceFormat format = TraceFormat::unknown;
  for (const std::string& f : files) {
    if (Status there = check_file_exists(f); !there) return there.error();
    const TraceFormat this_one = detect_trace_format(f);
    if (this_one == TraceFormat::unknown) {
      // What it is instead, where that can be told.
      std::error_code ec;
      std::string what;
      if (std::filesystem::is_directory(f, ec)) {
        what = "it is a folder";
      } else if (!std::filesystem::is_regular_file(f, ec)) {
        what = "it is not a regular file (a pipe, socket or device): save it to a file first";
      } else if (std::filesystem::file_size(f, ec) == 0 && !ec) {
        what = "the file is empty";
      } else if (std::FILE* in = std::fopen(f.c_str(), "rb"); !in) {
        return Error{f + ": cannot open: " + std::strerror(errno)};
      } else {
        char head[16] = {};
        const std::size_t n = std::fread(head, 1, sizeof head, in);
        std::fclose(in);
        if (n < sizeof head || std::string_view(head, 15) != "SQLite format 3") {
          what =
              "it is no JSON object or array (it does not begin with { or [), and no gzip or "
              "SQLite file";
        } else if (Status whole = sql::check_not_cut_short(f); !whole) {
          return whole.error();
        } else if (auto db = sql::Database::open(f, SQLITE_OPEN_READONLY)) {
          auto read = db->prepare("SELECT count(*) FROM sqlite_master");
          // Whether it was an export cannot be told then: its tables are unknown.
          const int code = sqlite3_extended_errcode(db->get()) & 0xff;
          if (!read && (code == SQLITE_CORRUPT || code == SQLITE_NOTADB))
            return Error{f + " is damaged: SQLite cannot read its schema (" +
                         sqlite3_errmsg(db->get()) + ")"};
          what = read ? "an SQLite database, but not an Nsight Systems export (no StringIds table)"
                      : "an SQLite file SQLite cannot read (" + read.message() + ")";
        }
      }
      return Error{f +
                   ": not a trace this build imports (a PyTorch profiler or Chrome JSON trace, "
                   "plain or gzip, or an Nsight Systems SQLite export)" +
                   (what.empty() ? "" : ": " + what)};
    }
    if (this_one == TraceFormat::trace_store)
      return Error{f +
                   " is already a ClusterScope trace store (use `trace merge` to combine stores)"};
    if (format != TraceFormat::unknown && this_one != format)
      return Error{f + ": a different format from " + files.front() + "; import them separately"};
    format = this_one;
  }
  return format == TraceFormat::kineto_json ? import_kineto(files, output, options)
                                            : import_nsys(files, output, options);
}

}  // namespace cs::trace
