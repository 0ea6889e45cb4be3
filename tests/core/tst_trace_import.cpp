// Importers on real files: an Nsight Systems 2022.2 SQLite export of an MPI +
// CUDA program; PyTorch profiler (Kineto) traces of real distributed runs,
// imported and analysed with the breakdown checked against numbers computed
// independently from the JSON (tests/core/kineto_reference.py). Newer nsys
// exports are exercised by a file shaped like one (META_DATA_EXPORT,
// versioned table, extra and missing columns), and a missing required column
// must be reported by table and name.

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <sqlite3.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/trace_analysis.h"
#include "core/trace_export.h"
#include "core/trace_import.h"
#include "core/trace_import_internal.h"
#include "core/trace_reader.h"
#include "core/utf8.h"

using namespace cs::trace;

namespace {

const std::string kNsys = CS_DATA_DIR "/validation/nsys/saxpy-mpi-cuda.sqlite";
// What it imports: 5 kernels, 15 copies, 57 runtime calls (of 95 rows, 38
// the backtraces of calls) and 22 NVTX ranges.
constexpr std::int64_t kNsysEvents = 5 + 15 + 57 + 22;
const std::string kKineto = CS_DATA_DIR "/validation/kineto/";

std::unique_ptr<TraceReader> open_reader(const std::string& path) {
  auto r = TraceReader::open(path);
  if (!r) qFatal("%s", r.message().c_str());
  return std::move(r).value();
}

std::map<EventKind, std::int64_t> count_kinds(const TraceReader& r) {
  std::map<EventKind, std::int64_t> out;
  (void)r.for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    ++out[e.event.kind];
    return true;
  });
  return out;
}

void exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string m = error ? error : "?";
    sqlite3_free(error);
    qFatal("%s: %s", sql.c_str(), m.c_str());
  }
}

// An export shaped like Nsight Systems 2024: the metadata table is
// META_DATA_EXPORT, the kernel table carries a version suffix, columns are in
// another order, some are new and some old ones are gone.
std::string write_newer_nsys(const QTemporaryDir& dir, bool with_stream_id) {
  const std::string path =
      dir.filePath(with_stream_id ? "newer.sqlite" : "broken.sqlite").toStdString();
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  exec(db, R"sql(
    CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
    INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.11.0'),
                                        ('EXPORT_PRODUCT_VERSION', '2024.2.1.106');
    CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'ncclDevKernel_AllGather_RING_LL'),
                                 (3, 'cudaLaunchKernel_v7000'), (4, 'MPI Rank 3'),
                                 (5, 'forward'), (6, 'cudaStreamSynchronize_v3020'),
                                 (7, 'cudaLaunchKernel');
    CREATE TABLE ENUM_NSYS_EVENT_CLASS(id INTEGER, name TEXT, label TEXT);
    INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (0, 'TRACE_PROCESS_EVENT_CUDA_RUNTIME', ''),
      (1, 'TRACE_PROCESS_EVENT_CUDA_DRIVER', ''), (67, 'TRACE_PROCESS_EVENT_CUDABACKTRACE', '');
    CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
    INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');
    CREATE TABLE ThreadNames(nameId INTEGER, priority INTEGER, globalTid INTEGER);
    INSERT INTO ThreadNames VALUES (4, 10, 16777216 * 4242 + 4242);
    -- An older table left beside the versioned one must not be read.
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER);
    INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(
      eventClass INTEGER, start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER,
      correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER, callchainId INTEGER,
      newerColumn TEXT);
    INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
      (0, 1000, 1500, 16777216 * 4242 + 4242, 7, 3, 0, NULL, 'x'),
      (67, 990, 1510, 16777216 * 4242 + 4242, 7, 7, 0, 1, 'x'),  -- its backtrace
      (0, 1600, 1700, 16777216 * 4242 + 4242, 8, 3, 0, NULL, 'x'),
      (0, 1800, 9000, 16777216 * 4242 + 4242, 9, 6, 0, NULL, 'x');
    CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
      rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
      endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, jsonTextId INTEGER, newField REAL);
    INSERT INTO NVTX_EVENTS(start, end, eventType, text, textId, globalTid, domainId) VALUES
      (900, 9500, 59, NULL, 5, 16777216 * 4242 + 4242, 0),
      (950, NULL, 34, 'a mark', NULL, 16777216 * 4242 + 4242, 0);
  )sql");
  exec(db, std::string("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL_V3(") +
               "gridId INTEGER, shortName INTEGER NOT NULL, end INTEGER NOT NULL, "
               "start INTEGER NOT NULL, deviceId INTEGER NOT NULL, " +
               (with_stream_id ? "streamId INTEGER NOT NULL, " : "") +
               "correlationId INTEGER, launchType INTEGER, isCooperative INTEGER);");
  if (with_stream_id) {
    exec(db,
         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL_V3(gridId, shortName, end, start, deviceId, "
         "streamId, correlationId) VALUES (1, 1, 4000, 2000, 0, 7, 7), (2, 2, 8000, 3000, 0, 13, "
         "8)");
  }
  sqlite3_close(db);
  return path;
}

// The Python reference's numbers (tests/core/kineto_reference.py).
struct Reference {
  const char* file;
  std::int32_t rank;
  std::int64_t imported, device_events, span, busy, compute, communication, overlap, memory,
      exposed_memory, idle, host_wait, kernel_wait, idle_other;
  int steps;
};
const Reference kReferences[] = {
    {"sampled_rank-0.json.gz", 0, 4810, 1204, 1222847000, 547656000, 210320000, 396199000, 59216000,
     1325000, 353000, 675191000, 362945000, 0, 312246000, 2},
    {"sampled_rank-1.json.gz", 1, 4675, 1154, 1231186000, 580050000, 271973000, 379053000, 75530000,
     16504000, 4554000, 651136000, 341109000, 0, 310027000, 2},
    {"allreduce_rank-0.json.gz", 0, 26932, 3774, 660551005, 157500014, 115655847, 46876493, 7317025,
     2653498, 2284699, 503050991, 501050857, 0, 2000134, 3},
};

// The same reference's launch statistics, in the order of kReferences.
struct LaunchReference {
  std::int64_t launches, short_kernels, runtime_outliers, delay_outliers;
  double call_median, call_p95, delay_median, delay_p95, delay_max;
};
const LaunchReference kLaunchReferences[] = {
    {1204, 282, 2, 937, 7000, 17000, 10835000, 66195000, 111018000},
    {1154, 278, 0, 880, 7000, 18000, 11886000, 72314000, 120824000},
    {3774, 2077, 1, 267, 9153, 12748, 1956, 126552, 964931},
};

void check_breakdown(const Breakdown& b, const Reference& ref) {
  QCOMPARE(b.events, ref.device_events);
  QCOMPARE(b.span_ns, ref.span);
  QCOMPARE(b.busy_ns, ref.busy);
  QCOMPARE(b.compute_ns, ref.compute);
  QCOMPARE(b.communication_ns, ref.communication);
  QCOMPARE(b.overlap_ns, ref.overlap);
  QCOMPARE(b.memory_ns, ref.memory);
  QCOMPARE(b.exposed_memory_ns, ref.exposed_memory);
  QCOMPARE(b.idle_ns, ref.idle);
  QCOMPARE(b.idle_host_wait_ns, ref.host_wait);
  QCOMPARE(b.idle_kernel_wait_ns, ref.kernel_wait);
  QCOMPARE(b.idle_other_ns, ref.idle_other);
}

}  // namespace

class TestTraceImport : public QObject {
  Q_OBJECT

 private slots:
  void nsysRealExport();
  void nsysRealExportAnalysed();
  void nsysNewerExport();
  void nsysProcessesOfNvtxRangesOnly();
  void nsysStepsFromNvtxRanges();
  void dataTypeNames_data();
  void dataTypeNames();
  void textThatIsNotUtf8_data();
  void textThatIsNotUtf8();
  void nsysMissingRequiredColumn();
  void nsysDamagedExport_data();
  void nsysDamagedExport();
  void nsysDamagedPage_data();
  void nsysDamagedPage();
  void nsysRankPastAnInt();
  void nsysFilesOfUnnamedProcesses_data();
  void nsysFilesOfUnnamedProcesses();
  void nsysNamesLongerThanAny_data();
  void nsysNamesLongerThanAny();
  void nsysTimePastAnInt64();
  void kinetoRealTraces_data();
  void kinetoRealTraces();
  void kinetoTimestampsExact();
  void kinetoNumbersPastAnInt64_data();
  void kinetoNumbersPastAnInt64();
  void kinetoBareNonFiniteReadAsNull_data();
  void kinetoBareNonFiniteReadAsNull();
  void kinetoCollectives();
  void kinetoRanksMerged();
  void kernelLaunchesKept();
  void kinetoBaseTimeAlignsRanks();
  void kinetoPlainJsonAndErrors();
  void kinetoDistributedInfoThatContradicts_data();
  void kinetoDistributedInfoThatContradicts();
  void kinetoDistributedInfoAsReals_data();
  void kinetoDistributedInfoAsReals();
  void kinetoRanksOfTwoRunsRefused();
  void kinetoIdsWrittenAsReals();
  void kinetoStreamsNamedAsText();
  void kinetoStepsFromAnnotations_data();
  void kinetoStepsFromAnnotations();
  void kinetoDeviceNamesById_data();
  void kinetoDeviceNamesById();
  void kinetoGemmWorkFromShapes_data();
  void kinetoGemmWorkFromShapes();
  void kinetoGemmWorkOfARealTrace();
  void kinetoTextPastItsBound_data();
  void kinetoTextPastItsBound();
  void chromeArrayAndDurationEvents_data();
  void chromeArrayAndDurationEvents();
  void formatDetection();
};

void TestTraceImport::nsysRealExport() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("saxpy.cstrace").toStdString();
  auto report = import_nsys({kNsys}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->format, std::string("nsys"));
  QCOMPARE(report->ranks, 1);
  // Of the 95 runtime rows, 38 are the backtraces nsys took of the program's
  // own calls (event class 67): each repeats a call (cudaMemcpy around
  // cudaMemcpy_v3020, one correlation id), and counted twice, they doubled
  // the CUDA API time of `trace stats`.
  QCOMPARE(report->events, kNsysEvents);
  QCOMPARE(report->skipped["CUDA backtrace records (each repeats a call, to give its stack)"], 38);
  // Of the 24 NVTX_EVENTS rows, 22 are push/pop ranges; one registers the
  // "MPI" domain (type 75), one names the thread "MPI Rank 0" (type 39).
  QCOMPARE(report->skipped["NVTX domain registrations"], 1);
  QCOMPARE(report->skipped["NVTX records other than ranges (marks, thread names, ...)"], 1);

  // A kernel that ends before it starts (an edited or damaged export) is
  // left out and counted, as the Kineto import does; it was imported
  // silently and vanished from the analyses.
  {
    const std::string edited = dir.filePath("edited.sqlite").toStdString();
    std::filesystem::copy_file(kNsys, edited);
    sqlite3* db = nullptr;
    sqlite3_open(edited.c_str(), &db);
    exec(db, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000000 "
             "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)");
    sqlite3_close(db);
    auto backwards = import_nsys({edited}, dir.filePath("edited.cstrace").toStdString());
    QVERIFY2(backwards, backwards ? "" : backwards.message().c_str());
    QCOMPARE(backwards->events, report->events - 1);
    QCOMPARE(backwards->skipped["records that end before they start"], 1);
  }
  // A time that is not a whole number of nanoseconds is left out and
  // counted: it read as 0, and the saxpy kernels became 96 % of the time.
  {
    const std::string edited = dir.filePath("text-times.sqlite").toStdString();
    std::filesystem::copy_file(kNsys, edited);
    sqlite3* db = nullptr;
    sqlite3_open(edited.c_str(), &db);
    exec(db, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc'");
    exec(db, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = 1.5 "
             "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME)");
    // Whole numbers stored as reals (a table other tools rebuilt without
    // INTEGER columns) are kept.
    exec(db, "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY RENAME TO memcpy_integers; "
             "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY AS SELECT CAST(start AS REAL) AS start, "
             "CAST(end AS REAL) AS end, deviceId, contextId, streamId, correlationId, globalPid, "
             "bytes, copyKind FROM memcpy_integers; DROP TABLE memcpy_integers");
    sqlite3_close(db);
    auto text = import_nsys({edited}, dir.filePath("text-times.cstrace").toStdString());
    QVERIFY2(text, text ? "" : text.message().c_str());
    QCOMPARE(text->events, report->events - 6);
    QCOMPARE(text->skipped["records whose start or end is not a whole number of nanoseconds"], 6);
  }

  auto r = open_reader(out);
  const auto kinds = count_kinds(*r);
  QCOMPARE(kinds.at(EventKind::kernel), 5);
  QCOMPARE(kinds.at(EventKind::memcpy), 15);
  QCOMPARE(kinds.at(EventKind::api_call), 57);  // no synchronising call in this program
  QCOMPARE(kinds.at(EventKind::annotation), 22);
  QCOMPARE(kinds.size(), std::size_t{4});

  QCOMPARE(r->ranks().size(), std::size_t{1});
  const RankInfo& rank = r->ranks()[0];
  QCOMPARE(rank.rank, 0);  // from the "MPI Rank 0" thread name
  QCOMPARE(rank.host, std::string("nid001608"));
  QCOMPARE(rank.device, std::string("NVIDIA A100-SXM4-40GB (GPU 0)"));
  QCOMPARE(rank.pid, 1230493);
  const RunInfo run = r->run();
  QCOMPARE(run.source, std::string("nsys-import"));
  QCOMPARE(run.start_utc_ns, 1687813257637297504);
  QCOMPARE(run.tool_versions_json, std::string(R"({"nsight-systems": "2022.2.1.31"})"));
  QCOMPARE(r->meta("nsys_export_schema_version"), std::optional<std::string>("2.9.1"));

  std::map<std::string, LaneKind> lanes;
  for (const LaneInfo& l : r->lanes())
    lanes[l.name] = l.kind;
  QCOMPARE(lanes.at("GPU 0 stream 7"), LaneKind::gpu_stream);
  QCOMPARE(lanes.at("thread 1230493 (MPI Rank 0)"), LaneKind::cpu_thread);
  QCOMPARE(lanes.at("NVTX MPI (thread 1230493)"), LaneKind::annotation);
  QCOMPARE(lanes.at("NVTX default (thread 1230493)"), LaneKind::annotation);

  auto kernels =
      r->find_events("saxpy(double *, double *, double *, double, int)", NameMatch::exact, 100);
  QCOMPARE(kernels->size(), std::size_t{5});
  const Event& k = kernels->front().event;
  QCOMPARE(k.start_ns, 1687813257637297504 + 924922186);  // session start + offset
  QCOMPARE(k.end_ns, 1687813257637297504 + 942626994);
  QCOMPARE(k.correlation, 140);
  QCOMPARE(k.category, Category::compute);
  // Named as `nsys stats` and the CUPTI tracer name them, without the
  // version the export appends (cudaLaunchKernel_v7000).
  auto launches = r->find_events("cudaLaunchKernel", NameMatch::exact, 100);
  QCOMPARE(launches->size(), std::size_t{5});
  QCOMPARE(launches->front().event.correlation, 140);
  QCOMPARE(r->find_events("cudaMemcpy", NameMatch::exact, 100)->size(), std::size_t{15});
  QVERIFY(r->find_events("_v", NameMatch::substring, 100)->empty());
  auto copies = r->find_events("Memcpy HtoD", NameMatch::exact, 100);
  QCOMPARE(copies->size(), std::size_t{10});
  QCOMPARE(copies->front().event.bytes, 262144000);
  QCOMPARE(r->find_events("Memcpy DtoH", NameMatch::exact, 100)->size(), std::size_t{5});
  QCOMPARE(r->find_events("MPI_Init", NameMatch::exact, 100)->size(), std::size_t{1});
  QCOMPARE(r->find_events("saxpy", NameMatch::exact, 100)->size(), std::size_t{5});  // NVTX ranges
}

