// The runs panel launching the project's plan for real (the CPU engine, two
// ranks through mpirun): live progress, loss and step-time points, the
// report and the project's history; a run cancelled, a run whose rank is
// killed, and a plan the engines cannot run, each shown as such.

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <QThread>
#include <QTimer>
#include <csignal>
#include <fstream>
#include <iterator>

#include "app/gui/main_window.h"
#include "app/gui/project.h"
#include "app/gui/run_view.h"
#include "app/gui/runs_panel.h"
#include "app/gui/timeline_widget.h"
#include "app/gui/workspace.h"
#include "core/trace_reader.h"
#include "gui_test_support.h"
#include "profiler/plan_run.h"

using namespace cs;
using namespace cs::gui;

namespace {

// The default project's plan made small enough for two cores: two
// data-parallel ranks of a tiny transformer, in fp32.
Project tinyPlan(Project project) {
  ProjectPlan& plan = *project.current();
  Workload& w = project.workloads[std::size_t(project.workload_index(plan.workload))];
  w.transformer.layers = 2;
  w.transformer.hidden = 32;
  w.transformer.heads = 4;
  w.transformer.kv_heads = 4;
  w.transformer.ffn_hidden = 128;
  w.transformer.seq_len = 16;
  w.transformer.vocab = 512;
  plan.parallel.dp = 2;
  plan.parallel.tp = 1;
  plan.parallel.pp = 1;
  plan.parallel.micro_batch = 1;
  plan.parallel.global_batch = 2;
  plan.parallel.zero_stage = 0;
  plan.parallel.sequence_parallel = false;
  plan.parallel.recompute = Recompute::none;
  plan.precision = PrecisionPlan::for_compute(Precision::fp32);
  return project;
}

// Processes of this machine whose command line is `argv`, read from /proc.
int processesRunning(const std::string& argv) {
  int n = 0;
  for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
    bool number = false;
    pid.toInt(&number);
    if (!number) continue;
    std::ifstream in("/proc/" + pid.toStdString() + "/cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(in), {}};
    if (cmdline == argv) ++n;
  }
  return n;
}

// A clusterscope-worker in `work` (put first on PATH by the caller) that
// runs the real one with the stop and SIGTERM ignored; its path, or empty.
QString deafWorker(const QString& work) {
#ifdef CS_DEAF_RANK_SHIM
  const QString worker = work + "/ranks/clusterscope-worker";
  QFile script(work + "/clusterscope-worker");
  if (!QDir().mkpath(work + "/ranks") || !QFile::copy(CS_BIN_DIR "/clusterscope-worker", worker) ||
      !script.open(QIODevice::WriteOnly))
    return {};
  script.write("#!/bin/sh\nLD_PRELOAD=" CS_DEAF_RANK_SHIM " exec \"" + worker.toUtf8() +
               "\" \"$@\"\n");
  script.close();
  const auto executable = QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner;
  if (!QFile::setPermissions(worker, executable) ||
      !QFile::setPermissions(script.fileName(), executable))
    return {};
  return worker;
#else
  (void)work;
  return {};
#endif
}

// SIGKILL to the processes whose command line (its words, each ended by
// '\0') starts with `words`; how many.
int killAll(const QByteArray& words) {
  int n = 0;
  for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
    QFile cmdline("/proc/" + pid + "/cmdline");
    if (pid.toLongLong() > 0 && cmdline.open(QIODevice::ReadOnly) &&
        cmdline.readAll().startsWith(words)) {
      ::kill(pid_t(pid.toLongLong()), SIGKILL);
      ++n;
    }
  }
  return n;
}

}  // namespace

class TestGuiRuns : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void completedRun();
  void cancelledRun();
  void cancelTwiceKillsTheRanks();
  void crashedRun();
  void changingProjectStopsTheRunFirst();
  void planTheEnginesCannotRun();
  void ranksPastTheCoresWarnedBeforeLaunch_data();
  void ranksPastTheCoresWarnedBeforeLaunch();
  void slurmJobFromTheApp();
  void profileACommand();
  void profilingThatWritesNoStoreLeavesNoPlan();
  void profilerThatCannotStart_data();
  void profilerThatCannotStart();
  void cancelAProfiledCommand();
  void profiledCommandEndingKeepsTheRunsCancel();
  void closingTheWindowStopsAProfiledCommand_data();
  void closingTheWindowStopsAProfiledCommand();
  void closingEndsARunWhoseRanksDoNotStop();
  void closingEndsAProfiledCommandThatIgnoresTheStop_data();
  void closingEndsAProfiledCommandThatIgnoresTheStop();
  void finishTakesTheRunsLastEvents();

 private:
  void waitForEveryRank(RunsPanel* panel, int step);
  QTemporaryDir dir_;
  std::unique_ptr<MainWindow> window_;
};

void TestGuiRuns::initTestCase() {
  cs::gui::test::isolateSettings();
  QVERIFY(dir_.isValid());
  // The app finds clusterscope-worker beside itself or on PATH; this suite
  // lives in another folder than the programs.
  qputenv("PATH", QByteArray(CS_BIN_DIR ":") + qgetenv("PATH"));
}

