#include "app/gui/plan_explorer.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QProgressBar>
#include <QPromise>
#include <QPushButton>
#include <QRegularExpression>
#include <QScatterSeries>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QThread>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>

#include <QtConcurrent/QtConcurrentRun>

#include "app/gui/compare_view.h"
#include "app/gui/ranked_plan_model.h"
#include "app/gui/theme.h"
#include "app/gui/workspace.h"
#include "core/format.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct SearchInput {
  Cluster cluster;
  Workload workload;
  plan::SearchSpace space;
  plan::Objective objective = plan::Objective::throughput;
  plan::SearchLimits limits;
};

}  // namespace

QPointF PlanExplorer::chartPoint(const plan::Estimate& e) {
  return {e.memory.total() / kGiB, e.throughput.tokens_per_second / 1000};
}

QString PlanExplorer::emptyResultReason(const SearchOutcome& out) {
  const plan::SearchResult& r = out.result;
  if (!r.best.empty() || r.cancelled) return {};
  if (r.candidates == 0) {
    return tr("No candidate plan: no global batch given divides over the cluster's %1 GPUs%2.")
        .arg(q(format_count(double(out.gpus))))
        .arg(out.all_gpus ? tr(" (untick “use every GPU” to let plans leave GPUs idle)")
                          : QString());
  }
  if (r.valid == 0) {
    return tr("No valid plan: each of the %1 candidates breaks a rule of the planner "
              "(the Plan panel's controls say which, value by value).")
        .arg(q(format_count(double(r.candidates))));
  }
  if (r.fitting == 0) {
    return tr("No plan fits in GPU memory: the smallest of the %1 valid plans needs %2 per GPU, "
              "the GPU has %3 (every split, ZeRO stage, recomputation and micro-batch was tried: "
              "a larger cluster, or a GPU with more memory).")
        .arg(q(format_count(double(r.valid))), q(format_bytes(r.smallest_memory_bytes)),
             q(format_bytes(r.gpu_memory_bytes)));
  }
  return {};
}

