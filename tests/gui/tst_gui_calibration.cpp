// The app's calibration panel driven offscreen: a real short calibration of
// this machine on the CPU engine through the worker, its fits in the table
// and its presets saved in a temporary folder; and the user's errors.

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSet>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "app/gui/calibration_panel.h"
#include "app/gui/cluster_designer.h"
#include "app/gui/main_window.h"
#include "app/gui/workspace.h"
#include "tests/gui/gui_test_support.h"
#include "tests/process_run.h"

class TestGuiCalibration : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void badRankCounts_data();
  void badRankCounts();
  void calibratesThisMachine();
  void cancelTwiceKillsTheRanks();
  void progressMovesWithinAPhase();
  void presetsFolderNotWritableIsRefusedFirst();
  void eachCalibrationKeepsItsStore();
  void cancelDuringTheReferenceRunsKeepsTheSweeps();
  void learnsFromRuns();
  void mainWindowOpensThePanel();
  void calibratedPresetsAreOfferedAtOnce();
  void presetsSavedOutsideTheAppAreOffered();
  void closingTheWindowAsksFirst();
  void mainWindowLearnsFromTheOpenRun();
  void gpuRunsRefineThePlansCluster_data();
  void gpuRunsRefineThePlansCluster();

 private:
  QTemporaryDir dir_;
};

void TestGuiCalibration::initTestCase() {
  // The worker is found on the PATH (the test binary is not beside it).
  qputenv("PATH", QByteArray(CS_BIN_DIR) + ":" + qgetenv("PATH"));
  qputenv("CLUSTERSCOPE_USER_PRESETS", dir_.filePath("presets").toUtf8());
  QDir().mkpath(dir_.filePath("presets"));
}

void TestGuiCalibration::badRankCounts_data() {
  QTest::addColumn<QString>("ranks");
  QTest::addColumn<QString>("error");
  QTest::addRow("a word") << "1, two"
                          << "\"two\" is not a positive whole number";
  QTest::addRow("zero") << "0"
                        << "\"0\" is not a positive whole number";
  QTest::addRow("empty") << " , "
                         << "give at least one";
}

void TestGuiCalibration::badRankCounts() {
  QFETCH(QString, ranks);
  QFETCH(QString, error);
  cs::gui::CalibrationPanel panel;
  QSignalSpy failed(&panel, &cs::gui::CalibrationPanel::failed);
  panel.rankCounts()->setText(ranks);
  panel.startButton()->click();
  QVERIFY(!panel.running());
  QCOMPARE(failed.count(), 1);
  QVERIFY2(panel.statusLabel()->text().contains(error), qPrintable(panel.statusLabel()->text()));
}