void TestGuiRuns::init() {
  window_ = std::make_unique<MainWindow>();
  window_->start();
  Workspace* ws = window_->workspace();
  ws->edit(QStringLiteral("tiny"), tinyPlan(ws->project()));
  QVERIFY(ws->project().resolved_plan().ok());
  RunsPanel* panel = window_->runsPanel();
  panel->backendBox()->setCurrentIndex(panel->backendBox()->findData(QStringLiteral("cpu")));
  panel->folderField()->setText(dir_.filePath(QStringLiteral("runs")));
  panel->hangBox()->setValue(120);
}

void TestGuiRuns::waitForEveryRank(RunsPanel* panel, int step) {
  QTRY_VERIFY_WITH_TIMEOUT(
      [&] {
        const auto ranks = panel->ranks();
        if (ranks.size() != 2) return false;
        for (const launch::RankStatus& r : ranks) {
          if (r.step < step || r.pid <= 0) return false;
        }
        return true;
      }(),
      60000);
}

void TestGuiRuns::completedRun() {
  RunsPanel* panel = window_->runsPanel();
  window_->show();
  QVERIFY(panel->engineLabel()->text().contains(QStringLiteral("CPU engine")));
  panel->stepsBox()->setValue(4);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  const Status s = panel->launch();
  QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
  QVERIFY(panel->running());
  // What the report says before the ranks start (the model reshaped to the
  // engines' size, the prediction made or why there is none).
  const QStringList notes = panel->report()
                                ->toPlainText()
                                .split(QRegularExpression(QStringLiteral("[\\n\\x{2028}]")))
                                .filter(QRegularExpression(QStringLiteral("^note: ")));
  QVERIFY(!notes.isEmpty());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 180000);
  QCOMPARE(finished.front().at(0).toString(), QStringLiteral("complete"));
  // ... is still there once it ends: the end's report took its place, and
  // a run of a few seconds left no time to read why its store held no
  // prediction.
  for (const QString& note : notes)
    QVERIFY2(panel->report()->toPlainText().contains(note), qPrintable(note));
  QVERIFY(!panel->running());
  QVERIFY(panel->lastReport());
  QCOMPARE(panel->lastReport()->outcome, launch::Outcome::completed);
  // Every step of rank 0 reached the charts; the bar is full.
  QCOMPARE(panel->lossPoints(), 4);
  QCOMPARE(panel->stepTimePoints(), 4);
  QCOMPARE(panel->progress()->value(), 4);
  QCOMPARE(panel->rankTable()->rowCount(), 2);
  QCOMPARE(panel->rankTable()->item(1, 2)->text(), QStringLiteral("4"));
  // A rank that did not fail has no tint (its state cell was painted black).
  for (int rank = 0; rank < 2; ++rank)
    QVERIFY(!panel->rankTable()->item(rank, 1)->data(Qt::BackgroundRole).isValid());
  const QString store = finished.front().at(1).toString();
  QVERIFY(QFileInfo::exists(store));
  QVERIFY(panel->report()->toPlainText().contains(QStringLiteral("complete")));

  // The project's history, saved with the project and read back.
  const Project& project = window_->workspace()->project();
  QCOMPARE(int(project.runs.size()), 1);
  QCOMPARE(QString::fromStdString(project.runs[0].outcome), QStringLiteral("complete"));
  QCOMPARE(QString::fromStdString(project.runs[0].store), store);
  // Named as what ran (the plan's model, scaled, on this machine's ranks),
  // with the plan it came from (it read "LLaMA-2 7B on 32 H100").
  QVERIFY2(QString::fromStdString(project.runs[0].title).contains(QStringLiteral("scaled to")) &&
               QString::fromStdString(project.runs[0].title).endsWith(QStringLiteral("on 2 ranks")),
           project.runs[0].title.c_str());
  QCOMPARE(QString::fromStdString(project.runs[0].plan),
           QString::fromStdString(project.current()->name));
  auto reread = project_from_json_text(project_to_json_text(project), "saved");
  QVERIFY(reread.ok());
  QCOMPARE(int(reread->runs.size()), 1);
  QCOMPARE(QString::fromStdString(reread->runs[0].store), store);
  QCOMPARE(panel->history()->count(), 1);

  // Reopened from the history into the run view.
  emit panel->history()->itemActivated(panel->history()->item(0));
  RunView* view = window_->runView();
  QCOMPARE(view->storePath(), store);
  QTRY_VERIFY_WITH_TIMEOUT(view->analysis() || !view->message().isEmpty(), 60000);
  QVERIFY2(view->message().isEmpty(), qPrintable(view->message()));
  QCOMPARE(int(view->analysis()->ranks.size()), 2);
  QVERIFY2(!view->header()->text().contains(QStringLiteral("the run ended")),
           qPrintable(view->header()->text()));  // complete: nothing to say

  // The panel's whole column, as it scrolls in its dock.
  QWidget* column = panel->findChild<QScrollArea*>(QStringLiteral("runs_scroll"))->widget();
  column->resize(std::max(column->width(), 440),
                 std::max(column->height(), column->sizeHint().height()));
  const QImage shot = cs::gui::test::saveScreenshot(column, QStringLiteral("runs-panel"));
  double dominant = 1;
  QVERIFY(cs::gui::test::distinctColours(shot, &dominant) > 8);
}

