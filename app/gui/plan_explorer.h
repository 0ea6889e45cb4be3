#pragma once
// The plan explorer: the planner's search over every plan for the current
// cluster and workload, run on a worker thread with a progress bar and
// cancel; its ranked plans in a sortable, filterable table and as a scatter
// of throughput against memory per GPU with the Pareto front; a click on a
// point or a row makes that plan current; plans can be pinned to compare.

#include <QFutureWatcher>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <stop_token>

#include "planners/search.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QChartView;
class QScatterSeries;
class QLineSeries;

namespace cs::gui {

class PinnedPlans;
class RankedPlanFilter;
class RankedPlanModel;
class Workspace;

// What one search run hands back to the GUI thread.
struct SearchOutcome {
  std::uint64_t job = 0;
  std::string error;  // the search could not start
  std::string subject;  // the cluster and workload searched (subject_of)
  Cluster cluster;
  Workload workload;
  bool per_sample = false;  // the workload counts samples (a CNN), not tokens
  int gpus = 0;             // the cluster's GPUs
  bool all_gpus = true;     // plans had to use every one
  plan::SearchResult result;
};

class PlanExplorer : public QWidget {
  Q_OBJECT

 public:
  PlanExplorer(Workspace* workspace, PinnedPlans* pinned, QWidget* parent = nullptr);
  ~PlanExplorer() override;

  RankedPlanModel* model() const { return model_; }
  RankedPlanFilter* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  QScatterSeries* pointsSeries() const { return points_; }
  QScatterSeries* frontSeries() const { return front_points_; }
  QProgressBar* progress() const { return progress_; }
  QLabel* statusLabel() const { return status_; }
  // Under the table while its plans are of several precisions: their MFUs
  // are of different peaks (as `clusterscope search` says).
  QLabel* mfuNoteLabel() const { return mfu_note_; }
  QLineEdit* filterEdit() const { return filter_; }
  QCheckBox* frontOnlyBox() const { return front_only_; }
  QLineEdit* globalBatchEdit() const { return batches_; }
  QComboBox* objectiveBox() const { return objective_; }
  QSpinBox* topKBox() const { return top_k_; }
  bool running() const { return running_; }
  // Where a plan sits on the chart: (GiB per GPU, thousand tokens/s).
  static QPointF chartPoint(const plan::Estimate& estimate);
  // Why a search that ran to its end kept no plan, as `clusterscope search`
  // says it; "" where it kept some.
  static QString emptyResultReason(const SearchOutcome& outcome);
  std::uint64_t job() const { return job_; }

 public slots:
  void runSearch();
  void cancelSearch();
  // Makes the plan of a table row (of the proxy) the current plan.
  void makeRowCurrent(int proxy_row);
  // Makes a ranked plan current (one undo step), when it was estimated for
  // the current plan's cluster and workload (`subject`); else says so.
  bool makeCurrent(const plan::RankedPlan& plan, const std::string& subject);
  // Pins the selected row's plan; false when four are pinned.
  bool pinSelected();
  // Makes the plan nearest a point of the chart current (chart units).
  void pickPoint(const QPointF& point);

 signals:
  void searchFinished(std::uint64_t job);

 private:
  void onProgress(int value);
  void onFinished();
  void updateChart();
  void selectRow(int source_row);
  // Marks the results as another cluster's or workload's once the project's
  // differ from those searched (and clears the mark on undo).
  void checkStale();

  Workspace* workspace_;
  PinnedPlans* pinned_;
  QComboBox* objective_;
  QLineEdit* batches_;
  QSpinBox* top_k_;
  QCheckBox* all_gpus_;
  QPushButton* run_;
  QPushButton* cancel_;
  QProgressBar* progress_;
  QLabel* status_;
  QLabel* mfu_note_;
  QLineEdit* filter_;
  QCheckBox* front_only_;
  QTableView* table_;
  QChartView* chart_view_;
  QScatterSeries* points_;
  QScatterSeries* front_points_;
  QLineSeries* front_line_;
  QScatterSeries* selected_;
  RankedPlanModel* model_;
  RankedPlanFilter* proxy_;

  QFutureWatcher<SearchOutcome> watcher_;
  std::shared_ptr<std::stop_source> stop_;
  std::uint64_t job_ = 0;
  std::string searched_for_;  // subject_of the plan the results are for
  Cluster searched_cluster_;  // and its cluster and workload (a pin keeps them)
  Workload searched_workload_;
  QString result_status_;     // the status the results came with
  QString input_error_;       // the search asked for last was refused: why
  bool stale_ = false;
  bool running_ = false;
};

}  // namespace cs::gui
