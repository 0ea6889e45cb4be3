#include "app/gui/ranked_plan_model.h"

#include <limits>

#include "core/format.h"

namespace cs::gui {

namespace {

QString q(std::string_view s) {
  return QString::fromUtf8(s.data(), int(s.size()));
}
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

bool samePlan(const plan::RankedPlan& a, const plan::RankedPlan& b) {
  return a.nodes == b.nodes && a.parallel == b.parallel &&
         a.precision.compute == b.precision.compute;
}

RankedPlanModel::RankedPlanModel(QObject* parent) : QAbstractTableModel(parent) {}

void RankedPlanModel::setResult(const plan::SearchResult& result, bool per_sample) {
  beginResetModel();
  per_sample_ = per_sample;
  plans_ = result.best;
  ranked_ = int(plans_.size());
  // The front belongs in the table even where it is not among the best.
  for (const plan::RankedPlan& f : result.pareto_memory) {
    bool present = false;
    for (const plan::RankedPlan& p : plans_)
      present = present || samePlan(p, f);
    if (!present) plans_.push_back(f);
  }
  front_.assign(plans_.size(), false);
  for (std::size_t i = 0; i < plans_.size(); ++i) {
    for (const plan::RankedPlan& f : result.pareto_memory) {
      if (samePlan(plans_[i], f)) front_[i] = true;
    }
  }
  endResetModel();
}

void RankedPlanModel::clear() {
  beginResetModel();
  plans_.clear();
  front_.clear();
  ranked_ = 0;
  endResetModel();
}

int RankedPlanModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(plans_.size());
}

int RankedPlanModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : column_count;
}

QVariant RankedPlanModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal)
    return QAbstractTableModel::headerData(section, orientation, role);
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  switch (Column(section)) {
    case rank:
      return tr("#");
    case tokens_per_second:
      return per_sample_ ? tr("samples/s") : tr("tokens/s");
    case memory_per_gpu:
      return tr("memory/GPU");
    case mfu:
      return role == Qt::ToolTipRole
                 ? tr("Model FLOPs utilisation, of the dense peak of the plan's own precision")
                 : tr("MFU");
    case step_time:
      return tr("step");
    case time_to_train:
      return tr("to train");
    case cost:
      return tr("cost");
    case gpus:
      return tr("GPUs");
    case dp:
      return tr("DP");
    case tp:
      return tr("TP");
    case pp:
      return tr("PP");
    case virtual_stages:
      return tr("v");
    case sequence_parallel:
      return tr("SP");
    case zero_stage:
      return tr("ZeRO");
    case micro_batch:
      return tr("micro");
    case global_batch:
      return tr("global");
    case recompute:
      return tr("recompute");
    case precision:
      return tr("precision");
    case flash_attention:
      return tr("fused attn");
    case pareto:
      return tr("front");
    case column_count:
      break;
  }
  return {};
}

QVariant RankedPlanModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= column_count) return {};
  const plan::RankedPlan& r = plans_[std::size_t(index.row())];
  const plan::Estimate& e = r.estimate;
  const bool front = front_[std::size_t(index.row())];
  if (role == ParetoRole) return front;
  if (role == Qt::TextAlignmentRole) {
    return index.column() >= recompute && index.column() <= precision
               ? int(Qt::AlignLeft | Qt::AlignVCenter)
               : int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole) {
    return tr("%1 · %2 of memory per GPU · score %3")
        .arg(per_sample_ ? q(format_count(e.throughput.samples_per_second)) + tr(" samples/s")
                         : q(format_count(e.throughput.tokens_per_second)) + tr(" tokens/s"))
        .arg(q(format_bytes(e.memory.total())))
        .arg(r.score, 0, 'g', 4);
  }
  if (role != Qt::DisplayRole && role != SortRole) return {};
  const bool sort = role == SortRole;
  const ParallelPlan& p = r.parallel;
  switch (Column(index.column())) {
    case rank: {
      // A plan of the front below the best kept has no known place: "#61"
      // after 60 kept read as the 61st best, where it may be the 5000th.
      const int place = rankOf(index.row());
      if (sort) return place > 0 ? place : std::numeric_limits<int>::max();
      return place > 0 ? QVariant(place) : QVariant(tr("front"));
    }
    case tokens_per_second: {
      const double rate =
          per_sample_ ? e.throughput.samples_per_second : e.throughput.tokens_per_second;
      return sort ? QVariant(rate) : q(format_count(rate));
    }
    case memory_per_gpu:
      return sort ? QVariant(e.memory.total() / kGiB) : q(format_bytes(e.memory.total()));
    case mfu:
      return sort ? QVariant(e.throughput.mfu)
                  : QVariant(QStringLiteral("%1 %").arg(100 * e.throughput.mfu, 0, 'f', 1));
    case step_time:
      return sort ? QVariant(e.time.step()) : q(format_seconds(e.time.step()));
    case time_to_train:
      return sort ? QVariant(e.training.seconds) : q(format_seconds(e.training.seconds));
    case cost:
      return sort ? QVariant(e.training.cost_usd)
                  : QVariant(e.training.cost_usd > 0 ? q(format_usd(e.training.cost_usd))
                                                     : QStringLiteral("—"));
    case gpus:
      return e.gpus;
    case dp:
      return p.dp;
    case tp:
      return p.tp;
    case pp:
      return p.pp;
    case virtual_stages:
      return p.virtual_stages;
    case sequence_parallel:
      return sort ? QVariant(int(p.sequence_parallel))
                  : QVariant(p.sequence_parallel ? tr("on") : tr("off"));
    case zero_stage:
      return p.zero_stage;
    case micro_batch:
      return p.micro_batch;
    case global_batch:
      return p.global_batch;
    case recompute:
      return sort ? QVariant(int(p.recompute)) : QVariant(q(to_string(p.recompute)));
    case precision:
      return sort ? QVariant(int(r.precision.compute))
                  : QVariant(q(to_string(r.precision.compute)));
    case flash_attention:
      return sort ? QVariant(int(p.flash_attention))
                  : QVariant(p.flash_attention ? tr("on") : tr("off"));
    case pareto:
      return sort ? QVariant(int(front)) : QVariant(front ? QStringLiteral("◆") : QString());
    case column_count:
      break;
  }
  return {};
}

RankedPlanFilter::RankedPlanFilter(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(RankedPlanModel::SortRole);
  setFilterKeyColumn(-1);
  setFilterCaseSensitivity(Qt::CaseInsensitive);
}

void RankedPlanFilter::setFrontOnly(bool on) {
  if (on == front_only_) return;
  front_only_ = on;
  invalidateFilter();
}

QString RankedPlanFilter::mfuNote() const {
  const auto* model = qobject_cast<const RankedPlanModel*>(sourceModel());
  if (!model) return {};
  // The rows shown: a filter that leaves one precision leaves nothing to say.
  std::vector<plan::RankedPlan> shown;
  for (int r = 0; r < rowCount(); ++r)
    shown.push_back(model->planAt(mapToSource(index(r, 0)).row()));
  return QString::fromStdString(
      plan::mfu_across_precisions_note(shown, model->perSample() ? "samples/s" : "tokens/s"));
}

bool RankedPlanFilter::filterAcceptsRow(int row, const QModelIndex& parent) const {
  if (front_only_) {
    const QModelIndex i = sourceModel()->index(row, 0, parent);
    if (!sourceModel()->data(i, RankedPlanModel::ParetoRole).toBool()) return false;
  }
  return QSortFilterProxyModel::filterAcceptsRow(row, parent);
}

}  // namespace cs::gui
