#include "app/gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QChildEvent>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QHelpEvent>
#include <QKeySequence>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QScrollArea>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabBar>
#include <QTimer>
#include <QToolBar>
#include <QToolTip>
#include <QUndoStack>
#include <QVBoxLayout>

#include <QtConcurrent/QtConcurrentRun>

#include "app/gui/analysis.h"
#include "app/gui/calculators.h"
#include "app/gui/calibration_panel.h"
#include "app/gui/cluster_designer.h"
#include "app/gui/compare_view.h"
#include "app/gui/estimate_view.h"
#include "app/gui/message_bar.h"
#include "app/gui/plain_text.h"
#include "app/gui/plan_explorer.h"
#include "app/gui/plan_panel.h"
#include "app/gui/report_export.h"
#include "app/gui/run_view.h"
#include "app/gui/runs_panel.h"
#include "app/gui/theme.h"
#include "app/gui/timeline_widget.h"
#include "app/gui/workload_panel.h"
#include "app/gui/workspace.h"
#include "core/format.h"
#include "core/shown_name.h"
#include "core/trace_import.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}
const QString kFilter =
    QObject::tr("ClusterScope projects (*.clusterscope.json);;JSON (*.json);;All files (*)");

// QMessageBox::question with its text as written: the static one lets Qt
// guess whether it is rich text, and a project or file named "<b>p</b>" came
// out bold.
QMessageBox::StandardButton ask(QWidget* parent, const QString& title, const QString& text,
                                QMessageBox::StandardButtons buttons,
                                QMessageBox::StandardButton default_button) {
  QMessageBox box(QMessageBox::Question, title, text, buttons, parent);
  box.setTextFormat(Qt::PlainText);
  box.setDefaultButton(default_button);
  return QMessageBox::StandardButton(box.exec());
}

