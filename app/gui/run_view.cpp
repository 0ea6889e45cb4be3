#include "app/gui/run_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QBuffer>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QCursor>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalStackedBarSeries>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QKeyEvent>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QPageLayout>
#include <QPainter>
#include <QPdfWriter>
#include <QPushButton>
#include <QResizeEvent>
#include <QSaveFile>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QSvgRenderer>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTextDocument>
#include <QTextDocumentFragment>
#include <QTextOption>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include <QtConcurrent/QtConcurrentRun>
#include <nlohmann/json.hpp>

#include "app/calibration/calibration_workflow.h"
#include "app/gui/critical_path_view.h"
#include "app/gui/plain_text.h"
#include "app/gui/predicted_timeline.h"
#include "app/gui/report_export.h"
#include "app/gui/theme.h"
#include "app/gui/timeline_widget.h"
#include "core/breakdown_parts.h"
#include "core/file_beside.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/prediction_text.h"
#include "core/presets.h"
#include "core/trace_compare.h"
#include "core/trace_reader.h"

namespace cs::gui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

// A note in the search row: the text, and the same whole in the tooltip
// (a word too long for the row, a path, is cut there).
void setNote(QLabel* note, const QString& text) {
  note->setText(text);
  note->setToolTip(plainToolTip(text));
}

// A message in the header's rich text: escaped, its lines kept.
QString htmlLines(const QString& text) {
  return text.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>"));
}

QString seconds(double s) {
  return q(format_seconds(s));
}

// RunView::predictAgain's result, from its worker thread.
struct PredictedAgain {
  std::shared_ptr<const trace::RunAnalysis> analysis;  // the run's, with the new prediction
  QString cluster;  // the cluster preset predicted on, "(calibrated)" when it is
  QStringList notes;  // why not on the machine's calibration
  QString error;
};

QString ns(std::int64_t v) {
  return q(format_seconds(double(v) * 1e-9));
}

// A point in time, nanoseconds from the run's start, to the microsecond
// (the details: to the nanosecond): ns() rounds to three figures, and
// events a few microseconds apart read alike ("3.54 s").
QString instant(std::int64_t from_start, int decimals = 6) {
  return q(format_time_ns(from_start, decimals));
}

// A sortable cell: shown as text, sorted by its number (Qt::UserRole).
QStandardItem* cell(const QString& text, double sort_value) {
  auto* item = new QStandardItem(text);
  item->setData(sort_value, Qt::UserRole);
  item->setEditable(false);
  return item;
}

QStandardItem* textCell(const QString& text) {
  auto* item = new QStandardItem(text);
  item->setData(text, Qt::UserRole);
  item->setToolTip(plainToolTip(text));  // whole, where the column elides it
  item->setEditable(false);
  return item;
}

// A name's cell: the name as the tables show it (elidedName), whole in
// Qt::UserRole, which the tables sort and filter by and a row's instances
// are looked up by.
QStandardItem* nameCell(const std::string& name) {
  const QString shown = elidedName(name);
  auto* item = new QStandardItem(shown);
  item->setData(q(name), Qt::UserRole);
  item->setToolTip(plainToolTip(shown));  // where the column elides it
  item->setEditable(false);
  return item;
}

// Kernel names run to hundreds of characters (templated CUTLASS kernels):
// the name column is held to a width the figures beside it stay visible
// with, its names elided in the middle.
constexpr int kNameColumnWidth = 360;

QTableWidgetItem* tableCell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(item->flags() & ~Qt::ItemIsEditable);
  return item;
}

// Calls `back` on Shift+Enter in the line edit it filters, and keeps the key.
class ShiftEnterFilter : public QObject {
 public:
  ShiftEnterFilter(std::function<void()> back, QObject* parent)
      : QObject(parent), back_(std::move(back)) {}
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() == QEvent::KeyPress) {
      const auto* key = static_cast<QKeyEvent*>(event);
      if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) &&
          (key->modifiers() & Qt::ShiftModifier)) {
        back_();
        return true;
      }
    }
    return QObject::eventFilter(watched, event);
  }

 private:
  std::function<void()> back_;
};

// A cell that sorts by the number behind its text, not by the text.
class NumberCell : public QTableWidgetItem {
 public:
  NumberCell(const QString& text, double value) : QTableWidgetItem(text) {
    setFlags(flags() & ~Qt::ItemIsEditable);
    setData(kSortKey, value);
  }
  bool operator<(const QTableWidgetItem& other) const override {
    return data(kSortKey).toDouble() < other.data(kSortKey).toDouble();
  }

 private:
  static constexpr int kSortKey = Qt::UserRole + 1;
};

// A kernel's or a collective's instances, at most kMaxInstances of them:
// where there are more, the longest (the ones a user looks for), with the
// count of all.
constexpr std::size_t kMaxInstances = 1000;
struct Instances {
  std::vector<trace::StoredEvent> events;
  std::int64_t total = 0;
  QString error;
};

Instances collectInstances(const trace::TraceReader& r, std::optional<trace::TimeRange> range,
                           const std::function<bool(const trace::StoredEvent&)>& wanted) {
  Instances out;
  // A heap whose front is the shortest kept.
  auto longer = [](const trace::StoredEvent& a, const trace::StoredEvent& b) {
    return a.event.duration_ns() > b.event.duration_ns();
  };
  // In a range: the events its tables count (trace::counts_in_window). Both
  // ends were kept here, and a row listed the kernels either side of a range
  // drawn between two of them that its count left out.
  const trace::TimeRange all = r.time_range();
  const std::int64_t end = range ? range->end_ns : all.end_ns + 1;
  const Status read = r.for_each_event({}, all.start_ns, end, [&](const trace::StoredEvent& e) {
    if (range && !trace::counts_in_window(e.event.start_ns, e.event.end_ns, *range)) return true;
    if (!wanted(e)) return true;
    ++out.total;
    if (out.events.size() < kMaxInstances) {
      out.events.push_back(e);
      std::push_heap(out.events.begin(), out.events.end(), longer);
    } else if (e.event.duration_ns() > out.events.front().event.duration_ns()) {
      std::pop_heap(out.events.begin(), out.events.end(), longer);
      out.events.back() = e;
      std::push_heap(out.events.begin(), out.events.end(), longer);
    }
    return true;
  });
  if (!read) out.error = q(read.message());
  return out;
}

struct Analysed {
  std::uint64_t job = 0;
  std::shared_ptr<const trace::RunAnalysis> analysis;
  trace::RunInfo run;
  trace::StoreState state;  // how the run ended, or that it is still being written
  std::vector<std::string> losses;  // what the writers counted and left out
  int world_size = 0;               // of the job the ranks came from (a sample of 128, say)
  std::string predicted_plan_json;  // the plan the run's prediction was made for, if recorded
  bool has_prediction = false;      // the store holds a prediction (meta "predicted_step")
  std::string not_predictable;      // why none can be made (a calibration store, an import)
  std::int64_t start_ns = 0;
  std::vector<std::int64_t> step_starts;  // the lowest rank's, for the predicted lane
  std::vector<CounterLine> counters;      // each rank's sampled counters
  QString error;
  bool opened = false;  // the file is a store (its integrity is worth checking)
};

// Each counter series of the store (a rank's GPU memory in use, a PyTorch
// profile's allocated bytes), as points from the trace's start: at most
// kCounterPoints, the largest value of each stretch kept so that no peak is
// lost.
constexpr std::size_t kCounterPoints = 2000;
Result<std::vector<CounterLine>> readCounters(const trace::TraceReader& reader) {
  std::vector<CounterLine> out;
  auto series = reader.counter_series();
  if (!series) return series.error();
  const trace::TimeRange all = reader.time_range();
  for (const trace::CounterSeries& s : *series) {
    const std::int32_t rank = s.rank;
    const trace::StringId name = s.name;
    // The engines' memory by part adds up to their "memory in use": the
    // prediction's table holds the parts.
    if (trace::is_memory_part_counter(reader.string(name))) continue;
    if (trace::is_op_counter(reader.string(name))) continue;
    auto samples = reader.counters(rank, name);
    if (!samples) return samples.error();
    CounterLine line;
    line.title = QObject::tr("rank %1: %2").arg(rank).arg(elidedName(reader.string(name)));
    line.rank = rank;
    line.name = reader.string(name);
    line.bytes = trace::counter_in_bytes(line.name);
    const std::size_t n = samples->size();
    const std::size_t per_point =
        std::max<std::size_t>(1, (n + kCounterPoints - 1) / kCounterPoints);
    for (std::size_t i = 0; i < n; i += per_point) {
      std::size_t top = i;
      for (std::size_t j = i; j < std::min(n, i + per_point); ++j)
        if ((*samples)[j].value > (*samples)[top].value) top = j;
      line.points.emplace_back(double((*samples)[top].time_ns - all.start_ns) * 1e-6,
                               (*samples)[top].value);
      line.times_ns.push_back((*samples)[top].time_ns - all.start_ns);
    }
    out.push_back(std::move(line));
  }
  return out;
}

