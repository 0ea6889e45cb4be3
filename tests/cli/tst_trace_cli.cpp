// `clusterscope trace ...` as a user runs it on real traces: import, info,
// stats (with the breakdown the Python reference computed), export in every
// format, merge, and the one-line errors.

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../process_run.h"
#include "core/trace_writer.h"

namespace {

using Run = cs::test::ProcessRun;
using cs::test::run_cli;

// `trace stats` of a store imported from a trace of this JSON text (a
// failed import's run, when it fails).
Run stats_of_trace(const QTemporaryDir& dir, const QByteArray& text) {
  const QString trace = dir.filePath("trace.json");
  QFile f(trace);
  if (!f.open(QIODevice::WriteOnly)) return Run{};
  f.write(text);
  f.close();
  const QString store = dir.filePath("trace.cstrace");
  const Run imported = run_cli({"trace", "import", trace, "-o", store});
  if (imported.exit_code != 0) return imported;
  return run_cli({"trace", "stats", store});
}

QJsonObject json_of(const Run& r) {
  return QJsonDocument::fromJson(r.out.toUtf8()).object();
}

const QString kData = CS_DATA_DIR "/validation/";

// The sample standard deviation (n - 1) of each name's durations, as
// Nsight Systems' StdDev, from rows of (name, duration) an SQL query gives.
std::map<QString, double> stddev_by_name(sqlite3* db, const char* sql) {
  std::map<QString, std::vector<double>> durations;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK)
    qFatal("%s", sqlite3_errmsg(db));
  while (sqlite3_step(stmt) == SQLITE_ROW)
    durations[QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)))]
        .push_back(sqlite3_column_double(stmt, 1));
  sqlite3_finalize(stmt);
  std::map<QString, double> out;
  for (const auto& [name, d] : durations) {
    double mean = 0, squares = 0;
    for (double x : d)
      mean += x / double(d.size());
    for (double x : d)
      squares += (x - mean) * (x - mean);
    out[name] = d.size() > 1 ? std::sqrt(squares / double(d.size() - 1)) : 0;
  }
  return out;
}

bool close_to(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(b), 1.0) + 1e-6;
}

// A writable copy of a committed store in `dir`, upgraded to this schema (as
// opening it does), to be damaged or edited; empty when it cannot be made.
QString writable_store(const QTemporaryDir& dir, const QString& fixture, const QString& name) {
  const QString store = dir.filePath(name);
  if (!QFile::copy(QStringLiteral(CS_SOURCE_DIR "/tests/data/") + fixture, store) ||
      !QFile::setPermissions(store, QFile::ReadOwner | QFile::WriteOwner) ||
      run_cli({"trace", "info", store}).exit_code != 0)
    return {};
  return store;
}

// Sets the meta row `key` of `store` to `value`, bytes as they are.
bool set_meta(const QString& store, const char* key, const QByteArray& value) {
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  const bool ok = sqlite3_open(store.toUtf8().constData(), &db) == SQLITE_OK &&
                  sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", -1,
                                     &stmt, nullptr) == SQLITE_OK &&
                  sqlite3_bind_text(stmt, 1, key, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
                  sqlite3_bind_text(stmt, 2, value.constData(), static_cast<int>(value.size()),
                                    SQLITE_TRANSIENT) == SQLITE_OK &&
                  sqlite3_step(stmt) == SQLITE_DONE;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return ok;
}

}  // namespace

class TestTraceCli : public QObject {
  Q_OBJECT

 private slots:
  void csvTablesAreWrittenAsOneSet();
  void importInfoStats();
  void unreadablePredictionLeavesTheFigures();
  void runHeldAgainstAPlanOfTheUsers();
  void predictedAgainOnAClusterTooSmall();
  void launchStatisticsAreKernelLaunches();
  void apiCallsAsNsightSumsThem();
  void copiesAndRangesAsNsightSumsThem();
  void kinetoCallsAndRanges();
  void tablesSayWhatTheyLeaveOut();
  void perRankTablesAddUpToTheRun();
  void newerNsightExports();
  void pytorchMemoryProfile();
  void countersAsTheStoreHoldsThem();
  void gemmRatesInStatsAndReport();
  void opCountersAloneMakeNoCountersTable();
  void reportNoteNamesTheStoresCounters_data();
  void reportNoteNamesTheStoresCounters();
  void reportCountsEventsStartingInTheRange();
  void pytorchStreamSyncs();
  void rankWithoutDeviceWorkSaysSo();
  void controlCharactersInNamesAreEscaped();
  void wideAndLongNamesKeepTheColumns();
  void namesThatReadAlikeStayBounded();
  void graphCopiesAreLaunches();
  void windowInAGapWritesNothing();
  void windowedFigures();
  void partNeitherPredictedNorMeasured();
  void infoJsonGivesMetaTypes_data();
  void infoJsonGivesMetaTypes();
  void infoOfAStoreWithAHugePlan();
  void infoJsonKeepsThePlanAsWritten();
  void infoJsonOfMetaThatIsNotAnObject_data();
  void infoJsonOfMetaThatIsNotAnObject();
  void exportFormats();
  void outputsKeepReadOnlyFilesAndFolders_data();
  void outputsKeepReadOnlyFilesAndFolders();
  void outputsMakeTheirFolders_data();
  void outputsMakeTheirFolders();
  void mergeKeepsAReadOnlyStore();
  void compareTwoRuns();
  void criticalPathOfARun();
  void mergeStores();
  void mergeOfTwoRunsIsRefusedWithoutAnEnding();
  void failedWriteKeepsTheEarlierStore_data();
  void failedWriteKeepsTheEarlierStore();
  void exportToStandardOutput();
  void keptEventsAreCounted();
  void errors_data();
  void truncatedNsightExportIsNamed();
  void damagedStoreReportSaysSo();
  void damagedPagesAreNotReadAsNoRows();
  void damagedPagesReadWithoutAnError();
  void unreadableStoreSaysWhy();
  void deepMetaIsText();
  void laneCountsNoStoreHoldsAreDamage_data();
  void laneCountsNoStoreHoldsAreDamage();
  void errors();
};

// A CPU-only profiler trace has no device span to share out: its row says
// "-" (it said "-%" in every column) and a line says why.
void TestTraceCli::rankWithoutDeviceWorkSaysSo() {
  QTemporaryDir dir;
  const Run stats = stats_of_trace(
      dir, R"({"traceEvents":[{"ph":"X","name":"aten::mm","ts":10,"dur":5,"pid":1,"tid":1,)"
           R"("cat":"cpu_op"}],"distributedInfo":{"rank":0}})");
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  QVERIFY2(!stats.out.contains("-%"), qPrintable(stats.out));
  QVERIFY2(stats.out.contains("  rank 0: no device work recorded (no GPU kernel, copy or engine "
                              "compute), so no span to share out"),
           qPrintable(stats.out));
}

// An imported name holding a newline or an escape code: raw, it split the
// table's row and reached the terminal.
void TestTraceCli::controlCharactersInNamesAreEscaped() {
  QTemporaryDir dir;
  const Run stats = stats_of_trace(
      dir, R"({"traceEvents":[{"ph":"X","name":"a\nb\r\u0001\u001b[31m","ts":10,"dur":5,)"
           R"("pid":0,"tid":7,"cat":"kernel"}],"distributedInfo":{"rank":0}})");
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  QVERIFY2(stats.out.contains(R"(a\nb\r\x01\x1b[31m  )"), qPrintable(stats.out));
  QVERIFY(!stats.out.contains('\x1b') && !stats.out.contains('\r'));
}

// Names in CJK and emoji take two terminal cells a character: counted as
// one, they pushed the rest of their row right. A long name keeps its start
// and its end, cut between characters: two kernels that differ at the end
// printed the same label, and a cut inside a character printed invalid UTF-8.
void TestTraceCli::wideAndLongNamesKeepTheColumns() {
  QTemporaryDir dir;
  const QString wide = QString::fromUtf8("unicod\u00e9_\u6838\u51fd\u6570_\U0001F680");  // 17 cells
  const QString stem = "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel";
  const QStringList names = {
      wide, stem + "_cta<float, float, 32>", stem + "_warp<float, float, 64>",
      QString(40, QChar(0x6838)),  // 80 cells: cut between characters
      "void cs::worker::(anonymous namespace)::softmax_backward_kernel<__nv_bfloat16>(float*, "
      "float const*, __nv_bfloat16 const*, float, int, int)"};
  QJsonArray events;
  for (int i = 0; i < names.size(); ++i) {
    events.append(QJsonObject{{"ph", "X"},
                              {"name", names[i]},
                              {"ts", 10 + 20 * i},
                              {"dur", 5 + i},
                              {"pid", 0},
                              {"tid", 7},
                              {"cat", "kernel"}});
  }
  const QJsonObject trace{{"traceEvents", events}, {"distributedInfo", QJsonObject{{"rank", 0}}}};
  const Run stats = stats_of_trace(dir, QJsonDocument(trace).toJson());
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QStringList lines = stats.out.split('\n');
  const int header = lines.indexOf(QRegularExpression("^name +category +count.*"));
  QVERIFY2(header > 0, qPrintable(stats.out));
  const int category_at = static_cast<int>(lines[header].indexOf("category"));
  QStringList labels;
  for (int i = header + 2; i < header + 2 + names.size(); ++i) {
    const QString row = lines.value(i);
    const qsizetype end = row.indexOf("  compute");
    QVERIFY2(end > 0, qPrintable(row));
    labels.append(row.left(end).trimmed());
    // Every character here but ASCII takes two cells, the rocket two UTF-16 units.
    int cells = 0;
    for (qsizetype k = 0; k < end + 2; ++k) {
      const QChar c = row[k];
      if (c.isLowSurrogate()) continue;
      cells += c.unicode() < 0x80 || c.unicode() == 0xe9 ? 1 : 2;
    }
    QVERIFY2(cells == category_at, qPrintable(row + "\n" + lines[header]));
    QVERIFY2(!row.contains(QChar::ReplacementCharacter), qPrintable(row));
  }
  QVERIFY2(labels.contains(wide), qPrintable(labels.join('\n')));
  QVERIFY2(labels.removeDuplicates() == 0, qPrintable(labels.join('\n')));
  QVERIFY2(labels.contains(QRegularExpression("^split_embedding_.*\\.\\.\\.a<float, float, 32>$")),
           qPrintable(labels.join('\n')));
  // Too wide, a kernel's name loses its return type and parameters first.
  QVERIFY2(labels.contains("cs::worker::softmax_backward_kernel<__nv_bfloat16>"),
           qPrintable(labels.join('\n')));
}

// A copy that a CUDA graph launched carries cudaGraphLaunch's correlation:
// a launch, not a synchronous cudaMemcpy (whose call outlasts its copy),
// though neither call is named *Async.
void TestTraceCli::graphCopiesAreLaunches() {
  QTemporaryDir dir;
  const QByteArray trace = R"({"traceEvents":[
    {"ph":"X","cat":"cuda_runtime","name":"cudaGraphLaunch","pid":1,"tid":1,"ts":10,"dur":5,"args":{"correlation":1}},
    {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":7,"ts":20,"dur":50,"args":{"correlation":1,"device":0,"stream":7}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaMemcpy","pid":1,"tid":1,"ts":100,"dur":60,"args":{"correlation":2}},
    {"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoH","pid":0,"tid":7,"ts":110,"dur":40,"args":{"correlation":2,"device":0,"stream":7}}],
    "distributedInfo":{"rank":0}})";
  QFile f(dir.filePath("graph.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(trace);
  f.close();
  const QString store = dir.filePath("graph.db");
  const Run imported = run_cli({"trace", "import", dir.filePath("graph.json"), "-o", store});
  QVERIFY2(imported.exit_code == 0, qPrintable(imported.err));
  const QJsonObject stats = json_of(run_cli({"trace", "stats", store, "--json"}));
  const QJsonObject launches = stats["ranks"].toArray().at(0).toObject()["launches"].toObject();
  QVERIFY2(
      launches["launches"].toInt() == 1 && launches["synchronous_copies_left_out"].toInt() == 1,
      QJsonDocument(stats["ranks"].toArray().at(0).toObject()).toJson().constData());
}

// A window that falls in a gap of the trace (two kernels a second apart,
// the window between them) wrote a file of no events, which no import
// reads: refused, nothing left behind; a window over a kernel exports it.
void TestTraceCli::windowInAGapWritesNothing() {
  QTemporaryDir dir;
  QFile f(dir.filePath("gap.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"traceEvents":[
    {"ph":"X","cat":"kernel","name":"early","pid":0,"tid":7,"ts":10,"dur":5},
    {"ph":"X","cat":"kernel","name":"late","pid":0,"tid":7,"ts":1000010,"dur":5}],
    "distributedInfo":{"rank":0}})");
  f.close();
  const QString store = dir.filePath("gap.db");
  QCOMPARE(run_cli({"trace", "import", dir.filePath("gap.json"), "-o", store}).exit_code, 0);
  for (const QString& out : {dir.filePath("w.json"), dir.filePath("w.csv")}) {
    const Run gap =
        run_cli({"trace", "export", store, "-o", out, "--from", "100ms", "--to", "200ms"});
    QVERIFY2(
        gap.exit_code == 1 && gap.err.contains("--from/--to: no event lies in the window "
                                               "(the trace lasts 1.00 s); nothing was written"),
        qPrintable(gap.err));
    QVERIFY2(!QFile::exists(out), qPrintable(out));
  }
  // Refused before any file is written: an earlier export at the output
  // stays as it was, and a device (-o -, a link to one) is left alone. Both
  // were removed after the export replaced them (-o - removed /dev/stdout).
  const QString earlier = dir.filePath("earlier.csv");
  {
    QFile e(earlier);
    QVERIFY(e.open(QIODevice::WriteOnly));
    e.write("an earlier export\n");
  }
  const QString device = dir.filePath("null.json");
  QVERIFY(QFile::link("/dev/null", device));
  for (const QString& out : {earlier, device}) {
    const Run gap =
        run_cli({"trace", "export", store, "-o", out, "--from", "100ms", "--to", "200ms"});
    QVERIFY2(gap.exit_code == 1 && gap.err.contains("no event lies in the window"),
             qPrintable(gap.err));
  }
  QFile kept(earlier);
  QVERIFY(kept.open(QIODevice::ReadOnly));
  QCOMPARE(kept.readAll(), QByteArray("an earlier export\n"));
  QVERIFY(QFileInfo(device).isSymLink());
  // A report, a summary table or the statistics of the gap: no figures to give.
  const QString no_work =
      "--from/--to: no device work (kernel, copy, collective or engine "
      "compute) lies in the window (the trace lasts 1.00 s)";
  for (const QStringList& args :
       {QStringList{"export", store, "-o", dir.filePath("w.html")},
        QStringList{"export", store, "-o", dir.filePath("k.csv"), "--table", "kernels"},
        QStringList{"export", store, "-o", dir.filePath("all.csv"), "--table", "all"},
        QStringList{"stats", store}}) {
    const Run gap =
        run_cli(QStringList{"trace"} + args + QStringList{"--from", "100ms", "--to", "200ms"});
    QVERIFY2(gap.exit_code == 1 && gap.err.contains(no_work), qPrintable(gap.err));
    QVERIFY2(gap.out.isEmpty(), qPrintable(gap.out));
  }
  QCOMPARE(QDir(dir.path()).entryList({"w.*", "k.*", "all.*"}, QDir::Files).size(), 0);
  const Run late = run_cli(
      {"trace", "export", store, "-o", dir.filePath("late.json"), "--from", "900ms", "--json"});
  QVERIFY2(late.exit_code == 0, qPrintable(late.err));
  QCOMPARE(json_of(late)["events"].toInt(), 1);
}

// --from/--to on the statistics, a report and the summary tables: the
// figures of what ran in the window, as the app's selected range gives them.
// The kernels the window's statistics count are those the events table of
// the same window holds (two paths: the analysis and the event export).
// Each part of the step: a part neither predicted nor measured (tensor-
// parallel communication in a run without tp) reads "-", as the app's
// Predicted vs measured tab and the HTML report say it; it read "not
// predicted", as a part measured but not predicted (idle) does.
void TestTraceCli::partNeitherPredictedNorMeasured() {
  QTemporaryDir dir;
  const QString store = dir.filePath("run.db");
  QVERIFY(QFile::copy(CS_DATA_DIR "/cpu/cpu-engine-dp2.db", store));
  QFile(store).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  const Run stats = run_cli({"trace", "stats", store});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QString table = stats.out.section(QStringLiteral("Each part of the step"), 1);
  QVERIFY2(!table.isEmpty(), qPrintable(stats.out));
  auto error_of = [&](const QString& part) {
    for (const QString& line : table.split('\n')) {
      const QStringList cells = line.simplified().split(' ');
      if (cells.size() >= 5 && cells[0] == part) return cells.mid(5).join(' ');
    }
    return QStringLiteral("(no row)");
  };
  QCOMPARE(error_of(QStringLiteral("communication.tp")), QStringLiteral("-"));
  QCOMPARE(error_of(QStringLiteral("bubble")), QStringLiteral("-"));
  QCOMPARE(error_of(QStringLiteral("idle")), QStringLiteral("not predicted"));
}

