#include "app/gui/compare_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "core/format.h"
#include "planners/estimate.h"

namespace cs::gui {

namespace {

QString q(std::string_view s) {
  return QString::fromUtf8(s.data(), int(s.size()));
}

struct Metric {
  const char* name;
  double (*value)(const plan::RankedPlan&);
  QString (*text)(const plan::RankedPlan&);
  bool charted;
};

const Metric kMetrics[] = {
    // In each plan's own unit: a CNN's plan counts samples (its row said
    // tokens/s of images).
    {"throughput",
     [](const plan::RankedPlan& r) { return r.estimate.throughput.tokens_per_second; },
     [](const plan::RankedPlan& r) {
       const plan::Throughput& t = r.estimate.throughput;
       return t.has_tokens ? q(format_count(t.tokens_per_second)) + QObject::tr(" tokens/s")
                           : q(format_count(t.samples_per_second)) + QObject::tr(" samples/s");
     },
     true},
    {"MFU", [](const plan::RankedPlan& r) { return r.estimate.throughput.mfu; },
     [](const plan::RankedPlan& r) {
       return QStringLiteral("%1 %").arg(100 * r.estimate.throughput.mfu, 0, 'f', 1);
     },
     true},
    {"memory/GPU", [](const plan::RankedPlan& r) { return r.estimate.memory.total(); },
     [](const plan::RankedPlan& r) { return q(format_bytes(r.estimate.memory.total())); }, true},
    {"step time", [](const plan::RankedPlan& r) { return r.estimate.time.step(); },
     [](const plan::RankedPlan& r) { return q(format_seconds(r.estimate.time.step())); }, true},
    {"time to train", [](const plan::RankedPlan& r) { return r.estimate.training.seconds; },
     // "—" with no tokens to train, as the Estimate view's tile (it read "0 s").
     [](const plan::RankedPlan& r) {
       return r.estimate.training.seconds > 0 ? q(format_seconds(r.estimate.training.seconds))
                                              : QStringLiteral("—");
     },
     true},
    {"cost", [](const plan::RankedPlan& r) { return r.estimate.training.cost_usd; },
     [](const plan::RankedPlan& r) {
       return r.estimate.training.cost_usd > 0 ? q(format_usd(r.estimate.training.cost_usd))
                                               : QStringLiteral("—");
     },
     true},
    {"GPUs", [](const plan::RankedPlan& r) { return double(r.estimate.gpus); },
     [](const plan::RankedPlan& r) { return QString::number(r.estimate.gpus); }, false},
    {"DP × TP × PP", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) {
       return QStringLiteral("%1 × %2 × %3")
           .arg(r.parallel.dp)
           .arg(r.parallel.tp)
           .arg(r.parallel.pp);
     },
     false},
    {"virtual stages", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) { return QString::number(r.parallel.virtual_stages); }, false},
    {"sequence parallel", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) {
       return r.parallel.sequence_parallel ? QStringLiteral("on") : QStringLiteral("off");
     },
     false},
    {"ZeRO", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) { return QString::number(r.parallel.zero_stage); }, false},
    {"micro / global batch", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) {
       return QStringLiteral("%1 / %2").arg(r.parallel.micro_batch).arg(r.parallel.global_batch);
     },
     false},
    {"recompute", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) { return q(to_string(r.parallel.recompute)); }, false},
    {"precision", [](const plan::RankedPlan&) { return 0.0; },
     [](const plan::RankedPlan& r) { return q(to_string(r.precision.compute)); }, false},
};

}  // namespace

