// The run view on real trace stores: one the CPU engine writes during the
// test (two ranks through mpirun), the CUDA engine's committed stores, and
// Kineto and Nsight Systems traces imported through the app. Open, zoom and
// pan, select a kernel (from its table row and with the mouse), a range's
// breakdown, search, collapse a rank, the exports (HTML, PDF, CSV, Chrome
// trace), and files that are not stores of this version: a message, no crash.

#include <QAbstractTextDocumentLayout>
#include <QAction>
#include <QApplication>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QDeadlineTimer>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QHeaderView>
#include <QHorizontalStackedBarSeries>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QScrollArea>
#include <QScrollBar>
#include <QSet>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QTextLayout>
#include <QThread>
#include <QThreadPool>
#include <QToolTip>
#include <QUrl>
#include <QValueAxis>
#include <algorithm>
#include <set>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../profiler/worker_runs.h"
#include "app/gui/critical_path_view.h"
#include "app/gui/main_window.h"
#include "app/gui/message_bar.h"
#include "app/gui/project.h"
#include "app/gui/run_view.h"
#include "app/gui/theme.h"
#include "app/gui/timeline_widget.h"
#include "core/breakdown_parts.h"
#include "core/elided_name.h"
#include "core/format.h"
#include "core/model_json.h"
#include "core/presets.h"
#include "core/shown_name.h"
#include "core/trace_analysis.h"
#include "core/trace_compare.h"
#include "core/trace_critical_path.h"
#include "core/trace_export.h"
#include "core/trace_import.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "gui_test_support.h"
#include "planners/estimate.h"
#include "tests/process_run.h"

using namespace cs;
using namespace cs::gui;

namespace {

// A store of one rank with one 1 us kernel, left open for more; null when
// it cannot be created.
std::unique_ptr<trace::TraceWriter> one_kernel_store(const QString& path,
                                                     const trace::RunInfo& run = {}) {
  auto w = trace::TraceWriter::create(path.toStdString(), run);
  if (!w) return nullptr;
  (*w)->add_rank({0, "host", "CPU", 1, 0, false});
  trace::Event e;
  e.lane = (*w)->add_lane(0, trace::LaneKind::cpu_thread, "compute");
  e.start_ns = 1000;
  e.end_ns = 2000;
  e.name = (*w)->intern("gemm");
  (*w)->add(e);
  return std::move(w).value();
}

// What a label or a tooltip shows of `text`: Qt takes it for rich text when
// its format says so, or when it is automatic and the text looks like it.
QString shownText(const QString& text, Qt::TextFormat format) {
  const bool rich = format == Qt::RichText || (format == Qt::AutoText && Qt::mightBeRichText(text));
  if (!rich) return text;
  QTextDocument document;
  document.setHtml(text);
  return document.toPlainText();
}

// The plan the prediction tests hold the committed H200 bf16 store against:
// gpt2-small on h200-1, micro-batch 8; none when the presets lack either.
std::optional<Plan> gpt2SmallOnH200(const PresetCatalog& catalog) {
  const Workload* model = catalog.find_model("gpt2-small");
  auto cluster = catalog.cluster("h200-1");
  if (!model || !cluster) return std::nullopt;
  Plan plan;
  plan.cluster = std::move(cluster).value();
  plan.workload = *model;
  plan.parallel.micro_batch = 8;
  plan.parallel.global_batch = 8;
  plan.precision = PrecisionPlan::for_compute(Precision::bf16);
  return plan;
}

// A name of about 200,000 characters, as a heavily templated kernel's or a
// hostile import's: `start`, template arguments, "end".
// Its middle holds "the_middle_of_the_name".
std::string longName(const std::string& start) {
  std::string name = start + "<";
  while (name.size() < 200'000) {
    if (name.size() >= 100'000 && name.find("the_middle") == std::string::npos)
      name += "the_middle_of_the_name, ";
    name += "cutlass::gemm::GemmShape<128, 128, 32>, ";
  }
  return name + "end>";
}

// A GPU rank whose kernel, launch call, range, NCCL kernel (of a type
// unknown, summed by its name) and stream are each named by longName(): four
// of each.
bool writeLongNamesStore(const QString& path) {
  auto created = trace::TraceWriter::create(path.toStdString(), {});
  if (!created) return false;
  trace::TraceWriter& w = *created.value();
  w.add_rank({0, "host", "GPU 0", 1, 0, true});
  const trace::LaneId stream = w.add_lane(0, trace::LaneKind::gpu_stream, longName("stream_7"));
  const trace::LaneId thread = w.add_lane(0, trace::LaneKind::cpu_thread, "Thread 1");
  const trace::LaneId nvtx = w.add_lane(0, trace::LaneKind::annotation, "NVTX");
  const trace::StringId kernel = w.intern(longName("void cutlass::Kernel"));
  const trace::StringId call = w.intern(longName("cudaLaunchKernel"));
  const trace::StringId range = w.intern(longName("forward"));
  const trace::StringId collective = w.intern(longName("ncclDevKernel_AllReduce_Sum_f32"));
  std::int64_t t = 1'000'000;
  for (int i = 0; i < 4; ++i) {
    trace::Event a;
    a.lane = nvtx;
    a.kind = trace::EventKind::annotation;
    a.category = trace::Category::other;
    a.start_ns = t;
    a.end_ns = t + 100'000;
    a.name = range;
    w.add(a);
    trace::Event c;
    c.lane = thread;
    c.kind = trace::EventKind::api_call;
    c.category = trace::Category::other;
    c.start_ns = t + 1000;
    c.end_ns = t + 3000;
    c.name = call;
    c.correlation = i + 1;
    w.add(c);
    trace::Event k;
    k.lane = stream;
    k.start_ns = t + 5000;
    k.end_ns = t + 50'000;
    k.name = kernel;
    k.correlation = i + 1;
    w.add(k);
    trace::Event n;
    n.lane = stream;
    n.category = trace::Category::communication;
    n.start_ns = t + 60'000;
    n.end_ns = t + 90'000;
    n.name = collective;
    w.add(n);
    t += 200'000;
  }
  return w.close().ok();
}

// A run of one kernel, on one GPU stream, titled and named as given: for the
// tests of how a title or a name is shown.
bool writeOneKernelRun(const QString& path, const trace::RunInfo& run, const std::string& kernel) {
  auto w = trace::TraceWriter::create(path.toStdString(), run);
  if (!w.ok()) return false;
  (*w)->add_rank({0, "host", "GPU 0", 100, 0, false});
  trace::Event e;
  e.lane = (*w)->add_lane(0, trace::LaneKind::gpu_stream, "stream 7");
  e.kind = trace::EventKind::kernel;
  e.start_ns = 1000;
  e.end_ns = 2000;
  e.name = (*w)->intern(kernel);
  (*w)->add(e);
  return (*w)->close().ok();
}

}  // namespace

class TestGuiRun : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void opensCpuEngineRun();
  void criticalPathTab();
  void chartMadeInTheDarkThemeIsDark();
  void breakdownOfManyRanksReads();
  void longTitleKeepsTheWindow();
  void markupInNamesReadsAsWritten();
  void zoomPanAndSelect();
  void kernelRowShowsInstances();
  void rangeBreakdown();
  void rangeInstancesAreTheRangesCount();
  void rangeCountsEventsStartingInIt();
  void zeroWidthDragSelectsNothing();
  void longNamesKeepTheTooltipOnScreen();
  void longNamesShownElidedInTheTables_data();
  void longNamesShownElidedInTheTables();
  void longNamesWholeInTheDetailsAndTheData();
  void hoverTooltip();
  void tooltipSaysTimeOffCpu();
  void searchNextPrevious();
  void navigatesAsNsightDoes();
  void collapseRank();
  void manyLanesLoadWhatIsInView();
  void timeAxisStaysOnScreen();
  void rangeLabelStaysUnderTheAxis();
  void exports();
  void titleWithPercentDigitsReadsAsWritten();
  void committedTraces_data();
  void committedTraces();
  void importedTraces_data();
  void importedTraces();
  void importGoingUntilEachEnds();
  void badFiles_data();
  void badFiles();
  void damagedStoreIsSaid();
  void predictAgain();
  void predictWithAPlan();
  void lastPredictionAskedWins();
  void callsCopiesAndRanges();
  void countersOnTheTimeline();
  void countersLegendOfManyRanks();
  void committedCountersOnTheTimeline();
  void memoryPartsAreNotLanes();
  void predictedLaneDrawsThePlanPredicted();
  void predictedStoresDoNotPileUp();
  void predictionTableHoldsEachEndStage();
  void unpredictableStoreSaysWhy_data();
  void unpredictableStoreSaysWhy();
  void machineProbeRows();
  void eventTimesReadApart();
  void rangeHeadersKeepTheirWords();
  void statusGoesWithItsView();
  void homeLeavesAStepThatFillsTheRun();
  void unitsReadAsElsewhere();
  void medianStepSaysWhichSteps();
  void comparisonSaysWhatIsGone();
  void ranksTabNamesPartsAsStatsDoes();
  void predictAgainSaysWhyInTheBar();
  void criticalPathOnTheTimeline();
  void criticalPathOfManySteps();
  void operationRatedByItsKernels_data();
  void operationRatedByItsKernels();
  void closedWhileReading();

 private:
  void openAndWait(RunView& view, const QString& path);
  // A copy of a committed store in the test's folder (opening may upgrade a
  // store in place); empty when it cannot be made.
  QString writableCopy(const QString& source, const QString& name);
  QTemporaryDir dir_;
  QString cpu_store_;
};

void TestGuiRun::initTestCase() {
  cs::gui::test::isolateSettings();
  QVERIFY(dir_.isValid());
  // A real run of the CPU engine: two data-parallel ranks, three steps.
  std::vector<std::string> args = cs::test::tiny_model_args();
  args.insert(args.end(), {"--steps", "3", "--dp", "2", "--micro-batch", "1"});
  launch::RunSpec spec = cs::test::worker_spec(2, args);
  spec.title = "gui test run";
  // The plan recorded with the run, as `clusterscope run` records it.
  auto catalog = PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
  QVERIFY(catalog.ok());
  auto project = default_project(catalog.value());
  QVERIFY(project.ok());
  Plan plan = project->resolved_plan().value();
  plan.parallel.dp = 2;
  plan.parallel.tp = 1;
  plan.parallel.pp = 1;
  plan.parallel.sequence_parallel = false;
  spec.plan_json = to_json(plan).dump();
  spec.run_store = dir_.filePath(QStringLiteral("cpu-run.db")).toStdString();
  // A prediction whose machine probe no machine meets (1 ns for the GEMM):
  // the prediction tab must show the probe off the model.
  spec.extra_meta.emplace_back(
      "predicted_step",
      R"({"step_seconds": 0.001, "machine_probe": {"width": 256, "precision": "fp32",
          "all_reduce_bytes": 1048576, "ranks": 2, "gemm_seconds": 1e-9,
          "loop_seconds": 1e-9, "all_reduce_seconds": 1e-9}})");
  const cs::test::WorkerRun run = cs::test::run_worker(spec);
  QVERIFY2(run.report.outcome == launch::Outcome::completed, run.report.message.c_str());
  cpu_store_ = QString::fromStdString(run.report.run_store);
  QVERIFY(QFile::exists(cpu_store_));
}

QString TestGuiRun::writableCopy(const QString& source, const QString& name) {
  const QString copy = dir_.filePath(name);
  QFile::remove(copy);
  if (!QFile::copy(source, copy)) return {};
  QFile(copy).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  return copy;
}

void TestGuiRun::openAndWait(RunView& view, const QString& path) {
  QSignalSpy analysed(&view, &RunView::analysisReady);
  view.openStore(path);
  QTRY_VERIFY_WITH_TIMEOUT(analysed.count() == 1, 60000);
  QVERIFY2(analysed.front().at(0).toString().isEmpty(),
           qPrintable(analysed.front().at(0).toString()));
  TimelineWidget* t = view.timeline();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() != 0 && t->frameJob() == t->requestedJob(),
                           30000);
}

// A run opened after the switch to the dark theme: its breakdown chart,
// made anew for each store, came up white.
void TestGuiRun::chartMadeInTheDarkThemeIsDark() {
  cs::gui::applyTheme(true);
  auto light_again = qScopeGuard([] { cs::gui::applyTheme(false); });
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, cpu_store_);
  const QColor base = QApplication::palette().color(QPalette::Base);
  QCOMPARE(view.breakdownChart()->chart()->backgroundBrush().color(), base);
  QVERIFY(base.lightness() < 128);
}

// The breakdown of 64 ranks: a bar and a label of its own for each, the
// chart scrolling in its tab. In its fixed 230 px each bar was 2 px high and
// the ranks' labels were drawn over each other.
void TestGuiRun::breakdownOfManyRanksReads() {
  constexpr int kRanks = 64;
  const QString path = dir_.filePath(QStringLiteral("many-ranks.db"));
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    const trace::StringId gemm = (*w)->intern("gemm");
    for (int r = 0; r < kRanks; ++r) {
      (*w)->add_rank({r, "host", "GPU " + std::to_string(r), 100 + r, 0, false});
      trace::Event e;
      e.lane = (*w)->add_lane(r, trace::LaneKind::gpu_stream, "stream 7");
      e.kind = trace::EventKind::kernel;
      e.start_ns = 1000;
      e.end_ns = 2000 + 10 * r;
      e.name = gemm;
      (*w)->add(e);
    }
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  QCOMPARE(int(view.analysis()->ranks.size()), kRanks);
  for (int i = 0; i < view.tabs()->count(); ++i) {
    if (view.tabs()->tabText(i) == QStringLiteral("Breakdown")) view.tabs()->setCurrentIndex(i);
  }
  QChart* chart = view.breakdownChart()->chart();
  QVERIFY(chart->isVisible());
  const QList<QAbstractAxis*> axes = chart->axes(Qt::Vertical);
  QCOMPARE(axes.size(), 1);
  const double label = QFontMetricsF(axes.front()->labelsFont()).height();
  QTRY_VERIFY2(chart->plotArea().height() / kRanks >= label,
               qPrintable(QStringLiteral("%1 px for %2 ranks, labels %3 px high")
                              .arg(chart->plotArea().height())
                              .arg(kRanks)
                              .arg(label)));
}

void TestGuiRun::opensCpuEngineRun() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, cpu_store_);
  QVERIFY(view.message().isEmpty());
  QVERIFY(view.analysis());
  QCOMPARE(int(view.analysis()->ranks.size()), 2);
  QVERIFY(view.timeline()->laneCount() >= 2);
  QVERIFY(view.timeline()->handedSpans() > 0);
  // The stacked bars: a category per rank, the parts and colours of the
  // exported report's (they differed: six parts here, eight there).
  QChart* chart = view.breakdownChart()->chart();
  QVERIFY(chart);
  QCOMPARE(chart->series().size(), 1);
  {
    auto* bars = qobject_cast<QHorizontalStackedBarSeries*>(chart->series().front());
    QVERIFY(bars);
    QCOMPARE(bars->count(), int(std::size(cs::trace::kBreakdownParts)));
    for (int i = 0; i < bars->count(); ++i) {
      QCOMPARE(bars->barSets()[i]->label(), QString(cs::trace::kBreakdownParts[i].name));
      QCOMPARE(bars->barSets()[i]->color(), QColor(QString(cs::trace::kBreakdownParts[i].color)));
    }
    // Each rank's parts add up to its span.
    for (int rank = 0; rank < 2; ++rank) {
      double sum = 0;
      for (QBarSet* set : bars->barSets())
        sum += set->at(rank);
      QVERIFY(std::abs(sum - view.analysis()->ranks[std::size_t(rank)].total.span_ns * 1e-6) <
              1e-6 * sum + 1e-9);
    }
  }
  // Its axis ticks round, 1, 2 or 5 times a power of ten apart, from 0 (they
  // read 755.2, 1510.4, ...), past the longest span.
  {
    auto* axis = qobject_cast<QValueAxis*>(chart->axes(Qt::Horizontal).value(0));
    QVERIFY(axis);
    QCOMPARE(axis->tickType(), QValueAxis::TicksDynamic);
    QCOMPARE(axis->min(), 0.0);
    const double interval = axis->tickInterval();
    const double mantissa = interval / std::pow(10.0, std::floor(std::log10(interval)));
    QVERIFY2(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
                 std::abs(mantissa - 5) < 1e-9,
             qPrintable(QString::number(interval)));
    const double ticks = axis->max() / interval;
    QVERIFY2(std::abs(ticks - std::round(ticks)) < 1e-9, qPrintable(QString::number(axis->max())));
    std::int64_t longest = 0;
    for (const cs::trace::RankAnalysis& r : view.analysis()->ranks)
      longest = std::max(longest, r.total.span_ns);
    QVERIFY(axis->max() >= double(longest) * 1e-6);
  }
  QCOMPARE(view.rankTable()->rowCount(), 2);
  // The ranks' table, and each table of figures, has no row numbers, as the
  // kernels' has none: counted from 1 beside the rank column, rank 0's row
  // read "1 | 0".
  QCOMPARE(view.rankTable()->item(0, 0)->text(), QStringLiteral("0"));
  for (const char* name : {"run_ranks", "run_streams", "run_prediction", "run_comparison"}) {
    auto* table = view.findChild<QTableView*>(QLatin1String(name));
    QVERIFY2(table && table->verticalHeader()->isHidden(), name);
  }
  QVERIFY(view.kernelProxy()->rowCount() > 0);
  QVERIFY(view.collectiveProxy()->rowCount() > 0);  // the data-parallel all-reduces
  // The planner's step for the run's own plan, beside the measured lanes.
  QTRY_VERIFY2_WITH_TIMEOUT(
      view.predictedTimeline()->isVisible(),
      qPrintable(view.findChild<QLabel*>(QStringLiteral("run_predicted_label"))->text()), 30000);
  QTRY_VERIFY_WITH_TIMEOUT(view.predictedTimeline()->laneCount() > 0, 30000);
  // As wide as the measured lanes, so that the two time axes line up (the
  // measured view's scroll bar shifted them apart).
  QCOMPARE(view.predictedTimeline()->width(), view.timeline()->width());
  // ... drawn from each measured step's start, on the run's clock, and the
  // two windows move together.
  TimelineWidget* predicted = view.predictedTimeline();
  QVERIFY(view.findChild<QLabel*>(QStringLiteral("run_predicted_label"))
              ->text()
              .contains(QStringLiteral("from each measured step's start")));
  {
    auto measured = cs::trace::TraceReader::open(cpu_store_.toStdString());
    QVERIFY(measured);
    auto steps = (*measured)->steps(0);
    QVERIFY(steps && !steps->empty());
    std::int64_t first_step = steps->front().start_ns;
    for (const cs::trace::StepMetrics& m : *steps)
      first_step = std::min(first_step, m.start_ns);
    auto shown = cs::trace::TraceReader::open(predicted->storePath().toStdString());
    QVERIFY2(shown, shown ? "" : shown.message().c_str());
    QCOMPARE((*shown)->time_range().start_ns, first_step);
    auto predicted_steps = (*shown)->steps();
    QVERIFY(predicted_steps);
    std::set<std::int32_t> numbers;
    for (const cs::trace::StepMetrics& m : *predicted_steps)
      numbers.insert(m.step);
    QCOMPARE(numbers.size(), steps->size());  // one predicted step per measured one
  }
  QTRY_COMPARE_WITH_TIMEOUT(predicted->window().start_ns, view.timeline()->window().start_ns,
                            10000);
  const cs::trace::TimeRange whole = view.timeline()->fullRange();
  const std::int64_t quarter = (whole.end_ns - whole.start_ns) / 4;
  view.timeline()->setWindow(whole.start_ns + quarter, whole.start_ns + 2 * quarter);
  QCOMPARE(predicted->window().start_ns, whole.start_ns + quarter);
  QCOMPARE(predicted->window().end_ns, whole.start_ns + 2 * quarter);
  predicted->zoom(2.0, whole.start_ns + quarter);  // and back: the measured one follows
  QCOMPARE(view.timeline()->window().start_ns, predicted->window().start_ns);
  QCOMPARE(view.timeline()->window().end_ns, predicted->window().end_ns);
  // One column of lane titles, so that a time is at one x on both (the
  // predicted stage names are shorter than the measured lanes').
  QCOMPARE(predicted->gutterWidth(), view.timeline()->gutterWidth());
  const std::int64_t inside = predicted->window().start_ns + quarter / 4;
  QCOMPARE(predicted->mapToGlobal(QPointF(predicted->xOf(inside), 0)).x(),
           view.timeline()->mapToGlobal(QPointF(view.timeline()->xOf(inside), 0)).x());
  view.timeline()->resetZoom();
  // Its lanes scroll where they need more than their share of the height (a
  // plan of many stages): the last one can be brought into view.
  {
    QScrollArea* area = nullptr;
    for (QWidget* up = predicted->parentWidget(); up && up != &view && !area;
         up = up->parentWidget())
      area = qobject_cast<QScrollArea*>(up);
    QVERIFY2(area, "the predicted lanes are in no scroll area");
    view.resize(1200, 420);
    QTRY_VERIFY(area->verticalScrollBar()->maximum() > 0);  // squeezed: more lanes than room
    // The lanes' widget takes its height from the layout a moment later
    // (on a busy machine after the scroll bar shows).
    QTRY_VERIFY2(predicted->laneRect(predicted->laneCount() - 1).bottom() <= predicted->height(),
                 qPrintable(QStringLiteral("the last lane ends at %1 px of %2")
                                .arg(predicted->laneRect(predicted->laneCount() - 1).bottom())
                                .arg(predicted->height())));
    const QRectF last = predicted->laneRect(predicted->laneCount() - 1);
    area->ensureVisible(0, int(last.bottom()), 0, 0);
    QVERIFY(predicted->visibleRegion().boundingRect().contains(last.center().toPoint()));
    view.resize(1200, 900);
    QTRY_COMPARE(predicted->width(), view.timeline()->width());
  }

  view.tabs()->setCurrentIndex(1);
  view.repaint();
  const QImage analysis = cs::gui::test::saveScreenshot(&view, QStringLiteral("run-analysis"));
  double dominant = 1;
  QVERIFY(cs::gui::test::distinctColours(analysis, &dominant) > 20);
  QVERIFY(dominant < 0.95);
  view.tabs()->setCurrentIndex(0);
  view.timeline()->repaint();
  const QImage timeline =
      cs::gui::test::saveScreenshot(view.timeline(), QStringLiteral("run-timeline"));
  QVERIFY(cs::gui::test::distinctColours(timeline, &dominant) > 8);
  QVERIFY(dominant < 0.95);
}

// A pipelined prediction's memory: each end stage's figure in the
// prediction tab against the largest sample of its own ranks, under the
// whole. (The suite's run is DP 2: its prediction is rewritten as 2 stages
// of one rank each.)
void TestGuiRun::predictionTableHoldsEachEndStage() {
  const QString store = writableCopy(cpu_store_, QStringLiteral("stages.db"));
  QVERIFY(!store.isEmpty());
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db, "UPDATE meta SET value = ? WHERE key = 'predicted_step'", -1,
                                &stmt, nullptr),
             SQLITE_OK);
    const std::string text =
        R"({"step_seconds": 0.001, "pipeline": {"stages": 2, "ranks_per_stage": 1,
            "pacing": "first"}, "memory": {"allocated_bytes": 2e6, "device_bytes": 3e6,
            "stages": {"first": 2e6, "last": 1e6}}})";
    sqlite3_bind_text(stmt, 1, text.c_str(), -1, SQLITE_TRANSIENT);
    QCOMPARE(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  RunView view;
  openAndWait(view, store);
  QTableWidget* table = view.predictionTable();
  QStringList cells;
  int first = -1, last = -1;
  for (int r = 0; r < table->rowCount(); ++r) {
    if (!table->item(r, 0)) continue;
    const QString cell = table->item(r, 0)->text();
    cells << cell;
    if (cell == QStringLiteral("    stage 0 (first) (\"memory in use (bytes)\" of rank 0)"))
      first = r;
    if (cell == QStringLiteral("    stage 1 (last) (\"memory in use (bytes)\" of rank 1)"))
      last = r;
  }
  QVERIFY2(first >= 0 && last == first + 1, qPrintable(cells.join(" | ")));
  QCOMPARE(table->item(first, 1)->text(), QStringLiteral("1.91 MiB"));
  QCOMPARE(table->item(last, 1)->text(), QStringLiteral("977 KiB"));
  QVERIFY2(table->item(last, 2)->text().endsWith(QStringLiteral("iB")),
           qPrintable(table->item(last, 2)->text()));  // measured
}

// The predicted lane draws the plan the run's prediction was made for (the
// engines' scaled shape on the calibrated cluster, recorded with it), not
// the plan the user asked for: a CPU run of a scaled model had LLaMA-sized
// predicted steps under it.
// A store of which no prediction can be made: the tab says why, and no
// longer sends the user to Tools ▸ Predict the open run again, which can
// only refuse it (a calibration's sweeps; a trace without the engines' plan).
void TestGuiRun::unpredictableStoreSaysWhy_data() {
  QTest::addColumn<bool>("calibration");
  QTest::addColumn<QString>("why");
  QTest::addRow("calibration store")
      << true << QStringLiteral("a calibration store, not a training run");
  QTest::addRow("no plan of the engines")
      << false << QStringLiteral("not a training run of the ClusterScope engines");
}