void TestTraceCli::windowedFigures() {
  QTemporaryDir dir;
  const QString store = dir.filePath("run.db");
  QVERIFY(QFile::copy(CS_DATA_DIR "/cpu/cpu-engine-dp2.db", store));
  QFile(store).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  const Run whole = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(whole.exit_code == 0, qPrintable(whole.err));
  QVERIFY(json_of(whole)["window"].isNull());
  const Run part = run_cli(
      {"trace", "stats", store, "--json", "--top", "1000", "--from", "100ms", "--to", "300ms"});
  QVERIFY2(part.exit_code == 0, qPrintable(part.err));
  const QJsonObject window = json_of(part)["window"].toObject();
  QCOMPARE(window["from_ns"].toInteger(), 100'000'000);
  QCOMPARE(window["to_ns"].toInteger(), 300'000'000);
  // Each stream's span lies inside the window, as its rank's does (a stream
  // ran from its first overlapping event's start to its last one's end).
  int streams = 0;
  for (const QJsonValue& rank : json_of(part)["ranks"].toArray()) {
    for (const QJsonValue& v : rank.toObject()["streams"].toArray()) {
      const QJsonObject st = v.toObject();
      ++streams;
      QVERIFY2(st["span_ns"].toInteger() <= 200'000'000,
               qPrintable(QString::number(st["span_ns"].toInteger())));
      QCOMPARE(st["busy_ns"].toInteger() + st["idle_ns"].toInteger(), st["span_ns"].toInteger());
    }
  }
  QVERIFY(streams >= 2);
  auto kernel_count = [](const QJsonObject& stats) {
    qint64 n = 0;
    for (const QJsonValue& k : stats["kernels"].toArray())
      if (k.toObject()["kind"].toString() == "kernel") n += k.toObject()["count"].toInteger();
    return n;
  };
  const qint64 in_window = kernel_count(json_of(part));
  QVERIFY(in_window > 0);
  QVERIFY(in_window <
          kernel_count(json_of(run_cli({"trace", "stats", store, "--json", "--top", "1000"}))));
  // The events table of the window: its kernels that end after the window
  // starts (one ending where it starts ran before it) and start before it ends.
  const QString events = dir.filePath("e.csv");
  QCOMPARE(run_cli({"trace", "export", store, "-o", events, "--from", "100ms", "--to", "300ms"})
               .exit_code,
           0);
  QFile csv(events);
  QVERIFY(csv.open(QIODevice::ReadOnly));
  const QStringList header = QString(csv.readLine()).trimmed().split(',');
  const int kind = header.indexOf("kind");
  QVERIFY(kind >= 0);
  qint64 listed = 0;
  while (!csv.atEnd())
    if (QString(csv.readLine()).split(',').value(kind) == "kernel") ++listed;
  QCOMPARE(listed, in_window);
  // --steps: the window of a step is that step, as the whole run's per-step
  // breakdown has it.
  {
    const QString gpu = dir.filePath("bf16.db");
    QVERIFY(QFile::copy(CS_DATA_DIR "/gpu/worker-bf16.db", gpu));
    QFile(gpu).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    const QJsonObject all = json_of(run_cli({"trace", "stats", gpu, "--json"}));
    QJsonObject step5;
    for (const QJsonValue& v : all["ranks"].toArray()[0].toObject()["steps"].toArray())
      if (v.toObject()["step"].toInt() == 5) step5 = v.toObject()["breakdown"].toObject();
    QVERIFY(!step5.isEmpty());
    const Run one = run_cli({"trace", "stats", gpu, "--json", "--steps", "5"});
    QVERIFY2(one.exit_code == 0, qPrintable(one.err));
    const QJsonObject total = json_of(one)["ranks"].toArray()[0].toObject()["total"].toObject();
    for (const char* field : {"span_ns", "compute_ns", "idle_ns", "exposed_memory_ns"})
      QCOMPARE(total[field].toInteger(), step5[field].toInteger());
    QVERIFY(run_cli({"trace", "stats", gpu, "--steps", "5-6"}).out.contains("window: steps 5-6, "));
    const Run past = run_cli({"trace", "stats", gpu, "--steps", "20"});
    QVERIFY2(past.exit_code == 1 && past.err.contains("--steps 20: the run records steps 0 to 11"),
             qPrintable(past.err));
    // A step the store lacks is an error of the store's (exit 1); a flag
    // that cannot be read, or two that exclude each other, a usage error (2).
    const Run bad =
        run_cli({"trace", "export", gpu, "-o", dir.filePath("s.json"), "--steps", "3-x"});
    QVERIFY2(bad.exit_code == 2 && bad.err.contains("--steps: \"3-x\" is not a step or a range "
                                                    "of steps (5, 3-7)"),
             qPrintable(bad.err));
    const Run reversed = run_cli({"trace", "stats", gpu, "--steps", "6-5"});
    QVERIFY2(reversed.exit_code == 2 &&
                 reversed.err.contains("--steps: \"6-5\": the range ends before it begins (5-6?)"),
             qPrintable(reversed.err));
    const Run both = run_cli({"trace", "stats", gpu, "--steps", "3", "--from", "1s"});
    QVERIFY2(both.exit_code == 2 && both.err.contains("--steps gives the window: not with "
                                                      "--from/--to"),
             qPrintable(both.err));
  }
  // The text says what it covers.
  const Run text = run_cli({"trace", "stats", store, "--from", "100ms", "--to", "300ms"});
  QVERIFY2(text.out.contains("window: 100.000 ms to 300.000 ms from the trace's first event; the "
                             "breakdown is of the time inside it, the tables of every operation "
                             "that overlaps it, whole"),
           qPrintable(text.out));
  // An end past the trace's is said so; the echo keeps the nanoseconds given.
  const Run past = run_cli({"trace", "stats", store, "--from", "1.915ms", "--to", "100s"});
  QVERIFY2(past.out.contains(QRegularExpression(
               "window: 1\\.915 ms to 100000\\.000 ms from the trace's first event \\(the trace "
               "ends at 69[0-9]\\.[0-9]{3} ms\\)")),
           qPrintable(past.out));
  // The plan is held against whole steps: not in a window.
  QVERIFY2(past.out.contains("Predicted against measured: not for a window") &&
               past.out.contains("trace stats without --from/--to gives it"),
           qPrintable(past.out));
  const Run again = run_cli({"trace", "stats", store, "--from", "1ms", "--predict-again"});
  QVERIFY2(again.exit_code == 1 &&
               again.err.contains("--predict-again holds every step past the warm-up against "
                                  "the plan, not a window: leave out --from/--to"),
           qPrintable(again.err));
  // A window of steps is named as it was given (it advised leaving out
  // --from/--to, which were not given).
  const Run steps = run_cli({"trace", "stats", store, "--steps", "1"});
  QVERIFY2(steps.out.contains("trace stats without --steps gives it"), qPrintable(steps.out));
  const Run steps_again = run_cli({"trace", "stats", store, "--steps", "1", "--predict-again"});
  QVERIFY2(steps_again.err.contains("leave out --steps"), qPrintable(steps_again.err));
  // A report of the window says it is one; the kernels table of the window
  // holds the statistics' kernels.
  const QString report = dir.filePath("r.html");
  QCOMPARE(run_cli({"trace", "export", store, "-o", report, "--from", "100ms", "--to", "300ms"})
               .exit_code,
           0);
  QFile html(report);
  QVERIFY(html.open(QIODevice::ReadOnly));
  QVERIFY(html.readAll().contains("A range of the run: 100.000 to 300.000 ms from its start"));
  const QString kernels = dir.filePath("k.csv");
  QCOMPARE(run_cli({"trace", "export", store, "-o", kernels, "--table", "kernels", "--from",
                    "100ms", "--to", "300ms"})
               .exit_code,
           0);
  QFile k(kernels);
  QVERIFY(k.open(QIODevice::ReadOnly));
  qint64 tabled = 0;
  for (const QString& line : QString(k.readAll()).split('\n')) {
    const QStringList f = line.split(',');
    if (f.value(0) == "all" && f.value(2) == "kernel") tabled += f.value(4).toLongLong();
  }
  QCOMPARE(tabled, in_window);
}

void TestTraceCli::importInfoStats() {
  QTemporaryDir dir;
  const QString store = dir.filePath("two.cstrace");
  const Run imported = run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz",
                                kData + "kineto/sampled_rank-1.json.gz", "-o", store, "--json"});
  QVERIFY2(imported.exit_code == 0, qPrintable(imported.err));
  const QJsonObject report = json_of(imported);
  QCOMPARE(report["ranks"].toInt(), 2);
  QCOMPARE(report["events"].toInt(), 4810 + 4675);
  QCOMPARE(report["format"].toString(), QString("kineto"));

  const Run info = run_cli({"trace", "info", store, "--json"});
  QCOMPARE(info.exit_code, 0);
  const QJsonObject i = json_of(info);
  QCOMPARE(i["status"].toString(), QString("complete"));
  QCOMPARE(i["world_size"].toInt(), 128);
  QCOMPARE(i["ranks"].toArray().size(), 2);
  // Their send/receive matches disagree: left as recorded (see tst_trace_import).
  QCOMPARE(i["meta"].toObject()["clock_alignment"].toString(),
           QString("none (matched collectives disagree)"));
  const Run info_text = run_cli({"trace", "info", store, "--check"});
  QCOMPARE(info_text.exit_code, 0);
  QVERIFY(info_text.out.contains("GPU 0 stream 7"));
  // The check says it ran (it printed what plain info prints).
  QVERIFY2(info_text.out.contains("integrity: every page reads (SQLite's check), and every "
                                  "lane's chunks decode to its events"),
           qPrintable(info_text.out));
  QCOMPARE(json_of(run_cli({"trace", "info", store, "--check", "--json"}))["integrity"].toString(),
           QString("ok"));

  const Run stats = run_cli({"trace", "stats", store, "--json", "--top", "3"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonObject s = json_of(stats);
  const QJsonObject rank1 = s["ranks"].toArray()[1].toObject()["total"].toObject();
  // tests/core/kineto_reference.py on sampled_rank-1.json.gz
  QCOMPARE(rank1["compute_ns"].toDouble(), 271973000.0);
  QCOMPARE(rank1["communication_ns"].toDouble(), 379053000.0);
  QCOMPARE(rank1["overlap_ns"].toDouble(), 75530000.0);
  QCOMPARE(rank1["idle_host_wait_ns"].toDouble(), 341109000.0);
  // ... and its launch statistics (HTA's): 1154 paired, 278 shorter than
  // their call, 880 delays over 100 us, a median delay of 11.886 ms.
  const QJsonObject launches1 = s["ranks"].toArray()[1].toObject()["launches"].toObject();
  QCOMPARE(launches1["launches"].toInt(), 1154);
  QCOMPARE(launches1["short_kernels"].toInt(), 278);
  QCOMPARE(launches1["delay_outliers"].toInt(), 880);
  QCOMPARE(launches1["delay_median_ns"].toDouble(), 11886000.0);
  // ... and each stream's idle time (HTA's idle time breakdown): rank 0's
  // compute stream 7 idles 83.1% of its span where the rank idles 55.2%
  // (tests/core/kineto_reference.py, HTA's algorithm per stream).
  auto stream = [&](int rank, const QString& name) {
    for (const QJsonValue& v : s["ranks"].toArray()[rank].toObject()["streams"].toArray())
      if (v.toObject()["name"].toString() == name) return v.toObject();
    return QJsonObject();
  };
  const QJsonObject s7 = stream(0, "GPU 0 stream 7");
  QCOMPARE(s7["events"].toInt(), 1052);
  QCOMPARE(s7["span_ns"].toDouble(), 1202935000.0);
  QCOMPARE(s7["busy_ns"].toDouble(), 202918000.0);
  QCOMPARE(s7["idle_host_wait_ns"].toDouble(), 397917000.0);
  QCOMPARE(s7["idle_kernel_wait_ns"].toDouble(), 0.0);
  QCOMPARE(s7["idle_other_ns"].toDouble(), 602100000.0);
  // Its queue (HTA's queue length): 80 operations at most, 16.1 on average.
  QCOMPARE(s7["launched"].toInt(), 1052);
  QCOMPARE(s7["queue_max"].toInt(), 80);
  QVERIFY2(std::abs(s7["queue_mean"].toDouble() - 16.1027628259) < 1e-9,
           qPrintable(QString::number(s7["queue_mean"].toDouble(), 'g', 12)));
  const QJsonObject s84 = stream(1, "GPU 1 stream 84");
  QCOMPARE(s84["events"].toInt(), 8);
  QCOMPARE(s84["busy_ns"].toDouble(), 274146000.0);
  QCOMPARE(s84["idle_host_wait_ns"].toDouble(), 715850000.0);
  QCOMPARE(s84["idle_other_ns"].toDouble(), 62586000.0);
  QCOMPARE(s["ranks"].toArray()[1].toObject()["streams"].toArray().size(), 5);
  QCOMPARE(s["kernels"].toArray().size(), 3);
  QVERIFY(
      s["kernels"].toArray()[0].toObject()["name"].toString().startsWith("ncclKernel_SendRecv"));
  QCOMPARE(s["collectives"].toArray()[0].toObject()["count"].toInt(), 20);
  // Their sends and receives pair with other peers on each rank (two ranks
  // of 128): the n-th is not the same operation, so its start says nothing
  // of lateness. Rank 1 was a straggler ("its collectives start 38133 us
  // after the other rank's").
  for (const QJsonValue& rank : s["stragglers"].toArray())
    QVERIFY2(!rank.toObject()["straggler"].toBool(), qPrintable(stats.out));

  const Run streams = run_cli({"trace", "stats", store, "--streams", "--top", "0"});
  QVERIFY2(streams.out.contains("Idle time per stream") &&
               streams.out.contains("   0  GPU 0 stream 7      1052  1202.935  16.9%  83.1%      "
                                    "33.1%         0.0%       50.1%        16.1         80"),
           qPrintable(streams.out));

  const Run text = run_cli({"trace", "stats", store});
  QCOMPARE(text.exit_code, 0);
  QVERIFY(!text.out.contains("Idle time per stream"));
  QVERIFY(text.out.contains("Where the time went"));
  QVERIFY(text.out.contains("Top kernels"));
  QVERIFY(text.out.contains("Collectives"));
  QVERIFY(text.out.contains("22.1%"));  // rank 1 compute, 271.973 of 1231.186 ms
  QVERIFY2(text.out.contains("Kernel launches"), qPrintable(text.out));
  QVERIFY2(text.out.contains("278 (24.1%)"), qPrintable(text.out));  // rank 1's short kernels
  QVERIFY2(text.out.contains("No straggler"), qPrintable(text.out));
  // The memory column is exposed memory (0.37% for rank 1), so that the
  // columns share out the span; it was all memory (1.34%), and rank 1's row
  // added up to 101%.
  const QStringList lines = text.out.split('\n');
  const auto header = std::find_if(lines.begin(), lines.end(), [](const QString& line) {
    return line.contains("exposed comm") && line.contains("exposed memory");
  });
  QVERIFY2(header != lines.end(), qPrintable(text.out));
  const auto row1 = std::find_if(
      header, lines.end(), [](const QString& line) { return line.trimmed().startsWith("1 "); });
  QVERIFY2(row1 != lines.end(), qPrintable(text.out));
  QVERIFY2(row1->contains(" 0.4% ") && !row1->contains("1.3%"), qPrintable(*row1));
}

// The CUDA API calls by name and total time, as Nsight Systems' cuda_api_sum
// report sums them: the same counts, totals, least and longest as SQL over
// the export's own CUPTI_ACTIVITY_KIND_RUNTIME table, named as that report
// names them (cudaMemcpy_v3020 as cudaMemcpy), without the rows of the
// calls' backtraces (event class 67), which repeat calls: counted, they
// doubled the time of cudaMemcpy, listed once more as cudaMemcpy_v3020.
void TestTraceCli::apiCallsAsNsightSumsThem() {
  QTemporaryDir dir;
  const QString nsys = kData + "nsys/saxpy-mpi-cuda.sqlite";
  const QString store = dir.filePath("saxpy.cstrace");
  QCOMPARE(run_cli({"trace", "import", nsys, "-o", store}).exit_code, 0);
  const Run stats = run_cli({"trace", "stats", store, "--json", "--top", "100"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonArray calls = json_of(stats)["api_calls"].toArray();

  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(nsys.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
           SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  QCOMPARE(
      sqlite3_prepare_v2(db,
                         "SELECT CASE substr(s.value, -6, 2) WHEN '_v' THEN substr(s.value, 1, "
                         "length(s.value) - 6) ELSE s.value END, count(*), sum(r.end - r.start), "
                         "min(r.end - r.start), max(r.end - r.start) FROM "
                         "CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                         "WHERE r.eventClass != 67 GROUP BY 1 ORDER BY 3 DESC",
                         -1, &stmt, nullptr),
      SQLITE_OK);
  const std::map<QString, double> stddev = stddev_by_name(
      db,
      "SELECT CASE substr(s.value, -6, 2) WHEN '_v' THEN substr(s.value, 1, length(s.value) - 6) "
      "ELSE s.value END, r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON "
      "s.id = r.nameId WHERE r.eventClass != 67");
  int row = 0;
  double total = 0;
  for (const QJsonValue& v : calls)
    total += v.toObject()["total_ns"].toDouble();
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    QVERIFY2(row < calls.size(), "a call name of the export is missing");
    const QJsonObject c = calls[row++].toObject();
    QCOMPARE(c["name"].toString(),
             QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))));
    QCOMPARE(c["count"].toInteger(), sqlite3_column_int64(stmt, 1));
    QCOMPARE(c["total_ns"].toInteger(), sqlite3_column_int64(stmt, 2));
    QCOMPARE(c["min_ns"].toInteger(), sqlite3_column_int64(stmt, 3));
    QCOMPARE(c["max_ns"].toInteger(), sqlite3_column_int64(stmt, 4));
    QVERIFY2(close_to(c["stddev_ns"].toDouble(), stddev.at(c["name"].toString())),
             qPrintable(c["name"].toString()));
    QCOMPARE(c["share"].toDouble(), c["total_ns"].toDouble() / total);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  QCOMPARE(row, calls.size());
  QCOMPARE(calls[0].toObject()["name"].toString(), QString("cudaMemcpy"));  // 374.3 ms of 15 calls

  const Run text = run_cli({"trace", "stats", store});
  QVERIFY2(text.out.contains("CUDA API calls (all ranks; as Nsight Systems' cuda_api_sum)") &&
               text.out.contains(QRegularExpression("\\ncudaLaunchKernel +5 +0\\.160 ")),
           qPrintable(text.out));
  // A trace of no runtime calls has no such table.
  QFile f(dir.filePath("kernels.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"traceEvents":[
    {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5}],
    "distributedInfo":{"rank":0}})");
  f.close();
  const QString kernels = dir.filePath("kernels.cstrace");
  QCOMPARE(run_cli({"trace", "import", dir.filePath("kernels.json"), "-o", kernels}).exit_code, 0);
  QCOMPARE(json_of(run_cli({"trace", "stats", kernels, "--json"}))["api_calls"].toArray().size(),
           0);
  QVERIFY(!run_cli({"trace", "stats", kernels}).out.contains("CUDA API calls (all ranks"));
}