// How the run ended, where that is not "complete": a crashed or cancelled
// run must not read like a finished one; and what its writers lost (a full
// disk), which a complete-looking run must not hide either.
QString endingText(const trace::StoreState& s, const std::vector<std::string>& losses) {
  QString lost;
  for (const std::string& loss : losses) {
    lost += QStringLiteral("<br><span style=\"color:#c03030\">") + q(loss).toHtmlEscaped() +
            QStringLiteral("</span>");
  }
  QString what;
  if (s.status == "complete" || s.status.empty()) return lost;
  if (s.writer_alive) {
    what = QObject::tr("still being written (shown as committed so far)");
  } else if (s.writer_elsewhere) {
    what = QObject::tr("being written by %1 of another host, or left so when it died (shown as "
                       "committed so far)")
               .arg(q(s.writer).toHtmlEscaped());
  } else if (s.status == "interrupted" || s.status == "writing") {
    what = QObject::tr("its writer died before closing it: the steps it recorded");
  } else {
    what = QObject::tr("the run ended %1").arg(q(s.status).toHtmlEscaped());
  }
  return QStringLiteral("<br><span style=\"color:#c03030\">") + what + QStringLiteral("</span>") +
         lost;
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

RunView::RunView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("run_view"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  header_ = new QLabel(tr("No run open. File ▸ Open run… or Import trace…"), this);
  header_->setObjectName(QStringLiteral("run_header"));
  header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  header_->setWordWrap(true);
  // Rich text always, with the title, paths and messages escaped: a title
  // holding "<b>" or "<img src=...>" is shown as written.
  header_->setTextFormat(Qt::RichText);
  // A word the label cannot break (a 120,000-character title, a long path)
  // set the window's minimum width to its own: 7.8 GB of pixmaps, then a
  // crash. The header takes the width it is given.
  header_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addWidget(header_);

  // Search by name, next and previous.
  auto* search_row = new QHBoxLayout;
  search_ = new QLineEdit(this);
  search_->setObjectName(QStringLiteral("run_search"));
  search_->setPlaceholderText(tr("Find an event by name (Enter: next, Shift+Enter: previous)"));
  auto* previous = new QToolButton(this);
  previous->setText(tr("◀"));
  previous->setToolTip(tr("Previous match"));
  auto* next = new QToolButton(this);
  next->setText(tr("▶"));
  next->setToolTip(tr("Next match"));
  // The row's two notes can carry a store's error, paths and all: they wrap
  // in the width the row gives them (the search keeps half) instead of
  // widening the window to a line of their own, and say it whole in a tooltip.
  auto elastic_note = [this](const QString& name) {
    auto* note = new QLabel(this);
    note->setObjectName(name);
    note->setWordWrap(true);
    note->setTextFormat(Qt::PlainText);
    note->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    return note;
  };
  search_status_ = elastic_note(QStringLiteral("run_search_status"));
  search_row->addWidget(search_, 2);
  search_row->addWidget(previous);
  search_row->addWidget(next);
  search_row->addWidget(search_status_, 1);
  critical_box_ = new QCheckBox(tr("Critical path"), this);
  critical_box_->setObjectName(QStringLiteral("run_critical_path"));
  critical_box_->setToolTip(
      tr("Draw the chain of operations across the ranks that set each step's length (as "
         "Holistic Trace Analysis finds it) over the timeline, for the steps in view: a bar "
         "over each operation on it, dots for idle time"));
  critical_status_ = elastic_note(QStringLiteral("run_critical_path_status"));
  search_row->addWidget(critical_box_);
  search_row->addWidget(critical_status_, 1);
  layout->addLayout(search_row);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  lanes_and_tabs_ = splitter;
  layout->addWidget(splitter, 1);

  auto* timelines = new QWidget(splitter);
  // Docked beside the other panels, the lanes kept a few rows at least
  // (the tabs below took the height and left them 68 px); no more, since the
  // dock's minimum is the bottom area's, and the window's (it was 1417 px).
  timelines->setMinimumHeight(90);
  auto* timelines_layout = new QVBoxLayout(timelines);
  timelines_layout->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(timelines);
  scroll->setWidgetResizable(true);
  timeline_ = new TimelineWidget(scroll);
  timeline_->setObjectName(QStringLiteral("run_timeline"));
  timeline_->clear(tr("No run open."));
  timeline_->setMinimumToContent(true);
  scroll->setWidget(timeline_);
  timelines_layout->addWidget(scroll, 3);
  predicted_label_ = new QLabel(tr("Predicted step (planner)"), timelines);
  predicted_label_->setObjectName(QStringLiteral("run_predicted_label"));
  predicted_label_->setTextFormat(Qt::PlainText);  // may hold a message naming a file
  // The predicted lanes scroll as the measured ones do: a plan of many
  // pipeline stages has more lanes than their share of the height shows, and
  // the later stages could not be reached.
  predicted_area_ = new QScrollArea(timelines);
  predicted_area_->setObjectName(QStringLiteral("run_predicted_area"));
  predicted_area_->setWidgetResizable(true);
  predicted_ = new TimelineWidget(predicted_area_);
  predicted_->setObjectName(QStringLiteral("run_predicted_timeline"));
  predicted_->followGutter(timeline_);  // one column of titles, so that times line up
  predicted_->setMinimumToContent(true);
  predicted_area_->setWidget(predicted_);
  predicted_label_->hide();
  predicted_area_->hide();
  // A quarter of the height at most, whatever its lanes ask: the measured
  // lanes come first (a predicted group of 8 stages left them 40 px).
  predicted_area_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Ignored);
  predicted_area_->setMinimumHeight(60);
  timelines_layout->addWidget(predicted_label_);
  // Both scroll bars always there, so that the two lanes' widths, and so
  // their time axes, are the same (they drifted apart by up to 15 px).
  scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
  predicted_area_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
  predicted_area_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  // Its quarter of the height only while shown: hidden, the measured lanes
  // take it all (an empty band stayed under them).
  timelines_layout->addWidget(predicted_area_, 0);
  timelines_layout_ = timelines_layout;
  splitter->addWidget(timelines);

  tabs_ = new QTabWidget(splitter);
  tabs_->setObjectName(QStringLiteral("run_tabs"));
  splitter->addWidget(tabs_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setCollapsible(0, false);

  // Selection: the event's details beside the selected range's breakdown.
  auto* selection = new QSplitter(Qt::Horizontal, tabs_);
  details_ = new QTextBrowser(selection);
  details_->setObjectName(QStringLiteral("run_details"));
  details_->setPlaceholderText(tr("Click an event on the timeline to see its details."));
  // Its link goes to the correlated event (a launch's kernel, a kernel's launch).
  details_->setOpenLinks(false);
  connect(details_, &QTextBrowser::anchorClicked, this, [this] { goToCorrelated(); });
  range_text_ = new QTextBrowser(selection);
  range_text_->setObjectName(QStringLiteral("run_range"));
  range_text_->setPlaceholderText(tr("Shift+drag on the timeline to see a range's breakdown."));
  // Its table's headers wrap between words only ("communic/ation" was cut
  // inside the word): narrower than the table, the pane scrolls across.
  range_text_->setWordWrapMode(QTextOption::WordWrap);
  tabs_->addTab(selection, tr("Selection"));

  // The chart scrolls in a short dock rather than shrink: below about
  // 230 px Qt Charts elides every axis label to "…"; and its height no
  // longer sets the dock's minimum.
  auto* chart_area = new QScrollArea(tabs_);
  chart_area->setWidgetResizable(true);
  chart_area->setFrameShape(QFrame::NoFrame);
  chart_ = new QChartView(chart_area);
  chart_->setObjectName(QStringLiteral("run_breakdown_chart"));
  chart_->setRenderHint(QPainter::Antialiasing);
  chart_->setMinimumHeight(230);
  chart_area->setWidget(chart_);
  tabs_->addTab(chart_area, tr("Breakdown"));

  // The store's counters over time (GPU memory in use), when it has any.
  // In a scroll area, as the breakdown's: its 230 px made the tabs' minimum,
  // and so the dock's (429 px) and the window's.
  counter_area_ = new QScrollArea(this);
  counter_area_->setWidgetResizable(true);
  counter_area_->setFrameShape(QFrame::NoFrame);
  counter_chart_ = new QChartView(counter_area_);
  counter_chart_->setObjectName(QStringLiteral("run_counters_chart"));
  counter_chart_->setRenderHint(QPainter::Antialiasing);
  counter_chart_->setMinimumHeight(230);
  counter_area_->setWidget(counter_chart_);
  counter_area_->hide();

  rank_table_ = new QTableWidget(tabs_);
  rank_table_->setObjectName(QStringLiteral("run_ranks"));
  rank_table_->setSortingEnabled(false);
  tabs_->addTab(rank_table_, tr("Ranks"));

  stream_table_ = new QTableWidget(tabs_);
  stream_table_->setObjectName(QStringLiteral("run_streams"));
  stream_table_->setSortingEnabled(false);
  stream_table_->setToolTip(
      tr("Each stream's idle time: the gaps between its own events. Host wait: the next one was "
         "launched after the last one ended; kernel wait: a gap shorter than 30 ns; other: "
         "waiting for another stream, or for data. Queue: the operations launched on it that "
         "have not started yet (HTA's queue length), on average over its span and at most."));
  tabs_->addTab(stream_table_, tr("Streams"));

  // Kernels and communication: a filter above both, instances below.
  auto* summaries = new QWidget(tabs_);
  auto* summaries_layout = new QVBoxLayout(summaries);
  summaries_layout->setContentsMargins(0, 0, 0, 0);
  filter_ = new QLineEdit(summaries);
  filter_->setObjectName(QStringLiteral("run_filter"));
  filter_->setPlaceholderText(tr("Filter kernels, collectives, calls, copies and ranges by name"));
  filter_->setClearButtonEnabled(true);
  summaries_scope_ = new QLabel(tr("The whole run"), summaries);
  summaries_scope_->setObjectName(QStringLiteral("run_summaries_scope"));
  // The scope beside the filter, not under it: a line less of the dock's minimum.
  auto* filter_row = new QHBoxLayout;
  filter_row->addWidget(filter_, 1);
  filter_row->addWidget(summaries_scope_);
  summaries_layout->addLayout(filter_row);
  // The tables beside their selected row's instances: one above the other,
  // the tables kept 3 rows at 1500 x 950 under an empty instances pane, and
  // their two minimums added up to the dock's.
  auto* summary_split = new QSplitter(Qt::Horizontal, summaries);
  auto* summary_tabs = new QTabWidget(summary_split);
  kernel_model_ = new QStandardItemModel(this);
  collective_model_ = new QStandardItemModel(this);
  kernel_proxy_ = new QSortFilterProxyModel(this);
  collective_proxy_ = new QSortFilterProxyModel(this);
  // Every summary table sorts by number (Qt::UserRole) and filters by name.
  auto set_up_proxy = [](QSortFilterProxyModel* proxy) {
    proxy->setSortRole(Qt::UserRole);
    proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    proxy->setFilterKeyColumn(0);
    proxy->setFilterRole(Qt::UserRole);  // the whole name (nameCell)
  };
  auto set_up_view = [](QTableView* view) {
    view->setSortingEnabled(true);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->verticalHeader()->hide();
    view->horizontalHeader()->setStretchLastSection(true);
    view->setTextElideMode(Qt::ElideMiddle);
    // A few rows: the page's minimum is the Run dock's, and so the window's.
    view->setMinimumHeight(48);
  };
  for (QSortFilterProxyModel* proxy : {kernel_proxy_, collective_proxy_})
    set_up_proxy(proxy);
  kernel_proxy_->setSourceModel(kernel_model_);
  collective_proxy_->setSourceModel(collective_model_);
  kernel_view_ = new QTableView(summary_tabs);
  kernel_view_->setObjectName(QStringLiteral("run_kernels"));
  collective_view_ = new QTableView(summary_tabs);
  collective_view_->setObjectName(QStringLiteral("run_collectives"));
  for (QTableView* view : {kernel_view_, collective_view_})
    set_up_view(view);
  kernel_view_->setModel(kernel_proxy_);
  collective_view_->setModel(collective_proxy_);
  summary_tabs->addTab(kernel_view_, tr("Kernels"));
  summary_tabs->addTab(collective_view_, tr("Communication"));
  auto add_summary = [&](SummaryTable& t, const QString& object_name, const QString& title) {
    t.model = new QStandardItemModel(this);
    t.proxy = new QSortFilterProxyModel(this);
    set_up_proxy(t.proxy);
    t.proxy->setSourceModel(t.model);
    t.view = new QTableView(summary_tabs);
    t.view->setObjectName(object_name);
    set_up_view(t.view);
    t.view->setModel(t.proxy);
    summary_tabs->addTab(t.view, title);
    connect(t.view->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this, proxy = t.proxy](const QModelIndex& current) {
              if (current.isValid()) showNamedInstances(proxy, current.row());
            });
  };
  add_summary(api_calls_, QStringLiteral("run_api_calls"), tr("CUDA API"));
  add_summary(copies_, QStringLiteral("run_copies"), tr("Copies and sets"));
  add_summary(ranges_, QStringLiteral("run_ranges"), tr("Ranges"));
  auto* instances_box = new QWidget(summary_split);
  auto* instances_layout = new QVBoxLayout(instances_box);
  instances_layout->setContentsMargins(0, 0, 0, 0);
  instances_note_ = new QLabel(instances_box);
  instances_note_->setObjectName(QStringLiteral("run_instances_note"));
  instances_note_->setTextFormat(Qt::PlainText);  // names a kernel
  instances_layout->addWidget(instances_note_);
  instances_ = new QTableWidget(instances_box);
  instances_->setObjectName(QStringLiteral("run_instances"));
  instances_->setColumnCount(4);
  instances_->setHorizontalHeaderLabels({tr("rank"), tr("start"), tr("duration"), tr("bytes")});
  instances_->setSelectionBehavior(QAbstractItemView::SelectRows);
  instances_->verticalHeader()->hide();
  instances_->horizontalHeader()->setSortIndicator(1, Qt::AscendingOrder);
  instances_->setSortingEnabled(true);
  instances_->setMinimumHeight(48);
  instances_layout->addWidget(instances_, 1);
  // The tallest page sets the tabs' minimum, and so how few lanes the
  // timeline keeps in a short dock: its two halves ask for little (their
  // tables scroll).
  summary_tabs->setMinimumHeight(70);
  instances_box->setMinimumHeight(40);
  summary_split->setStretchFactor(0, 3);
  summary_split->setStretchFactor(1, 2);
  summaries_layout->addWidget(summary_split, 1);
  tabs_->addTab(summaries, tr("Kernels and communication"));

  prediction_table_ = new QTableWidget(tabs_);
  prediction_table_->setObjectName(QStringLiteral("run_prediction"));
  tabs_->addTab(prediction_table_, tr("Predicted vs measured"));

  critical_path_ = new CriticalPathView(tabs_);
  tabs_->addTab(critical_path_, tr("Critical path"));

  // Another run held against this one (Tools ▸ Compare the open run with…).
  // Its tab is there only while a comparison is shown.
  comparison_table_ = new QTableWidget(this);
  comparison_table_->setObjectName(QStringLiteral("run_comparison"));
  comparison_table_->hide();
  // No row numbers, as the summary tables have none: counted from 1 beside
  // the rank column, rank 0's row read "1 | 0".
  for (QTableWidget* table : {rank_table_, stream_table_, prediction_table_, comparison_table_})
    table->verticalHeader()->hide();

  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    for (QSortFilterProxyModel* proxy :
         {kernel_proxy_, collective_proxy_, api_calls_.proxy, copies_.proxy, ranges_.proxy})
      proxy->setFilterFixedString(text);
  });
  connect(kernel_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (current.isValid()) showKernelInstances(current.row());
          });
  connect(collective_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (current.isValid()) showCollectiveInstances(current.row());
          });
  connect(instances_, &QTableWidget::currentCellChanged, this, [this](int row) {
    if (row < 0 || !instances_->item(row, 0)) return;
    const QVariant id = instances_->item(row, 0)->data(Qt::UserRole);
    // The list stays in front, so that the arrow keys walk the instances.
    if (!id.isValid()) return;
    walked_event_ = id.toLongLong();
    timeline_->selectEvent(walked_event_);
  });
  connect(timeline_, &TimelineWidget::storeOpened, this,
          [this](const QString& path, const QString& error) {
            if (path != path_) return;
            if (!error.isEmpty()) {
              message_ = error;
              header_->setText(
                  tr("%1 cannot be shown: %2")
                      .arg(QFileInfo(path).fileName().toHtmlEscaped(), htmlLines(error)));
            }
            emit storeOpened(path, error);
            // After the timeline's reader, which finalizes a store whose
            // writer died, so that the analysis reads it whole.
            startAnalysis();
          });
  connect(timeline_, &TimelineWidget::eventSelected, this,
          [this](const std::optional<trace::StoredEvent>& event, const QString& name,
                 const QString& lane, const QString& error) {
            showDetails(event, name, lane, error, timeline_->timeOrigin(), true);
          });
  // The predicted lanes' events have details too; a range selected on them
  // is the measured run's range where they share its clock.
  connect(predicted_, &TimelineWidget::eventSelected, this,
          [this](const std::optional<trace::StoredEvent>& event, const QString& name,
                 const QString& lane, const QString& error) {
            showDetails(event, name, lane, error,
                        predicted_aligned_ ? timeline_->timeOrigin() : predicted_->timeOrigin(),
                        false);
          });
  auto same = [](const std::optional<trace::TimeRange>& a,
                 const std::optional<trace::TimeRange>& b) {
    return a.has_value() == b.has_value() &&
           (!a || (a->start_ns == b->start_ns && a->end_ns == b->end_ns));
  };
  connect(predicted_, &TimelineWidget::rangeSelected, this,
          [this, same](const std::optional<trace::TimeRange>& range) {
            if (predicted_aligned_ && !same(timeline_->selectedRange(), range))
              timeline_->setSelectedRange(range);
          });
  connect(timeline_, &TimelineWidget::rangeSelected, this,
          [this, same](const std::optional<trace::TimeRange>& range) {
            if (predicted_aligned_ && !same(predicted_->selectedRange(), range))
              predicted_->setSelectedRange(range);
          });
  // The predicted steps share the measured run's clock: the two windows move together.
  connect(
      timeline_, &TimelineWidget::windowChanged, this,
      [this](std::int64_t start, std::int64_t end) {
        if (predicted_aligned_)
          predicted_->followWindow(timeline_->fullRange(), {start, end}, timeline_->timeOrigin());
      });
  connect(predicted_, &TimelineWidget::windowChanged, this,
          [this](std::int64_t start, std::int64_t end) {
            if (predicted_aligned_) timeline_->setWindow(start, end);
          });
  connect(timeline_, &TimelineWidget::rangeSelected, this, &RunView::analyseRange);
  auto find = [this](int delta) {
    if (delta > 0) {
      timeline_->findNext(search_->text());
    } else {
      timeline_->findPrevious(search_->text());
    }
  };
  connect(search_, &QLineEdit::returnPressed, this, [find] { find(+1); });
  // Shift+Enter in the field: the previous match (returnPressed does not
  // tell Shift apart, so the key is taken before the field sees it).
  search_->installEventFilter(new ShiftEnterFilter([find] { find(-1); }, search_));
  // Ctrl+F finds, F3 and Shift+F3 step through the matches.
  auto* focus_find = new QShortcut(QKeySequence::Find, this);
  focus_find->setContext(Qt::WidgetWithChildrenShortcut);
  connect(focus_find, &QShortcut::activated, this, [this] {
    search_->setFocus();
    search_->selectAll();
  });
  auto* find_next = new QShortcut(QKeySequence::FindNext, this);
  find_next->setContext(Qt::WidgetWithChildrenShortcut);
  connect(find_next, &QShortcut::activated, this, [find] { find(+1); });
  auto* find_previous = new QShortcut(QKeySequence::FindPrevious, this);
  find_previous->setContext(Qt::WidgetWithChildrenShortcut);
  connect(find_previous, &QShortcut::activated, this, [find] { find(-1); });
  connect(next, &QToolButton::clicked, this, [find] { find(+1); });
  connect(previous, &QToolButton::clicked, this, [find] { find(-1); });
  // The step PageDown/PageUp went to, said where the search says where it is,
  // while the view is on it: after Home, a zoom or a pan it is not.
  connect(timeline_, &TimelineWidget::stepShown, this, [this](std::int32_t step) {
    setNote(search_status_, tr("step %1").arg(step));
    status_says_step_ = true;
  });
  connect(timeline_, &TimelineWidget::stepLeft, this, [this] {
    if (status_says_step_) setNote(search_status_, {});
    status_says_step_ = false;
  });
  connect(timeline_, &TimelineWidget::stepNotShown, this, [this](const QString& why) {
    setNote(search_status_, why);
    status_says_step_ = false;
  });
  connect(critical_box_, &QCheckBox::toggled, timeline_, &TimelineWidget::setCriticalPathShown);
  connect(timeline_, &TimelineWidget::criticalPathChanged, this,
          [this](const QString& note) { setNote(critical_status_, note); });
  connect(timeline_, &TimelineWidget::searchMoved, this,
          [this](int index, int matches, const QString& error) {
            status_says_step_ = false;
            if (!error.isEmpty()) {
              setNote(search_status_, error);
            } else if (matches == 0) {
              setNote(search_status_, tr("no match"));
            } else {
              // Capped: "1 of the first 100000", not a count that reads as all.
              setNote(search_status_,
                      timeline_->searchCapped()
                          ? tr("%1 of the first %2 matches in time (more later in the store)")
                                .arg(index + 1)
                                .arg(matches)
                          : tr("%1 of %2").arg(index + 1).arg(matches));
            }
          });
}

