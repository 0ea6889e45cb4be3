// clusterscope trace info STORE [--json]
// clusterscope trace stats STORE [--top N] [--predict-again [--cluster NAME] | --plan PLAN]
// [--json] clusterscope trace export STORE -o OUT [--format chrome|csv|html] [--table T|all]
//                           [--from T --to T] [--rank R...] [--file-per-rank]
// clusterscope trace import FILE... -o STORE [--align A] [--title T] [--json]
// clusterscope trace merge STORE... -o STORE [--align A] [--json]

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/calibration/calibration_workflow.h"
#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/output_folder.h"
#include "app/cli/text_table.h"
#include "core/elided_name.h"
#include "core/file_beside.h"
#include "core/file_exists.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/kernel_names.h"
#include "core/prediction_text.h"
#include "core/trace_analysis.h"
#include "core/trace_compare.h"
#include "core/trace_critical_path.h"
#include "core/trace_export.h"
#include "core/trace_import.h"
#include "core/trace_merge.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"

namespace cs::cli {

namespace {

using nlohmann::json;

// A figure that is 0 when it could not be measured: null in JSON, not 0.
json optional_number(double value) {
  return value > 0 ? json(value) : json(nullptr);
}
using namespace cs::trace;

// The text of a JSON answer. A store written before its text was kept as
// UTF-8 may hold other bytes: they print as U+FFFD instead of throwing.
std::string json_text(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

// A meta value in its natural JSON type, for scripts: text that is a JSON
// object or array (plan_json, predicted_step, machine_probe) embedded, a
// number as a number, true/false as booleans; anything else (a name, "null",
// a quoted string, text with spaces around it) stays the string it is. An
// integer past 64 bits stays a string rather than lose digits as a double.
json meta_value_json(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())) ||
      std::isspace(static_cast<unsigned char>(text.back())))
    return text;
  json parsed = parse_json_text(text);
  if (parsed.is_object() || parsed.is_array() || parsed.is_boolean() || parsed.is_number_integer())
    return parsed;
  if (parsed.is_number_float() && text.find_first_of(".eE") != std::string::npos) return parsed;
  return text;
}

// `answer` as json_text writes it, each meta value in `texts` (a null in
// `answer`) written from its text, laid out as json_text would write it
// parsed. The dump escapes the newlines in strings: a newline and four
// spaces begin a member of one of the answer's objects, and the first one of
// a key past the start of "meta" is the meta's.
void print_with_meta_texts(const json& answer,
                           const std::vector<std::pair<std::string, std::string>>& texts) {
  const std::string dump = json_text(answer);
  const std::size_t meta = dump.find("\n  \"meta\": {");
  // Where each null is, and the text written instead.
  std::vector<std::pair<std::size_t, const std::string*>> nulls;
  for (const auto& [key, text] : texts) {
    const std::string member = "\n    " + json_text(json(key)) + ": null";
    const std::size_t at = dump.find(member, meta);
    if (meta == std::string::npos || at == std::string::npos)
      throw std::logic_error("trace info --json: no meta member " + key);
    nulls.emplace_back(at + member.size() - 4, &text);
  }
  std::sort(nulls.begin(), nulls.end());
  std::size_t from = 0;
  for (const auto& [at, text] : nulls) {
    std::cout.write(dump.data() + from, static_cast<std::streamsize>(at - from));
    write_json_laid_out(std::cout, *text, 2, 2);
    from = at + 4;
  }
  std::cout.write(dump.data() + from, static_cast<std::streamsize>(dump.size() - from));
  std::cout << '\n';
}

// For a file that did not open as a store: another program's trace, which
// `trace import` reads, is named with the command (it read "an SQLite
// database of another kind (tables: ...)" or "not an SQLite database"). A
// damaged one keeps the reason it fails.
void refuse_if_importable(const std::string& path) {
  if (const std::string kind = importable_trace_kind(path); !kind.empty()) {
    throw CliError(path + " is not a ClusterScope trace store but " + kind +
                   ": import it with `clusterscope trace import " + path + " -o store.db`");
  }
}

std::unique_ptr<TraceReader> open_store(const std::string& path) {
  auto opened = TraceReader::open(path);
  if (!opened) refuse_if_importable(path);
  std::unique_ptr<TraceReader> reader = take(std::move(opened));
  // An older store is read through an upgrade: say which, since one changes the file.
  if (const std::string note = upgrade_note(path, reader->state()); !note.empty())
    std::cerr << "clusterscope: note: " << note << '\n';
  return reader;
}

// After a command printed what it read: a damaged page met on the way (a
// query then ends early, as if its rows had ended) fails the command, which
// printed figures lacking those rows (it exited 0 with them).
void refuse_if_damaged(const TraceReader& reader) {
  if (Status damaged = reader.damage(); !damaged)
    throw CliError(damaged.message() + ": what was printed lacks those rows");
}

// SQLite reads a damaged page's bytes as other rows, or as none, without a
// word (an overwritten index page made stats print 3 all-reduces of 6 and
// exit 0). A command that prints figures read from a store therefore
// checks it whole meanwhile, on a thread of its own (verify_store, what
// `trace info --check` runs), and fails after printing when it is damaged.
// It starts once the command line is known to be good: an error found
// before waits for nothing (the future's destructor joins its thread).
class WholeStoreCheck {
 public:
  void start(const std::string& path) {
    result_ = std::async(std::launch::async, [path]() -> Status {
      try {
        return verify_store(path);
      } catch (const std::exception& e) {
        return Error{path + ": the store's check stopped: " + e.what()};
      }
    });
  }
  Status result() {
    if (!done_ && result_.valid()) {
      checked_ = result_.get();
      done_ = true;
    }
    return checked_;
  }
  // Throws when the store is damaged, saying what was made from it.
  void require(const std::string& made_from_it) {
    if (Status checked = result(); !checked)
      throw CliError(checked.message() + " (" + made_from_it + ")");
  }

 private:
  std::future<Status> result_;
  Status checked_;
  bool done_ = false;
};

// The flags that chose a window, as a message names them.
std::string trace_window_flags(const std::string& steps) {
  return steps.empty() ? "--from/--to" : "--steps";
}

std::string ms(std::int64_t ns) {
  return format_fixed(static_cast<double>(ns) / 1e6, 3);
}
// "12.5%", or "-" of nothing (a rank without device work has no span).
std::string pct(std::int64_t part, std::int64_t whole) {
  return whole > 0
             ? format_fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) + "%"
             : "-";
}
std::string shorten(const std::string& s, std::size_t n) {
  return fit_width(s, n);
}
// A kernel's name in `n` cells: whole where it fits, else without its
// return type and parameters (what tells two kernels apart), then cut.
std::string shorten_kernel(const std::string& name, std::size_t n) {
  return display_width(name) <= n ? name : fit_width(trace::kernel_short_name(name), n);
}
// The names of a table's rows, each in `n` cells (as a kernel's where
// `kernels`). Two different names that would read alike are shown longer:
// a kernel's without its parameters, uncut, else whole, as Nsight Systems
// prints them ("split_embedding_backward_codegen_rowwi...c10::Half, 2ul,
// 32>" stood for three kernels), up to kShownNameChars characters
// (core/elided_name.h: a name of 200,000 characters is no table's).
std::vector<std::string> distinct_names(const std::vector<std::string>& names, std::size_t n,
                                        bool kernels) {
  std::vector<std::string> out;
  for (const std::string& name : names)
    out.push_back(kernels ? shorten_kernel(name, n) : shorten(name, n));
  auto lengthen_alike = [&](auto longer) {
    std::map<std::string, std::set<std::string>> whole_of;
    for (std::size_t i = 0; i < out.size(); ++i)
      whole_of[out[i]].insert(names[i]);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (whole_of[out[i]].size() > 1) out[i] = longer(names[i]);
  };
  if (kernels)
    lengthen_alike(
        [](const std::string& name) { return elided_name(trace::kernel_short_name(name)); });
  lengthen_alike([](const std::string& name) { return elided_name(name); });
  return out;
}
// Under a table of the first `shown` of `total` rows.
void say_rows_left_out(std::size_t shown, std::size_t total) {
  if (shown < total)
    std::cout << "  " << shown << " of " << total << " shown; --top " << total
              << " lists them all\n";
}

// "1.5s", "200ms", "350us", "1000ns" or plain seconds → nanoseconds.
std::int64_t parse_duration(const std::string& text, const char* option) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    throw CliError(std::string(option) + ": \"" + text +
                   "\" is not a time (e.g. 1.5s, 200ms, 40us)");
  }
  if (!std::isfinite(value))
    throw CliError(std::string(option) + ": \"" + text +
                   "\" is not a time (e.g. 1.5s, 200ms, 40us)");
  if (value < 0) {
    throw CliError(std::string(option) + ": \"" + text +
                   "\" is before the trace's start (times count from it)");
  }
  const std::string unit = text.substr(used);
  double scale = 1e9;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us" || unit == "µs")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s" || unit.empty())
    scale = 1e9;
  else if (unit == "min")
    scale = 60e9;
  else
    throw CliError(std::string(option) + ": unknown unit \"" + unit + "\" (ns, us, ms, s, min)");
  // A time past what the store's nanoseconds hold (2^62 ns, 146 years).
  if (std::fabs(value * scale) > 4.6e18)
    throw CliError(std::string(option) + ": \"" + text + "\" is longer than any trace");
  return static_cast<std::int64_t>(std::llround(value * scale));
}

ClockAlignment parse_alignment(const std::string& text) {
  if (auto a = clock_alignment_from_string(text)) return *a;
  throw UsageError("--align: \"" + text + "\" is not one of auto, recorded, collectives, none");
}

json breakdown_json(const Breakdown& b) {
  return {{"window_start_ns", b.window_start_ns},
          {"window_end_ns", b.window_end_ns},
          {"span_ns", b.span_ns},
          {"busy_ns", b.busy_ns},
          {"compute_ns", b.compute_ns},
          {"communication_ns", b.communication_ns},
          {"overlap_ns", b.overlap_ns},
          {"overlap_percent", b.overlap_percent()},
          {"exposed_communication_ns", b.exposed_communication_ns},
          {"memory_ns", b.memory_ns},
          {"exposed_memory_ns", b.exposed_memory_ns},
          {"exposed_synchronization_ns", b.exposed_synchronization_ns},
          {"other_busy_ns", b.other_busy_ns},
          {"idle_ns", b.idle_ns},
          {"idle_host_wait_ns", b.idle_host_wait_ns},
          {"idle_kernel_wait_ns", b.idle_kernel_wait_ns},
          {"idle_other_ns", b.idle_other_ns},
          {"events", b.events}};
}

json launch_json(const LaunchStats& l) {
  return {{"launches", l.launches},
          {"short_kernels", l.short_kernels},
          {"runtime_outliers", l.runtime_outliers},
          {"delay_outliers", l.delay_outliers},
          {"synchronous_copies_left_out", l.synchronous_left_out},
          {"call_median_ns", l.call_median_ns},
          {"call_p95_ns", l.call_p95_ns},
          {"delay_median_ns", l.delay_median_ns},
          {"delay_p95_ns", l.delay_p95_ns},
          {"delay_max_ns", l.delay_max_ns}};
}

// --- info ---------------------------------------------------------------

struct InfoOptions {
  std::string store;
  bool json = false;
  bool check = false;
};

void print_info(const InfoOptions& o, const std::unique_ptr<TraceReader>& r);

void run_info(const InfoOptions& o) {
  if (o.check) {
    const Status checked = verify_store(o.store);
    if (!checked) refuse_if_importable(o.store);
    take(checked);
  }
  auto r = open_store(o.store);
  print_info(o, r);
  refuse_if_damaged(*r);
}