void TestGuiCalibration::calibratesThisMachine() {
  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(dir_.filePath("presets"));
  panel.setStorePath(dir_.filePath("calibration.db"));
  QSignalSpy done(&panel, &cs::gui::CalibrationPanel::calibrated);
  QSignalSpy failed(&panel, &cs::gui::CalibrationPanel::failed);
  panel.rankCounts()->setText(QStringLiteral("1, 2"));
  panel.secondsPerSize()->setValue(0.02);
  panel.startButton()->click();
  QVERIFY(panel.running());
  QVERIFY(!panel.startButton()->isEnabled());
  QVERIFY(panel.cancelButton()->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 240000);
  QVERIFY2(failed.isEmpty(), qPrintable(panel.statusLabel()->text()));
  QCOMPARE(done.count(), 1);
  const QString file = done.first().at(0).toString();
  const QStringList clusters = done.first().at(1).toStringList();
  QCOMPARE(clusters.size(), 2);
  QVERIFY(clusters[1].endsWith(QStringLiteral("-cpu2")));
  QVERIFY(file.startsWith(dir_.filePath("presets")));
  QVERIFY(QFile::exists(file));
  QVERIFY(QFile::exists(dir_.filePath("calibration.db")));
  // A row per fitted quantity, the 2-rank link among them, warm and with
  // the caches cold.
  QVERIFY(panel.fitTable()->rowCount() > 5);
  // As clusterscope calibrate lists them: the GEMM ramp, and for each rank
  // count the timing of an op its ranks measured.
  bool link = false, cold_link = false;
  QSet<QString> ramps, timings, updates;
  for (int r = 0; r < panel.fitTable()->rowCount(); ++r) {
    const QString ranks = panel.fitTable()->item(r, 0)->text();
    const QString quantity = panel.fitTable()->item(r, 1)->text();
    link |= quantity.startsWith(QStringLiteral("link"));
    cold_link |= quantity.startsWith(QStringLiteral("caches cold: link"));
    if (quantity == QStringLiteral("GEMM ramp")) ramps << ranks;
    // The planner takes the optimizer's passes by parameter count: so does the row.
    if (quantity == QStringLiteral("optimizer:adamw")) {
      updates << ranks;
      QVERIFY2(panel.fitTable()->item(r, 3)->text().startsWith(QStringLiteral("by parameter count: ")),
               qPrintable(panel.fitTable()->item(r, 3)->text()));
    }
    if (quantity == QStringLiteral("timing of an op")) {
      timings << ranks;
      QVERIFY(panel.fitTable()->item(r, 2)->text().endsWith(QStringLiteral("s")));
    }
  }
  QVERIFY2(link, qPrintable(panel.statusLabel()->text()));
  QVERIFY2(cold_link, qPrintable(panel.statusLabel()->text()));
  QCOMPARE(ramps, (QSet<QString>{QStringLiteral("1"), QStringLiteral("2")}));
  QCOMPARE(timings, (QSet<QString>{QStringLiteral("1"), QStringLiteral("2")}));
  QCOMPARE(updates, (QSet<QString>{QStringLiteral("1"), QStringLiteral("2")}));
  // Then the reference model trained on 1 rank (micro-batches of 2 and
  // 1), and on 2 as dp 2 and as tp 2: each run's step measured against
  // both predictions, its store kept, and what the runs showed listed apart.
  QVERIFY(panel.referenceRuns()->isChecked());
  const QString status = panel.statusLabel()->text();
  QCOMPARE(status.count(QStringLiteral("Reference run ")), 4);
  QVERIFY2(status.contains(QStringLiteral("Reference run dp 1 x tp 2, micro-batch 1: ")),
           qPrintable(status));
  for (const char* store :
       {"calibration.reference-1r-dp1-tp1-mb2.db", "calibration.reference-1r-dp1-tp1-mb1.db",
        "calibration.reference-2r-dp2-tp1-mb2.db", "calibration.reference-2r-dp1-tp2-mb1.db"}) {
    QVERIFY2(QFile::exists(dir_.filePath(QString::fromLatin1(store))), store);
  }
  bool learnt = false;
  for (int r = 0; r < panel.fitTable()->rowCount(); ++r)
    learnt |= panel.fitTable()->item(r, 1)->text().startsWith(QStringLiteral("reference runs: "));
  // Unless the machine probe found a busy machine before every run (ctest
  // runs two tests at once), and the status says so.
  QVERIFY2(learnt || status.contains(QStringLiteral("not learnt from")), qPrintable(status));
  QVERIFY(panel.startButton()->isEnabled());
  // Each fit's quality in view without scrolling across, in a window as
  // small as the calibration dialog was: the list of message sizes widened
  // its column, and the quality column went past the window's edge.
  panel.resize(720, 520);
  panel.show();
  QTableWidget* table = panel.fitTable();
  QTRY_COMPARE(table->horizontalScrollBar()->maximum(), 0);
  QVERIFY2(table->columnViewportPosition(3) + 100 <= table->viewport()->width(),
           qPrintable(QString::number(table->columnViewportPosition(3))));
  // And the table keeps the window: the status's lines (the stores, the
  // reference runs, a note for each fit off its points) scroll past a few
  // lines. They took the window's height and left the table a row.
  const int line = panel.fontMetrics().lineSpacing();
  QVERIFY2(panel.statusLabel()->visibleRegion().boundingRect().height() <= 7 * line,
           qPrintable(status));
  QVERIFY(panel.statusLabel()->height() > 7 * line);  // the whole of it, to scroll through
  QVERIFY(table->viewport()->height() >= 8 * line);
  cs::gui::test::saveScreenshot(&panel, QStringLiteral("calibration-fits"));
}

