#pragma once
// The ranked plans of a search as a table: one row per plan, its figures and
// its controls. DisplayRole is formatted for people; SortRole (Qt::UserRole)
// holds the raw number so that a proxy sorts numerically.

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <vector>

#include "planners/search.h"

namespace cs::gui {

class RankedPlanModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    rank,
    tokens_per_second,
    memory_per_gpu,
    mfu,
    step_time,
    time_to_train,
    cost,
    gpus,
    dp,
    tp,
    pp,
    virtual_stages,
    sequence_parallel,
    zero_stage,
    micro_batch,
    global_batch,
    recompute,
    precision,
    flash_attention,
    pareto,
    column_count
  };
  static constexpr int SortRole = Qt::UserRole;
  static constexpr int ParetoRole = Qt::UserRole + 1;

  explicit RankedPlanModel(QObject* parent = nullptr);

  // The ranked plans (best first) and the Pareto front of throughput against
  // memory; a plan on the front is marked in its row. `per_sample`: the
  // workload counts samples, not tokens (a CNN), and so does the throughput column.
  void setResult(const plan::SearchResult& result, bool per_sample = false);
  bool perSample() const { return per_sample_; }
  void clear();
  const std::vector<plan::RankedPlan>& plans() const { return plans_; }
  const plan::RankedPlan& planAt(int row) const { return plans_[std::size_t(row)]; }
  bool onFront(int row) const { return front_[std::size_t(row)]; }
  // The plan's place in the ranking, from 1; 0 for a plan of the front
  // that is not among the ranked best (its place is not known).
  int rankOf(int row) const { return row < ranked_ ? row + 1 : 0; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<plan::RankedPlan> plans_;
  std::vector<bool> front_;
  int ranked_ = 0;  // the first rows: the search's best, in order
  bool per_sample_ = false;
};

// Sorts by SortRole and filters by text over every column, optionally
// keeping only the Pareto front.
class RankedPlanFilter : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit RankedPlanFilter(QObject* parent = nullptr);
  void setFrontOnly(bool on);
  bool frontOnly() const { return front_only_; }
  // What the MFU column needs said when the rows it shows are of several
  // precisions (plan::mfu_across_precisions_note); "" when of one. The
  // source must be a RankedPlanModel.
  QString mfuNote() const;

 protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override;

 private:
  bool front_only_ = false;
};

// Two plans with the same controls (the front repeats plans of the ranking).
bool samePlan(const plan::RankedPlan& a, const plan::RankedPlan& b);

}  // namespace cs::gui