void print_info(const InfoOptions& o, const std::unique_ptr<TraceReader>& r) {
  // The rows printed, not run(): it reads the plan too, tens of MB for a
  // large cluster's (--json prints it with the other meta rows).
  RunInfo run;
  run.title = r->meta("title").value_or("");
  run.source = r->meta("source").value_or("");
  run.clock = r->meta("clock").value_or("");
  run.command_line = r->meta("command_line").value_or("");
  const StoreState& st = r->state();
  const TimeRange range = r->time_range();
  if (o.json) {
    json ranks = json::array(), lanes = json::array(), meta = json::object();
    for (const RankInfo& k : r->ranks())
      ranks.push_back({{"rank", k.rank}, {"host", k.host}, {"device", k.device}, {"pid", k.pid}});
    for (const LaneInfo& l : r->lanes())
      lanes.push_back({{"id", l.id.value},
                       {"rank", l.rank},
                       {"kind", to_string(l.kind)},
                       {"name", l.name},
                       {"events", l.event_count},
                       {"first_ns", l.first_ns},
                       {"last_ns", l.last_ns},
                       {"max_depth", l.max_depth}});
    // An object or array (the plan: tens of MB for a large cluster's) is
    // written from its text, a null stands for it in the tree.
    std::vector<std::pair<std::string, std::string>> texts;
    for (auto& [k, v] : r->all_meta()) {
      if (is_json_container_text(v, kMaxJsonDepth)) {
        meta[k] = nullptr;
        texts.emplace_back(k, std::move(v));
      } else {
        meta[k] = meta_value_json(v);
      }
    }
    json answer{{"path", r->path()},
                {"schema_version", st.schema_version},
                {"status", st.status},
                {"finalized", st.finalized},
                {"writer_alive", st.writer_alive},
                {"writer_elsewhere", st.writer_elsewhere},
                {"events", r->event_count()},
                {"world_size", r->world_size()},
                {"time_range", {{"start_ns", range.start_ns}, {"end_ns", range.end_ns}}},
                {"ranks", ranks},
                {"lanes", lanes},
                {"meta", meta},
                {"losses", r->losses()}};
    if (o.check) answer["integrity"] = "ok";  // a damaged store failed above
    print_with_meta_texts(answer, texts);
    return;
  }
  std::cout << r->path() << '\n';
  std::cout << "  " << (run.title.empty() ? "(untitled)" : run.title);
  if (!run.source.empty()) std::cout << " — " << run.source;
  // Every store is written with a status row: none read is a sign of a
  // damaged meta table that SQLite's lookups do not notice.
  std::cout << "\n  trace schema " << st.schema_version << ", status "
            << (st.status.empty() ? "unknown (no status row: its meta table may be damaged; "
                                    "`trace info --check` tells)"
                                  : st.status)
            << (st.writer_alive ? " (its writer is still running; read as committed so far)" : "")
            << (st.status == "writing" && !st.writer_alive && !st.writer_elsewhere
                    ? " (its writer" + (st.writer.empty() ? "" : ", process " + st.writer + ",") +
                          " ended without closing it" +
                          (st.not_completed.empty()
                               ? std::string()
                               : "; it cannot be completed here: " + st.not_completed) +
                          "; read as committed)"
                    : std::string())
            << (st.writer_elsewhere ? " (by " + st.writer +
                                          " of another host, which may still be running: read "
                                          "as committed so far, not repaired)"
                                    : std::string())
            << '\n';
  std::cout << "  " << format_count(static_cast<double>(r->event_count())) << " events on "
            << r->lanes().size() << " lanes, " << r->ranks().size() << " of " << r->world_size()
            << " ranks, "
            << format_seconds(static_cast<double>(range.end_ns - range.start_ns) / 1e9) << '\n';
  for (const std::string& loss : r->losses()) std::cout << "  warning: " << loss << '\n';
  if (!run.clock.empty()) std::cout << "  clock: " << run.clock << '\n';
  if (auto a = r->meta("clock_alignment")) std::cout << "  ranks aligned by: " << *a << '\n';
  if (o.check) {
    std::cout << "  integrity: every page reads (SQLite's check)"
              << (st.finalized ? ", and every lane's chunks decode to its events" : "") << '\n';
  }
  if (!run.command_line.empty()) std::cout << "  command: " << run.command_line << '\n';
  std::cout << '\n';
  TextTable ranks({"rank", "host", "device", "pid"});
  ranks.right_align(0);
  ranks.right_align(3);
  for (const RankInfo& k : r->ranks())
    ranks.add({std::to_string(k.rank), k.host, k.device, std::to_string(k.pid)});
  ranks.print(std::cout);
  std::cout << '\n';
  TextTable lanes({"rank", "lane", "kind", "events", "span", "depth"});
  lanes.right_align(0);
  lanes.right_align(3);
  lanes.right_align(4);
  lanes.right_align(5);
  for (const LaneInfo& l : r->lanes()) {
    lanes.add(
        {std::to_string(l.rank), shorten(l.name, 48), std::string(to_string(l.kind)),
         std::to_string(l.event_count),
         l.event_count ? format_seconds(static_cast<double>(l.last_ns - l.first_ns) / 1e9) : "-",
         std::to_string(l.max_depth)});
  }
  lanes.print(std::cout);
}

// --- stats --------------------------------------------------------------

// The presets the GEMM rates' peaks come from: where they do not load, the
// rates stand without a percentage of peak, said on stderr.
const PresetCatalog* presets_for_peaks(Context& ctx) {
  try {
    return &ctx.catalog();
  } catch (const CliError& e) {
    std::cerr << "clusterscope: warning: " << e.what()
              << "; the FLOP/s are shown without a percentage of the GPU's peak\n";
    return nullptr;
  }
}

json gemm_rates_json(const GemmRates& g, std::size_t top) {
  json rows = json::array();
  for (std::size_t i = 0; i < g.rows.size() && i < top; ++i) {
    const GemmRate& row = g.rows[i];
    const auto percent = row.percent_of_peak();
    rows.push_back(
        {{"name", row.name},
         {"precision", row.precision.empty() ? json(nullptr) : json(row.precision)},
         {"time", row.kernel_time ? "gpu_kernels" : "own_duration"},
         {"gpu", row.gpu.empty() ? json(nullptr) : json(row.gpu)},
         {"count", row.count},
         {"flops", row.flops},
         {"time_ns", row.time_ns},
         {"flops_per_second", row.time_ns > 0 ? json(row.flops_per_second()) : json(nullptr)},
         {"share", row.share},
         {"peak_flops_per_second", row.peak_flops > 0 ? json(row.peak_flops) : json(nullptr)},
         {"percent_of_peak", percent ? json(*percent) : json(nullptr)}});
  }
  json out = {{"rows", rows}, {"without_kernels", g.without_kernels}};
  if (g.rows.empty()) {
    out["note"] = gemm_rates_absent(g);
  } else {
    out["caption"] = gemm_rates_caption(g);
    out["notes"] = gemm_rates_notes(g);
  }
  return out;
}

void print_gemm_rates(const GemmRates& g, std::size_t top) {
  if (top == 0) return;
  if (g.rows.empty()) {
    std::cout << '\n' << gemm_rates_absent(g) << '\n';
    return;
  }
  std::cout << '\n' << gemm_rates_title(g) << "\n  " << gemm_rates_caption(g) << '\n';
  TextTable t({"name", "type", "count", "GFLOP", "total ms", "FLOP/s", "share", "% of peak"});
  for (std::size_t i = 2; i < 8; ++i)
    t.right_align(i);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < g.rows.size() && i < top; ++i)
    names.push_back(g.rows[i].name);
  names = distinct_names(names, 48, false);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const GemmRate& row = g.rows[i];
    const auto percent = row.percent_of_peak();
    t.add({names[i], row.precision.empty() ? "-" : row.precision, std::to_string(row.count),
           format_significant(row.flops / 1e9, 4), ms(row.time_ns),
           row.time_ns > 0 ? format_rate(row.flops_per_second(), "FLOP/s") : "-",
           format_fixed(row.share * 100, 1) + "%", percent ? format_fixed(*percent, 1) + "%" : ""});
  }
  t.print(std::cout);
  say_rows_left_out(names.size(), g.rows.size());
  for (const std::string& note : gemm_rates_notes(g))
    std::cout << "  " << note << '\n';
}

struct StatsOptions {
  std::string store;
  std::int64_t top = 10;  // rows per table (any count: more than there are lists them all)
  bool json = false;
  bool no_steps = false;
  int threads = 0;
  bool predict_again = false;
  std::string cluster;  // with predict_again: the cluster preset to predict on
  std::string plan_file;  // hold the run against this plan's prediction
  bool streams = false;  // each stream's idle time, by cause
  std::string from, to;  // a window of the trace
  std::string steps;     // or of these steps ("5", "3-7")

  std::string window_flags() const { return trace_window_flags(steps); }
};

// How the store's run ended, said where it did not complete: the figures of
// a cancelled run, or of one still being written, are not the whole run's.
std::string status_note(const TraceReader& r) {
  const StoreState& st = r.state();
  if (st.status == "complete") return {};
  if (st.status == "writing" && (st.writer_alive || st.writer_elsewhere)) {
    return r.path() +
           " is still being written (its writer is running): the figures are of "
           "what it committed so far";
  }
  if (st.status == "writing") {
    // Its writer ended without closing it (killed, or its close failed on a
    // full disk): "still being written" said otherwise.
    return r.path() + ": its writer" + (st.writer.empty() ? "" : " (process " + st.writer + ")") +
           " ended without closing it" +
           (st.not_completed.empty()
                ? ""
                : ", and it cannot be completed here (" + st.not_completed + ")") +
           ": the figures are of what it committed";
  }
  if (st.status.empty()) {
    return r.path() +
           " has no status row (its meta table may be damaged; `trace info --check` "
           "tells): the figures are of what could be read";
  }
  return r.path() + ": the run ended " + st.status + ": the figures are of what it recorded";
}

// `damage`: what the analysis met (RunAnalysis::damage).
void print_stats(const StatsOptions& o, Context& ctx, const std::unique_ptr<TraceReader>& r,
                 std::string& damage, WholeStoreCheck& check);

// --from/--to: a window of the trace, each counted from its start; none when
// neither is given. A window that is empty or wholly past the end is refused.
// --steps A or A-B: from step A's earliest start over the ranks to step B's
// latest end, as the steps are numbered in the store (the timeline's).
AnalysisOptions::StepRange parse_steps(const std::string& steps) {
  int first = -1, last = -1;
  const char* bad = "--steps: \"";
  {
    std::size_t used = 0;
    try {
      first = std::stoi(steps, &used);
      last = first;
      if (used < steps.size()) {
        if (steps[used] != '-') throw std::invalid_argument("");
        std::size_t more = 0;
        last = std::stoi(steps.substr(used + 1), &more);
        if (used + 1 + more != steps.size()) throw std::invalid_argument("");
      }
    } catch (const std::exception&) {
      throw UsageError(bad + steps + "\" is not a step or a range of steps (5, 3-7)");
    }
  }
  if (first >= 0 && last < first)
    throw UsageError(bad + steps + "\": the range ends before it begins (" + std::to_string(last) +
                     "-" + std::to_string(first) + "?)");
  if (first < 0) throw UsageError(bad + steps + "\" is not a step or a range of steps (5, 3-7)");
  return {first, last};
}

TimeRange steps_window(const TraceReader& r, const std::string& steps) {
  const auto [first, last] = parse_steps(steps);
  const std::vector<StepWindow> all = take(job_step_windows(r));
  if (all.empty()) throw CliError("--steps: " + r.path() + " records no steps");
  std::optional<TimeRange> window;
  int lowest = all.front().step, highest = all.front().step;
  for (const StepWindow& w : all) {
    lowest = std::min(lowest, w.step);
    highest = std::max(highest, w.step);
    if (w.step < first || w.step > last) continue;
    window = window
                 ? TimeRange{std::min(window->start_ns, w.start), std::max(window->end_ns, w.end)}
                 : TimeRange{w.start, w.end};
  }
  if (!window)
    throw CliError("--steps " + steps + ": the run records steps " + std::to_string(lowest) +
                   " to " + std::to_string(highest) +
                   " (numbered from 0, as the timeline shows them; run's progress lines count "
                   "from 1)");
  return *window;
}

