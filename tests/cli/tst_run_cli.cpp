// `clusterscope run` as a user runs it: a real training run through mpirun
// into a run store, its summary and JSON report, plain progress lines when
// not on a terminal, the user's errors, Ctrl-C, and the Slurm script run end
// to end (srun played by mpirun).

#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include "../process_run.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"

namespace {

const QString kCli = CS_BIN_DIR "/clusterscope";

using Run = cs::test::ProcessRun;

Run run_cli(const QStringList& args, const QString& dir = {},
            const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  return cs::test::run_process(kCli, args, {dir, env});
}

// The tiny model of the profiler suites, as model flags of the CLI.
QStringList tiny() {
  return {"--layers", "2",  "--hidden", "32",  "--heads", "4",
          "--seq",    "16", "--ffn",    "128", "--vocab", "256"};
}

// A copy of the CLI in `work` whose ranks ignore a run's stop, as ranks
// stuck in a long store close would: the clusterscope-worker beside it is a
// script that runs the real worker (under the same name, so the launcher
// knows its ranks) with its SIGUSR1 and SIGTERM handlers made "ignore". (A
// renamed worker behind a shell still got mpirun's SIGUSR1, sent to the
// rank's process group, and closed its store.) Empty on failure.
QString deaf_ranks(const QString& work) {
  if (!QDir().mkpath(work + "/ranks")) return {};
  if (!QFile::copy(kCli, work + "/clusterscope") ||
      !QFile::copy(CS_BIN_DIR "/clusterscope-worker", work + "/ranks/clusterscope-worker"))
    return {};
  QFile script(work + "/clusterscope-worker");
  if (!script.open(QIODevice::WriteOnly)) return {};
  script.write("#!/bin/sh\nLD_PRELOAD=" CS_DEAF_RANK_SHIM
               " exec \"$(dirname \"$0\")/ranks/clusterscope-worker\" \"$@\"\n");
  script.close();
  const auto executable = QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner;
  for (const char* name : {"/clusterscope", "/ranks/clusterscope-worker", "/clusterscope-worker"})
    if (!QFile::setPermissions(work + name, executable)) return {};
  return work + "/clusterscope";
}

// The pids of deaf_ranks(work)'s workers still running (not zombies), each
// killed here so that none outlives the test.
QStringList kill_workers_running(const QString& work) {
  const QByteArray worker = (work + "/ranks/clusterscope-worker").toUtf8();
  QStringList running;
  for (const QString& pid : QDir("/proc").entryList(QDir::Dirs)) {
    if (pid.toLongLong() <= 0) continue;
    QFile cmdline("/proc/" + pid + "/cmdline");
    if (!cmdline.open(QIODevice::ReadOnly) || !cmdline.readAll().startsWith(worker + '\0'))
      continue;
    QFile stat("/proc/" + pid + "/stat");
    if (!stat.open(QIODevice::ReadOnly)) continue;
    const QByteArray line = stat.readAll();
    const qsizetype close = line.lastIndexOf(')');
    if (close < 0 || line.mid(close + 2, 1) == "Z") continue;
    running << pid;
    ::kill(static_cast<pid_t>(pid.toLongLong()), SIGKILL);
  }
  return running;
}

// Interrupts `p` (whose ranks are deaf_ranks(work)'s) once, and again a
// second after it said `stopping` while the ranks train on; then checks that
// the second interrupt killed the ranks at once: none left running, the end
// within 15 s (the grace is 30 s), exit 1. `err` gathers its stderr. Void for
// QVERIFY: the caller returns when QTest::currentTestFailed().
void interrupt_twice(QProcess& p, const QString& work, const QString& stopping, QString& err) {
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains(stopping)), 10000);
  // The launcher has told the ranks (every 100 ms); they train on.
  QTest::qWait(1000);
  QVERIFY2(p.state() == QProcess::Running, qPrintable(err));
  QVERIFY2(!err.contains("closed its store"), qPrintable(err));
  QElapsedTimer since_second;
  since_second.start();
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(p.waitForFinished(60000));
  const qint64 took_ms = since_second.elapsed();
  err += QString::fromUtf8(p.readAllStandardError());
  const QStringList left = kill_workers_running(work);
  QVERIFY2(left.isEmpty(), qPrintable(left.join(' ') + "\n" + err));
  QVERIFY2(took_ms < 15000, qPrintable(QString::number(took_ms) + " ms\n" + err));
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(err.contains("clusterscope: killing the ranks (SIGKILL)..."), qPrintable(err));
}

QString status_of(const QString& store) {
  auto reader = cs::trace::TraceReader::open(store.toStdString());
  return reader ? QString::fromStdString((*reader)->state().status)
                : "error: " + QString::fromStdString(reader.message());
}

}  // namespace

class TestRunCli : public QObject {
  Q_OBJECT

 private slots:
  void runsIntoAStore();
  void interleavedRunIsPredictedInterleaved();
  void plainProgressWhenNotATerminal();
  void userErrors_data();
  void userErrors();
  void interruptCancelsCleanly();
  void interruptAsTheRanksStart();
  void secondInterruptKillsTheRanks();
  void secondInterruptKillsACalibration();
  void hangUpStopsACalibrationCleanly();
  void refusedCalibrationPhaseRemovesNothing();
  void runPlanFileKeepsWhatTheUserGave();
  void unwrittenRunStoreSaysTheEarlierOneStays();
  void earlierRanksLeftBesideARunAreSaid();
  void unwrittenRunStoreFails_data();
  void unwrittenRunStoreFails();
  void unwrittenStoreOfAStoppedRunSaysWhereItsRanksAre();
  void slurmScriptEndToEnd();
  void runLeavesTheUsersFilesAlone();
  void pathThatIsNotUtf8();
  void divergedRunKeepsItsSteps();
  void closedPipeDoesNotStopTheRun();
  void hostfileFromAProcessSubstitution();
  void mergeTellsRunsApart();
  void mergeTakesTheWorstEnding_data();
  void mergeTakesTheWorstEnding();
  void planProblemsAreSaid();
  void moreRanksThanCoresAreSaid();
  void ranksSharingACoreAreTimedOffCpu();
  void mergeOnlyRefusesLaunchFlags_data();
  void mergeOnlyRefusesLaunchFlags();

 private:
  QTemporaryDir dir_;
};

