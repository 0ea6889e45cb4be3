// The timeline widget on real trace stores: hundreds of thousands of events
// become about one drawn item per pixel; deep zoom at nanosecond times far
// from zero puts each event at its exact pixels (int64 until the window's
// start is subtracted); the planner's predicted step written through the
// trace writer and read back; stores that are not there or not stores.

#include <QFile>
#include <QFontMetricsF>
#include <QLineEdit>
#include <QMouseEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QToolTip>
#include <QVBoxLayout>
#include <limits>

#include <sqlite3.h>

#include "app/gui/predicted_timeline.h"
#include "app/gui/project.h"
#include "app/gui/timeline_widget.h"
#include "core/format.h"
#include "core/presets.h"
#include "core/trace_reader.h"
#include "core/trace_types.h"
#include "core/trace_writer.h"
#include "gui_test_support.h"
#include "planners/estimate.h"

using namespace cs;
using namespace cs::gui;

namespace {

// Absolute times like a wall clock's: far beyond what a double holds to the
// nanosecond (2^53 ns is about 104 days).
constexpr std::int64_t kEpoch = 1'700'000'000'000'000'000;
constexpr std::int64_t kPeriod = 100;  // one 50 ns event every 100 ns
constexpr std::int64_t kLength = 50;
constexpr int kEvents = 200'000;

// A store with two ranks: rank 0 holds kEvents short kernels, each inside a
// phase annotation of 1000 events (nesting depth 1); rank 1 one long event.
QString writeDenseStore(const QString& path) {
  trace::RunInfo run;
  run.title = "dense";
  run.source = "test";
  auto w = trace::TraceWriter::create(path.toStdString(), run);
  if (!w) qFatal("%s", w.message().c_str());
  trace::TraceWriter& writer = *w.value();
  writer.add_rank({0, "host", "GPU 0", 1, 0, false});
  writer.add_rank({1, "host", "GPU 1", 2, 0, false});
  const trace::LaneId kernels = writer.add_lane(0, trace::LaneKind::gpu_stream, "stream 7");
  const trace::LaneId other = writer.add_lane(1, trace::LaneKind::gpu_stream, "stream 7");
  const trace::StringId gemm = writer.intern("gemm");
  const trace::StringId phase = writer.intern("phase");
  for (int i = 0; i < kEvents; ++i) {
    if (i % 1000 == 0) {
      trace::Event p;
      p.lane = kernels;
      p.kind = trace::EventKind::annotation;
      // A little before its first kernel, so that it is clearly the outer one.
      p.start_ns = kEpoch + std::int64_t(i) * kPeriod - 5;
      p.end_ns = p.start_ns + 1000 * kPeriod - 10;
      p.name = phase;
      writer.add(p);
    }
    trace::Event e;
    e.lane = kernels;
    e.start_ns = kEpoch + std::int64_t(i) * kPeriod;
    e.end_ns = e.start_ns + kLength;
    e.name = gemm;
    writer.add(e);
  }
  trace::Event long_one;
  long_one.lane = other;
  long_one.category = trace::Category::communication;
  long_one.kind = trace::EventKind::collective;
  long_one.start_ns = kEpoch;
  long_one.end_ns = kEpoch + std::int64_t(kEvents) * kPeriod;
  long_one.name = writer.intern("all-reduce");
  writer.add(long_one);
  if (Status s = writer.close(); !s) qFatal("%s", s.message().c_str());
  return path;
}

// A store with one lane a rank, named as given, each holding one event.
QString writeNamedLanes(const QString& path, const QStringList& names) {
  trace::RunInfo run;
  run.title = "named lanes";
  run.source = "test";
  auto w = trace::TraceWriter::create(path.toStdString(), run);
  if (!w) qFatal("%s", w.message().c_str());
  trace::TraceWriter& writer = *w.value();
  for (int rank = 0; rank < names.size(); ++rank) {
    writer.add_rank({rank, "host", "GPU " + std::to_string(rank), rank + 1, 0, false});
    trace::Event e;
    e.lane = writer.add_lane(rank, trace::LaneKind::gpu_stream, names[rank].toStdString());
    e.start_ns = 1000;
    e.end_ns = 2000 + rank * 100;
    e.name = writer.intern("gemm");
    writer.add(e);
  }
  if (Status s = writer.close(); !s) qFatal("%s", s.message().c_str());
  return path;
}

// A press, moves and a release of the left button, as a drag of the mouse.
void drag(QWidget* w, QPointF from, QPointF to) {
  auto send = [w](QEvent::Type type, QPointF at, Qt::MouseButton button, Qt::MouseButtons held) {
    QMouseEvent e(type, at, w->mapToGlobal(at), button, held, Qt::NoModifier);
    QApplication::sendEvent(w, &e);
  };
  send(QEvent::MouseButtonPress, from, Qt::LeftButton, Qt::LeftButton);
  for (int i = 1; i <= 4; ++i)
    send(QEvent::MouseMove, from + (to - from) * i / 4, Qt::NoButton, Qt::LeftButton);
  send(QEvent::MouseButtonRelease, to, Qt::LeftButton, Qt::NoButton);
}

}  // namespace

