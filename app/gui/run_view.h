#pragma once
// A recorded run: its timeline (per rank, lane by lane) above the analyses of
// core/trace_analysis.h — per-rank stacked bars (compute, exposed and hidden
// communication, memory, idle), ranks with their overlap and stragglers, the
// kernel and communication summaries (sortable, filterable; a row lists its
// instances, an instance is shown on the timeline), and predicted against
// measured. A click on the timeline shows the event's details; Shift+drag a
// range shows its breakdown. The store is read on worker threads, each with
// its own reader; results come back as values, stale ones dropped by job id.
// Exports go through core/trace_export.h, the same code as the CLI, and are
// written on a worker thread.

#include <QPointF>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <QWidget>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/plans.h"
#include "core/result.h"
#include "core/trace_analysis.h"
#include "core/trace_export.h"

class QBoxLayout;
class QChartView;
class QCheckBox;
class QLabel;
class QLineEdit;
class QResizeEvent;
class QScrollArea;
class QSplitter;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTabWidget;
class QTableView;
class QTableWidget;
class QTextBrowser;
class QTextDocument;

namespace cs::gui {

class CriticalPathView;
class TimelineWidget;

// One counter series of a store (a rank's GPU memory in use) as drawn: ms
// from the trace's start against its value.
struct CounterLine {
  QString title;  // "rank 0: <name>"
  std::int32_t rank = 0;
  std::string name;    // the counter's, as its store names it
  bool bytes = false;  // a size: drawn in GiB
  std::vector<QPointF> points;         // (ms from the trace's start, value)
  std::vector<std::int64_t> times_ns;  // parallel to points: ns from the trace's start
};

// The Counters chart's tooltip at `x_ms` on `line`: the value it holds there
// (its sample at or before), in the counter's unit, and since when, as the
// timeline's counter lanes say it.
QString counterPointTip(const CounterLine& line, double x_ms);

// What a run exports: reports, the CSV tables, a Chrome trace (Perfetto).
// chrome_trace_critical_path: the Chrome trace with each step's critical
// path on a process of its own (trace export --critical-path).
enum class RunExport : int { html, pdf, csv, chrome_trace, chrome_trace_critical_path };

class RunView : public QWidget {
  Q_OBJECT

 public:
  explicit RunView(QWidget* parent = nullptr);
  ~RunView() override;

  // Opens a trace store: the timeline and the analyses load in the background
  // (storeOpened, then analysisReady). A file that is not a store, of another
  // schema version or still being written gets a message, never a crash.
  void openStore(const QString& path);
  QString storePath() const { return path_; }
  QString message() const { return message_; }  // why the store could not be shown
  QString upgradeNote() const { return upgrade_note_; }  // what opening did to an older store
  const trace::RunAnalysis* analysis() const { return analysis_.get(); }
  QString title() const { return title_; }
  // What SQLite's check of every page found wrong with the store ("" when
  // whole, or not checked yet): its figures may be wrong. integrityChecked
  // follows the analysis.
  QString damage() const { return damage_; }
  QLabel* header() const { return header_; }  // the title, ranks, source, path and how it ended

  TimelineWidget* timeline() const { return timeline_; }
  TimelineWidget* predictedTimeline() const { return predicted_; }
  QTabWidget* tabs() const { return tabs_; }
  QTextBrowser* details() const { return details_; }
  QTextBrowser* rangeBreakdown() const { return range_text_; }
  QChartView* breakdownChart() const { return chart_; }
  // The counters' tab (GPU memory in use over time), there only when the
  // store samples a counter.
  QChartView* counterChart() const { return counter_chart_; }
  QWidget* counterTab() const;  // the chart's tab (it scrolls in it)
  QTableWidget* rankTable() const { return rank_table_; }
  QTableWidget* streamTable() const { return stream_table_; }
  QTableView* kernelTable() const { return kernel_view_; }
  QTableView* collectiveTable() const { return collective_view_; }
  QSortFilterProxyModel* kernelProxy() const { return kernel_proxy_; }
  QSortFilterProxyModel* collectiveProxy() const { return collective_proxy_; }
  // The other tables beside the kernels: the CUDA API calls (Nsight Systems'
  // cuda_api_sum), the device copies and sets by kind (cuda_gpu_mem_*_sum),
  // the annotation ranges (nvtx_sum). A row lists its instances.
  struct SummaryTable {
    QStandardItemModel* model = nullptr;
    QSortFilterProxyModel* proxy = nullptr;
    QTableView* view = nullptr;
  };
  const SummaryTable& apiCallTable() const { return api_calls_; }
  const SummaryTable& copyTable() const { return copies_; }
  const SummaryTable& rangeTable() const { return ranges_; }
  QLineEdit* filterField() const { return filter_; }
  QLineEdit* searchField() const { return search_; }
  QTableWidget* instances() const { return instances_; }
  QTableWidget* predictionTable() const { return prediction_table_; }
  // The range breakdown last shown (empty before a range was selected).
  const std::optional<trace::RunAnalysis>& rangeAnalysis() const { return range_analysis_; }