void TestGuiRuns::cancelledRun() {
  RunsPanel* panel = window_->runsPanel();
  panel->stepsBox()->setValue(1000000);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  QVERIFY(panel->launch().ok());
  waitForEveryRank(panel, 1);
  panel->cancel();
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
  QCOMPARE(finished.front().at(0).toString(), QStringLiteral("cancelled"));
  QVERIFY(panel->report()->toPlainText().contains(QStringLiteral("cancelled")));
  QCOMPARE(QString::fromStdString(window_->workspace()->project().runs.back().outcome),
           QStringLiteral("cancelled"));
  // What was recorded still opens.
  const QString store = finished.front().at(1).toString();
  QVERIFY(QFileInfo::exists(store));
  window_->openRun(store);
  RunView* view = window_->runView();
  QTRY_VERIFY_WITH_TIMEOUT(view->analysis() || !view->message().isEmpty(), 60000);
  QVERIFY2(view->message().isEmpty(), qPrintable(view->message()));
  QVERIFY(view->timeline()->laneCount() > 0 || view->analysis()->ranks.size() == 2);
  // The view says how it ended: a cancelled run must not read as finished.
  QVERIFY2(view->header()->text().contains(QStringLiteral("the run ended cancelled")),
           qPrintable(view->header()->text()));
}

// Cancel pressed again while ranks that do not stop have their grace (30 s)
// kills them at once, as a second Ctrl-C does to clusterscope run; it did
// nothing. The ranks are the real worker with the stop and SIGTERM ignored.
void TestGuiRuns::cancelTwiceKillsTheRanks() {
#ifndef CS_DEAF_RANK_SHIM
  QSKIP("no deaf-rank shim in this build");
#else
  const QString work = dir_.filePath(QStringLiteral("deaf"));
  const QString worker = deafWorker(work);
  QVERIFY(!worker.isEmpty());
  const QByteArray path = qgetenv("PATH");
  qputenv("PATH", work.toUtf8() + ':' + path);
  auto restore = qScopeGuard([&] {
    qputenv("PATH", path);
    killAll(worker.toUtf8() + '\0');  // none outlives the test, whatever it found
  });

  RunsPanel* panel = window_->runsPanel();
  panel->stepsBox()->setValue(1000000);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  QVERIFY(panel->launch().ok());
  waitForEveryRank(panel, 1);
  panel->cancel();
  QVERIFY2(panel->etaLabel()->text().contains(QStringLiteral("Cancel again to kill them")),
           qPrintable(panel->etaLabel()->text()));
  QTest::qWait(1500);  // told to stop; they train on
  QVERIFY(panel->running());
  QElapsedTimer since_second;
  since_second.start();
  panel->cancel();
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
  QVERIFY2(since_second.elapsed() < 15000, qPrintable(QString::number(since_second.elapsed())));
  QVERIFY(!panel->running());
  // Recorded, with what the ranks had committed.
  QCOMPARE(QString::fromStdString(window_->workspace()->project().runs.back().outcome),
           finished.front().at(0).toString());
  QVERIFY(panel->lastReport() && panel->lastReport()->killed);
#endif
}

// File > New during a run: the run is stopped and recorded in the project
// open first, or nothing changes. The run had gone on, and recorded itself
// into the new project when it ended (closing the window lost it).
void TestGuiRuns::changingProjectStopsTheRunFirst() {
  RunsPanel* panel = window_->runsPanel();
  panel->stepsBox()->setValue(1000000);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  QVERIFY(panel->launch().ok());
  waitForEveryRank(panel, 1);
  auto* new_project = window_->findChild<QAction*>(QStringLiteral("actionNew"));
  QVERIFY(new_project);
  const std::size_t runs_before = window_->workspace()->project().runs.size();
  const QString title = window_->workspace()->displayName();

  cs::gui::test::answerBoxes({QMessageBox::Cancel});  // "A run is in progress": not now
  new_project->trigger();
  QVERIFY(panel->running());
  QCOMPARE(window_->workspace()->project().runs.size(), runs_before);

  // Stop it; then keep the project, unsaved, at "Save the changes first?".
  cs::gui::test::answerBoxes({QMessageBox::Yes, QMessageBox::Cancel});
  new_project->trigger();
  QVERIFY(!panel->running());
  QCOMPARE(finished.count(), 1);
  QCOMPARE(window_->workspace()->displayName(), title);
  const Project& project = window_->workspace()->project();
  QCOMPARE(project.runs.size(), runs_before + 1);
  QCOMPARE(QString::fromStdString(project.runs.back().outcome), QStringLiteral("cancelled"));
}