class TestGuiTimeline : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void onePaintedItemPerPixel();
  void tickLabelsSpeakTheStepsUnit_data();
  void tickLabelsSpeakTheStepsUnit();
  void deepZoomKeepsNanoseconds();
  void timesToTheMicrosecond_data();
  void timesToTheMicrosecond();
  void tooltipsTellEventsApart();
  void namesWithPercentDigitsReadAsWritten();
  void zoomAndPanStayInTheTrace();
  void zoomKeepsThePointersTime_data();
  void zoomKeepsThePointersTime();
  void searchAgainWaitsForItsMatches();
  void traceShorterThanTheDeepestZoom_data();
  void traceShorterThanTheDeepestZoom();
  void counterTimesPastWhatAStoreHolds_data();
  void counterTimesPastWhatAStoreHolds();
  void predictedStepStore();
  void laneTitlesColumn();
  void keyboardFocusMarked();
  void badStores_data();
  void badStores();

 private:
  void waitForFrame(TimelineWidget& w);
  QTemporaryDir dir_;
  QString dense_;
};

void TestGuiTimeline::initTestCase() {
  test::isolateSettings();
  QVERIFY(dir_.isValid());
  dense_ = writeDenseStore(dir_.filePath(QStringLiteral("dense.cstrace")));
}

void TestGuiTimeline::waitForFrame(TimelineWidget& w) {
  QTRY_VERIFY_WITH_TIMEOUT(!w.busy() && w.frameJob() != 0 && w.frameJob() == w.requestedJob(),
                           20000);
  w.repaint();
}