RunView::~RunView() {
  jobs_.waitForDone();
}

bool RunView::working() const {
  return jobs_.activeThreadCount() > 0;
}

QWidget* RunView::counterTab() const {
  return counter_area_;
}

void RunView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  // Two thirds to the lanes (measured and predicted) at the first real
  // size, kept in proportion after: the sizes given before the view had one
  // were lost, and the tabs took all but the lanes' minimum (2 lanes in view
  // at 1500 x 950).
  const int total = lanes_and_tabs_->height() - lanes_and_tabs_->handleWidth();
  if (!split_set_ && isVisible() && total > 0) {
    split_set_ = true;
    lanes_and_tabs_->setSizes({total * 2 / 3, total - total * 2 / 3});
  }
}

void RunView::openStore(const QString& path) {
  path_ = path;
  message_.clear();
  title_ = QFileInfo(path).fileName();
  analysis_.reset();
  range_analysis_.reset();
  predicted_again_on_.clear();
  predicted_again_notes_.clear();
  predicted_from_plan_.clear();
  not_predictable_.clear();
  damage_.clear();
  integrity_checked_ = false;
  header_->setText(tr("Opening %1…").arg(title_.toHtmlEscaped()));
  // Nothing of the store shown before stays: a store that cannot be
  // analysed showed the last one's figures under its own name.
  details_->clear();
  range_text_->clear();
  instances_->setRowCount(0);
  setNote(search_status_, {});  // the last store's step or match
  status_says_step_ = false;
  QChart* old_chart = chart_->chart();
  chart_->setChart(new QChart);
  delete old_chart;
  chart_->setMinimumHeight(230);
  rank_table_->clear();
  rank_table_->setRowCount(0);
  stream_table_->clear();
  stream_table_->setRowCount(0);
  kernel_model_->removeRows(0, kernel_model_->rowCount());
  collective_model_->removeRows(0, collective_model_->rowCount());
  for (const SummaryTable* t : {&api_calls_, &copies_, &ranges_})
    t->model->removeRows(0, t->model->rowCount());
  prediction_table_->clear();
  prediction_table_->setRowCount(0);
  comparison_table_->clear();
  comparison_table_->setRowCount(0);
  comparison_table_->setColumnCount(0);
  tabs_->removeTab(tabs_->indexOf(comparison_table_));
  critical_path_->setStore({});
  setPredictedShown(false);
  predicted_label_->hide();
  predicted_aligned_ = false;
  // Drops every answer about the store shown before: its analysis, a
  // range's, its instances, a correlated event (an id of that store).
  ++job_;
  ++range_job_;
  ++instance_job_;
  ++correlation_job_;
  ++link_job_;
  ++comparison_job_;
  details_event_.reset();
  walked_event_ = 0;
  summaries_scope_->setText(tr("The whole run"));
  showCounters({});
  instances_note_->clear();
  instances_->setSortingEnabled(true);
  // An older store is upgraded when first opened, before the timeline reads
  // it: one changed in place, or read through a copy, is said in the header
  // as the CLI says it. A store that cannot be opened is the timeline's
  // error. Off the GUI thread: an upgrade rebuilds every lane's chunks.
  upgrade_note_.clear();
  QtConcurrent::run(&jobs_, [store = path.toStdString()] {
    auto state = trace::inspect_store(store);
    return state ? q(trace::upgrade_note(store, *state)) : QString();
  }).then(this, [this, path](const QString& note) {
    if (path != path_) return;  // another store was opened since
    upgrade_note_ = note;
    timeline_->setStore(path);
  });
}

void RunView::startAnalysis() {
  const std::uint64_t job = ++job_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString(), job] {
    Analysed out;
    out.job = job;
    // Read as it is: a store still being written is left to its writer.
    auto reader = trace::TraceReader::open(path);
    if (!reader) {
      out.error = q(reader.message());
      return out;
    }
    out.opened = true;
    out.run = reader.value()->run();
    out.state = reader.value()->state();
    out.losses = reader.value()->losses();
    out.world_size = reader.value()->world_size();
    if (auto predicted = reader.value()->meta(trace::kPredictedStepMetaKey)) {
      out.has_prediction = true;
      // An unreadable one is the analysis's error, said below.
      auto step = trace::read_predicted_step(*predicted, path + ": meta predicted_step");
      if (step) out.predicted_plan_json = std::move(step->plan_json);
    } else if (auto why = calib::why_not_predictable(*reader.value())) {
      out.not_predictable = std::move(*why);
    }
    out.start_ns = reader.value()->time_range().start_ns;
    if (auto steps = reader.value()->steps()) {
      std::optional<std::int32_t> lowest;
      for (const trace::StepMetrics& m : *steps)
        lowest = std::min(lowest.value_or(m.rank), m.rank);
      for (const trace::StepMetrics& m : *steps) {
        if (m.rank == lowest) out.step_starts.push_back(m.start_ns);
      }
      std::sort(out.step_starts.begin(), out.step_starts.end());
    }
    auto analysis = trace::analyze_run(*reader.value());
    if (!analysis) {
      out.error = q(analysis.message());
      return out;
    }
    if (auto counters = readCounters(*reader.value())) out.counters = std::move(counters).value();
    out.analysis = std::make_shared<const trace::RunAnalysis>(std::move(analysis).value());
    return out;
  }).then(this, [this](Analysed out) {
    if (out.job != job_) return;  // another store was opened since
    if (!out.error.isEmpty()) {
      message_ = out.error;
      header_->setText(
          tr("%1 cannot be analysed: %2").arg(title_.toHtmlEscaped(), htmlLines(out.error)));
      emit analysisReady(out.error);
      if (out.opened) checkIntegrity();
      return;
    }
    analysis_ = out.analysis;
    not_predictable_ = q(out.not_predictable);
    trace_start_ns_ = out.start_ns;
    if (!out.run.title.empty()) title_ = q(out.run.title);
    const int ranks = int(analysis_->ranks.size());
    // As `trace info` says it: "2 of 128 ranks" where the store holds a
    // sample of a larger job.
    const QString rank_count = out.world_size > ranks
                                   ? tr("%1 of %2 ranks").arg(ranks).arg(out.world_size)
                               : ranks == 1 ? tr("1 rank")
                                            : tr("%1 ranks").arg(ranks);
    constexpr int kHeaderTitleChars = 200;
    const QString shown_title = title_.size() > kHeaderTitleChars
                                    ? title_.left(kHeaderTitleChars) + QStringLiteral("…")
                                    : title_;
    header_->setToolTip(plainToolTip(title_.left(4096)));
    // One arg() for all: a title holding "%1" (a name typed so) took the
    // places of the figures after it.
    header_->setText(
        tr("<b>%1</b> — %2 · source %3 · %4%5")
            .arg(shown_title.toHtmlEscaped(), rank_count, q(out.run.source).toHtmlEscaped(),
                 QFileInfo(path_).absoluteFilePath().toHtmlEscaped(),
                 endingText(out.state, out.losses)) +
        (upgrade_note_.isEmpty() ? QString()
                                 : QStringLiteral("<br>") + upgrade_note_.toHtmlEscaped()));
    // A store of its ranks and lanes only showed an empty 100 ns and a
    // table of 0 s, as if a run had taken no time; `trace stats` says it.
    if (out.state.events == 0 && out.counters.empty()) {
      header_->setText(header_->text() + QStringLiteral("<br><span style=\"color:#c03030\">") +
                       tr("no events recorded: nothing to show or analyse") +
                       QStringLiteral("</span>"));
    }
    showAnalysis();
    showCounters(out.counters);
    // The lane draws what the prediction was made for: the plan as the
    // engines ran it, where the store has it; else the run's own plan,
    // unless the engines ran it without a prediction (a calibration
    // missing): the plan as written is not what they ran (they scale the
    // model to their size), and its lane beside their steps misled.
    const bool engine_run = trace::trained_by_engine(out.run);
    if (!out.predicted_plan_json.empty()) {
      startPrediction(out.predicted_plan_json, out.step_starts);
    } else if (!out.run.plan_json.empty() && (out.has_prediction || !engine_run)) {
      startPrediction(out.run.plan_json, out.step_starts);
    }
    emit analysisReady({});
    critical_path_->setStore(path_);
    checkIntegrity();
  });
}

// After the analysis, so that what a user came for is shown first: reading
// every page takes about as long again.
void RunView::checkIntegrity() {
  const std::uint64_t job = job_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString()] {
    const Status verified = trace::verify_store(path);
    return verified ? QString() : q(verified.message());
  }).then(this, [this, job](const QString& damage) {
    if (job != job_) return;  // another store was opened since
    damage_ = damage;
    integrity_checked_ = true;
    if (!damage.isEmpty()) {
      header_->setText(header_->text() + QStringLiteral("<br><span style=\"color:#c03030\">") +
                       damage.toHtmlEscaped() + QStringLiteral("</span>"));
    }
    emit integrityChecked(damage);
  });
}

void RunView::predictAgain() {
  predictWith(
      [](const trace::TraceReader& reader) -> Result<trace::PredictedStep> {
        auto catalog = PresetCatalog::load_default();
        if (!catalog) return catalog.error();
        return calib::predict_recorded_run(*catalog, reader);
      },
      {});
}

void RunView::predictWithPlan(const Plan& plan, const QString& name) {
  predictWith(
      [plan, source = name.toStdString()](
          const trace::TraceReader& reader) -> Result<trace::PredictedStep> {
        if (auto why = calib::why_no_plan_holds(reader)) return Error{*why};
        return calib::predict_plan(plan, source, static_cast<int>(reader.ranks().size()));
      },
      name);
}

void RunView::predictWith(Predict predict, const QString& plan_name) {
  if (path_.isEmpty() || !analysis_) {
    emit predictionReady({}, tr("no run is open"));
    return;
  }
  const std::uint64_t job = job_;
  const std::uint64_t prediction = ++prediction_job_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString(), analysis = analysis_,
                             predict = std::move(predict)] {
    PredictedAgain out;
    auto reader = trace::TraceReader::open(path);
    if (!reader) {
      out.error = q(reader.message());
      return out;
    }
    auto prediction = predict(*reader.value());
    if (!prediction) {
      out.error = q(prediction.message());
      return out;
    }
    out.cluster =
        q(prediction->cluster.value_or("")) +
        (prediction->calibrated.value_or(false) ? QStringLiteral(" (calibrated)") : QString());
    for (const std::string& note : prediction->notes.value_or(std::vector<std::string>{}))
      out.notes << q(note);
    auto compared = trace::compare_with_prediction(*reader.value(), analysis->ranks, *prediction);
    if (!compared) {
      out.error = q(compared.message());
    } else {
      // The copy is made here, off the GUI thread.
      auto again = std::make_shared<trace::RunAnalysis>(*analysis);
      again->prediction = std::move(compared).value();
      out.analysis = std::move(again);
    }
    return out;
  }).then(this, [this, job, prediction, plan_name](PredictedAgain out) {
    if (job != job_) return;  // another store was opened since
    // Another prediction was asked for since: the last asked is shown, not
    // the last to end.
    if (prediction != prediction_job_) return;
    if (out.error.isEmpty() && out.analysis) {
      analysis_ = std::move(out.analysis);
      predicted_again_on_ = out.cluster;
      predicted_again_notes_ = out.notes;
      predicted_from_plan_ = plan_name;
      showAnalysis();
      tabs_->setCurrentWidget(prediction_table_);
    }
    emit predictionReady(out.cluster, out.error);
  });
}

void RunView::startPrediction(const std::string& plan_json,
                              const std::vector<std::int64_t>& step_starts) {
  // The planner's step for the run's own plan, as a lane group under the
  // measured ones: from the start of each measured step, on the run's clock
  // (one step from zero when the run recorded no steps).
  const std::uint64_t job = job_;
  QtConcurrent::run(&jobs_, [plan_json, step_starts] {
    std::pair<QString, QString> out;  // store path, error
    const auto j = parse_json_text(plan_json);
    if (j.is_discarded()) {
      out.second = QStringLiteral("the run's plan is not JSON");
      return out;
    }
    auto plan = plan_from_json(j, "run plan");
    if (!plan) {
      out.second = q(plan.message());
      return out;
    }
    static QTemporaryDir dir;  // lives as long as the app: the widget reads it
    static std::atomic<int> counter{0};
    const QString path = dir.filePath(QStringLiteral("predicted-%1.cstrace").arg(++counter));
    auto written = cs::plan::write_predicted_timeline(plan.value(), path.toStdString(), step_starts);
    if (!written) {
      out.second = q(written.message());
    } else {
      out.first = path;
    }
    return out;
  }).then(this, [this, job, aligned = !step_starts.empty()](std::pair<QString, QString> out) {
    auto remove_store = [](const QString& store) {
      for (const char* suffix : {"", "-wal", "-shm"})
        QFile::remove(store + suffix);
    };
    if (job != job_) {  // another store was opened since: this one is shown nowhere
      if (!out.first.isEmpty()) remove_store(out.first);
      return;
    }
    predicted_label_->setText(
        out.first.isEmpty() ? tr("Predicted step (planner): %1").arg(out.second)
        : aligned           ? tr("Predicted step (planner), from each measured step's start")
                            : tr("Predicted step (planner), one step from zero"));
    predicted_label_->show();
    if (!out.first.isEmpty()) {
      // The store two back is shown nowhere now (the lanes let go of the
      // last one once this one is open): each run opened left its own in
      // the temporary folder until the app ended.
      if (predicted_paths_.size() >= 2) {
        remove_store(predicted_paths_.front());
        predicted_paths_.pop_front();
      }
      predicted_paths_.push_back(out.first);
      predicted_aligned_ = aligned;
      if (aligned)
        predicted_->followWindow(timeline_->fullRange(), timeline_->window(),
                                 timeline_->timeOrigin());
      else
        predicted_->stopFollowing();
      predicted_->setStore(out.first);
      setPredictedShown(true);
    }
  });
}