std::optional<TimeRange> window_of(const TraceReader& r, const std::string& from,
                                   const std::string& to, const std::string& steps = {}) {
  if (!steps.empty()) {
    if (!from.empty() || !to.empty())
      throw UsageError("--steps gives the window: not with --from/--to");
    return steps_window(r, steps);
  }
  if (from.empty() && to.empty()) return std::nullopt;
  const TimeRange all = r.time_range();
  const TimeRange window{
      from.empty() ? all.start_ns : all.start_ns + parse_duration(from, "--from"),
      to.empty() ? all.end_ns + 1 : all.start_ns + parse_duration(to, "--to")};
  if (!from.empty() && !to.empty() && window.empty())
    throw CliError("--to " + to + " is not after --from " + from);
  const std::string lasts = format_seconds(static_cast<double>(all.end_ns - all.start_ns) / 1e9);
  // A window wholly past the end wrote a file of no events, which no import reads.
  if (!from.empty() && window.start_ns > all.end_ns) {
    const bool bare = from.find_first_not_of("0123456789.eE+-") == std::string::npos;
    throw CliError("--from " + from + " is past the trace's end (the trace lasts " + lasts + ")" +
                   (bare ? "; a time without a unit is in seconds (200ms, 40us)" : ""));
  }
  if (window.empty())
    throw CliError("--from/--to: the window is empty (the trace lasts " + lasts + ")");
  return window;
}

// The figures of a window hold what ran in it: one where no rank's device
// worked has none, and nothing is printed or written for it.
// `flags`: those that chose the window ("--from/--to", "--steps").
void refuse_idle_window(const TraceReader& r, const RunAnalysis& a, const std::string& flags) {
  if (std::any_of(a.ranks.begin(), a.ranks.end(),
                  [](const RankAnalysis& k) { return k.total.events > 0 || k.total.busy_ns > 0; }))
    return;
  const TimeRange all = r.time_range();
  throw CliError(flags +
                 ": no device work (kernel, copy, collective or engine compute) lies "
                 "in the window (the trace lasts " +
                 format_seconds(static_cast<double>(all.end_ns - all.start_ns) / 1e9) +
                 "); nothing was written");
}

std::string csv_table_names() {
  std::string names;
  for (CsvTable t : kAllCsvTables)
    names += std::string(to_string(t)) + ", ";
  return names + "all";
}

void run_stats(const StatsOptions& o, Context& ctx) {
  if (!o.cluster.empty() && !o.predict_again)
    throw UsageError("--cluster goes with --predict-again");
  if (!o.plan_file.empty() && o.predict_again)
    throw UsageError("--plan and --predict-again each give the prediction: give one");
  auto r = open_store(o.store);
  WholeStoreCheck check;
  std::string damage;
  print_stats(o, ctx, r, damage, check);
  if (!damage.empty()) throw CliError(damage + ": what was printed lacks those rows");
  refuse_if_damaged(*r);
  check.require("the figures printed were read from it");
}

