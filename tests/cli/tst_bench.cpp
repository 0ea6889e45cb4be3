// The benchmarks under bench/ as a user runs them: a bad argument or a
// missing ingredient is refused with a line naming it and exit status 2 (1
// for a GPU script on a machine without one), never a "nan" with exit 0;
// and each cheap one, run in a tiny mode, prints its figures' lines with
// the target they are held against. Nothing here is timed: the figures are
// only read for their form.

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include "../process_run.h"

namespace {

using Run = cs::test::ProcessRun;

QString bench(const QString& name) {
  return QStringLiteral(CS_BIN_DIR "/") + name;
}

// The environment a run of the CPU engine needs here (mpirun as root).
QProcessEnvironment mpi_env() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  return env;
}

Run run(const QString& program, const QStringList& args, int timeout_ms = 120000) {
  return cs::test::run_process(program, args, {{}, mpi_env(), timeout_ms});
}

// Every line of `text` that matches `pattern`.
int count_lines(const QString& text, const QString& pattern) {
  const QRegularExpression re(pattern, QRegularExpression::MultilineOption);
  int n = 0;
  for (auto it = re.globalMatch(text); it.hasNext(); it.next())
    ++n;
  return n;
}

}  // namespace

class TestBench : public QObject {
  Q_OBJECT
 private slots:
  void badArgumentsAreRefused_data();
  void badArgumentsAreRefused();
  void allreduceNeedsTwoRanks();
  void plannerQuick();
  void traceQuick();
  void traceInfoTiny();
  void tracingOverheadTiny();
  void cuptiDecoder();
  void gpuCalibrationWithoutGpu();
  void cpuEngineScriptNeedsABuild();
};

void TestBench::badArgumentsAreRefused_data() {
  QTest::addColumn<QString>("program");
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QString>("said");
  QTest::addRow("planner: threads not a number")
      << "bench_planner" << QStringList{"--threads", "two"} << "--threads must be a whole number";
  QTest::addRow("planner: unknown option")
      << "bench_planner" << QStringList{"--quik"} << "unknown argument '--quik'";
  QTest::addRow("trace: no events") << "bench_trace" << QStringList{"--events", "0"}
                                    << "--events must be a whole number, at least 1";
  QTest::addRow("trace: events 2abc") << "bench_trace" << QStringList{"--events", "2abc"}
                                      << "--events must be a whole number, at least 1";
  QTest::addRow("trace: negative trace size")
      << "bench_trace" << QStringList{"--json-mb", "-1"} << "--json-mb must be a number above 0";
  QTest::addRow("trace: unknown option")
      << "bench_trace" << QStringList{"--bogus"} << "unknown argument '--bogus'";
  QTest::addRow("trace info: plan of 0 MB")
      << "bench_trace_info" << QStringList{"--plan-mb", "0"} << "--plan-mb must be a whole number";
  QTest::addRow("trace info: unknown option")
      << "bench_trace_info" << QStringList{"--bogus"} << "unknown option '--bogus'";
  QTest::addRow("gemm: threads not a number")
      << "bench_cpu_gemm" << QStringList{"all"} << "BLAS threads must be a whole number";
  QTest::addRow("gemm: two arguments")
      << "bench_cpu_gemm" << QStringList{"1", "2"} << "too many arguments";
  QTest::addRow("tracing overhead: no runs") << "bench_tracing_overhead" << QStringList{"1", "0"}
                                             << "runs per side must be a whole number from 1";
  QTest::addRow("tracing overhead: no step past the warm-up")
      << "bench_tracing_overhead" << QStringList{"1", "1", "3"}
      << "steps must be a whole number from 4";
  QTest::addRow("tracing overhead: ranks not a number")
      << "bench_tracing_overhead" << QStringList{"abc"} << "ranks must be a whole number from 1";
  QTest::addRow("gui: no starts") << "bench_gui" << QStringList{"--starts", "0"}
                                  << "--starts must be a whole number from 1";
  QTest::addRow("gui: option without its value")
      << "bench_gui" << QStringList{"--edits"} << "--edits needs a value";
  QTest::addRow("gui: names too short to be long")
      << "bench_gui" << QStringList{"--long-names", "40"}
      << "--long-names must be a whole number from 41 to 100000000";
  QTest::addRow("gui: unknown option")
      << "bench_gui" << QStringList{"--only-runs"} << "unknown argument '--only-runs'";
  QTest::addRow("cupti decoder: an argument")
      << "bench_cupti_decoder" << QStringList{"x"} << "takes no arguments";
}