void TestGuiRun::unpredictableStoreSaysWhy() {
  QFETCH(bool, calibration);
  QFETCH(QString, why);
  const QString path = dir_.filePath(QStringLiteral("unpredictable-%1.db").arg(int(calibration)));
  QFile::remove(path);
  auto w = one_kernel_store(path);
  QVERIFY(w);
  if (calibration) w->set_meta("calibration", "{}");
  QVERIFY(w->close().ok());
  RunView view;
  view.resize(900, 600);
  view.show();
  openAndWait(view, path);
  QTableWidget* table = view.predictionTable();
  QCOMPARE(table->rowCount(), 1);
  const QString text = table->item(0, 0)->text();
  QVERIFY2(text.contains(QStringLiteral("none can be made of it: ") + why), qPrintable(text));
  QVERIFY2(!text.contains(QStringLiteral("Predict the open run again")), qPrintable(text));
  QCOMPARE(table->columnSpan(0, 0), 4);  // across the table, not squeezed into "part"
  // The action, asked all the same, refuses it in the same words.
  QSignalSpy predicted(&view, &RunView::predictionReady);
  view.predictAgain();
  QTRY_COMPARE_WITH_TIMEOUT(predicted.count(), 1, 30000);
  QVERIFY2(predicted.front().at(1).toString().contains(why),
           qPrintable(predicted.front().at(1).toString()));
  // Held against the current plan: a trace of the user's own program is what
  // that is for; a calibration's sweeps are no step of any plan, and are
  // refused as trace stats --plan refuses them (they were held against it,
  // every configuration's sweeps as one step).
  auto catalog = PresetCatalog::load_default();
  QVERIFY2(catalog, catalog ? "" : catalog.message().c_str());
  const std::optional<Plan> plan = gpt2SmallOnH200(*catalog);
  QVERIFY(plan);
  view.predictWithPlan(*plan, QStringLiteral("the current plan, p"));
  QTRY_COMPARE_WITH_TIMEOUT(predicted.count(), 2, 30000);
  const QString held = predicted.back().at(1).toString();
  if (calibration) {
    QVERIFY2(held.contains(QStringLiteral("a calibration store (the sweeps of its configurations), "
                                          "not a run of a plan: no plan can be held against it")),
             qPrintable(held));
  } else {
    QVERIFY2(held.isEmpty(), qPrintable(held));
  }
}

void TestGuiRun::predictedLaneDrawsThePlanPredicted() {
  const QString store = dir_.filePath(QStringLiteral("predicted-plan.db"));
  QFile::remove(store);
  QVERIFY(QFile::copy(cpu_store_, store));
  QFile(store).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  auto catalog = PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
  QVERIFY(catalog.ok());
  auto run_plan = plan_from_json(nlohmann::json::parse(
                                     cs::trace::TraceReader::open(cpu_store_.toStdString())
                                         .value()
                                         ->run()
                                         .plan_json),
                                 "run plan");
  QVERIFY(run_plan.ok());
  Plan predicted = run_plan.value();
  predicted.workload.transformer.layers = 2;  // a much smaller model than the run's plan
  auto predicted_estimate = cs::plan::estimate(predicted);
  auto run_estimate = cs::plan::estimate(run_plan.value());
  QVERIFY(predicted_estimate.ok() && run_estimate.ok());
  QVERIFY(run_estimate->time.step() > 2 * predicted_estimate->time.step());
  {
    nlohmann::json meta = {{"step_seconds", predicted_estimate->time.step()},
                           {"plan", to_json(predicted)}};
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(store.toUtf8().constData(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db, "UPDATE meta SET value = ? WHERE key = 'predicted_step'", -1,
                                &stmt, nullptr),
             SQLITE_OK);
    const std::string text = meta.dump();
    sqlite3_bind_text(stmt, 1, text.c_str(), -1, SQLITE_TRANSIENT);
    QCOMPARE(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, store);
  QTRY_VERIFY_WITH_TIMEOUT(view.predictedTimeline()->laneCount() > 0, 30000);
  auto shown = cs::trace::TraceReader::open(view.predictedTimeline()->storePath().toStdString());
  QVERIFY2(shown, shown ? "" : shown.message().c_str());
  auto steps = (*shown)->steps();
  QVERIFY(steps && !steps->empty());
  const double drawn = double(steps->front().end_ns - steps->front().start_ns) / 1e9;
  QVERIFY2(std::abs(drawn - predicted_estimate->time.step()) <= 0.02 * predicted_estimate->time.step(),
           qPrintable(QStringLiteral("drawn %1 s, predicted %2 s, the run's plan %3 s")
                          .arg(drawn)
                          .arg(predicted_estimate->time.step())
                          .arg(run_estimate->time.step())));

  // The predicted lanes answer as the measured ones: a click shows the
  // span's details, and a range there (on the run's clock) is the run's.
  TimelineWidget* p = view.predictedTimeline();
  QTRY_VERIFY_WITH_TIMEOUT(!p->busy() && p->frameJob() == p->requestedJob(), 30000);
  QSignalSpy picked(p, &TimelineWidget::eventSelected);
  const QRectF stage = p->laneRect(0);
  bool clicked = false;
  for (int x = int(stage.left()) + 2; x < int(stage.right()) && !clicked; x += 5) {
    const QPoint at(x, int(stage.top()) + 8);
    if (cs::gui::test::toolTipAt(p, at).isEmpty()) continue;
    QTest::mouseClick(p, Qt::LeftButton, {}, at);
    QTRY_COMPARE_WITH_TIMEOUT(picked.count(), 1, 30000);
    clicked = true;
  }
  QVERIFY(clicked);
  QVERIFY(p->selectedEvent());
  QVERIFY2(view.details()->toPlainText().contains(p->selectedName()),
           qPrintable(view.details()->toPlainText()));
  QSignalSpy range_ready(&view, &RunView::rangeReady);
  const trace::TimeRange shown_window = p->window();
  const trace::TimeRange part{shown_window.start_ns,
                              shown_window.start_ns + (shown_window.end_ns - shown_window.start_ns) / 3};
  p->setSelectedRange(part);
  QVERIFY(view.timeline()->selectedRange());
  QCOMPARE(view.timeline()->selectedRange()->start_ns, part.start_ns);
  QCOMPARE(view.timeline()->selectedRange()->end_ns, part.end_ns);
  QTRY_COMPARE_WITH_TIMEOUT(range_ready.count(), 1, 30000);
  view.timeline()->setSelectedRange(std::nullopt);
  QVERIFY(!p->selectedRange());

  // An engine run with no prediction (no calibration): no lane at all. The
  // plan as written is not what the engines ran (they scale the model).
  const QString bare = dir_.filePath(QStringLiteral("no-prediction.db"));
  QFile::remove(bare);
  QVERIFY(QFile::copy(cpu_store_, bare));
  QFile(bare).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(bare.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "DELETE FROM meta WHERE key = 'predicted_step'", nullptr, nullptr,
                          nullptr),
             SQLITE_OK);
    sqlite3_close(db);
  }
  openAndWait(view, bare);
  QVERIFY(view.analysis() && !view.analysis()->prediction);
  QTest::qWait(200);  // a prediction would have started with the analysis
  QVERIFY(!view.predictedTimeline()->isVisible());
  // ... and no empty band where it was: the measured lanes take the height.
  auto* scroll = qobject_cast<QScrollArea*>(view.timeline()->parentWidget()->parentWidget());
  QVERIFY(scroll);
  QTRY_VERIFY2_WITH_TIMEOUT(scroll->height() >= scroll->parentWidget()->height() - 30,
                            qPrintable(QStringLiteral("%1 of %2 px")
                                           .arg(scroll->height())
                                           .arg(scroll->parentWidget()->height())),
                            5000);
}

void TestGuiRun::zoomPanAndSelect() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  const trace::TimeRange full = t->fullRange();
  const std::int64_t middle = full.start_ns + (full.end_ns - full.start_ns) / 2;
  t->zoom(4, middle);
  QCOMPARE(t->window().end_ns - t->window().start_ns, (full.end_ns - full.start_ns) / 4);
  const trace::TimeRange zoomed = t->window();
  // Pan by dragging: right moves the window earlier.
  const QPoint from(t->width() / 2, 10);
  QTest::mousePress(t, Qt::LeftButton, {}, from);
  QTest::mouseMove(t, from + QPoint(100, 0));
  QTest::mouseRelease(t, Qt::LeftButton, {}, from + QPoint(100, 0));
  QVERIFY(t->window().start_ns < zoomed.start_ns);
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);

  // Select the longest kernel's first instance from the table, then click it.
  view.kernelProxy()->sort(4, Qt::DescendingOrder);
  QSignalSpy instances(&view, &RunView::instancesReady);
  view.showKernelInstances(0);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QVERIFY(instances.front().at(0).toInt() > 0);
  const QString kernel = view.kernelProxy()->index(0, 0).data().toString();
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  view.instances()->setCurrentCell(0, 0);
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  QVERIFY(t->selectedEvent());
  QCOMPARE(t->selectedName(), kernel);
  const trace::StoredEvent event = *t->selectedEvent();
  QVERIFY(view.details()->toPlainText().contains(kernel));
  QVERIFY(view.details()->toPlainText().contains(QStringLiteral("duration")));
  // The view moved to show it.
  QVERIFY(t->window().start_ns <= event.event.start_ns);
  QVERIFY(t->window().end_ns >= event.event.end_ns);
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);

  // The mouse: a click in the middle of the event, on its lane.
  t->clearSelection();
  QVERIFY(!t->selectedEvent());
  int lane = -1;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (t->laneInfo(i).id.value == event.event.lane.value) lane = i;
  }
  QVERIFY(lane >= 0);
  const QRectF row = t->laneRect(lane);
  QVERIFY(!row.isEmpty());
  const double x = t->xOf(event.event.start_ns + event.event.duration_ns() / 2);
  selected.clear();
  QTest::mouseClick(t, Qt::LeftButton, {}, QPoint(int(x), int(row.bottom()) - 4));
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  QVERIFY(t->selectedEvent());
  // The innermost event under the click: this kernel, or one nested in it.
  const trace::Event clicked = t->selectedEvent()->event;  // a copy: selectedEvent() returns one
  QVERIFY(clicked.start_ns <= event.event.start_ns + event.event.duration_ns() / 2 + 1);
  QVERIFY(clicked.end_ns >= event.event.start_ns + event.event.duration_ns() / 2 - 1);
  QVERIFY(!view.details()->toPlainText().isEmpty());
}

void TestGuiRun::kernelRowShowsInstances() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  // The filter keeps the rows whose name holds the text, in either case.
  const QString first = view.kernelProxy()->index(0, 0).data().toString();
  const int all = view.kernelProxy()->rowCount();
  view.filterField()->setText(first.toUpper());
  QVERIFY(view.kernelProxy()->rowCount() >= 1);
  QVERIFY(view.kernelProxy()->rowCount() <= all);
  for (int r = 0; r < view.kernelProxy()->rowCount(); ++r) {
    QVERIFY(view.kernelProxy()->index(r, 0).data().toString().contains(first, Qt::CaseInsensitive));
  }
  view.filterField()->clear();
  QCOMPARE(view.kernelProxy()->rowCount(), all);
  // Sorting by count, descending: numbers, not text.
  view.kernelTable()->sortByColumn(3, Qt::DescendingOrder);
  for (int r = 1; r < view.kernelProxy()->rowCount(); ++r) {
    QVERIFY(view.kernelProxy()->index(r - 1, 3).data(Qt::UserRole).toDouble() >=
            view.kernelProxy()->index(r, 3).data(Qt::UserRole).toDouble());
  }
  // A collective row: its instances are that collective's events.
  QSignalSpy instances(&view, &RunView::instancesReady);
  view.collectiveTable()->selectRow(0);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QVERIFY2(instances.front().at(1).toString().isEmpty(),
           qPrintable(instances.front().at(1).toString()));
  const int count = view.collectiveProxy()->index(0, 4).data(Qt::UserRole).toInt();
  QCOMPARE(view.instances()->rowCount(), std::min(count, 1000));
  // Both ranks ran it: timed also by its transfer (the rank that joined
  // each call last), said in the header's tooltip.
  QCOMPARE(view.collectiveProxy()->headerData(9, Qt::Horizontal).toString(), QString("transfer"));
  QVERIFY(view.collectiveProxy()
              ->headerData(9, Qt::Horizontal, Qt::ToolTipRole)
              .toString()
              .contains("joined last"));
  QVERIFY(view.collectiveProxy()->index(0, 9).data(Qt::UserRole).toDouble() > 0);
  QVERIFY(view.collectiveProxy()->index(0, 10).data(Qt::UserRole).toDouble() > 0);
}

void TestGuiRun::rangeBreakdown() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  const trace::TimeRange full = t->fullRange();
  const trace::TimeRange half{full.start_ns, full.start_ns + (full.end_ns - full.start_ns) / 2};
  QSignalSpy ready(&view, &RunView::rangeReady);
  t->setSelectedRange(half);
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  QVERIFY2(ready.front().at(0).toString().isEmpty(), qPrintable(ready.front().at(0).toString()));
  QVERIFY(view.rangeAnalysis());
  QCOMPARE(int(view.rangeAnalysis()->ranks.size()), 2);
  for (std::size_t r = 0; r < 2; ++r) {
    const trace::Breakdown& part = view.rangeAnalysis()->ranks[r].total;
    const trace::Breakdown& whole = view.analysis()->ranks[r].total;
    QVERIFY(part.window_end_ns <= half.end_ns);
    QVERIFY(part.busy_ns <= whole.busy_ns);
    QVERIFY(part.compute_ns <= whole.compute_ns);
    QVERIFY(part.span_ns <= half.end_ns - half.start_ns);
  }
  QVERIFY(view.rangeBreakdown()->toPlainText().contains(QStringLiteral("Range")));
  QVERIFY(view.rangeBreakdown()->toPlainText().contains(QStringLiteral("compute")));

  // Shift+drag selects a range with the mouse.
  ready.clear();
  const QRectF lane = t->laneRect(0);
  QTest::mousePress(t, Qt::LeftButton, Qt::ShiftModifier, QPoint(int(lane.left()) + 20, 30));
  QTest::mouseMove(t, QPoint(int(lane.left()) + 220, 30));
  QTest::mouseRelease(t, Qt::LeftButton, Qt::ShiftModifier, QPoint(int(lane.left()) + 220, 30));
  QVERIFY(t->selectedRange());
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  QVERIFY(t->selectedRange()->start_ns >= t->window().start_ns);
  QVERIFY(t->selectedRange()->end_ns > t->selectedRange()->start_ns);
}

// The range's table counts the device events that start in it (Breakdown::
// events), and says so: a rank whose whole range lay inside one long
// collective read "device events 0" beside its communication time.
void TestGuiRun::rangeCountsEventsStartingInIt() {
  const QString path = dir_.filePath(QStringLiteral("range-inside-collective.db"));
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    (*w)->add_rank({0, "host", "GPU 0", 1, 0, false});
    const trace::LaneId stream = (*w)->add_lane(0, trace::LaneKind::gpu_stream, "stream 7");
    trace::Event gemm;
    gemm.lane = stream;
    gemm.start_ns = 0;
    gemm.end_ns = 1000;
    gemm.name = (*w)->intern("gemm");
    (*w)->add(gemm);
    trace::Event all_reduce;
    all_reduce.lane = stream;
    all_reduce.kind = trace::EventKind::collective;
    all_reduce.category = trace::Category::communication;
    all_reduce.collective = trace::Collective::all_reduce;
    all_reduce.start_ns = 1000;
    all_reduce.end_ns = 1'000'000;
    all_reduce.name = (*w)->intern("ncclAllReduce");
    (*w)->add(all_reduce);
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  QSignalSpy ready(&view, &RunView::rangeReady);
  view.timeline()->setSelectedRange(trace::TimeRange{200'000, 800'000});
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  QVERIFY2(ready.front().at(0).toString().isEmpty(), qPrintable(ready.front().at(0).toString()));
  QVERIFY(view.rangeAnalysis());
  const trace::Breakdown& b = view.rangeAnalysis()->ranks.at(0).total;
  QCOMPARE(b.events, 0);
  QCOMPARE(b.communication_ns, 600'000);
  const QString text = view.rangeBreakdown()->toPlainText();
  QVERIFY2(!text.contains(QStringLiteral("device events")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("events starting")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("one that began before and runs through it counts in "
                                        "the time, not here")),
           qPrintable(text));
}

// A row's instances in a selected range are the events its count holds: a
// range drawn from one kernel's end to another's start (adjacent kernels,
// the CPU engine's ops) listed those two beside the one its row counted,
// "3 instances" under a count of 1.
void TestGuiRun::rangeInstancesAreTheRangesCount() {
  const QString path = dir_.filePath(QStringLiteral("range-instances.db"));
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    (*w)->add_rank({0, "host", "GPU 0", 1, 0, false});
    const trace::LaneId stream = (*w)->add_lane(0, trace::LaneKind::gpu_stream, "stream 7");
    const trace::StringId gemm = (*w)->intern("gemm");
    for (std::int64_t start : {1000, 2000, 3000}) {  // back to back, 1 us each
      trace::Event e;
      e.lane = stream;
      e.kind = trace::EventKind::kernel;
      e.start_ns = start;
      e.end_ns = start + 1000;
      e.name = gemm;
      (*w)->add(e);
    }
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  QSignalSpy ready(&view, &RunView::rangeReady);
  view.timeline()->setSelectedRange(trace::TimeRange{2000, 3000});  // the second kernel
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  QCOMPARE(view.kernelProxy()->rowCount(), 1);
  QCOMPARE(view.kernelProxy()->index(0, 3).data(Qt::UserRole).toInt(), 1);
  QSignalSpy instances(&view, &RunView::instancesReady);
  view.kernelTable()->selectRow(0);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QCOMPARE(instances.front().at(0).toInt(), 1);
  QCOMPARE(view.instances()->rowCount(), 1);
  QCOMPARE(view.instances()->item(0, 1)->text(),
           QString::fromStdString(format_time_ns(1000)));  // from the trace's start
}

// A Shift+drag that reaches no other nanosecond (3 px at the deepest zoom;
// the CLI refuses --to not after --from) selects nothing, as Esc: it was a
// range of 0 ns, analysed to all zeros and exported. A store without
// predicted lanes (theirs, aligned, clear an empty range on their side).
void TestGuiRun::zeroWidthDragSelectsNothing() {
  const QString path = dir_.filePath(QStringLiteral("zero-width.db"));
  {
    auto w = one_kernel_store(path);  // "gemm", [1000, 2000)
    QVERIFY(w);
    QVERIFY(w->close().ok());
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  t->setWindow(1400, 1401);  // as deep as it zooms
  QVERIFY(t->window().end_ns - t->window().start_ns <= 100);
  const QRectF lane = t->laneRect(0);
  // 3 px, the least drag, from a quarter in: a third of a nanosecond.
  QVERIFY(lane.width() >= 600);
  const int x = int(lane.left() + 0.252 * lane.width());
  const int y = int(lane.center().y());
  QSignalSpy selected(t, &TimelineWidget::rangeSelected);
  QTest::mousePress(t, Qt::LeftButton, Qt::ShiftModifier, QPoint(x, y));
  QTest::mouseMove(t, QPoint(x + 3, y));
  QTest::mouseRelease(t, Qt::LeftButton, Qt::ShiftModifier, QPoint(x + 3, y));
  QCOMPARE(selected.count(), 1);
  if (const auto range = t->selectedRange())
    QFAIL(qPrintable(QStringLiteral("a range of %1 ns").arg(range->end_ns - range->start_ns)));
  QVERIFY(!selected.front().at(0).value<std::optional<trace::TimeRange>>());
  QTest::qWait(200);  // a range's analysis would be under way
  QVERIFY(!view.rangeAnalysis());
  QVERIFY(view.rangeBreakdown()->toPlainText().isEmpty());
}

// A templated kernel's name of thousands of characters: the tooltip cuts
// its middle, so that the duration and the time stay on screen (a tooltip
// of a 14,000-character name was 3520 px tall on an 800 px screen), and the
// Selection tab keeps it whole. A lane's name alike.
void TestGuiRun::longNamesKeepTheTooltipOnScreen() {
  const QString path = dir_.filePath(QStringLiteral("long-names.db"));
  std::string name = "void cutlass::Kernel<";
  for (int i = 0; i < 1000; ++i)
    name += "cutlass::gemm::Shape<" + std::to_string(i) + ">,";
  name += "end>";
  const std::string lane_name = "stream " + std::string(5000, 'x') + " end";
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w);
    (*w)->add_rank({0, "host", "CPU", 1, 0, false});
    trace::Event e;
    e.lane = (*w)->add_lane(0, trace::LaneKind::cpu_thread, lane_name);
    e.start_ns = 1000;
    e.end_ns = 2000;
    e.name = (*w)->intern(name);
    (*w)->add(e);
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  const QRectF lane = t->laneRect(0);
  const int screen = t->screen()->geometry().height();
  auto tipHeight = [] {
    for (QWidget* w : QApplication::topLevelWidgets())
      if (w->inherits("QTipLabel") && w->isVisible()) return w->sizeHint().height();
    return -1;
  };

  const QString tip =
      cs::gui::test::toolTipAt(t, QPoint(int(lane.center().x()), int(lane.top()) + 8));
  QVERIFY2(tip.contains(QStringLiteral("1.00 µs at")), qPrintable(tip.right(300)));
  QVERIFY(tip.contains(QStringLiteral("void cutlass::Kernel&lt;cutlass::gemm::Shape&lt;0&gt;")));
  QVERIFY(tip.contains(QStringLiteral("Shape&lt;999&gt;,end&gt;")));
  QVERIFY(tip.contains(QStringLiteral("%1 characters").arg(name.size())));
  QVERIFY2(tipHeight() > 0 && tipHeight() < screen / 2, qPrintable(QString::number(tipHeight())));

  const QString title = cs::gui::test::toolTipAt(t, QPoint(10, int(lane.top()) + 8));
  QVERIFY2(title.contains(QStringLiteral("stream xxx")) && title.contains(QStringLiteral("x end")),
           qPrintable(title.left(200)));
  QVERIFY2(tipHeight() > 0 && tipHeight() < screen / 2, qPrintable(QString::number(tipHeight())));

  // Whole where it is selected, in the details' last row: the heading cuts
  // it, so that the duration stands before it (it stood 26,000 characters
  // down).
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  QTest::mouseClick(t, Qt::LeftButton, {}, QPoint(int(lane.center().x()), int(lane.top()) + 8));
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  QTRY_VERIFY_WITH_TIMEOUT(view.details()->toPlainText().contains(QString::fromStdString(name)),
                           10000);
  const QString details = view.details()->toPlainText();
  const qsizetype duration = details.indexOf(QStringLiteral("duration"));
  QVERIFY2(duration >= 0 && duration < 3000, qPrintable(QString::number(duration)));
  QVERIFY(details.indexOf(QString::fromStdString(name)) > duration);
  QVERIFY(details.indexOf(QString::fromStdString(lane_name)) > duration);
}

// A run whose names are 200,000 characters long opens (it took seconds,
// each name measured whole), and each summary table shows a name elided to
// kShownNameChars characters (core/elided_name.h), its start and its end;
// the row keeps it whole, which the filter matches and the instances are
// found by.
void TestGuiRun::longNamesShownElidedInTheTables_data() {
  QTest::addColumn<QString>("table");
  QTest::addColumn<QString>("start");
  QTest::addRow("kernels") << "kernels"
                           << "void cutlass::Kernel";
  QTest::addRow("collectives") << "collectives"
                               << "ncclDevKernel_AllReduce_Sum_f32";
  QTest::addRow("CUDA API calls") << "calls"
                                  << "cudaLaunchKernel";
  QTest::addRow("ranges") << "ranges"
                          << "forward";
}

void TestGuiRun::longNamesShownElidedInTheTables() {
  QFETCH(QString, table);
  QFETCH(QString, start);
  const QString path = dir_.filePath(QStringLiteral("long-names-tables.db"));
  if (!QFile::exists(path)) QVERIFY(writeLongNamesStore(path));
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, path);
  QSortFilterProxyModel* proxy = table == QLatin1String("kernels")       ? view.kernelProxy()
                                 : table == QLatin1String("collectives") ? view.collectiveProxy()
                                 : table == QLatin1String("calls")       ? view.apiCallTable().proxy
                                                                         : view.rangeTable().proxy;
  const QString whole = QString::fromStdString(longName(start.toStdString()));
  int row = -1;
  for (int r = 0; r < proxy->rowCount(); ++r)
    if (proxy->index(r, 0).data(Qt::UserRole).toString() == whole) row = r;
  QVERIFY2(row >= 0, "no row holds the whole name");
  const QString shown = proxy->index(row, 0).data().toString();
  QCOMPARE(shown, QString::fromStdString(elided_name(whole.toStdString())));
  QVERIFY(shown.startsWith(start) && shown.endsWith(QStringLiteral("end>")));
  QVERIFY(shown.size() <= qsizetype(kShownNameChars) + 3);
  QVERIFY(!proxy->index(row, 0).data(Qt::ToolTipRole).toString().contains(whole));
  // Filtered by text of the name's middle, which the cell leaves out.
  const QString middle = QStringLiteral("the_middle_of_the_name");
  QVERIFY(whole.contains(middle) && !shown.contains(middle));
  view.filterField()->setText(middle);
  QVERIFY(proxy->rowCount() >= 1);
  view.filterField()->clear();
  if (table == QLatin1String("kernels") || table == QLatin1String("collectives")) {
    QSignalSpy instances(&view, &RunView::instancesReady);
    if (table == QLatin1String("kernels"))
      view.showKernelInstances(row);
    else
      view.showCollectiveInstances(row);
    QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
    QCOMPARE(view.instances()->rowCount(), 4);
  }
}

