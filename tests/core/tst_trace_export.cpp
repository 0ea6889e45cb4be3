// Exports of real stores (the imported Kineto and nsys traces): the Chrome
// trace JSON parsed back — processes and threads named, slices nested on
// every thread, times in microseconds that give back the stored nanoseconds,
// HTA's args; time-window and per-rank exports; CSV tables that parse; an
// HTML report that needs nothing from the network; failures naming the file.

#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sys/resource.h>

#include "core/breakdown_parts.h"
#include "core/elided_name.h"
#include "core/format.h"
#include "core/prediction_text.h"
#include "core/trace_analysis.h"
#include "core/trace_critical_path.h"
#include "core/trace_export.h"
#include "core/trace_import.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "core/utf8.h"

using namespace cs::trace;
using nlohmann::json;

namespace {

const std::string kKineto = CS_DATA_DIR "/validation/kineto/";
const std::string kNsys = CS_DATA_DIR "/validation/nsys/saxpy-mpi-cuda.sqlite";
const std::string kCpuEngine = CS_DATA_DIR "/cpu/cpu-engine-dp2.db";
const std::string kGpuBf16 = CS_DATA_DIR "/gpu/worker-bf16.db";

// A copy of a store fixture, opened: a version-1 store is migrated in place.
std::unique_ptr<TraceReader> opened_copy(const QTemporaryDir& dir, const std::string& store,
                                         const char* name) {
  const std::string copy = dir.filePath(name).toStdString();
  std::filesystem::copy_file(store, copy, std::filesystem::copy_options::overwrite_existing);
  auto r = TraceReader::open(copy);
  if (!r) qFatal("%s", r.message().c_str());
  return std::move(r).value();
}

// Every event of a store as text, in one order, with what the store keeps of
// it: its rank and lane (kind, name), fields, details and times.
std::vector<std::string> event_rows(const TraceReader& r) {
  std::vector<std::string> rows;
  cs::Status s = r.for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& se) {
    const Event& e = se.event;
    const LaneInfo* lane = r.lane(e.lane);
    std::ostringstream row;
    row.precision(17);
    row << se.rank << '|' << to_string(lane->kind) << '|' << lane->name << '|' << to_string(e.kind)
        << '|' << to_string(e.category) << '|' << r.string(e.name) << '|' << e.start_ns << '|'
        << e.end_ns << '|' << e.correlation << '|' << e.bytes << '|' << e.flops << '|'
        << to_string(e.collective) << '|' << to_string(e.dtype) << '|' << e.count << '|' << e.peer
        << '|' << e.group_size << '|' << e.step;
    rows.push_back(row.str());
    return true;
  });
  if (!s) qFatal("%s", s.message().c_str());
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> lane_rows(const TraceReader& r) {
  std::vector<std::string> rows;
  for (const LaneInfo& l : r.lanes())
    rows.push_back(std::to_string(l.rank) + '|' + std::string(to_string(l.kind)) + '|' + l.name +
                   '|' + std::to_string(l.sort_index));
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> counter_rows(const TraceReader& r) {
  std::vector<std::string> rows;
  auto series = r.counter_series();
  if (!series) qFatal("%s", series.message().c_str());
  for (const CounterSeries& s : *series) {
    const std::vector<CounterSample> samples = r.counters(s.rank, s.name).value();
    for (const CounterSample& c : samples) {
      std::ostringstream row;
      row << s.rank << '|' << r.string(s.name) << '|' << c.time_ns << '|' << c.value;
      rows.push_back(row.str());
    }
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// The track Perfetto puts a counter event on: its name and its args key
// ("<name> <key>"), one track per key.
std::string perfetto_counter_track(const json& e) {
  if (e["args"].size() != 1) qFatal("a counter event of %zu series", e["args"].size());
  return e["name"].get<std::string>() + ' ' + e["args"].begin().key();
}

// What `trace stats` prints per rank and for the prediction, as numbers.
std::vector<double> stats_figures(const TraceReader& r) {
  auto a = analyze_run(r);
  if (!a) qFatal("%s", a.message().c_str());
  std::vector<double> out;
  for (const RankAnalysis& rank : a->ranks) {
    const Breakdown& b = rank.total;
    for (std::int64_t v : {b.span_ns, b.compute_ns, b.communication_ns, b.overlap_ns,
                           b.exposed_communication_ns, b.memory_ns, b.idle_ns, b.events})
      out.push_back(static_cast<double>(v));
    out.push_back(static_cast<double>(rank.steps.size()));
    for (const StepBreakdown& s : rank.steps)
      out.push_back(static_cast<double>(s.breakdown.span_ns));
  }
  for (const CollectiveStats& c : a->collectives) {
    out.push_back(static_cast<double>(c.bytes));
    out.push_back(c.busbw_gbps);
  }
  for (const KernelStats& k : a->kernels)
    out.push_back(static_cast<double>(k.total_ns));
  if (a->prediction) {
    out.push_back(a->prediction->measured_step_s);
    for (const auto& row : a->prediction->parts)
      out.push_back(row.measured_s.value_or(-1));
    for (const auto& row : a->prediction->breakdown)
      out.push_back(row.measured_s.value_or(-1));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::unique_ptr<TraceReader> imported(const QTemporaryDir& dir,
                                      const std::vector<std::string>& files, const char* name) {
  const std::string out = dir.filePath(name).toStdString();
  auto report = import_traces(files, out);
  if (!report) qFatal("%s", report.message().c_str());
  auto r = TraceReader::open(out);
  if (!r) qFatal("%s", r.message().c_str());
  return std::move(r).value();
}

// "1234.567" → 1234567 ns, from the number's own text.
std::int64_t micros_to_ns(const json& v) {
  std::ostringstream text;
  text << v.dump();
  const std::string s = text.str();
  const auto dot = s.find('.');
  const std::int64_t whole = std::stoll(s.substr(0, dot));
  std::int64_t frac = 0;
  if (dot != std::string::npos) {
    std::string f = s.substr(dot + 1);
    f.resize(3, '0');
    frac = std::stoll(f);
  }
  return whole * 1000 + (whole < 0 ? -frac : frac);
}

std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

class TestTraceExport : public QObject {
  Q_OBJECT

 private slots:
  void chromeTraceParsesBack();
  void ownExportImportsBack_data();
  void ownExportImportsBack();
  void stepsAreNamedAsHtaFindsThem();
  void ownExportWithAPidThatIsNoRankIsRefused();
  void criticalPathIsAProcessOfItsOwn();
  void ownExportRowsOfTheWrongKindAreNamed_data();
  void ownExportRowsOfTheWrongKindAreNamed();
  void collectivesSizedUnderKinetoNames();
  void flowsJoinCallsToTheirGpuWork_data();
  void flowsJoinCallsToTheirGpuWork();
  void counterNamesReadOnceInPerfetto_data();
  void counterNamesReadOnceInPerfetto();
  void countersBeforeTheFirstEventAreExported();
  void windowKeepsTheCounterValueInEffect();
  void textThatIsNotUtf8IsReplaced_data();
  void textThatIsNotUtf8IsReplaced();
  void predictionCsvKeepsFullPrecision();
  void reportSaysWhatTraceStatsSays();
  void windowCountsFromItsEarliestEvent_data();
  void windowCountsFromItsEarliestEvent();
  void stepChartSaysWhichRanksItDraws_data();
  void stepChartSaysWhichRanksItDraws();
  void chromeTraceWindowAndRanks();
  void ranksWithLanesButNoRankRowAreExported();
  void filePerRankRefusesARankWithNoEvent_data();
  void filePerRankRefusesARankWithNoEvent();
  void chromeTraceWarnsWhenLarge();
  void csvTables();
  void csvFieldsReadBackWhole_data();
  void csvFieldsReadBackWhole();
  void htmlReportIsSelfContained();
  void htmlReportCutsLongNamesByCharacter();
  void elidedName_data();
  void elidedName();
  void longNamesElidedInTheReportWholeInTheData_data();
  void longNamesElidedInTheReportWholeInTheData();
  void htmlReportSaysWhatItCovers();
  void failuresNameTheFile();
  void failedExportKeepsTheEarlierFile();
};

void TestTraceExport::chromeTraceParsesBack() {
  QTemporaryDir dir;
  auto r = imported(dir, {kKineto + "sampled_rank-0.json.gz", kKineto + "sampled_rank-1.json.gz"},
                    "two.cstrace");
  const std::string path = dir.filePath("two.json").toStdString();
  auto report = export_chrome_trace(*r, path);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, r->event_count());
  QVERIFY(report->warnings.empty());
  const json doc = json::parse(read_file(path));
  QCOMPARE(doc["distributedInfo"]["world_size"].get<int>(), 128);
  const std::int64_t base = doc["baseTimeNanoseconds"].get<std::int64_t>();
  QCOMPARE(base, r->time_range().start_ns);

  std::map<std::int64_t, std::string> process_names;
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> thread_names;
  std::map<std::pair<std::int64_t, std::int64_t>,
           std::vector<std::pair<std::int64_t, std::int64_t>>>
      slices;
  std::int64_t x = 0, kernels_with_stream = 0;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
      if (e["name"] == "thread_name") thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
      continue;
    }
    if (ph == "s" || ph == "f") continue;  // flow arrows (flowsJoinCallsToTheirGpuWork)
    QCOMPARE(ph, std::string("X"));
    ++x;
    const std::int64_t start = micros_to_ns(e["ts"]) + base;
    const std::int64_t dur = micros_to_ns(e["dur"]);
    QVERIFY(dur >= 0);
    slices[{e["pid"], e["tid"]}].emplace_back(start, start + dur);
    QVERIFY2(thread_names.count({e["pid"], e["tid"]}), "a slice on an unnamed thread");
    if (e["cat"] == "kernel") {
      QVERIFY(e["args"].contains("stream"));
      QVERIFY(e["args"].contains("correlation"));
      ++kernels_with_stream;
    }
  }
  QCOMPARE(x, r->event_count());
  QCOMPARE(process_names.size(), std::size_t{2});
  QVERIFY(QString::fromStdString(process_names[1]).startsWith("Rank 1"));
  QCOMPARE(thread_names.size(), r->lanes().size());
  QCOMPARE(kernels_with_stream, 1154 + 1104);

  // Slices nest on every thread: Perfetto lays out none of them aside.
  for (auto& [thread, list] : slices) {
    std::sort(list.begin(), list.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::int64_t> open;
    for (const auto& [s, e] : list) {
      while (!open.empty() && open.back() <= s)
        open.pop_back();
      QVERIFY2(
          open.empty() || e <= open.back(),
          qPrintable(
              QString("thread %1: [%2, %3) crosses its parent").arg(thread.second).arg(s).arg(e)));
      open.push_back(e);
    }
  }

  // Exact nanoseconds: the first kernel of the allreduce trace ("ts": 4458676983543.183).
  auto one = imported(dir, {kKineto + "allreduce_rank-0.json.gz"}, "one.cstrace");
  const std::string one_path = dir.filePath("one.json").toStdString();
  QVERIFY(export_chrome_trace(*one, one_path));
  const json one_doc = json::parse(read_file(one_path));
  QCOMPARE(one_doc["distributedInfo"]["rank"].get<int>(), 0);
  const std::int64_t one_base = one_doc["baseTimeNanoseconds"];
  // The Kineto trace's own base (1711964646000000000) plus its ts.
  const std::int64_t kernel_start = 1711964646000000000 + 4458676983543183;
  bool found = false;
  for (const json& e : one_doc["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].value("correlation", 0) == 57541 && e["cat"] == "kernel") {
      QCOMPARE(micros_to_ns(e["ts"]) + one_base, kernel_start);
      QCOMPARE(micros_to_ns(e["dur"]), 41407);
      found = true;
    }
  }
  QVERIFY(found);
  // Imported again, the export gives back the same times, not times from zero.
  auto again = imported(dir, {one_path}, "again.cstrace");
  QCOMPARE(again->time_range().start_ns, one->time_range().start_ns);
  auto kernels = again->find_events("void cudnn::bn_bw_1C11_kernel_new", NameMatch::substring, 1000);
  QVERIFY(kernels);
  const auto kernel = std::find_if(kernels->begin(), kernels->end(),
                                   [](const StoredEvent& stored) { return stored.event.correlation == 57541; });
  QVERIFY(kernel != kernels->end());
  QCOMPARE(kernel->event.start_ns, kernel_start);
}

// This product's export imported again is the store it came from: ranks
// (each pid, with its host, device and pid), lanes (kinds and names as they
// were), every event's fields and details, the steps table, the counters, the
// run's meta (its prediction) and so what `trace stats` says.
void TestTraceExport::ownExportImportsBack_data() {
  QTest::addColumn<QString>("store");
  QTest::addColumn<bool>("filePerRank");
  // With each step's critical path: a process of its own, left out again.
  QTest::addColumn<bool>("criticalPath");
  QTest::addRow("cpu engine, 2 ranks") << QString::fromStdString(kCpuEngine) << false << false;
  QTest::addRow("cpu engine, a file per rank")
      << QString::fromStdString(kCpuEngine) << true << false;
  QTest::addRow("cuda engine bf16") << QString::fromStdString(kGpuBf16) << false << false;
  QTest::addRow("cpu engine, its critical path")
      << QString::fromStdString(kCpuEngine) << false << true;
  QTest::addRow("cuda engine bf16, its critical path")
      << QString::fromStdString(kGpuBf16) << false << true;
}

// HTA finds a trace's iterations by PyTorch's "ProfilerStep#N" annotations;
// the engines' steps went out as "step N" user annotations, in which HTA
// finds no iteration (its temporal breakdown and critical path need them).
// The stored name goes in the args, and an import gives it back.
void TestTraceExport::stepsAreNamedAsHtaFindsThem() {
  QTemporaryDir dir;
  auto r = opened_copy(dir, kCpuEngine, "store.cstrace");
  const std::string path = dir.filePath("store.json").toStdString();
  ChromeTraceOptions options;
  options.file_per_rank = true;
  auto exported = export_chrome_trace(*r, path, options);
  QVERIFY2(exported, exported ? "" : exported.message().c_str());
  std::set<std::string> stored;
  cs::Status s = r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& se) {
    if (se.event.kind == EventKind::step) stored.insert(r->string(se.event.name));
    return true;
  });
  QVERIFY(s);
  QVERIFY(!stored.empty());
  for (const std::string& file : exported->files) {
    std::ifstream in(file);
    const json doc = json::parse(in);
    int steps = 0;
    for (const json& e : doc["traceEvents"]) {
      if (e.value("ph", "") != "X" || e["args"].value("kind", "") != "step") continue;
      ++steps;
      QCOMPARE(e["cat"].get<std::string>(), std::string("user_annotation"));
      QCOMPARE(e["name"].get<std::string>(),
               "ProfilerStep#" + std::to_string(e["args"]["step"].get<int>()));
      QVERIFY2(stored.count(e["args"]["stored_name"].get<std::string>()), e.dump().c_str());
    }
    QVERIFY2(steps > 0, file.c_str());
  }
}

void TestTraceExport::ownExportImportsBack() {
  QFETCH(QString, store);
  QFETCH(bool, filePerRank);
  QFETCH(bool, criticalPath);
  QTemporaryDir dir;
  auto r = opened_copy(dir, store.toStdString(), "store.cstrace");
  const std::string path = dir.filePath("store.json").toStdString();
  ChromeTraceOptions options;
  options.file_per_rank = filePerRank;
  options.critical_path = criticalPath;
  auto exported = export_chrome_trace(*r, path, options);
  QVERIFY2(exported, exported ? "" : exported.message().c_str());
  const std::string back = dir.filePath("back.cstrace").toStdString();
  auto report = import_traces(exported->files, back);
  QVERIFY2(report, report ? "" : report.message().c_str());
  for (const std::string& w : report->warnings) {
    QVERIFY2(w.find("rank") == std::string::npos, w.c_str());
    QVERIFY2(w.find("critical_path") == std::string::npos, w.c_str());
  }
  QCOMPARE(report->skipped.count("counter events (ph C)"), std::size_t{0});
  // Said as what it is (it read "(kineto)").
  QCOMPARE(report->format, std::string("clusterscope export"));
  auto b = TraceReader::open(back).value();

  QCOMPARE(b->ranks().size(), r->ranks().size());
  for (std::size_t i = 0; i < r->ranks().size(); ++i) {
    QCOMPARE(b->ranks()[i].rank, r->ranks()[i].rank);
    QCOMPARE(b->ranks()[i].host, r->ranks()[i].host);
    QCOMPARE(b->ranks()[i].device, r->ranks()[i].device);
    QCOMPARE(b->ranks()[i].pid, r->ranks()[i].pid);
  }
  QCOMPARE(b->run().title, r->run().title);
  QCOMPARE(b->run().source, r->run().source);
  QCOMPARE(b->meta("predicted_step"), r->meta("predicted_step"));
  QCOMPARE(b->meta("machine_probe"), r->meta("machine_probe"));
  QCOMPARE(lane_rows(*b), lane_rows(*r));
  QCOMPARE(b->event_count(), r->event_count());
  QCOMPARE(event_rows(*b), event_rows(*r));
  auto steps_a = r->steps().value(), steps_b = b->steps().value();
  QVERIFY(!steps_a.empty());
  QCOMPARE(steps_b.size(), steps_a.size());
  for (std::size_t i = 0; i < steps_a.size(); ++i) {
    QCOMPARE(steps_b[i].rank, steps_a[i].rank);
    QCOMPARE(steps_b[i].step, steps_a[i].step);
    QCOMPARE(steps_b[i].start_ns, steps_a[i].start_ns);
    QCOMPARE(steps_b[i].end_ns, steps_a[i].end_ns);
    QCOMPARE(steps_b[i].loss, steps_a[i].loss);
    QCOMPARE(steps_b[i].tokens, steps_a[i].tokens);
  }
  QVERIFY(!counter_rows(*r).empty());
  QCOMPARE(counter_rows(*b), counter_rows(*r));
  QCOMPARE(stats_figures(*b), stats_figures(*r));
}

// `--critical-path`: each step's path on a process of its own above the
// ranks, a "step N" slice holding its segments end to end, each with its
// part and rank, as trace::critical_paths finds them; not in one file per rank.
void TestTraceExport::criticalPathIsAProcessOfItsOwn() {
  QTemporaryDir dir;
  auto r = opened_copy(dir, kCpuEngine, "store.cstrace");
  const std::string path = dir.filePath("path.json").toStdString();
  ChromeTraceOptions options;
  options.critical_path = true;
  auto exported = export_chrome_trace(*r, path, options);
  QVERIFY2(exported, exported ? "" : exported.message().c_str());
  const json doc = json::parse(read_file(path));
  QCOMPARE(doc["otherData"]["critical_path_pid"].get<std::int64_t>(), kCriticalPathPid);
  const std::int64_t base = doc["baseTimeNanoseconds"].get<std::int64_t>();
  auto ns = [&](const json& e, const char* key) {
    return static_cast<std::int64_t>(std::llround(e[key].get<double>() * 1000));
  };
  bool named = false;
  std::map<int, std::pair<std::int64_t, std::int64_t>> step_slices;  // step -> [start, end)
  std::map<int, std::int64_t> covered;                               // step -> segments' time
  std::set<int> ranks;
  for (const json& e : doc["traceEvents"]) {
    if (e["pid"] != kCriticalPathPid) continue;
    if (e["ph"] == "M" && e["name"] == "process_name") named = e["args"]["name"] == "Critical path";
    if (e["ph"] != "X") continue;
    QCOMPARE(e["cat"].get<std::string>(), std::string("critical_path"));
    const int step = e["args"]["step"].get<int>();
    const std::int64_t start = base + ns(e, "ts"), end = start + ns(e, "dur");
    if (!e["args"].contains("part")) {
      QCOMPARE(e["name"].get<std::string>(), "step " + std::to_string(step));
      step_slices[step] = {start, end};
      continue;
    }
    const std::string part = e["args"]["part"].get<std::string>();
    QVERIFY2(
        part == "idle" || part == "memory" ||
            std::find(kStepPartNames.begin(), kStepPartNames.end(), part) != kStepPartNames.end(),
        part.c_str());
    ranks.insert(e["args"]["rank"].get<int>());
    covered[step] += end - start;
  }
  QVERIFY(named);
  auto paths = critical_paths(*r);
  QVERIFY2(paths, paths ? "" : paths.message().c_str());
  QCOMPARE(step_slices.size(), paths->size());
  for (const CriticalPath& p : *paths) {
    QVERIFY(step_slices.count(p.step));
    const auto [start, end] = step_slices[p.step];
    QVERIFY(start >= p.start_ns && end == p.end_ns);
    // The segments fill their step's slice (microseconds to 3 decimals: a
    // nanosecond of rounding a segment).
    QVERIFY2(
        std::abs(covered[p.step] - (end - start)) <= static_cast<std::int64_t>(p.segments.size()),
        qPrintable(
            QString("step %1: %2 of %3 ns").arg(p.step).arg(covered[p.step]).arg(end - start)));
  }
  QCOMPARE(ranks, (std::set<int>{0, 1}));  // the path crosses between the ranks

  options.file_per_rank = true;
  auto refused = export_chrome_trace(*r, dir.filePath("per-rank.json").toStdString(), options);
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("crosses the ranks") != std::string::npos,
           refused.message().c_str());
}

