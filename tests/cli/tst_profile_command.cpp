// `clusterscope profile` as a user runs it, on a machine without a GPU: it
// runs the command with the injection library in its environment, passes on
// its exit status and signals, says plainly that nothing was traced, and
// gathers the per-process stores the command's processes leave (here written
// by the command itself, since no CUDA process can run on this machine).

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <cerrno>

#include <signal.h>

#include "../process_run.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"

namespace {

const QString kLibrary = CS_BINARY_DIR "/lib/libclusterscope-inject.so";

using Run = cs::test::ProcessRun;

Run profile(const QStringList& args,
            const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  return cs::test::run_cli(QStringList{"profile"} + args, {{}, env, 60000});
}

// Waits until the profiled command runs (it prints "ready"), so that a
// signal finds it.
bool command_is_ready(QProcess& p) {
  QByteArray seen;
  QElapsedTimer waited;
  waited.start();
  while (!seen.contains("ready") && p.state() == QProcess::Running && waited.elapsed() < 20000) {
    p.waitForReadyRead(200);
    seen += p.readAllStandardOutput();
  }
  if (!seen.contains("ready")) qWarning("the command never said ready: %s", seen.constData());
  return seen.contains("ready");
}

// Waits until clusterscope has said `text` on stderr (after an interrupt:
// it was handled, so that the next one is a signal of its own, not merged
// with it); what it said is added to `err`.
bool says(QProcess& p, QByteArray& err, const QByteArray& text) {
  p.setReadChannel(QProcess::StandardError);
  QElapsedTimer waited;
  waited.start();
  while (!err.contains(text) && p.state() == QProcess::Running && waited.elapsed() < 20000) {
    p.waitForReadyRead(200);
    err += p.readAllStandardError();
  }
  err += p.readAllStandardError();
  p.setReadChannel(QProcess::StandardOutput);
  if (!err.contains(text))
    qWarning("clusterscope never said \"%s\": %s", text.constData(), err.constData());
  return err.contains(text);
}

// The pid a command wrote into `file`, 0 when none.
pid_t pid_in(const QString& file) {
  QFile f(file);
  return f.open(QIODevice::ReadOnly) ? pid_t(f.readAll().trimmed().toLongLong()) : 0;
}

bool process_exists(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH);
}

// Two stores of one rank each, made-rank0.db and made-rank1.db in `dir`,
// one kernel in each, as two profiled processes leave them.
bool make_rank_stores(const QTemporaryDir& dir) {
  for (int rank = 0; rank < 2; ++rank) {
    cs::trace::RunInfo info{"rank", "cupti", 0, "CLOCK_REALTIME"};
    auto writer = cs::trace::TraceWriter::create(
        dir.filePath(QString("made-rank%1.db").arg(rank)).toStdString(), info);
    if (!writer.ok()) return false;
    (*writer)->add_rank({rank, "host", "GPU " + std::to_string(rank), 100 + rank, 0});
    const cs::trace::LaneId lane =
        (*writer)->add_lane(rank, cs::trace::LaneKind::gpu_stream, "stream 7");
    cs::trace::Event e;
    e.lane = lane;
    e.start_ns = 1000 + rank;
    e.end_ns = 2000;
    e.name = (*writer)->intern("kernel");
    (*writer)->add(e);
    if (!(*writer)->close().ok()) return false;
  }
  return true;
}

// An environment whose temporary directory is `tmp`, to see what is left there.
QProcessEnvironment with_tmp(const QTemporaryDir& tmp) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("TMPDIR", tmp.path());
  env.remove("CLUSTERSCOPE_INJECT");
  return env;
}

// clusterscope profile [options] running `script` under sh, one of whose
// processes leaves the process group (setsid), writes its pid to
// $TMPDIR/pid and says ready. That process is killed when the test ends,
// whatever happened.
class ProfiledScript {
 public:
  ProfiledScript(const QTemporaryDir& tmp, const QString& out, const QString& script,
                 const QStringList& options = {})
      : pid_file_(tmp.filePath("pid")) {
    process.setProcessEnvironment(with_tmp(tmp));
    process.start(CS_BIN_DIR "/clusterscope", QStringList{"profile", "--out", out} + options +
                                                  QStringList{"--", "sh", "-c", script});
  }
  ~ProfiledScript() {
    if (process_exists(pid_in(pid_file_))) ::kill(pid_in(pid_file_), SIGKILL);
  }
  // Whether the command runs and said ready; `away` is then the pid written.
  bool ready() {
    if (!process.waitForStarted() || !command_is_ready(process)) return false;
    away = pid_in(pid_file_);
    return process_exists(away);
  }

  QProcess process;
  pid_t away = 0;

 private:
  QString pid_file_;
};

QStringList entries(const QString& dir) {
  return QDir(dir).entryList(QDir::NoDotAndDotDot | QDir::AllEntries, QDir::Name);
}

bool have_tracer() {
  return QFile::exists(kLibrary);
}

}  // namespace

class TestProfileCommand : public QObject {
  Q_OBJECT