// The device copies by kind (Nsight Systems' cuda_gpu_mem_time_sum and
// cuda_gpu_mem_size_sum) and the NVTX ranges by name (nvtx_sum): the same
// counts, times and bytes as SQL over the export's own CUPTI_ACTIVITY_KIND_MEMCPY
// and NVTX_EVENTS tables; in the text, the JSON and the HTML report.
void TestTraceCli::copiesAndRangesAsNsightSumsThem() {
  QTemporaryDir dir;
  const QString nsys = kData + "nsys/saxpy-mpi-cuda.sqlite";
  const QString store = dir.filePath("saxpy.cstrace");
  QCOMPARE(run_cli({"trace", "import", nsys, "-o", store}).exit_code, 0);
  const Run stats = run_cli({"trace", "stats", store, "--json", "--top", "100"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonArray copies = json_of(stats)["memory_ops"].toArray();
  const QJsonArray ranges = json_of(stats)["annotations"].toArray();

  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(nsys.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
           SQLITE_OK);
  auto each_row = [db](const char* sql, const std::function<void(sqlite3_stmt*)>& row) {
    sqlite3_stmt* stmt = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr), SQLITE_OK);
    while (sqlite3_step(stmt) == SQLITE_ROW)
      row(stmt);
    sqlite3_finalize(stmt);
  };
  // copyKind 1 is host to device, 2 device to host (CUpti_ActivityMemcpyKind).
  const std::map<QString, double> copy_stddev = stddev_by_name(
      db,
      "SELECT CASE copyKind WHEN 1 THEN 'Memcpy HtoD' WHEN 2 THEN 'Memcpy DtoH' END, "
      "end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY");
  const std::map<QString, double> range_stddev = stddev_by_name(
      db,
      "SELECT coalesce(n.text, s.value), n.end - n.start FROM NVTX_EVENTS n LEFT JOIN "
      "StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL");
  int row = 0;
  double copy_time = 0;
  for (const QJsonValue& v : copies)
    copy_time += v.toObject()["total_ns"].toDouble();
  each_row(
      "SELECT CASE copyKind WHEN 1 THEN 'Memcpy HtoD' WHEN 2 THEN 'Memcpy DtoH' END, count(*), "
      "sum(end - start), min(end - start), max(end - start), sum(bytes), min(bytes), max(bytes) "
      "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind ORDER BY 3 DESC",
      [&](sqlite3_stmt* stmt) {
        QVERIFY2(row < copies.size(), "a copy kind of the export is missing");
        const QJsonObject c = copies[row++].toObject();
        QCOMPARE(c["name"].toString(),
                 QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))));
        QCOMPARE(c["kind"].toString(), QString("memcpy"));
        QCOMPARE(c["count"].toInteger(), sqlite3_column_int64(stmt, 1));
        QCOMPARE(c["total_ns"].toInteger(), sqlite3_column_int64(stmt, 2));
        QCOMPARE(c["min_ns"].toInteger(), sqlite3_column_int64(stmt, 3));
        QCOMPARE(c["max_ns"].toInteger(), sqlite3_column_int64(stmt, 4));
        QCOMPARE(c["total_bytes"].toInteger(), sqlite3_column_int64(stmt, 5));
        QCOMPARE(c["min_bytes"].toInteger(), sqlite3_column_int64(stmt, 6));
        QCOMPARE(c["max_bytes"].toInteger(), sqlite3_column_int64(stmt, 7));
        QVERIFY(close_to(c["stddev_ns"].toDouble(), copy_stddev.at(c["name"].toString())));
        QCOMPARE(c["throughput_gbps"].toDouble(),
                 c["total_bytes"].toDouble() / c["total_ns"].toDouble());
        QCOMPARE(c["share"].toDouble(), c["total_ns"].toDouble() / copy_time);
      });
  QCOMPARE(row, copies.size());
  QCOMPARE(row, 2);

  // Ranges (push/pop 59, start/end 60) with an end; the text is inline or an id.
  row = 0;
  double range_time = 0;
  for (const QJsonValue& v : ranges)
    range_time += v.toObject()["total_ns"].toDouble();
  each_row(
      "SELECT coalesce(n.text, s.value), count(*), sum(n.end - n.start), min(n.end - n.start), "
      "max(n.end - n.start) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
      "WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL GROUP BY 1 ORDER BY 3 DESC",
      [&](sqlite3_stmt* stmt) {
        QVERIFY2(row < ranges.size(), "a range name of the export is missing");
        const QJsonObject n = ranges[row++].toObject();
        QCOMPARE(n["name"].toString(),
                 QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))));
        QCOMPARE(n["count"].toInteger(), sqlite3_column_int64(stmt, 1));
        QCOMPARE(n["total_ns"].toInteger(), sqlite3_column_int64(stmt, 2));
        QCOMPARE(n["min_ns"].toInteger(), sqlite3_column_int64(stmt, 3));
        QCOMPARE(n["max_ns"].toInteger(), sqlite3_column_int64(stmt, 4));
        QVERIFY(close_to(n["stddev_ns"].toDouble(), range_stddev.at(n["name"].toString())));
        QCOMPARE(n["share"].toDouble(), n["total_ns"].toDouble() / range_time);
      });
  sqlite3_close(db);
  QCOMPARE(row, ranges.size());
  QCOMPARE(row, 5);  // MPI_Init, MPI_Send, MPI_Recv, MPI_Finalize, saxpy

  const Run text = run_cli({"trace", "stats", store});
  QVERIFY2(
      text.out.contains("Device copies and sets (all ranks; as Nsight Systems' "
                        "cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum)") &&
          // 10 copies of 250 MiB in 186.001 ms: 14.09 GB/s.
          text.out.contains(QRegularExpression(
              "\\nMemcpy HtoD +10 +186\\.001 .* 2\\.44 GiB +250 MiB +250 MiB +250 MiB +14\\.09 ")),
      qPrintable(text.out));
  QVERIFY2(text.out.contains("Annotation ranges (all ranks; NVTX and the engines' phases, as "
                             "Nsight Systems' nvtx_sum)") &&
               text.out.contains(QRegularExpression("\\nMPI_Send +10 +136\\.343 ")),
           qPrintable(text.out));
  QCOMPARE(run_cli({"trace", "export", store, "-o", dir.filePath("r.html")}).exit_code, 0);
  QFile h(dir.filePath("r.html"));
  QVERIFY(h.open(QIODevice::ReadOnly));
  const QByteArray report = h.readAll();
  QVERIFY2(report.contains("<h2>Device copies and sets</h2>") &&
               report.contains("<tr><td><code>Memcpy DtoH</code></td><td class=n>5</td><td "
                               "class=n>98.698</td>") &&
               report.contains("<h2>Annotation ranges</h2>") &&
               report.contains("<tr><td><code>MPI_Recv</code></td><td class=n>5</td><td "
                               "class=n>107.721</td>"),
           report.constData());

  // A trace of kernels alone has neither table.
  QFile f(dir.filePath("kernels.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"traceEvents":[
    {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5}],
    "distributedInfo":{"rank":0}})");
  f.close();
  const QString kernels = dir.filePath("kernels.cstrace");
  QCOMPARE(run_cli({"trace", "import", dir.filePath("kernels.json"), "-o", kernels}).exit_code, 0);
  const QJsonObject bare = json_of(run_cli({"trace", "stats", kernels, "--json"}));
  QCOMPARE(bare["memory_ops"].toArray().size(), 0);
  QCOMPARE(bare["annotations"].toArray().size(), 0);
  const QString bare_text = run_cli({"trace", "stats", kernels}).out;
  QVERIFY(!bare_text.contains("Device copies") && !bare_text.contains("Annotation ranges"));
  // ... and says what it did not find, as nsys stats' SKIPPED lines.
  QVERIFY2(bare_text.contains("\nNo CUDA API calls, device copies and sets, annotation ranges, "
                              "collectives or sampled counters recorded.\n"),
           qPrintable(bare_text));
  // The Nsight export has calls, copies and ranges, but no collective and
  // no counter.
  const QString nsight = run_cli({"trace", "stats", store}).out;
  QVERIFY2(nsight.contains("\nNo collectives or sampled counters recorded.\n"), qPrintable(nsight));
}

// A PyTorch profile's calls and ranges: every cuda_runtime call of the file
// is a call (17 names; the importer files cudaStreamWaitEvent,
// cudaEventSynchronize... as synchronization, and they were left out), and
// the ranges are the host's (user_annotation): their GPU-side projections
// (gpu_user_annotation, Nsight's nvtx_gpu_proj_sum) were counted as more
// instances of the same range, mixing 100 ms host ranges with 0.6 ms ones.
void TestTraceCli::kinetoCallsAndRanges() {
  QTemporaryDir dir;
  const QString store = dir.filePath("allreduce.db");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/allreduce_rank-0.json.gz", "-o", store})
               .exit_code,
           0);
  const QJsonObject stats = json_of(run_cli({"trace", "stats", store, "--json", "--top", "100"}));
  std::map<QString, qint64> calls, ranges;
  for (const QJsonValue& v : stats["api_calls"].toArray())
    calls[v.toObject()["name"].toString()] = v.toObject()["count"].toInteger();
  for (const QJsonValue& v : stats["annotations"].toArray())
    ranges[v.toObject()["name"].toString()] = v.toObject()["count"].toInteger();
  QCOMPARE(calls.size(), std::size_t(17));
  QCOMPARE(calls["cudaStreamWaitEvent"], 84);
  QCOMPARE(calls["cudaEventQuery"], 48);
  QCOMPARE(calls["cudaEventSynchronize"], 24);
  QCOMPARE(calls["cudaDeviceSynchronize"], 1);
  QCOMPARE(ranges["## backward ##"], 3);
  QCOMPARE(ranges["nccl:all_reduce"], 15);
}

// Two kernels named in 200,000 characters that differ only in the middle
// (an import's, a hostile one's): shortened, they read alike, and the table
// showed both whole, 400,000 characters of one line. Now at most
// kShownNameChars characters each, their start and end around " … "; the
// JSON holds them whole.
void TestTraceCli::namesThatReadAlikeStayBounded() {
  QTemporaryDir dir;
  const QString half =
      "void cutlass::Kernel<" + QString("cutlass::gemm::GemmShape<128, 128, 32>, ").repeated(2500);
  const QStringList names = {half + "a" + half + ">", half + "b" + half + ">"};
  QJsonArray events;
  for (int i = 0; i < names.size(); ++i)
    events.append(QJsonObject{{"ph", "X"},
                              {"name", names[i]},
                              {"ts", 10 + 20 * i},
                              {"dur", 5 + i},
                              {"pid", 0},
                              {"tid", 7},
                              {"cat", "kernel"}});
  const QJsonObject trace{{"traceEvents", events}, {"distributedInfo", QJsonObject{{"rank", 0}}}};
  const Run stats = stats_of_trace(dir, QJsonDocument(trace).toJson());
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  QVERIFY2(stats.out.size() < 20'000, qPrintable(stats.out.left(2000)));
  QCOMPARE(stats.out.count(half.left(500) + QString::fromUtf8(" … ") + half.right(499) + ">"), 2);
  const QJsonObject json =
      json_of(run_cli({"trace", "stats", dir.filePath("trace.cstrace"), "--json"}));
  QStringList whole;
  for (const QJsonValue& k : json["kernels"].toArray())
    whole << k.toObject()["name"].toString();
  whole.sort();
  QCOMPARE(whole, names);
}

// A table of the first --top rows says how many there are (the text, the
// JSON's totals, the report); names that would read alike when shortened
// are told apart (three backward kernels read "split_embedding_backward_
// codegen_rowwi...c10::Half, 2ul, 32>"); a copy without its bytes has no
// rate in the JSON (it read 0 GB/s) rather than a made-up one.
void TestTraceCli::tablesSayWhatTheyLeaveOut() {
  QTemporaryDir dir;
  const QString store = dir.filePath("sampled.db");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz",
                    kData + "kineto/sampled_rank-1.json.gz", "-o", store})
               .exit_code,
           0);
  const Run text = run_cli({"trace", "stats", store});
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  const QJsonObject stats = json_of(run_cli({"trace", "stats", store, "--json"}));
  const qint64 kernels = stats["totals"].toObject()["kernels"].toInteger();
  QVERIFY(kernels > 100);
  QCOMPARE(stats["kernels"].toArray().size(), 10);
  QVERIFY2(text.out.contains(QString("  10 of %1 shown; --top %1 lists them all").arg(kernels)),
           qPrintable(text.out));
  for (const char* kernel : {"split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_"
                             "cta_per_row_1<c10::Half, float, c10::Half, 2ul, 32>",
                             "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_"
                             "warp_per_row_1<c10::Half, float, c10::Half, 2ul, 32>"})
    QVERIFY2(text.out.contains(QString("\n") + kernel + "  "), qPrintable(text.out));
  QVERIFY2(!text.out.contains("split_embedding_backward_codegen_rowwi..."), qPrintable(text.out));
  QCOMPARE(run_cli({"trace", "export", store, "-o", dir.filePath("r.html")}).exit_code, 0);
  QFile html(dir.filePath("r.html"));
  QVERIFY(html.open(QIODevice::ReadOnly));
  QVERIFY(html.readAll().contains(QString("25 of %1 listed; all of them: <code>clusterscope trace "
                                          "export STORE -o FILE.csv --table kernels</code>")
                                      .arg(kernels)
                                      .toUtf8()));

  QFile f(dir.filePath("set.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"json({"traceEvents":[
    {"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":7,"ts":10,"dur":5}],
    "distributedInfo":{"rank":0}})json");
  f.close();
  const QString set = dir.filePath("set.db");
  QCOMPARE(run_cli({"trace", "import", dir.filePath("set.json"), "-o", set}).exit_code, 0);
  const QJsonObject memset =
      json_of(run_cli({"trace", "stats", set, "--json"}))["memory_ops"].toArray()[0].toObject();
  QCOMPARE(memset["count"].toInteger(), 1);
  QVERIFY(memset["throughput_gbps"].isNull());
  QVERIFY(memset["total_bytes"].isNull());
}

// The CSV tables of calls, copies and ranges have each rank's rows after the
// run's, as the kernels table: a rank stuck in cudaStreamSynchronize shows.
// Each name's instances and time over the ranks are the run's.
void TestTraceCli::perRankTablesAddUpToTheRun() {
  QTemporaryDir dir;
  const QString store = dir.filePath("sampled.db");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz",
                    kData + "kineto/sampled_rank-1.json.gz", "-o", store})
               .exit_code,
           0);
  QCOMPARE(
      run_cli({"trace", "export", store, "-o", dir.filePath("t.csv"), "--table", "all"}).exit_code,
      0);
  for (const char* table : {"api_calls", "memory_ops", "annotations"}) {
    QFile f(dir.filePath(QString("t.%1.csv").arg(table)));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList header = QString(f.readLine()).trimmed().split(',');
    QCOMPARE(header.value(0), QString("rank"));
    const int count = header.indexOf("count"), total = header.indexOf("total_ns");
    std::map<QString, std::pair<qint64, qint64>> run, ranks;  // name -> count, total
    std::set<QString> rank_ids;
    while (!f.atEnd()) {
      const QStringList row = QString(f.readLine()).trimmed().split(',');
      auto& [n, t] = (row[0] == "all" ? run : ranks)[row[1]];
      n += row[count].toLongLong();
      t += row[total].toLongLong();
      if (row[0] != "all") rank_ids.insert(row[0]);
    }
    QVERIFY2(!run.empty(), table);
    QCOMPARE(rank_ids, (std::set<QString>{"0", "1"}));
    QVERIFY2(run == ranks, table);
  }
}

// What newer Nsight Systems exports hold, added to the real 2022 export as
// NVIDIA's SQLite schema reference documents it: the ranks of MPI_RANKS;
// CUDA graphs traced whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, one row per
// launch, were dropped without a word); graphs traced node by node (every
// node carries its launch's correlation id: one launch, not one per node);
// unified-memory copy kinds by the export's ENUM_CUDA_MEMCPY_OPER (all read
// "Memcpy"); device allocations counted as not imported.
void TestTraceCli::newerNsightExports() {
  QTemporaryDir dir;
  const QString sample = kData + "nsys/saxpy-mpi-cuda.sqlite";
  auto variant = [&](const QString& name, const QStringList& statements) {
    const QString path = dir.filePath(name);
    if (!QFile::copy(sample, path)) qFatal("cannot copy the sample");
    QFile(path).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    sqlite3* db = nullptr;
    sqlite3_open(path.toUtf8().constData(), &db);
    for (const QString& sql : statements) {
      char* error = nullptr;
      if (sqlite3_exec(db, sql.toUtf8().constData(), nullptr, nullptr, &error) != SQLITE_OK)
        qFatal("%s: %s", qPrintable(sql), error);
    }
    sqlite3_close(db);
    return path;
  };
  auto imported = [&](const QString& file, const QString& store) {
    const Run r = run_cli({"trace", "import", file, "-o", store});
    if (r.exit_code != 0) qFatal("%s", qPrintable(r.err));
    return r;
  };
  const QString thread = "302119224788637";
  const QString graph_launch = "(SELECT id FROM StringIds WHERE value = 'cudaGraphLaunch_v10000')";
  auto graph_launches = [&](int count, int first_correlation) {
    return QString(
               "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %1) "
               "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME(start, end, eventClass, globalTid, "
               "correlationId, nameId, returnValue) SELECT 1700000000 + i * 10000000, "
               "1700008000 + i * 10000000, 0, %2, %3 + i, %4, 0 FROM n")
        .arg(count - 1)
        .arg(thread)
        .arg(first_correlation)
        .arg(graph_launch);
  };
  const QString add_launch_name =
      "INSERT INTO StringIds VALUES((SELECT max(id) + 1 FROM StringIds), 'cudaGraphLaunch_v10000')";

  // MPI_RANKS names the rank (here 3, where the thread's name said 0).
  const QString ranked =
      variant("ranks.sqlite", {"CREATE TABLE MPI_RANKS(globalTid INTEGER NOT "
                               "NULL, rank INTEGER NOT NULL)",
                               "INSERT INTO MPI_RANKS VALUES(" + thread + ", 3)"});
  imported(ranked, dir.filePath("ranks.db"));
  const QJsonObject info = json_of(run_cli({"trace", "info", dir.filePath("ranks.db"), "--json"}));
  QCOMPARE(info["ranks"].toArray()[0].toObject()["rank"].toInt(), 3);

  // Four graphs traced whole, on stream 7.
  const QString whole = variant(
      "graphs.sqlite",
      {add_launch_name, graph_launches(4, 900000),
       "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE(start INTEGER NOT NULL, end INTEGER NOT "
       "NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, "
       "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT "
       "NULL, graphExecId INTEGER NOT NULL)",
       "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE SELECT start + 20000, start + 9000000, 0, 1, "
       "NULL, 7, correlationId, 302119223558144, 1, 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE "
       "correlationId >= 900000"});
  const Run graphs = imported(whole, dir.filePath("graphs.db"));
  QVERIFY2(graphs.err.contains("4 CUDA graph launches imported as one event each"),
           qPrintable(graphs.err));
  QJsonObject stats = json_of(run_cli({"trace", "stats", dir.filePath("graphs.db"), "--json"}));
  bool found = false;
  for (const QJsonValue& k : stats["kernels"].toArray()) {
    if (k.toObject()["name"].toString() != "CUDA graph 1") continue;
    found = true;
    QCOMPARE(k.toObject()["count"].toInt(), 4);
    QCOMPARE(k.toObject()["total_ns"].toInteger(), 4 * 8980000);
  }
  QVERIFY(found);
  QCOMPARE(stats["ranks"].toArray()[0].toObject()["launches"].toObject()["launches"].toInt(),
           5 + 4);

  // Two graphs replayed node by node, five kernels each.
  QStringList nodes = {add_launch_name, graph_launches(2, 800000),
                       "CREATE TEMP TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1"};
  for (int g = 0; g < 2; ++g) {
    for (int n = 0; n < 5; ++n) {
      const qint64 start = 1700020000LL + g * 10000000LL + n * 100000LL;
      nodes << QString("UPDATE k SET start = %1, end = %2, correlationId = %3, gridId = %4")
                   .arg(start)
                   .arg(start + 90000)
                   .arg(800000 + g)
                   .arg(50000 + g * 10 + n)
            << "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k";
    }
  }
  imported(variant("nodes.sqlite", nodes), dir.filePath("nodes.db"));
  stats = json_of(run_cli({"trace", "stats", dir.filePath("nodes.db"), "--json"}));
  const QJsonObject launches = stats["ranks"].toArray()[0].toObject()["launches"].toObject();
  QCOMPARE(launches["launches"].toInt(), 5 + 2);
  QCOMPARE(launches["delay_outliers"].toInt(), 0);

  // Unified-memory copies by the export's labels, or by their number.
  imported(variant("uvm.sqlite",
                   {"CREATE TABLE ENUM_CUDA_MEMCPY_OPER(id INTEGER PRIMARY KEY, name TEXT, label "
                    "TEXT)",
                    "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(11, 'CUDA_MEMCPY_KIND_UVM_HTOD', "
                    "'Unified Host-to-Device')",
                    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 11 WHERE copyKind = 1",
                    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 12 WHERE copyKind = 2",
                    "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES(800000000, 302119223558144, "
                    "0, 1, 4096, 0, 268435456, 2, 0, NULL, NULL)"}),
           dir.filePath("uvm.db"));
  std::map<QString, qint64> copies;
  for (const QJsonValue& m :
       json_of(run_cli({"trace", "stats", dir.filePath("uvm.db"), "--json"}))["memory_ops"]
           .toArray())
    copies[m.toObject()["name"].toString()] = m.toObject()["count"].toInteger();
  QCOMPARE(copies, (std::map<QString, qint64>{{"Memcpy Unified Host-to-Device", 10},
                                              {"Memcpy (kind 12)", 5}}));
  // A range read from an .nvtxt file (eventType 70) is a range, as nvtx_sum
  // counts it; one never closed is said so.
  const Run nvtxt = imported(
      variant("nvtxt.sqlite",
              {"INSERT INTO NVTX_EVENTS(start, end, eventType, text, globalTid) SELECT start, end, "
               "70, 'nvtxt range', globalTid FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1",
               "INSERT INTO NVTX_EVENTS(start, end, eventType, text, globalTid) SELECT start, "
               "NULL, 59, 'open range', globalTid FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1"}),
      dir.filePath("nvtxt.db"));
  QVERIFY2(nvtxt.out.contains("not imported: 1 NVTX ranges never closed (no end)"),
           qPrintable(nvtxt.out));
  std::map<QString, qint64> ranges;
  for (const QJsonValue& r : json_of(run_cli(
           {"trace", "stats", dir.filePath("nvtxt.db"), "--json", "--top", "100"}))["annotations"]
                                 .toArray())
    ranges[r.toObject()["name"].toString()] = r.toObject()["count"].toInteger();
  QCOMPARE(ranges["nvtxt range"], 1);
  QVERIFY(!ranges.count("open range"));
  const Run uvm =
      run_cli({"trace", "import", dir.filePath("uvm.sqlite"), "-o", dir.filePath("u2.db")});
  QVERIFY2(uvm.out.contains("not imported: 1 CUDA_GPU_MEMORY_USAGE_EVENTS rows"),
           qPrintable(uvm.out));
}

