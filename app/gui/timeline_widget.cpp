#include "app/gui/timeline_widget.h"

#include <QFileInfo>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPen>
#include <QPolygonF>
#include <QScrollArea>
#include <QTimer>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include <QtConcurrent/QtConcurrentRun>

#include "app/gui/plain_text.h"
#include "core/format.h"
#include "core/predicted_step.h"
#include "core/trace_analysis.h"
#include "core/trace_critical_path.h"
#include "core/trace_types.h"

namespace cs::gui {

QString counterTitle(const QString& name) {
  QString title = name;
  if (title.endsWith(QLatin1String(" (bytes)"), Qt::CaseInsensitive)) title.chop(8);
  return title;
}

QString counterValueText(const std::string& name, double v) {
  return trace::counter_in_bytes(name) ? QString::fromStdString(format_bytes(v))
                                       : QString::number(v, 'g', 6);
}

namespace {

// The lane titles' column: at least this, and at most what leaves the spans
// kMinSpanArea (a drag) or kMaxGutterShare of the width (a fit).
constexpr double kMinGutter = 60;
constexpr double kMinSpanArea = 100;
constexpr double kMaxGutterShare = 0.4;
constexpr double kTitleIndent = 14;  // a lane's title, under its rank's header
constexpr double kEdgeSlack = 6;     // pixels left of the edge that grab it
constexpr double kRuler = 20;      // time axis
constexpr double kRowHeight = 16;  // one nesting level
// Rows a lane shows at most: deeper nesting (recursive CPU ranges, steps
// that overlap) is drawn on the last row, so that the drawn height, and the
// work of a frame, stays bounded whatever the store holds.
constexpr int kMaxLaneRows = 12;
constexpr double kLaneGap = 4;
// 100 ns: CUPTI and Kineto times are exact to the nanosecond, and launch
// gaps and short kernels are a few hundred nanoseconds to a few microseconds.
constexpr std::int64_t kMinWindowNs = 100;

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

// Spans of one category told apart by name: the planner's parts in the
// colours of the step-time bar; other names get a shade of their category
// from their first words.
QColor shade(QColor base, const QString& name) {
  static const std::pair<const char*, QColor> kParts[] = {
      {"forward", QColor(0x4e, 0x79, 0xa7)},   {"backward", QColor(0x2c, 0x4f, 0x7c)},
      {"recompute", QColor(0x76, 0xb7, 0xb2)}, {"optimizer", QColor(0x59, 0xa1, 0x4f)},
      {"bubble", QColor(0xba, 0xb0, 0xac)},    {"tp ", QColor(0xf2, 0x8e, 0x2b)},
      {"pp ", QColor(0xe1, 0x57, 0x59)},       {"dp ", QColor(0xb0, 0x7a, 0xa1)},
      {"zero", QColor(0xff, 0x9d, 0xa7)},
  };
  for (const auto& [prefix, color] : kParts) {
    if (name.startsWith(QLatin1String(prefix))) return color;
  }
  const QString key = name.section(QStringLiteral(" · "), 0, 0);
  const std::size_t h = qHash(key, std::size_t(0)) % 5;  // seed 0: the same colours every run
  static constexpr int kFactors[] = {100, 130, 75, 115, 88};
  return kFactors[h] >= 100 ? base.lighter(kFactors[h]) : base.darker(200 - kFactors[h]);
}

QColor categoryColor(trace::Category c, trace::EventKind kind) {
  switch (c) {
    case trace::Category::compute:
      return kind == trace::EventKind::annotation ? QColor(0x8c, 0xa9, 0xcf)
                                                  : QColor(0x4e, 0x79, 0xa7);
    case trace::Category::communication:
      return QColor(0xf2, 0x8e, 0x2b);
    case trace::Category::memory:
      return QColor(0x59, 0xa1, 0x4f);
    case trace::Category::synchronization:
      return QColor(0xb0, 0x7a, 0xa1);
    case trace::Category::other:
      return QColor(0xba, 0xb0, 0xac);
  }
  return Qt::gray;
}

// A tick step of 1, 2 or 5 times a power of ten, about `target` ns.
std::int64_t tickStep(double target) {
  double p = std::pow(10.0, std::floor(std::log10(std::max(1.0, target))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= target) return std::max<std::int64_t>(1, std::int64_t(m * p));
  }
  return std::int64_t(10 * p);
}

constexpr int kCounterRows = 2;  // a counter's graph

// A lane's name as its title column shows it (elidedName: the column's
// width and every frame measure it); its title keeps it whole.
QString laneName(const TimelineWidget::Lane& lane) {
  return lane.counter && trace::counter_in_bytes(lane.info.name)
             ? counterTitle(elidedName(lane.info.name))
             : elidedName(lane.info.name);
}

// The store's lanes as the timeline shows them: each rank's lanes, then its
// counters' lanes, titled with the rank's device (else "rank N") and the
// lane's name. A store whose counters cannot be read shows its lanes alone.
std::vector<TimelineWidget::Lane> timelineLanes(const trace::TraceReader& reader) {
  std::map<std::int32_t, QString> devices;
  for (const trace::RankInfo& r : reader.ranks()) {
    if (!r.device.empty()) devices[r.rank] = q(r.device);
  }
  auto title = [&](std::int32_t rank, const QString& name) {
    const auto device = devices.find(rank);
    return QStringLiteral("%1 · %2").arg(
        device != devices.end() ? device->second : QStringLiteral("rank %1").arg(rank), name);
  };
  std::map<std::int32_t, std::vector<TimelineWidget::Lane>> counters;
  if (auto series = reader.counter_series()) {
    for (const trace::CounterSeries& c : *series) {
      // The engines' memory by part adds up to their "memory in use" lane:
      // the prediction's table holds the parts.
      if (trace::is_memory_part_counter(reader.string(c.name))) continue;
      if (trace::is_op_counter(reader.string(c.name))) continue;
      TimelineWidget::Lane lane;
      lane.info.rank = c.rank;
      lane.info.name = reader.string(c.name);
      lane.info.event_count = c.samples;
      lane.info.first_ns = c.first_ns;
      lane.info.last_ns = c.last_ns;
      lane.counter = c;
      lane.title = title(c.rank, laneName(lane));
      lane.depth = kCounterRows;
      counters[c.rank].push_back(std::move(lane));
    }
  }
  // One axis per counter name across the ranks; a value that is not finite
  // (an importer's inf) does not set it.
  std::map<std::string, std::pair<double, double>> scales;
  for (const auto& [rank, lanes] : counters) {
    for (const TimelineWidget::Lane& lane : lanes) {
      auto& [low, high] = scales.try_emplace(lane.info.name, 0.0, 0.0).first->second;
      if (std::isfinite(lane.counter->low)) low = std::min(low, lane.counter->low);
      if (std::isfinite(lane.counter->high)) high = std::max(high, lane.counter->high);
    }
  }
  for (auto& [rank, lanes] : counters) {
    for (TimelineWidget::Lane& lane : lanes) {
      const auto [low, high] = scales.at(lane.info.name);
      lane.scale_low = low;
      lane.scale_high = high > low ? high : low + 1;
    }
  }
  std::vector<TimelineWidget::Lane> out;
  auto add_counters_before = [&](std::optional<std::int32_t> rank) {
    while (!counters.empty() && (!rank || counters.begin()->first < *rank)) {
      for (TimelineWidget::Lane& lane : counters.begin()->second)
        out.push_back(std::move(lane));
      counters.erase(counters.begin());
    }
  };
  for (const trace::LaneInfo& l : reader.lanes()) {
    add_counters_before(l.rank);
    out.push_back({l, title(l.rank, q(l.name)), std::min(l.max_depth + 1, kMaxLaneRows), {}, 0, 1});
  }
  add_counters_before(std::nullopt);
  return out;
}

bool firstLaneOfRank(const std::vector<TimelineWidget::Lane>& lanes, std::size_t index) {
  return index == 0 || lanes[index - 1].info.rank != lanes[index].info.rank;
}

bool isFolded(const std::vector<std::int32_t>& collapsed, std::int32_t rank) {
  return std::find(collapsed.begin(), collapsed.end(), rank) != collapsed.end();
}

// The lanes [first, last) whose rows lie between y0 and y1 of the widget
// (the layout of paintTimeline).
std::pair<int, int> lanesBetween(const std::vector<TimelineWidget::Lane>& lanes,
                                 const std::vector<std::int32_t>& collapsed, double y0, double y1) {
  int first = -1, last = -1;
  double at = kRuler + 2;
  for (std::size_t i = 0; i < lanes.size() && at < y1; ++i) {
    if (firstLaneOfRank(lanes, i)) at += kRowHeight;
    if (isFolded(collapsed, lanes[i].info.rank)) continue;
    const double h = lanes[i].depth * kRowHeight;
    if (at + h + kLaneGap > y0 && at < y1) {
      if (first < 0) first = int(i);
      last = int(i) + 1;
    }
    at += h + kLaneGap;
  }
  return first < 0 ? std::pair{0, 0} : std::pair{first, last};
}

// The lanes from the top that a picture `height` tall holds whole, and the y
// where the last of them ends (a folded rank's lanes need only its header).
std::pair<int, double> lanesWhollyIn(const std::vector<TimelineWidget::Lane>& lanes,
                                     const std::vector<std::int32_t>& collapsed, double height) {
  int held = 0;
  double at = kRuler + 2, bottom = at;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    if (firstLaneOfRank(lanes, i)) at += kRowHeight;
    if (at > height) break;
    if (!isFolded(collapsed, lanes[i].info.rank)) {
      const double h = lanes[i].depth * kRowHeight;
      if (at + h > height) break;
      at += h + kLaneGap;
    }
    held = int(i) + 1;
    bottom = at;
  }
  return {held, bottom};
}

// The rows a query loads: those shown and a screen's height above and below,
// so that a scroll of a page finds its spans in hand.
std::pair<double, double> rowsToLoad(const QRect& shown) {
  const double margin = std::max(400, shown.height());
  return {shown.top() - margin, shown.bottom() + 1 + margin};
}

// What a frame asks of one lane: its events' spans (id), a counter's
// columns, or nothing (a lane of a folded rank: id 0 and no counter).
struct LaneQuery {
  trace::LaneId id{0};
  std::int32_t rank = 0;
  std::optional<trace::CounterSeries> counter;
};

// An op narrower than this many pixels shows no time off CPU.
constexpr double kOffCpuMinPixels = 4;

// The time a CPU-engine op that ended at `end_ns` spent off CPU; 0 where none.
// Only the sample at the op's end is read, through the counters' index.
std::int64_t offCpuAt(const trace::TraceReader& reader, trace::StringId counter, std::int32_t rank,
                      std::int64_t end_ns) {
  auto at = reader.counter_view(rank, counter, end_ns, end_ns + 1, 1);
  if (!at || at->columns.empty()) return 0;
  return static_cast<std::int64_t>(std::max(0.0, at->columns.back().last));
}

// The queries for lanes [first, last).
std::vector<LaneQuery> queriesOf(const std::vector<TimelineWidget::Lane>& lanes,
                                 const std::vector<std::int32_t>& collapsed,
                                 std::pair<int, int> range) {
  std::vector<LaneQuery> queries;
  for (int i = range.first; i < range.second; ++i) {
    const TimelineWidget::Lane& lane = lanes[std::size_t(i)];
    if (isFolded(collapsed, lane.info.rank))
      queries.emplace_back();
    else
      queries.push_back({lane.info.id, lane.info.rank, lane.counter});
  }
  return queries;
}

// The spans in `window` for a view `pixels` wide of the lanes asked for (the
// view's lanes from `first_lane` on): the reader's level-of-detail queries,
// with names and colours resolved here, off the GUI thread.
std::shared_ptr<const TimelineWidget::Frame> queryFrame(const trace::TraceReader& reader,
                                                        const std::vector<LaneQuery>& queries,
                                                        int first_lane, trace::TimeRange window,
                                                        int pixels, std::uint64_t job) {
  auto frame = std::make_shared<TimelineWidget::Frame>();
  frame->job = job;
  frame->window = window;
  frame->pixels = pixels;
  frame->first_lane = first_lane;
  const std::optional<trace::StringId> off_cpu = reader.find_string(trace::kOffCpuCounter);
  const double pixels_per_ns = double(std::max(1, pixels)) /
                               double(std::max<std::int64_t>(1, window.end_ns - window.start_ns));
  // Each name as shown and its length, read once a frame: its spans share
  // them (a name of 200,000 characters counted for each span).
  std::unordered_map<std::uint32_t, std::pair<QString, qsizetype>> shown_names;
  auto shown = [&](trace::StringId id) -> const std::pair<QString, qsizetype>& {
    auto [it, added] = shown_names.try_emplace(id.value);
    if (added) {
      const std::string& name = reader.string(id);
      it->second = {elidedName(name), qsizetype(utf8_characters(name))};
    }
    return it->second;
  };
  for (const LaneQuery& query : queries) {
    TimelineWidget::LaneFrame lane;
    if (query.counter) {
      auto view = reader.counter_view(query.counter->rank, query.counter->name, window.start_ns,
                                      window.end_ns, pixels);
      // Said in its lane: the events' lanes stand without it.
      if (!view)
        lane.error = q(view.message());
      else
        lane.counter = std::move(view).value();
      frame->lanes.push_back(std::move(lane));
      continue;
    }
    if (query.id.value == 0) {
      frame->lanes.push_back(std::move(lane));
      continue;
    }
    // Fold only what is under a pixel: a wider fold is named after its
    // longest event, which can misname a lane of many short ones.
    auto spans =
        reader.spans(query.id, window.start_ns, window.end_ns, pixels, /*min_span_pixels=*/1);
    if (!spans) {
      frame->error = q(spans.message());
    } else {
      lane.spans = std::move(spans).value();
      lane.names.reserve(lane.spans.size());
      lane.name_chars.reserve(lane.spans.size());
      lane.colors.reserve(lane.spans.size());
      for (const trace::Span& s : lane.spans) {
        const auto& [name, chars] = shown(s.name);
        lane.names.push_back(name);  // drawn, and in tooltips
        lane.name_chars.push_back(chars);
        QColor c = shade(categoryColor(s.category, s.kind), lane.names.back());
        if (s.count > 1) c = c.lighter(125);  // a fold of several narrow events
        lane.colors.push_back(c);
      }
      // The time off CPU of the ops wide enough to show it: a point read
      // each, so a few hundred a lane at most.
      for (std::size_t k = 0; off_cpu && k < lane.spans.size(); ++k) {
        const trace::Span& s = lane.spans[k];
        const std::int64_t length = s.end_ns - s.start_ns;
        if (s.count != 1 || s.category != trace::Category::compute || length <= 0 ||
            double(length) * pixels_per_ns < kOffCpuMinPixels)
          continue;
        const std::int64_t off = offCpuAt(reader, *off_cpu, query.rank, s.end_ns);
        if (off <= 0) continue;
        lane.off_cpu_share.resize(lane.spans.size(), 0.0f);
        lane.off_cpu_share[k] = float(std::min(1.0, double(off) / double(length)));
      }
    }
    frame->lanes.push_back(std::move(lane));
  }
  return frame;
}

// The time a CPU-engine op's thread was off CPU within it; 0 where none.
// Only the sample at the op's end is read (through the counters' index),
// not the rank's whole series: this runs on every hover.
std::int64_t offCpuNs(const trace::TraceReader& reader, const trace::StoredEvent& stored) {
  if (stored.event.category != trace::Category::compute) return 0;
  const std::optional<trace::StringId> counter = reader.find_string(trace::kOffCpuCounter);
  if (!counter) return 0;
  return offCpuAt(reader, *counter, stored.rank, stored.event.end_ns);
}

// What a tooltip adds for one event: bytes, bandwidth, correlation, its
// time off CPU.
QString eventFacts(const trace::StoredEvent& stored, std::int64_t off_cpu_ns) {
  const trace::Event& e = stored.event;
  QString out;
  if (off_cpu_ns > 0) {
    out += QObject::tr(
               "<br>off CPU %1 of it (descheduled: another thread had the core; the amber "
               "strip along its bottom is that share of its length, not where)")
               .arg(q(format_seconds(double(std::min(off_cpu_ns, e.duration_ns())) * 1e-9)));
  }
  if (e.bytes > 0) {
    out += QObject::tr("<br>%1").arg(q(format_bytes(double(e.bytes))));
    if (e.duration_ns() > 0) {
      out += QObject::tr(" at %1").arg(
          q(format_rate(double(e.bytes) / (double(e.duration_ns()) * 1e-9), "B/s")));
    }
  }
  if (e.correlation != 0) out += QObject::tr("<br>correlation %1").arg(e.correlation);
  if (stored.launch) {
    const trace::KernelLaunch& l = *stored.launch;
    out += QObject::tr("<br>grid %1 × %2 × %3, block %4 × %5 × %6")
               .arg(l.grid[0])
               .arg(l.grid[1])
               .arg(l.grid[2])
               .arg(l.block[0])
               .arg(l.block[1])
               .arg(l.block[2]);
  }
  return out;
}

// How far `t` lies from [start, end): 0 inside. One rule for what is under
// the pointer, in the spans drawn and in the events behind a fold.
std::int64_t distance_to(std::int64_t t, std::int64_t start, std::int64_t end) {
  return t < start ? start - t : t >= end ? t - end + 1 : 0;
}

// An event looked up on the worker thread, its name resolved there too.
struct Picked {
  std::optional<trace::StoredEvent> event;
  QString name;
  QString error;
};

struct Found {
  std::vector<trace::StoredEvent> events;
  std::vector<QString> names;
  bool capped = false;  // more matched than were kept
  QString error;
};

// A store opened on the worker thread, with its first frame (the whole
// trace), so that the view swaps to it in one step.
struct Opened {
  std::uint64_t job = 0;
  std::shared_ptr<trace::TraceReader> reader;
  std::vector<TimelineWidget::Lane> lanes;
  trace::TimeRange range;
  std::int64_t origin = 0;  // the first event, else the range's start
  std::shared_ptr<const TimelineWidget::Frame> frame;
  std::pair<int, int> asked;  // the lanes the frame holds
  QString error;
};

}  // namespace

