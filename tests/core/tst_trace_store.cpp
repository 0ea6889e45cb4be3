// The trace store written by TraceWriter and read back by TraceReader: every
// record round trips; concurrent writers lose nothing; the timeline query
// folds to about a span per pixel and agrees with a plain computation over
// all events; a writer killed mid-run (a real child process, SIGKILL) leaves
// a store that opens with everything it had committed; a failing write names
// the file; foreign, truncated and newer files are refused by name.

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file_beside.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "core/trace_store_internal.h"
#include "core/trace_writer.h"
#include "trace_test_util.h"

using namespace cs::trace;
using namespace trace_test;

namespace {

std::string temp_path(const QTemporaryDir& dir, const char* name) {
  return dir.filePath(name).toStdString();
}

std::unique_ptr<TraceReader> open_reader(const std::string& path, bool repair = true) {
  auto r = TraceReader::open(path, TraceReader::Options{repair});
  if (!r) qFatal("%s", r.message().c_str());
  return std::move(r).value();
}

void exec_sql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  QVERIFY2(rc == SQLITE_OK, message.c_str());
}

// The spans the documented folding rule gives when it sees every event.
std::vector<Span> reference_spans(const std::vector<Placed>& events, std::int64_t t0,
                                  std::int64_t t1, int pixels, int min_px = 3) {
  const std::int64_t pixel = std::max<std::int64_t>(1, (t1 - t0 + pixels - 1) / pixels);
  const std::int64_t wide = pixel * min_px;
  struct Pending {
    bool open = false;
    std::int64_t longest = 0;
    Span span;
  };
  std::vector<Pending> pending;
  std::vector<Span> out;
  auto flush = [&](std::size_t d) {
    if (pending[d].open) out.push_back(pending[d].span);
    pending[d].open = false;
  };
  for (const Placed& p : events) {
    const Event& e = p.event;
    if (e.start_ns >= t1 || !(e.end_ns > t0 || e.start_ns >= t0)) continue;
    const auto d = static_cast<std::size_t>(p.depth);
    if (pending.size() <= d) pending.resize(d + 1);
    Span s{e.start_ns, e.end_ns, 1, 0, e.name, e.kind, e.category, p.depth};
    if (e.end_ns - e.start_ns >= wide) {
      flush(d);
      out.push_back(s);
      continue;
    }
    Pending& f = pending[d];
    if (f.open && e.start_ns < f.span.end_ns + pixel) {
      f.span.end_ns = std::max(f.span.end_ns, e.end_ns);
      f.span.count += 1;
      if (e.end_ns - e.start_ns > f.longest) {
        f.longest = e.end_ns - e.start_ns;
        f.span.name = e.name;
        f.span.kind = e.kind;
        f.span.category = e.category;
      }
      continue;
    }
    flush(d);
    f.open = true;
    f.span = s;
    f.longest = e.end_ns - e.start_ns;
  }
  for (std::size_t d = 0; d < pending.size(); ++d)
    flush(d);
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) {
    return a.depth != b.depth ? a.depth < b.depth : a.start_ns < b.start_ns;
  });
  return out;
}

QString describe(const Span& s) {
  return QString("[%1, %2) x%3 depth %4 name %5")
      .arg(s.start_ns)
      .arg(s.end_ns)
      .arg(s.count)
      .arg(s.depth)
      .arg(s.name.value);
}

struct ChildRun {
  QProcess process;
  std::int64_t committed = 0;
  QString output;

  void start(const QStringList& args) {
    process.setProcessChannelMode(QProcess::SeparateChannels);
    process.start(CS_TRACE_WRITER_CHILD, args);
    if (!process.waitForStarted(10000)) qFatal("cannot start the writer child");
  }
  // Reads "committed N" lines until at least `want` events are committed.
  bool wait_committed(std::int64_t want, int timeout_ms = 60000) {
    QElapsedTimer timer;
    timer.start();
    while (committed < want && timer.elapsed() < timeout_ms) {
      if (!process.canReadLine() && !process.waitForReadyRead(1000)) {
        if (process.state() != QProcess::Running) break;
        continue;
      }
      while (process.canReadLine()) {
        const QString line = QString::fromUtf8(process.readLine()).trimmed();
        output += line + "\n";
        if (line.startsWith("committed ")) committed = line.mid(10).toLongLong();
      }
    }
    return committed >= want;
  }
  void kill_hard() {
    ::kill(static_cast<pid_t>(process.processId()), SIGKILL);
    process.waitForFinished(10000);
  }
};

}  // namespace

class TestTraceStore : public QObject {
  Q_OBJECT

 private slots:
  void enumNames();
  void storeCutShortWhileOpen();
  void partialStoresOfDeadBuildsAreRemoved();
  void roundTrip();
  void kernelLaunchesRoundTrip();
  void finishedStoreLeavesNoFilesBeside();
  void worldSizeOnlyAsAWholeNumber_data();
  void worldSizeOnlyAsAWholeNumber();
  void runStartOnlyAsAWholeNumber_data();
  void runStartOnlyAsAWholeNumber();
  void writerPidOnlyAsAWholeNumber_data();
  void writerPidOnlyAsAWholeNumber();
  void concurrentWriters();
  void spansMatchReference_data();
  void spansMatchReference();
  void spansFoldToPixels_data();
  void spansFoldToPixels();
  void counterViewMatchesReference_data();
  void counterViewMatchesReference();
  void eventAtIsInnermost();
  void levelGivenUpAtTheLastTiles();
  void orderOfArrivalDoesNotMatter();
  void findEvents();
  void liveStoreOpensReadOnly();
  void killedWriterKeepsCommitted();
  void writerEndedButNotReapedIsNotAlive();
  void storeWrittenOnAnotherHostIsNotRepaired();
  void crashedStoreOnAReadOnlyMount();
  void writeFailureNamesTheFile();
  void failedCreateLeavesNothing_data();
  void failedCreateLeavesNothing();
  void unmadeStoresAreTold();
  void corruptPagesAreReported();
  void notCreatedOverAFolder();
  void chunkCountsThatCannotBe_data();
  void chunkCountsThatCannotBe();
  void chunksThatDecodeToOtherEvents_data();
  void chunksThatDecodeToOtherEvents();
  void rowsNoWriterWrote_data();
  void rowsNoWriterWrote();
  void notReplacedWhenNewer_data();
  void notReplacedWhenNewer();
  void notReplacedWhileLocked_data();
  void notReplacedWhileLocked();
  void checkNamesEventRowsNoWriterWrote_data();
  void checkNamesEventRowsNoWriterWrote();
  void version1StoreIsMigrated();
  void damagedVersion1StoreIsNotWritten();
  void unfinishedFilesGoOnASignal_data();
  void unfinishedFilesGoOnASignal();
  void fileBesideKeepsAReadOnlyFile();
  void filesWrittenTogetherOrNotAtAll();
  void refusesWhatIsNotAStore_data();
  void refusesWhatIsNotAStore();
  void readsPastAJournalLeftBeside_data();
  void readsPastAJournalLeftBeside();
  void stepEndingBeforeItStartsIsDamage();
  void writerDroppedByAnExceptionSaysFailed();
};

void TestTraceStore::enumNames() {
  for (int k = 0; k <= static_cast<int>(EventKind::overhead); ++k) {
    const auto kind = static_cast<EventKind>(k);
    QCOMPARE(event_kind_from_string(to_string(kind)), std::optional<EventKind>(kind));
  }
  for (int c = 0; c <= static_cast<int>(Collective::send_recv); ++c) {
    const auto coll = static_cast<Collective>(c);
    QCOMPARE(collective_from_string(to_string(coll)), std::optional<Collective>(coll));
  }
  QCOMPARE(category_from_string("communication"), std::optional<Category>(Category::communication));
  QCOMPARE(lane_kind_from_string("gpu_stream"), std::optional<LaneKind>(LaneKind::gpu_stream));
  QVERIFY(!data_type_from_string("float128"));
  QCOMPARE(data_type_bytes(DataType::bf16), 2);
  QCOMPARE(data_type_bytes(DataType::fp32), 4);
  QCOMPARE(data_type_bytes(DataType::fp8_e4m3), 1);
}

// The meta "world_size" is the run's rank count (learning groups runs by
// it) only as a whole number from the ranks recorded up: "2abc" was read as
// 2, and a world of a billion ranks taken as it stood.
void TestTraceStore::worldSizeOnlyAsAWholeNumber_data() {
  QTest::addColumn<QString>("meta");
  QTest::addColumn<int>("world_size");
  QTest::addRow("recorded") << "4" << 4;
  QTest::addRow("none") << "" << 2;
  QTest::addRow("text after the number") << "2abc" << 2;
  QTest::addRow("fewer than the ranks recorded") << "1" << 2;
  QTest::addRow("zero") << "0" << 2;
  QTest::addRow("negative") << "-4" << 2;
  QTest::addRow("a billion") << "1000000000" << 2;
  QTest::addRow("past an int") << "99999999999999999999" << 2;
}

void TestTraceStore::worldSizeOnlyAsAWholeNumber() {
  QFETCH(QString, meta);
  QFETCH(int, world_size);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "world.cstrace");
  {
    auto created = TraceWriter::create(path, RunInfo{"world", "test"});
    QVERIFY2(created, created ? "" : created.message().c_str());
    TraceWriter& w = **created;
    w.add_rank({0, "node-01", "CPU", 1, 0, false});
    w.add_rank({1, "node-01", "CPU", 2, 0, false});
    if (!meta.isEmpty()) w.set_meta("world_size", meta.toStdString());
    QVERIFY(w.close("complete"));
  }
  auto r = open_reader(path);
  QCOMPARE(r->world_size(), world_size);
}

// The meta "start_utc_ns" is read only as a whole number (it may be
// negative): "123abc" was read as 123.
void TestTraceStore::runStartOnlyAsAWholeNumber_data() {
  QTest::addColumn<QString>("meta");
  QTest::addColumn<qint64>("start_utc_ns");
  QTest::addRow("recorded") << "1717000000123456789" << qint64{1'717'000'000'123'456'789};
  QTest::addRow("before 1970") << "-5" << qint64{-5};
  QTest::addRow("none") << "" << qint64{0};
  QTest::addRow("text after the number") << "123abc" << qint64{0};
  QTest::addRow("space before the number") << " 42" << qint64{0};
  QTest::addRow("past 64 bits") << "99999999999999999999" << qint64{0};
}

void TestTraceStore::runStartOnlyAsAWholeNumber() {
  QFETCH(QString, meta);
  QFETCH(qint64, start_utc_ns);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "start.cstrace");
  {
    auto created = TraceWriter::create(path, RunInfo{"start", "test"});
    QVERIFY2(created, created ? "" : created.message().c_str());
    QVERIFY((*created)->close("complete"));
  }
  exec_sql(path, qPrintable("UPDATE meta SET value = '" + meta + "' WHERE key = 'start_utc_ns'"));
  QCOMPARE(open_reader(path)->run().start_utc_ns, start_utc_ns);
}

// A store left "writing" is its writer's while the process that the
// writer's "host:pid:start" names is alive, the pid read whole: "<pid>abc"
// was read as the pid, so the store was taken as still being written and
// never repaired.
void TestTraceStore::writerPidOnlyAsAWholeNumber_data() {
  QTest::addColumn<QString>("before");
  QTest::addColumn<QString>("after");
  QTest::addColumn<bool>("alive");
  QTest::addRow("this process") << ""
                                << "" << true;
  QTest::addRow("text after the pid") << ""
                                      << "abc" << false;
  QTest::addRow("a sign before the pid") << "+"
                                         << "" << false;
  QTest::addRow("a space before the pid") << " "
                                          << "" << false;
}

void TestTraceStore::writerPidOnlyAsAWholeNumber() {
  QFETCH(QString, before);
  QFETCH(QString, after);
  QFETCH(bool, alive);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "writer.cstrace");
  {
    auto created = TraceWriter::create(path, RunInfo{"writer", "test"});
    QVERIFY2(created, created ? "" : created.message().c_str());
    QVERIFY((*created)->close("complete"));
  }
  // "host:pid:start" with the pid changed.
  const QString identity = QString::fromStdString(cs::trace::store::this_process_identity());
  const qsizetype last = identity.lastIndexOf(':');
  const qsizetype middle = identity.lastIndexOf(':', last - 1);
  const QString writer = identity.left(middle + 1) + before +
                         identity.mid(middle + 1, last - middle - 1) + after + identity.mid(last);
  exec_sql(path, qPrintable("UPDATE meta SET value = '" + writer + "' WHERE key = 'writer'"));
  exec_sql(path, "UPDATE meta SET value = 'writing' WHERE key = 'status'");
  exec_sql(path, "UPDATE meta SET value = '0' WHERE key = 'finalized'");
  auto state = inspect_store(path);
  QVERIFY2(state, state ? "" : state.message().c_str());
  QCOMPARE(state->status, std::string("writing"));
  QCOMPARE(state->writer_alive, alive);
}

// A finished store leaves write-ahead logging: reading it, even without
// write access, leaves no -wal or -shm file beside it.
void TestTraceStore::finishedStoreLeavesNoFilesBeside() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "finished.cstrace");
  {
    auto created = TraceWriter::create(path, RunInfo{"finished", "test"});
    QVERIFY2(created, created ? "" : created.message().c_str());
    TraceWriter& w = **created;
    const LaneId lane = w.add_lane(0, LaneKind::cpu_thread, "main thread", 0);
    Event e;
    e.lane = lane;
    e.kind = EventKind::cpu_op;
    e.start_ns = 100;
    e.end_ns = 200;
    e.name = w.intern("gemm");
    w.add(e);
    QVERIFY(w.close("complete"));
  }
  auto beside = [&] {
    QStringList found;
    for (const char* suffix : {"-wal", "-shm"}) {
      if (std::filesystem::exists(path + suffix)) found << suffix;
    }
    return found.join(", ");
  };
  QVERIFY2(beside().isEmpty(), qPrintable(beside()));
  {
    auto r = open_reader(path);
    QCOMPARE(r->event_count(), std::int64_t{1});
    QCOMPARE(r->meta("status").value_or(""), std::string("complete"));
  }
  QVERIFY2(beside().isEmpty(), qPrintable(beside()));
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* mode = nullptr;
  QCOMPARE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &mode, nullptr), SQLITE_OK);
  QCOMPARE(sqlite3_step(mode), SQLITE_ROW);
  const QString journal = QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(mode, 0)));
  sqlite3_finalize(mode);
  sqlite3_close(db);
  QCOMPARE(journal, QString("delete"));
}