// "Learn from runs": a real 2-rank run, then the panel refines the
// calibrated 2-rank cluster from it and shows what the run measured.
// Cancel stops the sweep (every rank closes its store); a second click
// while they close kills them, as a second Ctrl-C does in the CLI. Either
// way the calibration fails saying so and leaves no store.
void TestGuiCalibration::cancelTwiceKillsTheRanks() {
  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(dir_.filePath("presets-cancelled"));
  panel.setStorePath(dir_.filePath("cancelled.db"));
  QSignalSpy failed(&panel, &cs::gui::CalibrationPanel::failed);
  panel.rankCounts()->setText(QStringLiteral("1"));
  panel.secondsPerSize()->setValue(10);
  panel.startButton()->click();
  QVERIFY(panel.running());
  QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(dir_.filePath("cancelled.phase0.ranks/rank0.db")), 60000);
  panel.cancelButton()->click();
  QVERIFY2(panel.statusLabel()->text().contains(QStringLiteral("Cancel again to kill the ranks")),
           qPrintable(panel.statusLabel()->text()));
  panel.cancelButton()->click();
  QCOMPARE(panel.statusLabel()->text(), QStringLiteral("Killing the ranks..."));
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
  QCOMPARE(failed.count(), 1);
  const QString message = failed.first().at(0).toString();
  QVERIFY2(message.contains(QStringLiteral("calibration cancelled during phase 1 of")),
           qPrintable(message));
  QVERIFY(!QFile::exists(dir_.filePath("cancelled.db")));
  QVERIFY(!QDir(dir_.filePath("cancelled.phase0.ranks")).exists());
}

// The bar moves while a phase measures, a step per point its ranks
// measured, and the status says which: it stood still from one phase to the
// next, however long a phase took. One phase here, of 20 s of GEMMs (ten
// sizes at 2 s), its first points after about 1 s: the bar is seen past 0
// and short of its end whatever the load, then the sweep is stopped.
void TestGuiCalibration::progressMovesWithinAPhase() {
  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(dir_.filePath("presets-progress"));
  panel.setStorePath(dir_.filePath("progress.db"));
  panel.rankCounts()->setText(QStringLiteral("1"));
  panel.secondsPerSize()->setValue(2);
  panel.referenceRuns()->setChecked(false);
  auto* bar = panel.findChild<QProgressBar*>();
  QVERIFY(bar);
  panel.startButton()->click();
  QVERIFY(panel.running());
  QTRY_VERIFY_WITH_TIMEOUT(bar->value() > bar->minimum(), 60000);
  QVERIFY2(bar->value() < bar->maximum(), qPrintable(QString::number(bar->value())));
  const QString status = panel.statusLabel()->text();
  QVERIFY2(status.startsWith(QStringLiteral("phase 1/1: 1 rank, GEMMs in fp32: ")),
           qPrintable(status));
  QVERIFY2(QRegularExpression(QStringLiteral(R"( \(\d+ of \d+\)$)")).match(status).hasMatch(),
           qPrintable(status));
  panel.cancelButton()->click();
  panel.cancelButton()->click();
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
}