// In the unit a profiler speaks for the step: ticks 2 ms apart read "2 ms",
// "4 ms" (they read "0.002 s"), 0.5 ms apart "0.5 ms"; at most one decimal
// more than the step needs, unless the time would take more than five
// digits in that unit (123.456 s, not 123456 ms; 200 ns apart at 12.3456 ms,
// "12345.6 µs").
QString timeTickLabel(std::int64_t t, std::int64_t step) {
  struct Unit {
    double ns;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}, {1, "ns"}};
  constexpr int kCount = 4;
  const double s = double(std::max<std::int64_t>(step, 1));
  int unit = kCount - 1;
  for (int i = 0; i < kCount; ++i) {
    if (kUnits[i].ns <= s * 10) {
      unit = i;
      break;
    }
  }
  int decimals = std::max(0, int(std::ceil(std::log10(kUnits[unit].ns / s) - 1e-9)));
  while (unit > 0 && std::abs(double(t)) / kUnits[unit].ns >= 1e5) {
    --unit;
    decimals += 3;
  }
  return QStringLiteral("%1 %2")
      .arg(double(t) / kUnits[unit].ns, 0, 'f', decimals)
      .arg(QString::fromUtf8(kUnits[unit].name));
}

QString TimelineWidget::shortNameHtml(const QString& name, qsizetype whole_chars) {
  // A tooltip is as tall as its text: a templated kernel's name of
  // thousands of characters pushed the event's duration and time below the
  // screen. Past kShownNameChars (PyTorch's own kernels reach 700) its middle is cut;
  // the Selection tab's last rows have it whole.
  const QString shown = elidedName(name);
  const qsizetype whole = std::max(whole_chars, name.size());
  if (shown.size() == name.size() && whole == name.size()) return name.toHtmlEscaped();
  return shown.toHtmlEscaped() + tr(" <i>(%1 characters)</i>").arg(whole);
}

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("timeline"));
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  pool_.setMaxThreadCount(1);
  pool_.setExpiryTimeout(-1);
  connect(this, &TimelineWidget::windowChanged, this, [this] { requestCriticalPath(); });
}

TimelineWidget::~TimelineWidget() {
  pool_.waitForDone();
}

void TimelineWidget::setStore(const QString& path) {
  const std::uint64_t job = ++open_job_;
  const std::uint64_t frame_job = ++requested_;
  path_ = path;
  opening_ = true;
  // The store on screen stays until the new one can be shown whole.
  QtConcurrent::run(&pool_, [path, job, frame_job, pixels = spanAreaWidth(),
                             rows = rowsToLoad(shownRect()), collapsed = collapsed_] {
    auto out = std::make_shared<Opened>();
    out->job = job;
    auto reader = trace::TraceReader::open(path.toStdString());
    if (!reader) {
      out->error = q(reader.message());
      return out;
    }
    out->reader = std::shared_ptr<trace::TraceReader>(std::move(reader).value());
    out->range = out->reader->time_range();
    out->lanes = timelineLanes(*out->reader);
    // Counters sampled before the first event or after the last (a GPU's
    // memory before its first kernel) are in the view's range too, within
    // the times a store holds: the writer keeps any time of a sample, and
    // one near INT64_MAX (a damaged store) made the axis's ticks wrap past
    // it and paint forever.
    bool any = out->reader->event_count() > 0;
    for (const Lane& lane : out->lanes) {
      if (!lane.counter) continue;
      constexpr std::int64_t kLimit = trace::kTraceTimeLimitNs;
      const trace::TimeRange sampled{
          std::clamp(lane.counter->first_ns, -kLimit, kLimit),
          std::clamp(trace::saturating_add(lane.counter->last_ns, 1), -kLimit, kLimit)};
      if (sampled.empty()) continue;
      out->range = any ? trace::TimeRange{std::min(out->range.start_ns, sampled.start_ns),
                                          std::max(out->range.end_ns, sampled.end_ns)}
                       : sampled;
      any = true;
    }
    // At least the deepest zoom's window: a trace of less (one event of 50
    // ns) asked setWindow to clamp between 100 ns and less, which is
    // undefined (an assertion's abort where the library checks), and
    // showed a window past the trace's end.
    if (out->range.end_ns - out->range.start_ns < kMinWindowNs)
      out->range.end_ns = out->range.start_ns + kMinWindowNs;
    out->origin =
        out->reader->event_count() > 0 ? out->reader->time_range().start_ns : out->range.start_ns;
    out->asked = lanesBetween(out->lanes, collapsed, rows.first, rows.second);
    out->frame = queryFrame(*out->reader, queriesOf(out->lanes, collapsed, out->asked),
                            out->asked.first, out->range, pixels, frame_job);
    return out;
  }).then(this, [this](std::shared_ptr<Opened> opened) {
    if (opened->job != open_job_) {  // another store was asked for since
      if (opened->reader) pool_.start([old = std::move(opened->reader)]() mutable { old.reset(); });
      return;
    }
    opening_ = false;
    releaseReader();
    if (!opened->error.isEmpty()) {
      lanes_.clear();
      frame_.reset();
      message_ = opened->error;
      emit storeOpened(path_, message_);
      updateGeometry();
      update();
      return;
    }
    reader_ = std::move(opened->reader);
    forgetCriticalPath();
    selected_.reset();
    linked_.reset();
    selected_name_.clear();
    range_.reset();
    matches_.clear();
    match_names_.clear();
    search_text_.clear();
    search_pending_ = false;
    match_index_ = -1;
    const bool same_rows = lanes_.size() == opened->lanes.size();
    lanes_ = std::move(opened->lanes);
    asked_lanes_ = opened->asked;
    own_range_ = opened->range;
    own_origin_ = opened->origin;
    origin_ = followed_origin_.value_or(own_origin_);
    full_ = own_range_;
    if (followed_full_) {
      full_ = {std::min(full_.start_ns, followed_full_->start_ns),
               std::max(full_.end_ns, followed_full_->end_ns)};
    }
    window_ = full_;
    if (followed_window_) {
      window_ = *followed_window_;
      requestFrame();  // the frame that came with the store is of the whole
    }
    frame_.reset();
    message_ = lanes_.empty() ? tr("The trace has no lanes.") : QString();
    ++step_job_;  // the last store's step, and a look-up of it, are not this one's
    leaveStep();
    emit storeOpened(path_, {});
    emit windowChanged(window_.start_ns, window_.end_ns);
    if (!same_rows) updateGeometry();
    frameArrived(std::move(opened->frame));
    const std::uint64_t asked = requested_;
    if (!gutter_by_user_) fitGutter();  // asks for spans at its width when it changed
    // The width may have changed, or a query been asked for, while it opened.
    if (requested_ == asked && frame_ &&
        (frame_->pixels != spanAreaWidth() || frame_->job != requested_))
      requestFrame();
    else
      loadLanesInView();  // the layout of the new lanes may show others
  });
}