// PyTorch's memory profile (profile_memory=True): its "[memory]" instant
// events, dropped as "instant events", are each device's allocated bytes
// over time, the counter the CUPTI tracer records as memory in use.
void TestTraceCli::pytorchMemoryProfile() {
  QTemporaryDir dir;
  QFile f(dir.filePath("memory.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"json({"traceEvents":[
    {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5},
    {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":0,"tid":1,"ts":12,
     "args":{"Total Reserved":4096,"Total Allocated":1024,"Bytes":1024,"Addr":1,"Device Id":0,"Device Type":1}},
    {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":0,"tid":1,"ts":14,
     "args":{"Total Reserved":4096,"Total Allocated":0,"Bytes":-1024,"Addr":1,"Device Id":0,"Device Type":1}},
    {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":0,"tid":1,"ts":13,
     "args":{"Total Allocated":64,"Bytes":64,"Addr":2,"Device Id":-1,"Device Type":0}}],
    "distributedInfo":{"rank":0}})json");
  f.close();
  const QString store = dir.filePath("memory.db");
  const Run imported = run_cli({"trace", "import", dir.filePath("memory.json"), "-o", store});
  QVERIFY2(imported.exit_code == 0, qPrintable(imported.err));
  QVERIFY2(!imported.out.contains("instant events"), qPrintable(imported.out));
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(store.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
           SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  QCOMPARE(sqlite3_prepare_v2(db,
                              "SELECT s.value, c.time_ns, c.value FROM counters c JOIN strings s "
                              "ON s.id = c.name ORDER BY s.value, c.time_ns",
                              -1, &stmt, nullptr),
           SQLITE_OK);
  QStringList samples;
  while (sqlite3_step(stmt) == SQLITE_ROW)
    samples << QString("%1 %2 %3")
                   .arg(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)))
                   .arg(sqlite3_column_int64(stmt, 1))
                   .arg(sqlite3_column_double(stmt, 2));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  // The caching allocator's reserve (torch.cuda.memory_reserved) where the
  // event gives it: the CPU's does not.
  QCOMPARE(samples,
           (QStringList{
               "CPU memory allocated (bytes) 13000 64", "GPU 0 memory allocated (bytes) 12000 1024",
               "GPU 0 memory allocated (bytes) 14000 0", "GPU 0 memory reserved (bytes) 12000 4096",
               "GPU 0 memory reserved (bytes) 14000 4096"}));

  // trace stats gives each counter's peak, as max_memory_allocated would:
  // 1 KiB at 2 us from the first event (the kernel at 10 us), 0 at the end.
  const Run stats = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonArray counters = QJsonDocument::fromJson(stats.out.toUtf8())["counters"].toArray();
  QCOMPARE(counters.size(), 3);
  QJsonObject gpu, cpu, reserved;
  for (const QJsonValue& v : counters) {
    const QString name = v.toObject()["name"].toString();
    (name.contains("reserved") ? reserved : name.startsWith("GPU") ? gpu : cpu) = v.toObject();
  }
  QCOMPARE(reserved["name"].toString(), QString("GPU 0 memory reserved (bytes)"));
  QCOMPARE(reserved["largest"].toDouble(), 4096.0);
  QCOMPARE(reserved["unit"].toString(), QString("bytes"));
  QCOMPARE(gpu["name"].toString(), QString("GPU 0 memory allocated (bytes)"));
  QCOMPARE(gpu["samples"].toInt(), 2);
  QCOMPARE(gpu["largest"].toDouble(), 1024.0);
  QCOMPARE(gpu["largest_at_ns"].toInteger(), 2000);
  QCOMPARE(gpu["least"].toDouble(), 0.0);
  QCOMPARE(gpu["last"].toDouble(), 0.0);
  QCOMPARE(gpu["unit"].toString(), QString("bytes"));
  QCOMPARE(cpu["largest"].toDouble(), 64.0);
  const Run text = run_cli({"trace", "stats", store});
  QVERIFY2(text.out.contains("Sampled counters") && text.out.contains("1.00 KiB"),
           qPrintable(text.out));
}

// The counters of ops (time off CPU, the cost of timing an op) are parts of
// the ops, not lines of their own: a store of those alone (a calibration's
// sweeps) printed the counters' title and header over no row.
void TestTraceCli::opCountersAloneMakeNoCountersTable() {
  namespace tr = cs::trace;
  QTemporaryDir dir;
  const QString store = dir.filePath("ops.db");
  {
    auto created = tr::TraceWriter::create(store.toStdString(), tr::RunInfo{"ops", "test"});
    QVERIFY2(created, created ? "" : created.message().c_str());
    tr::TraceWriter& w = **created;
    w.add_rank({0, "box", "CPU", 1, 0, false});
    const tr::LaneId lane = w.add_lane(0, tr::LaneKind::cpu_thread, "compute");
    tr::Event e;
    e.lane = lane;
    e.kind = tr::EventKind::kernel;
    e.category = tr::Category::compute;
    e.start_ns = 1000;
    e.end_ns = 5000;
    e.name = w.intern("gemm");
    w.add(e);
    w.add(tr::CounterSample{0, w.intern(tr::kOpTimingCostCounter), 500, 1300});
    w.add(tr::CounterSample{0, w.intern(tr::kOffCpuCounter), 5000, 200});
    QVERIFY(w.close().ok());
  }
  const Run text = run_cli({"trace", "stats", store});
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  QVERIFY2(!text.out.contains("Sampled counters"), qPrintable(text.out));
  QVERIFY2(text.out.contains("gemm"), qPrintable(text.out));
  // Still in the JSON, as every counter is.
  const Run json = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(json.exit_code == 0, qPrintable(json.err));
  QCOMPARE(QJsonDocument::fromJson(json.out.toUtf8())["counters"].toArray().size(), 2);
}

// The operations with FLOPs in trace stats (text and JSON) and in the
// report, saying the same: the H200's bf16 run, each GEMM range timed by
// its kernels (against SQL over the store: each kernel's call start inside
// the range), its rate against the H200's 989.4 TFLOP/s; the CPU-engine run
// by each op's own duration, no peak; a PyTorch profile with one aten::mm
// that launched no kernel, left out and said; a run with no FLOPs at all,
// one line instead of the table.
void TestTraceCli::gemmRatesInStatsAndReport() {
  QTemporaryDir dir;
  const QString gpu = writable_store(dir, "gpu/worker-bf16.db", "bf16.db");
  QVERIFY(!gpu.isEmpty());
  const Run json = run_cli({"trace", "stats", gpu, "--json", "--top", "100"});
  QVERIFY2(json.exit_code == 0, qPrintable(json.err));
  const QJsonObject gemms = json_of(json)["gemms"].toObject();
  const QJsonArray rows = gemms["rows"].toArray();
  QCOMPARE(rows.size(), 17);
  QCOMPARE(json_of(json)["totals"].toObject()["gemms"].toInt(), 17);
  QCOMPARE(gemms["without_kernels"].toInt(), 0);
  QVERIFY(
      gemms["caption"].toString().startsWith("time: the GPU time of the kernels each launched"));
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(gpu.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
           SQLITE_OK);
  std::map<QString, std::pair<qint64, qint64>> by_sql;  // name: (ranges, kernel ns)
  sqlite3_stmt* stmt = nullptr;
  QCOMPARE(sqlite3_prepare_v2(
               db,
               "WITH launch AS (SELECT correlation c, min(start_ns) t FROM events WHERE kind = 7 "
               "AND correlation > 0 GROUP BY correlation), "
               "k AS (SELECT e.correlation c, e.end_ns - e.start_ns d FROM events e JOIN lanes l "
               "ON l.id = e.lane JOIN strings s ON s.id = e.name WHERE l.kind = 0 AND e.kind = 0 "
               "AND e.category = 0 AND e.correlation > 0 AND s.value NOT LIKE '%cs::worker::%'), "
               "o AS (SELECT e.id, s.value name, e.start_ns a, e.end_ns b FROM events e JOIN "
               "event_details d ON d.event_id = e.id JOIN strings s ON s.id = e.name WHERE "
               "d.flops > 0) "
               "SELECT o.name, count(DISTINCT o.id), sum(k.d) FROM o JOIN launch ON launch.t >= "
               "o.a AND launch.t < o.b JOIN k ON k.c = launch.c GROUP BY o.name",
               -1, &stmt, nullptr),
           SQLITE_OK);
  while (sqlite3_step(stmt) == SQLITE_ROW)
    by_sql[QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)))] = {
        sqlite3_column_int64(stmt, 1), sqlite3_column_int64(stmt, 2)};
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  QCOMPARE(by_sql.size(), std::size_t{17});
  QString mlp_fc_percent;
  for (const QJsonValue& v : rows) {
    const QJsonObject row = v.toObject();
    const QString name = row["name"].toString();
    QVERIFY2(by_sql.count(name), qPrintable(name));
    QCOMPARE(row["count"].toInteger(), by_sql[name].first);
    QCOMPARE(row["time_ns"].toInteger(), by_sql[name].second);
    QCOMPARE(row["precision"].toString(), QString("bf16"));
    QCOMPARE(row["gpu"].toString(), QString("h200"));
    QCOMPARE(row["time"].toString(), QString("gpu_kernels"));
    const double rate = row["flops"].toDouble() / (row["time_ns"].toDouble() * 1e-9);
    QVERIFY(qAbs(row["flops_per_second"].toDouble() / rate - 1) < 1e-12);
    QCOMPARE(row["peak_flops_per_second"].toDouble(), 989.4e12);
    QVERIFY(qAbs(row["percent_of_peak"].toDouble() - 100 * rate / 989.4e12) < 1e-9);
    if (name == "gemm mlp.fc") mlp_fc_percent = QString::number(100 * rate / 989.4e12, 'f', 1);
  }
  QCOMPARE(mlp_fc_percent, QString("71.9"));
  // The text, and the report, say the same.
  const Run text = run_cli({"trace", "stats", gpu});
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  QVERIFY(text.out.contains("Operations with FLOPs (all ranks, all steps)\n  time: the GPU time"));
  const QRegularExpression mlp_fc(
      "\ngemm mlp\\.fc +bf16 +144 +5566 +7\\.820 +712 TFLOP/s +5\\.6% +71\\.9%\n");
  QVERIFY2(mlp_fc.match(text.out).hasMatch(), qPrintable(text.out));
  QVERIFY(text.out.contains("  peak: of the GPU preset h200 (its dense datasheet figure)\n"));
  // A window's: the operations in it, and the title says so (one step: 12 layers).
  const Run step = run_cli({"trace", "stats", gpu, "--steps", "5"});
  QVERIFY(step.out.contains("Operations with FLOPs (all ranks; those in the window)\n"));
  QVERIFY2(QRegularExpression("\ngemm mlp\\.fc +bf16 +12 +463\\.9 ").match(step.out).hasMatch(),
           qPrintable(step.out));
  const QString report = dir.filePath("bf16.html");
  QCOMPARE(run_cli({"trace", "export", gpu, "-o", report}).exit_code, 0);
  QFile html(report);
  QVERIFY(html.open(QIODevice::ReadOnly));
  const QString page = QString::fromUtf8(html.readAll());
  QVERIFY(page.contains("<h2>Operations with FLOPs (all ranks, all steps)</h2>\n<p class=note>" +
                        gemms["caption"].toString() + "</p>"));
  QVERIFY(
      page.contains("<tr><td><code>gemm mlp.fc</code></td><td>bf16</td><td class=n>144</td>"
                    "<td class=n>5566</td><td class=n>7.820</td><td class=n>712 TFLOP/s</td>"
                    "<td class=n>5.6%</td><td class=n>71.9%</td></tr>"));

  // The CPU engine: each op's own duration, the peak column empty.
  const QString cpu = writable_store(dir, "cpu/cpu-engine-dp2.db", "cpu.db");
  QVERIFY(!cpu.isEmpty());
  const QJsonObject cpu_gemms =
      json_of(run_cli({"trace", "stats", cpu, "--json"}))["gemms"].toObject();
  const QJsonObject first = cpu_gemms["rows"].toArray().first().toObject();
  QCOMPARE(first["name"].toString(), QString("mlp.fc wgrad"));
  QCOMPARE(first["time"].toString(), QString("own_duration"));
  QCOMPARE(first["time_ns"].toInteger(), qint64{34407232});
  QVERIFY(first["percent_of_peak"].isNull());
  QVERIFY(first["gpu"].isNull());
  const Run cpu_text = run_cli({"trace", "stats", cpu});
  QVERIFY(cpu_text.out.contains("  time: each operation's own duration (no GPU);"));
  QVERIFY2(
      QRegularExpression("\nmlp\\.fc wgrad +fp32 +20 +1\\.007 +34\\.407 +29\\.3 GFLOP/s +21\\.2%\n")
          .match(cpu_text.out)
          .hasMatch(),
      qPrintable(cpu_text.out));

  // A PyTorch profile: seven aten::mm without a GEMM kernel recorded, left
  // out and said; its fp32 matmuls that launched CUTLASS's TF32 GEMMs rated
  // as tf32.
  const QString kineto = dir.filePath("sampled.db");
  QCOMPARE(
      run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz", "-o", kineto}).exit_code,
      0);
  const Run k = run_cli({"trace", "stats", kineto});
  QVERIFY2(k.out.contains("\naten::mm     tf32    185   1134  ") &&
               k.out.contains("\naten::mm     fp32     39  53.19  "),
           qPrintable(k.out));
  QVERIFY(
      k.out.contains("  308 fp32 operations ran on TF32 tensor cores (their GEMM kernels' "
                     "names say so, as where PyTorch allows TF32): rated as tf32\n"));
  QVERIFY(k.out.contains(
      "  7 operations with FLOPs on a GPU rank launched no recorded kernel (or only cuBLAS's "
      "split-K reduction, its GEMM's lost): no GPU time, left out\n"));
  QCOMPARE(json_of(run_cli({"trace", "stats", kineto, "--json"}))["gemms"]
               .toObject()["without_kernels"]
               .toInt(),
           7);

  // No FLOPs at all: one line, no table, in the text, the JSON and the report.
  const QString ddp = writable_store(dir, "gpu/torch-ddp.db", "ddp.db");
  QVERIFY(!ddp.isEmpty());
  const QString absent =
      "No operation carries FLOPs (the engines' GEMMs, a PyTorch profile's matrix multiplies "
      "recorded with record_shapes): no FLOP/s to show.";
  const Run none = run_cli({"trace", "stats", ddp});
  QVERIFY2(none.exit_code == 0, qPrintable(none.err));
  QVERIFY(none.out.contains("\n" + absent + "\n"));
  QVERIFY(!none.out.contains("Operations with FLOPs"));
  const QJsonObject none_json =
      json_of(run_cli({"trace", "stats", ddp, "--json"}))["gemms"].toObject();
  QVERIFY(none_json["rows"].toArray().isEmpty());
  QCOMPARE(none_json["note"].toString(), absent);
  const QString none_report = dir.filePath("ddp.html");
  QCOMPARE(run_cli({"trace", "export", ddp, "-o", none_report}).exit_code, 0);
  QFile none_html(none_report);
  QVERIFY(none_html.open(QIODevice::ReadOnly));
  const QString none_page = QString::fromUtf8(none_html.readAll());
  QVERIFY(none_page.contains("<p>" + absent + "</p>"));
  QVERIFY(!none_page.contains("Operations with FLOPs"));
}

// The report's note over its counters names the counters the store holds:
// it gave "GPU memory in use" as the example on a CPU engine run too, whose
// one counter is the process's memory.
void TestTraceCli::reportNoteNamesTheStoresCounters_data() {
  QTest::addColumn<QString>("fixture");
  QTest::addColumn<QString>("names");
  QTest::addColumn<bool>("gpu");
  QTest::addRow("CPU engine") << "cpu/cpu-engine-dp2.db"
                              << "(here: memory in use (bytes))" << false;
  QTest::addRow("CUDA engine") << "gpu/worker-bf16.db"
                               << "(here: GPU 0 memory used, memory in use (bytes), memory in "
                                  "use: weights (bytes) and 4 more)"
                               << true;
}

void TestTraceCli::reportNoteNamesTheStoresCounters() {
  QFETCH(QString, fixture);
  QFETCH(QString, names);
  QFETCH(bool, gpu);
  QTemporaryDir dir;
  const QString store = writable_store(dir, fixture, "run.db");
  QVERIFY(!store.isEmpty());
  const QString report = dir.filePath("run.html");
  const Run exported = run_cli({"trace", "export", store, "--format", "html", "--out", report});
  QVERIFY2(exported.exit_code == 0, qPrintable(exported.err));
  QFile html(report);
  QVERIFY(html.open(QIODevice::ReadOnly));
  const QString page = QString::fromUtf8(html.readAll());
  const qsizetype at = page.indexOf("<h2>Sampled counters</h2>");
  QVERIFY(at >= 0);
  const QString note = page.mid(at, page.indexOf("</p>", at) - at);
  QVERIFY2(note.contains("Each rank's counters " + names), qPrintable(note));
  QCOMPARE(note.contains("GPU"), gpu);
}

// The report's breakdown counts the device events that start in each
// rank's span (Breakdown::events), and heads the column so: "events" over
// a range of a run read as every event that ran in it, and a rank inside
// one long collective had none.
void TestTraceCli::reportCountsEventsStartingInTheRange() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, "cpu/cpu-engine-dp2.db", "run.db");
  QVERIFY(!store.isEmpty());
  const QString report = dir.filePath("range.html");
  const Run exported = run_cli({"trace", "export", store, "--format", "html", "--out", report,
                                "--from", "100ms", "--to", "200ms"});
  QVERIFY2(exported.exit_code == 0, qPrintable(exported.err));
  QFile html(report);
  QVERIFY(html.open(QIODevice::ReadOnly));
  const QString page = QString::fromUtf8(html.readAll());
  QVERIFY2(page.contains("<th>idle other</th><th>events starting</th>"),
           qPrintable(page.left(4000)));
  QVERIFY(page.contains("one that began before and runs through it counts in the time, not here"));
}