// A presets folder that cannot be written is refused before the sweeps,
// as `clusterscope calibrate` refuses it: the app measured for minutes
// (here 10 s a GEMM size) and only then failed to save. (A folder under a
// file: root writes into any folder.)
void TestGuiCalibration::presetsFolderNotWritableIsRefusedFirst() {
  QFile file(dir_.filePath("a-file"));
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.close();
  const QString presets = dir_.filePath("a-file/presets");
  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(presets);
  panel.setStorePath(dir_.filePath("unsaved.db"));
  QSignalSpy failed(&panel, &cs::gui::CalibrationPanel::failed);
  panel.rankCounts()->setText(QStringLiteral("1"));
  panel.secondsPerSize()->setValue(10);
  panel.referenceRuns()->setChecked(false);
  panel.startButton()->click();
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 20000);
  QCOMPARE(failed.count(), 1);
  const QString message = failed.first().at(0).toString();
  QVERIFY2(message.startsWith(presets + QStringLiteral(": the calibrated presets cannot be "
                                                       "saved there (Not a directory)")),
           qPrintable(message));
  QVERIFY2(message.contains(QStringLiteral("nothing was measured")), qPrintable(message));
  QCOMPARE(panel.statusLabel()->text(), message);
  QVERIFY(!QFile::exists(dir_.filePath("unsaved.db")));
  QVERIFY(!QDir(dir_.filePath("unsaved.phase0.ranks")).exists());
  QVERIFY(panel.startButton()->isEnabled());
}

// The store left to the panel is named for its time: two calibrations keep
// two stores. One name for all wrote each calibration over the last.
void TestGuiCalibration::eachCalibrationKeepsItsStore() {
  const QString root = dir_.filePath("stores");
  QVERIFY(QDir().mkpath(root + QStringLiteral("/presets")));
  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(root + QStringLiteral("/presets"));
  panel.rankCounts()->setText(QStringLiteral("1"));
  panel.secondsPerSize()->setValue(0.01);
  panel.referenceRuns()->setChecked(false);
  QSignalSpy done(&panel, &cs::gui::CalibrationPanel::calibrated);
  QStringList said;
  for (int i = 0; i < 2; ++i) {
    if (i > 0) QTest::qWait(1100);  // names to the second
    panel.startButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 240000);
    QVERIFY2(done.count() == i + 1, qPrintable(panel.statusLabel()->text()));
    said << panel.statusLabel()->text();
  }
  const QStringList stores =
      QDir(root).entryList({QStringLiteral("calibration-*.db")}, QDir::Files, QDir::Name);
  QCOMPARE(stores.size(), 2);
  for (int i = 0; i < 2; ++i) {  // each named where the panel says it is
    QVERIFY2(said[i].contains(QStringLiteral("the calibration store is ") +
                              QDir(root).filePath(stores[i])),
             qPrintable(said[i]));
  }
}