void TestRunCli::runsIntoAStore() {
  const QString store = dir_.filePath("json/run.db");
  const Run r = run_cli(QStringList{"run", "--dp", "2", "--steps", "3", "--out", store, "--json",
                                    "--title", "json run"} +
                        tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
  QCOMPARE(j["outcome"].toString(), QString("complete"));
  QCOMPARE(j["run_store"].toString(), store);
  QCOMPARE(j["ranks"].toArray().size(), 2);
  for (const auto& rank : j["ranks"].toArray()) {
    QCOMPARE(rank.toObject()["state"].toString(), QString("done"));
    QCOMPARE(rank.toObject()["last_step"].toInt(), 2);
    QCOMPARE(rank.toObject()["steps_done"].toInt(), 3);
  }
  // The launcher's notes (the model scaled down, the buckets) are in the
  // JSON and on stderr, as without --json.
  const QJsonArray notes = j["notes"].toArray();
  QVERIFY(!notes.isEmpty());
  // This machine's cluster has no GPU for a plan's rules to apply to.
  QVERIFY2(!r.err.contains("does not hold on its cluster"), qPrintable(r.err));
  for (const auto& note : notes)
    QVERIFY2(r.err.contains("note: " + note.toString()), qPrintable(r.err));
  const QJsonArray summary = j["summary"].toObject()["ranks"].toArray();
  QCOMPARE(summary.size(), 2);
  for (const auto& rank : summary) {
    QVERIFY(rank.toObject()["compute_ns"].toDouble() > 0);
    QVERIFY(rank.toObject()["communication_ns"].toDouble() > 0);
  }
  // Both ranks ran the same all-reduces: each is matched across them and
  // timed by its transfer (the rank that joined it last).
  const QJsonArray collectives = j["summary"].toObject()["collectives"].toArray();
  QVERIFY(!collectives.isEmpty());
  for (const auto& value : collectives) {
    const QJsonObject c = value.toObject();
    QVERIFY2(c["transfer_median_ns"].toDouble() > 0 &&
                 c["transfer_median_ns"].toDouble() <= c["mean_ns"].toDouble() * 1.5,
             qPrintable(QJsonDocument(c).toJson()));
    QVERIFY(c["transfer_busbw_gbps"].toDouble() > 0);
  }
  // The command ran mpirun with the worker, never a shell.
  const QJsonArray command = j["command"].toArray();
  QCOMPARE(command.first().toString(), QString("mpirun"));

  auto reader = cs::trace::TraceReader::open(store.toStdString());
  QVERIFY(reader.ok());
  const cs::trace::RunInfo info = (*reader)->run();
  QCOMPARE(QString::fromStdString(info.title), QString("json run"));
  QVERIFY2(QString::fromStdString(info.command_line).contains("run --dp 2 --steps 3"),
           info.command_line.c_str());
  const QJsonObject plan =
      QJsonDocument::fromJson(QByteArray::fromStdString(info.plan_json)).object();
  QCOMPARE(plan["parallel"].toObject()["dp"].toInt(), 2);
  QCOMPARE(plan["workload"].toObject()["layers"].toInt(), 2);
  QVERIFY(plan.contains("cluster"));
  QCOMPARE(QString::fromStdString((*reader)->state().status), QString("complete"));
}

// --virtual-stages runs Megatron's interleaved schedule on the CPU engine
// (it ran 1F1B, said), and its prediction keeps it: the predicted bubble
// of 2 chunks a stage is half that of 1F1B, (p - 1) / (v m) (on any
// cluster: an H100 node here).
void TestRunCli::interleavedRunIsPredictedInterleaved() {
  QStringList model = tiny();
  model[1] = "4";  // layers: pp x chunks
  double bubble[2] = {0, 0};
  for (int chunks = 1; chunks <= 2; ++chunks) {
    const QString store = dir_.filePath(QString("interleaved/v%1.db").arg(chunks));
    const Run r = run_cli(QStringList{"run", "--backend", "cpu", "--pp", "2", "--virtual-stages",
                                      QString::number(chunks), "--micro-batch", "1",
                                      "--global-batch", "4", "--steps", "2", "--out", store} +
                          model);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(!r.err.contains("1F1B"), qPrintable(r.err));
    auto reader = cs::trace::TraceReader::open(store.toStdString());
    QVERIFY(reader.ok());
    const QJsonObject parallel =
        QJsonDocument::fromJson(QByteArray::fromStdString((*reader)->meta("parallel").value_or("")))
            .object();
    QCOMPARE(parallel["virtual_stages"].toInt(), chunks);
    const Run stats =
        run_cli({"trace", "stats", store, "--predict-again", "--cluster", "dgx-h100-8", "--json"});
    QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
    const QJsonArray parts = QJsonDocument::fromJson(stats.out.toUtf8())
                                 .object()["prediction"]
                                 .toObject()["breakdown"]
                                 .toArray();
    for (const auto& part : parts) {
      if (part.toObject()["name"].toString() == "bubble")
        bubble[chunks - 1] = part.toObject()["predicted_s"].toDouble();
    }
  }
  QVERIFY(bubble[0] > 0);
  QVERIFY2(
      std::fabs(bubble[1] / bubble[0] - 0.5) < 0.1,
      qPrintable(
          QString("predicted bubble %1 s interleaved, %2 s 1F1B").arg(bubble[1]).arg(bubble[0])));
}

// A plan that breaks its cluster's rules (2 ranks on a 1-GPU cluster) runs
// here as the engines can, and says each rule broken before it starts (it
// ran without a word, though `clusterscope validate` refuses the plan).
void TestRunCli::planProblemsAreSaid() {
  const QString store = dir_.filePath("problems/run.db");
  const Run r =
      run_cli(QStringList{"run", "--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "1",
                          "--dp", "2", "--backend", "cpu", "--steps", "1", "--out", store} +
              tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("note: the plan does not hold on its cluster") &&
               r.err.contains("/parallel/dp: dp x tp x pp = 2 x 1 x 1 = 2 GPUs, but the cluster "
                              "has 1") &&
               r.err.contains("the engines run it here as they can"),
           qPrintable(r.err));
}

// More CPU-engine ranks than this machine has cores still start (up to 8 a
// core), but the run says first that they take turns on the cores, as the
// app's Runs panel does; a run with a core a rank says nothing of it.
void TestRunCli::moreRanksThanCoresAreSaid() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 4)
    QSKIP(qPrintable(QString("%1 cores: the test would start %2 ranks").arg(cores).arg(cores + 1)));
  const QString ranks = QString::number(cores + 1);
  const QString store = dir_.filePath("oversubscribed/run.db");
  Run r =
      run_cli(QStringList{"run", "--dp", ranks, "--steps", "2", "--out", store, "--json"} + tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QString said = ranks + " ranks of the CPU engine on this machine's " +
                       QString::number(cores) + (cores == 1 ? " core" : " cores") +
                       ": more ranks than cores, so they take turns on the cores";
  QVERIFY2(r.err.contains("note: " + said), qPrintable(r.err));
  bool in_json = false;
  for (const auto& note : QJsonDocument::fromJson(r.out.toUtf8())["notes"].toArray())
    in_json = in_json || note.toString().startsWith(said);
  QVERIFY(in_json);

  r = run_cli(QStringList{"run", "--steps", "2", "--out", dir_.filePath("one/run.db")} + tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(!r.err.contains("more ranks than cores"), qPrintable(r.err));
}

// Two ranks of one BLAS thread held to one core (taskset) take turns on
// it: each op records the time its thread was off CPU, and the breakdown
// counts that time as "descheduled", beside the ops' own time.
void TestRunCli::ranksSharingACoreAreTimedOffCpu() {
  const QString taskset = QStandardPaths::findExecutable("taskset");
  if (taskset.isEmpty()) QSKIP("no taskset (util-linux) to hold the ranks to one core");
  const QString store = dir_.filePath("one-core/run.db");
  QDir().mkpath(dir_.filePath("one-core"));
  // What the ranks' timing of an op costs here, as each rank measures it:
  // a read of the thread's CPU time and one of the run clock, the fastest
  // of 16 batches of 32.
  auto fastest_cpu_time_read = [] {
    double fastest = std::numeric_limits<double>::infinity();
    for (int batch = 0; batch < 16; ++batch) {
      timespec ts{};
      QElapsedTimer timer;
      timer.start();
      for (int i = 0; i < 32; ++i) {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        clock_gettime(CLOCK_REALTIME, &ts);
      }
      fastest = std::min(fastest, static_cast<double>(timer.nsecsElapsed()) / 32);
    }
    return fastest;
  };
  const double read_before = fastest_cpu_time_read();
  const Run r = cs::test::run_process(
      taskset, QStringList{"-c",      "0", kCli,    "run", "--dp",     "2",   "--threads", "1",
                           "--steps", "4", "--out", store, "--layers", "2",   "--hidden",  "128",
                           "--heads", "4", "--seq", "64",  "--ffn",    "512", "--vocab",   "256"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  auto reader = cs::trace::TraceReader::open(store.toStdString());
  QVERIFY2(reader.ok(), reader ? "" : reader.message().c_str());
  int series = 0;
  for (const cs::trace::CounterSeries& c : (*reader)->counter_series().value())
    series += (*reader)->string(c.name) == cs::trace::kOffCpuCounter && c.samples > 0;
  QCOMPARE(series, 2);
  // What that timing costs each op: a read of the thread's CPU time and one
  // of the clock, recorded once by each rank before its work. (That an op
  // following another takes the CPU time that one ended with, one system
  // call an op where there were two, is tst_op_tracer's.)
  // Read here before the run and after it, the fastest kept. The ranks
  // measure it on a core they share, beside other tests: once their figure
  // came out 9 % under this one, once 64 % over it (384 ns against 234).
  const double cpu_clock_read = std::min(read_before, fastest_cpu_time_read());
  const auto cost = (*reader)->find_string(cs::trace::kOpTimingCostCounter);
  QVERIFY(cost);
  for (std::int32_t rank : {0, 1}) {
    const auto samples = (*reader)->counters(rank, *cost);
    QVERIFY2(samples.ok() && samples->size() == 1, qPrintable(QString("rank %1").arg(rank)));
    // At least most of one read (none, as with BLAS threads, is 0.03 us),
    // and not several.
    QVERIFY2(
        (*samples)[0].value > 0.6 * cpu_clock_read && (*samples)[0].value < 2.5 * cpu_clock_read,
        qPrintable(QString("rank %1: %2 ns an op, a CPU-time read here %3 ns")
                       .arg(rank)
                       .arg((*samples)[0].value)
                       .arg(cpu_clock_read)));
  }
  auto ranks = cs::trace::measure_rank_parts(**reader);
  QVERIFY2(ranks.ok(), ranks ? "" : ranks.message().c_str());
  for (const cs::trace::StepParts& p : *ranks) {
    const double descheduled = p.part("descheduled");
    const double on_cpu = p.compute() - descheduled;
    // Both ranks compute at once on one core: each waits about as long as
    // it runs, when their passes overlap. Where one runs ahead while the
    // other yields in its all-reduce, far less: a clean-clone CI run saw
    // 0.15 of it (0.56 ms beside 3.65). Without the off-CPU counter: none.
    QVERIFY2(descheduled > 0.05 * on_cpu,
             qPrintable(QString("rank %1: descheduled %2 ms beside %3 ms on CPU")
                            .arg(p.rank)
                            .arg(descheduled * 1e3)
                            .arg(on_cpu * 1e3)));
  }
}

void TestRunCli::plainProgressWhenNotATerminal() {
  const QString store = dir_.filePath("plain/run.db");
  const Run r =
      run_cli(QStringList{"run", "--backend", "auto", "--steps", "3", "--out", store} + tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  // --backend auto says plainly which engine runs and why.
  QVERIFY2(
      r.err.contains("note: backend auto: no GPU here") || r.err.contains("the CUDA engine runs"),
      qPrintable(r.err));
  for (int s = 1; s <= 3; ++s) {
    QVERIFY2(r.err.contains(QString("\nstep %1/3  loss ").arg(s)), qPrintable(r.err));
  }
  QVERIFY(!r.err.contains('\r'));  // no bar redrawn in place
  QVERIFY2(r.out.contains("the run completed: 1 rank, 3 steps"), qPrintable(r.out));
  // The rank table counts steps as the progress lines do (it said "last step 2").
  QVERIFY2(r.out.contains("steps done") &&
               r.out.contains(QRegularExpression(R"(\bdone\s+3\s)")),
           qPrintable(r.out));
  QVERIFY2(r.out.contains("Where each rank's time went"), qPrintable(r.out));
  QVERIFY2(r.out.contains("run store: " + store), qPrintable(r.out));
  // A complete run keeps only the merged store.
  QVERIFY(!QDir(dir_.filePath("plain/run.ranks")).exists() ||
          QDir(dir_.filePath("plain/run.ranks")).isEmpty());

  // Each line's loss is its own step's, as the store has it: rank 0's
  // latest was printed against the step every rank had finished, a step
  // early when rank 0 ran ahead.
  const QString two = dir_.filePath("plain/two.db");
  const Run r2 = run_cli(QStringList{"run", "--dp", "2", "--steps", "8", "--out", two} + tiny());
  QVERIFY2(r2.exit_code == 0, qPrintable(r2.err));
  auto reader = cs::trace::TraceReader::open(two.toStdString());
  QVERIFY(reader.ok());
  auto steps = (*reader)->steps(0);
  QVERIFY(steps.ok());
  QCOMPARE(int(steps->size()), 8);
  for (const cs::trace::StepMetrics& m : *steps) {
    const QString said = QString("\nstep %1/8  loss %2  ").arg(m.step + 1).arg(m.loss, 0, 'f', 4);
    QVERIFY2(r2.err.contains(said), qPrintable(said + " in\n" + r2.err));
  }
}

void TestRunCli::userErrors_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("message");
  // Rows without the tiny model's flags say MODEL_FROM_ARGS.
  QTest::addRow("ranks against the plan")
      << QStringList{"--dp", "2", "--ranks", "3"} << 1
      << "--ranks 3 does not match the plan's dp x tp x pp = 2 x 1 x 1 = 2";
  QTest::addRow("ranks not a multiple of tp") << QStringList{"--tp", "2", "--ranks", "3"} << 1
                                              << "--ranks 3 is not a multiple of tp x pp = 2";
  QTest::addRow("fp16 on the CPU")
      << QStringList{"--backend", "cpu", "--precision", "fp16"} << 1
      << "the CPU engine computes in fp32 or bf16; the plan asks for fp16";
  QTest::addRow("no ZeRO-4") << QStringList{"--dp", "2", "--zero", "4"} << 2
                             << "--zero: must be between 0 and 3 (got 4)";
  QTest::addRow("generic model")
      << QStringList{"MODEL_FROM_ARGS", "--model", "resnet50"} << 1
      << "the worker trains GPT-style transformers; \"resnet50\" is a generic model";
  QTest::addRow("missing hostfile") << QStringList{"--hostfile", "/nonexistent/hosts"} << 1
                                    << "/nonexistent/hosts: cannot open hostfile";
  QTest::addRow("hostfile and slurm") << QStringList{"--hostfile", "h", "--slurm"} << 2
                                      << "--hostfile and --slurm exclude each other";
  QTest::addRow("unknown backend") << QStringList{"--backend", "tpu"} << 2 << "--backend";
  // Decided on the login node, a GPU partition's job trained on the CPU.
  QTest::addRow("auto under Slurm") << QStringList{"--slurm"} << 1
                                    << "backend auto decides on this machine, but the ranks run on "
                                       "the Slurm job's nodes: name their engine with --backend cpu";
  // Refused before mpirun starts ranks that each fail (this machine has no GPU).
  QTest::addRow("cuda without a GPU") << QStringList{"--backend", "cuda"} << 1
                                      << "backend cuda: no GPU: ";
  QTest::addRow("auto on a hostfile's hosts")
      << QStringList{"--hostfile", "GOOD_HOSTFILE"} << 1
      << "backend auto decides on this machine, but the ranks run on the hostfile's hosts";
  QTest::addRow("bad hostfile line") << QStringList{"--hostfile", "BAD_HOSTFILE"} << 1
                                     << "BAD_HOSTFILE:1: \"node;reboot\" is not a host name";
  // A folder of --out that cannot be made is said as every output's is (it
  // was "RUN.plan.json: cannot write (cannot create ...partial: Not a
  // directory)").
  QTest::addRow("--out under a file")
      << QStringList{"--out", "GOOD_HOSTFILE/runs/run.db"} << 1
      << "GOOD_HOSTFILE/runs/run.db: cannot create its folder GOOD_HOSTFILE/runs (GOOD_HOSTFILE "
         "is a file, not a folder)";
  QTest::addRow("{rank} in --out")
      << QStringList{"--out", "r{rank}.db"} << 2 << "{rank} is not replaced there";
  QTest::addRow("negative seed")
      << QStringList{"--seed", "-1"} << 2
      << "--seed: must be a whole number from 0 to 18446744073709551615 (got -1)";
  // Past 64 bits it ran with the largest seed, silently.
  QTest::addRow("seed past 64 bits")
      << QStringList{"--seed", "99999999999999999999999"} << 2
      << "--seed: must be a whole number from 0 to 18446744073709551615 (got 9999";
  // A thousandth of a second called a finished run hung; 1e-9 s rounded to
  // 0 ms (never), and 1e300 overflowed.
  QTest::addRow("hang timeout under a second")
      << QStringList{"--hang-timeout", "0.001"} << 2
      << "--hang-timeout: must be 0 (none) or at least 1 (got 0.001)";
  QTest::addRow("hang timeout past any run")
      << QStringList{"--hang-timeout", "1e300"} << 2
      << "--hang-timeout: must be between 0 and 1000000000 (got 1e300)";
  // Past a float the engines' rate was inf, and every rank diverged.
  QTest::addRow("learning rate past a float")
      << QStringList{"--lr", "1e300"} << 2
      << "--lr: must be > 0 and <= 3.4028234663852886e+38 (got 1e300)";
}

void TestRunCli::userErrors() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, message);
  const QString bad = dir_.filePath("bad-hosts");
  {
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("node;reboot slots=2\n");
  }
  const QString good = dir_.filePath("good-hosts");
  {
    QFile f(good);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("localhost slots=2\n");
  }
  for (QString& a : args) {
    a.replace("BAD_HOSTFILE", bad);
    a.replace("GOOD_HOSTFILE", good);
  }
  message.replace("BAD_HOSTFILE", bad);
  message.replace("GOOD_HOSTFILE", good);
  const bool model_from_args = args.removeAll("MODEL_FROM_ARGS") > 0;
  const QStringList out = args.contains("--out") ? QStringList{}
                                                 : QStringList{"--out", dir_.filePath("errors/run.db")};
  const Run r = run_cli(QStringList{"run", "--steps", "2"} + out +
                        (model_from_args ? QStringList{} : tiny()) + args);
  QCOMPARE(r.exit_code, code);
  QVERIFY2(r.err.contains(message), qPrintable(r.err));
}

// The plan a run writes beside its store never replaces what the user
// gave: the --plan file itself, when the flags change the plan (it was
// rewritten with them), nor an earlier run's plan when the run is refused
// after planning (its rank stores' folder a file: the plan was written first).
void TestRunCli::runPlanFileKeepsWhatTheUserGave() {
  const QString dir = dir_.filePath("own-plan");
  QVERIFY(QDir().mkpath(dir));
  const QString store = dir + "/run.db", plan = dir + "/run.plan.json";
  const Run made =
      run_cli(QStringList{"run", "--dp", "2", "--steps", "1", "--out", store} + tiny());
  QVERIFY2(made.exit_code == 0, qPrintable(made.err));
  auto text_of = [](const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  const QByteArray before = text_of(plan);
  QVERIFY(before.contains("\"dp\": 2"));
  const Run changed = run_cli({"run", "--plan", plan, "--dp", "1", "--steps", "1", "--out", store});
  QCOMPARE(changed.exit_code, 1);
  QVERIFY2(changed.err.contains(plan + ": is the --plan given, and the flags change its plan"),
           qPrintable(changed.err));
  QCOMPARE(text_of(plan), before);
  // Unchanged, it is the plan: the run takes it as it is, and leaves it so.
  {
    QFile f(plan);
    QVERIFY(f.open(QIODevice::Append));
    f.write("\n");  // as a user's editor leaves it
  }
  const QByteArray edited = text_of(plan);
  const Run again = run_cli({"run", "--plan", plan, "--steps", "1", "--out", store});
  QVERIFY2(again.exit_code == 0, qPrintable(again.err));
  QCOMPARE(text_of(plan), edited);
  // Refused by the rank stores' paths: the earlier plan stays as it was.
  QVERIFY(QDir(dir + "/run.ranks").removeRecursively());
  {
    QFile f(dir + "/run.ranks");
    QVERIFY(f.open(QIODevice::WriteOnly));
  }
  const Run refused =
      run_cli(QStringList{"run", "--dp", "1", "--steps", "1", "--out", store} + tiny());
  QCOMPARE(refused.exit_code, 1);
  QVERIFY2(refused.err.contains(dir + "/run.ranks: is not a folder: the run keeps its rank stores "
                                      "there"),
           qPrintable(refused.err));
  QCOMPARE(text_of(plan), edited);
}

// An earlier run of more ranks (one that crashed keeps its rank stores)
// leaves stores past this run's ranks in its folder: said, left as they
// were (a --merge-only of this run refuses the folder while they are there).
void TestRunCli::earlierRanksLeftBesideARunAreSaid() {
  const QString dir = dir_.filePath("earlier-ranks");
  QVERIFY(QDir().mkpath(dir + "/run.ranks"));
  QVERIFY(
      QFile::copy(CS_SOURCE_DIR "/tests/data/cpu/cpu-engine-dp2.db", dir + "/run.ranks/rank1.db"));
  const Run r =
      run_cli(QStringList{"run", "--dp", "1", "--steps", "1", "--out", dir + "/run.db"} + tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("note: " + dir +
                          "/run.ranks holds rank stores of an earlier run of more ranks "
                          "(rank1.db), left as they were"),
           qPrintable(r.err));
  QVERIFY(QFile::exists(dir + "/run.ranks/rank1.db"));
}

// Ctrl-C: the ranks close their stores, the run store is merged and marked
// cancelled, and the command says so.
void TestRunCli::interruptCancelsCleanly() {
  const QString store = dir_.filePath("interrupt/run.db");
  QProcess p;
  p.start(kCli, QStringList{"run", "--dp", "2", "--steps", "100000", "--out", store} + tiny());
  QVERIFY(p.waitForStarted());
  QString err;
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains("step 3/")), 60000);
  // A second run given the same store is refused: it removed the first
  // one's rank stores under its workers, and the first merged nothing.
  // Nor does it replace the first one's plan.
  const auto plan_text = [&] {
    QFile f(dir_.filePath("interrupt/run.plan.json"));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  const QByteArray plan = plan_text();
  QVERIFY(plan.contains("\"dp\": 2"));
  const Run twin = run_cli(QStringList{"run", "--dp", "1", "--steps", "2", "--out", store} + tiny());
  QCOMPARE(twin.exit_code, 1);
  QVERIFY2(twin.err.contains(store + ": another run is writing it (its rank stores in " +
                             dir_.filePath("interrupt/run.ranks") + " are in use)"),
           qPrintable(twin.err));
  QCOMPARE(plan_text(), plan);
  // Stores still being written merge as they stand, a partial run: the
  // merge said they "ended interrupted" while the run trained on.
  const QString snapshot = dir_.filePath("interrupt/snapshot.db");
  const Run merged = run_cli({"trace", "merge", dir_.filePath("interrupt/run.ranks/rank0.db"),
                              dir_.filePath("interrupt/run.ranks/rank1.db"), "-o", snapshot});
  QVERIFY2(merged.exit_code == 0, qPrintable(merged.err));
  QVERIFY2(merged.err.contains("rank0.db is still being written (its writer is running): merged "
                               "as committed so far"),
           qPrintable(merged.err));
  QVERIFY2(!merged.err.contains("ended interrupted"), qPrintable(merged.err));
  QCOMPARE(status_of(snapshot), QString("partial"));
  // One stop sent twice at once (GNU timeout signals the command, then its
  // process group) is one stop: it killed the ranks as a second Ctrl-C.
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
  QVERIFY(p.waitForFinished(60000));
  err += QString::fromUtf8(p.readAllStandardError());
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(err.contains("stopping the run (every rank closes its store)"), qPrintable(err));
  QVERIFY2(!err.contains("killing the ranks"), qPrintable(err));
  QVERIFY2(err.contains("clusterscope: error: the run was cancelled"), qPrintable(err));
  QVERIFY2(out.contains(QRegularExpression("the run was cancelled; steps done: \\d+ by rank 0")),
           qPrintable(out));
  QCOMPARE(status_of(store), QString("cancelled"));
  for (int rank = 0; rank < 2; ++rank) {
    QCOMPARE(status_of(dir_.filePath("interrupt/run.ranks/rank%1.db").arg(rank)),
             QString("cancelled"));
  }
  QVERIFY(!QFile::exists(dir_.filePath("interrupt/run.ranks/run.lock")));
}

// A Ctrl-C just after mpirun began, before any rank had started: the ranks
// that start after it are told too. They trained on until the grace ran out
// (30 s, 447 to 893 steps of this model), and a second Ctrl-C did nothing.
void TestRunCli::interruptAsTheRanksStart() {
  const QString store = dir_.filePath("interrupt-early/run.db");
  QProcess p;
  p.start(kCli, QStringList{"run", "--dp", "2", "--steps", "100000", "--out", store} + tiny());
  QVERIFY(p.waitForStarted());
  QString err;
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains("running: ")), 60000);
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(p.waitForFinished(60000));
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(out.contains("the run was cancelled; steps done: "), qPrintable(out));
  const QRegularExpression step("(\\d+) by rank \\d+");
  for (auto m = step.globalMatch(out); m.hasNext();) {
    const int last = m.next().captured(1).toInt();
    QVERIFY2(last < 100, qPrintable(out));
  }
  // On a busy machine mpirun may not have started a rank yet, or a rank that
  // started not yet made its store: no step ran, there is no store to
  // merge, and the note says so.
  if (!step.match(out).hasMatch() && !QFile::exists(store)) {
    QVERIFY2(out.contains("steps done: rank 0 not started, rank 1 not started") ||
                 out.contains("note: no run store was written: no rank made a store to merge "
                              "into " +
                              store),
             qPrintable(out));
    return;
  }
  QVERIFY2(QFile::exists(store), qPrintable(out + err));
  QCOMPARE(status_of(store), QString("cancelled"));
}