// The current plan's cluster: Learn from runs refines it for GPU runs of a
// host with no calibration of its GPU.
std::optional<Cluster> planCluster(const Workspace& workspace) {
  const Cluster* cluster = workspace.project().current_cluster();
  return cluster ? std::optional<Cluster>(*cluster) : std::nullopt;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setObjectName(QStringLiteral("mainWindow"));
  workspace_ = new Workspace(this);
  analysis_ = new AnalysisService(this);
  pinned_ = new PinnedPlans(this);

  // The estimate in the middle, under the message bar.
  messages_ = new MessageBar;
  estimate_ = new EstimateView(analysis_);
  auto* scroll = new QScrollArea;
  scroll->setWidget(estimate_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* central = new QWidget;
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(messages_);
  layout->addWidget(scroll, 1);
  setCentralWidget(central);

  cluster_ = new ClusterDesigner(workspace_);
  workload_ = new WorkloadPanel(workspace_);
  plan_ = new PlanPanel(workspace_, analysis_);
  explorer_ = new PlanExplorer(workspace_, pinned_);
  compare_ = new CompareView(pinned_);
  calculators_ = new Calculators;
  run_view_ = new RunView;
  runs_ = new RunsPanel(workspace_);
  createDocks();
  createActions();
  // The status bar from the start: made by its first message instead, it
  // would lay out and repaint the whole window then (30-50 ms).
  statusBar();

  connect(workspace_, &Workspace::projectChanged, this, [this] {
    auto plan = workspace_->project().resolved_plan();
    if (plan) {
      analysis_->request(plan.value());
    } else {
      analysis_->requestNone(q(plan.message()));
    }
    refreshPlanSelector();
  });
  connect(workspace_, &Workspace::fileChanged, this, &MainWindow::refreshTitle);
  connect(workspace_, &Workspace::recentFilesChanged, this, &MainWindow::refreshRecentMenu);
  connect(workspace_, &Workspace::message, this,
          [this](const QString& text, MessageLevel level) { showMessage(text, int(level)); });
  connect(analysis_, &AnalysisService::analysed, calculators_, &Calculators::setAnalysis);
  connect(runs_, &RunsPanel::openRunRequested, this, &MainWindow::openRun);
  connect(compare_, &CompareView::makeCurrent, this,
          [this](const plan::RankedPlan& plan, const std::string& subject) {
            if (!explorer_->makeCurrent(plan, subject)) {
              showMessage(tr("That pinned plan was estimated for another cluster or workload "
                             "than the current plan's: it is left as it was."),
                          int(MessageLevel::warning));
            }
          });
  // Pinned plans are the project's: saved with it, and those of a new or
  // opened project shown in place of the last one's.
  connect(pinned_, &PinnedPlans::changed, this, [this] { workspace_->setPinned(pinned_->pins()); });
  connect(workspace_, &Workspace::projectReplaced, this, [this] {
    const QStringList left_out = pinned_->restore(workspace_->project().pinned);
    if (!left_out.isEmpty()) {
      showMessage(tr("Pinned plans of %1 left out (saving drops them from the file):\n%2")
                      .arg(workspace_->displayName(), left_out.join('\n')),
                  int(MessageLevel::warning));
    }
  });

  resize(1500, 950);
  QSettings settings;
  default_state_ = saveState();
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
  setDarkTheme(settings.value(QStringLiteral("view/dark"), false).toBool());
  refreshTitle();
  refreshRecentMenu();
}

MainWindow::~MainWindow() {
  jobs_.waitForDone();
}

void MainWindow::start(const QString& path) {
  if (!workspace_->presetsError().isEmpty()) {
    messages_->show(tr("The presets could not be loaded; preset lists are empty.\n%1")
                        .arg(workspace_->presetsError()),
                    MessageLevel::error);
  } else if (!workspace_->userPresetsError().isEmpty()) {
    messages_->show(tr("Your own presets were left out; the shipped presets are listed without "
                       "them.\n%1")
                        .arg(workspace_->userPresetsError()),
                    MessageLevel::warning);
  }
  bool opened = false;
  if (!path.isEmpty()) opened = workspace_->open(path);
  if (!opened) {
    const QString kept = messages_->isVisible() ? messages_->text() : QString();
    const MessageLevel kept_level = messages_->level();
    workspace_->newProject();
    if (!kept.isEmpty() && messages_->text().isEmpty()) messages_->show(kept, kept_level);
  }
  offerRecovery();
}

void MainWindow::offerRecovery() {
  if (!workspace_->hasRecovery()) return;
  const QString source = workspace_->recoverySource();
  messages_->show(
      tr("ClusterScope did not close cleanly last time. Unsaved changes%1 were kept.")
          .arg(source.isEmpty() ? QString() : tr(" to %1").arg(QFileInfo(source).fileName())),
      MessageLevel::warning,
      {{tr("Restore"), [this] { restoreRecovery(); }},
       {tr("Discard"), [this] { workspace_->discardRecovery(); }}});
}

void MainWindow::restoreRecovery() {
  if (!workspace_->hasRecovery()) return;
  // Offered while the user works: edits made since, or a project opened
  // since, were replaced with no question.
  if (!confirmDiscard()) {
    offerRecovery();
    return;
  }
  workspace_->recover();
}

QDockWidget* MainWindow::dock(const QString& object_name) const {
  return findChild<QDockWidget*>(object_name);
}

QString MainWindow::dockTip(const QString& title) const {
  for (QDockWidget* d : findChildren<QDockWidget*>(Qt::FindDirectChildrenOnly)) {
    const QKeySequence key = d->toggleViewAction()->shortcut();
    if (d->windowTitle() == title && !key.isEmpty())
      return tr("%1 (%2)").arg(title, key.toString(QKeySequence::NativeText));
  }
  return {};
}

void MainWindow::childEvent(QChildEvent* event) {
  QMainWindow::childEvent(event);
  // The tab bars of tabbed docks are made and remade as docks move: each is
  // watched for its tooltips (installing twice watches once).
  if (event->polished())
    if (auto* bar = qobject_cast<QTabBar*>(event->child())) bar->installEventFilter(this);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  // A dock's tab says its Alt+N, which Qt's own tooltip (its title) does not.
  if (event->type() == QEvent::ToolTip) {
    if (auto* bar = qobject_cast<QTabBar*>(watched)) {
      auto* help = static_cast<QHelpEvent*>(event);
      const int index = bar->tabAt(help->pos());
      const QString tip = index >= 0 ? dockTip(bar->tabText(index)) : QString();
      if (!tip.isEmpty()) {
        QToolTip::showText(help->globalPos(), tip, bar, bar->tabRect(index));
        return true;
      }
    }
  }
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::createDocks() {
  setDockOptions(AnimatedDocks | AllowTabbedDocks | AllowNestedDocks);
  auto make = [this](QWidget* w, const QString& title, const char* name, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(QString::fromLatin1(name));
    d->setWidget(w);
    addDockWidget(area, d);
    return d;
  };
  QDockWidget* cluster = make(cluster_, tr("Cluster"), "clusterDock", Qt::LeftDockWidgetArea);
  QDockWidget* workload = make(workload_, tr("Workload"), "workloadDock", Qt::LeftDockWidgetArea);
  tabifyDockWidget(cluster, workload);
  cluster->raise();
  make(plan_, tr("Plan"), "planDock", Qt::RightDockWidgetArea);
  QDockWidget* explorer =
      make(explorer_, tr("Plan explorer"), "explorerDock", Qt::BottomDockWidgetArea);
  QDockWidget* compare = make(compare_, tr("Compare"), "compareDock", Qt::BottomDockWidgetArea);
  // The calculators scroll rather than set the bottom area's minimum (790 x
  // 347 px), which the window's took: it could not be made 1024 x 700.
  auto* calculators_area = new QScrollArea;
  calculators_area->setWidget(calculators_);
  calculators_area->setWidgetResizable(true);
  calculators_area->setFrameShape(QFrame::NoFrame);
  QDockWidget* calculators =
      make(calculators_area, tr("Calculators"), "calculatorsDock", Qt::BottomDockWidgetArea);
  tabifyDockWidget(explorer, compare);
  tabifyDockWidget(explorer, calculators);
  QDockWidget* run = make(run_view_, tr("Run"), "runDock", Qt::BottomDockWidgetArea);
  tabifyDockWidget(explorer, run);
  QDockWidget* runs = make(runs_, tr("Runs"), "runsDock", Qt::RightDockWidgetArea);
  tabifyDockWidget(dock(QStringLiteral("planDock")), runs);
  dock(QStringLiteral("planDock"))->raise();
  explorer->raise();
  resizeDocks({cluster, dock(QStringLiteral("planDock"))}, {380, 340}, Qt::Horizontal);
  resizeDocks({explorer}, {400}, Qt::Vertical);
}

void MainWindow::createActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  auto add = [this](QMenu* menu, const QString& text, const QKeySequence& key, auto slot,
                    const char* name = nullptr) {
    QAction* a = menu->addAction(text);
    if (!key.isEmpty()) a->setShortcut(key);
    if (name) a->setObjectName(QString::fromLatin1(name));
    connect(a, &QAction::triggered, this, [this, slot] {
      commitTypedText();
      slot();
    });
    return a;
  };
  add(
      file, tr("&New project"), QKeySequence::New,
      [this] {
        if (confirmDiscard()) workspace_->newProject();
      },
      "actionNew");
  add(
      file, tr("&Open…"), QKeySequence::Open,
      [this] {
        if (!confirmDiscard()) return;
        const QString path = QFileDialog::getOpenFileName(this, tr("Open project"), {}, kFilter);
        if (!path.isEmpty()) openProject(path);
      },
      "actionOpen");
  recent_menu_ = file->addMenu(tr("Open &recent"));
  // The message bar's offer goes as the next message comes: the menu keeps it.
  QAction* restore = add(
      file, tr("Restore the last session's unsaved changes"), QKeySequence(),
      [this] { restoreRecovery(); }, "actionRestoreRecovery");
  restore->setEnabled(workspace_->hasRecovery());
  connect(workspace_, &Workspace::recoveryChanged, restore,
          [this, restore] { restore->setEnabled(workspace_->hasRecovery()); });
  add(
      file, tr("&Save"), QKeySequence::Save,
      [this] {
        if (!workspace_->save()) {
          const QString path = QFileDialog::getSaveFileName(this, tr("Save project"), {}, kFilter);
          if (!path.isEmpty()) saveProjectAs(path);
        }
      },
      "actionSave");
  add(
      file, tr("Save &as…"), QKeySequence::SaveAs,
      [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save project as"),
                                                          workspace_->filePath(), kFilter);
        if (!path.isEmpty()) saveProjectAs(path);
      },
      "actionSaveAs");
  file->addSeparator();
  add(
      file, tr("Export report as &PDF…"), QKeySequence(tr("Ctrl+Shift+P")),
      [this] {
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export PDF"), {}, tr("PDF (*.pdf)"));
        if (!path.isEmpty()) exportPdf(path);
      },
      "actionExportPdf");
  add(
      file, tr("Export report as &HTML…"), QKeySequence(tr("Ctrl+Shift+H")),
      [this] {
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export HTML"), {}, tr("HTML (*.html)"));
        if (!path.isEmpty()) exportHtml(path);
      },
      "actionExportHtml");
  add(
      file, tr("Export plan as &JSON (for clusterscope run)…"), QKeySequence(tr("Ctrl+Shift+J")),
      [this] {
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export plan"), {}, tr("JSON (*.json)"));
        if (!path.isEmpty()) exportPlanJson(path);
      },
      "actionExportJson");
  file->addSeparator();
  add(
      file, tr("Open &run…"), QKeySequence(tr("Ctrl+Shift+O")),
      [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, tr("Open run"), {}, tr("Trace stores (*.db *.cstrace *.sqlite);;All files (*)"));
        if (!path.isEmpty()) openRun(path);
      },
      "actionOpenRun");
  add(
      file, tr("&Import trace (Nsight Systems SQLite, Kineto or Chrome JSON)…"),
      QKeySequence(tr("Ctrl+Shift+I")),
      [this] {
        const QStringList files = QFileDialog::getOpenFileNames(
            this, tr("Import trace: one file per rank"), {},
            tr("Traces (*.sqlite *.json *.json.gz *.gz);;All files (*)"));
        if (!files.isEmpty()) importTrace(files);
      },
      "actionImportTrace");
  QMenu* run_exports = file->addMenu(tr("Export r&un"));
  QAction* range_only = run_exports->addAction(tr("Selected range only"));
  range_only->setObjectName(QStringLiteral("actionRunRangeOnly"));
  range_only->setCheckable(true);
  run_exports->addSeparator();
  auto run_export = [this, run_exports, range_only, add](const QString& text, const QString& filter,
                                                         RunExport kind, const char* name) {
    add(
        run_exports, text, QKeySequence(),
        [this, filter, kind, range_only] {
          const QString path = QFileDialog::getSaveFileName(this, tr("Export run"), {}, filter);
          if (!path.isEmpty()) exportRun(kind, path, range_only->isChecked());
        },
        name);
  };
  run_export(tr("HTML report…"), tr("HTML (*.html)"), RunExport::html, "actionRunHtml");
  run_export(tr("PDF report…"), tr("PDF (*.pdf)"), RunExport::pdf, "actionRunPdf");
  run_export(tr("CSV tables…"), tr("CSV (*.csv)"), RunExport::csv, "actionRunCsv");
  run_export(tr("Chrome trace JSON (Perfetto)…"), tr("JSON (*.json)"), RunExport::chrome_trace,
             "actionRunChrome");
  run_export(tr("Chrome trace JSON with the critical path (Perfetto)…"), tr("JSON (*.json)"),
             RunExport::chrome_trace_critical_path, "actionRunChromeCriticalPath");
  file->addSeparator();
  add(file, tr("&Quit"), QKeySequence::Quit, [this] { close(); });

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  // Short texts (the toolbar shows them); what they undo is in the tooltip.
  QUndoStack* stack = workspace_->undoStack();
  QAction* undo = add(
      edit, tr("&Undo"), QKeySequence::Undo, [stack] { stack->undo(); }, "actionUndo");
  QAction* redo = add(
      edit, tr("&Redo"), QKeySequence::Redo, [stack] { stack->redo(); }, "actionRedo");
  // Every binding of the platform (a QKeySequence made of a standard key is
  // its first alone: redo was Ctrl+Y only, never Ctrl+Shift+Z), and Ctrl+Y.
  undo->setShortcuts(QKeySequence::Undo);
  QList<QKeySequence> redo_keys = QKeySequence::keyBindings(QKeySequence::Redo);
  if (!redo_keys.contains(QKeySequence(tr("Ctrl+Y")))) redo_keys.append(QKeySequence(tr("Ctrl+Y")));
  redo->setShortcuts(redo_keys);
  auto track = [stack, undo, redo] {
    undo->setEnabled(stack->canUndo());
    redo->setEnabled(stack->canRedo());
    undo->setToolTip(stack->canUndo() ? tr("Undo %1").arg(stack->undoText())
                                      : tr("Nothing to undo"));
    redo->setToolTip(stack->canRedo() ? tr("Redo %1").arg(stack->redoText())
                                      : tr("Nothing to redo"));
  };
  connect(stack, &QUndoStack::indexChanged, this, track);
  connect(stack, &QUndoStack::cleanChanged, this, track);
  track();

  QMenu* plans = menuBar()->addMenu(tr("&Plan"));
  QAction* new_plan = add(
      plans, tr("&New plan"), QKeySequence(tr("Ctrl+T")), [this] { addPlan(); }, "actionNewPlan");
  QAction* delete_plan = add(
      plans, tr("&Delete plan"), QKeySequence(tr("Ctrl+Shift+Del")), [this] { deletePlan(); },
      "actionDeletePlan");
  add(plans, tr("Next plan"), QKeySequence(tr("Ctrl+PgDown")), [this] { stepPlan(1); });
  add(plans, tr("Previous plan"), QKeySequence(tr("Ctrl+PgUp")), [this] { stepPlan(-1); });
  plans->addSeparator();
  QAction* search = add(
      plans, tr("&Search plans"), QKeySequence(Qt::Key_F5),
      [this] {
        dock(QStringLiteral("explorerDock"))->raise();
        explorer_->runSearch();
      },
      "actionSearch");
  add(
      plans, tr("&Cancel search"), QKeySequence(tr("Shift+F5")),
      [this] { explorer_->cancelSearch(); }, "actionCancelSearch");
  QAction* pin = add(
      plans, tr("&Pin to compare"), QKeySequence(tr("Ctrl+D")), [this] { pinCurrentPlan(); },
      "actionPin");

  view_menu_ = menuBar()->addMenu(tr("&View"));
  // Alt+1 … Alt+8 in the order the docks are seen, left to right and top to
  // bottom, each tab bar's in its order: the left column, the right one, then
  // the bottom row (in the order they were made, Runs, beside Plan, was Alt+8).
  static constexpr const char* kDockOrder[] = {"clusterDock",     "workloadDock", "planDock",
                                               "runsDock",        "explorerDock", "compareDock",
                                               "calculatorsDock", "runDock"};
  int n = 1;
  for (const char* name : kDockOrder) {
    QDockWidget* d = dock(QString::fromLatin1(name));
    QAction* toggle = d->toggleViewAction();
    toggle->setShortcut(QKeySequence(QStringLiteral("Alt+%1").arg(n++)));
    toggle->setToolTip(
        tr("Show or hide %1 (%2)")
            .arg(d->windowTitle(), toggle->shortcut().toString(QKeySequence::NativeText)));
    view_menu_->addAction(toggle);
  }
  view_menu_->setToolTipsVisible(true);
  view_menu_->addSeparator();
  QAction* dark = view_menu_->addAction(tr("&Dark theme"));
  dark->setObjectName(QStringLiteral("actionDark"));
  dark->setCheckable(true);
  dark->setShortcut(QKeySequence(tr("Ctrl+Shift+D")));
  connect(dark, &QAction::toggled, this, &MainWindow::setDarkTheme);
  view_menu_->addAction(tr("&Reset layout"), this, [this] { restoreState(default_state_); });

  // Calibration (app/gui/calibration_panel.h): a window of its own, as it runs for a minute.
  QMenu* tools = menuBar()->addMenu(tr("&Tools"));
  QAction* calibrate = tools->addAction(tr("&Calibrate this machine…"));
  calibrate->setObjectName(QStringLiteral("actionCalibrate"));
  connect(calibrate, &QAction::triggered, this, [this] { showCalibrationPanel(); });
  // Learning closes the loop from the run being studied: its kernels and
  // collectives refine the calibrated cluster of its rank count.
  QAction* learn = tools->addAction(tr("&Learn from the open run"));
  learn->setObjectName(QStringLiteral("actionLearnFromRun"));
  learn->setEnabled(false);
  connect(run_view_, &RunView::storeOpened, learn,
          [learn](const QString&, const QString& error) { learn->setEnabled(error.isEmpty()); });
  connect(learn, &QAction::triggered, this, [this] {
    if (run_view_->storePath().isEmpty()) return;
    showCalibrationPanel()->learnFrom({run_view_->storePath()});
  });
  // After calibrating or learning: the open run against the prediction the
  // presets make now, not the one it recorded.
  QAction* predict = tools->addAction(tr("&Predict the open run again"));
  predict->setObjectName(QStringLiteral("actionPredictAgain"));
  predict->setEnabled(false);
  connect(run_view_, &RunView::storeOpened, predict,
          [predict](const QString&, const QString& error) { predict->setEnabled(error.isEmpty()); });
  connect(predict, &QAction::triggered, run_view_, &RunView::predictAgain);
  // A program of the user's own (a profile, an import) records no
  // prediction: held against the plan it ran, the current one.
  QAction* with_plan = tools->addAction(tr("Hold the open run against the current &plan"));
  with_plan->setObjectName(QStringLiteral("actionPredictWithPlan"));
  with_plan->setEnabled(false);
  connect(run_view_, &RunView::storeOpened, with_plan,
          [with_plan](const QString&, const QString& error) {
            with_plan->setEnabled(error.isEmpty());
          });
  connect(with_plan, &QAction::triggered, this, [this] {
    const Project& project = workspace_->project();
    auto plan = project.resolved_plan();
    if (!plan) {
      showRunMessage(tr("No prediction of the current plan: %1").arg(q(plan.message())),
                     MessageLevel::error);
      return;
    }
    run_view_->predictWithPlan(plan.value(),
                               tr("the current plan, %1").arg(q(project.current()->name)));
  });
  // Another run against the open one (a baseline and a run after a change).
  QAction* compare = tools->addAction(tr("C&ompare the open run with…"));
  compare->setObjectName(QStringLiteral("actionCompareRun"));
  compare->setEnabled(false);
  connect(run_view_, &RunView::storeOpened, compare,
          [compare](const QString&, const QString& error) { compare->setEnabled(error.isEmpty()); });
  connect(compare, &QAction::triggered, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Compare with run"), {}, tr("Trace stores (*.db *.cstrace *.sqlite);;All files (*)"));
    if (!path.isEmpty()) run_view_->compareWith(path);
  });
  connect(run_view_, &RunView::comparisonReady, this, [this](const QString& error) {
    if (!error.isEmpty()) showRunMessage(tr("No comparison: %1").arg(error), MessageLevel::error);
  });
  connect(run_view_, &RunView::integrityChecked, this, [this](const QString& damage) {
    if (damage.isEmpty()) return;
    showRunMessage(damage, MessageLevel::warning);
  });
  connect(run_view_, &RunView::predictionReady, this,
          [this](const QString& cluster, const QString& error) {
            if (!error.isEmpty()) {
              showRunMessage(tr("No new prediction: %1").arg(error), MessageLevel::error);
            } else {
              // With the reason it is not the machine's calibration, as
              // `trace stats --predict-again` gives it.
              const QStringList notes = run_view_->predictedAgainNotes();
              const QString plan = run_view_->predictedFromPlan();
              const QString text =
                  plan.isEmpty()
                      ? tr("The run against the prediction made now, on %1").arg(cluster)
                      : tr("The run against the prediction of %1, on %2").arg(plan, cluster);
              if (notes.isEmpty()) {
                showRunMessage(text, MessageLevel::info);
              } else {
                showRunMessage(tr("%1 (%2)").arg(text, notes.join(QStringLiteral("; "))),
                               MessageLevel::warning);
              }
            }
          });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About ClusterScope"), this, [this] {
    messages_->show(
        tr("ClusterScope %1: plan, run and profile neural-network training on GPU clusters. "
           "Presets from %2.")
            .arg(QStringLiteral(CLUSTERSCOPE_VERSION),
                 QString::fromStdString(workspace_->catalog().directory().string())),
        MessageLevel::info);
  });

  QToolBar* bar = addToolBar(tr("Main"));
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  bar->setObjectName(QStringLiteral("mainToolBar"));
  plan_selector_ = new QComboBox;
  plan_selector_->setObjectName(QStringLiteral("planSelector"));
  plan_selector_->setMinimumContentsLength(24);
  plan_selector_->setToolTip(tr("The current plan (Ctrl+PgUp / Ctrl+PgDown)"));
  connect(plan_selector_, &QComboBox::activated, this,
          [this](int index) { workspace_->selectPlan(index); });
  bar->addWidget(plan_selector_);
  bar->addAction(new_plan);
  bar->addAction(delete_plan);
  bar->addSeparator();
  bar->addAction(undo);
  bar->addAction(redo);
  bar->addSeparator();
  bar->addAction(search);
  bar->addAction(pin);
}

