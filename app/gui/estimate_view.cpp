#include "app/gui/estimate_view.h"

#include <QEvent>
#include <QLabel>
#include <QScrollArea>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <vector>

#include "app/gui/predicted_timeline.h"
#include "app/gui/stacked_bar.h"
#include "app/gui/timeline_widget.h"
#include "core/format.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

struct Tile {
  const char* key;
  const char* caption;  // until the first estimate says which (samples/s, forward pass)
};
constexpr Tile kTiles[] = {
    {"tokens_per_second", "tokens/s"},
    {"mfu", "MFU"},
    {"step_time", "step time"},
    {"time_to_train", "time to train"},
    {"gpu_hours", "GPU-hours"},
    {"cost", "cost"},
    {"energy", "energy"},
    {"memory", "memory per GPU"},
};

}  // namespace

// The headline tiles in rows of 4, or of 2 or 1 where the width is short:
// a fixed grid of 4 was wider than the centre column at 1280 px and cut
// the figures off. Every tile is as wide as the widest.
class HeadlineTiles : public QWidget {
 public:
  explicit HeadlineTiles(QWidget* parent = nullptr) : QWidget(parent) {
    QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Preferred);
    policy.setHeightForWidth(true);
    setSizePolicy(policy);
  }
  void add(QWidget* tile) {
    tile->setParent(this);
    tiles_.push_back(tile);
    refresh();
  }
  // After the tiles' texts change: their size may have too.
  void refresh() {
    updateGeometry();
    place();
  }
  int columns() const { return columnsFor(width()); }

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override {
    const int n = int(tiles_.size());
    const int c = columnsFor(width);
    const int rows = (n + c - 1) / c;
    return rows * cell().height() + std::max(0, rows - 1) * kRowSpacing;
  }
  QSize sizeHint() const override {
    const int w = widthOf(4);
    return {w, heightForWidth(w)};
  }
  QSize minimumSizeHint() const override {
    const int w = cell().width();
    return {w, heightForWidth(w)};
  }

 protected:
  void resizeEvent(QResizeEvent*) override { place(); }
  bool event(QEvent* e) override {
    // A tile's text changed size.
    if (e->type() == QEvent::LayoutRequest) refresh();
    return QWidget::event(e);
  }

 private:
  static constexpr int kColumnSpacing = 16;
  static constexpr int kRowSpacing = 6;

  QSize cell() const {
    QSize size(0, 0);
    for (const QWidget* tile : tiles_)
      size = size.expandedTo(tile->sizeHint());
    return size;
  }
  int widthOf(int columns) const {
    return columns * cell().width() + (columns - 1) * kColumnSpacing;
  }
  int columnsFor(int width) const {
    for (int c : {4, 2})
      if (widthOf(c) <= width) return c;
    return 1;
  }
  void place() {
    const int c = columnsFor(width());
    const int w = (width() - (c - 1) * kColumnSpacing) / c;
    const int h = cell().height();
    for (std::size_t i = 0; i < tiles_.size(); ++i) {
      const int row = int(i) / c, column = int(i) % c;
      tiles_[i]->setGeometry(column * (w + kColumnSpacing), row * (h + kRowSpacing), w, h);
    }
  }

  std::vector<QWidget*> tiles_;
};