// A file that says it is this product's export but whose processes are not
// ranks is refused by name, not merged into one rank.
void TestTraceExport::ownExportWithAPidThatIsNoRankIsRefused() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("odd.json").toStdString();
  std::ofstream(path)
      << R"({"otherData":{"producer":"ClusterScope"},"traceEvents":[)"
      << R"({"ph":"X","cat":"cpu_op","name":"a","pid":"host","tid":1,"ts":1,"dur":1}]})";
  auto report = import_traces({path}, dir.filePath("odd.cstrace").toStdString());
  QVERIFY(!report);
  QVERIFY2(report.message().find("pid host is not a rank") != std::string::npos,
           report.message().c_str());
}

// otherData's rows are read field by field: a value of the wrong type or
// out of range is named where it sits. It was an internal error (exit 3)
// that left a partial store behind, or a store written and then refused,
// at every later analysis, as damaged.
void TestTraceExport::ownExportRowsOfTheWrongKindAreNamed_data() {
  QTest::addColumn<QString>("rows");
  QTest::addColumn<QString>("error");
  QTest::addRow("lane kind a number") << R"("lanes":[{"tid":7,"rank":0,"kind":99,"name":"x"}])"
                                      << "/otherData/lanes/0/kind: must be a string";
  QTest::addRow("rank a string") << R"("ranks":[{"rank":"0"}])"
                                 << "/otherData/ranks/0/rank: must be an integer";
  QTest::addRow("pid a string") << R"("ranks":[{"rank":0,"pid":"abc"}])"
                                << "/otherData/ranks/0/pid: must be an integer";
  QTest::addRow("negative rank") << R"("ranks":[{"rank":-7}])"
                                 << "/otherData/ranks/0/rank: must be >= 0 (got -7)";
  QTest::addRow("step start a string")
      << R"("steps":[{"rank":0,"step":0,"start_ns":"a","end_ns":5}])"
      << "/otherData/steps/0/start_ns: must be an integer";
  QTest::addRow("step ending before it starts")
      << R"("steps":[{"rank":0,"step":0,"start_ns":100,"end_ns":5}])"
      << "/otherData/steps/0/end_ns: must not be before start_ns (got 5, start_ns 100)";
  QTest::addRow("time past 64 bits")
      << R"("steps":[{"rank":0,"step":0,"start_ns":0,"end_ns":18446744073709551615}])"
      << "/otherData/steps/0/end_ns: must fit in a 64-bit integer (got 18446744073709551615)";
  QTest::addRow("a row not an object") << R"("ranks":[3])"
                                       << "/otherData/ranks/0: must be an object";
}