void MainWindow::refreshTitle() {
  setWindowTitle(QStringLiteral("%1[*] — ClusterScope").arg(workspace_->displayName()));
  setWindowModified(workspace_->isModified());
}

void MainWindow::refreshPlanSelector() {
  const Project& p = workspace_->project();
  bool same = plan_selector_->count() == int(p.plans.size());
  for (int i = 0; same && i < plan_selector_->count(); ++i) {
    same = plan_selector_->itemText(i) == q(p.plans[std::size_t(i)].name);
  }
  if (!same) {
    plan_selector_->clear();
    for (const ProjectPlan& plan : p.plans)
      plan_selector_->addItem(q(plan.name));
  }
  if (p.has_plan()) plan_selector_->setCurrentIndex(p.current_plan);
}

void MainWindow::refreshRecentMenu() {
  recent_menu_->clear();
  const QStringList files = workspace_->recentFiles();
  for (const QString& f : files) {
    // A menu reads "&" as the mark of its shortcut key ("a & b" lost it).
    recent_menu_
        ->addAction(QFileInfo(f).fileName().replace(QLatin1Char('&'), QStringLiteral("&&")), this,
                    [this, f] {
                      if (confirmDiscard()) openProject(f);
                    })
        ->setToolTip(plainToolTip(f));
  }
  recent_menu_->addSeparator();
  recent_menu_->addAction(tr("Clear"), workspace_, &Workspace::clearRecentFiles)
      ->setEnabled(!files.isEmpty());
}