// A second Ctrl-C while the ranks are still closing their stores kills them
// (it did nothing: the run waited out the 30 s grace), and what their stores
// had committed is merged. The ranks do not hear the stop (deaf_ranks).
void TestRunCli::secondInterruptKillsTheRanks() {
  const QString work = dir_.filePath("second-interrupt");
  const QString cli = deaf_ranks(work);
  QVERIFY(!cli.isEmpty());
  const QString store = work + "/run.db";
  QProcess p;
  p.start(cli, QStringList{"run", "--dp", "2", "--steps", "100000", "--out", store} + tiny());
  QVERIFY(p.waitForStarted());
  QString err;
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains("step 3/")), 60000);
  interrupt_twice(p, work, "stopping the run", err);
  if (QTest::currentTestFailed()) return;
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QCOMPARE(err.count(QRegularExpression("rank \\d+ started on")), 2);
  QVERIFY2(err.contains("clusterscope: error: the run was cancelled: the ranks were killed on a "
                        "second interrupt"),
           qPrintable(err));
  QVERIFY2(out.contains(QRegularExpression("the run was cancelled; steps done: \\d+ by rank 0")),
           qPrintable(out));
  QCOMPARE(status_of(store), QString("cancelled"));
  // What the ranks had committed before they were killed: their steps.
  const Run info = run_cli({"trace", "info", store, "--json"});
  QVERIFY2(info.exit_code == 0, qPrintable(info.err));
  const QJsonObject i = QJsonDocument::fromJson(info.out.toUtf8()).object();
  QVERIFY2(i["events"].toDouble() > 0, qPrintable(info.out));
  const Run stats = run_cli({"trace", "stats", store, "--json"});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  const QJsonArray ranks = QJsonDocument::fromJson(stats.out.toUtf8())["ranks"].toArray();
  QVERIFY2(!ranks.isEmpty(), qPrintable(stats.out));
  QVERIFY2(!ranks[0].toObject()["steps"].toArray().isEmpty(), qPrintable(stats.out));
  // A rank whose last reported steps its store lacks (killed before they
  // were committed) is said to, with both counts; the report and the store
  // disagreed unsaid.
  auto reader = cs::trace::TraceReader::open(store.toStdString());
  QVERIFY(reader);
  const QRegularExpression row("^(\\d+)\\s+\\S+\\s+\\S+\\s+(\\d+)\\s");
  int rows = 0;
  for (const QString& line : out.split('\n')) {
    const QRegularExpressionMatch m = row.match(line);
    if (!m.hasMatch()) continue;
    ++rows;
    const int rank = m.captured(1).toInt(), reported = m.captured(2).toInt();
    auto steps = (*reader)->steps(rank);
    QVERIFY(steps);
    const int stored = int(steps->size());
    QVERIFY2(stored <= reported, qPrintable(out));
    const QString said = QString(
                             "note: rank %1 reported %2 steps; its store holds %3: the last "
                             "were not committed when it ended")
                             .arg(rank)
                             .arg(reported)
                             .arg(stored);
    if (stored < reported) {
      QVERIFY2(out.contains(said), qPrintable(out));
    } else {
      QVERIFY2(!out.contains(QString("note: rank %1 reported").arg(rank)), qPrintable(out));
    }
  }
  QCOMPARE(rows, 2);
}

