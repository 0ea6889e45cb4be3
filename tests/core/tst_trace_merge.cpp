// Merging per-rank stores into one run store: clocks aligned by recorded
// offsets, by the ends of matching collectives, or not at all (one host);
// every row copied with names, details, steps and counters intact; the
// run's metadata carried; a rank in two inputs refused by name.

#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "core/trace_merge.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "core/trace_writer.h"

using namespace cs::trace;

namespace {

struct RankSpec {
  std::int32_t rank = 0;
  std::string host;
  std::int64_t clock_skew_ns = 0;  // this rank's clock minus the true clock
  std::int64_t recorded_offset = 0;
  bool measured = false;
  std::uint32_t seed = 1;
};

constexpr int kSteps = 20;
constexpr std::int64_t kStepNs = 10'000'000;
constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;

// One rank of a data-parallel run: per step, compute kernels then an
// all-reduce whose end is the same true time on every rank (the collective
// finishes together); its start differs (ranks arrive at different times).
std::string write_rank(const QTemporaryDir& dir, const RankSpec& spec) {
  const std::string path = dir.filePath(QString("rank%1.cstrace").arg(spec.rank)).toStdString();
  RunInfo run;
  run.title = "rank " + std::to_string(spec.rank);
  run.source = "cuda-engine";
  run.start_utc_ns = kT0 + spec.rank;  // the earliest is rank 0's
  run.clock = "CLOCK_REALTIME";
  run.host = spec.host;
  auto created = TraceWriter::create(path, run);
  if (!created) qFatal("%s", created.message().c_str());
  TraceWriter& w = **created;
  w.add_rank({spec.rank, spec.host, "GPU", 100 + spec.rank, spec.recorded_offset, spec.measured});
  // Intern in a rank-dependent order, so string ids differ between inputs.
  std::vector<std::string> names = {"gemm_a", "gemm_b", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"};
  if (spec.rank % 2) std::reverse(names.begin(), names.end());
  std::map<std::string, StringId> ids;
  for (const auto& n : names)
    ids[n] = w.intern(n);
  const LaneId compute = w.add_lane(spec.rank, LaneKind::gpu_stream, "stream 7", 0);
  const LaneId comm = w.add_lane(spec.rank, LaneKind::gpu_stream, "stream 13 (NCCL)", 1);
  std::mt19937 rng(spec.seed);
  const StringId mem = w.intern("gpu_memory_used");
  for (int step = 0; step < kSteps; ++step) {
    const std::int64_t base = kT0 + step * kStepNs;
    std::int64_t t = base + 100'000 + static_cast<std::int64_t>(rng() % 50'000);
    for (int k = 0; k < 10; ++k) {
      Event e;
      e.lane = compute;
      e.name = ids[k % 2 ? "gemm_b" : "gemm_a"];
      e.start_ns = t + spec.clock_skew_ns;
      e.end_ns = t + 400'000 + spec.clock_skew_ns;
      e.flops = 1e9;
      e.step = step;
      w.add(e);
      t += 450'000;
    }
    Event ar;
    ar.lane = comm;
    ar.kind = EventKind::collective;
    ar.category = Category::communication;
    ar.name = ids["ncclDevKernel_AllReduce_Sum_f32_RING_LL"];
    const std::int64_t true_end = base + 8'000'000;
    ar.start_ns =
        true_end - 2'000'000 - static_cast<std::int64_t>(rng() % 1'000'000) + spec.clock_skew_ns;
    ar.end_ns =
        true_end + static_cast<std::int64_t>(rng() % 2000) + spec.clock_skew_ns;  // ±1 µs jitter
    ar.collective = Collective::all_reduce;
    ar.dtype = DataType::fp32;
    ar.count = 1 << 20;
    ar.bytes = 4 << 20;
    ar.group_size = 2;
    ar.step = step;
    w.add(ar);
    w.add(StepMetrics{spec.rank, step, base + spec.clock_skew_ns,
                      base + kStepNs + spec.clock_skew_ns, 3.0 - step * 0.1, 2048, 0});
    w.add(CounterSample{spec.rank, mem, base + spec.clock_skew_ns, 1e9 * (step + 1)});
  }
  Event stray;  // on a lane the writer never gave: counted and dropped
  stray.lane = LaneId{4'000'000'000u};
  stray.name = ids["gemm_a"];
  stray.start_ns = kT0;
  stray.end_ns = kT0 + 1;
  w.add(stray);
  w.set_meta("predicted_step", R"({"step_seconds": 0.01})");
  if (auto s = w.close(); !s) qFatal("%s", s.message().c_str());
  return path;
}

std::vector<std::int64_t> collective_ends(const TraceReader& r, std::int32_t rank) {
  std::vector<std::int64_t> out;
  std::vector<LaneId> lanes;
  for (const LaneInfo& l : r.lanes_of(rank))
    lanes.push_back(l.id);
  (void)r.for_each_event(lanes, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    if (e.event.kind == EventKind::collective) out.push_back(e.event.end_ns);
    return true;
  });
  return out;
}

}  // namespace