void RunView::setPredictedShown(bool shown) {
  predicted_area_->setVisible(shown);
  timelines_layout_->setStretchFactor(predicted_area_, shown ? 1 : 0);
}

void RunView::fillSummaries(const trace::RunAnalysis& a,
                            std::optional<trace::TimeRange> range) {
  // To the microsecond, as the range's heading: three figures read a range
  // over a 265 us kernel at 3.37 s "3.37 s – 3.37 s".
  summaries_scope_->setText(range ? tr("In the selected range %1 – %2 (Esc clears it)")
                                        .arg(instant(range->start_ns - timeline_->timeOrigin()),
                                             instant(range->end_ns - timeline_->timeOrigin()))
                                  : tr("The whole run"));
  instances_->setRowCount(0);
  instances_note_->clear();
  // Kernels.
  kernel_model_->clear();
  kernel_model_->setHorizontalHeaderLabels({tr("name"), tr("kind"), tr("category"), tr("count"),
                                            tr("total"), tr("mean"), tr("median"), tr("min"),
                                            tr("max"), tr("stddev"), tr("share %")});
  for (const trace::KernelStats& k : a.kernels) {
    kernel_model_->appendRow(
        {nameCell(k.name), textCell(q(std::string(to_string(k.kind)))),
         textCell(q(std::string(to_string(k.category)))),
         cell(QString::number(k.count), double(k.count)), cell(ns(k.total_ns), double(k.total_ns)),
         cell(seconds(k.mean_ns * 1e-9), k.mean_ns), cell(seconds(k.median_ns * 1e-9), k.median_ns),
         cell(ns(k.min_ns), double(k.min_ns)), cell(ns(k.max_ns), double(k.max_ns)),
         cell(seconds(k.stddev_ns * 1e-9), k.stddev_ns),
         cell(QString::number(k.share * 100, 'f', 1), k.share)});
  }
  kernel_view_->resizeColumnsToContents();
  kernel_view_->setColumnWidth(0, std::min(kernel_view_->columnWidth(0), kNameColumnWidth));
  kernel_proxy_->sort(4, Qt::DescendingOrder);

  // Communication, with the nccl-tests bus bandwidth.
  collective_model_->clear();
  collective_model_->setHorizontalHeaderLabels(
      {tr("collective"), tr("dtype"), tr("bytes"), tr("ranks"), tr("count"), tr("total"),
       tr("mean"), tr("algbw GB/s"), tr("busbw GB/s"), tr("transfer"), tr("its busbw GB/s")});
  const QString transfer =
      tr("The mean includes the time a rank waited for its peers. Transfer: each call's shortest "
         "duration across the ranks that made it (the rank that joined last, which waited for "
         "none), median over the calls, as nccl-tests times a collective after a barrier.");
  for (int column : {6, 9, 10})
    collective_model_->horizontalHeaderItem(column)->setToolTip(transfer);
  for (const trace::CollectiveStats& c : a.collectives) {
    QStandardItem* name = nameCell(c.name);
    name->setData(int(c.collective), Qt::UserRole + 1);
    name->setData(qlonglong(c.bytes), Qt::UserRole + 2);
    collective_model_->appendRow(
        {name, textCell(q(std::string(to_string(c.dtype)))),
         cell(c.bytes > 0 ? q(format_bytes(double(c.bytes))) : tr("unknown"), double(c.bytes)),
         cell(QString::number(c.ranks), c.ranks), cell(QString::number(c.count), double(c.count)),
         cell(ns(c.total_ns), double(c.total_ns)), cell(seconds(c.mean_ns * 1e-9), c.mean_ns),
         // Without a size there is no bandwidth: "-", as trace stats says, not 0.
         cell(c.bytes > 0 ? QString::number(c.algbw_gbps, 'f', 2) : tr("-"), c.algbw_gbps),
         cell(c.bytes > 0 ? QString::number(c.busbw_gbps, 'f', 2) : tr("-"), c.busbw_gbps),
         cell(c.transfer_median_ns > 0 ? seconds(c.transfer_median_ns * 1e-9) : tr("-"),
              c.transfer_median_ns),
         cell(c.transfer_busbw_gbps > 0 ? QString::number(c.transfer_busbw_gbps, 'f', 2) : tr("-"),
              c.transfer_busbw_gbps)});
  }
  collective_view_->resizeColumnsToContents();
  collective_view_->setColumnWidth(0,
                                   std::min(collective_view_->columnWidth(0), kNameColumnWidth));
  collective_proxy_->sort(5, Qt::DescendingOrder);

  // Calls and ranges, timed by name as Nsight Systems' cuda_api_sum and nvtx_sum.
  auto fill_timed = [this](const SummaryTable& t, const std::vector<trace::KernelStats>& rows,
                           const QString& share_tip) {
    t.model->clear();
    t.model->setHorizontalHeaderLabels({tr("name"), tr("count"), tr("total"), tr("mean"),
                                        tr("median"), tr("min"), tr("max"), tr("stddev"),
                                        tr("share %")});
    t.model->horizontalHeaderItem(8)->setToolTip(share_tip);
    for (const trace::KernelStats& k : rows) {
      t.model->appendRow(
          {nameCell(k.name), cell(QString::number(k.count), double(k.count)),
           cell(ns(k.total_ns), double(k.total_ns)), cell(seconds(k.mean_ns * 1e-9), k.mean_ns),
           cell(seconds(k.median_ns * 1e-9), k.median_ns), cell(ns(k.min_ns), double(k.min_ns)),
           cell(ns(k.max_ns), double(k.max_ns)), cell(seconds(k.stddev_ns * 1e-9), k.stddev_ns),
           cell(QString::number(k.share * 100, 'f', 1), k.share)});
    }
    t.view->resizeColumnsToContents();
    t.view->setColumnWidth(0, std::min(t.view->columnWidth(0), kNameColumnWidth));
    t.proxy->sort(2, Qt::DescendingOrder);
  };
  fill_timed(api_calls_, a.api_calls, tr("Of all calls' time"));
  fill_timed(ranges_, a.annotations,
             tr("Of all ranges' time; a range inside another counts in both"));

  // Copies and sets by kind, with their bytes (cuda_gpu_mem_time_sum and _size_sum).
  copies_.model->clear();
  copies_.model->setHorizontalHeaderLabels({tr("operation"), tr("count"), tr("total"), tr("mean"),
                                            tr("median"), tr("max"), tr("bytes"), tr("mean size"),
                                            tr("max size"), tr("GB/s"), tr("share %")});
  copies_.model->horizontalHeaderItem(9)->setToolTip(
      tr("The bytes over the time of all of them (10^9 bytes per second)"));
  for (const trace::MemoryOpStats& m : a.memory_ops) {
    const bool sized = m.total_bytes > 0;
    auto bytes = [sized](double b) { return sized ? q(format_bytes(b)) : QStringLiteral("-"); };
    copies_.model->appendRow(
        {nameCell(m.time.name), cell(QString::number(m.time.count), double(m.time.count)),
         cell(ns(m.time.total_ns), double(m.time.total_ns)),
         cell(seconds(m.time.mean_ns * 1e-9), m.time.mean_ns),
         cell(seconds(m.time.median_ns * 1e-9), m.time.median_ns),
         cell(ns(m.time.max_ns), double(m.time.max_ns)),
         cell(bytes(double(m.total_bytes)), double(m.total_bytes)),
         cell(bytes(m.mean_bytes), m.mean_bytes),
         cell(bytes(double(m.max_bytes)), double(m.max_bytes)),
         cell(sized && m.time.total_ns > 0 ? QString::number(m.throughput_gbps, 'f', 2)
                                           : QStringLiteral("-"),
              m.throughput_gbps),
         cell(QString::number(m.time.share * 100, 'f', 1), m.time.share)});
  }
  copies_.view->resizeColumnsToContents();
  copies_.proxy->sort(2, Qt::DescendingOrder);
}

QString counterPointTip(const CounterLine& line, double x_ms) {
  const auto after = std::upper_bound(line.points.begin(), line.points.end(), x_ms,
                                      [](double x, const QPointF& p) { return x < p.x(); });
  const QString title = (line.bytes ? counterTitle(line.title) : line.title).toHtmlEscaped();
  if (after == line.points.begin())
    return RunView::tr("<b>%1</b><br>no sample before %2")
        .arg(title, q(format_time_ns(std::llround(x_ms * 1e6))));
  const std::size_t i = std::size_t(std::prev(after) - line.points.begin());
  return RunView::tr("<b>%1</b><br>%2 since %3")
      .arg(title, counterValueText(line.name, line.points[i].y()),
           q(format_time_ns(line.times_ns[i])));
}

// Past this many lines the Counters chart's legend names counters, not
// lines: 8 ranks of 2 counters made 16 entries that took the chart's room.
constexpr std::size_t kCounterLegendLines = 8;

// "ranks 0–7", "ranks 0, 2, 5", or "12 ranks" where a list would be long.
QString ranksText(std::vector<std::int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.size() == 1) return RunView::tr("rank %1").arg(ranks.front());
  if (ranks.back() - ranks.front() + 1 == std::int32_t(ranks.size()))
    return RunView::tr("ranks %1–%2").arg(ranks.front()).arg(ranks.back());
  if (ranks.size() > 4) return RunView::tr("%1 ranks").arg(ranks.size());
  QStringList each;
  for (std::int32_t r : ranks)
    each << QString::number(r);
  return RunView::tr("ranks %1").arg(each.join(QStringLiteral(", ")));
}

void RunView::showCounters(const std::vector<CounterLine>& lines) {
  const int index = tabs_->indexOf(counter_area_);
  if (lines.empty()) {
    if (index >= 0) tabs_->removeTab(index);
    counter_area_->hide();
    return;
  }
  auto* chart = new QChart;
  // The counters it draws by name: a fixed "GPU memory in use, allocated
  // bytes" stood over a CPU run's process memory, and over any other counter.
  QStringList names;
  for (const CounterLine& line : lines) {
    const QString name = line.bytes ? counterTitle(elidedName(line.name)) : elidedName(line.name);
    if (!names.contains(name)) names << name;
  }
  if (names.size() > 3) {
    const qsizetype more = names.size() - 3;
    names = names.mid(0, 3);
    names << tr("%n more", nullptr, int(more));
  }
  chart->setTitle(tr("Counters over the run (%1)").arg(names.join(QStringLiteral(", "))));
  auto* axis_x = new QValueAxis;
  axis_x->setTitleText(tr("ms from the trace's start"));
  chart->addAxis(axis_x, Qt::AlignBottom);
  // Counters of bytes on an axis of GiB, the others on one of their raw
  // values: on the right where both are drawn (a GPU's memory beside its
  // utilisation; one raw axis drew the percentages flat along 0).
  const bool any_bytes =
      std::any_of(lines.begin(), lines.end(), [](const CounterLine& l) { return l.bytes; });
  const bool any_values =
      std::any_of(lines.begin(), lines.end(), [](const CounterLine& l) { return !l.bytes; });
  QValueAxis* axis_bytes = nullptr;
  QValueAxis* axis_values = nullptr;
  if (any_bytes) {
    axis_bytes = new QValueAxis;
    axis_bytes->setObjectName(QStringLiteral("counter_axis_bytes"));
    axis_bytes->setTitleText(tr("GiB"));
    chart->addAxis(axis_bytes, Qt::AlignLeft);
  }
  if (any_values) {
    axis_values = new QValueAxis;
    axis_values->setObjectName(QStringLiteral("counter_axis_values"));
    axis_values->setTitleText(tr("value"));
    chart->addAxis(axis_values, any_bytes ? Qt::AlignRight : Qt::AlignLeft);
  }
  double x_hi = 1e-3, bytes_hi = 0, values_hi = 0;
  // Many lines: one legend entry per counter, its ranks' lines in shades of
  // the counter's colour, each line still named for its rank (its tooltip
  // says which, and the line under the pointer is drawn thicker).
  const bool grouped = lines.size() > kCounterLegendLines;
  std::vector<std::string> counters;  // as first seen
  for (const CounterLine& line : lines)
    if (std::find(counters.begin(), counters.end(), line.name) == counters.end())
      counters.push_back(line.name);
  std::vector<int> seen(counters.size(), 0);
  for (const CounterLine& line : lines) {
    auto* series = new QLineSeries;
    // In GiB: the name says no other unit.
    series->setName(line.bytes ? counterTitle(line.title) : line.title);
    const double scale = line.bytes ? 1.0 / double(1ULL << 30) : 1.0;
    double& y_hi = line.bytes ? bytes_hi : values_hi;
    // Steps: a counter holds its value until the next sample.
    for (std::size_t i = 0; i < line.points.size(); ++i) {
      const QPointF& p = line.points[i];
      if (i > 0) series->append(p.x(), line.points[i - 1].y() * scale);
      series->append(p.x(), p.y() * scale);
      x_hi = std::max(x_hi, p.x());
      y_hi = std::max(y_hi, p.y() * scale);
    }
    chart->addSeries(series);
    series->attachAxis(axis_x);
    series->attachAxis(line.bytes ? axis_bytes : axis_values);
    if (grouped) {
      const std::size_t k =
          std::size_t(std::find(counters.begin(), counters.end(), line.name) - counters.begin());
      const int ranks = int(std::count_if(
          lines.begin(), lines.end(), [&](const CounterLine& l) { return l.name == line.name; }));
      // Hues far apart for the counters (the golden angle), lightness from
      // dark to light across a counter's ranks. After addSeries: the
      // chart's theme colours a series as it is added.
      const int hue = int(210 + 137.5 * double(k)) % 360;
      const int lightness = ranks > 1 ? 70 + (110 * seen[k]) / (ranks - 1) : 125;
      ++seen[k];
      QPen pen = series->pen();
      pen.setColor(QColor::fromHsl(hue, 190, lightness));
      series->setPen(pen);
    }
    // Its value under the pointer in the counter's unit, at its sample's time
    // as the timeline gives it; the axis alone read raw milliseconds.
    connect(series, &QLineSeries::hovered, this,
            [this, line, series, width = series->pen().widthF()](const QPointF& at, bool on) {
              QPen pen = series->pen();
              pen.setWidthF(on ? width * 2 : width);
              series->setPen(pen);
              if (on)
                QToolTip::showText(QCursor::pos(), counterPointTip(line, at.x()), counter_chart_);
              else
                QToolTip::hideText();
            });
  }
  if (grouped) {
    const QList<QAbstractSeries*> all = chart->series();
    for (const std::string& counter : counters) {
      std::vector<std::int32_t> ranks;
      QLegendMarker* first = nullptr;
      for (std::size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].name != counter) continue;
        ranks.push_back(lines[i].rank);
        for (QLegendMarker* m : chart->legend()->markers(all[qsizetype(i)])) {
          if (first)
            m->setVisible(false);
          else
            first = m;
        }
      }
      const QString name = q(counter);
      if (first) {
        first->setLabel(tr("%1 · %2").arg(
            trace::counter_in_bytes(counter) ? counterTitle(name) : name, ranksText(ranks)));
      }
    }
  }
  setRoundTicks(axis_x, 0, x_hi);
  if (axis_bytes) setRoundTicks(axis_bytes, 0, std::max(bytes_hi, 1e-9));
  if (axis_values) setRoundTicks(axis_values, 0, std::max(values_hi, 1e-9));
  chart->legend()->setAlignment(Qt::AlignBottom);
  QChart* old = counter_chart_->chart();
  counter_chart_->setChart(chart);
  delete old;
  applyChartTheme(this);
  if (index < 0) tabs_->insertTab(tabs_->indexOf(stream_table_) + 1, counter_area_, tr("Counters"));
}

