// clusterscope-worker as the launcher starts it: the CUDA engine without a GPU
// says so in one sentence, the CPU engine runs a plan scaled to this machine
// and says what it scaled, and its store holds the run.

#include <QDir>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>

#include "../process_run.h"
#include "core/host_probe.h"
#include "core/predicted_step.h"
#include "core/trace_reader.h"

namespace {

struct Run {
  int exit_code = -1;
  QList<QJsonObject> lines;
  QString err;
};

Run run_program(const QString& program, const QStringList& args) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  env.insert("OMPI_MCA_rmaps_base_oversubscribe", "1");
  const cs::test::ProcessRun p = cs::test::run_process(program, args, {{}, env});
  Run r;
  r.exit_code = p.exit_code;
  for (const QString& line : p.out.split('\n')) {
    if (line.startsWith('{')) r.lines << QJsonDocument::fromJson(line.toUtf8()).object();
  }
  r.err = p.err;
  return r;
}

Run run_worker(const QStringList& args) {
  return run_program(CS_BIN_DIR "/clusterscope-worker", args);
}

QJsonObject first(const Run& r, const QString& event) {
  for (const QJsonObject& o : r.lines) {
    if (o["event"].toString() == event) return o;
  }
  return {};
}

}  // namespace

class TestWorkerCli : public QObject {
  Q_OBJECT

 private slots:
  void cudaWithoutGpuSaysSo();
  void refusals_data();
  void refusals();
  void cpuRunScalesThePlanAndRecordsIt();
  void sweepsSayWhereTheyRan();
  void stoppedSweepSaysNoMore();
  void fullDiskStopsTheRun_data();
  void fullDiskStopsTheRun();
  void weightsDumpIsNoPartOfTheTrace();
  void tensorParallelBytesAreTheBytesSent_data();
  void tensorParallelBytesAreTheBytesSent();
  void recomputationRunsTheForwardAgain_data();
  void recomputationRunsTheForwardAgain();
  void ranksUnderTheUsersMpirunShareARunId();
  void profiledRanksShareTheProfilesRunId();
};