void MainWindow::showMessage(const QString& text, int level) {
  if (MessageLevel(level) == MessageLevel::info) {
    statusBar()->showMessage(text, 5000);
  } else {
    messages_->show(text, MessageLevel(level));
  }
}

bool MainWindow::openProject(const QString& path) {
  return workspace_->open(path);
}
bool MainWindow::saveProjectAs(const QString& path) {
  return workspace_->saveAs(path);
}

QString MainWindow::currentPlanName() const {
  const ProjectPlan* plan = workspace_->project().current();
  return plan ? q(plan->name) : QString();
}

std::vector<ReportFigure> MainWindow::reportFigures() const {
  TimelineWidget* timeline = estimate_->timeline();
  if (!estimate_->timelineSettled()) {
    // What is on screen is an earlier plan's (the edit's timeline comes
    // after its figures are painted): said, not drawn as this plan's.
    const QString note =
        tr("The predicted timeline of this plan was still being drawn when the "
           "report was made: export again to include it.");
    return {{tr("Predicted timeline of one step"), [](double) { return 40.0; },
             [note](QPainter& p, const QRectF& r) {
               p.fillRect(r, Qt::white);
               p.setPen(Qt::black);
               p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, note);
             }}};
  }
  if (timeline->frameJob() == 0) return {};
  // Read from its store at the picture's size: the view holds only the
  // stages near the screen.
  return {{tr("Predicted timeline of one step"),
           [height = timeline->pictureHeight()](double) { return height; },
           [paint = timeline->windowPainter(timeline->window(), Qt::black)](QPainter& p,
                                                                            const QRectF& r) {
             p.fillRect(r, Qt::white);
             paint(p, r);
           }}};
}

