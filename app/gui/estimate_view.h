#pragma once
// The estimate of the current plan, redrawn on every change: headline
// figures (tokens/s, MFU, step time, time to train, GPU-hours, cost, energy),
// memory per GPU as a stacked bar against the GPU's capacity, step time as a
// stacked bar, and the predicted timeline of one step for one rank per
// pipeline stage. A plan that cannot run shows why instead.

#include <QWidget>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "app/gui/analysis.h"

class QLabel;

namespace cs::gui {

class HeadlineTiles;
class PredictedTimelineService;
class StackedBarWidget;
class TimelineWidget;

class EstimateView : public QWidget {
  Q_OBJECT

 public:
  EstimateView(AnalysisService* analysis, QWidget* parent = nullptr);

  StackedBarWidget* memoryBar() const { return memory_; }
  StackedBarWidget* timeBar() const { return time_; }
  TimelineWidget* timeline() const { return timeline_; }
  PredictedTimelineService* predictedTimeline() const { return predicted_; }
  QLabel* headline(const QString& key) const;  // "tokens_per_second", "mfu", ...
  QLabel* caption(const QString& key) const;   // the words under that figure
  // How many headline tiles a row holds at the view's width (4, 2 or 1).
  int headlineColumns() const;
  QLabel* messageLabel() const { return message_; }
  // The job whose estimate both bars have painted (0 before the first).
  std::uint64_t paintedJob() const;
  std::uint64_t shownJob() const { return shown_job_; }
  // The predicted timeline of the shown estimate is on screen (or there is none).
  bool timelineSettled() const;

  void showAnalysis(const std::shared_ptr<const PlanAnalysis>& analysis);

  // The headline figures of an estimate as (caption, value) pairs, in the
  // order they are shown: the report uses the same.
  static std::vector<std::pair<QString, QString>> headlineFigures(const plan::Estimate& e,
                                                                  const Plan& plan);

 signals:
  void painted(std::uint64_t job);

 private:
  AnalysisService* analysis_;
  HeadlineTiles* tiles_;
  std::map<QString, QLabel*> headlines_;
  std::map<QString, QLabel*> captions_;
  QLabel* message_;
  StackedBarWidget* memory_;
  StackedBarWidget* time_;
  QLabel* timeline_title_;
  TimelineWidget* timeline_;
  PredictedTimelineService* predicted_;
  std::uint64_t shown_job_ = 0;
  std::optional<Plan> timeline_plan_;  // to predict once the bars are painted
  std::uint64_t timeline_dropped_ = 0;  // predicted jobs up to this are not shown
};

}  // namespace cs::gui