void print_stats(const StatsOptions& o, Context& ctx, const std::unique_ptr<TraceReader>& r,
                 std::string& damage, WholeStoreCheck& check) {
  // Always per step: the comparison with the prediction is per step (the
  // whole trace taken as one step was held against one step's prediction).
  AnalysisOptions options;
  options.threads = o.threads;
  options.window = window_of(*r, o.from, o.to, o.steps);
  if (!o.steps.empty()) options.steps = parse_steps(o.steps);
  options.presets = presets_for_peaks(ctx);
  options.gemm_rates = true;
  if (options.window && (o.predict_again || !o.plan_file.empty()))
    throw CliError(std::string(o.predict_again ? "--predict-again" : "--plan") +
                   " holds every step past the warm-up against the plan, not a window: leave "
                   "out " +
                   o.window_flags());
  std::optional<PredictedStep> again;  // with its cluster, calibrated and notes
  if (o.predict_again) {
    again = take(calib::predict_recorded_run(ctx.catalog(), *r, o.cluster));
    options.prediction = again;
  } else if (!o.plan_file.empty()) {
    if (auto why = calib::why_no_plan_holds(*r)) throw CliError(r->path() + ": " + *why);
    again =
        plan_file_prediction(ctx.catalog(), o.plan_file, static_cast<int>(r->ranks().size())).step;
    options.prediction = again;
  }
  check.start(o.store);
  const RunAnalysis a = take(analyze_run(*r, options));
  if (options.window) refuse_idle_window(*r, a, o.window_flags());
  damage = a.damage;
  // On stderr, with or without --json: the figures below stand without it.
  if (!a.prediction_error.empty())
    std::cerr << "clusterscope: warning: " << a.prediction_error
              << "; the run's figures are shown without its prediction\n";
  if ((o.predict_again || !o.plan_file.empty()) && !a.prediction)
    throw CliError(r->path() + ": the new prediction was not compared");
  const std::size_t top = static_cast<std::size_t>(std::max<std::int64_t>(0, o.top));

  if (o.json) {
    json ranks = json::array();
    for (const RankAnalysis& k : a.ranks) {
      json steps = json::array();
      for (const StepBreakdown& s : k.steps) {
        if (o.no_steps) break;
        steps.push_back({{"step", s.step}, {"breakdown", breakdown_json(s.breakdown)}});
      }
      json streams = json::array();
      for (const StreamIdle& st : k.streams)
        streams.push_back({{"lane", st.lane.value},
                           {"name", st.name},
                           {"events", st.events},
                           {"span_ns", st.span_ns},
                           {"busy_ns", st.busy_ns},
                           {"idle_ns", st.idle_ns()},
                           {"idle_host_wait_ns", st.idle_host_wait_ns},
                           {"idle_kernel_wait_ns", st.idle_kernel_wait_ns},
                           {"idle_other_ns", st.idle_other_ns},
                           {"launched", st.launched},
                           {"queue_max", st.launched > 0 ? json(st.queue_max) : json(nullptr)},
                           {"queue_mean", st.launched > 0 ? json(st.queue_mean) : json(nullptr)}});
      ranks.push_back({{"rank", k.rank},
                       {"gpu", k.gpu},
                       {"total", breakdown_json(k.total)},
                       {"launches", launch_json(k.launches)},
                       {"streams", streams},
                       {"steps", steps}});
    }
    json kernels = json::array(), collectives = json::array(), stragglers = json::array();
    // A row timed by name (a kernel, a call, a copy, a range): its count and durations.
    auto timed_row = [](const KernelStats& k) {
      return json{{"name", k.name},       {"count", k.count},         {"total_ns", k.total_ns},
                  {"mean_ns", k.mean_ns}, {"median_ns", k.median_ns}, {"min_ns", k.min_ns},
                  {"max_ns", k.max_ns},   {"stddev_ns", k.stddev_ns}, {"share", k.share}};
    };
    auto timed = [&](const std::vector<KernelStats>& rows) {
      json j = json::array();
      for (std::size_t i = 0; i < rows.size() && i < top; ++i)
        j.push_back(timed_row(rows[i]));
      return j;
    };
    for (std::size_t i = 0; i < a.kernels.size() && i < top; ++i) {
      json k = timed_row(a.kernels[i]);
      k["kind"] = to_string(a.kernels[i].kind);
      k["category"] = to_string(a.kernels[i].category);
      kernels.push_back(std::move(k));
    }
    for (std::size_t i = 0; i < a.collectives.size() && i < top; ++i) {
      const CollectiveStats& c = a.collectives[i];
      collectives.push_back({{"collective", to_string(c.collective)},
                             {"name", c.name},
                             {"dtype", to_string(c.dtype)},
                             {"bytes", c.bytes},
                             {"ranks", c.ranks},
                             {"count", c.count},
                             {"total_ns", c.total_ns},
                             {"mean_ns", c.mean_ns},
                             {"median_ns", c.median_ns},
                             {"stddev_ns", c.stddev_ns},
                             {"algbw_gbps", c.algbw_gbps},
                             {"busbw_gbps", c.busbw_gbps},
                             {"transfer_median_ns", optional_number(c.transfer_median_ns)},
                             {"transfer_busbw_gbps", optional_number(c.transfer_busbw_gbps)}});
    }
    for (const RankStraggler& s : a.stragglers.ranks) {
      stragglers.push_back({{"rank", s.rank},
                            {"median_step_ns", s.step_ns},
                            {"step_excess", s.step_excess},
                            {"late_start_ns", s.late_start_ns},
                            {"collectives", s.collectives},
                            {"straggler", s.straggler},
                            {"reason", s.reason}});
    }
    json memory_ops = json::array();
    for (std::size_t i = 0; i < a.memory_ops.size() && i < top; ++i) {
      const MemoryOpStats& m = a.memory_ops[i];
      json row = timed_row(m.time);
      row["kind"] = to_string(m.time.kind);
      // null where no bytes were recorded (as the text's "-"): not 0 GB/s.
      const bool sized = m.total_bytes > 0;
      row["total_bytes"] = sized ? json(m.total_bytes) : json(nullptr);
      row["mean_bytes"] = sized ? json(m.mean_bytes) : json(nullptr);
      row["median_bytes"] = sized ? json(m.median_bytes) : json(nullptr);
      row["min_bytes"] = sized ? json(m.min_bytes) : json(nullptr);
      row["max_bytes"] = sized ? json(m.max_bytes) : json(nullptr);
      row["throughput_gbps"] =
          sized && m.time.total_ns > 0 ? json(m.throughput_gbps) : json(nullptr);
      memory_ops.push_back(std::move(row));
    }
    json counters = json::array();
    const std::int64_t start = r->time_range().start_ns;
    for (std::size_t i = 0; i < a.counters.size() && i < top; ++i) {
      const CounterStats& k = a.counters[i];
      counters.push_back({{"rank", k.rank},
                          {"name", k.name},
                          {"samples", k.samples},
                          {"least", k.least},
                          {"largest", k.greatest},
                          {"largest_at_ns", k.greatest_at_ns - start},
                          {"last", k.last},
                          {"unit", k.bytes ? json("bytes") : json(nullptr)}});
    }
    json out = {{"path", r->path()},
                {"status", r->state().status},
                {"ranks", ranks},
                {"kernels", kernels},
                {"api_calls", timed(a.api_calls)},
                {"memory_ops", memory_ops},
                {"annotations", timed(a.annotations)},
                {"collectives", collectives},
                {"counters", counters},
                {"gemms", gemm_rates_json(*a.gemms, top)},
                {"stragglers", stragglers},
                // How many rows each table has; --top lists the first of them.
                {"totals",
                 {{"kernels", a.kernels.size()},
                  {"api_calls", a.api_calls.size()},
                  {"memory_ops", a.memory_ops.size()},
                  {"annotations", a.annotations.size()},
                  {"collectives", a.collectives.size()},
                  {"counters", a.counters.size()},
                  {"gemms", a.gemms->rows.size()}}}};
    // The window's bounds from the trace's start, as --from/--to count them.
    const std::int64_t origin = r->time_range().start_ns;
    out["window"] = options.window ? json{{"from_ns", options.window->start_ns - origin},
                                          {"to_ns", options.window->end_ns - origin}}
                                   : json(nullptr);
    if (a.prediction) {
      auto rows = [](const std::vector<PredictedVsMeasured>& list) {
        json j = json::array();
        for (const auto& row : list) {
          // error: predicted / measured - 1 (null when nothing was measured).
          const bool measured = row.measured_s && *row.measured_s > 0;
          j.push_back(
              {{"name", row.name},
               {"predicted_s", row.predicted_s},
               {"measured_s", row.measured_s ? json(*row.measured_s) : json(nullptr)},
               {"error", measured ? json(row.predicted_s / *row.measured_s - 1) : json(nullptr)}});
        }
        return j;
      };
      out["prediction"] = {{"predicted_step_s", a.prediction->predicted_step_s},
                           {"measured_step_s", a.prediction->measured_step_s},
                           {"steps", a.prediction->steps},
                           {"categories", rows(a.prediction->categories)},
                           {"parts", rows(a.prediction->parts)}};
      if (!a.prediction->breakdown.empty()) {
        json& pj = out["prediction"];
        pj["critical_rank"] = a.prediction->critical_rank;
        pj["measured_step_median_s"] = a.prediction->measured_step_median_s;
        pj["critical_steps"] = a.prediction->critical_steps;
        pj["critical_warm_up_steps"] = a.prediction->critical_warm_up;
        pj["breakdown"] = rows(a.prediction->breakdown);
        pj["largest_disagreement"] = a.prediction->breakdown[a.prediction->largest].name;
        pj["verdict"] = a.prediction->verdict;
      }
      if (!a.prediction->memory.empty()) {
        json memory = json::array();
        for (const MemoryVsMeasured& m : a.prediction->memory) {
          const bool measured = m.measured_bytes && *m.measured_bytes > 0;
          memory.push_back(
              {{"name", m.name},
               {"part", m.part},
               {"stage", m.stage >= 0 ? json(m.stage) : json(nullptr)},
               {"predicted_bytes", m.predicted_bytes},
               {"measured_bytes", m.measured_bytes ? json(*m.measured_bytes) : json(nullptr)},
               {"error",
                measured ? json(m.predicted_bytes / *m.measured_bytes - 1) : json(nullptr)},
               {"counter", m.measured_bytes ? json(m.counter) : json(nullptr)},
               {"rank", m.measured_bytes ? json(m.rank) : json(nullptr)}});
        }
        out["prediction"]["memory"] = std::move(memory);
      } else if (!a.prediction->memory_note.empty()) {
        out["prediction"]["memory_note"] = a.prediction->memory_note;
      }
      if (const auto& m = a.prediction->machine) {
        out["prediction"]["machine_probe"] = {
            {"measured", json::parse(machine_probe_json(m->measured))},
            {"predicted", json::parse(machine_probe_json(m->predicted))},
            {"gemm_ratio", m->gemm_ratio()},
            {"loop_ratio", m->loop_ratio()},
            {"all_reduce_ratio", m->all_reduce_ratio()},
            {"drifted", m->drifted()},
            {"text", m->text()}};
      } else if (!a.prediction->machine_note.empty()) {
        out["prediction"]["machine_probe"] = {{"note", a.prediction->machine_note}};
      }
      if (again) {
        out["prediction"]["predicted_now"] = {
            {"cluster", again->cluster.value_or("")},
            {"calibrated", again->calibrated.value_or(false)},
            {"notes", again->notes.value_or(std::vector<std::string>{})}};
        // --plan: the plan it was predicted from (not --predict-again's).
        if (!o.plan_file.empty()) out["prediction"]["predicted_now"]["plan_file"] = o.plan_file;
      }
    }
    if (!a.prediction_error.empty()) out["prediction_error"] = a.prediction_error;
    std::cout << json_text(out) << '\n';
    return;
  }

  std::cout << r->path() << ": " << a.ranks.size() << (a.ranks.size() == 1 ? " rank" : " ranks")
            << '\n';
  if (const std::string note = status_note(*r); !note.empty()) std::cout << "note: " << note << '\n';
  if (options.window) {
    // As given, to the nanosecond (1.915s read "1.92 s"); an end past the
    // trace's is said so.
    const TimeRange all = r->time_range();
    const auto ms = [&](std::int64_t t) {
      return format_fixed(static_cast<double>(t - all.start_ns) / 1e6, 3) + " ms";
    };
    const bool one_step = o.steps.find('-') == std::string::npos;
    std::cout << "window: "
              << (o.steps.empty() ? "" : (one_step ? "step " : "steps ") + o.steps + ", ")
              << ms(options.window->start_ns) << " to " << ms(options.window->end_ns)
              << " from the trace's first event"
              << (options.window->end_ns > all.end_ns
                      ? " (the trace ends at " + ms(all.end_ns) + ")"
                      : "")
              << "; the breakdown is of the time inside it, the tables of every operation that "
                 "overlaps it, whole\n";
  }
  std::cout << "\nWhere the time went (per rank, over its device span; HTA definitions)\n";
  TextTable t({"rank", "span ms", "compute", "comm", "overlap", "exposed comm", "exposed memory",
               "idle", "host wait", "idle other", "steps"});
  for (std::size_t i = 0; i < 11; ++i)
    t.right_align(i);
  std::vector<std::string> without_span;
  for (const RankAnalysis& k : a.ranks) {
    const Breakdown& b = k.total;
    if (b.span_ns <= 0) without_span.push_back(std::to_string(k.rank));
    t.add({std::to_string(k.rank) + (k.gpu ? "" : " cpu"), ms(b.span_ns),
           pct(b.compute_ns, b.span_ns), pct(b.communication_ns, b.span_ns),
           b.span_ns > 0 ? format_fixed(b.overlap_percent(), 1) + "%" : "-",
           pct(b.exposed_communication_ns, b.span_ns), pct(b.exposed_memory_ns, b.span_ns),
           pct(b.idle_ns, b.span_ns), pct(b.idle_host_wait_ns, b.span_ns),
           pct(b.idle_other_ns, b.span_ns), std::to_string(k.steps.size())});
  }
  t.print(std::cout);
  // The exposed columns share out the span with compute and idle, as the
  // GUI's bars and the per-step categories do (a total "memory" read as one
  // of the parts and the row added up past 100%).
  std::cout << "  percentages of the span: compute, exposed comm, exposed memory and idle share it "
               "out (the rest is synchronization and other device work); comm is all "
               "communication, overlap the share of it hidden under compute; exposed comm: "
               "communication not under compute; exposed memory: copies under neither; host "
               "wait and idle other are parts of idle (the rest: short gaps between kernels)\n";
  if (!without_span.empty()) {
    std::string ranks;
    for (const std::string& rank : without_span)
      ranks += (ranks.empty() ? "" : ", ") + rank;
    std::cout << "  " << (without_span.size() == 1 ? "rank " : "ranks ") << ranks
              << ": no device work recorded (no GPU kernel, copy or engine compute), so no span "
                 "to share out; its host events are in the timeline (trace export)\n";
  }

  if (o.streams) {
    std::cout << "\nIdle time per stream (HTA's idle time breakdown; percentages of the stream's "
                 "span)\n";
    TextTable st({"rank", "stream", "events", "span ms", "busy", "idle", "host wait", "kernel wait",
                  "idle other", "queue mean", "queue max"});
    for (std::size_t i : {0, 2, 3, 4, 5, 6, 7, 8, 9, 10})
      st.right_align(i);
    for (const RankAnalysis& k : a.ranks) {
      for (const StreamIdle& s : k.streams) {
        st.add({std::to_string(k.rank), s.name, std::to_string(s.events), ms(s.span_ns),
                pct(s.busy_ns, s.span_ns), pct(s.idle_ns(), s.span_ns),
                pct(s.idle_host_wait_ns, s.span_ns), pct(s.idle_kernel_wait_ns, s.span_ns),
                pct(s.idle_other_ns, s.span_ns),
                s.launched > 0 ? format_fixed(s.queue_mean, 1) : "-",
                s.launched > 0 ? std::to_string(s.queue_max) : "-"});
      }
    }
    st.print(std::cout);
    std::cout << "  a stream's idle time is the gaps between its own events: host wait when the "
                 "next one was launched after the last one ended, kernel wait when shorter than "
              << AnalysisOptions{}.kernel_wait_ns
              << " ns, other (waiting for another stream, or for data) the rest; its queue: "
                 "the operations launched on it that have not started (HTA's queue length), "
                 "averaged over its span, and at most; a deep queue: the host runs ahead\n";
  }

  // HTA's kernel launch statistics, where runtime calls launched GPU work.
  if (std::any_of(a.ranks.begin(), a.ranks.end(),
                  [](const RankAnalysis& k) { return k.launches.launches > 0; })) {
    std::cout << "\nKernel launches (each kernel, and each asynchronous copy or memset, with the "
                 "call that launched it)\n";
    const AnalysisOptions cutoffs;  // the analysis ran with the defaults
    TextTable l({"rank", "launches", "call median us", "call p95 us", "delay median us",
                 "delay p95 us", "delay max us", "shorter than call",
                 "calls > " + std::to_string(cutoffs.runtime_cutoff_ns / 1000) + " us",
                 "delays > " + std::to_string(cutoffs.launch_delay_cutoff_ns / 1000) + " us"});
    for (std::size_t i = 0; i < 10; ++i)
      l.right_align(i);
    auto us = [](double ns_value) { return format_fixed(ns_value / 1e3, 1); };
    for (const RankAnalysis& k : a.ranks) {
      const LaunchStats& s = k.launches;
      if (s.launches == 0) continue;
      auto share = [&](std::int64_t n) {
        return std::to_string(n) + " (" + pct(n, s.launches) + ")";
      };
      l.add({std::to_string(k.rank), std::to_string(s.launches), us(s.call_median_ns),
             us(s.call_p95_ns), us(s.delay_median_ns), us(s.delay_p95_ns), us(s.delay_max_ns),
             share(s.short_kernels), share(s.runtime_outliers), share(s.delay_outliers)});
    }
    l.print(std::cout);
    std::cout << "  delay: the GPU's start less the call's end; a kernel shorter than its call "
                 "leaves the GPU waiting on the host (fuse kernels, or CUDA graphs)\n";
    std::int64_t synchronous = 0;
    for (const RankAnalysis& k : a.ranks)
      synchronous += k.launches.synchronous_left_out;
    if (synchronous > 0)
      std::cout << "  " << synchronous << " synchronous "
                << (synchronous == 1 ? "copy or memset (cudaMemcpy, cudaMemset) is"
                                     : "copies and memsets (cudaMemcpy, cudaMemset) are")
                << " left out: the call lasts until the copy ends, so it is no launch\n";
  }

  auto us = [](double ns_value) { return format_fixed(ns_value / 1e3, 2); };
  // The first `top` rows' names.
  auto names_of = [top](const auto& rows, auto name_of, std::size_t width, bool kernels) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < rows.size() && i < top; ++i)
      names.push_back(name_of(rows[i]));
    return distinct_names(names, width, kernels);
  };
  if (!a.kernels.empty() && top > 0) {
    std::cout << "\nTop kernels (all ranks; with the copies and sets, as HTA's kernel breakdown; "
                 "share: of their summed time)\n";
    TextTable k({"name", "category", "count", "total ms", "mean us", "median us", "min us",
                 "max us", "stddev us", "share"});
    for (std::size_t i = 2; i < 10; ++i)
      k.right_align(i);
    const auto names = names_of(
        a.kernels, [](const KernelStats& s) { return s.name; }, 60, true);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const KernelStats& s = a.kernels[i];
      k.add({names[i], std::string(to_string(s.category)), std::to_string(s.count), ms(s.total_ns),
             us(s.mean_ns), us(s.median_ns), us(static_cast<double>(s.min_ns)),
             us(static_cast<double>(s.max_ns)), us(s.stddev_ns),
             format_fixed(s.share * 100, 1) + "%"});
    }
    k.print(std::cout);
    say_rows_left_out(names.size(), a.kernels.size());
  }
  print_gemm_rates(*a.gemms, top);
  // Calls and ranges, timed by name as Nsight Systems' reports time them.
  auto print_timed = [&](const std::vector<KernelStats>& rows, const std::string& title) {
    if (rows.empty() || top == 0) return;
    std::cout << "\n" << title << '\n';
    TextTable table({"name", "count", "total ms", "mean us", "median us", "min us", "max us",
                     "stddev us", "share"});
    for (std::size_t i = 1; i < 9; ++i)
      table.right_align(i);
    const auto names = names_of(
        rows, [](const KernelStats& s) { return s.name; }, 60, true);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const KernelStats& s = rows[i];
      table.add({names[i], std::to_string(s.count), ms(s.total_ns), us(s.mean_ns), us(s.median_ns),
                 us(static_cast<double>(s.min_ns)), us(static_cast<double>(s.max_ns)),
                 us(s.stddev_ns), format_fixed(s.share * 100, 1) + "%"});
    }
    table.print(std::cout);
    say_rows_left_out(names.size(), rows.size());
  };
  print_timed(a.api_calls, "CUDA API calls (all ranks; as Nsight Systems' cuda_api_sum)");
  if (!a.memory_ops.empty() && top > 0) {
    std::cout << "\nDevice copies and sets (all ranks; as Nsight Systems' cuda_gpu_mem_time_sum "
                 "and cuda_gpu_mem_size_sum)\n";
    TextTable m({"operation", "count", "total ms", "mean us", "median us", "min us", "max us",
                 "stddev us", "total", "min size", "median size", "max size", "GB/s", "share"});
    for (std::size_t i = 1; i < 14; ++i)
      m.right_align(i);
    const auto names = names_of(
        a.memory_ops, [](const MemoryOpStats& s) { return s.time.name; }, 40, false);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const MemoryOpStats& s = a.memory_ops[i];
      const bool sized = s.total_bytes > 0;
      auto bytes = [sized](double b) { return sized ? format_bytes(b) : std::string("-"); };
      m.add({names[i], std::to_string(s.time.count), ms(s.time.total_ns), us(s.time.mean_ns),
             us(s.time.median_ns), us(static_cast<double>(s.time.min_ns)),
             us(static_cast<double>(s.time.max_ns)), us(s.time.stddev_ns),
             bytes(static_cast<double>(s.total_bytes)), bytes(static_cast<double>(s.min_bytes)),
             bytes(s.median_bytes), bytes(static_cast<double>(s.max_bytes)),
             sized && s.time.total_ns > 0 ? format_fixed(s.throughput_gbps, 2) : "-",
             format_fixed(s.time.share * 100, 1) + "%"});
    }
    m.print(std::cout);
    say_rows_left_out(names.size(), a.memory_ops.size());
    std::cout << "  GB/s: the bytes over the time of all of them (10^9 bytes per second)\n";
  }
  print_timed(a.annotations,
              "Annotation ranges (all ranks; NVTX and the engines' phases, as Nsight Systems' "
              "nvtx_sum)");
  if (!a.annotations.empty() && top > 0)
    std::cout << "  share: of all ranges' time; a range inside another counts in both\n";
  // The engines' memory by part is in the prediction's table (and in the
  // JSON): here it would crowd out later ranks' whole. The counters of ops
  // are parts of them. A store of those alone (a calibration's) printed the
  // table's title and header over no row.
  std::vector<const CounterStats*> listed;
  for (const CounterStats& k : a.counters)
    if (!is_memory_part_counter(k.name) && !is_op_counter(k.name)) listed.push_back(&k);
  if (!listed.empty() && top > 0) {
    std::cout << "\nSampled counters (each rank's; the largest sample is the peak, as "
                 "max_memory_allocated gives it)\n";
    TextTable c({"rank", "counter", "samples", "least", "largest", "at ms", "last"});
    for (std::size_t i = 2; i < 7; ++i)
      c.right_align(i);
    const std::int64_t origin = r->time_range().start_ns;
    for (std::size_t i = 0; i < listed.size() && i < top; ++i) {
      const CounterStats& k = *listed[i];
      auto value = [&](double v) { return counter_value_text(k, v); };
      c.add({std::to_string(k.rank), shorten(k.name, 48), std::to_string(k.samples), value(k.least),
             value(k.greatest),
             format_fixed(static_cast<double>(k.greatest_at_ns - origin) / 1e6, 3), value(k.last)});
    }
    c.print(std::cout);
    say_rows_left_out(std::min(top, listed.size()), listed.size());
    std::cout << "  at: the largest sample's time from the trace's first event"
              << (listed.size() < a.counters.size()
                      ? "; the engines' memory by part is in the prediction's table and --json"
                      : "")
              << '\n';
  }
  // A table left out for want of rows says so, as nsys stats' "SKIPPED":
  // none recorded is not the same as not supported.
  if (top > 0) {
    std::vector<std::string> none;
    if (a.api_calls.empty()) none.push_back("CUDA API calls");
    if (a.memory_ops.empty()) none.push_back("device copies and sets");
    if (a.annotations.empty()) none.push_back("annotation ranges");
    if (a.collectives.empty()) none.push_back("collectives");
    if (a.counters.empty()) none.push_back("sampled counters");
    if (!none.empty()) {
      std::string list;
      for (std::size_t i = 0; i < none.size(); ++i)
        list += (i == 0 ? "" : i + 1 == none.size() ? " or " : ", ") + none[i];
      std::cout << "\nNo " << list << " recorded" << (options.window ? " in the window" : "")
                << ".\n";
    }
  }
  if (!a.collectives.empty() && top > 0) {
    std::cout << "\nCollectives (nccl-tests bandwidths)\n";
    TextTable c({"collective", "type", "size", "ranks", "count", "mean us", "algbw GB/s",
                 "busbw GB/s", "transfer us", "its busbw"});
    for (std::size_t i = 2; i < 10; ++i)
      c.right_align(i);
    bool matched = false;
    for (std::size_t i = 0; i < a.collectives.size() && i < top; ++i) {
      const CollectiveStats& s = a.collectives[i];
      const bool sized = s.bytes > 0;
      const bool transfer = s.transfer_median_ns > 0;
      matched |= transfer;
      c.add({shorten(s.name, 48), std::string(to_string(s.dtype)),
             sized ? format_bytes(static_cast<double>(s.bytes)) : "-", std::to_string(s.ranks),
             std::to_string(s.count), format_fixed(s.mean_ns / 1e3, 2),
             sized ? format_fixed(s.algbw_gbps, 2) : "-",
             sized ? format_fixed(s.busbw_gbps, 2) : "-",
             transfer ? format_fixed(s.transfer_median_ns / 1e3, 2) : "-",
             transfer ? format_fixed(s.transfer_busbw_gbps, 2) : "-"});
    }
    c.print(std::cout);
    say_rows_left_out(std::min(top, a.collectives.size()), a.collectives.size());
    if (matched) {
      std::cout << "(mean: as each rank timed it, waiting for its peers included; transfer: "
                   "each call's shortest duration across the ranks, the one that joined last, "
                   "median)\n";
    }
  }
  if (a.ranks.size() > 1) {
    if (a.stragglers.stragglers.empty()) {
      std::cout << "\nNo straggler: no rank's steps or collective starts stand out.\n";
    } else {
      std::cout << "\nStragglers\n";
      for (const RankStraggler& s : a.stragglers.ranks) {
        if (s.straggler) std::cout << "  rank " << s.rank << ": " << s.reason << '\n';
      }
    }
  }
  if (options.window && r->meta(kPredictedStepMetaKey)) {
    std::cout << "\nPredicted against measured: not for a window (the plan is held against every "
                 "step past the warm-up); trace stats without "
              << o.window_flags() << " gives it\n";
  }
  if (a.prediction) {
    const PredictionComparison& p = *a.prediction;
    if (again && !o.plan_file.empty()) {
      std::cout << "\nPredicted from the plan in " << document_name(o.plan_file) << " ("
                << again->workload.value_or("?") << " on " << again->cluster.value_or("?") << ")"
                << (r->meta(std::string(kPredictedStepMetaKey)) ? ", not as the run recorded it"
                                                                : "")
                << '\n';
      for (const std::string& n : again->notes.value_or(std::vector<std::string>{}))
        std::cout << "  " << n << '\n';
    } else if (again) {
      std::cout << "\nPredicted now, on " << again->cluster.value_or("?")
                << (again->calibrated.value_or(false) ? " (calibrated)" : "")
                << ", not as the run recorded it\n";
      for (const std::string& n : again->notes.value_or(std::vector<std::string>{}))
        std::cout << "  " << n << '\n';
    }
    std::cout << (p.steps > 0
                      ? "\nPredicted against measured (per step: the mean over " +
                            std::to_string(p.steps) + " steps of all ranks together, " +
                            (p.warm_up_steps > 0 ? "each rank's warm-up left out)\n"
                                                 : "none left out as warm-up: too few steps)\n")
                      : "\nPredicted against measured (the whole trace as one step: no "
                        "per-step analysis)\n");
    // Both tables give the prediction's error against the measurement, the
    // same way (the first gave measured/predicted, the second the error).
    const auto error = trace::prediction_error_text;
    TextTable t2({"", "predicted", "measured", "error"});
    for (std::size_t i = 1; i < 4; ++i)
      t2.right_align(i);
    auto row = [&](const std::string& name, double predicted, std::optional<double> measured) {
      t2.add({name, format_seconds(predicted), measured ? format_seconds(*measured) : "-",
              measured ? error(predicted, *measured) : "-"});
    };
    row("step", p.predicted_step_s, p.measured_step_s);
    for (const auto& r2 : p.categories)
      row(r2.name, r2.predicted_s, r2.measured_s);
    for (const auto& r2 : p.parts)
      row("part: " + r2.name, r2.predicted_s, r2.measured_s);
    t2.print(std::cout);
    if (!p.breakdown.empty()) {
      const std::string note = trace::mean_against_median_note(
          p.measured_step_s, p.measured_step_median_s, p.critical_rank);
      if (!note.empty()) std::cout << note << '\n';
      std::cout << "\nEach part of the step, predicted against measured (rank " << p.critical_rank
                << ": of the stage the planner timed, the most compute; median of its "
                << trace::describe_steps(p.critical_steps, p.critical_warm_up) << ")\n";
      TextTable t3({"part", "predicted", "measured", "error", ""});
      for (std::size_t i = 1; i < 4; ++i)
        t3.right_align(i);
      t3.add({"step", format_seconds(p.predicted_step_s), format_seconds(p.measured_step_median_s),
              error(p.predicted_step_s, p.measured_step_median_s), ""});
      for (std::size_t i = 0; i < p.breakdown.size(); ++i) {
        const auto& r2 = p.breakdown[i];
        const double m = r2.measured_s.value_or(0);
        t3.add({r2.name, format_seconds(r2.predicted_s), format_seconds(m),
                error(r2.predicted_s, m),
                static_cast<int>(i) == p.largest ? "<- largest disagreement" : ""});
      }
      t3.print(std::cout);
      std::cout << p.verdict << ".\n";
    }
    if (!p.memory.empty()) {
      std::cout << "\nMemory per device, predicted (its most loaded stage) against measured (the "
                   "largest sample of any rank)\n";
      TextTable t4({"", "predicted", "measured", "error", "measured by"});
      for (std::size_t i = 1; i < 4; ++i)
        t4.right_align(i);
      for (const MemoryVsMeasured& m : p.memory) {
        t4.add({(m.under_allocated() ? "  " : "") + memory_row_label(m),
                format_bytes(m.predicted_bytes),
                m.measured_bytes ? format_bytes(*m.measured_bytes) : "-",
                m.measured_bytes ? error(m.predicted_bytes, *m.measured_bytes) : "-",
                memory_row_source(m)});
      }
      t4.print(std::cout);
      std::cout << "  " << kMemoryRowsNote << '\n';
    } else if (!p.memory_note.empty()) {
      std::cout << "\nMemory per device: " << p.memory_note << ".\n";
    }
    if (p.machine) {
      std::cout << "The machine, probed before the first step: " << p.machine->text() << ".\n";
      if (p.machine->drifted()) {
        std::cout << trace::kMachineDriftAdvice << '\n';
      }
    } else if (!p.machine_note.empty()) {
      std::cout << "Machine probe: " << p.machine_note << ".\n";
    }
  }
}