// Sums straight from the export with sqlite3 (kernels and copies run one at a
// time on one stream, so their unions are their sums):
//   SELECT sum(end-start) FROM CUPTI_ACTIVITY_KIND_KERNEL        -> 88573480
//   SELECT sum(end-start) FROM CUPTI_ACTIVITY_KIND_MEMCPY        -> 284699600
//   first GPU start 887857742 (a copy), last GPU end 1985185585 (a copy)
void TestTraceImport::nsysRealExportAnalysed() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("saxpy.cstrace").toStdString();
  QVERIFY(import_nsys({kNsys}, out));
  auto r = open_reader(out);
  auto a = analyze_rank(*r, 0);
  QVERIFY2(a, a ? "" : a.message().c_str());
  QCOMPARE(a->total.span_ns, 1985185585 - 887857742);
  QCOMPARE(a->total.compute_ns, 88573480);
  QCOMPARE(a->total.memory_ns, 284699600);
  QCOMPARE(a->total.busy_ns, 88573480 + 284699600);
  QCOMPARE(a->total.communication_ns, 0);
  QCOMPARE(a->total.events, 20);
  QCOMPARE(a->total.idle_ns, a->total.span_ns - a->total.busy_ns);
  // The copies are synchronous cudaMemcpy calls: each gap ends with work the
  // host launched after the device went idle.
  QCOMPARE(a->total.idle_host_wait_ns + a->total.idle_kernel_wait_ns + a->total.idle_other_ns,
           a->total.idle_ns);
  QVERIFY(a->total.idle_host_wait_ns > 0);

  // HTA's launch statistics hold the 5 saxpy kernels and their
  // cudaLaunchKernel calls. The 15 copies were synchronous cudaMemcpy calls,
  // each lasting its whole copy: they had been counted as 15 more launches,
  // with a median delay of -18.5 ms and 75% of calls "over 50 us". Each
  // call is the runtime row of class 0, "cudaLaunchKernel_v7000" (the
  // backtrace's row around it, which had been taken for the call, is left
  // out): SELECT end - start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId =
  // 672 gives 30138, 30609, 31361, 32953, 35268; their kernels start
  // -2569, -940, 1393, 1864, 1962 ns after the calls end.
  QCOMPARE(a->launches.launches, 5);
  QCOMPARE(a->launches.synchronous_left_out, 15);
  QCOMPARE(a->launches.short_kernels, 0);
  QCOMPARE(a->launches.runtime_outliers, 0);
  QCOMPARE(a->launches.delay_outliers, 0);
  QCOMPARE(a->launches.call_median_ns, 31361.0);
  QCOMPARE(a->launches.call_p95_ns, 35268.0);
  QCOMPARE(a->launches.delay_median_ns, 1393.0);
  QCOMPARE(a->launches.delay_max_ns, 1962.0);
}

// The dtype names PyTorch and NCCL write, as a collective's element type.
void TestTraceImport::dataTypeNames_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<int>("type");
  QTest::addRow("Float") << "Float" << int(DataType::fp32);
  QTest::addRow("BFloat16") << "BFloat16" << int(DataType::bf16);
  QTest::addRow("Half") << "Half" << int(DataType::fp16);
  QTest::addRow("Float8_e4m3fn") << "Float8_e4m3fn" << int(DataType::fp8_e4m3);
  // AMD's FP8 variants: another range, the same size.
  QTest::addRow("Float8_e4m3fnuz") << "Float8_e4m3fnuz" << int(DataType::fp8_e4m3);
  QTest::addRow("Float8_e5m2fnuz") << "Float8_e5m2fnuz" << int(DataType::fp8_e5m2);
  QTest::addRow("unknown") << "Quaternion" << int(DataType::none);
}

void TestTraceImport::dataTypeNames() {
  QFETCH(QString, name);
  QFETCH(int, type);
  QCOMPARE(int(importing::data_type_from_any(name.toStdString())), type);
}

void TestTraceImport::textThatIsNotUtf8_data() {
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<QByteArray>("kept");
  const QByteArray fffd("\xEF\xBF\xBD");
  QTest::addRow("valid, multibyte") << QByteArray("1 \xE2\x82\xAC") << QByteArray("1 \xE2\x82\xAC");
  QTest::addRow("stray byte") << QByteArray("sax\x9Fpy") << ("sax" + fffd + "py");
  QTest::addRow("overlong slash") << QByteArray("a\xC0\xAF") << ("a" + fffd + fffd);
  QTest::addRow("surrogate") << QByteArray("\xED\xA0\x80") << (fffd + fffd + fffd);
  QTest::addRow("cut short") << QByteArray("x\xE2\x82") << ("x" + fffd + fffd);
  QTest::addRow("past U+10FFFF") << QByteArray("\xF4\x90\x80\x80") << (fffd + fffd + fffd + fffd);
}