void TestWorkerCli::cudaWithoutGpuSaysSo() {
  if (!cs::probe_host().gpus.empty()) QSKIP("this machine has a GPU: the CUDA engine would run");
  const Run r = run_worker({"--backend", "cuda", "--steps", "1"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.startsWith("clusterscope-worker: error: no GPU: "), qPrintable(r.err));
  QCOMPARE(r.err.count('\n'), 1);  // one sentence
  QVERIFY(first(r, "error")["message"].toString().startsWith("no GPU: "));
}

void TestWorkerCli::refusals_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QString>("message");
  QTest::addRow("fp8 on the CPU") << QStringList{"--backend", "cpu", "--precision", "fp8"}
                                  << "the CPU engine computes in fp32 or bf16, not fp8";
  QTest::addRow("global batch") << QStringList{"--dp", "1", "--micro-batch", "3", "--global-batch", "8"}
                                << "--global-batch 8 must be a multiple of dp x micro-batch = 3";
  QTest::addRow("generic model") << QStringList{"--model", "resnet50"}
                                 << "is a generic model, which the planner estimates but the engines do not run";
  QTest::addRow("unknown model") << QStringList{"--model", "llama-7b"} << "did you mean \"llama2-7b\"?";
  QTest::addRow("single process on cpu") << QStringList{"--single-process"}
                                         << "--single-process drives GPUs: it needs --backend cuda";
  QTest::addRow("world size") << QStringList{"--dp", "2", "--steps", "1"}
                              << "the plan needs dp x tp x pp = 2 x 1 x 1 = 2 ranks, but 1 were started";
  QTest::addRow("tp 0") << QStringList{"--tp", "0"} << "--tp: must be > 0 (got 0)";
  QTest::addRow("zero 4") << QStringList{"--zero", "4"}
                          << "--zero: must be between 0 and 3 (got 4)";
  QTest::addRow("steps not a number") << QStringList{"--steps", "many"}
                                      << "--steps: is not a number (got \"many\")";
  // Sizes and counts no run has (a GEMM of n -5 ran and reported a negative
  // rate; -5 threads and a seed of -1 were taken).
  QTest::addRow("negative GEMM size") << QStringList{"--sweep", "gemm", "--sizes", "-5"}
                                      << "--sizes: must be between 1 and 17179869184 (got -5)";
  QTest::addRow("buffer of 0 bytes") << QStringList{"--sweep", "bandwidth", "--buffer-sizes", "0"}
                                     << "--buffer-sizes: must be between 1 and 17179869184 (got 0)";
  QTest::addRow("negative threads") << QStringList{"--steps", "1", "--threads", "-5"}
                                    << "--threads: must be between 1 and 4096 (got -5)";
  QTest::addRow("negative seed") << QStringList{"--steps", "1", "--seed", "-1"}
                                 << "--seed: must be >= 0 (got -1)";
  // The shape's own rule, not tensor parallelism's (tp was 1).
  QTest::addRow("hidden not divisible by heads")
      << QStringList{"--steps", "1", "--hidden", "63", "--heads", "4"}
      << "the hidden size 63 must be divisible by the 4 heads";
  // The interleaved schedule's conditions, said before any rank starts.
  QTest::addRow("interleaved without a pipeline")
      << QStringList{"--virtual-stages", "2"}
      << "--virtual-stages: the interleaved schedule needs --pp >= 2";
  QTest::addRow("interleaved, micro-batches not a multiple of pp")
      << QStringList{"--pp", "2", "--virtual-stages", "2", "--global-batch", "3"}
      << "the interleaved schedule needs the micro-batches per step (3) to be a multiple of --pp 2";
  QTest::addRow("interleaved, layers not a multiple of its stages")
      << QStringList{"--pp", "2", "--virtual-stages", "2", "--global-batch", "2", "--layers", "6"}
      << "--virtual-stages: pp x virtual stages = 4 must divide the 6 layers";
  QTest::addRow("interleaved on the CUDA engine")
      << QStringList{"--backend",        "cuda", "--pp",           "2",
                     "--virtual-stages", "2",    "--global-batch", "2"}
      << "--virtual-stages: the CUDA engine runs the 1F1B schedule only";
  // Memory no host has: said in words, not "std::bad_alloc".
  QTest::addRow("sequence past memory")
      << QStringList{"--steps", "1", "--seq", "1000000"}
      << "out of memory: this rank's weights, activations or buffers need more memory";
}

void TestWorkerCli::refusals() {
  QFETCH(QStringList, args);
  QFETCH(QString, message);
  const Run r = run_worker(args);
  QVERIFY2(r.exit_code != 0, qPrintable(r.err));
  QVERIFY2(r.err.contains(message), qPrintable(r.err));
}

void TestWorkerCli::cpuRunScalesThePlanAndRecordsIt() {
  QTemporaryDir dir;
  const QString plan = dir.filePath("plan.json");
  QFile f(plan);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"cluster": "laptop-cpu", "workload": "gpt2-small",
              "parallel": {"micro_batch": 2, "global_batch": 2}, "precision": "bf16"})");
  f.close();
  const Run r = run_worker({"--plan", plan, "--precision", "bf16", "--layers", "2", "--steps", "3",
                            "--micro-batch", "2", "--out", dir.filePath("run-{rank}.db")});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QJsonObject start = first(r, "start");
  QCOMPARE(start["backend"].toString(), QString("cpu"));
  QCOMPARE(start["model"].toObject()["layers"].toInt(), 2);
  QCOMPARE(start["model"].toObject()["hidden"].toInt(), 256);  // 768 scaled to this machine
  QVERIFY2(start["scaled"].toString().contains("hidden 768 -> 256"), qPrintable(start["scaled"].toString()));
  int steps = 0;
  for (const QJsonObject& o : r.lines) steps += o["event"].toString() == "step";
  QCOMPARE(steps, 3);

  auto reader = cs::trace::TraceReader::open(dir.filePath("run-0.db").toStdString());
  QVERIFY2(reader.ok(), reader.ok() ? "" : reader.message().c_str());
  QCOMPARE(QString::fromStdString((*reader)->run().source), QString("cpu-engine"));
  QVERIFY((*reader)->run().plan_json.find("gpt2-small") != std::string::npos);
  QCOMPARE(static_cast<int>((*reader)->steps()->size()), 3);
  QVERIFY((*reader)->event_count() > 50);
}