void RunView::showAnalysis() {
  const trace::RunAnalysis& a = *analysis_;
  std::vector<std::int32_t> stragglers = a.stragglers.stragglers;
  auto isStraggler = [&](std::int32_t rank) {
    return std::find(stragglers.begin(), stragglers.end(), rank) != stragglers.end();
  };

  // Per-rank stacked bars.
  auto* chart = new QChart;
  chart->setTitle(tr("Where each rank's time went (stragglers marked ⚠)"));
  auto* series = new QHorizontalStackedBarSeries;
  // The report's parts and colours (core/breakdown_parts.h).
  std::vector<QBarSet*> sets;
  for (const trace::BreakdownPart& part : trace::kBreakdownParts) {
    auto* set = new QBarSet(q(part.name));
    set->setColor(QColor(QString::fromLatin1(part.color)));
    set->setBorderColor(set->color());
    sets.push_back(set);
  }
  QStringList categories;
  double longest = 0;
  for (const trace::RankAnalysis& r : a.ranks) {
    for (std::size_t i = 0; i < sets.size(); ++i)
      *sets[i] << double(trace::kBreakdownParts[i].ns(r.total)) * 1e-6;
    longest = std::max(longest, double(r.total.span_ns) * 1e-6);
    categories << (isStraggler(r.rank) ? tr("rank %1 ⚠").arg(r.rank) : tr("rank %1").arg(r.rank));
  }
  for (QBarSet* set : sets)
    series->append(set);
  chart->addSeries(series);
  auto* axis_y = new QBarCategoryAxis;
  axis_y->append(categories);
  chart->addAxis(axis_y, Qt::AlignLeft);
  series->attachAxis(axis_y);
  auto* axis_x = new QValueAxis;
  // Short enough not to be elided in a docked view; the legend names the parts.
  axis_x->setTitleText(tr("ms per rank (the parts add up to its span)"));
  chart->addAxis(axis_x, Qt::AlignBottom);
  series->attachAxis(axis_x);
  setRoundTicks(axis_x, 0, std::max(1e-3, longest));
  chart->legend()->setAlignment(Qt::AlignBottom);
  QChart* old = chart_->chart();
  chart_->setChart(chart);
  delete old;
  // A row of text for each rank, the chart scrolling in its tab: 64 ranks
  // in its 230 px left each bar 2 px and drew their labels over each other.
  chart_->setMinimumHeight(std::max(230, 110 + 20 * int(a.ranks.size())));
  // A chart made after a switch to the dark theme came up white.
  applyChartTheme(this);

  // Ranks: the breakdown's figures, overlap and straggler verdicts.
  const QString median_step = tr("median step (all steps)");
  const QStringList rank_columns = {tr("rank"), tr("span"), tr("compute"), tr("exposed comm."),
                                    tr("hidden comm."), tr("overlap %"),
                                    // Time, as trace stats and the report name
                                    // it (a bare "memory" read as bytes).
                                    tr("exposed memory"), tr("idle"), median_step,
                                    tr("launch delay (median)"),
                                    tr("kernels shorter than their launch"), tr("straggler")};
  rank_table_->clear();
  rank_table_->setColumnCount(int(rank_columns.size()));
  rank_table_->setHorizontalHeaderLabels(rank_columns);
  // Not the Predicted tab's step, which leaves the warm-up out.
  rank_table_->horizontalHeaderItem(int(rank_columns.indexOf(median_step)))
      ->setToolTip(
          tr("The median of all the rank's steps, the warm-up included, as the straggler test "
             "counts them. The Predicted vs measured tab's median step leaves the warm-up out."));
  rank_table_->setRowCount(int(a.ranks.size()));
  for (int row = 0; row < int(a.ranks.size()); ++row) {
    const trace::RankAnalysis& r = a.ranks[std::size_t(row)];
    const trace::Breakdown& b = r.total;
    const trace::RankStraggler* s = nullptr;
    for (const trace::RankStraggler& candidate : a.stragglers.ranks) {
      if (candidate.rank == r.rank) s = &candidate;
    }
    const QStringList values = {
        QString::number(r.rank),
        ns(b.span_ns),
        ns(b.compute_ns),
        ns(b.exposed_communication_ns),
        ns(b.overlap_ns),
        QString::number(b.overlap_percent(), 'f', 1),
        ns(b.exposed_memory_ns),
        ns(b.idle_ns),
        s && s->step_ns > 0 ? seconds(s->step_ns * 1e-9) : QStringLiteral("—"),
        // HTA's launch statistics, where runtime calls launched GPU work.
        r.launches.launches > 0 ? seconds(r.launches.delay_median_ns * 1e-9) : tr("—"),
        r.launches.launches > 0
            ? tr("%1 of %2").arg(r.launches.short_kernels).arg(r.launches.launches)
            : tr("—"),
        s && s->straggler ? tr("yes: %1").arg(q(s->reason)) : tr("no")};
    for (int c = 0; c < int(values.size()); ++c) {
      QTableWidgetItem* item = tableCell(values[c]);
      if (s && s->straggler) item->setBackground(QColor(0xff, 0xd6, 0xd6));
      rank_table_->setItem(row, c, item);
    }
  }
  rank_table_->resizeColumnsToContents();

  // Streams: each one's idle time by cause (HTA's idle time breakdown).
  const QStringList stream_columns = {tr("rank"),       tr("stream"),      tr("events"),
                                      tr("span"),       tr("busy"),        tr("idle %"),
                                      tr("host wait"),  tr("kernel wait"), tr("other idle"),
                                      tr("queue mean"), tr("queue max")};
  stream_table_->clear();
  stream_table_->setColumnCount(int(stream_columns.size()));
  stream_table_->setHorizontalHeaderLabels(stream_columns);
  int stream_rows = 0;
  for (const trace::RankAnalysis& r : a.ranks)
    stream_rows += int(r.streams.size());
  stream_table_->setRowCount(stream_rows);
  int stream_row = 0;
  for (const trace::RankAnalysis& r : a.ranks) {
    for (const trace::StreamIdle& st : r.streams) {
      const QStringList values = {
          QString::number(r.rank),
          elidedName(st.name),
          QString::number(st.events),
          ns(st.span_ns),
          ns(st.busy_ns),
          st.span_ns > 0
              ? QString::number(100.0 * double(st.idle_ns()) / double(st.span_ns), 'f', 1)
              : tr("—"),
          ns(st.idle_host_wait_ns),
          ns(st.idle_kernel_wait_ns),
          ns(st.idle_other_ns),
          st.launched > 0 ? QString::number(st.queue_mean, 'f', 1) : tr("—"),
          st.launched > 0 ? QString::number(st.queue_max) : tr("—")};
      for (int c = 0; c < int(values.size()); ++c)
        stream_table_->setItem(stream_row, c, tableCell(values[c]));
      ++stream_row;
    }
  }
  stream_table_->resizeColumnsToContents();

  // A range selected before the whole run's answer came keeps its tables.
  if (range_analysis_ && timeline_->selectedRange())
    fillSummaries(*range_analysis_, timeline_->selectedRange());
  else
    fillSummaries(a, std::nullopt);

  // Predicted against measured, with the error.
  prediction_table_->clear();
  prediction_table_->setColumnCount(4);
  prediction_table_->setHorizontalHeaderLabels(
      {tr("part"), tr("predicted"), tr("measured"), tr("error %")});
  prediction_table_->setRowCount(0);
  if (!a.prediction) {
    prediction_table_->setRowCount(1);
    QString text;
    if (!a.prediction_error.empty()) {
      text = tr("The prediction this run records does not read: %1. Tools ▸ Predict the open run "
                "again makes a new one.")
                 .arg(q(a.prediction_error));
    } else if (!not_predictable_.isEmpty()) {
      // Not sent to Tools ▸ Predict the open run again, which can only refuse it.
      // A program of the user's own is held against the plan it ran.
      text = tr("This store records no prediction of its step, and none can be made of it: %1. "
                "Tools ▸ Hold the open run against the current plan compares it with the plan it "
                "ran.")
                 .arg(not_predictable_);
    } else {
      text =
          tr("This run records no prediction of its step. Tools ▸ Predict the open run again "
             "makes one on this machine's calibration (Tools ▸ Calibrate this machine… first, "
             "where there is none).");
    }
    prediction_table_->setItem(0, 0, tableCell(text));
    prediction_table_->setSpan(0, 0, 1, 4);
  } else {
    const trace::PredictionComparison& p = *a.prediction;
    // As `trace stats` says them: the error of the prediction against the
    // measurement (a probe's too, to the unit); a part the planner does not
    // predict is not a -100 % error.
    auto add_row = [&](const QString& name, double predicted, std::optional<double> measured,
                       bool probe = false, bool in_bytes = false) {
      auto text = [&](double v) { return in_bytes ? q(format_bytes(v)) : seconds(v); };
      const int row = prediction_table_->rowCount();
      prediction_table_->insertRow(row);
      prediction_table_->setItem(row, 0, tableCell(name));
      prediction_table_->setItem(row, 1, tableCell(text(predicted)));
      prediction_table_->setItem(row, 2, tableCell(measured ? text(*measured) : tr("—")));
      QString error = tr("—");
      if (measured && !(predicted > 0) && *measured > 0) {
        error = tr("not predicted");
      } else if (measured && !(*measured > 0) && predicted > 0) {
        error = tr("not measured");
      } else if (measured && probe && *measured > 0) {
        // The model's error against the measurement, to a tenth of a
        // percent as the other rows give it ("-37" beside "-51.7" read as
        // two formats).
        error = QString::asprintf("%+.1f", 100 * (predicted - *measured) / *measured);
        if (const std::string factor = model_error_factor(predicted, *measured); !factor.empty())
          error += QStringLiteral(" (%1)").arg(q(factor));
      } else if (measured && *measured > 0) {
        error = QString::asprintf("%+.1f", 100 * (predicted - *measured) / *measured);
      }
      prediction_table_->setItem(row, 3, tableCell(error));
    };
    auto add_line = [&](const QString& text) {  // a row of text across the columns
      const int row = prediction_table_->rowCount();
      prediction_table_->insertRow(row);
      prediction_table_->setItem(row, 0, tableCell(text));
      prediction_table_->setSpan(row, 0, 1, 4);
    };
    if (!predicted_from_plan_.isEmpty())
      add_line(tr("Predicted from %1 (on %2)").arg(predicted_from_plan_, predicted_again_on_));
    else if (!predicted_again_on_.isEmpty())
      add_line(tr("Predicted now, on %1, not as the run recorded it").arg(predicted_again_on_));
    for (const QString& note : predicted_again_notes_)
      add_line(QStringLiteral("    ") + note);
    add_row(tr("step (mean)"), p.predicted_step_s, p.measured_step_s);
    for (const trace::PredictedVsMeasured& r : p.categories) add_row(q(r.name), r.predicted_s, r.measured_s);
    for (const trace::PredictedVsMeasured& r : p.parts) add_row(q(r.name), r.predicted_s, r.measured_s);
    if (!p.breakdown.empty()) {
      const std::string note = trace::mean_against_median_note(
          p.measured_step_s, p.measured_step_median_s, p.critical_rank);
      if (!note.empty()) add_line(q(note));
      // Each part of the step on the critical rank, its median step: the
      // comparison that names the largest disagreement.
      add_line(tr("Each part of the step (rank %1: of the stage the planner timed, the most compute; median of its %2)")
                   .arg(p.critical_rank)
                   .arg(QString::fromStdString(trace::describe_steps(p.critical_steps, p.critical_warm_up))));
      // Which steps count, beside the Ranks tab's median of them all.
      add_row(p.critical_warm_up > 0
                  ? tr("step (median past the warm-up, %1 steps)").arg(p.critical_steps)
                  : tr("step (median of %1 steps)").arg(p.critical_steps),
              p.predicted_step_s, p.measured_step_median_s);
      prediction_table_->item(prediction_table_->rowCount() - 1, 0)
          ->setToolTip(tr("The median of rank %1's %2. The Ranks tab's median step counts "
                          "every step, the warm-up included.")
                           .arg(p.critical_rank)
                           .arg(q(trace::describe_steps(p.critical_steps, p.critical_warm_up))));
      for (std::size_t i = 0; i < p.breakdown.size(); ++i) {
        const trace::PredictedVsMeasured& r = p.breakdown[i];
        const bool largest = int(i) == p.largest;
        add_row(q(r.name) + (largest ? tr("  ← largest disagreement") : QString()), r.predicted_s,
                r.measured_s);
      }
      add_line(q(p.verdict) + QStringLiteral("."));
    }
    if (!p.memory.empty()) {
      // The planner's memory per device against the run's counters.
      add_line(
          tr("Memory per device: predicted for the most loaded stage, measured as the "
             "largest sample of any rank"));
      for (const trace::MemoryVsMeasured& m : p.memory) {
        if (m.part) {  // the whole's parts, of its rank
          add_row(QStringLiteral("    ") + q(trace::memory_row_label(m)), m.predicted_bytes,
                  m.measured_bytes, false, true);
          continue;
        }
        if (m.stage >= 0) {  // a pipeline's end stage, on the largest of its ranks
          const QString what = QStringLiteral("    ") + q(trace::memory_row_label(m));
          add_row(
              m.measured_bytes
                  ? tr("%1 (\"%2\" of rank %3)").arg(what, q(m.counter), QString::number(m.rank))
                  : tr("%1 (no counter sampled it)").arg(what),
              m.predicted_bytes, m.measured_bytes, false, true);
          continue;
        }
        const QString what = m.name == "allocated" ? tr("memory allocated by the process")
                                                   : tr("memory in use on the device");
        add_row(m.measured_bytes
                    ? tr("%1 (\"%2\" of rank %3)").arg(what, q(m.counter), QString::number(m.rank))
                    : tr("%1 (no counter sampled it)").arg(what),
                m.predicted_bytes, m.measured_bytes, false, true);
      }
    } else if (!p.memory_note.empty()) {
      add_line(tr("Memory per device: %1.").arg(q(p.memory_note)));
    }
    if (const auto& m = p.machine) {
      // The probe each rank ran before its first step, against the model.
      const MachineProbeShape& shape = m->measured.shape;
      add_line(tr("The machine, probed before the first step"));
      if (m->gemm_ratio() > 0) {
        add_row(tr("probe: GEMM %1 x %2 → %3 %4")
                    .arg(shape.tokens())
                    .arg(shape.width)
                    .arg(shape.out())
                    .arg(q(shape.precision)),
                m->predicted.gemm_seconds, m->measured.gemm_seconds, true);
      }
      if (m->loop_ratio() > 0) {
        add_row(tr("probe: layer-norm backward, %1 elements")
                    .arg(q(format_count(static_cast<double>(shape.loop_elements())))),
                m->predicted.loop_seconds, m->measured.loop_seconds, true);
      }
      if (m->all_reduce_ratio() > 0) {
        add_row(tr("probe: all-reduce %1 over %2 ranks")
                    .arg(q(format_bytes(static_cast<double>(shape.all_reduce_bytes))))
                    .arg(shape.ranks),
                m->predicted.all_reduce_seconds, m->measured.all_reduce_seconds, true);
      }
      if (m->drifted()) {
        add_line(tr("A probe is more than 15 % from the model: the machine is not as it was "
                    "calibrated (other work, another speed), or the model's rate for that operation "
                    "is off. To tell which, calibrate again, then Tools ▸ Predict the open run "
                    "again."));
      }
    } else if (!p.machine_note.empty()) {
      add_line(tr("Machine probe: %1.").arg(q(p.machine_note)));
    }
  }
  prediction_table_->resizeColumnsToContents();
  // The lines across the columns (the verdict) need not widen the first one.
  prediction_table_->setColumnWidth(0, std::min(prediction_table_->columnWidth(0), 320));
  prediction_table_->resizeRowsToContents();  // the verdict wraps
}