// Cancel once the sweeps are done, during the reference runs: nothing is
// saved, and the error says how to keep the sweeps' minutes of work (it
// named their store, and left the user to guess what it was good for).
void TestGuiCalibration::cancelDuringTheReferenceRunsKeepsTheSweeps() {
  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(dir_.filePath("presets-reference-cancelled"));
  panel.setStorePath(dir_.filePath("reference-cancelled.db"));
  QSignalSpy failed(&panel, &cs::gui::CalibrationPanel::failed);
  QSignalSpy done(&panel, &cs::gui::CalibrationPanel::calibrated);
  panel.rankCounts()->setText(QStringLiteral("1"));
  panel.secondsPerSize()->setValue(0.02);
  QVERIFY(panel.referenceRuns()->isChecked());
  panel.startButton()->click();
  QTRY_VERIFY_WITH_TIMEOUT(
      panel.statusLabel()->text().contains(QStringLiteral("reference run")) || !panel.running(),
      120000);
  panel.cancelButton()->click();
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
  QCOMPARE(done.count(), 0);
  QCOMPARE(failed.count(), 1);
  const QString message = failed.first().at(0).toString();
  QVERIFY2(message.contains(QStringLiteral("cancelled during the reference runs")),
           qPrintable(message));
  QVERIFY2(message.contains(QStringLiteral("clusterscope calibrate --from-store ") +
                            dir_.filePath("reference-cancelled.db")),
           qPrintable(message));
  QVERIFY(QFile::exists(dir_.filePath("reference-cancelled.db")));
  // The cancelled reference run left nothing: its store, its ranks' stores
  // and its plan stayed beside the calibration's store before.
  const QStringList left = QDir(dir_.path())
                               .entryList({QStringLiteral("reference-cancelled.reference-*")},
                                          QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden);
  QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
  QVERIFY(!QDir(dir_.filePath("presets-reference-cancelled")).exists() ||
          QDir(dir_.filePath("presets-reference-cancelled")).isEmpty());

  // Learn from runs given that store fits and saves its sweeps, as
  // clusterscope calibrate --from-store does: the app refused it ("fit it
  // with --from-store"), and had no other way to use it.
  QVERIFY2(message.contains(QStringLiteral("Learn from runs")), qPrintable(message));
  panel.learnFrom({dir_.filePath("reference-cancelled.db")});
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
  QVERIFY2(failed.count() == 1, qPrintable(panel.statusLabel()->text()));
  QCOMPARE(done.count(), 1);
  const QString status = panel.statusLabel()->text();
  QVERIFY2(status.contains(QStringLiteral("Fitted the calibration store ") +
                           dir_.filePath("reference-cancelled.db")),
           qPrintable(status));
  const QString file = done.first().at(0).toString();
  QVERIFY2(file.startsWith(dir_.filePath("presets-reference-cancelled")), qPrintable(file));
  QVERIFY(QFile::exists(file));
  const QStringList clusters = done.first().at(1).toStringList();
  QCOMPARE(clusters.size(), 1);
  QVERIFY(clusters[0].endsWith(QStringLiteral("-cpu1")));
  bool gemm = false;
  for (int r = 0; r < panel.fitTable()->rowCount(); ++r)
    gemm |= panel.fitTable()->item(r, 1)->text() == QStringLiteral("fp32 GEMM");
  QVERIFY(gemm);
}

void TestGuiCalibration::learnsFromRuns() {
  QProcess run;
  run.setProcessChannelMode(QProcess::MergedChannels);
  run.start(QStringLiteral(CS_BIN_DIR "/clusterscope"),
            {"run", "--dp", "2", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32",
             "--vocab", "256", "--ffn", "256", "--steps", "3", "--out", dir_.filePath("run.db")});
  QVERIFY(run.waitForFinished(240000));
  QVERIFY2(run.exitCode() == 0, run.readAll().constData());

  cs::gui::CalibrationPanel panel;
  panel.setPresetsDir(dir_.filePath("presets"));
  QSignalSpy done(&panel, &cs::gui::CalibrationPanel::calibrated);
  QSignalSpy failed(&panel, &cs::gui::CalibrationPanel::failed);
  panel.learnFrom({dir_.filePath("run.db")});
  QVERIFY(panel.running());
  QVERIFY(!panel.learnButton()->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
  QVERIFY2(failed.isEmpty(), qPrintable(panel.statusLabel()->text()));
  QCOMPARE(done.count(), 1);
  const QStringList clusters = done.first().at(1).toStringList();
  QCOMPARE(clusters.size(), 1);
  QVERIFY(clusters[0].endsWith(QStringLiteral("-cpu2")));
  QVERIFY2(panel.statusLabel()->text().contains(QStringLiteral("from run.db")),
           qPrintable(panel.statusLabel()->text()));
  QVERIFY(panel.fitTable()->rowCount() > 0);
  QCOMPARE(panel.fitTable()->item(0, 0)->text(), QStringLiteral("2"));
  QFile presets(done.first().at(0).toString());
  QVERIFY(presets.open(QIODevice::ReadOnly));
  QVERIFY(presets.readAll().contains("refined by the run run.db"));
  panel.resize(900, 560);
  panel.show();
  const QImage shot = cs::gui::test::saveScreenshot(&panel, QStringLiteral("calibration-learnt"));
  QVERIFY(cs::gui::test::distinctColours(shot) > 8);

  // A store that is not there: the error names it, nothing is saved.
  panel.learnFrom({dir_.filePath("missing.db")});
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
  QCOMPARE(failed.count(), 1);
  QVERIFY2(panel.statusLabel()->text().contains(QStringLiteral("missing.db")),
           qPrintable(panel.statusLabel()->text()));
  QVERIFY(panel.learnButton()->isEnabled());

  // A calibration store beside a run: one is fitted alone, the other learnt
  // from; the two together are refused, saying so.
  panel.learnFrom({dir_.filePath("run.db"), dir_.filePath("calibration.db")});
  QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 60000);
  QCOMPARE(failed.count(), 2);
  QVERIFY2(panel.statusLabel()->text().contains(
               QStringLiteral("Calibration stores and run stores were chosen together")),
           qPrintable(panel.statusLabel()->text()));
  QCOMPARE(done.count(), 1);
}