// --- export -------------------------------------------------------------

struct ExportOptions {
  std::string store;
  std::string output;
  std::string format;
  std::string table;  // empty: the events table
  std::string from, to;
  std::string steps;  // or these steps ("5", "3-7")
  std::vector<int> ranks;
  bool file_per_rank = false;
  bool critical_path = false;
  bool json = false;
};

// An export replaces an earlier export (or any text file named as its
// output), never an SQLite database: a trace store, an Nsight Systems export.
void refuse_replacing_a_database(const std::string& path) {
  if (Status s = check_export_path(path); !s) throw CliError(s.message());
}

void run_export(ExportOptions o, Context& ctx) {
  // "-" is the standard output; the summary then goes to stderr, out of the data.
  if (o.output == "-") o.output = "/dev/stdout";
  std::error_code ec;
  // /dev/stdout redirected to a file resolves to a regular file: still stdout.
  const bool to_device =
      o.output == "/dev/stdout" ||
      (std::filesystem::exists(o.output, ec) && !std::filesystem::is_regular_file(o.output, ec) &&
       !std::filesystem::is_directory(o.output, ec));
  std::ostream& summary = to_device ? std::cerr : std::cout;
  // Before any note on the output's name: it is not written at all.
  if (!to_device) refuse_replacing_a_database(o.output);
  std::string format = o.format;
  if (format.empty()) {
    // Any case: "report.HTML" was written as a Chrome trace.
    std::string ext = std::filesystem::path(o.output).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    format = ext == ".csv" ? "csv" : ext == ".html" || ext == ".htm" ? "html" : "chrome";
    if (format == "chrome" && ext != ".json" && !to_device) {
      std::cerr << "clusterscope: note: " << o.output
                << ": no --format, and the name ends in none of .json, .csv, .html: written as a "
                   "Chrome trace (JSON)\n";
    }
  }
  // An option the format has no use for is refused, not ignored.
  const bool chrome = format == "chrome" || format == "json";
  // What is being exported, for the refusals: the table only where it is
  // one (it read "not to this html all export").
  const std::string exported = chrome             ? "a Chrome trace export"
                               : format == "html" ? "an HTML export"
                               : o.table.empty()  ? "a CSV export"
                                                  : "the CSV " + o.table + " table";
  // Flags that exclude each other: a usage error (exit 2), as
  // --critical-path with --file-per-rank is.
  auto refuse = [&](bool given, const std::string& option, const std::string& applies) {
    if (given) throw UsageError(option + " applies to " + applies + ", not to " + exported);
  };
  refuse(!chrome && !o.ranks.empty(), "--rank", "Chrome traces");
  refuse(!chrome && o.file_per_rank, "--file-per-rank", "Chrome traces");
  refuse(!chrome && o.critical_path, "--critical-path", "Chrome traces");
  if (o.critical_path && o.file_per_rank)
    throw UsageError("--critical-path: a path crosses the ranks, so not with --file-per-rank");
  refuse(format != "csv" && !o.table.empty(), "--table", "CSV exports");
  // Several files are named after --output: not beside a device.
  if (to_device && (o.file_per_rank || o.table == "all")) {
    throw CliError(o.output + ": " + (o.file_per_rank ? "--file-per-rank" : "--table all") +
                   " writes several files named after -o: give a file name, not a device");
  }
  if (o.table.empty()) o.table = "events";
  if (!chrome && format != "csv" && format != "html")
    throw UsageError("--format: \"" + format + "\" is not one of chrome, csv, html");
  if (format == "csv" && o.table != "all" && !csv_table_from_string(o.table))
    throw UsageError("--table: \"" + o.table + "\" is not one of " + csv_table_names());
  auto r = open_store(o.store);
  // Per-rank files and CSV sets go in it too.
  const OutputFolder output_folder(to_device ? std::string() : o.output);
  // A window limits the events to those overlapping it, and the figures of a
  // report or a summary table to what ran in it (the app's selected range).
  const std::optional<TimeRange> window = window_of(*r, o.from, o.to, o.steps);
  const std::string window_flags = trace_window_flags(o.steps);
  WholeStoreCheck check;
  check.start(o.store);
  // A trace sent to the standard output is the output: the error goes to
  // stderr alone (--json's error document would follow the trace there).
  auto require_whole_store = [&] {
    if (!to_device) return check.require("what was written was read from it");
    if (Status checked = check.result(); !checked) {
      std::cerr << "clusterscope: error: " << checked.message()
                << " (what was written was read from it)\n";
      throw CliExitCode{1};
    }
  };
  auto analyse = [&] {
    AnalysisOptions options;
    options.window = window;
    if (!o.steps.empty()) options.steps = parse_steps(o.steps);
    if (format == "html") {  // the report's GEMM rates
      options.gemm_rates = true;
      options.presets = presets_for_peaks(ctx);
    }
    RunAnalysis analysis = take(analyze_run(*r, options));
    if (window) refuse_idle_window(*r, analysis, window_flags);
    return analysis;
  };
  // A window in a gap of the trace would give a file of no events, which no
  // import reads: refused before any file is written, so that an earlier
  // export at the output stays as it was (and a device, -o -, is left alone).
  auto refuse_window_without_events = [&](const std::vector<std::int32_t>& ranks) {
    if (!window || take(window_holds_events(*r, *window, ranks))) return;
    const TimeRange all = r->time_range();
    throw CliError(window_flags + ": no event lies in the window (the trace lasts " +
                   format_seconds(static_cast<double>(all.end_ns - all.start_ns) / 1e9) +
                   "); nothing was written");
  };
  // A Chrome trace or an events table: a file of events, not of figures.
  const bool holds_events =
      format != "html" && (format != "csv" || o.table == "events" || o.table == "all");
  ExportReport report;
  if (format == "chrome" || format == "json") {
    refuse_window_without_events({o.ranks.begin(), o.ranks.end()});
    ChromeTraceOptions options;
    options.window = window;
    options.ranks.assign(o.ranks.begin(), o.ranks.end());
    options.file_per_rank = o.file_per_rank;
    options.critical_path = o.critical_path;
    report = take(export_chrome_trace(*r, o.output, options));
  } else if (format == "csv") {
    std::vector<CsvTable> tables;
    if (o.table == "all") {
      tables.assign(std::begin(kAllCsvTables), std::end(kAllCsvTables));
    } else {
      tables = {*csv_table_from_string(o.table)};  // checked before the store was opened
    }
    std::optional<RunAnalysis> analysis;
    if (tables.size() > 1 || tables[0] != CsvTable::events) {
      analysis = analyse();
      if (!analysis->damage.empty()) throw CliError(analysis->damage + "; nothing was written");
    }
    const std::filesystem::path out(o.output);
    auto file_of = [&](CsvTable t) {
      return tables.size() == 1 ? o.output
                                : (out.parent_path() / out.stem()).string() + "." +
                                      std::string(to_string(t)) + ".csv";
    };
    for (CsvTable t : tables)
      refuse_replacing_a_database(file_of(t));  // before any is written
    if (std::find(tables.begin(), tables.end(), CsvTable::events) != tables.end())
      refuse_window_without_events({});
    // The tables as one set: a failure at the fifth (a full disk) left the
    // four before it new and the rest from an earlier export.
    std::vector<std::string> files;
    for (CsvTable t : tables)
      files.push_back(file_of(t));
    take(write_files_together(files, [&](std::size_t i, const std::string& beside) -> Status {
      auto one = export_csv(*r, analysis ? &*analysis : nullptr, tables[i], beside, window);
      if (!one) return one.error();
      report.events += one->events;
      report.bytes += one->bytes;
      return {};
    }));
    report.files = files;
  } else {  // html: the format was checked before the store was opened
    const RunAnalysis analysis = analyse();
    // A damaged store's report says so (its figures are of what could be read).
    const Status verified = check.result();
    if (!verified) std::cerr << "clusterscope: warning: " << verified.message() << '\n';
    if (verified && !analysis.damage.empty())
      std::cerr << "clusterscope: warning: " << analysis.damage << '\n';
    report = take(
        export_html_report(*r, analysis, o.output, {window, verified ? "" : verified.message()}));
  }
  for (const std::string& w : report.warnings)
    std::cerr << "clusterscope: warning: " << w << '\n';
  if (o.json) {
    summary << json_text(json{{"files", report.files},
                              {"events", report.events},
                              {"bytes", report.bytes},
                              {"warnings", report.warnings}})
            << '\n';
    if (format != "html") require_whole_store();
    return;
  }
  for (const std::string& f : report.files)
    summary << "wrote " << f << '\n';
  // A report or a summary table holds figures, not events: only the size.
  summary << "  " << (holds_events ? std::to_string(report.events) + " events, " : std::string())
          << format_bytes(static_cast<double>(report.bytes)) << '\n';
  // The report said so itself; a trace or a table fails the command.
  if (format != "html") require_whole_store();
}