class TestTraceMerge : public QObject {
  Q_OBJECT

 private slots:
  void alignment_data();
  void alignment();
  void copiesEverything();
  void refusesDuplicateRanks_data();
  void refusesDuplicateRanks();
  void refusesRanksOfTwoRuns_data();
  void refusesRanksOfTwoRuns();
  void refusesRanksOfTwoRunsOfOneCommand_data();
  void refusesRanksOfTwoRunsOfOneCommand();
  void editedStoreIsDamage_data();
  void editedStoreIsDamage();
  void writesThroughALink();
  void refusesOutputAmongInputs();
};

void TestTraceMerge::alignment_data() {
  QTest::addColumn<QString>("mode");
  QTest::addColumn<bool>("same_host");
  QTest::addColumn<bool>("measured");
  QTest::addColumn<QString>("method");
  QTest::addColumn<qint64>("rank1_offset");  // expected, ±2 µs for collectives
  // Rank 1's clock runs 1.234567 ms ahead of rank 0's.
  QTest::addRow("auto, measured offsets")
      << "auto" << false << true << "recorded" << qint64(-1'234'567);
  QTest::addRow("auto, one host") << "auto" << true << false << "same-host" << qint64(0);
  QTest::addRow("auto, two hosts, no offsets")
      << "auto" << false << false << "collectives" << qint64(-1'234'567);
  QTest::addRow("collectives asked")
      << "collectives" << true << true << "collectives" << qint64(-1'234'567);
  QTest::addRow("recorded asked") << "recorded" << false << true << "recorded"
                                  << qint64(-1'234'567);
  QTest::addRow("none asked") << "none" << false << true << "none" << qint64(0);
}

void TestTraceMerge::alignment() {
  QFETCH(QString, mode);
  QFETCH(bool, same_host);
  QFETCH(bool, measured);
  QFETCH(QString, method);
  QFETCH(qint64, rank1_offset);
  QTemporaryDir dir;
  const std::int64_t skew = 1'234'567;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, measured, 1});
  const std::string b = write_rank(
      dir, {1, same_host ? "node-a" : "node-b", skew, measured ? -skew : 0, measured, 2});
  const std::string out = dir.filePath("run.cstrace").toStdString();
  MergeOptions options;
  options.alignment = *clock_alignment_from_string(mode.toStdString());
  auto report = merge_stores({a, b}, out, options);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(QString::fromStdString(report->method), method);
  QVERIFY2(
      std::llabs(report->offsets_ns.at(1) - rank1_offset) <= 2000,
      qPrintable(QString("offset %1, want %2").arg(report->offsets_ns.at(1)).arg(rank1_offset)));
  QCOMPARE(report->offsets_ns.at(0), 0);

  auto r = TraceReader::open(out);
  QVERIFY(r);
  QCOMPARE((*r)->meta("clock_alignment"), std::optional<std::string>(method.toStdString()));
  const auto offsets = nlohmann::json::parse(*(*r)->meta("clock_offsets_json"));
  QCOMPARE(offsets.at("1").get<std::int64_t>(), report->offsets_ns.at(1));
  for (const RankInfo& rank : (*r)->ranks())
    QCOMPARE(rank.clock_offset_ns, 0);

  // After alignment, the collectives of both ranks end together (within the
  // 2 µs jitter) — or stay apart by the skew when not aligned.
  const auto e0 = collective_ends(**r, 0);
  const auto e1 = collective_ends(**r, 1);
  QCOMPARE(e0.size(), std::size_t{kSteps});
  QCOMPARE(e1.size(), std::size_t{kSteps});
  const std::int64_t residual = skew + rank1_offset;
  for (std::size_t i = 0; i < e0.size(); ++i)
    QVERIFY2(std::llabs(e1[i] - e0[i] - residual) <= 4000,
             qPrintable(QString("step %1: %2 ns apart").arg(i).arg(e1[i] - e0[i])));
}