// Tools > Learn from the open run: the run open in the run view refines
// the calibration, in the calibration window.
void TestGuiCalibration::mainWindowLearnsFromTheOpenRun() {
  cs::gui::MainWindow window;
  auto* action = window.findChild<QAction*>(QStringLiteral("actionLearnFromRun"));
  QVERIFY(action);
  QVERIFY(!action->isEnabled());  // no run open
  window.openRun(dir_.filePath("run.db"));
  QTRY_VERIFY_WITH_TIMEOUT(action->isEnabled(), 30000);
  action->trigger();
  auto* dialog = window.findChild<QDialog*>(QStringLiteral("calibrationDialog"));
  QVERIFY(dialog);
  QVERIFY(dialog->isVisible());
  auto* panel = dialog->findChild<cs::gui::CalibrationPanel*>();
  QVERIFY(panel);
  QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 60000);
  QVERIFY2(panel->statusLabel()->text().startsWith(QStringLiteral("Refined ")),
           qPrintable(panel->statusLabel()->text()));
}

// GPU runs of a host with no calibration of its GPU (no
// calibrated-<host>-cuda) refine the current plan's cluster, and the panel
// says so; a plan on another GPU's cluster is said to be one. The app asked
// for --base, a flag it has no control for.
void TestGuiCalibration::gpuRunsRefineThePlansCluster_data() {
  QTest::addColumn<QString>("preset");  // loaded into the plan's cluster
  QTest::addColumn<bool>("refined");
  QTest::addRow("of the runs' GPU") << "h200-1" << true;
  QTest::addRow("of another GPU") << "dgx-h100-8" << false;
}