// The same run: the timeline draws and tips the kernel's name elided, with
// its length; the Selection tab's details hold it whole; the reports (HTML,
// PDF) show it elided, the CSV tables and the Chrome trace hold it whole.
void TestGuiRun::longNamesWholeInTheDetailsAndTheData() {
  const QString path = dir_.filePath(QStringLiteral("long-names-details.db"));
  QVERIFY(writeLongNamesStore(path));
  const QString kernel = QString::fromStdString(longName("void cutlass::Kernel"));
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  const QRectF lane = t->laneRect(0);
  const double x = t->xOf(t->fullRange().start_ns + 27'500);  // the first kernel's middle
  QVERIFY(x > lane.left() && x < lane.right());
  const QPoint at(int(x), int(lane.top()) + 8);
  const QString tip = cs::gui::test::toolTipAt(t, at);
  QVERIFY2(tip.contains(QStringLiteral("void cutlass::Kernel&lt;cutlass::gemm")),
           qPrintable(tip.left(300)));
  QVERIFY2(tip.contains(QStringLiteral("(%1 characters)").arg(kernel.size())),
           qPrintable(tip.right(300)));
  QVERIFY(tip.size() < 3 * qsizetype(kShownNameChars));

  // The stream's name, in the streams' table, elided as the lane's title.
  const QString stream = QString::fromStdString(longName("stream_7"));
  bool stream_row = false;
  for (int r = 0; r < view.streamTable()->rowCount(); ++r) {
    const QTableWidgetItem* item = view.streamTable()->item(r, 1);
    if (item && item->text() == QString::fromStdString(elided_name(stream.toStdString())))
      stream_row = true;
  }
  QVERIFY2(stream_row, "no stream row shows the stream's name elided");

  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  QTest::mouseClick(t, Qt::LeftButton, {}, at);
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  QTRY_VERIFY_WITH_TIMEOUT(view.details()->toPlainText().contains(kernel), 10000);
  QVERIFY(view.details()->toPlainText().contains(stream));  // the lane's whole name

  auto read = [](const QString& file) {
    QFile f(file);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  const QByteArray whole = kernel.toUtf8();
  const QString html = dir_.filePath(QStringLiteral("long-names.html"));
  QVERIFY(view.exportNow(RunExport::html, html).ok());
  const QByteArray page = read(html);
  QVERIFY(page.contains("<h2>Timeline</h2>"));
  QVERIFY2(!page.contains(QString(kernel).toHtmlEscaped().toUtf8()), "the report holds it whole");
  QVERIFY2(page.size() < 500'000, QByteArray::number(page.size()).constData());
  const QString pdf = dir_.filePath(QStringLiteral("long-names.pdf"));
  QVERIFY(view.exportNow(RunExport::pdf, pdf).ok());
  QVERIFY(read(pdf).startsWith("%PDF"));
  const QString csv = dir_.filePath(QStringLiteral("long-names"));
  QVERIFY(view.exportNow(RunExport::csv, csv).ok());
  QVERIFY2(read(csv + QStringLiteral(".events.csv")).contains(whole), "the events table cut it");
  QVERIFY2(read(csv + QStringLiteral(".kernels.csv")).contains(whole), "the kernels table cut it");
  const QString chrome = dir_.filePath(QStringLiteral("long-names.json"));
  QVERIFY(view.exportNow(RunExport::chrome_trace, chrome).ok());
  QVERIFY2(read(chrome).contains(whole), "the Chrome trace cut it");
}

// Hovering an all-reduce: its name and duration at once, then its bytes and
// bandwidth, read on the worker thread.
void TestGuiRun::hoverTooltip() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  QSignalSpy instances(&view, &RunView::instancesReady);
  view.showCollectiveInstances(0);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QVERIFY(view.instances()->rowCount() > 0);
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  view.instances()->setCurrentCell(0, 0);
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  const trace::Event e = t->selectedEvent()->event;
  QVERIFY(e.bytes > 0);
  int lane = -1;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (t->laneInfo(i).id.value == e.lane.value) lane = i;
  }
  QVERIFY(lane >= 0);
  const QPoint at(int(t->xOf(e.start_ns + e.duration_ns() / 2)), int(t->laneRect(lane).top()) + 8);
  cs::gui::test::toolTipAt(t, at);
  QTRY_VERIFY_WITH_TIMEOUT(QToolTip::text().contains(QStringLiteral("B/s")), 10000);
  QVERIFY(QToolTip::text().contains(t->selectedName().toHtmlEscaped()));
}

// A CPU-engine op whose thread was off CPU for part of it says how long,
// and the op's time-off-CPU samples are no lane of their own.
void TestGuiRun::tooltipSaysTimeOffCpu() {
  const QString path = dir_.filePath(QStringLiteral("off-cpu.db"));
  {
    auto w = one_kernel_store(path);  // "gemm", [1000, 2000)
    QVERIFY(w);
    w->add(trace::CounterSample{0, w->intern(trace::kOffCpuCounter), 2000, 400});
    QVERIFY(w->close().ok());
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  for (int i = 0; i < t->laneCount(); ++i)
    QVERIFY(!t->isCounterLane(i));
  const QPoint at(int(t->xOf(1500)), int(t->laneRect(0).top()) + 8);
  cs::gui::test::toolTipAt(t, at);
  QTRY_VERIFY_WITH_TIMEOUT(QToolTip::text().contains(QStringLiteral("off CPU 400 ns of it")),
                           10000);
  // On its box, a strip along the bottom edge 40 % of its length.
  const QImage image = t->grab().toImage();
  const int bottom = int(t->laneRect(0).top() + 16 - 1 - 2);  // a row's box, its strip's middle
  const double x0 = t->xOf(1000), x1 = t->xOf(2000);
  QCOMPARE(image.pixelColor(int(x0 + 0.2 * (x1 - x0)), bottom), TimelineWidget::offCpuColor());
  QVERIFY(image.pixelColor(int(x0 + 0.6 * (x1 - x0)), bottom) != TimelineWidget::offCpuColor());
  QVERIFY(image.pixelColor(int(x0 + 0.2 * (x1 - x0)), int(t->laneRect(0).top()) + 5) !=
          TimelineWidget::offCpuColor());
}

void TestGuiRun::searchNextPrevious() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  const QString kernel = view.kernelProxy()->index(0, 0).data().toString();
  QSignalSpy moved(t, &TimelineWidget::searchMoved);
  view.searchField()->setText(kernel);
  QTest::keyClick(view.searchField(), Qt::Key_Return);
  QTRY_COMPARE_WITH_TIMEOUT(moved.count(), 1, 30000);
  const int matches = moved.front().at(1).toInt();
  QVERIFY(matches > 0);
  QCOMPARE(moved.front().at(0).toInt(), 0);
  QVERIFY(t->selectedName().contains(kernel));
  const std::int64_t first = t->selectedEvent()->id;
  t->findPrevious(kernel);  // wraps to the last
  QCOMPARE(moved.count(), 2);
  QCOMPARE(moved.back().at(0).toInt(), matches - 1);
  t->findNext(kernel);
  QCOMPARE(moved.back().at(0).toInt(), 0);
  QTRY_VERIFY(t->selectedEvent() && t->selectedEvent()->id == first);
  // F3 and Shift+F3 from the find field step the same way.
  QTest::keyClick(view.searchField(), Qt::Key_F3);
  QCOMPARE(moved.back().at(0).toInt(), 1 % matches);
  QTest::keyClick(view.searchField(), Qt::Key_F3, Qt::ShiftModifier);
  QCOMPARE(moved.back().at(0).toInt(), 0);
  moved.clear();
  t->findNext(QStringLiteral("no event is called this"));
  QTRY_COMPARE_WITH_TIMEOUT(moved.count(), 1, 30000);
  QCOMPARE(moved.front().at(1).toInt(), 0);
}

// What a user of Nsight Systems or Perfetto does on a real two-rank Kineto
// trace (ranks 0 and 1 of a 128-rank job): hover and click spans, search
// and step to matches on the lower rank, walk a kernel's instances, and
// narrow the tables to a range.
void TestGuiRun::navigatesAsNsightDoes() {
  const QString validation = QStringLiteral(CS_DATA_DIR "/validation/kineto/");
  const std::string store = dir_.filePath(QStringLiteral("kineto-nav.db")).toStdString();
  auto imported = trace::import_traces(
      {(validation + "sampled_rank-0.json.gz").toStdString(),
       (validation + "sampled_rank-1.json.gz").toStdString()},
      store);
  QVERIFY2(imported, imported ? "" : imported.message().c_str());
  RunView view;
  view.resize(1200, 700);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, QString::fromStdString(store));
  TimelineWidget* t = view.timeline();
  // The header says it is a sample of a larger job, as trace info does.
  QVERIFY2(view.header()->text().contains(QStringLiteral("2 of 128 ranks")),
           qPrintable(view.header()->text()));
  // A collective of unknown size has no bandwidth: "-", not "0.00".
  bool unknown_size = false;
  for (int r = 0; r < view.collectiveProxy()->rowCount(); ++r) {
    if (view.collectiveProxy()->index(r, 0).data(Qt::UserRole + 2).toLongLong() != 0) continue;
    unknown_size = true;
    QCOMPARE(view.collectiveProxy()->index(r, 7).data().toString(), QStringLiteral("-"));
    QCOMPARE(view.collectiveProxy()->index(r, 8).data().toString(), QStringLiteral("-"));
  }
  QVERIFY(unknown_size);  // the SendRecv kernels carry no size
  // HTA's launch statistics in the Ranks tab (the Python reference's counts).
  int shorter = -1;
  for (int c = 0; c < view.rankTable()->columnCount(); ++c) {
    if (view.rankTable()->horizontalHeaderItem(c)->text() ==
        QStringLiteral("kernels shorter than their launch"))
      shorter = c;
  }
  QVERIFY(shorter >= 0);
  QCOMPARE(view.rankTable()->item(0, shorter)->text(), QStringLiteral("282 of 1204"));
  QCOMPARE(view.rankTable()->item(1, shorter)->text(), QStringLiteral("278 of 1154"));
  // Each stream's idle time in the Streams tab: rank 0's compute stream idles
  // 83.1% of its span, where the rank idles 55.2% (kineto_reference.py).
  QTableWidget* streams = view.streamTable();
  QCOMPARE(streams->rowCount(), 10);  // five streams on each rank
  QCOMPARE(streams->item(0, 1)->text(), QStringLiteral("GPU 0 stream 7"));
  QCOMPARE(streams->item(0, 2)->text(), QStringLiteral("1052"));
  QCOMPARE(streams->item(0, 5)->text(), QStringLiteral("83.1"));
  QCOMPARE(streams->item(0, 9)->text(), QStringLiteral("16.1"));  // queue mean
  QCOMPARE(streams->item(0, 10)->text(), QStringLiteral("80"));   // queue max

  // A click selects what the tooltip names, at the whole run's zoom where
  // the GPU lanes are mostly folds.
  int gpu_lane = -1;
  for (int i = 0; i < t->laneCount() && gpu_lane < 0; ++i) {
    if (t->laneInfo(i).kind == trace::LaneKind::gpu_stream && t->laneInfo(i).rank == 0)
      gpu_lane = i;
  }
  QVERIFY(gpu_lane >= 0);
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  const QRectF lane = t->laneRect(gpu_lane);
  int named = 0, folds = 0;
  std::optional<QPoint> single;  // where a span of one event is
  for (int x = int(lane.left()) + 3; x < int(lane.right()); x += 13) {
    const QPoint at(x, int(lane.top()) + 8);
    const QString tip = cs::gui::test::toolTipAt(t, at);
    if (tip.isEmpty()) continue;
    const QString name = tip.section(QStringLiteral("<b>"), 1).section(QStringLiteral("</b>"), 0, 0);
    selected.clear();
    QTest::mouseClick(t, Qt::LeftButton, {}, at);
    QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
    QVERIFY2(t->selectedEvent(), qPrintable(QStringLiteral("x %1: %2 selected nothing").arg(x).arg(tip)));
    if (tip.contains(QStringLiteral("more<br>"))) {
      ++folds;  // a fold: an event of it, on this lane
      QCOMPARE(t->selectedEvent()->event.lane.value, t->laneInfo(gpu_lane).id.value);
    } else {
      ++named;
      if (!single) single = at;
      // A long name has its middle cut in the tooltip: its two ends.
      const QString whole = t->selectedName().toHtmlEscaped();
      if (name.contains(QStringLiteral(" … "))) {
        const QString cut = name.section(QStringLiteral(" <i>("), 0, 0);  // less its length
        QVERIFY2(whole.startsWith(cut.section(QStringLiteral(" … "), 0, 0)) &&
                     whole.endsWith(cut.section(QStringLiteral(" … "), 1)),
                 qPrintable(name));
      } else {
        QCOMPARE(whole, name);
      }
    }
  }
  QVERIFY2(named + folds >= 20, qPrintable(QStringLiteral("%1 named, %2 folds").arg(named).arg(folds)));
  QVERIFY(folds > 0);
  // A double-click on a span zooms to it.
  QVERIFY(single);
  const trace::TimeRange whole = t->window();
  QTest::mouseDClick(t, Qt::LeftButton, {}, *single);
  QVERIFY(t->window().end_ns - t->window().start_ns < (whole.end_ns - whole.start_ns) / 10);
  t->resetZoom();

  // PageDown and PageUp go from step to step (ProfilerStep#551 and #552).
  {
    QSignalSpy stepped(t, &TimelineWidget::stepShown);
    t->setFocus();
    QTest::keyClick(t, Qt::Key_PageDown);  // first: the step under the middle
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 1, 10000);
    const int first = stepped.back().at(0).toInt();
    QVERIFY2(first == 551 || first == 552, qPrintable(QString::number(first)));
    QTest::keyClick(t, Qt::Key_PageUp);
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 2, 10000);
    QCOMPARE(stepped.back().at(0).toInt(), 551);
    const trace::TimeRange on_551 = t->window();
    QVERIFY(on_551.end_ns - on_551.start_ns < whole.end_ns - whole.start_ns);
    QTest::keyClick(t, Qt::Key_PageDown);
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 3, 10000);
    QCOMPARE(stepped.back().at(0).toInt(), 552);
    QVERIFY(t->window().start_ns > on_551.start_ns);
    QTest::keyClick(t, Qt::Key_PageDown);  // the last stays
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 4, 10000);
    QCOMPARE(stepped.back().at(0).toInt(), 552);
    QCOMPARE(view.findChild<QLabel*>(QStringLiteral("run_search_status"))->text(),
             QStringLiteral("step 552"));
    // Zoomed into step 551 (not the view PageUp gave): forward is 552.
    QTest::keyClick(t, Qt::Key_PageUp);
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 5, 10000);
    t->zoom(3, on_551.start_ns + (on_551.end_ns - on_551.start_ns) / 2);
    QTest::keyClick(t, Qt::Key_PageDown);
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 6, 10000);
    QCOMPARE(stepped.back().at(0).toInt(), 552);
    // From the whole run: forward is the first step, back the first too.
    t->resetZoom();
    QTest::keyClick(t, Qt::Key_PageDown);
    QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 7, 10000);
    QCOMPARE(stepped.back().at(0).toInt(), 551);
    t->resetZoom();
  }

  // Search, stepping to matches on rank 1: each is zoomed to a few pixels
  // at least and its lane scrolled into the view.
  auto* scroll = qobject_cast<QScrollArea*>(t->parentWidget()->parentWidget());
  QVERIFY(scroll);
  QVERIFY2(scroll->verticalScrollBar()->maximum() > 0, "the lanes fit: nothing to scroll to");
  QSignalSpy moved(t, &TimelineWidget::searchMoved);
  view.searchField()->setText(QStringLiteral("ncclKernel"));
  QTest::keyClick(view.searchField(), Qt::Key_Return);
  QTRY_COMPARE_WITH_TIMEOUT(moved.count(), 1, 30000);
  const int matches = moved.front().at(1).toInt();
  QVERIFY(matches > 2);
  // Shift+Enter goes back (to the last, from the first).
  QTest::keyClick(view.searchField(), Qt::Key_Return, Qt::ShiftModifier);
  QCOMPARE(moved.back().at(0).toInt(), matches - 1);
  QTest::keyClick(view.searchField(), Qt::Key_Return);
  QCOMPARE(moved.back().at(0).toInt(), 0);
  bool reached_rank1 = false;
  for (int step = 0; step < matches && !reached_rank1; ++step) {
    const trace::StoredEvent e = *t->selectedEvent();
    QVERIFY(t->window().start_ns <= e.event.start_ns && e.event.end_ns <= t->window().end_ns);
    QVERIFY2(t->xOf(e.event.end_ns) - t->xOf(e.event.start_ns) >= 3,
             qPrintable(QStringLiteral("match %1 is %2 px wide")
                            .arg(step)
                            .arg(t->xOf(e.event.end_ns) - t->xOf(e.event.start_ns))));
    if (e.rank == 1) {
      reached_rank1 = true;
      int index = -1;
      for (int i = 0; i < t->laneCount(); ++i) {
        if (t->laneInfo(i).id.value == e.event.lane.value) index = i;
      }
      const QRectF r = t->laneRect(index);
      QTRY_VERIFY_WITH_TIMEOUT(scroll->verticalScrollBar()->value() <= r.top() &&
                                   scroll->verticalScrollBar()->value() +
                                           scroll->viewport()->height() >= r.bottom(),
                               5000);
    } else {
      QTest::keyClick(view.searchField(), Qt::Key_Return);
    }
  }
  QVERIFY(reached_rank1);

  // A kernel's instances: counted, sortable by duration, and walking them
  // keeps the list in front.
  QTabWidget* tabs = view.tabs();
  int summaries = -1;
  for (int i = 0; i < tabs->count(); ++i)
    if (tabs->tabText(i) == QStringLiteral("Kernels and communication")) summaries = i;
  QVERIFY(summaries >= 0);
  tabs->setCurrentIndex(summaries);
  view.kernelProxy()->sort(3, Qt::DescendingOrder);  // the most frequent
  const int count = view.kernelProxy()->index(0, 3).data(Qt::UserRole).toInt();
  QVERIFY(count > 3);
  QSignalSpy instances(&view, &RunView::instancesReady);
  view.showKernelInstances(0);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QCOMPARE(view.instances()->rowCount(), std::min(count, 1000));
  auto* note = view.findChild<QLabel*>(QStringLiteral("run_instances_note"));
  QVERIFY(note);
  QCOMPARE(note->text(), QStringLiteral("%1 instances").arg(count));
  view.instances()->sortItems(2, Qt::DescendingOrder);
  for (int r = 1; r < view.instances()->rowCount(); ++r) {
    QVERIFY(view.instances()->item(r - 1, 2)->data(Qt::UserRole + 1).toDouble() >=
            view.instances()->item(r, 2)->data(Qt::UserRole + 1).toDouble());
  }
  selected.clear();
  view.instances()->setCurrentCell(1, 0);
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  QCOMPARE(tabs->currentIndex(), summaries);
  QCOMPARE(t->selectedEvent()->id, view.instances()->item(1, 0)->data(Qt::UserRole).toLongLong());
  // A click on the timeline brings the details forward.
  const trace::StoredEvent walked = *t->selectedEvent();
  int walked_lane = -1;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (t->laneInfo(i).id.value == walked.event.lane.value) walked_lane = i;
  }
  selected.clear();
  const QPoint on(int(t->xOf(walked.event.start_ns + walked.event.duration_ns() / 2)),
                  int(t->laneRect(walked_lane).top()) + 8);
  // The walk moved the view: its spans are read on a worker thread, and a
  // click before they come selects nothing (one CI run under load).
  QTRY_VERIFY_WITH_TIMEOUT(!cs::gui::test::toolTipAt(t, on).isEmpty(), 30000);
  QTest::mouseClick(t, Qt::LeftButton, {}, on);
  // Waited for by what it does: under load the walk's own selection, read
  // on a worker thread, can be the first one the spy sees (one CI run).
  QTRY_COMPARE_WITH_TIMEOUT(tabs->currentIndex(), 0, 30000);
  QVERIFY(selected.count() >= 1);
  // Esc clears the selection; with no range selected, the instances stay.
  const int listed = view.instances()->rowCount();
  QTest::keyClick(t, Qt::Key_Escape);
  QVERIFY(!t->selectedEvent());
  QCOMPARE(view.instances()->rowCount(), listed);
  QCOMPARE(note->text(), QStringLiteral("%1 instances").arg(count));
  // A selection made before a walk's answer came (here the search's kind:
  // a click may let the answer in first) still brings its own details
  // forward: only the walked event's keep the list in front. (The answer
  // comes at once where its read ended before pick() waited for it.)
  tabs->setCurrentIndex(summaries);
  selected.clear();
  view.instances()->setCurrentCell(2, 0);
  QVERIFY(view.instances()->item(2, 0)->data(Qt::UserRole).toLongLong() != walked.id);
  t->selectEvent(walked.id);
  QTRY_VERIFY_WITH_TIMEOUT(t->selectedEvent() && t->selectedEvent()->id == walked.id, 30000);
  QCOMPARE(tabs->currentIndex(), 0);
  QTest::keyClick(t, Qt::Key_Escape);

  // From a launch to the kernel it ran and back, by CUPTI's correlation id.
  {
    auto reader = trace::TraceReader::open(store);
    QVERIFY(reader);
    auto launches = (*reader)->find_events("cudaLaunchKernel", trace::NameMatch::exact, 50);
    QVERIFY(launches && !launches->empty());
    const auto launch = std::find_if(launches->begin(), launches->end(), [](const auto& e) {
      return e.event.correlation != 0;
    });
    QVERIFY(launch != launches->end());
    selected.clear();
    t->selectEvent(launch->id);
    QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
    QVERIFY2(view.details()->toHtml().contains(QStringLiteral("href=\"correlated\"")),
             qPrintable(view.details()->toPlainText()));
    QVERIFY(view.details()->toPlainText().contains(QStringLiteral("Show what this call ran on the GPU")));
    // Linked at once, as Nsight Systems and Perfetto draw a flow: the kernel
    // it ran is outlined, an arrow goes to it, and the details say how long
    // after the call the GPU started it.
    QTRY_VERIFY_WITH_TIMEOUT(t->linkedEvent(), 30000);
    QCOMPARE(t->linkedEvent()->event.kind, trace::EventKind::kernel);
    QCOMPARE(t->linkedEvent()->event.correlation, launch->event.correlation);
    QVERIFY(t->linkedEvent()->event.start_ns >= launch->event.start_ns);
    QTRY_VERIFY2_WITH_TIMEOUT(
        view.details()->toPlainText().contains(QStringLiteral("after the call began")),
        qPrintable(view.details()->toPlainText()), 30000);
    const trace::StoredEvent ran = *t->linkedEvent();
    QSignalSpy correlated(&view, &RunView::correlatedShown);
    selected.clear();
    emit view.details()->anchorClicked(QUrl(QStringLiteral("correlated")));
    QTRY_COMPARE_WITH_TIMEOUT(correlated.count(), 1, 30000);
    QVERIFY2(correlated.front().at(1).toString().isEmpty(),
             qPrintable(correlated.front().at(1).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
    const trace::StoredEvent kernel_run = *t->selectedEvent();
    QCOMPARE(kernel_run.event.kind, trace::EventKind::kernel);
    QCOMPARE(kernel_run.event.correlation, launch->event.correlation);
    QCOMPARE(kernel_run.rank, launch->rank);
    QVERIFY(kernel_run.event.start_ns >= launch->event.start_ns);
    QVERIFY(view.details()->toPlainText().contains(QStringLiteral("Show the call that launched it")));
    // How it was launched, as the profile recorded it.
    QVERIFY(kernel_run.launch);
    const trace::KernelLaunch& l = *kernel_run.launch;
    QVERIFY2(
        view.details()->toPlainText().contains(
            QStringLiteral("grid\n%1 × %2 × %3").arg(l.grid[0]).arg(l.grid[1]).arg(l.grid[2])) &&
            view.details()->toPlainText().contains(
                QStringLiteral("registers per thread\n%1").arg(l.registers_per_thread)),
        qPrintable(view.details()->toPlainText()));
    QCOMPARE(kernel_run.id, ran.id);  // the kernel the link drew
    QTRY_VERIFY_WITH_TIMEOUT(t->linkedEvent() && t->linkedEvent()->id == launch->id, 30000);
    t->repaint();
    cs::gui::test::saveScreenshot(t, QStringLiteral("run-timeline-launch-link"));
    // F: the selected event fills the view, a tenth of margin each side.
    QTest::keyClick(t, Qt::Key_F);
    const std::int64_t length = std::max<std::int64_t>(kernel_run.event.duration_ns(), 100);
    QVERIFY(t->window().start_ns <= kernel_run.event.start_ns);
    QVERIFY(t->window().end_ns >= kernel_run.event.end_ns);
    QVERIFY(t->window().end_ns - t->window().start_ns <= length * 5 / 4);
    selected.clear();
    emit view.details()->anchorClicked(QUrl(QStringLiteral("correlated")));
    QTRY_COMPARE_WITH_TIMEOUT(correlated.count(), 2, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
    QCOMPARE(t->selectedEvent()->id, launch->id);
    // A selection without a correlation links nothing.
    QTest::keyClick(t, Qt::Key_Escape);
    QVERIFY(!t->linkedEvent());
  }

  // Another run held against this one (Tools ▸ Compare the open run with…):
  // here the CPU engine's run, and a file that is not there.
  {
    QSignalSpy compared(&view, &RunView::comparisonReady);
    view.compareWith(cpu_store_);
    QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60000);
    QVERIFY2(compared.front().at(0).toString().isEmpty(),
             qPrintable(compared.front().at(0).toString()));
    QTableWidget* c = view.comparisonTable();
    QCOMPARE(tabs->currentWidget(), c);
    QCOMPARE(tabs->tabText(tabs->currentIndex()),
             QStringLiteral("Compared with %1").arg(QFileInfo(cpu_store_).fileName()));
    QStringList names;
    for (int r = 0; r < c->rowCount(); ++r) names << c->item(r, 0)->text();
    QVERIFY2(names.contains(QStringLiteral("compute")), qPrintable(names.join('|')));
    QVERIFY(names.contains(QStringLiteral("Kernels whose time changed most")));
    QVERIFY(names.contains(QStringLiteral(
        "Compute by operation kind (kernel names change with precision and library)")));
    QVERIFY(names.contains(QStringLiteral("GEMM compute")));
    // Beyond the kernels, as trace compare: the engines' ranges (phases) too.
    QVERIFY2(names.contains(QStringLiteral("Annotation ranges whose time changed most")),
             qPrintable(names.join('|')));
    QVERIFY2(names.first().contains(QStringLiteral("per rank and step")), qPrintable(names.first()));
    compared.clear();
    view.compareWith(dir_.filePath(QStringLiteral("no-such-run.db")));
    QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60000);
    QVERIFY2(compared.front().at(0).toString().contains(QStringLiteral("no-such-run.db")),
             qPrintable(compared.front().at(0).toString()));
  }

  // A range: the tables and the instances hold what it reaches.
  auto* scope = view.findChild<QLabel*>(QStringLiteral("run_summaries_scope"));
  QVERIFY(scope);
  QCOMPARE(scope->text(), QStringLiteral("The whole run"));
  const QString kernel = view.kernelProxy()->index(0, 0).data().toString();
  const trace::TimeRange full = t->fullRange();
  QSignalSpy ready(&view, &RunView::rangeReady);
  t->setSelectedRange(trace::TimeRange{full.start_ns, full.start_ns + (full.end_ns - full.start_ns) / 5});
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  QVERIFY2(scope->text().startsWith(QStringLiteral("In the selected range")), qPrintable(scope->text()));
  int in_range = 0;
  for (int r = 0; r < view.kernelProxy()->rowCount(); ++r) {
    if (view.kernelProxy()->index(r, 0).data().toString() == kernel)
      in_range = view.kernelProxy()->index(r, 3).data(Qt::UserRole).toInt();
  }
  QVERIFY2(in_range < count, qPrintable(QStringLiteral("%1 of %2").arg(in_range).arg(count)));
  ready.clear();
  t->setSelectedRange(std::nullopt);
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  QCOMPARE(scope->text(), QStringLiteral("The whole run"));
}