// The same in a calibration: a second Ctrl-C kills the phase's ranks, and
// its stores are removed as on the first.
void TestRunCli::secondInterruptKillsACalibration() {
  const QString work = dir_.filePath("second-interrupt-calibration");
  const QString cli = deaf_ranks(work);
  QVERIFY(!cli.isEmpty());
  QProcess p;
  p.start(cli, {"calibrate", "--backend", "cpu", "--ranks", "1", "--precisions", "fp32",
                "--gemm-sizes", "64", "--seconds", "60", "--no-ops", "--no-reference-runs",
                "--no-save", "--out", work + "/cal.db"});
  QVERIFY(p.waitForStarted());
  QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(work + "/cal.phase0.ranks/rank0.db"), 60000);
  QString err;
  interrupt_twice(p, work, "stopping the calibration", err);
  if (QTest::currentTestFailed()) return;
  QVERIFY2(err.contains("clusterscope: error: calibration cancelled during phase 1 of 1 (its "
                        "ranks were killed on a second interrupt)"),
           qPrintable(err));
  QStringList after = QDir(work).entryList(QDir::AllEntries | QDir::NoDotAndDotDot);
  after.sort();
  QCOMPARE(after, (QStringList{"clusterscope", "clusterscope-worker", "ranks"}));
}