void TestGuiRuns::crashedRun() {
  RunsPanel* panel = window_->runsPanel();
  // A panel as short as a laptop's dock: the report starts below the fold.
  auto* scroll = panel->findChild<QScrollArea*>(QStringLiteral("runs_scroll"));
  QVERIFY(scroll);
  scroll->setFixedHeight(200);
  auto restore = qScopeGuard([scroll] {
    scroll->setMinimumHeight(0);
    scroll->setMaximumHeight(QWIDGETSIZE_MAX);
  });
  scroll->verticalScrollBar()->setValue(0);
  panel->stepsBox()->setValue(1000000);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  QVERIFY(panel->launch().ok());
  waitForEveryRank(panel, 1);
  const std::int64_t victim = panel->ranks()[1].pid;
  QVERIFY(victim > 0);
  QCOMPARE(::kill(pid_t(victim), SIGKILL), 0);
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
  QCOMPARE(finished.front().at(0).toString(), QStringLiteral("crashed"));
  QVERIFY(panel->lastReport()->failure);
  QCOMPARE(panel->lastReport()->failure->rank, 1);
  const QString report = panel->report()->toPlainText();
  QVERIFY2(report.contains(QStringLiteral("rank 1")), qPrintable(report));
  QVERIFY2(report.contains(QStringLiteral("signal 9")), qPrintable(report));
  QCOMPARE(QString::fromStdString(window_->workspace()->project().runs.back().outcome),
           QStringLiteral("crashed"));
  // The report is brought into view: it stood below the launch settings.
  QVERIFY(panel->report()->mapTo(scroll->widget(), QPoint(0, 0)).y() > 200);
  QTRY_VERIFY_WITH_TIMEOUT(
      [&] {
        const int top = panel->report()->mapTo(scroll->widget(), QPoint(0, 0)).y();
        const int shown = scroll->verticalScrollBar()->value();
        return top >= shown && top < shown + scroll->viewport()->height();
      }(),
      5000);
  cs::gui::test::saveScreenshot(panel, QStringLiteral("runs-panel-crashed"));
}

// A Slurm job launched from the app ends by merging its ranks' stores into
// the run store its history names, as `clusterscope run --slurm` does (the
// app's job left only the rank stores). Without sbatch here, the script is
// written and the store is still to come. The job's partition, account and
// time limit are the panel's.
void TestGuiRuns::slurmJobFromTheApp() {
  RunsPanel* panel = window_->runsPanel();
  if (!QStandardPaths::findExecutable(QStringLiteral("sbatch")).isEmpty())
    QSKIP("sbatch is on PATH: the job would be submitted");
  auto field = [panel](const char* name) {
    return panel->findChild<QLineEdit*>(QString::fromLatin1(name));
  };
  QVERIFY(field("runs_slurm_partition") && !field("runs_slurm_partition")->isEnabled());
  panel->placementBox()->setCurrentIndex(
      panel->placementBox()->findData(int(launch::Placement::slurm)));
  QVERIFY(field("runs_slurm_partition")->isEnabled());
  // Automatic decides on this machine, not the job's nodes: refused, in the
  // app's words (it named clusterscope run's --backend flag).
  const int engine = panel->backendBox()->currentIndex();
  panel->backendBox()->setCurrentIndex(panel->backendBox()->findData(QStringLiteral("auto")));
  const Status automatic = panel->launch();
  QVERIFY(!automatic.ok());
  QVERIFY2(QString::fromStdString(automatic.message())
                   .contains("choose their engine, CPU or CUDA, under Engine") &&
               !QString::fromStdString(automatic.message()).contains("--"),
           automatic.message().c_str());
  panel->backendBox()->setCurrentIndex(engine);
  // A value no #SBATCH line can carry is refused before anything is written.
  field("runs_slurm_account")->setText(QStringLiteral("ml; rm -rf ~"));
  const Status refused = panel->launch();
  QVERIFY(!refused.ok());
  QVERIFY2(QString::fromStdString(refused.message()).contains("Slurm account"),
           refused.message().c_str());
  field("runs_slurm_partition")->setText(QStringLiteral("gpu"));
  field("runs_slurm_account")->setText(QStringLiteral("ml-team"));
  field("runs_slurm_time")->setText(QStringLiteral("1:00:00"));
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  const Status s = panel->launch();
  QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
  QCOMPARE(panel->lastReport()->outcome, launch::Outcome::script_only);
  QFile script(QString::fromStdString(panel->lastReport()->slurm_script));
  QVERIFY2(script.open(QIODevice::ReadOnly), qPrintable(script.fileName()));
  const QString text = QString::fromUtf8(script.readAll());
  const QString store = QString::fromStdString(window_->workspace()->project().runs.back().store);
  QVERIFY(store.endsWith(QStringLiteral(".db")));
  QVERIFY2(text.contains(QStringLiteral("run --merge-only")), qPrintable(text));
  for (const char* line :
       {"#SBATCH --partition=gpu", "#SBATCH --account=ml-team", "#SBATCH --time=1:00:00"})
    QVERIFY2(text.contains(QString::fromLatin1(line)), line);
  QVERIFY2(text.contains(store), qPrintable(text));
}