void TestGuiCalibration::gpuRunsRefineThePlansCluster() {
  QFETCH(QString, preset);
  QFETCH(bool, refined);
  QTemporaryDir dir;
  const QByteArray before = qgetenv("CLUSTERSCOPE_USER_PRESETS");
  auto restore = qScopeGuard([&] { qputenv("CLUSTERSCOPE_USER_PRESETS", before); });
  const QString presets = dir.filePath(QStringLiteral("presets"));
  qputenv("CLUSTERSCOPE_USER_PRESETS", presets.toUtf8());
  const QString run = dir.filePath(QStringLiteral("worker-bf16.db"));
  QVERIFY(QFile::copy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"), run));
  QFile(run).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  cs::gui::MainWindow window;
  QVERIFY(window.workspace()->newProject());
  auto* designer = window.findChild<cs::gui::ClusterDesigner*>();
  QVERIFY(designer);
  QVERIFY(designer->applyPreset(preset));
  // The project's cluster keeps its name, with the preset's contents.
  const QString cluster =
      QString::fromStdString(window.workspace()->project().current_cluster()->name);
  cs::gui::CalibrationPanel* panel = window.showCalibrationPanel();
  QVERIFY(panel);
  QSignalSpy learnt(panel, &cs::gui::CalibrationPanel::calibrated);
  QSignalSpy failed(panel, &cs::gui::CalibrationPanel::failed);
  panel->learnFrom({run});
  QTRY_VERIFY_WITH_TIMEOUT(!panel->running(), 60000);
  const QString text = panel->statusLabel()->text();
  QVERIFY2(!text.contains(QStringLiteral("--base")), qPrintable(text));
  QCOMPARE(learnt.count(), refined ? 1 : 0);
  QCOMPARE(failed.count(), refined ? 0 : 1);
  if (refined) {
    QVERIFY2(text.startsWith(QStringLiteral("Refined %1 from worker-bf16.db.\n").arg(cluster)),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("no calibration of this host's GPU (no preset "
                                          "calibrated-vm-cuda): refined the current plan's "
                                          "cluster, ")),
             qPrintable(text));
    QCOMPARE(learnt.front().at(1).toStringList(), QStringList{cluster});
    // Saved as this host's copy, which the planner offers.
    QCOMPARE(QDir(presets).entryList({QStringLiteral("*.json")}, QDir::Files).size(), 1);
  } else {
    QVERIFY2(
        text.contains(
            QStringLiteral("the current plan's cluster %1 is not of the runs' GPU").arg(cluster)),
        qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("clusters of its NVIDIA H200")), qPrintable(text));
  }
}

// The hook: Tools > Calibrate this machine… opens the panel in a window.
void TestGuiCalibration::mainWindowOpensThePanel() {
  cs::gui::MainWindow window;
  auto* action = window.findChild<QAction*>(QStringLiteral("actionCalibrate"));
  QVERIFY(action);
  action->trigger();
  auto* dialog = window.findChild<QDialog*>(QStringLiteral("calibrationDialog"));
  QVERIFY(dialog);
  QVERIFY(dialog->isVisible());
  QVERIFY(dialog->findChild<cs::gui::CalibrationPanel*>());
  action->trigger();  // the same window again, not a second one
  QCOMPARE(window.findChildren<QDialog*>(QStringLiteral("calibrationDialog")).size(), 1);
}

// Presets a calibration saves are the planner's at once: the cluster
// designer offers them, and a preset of theirs applies (the app had to be
// restarted, and a run launched meanwhile was predicted without them).
void TestGuiCalibration::calibratedPresetsAreOfferedAtOnce() {
  cs::gui::MainWindow window;
  QVERIFY(window.workspace()->newProject());
  cs::gui::CalibrationPanel* panel = window.showCalibrationPanel();
  auto* designer = window.findChild<cs::gui::ClusterDesigner*>();
  QVERIFY(panel);
  QVERIFY(designer);
  const QString name = QStringLiteral("calibrated-reload-test");
  QCOMPARE(designer->presetBox()->findData(name), -1);
  // What a calibration writes into the user's presets folder.
  const QString file = dir_.filePath("presets/reload-test.json");
  QFile out(file);
  QVERIFY(out.open(QIODevice::WriteOnly));
  out.write(R"([{"kind": "cluster", "name": "calibrated-reload-test", "source": "a test",
                "display_name": "Reloaded", "nodes": 1, "gpus_per_node": 8,
                "gpu": "a100-80gb", "intra_node": "nvlink3"}])");
  out.close();
  emit panel->calibrated(file, {name});
  QFile::remove(file);
  QVERIFY(designer->presetBox()->findData(name) > 0);
  QVERIFY(window.workspace()->catalog().cluster(name.toStdString()).ok());
  QVERIFY(designer->applyPreset(name));
  QCOMPARE(QString::fromStdString(window.workspace()->project().current_cluster()->display_name),
           QStringLiteral("Reloaded"));
}

