#pragma once
// The runs panel: launches the project's current plan for real through the
// launcher of `clusterscope run` (profiler/plan_run.h builds the same worker
// arguments), on this machine (CUDA when a GPU is here, else the CPU engine,
// said plainly), on the hosts of a hostfile, or as a Slurm job. While it runs:
// a progress bar with ETA, loss and step-time charts, each rank's status;
// cancel. At the end a report (a crashed or hung rank named, with its last
// lines; the partial run still openable) and an entry in the project's run
// history, each reopenable.
//
// The launcher runs on its own threads and queues its events; the panel
// takes them on the GUI thread every 100 ms, so no launcher thread ever
// touches a widget.

#include <QStringList>
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "core/result.h"
#include "profiler/launcher.h"

class QChartView;
class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QLineSeries;
class QListWidget;
class QProcess;
class QProgressBar;
class QScrollArea;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTextBrowser;
class QTimer;

namespace cs::gui {

class Workspace;

class RunsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsPanel(Workspace* workspace, QWidget* parent = nullptr);
  ~RunsPanel() override;  // cancels a run still going

  // Launches the current plan with the panel's settings; fails (with the
  // message shown) when nothing could be started.
  Status launch();
  // The Cancel button: stop() first, then the ranks killed if pressed again.
  void cancel();
  // Stops what is going, each given its grace: the run's ranks close their
  // stores, a profiled command gets SIGTERM. Never kills.
  void stop();
  bool running() const { return bool(launcher_); }

  // `clusterscope profile --out <store> -- COMMAND...`: the CLI's own command,
  // run as a process (the clusterscope program beside this one, else on
  // PATH); profileFinished reports the store (empty when none was written)
  // and what the command said.
  Status profileCommand(const QStringList& command);
  bool profiling() const { return profiler_ != nullptr; }
  QLineEdit* profileField() const { return profile_command_; }

  // Settings (the form's fields).
  QComboBox* backendBox() const { return backend_; }
  QComboBox* placementBox() const { return placement_; }
  QLineEdit* hostfileField() const { return hostfile_; }
  QLineEdit* folderField() const { return folder_; }
  QSpinBox* stepsBox() const { return steps_; }
  QSpinBox* hangBox() const { return hang_; }

  QLabel* engineLabel() const { return engine_; }
  // Before a launch on this machine: CPU-engine ranks that outnumber its
  // cores (a warning), or more than `clusterscope run` starts (its refusal).
  QLabel* ranksWarning() const { return ranks_warning_; }
  QProgressBar* progress() const { return progress_; }
  QLabel* etaLabel() const { return eta_; }
  QTableWidget* rankTable() const { return rank_table_; }
  QTextBrowser* report() const { return report_; }
  QListWidget* history() const { return history_; }
  int lossPoints() const;
  int stepTimePoints() const;
  // The ranks as the launcher last saw them (pid, step, ...).
  std::vector<launch::RankStatus> ranks() const;
  std::optional<launch::RunReport> lastReport() const { return last_report_; }

 signals:
  void runStarted(const QString& store);
  void runFinished(const QString& outcome, const QString& store);
  // "Open" on a run of the history, or on the report of the last run.
  void openRunRequested(const QString& store);
  void profileFinished(const QString& store, const QString& output);

 private:
  QScrollArea* scroll_ = nullptr;
  void poll();
  void handle(const launch::LaunchEvent& event);
  void finish();
  void refreshHistory();
  void recordRun(const QString& title, const QString& plan, const QString& store,
                 const QString& outcome, const QString& message);
  void setRankRow(int rank, const QString& state, const QString& detail = {});
  QString describeEngine() const;
  void refreshRanksWarning();

  Workspace* workspace_;
  std::unique_ptr<launch::Launcher> launcher_;
  std::optional<launch::RunReport> last_report_;
  QString store_;
  QString plan_name_;
  QString run_title_;  // what ran, as the store is titled ("…, scaled to …, on 2 ranks")
  QString started_;
  QStringList run_notes_;  // said before the run started, kept in its report at the end
  int total_steps_ = 0;
  std::vector<double> rank0_step_seconds_;  // for the ETA
  std::vector<int> rank_steps_;

  QComboBox* backend_;
  QComboBox* placement_;
  QLineEdit* hostfile_;
  QLineEdit* slurm_partition_;
  QLineEdit* slurm_account_;
  QLineEdit* slurm_time_;
  QLineEdit* folder_;
  QSpinBox* steps_;
  QSpinBox* hang_;
  QLabel* engine_;
  QLabel* ranks_warning_;
  bool gpu_here_ = false;  // probed once: the driver's start takes a while
  bool cancel_asked_ = false;  // the run's Cancel was pressed: a second kills its ranks
  QPushButton* launch_button_;
  QPushButton* cancel_button_;
  QPushButton* open_button_;
  QProgressBar* progress_;
  QLabel* eta_;
  QChartView* loss_view_;
  QChartView* time_view_;
  QLineSeries* loss_;
  QLineSeries* step_time_;
  QTableWidget* rank_table_;
  QTextBrowser* report_;
  QListWidget* history_;
  QTimer* timer_;
  QLineEdit* profile_command_;
  QCheckBox* profile_capture_range_;  // --capture-range cudaProfilerApi
  QCheckBox* profile_plan_;           // --plan: the current plan's prediction in the store
  QPushButton* profile_button_;
  QProcess* profiler_ = nullptr;
};

}  // namespace cs::gui
