#include "app/gui/topology_view.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "core/format.h"
#include "core/shown_name.h"

namespace cs::gui {

namespace {

constexpr int kMaxGpusDrawn = 16;  // beyond this a node shows 16 and "+N"
constexpr double kGap = 6;

struct NodeLayout {
  double gpu = 0;  // side of a GPU square; 0: GPUs not drawn (tiny boxes)
  int gpu_cols = 1;
  int gpu_rows = 1;
  QSizeF box;
  int cols = 1;
  int rows = 1;
  int capacity() const { return cols * rows; }
};

NodeLayout layout_for(double gpu, int gpus_shown, const QSizeF& space, bool labelled) {
  NodeLayout l;
  l.gpu = gpu;
  if (gpu > 0) {
    l.gpu_cols = gpus_shown <= 4 ? std::max(1, gpus_shown) : (gpus_shown + 1) / 2;
    l.gpu_rows = gpus_shown <= 4 ? 1 : 2;
    const double pad = 4;
    l.box = QSizeF(l.gpu_cols * (gpu + 3) + 2 * pad - 3,
                   l.gpu_rows * (gpu + 3) + 2 * pad + 5 + (labelled ? 13 : 0));
  } else {
    l.box = QSizeF(14, 10);
  }
  l.cols = std::max(1, int((space.width() + kGap) / (l.box.width() + kGap)));
  l.rows = std::max(1, int((space.height() + kGap) / (l.box.height() + kGap)));
  return l;
}

QString link_label(const Link& link, const char* where) {
  const QString name = QString::fromStdString(shown_name(link));
  return QStringLiteral("%1 · %2 per port %3")
      .arg(name, QString::fromStdString(format_rate(link.bandwidth * 8, "bit/s")), where);
}

}  // namespace

TopologyView::TopologyView(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setAccessibleName(tr("Cluster topology"));
}

void TopologyView::setCluster(const Cluster& cluster) {
  cluster_ = cluster;
  update();
}

void TopologyView::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), palette().base());
  render(painter, QRectF(rect()));
}