// Names in another program's export need not be UTF-8 (an Nsight Systems
// string table can hold any bytes). The store keeps UTF-8 (U+FFFD for what
// is not), so that its JSON and HTML exports, the CLI's --json and the app
// read it: a name with a stray byte made `trace stats --json` throw.
void TestTraceImport::textThatIsNotUtf8() {
  QFETCH(QByteArray, bytes);
  QFETCH(QByteArray, kept);
  QCOMPARE(QByteArray::fromStdString(cs::valid_utf8(bytes.toStdString())), kept);
  QCOMPARE(cs::is_valid_utf8(bytes.toStdString()), bytes == kept);

  QTemporaryDir dir;
  const std::string edited = dir.filePath("names.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, edited);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(edited.c_str(), &db), SQLITE_OK);
  // The kernel's names: short (671, "saxpy") and demangled (670).
  sqlite3_stmt* st = nullptr;
  QCOMPARE(sqlite3_prepare_v2(db,
                              "UPDATE StringIds SET value = CAST(? AS TEXT) WHERE id IN (670, 671)",
                              -1, &st, nullptr),
           SQLITE_OK);
  sqlite3_bind_blob(st, 1, bytes.constData(), int(bytes.size()), SQLITE_TRANSIENT);
  QCOMPARE(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
  const std::string store = dir.filePath("names.cstrace").toStdString();
  auto imported = import_nsys({edited}, store);
  QVERIFY2(imported, imported ? "" : imported.message().c_str());
  auto r = open_reader(store);
  QVERIFY(r->find_string(kept.toStdString()).has_value());

  const std::string chrome = dir.filePath("names.json").toStdString();
  const std::string report = dir.filePath("names.html").toStdString();
  QVERIFY(export_chrome_trace(*r, chrome));
  auto analysis = analyze_run(*r);
  QVERIFY(analysis);
  QVERIFY(export_html_report(*r, *analysis, report));
  for (const std::string& path : {chrome, report}) {
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray text = f.readAll();
    QVERIFY2(cs::is_valid_utf8(text.toStdString()), path.c_str());
    QVERIFY2(text.contains(kept), path.c_str());
  }
}

void TestTraceImport::nsysNewerExport() {
  QTemporaryDir dir;
  const std::string in = write_newer_nsys(dir, true);
  const std::string out = dir.filePath("newer.cstrace").toStdString();
  auto report = import_traces({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->format, std::string("nsys"));
  QCOMPARE(report->events, 2 + 3 + 1);
  QCOMPARE(report->skipped["NVTX records other than ranges (marks, thread names, ...)"], 1);
  QCOMPARE(report->skipped["CUDA backtrace records (each repeats a call, to give its stack)"], 1);
  auto r = open_reader(out);
  QCOMPARE(r->ranks().size(), std::size_t{1});
  QCOMPARE(r->ranks()[0].rank, 3);
  QCOMPARE(r->ranks()[0].pid, 4242);
  QCOMPARE(r->meta("nsys_export_schema_version"), std::optional<std::string>("3.11.0"));
  QCOMPARE(r->run().tool_versions_json, std::string(R"({"nsight-systems": "2024.2.1.106"})"));
  auto gemm = r->find_events("gemm_kernel", NameMatch::exact, 10);
  QCOMPARE(gemm->size(), std::size_t{1});
  QCOMPARE(gemm->front().event.start_ns, 1700000000000002000);
  QCOMPARE(gemm->front().event.correlation, 7);
  auto nccl = r->find_events("ncclDevKernel_AllGather_RING_LL", NameMatch::exact, 10);
  QCOMPARE(nccl->size(), std::size_t{1});
  QCOMPARE(nccl->front().event.kind, EventKind::collective);
  QCOMPARE(nccl->front().event.category, Category::communication);
  QCOMPARE(nccl->front().event.collective, Collective::all_gather);
  const auto kinds = count_kinds(*r);
  QCOMPARE(kinds.at(EventKind::sync), 1);  // cudaStreamSynchronize
  QCOMPARE(kinds.at(EventKind::api_call), 2);
  QCOMPARE(r->find_events("cudaLaunchKernel", NameMatch::exact, 10)->size(), std::size_t{2});
  QCOMPARE(kinds.at(EventKind::annotation), 1);
  auto a = analyze_rank(*r, 3);
  QVERIFY(a);
  QCOMPARE(a->total.overlap_ns, 1000);  // gemm [2000,4000) under all-gather [3000,8000)
}

// Processes that recorded NVTX ranges and no CUDA work: one that is an MPI
// rank (a rank computing on its host) is a rank of its own; another (a
// launcher, a data loader) is no rank, and its ranges are shown under the
// first process's rank in lanes that name it, with a warning. Every such
// range went to the first rank, in a lane that named its thread only.
void TestTraceImport::nsysProcessesOfNvtxRangesOnly() {
  QTemporaryDir dir;
  const std::string in = write_newer_nsys(dir, true);
  {
    sqlite3* db = nullptr;
    sqlite3_open(in.c_str(), &db);
    exec(db, R"sql(
      INSERT INTO StringIds VALUES (8, 'MPI Rank 1'), (9, 'load batch');
      INSERT INTO ThreadNames VALUES (8, 10, 16777216 * 5000 + 5001);
      INSERT INTO NVTX_EVENTS(start, end, eventType, text, textId, globalTid, domainId) VALUES
        (1000, 2000, 59, NULL, 5, 16777216 * 5000 + 5001, 0),
        (1500, 2500, 59, NULL, 9, 16777216 * 6000 + 6007, 0);
    )sql");
    sqlite3_close(db);
  }
  const std::string out = dir.filePath("nvtx-only.cstrace").toStdString();
  auto report = import_traces({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, 2 + 3 + 1 + 2);
  QCOMPARE(report->ranks, 2);
  const bool warned =
      std::any_of(report->warnings.begin(), report->warnings.end(), [](const std::string& w) {
        return w.find(
                   "process 6000 recorded NVTX ranges only and is no MPI rank: its ranges are "
                   "shown under rank 3") != std::string::npos;
      });
  QVERIFY(warned);
  auto r = open_reader(out);
  QCOMPARE(r->ranks().size(), std::size_t{2});
  std::map<std::int32_t, RankInfo> ranks;
  for (const RankInfo& info : r->ranks())
    ranks[info.rank] = info;
  QCOMPARE(ranks.at(1).pid, 5000);
  QCOMPARE(ranks.at(1).device, std::string("CPU (no CUDA activity recorded)"));
  QCOMPARE(ranks.at(3).pid, 4242);
  std::map<std::string, std::int32_t> lane_rank;
  for (const LaneInfo& l : r->lanes())
    lane_rank[l.name] = l.rank;
  QCOMPARE(lane_rank.at("NVTX default (thread 5001)"), 1);
  QCOMPARE(lane_rank.at("NVTX default (thread 4242)"), 3);
  QCOMPARE(lane_rank.at("NVTX default (thread 6007 of process 6000)"), 3);
  auto loads = r->find_events("load batch", NameMatch::exact, 10);
  QCOMPARE(loads->size(), std::size_t{1});
  QCOMPARE(loads->front().rank, 3);
}

// NVTX ranges named as a step (core/step_names.h) are the process's steps,
// as the CUPTI tracer takes them under `clusterscope profile`: the outermost
// ones of its first thread to start one; the others stay annotations.
void TestTraceImport::nsysStepsFromNvtxRanges() {
  QTemporaryDir dir;
  const std::string in = dir.filePath("steps.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, in);
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(in.c_str(), &db), SQLITE_OK);
    // The saxpy program's five iterations (its "saxpy" ranges start 924.9,
    // 1196.0, 1449.1, 1696.2 and 1947.7 ms into the session), on its main
    // thread, and one more on a second thread of the process.
    exec(db, R"sql(
      INSERT INTO NVTX_EVENTS(start, end, eventType, text, globalTid, domainId) VALUES
        (800000000, 1100000000, 59, 'iteration 0', 302119224788637, 0),
        (1100000000, 1350000000, 59, 'iteration 1', 302119224788637, 0),
        (1350000000, 1600000000, 59, 'iteration 2', 302119224788637, 0),
        (1600000000, 1850000000, 59, 'iteration 3', 302119224788637, 0),
        (1850000000, 2100000000, 59, 'iteration 4', 302119224788637, 0),
        (1200000000, 1210000000, 59, 'step 9', 302119224788638, 0),
        (1360000000, 1590000000, 59, 'step 2', 302119224788637, 0);
    )sql");
    sqlite3_close(db);
  }
  const std::string out = dir.filePath("steps.cstrace").toStdString();
  auto report = import_traces({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, kNsysEvents + 7);
  auto r = open_reader(out);
  auto windows = job_step_windows(*r);
  QVERIFY2(windows, windows ? "" : windows.message().c_str());
  QCOMPARE(windows->size(), std::size_t{5});
  for (std::size_t i = 0; i < windows->size(); ++i)
    QCOMPARE((*windows)[i].step, static_cast<std::int32_t>(i));
  auto analysis = analyze_run(*r);
  QVERIFY2(analysis, analysis ? "" : analysis.message().c_str());
  QCOMPARE(analysis->ranks.front().steps.size(), std::size_t{5});
  // Each iteration ran its saxpy kernel.
  for (const auto& step : analysis->ranks.front().steps)
    QVERIFY2(step.breakdown.compute_ns > 0, qPrintable(QString::number(step.step)));
  // Another thread's, and one inside a step of the main thread's, stay ranges.
  for (const char* name : {"step 9", "step 2"}) {
    auto other = r->find_events(name, NameMatch::exact, 10);
    QCOMPARE(other->size(), std::size_t{1});
    QCOMPARE(other->front().event.kind, EventKind::annotation);
  }
}

void TestTraceImport::nsysMissingRequiredColumn() {
  QTemporaryDir dir;
  const std::string in = write_newer_nsys(dir, false);
  auto report = import_nsys({in}, dir.filePath("x.cstrace").toStdString());
  QVERIFY(!report);
  const QString m = QString::fromStdString(report.message());
  QVERIFY2(m.contains(QString::fromStdString(in)) &&
               m.contains("table CUPTI_ACTIVITY_KIND_KERNEL_V3 has no column 'streamId', which "
                          "the import needs (Nsight Systems export schema 3.11.0)"),
           qPrintable(m));
  QVERIFY(!std::filesystem::exists(dir.filePath("x.cstrace").toStdString()));
}

void TestTraceImport::nsysDamagedExport_data() {
  QTest::addColumn<QString>("sql");   // run on a copy of the real export
  QTest::addColumn<int>("events");    // imported, against the real export's
  QTest::addColumn<QString>("said");  // in a warning or a reason for records left out
  QTest::addRow("StringIds a view")
      << "CREATE TABLE names AS SELECT * FROM StringIds; DROP TABLE StringIds; "
         "CREATE VIEW StringIds AS SELECT * FROM names"
      << 0 << "";
  QTest::addRow("a kernel before the session")
      << "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -5, end = -1 "
         "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
      << -1 << "records that start before the session (a negative start)";
  QTest::addRow("a kernel's name not in StringIds")
      << "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 987654321 "
         "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
      << 0 << "1 kernels or CUDA calls name a StringIds entry the export lacks";
  QTest::addRow("no kernel table") << "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL" << -5
                                   << "the export has no CUPTI_ACTIVITY_KIND_KERNEL table";
  QTest::addRow("no runtime table") << "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME" << -57
                                    << "the export has no CUPTI_ACTIVITY_KIND_RUNTIME table";
}

// An export someone reshaped or damaged imports what it holds and says what
// it could not (a view for StringIds was read through freed memory, a crash).
void TestTraceImport::nsysDamagedExport() {
  QFETCH(QString, sql);
  QFETCH(int, events);
  QFETCH(QString, said);
  QTemporaryDir dir;
  const std::string in = dir.filePath("damaged.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, in);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(in.c_str(), &db), SQLITE_OK);
  exec(db, sql.toStdString());
  sqlite3_close(db);
  const std::string out = dir.filePath("damaged.cstrace").toStdString();
  auto report = import_nsys({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, kNsysEvents + events);
  QStringList text;
  for (const std::string& w : report->warnings)
    text << QString::fromStdString(w);
  for (const auto& [reason, count] : report->skipped)
    text << QString::fromStdString(reason) + ": " + QString::number(count);
  if (!said.isEmpty()) QVERIFY2(text.join('\n').contains(said), qPrintable(text.join('\n')));
  if (QByteArray(QTest::currentDataTag()) == "a kernel's name not in StringIds") {
    QVERIFY(open_reader(out)->find_string("(name 987654321 not in StringIds)"));
  }
}

// A table whose page is damaged ("database disk image is malformed") fails
// the import by file and table, optional tables too: their rows read as
// ended at the damage, and a damaged session start imported the run at
// 1970 with exit 0, damaged thread names gave ranks from the file order.
// `setup` makes the table where the export lacks it.
void TestTraceImport::nsysDamagedPage_data() {
  QTest::addColumn<QString>("table");
  QTest::addColumn<QString>("setup");
  for (const char* table :
       {"TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_SYSTEM_ENV", "TARGET_INFO_GPU",
        "ThreadNames", "PROCESSES", "EXPORT_META_DATA", "StringIds", "CUPTI_ACTIVITY_KIND_KERNEL",
        "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"})
    QTest::addRow("%s", table) << table << "";
  QTest::addRow("MPI_RANKS") << "MPI_RANKS"
                             << "CREATE TABLE MPI_RANKS(globalTid INTEGER, rank INTEGER);"
                                "INSERT INTO MPI_RANKS SELECT DISTINCT globalTid, 3 "
                                "FROM CUPTI_ACTIVITY_KIND_RUNTIME";
  QTest::addRow("ENUM_CUDA_MEMCPY_OPER")
      << "ENUM_CUDA_MEMCPY_OPER"
      << "CREATE TABLE ENUM_CUDA_MEMCPY_OPER(id INTEGER PRIMARY KEY, name TEXT, label TEXT);"
         "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES(11, 'UVM_HTOD', 'Unified HtoD')";
}

void TestTraceImport::nsysDamagedPage() {
  QFETCH(QString, table);
  QFETCH(QString, setup);
  QTemporaryDir dir;
  const std::string in = dir.filePath("damaged.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, in);
  std::int64_t root = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(in.c_str(), &db), SQLITE_OK);
    if (!setup.isEmpty()) exec(db, setup.toStdString());
    sqlite3_stmt* stmt = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db,
                                "SELECT rootpage, (SELECT page_size FROM pragma_page_size) "
                                "FROM sqlite_master WHERE name = ?",
                                -1, &stmt, nullptr),
             SQLITE_OK);
    sqlite3_bind_text(stmt, 1, qPrintable(table), -1, SQLITE_TRANSIENT);
    QCOMPARE(sqlite3_step(stmt), SQLITE_ROW);
    root = sqlite3_column_int64(stmt, 0);
    page_size = sqlite3_column_int64(stmt, 1);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  QVERIFY(root > 1);
  // The table's root page overwritten, as a disk or a copy cut short would.
  QFile f(QString::fromStdString(in));
  QVERIFY(f.open(QIODevice::ReadWrite));
  QVERIFY(f.seek((root - 1) * page_size));
  QCOMPARE(f.write(QByteArray(static_cast<int>(page_size), '\xff')), page_size);
  f.close();

  const std::string out = dir.filePath("damaged.cstrace").toStdString();
  auto report = import_nsys({in}, out);
  QVERIFY(!report);
  QCOMPARE(QString::fromStdString(report.message()), QString::fromStdString(in) +
                                                         " is damaged: cannot read " + table +
                                                         " (database disk image is malformed)");
  QVERIFY(!std::filesystem::exists(out));
}

// A thread named "MPI Rank N" with N past an int names no rank (std::stoi
// threw, an internal error): the process takes its rank from the file's
// order, with the warning a process with no such name gets.
void TestTraceImport::nsysRankPastAnInt() {
  QTemporaryDir dir;
  const std::string in = dir.filePath("rank.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, in);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(in.c_str(), &db), SQLITE_OK);
  exec(db, "UPDATE StringIds SET value = 'MPI Rank 99999999999' WHERE value = 'MPI Rank 0'");
  QCOMPARE(sqlite3_changes(db), 1);
  sqlite3_close(db);
  const std::string out = dir.filePath("rank.cstrace").toStdString();
  auto report = import_nsys({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QVERIFY(report->events > 0);
  QVERIFY(std::any_of(report->warnings.begin(), report->warnings.end(), [](const std::string& w) {
    return w.find("has no \"MPI Rank N\" thread name: rank 0 from the file order") !=
           std::string::npos;
  }));
  QCOMPARE(open_reader(out)->ranks().front().rank, 0);
}

// `nsys profile torchrun --nproc-per-node 2` on each of two nodes: two
// exports of two processes each, the second's naming no rank. Its ranks
// follow those of the first file, one past the highest: they had been
// numbered from 1, the file's index, and the import failed ("rank 1 is in
// both node0.sqlite and node1.sqlite").
void TestTraceImport::nsysFilesOfUnnamedProcesses_data() {
  QTest::addColumn<int>("first_named");  // the first file's first MPI rank; -1: unnamed
  QTest::addColumn<QList<int>>("ranks");
  QTest::addRow("neither file names its ranks") << -1 << QList<int>{0, 1, 2, 3};
  QTest::addRow("the first names ranks 1 and 2") << 1 << QList<int>{1, 2, 3, 4};
}

void TestTraceImport::nsysFilesOfUnnamedProcesses() {
  QFETCH(int, first_named);
  QFETCH(QList<int>, ranks);
  QTemporaryDir dir;
  std::vector<std::string> files;
  for (int node = 0; node < 2; ++node) {
    files.push_back(dir.filePath(QString("node%1.sqlite").arg(node)).toStdString());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(files.back().c_str(), &db), SQLITE_OK);
    exec(db, R"sql(
      CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'cudaLaunchKernel_v7000');
      CREATE TABLE ThreadNames(nameId INTEGER, priority INTEGER, globalTid INTEGER);
      CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,
        eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
      CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,
        deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
        demangledName INTEGER);
    )sql");
    for (int local = 0; local < 2; ++local) {
      const std::int64_t pid = 1000 * (node + 1) + local;
      const std::string global = std::to_string(pid) + " * 16777216";
      const std::string thread = global + " + " + std::to_string(pid);
      exec(db,
           "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (100, 200, 0, " + thread + ", 5, 2)");
      exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (300, 900, " + std::to_string(local) +
                   ", 7, 5, " + global + ", 1)");
      if (node == 0 && first_named >= 0) {
        const std::string id = std::to_string(10 + local);
        exec(db, "INSERT INTO StringIds VALUES (" + id + ", 'MPI Rank " +
                     std::to_string(first_named + local) + "')");
        exec(db, "INSERT INTO ThreadNames VALUES (" + id + ", 10, " + thread + ")");
      }
    }
    sqlite3_close(db);
  }
  const std::string out = dir.filePath("nodes.cstrace").toStdString();
  auto report = import_nsys(files, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->ranks, 4);
  auto r = open_reader(out);
  QList<int> got;
  std::vector<std::int64_t> pids;
  for (const RankInfo& info : r->ranks()) {
    got << info.rank;
    pids.push_back(info.pid);
  }
  QCOMPARE(got, ranks);
  QCOMPARE(pids, (std::vector<std::int64_t>{1000, 1001, 2000, 2001}));
}

// Names of 40000 characters in an export (a thread "MPI Rank 999...", a
// table CUPTI_ACTIVITY_KIND_KERNEL_V999...) overflowed the stack in
// std::regex, a crash; they name no rank and no versioned table, and the
// export imports as it is.
void TestTraceImport::nsysNamesLongerThanAny_data() {
  QTest::addColumn<QString>("sql");
  QTest::addRow("thread name")
      << "UPDATE StringIds SET value = 'MPI Rank ' || replace(hex(zeroblob(20000)), '0', '9') "
         "WHERE value = 'MPI Rank 0'";
  QTest::addRow("table name")
      << "CREATE TABLE \"CUPTI_ACTIVITY_KIND_KERNEL_V\" (start INTEGER)";  // name completed below
}

void TestTraceImport::nsysNamesLongerThanAny() {
  QFETCH(QString, sql);
  std::string statement = sql.toStdString();
  if (QByteArray(QTest::currentDataTag()) == "table name")
    statement.insert(statement.find("_V\"") + 2, std::string(40000, '9'));
  QTemporaryDir dir;
  const std::string in = dir.filePath("long.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, in);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(in.c_str(), &db), SQLITE_OK);
  exec(db, statement);
  sqlite3_close(db);
  auto report = import_nsys({in}, dir.filePath("long.cstrace").toStdString());
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, kNsysEvents);
}

// A session's start and a kernel's near INT64_MAX: their sum overflowed an
// int64 (undefined behaviour). The sum is held at INT64_MAX, past what a
// trace holds: that kernel is dropped and counted, the rest imported. (A
// kernel that starts before the session, near INT64_MIN, is left out as
// damaged: nsysDamagedExport.)
void TestTraceImport::nsysTimePastAnInt64() {
  QTemporaryDir dir;
  const std::string in = dir.filePath("early.sqlite").toStdString();
  std::filesystem::copy_file(kNsys, in);
  sqlite3* db = nullptr;
  QCOMPARE(sqlite3_open(in.c_str(), &db), SQLITE_OK);
  exec(db, "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 1000");
  exec(db,
       "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 9223372036854775000, "
       "end = 9223372036854775800 "
       "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)");
  sqlite3_close(db);
  auto report = import_nsys({in}, dir.filePath("early.cstrace").toStdString());
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, kNsysEvents - 1);
  QVERIFY(std::any_of(report->losses.begin(), report->losses.end(), [](const std::string& l) {
    return l.find("1 event") != std::string::npos &&
           l.find("time past what a trace holds") != std::string::npos;
  }));
}

void TestTraceImport::kinetoRealTraces_data() {
  QTest::addColumn<int>("index");
  for (int i = 0; i < 3; ++i)
    QTest::addRow("%s", kReferences[i].file) << i;
}

void TestTraceImport::kinetoRealTraces() {
  QFETCH(int, index);
  const Reference& ref = kReferences[index];
  QTemporaryDir dir;
  const std::string out = dir.filePath("k.cstrace").toStdString();
  auto report = import_kineto({kKineto + ref.file}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, ref.imported);
  QCOMPARE(report->skipped["profiler spans (cat Trace)"], 1);

  auto r = open_reader(out);
  QCOMPARE(r->ranks().size(), std::size_t{1});
  QCOMPARE(r->ranks()[0].rank, ref.rank);
  QCOMPARE(r->meta("distributed_backend"), std::optional<std::string>("nccl"));
  auto a = analyze_rank(*r, ref.rank);
  QVERIFY2(a, a ? "" : a.message().c_str());
  QVERIFY(a->gpu);
  check_breakdown(a->total, ref);
  QCOMPARE(static_cast<int>(a->steps.size()), ref.steps);
  QCOMPARE(a->steps.front().step, ref.steps == 2 ? 551 : 4);  // ProfilerStep#N
  // HTA's kernel launch statistics, as the Python reference pairs them.
  const LaunchReference& l = kLaunchReferences[index];
  QCOMPARE(a->launches.launches, l.launches);
  QCOMPARE(a->launches.short_kernels, l.short_kernels);
  QCOMPARE(a->launches.runtime_outliers, l.runtime_outliers);
  QCOMPARE(a->launches.delay_outliers, l.delay_outliers);
  QCOMPARE(a->launches.call_median_ns, l.call_median);
  QCOMPARE(a->launches.call_p95_ns, l.call_p95);
  QCOMPARE(a->launches.delay_median_ns, l.delay_median);
  QCOMPARE(a->launches.delay_p95_ns, l.delay_p95);
  QCOMPARE(a->launches.delay_max_ns, l.delay_max);
}

void TestTraceImport::kinetoTimestampsExact() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("k.cstrace").toStdString();
  QVERIFY(import_kineto({kKineto + "allreduce_rank-0.json.gz"}, out));
  auto r = open_reader(out);
  QCOMPARE(r->world_size(), 2);
  QCOMPARE(r->meta("nccl_version"), std::optional<std::string>("2.17.1"));
  // "ts": 4458676983543.183, "dur": 41.407 (microseconds, fractions kept),
  // counted from "baseTimeNanoseconds": 1711964646000000000.
  const std::int64_t base = 1711964646000000000;
  QCOMPARE(r->meta("kineto_base_time_ns"), std::optional<std::string>(std::to_string(base)));
  auto e = r->find_events("void cudnn::bn_bw_1C11_kernel_new", NameMatch::substring, 1000);
  QVERIFY(!e->empty());
  const auto first = std::find_if(
      e->begin(), e->end(), [](const StoredEvent& x) { return x.event.correlation == 57541; });
  QVERIFY(first != e->end());
  QCOMPARE(first->event.start_ns, base + 4458676983543183);
  QCOMPARE(first->event.end_ns, base + 4458676983543183 + 41407);
  // The host time: base + ts, a wall-clock start (May 2024).
  QCOMPARE(r->run().clock, std::string("Kineto timestamps (baseTimeNanoseconds + ts)"));
  QCOMPARE(r->run().start_utc_ns, r->time_range().start_ns);
  QVERIFY(r->run().start_utc_ns > 1714521600000000000 && r->run().start_utc_ns < 1717200000000000000);
  QCOMPARE(first->event.correlation, 57541);
  QCOMPARE(r->ranks()[0].device, std::string("NVIDIA A100-PG509-200 (GPU 0)"));
}

// Numbers whose digits or value go past an int64 (undefined behaviour: the
// digits of "1000...0e-20" were summed before the exponent was seen, and a
// double arg of 1e30 was converted as it was): times read by value, args
// held at the int64 limit.
void TestTraceImport::kinetoNumbersPastAnInt64_data() {
  QTest::addColumn<QByteArray>("event");
  QTest::addColumn<qint64>("start_ns");
  QTest::addColumn<qint64>("end_ns");
  QTest::addRow("ts digits past an int64, then an exponent")
      << QByteArray(R"("ts": 100000000000000000000000e-22, "dur": 2)") << qint64{10000}
      << qint64{12000};
  QTest::addRow("dur digits past an int64, then an exponent")
      << QByteArray(R"("ts": 1, "dur": 3000000000000000000000000E-24)") << qint64{1000}
      << qint64{4000};
  QTest::addRow("an arg past an int64")
      << QByteArray(R"("ts": 1, "dur": 2, "args": {"correlation": 1e30, "Ev Idx": -1e30})")
      << qint64{1000} << qint64{3000};
}

void TestTraceImport::kinetoNumbersPastAnInt64() {
  QFETCH(QByteArray, event);
  QFETCH(qint64, start_ns);
  QFETCH(qint64, end_ns);
  QTemporaryDir dir;
  const QString path = dir.filePath("big.json");
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"traceEvents": [{"name": "k", "cat": "kernel", "ph": "X", "pid": 1, "tid": 7, )" +
            event + "}]}");
  }
  const std::string out = dir.filePath("big.cstrace").toStdString();
  auto report = import_kineto({path.toStdString()}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, std::int64_t{1});
  auto e = open_reader(out)->find_events("k", NameMatch::exact, 10);
  QVERIFY(e && e->size() == 1);
  QCOMPARE(e->front().event.start_ns, start_ns);
  QCOMPARE(e->front().event.end_ns, end_ns);
}

void TestTraceImport::kinetoBareNonFiniteReadAsNull_data() {
  QTest::addColumn<QByteArray>("args");
  QTest::addColumn<int>("nulled");
  QTest::addRow("inf") << QByteArray(R"({"est. achieved occupancy %": inf})") << 1;
  QTest::addRow("-inf and nan") << QByteArray(R"({"a": -inf, "b":nan })") << 2;
  QTest::addRow("Infinity, NaN, in an array") << QByteArray(R"({"a": [Infinity,NaN, 1]})") << 2;
  QTest::addRow("in strings, left alone")
      << QByteArray(R"({"s": "x: inf, nan", "t": "\"", "u": inf})") << 1;
}