  // Lists the instances of the kernel or collective in the row (a row of the
  // proxy) of the table shown; instancesReady follows.
  void showKernelInstances(int proxy_row);
  // The events named as the row's first cell: kernels, calls, copies, ranges.
  void showNamedInstances(const QSortFilterProxyModel* proxy, int proxy_row);
  void showCollectiveInstances(int proxy_row);

  // Holds the run against the planner's prediction made now, with the
  // presets on disk now (calibrations and learning saved since the app
  // started included): the run's calibrated cluster, else its GPU's
  // datasheet. Not the prediction it recorded. predictionReady follows.
  void predictAgain();
  // Holds the run against the planner's prediction of `plan` as it stands
  // (a program of the user's own: `trace stats --plan`), named `name` in the
  // prediction tab ("the current plan, LLaMA-2 7B on 32 H100").
  // predictionReady follows.
  // Of predictAgain and predictWithPlan, the last one asked for is shown
  // (and says predictionReady), whichever ends last.
  void predictWithPlan(const Plan& plan, const QString& name);
  // Whether work is still going on a worker thread (an answer that ends
  // now arrives with the next turn of the event loop).
  bool working() const;
  // Holds the run in `other` against this one (trace compare, on a worker
  // thread): a "Compared with" tab; comparisonReady follows.
  void compareWith(const QString& other);
  QTableWidget* comparisonTable() const { return comparison_table_; }
  CriticalPathView* criticalPath() const { return critical_path_; }
  // What the prediction tab holds: "" (the run's own), or the cluster the
  // last predictAgain predicted on.
  QString predictedAgainOn() const { return predicted_again_on_; }
  // Why that prediction is not the calibration of the run's machine ("no
  // calibration of this GPU: predicted with the datasheet of h200"), as
  // `trace stats --predict-again` lists them.
  QStringList predictedAgainNotes() const { return predicted_again_notes_; }
  // The plan the last predictWithPlan held the run against; "" otherwise.
  QString predictedFromPlan() const { return predicted_from_plan_; }

  // Exports; `range_only` limits them to the timeline's selected range.
  // CSV writes every table as <stem>.<table>.csv beside `path`.
  // An export made ready here, on the GUI thread (its pictures drawn, the
  // view's state copied), that touches no widget: run it on a worker thread.
  // It returns the files it wrote.
  using ExportTask = std::function<Result<QStringList>()>;
  Result<ExportTask> prepareExport(RunExport kind, const QString& path,
                                   bool range_only = false) const;
  // Prepares the export and writes it on this thread.
  Result<QStringList> exportNow(RunExport kind, const QString& path,
                                bool range_only = false) const;
  // The breakdown chart as the PDF report shows it, whichever tab is open.
  QImage breakdownPicture() const;
  // The PDF report laid out in `document` (A4 across) from core's HTML
  // report: its charts as pictures, each at its aspect, the per-rank
  // breakdown the Run view's (`breakdown`), the plan as a table, and the
  // `timeline` at the end. Returns the HTML it set. Reentrant.
  static QString pdfReportDocument(QTextDocument& document, QString core_html,
                                   const QImage& breakdown, const QImage& timeline);

 signals:
  void storeOpened(const QString& path, const QString& error);
  void analysisReady(const QString& error);
  void rangeReady(const QString& error);
  void instancesReady(int count, const QString& error);
  void comparisonReady(const QString& error);
  // The event correlated with the one shown was selected (its id), or why none was.
  void correlatedShown(std::optional<std::int64_t> event_id, const QString& error);
  // The rate of the kernels a GPU rank's operation launched was added to its details.
  void kernelRateShown();
  void predictionReady(const QString& cluster, const QString& error);
  void integrityChecked(const QString& damage);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void startAnalysis();
  void checkIntegrity();
  void showAnalysis();
  // The counters' chart, its tab shown or removed.
  void showCounters(const std::vector<CounterLine>& lines);
  // Selects the event sharing the shown event's correlation id on its rank:
  // a runtime call's kernel (or copy), a kernel's launching call.
  void goToCorrelated();
  // Looks the shown event's correlated one up and has the timeline link the
  // two; the details then say the launch latency.
  void linkCorrelated();
  // Whether `event` is a host operation of a rank with GPU streams.
  bool launchesGpuWork(const trace::StoredEvent& event) const;
  // Appends to the details the rate of the kernels operation `op` launched.
  void rateByKernels(const trace::StoredEvent& op);
  // The kernel and collective tables of the run, or of the selected range.
  void fillSummaries(const trace::RunAnalysis& a, std::optional<trace::TimeRange> range);
  void analyseRange(std::optional<trace::TimeRange> range);
  // `origin`: the time its start counts from (the measured run's start, or
  // the predicted step's when it is not on the run's clock); `measured`: an
  // event of the run, not of the predicted lanes.
  void showDetails(const std::optional<trace::StoredEvent>& event, const QString& name,
                   const QString& lane, const QString& error, std::int64_t origin,
                   bool measured);
  // `events` of `total` instances (the longest where there are more).
  void fillInstances(std::vector<trace::StoredEvent> events, std::int64_t total,
                     const QString& error);
  void startPrediction(const std::string& plan_json, const std::vector<std::int64_t>& step_starts);
  // The report's timeline picture (of pictureWindow) as an HTML section:
  // the view is copied now, the store read and the picture drawn when the
  // function is called (on the export's worker thread).
  std::function<QString()> timelineSection(bool range_only) const;
  // What a report's timeline picture shows: the selected range, else one
  // step (the second, past the warm-up, when there are several), else the view.
  std::pair<trace::TimeRange, QString> pictureWindow(bool range_only) const;