// The counters' table on the CUDA engine's committed run, against SQL over
// its counters table; a window of steps holds the samples the engine took
// as each of its steps ended; the report lists them.
void TestTraceCli::countersAsTheStoreHoldsThem() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, "gpu/worker-bf16.db", "bf16.db");
  QVERIFY(!store.isEmpty());
  const Run stats = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonObject doc = QJsonDocument::fromJson(stats.out.toUtf8()).object();
  const QJsonArray counters = doc["counters"].toArray();
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(store.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
           SQLITE_OK);
  auto sql = [&](const QString& query) {
    sqlite3_stmt* stmt = nullptr;
    double v = -1;
    if (sqlite3_prepare_v2(db, query.toUtf8().constData(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
      v = sqlite3_column_double(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
  };
  QCOMPARE(double(doc["totals"].toObject()["counters"].toInt()),
           sql("SELECT COUNT(*) FROM (SELECT DISTINCT rank, name FROM counters)"));
  double device_peak = 0;
  for (const QJsonValue& v : counters) {
    const QJsonObject c = v.toObject();
    if (c["name"].toString() == "GPU 0 memory used") device_peak = c["largest"].toDouble();
    const QString where =
        QString(
            "FROM counters WHERE rank = %1 AND name = (SELECT id FROM strings WHERE value = "
            "'%2')")
            .arg(c["rank"].toInt())
            .arg(c["name"].toString());
    QCOMPARE(c["samples"].toDouble(), sql("SELECT COUNT(*) " + where));
    QCOMPARE(c["largest"].toDouble(), sql("SELECT MAX(value) " + where));
    QCOMPARE(c["least"].toDouble(), sql("SELECT MIN(value) " + where));
    QCOMPARE(c["last"].toDouble(), sql("SELECT value " + where + " ORDER BY time_ns DESC LIMIT 1"));
  }
  QCOMPARE(device_peak, 9834397696.0);  // 9.16 GiB
  // Step 5: the engine's "memory in use" sampled as it ended.
  const Run step = run_cli({"trace", "stats", store, "--steps", "5", "--json"});
  QVERIFY2(step.exit_code == 0, qPrintable(step.err));
  const QJsonArray in_step = QJsonDocument::fromJson(step.out.toUtf8())["counters"].toArray();
  bool engine = false;
  for (const QJsonValue& v : in_step) {
    if (v.toObject()["name"].toString() != "memory in use (bytes)") continue;
    engine = true;
    QCOMPARE(v.toObject()["samples"].toInt(), 1);
  }
  QVERIFY2(engine, qPrintable(step.out.left(2000)));
  sqlite3_close(db);
  const QString report = dir.filePath("bf16.html");
  QCOMPARE(run_cli({"trace", "export", store, "--format", "html", "--out", report}).exit_code, 0);
  QFile html(report);
  QVERIFY(html.open(QIODevice::ReadOnly));
  const QByteArray page = html.readAll();
  QVERIFY(page.contains("<h2>Sampled counters</h2>") && page.contains("9.16 GiB"));
}

// A newer PyTorch profile's synchronizations (cat cuda_sync, on the GPU's
// row: pid the device, tid the stream, 1 for the whole context) are
// synchronization on that GPU's lanes; they were CPU operations, said in a
// warning, on a CPU thread "1" the file does not have. A Chrome export
// writes them back as cuda_sync.
void TestTraceCli::pytorchStreamSyncs() {
  QTemporaryDir dir;
  QFile f(dir.filePath("sync.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"json({"traceEvents":[
    {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5},
    {"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":16,"dur":3,"args":{"stream":7,"device":0}},
    {"ph":"X","cat":"cuda_sync","name":"Context Sync","pid":0,"tid":1,"ts":20,"dur":2,"args":{"stream":-1,"device":0}},
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":4242,"tid":4242,"ts":5,"dur":20}],
    "distributedInfo":{"rank":0}})json");
  f.close();
  const QString store = dir.filePath("sync.db");
  const Run imported = run_cli({"trace", "import", dir.filePath("sync.json"), "-o", store});
  QVERIFY2(imported.exit_code == 0, qPrintable(imported.err));
  QVERIFY2(!imported.err.contains("cuda_sync"), qPrintable(imported.err));
  QCOMPARE(run_cli({"trace", "export", store, "-o", dir.filePath("e.csv")}).exit_code, 0);
  QFile csv(dir.filePath("e.csv"));
  QVERIFY(csv.open(QIODevice::ReadOnly));
  const QString events = csv.readAll();
  QVERIFY2(events.contains(",GPU 0 stream 7,gpu_stream,sync,synchronization,Stream Sync,") &&
               events.contains(",GPU 0 stream 1,gpu_stream,sync,synchronization,Context Sync,"),
           qPrintable(events));
  QCOMPARE(run_cli({"trace", "export", store, "-o", dir.filePath("c.json")}).exit_code, 0);
  QFile chrome(dir.filePath("c.json"));
  QVERIFY(chrome.open(QIODevice::ReadOnly));
  QVERIFY(chrome.readAll().contains(R"("cat":"cuda_sync","name":"Stream Sync")"));
}

// A run predicted again on a cluster named that cannot hold its ranks is
// refused, in words that say what would do ("1 devices" named nothing to
// change).
void TestTraceCli::predictedAgainOnAClusterTooSmall() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, "cpu/cpu-engine-dp2.db", "dp2.db");
  QVERIFY(!store.isEmpty());
  const Run r = run_cli({"trace", "stats", store, "--predict-again", "--cluster", "h200-1"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("cluster h200-1 has 1 device, the run 2 ranks: predict it on a cluster "
                          "of 2 devices or more"),
           qPrintable(r.err));
  QVERIFY(r.out.isEmpty());
}

// `trace stats --plan`: a run that records no prediction (the GPU check's
// worker run, a profiled program of the user's own) held against the
// planner's prediction of the plan the user names: the step the planner gives
// for that plan, compared part by part.
void TestTraceCli::runHeldAgainstAPlanOfTheUsers() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, "gpu/worker-bf16.db", "bf16.db");
  QVERIFY(!store.isEmpty());
  const QString plan = dir.filePath("gpt2-h200.json");
  QFile f(plan);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({
    "cluster": {"name": "one-h200", "nodes": 1, "gpus_per_node": 1, "gpu": "h200"},
    "workload": {"name": "gpt2-small-bytes", "layers": 12, "hidden": 768, "heads": 12,
                 "seq_len": 1024, "vocab": 256, "training_tokens": 1e9},
    "parallel": {"dp": 1, "micro_batch": 8, "global_batch": 8},
    "precision": {"compute": "bf16"}})");
  f.close();
  const QJsonObject planned = json_of(run_cli({"plan", "--plan", plan, "--json"}));
  const double step = planned["time"].toObject()["step_seconds"].toDouble();
  QVERIFY2(step > 0, qPrintable(QJsonDocument(planned).toJson()));

  const Run text = run_cli({"trace", "stats", store, "--plan", plan});
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  QVERIFY2(
      text.out.contains("Predicted from the plan in " + plan + " (gpt2-small-bytes on one-h200)\n"),
      qPrintable(text.out));
  QVERIFY(text.out.contains("Each part of the step, predicted against measured"));
  const QJsonObject prediction =
      json_of(run_cli({"trace", "stats", store, "--plan", plan, "--json"}))["prediction"]
          .toObject();
  QVERIFY(close_to(prediction["predicted_step_s"].toDouble(), step));
  QVERIFY(prediction["measured_step_s"].toDouble() > 0);
  QVERIFY(!prediction["breakdown"].toArray().isEmpty());
  QCOMPARE(prediction["predicted_now"].toObject()["plan_file"].toString(), plan);
  QVERIFY(prediction["predicted_now"].toObject()["notes"].toArray().isEmpty());

  // A plan of another GPU count than the run's ranks: said.
  const QString two = dir.filePath("two.json");
  QFile f2(two);
  QVERIFY(f2.open(QIODevice::WriteOnly));
  f2.write(R"({"cluster": {"name": "two-h200", "nodes": 1, "gpus_per_node": 2, "gpu": "h200",
                           "intra_node": "nvlink4"},
               "workload": "gpt2-small", "parallel": {"dp": 2, "micro_batch": 8}})");
  f2.close();
  const QString mismatch = "the plan runs on 2 GPUs (dp x tp x pp), the run has 1 rank";
  const Run sized = run_cli({"trace", "stats", store, "--plan", two});
  QVERIFY2(sized.exit_code == 0 && sized.out.contains("  " + mismatch), qPrintable(sized.out));

  // A calibration store ran sweeps, not a plan's steps: refused, as
  // --predict-again refuses it (its sweeps were held against the plan as one
  // step, the plan's step 99 % short of them).
  const QString calibration = writable_store(dir, "gpu/worker-bf16.db", "calibration.db");
  QVERIFY(!calibration.isEmpty());
  QVERIFY(set_meta(calibration, "calibration",
                   R"({"engine": "cuda", "host": "vm", "device": "NVIDIA H200", "phases": [)"
                   R"({"first_rank": 0, "precision": "bf16", "ranks": 1, "threads": 0}]})"));
  const Run sweeps = run_cli({"trace", "stats", calibration, "--plan", plan});
  QVERIFY2(sweeps.exit_code == 1 &&
               sweeps.err.contains(calibration +
                                   ": a calibration store (the sweeps of its configurations), "
                                   "not a run of a plan: no plan can be held against it"),
           qPrintable(sweeps.err));
  QVERIFY(sweeps.out.isEmpty());

  // One prediction at a time, of whole steps; a plan that cannot be read is named.
  const Run both = run_cli({"trace", "stats", store, "--plan", plan, "--predict-again"});
  QVERIFY2(both.exit_code == 2 &&
               both.err.contains("--plan and --predict-again each give the prediction"),
           qPrintable(both.err));
  const Run window = run_cli({"trace", "stats", store, "--plan", plan, "--steps", "3"});
  QVERIFY2(window.exit_code == 1 && window.err.contains("--plan holds every step past the "
                                                        "warm-up against the plan, not a window: "
                                                        "leave out --steps"),
           qPrintable(window.err));
  const Run missing = run_cli({"trace", "stats", store, "--plan", dir.filePath("none.json")});
  QVERIFY2(missing.exit_code != 0 && missing.err.contains("none.json"), qPrintable(missing.err));
  QFile bad(dir.filePath("bad.json"));
  QVERIFY(bad.open(QIODevice::WriteOnly));
  bad.write(R"({"cluster": "dgx-h100-8", "workload": "gpt2-small", "parallel": {"tp": 5}})");
  bad.close();
  const Run impossible = run_cli({"trace", "stats", store, "--plan", bad.fileName()});
  QVERIFY2(impossible.exit_code == 1 &&
               impossible.err.contains("the planner cannot estimate " + bad.fileName() +
                                       ": /parallel/tp: must divide the 12 attention heads"),
           qPrintable(impossible.err));
  QVERIFY(impossible.out.isEmpty());

  // trace import --plan keeps the prediction in the store it writes, which
  // trace stats then holds the trace against without being told.
  const QString imported = dir.filePath("saxpy.cstrace");
  const Run with_plan = run_cli(
      {"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o", imported, "--plan", plan});
  QVERIFY2(with_plan.exit_code == 0, qPrintable(with_plan.err));
  QVERIFY2(!with_plan.err.contains("the plan runs on"), qPrintable(with_plan.err));
  const QJsonObject held =
      json_of(run_cli({"trace", "stats", imported, "--json"}))["prediction"].toObject();
  QVERIFY2(close_to(held["predicted_step_s"].toDouble(), step),
           qPrintable(QString::number(held["predicted_step_s"].toDouble())));
  const Run imported_two = run_cli({"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o",
                                    dir.filePath("saxpy-two.cstrace"), "--plan", two});
  QVERIFY2(imported_two.exit_code == 0 && imported_two.err.contains(mismatch),
           qPrintable(imported_two.err));
  const QString refused_store = dir.filePath("refused.cstrace");
  const Run refused = run_cli({"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o",
                               refused_store, "--plan", bad.fileName()});
  QVERIFY2(refused.exit_code == 1 && refused.err.contains("bad.json"), qPrintable(refused.err));
  QVERIFY(!QFile::exists(refused_store));
}

// HTA's launch statistics count kernel launches. The Nsight export's 15
// copies are synchronous cudaMemcpy calls, each lasting its whole copy: they
// were counted as launches too (20, a median delay of -18468 us, 75% of
// calls "over 50 us"). Now the 5 saxpy kernels, and the copies are named
// apart, in the text, the JSON and the report.
void TestTraceCli::launchStatisticsAreKernelLaunches() {
  QTemporaryDir dir;
  const QString store = dir.filePath("saxpy.cstrace");
  QCOMPARE(
      run_cli({"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o", store}).exit_code, 0);
  const Run stats = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonObject launches =
      json_of(stats)["ranks"].toArray()[0].toObject()["launches"].toObject();
  QCOMPARE(launches["launches"].toInt(), 5);
  QCOMPARE(launches["synchronous_copies_left_out"].toInt(), 15);
  QCOMPARE(launches["call_median_ns"].toDouble(), 31361.0);
  QCOMPARE(launches["delay_median_ns"].toDouble(), 1393.0);
  QCOMPARE(launches["runtime_outliers"].toInt(), 0);

  const Run text = run_cli({"trace", "stats", store});
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  QVERIFY2(text.out.contains("Kernel launches (each kernel, and each asynchronous copy or memset, "
                             "with the call that launched it)"),
           qPrintable(text.out));
  QVERIFY2(text.out.contains("15 synchronous copies and memsets (cudaMemcpy, cudaMemset) are left "
                             "out: the call lasts until the copy ends, so it is no launch"),
           qPrintable(text.out));
  QVERIFY2(!text.out.contains("-18468"), qPrintable(text.out));

  const Run html = run_cli({"trace", "export", store, "-o", dir.filePath("r.html")});
  QCOMPARE(html.exit_code, 0);
  QFile h(dir.filePath("r.html"));
  QVERIFY(h.open(QIODevice::ReadOnly));
  const QByteArray report = h.readAll();
  QVERIFY(report.contains("Each kernel, and each asynchronous copy or memset"));
  QVERIFY(
      report.contains("15 synchronous copies and memsets (cudaMemcpy, cudaMemset) are left "
                      "out"));
  QVERIFY(report.contains("<tr><td class=n>0</td><td class=n>5</td><td class=n>31.4</td>"));
  // The API calls as Nsight sums them: 15 cudaMemcpy calls, 374.337 ms.
  QVERIFY2(report.contains("<h2>CUDA API calls</h2>") &&
               report.contains("<tr><td><code>cudaMemcpy</code></td><td class=n>15</td><td "
                               "class=n>374.337</td>"),
           report.constData());
}

// Two real ranks of one job, imported as two runs and compared: the figures
// are the Python reference's (tests/core/kineto_reference.py), per step.
// `trace critical-path`: the path's parts add up to the step, by rank too,
// and --segments lists each step's path end to end.
void TestTraceCli::criticalPathOfARun() {
  QTemporaryDir dir;
  const QString store = dir.filePath("dp2.db");
  QVERIFY(QFile::copy(CS_DATA_DIR "/cpu/cpu-engine-dp2.db", store));
  QFile(store).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  const Run run = run_cli({"trace", "critical-path", store, "--json", "--segments"});
  QVERIFY2(run.exit_code == 0, qPrintable(run.err));
  const QJsonObject j = json_of(run);
  QCOMPARE(j["steps"].toInt(), 4);
  QCOMPARE(j["warm_up_steps"].toInt(), 1);
  const double step = j["step_ns"].toDouble();
  QVERIFY(step > 0);
  double parts = 0, ranks = 0;
  for (const QJsonValue& v : j["parts_per_step_ns"].toObject())
    parts += v.toDouble();
  for (const QJsonValue& v : j["ranks"].toArray())
    ranks += v.toObject()["per_step_ns"].toDouble();
  QVERIFY(std::abs(parts - step) < 1 && std::abs(ranks - step) < 1);
  const QJsonArray paths = j["paths"].toArray();
  QCOMPARE(paths.size(), 5);
  for (const QJsonValue& p : paths) {
    qint64 t = p.toObject()["start_ns"].toInteger();
    for (const QJsonValue& seg : p.toObject()["segments"].toArray()) {
      QCOMPARE(seg.toObject()["start_ns"].toInteger(), t);
      t += seg.toObject()["duration_ns"].toInteger();
    }
    QCOMPARE(t, p.toObject()["start_ns"].toInteger() + p.toObject()["duration_ns"].toInteger());
  }
  const Run text = run_cli({"trace", "critical-path", store, "--steps", "2-3"});
  QVERIFY2(text.exit_code == 0 && text.out.contains("Mean of 2 steps; the mean step") &&
               text.out.contains("dp all-reduce"),
           qPrintable(text.out + text.err));
  const Run past = run_cli({"trace", "critical-path", store, "--steps", "9"});
  QVERIFY2(past.exit_code == 1 && past.err.contains("--steps 9: the run records steps 0 to 4"),
           qPrintable(past.err));
}

void TestTraceCli::compareTwoRuns() {
  QTemporaryDir dir;
  const QString a = dir.filePath("a.db"), b = dir.filePath("b.db");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz", "-o", a}).exit_code,
           0);
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-1.json.gz", "-o", b}).exit_code,
           0);
  const Run compared = run_cli({"trace", "compare", a, b, "--json", "--top", "5"});
  QVERIFY2(compared.exit_code == 0, qPrintable(compared.err));
  const QJsonObject c = json_of(compared);
  QVERIFY(c["per_step"].toBool());
  QCOMPARE(c["steps"].toArray()[0].toInt(), 2);
  QCOMPARE(c["ranks"].toArray()[1].toInt(), 1);
  const QJsonObject compute = c["parts"].toArray()[0].toObject();
  QCOMPARE(compute["name"].toString(), QString("compute"));
  QCOMPARE(compute["baseline_ns"].toDouble(), 210320000.0 / 2);
  QCOMPARE(compute["other_ns"].toDouble(), 271973000.0 / 2);
  QCOMPARE(compute["change_ns"].toDouble(), (271973000.0 - 210320000.0) / 2);
  // The parts add up to the device span (1222.847 and 1231.186 ms).
  double a_sum = 0, b_sum = 0;
  const QJsonArray parts = c["parts"].toArray();
  for (qsizetype i = 0; i + 1 < parts.size(); ++i) {
    a_sum += parts[i].toObject()["baseline_ns"].toDouble();
    b_sum += parts[i].toObject()["other_ns"].toDouble();
  }
  QCOMPARE(parts.last().toObject()["name"].toString(), QString("device span"));
  QCOMPARE(a_sum, 1222847000.0 / 2);
  QCOMPARE(b_sum, 1231186000.0 / 2);
  // Compute by operation kind, all of it: here the embedding kernels
  // (FBGEMM's, no GEMM) grew, the GEMMs did not.
  const QJsonArray kinds = c["operation_kinds"].toArray();
  QVERIFY(kinds.size() >= 2);
  QCOMPARE(kinds[0].toObject()["name"].toString(), QString("elementwise compute"));
  QVERIFY(kinds[0].toObject()["change_ns"].toDouble() > 25e6);
  double kinds_a = 0;
  for (const QJsonValue& k : kinds) {
    if (k.toObject()["name"].toString() == "GEMM compute")
      QVERIFY(std::abs(k.toObject()["change_ns"].toDouble()) < 2e6);
    kinds_a += k.toObject()["baseline_ns"].toDouble();
  }
  // Every compute kernel counts once: at least the merged compute time.
  QVERIFY(kinds_a >= compute["baseline_ns"].toDouble());
  // Kernels by the size of their change, largest first.
  const QJsonArray kernels = c["kernels"].toArray();
  QCOMPARE(kernels.size(), 5);
  for (qsizetype i = 1; i < kernels.size(); ++i)
    QVERIFY(std::abs(kernels[i - 1].toObject()["change_ns"].toDouble()) >=
            std::abs(kernels[i].toObject()["change_ns"].toDouble()));

  // Beyond the kernels (HTA's trace diff): calls, copies and ranges, by the
  // size of their change; a run against itself changes none of them.
  for (const char* table : {"api_calls", "memory_ops", "annotations"}) {
    const QJsonArray rows = c[table].toArray();
    QVERIFY2(!rows.isEmpty(), table);
    for (qsizetype i = 1; i < rows.size(); ++i)
      QVERIFY(std::abs(rows[i - 1].toObject()["change_ns"].toDouble()) >=
              std::abs(rows[i].toObject()["change_ns"].toDouble()));
  }
  const QJsonObject self = json_of(run_cli({"trace", "compare", a, a, "--json", "--top", "1000"}));
  for (const char* table : {"api_calls", "memory_ops", "annotations"}) {
    QVERIFY2(!self[table].toArray().isEmpty(), table);
    for (const QJsonValue& row : self[table].toArray()) {
      QCOMPARE(row.toObject()["change_ns"].toDouble(), 0.0);
      QCOMPARE(row.toObject()["baseline_count"].toInteger(),
               row.toObject()["other_count"].toInteger());
    }
  }

  const Run text = run_cli({"trace", "compare", a, b});
  QVERIFY2(text.exit_code == 0, qPrintable(text.err));
  QVERIFY2(text.out.contains("per rank and step"), qPrintable(text.out));
  QVERIFY2(text.out.contains("CUDA API calls whose time changed most") &&
               text.out.contains("Annotation ranges whose time changed most"),
           qPrintable(text.out));
  QVERIFY2(!text.out.contains("note: "), qPrintable(text.out));
  // The headline is the median step; the parts and counts say what they are.
  QVERIFY2(text.out.contains("the mean per rank and step, the first steps included") &&
               text.out.contains("count: instances in each run, all ranks, inside its steps"),
           qPrintable(text.out));
  QCOMPARE(c["status"].toArray(), QJsonArray({"complete", "complete"}));

  // A run that did not complete is said, in stats and compare: its figures
  // are not the whole run's (a script could not tell a half run).
  const QString cancelled = dir.filePath("cancelled.db");
  QVERIFY(QFile::copy(b, cancelled));
  QFile::setPermissions(cancelled, QFile::ReadOwner | QFile::WriteOwner);
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(cancelled.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE meta SET value = 'cancelled' WHERE key = 'status'", nullptr,
                          nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
  }
  const QString said = cancelled + ": the run ended cancelled: the figures are of what it recorded";
  const Run stats = run_cli({"trace", "stats", cancelled});
  QVERIFY2(stats.out.contains("note: " + said), qPrintable(stats.out));
  QCOMPARE(json_of(run_cli({"trace", "stats", cancelled, "--json"}))["status"].toString(),
           QString("cancelled"));
  const Run against = run_cli({"trace", "compare", a, cancelled});
  QVERIFY2(against.out.contains("note: " + said), qPrintable(against.out));
  QCOMPARE(json_of(run_cli({"trace", "compare", a, cancelled, "--json"}))["status"].toArray(),
           QJsonArray({"complete", "cancelled"}));
  QVERIFY(text.out.contains("Kernels whose time changed most"));
  QVERIFY(text.out.contains("Compute by operation kind"));
  QVERIFY2(text.out.contains("+30.826 (+29.3%)"), qPrintable(text.out));  // compute, a step
  QVERIFY(text.out.contains("(1 rank, 2 steps)"));
  // The kernel name gives the type: ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t.
  QVERIFY(text.out.contains("send_recv int8 (size unknown) x2"));

  // A store that is not there: named, exit status 1.
  const Run missing = run_cli({"trace", "compare", a, dir.filePath("none.db")});
  QCOMPARE(missing.exit_code, 1);
  QVERIFY2(missing.err.contains(dir.filePath("none.db")), qPrintable(missing.err));
}