void TimelineWidget::clear(const QString& message) {
  ++open_job_;
  ++requested_;
  opening_ = false;
  releaseReader();
  lanes_.clear();
  frame_.reset();
  path_.clear();
  forgetCriticalPath();
  message_ = message;
  updateGeometry();
  update();
}

void TimelineWidget::setWindow(std::int64_t start_ns, std::int64_t end_ns) {
  if (full_.empty()) return;
  const std::int64_t span =
      std::clamp(end_ns - start_ns, kMinWindowNs, full_.end_ns - full_.start_ns);
  start_ns = std::clamp(start_ns, full_.start_ns, full_.end_ns - span);
  const bool moved = window_.start_ns != start_ns || window_.end_ns != start_ns + span;
  window_ = {start_ns, start_ns + span};
  requestFrame();
  update();
  if (moved) {
    leaveStep();
    emit windowChanged(window_.start_ns, window_.end_ns);
  }
}

void TimelineWidget::leaveStep() {
  if (!shown_step_) return;
  shown_step_.reset();
  emit stepLeft();
}

void TimelineWidget::stopFollowing() {
  followed_full_.reset();
  followed_window_.reset();
  followed_origin_.reset();
}

void TimelineWidget::followWindow(trace::TimeRange full, trace::TimeRange window,
                                  std::optional<std::int64_t> origin) {
  followed_full_ = full;
  followed_window_ = window;
  followed_origin_ = origin.value_or(full.start_ns);
  if (own_range_.empty() && full_.empty()) return;  // applied when a store opens
  if (origin_ != *followed_origin_) cache_job_ = 0;  // the axis's labels change
  origin_ = *followed_origin_;
  full_ = {std::min(own_range_.start_ns, full.start_ns), std::max(own_range_.end_ns, full.end_ns)};
  setWindow(window.start_ns, window.end_ns);
}

void TimelineWidget::zoom(double factor, std::int64_t anchor_ns) {
  if (full_.empty()) return;
  const std::int64_t span = window_.end_ns - window_.start_ns;
  // Within the deepest zoom and the whole trace before the anchor is placed:
  // setWindow widening a span below 100 ns from its start moved the anchor,
  // and each further zoom at the deepest level panned the view.
  const auto new_span =
      std::clamp(std::int64_t(double(span) / factor), kMinWindowNs, full_.end_ns - full_.start_ns);
  // The anchor keeps its place on screen: its share of the window is kept.
  const double share = span > 0 ? double(anchor_ns - window_.start_ns) / double(span) : 0.5;
  // Rounded: truncated, 0.57 * 100 made 56 and each notch moved it a nanosecond.
  const std::int64_t start = anchor_ns - std::llround(share * double(new_span));
  setWindow(start, start + new_span);
}

void TimelineWidget::resetZoom() {
  // The whole run, over a step still being looked up (its answer is
  // dropped), and said so even where the step's view was the whole run
  // already (a step that takes most of the run): the window does not move.
  ++step_job_;
  setWindow(full_.start_ns, full_.end_ns);
  leaveStep();
}

void TimelineWidget::releaseReader() {
  if (!reader_) return;
  pool_.start([old = std::move(reader_)]() mutable { old.reset(); });
  reader_.reset();
}

std::int64_t TimelineWidget::handedSpans() const {
  std::int64_t n = 0;
  if (frame_) {
    for (const LaneFrame& l : frame_->lanes)
      n += std::int64_t(l.spans.size());
  }
  return n;
}

std::pair<int, int> TimelineWidget::frameLanes() const {
  if (!frame_) return {0, 0};
  return {frame_->first_lane, frame_->first_lane + int(frame_->lanes.size())};
}

double TimelineWidget::rulerTop() const {
  if (lanes_.empty() || !message_.isEmpty()) return 0;
  const QRect seen = visibleRegion().boundingRect();
  return seen.isEmpty() ? 0 : double(seen.top());
}

QRect TimelineWidget::shownRect() const {
  const QRect seen = visibleRegion().boundingRect();
  if (!seen.isEmpty()) return seen;
  // Hidden (a tab not shown, a view not yet laid out): the first rows, as a
  // scroll area shows them first.
  return QRect(0, 0, std::max(1, width()), std::clamp(height(), 1, 2000));
}

std::pair<int, int> TimelineWidget::lanesInView() const {
  const QRect shown = shownRect();
  return lanesBetween(lanes_, collapsed_, shown.top(), shown.bottom() + 1);
}

void TimelineWidget::loadLanesInView() {
  if (!reader_ || lanes_.empty() || opening_ || pending_) return;
  const auto [first, last] = lanesInView();
  if (first >= last || (first >= asked_lanes_.first && last <= asked_lanes_.second)) return;
  requestFrame();
}

void TimelineWidget::moveEvent(QMoveEvent* event) {
  QWidget::moveEvent(event);
  // The focus mark and the time axis follow the part on screen (a scroll
  // moves the pixels drawn, the axis with them).
  if (hasFocus() || event->pos().y() != event->oldPos().y()) update();
  loadLanesInView();
}

void TimelineWidget::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  loadLanesInView();
}

int TimelineWidget::spanAreaWidth() const {
  return std::max(1, int(width() - gutter_ - 4));
}

void TimelineWidget::applyGutter(double wanted) {
  gutter_wanted_ = wanted;  // kept for when the widget is wider again
  // Whole pixels: the spans' area starts on a pixel.
  const double pixels = std::round(std::max(kMinGutter, std::min(wanted, width() - kMinSpanArea)));
  if (pixels == gutter_) return;
  gutter_ = pixels;
  cache_job_ = 0;
  update();
  requestFrame();  // the spans' width changed
  emit gutterChanged(int(gutter_));
}

void TimelineWidget::setGutterWidth(int pixels) {
  gutter_by_user_ = true;
  applyGutter(pixels);
}

void TimelineWidget::fitGutter() {
  gutter_by_user_ = false;
  if (gutter_leader_ || lanes_.empty()) return;
  const QFontMetricsF fm(font());
  double widest = 0;
  for (const Lane& l : lanes_)
    widest = std::max(widest, fm.horizontalAdvance(laneName(l)));
  applyGutter(std::min(kTitleIndent + widest + 8, std::max(kMinGutter, width() * kMaxGutterShare)));
}

void TimelineWidget::followGutter(TimelineWidget* leader) {
  gutter_leader_ = leader;
  connect(leader, &TimelineWidget::gutterChanged, this,
          [this](int pixels) { applyGutter(pixels); });
  applyGutter(leader->gutter_);
}

bool TimelineWidget::onGutterEdge(const QPointF& pos) const {
  // On the titles' side only, so that it takes no click from the spans.
  return !lanes_.empty() && pos.y() >= kRuler && pos.x() >= gutter_ - kEdgeSlack &&
         pos.x() < gutter_;
}

void TimelineWidget::requestFrame() {
  if (!reader_ || lanes_.empty()) return;
  const std::uint64_t job = ++requested_;
  if (running_) {
    pending_ = true;  // runs with the window and width of that moment
    return;
  }
  startQuery(job);
}

void TimelineWidget::startQuery(std::uint64_t job) {
  running_ = true;
  pending_ = false;
  const auto [top, bottom] = rowsToLoad(shownRect());
  asked_lanes_ = lanesBetween(lanes_, collapsed_, top, bottom);
  QtConcurrent::run(&pool_,
                    [reader = reader_, queries = queriesOf(lanes_, collapsed_, asked_lanes_),
                     first = asked_lanes_.first, window = window_, pixels = spanAreaWidth(),
                     job] { return queryFrame(*reader, queries, first, window, pixels, job); })
      .then(this, [this, reader = static_cast<const void*>(reader_.get())](
                      std::shared_ptr<const Frame> frame) {
        running_ = false;
        // A frame of a store no longer shown is dropped; one of an older
        // window of this store is drawn until the newest arrives (its spans
        // are true, only folded for another zoom).
        if (reader == reader_.get()) frameArrived(std::move(frame));
        if (pending_ && reader_) startQuery(requested_);
      });
}

void TimelineWidget::frameArrived(std::shared_ptr<const Frame> frame) {
  if (frame_ && frame->job < frame_->job) return;
  frame_ = std::move(frame);
  // The selected and linked events' rows, from the first frame holding
  // their lanes (one out of view when they were picked had none).
  if (selected_) selected_depth_ = depthInFrame(*selected_, selected_depth_);
  if (linked_) linked_depth_ = depthInFrame(*linked_, linked_depth_);
  if (!frame_->error.isEmpty()) message_ = frame_->error;
  update();
  emit frameReady(frame_->job);
}