void TestTraceMerge::copiesEverything() {
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, true, 1});
  const std::string b = write_rank(dir, {1, "node-b", 5000, -5000, true, 2});
  const std::string out = dir.filePath("run.cstrace").toStdString();
  MergeOptions options;
  options.run.title = "dp2 run";
  options.run.plan_json = R"({"parallel":{"dp":2}})";
  options.run.command_line = "clusterscope run --plan plan.json";
  options.meta = {{"launcher", "local"}};
  auto report = merge_stores({a, b}, out, options);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, 2 * kSteps * 11);
  QCOMPARE(report->ranks, 2);

  auto r = std::move(TraceReader::open(out)).value();
  QCOMPARE(r->state().status, std::string("complete"));
  QVERIFY(r->state().finalized);
  const RunInfo run = r->run();
  QCOMPARE(run.title, std::string("dp2 run"));
  QCOMPARE(run.plan_json, options.run.plan_json);
  QCOMPARE(run.command_line, options.run.command_line);
  QCOMPARE(run.source, std::string("cuda-engine"));
  QCOMPARE(run.clock, std::string("CLOCK_REALTIME"));
  QCOMPARE(run.start_utc_ns, kT0);
  QCOMPARE(r->meta("launcher"), std::optional<std::string>("local"));
  QCOMPARE(r->meta("predicted_step"), std::optional<std::string>(R"({"step_seconds": 0.01})"));
  QCOMPARE(r->world_size(), 2);
  // What each rank's writer lost, summed (it was dropped as a file's own).
  QCOMPARE(r->meta("events_dropped_with_unknown_lane"), std::optional<std::string>("2"));
  QCOMPARE(r->losses(),
           std::vector<std::string>{"2 events dropped for a lane id the writer never gave"});
  QCOMPARE(r->ranks().size(), std::size_t{2});
  QCOMPARE(r->ranks()[1].host, std::string("node-b"));
  QCOMPARE(r->lanes().size(), std::size_t{4});
  QCOMPARE(r->event_count(), 2 * kSteps * 11);

  // Names survive the differing string ids of the inputs; details too.
  auto ar = r->find_events("ncclDevKernel_AllReduce_Sum_f32_RING_LL", NameMatch::exact, 1000);
  QVERIFY(ar);
  QCOMPARE(ar->size(), std::size_t{2 * kSteps});
  for (const StoredEvent& e : *ar) {
    QCOMPARE(e.event.collective, Collective::all_reduce);
    QCOMPARE(e.event.bytes, std::int64_t{4} << 20);
    QCOMPARE(e.event.group_size, 2);
    QCOMPARE(e.event.kind, EventKind::collective);
  }
  QCOMPARE(r->find_events("gemm_a", NameMatch::exact, 1000)->size(), std::size_t{2 * kSteps * 5});
  const auto gemm = r->find_events("gemm_b", NameMatch::exact, 1, 1);
  QCOMPARE(gemm->front().event.flops, 1e9);

  // Steps and counters moved with their rank's clock.
  const auto steps = r->steps(1);
  QCOMPARE(steps->size(), std::size_t{kSteps});
  QCOMPARE(steps->front().start_ns, kT0);  // skew 5000 and offset -5000
  QCOMPARE(steps->front().loss, 3.0);
  const auto series = r->counter_series();
  QCOMPARE(series->size(), std::size_t{2});
  QCOMPARE(r->string(series->front().name), std::string("gpu_memory_used"));
  QCOMPARE(r->counters(1, series->back().name)->front().time_ns, kT0);
}

// A rank is an input's by its ranks row or by its lanes alone (a store
// without a ranks row, which the analyses and exports take as a rank): two
// such inputs of rank 0 merged their events onto the same lanes, each one
// twice over, as "0 ranks".
void TestTraceMerge::refusesDuplicateRanks_data() {
  QTest::addColumn<bool>("aRow");
  QTest::addColumn<bool>("bRow");
  QTest::addRow("both with a ranks row") << true << true;
  QTest::addRow("the first by its lanes alone") << false << true;
  QTest::addRow("the second by its lanes alone") << true << false;
  QTest::addRow("both by their lanes alone") << false << false;
}