void TestGuiRuns::planTheEnginesCannotRun() {
  Workspace* ws = window_->workspace();
  // FP16 on this machine, which has no GPU: the CPU engine computes in
  // fp32 or bf16.
  Project project = tinyPlan(ws->project());
  project.current()->precision = PrecisionPlan::for_compute(Precision::fp16);
  ws->edit(QStringLiteral("fp16"), project);
  RunsPanel* panel = window_->runsPanel();
  const Status s = panel->launch();
  QVERIFY(!s.ok());
  QVERIFY2(QString::fromStdString(s.message()).contains(QStringLiteral("/precision/compute")),
           s.message().c_str());
  QVERIFY(!panel->running());
  QVERIFY(panel->report()->toPlainText().contains(QStringLiteral("not started")));
}

// CPU-engine ranks on this machine past its cores are said before the
// launch (32 ranks on 2 cores started with no word): more than the cores, a
// warning; more than `clusterscope run` starts, its refusal, which the
// launch then gives too. Counted from this machine's cores.
void TestGuiRuns::ranksPastTheCoresWarnedBeforeLaunch_data() {
  QTest::addColumn<int>("per_core_times_2");  // ranks per core, times 2
  QTest::addColumn<int>("extra");             // ranks beyond those
  QTest::addColumn<QString>("backend");
  QTest::addColumn<int>("placement");
  QTest::addColumn<QString>("says");  // "": nothing; else how the line starts
  const int local = int(launch::Placement::local);
  QTest::addRow("a core each") << 2 << 0 << "cpu" << local << "";
  QTest::addRow("two a core") << 4 << 0 << "cpu" << local << "Warning: ";
  QTest::addRow("as many as start")
      << 2 * launch::kMaxRanksPerCore << 0 << "cpu" << local << "Warning: ";
  QTest::addRow("one past them") << 2 * launch::kMaxRanksPerCore << 1 << "cpu" << local
                                 << "This plan will not start here: ";
  QTest::addRow("the CUDA engine") << 4 << 0 << "cuda" << local << "";
  QTest::addRow("hosts of a hostfile") << 4 << 0 << "cpu" << int(launch::Placement::hostfile) << "";
}

void TestGuiRuns::ranksPastTheCoresWarnedBeforeLaunch() {
  QFETCH(int, per_core_times_2);
  QFETCH(int, extra);
  QFETCH(QString, backend);
  QFETCH(int, placement);
  QFETCH(QString, says);
  const int cores = launch::local_capacity().cores;
  const int ranks = cores * per_core_times_2 / 2 + extra;
  RunsPanel* panel = window_->runsPanel();
  QLabel* line = panel->ranksWarning();
  QVERIFY(line->isHidden());  // two ranks of the tiny plan: a core each, or nothing to say
  panel->backendBox()->setCurrentIndex(panel->backendBox()->findData(backend));
  panel->placementBox()->setCurrentIndex(panel->placementBox()->findData(placement));
  Workspace* ws = window_->workspace();
  Project more = ws->project();
  more.current()->parallel.dp = ranks;
  more.current()->parallel.global_batch = ranks;
  ws->edit(QStringLiteral("more ranks"), more);
  if (says.isEmpty()) {
    QVERIFY2(line->isHidden(), qPrintable(line->text()));
    return;
  }
  QVERIFY(!line->isHidden());
  QVERIFY2(line->text().startsWith(says), qPrintable(line->text()));
  // Named: the ranks and the cores, in the CLI's words.
  const QString counted = QStringLiteral("%1 ranks of the CPU engine on this machine's %2 %3")
                              .arg(ranks)
                              .arg(cores)
                              .arg(cores == 1 ? QStringLiteral("core") : QStringLiteral("cores"));
  QVERIFY2(line->text().contains(counted), qPrintable(line->text()));
  auto plan = ws->project().resolved_plan();
  QVERIFY(plan.ok());
  const Status refused = launch::check_local_cpu_ranks(plan.value(), "cpu");
  if (extra == 0) {
    QVERIFY(refused.ok());
    QVERIFY2(line->text().contains(QStringLiteral("take turns on the cores")),
             qPrintable(line->text()));
    return;
  }
  QVERIFY(!refused.ok());
  QCOMPARE(line->text(), says + QString::fromStdString(refused.message()));
  // The launch refuses as the line said, and starts nothing.
  const Status s = panel->launch();
  QVERIFY(!s.ok());
  QCOMPARE(QString::fromStdString(s.message()), QString::fromStdString(refused.message()));
  QVERIFY(!panel->running());
}