// Ticks in the unit a profiler speaks for their step: 2 ms apart they read
// "0.002 s", "0.004 s".
void TestGuiTimeline::tickLabelsSpeakTheStepsUnit_data() {
  QTest::addColumn<qint64>("t");
  QTest::addColumn<qint64>("step");
  QTest::addColumn<QString>("label");
  QTest::addRow("2 ms apart") << qint64(4'000'000) << qint64(2'000'000) << "4 ms";
  QTest::addRow("0.5 ms apart") << qint64(1'500'000) << qint64(500'000) << "1.5 ms";
  QTest::addRow("50 us apart") << qint64(150'000) << qint64(50'000) << "150 µs";
  QTest::addRow("200 ms apart") << qint64(600'000'000) << qint64(200'000'000) << "0.6 s";
  QTest::addRow("2 s apart") << qint64(4'000'000'000) << qint64(2'000'000'000) << "4 s";
  QTest::addRow("10 ns apart") << qint64(30) << qint64(10) << "30 ns";
  // Past five digits the larger unit, with the step's digits.
  QTest::addRow("2 ms apart at two minutes")
      << qint64(123'456'000'000) << qint64(2'000'000) << "123.456 s";
  QTest::addRow("200 ns apart at 12 ms") << qint64(12'345'600) << qint64(200) << "12345.6 µs";
  QTest::addRow("start") << qint64(0) << qint64(2'000'000) << "0 ms";
}

void TestGuiTimeline::tickLabelsSpeakTheStepsUnit() {
  QFETCH(qint64, t);
  QFETCH(qint64, step);
  QFETCH(QString, label);
  QCOMPARE(cs::gui::timeTickLabel(t, step), label);
}

void TestGuiTimeline::onePaintedItemPerPixel() {
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QSignalSpy opened(&w, &TimelineWidget::storeOpened);
  w.setStore(dense_);
  waitForFrame(w);
  QCOMPARE(opened.count(), 1);
  QVERIFY(opened.front().at(1).toString().isEmpty());
  QCOMPARE(w.laneCount(), 2);
  QCOMPARE(w.fullRange().start_ns, kEpoch - 5);
  // 200,000 kernels and 200 phases across about 750 pixels: the reader folds
  // them and the paint draws what it is handed, about one item per pixel and
  // nesting level, never one per event.
  const int pixels = w.spanAreaWidth();
  const int levels = 2 + 1;  // rank 0: phases and kernels; rank 1: one event
  QVERIFY2(w.handedSpans() <= std::int64_t(levels) * (pixels + 2),
           qPrintable(QStringLiteral("%1 spans for %2 pixels").arg(w.handedSpans()).arg(pixels)));
  QVERIFY(w.drawnItems() <= levels * (pixels + 2));
  QVERIFY(w.drawnItems() > 0);
  const QImage shot = test::saveScreenshot(&w, QStringLiteral("timeline-200k-events"));
  QVERIFY(test::distinctColours(shot) > 8);
}

void TestGuiTimeline::deepZoomKeepsNanoseconds() {
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(dense_);
  waitForFrame(w);
  // 2 us around event 123,456: 20 events, each 50 ns on and 50 ns off.
  const std::int64_t start = kEpoch + 123'456 * kPeriod;
  w.setWindow(start, start + 2000);
  waitForFrame(w);
  QCOMPARE(w.window().start_ns, start);
  QVERIFY(w.handedSpans() >= 20);
  const QImage image = w.grab().toImage();
  const int pixels = w.spanAreaWidth();
  const double left = w.width() - 4 - pixels;  // the span area ends 4 px from the right
  const double per_ns = double(pixels) / 2000.0;
  // The kernel row of rank 0 is its second level (under the phases).
  const int kernel_row_y = int(w.laneRect(0).top()) + 16 + 8;
  for (int k = 0; k < 20; ++k) {
    const double on = left + (double(k * kPeriod) + kLength / 2.0) * per_ns;
    const double off = left + (double(k * kPeriod) + kLength + (kPeriod - kLength) / 2.0) * per_ns;
    const QColor in_event = image.pixelColor(int(on), kernel_row_y);
    const QColor in_gap = image.pixelColor(int(off), kernel_row_y);
    QVERIFY2(in_event != in_gap,
             qPrintable(QStringLiteral("event %1 is not where its nanoseconds say").arg(k)));
    QVERIFY2(in_event.saturation() > 60,
             qPrintable(QStringLiteral("event %1: %2").arg(k).arg(in_event.name())));
  }
  test::saveScreenshot(&w, QStringLiteral("timeline-deep-zoom"));
}

// A point in time to the microsecond, or the nanosecond, as Nsight Systems
// gives it, the decimals in groups of three: three figures ("3.37 s") told
// a 265 µs kernel's start from its end no more than from its neighbours'.
void TestGuiTimeline::timesToTheMicrosecond_data() {
  QTest::addColumn<qint64>("ns");
  QTest::addColumn<int>("decimals");
  QTest::addColumn<QString>("text");
  const QString g = QStringLiteral("\u202f");  // between groups: a narrow no-break space
  QTest::addRow("a kernel's start") << qint64(3'371'245'123) << 6 << "3.371" + g + "245 s";
  QTest::addRow("to the nanosecond")
      << qint64(3'371'245'123) << 9 << "3.371" + g + "245" + g + "123 s";
  QTest::addRow("265 us later") << qint64(3'371'510'123) << 6 << "3.371" + g + "510 s";
  QTest::addRow("half a microsecond rounds up")
      << qint64(999'999'500) << 6 << "1.000" + g + "000 s";
  QTest::addRow("the start") << qint64(0) << 6 << "0.000" + g + "000 s";
  QTest::addRow("before the start") << qint64(-1'500) << 6 << "-0.000" + g + "002 s";
  QTest::addRow("two hours in") << qint64(7'200'123'456'789) << 6 << "7200.123" + g + "457 s";
  QTest::addRow("to the millisecond") << qint64(12'345'678) << 3 << "0.012 s";
  QTest::addRow("the furthest a store holds")
      << std::numeric_limits<qint64>::max() << 9 << "9223372036.854" + g + "775" + g + "807 s";
}

void TestGuiTimeline::timesToTheMicrosecond() {
  QFETCH(qint64, ns);
  QFETCH(int, decimals);
  QFETCH(QString, text);
  QCOMPARE(QString::fromStdString(cs::format_time_ns(ns, decimals)), text);
}

// Two events 2 µs apart, 12 ms into the trace: each tooltip says when its
// event starts, to the microsecond (both read "50.0 ns at 12.3 ms").
void TestGuiTimeline::tooltipsTellEventsApart() {
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(dense_);
  waitForFrame(w);
  const std::int64_t origin = w.fullRange().start_ns;
  const std::int64_t first = kEpoch + 123'456 * kPeriod;
  w.setWindow(first - 1000, first + 3000);
  waitForFrame(w);
  const int kernel_row_y = int(w.laneRect(0).top()) + 16 + 8;
  QStringList tips;
  for (const std::int64_t start : {first, first + 20 * kPeriod}) {
    const QPoint at(int(w.xOf(start + kLength / 2)), kernel_row_y);
    cs::gui::test::toolTipAt(&w, at);
    const QString when = QString::fromStdString(cs::format_time_ns(start - origin));
    QTRY_VERIFY2(QToolTip::text().contains(QStringLiteral(" at ") + when),
                 qPrintable(QToolTip::text() + QStringLiteral(" has not ") + when));
    tips << QToolTip::text();
  }
  QVERIFY2(tips[0] != tips[1], qPrintable(tips[0]));
}

// Names holding "%1", "%2" (a format string in an NVTX range, a file name)
// read as written: each was taken as a place for the figures that follow,
// and a fold of them read "copy 2 of 3 and %2 more".
void TestGuiTimeline::namesWithPercentDigitsReadAsWritten() {
  const QString path = dir_.filePath(QStringLiteral("percent-names.cstrace"));
  const QString name = QStringLiteral("copy %1 of %2");
  {
    trace::RunInfo run;
    run.title = "percent";
    run.source = "test";
    auto w = trace::TraceWriter::create(path.toStdString(), run);
    QVERIFY(w.ok());
    trace::TraceWriter& writer = *w.value();
    writer.add_rank({0, "host", "GPU 0", 1, 0, false});
    const trace::LaneId lane = writer.add_lane(0, trace::LaneKind::gpu_stream, "stream 7");
    const trace::StringId id = writer.intern(name.toStdString());
    // 2000 events of 50 ns in 1 ms: a pixel of the whole holds several.
    for (int i = 0; i < 2000; ++i) {
      trace::Event e;
      e.lane = lane;
      e.start_ns = std::int64_t(i) * 500;
      e.end_ns = e.start_ns + 50;
      e.name = id;
      writer.add(e);
    }
    QVERIFY(writer.close().ok());
  }
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(path);
  waitForFrame(w);
  const int row_y = int(w.laneRect(0).top()) + 8;
  const QPoint at(int(w.xOf(500'000)), row_y);
  const QString tip = cs::gui::test::toolTipAt(&w, at);
  QVERIFY2(tip.contains(QStringLiteral("<b>copy %1 of %2</b> and ")) &&
               tip.contains(QStringLiteral(" more<br>")) && !tip.contains(QStringLiteral("%3")),
           qPrintable(tip));
}

void TestGuiTimeline::zoomAndPanStayInTheTrace() {
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(dense_);
  waitForFrame(w);
  const trace::TimeRange full = w.fullRange();
  w.zoom(4, full.start_ns);
  QCOMPARE(w.window().start_ns, full.start_ns);
  QCOMPARE(w.window().end_ns - w.window().start_ns, (full.end_ns - full.start_ns) / 4);
  w.setFocus();
  for (int i = 0; i < 50; ++i)
    QTest::keyClick(&w, Qt::Key_Right);
  QCOMPARE(w.window().end_ns, full.end_ns);  // panned to the end, no further
  QTest::keyClick(&w, Qt::Key_Minus);
  QTest::keyClick(&w, Qt::Key_Home);
  QCOMPARE(w.window().start_ns, full.start_ns);
  QCOMPARE(w.window().end_ns, full.end_ns);
  // As in Nsight Systems and Perfetto: the plain wheel leaves the window
  // (it scrolls the lanes), Ctrl+wheel zooms around the pointer, Shift+wheel
  // and a horizontal wheel pan; W and S zoom, A and D pan.
  const QPoint middle(int(w.width() - 4 - w.spanAreaWidth() / 2.0), 60);
  auto wheel = [&](QPoint delta, Qt::KeyboardModifiers modifiers) {
    QWheelEvent event(middle, w.mapToGlobal(middle), {}, delta, Qt::NoButton, modifiers,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(&w, &event);
    return event.isAccepted();
  };
  QVERIFY(!wheel(QPoint(0, 120), Qt::NoModifier));
  QCOMPARE(w.window().start_ns, full.start_ns);
  QCOMPARE(w.window().end_ns, full.end_ns);
  QVERIFY(wheel(QPoint(0, 120), Qt::ControlModifier));
  QVERIFY(w.window().end_ns - w.window().start_ns < full.end_ns - full.start_ns);
  const trace::TimeRange zoomed = w.window();
  QVERIFY(wheel(QPoint(0, -120), Qt::ShiftModifier));  // a notch down: later times
  QVERIFY(w.window().start_ns > zoomed.start_ns);
  QCOMPARE(w.window().end_ns - w.window().start_ns, zoomed.end_ns - zoomed.start_ns);
  QVERIFY(wheel(QPoint(120, 0), Qt::NoModifier));  // sideways: back
  QCOMPARE(w.window().start_ns, zoomed.start_ns);
  QTest::keyClick(&w, Qt::Key_W);
  QVERIFY(w.window().end_ns - w.window().start_ns < zoomed.end_ns - zoomed.start_ns);
  QTest::keyClick(&w, Qt::Key_S);  // back, within the nanoseconds of rounding
  QVERIFY(std::abs((w.window().end_ns - w.window().start_ns) - (zoomed.end_ns - zoomed.start_ns)) <= 2);
  const trace::TimeRange before = w.window();
  QTest::keyClick(&w, Qt::Key_D);
  QVERIFY(w.window().start_ns > before.start_ns);
  QTest::keyClick(&w, Qt::Key_A);
  QVERIFY(std::abs(w.window().start_ns - before.start_ns) <= 2);
  QTest::mousePress(&w, Qt::LeftButton, {}, middle);
  QMouseEvent move(QEvent::MouseMove, middle + QPoint(100, 0),
                   w.mapToGlobal(middle + QPoint(100, 0)), Qt::NoButton, Qt::LeftButton,
                   Qt::NoModifier);
  QApplication::sendEvent(&w, &move);
  QTest::mouseRelease(&w, Qt::LeftButton, {}, middle + QPoint(100, 0));
  QVERIFY(w.window().start_ns < zoomed.start_ns);  // dragged right: earlier times come in
  waitForFrame(w);
}

// Ctrl+wheel zooms around the pointer down to the deepest zoom (100 ns) and
// no further: the time under the pointer stays under it. Near the deepest
// zoom the window was widened back from its start, and each notch there
// panned the view (15 ns a notch, at three quarters of the width).
void TestGuiTimeline::zoomKeepsThePointersTime_data() {
  QTest::addColumn<qint64>("window");  // ns shown before the notches
  QTest::addColumn<double>("at");      // the pointer's share of the span area
  QTest::addRow("down to the deepest zoom") << qint64(2000) << 0.75;
  QTest::addRow("at the deepest zoom") << qint64(100) << 0.75;
  QTest::addRow("just above it") << qint64(120) << 0.5;
  QTest::addRow("near the left") << qint64(100) << 0.1;
}

void TestGuiTimeline::zoomKeepsThePointersTime() {
  QFETCH(qint64, window);
  QFETCH(double, at);
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(dense_);
  waitForFrame(w);
  const std::int64_t start = kEpoch + 123'456 * kPeriod;
  w.setWindow(start, start + window);
  QCOMPARE(w.window().end_ns - w.window().start_ns, window);
  const double x = w.xOf(start) + at * w.spanAreaWidth();
  const QPoint pointer(int(std::lround(x)), 60);
  const double pointer_share = (pointer.x() - w.xOf(start)) / w.spanAreaWidth();
  const std::int64_t under = start + std::int64_t(pointer_share * double(window));
  // Within a nanosecond's pixels (7.5 at the deepest zoom): the pointer's
  // time is a whole nanosecond.
  const double slack = 1.0 + double(w.spanAreaWidth()) / 100.0;
  for (int notch = 0; notch < 16; ++notch) {
    QWheelEvent event(pointer, w.mapToGlobal(pointer), {}, QPoint(0, 120), Qt::NoButton,
                      Qt::ControlModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(&w, &event);
    QVERIFY2(std::abs(w.xOf(under) - pointer.x()) <= slack,
             qPrintable(QStringLiteral("notch %1: the pointer's time is %2 px from it (%3 to %4)")
                            .arg(notch + 1)
                            .arg(w.xOf(under) - pointer.x())
                            .arg(w.window().start_ns - start)
                            .arg(w.window().end_ns - start)));
  }
  QCOMPARE(w.window().end_ns - w.window().start_ns, qint64(100));
  // The keys zoom around the middle, which stays too.
  const std::int64_t middle = w.window().start_ns + 50;
  w.setFocus();
  QTest::keyClick(&w, Qt::Key_W);
  QCOMPARE(w.window().start_ns + 50, middle);
  waitForFrame(w);
}

// Enter pressed again while a search's matches are looked up waits for
// them: it said "no match" meanwhile (searchMoved with none), over a store
// of 200,000 matches.
void TestGuiTimeline::searchAgainWaitsForItsMatches() {
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(dense_);
  waitForFrame(w);
  QSignalSpy moved(&w, &TimelineWidget::searchMoved);
  w.findNext(QStringLiteral("gemm"));
  w.findNext(QStringLiteral("gemm"));  // before the answer: it comes on the event loop
  QCOMPARE(moved.count(), 0);
  QTRY_COMPARE_WITH_TIMEOUT(moved.count(), 1, 20000);
  QCOMPARE(moved.front().at(0).toInt(), 0);
  QVERIFY(moved.front().at(1).toInt() > 0);
  QVERIFY(w.selectedEvent());
  w.findNext(QStringLiteral("gemm"));  // then each key steps
  QCOMPARE(moved.count(), 2);
  QCOMPARE(moved.back().at(0).toInt(), 1);
  waitForFrame(w);
}

// A trace shorter than the deepest zoom (100 ns): its range is made that
// wide, so that every window stays inside it. A 50 ns trace had the window
// clamped between 100 ns and 50 (undefined; an abort where the library
// checks) and shown 50 ns past the trace's end.
void TestGuiTimeline::traceShorterThanTheDeepestZoom_data() {
  QTest::addColumn<qint64>("length");  // the one event's, from 1000 ns
  QTest::addRow("1 ns") << qint64(1);
  QTest::addRow("50 ns") << qint64(50);
  QTest::addRow("99 ns") << qint64(99);
  QTest::addRow("an instant") << qint64(0);
}

void TestGuiTimeline::traceShorterThanTheDeepestZoom() {
  QFETCH(qint64, length);
  const QString path = dir_.filePath(QStringLiteral("short-%1.db").arg(length));
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    (*w)->add_rank({0, "host", "CPU", 1, 0, false});
    trace::Event e;
    e.lane = (*w)->add_lane(0, trace::LaneKind::cpu_thread, "compute");
    e.start_ns = 1000;
    e.end_ns = 1000 + length;
    e.name = (*w)->intern("gemm");
    (*w)->add(e);
    QVERIFY((*w)->close().ok());
  }
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(path);
  waitForFrame(w);
  const trace::TimeRange full = w.fullRange();
  QCOMPARE(full.start_ns, qint64(1000));
  QVERIFY2(full.end_ns - full.start_ns >= 100,
           qPrintable(QString::number(full.end_ns - full.start_ns)));
  auto inside = [&] {
    const trace::TimeRange v = w.window();
    return v.start_ns >= full.start_ns && v.end_ns <= full.end_ns && v.end_ns > v.start_ns;
  };
  QVERIFY(inside());
  w.setFocus();
  for (Qt::Key key :
       {Qt::Key_Plus, Qt::Key_W, Qt::Key_D, Qt::Key_Minus, Qt::Key_S, Qt::Key_A, Qt::Key_Home}) {
    QTest::keyClick(&w, key);
    QVERIFY2(inside(), qPrintable(QStringLiteral("after key %1: %2 to %3")
                                      .arg(key)
                                      .arg(w.window().start_ns)
                                      .arg(w.window().end_ns)));
  }
  w.setWindow(0, 1'000'000);
  QVERIFY(inside());
  waitForFrame(w);
}

// A counter sampled at a time past what a store holds (a damaged store: the
// writer keeps any time of a sample): the view's range stays within the
// times a store holds. A sample near INT64_MAX took the range there, the
// axis's ticks wrapped past it and the first paint never ended; one near
// INT64_MIN as well made the range's length wrap, and the view showed 100 ns
// at INT64_MIN, none of the events.
void TestGuiTimeline::counterTimesPastWhatAStoreHolds_data() {
  QTest::addColumn<QList<qint64>>("samples");
  constexpr qint64 kMin = std::numeric_limits<qint64>::min(),
                   kMax = std::numeric_limits<qint64>::max();
  QTest::addRow("after the end") << QList<qint64>{1500, kMax - 5};
  QTest::addRow("before the start") << QList<qint64>{kMin + 5, 1500};
  QTest::addRow("both") << QList<qint64>{kMin + 5, 1500, kMax - 5};
}

void TestGuiTimeline::counterTimesPastWhatAStoreHolds() {
  QFETCH(QList<qint64>, samples);
  const QString path = dir_.filePath(
      QStringLiteral("counter-past-%1.db").arg(QTest::currentDataTag()).replace(' ', '-'));
  {
    auto w = trace::TraceWriter::create(path.toStdString(), {});
    QVERIFY(w.ok());
    (*w)->add_rank({0, "host", "GPU 0", 1, 0, false});
    trace::Event e;
    e.lane = (*w)->add_lane(0, trace::LaneKind::gpu_stream, "stream 7");
    e.kind = trace::EventKind::kernel;
    e.start_ns = 1000;
    e.end_ns = 2000;
    e.name = (*w)->intern("gemm");
    (*w)->add(e);
    const trace::StringId memory = (*w)->intern("memory in use (bytes)");
    // Written at times the writer keeps, then moved where it now refuses
    // them (samples_dropped_outside_the_time_a_trace_holds), as a store of
    // an older writer or a damaged one holds them.
    for (int i = 0; i < samples.size(); ++i)
      (*w)->add(trace::CounterSample{0, memory, 3000 + i, 4096});
    QVERIFY((*w)->close().ok());
  }
  {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    for (int i = 0; i < samples.size(); ++i) {
      const QByteArray sql = QStringLiteral("UPDATE counters SET time_ns = %1 WHERE time_ns = %2")
                                 .arg(samples[i])
                                 .arg(3000 + i)
                                 .toUtf8();
      QCOMPARE(sqlite3_exec(db, sql.constData(), nullptr, nullptr, nullptr), SQLITE_OK);
      QCOMPARE(sqlite3_changes(db), 1);
    }
    sqlite3_close(db);
  }
  TimelineWidget w;
  w.resize(900, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(path);
  waitForFrame(w);  // painted
  QCOMPARE(w.laneCount(), 2);
  const trace::TimeRange full = w.fullRange();
  QVERIFY2(full.start_ns >= -trace::kTraceTimeLimitNs && full.end_ns <= trace::kTraceTimeLimitNs &&
               full.start_ns <= 1000 && full.end_ns >= 2000,
           qPrintable(QStringLiteral("%1 to %2").arg(full.start_ns).arg(full.end_ns)));
  QCOMPARE(w.timeOrigin(), qint64(1000));
  w.setWindow(1000, 2000);
  waitForFrame(w);
  QVERIFY(w.drawnItems() > 0);
}

void TestGuiTimeline::predictedStepStore() {
  auto catalog = PresetCatalog::load(CS_SOURCE_DIR "/resources/presets");
  QVERIFY(catalog.ok());
  auto project = default_project(catalog.value());
  QVERIFY(project.ok());
  Plan plan = project->resolved_plan().value();
  plan.parallel.pp = 4;  // four stages, so four ranks in the store
  plan.parallel.dp = 4;
  QVERIFY(plan::check_plan(plan).empty());
  const QString path = dir_.filePath(QStringLiteral("predicted.cstrace"));
  auto written = cs::plan::write_predicted_timeline(plan, path.toStdString());
  QVERIFY2(written.ok(), written.ok() ? "" : written.message().c_str());
  QCOMPARE(written->stages, 4);
  QVERIFY(written->spans > 0);

  auto reader = trace::TraceReader::open(path.toStdString());
  QVERIFY(reader.ok());
  QCOMPARE(reader.value()->run().source, std::string("planner"));
  QCOMPARE(int(reader.value()->ranks().size()), 4);
  QCOMPARE(int(reader.value()->lanes().size()), 8);
  QCOMPARE(reader.value()->event_count(), written->spans);
  QCOMPARE(reader.value()->time_range().end_ns, written->step_ns);
  // The predicted step is the estimate's step time.
  auto e = plan::estimate(plan);
  QVERIFY(e.ok());
  QVERIFY(std::abs(double(written->step_ns) * 1e-9 - e->time.step()) < 0.02 * e->time.step());

  TimelineWidget w;
  w.resize(900, 300);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(path);
  waitForFrame(w);
  QCOMPARE(w.laneCount(), 8);
  QVERIFY(w.drawnItems() > 0);
  test::saveScreenshot(&w, QStringLiteral("timeline-predicted-pp4"));

  // The service: the newest request wins, older ones are dropped.
  PredictedTimelineService service;
  QSignalSpy ready(&service, &PredictedTimelineService::ready);
  service.request(plan);
  Plan other = plan;
  other.parallel.pp = 2;
  other.parallel.dp = 8;
  const std::uint64_t last = service.request(other);
  QTRY_VERIFY_WITH_TIMEOUT(!ready.isEmpty() && ready.back().at(0).value<std::uint64_t>() == last,
                           20000);
  QTest::qWait(100);
  for (const auto& args : ready) {
    if (args.at(0).value<std::uint64_t>() != last) QFAIL("a stale predicted store was handed on");
  }
  QVERIFY(QFile::exists(ready.back().at(1).toString()));
}

// The lane titles' column fits the longest name, is resized by dragging its
// edge (kept across stores, fitted again by a double-click there), shows a
// cut name whole in a tooltip, and a timeline following another keeps its
// column, so that the two time axes line up.
// With the keyboard's focus, the timeline is framed around the part of it
// on screen (it showed no mark: a user tabbing to it could not tell it took
// the arrow keys); the frame goes with the focus.
void TestGuiTimeline::keyboardFocusMarked() {
  QStringList names;
  for (int i = 0; i < 40; ++i)
    names << QStringLiteral("stream %1").arg(i);
  const QString path = writeNamedLanes(dir_.filePath(QStringLiteral("focus.cstrace")), names);
  QWidget top;
  auto* layout = new QVBoxLayout(&top);
  auto* other = new QLineEdit;
  layout->addWidget(other);
  // In a scroll area, as the run view holds it: taller than its viewport.
  auto* area = new QScrollArea;
  area->setWidgetResizable(true);
  auto* w = new TimelineWidget;
  w->setMinimumToContent(true);
  area->setWidget(w);
  layout->addWidget(area);
  top.resize(900, 300);
  top.show();
  QVERIFY(QTest::qWaitForWindowExposed(&top));
  w->setStore(path);
  waitForFrame(*w);
  QVERIFY(w->height() > area->viewport()->height());
  auto picture = [&] {
    QApplication::processEvents();
    return area->viewport()->grab().toImage();
  };
  other->setFocus(Qt::TabFocusReason);
  QTRY_VERIFY(other->hasFocus());
  const QImage unfocused = picture();
  w->setFocus(Qt::TabFocusReason);
  QTRY_VERIFY(w->hasFocus());
  const QImage focused = picture();
  QCOMPARE(focused.size(), unfocused.size());
  // Pixels changed, each on the edge of what the viewport shows, and on each
  // of its four sides.
  int changed = 0;
  bool left = false, right = false, top_edge = false, bottom = false;
  constexpr int kEdge = 4;
  const int width = focused.width(), height = focused.height();
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (focused.pixel(x, y) == unfocused.pixel(x, y)) continue;
      ++changed;
      const bool near_edge = x < kEdge || y < kEdge || x >= width - kEdge || y >= height - kEdge;
      QVERIFY2(near_edge, qPrintable(QStringLiteral("changed inside, at %1, %2").arg(x).arg(y)));
      left = left || x < kEdge;
      top_edge = top_edge || y < kEdge;
      bottom = bottom || y >= height - kEdge;
      right = right || x >= width - kEdge;
    }
  }
  QVERIFY2(changed > 0, "no focus mark");
  QVERIFY(left && right && top_edge && bottom);
  // Scrolled, the mark is around the part on screen still.
  area->verticalScrollBar()->setValue(area->verticalScrollBar()->maximum() / 2);
  waitForFrame(*w);
  const QImage scrolled = picture();
  other->setFocus(Qt::TabFocusReason);
  QTRY_VERIFY(other->hasFocus());
  const QImage scrolled_unfocused = picture();
  int bottom_changed = 0;
  for (int x = 0; x < width; ++x)
    for (int y = height - kEdge; y < height; ++y)
      bottom_changed += scrolled.pixel(x, y) != scrolled_unfocused.pixel(x, y) ? 1 : 0;
  QVERIFY2(bottom_changed > width / 2, qPrintable(QString::number(bottom_changed)));
}

void TestGuiTimeline::laneTitlesColumn() {
  const QString long_name =
      QStringLiteral("NCCL ring all-reduce stream 31 (0000:3b:00.0, comm 0x7f3a)");
  const QString wide = writeNamedLanes(dir_.filePath(QStringLiteral("wide.cstrace")),
                                       {QStringLiteral("stream 7"), long_name});
  const QString narrow = writeNamedLanes(dir_.filePath(QStringLiteral("narrow.cstrace")),
                                         {QStringLiteral("s 1"), QStringLiteral("s 2")});
  TimelineWidget w;
  w.resize(1000, 200);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.setStore(wide);
  waitForFrame(w);
  const QFontMetricsF fm(w.font());
  // The whole long name fits, and the spans are drawn right of it.
  QVERIFY2(w.gutterWidth() >= fm.horizontalAdvance(long_name) + 14,
           qPrintable(QString::number(w.gutterWidth())));
  QVERIFY(w.gutterWidth() <= 400);  // at most 40 % of the width
  QCOMPARE(int(w.laneRect(0).left()), w.gutterWidth());
  QCOMPARE(w.xOf(w.window().start_ns), double(w.gutterWidth()));
  const int fitted_wide = w.gutterWidth();

  // Another store's names: the column fits them.
  w.setStore(narrow);
  waitForFrame(w);
  QVERIFY2(w.gutterWidth() < fitted_wide, qPrintable(QString::number(w.gutterWidth())));
  const int fitted_narrow = w.gutterWidth();

  // Dragged wider by its edge: the spans are asked for at the new width.
  QSignalSpy changed(&w, &TimelineWidget::gutterChanged);
  const double y = w.laneRect(0).center().y();
  drag(&w, QPointF(fitted_narrow - 2, y), QPointF(fitted_narrow + 196, y));
  QCOMPARE(w.gutterWidth(), fitted_narrow + 198);
  QVERIFY(!changed.isEmpty());
  QCOMPARE(changed.back().at(0).toInt(), w.gutterWidth());
  waitForFrame(w);
  QCOMPARE(w.spanAreaWidth(), int(w.width() - w.gutterWidth() - 4));
  QVERIFY(!w.selectedEvent());  // a drag of the edge selects nothing
  // Never so wide that no time is left.
  drag(&w, QPointF(w.gutterWidth() - 1, y), QPointF(w.width() + 50, y));
  QVERIFY2(w.spanAreaWidth() >= 90, qPrintable(QString::number(w.spanAreaWidth())));
  drag(&w, QPointF(w.gutterWidth() - 1, y), QPointF(299, y));
  QCOMPARE(w.gutterWidth(), 300);

  // The user's column is kept for the next store ...
  w.setStore(wide);
  waitForFrame(w);
  QCOMPARE(w.gutterWidth(), 300);
  // ... where a name it cuts is shown whole by the tooltip on it.
  const QPoint on_title(40, int(w.laneRect(1).center().y()));
  const QString title_tip = cs::gui::test::toolTipAt(&w, on_title);
  QVERIFY2(title_tip.contains(long_name.toHtmlEscaped()), qPrintable(title_tip));
  // A double-click on the edge fits it to the names again.
  QTest::mouseDClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(297, int(y)));
  QCOMPARE(w.gutterWidth(), fitted_wide);

  // A follower keeps the leader's column; a drag of its edge moves both.
  TimelineWidget follower;
  follower.resize(1000, 200);
  follower.show();
  QVERIFY(QTest::qWaitForWindowExposed(&follower));
  follower.followGutter(&w);
  follower.setStore(narrow);
  waitForFrame(follower);
  QCOMPARE(follower.gutterWidth(), fitted_wide);
  const double fy = follower.laneRect(0).center().y();
  drag(&follower, QPointF(fitted_wide - 3, fy), QPointF(fitted_wide - 43, fy));
  QCOMPARE(w.gutterWidth(), fitted_wide - 40);
  QCOMPARE(follower.gutterWidth(), fitted_wide - 40);
  w.setWindow(w.fullRange().start_ns, w.fullRange().end_ns);
  follower.followWindow(w.fullRange(), w.window());
  QCOMPARE(follower.xOf(1500), w.xOf(1500));
}

void TestGuiTimeline::badStores_data() {
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<QString>("says");
  QTest::addRow("missing") << QByteArray() << QString();
  QTest::addRow("not sqlite") << QByteArray("this is no database at all, just text") << QString();
  QTest::addRow("empty") << QByteArray("") << QString();
}

void TestGuiTimeline::badStores() {
  QFETCH(QByteArray, bytes);
  const QString path = dir_.filePath(
      QStringLiteral("bad-%1.cstrace").arg(QTest::currentDataTag()).replace(' ', '-'));
  if (QByteArray(QTest::currentDataTag()) != "missing") {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
  }
  TimelineWidget w;
  w.resize(600, 150);
  w.show();
  QSignalSpy opened(&w, &TimelineWidget::storeOpened);
  w.setStore(path);
  QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
  const QString error = opened.front().at(1).toString();
  QVERIFY2(!error.isEmpty(), "a bad store must be refused with a message");
  QVERIFY2(error.contains(path), qPrintable(error));
  QCOMPARE(w.message(), error);
  QCOMPARE(w.laneCount(), 0);
  w.repaint();  // paints the message, does not crash
}

QTEST_MAIN(TestGuiTimeline)
#include "tst_gui_timeline.moc"