// Older PyTorch profilers wrote some non-finite arguments bare ("est.
// achieved occupancy %": inf), which no JSON parser reads: the import
// refused the whole trace. They now read as null, with a warning.
void TestTraceImport::kinetoBareNonFiniteReadAsNull() {
  QFETCH(QByteArray, args);
  QFETCH(int, nulled);
  QTemporaryDir dir;
  const QString path = dir.filePath("old.json");
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"traceEvents": [{"name": "k", "cat": "kernel", "ph": "X", "pid": 1, "tid": 7, )"
            R"("ts": 1, "dur": 2, "args": )" +
            args + "}]}");
  }
  const std::string out = dir.filePath("old.cstrace").toStdString();
  auto report = import_kineto({path.toStdString()}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, std::int64_t{1});
  const QString expected =
      QString("%1 value%2 written bare as inf or nan").arg(nulled).arg(nulled == 1 ? "" : "s");
  QVERIFY2(std::any_of(report->warnings.begin(), report->warnings.end(),
                       [&](const std::string& w) {
                         return QString::fromStdString(w).startsWith(expected);
                       }),
           qPrintable(expected));
  auto e = open_reader(out)->find_events("k", NameMatch::exact, 10);
  QVERIFY(e && e->size() == 1);
  QCOMPARE(e->front().event.end_ns - e->front().event.start_ns, std::int64_t{2000});
}