void TopologyView::render(QPainter& painter, const QRectF& area) {
  drawn_nodes_ = 0;
  folded_nodes_ = 0;
  if (!cluster_) return;
  const Cluster& c = *cluster_;
  painter.save();
  painter.setRenderHint(QPainter::Antialiasing);
  const QPalette pal = palette();
  const QColor text = pal.color(QPalette::Text);
  const QColor node_fill = pal.color(QPalette::AlternateBase);
  const QColor gpu_fill(118, 185, 0);  // GPU boards
  const QColor fabric(0x3d, 0x7e, 0xc7);
  const QColor intra(0xe0, 0x8a, 0x1e);
  QFont font = painter.font();
  const QFontMetricsF fm(font);
  const double line = fm.height();

  QRectF r = area.adjusted(8, 6, -8, -6);
  // The fabric between nodes, as a bar the nodes hang from.
  QRectF fabric_bar;
  if (c.nodes > 1 && c.inter_node) {
    fabric_bar = QRectF(r.left(), r.top(), r.width(), line + 6);
    painter.setPen(Qt::NoPen);
    painter.setBrush(fabric);
    painter.drawRoundedRect(fabric_bar, 4, 4);
    painter.setPen(Qt::white);
    const QString label =
        link_label(*c.inter_node, "") + QStringLiteral("× %1 per node").arg(c.nics_per_node);
    painter.drawText(fabric_bar.adjusted(6, 0, -6, 0), Qt::AlignVCenter | Qt::AlignLeft,
                     fm.elidedText(label, Qt::ElideRight, fabric_bar.width() - 12));
    r.setTop(fabric_bar.bottom() + 14);
  }
  // The in-node link, as a legend line at the bottom.
  const int gpus = c.gpus_per_node;
  const QRectF legend(r.left(), r.bottom() - line, r.width(), line);
  r.setBottom(legend.top() - 4);
  painter.setPen(text);
  QString legend_text;
  if (gpus > 1) {
    legend_text = link_label(c.intra_node, "inside each node");
  } else if (gpus == 0) {
    legend_text = tr("CPU-only nodes");
  } else {
    legend_text = tr("one GPU per node");
  }
  legend_text = QStringLiteral("%1 node%2 × %3 · %4")
                    .arg(QString::fromStdString(format_count(c.nodes)))
                    .arg(c.nodes == 1 ? "" : "s")
                    .arg(gpus == 0 ? tr("no GPU")
                                   : QStringLiteral("%1 %2").arg(gpus).arg(
                                         QString::fromStdString(c.gpu ? c.gpu->display_name : "")))
                    .arg(legend_text);
  painter.drawText(legend, Qt::AlignLeft | Qt::AlignVCenter,
                   fm.elidedText(legend_text, Qt::ElideRight, legend.width()));
  if (r.height() < 10) {
    painter.restore();
    return;
  }

  // The largest boxes that hold every node; else the smallest, folding the rest.
  const int shown = std::min(gpus, kMaxGpusDrawn);
  NodeLayout layout;
  bool fits = false;
  for (double gpu : {18.0, 14.0, 11.0, 8.0, 6.0, 4.0}) {
    layout = layout_for(gpus > 0 ? gpu : 8.0, std::max(shown, 1), r.size(), gpu >= 8);
    if (layout.capacity() >= c.nodes && layout.box.width() <= r.width()) {
      fits = true;
      break;
    }
  }
  if (!fits) {
    layout = layout_for(0, 0, r.size(), false);
    fits = layout.capacity() >= c.nodes;
  }
  const bool labelled = layout.gpu >= 8;
  int to_draw = c.nodes;
  if (!fits) to_draw = std::max(0, (layout.rows - 1) * layout.cols);
  folded_nodes_ = c.nodes - to_draw;
  drawn_nodes_ = to_draw;

  // Centre the grid when there is room to spare.
  const int used_cols = std::min(layout.cols, std::max(1, c.nodes));
  const double grid_width = used_cols * (layout.box.width() + kGap) - kGap;
  const double x0 = r.left() + std::max(0.0, (r.width() - grid_width) / 2);
  QFont small = font;
  small.setPointSizeF(std::max(6.0, font.pointSizeF() * 0.8));
  painter.setFont(small);
  const QFontMetricsF sfm(small);

  for (int n = 0; n < to_draw; ++n) {
    const int col = n % layout.cols;
    const int row = n / layout.cols;
    const QRectF box(x0 + col * (layout.box.width() + kGap),
                     r.top() + row * (layout.box.height() + kGap), layout.box.width(),
                     layout.box.height());
    if (!fabric_bar.isNull()) {
      painter.setPen(QPen(fabric, row == 0 ? 1.5 : 0.6));
      if (row == 0)
        painter.drawLine(QPointF(box.center().x(), fabric_bar.bottom()),
                         QPointF(box.center().x(), box.top()));
    }
    painter.setPen(QPen(text, 1));
    painter.setBrush(node_fill);
    painter.drawRoundedRect(box, 3, 3);
    if (layout.gpu <= 0) continue;
    // GPUs in a grid, joined by the in-node link drawn as a bar under them.
    const double pad = 4;
    const double top = box.top() + pad + (labelled ? 13 : 0);
    if (labelled) {
      painter.setPen(text);
      const QString name = gpus > shown ? QStringLiteral("node %1 · %2 GPUs").arg(n).arg(gpus)
                                        : QStringLiteral("node %1").arg(n);
      painter.drawText(QRectF(box.left() + pad, box.top() + 1, box.width() - 2 * pad, 13),
                       Qt::AlignLeft | Qt::AlignVCenter,
                       sfm.elidedText(name, Qt::ElideRight, box.width() - 2 * pad));
    }
    if (gpus > 1) {
      painter.setPen(Qt::NoPen);
      painter.setBrush(intra);
      painter.drawRect(QRectF(box.left() + pad, box.bottom() - pad - 3, box.width() - 2 * pad, 3));
    }
    painter.setPen(Qt::NoPen);
    painter.setBrush(gpu_fill);
    for (int g = 0; g < shown; ++g) {
      const int gc = g % layout.gpu_cols;
      const int gr = g / layout.gpu_cols;
      painter.drawRect(QRectF(box.left() + pad + gc * (layout.gpu + 3), top + gr * (layout.gpu + 3),
                              layout.gpu, layout.gpu));
    }
    if (gpus == 0) {
      painter.setPen(text);
      painter.drawText(box, Qt::AlignCenter, QStringLiteral("CPU"));
    }
  }

  if (folded_nodes_ > 0) {
    // The nodes that do not fit, as one box across the last row.
    const int row = layout.rows - 1;
    const QRectF box(x0, r.top() + row * (layout.box.height() + kGap), std::max(grid_width, 60.0),
                     std::max(layout.box.height(), line + 4));
    painter.setPen(QPen(text, 1, Qt::DashLine));
    painter.setBrush(node_fill);
    painter.drawRoundedRect(box, 3, 3);
    painter.setPen(text);
    painter.setFont(font);
    const QString label =
        tr("… and %1 more nodes (%2 GPUs)")
            .arg(QString::fromStdString(format_count(folded_nodes_)))
            .arg(QString::fromStdString(format_count(double(folded_nodes_) * gpus)));
    painter.drawText(box, Qt::AlignCenter, fm.elidedText(label, Qt::ElideRight, box.width() - 4));
  }
  painter.restore();
}

}  // namespace cs::gui