  QString path_;
  QString message_;
  QString upgrade_note_;  // what opening did to an older store (trace::upgrade_note)
  QString title_;
  QString damage_;
  bool integrity_checked_ = false;  // damage_ says what the check found
  std::uint64_t job_ = 0;
  std::uint64_t range_job_ = 0;
  std::uint64_t instance_job_ = 0;
  std::uint64_t correlation_job_ = 0;
  std::uint64_t link_job_ = 0;
  std::uint64_t rate_job_ = 0;
  std::uint64_t comparison_job_ = 0;
  std::uint64_t prediction_job_ = 0;  // predictAgain and predictWithPlan: the last asked wins
  QTableWidget* comparison_table_ = nullptr;
  CriticalPathView* critical_path_ = nullptr;
  std::optional<trace::StoredEvent> details_event_;  // the measured event the details show
  std::shared_ptr<const trace::RunAnalysis> analysis_;
  std::optional<trace::RunAnalysis> range_analysis_;
  std::int64_t trace_start_ns_ = 0;
  // The predicted stores written for the lanes, newest last: at most the
  // one shown and the one it replaces are kept.
  std::deque<QString> predicted_paths_;
  QString predicted_again_on_;
  QStringList predicted_again_notes_;
  QString predicted_from_plan_;  // predictWithPlan's name of its plan
  // predictAgain and predictWithPlan: `predict` runs on a worker thread.
  using Predict = std::function<Result<trace::PredictedStep>(const trace::TraceReader&)>;
  void predictWith(Predict predict, const QString& plan_name);
  QString not_predictable_;         // why no prediction can be made (a calibration store)
  bool predicted_aligned_ = false;  // the predicted lane follows the measured window

  QLabel* header_;
  TimelineWidget* timeline_;
  TimelineWidget* predicted_;
  QLabel* predicted_label_;
  QBoxLayout* timelines_layout_ = nullptr;  // the measured lanes over the predicted ones
  QScrollArea* predicted_area_ = nullptr;   // the predicted lanes, scrolled
  void setPredictedShown(bool shown);
  QLineEdit* search_;
  QLabel* search_status_;
  QCheckBox* critical_box_;        // draws the critical path of the steps in view
  QLabel* critical_status_;        // ... and says which steps, or why none
  bool status_says_step_ = false;  // search_status_ names the step the view shows
  QTabWidget* tabs_;
  QTextBrowser* details_;
  QTextBrowser* range_text_;
  QChartView* chart_;
  QChartView* counter_chart_;
  QScrollArea* counter_area_;  // the counters' tab: the chart scrolls rather than shrink
  QSplitter* lanes_and_tabs_;  // the timeline above the tabs
  bool split_set_ = false;     // the timeline given its share at the first real size
  QTableWidget* rank_table_;
  QTableWidget* stream_table_;  // each stream's idle time (HTA's idle time breakdown)
  QStandardItemModel* kernel_model_;
  QStandardItemModel* collective_model_;
  QSortFilterProxyModel* kernel_proxy_;
  QSortFilterProxyModel* collective_proxy_;
  QTableView* kernel_view_;
  QTableView* collective_view_;
  SummaryTable api_calls_;
  SummaryTable copies_;
  SummaryTable ranges_;
  QLineEdit* filter_;
  QTableWidget* instances_;
  QLabel* instances_note_;   // how many instances, and which are listed
  QLabel* summaries_scope_;  // whether the tables hold the whole run or the selected range
  // The event a walk through the instances list selected: its details keep
  // the list in front (a click's, even one made before the walk's answer
  // came, bring them forward). 0: none.
  std::int64_t walked_event_ = 0;
  QTableWidget* prediction_table_;
  // Where its reads run: their answers come back to it, so it waits for
  // them when it closes (one that came as it was destroyed was a crash).
  QThreadPool jobs_;
};

}  // namespace cs::gui