CalibrationPanel* MainWindow::showCalibrationPanel() {
  auto* dialog = findChild<QDialog*>(QStringLiteral("calibrationDialog"));
  if (!dialog) {
    dialog = new QDialog(this);
    dialog->setObjectName(QStringLiteral("calibrationDialog"));
    dialog->setWindowTitle(tr("Calibrate this machine"));
    auto* panel = new CalibrationPanel(dialog);
    // Learnt on the plan's cluster where the runs' host has no calibration
    // of its GPU: the app has no --base (it asked for one).
    connect(workspace_, &Workspace::projectChanged, panel,
            [this, panel] { panel->setPlanCluster(planCluster(*workspace_)); });
    (new QVBoxLayout(dialog))->addWidget(panel);
    dialog->resize(900, 620);  // the fits' table, its quality column in view
    connect(panel, &CalibrationPanel::calibrated, this,
            [this](const QString& file, const QStringList& clusters) {
              // Read again, the presets are the planner's at once, and a run
              // launched now is predicted on them.
              if (!workspace_->reloadPresets()) return;  // the workspace said why
              messages_->show(tr("Calibrated presets %1 saved in %2: in Cluster ▸ Load a "
                                 "preset.")
                                  .arg(clusters.join(QStringLiteral(", ")), file),
                              MessageLevel::info);
            });
  }
  auto* panel = dialog->findChild<CalibrationPanel*>();
  panel->setPlanCluster(planCluster(*workspace_));
  dialog->show();
  dialog->raise();
  return panel;
}

