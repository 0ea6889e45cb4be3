// How the CPU engine times an op's CPU time: an op that starts just after
// another on its thread takes that op's end reading (one system call an op,
// not two); any other op reads the clock itself; and an op whose thread
// slept is timed off CPU for it.

#include <QtTest>
#include <chrono>
#include <cstdint>
#include <thread>

#include "core/trace_types.h"
#include "profiler/worker/op_tracer.h"
#include "tests/profiler/memory_trace_writer.h"

using namespace cs::worker;

namespace {

// A CPU-time reading no real thread has at the time these tests run.
constexpr std::int64_t kMarkedCpuNs = 1;

}  // namespace

class TestOpTracer : public QObject {
  Q_OBJECT
 private slots:
  void opStartsFromTheLastEnd_data();
  void opStartsFromTheLastEnd();
  void firstOpOfAThreadReadsItsClock();
  void sleepInAnOpIsTimedOffCpu();
  void timingCostIsRecorded();
};

void TestOpTracer::opStartsFromTheLastEnd_data() {
  QTest::addColumn<qint64>("gap_ns");
  QTest::addColumn<bool>("chained");
  QTest::newRow("at the last end") << qint64{0} << true;
  QTest::newRow("just after") << qint64{1'000} << true;
  QTest::newRow("at the limit") << qint64{kChainNs} << true;
  QTest::newRow("past the limit") << qint64{kChainNs + 1} << false;
  QTest::newRow("before the last end") << qint64{-1} << false;
}

void TestOpTracer::opStartsFromTheLastEnd() {
  QFETCH(qint64, gap_ns);
  QFETCH(bool, chained);
  const std::int64_t wall = OpTracer::now_ns();
  OpTracer::op_ended(wall, kMarkedCpuNs);
  const std::int64_t before = OpTracer::thread_cpu_ns();
  const std::int64_t start = OpTracer::op_start_cpu_ns(wall + gap_ns);
  const std::int64_t after = OpTracer::thread_cpu_ns();
  if (chained) {
    // As if the thread ran throughout the gap.
    QCOMPARE(start, kMarkedCpuNs + gap_ns);
  } else {
    QVERIFY2(
        start >= before && start <= after,
        qPrintable(QString("%1 not read between %2 and %3").arg(start).arg(before).arg(after)));
  }
}

void TestOpTracer::firstOpOfAThreadReadsItsClock() {
  // This thread's last op ended just now; another thread's first op does
  // not take that reading, which is not its own.
  OpTracer::op_ended(OpTracer::now_ns(), kMarkedCpuNs);
  std::int64_t before = 0, start = 0, after = 0;
  std::thread([&] {
    before = OpTracer::thread_cpu_ns();
    start = OpTracer::op_start_cpu_ns(OpTracer::now_ns());
    after = OpTracer::thread_cpu_ns();
  }).join();
  QVERIFY2(start >= before && start <= after && start != kMarkedCpuNs,
           qPrintable(QString("%1 not read between %2 and %3").arg(start).arg(before).arg(after)));
}

void TestOpTracer::sleepInAnOpIsTimedOffCpu() {
  cs::test::MemoryTraceWriter writer;
  OpTracer tracer(writer, 0);
  tracer.set_times_off_cpu(true);
  constexpr auto kSleep = std::chrono::milliseconds(30);
  {
    ScopedOp busy(&tracer, "busy");
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  {
    // Chained to the busy op's end: its off-CPU time is still its own.
    ScopedOp sleeping(&tracer, "sleeping");
    std::this_thread::sleep_for(kSleep);
  }
  QCOMPARE(writer.events.size(), std::size_t{2});
  const cs::trace::Event& sleeping = writer.events[1];
  QCOMPARE(writer.text(sleeping.name), std::string("sleeping"));
  const cs::trace::CounterSample* off_cpu = nullptr;
  for (const cs::trace::CounterSample& c : writer.counters)
    if (writer.text(c.name) == cs::trace::kOffCpuCounter && c.time_ns == sleeping.end_ns)
      off_cpu = &c;
  QVERIFY2(off_cpu, "the sleeping op has no off-CPU sample");
  // All of the sleep, and no more than the op's span (and the gap it was
  // chained across, had the thread been off CPU in it).
  const double sleep_ns = std::chrono::duration<double, std::nano>(kSleep).count();
  QVERIFY2(off_cpu->value >= 0.95 * sleep_ns &&
               off_cpu->value <= static_cast<double>(sleeping.duration_ns() + kChainNs),
           qPrintable(QString("off CPU %1 ns of a %2 ns op that slept %3 ns")
                          .arg(off_cpu->value)
                          .arg(sleeping.duration_ns())
                          .arg(sleep_ns)));
}

void TestOpTracer::timingCostIsRecorded() {
  cs::test::MemoryTraceWriter writer;
  OpTracer tracer(writer, 3);
  tracer.set_times_off_cpu(true);
  tracer.record_timing_cost();
  QCOMPARE(writer.counters.size(), std::size_t{1});
  const cs::trace::CounterSample& cost = writer.counters.front();
  QCOMPARE(writer.text(cost.name), std::string(cs::trace::kOpTimingCostCounter));
  QCOMPARE(cost.rank, 3);
  // A CPU-time read is a system call: more than nothing, far less than a
  // millisecond.
  QVERIFY2(cost.value > 0 && cost.value < 1e6, qPrintable(QString::number(cost.value)));
}

QTEST_GUILESS_MAIN(TestOpTracer)
#include "tst_op_tracer.moc"