// allreduce_rank-0 holds 15 all-reduces and 6 broadcasts, 3 of each size
// (counted in the JSON: args "Collective name", "In msg nelems", "dtype").
void TestTraceImport::kinetoCollectives() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("k.cstrace").toStdString();
  QVERIFY(import_kineto({kKineto + "allreduce_rank-0.json.gz"}, out));
  auto r = open_reader(out);
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  std::map<std::pair<Collective, std::int64_t>, CollectiveStats> by;
  for (const CollectiveStats& c : run->collectives)
    by[{c.collective, c.bytes}] = c;
  QCOMPARE(by.size(), std::size_t{7});
  const CollectiveStats& big = by.at({Collective::all_reduce, 6637568LL * 4});
  QCOMPARE(big.count, 3);
  QCOMPARE(big.ranks, 2);
  QCOMPARE(big.dtype, DataType::fp32);
  QVERIFY(std::abs(big.mean_ns - 2404885.333) < 1);  // mean "dur" of the three, µs → ns
  QVERIFY(std::abs(big.algbw_gbps - 6637568.0 * 4 / 2404885.333) < 1e-3);
  QCOMPARE(big.busbw_gbps, big.algbw_gbps);                   // 2(n-1)/n = 1 for n = 2
  QCOMPARE(by.at({Collective::broadcast, 53 * 8}).count, 3);  // int64 ("Long")
  QCOMPARE(by.at({Collective::broadcast, 53120 * 4}).count, 3);
  QCOMPARE(by.at({Collective::all_reduce, 2049000 * 4}).count, 3);
  // Kernel summary: the NCCL kernels are communication, by name.
  bool found = false;
  for (const KernelStats& k : run->kernels) {
    if (k.name.rfind("ncclKernel_AllReduce", 0) == 0) {
      found = true;
      QCOMPARE(k.count, 15);
      QCOMPARE(k.category, Category::communication);
    }
  }
  QVERIFY(found);

  // PyTorch's all_to_all runs on NCCL's SendRecv kernel: the args name the
  // collective, and its bus bandwidth is (n - 1)/n of its algorithm's (it was
  // taken as a send/recv, at busbw = algbw).
  QFile f(dir.filePath("alltoall.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"json({"distributedInfo": {"rank": 0, "world_size": 4}, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(x)", "pid": 0, "tid": 20,
     "ts": 700, "dur": 100, "args": {"stream": 20, "correlation": 700,
     "Collective name": "all_to_all", "In msg nelems": 4096, "Out msg nelems": 4096,
     "Group size": 4, "dtype": "Float"}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(x)", "pid": 0, "tid": 20,
     "ts": 900, "dur": 100, "args": {"stream": 20, "correlation": 900,
     "Collective name": "send", "In msg nelems": 4096, "Group size": 2, "dtype": "Float"}}]})json");
  f.close();
  const std::string a2a = dir.filePath("alltoall.cstrace").toStdString();
  QVERIFY(import_kineto({f.fileName().toStdString()}, a2a));
  auto ar = open_reader(a2a);
  auto a2a_run = analyze_run(*ar);
  QVERIFY(a2a_run);
  std::map<Collective, CollectiveStats> kinds;
  for (const CollectiveStats& c : a2a_run->collectives)
    kinds[c.collective] = c;
  QVERIFY(kinds.count(Collective::all_to_all));
  const CollectiveStats& all_to_all = kinds.at(Collective::all_to_all);
  QCOMPARE(all_to_all.bytes, std::int64_t{4096 * 4});
  QVERIFY(std::abs(all_to_all.busbw_gbps - all_to_all.algbw_gbps * 3 / 4) < 1e-9);
  QCOMPARE(kinds.count(Collective::send_recv), std::size_t{1});  // a send stays point-to-point
}

void TestTraceImport::kinetoRanksMerged() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("two.cstrace").toStdString();
  auto report =
      import_kineto({kKineto + "sampled_rank-0.json.gz", kKineto + "sampled_rank-1.json.gz"}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->ranks, 2);
  QCOMPARE(report->events, kReferences[0].imported + kReferences[1].imported);
  // No host names and no measured offsets: the send/receive kernels would
  // align them, but the k-th send/receive of each rank talk to different
  // peers: the matches disagree by 28.8 ms around a shift of 8 µs. Chosen
  // automatically, that shift is not made, and the import says why.
  QCOMPARE(report->clock_alignment, std::string("none (matched collectives disagree)"));
  QCOMPARE(report->warnings.size(), std::size_t{1});
  QVERIFY2(report->warnings[0].find("rank 1 was left as recorded") != std::string::npos &&
               report->warnings[0].find("disagree by 28.8 ms") != std::string::npos,
           report->warnings[0].c_str());
  {
    // Asked for by name, it is made, with the warning.
    ImportOptions by_collectives;
    by_collectives.alignment = ClockAlignment::collectives;
    auto shifted =
        import_kineto({kKineto + "sampled_rank-0.json.gz", kKineto + "sampled_rank-1.json.gz"},
                      dir.filePath("shifted.cstrace").toStdString(), by_collectives);
    QVERIFY2(shifted, shifted ? "" : shifted.message().c_str());
    QCOMPARE(shifted->clock_alignment, std::string("collectives"));
    QCOMPARE(shifted->warnings.size(), std::size_t{1});
    QVERIFY2(
        shifted->warnings[0].find("rank 1 was aligned on its collectives") != std::string::npos,
        shifted->warnings[0].c_str());
  }
  QVERIFY(!std::filesystem::exists(out + ".part0.tmp"));
  auto r = open_reader(out);
  QCOMPARE(r->ranks().size(), std::size_t{2});
  QCOMPARE(r->world_size(), 128);
  QCOMPARE(r->meta("clock_alignment"),
           std::optional<std::string>("none (matched collectives disagree)"));
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  // A shift of a whole rank changes none of its own figures.
  check_breakdown(run->ranks[0].total, kReferences[0]);
  check_breakdown(run->ranks[1].total, kReferences[1]);
}