 private slots:
  void init();
  void nothingTracedIsSaidPlainly();
  void keepPartsMadeForNothingIsRemoved_data();
  void keepPartsMadeForNothingIsRemoved();
  void exitStatusPassesThrough_data();
  void exitStatusPassesThrough();
  void commandRunsWithTheInjection_data();
  void commandRunsWithTheInjection();
  void unknownCaptureRangeIsRefused();
  void signalsReachTheCommand();
  void aSecondInterruptEndsTheCommand();
  void interruptsReachTheCommandWithoutProc();
  void processesThatLeftTheGroupAreEnded_data();
  void processesThatLeftTheGroupAreEnded();
  void aProcessThatIgnoresTheStopIsKilled();
  void aHangUpIsPassedOnAndWhatWasRecordedGathered();
  void processesLeftRunningAreWaitedFor();
  void waitPrimaryLeavesProcessesRunning_data();
  void waitPrimaryLeavesProcessesRunning();
  void aBadWaitIsRefused();
  void gathersTheStoreOfOneProcess();
  void severalStoresAreMerged();
  void thePlansPredictionGoesIntoTheStore();
  void aPlanOnStandardInputIsNamedSo();
  void theStepsMarkedAreSaid();
  void unreadableStoresAreKept();
  void refusesAPartsDirectoryInUse();
  void missingInjectionLibrary();
  void outIsCheckedBeforeTheCommandRuns();
};

void TestProfileCommand::init() {
  if (!have_tracer() && QString(QTest::currentTestFunction()) != "nothingTracedIsSaidPlainly") {
    QSKIP("this build has no CUDA tracer (no CUDA toolkit)");
  }
}

void TestProfileCommand::nothingTracedIsSaidPlainly() {
  QTemporaryDir tmp;
  const QString out = tmp.filePath("run.db");
  const Run r = profile({"--out", out, "--", "/bin/true"}, with_tmp(tmp));
  QVERIFY2(r.exit_code == 1, qPrintable(QString::number(r.exit_code) + r.err));
  QVERIFY2(r.out.isEmpty(), qPrintable(r.out));
  if (!have_tracer()) {
    QVERIFY2(r.err.contains("built without the CUDA toolkit"), qPrintable(r.err));
    return;
  }
  // One sentence, with the reason; without a GPU, said before the command
  // runs too (a long job ran to its end before it heard so).
  const QStringList lines = r.err.split('\n', Qt::SkipEmptyParts);
  QVERIFY2(lines.size() == 1 ||
               (lines.size() == 2 && lines[0].startsWith("clusterscope: note: no GPU here (") &&
                lines[0].endsWith("): the command runs, but no CUDA process "
                                  "can be traced")),
           qPrintable(r.err));
  QVERIFY2(lines.back().startsWith("clusterscope: error: no CUDA process was traced, so " + out +
                                   " was not written ("),
           qPrintable(r.err));
  QVERIFY(!QFile::exists(out));
  QCOMPARE(entries(tmp.path()), QStringList());  // the temporary parts directory is gone
}

// --keep-parts names a folder, made if missing: where nothing was traced
// (no CUDA process, a command that could not start) the folders it made are
// removed again, not left behind empty; one that was there stays.
void TestProfileCommand::keepPartsMadeForNothingIsRemoved_data() {
  QTest::addColumn<QStringList>("command");
  QTest::addRow("no CUDA process") << QStringList{"/bin/true"};
  QTest::addRow("a command not found") << QStringList{"/nonexistent/program"};
}

void TestProfileCommand::keepPartsMadeForNothingIsRemoved() {
  QFETCH(QStringList, command);
  if (!have_tracer()) QSKIP("built without the CUDA toolkit: profile starts nothing");
  QTemporaryDir tmp;
  const QString out = tmp.filePath("run.db");
  Run r = profile(QStringList{"--out", out, "--keep-parts", tmp.filePath("made/parts/")} +
                      QStringList{"--"} + command,
                  with_tmp(tmp));
  QVERIFY2(r.exit_code != 0, qPrintable(r.err));
  QCOMPARE(entries(tmp.path()), QStringList());
  // A folder that was there is the user's: left, empty or not.
  QVERIFY(QDir().mkpath(tmp.filePath("mine")));
  r = profile(
      QStringList{"--out", out, "--keep-parts", tmp.filePath("mine")} + QStringList{"--"} + command,
      with_tmp(tmp));
  QVERIFY2(r.exit_code != 0, qPrintable(r.err));
  QCOMPARE(entries(tmp.path()), QStringList{"mine"});
}

void TestProfileCommand::exitStatusPassesThrough_data() {
  QTest::addColumn<QStringList>("command");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("said");
  QTest::addRow("exit status") << QStringList{"sh", "-c", "exit 3"} << 3
                               << "clusterscope: sh exited with status 3";
  QTest::addRow("killed") << QStringList{"sh", "-c", "kill -TERM $$"} << 143
                          << "clusterscope: sh was killed by SIGTERM";
  QTest::addRow("not a program")
      << QStringList{"/nonexistent/trainer"} << 1
      << "clusterscope: error: cannot run /nonexistent/trainer: No such file or directory";
  QTest::addRow("found in PATH") << QStringList{"true"} << 1 << "no CUDA process was traced";
  // The CLI ignores SIGPIPE for itself; the command gets the usual one (a
  // shell cannot undo a signal ignored when it started).
  QTest::addRow("SIGPIPE as usual") << QStringList{"sh", "-c", "kill -PIPE $$"} << 141
                                    << "clusterscope: sh was killed by SIGPIPE";
}

void TestProfileCommand::exitStatusPassesThrough() {
  QFETCH(QStringList, command);
  QFETCH(int, code);
  QFETCH(QString, said);
  QTemporaryDir tmp;
  const Run r =
      profile(QStringList{"--out", tmp.filePath("run.db"), "--"} + command, with_tmp(tmp));
  QVERIFY2(r.exit_code == code, qPrintable(QString::number(r.exit_code) + "\n" + r.err));
  QVERIFY2(r.err.contains(said), qPrintable(r.err));
  QCOMPARE(entries(tmp.path()), QStringList());
}

