#pragma once
// The timeline: one row per lane of a trace store (a rank's stream, thread
// or predicted stage), its spans painted in the visible window. It reads only
// through the trace store's reader, on a worker thread: the store is opened
// there, and every change of the window or the width asks the reader's
// level-of-detail query spans(lane, window, pixels) for at most about one
// span per pixel; the answer comes back as a value and a stale one is
// dropped. Painting draws exactly the spans it was handed. Times stay int64
// nanoseconds; they become doubles only after the window's start is
// subtracted. Measured runs and the planner's prediction use this same widget.

#include <QColor>
#include <QPixmap>
#include <QThreadPool>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/trace_reader.h"

namespace cs::gui {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineWidget(QWidget* parent = nullptr);
  ~TimelineWidget() override;

  // Shows the store at `path`, opened on the worker thread; the window
  // becomes the whole trace.
  void setStore(const QString& path);
  // Shows no store, with a line saying why.
  void clear(const QString& message);
  QString storePath() const { return path_; }
  QString message() const { return message_; }

  // The visible window [start, end), nanoseconds on the store's clock.
  trace::TimeRange window() const { return window_; }
  trace::TimeRange fullRange() const { return full_; }
  void setWindow(std::int64_t start_ns, std::int64_t end_ns);
  void zoom(double factor, std::int64_t anchor_ns);  // factor > 1 zooms in
  void resetZoom();

  int laneCount() const { return int(lanes_.size()); }
  // The query the last frame answered, and what the last paint drew.
  std::uint64_t frameJob() const { return frame_ ? frame_->job : 0; }
  std::uint64_t paintedJob() const { return cache_job_; }  // the frame the last paint drew
  std::uint64_t requestedJob() const { return requested_; }
  bool busy() const { return opening_ || running_ || pending_; }
  std::int64_t handedSpans() const;  // spans in the last frame, all lanes
  int drawnItems() const { return drawn_items_; }
  int spanAreaWidth() const;  // pixels the spans are drawn across

  // Paints the last frame into `area` (a report): times map to the area's width.
  void render(QPainter& painter, const QRectF& area, const QColor& text, const QColor& base);
  double renderHeight() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return {300, 80}; }

 signals:
  void storeOpened(const QString& path, const QString& error);
  void frameReady(std::uint64_t job);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool event(QEvent* event) override;

 public:
  // One lane's answer to spans(lane, window, pixels), names resolved.
  struct LaneFrame {
    std::vector<trace::Span> spans;
    std::vector<QString> names;  // parallel to spans
    std::vector<QColor> colors;  // parallel to spans, chosen on the worker thread
  };
  struct Frame {
    std::uint64_t job = 0;
    trace::TimeRange window;
    int pixels = 0;
    std::vector<LaneFrame> lanes;  // parallel to lanes_
    QString error;
  };
  struct Lane {
    trace::LaneInfo info;
    QString title;
    int depth = 1;  // rows of nesting
  };

 private:
  void requestFrame();
  // Lets go of the reader on the worker thread (closing SQLite is I/O).
  void releaseReader();
  void startQuery(std::uint64_t job);
  void frameArrived(std::shared_ptr<const Frame> frame);
  std::int64_t timeAt(double x) const;
  int laneAt(double y, double top) const;
  void paintInto(QPainter& painter, const QRectF& area, const QColor& text, const QColor& base,
                 bool count_items);

  QThreadPool pool_;  // one thread: the reader is used by one thread at a time
  std::shared_ptr<trace::TraceReader> reader_;
  QString path_;
  QString message_;
  std::uint64_t open_job_ = 0;
  std::vector<Lane> lanes_;
  trace::TimeRange full_;
  trace::TimeRange window_;
  std::shared_ptr<const Frame> frame_;
  std::uint64_t requested_ = 0;
  bool opening_ = false;  // a store is being opened
  bool running_ = false;
  bool pending_ = false;
  int drawn_items_ = 0;
  std::optional<QPoint> drag_from_;
  // The last paint of the spans, reused while neither the frame, the window,
  // the size nor the palette changed (other widgets' repaints reach here too).
  QPixmap cache_;
  std::uint64_t cache_job_ = 0;
  trace::TimeRange cache_window_;
  qint64 cache_palette_ = 0;
  int cache_items_ = 0;
  trace::TimeRange drag_window_;
};

}  // namespace cs::gui