// --- import and merge -----------------------------------------------------

struct ImportCliOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string align = "auto";
  std::string title;
  std::string plan_file;  // the plan the traced program ran: its prediction goes into the store
  bool json = false;
};

void run_import(const ImportCliOptions& o, Context& ctx) {
  ImportOptions options;
  options.alignment = parse_alignment(o.align);
  options.title = o.title;
  // A plan that cannot be predicted is refused before anything is imported.
  std::optional<PlanFilePrediction> planned;
  if (!o.plan_file.empty()) {
    planned = plan_file_prediction(ctx.catalog(), o.plan_file);
    options.meta.emplace_back(kPredictedStepMetaKey, json_text(to_json(planned->step)));
  }
  const OutputFolder output_folder(o.output);
  ImportReport report = take(import_traces(o.inputs, o.output, options));
  if (planned) {
    if (const std::string note = calib::plan_size_note(planned->plan, report.ranks); !note.empty())
      report.warnings.push_back(o.output + ": " + note);
  }
  for (const std::string& loss : report.losses)
    report.warnings.push_back(o.output + ": " + loss);
  if (o.json) {
    std::cout << json_text(json{{"output", o.output},
                                {"format", report.format},
                                {"ranks", report.ranks},
                                {"events", report.events},
                                {"bytes_read", report.bytes_read},
                                {"skipped", report.skipped},
                                {"clock_alignment", report.clock_alignment},
                                {"warnings", report.warnings}})
              << '\n';
    return;
  }
  std::cout << "imported " << report.events << " events of " << report.ranks
            << (report.ranks == 1 ? " rank" : " ranks") << " (" << report.format << ") into "
            << o.output << '\n';
  if (!report.clock_alignment.empty())
    std::cout << "  clocks aligned by: " << report.clock_alignment << '\n';
  for (const auto& [what, n] : report.skipped)
    std::cout << "  not imported: " << n << ' ' << what << '\n';
  for (const std::string& w : report.warnings)
    std::cerr << "clusterscope: warning: " << w << '\n';
}

struct MergeCliOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string align = "auto";
  std::string title;
  bool json = false;
};

// How bad an ending is: a failed rank outweighs a crashed one, which
// outweighs a rank cancelled (often because another crashed).
int ending_weight(std::string_view status) {
  if (status == "complete") return 0;
  if (status == "partial") return 1;  // still running: not an ending, but not complete either
  if (status == "cancelled") return 2;
  if (status == "failed") return 4;
  return 3;  // crashed, hung, interrupted, or what another writer recorded
}