void TestProfileCommand::commandRunsWithTheInjection_data() {
  QTest::addColumn<bool>("nvtx");
  QTest::addColumn<QString>("capture_range");  // "": not given
  QTest::addRow("with NVTX") << true << "";
  QTest::addRow("--no-nvtx") << false << "";
  QTest::addRow("--capture-range cudaProfilerApi") << true << "cudaProfilerApi";
  QTest::addRow("--capture-range none") << true << "none";
}

void TestProfileCommand::commandRunsWithTheInjection() {
  QFETCH(bool, nvtx);
  QFETCH(QString, capture_range);
  QTemporaryDir tmp;
  QProcessEnvironment env = with_tmp(tmp);
  env.insert("CUDA_INJECTION64_PATH", "/some/other/injection.so");  // replaced, and said so
  // The user's own setting decides nothing: the option does.
  env.insert("CLUSTERSCOPE_CAPTURE_RANGE", "cudaProfilerApi");
  const QString script =
      "printf '%s\\n' \"$CUDA_INJECTION64_PATH\" \"$CLUSTERSCOPE_PROFILE_DIR\" "
      "\"${NVTX_INJECTION64_PATH:-none}\" \"${CLUSTERSCOPE_CAPTURE_RANGE:-none}\" "
      "\"$1\" >&2; test -d \"$CLUSTERSCOPE_PROFILE_DIR\"";
  QStringList args{"--out", tmp.filePath("run.db")};
  if (!nvtx) args << "--no-nvtx";
  if (!capture_range.isEmpty()) args << "--capture-range" << capture_range;
  args << "--"
       << "sh"
       << "-c" << script << "sh"
       << "an argument with spaces";
  const Run r = profile(args, env);
  QCOMPARE(r.exit_code, 1);  // the shell ran fine but traced nothing
  QStringList lines = r.err.split('\n');
  // Without a GPU, a note before the command runs.
  if (!lines.isEmpty() && lines[0].startsWith("clusterscope: note: no GPU here"))
    lines.removeFirst();
  QVERIFY2(lines.size() >= 6, qPrintable(r.err));
  // The command's own lines come first, then what clusterscope says after it.
  QCOMPARE(QFileInfo(lines[0]).canonicalFilePath(), QFileInfo(kLibrary).canonicalFilePath());
  QVERIFY2(lines[1].startsWith(tmp.path() + "/clusterscope-profile-"), qPrintable(lines[1]));
  QCOMPARE(lines[2], nvtx ? lines[0] : QString("none"));
  QCOMPARE(lines[3], capture_range == "cudaProfilerApi" ? capture_range : QString("none"));
  QCOMPARE(lines[4], QString("an argument with spaces"));  // no shell re-splits the arguments
  QVERIFY2(lines[5].contains("CUDA_INJECTION64_PATH=/some/other/injection.so was replaced"),
           qPrintable(r.err));
  // Nothing traced: with a capture range, the error asks whether the
  // program called cudaProfilerStart (on a machine with a GPU; without
  // one, the error gives that reason).
  if (capture_range == "cudaProfilerApi" && !r.err.contains("no GPU here")) {
    QVERIFY2(r.err.contains("did it call them?"), qPrintable(r.err));
  }
}

void TestProfileCommand::unknownCaptureRangeIsRefused() {
  QTemporaryDir tmp;
  const Run r = profile({"--out", tmp.filePath("run.db"), "--capture-range", "nvtx", "--", "true"},
                        with_tmp(tmp));
  QCOMPARE(r.exit_code, 2);
  QVERIFY2(r.err.contains("--capture-range: nvtx not in {none,cudaProfilerApi}"),
           qPrintable(r.err));
  QVERIFY(!QFile::exists(tmp.filePath("run.db")));
}

void TestProfileCommand::signalsReachTheCommand() {
  QTemporaryDir tmp;
  QProcess p;
  p.setProcessEnvironment(with_tmp(tmp));
  p.start(CS_BIN_DIR "/clusterscope", {"profile", "--out", tmp.filePath("run.db"), "--", "sh", "-c",
                                       "echo ready; exec sleep 60"});
  QVERIFY(p.waitForStarted());
  QVERIFY(command_is_ready(p));
  p.terminate();  // SIGTERM to clusterscope alone, as a scheduler sends it
  QVERIFY(p.waitForFinished(30000));
  const QString err = QString::fromUtf8(p.readAllStandardError());
  QCOMPARE(p.exitStatus(), QProcess::NormalExit);
  QVERIFY2(p.exitCode() == 143, qPrintable(QString::number(p.exitCode()) + err));
  QVERIFY2(err.contains("clusterscope: sh was killed by SIGTERM"), qPrintable(err));
}

// A command that ignores the interrupt: a second one ends it (SIGTERM). It
// ran on, whatever was pressed, and said nothing.
void TestProfileCommand::aSecondInterruptEndsTheCommand() {
  QTemporaryDir tmp;
  QProcess p;
  p.setProcessEnvironment(with_tmp(tmp));
  p.start(CS_BIN_DIR "/clusterscope", {"profile", "--out", tmp.filePath("run.db"), "--", "sh", "-c",
                                       "trap '' INT; echo ready; while :; do sleep 1; done"});
  QVERIFY(p.waitForStarted());
  QVERIFY(command_is_ready(p));
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(!p.waitForFinished(1500));  // ignored by the command
  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
  QVERIFY(p.waitForFinished(30000));
  const QString err = QString::fromUtf8(p.readAllStandardError());
  QVERIFY2(err.contains("the command was interrupted; interrupt again to end it (SIGTERM)") &&
               err.contains("ending the command (SIGTERM)") &&
               err.contains("clusterscope: sh was killed by SIGTERM"),
           qPrintable(err));
}

