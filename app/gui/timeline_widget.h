#pragma once
// The timeline: one row per lane of a trace store (a rank's stream, thread
// or predicted stage), its spans painted in the visible window. It reads only
// through the trace store's reader, on a worker thread: the store is opened
// there, and every change of the window or the width asks the reader's
// level-of-detail query spans(lane, window, pixels) for at most about one
// span per pixel; the answer comes back as a value and a stale one is
// dropped. Only the lanes in view (and a screen above and below) are asked
// for and painted, so that a store of 50,000 lanes scrolls as one of ten.
// Painting draws exactly the spans it was handed. Times stay int64
// nanoseconds; they become doubles only after the window's start is
// subtracted. Measured runs and the planner's prediction use this same widget.

#include <QColor>
#include <QPixmap>
#include <QPointer>
#include <QThreadPool>
#include <QWidget>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/trace_reader.h"

namespace cs::gui {

// The time axis's label of a tick `t` ns after the trace's start, ticks
// `step` ns apart: "2 ms", "0.5 ms", "123.456 s".
QString timeTickLabel(std::int64_t t, std::int64_t step);

// A title over a counter in bytes, whose values read in their own unit
// ("max 7.18 GiB"): without the " (bytes)" its tracer ends the name with
// ("memory in use (bytes)" is titled "memory in use").
QString counterTitle(const QString& name);
// A counter's value in its unit: a size for a counter in bytes ("1.91
// GiB"), else the number ("50").
QString counterValueText(const std::string& name, double v);

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
  // Where the times it shows (the axis, the tooltips) count from: the
  // store's first event, as the CLI's --from and the exports count them (a
  // counter sampled before it reads below zero); a store without events, its
  // first sample. A timeline following another counts from that one's.
  std::int64_t timeOrigin() const { return origin_; }
  // Shows `window` of another timeline whose whole is `full` and whose times
  // count from `origin` (else full's start): this one then spans at least
  // what that one spans and keeps following it across stores (the predicted
  // step under a measured run), so that their times line up.
  void followWindow(trace::TimeRange full, trace::TimeRange window,
                    std::optional<std::int64_t> origin = std::nullopt);
  void stopFollowing();                              // from the next store on, its own range again
  void zoom(double factor, std::int64_t anchor_ns);  // factor > 1 zooms in
  void resetZoom();

  int laneCount() const { return int(lanes_.size()); }  // counters' lanes too
  bool isCounterLane(int index) const { return lanes_[std::size_t(index)].counter.has_value(); }
  const trace::LaneInfo& laneInfo(int index) const { return lanes_[std::size_t(index)].info; }
  // Where lane `index` is drawn (empty when its rank is collapsed), and the
  // x of a time in the visible window.
  QRectF laneRect(int index) const;
  double xOf(std::int64_t time_ns) const;
  // Where the selected range's duration is written: just below the time
  // axis, where the axis is (pinned at the top of what is on screen once the
  // lanes are scrolled); empty with no range in the window.
  QRectF rangeLabelRect() const;

  // Ranks folded to one header row (a click on the rank's header toggles it).
  void setRankCollapsed(std::int32_t rank, bool collapsed);
  bool rankCollapsed(std::int32_t rank) const;

  // Selection: the event under a point of the widget, or one by id (the view
  // moves to it). Looked up on the worker thread; eventSelected reports it.
  void selectAt(const QPoint& pos);
  void selectEvent(std::int64_t event_id);
  void clearSelection();
  std::optional<trace::StoredEvent> selectedEvent() const { return selected_; }
  int selectedRow() const { return selected_depth_; }  // the nesting row it is outlined on
  QString selectedName() const { return selected_name_; }

  // The event the selected one is correlated with (a runtime call and the
  // kernel or copy it ran): outlined, with an arrow from the call to the
  // device's work. It goes when the selection changes.
  void setLinkedEvent(std::optional<trace::StoredEvent> event);
  std::optional<trace::StoredEvent> linkedEvent() const { return linked_; }

  // A time range (Shift+drag, or set here), shaded; rangeSelected reports it.
  void setSelectedRange(std::optional<trace::TimeRange> range);
  std::optional<trace::TimeRange> selectedRange() const { return range_; }