void MainWindow::showRunMessage(const QString& text, MessageLevel level) {
  messages_->show(text, level);
  run_message_shown_ = text;
}

void MainWindow::openRun(const QString& path) {
  // What the bar says of the store shown before goes with it (its damage,
  // an export refused for want of a range, stayed over the next ones).
  if (!run_message_shown_.isEmpty() && messages_->text() == run_message_shown_)
    messages_->dismiss();
  run_message_shown_.clear();
  run_view_->openStore(path);
  QDockWidget* d = dock(QStringLiteral("runDock"));
  d->show();
  d->raise();
  // A run is read on its lanes: the first one opened gets the bottom area
  // half the window (at its 400 px, 2 lanes were in view at 1500 x 950);
  // later, the user's split stays. Once the raised dock is laid out.
  if (!run_dock_sized_ && !d->isFloating()) {
    run_dock_sized_ = true;
    QTimer::singleShot(0, this, [this, d] {
      if (!d->isFloating() && d->height() < height() / 2)
        resizeDocks({d}, {height() / 2}, Qt::Vertical);
    });
  }
}

void MainWindow::importTrace(const QStringList& files) {
  // Into the app's data folder: the imported store outlives this session.
  const QString folder = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                         QStringLiteral("/imports");
  QDir().mkpath(folder);
  const QString output = QStringLiteral("%1/%2-%3.db")
                             .arg(folder, QFileInfo(files.front()).completeBaseName(),
                                  QString::number(QDateTime::currentMSecsSinceEpoch()));
  const QString name = QFileInfo(files.front()).fileName();
  importing_ << name;
  showMessage(tr("Importing %1…").arg(name), int(MessageLevel::info));
  std::vector<std::string> inputs;
  for (const QString& f : files)
    inputs.push_back(f.toStdString());
  struct Imported {
    QString error;
    QString summary;   // what was written, and how the clocks were aligned
    QString warnings;  // what the import could not do right (the CLI's warnings)
  };
  QtConcurrent::run(&jobs_, [inputs, output] {
    auto report = trace::import_traces(inputs, output.toStdString());
    Imported out;
    if (!report) {
      out.error = q(report.message());
      return out;
    }
    out.summary = (report->ranks == 1 ? tr("Imported %1 events of 1 rank into %2")
                                      : tr("Imported %1 events of %3 ranks into %2"))
                      .arg(q(format_count(static_cast<double>(report->events))), output,
                           QString::number(report->ranks));
    if (!report->clock_alignment.empty())
      out.summary += tr(" (clocks aligned by %1)").arg(q(report->clock_alignment));
    for (const std::string& w : report->warnings)
      out.warnings += (out.warnings.isEmpty() ? QString() : QStringLiteral("\n")) + q(w);
    // What the import left out, as the CLI lists it (the app said only
    // "Imported 10 events" of a trace with bad records).
    for (const auto& [what, n] : report->skipped) {
      if (n <= 0) continue;
      out.warnings += (out.warnings.isEmpty() ? QString() : QStringLiteral("\n")) +
                      tr("not imported: %1 %2").arg(n).arg(q(what));
    }
    for (const std::string& loss : report->losses)
      out.warnings += (out.warnings.isEmpty() ? QString() : QStringLiteral("\n")) + output + QStringLiteral(": ") + q(loss);
    return out;
  }).then(this, [this, output, name](const Imported& imported) {
    importing_.removeOne(name);  // another may still be written
    if (!imported.error.isEmpty()) {
      showMessage(tr("The trace could not be imported: %1").arg(imported.error),
                  int(MessageLevel::error));
      emit runImported({}, imported.error);
      return;
    }
    showMessage(imported.summary, int(MessageLevel::info));
    // Said where it stays until dismissed: a rank aligned on collectives
    // that disagree may be off by that much (the app kept only the error).
    if (!imported.warnings.isEmpty()) {
      showMessage(tr("%1. Warning: %2").arg(imported.summary, imported.warnings),
                  int(MessageLevel::warning));
    }
    openRun(output);
    emit runImported(output, {});
  });
}