void RunView::showDetails(const std::optional<trace::StoredEvent>& event, const QString& name,
                          const QString& lane, const QString& error, std::int64_t origin,
                          bool measured) {
  const bool keep_tab = measured && event && event->id == walked_event_;
  if (keep_tab) walked_event_ = 0;
  if (!error.isEmpty()) {
    details_->setPlainText(tr("The event could not be read: %1").arg(error));
    return;
  }
  details_event_.reset();
  if (!event) {
    ++link_job_;
    details_->clear();
    return;
  }
  const trace::Event& e = event->event;
  if (measured) details_event_ = event;
  // A name of thousands of characters (a templated kernel's) cut in the
  // heading, whole in the last row: it pushed the event's figures out of view.
  const QString heading = TimelineWidget::shortNameHtml(name);
  QString html = QStringLiteral("<h3>%1</h3><table>").arg(heading);
  auto row_html = [&html](const QString& key, const QString& value_html) {
    html += QStringLiteral("<tr><td><i>%1</i></td><td>%2</td></tr>")
                .arg(key.toHtmlEscaped(), value_html);
  };
  auto row = [&row_html](const QString& key, const QString& value) {
    row_html(key, value.toHtmlEscaped());
  };
  row(tr("rank"), QString::number(event->rank));
  const QString lane_shown = TimelineWidget::shortNameHtml(lane);
  row_html(tr("lane"), lane_shown);
  row(tr("kind"), q(std::string(to_string(e.kind))));
  row(tr("category"), q(std::string(to_string(e.category))));
  row(tr("start"), instant(e.start_ns - origin, 9));
  row(tr("end"), instant(e.end_ns - origin, 9));
  row(tr("duration"), ns(e.duration_ns()));
  // A GPU rank's host operation (a GEMM range, PyTorch's aten::mm) spans
  // its launches: its rates are those of the kernels it launched, read below.
  const bool rated_by_kernels = measured && e.flops > 0 && launchesGpuWork(*event);
  if (e.bytes > 0) {
    row(tr("bytes"), q(format_bytes(double(e.bytes))));
    if (e.duration_ns() > 0 && !rated_by_kernels) {
      row(tr("bandwidth"),
          q(format_rate(double(e.bytes) / (double(e.duration_ns()) * 1e-9), "B/s")));
    }
  }
  if (e.flops > 0) row(tr("work"), q(format_rate(e.flops, "FLOP")));
  if (e.flops > 0 && e.duration_ns() > 0 && !rated_by_kernels) {
    row(tr("FLOP/s"), q(format_rate(e.flops / (double(e.duration_ns()) * 1e-9), "FLOP/s")));
  }
  if (e.collective != trace::Collective::none) {
    row(tr("collective"), q(std::string(to_string(e.collective))));
    row(tr("data type"), q(std::string(to_string(e.dtype))));
    if (e.group_size > 0) row(tr("ranks"), QString::number(e.group_size));
  }
  if (e.peer >= 0) row(tr("peer"), QString::number(e.peer));
  if (e.step >= 0) row(tr("step"), QString::number(e.step));
  if (event->launch) {
    // As Nsight Systems' and the PyTorch profiler's kernel details give it.
    const trace::KernelLaunch& l = *event->launch;
    auto dims = [](const std::int64_t(&d)[3]) {
      return QStringLiteral("%1 × %2 × %3").arg(d[0]).arg(d[1]).arg(d[2]);
    };
    row(tr("grid"), tr("%1 (%2 blocks)").arg(dims(l.grid), q(format_count(double(l.blocks())))));
    row(tr("block"),
        tr("%1 (%2 threads)").arg(dims(l.block), q(format_count(double(l.threads_per_block())))));
    if (l.registers_per_thread >= 0)
      row(tr("registers per thread"), QString::number(l.registers_per_thread));
    if (l.shared_memory_bytes >= 0) {
      QString shared = q(format_bytes(double(l.shared_memory_bytes)));
      if (l.dynamic_shared_memory_bytes >= 0)
        shared = tr("%1 (%2 dynamic)")
                     .arg(shared, q(format_bytes(double(l.dynamic_shared_memory_bytes))));
      row(tr("shared memory per block"), shared);
    }
  }
  row(tr("correlation"), e.correlation != 0 ? QString::number(e.correlation) : tr("none"));
  row(tr("event id"), QString::number(event->id));
  if (heading != name.toHtmlEscaped()) row(tr("name"), name);
  if (lane_shown != lane.toHtmlEscaped()) row(tr("lane's name"), lane);
  html += QStringLiteral("</table>");
  // Launch and kernel share a correlation id (CUPTI's): a link goes across.
  if (measured && e.correlation != 0) {
    if (e.kind == trace::EventKind::api_call) {
      html += tr("<p><a href=\"correlated\">Show what this call ran on the GPU</a></p>");
    } else if (e.kind == trace::EventKind::kernel || e.kind == trace::EventKind::memcpy ||
               e.kind == trace::EventKind::memset || e.kind == trace::EventKind::collective ||
               e.kind == trace::EventKind::p2p) {  // NCCL's kernels are stored as collectives
      html += tr("<p><a href=\"correlated\">Show the call that launched it</a></p>");
    }
  }
  details_->setHtml(html);
  if (measured) linkCorrelated();
  ++rate_job_;
  if (rated_by_kernels) rateByKernels(*event);
  // A click on the timeline shows what it picked; a walk through the
  // instances keeps their list in front.
  if (!keep_tab) tabs_->setCurrentIndex(0);
}

void RunView::compareWith(const QString& other) {
  if (path_.isEmpty()) return;
  const std::uint64_t job = ++comparison_job_;
  QtConcurrent::run(&jobs_, [baseline = path_.toStdString(), other = other.toStdString()] {
    std::pair<std::optional<trace::RunComparison>, QString> out;
    // Each run is analysed again, over its steps where both record them
    // (this run's analysis on screen covers the whole trace).
    auto a = trace::TraceReader::open(baseline);
    if (!a) {
      out.second = q(a.message());
      return out;
    }
    auto b = trace::TraceReader::open(other);
    if (!b) {
      out.second = q(b.message());
      return out;
    }
    auto compared = trace::compare_stores(*a.value(), *b.value());
    if (!compared) {
      out.second = q(compared.message());
      return out;
    }
    out.first = std::move(compared).value();
    return out;
  }).then(this, [this, job, other](std::pair<std::optional<trace::RunComparison>, QString> out) {
    if (job != comparison_job_) return;
    if (!out.first) {
      emit comparisonReady(out.second);
      return;
    }
    const trace::RunComparison& c = *out.first;
    QTableWidget* t = comparison_table_;
    t->clear();
    t->setRowCount(0);
    t->setColumnCount(5);
    t->setHorizontalHeaderLabels(
        {tr("part, kernel or collective"), tr("count"), tr("this run"), tr("other run"),
         tr("change")});
    auto add_line = [t](const QString& text) {
      const int row = t->rowCount();
      t->insertRow(row);
      t->setItem(row, 0, tableCell(text));
      t->setSpan(row, 0, 1, 5);
    };
    auto change = [](double a_ns, double b_ns) {
      // Said, as the other cells are, not a bare "0" (both runs at 0 s).
      if (a_ns == b_ns) return tr("no change");
      const double d = b_ns - a_ns;
      const QString sign = d >= 0 ? QStringLiteral("+") : QString();
      // "(gone)" where the other run has none of it, as trace compare says
      // it (it read "(-100.0 %)").
      if (a_ns > 0 && b_ns == 0) return sign + ns(std::int64_t(std::llround(d))) + tr(" (gone)");
      return sign + ns(std::int64_t(std::llround(d))) +
             (a_ns > 0 ? QStringLiteral(" (%1%2 %)").arg(sign).arg(100 * d / a_ns, 0, 'f', 1)
                       : tr(" (new)"));
    };
    auto add_row = [&](const trace::ComparedFigure& f, bool counts) {
      const int row = t->rowCount();
      t->insertRow(row);
      t->setItem(row, 0, tableCell(elidedName(f.name)));
      t->setItem(row, 1,
                 tableCell(counts ? tr("%1 → %2").arg(f.a_count).arg(f.b_count) : QString()));
      t->setItem(row, 2, tableCell(ns(std::int64_t(std::llround(f.a_ns)))));
      t->setItem(row, 3, tableCell(ns(std::int64_t(std::llround(f.b_ns)))));
      t->setItem(row, 4, tableCell(change(f.a_ns, f.b_ns)));
    };
    // "1 rank, 1 step", as trace compare says them (it read "1 ranks").
    add_line(tr("Against %1 (%2, %3); figures %4")
                 .arg(QFileInfo(other).fileName(),
                      c.b_ranks == 1 ? tr("1 rank") : tr("%1 ranks").arg(c.b_ranks),
                      c.b_steps == 1 ? tr("1 step") : tr("%1 steps").arg(c.b_steps),
                      c.per_step ? tr("per rank and step") : tr("per rank, over the run")));
    if (c.a_step_ns > 0 && c.b_step_ns > 0) {
      add_row({trace::kComparedStepName, c.a_step_ns, c.b_step_ns}, false);
      t->item(t->rowCount() - 1, 0)
          ->setToolTip(
              tr("Each rank's median over all its steps, the warm-up included (as the Ranks tab's "
                 "median step), then the median over the ranks. The Predicted vs measured tab's "
                 "median step leaves the warm-up out."));
    }
    for (const trace::ComparedFigure& f : c.parts)
      add_row(f, false);
    // By kind first: a precision or library change renames the kernels.
    if (!c.operation_kinds.empty()) {
      add_line(tr("Compute by operation kind (kernel names change with precision and library)"));
      for (const trace::ComparedFigure& f : c.operation_kinds)
        add_row(f, true);
    }
    add_line(tr("Kernels whose time changed most"));
    for (std::size_t i = 0; i < std::min<std::size_t>(20, c.kernels.size()); ++i)
      add_row(c.kernels[i], true);
    auto add_list = [&](const QString& title, const std::vector<trace::ComparedFigure>& figures) {
      if (figures.empty()) return;
      add_line(title);
      for (std::size_t i = 0; i < std::min<std::size_t>(20, figures.size()); ++i)
        add_row(figures[i], true);
    };
    add_list(tr("Collectives whose time changed most"), c.collectives);
    add_list(tr("CUDA API calls whose time changed most"), c.api_calls);
    add_list(tr("Copies and sets whose time changed most"), c.memory_ops);
    add_list(tr("Annotation ranges whose time changed most"), c.annotations);
    t->resizeColumnsToContents();
    t->setColumnWidth(0, std::min(t->columnWidth(0), kNameColumnWidth));
    if (tabs_->indexOf(t) < 0) tabs_->addTab(t, tr("Compared with"));
    tabs_->setTabText(tabs_->indexOf(t), tr("Compared with %1").arg(QFileInfo(other).fileName()));
    tabs_->setCurrentWidget(t);
    emit comparisonReady({});
  });
}

namespace {

// Work a runtime call puts on the device (NCCL's kernels are stored as collectives).
bool isDeviceWork(trace::EventKind k) {
  return k == trace::EventKind::kernel || k == trace::EventKind::memcpy ||
         k == trace::EventKind::memset || k == trace::EventKind::collective ||
         k == trace::EventKind::p2p;
}

bool hasCorrelated(const trace::Event& e) {
  return e.correlation != 0 && (e.kind == trace::EventKind::api_call || isDeviceWork(e.kind));
}

// The event of `from`'s rank sharing its correlation id (CUPTI's) on the
// other side: a runtime call's device work, a device event's call. Read with
// a reader of its own, off the GUI thread. (event, or why none)
std::pair<std::optional<trace::StoredEvent>, QString> findCorrelated(
    const std::string& path, const trace::StoredEvent& from) {
  std::pair<std::optional<trace::StoredEvent>, QString> out;
  auto reader = trace::TraceReader::open(path);
  if (!reader) {
    out.second = q(reader.message());
    return out;
  }
  const trace::TraceReader& r = *reader.value();
  const bool to_device = from.event.kind == trace::EventKind::api_call;
  std::vector<trace::LaneId> lanes;
  for (const trace::LaneInfo& l : r.lanes_of(from.rank)) {
    if ((l.kind == trace::LaneKind::gpu_stream) == to_device) lanes.push_back(l.id);
  }
  auto linked = [&](const trace::StoredEvent& e) {
    if (e.id == from.id || e.event.correlation != from.event.correlation) return false;
    return to_device ? isDeviceWork(e.event.kind) : e.event.kind == trace::EventKind::api_call;
  };
  const trace::TimeRange all = r.time_range();
  Status read;
  if (to_device) {
    // The GPU runs it after the call began: the first one from there.
    read = r.for_each_event(lanes, from.event.start_ns, all.end_ns + 1,
                            [&](const trace::StoredEvent& e) {
                              if (!linked(e)) return true;
                              out.first = e;
                              return false;
                            });
  } else {
    // The call began before it ran: the last one up to its start. Calls run
    // their work within a second but for deep queues, so that second is
    // read first (a click in a store of millions of events stays quick).
    auto last_call = [&](std::int64_t from_ns) {
      return r.for_each_event(lanes, from_ns, from.event.start_ns + 1,
                              [&](const trace::StoredEvent& e) {
                                if (linked(e)) out.first = e;
                                return true;
                              });
    };
    constexpr std::int64_t kSecondNs = 1'000'000'000;
    read = last_call(std::max(all.start_ns, from.event.start_ns - kSecondNs));
    if (read && !out.first && from.event.start_ns - kSecondNs > all.start_ns)
      read = last_call(all.start_ns);
  }
  if (!read) {
    out.first.reset();
    out.second = q(read.message());
  } else if (!out.first) {
    out.second = RunView::tr("no event of rank %1 has correlation %2 on the %3 side")
                     .arg(from.rank)
                     .arg(from.event.correlation)
                     .arg(to_device ? RunView::tr("GPU") : RunView::tr("host"));
  }
  return out;
}

}  // namespace