// A sweep's lines start with where it ran: clusterscope calibrate
// --from-sweeps names the presets for that host and device.
void TestWorkerCli::sweepsSayWhereTheyRan() {
  const Run r = run_worker({"--backend", "cpu", "--sweep", "bandwidth", "--buffer-sizes", "65536",
                            "--sweep-seconds", "0.01", "--no-trace"});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY(!r.lines.isEmpty());
  const QJsonObject start = r.lines.first();
  QCOMPARE(start["event"].toString(), QString("sweep_start"));
  QCOMPARE(start["host"].toString(), QString::fromStdString(cs::probe_host().hostname));
  QCOMPARE(start["backend"].toString(), QString("cpu"));
  QVERIFY(start["device"].toString().startsWith("CPU ("));
  QCOMPARE(start["sweeps"].toString(), QString("bandwidth"));
  QVERIFY(!first(r, "bandwidth").isEmpty());
}

// A sweep stopped by the launcher's SIGUSR1 closes its store as cancelled,
// says so, and then says nothing more: no further sample and no "done" (the
// launcher read that as a rank that had finished), though the sweep alone
// takes about 2.5 s here. It idles until it is ended.
void TestWorkerCli::stoppedSweepSaysNoMore() {
  QTemporaryDir dir;
  QProcess worker;
  worker.setProcessChannelMode(QProcess::SeparateChannels);
  worker.start(CS_BIN_DIR "/clusterscope-worker",
               {"--backend", "cpu", "--sweep", "layer_gemm", "--gemm-sizes", "64,128",
                "--sweep-seconds", "3", "--out", dir.filePath("sweep.db")});
  QVERIFY2(worker.waitForStarted(), qPrintable(worker.errorString()));
  QByteArray out;
  QDeadlineTimer started(30000);
  while (!out.contains("\"sweep_start\"") && !started.hasExpired() &&
         worker.state() == QProcess::Running) {
    worker.waitForReadyRead(100);
    out += worker.readAllStandardOutput();
  }
  QVERIFY2(out.contains("\"sweep_start\""), out.constData());
  QCOMPARE(::kill(static_cast<pid_t>(worker.processId()), SIGUSR1), 0);
  // Past the end the sweep would have reached without the stop.
  QDeadlineTimer past(6000);
  while (!past.hasExpired() && worker.state() == QProcess::Running) {
    worker.waitForReadyRead(100);
    out += worker.readAllStandardOutput();
  }
  const bool idled = worker.state() == QProcess::Running;
  if (idled) {
    worker.terminate();
    QVERIFY(worker.waitForFinished(10000));
  }
  out += worker.readAllStandardOutput();
  QVERIFY2(idled, out.constData());

  QStringList after;  // the events from the "cancelled" line on
  for (const QByteArray& line : out.split('\n')) {
    if (line.isEmpty()) continue;
    const QString event = QJsonDocument::fromJson(line).object()["event"].toString();
    if (event == "cancelled" || !after.isEmpty()) after << event;
  }
  QCOMPARE(after, QStringList{"cancelled"});

  auto reader = cs::trace::TraceReader::open(dir.filePath("sweep.rank0.db").toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  QCOMPARE(QString::fromStdString((*reader)->state().status), QString("cancelled"));
}

void TestWorkerCli::fullDiskStopsTheRun_data() {
  QTest::addColumn<QString>("size");
  // Room for a full commit of 65536 rows, and more.
  QTest::newRow("12 MiB") << "12m";
  // Room for the new store, then (as a rule) not for its first commit.
  QTest::newRow("1 MiB") << "1m";
}

// A disk that fills during the run: a real one, a small tmpfs in a mount
// namespace of its own. The rank stops at the next step with the reason (it
// trained on untraced, reporting steps its store did not hold), and what was
// committed before stays readable, with the loss counted. The message says
// how many steps the store kept: it said "what was written before stays"
// when nothing had been committed. The worker ignores SIGXFSZ, so a
// file-size limit fails the same way (not tested: the limit also stops MPI's
// own start-up files).
void TestWorkerCli::fullDiskStopsTheRun() {
  QFETCH(QString, size);
  QTemporaryDir dir;
  const QString small = dir.filePath("small");
  const QString kept = dir.filePath("kept");
  QVERIFY(QDir().mkpath(small) && QDir().mkpath(kept));
  // The store lives only in the namespace: copied out before it ends.
  const QString script =
      QStringLiteral(
          "mount -t tmpfs -o size=%4 tmpfs '%1' || exit 99\n"
          "'%2' --backend cpu --steps 100000 --layers 2 --hidden 64 --heads 4 --seq 16 "
          "--out '%1/run.db'\n"
          "rc=$?\n"
          "cp '%1'/run.rank0.db* '%3'/\n"
          "exit $rc\n")
          .arg(small, CS_BIN_DIR "/clusterscope-worker", kept, size);
  const Run r = run_program("unshare", {"--mount", "sh", "-c", script});
  if (r.exit_code == 99 || r.exit_code == -1 || r.err.contains("unshare: "))
    QSKIP(qPrintable("a small tmpfs cannot be mounted here (needs root): " + r.err.trimmed()));
  QVERIFY2(r.exit_code != 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("its trace store could not be written"), qPrintable(r.err));
  QVERIFY2(r.err.contains("database or disk is full"), qPrintable(r.err));
  int step_lines = 0;
  for (const QJsonObject& o : r.lines) step_lines += o["event"].toString() == "step";
  QVERIFY2(step_lines > 0 && step_lines < 100000, qPrintable(QString::number(step_lines)));

  auto reader = cs::trace::TraceReader::open(QDir(kept).filePath("run.rank0.db").toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  // "failed" where the full disk still took the status row; else its writer
  // left it unclosed and it reads as "interrupted". Never "complete".
  const QString status = QString::fromStdString((*reader)->state().status);
  QVERIFY2(status == "failed" || status == "interrupted", qPrintable(status));
  auto rows = (*reader)->steps(0);
  QVERIFY2(rows, rows ? "" : rows.message().c_str());
  const std::size_t steps = rows->size();
  QVERIFY2(steps <= static_cast<std::size_t>(step_lines),
           qPrintable(QString("%1 steps kept, %2 reported").arg(steps).arg(step_lines)));
  if (size == "12m") QVERIFY2(steps > 0, "a 12 MiB disk kept no step");
  QVERIFY2(
      r.err.contains(steps == 0 ? QString("before the failure: it holds no step")
                                : QString("the %1 step%2 committed before the failure stay in ")
                                      .arg(steps)
                                      .arg(steps == 1 ? "" : "s")),
      qPrintable(QString("%1 steps kept; %2").arg(steps).arg(r.err)));
  // The count goes with the status row, in the same transaction.
  if (status == "failed") {
    const std::vector<std::string> losses = (*reader)->losses();
    QCOMPARE(losses.size(), std::size_t{1});
    QVERIFY2(QString::fromStdString(losses[0]).contains("events lost after a write failed"),
             losses[0].c_str());
  }
}

// --dump-weights gathers the ZeRO shards and sends every stage's weights to
// rank 0 after training: those transfers were recorded as the last step's
// (a dp all-gather and world sends after the step had ended).
void TestWorkerCli::weightsDumpIsNoPartOfTheTrace() {
  QTemporaryDir dir;
  const Run r = run_program("mpirun", {"-n",
                                       "2",
                                       CS_BIN_DIR "/clusterscope-worker",
                                       "--layers",
                                       "2",
                                       "--hidden",
                                       "32",
                                       "--heads",
                                       "4",
                                       "--seq",
                                       "16",
                                       "--ffn",
                                       "128",
                                       "--dp",
                                       "2",
                                       "--zero",
                                       "1",
                                       "--steps",
                                       "2",
                                       "--out",
                                       dir.filePath("run-{rank}.db"),
                                       "--dump-weights",
                                       dir.filePath("weights.bin")});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY(QFile::exists(dir.filePath("weights.bin")));
  for (int rank = 0; rank < 2; ++rank) {
    auto reader =
        cs::trace::TraceReader::open(dir.filePath(QString("run-%1.db").arg(rank)).toStdString());
    QVERIFY2(reader, reader ? "" : reader.message().c_str());
    auto steps = (*reader)->steps(rank);
    QVERIFY(steps && steps->size() == 2);
    const std::int64_t end = steps->back().end_ns;
    QStringList after;
    cs::Status scanned = (*reader)->for_each_event(
        {}, end, (*reader)->time_range().end_ns + 1, [&](const cs::trace::StoredEvent& e) {
          if (e.event.start_ns >= end)
            after << QString::fromStdString((*reader)->string(e.event.name));
          return true;
        });
    QVERIFY(scanned.ok());
    QVERIFY2(after.isEmpty(), qPrintable(QString("rank %1: %2").arg(rank).arg(after.join(", "))));
  }
}

void TestWorkerCli::tensorParallelBytesAreTheBytesSent_data() {
  QTest::addColumn<QString>("precision");
  QTest::newRow("fp32") << "fp32";
  QTest::newRow("bf16") << "bf16";
}

// The bytes a rank's store records for its tensor-parallel all-reduces are
// the bytes MPI sent on that communicator, as Open MPI's monitoring counts
// them (over 2 ranks, each sends its whole buffer once). bf16 was widened to
// fp32 for MPI: twice the bytes recorded went.
void TestWorkerCli::tensorParallelBytesAreTheBytesSent() {
  QFETCH(QString, precision);
  QTemporaryDir dir;
  const QString profile = dir.filePath("monitoring");
  const Run r = run_program("mpirun", {"-n",
                                       "2",
                                       "--mca",
                                       "pml_monitoring_enable",
                                       "2",
                                       "--mca",
                                       "pml_monitoring_enable_output",
                                       "3",
                                       "--mca",
                                       "pml_monitoring_filename",
                                       profile,
                                       CS_BIN_DIR "/clusterscope-worker",
                                       "--layers",
                                       "2",
                                       "--hidden",
                                       "32",
                                       "--heads",
                                       "4",
                                       "--seq",
                                       "16",
                                       "--ffn",
                                       "128",
                                       "--tp",
                                       "2",
                                       "--micro-batch",
                                       "2",
                                       "--steps",
                                       "2",
                                       "--precision",
                                       precision,
                                       "--out",
                                       dir.filePath("run-{rank}.db")});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QFile counts(profile + ".0.prof");
  if (!counts.open(QIODevice::ReadOnly))
    QSKIP("this MPI has no monitoring component (pml_monitoring) to count the bytes sent");
  // The tensor-parallel group is the world's only split of two ranks:
  // "D\tMPI COMMUNICATOR 4 SPLIT FROM 0\tprocs: 0,1", then its totals.
  qint64 sent = -1;
  bool in_group = false;
  for (const QByteArray& line : counts.readAll().split('\n')) {
    if (line.startsWith("D\t")) in_group = line.contains("SPLIT") && line.endsWith("procs: 0,1");
    if (in_group && line.startsWith("A2A\t"))
      sent = line.split('\t').value(2).split(' ')[0].toLongLong();
  }
  QVERIFY2(sent > 0, "no tensor-parallel group in Open MPI's monitoring output");

  auto reader = cs::trace::TraceReader::open(dir.filePath("run-0.db").toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  auto events = (*reader)->find_events("tp all-reduce", cs::trace::NameMatch::exact, 100000, 0);
  QVERIFY2(events, events ? "" : events.message().c_str());
  qint64 recorded = 0;
  for (const cs::trace::StoredEvent& e : *events)
    recorded += e.event.bytes;
  QVERIFY(!events->empty());
  QCOMPARE(recorded, sent);
}

void TestWorkerCli::recomputationRunsTheForwardAgain_data() {
  QTest::addColumn<QString>("recompute");
  QTest::addColumn<int>("attentionForwards");  // per layer and micro-batch
  QTest::addColumn<int>("qkvForwards");
  QTest::newRow("none") << "none" << 1 << 1;
  QTest::newRow("selective: the attention core again") << "selective" << 2 << 1;
  QTest::newRow("full: the whole layer again") << "full" << 2 << 2;
}

// What a plan's recomputation asks is what the run does: the forward it
// repeats is in the trace, inside "recompute" ranges, and the activations
// kept for backward shrink (selective: no scores; full: layer inputs only).
// Before, the engines ran every plan without recomputation.
void TestWorkerCli::recomputationRunsTheForwardAgain() {
  QFETCH(QString, recompute);
  QFETCH(int, attentionForwards);
  QFETCH(int, qkvForwards);
  QTemporaryDir dir;
  constexpr int kLayers = 2, kMicroBatches = 2, kSteps = 2;
  const Run r = run_worker({"--layers",       QString::number(kLayers),
                            "--hidden",       "32",
                            "--heads",        "4",
                            "--seq",          "32",
                            "--ffn",          "128",
                            "--micro-batch",  "1",
                            "--global-batch", QString::number(kMicroBatches),
                            "--steps",        QString::number(kSteps),
                            "--recompute",    recompute,
                            "--out",          dir.filePath("run-{rank}.db")});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  auto reader = cs::trace::TraceReader::open(dir.filePath("run-0.db").toStdString());
  QVERIFY2(reader.ok(), reader.ok() ? "" : reader.message().c_str());
  const auto count = [&](const char* name) {
    auto events = (*reader)->find_events(name, cs::trace::NameMatch::exact, 100000);
    return events ? static_cast<int>(events->size()) : -1;
  };
  const int per_pass = kLayers * kMicroBatches * kSteps;
  QCOMPARE(count("attention"), attentionForwards * per_pass);
  QCOMPARE(count("attention backward"), per_pass);
  QCOMPARE(count("attn.qkv"), qkvForwards * per_pass);
  QCOMPARE(count("recompute"), recompute == "none" ? 0 : per_pass);
  QVERIFY((*reader)
              ->meta("parallel")
              .value_or("")
              .find("\"recompute\":\"" + recompute.toStdString() + "\"") != std::string::npos);

  // The activations kept, as the step's memory counter has them.
  auto series = (*reader)->counter_series();
  QVERIFY(series.ok());
  double activations = -1;
  for (const cs::trace::CounterSeries& c : *series) {
    if ((*reader)->string(c.name) != cs::trace::memory_part_counter("activations")) continue;
    auto samples = (*reader)->counters(c.rank, c.name);
    QVERIFY(samples.ok() && !samples->empty());
    activations = samples->back().value;
  }
  // Per layer and micro-batch in flight (one here), in fp32: the input
  // (N x C) always; selective adds all but the scores (B x NH x T x T), full
  // keeps nothing else.
  constexpr double N = 32, C = 32, F = 128, NH = 4, T = 32, V = 256;
  const double input = 4 * N * C;
  // ln1, qkv (3), the attention's output, residual2 and ln2; the norms'
  // means and reciprocal deviations; the MLP's two.
  const double rest = 4 * (N * C * (1 + 3 + 1 + 1 + 1) + 4 * N + 2 * N * F);
  const double scores = 4 * NH * T * T;
  const double layers = recompute == "full"        ? kLayers * input
                        : recompute == "selective" ? kLayers * (input + rest)
                                                   : kLayers * (input + rest + scores);
  // The same in all three: the stage output, the projections' scratch, the
  // final norm and its statistics, the logits, the losses, the tokens and targets.
  const double others = 4 * (3 * N * C + N * V + 5 * N);
  QCOMPARE(activations, layers + others);
}

namespace {

// mpirun's arguments for one step of two data-parallel ranks of a tiny
// model, writing their stores to `out` ("{rank}" in it).
QStringList tinyTwoRankRun(const QString& out) {
  return {"-n",       "2",       CS_BIN_DIR "/clusterscope-worker",
          "--layers", "2",       "--hidden",
          "32",       "--heads", "4",
          "--seq",    "16",      "--ffn",
          "128",      "--dp",    "2",
          "--steps",  "1",       "--out",
          out};
}

}  // namespace

// Ranks started by hand under the user's own mpirun recorded no run id, so
// `trace merge` compared their command lines, which two runs of one command
// share: rank 0 of one run and rank 1 of the next merged into one complete
// run. Each run's ranks now record the id of their mpirun's job.
void TestWorkerCli::ranksUnderTheUsersMpirunShareARunId() {
  QTemporaryDir dir;
  const QStringList run = tinyTwoRankRun(dir.filePath("rank{rank}.db"));
  auto id_of = [&](const QString& store) {
    auto reader = cs::trace::TraceReader::open(store.toStdString());
    return reader ? QString::fromStdString((*reader)->meta("run_id").value_or("")) : QString();
  };
  Run r = run_program("mpirun", run);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QString first = id_of(dir.filePath("rank0.db"));
  QVERIFY2(first.startsWith("openmpi-"), qPrintable(first));
  QCOMPARE(id_of(dir.filePath("rank1.db")), first);
  QVERIFY(QFile::copy(dir.filePath("rank0.db"), dir.filePath("first-rank0.db")));
  r = run_program("mpirun", run);  // the same command again
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QString second = id_of(dir.filePath("rank0.db"));
  QCOMPARE(id_of(dir.filePath("rank1.db")), second);
  QVERIFY2(second.startsWith("openmpi-") && second != first, qPrintable(second));

  const cs::test::ProcessRun mixed =
      cs::test::run_cli({"trace", "merge", dir.filePath("first-rank0.db"), dir.filePath("rank1.db"),
                         "-o", dir.filePath("mixed.db")});
  QCOMPARE(mixed.exit_code, 1);
  QVERIFY2(mixed.err.contains("first-rank0.db is a rank store of run " + first + ", " +
                              dir.filePath("rank1.db") + " of run " + second),
           qPrintable(mixed.err));
  QVERIFY(!QFile::exists(dir.filePath("mixed.db")));
  const cs::test::ProcessRun one =
      cs::test::run_cli({"trace", "merge", dir.filePath("rank0.db"), dir.filePath("rank1.db"), "-o",
                         dir.filePath("one.db")});
  QVERIFY2(one.exit_code == 0, qPrintable(one.err));
  QCOMPARE(id_of(dir.filePath("one.db")), second);
}

// Processes profiled with `clusterscope profile` (here ranks of the CPU
// engine under mpirun, which write stores of their own) record the id that
// clusterscope profile gave the run, one for each profiled run.
void TestWorkerCli::profiledRanksShareTheProfilesRunId() {
  QTemporaryDir dir;
  QStringList ids;
  for (const char* name : {"a", "b"}) {
    const QString out = dir.filePath(QString(name) + "-rank{rank}.db");
    const Run r = run_program(
        CS_BIN_DIR "/clusterscope",
        QStringList{"profile", "--out", dir.filePath(QString(name) + ".db"), "--", "mpirun"} +
            tinyTwoRankRun(out));
    QVERIFY2(r.err.contains("no CUDA process was traced"), qPrintable(r.err));
    QString id;
    for (int rank = 0; rank < 2; ++rank) {
      auto reader = cs::trace::TraceReader::open(
          QString(out).replace("{rank}", QString::number(rank)).toStdString());
      QVERIFY2(reader, reader ? "" : reader.message().c_str());
      const QString recorded = QString::fromStdString((*reader)->meta("run_id").value_or(""));
      if (rank == 0) id = recorded;
      QCOMPARE(recorded, id);
    }
    // A run's start in UTC and 32 random bits, not the mpirun's job.
    QVERIFY2(QRegularExpression("^\\d{8}T\\d{6}Z-[0-9a-f]{8}$").match(id).hasMatch(),
             qPrintable(id));
    ids << id;
  }
  QVERIFY(ids[0] != ids[1]);
}

QTEST_GUILESS_MAIN(TestWorkerCli)
#include "tst_worker_cli.moc"