// Where /proc is not mounted no process of the command can be listed: the
// command itself still gets the interrupt (it got none, and the profile
// waited on for ever). /proc is hidden in a mount namespace of the profile's
// own (unshare, as root).
void TestProfileCommand::interruptsReachTheCommandWithoutProc() {
  const QString unshare = QStandardPaths::findExecutable("unshare");
  if (unshare.isEmpty()) QSKIP("no unshare (util-linux) to hide /proc");
  if (QProcess::execute(unshare, {"-m", "sh", "-c", "mount -t tmpfs none /proc"}) != 0)
    QSKIP("cannot hide /proc here (unshare -m needs root)");
  QTemporaryDir tmp;
  const QString pid_file = tmp.filePath("pid");
  auto cleanup = qScopeGuard([&] {
    if (process_exists(pid_in(pid_file))) ::kill(pid_in(pid_file), SIGKILL);
  });
  QProcessEnvironment env = with_tmp(tmp);
  env.insert("CLUSTERSCOPE_INJECT", kLibrary);  // found through /proc/self/exe otherwise
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(unshare,
          {"-m", "sh", "-c", "mount -t tmpfs none /proc && exec \"$0\" \"$@\"",
           CS_BIN_DIR "/clusterscope", "profile", "--out", tmp.filePath("run.db"), "--", "sh", "-c",
           "trap 'echo stopped; exit 7' TERM; echo $$ > \"$TMPDIR/pid\"; echo ready; "
           "while :; do sleep 0.05; done"});
  QVERIFY(p.waitForStarted());
  QVERIFY(command_is_ready(p));
  ::kill(static_cast<pid_t>(p.processId()), SIGTERM);  // unshare and sh exec'd clusterscope
  const bool ended = p.waitForFinished(20000);
  if (!ended) p.kill();
  QVERIFY2(ended, p.readAllStandardError().constData());
  QVERIFY(p.readAllStandardOutput().contains("stopped"));
  QCOMPARE(p.exitCode(), 7);
}

// A process of the command that left its process group and session
// (setsid, as daemons and some launchers' workers do) is ended with the
// command: the interrupt reached the command alone, and the app's kill of
// the process group missed it; it ran on after clusterscope had ended.
void TestProfileCommand::processesThatLeftTheGroupAreEnded_data() {
  QTest::addColumn<QString>("then");  // what the command does after starting it
  QTest::addColumn<int>("code");
  QTest::addColumn<QStringList>("options");
  QTest::addRow("the command waits") << "wait" << 143 << QStringList{};
  // Nothing traced: 1. The interrupt came while clusterscope waited for it.
  QTest::addRow("the command exits") << "exit 0" << 1 << QStringList{};
  // Waiting for the command alone, an interrupt still reaches them all.
  QTest::addRow("--wait primary, the command waits")
      << "wait" << 143 << QStringList{"--wait", "primary"};
}

void TestProfileCommand::processesThatLeftTheGroupAreEnded() {
  QFETCH(QString, then);
  QFETCH(int, code);
  QFETCH(QStringList, options);
  QTemporaryDir tmp;
  ProfiledScript run(
      tmp, tmp.filePath("run.db"),
      "setsid sh -c 'echo $$ > \"$1\"; echo ready; exec sleep 60' sh \"$TMPDIR/pid\" & " + then,
      options);
  QVERIFY(run.ready());
  QProcess& p = run.process;
  const pid_t escaped = run.away;
  QByteArray err;
  if (then.startsWith("exit")) {
    QVERIFY(says(p, err,
                 "clusterscope: the command ended; waiting for the process it left running (pid " +
                     QByteArray::number(escaped) + "); an interrupt ends it"));
  }
  p.terminate();
  QVERIFY(p.waitForFinished(30000));
  err += p.readAllStandardError();
  QCOMPARE(p.exitStatus(), QProcess::NormalExit);
  QVERIFY2(p.exitCode() == code, qPrintable(QString::number(p.exitCode()) + err));
  QVERIFY2(!process_exists(escaped), qPrintable(QString::number(escaped) + " still runs"));
}

// One that ignores SIGTERM too: the escalation reaches it (it reached the
// command alone, which had ended at the first SIGTERM).
void TestProfileCommand::aProcessThatIgnoresTheStopIsKilled() {
  QTemporaryDir tmp;
  ProfiledScript run(
      tmp, tmp.filePath("run.db"),
      "setsid sh -c 'trap \"\" INT TERM; echo $$ > \"$1\"; echo ready; exec sleep 60' sh "
      "\"$TMPDIR/pid\" & wait");
  QVERIFY(run.ready());
  QProcess& p = run.process;
  const pid_t deaf = run.away;
  const auto profiler = pid_t(p.processId());
  QByteArray err;
  ::kill(profiler, SIGTERM);
  QVERIFY(says(p, err,
               "the command ended; waiting for the process it left running (pid " +
                   QByteArray::number(deaf) + "); interrupt again to end it (SIGTERM)"));
  ::kill(profiler, SIGTERM);
  QVERIFY(says(p, err, "ending the command (SIGTERM); interrupt again to kill it (SIGKILL)"));
  QVERIFY(process_exists(deaf));  // it ignored that too
  ::kill(profiler, SIGTERM);
  QVERIFY(p.waitForFinished(30000));
  err += p.readAllStandardError();
  QVERIFY2(err.contains("killing the command (SIGKILL)"), err.constData());
  QVERIFY2(p.exitCode() == 143, qPrintable(QString::number(p.exitCode()) + err));
  QVERIFY2(!process_exists(deaf), qPrintable(QString::number(deaf) + " still runs"));
}