void TestGuiRun::collapseRank() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  const double open = t->renderHeight();
  int last_lane_of_rank1 = -1;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (t->laneInfo(i).rank == 1) last_lane_of_rank1 = i;
  }
  QVERIFY(last_lane_of_rank1 >= 0);
  QVERIFY(!t->laneRect(last_lane_of_rank1).isEmpty());
  t->setRankCollapsed(1, true);
  QVERIFY(t->renderHeight() < open);
  QVERIFY(t->laneRect(last_lane_of_rank1).isEmpty());
  t->setRankCollapsed(1, false);
  QCOMPARE(t->renderHeight(), open);
}

// Scrolled down the lanes (to another rank's, as a search or the wheel
// takes the view), the time axis stays at the top of what is on screen, as
// Nsight Systems' ruler does: it scrolled away with the first lanes, and the
// view showed no time at all.
void TestGuiRun::timeAxisStaysOnScreen() {
  RunView view;
  view.resize(1000, 360);  // fewer lanes on screen than the run's two ranks hold
  view.show();
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  QScrollArea* area = nullptr;
  for (QWidget* p = t->parentWidget(); p && !area; p = p->parentWidget())
    area = qobject_cast<QScrollArea*>(p);
  QVERIFY(area);
  QScrollBar* bar = area->verticalScrollBar();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->paintedJob() == t->frameJob(), 30000);
  QVERIFY2(bar->maximum() > 60, qPrintable(QString::number(bar->maximum())));
  // The axis's labels, in the top 16 px of the view (its tick lines start below).
  auto axis = [&] {
    const QImage image = area->viewport()->grab().toImage();
    const double ratio = image.devicePixelRatio();
    return image.copy(0, 0, image.width(), int(16 * ratio));
  };
  const QImage unscrolled = axis();
  QVERIFY(cs::gui::test::distinctColours(unscrolled) > 2);  // labels drawn
  for (int value : {bar->maximum() / 2, bar->maximum()}) {
    bar->setValue(value);
    QTRY_VERIFY_WITH_TIMEOUT(!t->busy(), 30000);
    QCoreApplication::processEvents();
    QVERIFY2(axis() == unscrolled,
             qPrintable(QStringLiteral("no time axis at the top, scrolled %1 px").arg(value)));
  }
  // A click on the axis held there selects nothing under it.
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  const QPoint on_axis(t->gutterWidth() + t->spanAreaWidth() / 2, bar->value() + 8);
  QTest::mouseClick(t, Qt::LeftButton, {}, on_axis);
  QCOMPARE(selected.count(), 0);
}

// A selected range's duration is written just below the time axis, which
// stays at the top of what is on screen: it was written with the lanes, so
// scrolled down it went under the pinned axis, then out of sight.
void TestGuiRun::rangeLabelStaysUnderTheAxis() {
  RunView view;
  view.resize(1000, 800);  // fewer lanes on screen than the run's two ranks hold
  view.show();
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  QScrollArea* area = nullptr;
  for (QWidget* p = t->parentWidget(); p && !area; p = p->parentWidget())
    area = qobject_cast<QScrollArea*>(p);
  QVERIFY(area);
  QScrollBar* bar = area->verticalScrollBar();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->paintedJob() == t->frameJob(), 30000);
  const trace::TimeRange w = t->window();
  QSignalSpy ready(&view, &RunView::rangeReady);
  t->setSelectedRange(trace::TimeRange{w.start_ns + (w.end_ns - w.start_ns) / 3,
                                       w.end_ns - (w.end_ns - w.start_ns) / 3});
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  // The range's tables beside it leave room for the axis and the label, and
  // lanes to scroll.
  QVERIFY2(area->viewport()->height() > 60,
           qPrintable(QString::number(area->viewport()->height())));
  QVERIFY2(bar->maximum() > 60, qPrintable(QString::number(bar->maximum())));
  // The label's place in the viewport, and its pixels there.
  auto label = [&] {
    QCoreApplication::processEvents();
    const QRect at = t->rangeLabelRect().toAlignedRect();
    const QRect in_view(t->mapTo(area->viewport(), at.topLeft()), at.size());
    const QImage image = area->viewport()->grab().toImage();
    const double ratio = image.devicePixelRatio();
    return std::make_pair(in_view,
                          image.copy(QRect(in_view.topLeft() * ratio, in_view.size() * ratio)));
  };
  const auto [place, unscrolled] = label();
  QVERIFY(!place.isEmpty());
  QCOMPARE(place.top(), 20);                                // below the axis, 20 px high
  QVERIFY(cs::gui::test::distinctColours(unscrolled) > 2);  // the duration written
  for (int value : {10, bar->maximum() / 2, bar->maximum()}) {
    bar->setValue(value);
    QTRY_VERIFY_WITH_TIMEOUT(!t->busy(), 30000);
    const auto [scrolled_place, scrolled] = label();
    QCOMPARE(scrolled_place, place);
    QVERIFY2(
        scrolled == unscrolled,
        qPrintable(QStringLiteral("no range label under the axis, scrolled %1 px").arg(value)));
  }
}

void TestGuiRun::manyLanesLoadWhatIsInView() {
  // 3000 lanes (a Chrome trace's thread ids): the view asks for and paints
  // the lanes in view, and those a scroll or a fold brings in.
  constexpr int kLanes = 3000;
  const QString path = dir_.filePath(QStringLiteral("many-lanes.db"));
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    for (int r = 0; r < 3; ++r)
      (*w)->add_rank({r, "host", "CPU", 1 + r, 0, false});
    const trace::StringId name = (*w)->intern("aten::mm");
    for (int i = 0; i < kLanes; ++i) {
      // Rank 1 holds ten lanes between the other two's.
      const int rank = i < kLanes / 2 ? 0 : i < kLanes / 2 + 10 ? 1 : 2;
      trace::Event e;
      e.lane = (*w)->add_lane(rank, trace::LaneKind::cpu_thread, "thread " + std::to_string(i));
      e.kind = trace::EventKind::cpu_op;
      e.name = name;
      for (int k = 0; k < 3; ++k) {
        e.start_ns = 1'000'000 * k + i;
        e.end_ns = e.start_ns + 500'000;
        (*w)->add(e);
      }
      if (i == kLanes - 1) {  // one event nested in the last lane's first
        e.name = (*w)->intern("needle");
        e.start_ns = 100'000;
        e.end_ns = 200'000;
        (*w)->add(e);
      }
    }
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 800);
  view.show();
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  QCOMPARE(t->laneCount(), kLanes);
  auto covered = [t] {
    const auto [first, last] = t->lanesInView();
    const auto [frame_first, frame_last] = t->frameLanes();
    return !t->busy() && first < last && frame_first <= first && last <= frame_last;
  };
  QTRY_VERIFY_WITH_TIMEOUT(covered(), 30000);
  const auto [first, last] = t->frameLanes();
  QVERIFY2(first == 0 && last - first < 300,
           qPrintable(QStringLiteral("the frame holds lanes %1 to %2").arg(first).arg(last)));

  // Scrolled to the end: the last lane's spans are loaded, drawn, and a click
  // on one selects it.
  QScrollArea* area = nullptr;
  for (QWidget* p = t->parentWidget(); p && !area; p = p->parentWidget())
    area = qobject_cast<QScrollArea*>(p);
  QVERIFY(area);
  area->verticalScrollBar()->setValue(area->verticalScrollBar()->maximum());
  QTRY_VERIFY_WITH_TIMEOUT(covered() && t->lanesInView().second == kLanes, 30000);
  t->repaint();
  QVERIFY(t->drawnItems() > 0);
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  const QRectF row = t->laneRect(kLanes - 1);
  t->selectAt(QPoint(int(t->xOf(1'000'000 + 250'000 + kLanes - 1)), int(row.top()) + 8));
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 10000);
  QVERIFY(t->selectedEvent());
  QCOMPARE(t->selectedEvent()->event.lane.value, t->laneInfo(kLanes - 1).id.value);

  // Back at the top with rank 0 folded: rank 1's first lanes come into view
  // and are loaded.
  area->verticalScrollBar()->setValue(0);
  t->setRankCollapsed(0, true);
  QTRY_VERIFY_WITH_TIMEOUT(covered() && t->lanesInView().first == kLanes / 2, 30000);
  QVERIFY(t->frameLanes().second - t->frameLanes().first < kLanes / 2);

  // Found far below the lanes in hand: the nested event is outlined on its
  // own row once its lane's spans come (it was drawn on row 0, its parent's).
  t->setRankCollapsed(0, false);
  t->findNext(QStringLiteral("needle"));
  QTRY_VERIFY_WITH_TIMEOUT(t->selectedEvent() && covered() && t->lanesInView().second == kLanes &&
                               t->frameJob() == t->requestedJob(),
                           30000);
  QCOMPARE(t->selectedEvent()->event.lane.value, t->laneInfo(kLanes - 1).id.value);
  QCOMPARE(t->selectedRow(), 1);

  // A report's picture holds the lanes it has room for and counts the rest
  // (all 3000 made an image 60,000 pixels tall).
  t->setRankCollapsed(0, false);
  const QString html = dir_.filePath(QStringLiteral("many-lanes.html"));
  QVERIFY(view.exportNow(RunExport::html, html).ok());
  QFile report(html);
  QVERIFY(report.open(QIODevice::ReadOnly));
  const QByteArray text = report.readAll();
  QVERIFY(text.contains("thread 0<") || text.contains("thread 0 "));
  QVERIFY2(text.contains("more lanes, not drawn here"), text.right(2000).constData());
  QVERIFY(!text.contains("thread 2999"));
  // It draws the lanes it holds whole and counts every other: the lane the
  // picture's bottom cut through was drawn, and not counted.
  const double room = t->pictureHeight() - t->laneRect(0).height();  // less the last row
  int whole = 0;
  while (whole < kLanes && t->laneRect(whole).bottom() <= room)
    ++whole;
  const QString counted = QStringLiteral("and %1 more lanes, not drawn here").arg(kLanes - whole);
  QVERIFY2(text.contains(counted.toUtf8()),
           qPrintable(counted + " in " + QString::fromUtf8(text.right(600))));
  QVERIFY(text.contains(QStringLiteral("thread %1<").arg(whole - 1).toUtf8()) ||
          text.contains(QStringLiteral("thread %1 ").arg(whole - 1).toUtf8()));
  QVERIFY(!text.contains(QStringLiteral("thread %1<").arg(whole).toUtf8()) &&
          !text.contains(QStringLiteral("thread %1 ").arg(whole).toUtf8()));

  // A rank folded between two others, the view zoomed, the rank unfolded:
  // its lanes are asked for again. The queries while it was folded held
  // them empty inside the range asked for, and they stayed blank.
  auto settled = [&] { return covered() && t->frameJob() == t->requestedJob(); };
  const int middle = kLanes / 2 + 5;  // one of rank 1's
  area->ensureVisible(0, int(t->laneRect(middle).center().y()), 0, 100);
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);
  t->setRankCollapsed(1, true);
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);
  const trace::TimeRange full = t->fullRange();
  t->setWindow(full.start_ns, full.start_ns + (full.end_ns - full.start_ns) / 2);
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);
  t->setRankCollapsed(1, false);
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);
  selected.clear();
  t->selectAt(QPoint(int(t->xOf(250'000 + middle)), int(t->laneRect(middle).top()) + 8));
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 10000);
  QVERIFY(t->selectedEvent());
  QCOMPARE(t->selectedEvent()->event.lane.value, t->laneInfo(middle).id.value);

  // The viewport grows (a taller window) with the scroll in the middle:
  // neither moved nor resized, the widget still asks for the lanes come
  // into view.
  area->verticalScrollBar()->setValue(area->verticalScrollBar()->maximum() / 2);
  QTRY_VERIFY_WITH_TIMEOUT(covered(), 30000);
  const int shown_before = t->lanesInView().second - t->lanesInView().first;
  view.resize(1200, 2400);
  QTRY_VERIFY_WITH_TIMEOUT(t->lanesInView().second - t->lanesInView().first > 2 * shown_before,
                           10000);
  QTRY_VERIFY_WITH_TIMEOUT(covered(), 30000);
}

// A run titled with "%1" or "%2" (a plan's name, a program's): the header
// put the source and the store's path in their place, and read "%4%5".
void TestGuiRun::titleWithPercentDigitsReadsAsWritten() {
  const QString path = dir_.filePath(QStringLiteral("percent-title.db"));
  {
    trace::RunInfo run;
    run.title = "batch %1 of %2";
    run.source = "profile";
    QVERIFY(writeOneKernelRun(path, run, "gemm"));
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, path);
  const QString header = view.header()->text();
  QVERIFY2(
      header.startsWith(QStringLiteral("<b>batch %1 of %2</b> — 1 rank · source profile · ")) &&
          header.contains(QFileInfo(path).absoluteFilePath()) &&
          !header.contains(QStringLiteral("%4")),
      qPrintable(header));
}

// Each store opened writes the planner's step for its lanes into a temporary
// store: every one stayed until the app ended (half a megabyte for a run of
// three steps, each time a run was opened again). Those no longer shown go.
void TestGuiRun::predictedStoresDoNotPileUp() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  QStringList written;
  for (int i = 0; i < 4; ++i) {
    openAndWait(view, cpu_store_);
    QTRY_VERIFY_WITH_TIMEOUT(!view.predictedTimeline()->storePath().isEmpty() &&
                                 !written.contains(view.predictedTimeline()->storePath()),
                             20000);
    written << view.predictedTimeline()->storePath();
  }
  QTRY_VERIFY_WITH_TIMEOUT(
      !view.predictedTimeline()->busy() && view.predictedTimeline()->laneCount() > 0, 20000);
  for (int i = 0; i < written.size(); ++i) {
    const bool kept = QFileInfo::exists(written[i]);
    QVERIFY2(kept == (i >= written.size() - 2), qPrintable(written[i]));
  }
}

void TestGuiRun::exports() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  const QString kernel = view.kernelProxy()->index(0, 0).data().toString();

  const QString html = dir_.filePath(QStringLiteral("run.html"));
  QVERIFY(view.exportNow(RunExport::html, html).ok());
  QFile h(html);
  QVERIFY(h.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(h.readAll());
  QVERIFY(text.contains(QStringLiteral("gui test run")));
  QVERIFY(text.contains(kernel.toHtmlEscaped()));
  QVERIFY(text.contains(QStringLiteral("<h2>Timeline</h2>")));
  // The GEMM rates, as trace stats gives them: the view's own analysis
  // leaves them out, the report computes them.
  QVERIFY(text.contains(QStringLiteral("<h2>Operations with FLOPs (all ranks, all steps)</h2>")));
  // The picture is of one step past the warm-up.
  QVERIFY2(text.contains(QStringLiteral("<p>step 1 of rank 0:")), "no picture of step 1");
  QVERIFY(text.count(QStringLiteral("<svg")) >= 2);       // the core's charts and the timeline
  QVERIFY(!text.contains(QStringLiteral("src=\"http")));  // self-contained
  // The timeline's SVG inlined as HTML takes it: no XML declaration in the page.
  QVERIFY(!text.contains(QStringLiteral("<?xml")));
  // Every picture fits the report's column, as a browser lays it out: the
  // timeline, drawn 1000 px wide, was written 352.8 mm wide (1333 px at a
  // CSS pixel's 96 an inch) in a column of 1100 px, its end off a window
  // of 1280 px.
  const double column = cs::gui::test::bodyMaxWidthPixels(text);
  QVERIFY(column > 0);
  QVERIFY2(cs::gui::test::widestSvgPixels(text) <= column,
           qPrintable(QStringLiteral("a picture %1 px wide in a column of %2 px")
                          .arg(cs::gui::test::widestSvgPixels(text))
                          .arg(column)));
  // The run's prediction is of the step alone: no empty table under a
  // legend of a chart that is not there.
  QVERIFY(text.contains(QStringLiteral("<h2>Predicted against measured</h2>")));
  QVERIFY(!text.contains(QStringLiteral("Grey: predicted")));
  QFile::remove(QStringLiteral(CS_SCREENSHOT_DIR "/run-report.html"));  // copy never replaces
  QFile::copy(html, QStringLiteral(CS_SCREENSHOT_DIR "/run-report.html"));

  // The PDF's breakdown chart, drawn while its tab has never been shown.
  auto* chart = view.findChild<QWidget*>(QStringLiteral("run_breakdown_chart"));
  QVERIFY(chart && !chart->isVisible());
  double dominant = 0;
  QVERIFY2(cs::gui::test::distinctColours(view.breakdownPicture(), &dominant) > 8,
           "the breakdown chart's picture is blank");
  QVERIFY(!chart->isVisible());

  const QString pdf = dir_.filePath(QStringLiteral("run.pdf"));
  QVERIFY(view.exportNow(RunExport::pdf, pdf).ok());
  QFile p(pdf);
  QVERIFY(p.open(QIODevice::ReadOnly));
  const QByteArray pdf_bytes = p.readAll();
  QVERIFY(pdf_bytes.startsWith("%PDF"));
  QVERIFY(pdf_bytes.size() > 10000);
  // The bars, the timeline and the core report's charts (drawn from its SVG).
  QVERIFY2(pdf_bytes.count("/Subtype /Image") >= 3,
           qPrintable(QString::number(pdf_bytes.count("/Subtype /Image"))));
  QVERIFY(pdf_bytes.count("/Type /Page\n") + pdf_bytes.count("/Type /Page ") +
              pdf_bytes.count("/Type /Page/") + pdf_bytes.count("/Type /Page>") >=
          1);
  QFile::remove(QStringLiteral(CS_SCREENSHOT_DIR "/run-report.pdf"));
  QFile::copy(pdf, QStringLiteral(CS_SCREENSHOT_DIR "/run-report.pdf"));

  // What the PDF lays out: one breakdown per rank, the Run view's (core's
  // has other categories and colours); every picture with a width and a
  // height in its own aspect (a width alone squashed each); the plan as a
  // short table, not a page and a half of JSON; nothing wider than the page.
  {
    auto reader = trace::TraceReader::open(cpu_store_.toStdString());
    QVERIFY(reader.ok());
    auto analysis = trace::analyze_run(*reader.value());
    QVERIFY(analysis.ok());
    const QString core_path = dir_.filePath(QStringLiteral("core.html"));
    QVERIFY(trace::export_html_report(*reader.value(), analysis.value(), core_path.toStdString()));
    QFile core_file(core_path);
    QVERIFY(core_file.open(QIODevice::ReadOnly));
    const QString core = QString::fromUtf8(core_file.readAll());
    QVERIFY(core.contains(QStringLiteral("aria-label=\"time breakdown per rank\"")));
    QVERIFY(core.contains(QStringLiteral("plan (JSON)")));
    const QImage breakdown = view.breakdownPicture();
    QImage timeline(1000, 180, QImage::Format_ARGB32);
    timeline.fill(Qt::white);
    QTextDocument document;
    const QString laid = RunView::pdfReportDocument(document, core, breakdown, timeline);
    QVERIFY(!laid.contains(QStringLiteral("<svg")));
    QVERIFY(!laid.contains(QStringLiteral("time breakdown per rank")));
    QCOMPARE(laid.count(QStringLiteral("cs://breakdown")), 1);
    QCOMPARE(laid.count(QStringLiteral("cs://timeline")), 1);
    QVERIFY(!laid.contains(QStringLiteral("<pre")));
    QVERIFY(laid.contains(QStringLiteral("<th>parallel</th>")));
    const QRegularExpression img(
        QStringLiteral("<img src=\"([^\"]+)\" width=\"(\\d+)\" height=\"(\\d+)\">"));
    int pictures = 0;
    for (auto it = img.globalMatch(laid); it.hasNext(); ++pictures) {
      const QRegularExpressionMatch m = it.next();
      const QImage picture =
          document.resource(QTextDocument::ImageResource, QUrl(m.captured(1))).value<QImage>();
      QVERIFY2(!picture.isNull(), qPrintable(m.captured(1)));
      const double shown = m.captured(2).toDouble() / m.captured(3).toDouble();
      const double drawn = double(picture.width()) / picture.height();
      QVERIFY2(
          std::abs(shown / drawn - 1) < 0.02,
          qPrintable(QStringLiteral("%1: %2 against %3").arg(m.captured(1)).arg(shown).arg(drawn)));
    }
    QCOMPARE(pictures, int(laid.count(QStringLiteral("<img"))));  // each with both
    QVERIFY(pictures >= 3);
    QVERIFY2(document.documentLayout()->documentSize().width() <= document.pageSize().width() + 0.5,
             qPrintable(QStringLiteral("%1 px on a %2 px page")
                            .arg(document.documentLayout()->documentSize().width())
                            .arg(document.pageSize().width())));
  }

  auto csv = view.exportNow(RunExport::csv, dir_.filePath(QStringLiteral("run")));
  if (!csv.ok()) QFAIL(csv.message().c_str());
  QVERIFY(csv.value().size() >= 5);
  for (const QString& file : csv.value()) {
    QFile f(file);
    QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(file));
    QVERIFY(f.readLine().contains(','));  // a header row
  }
  QFile kernels(dir_.filePath(QStringLiteral("run.kernels.csv")));
  QVERIFY(kernels.open(QIODevice::ReadOnly));
  QVERIFY(kernels.readAll().contains(kernel.toUtf8()));
  kernels.close();
  // A folder named as one of the tables: refused by name before any table is
  // written (the tables before it were replaced, those after it left from
  // the export before).
  {
    const QString again = dir_.filePath(QStringLiteral("again"));
    QVERIFY(QDir().mkpath(again + QStringLiteral(".kernels.csv")));
    auto refused = view.exportNow(RunExport::csv, again);
    QVERIFY(!refused.ok());
    QVERIFY2(QString::fromStdString(refused.message())
                 .contains(again + QStringLiteral(".kernels.csv: is a folder")),
             refused.message().c_str());
    QVERIFY(!QFile::exists(again + QStringLiteral(".events.csv")));
  }

  // Chrome trace: the whole run, then only the first quarter.
  auto events_in = [](const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return -1;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll());
    int n = 0;
    for (const QJsonValue& v : doc.object().value(QStringLiteral("traceEvents")).toArray()) {
      if (v.toObject().value(QStringLiteral("ph")).toString() == QStringLiteral("X")) ++n;
    }
    return n;
  };
  const QString chrome = dir_.filePath(QStringLiteral("run.json"));
  QVERIFY(view.exportNow(RunExport::chrome_trace, chrome).ok());
  const int all = events_in(chrome);
  QVERIFY(all > 0);
  // With the critical path: the same slices, and each step's path on a
  // process of its own, named in otherData as the CLI's export names it.
  {
    const QString with_path = dir_.filePath(QStringLiteral("run-path.json"));
    auto written = view.exportNow(RunExport::chrome_trace_critical_path, with_path);
    QVERIFY2(written.ok(), written.ok() ? "" : written.message().c_str());
    QFile f(with_path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
    const QJsonValue pid = doc.value(QStringLiteral("otherData"))
                               .toObject()
                               .value(QStringLiteral("critical_path_pid"));
    QVERIFY2(pid.isDouble(), "no critical_path_pid in otherData");
    int on_path = 0, elsewhere = 0;
    for (const QJsonValue& v : doc.value(QStringLiteral("traceEvents")).toArray()) {
      const QJsonObject e = v.toObject();
      if (e.value(QStringLiteral("ph")).toString() != QStringLiteral("X")) continue;
      if (e.value(QStringLiteral("pid")).toDouble() == pid.toDouble()) {
        ++on_path;
      } else {
        ++elsewhere;
      }
    }
    QVERIFY(on_path > 0);
    QCOMPARE(elsewhere, all);
  }
  // Range exports need a range.
  QVERIFY(
      !view.exportNow(RunExport::chrome_trace, dir_.filePath(QStringLiteral("none.json")), true)
           .ok());
  const trace::TimeRange full = view.timeline()->fullRange();
  view.timeline()->setSelectedRange(
      trace::TimeRange{full.start_ns, full.start_ns + (full.end_ns - full.start_ns) / 4});
  const QString part = dir_.filePath(QStringLiteral("part.json"));
  QVERIFY(view.exportNow(RunExport::chrome_trace, part, true).ok());
  const int some = events_in(part);
  QVERIFY(some > 0);
  QVERIFY(some < all);
  const QString part_html = dir_.filePath(QStringLiteral("part.html"));
  QVERIFY(view.exportNow(RunExport::html, part_html, true).ok());
  QVERIFY(QFileInfo(part_html).size() > 1000);
  QFile part_file(part_html);
  QVERIFY(part_file.open(QIODevice::ReadOnly));
  const QString part_text = QString::fromUtf8(part_file.readAll());
  QVERIFY(part_text.contains(QStringLiteral("<p>the selected range:")));
  // Said under the title too, before any figure.
  QVERIFY(part_text.indexOf(QStringLiteral("A range of the run: 0.000 to ")) <
          part_text.indexOf(QStringLiteral("<h2>Run</h2>")));
  QVERIFY(part_text.contains(QStringLiteral("A range of the run: 0.000 to ")));
  // A folder that is not there: a message.
  const auto bad =
      view.exportNow(RunExport::html, dir_.filePath(QStringLiteral("no/such/dir/r.html")));
  QVERIFY(!bad.ok());
  QVERIFY(!bad.message().empty());
}