void RunView::goToCorrelated() {
  if (!details_event_ || details_event_->event.correlation == 0) return;
  const trace::StoredEvent from = *details_event_;
  const std::uint64_t job = ++correlation_job_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString(), from] {
    return findCorrelated(path, from);
  }).then(this, [this, job](std::pair<std::optional<trace::StoredEvent>, QString> out) {
    if (job != correlation_job_) return;
    if (!out.first) {
      details_->append(tr("<p><i>%1</i></p>").arg(out.second.toHtmlEscaped()));
      emit correlatedShown(std::nullopt, out.second);
      return;
    }
    timeline_->selectEvent(out.first->id);
    emit correlatedShown(out.first->id, {});
  });
}

bool RunView::launchesGpuWork(const trace::StoredEvent& event) const {
  bool streams = false;
  for (int i = 0; i < timeline_->laneCount(); ++i) {
    if (timeline_->isCounterLane(i)) continue;  // its kind says nothing
    const trace::LaneInfo& l = timeline_->laneInfo(i);
    if (l.rank != event.rank || l.kind != trace::LaneKind::gpu_stream) continue;
    if (l.id.value == event.event.lane.value) return false;
    streams = true;
  }
  return streams;
}

void RunView::rateByKernels(const trace::StoredEvent& op) {
  const std::uint64_t job = rate_job_;
  QtConcurrent::run(
      &jobs_,
      [path = path_.toStdString(), op] {
        std::pair<std::optional<trace::OperationRate>, QString> out;
        auto reader = trace::TraceReader::open(path);
        if (!reader) {
          out.second = q(reader.message());
          return out;
        }
        auto presets = PresetCatalog::load_default();  // none: the rate without a % of peak
        auto rate = trace::gemm_rate_of(*reader.value(), op, presets ? &*presets : nullptr);
        if (!rate) {
          out.second = q(rate.message());
        } else {
          out.first = std::move(rate).value();
        }
        return out;
      })
      .then(this, [this, job, bytes = op.event.bytes](
                      std::pair<std::optional<trace::OperationRate>, QString> out) {
        if (job != rate_job_) return;
        if (!out.first) {
          details_->append(tr("<p><i>Its kernels could not be read: %1</i></p>")
                               .arg(out.second.toHtmlEscaped()));
        } else if (out.first->rate.count == 0) {
          details_->append(
              out.first->kernels == 0
                  ? tr("<p>No kernel it launched was recorded: how fast it ran on the GPU is not "
                       "known (its span is the host's, which launched the work).</p>")
                  : tr("<p>Only cuBLAS's split-K reduction it launched was recorded, not its GEMM "
                       "kernel (the trace lost it): how fast it ran on the GPU is not known.</p>"));
        } else {
          const trace::GemmRate& r = out.first->rate;
          const double seconds = double(r.time_ns) * 1e-9;
          QString text = out.first->kernels == 1
                             ? tr("Its kernel ran %1 on the GPU: %2")
                             : tr("Its %3 kernels ran %1 on the GPU: %2").arg(out.first->kernels);
          text = text.arg(ns(r.time_ns), q(format_rate(r.flops / seconds, "FLOP/s")));
          if (const auto percent = r.percent_of_peak()) {
            text += tr(", %1 % of the %2 preset's %3 peak (%4)")
                        .arg(*percent, 0, 'f', 1)
                        .arg(q(r.gpu), q(r.precision), q(format_rate(r.peak_flops, "FLOP/s")));
          }
          if (bytes > 0)
            text += tr("; its operands and result at %1")
                        .arg(q(format_rate(double(bytes) / seconds, "B/s")));
          details_->append(QStringLiteral("<p>%1.</p>").arg(text.toHtmlEscaped()));
        }
        emit kernelRateShown();
      });
}

void RunView::linkCorrelated() {
  const std::uint64_t job = ++link_job_;
  if (!details_event_ || !hasCorrelated(details_event_->event)) return;
  const trace::StoredEvent from = *details_event_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString(), from] {
    return findCorrelated(path, from);
  }).then(this, [this, job, from](std::pair<std::optional<trace::StoredEvent>, QString> out) {
    if (job != link_job_ || !out.first) return;  // none: the link above says why when asked
    timeline_->setLinkedEvent(out.first);
    const bool call = from.event.kind == trace::EventKind::api_call;
    const trace::StoredEvent& launch = call ? from : *out.first;
    const trace::StoredEvent& work = call ? *out.first : from;
    const QString latency = ns(work.event.start_ns - launch.event.start_ns);
    details_->append(
        call ? tr("<p>The GPU started it %1 after the call began (the dashed outline).</p>")
                   .arg(latency.toHtmlEscaped())
             : tr("<p>Launched %1 before it started, by the call in the dashed outline.</p>")
                   .arg(latency.toHtmlEscaped()));
  });
}

void RunView::analyseRange(std::optional<trace::TimeRange> range) {
  const std::uint64_t job = ++range_job_;
  if (!range) {
    // Only a range shown gives its tables back (Esc with none keeps the
    // instance list and the tables' order).
    const bool shown = range_analysis_.has_value();
    range_analysis_.reset();
    range_text_->clear();
    if (shown && analysis_) fillSummaries(*analysis_, std::nullopt);
    emit rangeReady({});
    return;
  }
  range_text_->setPlainText(tr("Analysing the range…"));
  QtConcurrent::run(&jobs_,
                    [path = path_.toStdString(), window = *range] {
                      std::pair<std::optional<trace::RunAnalysis>, QString> out;
                      auto reader = trace::TraceReader::open(path);
                      if (!reader) {
                        out.second = q(reader.message());
                        return out;
                      }
                      trace::AnalysisOptions options;
                      options.window = window;
                      options.per_step = false;
                      auto analysis = trace::analyze_run(*reader.value(), options);
                      if (!analysis) {
                        out.second = q(analysis.message());
                      } else {
                        out.first = std::move(analysis).value();
                      }
                      return out;
                    })
      .then(this, [this, job,
                   window = *range](std::pair<std::optional<trace::RunAnalysis>, QString> out) {
        if (job != range_job_) return;
        if (!out.first) {
          range_text_->setPlainText(tr("The range could not be analysed: %1").arg(out.second));
          emit rangeReady(out.second);
          return;
        }
        range_analysis_ = std::move(out.first);
        fillSummaries(*range_analysis_, window);
        QString html = tr("<h3>Range %1 – %2 (%3)</h3>")
                           .arg(instant(window.start_ns - timeline_->timeOrigin()),
                                instant(window.end_ns - timeline_->timeOrigin()),
                                ns(window.end_ns - window.start_ns));
        // The parts of the Summary's bars and the report's (core/breakdown_parts.h).
        html += tr("<table><tr><th>rank</th>");
        for (const trace::BreakdownPart& part : trace::kBreakdownParts)
          html += QStringLiteral("<th>%1</th>").arg(q(part.name));
        html += QStringLiteral("<th>%1</th></tr>").arg(q(trace::kEventsStartingName));
        for (const trace::RankAnalysis& r : range_analysis_->ranks) {
          html += QStringLiteral("<tr><td>%1</td>").arg(r.rank);
          for (const trace::BreakdownPart& part : trace::kBreakdownParts)
            html += QStringLiteral("<td>%1</td>").arg(seconds(double(part.ns(r.total)) * 1e-9));
          html += QStringLiteral("<td>%1</td></tr>").arg(r.total.events);
        }
        html += QStringLiteral("</table>");
        html += tr("<p>The columns of time add up to the range; compute and the communication "
                   "hidden under it make the compute of the Ranks tab. %1.</p>")
                    .arg(q(trace::kEventsStartingNote).toHtmlEscaped());
        if (!range_analysis_->kernels.empty()) {
          html += tr("<p>Top kernels in the range:</p><ol>");
          for (std::size_t i = 0; i < std::min<std::size_t>(5, range_analysis_->kernels.size());
               ++i) {
            const trace::KernelStats& k = range_analysis_->kernels[i];
            html += QStringLiteral("<li>%1 — %2 × %3</li>")
                        .arg(elidedName(k.name).toHtmlEscaped(), ns(k.total_ns),
                             QString::number(k.count));
          }
          html += QStringLiteral("</ol>");
        }
        range_text_->setHtml(html);
        emit rangeReady({});
      });
}

void RunView::showKernelInstances(int proxy_row) {
  showNamedInstances(kernel_proxy_, proxy_row);
}

void RunView::showNamedInstances(const QSortFilterProxyModel* proxy, int proxy_row) {
  const QModelIndex index = proxy->index(proxy_row, 0);
  if (!index.isValid()) return;
  const std::string name = index.data(Qt::UserRole).toString().toStdString();  // whole
  const std::uint64_t job = ++instance_job_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString(), name, range = timeline_->selectedRange()] {
    auto reader = trace::TraceReader::open(path);
    if (!reader) return Instances{{}, 0, q(reader.message())};
    const std::optional<trace::StringId> id = reader.value()->find_string(name);
    if (!id) return Instances{};
    return collectInstances(*reader.value(), range, [id = *id](const trace::StoredEvent& e) {
      return e.event.name.value == id.value;
    });
  }).then(this, [this, job](Instances out) {
    if (job != instance_job_) return;
    fillInstances(std::move(out.events), out.total, out.error);
  });
}

void RunView::showCollectiveInstances(int proxy_row) {
  const QModelIndex index = collective_proxy_->index(proxy_row, 0);
  if (!index.isValid()) return;
  const auto collective = trace::Collective(index.data(Qt::UserRole + 1).toInt());
  const std::int64_t bytes = index.data(Qt::UserRole + 2).toLongLong();
  const std::string name = index.data(Qt::UserRole).toString().toStdString();  // whole
  const std::uint64_t job = ++instance_job_;
  QtConcurrent::run(&jobs_, [path = path_.toStdString(), collective, bytes, name,
                             range = timeline_->selectedRange()] {
    auto reader = trace::TraceReader::open(path);
    if (!reader) return Instances{{}, 0, q(reader.message())};
    const trace::TraceReader& r = *reader.value();
    // A collective of unknown type is summarised under its kernel's name.
    return collectInstances(r, range, [&](const trace::StoredEvent& e) {
      if (e.event.kind == trace::EventKind::api_call) return false;
      return collective != trace::Collective::none
                 ? e.event.collective == collective && e.event.bytes == bytes
                 : e.event.category == trace::Category::communication &&
                       r.string(e.event.name) == name;
    });
  }).then(this, [this, job](Instances out) {
    if (job != instance_job_) return;
    fillInstances(std::move(out.events), out.total, out.error);
  });
}

void RunView::fillInstances(std::vector<trace::StoredEvent> events, std::int64_t total,
                            const QString& error) {
  instances_->setSortingEnabled(false);  // rows stay where they are put
  instances_->setRowCount(0);
  if (!error.isEmpty()) {
    instances_note_->setText(tr("The instances could not be read: %1").arg(error));
    instances_->setSortingEnabled(true);
    emit instancesReady(0, error);
    return;
  }
  instances_note_->setText(
      std::int64_t(events.size()) < total
          ? tr("%1 instances; the %2 longest listed").arg(total).arg(events.size())
          : total == 1 ? tr("1 instance")
                       : tr("%1 instances").arg(total));
  instances_->setRowCount(int(events.size()));
  const std::int64_t origin = timeline_->timeOrigin();
  for (int row = 0; row < int(events.size()); ++row) {
    const trace::StoredEvent& e = events[std::size_t(row)];
    QTableWidgetItem* rank = new NumberCell(QString::number(e.rank), e.rank);
    rank->setData(Qt::UserRole, qlonglong(e.id));
    instances_->setItem(row, 0, rank);
    // Relative to the run's start: doubles hold these exactly (epoch
    // nanoseconds would lose the last 8 bits).
    instances_->setItem(
        row, 1,
        new NumberCell(instant(e.event.start_ns - origin), double(e.event.start_ns - origin)));
    instances_->setItem(row, 2,
                        new NumberCell(ns(e.event.duration_ns()), double(e.event.duration_ns())));
    instances_->setItem(
        row, 3,
        new NumberCell(e.event.bytes > 0 ? q(format_bytes(double(e.event.bytes))) : QString(),
                       double(e.event.bytes)));
  }
  instances_->setSortingEnabled(true);  // in the order the header shows (by start at first)
  emit instancesReady(int(events.size()), {});
}