// The partial store of a build killed before it ended (kill -9 during a
// merge) is removed by the next build beside it; one of a live process
// (another build) is left alone.
void TestTraceStore::partialStoresOfDeadBuildsAreRemoved() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "built.cstrace");
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  QVERIFY(dead > 0);
  QCOMPARE(::waitpid(dead, nullptr, 0), dead);
  const std::string stale = path + "." + std::to_string(dead) + ".partial";
  const std::string live = path + "." + std::to_string(::getppid()) + ".partial";
  for (const std::string& file : {stale, stale + "-wal", live})
    std::ofstream(file) << "partial";
  const cs::Status built = build_store_then_replace(path, [](const std::string& temporary) {
    auto w = TraceWriter::create(temporary, RunInfo{"built", "test"});
    return w ? (*w)->close() : cs::Status(w.error());
  });
  QVERIFY2(built, built.message().c_str());
  QVERIFY(!std::filesystem::exists(stale));
  QVERIFY(!std::filesystem::exists(stale + "-wal"));
  QVERIFY(std::filesystem::exists(live));
}

void TestTraceStore::roundTrip() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "run.cstrace");
  RunInfo run;
  run.title = "round trip";
  run.source = "cuda-engine";
  run.start_utc_ns = 1'717'000'000'123'456'789;
  run.clock = "CLOCK_REALTIME";
  run.host = "node-01";
  run.command_line = "clusterscope run --plan p.json";
  run.plan_json = R"({"cluster":"c"})";
  run.tool_versions_json = R"({"cuda":"13.0"})";
  {
    auto created = TraceWriter::create(path, run);
    QVERIFY2(created, created ? "" : created.message().c_str());
    TraceWriter& w = **created;
    w.add_rank({1, "node-02", "NVIDIA H200 (GPU 1)", 4242, -1500, true});
    w.add_rank({0, "node-01", "NVIDIA H200 (GPU 0)", 4241, 0, true});
    const LaneId s0 = w.add_lane(0, LaneKind::gpu_stream, "stream 7", 2);
    const LaneId c0 = w.add_lane(0, LaneKind::cpu_thread, "main thread", 1);
    QCOMPARE(w.add_lane(0, LaneKind::gpu_stream, "stream 7", 2), s0);  // the same lane again
    const LaneId s1 = w.add_lane(1, LaneKind::gpu_stream, "stream 7", 0);
    const StringId gemm = w.intern("ampere_sgemm_128x64_nn");
    QCOMPARE(w.intern("ampere_sgemm_128x64_nn"), gemm);
    QCOMPARE(w.intern(""), StringId{0});
    const StringId nccl = w.intern("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    const StringId launch = w.intern("cudaLaunchKernel");

    Event k;
    k.lane = s0;
    k.kind = EventKind::kernel;
    k.start_ns = 2'000'000'000;
    k.end_ns = 2'000'050'000;
    k.name = gemm;
    k.correlation = 11;
    k.flops = 2.5e9;
    k.step = 3;
    w.add(k);
    Event c = k;
    c.kind = EventKind::collective;
    c.category = Category::communication;
    c.start_ns = 2'000'060'000;
    c.end_ns = 2'000'160'000;
    c.name = nccl;
    c.correlation = 12;
    c.flops = 0;
    c.bytes = 64 << 20;
    c.collective = Collective::all_reduce;
    c.dtype = DataType::bf16;
    c.count = 32 << 20;
    c.group_size = 8;
    w.add(c);
    Event a;
    a.lane = c0;
    a.kind = EventKind::api_call;
    a.category = Category::other;
    a.start_ns = 1'999'990'000;
    a.end_ns = 1'999'995'000;
    a.name = launch;
    a.correlation = 11;
    w.add(a);
    Event stray = a;  // a lane this writer never made: dropped and counted, not a crash
    stray.lane = LaneId{4'000'000'000u};
    w.add(stray);
    // Times past +-kTraceTimeLimitNs: a span of two overflows the readers.
    Event far = a;
    far.end_ns = kTraceTimeLimitNs;
    w.add(far);
    far.start_ns = -kTraceTimeLimitNs;
    far.end_ns = 0;
    w.add(far);
    Event backwards = a;  // an end before its start is stored as a zero-length event
    backwards.start_ns = 2'000'100'000;
    backwards.end_ns = 2'000'000'000;
    w.add(backwards);
    Event other = k;
    other.lane = s1;
    w.add(other);
    w.add(StepMetrics{0, 3, 1'999'000'000, 2'001'000'000, 2.75, 4096, 65536});
    // A diverged step's NaN loss and a NaN sample: SQLite would store NULL,
    // the insert fail, and the batch's events go with it. Dropped, counted.
    w.add(StepMetrics{0, 4, 2'001'000'000, 2'002'000'000, std::nan(""), 4096, 65536});
    w.add(CounterSample{0, w.intern("gpu_memory_used"), 2'000'050'000, std::nan("")});
    w.add(CounterSample{0, w.intern("gpu_memory_used"), 2'000'000'000, 1.5e10});
    w.add(CounterSample{0, w.intern("gpu_memory_used"), 2'000'100'000, 1.6e10});
    // Samples at times no trace holds (a damaged source): their span with
    // the others' overflowed the timeline's range. Dropped, counted.
    w.add(CounterSample{0, w.intern("gpu_memory_used"), INT64_MAX - 1, 1.7e10});
    w.add(CounterSample{0, w.intern("gpu_memory_used"), INT64_MIN, 1.8e10});
    w.set_meta("world_size", "2");
    const cs::Status closed = w.close("complete");
    QVERIFY2(closed, closed.message().c_str());
    QVERIFY(w.close());  // a second close reports the first one's result
  }

  auto state = inspect_store(path);
  QVERIFY2(state, state ? "" : state.message().c_str());
  QCOMPARE(state->status, std::string("complete"));
  QVERIFY(state->finalized);
  QVERIFY(!state->writer_alive);
  QCOMPARE(state->events, 5);
  QCOMPARE(state->schema_version, kSchemaVersion);

  auto r = open_reader(path);
  const RunInfo back = r->run();
  QCOMPARE(back.title, run.title);
  QCOMPARE(back.source, run.source);
  QCOMPARE(back.start_utc_ns, run.start_utc_ns);
  QCOMPARE(back.clock, run.clock);
  QCOMPARE(back.host, run.host);
  QCOMPARE(back.command_line, run.command_line);
  QCOMPARE(back.plan_json, run.plan_json);
  QCOMPARE(back.tool_versions_json, run.tool_versions_json);
  QCOMPARE(r->world_size(), 2);
  QCOMPARE(r->meta("events_with_end_before_start"), std::optional<std::string>("1"));
  QCOMPARE(r->meta("events_dropped_with_unknown_lane"), std::optional<std::string>("1"));
  QCOMPARE(r->meta("events_dropped_outside_the_time_a_trace_holds"), std::optional<std::string>("2"));
  QCOMPARE(r->meta("steps_and_samples_dropped_with_nan"), std::optional<std::string>("2"));
  QCOMPARE(r->meta("samples_dropped_outside_the_time_a_trace_holds"),
           std::optional<std::string>("2"));

  QCOMPARE(r->ranks().size(), std::size_t{2});
  QCOMPARE(r->ranks()[1].host, std::string("node-02"));
  QCOMPARE(r->ranks()[1].clock_offset_ns, -1500);
  QVERIFY(r->ranks()[1].clock_offset_measured);
  QCOMPARE(r->ranks()[1].pid, 4242);

  QCOMPARE(r->lanes().size(), std::size_t{3});
  const auto lanes0 = r->lanes_of(0);
  QCOMPARE(lanes0.size(), std::size_t{2});
  QCOMPARE(lanes0[0].name, std::string("main thread"));  // sort index 1 before 2
  QCOMPARE(lanes0[1].name, std::string("stream 7"));
  QCOMPARE(lanes0[1].event_count, 2);
  QCOMPARE(lanes0[1].first_ns, 2'000'000'000);
  QCOMPARE(lanes0[1].last_ns, 2'000'160'000);
  QCOMPARE(lanes0[1].max_duration_ns, 100'000);
  QCOMPARE(r->event_count(), 5);

  const auto found = r->find_events("AllReduce", NameMatch::substring, 10);
  QVERIFY(found);
  QCOMPARE(found->size(), std::size_t{1});
  const Event& c = found->front().event;
  QCOMPARE(c.kind, EventKind::collective);
  QCOMPARE(c.category, Category::communication);
  QCOMPARE(c.bytes, std::int64_t{64} << 20);
  QCOMPARE(c.collective, Collective::all_reduce);
  QCOMPARE(c.dtype, DataType::bf16);
  QCOMPARE(c.count, std::int64_t{32} << 20);
  QCOMPARE(c.group_size, 8);
  QCOMPARE(c.peer, -1);
  QCOMPARE(c.correlation, 12);
  QCOMPARE(found->front().rank, 0);
  QCOMPARE(r->string(c.name), std::string("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));

  const auto gemm = r->find_events("ampere_sgemm_128x64_nn", NameMatch::exact, 10, 0);
  QVERIFY(gemm);
  QCOMPARE(gemm->size(), std::size_t{1});
  QCOMPARE(gemm->front().event.flops, 2.5e9);
  QCOMPARE(gemm->front().event.step, 3);
  const auto by_id = r->event(gemm->front().id);
  QVERIFY(by_id);
  QCOMPARE(by_id->event.start_ns, 2'000'000'000);
  QVERIFY(!r->event(999));
  QCOMPARE(r->find_events("ampere_sgemm_128x64_nn", NameMatch::exact, 10)->size(), std::size_t{2});
  QVERIFY(r->find_events("AMPERE", NameMatch::substring, 10)->size() == 2);  // case-insensitive
  QVERIFY(r->find_events("100%", NameMatch::substring, 10)->empty());        // % is literal

  // A kernel is found by the short name the CLI's tables show, as by its
  // own (the GPU check's fp32 run): the short one found nothing.
  {
    const std::string copy = temp_path(dir, "fp32.db");
    std::filesystem::copy_file(CS_DATA_DIR "/gpu/worker-fp32.db", copy);
    auto real = TraceReader::open(copy);
    QVERIFY2(real, real ? "" : real.message().c_str());
    const auto by_short =
        (*real)->find_events("cs::worker::add_bias_kernel<float>", NameMatch::substring, 100000);
    const auto by_whole = (*real)->find_events(
        "void cs::worker::(anonymous namespace)::add_bias_kernel<float>(float*, float const*, int, "
        "int)",
        NameMatch::exact, 100000);
    QVERIFY(by_short && by_whole);
    QVERIFY(!by_whole->empty());
    QCOMPARE(by_short->size(), by_whole->size());
  }

  const auto steps = r->steps();
  QVERIFY(steps);
  QCOMPARE(steps->size(), std::size_t{1});
  QCOMPARE(steps->front().loss, 2.75);
  QCOMPARE(steps->front().tokens, 4096.0);
  const auto series = r->counter_series();
  QVERIFY(series);
  QCOMPARE(series->size(), std::size_t{1});
  QCOMPARE(r->string(series->front().name), std::string("gpu_memory_used"));
  const auto samples = r->counters(0, series->front().name);
  QVERIFY(samples);
  QCOMPARE(samples->size(), std::size_t{2});
  QCOMPARE(samples->back().value, 1.6e10);

  const TimeRange range = r->time_range();
  QCOMPARE(range.start_ns, 1'999'990'000);
  QCOMPARE(range.end_ns, 2'000'160'000);
}

void TestTraceStore::concurrentWriters() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "threads.cstrace");
  WriterOptions options;
  options.flush_rows = 4096;  // many batches while the threads write
  options.flush_interval = std::chrono::milliseconds(5);
  options.max_buffered_rows = 8192;
  auto created = TraceWriter::create(path, RunInfo{}, options);
  QVERIFY(created);
  TraceWriter& w = **created;
  constexpr int kThreads = 3;
  constexpr int kPerThread = 60000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w, t] {
      const LaneId lane = w.add_lane(0, LaneKind::cpu_thread, "thread " + std::to_string(t), t);
      std::int64_t time = 1'000'000;
      for (int i = 0; i < kPerThread; ++i) {
        Event e;
        e.lane = lane;
        e.kind = EventKind::cpu_op;
        e.start_ns = time;
        e.end_ns = time + 500;
        e.name = w.intern("op_" + std::to_string(i % 97));  // all threads intern the same names
        e.correlation = i;
        w.add(e);
        time += 1000;
        if (i % 20000 == 0) QVERIFY(w.flush());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  QVERIFY(w.close());
  auto r = open_reader(path);
  QCOMPARE(r->event_count(), kThreads * kPerThread);
  for (const LaneInfo& l : r->lanes()) {
    QCOMPARE(l.event_count, kPerThread);
    QCOMPARE(l.last_ns - l.first_ns, std::int64_t{kPerThread} * 1000 - 500);
  }
  // 97 names, each interned once whatever the thread.
  std::set<std::string> names;
  QVERIFY(r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    names.insert(r->string(e.event.name));
    return true;
  }));
  QCOMPARE(names.size(), std::size_t{97});
  QCOMPARE(*r->find_string("op_96"), StringId{97});
}

// A kernel's launch stays with its event: through batches whose events
// the writer reorders (ids follow time within a lane, not arrival), on the
// point reads, not on the scans; events without one have none. A row no
// launch could be (an edited store) is not shown as one, and a store
// written before launches were kept (no table) reads as having none.
void TestTraceStore::kernelLaunchesRoundTrip() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "launches.cstrace");
  WriterOptions options;
  options.flush_rows = 7;                     // several batches, each reordered
  std::map<std::int64_t, KernelLaunch> sent;  // by start time
  {
    auto w = TraceWriter::create(path, RunInfo{"launches", "test"}, options);
    QVERIFY2(w, w ? "" : w.message().c_str());
    (*w)->add_rank({0, "host", "GPU", 1, 0, false});
    // Three lanes taking turns: the writer sorts each batch by lane, then time.
    const LaneId streams[] = {(*w)->add_lane(0, LaneKind::gpu_stream, "GPU 0 stream 7"),
                              (*w)->add_lane(0, LaneKind::gpu_stream, "GPU 0 stream 13"),
                              (*w)->add_lane(0, LaneKind::gpu_stream, "GPU 0 stream 21")};
    const StringId name = (*w)->intern("gemm");
    for (int i = 0; i < 40; ++i) {
      // Each group of 5 arrives backwards in time.
      const std::int64_t start = (i / 5 * 5 + 4 - i % 5) * 1000;
      const Event e{streams[i % 3], EventKind::kernel, Category::compute, start, start + 500, name};
      if (i % 4 == 1) {
        // Events the writer drops, with launches, between the kept ones: an
        // unknown lane, a time past what a store holds.
        KernelLaunch dropped;
        dropped.grid[0] = dropped.grid[1] = dropped.grid[2] = 7;
        dropped.block[0] = dropped.block[1] = dropped.block[2] = 7;
        (*w)->add(Event{LaneId{999}, EventKind::kernel, Category::compute, 0, 1, name}, dropped);
        (*w)->add(Event{streams[0], EventKind::kernel, Category::compute, INT64_MAX / 2,
                        INT64_MAX / 2 + 1, name},
                  dropped);
      }
      if (i % 3 == 2) {
        (*w)->add(e);  // no launch
        continue;
      }
      KernelLaunch l;
      l.grid[0] = 100 + i;
      l.grid[1] = 2;
      l.grid[2] = 1;
      l.block[0] = 256;
      l.block[1] = l.block[2] = 1;
      l.registers_per_thread = i;
      l.shared_memory_bytes = 1024 * i;
      l.dynamic_shared_memory_bytes = i % 2 ? 512 : -1;
      sent[start] = l;
      (*w)->add(e, l);
    }
    QVERIFY((*w)->close());
  }
  auto r = open_reader(path);
  int with = 0, without = 0;
  std::vector<std::int64_t> ids;
  QVERIFY(r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    if (e.launch) qFatal("a scan read a launch");
    ids.push_back(e.id);
    return true;
  }));
  QCOMPARE(ids.size(), std::size_t{40});
  for (const std::int64_t id : ids) {
    auto e = r->event(id);
    QVERIFY2(e, e ? "" : e.message().c_str());
    const auto it = sent.find(e->event.start_ns);
    if (it == sent.end()) {
      QVERIFY2(!e->launch, qPrintable(QString::number(e->event.start_ns)));
      ++without;
      continue;
    }
    QVERIFY2(
        e->launch && *e->launch == it->second,
        qPrintable(QString("event at %1: %2")
                       .arg(e->event.start_ns)
                       .arg(e->launch ? QString::fromStdString(launch_text(*e->launch)) : "none")));
    auto alone = r->kernel_launch(id);
    QVERIFY(alone && *alone && **alone == it->second);
    ++with;
  }
  QCOMPARE(with, int(sent.size()));
  QCOMPARE(without, 40 - int(sent.size()));
  QCOMPARE(launch_text(sent.at(0)),
           std::string("grid 104 x 2 x 1, block 256 x 1 x 1 (53.2 k threads), 4 registers per "
                       "thread, 4.00 KiB shared memory per block"));
  QCOMPARE(launch_text(sent.at(7000)),
           std::string("grid 107 x 2 x 1, block 256 x 1 x 1 (54.8 k threads), 7 registers per "
                       "thread, 7.00 KiB shared memory per block (512 B dynamic)"));

  // Rows no launch could be, and then no table at all.
  const std::int64_t edited = ids.front();
  r.reset();
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "UPDATE kernel_launches SET grid_y = 0 WHERE event_id = " + std::to_string(edited);
    QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  r = open_reader(path);
  auto bad = r->kernel_launch(edited);
  QVERIFY(bad && !*bad);
  r.reset();
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "DROP TABLE kernel_launches", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  r = open_reader(path);
  auto older = r->event(ids.back());
  QVERIFY2(older, older ? "" : older.message().c_str());
  QVERIFY(!older->launch);
}

void TestTraceStore::spansMatchReference_data() {
  QTest::addColumn<int>("pattern");
  QTest::addColumn<int>("events");
  QTest::addColumn<double>("window_fraction");
  QTest::addColumn<double>("window_offset");
  QTest::addColumn<int>("pixels");
  // Windows at 1-500 ns per pixel read raw events.
  QTest::addRow("uniform, tiny window") << int(Pattern::uniform) << 20000 << 1e-5 << 0.5 << 1000;
  QTest::addRow("uniform, 0.1%%") << int(Pattern::uniform) << 20000 << 1e-3 << 0.3 << 2000;
  QTest::addRow("nested, tiny") << int(Pattern::nested) << 20000 << 1e-5 << 0.5 << 800;
  QTest::addRow("nested, 0.05%%") << int(Pattern::nested) << 20000 << 5e-4 << 0.77 << 2000;
  QTest::addRow("bursty, 0.01%%") << int(Pattern::bursty) << 20000 << 1e-4 << 0.2 << 2000;
  QTest::addRow("small lane, whole") << int(Pattern::nested) << 500 << 1.0 << 0.0 << 300;
  QTest::addRow("small lane, middle") << int(Pattern::uniform) << 1500 << 0.3 << 0.4 << 50;
}

// Where the query reads raw events, it must give exactly what the folding rule
// gives over all events (the level of detail is checked by invariants below).
void TestTraceStore::spansMatchReference() {
  QFETCH(int, pattern);
  QFETCH(int, events);
  QFETCH(double, window_fraction);
  QFETCH(double, window_offset);
  QFETCH(int, pixels);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "spans.cstrace");
  WriterOptions options;
  options.flush_rows = 3000;  // many segments
  const Written w = write_store(path, {static_cast<Pattern>(pattern)}, events, options);
  auto r = open_reader(path);
  const LaneInfo* lane = r->lane(w.lanes[0]);
  QVERIFY(lane);
  const auto all = placed(w, w.lanes[0]);
  const std::int64_t span = lane->last_ns - lane->first_ns;
  const std::int64_t t0 = lane->first_ns + static_cast<std::int64_t>(span * window_offset);
  const std::int64_t t1 =
      t0 + std::max<std::int64_t>(1, static_cast<std::int64_t>(span * window_fraction));
  if (events >= 2048) QVERIFY2((t1 - t0) / pixels < 1024, "this row must read raw events");
  auto got = r->spans(w.lanes[0], t0, t1, pixels);
  QVERIFY2(got, got ? "" : got.message().c_str());
  const auto want = reference_spans(all, t0, t1, pixels);
  QCOMPARE(got->size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Span& g = (*got)[i];
    const Span& e = want[i];
    QVERIFY2(g.start_ns == e.start_ns && g.end_ns == e.end_ns && g.count == e.count &&
                 g.depth == e.depth,
             qPrintable(QString("span %1: got %2, want %3").arg(i).arg(describe(g), describe(e))));
    if (g.count == 1) QVERIFY(g.event_id > 0);
  }
  QCOMPARE(lane->max_depth,
           all.empty() ? 0 : std::max_element(all.begin(), all.end(), [](auto& a, auto& b) {
                               return a.depth < b.depth;
                             })->depth);
}

void TestTraceStore::counterViewMatchesReference_data() {
  QTest::addColumn<double>("window_offset");
  QTest::addColumn<double>("window_fraction");
  QTest::addColumn<int>("pixels");
  QTest::addRow("whole, fewer pixels than samples") << 0.0 << 1.0 << 300;
  QTest::addRow("whole, a pixel each") << 0.0 << 1.0 << 100000;
  QTest::addRow("middle") << 0.37 << 0.1 << 1000;
  QTest::addRow("tiny, between two samples") << 0.5 << 1e-7 << 800;
  QTest::addRow("before the first sample") << -0.5 << 0.4 << 500;
  QTest::addRow("past the last sample") << 1.5 << 0.4 << 500;
  QTest::addRow("one pixel") << 0.2 << 0.5 << 1;
  // -1: the window is exactly `pixels` nanoseconds, a column each.
  QTest::addRow("a nanosecond a pixel") << 0.0 << -1.0 << 1000;
}

// The timeline's counter query against the same reduction done here over
// every sample: a pixel's time wide columns from the window's start, each
// with its samples' least, greatest and last value, and the value held
// before the window. Another rank's series and another name stay out.
void TestTraceStore::counterViewMatchesReference() {
  QFETCH(double, window_offset);
  QFETCH(double, window_fraction);
  QFETCH(int, pixels);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "counters.cstrace");
  std::vector<CounterSample> samples;
  {
    auto w = TraceWriter::create(path, {});
    QVERIFY(w.ok());
    (*w)->add_rank({0, "host", "CPU", 1, 0, false});
    (*w)->add_rank({1, "host", "CPU", 2, 0, false});
    const StringId used = (*w)->intern("memory in use (bytes)");
    const StringId other = (*w)->intern("utilization");
    std::mt19937_64 random(7);
    std::int64_t t = 1'000'000'000;
    for (int i = 0; i < 20000; ++i) {
      // Bursts and gaps; every seventh sample at the time of the one before
      // (an allocation and a free in one nanosecond), and negative values.
      const bool burst = i >= 10000 && i < 11000;  // a sample every few nanoseconds
      if (i % 7 != 0) t += 1 + std::int64_t(random() % (burst || i % 3 == 0 ? 3 : 5000));
      if (i % 1000 == 0) t += 50'000'000;
      const CounterSample c{0, used, t, double(random() % 100000) - 20000};
      samples.push_back(c);
      (*w)->add(c);
      (*w)->add(CounterSample{1, used, t, 1e12});
      (*w)->add(CounterSample{0, other, t + 1, -1});
    }
    QVERIFY((*w)->close().ok());
  }
  auto r = open_reader(path);
  const auto series = r->counter_series();
  QVERIFY(series);
  QCOMPARE(series->size(), std::size_t{3});
  const CounterSeries& s = series->front();
  QCOMPARE(r->string(s.name), std::string("memory in use (bytes)"));
  QCOMPARE(s.rank, 0);
  QCOMPARE(s.samples, std::int64_t{20000});
  QCOMPARE(s.first_ns, samples.front().time_ns);
  QCOMPARE(s.last_ns, samples.back().time_ns);
  double low = 1e300, high = -1e300;
  for (const CounterSample& c : samples) {
    low = std::min(low, c.value);
    high = std::max(high, c.value);
  }
  QCOMPARE(s.low, low);
  QCOMPARE(s.high, high);

  const std::int64_t extent = s.last_ns - s.first_ns;
  const std::int64_t t0 = window_fraction < 0
                              ? samples[10000].time_ns  // in the burst
                              : s.first_ns + std::int64_t(double(extent) * window_offset);
  const std::int64_t t1 =
      window_fraction < 0
          ? t0 + pixels
          : t0 + std::max<std::int64_t>(1, std::int64_t(double(extent) * window_fraction));
  auto got = r->counter_view(0, s.name, t0, t1, pixels);
  QVERIFY2(got, got ? "" : got.message().c_str());

  CounterView want;
  // A pixel's time, rounded up as the spans' query rounds it.
  const std::uint64_t pixel = std::uint64_t(t1 - t0 + pixels - 1) / std::uint64_t(pixels);
  std::uint64_t column = 0;
  for (const CounterSample& c : samples) {
    if (c.time_ns < t0) {
      want.held = c.value;
      continue;
    }
    if (c.time_ns >= t1) break;
    const std::uint64_t k = std::uint64_t(c.time_ns - t0) / pixel;
    if (want.columns.empty() || k != column) {
      want.columns.push_back({c.time_ns, c.time_ns, 1, c.value, c.value, c.value});
      column = k;
    } else {
      CounterColumn& w = want.columns.back();
      w.last_ns = c.time_ns;
      ++w.samples;
      w.low = std::min(w.low, c.value);
      w.high = std::max(w.high, c.value);
      w.last = c.value;
    }
  }
  QVERIFY(std::int64_t(want.columns.size()) <= pixels);
  QCOMPARE(got->held.has_value(), want.held.has_value());
  if (want.held) QCOMPARE(*got->held, *want.held);
  QCOMPARE(got->columns.size(), want.columns.size());
  std::int64_t counted = 0;
  for (std::size_t i = 0; i < want.columns.size(); ++i) {
    const CounterColumn& g = got->columns[i];
    const CounterColumn& e = want.columns[i];
    QVERIFY2(g.start_ns == e.start_ns && g.last_ns == e.last_ns && g.samples == e.samples &&
                 g.low == e.low && g.high == e.high && g.last == e.last,
             qPrintable(QString("column %1").arg(i)));
    counted += g.samples;
  }
  if (window_fraction < 0) {  // a column for each time sampled
    std::set<std::int64_t> times;
    for (const CounterSample& c : samples)
      if (c.time_ns >= t0 && c.time_ns < t1) times.insert(c.time_ns);
    QVERIFY(times.size() > 100);
    QCOMPARE(got->columns.size(), times.size());
  }
  // Every sample in the window is in one column.
  QCOMPARE(counted, std::int64_t(std::count_if(samples.begin(), samples.end(), [&](auto& c) {
             return c.time_ns >= t0 && c.time_ns < t1;
           })));
  // An empty or reversed window: only the value held.
  const auto empty = r->counter_view(0, s.name, t1, t0, pixels);
  QVERIFY(empty && empty->columns.empty());
}

void TestTraceStore::spansFoldToPixels_data() {
  QTest::addColumn<int>("pattern");
  QTest::addColumn<double>("window_fraction");
  QTest::addColumn<double>("window_offset");
  QTest::addColumn<int>("pixels");
  for (Pattern p : {Pattern::uniform, Pattern::nested, Pattern::bursty}) {
    const char* name = p == Pattern::uniform  ? "uniform"
                       : p == Pattern::nested ? "nested"
                                              : "bursty";
    QTest::addRow("%s, whole, 2000 px", name) << int(p) << 1.0 << 0.0 << 2000;
    QTest::addRow("%s, whole, 100 px", name) << int(p) << 1.0 << 0.0 << 100;
    QTest::addRow("%s, 10%%, 1500 px", name) << int(p) << 0.1 << 0.45 << 1500;
    QTest::addRow("%s, 1%%, 2000 px", name) << int(p) << 0.01 << 0.61 << 2000;
  }
}

// At every zoom: about one span per pixel and depth; every event the window
// overlaps lies inside a span at its depth; a whole-range query accounts for
// every event exactly once; events wider than 3 pixels come back whole.
void TestTraceStore::spansFoldToPixels() {
  QFETCH(int, pattern);
  QFETCH(double, window_fraction);
  QFETCH(double, window_offset);
  QFETCH(int, pixels);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "fold.cstrace");
  const Written w = write_store(path, {static_cast<Pattern>(pattern)}, 60000);
  auto r = open_reader(path);
  const LaneInfo* lane = r->lane(w.lanes[0]);
  const auto all = placed(w, w.lanes[0]);
  const std::int64_t span = lane->last_ns - lane->first_ns;
  const std::int64_t t0 = lane->first_ns + static_cast<std::int64_t>(span * window_offset);
  const std::int64_t t1 = window_fraction >= 1.0
                              ? lane->last_ns + 1
                              : t0 + static_cast<std::int64_t>(span * window_fraction);
  auto got = r->spans(w.lanes[0], t0, t1, pixels);
  QVERIFY2(got, got ? "" : got.message().c_str());
  const std::int64_t pixel = (t1 - t0 + pixels - 1) / pixels;

  std::map<int, std::vector<Span>> by_depth;
  for (const Span& s : *got)
    by_depth[s.depth].push_back(s);
  for (auto& [depth, spans] : by_depth) {
    QVERIFY2(
        static_cast<int>(spans.size()) <= pixels * 3 / 2 + 2,
        qPrintable(
            QString("depth %1: %2 spans for %3 pixels").arg(depth).arg(spans.size()).arg(pixels)));
  }
  std::int64_t counted = 0;
  for (const Span& s : *got)
    counted += s.count;
  if (window_fraction >= 1.0) QCOMPARE(counted, static_cast<std::int64_t>(all.size()));

  for (const Placed& p : all) {
    const Event& e = p.event;
    if (e.start_ns >= t1 || e.end_ns <= t0) continue;
    const auto& spans = by_depth[p.depth];
    auto it = std::upper_bound(spans.begin(), spans.end(), e.start_ns,
                               [](std::int64_t t, const Span& s) { return t < s.start_ns; });
    QVERIFY2(it != spans.begin(), "an event before every span of its depth");
    --it;
    QVERIFY2(it->start_ns <= e.start_ns && it->end_ns >= e.end_ns,
             qPrintable(QString("event [%1, %2) depth %3 not inside %4")
                            .arg(e.start_ns)
                            .arg(e.end_ns)
                            .arg(p.depth)
                            .arg(describe(*it))));
    if (e.end_ns - e.start_ns >= 4 * pixel + 2048) {
      // Wide enough for every level the query may pick: a span of its own.
      QVERIFY2(it->count == 1 && it->start_ns == e.start_ns && it->end_ns == e.end_ns,
               qPrintable(QString("wide event [%1, %2) came back as %3")
                              .arg(e.start_ns)
                              .arg(e.end_ns)
                              .arg(describe(*it))));
    }
  }
}

void TestTraceStore::eventAtIsInnermost() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "at.cstrace");
  const Written w = write_store(path, {Pattern::nested, Pattern::uniform}, 30000);
  auto r = open_reader(path);
  std::mt19937_64 rng(7);
  for (LaneId lane_id : w.lanes) {
    const auto all = placed(w, lane_id);
    const LaneInfo* lane = r->lane(lane_id);
    for (int i = 0; i < 300; ++i) {
      const std::int64_t t =
          lane->first_ns + static_cast<std::int64_t>(
                               rng() % static_cast<std::uint64_t>(lane->last_ns - lane->first_ns));
      const Placed* best = nullptr;
      for (const Placed& p : all) {
        if (p.event.start_ns <= t && t < p.event.end_ns &&
            (!best || p.depth > best->depth ||
             (p.depth == best->depth && p.event.start_ns >= best->event.start_ns)))
          best = &p;
      }
      auto got = r->event_at(lane_id, t);
      QVERIFY2(got, got ? "" : got.message().c_str());
      if (!best) {
        QVERIFY(!got->has_value());
        continue;
      }
      QVERIFY2(got->has_value(), qPrintable(QString("nothing at %1").arg(t)));
      QCOMPARE((*got)->event.start_ns, best->event.start_ns);
      QCOMPARE((*got)->event.end_ns, best->event.end_ns);
      QCOMPARE((*got)->event.lane, lane_id);
    }
  }
}

// A lane shaped so that the finest level of detail reaches its row cap
// exactly as finalize emits the tiles still open at the end (one per depth):
// the level is given up there, and the tiles it frees must not be touched
// again (they were once, corrupting the heap of whoever finalized the store).
void TestTraceStore::levelGivenUpAtTheLastTiles() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "cap.cstrace");
  {
    auto created = TraceWriter::create(path, RunInfo{});
    QVERIFY(created);
    TraceWriter& w = **created;
    const LaneId lane = w.add_lane(0, LaneKind::cpu_thread, "main thread", 0);
    const StringId name = w.intern("op");
    // 65 clusters, one per level-0 tile (1024 ns) and far apart: an outer
    // event with one inside it, then short ones after it, 2048 events in all.
    // Level 0 ends with 2 rows per cluster but the last = 128 = 2048 / 16,
    // its cap, and two tiles open: emitting the first gives it up.
    constexpr int kClusters = 65;
    constexpr int kEvents = 2048;
    int written = 0;
    for (int c = 0; c < kClusters; ++c) {
      const std::int64_t t = std::int64_t{c} << 20;
      auto add = [&](std::int64_t start, std::int64_t end) {
        Event e;
        e.lane = lane;
        e.kind = EventKind::cpu_op;
        e.category = Category::compute;
        e.start_ns = start;
        e.end_ns = end;
        e.name = name;
        w.add(e);
        ++written;
      };
      add(t, t + 100);
      add(t + 10, t + 50);
      const int rest =
          (kEvents - 2 * kClusters) / kClusters + (c < (kEvents - 2 * kClusters) % kClusters);
      for (int j = 0; j < rest; ++j)
        add(t + 100 + 20 * j, t + 110 + 20 * j);
    }
    QCOMPARE(written, kEvents);
    const cs::Status closed = w.close();
    QVERIFY2(closed, closed.message().c_str());
  }
  auto r = open_reader(path);
  QCOMPARE(r->lanes().size(), std::size_t(1));
  const LaneInfo lane = r->lanes().front();
  QCOMPARE(lane.event_count, std::int64_t(2048));
  QCOMPARE(lane.max_depth, 1);
  auto spans = r->spans(lane.id, lane.first_ns, lane.last_ns, 1000);
  QVERIFY2(spans, spans ? "" : spans.message().c_str());
  std::int64_t folded = 0;
  for (const Span& s : *spans)
    folded += s.count;
  QCOMPARE(folded, std::int64_t(2048));
  // The case this test is for: level 0 was given up, a coarser one kept.
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  QCOMPARE(sqlite3_prepare_v2(db, "SELECT lod_finest_level FROM lane_stats", -1, &stmt, nullptr),
           SQLITE_OK);
  QCOMPARE(sqlite3_step(stmt), SQLITE_ROW);
  const int finest = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  QVERIFY2(finest > 0, qPrintable(QString("finest level %1").arg(finest)));
}

// Lanes whose events arrive in time order get their chunks from the writer;
// others from finalize; a store cut short is read from its rows. All three
// must read the same.
void TestTraceStore::orderOfArrivalDoesNotMatter() {
  QTemporaryDir dir;
  const std::string ordered = temp_path(dir, "ordered.cstrace");
  const std::string shuffled = temp_path(dir, "shuffled.cstrace");
  WriterOptions small;
  small.flush_rows = 2500;
  const Written w =
      write_store(shuffled, {Pattern::nested, Pattern::uniform, Pattern::bursty}, 12000, small);
  {
    auto created = TraceWriter::create(ordered, RunInfo{}, small);
    QVERIFY(created);
    TraceWriter& writer = **created;
    writer.add_rank({0, "localhost", "test device", 1, 0, false});
    for (const std::string& n : w.names)
      writer.intern(n);
    for (std::size_t i = 0; i < w.lanes.size(); ++i)
      writer.add_lane(0, i == 0 ? LaneKind::cpu_thread : LaneKind::gpu_stream,
                      "lane " + std::to_string(i), static_cast<int>(i));
    for (LaneId lane : w.lanes) {
      for (const Placed& p : placed(w, lane))
        writer.add(p.event);
    }
    QVERIFY(writer.close());
  }
  auto a = open_reader(ordered);
  auto b = open_reader(shuffled);
  for (std::size_t i = 0; i < w.lanes.size(); ++i) {
    const LaneId lane = w.lanes[i];
    std::vector<std::tuple<std::int64_t, std::int64_t, std::uint32_t>> ea, eb;
    QVERIFY(a->for_each_event({lane}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
      ea.emplace_back(e.event.start_ns, e.event.end_ns, e.event.name.value);
      return true;
    }));
    QVERIFY(b->for_each_event({lane}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
      eb.emplace_back(e.event.start_ns, e.event.end_ns, e.event.name.value);
      return true;
    }));
    QCOMPARE(ea.size(), std::size_t{12000});
    QVERIFY(ea == eb);
    const LaneInfo* la = a->lane(lane);
    for (int px : {2000, 300}) {
      auto sa = a->spans(lane, la->first_ns, la->last_ns + 1, px);
      auto sb = b->spans(lane, la->first_ns, la->last_ns + 1, px);
      QVERIFY(sa && sb);
      QCOMPARE(sa->size(), sb->size());
      for (std::size_t k = 0; k < sa->size(); ++k) {
        QCOMPARE((*sa)[k].start_ns, (*sb)[k].start_ns);
        QCOMPARE((*sa)[k].count, (*sb)[k].count);
      }
    }
  }
}