// Each kernel's launch as the profile gave it (args grid, block, registers
// per thread, shared memory): through the merge of two ranks, and back
// through the Chrome export and an import of that.
void TestTraceImport::kernelLaunchesKept() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("two.cstrace").toStdString();
  QVERIFY(
      import_kineto({kKineto + "sampled_rank-0.json.gz", kKineto + "sampled_rank-1.json.gz"}, out));
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  struct Seen {
    int with = 0, without = 0;
    std::map<Shape, int>
        send_recv;  // rank 0's SendRecv kernels by grid x, block x, registers, shared
  };
  auto seen_in = [](const std::string& path) {
    Seen seen;
    auto r = open_reader(path);
    auto scanned = r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
      const LaneInfo* lane = r->lane(e.event.lane);
      if (!lane || lane->kind != LaneKind::gpu_stream || !may_have_launch(e.event.kind))
        return true;
      auto launch = r->kernel_launch(e.id);
      if (!launch) qFatal("%s", launch.message().c_str());
      if (!*launch) {
        ++seen.without;
        return true;
      }
      ++seen.with;
      const KernelLaunch& l = **launch;
      if (e.rank == 0 && r->string(e.event.name).find("SendRecv") != std::string::npos)
        ++seen.send_recv[{l.grid[0], l.block[0], l.registers_per_thread, l.shared_memory_bytes}];
      return true;
    });
    if (!scanned) qFatal("%s", scanned.message().c_str());
    return seen;
  };
  const Seen imported = seen_in(out);
  QCOMPARE(imported.with, 1154 + 1104);  // every kernel of both files
  QCOMPARE(imported.without, 0);
  const std::map<Shape, int> send_recv{{{16, 640, 96, 41744}, 8}, {{16, 544, 96, 41744}, 2}};
  QVERIFY(imported.send_recv == send_recv);

  const std::string json = dir.filePath("two.json").toStdString();
  {
    auto r = open_reader(out);
    auto exported = export_chrome_trace(*r, json);
    QVERIFY2(exported, exported ? "" : exported.message().c_str());
  }
  const std::string again = dir.filePath("again.cstrace").toStdString();
  auto reimported = import_kineto({json}, again);
  QVERIFY2(reimported, reimported ? "" : reimported.message().c_str());
  const Seen back = seen_in(again);
  QCOMPARE(back.with, imported.with);
  QCOMPARE(back.without, 0);
  QVERIFY(back.send_recv == send_recv);

  // Args that are no launch leave the kernel without one: a grid of two
  // numbers, a fraction, a block of 0, a string, an array or a null among
  // the numbers (the rest were taken), threads past a count; and a copy
  // keeps none.
  QFile f(dir.filePath("odd.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
     "args": {"grid": [4, 1], "block": [32, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 3, "dur": 1,
     "args": {"grid": [4, 1.5, 1], "block": [32, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
     "args": {"grid": [4, 1, 1], "block": [0, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "d", "pid": 0, "tid": 7, "ts": 7, "dur": 1,
     "args": {"grid": [4, 1, 1], "block": [32, 1, 1], "registers per thread": 40}},
    {"ph": "X", "cat": "kernel", "name": "e", "pid": 0, "tid": 7, "ts": 9, "dur": 1,
     "args": {"grid": ["x", 4, 1, 1], "block": [32, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "f", "pid": 0, "tid": 7, "ts": 11, "dur": 1,
     "args": {"grid": [[1, 2], 4, 1, 1], "block": [32, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "g", "pid": 0, "tid": 7, "ts": 13, "dur": 1,
     "args": {"grid": [4, null, 1, 1], "block": [32, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "h", "pid": 0, "tid": 7, "ts": 15, "dur": 1,
     "args": {"grid": [1, 1, 1], "block": [2147483647, 2147483647, 2147483647]}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "i", "pid": 0, "tid": 7, "ts": 17, "dur": 1,
     "args": {"grid": [4, 1, 1], "block": [32, 1, 1]}}]})json");
  f.close();
  const std::string odd = dir.filePath("odd.cstrace").toStdString();
  QVERIFY(import_kineto({f.fileName().toStdString()}, odd));
  const Seen odd_seen = seen_in(odd);
  QCOMPARE(odd_seen.with, 1);
  QCOMPARE(odd_seen.without, 7);
}

// Two ranks whose profilers began a second apart: each trace's ts counts
// from its own baseTimeNanoseconds, and the store holds both on one clock.
// Chrome trace-event JSON from other tools: a bare array of events (its "]"
// may be missing, with or without a last comma) and duration events, a "B"
// closed by the next "E" on its thread. Both were refused or skipped: the
// bare array read "not a trace this build imports", B/E pairs "events with
// ph 'B'".
void TestTraceImport::chromeArrayAndDurationEvents_data() {
  QTest::addColumn<QByteArray>("ending");
  QTest::addColumn<bool>("closed");
  QTest::newRow("closed array") << QByteArray("]\n") << true;
  QTest::newRow("no ]") << QByteArray("\n") << false;
  QTest::newRow("no ], a last comma") << QByteArray(",\n") << false;
}

void TestTraceImport::chromeArrayAndDurationEvents() {
  QFETCH(QByteArray, ending);
  QFETCH(bool, closed);
  QTemporaryDir dir;
  const QByteArray events = R"([
{"name": "step", "cat": "app", "ph": "B", "ts": 100, "pid": 1, "tid": 1, "args": {"n": 1}},
{"name": "forward", "cat": "app", "ph": "B", "ts": 110, "pid": 1, "tid": 1},
{"name": "other thread", "cat": "app", "ph": "B", "ts": 115, "pid": 1, "tid": 2},
{"ph": "E", "ts": 150, "pid": 1, "tid": 1},
{"name": "write", "cat": "io", "ph": "X", "ts": 160, "dur": 20, "pid": 1, "tid": 1},
{"ph": "E", "ts": 200, "pid": 1, "tid": 1},
{"ph": "E", "ts": 210, "pid": 1, "tid": 1},
{"ph": "E", "ts": 220.5, "pid": 1, "tid": 2},
{"name": "late", "ph": "B", "ts": 300, "pid": 1, "tid": 2},
{"name": "backwards", "ph": "B", "ts": 400, "pid": 2, "tid": 1},
{"ph": "E", "ts": 390, "pid": 2, "tid": 1},
{"name": "cut", "ph": "B", "ts": 500, "pid": 2, "tid": 1})";
  const QString path = dir.filePath("chrome.json");
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(events + ending);
  }
  QCOMPARE(detect_trace_format(path.toStdString()), TraceFormat::kineto_json);
  const std::string out = dir.filePath("chrome.cstrace").toStdString();
  auto report = import_traces({path.toStdString()}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->events, std::int64_t{4});
  QCOMPARE(report->skipped["duration ends (ph E) with no begin (ph B)"], 1);
  QCOMPARE(report->skipped["duration events (ph B/E) that end before they begin"], 1);
  QCOMPARE(report->skipped["duration events begun (ph B) and never ended"], 2);
  const auto& warnings = report->warnings;
  const bool said_open = std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("has no closing ']'") != std::string::npos;
  });
  QCOMPARE(said_open, !closed);

  // Each slice from its begin to its end, nested on its thread, with the
  // begin's name and category.
  auto reader = open_reader(out);
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> slices;  // name -> (start, length)
  std::int64_t first = INT64_MAX;
  int host_operations = 0;
  (void)reader->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& e) {
    slices[reader->string(e.event.name)] = {e.event.start_ns, e.event.duration_ns()};
    first = std::min(first, e.event.start_ns);
    host_operations += e.event.kind == EventKind::cpu_op;
    return true;
  });
  QCOMPARE(host_operations, 4);
  QCOMPARE(int(slices.size()), 4);
  QCOMPARE(slices["step"].second, std::int64_t{100'000});
  QCOMPARE(slices["forward"].first - slices["step"].first, std::int64_t{10'000});
  QCOMPARE(slices["forward"].second, std::int64_t{40'000});
  QCOMPARE(slices["write"].second, std::int64_t{20'000});
  QCOMPARE(slices["other thread"].second, std::int64_t{105'500});
  QCOMPARE(slices["step"].first, first);
}

void TestTraceImport::kinetoBaseTimeAlignsRanks() {
  QTemporaryDir dir;
  auto write = [&](const char* name, const std::string& text) {
    QFile f(dir.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(text.data(), static_cast<qint64>(text.size()));
    return f.fileName().toStdString();
  };
  auto trace = [](int rank, const std::string& base, const char* ts) {
    return R"({"distributedInfo": {"rank": )" + std::to_string(rank) +
           R"(, "world_size": 2}, "baseTimeNanoseconds": )" + base +
           R"(, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, )"
           R"("tid": 1, "ts": )" + ts + R"(, "dur": 2.5}]})";
  };
  const std::string rank0 = write("r0.json", trace(0, "1700000000000000000", "1000.125"));
  const std::string rank1 = write("r1.json", trace(1, "1700000001000000000", "0.125"));
  ImportOptions options;
  options.alignment = ClockAlignment::recorded;
  const std::string out = dir.filePath("two.cstrace").toStdString();
  auto report = import_kineto({rank0, rank1}, out, options);
  QVERIFY2(report, report ? "" : report.message().c_str());
  auto r = open_reader(out);
  std::map<std::int32_t, std::int64_t> start;
  auto events = r->find_events("aten::mm", NameMatch::exact, 10);
  QVERIFY(events);
  for (const StoredEvent& e : *events)
    start[r->lane(e.event.lane)->rank] = e.event.start_ns;
  QCOMPARE(start[0], 1700000000001000125);
  QCOMPARE(start[1], 1700000001000000125);
  QCOMPARE(r->run().start_utc_ns, 1700000000001000125);

  // A base past the store's range: times as recorded, and a warning.
  const std::string far = write("far.json", trace(0, "9000000000000000000", "5"));
  auto kept = import_kineto({far}, dir.filePath("far.cstrace").toStdString());
  QVERIFY2(kept, kept ? "" : kept.message().c_str());
  QCOMPARE(kept->warnings.size(), std::size_t{1});
  QVERIFY2(kept->warnings[0].find("baseTimeNanoseconds 9000000000000000000 is out of range") !=
               std::string::npos,
           kept->warnings[0].c_str());
  QCOMPARE(open_reader(dir.filePath("far.cstrace").toStdString())->time_range().start_ns, 5000);
  // A negative base (an export of a store whose times begin before zero) is
  // added as well.
  const std::string before_zero = write("negative.json", trace(0, "-5000000000", "10"));
  auto negative = import_kineto({before_zero}, dir.filePath("negative.cstrace").toStdString());
  QVERIFY2(negative, negative ? "" : negative.message().c_str());
  QVERIFY(negative->warnings.empty());
  QCOMPARE(open_reader(dir.filePath("negative.cstrace").toStdString())->time_range().start_ns,
           -5000000000 + 10000);
}

// A file is read up to a bound (by default half this machine's memory): a
// 13 MB gzip of 3 GB of whitespace took 7 GB before it said "no events". The
// bound holds whatever the gzip trailer says, and for several members.
void TestTraceImport::kinetoTextPastItsBound_data() {
  QTest::addColumn<QString>("kind");
  QTest::addRow("plain") << "plain";
  QTest::addRow("gzip") << "gzip";
  QTest::addRow("gzip of two members") << "members";
}

void TestTraceImport::kinetoTextPastItsBound() {
  QFETCH(QString, kind);
  QTemporaryDir dir;
  const QByteArray padding(3 << 20, ' ');
  const QByteArray head =
      R"({"traceEvents":[{"ph":"X","name":"k","ts":1,"dur":1,"pid":0,"tid":0}],)";
  const std::string path = dir.filePath(kind == "plain" ? "big.json" : "big.json.gz").toStdString();
  if (kind == "plain") {
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(head + padding + R"("x":1})");
  } else {
    for (int member = 0; member < (kind == "members" ? 2 : 1); ++member) {
      gzFile out = gzopen(path.c_str(), member == 0 ? "wb" : "ab");
      QVERIFY(out);
      const QByteArray tail = padding + R"("x":1})";
      const QByteArray part = kind == "gzip" ? head + tail : member == 0 ? head : tail;
      QVERIFY(gzwrite(out, part.constData(), static_cast<unsigned>(part.size())) > 0);
      gzclose(out);
    }
  }
  cs::trace::ImportOptions options;
  options.max_text_bytes = std::size_t{1} << 20;
  const std::string out = dir.filePath("big.cstrace").toStdString();
  auto refused = import_traces({path}, out, options);
  QVERIFY(!refused);
  QVERIFY2(refused.message() == path +
                                    ": holds more than 1.00 MiB of JSON: not read; split the "
                                    "trace (the profiler's schedule, one file per rank or step)",
           refused.message().c_str());
  QVERIFY(!std::filesystem::exists(out));
  // Under the bound it is read.
  options.max_text_bytes = std::size_t{8} << 20;
  auto read = import_traces({path}, out, options);
  QVERIFY2(read, read ? "" : read.message().c_str());
  QCOMPARE(read->events, std::int64_t{1});
}

void TestTraceImport::kinetoDeviceNamesById_data() {
  QTest::addColumn<QByteArray>("properties");
  QTest::addColumn<QString>("device");
  QTest::addRow("listed by id, out of order")
      << QByteArray(R"([{"id": 1, "name": "NVIDIA H100 80GB HBM3"},
                        {"id": 0, "name": "NVIDIA A100-SXM4-80GB"}])")
      << "NVIDIA H100 80GB HBM3 (GPU 1)";
  QTest::addRow("without ids: by place")
      << QByteArray(R"([{"name": "A"}, {"name": "B"}])") << "B (GPU 1)";
  QTest::addRow("only another device listed")
      << QByteArray(R"([{"id": 0, "name": "A"}])") << "GPU 1";
  QTest::addRow("a nameless entry") << QByteArray(R"([{"id": 1}])") << "GPU 1";
  // A profile of CPU activities only ran on no GPU (it was called "GPU").
  QTest::addRow("CPU only") << QByteArray("cpu") << "CPU";
}

// A kernel on GPU 1 names its rank's device from deviceProperties by the
// entry's "id", as Kineto writes it, not by the entry's place in the list.
void TestTraceImport::kinetoDeviceNamesById() {
  QFETCH(QByteArray, properties);
  QFETCH(QString, device);
  QTemporaryDir dir;
  const QString path = dir.filePath("gpu1.json");
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    if (properties == "cpu") {
      f.write(R"({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]})");
    } else {
      f.write(R"({"deviceProperties": )" + properties + R"(, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 1, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 1, "stream": 7, "correlation": 3}}]})");
    }
  }
  const std::string out = dir.filePath("gpu1.cstrace").toStdString();
  auto report = import_kineto({path.toStdString()}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  auto r = open_reader(out);
  QCOMPARE(QString::fromStdString(r->ranks().at(0).device), device);
}

void TestTraceImport::kinetoGemmWorkFromShapes_data() {
  QTest::addColumn<QByteArray>("op");
  QTest::addColumn<double>("flops");
  QTest::addColumn<qint64>("bytes");
  QTest::addColumn<int>("dtype");
  const int fp32 = int(DataType::fp32), bf16 = int(DataType::bf16), none = int(DataType::none);
  // 2mkn, as PyTorch's with_flops counts them; the operands and the result once.
  QTest::addRow("mm")
      << QByteArray(
             R"("aten::mm", "args": {"Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"]})")
      << 2.0 * 64 * 128 * 32 << qint64(4 * (64 * 128 + 128 * 32 + 64 * 32)) << fp32;
  QTest::addRow("addmm, bf16")
      << QByteArray(
             R"("aten::addmm", "args": {"Input Dims": [[32], [64, 128], [128, 32], [], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]})")
      << 2.0 * 64 * 128 * 32 << qint64(2 * (64 * 128 + 128 * 32 + 64 * 32)) << bf16;
  QTest::addRow("bmm")
      << QByteArray(
             R"("aten::bmm", "args": {"Input Dims": [[8, 16, 4], [8, 4, 2]], "Input type": ["float", "float"]})")
      << 2.0 * 8 * 16 * 4 * 2 << qint64(4 * 8 * (16 * 4 + 4 * 2 + 16 * 2)) << fp32;
  QTest::addRow("baddbmm")
      << QByteArray(
             R"("aten::baddbmm", "args": {"Input Dims": [[8, 16, 2], [8, 16, 4], [8, 4, 2], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]})")
      << 2.0 * 8 * 16 * 4 * 2 << qint64(4 * 8 * (16 * 4 + 4 * 2 + 16 * 2)) << fp32;
  QTest::addRow("a type of no known size: FLOPs, no bytes")
      << QByteArray(
             R"("aten::mm", "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["ComplexFloat", "ComplexFloat"]})")
      << 2.0 * 2 * 3 * 4 << qint64(0) << none;
  // Not a GEMM to count: the operators that call one (counted twice), shapes
  // that do not multiply, a fraction, a missing operand, no shapes.
  QTest::addRow("linear calls addmm")
      << QByteArray(
             R"("aten::linear", "args": {"Input Dims": [[64, 128], [32, 128], [32]], "Input type": ["float", "float", "float"]})")
      << 0.0 << qint64(0) << none;
  QTest::addRow("inner sizes differ")
      << QByteArray(
             R"("aten::mm", "args": {"Input Dims": [[64, 128], [127, 32]], "Input type": ["float", "float"]})")
      << 0.0 << qint64(0) << none;
  QTest::addRow("a fraction")
      << QByteArray(
             R"("aten::mm", "args": {"Input Dims": [[64, 128.5], [128, 32]], "Input type": ["float", "float"]})")
      << 0.0 << qint64(0) << none;
  QTest::addRow("one operand")
      << QByteArray(R"("aten::mm", "args": {"Input Dims": [[64, 128]], "Input type": ["float"]})")
      << 0.0 << qint64(0) << none;
  QTest::addRow("no shapes recorded")
      << QByteArray(R"("aten::mm", "args": {"External id": 3})") << 0.0 << qint64(0) << none;
}

// A matrix multiply's work from its recorded shapes (record_shapes=True):
// its FLOPs, operand bytes and type, which the run view shows as FLOP/s and
// calibrate --learn fits GEMMs from. Before, an imported operator had none.
void TestTraceImport::kinetoGemmWorkFromShapes() {
  QFETCH(QByteArray, op);
  QFETCH(double, flops);
  QFETCH(qint64, bytes);
  QFETCH(int, dtype);
  QTemporaryDir dir;
  const QString path = dir.filePath("mm.json");
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(
        R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "name": )" +
        op + "}]}");
  }
  const std::string out = dir.filePath("mm.cstrace").toStdString();
  auto report = import_kineto({path.toStdString()}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  auto r = open_reader(out);
  std::vector<Event> seen;
  (void)r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& se) {
    seen.push_back(se.event);
    return true;
  });
  QCOMPARE(seen.size(), std::size_t{1});
  QCOMPARE(seen[0].flops, flops);
  QCOMPARE(qint64(seen[0].bytes), bytes);
  QCOMPARE(int(seen[0].dtype), dtype);
}

// HTA's sampled trace records shapes: its leaf matrix multiplies carry
// their work, the operators around them none.
void TestTraceImport::kinetoGemmWorkOfARealTrace() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("sampled.cstrace").toStdString();
  auto report = import_kineto({kKineto + "sampled_rank-0.json.gz"}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  auto r = open_reader(out);
  std::map<std::string, std::pair<int, double>> with_flops;  // name -> (events, FLOPs)
  (void)r->for_each_event({}, INT64_MIN / 4, INT64_MAX / 4, [&](const StoredEvent& se) {
    if (se.event.flops > 0) {
      auto& [count, sum] = with_flops[r->string(se.event.name)];
      ++count;
      sum += se.event.flops;
      if (se.event.dtype != DataType::fp32 || se.event.bytes <= 0)
        qFatal("an fp32 GEMM without its bytes");
    }
    return true;
  });
  QCOMPARE(with_flops.size(), std::size_t{3});
  QCOMPARE(with_flops["aten::mm"].first, 231);
  QCOMPARE(with_flops["aten::addmm"].first, 107);
  QCOMPARE(with_flops["aten::bmm"].first, 40);
  QCOMPARE(with_flops["aten::mm"].second, 1190708813824.0);
  QCOMPARE(with_flops["aten::addmm"].second, 286017110016.0);
  QCOMPARE(with_flops["aten::bmm"].second, 176113582080.0);
}

void TestTraceImport::kinetoDistributedInfoThatContradicts_data() {
  QTest::addColumn<QString>("info");
  QTest::addColumn<QString>("warning");
  QTest::addColumn<bool>("world_kept");
  QTest::addRow("rank past the world") << R"({"rank": 5, "world_size": 1})"
                                       << "distributedInfo says rank 5 of a world of 1" << false;
  QTest::addRow("rank as text") << R"({"rank": "zero", "world_size": 2})"
                                << "distributedInfo.rank is \"zero\", not a number: rank 0" << true;
  QTest::addRow("world size as text")
      << R"({"rank": 0, "world_size": "two"})"
      << "distributedInfo.world_size is \"two\", not a number" << false;
  QTest::addRow("as it should be") << R"({"rank": 1, "world_size": 2})"
                                   << "" << true;
}

// distributedInfo that contradicts itself is said, and a world size it
// cannot be is left out (a merge takes it as the run's); rank 5 of 1 was
// imported without a word, and "zero" read as a missing rank.
void TestTraceImport::kinetoDistributedInfoThatContradicts() {
  QFETCH(QString, info);
  QFETCH(QString, warning);
  QFETCH(bool, world_kept);
  QTemporaryDir dir;
  const std::string in = dir.filePath("trace.json").toStdString();
  {
    QFile f(QString::fromStdString(in));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QStringLiteral(R"({"distributedInfo": %1, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]})")
                .arg(info)
                .toUtf8());
  }
  const std::string out = dir.filePath("t.cstrace").toStdString();
  auto report = import_kineto({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  QStringList warnings;
  for (const std::string& w : report->warnings)
    warnings << QString::fromStdString(w);
  if (warning.isEmpty()) {
    QVERIFY2(warnings.filter("distributedInfo").isEmpty(), qPrintable(warnings.join('\n')));
  } else {
    QVERIFY2(!warnings.filter(warning).isEmpty(), qPrintable(warnings.join('\n')));
  }
  QCOMPARE(open_reader(out)->meta("world_size").has_value(), world_kept);
}

void TestTraceImport::kinetoDistributedInfoAsReals_data() {
  QTest::addColumn<QString>("info");
  QTest::addColumn<int>("rank");  // -1: the file is refused with `refused`
  QTest::addColumn<QString>("refused");
  QTest::addRow("rank and world size as reals") << R"({"rank": 1.0, "world_size": 2.0})" << 1 << "";
  QTest::addRow("rank a fraction")
      << R"({"rank": 1.5, "world_size": 2})" << -1
      << "distributedInfo.rank is 1.5: must be a whole number between 0 and 2147483647";
  QTest::addRow("rank past a long")
      << R"({"rank": 1e20})" << -1
      << "distributedInfo.rank is 1e20: must be a whole number between 0 and 2147483647";
  QTest::addRow("world size a real past an int")
      << R"({"rank": 0, "world_size": 3e9})" << -1
      << "distributedInfo.world_size is 3000000000: must be between 1 and 2147483647";
}

// A rank or world size written as a real: 1.0 is rank 1, as 1 is; it read
// as no rank at all ("no distributedInfo.rank: rank 0 from the file order"),
// and 1.5 or 1e20 likewise, where -3 is refused.
void TestTraceImport::kinetoDistributedInfoAsReals() {
  QFETCH(QString, info);
  QFETCH(int, rank);
  QFETCH(QString, refused);
  QTemporaryDir dir;
  const std::string in = dir.filePath("trace.json").toStdString();
  {
    QFile f(QString::fromStdString(in));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QStringLiteral(R"({"distributedInfo": %1, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]})")
                .arg(info)
                .toUtf8());
  }
  const std::string out = dir.filePath("t.cstrace").toStdString();
  auto report = import_kineto({in}, out);
  if (rank < 0) {
    QVERIFY(!report);
    QCOMPARE(QString::fromStdString(report.message()), QString::fromStdString(in) + ": " + refused);
    QVERIFY(!std::filesystem::exists(out));
    return;
  }
  QVERIFY2(report, report ? "" : report.message().c_str());
  for (const std::string& w : report->warnings)
    QVERIFY2(w.find("distributedInfo") == std::string::npos, w.c_str());
  auto reader = open_reader(out);
  QCOMPARE(reader->ranks().front().rank, rank);
  QCOMPARE(reader->meta("world_size").value_or(""), std::string("2"));
}

// Rank files of two runs (world sizes 2 and 4) are not one run; the error
// names the files given, not the temporary stores the import merges.
void TestTraceImport::kinetoRanksOfTwoRunsRefused() {
  QTemporaryDir dir;
  std::vector<std::string> files;
  for (const auto& [rank, world] : {std::pair{0, 2}, std::pair{1, 4}}) {
    const std::string in = dir.filePath(QStringLiteral("rank%1.json").arg(rank)).toStdString();
    QFile f(QString::fromStdString(in));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QStringLiteral(R"({"distributedInfo": {"rank": %1, "world_size": %2}, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]})")
                .arg(rank)
                .arg(world)
                .toUtf8());
    files.push_back(in);
  }
  const std::string out = dir.filePath("run.cstrace").toStdString();
  auto report = import_kineto(files, out);
  QVERIFY(!report);
  QCOMPARE(QString::fromStdString(report.message()),
           QString::fromStdString("merge: " + files[0] + " is a rank of a run of 2 ranks, " +
                                  files[1] + " of 4: merge the rank stores of one run"));
  QVERIFY(!std::filesystem::exists(out));
}

// A tid written as a real: 7.0 is stream 7; 7.5 is a lane of its own, named
// as written (it read as 0, its kernel drawn on stream 0).
void TestTraceImport::kinetoIdsWrittenAsReals() {
  QTemporaryDir dir;
  const std::string in = dir.filePath("reals.json").toStdString();
  {
    QFile f(QString::fromStdString(in));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"distributedInfo": {"rank": 0}, "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7.0, "ts": 1, "dur": 2},
      {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7.5, "ts": 4, "dur": 2}]})");
  }
  const std::string out = dir.filePath("reals.cstrace").toStdString();
  auto report = import_kineto({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  const auto reader = open_reader(out);
  std::set<std::string> names;
  for (const LaneInfo& l : reader->lanes())
    names.insert(l.name);
  std::string all;
  for (const std::string& n : names)
    all += n + "; ";
  QVERIFY2(names.count("GPU 0 stream 7"), all.c_str());
  QVERIFY2(names.count("GPU 0 stream 7.5"), all.c_str());
  QVERIFY(!names.count("GPU 0 stream 0"));
}

// PyTorch 1.8's Kineto named a GPU's rows by text ("tid": "stream 7") and its
// categories otherwise ("Memcpy", "Kernel"); the lane was "GPU 0 stream
// stream 7".
void TestTraceImport::kinetoStreamsNamedAsText() {
  QTemporaryDir dir;
  const std::string in = dir.filePath("torch18.json").toStdString();
  {
    QFile f(QString::fromStdString(in));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"json({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
       "tid": "stream 7", "ts": 1614800519473220, "dur": 3,
       "args": {"device": 0, "stream": 7, "correlation": 20002, "bytes": 200}},
      {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7",
       "ts": 1614800519473230, "dur": 5, "args": {"device": 0, "stream": 7}}]})json");
  }
  const std::string out = dir.filePath("torch18.cstrace").toStdString();
  auto report = import_kineto({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  const auto reader = open_reader(out);
  std::set<std::string> names;
  for (const LaneInfo& l : reader->lanes()) {
    if (l.kind == LaneKind::gpu_stream) names.insert(l.name);
  }
  std::string all;
  for (const std::string& n : names)
    all += n + "; ";
  QVERIFY2(names == std::set<std::string>{"GPU 0 stream 7"}, all.c_str());
  const auto kinds = count_kinds(*reader);
  QCOMPARE(kinds.at(EventKind::memcpy), 1);
  QCOMPARE(kinds.at(EventKind::kernel), 1);
}

void TestTraceImport::kinetoStepsFromAnnotations_data() {
  QTest::addColumn<QString>("profiler_steps");  // ProfilerStep#N ranges added, or none
  QTest::addColumn<QList<int>>("steps");        // the store's steps, in order
  QTest::addRow("record_function ranges") << "" << QList<int>{0, 1, 2};
  // The profiler's own steps win: the ranges stay annotations.
  QTest::addRow("with ProfilerStep#N")
      << R"json({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1,
           "tid": 1, "ts": 1000, "dur": 1500},
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "pid": 1,
           "tid": 1, "ts": 2500, "dur": 2000},)json"
      << QList<int>{7, 8};
}

// A trace taken without the profiler's schedule (torch.profiler.profile()
// around a loop, no ProfilerStep#N) had no steps: the per-step analyses took
// it as one. Its record_function ranges named as a step are its steps, by
// the rule of the CUPTI tracer and the Nsight Systems import.
void TestTraceImport::kinetoStepsFromAnnotations() {
  QFETCH(QString, profiler_steps);
  QFETCH(QList<int>, steps);
  QTemporaryDir dir;
  const std::string in = dir.filePath("loop.json").toStdString();
  {
    QFile f(QString::fromStdString(in));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"json({"schemaVersion": 1, "traceEvents": [)json");
    f.write(profiler_steps.toUtf8());
    // Three iterations on the main thread, the second given before the
    // first; a "step 1" inside the second, one on another thread, and a
    // kernel in each iteration.
    f.write(R"json(
      {"ph": "X", "cat": "user_annotation", "name": "iteration 1", "pid": 1, "tid": 1,
       "ts": 2000, "dur": 1000},
      {"ph": "X", "cat": "user_annotation", "name": "iteration 0", "pid": 1, "tid": 1,
       "ts": 1000, "dur": 1000},
      {"ph": "X", "cat": "user_annotation", "name": "step 1", "pid": 1, "tid": 1,
       "ts": 2000, "dur": 500},
      {"ph": "X", "cat": "user_annotation", "name": "iteration 2", "pid": 1, "tid": 1,
       "ts": 3000, "dur": 1000},
      {"ph": "X", "cat": "user_annotation", "name": "step 9", "pid": 1, "tid": 2,
       "ts": 1500, "dur": 100},
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1100, "dur": 50,
       "args": {"device": 0, "stream": 7}},
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 2100, "dur": 50,
       "args": {"device": 0, "stream": 7}},
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 3100, "dur": 50,
       "args": {"device": 0, "stream": 7}}]})json");
  }
  const std::string out = dir.filePath("loop.cstrace").toStdString();
  auto report = import_kineto({in}, out);
  QVERIFY2(report, report ? "" : report.message().c_str());
  auto r = open_reader(out);
  auto windows = job_step_windows(*r);
  QVERIFY2(windows, windows ? "" : windows.message().c_str());
  QList<int> found;
  for (const auto& w : *windows)
    found.append(w.step);
  QCOMPARE(found, steps);
  auto analysis = analyze_run(*r);
  QVERIFY2(analysis, analysis ? "" : analysis.message().c_str());
  QCOMPARE(analysis->ranks.front().steps.size(), static_cast<std::size_t>(steps.size()));
  for (const auto& step : analysis->ranks.front().steps)
    QVERIFY2(step.breakdown.compute_ns > 0, qPrintable(QString::number(step.step)));
  // Another thread's, and one inside a step, stay ranges; with the
  // profiler's steps, every range does.
  QStringList ranges{"step 9", "step 1"};
  if (!profiler_steps.isEmpty())
    ranges << "iteration 0"
           << "iteration 1"
           << "iteration 2";
  for (const QString& name : ranges) {
    auto other = r->find_events(name.toStdString(), NameMatch::exact, 10);
    QCOMPARE(other->size(), std::size_t{1});
    QCOMPARE(other->front().event.kind, EventKind::annotation);
  }
}

