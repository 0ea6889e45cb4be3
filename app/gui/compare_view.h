#pragma once
// Up to four pinned plans side by side: a table of their figures and
// controls, and grouped bars of the figures that matter (each relative to the
// best of the pinned plans, so that throughput and memory share one axis).

#include <QObject>
#include <QWidget>
#include <vector>

#include "app/gui/project.h"
#include "planners/search.h"

class QTableWidget;
class QPushButton;
class QLabel;
class QStackedWidget;

class QChartView;
class QBarSeries;

namespace cs::gui {

inline constexpr int kMaxPinned = 4;

// The plans pinned, each with the cluster and workload it was estimated
// for; the project keeps them (Project::pinned, MainWindow passes them on).
class PinnedPlans : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;
  // False (and nothing pinned) when four are pinned already or it is pinned
  // (the same plan on the same cluster and workload, `subject_of`). A name
  // another pin has gets a number ("name (2)"): each column's title differs.
  bool pin(const plan::RankedPlan& plan, const QString& name, const Cluster& cluster,
           const Workload& workload);
  void unpin(int index);
  void clear();
  // Pins what a project holds in place of those pinned, each estimated anew
  // (by this version's planner). One that no longer estimates, is pinned
  // twice or is past the fourth is left out: each such is named, with why.
  QStringList restore(const std::vector<ProjectPin>& pins);
  // What the project keeps of them.
  std::vector<ProjectPin> pins() const;
  int size() const { return int(pinned_.size()); }
  const plan::RankedPlan& at(int i) const { return pinned_[std::size_t(i)].plan; }
  const QString& nameAt(int i) const { return pinned_[std::size_t(i)].name; }
  const std::string& subjectAt(int i) const { return pinned_[std::size_t(i)].subject; }

 signals:
  void changed();

 private:
  struct Pinned {
    plan::RankedPlan plan;
    QString name;
    Cluster cluster;
    Workload workload;
    std::string subject;  // subject_of the cluster and workload
  };
  // Why it cannot be pinned ("" when it was).
  QString add(const plan::RankedPlan& plan, const QString& name, const Cluster& cluster,
              const Workload& workload);

  std::vector<Pinned> pinned_;
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
