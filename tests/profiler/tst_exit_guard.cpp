// The exit guard of the injection library, in real processes: the trace is
// finished once at exit, on SIGTERM or SIGINT left at their default action
// (and the process still dies of that signal), not at all in a forked child,
// never instead of the program's own handler, and never for longer than its
// timeout.

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

namespace {

struct Ended {
  QProcess::ExitStatus status = QProcess::NormalExit;
  int code = -1;
  qint64 pid = 0;
  QString out;
  QString err;
  QStringList lines;  // what the finish step wrote
};

// Runs the probe; with `signal` != 0 sends it once the probe says it is ready.
Ended run_probe(const QString& mode, int signal_number = 0) {
  QTemporaryDir dir;
  const QString file = dir.filePath("finished.txt");
  QProcess p;
  p.start(CS_BIN_DIR "/cs_exit_guard_probe", {mode, file});
  if (!p.waitForStarted()) qFatal("the probe did not start");
  Ended e;
  e.pid = p.processId();
  QByteArray out;
  if (signal_number) {
    QElapsedTimer waited;
    waited.start();
    while (!out.contains("ready") && p.state() == QProcess::Running && waited.elapsed() < 20000) {
      p.waitForReadyRead(200);
      out += p.readAllStandardOutput();
    }
    ::kill(static_cast<pid_t>(e.pid), signal_number);
  }
  if (!p.waitForFinished(30000)) qFatal("the probe did not finish");
  e.status = p.exitStatus();
  e.code = p.exitCode();
  e.out = QString::fromUtf8(out + p.readAllStandardOutput());
  e.err = QString::fromUtf8(p.readAllStandardError());
  QFile f(file);
  if (f.open(QIODevice::ReadOnly))
    e.lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
  return e;
}

}  // namespace

class TestExitGuard : public QObject {
  Q_OBJECT

 private slots:
  void finishesAtExit();
  void finishesOnADefaultSignal_data();
  void finishesOnADefaultSignal();
  void leavesTheProgramsHandlerAlone();
  void forkedChildDoesNotFinish();
  void givesUpAfterItsTimeout();
  void installsOnce();
};

void TestExitGuard::finishesAtExit() {
  const Ended e = run_probe("exit");
  QCOMPARE(e.status, QProcess::NormalExit);
  QCOMPARE(e.code, 0);
  QCOMPARE(e.lines, QStringList{"complete " + QString::number(e.pid)});
}

void TestExitGuard::finishesOnADefaultSignal_data() {
  QTest::addColumn<int>("signal_number");
  QTest::addRow("SIGTERM") << int(SIGTERM);
  QTest::addRow("SIGINT") << int(SIGINT);
}

void TestExitGuard::finishesOnADefaultSignal() {
  QFETCH(int, signal_number);
  const Ended e = run_probe("signal", signal_number);
  QCOMPARE(e.lines, QStringList{"cancelled " + QString::number(e.pid)});
  // Then the signal ends the process as it would have without the guard.
  QCOMPARE(e.status, QProcess::CrashExit);
}

void TestExitGuard::leavesTheProgramsHandlerAlone() {
  const Ended e = run_probe("handled", SIGTERM);
  QCOMPARE(e.status, QProcess::NormalExit);
  QCOMPARE(e.code, 7);  // the program's handler ran and it exited its way
  QCOMPARE(e.lines, QStringList{"complete " + QString::number(e.pid)});
}

void TestExitGuard::forkedChildDoesNotFinish() {
  const Ended e = run_probe("fork");
  QCOMPARE(e.code, 0);
  QCOMPARE(e.lines, QStringList{"complete " + QString::number(e.pid)});
}

void TestExitGuard::givesUpAfterItsTimeout() {
  const Ended e = run_probe("hang");
  QCOMPARE(e.status, QProcess::NormalExit);
  QCOMPARE(e.code, 0);
  QCOMPARE(e.lines, QStringList{"started " + QString::number(e.pid)});
  QVERIFY2(e.err.contains(
               "clusterscope-inject: gave up waiting for the trace to be written after 300 ms"),
           qPrintable(e.err));
}

void TestExitGuard::installsOnce() {
  const Ended e = run_probe("twice");
  QVERIFY2(e.out.contains("the exit guard is already installed in this process"),
           qPrintable(e.out));
}

QTEST_GUILESS_MAIN(TestExitGuard)
#include "tst_exit_guard.moc"
