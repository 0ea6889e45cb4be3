#pragma once
// The main window: the estimate in the middle; the cluster designer, the
// workload and the plan panels, the plan explorer, the comparison and the
// calculators in docks; menus and shortcuts for everything; the layout and
// the preferences kept in QSettings.

#include <QMainWindow>
#include <QStringList>
#include <QThreadPool>
#include <memory>
#include <vector>

#include "app/gui/message_level.h"

class QComboBox;
class QDockWidget;
class QMenu;

namespace cs::gui {

class AnalysisService;
class CalibrationPanel;
class Calculators;
class ClusterDesigner;
class CompareView;
class EstimateView;
class MessageBar;
class PinnedPlans;
class PlanExplorer;
class PlanPanel;
class RunView;
class RunsPanel;
class WorkloadPanel;
class Workspace;
struct PlanAnalysis;
struct ReportFigure;
enum class RunExport : int;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens `path` when given (a message and the default project when it will
  // not open), else the default project; then offers a crashed session's
  // changes, if any.
  void start(const QString& path = {});

  Workspace* workspace() const { return workspace_; }
  AnalysisService* analysis() const { return analysis_; }
  ClusterDesigner* clusterDesigner() const { return cluster_; }
  WorkloadPanel* workloadPanel() const { return workload_; }
  PlanPanel* planPanel() const { return plan_; }
  EstimateView* estimateView() const { return estimate_; }
  PlanExplorer* explorer() const { return explorer_; }
  CompareView* compareView() const { return compare_; }
  Calculators* calculators() const { return calculators_; }
  PinnedPlans* pinned() const { return pinned_; }
  MessageBar* messageBar() const { return messages_; }
  QComboBox* planSelector() const { return plan_selector_; }
  QDockWidget* dock(const QString& object_name) const;
  // "Cluster (Alt+1)": a dock's title and the keys that show or hide it, as
  // its tab's tooltip says; "" for a title no dock has.
  QString dockTip(const QString& title) const;
  RunView* runView() const { return run_view_; }
  RunsPanel* runsPanel() const { return runs_; }

  // Runs: a trace store opened in the run view; traces of other profilers
  // (Nsight Systems SQLite, Kineto JSON) imported into a store first, on a
  // worker thread (runImported reports the store or why there is none).
  void openRun(const QString& path);
  // Tools > Calibrate this machine...: the calibration panel in its own
  // window (one), shown and returned (also for Tools > Learn from the open run).
  CalibrationPanel* showCalibrationPanel();
  void importTrace(const QStringList& files);
  // The run view's exports (the whole run, or the selected range), written
  // on a worker thread while the window stays live; runExported follows with
  // the files written or why there are none. False, with a message, when it
  // cannot start: no run, no range, or an export still being written.
  bool exportRun(RunExport kind, const QString& path, bool range_only = false);
  bool exportInProgress() const { return !exporting_.isEmpty(); }
  bool importInProgress() const { return !importing_.isEmpty(); }

 signals:
  void runImported(const QString& store, const QString& error);
  void runExported(const QStringList& files, const QString& error);

 public:
  // File actions with a path instead of a file dialog (tests, scripts).
  bool openProject(const QString& path);
  bool saveProjectAs(const QString& path);
  bool exportPdf(const QString& path);
  bool exportHtml(const QString& path);
  bool exportPlanJson(const QString& path);

  void setDarkTheme(bool dark);
  // Pins the current plan beside the explorer's pins.
  bool pinCurrentPlan();

 protected:
  void closeEvent(QCloseEvent* event) override;
  void childEvent(QChildEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void createDocks();
  void createActions();
  void refreshTitle();
  void refreshPlanSelector();
  void refreshRecentMenu();
  void showMessage(const QString& text, int level);
  void offerRecovery();
  void restoreRecovery();  // asks first where there are edits to lose
  // Before the window closes or changes project: a run in progress is stopped
  // and recorded first, or the change is called off. False when called off.
  bool stopRunFirst();
  // Before the window closes: a calibration going is stopped (what it
  // measured is lost), or the close is called off. False when called off.
  bool stopCalibrationFirst();
  // An import or a run export still writing: asks before the window closes.
  bool closeWhileWriting();
  bool confirmDiscard();
  // Text typed in a field that takes it on Return or on leaving (a plan's
  // name), the focus still in it, is taken before a menu action or closing:
  // Ctrl+S saved the project without it, and Ctrl+O dropped it unasked.
  void commitTypedText();
  void addPlan();  // a copy of the current plan, or the default plan when there is none
  void deletePlan();
  void stepPlan(int delta);
  std::vector<ReportFigure> reportFigures() const;
  QString currentPlanName() const;  // the reports' title

  Workspace* workspace_;
  AnalysisService* analysis_;
  PinnedPlans* pinned_;
  MessageBar* messages_;
  // What the message bar says about the open store (its damage, an export
  // refused, a prediction or comparison of it): it goes with the store.
  QString run_message_shown_;
  void showRunMessage(const QString& text, MessageLevel level);
  bool run_dock_sized_ = false;  // the Run dock given half the window once
  EstimateView* estimate_;
  ClusterDesigner* cluster_;
  WorkloadPanel* workload_;
  PlanPanel* plan_;
  PlanExplorer* explorer_;
  CompareView* compare_;
  Calculators* calculators_;
  RunView* run_view_;
  RunsPanel* runs_;
  QComboBox* plan_selector_;
  QMenu* recent_menu_;
  QMenu* view_menu_;
  QByteArray default_state_;
  QString exporting_;  // the file a run export is writing, while it does
  // The traces imports are reading, one a running import: the menu takes
  // another while one is written.
  QStringList importing_;
  // Where its reads run: their answers come back to it, so it waits for
  // them when it closes (one that came as it was destroyed was a crash).
  QThreadPool jobs_;
};

}  // namespace cs::gui