  // The critical path (core/trace_critical_path.h: the chain of operations
  // across the ranks that set each step's length, as HTA finds it) of the
  // steps in view, drawn as a bar over each operation on it, idle time on
  // its rank's header row, and a line where it goes from one lane to
  // another. Computed on the worker thread for at most kCriticalPathSteps
  // steps in view; criticalPathChanged says what is drawn, or why nothing.
  static constexpr int kCriticalPathSteps = 50;
  void setCriticalPathShown(bool shown);
  bool criticalPathShown() const { return critical_shown_; }
  struct CriticalMark {
    trace::LaneId lane;  // none: idle, drawn on the rank's header row
    std::int32_t rank = 0;
    std::int64_t start_ns = 0, end_ns = 0;
  };
  // The marks held (in time order) and the steps they cover (-1, -1: none).
  const std::vector<CriticalMark>& criticalMarks() const;
  std::pair<std::int32_t, std::int32_t> criticalSteps() const { return critical_steps_; }
  QString criticalPathNote() const { return critical_note_; }
  static QColor criticalPathColor() { return QColor(214, 0, 110); }
  // The strip along an op's bottom edge as long as the share of its time its
  // thread was off CPU (where in the op is not recorded, so it starts left).
  static QColor offCpuColor() { return QColor(255, 176, 0); }
  // A name as a tooltip or a heading shows it, HTML-escaped: past 1000
  // characters its middle cut and its length given.
  // `whole_chars`: the characters of the name in the store, where `name` is
  // already shown elided (LaneFrame::names).
  static QString shortNameHtml(const QString& name, qsizetype whole_chars = 0);

  // Zooms to the next (+1) or the previous (-1) training step, across the
  // ranks (the first key press: the step under the middle of the view);
  // stepShown reports its number.
  void goToStep(int delta);

  // Search by name (substring): the first call with a new text looks the
  // matches up on the worker thread, then next/previous step through them,
  // selecting each and moving the view to it. searchMoved reports where.
  void findNext(const QString& text);
  void findPrevious(const QString& text);
  int searchMatches() const { return int(matches_.size()); }
  int searchIndex() const { return match_index_; }
  // More matched than the 100,000 kept (the first in time, across the ranks).
  bool searchCapped() const { return search_capped_; }
  // The query the last frame answered, and what the last paint drew.
  std::uint64_t frameJob() const { return frame_ ? frame_->job : 0; }
  std::uint64_t paintedJob() const { return cache_job_; }  // the frame the last paint drew
  std::uint64_t requestedJob() const { return requested_; }
  bool busy() const { return opening_ || running_ || pending_; }
  std::int64_t handedSpans() const;  // spans in the last frame, all lanes
  // The lanes [first, last) the last frame holds spans for, and those the
  // view shows now.
  std::pair<int, int> frameLanes() const;
  std::pair<int, int> lanesInView() const;
  int drawnItems() const { return drawn_items_; }
  int spanAreaWidth() const;  // pixels the spans are drawn across

  // The lane titles' column, left of the spans. It fits the longest lane
  // name (within bounds) until the user drags its edge; a double-click on the
  // edge fits it again. Two timelines that show one clock (a run and its
  // predicted step) keep the same column through gutterChanged.
  int gutterWidth() const { return int(gutter_); }
  void setGutterWidth(int pixels);  // by the user: kept across stores
  void fitGutter();                 // to the lane names again
  // Keeps `leader`'s column from now on; a drag of this one's edge resizes
  // the leader's (the predicted step under a measured run).
  void followGutter(TimelineWidget* leader);

  // Paints the last frame into `area` (a report): times map to the area's width.
  void render(QPainter& painter, const QRectF& area, const QColor& text, const QColor& base);
  double renderHeight() const;
  // A painter of `window` of the store (a report's picture of one step):
  // what the view shows (lanes, folds, selection) is copied now; the store is
  // read, with a reader of its own, and the picture painted when it is
  // called, on any thread, so that an export leaves the GUI thread free.
  // The lanes that fit the area are drawn; a last row counts the others.
  using Painter = std::function<void(QPainter&, const QRectF&)>;
  Painter windowPainter(trace::TimeRange window, const QColor& text) const;
  // The height a report gives that picture: every lane's, up to about 250
  // rows (a store of thousands of lanes would make an image of gigabytes).
  double pictureHeight() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  // In a scroll area: ask for the height of every lane, so that the area
  // scrolls instead of squeezing the lanes.
  void setMinimumToContent(bool on);

 signals:
  void storeOpened(const QString& path, const QString& error);
  // The visible window moved (zoom, pan, a new store, setWindow).
  void windowChanged(std::int64_t start_ns, std::int64_t end_ns);
  void frameReady(std::uint64_t job);
  // The event picked (or none: selected empty, with why in `error` when it failed).
  void eventSelected(const std::optional<cs::trace::StoredEvent>& selected, const QString& name,
                     const QString& lane_title, const QString& error);
  void rangeSelected(const std::optional<cs::trace::TimeRange>& range);
  // index among `matches` (-1: none found), or the error of the look-up.
  void searchMoved(int index, int matches, const QString& error);
  void stepShown(std::int32_t step);
  // The view is no longer the step stepShown named: it moved, or Home (or
  // resetZoom) showed the whole run, which the step's view may have been.
  void stepLeft();
  void stepNotShown(const QString& why);  // no steps recorded, or not readable
  void gutterChanged(int pixels);
  // The critical path drawn changed: what it covers ("steps 3–5"), or why
  // none is drawn.
  void criticalPathChanged(const QString& note);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void moveEvent(QMoveEvent* event) override;  // a scroll of the surrounding area
  void showEvent(QShowEvent* event) override;
  bool event(QEvent* event) override;

