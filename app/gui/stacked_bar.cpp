#include "app/gui/stacked_bar.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "core/format.h"
#include "planners/estimate.h"

namespace cs::gui {

namespace {

constexpr double kBarHeight = 22;
constexpr double kSwatch = 10;

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

struct LegendItem {
  QRectF rect;
  int part = 0;
};

// Legend items laid out in rows that wrap at `width`.
std::vector<LegendItem> legendLayout(const BarData& data, const QFontMetricsF& fm, double left,
                                     double top, double width) {
  std::vector<LegendItem> items;
  double x = left;
  double y = top;
  const double line = fm.height();
  for (std::size_t i = 0; i < data.parts.size(); ++i) {
    const BarPart& p = data.parts[i];
    if (p.value <= 0) continue;
    const double w = kSwatch + 4 + fm.horizontalAdvance(p.label + ' ' + data.format(p.value)) + 12;
    if (x > left && x + w > left + width) {
      x = left;
      y += line + 2;
    }
    items.push_back({QRectF(x, y, w, line), int(i)});
    x += w;
  }
  return items;
}

// The total goes on the title's line, or under it where the two would meet
// (a narrow window drew one over the other, or cut the total off).
bool summaryOnItsOwnLine(const BarData& data, const QFont& font, double width) {
  QFont bold = font;
  bold.setBold(true);
  const QFontMetricsF fm(bold);
  return fm.horizontalAdvance(data.title) + 12 + fm.horizontalAdvance(data.summary()) > width;
}

}  // namespace

double BarData::total() const {
  double t = 0;
  for (const BarPart& p : parts)
    t += std::max(0.0, p.value);
  return t;
}

QString BarData::format(double value) const {
  return unit == Unit::bytes ? q(format_bytes(value)) : q(format_seconds(value));
}

QString BarData::summary() const {
  const double t = total();
  if (capacity > 0) {
    return QObject::tr("%1 of %2 (%3 %)")
        .arg(format(t), format(capacity))
        .arg(QString::number(100.0 * t / capacity, 'f', 0));
  }
  return format(t);
}

BarData memoryBar(const plan::Estimate& e) {
  const plan::MemoryBreakdown& m = e.memory;
  BarData d;
  d.title = QObject::tr("Memory per GPU (stage %1)").arg(e.most_loaded_stage);
  d.capacity = e.memory_capacity;
  d.unit = BarData::Unit::bytes;
  d.parts = {
      {QObject::tr("weights"), m.weights, QColor(0x4e, 0x79, 0xa7),
       QObject::tr("Working copy of the weights in the compute format")},
      {QObject::tr("gradients"), m.gradients, QColor(0xf2, 0x8e, 0x2b),
       QObject::tr("Gradient buffers")},
      {QObject::tr("optimizer"), m.optimizer_state, QColor(0x59, 0xa1, 0x4f),
       QObject::tr("Master weights and optimizer moments")},
      {QObject::tr("activations + workspace"), m.activations + m.activation_workspace,
       QColor(0xe1, 0x57, 0x59),
       QObject::tr("Kept for backward: %1; transient workspace: %2")
           .arg(q(format_bytes(m.activations)), q(format_bytes(m.activation_workspace)))},
      {QObject::tr("buffers"), m.communication_buffers, QColor(0xb0, 0x7a, 0xa1),
       QObject::tr("NCCL channels, pipeline send/receive, ZeRO-2 buckets, ZeRO-3 gathers")},
      {QObject::tr("reserve"), m.framework_reserve + m.fragmentation, QColor(0x9c, 0x95, 0x8f),
       QObject::tr("CUDA context and workspaces: %1; allocator fragmentation: %2")
           .arg(q(format_bytes(m.framework_reserve)), q(format_bytes(m.fragmentation)))},
  };
  return d;
}

BarData timeBar(const plan::Estimate& e) {
  const plan::TimeBreakdown& t = e.time;
  BarData d;
  d.title = e.inference ? QObject::tr("Time of one forward pass") : QObject::tr("Step time");
  d.unit = BarData::Unit::seconds;
  d.parts = {
      {QObject::tr("forward"), t.forward, QColor(0x4e, 0x79, 0xa7), QObject::tr("Forward compute")},
      {QObject::tr("backward"), t.backward, QColor(0x2c, 0x4f, 0x7c),
       QObject::tr("Backward compute")},
      {QObject::tr("recompute"), t.recompute, QColor(0x76, 0xb7, 0xb2),
       QObject::tr("Forward work repeated in backward")},
      {QObject::tr("TP comm"), t.tp_communication, QColor(0xf2, 0x8e, 0x2b),
       QObject::tr("Tensor-parallel collectives left exposed")},
      {QObject::tr("PP comm"), t.pp_communication, QColor(0xe1, 0x57, 0x59),
       QObject::tr("Pipeline send/receive")},
      {QObject::tr("DP comm"), t.dp_communication, QColor(0xb0, 0x7a, 0xa1),
       QObject::tr("Gradient reduction not hidden behind backward")},
      {QObject::tr("ZeRO gathers"), t.zero_gather, QColor(0xff, 0x9d, 0xa7),
       QObject::tr("ZeRO-3 parameter all-gathers left exposed")},
      {QObject::tr("bubble"), t.pipeline_bubble, QColor(0xba, 0xb0, 0xac),
       QObject::tr("Pipeline fill and drain")},
      {QObject::tr("waits"), t.collective_wait, QColor(0x9c, 0x75, 0x5f),
       QObject::tr("Ranks waiting in collectives for slower ones (ranks sharing cores)")},
      {QObject::tr("optimizer"), t.optimizer, QColor(0x59, 0xa1, 0x4f),
       QObject::tr("Optimizer update")},
      {QObject::tr("descheduled"), t.descheduled, QColor(0x8c, 0x8c, 0x8c),
       QObject::tr("Compute waiting for a core (more threads than cores)")},
  };
  return d;
}

double stackedBarHeight(const BarData& data, const QFont& font, double width) {
  const QFontMetricsF fm(font);
  const double lines = summaryOnItsOwnLine(data, font, width) ? 2 : 1;
  const double legend_top = lines * fm.height() + 4 + kBarHeight + 6;
  const auto items = legendLayout(data, fm, 0, legend_top, width);
  const double legend_bottom = items.empty() ? legend_top : items.back().rect.bottom();
  return legend_bottom + 4;
}

void paintStackedBar(QPainter& painter, const QRectF& area, const BarData& data, const QColor& text,
                     const QColor& base) {
  painter.save();
  const QFontMetricsF fm(painter.font());
  const double line = fm.height();
  const QFont normal_font = painter.font();
  QFont bold = normal_font;
  bold.setBold(true);

  painter.setPen(text);
  painter.setFont(bold);
  painter.drawText(QRectF(area.left(), area.top(), area.width(), line),
                   Qt::AlignLeft | Qt::AlignVCenter, data.title);
  const double total = data.total();
  const bool over = data.capacity > 0 && total > data.capacity;
  const bool own_line = summaryOnItsOwnLine(data, normal_font, area.width());
  painter.setPen(over ? QColor(0xd0, 0x30, 0x30) : text);
  painter.drawText(QRectF(area.left(), area.top() + (own_line ? line : 0), area.width(), line),
                   (own_line ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter, data.summary());
  painter.setFont(normal_font);

  const QRectF bar(area.left(), area.top() + (own_line ? 2 : 1) * line + 4, area.width(),
                   kBarHeight);
  painter.setPen(QPen(text, 0.5));
  painter.setBrush(base);
  painter.drawRect(bar);
  const double scale = std::max(total, data.capacity);
  if (scale > 0) {
    double x = bar.left();
    painter.setPen(Qt::NoPen);
    for (const BarPart& p : data.parts) {
      if (p.value <= 0) continue;
      const double w = bar.width() * p.value / scale;
      painter.setBrush(p.color);
      painter.drawRect(QRectF(x, bar.top(), w, bar.height()));
      x += w;
    }
    if (data.capacity > 0) {
      // The GPU's memory: a line; what does not fit is hatched beyond it.
      const double cx = bar.left() + bar.width() * data.capacity / scale;
      if (over) {
        painter.setBrush(QBrush(QColor(0xd0, 0x30, 0x30), Qt::BDiagPattern));
        painter.drawRect(QRectF(cx, bar.top(), bar.right() - cx, bar.height()));
      }
      painter.setPen(QPen(over ? QColor(0xd0, 0x30, 0x30) : text, 2));
      painter.drawLine(QPointF(cx, bar.top() - 3), QPointF(cx, bar.bottom() + 3));
    }
  }

  const auto items = legendLayout(data, fm, area.left(), bar.bottom() + 6, area.width());
  for (const LegendItem& item : items) {
    const BarPart& p = data.parts[std::size_t(item.part)];
    const QRectF swatch(item.rect.left(), item.rect.center().y() - kSwatch / 2, kSwatch, kSwatch);
    painter.setPen(Qt::NoPen);
    painter.setBrush(p.color);
    painter.drawRect(swatch);
    painter.setPen(text);
    painter.drawText(QRectF(swatch.right() + 4, item.rect.top(), item.rect.width(), line),
                     Qt::AlignLeft | Qt::AlignVCenter, p.label + ' ' + data.format(p.value));
  }
  painter.restore();
}

StackedBarWidget::StackedBarWidget(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void StackedBarWidget::setData(BarData data, std::uint64_t job) {
  const int height_before = heightForWidth(width());
  data_ = std::move(data);
  job_ = job;
  // A new layout only when the legend wraps differently: a relayout would
  // repaint everything below the bar too.
  if (heightForWidth(width()) != height_before) updateGeometry();
  update();
}

void StackedBarWidget::clear() {
  data_ = {};
  update();
}

QSize StackedBarWidget::sizeHint() const {
  return {400, heightForWidth(400)};
}

int StackedBarWidget::heightForWidth(int width) const {
  return int(std::ceil(stackedBarHeight(data_, font(), std::max(100, width - 8)))) + 4;
}

void StackedBarWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  if (data_.parts.empty()) return;
  paintStackedBar(painter, QRectF(rect()).adjusted(4, 2, -4, -2), data_,
                  palette().color(QPalette::Text), palette().color(QPalette::Base));
  painted_job_ = job_;
  emit painted(job_);
}

bool StackedBarWidget::event(QEvent* e) {
  if (e->type() != QEvent::ToolTip) return QWidget::event(e);
  auto* help = static_cast<QHelpEvent*>(e);
  const QRectF area = QRectF(rect()).adjusted(4, 2, -4, -2);
  const double scale = std::max(data_.total(), data_.capacity);
  if (scale <= 0) return true;
  double x = area.left();
  for (const BarPart& p : data_.parts) {
    if (p.value <= 0) continue;
    const double w = area.width() * p.value / scale;
    if (help->pos().x() >= x && help->pos().x() < x + w) {
      QToolTip::showText(
          help->globalPos(),
          QStringLiteral("<b>%1</b>: %2<br>%3").arg(p.label, data_.format(p.value), p.detail),
          this);
      return true;
    }
    x += w;
  }
  QToolTip::hideText();
  return true;
}

}  // namespace cs::gui