// `clusterscope profile` from the panel. Without a GPU nothing is traced, and
// the panel says what the CLI says; with one, the store is recorded and opens.
void TestGuiRuns::profileACommand() {
  RunsPanel* panel = window_->runsPanel();
  QVERIFY(!panel->profileCommand({}).ok());
  const std::size_t runs_before = window_->workspace()->project().runs.size();
  QSignalSpy finished(panel, &RunsPanel::profileFinished);
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/true")}).ok());
  QVERIFY(panel->profiling());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
  QVERIFY(!panel->profiling());
  const QString store = finished.front().at(0).toString();
  const QString output = finished.front().at(1).toString();
  if (store.isEmpty()) {
    // /bin/true starts no CUDA process: the CLI's own message, no history entry.
    QVERIFY2(output.contains(QStringLiteral("no CUDA process was traced")), qPrintable(output));
    QVERIFY(panel->report()->toPlainText().contains(QStringLiteral("wrote no run store")));
    QCOMPARE(window_->workspace()->project().runs.size(), runs_before);
  } else {
    QVERIFY(QFileInfo::exists(store));
    QCOMPARE(window_->workspace()->project().runs.size(), runs_before + 1);
  }

  // Only between cudaProfilerStart and Stop: the command runs under the
  // CLI's --capture-range cudaProfilerApi, which the injection reads.
  auto* range = panel->findChild<QCheckBox*>(QStringLiteral("runs_profile_capture_range"));
  QVERIFY(range);
  range->setChecked(true);
  auto unchecked = qScopeGuard([&] { range->setChecked(false); });
  QVERIFY(panel
              ->profileCommand({QStringLiteral("/bin/sh"), QStringLiteral("-c"),
                                QStringLiteral("echo \"range=$CLUSTERSCOPE_CAPTURE_RANGE\"")})
              .ok());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
  const QString ranged = finished.back().at(1).toString();
  QVERIFY2(ranged.contains(QStringLiteral("range=cudaProfilerApi")), qPrintable(ranged));
  range->setChecked(false);

  // Predict with the current plan: the plan is written beside the store and
  // its prediction goes into it (a process's store made by copying one).
  QTemporaryDir dir;
  const QString made = dir.filePath(QStringLiteral("made.db"));
  QVERIFY(QFile::copy(QStringLiteral(CS_DATA_DIR "/cpu/cpu-engine-dp2.db"), made));
  auto* predict = panel->findChild<QCheckBox*>(QStringLiteral("runs_profile_plan"));
  QVERIFY(predict);
  predict->setChecked(true);
  auto unpredicted = qScopeGuard([&] { predict->setChecked(false); });
  QVERIFY(panel
              ->profileCommand({QStringLiteral("/bin/sh"), QStringLiteral("-c"),
                                QStringLiteral("cp \"%1\" \"$CLUSTERSCOPE_PROFILE_DIR/"
                                               "rank0-pid1.db\"")
                                    .arg(made)})
              .ok());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 60000);
  const QString predicted_store = finished.back().at(0).toString();
  QVERIFY2(!predicted_store.isEmpty(), qPrintable(finished.back().at(1).toString()));
  QString plan_file = predicted_store;
  plan_file.replace(QStringLiteral(".db"), QStringLiteral(".plan.json"));
  QVERIFY(QFile::exists(plan_file));
  auto reader = cs::trace::TraceReader::open(predicted_store.toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  QVERIFY((*reader)->meta("predicted_step"));
}

// Predicted with the current plan, a profile that writes no run store (no
// CUDA process traced) leaves no plan behind: the plan beside the store,
// written before the command runs, was left at every such try.
void TestGuiRuns::profilingThatWritesNoStoreLeavesNoPlan() {
  RunsPanel* panel = window_->runsPanel();
  const QString folder = dir_.filePath(QStringLiteral("profile-no-store"));
  panel->folderField()->setText(folder);
  auto* predict = panel->findChild<QCheckBox*>(QStringLiteral("runs_profile_plan"));
  QVERIFY(predict);
  predict->setChecked(true);
  QSignalSpy finished(panel, &RunsPanel::profileFinished);
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/true")}).ok());
  // Written before the command runs, for clusterscope profile --plan.
  QCOMPARE(QDir(folder).entryList({QStringLiteral("*.plan.json")}, QDir::Files).size(), 1);
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
  QVERIFY2(finished.front().at(0).toString().isEmpty(),
           qPrintable(finished.front().at(1).toString()));
  QVERIFY2(finished.front().at(1).toString().contains(QStringLiteral("the planner predicts")),
           qPrintable(finished.front().at(1).toString()));
  QCOMPARE(QDir(folder).entryList(QDir::AllEntries | QDir::NoDotAndDotDot), QStringList{});
}

// A clusterscope that cannot start (CLUSTERSCOPE_CLI naming a file that is
// missing or not executable) ends the attempt with an error naming it and
// why, the plan written for it removed: Qt reports no finished then, and the
// panel stayed busy for good, Profile off.
void TestGuiRuns::profilerThatCannotStart_data() {
  QTest::addColumn<bool>("exists");
  QTest::addRow("missing") << false;
  QTest::addRow("not executable") << true;
}