namespace {

// What an export reads, copied from the view so that the worker touches no
// widget: the store, the selected range of a range-only export, and the whole
// run's analysis when it has loaded (it is not computed twice).
struct ExportSource {
  std::string store;
  std::optional<trace::TimeRange> range;
  std::shared_ptr<const trace::RunAnalysis> analysis;
  // What the integrity check found, said in the report; none when it has
  // not finished yet, and the export checks the store itself.
  std::optional<std::string> damage;
};

std::string damageOf(const ExportSource& source) {
  if (source.damage) return *source.damage;
  const Status verified = trace::verify_store(source.store);
  return verified ? std::string() : verified.message();
}

// `gemm_rates`: with the report's GEMM rates, against the GPUs' peaks as
// `trace stats` gives them; the view's own analysis leaves them out (a pass
// it does not show), and so do the CSV tables.
Result<std::shared_ptr<const trace::RunAnalysis>> exportAnalysis(const trace::TraceReader& reader,
                                                                 const ExportSource& source,
                                                                 bool gemm_rates) {
  if (!source.range && source.analysis && (!gemm_rates || source.analysis->gemms))
    return source.analysis;
  std::optional<PresetCatalog> presets;  // none: the rates without a % of peak
  if (gemm_rates) {
    if (auto loaded = PresetCatalog::load_default()) presets = std::move(loaded).value();
  }
  const PresetCatalog* peaks = presets ? &*presets : nullptr;
  if (!source.range && source.analysis) {
    auto gemms = trace::gemm_rates(reader, std::nullopt, peaks);
    if (!gemms) return gemms.error();
    auto with = std::make_shared<trace::RunAnalysis>(*source.analysis);
    with->gemms = std::move(gemms).value();
    return std::shared_ptr<const trace::RunAnalysis>(std::move(with));
  }
  trace::AnalysisOptions options;
  options.window = source.range;
  options.gemm_rates = gemm_rates;
  options.presets = peaks;
  auto analysis = trace::analyze_run(reader, options);
  if (!analysis) return analysis.error();
  return std::make_shared<const trace::RunAnalysis>(std::move(analysis.value()));
}

// core's HTML report of the run (or the range): the CLI's report.
Result<QString> coreReportHtml(const ExportSource& source) {
  auto reader = trace::TraceReader::open(source.store);
  if (!reader) return reader.error();
  auto analysis = exportAnalysis(*reader.value(), source, /*gemm_rates=*/true);
  if (!analysis) return analysis.error();
  QTemporaryDir dir;
  const std::string core_path = dir.filePath(QStringLiteral("core.html")).toStdString();
  auto written = trace::export_html_report(*reader.value(), *analysis.value(), core_path,
                                           {source.range, damageOf(source)});
  if (!written) return written.error();
  auto text = readFile(core_path);
  if (!text) return text.error();
  return q(text.value());
}

QString withSection(QString html, const QString& section) {
  const int body_end = html.lastIndexOf(QStringLiteral("</body>"));
  html.insert(body_end >= 0 ? body_end : html.size(), section);
  return html;
}

// A4 across: the core report's tables (11 columns in "Where the time
// went") broke their headers mid-word ("compu|te") in portrait's 700 px.
QPageLayout pdfPageLayout() {
  return QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Landscape, QMarginsF(12, 12, 12, 12),
                     QPageLayout::Millimeter);
}
constexpr int kPdfDpi = 96;

// The plan the run recorded, as one row per part (cluster, workload,
// parallel, precision) of "key value" pairs that wrap: its indented JSON
// took a page and a half and ran off the margin.
QString planTable(const QString& json_text) {
  const QJsonDocument plan = QJsonDocument::fromJson(json_text.toUtf8());
  if (!plan.isObject()) return {};
  auto scalar = [](const QJsonValue& v) -> QString {
    if (v.isDouble()) return QString::number(v.toDouble(), 'g', 6);
    if (v.isBool()) return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    if (v.isString()) return v.toString();
    if (v.isNull()) return QStringLiteral("none");
    const QJsonObject o = v.toObject();
    for (const char* name : {"display_name", "name"}) {
      if (o.contains(QLatin1String(name))) return o.value(QLatin1String(name)).toString();
    }
    return QString::fromUtf8(v.isArray() ? QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact)
                                         : QJsonDocument(o).toJson(QJsonDocument::Compact));
  };
  QString rows;
  const QJsonObject top = plan.object();
  for (auto it = top.begin(); it != top.end(); ++it) {
    if (it.key() == QLatin1String("kind")) continue;
    QStringList pairs;
    if (it.value().isObject()) {
      const QJsonObject part = it.value().toObject();
      for (auto f = part.begin(); f != part.end(); ++f)
        pairs
            << QStringLiteral("%1&nbsp;<b>%2</b>").arg(f.key(), scalar(f.value()).toHtmlEscaped());
    } else {
      pairs << scalar(it.value()).toHtmlEscaped();
    }
    rows += QStringLiteral("<tr><th>%1</th><td>%2</td></tr>\n")
                .arg(it.key().toHtmlEscaped(), pairs.join(QStringLiteral(" · ")));
  }
  return QStringLiteral("<p><b>Plan</b></p>\n<table>\n%1</table>\n").arg(rows);
}

}  // namespace

// The PDF report: the core report's tables through QTextDocument, its inline
// SVG charts giving way to pictures (QTextDocument draws no SVG).
QString RunView::pdfReportDocument(QTextDocument& document, QString html, const QImage& breakdown,
                                   const QImage& timeline) {
  const QSizeF page = pdfPageLayout().paintRectPixels(kPdfDpi).size();
  // Pictures as wide as they were drawn, at most the page's width less the
  // body's margins, and as high as their aspect makes them (a width alone
  // kept the natural height: every picture came out squashed).
  const double widest = page.width() - 80;
  auto picture = [&document, widest](const QString& name, const QImage& image, QSizeF shown) {
    document.addResource(QTextDocument::ImageResource, QUrl(name), image);
    if (shown.width() > widest) shown *= widest / shown.width();
    // A paragraph of its own: inline, a picture made the line it shared as
    // tall as itself and split the sentence before it.
    return QStringLiteral("<p><img src=\"%1\" width=\"%2\" height=\"%3\"></p>")
        .arg(name)
        .arg(qRound(shown.width()))
        .arg(qRound(shown.height()));
  };
  int charts = 0;
  for (int at = html.indexOf(QStringLiteral("<svg")); at >= 0;
       at = html.indexOf(QStringLiteral("<svg"), at)) {
    const int end = html.indexOf(QStringLiteral("</svg>"), at);
    if (end < 0) break;
    const QString svg_text = html.mid(at, end + 6 - at);
    QString replacement;
    if (svg_text.contains(QStringLiteral("aria-label=\"time breakdown per rank\""))) {
      // The Run view's breakdown in its place: the core's has other
      // categories and colours, and a report with both left the reader to
      // guess which was right.
      replacement = picture(QStringLiteral("cs://breakdown"), breakdown, breakdown.size());
    } else {
      // Drawn by Qt SVG at twice its size (sharp in print), shown at its own.
      QSvgRenderer svg(svg_text.toUtf8());
      if (svg.isValid() && !svg.defaultSize().isEmpty()) {
        const QSize size = svg.defaultSize();
        QImage image(size * 2, QImage::Format_ARGB32);
        image.fill(Qt::white);
        {
          QPainter p(&image);
          p.setRenderHint(QPainter::Antialiasing);
          svg.render(&p);
        }
        replacement = picture(QStringLiteral("cs://chart%1").arg(++charts), image, size);
      }
    }
    html.replace(at, end + 6 - at, replacement);
    at += replacement.size();
  }
  const QString plan_start = QStringLiteral("<details><summary>plan (JSON)</summary><pre>");
  const QString plan_end = QStringLiteral("</pre></details>");
  if (const int at = html.indexOf(plan_start); at >= 0) {
    const int end = html.indexOf(plan_end, at);
    if (end > at) {
      const QString json =
          QTextDocumentFragment::fromHtml(
              QStringLiteral("<pre>%1</pre>")
                  .arg(html.mid(at + plan_start.size(), end - at - plan_start.size())))
              .toPlainText();
      QString table = planTable(json);
      if (table.isEmpty()) {
        table = QStringLiteral("<p>Plan (JSON)</p><pre style=\"white-space: pre-wrap\">%1</pre>")
                    .arg(json.toHtmlEscaped());
      }
      html.replace(at, end + plan_end.size() - at, table);
    }
  }
  html = withSection(html, QObject::tr("<h2>Timeline</h2>") +
                               picture(QStringLiteral("cs://timeline"), timeline, timeline.size()));
  document.setPageSize(page);
  document.setHtml(html);
  return html;
}

namespace {

// QTextDocument and QPdfWriter are reentrant: this runs on a worker thread.
Result<QStringList> writePdfReport(const ExportSource& source, const QString& path,
                                   const QString& title, const QImage& chart,
                                   const QImage& timeline) {
  auto core = coreReportHtml(source);
  if (!core) return core.error();
  QTextDocument document;
  RunView::pdfReportDocument(document, core.value(), chart, timeline);
  QTemporaryDir out_dir;
  const QString temporary = out_dir.filePath(QStringLiteral("report.pdf"));
  {
    QPdfWriter writer(temporary);
    writer.setTitle(title);
    writer.setCreator(QStringLiteral("ClusterScope"));
    writer.setPageLayout(pdfPageLayout());
    writer.setResolution(kPdfDpi);
    document.setPageSize(QSizeF(writer.width(), writer.height()));
    document.print(&writer);
  }
  auto pdf = completePdf(temporary, path);
  if (!pdf) return pdf.error();
  if (Status s = writeWhole(path, *pdf); !s) return s.error();
  return QStringList{path};
}

Result<QStringList> writeCsvTables(const ExportSource& source, const QString& stem_path) {
  auto reader = trace::TraceReader::open(source.store);
  if (!reader) return reader.error();
  auto analysis = exportAnalysis(*reader.value(), source, /*gemm_rates=*/false);
  if (!analysis) return analysis.error();
  QString stem = stem_path;
  if (stem.endsWith(QStringLiteral(".csv"))) stem.chop(4);
  std::vector<trace::CsvTable> tables;
  std::vector<std::string> paths;
  QStringList files;
  for (trace::CsvTable table : trace::kAllCsvTables) {
    if (table == trace::CsvTable::prediction && !analysis.value()->prediction) continue;
    tables.push_back(table);
    files << QStringLiteral("%1.%2.csv").arg(stem, q(std::string(to_string(table))));
    paths.push_back(files.back().toStdString());
  }
  // Every file checked before any is written, as the CLI does: a path
  // refused half-way (a folder of that name, a read-only file) left the
  // tables before it new and those after it from an earlier export.
  for (const std::string& path : paths) {
    if (Status s = trace::check_export_path(path); !s) return s.error();
  }
  // Written as one set: a failure at the fifth table (a full disk) left the
  // four before it new and the rest from an earlier export.
  const Status written =
      write_files_together(paths, [&](std::size_t i, const std::string& beside) -> Status {
        auto one = trace::export_csv(*reader.value(), analysis.value().get(), tables[i], beside,
                                     source.range);
        if (!one) return one.error();
        return {};
      });
  if (!written) return written.error();
  return files;
}

Result<QStringList> writeChromeTrace(const ExportSource& source, const QString& path,
                                     bool critical_path) {
  auto reader = trace::TraceReader::open(source.store);
  if (!reader) return reader.error();
  trace::ChromeTraceOptions options;
  options.window = source.range;
  options.critical_path = critical_path;
  auto written = trace::export_chrome_trace(*reader.value(), path.toStdString(), options);
  if (!written) return written.error();
  return QStringList{path};
}

}  // namespace

std::pair<trace::TimeRange, QString> RunView::pictureWindow(bool range_only) const {
  if (range_only && timeline_->selectedRange()) {
    return {*timeline_->selectedRange(), tr("the selected range")};
  }
  if (analysis_ && !analysis_->ranks.empty() && !analysis_->ranks.front().steps.empty()) {
    const auto& steps = analysis_->ranks.front().steps;
    const trace::StepBreakdown& s = steps[std::min<std::size_t>(1, steps.size() - 1)];
    return {{s.breakdown.window_start_ns, s.breakdown.window_end_ns},
            tr("step %1 of rank %2").arg(s.step).arg(analysis_->ranks.front().rank)};
  }
  return {timeline_->window(), tr("the view at export time")};
}

// The timeline picture of one step (or the range), as an inline SVG section.
std::function<QString()> RunView::timelineSection(bool range_only) const {
  const auto [window, what] = pictureWindow(range_only);
  const QSizeF size(1000, std::max(60.0, timeline_->pictureHeight()));
  const QString heading = tr("<h2>Timeline</h2><p>%1: %2 to %3 after the start of the trace.</p>\n")
                              .arg(what, instant(window.start_ns - timeline_->timeOrigin()),
                                   instant(window.end_ns - timeline_->timeOrigin()));
  return [heading, size, paint = timeline_->windowPainter(window, Qt::black)] {
    return heading + QString::fromUtf8(svgOf(size, paint)) + QStringLiteral("\n");
  };
}

Result<RunView::ExportTask> RunView::prepareExport(RunExport kind, const QString& path,
                                                   bool range_only) const {
  if (path_.isEmpty()) return Error{"no run is open"};
  ExportSource source{path_.toStdString(), std::nullopt, analysis_, std::nullopt};
  if (integrity_checked_) source.damage = damage_.toStdString();
  if (range_only) {
    source.range = timeline_->selectedRange();
    if (!source.range) return Error{"no time range is selected (Shift+drag on the timeline)"};
  }
  switch (kind) {
    case RunExport::html:
      return ExportTask([source, path, section = timelineSection(range_only)] {
        auto core = coreReportHtml(source);
        if (!core) return Result<QStringList>(core.error());
        if (Status s = writeWhole(path, withSection(core.value(), section()).toUtf8()); !s) {
          return Result<QStringList>(s.error());
        }
        return Result<QStringList>(QStringList{path});
      });
    case RunExport::pdf: {
      // The chart is drawn here (a graphics scene belongs to the GUI
      // thread); the timeline's picture and the rest on the worker.
      const QImage chart = breakdownPicture();
      const QSize picture_size(1000, int(std::max(60.0, timeline_->pictureHeight())));
      return ExportTask(
          [source, path, title = title_, chart, picture_size,
           paint = timeline_->windowPainter(pictureWindow(range_only).first, Qt::black)] {
            QImage picture(picture_size, QImage::Format_ARGB32);
            picture.fill(Qt::white);
            {
              QPainter p(&picture);
              paint(p, QRectF(QPointF(0, 0), QSizeF(picture.size())));
            }
            return writePdfReport(source, path, title, chart, picture);
          });
    }
    case RunExport::csv:
      return ExportTask([source, path] { return writeCsvTables(source, path); });
    case RunExport::chrome_trace:
    case RunExport::chrome_trace_critical_path:
      return ExportTask([source, path, kind] {
        return writeChromeTrace(source, path, kind == RunExport::chrome_trace_critical_path);
      });
  }
  return Error{"unknown export"};
}

QImage RunView::breakdownPicture() const {
  const int ranks = analysis_ ? std::max<int>(1, int(analysis_->ranks.size())) : 1;
  QImage picture(QSize(1000, std::max(240, 60 + 40 * ranks)), QImage::Format_ARGB32);
  picture.fill(Qt::white);
  // Drawn from the chart laid out at the picture's size, not from its view:
  // a view never shown (the report made with another tab open) had not laid
  // the chart out, and the picture came out blank.
  QChart* chart = chart_->chart();
  if (!chart || !chart->scene()) return picture;
  const QRectF shown = chart->geometry();
  chart->setGeometry(QRectF(QPointF(0, 0), QSizeF(picture.size())));
  if (chart->layout()) chart->layout()->activate();
  {
    QPainter p(&picture);
    p.setRenderHint(QPainter::Antialiasing);
    chart->scene()->render(&p, QRectF(QPointF(0, 0), QSizeF(picture.size())), chart->geometry());
  }
  chart->setGeometry(shown);
  if (chart->layout()) chart->layout()->activate();
  return picture;
}

Result<QStringList> RunView::exportNow(RunExport kind, const QString& path,
                                       bool range_only) const {
  auto task = prepareExport(kind, path, range_only);
  if (!task) return task.error();
  return task.value()();
}

}  // namespace cs::gui