namespace {

// A line from `a` to `b` with an arrowhead at `b`.
void drawArrow(QPainter& painter, QPointF a, QPointF b, const QColor& color) {
  painter.save();
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(QPen(color, 1.5));
  painter.drawLine(a, b);
  const QPointF d = b - a;
  const double length = std::hypot(d.x(), d.y());
  const QPointF unit = d / length, across(-unit.y(), unit.x());
  const double head = std::min(7.0, length);
  painter.setBrush(color);
  painter.drawPolygon(
      QPolygonF{b, b - unit * head + across * head / 2, b - unit * head - across * head / 2});
  painter.restore();
}

// A counter's value as its lane and tooltip read it: bytes as "9.54 GiB".
// A counter's lane: a step graph filled from 0, each sample's value held
// until the next one and the last one to the end of the trace (`end_ns`),
// as Perfetto draws counter tracks. A pixel of several samples is filled
// to their least and, lighter, on to their greatest, so that neither a peak
// nor a dip is lost at any zoom. Returns the rectangles drawn.
int paintCounter(QPainter& painter, const TimelineWidget::Lane& lane,
                 const trace::CounterView& view, const QRectF& box, trace::TimeRange window,
                 std::int64_t end_ns, const std::function<double(std::int64_t)>& x_of) {
  const double low = lane.scale_low, high = lane.scale_high;
  auto y_of = [&](double v) {
    return box.bottom() - 1 - std::clamp((v - low) / (high - low), 0.0, 1.0) * (box.height() - 3);
  };
  // Times inside the window before they become x: a damaged store's times
  // can be anywhere in int64.
  auto x_at = [&](std::int64_t t) { return x_of(std::clamp(t, window.start_ns, window.end_ns)); };
  // Opaque, so that columns less than a pixel apart do not darken where
  // they overlap.
  const QColor body(0x7f, 0xb8, 0x77), envelope(0xbf, 0xdc, 0xb9);
  const double right = std::min(box.right(), x_at(end_ns));
  int drawn = 0;
  auto fill = [&](double x0, double x1, double v, const QColor& color, double from = 0) {
    x0 = std::max(x0, box.left());
    x1 = std::min(x1, right);
    if (x1 <= x0 || !std::isfinite(v) || !std::isfinite(from)) return;
    const double a = y_of(from), b = y_of(v);
    painter.fillRect(QRectF(x0, std::min(a, b), x1 - x0, std::max(1.0, std::abs(a - b))), color);
    ++drawn;
  };
  const std::vector<trace::CounterColumn>& columns = view.columns;
  // Whole pixels: a column's own is the pixel its first sample falls in
  // (the tooltip reads the same one), and columns that fall in one pixel
  // are drawn as one.
  auto pixel_of = [&](std::int64_t t) { return std::floor(x_at(t)); };
  if (view.held)
    fill(box.left(), columns.empty() ? right : pixel_of(columns.front().start_ns), *view.held,
         body);
  double low_in_pixel = 0, high_in_pixel = 0;
  bool carried = false;  // the columns before share this one's pixel
  for (std::size_t k = 0; k < columns.size(); ++k) {
    const trace::CounterColumn& c = columns[k];
    const double x = pixel_of(c.start_ns);
    const double next = k + 1 < columns.size() ? pixel_of(columns[k + 1].start_ns) : right;
    low_in_pixel = carried ? std::min(low_in_pixel, c.low) : c.low;
    high_in_pixel = carried ? std::max(high_in_pixel, c.high) : c.high;
    carried = next <= x;
    if (carried) continue;
    // The pixel: up to its least value, then lighter to its greatest; after
    // it, the last value held.
    const double lo = low_in_pixel, hi = high_in_pixel;
    if (lo == hi) {
      fill(x, x + 1, hi, body);
    } else if (lo >= 0) {
      fill(x, x + 1, lo, body);
      fill(x, x + 1, hi, envelope, lo);
    } else if (hi <= 0) {
      fill(x, x + 1, hi, body);
      fill(x, x + 1, lo, envelope, hi);
    } else {
      fill(x, x + 1, hi, envelope, lo);
    }
    fill(x + 1, next, c.last, body);
  }
  return drawn;
}

// Where the times of `state`'s window fall across `area`: its span area,
// from the titles' column to 4 px short of the right edge.
struct TimeAxis {
  double left = 0, width = 1, per_ns = 0;
  std::int64_t t0 = 0, span_ns = 1;
  // int64 differences first; doubles only relative to the window's start.
  double x(std::int64_t t) const { return left + double(t - t0) * per_ns; }
};

TimeAxis timeAxis(const TimelineWidget::PaintState& state, const QRectF& area) {
  TimeAxis a;
  a.left = area.left() + state.gutter;
  a.width = std::max(1.0, area.right() - a.left - 4);
  a.t0 = state.window.start_ns;
  a.span_ns = std::max<std::int64_t>(1, state.window.end_ns - state.window.start_ns);
  a.per_ns = a.width / double(a.span_ns);
  return a;
}

// The time axis's labels of `state`'s window, in the strip of the ruler's
// height from `top` (times map to the area's width, as the lanes'); from
// the trace's start (its first event: a sample before it reads below zero).
// `grid` set: each tick's line down to the area's bottom, else a short mark.
void paintRulerLabels(const TimelineWidget::PaintState& state, QPainter& painter,
                      const QRectF& area, double top, const QColor& text, bool grid_lines) {
  const QFontMetricsF fm(painter.font());
  const TimeAxis axis = timeAxis(state, area);
  QColor grid = text;
  grid.setAlpha(40);
  const std::int64_t step = tickStep(double(axis.span_ns) / std::max(1.0, axis.width / 90));
  const std::int64_t first = state.origin + ((axis.t0 - state.origin) / step) * step;
  for (std::int64_t t = first; t <= state.window.end_ns; t += step) {
    if (t < axis.t0) continue;
    const double x = axis.x(t);
    painter.setPen(grid);
    painter.drawLine(QPointF(x, top + kRuler - 4),
                     QPointF(x, grid_lines ? area.bottom() : top + kRuler));
    const QString label = timeTickLabel(t - state.origin, step);
    if (x + 2 + fm.horizontalAdvance(label) > area.right()) continue;
    painter.setPen(text);
    painter.drawText(QRectF(x + 2, top, 90, kRuler - 4), Qt::AlignLeft | Qt::AlignVCenter, label);
  }
}

// Where `state`'s range's duration is written: a row's height just below
// the axis drawn from `top`, from the range's start (or the window's); empty
// with no range in the window.
QRectF rangeLabelRect(const TimelineWidget::PaintState& state, const QFont& font,
                      const QRectF& area, double top) {
  if (!state.range || state.lanes.empty() || !state.message.isEmpty() ||
      state.range->end_ns <= state.window.start_ns || state.range->start_ns >= state.window.end_ns)
    return {};
  const TimeAxis axis = timeAxis(state, area);
  const double x0 = std::max(axis.left, axis.x(state.range->start_ns));
  const QString label =
      q(format_seconds(double(state.range->end_ns - state.range->start_ns) * 1e-9));
  // Whole pixels: the background drawn under it covers all it takes.
  return QRectF(std::floor(x0), std::floor(top + kRuler),
                std::ceil(QFontMetricsF(font).horizontalAdvance(label)) + 4, kRowHeight);
}

// The range's duration in `at` (rangeLabelRect), on `background` where it
// is valid: drawn over the lanes under a pinned axis, it is read over them.
void paintRangeLabel(const TimelineWidget::PaintState& state, QPainter& painter, const QRectF& at,
                     const QColor& text, const QColor& background) {
  if (at.isEmpty()) return;
  if (background.isValid()) painter.fillRect(at, background);
  painter.setPen(text);
  painter.drawText(at.adjusted(2, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   q(format_seconds(double(state.range->end_ns - state.range->start_ns) * 1e-9)));
}

// Paints the part `exposed` of `state` laid out in `area` (the lanes of
// other rows are skipped); times map to the area's width. Returns the spans
// drawn.
int paintTimeline(const TimelineWidget::PaintState& state, QPainter& painter, const QRectF& area,
                  const QColor& text, const QRectF& exposed) {
  painter.save();
  painter.setClipRect(area.intersected(exposed));
  const QFontMetricsF fm(painter.font());
  if (state.lanes.empty() || !state.message.isEmpty()) {
    painter.setPen(text);
    painter.drawText(
        area.adjusted(8, 4, -8, -4), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
        state.message.isEmpty() ? TimelineWidget::tr("Loading the timeline…") : state.message);
    painter.restore();
    return 0;
  }
  const TimeAxis axis = timeAxis(state, area);
  const double left = axis.left, width = axis.width;
  const std::int64_t t0 = axis.t0;
  auto x_of = [&axis](std::int64_t t) { return axis.x(t); };

  paintRulerLabels(state, painter, area, area.top(), text, /*grid_lines=*/true);
  QColor grid = text;
  grid.setAlpha(40);

  // The titles' column ends here (its edge can be dragged).
  painter.setPen(grid);
  painter.drawLine(QPointF(left - 2, area.top() + kRuler), QPointF(left - 2, area.bottom()));

  int items = 0;
  std::optional<QRectF> selected_at, linked_at;  // where the two events are drawn
  // Where each lane's first row and each rank's header row are, for the
  // critical path drawn over them.
  std::unordered_map<std::uint32_t, double> lane_top;
  std::map<std::int32_t, double> header_top;
  double y = area.top() + kRuler + 2;
  for (std::size_t i = 0; i < state.lanes.size(); ++i) {
    const TimelineWidget::Lane& lane = state.lanes[i];
    const bool collapsed = isFolded(state.collapsed, lane.info.rank);
    // Rows outside `exposed` are laid out, not painted.
    auto in_exposed = [&](double height) {
      return y + height >= exposed.top() && y <= exposed.bottom();
    };
    if (state.critical && firstLaneOfRank(state.lanes, i)) header_top[lane.info.rank] = y;
    if (firstLaneOfRank(state.lanes, i) && !in_exposed(kRowHeight)) {
      y += kRowHeight;
    } else if (firstLaneOfRank(state.lanes, i)) {
      // The rank's header row: a click folds or unfolds its lanes.
      QColor header = text;
      header.setAlpha(28);
      painter.fillRect(QRectF(area.left(), y, area.width(), kRowHeight - 1), header);
      painter.setPen(text);
      const QString device = lane.title.section(QStringLiteral(" · "), 0, 0);
      const QString label =
          (collapsed ? QStringLiteral("▸ ") : QStringLiteral("▾ ")) +
          (device.startsWith(QStringLiteral("rank"))
               ? device
               : TimelineWidget::tr("rank %1 · %2").arg(lane.info.rank).arg(device));
      painter.drawText(QRectF(area.left() + 4, y, area.width() - 8, kRowHeight),
                       Qt::AlignLeft | Qt::AlignVCenter, label);
      y += kRowHeight;
    }
    if (collapsed) continue;
    if (state.critical && !lane.counter) lane_top[lane.info.id.value] = y;
    const double h = lane.depth * kRowHeight;
    const bool shown = in_exposed(h + kLaneGap);
    if (shown) {
      painter.setPen(text);
      const double title_width = state.gutter - kTitleIndent - 4;
      painter.drawText(QRectF(area.left() + kTitleIndent, y, title_width, kRowHeight),
                       Qt::AlignLeft | Qt::AlignVCenter,
                       fm.elidedText(laneName(lane), Qt::ElideMiddle, title_width));
      QColor band = text;
      band.setAlpha(12);
      painter.fillRect(QRectF(left, y, width, h), band);
    }
    const TimelineWidget::LaneFrame* in_frame =
        shown && state.frame ? state.frame->lane(i) : nullptr;
    if (shown && lane.counter) {
      // Under its name, its own largest value (the axis may go higher, to
      // another rank's).
      QColor faint = text;
      faint.setAlpha(150);
      painter.setPen(faint);
      const double title_width = state.gutter - kTitleIndent - 4;
      const QString top =
          TimelineWidget::tr("max %1").arg(counterValueText(lane.info.name, lane.counter->high));
      painter.drawText(QRectF(area.left() + kTitleIndent, y + kRowHeight, title_width, kRowHeight),
                       Qt::AlignLeft | Qt::AlignVCenter,
                       fm.elidedText(top, Qt::ElideRight, title_width));
    }
    if (in_frame && lane.counter && !in_frame->error.isEmpty()) {
      painter.setPen(text);
      painter.drawText(QRectF(left + 4, y, width - 8, h), Qt::AlignLeft | Qt::AlignVCenter,
                       fm.elidedText(TimelineWidget::tr("not read: %1").arg(in_frame->error),
                                     Qt::ElideRight, width - 8));
    } else if (in_frame && lane.counter) {
      items += paintCounter(painter, lane, in_frame->counter, QRectF(left, y, width, h),
                            state.window, state.full.end_ns, x_of);
    } else if (in_frame) {
      const TimelineWidget::LaneFrame& lf = *in_frame;
      for (std::size_t k = 0; k < lf.spans.size(); ++k) {
        const trace::Span& s = lf.spans[k];
        if (s.end_ns <= t0 || s.start_ns >= state.window.end_ns) continue;
        const double x0 = std::max(left, x_of(s.start_ns));
        const double x1 = std::min(left + width, x_of(s.end_ns));
        // A pixel of gap ends spans wide enough to spare it, so that neighbours
        // of one colour stay apart.
        const double w = x1 - x0 > 3 ? x1 - x0 - 1 : std::max(1.0, x1 - x0);
        const int row = std::min(int(s.depth), lane.depth - 1);
        const QRectF r(x0, y + row * kRowHeight + 1, w, kRowHeight - 2);
        painter.fillRect(r, lf.colors[k]);
        if (k < lf.off_cpu_share.size() && lf.off_cpu_share[k] > 0)
          painter.fillRect(QRectF(r.left(), r.bottom() - 3, r.width() * lf.off_cpu_share[k], 3),
                           TimelineWidget::offCpuColor());
        ++items;
        if (r.width() > 28) {
          // Dark text on light spans (folds, steps), white on the rest.
          painter.setPen(lf.colors[k].lightness() > 170 ? QColor(Qt::black) : QColor(Qt::white));
          const QString name =
              s.count > 1
                  ? TimelineWidget::tr("%1 +%2 more").arg(lf.names[k], QString::number(s.count - 1))
                  : lf.names[k];
          painter.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                           fm.elidedText(name, Qt::ElideRight, r.width() - 5));
        }
      }
    }
    // The selected event, and the one it is correlated with: outlined at
    // their own place, whatever the fold.
    auto outline = [&](const trace::StoredEvent& e, std::int32_t row, Qt::PenStyle style) {
      if (e.event.lane.value != lane.info.id.value) return std::optional<QRectF>();
      const int depth = std::min(lane.depth - 1, int(row));
      const QRectF place(x_of(e.event.start_ns), y + depth * kRowHeight, 0, kRowHeight);
      if (!shown || e.event.end_ns <= t0 || e.event.start_ns >= state.window.end_ns)
        return std::optional<QRectF>(place);
      const double x0 = std::max(left, x_of(e.event.start_ns));
      const double x1 = std::min(left + width, x_of(e.event.end_ns));
      painter.setPen(QPen(text, 2, style));
      painter.setBrush(Qt::NoBrush);
      painter.drawRect(
          QRectF(x0 - 1, y + depth * kRowHeight, std::max(2.0, x1 - x0 + 2), kRowHeight));
      return std::optional<QRectF>(place);
    };
    if (state.selected) {
      if (auto r = outline(*state.selected, state.selected_depth, Qt::SolidLine)) selected_at = r;
    }
    if (state.linked) {
      if (auto r = outline(*state.linked, state.linked_depth, Qt::DashLine)) linked_at = r;
    }
    y += h + kLaneGap;
  }
  if (selected_at && linked_at) {
    // From the runtime call to the work it ran, start to start (Nsight
    // Systems' and Perfetto's flow arrows): the launch latency, drawn.
    const bool call_selected = state.selected->event.kind == trace::EventKind::api_call;
    const QRectF from = call_selected ? *selected_at : *linked_at;
    const QRectF to = call_selected ? *linked_at : *selected_at;
    const bool both_before = from.left() < left && to.left() < left;
    const bool both_after = from.left() > left + width && to.left() > left + width;
    const QPointF a(std::clamp(from.left(), left, left + width), from.center().y());
    const QPointF b(std::clamp(to.left(), left, left + width), to.center().y());
    if (!both_before && !both_after && a != b) drawArrow(painter, a, b, text);
  }
  if (state.critical) {
    // The critical path: a bar along the top of each operation on it, a
    // dotted one on the rank's header row for idle time (and for a folded
    // rank's operations), and a line where it moves to another lane.
    const QColor path = TimelineWidget::criticalPathColor();
    bool after_mark = false;  // the last mark was drawn, ending at `previous`
    QPointF previous;
    for (const TimelineWidget::CriticalMark& m : *state.critical) {
      const auto lane = m.lane.value != 0 ? lane_top.find(m.lane.value) : lane_top.end();
      const auto header = header_top.find(m.rank);
      const bool on_lane = lane != lane_top.end();
      if (!on_lane && header == header_top.end()) {
        after_mark = false;
        continue;
      }
      const double top = on_lane ? lane->second : header->second + kRowHeight - 4;
      if (m.end_ns <= t0 || m.start_ns >= state.window.end_ns) {
        after_mark = false;
        continue;
      }
      const double x0 = std::max(left, x_of(m.start_ns));
      const double x1 = std::min(left + width, x_of(m.end_ns));
      if (after_mark && std::abs(previous.x() - x0) < 2 && std::abs(previous.y() - top) > 1) {
        painter.setPen(QPen(path, 1.5));
        painter.drawLine(QPointF(x0, previous.y() + 1.5), QPointF(x0, top + 1.5));
      }
      if (m.lane.value != 0 && on_lane) {
        painter.fillRect(QRectF(x0, top, std::max(1.0, x1 - x0), 3), path);
      } else {
        painter.setPen(QPen(path, 2, Qt::DotLine));
        painter.drawLine(QPointF(x0, top + 1.5), QPointF(std::max(x0 + 1, x1), top + 1.5));
      }
      previous = QPointF(x1, top);
      after_mark = true;
    }
  }
  if (state.range && state.range->end_ns > t0 && state.range->start_ns < state.window.end_ns) {
    const double x0 = std::max(left, x_of(state.range->start_ns));
    const double x1 = std::min(left + width, x_of(state.range->end_ns));
    QColor shade_color = state.range_shade;
    shade_color.setAlpha(60);
    painter.fillRect(
        QRectF(x0, area.top() + kRuler, std::max(1.0, x1 - x0), area.height() - kRuler),
        shade_color);
    if (state.range_label) {
      paintRangeLabel(state, painter, rangeLabelRect(state, painter.font(), area, area.top()), text,
                      QColor());
    }
  }
  painter.restore();
  return items;
}

}  // namespace