void TestTraceExport::ownExportRowsOfTheWrongKindAreNamed() {
  QFETCH(QString, rows);
  QFETCH(QString, error);
  QTemporaryDir dir;
  const std::string path = dir.filePath("edited.json").toStdString();
  std::ofstream(path) << R"({"traceEvents":[{"ph":"X","name":"k","ts":10,"dur":5,"pid":0,"tid":7,)"
                      << R"("cat":"kernel"}],"otherData":{"producer":"ClusterScope",)"
                      << R"("clusterscope_export_version":1,)" << rows.toStdString() << "}}";
  const std::string out = dir.filePath("edited.cstrace").toStdString();
  auto report = import_traces({path}, out);
  QVERIFY(!report);
  QCOMPARE(QString::fromStdString(report.message()), QString::fromStdString(path) + ": " + error);
  // Nothing is left beside the store it would have been.
  QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList{"edited.json"});
}

// Collectives carry PyTorch's size args ("Collective name", "In msg nelems",
// "Out msg nelems", "Group size", "dtype"): read as a Kineto reader reads
// them (the file without this product's marker), the export of an imported
// Kineto trace gives back its sized collectives.
void TestTraceExport::collectivesSizedUnderKinetoNames() {
  QTemporaryDir dir;
  auto r = imported(dir, {kKineto + "allreduce_rank-0.json.gz"}, "ar.cstrace");
  auto sized = [](const TraceReader& store) {
    std::vector<std::string> rows;
    const RunAnalysis a = analyze_run(store).value();
    for (const CollectiveStats& c : a.collectives) {
      if (c.bytes > 0)
        rows.push_back(std::string(to_string(c.collective)) + '|' + c.name + '|' +
                       std::string(to_string(c.dtype)) + '|' + std::to_string(c.bytes) + '|' +
                       std::to_string(c.count));
    }
    return rows;
  };
  const auto before = sized(*r);
  QCOMPARE(before.size(), std::size_t{7});
  const std::string path = dir.filePath("ar.json").toStdString();
  QVERIFY(export_chrome_trace(*r, path));
  json doc = json::parse(read_file(path));
  int collectives = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || !e["args"].contains("collective")) continue;
    ++collectives;
    const json& args = e["args"];
    const std::string collective = args["collective"];  // all_reduce and broadcast here
    QCOMPARE(args["Collective name"].get<std::string>(),
             collective == "all_reduce" ? std::string("allreduce") : collective);
    QVERIFY(args["dtype"] == "Float" || args["dtype"] == "Long");
    QCOMPARE(args["Group size"].get<int>(), 2);
    QCOMPARE(args["In msg nelems"].get<std::int64_t>(), args["count"].get<std::int64_t>());
    QCOMPARE(args["Out msg nelems"].get<std::int64_t>(), args["count"].get<std::int64_t>());
  }
  QVERIFY(collectives > 0);
  doc.erase("otherData");
  const std::string foreign = dir.filePath("foreign.json").toStdString();
  std::ofstream(foreign) << doc.dump();
  auto again = imported(dir, {foreign}, "again.cstrace");
  QCOMPARE(sized(*again), before);
}

// Kineto's flow arrows ("ph" s and f, cat ac2g): one per correlation that
// joins a runtime or driver call to GPU work, from the call's start on its
// thread to the work's start on its stream (bp "e"), ids unique in the file.
void TestTraceExport::flowsJoinCallsToTheirGpuWork_data() {
  QTest::addColumn<QString>("store");
  QTest::addColumn<QStringList>("kineto");
  QTest::addRow("cuda engine bf16 (CUPTI)") << QString::fromStdString(kGpuBf16) << QStringList{};
  QTest::addRow("kineto, 2 ranks in one file")
      << QString()
      << QStringList{QString::fromStdString(kKineto + "sampled_rank-0.json.gz"),
                     QString::fromStdString(kKineto + "sampled_rank-1.json.gz")};
}

void TestTraceExport::flowsJoinCallsToTheirGpuWork() {
  QFETCH(QString, store);
  QFETCH(QStringList, kineto);
  QTemporaryDir dir;
  std::unique_ptr<TraceReader> r;
  if (!store.isEmpty()) {
    r = opened_copy(dir, store.toStdString(), "store.cstrace");
  } else {
    std::vector<std::string> files;
    for (const QString& f : kineto)
      files.push_back(f.toStdString());
    r = imported(dir, files, "store.cstrace");
  }
  // The correlations the store links: a call on a host lane, work on a stream.
  std::map<std::pair<std::int32_t, std::int64_t>, std::int64_t> call_start, work_start;
  QVERIFY(r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& se) {
    const Event& e = se.event;
    if (e.correlation == 0) return true;
    const bool gpu = r->lane(e.lane)->kind == LaneKind::gpu_stream;
    if (!gpu && e.kind != EventKind::api_call && e.kind != EventKind::sync) return true;
    auto& first = (gpu ? work_start : call_start)[{se.rank, e.correlation}];
    first = first == 0 ? e.start_ns : std::min(first, e.start_ns);
    return true;
  }));
  std::int64_t linked = 0;
  for (const auto& [key, start] : call_start)
    linked += work_start.count(key);
  QVERIFY(linked > 100);

  const std::string path = dir.filePath("store.json").toStdString();
  QVERIFY(export_chrome_trace(*r, path));
  const json doc = json::parse(read_file(path));
  const std::int64_t base = doc["baseTimeNanoseconds"];
  std::map<std::int64_t, json> starts, finishes;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    QCOMPARE(e["cat"].get<std::string>(), std::string("ac2g"));
    QCOMPARE(e["name"].get<std::string>(), std::string("ac2g"));
    auto& side = e["ph"] == "s" ? starts : finishes;
    QVERIFY2(side.emplace(e["id"].get<std::int64_t>(), e).second, "a flow id twice");
  }
  QCOMPARE(static_cast<std::int64_t>(starts.size()), linked);
  QCOMPARE(finishes.size(), starts.size());
  for (const auto& [id, s] : starts) {
    const json& f = finishes.at(id);
    QCOMPARE(f["bp"].get<std::string>(), std::string("e"));
    const std::int32_t rank = s["pid"];
    QCOMPARE(f["pid"].get<std::int32_t>(), rank);
    const std::int64_t correlation = id & 0xffffffff;
    QCOMPARE(micros_to_ns(s["ts"]) + base, call_start.at({rank, correlation}));
    QCOMPARE(micros_to_ns(f["ts"]) + base, work_start.at({rank, correlation}));
    QCOMPARE(r->lane(LaneId{static_cast<std::uint32_t>(f["tid"].get<std::int64_t>())})->kind,
             LaneKind::gpu_stream);
  }
}