// What the inputs say of the run they came from: a rank store of the
// ClusterScope engines carries its worker's command line, the same on every
// rank of one run; the merged run ends as its inputs' worst ending (the
// first of equals). What it notes of them goes to `notes`, said once the
// merge is done: before a refusal ("... of run A, ... of run B") they
// spoke of a merged run there was never going to be.
std::string merged_status(const std::vector<std::string>& inputs, std::vector<std::string>& notes) {
  std::string status = "complete";
  std::string first_engine_input, engine_command;
  for (const std::string& path : inputs) {
    auto reader = TraceReader::open(path, TraceReader::Options{/*repair=*/false});
    if (!reader) continue;  // merge_stores names what is wrong with it
    const RunInfo info = (*reader)->run();
    // Stores that record their run's id are compared by it in merge_stores,
    // which names both runs (their command lines hold it, so two runs'
    // differ there).
    const bool run_id = !(*reader)->meta(kRunIdMeta).value_or("").empty();
    if (trained_by_engine(info) && !run_id) {
      if (first_engine_input.empty()) {
        first_engine_input = path;
        engine_command = info.command_line;
      } else if (info.command_line != engine_command) {
        throw CliError(first_engine_input + " and " + path +
                       " were written by different runs (their workers' command lines differ): "
                       "merge the rank stores of one run");
      }
    }
    // A store whose writer died before closing it ended, for the merged run,
    // interrupted; one whose writer still runs is merged as it stands, a
    // partial run (it said "ended interrupted" of a run still training).
    const StoreState state = (*reader)->state();
    std::string ended = state.status;
    if (state.status == "writing") ended = state.writer_alive ? "partial" : "interrupted";
    if (ended.empty() || ended == "complete") continue;
    if (ended == "partial") {
      notes.push_back(
          path + " is still being written (its writer is running): merged as committed so far");
    } else {
      notes.push_back(path + " ended " + ended);
    }
    if (ending_weight(ended) > ending_weight(status)) status = ended;
  }
  if (status != "complete") notes.push_back("the merged run is marked " + status);
  return status;
}

void run_merge(const MergeCliOptions& o) {
  MergeOptions options;
  options.alignment = parse_alignment(o.align);
  options.run.title = o.title;
  std::vector<std::string> notes;
  options.status = merged_status(o.inputs, notes);
  const OutputFolder output_folder(o.output);
  MergeReport report = take(merge_stores(o.inputs, o.output, options));
  for (const std::string& note : notes)
    std::cerr << "clusterscope: note: " << note << '\n';
  for (const std::string& loss : report.losses)
    report.warnings.push_back(o.output + ": " + loss);
  for (const std::string& w : report.warnings)
    std::cerr << "clusterscope: warning: " << w << '\n';
  if (o.json) {
    json offsets = json::object(), methods = json::object();
    for (const auto& [rank, off] : report.offsets_ns)
      offsets[std::to_string(rank)] = off;
    for (const auto& [rank, m] : report.rank_method)
      methods[std::to_string(rank)] = m;
    std::cout << json_text(json{{"output", o.output},
                                {"ranks", report.ranks},
                                {"events", report.events},
                                {"clock_alignment", report.method},
                                {"offsets_ns", offsets},
                                {"rank_methods", methods},
                                {"warnings", report.warnings}})
              << '\n';
    return;
  }
  std::cout << "merged " << report.ranks << (report.ranks == 1 ? " rank, " : " ranks, ")
            << report.events << " events into " << o.output
            << "\n  clocks aligned by: " << report.method << '\n';
  for (const auto& [rank, off] : report.offsets_ns) {
    if (off != 0)
      std::cout << "  rank " << rank << " shifted by "
                << format_seconds(static_cast<double>(off) / 1e9) << '\n';
  }
  for (const auto& [rank, m] : report.rank_method)
    std::cout << "  rank " << rank << ": " << m << '\n';
}

}  // namespace

// --- compare --------------------------------------------------------------

struct CompareOptions {
  std::string baseline, other;
  std::int64_t top = 10;
  int threads = 0;
  bool json = false;
};

void run_compare(const CompareOptions& o) {
  AnalysisOptions options;
  options.threads = o.threads;
  auto a_reader = open_store(o.baseline);
  auto b_reader = open_store(o.other);
  WholeStoreCheck check_a, check_b;
  check_a.start(o.baseline);
  check_b.start(o.other);
  const RunComparison c = take(compare_stores(*a_reader, *b_reader, options));
  // Said before the figures: they would be of misread rows.
  check_a.require("nothing was compared");
  check_b.require("nothing was compared");
  // Said before the figures: they would lack the unreadable rows.
  take(a_reader->damage());
  take(b_reader->damage());
  const std::string basis = c.per_step ? "per rank and step" : "per rank, over the run";
  const std::size_t top = static_cast<std::size_t>(std::max<std::int64_t>(0, o.top));
  if (o.json) {
    auto figures = [&](const std::vector<ComparedFigure>& list, std::size_t limit, bool counts) {
      json j = json::array();
      for (std::size_t i = 0; i < std::min(limit, list.size()); ++i) {
        const ComparedFigure& f = list[i];
        json row = {{"name", f.name}, {"baseline_ns", f.a_ns}, {"other_ns", f.b_ns},
                    {"change_ns", f.change_ns()}};
        if (counts) {
          row["baseline_count"] = f.a_count;
          row["other_count"] = f.b_count;
        }
        j.push_back(row);
      }
      return j;
    };
    const json out = {
        {"baseline", o.baseline},
        {"other", o.other},
        {"status", {a_reader->state().status, b_reader->state().status}},
        {"basis", basis},
        {"per_step", c.per_step},
        {"ranks", {c.a_ranks, c.b_ranks}},
        {"steps", {c.a_steps, c.b_steps}},
        {"step_median_ns", {c.a_step_ns, c.b_step_ns}},
        {"parts", figures(c.parts, c.parts.size(), false)},
        {"operation_kinds", figures(c.operation_kinds, c.operation_kinds.size(), true)},
        {"kernels", figures(c.kernels, top, true)},
        {"collectives", figures(c.collectives, top, true)},
        {"api_calls", figures(c.api_calls, top, true)},
        {"memory_ops", figures(c.memory_ops, top, true)},
        {"annotations", figures(c.annotations, top, true)}};
    std::cout << json_text(out) << '\n';
    return;
  }
  auto msf = [](double ns_value) { return format_fixed(ns_value / 1e6, 3); };
  auto change = [&](const ComparedFigure& f) -> std::string {
    if (f.a_ns == 0 && f.b_ns == 0) return "0";
    const std::string sign = f.change_ns() >= 0 ? "+" : "";
    const std::string percent =
        f.a_ns > 0 ? " (" + sign + format_fixed(100 * f.change_ns() / f.a_ns, 1) + "%)" : " (new)";
    return sign + msf(f.change_ns()) + (f.b_ns > 0 || f.a_ns == 0 ? percent : " (gone)");
  };
  auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::cout << o.baseline << " (" << count(c.a_ranks, "rank", "ranks") << ", "
            << count(c.a_steps, "step", "steps") << ") against " << o.other << " ("
            << count(c.b_ranks, "rank", "ranks") << ", " << count(c.b_steps, "step", "steps")
            << "), " << basis << "\n";
  for (const auto* reader : {a_reader.get(), b_reader.get()}) {
    if (const std::string note = status_note(*reader); !note.empty())
      std::cout << "note: " << note << '\n';
  }
  if (c.a_step_ns > 0 && c.b_step_ns > 0) {
    const double d = c.b_step_ns - c.a_step_ns;
    std::cout << trace::kComparedStepName << ": " << msf(c.a_step_ns) << " ms against "
              << msf(c.b_step_ns) << " ms, " << (d >= 0 ? "+" : "") << msf(d) << " ms ("
              << (d >= 0 ? "+" : "") << format_fixed(100 * d / c.a_step_ns, 1) << "%)\n";
  }
  // The headline is the median step; the parts are means, the warm-up's
  // steps among them (a device span above the median step is that).
  std::cout << "\nWhere the time went (HTA's parts, which add up to the device span; "
            << (c.per_step ? "the mean per rank and step, the first steps included"
                           : "per rank, over the run")
            << ")\n";
  TextTable parts({"part", "baseline ms", "other ms", "change ms"});
  for (std::size_t i = 1; i < 4; ++i)
    parts.right_align(i);
  for (const ComparedFigure& f : c.parts)
    parts.add({f.name, msf(f.a_ns), msf(f.b_ns), change(f)});
  parts.print(std::cout);
  // `kernels`: the names are kernels', shortened as such.
  auto list = [&](const char* title, const std::vector<ComparedFigure>& figures,
                  bool kernels = false) {
    if (figures.empty() || top == 0) return;
    std::cout << "\n" << title << "\n";
    TextTable t({"name", "count", "baseline ms", "other ms", "change ms"});
    for (std::size_t i = 1; i < 5; ++i)
      t.right_align(i);
    std::vector<std::string> whole;
    for (std::size_t i = 0; i < std::min(top, figures.size()); ++i)
      whole.push_back(figures[i].name);
    const std::vector<std::string> names = distinct_names(whole, 60, kernels);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const ComparedFigure& f = figures[i];
      t.add({names[i], std::to_string(f.a_count) + " -> " + std::to_string(f.b_count), msf(f.a_ns),
             msf(f.b_ns), change(f)});
    }
    t.print(std::cout);
  };
  // By kind first: a precision or library change renames the kernels.
  list("Compute by operation kind (kernel names change with precision and library)",
       c.operation_kinds);
  list("Kernels whose time changed most", c.kernels, true);
  list("Collectives whose time changed most", c.collectives);
  list("CUDA API calls whose time changed most", c.api_calls);
  list("Copies and sets whose time changed most", c.memory_ops);
  list("Annotation ranges whose time changed most", c.annotations);
  if (top > 0)
    std::cout << "  count: instances in each run, all ranks"
              << (c.per_step ? ", inside its steps" : "") << "; times " << basis << "\n";
}

// --- critical path ----------------------------------------------------------

struct CriticalPathOptions {
  std::string store;
  std::string steps;  // "5", "3-7"; every step when empty
  std::int64_t top = 10;
  bool segments = false;
  bool json = false;
};

json critical_path_json(const CriticalPath& p, const TraceReader& r) {
  json segments = json::array();
  const std::int64_t origin = r.time_range().start_ns;
  for (const CriticalSegment& s : p.segments) {
    segments.push_back({{"rank", s.rank},
                        {"start_ns", s.start_ns - origin},
                        {"duration_ns", s.end_ns - s.start_ns},
                        {"part", s.part},
                        {"name", r.string(s.name)}});
  }
  return {{"step", p.step},
          {"start_ns", p.start_ns - origin},
          {"duration_ns", p.length_ns()},
          {"segments", std::move(segments)}};
}