 public:
  // One lane's answer to spans(lane, window, pixels), names resolved.
  struct LaneFrame {
    std::vector<trace::Span> spans;
    std::vector<QString> names;  // parallel to spans, as shown (elidedName)
    // Parallel to spans: the characters of each name in the store, which
    // the tooltip gives where `names` holds it elided.
    std::vector<qsizetype> name_chars;
    std::vector<QColor> colors;  // parallel to spans, chosen on the worker thread
    // Parallel to spans where any op in view of a CPU-engine rank was off
    // CPU (kOffCpuCounter): the share of its time, 0 for the others; empty
    // where none was.
    std::vector<float> off_cpu_share;
    trace::CounterView counter;  // a counter's lane: its samples, one column per pixel
    QString error;               // ... or why they could not be read
  };
  struct Frame {
    std::uint64_t job = 0;
    trace::TimeRange window;
    int pixels = 0;
    int first_lane = 0;            // lanes[k] is lane first_lane + k of the view
    std::vector<LaneFrame> lanes;  // those in view when it was asked for
    QString error;
    // Lane `index`'s spans, or null when it was out of view.
    const LaneFrame* lane(std::size_t index) const {
      const std::size_t k = index - std::size_t(first_lane);
      return index >= std::size_t(first_lane) && k < lanes.size() ? &lanes[k] : nullptr;
    }
  };
  struct Lane {
    trace::LaneInfo info;
    QString title;
    int depth = 1;  // rows of nesting
    // A sampled counter of the rank (GPU memory in use), drawn as a graph
    // under its rank's lanes, as Nsight Systems and Perfetto draw counter
    // tracks; info.id is then 0 (no event is on it; isCounterLane tells it
    // apart, whatever info.kind says) and info.name the counter's name.
    std::optional<trace::CounterSeries> counter;
    // Its value axis: from 0 (or below) to the largest value of the counter
    // of that name over all ranks, so that the ranks' lanes compare.
    double scale_low = 0, scale_high = 1;
  };
  // What a paint reads, copied from the view so that a picture can be
  // painted off the GUI thread.
  struct PaintState {
    std::vector<Lane> lanes;
    std::vector<std::int32_t> collapsed;  // ranks folded to their header row
    trace::TimeRange full, window;
    std::int64_t origin = 0;  // the axis's zero
    std::shared_ptr<const Frame> frame;
    std::optional<trace::StoredEvent> selected;
    std::int32_t selected_depth = 0;
    std::optional<trace::StoredEvent> linked;
    std::int32_t linked_depth = 0;
    std::optional<trace::TimeRange> range;
    QColor range_shade;
    // Whether the range's duration is written under the axis: the widget
    // writes it over its cached picture, under the axis where it is pinned.
    bool range_label = true;
    std::shared_ptr<const std::vector<CriticalMark>> critical;
    QString message;
    double gutter = 150;  // the lane titles' column
  };

 private:
  void requestFrame();
  // Reads the critical path of the steps in view, unless it is held.
  void requestCriticalPath();
  void forgetCriticalPath();  // a new store, or none
  void setCriticalMarks(std::shared_ptr<const std::vector<CriticalMark>> marks,
                        std::pair<std::int32_t, std::int32_t> steps, const QString& note);
  // Asks for the lanes come into view (a scroll, a resize, a rank unfolded)
  // when the last query did not cover them.
  void loadLanesInView();
  // The part of the widget on screen (in a scroll area, the rows scrolled
  // in), or its first rows while it is hidden.
  QRect shownRect() const;
  // Where the time axis is drawn over the lanes: the top of the part on
  // screen once the lanes are scrolled (0: in its own place, at the top).
  double rulerTop() const;
  // Lets go of the reader on the worker thread (closing SQLite is I/O).
  void releaseReader();
  void startQuery(std::uint64_t job);
  void frameArrived(std::shared_ptr<const Frame> frame);
  std::int64_t timeAt(double x) const;
  int laneAt(double y, double top) const;
  void showSelected(std::optional<trace::StoredEvent> event, const QString& name,
                    const QString& error, bool move_view, int row);
  // The span drawn under a point: on the row under it, the span holding its
  // time, else the nearest within 2 pixels. The tooltip names it, a click
  // selects it (in a fold, the event there), a double-click zooms to it.
  struct SpanHit {
    int lane = 0;
    std::size_t span = 0;  // in frame_->lanes[lane].spans
    int row = 0;
    std::int64_t time_ns = 0, slack_ns = 0;  // the pointer's time, and 2 pixels
  };
  std::optional<SpanHit> spanAt(const QPoint& pos) const;
  // The tooltip of a counter's lane under `pos`: its value there, from the
  // frame in hand; empty elsewhere.
  QString counterTip(const QPoint& pos) const;
  // Looks event `event_id` up on the worker thread and selects it.
  void pick(std::int64_t event_id, bool move_view, int row);
  // Unfolds the lane's rank and scrolls the surrounding scroll area to it.
  void revealLane(trace::LaneId id);
  void zoomTo(trace::TimeRange range);  // with a tenth of margin each side
  void stepSearch(const QString& text, int delta);
  QString laneTitleOf(trace::LaneId id) const;
  // The header row of `rank` under y (collapsed or not), or -1.
  std::int32_t rankHeaderAt(double y, double top) const;
  bool isRankFirstLane(std::size_t index) const;
  PaintState paintState() const;
  // The nesting row of `event` among the frame's spans, else `fallback`.
  std::int32_t depthInFrame(const trace::StoredEvent& event, std::int32_t fallback) const;
  // The gutter's edge is under x (a drag there resizes the column).
  bool onGutterEdge(const QPointF& pos) const;
  // Sets the column to `wanted` (drawn within the widget's width), repaints
  // and asks for spans at the new width.
  void applyGutter(double wanted);