void TestBench::badArgumentsAreRefused() {
  QFETCH(QString, program);
  QFETCH(QStringList, args);
  QFETCH(QString, said);
  if (!QFileInfo::exists(bench(program))) QSKIP(qPrintable(program + " is not built here"));
  QProcessEnvironment env = mpi_env();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  const Run r = cs::test::run_process(bench(program), args, {{}, env, 60000});
  QCOMPARE(r.exit_code, 2);
  QVERIFY2(r.err.contains(said), qPrintable(r.err));
  QVERIFY2(r.err.contains("usage: "), qPrintable(r.err));
  QVERIFY2(r.out.isEmpty(), qPrintable(r.out));  // nothing measured, nothing printed
}

// Started without mpirun (one rank), every bus bandwidth was 0 and every
// ratio nan, with exit status 0.
void TestBench::allreduceNeedsTwoRanks() {
  if (!QFileInfo::exists(bench("bench_allreduce"))) QSKIP("bench_allreduce is not built here");
  const Run r = run(bench("bench_allreduce"), {});
  QCOMPARE(r.exit_code, 2);
  QVERIFY2(r.err.contains("needs 2 or more ranks, it has 1"), qPrintable(r.err));
  QVERIFY2(!r.out.contains("nan"), qPrintable(r.out));
}

void TestBench::plannerQuick() {
  const Run r = run(bench("bench_planner"), {"--quick", "--threads", "1"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains(
               QRegularExpression(R"(us per estimate \(median of 5 x 2000; target < 20 us\))")),
           qPrintable(r.out));
  QVERIFY2(r.out.contains(QRegularExpression(
               R"(\d+ candidates \(\d+ valid, \d+ fit in memory, timed\) in [0-9.]+ s )"
               R"(\(target < 1 s; CPU time [0-9.]+ s\))")),
           qPrintable(r.out));
  QCOMPARE(count_lines(r.out, R"(vs 18 ms per plan \(Calculon, Python\): \d+x faster)"), 2);
  QVERIFY2(r.out.contains("1 threads:"), qPrintable(r.out));
  QVERIFY2(!r.out.contains("nan") && !r.out.contains("inf"), qPrintable(r.out));
}

// Every phase in its tiny form: each says its peak memory in MiB, the
// analyses and the critical paths (each a phase of its own) against the store, the parts their linearity as a ratio; and
// the files are gone after.
void TestBench::traceQuick() {
  if (!QFileInfo::exists(bench("bench_trace"))) QSKIP("bench_trace is not built here");
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString work = dir.filePath("bench");
  const Run r = run(bench("bench_trace"),
                    {"--quick", "--events", "20000", "--json-mb", "0.2", "--dir", work});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
  QCOMPARE(count_lines(r.out, R"(^    peak_rss_mib=[0-9.]+$)"), 18);
  QVERIFY2(!r.out.contains("peak_rss_mb"), qPrintable(r.out));
  QCOMPARE(count_lines(r.out, R"(^    peak memory [0-9.]+x the store's [0-9.]+ MiB \(target: )"
                              R"(well below 1\)$)"),
           3);
  QCOMPARE(count_lines(r.out, R"(^    peak memory [0-9.]+x the store's [0-9.]+ MiB \(no target: )"),
           2);
  QCOMPARE(count_lines(r.out, R"(^critical_path_s=[0-9.]+ steps=\d+ )"), 2);
  QCOMPARE(count_lines(r.out, R"(^events=\d+ write_s=[0-9.]+ rate_meps=[0-9.]+ )"), 2);
  QCOMPARE(count_lines(r.out, R"(writer_vs_floor=[0-9.]+$)"), 2);
  QCOMPARE(count_lines(r.out, R"(^samples=10000 )"), 1);
  QCOMPARE(count_lines(r.out, R"(^time per step at 160 steps against 20: parts [0-9.]+x, )"
                              R"(critical path [0-9.]+x \(target: about 1, linear\)$)"),
           1);
  QCOMPARE(count_lines(r.out, R"(^streams=(20|160) events=\d+ analysis_s=[0-9.]+ )"), 2);
  QCOMPARE(count_lines(r.out, R"(^time per event at 160 streams against 20: [0-9.]+x )"
                              R"(\(target: about 1, linear in the streams\)$)"),
           1);
  QCOMPARE(count_lines(r.out, R"(^input_mb=[0-9.]+ json_mb=[0-9.]+ events=\d+ )"), 2);
  // The Nsight Systems export made (20000 / 5 records asked: 115 x 2^6) and imported.
  QCOMPARE(count_lines(r.out, R"(^records=7360 nsys_mb=[0-9.]+$)"), 1);
  QCOMPARE(count_lines(r.out, R"(^events=\d+ import_s=[0-9.]+ cpu_s=[0-9.]+ events_per_s=\d+$)"),
           1);
  QVERIFY2(!r.out.contains("nan") && !r.out.contains("inf"), qPrintable(r.out));
  QCOMPARE(QDir(work).entryList(QDir::Files), QStringList{});
}

// Its two stores, each timed with the CLI's trace info; the files are gone after.
void TestBench::traceInfoTiny() {
  if (!QFileInfo::exists(bench("bench_trace_info"))) QSKIP("bench_trace_info is not built here");
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const Run r =
      run(bench("bench_trace_info"), {"--plan-mb", "1", "--runs", "1", "--dir", dir.path()});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
  QCOMPARE(count_lines(r.out, R"(^small plan +[0-9.]+ +[0-9.]+$)"), 1);
  QCOMPARE(count_lines(r.out, R"(^1 MB plan +[0-9.]+ +[0-9.]+$)"), 1);
  QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList{});
}