void run_critical_path(const CriticalPathOptions& o) {
  std::optional<std::pair<std::int32_t, std::int32_t>> steps;
  if (!o.steps.empty()) {
    const auto [first, last] = parse_steps(o.steps);
    steps.emplace(first, last);
  }
  auto r = open_store(o.store);
  WholeStoreCheck check;
  if (steps) steps_window(*r, o.steps);  // refuses steps the run does not record
  check.start(o.store);
  // Every step of the run: its warm-up left out of the means, as the
  // comparison with the prediction does; steps asked for: all of them.
  const CriticalPathSummary sum = take(summarize_critical_paths(*r, steps));
  if (sum.steps == 0) throw CliError(o.store + " records no events: it has no critical path");
  const bool no_steps = take(job_step_windows(*r)).empty();
  // Each step's segments only when asked: a long run's are more than its events.
  const std::vector<CriticalPath> paths =
      o.segments ? take(critical_paths(*r, steps)) : std::vector<CriticalPath>{};
  const std::string status = status_note(*r);
  if (o.json) {
    json parts = json::object(), ranks = json::array(), ops = json::array();
    for (const auto& [part, ns] : sum.parts)
      parts[std::string(part)] = ns;
    for (const auto& [rank, ns] : sum.ranks)
      ranks.push_back({{"rank", rank}, {"per_step_ns", ns}});
    for (std::size_t i = 0; i < sum.operations.size() && i < static_cast<std::size_t>(o.top); ++i) {
      const auto& op = sum.operations[i];
      ops.push_back({{"name", r->string(op.name)},
                     {"part", op.part},
                     {"count", op.count},
                     {"per_step_ns", op.per_step_ns}});
    }
    json out = {{"store", o.store},
                {"steps", sum.steps},
                {"warm_up_steps", sum.warm_up},
                {"step_ns", sum.step_ns},
                {"parts_per_step_ns", std::move(parts)},
                {"ranks", std::move(ranks)},
                {"operations", std::move(ops)}};
    if (o.segments) {
      json all = json::array();
      for (const CriticalPath& p : paths)
        all.push_back(critical_path_json(p, *r));
      out["paths"] = std::move(all);
    }
    if (!status.empty()) out["note"] = status;
    out["whole_trace_as_one_step"] = no_steps;
    std::cout << json_text(out) << '\n';
  } else {
    if (!status.empty()) std::cout << "note: " << status << "\n\n";
    if (no_steps)
      std::cout << "note: " << o.store
                << " records no training steps: the whole trace is taken as one step\n\n";
    std::cout << "Critical path: the chain of operations, across the ranks, that set each "
                 "step's length\nMean of "
              << describe_steps(sum.steps, sum.warm_up) << "; the mean step "
              << format_seconds(sum.step_ns * 1e-9) << "\n\n";
    const auto share = [&](double ns) {
      return sum.step_ns > 0 ? format_fixed(100.0 * ns / sum.step_ns, 1) + " %" : std::string("-");
    };
    TextTable parts({"part", "per step", "share", "what"});
    parts.right_align(1);
    parts.right_align(2);
    for (const auto& [part, ns] : sum.parts) {
      parts.add({std::string(part), format_seconds(ns * 1e-9), share(ns),
                 part == "memory" ? "copies and sets" : describe_part(part)});
    }
    parts.print(std::cout);
    std::cout << "\n";
    TextTable ranks({"rank", "per step", "share"});
    ranks.right_align(0);
    ranks.right_align(1);
    ranks.right_align(2);
    for (const auto& [rank, ns] : sum.ranks)
      ranks.add({std::to_string(rank), format_seconds(ns * 1e-9), share(ns)});
    ranks.print(std::cout);
    if (o.top > 0 && !sum.operations.empty()) {
      std::cout << "\nOperations on the path, by time per step\n";
      TextTable ops({"operation", "part", "count", "per step", "share"});
      for (std::size_t c : {2, 3, 4})
        ops.right_align(c);
      const std::size_t shown = std::min(sum.operations.size(), static_cast<std::size_t>(o.top));
      std::vector<std::string> names;
      for (std::size_t i = 0; i < shown; ++i)
        names.push_back(r->string(sum.operations[i].name));
      names = distinct_names(names, 48, true);
      for (std::size_t i = 0; i < shown; ++i) {
        const auto& op = sum.operations[i];
        ops.add({names[i], std::string(op.part), format_count(static_cast<double>(op.count)),
                 format_seconds(op.per_step_ns * 1e-9), share(op.per_step_ns)});
      }
      ops.print(std::cout);
      say_rows_left_out(shown, sum.operations.size());
      std::cout << "  count: segments of it on the paths summarised, all steps together\n";
    }
    if (o.segments) {
      const std::int64_t origin = r->time_range().start_ns;
      for (const CriticalPath& p : paths) {
        std::cout << "\nStep " << p.step << ", " << format_seconds(p.length_ns() * 1e-9) << " from "
                  << format_time_ns(p.start_ns - origin) << "\n";
        TextTable seg({"start", "duration", "rank", "part", "operation"});
        seg.right_align(0);
        seg.right_align(1);
        seg.right_align(2);
        for (const CriticalSegment& s : p.segments) {
          seg.add({format_time_ns(s.start_ns - origin),
                   format_seconds((s.end_ns - s.start_ns) * 1e-9), std::to_string(s.rank),
                   std::string(s.part), shorten_kernel(r->string(s.name), 48)});
        }
        seg.print(std::cout);
      }
    }
  }
  refuse_if_damaged(*r);
  check.require("the critical path printed was read from it");
}

// --from, --to and --steps, the window of stats and export; `what` says
// what it does to the command's output.
void add_window_options(CLI::App& app, std::string& from, std::string& to, std::string& steps,
                        const std::string& what) {
  app.add_option("--from", from,
                 "Window start, from the trace's start (e.g. 1.5s, 200ms): " + what);
  app.add_option("--to", to, "Window end, from the trace's start");
  app.add_option("--steps", steps,
                 "Window of these steps (5, or 3-7), numbered from 0 as the store and the "
                 "timeline number them (clusterscope run's progress lines count from 1): from "
                 "the first's earliest start over the ranks to the last's latest end");
}

void register_trace(CLI::App& app, Context& ctx) {
  CLI::App* trace = app.add_subcommand(
      "trace",
      "Trace stores: inspect, analyse, compare, export, import other profilers' traces, merge "
      "ranks");
  trace->require_subcommand(1);

  auto info = std::make_shared<InfoOptions>();
  CLI::App* i = trace->add_subcommand("info", "Show a store's run metadata, ranks and lanes");
  i->add_option("store", info->store, "Trace store (.db)")->required();
  i->add_flag("--check", info->check,
              "Read the whole file first and check it (SQLite's structure, the event chunks)");
  add_json_flag(*i, info->json);
  i->footer(
      "With --json, each meta value is given in its JSON type: an object or array embedded, a "
      "number as a number, true/false as booleans, anything else as a string.");
  i->callback([info] { run_info(*info); });

  auto stats = std::make_shared<StatsOptions>();
  CLI::App* s = trace->add_subcommand(
      "stats",
      "Per-rank breakdown (compute, communication, overlap, idle), top kernels and "
      "collectives, stragglers, predicted against measured");
  s->add_option("store", stats->store, "Trace store")->required();
  s->add_option("--top", stats->top, "Kernels and collectives to list")
      ->check(non_negative_number());
  s->add_flag("--no-steps", stats->no_steps,
              "Leave each rank's per-step breakdowns out of the JSON (the comparison with the "
              "prediction still takes the steps)");
  s->add_option("--threads", stats->threads, "Ranks analysed at once (default: one per core)")
      ->check(non_negative_int());
  s->add_flag("--predict-again", stats->predict_again,
              "Hold the run against the planner's prediction made now, with the presets at hand "
              "(the run's calibrated cluster, or --cluster), instead of the one it recorded");
  s->add_option("--cluster", stats->cluster,
                "With --predict-again: the cluster preset to predict on");
  s->add_option("--plan", stats->plan_file,
                "Hold the run against the planner's prediction of this plan (a plan JSON "
                "document, as `clusterscope plan --plan` reads; - reads standard input): for a "
                "program of your own, profiled or imported, which records none, or to try "
                "another plan against a recorded run");
  s->add_flag("--streams", stats->streams,
              "Also each stream's idle time by cause and its queue of launched operations (HTA's "
              "idle time breakdown and queue length; always in the JSON)");
  add_window_options(*s, stats->from, stats->to, stats->steps,
                     "a selected range, as in the app; the breakdown of the time inside it, the "
                     "tables of every operation that overlaps it, whole");
  add_json_flag(*s, stats->json);
  s->callback([stats, &ctx] { run_stats(*stats, ctx); });

  auto cmp = std::make_shared<CompareOptions>();
  CLI::App* c = trace->add_subcommand(
      "compare",
      "Two runs side by side (a baseline and a run after a change): the step, where the time "
      "went, and the kernels, collectives, CUDA API calls, copies and ranges whose time changed "
      "most, per rank and step");
  c->add_option("baseline", cmp->baseline, "The baseline run's store")->required();
  c->add_option("other", cmp->other, "The run to hold against it")->required();
  c->add_option("--top", cmp->top, "Kernels and collectives to list")
      ->check(non_negative_number());
  c->add_option("--threads", cmp->threads, "Ranks analysed at once (default: one per core)")
      ->check(non_negative_int());
  add_json_flag(*c, cmp->json);
  c->callback([cmp] { run_compare(*cmp); });

  auto exp = std::make_shared<ExportOptions>();
  CLI::App* e = trace->add_subcommand(
      "export",
      "Write a store as Chrome trace JSON (Perfetto), CSV or a self-contained HTML report");
  e->add_option("store", exp->store, "Trace store")->required();
  e->add_option("-o,--output,--out", exp->output, "Output file (its extension picks the format)")
      ->required();
  e->add_option("--format", exp->format, "chrome (also json), csv or html")
      ->check(CLI::IsMember({"chrome", "json", "csv", "html"}));
  e->add_option("--table", exp->table,
                "CSV table: " + csv_table_names() + " (one file each, named after --output)");
  add_window_options(*e, exp->from, exp->to, exp->steps,
                     "the events overlapping the window; a report's or a summary table's "
                     "breakdown of the time inside it, its other tables of every operation that "
                     "overlaps it, whole");
  e->add_option("--rank", exp->ranks, "Only these ranks (Chrome JSON)")->check(non_negative_int());
  e->add_flag("--file-per-rank", exp->file_per_rank,
              "Chrome JSON: one file per rank, as Holistic Trace Analysis reads them");
  e->add_flag("--critical-path", exp->critical_path,
              "Chrome JSON: each step's critical path (trace critical-path) as a process of its "
              "own above the ranks");
  add_json_flag(*e, exp->json);
  e->callback([exp, &ctx] { run_export(*exp, ctx); });  // a copy: "-" is rewritten

  auto imp = std::make_shared<ImportCliOptions>();
  CLI::App* im = trace->add_subcommand(
      "import",
      "Import PyTorch profiler (Kineto) or other Chrome trace-event JSON traces, or Nsight "
      "Systems SQLite exports, one file per rank, into one store");
  im->add_option("files", imp->inputs, "Trace files")->required();
  im->add_option("-o,--output,--out", imp->output, "Store to write")->required();
  im->add_option("--align", imp->align,
                 "Clock alignment of several files: auto, recorded, "
                 "collectives or none");
  im->add_option("--title", imp->title, "Run title");
  im->add_option("--plan", imp->plan_file,
                 "The plan the traced program ran (a plan JSON document): the planner's "
                 "prediction of it goes into the store, which `trace stats`, the report and the "
                 "app hold the run against");
  add_json_flag(*im, imp->json);
  im->callback([imp, &ctx] { run_import(*imp, ctx); });

  auto cp = std::make_shared<CriticalPathOptions>();
  CLI::App* cpa = trace->add_subcommand(
      "critical-path",
      "The chain of operations across the ranks that set each step's length (HTA's critical "
      "path): where a collective or a pipeline receive waited, the path goes on through the "
      "rank it waited for; its time by part, by rank and by operation");
  cpa->add_option("store", cp->store, "Trace store")->required();
  cpa->add_option("--steps", cp->steps,
                  "These steps only (5, or 3-7), numbered from 0 as the store and the timeline "
                  "number them; default: every step, the warm-up left out of the means");
  cpa->add_option("--top", cp->top, "Operations to list")->check(non_negative_number());
  cpa->add_flag("--segments", cp->segments,
                "Also each step's path, segment by segment (start, duration, rank, operation)");
  add_json_flag(*cpa, cp->json);
  cpa->callback([cp] { run_critical_path(*cp); });

  auto mrg = std::make_shared<MergeCliOptions>();
  CLI::App* m = trace->add_subcommand("merge", "Merge per-rank stores into one run store");
  m->add_option("stores", mrg->inputs, "Per-rank stores")->required();
  m->add_option("-o,--output,--out", mrg->output, "Run store to write")->required();
  m->add_option("--align", mrg->align, "auto, recorded, collectives or none");
  m->add_option("--title", mrg->title, "Run title");
  add_json_flag(*m, mrg->json);
  m->callback([mrg] { run_merge(*mrg); });
}

}  // namespace cs::cli