void TestGuiRun::committedTraces_data() {
  QTest::addColumn<QString>("path");
  QTest::addColumn<bool>("version1");  // of trace schema 1: upgraded in place when opened
  QTest::addRow("CUDA engine bf16") << QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db") << false;
  QTest::addRow("CUDA engine fp8") << QStringLiteral(CS_DATA_DIR "/gpu/worker-fp8.db") << false;
  QTest::addRow("CUDA engine bf16, schema 1")
      << QStringLiteral(CS_DATA_DIR "/gpu/schema-v1/worker-bf16.db") << true;
  QTest::addRow("bandwidth sweep")
      << QStringLiteral(CS_DATA_DIR "/gpu/sweep-bandwidth.db") << false;
}

void TestGuiRun::committedTraces() {
  QFETCH(QString, path);
  QFETCH(bool, version1);
  // Read from a copy: opening may finalize a store in place.
  const QString copy = writableCopy(path, QFileInfo(path).fileName());
  QVERIFY(!copy.isEmpty());
  // A store of trace schema 1 is upgraded in place as it opens, which
  // changes the user's file: the header says so, as the CLI does (it was
  // silent).
  RunView view;
  view.resize(1200, 900);
  view.show();
  QSignalSpy analysed(&view, &RunView::analysisReady);
  view.openStore(copy);
  QTRY_COMPARE_WITH_TIMEOUT(analysed.count(), 1, 60000);
  QVERIFY2(view.message().isEmpty(), qPrintable(view.message()));
  QCOMPARE(view.header()->text().contains(
               QStringLiteral("was of trace schema version 1: upgraded in place to version")),
           version1);
  QVERIFY(view.analysis());
  QVERIFY(!view.analysis()->ranks.empty());
  if (view.analysis()->ranks.size() == 1) {
    QVERIFY2(view.header()->text().contains(QStringLiteral("— 1 rank ·")),
             qPrintable(view.header()->text()));
  }
  QTRY_VERIFY_WITH_TIMEOUT(view.timeline()->laneCount() > 0, 30000);
  QVERIFY(view.kernelProxy()->rowCount() > 0);
  // Long kernel names are elided, not pushing the figures out of view.
  QVERIFY(view.kernelTable()->columnWidth(0) <= 360);
  QCOMPARE(view.kernelTable()->textElideMode(), Qt::ElideMiddle);
  view.timeline()->repaint();
  const QImage shot = cs::gui::test::saveScreenshot(
      view.timeline(), QStringLiteral("run-timeline-%1").arg(QFileInfo(path).baseName()));
  double dominant = 1;
  QVERIFY(cs::gui::test::distinctColours(shot, &dominant) > 8);
  QVERIFY(dominant < 0.95);
  // One step past the warm-up, as a user zooms in to read it (README's picture).
  auto reader = cs::trace::TraceReader::open(copy.toStdString());
  QVERIFY(reader);
  const auto steps = (*reader)->steps(0);
  QVERIFY(steps);
  if (steps->size() >= 6) {
    const cs::trace::StepMetrics& step = (*steps)[5];
    view.timeline()->setWindow(step.start_ns, step.end_ns);
    QTRY_VERIFY_WITH_TIMEOUT(
        !view.timeline()->busy() && view.timeline()->frameJob() == view.timeline()->requestedJob(),
        30000);
    view.timeline()->repaint();
    TimelineWidget* t = view.timeline();
    const int lanes_bottom = int(t->laneRect(t->laneCount() - 1).bottom()) + 8;
    const QImage zoomed = cs::gui::test::saveScreenshot(
        t, QStringLiteral("run-timeline-%1-step").arg(QFileInfo(path).baseName()), lanes_bottom);
    QVERIFY(cs::gui::test::distinctColours(zoomed, &dominant) > 8);
    QVERIFY(dominant < 0.95);
  }
}

// A run titled with real tags, a kernel named so and store files named so:
// the Run view's header and the kernel table's tooltips read as written (a
// title "<b>x</b>" came out bold, "<img src=...>" as a picture; a store that
// could not be read was named in bold in the header).
void TestGuiRun::markupInNamesReadsAsWritten() {
  const QString title = QStringLiteral("<b>bold</b> <img src=\"x.png\"> & co");
  const QString kernel = QStringLiteral("<i>gemm</i><br>");
  const QString path = dir_.filePath(QStringLiteral("<b>markup-title.db"));
  {
    trace::RunInfo run;
    run.title = title.toStdString();
    QVERIFY(writeOneKernelRun(path, run, kernel.toStdString()));
  }
  RunView view;
  view.resize(1200, 900);
  view.show();
  auto* header = view.findChild<QLabel*>(QStringLiteral("run_header"));
  QVERIFY(header);
  QSignalSpy analysed(&view, &RunView::analysisReady);
  view.openStore(path);
  QVERIFY2(shownText(header->text(), header->textFormat())
               .contains(QStringLiteral("<b>markup-title.db")),
           qPrintable(header->text()));
  QTRY_COMPARE_WITH_TIMEOUT(analysed.count(), 1, 30000);
  QVERIFY2(shownText(header->text(), header->textFormat()).contains(title),
           qPrintable(header->text()));
  QVERIFY2(shownText(header->toolTip(), Qt::AutoText) == title, qPrintable(header->toolTip()));
  QAbstractItemModel* kernels = view.kernelProxy();
  QCOMPARE(kernels->rowCount(), 1);
  QCOMPARE(kernels->index(0, 0).data().toString(), kernel);
  const QString tip = kernels->index(0, 0).data(Qt::ToolTipRole).toString();
  QVERIFY2(shownText(tip, Qt::AutoText) == kernel, qPrintable(tip));

  // A store that cannot be read, named with tags.
  const QString bad = dir_.filePath(QStringLiteral("<b>not a store.db"));
  QFile file(bad);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write("not a store <b>at all</b>");
  file.close();
  QSignalSpy opened(view.timeline(), &TimelineWidget::storeOpened);
  view.openStore(bad);
  QTRY_VERIFY_WITH_TIMEOUT(!opened.isEmpty(), 30000);
  QTRY_VERIFY_WITH_TIMEOUT(header->text().contains(QStringLiteral("cannot be")), 30000);
  QVERIFY2(
      shownText(header->text(), header->textFormat()).contains(QStringLiteral("<b>not a store.db")),
      qPrintable(header->text()));
}

// A title the header cannot break (`run --title` takes 120,000 characters)
// set the window's minimum width to its own: gigabytes of pixmaps, then a
// crash painting the timeline. It is shortened, whole in the tooltip.
void TestGuiRun::longTitleKeepsTheWindow() {
  const QString path = dir_.filePath(QStringLiteral("long-title.db"));
  {
    trace::RunInfo run;
    run.title = std::string(120000, 'x');
    auto w = one_kernel_store(path, run);
    QVERIFY(w);
    QVERIFY(w->close("complete").ok());
  }
  RunView view;
  view.resize(900, 600);
  view.show();
  QSignalSpy analysed(&view, &RunView::analysisReady);
  view.openStore(path);
  QTRY_COMPARE_WITH_TIMEOUT(analysed.count(), 1, 30000);
  auto* header = view.findChild<QLabel*>(QStringLiteral("run_header"));
  QVERIFY(header);
  QVERIFY2(header->text().size() < 2000, qPrintable(QString::number(header->text().size())));
  QVERIFY(header->text().contains(QString(200, 'x') + QStringLiteral("…")));
  QVERIFY2(view.minimumSizeHint().width() < 2000,
           qPrintable(QString::number(view.minimumSizeHint().width())));
  QCOMPARE(view.width(), 900);
  view.timeline()->repaint();  // paints at the window's size
  // The search row's notes can carry a store's error, a path in it: they wrap
  // in the row, whole in their tooltip, and leave the window its width.
  const QString error = QStringLiteral("the steps could not be read: ") + QString(5000, 'y');
  for (const char* name : {"run_search_status", "run_critical_path_status"}) {
    auto* note = view.findChild<QLabel*>(QLatin1String(name));
    QVERIFY(note);
    note->setText(error);
    QVERIFY2(view.minimumSizeHint().width() < 2000,
             qPrintable(QStringLiteral("%1: %2 px").arg(name).arg(view.minimumSizeHint().width())));
  }
  const QString why = QStringLiteral("zoom in to 50 or fewer steps ") + QString(3000, 'z');
  emit view.timeline()->criticalPathChanged(why);
  QCOMPARE(view.findChild<QLabel*>(QStringLiteral("run_critical_path_status"))->toolTip(), why);
}

void TestGuiRun::importedTraces_data() {
  QTest::addColumn<QStringList>("files");
  const QString validation = QStringLiteral(CS_DATA_DIR "/validation");
  QTest::addRow("Kineto, two ranks") << QStringList{validation + "/kineto/sampled_rank-0.json.gz",
                                                    validation + "/kineto/sampled_rank-1.json.gz"};
  QTest::addRow("Nsight Systems SQLite") << QStringList{validation + "/nsys/saxpy-mpi-cuda.sqlite"};
}

// Two imports at once (the menu takes another while one is written): the
// first to end said none was going, and closing the window no longer asked
// while the other was still being written (the app stayed on out of sight).
void TestGuiRun::importGoingUntilEachEnds() {
  const QString validation = QStringLiteral(CS_DATA_DIR "/validation");
  MainWindow window;
  window.show();
  QSignalSpy imported(&window, &MainWindow::runImported);
  QList<bool> going_after;
  connect(&window, &MainWindow::runImported, this,
          [&] { going_after << window.importInProgress(); });
  window.importTrace({validation + "/nsys/saxpy-mpi-cuda.sqlite"});
  window.importTrace({validation + "/kineto/sampled_rank-0.json.gz",
                      validation + "/kineto/sampled_rank-1.json.gz"});
  QVERIFY(window.importInProgress());
  QTRY_COMPARE_WITH_TIMEOUT(imported.count(), 2, 120000);
  for (const QList<QVariant>& one : imported)
    QVERIFY2(one.at(1).toString().isEmpty(), qPrintable(one.at(1).toString()));
  // Still going when the first ended; none once both have.
  QCOMPARE(going_after, (QList<bool>{true, false}));
  QVERIFY(!window.importInProgress());
}

void TestGuiRun::importedTraces() {
  QFETCH(QStringList, files);
  MainWindow window;
  window.show();
  QSignalSpy imported(&window, &MainWindow::runImported);
  window.importTrace(files);
  // Closing while it imports asks first: the window went, and the app stayed
  // on out of sight until the import was written.
  QVERIFY(window.importInProgress());
  cs::gui::test::answerBoxes({QMessageBox::Cancel});
  QVERIFY(!window.close());
  QVERIFY(window.isVisible());
  QTRY_COMPARE_WITH_TIMEOUT(imported.count(), 1, 120000);
  QVERIFY(!window.importInProgress());
  QVERIFY2(imported.front().at(1).toString().isEmpty(),
           qPrintable(imported.front().at(1).toString()));
  if (files.size() == 2) {
    // The CLI's warning, said in the app too (it kept only errors): rank 1
    // of these traces is left as recorded: its collectives disagree.
    QVERIFY2(window.messageBar()->text().contains(QStringLiteral("rank 1 was left as recorded")),
             qPrintable(window.messageBar()->text()));
    window.messageBar()->dismiss();
  } else {
    // What the import left out, as the CLI lists it (the app said only how
    // many events it imported), of one rank (it said "1 ranks").
    QVERIFY2(window.messageBar()->text().contains(QStringLiteral(" events of 1 rank into ")),
             qPrintable(window.messageBar()->text()));
    QVERIFY2(window.messageBar()->text().contains(
                 QStringLiteral("not imported: 1 NVTX domain registrations")),
             qPrintable(window.messageBar()->text()));
    window.messageBar()->dismiss();
  }
  RunView* view = window.runView();
  QCOMPARE(view->storePath(), imported.front().at(0).toString());
  QVERIFY(window.dock(QStringLiteral("runDock"))->isVisible());
  // The analysis may have come while the import was waited for.
  QTRY_VERIFY_WITH_TIMEOUT(view->analysis() || !view->message().isEmpty(), 60000);
  QVERIFY2(view->message().isEmpty(), qPrintable(view->message()));
  QVERIFY(int(view->analysis()->ranks.size()) >= int(files.size()));
  QVERIFY(view->kernelProxy()->rowCount() > 0);
  QTRY_VERIFY_WITH_TIMEOUT(view->timeline()->laneCount() > 0, 30000);
  // An imported trace has no prediction, and holds no plan to make one
  // from: the tab says so (it named the store's meta key, then sent the
  // user to Tools ▸ Predict the open run again, which refused it).
  QVERIFY(!view->analysis()->prediction);
  QVERIFY2(view->predictionTable()->item(0, 0)->text().contains(
               QStringLiteral("none can be made of it: not a training run of the ClusterScope "
                              "engines")),
           qPrintable(view->predictionTable()->item(0, 0)->text()));
  // ... and points at what can: the plan it ran.
  QVERIFY(view->predictionTable()->item(0, 0)->text().contains(
      QStringLiteral("Tools ▸ Hold the open run against the current plan")));
  auto* with_plan = window.findChild<QAction*>(QStringLiteral("actionPredictWithPlan"));
  QVERIFY(with_plan);
  QTRY_VERIFY_WITH_TIMEOUT(with_plan->isEnabled(), 30000);
  // Tools ▸ Compare the open run with… is there once a run is open.
  auto* compare = window.findChild<QAction*>(QStringLiteral("actionCompareRun"));
  QVERIFY(compare);
  QTRY_VERIFY_WITH_TIMEOUT(compare->isEnabled(), 30000);
  // Docked beside the other panels, the lanes keep a few rows in view.
  auto* lanes = qobject_cast<QScrollArea*>(view->timeline()->parentWidget()->parentWidget());
  QVERIFY(lanes);
  QVERIFY2(lanes->viewport()->height() >= 120,
           qPrintable(QStringLiteral("%1 px of lanes").arg(lanes->viewport()->height())));
  // File ▸ Export run, as the menu does it: written on a worker thread, the
  // window live meanwhile (the call returns before runExported).
  QSignalSpy exported(&window, &MainWindow::runExported);
  const QString html = dir_.filePath(QStringLiteral("imported-%1.html").arg(files.size()));
  QVERIFY2(window.exportRun(RunExport::html, html), qPrintable(window.messageBar()->text()));
  QCOMPARE(exported.count(), 0);
  QVERIFY(window.exportInProgress());
  QVERIFY(window.statusBar()->currentMessage().startsWith(QStringLiteral("Writing")));
  QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 1, 60000);
  QCOMPARE(exported.front().at(0).toStringList(), QStringList{html});
  QVERIFY(QFileInfo(html).size() > 1000);
  QVERIFY(!window.exportInProgress());
  // The timeline's picture, drawn on the worker from the view copied at the
  // start, is the one the GUI thread draws.
  const QString here = dir_.filePath(QStringLiteral("imported-here-%1.html").arg(files.size()));
  QVERIFY(view->exportNow(RunExport::html, here).ok());
  auto timelineOf = [](const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return QString();
    const QString text = QString::fromUtf8(f.readAll());
    const qsizetype at = text.indexOf(QStringLiteral("<h2>Timeline</h2>"));
    return at < 0 ? QString() : text.mid(at);
  };
  const QString picture = timelineOf(html);
  QVERIFY(picture.contains(QStringLiteral("<svg")));
  QVERIFY2(picture.count(QStringLiteral("<rect")) + picture.count(QStringLiteral("<path")) > 20,
           qPrintable(picture.left(2000)));
  QCOMPARE(picture, timelineOf(here));
  const QString chrome = dir_.filePath(QStringLiteral("imported-%1.json").arg(files.size()));
  QVERIFY(window.exportRun(RunExport::chrome_trace, chrome));
  // One export at a time: a second is refused while the first is written.
  // (A small store's can be written before exportRun returns: its future's
  // continuation then runs at once, and there is nothing to refuse.)
  if (window.exportInProgress()) {
    QVERIFY(!window.exportRun(RunExport::html, html));
    QVERIFY(window.messageBar()->text().contains(QFileInfo(chrome).fileName()));
  }
  QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 2, 60000);
  QVERIFY2(exported.at(1).at(1).toString().isEmpty(), qPrintable(exported.at(1).at(1).toString()));
  QVERIFY(QFileInfo(chrome).size() > 1000);
  QVERIFY(window.statusBar()->currentMessage().startsWith(QStringLiteral("Exported")));
  // No range selected: refused before anything starts.
  QVERIFY(!window.exportRun(RunExport::chrome_trace, chrome, /*range_only=*/true));
  QVERIFY(window.messageBar()->text().contains(QStringLiteral("no time range")));
  // A folder that is not there: the worker's error comes back as a message.
  QVERIFY(window.exportRun(RunExport::html, dir_.filePath(QStringLiteral("no/such/dir/r.html"))));
  QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 3, 60000);
  QVERIFY(exported.at(2).at(0).toStringList().isEmpty());
  QVERIFY(!exported.at(2).at(1).toString().isEmpty());
  QCOMPARE(window.messageBar()->level(), MessageLevel::error);
}

void TestGuiRun::badFiles_data() {
  QTest::addColumn<QString>("kind");
  QTest::addRow("missing") << QStringLiteral("missing");
  QTest::addRow("foreign text") << QStringLiteral("text");
  QTest::addRow("other schema version") << QStringLiteral("version");
  QTest::addRow("still being written") << QStringLiteral("writing");
  QTest::addRow("events lost") << QStringLiteral("lossy");
  QTest::addRow("foreign sqlite") << QStringLiteral("foreign");
  QTest::addRow("cut short") << QStringLiteral("cut");
  QTest::addRow("no events") << QStringLiteral("empty");
}

void TestGuiRun::badFiles() {
  QFETCH(QString, kind);
  const QString path = dir_.filePath(QStringLiteral("bad-%1.db").arg(kind));
  std::unique_ptr<trace::TraceWriter> writer;  // held open while the view reads
  if (kind == QStringLiteral("foreign")) {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    const int made = sqlite3_exec(db,
                                  "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT);"
                                  "INSERT INTO photos(name) VALUES ('cat.jpg');",
                                  nullptr, nullptr, nullptr);
    sqlite3_close(db);
    QCOMPARE(made, SQLITE_OK);
  } else if (kind == QStringLiteral("cut")) {
    QVERIFY(QFile::copy(cpu_store_, path));
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.resize(f.size() / 2));
  } else if (kind == QStringLiteral("empty")) {
    // Its rank and lane, and nothing in them (a run killed before its first
    // event was committed).
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    w.value()->add_rank({0, "host", "CPU", 1, 0, false});
    w.value()->add_lane(0, trace::LaneKind::cpu_thread, "compute");
    QVERIFY(w.value()->close().ok());
  }
  if (kind == QStringLiteral("text")) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("rank,step,loss\n0,1,2.5\n");
  } else if (kind == QStringLiteral("version")) {
    // A copy of a real store with user_version (bytes 60-63 of the SQLite
    // header) set to 99.
    QVERIFY(QFile::copy(cpu_store_, path));
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek(60));
    f.write(QByteArray("\x00\x00\x00\x63", 4));
  } else if (kind == QStringLiteral("writing")) {
    trace::RunInfo run;
    run.title = "still running";
    auto w = trace::TraceWriter::create(path.toStdString(), run);
    if (!w.ok()) QFAIL(w.message().c_str());
    writer = std::move(w).value();
    writer->add_rank({0, "host", "CPU", 1, 0, false});
    const trace::LaneId lane = writer->add_lane(0, trace::LaneKind::cpu_thread, "compute");
    for (int i = 0; i < 1000; ++i) {
      trace::Event e;
      e.lane = lane;
      e.start_ns = 1000 + i * 100;
      e.end_ns = e.start_ns + 50;
      e.name = writer->intern("gemm");
      writer->add(e);
    }
    QVERIFY(writer->flush().ok());
  } else if (kind == QStringLiteral("lossy")) {
    // Closed "complete", but its writer dropped events: the view must not
    // hide it behind a complete-looking run.
    auto w = one_kernel_store(path);
    QVERIFY(w);
    trace::Event e;
    e.start_ns = 1000;
    e.end_ns = 2000;
    e.name = w->intern("gemm");
    for (std::uint32_t lane : {4'000'000'000u, 4'000'000'001u}) {
      e.lane = trace::LaneId{lane};
      w->add(e);
    }
    QVERIFY(w->close("complete").ok());
  }
  RunView view;
  view.resize(900, 600);
  view.show();
  {
    // A good store first: nothing of it may stay under the bad one's name.
    QSignalSpy first_analysed(&view, &RunView::analysisReady);
    QSignalSpy first_opened(&view, &RunView::storeOpened);
    view.openStore(cpu_store_);
    QTRY_COMPARE_WITH_TIMEOUT(first_analysed.count(), 1, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(first_opened.count(), 1, 30000);
    QVERIFY(view.rankTable()->rowCount() > 0);
    QVERIFY(view.kernelTable()->model()->rowCount() > 0);
  }
  QSignalSpy analysed(&view, &RunView::analysisReady);
  QSignalSpy opened(&view, &RunView::storeOpened);
  view.openStore(path);
  QTRY_COMPARE_WITH_TIMEOUT(analysed.count(), 1, 30000);
  QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 30000);
  if (kind == QStringLiteral("writing")) {
    // Shown as far as it is written.
    QVERIFY2(analysed.front().at(0).toString().isEmpty(),
             qPrintable(analysed.front().at(0).toString()));
    QVERIFY(!view.header()->text().contains(QStringLiteral("no events recorded")));
    QTRY_VERIFY_WITH_TIMEOUT(view.timeline()->laneCount() == 1, 30000);
  } else if (kind == QStringLiteral("empty")) {
    // Opened, and said to hold nothing: not a run of 0 s.
    QVERIFY2(analysed.front().at(0).toString().isEmpty(),
             qPrintable(analysed.front().at(0).toString()));
    QVERIFY2(view.header()->text().contains(QStringLiteral("no events recorded")),
             qPrintable(view.header()->text()));
  } else if (kind == QStringLiteral("lossy")) {
    QVERIFY2(analysed.front().at(0).toString().isEmpty(),
             qPrintable(analysed.front().at(0).toString()));
    QVERIFY2(view.header()->text().contains(
                 QStringLiteral("2 events dropped for a lane id the writer never gave")),
             qPrintable(view.header()->text()));
    // No steps recorded: a step key says so instead of doing nothing.
    QTRY_VERIFY_WITH_TIMEOUT(view.timeline()->laneCount() == 1, 30000);
    QSignalSpy not_shown(view.timeline(), &TimelineWidget::stepNotShown);
    view.timeline()->setFocus();
    QTest::keyClick(view.timeline(), Qt::Key_PageDown);
    QTRY_COMPARE_WITH_TIMEOUT(not_shown.count(), 1, 10000);
    QCOMPARE(view.findChild<QLabel*>(QStringLiteral("run_search_status"))->text(),
             QStringLiteral("no training steps are recorded in this store"));
  } else {
    QVERIFY(!view.message().isEmpty());
    QVERIFY(!analysed.front().at(0).toString().isEmpty());
    QCOMPARE(view.rankTable()->rowCount(), 0);
    QCOMPARE(view.kernelTable()->model()->rowCount(), 0);
    QCOMPARE(view.collectiveTable()->model()->rowCount(), 0);
    QCOMPARE(view.predictionTable()->rowCount(), 0);
    if (kind == QStringLiteral("version")) {
      QVERIFY2(view.message().contains(QStringLiteral("version")), qPrintable(view.message()));
    }
    // Named: the file, and what is wrong with it.
    QVERIFY2(view.message().startsWith(path), qPrintable(view.message()));
    if (kind == QStringLiteral("foreign")) {
      QVERIFY2(view.message().contains(QStringLiteral("another kind (tables: photos)")),
               qPrintable(view.message()));
    } else if (kind == QStringLiteral("cut")) {
      QVERIFY2(view.message().contains(QStringLiteral("cut short")), qPrintable(view.message()));
    }
  }
  if (writer) QVERIFY(writer->close().ok());
}