void TestGuiRuns::profilerThatCannotStart() {
  QFETCH(bool, exists);
  QTemporaryDir dir;
  const QString program = dir.filePath(QStringLiteral("clusterscope"));
  if (exists) {
    QFile file(program);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("#!/bin/sh\n");
    file.close();
    QVERIFY(file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner));
  }
  qputenv("CLUSTERSCOPE_CLI", program.toUtf8());
  auto unset = qScopeGuard([] { qunsetenv("CLUSTERSCOPE_CLI"); });
  RunsPanel* panel = window_->runsPanel();
  const QString folder = dir.filePath(QStringLiteral("runs"));
  panel->folderField()->setText(folder);
  auto* predict = panel->findChild<QCheckBox*>(QStringLiteral("runs_profile_plan"));
  QVERIFY(predict);
  predict->setChecked(true);
  auto unpredicted = qScopeGuard([&] { predict->setChecked(false); });
  auto* profile = panel->findChild<QPushButton*>(QStringLiteral("runs_profile"));
  QVERIFY(profile);
  QSignalSpy finished(panel, &RunsPanel::profileFinished);
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/true")}).ok());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
  QVERIFY(!panel->profiling());
  QVERIFY(profile->isEnabled());
  QVERIFY(finished.front().at(0).toString().isEmpty());
  const QString message = finished.front().at(1).toString();
  QVERIFY2(message.contains(program + QStringLiteral(" could not be started")),
           qPrintable(message));
  const QString report = panel->report()->toPlainText();
  QVERIFY2(report.contains(program) && report.contains(QStringLiteral("Nothing was profiled")),
           qPrintable(report));
  QCOMPARE(QDir(folder).entryList({QStringLiteral("*.plan.json")}, QDir::Files), QStringList{});
  // The panel profiles again.
  qunsetenv("CLUSTERSCOPE_CLI");
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/true")}).ok());
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
}

// A profiled command that does not end is stopped from the panel: Cancel is
// on while it runs, and clusterscope profile passes the stop on to it.
void TestGuiRuns::cancelAProfiledCommand() {
  RunsPanel* panel = window_->runsPanel();
  auto* cancel = panel->findChild<QPushButton*>(QStringLiteral("runs_cancel"));
  QVERIFY(cancel);
  QVERIFY(!cancel->isEnabled());
  QSignalSpy finished(panel, &RunsPanel::profileFinished);
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/sleep"), QStringLiteral("600")}).ok());
  QVERIFY(cancel->isEnabled());
  QTest::qWait(500);  // under way
  cancel->click();
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
  QVERIFY(!panel->profiling());
  QVERIFY(!cancel->isEnabled());
  const QString output = finished.front().at(1).toString();
  QVERIFY2(output.contains(QStringLiteral("SIGTERM")), qPrintable(output));
}

// A run and a profiled command at once: the command ending leaves Cancel on
// for the run (it went off, and the run could not be stopped from the
// panel), and the run ending leaves it on for a command still going.
void TestGuiRuns::profiledCommandEndingKeepsTheRunsCancel() {
  RunsPanel* panel = window_->runsPanel();
  auto* cancel = panel->findChild<QPushButton*>(QStringLiteral("runs_cancel"));
  QVERIFY(cancel);
  panel->stepsBox()->setValue(1000000);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  QSignalSpy profiled(panel, &RunsPanel::profileFinished);
  QVERIFY(panel->launch().ok());
  waitForEveryRank(panel, 1);
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/true")}).ok());
  QTRY_COMPARE_WITH_TIMEOUT(profiled.count(), 1, 60000);
  QVERIFY(panel->running());
  QVERIFY(cancel->isEnabled());
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/sleep"), QStringLiteral("600")}).ok());
  cancel->click();  // both stop
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
  QCOMPARE(finished.front().at(0).toString(), QStringLiteral("cancelled"));
  QTRY_COMPARE_WITH_TIMEOUT(profiled.count(), 2, 30000);
  QVERIFY(!cancel->isEnabled());
}

// The window closed while a command is profiled asks first, as it does for
// a run, and stops the command; the window destroyed outright stops it too.
// It was left running (clusterscope profile was killed at once, with no
// chance to pass the stop on), and nothing asked.
void TestGuiRuns::closingTheWindowStopsAProfiledCommand_data() {
  QTest::addColumn<int>("answer");  // the question's answer; 0: destroyed, no question
  QTest::addRow("asked, kept") << int(QMessageBox::Cancel);
  QTest::addRow("asked, stopped") << int(QMessageBox::Yes);
  QTest::addRow("destroyed") << 0;
}

void TestGuiRuns::closingTheWindowStopsAProfiledCommand() {
  QFETCH(int, answer);
  RunsPanel* panel = window_->runsPanel();
  // A duration of its own, so that no other sleep is counted.
  static int row = 0;
  const QString seconds = QString::number(611 + row++);
  std::string cmdline = "/bin/sleep";
  cmdline += '\0' + seconds.toStdString() + '\0';
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/sleep"), seconds}).ok());
  QTRY_COMPARE_WITH_TIMEOUT(processesRunning(cmdline), 1, 30000);
  if (answer == 0) {
    window_.reset();
  } else {
    window_->show();
    if (answer == QMessageBox::Yes) {
      // Then "Save the changes first?" of the edited project.
      cs::gui::test::answerBoxes({QMessageBox::Yes, QMessageBox::Discard});
    } else {
      cs::gui::test::answerBoxes({QMessageBox::Cancel});
    }
    const bool closed = window_->close();
    QCOMPARE(closed, answer == QMessageBox::Yes);
    QCOMPARE(panel->profiling(), answer != QMessageBox::Yes);
  }
  if (answer == QMessageBox::Cancel) {
    QCOMPARE(processesRunning(cmdline), 1);
    panel->cancel();
    QTRY_VERIFY_WITH_TIMEOUT(!panel->profiling(), 30000);
  }
  QTRY_COMPARE_WITH_TIMEOUT(processesRunning(cmdline), 0, 15000);
}