void TestTraceStore::findEvents() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "find.cstrace");
  const Written w = write_store(path, {Pattern::uniform, Pattern::nested}, 5000);
  auto r = open_reader(path);
  std::int64_t want = 0;
  const std::string name = w.names[7];
  for (const Event& e : w.events)
    want += r->string(e.name) == name;
  auto exact = r->find_events(name, NameMatch::exact, 1'000'000);
  QVERIFY(exact);
  QCOMPARE(static_cast<std::int64_t>(exact->size()), want);
  for (const StoredEvent& e : *exact)
    QCOMPARE(r->string(e.event.name), name);
  auto limited = r->find_events("name_", NameMatch::substring, 25);
  QCOMPARE(limited->size(), std::size_t{25});
  // In time order: the 25 earliest matches of the store, whatever their rank.
  std::vector<std::int64_t> starts;
  for (const Event& e : w.events) {
    if (r->string(e.name).find("name_") != std::string::npos) starts.push_back(e.start_ns);
  }
  std::sort(starts.begin(), starts.end());
  auto earliest = r->find_events("name_", NameMatch::substring, 25, {}, FindOrder::time);
  QVERIFY(earliest);
  QCOMPARE(earliest->size(), std::size_t{25});
  for (std::size_t i = 0; i < earliest->size(); ++i)
    QCOMPARE((*earliest)[i].event.start_ns, starts[i]);
  QVERIFY(r->find_events("no such name", NameMatch::exact, 10)->empty());
  QVERIFY(r->find_events(name, NameMatch::exact, 10, 5)->empty());  // rank 5 does not exist
}