bool MainWindow::exportRun(RunExport kind, const QString& path, bool range_only) {
  if (!exporting_.isEmpty()) {
    showMessage(tr("%1 is still being written: export again when it is done").arg(exporting_),
                int(MessageLevel::warning));
    return false;
  }
  auto task = run_view_->prepareExport(kind, path, range_only);
  if (!task) {
    showRunMessage(q(task.message()), MessageLevel::error);
    return false;
  }
  exporting_ = QFileInfo(path).fileName();
  statusBar()->showMessage(tr("Writing %1…").arg(exporting_));  // until it is written
  QtConcurrent::run(&jobs_, [write = std::move(task.value())] {
    auto files = write();
    return files ? std::pair(files.value(), QString()) : std::pair(QStringList(), q(files.message()));
  }).then(this, [this](const std::pair<QStringList, QString>& written) {
    const auto& [files, error] = written;
    if (error.isEmpty()) {
      QStringList names;
      for (const QString& file : files)
        names << QFileInfo(file).fileName();
      showMessage(tr("Exported %1").arg(names.join(QStringLiteral(", "))),
                  int(MessageLevel::info));
    } else {
      showMessage(error, int(MessageLevel::error));
    }
    exporting_.clear();
    emit runExported(files, error);
  });
  return true;
}

bool MainWindow::exportPdf(const QString& path) {
  auto a = analysis_->latest();
  const Status s = a ? cs::gui::exportPdf(path, *a, reportFigures(), currentPlanName())
                     : Status(Error{"no estimate yet"});
  showMessage(s ? tr("Exported %1").arg(QFileInfo(path).fileName()) : q(s.message()),
              int(s ? MessageLevel::info : MessageLevel::error));
  return bool(s);
}

bool MainWindow::exportHtml(const QString& path) {
  auto a = analysis_->latest();
  const Status s = a ? cs::gui::exportHtml(path, *a, reportFigures(), currentPlanName())
                     : Status(Error{"no estimate yet"});
  showMessage(s ? tr("Exported %1").arg(QFileInfo(path).fileName()) : q(s.message()),
              int(s ? MessageLevel::info : MessageLevel::error));
  return bool(s);
}

bool MainWindow::exportPlanJson(const QString& path) {
  auto a = analysis_->latest();
  const Status s = a ? cs::gui::exportPlanJson(path, *a) : Status(Error{"no estimate yet"});
  if (!s) {
    showMessage(q(s.message()), int(MessageLevel::error));
    return false;
  }
  const QString file = QFileInfo(path).fileName();
  if (!a->problems.empty()) {
    // Written all the same (a plan being worked on is worth keeping), but
    // not said to be ready to run: `clusterscope validate` refuses it.
    showMessage(tr("Exported %1, but the plan cannot run: %2 (%3 problems in all; clusterscope "
                   "validate lists them)")
                    .arg(file, q(a->problems.front().pointer + ": " + a->problems.front().message),
                         QString::number(a->problems.size())),
                int(MessageLevel::warning));
    return true;
  }
  showMessage(tr("Exported %1: run it with clusterscope run --plan %1").arg(file),
              int(MessageLevel::info));
  return true;
}

void MainWindow::setDarkTheme(bool dark) {
  applyTheme(dark);
  applyChartTheme(this);
  if (auto* a = findChild<QAction*>(QStringLiteral("actionDark")); a && a->isChecked() != dark) {
    a->setChecked(dark);
  }
  QSettings().setValue(QStringLiteral("view/dark"), dark);
}

bool MainWindow::pinCurrentPlan() {
  auto a = analysis_->latest();
  const ProjectPlan* p = workspace_->project().current();
  if (!a || !a->estimate || !p) {
    showMessage(tr("Nothing to pin: the current plan has no estimate."),
                int(MessageLevel::warning));
    return false;
  }
  plan::RankedPlan r;
  r.nodes = a->plan.cluster.nodes;
  r.parallel = a->plan.parallel;
  r.precision = a->plan.precision;
  r.estimate = *a->estimate;
  if (!pinned_->pin(r, q(p->name + " on " + shown_name(a->plan.cluster)), a->plan.cluster,
                    a->plan.workload)) {
    showMessage(tr("Already pinned, or %1 plans pinned: unpin one first.").arg(kMaxPinned),
                int(MessageLevel::warning));
    return false;
  }
  dock(QStringLiteral("compareDock"))->raise();
  return true;
}