// A store whose pages were overwritten can still be read, wrongly: the view
// says so (SQLite's check of every page, after the analysis) in its header
// and, in the app, in the message bar. A whole store says nothing.
void TestGuiRun::damagedStoreIsSaid() {
  MainWindow window;
  window.show();
  RunView* view = window.runView();
  QSignalSpy checked(view, &RunView::integrityChecked);
  window.openRun(cpu_store_);
  QTRY_COMPARE_WITH_TIMEOUT(checked.count(), 1, 60000);
  QCOMPARE(checked.front().at(0).toString(), QString());
  QVERIFY(view->damage().isEmpty());

  // The helper's damage: the event details table's page overwritten.
  const QString path = dir_.filePath(QStringLiteral("damaged.db"));
  QVERIFY(QFile::copy(cpu_store_, path));
  int page = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
             SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db,
                                "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM "
                                "sqlite_master WHERE name = 'event_details'",
                                -1, &st, nullptr),
             SQLITE_OK);
    QCOMPARE(sqlite3_step(st), SQLITE_ROW);
    page = sqlite3_column_int(st, 0);
    page_size = sqlite3_column_int(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  QVERIFY(page > 1 && page_size > 0);
  {
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadWrite));
    // The second half of the page, where a leaf keeps its cells.
    QVERIFY(f.seek(qint64(page - 1) * page_size + page_size / 2));
    QByteArray garbage(page_size / 2, '\0');
    quint32 x = 12345;
    for (char& c : garbage) {
      x = x * 1664525u + 1013904223u;
      c = char(x >> 24);
    }
    f.write(garbage);
  }
  checked.clear();
  // A report exported before the integrity check has finished (here, as
  // soon as the analysis is shown) says the damage all the same: it was
  // said only once the check had finished first.
  std::optional<RunView::ExportTask> early_report;
  int checks_before_export = -1;
  const QString report_path = dir_.filePath(QStringLiteral("damaged-early.html"));
  const auto connection = connect(view, &RunView::analysisReady, this, [&] {
    checks_before_export = int(checked.count());
    auto task = view->prepareExport(RunExport::html, report_path, false);
    if (task) early_report = std::move(task).value();
  });
  window.openRun(path);
  QTRY_COMPARE_WITH_TIMEOUT(checked.count(), 1, 60000);
  disconnect(connection);
  QCOMPARE(checks_before_export, 0);
  QVERIFY(early_report);
  auto written = (*early_report)();
  QVERIFY2(written, written ? "" : written.message().c_str());
  {
    QFile report(report_path);
    QVERIFY(report.open(QIODevice::ReadOnly));
    const QString html = QString::fromUtf8(report.readAll());
    QVERIFY2(html.contains(QStringLiteral("is damaged: SQLite")), qPrintable(html.left(2000)));
  }
  const QString damage = checked.front().at(0).toString();
  QVERIFY2(damage.contains(path + QStringLiteral(" is damaged: SQLite's check finds")),
           qPrintable(damage));
  QVERIFY(damage.contains(QStringLiteral("may be wrong or missing")));
  QCOMPARE(view->damage(), damage);
  QVERIFY2(view->header()->text().contains(QStringLiteral("is damaged")),
           qPrintable(view->header()->text()));
  QCOMPARE(window.messageBar()->level(), MessageLevel::warning);
  QCOMPARE(window.messageBar()->text(), damage);
  // Another store opened: the warning about the damaged one goes with it.
  checked.clear();
  window.openRun(cpu_store_);
  QTRY_COMPARE_WITH_TIMEOUT(checked.count(), 1, 60000);
  QVERIFY(checked.front().at(0).toString().isEmpty());
  QVERIFY2(window.messageBar()->text() != damage, qPrintable(window.messageBar()->text()));
}

// The tables beside the kernels, on the CUDA engine's committed run: its
// CUDA API calls, copies and sets with their bytes, and NVTX ranges by name,
// each row listing its instances; the filter takes them all.
void TestGuiRun::callsCopiesAndRanges() {
  const QString copy = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("calls-copies-ranges.db"));
  QVERIFY(!copy.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, copy);
  auto row_of = [](const RunView::SummaryTable& t, const QString& name) {
    for (int r = 0; r < t.proxy->rowCount(); ++r)
      if (t.proxy->index(r, 0).data().toString() == name) return r;
    return -1;
  };
  auto number = [](const RunView::SummaryTable& t, int row, int column) {
    return t.proxy->index(row, column).data(Qt::UserRole).toDouble();
  };
  const int launch = row_of(view.apiCallTable(), QStringLiteral("cudaLaunchKernel"));
  QVERIFY(launch >= 0);
  QCOMPARE(number(view.apiCallTable(), launch, 1), 3433.0);
  // Sorted by total time: the copies first (the weights' upload at the start).
  QCOMPARE(view.apiCallTable().proxy->index(0, 0).data().toString(),
           QStringLiteral("cudaMemcpyAsync"));
  const int memset = row_of(view.copyTable(), QStringLiteral("Memset"));
  QVERIFY(memset >= 0);
  QCOMPARE(number(view.copyTable(), memset, 1), 1532.0);
  QVERIFY(number(view.copyTable(), memset, 6) > 1e10);  // 11.5 GiB set
  QVERIFY(number(view.copyTable(), memset, 9) > 1000);  // GB/s
  const int qkv = row_of(view.rangeTable(), QStringLiteral("attn.qkv"));
  QVERIFY(qkv >= 0);
  QCOMPARE(number(view.rangeTable(), qkv, 1), 144.0);

  QSignalSpy instances(&view, &RunView::instancesReady);
  view.rangeTable().view->selectRow(qkv);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QVERIFY2(instances.front().at(1).toString().isEmpty(),
           qPrintable(instances.front().at(1).toString()));
  QCOMPARE(view.instances()->rowCount(), 144);
  // The counters the CUPTI tracer sampled, over the run: the GPU's memory
  // in use peaks at 9,834,397,696 bytes (9.16 GiB), as the store holds it.
  QVERIFY(view.tabs()->indexOf(view.counterTab()) >= 0);
  const QList<QAbstractSeries*> series = view.counterChart()->chart()->series();
  QCOMPARE(series.size(), 2);
  double peak = 0;
  for (QAbstractSeries* s : series) {
    if (!s->name().contains(QStringLiteral("GPU 0 memory used"))) continue;
    for (const QPointF& p : static_cast<QLineSeries*>(s)->points())
      peak = std::max(peak, p.y());
  }
  QVERIFY2(std::abs(peak - 9834397696.0 / double(1ULL << 30)) < 1e-9,
           qPrintable(QString::number(peak)));
  view.tabs()->setCurrentWidget(view.counterTab());
  cs::gui::test::saveScreenshot(&view, QStringLiteral("run-counters"));
  // The copies' page, as a user reads it.
  view.tabs()->setCurrentIndex(view.tabs()->indexOf(
      view.copyTable().view->parentWidget()->parentWidget()->parentWidget()->parentWidget()));
  auto* summary_tabs =
      qobject_cast<QTabWidget*>(view.copyTable().view->parentWidget()->parentWidget());
  QVERIFY(summary_tabs);
  summary_tabs->setCurrentWidget(view.copyTable().view);
  QVERIFY(view.copyTable().view->isVisible());
  cs::gui::test::saveScreenshot(&view, QStringLiteral("run-copies"));

  view.filterField()->setText(QStringLiteral("memcpy"));
  QCOMPARE(view.copyTable().proxy->rowCount(), 3);  // HtoD, DtoH, DtoD
  QVERIFY(row_of(view.apiCallTable(), QStringLiteral("cudaMemcpyAsync")) >= 0);
  QCOMPARE(view.rangeTable().proxy->rowCount(), 0);
}

// Tools > Predict the open run again: the CUDA engine's first committed run
// (of schema 1, from before the engines probed the machine), which recorded
// no prediction, against its GPU's datasheet; the prediction tab
// then holds every part and names the largest disagreement. A CPU-engine run
// on a machine without a calibration gets the reason instead.
void TestGuiRun::predictAgain() {
  const QString copy = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/schema-v1/worker-bf16.db"),
                                    QStringLiteral("predict-again.db"));
  QVERIFY(!copy.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, copy);
  QSignalSpy ready(&view, &RunView::predictionReady);
  view.predictAgain();
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 60000);
  QVERIFY2(ready.front().at(1).toString().isEmpty(), qPrintable(ready.front().at(1).toString()));
  QCOMPARE(view.predictedAgainOn(), QStringLiteral("this-machine"));
  QVERIFY(view.analysis()->prediction);
  QVERIFY(!view.analysis()->prediction->breakdown.empty());
  QStringList cells;
  QTableWidget* table = view.predictionTable();
  for (int r = 0; r < table->rowCount(); ++r) {
    if (table->item(r, 0)) cells << table->item(r, 0)->text();
  }
  QVERIFY2(cells.contains(QStringLiteral("Predicted now, on this-machine, not as the run recorded it")),
           qPrintable(cells.join(" | ")));
  QVERIFY(std::any_of(cells.begin(), cells.end(),
                      [](const QString& c) { return c.endsWith(QStringLiteral("largest disagreement")); }));
  QVERIFY(std::any_of(cells.begin(), cells.end(),
                      [](const QString& c) { return c.startsWith(QStringLiteral("the plan said")); }));
  // Its median step says which steps it holds: not the Ranks tab's, of
  // every step (two "median step" figures for one rank disagreed).
  int median = -1;
  for (int r = 0; r < table->rowCount(); ++r)
    if (table->item(r, 0) && table->item(r, 0)->text().startsWith(QStringLiteral("step (median")))
      median = r;
  QVERIFY2(median >= 0, qPrintable(cells.join(" | ")));
  const QTableWidgetItem* label = table->item(median, 0);
  QVERIFY2(QRegularExpression(QStringLiteral("^step \\(median past the warm-up, \\d+ steps\\)$"))
               .match(label->text())
               .hasMatch(),
           qPrintable(label->text()));
  QVERIFY2(label->toolTip().contains(QStringLiteral("warm-up included")),
           qPrintable(label->toolTip()));
  // A part the planner does not predict (idle) reads so, not as a -100 % error.
  QStringList errors;
  for (int r = 0; r < table->rowCount(); ++r) {
    if (table->item(r, 3)) errors << table->item(r, 0)->text() + ": " + table->item(r, 3)->text();
  }
  QVERIFY2(!errors.join(" | ").contains(QStringLiteral("-100.0")), qPrintable(errors.join(" | ")));
  QVERIFY2(errors.join(" | ").contains(QStringLiteral(": not predicted")),
           qPrintable(errors.join(" | ")));
  for (const char* part : {"compute.gemm", "compute.attention", "optimizer"}) {
    QVERIFY2(std::any_of(cells.begin(), cells.end(),
                         [&](const QString& c) { return c.startsWith(QLatin1String(part)); }),
             part);
  }
  // Memory: the planner's for the run's shape against what the CUDA tracer
  // and the engine sampled, the engine's 7.18 GiB and the device's 9.54 GiB.
  const auto row_of = [&](const QString& start) {
    for (int r = 0; r < table->rowCount(); ++r)
      if (table->item(r, 0) && table->item(r, 0)->text().startsWith(start)) return r;
    return -1;
  };
  const int allocated = row_of(
      QStringLiteral("memory allocated by the process (\"memory in use (bytes)\" of rank 0)"));
  const int device =
      row_of(QStringLiteral("memory in use on the device (\"GPU 0 memory used\" of rank 0)"));
  QVERIFY2(allocated >= 0 && device >= 0, qPrintable(cells.join(" | ")));
  QCOMPARE(table->item(allocated, 2)->text(), QStringLiteral("7.18 GiB"));
  QCOMPARE(table->item(device, 2)->text(), QStringLiteral("9.54 GiB"));
  QVERIFY(table->item(allocated, 1)->text().endsWith(QStringLiteral(" GiB")));
  QVERIFY(table->item(allocated, 3)->text().startsWith(QLatin1Char('-')));  // under-predicted
  // The new prediction holds a machine probe; this run was recorded before
  // the engines probed the machine, and the tab says so.
  QVERIFY2(cells.contains(QStringLiteral("Machine probe: the run recorded no machine probe "
                                         "(an older run, or the single-process CUDA mode).")),
           qPrintable(cells.join(" | ")));
  cs::gui::test::saveScreenshot(table, QStringLiteral("run-predicted-again"));

  // The CPU-engine run of this suite, with no calibration of this machine.
  openAndWait(view, cpu_store_);
  QVERIFY(view.predictedAgainOn().isEmpty());
  ready.clear();
  view.predictAgain();
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 60000);
  QVERIFY2(ready.front().at(1).toString().contains(QStringLiteral("no calibration of the CPU engine")),
           qPrintable(ready.front().at(1).toString()));
  QVERIFY(view.predictedAgainOn().isEmpty());
}

// The machine probe every rank of the suite's CPU run timed before its first
// step, against the prediction's: a row each, with the error, and the line
// that says the machine or the model's rate is off.
void TestGuiRun::machineProbeRows() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  QVERIFY(view.analysis()->prediction);
  QVERIFY2(view.analysis()->prediction->machine, view.analysis()->prediction->machine_note.c_str());
  QTableWidget* table = view.predictionTable();
  QStringList rows;
  int gemm_row = -1;
  for (int r = 0; r < table->rowCount(); ++r) {
    if (!table->item(r, 0)) continue;
    rows << table->item(r, 0)->text();
    if (rows.back() == QStringLiteral("probe: GEMM 256 x 256 → 1024 fp32")) gemm_row = r;
  }
  QVERIFY2(rows.contains(QStringLiteral("The machine, probed before the first step")),
           qPrintable(rows.join(" | ")));
  QVERIFY2(gemm_row >= 0, qPrintable(rows.join(" | ")));
  QVERIFY2(rows.contains(QStringLiteral("probe: layer-norm backward, 65.5 k elements")),
           qPrintable(rows.join(" | ")));
  QVERIFY2(rows.contains(QStringLiteral("probe: all-reduce 1.00 MiB over 2 ranks")),
           qPrintable(rows.join(" | ")));
  QVERIFY(std::any_of(rows.begin(), rows.end(), [](const QString& r) {
    return r.startsWith(QStringLiteral("A probe is more than 15 % from the model"));
  }));
  // A probe's error as `trace stats` and the other rows say it, the model's
  // against the measurement: 1 ns predicted is -100 % of what the machine
  // took (it read "+123456 (machine vs model)"), with the factor a
  // percentage that far out hides.
  const QString probe_error = table->item(gemm_row, 3)->text();
  QVERIFY2(probe_error.startsWith(QStringLiteral("-100.0 (1/")) &&
               probe_error.endsWith(QStringLiteral(" of the measured)")),
           qPrintable(probe_error));
  // Every error in one format, to a tenth of a percent: the probes' read
  // "-37" beside the parts' "-51.7".
  const QRegularExpression one_format(QStringLiteral(
      "^[+-]\\d+\\.\\d( \\(.+ the measured\\))?$|^not predicted$|^not measured$|^—$"));
  for (int r = 0; r < table->rowCount(); ++r) {
    if (!table->item(r, 3)) continue;
    const QString error = table->item(r, 3)->text();
    QVERIFY2(one_format.match(error).hasMatch(),
             qPrintable(table->item(r, 0)->text() + QStringLiteral(": ") + error));
  }

  view.tabs()->setCurrentWidget(table);
  cs::gui::test::saveScreenshot(&view, QStringLiteral("run-machine-probe"));
}