PlanExplorer::PlanExplorer(Workspace* workspace, PinnedPlans* pinned, QWidget* parent)
    : QWidget(parent), workspace_(workspace), pinned_(pinned) {
  setObjectName(QStringLiteral("planExplorer"));
  objective_ = new QComboBox;
  objective_->setObjectName(QStringLiteral("searchObjective"));
  objective_->addItem(tr("throughput"), int(plan::Objective::throughput));
  objective_->addItem(tr("cost to train"), int(plan::Objective::cost));
  objective_->addItem(tr("time to train"), int(plan::Objective::time_to_train));
  objective_->addItem(tr("memory headroom"), int(plan::Objective::memory_headroom));
  batches_ = new QLineEdit;
  batches_->setObjectName(QStringLiteral("searchGlobalBatch"));
  batches_->setPlaceholderText(tr("the plan's, or e.g. 512, 1024"));
  batches_->setToolTip(tr("Global batches (sequences per step) to try, separated by commas"));
  top_k_ = new QSpinBox;
  top_k_->setObjectName(QStringLiteral("searchTopK"));
  top_k_->setRange(1, 5000);
  top_k_->setValue(300);
  all_gpus_ = new QCheckBox(tr("use every GPU"));
  all_gpus_->setChecked(true);
  run_ = new QPushButton(tr("Search"));
  run_->setObjectName(QStringLiteral("searchRun"));
  run_->setToolTip(tr("Search every plan for the current cluster and workload (F5)"));
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setObjectName(QStringLiteral("searchCancel"));
  cancel_->setEnabled(false);
  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("searchProgress"));
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  status_ = new QLabel(tr("No search yet: press Search (F5)."));
  status_->setObjectName(QStringLiteral("searchStatus"));
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::PlainText);
  connect(run_, &QPushButton::clicked, this, &PlanExplorer::runSearch);
  connect(cancel_, &QPushButton::clicked, this, &PlanExplorer::cancelSearch);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Objective")));
  controls->addWidget(objective_);
  controls->addWidget(new QLabel(tr("Global batch")));
  controls->addWidget(batches_, 1);
  controls->addWidget(new QLabel(tr("Keep")));
  controls->addWidget(top_k_);
  controls->addWidget(all_gpus_);
  controls->addWidget(run_);
  controls->addWidget(cancel_);
  auto* progress_row = new QHBoxLayout;
  progress_row->addWidget(progress_, 1);
  progress_row->addWidget(status_, 2);

  model_ = new RankedPlanModel(this);
  proxy_ = new RankedPlanFilter(this);
  proxy_->setSourceModel(model_);
  filter_ = new QLineEdit;
  filter_->setObjectName(QStringLiteral("searchFilter"));
  filter_->setPlaceholderText(tr("Filter rows (e.g. fp8, selective)"));
  filter_->setClearButtonEnabled(true);
  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
  front_only_ = new QCheckBox(tr("Pareto front only"));
  front_only_->setObjectName(QStringLiteral("searchFrontOnly"));
  connect(front_only_, &QCheckBox::toggled, proxy_, &RankedPlanFilter::setFrontOnly);
  auto* make_current = new QPushButton(tr("Make current"));
  make_current->setObjectName(QStringLiteral("searchMakeCurrent"));
  make_current->setToolTip(tr("Make the selected plan the current plan (Enter)"));
  auto* pin = new QPushButton(tr("Pin"));
  pin->setObjectName(QStringLiteral("searchPin"));
  pin->setToolTip(tr("Pin the selected plan to compare it (up to %1)").arg(kMaxPinned));
  auto* filter_row = new QHBoxLayout;
  filter_row->addWidget(filter_, 1);
  filter_row->addWidget(front_only_);
  filter_row->addWidget(make_current);
  filter_row->addWidget(pin);

  table_ = new QTableView;
  table_->setObjectName(QStringLiteral("searchTable"));
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RankedPlanModel::rank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 4);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  connect(table_, &QTableView::activated, this,
          [this](const QModelIndex& i) { makeRowCurrent(i.row()); });
  connect(make_current, &QPushButton::clicked, this, [this] {
    const QModelIndex i = table_->currentIndex();
    if (i.isValid()) makeRowCurrent(i.row());
  });
  connect(pin, &QPushButton::clicked, this, &PlanExplorer::pinSelected);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            selected_->clear();
            if (!current.isValid()) return;
            const plan::RankedPlan& r = model_->planAt(proxy_->mapToSource(current).row());
            selected_->append(chartPoint(r.estimate));
          });

  // Throughput against memory per GPU, the front joined by a line.
  auto* chart = new QChart;
  chart->setTitle(tr("Throughput against memory per GPU"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  points_ = new QScatterSeries;
  points_->setName(tr("plans"));
  points_->setMarkerSize(7);
  points_->setBorderColor(Qt::transparent);
  // 3.5:1 on both themes' backgrounds (half clear, it stood at 2.1:1 on the
  // dark one); the overlaps still show through.
  points_->setColor(QColor(0x45, 0x80, 0xc0, 230));
  front_line_ = new QLineSeries;
  front_line_->setName(tr("front"));
  front_line_->setColor(QColor(0xe1, 0x57, 0x59));
  front_points_ = new QScatterSeries;
  front_points_->setName(tr("Pareto front"));
  front_points_->setMarkerSize(10);
  front_points_->setColor(QColor(0xe1, 0x57, 0x59));
  selected_ = new QScatterSeries;
  selected_->setName(tr("selected"));
  selected_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  selected_->setMarkerSize(14);
  selected_->setColor(Qt::transparent);
  selected_->setBorderColor(QColor(0xf2, 0x8e, 0x2b));
  for (QXYSeries* s :
       std::initializer_list<QXYSeries*>{points_, front_line_, front_points_, selected_}) {
    chart->addSeries(s);
  }
  auto* x = new QValueAxis;
  x->setTitleText(tr("memory per GPU (GiB)"));
  auto* y = new QValueAxis;
  y->setTitleText(tr("k tokens/s"));
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QAbstractSeries* s : chart->series()) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  for (QAbstractSeries* s :
       {static_cast<QAbstractSeries*>(front_line_), static_cast<QAbstractSeries*>(selected_)}) {
    for (QLegendMarker* m : chart->legend()->markers(s))
      m->setVisible(false);
  }
  chart_view_ = new QChartView(chart);
  chart_view_->setObjectName(QStringLiteral("searchChart"));
  chart_view_->setRenderHint(QPainter::Antialiasing);
  chart_view_->setMinimumSize(260, 200);
  connect(points_, &QScatterSeries::clicked, this, &PlanExplorer::pickPoint);
  connect(front_points_, &QScatterSeries::clicked, this, &PlanExplorer::pickPoint);

  mfu_note_ = new QLabel;
  mfu_note_->setObjectName(QStringLiteral("searchMfuNote"));
  mfu_note_->setWordWrap(true);
  mfu_note_->setVisible(false);
  // The note follows the rows shown: a filter to "bf16" leaves one precision.
  auto update_note = [this] {
    mfu_note_->setText(proxy_->mfuNote());
    mfu_note_->setVisible(!mfu_note_->text().isEmpty());
  };
  connect(proxy_, &QAbstractItemModel::rowsInserted, this, update_note);
  connect(proxy_, &QAbstractItemModel::rowsRemoved, this, update_note);
  connect(proxy_, &QAbstractItemModel::modelReset, this, update_note);
  connect(proxy_, &QAbstractItemModel::layoutChanged, this, update_note);
  auto* table_side = new QWidget;
  auto* table_layout = new QVBoxLayout(table_side);
  table_layout->setContentsMargins(0, 0, 0, 0);
  table_layout->addWidget(table_, 1);
  table_layout->addWidget(mfu_note_);

  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(table_side);
  splitter->addWidget(chart_view_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  splitter->setSizes({600, 500});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(controls);
  layout->addLayout(progress_row);
  layout->addLayout(filter_row);
  layout->addWidget(splitter, 1);

  connect(&watcher_, &QFutureWatcher<SearchOutcome>::progressValueChanged, this,
          &PlanExplorer::onProgress);
  connect(&watcher_, &QFutureWatcher<SearchOutcome>::progressRangeChanged, progress_,
          &QProgressBar::setRange);
  connect(&watcher_, &QFutureWatcher<SearchOutcome>::finished, this, &PlanExplorer::onFinished);
  connect(workspace_, &Workspace::projectChanged, this, &PlanExplorer::checkStale);
}

PlanExplorer::~PlanExplorer() {
  if (stop_) stop_->request_stop();
  watcher_.disconnect(this);
  watcher_.waitForFinished();
}

void PlanExplorer::runSearch() {
  auto resolved = workspace_->project().resolved_plan();
  if (!resolved) {
    status_->setText(q(resolved.message()));
    return;
  }
  SearchInput input;
  input.cluster = resolved->cluster;
  input.workload = resolved->workload;
  for (const QString& part :
       batches_->text().split(QRegularExpression(QStringLiteral("[,;\\s]+")), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int b = part.toInt(&ok);
    if (!ok || b < 1) {
      input_error_ = tr("Global batch: \"%1\" is not a positive integer").arg(part);
      status_->setText(input_error_);
      return;
    }
    input.space.global_batches.push_back(b);
  }
  if (input.space.global_batches.empty())
    input.space.global_batches.push_back(resolved->parallel.global_batch);
  input.space.use_all_gpus = all_gpus_->isChecked();
  input.objective = plan::Objective(objective_->currentData().toInt());
  input.limits.top_k = top_k_->value();
  // Leave a core to the GUI thread.
  input.limits.threads = std::max(1, QThread::idealThreadCount() - 1);
  // Only now, with a search to take its place: a batch mistyped while one
  // ran stopped it, and its "Cancelled after ..." replaced the mistake's message.
  if (stop_) stop_->request_stop();  // the running search's result will be dropped

  input_error_.clear();
  const std::uint64_t job = ++job_;
  const std::string subject = subject_of(resolved.value());
  stop_ = std::make_shared<std::stop_source>();
  running_ = true;
  run_->setEnabled(true);
  cancel_->setEnabled(true);
  progress_->setRange(0, 0);
  status_->setText(tr("Searching…"));
  QFuture<SearchOutcome> future = QtConcurrent::run(
      [input = std::move(input), job, subject, stop = stop_](QPromise<SearchOutcome>& promise) {
        plan::SearchControl control;
        control.stop = stop->get_token();
        control.on_progress = [&promise](const plan::SearchProgress& p) {
          // Progress as a fraction of 100000 keeps within int for any space size.
          promise.setProgressRange(0, 100000);
          const int value = p.total > 0 ? int(100000.0 * double(p.evaluated) / double(p.total)) : 0;
          promise.setProgressValueAndText(
              value, QStringLiteral("%1 of %2 candidates, %3 fit")
                         .arg(QString::fromStdString(format_count(double(p.evaluated))),
                              QString::fromStdString(format_count(double(p.total))),
                              QString::fromStdString(format_count(double(p.fitting)))));
        };
        SearchOutcome out;
        out.job = job;
        out.subject = subject;
        out.cluster = input.cluster;
        out.workload = input.workload;
        out.per_sample = input.workload.kind != WorkloadKind::transformer;
        out.gpus = input.cluster.total_gpus();
        out.all_gpus = input.space.use_all_gpus;
        auto r = plan::search(input.cluster, input.workload, input.space, input.objective,
                              input.limits, control);
        if (r) {
          out.result = std::move(r).value();
        } else {
          out.error = r.message();
        }
        promise.addResult(std::move(out));
      });
  watcher_.setFuture(future);  // a previous run's signals stop here: its result is dropped
}

void PlanExplorer::cancelSearch() {
  if (stop_) stop_->request_stop();
  status_->setText(tr("Cancelling…"));
}

void PlanExplorer::onProgress(int value) {
  progress_->setValue(value);
  const QString text = watcher_.progressText();
  // A batch mistyped meanwhile stays said until the search ends.
  if (!text.isEmpty())
    status_->setText(input_error_.isEmpty() ? text : input_error_ + QStringLiteral(" · ") + text);
}

void PlanExplorer::onFinished() {
  const QFuture<SearchOutcome> future = watcher_.future();
  if (future.resultCount() == 0) return;
  SearchOutcome out = future.result();
  if (out.job != job_) return;  // stale: a newer search was started
  running_ = false;
  cancel_->setEnabled(false);
  progress_->setRange(0, 1);
  progress_->setValue(1);
  if (!out.error.empty()) {
    status_->setText(q(out.error));
    emit searchFinished(out.job);
    return;
  }
  const plan::SearchResult& r = out.result;
  model_->setResult(r, out.per_sample);
  table_->sortByColumn(RankedPlanModel::rank, Qt::AscendingOrder);
  updateChart();
  // "within the limits" (headroom, days, cost): "kept" read as how many the
  // table holds, beside the box that sets that.
  status_->setText(tr("%1%2 candidates, %3 valid, %4 fit, %5 within the limits · %6 on %7 · "
                      "%8 on the front")
                       .arg(r.cancelled ? tr("Cancelled after ") : QString())
                       .arg(q(format_count(double(r.candidates))))
                       .arg(q(format_count(double(r.valid))))
                       .arg(q(format_count(double(r.fitting))))
                       .arg(q(format_count(double(r.kept))))
                       .arg(q(format_seconds(r.seconds)))
                       .arg(r.threads == 1 ? tr("1 thread") : tr("%1 threads").arg(r.threads))
                       .arg(r.pareto_memory.size()));
  // An empty table says why: it read "0 fit ... 0 on the front" and no more.
  const QString reason = emptyResultReason(out);
  if (!reason.isEmpty()) status_->setText(reason + QStringLiteral(" · ") + status_->text());
  result_status_ = status_->text();
  searched_for_ = out.subject;
  searched_cluster_ = std::move(out.cluster);
  searched_workload_ = std::move(out.workload);
  checkStale();
  emit searchFinished(out.job);
}

void PlanExplorer::updateChart() {
  QList<QPointF> all;
  QList<QPointF> front;
  double max_x = 0;
  double max_y = 0;
  for (int i = 0; i < model_->rowCount(); ++i) {
    const plan::Estimate& e = model_->planAt(i).estimate;
    const QPointF p = chartPoint(e);
    (model_->onFront(i) ? front : all).append(p);
    max_x = std::max(max_x, p.x());
    max_y = std::max(max_y, p.y());
  }
  std::sort(front.begin(), front.end(),
            [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
  points_->replace(all);
  front_points_->replace(front);
  front_line_->replace(front);
  selected_->clear();
  auto* chart = chart_view_->chart();
  const auto x_axes = chart->axes(Qt::Horizontal);
  const auto y_axes = chart->axes(Qt::Vertical);
  if (auto* values = x_axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(x_axes.front()))
    setRoundTicks(values, 0, max_x > 0 ? max_x * 1.02 : 1);
  if (!y_axes.isEmpty()) {
    if (auto* values = qobject_cast<QValueAxis*>(y_axes.front()))
      setRoundTicks(values, 0, max_y > 0 ? max_y * 1.02 : 1);
    y_axes.front()->setTitleText(model_->perSample() ? tr("k samples/s") : tr("k tokens/s"));
  }
}

void PlanExplorer::selectRow(int source_row) {
  const QModelIndex i = proxy_->mapFromSource(model_->index(source_row, 0));
  if (i.isValid()) table_->setCurrentIndex(i);
}

void PlanExplorer::pickPoint(const QPointF& point) {
  // The nearest plan in screen terms: both axes scaled to their ranges.
  const auto x_axes = chart_view_->chart()->axes(Qt::Horizontal);
  const auto y_axes = chart_view_->chart()->axes(Qt::Vertical);
  const auto* x = x_axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(x_axes.front());
  const auto* y = y_axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(y_axes.front());
  const double sx = x && x->max() > x->min() ? x->max() - x->min() : 1;
  const double sy = y && y->max() > y->min() ? y->max() - y->min() : 1;
  int best = -1;
  double best_d = std::numeric_limits<double>::infinity();
  for (int i = 0; i < model_->rowCount(); ++i) {
    const plan::Estimate& e = model_->planAt(i).estimate;
    const QPointF p = chartPoint(e);
    const double dx = (p.x() - point.x()) / sx;
    const double dy = (p.y() - point.y()) / sy;
    const double d = dx * dx + dy * dy;
    if (d < best_d) {
      best_d = d;
      best = i;
    }
  }
  if (best < 0) return;
  selectRow(best);
  makeCurrent(model_->planAt(best), searched_for_);
}

void PlanExplorer::makeRowCurrent(int proxy_row) {
  const QModelIndex i = proxy_->mapToSource(proxy_->index(proxy_row, 0));
  if (!i.isValid()) return;
  makeCurrent(model_->planAt(i.row()), searched_for_);
}

void PlanExplorer::checkStale() {
  if (searched_for_.empty() || running_) return;
  auto resolved = workspace_->project().resolved_plan();
  stale_ = !resolved || subject_of(resolved.value()) != searched_for_;
  status_->setText(stale_ ? tr("The cluster or workload has changed since this search: its "
                               "figures are for the one searched. Search again to use a row.")
                          : result_status_);
}

bool PlanExplorer::makeCurrent(const plan::RankedPlan& r, const std::string& subject) {
  Project after = workspace_->project();
  ProjectPlan* p = after.current();
  auto resolved = after.resolved_plan();
  if (!p || !resolved) return false;
  if (subject_of(resolved.value()) != subject) {
    // Its dp x tp x pp and its figures were for another cluster or model:
    // applied here they broke the plan ("48 GPUs, but the cluster has 16").
    status_->setText(
        tr("That plan was estimated for another cluster or workload than the "
           "current plan's: search again (or switch back) to use it."));
    return false;
  }
  p->parallel = r.parallel;
  p->precision = r.precision;
  workspace_->edit(tr("Use plan %1×%2×%3 from the explorer")
                       .arg(r.parallel.dp)
                       .arg(r.parallel.tp)
                       .arg(r.parallel.pp),
                   std::move(after));
  return true;
}

bool PlanExplorer::pinSelected() {
  const QModelIndex i = proxy_->mapToSource(table_->currentIndex());
  if (!i.isValid()) {
    status_->setText(tr("Select a row to pin."));
    return false;
  }
  const plan::RankedPlan& r = model_->planAt(i.row());
  const int place = model_->rankOf(i.row());
  const QString name = tr("%1 %2×%3×%4 %5")
                           .arg(place > 0 ? QStringLiteral("#%1").arg(place) : tr("front"))
                           .arg(r.parallel.dp)
                           .arg(r.parallel.tp)
                           .arg(r.parallel.pp)
                           .arg(q(std::string(to_string(r.precision.compute))));
  if (stale_) {
    status_->setText(
        tr("The cluster or workload has changed since this search: search again "
           "to pin a row."));
    return false;
  }
  if (!pinned_->pin(r, name, searched_cluster_, searched_workload_)) {
    status_->setText(tr("Already pinned, or %1 plans pinned: unpin one first.").arg(kMaxPinned));
    return false;
  }
  return true;
}

}  // namespace cs::gui