namespace {

struct StepWindowsRead {
  std::shared_ptr<const std::vector<std::pair<std::int32_t, trace::TimeRange>>> windows;
  QString error;
};

struct CriticalRead {
  std::shared_ptr<const std::vector<TimelineWidget::CriticalMark>> marks;
  QString error;
};

}  // namespace

const std::vector<TimelineWidget::CriticalMark>& TimelineWidget::criticalMarks() const {
  static const std::vector<CriticalMark> none;
  return critical_ ? *critical_ : none;
}

void TimelineWidget::setCriticalPathShown(bool shown) {
  if (shown == critical_shown_) return;
  critical_shown_ = shown;
  if (shown) {
    requestCriticalPath();
  } else {
    ++critical_job_;
    setCriticalMarks(nullptr, {-1, -1}, {});
  }
}

void TimelineWidget::forgetCriticalPath() {
  ++critical_job_;
  step_windows_.reset();
  step_windows_asked_ = false;
  critical_.reset();
  critical_steps_ = {-1, -1};
  critical_note_.clear();
}

void TimelineWidget::setCriticalMarks(std::shared_ptr<const std::vector<CriticalMark>> marks,
                                      std::pair<std::int32_t, std::int32_t> steps,
                                      const QString& note) {
  critical_ = std::move(marks);
  critical_steps_ = steps;
  critical_note_ = note;
  cache_job_ = 0;  // the overlay is painted with the spans
  update();
  emit criticalPathChanged(note);
}

void TimelineWidget::requestCriticalPath() {
  if (!critical_shown_ || !reader_) return;
  if (!step_windows_) {
    if (step_windows_asked_) return;
    step_windows_asked_ = true;
    QtConcurrent::run(&pool_, [reader = reader_] {
      StepWindowsRead out;
      auto windows = trace::job_step_windows(*reader);
      if (!windows) {
        out.error = q(windows.message());
        return out;
      }
      auto list = std::make_shared<std::vector<std::pair<std::int32_t, trace::TimeRange>>>();
      for (const trace::StepWindow& w : *windows)
        list->emplace_back(w.step, trace::TimeRange{w.start, w.end});
      out.windows = std::move(list);
      return out;
    }).then(this, [this, store = open_job_](StepWindowsRead out) {
      if (store != open_job_) return;  // of a store no longer shown
      step_windows_asked_ = false;
      if (!critical_shown_) return;
      if (!out.windows) {
        ++critical_job_;
        setCriticalMarks(nullptr, {-1, -1},
                         tr("The critical path could not be read: %1").arg(out.error));
        return;
      }
      step_windows_ = std::move(out.windows);
      requestCriticalPath();
    });
    return;
  }
  // The steps the view shows: half of each at least, or half of the view
  // (the neighbours of a step zoomed to overlap it where the ranks' steps
  // are skewed). A trace that records none is one step.
  std::pair<std::int32_t, std::int32_t> steps{-1, -1};
  int in_view = 0;
  for (const auto& [step, w] : *step_windows_) {
    const std::int64_t overlap =
        std::min(w.end_ns, window_.end_ns) - std::max(w.start_ns, window_.start_ns);
    if (overlap <= 0 ||
        2 * overlap < std::min(w.end_ns - w.start_ns, window_.end_ns - window_.start_ns))
      continue;
    if (in_view++ == 0) steps.first = step;
    steps.second = step;
  }
  const bool whole = step_windows_->empty();
  if (whole) steps = {0, 0};
  if (!whole && in_view == 0) {
    ++critical_job_;
    setCriticalMarks(nullptr, {-1, -1}, tr("No step in view: no critical path to draw."));
    return;
  }
  if (in_view > kCriticalPathSteps) {
    ++critical_job_;
    setCriticalMarks(nullptr, {-1, -1},
                     tr("%1 steps in view: zoom in to %2 or fewer to draw their critical path.")
                         .arg(in_view)
                         .arg(kCriticalPathSteps));
    return;
  }
  if (steps == critical_steps_ && critical_) return;  // held
  const std::uint64_t job = ++critical_job_;
  QtConcurrent::run(&pool_, [reader = reader_, steps, whole] {
    CriticalRead out;
    auto paths = whole ? trace::critical_paths(*reader) : trace::critical_paths(*reader, steps);
    if (!paths) {
      out.error = q(paths.message());
      return out;
    }
    auto marks = std::make_shared<std::vector<CriticalMark>>();
    for (const trace::CriticalPath& path : *paths) {
      for (const trace::CriticalSegment& seg : path.segments)
        marks->push_back({seg.lane, seg.rank, seg.start_ns, seg.end_ns});
    }
    out.marks = std::move(marks);
    return out;
  }).then(this, [this, job, steps, whole](CriticalRead out) {
    if (job != critical_job_) return;
    if (!out.marks) {
      setCriticalMarks(nullptr, {-1, -1},
                       tr("The critical path could not be read: %1").arg(out.error));
      return;
    }
    const QString note =
        whole ? tr("Critical path of the whole trace (it records no steps).")
        : steps.first == steps.second
            ? tr("Critical path of step %1.").arg(steps.first)
            : tr("Critical path of steps %1–%2.").arg(steps.first).arg(steps.second);
    setCriticalMarks(std::move(out.marks), steps, note);
  });
}

bool TimelineWidget::isRankFirstLane(std::size_t index) const {
  return firstLaneOfRank(lanes_, index);
}

double TimelineWidget::renderHeight() const {
  double h = kRuler + 6;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    if (isRankFirstLane(i)) h += kRowHeight;
    if (!rankCollapsed(lanes_[i].info.rank)) h += lanes_[i].depth * kRowHeight + kLaneGap;
  }
  return std::max(h, kRuler + 2 * kRowHeight);
}