// Many ranks' counters: the Counters chart's legend names each counter and
// its ranks once (8 ranks of 2 counters made 16 entries that took the room
// of the chart), the ranks of a counter in shades of its colour; each line
// is still its rank's, by its name, its own colour and its tooltip, and the
// line under the pointer is drawn thicker.
void TestGuiRun::countersLegendOfManyRanks() {
  const QString path = dir_.filePath(QStringLiteral("counters-8-ranks.db"));
  constexpr int kRanks = 8;
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    const trace::StringId memory = (*w)->intern("memory in use (bytes)");
    const trace::StringId busy = (*w)->intern("utilization");
    for (int r = 0; r < kRanks; ++r) {
      (*w)->add_rank({r, "host", "GPU " + std::to_string(r), 1 + r, 0, false});
      trace::Event e;
      e.lane = (*w)->add_lane(r, trace::LaneKind::gpu_stream, "stream 7");
      e.name = (*w)->intern("gemm");
      e.start_ns = 0;
      e.end_ns = 1'000'000;
      (*w)->add(e);
      for (std::int64_t t : {0, 500'000}) {
        (*w)->add(trace::CounterSample{r, memory, t, double(r + 1) * double(1ULL << 30)});
        (*w)->add(trace::CounterSample{r, busy, t, double(10 * r + t / 100'000)});
      }
    }
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 800);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  view.tabs()->setCurrentWidget(view.counterTab());
  QChart* chart = view.counterChart()->chart();
  const QList<QAbstractSeries*> series = chart->series();
  QCOMPARE(series.size(), 2 * kRanks);
  QStringList shown;
  for (QLegendMarker* m : chart->legend()->markers())
    if (m->isVisible()) shown << m->label();
  // Bytes beside a count: the bytes in GiB on the left, the count's own
  // values on the right (one raw axis drew the count flat along 0).
  QCOMPARE(shown, QStringList({QStringLiteral("memory in use · ranks 0–7"),
                               QStringLiteral("utilization · ranks 0–7")}));
  const QList<QAbstractAxis*> vertical = chart->axes(Qt::Vertical);
  QCOMPARE(vertical.size(), 2);
  QValueAxis* gib = nullptr;
  QValueAxis* values = nullptr;
  for (QAbstractAxis* axis : vertical) {
    if (axis->objectName() == QStringLiteral("counter_axis_bytes"))
      gib = qobject_cast<QValueAxis*>(axis);
    if (axis->objectName() == QStringLiteral("counter_axis_values"))
      values = qobject_cast<QValueAxis*>(axis);
  }
  QVERIFY(gib && values);
  QCOMPARE(gib->titleText(), QStringLiteral("GiB"));
  QCOMPARE(gib->alignment(), Qt::AlignLeft);
  QCOMPARE(values->titleText(), QStringLiteral("value"));
  QCOMPARE(values->alignment(), Qt::AlignRight);
  // Rank 7's 8 GiB and 75 % at the tops of their axes, each within a tick.
  QVERIFY2(gib->max() >= 8 && gib->max() < 10, qPrintable(QString::number(gib->max())));
  QVERIFY2(values->max() >= 75 && values->max() <= 100, qPrintable(QString::number(values->max())));
  // Each line its rank's: named so, and in a colour of its own, of its
  // counter's hue.
  QSet<QRgb> colours;
  QSet<int> hues[2];
  for (QAbstractSeries* s : series) {
    auto* line = qobject_cast<QLineSeries*>(s);
    QVERIFY(line);
    const QRegularExpressionMatch m =
        QRegularExpression(QStringLiteral("^rank [0-7]: (memory in use|utilization)$"))
            .match(line->name());
    QVERIFY2(m.hasMatch(), qPrintable(line->name()));
    colours << line->pen().color().rgb();
    const bool utilization = m.captured(1) == QStringLiteral("utilization");
    hues[utilization ? 1 : 0] << line->pen().color().hslHue();
    QCOMPARE(line->attachedAxes().contains(utilization ? values : gib), true);
  }
  QCOMPARE(colours.size(), 2 * kRanks);
  QCOMPARE(hues[0].size(), 1);
  QCOMPARE(hues[1].size(), 1);
  QVERIFY(*hues[0].begin() != *hues[1].begin());
  // The pointer on rank 5's utilization: its line thicker, its tooltip its rank's.
  QLineSeries* five = nullptr;
  for (QAbstractSeries* s : series)
    if (s->name() == QStringLiteral("rank 5: utilization")) five = qobject_cast<QLineSeries*>(s);
  QVERIFY(five);
  const double width = five->pen().widthF();
  QToolTip::hideText();
  emit five->hovered(five->at(1), true);
  QVERIFY(five->pen().widthF() > width);
  QVERIFY2(QToolTip::text().startsWith(QStringLiteral("<b>rank 5: utilization</b>")),
           qPrintable(QToolTip::text()));
  emit five->hovered(five->at(1), false);
  QCOMPARE(five->pen().widthF(), width);
  cs::gui::test::saveScreenshot(&view, QStringLiteral("run-counters-8-ranks"));
}

// Each rank's sampled counters are lanes of the timeline, under the rank's
// own lanes (a rank with counters only gets a header of its own): a step
// graph filled from 0, on one axis per counter across the ranks, each sample
// held until the next and the last to the trace's end; a pixel of several
// samples filled to their greatest (lighter above their least); a tooltip
// with the value drawn under the pointer.
void TestGuiRun::countersOnTheTimeline() {
  const QString path = dir_.filePath(QStringLiteral("counters.db"));
  constexpr double kGiB = double(1ULL << 30);
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    for (int r = 0; r < 3; ++r)
      (*w)->add_rank({r, "host", "CPU", 1 + r, 0, false});
    for (int r = 0; r < 2; ++r) {
      trace::Event e;
      e.lane = (*w)->add_lane(r, trace::LaneKind::gpu_stream, "stream 7");
      e.kind = trace::EventKind::kernel;
      e.name = (*w)->intern("gemm");
      e.start_ns = 0;
      e.end_ns = 1'000'000;
      (*w)->add(e);
    }
    const trace::StringId memory = (*w)->intern("GPU 0 memory in use (bytes)");
    // 1 GiB, then 3 GiB and 2.5 GiB 10 ns apart (one pixel), then 2 GiB
    // from 800 us on: its last sample, held to the trace's end at 1 ms.
    for (const auto& [t, v] : std::vector<std::pair<std::int64_t, double>>{
             {0, 1 * kGiB}, {400'000, 3 * kGiB}, {400'010, 2.5 * kGiB}, {800'000, 2 * kGiB}})
      (*w)->add(trace::CounterSample{0, memory, t, v});
    // Rank 1 holds 1.5 GiB of it all along: half of rank 0's peak, drawn
    // half as high on the axis they share.
    (*w)->add(trace::CounterSample{1, memory, 0, 1.5 * kGiB});
    const trace::StringId busy = (*w)->intern("utilization");
    (*w)->add(trace::CounterSample{1, busy, 0, 10});
    (*w)->add(trace::CounterSample{1, busy, 500'000, 50});
    (*w)->add(trace::CounterSample{2, (*w)->intern("CPU memory allocated (bytes)"), 0, 4096});
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 800);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  // The Counters tab's chart is titled by the counters it draws (it read
  // "GPU memory in use, allocated bytes" whatever they were, a CPU run's too).
  QVERIFY(view.counterChart()->chart());
  QCOMPARE(view.counterChart()->chart()->title(),
           QStringLiteral("Counters over the run (GPU 0 memory in use, utilization, CPU memory "
                          "allocated)"));
  TimelineWidget* t = view.timeline();
  QCOMPARE(t->laneCount(), 6);
  const std::vector<std::pair<int, std::string>> expected{
      {0, "stream 7"},    {0, "GPU 0 memory in use (bytes)"},
      {1, "stream 7"},    {1, "GPU 0 memory in use (bytes)"},
      {1, "utilization"}, {2, "CPU memory allocated (bytes)"}};
  for (int i = 0; i < 6; ++i) {
    QCOMPARE(t->laneInfo(i).rank, expected[std::size_t(i)].first);
    QCOMPARE(t->laneInfo(i).name, expected[std::size_t(i)].second);
    QCOMPARE(t->isCounterLane(i), i != 0 && i != 2);
  }
  auto settled = [t] { return !t->busy() && t->frameJob() == t->requestedJob(); };
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);

  auto tip = [&](int lane, std::int64_t time_ns) {
    const QPoint at(int(std::floor(t->xOf(time_ns))), int(t->laneRect(lane).center().y()));
    return cs::gui::test::toolTipAt(t, at);
  };
  auto expect_tip = [&](int lane, std::int64_t time_ns, const QString& part) {
    const QString text = tip(lane, time_ns);
    if (!text.contains(part)) qWarning("%s", qPrintable(text + " lacks " + part));
    return text.contains(part);
  };
  // The time of a sample, from the trace's start, to the microsecond.
  auto at = [](std::int64_t ns) { return QString::fromStdString(format_time_ns(ns)); };
  QVERIFY(expect_tip(1, 200'000, QStringLiteral("1.00 GiB since ") + at(0)));
  // Titled without the "(bytes)" of its name: its values read in GiB.
  QVERIFY(expect_tip(1, 200'000, QStringLiteral("<b>GPU 0 memory in use</b>")));
  QVERIFY(expect_tip(1, 600'000, QStringLiteral("2.50 GiB since ") + at(400'000)));
  QVERIFY(expect_tip(1, 900'000,
                     QStringLiteral("2.00 GiB since %1 (the last sample)").arg(at(800'000))));
  QVERIFY(expect_tip(3, 700'000, QStringLiteral("1.50 GiB since %1 (the last sample)").arg(at(0))));
  QVERIFY(expect_tip(4, 700'000, QStringLiteral("50 since ") + at(500'000)));
  QVERIFY(expect_tip(4, 300'000, QStringLiteral("10 since ") + at(0)));
  // The pixel of the pair, at whatever width the view has: both samples.
  for (int width = 1000; width < 1010; ++width) {
    view.resize(width, 800);
    QTRY_VERIFY_WITH_TIMEOUT(t->spanAreaWidth() > 0 && settled(), 30000);
    QVERIFY2(expect_tip(1, 400'000,
                        QStringLiteral("2 samples from %1: from 2.50 GiB to 3.00 GiB, then "
                                       "2.50 GiB")
                            .arg(at(400'000))),
             qPrintable(QString::number(width)));
  }
  view.resize(1200, 800);
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);

  // The graph: filled from the bottom (0) up to the value's share of the
  // axis's top, 3 GiB: a third of the way at 1 GiB, five sixths at 2.5 GiB;
  // the pair's pixel to 3 GiB (lighter above 2.5 GiB); rank 1's 1.5 GiB half.
  const QImage image = t->grab().toImage().convertToFormat(QImage::Format_RGB32);
  const qreal dpr = image.devicePixelRatio();
  auto filled = [&](int lane, std::int64_t time_ns, double share) {
    const QRectF r = t->laneRect(lane);
    const double y = r.bottom() - 1 - share * (r.height() - 3);
    const QColor c = image.pixelColor(int(std::floor(t->xOf(time_ns)) * dpr), int(y * dpr));
    return c.green() > c.red() + 20 && c.green() > c.blue() + 20;
  };
  QVERIFY(filled(1, 200'000, 0.2));
  QVERIFY(!filled(1, 200'000, 0.5));
  QVERIFY(filled(1, 600'000, 0.75));
  QVERIFY(!filled(1, 600'000, 0.92));
  QVERIFY(filled(1, 400'000, 0.95));  // the peak's pixel
  QVERIFY(filled(1, 825'000, 0.6));   // 2 GiB from 800 us ...
  QVERIFY(!filled(1, 825'000, 0.72));
  QVERIFY(filled(1, 990'000, 0.6));  // ... held to the end
  QVERIFY(filled(3, 500'000, 0.45));
  QVERIFY(!filled(3, 500'000, 0.56));

  // A report's picture of the run draws the counters as the view does.
  QImage picture(1200, int(t->pictureHeight()), QImage::Format_RGB32);
  picture.fill(Qt::white);
  {
    QPainter painter(&picture);
    t->windowPainter(t->fullRange(), Qt::black)(painter, QRectF(picture.rect()));
  }
  int green = 0;
  for (int y = 0; y < picture.height(); ++y) {
    for (int x = 0; x < picture.width(); ++x) {
      const QColor c = picture.pixelColor(x, y);
      green += c.green() > c.red() + 20 && c.green() > c.blue() + 20 ? 1 : 0;
    }
  }
  QVERIFY2(green > 1000, qPrintable(QString::number(green)));

  // Zoomed in on the pair of samples: each is then its own column.
  t->setWindow(399'990, 400'090);
  QTRY_VERIFY_WITH_TIMEOUT(settled(), 30000);
  QVERIFY(expect_tip(1, 400'005, QStringLiteral("3.00 GiB since ") + at(400'000)));
  QVERIFY(expect_tip(1, 400'020, QStringLiteral("2.50 GiB since ") + at(400'010)));
  QVERIFY(expect_tip(1, 399'995, QStringLiteral("1.00 GiB, held from before")));
  cs::gui::test::saveScreenshot(&view, QStringLiteral("run-timeline-counters-zoomed"));

  // A folded rank folds its counters too.
  t->setRankCollapsed(0, true);
  QVERIFY(t->laneRect(1).isEmpty());
  QVERIFY(expect_tip(4, 399'995, QStringLiteral("10, held from before")));
}

// The CPU engine's run samples its memory whole and by part: the whole is
// a lane of each rank and a line of the Counters chart, the parts (which add
// up to it) are neither.
void TestGuiRun::memoryPartsAreNotLanes() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  auto reader = trace::TraceReader::open(cpu_store_.toStdString()).value();
  int parts = 0, wholes = 0;
  const std::vector<trace::CounterSeries> all = reader->counter_series().value();
  for (const trace::CounterSeries& c : all) {
    const std::string& name = reader->string(c.name);
    parts += trace::is_memory_part_counter(name) ? 1 : 0;
    wholes += name == "memory in use (bytes)" ? 1 : 0;
  }
  QCOMPARE(wholes, 2);  // a rank each
  QCOMPARE(parts, 2 * int(std::size(trace::kMemoryPartNames)));
  int lanes = 0;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (!t->isCounterLane(i)) continue;
    ++lanes;
    QCOMPARE(t->laneInfo(i).name, std::string("memory in use (bytes)"));
  }
  QCOMPARE(lanes, 2);
  QCOMPARE(view.counterChart()->chart()->series().size(), 2);
}

// The CUDA engine's committed run: the tracer's two memory counters are
// lanes under GPU 0's, and the graph's peak reads what the store holds.
void TestGuiRun::committedCountersOnTheTimeline() {
  const QString copy = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("counters-lanes.db"));
  QVERIFY(!copy.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, copy);
  TimelineWidget* t = view.timeline();
  auto reader = trace::TraceReader::open(copy.toStdString()).value();
  // Its counters but the engine's memory by part (a later run records them;
  // they add up to "memory in use", which has a lane).
  std::vector<trace::CounterSeries> series = reader->counter_series().value();
  std::erase_if(series, [&](const trace::CounterSeries& c) {
    return trace::is_memory_part_counter(reader->string(c.name));
  });
  QCOMPARE(series.size(), std::size_t{2});
  std::vector<std::string> lanes;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (!t->isCounterLane(i)) continue;
    QCOMPARE(i, t->laneCount() - 2 + int(lanes.size()));  // after the rank's lanes
    lanes.push_back(t->laneInfo(i).name);
  }
  QCOMPARE(lanes, (std::vector<std::string>{reader->string(series[0].name),
                                            reader->string(series[1].name)}));
  // The sample at the peak of GPU memory in use: 10,239,148,032 bytes.
  int lane = -1;
  for (int i = 0; i < t->laneCount(); ++i)
    if (t->laneInfo(i).name.find("GPU 0 memory used") != std::string::npos) lane = i;
  QVERIFY(lane >= 0);
  const trace::CounterSeries& used = series[std::size_t(lane - (t->laneCount() - 2))];
  QCOMPARE(used.high, 9834397696.0);
  std::int64_t peak_at = 0;
  const std::vector<trace::CounterSample> samples = reader->counters(used.rank, used.name).value();
  for (const trace::CounterSample& c : samples)
    if (c.value == used.high && peak_at == 0) peak_at = c.time_ns;
  auto* area = qobject_cast<QScrollArea*>(t->parentWidget()->parentWidget());
  QVERIFY(area);
  area->ensureVisible(0, int(t->laneRect(lane).center().y()), 0, 50);
  t->setWindow(peak_at - 1'000'000, peak_at + 1'000'000);
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  const QPoint at(int(std::lround(t->xOf(peak_at))), int(t->laneRect(lane).center().y()));
  const QString peak_tip = cs::gui::test::toolTipAt(t, at);
  QVERIFY2(peak_tip.contains(QStringLiteral("9.16 GiB")), qPrintable(peak_tip));
  t->resetZoom();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  cs::gui::test::saveScreenshot(&view, QStringLiteral("run-timeline-counters"));
}

// Start, end and "at" times to the microsecond, the details' to the
// nanosecond, as Nsight Systems gives them: a 265 µs kernel's details read
// "start 3.37 s / end 3.37 s", and instances one after the other were all
// listed "3.54 s". Durations keep three figures. All count from the trace's
// first event, as `trace stats --from` and the exports do: this store's GPU
// memory is sampled 82 us before it, and every time the app gave (the axis,
// tooltips, details, instances, a range) was 82 us later than the CLI's.
void TestGuiRun::eventTimesReadApart() {
  const QString copy =
      writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"), QStringLiteral("times.db"));
  QVERIFY(!copy.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, copy);
  TimelineWidget* t = view.timeline();
  std::int64_t origin = 0;
  {
    auto reader = trace::TraceReader::open(copy.toStdString());
    QVERIFY(reader.ok());
    origin = reader.value()->time_range().start_ns;  // the CLI's
  }
  QVERIFY2(t->fullRange().start_ns < origin,  // the lanes show the sample before it
           qPrintable(QString::number(origin - t->fullRange().start_ns)));
  // The kernel run most often: its instances, by start.
  view.kernelProxy()->sort(3, Qt::DescendingOrder);
  QSignalSpy instances(&view, &RunView::instancesReady);
  view.showKernelInstances(0);
  QTRY_COMPARE_WITH_TIMEOUT(instances.count(), 1, 30000);
  QTableWidget* list = view.instances();
  QVERIFY(list->rowCount() > 10);
  const QRegularExpression to_the_microsecond(QStringLiteral("^\\d+\\.\\d{3}\u202f\\d{3} s$"));
  std::set<std::int64_t> microseconds;
  QSet<QString> texts;
  for (int r = 0; r < list->rowCount(); ++r) {
    const QString text = list->item(r, 1)->text();
    QVERIFY2(to_the_microsecond.match(text).hasMatch(), qPrintable(text));
    texts.insert(text);
    // The sort key: nanoseconds from the run's start.
    microseconds.insert(std::llround(list->item(r, 1)->data(Qt::UserRole + 1).toDouble() / 1e3));
  }
  QCOMPARE(std::size_t(texts.size()), microseconds.size());
  QVERIFY(texts.size() > 10);

  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  list->setCurrentCell(0, 0);
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  const trace::Event e = t->selectedEvent()->event;
  // As laid out: its HTML reads the narrow space between groups as a space.
  const QString details = view.details()->toPlainText();
  for (const std::int64_t at : {e.start_ns, e.end_ns}) {
    const QString when = QString::fromStdString(format_time_ns(at - origin, 9))
                             .replace(QChar(0x202f), QLatin1Char(' '));
    QVERIFY2(details.contains(when), qPrintable(details + QStringLiteral(" has not ") + when));
  }
  QVERIFY2(details.contains(QString::fromStdString(format_seconds(double(e.duration_ns()) * 1e-9))),
           qPrintable(details));
  QCOMPARE(list->item(0, 1)->text(), QString::fromStdString(format_time_ns(e.start_ns - origin)));
  // The tooltip of the span under the pointer: when it starts, to the microsecond.
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  int lane = -1;
  for (int i = 0; i < t->laneCount(); ++i) {
    if (t->laneInfo(i).id.value == e.lane.value) lane = i;
  }
  QVERIFY(lane >= 0);
  const QPoint at(int(t->xOf(e.start_ns + e.duration_ns() / 2)), int(t->laneRect(lane).top()) + 8);
  cs::gui::test::toolTipAt(t, at);
  const QRegularExpression at_the_microsecond(
      QStringLiteral(" at \\d+\\.\\d{3}\u202f\\d{3} s|from \\d+\\.\\d{3}\u202f\\d{3} s"));
  QTRY_VERIFY2(at_the_microsecond.match(QToolTip::text()).hasMatch(), qPrintable(QToolTip::text()));
  const QString at_start = QString::fromStdString(format_time_ns(e.start_ns - origin));
  QVERIFY2(QToolTip::text().contains(at_start),
           qPrintable(QToolTip::text() + " has not " + at_start));
  // A range over the event: its heading, as `trace stats --from --to` takes it.
  QSignalSpy ready(&view, &RunView::rangeReady);
  t->setSelectedRange(trace::TimeRange{e.start_ns, e.end_ns});
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  const QString heading = view.rangeBreakdown()->toPlainText();
  for (const std::int64_t edge : {e.start_ns, e.end_ns}) {
    const QString when = QString::fromStdString(format_time_ns(edge - origin))
                             .replace(QChar(0x202f), QLatin1Char(' '));
    QVERIFY2(heading.contains(when), qPrintable(heading + QStringLiteral(" has not ") + when));
  }
  // The tables' scope says the range apart from its neighbours' too.
  const QString scope = view.findChild<QLabel*>(QStringLiteral("run_summaries_scope"))->text();
  QVERIFY2(scope.contains(QString::fromStdString(format_time_ns(e.start_ns - origin))) &&
               scope.contains(QString::fromStdString(format_time_ns(e.end_ns - origin))),
           qPrintable(scope));
}

// The range's table in a pane as narrow as a docked Run view's: its
// headers wrap between words ("communic/ation" was cut inside the word).
void TestGuiRun::rangeHeadersKeepTheirWords() {
  RunView view;
  view.resize(760, 700);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, cpu_store_);
  TimelineWidget* t = view.timeline();
  const trace::TimeRange full = t->fullRange();
  QSignalSpy ready(&view, &RunView::rangeReady);
  t->setSelectedRange(
      trace::TimeRange{full.start_ns, full.start_ns + (full.end_ns - full.start_ns) / 2});
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
  view.tabs()->setCurrentIndex(0);  // the Selection tab, laid out at its width
  QTextBrowser* range = view.rangeBreakdown();
  QTRY_VERIFY(range->isVisible());
  QCoreApplication::processEvents();
  QVERIFY(range->viewport()->width() < 500);
  QTextDocument* document = range->document();
  document->documentLayout()->documentSize();  // laid out whole
  QStringList headers;
  for (const trace::BreakdownPart& part : trace::kBreakdownParts)
    headers << QString::fromUtf8(part.name);
  int seen = 0;
  for (QTextBlock b = document->begin(); b.isValid(); b = b.next()) {
    if (!headers.contains(b.text())) continue;
    ++seen;
    QTextLayout* layout = b.layout();
    QVERIFY(layout && layout->lineCount() > 0);
    for (int i = 1; i < layout->lineCount(); ++i) {
      const int from = layout->lineAt(i).textStart();
      QVERIFY2(from > 0 && b.text().at(from - 1).isSpace(),
               qPrintable(QStringLiteral("\"%1\" cut at %2").arg(b.text()).arg(from)));
    }
  }
  QCOMPARE(seen, int(headers.size()));
  cs::gui::test::saveScreenshot(range, QStringLiteral("run-range-narrow"));
}

// What is said of one view goes with it: the step PageDown went to, once
// Home showed the whole run, or another store is open; an export refused
// for want of a range, once another store is open.
void TestGuiRun::statusGoesWithItsView() {
  const QString other = writableCopy(QStringLiteral(CS_DATA_DIR "/cpu/cpu-engine-dp2.db"),
                                     QStringLiteral("status-other.db"));
  QVERIFY(!other.isEmpty());
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  RunView* view = window.runView();
  auto open = [&](const QString& path) {
    QSignalSpy analysed(view, &RunView::analysisReady);
    window.openRun(path);
    QTRY_COMPARE_WITH_TIMEOUT(analysed.count(), 1, 60000);
    TimelineWidget* t = view->timeline();
    QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  };
  open(cpu_store_);
  TimelineWidget* t = view->timeline();
  auto* status = view->findChild<QLabel*>(QStringLiteral("run_search_status"));
  QVERIFY(status);
  QSignalSpy stepped(t, &TimelineWidget::stepShown);
  t->setFocus();
  // Step 1: the warm-up step 0 takes most of this short run.
  QTest::keyClick(t, Qt::Key_PageDown);
  QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 1, 10000);
  QTest::keyClick(t, Qt::Key_PageDown);
  QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 2, 10000);
  QCOMPARE(status->text(), QStringLiteral("step 1"));
  QTest::keyClick(t, Qt::Key_Home);
  QCOMPARE(t->window().start_ns, t->fullRange().start_ns);
  QCOMPARE(t->window().end_ns, t->fullRange().end_ns);
  QVERIFY2(status->text().isEmpty(), qPrintable(status->text()));
  // Home before the step PageDown asked for is read: the step's answer does
  // not zoom in after it, nor name its step.
  QTest::keyClick(t, Qt::Key_PageDown);
  QTest::keyClick(t, Qt::Key_Home);
  QTest::qWait(300);  // a kept answer would have come (a few ms)
  QCOMPARE(t->window().start_ns, t->fullRange().start_ns);
  QCOMPARE(t->window().end_ns, t->fullRange().end_ns);
  QVERIFY2(status->text().isEmpty(), qPrintable(status->text()));
  // (The answer may also come before Home is pressed: it is then shown, and
  // Home leaves it.)
  const qsizetype shown = stepped.count();
  QTest::keyClick(t, Qt::Key_PageDown);
  QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), shown + 1, 10000);
  QVERIFY(status->text().startsWith(QStringLiteral("step ")));
  // A range export with no range: refused, in the bar.
  QVERIFY(!window.exportRun(RunExport::csv, dir_.filePath(QStringLiteral("no-range")), true));
  QVERIFY2(window.messageBar()->text().contains(QStringLiteral("no time range is selected")),
           qPrintable(window.messageBar()->text()));
  open(other);
  QVERIFY2(status->text().isEmpty(), qPrintable(status->text()));
  QVERIFY2(!window.messageBar()->text().contains(QStringLiteral("no time range is selected")),
           qPrintable(window.messageBar()->text()));
  // A search's status goes with its store too.
  view->searchField()->setText(QStringLiteral("no event is called this"));
  QSignalSpy moved(t, &TimelineWidget::searchMoved);
  QTest::keyClick(view->searchField(), Qt::Key_Return);
  QTRY_COMPARE_WITH_TIMEOUT(moved.count(), 1, 30000);
  QCOMPARE(status->text(), QStringLiteral("no match"));
  open(cpu_store_);
  QVERIFY2(status->text().isEmpty(), qPrintable(status->text()));
}

// A step whose view, with its margin, is the whole run (a run of one step):
// Home moves nothing, and still leaves the step ("step 0" stayed named).
void TestGuiRun::homeLeavesAStepThatFillsTheRun() {
  const QString path = dir_.filePath(QStringLiteral("one-step.db"));
  QFile::remove(path);
  {
    auto w = one_kernel_store(path);  // a kernel over [1000, 2000) ns
    QVERIFY(w);
    w->add(trace::StepMetrics{0, 0, 1000, 2000, 1.5, 16, 0});
    QVERIFY(w->close().ok());
  }
  RunView view;
  view.resize(1000, 700);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  auto* status = view.findChild<QLabel*>(QStringLiteral("run_search_status"));
  QSignalSpy stepped(t, &TimelineWidget::stepShown);
  t->setFocus();
  QTest::keyClick(t, Qt::Key_PageDown);
  QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 1, 10000);
  QCOMPARE(status->text(), QStringLiteral("step 0"));
  QCOMPARE(t->window().start_ns, t->fullRange().start_ns);
  QCOMPARE(t->window().end_ns, t->fullRange().end_ns);
  QTest::keyClick(t, Qt::Key_Home);
  QVERIFY2(status->text().isEmpty(), qPrintable(status->text()));
  // ... and PageDown goes to it again, from the whole run.
  QTest::keyClick(t, Qt::Key_PageDown);
  QTRY_COMPARE_WITH_TIMEOUT(stepped.count(), 2, 10000);
  QCOMPARE(status->text(), QStringLiteral("step 0"));
}

// Figures read in the units the rest of the app uses: a straggler's
// lateness scaled ("13125 us" was not), a counter in bytes not titled
// "(bytes)" over values drawn in GiB, and a figure the same in both runs
// compared "no change", not a bare "0".
void TestGuiRun::unitsReadAsElsewhere() {
  const QString dp2 = writableCopy(QStringLiteral(CS_DATA_DIR "/cpu/cpu-engine-dp2.db"),
                                   QStringLiteral("units-dp2.db"));
  const QString bf16 = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("units-bf16.db"));
  const QString fp8 = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-fp8.db"),
                                   QStringLiteral("units-fp8.db"));
  QVERIFY(!dp2.isEmpty() && !bf16.isEmpty() && !fp8.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, dp2);
  QTableWidget* ranks = view.rankTable();
  const int straggler = ranks->columnCount() - 1;
  QCOMPARE(ranks->horizontalHeaderItem(straggler)->text(), QStringLiteral("straggler"));
  QStringList verdicts;
  for (int r = 0; r < ranks->rowCount(); ++r)
    verdicts << ranks->item(r, straggler)->text();
  const QString all = verdicts.join(QStringLiteral(" | "));
  QVERIFY2(all.contains(QStringLiteral("yes: ")), qPrintable(all));
  QVERIFY2(!QRegularExpression(QStringLiteral("\\d us\\b")).match(all).hasMatch(), qPrintable(all));
  QVERIFY2(QRegularExpression(QStringLiteral("\\d (ms|µs|s) after the")).match(all).hasMatch(),
           qPrintable(all));

  openAndWait(view, bf16);
  TimelineWidget* t = view.timeline();
  int lane = -1;
  for (int i = 0; i < t->laneCount(); ++i)
    if (t->isCounterLane(i) && t->laneInfo(i).name == "memory in use (bytes)") lane = i;
  QVERIFY(lane >= 0);
  auto* area = qobject_cast<QScrollArea*>(t->parentWidget()->parentWidget());
  QVERIFY(area);
  area->ensureVisible(0, int(t->laneRect(lane).center().y()), 0, 50);
  QTRY_VERIFY_WITH_TIMEOUT(!t->busy() && t->frameJob() == t->requestedJob(), 30000);
  // Its title, whole in the title column's tooltip; and the graph's.
  const QPoint title(4, int(t->laneRect(lane).top()) + 6);
  const QString title_tip = cs::gui::test::toolTipAt(t, title);
  QVERIFY2(title_tip.endsWith(QStringLiteral(" · memory in use")), qPrintable(title_tip));
  const QPoint graph(int(t->laneRect(lane).right()) - 20, int(t->laneRect(lane).center().y()));
  const QString graph_tip = cs::gui::test::toolTipAt(t, graph);
  QVERIFY2(graph_tip.startsWith(QStringLiteral("<b>memory in use</b>")) &&
               graph_tip.contains(QStringLiteral(" GiB")),
           qPrintable(graph_tip));
  // The Counters tab's legend over its GiB axis.
  QStringList legend;
  for (QAbstractSeries* series : view.counterChart()->chart()->series())
    legend << series->name();
  QVERIFY2(legend.contains(QStringLiteral("rank 0: memory in use")), qPrintable(legend.join('|')));
  // A line's tooltip, the pointer on it: its value in the counter's unit,
  // since its sample's time as the timeline gives it (the chart said none,
  // and its axis reads raw milliseconds).
  QLineSeries* memory = nullptr;
  for (QAbstractSeries* series : view.counterChart()->chart()->series())
    if (series->name() == QStringLiteral("rank 0: memory in use"))
      memory = qobject_cast<QLineSeries*>(series);
  QVERIFY(memory && memory->count() >= 2);
  view.tabs()->setCurrentWidget(view.counterTab());
  const QPointF on_line = memory->at(memory->count() / 2);
  QToolTip::hideText();
  emit memory->hovered(on_line, true);
  QVERIFY(QToolTip::isVisible());
  const QString chart_tip = QToolTip::text();
  QVERIFY2(chart_tip.startsWith(QStringLiteral("<b>rank 0: memory in use</b><br>")),
           qPrintable(chart_tip));
  QVERIFY2(QRegularExpression(QStringLiteral("<br>\\d+(\\.\\d+)? (B|KiB|MiB|GiB) since "
                                             "\\d+\\.\\d{3}\u202f\\d{3} s$"))
               .match(chart_tip)
               .hasMatch(),
           qPrintable(chart_tip));
  emit memory->hovered(on_line, false);

  QSignalSpy compared(&view, &RunView::comparisonReady);
  view.compareWith(fp8);
  QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60000);
  QVERIFY2(compared.front().at(0).toString().isEmpty(),
           qPrintable(compared.front().at(0).toString()));
  QTableWidget* c = view.comparisonTable();
  // The other run's size as trace compare says it: "1 rank" (it read "1 ranks").
  QVERIFY2(c->item(0, 0)->text().contains(QStringLiteral(" (1 rank, ")),
           qPrintable(c->item(0, 0)->text()));
  int unchanged = 0;
  for (int r = 0; r < c->rowCount(); ++r) {
    if (!c->item(r, 4)) continue;
    const QString change = c->item(r, 4)->text();
    QVERIFY2(change != QStringLiteral("0"), qPrintable(c->item(r, 0)->text()));
    if (change == QStringLiteral("no change")) {
      ++unchanged;
      QCOMPARE(c->item(r, 2)->text(), c->item(r, 3)->text());
    }
  }
  QVERIFY(unchanged > 0);  // exposed communication: 0 s in both (one rank)
}

// The Ranks tab's median step counts every step, the Predicted tab's only
// those past the warm-up: each label says which, its tooltip says how they
// differ (two "median step" figures for one rank disagreed, unexplained).
void TestGuiRun::medianStepSaysWhichSteps() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  QTableWidget* ranks = view.rankTable();
  int median = -1;
  for (int c = 0; c < ranks->columnCount(); ++c)
    if (ranks->horizontalHeaderItem(c)->text().startsWith(QStringLiteral("median step")))
      median = c;
  QVERIFY(median >= 0);
  QCOMPARE(ranks->horizontalHeaderItem(median)->text(), QStringLiteral("median step (all steps)"));
  QVERIFY2(
      ranks->horizontalHeaderItem(median)->toolTip().contains(QStringLiteral("warm-up included")),
      qPrintable(ranks->horizontalHeaderItem(median)->toolTip()));
  // The comparison with another run says which steps its step is the median
  // of too (it read "step (median)"), as trace compare does.
  QSignalSpy compared(&view, &RunView::comparisonReady);
  view.compareWith(cpu_store_);
  QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60000);
  QTableWidget* c = view.comparisonTable();
  int step = -1;
  QStringList names;
  for (int r = 0; r < c->rowCount(); ++r) {
    names << c->item(r, 0)->text();
    if (names.back().startsWith(QStringLiteral("step ("))) step = r;
  }
  QVERIFY2(step >= 0, qPrintable(names.join('|')));
  QCOMPARE(c->item(step, 0)->text(),
           QStringLiteral("step (median of all steps, warm-up included)"));
  QCOMPARE(c->item(step, 0)->text(), QString::fromLatin1(cs::trace::kComparedStepName));
  QVERIFY2(c->item(step, 0)->toolTip().contains(QStringLiteral("then the median over the ranks")),
           qPrintable(c->item(step, 0)->toolTip()));
}

// What the other run does not have at all reads "(gone)", as trace compare
// says it, and what only it has "(new)" (the tab read "(-100.0 %)").
void TestGuiRun::comparisonSaysWhatIsGone() {
  const QString other = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                     QStringLiteral("gone-other.db"));
  QVERIFY(!other.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  QSignalSpy compared(&view, &RunView::comparisonReady);
  view.compareWith(other);
  QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60000);
  QVERIFY2(compared.front().at(0).toString().isEmpty(),
           qPrintable(compared.front().at(0).toString()));
  QTableWidget* c = view.comparisonTable();
  int gone = 0, added = 0;
  for (int r = 0; r < c->rowCount(); ++r) {
    if (!c->item(r, 4)) continue;
    const QString mine = c->item(r, 2)->text(), theirs = c->item(r, 3)->text();
    const QString change = c->item(r, 4)->text();
    const QString zero = QStringLiteral("0 s");
    if (mine != zero && theirs == zero) {
      ++gone;
      QVERIFY2(change.endsWith(QStringLiteral(" (gone)")),
               qPrintable(c->item(r, 0)->text() + QStringLiteral(": ") + change));
    } else if (mine == zero && theirs != zero) {
      ++added;
      QVERIFY2(change.endsWith(QStringLiteral(" (new)")),
               qPrintable(c->item(r, 0)->text() + QStringLiteral(": ") + change));
    } else {
      QVERIFY2(
          !change.contains(QStringLiteral("(gone)")) && !change.contains(QStringLiteral("(new)")),
          qPrintable(c->item(r, 0)->text() + QStringLiteral(": ") + change));
    }
  }
  QVERIFY(gone > 0);   // the CPU engine's kernels and its all-reduce
  QVERIFY(added > 0);  // the GPU run's kernels
}

// The Ranks tab names the breakdown's parts as trace stats and the HTML
// report do: its copies not under compute or communication read "memory",
// beside the memory counters in bytes, where both say "exposed memory".
void TestGuiRun::ranksTabNamesPartsAsStatsDoes() {
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, cpu_store_);
  QTableWidget* ranks = view.rankTable();
  QStringList headers;
  for (int c = 0; c < ranks->columnCount(); ++c)
    headers << ranks->horizontalHeaderItem(c)->text();
  const cs::test::ProcessRun stats =
      cs::test::run_process(QStringLiteral(CS_BIN_DIR "/clusterscope"),
                            {QStringLiteral("trace"), QStringLiteral("stats"), cpu_store_});
  QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
  for (const QString& part :
       {QStringLiteral("exposed memory"), QStringLiteral("idle"), QStringLiteral("compute")}) {
    QVERIFY2(stats.out.contains(part), qPrintable(part));
    QVERIFY2(headers.contains(part), qPrintable(headers.join(QLatin1Char('|'))));
  }
  QVERIFY2(!headers.contains(QStringLiteral("memory")), qPrintable(headers.join(QLatin1Char('|'))));
}

// A run held against a plan the user gives (the current plan in the app,
// Tools > Hold the open run against the current plan): the planner's step
// for that plan, in a prediction tab that names the plan.
void TestGuiRun::predictWithAPlan() {
  const QString copy = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("with-plan.db"));
  QVERIFY(!copy.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, copy);
  auto catalog = PresetCatalog::load_default();
  QVERIFY2(catalog, catalog ? "" : catalog.message().c_str());
  const std::optional<Plan> planned = gpt2SmallOnH200(*catalog);
  QVERIFY(planned);
  const Plan& plan = *planned;
  auto estimate = cs::plan::estimate(plan);
  QVERIFY2(estimate, estimate ? "" : estimate.message().c_str());
  QSignalSpy ready(&view, &RunView::predictionReady);
  view.predictWithPlan(plan, QStringLiteral("the current plan, p"));
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 60000);
  QVERIFY2(ready.front().at(1).toString().isEmpty(), qPrintable(ready.front().at(1).toString()));
  QCOMPARE(view.predictedFromPlan(), QStringLiteral("the current plan, p"));
  QVERIFY(view.analysis()->prediction);
  QCOMPARE(view.analysis()->prediction->predicted_step_s, estimate->time.step());
  QStringList cells;
  QTableWidget* table = view.predictionTable();
  for (int r = 0; r < table->rowCount(); ++r) {
    if (table->item(r, 0)) cells << table->item(r, 0)->text();
  }
  QVERIFY2(cells.contains(QStringLiteral("Predicted from the current plan, p (on ") +
                          QString::fromStdString(shown_name(plan.cluster)) + ")"),
           qPrintable(cells.join(" | ")));
}

// Tools ▸ Predict the open run again, then at once Tools ▸ Hold the open run
// against the current plan: the plan's prediction is shown, though the first
// ends after it (it showed whichever ended last). The first is held back
// while it reads its presets: their models.json is a FIFO until the test
// writes it.
void TestGuiRun::lastPredictionAskedWins() {
  const QString copy = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("last-prediction.db"));
  QVERIFY(!copy.isEmpty());
  auto catalog = PresetCatalog::load_default();
  QVERIFY2(catalog, catalog ? "" : catalog.message().c_str());
  const std::optional<Plan> planned = gpt2SmallOnH200(*catalog);
  QVERIFY(planned);
  const Plan& plan = *planned;

  const QString shipped = QString::fromStdString(catalog->directory().string());
  const QString presets = dir_.filePath(QStringLiteral("held-presets"));
  QVERIFY(QDir().mkpath(presets));
  for (const char* file : {"gpus.json", "links.json", "clusters.json"}) {
    QVERIFY(QFile::copy(shipped + "/" + file, presets + "/" + file));
  }
  const QString models = presets + QStringLiteral("/models.json");
  QCOMPARE(::mkfifo(QFile::encodeName(models).constData(), 0600), 0);
  QFile source(shipped + QStringLiteral("/models.json"));
  QVERIFY(source.open(QIODevice::ReadOnly));
  const QByteArray models_text = source.readAll();
  bool released = false;
  auto release = [&] {  // once the prediction opens the FIFO to read (a minute at most)
    if (released) return;
    released = true;
    const QByteArray name = QFile::encodeName(models);
    QDeadlineTimer deadline(60000);
    int fd = -1;
    while ((fd = ::open(name.constData(), O_WRONLY | O_NONBLOCK)) < 0 && !deadline.hasExpired())
      QThread::msleep(10);  // no reader yet
    if (fd < 0) return;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    for (qsizetype at = 0; at < models_text.size();) {
      const ssize_t n =
          ::write(fd, models_text.constData() + at, std::size_t(models_text.size() - at));
      if (n <= 0) break;
      at += n;
    }
    ::close(fd);
  };
  const QByteArray before = qgetenv("CLUSTERSCOPE_PRESETS");
  auto restore = qScopeGuard([&] { qputenv("CLUSTERSCOPE_PRESETS", before); });

  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, copy);
  QTRY_VERIFY_WITH_TIMEOUT(!view.working(), 60000);
  QCoreApplication::processEvents();
  QSignalSpy ready(&view, &RunView::predictionReady);
  qputenv("CLUSTERSCOPE_PRESETS", presets.toUtf8());
  auto unblock = qScopeGuard(release);  // the view's end waits for its work
  view.predictAgain();
  view.predictWithPlan(plan, QStringLiteral("the current plan, p"));
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 60000);
  QVERIFY2(ready.front().at(1).toString().isEmpty(), qPrintable(ready.front().at(1).toString()));
  QCOMPARE(view.predictedFromPlan(), QStringLiteral("the current plan, p"));
  release();
  QTRY_VERIFY_WITH_TIMEOUT(!view.working(), 60000);
  QCoreApplication::processEvents();
  QCOMPARE(ready.count(), 1);
  QCOMPARE(view.predictedFromPlan(), QStringLiteral("the current plan, p"));
}

// Tools ▸ Predict the open run again on the CUDA engine's H200 run, with no
// calibration of that GPU here: the message bar gives the reason, as
// `trace stats --predict-again` does (it said only "on this-machine").
void TestGuiRun::predictAgainSaysWhyInTheBar() {
  const QString copy = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("predict-again-bar.db"));
  QVERIFY(!copy.isEmpty());
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  RunView* view = window.runView();
  QSignalSpy analysed(view, &RunView::analysisReady);
  window.openRun(copy);
  QTRY_COMPARE_WITH_TIMEOUT(analysed.count(), 1, 60000);
  QSignalSpy ready(view, &RunView::predictionReady);
  auto* action = window.findChild<QAction*>(QStringLiteral("actionPredictAgain"));
  QVERIFY(action);
  QTRY_VERIFY(action->isEnabled());
  action->trigger();
  QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 60000);
  QVERIFY2(ready.front().at(1).toString().isEmpty(), qPrintable(ready.front().at(1).toString()));
  const QStringList notes = view->predictedAgainNotes();
  QVERIFY2(notes.join('|').contains(QStringLiteral("no calibration of this GPU: predicted with the "
                                                   "datasheet of h200")),
           qPrintable(notes.join('|')));
  const QString bar = window.messageBar()->text();
  QVERIFY2(bar.contains(view->predictedAgainOn()) && bar.contains(notes.front()), qPrintable(bar));
  QCOMPARE(window.messageBar()->level(), MessageLevel::warning);
  // And under the tab's first line, as the CLI lists them.
  QTableWidget* table = view->predictionTable();
  QStringList cells;
  for (int r = 0; r < table->rowCount(); ++r)
    if (table->item(r, 0)) cells << table->item(r, 0)->text();
  QVERIFY2(cells.contains(QStringLiteral("    ") + notes.front()), qPrintable(cells.join(" | ")));
}

// The Critical path tab: the DP 2 run's path by part adds up to its step,
// crosses both ranks and is led by the data-parallel all-reduce (as `trace
// critical-path` prints it); a one-rank GPU run's stays on its rank.
void TestGuiRun::criticalPathTab() {
  const QString dp2 = writableCopy(QStringLiteral(CS_DATA_DIR "/cpu/cpu-engine-dp2.db"),
                                   QStringLiteral("critical-dp2.db"));
  const QString bf16 = writableCopy(QStringLiteral(CS_DATA_DIR "/gpu/worker-bf16.db"),
                                    QStringLiteral("critical-bf16.db"));
  QVERIFY(!dp2.isEmpty() && !bf16.isEmpty());
  RunView view;
  view.resize(1200, 900);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  CriticalPathView* path = view.criticalPath();
  QVERIFY(path);
  auto* tabs = view.findChild<QTabWidget*>();
  bool tab = false;
  for (QTabWidget* t : view.findChildren<QTabWidget*>())
    tab = tab || (t->indexOf(path) >= 0 && t->tabText(t->indexOf(path)) == "Critical path");
  QVERIFY(tabs && tab);
  auto shares = [](QTableWidget* t, int column) {
    double sum = 0;
    for (int r = 0; r < t->rowCount(); ++r)
      sum += t->item(r, column)->data(Qt::UserRole).toDouble();
    return sum;
  };
  QSignalSpy ready(path, &CriticalPathView::ready);
  openAndWait(view, dp2);
  QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 30000);
  QVERIFY2(ready.front().at(0).toString().isEmpty(), qPrintable(ready.front().at(0).toString()));
  QVERIFY2(path->summary()->text().contains("4 steps after the first"),
           qPrintable(path->summary()->text()));
  QVERIFY(std::abs(shares(path->parts(), 2) - 100.0) < 0.01);
  QCOMPARE(path->ranks()->rowCount(), 2);
  QVERIFY(std::abs(shares(path->ranks(), 2) - 100.0) < 0.01);
  QCOMPARE(path->operations()->item(0, 0)->text(), QStringLiteral("dp all-reduce"));
  QCOMPARE(path->operations()->item(0, 1)->text(), QStringLiteral("communication.dp"));

  ready.clear();
  openAndWait(view, bf16);
  QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 30000);
  QCOMPARE(path->ranks()->rowCount(), 1);
  QVERIFY(std::abs(shares(path->parts(), 2) - 100.0) < 0.01);
}

// The details of a GPU rank's GEMM (the CUDA engine's range, PyTorch's
// aten::mm): its span on the host is its launches', so its FLOP/s and
// bandwidth are those of the kernels it launched, read after the click,
// with the % of the GPU preset's peak; one whose kernels were not recorded
// says so. A CPU-engine rank's op keeps its own span's rate, at once.
void TestGuiRun::operationRatedByItsKernels_data() {
  QTest::addColumn<QString>("fixture");
  QTest::addColumn<QString>("name");
  QTest::addColumn<bool>("by_kernels");
  QTest::addRow("CUDA engine, H200 bf16") << "gpu/worker-bf16.db"
                                          << "gemm mlp.fc" << true;
  QTest::addRow("PyTorch profile") << "validation/kineto/sampled_rank-0.json.gz"
                                   << "aten::mm" << true;
  QTest::addRow("CPU engine") << "cpu/cpu-engine-dp2.db"
                              << "mlp.fc wgrad" << false;
}

void TestGuiRun::operationRatedByItsKernels() {
  QFETCH(QString, fixture);
  QFETCH(QString, name);
  QFETCH(bool, by_kernels);
  QString store;
  if (fixture.endsWith(".json.gz")) {
    store = dir_.filePath(QStringLiteral("rated-by-kernels.db"));
    QFile::remove(store);
    auto imported = trace::import_traces(
        {(QStringLiteral(CS_DATA_DIR "/") + fixture).toStdString()}, store.toStdString());
    QVERIFY2(imported, imported ? "" : imported.message().c_str());
  } else {
    store = writableCopy(QStringLiteral(CS_DATA_DIR "/") + fixture,
                         QStringLiteral("rated-%1").arg(QFileInfo(fixture).fileName()));
  }
  auto presets = cs::PresetCatalog::load_default();
  QVERIFY(presets);
  // An operation timed by its kernels and, in the profile, one whose
  // kernels were not recorded and one with only cuBLAS's split-K reduction
  // recorded (the table leaves them out).
  std::optional<trace::StoredEvent> timed, untimed, reduced;
  std::optional<trace::OperationRate> timed_rate;
  {
    auto reader = trace::TraceReader::open(store.toStdString());
    QVERIFY(reader);
    auto ops = (*reader)->find_events(name.toStdString(), trace::NameMatch::exact, 1000);
    QVERIFY(ops && !ops->empty());
    for (const trace::StoredEvent& op : *ops) {
      auto rate = trace::gemm_rate_of(**reader, op, &*presets);
      QVERIFY(rate);
      if (rate->rate.count == 1 && !timed) {
        timed = op;
        timed_rate = *rate;
      } else if (rate->rate.count == 0 && rate->kernels == 0 && !untimed) {
        untimed = op;
      } else if (rate->rate.count == 0 && rate->kernels > 0 && !reduced) {
        reduced = op;
      }
    }
  }
  QVERIFY(timed);
  RunView view;
  view.resize(1200, 900);
  view.show();
  openAndWait(view, store);
  TimelineWidget* t = view.timeline();
  QSignalSpy selected(t, &TimelineWidget::eventSelected);
  QSignalSpy rated(&view, &RunView::kernelRateShown);
  t->selectEvent(timed->id);
  QTRY_COMPARE_WITH_TIMEOUT(selected.count(), 1, 30000);
  const double seconds = double(timed_rate->rate.time_ns) * 1e-9;
  const QString kernel_rate =
      QString::fromStdString(format_rate(timed->event.flops / seconds, "FLOP/s"));
  const QString span_rate = QString::fromStdString(
      format_rate(timed->event.flops / (double(timed->event.duration_ns()) * 1e-9), "FLOP/s"));
  if (!by_kernels) {
    const QString details = view.details()->toPlainText();
    QVERIFY2(details.contains(span_rate), qPrintable(details));
    QTest::qWait(200);
    QCOMPARE(rated.count(), 0);
    return;
  }
  QVERIFY(kernel_rate != span_rate);
  QTRY_COMPARE_WITH_TIMEOUT(rated.count(), 1, 30000);
  QString details = view.details()->toPlainText();
  QVERIFY2(details.contains(QStringLiteral("on the GPU: ") + kernel_rate), qPrintable(details));
  // Not the host span's rate: that times the launch.
  QVERIFY2(!details.contains(span_rate), qPrintable(details));
  QVERIFY2(timed_rate->kernels == 1
               ? details.contains(QStringLiteral("Its kernel ran"))
               : details.contains(QStringLiteral("Its %1 kernels ran").arg(timed_rate->kernels)),
           qPrintable(details));
  if (const auto percent = timed_rate->rate.percent_of_peak()) {
    QVERIFY2(details.contains(QStringLiteral("%1 % of the h200 preset's bf16 peak (989 TFLOP/s)")
                                  .arg(*percent, 0, 'f', 1)),
             qPrintable(details));
  } else {
    QVERIFY2(!details.contains(QStringLiteral("peak")), qPrintable(details));
  }
  QCOMPARE(bool(untimed), fixture.endsWith(".json.gz"));
  QCOMPARE(bool(reduced), fixture.endsWith(".json.gz"));
  if (untimed) {
    selected.clear();
    t->selectEvent(untimed->id);
    QTRY_COMPARE_WITH_TIMEOUT(rated.count(), 2, 30000);
    details = view.details()->toPlainText();
    QVERIFY2(details.contains(QStringLiteral("No kernel it launched was recorded")),
             qPrintable(details));
    QVERIFY2(!details.contains(QStringLiteral("FLOP/s")), qPrintable(details));
    t->selectEvent(reduced->id);
    QTRY_COMPARE_WITH_TIMEOUT(rated.count(), 3, 30000);
    details = view.details()->toPlainText();
    QVERIFY2(details.contains(QStringLiteral("Only cuBLAS's split-K reduction it launched was "
                                             "recorded, not its GEMM kernel")),
             qPrintable(details));
    QVERIFY2(!details.contains(QStringLiteral("FLOP/s")), qPrintable(details));
  }
}

// A run view closed while its reads run (the store's opening, its
// analysis) waits for them: their answers came back to a view being
// destroyed, which crashed once, and on which a debug build of Qt asserts
// ("context" in qfuture_impl.h). None of its reads runs on after it.
void TestGuiRun::closedWhileReading() {
  QThreadPool::globalInstance()->waitForDone();
  for (int delay_ms : {0, 1, 3, 10, 30}) {
    auto* view = new RunView;
    view->resize(800, 600);
    view->show();
    view->openStore(cpu_store_);
    QTest::qWait(delay_ms);
    delete view;
    QCOMPARE(QThreadPool::globalInstance()->activeThreadCount(), 0);
  }
  QCoreApplication::processEvents();
}

QTEST_MAIN(TestGuiRun)
#include "tst_gui_run.moc"

// The critical path drawn over a real run's timeline: the marks are the
// core's segments of the steps in view, painted in their colour on each
// operation's lane; zoomed into a step, that step's alone; off, none.
void TestGuiRun::criticalPathOnTheTimeline() {
  const QString store = writableCopy(cpu_store_, QStringLiteral("critical.db"));
  QVERIFY(!store.isEmpty());
  RunView view;
  view.resize(1200, 800);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, store);
  TimelineWidget* t = view.timeline();
  auto* box = view.findChild<QCheckBox*>(QStringLiteral("run_critical_path"));
  auto* status = view.findChild<QLabel*>(QStringLiteral("run_critical_path_status"));
  QVERIFY(box && status);
  QVERIFY(t->criticalMarks().empty());
  box->setChecked(true);
  QTRY_VERIFY_WITH_TIMEOUT(!t->criticalMarks().empty(), 30000);
  // The run's three steps, as the core walks them.
  QCOMPARE(t->criticalSteps(), (std::pair<std::int32_t, std::int32_t>{0, 2}));
  QCOMPARE(status->text(), QStringLiteral("Critical path of steps 0–2."));
  auto reader = trace::TraceReader::open(store.toStdString());
  QVERIFY(reader);
  auto paths = trace::critical_paths(**reader);
  QVERIFY(paths);
  std::vector<trace::CriticalSegment> segments;
  for (const trace::CriticalPath& p : *paths)
    segments.insert(segments.end(), p.segments.begin(), p.segments.end());
  QCOMPARE(t->criticalMarks().size(), segments.size());
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const TimelineWidget::CriticalMark& m = t->criticalMarks()[i];
    QCOMPARE(m.lane, segments[i].lane);
    QCOMPARE(m.rank, segments[i].rank);
    QCOMPARE(m.start_ns, segments[i].start_ns);
    QCOMPARE(m.end_ns, segments[i].end_ns);
  }
  // The widest mark on a lane is painted along that lane's top.
  auto widest = [&] {
    const TimelineWidget::CriticalMark* best = nullptr;
    for (const TimelineWidget::CriticalMark& m : t->criticalMarks()) {
      if (m.lane.value == 0 || m.end_ns <= t->window().start_ns || m.start_ns >= t->window().end_ns)
        continue;
      if (!best || m.end_ns - m.start_ns > best->end_ns - best->start_ns) best = &m;
    }
    return best;
  };
  auto lane_index = [&](trace::LaneId id) {
    for (int i = 0; i < t->laneCount(); ++i) {
      if (!t->isCounterLane(i) && t->laneInfo(i).id == id) return i;
    }
    return -1;
  };
  auto painted_at = [&](const TimelineWidget::CriticalMark& m) {
    const int index = lane_index(m.lane);
    if (index < 0) return QColor();
    const double x0 = std::max<double>(t->gutterWidth(), t->xOf(m.start_ns));
    const double x1 = std::min<double>(t->width() - 5, t->xOf(m.end_ns));
    const QImage image = t->grab().toImage();
    return image.pixelColor(QPoint(int((x0 + x1) / 2), int(t->laneRect(index).top()) + 1));
  };
  const TimelineWidget::CriticalMark* mark = widest();
  QVERIFY(mark);
  QVERIFY2(t->xOf(mark->end_ns) - t->xOf(mark->start_ns) >= 3, "the widest mark is under 3 px");
  QTRY_COMPARE_WITH_TIMEOUT(painted_at(*mark), TimelineWidget::criticalPathColor(), 10000);

  // Zoomed into step 1, between the ends of its neighbours (the ranks'
  // steps are skewed; each step's all-reduce keeps them apart): its path alone.
  const auto one = trace::critical_paths(**reader, std::pair{1, 1});
  QVERIFY(one && one->size() == 1);
  const auto windows = trace::job_step_windows(**reader);
  QVERIFY(windows && windows->size() == 3);
  const std::int64_t from = std::max((*windows)[0].end, (*windows)[1].start);
  const std::int64_t to = std::min((*windows)[2].start, (*windows)[1].end);
  QVERIFY(to > from);
  t->setWindow(from, to);
  QTRY_COMPARE_WITH_TIMEOUT(t->criticalSteps(), (std::pair<std::int32_t, std::int32_t>{1, 1}),
                            30000);
  QCOMPARE(t->criticalMarks().size(), one->front().segments.size());
  QCOMPARE(status->text(), QStringLiteral("Critical path of step 1."));
  mark = widest();
  QVERIFY(mark);
  QTRY_COMPARE_WITH_TIMEOUT(painted_at(*mark), TimelineWidget::criticalPathColor(), 10000);
  const TimelineWidget::CriticalMark drawn = *mark;

  // Off: nothing drawn there any more.
  box->setChecked(false);
  QVERIFY(t->criticalMarks().empty());
  QTRY_VERIFY_WITH_TIMEOUT(painted_at(drawn) != TimelineWidget::criticalPathColor(), 10000);
  // On again, then another store opened: that store's path, all its steps.
  box->setChecked(true);
  QTRY_VERIFY_WITH_TIMEOUT(!t->criticalMarks().empty(), 30000);
  const QString other =
      writableCopy(QStringLiteral(CS_DATA_DIR "/cpu/cpu-engine-dp2.db"), "critical-other.db");
  QVERIFY(!other.isEmpty());
  openAndWait(view, other);
  auto other_reader = trace::TraceReader::open(other.toStdString());
  QVERIFY(other_reader);
  auto other_paths = trace::critical_paths(**other_reader);
  QVERIFY(other_paths && !other_paths->empty());
  std::size_t other_segments = 0;
  for (const trace::CriticalPath& p : *other_paths)
    other_segments += p.segments.size();
  QTRY_COMPARE_WITH_TIMEOUT(t->criticalSteps(),
                            (std::pair<std::int32_t, std::int32_t>{other_paths->front().step,
                                                                  other_paths->back().step}),
                            30000);
  QCOMPARE(t->criticalMarks().size(), other_segments);
  QCOMPARE(t->criticalMarks().front().start_ns, other_paths->front().segments.front().start_ns);
}

// More steps in view than the path is drawn for: none drawn, and the note
// says to zoom in; zoomed in, drawn.
void TestGuiRun::criticalPathOfManySteps() {
  const QString path = dir_.filePath(QStringLiteral("many-steps.db"));
  const int steps = TimelineWidget::kCriticalPathSteps + 10;
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    (*w)->add_rank({0, "host", "CPU", 1, 0, false});
    const trace::LaneId lane = (*w)->add_lane(0, trace::LaneKind::cpu_thread, "compute");
    const trace::StringId gemm = (*w)->intern("mlp.fc");
    for (int s = 0; s < steps; ++s) {
      trace::Event e;
      e.lane = lane;
      e.kind = trace::EventKind::cpu_op;
      e.category = trace::Category::compute;
      e.name = gemm;
      e.start_ns = s * 1'000'000;
      e.end_ns = e.start_ns + 600'000;
      e.step = s;
      (*w)->add(e);
      (*w)->add(trace::StepMetrics{0, s, e.start_ns, e.start_ns + 1'000'000, 1.0, 1, 0});
    }
    QVERIFY((*w)->close().ok());
  }
  RunView view;
  view.resize(1200, 600);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  openAndWait(view, path);
  TimelineWidget* t = view.timeline();
  QSignalSpy changed(t, &TimelineWidget::criticalPathChanged);
  t->setCriticalPathShown(true);
  QTRY_VERIFY_WITH_TIMEOUT(changed.count() >= 1, 30000);
  QVERIFY(t->criticalMarks().empty());
  QCOMPARE(t->criticalPathNote(),
           QStringLiteral("%1 steps in view: zoom in to %2 or fewer to draw their critical path.")
               .arg(steps)
               .arg(TimelineWidget::kCriticalPathSteps));
  // Steps 10 to 14 in view: each step's GEMM, then 0.4 ms idle.
  t->setWindow(10'000'000 + 1, 15'000'000 - 1);
  QTRY_COMPARE_WITH_TIMEOUT(t->criticalSteps(), (std::pair<std::int32_t, std::int32_t>{10, 14}),
                            30000);
  QCOMPARE(t->criticalMarks().size(), std::size_t{10});
  QCOMPARE(t->criticalMarks().front().start_ns, std::int64_t{10'000'000});
  QCOMPARE(t->criticalMarks().front().end_ns, std::int64_t{10'600'000});
  QCOMPARE(t->criticalMarks()[1].lane.value, 0u);  // idle
}