void TestTraceImport::kinetoPlainJsonAndErrors() {
  QTemporaryDir dir;
  // The same trace, decompressed.
  const std::string plain = dir.filePath("rank0.json").toStdString();
  {
    gzFile in = gzopen((kKineto + "sampled_rank-0.json.gz").c_str(), "rb");
    QFile out(QString::fromStdString(plain));
    QVERIFY(in && out.open(QIODevice::WriteOnly));
    char buffer[65536];
    int n;
    while ((n = gzread(in, buffer, sizeof buffer)) > 0)
      out.write(buffer, n);
    gzclose(in);
  }
  auto report = import_traces({plain}, dir.filePath("p.cstrace").toStdString());
  QVERIFY2(report, report ? "" : report.message().c_str());
  QCOMPARE(report->format, std::string("kineto"));
  QCOMPARE(report->events, kReferences[0].imported);

  auto write = [&](const char* name, const QByteArray& text) {
    QFile f(dir.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(text);
    return f.fileName().toStdString();
  };
  const std::string broken = write("broken.json", R"({"traceEvents": [{"ph": "X", "ts": 1,)");
  auto e1 = import_kineto({broken}, dir.filePath("b.cstrace").toStdString());
  QVERIFY(!e1);
  // Said as cut short where it is, at its own size (it said "at byte 38" of 37).
  QVERIFY2(QString::fromStdString(e1.message())
               .contains(QString::fromStdString(broken) +
                         ": not valid JSON: the text ends (at byte 37) inside the document"),
           e1.message().c_str());
  const std::string midway = write("midway.json", R"({"traceEvents": [{"ph": "X", "ts": 1,,]})");
  auto inside = import_kineto({midway}, dir.filePath("mw.cstrace").toStdString());
  QVERIFY2(
      !inside && QString::fromStdString(inside.message()).contains(": not valid JSON at byte 38: "),
      inside ? "" : inside.message().c_str());
  // The parser's words without its tag, and a raw byte it read as U+FFFD
  // (it echoed "[json.exception.parse_error.101]" and the byte itself).
  const std::string binary = write("binary.json", QByteArray("{\"traceEvents\": [\xff\xfe]}"));
  auto raw = import_kineto({binary}, dir.filePath("x.cstrace").toStdString());
  QVERIFY(!raw);
  QVERIFY2(raw.message().find("[json.exception") == std::string::npos, raw.message().c_str());
  QVERIFY2(cs::is_valid_utf8(raw.message()), raw.message().c_str());
  QVERIFY2(QString::fromStdString(raw.message()).contains("syntax error"), raw.message().c_str());
  // JSON lines, as `nsys export --type json` writes them: said, and where
  // (it read as "syntax error ... expected end of input").
  const std::string lines = write("nsys.json",
                                  "{\"type\":\"String\",\"id\":\"1\",\"value\":\"a\"}\n"
                                  "{\"type\":\"String\",\"id\":\"2\",\"value\":\"b\"}\n");
  auto several = import_traces({lines}, dir.filePath("l.cstrace").toStdString());
  QVERIFY(!several);
  QVERIFY2(several.message() == lines +
                                    ": a second JSON document begins at byte 40: a trace is one "
                                    "object or array, and this file holds several (JSON lines, as "
                                    "an Nsight Systems JSON export is: import its SQLite export "
                                    "instead, `nsys export --type sqlite`)",
           several.message().c_str());
  // Other text past the document's end is said as such.
  const std::string extra = write("extra.json", R"({"traceEvents": []}})");
  auto past = import_kineto({extra}, dir.filePath("x.cstrace").toStdString());
  QVERIFY(!past);
  QVERIFY2(past.message() == extra +
                                 ": not valid JSON at byte 20: more follows the end of the "
                                 "document",
           past.message().c_str());
  const std::string other = write("other.json", R"({"name": "not a trace"})");
  auto e2 = import_kineto({other}, dir.filePath("o.cstrace").toStdString());
  QVERIFY(!e2);
  QVERIFY2(QString::fromStdString(e2.message())
               .contains("is not a PyTorch profiler or Chrome trace: it has no traceEvents array"),
           e2.message().c_str());
  // An empty trace: refused as an empty Nsight export is (it made a store
  // of 0 events, exit status 0), and no store is left.
  const std::string empty = write("empty.json", R"({"traceEvents": []})");
  const std::string empty_out = dir.filePath("empty.cstrace").toStdString();
  auto none = import_kineto({empty}, empty_out);
  QVERIFY(!none);
  QVERIFY2(QString::fromStdString(none.message()).contains(": no events to import"),
           none.message().c_str());
  QVERIFY(!std::filesystem::exists(empty_out));
  // Events there but none readable: why each was left out (it said the
  // file held no complete events, which it did).
  const std::string unreadable =
      write("unreadable.json",
            R"({"traceEvents": [{"ph":"X","name":"k","ts":10,"dur":-5,"pid":0,"tid":0},)"
            R"({"ph":"X","name":"k","ts":"abc","dur":5,"pid":0,"tid":0}]})");
  auto unread = import_kineto({unreadable}, dir.filePath("u.cstrace").toStdString());
  QVERIFY(!unread);
  QVERIFY2(unread.message() ==
               unreadable +
                   ": no events to import (its traceEvents hold no complete events, ph X or a B/E "
                   "pair, that can be read; left out: events with a negative dur (1), events "
                   "with a ts or dur that is not a number (1))",
           unread.message().c_str());
  // A gzip trace cut in half: said as such (it read "not valid JSON at byte
  // 790353", as if the trace were broken rather than the file).
  {
    QFile whole(QString::fromStdString(kKineto + "sampled_rank-0.json.gz"));
    QVERIFY(whole.open(QIODevice::ReadOnly));
    const std::string cut = write("cut.json.gz", whole.read(whole.size() / 2));
    auto e = import_kineto({cut}, dir.filePath("cut.cstrace").toStdString());
    QVERIFY(!e);
    QVERIFY2(QString::fromStdString(e.message())
                 .contains(QString::fromStdString(cut) + ": the gzip stream is cut short"),
             e.message().c_str());
  }
  auto e3 = import_kineto({dir.filePath("missing.json").toStdString()},
                          dir.filePath("m.cstrace").toStdString());
  QVERIFY(!e3);
  QVERIFY(QString::fromStdString(e3.message()).contains("missing.json: no such file"));
  // Complete events without a start, with a negative length or with a time
  // whose nanoseconds no int64 holds (they wrapped to a "negative dur") are
  // left out and counted, the rest imported.
  const std::string odd = write("odd.json", R"({"traceEvents": [
      {"ph": "X", "name": "k", "ts": 10, "dur": 5, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 20, "dur": -5, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 30, "dur": 1e300, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 9300000000000000, "dur": 5, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": -8000000000000000, "dur": 5, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 2000000000000000, "dur": 400000000000000, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "dur": 5, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 40, "dur": "abc", "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 50, "dur": null, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": "60", "dur": 5, "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 70, "dur": [5], "pid": 0, "tid": 0},
      {"ph": "X", "name": "k", "ts": 80, "dur": {"us": 5}, "pid": 0, "tid": 0},
      1, "k", [2], null]})");
  auto partial = import_kineto({odd}, dir.filePath("odd.cstrace").toStdString());
  QVERIFY2(partial, partial ? "" : partial.message().c_str());
  QCOMPARE(partial->events, std::int64_t{1});
  QCOMPARE(partial->skipped["events with a negative dur"], 1);
  QCOMPARE(partial->skipped["events without ts"], 1);
  // Past the times a store holds, +-2.3e15 us, the start or the end: a span
  // of +-8e15 us hung the app's timeline (its tick step wrapped to 1 ns).
  QCOMPARE(partial->skipped["events with a ts or end past 2.3e15 us (73 years)"], 4);
  // A ts or dur that is text, null, a list or an object (it became 0).
  QCOMPARE(partial->skipped["events with a ts or dur that is not a number"], 5);
  // Entries of traceEvents that are not events (a list of numbers imported
  // nothing and said nothing).
  QCOMPARE(partial->skipped["traceEvents entries that are not objects"], 4);
  // Events lacking a duration, a name or a category are imported, and said so
  // (they were imported silently: zero-length, nameless, CPU operations).
  const std::string lacking = write("lacking.json", R"({"traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "no dur", "ts": 10, "pid": 0, "tid": 7},
      {"ph": "X", "cat": "kernel", "ts": 20, "dur": 5, "pid": 0, "tid": 7},
      {"ph": "X", "name": "no cat", "ts": 30, "dur": 5, "pid": 0, "tid": 7}]})");
  auto lacked = import_kineto({lacking}, dir.filePath("l.cstrace").toStdString());
  QVERIFY2(lacked, lacked ? "" : lacked.message().c_str());
  QCOMPARE(lacked->events, std::int64_t{3});
  for (const char* said : {"1 event with no dur: imported with zero length", "1 event with no name",
                           "1 event with no cat: imported as CPU operations"}) {
    QVERIFY2(std::find(lacked->warnings.begin(), lacked->warnings.end(), said) !=
                 lacked->warnings.end(),
             said);
  }
  // A rank or world size no int holds (2^31 wrapped to a negative rank).
  for (const char* info : {R"("rank": 2147483648)", R"("rank": -1)", R"("world_size": 0)"}) {
    const std::string wrapped = write("wrapped.json", QByteArray(R"({"distributedInfo": {)") +
                                                          info + R"(}, "traceEvents": []})");
    auto e = import_kineto({wrapped}, dir.filePath("w.cstrace").toStdString());
    QVERIFY(!e);
    QVERIFY2(QString::fromStdString(e.message()).contains(": distributedInfo.") &&
                 QString::fromStdString(e.message()).contains("must be between"),
             e.message().c_str());
  }
  // Two files claiming one rank.
  auto e4 = import_kineto({plain, kKineto + "sampled_rank-0.json.gz"},
                          dir.filePath("d.cstrace").toStdString());
  QVERIFY(!e4);
  QVERIFY2(QString::fromStdString(e4.message()).contains("rank 0 is in both"),
           e4.message().c_str());
}