void MainWindow::addPlan() {
  Project after = workspace_->project();
  std::vector<std::string> names;
  for (const ProjectPlan& p : after.plans)
    names.push_back(p.name);
  if (!after.current()) {
    // A project with no plan (a file that held none) gets the default plan,
    // on the project's first cluster and workload where it has them: "add
    // one" was said, and Ctrl+T did nothing.
    auto fresh = default_project(workspace_->catalog());
    if (!fresh) {
      showMessage(q(fresh.message()), int(MessageLevel::error));
      return;
    }
    if (after.clusters.empty()) after.clusters.push_back(fresh->clusters.front());
    if (after.workloads.empty()) after.workloads.push_back(fresh->workloads.front());
    ProjectPlan plan = fresh->plans.front();
    plan.cluster = after.clusters.front().name;
    plan.workload = after.workloads.front().name;
    const QString text = tr("New plan %1").arg(q(plan.name));
    after.plans.push_back(std::move(plan));
    after.current_plan = 0;
    workspace_->edit(text, std::move(after));
    return;
  }
  ProjectPlan copy = *after.current();
  copy.name = unique_name(copy.name, names);
  after.plans.push_back(copy);
  after.current_plan = int(after.plans.size()) - 1;
  workspace_->edit(tr("New plan %1").arg(q(copy.name)), std::move(after));
}

void MainWindow::deletePlan() {
  Project after = workspace_->project();
  if (after.plans.size() <= 1) {
    showMessage(tr("A project keeps at least one plan."), int(MessageLevel::warning));
    return;
  }
  const QString name = q(after.plans[std::size_t(after.current_plan)].name);
  after.plans.erase(after.plans.begin() + after.current_plan);
  after.current_plan = std::min(after.current_plan, int(after.plans.size()) - 1);
  workspace_->edit(tr("Delete plan %1").arg(name), std::move(after));
}

void MainWindow::stepPlan(int delta) {
  const Project& project = workspace_->project();
  const int n = int(project.plans.size());
  if (n < 2) return;
  workspace_->selectPlan((project.current_plan + delta + n) % n);
}

bool MainWindow::stopRunFirst() {
  auto going = [this] { return runs_->running() || runs_->profiling(); };
  if (!going()) return true;
  // A run records itself into the project open when it ends: closed under
  // it, the record was lost (or went into the next project). A profiled
  // command alike; the window closed under it left the command running.
  const QString what = runs_->running() ? tr("A run") : tr("A profiled command");
  const auto answer =
      ask(this, tr("%1 is in progress").arg(what),
          tr("%1 is in progress. Stop it (its ranks close their stores) and record it in %2?")
              .arg(what, workspace_->displayName()),
          QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
  if (answer != QMessageBox::Yes) return false;
  QEventLoop loop;
  connect(runs_, &RunsPanel::runFinished, &loop, &QEventLoop::quit);
  connect(runs_, &RunsPanel::profileFinished, &loop, &QEventLoop::quit);
  bool timed_out = false;
  QTimer::singleShot(120000, &loop, [&] {
    timed_out = true;
    loop.quit();
  });
  runs_->stop();  // both, where a run and a profiled command are going
  while (going() && !timed_out)
    loop.exec();
  return !going();
}

bool MainWindow::confirmDiscard() {
  if (!stopRunFirst()) return false;
  if (!workspace_->isModified()) return true;
  // The one question a panel cannot ask: the window is about to change under it.
  const auto answer =
      ask(this, tr("Unsaved changes"),
          tr("Save the changes to %1 first?").arg(workspace_->displayName()),
          QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
  if (answer == QMessageBox::Cancel) return false;
  if (answer == QMessageBox::Save) {
    if (workspace_->save()) return true;
    const QString path = QFileDialog::getSaveFileName(this, tr("Save project"), {}, kFilter);
    return !path.isEmpty() && saveProjectAs(path);
  }
  return true;
}

bool MainWindow::stopCalibrationFirst() {
  auto* panel = findChild<CalibrationPanel*>();
  if (!panel || !panel->calibrating()) return true;
  // Closed under it, the sweep was cancelled with no word, and minutes of
  // measurement with it.
  const auto answer =
      ask(this, tr("A calibration is in progress"),
          tr("A calibration of this machine is in progress. Stop it and close? No presets are "
             "saved from it."),
          QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
  if (answer != QMessageBox::Yes) return false;
  QEventLoop loop;
  connect(panel, &CalibrationPanel::failed, &loop, &QEventLoop::quit);
  connect(panel, &CalibrationPanel::calibrated, &loop, &QEventLoop::quit);
  QTimer::singleShot(120000, &loop, &QEventLoop::quit);
  panel->cancel();
  if (panel->running()) loop.exec();
  return !panel->running();
}

bool MainWindow::closeWhileWriting() {
  const QString writing =
      !importing_.isEmpty()
          ? tr("The import of %1").arg(importing_.join(QStringLiteral(", ")))
          : (!exporting_.isEmpty() ? tr("The export of %1").arg(exporting_) : QString());
  if (writing.isEmpty()) return true;
  // It cannot be stopped half-way: closed, the window went and the app
  // stayed on, out of sight, until it was done.
  const auto answer =
      ask(this, tr("Still writing"),
          tr("%1 is still being written. Close anyway? The app ends once it is written; "
             "nothing is lost.")
              .arg(writing),
          QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
  return answer == QMessageBox::Yes;
}

void MainWindow::commitTypedText() {
  auto* edit = qobject_cast<QLineEdit*>(QApplication::focusWidget());
  if (edit && edit->isModified() && edit->window() == this) emit edit->editingFinished();
}

void MainWindow::closeEvent(QCloseEvent* event) {
  commitTypedText();
  if (!closeWhileWriting() || !stopCalibrationFirst() || !confirmDiscard()) {
    event->ignore();
    return;
  }
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/state"), saveState());
  workspace_->closeSession();
  event->accept();
}

}  // namespace cs::gui