std::vector<std::pair<QString, QString>> EstimateView::headlineFigures(const plan::Estimate& e,
                                                                       const Plan& plan) {
  const bool transformer = plan.workload.kind == WorkloadKind::transformer;
  std::vector<std::pair<QString, QString>> out;
  out.emplace_back(transformer ? tr("tokens/s") : tr("samples/s"),
                   q(format_count(transformer ? e.throughput.tokens_per_second
                                              : e.throughput.samples_per_second)));
  // Of the peak of the plan's precision, said: 51 % of FP8's peak read as
  // BF16's would be past 100 %.
  out.emplace_back(
      tr("MFU (%1 peak)").arg(q(std::string(to_string(plan.precision.compute))).toUpper()),
      QStringLiteral("%1 %").arg(100 * e.throughput.mfu, 0, 'f', 1));
  out.emplace_back(e.inference ? tr("forward pass") : tr("step time"),
                   q(format_seconds(e.time.step())));
  out.emplace_back(e.inference ? tr("time for the tokens") : tr("time to train"),
                   e.training.seconds > 0 ? q(format_seconds(e.training.seconds)) : tr("—"));
  // As plan reads them: an amount ("4431", "0.0031"), not a count with two
  // decimals ("4430.70", "0.00").
  out.emplace_back(tr("GPU-hours"),
                   e.training.seconds > 0 ? q(format_amount(e.training.gpu_hours)) : tr("—"));
  // "no price" only where the price is missing: with no tokens to train
  // there is nothing to price (it said "no price" beside a $3/h cluster).
  QString cost = tr("—");
  if (e.training.cost_usd > 0)
    cost = q(format_usd(e.training.cost_usd));
  else if (e.training.seconds > 0 && plan.cluster.price_per_gpu_hour <= 0)
    cost = tr("no price");
  out.emplace_back(tr("cost"), cost);
  // As the cost: "no power" where the GPU's power is not known (a
  // calibrated CPU's), not "0 Wh"; as plan prints it (it read "3.10 MWh"
  // beside plan's "3101 kWh").
  QString energy = tr("—");
  if (e.training.energy_kwh > 0)
    energy = q(format_energy_kwh(e.training.energy_kwh));
  else if (e.training.seconds > 0)
    energy = tr("no power");
  out.emplace_back(tr("energy"), energy);
  out.emplace_back(tr("memory per GPU"),
                   QStringLiteral("%1 / %2").arg(q(format_bytes(e.memory.total())),
                                                 q(format_bytes(e.memory_capacity))));
  return out;
}

EstimateView::EstimateView(AnalysisService* analysis, QWidget* parent)
    : QWidget(parent), analysis_(analysis) {
  setObjectName(QStringLiteral("estimateView"));
  tiles_ = new HeadlineTiles;
  tiles_->setObjectName(QStringLiteral("headlineTiles"));
  for (const Tile& tile : kTiles) {
    auto* box = new QWidget;
    auto* box_layout = new QVBoxLayout(box);
    box_layout->setContentsMargins(0, 0, 0, 0);
    box_layout->setSpacing(0);
    auto* value = new QLabel(QStringLiteral("—"));
    value->setObjectName(QStringLiteral("headline_") + tile.key);
    QFont big = value->font();
    big.setPointSizeF(big.pointSizeF() * 1.5);
    big.setBold(true);
    value->setFont(big);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* caption = new QLabel(tr(tile.caption));
    caption->setObjectName(QStringLiteral("caption_") + tile.key);
    box_layout->addWidget(value);
    box_layout->addWidget(caption);
    tiles_->add(box);
    headlines_[QString::fromLatin1(tile.key)] = value;
    captions_[QString::fromLatin1(tile.key)] = caption;
  }

  message_ = new QLabel;
  message_->setObjectName(QStringLiteral("estimateMessage"));
  message_->setWordWrap(true);
  message_->setTextFormat(Qt::PlainText);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setVisible(false);

  memory_ = new StackedBarWidget;
  memory_->setObjectName(QStringLiteral("memoryBar"));
  time_ = new StackedBarWidget;
  time_->setObjectName(QStringLiteral("timeBar"));
  timeline_title_ =
      new QLabel(tr("<b>Predicted timeline of one step</b>, one rank per pipeline stage "
                    "(Ctrl+wheel: zoom, drag: pan, double-click: zoom to a span, elsewhere the whole "
                    "step)"));
  timeline_title_->setWordWrap(true);
  timeline_ = new TimelineWidget;
  timeline_->setObjectName(QStringLiteral("predictedTimeline"));
  predicted_ = new PredictedTimelineService(this);
  connect(predicted_, &PredictedTimelineService::ready, this,
          [this](std::uint64_t job, const QString& path, const QString& error) {
            // One asked for before the plan shown could not run is another
            // plan's step, not this one's.
            if (job != predicted_->requestedJob() || job <= timeline_dropped_) return;
            if (error.isEmpty()) {
              timeline_->setStore(path);
            } else {
              timeline_->clear(error);
            }
          });

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(tiles_);
  layout->addWidget(message_);
  layout->addWidget(memory_);
  layout->addWidget(time_);
  layout->addWidget(timeline_title_);
  layout->addWidget(timeline_, 1);

  auto painted = [this](std::uint64_t) {
    const std::uint64_t job = paintedJob();
    if (job != shown_job_ || job == 0) return;
    emit this->painted(job);
    // The timeline follows once the figures are on screen (after this paint
    // pass), so that writing its store never competes with painting them.
    if (timeline_plan_) {
      QTimer::singleShot(0, this,
                         [this, plan = std::move(*timeline_plan_)] { predicted_->request(plan); });
      timeline_plan_.reset();
    }
  };
  connect(memory_, &StackedBarWidget::painted, this, painted);
  connect(time_, &StackedBarWidget::painted, this, painted);
  connect(analysis_, &AnalysisService::analysed, this, &EstimateView::showAnalysis);
  if (analysis_->latest()) showAnalysis(analysis_->latest());
}