  QThreadPool pool_;  // one thread: the reader is used by one thread at a time
  std::shared_ptr<trace::TraceReader> reader_;
  QString path_;
  QString message_;
  std::uint64_t open_job_ = 0;
  std::vector<Lane> lanes_;
  trace::TimeRange full_;
  trace::TimeRange own_range_;  // the store's own time range
  std::int64_t own_origin_ = 0;  // its first event
  std::int64_t origin_ = 0;      // own_origin_, or the followed timeline's
  std::optional<trace::TimeRange> followed_full_, followed_window_;
  std::optional<std::int64_t> followed_origin_;
  trace::TimeRange window_;
  std::shared_ptr<const Frame> frame_;
  std::uint64_t requested_ = 0;
  std::pair<int, int> asked_lanes_{0, 0};  // the lanes of the query running or last run
  bool opening_ = false;  // a store is being opened
  bool running_ = false;
  bool pending_ = false;
  int drawn_items_ = 0;
  std::optional<QPoint> drag_from_;
  // The last paint of the spans, reused while neither the frame, the window,
  // the size nor the palette changed (other widgets' repaints reach here too).
  QPixmap cache_;
  QRect cache_rect_;  // the part of the widget it holds
  int cache_width_ = 0;
  std::uint64_t cache_job_ = 0;
  trace::TimeRange cache_window_;
  qint64 cache_palette_ = 0;
  int cache_items_ = 0;
  trace::TimeRange drag_window_;
  bool minimum_to_content_ = false;
  double gutter_ = 150;         // drawn: gutter_wanted_ within the width
  double gutter_wanted_ = 150;  // fitted, set or followed
  bool gutter_by_user_ = false;
  bool gutter_drag_ = false;
  double gutter_at_press_ = 0;
  QPointer<TimelineWidget> gutter_leader_;
  bool range_drag_ = false;
  bool dragged_ = false;
  std::vector<std::int32_t> collapsed_;  // ranks folded to their header row
  std::optional<trace::StoredEvent> selected_;
  QString selected_name_;
  bool critical_shown_ = false;
  std::shared_ptr<const std::vector<CriticalMark>> critical_;
  std::pair<std::int32_t, std::int32_t> critical_steps_{-1, -1};
  QString critical_note_;
  std::uint64_t critical_job_ = 0;
  // The store's steps across the ranks (read once per store, on the worker
  // thread): which of them the view shows.
  std::shared_ptr<const std::vector<std::pair<std::int32_t, trace::TimeRange>>> step_windows_;
  bool step_windows_asked_ = false;
  std::optional<trace::TimeRange> range_;
  QString search_text_;
  std::vector<trace::StoredEvent> matches_;  // by start time
  std::vector<QString> match_names_;         // parallel to matches_
  int match_index_ = -1;
  bool search_capped_ = false;
  bool search_pending_ = false;  // search_text_'s matches are being looked up
  std::uint64_t step_job_ = 0;
  std::optional<std::int32_t> shown_step_;  // the step goToStep zoomed to
  void leaveStep();                         // forgets shown_step_, said with stepLeft
  std::uint64_t select_job_ = 0;
  std::int32_t selected_depth_ = 0;
  std::optional<trace::StoredEvent> linked_;
  std::int32_t linked_depth_ = 0;
  std::uint64_t tooltip_job_ = 0;
};

}  // namespace cs::gui