QString PinnedPlans::add(const plan::RankedPlan& plan, const QString& name, const Cluster& cluster,
                         const Workload& workload) {
  if (int(pinned_.size()) >= kMaxPinned) return tr("%1 plans are pinned already").arg(kMaxPinned);
  std::string subject = subject_of(Plan{cluster, workload, plan.parallel, plan.precision});
  for (const Pinned& p : pinned_) {
    if (p.subject != subject) continue;  // the same plan on another cluster differs
    const ParallelPlan& a = p.plan.parallel;
    const ParallelPlan& b = plan.parallel;
    if (a.dp == b.dp && a.tp == b.tp && a.pp == b.pp && a.virtual_stages == b.virtual_stages &&
        a.sequence_parallel == b.sequence_parallel && a.zero_stage == b.zero_stage &&
        a.micro_batch == b.micro_batch && a.global_batch == b.global_batch &&
        a.recompute == b.recompute && a.flash_attention == b.flash_attention &&
        a.async_tp_allreduce == b.async_tp_allreduce && a.vocab_parallel == b.vocab_parallel &&
        p.plan.precision.compute == plan.precision.compute &&
        p.plan.estimate.memory.total() == plan.estimate.memory.total()) {
      return tr("the same plan as \"%1\"").arg(p.name);
    }
  }
  // Two pins of one plan (edited between them, or the same row of two
  // searches) are told apart by their column titles: "name (2)". The title
  // is the pin's name, saved with the project as it is: within the names'
  // length a project reads back (a plan of a long name pinned as "<name> on
  // <cluster>" made a project that did not open again).
  const std::string base = name.toStdString();
  QString title = q(label_with_suffix(base, {}));
  for (int n = 2; std::any_of(pinned_.begin(), pinned_.end(),
                              [&](const Pinned& p) { return p.name == title; });
       ++n)
    title = q(label_with_suffix(base, " (" + std::to_string(n) + ")"));
  pinned_.push_back({plan, title, cluster, workload, std::move(subject)});
  return {};
}

bool PinnedPlans::pin(const plan::RankedPlan& plan, const QString& name, const Cluster& cluster,
                      const Workload& workload) {
  if (!add(plan, name, cluster, workload).isEmpty()) return false;
  emit changed();
  return true;
}

void PinnedPlans::unpin(int index) {
  if (index < 0 || index >= size()) return;
  pinned_.erase(pinned_.begin() + index);
  emit changed();
}

void PinnedPlans::clear() {
  pinned_.clear();
  emit changed();
}

QStringList PinnedPlans::restore(const std::vector<ProjectPin>& pins) {
  pinned_.clear();
  QStringList left_out;
  for (const ProjectPin& p : pins) {
    const QString name = q(p.name);
    auto e = plan::estimate(Plan{p.cluster, p.workload, p.parallel, p.precision});
    if (!e) {
      // The planner's rules are this version's: a plan an older one let
      // through (or one edited in the file) is said, not shown with no figures.
      left_out << tr("\"%1\": %2").arg(name, q(e.message()).replace('\n', QStringLiteral("; ")));
      continue;
    }
    plan::RankedPlan r;
    r.nodes = p.cluster.nodes;
    r.parallel = p.parallel;
    r.precision = p.precision;
    r.estimate = std::move(e).value();
    if (const QString why = add(r, name, p.cluster, p.workload); !why.isEmpty())
      left_out << tr("\"%1\": %2").arg(name, why);
  }
  emit changed();
  return left_out;
}

std::vector<ProjectPin> PinnedPlans::pins() const {
  std::vector<ProjectPin> out;
  for (const Pinned& p : pinned_) {
    out.push_back({p.name.toStdString(), p.cluster, p.workload, p.plan.parallel, p.plan.precision});
  }
  return out;
}