void TestTraceImport::formatDetection() {
  QTemporaryDir dir;
  QCOMPARE(detect_trace_format(kNsys), TraceFormat::nsys_sqlite);
  QCOMPARE(detect_trace_format(kKineto + "allreduce_rank-0.json.gz"), TraceFormat::kineto_json);
  const std::string store = dir.filePath("s.cstrace").toStdString();
  QVERIFY(import_nsys({kNsys}, store));
  QCOMPARE(detect_trace_format(store), TraceFormat::trace_store);
  auto mixed = import_traces({kNsys, kKineto + "allreduce_rank-0.json.gz"},
                             dir.filePath("m.cstrace").toStdString());
  QVERIFY(!mixed);
  QVERIFY(QString::fromStdString(mixed.message()).contains("a different format"));
  auto again = import_traces({store}, dir.filePath("a.cstrace").toStdString());
  QVERIFY(!again);
  QVERIFY(
      QString::fromStdString(again.message()).contains("is already a ClusterScope trace store"));
  QFile text(dir.filePath("notes.txt"));
  text.open(QIODevice::WriteOnly);
  text.write("hello");
  text.close();
  auto unknown =
      import_traces({text.fileName().toStdString()}, dir.filePath("u.cstrace").toStdString());
  QVERIFY(!unknown);
  QVERIFY(QString::fromStdString(unknown.message()).contains("not a trace this build imports"));
  // Said for what it is: text, not an SQLite file SQLite cannot read.
  QVERIFY2(QString::fromStdString(unknown.message())
               .endsWith(": it is no JSON object or array (it does not begin with { or [), and no "
                         "gzip or SQLite file"),
           unknown.message().c_str());

  // An export whose schema SQLite cannot read is named damaged: it was "an
  // SQLite file SQLite cannot read (cannot prepare query: ...)".
  {
    const std::string damaged = dir.filePath("schema.sqlite").toStdString();
    std::filesystem::copy_file(kNsys, damaged);
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(damaged.c_str(), &db), SQLITE_OK);
    exec(db,
         "PRAGMA writable_schema = 1; UPDATE sqlite_master SET sql = 'CREATEtTABLE StringIds(x)' "
         "WHERE name = 'StringIds'");
    sqlite3_close(db);
    auto imported = import_traces({damaged}, dir.filePath("schema.cstrace").toStdString());
    QVERIFY(!imported);
    QVERIFY2(QString::fromStdString(imported.message())
                 .startsWith(QString::fromStdString(damaged) +
                             " is damaged: SQLite cannot read its schema (malformed database "
                             "schema (StringIds)"),
             imported.message().c_str());
  }

  // SQLite's header with a page size no database has, over bytes that are
  // none (SQLITE_NOTADB): damaged too.
  {
    const std::string garbled = dir.filePath("garbled.sqlite").toStdString();
    QByteArray bytes(8192, '\xab');
    bytes.replace(0, 16, QByteArray("SQLite format 3", 16));
    bytes[16] = 0;  // page size 3
    bytes[17] = 3;
    bytes[28] = bytes[29] = bytes[30] = 0;  // 2 pages: not cut short
    bytes[31] = 2;
    QFile f(QString::fromStdString(garbled));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
    f.close();
    auto imported = import_traces({garbled}, dir.filePath("garbled.cstrace").toStdString());
    QVERIFY(!imported);
    QCOMPARE(QString::fromStdString(imported.message()),
             QString::fromStdString(garbled) +
                 " is damaged: SQLite cannot read its schema (file is not a database)");
  }

  // A byte-order mark, and more spaces before the first bracket than the
  // format's look read (16 bytes): "not JSON" before.
  {
    const std::string padded = dir.filePath("padded.json").toStdString();
    QFile f(QString::fromStdString(padded));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(
        "\xef\xbb\xbf" + QByteArray(40, ' ') +
        R"({"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 0}]})");
    f.close();
    auto imported = import_traces({padded}, dir.filePath("padded.cstrace").toStdString());
    QVERIFY2(imported, imported ? "" : imported.message().c_str());
    QCOMPARE(imported->events, std::int64_t{1});
  }

  // A pipe is refused at once: it was opened twice, so the import hung on
  // one with no writer, and lost the first bytes to the format's look on one
  // with a writer (a valid gzip trace then crashed the import).
  const std::string fifo = dir.filePath("trace.json.gz").toStdString();
  QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
  auto piped = import_traces({fifo}, dir.filePath("f.cstrace").toStdString());
  QVERIFY(!piped);
  QVERIFY2(QString::fromStdString(piped.message())
               .endsWith(": it is not a regular file (a pipe, socket or device): save it to a "
                         "file first"),
           piped.message().c_str());

  // A gzip document that is a bare number or string has no container open
  // when its value arrives: the import crashed (SIGSEGV).
  for (const char* document : {"1", "1.5", "\"s\"", "-7"}) {
    const std::string gz = dir.filePath("scalar.json.gz").toStdString();
    gzFile out = gzopen(gz.c_str(), "wb");
    QVERIFY(out);
    gzputs(out, document);
    gzclose(out);
    auto scalar = import_traces({gz}, dir.filePath("n.cstrace").toStdString());
    QVERIFY(!scalar);
    QVERIFY2(
        QString::fromStdString(scalar.message())
            .contains("is not a PyTorch profiler or Chrome trace: it has no traceEvents array"),
        scalar.message().c_str());
  }
}

QTEST_GUILESS_MAIN(TestTraceImport)
#include "tst_trace_import.moc"