void TestTraceCli::infoJsonGivesMetaTypes_data() {
  QTest::addColumn<QString>("value");     // as the meta table holds it
  QTest::addColumn<QString>("expected");  // the JSON `trace info --json` gives for it
  QTest::addRow("object") << R"({"step_seconds": 0.412, "ranks": [0, 1]})"
                          << R"({"ranks":[0,1],"step_seconds":0.412})";
  QTest::addRow("array") << "[1, 2, 3]"
                         << "[1,2,3]";
  QTest::addRow("integer") << "1234567890123"
                           << "1234567890123";
  QTest::addRow("negative") << "-3"
                            << "-3";
  QTest::addRow("fraction") << "0.25"
                            << "0.25";
  QTest::addRow("true") << "true"
                        << "true";
  QTest::addRow("false") << "false"
                         << "false";
  QTest::addRow("name") << "collectives"
                        << R"("collectives")";
  QTest::addRow("number and words") << "12 ranks"
                                    << R"("12 ranks")";
  QTest::addRow("null stays text") << "null"
                                   << R"("null")";
  QTest::addRow("quoted stays as written") << R"("x")"
                                           << R"("\"x\"")";
  QTest::addRow("spaces around") << " 7"
                                 << R"(" 7")";
  QTest::addRow("past 64 bits") << "123456789012345678901234567890"
                                << R"("123456789012345678901234567890")";
  QTest::addRow("past a double") << "1e999"
                                 << R"("1e999")";
  QTest::addRow("broken object") << R"({"a": )"
                                 << R"("{\"a\": ")";
  QTest::addRow("empty") << ""
                         << R"("")";
}

// `trace info --json` gives each meta value in its JSON type (every one was
// a string, and a script had to parse predicted_step a second time).
void TestTraceCli::infoJsonGivesMetaTypes() {
  QFETCH(QString, value);
  QFETCH(QString, expected);
  QTemporaryDir dir;
  const QString store = dir.filePath("meta.cstrace");
  const Run imported =
      run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz", "-o", store});
  QVERIFY2(imported.exit_code == 0, qPrintable(imported.err));
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  QCOMPARE(sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES('test_value', ?)",
                              -1, &stmt, nullptr),
           SQLITE_OK);
  const QByteArray text = value.toUtf8();
  sqlite3_bind_text(stmt, 1, text.constData(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  QCOMPARE(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(db);

  const Run info = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(info.exit_code == 0, qPrintable(info.err));
  const QJsonObject meta = json_of(info)["meta"].toObject();
  // Wrapped in an array, so that a bare number or string is a document too.
  const QJsonArray wanted = QJsonDocument::fromJson(("[" + expected + "]").toUtf8()).array();
  QCOMPARE(wanted.size(), 1);
  QCOMPARE(meta["test_value"], wanted[0]);
  // The store's own keys stay, in their types.
  QCOMPARE(meta["status"].toString(), QString("complete"));
  QVERIFY2(meta["schema_version"].isDouble(), qPrintable(info.out));
}

// A run store of a plan over a large cluster records the plan whole (meta
// plan_json, tens of MB): `trace info` read it, and every meta row near it,
// over and over, and took seconds (bench/bench_trace_info.cpp). It prints
// what it printed before the plan grew; --json still gives the plan whole.
void TestTraceCli::infoOfAStoreWithAHugePlan() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, "cpu/cpu-engine-dp2.db", "huge-plan.db");
  QVERIFY(!store.isEmpty());
  const Run before = run_cli({"trace", "info", store});
  QVERIFY2(before.exit_code == 0, qPrintable(before.err));
  const Run json_before = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(json_before.exit_code == 0, qPrintable(json_before.err));

  // 30,000 nodes of 8 GPUs: some 12 MB.
  QJsonArray nodes;
  for (int n = 0; n < 30000; ++n) {
    QJsonArray gpus;
    for (int g = 0; g < 8; ++g)
      gpus.append(QJsonObject{{"model", "H100 SXM"}, {"memory_gb", 80}, {"index", g}});
    nodes.append(QJsonObject{{"name", QString("node-%1").arg(n)}, {"gpus", gpus}});
  }
  const QJsonObject plan{{"cluster", QJsonObject{{"name", "huge"}, {"nodes", nodes}}},
                         {"parallel", QJsonObject{{"dp", 2}, {"tp", 1}, {"pp", 1}}}};
  const QByteArray plan_text = QJsonDocument(plan).toJson(QJsonDocument::Compact);
  QVERIFY(plan_text.size() > 10'000'000);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  QCOMPARE(sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES('plan_json', ?)",
                              -1, &stmt, nullptr),
           SQLITE_OK);
  sqlite3_bind_text(stmt, 1, plan_text.constData(), static_cast<int>(plan_text.size()),
                    SQLITE_TRANSIENT);
  QCOMPARE(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(db);

  const Run after = run_cli({"trace", "info", store});
  QVERIFY2(after.exit_code == 0, qPrintable(after.err));
  QCOMPARE(after.out, before.out);
  QVERIFY(after.out.contains("  command: "));
  const Run json_after = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(json_after.exit_code == 0, qPrintable(json_after.err));
  QJsonObject got = json_of(json_after);
  QCOMPARE(got["meta"].toObject()["plan_json"].toObject(), plan);
  QJsonObject meta = got["meta"].toObject();
  meta.remove("plan_json");
  got["meta"] = meta;
  QJsonObject wanted = json_of(json_before);
  meta = wanted["meta"].toObject();
  meta.remove("plan_json");
  wanted["meta"] = meta;
  QCOMPARE(got, wanted);
}

// info --json writes the plan as the store holds it, laid out as the rest:
// it was parsed into a tree and dumped again, which took seconds and most of
// a GB for a large cluster's plan (tens of MB), and rewrote numbers and
// strings: 0.1000000000000000055511 as 0.1, 1E5 as 100000.0, 2^64 as
// 1.8446744073709552e+19, -0 as 0, "\u00e9" as "é".
void TestTraceCli::infoJsonKeepsThePlanAsWritten() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, "cpu/cpu-engine-dp2.db", "plan.db");
  QVERIFY(!store.isEmpty());
  QVERIFY(set_meta(store, "plan_json",
                   "{\"a\":[],\"b\":{\"c\":1E5,\n \"d\" : [0.1000000000000000055511, {},"
                   "\"\\u00e9\\n\"]},\"e\":18446744073709551616,\"f\":-0}"));
  const Run info = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(info.exit_code == 0, qPrintable(info.err));
  const QString plan = R"(
    "plan_json": {
      "a": [],
      "b": {
        "c": 1E5,
        "d": [
          0.1000000000000000055511,
          {},
          "\u00e9\n"
        ]
      },
      "e": 18446744073709551616,
      "f": -0
    },
)";
  QVERIFY2(info.out.contains(plan), qPrintable(info.out));
  const QJsonObject meta = json_of(info)["meta"].toObject();
  QCOMPARE(meta["plan_json"].toObject()["b"].toObject()["d"].toArray()[2].toString(),
           QString::fromUtf8("\u00e9\n"));
  QCOMPARE(meta["title"].toString(), QString("GPT-2 124M on 2 ranks"));
}

// A meta value that is not a JSON object or array nlohmann's parser reads
// whole is given as it was before the plan was written from its text.
void TestTraceCli::infoJsonOfMetaThatIsNotAnObject_data() {
  QTest::addColumn<QByteArray>("stored");
  QTest::addColumn<QString>("member");  // as info --json writes it
  QTest::addRow("not JSON") << QByteArray("{bad json") << R"("x": "{bad json")";
  QTest::addRow("space after") << QByteArray("{\"a\":1} ") << R"("x": "{\"a\":1} ")";
  // The parser refuses a number past a double's range.
  QTest::addRow("past a double") << QByteArray(R"({"a":1e400})") << R"("x": "{\"a\":1e400}")";
  QTest::addRow("two documents") << QByteArray("[1][2]") << R"("x": "[1][2]")";
  QTest::addRow("lone surrogate") << QByteArray(R"({"a":"\ud800"})")
                                  << R"("x": "{\"a\":\"\\ud800\"}")";
  QTest::addRow("not UTF-8") << QByteArray("{\"a\":\"\xff\"}")
                             << QString::fromUtf8("\"x\": \"{\\\"a\\\":\\\"\uFFFD\\\"}\"");
  // nlohmann's parser ends the text at a NUL byte, and reads what is before.
  QTest::addRow("NUL after") << QByteArray("{\"a\":1}\0[", 9) << "\"x\": {\n      \"a\": 1\n    }";
  QTest::addRow("array") << QByteArray("[1,{\"b\":[]}]")
                         << "\"x\": [\n      1,\n      {\n        \"b\": []\n      }\n    ]";
  // Nested deeper than 256 it stays text (a value inside 257 arrays); 257
  // arrays with nothing inside are read.
  QTest::addRow("too deep") << QByteArray(257, '[') + "1" + QByteArray(257, ']')
                            << "\"x\": \"" + QString(257, '[') + "1";
  QTest::addRow("deepest") << QByteArray(257, '[') + QByteArray(257, ']') << "\"x\": [\n      [";
}

void TestTraceCli::infoJsonOfMetaThatIsNotAnObject() {
  QFETCH(QByteArray, stored);
  QFETCH(QString, member);
  QTemporaryDir dir;
  const QString store = writable_store(dir, "cpu/cpu-engine-dp2.db", "meta.db");
  QVERIFY(!store.isEmpty());
  QVERIFY(set_meta(store, "x", stored));
  const Run info = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(info.exit_code == 0, qPrintable(info.err));
  QVERIFY2(info.out.contains("\n    " + member), qPrintable(info.out.right(3000)));
  QVERIFY(!json_of(info).isEmpty());
}

void TestTraceCli::exportFormats() {
  QTemporaryDir dir;
  const QString store = dir.filePath("saxpy.cstrace");
  QCOMPARE(
      run_cli({"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o", store}).exit_code, 0);

  const Run chrome = run_cli({"trace", "export", store, "-o", dir.filePath("s.json"), "--json"});
  QVERIFY2(chrome.exit_code == 0, qPrintable(chrome.err));
  QCOMPARE(json_of(chrome)["events"].toInt(), 99);
  QFile f(dir.filePath("s.json"));
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
  QVERIFY(doc["traceEvents"].toArray().size() > 99);
  QCOMPARE(doc["distributedInfo"].toObject()["rank"].toInt(), 0);

  const Run window = run_cli({"trace", "export", store, "-o", dir.filePath("w.json"), "--from",
                              "300ms", "--to", "400ms", "--json"});
  QCOMPARE(window.exit_code, 0);
  QVERIFY(json_of(window)["events"].toInt() < 99);

  const Run csv =
      run_cli({"trace", "export", store, "-o", dir.filePath("t.csv"), "--table", "all"});
  QVERIFY2(csv.exit_code == 0, qPrintable(csv.err));
  for (const char* t :
       {"events", "breakdown", "kernels", "collectives", "stragglers", "prediction"})
    QVERIFY2(QFile::exists(dir.filePath(QString("t.%1.csv").arg(t))), t);

  const Run html = run_cli({"trace", "export", store, "-o", dir.filePath("r.html")});
  QCOMPARE(html.exit_code, 0);
  QVERIFY2(!html.out.contains(" events, "), qPrintable(html.out));  // it said "0 events"
  QFile h(dir.filePath("r.html"));
  QVERIFY(h.open(QIODevice::ReadOnly));
  QVERIFY(h.readAll().contains("NVIDIA A100-SXM4-40GB"));
  // The name's extension in any case (REPORT.HTML was written as JSON).
  const Run upper = run_cli({"trace", "export", store, "-o", dir.filePath("R.HTML")});
  QCOMPARE(upper.exit_code, 0);
  QVERIFY2(!upper.err.contains("note:"), qPrintable(upper.err));
  QFile u(dir.filePath("R.HTML"));
  QVERIFY(u.open(QIODevice::ReadOnly));
  QVERIFY(u.readAll().startsWith("<!DOCTYPE html>"));

  // A name that says no format: a Chrome trace, and the note says so.
  const Run txt = run_cli({"trace", "export", store, "-o", dir.filePath("run.txt")});
  QCOMPARE(txt.exit_code, 0);
  QVERIFY2(txt.err.contains("run.txt: no --format, and the name ends in none of .json, .csv, .html: "
                            "written as a Chrome trace (JSON)"),
           qPrintable(txt.err));
  QVERIFY(!chrome.err.contains("note:"));

  // An export never replaces an SQLite database (a trace store, an Nsight
  // export): it wrote JSON over one, which then read as no database at all.
  const QString other = dir.filePath("other-run.db");
  QVERIFY(QFile::copy(CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db", other));
  const QByteArray before = [&] {
    QFile copy(other);
    return copy.open(QIODevice::ReadOnly) ? copy.readAll() : QByteArray();
  }();
  for (const QStringList& args :
       {QStringList{"-o", other}, QStringList{"-o", other, "--format", "html"},
        QStringList{"-o", other, "--format", "csv"}}) {
    const Run refused = run_cli(QStringList{"trace", "export", store} + args);
    QCOMPARE(refused.exit_code, 1);
    QVERIFY2(refused.err.contains(other + ": is an SQLite database (a trace store, or another "
                                          "program's); an export does not replace it"),
             qPrintable(refused.err));
    // ... and says only that (a note on the name's format came first).
    QVERIFY2(!refused.err.contains("note:"), qPrintable(refused.err));
  }
  QFile after(other);
  QVERIFY(after.open(QIODevice::ReadOnly));
  QVERIFY(after.readAll() == before);
  // ... nor one among the files of --table all, before writing any.
  QVERIFY(QFile::copy(other, dir.filePath("many.kernels.csv")));
  const Run many = run_cli({"trace", "export", store, "-o", dir.filePath("many.csv"), "--table", "all"});
  QCOMPARE(many.exit_code, 1);
  QVERIFY(!QFile::exists(dir.filePath("many.events.csv")));
  // ... nor one among the files of --file-per-rank (it was replaced by JSON).
  QVERIFY(QFile::copy(other, dir.filePath("per.rank0.json")));
  const Run per_rank =
      run_cli({"trace", "export", store, "-o", dir.filePath("per.json"), "--file-per-rank"});
  QCOMPARE(per_rank.exit_code, 1);
  QVERIFY2(per_rank.err.contains(dir.filePath("per.rank0.json") +
                                 ": is an SQLite database (a trace store, or another program's)"),
           qPrintable(per_rank.err));
  QFile kept(dir.filePath("per.rank0.json"));
  QVERIFY(kept.open(QIODevice::ReadOnly));
  QVERIFY(kept.readAll() == before);
}

// A read-only file named as an output is kept as it was, and read-only: it
// was written beside and renamed over, which its mode does not stop, so it
// was replaced and came back writable. A folder named as a file of --table
// all was met half-way, the tables before it replaced. Each is refused by
// name before anything is written.
void TestTraceCli::outputsKeepReadOnlyFilesAndFolders_data() {
  QTest::addColumn<QStringList>("args");  // after the store; @ is the test's folder
  QTest::addColumn<QString>("blocked");   // the file made read-only, or made a folder
  QTest::addColumn<bool>("folder");
  QTest::addColumn<QString>("message");
  QTest::addColumn<QString>("not_written");  // a file the command would have written first
  const QString read_only =
      ": is read-only, and is left as it was (write another file, or make "
      "it writable first)";
  QTest::addRow("Chrome trace") << QStringList{"-o", "@/out.json"} << "out.json" << false
                                << "@/out.json" + read_only << "";
  QTest::addRow("HTML report") << QStringList{"-o", "@/out.html"} << "out.html" << false
                               << "@/out.html" + read_only << "";
  QTest::addRow("one CSV table") << QStringList{"-o", "@/out.csv", "--table", "kernels"}
                                 << "out.csv" << false << "@/out.csv" + read_only << "";
  QTest::addRow("CSV tables, one read-only")
      << QStringList{"-o", "@/t.csv", "--table", "all"} << "t.kernels.csv" << false
      << "@/t.kernels.csv" + read_only << "t.events.csv";
  QTest::addRow("CSV tables, one a folder")
      << QStringList{"-o", "@/t.csv", "--table", "all"} << "t.kernels.csv" << true
      << "@/t.kernels.csv: is a folder; an export is written to a file: give a file name"
      << "t.events.csv";
  QTest::addRow("a rank's file") << QStringList{"-o", "@/per.json", "--file-per-rank"}
                                 << "per.rank0.json" << false << "@/per.rank0.json" + read_only
                                 << "";
}

void TestTraceCli::outputsKeepReadOnlyFilesAndFolders() {
  QFETCH(QStringList, args);
  QFETCH(QString, blocked);
  QFETCH(bool, folder);
  QFETCH(QString, message);
  QFETCH(QString, not_written);
  QTemporaryDir dir;
  const QString store = dir.filePath("saxpy.cstrace");
  QCOMPARE(
      run_cli({"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o", store}).exit_code, 0);
  const QString path = dir.filePath(blocked);
  const auto read_only = QFile::ReadOwner | QFile::ReadGroup | QFile::ReadOther;
  if (folder) {
    QVERIFY(QDir().mkpath(path));
  } else {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("kept");
    f.close();
    QVERIFY(f.setPermissions(read_only));
  }
  for (QString& a : args)
    a.replace("@", dir.path());
  const Run r = run_cli(QStringList{"trace", "export", store} + args);
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(QString(message).replace("@", dir.path())), qPrintable(r.err));
  if (!folder) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("kept"));
    QCOMPARE(f.permissions() & (QFile::WriteOwner | QFile::WriteGroup | QFile::WriteOther),
             QFileDevice::Permissions{});
  }
  if (!not_written.isEmpty()) QVERIFY(!QFile::exists(dir.filePath(not_written)));
}

