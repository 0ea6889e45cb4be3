#pragma once
// The cluster drawn: nodes as boxes holding their GPUs joined by the
// in-node link (NVLink switch or PCIe), and the network fabric between the
// nodes. Readable from one node to thousands: boxes shrink to a minimum
// size, then the nodes that do not fit are folded into one box that says how
// many there are. Painting costs the same for 4 nodes as for 4096.

#include <QWidget>
#include <optional>

#include "core/hardware.h"

namespace cs::gui {

class TopologyView : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyView(QWidget* parent = nullptr);

  void setCluster(const Cluster& cluster);
  QSize sizeHint() const override { return {420, 260}; }
  QSize minimumSizeHint() const override { return {200, 140}; }

  // What the last paint drew (for tests): node boxes drawn one by one, and
  // the nodes folded into the summary box (0 when all fit).
  int drawnNodes() const { return drawn_nodes_; }
  int foldedNodes() const { return folded_nodes_; }

  // Paints into any device (export, SVG).
  void render(QPainter& painter, const QRectF& area);

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  std::optional<Cluster> cluster_;
  int drawn_nodes_ = 0;
  int folded_nodes_ = 0;
};

}  // namespace cs::gui