CompareView::CompareView(PinnedPlans* pinned, QWidget* parent) : QWidget(parent), pinned_(pinned) {
  setObjectName(QStringLiteral("compareView"));
  table_ = new QTableWidget;
  table_->setObjectName(QStringLiteral("compareTable"));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectColumns);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);

  bars_ = new QBarSeries;
  auto* chart = new QChart;
  chart->addSeries(bars_);
  chart->setTitle(tr("Pinned plans, % of the largest"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* x = new QBarCategoryAxis;
  for (const Metric& m : kMetrics) {
    if (m.charted) x->append(tr(m.name));
  }
  auto* y = new QValueAxis;
  y->setRange(0, 100);
  y->setLabelFormat(QStringLiteral("%d %%"));
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  bars_->attachAxis(x);
  bars_->attachAxis(y);
  chart_view_ = new QChartView(chart);
  chart_view_->setRenderHint(QPainter::Antialiasing);
  chart_view_->setMinimumHeight(180);

  auto* current = new QPushButton(tr("Make current"));
  current->setObjectName(QStringLiteral("compareMakeCurrent"));
  auto* unpin = new QPushButton(tr("Unpin"));
  unpin->setObjectName(QStringLiteral("compareUnpin"));
  auto* clear = new QPushButton(tr("Unpin all"));
  connect(current, &QPushButton::clicked, this, [this] {
    const int c = table_->currentColumn();
    if (c >= 0 && c < pinned_->size()) emit makeCurrent(pinned_->at(c), pinned_->subjectAt(c));
  });
  connect(unpin, &QPushButton::clicked, this, [this] { pinned_->unpin(table_->currentColumn()); });
  connect(clear, &QPushButton::clicked, pinned_, &PinnedPlans::clear);
  hint_ = new QLabel;
  hint_->setObjectName(QStringLiteral("compareHint"));
  hint_->setWordWrap(true);
  hint_->setTextFormat(Qt::PlainText);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(hint_, 1);
  buttons->addWidget(current);
  buttons->addWidget(unpin);
  buttons->addWidget(clear);

  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(table_);
  splitter->addWidget(chart_view_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  splitter->setSizes({600, 600});
  // Nothing pinned: what to do, in place of an empty table and chart.
  empty_ = new QLabel;
  empty_->setObjectName(QStringLiteral("compareEmpty"));
  empty_->setAlignment(Qt::AlignCenter);
  empty_->setWordWrap(true);
  empty_->setText(
      tr("No plan is pinned.\n\nPin up to %1 plans to compare them here: a row of "
         "the plan explorer (Pin), or the current plan (Plan ▸ Pin to compare, Ctrl+D).")
          .arg(kMaxPinned));
  pages_ = new QStackedWidget;
  pages_->addWidget(empty_);
  pages_->addWidget(splitter);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(pages_, 1);
  layout->addLayout(buttons);
  connect(pinned_, &PinnedPlans::changed, this, &CompareView::refresh);
  refresh();
}

void CompareView::refresh() {
  const int n = pinned_->size();
  pages_->setCurrentIndex(n == 0 ? 0 : 1);
  // Pins of several precisions: their MFUs are of different peaks, as the
  // explorer and `clusterscope search` say.
  std::vector<plan::RankedPlan> plans;
  int with_tokens = 0;
  for (int i = 0; i < n; ++i) {
    plans.push_back(pinned_->at(i));
    with_tokens += pinned_->at(i).estimate.throughput.has_tokens ? 1 : 0;
  }
  const QString note =
      q(plan::mfu_across_precisions_note(plans, with_tokens == n   ? "tokens/s"
                                                : with_tokens == 0 ? "samples/s"
                                                                   : "throughput"));
  hint_->setText(n == 0 ? QString()
                        : tr("%1 of %2 pinned").arg(n).arg(kMaxPinned) +
                              (note.isEmpty() ? QString() : QStringLiteral(" · ") + note));
  table_->clear();
  table_->setColumnCount(n);
  table_->setRowCount(int(std::size(kMetrics)));
  QStringList headers;
  for (int i = 0; i < n; ++i)
    headers << pinned_->nameAt(i);
  table_->setHorizontalHeaderLabels(headers);
  QStringList rows;
  for (const Metric& m : kMetrics)
    rows << tr(m.name);
  table_->setVerticalHeaderLabels(rows);
  for (int r = 0; r < int(std::size(kMetrics)); ++r) {
    for (int c = 0; c < n; ++c) {
      auto* item = new QTableWidgetItem(kMetrics[r].text(pinned_->at(c)));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(r, c, item);
    }
  }

  bars_->clear();
  for (int c = 0; c < n; ++c) {
    auto* set = new QBarSet(pinned_->nameAt(c));
    for (const Metric& m : kMetrics) {
      if (!m.charted) continue;
      double largest = 0;
      for (int k = 0; k < n; ++k)
        largest = std::max(largest, m.value(pinned_->at(k)));
      set->append(largest > 0 ? 100.0 * m.value(pinned_->at(c)) / largest : 0.0);
    }
    bars_->append(set);
  }
}

}  // namespace cs::gui
