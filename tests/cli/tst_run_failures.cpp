// `clusterscope run` and `calibrate` where things go wrong, end to end: more
// ranks than this machine runs, a disk that fills as the rank stores are
// made or during the run, a rank killed before it starts, a rank store that
// no longer reads, a store whose writer ended without closing it, the
// launcher killed, a rank stopped (SIGSTOP) for a moment or until the run
// hangs. Real processes and real SQLite files; the full disks are small
// real tmpfs mounts in a mount namespace of their own (root only: skipped
// elsewhere).

#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <unistd.h>

#include "../process_run.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"

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

QString read_text(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

// A copy of the CLI in `work` whose ranks run the shell lines `prelude`
// first: the clusterscope-worker beside it is a script that then runs the
// real worker (under the same name, so that the launcher knows its ranks).
// Empty on failure.
QString ranks_behind(const QString& work, const QString& prelude) {
  if (!QDir().mkpath(work + "/ranks")) return {};
  if (!QFile::copy(kCli, work + "/clusterscope") ||
      !QFile::copy(CS_BIN_DIR "/clusterscope-worker", work + "/ranks/clusterscope-worker"))
    return {};
  QFile script(work + "/clusterscope-worker");
  if (!script.open(QIODevice::WriteOnly)) return {};
  script.write(
      ("#!/bin/sh\n" + prelude + "\nexec \"$(dirname \"$0\")/ranks/clusterscope-worker\" \"$@\"\n")
          .toUtf8());
  script.close();
  const auto executable = QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner;
  for (const char* name : {"/clusterscope", "/ranks/clusterscope-worker", "/clusterscope-worker"})
    if (!QFile::setPermissions(work + name, executable)) return {};
  return work + "/clusterscope";
}

// Runs the shell `script` with a fresh tmpfs of `size` mounted on `disk`, in
// a mount namespace of its own: the disk and what is on it go with the
// script, which copies out what the test reads. Exit 99: no mount here.
Run on_small_disk(const QString& disk, const QString& size, const QString& script) {
  cs::test::ProcessOptions options;
  options.timeout_ms = 240000;
  return cs::test::run_process(
      "unshare",
      {"--mount", "sh", "-c",
       QString("mount -t tmpfs -o size=%1 tmpfs '%2' || exit 99\n").arg(size, disk) + script},
      options);
}

bool cannot_mount(const Run& r) {
  return r.exit_code == 99 || r.exit_code == -1 || r.err.contains("unshare: ");
}

// A command's words as shell words (the tests' paths hold no quote).
QString words(const QStringList& args) {
  QString out;
  for (const QString& a : args)
    out += (out.isEmpty() ? "'" : " '") + a + "'";
  return out;
}

// Fills the disk holding `file` up, but for `room` bytes (in whole pages).
QString fill(const QString& file, qint64 room) {
  return QString(
             "free=$(df -B1 --output=avail \"$(dirname '%1')\" | tail -1)\n"
             "head -c $(( (free - %2) / 4096 * 4096 )) /dev/zero > '%1'\n")
      .arg(file)
      .arg(room);
}

std::int64_t steps_in(const QString& store) {
  cs::trace::TraceReader::Options as_it_is;
  as_it_is.repair = false;
  auto reader = cs::trace::TraceReader::open(store.toStdString(), as_it_is);
  if (!reader) return -1;
  std::int64_t steps = 0;
  for (const cs::trace::RankInfo& r : (*reader)->ranks()) {
    auto rows = (*reader)->steps(r.rank);
    if (rows) steps += static_cast<std::int64_t>(rows->size());
  }
  return steps;
}

// Processes whose command line holds `text` (a run's unique --out path):
// mpirun and the ranks of that run.
QList<qint64> processes_with(const QString& text) {
  QList<qint64> out;
  const QByteArray needle = text.toUtf8();
  QDirIterator it("/proc", QDir::Dirs | QDir::NoDotAndDotDot);
  while (it.hasNext()) {
    const QString dir = it.next();
    bool number = false;
    const qint64 pid = QFileInfo(dir).fileName().toLongLong(&number);
    if (!number) continue;
    QFile cmdline(dir + "/cmdline");
    if (!cmdline.open(QIODevice::ReadOnly)) continue;
    QByteArray line = cmdline.readAll();
    line.replace('\0', ' ');
    // A zombie (ended, not yet reaped) has an empty command line.
    if (line.contains(needle)) out.append(pid);
  }
  return out;
}

// A started `clusterscope run`, read as it goes.
struct LiveRun {
  QProcess process;
  QString err;

  // Waits for `pattern` in what it printed on stderr; its match, or none.
  QRegularExpressionMatch wait_for(const QRegularExpression& pattern, int timeout_ms) {
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < timeout_ms) {
      process.waitForReadyRead(100);
      err += QString::fromUtf8(process.readAllStandardError());
      const QRegularExpressionMatch m = pattern.match(err);
      if (m.hasMatch()) return m;
      if (process.state() == QProcess::NotRunning) break;
    }
    return {};
  }
};