void TestTraceStore::liveStoreOpensReadOnly() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "live.cstrace");
  ChildRun child;
  child.start({"live", QString::fromStdString(path)});
  QVERIFY2(child.wait_committed(10000), qPrintable(child.output));

  {
    auto r = open_reader(path);  // repair is asked for, but the writer is alive
    QVERIFY(r->state().writer_alive);
    QCOMPARE(r->state().status, std::string("writing"));
    QVERIFY(!r->state().finalized);
    QCOMPARE(r->event_count(), child.committed);
    const LaneInfo gpu = r->lanes_of(0)[0];
    auto spans = r->spans(gpu.id, gpu.first_ns, gpu.last_ns, 500);
    QVERIFY2(spans, spans ? "" : spans.message().c_str());
    std::int64_t n = 0;
    for (const Span& s : *spans)
      n += s.count;
    QCOMPARE(n, child.committed / 2);
    QVERIFY(!finalize_store(path));  // refused while the writer lives
    // The file alone (copied without its -wal mid-run) is a store: the
    // schema was all in the -wal ("an SQLite database with no tables").
    const std::string alone = temp_path(dir, "alone.cstrace");
    std::filesystem::copy_file(path, alone);
    auto copy = TraceReader::open(alone);
    QVERIFY2(copy, copy ? "" : copy.message().c_str());
    QCOMPARE((*copy)->state().status, std::string("writing"));
    // Nor replaced under it (another run given its rank store as --out):
    // that run went on writing into a removed file and lost its steps.
    auto over = TraceWriter::create(path, RunInfo{"over", "test"});
    QVERIFY(!over);
    QVERIFY2(QString::fromStdString(over.message())
                     .contains(QString::fromStdString(path) + ": is a trace store that process ") &&
                 QString::fromStdString(over.message()).contains(" is still writing"),
             over.message().c_str());
  }
  child.kill_hard();
  auto r = open_reader(path);
  QVERIFY(!r->state().writer_alive);
  QCOMPARE(r->state().status, std::string("interrupted"));
  QVERIFY(r->state().finalized);
  QCOMPARE(r->event_count(), child.committed);
}