bool EstimateView::timelineSettled() const {
  return !timeline_plan_ && predicted_->readyJob() == predicted_->requestedJob() &&
         !timeline_->busy() &&
         (timeline_->frameJob() == 0 || timeline_->paintedJob() == timeline_->frameJob());
}

QLabel* EstimateView::headline(const QString& key) const {
  auto it = headlines_.find(key);
  return it == headlines_.end() ? nullptr : it->second;
}

QLabel* EstimateView::caption(const QString& key) const {
  auto it = captions_.find(key);
  return it == captions_.end() ? nullptr : it->second;
}

int EstimateView::headlineColumns() const {
  return tiles_->columns();
}

std::uint64_t EstimateView::paintedJob() const {
  return std::min(memory_->paintedJob(), time_->paintedJob());
}

void EstimateView::showAnalysis(const std::shared_ptr<const PlanAnalysis>& a) {
  if (!a) return;
  shown_job_ = a->job;
  QStringList lines;
  if (!a->estimate) {
    // No estimate: every reason, each naming the control to change.
    lines << (a->has_plan ? tr("This plan cannot run:") : tr("No plan to estimate:"));
    if (!a->problems.empty()) {
      for (const Problem& p : a->problems)
        lines << QStringLiteral("• %1: %2").arg(q(p.pointer), q(p.message));
    } else {
      lines << q(a->error);
    }
    for (auto& [key, label] : headlines_)
      label->setText(QStringLiteral("—"));
    message_->setText(lines.join('\n'));
    message_->setStyleSheet(QStringLiteral("color: #d03030;"));
    message_->setVisible(true);
    memory_->clear();
    time_->clear();
    memory_->setVisible(false);
    time_->setVisible(false);
    timeline_plan_.reset();
    timeline_dropped_ = predicted_->requestedJob();  // one still being written
    timeline_->clear(tr("No timeline: the plan cannot run."));
    tiles_->refresh();
    emit painted(a->job);
    return;
  }
  const plan::Estimate& e = *a->estimate;
  const auto figures = headlineFigures(e, a->plan);
  int i = 0;
  for (const Tile& tile : kTiles) {
    QLabel* label = headlines_[QString::fromLatin1(tile.key)];
    label->setText(figures[std::size_t(i)].second);
    // The caption the figure has: samples/s for a CNN, forward pass for inference.
    captions_[QString::fromLatin1(tile.key)]->setText(figures[std::size_t(i)].first);
    if (QString::fromLatin1(tile.key) == QLatin1String("memory")) {
      label->setStyleSheet(e.fits ? QString() : QStringLiteral("color: #d03030;"));
    }
    ++i;
  }
  tiles_->refresh();
  if (!e.fits) {
    message_->setText(tr("Does not fit: %1").arg(q(a->memory.message)));
    message_->setStyleSheet(QStringLiteral("color: #d03030;"));
    message_->setVisible(true);
  } else {
    message_->setText(tr("Fits with %1 to spare per GPU.").arg(q(format_bytes(e.headroom_bytes))));
    message_->setStyleSheet(QString());
    message_->setVisible(true);
  }
  memory_->setVisible(true);
  time_->setVisible(true);
  memory_->setData(cs::gui::memoryBar(e), a->job);
  time_->setData(cs::gui::timeBar(e), a->job);
  timeline_plan_ = a->plan;  // requested once the bars are painted
}

}  // namespace cs::gui