// Every output of the trace commands makes the folders missing on its way,
// as `run --out` does (an export said "cannot write: No such file or
// directory", an import or a merge "the folder ... does not exist"); one
// that cannot be made, under a file, is refused by name and nothing written.
void TestTraceCli::outputsMakeTheirFolders_data() {
  QTest::addColumn<QStringList>("args");   // @: the test's folder; STORE: a store there
  QTest::addColumn<QStringList>("files");  // written, under @
  QTest::addColumn<QString>("error");      // else: refused with this
  QTest::addRow("Chrome trace") << QStringList{"trace", "export", "STORE", "-o", "@/a/b/out.json"}
                                << QStringList{"a/b/out.json"} << "";
  QTest::addRow("HTML report") << QStringList{"trace", "export", "STORE", "-o", "@/h/out.html"}
                               << QStringList{"h/out.html"} << "";
  QTest::addRow("one CSV table") << QStringList{"trace",       "export",  "STORE",  "-o",
                                                "@/c/out.csv", "--table", "kernels"}
                                 << QStringList{"c/out.csv"} << "";
  QTest::addRow("CSV tables") << QStringList{"trace",     "export",  "STORE", "-o",
                                             "@/t/t.csv", "--table", "all"}
                              << QStringList{"t/t.events.csv", "t/t.kernels.csv"} << "";
  QTest::addRow("a file per rank")
      << QStringList{"trace", "export", "STORE", "-o", "@/p/per.json", "--file-per-rank"}
      << QStringList{"p/per.rank0.json"} << "";
  QTest::addRow("import") << QStringList{"trace", "import", "@/saxpy.sqlite", "-o", "@/i/x.db"}
                          << QStringList{"i/x.db"} << "";
  QTest::addRow("merge") << QStringList{"trace", "merge", "STORE", "-o", "@/m/n/merged.db"}
                         << QStringList{"m/n/merged.db"} << "";
  const QString under_a_file =
      ": cannot create its folder @/a-file/sub (@/a-file is a file, not a folder)";
  QTest::addRow("export under a file")
      << QStringList{"trace", "export", "STORE", "-o", "@/a-file/sub/out.json"} << QStringList{}
      << "@/a-file/sub/out.json" + under_a_file;
  QTest::addRow("import under a file")
      << QStringList{"trace", "import", "@/saxpy.sqlite", "-o", "@/a-file/sub/x.db"}
      << QStringList{} << "@/a-file/sub/x.db" + under_a_file;
  QTest::addRow("merge under a file")
      << QStringList{"trace", "merge", "STORE", "-o", "@/a-file/sub/m.db"} << QStringList{}
      << "@/a-file/sub/m.db" + under_a_file;
  // Refused once its folders were made: they go again (they were left empty).
  QTest::addRow("export of steps not recorded")
      << QStringList{"trace", "export", "STORE", "-o", "@/s/t/out.json", "--steps", "9"}
      << QStringList{} << "--steps: @/saxpy.cstrace records no steps";
  QTest::addRow("import of a file that is no trace")
      << QStringList{"trace", "import", "@/a-file", "-o", "@/i/j/x.db"} << QStringList{}
      << "@/a-file: not a trace this build imports";
  QTest::addRow("merge of a file that is no store")
      << QStringList{"trace", "merge", "@/a-file", "-o", "@/m/merged.db"} << QStringList{}
      << "@/a-file is not a ClusterScope trace store";
}

void TestTraceCli::outputsMakeTheirFolders() {
  QFETCH(QStringList, args);
  QFETCH(QStringList, files);
  QFETCH(QString, error);
  QTemporaryDir dir;
  const QString nsys = dir.filePath("saxpy.sqlite");
  QVERIFY(QFile::copy(kData + "nsys/saxpy-mpi-cuda.sqlite", nsys));
  QVERIFY(QFile::setPermissions(nsys, QFile::ReadOwner | QFile::WriteOwner));
  const QString store = dir.filePath("saxpy.cstrace");
  QCOMPARE(run_cli({"trace", "import", nsys, "-o", store}).exit_code, 0);
  {
    QFile f(dir.filePath("a-file"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("kept");
  }
  for (QString& a : args)
    a.replace("STORE", store).replace("@", dir.path());
  const QStringList before = QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries);
  const Run r = run_cli(args);
  if (error.isEmpty()) {
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    for (const QString& file : files)
      QVERIFY2(QFileInfo(dir.filePath(file)).size() > 0, qPrintable(file));
    return;
  }
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("clusterscope: error: " + error.replace("@", dir.path())),
           qPrintable(r.err));
  QVERIFY(QFileInfo(dir.filePath("a-file")).isFile());
  // Nothing left behind, no empty folder either.
  QCOMPARE(QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries), before);
}

// A store named as the output of a merge, made read-only, is kept.
void TestTraceCli::mergeKeepsAReadOnlyStore() {
  QTemporaryDir dir;
  const QString store = dir.filePath("saxpy.cstrace"), out = dir.filePath("merged.db");
  QCOMPARE(
      run_cli({"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o", store}).exit_code, 0);
  QVERIFY(QFile::copy(store, out));
  QVERIFY(QFile::setPermissions(out, QFile::ReadOwner | QFile::ReadGroup | QFile::ReadOther));
  const QByteArray before = [&] {
    QFile f(out);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }();
  for (const QStringList& args :
       {QStringList{"trace", "merge", store, "-o", out},
        QStringList{"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o", out}}) {
    const Run r = run_cli(args);
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains(out + ": is read-only, and is left as it was"), qPrintable(r.err));
  }
  QFile f(out);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QVERIFY(f.readAll() == before);
}

void TestTraceCli::mergeStores() {
  QTemporaryDir dir;
  const QString a = dir.filePath("r0.cstrace"), b = dir.filePath("r1.cstrace");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz", "-o", a}).exit_code,
           0);
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-1.json.gz", "-o", b}).exit_code,
           0);
  const Run merged = run_cli(
      {"trace", "merge", a, b, "-o", dir.filePath("run.cstrace"), "--align", "none", "--json"});
  QVERIFY2(merged.exit_code == 0, qPrintable(merged.err));
  const QJsonObject m = json_of(merged);
  QCOMPARE(m["ranks"].toInt(), 2);
  QCOMPARE(m["events"].toInt(), 4810 + 4675);
  QCOMPARE(m["clock_alignment"].toString(), QString("none"));
}

// Rank stores of two runs, one of which crashed: the merge is refused,
// and says nothing of a merged run (it said "the merged run is marked
// crashed" first, of a store it never wrote).
void TestTraceCli::mergeOfTwoRunsIsRefusedWithoutAnEnding() {
  namespace tr = cs::trace;
  QTemporaryDir dir;
  QStringList args = {"trace", "merge"};
  for (const auto& [rank, run_id, ending] :
       {std::tuple{0, "run-a", "crashed"}, std::tuple{1, "run-b", "complete"}}) {
    const QString store = dir.filePath(QString("rank%1.db").arg(rank));
    auto created = tr::TraceWriter::create(store.toStdString(), tr::RunInfo{"rank", "test"});
    QVERIFY2(created, created ? "" : created.message().c_str());
    tr::TraceWriter& w = **created;
    w.set_meta(tr::kRunIdMeta, run_id);
    w.add_rank({rank, "box", "CPU", 100 + rank, 0, false});
    tr::Event e;
    e.lane = w.add_lane(rank, tr::LaneKind::cpu_thread, "compute");
    e.name = w.intern("gemm");
    e.start_ns = 1000;
    e.end_ns = 2000;
    w.add(e);
    QVERIFY(w.close(ending).ok());
    args << store;
  }
  const QString out = dir.filePath("run.db");
  const Run refused = run_cli(args + QStringList{"-o", out, "--align", "none"});
  QCOMPARE(refused.exit_code, 1);
  QVERIFY2(refused.err.contains("rank0.db is a rank store of run run-a") &&
               refused.err.contains("rank1.db of run run-b"),
           qPrintable(refused.err));
  QVERIFY2(!refused.err.contains("marked") && !refused.err.contains("note:"),
           qPrintable(refused.err));
  QVERIFY(!QFile::exists(out));
  // One run's ranks, one crashed: merged, and said so.
  QVERIFY(set_meta(dir.filePath("rank1.db"), "run_id", "run-a"));
  const Run merged = run_cli(args + QStringList{"-o", out, "--align", "none"});
  QVERIFY2(merged.exit_code == 0, qPrintable(merged.err));
  QVERIFY2(merged.err.contains("note: " + dir.filePath("rank0.db") + " ended crashed\n") &&
               merged.err.contains("note: the merged run is marked crashed\n"),
           qPrintable(merged.err));
}

// Importing or merging onto an earlier store that fails part way (here past
// a file-size limit, `ulimit -f` on a cluster node; a full disk is the same)
// keeps the earlier store whole and leaves nothing behind; the process is not
// killed by SIGXFSZ and says what failed.
void TestTraceCli::failedWriteKeepsTheEarlierStore_data() {
  QTest::addColumn<QString>("command");
  QTest::addRow("import") << QStringLiteral("import");
  // Two files, each imported into a part of its own first: the part's
  // failure named the part ("keep.cstrace.part0.tmp"), not the store.
  QTest::addRow("import of two") << QStringLiteral("import of two");
  QTest::addRow("merge") << QStringLiteral("merge");
}

void TestTraceCli::failedWriteKeepsTheEarlierStore() {
  QFETCH(QString, command);
  QTemporaryDir dir;
  const QString keep = dir.filePath("keep.cstrace");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz", "-o", keep})
               .exit_code,
           0);
  const qint64 size = QFileInfo(keep).size();
  QStringList args;
  if (command == "import") {
    args = {"trace", "import", kData + "kineto/allreduce_rank-0.json.gz", "-o", keep};
  } else if (command == "import of two") {
    args = {"trace",
            "import",
            kData + "kineto/allreduce_rank-0.json.gz",
            kData + "kineto/sampled_rank-1.json.gz",
            "-o",
            keep};
  } else {
    const QString a = dir.filePath("a.cstrace"), b = dir.filePath("b.cstrace");
    // Two ranks of one run (the merge refuses ranks of two).
    QCOMPARE(
        run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz", "-o", a}).exit_code,
        0);
    QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-1.json.gz", "-o", b})
                 .exit_code,
             0);
    args = {"trace", "merge", a, b, "-o", keep, "--align", "none"};
  }
  QProcess p;
  p.setChildProcessModifier([] {
    const rlimit limit{700 << 10, 700 << 10};  // 700 KiB: the new store is larger
    setrlimit(RLIMIT_FSIZE, &limit);
  });
  p.start(CS_BIN_DIR "/clusterscope", args);
  QVERIFY(p.waitForFinished(120000));
  const QString err = QString::fromUtf8(p.readAllStandardError());
  QCOMPARE(p.exitStatus(), QProcess::NormalExit);  // not killed by SIGXFSZ
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(err.contains(keep + ": write failed"), qPrintable(err));
  QVERIFY2(!err.contains("partial") && !err.contains(".part"), qPrintable(err));
  // The earlier store, as it was; nothing else beside it.
  QCOMPARE(QFileInfo(keep).size(), size);
  const Run info = run_cli({"trace", "info", keep, "--check", "--json"});
  QVERIFY2(info.exit_code == 0, qPrintable(info.err));
  QCOMPARE(json_of(info)["events"].toInt(), 4810);
  const QStringList left = QDir(dir.path()).entryList({"keep*"}, QDir::Files);
  QCOMPARE(left, QStringList{"keep.cstrace"});
}

// "-o -": the data alone on stdout, the summary on stderr (it used to be
// appended to the JSON, and "-" was a file of that name).
void TestTraceCli::exportToStandardOutput() {
  const Run r = run_cli({"trace", "export", CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db", "-o",
                         "-", "--format", "chrome"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &error);
  QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
  QVERIFY(doc.object()["traceEvents"].toArray().size() > 100);
  QVERIFY2(r.err.contains("wrote /dev/stdout"), qPrintable(r.err));
  QVERIFY(!QFile::exists("-"));
  // /dev/stdout redirected to a file (it resolves to a regular file there).
  QTemporaryDir dir;
  QProcess p;
  p.setStandardOutputFile(dir.filePath("out.csv"));
  p.start(CS_BIN_DIR "/clusterscope", {"trace", "export",
                                       CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db", "-o",
                                       "/dev/stdout", "--format", "csv"});
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitCode(), 0);
  QFile csv(dir.filePath("out.csv"));
  QVERIFY(csv.open(QIODevice::ReadOnly));
  const QByteArray text = csv.readAll();
  QVERIFY2(!text.contains("wrote /dev/stdout") && text.count('\n') > 100, text.left(200).constData());
  // ... and appended to one (`-o - >> log`): the log keeps what it held.
  QFile log(dir.filePath("app.log"));
  QVERIFY(log.open(QIODevice::WriteOnly));
  log.write("line 1\nline 2\n");
  log.close();
  p.setStandardOutputFile(log.fileName(), QIODevice::Append);
  p.start(CS_BIN_DIR "/clusterscope", {"trace", "export",
                                       CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db", "-o", "-",
                                       "--format", "csv", "--table", "kernels"});
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitCode(), 0);
  QVERIFY(log.open(QIODevice::ReadOnly));
  const QByteArray appended = log.readAll();
  QVERIFY2(appended.startsWith("line 1\nline 2\nrank,name,kind"), appended.left(200).constData());
  log.close();
  // ... and through a link to it: the link's target was written beside and
  // renamed over the log.
  const QString link = dir.filePath("to-stdout.csv");
  QVERIFY(QFile::link(QStringLiteral("/dev/stdout"), link));
  p.start(CS_BIN_DIR "/clusterscope",
          {"trace", "export", CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db", "-o", link,
           "--format", "csv", "--table", "kernels"});
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitCode(), 0);
  QVERIFY(log.open(QIODevice::ReadOnly));
  const QByteArray twice = log.readAll();
  QVERIFY2(twice.startsWith(appended) && twice.size() > appended.size(),
           twice.left(200).constData());
}

// Events the writer cannot keep (a time past what a trace holds) are said
// with their count; none kept is an error. Both said "imported 137 events"
// and exited 0, whatever the store held.
void TestTraceCli::keptEventsAreCounted() {
  QTemporaryDir dir;
  const QString far = dir.filePath("far-session.sqlite");
  QVERIFY(QFile::copy(kData + "nsys/saxpy-mpi-cuda.sqlite", far));
  QFile::setPermissions(far, QFile::ReadOwner | QFile::WriteOwner);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(far.toUtf8().constData(), &db), SQLITE_OK);
  QCOMPARE(sqlite3_exec(db,
                        "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 9223372036854775807",
                        nullptr, nullptr, nullptr),
           SQLITE_OK);
  sqlite3_close(db);
  const Run none = run_cli({"trace", "import", far, "-o", dir.filePath("none.db")});
  QCOMPARE(none.exit_code, 1);
  QVERIFY2(none.err.contains("none.db: none of the 99 events could be kept; 99 events dropped "
                             "for a time past what a trace holds"),
           qPrintable(none.err));
  QVERIFY(!none.out.contains("imported 99"));

  // One rank of two shifted past what a trace holds: the merge says how many
  // of its events were dropped.
  const QString store = dir.filePath("two.db");
  QCOMPARE(run_cli({"trace", "import", kData + "kineto/sampled_rank-0.json.gz",
                    kData + "kineto/sampled_rank-1.json.gz", "-o", store})
               .exit_code,
           0);
  QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
  QCOMPARE(sqlite3_exec(db, "UPDATE ranks SET clock_offset_ns = 9223372036854775807 WHERE rank = 0",
                        nullptr, nullptr, nullptr),
           SQLITE_OK);
  sqlite3_close(db);
  const Run merged = run_cli({"trace", "merge", store, "-o", dir.filePath("merged.db"), "--align",
                              "recorded"});
  QVERIFY2(merged.exit_code == 0, qPrintable(merged.err));
  QVERIFY2(merged.err.contains("clusterscope: warning: " + dir.filePath("merged.db") + ": ") &&
               merged.err.contains("dropped for a time past what a trace holds"),
           qPrintable(merged.err));
}