// A store left "writing" by a process of another host (a shared file
// system: a hostfile or Slurm run) is read as it is, not finalized in place:
// its writer may still be running there, and finalized under it, the run's
// next write failed and the rank died. A launcher whose ranks have ended
// repairs it.
void TestTraceStore::storeWrittenOnAnotherHostIsNotRepaired() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "elsewhere.cstrace");
  ChildRun child;
  child.start({"live", QString::fromStdString(path)});
  QVERIFY2(child.wait_committed(10000), qPrintable(child.output));
  child.kill_hard();
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE meta SET value = 'node-b:4242:123456' WHERE key = 'writer'",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
  }
  {
    auto r = open_reader(path);  // repair asked for
    QVERIFY(r->state().writer_elsewhere);
    QVERIFY(!r->state().writer_alive);
    QCOMPARE(r->state().status, std::string("writing"));
    QVERIFY(!r->state().finalized);
    QCOMPARE(r->event_count(), child.committed);
  }
  const cs::Status refused = finalize_store(path);
  QVERIFY(!refused);
  QVERIFY2(refused.message().find("being written by process node-b:4242 of another host") !=
               std::string::npos,
           refused.message().c_str());
  TraceReader::Options ended;
  ended.writers_ended = true;
  auto repaired = TraceReader::open(path, ended);
  QVERIFY2(repaired, repaired ? "" : repaired.message().c_str());
  QVERIFY((*repaired)->state().finalized);
  QCOMPARE((*repaired)->state().status, std::string("interrupted"));
  QCOMPARE((*repaired)->event_count(), child.committed);
}

// A store whose writer died, with its write-ahead log, on a read-only mount:
// SQLite needs a -shm file beside it to read the log and cannot make one.
// The error says so and what to do, where it said "unable to open database
// file (No such file or directory)". A real read-only tmpfs.
void TestTraceStore::crashedStoreOnAReadOnlyMount() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "crashed.cstrace");
  ChildRun child;
  child.start({"live", QString::fromStdString(path)});
  QVERIFY2(child.wait_committed(10000), qPrintable(child.output));
  child.kill_hard();
  if (!std::filesystem::exists(path + "-wal") || std::filesystem::file_size(path + "-wal") == 0)
    QSKIP("the killed writer left no write-ahead log here");
  const QString mount_point = dir.filePath(QStringLiteral("ro"));
  QVERIFY(QDir().mkpath(mount_point));
  if (QProcess::execute(QStringLiteral("mount"), {QStringLiteral("-t"), QStringLiteral("tmpfs"),
                                                  QStringLiteral("-o"), QStringLiteral("size=64m"),
                                                  QStringLiteral("tmpfs"), mount_point}) != 0)
    QSKIP("cannot mount a tmpfs here (needs root): the read-only case is not checked");
  auto unmount = qScopeGuard([&] { QProcess::execute(QStringLiteral("umount"), {mount_point}); });
  const std::string copy = (mount_point + QStringLiteral("/crashed.cstrace")).toStdString();
  std::filesystem::copy_file(path, copy);
  std::filesystem::copy_file(path + "-wal", copy + "-wal");
  QCOMPARE(QProcess::execute(QStringLiteral("mount"),
                             {QStringLiteral("-o"), QStringLiteral("remount,ro"), mount_point}),
           0);
  auto r = TraceReader::open(copy);
  QVERIFY(!r);
  QVERIFY2(r.message().find("its writer did not close it, and its last writes are in " + copy +
                            "-wal") != std::string::npos &&
               r.message().find("copy the store and its -wal file to a writable folder") !=
                   std::string::npos,
           r.message().c_str());
  // A store built there says why it cannot be (it said "No such file or
  // directory", the errno of SQLite's last, read-only, attempt).
  const std::string beside = (mount_point + QStringLiteral("/new.cstrace")).toStdString();
  const cs::Status built =
      build_store_then_replace(beside, [](const std::string&) { return cs::Status{}; });
  QVERIFY(!built);
  QVERIFY2(built.message().find(beside + ": cannot write in ") != std::string::npos &&
               built.message().find("Read-only file system") != std::string::npos,
           built.message().c_str());
}

// A writer that has ended but is not yet reaped (a rank whose mpirun exited
// first, left to an init that reaps late) keeps its /proc entry: it was
// taken for a live writer, its store read "still being written" and was not
// completed.
void TestTraceStore::writerEndedButNotReapedIsNotAlive() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "zombie.cstrace");
  const pid_t child = ::fork();
  QVERIFY(child >= 0);
  if (child == 0) {
    auto created = TraceWriter::create(path, RunInfo{"run", "test"});
    if (!created) ::_exit(1);
    TraceWriter& w = **created;
    w.add_rank({0, "node", "CPU", ::getpid(), 0, false});
    Event e;
    e.lane = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
    e.name = w.intern("gemm");
    e.start_ns = 1000;
    e.end_ns = 2000;
    w.add(e);
    ::_exit(w.flush() ? 0 : 2);  // ends with the store open, never closed
  }
  const auto reap = qScopeGuard([child] { ::waitpid(child, nullptr, 0); });
  // Ended, not reaped: a zombie.
  QTRY_VERIFY_WITH_TIMEOUT(
      [child] {
        QFile stat(QString("/proc/%1/stat").arg(child));
        if (!stat.open(QIODevice::ReadOnly)) return false;
        const QByteArray text = stat.readAll();
        const qsizetype close = text.lastIndexOf(')');
        return close > 0 && text.mid(close + 2, 1) == "Z";
      }(),
      30000);
  auto state = inspect_store(path);
  QVERIFY2(state, state ? "" : state.message().c_str());
  QCOMPARE(state->status, std::string("writing"));
  QVERIFY(!state->writer_alive);
  auto r = TraceReader::open(path);
  QVERIFY2(r, r ? "" : r.message().c_str());
  QCOMPARE((*r)->state().status, std::string("interrupted"));
  QCOMPARE((*r)->event_count(), std::int64_t{1});
}

void TestTraceStore::killedWriterKeepsCommitted() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "killed.cstrace");
  ChildRun child;
  child.start({"crash", QString::fromStdString(path)});
  QVERIFY2(child.wait_committed(80000), qPrintable(child.output));
  child.kill_hard();
  const std::int64_t committed = child.committed;

  // Read as it was left first (no repair), then repaired.
  {
    auto r = open_reader(path, false);
    QCOMPARE(r->state().status, std::string("writing"));
    QVERIFY(!r->state().writer_alive);
    QVERIFY(!r->state().finalized);
    // Whole batches only: what the last report said, or the batch after it.
    QVERIFY2(r->event_count() == committed || r->event_count() == committed + 10000,
             qPrintable(QString("%1 events, %2 reported").arg(r->event_count()).arg(committed)));
  }
  // The rows as left (no chunks yet) and the repaired store read the same.
  std::vector<std::pair<std::int64_t, std::int64_t>> raw, repaired;
  {
    auto unrepaired = open_reader(path, false);
    QVERIFY(unrepaired->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
      raw.emplace_back(e.id, e.event.start_ns);
      return true;
    }));
  }
  auto r = open_reader(path);
  QCOMPARE(r->state().status, std::string("interrupted"));
  QVERIFY(r->state().finalized);
  QVERIFY(r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    repaired.emplace_back(e.id, e.event.start_ns);
    return true;
  }));
  QVERIFY(raw == repaired);
  const std::int64_t n = r->event_count();
  QVERIFY(n == committed || n == committed + 10000);
  // Every kernel is whole and has its launch.
  const auto lanes = r->lanes_of(0);
  QCOMPARE(lanes.size(), std::size_t{2});
  QCOMPARE(lanes[0].event_count, n / 2);
  QCOMPARE(lanes[1].event_count, n / 2);
  std::int64_t correlation_sum = 0;
  QVERIFY(r->for_each_event({lanes[0].id}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    correlation_sum += e.event.correlation;
    return e.event.end_ns - e.event.start_ns == 6000;
  }));
  QCOMPARE(correlation_sum, (n / 2) * (n / 2 + 1) / 2);
}

void TestTraceStore::writeFailureNamesTheFile() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "full.cstrace");
  ChildRun child;
  child.start({"fsize", QString::fromStdString(path), QString::number(2 << 20)});
  QVERIFY(child.process.waitForFinished(120000));
  const QString out = child.output + QString::fromUtf8(child.process.readAllStandardOutput());
  QCOMPARE(child.process.exitCode(), 0);
  std::int64_t committed = 0;
  QString error;
  for (const QString& line : out.split('\n')) {
    if (line.startsWith("committed ")) committed = line.mid(10).toLongLong();
    if (line.startsWith("error ")) error = line.mid(6);
  }
  QVERIFY2(!error.isEmpty(), qPrintable(out));
  QVERIFY2(error.contains(QString::fromStdString(path)), qPrintable(error));
  QVERIFY2(error.contains("write failed"), qPrintable(error));
  QVERIFY2(out.contains("close " + QString::fromStdString(path)), qPrintable(out));
  QVERIFY(committed > 0);

  auto r = TraceReader::open(path);
  QVERIFY2(r, r ? "" : r.message().c_str());
  QVERIFY2((*r)->event_count() >= committed,
           qPrintable(QString("%1 < %2").arg((*r)->event_count()).arg(committed)));
}

void TestTraceStore::failedCreateLeavesNothing_data() {
  QTest::addColumn<qint64>("limit");  // bytes a file may hold
  QTest::addRow("no room at all") << qint64{0};
  QTest::addRow("room for the first page") << qint64{20000};
}

// A store that cannot be created (a full disk; here a file-size limit, which
// fails the same writes) leaves nothing at its path: an empty file, or a
// database without tables and its log, stayed, read as a damaged store, and
// a run's merge refused the rank ("an SQLite database with no tables").
void TestTraceStore::failedCreateLeavesNothing() {
  QFETCH(qint64, limit);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "full.cstrace");
  rlimit saved{};
  QCOMPARE(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = static_cast<rlim_t>(limit);
  QCOMPARE(setrlimit(RLIMIT_FSIZE, &small), 0);
  auto created = TraceWriter::create(path, RunInfo{"run", "test"});
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  QVERIFY(!created);
  QVERIFY2(QString::fromStdString(created.message()).startsWith(QString::fromStdString(path)),
           created.message().c_str());
  QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot), QStringList{});
  QVERIFY(!is_unmade_store(path));  // nothing there
}

// What a failed create leaves (an empty file, a database without tables) is
// told from a store and from another file, which a run never removes.
void TestTraceStore::unmadeStoresAreTold() {
  QTemporaryDir dir;
  const std::string empty = temp_path(dir, "empty.db");
  QVERIFY(std::ofstream(empty).good());
  QVERIFY(is_unmade_store(empty));
  const std::string no_tables = temp_path(dir, "no-tables.db");
  exec_sql(no_tables,
           "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; PRAGMA user_version = 0");
  QVERIFY(QFileInfo(QString::fromStdString(no_tables)).size() > 0);
  QVERIFY(is_unmade_store(no_tables));
  const std::string other = temp_path(dir, "other.db");
  exec_sql(other, "CREATE TABLE t(x)");
  QVERIFY(!is_unmade_store(other));
  const std::string text = temp_path(dir, "notes.db");
  std::ofstream(text) << "my notes\n";
  QVERIFY(!is_unmade_store(text));
  const std::string store = temp_path(dir, "store.db");
  {
    auto created = TraceWriter::create(store, RunInfo{"run", "test"});
    QVERIFY(created);
    QVERIFY((*created)->close("complete"));
  }
  QVERIFY(!is_unmade_store(store));
  QVERIFY(!is_unmade_store(temp_path(dir, "missing.db")));
}

// A store is never created where a folder is, even an empty one (it was
// replaced by the store): the user meant a file in it.
void TestTraceStore::notCreatedOverAFolder() {
  QTemporaryDir dir;
  const std::string folder = temp_path(dir, "runs");
  QVERIFY(std::filesystem::create_directory(folder));
  auto created = TraceWriter::create(folder, RunInfo{"run", "test"});
  QVERIFY(!created);
  QCOMPARE(QString::fromStdString(created.message()),
           QString::fromStdString(folder + ": is a folder; give the store's file name (for example " +
                                  folder + "/run.db)"));
  QVERIFY(std::filesystem::is_directory(folder));
  // Nor over a named pipe (or a device: root's /dev/null was replaced).
  const std::string pipe = temp_path(dir, "pipe");
  QCOMPARE(::mkfifo(pipe.c_str(), 0600), 0);
  auto over_pipe = TraceWriter::create(pipe, RunInfo{"run", "test"});
  QVERIFY(!over_pipe);
  QCOMPARE(QString::fromStdString(over_pipe.message()),
           QString::fromStdString(pipe + ": is a named pipe; a trace store replaces only an "
                                         "earlier store: give a file name"));
  QVERIFY(std::filesystem::is_fifo(pipe));
}

// A store of a newer schema at the path a store is written to (`run --out`,
// `profile --out`, `trace import --out`): this build cannot read it back, and
// it was replaced, lost to the build that wrote it. A store of this schema
// is replaced as before.
void TestTraceStore::notReplacedWhenNewer_data() {
  QTest::addColumn<QString>("edit");
  QTest::addColumn<QString>("message");  // empty: replaced
  QTest::addRow("newer user_version")
      << "PRAGMA user_version = 3"
      << ": is a trace store of schema version 3, written by a newer ClusterScope (this build "
         "writes version 2); a trace store replaces only an earlier store: remove it or give "
         "another name";
  QTest::addRow("newer in meta") << "UPDATE meta SET value = '7' WHERE key = 'schema_version'"
                                 << ": is a trace store of schema version 7, written by a newer "
                                    "ClusterScope (this build writes version 2)";
  QTest::addRow("no number in meta")
      << "UPDATE meta SET value = 'two' WHERE key = 'schema_version'"
      << ": is a trace store whose meta table gives the schema version as 'two', not a version "
         "number; a trace store replaces only an earlier store";
  QTest::addRow("this schema") << "SELECT 1"
                               << "";
}

void TestTraceStore::notReplacedWhenNewer() {
  QFETCH(QString, edit);
  QFETCH(QString, message);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "run.db");
  write_store(path, {Pattern::uniform}, 100);
  exec_sql(path, edit.toUtf8().constData());
  QFile file(QString::fromStdString(path));
  QVERIFY(file.open(QIODevice::ReadOnly));
  const QByteArray before = file.readAll();
  file.close();
  const cs::Status checked = check_store_path(path);
  auto created = TraceWriter::create(path, RunInfo{"run", "test"});
  if (message.isEmpty()) {
    QVERIFY2(checked, checked.message().c_str());
    QVERIFY2(created, created ? "" : created.message().c_str());
    return;
  }
  QVERIFY(!checked);
  QVERIFY(!created);
  for (const std::string& got : {checked.message(), created.message()}) {
    QVERIFY2(QString::fromStdString(got).startsWith(QString::fromStdString(path) + message),
             got.c_str());
  }
  QVERIFY(file.open(QIODevice::ReadOnly));
  QVERIFY(file.readAll() == before);
}