// Perfetto names a counter's track "<event name> <args key>" (it read
// "memory in use (bytes) memory in use (bytes)"), chrome://tracing by the
// event name: the stored name is split between the two, and this product's
// import joins it back, as it reads exports that wrote it as both.
void TestTraceExport::counterNamesReadOnceInPerfetto_data() {
  QTest::addColumn<QString>("stored");
  QTest::addColumn<QString>("name");  // the event's, chrome://tracing's track
  QTest::addColumn<QString>("key");
  QTest::addRow("bytes") << "memory in use (bytes)"
                         << "memory in use"
                         << "(bytes)";
  QTest::addRow("part") << "memory in use: weights (bytes)"
                        << "memory in use: weights"
                        << "(bytes)";
  QTest::addRow("GPU") << "GPU 0 memory used"
                       << "GPU 0 memory"
                       << "used";
  QTest::addRow("one word") << "power"
                            << "power"
                            << "value";
  QTest::addRow("ends in value") << "queue value"
                                 << "queue value"
                                 << "value";
  QTest::addRow("word repeated") << "a a"
                                 << "a a"
                                 << "value";
  QTest::addRow("trailing space") << "abc "
                                  << "abc "
                                  << "value";
  QTest::addRow("leading space") << " abc"
                                 << " abc"
                                 << "value";
}

void TestTraceExport::counterNamesReadOnceInPerfetto() {
  QFETCH(QString, stored);
  QFETCH(QString, name);
  QFETCH(QString, key);
  const std::string s = stored.toStdString();
  const ChromeCounter c = chrome_counter(s);
  QCOMPARE(QString::fromUtf8(c.name.data(), qsizetype(c.name.size())), name);
  QCOMPARE(QString::fromUtf8(c.key.data(), qsizetype(c.key.size())), key);
  if (key != "value") QCOMPARE(std::string(c.name) + ' ' + std::string(c.key), s);
  QCOMPARE(stored_counter_name(c.name, c.key), s);
  // An export before the split wrote the stored name as both.
  QCOMPARE(stored_counter_name(s, s), s);
}

// The CUDA engine samples the GPU's memory before its first kernel: that
// sample is exported too, and the time base is early enough for it.
void TestTraceExport::countersBeforeTheFirstEventAreExported() {
  QTemporaryDir dir;
  auto r = opened_copy(dir, kGpuBf16, "bf16.cstrace");
  const std::vector<std::string> samples = counter_rows(*r);
  std::int64_t earliest = INT64_MAX;
  const auto series = r->counter_series().value();
  for (const CounterSeries& s : series)
    earliest = std::min(earliest, r->counters(s.rank, s.name).value().front().time_ns);
  QVERIFY2(earliest < r->time_range().start_ns, "the fixture has a sample before its events");
  const std::string path = dir.filePath("bf16.json").toStdString();
  QVERIFY(export_chrome_trace(*r, path));
  const json doc = json::parse(read_file(path));
  const std::int64_t base = doc["baseTimeNanoseconds"];
  QCOMPARE(base, earliest);
  std::vector<std::string> exported;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "C") continue;
    std::ostringstream row;
    row << e["pid"].get<int>() << '|' << perfetto_counter_track(e) << '|'
        << micros_to_ns(e["ts"]) + base << '|' << e["args"].begin()->get<double>();
    exported.push_back(row.str());
  }
  std::sort(exported.begin(), exported.end());
  QCOMPARE(exported, samples);
}

// A window's export carries each counter's last sample before the window,
// the value in effect at its start: the memory track was blank until the
// first sample inside the window.
void TestTraceExport::windowKeepsTheCounterValueInEffect() {
  QTemporaryDir dir;
  auto r = opened_copy(dir, kGpuBf16, "bf16.cstrace");
  const TimeRange whole = r->time_range();
  const TimeRange window{whole.start_ns + (whole.end_ns - whole.start_ns) / 2, whole.end_ns};
  std::vector<std::string> expected;
  auto row = [](std::int32_t rank, const std::string& name, std::int64_t t, double value) {
    std::ostringstream out;
    out << rank << '|' << name << '|' << t << '|' << value;
    return out.str();
  };
  int series = 0;
  for (const CounterSeries& s : r->counter_series().value()) {
    // The sample in effect as the window opens, where one came before it.
    std::string in_effect;
    for (const CounterSample& c : r->counters(s.rank, s.name).value()) {
      if (c.time_ns < window.start_ns) {
        in_effect = row(s.rank, r->string(s.name), c.time_ns, c.value);
        continue;
      }
      if (c.time_ns >= window.end_ns) continue;
      if (!in_effect.empty()) expected.push_back(in_effect);
      in_effect.clear();
      expected.push_back(row(s.rank, r->string(s.name), c.time_ns, c.value));
    }
    if (!in_effect.empty()) expected.push_back(in_effect);
    ++series;
  }
  QVERIFY(series > 0);
  const std::string path = dir.filePath("window.json").toStdString();
  ChromeTraceOptions options;
  options.window = window;
  QVERIFY(export_chrome_trace(*r, path, options));
  const json doc = json::parse(read_file(path));
  const std::int64_t base = doc["baseTimeNanoseconds"];
  std::vector<std::string> exported;
  bool one_before = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "C") continue;
    const std::int64_t t = micros_to_ns(e["ts"]) + base;
    one_before = one_before || t < window.start_ns;
    exported.push_back(
        row(e["pid"].get<int>(), perfetto_counter_track(e), t, e["args"].begin()->get<double>()));
  }
  QVERIFY2(one_before, "no sample from before the window");
  std::sort(exported.begin(), exported.end());
  std::sort(expected.begin(), expected.end());
  QCOMPARE(exported, expected);
}

// A store written before the writer kept its text as UTF-8 may hold other
// bytes in names (an Nsight export's): every export writes U+FFFD for them.
void TestTraceExport::textThatIsNotUtf8IsReplaced_data() {
  QTest::addColumn<QString>("file");
  QTest::addRow("csv events") << "out.csv";
  QTest::addRow("chrome json") << "out.json";
  QTest::addRow("html") << "out.html";
}

void TestTraceExport::textThatIsNotUtf8IsReplaced() {
  QFETCH(QString, file);
  QTemporaryDir dir;
  const std::string store = dir.filePath("bad.cstrace").toStdString();
  std::filesystem::copy_file(kCpuEngine, store);
  {
    // "bad_\xff\xfe_name" as an event name, "rank \xc3" as a host (cut short).
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(store.c_str(), &db), SQLITE_OK);
    const char* sql =
        "UPDATE strings SET value = CAST(X'6261645FFFFE5F6E616D65' AS TEXT) WHERE id = "
        "(SELECT name FROM events WHERE kind = 0 LIMIT 1);"
        "UPDATE ranks SET host = CAST(X'72616E6B20C3' AS TEXT) WHERE rank = 0;";
    QCOMPARE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto r = TraceReader::open(store).value();
  const std::string path = dir.filePath(file).toStdString();
  if (file.endsWith(".csv")) {
    QVERIFY(export_csv(*r, nullptr, CsvTable::events, path));
  } else if (file.endsWith(".json")) {
    QVERIFY(export_chrome_trace(*r, path));
  } else {
    QVERIFY(export_html_report(*r, analyze_run(*r).value(), path));
  }
  const std::string text = read_file(path);
  QVERIFY(QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size())).toUtf8() ==
          QByteArray(text.data(), static_cast<qsizetype>(text.size())));
  QVERIFY2(text.find("bad_\xEF\xBF\xBD") != std::string::npos, "the name with U+FFFD");
}

// The prediction table's measured seconds as exactly as its predicted ones
// (they were rounded to 6 decimals: 0.000000 for a part under a microsecond).
void TestTraceExport::predictionCsvKeepsFullPrecision() {
  QTemporaryDir dir;
  auto r = opened_copy(dir, kCpuEngine, "cpu.cstrace");
  const RunAnalysis a = analyze_run(*r).value();
  QVERIFY(a.prediction);
  const std::string path = dir.filePath("prediction.csv").toStdString();
  QVERIFY(export_csv(*r, &a, CsvTable::prediction, path));
  std::map<std::string, std::string> measured;  // "group|name" -> its text
  std::istringstream lines(read_file(path));
  std::string line;
  std::getline(lines, line);
  QCOMPARE(line, std::string("group,name,predicted_s,measured_s"));
  while (std::getline(lines, line)) {
    const auto f = csv_split(line);
    QCOMPARE(f.size(), std::size_t{4});
    measured[f[0] + "|" + f[1]] = f[3];
  }
  auto exact = [&](const std::string& key, double value) {
    QVERIFY2(measured.count(key), key.c_str());
    QCOMPARE(std::stod(measured[key]), value);
  };
  exact("step|step", a.prediction->measured_step_s);
  for (const auto& row : a.prediction->categories) {
    if (row.measured_s) exact("category|" + row.name, *row.measured_s);
  }
}