void TimelineWidget::setRankCollapsed(std::int32_t rank, bool collapsed) {
  auto it = std::find(collapsed_.begin(), collapsed_.end(), rank);
  if (collapsed == (it != collapsed_.end())) return;
  if (collapsed) {
    collapsed_.push_back(rank);
  } else {
    collapsed_.erase(it);
  }
  cache_job_ = 0;  // the layout changed: repaint from the frame
  updateGeometry();
  update();
  if (collapsed) {
    loadLanesInView();  // lanes from below move up into view
  } else {
    requestFrame();  // queries while it was folded left its lanes out
  }
}

bool TimelineWidget::rankCollapsed(std::int32_t rank) const {
  return isFolded(collapsed_, rank);
}

std::int32_t TimelineWidget::rankHeaderAt(double y, double top) const {
  double at = top + kRuler + 2;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    if (isRankFirstLane(i)) {
      if (y >= at && y < at + kRowHeight) return lanes_[i].info.rank;
      at += kRowHeight;
    }
    if (!rankCollapsed(lanes_[i].info.rank)) at += lanes_[i].depth * kRowHeight + kLaneGap;
  }
  return -1;
}

QRectF TimelineWidget::laneRect(int index) const {
  double at = kRuler + 2;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    if (isRankFirstLane(i)) at += kRowHeight;
    if (rankCollapsed(lanes_[i].info.rank)) continue;
    const double h = lanes_[i].depth * kRowHeight;
    if (int(i) == index) return QRectF(gutter_, at, spanAreaWidth(), h);
    at += h + kLaneGap;
  }
  return {};
}

QRectF TimelineWidget::rangeLabelRect() const {
  return cs::gui::rangeLabelRect(paintState(), font(), QRectF(rect()), rulerTop());
}

double TimelineWidget::xOf(std::int64_t time_ns) const {
  const std::int64_t span = std::max<std::int64_t>(1, window_.end_ns - window_.start_ns);
  return gutter_ + double(time_ns - window_.start_ns) * spanAreaWidth() / double(span);
}

QString TimelineWidget::laneTitleOf(trace::LaneId id) const {
  for (const Lane& l : lanes_) {
    if (l.info.id.value == id.value) return l.title;
  }
  return {};
}

QSize TimelineWidget::minimumSizeHint() const {
  return {300, minimum_to_content_ ? int(std::ceil(renderHeight())) + 8 : 80};
}

void TimelineWidget::setMinimumToContent(bool on) {
  minimum_to_content_ = on;
  updateGeometry();
}

QSize TimelineWidget::sizeHint() const {
  return {600, int(std::ceil(renderHeight())) + 8};
}

void TimelineWidget::paintEvent(QPaintEvent* event) {
  QPainter painter(this);
  const qint64 palette_key = palette().cacheKey();
  const bool valid = !cache_.isNull() && cache_rect_.contains(event->rect()) &&
                     cache_.size() == cache_rect_.size() * devicePixelRatioF() &&
                     cache_job_ == frameJob() && cache_window_.start_ns == window_.start_ns &&
                     cache_window_.end_ns == window_.end_ns && cache_palette_ == palette_key &&
                     cache_job_ != 0 && message_.isEmpty() && cache_width_ == width();
  if (!valid) {
    // Only the part on screen (and what was asked for): in a scroll area the
    // widget is as tall as all its lanes, thousands of screens for some stores.
    cache_rect_ = visibleRegion().boundingRect().united(event->rect()).intersected(rect());
    cache_ = QPixmap(cache_rect_.size() * devicePixelRatioF());
    cache_.setDevicePixelRatio(devicePixelRatioF());
    cache_.fill(palette().color(QPalette::Base));
    QPainter p(&cache_);
    // A pixmap past what the paint engine takes has none: painting into it crashed.
    if (!p.isActive()) return;
    p.setFont(font());
    p.translate(-cache_rect_.topLeft());
    PaintState state = paintState();
    state.range_label = false;  // written below, where the axis is
    drawn_items_ = paintTimeline(state, p, QRectF(rect()), palette().color(QPalette::Text),
                                 QRectF(cache_rect_));
    cache_job_ = frameJob();
    cache_window_ = window_;
    cache_palette_ = palette_key;
    cache_items_ = drawn_items_;
    cache_width_ = width();
  }
  drawn_items_ = cache_items_;
  painter.drawPixmap(cache_rect_.topLeft(), cache_);
  // The time axis stays at the top of what is on screen, as Nsight Systems'
  // and Perfetto's rulers do: scrolled down to another rank's lanes, the
  // view had no time on it at all.
  if (const double top = rulerTop(); top > 0) {
    const PaintState state = paintState();
    painter.fillRect(QRectF(0, top, width(), kRuler), palette().color(QPalette::Base));
    painter.setFont(font());
    paintRulerLabels(state, painter, QRectF(rect()), top, palette().color(QPalette::Text),
                     /*grid_lines=*/false);
    QColor line = palette().color(QPalette::Text);
    line.setAlpha(40);
    painter.setPen(line);
    painter.drawLine(QPointF(0, top + kRuler - 0.5), QPointF(width(), top + kRuler - 0.5));
  }
  // The range's duration under the axis wherever the axis is: written with
  // the lanes, it scrolled away with them (or under the pinned axis).
  painter.setFont(font());
  paintRangeLabel(paintState(), painter, rangeLabelRect(), palette().color(QPalette::Text),
                  palette().color(QPalette::Base));
  if (hasFocus()) {
    // The focus mark of a field in the Fusion style: its outline in the
    // highlight colour (the style's focus rectangle tints all it surrounds,
    // here the whole view). Around the part on screen: in a scroll area the
    // widget is as tall as all its lanes, and its own edges are out of sight.
    const QRectF shown = QRectF(visibleRegion().boundingRect().intersected(rect()));
    painter.setPen(QPen(palette().color(QPalette::Highlight), 2));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(shown.adjusted(1, 1, -1, -1));
  }
  // More of the widget on screen than the last query covered (the scroll
  // area's viewport grew, which neither moves nor resizes the widget).
  const auto [first, last] = lanesInView();
  if (first < last && (first < asked_lanes_.first || last > asked_lanes_.second))
    QMetaObject::invokeMethod(this, &TimelineWidget::loadLanesInView, Qt::QueuedConnection);
}

void TimelineWidget::render(QPainter& painter, const QRectF& area, const QColor& text,
                            const QColor&) {
  paintTimeline(paintState(), painter, area, text, area);
}

TimelineWidget::PaintState TimelineWidget::paintState() const {
  PaintState state;
  state.lanes = lanes_;
  state.collapsed = collapsed_;
  state.full = full_;
  state.window = window_;
  state.origin = origin_;
  state.frame = frame_;
  state.selected = selected_;
  state.selected_depth = selected_depth_;
  state.linked = linked_;
  state.linked_depth = linked_depth_;
  state.range = range_;
  state.range_shade = palette().color(QPalette::Highlight);
  state.critical = critical_;
  state.message = message_;
  state.gutter = gutter_;
  return state;
}

TimelineWidget::Painter TimelineWidget::windowPainter(trace::TimeRange window,
                                                      const QColor& text) const {
  return [state = paintState(), path = path_.toStdString(), window, text](
             QPainter& painter, const QRectF& area) mutable {
    // Lanes shown in the view that the picture has no room for, whole: they
    // are left out, and its last row says how many (a lane cut at the
    // bottom was drawn, and not counted).
    auto [held, bottom] = lanesWhollyIn(state.lanes, state.collapsed, area.height());
    auto count_left_out = [&] {
      int n = 0;
      for (std::size_t i = std::size_t(held); i < state.lanes.size(); ++i)
        n += isFolded(state.collapsed, state.lanes[i].info.rank) ? 0 : 1;
      return n;
    };
    int left_out = count_left_out();
    QRectF lanes_area = area;
    if (left_out > 0) {
      std::tie(held, bottom) =
          lanesWhollyIn(state.lanes, state.collapsed, area.height() - kRowHeight);
      left_out = count_left_out();
      state.lanes.resize(std::size_t(held));
      lanes_area.setBottom(area.top() + bottom);
    }
    const std::pair<int, int> drawn{0, held};
    auto reader = trace::TraceReader::open(path);
    if (!reader) {
      // Said in the picture: the view's own frame holds only the lanes
      // near its screen.
      state.message = TimelineWidget::tr("The timeline could not be read for this picture: %1")
                          .arg(q(reader.message()));
    } else if (!window.empty() && !state.lanes.empty()) {
      const int pixels = std::max(1, int(area.width() - state.gutter - 4));
      state.frame = queryFrame(*reader.value(), queriesOf(state.lanes, state.collapsed, drawn),
                               drawn.first, window, pixels, 0);
      state.window = window;
    }
    paintTimeline(state, painter, area, text, lanes_area);
    if (left_out > 0) {
      painter.setPen(text);
      painter.drawText(
          QRectF(area.left() + 4, lanes_area.bottom(), area.width() - 8, kRowHeight),
          Qt::AlignLeft | Qt::AlignVCenter,
          left_out == 1 ? TimelineWidget::tr("… and 1 more lane, not drawn here")
                        : TimelineWidget::tr("… and %1 more lanes, not drawn here").arg(left_out));
    }
  };
}

double TimelineWidget::pictureHeight() const {
  return std::min(renderHeight(), kRuler + 6 + 250 * (kRowHeight + kLaneGap));
}

std::int64_t TimelineWidget::timeAt(double x) const {
  const double width = spanAreaWidth();
  const double share = std::clamp((x - gutter_) / width, 0.0, 1.0);
  return window_.start_ns + std::int64_t(share * double(window_.end_ns - window_.start_ns));
}

int TimelineWidget::laneAt(double y, double top) const {
  double at = top + kRuler + 2;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    if (isRankFirstLane(i)) at += kRowHeight;
    if (rankCollapsed(lanes_[i].info.rank)) continue;
    const double h = lanes_[i].depth * kRowHeight;
    if (y >= at && y < at + h) return int(i);
    at += h + kLaneGap;
  }
  return -1;
}

void TimelineWidget::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  if (gutter_by_user_ || gutter_leader_) {
    applyGutter(gutter_wanted_);  // within the new width
  } else {
    fitGutter();
  }
  requestFrame();
}

void TimelineWidget::wheelEvent(QWheelEvent* event) {
  // As in Nsight Systems and Perfetto: Ctrl+wheel zooms around the pointer,
  // Shift+wheel and a horizontal wheel pan, the plain wheel scrolls the lanes
  // (the scroll area around the widget takes it).
  const QPoint delta = event->angleDelta();
  if (lanes_.empty()) {
    event->ignore();
    return;
  }
  if (event->modifiers() & Qt::ControlModifier) {
    const double notches = delta.y() / 120.0;
    if (notches != 0) zoom(std::pow(1.25, notches), timeAt(event->position().x()));
    event->accept();
    return;
  }
  const int sideways = (event->modifiers() & Qt::ShiftModifier) ? (delta.x() ? delta.x() : delta.y())
                                                                : delta.x();
  if (sideways != 0) {
    // A notch moves a tenth of the window; earlier times come in on a notch up.
    const std::int64_t span = window_.end_ns - window_.start_ns;
    const auto shift = std::int64_t(double(span) / 10 * (-sideways / 120.0));
    setWindow(window_.start_ns + shift, window_.end_ns + shift);
    event->accept();
    return;
  }
  event->ignore();
}