// Presets saved from outside the app while it runs (clusterscope calibrate
// in a terminal, the CLI being how most calibrate) are read again and
// offered in Cluster ▸ Load a preset, as the app's own calibrations are;
// also where the presets folder is made by that first calibration. They
// were offered only once the app was started again.
void TestGuiCalibration::presetsSavedOutsideTheAppAreOffered() {
  const QByteArray before = qgetenv("CLUSTERSCOPE_USER_PRESETS");
  auto restore = qScopeGuard([&] { qputenv("CLUSTERSCOPE_USER_PRESETS", before); });
  const QString presets = dir_.filePath("outside/presets");  // not made yet
  qputenv("CLUSTERSCOPE_USER_PRESETS", presets.toUtf8());
  QVERIFY(QDir().mkpath(dir_.filePath("outside")));
  cs::gui::MainWindow window;
  QVERIFY(window.workspace()->newProject());
  auto* designer = window.findChild<cs::gui::ClusterDesigner*>();
  QVERIFY(designer);
  const QString name = QStringLiteral("h200-1-learnt-vm");
  QCOMPARE(designer->presetBox()->findData(name), -1);

  // What a user runs beside the app: learning from the H200's run.
  const QString run = dir_.filePath("outside/worker-bf16.db");
  QVERIFY(QFile::copy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"), run));
  QFile(run).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  const cs::test::ProcessRun learnt =
      cs::test::run_cli({"calibrate", "--learn", run, "--base", "h200-1"});
  QVERIFY2(learnt.exit_code == 0, qPrintable(learnt.err));
  QVERIFY(QFile::exists(presets + "/calibrated-vm-cuda.json"));
  QTRY_VERIFY_WITH_TIMEOUT(designer->presetBox()->findData(name) > 0, 20000);
  QVERIFY(window.workspace()->catalog().cluster(name.toStdString()).ok());

  // Another saved into the folder now there: offered too.
  const cs::test::ProcessRun linked =
      cs::test::run_cli({"calibrate", "--nccl-tests",
                         QStringLiteral(CS_DATA_DIR "/nccl-tests/all_reduce_perf_1x8_h100.log"),
                         "--link-name", "nvl-measured", "--link-type", "nvlink"});
  QVERIFY2(linked.exit_code == 0, qPrintable(linked.err));
  QTRY_VERIFY_WITH_TIMEOUT(window.workspace()->catalog().find_link("nvl-measured") != nullptr,
                           20000);
}

// The window closed during a calibration asks first: the sweep stopped
// keeps nothing of what it measured, and it was stopped with no word.
void TestGuiCalibration::closingTheWindowAsksFirst() {
  cs::gui::MainWindow window;
  window.show();
  window.findChild<QAction*>(QStringLiteral("actionCalibrate"))->trigger();
  auto* panel = window.findChild<cs::gui::CalibrationPanel*>();
  QVERIFY(panel);
  panel->setPresetsDir(dir_.filePath("presets-closed"));
  panel->setStorePath(dir_.filePath("closed.db"));
  panel->rankCounts()->setText(QStringLiteral("1"));
  panel->secondsPerSize()->setValue(10);
  panel->startButton()->click();
  QVERIFY(panel->calibrating());
  const QString ranks = dir_.filePath("closed.phase0.ranks");
  QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(ranks + "/rank0.db"), 60000);

  cs::gui::test::answerBoxes({QMessageBox::Cancel});  // not now
  QVERIFY(!window.close());
  QVERIFY(panel->calibrating());

  QSignalSpy failed(panel, &cs::gui::CalibrationPanel::failed);
  cs::gui::test::answerBoxes({QMessageBox::Yes});  // stop it
  QVERIFY(window.close());
  QVERIFY(!panel->running());
  QCOMPARE(failed.count(), 1);
  QVERIFY2(failed.front().at(0).toString().contains(QStringLiteral("calibration cancelled")),
           qPrintable(failed.front().at(0).toString()));
  QVERIFY(!QDir(ranks).exists());  // its ranks done and gone
}

QTEST_MAIN(TestGuiCalibration)
#include "tst_gui_calibration.moc"