// A database another process holds locked (a transaction of its own under
// way) could not be read, and was then taken for "no store" and replaced
// (`trace merge -o`, `trace import -o`): that program's data and its journal
// gone. It is refused by name, and left as it was.
void TestTraceStore::notReplacedWhileLocked_data() {
  QTest::addColumn<bool>("store");
  QTest::addRow("another program's database") << false;
  QTest::addRow("a trace store in rollback mode") << true;
}

void TestTraceStore::notReplacedWhileLocked() {
  QFETCH(bool, store);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "held.db");
  if (store) {
    write_store(path, {Pattern::uniform}, 100);
    exec_sql(path, "PRAGMA journal_mode = DELETE");
  } else {
    exec_sql(path,
             "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);"
             "INSERT INTO users VALUES(1, 'kept')");
  }
  sqlite3* holder = nullptr;
  QCOMPARE(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  const auto close_holder = qScopeGuard([&] { sqlite3_close(holder); });
  const char* change = store ? "BEGIN EXCLUSIVE; UPDATE meta SET value = 'held' WHERE key = 'title'"
                             : "BEGIN EXCLUSIVE; INSERT INTO users VALUES(2, 'in flight')";
  QCOMPARE(sqlite3_exec(holder, change, nullptr, nullptr, nullptr), SQLITE_OK);
  QVERIFY(std::filesystem::exists(path + "-journal"));

  const cs::Status checked = check_store_path(path);
  QVERIFY(!checked);
  QVERIFY2(QString::fromStdString(checked.message())
               .startsWith(QString::fromStdString(
                   path + ": cannot tell what it is: another process holds it locked (database "
                          "is locked); it is not replaced")),
           checked.message().c_str());
  auto created = TraceWriter::create(path, RunInfo{"run", "test"});
  QVERIFY(!created);
  QVERIFY(std::filesystem::exists(path + "-journal"));
  if (store) {
    // Read meanwhile, it says who holds it ("database is locked" alone read
    // as damage).
    auto opened = TraceReader::open(path, TraceReader::Options{false});
    QVERIFY(!opened);
    QVERIFY2(opened.message().find("database is locked: another process holds it; try again once "
                                   "that process is done with it") != std::string::npos,
             opened.message().c_str());
  }
  // The holder's transaction ends as it would have.
  QCOMPARE(sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  if (!store) {
    sqlite3_stmt* rows = nullptr;
    QCOMPARE(sqlite3_prepare_v2(holder, "SELECT count(*) FROM users", -1, &rows, nullptr),
             SQLITE_OK);
    QCOMPARE(sqlite3_step(rows), SQLITE_ROW);
    QCOMPARE(sqlite3_column_int(rows, 0), 2);
    sqlite3_finalize(rows);
  }
}

// A chunk whose event count its bytes cannot hold (a damaged or edited
// store): reading it says so by name, where it tried to allocate that many
// events (std::bad_alloc, "vector::_M_default_append").
void TestTraceStore::chunkCountsThatCannotBe_data() {
  QTest::addColumn<qint64>("count");
  QTest::addRow("2^40") << qint64{1099511627776};
  QTest::addRow("negative") << qint64{-5};
}

void TestTraceStore::chunkCountsThatCannotBe() {
  QFETCH(qint64, count);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "counts.cstrace");
  write_store(path, {Pattern::uniform}, 5000);
  const std::string update = "UPDATE chunks SET count = " + std::to_string(count) +
                             " WHERE id = (SELECT MIN(id) FROM chunks)";
  exec_sql(path, update.c_str());
  auto r = TraceReader::open(path);
  QVERIFY2(r, r ? "" : r.message().c_str());
  const cs::Status s = (*r)->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4,
                                            [](const StoredEvent&) { return true; });
  QVERIFY(!s);
  QVERIFY2(QString::fromStdString(s.message())
               .contains(QString::fromStdString(path) + " is damaged: an event chunk of lane ") &&
               QString::fromStdString(s.message())
                   .contains(" says it holds " + QString::number(count) + " events in "),
           s.message().c_str());
}

// A chunk damaged so that it still decodes (bytes overwritten inside its
// blob, or its row edited): every read refuses it by name, where analyses
// and exports went on with other events' names and times (a damaged page of
// a Kineto import moved 45 ms of host wait into "idle other", exit 0).
void TestTraceStore::chunksThatDecodeToOtherEvents_data() {
  QTest::addColumn<QString>("update");
  QTest::addColumn<QString>("said");
  QTest::addRow("a kind past the last") << "data = CAST(substr(data, 1, 6) || x'7f' || "
                                           "substr(data, 8) AS BLOB)"
                                        << "holds an event of no known kind or category";
  QTest::addRow("bytes past its events") << "data = CAST(data || x'00' AS BLOB)"
                                         << "holds bytes past its events";
  QTest::addRow("its first start") << "first_start = first_start + 1"
                                   << "does not decode to the times its row gives";
  QTest::addRow("its latest end") << "end_max = end_max - 1"
                                  << "does not decode to the times its row gives";
  QTest::addRow("its last start") << "last_start = last_start - 1"
                                  << "does not decode to the times its row gives";
  // Two events: the first starts at 2^60, the second's start delta is
  // INT64_MAX. Their sum overflowed an int64 (undefined behaviour, found
  // by UBSan under fuzzing); added modulo 2^64 it is a time no store holds.
  QTest::addRow("a start delta that overflows")
      << "count = 2, data = x'0280808080808080802000000000000002feffffffffffffffff01000000000000'"
      << "does not decode to times a store holds";
}

void TestTraceStore::chunksThatDecodeToOtherEvents() {
  QFETCH(QString, update);
  QFETCH(QString, said);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "edited.cstrace");
  write_store(path, {Pattern::uniform}, 5000);
  const std::string sql =
      "UPDATE chunks SET " + update.toStdString() + " WHERE id = (SELECT MIN(id) FROM chunks)";
  exec_sql(path, sql.c_str());
  auto r = TraceReader::open(path);
  QVERIFY2(r, r ? "" : r.message().c_str());
  const cs::Status s = (*r)->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4,
                                            [](const StoredEvent&) { return true; });
  QVERIFY(!s);
  QVERIFY2(
      QString::fromStdString(s.message())
              .startsWith(QString::fromStdString(path) + " is damaged: an event chunk of lane ") &&
          QString::fromStdString(s.message()).endsWith(said),
      s.message().c_str());
}

// Event rows no writer writes (an edited or damaged store read from its
// rows: a version-1 store, or one whose writer died): refused by name, as a
// damaged chunk is. A start of -7.7e18 reached the timeline's folding,
// whose end - start overflowed an int64 (found by fuzzing).
void TestTraceStore::rowsNoWriterWrote_data() {
  QTest::addColumn<QString>("update");
  QTest::addRow("a start past what a trace holds") << "start_ns = -7684776719209289544";
  QTest::addRow("an end past what a trace holds") << "end_ns = 9223372036854775807";
  QTest::addRow("an end before its start") << "end_ns = start_ns - 1";
  QTest::addRow("a kind past the last") << "kind = 200";
  QTest::addRow("a negative category") << "category = -1";
}

void TestTraceStore::rowsNoWriterWrote() {
  QFETCH(QString, update);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "rows.cstrace");
  write_store(path, {Pattern::uniform}, 5000);
  const std::string sql =
      "DROP TABLE chunks; DELETE FROM lod; DELETE FROM lane_stats; "
      "PRAGMA user_version = 1; UPDATE events SET " +
      update.toStdString() + " WHERE id = (SELECT MIN(id) FROM events)";
  exec_sql(path, sql.c_str());
  std::string message;
  if (auto r = TraceReader::open(path); !r) {
    message = r.message();
  } else {
    const cs::Status s = (*r)->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4,
                                              [](const StoredEvent&) { return true; });
    QVERIFY(!s);
    message = s.message();
  }
  QVERIFY2(QString::fromStdString(message).contains(QString::fromStdString(path) +
                                                    " is damaged: event ") &&
               QString::fromStdString(message).contains(
                   " holds a time, kind or category no store holds"),
           message.c_str());
}

// An event row edited in a finalized store, its chunks left whole: the
// readers of rows (event_view, exports) took it as it stood, and the whole
// store's check (`trace info --check`) passed it. The check names the table,
// the row and what is wrong, counts past the first few, and writes nothing.
void TestTraceStore::checkNamesEventRowsNoWriterWrote_data() {
  QTest::addColumn<QString>("update");
  QTest::addColumn<QString>("said");
  QTest::addRow("an end before its start") << "end_ns = start_ns - 1 WHERE id = 7"
                                           << "1 row of its events table is not an event a "
                                              "writer writes (row 7: it ends (";
  QTest::addRow("a text kind") << "kind = 'x' WHERE id = 3"
                               << "(row 3: its kind 'x' is no event kind)";
  QTest::addRow("a negative kind") << "kind = -1 WHERE id = 3"
                                   << "(row 3: its kind -1 is no event kind)";
  QTest::addRow("a kind past the last") << "kind = 11 WHERE id = 3"
                                        << "(row 3: its kind 11 is no event kind)";
  QTest::addRow("a category past the last") << "category = 5 WHERE id = 4"
                                            << "(row 4: its category 5 is no event category)";
  QTest::addRow("a real start") << "start_ns = 1.5 WHERE id = 5"
                                << "(row 5: its times (1.5, ";
  QTest::addRow("a lane no row has") << "lane = 99 WHERE id = 9"
                                     << "(row 9: its lane 99 is not in the lanes table)";
  QTest::addRow("many rows") << "end_ns = start_ns - 1 WHERE id <= 12"
                             << "12 rows of its events table are not events a writer writes "
                                "(row 1: it ends (";
}

void TestTraceStore::checkNamesEventRowsNoWriterWrote() {
  QFETCH(QString, update);
  QFETCH(QString, said);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "rows.cstrace");
  write_store(path, {Pattern::uniform}, 2000);
  QVERIFY(verify_store(path));
  exec_sql(path, ("UPDATE events SET " + update.toStdString()).c_str());
  QFile file(QString::fromStdString(path));
  QVERIFY(file.open(QIODevice::ReadOnly));
  const QByteArray before = file.readAll();
  file.close();
  const cs::Status checked = verify_store(path);
  QVERIFY(!checked);
  const QString got = QString::fromStdString(checked.message());
  QVERIFY2(got.startsWith(QString::fromStdString(path) + " is damaged: "), qPrintable(got));
  QVERIFY2(got.contains(said), qPrintable(got));
  if (update.startsWith("end_ns") && update.endsWith("<= 12"))
    QVERIFY2(got.contains("row 5: it ends (") && got.endsWith("; and 7 more)") &&
                 !got.contains("row 6:"),
             qPrintable(got));
  QVERIFY(file.open(QIODevice::ReadOnly));
  QVERIFY(file.readAll() == before);
}

// Garbage written over pages inside a store: verify_store names the file
// and the damage; reading everything else fails by name or succeeds, but
// never crashes.
void TestTraceStore::corruptPagesAreReported() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "corrupt.cstrace");
  write_store(path, {Pattern::uniform, Pattern::nested, Pattern::bursty}, 40000);
  QVERIFY(verify_store(path));  // whole, it verifies
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path));
    std::mt19937 rng(3);
    std::string garbage(16384, '\0');
    for (char& c : garbage)
      c = static_cast<char>(rng());
    for (double at : {0.3, 0.55, 0.8}) {
      f.seekp(static_cast<std::int64_t>(size * at) / 16384 * 16384);
      f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    }
  }
  const cs::Status verified = verify_store(path);
  QVERIFY(!verified);
  QVERIFY2(QString::fromStdString(verified.message())
               .contains(QString::fromStdString(path) + " is damaged"),
           verified.message().c_str());
  {
    // Bytes flipped across a b-tree's pages: SQLite's check names problems,
    // and may stop at one it cannot step over ("malformed"); what it named
    // is said with it then (it was dropped).
    const std::string flipped = temp_path(dir, "flipped.cstrace");
    write_store(flipped, {Pattern::uniform, Pattern::nested, Pattern::bursty}, 40000);
    std::fstream f(flipped, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::int64_t>(std::filesystem::file_size(flipped)) / 2;
    for (std::int64_t at = middle; at < middle + 32768; at += 997) {
      f.seekg(at);
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(~c);
      f.seekp(at);
      f.write(&c, 1);
    }
    f.close();
    const cs::Status checked = verify_store(flipped);
    QVERIFY(!checked);
    // Where the flips land moves with the store's bytes: SQLite's check
    // either ends and counts, or stops; either way it names what it found.
    // Flips inside an event chunk's bytes (SQLite checks no blob's content)
    // are found by decoding the chunks, which names the lane.
    const QString message = QString::fromStdString(checked.message());
    QVERIFY2(((message.contains("SQLite's check found first: ") ||
               message.contains("SQLite's check finds ")) &&
              message.contains("page", Qt::CaseInsensitive)) ||
                 message.contains("is damaged: an event chunk of lane "),
             checked.message().c_str());
  }

  auto r = TraceReader::open(path, TraceReader::Options{false});
  if (!r) {
    QVERIFY(QString::fromStdString(r.message()).contains(QString::fromStdString(path)));
    return;
  }
  for (const LaneInfo& l : (*r)->lanes()) {
    auto spans = (*r)->spans(l.id, l.first_ns, l.last_ns + 1, 1500);
    if (!spans)
      QVERIFY(QString::fromStdString(spans.message()).contains(QString::fromStdString(path)));
    cs::Status s = (*r)->for_each_event({l.id}, INT64_MIN / 4, INT64_MAX / 4,
                                        [](const StoredEvent&) { return true; });
    if (!s) QVERIFY(QString::fromStdString(s.message()).contains(QString::fromStdString(path)));
  }
}