void TimelineWidget::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    drag_from_ = event->position().toPoint();
    drag_window_ = window_;
    dragged_ = false;
    // Shift+drag selects a range; a plain drag pans.
    gutter_drag_ = onGutterEdge(event->position());
    gutter_at_press_ = gutter_;
    range_drag_ = (event->modifiers() & Qt::ShiftModifier) && event->position().x() >= gutter_;
  }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* event) {
  if (!drag_from_ || !(event->buttons() & Qt::LeftButton)) {
    if (onGutterEdge(event->position())) {
      setCursor(Qt::SplitHCursor);
    } else {
      unsetCursor();
    }
    return;
  }
  if (gutter_drag_) {
    dragged_ = true;
    // The edge moves with the pointer from where it was grabbed.
    const int pixels = int(std::lround(gutter_at_press_ + event->position().x() - drag_from_->x()));
    if (gutter_leader_) {
      gutter_leader_->setGutterWidth(pixels);  // which this one follows
    } else {
      setGutterWidth(pixels);
    }
    return;
  }
  const double dx = event->position().x() - drag_from_->x();
  if (std::abs(dx) >= 3) dragged_ = true;
  if (!dragged_) return;
  if (range_drag_) {
    const std::int64_t a = timeAt(drag_from_->x());
    const std::int64_t b = timeAt(event->position().x());
    range_ = trace::TimeRange{std::min(a, b), std::max(a, b)};
    cache_job_ = 0;
    update();
    return;
  }
  const auto shift =
      std::int64_t(dx / spanAreaWidth() * double(drag_window_.end_ns - drag_window_.start_ns));
  setWindow(drag_window_.start_ns - shift, drag_window_.end_ns - shift);
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* event) {
  const double ruler = rulerTop();
  if (gutter_drag_) {
    // the column was resized (or its edge only clicked): nothing to select
  } else if (ruler > 0 && event->position().y() >= ruler &&
             event->position().y() < ruler + kRuler && !dragged_) {
    // a click on the time axis held at the top: not on the lanes under it
  } else if (drag_from_ && !dragged_ && event->button() == Qt::LeftButton) {
    // A click: a rank header folds or unfolds its lanes; a span selects.
    const std::int32_t rank = rankHeaderAt(event->position().y(), 0);
    if (rank >= 0) {
      setRankCollapsed(rank, !rankCollapsed(rank));
    } else {
      selectAt(event->position().toPoint());
    }
  } else if (drag_from_ && dragged_ && range_drag_) {
    // A drag that reached no other nanosecond (a few pixels at the deepest
    // zoom, or both ends past the lanes' edge) selects nothing, as Esc: the
    // range of no time was analysed, all zeros, and exported.
    if (range_ && range_->empty()) {
      range_.reset();
      cache_job_ = 0;
      update();
    }
    emit rangeSelected(range_);
  }
  drag_from_.reset();
  range_drag_ = false;
  gutter_drag_ = false;
}

void TimelineWidget::setSelectedRange(std::optional<trace::TimeRange> range) {
  if (range && range->empty()) range.reset();
  range_ = range;
  cache_job_ = 0;
  update();
  emit rangeSelected(range_);
}

std::int32_t TimelineWidget::depthInFrame(const trace::StoredEvent& event,
                                          std::int32_t fallback) const {
  // How many events of the frame hold it in its lane.
  if (!frame_) return fallback;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    const LaneFrame* lane = frame_->lane(i);
    if (!lane || lanes_[i].info.id.value != event.event.lane.value) continue;
    for (const trace::Span& s : lane->spans) {
      if (s.event_id == event.id) return s.depth;
    }
  }
  return fallback;
}

void TimelineWidget::setLinkedEvent(std::optional<trace::StoredEvent> event) {
  linked_ = selected_ ? event : std::nullopt;
  if (linked_) linked_depth_ = depthInFrame(*linked_, 0);
  cache_job_ = 0;
  update();
}

void TimelineWidget::clearSelection() {
  ++select_job_;
  linked_.reset();
  selected_.reset();
  selected_name_.clear();
  cache_job_ = 0;
  update();
  emit eventSelected(std::nullopt, {}, {}, {});
}

std::optional<TimelineWidget::SpanHit> TimelineWidget::spanAt(const QPoint& pos) const {
  const int lane = laneAt(pos.y(), 0);
  if (lane < 0 || !frame_ || !frame_->lane(std::size_t(lane)) || pos.x() < gutter_)
    return std::nullopt;
  const Lane& l = lanes_[std::size_t(lane)];
  const int row = std::clamp(int((pos.y() - laneRect(lane).top()) / kRowHeight), 0, l.depth - 1);
  const std::int64_t t = timeAt(pos.x());
  const std::int64_t slack =
      std::int64_t(2.0 / spanAreaWidth() * double(window_.end_ns - window_.start_ns));
  const LaneFrame& lf = *frame_->lane(std::size_t(lane));
  std::optional<SpanHit> best;
  std::int64_t best_distance = slack + 1;
  for (std::size_t k = 0; k < lf.spans.size(); ++k) {
    const trace::Span& s = lf.spans[k];
    if (std::min(int(s.depth), l.depth - 1) != row) continue;
    const std::int64_t distance = distance_to(t, s.start_ns, s.end_ns);
    if (distance < best_distance) {
      best = SpanHit{lane, k, row, t, slack};
      best_distance = distance;
    }
  }
  return best;
}

void TimelineWidget::selectAt(const QPoint& pos) {
  const std::optional<SpanHit> hit = spanAt(pos);
  if (!hit || !reader_) {
    clearSelection();
    return;
  }
  const trace::Span& s = frame_->lane(std::size_t(hit->lane))->spans[hit->span];
  if (s.count == 1 && s.event_id != 0) {
    pick(s.event_id, false, hit->row);
    return;
  }
  // A fold: of its events on the lane, the innermost at the pointer's time,
  // else the nearest within the pointer's slack.
  const std::uint64_t job = ++select_job_;
  const trace::LaneId id = lanes_[std::size_t(hit->lane)].info.id;
  const std::int64_t t = hit->time_ns, slack = hit->slack_ns;
  const int row = hit->row;
  QtConcurrent::run(&pool_, [reader = reader_, id, t, slack] {
    Picked out;
    std::int64_t best_distance = INT64_MAX, best_length = INT64_MAX;
    auto consider = [&](const trace::StoredEvent& e) {
      const std::int64_t distance = distance_to(t, e.event.start_ns, e.event.end_ns);
      const std::int64_t length = e.event.end_ns - e.event.start_ns;
      if (distance < best_distance || (distance == best_distance && length < best_length)) {
        out.event = e;
        best_distance = distance;
        best_length = length;
      }
    };
    // What runs at the pointer's time, at the slack's two ends, and what
    // starts between them: every event within the slack is one of these.
    Status read;
    for (const std::int64_t at : {t, t - slack, t + slack}) {
      auto running = reader->event_at(id, at);
      if (!running) {
        read = running.error();
        break;
      }
      if (running.value()) consider(*running.value());
    }
    if (read && best_distance != 0) {
      read = reader->for_each_event({id}, t - slack, t + slack + 1,
                                    [&](const trace::StoredEvent& e) {
                                      consider(e);
                                      return true;
                                    });
    }
    if (read && out.event && !out.event->launch && trace::may_have_launch(out.event->event.kind)) {
      // A scan's event comes without its launch (a point read has it).
      auto launch = reader->kernel_launch(out.event->id);
      if (launch)
        out.event->launch = *launch;
      else
        read = launch.error();
    }
    if (!read) {
      out.event.reset();
      out.error = q(read.message());
    } else if (out.event) {
      out.name = q(reader->string(out.event->event.name));
    }
    return out;
  }).then(this, [this, job, row](Picked out) {
    if (job != select_job_) return;
    showSelected(out.event, out.name, out.error, false, row);
  });
}

void TimelineWidget::selectEvent(std::int64_t event_id) {
  pick(event_id, true, 0);
}

void TimelineWidget::pick(std::int64_t event_id, bool move_view, int row) {
  if (!reader_) return;
  const std::uint64_t job = ++select_job_;
  QtConcurrent::run(&pool_, [reader = reader_, event_id] {
    auto e = reader->event(event_id);
    Picked out;
    if (!e) {
      out.error = q(e.message());
    } else {
      out.event = e.value();
      out.name = q(reader->string(out.event->event.name));
    }
    return out;
  }).then(this, [this, job, move_view, row](Picked out) {
    if (job != select_job_) return;
    showSelected(out.event, out.name, out.error, move_view, row);
  });
}

void TimelineWidget::revealLane(trace::LaneId id) {
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    if (lanes_[i].info.id.value != id.value) continue;
    if (rankCollapsed(lanes_[i].info.rank)) setRankCollapsed(lanes_[i].info.rank, false);
    // After the layout took the unfolded lanes' height.
    QTimer::singleShot(0, this, [this, index = int(i)] {
      if (index >= int(lanes_.size())) return;
      // The scroll area whose own widget is this timeline (not one further
      // out, as the main window's around a panel holding a timeline).
      auto* viewport = parentWidget();
      auto* area = viewport ? qobject_cast<QScrollArea*>(viewport->parentWidget()) : nullptr;
      if (!area || area->widget() != this) return;
      const QRectF r = laneRect(index);
      area->ensureVisible(int(r.left()), int(r.center().y()), 0,
                          int(r.height() / 2 + kRowHeight * 2));
    });
    return;
  }
}

void TimelineWidget::showSelected(std::optional<trace::StoredEvent> event, const QString& name,
                                  const QString& error, bool move_view, int row) {
  selected_ = event;
  selected_name_ = name;
  selected_depth_ = row;
  linked_.reset();
  if (event) {
    selected_depth_ = depthInFrame(*event, row);
    if (move_view) {
      // Keep the zoom when the event fits and shows a few pixels wide, else
      // zoom so that it takes a quarter of the view; and scroll its lane in.
      const std::int64_t span = window_.end_ns - window_.start_ns;
      const std::int64_t length = event->event.end_ns - event->event.start_ns;
      const std::int64_t middle = event->event.start_ns + length / 2;
      const double pixels = double(length) / double(std::max<std::int64_t>(1, span)) *
                            spanAreaWidth();
      const std::int64_t new_span = length * 4 > span || pixels < 4
                                        ? std::max<std::int64_t>(length * 4, kMinWindowNs)
                                        : span;
      setWindow(middle - new_span / 2, middle + new_span / 2);
      revealLane(event->event.lane);
    }
  }
  cache_job_ = 0;
  update();
  emit eventSelected(selected_, name, event ? laneTitleOf(event->event.lane) : QString(), error);
}

void TimelineWidget::findNext(const QString& text) {
  stepSearch(text, +1);
}

void TimelineWidget::findPrevious(const QString& text) {
  stepSearch(text, -1);
}