// SIGHUP (a terminal closed, an ssh connection dropped) is an interrupt: the
// processes a terminal did not reach get it, and their stores are gathered
// once they have ended. It ended the profiler at once: the process that
// had left the group ran on, and nothing was gathered.
void TestProfileCommand::aHangUpIsPassedOnAndWhatWasRecordedGathered() {
  QTemporaryDir tmp;
  QVERIFY(make_rank_stores(tmp));
  const QString out = tmp.filePath("run.db");
  // The process that left the group writes its store as it is hung up on.
  ProfiledScript run(
      tmp, out,
      "cp \"$TMPDIR/made-rank0.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\" && "
      "setsid sh -c 'trap \"cp \\\"$TMPDIR/made-rank1.db\\\" "
      "\\\"$CLUSTERSCOPE_PROFILE_DIR/rank1-pid2.db\\\"; exit 0\" HUP; "
      "echo $$ > \"$1\"; echo ready; while :; do sleep 0.05; done' sh \"$TMPDIR/pid\" & wait");
  QVERIFY(run.ready());
  QProcess& p = run.process;
  const pid_t away = run.away;
  ::kill(pid_t(p.processId()), SIGHUP);
  QVERIFY(p.waitForFinished(30000));
  const QByteArray err = p.readAllStandardError();
  const QByteArray said = p.readAllStandardOutput();
  QVERIFY2(p.exitStatus() == QProcess::NormalExit, err.constData());
  QVERIFY2(!process_exists(away), qPrintable(QString::number(away) + " still runs"));
  QVERIFY2(said.contains("Wrote " + out.toUtf8() + ": 2 processes traced"),
           (said + err).constData());
  auto merged = cs::trace::TraceReader::open(out.toStdString());
  QVERIFY2(merged.ok(), merged.ok() ? "" : merged.message().c_str());
  QCOMPARE(static_cast<int>((*merged)->ranks().size()), 2);
  // The command itself was hung up on: 128 + SIGHUP.
  QVERIFY2(p.exitCode() == 129, qPrintable(QString::number(p.exitCode()) + err));
}

// A command that ends leaving processes running (a launcher that does not
// wait for its workers): their stores are gathered once they have ended.
// Gathered at once, a store written after the command ended was missing.
void TestProfileCommand::processesLeftRunningAreWaitedFor() {
  QTemporaryDir tmp;
  QVERIFY(make_rank_stores(tmp));
  const QString out = tmp.filePath("run.db");
  // The second store is written once the command has ended (its pid gone).
  const Run r = profile(
      {"--out", out, "--", "sh", "-c",
       "cp \"$TMPDIR/made-rank0.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\" && "
       "(while kill -0 $$ 2>/dev/null; do sleep 0.05; done; "
       "cp \"$TMPDIR/made-rank1.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank1-pid2.db\") & exit 0"},
      with_tmp(tmp));
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  // The subshell, and maybe its sleep.
  QVERIFY2(r.err.contains("clusterscope: the command ended; waiting for the ") &&
               r.err.contains(" it left running (pid"),
           qPrintable(r.err));
  QCOMPARE(r.out.trimmed(), "Wrote " + out + ": 2 processes traced (rank0-pid1.db, rank1-pid2.db)");
  auto merged = cs::trace::TraceReader::open(out.toStdString());
  QVERIFY2(merged.ok(), merged.ok() ? "" : merged.message().c_str());
  QCOMPARE(static_cast<int>((*merged)->ranks().size()), 2);
  QCOMPARE((*merged)->event_count(), std::int64_t{2});
}

// --wait primary, as nsys's: once the command ends, the profile ends too.
// The process it left running runs on, unsignalled; the store of the
// process that ended is gathered, the one still being written is not (it
// is left in place, and its directory with it), and stderr says so.
void TestProfileCommand::waitPrimaryLeavesProcessesRunning_data() {
  QTest::addColumn<bool>("keep_parts");
  QTest::addColumn<bool>("one_ended");  // a process that ended left a store
  QTest::addRow("temporary parts directory") << false << true;
  QTest::addRow("--keep-parts") << true << true;
  QTest::addRow("no store of a process that ended") << false << false;
}