// The app closed (the window destroyed) during a run whose ranks ignore the
// stop and SIGTERM: it waited for their whole grace (30 s, then 10 s for
// SIGTERM). Now the ranks get a moment, then are killed; what they had
// committed is merged into the run store, and none is left running.
void TestGuiRuns::closingEndsARunWhoseRanksDoNotStop() {
#ifndef CS_DEAF_RANK_SHIM
  QSKIP("no deaf-rank shim in this build");
#else
  const QString work = dir_.filePath(QStringLiteral("deaf-close"));
  const QString worker = deafWorker(work);
  QVERIFY(!worker.isEmpty());
  const QByteArray path = qgetenv("PATH");
  qputenv("PATH", work.toUtf8() + ':' + path);
  auto restore = qScopeGuard([&] {
    qputenv("PATH", path);
    killAll(worker.toUtf8() + '\0');
  });
  RunsPanel* panel = window_->runsPanel();
  panel->stepsBox()->setValue(1000000);
  QSignalSpy started(panel, &RunsPanel::runStarted);
  QVERIFY(panel->launch().ok());
  QCOMPARE(started.count(), 1);
  const QString store = started.front().at(0).toString();
  waitForEveryRank(panel, 1);
  QTest::qWait(1000);  // a rank commits its store every half second
  QElapsedTimer closing;
  closing.start();
  window_.reset();
  QVERIFY2(closing.elapsed() < 20000, qPrintable(QString::number(closing.elapsed())));
  QCOMPARE(killAll(worker.toUtf8() + '\0'), 0);
  auto reader = trace::TraceReader::open(store.toStdString());
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  QCOMPARE(int((*reader)->ranks().size()), 2);
  QVERIFY(!(*reader)->steps(0).value().empty());
#endif
}

// The same for a profiled command that ignores SIGTERM: the close waited
// 10 s, then killed clusterscope profile alone and left the command running.
// And for a process of the command that left its process group (setsid) and
// ignores SIGTERM: the kill of the group missed it, and it ran on.
void TestGuiRuns::closingEndsAProfiledCommandThatIgnoresTheStop_data() {
  QTest::addColumn<QString>("script");
  QTest::addColumn<QString>("seconds");  // of its sleep, a duration of its own
  QTest::addRow("the command") << "trap '' TERM; exec /bin/sleep 647"
                               << "647";
  QTest::addRow("a process that left its group")
      << "setsid /bin/sh -c \"trap '' TERM; exec /bin/sleep 648\" & wait"
      << "648";
}

void TestGuiRuns::closingEndsAProfiledCommandThatIgnoresTheStop() {
  QFETCH(QString, script);
  QFETCH(QString, seconds);
  RunsPanel* panel = window_->runsPanel();
  const std::string cmdline = std::string("/bin/sleep") + '\0' + seconds.toStdString() + '\0';
  auto restore = qScopeGuard([&] { killAll(QByteArray::fromStdString(cmdline)); });
  QVERIFY(panel->profileCommand({QStringLiteral("/bin/sh"), QStringLiteral("-c"), script}).ok());
  QTRY_COMPARE_WITH_TIMEOUT(processesRunning(cmdline), 1, 30000);
  QElapsedTimer closing;
  closing.start();
  window_.reset();
  QVERIFY2(closing.elapsed() < 9000, qPrintable(QString::number(closing.elapsed())));
  QTRY_COMPARE_WITH_TIMEOUT(processesRunning(cmdline), 0, 5000);
}

// The run's last events, queued after the poll took its events and before
// it asked whether the run had finished, were never shown: the charts and
// the bar stopped short of the run's end. Here the GUI thread is held while
// it handles the first event until the run has ended, so that the run ends
// in that window; every step still reaches the charts.
void TestGuiRuns::finishTakesTheRunsLastEvents() {
  RunsPanel* panel = window_->runsPanel();
  const int steps = 200;
  panel->stepsBox()->setValue(steps);
  QSignalSpy started(panel, &RunsPanel::runStarted);
  QSignalSpy finished(panel, &RunsPanel::runFinished);
  QVERIFY(panel->launch().ok());
  const QString store = started.front().at(0).toString();
  const QString ranks = store.chopped(3) + QStringLiteral(".ranks");
  QVERIFY(QDir(ranks).exists());
  bool held = false;
  // The rank stores' folder goes just before the run says it has ended.
  const auto hold = connect(panel->report(), &QTextEdit::textChanged, this, [&] {
    if (held) return;
    held = true;
    QElapsedTimer waited;
    waited.start();
    while (QDir(ranks).exists() && waited.elapsed() < 120000)
      QThread::msleep(20);
    QThread::msleep(500);
  });
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 180000);
  disconnect(hold);
  QVERIFY(held);
  QCOMPARE(finished.front().at(0).toString(), QStringLiteral("complete"));
  QCOMPARE(panel->lossPoints(), steps);
  QCOMPARE(panel->progress()->value(), steps);
  QCOMPARE(panel->rankTable()->item(1, 2)->text(), QString::number(steps));
}

QTEST_MAIN(TestGuiRuns)
#include "tst_gui_runs.moc"