// A phase refused its paths (a file of the user's there, or another
// calibration's live stores) leaves them as they are: they were removed
// with the phase's own, the other calibration's measurements lost.
void TestRunCli::refusedCalibrationPhaseRemovesNothing() {
  const QString work = dir_.filePath("refused-phase");
  QVERIFY(QDir().mkpath(work + "/cal.phase0.ranks"));
  for (const QString& file : {work + "/cal.phase0.db", work + "/cal.phase0.ranks/notes.txt"}) {
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("mine\n");
  }
  const Run r = run_cli({"calibrate", "--backend", "cpu", "--ranks", "1", "--precisions", "fp32",
                         "--gemm-sizes", "64", "--seconds", "0.01", "--no-ops",
                         "--no-reference-runs", "--no-save", "--out", work + "/cal.db"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(work + "/cal.phase0.db: is a file that is not a trace store"),
           qPrintable(r.err));
  QVERIFY2(r.err.contains("nothing it recorded was kept"), qPrintable(r.err));
  QVERIFY(QFile::exists(work + "/cal.phase0.db"));
  QVERIFY(QFile::exists(work + "/cal.phase0.ranks/notes.txt"));
  // Nor is an --out the phases cannot merge into measured for: a folder
  // there failed the merge after the whole sweep.
  QVERIFY(QDir().mkpath(work + "/folder.db"));
  const Run folder = run_cli({"calibrate", "--backend", "cpu", "--ranks", "1", "--precisions",
                              "fp32", "--gemm-sizes", "64", "--seconds", "0.01", "--no-ops",
                              "--no-reference-runs", "--no-save", "--out", work + "/folder.db"});
  QCOMPARE(folder.exit_code, 1);
  QVERIFY2(folder.err.contains(work + "/folder.db: is a folder") &&
               folder.err.contains("nothing was measured"),
           qPrintable(folder.err));
  QVERIFY(!QFile::exists(work + "/folder.phase0.db"));
}

// A closed terminal (SIGHUP) stops `clusterscope calibrate` as Ctrl-C does:
// the ranks close their stores, the phase's stores are removed, and the
// command says so (SIGHUP used to kill it and leave them behind).
void TestRunCli::hangUpStopsACalibrationCleanly() {
  const QString work = dir_.filePath("hang-up");
  QVERIFY(QDir().mkpath(work));
  QProcess p;
  p.start(kCli, {"calibrate", "--backend", "cpu", "--ranks", "1", "--precisions", "fp32",
                 "--gemm-sizes", "64", "--seconds", "60", "--no-ops", "--no-reference-runs",
                 "--no-save", "--out", work + "/cal.db"});
  QVERIFY(p.waitForStarted());
  // The rank's store exists once the sweep runs.
  QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(work + "/cal.phase0.ranks/rank0.db"), 60000);
  ::kill(static_cast<pid_t>(p.processId()), SIGHUP);
  QVERIFY(p.waitForFinished(60000));
  const QString err = QString::fromUtf8(p.readAllStandardError());
  QCOMPARE(p.exitStatus(), QProcess::NormalExit);
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(err.contains("clusterscope: stopping the calibration..."), qPrintable(err));
  QVERIFY2(err.contains("clusterscope: error: calibration cancelled during phase 1 of 1"),
           qPrintable(err));
  QCOMPARE(QDir(work).entryList(QDir::AllEntries | QDir::NoDotAndDotDot), QStringList{});
}

void TestRunCli::unwrittenRunStoreFails_data() {
  QTest::addColumn<bool>("deleted");
  QTest::addRow("a folder takes its name") << false;
  QTest::addRow("its folder deleted") << true;
}