void TestProfileCommand::waitPrimaryLeavesProcessesRunning() {
  QFETCH(bool, keep_parts);
  QFETCH(bool, one_ended);
  QTemporaryDir tmp;
  QVERIFY(make_rank_stores(tmp));
  const QString out = tmp.filePath("run.db");
  QStringList options{"--wait", "primary"};
  if (keep_parts) options << "--keep-parts" << tmp.filePath("parts");
  // The command writes a store (its cp ended), leaves a sleeping process,
  // and ends once the test has opened that process's store.
  ProfiledScript run(
      tmp, out,
      QString(one_ended
                  ? "cp \"$TMPDIR/made-rank0.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\" && "
                  : "") +
          "echo \"$CLUSTERSCOPE_PROFILE_DIR\" > \"$TMPDIR/parts-dir\" && "
          "{ setsid sh -c 'echo $$ > \"$1\"; exec sleep 60' sh \"$TMPDIR/pid\" & } && "
          "while [ ! -s \"$TMPDIR/pid\" ]; do sleep 0.05; done; echo ready; "
          "while [ ! -e \"$TMPDIR/go\" ]; do sleep 0.05; done; exit 0",
      options);
  QVERIFY(run.ready());
  QProcess& p = run.process;
  QFile dir_file(tmp.filePath("parts-dir"));
  QVERIFY(dir_file.open(QIODevice::ReadOnly));
  const QString parts = QString::fromUtf8(dir_file.readAll().trimmed());
  // The store the process left running still writes: open, "writing".
  const QString open_store = parts + QString("/rank1-pid%1.db").arg(run.away);
  cs::trace::RunInfo info{"rank 1", "cupti", 0, "CLOCK_REALTIME"};
  auto writer = cs::trace::TraceWriter::create(open_store.toStdString(), info);
  QVERIFY2(writer.ok(), writer.ok() ? "" : writer.message().c_str());
  (*writer)->add_rank({1, "host", "GPU 1", 101, 0});
  QVERIFY((*writer)->flush().ok());
  QFile go(tmp.filePath("go"));
  QVERIFY(go.open(QIODevice::WriteOnly));
  go.close();

  QVERIFY2(p.waitForFinished(20000), "the profile waited for the process left running");
  QVERIFY2(process_exists(run.away), "the process left running was ended");
  const QString err = QString::fromUtf8(p.readAllStandardError());
  const QString said = QString::fromUtf8(p.readAllStandardOutput());
  QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == (one_ended ? 0 : 1),
           qPrintable(QString::number(p.exitCode()) + err));
  QVERIFY2(
      err.contains(QRegularExpression(
          "clusterscope: note: the command ended leaving a process running \\(pids? "
          "([0-9]+, )*" +
          QString::number(run.away) + "(, [0-9]+)*\\), not waited for \\(--wait primary\\): ")),
      qPrintable(err));
  QVERIFY2(err.contains("clusterscope: note: " + open_store +
                        " is still being written by a process left running: not gathered, left "
                        "in place"),
           qPrintable(err));
  QVERIFY(QFile::exists(open_store));  // left where its writer writes
  if (!one_ended) {
    QVERIFY2(err.contains("clusterscope: error: no process that ended left a store, so " + out +
                          " was not written (the stores still being written by processes left "
                          "running stay in " +
                          parts + ")"),
             qPrintable(err));
    QVERIFY(!QFile::exists(out));
    QVERIFY((*writer)->close().ok());
    return;
  }
  QVERIFY2(said.startsWith("Wrote " + out +
                           ": 1 process traced (rank0-pid1.db); per-process "
                           "stores in " +
                           parts),
           qPrintable(said + err));
  if (!keep_parts) {
    QVERIFY2(err.contains("the temporary parts directory " + parts + " is kept"), qPrintable(err));
  }
  auto gathered = cs::trace::TraceReader::open(out.toStdString());
  QVERIFY2(gathered.ok(), gathered.ok() ? "" : gathered.message().c_str());
  QCOMPARE(static_cast<int>((*gathered)->ranks().size()), 1);
  QCOMPARE((*gathered)->ranks()[0].rank, 0);
  gathered->reset();

  // Once its process has ended, the store left behind merges with the run
  // store, as the note says.
  QVERIFY((*writer)->close().ok());
  const QString all = tmp.filePath("all.db");
  QVERIFY2(err.contains("once its process has ended, merge it with the run store: clusterscope "
                        "trace merge --out ALL.db " +
                        out + " " + open_store),
           qPrintable(err));
  QProcess merge;
  merge.start(CS_BIN_DIR "/clusterscope", {"trace", "merge", "--out", all, out, open_store});
  QVERIFY(merge.waitForFinished(30000));
  QVERIFY2(merge.exitCode() == 0, merge.readAllStandardError().constData());
  auto merged = cs::trace::TraceReader::open(all.toStdString());
  QVERIFY2(merged.ok(), merged.ok() ? "" : merged.message().c_str());
  QCOMPARE(static_cast<int>((*merged)->ranks().size()), 2);
}

void TestProfileCommand::aBadWaitIsRefused() {
  QTemporaryDir tmp;
  const Run r = profile(
      {"--out", tmp.filePath("run.db"), "--wait", "sometimes", "--", "sh", "-c", "echo RAN"},
      with_tmp(tmp));
  QCOMPARE(r.exit_code, 2);  // a usage error
  QVERIFY2(r.err.contains("--wait: sometimes not in {all,primary}"), qPrintable(r.err));
  QVERIFY(!r.out.contains("RAN"));
  QCOMPARE(entries(tmp.path()), QStringList());
}

void TestProfileCommand::gathersTheStoreOfOneProcess() {
  QTemporaryDir tmp;
  const QString out = tmp.filePath("run.db");
  const QString parts = tmp.filePath("parts");
  // A stale write-ahead log beside an old run store must not survive.
  QFile stale(out + "-wal");
  QVERIFY(stale.open(QIODevice::WriteOnly));
  stale.write("stale");
  stale.close();
  const Run r = profile({"--out", out, "--keep-parts", parts, "--", "sh", "-c",
                         "printf store > \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid77.db\""},
                        with_tmp(tmp));
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QCOMPARE(r.out.trimmed(), "Wrote " + out +
                                ": 1 process traced (rank0-pid77.db); per-process stores in " +
                                QFileInfo(parts).absoluteFilePath());
  QFile written(out);
  QVERIFY(written.open(QIODevice::ReadOnly));
  QCOMPARE(written.readAll(), QByteArray("store"));
  QVERIFY(!QFile::exists(out + "-wal"));
  QCOMPARE(entries(parts), QStringList{"rank0-pid77.db"});  // kept, as asked
}