void TestTraceMerge::refusesDuplicateRanks() {
  QFETCH(bool, aRow);
  QFETCH(bool, bRow);
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, false, 1});
  QTemporaryDir other;
  const std::string b = write_rank(other, {0, "node-b", 0, 0, false, 2});
  for (const auto& [path, row] : {std::pair{a, aRow}, std::pair{b, bRow}}) {
    if (row) continue;
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "DELETE FROM ranks", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string out = dir.filePath("run.cstrace").toStdString();
  auto report = merge_stores({a, b}, out);
  QVERIFY(!report);
  const QString m = QString::fromStdString(report.message());
  QVERIFY2(m.contains("rank 0 is in both") && m.contains(QString::fromStdString(a)) &&
               m.contains(QString::fromStdString(b)),
           qPrintable(m));
  QVERIFY(!std::filesystem::exists(out));
}

// Rank 0 of a 2-rank run and rank 1 of a 128-rank one merged into "2 of
// 128 ranks" of a run that never was; so they did after a first input that
// records no world size (a Kineto trace without distributedInfo).
void TestTraceMerge::refusesRanksOfTwoRuns_data() {
  QTest::addColumn<bool>("firstRecordsNone");
  QTest::addRow("the first records its world size") << false;
  QTest::addRow("the first records none") << true;
}

void TestTraceMerge::refusesRanksOfTwoRuns() {
  QFETCH(bool, firstRecordsNone);
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, false, 1});
  const std::string b = write_rank(dir, {1, "node-b", 0, 0, false, 2});
  std::vector<std::string> inputs = {a, b};
  if (firstRecordsNone)
    inputs.insert(inputs.begin(), write_rank(dir, {2, "node-c", 0, 0, false, 3}));
  for (const auto& [path, world] : {std::pair{a, "2"}, std::pair{b, "128"}}) {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql =
        std::string("INSERT OR REPLACE INTO meta VALUES('world_size', '") + world + "')";
    QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string out = dir.filePath("run.cstrace").toStdString();
  auto report = merge_stores(inputs, out);
  QVERIFY(!report);
  QCOMPARE(QString::fromStdString(report.message()),
           QString::fromStdString("merge: " + a + " is a rank of a run of 2 ranks, " + b +
                                  " of 128: merge the rank stores of one run"));
  QVERIFY(!std::filesystem::exists(out));
}

// Two runs of one command write stores that say the same of themselves (the
// command line, the world size): they merged into one run of ranks that never
// ran together. The run id each rank records tells them apart; a store
// without one (older, imported) is merged as before.
void TestTraceMerge::refusesRanksOfTwoRunsOfOneCommand_data() {
  QTest::addColumn<QString>("idA");
  QTest::addColumn<QString>("idB");
  QTest::addColumn<bool>("oneRun");  // MergeOptions::ranks_of_one_run
  QTest::addColumn<bool>("refused");
  QTest::addRow("two runs") << "run-1"
                            << "run-2" << true << true;
  QTest::addRow("one run") << "run-1"
                           << "run-1" << true << false;
  QTest::addRow("one store without an id") << "run-1"
                                           << "" << true << false;
  QTest::addRow("not ranks of one run (calibration phases)") << "run-1"
                                                             << "run-2" << false << false;
}

void TestTraceMerge::refusesRanksOfTwoRunsOfOneCommand() {
  QFETCH(QString, idA);
  QFETCH(QString, idB);
  QFETCH(bool, oneRun);
  QFETCH(bool, refused);
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, false, 1});
  const std::string b = write_rank(dir, {1, "node-a", 0, 0, false, 2});
  for (const auto& [path, id] : {std::pair{a, idA}, std::pair{b, idB}}) {
    if (id.isEmpty()) continue;
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql = "INSERT OR REPLACE INTO meta VALUES('" + std::string(kRunIdMeta) +
                            "', '" + id.toStdString() + "')";
    QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string out = dir.filePath("run.cstrace").toStdString();
  MergeOptions options;
  options.ranks_of_one_run = oneRun;
  auto report = merge_stores({a, b}, out, options);
  if (refused) {
    QVERIFY(!report);
    QCOMPARE(QString::fromStdString(report.message()),
             QString::fromStdString("merge: " + a + " is a rank store of run run-1, " + b +
                                    " of run run-2: merge the rank stores of one run"));
    QVERIFY(!std::filesystem::exists(out));
    return;
  }
  QVERIFY2(report, report ? "" : report.message().c_str());
  // The run store keeps the run's id; stores of several runs record none.
  QCOMPARE(QString::fromStdString(TraceReader::open(out).value()->meta(kRunIdMeta).value_or("")),
           idA == idB || idB.isEmpty() ? idA : QString());
}