// Ranks that finish but a run store that cannot be written (a folder took
// its name during the run; a full disk while merging does the same): an
// error, not "completed" with exit 0, and the rank stores are kept. When the
// whole output folder was deleted during the run, the rank stores went with
// it, and the message says so (it pointed at their folder, gone).
void TestRunCli::unwrittenRunStoreFails() {
  QFETCH(bool, deleted);
  const QString folder = dir_.filePath(deleted ? "deleted" : "unwritten");
  const QString store = folder + "/run.db";
  QProcess p;
  p.start(kCli, QStringList{"run", "--dp", "2", "--steps", "40", "--out", store} + tiny());
  QVERIFY(p.waitForStarted());
  QString err;
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains("step 1/")), 60000);
  QVERIFY(deleted ? QDir(folder).removeRecursively() : QDir().mkpath(store));
  QVERIFY(p.waitForFinished(120000));
  err += QString::fromUtf8(p.readAllStandardError());
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(err.contains("clusterscope: error: the run completed, but its run store " + store +
                        " was not written"),
           qPrintable(err));
  if (deleted) {
    QVERIFY2(err.contains("the rank stores' folder " + folder + "/run.ranks is gone too"),
             qPrintable(err));
    return;
  }
  QVERIFY2(err.contains("the rank stores are kept in " + folder + "/run.ranks"), qPrintable(err));
  for (int rank = 0; rank < 2; ++rank) {
    QCOMPARE(status_of(folder + QString("/run.ranks/rank%1.db").arg(rank)), QString("complete"));
  }
}

// The run store not written over an earlier run's store, which stays: the
// error says that store is the earlier run's (it read as this run's).
void TestRunCli::unwrittenRunStoreSaysTheEarlierOneStays() {
  const QString folder = dir_.filePath("earlier-stays");
  const QString store = folder + "/run.db";
  const QStringList run = QStringList{"run", "--dp", "2", "--steps", "1", "--out", store} + tiny();
  const Run first = run_cli(run);
  QVERIFY2(first.exit_code == 0, qPrintable(first.err));
  // Immutable, it cannot be replaced (a full disk while merging does the same).
  if (QProcess::execute("chattr", {"+i", store}) != 0)
    QSKIP("chattr +i is not available here (needs root and a file system that has it)");
  const auto mutable_again = qScopeGuard([&] { QProcess::execute("chattr", {"-i", store}); });
  const Run second = run_cli(run);
  QCOMPARE(second.exit_code, 1);
  QVERIFY2(second.err.contains("its run store " + store +
                               " was not written (the store at that path is an earlier run's, "
                               "left as it was)"),
           qPrintable(second.err));
}

// A run that did not complete and could not write its run store either
// (here a folder takes its name; a full disk does the same): the rank
// stores are kept, and the output says where and how to merge them (it
// said so only for a completed run).
void TestRunCli::unwrittenStoreOfAStoppedRunSaysWhereItsRanksAre() {
  const QString folder = dir_.filePath("unwritten-cancelled");
  const QString store = folder + "/run.db";
  QProcess p;
  p.start(kCli, QStringList{"run", "--dp", "2", "--steps", "100000", "--out", store} + tiny());
  QVERIFY(p.waitForStarted());
  QString err;
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains("step 1/")), 60000);
  QVERIFY(QDir().mkpath(store));
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(p.waitForFinished(120000));
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(out.contains("note: " + store + " was not written; what the ranks recorded is kept in " +
                        folder + "/run.ranks: merge it with the same flags and --merge-only"),
           qPrintable(out));
  QCOMPARE(status_of(folder + "/run.ranks/rank0.db"), QString("cancelled"));
}

// The batch script as Slurm would run it, with srun played by mpirun (this
// machine has no Slurm): the workers train, then the script's last command
// merges their stores.
void TestRunCli::slurmScriptEndToEnd() {
  const QString work = dir_.filePath("slurm");
  QVERIFY(QDir().mkpath(work + "/bin"));
  const QString store = work + "/run.db";
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("PATH", work + "/bin:" + env.value("PATH"));  // no sbatch there

  // A store whose path no #SBATCH line can carry is refused before the plan
  // is written beside it (the refused job left its plan behind).
  const QString spaced = work + "/with space/run.db";
  const Run refused = run_cli(QStringList{"run", "--dp", "2", "--steps", "3", "--out", spaced,
                                          "--slurm", "--backend", "cpu"} +
                                  tiny(),
                              work, env);
  QCOMPARE(refused.exit_code, 1);
  QVERIFY2(refused.err.contains("holds characters a #SBATCH line cannot carry"),
           qPrintable(refused.err));
  QVERIFY(!QFile::exists(work + "/with space/run.plan.json"));

  const Run r = run_cli(QStringList{"run", "--dp", "2", "--steps", "3", "--out", store, "--slurm",
                                    "--slurm-partition", "cpu", "--backend", "cpu"} +
                            tiny(),
                        work, env);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  if (!r.out.contains("sbatch is not on PATH")) QSKIP("sbatch is installed here");
  QVERIFY2(r.out.contains("wrote the batch script " + work + "/run.sbatch"), qPrintable(r.out));

  // srun --mpi=pmix --kill-on-bad-exit=1 WORKER ARGS... -> mpirun -n 2 WORKER ARGS...
  QFile srun(work + "/bin/srun");
  QVERIFY(srun.open(QIODevice::WriteOnly));
  srun.write("#!/bin/sh\nshift 2\nexec mpirun -n 2 --allow-run-as-root --oversubscribe \"$@\"\n");
  srun.close();
  QVERIFY(srun.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  // While another run holds the store's lock, the job starts nothing.
  QVERIFY(QDir().mkpath(work + "/run.ranks"));
  const int lock = ::open(QFile::encodeName(work + "/run.ranks/run.lock").constData(),
                          O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  QVERIFY(lock >= 0 && ::flock(lock, LOCK_EX | LOCK_NB) == 0);
  QProcess busy;
  busy.setProcessEnvironment(env);
  busy.setWorkingDirectory(work);
  busy.start("/bin/bash", {work + "/run.sbatch"});
  QVERIFY(busy.waitForFinished(120000));
  ::close(lock);
  QCOMPARE(busy.exitCode(), 1);
  const QString busy_err = QString::fromUtf8(busy.readAllStandardError());
  QVERIFY2(busy_err.contains(store + ": another run is writing it"), qPrintable(busy_err));
  QVERIFY(!QFile::exists(work + "/run.ranks/rank0.db"));

  // Free: the ranks train, and the merge at the end is not refused by the
  // job's own lock.
  QProcess bash;
  bash.setProcessEnvironment(env);
  bash.setWorkingDirectory(work);
  bash.start("/bin/bash", {work + "/run.sbatch"});
  QVERIFY(bash.waitForFinished(120000));
  const QString out = QString::fromUtf8(bash.readAllStandardOutput());
  QVERIFY2(bash.exitCode() == 0, qPrintable(QString::fromUtf8(bash.readAllStandardError())));
  QVERIFY2(out.contains("merged the rank stores of a run that ended complete into " + store),
           qPrintable(out));
  QCOMPARE(status_of(store), QString("complete"));
  auto reader = cs::trace::TraceReader::open(store.toStdString());
  QVERIFY(reader.ok());
  QCOMPARE(static_cast<int>((*reader)->ranks().size()), 2);
}

// Linux paths are bytes: a store named with a Latin-1 byte is run into, and
// the JSON that names it carries U+FFFD (the launcher aborted on it, and
// validate --json stopped with an internal error).
void TestRunCli::pathThatIsNotUtf8() {
  const QString work = dir_.filePath("latin1");
  QVERIFY(QDir().mkpath(work));
  // The shell makes the names: a QString argument would be UTF-8.
  auto shell = [&](const QString& script, const QStringList& args = {}) {
    return cs::test::run_process("/bin/sh", QStringList{"-c", script, kCli} + args, {work});
  };
  const Run run = shell(
      "exec \"$0\" run --json --steps 2 --out \"$(printf 'r\\351sum\\351.db')\" \"$@\"", tiny());
  QVERIFY2(run.exit_code == 0, qPrintable(run.err));
  const QJsonObject report = QJsonDocument::fromJson(run.out.toUtf8()).object();
  QCOMPARE(report["outcome"].toString(), QString("complete"));
  QVERIFY2(report["run_store"].toString().endsWith(QString::fromUtf8("r\uFFFDsum\uFFFD.db")),
           qPrintable(report["run_store"].toString()));
  QVERIFY(shell("test -s \"$(printf 'r\\351sum\\351.db')\"").exit_code == 0);

  const Run validated = shell(
      "printf x > \"$(printf 'v\\351.json')\"; exec \"$0\" validate --json \"$(printf "
      "'v\\351.json')\"");
  QCOMPARE(validated.exit_code, 1);
  const QJsonArray files = QJsonDocument::fromJson(validated.out.toUtf8()).array();
  QCOMPARE(files.size(), 1);
  QCOMPARE(files[0].toObject()["valid"].toBool(), false);
  // QTemporaryDir cannot remove names that are not UTF-8: removed here.
  QVERIFY(shell("rm -f -- *").exit_code == 0);
}

// What the user keeps beside a run's output is not the run's: a file given
// as --out that is not a store (a plan, notes), files of theirs in the rank
// stores' folder, a hostfile named like the run's copy, a file named like
// the run's plan. Each used to be replaced or deleted silently.
void TestRunCli::runLeavesTheUsersFilesAlone() {
  const QString work = dir_.filePath("users-files");
  QVERIFY(QDir().mkpath(work + "/run.ranks") && QDir().mkpath(work + "/mine.ranks"));
  auto write = [](const QString& path, const QByteArray& text) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text);
  };
  auto text_of = [](const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("(missing)");
  };
  // --out naming a text file: refused before any rank starts.
  write(work + "/notes.txt", "important data\n");
  Run r = run_cli(QStringList{"run", "--steps", "2", "--out", work + "/notes.txt"} + tiny());
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(work + "/notes.txt: is a file that is not a trace store"),
           qPrintable(r.err));
  QCOMPARE(text_of(work + "/notes.txt"), QByteArray("important data\n"));
  // --out naming a store of a newer schema: this build cannot read it back,
  // and replaced it would be lost to the build that wrote it.
  {
    const QString newer = work + "/newer.db";
    {
      cs::trace::RunInfo info;
      info.source = "test";
      auto created = cs::trace::TraceWriter::create(newer.toStdString(), info);
      QVERIFY2(created, created ? "" : created.message().c_str());
      QVERIFY((*created)->close());
    }
    QFile f(newer);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek(60));  // the SQLite header's user_version, big-endian
    QCOMPARE(f.write(QByteArray::fromHex("00000003")), qint64(4));
    f.close();
    const QByteArray before = text_of(newer);
    r = run_cli(QStringList{"run", "--steps", "2", "--out", newer} + tiny());
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains(newer + ": is a trace store of schema version 3, written by a newer "
                                    "ClusterScope (this build writes version 2)"),
             qPrintable(r.err));
    QVERIFY(text_of(newer) == before);
    QVERIFY(!QFileInfo::exists(work + "/newer.plan.json"));
  }
  // A file named like the run's plan that is not a plan.
  write(work + "/other.plan.json", "precious\n");
  r = run_cli(QStringList{"run", "--steps", "2", "--out", work + "/other.db"} + tiny());
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("other.plan.json: the run writes its plan there"), qPrintable(r.err));
  QCOMPARE(text_of(work + "/other.plan.json"), QByteArray("precious\n"));
  // A file of the user's named like a rank store: the run is refused, the
  // file kept (it was removed at launch).
  write(work + "/mine.ranks/rank0.db", "my notes\n");
  r = run_cli(QStringList{"run", "--steps", "2", "--out", work + "/mine.db"} + tiny());
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(work + "/mine.ranks/rank0.db: is a file that is not a trace store") &&
               r.err.contains("(the run keeps rank 0's store there)"),
           qPrintable(r.err));
  QCOMPARE(text_of(work + "/mine.ranks/rank0.db"), QByteArray("my notes\n"));
  // A completed run removes its rank stores, not the user's file among them,
  // and reads the user's hostfile without rewriting it.
  write(work + "/run.ranks/mine.txt", "keep me\n");
  const QByteArray hosts = "# hand-edited\nlocalhost slots=2  # keep\n";
  write(work + "/run.hosts", hosts);
  r = run_cli(QStringList{"run", "--steps", "2", "--out", work + "/run.db", "--hostfile",
                          work + "/run.hosts", "--backend", "cpu"} +
              tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QCOMPARE(text_of(work + "/run.ranks/mine.txt"), QByteArray("keep me\n"));
  QVERIFY(!QFile::exists(work + "/run.ranks/rank0.db"));
  QCOMPARE(text_of(work + "/run.hosts"), hosts);
  QCOMPARE(status_of(work + "/run.db"), QString("complete"));
  // A run again over its own store is what --out is for.
  r = run_cli(QStringList{"run", "--steps", "2", "--out", work + "/run.db"} + tiny());
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
}

