#include "core/import_sweeps.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/calibration_meta.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/precision.h"
#include "core/text_file.h"
#include "core/trace_writer.h"

namespace cs::trace {

using nlohmann::json;

namespace {

// A sweep line's number within the bounds any machine measures: a rank past
// 4095 made a lane per number up to it (a hang), a time of 1e300 s
// overflowed the store's nanoseconds.
double sweep_number(const json& j, const char* key, Range range, double fallback,
                    const std::string& where) {
  if (!j.contains(key)) {
    if (!std::isnan(fallback)) return fallback;
    throw std::runtime_error(where + ": /" + key + ": is required");
  }
  const json& v = j[key];
  const double value = v.is_number() ? v.get<double>() : std::nan("");
  if (!v.is_number() || !range.contains(value)) {
    throw std::runtime_error(where + ": /" + key + ": " + range.rule() + " (got " + json_text(v) +
                             ")");
  }
  return value;
}

constexpr double kNoDefault = std::numeric_limits<double>::quiet_NaN();

}  // namespace

Result<std::string> read_sweep_file(const std::string& path) {
  return read_text_file(path, std::size_t{256} << 20, "a file of sweep lines");
}

Result<SweepImport> import_sweep_lines(const std::vector<std::string>& files,
                                       const std::string& store, std::string_view engine,
                                       std::string_view device) {
  struct Line {
    json j;
    std::string where;
    std::string filed_as;  // a gemm line's precision as filed ("ran_as" where it differs)
    bool left_out = false;
  };
  std::vector<Line> lines;
  SweepImport imported;
  int ranks = 1;
  std::string host;
  // The precision the operation sweep ran in (its worker run's start line):
  // the store's phase carries it, for the loops fitted from it.
  std::string ops_precision;
  try {
    for (const std::string& file : files) {
      auto contents = read_sweep_file(file);
      if (!contents) return contents.error();
      std::string_view rest = *contents;
      int number = 0;
      // This file's gemm lines filed under another type (precision, ran_as:
      // lines), and per rank its fp8 lines without "ran_as" since that rank's
      // worker run began (a sweep_start or done line), which the run's fp8
      // line judges.
      std::map<std::pair<std::string, std::string>, int> filed_otherwise;
      std::map<int, std::vector<std::size_t>> unmarked_fp8;
      std::map<int, std::string> run_precision;  // per rank, its worker run's
      int fell_back = 0;
      double fell_back_fp8 = 0, fell_back_bf16 = 0;
      while (!rest.empty()) {
        const std::size_t end = rest.find('\n');
        const std::string_view text = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        ++number;
        const std::string where = file + ":" + std::to_string(number);
        const std::size_t first = text.find_first_not_of(" \t\r");
        if (first == std::string_view::npos) continue;
        if (text[first] != '{') {
          if (imported.lines_left_out++ == 0) imported.first_left_out = where;
          continue;
        }
        // A worker killed while writing leaves the file's last line cut,
        // with no newline after it: the lines before it are whole, and used.
        const bool cut_last = end == std::string_view::npos;
        const std::string cut_warning =
            where +
            ": the last line is cut short (no newline at its end, not whole JSON): left "
            "out, the lines before it imported";
        json j;
        try {
          j = json::parse(text);
        } catch (const json::parse_error& e) {
          if (cut_last) {
            imported.warnings.push_back(cut_warning);
            continue;
          }
          // One line: its column is the byte.
          return Error{where + ": not a JSON line: column " + std::to_string(e.byte) + ": " +
                       json_error_text(e)};
        } catch (const json::exception& e) {
          if (cut_last) {
            imported.warnings.push_back(cut_warning);
            continue;
          }
          return Error{where + ": not a JSON line: " + json_error_text(e)};
        }
        if (!j.is_object()) continue;
        const json* event_field = j.contains("event") ? &j["event"] : nullptr;
        const std::string event =
            event_field && event_field->is_string() ? event_field->get<std::string>() : "";
        // The worker's start line names the machine the sweeps ran on: the
        // calibrated presets carry its name, as a calibration made there would.
        if (host.empty() && j.contains("host") && j["host"].is_string())
          host = j["host"].get<std::string>();
        if (event == "sweep_start" || event == "done" || event == "fp8") {
          const int rank = static_cast<int>(
              sweep_number(j, "rank", Range::between(0, kMaxSweepRanks - 1), 0, where));
          std::vector<std::size_t> unmarked = std::move(unmarked_fp8[rank]);
          unmarked_fp8.erase(rank);
          if (event == "sweep_start") {
            const json* precision = j.contains("precision") ? &j["precision"] : nullptr;
            run_precision[rank] = precision && precision->is_string() &&
                                          precision_from_string(precision->get<std::string>())
                                      ? precision->get<std::string>()
                                      : "fp32";
          }
          if (event != "fp8") continue;
          // The worker run's FP8 GEMMs and its fallbacks to BF16.
          const double fp8 = sweep_number(j, "fp8_gemms", Range::between(0, 1e18), 0, where);
          const double bf16 = sweep_number(j, "bf16_fallbacks", Range::between(0, 1e18), 0, where);
          if (bf16 > 0 && !unmarked.empty()) {
            for (std::size_t i : unmarked)
              lines[i].left_out = true;
            fell_back += static_cast<int>(unmarked.size());
            fell_back_fp8 += fp8;
            fell_back_bf16 += bf16;
          }
          continue;
        }
        if (event != "gemm" && event != "bandwidth" && event != "op" && event != "collective")
          continue;
        // A time under a nanosecond or past a day measures nothing: 1e-300 s
        // was fitted as 25769803776 GFLOP/s.
        sweep_number(j, "seconds", Range::between(1e-9, 86400), kNoDefault, where);
        const int rank = static_cast<int>(
            sweep_number(j, "rank", Range::between(0, kMaxSweepRanks - 1), 0, where));
        if (event == "gemm") {
          for (const char* key : {"m", "n", "k"})
            sweep_number(j, key, Range::between(1, 1 << 20), kNoDefault, where);
        } else if (event == "bandwidth") {
          sweep_number(j, "bytes", Range::between(1, 1e13), kNoDefault, where);
        } else if (event == "op") {
          sweep_number(j, "elements", Range::between(0, 1e13), 0, where);
          sweep_number(j, "flops", Range::between(0, 1e18), 0, where);
          if (ops_precision.empty())
            ops_precision = run_precision.count(rank) ? run_precision[rank] : "fp32";
        } else {
          sweep_number(j, "bytes", Range::between(0, 1e13), 0, where);
          sweep_number(j, "ranks", Range::between(1, kMaxSweepRanks), 1, where);
        }
        for (const char* key : {"precision", "operation", "ran_as"}) {
          if (j.contains(key) && !j[key].is_string())
            return Error{where + ": /" + key + ": must be text (got " + json_text(j[key]) + ")"};
        }
        if (j.contains("cold") && !j["cold"].is_boolean())
          return Error{where + ": /cold: must be true or false (got " + json_text(j["cold"]) + ")"};
        ranks = std::max(ranks, rank + 1);
        Line line{j, where, {}, false};
        if (event == "gemm") {
          const std::string precision = j.value("precision", "fp32");
          line.filed_as = precision;
          if (!j.contains("ran_as")) {
            if (precision == "fp8") unmarked_fp8[rank].push_back(lines.size());
          } else if (const std::string ran_as = j["ran_as"].get<std::string>();
                     ran_as != precision) {
            // Filed under what ran; a mix of types is neither's sample.
            if (precision_from_string(ran_as)) {
              line.filed_as = ran_as;
            } else {
              line.left_out = true;
            }
            ++filed_otherwise[{precision, ran_as}];
          }
        }
        lines.push_back(std::move(line));
      }
      for (const auto& [types, count] : filed_otherwise) {
        const auto& [precision, ran_as] = types;
        const std::string samples =
            std::to_string(count) + " " + precision +
            (count == 1 ? " GEMM sample ran as " : " GEMM samples ran as ") + ran_as +
            " (\"ran_as\")";
        imported.notes.push_back(file + ": " + samples +
                                 (precision_from_string(ran_as)
                                      ? ": filed under " + ran_as + ", not " + precision
                                      : ": left out, neither type's alone"));
      }
      if (fell_back > 0) {
        imported.notes.push_back(
            file + ": " + std::to_string(fell_back) +
            (fell_back == 1 ? " fp8 GEMM sample" : " fp8 GEMM samples") +
            " left out of fp8: the worker run that measured them fell back to BF16 (its fp8 "
            "line: " +
            std::to_string(static_cast<long long>(fell_back_fp8)) + " FP8 GEMMs, " +
            std::to_string(static_cast<long long>(fell_back_bf16)) +
            " BF16 fallbacks) and, having no \"ran_as\" (a worker from before it wrote one), "
            "they do not say which of them ran in BF16");
      }
    }
  } catch (const std::runtime_error& e) {
    return Error{e.what()};
  }
  if (std::all_of(lines.begin(), lines.end(), [](const Line& l) { return l.left_out; })) {
    std::string named;
    for (const std::string& file : files)
      named += (named.empty() ? "" : ", ") + file;
    if (!lines.empty()) {
      std::string why;
      for (const std::string& note : imported.notes)
        why += "; " + note;
      return Error{named + ": every sweep line was left out" + why};
    }
    return Error{named + ": no sweep line (gemm, bandwidth, op, collective)" +
                 (imported.lines_left_out > 0
                      ? " (" + std::to_string(imported.lines_left_out) +
                            (imported.lines_left_out == 1 ? " line that is" : " lines that are") +
                            " not JSON, the first " + imported.first_left_out + ")"
                      : std::string())};
  }
  RunInfo info;
  info.title = "Imported sweeps";
  info.source = "sweep-import";
  info.clock = "synthetic: one event per sample, back to back";
  auto created = TraceWriter::create(store, info);
  if (!created) return created.error();
  TraceWriter& w = **created;
  std::map<int, LaneId> lanes;
  for (int r = 0; r < ranks; ++r) {
    w.add_rank({r, host, std::string(device), 0, 0});
    lanes[r] = w.add_lane(r, LaneKind::cpu_thread, "imported sweep");
  }
  std::map<int, std::int64_t> cursor;
  std::map<int, LaneId> cold_lanes;
  for (const Line& line : lines) {
    if (line.left_out) continue;
    const json& j = line.j;
    const int rank = j.value("rank", 0);
    Event e;
    e.lane = lanes[rank];
    e.kind = EventKind::kernel;
    e.category = Category::compute;
    e.start_ns = cursor[rank];
    e.end_ns =
        e.start_ns + std::max<std::int64_t>(1, std::llround(j["seconds"].get<double>() * 1e9));
    cursor[rank] = e.end_ns + 1000;
    const std::string event = j.value("event", "");
    std::string name;
    if (event == "gemm") {
      const double m = j.value("m", 0.0), n = j.value("n", 0.0), k = j.value("k", 0.0);
      const std::string& precision = line.filed_as;
      const auto p = precision_from_string(precision);
      if (!p || m <= 0 || n <= 0 || k <= 0) {
        return Error{line.where + ": a gemm line needs m, n, k > 0 and a known precision"};
      }
      const double in = bytes_per_element(*p);
      const double out = *p == Precision::fp32 || *p == Precision::tf32 ? 4 : 2;
      e.flops = 2 * m * n * k;
      e.bytes = static_cast<std::int64_t>((m * k + k * n) * in + m * n * out);
      name = "gemm " + std::to_string(static_cast<long long>(n)) + " " + precision;
    } else if (event == "bandwidth") {
      e.bytes = j.value("bytes", std::int64_t{0});
      name = "accumulate";
    } else if (event == "op") {
      name = j.value("operation", "");
      e.count = j.value("elements", std::int64_t{0});
      e.flops = j.value("flops", 0.0);
    } else {
      e.kind = EventKind::collective;
      e.category = Category::communication;
      e.bytes = j.value("bytes", std::int64_t{0});
      e.group_size = j.value("ranks", 0);
      e.collective = collective_from_string(j.value("operation", "all_reduce"))
                         .value_or(Collective::all_reduce);
      name = j.value("operation", "all_reduce");
    }
    e.name = w.intern(name);
    w.add(e);
    if (event == "collective" && j.value("cold", false)) {
      // A call of the CPU engine's cold sweep: inside its annotation, as recorded.
      if (!cold_lanes.count(rank))
        cold_lanes[rank] = w.add_lane(rank, LaneKind::annotation, "phases");
      Event a;
      a.lane = cold_lanes[rank];
      a.kind = EventKind::annotation;
      a.category = Category::other;
      a.start_ns = e.start_ns;
      a.end_ns = e.end_ns;
      a.name = w.intern(kColdCollectivesAnnotation);
      w.add(a);
    }
  }
  CalibrationInfo meta;
  meta.engine = engine;
  meta.host = host;
  meta.device = device;
  meta.phases = {{ranks, 0, 0, ops_precision.empty() ? "fp32" : ops_precision}};
  w.set_meta(kCalibrationMetaKey, calibration_meta_json(meta));
  if (Status s = w.close("complete"); !s) return s.error();
  return imported;
}

}  // namespace cs::trace