// Several processes: their stores become one run store, a rank each.
void TestProfileCommand::severalStoresAreMerged() {
  QTemporaryDir tmp;
  QVERIFY(make_rank_stores(tmp));
  const QString out = tmp.filePath("run.db");
  const Run r = profile({"--out", out, "--", "sh", "-c",
                         "cp \"$TMPDIR/made-rank0.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\" && "
                         "cp \"$TMPDIR/made-rank1.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank1-pid2.db\""},
                        with_tmp(tmp));
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  auto merged = cs::trace::TraceReader::open(out.toStdString());
  QVERIFY2(merged.ok(), merged.ok() ? "" : merged.message().c_str());
  QCOMPARE(static_cast<int>((*merged)->ranks().size()), 2);
  QCOMPARE((*merged)->event_count(), std::int64_t{2});
  // No steps: said, with how to mark them.
  QVERIFY2(r.err.contains("clusterscope: note: the program marked no steps, so the analyses take "
                          "the run as one step; NVTX ranges named step N"),
           qPrintable(r.err));
}

// --plan: the planner's prediction of the plan the program runs goes into the
// run store (a lone process's store merged, not moved), as `clusterscope run`
// records its own; a plan that cannot be predicted is refused before the
// command runs.
void TestProfileCommand::thePlansPredictionGoesIntoTheStore() {
  QTemporaryDir tmp;
  QVERIFY(make_rank_stores(tmp));
  const QString plan = tmp.filePath("plan.json");
  QFile f(plan);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(R"({"cluster": "h200-1", "workload": "gpt2-small",
              "parallel": {"dp": 1, "micro_batch": 8, "global_batch": 8},
              "precision": {"compute": "bf16"}})");
  f.close();
  const QString out = tmp.filePath("run.db");
  const Run r =
      profile({"--out", out, "--plan", plan, "--", "sh", "-c",
               "cp \"$TMPDIR/made-rank0.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\""},
              with_tmp(tmp));
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("clusterscope: note: the planner predicts "), qPrintable(r.err));
  auto stored = cs::trace::TraceReader::open(out.toStdString());
  QVERIFY2(stored.ok(), stored.ok() ? "" : stored.message().c_str());
  QCOMPARE((*stored)->event_count(), std::int64_t{1});
  const auto predicted = (*stored)->meta("predicted_step");
  QVERIFY(predicted);
  const QJsonObject step = QJsonDocument::fromJson(QByteArray::fromStdString(*predicted)).object();
  const QJsonObject planned =
      QJsonDocument::fromJson(cs::test::run_cli({"plan", "--plan", plan, "--json"}).out.toUtf8())
          .object();
  const double seconds = planned["time"].toObject()["step_seconds"].toDouble();
  QVERIFY(seconds > 0);
  QVERIFY(std::abs(step["step_seconds"].toDouble() - seconds) <= 1e-9 * seconds);
  QCOMPARE(step["calibrated"].toBool(true), false);

  // A plan the planner refuses: said, and the command never runs.
  QFile bad(tmp.filePath("bad.json"));
  QVERIFY(bad.open(QIODevice::WriteOnly));
  bad.write(R"({"cluster": "h200-1", "workload": "gpt2-small", "parallel": {"tp": 5}})");
  bad.close();
  const QString ran = tmp.filePath("ran");
  const Run refused =
      profile({"--out", tmp.filePath("bad.db"), "--plan", bad.fileName(), "--", "touch", ran},
              with_tmp(tmp));
  QCOMPARE(refused.exit_code, 1);
  QVERIFY2(refused.err.contains("bad.json"), qPrintable(refused.err));
  QVERIFY(!QFile::exists(ran));
  QVERIFY(!QFile::exists(tmp.filePath("bad.db")));
}

// A plan read from standard input (--plan -) is named so where the plan is
// said, in `profile` and in `trace stats --plan`: they said "(-)" and "the
// plan in -".
void TestProfileCommand::aPlanOnStandardInputIsNamedSo() {
  QTemporaryDir tmp;
  QVERIFY(make_rank_stores(tmp));
  const QByteArray plan = R"({"cluster": "h200-1", "workload": "gpt2-small",
              "parallel": {"dp": 1, "micro_batch": 8, "global_batch": 8},
              "precision": {"compute": "bf16"}})";
  const QString out = tmp.filePath("run.db");
  const Run r = cs::test::run_cli(
      {"profile", "--out", out, "--plan", "-", "--", "sh", "-c",
       "cp \"$TMPDIR/made-rank0.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\""},
      {{}, with_tmp(tmp), 60000, plan});
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains(" on One H200 (a single-GPU machine) (standard input)\n"),
           qPrintable(r.err));
  const Run stats =
      cs::test::run_cli({"trace", "stats", out, "--plan", "-"}, {{}, with_tmp(tmp), 60000, plan});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  QVERIFY2(stats.out.contains("Predicted from the plan in standard input (GPT-2 124M on "),
           qPrintable(stats.out));
}

