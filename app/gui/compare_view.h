#pragma once
// Up to four pinned plans side by side: a table of their figures and
// controls, and grouped bars of the figures that matter (each relative to the
// best of the pinned plans, so that throughput and memory share one axis).

#include <QObject>
#include <QWidget>
#include <vector>

#include "planners/search.h"

class QTableWidget;
class QPushButton;
class QLabel;
class QStackedWidget;

class QChartView;
class QBarSeries;

namespace cs::gui {

inline constexpr int kMaxPinned = 4;

class PinnedPlans : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;
  // False (and nothing pinned) when four are pinned already or it is pinned
  // (the same plan on the same cluster and workload, `subject_of`).
  bool pin(const plan::RankedPlan& plan, const QString& name, const std::string& subject);
  void unpin(int index);
  void clear();
  int size() const { return int(plans_.size()); }
  const plan::RankedPlan& at(int i) const { return plans_[std::size_t(i)]; }
  const QString& nameAt(int i) const { return names_[std::size_t(i)]; }
  const std::string& subjectAt(int i) const { return subjects_[std::size_t(i)]; }

 signals:
  void changed();

 private:
  std::vector<plan::RankedPlan> plans_;
  std::vector<QString> names_;
  std::vector<std::string> subjects_;
};

class CompareView : public QWidget {
  Q_OBJECT

 public:
  CompareView(PinnedPlans* pinned, QWidget* parent = nullptr);
  QTableWidget* table() const { return table_; }
  QBarSeries* bars() const { return bars_; }

 signals:
  void makeCurrent(const cs::plan::RankedPlan& plan, const std::string& subject);

 private:
  void refresh();

  PinnedPlans* pinned_;
  QTableWidget* table_;
  QChartView* chart_view_;
  QBarSeries* bars_;
  QLabel* hint_;
  QStackedWidget* pages_;  // what to do while nothing is pinned, else the table and chart
  QLabel* empty_;
};

}  // namespace cs::gui