// The HTML report and the prediction CSV hold what `trace stats` prints for
// a store with a prediction: each part of the step predicted against
// measured, the verdict and the machine probe, from the same comparison.
void TestTraceExport::reportSaysWhatTraceStatsSays() {
  QTemporaryDir dir;
  auto r = opened_copy(dir, kCpuEngine, "cpu.cstrace");
  const RunAnalysis a = analyze_run(*r).value();
  QVERIFY(a.prediction && !a.prediction->breakdown.empty() && a.prediction->machine);
  const PredictionComparison& p = *a.prediction;
  auto escaped = [](std::string text) {
    std::string out;
    for (char c : text)
      out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    return out;
  };
  const std::string page_path = dir.filePath("r.html").toStdString();
  QVERIFY(export_html_report(*r, a, page_path));
  const std::string page = read_file(page_path);
  QVERIFY2(page.find(escaped(p.verdict)) != std::string::npos, p.verdict.c_str());
  QVERIFY(page.find(escaped(p.machine->text())) != std::string::npos);
  for (const auto& part : p.breakdown)
    QVERIFY2(page.find("<tr><td>" + part.name + "</td>") != std::string::npos, part.name.c_str());
  QVERIFY(page.find("largest disagreement") != std::string::npos);
  // A part neither predicted nor measured (tensor-parallel communication in
  // a run without tp) reads "-", as the app and prediction_error_text say
  // it; it read "not predicted", which a part measured but not predicted
  // (idle) reads too.
  int neither = 0;
  for (const auto& part : p.breakdown) {
    if (part.predicted_s > 0 || part.measured_s.value_or(0) > 0) continue;
    ++neither;
    const std::string row =
        "<tr><td>" + part.name + "</td><td class=n>0 s</td><td class=n>0 s</td><td class=n>-</td>";
    QVERIFY2(page.find(row) != std::string::npos, part.name.c_str());
  }
  QVERIFY(neither > 0);
  // The table by category gives the prediction's error, as trace stats and
  // the app do (it gave measured / predicted: "10.30" beside "-90.3 %").
  QVERIFY(page.find("<th>measured / predicted</th>") == std::string::npos);
  QVERIFY(!p.categories.empty());
  for (const auto& c : p.categories) {
    QVERIFY(c.measured_s);
    const std::string row = "<tr><td>category</td><td>" + c.name + "</td><td class=n>" +
                            cs::format_seconds(c.predicted_s) + "</td><td class=n>" +
                            cs::format_seconds(*c.measured_s) + "</td><td class=n>" +
                            prediction_error_text(c.predicted_s, *c.measured_s) + "</td></tr>";
    QVERIFY2(page.find(row) != std::string::npos, row.c_str());
  }
  // Each rank's overlap in percent with its sign, as trace stats prints it
  // (the cell read "12.3" under "overlap %").
  QVERIFY(page.find("<th>overlap</th>") != std::string::npos);
  for (const RankAnalysis& rank : a.ranks) {
    const double span = static_cast<double>(rank.total.span_ns);
    auto pct = [span](std::int64_t ns) {
      return cs::format_fixed(100.0 * static_cast<double>(ns) / span, 1) + "%";
    };
    QVERIFY(span > 0);
    const std::string cells =
        "<td class=n>" + pct(rank.total.communication_ns) + "</td><td class=n>" +
        cs::format_fixed(rank.total.overlap_percent(), 1) + "%</td><td class=n>" +
        pct(rank.total.exposed_communication_ns) + "</td>";
    QVERIFY2(page.find(cells) != std::string::npos, cells.c_str());
  }
  // The critical path, as `trace critical-path` has it: led by the reduction.
  const CriticalPathSummary path = summarize_critical_paths(*r).value();
  QVERIFY(!path.operations.empty());
  QVERIFY(page.find("<h2>Critical path</h2>") != std::string::npos);
  QVERIFY(page.find("<tr><td>" + r->string(path.operations.front().name) + "</td><td class=n>" +
                    cs::format_fixed(path.operations.front().per_step_ns / 1e6, 3) + "</td>") !=
          std::string::npos);
  QCOMPARE(r->string(path.operations.front().name), std::string("dp all-reduce"));

  const std::string csv_path = dir.filePath("p.csv").toStdString();
  QVERIFY(export_csv(*r, &a, CsvTable::prediction, csv_path));
  std::istringstream lines(read_file(csv_path));
  std::string line;
  std::vector<std::pair<std::string, double>> rows;
  while (std::getline(lines, line)) {
    const auto f = csv_split(line);
    if (f[0] == "breakdown") rows.emplace_back(f[1], std::stod(f[3]));
  }
  QCOMPARE(rows.size(), p.breakdown.size() + 1);
  QCOMPARE(rows[0].first, std::string("step"));
  QCOMPARE(rows[0].second, p.measured_step_median_s);
  for (std::size_t i = 0; i < p.breakdown.size(); ++i) {
    QCOMPARE(rows[i + 1].first, p.breakdown[i].name);
    QCOMPARE(rows[i + 1].second, p.breakdown[i].measured_s.value_or(0));
  }
}

// A window's Chrome trace counts from the earliest event it writes (a parent
// that began before the window), as docs/trace-schema.md says; it counted
// from the window's start less the store's longest event.
void TestTraceExport::windowCountsFromItsEarliestEvent_data() {
  QTest::addColumn<QString>("store");
  QTest::addColumn<double>("at");         // the window's start, as a fraction of the trace
  for (double at : {0.86, 0.92, 0.97}) {  // the GPU run's steps are its last 14 %
    QTest::addRow("cpu engine at %.2f", at) << QString::fromStdString(kCpuEngine) << at;
    QTest::addRow("cuda engine bf16 at %.2f", at) << QString::fromStdString(kGpuBf16) << at;
  }
}

void TestTraceExport::windowCountsFromItsEarliestEvent() {
  QFETCH(QString, store);
  QFETCH(double, at);
  QTemporaryDir dir;
  auto r = opened_copy(dir, store.toStdString(), "store.cstrace");
  const TimeRange all = r->time_range();
  const auto start =
      all.start_ns + static_cast<std::int64_t>(at * static_cast<double>(all.end_ns - all.start_ns));
  ChromeTraceOptions options;
  options.window = TimeRange{start, start + (all.end_ns - all.start_ns) / 20};
  options.counters = false;
  const std::string path = dir.filePath("window.json").toStdString();
  QVERIFY(export_chrome_trace(*r, path, options));
  const json doc = json::parse(read_file(path));
  const std::int64_t base = doc["baseTimeNanoseconds"];
  std::int64_t earliest = INT64_MAX;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X") earliest = std::min(earliest, micros_to_ns(e["ts"]) + base);
  }
  QVERIFY(earliest != INT64_MAX);
  QCOMPARE(base, earliest);
}

// The HTML step-time chart: a line and a legend entry per rank up to 8
// ranks; past that (colours would repeat, the legend stopped at rank 9 with
// no word), the band from the fastest to the slowest rank and the median,
// saying over how many ranks.
void TestTraceExport::stepChartSaysWhichRanksItDraws_data() {
  QTest::addColumn<int>("ranks");
  for (int n : {2, 8, 9, 16})
    QTest::addRow("%d ranks", n) << n;
}

void TestTraceExport::stepChartSaysWhichRanksItDraws() {
  QFETCH(int, ranks);
  QTemporaryDir dir;
  const std::string path = dir.filePath("steps.cstrace").toStdString();
  {
    auto w = TraceWriter::create(path, RunInfo{"steps", "test"}).value();
    const StringId kernel = w->intern("gemm"), step = w->intern("step");
    for (int r = 0; r < ranks; ++r) {
      w->add_rank({r, "node", "GPU", 1, 0, false});
      const LaneId stream = w->add_lane(r, LaneKind::gpu_stream, "stream 7", 0);
      const LaneId steps = w->add_lane(r, LaneKind::steps, "steps", 1);
      std::int64_t t = 1'000'000;
      for (int i = 0; i < 4; ++i) {
        const std::int64_t length = (10 + r + 3 * i) * 1'000'000;  // each rank its own times
        Event e;
        e.lane = steps;
        e.kind = EventKind::step;
        e.category = Category::other;
        e.start_ns = t;
        e.end_ns = t + length;
        e.name = step;
        e.step = i;
        w->add(e);
        e.lane = stream;
        e.kind = EventKind::kernel;
        e.category = Category::compute;
        e.end_ns = t + length / 2;
        e.name = kernel;
        w->add(e);
        t += length;
      }
    }
    QVERIFY(w->close());
  }
  auto r = TraceReader::open(path).value();
  const RunAnalysis a = analyze_run(*r).value();
  QCOMPARE(static_cast<int>(a.ranks.size()), ranks);
  const std::string page_path = dir.filePath("r.html").toStdString();
  QVERIFY(export_html_report(*r, a, page_path));
  const std::string page = read_file(page_path);
  const std::string chart = page.substr(page.find("aria-label=\"step times\""));
  const std::string band = "fastest to slowest of " + std::to_string(ranks) + " ranks";
  for (int rank = 0; rank < ranks; ++rank) {
    const bool legend =
        chart.find(">rank " + std::to_string(rank) + "</text>") != std::string::npos;
    QCOMPARE(legend, ranks <= 8);
  }
  QCOMPARE(chart.find(band) != std::string::npos, ranks > 8);
}

