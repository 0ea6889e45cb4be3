// `clusterscope run` as a user runs it: a real training run through mpirun
// into a run store, its summary and JSON report, plain progress lines when
// not on a terminal, the user's errors, Ctrl-C, and the Slurm script run end
// to end (srun played by mpirun).

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

#include "core/trace_reader.h"

namespace {

const QString kCli = CS_BIN_DIR "/clusterscope";

struct Run {
  int exit_code = -1;
  QString out;
  QString err;
};

Run run_cli(const QStringList& args, const QString& dir = {},
            const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessEnvironment(env);
  if (!dir.isEmpty()) p.setWorkingDirectory(dir);
  p.start(kCli, args);
  if (!p.waitForFinished(120000)) qFatal("clusterscope run did not finish");
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// The tiny model of the profiler suites, as model flags of the CLI.
QStringList tiny() {
  return {"--layers", "2",  "--hidden", "32",  "--heads", "4",
          "--seq",    "16", "--ffn",    "128", "--vocab", "256"};
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
  void plainProgressWhenNotATerminal();
  void userErrors_data();
  void userErrors();
  void interruptCancelsCleanly();
  void slurmScriptEndToEnd();

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
  }
  const QJsonArray summary = j["summary"].toObject()["ranks"].toArray();
  QCOMPARE(summary.size(), 2);
  for (const auto& rank : summary) {
    QVERIFY(rank.toObject()["compute_ns"].toDouble() > 0);
    QVERIFY(rank.toObject()["communication_ns"].toDouble() > 0);
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
  QVERIFY2(r.out.contains("Where each rank's time went"), qPrintable(r.out));
  QVERIFY2(r.out.contains("run store: " + store), qPrintable(r.out));
  // A complete run keeps only the merged store.
  QVERIFY(!QDir(dir_.filePath("plain/run.ranks")).exists() ||
          QDir(dir_.filePath("plain/run.ranks")).isEmpty());
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
  QTest::addRow("ZeRO-2") << QStringList{"--dp", "2", "--zero", "2"} << 1
                          << "the engines implement ZeRO stages 0 and 1";
  QTest::addRow("generic model")
      << QStringList{"MODEL_FROM_ARGS", "--model", "resnet50"} << 1
      << "the worker trains GPT-style transformers; \"resnet50\" is a generic model";
  QTest::addRow("missing hostfile") << QStringList{"--hostfile", "/nonexistent/hosts"} << 1
                                    << "/nonexistent/hosts: cannot open hostfile";
  QTest::addRow("hostfile and slurm") << QStringList{"--hostfile", "h", "--slurm"} << 1
                                      << "--hostfile and --slurm exclude each other";
  QTest::addRow("unknown backend") << QStringList{"--backend", "tpu"} << 2 << "--backend";
  QTest::addRow("bad hostfile line") << QStringList{"--hostfile", "BAD_HOSTFILE"} << 1
                                     << "BAD_HOSTFILE:1: \"node;reboot\" is not a host name";
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
  for (QString& a : args)
    a.replace("BAD_HOSTFILE", bad);
  message.replace("BAD_HOSTFILE", bad);
  const bool model_from_args = args.removeAll("MODEL_FROM_ARGS") > 0;
  const Run r =
      run_cli(QStringList{"run", "--steps", "2", "--out", dir_.filePath("errors/run.db")} +
              (model_from_args ? QStringList{} : tiny()) + args);
  QCOMPARE(r.exit_code, code);
  QVERIFY2(r.err.contains(message), qPrintable(r.err));
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
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(p.waitForFinished(60000));
  err += QString::fromUtf8(p.readAllStandardError());
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QCOMPARE(p.exitCode(), 1);
  QVERIFY2(err.contains("stopping the run (every rank closes its store)"), qPrintable(err));
  QVERIFY2(err.contains("clusterscope: error: the run cancelled"), qPrintable(err));
  QVERIFY2(out.contains("the run was cancelled; last steps: rank 0 step"), qPrintable(out));
  QCOMPARE(status_of(store), QString("cancelled"));
  for (int rank = 0; rank < 2; ++rank) {
    QCOMPARE(status_of(dir_.filePath("interrupt/run.ranks/rank%1.db").arg(rank)),
             QString("cancelled"));
  }
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
  const Run r = run_cli(QStringList{"run", "--dp", "2", "--steps", "3", "--out", store, "--slurm",
                                    "--slurm-partition", "cpu"} +
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

QTEST_GUILESS_MAIN(TestRunCli)
#include "tst_run_cli.moc"