void TimelineWidget::stepSearch(const QString& text, int delta) {
  if (!reader_ || text.isEmpty()) return;
  auto step = [this, delta] {
    if (matches_.empty()) {
      match_index_ = -1;
      emit searchMoved(-1, 0, {});
      return;
    }
    const int n = int(matches_.size());
    match_index_ = match_index_ < 0 ? (delta > 0 ? 0 : n - 1) : (match_index_ + delta + n) % n;
    const trace::StoredEvent& e = matches_[std::size_t(match_index_)];
    showSelected(e, match_names_[std::size_t(match_index_)], {}, true, 0);
    emit searchMoved(match_index_, n, {});
  };
  if (text == search_text_) {
    // While its matches are looked up, a key again waits for them: it said
    // "no match" meanwhile, over a store full of them.
    if (!search_pending_) step();
    return;
  }
  // Looked up once per text, on the worker thread; at most kMaxMatches kept.
  constexpr std::size_t kMaxMatches = 100000;
  search_text_ = text;
  matches_.clear();
  match_names_.clear();
  match_index_ = -1;
  search_capped_ = false;
  search_pending_ = true;
  QtConcurrent::run(&pool_, [reader = reader_, needle = text.toStdString()] {
    // One more than kept: whether there were more is said.
    // The first by time across the ranks, where there are more than kept.
    auto found = reader->find_events(needle, trace::NameMatch::substring, kMaxMatches + 1, {},
                                     trace::FindOrder::time);
    Found out;
    if (!found) {
      out.error = q(found.message());
      return out;
    }
    out.events = std::move(found).value();
    out.capped = out.events.size() > kMaxMatches;
    if (out.capped) out.events.resize(kMaxMatches);
    std::stable_sort(out.events.begin(), out.events.end(),
                     [](const trace::StoredEvent& a, const trace::StoredEvent& b) {
                       return a.event.start_ns < b.event.start_ns;
                     });
    // One QString a name, shared by its matches: a copy each, 8000 matches
    // of a name of 200,000 characters held 3 GB.
    std::unordered_map<std::uint32_t, QString> names;
    for (const trace::StoredEvent& e : out.events) {
      auto [it, added] = names.try_emplace(e.event.name.value);
      if (added) it->second = q(reader->string(e.event.name));
      out.names.push_back(it->second);
    }
    return out;
  }).then(this, [this, text, step](Found out) {
    if (text != search_text_) return;
    search_pending_ = false;
    if (!out.error.isEmpty()) {
      search_text_.clear();  // the next key looks it up again
      emit searchMoved(-1, 0, out.error);
      return;
    }
    matches_ = std::move(out.events);
    match_names_ = std::move(out.names);
    search_capped_ = out.capped;
    step();
  });
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* event) {
  // On the gutter's edge: fit the column to the names again.
  if (onGutterEdge(event->position())) {
    if (gutter_leader_) {
      gutter_leader_->fitGutter();
    } else {
      fitGutter();
    }
    return;
  }
  // On a span: zoom to it (a fold: to all it holds); elsewhere: the whole run.
  if (const std::optional<SpanHit> hit = spanAt(event->position().toPoint())) {
    const trace::Span& s = frame_->lane(std::size_t(hit->lane))->spans[hit->span];
    zoomTo({s.start_ns, s.end_ns});
    return;
  }
  resetZoom();
}

void TimelineWidget::goToStep(int delta) {
  if (!reader_) return;
  const std::uint64_t job = ++step_job_;
  QtConcurrent::run(&pool_, [reader = reader_] {
    return trace::job_step_windows(*reader);
  }).then(this, [this, job, delta](const Result<std::vector<trace::StepWindow>>& read) {
    if (job != step_job_) return;
    if (!read || read->empty()) {
      // Said, not a key that does nothing.
      emit stepNotShown(read ? tr("no training steps are recorded in this store")
                             : tr("the steps could not be read: %1").arg(q(read.message())));
      return;
    }
    const std::vector<trace::StepWindow>& steps = *read;
    // From the step shown (the one this zoomed to: a move of the view
    // forgets it), else from the step under the middle of the view.
    int current = -1;
    if (shown_step_) {
      for (int i = 0; i < int(steps.size()); ++i) {
        if (steps[std::size_t(i)].step == *shown_step_) current = i;
      }
    }
    int target;
    if (current >= 0) {
      target = std::clamp(current + delta, 0, int(steps.size()) - 1);
    } else {
      // Elsewhere (zoomed into a step, or wider than one): forward, the
      // first step starting at or after the view's start; back, the last
      // one starting before it.
      target = delta > 0 ? int(steps.size()) - 1 : 0;
      if (delta > 0) {
        for (int i = int(steps.size()) - 1; i >= 0; --i) {
          if (steps[std::size_t(i)].start >= window_.start_ns) target = i;
        }
      } else {
        for (int i = 0; i < int(steps.size()); ++i) {
          if (steps[std::size_t(i)].start < window_.start_ns) target = i;
        }
      }
    }
    zoomTo({steps[std::size_t(target)].start, steps[std::size_t(target)].end});
    shown_step_ = steps[std::size_t(target)].step;
    emit stepShown(*shown_step_);
  });
}

void TimelineWidget::zoomTo(trace::TimeRange range) {
  const std::int64_t length = std::max<std::int64_t>(range.end_ns - range.start_ns, kMinWindowNs);
  const std::int64_t margin = length / 10;
  const std::int64_t middle = range.start_ns + (range.end_ns - range.start_ns) / 2;
  setWindow(middle - length / 2 - margin, middle + length / 2 + margin);
}

void TimelineWidget::keyPressEvent(QKeyEvent* event) {
  const std::int64_t span = window_.end_ns - window_.start_ns;
  const std::int64_t middle = window_.start_ns + span / 2;
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
    case Qt::Key_W:  // W A S D as in Perfetto
      zoom(1.5, middle);
      break;
    case Qt::Key_Minus:
    case Qt::Key_S:
      zoom(1 / 1.5, middle);
      break;
    case Qt::Key_0:
    case Qt::Key_Home:
      resetZoom();
      break;
    case Qt::Key_Left:
    case Qt::Key_A:
      setWindow(window_.start_ns - span / 8, window_.end_ns - span / 8);
      break;
    case Qt::Key_Right:
    case Qt::Key_D:
      setWindow(window_.start_ns + span / 8, window_.end_ns + span / 8);
      break;
    case Qt::Key_PageDown:  // the next and the previous training step
    case Qt::Key_BracketRight:
      goToStep(+1);
      break;
    case Qt::Key_PageUp:
    case Qt::Key_BracketLeft:
      goToStep(-1);
      break;
    case Qt::Key_F:  // the selected event, else the selected range, fills the view
      if (selected_) {
        zoomTo({selected_->event.start_ns, selected_->event.end_ns});
        revealLane(selected_->event.lane);
      } else if (range_) {
        zoomTo(*range_);
      }
      break;
    case Qt::Key_Escape:
      clearSelection();
      setSelectedRange(std::nullopt);
      break;
    default:
      QWidget::keyPressEvent(event);
      return;
  }
  event->accept();
}

QString TimelineWidget::counterTip(const QPoint& pos) const {
  const int index = laneAt(pos.y(), 0);
  if (index < 0 || pos.x() < gutter_ || !frame_ || !frame_->lane(std::size_t(index))) return {};
  const Lane& lane = lanes_[std::size_t(index)];
  if (!lane.counter) return {};
  const LaneFrame& lf = *frame_->lane(std::size_t(index));
  const QString name = laneName(lane).toHtmlEscaped();
  if (!lf.error.isEmpty())
    return tr("<b>%1</b><br>not read: %2").arg(name, lf.error.toHtmlEscaped());
  const trace::CounterView& view = lf.counter;
  auto value = [&](double v) { return counterValueText(lane.info.name, v); };
  auto at = [&](std::int64_t t) { return q(format_time_ns(t - origin_)); };
  // As the lane draws it: the last column that starts before the pointer's
  // pixel ends; in the pointer's own pixel, its samples, else its last value
  // held there. The time of what is shown, not of the pointer.
  const std::int64_t pixel_end = timeAt(pos.x() + 1);
  const auto after = std::upper_bound(
      view.columns.begin(), view.columns.end(), pixel_end,
      [](std::int64_t time, const trace::CounterColumn& c) { return time <= c.start_ns; });
  if (after == view.columns.begin()) {
    if (view.held)
      return tr("<b>%1</b><br>%2, held from before %3")
          .arg(name, value(*view.held), at(window_.start_ns));
    return tr("<b>%1</b><br>no sample before %2").arg(name, at(pixel_end));
  }
  const trace::CounterColumn& c = *std::prev(after);
  if (std::floor(xOf(c.start_ns)) >= pos.x()) {
    // Every column drawn in this pixel, as the lane draws them: one.
    trace::CounterColumn in_pixel = c;
    for (auto k = std::prev(after); k != view.columns.begin();) {
      --k;
      if (std::floor(xOf(k->start_ns)) < pos.x()) break;
      in_pixel.start_ns = k->start_ns;
      in_pixel.samples += k->samples;
      in_pixel.low = std::min(in_pixel.low, k->low);
      in_pixel.high = std::max(in_pixel.high, k->high);
    }
    if (in_pixel.samples > 1) {
      return tr("<b>%1</b><br>%2 samples from %3: from %4 to %5, then %6")
          .arg(name, QString::number(in_pixel.samples), at(in_pixel.start_ns), value(in_pixel.low),
               value(in_pixel.high), value(in_pixel.last));
    }
    return tr("<b>%1</b><br>%2 at %3").arg(name, value(c.high), at(c.start_ns));
  }
  const bool last_sample = c.last_ns >= lane.counter->last_ns;
  return last_sample ? tr("<b>%1</b><br>%2 since %3 (the last sample)")
                           .arg(name, value(c.last), at(c.last_ns))
                     : tr("<b>%1</b><br>%2 since %3").arg(name, value(c.last), at(c.last_ns));
}

bool TimelineWidget::event(QEvent* e) {
  if (e->type() != QEvent::ToolTip) return QWidget::event(e);
  auto* help = static_cast<QHelpEvent*>(e);
  if (const QString text = counterTip(help->pos()); !text.isEmpty()) {
    QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  // From the spans in hand (no query on the GUI thread): the span a click
  // there selects.
  if (const std::optional<SpanHit> hit = spanAt(help->pos())) {
    const LaneFrame& lf = *frame_->lane(std::size_t(hit->lane));
    const std::size_t k = hit->span;
    const trace::Span& s = lf.spans[k];
    const QString extent = q(format_seconds(double(s.end_ns - s.start_ns) * 1e-9));
    const QString at = q(format_time_ns(s.start_ns - origin_));
    QString text =
        s.count > 1 ? tr("<b>%1</b> and %2 more<br>%3 events over %4 from %5<br>"
                         "double-click or zoom in to see them")
                          .arg(shortNameHtml(lf.names[k], lf.name_chars[k]),
                               QString::number(s.count - 1), QString::number(s.count), extent, at)
                    : QStringLiteral("<b>%1</b><br>%2 at %3")
                          .arg(shortNameHtml(lf.names[k], lf.name_chars[k]), extent, at);
    QToolTip::showText(help->globalPos(), text, this);
    if (s.count == 1 && s.event_id != 0 && reader_) {
      // Bytes, bandwidth and correlation are not in a span: the event is
      // read on the worker thread and the tooltip grows when it comes, if
      // the pointer is still on it.
      const std::uint64_t job = ++tooltip_job_;
      const QPoint where = help->globalPos();
      QtConcurrent::run(&pool_,
                        [reader = reader_, id = s.event_id] {
                          auto read = reader->event(id);
                          if (!read)
                            return std::optional<std::pair<trace::StoredEvent, std::int64_t>>();
                          const std::int64_t off_cpu = offCpuNs(*reader, read.value());
                          return std::optional(std::pair(read.value(), off_cpu));
                        })
          .then(this, [this, job, where,
                       text](std::optional<std::pair<trace::StoredEvent, std::int64_t>> stored) {
            if (job != tooltip_job_ || !stored || !QToolTip::isVisible()) return;
            QToolTip::showText(where, text + eventFacts(stored->first, stored->second), this);
          });
    }
    return true;
  }
  // On a lane's title: its whole name, which the column may cut.
  if (help->pos().x() < gutter_) {
    const int lane = laneAt(help->pos().y(), 0);
    if (lane >= 0) {
      QToolTip::showText(help->globalPos(), shortNameHtml(lanes_[std::size_t(lane)].title), this);
      return true;
    }
  }
  QToolTip::hideText();
  return true;
}

}  // namespace cs::gui