void TestTraceCli::errors_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("message");
  QTest::addRow("no trace subcommand") << QStringList{"trace"} << 2 << "A subcommand is required";
  QTest::addRow("missing store") << QStringList{"trace", "info", "/nonexistent.cstrace"} << 1
                                 << "clusterscope: error: /nonexistent.cstrace: no such file";
  // A name no file system holds said "no such file".
  const QString long_name = QString(5000, 'a') + ".db";
  QTest::addRow("file name too long")
      << QStringList{"trace", "info", long_name} << 1 << long_name + ": File name too long";
  QTest::addRow("import of a file name too long")
      << QStringList{"trace", "import", long_name, "-o", "x.cstrace"} << 1
      << long_name + ": File name too long";
  QTest::addRow("foreign file") << QStringList{"trace", "stats", CS_SOURCE_DIR "/README.md"} << 1
                                << "is not a ClusterScope trace store";
  // Another program's trace, which the import reads: the command that does
  // (it listed the Nsight export's tables, or said "not an SQLite database").
  const QString nsys = kData + "nsys/saxpy-mpi-cuda.sqlite";
  const QString kineto = kData + "kineto/sampled_rank-0.json.gz";
  const QString nsys_said =
      nsys +
      " is not a ClusterScope trace store but an Nsight Systems SQLite export: import it "
      "with `clusterscope trace import " +
      nsys + " -o store.db`";
  const QString kineto_said =
      kineto +
      " is not a ClusterScope trace store but a PyTorch profiler (Kineto) or Chrome JSON "
      "trace: import it with `clusterscope trace import " +
      kineto + " -o store.db`";
  QTest::addRow("stats of an Nsight export")
      << QStringList{"trace", "stats", nsys} << 1 << nsys_said;
  QTest::addRow("info of an Nsight export") << QStringList{"trace", "info", nsys} << 1 << nsys_said;
  QTest::addRow("export of an Nsight export")
      << QStringList{"trace", "export", nsys, "-o", "x.json"} << 1 << nsys_said;
  QTest::addRow("stats of a Kineto trace")
      << QStringList{"trace", "stats", kineto} << 1 << kineto_said;
  QTest::addRow("info of a Kineto trace")
      << QStringList{"trace", "info", kineto} << 1 << kineto_said;
  QTest::addRow("check of a Kineto trace")
      << QStringList{"trace", "info", "--check", kineto} << 1 << kineto_said;
  QTest::addRow("export of a Kineto trace")
      << QStringList{"trace", "export", kineto, "-o", "x.json"} << 1 << kineto_said;
  // A bad option value, as every other (it exited 1, as a failed merge).
  QTest::addRow("bad align") << QStringList{"trace", "merge", "a", "-o", "b", "--align", "sideways"}
                             << 2 << "--align: \"sideways\" is not one of";
  QTest::addRow("bad format") << QStringList{"trace", "export", "a", "-o", "b", "--format", "pdf"}
                              << 2 << "--format";
  QTest::addRow("import nothing") << QStringList{"trace", "import", "-o", "x.cstrace"} << 2
                                  << "files";
  QTest::addRow("import unknown") << QStringList{"trace", "import", CS_SOURCE_DIR "/README.md",
                                                 "-o", "x.cstrace"}
                                  << 1 << "not a trace this build imports";
  // What the file is instead, where that can be told; an output folder that
  // is not there (it said "unable to open database file").
  QTest::addRow("import a folder")
      << QStringList{"trace", "import", CS_SOURCE_DIR "/docs", "-o", "x.cstrace"} << 1
      << "docs: not a trace this build imports (a PyTorch profiler "
         "or Chrome JSON trace, plain or gzip, or an Nsight Systems "
         "SQLite export): it is a folder";
  // A folder missing is made (outputsMakeTheirFolders); one under a file cannot be.
  QTest::addRow("import into a folder under a file")
      << QStringList{"trace", "import", kData + "nsys/saxpy-mpi-cuda.sqlite", "-o",
                     CS_SOURCE_DIR "/README.md/dir/x.cstrace"}
      << 1
      << CS_SOURCE_DIR "/README.md/dir/x.cstrace: cannot create its folder " CS_SOURCE_DIR
                       "/README.md/dir (" CS_SOURCE_DIR "/README.md is a file, not a folder)";
  // A window edge that is no time, or past any trace (both exported every event).
  const QString store = CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db";
  QTest::addRow("window from nan")
      << QStringList{"trace", "export", store, "-o", "x.json", "--from", "nan"} << 1
      << "--from: \"nan\" is not a time";
  QTest::addRow("window past any trace")
      << QStringList{"trace", "export", store, "-o", "x.json", "--to", "99999999999999999999ms"}
      << 1 << "--to: \"99999999999999999999ms\" is longer than any trace";
  QTest::addRow("window before the trace")
      << QStringList{"trace", "export", store, "-o", "x.json", "--from", "-1s"} << 1
      << "--from: \"-1s\" is before the trace's start";
  QTest::addRow("window the wrong way round")
      << QStringList{"trace", "export", store, "-o", "x.json", "--from", "2ms", "--to", "1ms"}
      << 1 << "--to 1ms is not after --from 2ms";
  QTest::addRow("window past the end says the length")
      << QStringList{"trace", "export", store, "-o", "x.json", "--from", "1000s"} << 1
      << "--from 1000s is past the trace's end (the trace lasts ";
  // Both edges past the end wrote a file of no events that no import reads;
  // a bare number is seconds, which a Perfetto user typing microseconds meets.
  QTest::addRow("window wholly past the end")
      << QStringList{"trace", "export", store, "-o", "x.json", "--from", "100s", "--to", "200s"}
      << 1 << "--from 100s is past the trace's end (the trace lasts ";
  QTest::addRow("bare number past the end")
      << QStringList{"trace", "export", store, "-o", "x.csv", "--from", "50000", "--to", "60000"}
      << 1 << "; a time without a unit is in seconds (200ms, 40us)";
  // Options the format has no use for (each was ignored, with exit 0): usage
  // errors, exit 2 (they were refused with exit 1, as a bad store is).
  QTest::addRow("table of a Chrome trace")
      << QStringList{"trace", "export", store, "-o", "x.json", "--table", "breakdown"} << 2
      << "--table applies to CSV exports, not to a Chrome trace export";
  // It read "not to this html all export".
  QTest::addRow("table of a report")
      << QStringList{"trace", "export", store, "-o", "x.html", "--table", "all"} << 2
      << "--table applies to CSV exports, not to an HTML export";
  QTest::addRow("rank of a CSV") << QStringList{"trace", "export", store, "-o",
                                                "x.csv", "--rank", "0"}
                                 << 2 << "--rank applies to Chrome traces, not to a CSV export";
  QTest::addRow("critical path of a report")
      << QStringList{"trace", "export", store, "-o", "x.html", "--critical-path"} << 2
      << "--critical-path applies to Chrome traces, not to an HTML export";
  QTest::addRow("critical path in a file per rank")
      << QStringList{"trace", "export", store, "-o", "x.json", "--critical-path", "--file-per-rank"}
      << 2 << "--critical-path: a path crosses the ranks, so not with --file-per-rank";
  QTest::addRow("statistics of a window the wrong way round")
      << QStringList{"trace", "stats", store, "--from", "2ms", "--to", "1ms"} << 1
      << "--to 1ms is not after --from 2ms";
  QTest::addRow("statistics of a window past the end")
      << QStringList{"trace", "stats", store, "--from", "1000s"} << 1
      << "--from 1000s is past the trace's end (the trace lasts ";
  QTest::addRow("unknown table names them all")
      << QStringList{"trace", "export", store, "-o", "x.csv", "--table", "copies"} << 2
      << "--table: \"copies\" is not one of events, breakdown, kernels, collectives, stragglers, "
         "prediction, api_calls, memory_ops, annotations, all";
  QTest::addRow("files per table beside a device")
      << QStringList{"trace", "export", store, "-o", "/dev/null", "--format", "csv", "--table",
                     "all"}
      << 1 << "/dev/null: --table all writes several files named after -o";
}

void TestTraceCli::errors() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, message);
  const Run r = run_cli(args);
  QVERIFY2(r.exit_code == code, qPrintable(QString("exit %1: %2").arg(r.exit_code).arg(r.err)));
  QVERIFY2(r.err.contains(message), qPrintable(r.err));
  QVERIFY2(r.err.startsWith("clusterscope: error: "), qPrintable(r.err));
}

// An Nsight Systems export cut short (a copy that stopped half way) is named
// so, with its size against what its header promises; it read "not a trace
// this build imports" at any length.
void TestTraceCli::truncatedNsightExportIsNamed() {
  QTemporaryDir dir;
  for (const qint64 size : {qint64{100'000}, qint64{1'000'000}}) {
    const QString cut = dir.filePath(QStringLiteral("cut-%1.sqlite").arg(size));
    QVERIFY(QFile::copy(kData + "nsys/saxpy-mpi-cuda.sqlite", cut));
    QVERIFY(QFile::setPermissions(cut, QFile::ReadOwner | QFile::WriteOwner));
    QVERIFY(QFile::resize(cut, size));
    const Run r = run_cli({"trace", "import", cut, "-o", dir.filePath("out.db")});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains(cut + " is damaged: the file is cut short (" + QString::number(size) +
                            " of 1613824 bytes)"),
             qPrintable(r.err));
  }
}

// A store with a damaged page still analyses; its HTML report says it is
// damaged (it read as a clean report with wrong figures), and so does stderr.
void TestTraceCli::damagedStoreReportSaysSo() {
  QTemporaryDir dir;
  const QString store =
      writable_store(dir, QStringLiteral("gpu/worker-bf16.db"), QStringLiteral("damaged.db"));
  QVERIFY(!store.isEmpty());
  {
    QFile f(store);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek(4096 * 150 + 200));
    QCOMPARE(f.write(QByteArray(600, char(0xff))), qint64{600});
  }
  const QString html = dir.filePath(QStringLiteral("report.html"));
  const Run r = run_cli({"trace", "export", store, "-o", html});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("warning: " + store + " is damaged"), qPrintable(r.err));
  QFile report(html);
  QVERIFY(report.open(QIODevice::ReadOnly));
  QVERIFY(QString::fromUtf8(report.readAll()).contains("<p class=bad>" + store + " is damaged: "));
}

// A recorded prediction whose JSON does not read stopped every analysis:
// stats, the report and the CSV tables all exited 1 over one meta row. The
// run's figures stand, and the prediction's error is said.
void TestTraceCli::unreadablePredictionLeavesTheFigures() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, QStringLiteral("cpu/cpu-engine-dp2.db"),
                                       QStringLiteral("bad-prediction.db"));
  QVERIFY(!store.isEmpty());
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE meta SET value = '{bad json' WHERE key = 'predicted_step'",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    QCOMPARE(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }
  const Run stats = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonObject o = json_of(stats);
  QCOMPARE(o["ranks"].toArray().size(), 2);
  QVERIFY(!o.contains("prediction"));
  QVERIFY2(o["prediction_error"].toString().startsWith(store + ": meta predicted_step: "),
           qPrintable(o["prediction_error"].toString()));
  QVERIFY2(stats.err.contains("clusterscope: warning: " + store + ": meta predicted_step: ") &&
               stats.err.contains("the run's figures are shown without its prediction"),
           qPrintable(stats.err));
  const QString html = dir.filePath("report.html");
  const Run report = run_cli({"trace", "export", store, "-o", html});
  QVERIFY2(report.exit_code == 0, qPrintable(report.err));
  QFile page(html);
  QVERIFY(page.open(QIODevice::ReadOnly));
  QVERIFY(QString::fromUtf8(page.readAll())
              .contains("<p class=bad>" + store + ": meta predicted_step: "));
}

// A damaged page ends SQLite's reads with an error, which the readers took
// for the end of the rows: an export lacked every collective's bytes and
// `stats` its collectives table, each with exit status 0. The page holding
// the event details is zeroed in a real store (a 2-rank CPU engine run).
void TestTraceCli::damagedPagesAreNotReadAsNoRows() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, QStringLiteral("cpu/cpu-engine-dp2.db"),
                                       QStringLiteral("details-zeroed.db"));
  QVERIFY(!store.isEmpty());
  qint64 offset = 0;
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(store.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
             SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM "
                       "sqlite_master WHERE name = 'event_details'",
                       -1, &stmt, nullptr);
    QCOMPARE(sqlite3_step(stmt), SQLITE_ROW);
    offset = (sqlite3_column_int64(stmt, 0) - 1) * sqlite3_column_int64(stmt, 1);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  {
    QFile f(store);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek(offset));
    QCOMPARE(f.write(QByteArray(4096, '\0')), qint64{4096});
  }
  struct Case {
    QStringList args;
    QString output;  // not written
  };
  const QString json = dir.filePath("x.json"), csv = dir.filePath("x.csv");
  for (const Case& c :
       {Case{{"trace", "export", store, "-o", json}, json},
        Case{{"trace", "export", store, "--format", "csv", "--table", "all", "-o", csv},
             dir.filePath("x.events.csv")},
        Case{{"trace", "stats", store}, {}}, Case{{"trace", "compare", store, store}, {}},
        Case{{"trace", "merge", store, "-o", dir.filePath("m.db")}, dir.filePath("m.db")}}) {
    const Run r = run_cli(c.args);
    QVERIFY2(r.exit_code == 1, qPrintable(c.args.join(' ') + ": " + r.err));
    QVERIFY2(r.err.contains(store) && r.err.contains("database disk image is malformed"),
             qPrintable(c.args.join(' ') + ": " + r.err));
    if (!c.output.isEmpty()) QVERIFY2(!QFile::exists(c.output), qPrintable(c.output));
  }
  // The report is made, and says it is of what could be read.
  const QString html = dir.filePath(QStringLiteral("report.html"));
  const Run r = run_cli({"trace", "export", store, "-o", html});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QFile report(html);
  QVERIFY(report.open(QIODevice::ReadOnly));
  QVERIFY(QString::fromUtf8(report.readAll()).contains("<p class=bad>" + store + " is damaged: "));
}

// A damaged page SQLite reads without an error: its bytes become other
// rows, or none. Overwritten inside the event details' leaf, the collectives
// table read 3 all-reduces of 6, and stats, export and compare exited 0.
// The whole store is checked meanwhile: each command prints or writes what
// it read, and fails naming the damage.
void TestTraceCli::damagedPagesReadWithoutAnError() {
  QTemporaryDir dir;
  const QString store = writable_store(dir, QStringLiteral("cpu/cpu-engine-dp2.db"),
                                       QStringLiteral("details-overwritten.db"));
  QVERIFY(!store.isEmpty());
  qint64 offset = 0;
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(store.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
             SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db,
                                "SELECT pageno, pgsize FROM dbstat WHERE name = 'event_details' "
                                "AND pagetype = 'leaf' ORDER BY ncell DESC LIMIT 1",
                                -1, &stmt, nullptr),
             SQLITE_OK);
    QCOMPARE(sqlite3_step(stmt), SQLITE_ROW);
    offset = (sqlite3_column_int64(stmt, 0) - 1) * sqlite3_column_int64(stmt, 1) + 5312;
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  {
    QFile f(store);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek(offset));
    QCOMPARE(f.write(QByteArray(4000, char(0xff))), qint64{4000});
  }
  const QString json = dir.filePath("x.json"), csv = dir.filePath("x.csv");
  for (const QStringList& args :
       {QStringList{"trace", "stats", store}, QStringList{"trace", "stats", store, "--json"},
        QStringList{"trace", "export", store, "-o", json},
        QStringList{"trace", "export", store, "--format", "csv", "-o", csv},
        QStringList{"trace", "compare", store, store}}) {
    const Run r = run_cli(args);
    QVERIFY2(r.exit_code == 1, qPrintable(args.join(' ') + ": " + r.out.right(300) + r.err));
    QVERIFY2(r.err.contains(store + " is damaged: SQLite's check"),
             qPrintable(args.join(' ') + ": " + r.err));
  }
  QVERIFY(QFile::exists(json));  // what could be read is kept, and said to be so
  // A trace sent to the standard output stays one JSON document: the error
  // goes to stderr alone.
  const Run piped = run_cli({"trace", "export", store, "-o", "-", "--json"});
  QCOMPARE(piped.exit_code, 1);
  QJsonParseError parsed{};
  QJsonDocument::fromJson(piped.out.toUtf8(), &parsed);
  QVERIFY2(parsed.error == QJsonParseError::NoError, qPrintable(parsed.errorString()));
  QVERIFY(piped.err.contains(store + " is damaged"));
}

// A store the user may not read says so ("Permission denied"); SQLite's own
// words were only "unable to open database file". As root, the command runs
// as nobody (root reads every file).
void TestTraceCli::unreadableStoreSaysWhy() {
  QTemporaryDir dir;
  const QString store = dir.filePath(QStringLiteral("private.db"));
  QVERIFY(QFile::copy(CS_SOURCE_DIR "/tests/data/cpu/cpu-engine-dp2.db", store));
  QVERIFY(QFile::setPermissions(store, QFileDevice::Permissions{}));
  // The folder open to all: the file itself is what may not be read.
  QVERIFY(QFile::setPermissions(dir.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                                QFileDevice::ExeOwner | QFileDevice::ReadOther |
                                                QFileDevice::ExeOther));
  Run r;
  if (::geteuid() == 0) {
    if (QStandardPaths::findExecutable(QStringLiteral("setpriv")).isEmpty())
      QSKIP("running as root without setpriv: every file reads");
    r = cs::test::run_process(
        QStringLiteral("setpriv"),
        {QStringLiteral("--reuid=65534"), QStringLiteral("--regid=65534"),
         QStringLiteral("--clear-groups"), QStringLiteral(CS_BIN_DIR "/clusterscope"),
         QStringLiteral("trace"), QStringLiteral("info"), store});
  } else {
    r = run_cli({"trace", "info", store});
  }
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(store + ": cannot open: ") && r.err.contains("(Permission denied)"),
           qPrintable(r.err));
}

// A meta row of JSON nested 100000 levels deep (an imported trace can carry
// any): `trace info --json` printed it as JSON and overflowed the stack.
// Past the readers' depth it stays the text it is.
void TestTraceCli::deepMetaIsText() {
  QTemporaryDir dir;
  const QString store =
      writable_store(dir, QStringLiteral("cpu/cpu-engine-dp2.db"), QStringLiteral("deep.db"));
  QVERIFY(!store.isEmpty());
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES('deep_json', ?)", -1,
                       &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, deep.c_str(), int(deep.size()), SQLITE_TRANSIENT);
    QCOMPARE(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  const Run r = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err.left(400)));
  // As a JSON string: {"a": [[[... escaped.
  QVERIFY2(r.out.contains(QStringLiteral("\"deep_json\": \"{\\\"a\\\":[[[[")),
           qPrintable(r.out.left(2000)));
}

// A lane's count in the statistics of a finalized store sizes what the
// analyses reserve: 2^32 events (hundreds of gigabytes) or a negative count
// ended `trace critical-path` with "terminate called" (SIGABRT), and stats,
// export and compare with "internal error: std::bad_alloc". Each names the
// damage now.
void TestTraceCli::laneCountsNoStoreHoldsAreDamage_data() {
  QTest::addColumn<QString>("count");
  QTest::addColumn<QStringList>("command");
  for (const char* count : {"4294967296", "-100"}) {
    QTest::addRow("%s critical-path", count) << count << QStringList{"critical-path"};
    QTest::addRow("%s stats", count) << count << QStringList{"stats", "--json"};
    QTest::addRow("%s report", count) << count << QStringList{"export", "-o", "report.html"};
    QTest::addRow("%s compare", count) << count << QStringList{"compare", "baseline.db"};
    QTest::addRow("%s info", count) << count << QStringList{"info"};
  }
}

void TestTraceCli::laneCountsNoStoreHoldsAreDamage() {
  QFETCH(QString, count);
  QFETCH(QStringList, command);
  QTemporaryDir dir;
  const QString store =
      writable_store(dir, QStringLiteral("cpu/cpu-engine-dp2.db"), QStringLiteral("counts.db"));
  QVERIFY(!store.isEmpty());
  QVERIFY(QFile::copy(store, dir.filePath(QStringLiteral("baseline.db"))));
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
    const QByteArray sql =
        "UPDATE lane_stats SET event_count = " + count.toUtf8() + " WHERE lane = 1";
    QCOMPARE(sqlite3_exec(db, sql.constData(), nullptr, nullptr, nullptr), SQLITE_OK);
    QCOMPARE(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }
  QStringList args{"trace", command.front(), store};
  for (qsizetype i = 1; i < command.size(); ++i)
    args << (command[i].endsWith(".db") || command[i].endsWith(".html") ? dir.filePath(command[i])
                                                                        : command[i]);
  const Run r = run_cli(args);
  QVERIFY2(r.exit_code == 1, qPrintable(QString::number(r.exit_code) + ": " + r.err));
  QVERIFY2(r.err.contains(store + " is damaged: lane 1 counts " + count +
                          " events, but its events table holds 960"),
           qPrintable(r.err));
}

// --table all writes its tables as one set: a failure at the third table (a
// full disk; here the file beside it is taken by a folder) left the two
// before it new and the rest from the earlier export.
void TestTraceCli::csvTablesAreWrittenAsOneSet() {
  QTemporaryDir dir;
  const QString store = dir.filePath("s.db");
  QVERIFY(QFile::copy(CS_SOURCE_DIR "/tests/data/gpu/worker-fp32.db", store));
  QFile::setPermissions(store, QFile::ReadOwner | QFile::WriteOwner);
  const QString out = dir.filePath("t.csv");
  const Run first = run_cli({"trace", "export", store, "-o", out, "--table", "all"});
  QVERIFY2(first.exit_code == 0, qPrintable(first.err));
  auto contents = [&] {
    QMap<QString, QByteArray> tables;
    for (const QString& name : QDir(dir.path()).entryList({"t.*.csv"}, QDir::Files)) {
      QFile f(dir.filePath(name));
      if (f.open(QIODevice::ReadOnly)) tables[name] = f.readAll();
    }
    return tables;
  };
  const QMap<QString, QByteArray> before = contents();
  QVERIFY(before.size() >= 8);
  // The next export is of a window: every table would differ.
  QVERIFY(QDir(dir.path()).mkdir("t.kernels.csv.partial"));
  const Run failed =
      run_cli({"trace", "export", store, "-o", out, "--table", "all", "--steps", "1"});
  QCOMPARE(failed.exit_code, 1);
  QVERIFY2(failed.err.contains(dir.filePath("t.kernels.csv")), qPrintable(failed.err));
  QVERIFY(contents() == before);
  QCOMPARE(QDir(dir.path()).entryList({"*.partial"}, QDir::Files), QStringList{});
  // Once it can be written, the whole set is the window's.
  QDir(dir.path()).rmdir("t.kernels.csv.partial");
  const Run window =
      run_cli({"trace", "export", store, "-o", out, "--table", "all", "--steps", "1"});
  QVERIFY2(window.exit_code == 0, qPrintable(window.err));
  const QMap<QString, QByteArray> after = contents();
  QCOMPARE(after.keys(), before.keys());
  QVERIFY(after["t.events.csv"] != before["t.events.csv"]);
  QVERIFY(after["t.breakdown.csv"] != before["t.breakdown.csv"]);
}

QTEST_GUILESS_MAIN(TestTraceCli)
#include "tst_trace_cli.moc"