// A version-1 store (events as rows only, no chunks table) is upgraded in
// place on first open and reads back every event, at full and folded detail.
void TestTraceStore::version1StoreIsMigrated() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "v1.cstrace");
  const Written w = write_store(path, {Pattern::nested, Pattern::uniform}, 30000);
  exec_sql(path,
           "DROP TABLE chunks; DELETE FROM lod; DELETE FROM lane_stats; "
           "PRAGMA user_version = 1");
  auto r = open_reader(path);
  QCOMPARE(r->state().upgraded, StoreState::Upgrade::in_place);
  for (const LaneId lane : w.lanes) {
    const LaneInfo* info = r->lane(lane);
    QVERIFY(info);
    std::int64_t seen = 0;
    cs::Status s = r->for_each_event(std::vector<LaneId>{lane}, INT64_MIN / 4, INT64_MAX / 4,
                                     [&](const StoredEvent&) { return ++seen, true; });
    QVERIFY2(s, s ? "" : s.message().c_str());
    QCOMPARE(seen, static_cast<std::int64_t>(placed(w, lane).size()));
    auto spans = r->spans(lane, info->first_ns, info->last_ns + 1, 800);
    QVERIFY2(spans, spans ? "" : spans.message().c_str());
    std::int64_t counted = 0;
    for (const Span& sp : *spans)
      counted += sp.count;
    QCOMPARE(counted, seen);
  }
  auto state = inspect_store(path);
  QVERIFY2(state, state ? "" : state.message().c_str());
  QCOMPARE(state->schema_version, kSchemaVersion);
  const cs::Status verified = verify_store(path);
  QVERIFY2(verified, verified ? "" : verified.message().c_str());

  // A store marked read-only (chmod a-w: a colleague's shared copy) is not
  // changed: it is read through a copy upgraded in the temporary folder,
  // made once however often it is opened (the analysis opens a reader per
  // thread). It was refused ("cannot upgrade ... readonly"), or, for root,
  // changed in place.
  const std::string old = temp_path(dir, "v1-again.cstrace");
  const Written again = write_store(old, {Pattern::uniform}, 1000);
  exec_sql(old, "DROP TABLE chunks; DELETE FROM lod; DELETE FROM lane_stats; PRAGMA user_version = 1");
  auto bytes_of = [](const std::string& file) {
    QFile f(QString::fromStdString(file));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  auto copies_made = [] {
    const std::string prefix = "clusterscope-upgraded-" + std::to_string(::getpid()) + "-";
    int n = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
      n += entry.path().filename().string().starts_with(prefix);
    return n;
  };
  auto read_through_a_copy = [&](const std::string& file) {
    const QByteArray before = bytes_of(file);
    const int copies_before = copies_made();
    auto opened = TraceReader::open(file);
    auto again_opened = TraceReader::open(file);
    QVERIFY(again_opened);
    QCOMPARE(copies_made(), copies_before + 1);
    QVERIFY2(opened, opened ? "" : opened.message().c_str());
    QCOMPARE((*opened)->state().upgraded, StoreState::Upgrade::in_a_copy);
    QCOMPARE((*opened)->state().schema_version, kSchemaVersion);
    std::int64_t seen = 0;
    cs::Status s = (*opened)->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4,
                                             [&](const StoredEvent&) { return ++seen, true; });
    QVERIFY2(s, s ? "" : s.message().c_str());
    QCOMPARE(seen, static_cast<std::int64_t>(again.events.size()));
    opened->reset();
    QVERIFY(verify_store(file));
    QVERIFY(bytes_of(file) == before);  // the file as it was
  };
  const std::string marked = temp_path(dir, "v1-read-only.cstrace");
  std::filesystem::copy_file(old, marked);
  std::filesystem::permissions(marked, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::group_read |
                                           std::filesystem::perms::others_read);
  read_through_a_copy(marked);
  if (QTest::currentTestFailed()) return;

  // So is one on a read-only mount (a real read-only tmpfs).
  const QString mount_point = dir.filePath(QStringLiteral("ro"));
  QVERIFY(QDir().mkpath(mount_point));
  if (QProcess::execute(QStringLiteral("mount"), {QStringLiteral("-t"), QStringLiteral("tmpfs"),
                                                  QStringLiteral("-o"), QStringLiteral("size=64m"),
                                                  QStringLiteral("tmpfs"), mount_point}) != 0)
    QSKIP("cannot mount a tmpfs here (needs root): the read-only upgrade is not checked");
  auto unmount = qScopeGuard([&] { QProcess::execute(QStringLiteral("umount"), {mount_point}); });
  const std::string copy = (mount_point + QStringLiteral("/v1.cstrace")).toStdString();
  std::filesystem::copy_file(old, copy);
  QCOMPARE(QProcess::execute(QStringLiteral("mount"),
                             {QStringLiteral("-o"), QStringLiteral("remount,ro"), mount_point}),
           0);
  read_through_a_copy(copy);
}

// A damaged version-1 store is refused as damaged before the upgrade writes
// anything. The upgrade made its chunks table, failed on the rows it could
// not read, rolled back and dropped the table: the same rows, but 16 KiB more
// and other bytes, under "the store is unchanged: copy it to a folder with
// room", advice for a full disk.
void TestTraceStore::damagedVersion1StoreIsNotWritten() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "v1-damaged.cstrace");
  write_store(path, {Pattern::nested, Pattern::uniform}, 30000);
  exec_sql(path,
           "DROP TABLE chunks; DELETE FROM lod; DELETE FROM lane_stats; "
           "PRAGMA user_version = 1; VACUUM");
  {
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::ReadWrite));
    const qint64 middle = f.size() / 2 / 4096 * 4096;
    QVERIFY(f.seek(middle));
    QVERIFY(f.write(QByteArray(4096, '\x5a')) == 4096);  // one page's bytes scrambled
  }
  QFile file(QString::fromStdString(path));
  QVERIFY(file.open(QIODevice::ReadOnly));
  const QByteArray before = file.readAll();
  file.close();
  auto r = TraceReader::open(path);
  QVERIFY(!r);
  const QString message = QString::fromStdString(r.message());
  QVERIFY2(message.contains(QString::fromStdString(path) + " is damaged (SQLite's check: ") &&
               message.contains("was not upgraded and is unchanged") &&
               !message.contains("folder with room"),
           qPrintable(message));
  QVERIFY(file.open(QIODevice::ReadOnly));
  QVERIFY(file.readAll() == before);
}

void TestTraceStore::unfinishedFilesGoOnASignal_data() {
  QTest::addColumn<int>("signal_number");
  QTest::addRow("SIGINT") << SIGINT;
  QTest::addRow("SIGTERM") << SIGTERM;
  QTest::addRow("SIGHUP") << SIGHUP;
}

// A file written whole (a saved presets file, a run's plan) is not renamed
// over a read-only file, nor over a link's read-only target: the rename is
// not stopped by the old file's mode, and the file came back writable.
void TestTraceStore::fileBesideKeepsAReadOnlyFile() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "presets.json");
  const std::string link = temp_path(dir, "link.json");
  std::ofstream(path) << "kept\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::group_read |
                                         std::filesystem::perms::others_read);
  std::filesystem::create_symlink(path, link);
  for (const std::string& named : {path, link}) {
    cs::FileBeside file(named);
    std::ofstream(file.writing()) << "new\n";
    const cs::Status s = file.commit();
    QVERIFY(!s);
    QVERIFY2(QString::fromStdString(s.message())
                 .startsWith(QString::fromStdString(named == path ? path : link + " -> " + path) +
                             ": is read-only, and is left as it was"),
             s.message().c_str());
  }
  std::ifstream kept(path);
  std::string line;
  std::getline(kept, line);
  QCOMPARE(QString::fromStdString(line), QStringLiteral("kept"));
  QVERIFY(!std::filesystem::exists(path + ".partial"));
  // A writable file is replaced as before.
  std::filesystem::permissions(path, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  cs::FileBeside again(path);
  std::ofstream(again.writing()) << "new\n";
  QVERIFY(again.commit());
}

// A set of files (an export's CSV tables) takes its paths' places only once
// every one is written: a failure at the third (a full disk) left the two
// before it new and the rest from the earlier set.
void TestTraceStore::filesWrittenTogetherOrNotAtAll() {
  QTemporaryDir dir;
  std::vector<std::string> paths;
  for (const char* name : {"t.events.csv", "t.breakdown.csv", "t.kernels.csv", "t.stragglers.csv"})
    paths.push_back(temp_path(dir, name));
  for (const std::string& path : paths)
    std::ofstream(path) << "earlier\n";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return QString::fromStdString(line);
  };
  std::vector<std::string> written;
  const cs::Status failed =
      cs::write_files_together(paths, [&](std::size_t i, const std::string& beside) -> cs::Status {
        if (beside == paths[i]) return cs::Error{"written in place"};
        std::ofstream(beside) << "new\n";
        written.push_back(beside);
        if (i == 2) return cs::Error{beside + ": write failed: No space left on device"};
        return {};
      });
  QVERIFY(!failed);
  // Named by the file asked for, not the one beside it.
  QCOMPARE(QString::fromStdString(failed.message()),
           QString::fromStdString(paths[2] + ": write failed: No space left on device"));
  QCOMPARE(written.size(), std::size_t{3});  // none after the failure
  for (const std::string& path : paths) {
    QCOMPARE(read(path), QStringLiteral("earlier"));
    QVERIFY2(!std::filesystem::exists(path + ".partial"), path.c_str());
  }
  // Written whole, every one is replaced.
  QVERIFY(cs::write_files_together(paths, [](std::size_t, const std::string& beside) -> cs::Status {
    std::ofstream(beside) << "new\n";
    return {};
  }));
  for (const std::string& path : paths)
    QCOMPARE(read(path), QStringLiteral("new"));
  // A stream cannot be one of a set: nothing is written.
  const cs::Status stream = cs::write_files_together(
      {paths[0], "/dev/stdout"}, [](std::size_t, const std::string&) -> cs::Status { return {}; });
  QVERIFY(!stream);
  QVERIFY2(QString::fromStdString(stream.message()).contains("is a stream"),
           stream.message().c_str());
}

// Killed while it writes an export (Ctrl-C, a job's timeout), a command left
// its 40 MB "p.csv.partial" beside the output. A child process writes one,
// is signalled, and ends by that signal with the partial file gone, the
// earlier output kept, and a finished file of its own left alone.
void TestTraceStore::unfinishedFilesGoOnASignal() {
  QFETCH(int, signal_number);
  QTemporaryDir dir;
  const std::string out = temp_path(dir, "p.csv");
  const std::string done = temp_path(dir, "done.csv");
  std::ofstream(out) << "the earlier export\n";
  const pid_t child = ::fork();
  QVERIFY(child >= 0);
  if (child == 0) {
    // As the CLI starts: QtTest's own handlers are not the default actions.
    for (int s : {SIGINT, SIGTERM, SIGHUP})
      ::signal(s, SIG_DFL);
    cs::remove_unfinished_files_on_signal();
    {
      cs::FileBeside finished(done);
      std::ofstream(finished.writing()) << "whole\n";
      if (!finished.commit()) ::_exit(2);
    }
    cs::FileBeside file(out);
    std::ofstream(file.writing()) << "half of it";
    ::raise(signal_number);
    ::_exit(3);  // not reached: the signal ends the process
  }
  int status = 0;
  QCOMPARE(::waitpid(child, &status, 0), child);
  QVERIFY2(WIFSIGNALED(status) && WTERMSIG(status) == signal_number,
           qPrintable(QString("status %1").arg(status)));
  QVERIFY(!std::filesystem::exists(out + ".partial"));
  std::ifstream earlier(out);
  std::string line;
  std::getline(earlier, line);
  QCOMPARE(QString::fromStdString(line), QStringLiteral("the earlier export"));
  QVERIFY(std::filesystem::exists(done));

  // A store being built beside its path (an import, a merge), signalled
  // half way: its partial store and log go, the earlier store stays.
  const std::string store = temp_path(dir, "run.cstrace");
  write_store(store, {Pattern::uniform}, 100);
  const auto store_size = std::filesystem::file_size(store);
  const pid_t builder = ::fork();
  QVERIFY(builder >= 0);
  if (builder == 0) {
    for (int s : {SIGINT, SIGTERM, SIGHUP})
      ::signal(s, SIG_DFL);
    cs::remove_unfinished_files_on_signal();
    (void)cs::trace::build_store_then_replace(store,
                                              [&](const std::string& temporary) -> cs::Status {
                                                std::ofstream(temporary) << "half a store";
                                                std::ofstream(temporary + "-journal") << "its log";
                                                ::raise(signal_number);
                                                return {};
                                              });
    ::_exit(3);
  }
  QCOMPARE(::waitpid(builder, &status, 0), builder);
  QVERIFY2(WIFSIGNALED(status) && WTERMSIG(status) == signal_number,
           qPrintable(QString("status %1").arg(status)));
  QCOMPARE(std::filesystem::file_size(store), store_size);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path().toStdString())) {
    const std::string name = entry.path().filename().string();
    QVERIFY2(name.find(".partial") == std::string::npos, name.c_str());
  }
}