void TestTraceMerge::editedStoreIsDamage_data() {
  QTest::addColumn<QString>("sql");
  QTest::addColumn<QString>("merge_says");   // after the input's path
  QTest::addColumn<QString>("verify_says");  // after the input's path
  QTest::addRow("a lane's row deleted")
      << "DELETE FROM lanes WHERE id = (SELECT min(id) FROM lanes)"
      << ": event 1 has no lane"
      << " is damaged: it holds events of lane 1, which its lanes table lacks";
  QTest::addRow("event rows deleted")
      << "DELETE FROM events WHERE id % 7 = 0"
      << " is damaged: its lanes hold 220 events but its events table 189"
      << " is damaged: its lanes' chunks hold 220 events but its events table 189";
  // Copied as they read, a text time was 0 ns, an unknown name an empty
  // one, and the merged store passed every check.
  QTest::addRow("a time as text")
      << "UPDATE events SET start_ns = 'abc' WHERE id = 5"
      << " is damaged: event 5 has a start or end that is not a whole number of nanoseconds; "
         "nothing was merged"
      << " is damaged: 1 row of its events table is not an event a writer writes (row 5: its "
         "times ('abc', ";
  QTest::addRow("no such kind") << "UPDATE events SET kind = 200 WHERE id = 5"
                                << " is damaged: event 5 has no known kind or category"
                                << " is damaged: 1 row of its events table is not an event a "
                                   "writer writes (row 5: its kind 200 is no event kind)";
  QTest::addRow("names deleted")
      << "DELETE FROM strings WHERE id > 2"
      << " is damaged: event 201 is named by a string the store does not hold"
      << " is damaged: its events and counters use name ids up to ";
}

// Rows deleted from a store (by hand, or a tool) while its chunks still
// hold them: the analyses read the chunks, a merge the rows. Both say so;
// the merge wrote 3,800 events of 31,600 with exit status 0, and stats
// left a deleted lane's 12,000 events out of every figure.
void TestTraceMerge::editedStoreIsDamage() {
  QFETCH(QString, sql);
  QFETCH(QString, merge_says);
  QFETCH(QString, verify_says);
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, false, 1});
  QVERIFY(verify_store(a));
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(a.c_str(), &db), SQLITE_OK);
  QCOMPARE(sqlite3_exec(db, sql.toUtf8().constData(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const std::string out = dir.filePath("run.cstrace").toStdString();
  auto report = merge_stores({a}, out);
  QVERIFY(!report);
  QVERIFY2(
      QString::fromStdString(report.message()).startsWith(QString::fromStdString(a) + merge_says),
      report.message().c_str());
  QVERIFY(!std::filesystem::exists(out));
  const cs::Status verified = verify_store(a);
  QVERIFY(!verified);
  QVERIFY2(QString::fromStdString(verified.message())
               .startsWith(QString::fromStdString(a) + verify_says),
           verified.message().c_str());
}

// A link named as the output is kept and its target replaced, as an
// export writes through one (the link itself was replaced by a file).
void TestTraceMerge::writesThroughALink() {
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, false, 1});
  const std::string target = dir.filePath("runs/run-1.cstrace").toStdString();
  QVERIFY(std::filesystem::create_directory(dir.filePath("runs").toStdString()));
  QVERIFY(merge_stores({a}, target));
  const std::string link = dir.filePath("latest.cstrace").toStdString();
  std::filesystem::create_symlink(target, link);
  auto report = merge_stores({a}, link);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QVERIFY(std::filesystem::is_symlink(link));
  QCOMPARE(QString::fromStdString(std::filesystem::read_symlink(link).string()),
           QString::fromStdString(target));
  QVERIFY(verify_store(target));
}

void TestTraceMerge::refusesOutputAmongInputs() {
  QTemporaryDir dir;
  const std::string a = write_rank(dir, {0, "node-a", 0, 0, false, 1});
  auto report = merge_stores({a}, a);
  QVERIFY(!report);
  QVERIFY(QString::fromStdString(report.message()).contains("the output is also an input"));
  auto missing = merge_stores({dir.filePath("nope.cstrace").toStdString()},
                              dir.filePath("run.cstrace").toStdString());
  QVERIFY(!missing);
  QVERIFY(QString::fromStdString(missing.message()).contains("nope.cstrace: no such file"));
}

QTEST_GUILESS_MAIN(TestTraceMerge)
#include "tst_trace_merge.moc"