void TestTraceExport::chromeTraceWindowAndRanks() {
  QTemporaryDir dir;
  auto r = imported(dir, {kKineto + "sampled_rank-0.json.gz", kKineto + "sampled_rank-1.json.gz"},
                    "two.cstrace");
  const TimeRange all = r->time_range();
  ChromeTraceOptions options;
  options.window = TimeRange{all.start_ns + (all.end_ns - all.start_ns) / 2,
                             all.start_ns + (all.end_ns - all.start_ns) / 2 + 20'000'000};
  options.ranks = {1};
  const std::string path = dir.filePath("window.json").toStdString();
  auto report = export_chrome_trace(*r, path, options);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QVERIFY(report->events > 0 && report->events < r->event_count() / 4);
  const json doc = json::parse(read_file(path));
  QCOMPARE(doc["distributedInfo"]["rank"].get<int>(), 1);
  // Times count from the earliest event written: a parent that began before
  // the window has no negative ts (Perfetto drops those).
  const std::int64_t base = doc["baseTimeNanoseconds"];
  QVERIFY(base <= options.window->start_ns);
  std::int64_t overlapping = 0;
  bool before_window = false;
  for (const json& e : doc["traceEvents"]) {
    QCOMPARE(e["pid"].get<int>(), 1);
    if (e.contains("ts")) QVERIFY2(e["ts"].get<double>() >= 0, e.dump().c_str());
    if (e["ph"] != "X") continue;
    before_window |= micros_to_ns(e["ts"]) + base < options.window->start_ns;
    const std::int64_t start = micros_to_ns(e["ts"]) + base;
    const std::int64_t end = start + micros_to_ns(e["dur"]);
    QVERIFY(start < options.window->end_ns && end > options.window->start_ns);
    ++overlapping;
  }
  QCOMPARE(overlapping, report->events);
  QVERIFY(before_window);  // the case: the step's annotation began earlier

  // The CSV events of the window are the same events: those overlapping it.
  ChromeTraceOptions every_rank;
  every_rank.window = options.window;
  auto chrome = export_chrome_trace(*r, dir.filePath("all.json").toStdString(), every_rank);
  QVERIFY(chrome);
  auto csv = export_csv(*r, nullptr, CsvTable::events, dir.filePath("w.csv").toStdString(),
                        options.window);
  QVERIFY2(csv, csv ? "" : csv.message().c_str());
  QCOMPARE(csv->events, chrome->events);

  ChromeTraceOptions split;
  split.file_per_rank = true;
  auto files = export_chrome_trace(*r, dir.filePath("run.json").toStdString(), split);
  QVERIFY2(files, files ? "" : files.message().c_str());
  QCOMPARE(files->files.size(), std::size_t{2});
  QVERIFY(files->files[1].ends_with("run.rank1.json"));
  QCOMPARE(json::parse(read_file(files->files[1]))["distributedInfo"]["rank"].get<int>(), 1);
  QCOMPARE(files->events, r->event_count());

  options.ranks = {7};
  auto missing = export_chrome_trace(*r, path, options);
  QVERIFY(!missing);
  QVERIFY(QString::fromStdString(missing.message()).contains("no rank 7"));
}

// A rank the store knows only by its lanes (no ranks row) is a rank of the
// export as of the analysis: its own file with --file-per-rank (it was left
// out, its events lost), chosen with --rank (refused as unknown), and flow
// ids of its own (with one ranks row, both ranks' arrows shared ids).
void TestTraceExport::ranksWithLanesButNoRankRowAreExported() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("lanes-only.cstrace").toStdString();
  {
    auto w = TraceWriter::create(path, RunInfo{"lanes only", "test"}).value();
    const StringId launch = w->intern("cudaLaunchKernel"), kernel = w->intern("gemm");
    w->add_rank({0, "node", "GPU 0", 1, 0, false});  // rank 1 has no row
    for (std::int32_t rank : {0, 1}) {
      const LaneId host = w->add_lane(rank, LaneKind::cpu_thread, "Thread 1", 0);
      const LaneId stream = w->add_lane(rank, LaneKind::gpu_stream, "GPU 0 stream 7", 1);
      Event e;
      e.lane = host;
      e.kind = EventKind::api_call;
      e.category = Category::other;
      e.start_ns = 1'000'000 + rank * 100;
      e.end_ns = e.start_ns + 500;
      e.name = launch;
      e.correlation = 1;  // each process counts its own
      w->add(e);
      e.lane = stream;
      e.kind = EventKind::kernel;
      e.category = Category::compute;
      e.start_ns += 2'000;
      e.end_ns = e.start_ns + 10'000;
      e.name = kernel;
      w->add(e);
    }
    QVERIFY(w->close());
  }
  auto r = TraceReader::open(path).value();
  QCOMPARE(r->ranks().size(), std::size_t{1});

  const std::string one = dir.filePath("one.json").toStdString();
  auto whole = export_chrome_trace(*r, one);
  QVERIFY2(whole, whole ? "" : whole.message().c_str());
  const json doc = json::parse(read_file(one));
  std::set<std::int64_t> starts;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "s") QVERIFY2(starts.insert(e["id"].get<std::int64_t>()).second, "an id twice");
  }
  QCOMPARE(starts.size(), std::size_t{2});

  ChromeTraceOptions split;
  split.file_per_rank = true;
  auto files = export_chrome_trace(*r, dir.filePath("run.json").toStdString(), split);
  QVERIFY2(files, files ? "" : files.message().c_str());
  QCOMPARE(files->files.size(), std::size_t{2});
  QVERIFY(files->files[1].ends_with("run.rank1.json"));
  QCOMPARE(json::parse(read_file(files->files[1]))["distributedInfo"]["rank"].get<int>(), 1);
  QCOMPARE(files->events, r->event_count());

  ChromeTraceOptions rank1;
  rank1.ranks = {1};
  auto chosen = export_chrome_trace(*r, dir.filePath("rank1.json").toStdString(), rank1);
  QVERIFY2(chosen, chosen ? "" : chosen.message().c_str());
  QCOMPARE(chosen->events, std::int64_t{2});
}

// One file per rank, where a rank has no event to write (none in the
// window; none recorded): its file held metadata alone, which no import
// reads, so the set did not import. Refused by rank before any file is
// written: an earlier export's files stay as they were.
void TestTraceExport::filePerRankRefusesARankWithNoEvent_data() {
  QTest::addColumn<bool>("windowed");
  QTest::addRow("no event in the window") << true;
  QTest::addRow("no event recorded") << false;
}