// Two real runs of the worker, one traced: the figures' lines, with the
// target.
void TestBench::tracingOverheadTiny() {
  if (!QFileInfo::exists(bench("bench_tracing_overhead")))
    QSKIP("bench_tracing_overhead is not built here");
  const Run r = run(bench("bench_tracing_overhead"), {"1", "1", "4", "1"}, 240000);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
  QVERIFY2(
      r.out.contains(QRegularExpression(
          R"(median wall time per step: tracing off [0-9.]+ ms, on [0-9.]+ ms: [-+][0-9.]+ %)")),
      qPrintable(r.out));
  QVERIFY2(r.out.contains(QRegularExpression(R"(overhead [-+][0-9.]+ % \(target < 3 %\))")),
           qPrintable(r.out));
  QVERIFY2(r.out.contains(QRegularExpression(R"(run store of the last traced run: [0-9.]+ KiB)")),
           qPrintable(r.out));
  QVERIFY2(!r.out.contains("nan"), qPrintable(r.out));
}

void TestBench::cuptiDecoder() {
  if (!QFileInfo::exists(bench("bench_cupti_decoder")))
    QSKIP("bench_cupti_decoder is not built here (no CUDA toolkit)");
  const Run r = run(bench("bench_cupti_decoder"), {});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
  QCOMPARE(count_lines(r.out, R"(decode +[0-9.]+ M records/s .* decode/walk time [0-9.]+x$)"), 3);
  // In a capture range open throughout, every event of the step mix is kept.
  QCOMPARE(count_lines(r.out, R"(^  \.\.\. in a capture range +975000 records +950000 events )"),
           1);
}

// Without PyTorch or a GPU it says which is missing, and that nothing was
// measured; on a machine with both it would run the whole calibration.
void TestBench::gpuCalibrationWithoutGpu() {
  const Run probe =
      run("python3", {"-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"});
  if (probe.exit_code == 0) QSKIP("PyTorch sees a CUDA GPU here: the script would measure it");
  const Run r = run("python3", {CS_SOURCE_DIR "/bench/calibrate_gpu.py", "--peak-bf16-tflops",
                                "989.4", "--bandwidth-gb-s", "4800"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(QRegularExpression(
               "^calibrate_gpu.py: (needs PyTorch with CUDA|PyTorch .* sees no CUDA GPU).*: "
               "nothing measured\n$")),
           qPrintable(r.err));
  QVERIFY(r.out.isEmpty());
}

void TestBench::cpuEngineScriptNeedsABuild() {
  QTemporaryDir empty;
  const Run r = run("bash", {CS_SOURCE_DIR "/bench/run_cpu_engine_bench.sh", empty.path()});
  QCOMPARE(r.exit_code, 2);
  QVERIFY2(r.err.contains(empty.path() + " is not a CMake build folder"), qPrintable(r.err));
  QVERIFY(r.out.isEmpty());
}

QTEST_GUILESS_MAIN(TestBench)
#include "tst_bench.moc"