void TestTraceStore::refusesWhatIsNotAStore_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("message");
  QTest::addRow("text file") << "text"
                             << "is not a ClusterScope trace store: not an SQLite database";
  QTest::addRow("empty file") << "empty"
                              << "is not a ClusterScope trace store: the file is empty";
  QTest::addRow("foreign SQLite")
      << "foreign"
      << "is not a ClusterScope trace store: an SQLite database of another kind (tables: ";
  QTest::addRow("empty SQLite") << "empty-sqlite"
                                << "an SQLite database with no tables";
  QTest::addRow("newer schema") << "newer"
                                << "uses trace schema version 3, newer than this build";
  // The meta table's version was not read: a store it calls newer was read
  // as if it were of this schema.
  QTest::addRow("newer schema in meta")
      << "meta-newer"
      << "was written by a newer ClusterScope: its meta table gives trace schema version 3, "
         "and this build reads up to version 2";
  QTest::addRow("schema version in meta not a number")
      << "meta-garbage"
      << "is damaged: its meta table gives the schema version as '2x', not a version number "
         "(this build reads version 2)";
  QTest::addRow("older schema") << "older"
                                << "uses trace schema version 0, which this build cannot read";
  QTest::addRow("missing table") << "missing-table"
                                 << "is damaged: the trace store table 'segments' is missing";
  // A file that says it is a version-1 store, lacking its tables: the
  // upgrade added a table, then failed naming another ("no such table: lod")
  // and said the store was unchanged.
  QTest::addRow("version 1 missing a table")
      << "v1-missing-table"
      << "is damaged: the trace store table 'lod' is missing (the store, of schema version 1, is "
         "unchanged)";
  // A renamed column failed later, in each analysis, with "no such column".
  QTest::addRow("renamed column") << "renamed-column"
                                  << "is damaged: the trace store table 'steps' has no column 'loss'";
  // The kernels' launch table is optional (older stores lack it); present,
  // a dropped column failed exports and merges with "no such column: grid_y".
  QTest::addRow("launch table missing a column")
      << "launches-column-dropped"
      << "is damaged: the trace store table 'kernel_launches' has no column 'grid_y'";
  QTest::addRow("truncated") << "truncated"
                             << "is damaged: the file is cut short (";
  // A page count no disk holds is the header's damage, not a cut: it read
  // "cut short (294912 of 35184372072448 bytes)".
  QTest::addRow("page count damaged") << "page-count-damaged"
                                      << "is damaged: its SQLite header gives 2147483647 pages (";
  QTest::addRow("header cut") << "header-cut"
                              << "is damaged: the file is cut short (50 bytes, less than an "
                                 "SQLite header)";
  QTest::addRow("rank past an int")
      << "rank-past-int" << "is damaged: the ranks table holds rank 2147483648";
  QTest::addRow("lane of a rank past an int")
      << "lane-past-int" << "is damaged: lane 1 belongs to rank -1";
  QTest::addRow("names lost") << "names-lost"
                             << "is damaged: the strings table misses 1 of the names its ids count";
  QTest::addRow("lane of no kind") << "lane-of-no-kind"
                                   << "is of kind 99, which no trace store has";
  // A lane's count sizes what the analyses reserve: 2^32 events asked for
  // hundreds of gigabytes (std::bad_alloc), a negative count for more than a
  // vector holds (std::length_error); trace critical-path aborted on either.
  QTest::addRow("lane count past the events")
      << "lane-count-past-events"
      << "is damaged: lane 1 counts 4294967296 events, but its events table holds 60000";
  QTest::addRow("lane count negative")
      << "lane-count-negative"
      << "is damaged: lane 1 counts -100 events, but its events table";
  // Text read as 0 events: the lane showed as empty in trace info and the timeline.
  QTest::addRow("lane count not a number")
      << "lane-count-text"
      << "is damaged: the statistics of lane 1 are not all whole numbers";
  QTest::addRow("lane counts past the events together")
      << "lanes-count-past-events"
      << "is damaged: its lanes count more events than its events table holds (60000)";
  // An unfinished store's counts come from its segments, as do the ids read.
  QTest::addRow("segment past the events")
      << "segment-past-events"
      << "to 1000000000, which its events table (ids 1 to 60000) does not hold";
  // Each command failed at its first query: "cannot prepare query:
  // malformed database schema (event_view) ...".
  QTest::addRow("schema damaged")
      << "schema-damaged"
      << "is damaged: SQLite cannot read its schema (malformed database schema (event_view)";
  QTest::addRow("directory") << "directory"
                             << "is not a ClusterScope trace store: it is a directory";
  QTest::addRow("no file") << "none"
                           << ": no such file";
  // Opened, a FIFO blocks until something writes to it: the app's view
  // waited forever and the app could not quit.
  QTest::addRow("pipe") << "fifo"
                        << "is not a ClusterScope trace store: it is not a regular file";
}

void TestTraceStore::refusesWhatIsNotAStore() {
  QFETCH(QString, kind);
  QFETCH(QString, message);
  QTemporaryDir dir;
  std::string path = temp_path(dir, "x.cstrace");
  auto write_text = [&](const QByteArray& bytes) {
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
  };
  auto good_store = [&] { write_store(path, {Pattern::uniform, Pattern::nested}, 30000); };
  if (kind == "text") write_text("step,loss\n1,2.5\n");
  if (kind == "empty") write_text("");
  if (kind == "foreign") {
    std::filesystem::copy_file(CS_DATA_DIR "/validation/nsys/saxpy-mpi-cuda.sqlite", path);
  }
  if (kind == "empty-sqlite") exec_sql(path, "PRAGMA user_version = 0; VACUUM;");
  if (kind == "newer") {
    good_store();
    exec_sql(path, "PRAGMA user_version = 3");
  }
  if (kind == "meta-newer") {
    good_store();
    exec_sql(path, "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  }
  if (kind == "meta-garbage") {
    good_store();
    exec_sql(path, "UPDATE meta SET value = '2x' WHERE key = 'schema_version'");
  }
  if (kind == "older") {
    good_store();
    exec_sql(path, "PRAGMA user_version = 0");
  }
  if (kind == "missing-table") {
    good_store();
    exec_sql(path, "DROP TABLE segments");
  }
  if (kind == "v1-missing-table") {
    good_store();
    exec_sql(path, "DROP TABLE lod; DROP TABLE chunks; PRAGMA user_version = 1");
  }
  if (kind == "renamed-column") {
    good_store();
    exec_sql(path, "ALTER TABLE steps RENAME COLUMN loss TO lossx");
  }
  if (kind == "launches-column-dropped") {
    good_store();
    exec_sql(path, "ALTER TABLE kernel_launches DROP COLUMN grid_y");
  }
  if (kind == "truncated") {
    good_store();
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  }
  if (kind == "header-cut") {
    good_store();
    std::filesystem::resize_file(path, 50);
  }
  if (kind == "page-count-damaged") {
    good_store();
    exec_sql(path, "PRAGMA journal_mode = DELETE");  // the header's count holds without a log
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(28);
    const char pages[4] = {0x7f, char(0xff), char(0xff), char(0xff)};
    f.write(pages, 4);
  }
  if (kind == "rank-past-int") {
    good_store();
    exec_sql(path, "UPDATE ranks SET rank = 2147483648; UPDATE lanes SET rank = 2147483648");
  }
  if (kind == "lane-past-int") {
    good_store();
    exec_sql(path, "UPDATE lanes SET rank = -1 WHERE id = 1");
  }
  if (kind == "names-lost") {
    good_store();
    exec_sql(path, "DELETE FROM strings WHERE id = 1");
  }
  if (kind == "lane-of-no-kind") {
    good_store();
    exec_sql(path, "UPDATE lanes SET kind = 99");
  }
  if (kind == "lane-count-past-events") {
    good_store();
    exec_sql(path, "UPDATE lane_stats SET event_count = 4294967296 WHERE lane = 1");
  }
  if (kind == "lane-count-negative") {
    good_store();
    exec_sql(path, "UPDATE lane_stats SET event_count = -100 WHERE lane = 1");
  }
  if (kind == "lane-count-text") {
    good_store();
    exec_sql(path, "UPDATE lane_stats SET event_count = '30000 events' WHERE lane = 1");
  }
  if (kind == "lanes-count-past-events") {
    good_store();
    exec_sql(path, "UPDATE lane_stats SET event_count = (SELECT max(id) FROM events)");
  }
  if (kind == "segment-past-events") {
    good_store();
    exec_sql(path,
             "UPDATE meta SET value = '0' WHERE key = 'finalized'; "
             "UPDATE segments SET last_id = 1000000000 WHERE lane = 1 AND first_id = "
             "(SELECT min(first_id) FROM segments WHERE lane = 1)");
  }
  if (kind == "schema-damaged") {
    good_store();
    exec_sql(path,
             "PRAGMA writable_schema = 1; UPDATE sqlite_master SET sql = 'CREATEtVIEW event_view "
             "AS SELECT 1' WHERE name = 'event_view'");
  }
  if (kind == "directory") {
    path = dir.path().toStdString();
  }
  if (kind == "none") path = temp_path(dir, "missing.cstrace");
  if (kind == "fifo") QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
  auto contents = [&] {
    QFile f(QString::fromStdString(path));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  const bool regular = std::filesystem::is_regular_file(path);
  const QByteArray before = regular ? contents() : QByteArray();

  auto r = TraceReader::open(path);
  QVERIFY(!r);
  // What it refuses, it leaves as it was.
  if (regular) QVERIFY(contents() == before);
  const QString got = QString::fromStdString(r.message());
  QVERIFY2(got.contains(QString::fromStdString(path)), qPrintable(got));
  QVERIFY2(got.contains(message), qPrintable(got));
  // The file's own checks say the same when inspected; a rank's or a lane's
  // rows, and an unfinished store's segments, are the reader's to check.
  if (!kind.startsWith("rank") && !kind.startsWith("lane") && !kind.startsWith("segment") &&
      kind != "names-lost")
    QCOMPARE(QString::fromStdString(inspect_store(path).message()), got);
}

// A rollback journal beside a store: a process that died inside a write
// transaction (a tool editing the store, a copy taken mid-write), or stray
// bytes. SQLite reads nothing read-only until it is rolled back ("attempt to
// write a readonly database"); the reader rolls it back once and reads the
// store as it was before that write.
void TestTraceStore::readsPastAJournalLeftBeside_data() {
  QTest::addColumn<bool>("hot");
  QTest::addRow("a write that died half way") << true;
  QTest::addRow("stray bytes") << false;
}

void TestTraceStore::readsPastAJournalLeftBeside() {
  QFETCH(bool, hot);
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "j.cstrace");
  const Written written = write_store(path, {Pattern::uniform}, 2000);
  if (hot) {
    const pid_t child = fork();
    if (child == 0) {
      // Change the status in a transaction that never ends: the journal
      // holds the page as it was.
      sqlite3* db = nullptr;
      sqlite3_open(path.c_str(), &db);
      sqlite3_exec(db,
                   "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 1; BEGIN; "
                   "UPDATE meta SET value = 'edited' WHERE key = 'status'; "
                   "DELETE FROM chunks;",
                   nullptr, nullptr, nullptr);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
  } else {
    std::ofstream junk(path + "-journal", std::ios::binary);
    for (int i = 0; i < 5000; ++i)
      junk << "0123456789";
  }
  QVERIFY(std::filesystem::file_size(path + "-journal") > 0);
  auto r = TraceReader::open(path);
  QVERIFY2(r, r ? "" : r.message().c_str());
  QCOMPARE((*r)->event_count(), static_cast<std::int64_t>(written.events.size()));
  QVERIFY((*r)->meta("status").value_or("") != "edited");
}

// A step row that ends before it starts (an edited or damaged store) is
// named, not turned into a negative step time.
void TestTraceStore::stepEndingBeforeItStartsIsDamage() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "s.cstrace");
  write_store(path, {Pattern::uniform}, 100);
  exec_sql(path,
           "INSERT INTO steps VALUES(0, 1, 1000, 2000, 2.5, 64, 0);"
           "INSERT INTO steps VALUES(0, 2, 3000, 1000, 2.4, 64, 0);");
  auto r = open_reader(path);
  auto steps = r->steps();
  QVERIFY(!steps);
  QCOMPARE(QString::fromStdString(steps.message()),
           QString::fromStdString(path) + " is damaged: step 2 of rank 0 ends before it starts");
  // The check (trace info --check) says it too: it found nothing wrong
  // while the analyses refused the store.
  r.reset();
  const cs::Status verified = verify_store(path);
  QVERIFY(!verified);
  QCOMPARE(QString::fromStdString(verified.message()),
           QString::fromStdString(path) + " is damaged: step 2 of rank 0 ends before it starts");

  // Names past the end of the strings table (its last rows lost) read as
  // "", and nameless kernels merged into one; the check found nothing.
  const std::string cut = temp_path(dir, "cut.cstrace");
  write_store(cut, {Pattern::uniform}, 100);
  exec_sql(cut, "DELETE FROM strings WHERE id = (SELECT max(id) FROM strings)");
  const cs::Status names = verify_store(cut);
  QVERIFY(!names);
  QVERIFY2(QString::fromStdString(names.message())
               .contains(QString::fromStdString(cut) +
                         " is damaged: its events and counters use name ids up to "),
           names.message().c_str());
}

// A writer destroyed while an exception unwinds (a rank that failed) closes
// its store as failed; it used to say complete.
void TestTraceStore::writerDroppedByAnExceptionSaysFailed() {
  QTemporaryDir dir;
  const std::string path = temp_path(dir, "unwound.cstrace");
  try {
    auto created = TraceWriter::create(path, RunInfo{"unwound", "test"});
    QVERIFY(created);
    std::unique_ptr<TraceWriter> w = std::move(created).value();
    w->add_lane(0, LaneKind::cpu_thread, "main thread", 0);
    throw std::runtime_error("a rank failed");
  } catch (const std::runtime_error&) {
  }
  QCOMPARE(open_reader(path)->meta("status").value_or(""), std::string("failed"));
}

// A store cut short in place while a reader has it open (a copy over it, a
// scp in progress): reads past the new end fail with an error. Through
// memory-mapped pages they raised SIGBUS, and the app died.
void TestTraceStore::storeCutShortWhileOpen() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("open.db"));
  QVERIFY(QFile::copy(CS_SOURCE_DIR "/tests/data/cpu/cpu-engine-dp2.db", path));
  QVERIFY(QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner));
  {
    auto upgraded = TraceReader::open(path.toStdString());  // to this schema, while whole
    QVERIFY2(upgraded, upgraded ? "" : upgraded.message().c_str());
  }
  auto reader = TraceReader::open(path.toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  const TimeRange range = (*reader)->time_range();
  QVERIFY(!(*reader)->lanes().empty());
  // Cut while a query reads it (one read transaction), as the timeline's
  // loading thread was when the copy began.
  bool cut = false;
  std::int64_t after = 0;
  const cs::Status scanned =
      (*reader)->for_each_event({}, range.start_ns, range.end_ns + 1, [&](const StoredEvent&) {
        if (!cut) cut = ::truncate(path.toUtf8().constData(), 64 * 1024) == 0;
        ++after;
        return true;
      });
  QVERIFY(cut);
  // Surviving is the check (SIGBUS ended the process); the events read
  // past the cut are the pages the reader held already, or none.
  if (!scanned.ok()) {
    QVERIFY2(QString::fromStdString(scanned.message()).contains("open.db"),
             scanned.message().c_str());
  }
  QVERIFY(after > 0);
}

QTEST_GUILESS_MAIN(TestTraceStore)
#include "tst_trace_store.moc"