// An event of a rank's, with its lane's name.
struct RankEvent {
  QString lane;
  QString name;
  cs::trace::Category category;
  std::int64_t duration_ns;
};
QList<RankEvent> events_of(const QString& store, int rank) {
  QList<RankEvent> out;
  auto reader = cs::trace::TraceReader::open(store.toStdString());
  if (!reader) return out;
  const cs::trace::TraceReader& r = **reader;
  for (const cs::trace::LaneInfo& lane : r.lanes_of(rank)) {
    (void)r.for_each_event({lane.id}, lane.first_ns, lane.last_ns + 1,
                           [&](const cs::trace::StoredEvent& e) {
                             out.append({QString::fromStdString(lane.name),
                                         QString::fromStdString(r.string(e.event.name)),
                                         e.event.category, e.event.duration_ns()});
                             return true;
                           });
  }
  return out;
}

// Whether an event of compute or communication lasts a second or more.
bool long_work(const RankEvent& e) {
  return (e.category == cs::trace::Category::compute ||
          e.category == cs::trace::Category::communication) &&
         e.duration_ns >= 1'000'000'000;
}

}  // namespace

class TestRunFailures : public QObject {
  Q_OBJECT

 private slots:
  void moreRanksThanTheMachineRuns();
  void manyRanksAreSummarised();
  void fullDiskAsTheRankStoresAreMade();
  void rankKilledBeforeItStarts();
  void fullDiskDuringTheRun();
  void writerThatEndedWithoutClosing();
  void calibrationOnAFullDisk();
  void mergeOfADamagedRankStore();
  void killedLauncherEndsItsRanks();
  void killedLauncherLeavesNoHostfileCopy();
  void stoppedRankIsNamedWhenTheRunHangs();
  void stallIsNotCompute();

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

// A disk full as the ranks make their stores: nothing that is not a store is
// left where they go (an empty rank1.db, a 16 KB rank0.db with its log
// stayed, and `--merge-only` called them "an SQLite database with no
// tables"); the run says that no run store was written and why, and never
// that a rank closed a store it did not have.
void TestRunFailures::fullDiskAsTheRankStoresAreMade() {
  const QString work = dir_.filePath("full-at-create");
  const QString disk = work + "/disk";
  QVERIFY(QDir().mkpath(disk));
  // The disk fills as the ranks start, once the run has written its plan.
  const QString cli = ranks_behind(work,
                                   "[ -n \"$CS_TEST_FILL\" ] && head -c 64M /dev/zero > "
                                   "\"$CS_TEST_FILL.$$\" 2> /dev/null");
  QVERIFY(!cli.isEmpty());
  const QString store = disk + "/run.db";
  const QString script =
      QString(
          "CS_TEST_FILL='%1/fill' %2 > '%3/run.out' 2> '%3/run.err'\n"
          "echo $? > '%3/run.rc'\n"
          "rm -f '%1'/fill.*\n"
          "%4 > '%3/merge.out' 2> '%3/merge.err'\n"
          "echo $? > '%3/merge.rc'\n"
          "cd '%1' && find . | sort > '%3/left.txt'\n")
          .arg(
              disk,
              words(QStringList{cli, "run", "--dp", "2", "--steps", "3", "--out", store} + tiny()),
              work,
              words(QStringList{cli, "run", "--merge-only", "--dp", "2", "--out", store} + tiny()));
  const Run r = on_small_disk(disk, "2m", script);
  if (cannot_mount(r)) QSKIP(qPrintable("a small tmpfs cannot be mounted here: " + r.err));
  const QString out = read_text(work + "/run.out"), err = read_text(work + "/run.err");
  QCOMPARE(read_text(work + "/run.rc").trimmed(), QString("1"));
  QVERIFY2(out.contains("note: no run store was written: no rank made a store to merge into " +
                        store + " (rank 0: "),
           qPrintable(out + err));
  QVERIFY2(out.contains("database or disk is full"), qPrintable(out));
  // The failed rank's error is said once (the report's first line), not
  // again among the reasons for no run store.
  const QString ranks = disk + "/run.ranks/";
  QVERIFY2(
      out.count(ranks + "rank0.db: cannot create") + out.count(ranks + "rank1.db: cannot create") <=
          2,
      qPrintable(out));
  QVERIFY2(!err.contains("merging the rank stores"), qPrintable(err));
  QVERIFY2(!err.contains("closed its store"), qPrintable(err));
  // The plan stays; no rank store, no log, no empty folder.
  QCOMPARE(read_text(work + "/left.txt").split('\n', Qt::SkipEmptyParts),
           (QStringList{".", "./run.plan.json"}));
  QCOMPARE(read_text(work + "/merge.rc").trimmed(), QString("1"));
  const QString merge_err = read_text(work + "/merge.err");
  QVERIFY2(merge_err.contains("clusterscope: error: no run store was written: no rank store to "
                              "merge into " +
                              store),
           qPrintable(merge_err));
  QVERIFY2(!merge_err.contains("no tables"), qPrintable(merge_err));
}

// A rank killed before it starts (kill -9 of its process as mpirun starts
// it): the other rank, stopped before it made its store, said it "closed its
// store"; the run never said that no run store was written.
void TestRunFailures::rankKilledBeforeItStarts() {
  const QString work = dir_.filePath("killed-early");
  const QString cli = ranks_behind(work, "[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && kill -9 $$");
  QVERIFY(!cli.isEmpty());
  const QString store = work + "/run.db";
  const Run r = cs::test::run_process(
      cli, QStringList{"run", "--dp", "2", "--steps", "100000", "--out", store} + tiny());
  QCOMPARE(r.exit_code, 1);
  // How mpirun words rank 1's end varies (its notice, or only its status):
  // rank 1 was killed before it made a store, or never reported in.
  QVERIFY2(r.out.contains("note: no run store was written: no rank made a store to merge into " +
                          store + " (rank 0: ") &&
               (r.out.contains("; rank 1: killed by signal 9 (Killed) before it made one)") ||
                r.out.contains("; rank 1: it never started)")),
           qPrintable(r.out));
  QVERIFY2(!r.err.contains("closed its store"), qPrintable(r.err));
  QVERIFY2(!r.err.contains("merging the rank stores"), qPrintable(r.err));
  QVERIFY(!QDir(work + "/run.ranks").exists());
  QVERIFY(!QFile::exists(store));
}

// A disk that fills during the run: the report said "steps done 14" for both
// ranks while their stores held 11 and 9; what each store holds is beside
// what the rank reported.
void TestRunFailures::fullDiskDuringTheRun() {
  const QString work = dir_.filePath("full-mid-run");
  const QString disk = work + "/disk", kept = work + "/kept";
  QVERIFY(QDir().mkpath(disk) && QDir().mkpath(kept));
  const QString store = disk + "/run.db";
  const QString script =
      // Room for both stores to be made (about 500 KB each) and to take
      // some steps.
      fill(disk + "/fill", 2 * 1024 * 1024) +
      QString(
          "%1 > '%2/run.out' 2> '%2/run.err'\n"
          "echo $? > '%2/run.rc'\n"
          "cp '%3'/run.ranks/rank* '%4'/\n")
          .arg(words(QStringList{kCli, "run", "--dp", "2", "--steps", "100000", "--out", store} +
                     tiny()),
               work, disk, kept);
  const Run r = on_small_disk(disk, "8m", script);
  if (cannot_mount(r)) QSKIP(qPrintable("a small tmpfs cannot be mounted here: " + r.err));
  const QString out = read_text(work + "/run.out"), err = read_text(work + "/run.err");
  QCOMPARE(read_text(work + "/run.rc").trimmed(), QString("1"));
  QVERIFY2(err.contains("database or disk is full"), qPrintable(err));
  const QStringList lines = out.split('\n');
  const qsizetype header =
      lines.indexOf(QRegularExpression("^rank\\s+host\\s+state\\s+steps done\\s+in store\\s.*"));
  QVERIFY2(header >= 0, qPrintable(out));
  bool short_of_reported = false;
  for (int rank = 0; rank < 2; ++rank) {
    const QStringList cells = lines.value(header + 2 + rank).split(' ', Qt::SkipEmptyParts);
    QVERIFY2(cells.size() > 4 && cells[0] == QString::number(rank), qPrintable(out));
    // A store the full disk keeps from being read (SQLite cannot make the
    // file a reader needs beside it) says so and why.
    if (cells[4] == "?") {
      QVERIFY2(out.contains(QString("note: rank %1 reported %2 steps; its store cannot be read to "
                                    "count what it holds: ")
                                .arg(rank)
                                .arg(cells[3])),
               qPrintable(out));
      short_of_reported = true;
      continue;
    }
    const qint64 reported = cells[3].toLongLong(), in_store = cells[4].toLongLong();
    QCOMPARE(in_store, steps_in(kept + QString("/rank%1.db").arg(rank)));
    QVERIFY2(in_store <= reported, qPrintable(out));
    if (in_store < reported) {
      short_of_reported = true;
      QVERIFY2(out.contains(QString("note: rank %1 reported %2 steps; its store holds %3: the "
                                    "last were not committed")
                                .arg(rank)
                                .arg(reported)
                                .arg(in_store)),
               qPrintable(out));
    }
  }
  QVERIFY2(short_of_reported, qPrintable(out));
}

// A store whose writer ended without closing it (killed; or its close failed
// on a full disk), which cannot be completed where it is (a full disk; here,
// deterministically, a mount made read-only): it read as "still being
// written".
void TestRunFailures::writerThatEndedWithoutClosing() {
  const QString work = dir_.filePath("ended-unclosed");
  const QString disk = work + "/disk";
  QVERIFY(QDir().mkpath(disk));
  const QString store = disk + "/w.rank0.db";
  const QString script =
      QString(
          "'%1' --backend cpu --steps 1000000 --layers 2 --hidden 64 --heads 4 --seq 16 "
          "--out '%2/w.db' > /dev/null 2>&1 &\n"
          "worker=$!\n"
          "i=0\n"
          // Killed once it has written steps (its log past the store's
          // creation, about 250 KB).
          "while [ $i -lt 2400 ] && [ \"$(stat -c %s '%3-wal' 2> /dev/null || echo 0)\" -lt "
          "1048576 ]; do sleep 0.05; i=$((i + 1)); done\n"
          "kill -9 $worker; wait $worker\n"
          "mount -o remount,ro '%2'\n"
          "'%4' trace stats '%3' > '%5/stats.out' 2> '%5/stats.err'\n"
          "'%4' trace info '%3' > '%5/info.out' 2> '%5/info.err'\n")
          .arg(CS_BIN_DIR "/clusterscope-worker", disk, store, kCli, work);
  const Run r = on_small_disk(disk, "8m", script);
  if (cannot_mount(r)) QSKIP(qPrintable("a small tmpfs cannot be mounted here: " + r.err));
  const QString stats = read_text(work + "/stats.out") + read_text(work + "/stats.err");
  QVERIFY2(!stats.contains("still being written"), qPrintable(stats));
  QVERIFY2(stats.contains(store + ": its writer (process ") &&
               stats.contains(") ended without closing it, and it cannot be completed here ("),
           qPrintable(stats));
  const QString info = read_text(work + "/info.out");
  QVERIFY2(info.contains("status writing (its writer, process ") &&
               info.contains(", ended without closing it; it cannot be completed here: "),
           qPrintable(info + read_text(work + "/info.err")));
}

// A calibration on a full disk: its error named a rank store whose folder it
// had removed, and it left the empty presets folder it had made.
void TestRunFailures::calibrationOnAFullDisk() {
  const QString work = dir_.filePath("calibration-full");
  const QString disk = work + "/disk";
  QVERIFY(QDir().mkpath(disk));
  const QString script =
      // Room for a phase's rank store to be made and take part of a sweep.
      fill(disk + "/fill", 400 * 1024) +
      QString(
          "%1 > '%2/cal.out' 2> '%2/cal.err'\n"
          "echo $? > '%2/cal.rc'\n"
          "find '%3' | sort > '%2/left.txt'\n")
          .arg(words({kCli, "calibrate", "--backend", "cpu", "--ranks", "1", "2", "--gemm-sizes",
                      "64", "--seconds", "0.05", "--no-ops", "--no-reference-runs", "-o",
                      disk + "/cal.db", "--presets-dir", disk + "/presets"}),
               work, disk);
  const Run r = on_small_disk(disk, "2m", script);
  if (cannot_mount(r)) QSKIP(qPrintable("a small tmpfs cannot be mounted here: " + r.err));
  const QString err = read_text(work + "/cal.err");
  QCOMPARE(read_text(work + "/cal.rc").trimmed(), QString("1"));
  QVERIFY2(err.contains("clusterscope: error: calibration"), qPrintable(err));
  const QStringList left = read_text(work + "/left.txt").split('\n', Qt::SkipEmptyParts);
  QVERIFY2(!left.contains(disk + "/presets"), qPrintable(left.join('\n')));
  // What it says it kept is there.
  const QString marker = "; what it recorded is kept in ";
  const qsizetype at = err.lastIndexOf(marker);
  QVERIFY2(at >= 0 || err.contains("; nothing it recorded was kept"), qPrintable(err));
  if (at >= 0) {
    for (const QString& path : err.mid(at + marker.size()).trimmed().split(", "))
      QVERIFY2(left.contains(path), qPrintable(path + " is not in\n" + left.join('\n')));
  }
}

// A run whose ranks all completed, merged again with one rank store cut
// short: it was "a run that ended crashed". Now the merge says which store
// does not read and why, and that the others completed.
void TestRunFailures::mergeOfADamagedRankStore() {
  const QString work = dir_.filePath("damaged-rank");
  const QString store = work + "/run.db";
  const QStringList plan = QStringList{"--dp", "2", "--out", store} + tiny();
  const Run r = run_cli(QStringList{"run", "--steps", "2", "--keep-rank-stores"} + plan);
  QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  const QString rank1 = work + "/run.ranks/rank1.db";
  QFile cut(rank1);
  QVERIFY(cut.resize(cut.size() / 2));
  const Run merge = run_cli(QStringList{"run", "--merge-only"} + plan);
  QCOMPARE(merge.exit_code, 1);
  QVERIFY2(merge.out.contains("merged the rank stores of a run that ended complete as far as its "
                              "readable rank stores say (1 of 2 cannot be read) into " +
                              store),
           qPrintable(merge.out));
  QVERIFY2(merge.err.contains("clusterscope: error: the run store " + store +
                              " lacks what a rank store that cannot be read holds (rank 1: " +
                              rank1 + " is damaged: the file is cut short") &&
               merge.err.contains("; the other ranks ended complete"),
           qPrintable(merge.err));
  QVERIFY2(!(merge.out + merge.err).contains("crashed"), qPrintable(merge.out + merge.err));
}

// kill -9 of `clusterscope run` left its mpirun and ranks training on (3 to
// 8 s and more, until mpirun's next write to the closed pipe and what came
// of it) with their stores open, so that a rerun with the same --out was
// refused ("is a trace store that process ... is still writing"). mpirun now
// dies with the launcher, and its ranks with it: each closes its store and
// ends at once; the stores merge with --merge-only, and a rerun made at once
// starts.
void TestRunFailures::killedLauncherEndsItsRanks() {
  const QString work = dir_.filePath("launcher-killed");
  QVERIFY(QDir().mkpath(work));
  const QString store = work + "/run.db";
  // The default model, scaled: steps of a few hundred ms.
  const QStringList endless{"run", "--dp", "2", "--steps", "1000000", "--out", store};
  auto start_then_kill = [&](LiveRun& run) {
    run.process.start(kCli, endless);
    QVERIFY(run.process.waitForStarted());
    QVERIFY2(run.wait_for(QRegularExpression("step 2/1000000"), 60000).hasMatch(),
             qPrintable(run.err));
    QVERIFY(processes_with(work + "/run.ranks/").size() >= 2);  // mpirun and the ranks
    ::kill(static_cast<pid_t>(run.process.processId()), SIGKILL);
    QVERIFY(run.process.waitForFinished(5000));
  };
  {
    LiveRun run;
    start_then_kill(run);
    QElapsedTimer since_kill;
    since_kill.start();
    while (!processes_with(work + "/run.ranks/").isEmpty() && since_kill.elapsed() < 15000)
      QTest::qWait(50);
    const qint64 gone_after = since_kill.elapsed();
    qInfo("the run's processes were gone %lld ms after the launcher's kill", gone_after);
    QVERIFY2(gone_after < 2500, qPrintable(QString("they lived %1 ms").arg(gone_after)));
  }
  // Each rank closed its store, as a cancelled rank does, and they merge.
  for (int rank = 0; rank < 2; ++rank) {
    const auto state = cs::trace::inspect_store(
        QString("%1/run.ranks/rank%2.db").arg(work).arg(rank).toStdString());
    QVERIFY2(state, state ? "" : state.message().c_str());
    QCOMPARE(QString::fromStdString(state->status), QString("cancelled"));
  }
  const Run merge = run_cli({"run", "--merge-only", "--dp", "2", "--out", store});
  QCOMPARE(merge.exit_code, 1);
  QVERIFY2(merge.out.contains("merged the rank stores of a run that ended cancelled into " + store),
           qPrintable(merge.out + merge.err));
  QVERIFY(steps_in(store) >= 4);
  // Killed again, and run again at once with the same --out: it starts (the
  // lock went with the launcher; the ranks that still close their stores
  // are waited for).
  {
    LiveRun run;
    start_then_kill(run);
  }
  const Run again =
      run_cli(QStringList{"run", "--dp", "2", "--steps", "1", "--out", store} + tiny());
  QVERIFY2(again.exit_code == 0, qPrintable(again.err));
}

// A hostfile given as RUN.hosts: mpirun reads a validated copy in the
// temporary folder, removed when the run ends. kill -9 of `clusterscope run`
// left that copy there for good, one more with each killed run. The next
// run's start now removes the copies of launchers that are gone.
void TestRunFailures::killedLauncherLeavesNoHostfileCopy() {
  const QString work = dir_.filePath("hostfile-killed");
  const QString temp = work + "/tmp";  // the runs' temporary folder, this test's alone
  QVERIFY(QDir().mkpath(temp));
  QFile hosts(work + "/run.hosts");
  QVERIFY(hosts.open(QIODevice::WriteOnly));
  hosts.write("localhost slots=2\n");
  hosts.close();
  const QStringList launch{
      "run",   "--dp",          "2", "--backend", "cpu", "--hostfile", work + "/run.hosts",
      "--out", work + "/run.db"};
  auto copies = [&] { return QDir(temp).entryList({"clusterscope-*.hosts"}, QDir::Files); };
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("TMPDIR", temp);
  {
    LiveRun run;
    run.process.setProcessEnvironment(env);
    run.process.start(kCli, launch + QStringList{"--steps", "1000000"} + tiny());
    QVERIFY(run.process.waitForStarted());
    QVERIFY2(run.wait_for(QRegularExpression("step 2/1000000"), 60000).hasMatch(),
             qPrintable(run.err));
    QCOMPARE(copies().size(), 1);
    ::kill(static_cast<pid_t>(run.process.processId()), SIGKILL);
    QVERIFY(run.process.waitForFinished(5000));
  }
  QTRY_VERIFY_WITH_TIMEOUT(processes_with(work + "/run.ranks/").isEmpty(), 15000);
  QCOMPARE(copies().size(), 1);  // what the killed launcher could not remove
  cs::test::ProcessOptions options;
  options.env = env;
  const Run again = cs::test::run_cli(launch + QStringList{"--steps", "1"} + tiny(), options);
  QVERIFY2(again.exit_code == 0, qPrintable(again.err));
  QVERIFY2(copies().isEmpty(), qPrintable(copies().join(", ")));
}

// A rank stopped (SIGSTOP) until the run hangs: the hang was told as "rank
// 1 (pid P) is stopped", without its host or what it was doing. Now the
// message and the error name its host and pid and the last op its store
// holds, and when it ended; the run exits 1, every step the ranks reported
// is in the run store, and the stopped time is no op's work.
void TestRunFailures::stoppedRankIsNamedWhenTheRunHangs() {
  const QString work = dir_.filePath("rank-hung");
  QVERIFY(QDir().mkpath(work));
  const QString store = work + "/run.db";
  LiveRun run;
  run.process.start(kCli, QStringList{"run", "--dp", "2", "--steps", "1000000", "--hang-timeout",
                                      "1.5", "--out", store} +
                              tiny());
  QVERIFY(run.process.waitForStarted());
  const QRegularExpressionMatch started =
      run.wait_for(QRegularExpression("rank 1 started on (\\S+) \\(pid (\\d+)\\)"), 60000);
  QVERIFY2(started.hasMatch(), qPrintable(run.err));
  QVERIFY2(run.wait_for(QRegularExpression("step 20/"), 60000).hasMatch(), qPrintable(run.err));
  QTest::qWait(1000);  // a rank commits its store every half second
  const QString host = started.captured(1), pid = started.captured(2);
  QCOMPARE(::kill(static_cast<pid_t>(pid.toLongLong()), SIGSTOP), 0);
  QVERIFY(run.process.waitForFinished(60000));
  ::kill(static_cast<pid_t>(pid.toLongLong()), SIGCONT);  // in case it outlived the run
  run.err += QString::fromUtf8(run.process.readAllStandardError());
  const QString out = QString::fromUtf8(run.process.readAllStandardOutput());
  QCOMPARE(run.process.exitCode(), 1);
  const QRegularExpression named(
      QString("rank 1 \\(%1, pid %2\\) is stopped \\(SIGSTOP or a debugger\\); its last "
              "recorded op: .+ on its (compute|communication) lane, ended at "
              "\\d\\d:\\d\\d:\\d\\d\\.\\d{3} UTC \\(\\d+\\.\\d s before the hang was seen\\)")
          .arg(QRegularExpression::escape(host), pid));
  QVERIFY2(named.match(out).hasMatch(), qPrintable(out));
  QVERIFY2(named.match(run.err).hasMatch(), qPrintable(run.err));  // the hang's own line
  QVERIFY2(run.err.contains(QString("clusterscope: error: the run hung (rank 1 on %1, pid %2, is "
                                    "stopped (SIGSTOP or a debugger))")
                                .arg(host, pid)),
           qPrintable(run.err));
  // Every step reported is in the run store.
  const QRegularExpressionMatch counts =
      QRegularExpression("steps done: (\\d+) by rank 0, (\\d+) by rank 1").match(out);
  QVERIFY2(counts.hasMatch(), qPrintable(out));
  QVERIFY(steps_in(store) >= counts.captured(1).toLongLong() + counts.captured(2).toLongLong());
  for (const RankEvent& e : events_of(store, 1)) {
    QVERIFY2(!long_work(e),
             qPrintable(QString("%1 on %2: %3 ns").arg(e.name, e.lane).arg(e.duration_ns)));
  }
}

// A rank stopped for a moment (SIGSTOP, then SIGCONT well before the hang
// timeout) is only slow, and the run goes on; but the op it was in counted
// the stopped time as its work. The store now says the process did not run
// then, and an op a stall fell in is "stalled: <name>", of category other.
void TestRunFailures::stallIsNotCompute() {
  const QString work = dir_.filePath("rank-stalled");
  QVERIFY(QDir().mkpath(work));
  const QString store = work + "/run.db";
  LiveRun run;
  run.process.start(kCli,
                    QStringList{"run", "--dp", "2", "--steps", "1000000", "--out", store} + tiny());
  QVERIFY(run.process.waitForStarted());
  const QRegularExpressionMatch started =
      run.wait_for(QRegularExpression("rank 1 started on \\S+ \\(pid (\\d+)\\)"), 60000);
  QVERIFY2(started.hasMatch(), qPrintable(run.err));
  QVERIFY2(run.wait_for(QRegularExpression("step 20/"), 60000).hasMatch(), qPrintable(run.err));
  const pid_t pid = static_cast<pid_t>(started.captured(1).toLongLong());
  QCOMPARE(::kill(pid, SIGSTOP), 0);
  QTest::qWait(1500);
  QCOMPARE(::kill(pid, SIGCONT), 0);
  QTest::qWait(500);
  ::kill(static_cast<pid_t>(run.process.processId()), SIGINT);
  QVERIFY(run.process.waitForFinished(60000));
  QCOMPARE(run.process.exitCode(), 1);  // cancelled
  const QList<RankEvent> events = events_of(store, 1);
  QVERIFY(!events.isEmpty());
  bool stall_kept = false;
  for (const RankEvent& e : events) {
    if (e.lane == "phases" && e.name == "stalled: the process did not run" &&
        e.duration_ns >= 1'200'000'000)
      stall_kept = true;
    QVERIFY2(!long_work(e),
             qPrintable(QString("%1 on %2: %3 ns").arg(e.name, e.lane).arg(e.duration_ns)));
    if (e.name.startsWith("stalled: ") && e.lane != "phases")
      QCOMPARE(e.category, cs::trace::Category::other);
  }
  QVERIFY2(stall_kept, "no stall of the stopped rank in its store");
}

QTEST_GUILESS_MAIN(TestRunFailures)
#include "tst_run_failures.moc"