void TestTraceExport::filePerRankRefusesARankWithNoEvent() {
  QFETCH(bool, windowed);
  QTemporaryDir dir;
  const std::string path = dir.filePath("late.cstrace").toStdString();
  {
    auto w = TraceWriter::create(path, RunInfo{"late rank", "test"}).value();
    const StringId gemm = w->intern("gemm");
    for (std::int32_t rank : {0, 1}) {
      w->add_rank({rank, "node", "GPU " + std::to_string(rank), 1, 0, false});
      if (rank == 1 && !windowed) continue;  // rank 1 recorded nothing
      Event e;
      e.lane = w->add_lane(rank, LaneKind::gpu_stream, "GPU stream 7", 0);
      e.kind = EventKind::kernel;
      e.category = Category::compute;
      e.start_ns = rank == 0 ? 1'000 : 50'000;  // rank 1 starts late
      e.end_ns = e.start_ns + 1'000;
      e.name = gemm;
      w->add(e);
    }
    QVERIFY(w->close());
  }
  auto r = TraceReader::open(path).value();
  const std::string earlier = dir.filePath("run.rank0.json").toStdString();
  std::ofstream(earlier) << "an earlier export";

  ChromeTraceOptions split;
  split.file_per_rank = true;
  if (windowed) split.window = TimeRange{0, 10'000};
  auto files = export_chrome_trace(*r, dir.filePath("run.json").toStdString(), split);
  QVERIFY(!files);
  const std::string message = files.message();
  QVERIFY2(message.find("rank 1 has no event") != std::string::npos, message.c_str());
  QVERIFY2(message.find("run.rank1.json") != std::string::npos, message.c_str());
  QCOMPARE(read_file(earlier), std::string("an earlier export"));
  QVERIFY(!std::filesystem::exists(dir.filePath("run.rank1.json").toStdString()));

  // The ranks that have events export, and import back.
  split.ranks = {0};
  files = export_chrome_trace(*r, dir.filePath("run.json").toStdString(), split);
  QVERIFY2(files, files ? "" : files.message().c_str());
  QVERIFY(import_traces(files->files, dir.filePath("back.cstrace").toStdString()));
}

void TestTraceExport::chromeTraceWarnsWhenLarge() {
  QTemporaryDir dir;
  auto r = imported(dir, {kNsys}, "saxpy.cstrace");
  // NVTX ranges are the host's: HTA takes a gpu_user_annotation for GPU time.
  QVERIFY(export_chrome_trace(*r, dir.filePath("all.json").toStdString()));
  int nvtx = 0;
  const json all = json::parse(read_file(dir.filePath("all.json").toStdString()));
  for (const json& e : all["traceEvents"]) {
    const std::string category = e.value("cat", std::string());
    QVERIFY2(category != "gpu_user_annotation", e.dump().c_str());
    nvtx += category == "user_annotation";
  }
  QCOMPARE(nvtx, 22);
  ChromeTraceOptions options;
  options.warn_bytes = 10'000;  // the real threshold is 256 MiB
  auto report = export_chrome_trace(*r, dir.filePath("s.json").toStdString(), options);
  QVERIFY(report);
  QCOMPARE(report->warnings.size(), std::size_t{1});
  QVERIFY(QString::fromStdString(report->warnings[0]).contains("export a time window"));
}

// A name in the events table reads back as it was (RFC 4180: a field with
// a comma, a quote or a line break quoted, its quotes doubled), long or not.
void TestTraceExport::csvFieldsReadBackWhole_data() {
  QTest::addColumn<QString>("name");
  QTest::addRow("plain") << "gemm_kernel";
  QTest::addRow("a comma") << "saxpy(double *, int)";
  QTest::addRow("a quote inside") << R"(say "hi" twice)";
  QTest::addRow("quotes at the ends") << R"("quoted")";
  QTest::addRow("only a quote") << R"(")";
  QTest::addRow("a line break") << "two\nlines";
  QString templated = "void cutlass::Kernel<";
  while (templated.size() < 200'000)
    templated += R"(cutlass::gemm::GemmShape<128, 128, 32>, "tag", )";
  QTest::addRow("200,000 characters, commas and quotes") << templated + ">";
}

void TestTraceExport::csvFieldsReadBackWhole() {
  QFETCH(QString, name);
  QTemporaryDir dir;
  const std::string store = dir.filePath("names.db").toStdString();
  {
    auto w = std::move(TraceWriter::create(store, {})).value();
    w->add_rank({0, "host", "CPU", 1, 0, false});
    Event e;
    e.lane = w->add_lane(0, LaneKind::cpu_thread, "compute");
    e.start_ns = 1000;
    e.end_ns = 2000;
    e.name = w->intern(name.toStdString());
    w->add(e);
    QVERIFY(w->close());
  }
  auto r = std::move(TraceReader::open(store)).value();
  const std::string csv = dir.filePath("events.csv").toStdString();
  QVERIFY(export_csv(*r, nullptr, CsvTable::events, csv));
  const std::string text = read_file(csv);
  const std::string header = text.substr(0, text.find('\n'));
  const std::string row = text.substr(header.size() + 1, text.size() - header.size() - 2);
  const auto fields = csv_split(row);
  QCOMPARE(fields.size(), csv_split(header).size());
  QCOMPARE(QString::fromStdString(fields[6]), name);
}

void TestTraceExport::csvTables() {
  QTemporaryDir dir;
  auto r = imported(dir, {kNsys}, "saxpy.cstrace");
  auto analysis = analyze_run(*r);
  QVERIFY(analysis);
  const std::string events = dir.filePath("events.csv").toStdString();
  auto report = export_csv(*r, nullptr, CsvTable::events, events);
  QVERIFY2(report, report ? "" : report.message().c_str());
  std::istringstream lines(read_file(events));
  std::string line;
  std::getline(lines, line);
  const auto header = csv_split(line);
  QCOMPARE(header.size(), std::size_t{24});
  QCOMPARE(header[6], std::string("name"));
  QCOMPARE(header[19], std::string("grid"));
  QCOMPARE(header[23], std::string("dynamic_shared_memory_bytes"));
  int rows = 0, kernels = 0;
  while (std::getline(lines, line)) {
    const auto f = csv_split(line);
    QCOMPARE(f.size(), header.size());
    if (f[4] == "kernel") {
      // The name holds commas: it must come back whole.
      QCOMPARE(f[6], std::string("saxpy(double *, double *, double *, double, int)"));
      QCOMPARE(std::stoll(f[9]), std::stoll(f[8]) - std::stoll(f[7]));
      // Its launch, as the Nsight export's kernel table gives it.
      QCOMPARE(f[19], std::string("2x1x1"));
      QCOMPARE(f[20], std::string("512x1x1"));
      QCOMPARE(f[21], std::string("26"));
      QCOMPARE(f[22], std::string("0"));
      QCOMPARE(f[23], std::string("0"));
      ++kernels;
    } else {
      QVERIFY2(f[19].empty() && f[22].empty(), line.c_str());  // no launch but a kernel's
    }
    ++rows;
  }
  QCOMPARE(rows, 99);  // 5 kernels, 15 copies, 57 runtime calls, 22 NVTX ranges
  QCOMPARE(kernels, 5);

  const std::string breakdown = dir.filePath("breakdown.csv").toStdString();
  QVERIFY(export_csv(*r, &*analysis, CsvTable::breakdown, breakdown));
  std::istringstream b(read_file(breakdown));
  std::getline(b, line);
  const auto columns = csv_split(line);
  std::getline(b, line);
  const auto values = csv_split(line);
  std::map<std::string, std::string> row;
  for (std::size_t i = 0; i < columns.size(); ++i)
    row[columns[i]] = values[i];
  QCOMPARE(row["step"], std::string("all"));
  QCOMPARE(std::stoll(row["compute_ns"]), analysis->ranks[0].total.compute_ns);
  QCOMPARE(std::stoll(row["idle_host_wait_ns"]), analysis->ranks[0].total.idle_host_wait_ns);

  for (CsvTable t :
       {CsvTable::kernels, CsvTable::collectives, CsvTable::stragglers, CsvTable::prediction}) {
    const std::string p =
        dir.filePath(QString::fromUtf8(to_string(t).data()) + ".csv").toStdString();
    auto written = export_csv(*r, &*analysis, t, p);
    QVERIFY2(written, written ? "" : written.message().c_str());
    QVERIFY(!read_file(p).empty());
  }
  auto needs = export_csv(*r, nullptr, CsvTable::kernels, dir.filePath("k.csv").toStdString());
  QVERIFY(!needs);
  QCOMPARE(csv_table_from_string("collectives"), std::optional<CsvTable>(CsvTable::collectives));
}

void TestTraceExport::htmlReportIsSelfContained() {
  QTemporaryDir dir;
  const std::string store = dir.filePath("two.cstrace").toStdString();
  ImportOptions options;
  options.title = "two ranks <of 128>";
  QVERIFY(import_kineto({kKineto + "sampled_rank-0.json.gz", kKineto + "sampled_rank-1.json.gz"},
                        store, options));
  auto r = std::move(TraceReader::open(store)).value();
  auto analysis = analyze_run(*r);
  QVERIFY(analysis);
  const std::string path = dir.filePath("report.html").toStdString();
  auto report = export_html_report(*r, *analysis, path);
  QVERIFY2(report, report ? "" : report.message().c_str());
  const QString text = QString::fromStdString(read_file(path));
  QVERIFY(text.startsWith("<!DOCTYPE html>"));
  QVERIFY(text.contains("<h1>two ranks &lt;of 128&gt;</h1>"));  // escaped
  QVERIFY(text.count("<svg") >= 2);                             // breakdown and steps
  // The breakdown's parts and colours are the app's (core/breakdown_parts.h).
  for (const BreakdownPart& part : kBreakdownParts) {
    QVERIFY2(text.contains(QStringLiteral("fill=\"%1\" stroke=\"#999\"/><text").arg(part.color)) &&
                 text.contains(QStringLiteral(">%1</text>").arg(part.name)),
             part.name);
  }
  QVERIFY(text.contains("Where the time went"));
  QVERIFY(text.contains("Top kernels"));
  QVERIFY(text.contains("ncclKernel_SendRecv"));
  QVERIFY(text.contains("Stragglers"));
  // The launch statistics: rank 1's 1154 launches, 278 shorter than their call.
  QVERIFY(text.contains("<h2>Kernel launches</h2>"));
  QVERIFY2(text.contains("<td class=n>1</td><td class=n>1154</td>"), qPrintable(text));
  QVERIFY(text.contains("</td><td class=n>278</td>"));
  // Each stream's idle time: rank 0's stream 7 idles 83.1% of its span.
  QVERIFY(text.contains("<h2>Idle time per stream</h2>"));
  QVERIFY2(text.contains("<tr><td class=n>0</td><td>GPU 0 stream 7</td><td class=n>1052</td>"
                         "<td class=n>1202.935</td><td class=n>16.9%</td><td class=n>83.1%</td>"
                         "<td class=n>33.1%</td><td class=n>0.0%</td><td class=n>50.1%</td>"
                         "<td class=n>16.1</td><td class=n>80</td></tr>"),
           qPrintable(text));
  // The breakdown's memory column is exposed memory, and each step's columns
  // add up to its time: rank 1's step 552 lacked its 2.435 ms of exposed
  // memory (628.204 of 630.639 ms).
  QVERIFY(text.contains("<th>exposed memory</th>"));
  const qsizetype steps = text.indexOf("<h2>Steps</h2>");
  QVERIFY(steps >= 0);
  QVERIFY(text.indexOf("<th>exposed memory ms</th><th>other ms</th><th>idle ms</th>", steps) > 0);
  const QRegularExpression step_row(
      "<tr><td class=n>(\\d+)</td><td class=n>(\\d+)</td>"
      "<td class=n>([\\d.]+)</td><td class=n>([\\d.]+)</td>"
      "<td class=n>([\\d.]+)</td><td class=n>([\\d.]+)</td>"
      "<td class=n>([\\d.]+)</td><td class=n>([\\d.]+)</td></tr>");
  int rows = 0;
  for (auto it = step_row.globalMatch(text, steps); it.hasNext();) {
    const QRegularExpressionMatch m = it.next();
    double parts = 0;
    for (int column = 4; column <= 8; ++column)
      parts += m.captured(column).toDouble();
    QVERIFY2(std::abs(parts - m.captured(3).toDouble()) < 0.003, qPrintable(m.captured(0)));
    if (m.captured(1) == "1" && m.captured(2) == "552") QCOMPARE(m.captured(6), QString("2.435"));
    ++rows;
  }
  QCOMPARE(rows, 4);  // two steps of two ranks
  // Nothing to fetch: no scripts, no stylesheets or images from elsewhere.
  QVERIFY(!text.contains("<script"));
  QVERIFY(!text.contains("src="));
  QVERIFY(!text.contains("href="));
  QVERIFY(!text.contains("url("));
  QString rest = text;
  rest.remove("http://www.w3.org/2000/svg");  // the SVG namespace is a name, not a fetch
  QVERIFY(!rest.contains("http://") && !rest.contains("https://"));
}

// A kernel's name longer than the table holds is cut after whole characters:
// cut by bytes, a name of accented letters ended in half a character, which
// the browser shows as U+FFFD.
void TestTraceExport::htmlReportCutsLongNamesByCharacter() {
  QTemporaryDir dir;
  std::string name;
  for (int i = 0; i < 150; ++i)
    name += "\xC3\xA9";  // é: 2 bytes, 300 in all
  const std::string trace = dir.filePath("accents.json").toStdString();
  std::ofstream(trace) << R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ")" << name
                       << R"(", "pid": 0, "tid": 7, "ts": 1, "dur": 5}]})";
  const std::string store = dir.filePath("accents.cstrace").toStdString();
  auto imported = import_kineto({trace}, store);
  QVERIFY2(imported, imported ? "" : imported.message().c_str());
  auto r = std::move(TraceReader::open(store)).value();
  const std::string path = dir.filePath("report.html").toStdString();
  QVERIFY(export_html_report(*r, analyze_run(*r).value(), path));
  const std::string text = read_file(path);
  QVERIFY(cs::is_valid_utf8(text));
  std::string shown;
  for (int i = 0; i < 119; ++i)
    shown += "\xC3\xA9";
  QVERIFY(text.find("<code>" + shown + "\xE2\x80\xA6</code>") != std::string::npos);
}

// The one rule for a name shown in a table, a lane, a tooltip or a report:
// whole up to kShownNameChars characters, else its two halves around " … ",
// cut between characters.
void TestTraceExport::elidedName_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<int>("chars");
  QTest::addColumn<QString>("shown");
  QTest::addRow("short") << "gemm" << 1000 << "gemm";
  QTest::addRow("empty") << "" << 1000 << "";
  QTest::addRow("as long as the room") << "abcdef" << 6 << "abcdef";
  QTest::addRow("a character more") << "abcdefg" << 6 << "abc … efg";
  QTest::addRow("odd room: the start one longer") << "abcdefgh" << 5 << "abc … gh";
  QTest::addRow("two-byte characters whole")
      << QString::fromUtf8("éééééééé") << 4 << QString::fromUtf8("éé … éé");
  QTest::addRow("more bytes than room, no more characters")
      << QString::fromUtf8("éééé") << 4 << QString::fromUtf8("éééé");
  QTest::addRow("four-byte characters whole")
      << QString::fromUtf8("🙂a🙂b🙂c🙂") << 4 << QString::fromUtf8("🙂a … c🙂");
  const QString kernel = QStringLiteral("void k<") + QString(199990, QLatin1Char('x')) + ">(int)";
  QTest::addRow("200,000 characters")
      << kernel << int(cs::kShownNameChars)
      << kernel.left(500) + QString::fromUtf8(" … ") + kernel.right(500);
}