// A learning rate that makes the gradients or the loss NaN: the ranks stop with that reason,
// and the steps before it stay in the store (a NaN step row used to fail the
// store's last write and take every event with it).
void TestRunCli::divergedRunKeepsItsSteps() {
  const QString store = dir_.filePath("diverged/run.db");
  const Run r =
      run_cli(QStringList{"run", "--steps", "20", "--lr", "1e12", "--out", store} + tiny());
  QCOMPARE(r.exit_code, 1);
  // Its gradients go first (no weight updated with them), or its loss.
  QVERIFY2(r.err.contains(QRegularExpression("training diverged: the (loss|gradient norm) is")),
           qPrintable(r.err));
  QVERIFY2(r.err.contains("is the learning rate 1e+12 too large?"), qPrintable(r.err));
  auto reader = cs::trace::TraceReader::open(store.toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  QVERIFY((*reader)->event_count() > 0);
  auto steps = (*reader)->steps();
  QVERIFY(steps && !steps->empty());
  QCOMPARE(QString::fromStdString((*reader)->state().status), QString("failed"));
  // The step that diverged, counted from 1 as the progress lines count: the
  // one after the last step stored (it said the last step stored).
  std::int32_t last = 0;
  for (const cs::trace::StepMetrics& m : *steps)
    last = std::max(last, m.step);
  QVERIFY2(r.err.contains(QRegularExpression(QString("at step %1[ ;]").arg(last + 2))),
           qPrintable(r.err));
}

// `clusterscope run ... | head -1`: head exits, the launcher's next write
// fails, and the run still trains to its end and merges its store (the
// launcher used to die of SIGPIPE and leave its ranks without a parent).
void TestRunCli::closedPipeDoesNotStopTheRun() {
  const QString store = dir_.filePath("pipe/run.db");
  QStringList args = QStringList{"run", "--dp", "2", "--steps", "30", "--out", store} + tiny();
  for (QString& a : args)
    a = "'" + a + "'";
  QProcess sh;
  sh.start("sh", {"-c", "'" + kCli + "' " + args.join(' ') + " 2>&1 | head -1; exit 0"});
  QVERIFY(sh.waitForFinished(120000));
  QTRY_COMPARE_WITH_TIMEOUT(status_of(store), QString("complete"), 60000);
}

// `--hostfile <(...)`, as a job script writes one from its node list: a
// pipe, read once. The run read it twice (to check it, then to launch) and
// the second read found it empty: "/dev/fd/63: no hosts listed".
void TestRunCli::hostfileFromAProcessSubstitution() {
  const QString store = dir_.filePath("substituted/run.db");
  QStringList args =
      QStringList{"run", "--steps", "2", "--backend", "cpu", "--out", store} + tiny();
  for (QString& a : args)
    a = "'" + a + "'";
  const Run r = cs::test::run_process(
      "bash", {"-c", "'" + kCli + "' " + args.join(' ') +
                         " --hostfile <(printf '# the nodes of the job\\nlocalhost slots=2\\n')"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QCOMPARE(status_of(store), QString("complete"));
}

// `trace merge` of rank stores: ranks of two different runs are refused
// (they used to merge into one "complete" run), and a run whose ranks did
// not complete is marked as they ended.
void TestRunCli::mergeTellsRunsApart() {
  const QString work = dir_.filePath("merge-runs");
  for (const char* seed_text : {"1", "2"}) {
    const QString seed = seed_text;
    const Run r = run_cli(QStringList{"run", "--dp", "2", "--steps", "2", "--seed", seed,
                                      "--keep-rank-stores", "--out", work + "/s" + seed + ".db"} +
                          tiny());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  }
  Run r = run_cli({"trace", "merge", work + "/s1.ranks/rank0.db", work + "/s2.ranks/rank1.db",
                   "-o", work + "/mixed.db"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("s1.ranks/rank0.db is a rank store of run ") &&
               r.err.contains("s2.ranks/rank1.db of run ") &&
               r.err.contains(": merge the rank stores of one run"),
           qPrintable(r.err));
  QVERIFY(!QFile::exists(work + "/mixed.db"));
  // Two runs of one command (its --out and every flag the same): their
  // stores said the same of themselves, and merged into one "complete" run
  // of ranks that never ran together. Each run's id tells them apart.
  QVERIFY(QFile::copy(work + "/s1.ranks/rank0.db", work + "/first-rank0.db"));
  const Run again = run_cli(QStringList{"run", "--dp", "2", "--steps", "2", "--seed", "1",
                                        "--keep-rank-stores", "--out", work + "/s1.db"} +
                            tiny());
  QVERIFY2(again.exit_code == 0, qPrintable(again.err));
  r = run_cli({"trace", "merge", work + "/first-rank0.db", work + "/s1.ranks/rank1.db", "-o",
               work + "/mixed.db"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("first-rank0.db is a rank store of run ") &&
               r.err.contains("s1.ranks/rank1.db of run "),
           qPrintable(r.err));
  QVERIFY(!QFile::exists(work + "/mixed.db"));
  r = run_cli({"trace", "merge", work + "/s1.ranks/rank0.db", work + "/s1.ranks/rank1.db", "-o",
               work + "/one.db"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QCOMPARE(status_of(work + "/one.db"), QString("complete"));
  // --merge-only with a plan of fewer ranks than the run left: refused (it
  // merged rank 0 alone over the 2-rank store), the run's plan file kept.
  QFile plan(work + "/s1.plan.json");
  QVERIFY(plan.open(QIODevice::ReadOnly));
  const QByteArray plan_before = plan.readAll();
  plan.close();
  r = run_cli(QStringList{"run", "--merge-only", "--out", work + "/s1.db"} + tiny());
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("s1.ranks holds rank1.db, but the plan given has 1 rank"),
           qPrintable(r.err));
  QVERIFY(plan.open(QIODevice::ReadOnly));
  QCOMPARE(plan.readAll(), plan_before);
  plan.close();
  // ... and of more: refused too, before anything is written (it replaced
  // the good store with a "crashed" one of 4 ranks, 2 of them missing).
  const QByteArray store_before = [&] {
    QFile f(work + "/s1.db");
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }();
  QVERIFY(!store_before.isEmpty());
  r = run_cli(QStringList{"run", "--merge-only", "--dp", "4", "--out", work + "/s1.db"} + tiny());
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("rank0.db is a rank store of a run of 2 ranks (dp 2 x tp 1 x pp 1), "
                          "but the plan given has 4 ranks") &&
               r.err.contains("nothing was merged"),
           qPrintable(r.err));
  {
    QFile f(work + "/s1.db");
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll() == store_before);
  }
  QCOMPARE(status_of(work + "/s1.db"), QString("complete"));
  // The ranks of a run that failed.
  r = run_cli(QStringList{"run", "--dp", "2", "--steps", "20", "--lr", "1e12", "--out",
                          work + "/failed.db"} +
              tiny());
  QCOMPARE(r.exit_code, 1);
  r = run_cli({"trace", "merge", work + "/failed.ranks/rank0.db", work + "/failed.ranks/rank1.db",
               "-o", work + "/failed-again.db"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("the merged run is marked failed"), qPrintable(r.err));
  QCOMPARE(status_of(work + "/failed-again.db"), QString("failed"));
  // Merged as a Slurm job's last command merges them: the job fails with its
  // ranks (it exited 0, and so did the job).
  r = run_cli({"run", "--merge-only", "--plan", work + "/failed.plan.json", "--out",
               work + "/failed.db"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("the run ended failed (its rank stores are merged into " + work +
                          "/failed.db)"),
           qPrintable(r.err));
  QCOMPARE(status_of(work + "/failed.db"), QString("failed"));
}

void TestRunCli::mergeTakesTheWorstEnding_data() {
  QTest::addColumn<QStringList>("endings");
  QTest::addColumn<QString>("merged");
  // The launcher's own verdict in the same order (profiler/run_merge.cpp).
  QTest::addRow("cancelled after another crashed")
      << QStringList{"cancelled", "crashed"} << "crashed";
  QTest::addRow("failed over crashed") << QStringList{"crashed", "failed", "cancelled"} << "failed";
  QTest::addRow("cancelled alone") << QStringList{"complete", "cancelled"} << "cancelled";
  QTest::addRow("complete") << QStringList{"complete", "complete"} << "complete";
}

// Rank stores that ended differently: the merged run ends as the worst of
// them (a rank cancelled because another crashed said "cancelled"), and
// what each rank's writer lost is summed and said by `trace info`.
void TestRunCli::mergeTakesTheWorstEnding() {
  QFETCH(QStringList, endings);
  QFETCH(QString, merged);
  using namespace cs::trace;
  QTemporaryDir dir;
  QStringList args = {"trace", "merge"};
  for (int rank = 0; rank < endings.size(); ++rank) {
    const std::string path = dir.filePath(QString("rank%1.db").arg(rank)).toStdString();
    RunInfo run;
    run.source = "test";
    auto created = TraceWriter::create(path, run);
    QVERIFY2(created, created ? "" : created.message().c_str());
    TraceWriter& w = **created;
    w.add_rank({rank, "node", "CPU", 100 + rank, 0, false});
    Event e;
    e.lane = w.add_lane(rank, LaneKind::cpu_thread, "compute", 0);
    e.name = w.intern("gemm");
    e.start_ns = 1000;
    e.end_ns = 2000;
    w.add(e);
    e.lane = LaneId{4'000'000'000u};  // a lane never given: counted, dropped
    w.add(e);
    QVERIFY(w.close(endings[rank].toStdString()));
    args << QString::fromStdString(path);
  }
  const QString out = dir.filePath("run.db");
  const Run r = run_cli(args + QStringList{"-o", out, "--align", "none"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QCOMPARE(status_of(out), merged);
  if (merged != "complete") {
    QVERIFY2(r.err.contains("the merged run is marked " + merged), qPrintable(r.err));
  }
  const QString lost = QString("%1 events dropped for a lane id the writer never gave")
                           .arg(endings.size());
  const Run info = run_cli({"trace", "info", out});
  QVERIFY2(info.out.contains("warning: " + lost), qPrintable(info.out));
  const Run info_json = run_cli({"trace", "info", out, "--json"});
  const QJsonArray losses = QJsonDocument::fromJson(info_json.out.toUtf8())["losses"].toArray();
  QCOMPARE(losses.size(), 1);
  QCOMPARE(losses[0].toString(), lost);
}

void TestRunCli::mergeOnlyRefusesLaunchFlags_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QString>("named");  // the flags the message names
  QTest::addRow("steps") << QStringList{"--steps", "5"} << "--steps applies";
  QTest::addRow("threads and seed")
      << QStringList{"--threads", "2", "--seed", "3"} << "--threads, --seed apply";
  QTest::addRow("learning rate") << QStringList{"--lr", "0.1"} << "--lr applies";
  QTest::addRow("hostfile") << QStringList{"--hostfile", "hosts"} << "--hostfile applies";
  QTest::addRow("hang timeout") << QStringList{"--hang-timeout", "0"} << "--hang-timeout applies";
  QTest::addRow("slurm") << QStringList{"--slurm", "--slurm-partition", "gpu"}
                         << "--slurm, --slurm-partition apply";
}

// --merge-only starts nothing: the flags of a launch are refused (exit 2,
// naming them) instead of ignored, before anything is read or written.
void TestRunCli::mergeOnlyRefusesLaunchFlags() {
  QFETCH(QStringList, args);
  QFETCH(QString, named);
  const QString store = dir_.filePath("merge-flags/run.db");
  const Run r =
      run_cli(QStringList{"run", "--merge-only", "--dp", "2", "--out", store} + tiny() + args);
  QCOMPARE(r.exit_code, 2);
  QVERIFY2(r.err.contains("--merge-only only merges an existing run's rank stores: " + named +
                          " to launching a run"),
           qPrintable(r.err));
  QVERIFY(!QFile::exists(store));
  QVERIFY(!QFile::exists(dir_.filePath("merge-flags/run.plan.json")));
}

QTEST_GUILESS_MAIN(TestRunCli)
#include "tst_run_cli.moc"