// The steps a profiled program marked (NVTX ranges named step N, which the
// tracer writes as steps) are counted when the store is written.
void TestProfileCommand::theStepsMarkedAreSaid() {
  QTemporaryDir tmp;
  const QString made = tmp.filePath("stepped.db");
  {
    cs::trace::RunInfo info{"rank", "cupti", 0, "CLOCK_REALTIME"};
    auto writer = cs::trace::TraceWriter::create(made.toStdString(), info);
    QVERIFY(writer.ok());
    (*writer)->add_rank({0, "host", "GPU 0", 100, 0});
    const cs::trace::LaneId stream =
        (*writer)->add_lane(0, cs::trace::LaneKind::gpu_stream, "stream 7");
    const cs::trace::LaneId steps = (*writer)->add_lane(0, cs::trace::LaneKind::steps, "steps", -1);
    for (int step = 0; step < 3; ++step) {
      cs::trace::Event s;
      s.lane = steps;
      s.kind = cs::trace::EventKind::step;
      s.step = step;
      s.start_ns = 1000 * (step + 1);
      s.end_ns = s.start_ns + 900;
      s.name = (*writer)->intern("step " + std::to_string(step));
      (*writer)->add(s);
      cs::trace::Event k;
      k.lane = stream;
      k.start_ns = s.start_ns + 10;
      k.end_ns = s.start_ns + 500;
      k.name = (*writer)->intern("kernel");
      (*writer)->add(k);
    }
    QVERIFY((*writer)->close().ok());
  }
  const Run r = profile({"--out", tmp.filePath("run.db"), "--", "sh", "-c",
                         "cp \"$TMPDIR/stepped.db\" \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\""},
                        with_tmp(tmp));
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("clusterscope: note: 3 steps, from the program's NVTX ranges named as "
                          "steps\n"),
           qPrintable(r.err));
}

// Stores that are not stores: the error names the file, and nothing is lost.
void TestProfileCommand::unreadableStoresAreKept() {
  QTemporaryDir tmp;
  const Run r = profile({"--out", tmp.filePath("run.db"), "--", "sh", "-c",
                         "touch \"$CLUSTERSCOPE_PROFILE_DIR/rank0-pid1.db\" "
                         "\"$CLUSTERSCOPE_PROFILE_DIR/rank1-pid2.db\""},
                        with_tmp(tmp));
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("rank0-pid1.db is not a ClusterScope trace store"), qPrintable(r.err));
  // Nothing is lost: the temporary parts directory stays, and says where.
  QStringList dirs = entries(tmp.path());
  dirs.removeAll("run.db");
  QCOMPARE(dirs.size(), 1);
  const QString parts = tmp.filePath(dirs[0]);
  QVERIFY2(r.err.contains("kept in " + parts), qPrintable(r.err));
  QCOMPARE(entries(parts), (QStringList{"rank0-pid1.db", "rank1-pid2.db"}));
}

void TestProfileCommand::refusesAPartsDirectoryInUse() {
  QTemporaryDir tmp;
  QFile old(tmp.filePath("rank0-pid9.db"));
  QVERIFY(old.open(QIODevice::WriteOnly));
  old.close();
  const Run r =
      profile({"--out", tmp.filePath("run.db"), "--keep-parts", tmp.path(), "--", "true"});
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains("already holds trace stores (*.db); give an empty directory"),
           qPrintable(r.err));
}

void TestProfileCommand::missingInjectionLibrary() {
  QTemporaryDir tmp;
  QProcessEnvironment env = with_tmp(tmp);
  env.insert("CLUSTERSCOPE_INJECT", "/nonexistent/libclusterscope-inject.so");
  const Run r = profile({"--out", tmp.filePath("run.db"), "--", "true"}, env);
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(
      r.err.contains("CLUSTERSCOPE_INJECT=/nonexistent/libclusterscope-inject.so is not a file"),
      qPrintable(r.err));
}

// Where the store cannot go is said before the command runs: the command
// used to run to its end first (a training job's hours), then nothing kept.
void TestProfileCommand::outIsCheckedBeforeTheCommandRuns() {
  QTemporaryDir tmp;
  QFile notes(tmp.filePath("notes.txt"));
  QVERIFY(notes.open(QIODevice::WriteOnly));
  notes.write("keep me\n");
  notes.close();
  // A folder that cannot be made (a file stands there); one missing is made,
  // as every output's is (it said "its folder ... does not exist").
  const QString under_a_file = notes.fileName() + "/runs/run.db";
  Run r = profile({"--out", under_a_file, "--", "sh", "-c", "echo RAN"}, with_tmp(tmp));
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(under_a_file + ": cannot create its folder " + notes.fileName() +
                          "/runs (" + notes.fileName() + " is a file, not a folder)"),
           qPrintable(r.err));
  QVERIFY(!r.out.contains("RAN"));
  // Made before the command runs; removed again, empty, where it traced
  // nothing (no CUDA process here), as a refused command's are.
  r = profile({"--out", tmp.filePath("runs/today/run.db"), "--", "sh", "-c",
               "test -d " + tmp.filePath("runs/today") + " && echo MADE"},
              with_tmp(tmp));
  QVERIFY2(!r.err.contains("does not exist") && !r.err.contains("cannot create"),
           qPrintable(r.err));
  QVERIFY2(r.out.contains("MADE"), qPrintable(r.out + r.err));
  QVERIFY(!QFileInfo::exists(tmp.filePath("runs")));
  r = profile({"--out", notes.fileName(), "--", "sh", "-c", "echo RAN"}, with_tmp(tmp));
  QCOMPARE(r.exit_code, 1);
  QVERIFY2(r.err.contains(notes.fileName() + ": is a file that is not a trace store"),
           qPrintable(r.err));
  QVERIFY(!r.out.contains("RAN"));
}

QTEST_GUILESS_MAIN(TestProfileCommand)
#include "tst_profile_command.moc"
