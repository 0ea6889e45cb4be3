// `clusterscope run` where things go wrong, end to end: more ranks than this
// machine runs. Real processes and real SQLite files.

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <unistd.h>

#include "../process_run.h"

namespace {

const QString kCli = CS_BIN_DIR "/clusterscope";

using Run = cs::test::ProcessRun;

Run run_cli(const QStringList& args) {
  return cs::test::run_process(kCli, args);
}

// The tiny model of the profiler suites, as model flags of the CLI.
QStringList tiny() {
  return {"--layers", "2",  "--hidden", "32",  "--heads", "4",
          "--seq",    "16", "--ffn",    "128", "--vocab", "256"};
}

}  // namespace

class TestRunFailures : public QObject {
  Q_OBJECT

 private slots:
  void moreRanksThanTheMachineRuns();
  void manyRanksAreSummarised();

 private:
  QTemporaryDir dir_;
};

// --dp 100000 on 2 cores was accepted: mpirun spun at full CPU, Ctrl-C took
// 50 s, and the report was 8 MB. Refused now before anything is written,
// as a usage error naming the count, the cores and the override.
void TestRunFailures::moreRanksThanTheMachineRuns() {
  const QString work = dir_.filePath("too-many");
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const Run r = run_cli(
      QStringList{"run", "--dp", "100000", "--steps", "1", "--out", work + "/e.db"} + tiny());
  QCOMPARE(r.exit_code, 2);
  QVERIFY2(r.err.contains(QString("clusterscope: error: 100000 ranks of the CPU engine on this "
                                  "machine's %1 core")
                              .arg(cores)),
           qPrintable(r.err));
  QVERIFY2(r.err.contains(QString("at most %1 run here").arg(cores * 8)), qPrintable(r.err));
  QVERIFY2(r.err.contains("start them anyway with clusterscope run --oversubscribe"),
           qPrintable(r.err));
  QVERIFY(!QFile::exists(work + "/e.plan.json"));
  QVERIFY(!QDir(work + "/e.ranks").exists());
  // --merge-only starts nothing: --oversubscribe is a launch's flag.
  const Run merge = run_cli(
      QStringList{"run", "--merge-only", "--oversubscribe", "--dp", "2", "--out", work + "/e.db"} +
      tiny());
  QCOMPARE(merge.exit_code, 2);
  QVERIFY2(merge.err.contains("--oversubscribe applies to launching a run"), qPrintable(merge.err));
}

// More ranks than the report names one by one: the table shows the first,
// those that did not finish and the slowest, then a count of the others;
// the cancelled run's "steps done" names the first and counts the rest (it
// listed every one of 100,000 ranks).
void TestRunFailures::manyRanksAreSummarised() {
  const QString work = dir_.filePath("many");
  const QStringList many = QStringList{"--dp", "18", "--oversubscribe"} + tiny();
  const Run r = run_cli(QStringList{"run", "--steps", "1", "--out", work + "/run.db"} + many);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QStringList lines = r.out.split('\n');
  const qsizetype header =
      lines.indexOf(QRegularExpression("^rank\\s+host\\s+state\\s+steps done.*"));
  QVERIFY2(header >= 0, qPrintable(r.out));
  int rows = 0;
  for (qsizetype i = header + 2;
       i < lines.size() && QRegularExpression("^\\d+ ").match(lines[i]).hasMatch(); ++i)
    ++rows;
  QCOMPARE(rows, 16);
  QVERIFY2(lines.value(header + 2 + rows)
               .startsWith("... 2 more ranks (2 done); shown: the first, those that did not "
                           "finish and the slowest"),
           qPrintable(r.out));
  // The run store's per-rank summary likewise.
  QVERIFY2(r.out.contains("\n... 2 more ranks; shown: the first and the longest spans"),
           qPrintable(r.out));

  QProcess p;
  p.start(kCli, QStringList{"run", "--steps", "100000", "--out", work + "/cancelled.db"} + many);
  QVERIFY(p.waitForStarted());
  QString err;
  QTRY_VERIFY_WITH_TIMEOUT(
      (err += QString::fromUtf8(p.readAllStandardError()), err.contains("running: ")), 60000);
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(p.waitForFinished(120000));
  const QString out = QString::fromUtf8(p.readAllStandardOutput());
  QCOMPARE(p.exitCode(), 1);
  const QString line = out.split('\n').filter("the run was cancelled; steps done: ").value(0);
  QVERIFY2(line.contains(QRegularExpression(
               "rank 7( not started)?, and 10 more ranks \\((\\d+ not started|\\d+ with)")),
           qPrintable(out));
  QVERIFY2(!line.contains("rank 8"), qPrintable(line));
}

QTEST_GUILESS_MAIN(TestRunFailures)
#include "tst_run_failures.moc"