void TestTraceExport::elidedName() {
  QFETCH(QString, name);
  QFETCH(int, chars);
  QFETCH(QString, shown);
  QCOMPARE(QString::fromStdString(cs::elided_name(name.toStdString(), std::size_t(chars))), shown);
}

// A run whose kernel, call, range, collective or stream is named in 200,000
// characters (a heavily templated kernel, a hostile import): the HTML report
// shows the name elided in every table (it held it whole in all but the top
// kernels, megabytes of one word), the CSV tables and the Chrome trace hold
// it whole, as the store does.
void TestTraceExport::longNamesElidedInTheReportWholeInTheData_data() {
  QTest::addColumn<QString>("named");  // which thing has the long name
  QTest::addColumn<QString>("table");  // the CSV table that holds it whole
  QTest::addRow("kernel") << "kernel"
                          << "kernels";
  QTest::addRow("CUDA API call") << "call"
                                 << "api_calls";
  QTest::addRow("annotation range") << "range"
                                    << "annotations";
  QTest::addRow("collective") << "collective"
                              << "events";  // summed by type and size
  QTest::addRow("stream") << "stream"
                          << "events";
}

void TestTraceExport::longNamesElidedInTheReportWholeInTheData() {
  QFETCH(QString, named);
  QFETCH(QString, table);
  std::string whole = named.toStdString() + "_cutlass_Kernel_";
  while (whole.size() < 200'000)
    whole += "GemmShape_128x128x32_";
  whole += "end";
  auto name_of = [&](const char* thing, const char* short_name) {
    return named == QLatin1String(thing) ? whole : std::string(short_name);
  };
  QTemporaryDir dir;
  const std::string store = dir.filePath("long-names.db").toStdString();
  {
    auto w = std::move(TraceWriter::create(store, {})).value();
    w->add_rank({0, "host", "GPU 0", 1, 0, true});
    const LaneId stream = w->add_lane(0, LaneKind::gpu_stream, name_of("stream", "stream 7"));
    const LaneId thread = w->add_lane(0, LaneKind::cpu_thread, "Thread 1");
    const LaneId nvtx = w->add_lane(0, LaneKind::annotation, "NVTX");
    const StringId kernel = w->intern(name_of("kernel", "gemm_kernel"));
    const StringId call = w->intern(name_of("call", "cudaLaunchKernel"));
    const StringId range = w->intern(name_of("range", "forward"));
    const StringId collective =
        w->intern(name_of("collective", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    std::int64_t t = 1'000'000;
    for (int i = 0; i < 4; ++i) {
      Event a;
      a.lane = nvtx;
      a.kind = EventKind::annotation;
      a.category = Category::other;
      a.start_ns = t;
      a.end_ns = t + 100'000;
      a.name = range;
      w->add(a);
      Event c;
      c.lane = thread;
      c.kind = EventKind::api_call;
      c.category = Category::other;
      c.start_ns = t + 1000;
      c.end_ns = t + 3000;
      c.name = call;
      c.correlation = i + 1;
      w->add(c);
      Event k;
      k.lane = stream;
      k.start_ns = t + 5000;
      k.end_ns = t + 50'000;
      k.name = kernel;
      k.correlation = i + 1;
      w->add(k);
      Event n;
      n.lane = stream;
      n.kind = EventKind::collective;
      n.category = Category::communication;
      n.collective = Collective::all_reduce;
      n.dtype = DataType::fp32;
      n.bytes = 1 << 20;
      n.group_size = 1;
      n.start_ns = t + 60'000;
      n.end_ns = t + 90'000;
      n.name = collective;
      w->add(n);
      t += 200'000;
    }
    QVERIFY(w->close());
  }
  auto r = std::move(TraceReader::open(store)).value();
  auto analysis = analyze_run(*r);
  QVERIFY2(analysis, analysis ? "" : analysis.message().c_str());

  const std::string page = dir.filePath("report.html").toStdString();
  QVERIFY(export_html_report(*r, *analysis, page));
  const std::string html = read_file(page);
  QVERIFY2(html.find(whole) == std::string::npos, "the report holds the whole name");
  QVERIFY2(html.find(cs::elided_name(whole)) != std::string::npos,
           "the report does not show the name elided");
  QVERIFY2(html.size() < 100'000, std::to_string(html.size()).c_str());

  const std::string csv = dir.filePath("table.csv").toStdString();
  const auto which = csv_table_from_string(table.toStdString());
  QVERIFY(which);
  QVERIFY(export_csv(*r, &*analysis, *which, csv));
  QVERIFY2(read_file(csv).find(whole) != std::string::npos, "the CSV table cut the name");

  const std::string chrome = dir.filePath("trace.json").toStdString();
  QVERIFY(export_chrome_trace(*r, chrome));
  QVERIFY2(read_file(chrome).find(whole) != std::string::npos, "the Chrome trace cut the name");
}

// A report of a range, or of a damaged store, says so under its title: the
// range's place and length, the damage found.
void TestTraceExport::htmlReportSaysWhatItCovers() {
  QTemporaryDir dir;
  auto r = imported(dir, {kNsys}, "saxpy.cstrace");
  const TimeRange whole = r->time_range();
  const TimeRange range{whole.start_ns + 2'000'000, whole.start_ns + 5'500'000};
  AnalysisOptions options;
  options.window = range;
  auto analysis = analyze_run(*r, options);
  QVERIFY(analysis);
  const std::string path = dir.filePath("range.html").toStdString();
  QVERIFY(export_html_report(*r, *analysis, path, {range, "saxpy.cstrace is damaged: a test"}));
  const QString text = QString::fromStdString(read_file(path));
  QVERIFY2(text.contains("A range of the run: 2.000 to 5.500 ms from its start (3.500 ms)"),
           qPrintable(text.left(3000)));
  QVERIFY(
      text.contains("<p class=bad>saxpy.cstrace is damaged: a test. The figures below are of "
                    "what could be read.</p>"));
  QVERIFY(text.indexOf("A range of the run") < text.indexOf("<h2>Run</h2>"));
  // Without notes, neither.
  QVERIFY(export_html_report(*r, *analysis, path));
  const QString plain = QString::fromStdString(read_file(path));
  QVERIFY(!plain.contains("A range of the run") && !plain.contains("is damaged"));
}

void TestTraceExport::failuresNameTheFile() {
  QTemporaryDir dir;
  auto r = imported(dir, {kNsys}, "saxpy.cstrace");
  const std::string nowhere = dir.filePath("no/such/dir/out.json").toStdString();
  auto a = export_chrome_trace(*r, nowhere);
  QVERIFY(!a);
  QVERIFY2(QString::fromStdString(a.message())
               .contains(QString::fromStdString(nowhere) + ": cannot write"),
           a.message().c_str());
  // A full disk: /dev/full accepts the open and fails every write.
  auto full = export_csv(*r, nullptr, CsvTable::events, "/dev/full");
  QVERIFY(!full);
  QVERIFY2(QString::fromStdString(full.message())
               .contains("/dev/full: write failed: No space left on device"),
           full.message().c_str());
  ChromeTraceOptions empty;
  empty.window = TimeRange{10, 10};
  QVERIFY(!export_chrome_trace(*r, dir.filePath("e.json").toStdString(), empty));

  // Over the store being exported (it was replaced by the JSON, exit 0):
  // refused, the store intact.
  const std::string store = dir.filePath("saxpy.cstrace").toStdString();
  const auto size = std::filesystem::file_size(store);
  auto self = export_chrome_trace(*r, store);
  QVERIFY(!self);
  QCOMPARE(QString::fromStdString(self.message()),
           QString::fromStdString(store + ": is the store being exported; give another output file"));
  QCOMPARE(std::filesystem::file_size(store), size);
  QVERIFY(TraceReader::open(store));
}

// A disk that fills mid-export (here a file-size limit: every write past
// half the file's size fails with EFBIG) leaves neither a half file nor a trace of its
// attempt, and the export an earlier call wrote at that path stays whole.
void TestTraceExport::failedExportKeepsTheEarlierFile() {
  QTemporaryDir dir;
  auto r = imported(dir, {kNsys}, "saxpy.cstrace");
  const std::string path = dir.filePath("saxpy.json").toStdString();
  QVERIFY(export_chrome_trace(*r, path));
  QFile earlier(QString::fromStdString(path));
  QVERIFY(earlier.open(QIODevice::ReadOnly));
  const QByteArray before = earlier.readAll();
  earlier.close();
  QVERIFY(before.size() > 4096);

  const std::string fresh = dir.filePath("fresh.csv").toStdString();
  rlimit saved{};
  QCOMPARE(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = static_cast<rlim_t>(before.size() / 2);
  QCOMPARE(setrlimit(RLIMIT_FSIZE, &small), 0);
  auto again = export_chrome_trace(*r, path);
  auto first = export_csv(*r, nullptr, CsvTable::events, fresh);
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);

  QVERIFY(!again);
  QVERIFY2(QString::fromStdString(again.message())
               .startsWith(QString::fromStdString(path) + ": write failed: "),
           again.message().c_str());
  QVERIFY(earlier.open(QIODevice::ReadOnly));
  QCOMPARE(earlier.readAll(), before);
  QVERIFY(!first);
  QVERIFY(!QFile::exists(QString::fromStdString(fresh)));
  QCOMPARE(QDir(dir.path()).entryList({"*.partial"}, QDir::Files), QStringList{});
}

QTEST_GUILESS_MAIN(TestTraceExport)
#include "tst_trace_export.moc"
