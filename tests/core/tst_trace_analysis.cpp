// The analyses on stores whose answers were worked out by hand (the interval
// tables in the comments): breakdown, overlap, idle causes, per step, the
// CPU engine's lanes, kernel and collective summaries with nccl-tests
// bandwidths, stragglers, and predicted against measured.

#include <QTemporaryDir>
#include <QtTest>
#include <map>
#include <random>
#include <set>

#include "core/format.h"
#include "core/launched_kernels.h"
#include "core/prediction_text.h"
#include "core/presets.h"
#include "core/trace_analysis.h"
#include "core/trace_compare.h"
#include "core/trace_critical_path.h"
#include "core/trace_import.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "core/window_index.h"

using namespace cs::trace;

namespace {

struct Builder {
  std::unique_ptr<TraceWriter> writer;
  std::string path;

  Builder(const QTemporaryDir& dir, const char* name) {
    path = dir.filePath(name).toStdString();
    auto created = TraceWriter::create(path, RunInfo{"analysis test", "test"});
    if (!created) qFatal("%s", created.message().c_str());
    writer = std::move(created).value();
  }
  Event& add(LaneId lane, EventKind kind, Category cat, std::int64_t s, std::int64_t e,
             const char* name, std::int64_t correlation = 0) {
    last = Event{};
    last.lane = lane;
    last.kind = kind;
    last.category = cat;
    last.start_ns = s;
    last.end_ns = e;
    last.name = writer->intern(name);
    last.correlation = correlation;
    return last;
  }
  void commit() { writer->add(last); }
  std::unique_ptr<TraceReader> close() {
    if (auto s = writer->close(); !s) qFatal("%s", s.message().c_str());
    auto r = TraceReader::open(path);
    if (!r) qFatal("%s", r.message().c_str());
    return std::move(r).value();
  }
  Event last;
};

// Rank 0 of the worked example:
//   [1000,1500) compute        [1500,2000) compute+comm    [2000,3000) comm
//   [3000,3500) idle: K2 launched at 3200 > 3000            -> host wait 500
//   [3500,4000) compute        [4000,4010) idle, 10 ns < 30 -> kernel wait 10
//   [4010,4500) compute        [4500,5000) idle: M1 launched at 4400 -> other 500
//   [5000,5500) memory         [5500,5600) memory+compute  [5600,6000) compute
//   [6000,6100) synchronization                            [6100,6200) other
void write_worked_example(Builder& b, std::int32_t rank = 0) {
  TraceWriter& w = *b.writer;
  w.add_rank({rank, "node", "GPU", 1, 0, false});
  const LaneId compute = w.add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
  const LaneId comm = w.add_lane(rank, LaneKind::gpu_stream, "stream 13", 1);
  const LaneId cpu = w.add_lane(rank, LaneKind::cpu_thread, "main", 2);
  auto launch = [&](std::int64_t at, std::int64_t corr) {
    b.add(cpu, EventKind::api_call, Category::other, at, at + 50, "cudaLaunchKernel", corr);
    b.commit();
  };
  b.add(compute, EventKind::kernel, Category::compute, 1000, 2000, "gemm", 1);
  b.commit();
  launch(500, 1);
  Event& c1 = b.add(comm, EventKind::collective, Category::communication, 1500, 3000,
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2);
  c1.collective = Collective::all_reduce;
  c1.dtype = DataType::fp32;
  c1.count = 750'000;
  c1.bytes = 3'000'000;
  c1.group_size = 8;
  b.commit();
  launch(600, 2);
  b.add(compute, EventKind::kernel, Category::compute, 3500, 4000, "gemm", 3);
  b.commit();
  launch(3200, 3);
  b.add(compute, EventKind::kernel, Category::compute, 4010, 4500, "gemm", 4);
  b.commit();
  launch(100, 4);
  b.add(compute, EventKind::memcpy, Category::memory, 5000, 5600, "Memcpy HtoD", 5);
  b.commit();
  launch(4400, 5);
  b.add(comm, EventKind::kernel, Category::compute, 5500, 6000, "gemm", 6);
  b.commit();
  b.add(compute, EventKind::kernel, Category::synchronization, 6000, 6100, "wait_kernel");
  b.commit();
  b.add(compute, EventKind::kernel, Category::other, 6100, 6200, "other_kernel");
  b.commit();
  // Annotations and API calls are not device work.
  b.add(cpu, EventKind::annotation, Category::other, 0, 7000, "forward");
  b.commit();
  w.add(StepMetrics{rank, 0, 0, 3200, 2.0, 100, 0});
  w.add(StepMetrics{rank, 1, 3200, 7000, 1.9, 100, 0});
}

}  // namespace

class TestTraceAnalysis : public QObject {
  Q_OBJECT

 private slots:
  void workedExample();
  void meanAgainstMedian_data();
  void meanAgainstMedian();
  void perStep();
  void summaries();
  void cpuEngineLanes();
  void timeWindow();
  void busBandwidthFactor_data();
  void busBandwidthFactor();
  void stragglers();
  void stragglerOfTwoRanks_data();
  void stragglerOfTwoRanks();
  void transferLeavesTheWaitOut();
  void stepsWindowHoldsOnlyItsSteps();
  void transferWithinEachCommunicator();
  void predictedVersusMeasured();
  void predictionLeavesTheWarmUpOut();
  void predictionOfARunWithNoStep();
  void memoryAgainstTheCounters();
  void memoryOfEachEndStage();
  void operationKinds_data();
  void operationKinds();
  void stepParts();
  void descheduledTimeIsItsOwnPart();
  void collectiveWaitIsSplit();
  void collectivesPairedByTheirStep();
  void warmUpSteps_data();
  void warmUpSteps();
  void expectedStepLeavesTheWarmUpOut_data();
  void expectedStepLeavesTheWarmUpOut();
  void slowFirstStepsLeftOut();
  void pipelineParts_data();
  void pipelineParts();
  void verdictWeighsTheLargestGap_data();
  void verdictWeighsTheLargestGap();
  void predictionErrorsNameTheField_data();
  void predictionErrorsNameTheField();
  void machineProbe_data();
  void machineProbe();
  void modelErrorFactor_data();
  void modelErrorFactor();
  void bytesForPeople_data();
  void bytesForPeople();
  void timesAndCountsForPeople_data();
  void timesAndCountsForPeople();
  void compareByOperationKind();
  void compareLeavesOutWhatIsOutsideTheSteps();
  void compareCountsEachRanksOwnSteps();
  void gemmRatesOfRealStores_data();
  void gemmRatesOfRealStores();
  void gemmRatesOfAPyTorchTrace();
  void gemmRatesWithoutFlopsOrPresets();
  void gemmRateOfEachOperation_data();
  void tf32KernelNames_data();
  void tf32KernelNames();
  void gemmRateOfEachOperation();
  void criticalPathGoesThroughTheLateRank();
  void criticalPathGoesThroughTheSend();
  void criticalPathOfATraceWithoutSteps();
  void criticalPathOfARealRunCoversEachStep();
  void windowIndexFindsWhatEveryWindowWould_data();
  void windowIndexFindsWhatEveryWindowWould();
};

void TestTraceAnalysis::workedExample() {
  QTemporaryDir dir;
  Builder b(dir, "worked.cstrace");
  write_worked_example(b);
  auto r = b.close();
  auto a = analyze_rank(*r, 0);
  QVERIFY2(a, a ? "" : a.message().c_str());
  const Breakdown& t = a->total;
  QVERIFY(a->gpu);
  QCOMPARE(t.window_start_ns, 1000);
  QCOMPARE(t.window_end_ns, 6200);
  QCOMPARE(t.span_ns, 5200);
  QCOMPARE(t.busy_ns, 4190);
  QCOMPARE(t.compute_ns, 2490);
  QCOMPARE(t.communication_ns, 1500);
  QCOMPARE(t.overlap_ns, 500);
  QCOMPARE(t.exposed_communication_ns, 1000);
  QCOMPARE(t.memory_ns, 600);
  QCOMPARE(t.exposed_memory_ns, 500);
  QCOMPARE(t.exposed_synchronization_ns, 100);
  QCOMPARE(t.other_busy_ns, 100);
  QCOMPARE(t.idle_ns, 1010);
  QCOMPARE(t.idle_host_wait_ns, 500);
  QCOMPARE(t.idle_kernel_wait_ns, 10);
  QCOMPARE(t.idle_other_ns, 500);
  QCOMPARE(t.events, 8);
  QCOMPARE(t.overlap_percent(), 100.0 / 3);
  QCOMPARE(t.non_compute_ns(), 5200 - 2490 - 1010);

  // Each stream's own gaps (HTA's idle time breakdown per stream). Stream 7:
  // 1500 ns before the gemm launched at 3200 (host wait), 10 ns before the
  // next (kernel wait), 500 ns before the copy launched at 4400 and 400 ns
  // before the unlaunched wait_kernel (other). Stream 13 waits 2500 ns
  // between its all-reduce and its gemm, which no call launched: other.
  QCOMPARE(a->streams.size(), std::size_t{2});
  const StreamIdle& s7 = a->streams[0];
  QCOMPARE(QString::fromStdString(s7.name), QString("stream 7"));
  QCOMPARE(s7.events, 6);
  QCOMPARE(s7.span_ns, 5200);
  QCOMPARE(s7.busy_ns, 2790);
  QCOMPARE(s7.idle_host_wait_ns, 1500);
  QCOMPARE(s7.idle_kernel_wait_ns, 10);
  QCOMPARE(s7.idle_other_ns, 900);
  QCOMPARE(s7.busy_ns + s7.idle_ns(), s7.span_ns);
  // Its queue (HTA's queue length): 2 at most, after the call at 3200 (the
  // copy launched at 100 waits from 100 to 4010); over the span [1000, 6200)
  // 1 for 2200 ns, 2 for 300, 1 for 510 and 1 for 600: 3910 / 5200.
  QCOMPARE(s7.launched, 4);
  QCOMPARE(s7.queue_max, 2);
  QCOMPARE(s7.queue_mean, 3910.0 / 5200);
  const StreamIdle& s13 = a->streams[1];
  QCOMPARE(QString::fromStdString(s13.name), QString("stream 13"));
  QCOMPARE(s13.events, 2);
  QCOMPARE(s13.span_ns, 4500);
  QCOMPARE(s13.busy_ns, 2000);
  QCOMPARE(s13.idle_host_wait_ns + s13.idle_kernel_wait_ns, 0);
  QCOMPARE(s13.idle_other_ns, 2500);
  QCOMPARE(s13.launched, 1);  // the gemm at 5500 was launched by no call
  QCOMPARE(s13.queue_max, 1);
  QCOMPARE(s13.queue_mean, 0.0);  // queued before its span began only
}

void TestTraceAnalysis::perStep() {
  QTemporaryDir dir;
  Builder b(dir, "steps.cstrace");
  write_worked_example(b);
  auto r = b.close();
  auto a = analyze_rank(*r, 0);
  QVERIFY(a);
  QCOMPARE(a->steps.size(), std::size_t{2});
  // Step 0, [0, 3200): busy [1000, 3000); the gap's first 200 ns is host
  // wait, the 1000 ns before the first kernel idle for no device reason.
  const Breakdown& s0 = a->steps[0].breakdown;
  QCOMPARE(a->steps[0].step, 0);
  QCOMPARE(s0.span_ns, 3200);
  QCOMPARE(s0.busy_ns, 2000);
  QCOMPARE(s0.compute_ns, 1000);
  QCOMPARE(s0.communication_ns, 1500);
  QCOMPARE(s0.overlap_ns, 500);
  QCOMPARE(s0.idle_ns, 1200);
  QCOMPARE(s0.idle_host_wait_ns, 200);
  QCOMPARE(s0.idle_kernel_wait_ns, 0);
  QCOMPARE(s0.idle_other_ns, 1000);
  QCOMPARE(s0.events, 2);
  // Step 1, [3200, 7000).
  const Breakdown& s1 = a->steps[1].breakdown;
  QCOMPARE(s1.span_ns, 3800);
  QCOMPARE(s1.busy_ns, 2190);
  QCOMPARE(s1.compute_ns, 1490);
  QCOMPARE(s1.idle_host_wait_ns, 300);
  QCOMPARE(s1.idle_kernel_wait_ns, 10);
  QCOMPARE(s1.idle_other_ns, 1300);
  QCOMPARE(s1.events, 6);
  QCOMPARE(s0.busy_ns + s1.busy_ns, a->total.busy_ns);

  AnalysisOptions no_steps;
  no_steps.per_step = false;
  QVERIFY(analyze_rank(*r, 0, no_steps)->steps.empty());
}

void TestTraceAnalysis::summaries() {
  QTemporaryDir dir;
  Builder b(dir, "summaries.cstrace");
  write_worked_example(b);
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QCOMPARE(run->ranks.size(), std::size_t{1});
  const auto& k = run->kernels;
  QCOMPARE(k.size(), std::size_t{5});
  QCOMPARE(k[0].name, std::string("gemm"));  // largest total first
  QCOMPARE(k[0].count, 4);
  QCOMPARE(k[0].total_ns, 2490);
  QCOMPARE(k[0].min_ns, 490);
  QCOMPARE(k[0].max_ns, 1000);
  QCOMPARE(k[0].mean_ns, 622.5);
  QCOMPARE(k[0].median_ns, 500.0);
  QCOMPARE(k[0].share, 2490.0 / 4790.0);
  QCOMPARE(k[0].category, Category::compute);
  QCOMPARE(k[1].name, std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  QCOMPARE(k[1].kind, EventKind::collective);
  QCOMPARE(k[2].name, std::string("Memcpy HtoD"));

  QCOMPARE(run->collectives.size(), std::size_t{1});
  const CollectiveStats& c = run->collectives[0];
  QCOMPARE(c.collective, Collective::all_reduce);
  QCOMPARE(c.name, std::string("all_reduce"));
  QCOMPARE(c.dtype, DataType::fp32);
  QCOMPARE(c.bytes, 3'000'000);
  QCOMPARE(c.ranks, 8);
  QCOMPARE(c.count, 1);
  QCOMPARE(c.mean_ns, 1500.0);
  QCOMPARE(c.algbw_gbps, 2000.0);         // 3e6 B / 1.5e-6 s = 2e12 B/s
  QCOMPARE(c.busbw_gbps, 2000.0 * 1.75);  // 2(n-1)/n with n = 8
  QCOMPARE(run->ranks[0].kernels.size(), std::size_t{5});
  QVERIFY(run->stragglers.stragglers.empty());
  QVERIFY(!run->prediction);
}

// The CPU engine has no GPU stream: its compute thread and communication lane
// are the device. Host-side operations there are not device work.
void TestTraceAnalysis::cpuEngineLanes() {
  QTemporaryDir dir;
  Builder b(dir, "cpu.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const LaneId comm = w.add_lane(0, LaneKind::communication, "communication", 1);
  b.add(compute, EventKind::kernel, Category::compute, 0, 4000, "gemm");
  b.commit();
  b.add(compute, EventKind::cpu_op, Category::other, 0, 10000, "worker step");
  b.commit();
  b.add(comm, EventKind::collective, Category::communication, 3000, 7000, "MPI_Allreduce");
  b.commit();
  // The compute thread waits for the all-reduce's result, and wakes 600 ns
  // after it: synchronization, not idle time.
  b.add(compute, EventKind::sync, Category::synchronization, 6000, 7600, "wait dp");
  b.commit();
  b.add(compute, EventKind::kernel, Category::compute, 8000, 9000, "gemm");
  b.commit();
  auto r = b.close();
  auto a = analyze_rank(*r, 0);
  QVERIFY(a);
  QVERIFY(!a->gpu);
  QCOMPARE(a->total.span_ns, 9000);
  QCOMPARE(a->total.compute_ns, 5000);
  QCOMPARE(a->total.communication_ns, 4000);
  QCOMPARE(a->total.overlap_ns, 1000);
  QCOMPARE(a->total.exposed_communication_ns, 3000);
  QCOMPARE(a->total.exposed_synchronization_ns, 600);
  QCOMPARE(a->total.idle_ns, 400);
  QCOMPARE(a->total.idle_other_ns, 400);  // no launches on the CPU engine
  QCOMPARE(a->total.events, 4);
  QCOMPARE(a->total.overlap_percent(), 25.0);
  // The wait is no operation of the kernel table, nor work of its lane.
  QCOMPARE(a->kernels.size(), std::size_t{2});
  QCOMPARE(a->streams.size(), std::size_t{2});
  QCOMPARE(a->streams[0].events, 2);
  QCOMPARE(a->streams[0].busy_ns, 5000);
  QCOMPARE(a->streams[0].idle_other_ns, 4000);
  QCOMPARE(a->streams[0].launched, 0);  // no launching calls: no queue
}

void TestTraceAnalysis::timeWindow() {
  QTemporaryDir dir;
  Builder b(dir, "window.cstrace");
  write_worked_example(b);
  auto r = b.close();
  AnalysisOptions options;
  options.window = TimeRange{1800, 3600};
  options.per_step = false;
  auto a = analyze_rank(*r, 0, options);
  QVERIFY(a);
  // [1800,2000) compute+comm, [2000,3000) comm, [3000,3500) host wait, [3500,3600) compute
  QCOMPARE(a->total.span_ns, 1800);
  QCOMPARE(a->total.compute_ns, 300);
  QCOMPARE(a->total.communication_ns, 1200);
  QCOMPARE(a->total.overlap_ns, 200);
  QCOMPARE(a->total.idle_host_wait_ns, 500);
  QCOMPARE(a->total.events, 1);  // only K2 starts inside
  // The kernel table holds what ran in the range (it held the whole run's):
  // two GEMMs and the all-reduce reach into it, the copy does not.
  std::map<std::string, std::int64_t> counts;
  for (const KernelStats& k : a->kernels) counts[k.name] = k.count;
  QCOMPARE(counts.size(), std::size_t{2});
  QCOMPARE(counts["gemm"], 2);
  QCOMPARE(counts["ncclDevKernel_AllReduce_Sum_f32_RING_LL"], 1);
  // ... and the steps, those the range reaches.
  options.per_step = true;
  options.window = TimeRange{4000, 4600};
  auto late = analyze_rank(*r, 0, options);
  QVERIFY(late);
  QCOMPARE(late->steps.size(), std::size_t{1});
  QCOMPARE(late->steps[0].step, 1);

  // A window the rank did nothing in, before its work or after it: an empty
  // breakdown inside that window.
  for (const TimeRange outside : {TimeRange{-50'000, -40'000}, TimeRange{1'000'000, 2'000'000}}) {
    options.window = outside;
    auto none = analyze_rank(*r, 0, options);
    QVERIFY(none);
    QVERIFY(none->total.window_start_ns >= outside.start_ns);
    QVERIFY(none->total.window_end_ns <= outside.end_ns);
    QVERIFY(none->total.window_start_ns <= none->total.window_end_ns);
    QCOMPARE(none->total.span_ns, 0);
    QCOMPARE(none->total.busy_ns, 0);
  }
}

void TestTraceAnalysis::busBandwidthFactor_data() {
  QTest::addColumn<int>("collective");
  QTest::addColumn<int>("ranks");
  QTest::addColumn<double>("factor");
  // nccl-tests doc/PERFORMANCE.md
  QTest::addRow("all-reduce 8") << int(Collective::all_reduce) << 8 << 1.75;
  QTest::addRow("all-reduce 2") << int(Collective::all_reduce) << 2 << 1.0;
  QTest::addRow("all-reduce 1") << int(Collective::all_reduce) << 1 << 0.0;
  QTest::addRow("all-gather 8") << int(Collective::all_gather) << 8 << 0.875;
  QTest::addRow("reduce-scatter 4") << int(Collective::reduce_scatter) << 4 << 0.75;
  QTest::addRow("all-to-all 16") << int(Collective::all_to_all) << 16 << 0.9375;
  QTest::addRow("broadcast 8") << int(Collective::broadcast) << 8 << 1.0;
  QTest::addRow("reduce 8") << int(Collective::reduce) << 8 << 1.0;
  QTest::addRow("broadcast 1") << int(Collective::broadcast) << 1 << 1.0;  // busbw convention
  QTest::addRow("send 2") << int(Collective::send) << 2 << 1.0;
}

void TestTraceAnalysis::busBandwidthFactor() {
  QFETCH(int, collective);
  QFETCH(int, ranks);
  QFETCH(double, factor);
  QCOMPARE(bus_bandwidth_factor(static_cast<Collective>(collective), ranks), factor);
}

// Four ranks, ten steps; rank 2's steps take 20% longer and it reaches every
// all-reduce 1.5 ms after the others (whose arrival jitters by ±50 µs).
void TestTraceAnalysis::stragglers() {
  QTemporaryDir dir;
  Builder b(dir, "stragglers.cstrace");
  TraceWriter& w = *b.writer;
  constexpr std::int64_t kStep = 20'000'000;
  for (int rank = 0; rank < 4; ++rank) {
    w.add_rank({rank, "node" + std::to_string(rank), "GPU", 1, 0, false});
    const LaneId s = w.add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
    for (int step = 0; step < 10; ++step) {
      const std::int64_t t = step * kStep;
      const std::int64_t jitter = ((rank * 7 + step * 3) % 5 - 2) * 25'000;
      const std::int64_t late = rank == 2 ? 1'500'000 : jitter;
      b.add(s, EventKind::kernel, Category::compute, t, t + 10'000'000 + late, "gemm");
      b.commit();
      b.add(s, EventKind::collective, Category::communication, t + 10'000'000 + late,
            t + 14'000'000, "ncclDevKernel_AllReduce");
      b.last.collective = Collective::all_reduce;
      b.commit();
      const std::int64_t length = rank == 2 ? kStep * 6 / 5 : kStep + jitter;
      w.add(StepMetrics{rank, step, t, t + length, 1.0, 1, 0});
    }
  }
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QCOMPARE(run->stragglers.stragglers, std::vector<std::int32_t>{2});
  const RankStraggler& s = run->stragglers.ranks[2];
  QVERIFY(s.straggler);
  QCOMPARE(s.collectives, 10);
  QVERIFY2(std::abs(s.step_excess - 0.2) < 0.01, qPrintable(QString::number(s.step_excess)));
  QVERIFY2(s.late_start_ns > 1'400'000, qPrintable(QString::number(s.late_start_ns)));
  QVERIFY(QString::fromStdString(s.reason).contains("above the median rank"));
  QVERIFY(QString::fromStdString(s.reason).contains("collectives start"));
  for (int rank : {0, 1, 3})
    QVERIFY(!run->stragglers.ranks[rank].straggler);
  auto again = find_stragglers(*r, run->ranks);
  QVERIFY(again);
  QCOMPARE(again->stragglers, std::vector<std::int32_t>{2});
}

// Two ranks whose steps are 50 us apart, on a clock of nanoseconds since
// 1970 (past what a double holds to the nanosecond): rank 1's step 0 ends,
// and rank 0's step 2 starts, inside the window of step 1 (--steps 1).
// Each step makes a 4-byte all-reduce at its start and a 32 KiB one at its
// end; rank 0's step-0 32 KiB call ends just inside the window.
// The window held rank 0's steps 1-2 (a 30 ms step 2 made it a straggler,
// "100% above") and paired rank 0's step-0 call with rank 1's step-1 call.
void TestTraceAnalysis::stepsWindowHoldsOnlyItsSteps() {
  QTemporaryDir dir;
  Builder b(dir, "skewed.db");
  TraceWriter& w = *b.writer;
  constexpr std::int64_t kOrigin = 1'800'000'000'000'000'000;
  constexpr std::int64_t kMs = 1'000'000;
  for (int rank = 0; rank < 2; ++rank) {
    w.add_rank({rank, "node", "GPU", 1, 0, false});
    const LaneId s = w.add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
    const std::int64_t skew = rank == 1 ? 50'000 : 0;
    for (int step = 0; step < 4; ++step) {
      const std::int64_t start = kOrigin + step * 10 * kMs + (step > 0 ? skew : 0);
      const std::int64_t length =
          rank == 0 && step == 2 ? 30 * kMs : 10 * kMs + (step == 0 ? skew : 0);
      const std::int64_t t = kOrigin + step * 10 * kMs + skew;  // the calls' own times
      b.add(s, EventKind::collective, Category::communication, t, t + kMs / 2, "loss all-reduce");
      b.last.collective = Collective::all_reduce;
      b.last.bytes = 4;
      b.last.group_size = 2;
      b.commit();
      b.add(s, EventKind::kernel, Category::compute, t + kMs, t + 8 * kMs, "gemm");
      b.commit();
      const std::int64_t grad_end = t + 10 * kMs + (rank == 0 && step == 0 ? 10'000 : -10'000);
      b.add(s, EventKind::collective, Category::communication, t + 9 * kMs, grad_end,
            "grad all-reduce");
      b.last.collective = Collective::all_reduce;
      b.last.bytes = 32 * 1024;
      b.last.group_size = 2;
      b.commit();
      w.add(StepMetrics{rank, step, start, start + length, 1.0, 1, 0});
    }
  }
  auto r = b.close();
  AnalysisOptions options;
  options.window = TimeRange{kOrigin + 10 * kMs, kOrigin + 20 * kMs + 50'000};
  options.steps = AnalysisOptions::StepRange{1, 1};
  auto run = analyze_run(*r, options);
  QVERIFY2(run, run ? "" : run.message().c_str());
  for (const RankAnalysis& rank : run->ranks) {
    QCOMPARE(rank.steps.size(), std::size_t{1});
    QCOMPARE(rank.steps[0].step, 1);
  }
  QVERIFY(run->stragglers.stragglers.empty());
  QCOMPARE(run->stragglers.ranks[0].step_ns, 10.0 * kMs);
  QCOMPARE(run->stragglers.ranks[1].step_ns, 10.0 * kMs);
  // Step 1's two calls on each rank: rank 1's start 50 us after rank 0's,
  // to the nanosecond.
  QCOMPARE(run->stragglers.ranks[1].collectives, std::int64_t{2});
  QCOMPARE(run->stragglers.ranks[1].late_start_ns, 50'000.0);
  QCOMPARE(run->stragglers.ranks[0].late_start_ns, 0.0);

  // A range without step numbers (--from/--to): the rows of the steps it
  // reaches, the medians of those wholly inside it.
  options.steps.reset();
  options.window = TimeRange{kOrigin + 10 * kMs, kOrigin + 25 * kMs};
  run = analyze_run(*r, options);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QCOMPARE(run->ranks[0].steps.size(), std::size_t{2});  // steps 1 and 2 (to 50 ms)
  QCOMPARE(run->stragglers.ranks[0].step_ns, 10.0 * kMs);
  QVERIFY(run->stragglers.stragglers.empty());
}

// A dp 2 x pp 2 run (meta "parallel"): ranks 0-1 and 2-3 are two
// data-parallel groups. Each "dp all-reduce" call is timed by the rank of its
// own group that joined last: 2 us in one group, 6 us in the other, so the
// median transfer is 4 us. Pooled over the four ranks it read 2 us.
void TestTraceAnalysis::transferWithinEachCommunicator() {
  QTemporaryDir dir;
  Builder b(dir, "dp2pp2.db");
  TraceWriter& w = *b.writer;
  w.set_meta("parallel", R"({"dp": 2, "tp": 1, "pp": 2})");
  w.set_meta("world_size", "4");
  const std::int64_t waits[4] = {5'000, 2'000, 9'000, 6'000};  // per rank, in ns
  for (int rank = 0; rank < 4; ++rank) {
    w.add_rank({rank, "node", "CPU", rank + 1, 0, false});
    const LaneId s = w.add_lane(rank, LaneKind::communication, "dp", 0);
    for (int call = 0; call < 3; ++call) {
      const std::int64_t t = 1'000'000 * (call + 1);
      b.add(s, EventKind::collective, Category::communication, t, t + waits[rank], "dp all-reduce");
      b.last.collective = Collective::all_reduce;
      b.last.dtype = DataType::fp32;
      b.last.bytes = 4;
      b.last.group_size = 2;
      b.commit();
    }
  }
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QCOMPARE(run->collectives.size(), std::size_t{1});
  QCOMPARE(run->collectives[0].count, std::int64_t{12});
  QCOMPARE(run->collectives[0].transfer_median_ns, 4'000.0);
  auto parts = measure_rank_parts(*r);
  QVERIFY2(parts, parts ? "" : parts.message().c_str());
  // Each rank's wait is its calls less its own group's transfers (the run
  // has no steps: one step of its three calls).
  const double expected_wait[4] = {9e-6, 0, 9e-6, 0};
  for (int rank = 0; rank < 4; ++rank) {
    const double got = (*parts)[static_cast<std::size_t>(rank)].part("wait");
    QVERIFY2(std::abs(got - expected_wait[rank]) < 1e-9,
             qPrintable(QString("rank %1 wait %2").arg(rank).arg(got)));
  }
}

// Of two ranks the median is their mean and 3 median absolute deviations
// their whole difference, so the robust test could never flag either: the
// slower is held against the faster by the thresholds alone (5 % of step,
// collectives 2 % of a step late).
void TestTraceAnalysis::stragglerOfTwoRanks_data() {
  QTest::addColumn<std::int64_t>("rank0_step_ns");
  QTest::addColumn<std::int64_t>("slow_step_ns");  // rank 1's
  QTest::addColumn<std::int64_t>("late_ns");       // rank 1's all-reduce starts this late
  QTest::addColumn<bool>("send_recv");             // the transfers are sends and receives
  QTest::addColumn<bool>("straggler");
  QTest::addColumn<QString>("reason");
  QTest::addRow("three times slower")
      << std::int64_t{10'000'000} << std::int64_t{30'000'000} << std::int64_t{0} << false << true
      << "200% above the other rank's";
  QTest::addRow("collectives late")
      << std::int64_t{10'000'000} << std::int64_t{10'000'000} << std::int64_t{1'000'000} << false
      << true << "collectives start 1.00 ms after the other rank's";
  // Rank 0's steps are longer by its wait for rank 1: rank 1 is the straggler.
  QTest::addRow("the other waits")
      << std::int64_t{11'000'000} << std::int64_t{10'000'000} << std::int64_t{1'000'000} << false
      << true << "collectives start 1.00 ms after the other rank's";
  QTest::addRow("within the thresholds") << std::int64_t{10'000'000} << std::int64_t{10'300'000}
                                         << std::int64_t{100'000} << false << false << "";
  // The n-th send or receive of each rank pairs with a different peer (two
  // ranks of a larger pipeline): not the same operation, so its start is no
  // lateness. It flagged rank 1 ("its collectives start 1000 us after").
  QTest::addRow("sends and receives late") << std::int64_t{10'000'000} << std::int64_t{10'000'000}
                                           << std::int64_t{1'000'000} << true << false << "";
}

void TestTraceAnalysis::stragglerOfTwoRanks() {
  QFETCH(std::int64_t, rank0_step_ns);
  QFETCH(std::int64_t, slow_step_ns);
  QFETCH(std::int64_t, late_ns);
  QFETCH(bool, send_recv);
  QFETCH(bool, straggler);
  QFETCH(QString, reason);
  QTemporaryDir dir;
  Builder b(dir, "pair.db");
  TraceWriter& w = *b.writer;
  for (int rank = 0; rank < 2; ++rank) {
    w.add_rank({rank, "node" + std::to_string(rank), "GPU", 1, 0, false});
    const LaneId lane = w.add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
    const std::int64_t step_ns = rank == 1 ? slow_step_ns : rank0_step_ns;
    std::int64_t t = 0;
    for (int step = 0; step < 5; ++step) {
      const std::int64_t joins = t + 2'000'000 + (rank == 1 ? late_ns : 0);
      if (send_recv) {
        b.add(lane, EventKind::p2p, Category::communication, joins, joins + 1'000'000,
              "ncclDevKernel_SendRecv");
        b.last.collective = Collective::send_recv;
      } else {
        b.add(lane, EventKind::collective, Category::communication, joins, joins + 1'000'000,
              "ncclDevKernel_AllReduce");
        b.last.collective = Collective::all_reduce;
      }
      b.commit();
      w.add(StepMetrics{rank, step, t, t + step_ns, 1.0, 1, 0});
      t += 10'000'000;
    }
  }
  auto run = analyze_run(*b.close());
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(!run->stragglers.ranks[0].straggler);
  const RankStraggler& slow = run->stragglers.ranks[1];
  QCOMPARE(slow.straggler, straggler);
  QVERIFY2(QString::fromStdString(slow.reason).contains(reason), slow.reason.c_str());
  QCOMPARE(slow.collectives, send_recv ? 0 : 5);
}

// Two ranks run four 1 MiB all-reduces; rank 0 joins each first and waits
// for rank 1, which joins 6, 7, 6 and 8 µs later: both end together. The
// mean includes rank 0's wait; the transfers' median (3.5 µs) does not.
// Nothing is matched for a collective one rank ran, for counts that differ,
// for point-to-point, or within one rank.
void TestTraceAnalysis::transferLeavesTheWaitOut() {
  QTemporaryDir dir;
  Builder b(dir, "last-joiner.cstrace");
  TraceWriter& w = *b.writer;
  constexpr std::int64_t kMiB = 1 << 20;
  const std::int64_t waits[] = {6'000, 7'000, 6'000, 8'000};
  for (int rank = 0; rank < 2; ++rank) {
    w.add_rank({rank, "node" + std::to_string(rank), "GPU", 1, 0, false});
    const LaneId s = w.add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
    auto collective = [&](Collective c, std::int64_t start, std::int64_t end) {
      b.add(s, EventKind::collective, Category::communication, start, end, "nccl");
      b.last.collective = c;
      b.last.bytes = kMiB;
      b.last.dtype = DataType::fp32;
      b.last.group_size = 2;
      b.commit();
    };
    for (int i = 0; i < 4; ++i) {
      const std::int64_t t = i * 100'000;
      collective(Collective::all_reduce, rank == 0 ? t : t + waits[i], t + 10'000);
      collective(Collective::send, t + 20'000, t + 25'000 + rank * 1'000);
      // Three reduce-scatters on rank 0, two on rank 1: not matched.
      if (i < 3 - rank) collective(Collective::reduce_scatter, t + 30'000, t + 31'000);
      if (rank == 0) collective(Collective::all_gather, t + 40'000, t + 41'000);
    }
  }
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  auto find = [](const std::vector<CollectiveStats>& all, Collective c) {
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&](const CollectiveStats& s) { return s.collective == c; });
    return it == all.end() ? CollectiveStats{} : *it;
  };
  const CollectiveStats all_reduce = find(run->collectives, Collective::all_reduce);
  QCOMPARE(all_reduce.count, 8);
  QCOMPARE(all_reduce.mean_ns, (4 * 10'000.0 + 4'000 + 3'000 + 4'000 + 2'000) / 8);
  QCOMPARE(all_reduce.transfer_median_ns, 3'500.0);
  // 2(n-1)/n = 1 for n = 2: the bus bandwidth is the algorithm's.
  QCOMPARE(all_reduce.transfer_busbw_gbps, static_cast<double>(kMiB) / 3'500.0);
  QCOMPARE(all_reduce.busbw_gbps, static_cast<double>(kMiB) / 6'625.0);
  for (Collective unmatched :
       {Collective::send, Collective::reduce_scatter, Collective::all_gather}) {
    const CollectiveStats c = find(run->collectives, unmatched);
    QVERIFY(c.count > 0);
    QCOMPARE(c.transfer_median_ns, 0.0);
    QCOMPARE(c.transfer_busbw_gbps, 0.0);
  }
  for (const RankAnalysis& rank : run->ranks)
    QCOMPARE(find(rank.collectives, Collective::all_reduce).transfer_median_ns, 0.0);
}

// Three steps, the first a 50 µs warm-up (on a GPU: cuBLAS's heuristics,
// allocation) with a 20 µs "dp_allreduce" range, then two of 10 µs with a
// 3 µs one each: the mean step and the part leave the warm-up out.
void TestTraceAnalysis::predictionLeavesTheWarmUpOut() {
  QTemporaryDir dir;
  Builder b(dir, "warm-up.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const LaneId nvtx = w.add_lane(0, LaneKind::annotation, "NVTX", 1);
  const std::int64_t starts[] = {0, 50'000, 60'000, 70'000};
  for (int step = 0; step < 3; ++step) {
    const std::int64_t s = starts[step], e = starts[step + 1];
    b.add(compute, EventKind::kernel, Category::compute, s, e, "mlp.fc");
    b.commit();
    const std::int64_t range = step == 0 ? 20'000 : 3000;  // the warm-up's is slow too
    b.add(nvtx, EventKind::annotation, Category::other, s, s + range, "dp_allreduce");
    b.commit();
    w.add(StepMetrics{0, step, s, e, 1.0, 100, 0});
  }
  w.set_meta("predicted_step", R"({"step_seconds": 1e-5, "categories": {"compute": 1e-5},
                                   "parts": {"dp_allreduce": 3e-6}})");
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  const PredictionComparison& p = *run->prediction;
  QCOMPARE(p.steps, 2);
  QCOMPARE(p.measured_step_s, 10e-6);
  QCOMPARE(*p.categories.front().measured_s, 10e-6);
  QCOMPARE(p.parts.front().name, std::string("dp_allreduce"));
  QCOMPARE(*p.parts.front().measured_s, 3e-6);
}

// The planner's memory against the largest sample of the counters that
// measure it, of any rank: a counter whose name only ends alike, and values
// that are no size (inf, negative), measure nothing; a prediction's
// unreadable memory leaves the rest of the comparison standing.
void TestTraceAnalysis::memoryAgainstTheCounters() {
  for (const bool readable : {true, false}) {
    QTemporaryDir dir;
    Builder b(dir, "memory.cstrace");
    TraceWriter& w = *b.writer;
    for (int rank = 0; rank < 2; ++rank) {
      w.add_rank({rank, "node", "GPU", 1 + rank, 0, false});
      const LaneId compute = w.add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
      b.add(compute, EventKind::kernel, Category::compute, 0, 10'000, "gemm");
    }
    b.commit();
    auto sample = [&](int rank, const char* name, double value) {
      w.add(CounterSample{rank, w.intern(name), 5000, value});
    };
    sample(0, "memory in use (bytes)", 1e9);
    sample(1, "memory in use (bytes)", 2e9);
    sample(1, "memory in use (bytes)", 1.5e9);
    sample(0, "GPU 0 shared memory used", 5e10);  // not the device's memory
    sample(0, "GPU 0 memory used", std::numeric_limits<double>::infinity());
    sample(0, "GPU 1 memory used", -5);
    sample(1, "GPU 1 memory used", 3e9);
    w.set_meta(
        "predicted_step",
        readable
            ? R"({"step_seconds": 1e-5, "memory": {"allocated_bytes": 1.8e9, "device_bytes": 2.7e9}})"
            : R"({"step_seconds": 1e-5, "memory": {"allocated_bytes": "x", "device_bytes": 1}})");
    auto r = b.close();
    auto run = analyze_run(*r);
    QVERIFY2(run, run ? "" : run.message().c_str());
    QVERIFY(run->prediction);
    const PredictionComparison& p = *run->prediction;
    QCOMPARE(p.predicted_step_s, 1e-5);
    if (!readable) {
      QVERIFY(p.memory.empty());
      QVERIFY2(p.memory_note.starts_with("the prediction's memory is unreadable: ") &&
                   p.memory_note.ends_with("/memory/allocated_bytes: must be a number of bytes "
                                           "from 0 to 1e18"),
               p.memory_note.c_str());
      continue;
    }
    QCOMPARE(p.memory.size(), std::size_t{2});
    const MemoryVsMeasured& allocated = p.memory[0];
    QCOMPARE(allocated.name, std::string("allocated"));
    QCOMPARE(allocated.predicted_bytes, 1.8e9);
    QCOMPARE(*allocated.measured_bytes, 2e9);
    QCOMPARE(allocated.rank, 1);
    QCOMPARE(memory_row_source(allocated), std::string("\"memory in use (bytes)\" of rank 1"));
    const MemoryVsMeasured& device = p.memory[1];
    QCOMPARE(device.name, std::string("device"));
    QCOMPARE(*device.measured_bytes, 3e9);
    QCOMPARE(device.counter, std::string("GPU 1 memory used"));
    QCOMPARE(device.rank, 1);
    // The counters' table lists them all, as sampled.
    QCOMPARE(run->counters.size(), std::size_t{6});
  }
}

// With a pipeline, each end stage's figure against the largest sample of
// its own ranks (stage s: ranks [s, s + 1) x ranks_per_stage), labelled by
// its index; a stage whose ranks sampled nothing says so. Without the
// prediction's pipeline there are no stage rows.
void TestTraceAnalysis::memoryOfEachEndStage() {
  for (const bool sampled_last : {true, false}) {
    QTemporaryDir dir;
    Builder b(dir, "stages.cstrace");
    TraceWriter& w = *b.writer;
    for (int rank = 0; rank < 6; ++rank) {
      w.add_rank({rank, "node", "CPU", 1, 0, false});
      const LaneId compute = w.add_lane(rank, LaneKind::cpu_thread, "compute", 0);
      b.add(compute, EventKind::kernel, Category::compute, 0, 10'000, "gemm");
    }
    b.commit();
    // 3 stages of 2 ranks: the middle stage (ranks 2, 3) holds the most.
    const double in_use[] = {1.0e9, 1.2e9, 9e9, 9e9, 0.7e9, 0.8e9};
    for (int rank = 0; rank < 6; ++rank) {
      if (!sampled_last && rank >= 4) continue;
      w.add(CounterSample{rank, w.intern("memory in use (bytes)"), 5000, in_use[rank]});
      w.add(CounterSample{rank, w.intern("memory in use (bytes)"), 6000, in_use[rank] / 2});
    }
    w.set_meta("predicted_step",
               R"({"step_seconds": 1e-5, "pipeline": {"stages": 3, "ranks_per_stage": 2,
                   "pacing": "first"}, "memory": {"allocated_bytes": 1.1e9, "device_bytes": 2e9,
                   "stages": {"first": 1.1e9, "last": 1e9}}})");
    auto r = b.close();
    auto run = analyze_run(*r);
    QVERIFY2(run, run ? "" : run.message().c_str());
    const std::vector<MemoryVsMeasured>& memory = run->prediction->memory;
    QCOMPARE(memory.size(), std::size_t{4});  // allocated, the two stages, the device
    QCOMPARE(*memory[0].measured_bytes, 9e9);
    const MemoryVsMeasured& first = memory[1];
    QCOMPARE(first.stage, 0);
    QVERIFY(first.under_allocated() && !first.part);
    QCOMPARE(memory_row_label(first), std::string("stage 0 (first)"));
    QCOMPARE(first.predicted_bytes, 1.1e9);
    QCOMPARE(*first.measured_bytes, 1.2e9);
    QCOMPARE(first.rank, 1);
    const MemoryVsMeasured& last = memory[2];
    QCOMPARE(last.stage, 2);
    QCOMPARE(memory_row_label(last), std::string("stage 2 (last)"));
    QCOMPARE(last.predicted_bytes, 1e9);
    if (sampled_last) {
      QCOMPARE(*last.measured_bytes, 0.8e9);
      QCOMPARE(memory_row_source(last), std::string("\"memory in use (bytes)\" of rank 5"));
    } else {
      QVERIFY(!last.measured_bytes);
      QCOMPARE(memory_row_source(last), std::string("no counter sampled it"));
    }
    QCOMPARE(memory[3].name, std::string("device"));
    QCOMPARE(memory[3].stage, -1);
  }
}

// A run stopped before its first step ended: no verdict on its parts (it
// said "the run took 0 s" and blamed a part the model "over-rated").
void TestTraceAnalysis::predictionOfARunWithNoStep() {
  QTemporaryDir dir;
  Builder b(dir, "no-step.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  w.add_lane(0, LaneKind::steps, "steps", -1);
  b.add(compute, EventKind::kernel, Category::compute, 0, 5000, "mlp.fc");
  b.commit();
  w.set_meta("predicted_step",
             R"({"step_seconds": 1e-5, "breakdown": {"compute.gemm": 1e-5}})");
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  QCOMPARE(QString::fromStdString(run->prediction->verdict),
           QString("the run recorded no complete step to hold against the plan's 10.0 µs per step"));
  QVERIFY(run->prediction->breakdown.empty());
}

// The verdict names the part most off and how it bears on the step's
// difference: a part, all of it and more (the others made up for some:
// "12 ms of the difference" of a part 23 ms off hid that), or against it.
// Each step: GEMMs 6 µs, the loss 2 µs, 2 µs idle.
void TestTraceAnalysis::verdictWeighsTheLargestGap_data() {
  QTest::addColumn<QString>("predicted");
  QTest::addColumn<QString>("verdict");
  QTest::addRow("a part of the difference")
      << R"("step_seconds": 8e-6, "breakdown": {"compute.gemm": 4e-6, "compute.loss": 2e-6,
            "idle": 2e-6})"
      << "the plan said 8.00 µs per step, the run took 10.0 µs, and 2.00 µs of the difference "
         "is GEMM compute, which the model under-rated (4.00 µs predicted, 6.00 µs measured)";
  QTest::addRow("all of it and more")
      << R"("step_seconds": 9e-6, "breakdown": {"compute.gemm": 3e-6, "compute.loss": 4e-6,
            "idle": 2e-6})"
      << "the plan said 9.00 µs per step, the run took 10.0 µs, and all of the difference is GEMM "
         "compute, which the model under-rated by 3.00 µs (3.00 µs predicted, 6.00 µs measured); "
         "the other parts together took 2.00 µs less than predicted";
  QTest::addRow("against the difference")
      << R"("step_seconds": 9e-6, "breakdown": {"compute.gemm": 4e-6, "compute.loss": 5e-6,
            "idle": 0})"
      << "the plan said 9.00 µs per step, the run took 10.0 µs; the largest disagreement is "
         "the loss over the logits: 3.00 µs less than the 5.00 µs predicted";
}

void TestTraceAnalysis::verdictWeighsTheLargestGap() {
  QFETCH(QString, predicted);
  QFETCH(QString, verdict);
  QTemporaryDir dir;
  Builder b(dir, "verdict.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  for (int step = 0; step < 4; ++step) {
    const std::int64_t s = 100'000 + step * 10'000;
    b.add(compute, EventKind::kernel, Category::compute, s, s + 6000, "mlp.fc");
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s + 6000, s + 8000, "cross-entropy");
    b.commit();
    w.add(StepMetrics{0, step, s, s + 10'000, 1.0, 100, 0});
  }
  w.set_meta("predicted_step", ("{" + predicted + "}").toStdString());
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  QCOMPARE(QString::fromStdString(run->prediction->verdict), verdict);
}

void TestTraceAnalysis::operationKinds_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("kind");
  QTest::addRow("CPU engine projection") << "mlp.fc dgrad"
                                         << "gemm";
  QTest::addRow("cuBLAS kernel") << "sm90_xmma_gemm_bf16bf16_bf16f32"
                                 << "gemm";
  QTest::addRow("attention core") << "attention backward"
                                  << "attention";
  QTest::addRow("flash attention") << "flash_fwd_kernel"
                                   << "attention";
  QTest::addRow("the CUDA worker's attention GEMMs") << "gemm attention backward"
                                                     << "attention";
  QTest::addRow("PyTorch SDPA") << "aten::scaled_dot_product_attention"
                                << "attention";
  QTest::addRow("layer norm") << "layernorm backward"
                              << "norm";
  QTest::addRow("RMS norm") << "rms_norm_kernel"
                            << "norm";
  QTest::addRow("GELU") << "gelu"
                        << "activation";
  QTest::addRow("SwiGLU") << "swiglu_fwd"
                          << "activation";
  QTest::addRow("loss") << "cross-entropy"
                        << "loss";
  QTest::addRow("AdamW") << "adamw"
                         << "optimizer";
  QTest::addRow("gradient norm") << "gradient norm"
                                 << "optimizer";
  QTest::addRow("residual") << "residual"
                            << "elementwise";
  // A library's namespace is not the operation (Kineto's sampled ranks).
  QTest::addRow("fbgemm embedding lookup")
      << "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, float, 2ul>("
         "at::GenericPackedTensorAccessor<int, 1ul>, fbgemm_gpu::FixedDivisor, long)"
      << "elementwise";
  QTest::addRow("cuBLAS through CUTLASS")
      << "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn>("
         "Params)"
      << "gemm";
}

void TestTraceAnalysis::operationKinds() {
  QFETCH(QString, name);
  QFETCH(QString, kind);
  QCOMPARE(QString::fromStdString(std::string(operation_kind(name.toStdString()))), kind);
}

// Three steps of 10 µs on a CPU-engine rank (the first, a warm-up, left
// out), each worked out by hand, from the step's start:
//   [0,2000) mlp.fc (gemm)       [2000,3000) layernorm      [3000,3500) tp all-reduce
//   [3500,4500) gelu backward    [4000,6000) dp all-reduce on the communication
//   lane: [4500,6000) exposed    [7000,8000) adamw          [8000,8500) zero
//   (an elementwise kernel outside forward/backward: optimizer work)
//   idle: 10000 - 7500 = 2500
// Rank 1 computes less and is not the critical rank.
void TestTraceAnalysis::stepParts() {
  QTemporaryDir dir;
  Builder b(dir, "parts.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  w.add_rank({1, "node", "CPU", 1, 0, false});
  const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const LaneId comm = w.add_lane(0, LaneKind::communication, "communication", 1);
  const LaneId other = w.add_lane(1, LaneKind::cpu_thread, "compute", 0);
  for (int step = 0; step < 3; ++step) {
    const std::int64_t s = 100'000 + step * 10'000;
    const std::int64_t gemm_end = step == 0 ? s + 2900 : s + 2000;  // the warm-up is slower
    b.add(compute, EventKind::annotation, Category::other, s, s + 3500, "forward");
    b.commit();
    b.add(compute, EventKind::annotation, Category::other, s + 3500, s + 7000, "backward");
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s, gemm_end, "mlp.fc");
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s + 2000, s + 3000, "layernorm");
    b.commit();
    Event& tp = b.add(compute, EventKind::collective, Category::communication, s + 3000, s + 3500,
                      "tp all-reduce");
    tp.collective = Collective::all_reduce;
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s + 3500, s + 4500, "gelu backward");
    b.commit();
    Event& dp = b.add(comm, EventKind::collective, Category::communication, s + 4000, s + 6000,
                      "dp all-reduce");
    dp.collective = Collective::all_reduce;
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s + 7000, s + 8000, "adamw");
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s + 8000, s + 8500, "zero");
    b.commit();
    b.add(other, EventKind::kernel, Category::compute, s, s + 1000, "mlp.fc");
    b.commit();
    w.add(StepMetrics{0, step, s, s + 10'000, 1.0, 100, 0});
    w.add(StepMetrics{1, step, s, s + 10'000, 1.0, 100, 0});
  }
  auto r = b.close();
  auto parts = measure_step_parts(*r);
  QVERIFY2(parts, parts ? "" : parts.message().c_str());
  QCOMPARE(parts->rank, 0);
  QCOMPARE(parts->steps, 2);
  QCOMPARE(parts->step_s, 10e-6);
  const std::vector<std::pair<const char*, double>> expected = {{"compute.gemm", 2000},
                                                                {"compute.attention", 0},
                                                                {"compute.norm", 1000},
                                                                {"compute.activation", 1000},
                                                                {"compute.elementwise", 0},
                                                                {"compute.loss", 0},
                                                                {"optimizer", 1500},
                                                                {"communication.tp", 500},
                                                                {"communication.dp", 1500},
                                                                {"communication.pp", 0},
                                                                {"bubble", 0},
                                                                {"idle", 2500}};
  for (const auto& [name, ns] : expected) {
    QVERIFY2(
        std::abs(parts->part(name) - ns * 1e-9) < 1e-12,
        qPrintable(QString("%1: %2 s, expected %3 ns").arg(name).arg(parts->part(name)).arg(ns)));
  }
}

// The CPU engine's ops that were off CPU (kOffCpuCounter, sampled at the
// op's end): that time is the part "descheduled", not the op's kind. Each
// step of 10 µs: an 4000 ns GEMM 1500 of it off CPU, a layer norm never
// off CPU, an AdamW 200 of its 1000 off, a GELU whose sample says more than
// its length (held to it), and a sample at no op's end (left out).
void TestTraceAnalysis::descheduledTimeIsItsOwnPart() {
  QTemporaryDir dir;
  Builder b(dir, "descheduled.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  const LaneId compute = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const StringId off_cpu = w.intern(kOffCpuCounter);
  for (int step = 0; step < 4; ++step) {
    const std::int64_t s = 100'000 + step * 10'000;
    b.add(compute, EventKind::kernel, Category::compute, s, s + 4000, "mlp.fc");
    b.commit();
    w.add(CounterSample{0, off_cpu, s + 4000, 1500});
    b.add(compute, EventKind::kernel, Category::compute, s + 4000, s + 5000, "layernorm");
    b.commit();
    b.add(compute, EventKind::kernel, Category::compute, s + 5000, s + 6000, "adamw");
    b.commit();
    w.add(CounterSample{0, off_cpu, s + 6000, 200});
    b.add(compute, EventKind::kernel, Category::compute, s + 6000, s + 6500, "gelu");
    b.commit();
    w.add(CounterSample{0, off_cpu, s + 6500, 900});
    w.add(CounterSample{0, off_cpu, s + 8000, 700});
    w.add(StepMetrics{0, step, s, s + 10'000, 1.0, 100, 0});
  }
  auto r = b.close();
  auto parts = measure_step_parts(*r);
  QVERIFY2(parts, parts ? "" : parts.message().c_str());
  const std::vector<std::pair<const char*, double>> expected = {{"compute.gemm", 2500},
                                                                {"compute.norm", 1000},
                                                                {"compute.activation", 0},
                                                                {"optimizer", 800},
                                                                {"descheduled", 1500 + 200 + 500},
                                                                {"idle", 3500}};
  for (const auto& [name, ns] : expected) {
    QVERIFY2(
        std::abs(parts->part(name) - ns * 1e-9) < 1e-12,
        qPrintable(QString("%1: %2 s, expected %3 ns").arg(name).arg(parts->part(name)).arg(ns)));
  }
  // The rank's compute still counts its time off CPU (the critical rank is
  // the one with the most).
  QVERIFY(std::abs(parts->compute() - 6500e-9) < 1e-12);
}

// Two data-parallel ranks, three steps of 10 µs (the first a warm-up).
// Rank 0 computes [0,1000) and reaches the gradient all-reduce first:
// [1000,3000); rank 1 computes [0,2500), then [2500,3000). The call is one
// collective: rank 1 arrived last, so its 500 ns are the transfer, and
// rank 0 waited the 1500 before them. Rank 0 also makes a call no other
// rank makes ([4000,4200), "dp all-reduce" of another size): nothing to
// wait for, all transfer.
void TestTraceAnalysis::collectiveWaitIsSplit() {
  QTemporaryDir dir;
  Builder b(dir, "wait.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  w.add_rank({1, "node", "CPU", 2, 0, false});
  const LaneId early = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  // The early rank reduces on its communication thread, as the CPU engine
  // does, and its compute thread waits on it ("wait dp").
  const LaneId early_comm = w.add_lane(0, LaneKind::cpu_thread, "communication", 1);
  const LaneId late = w.add_lane(1, LaneKind::cpu_thread, "compute", 0);
  auto reduce = [&](LaneId lane, std::int64_t s, std::int64_t e, std::int64_t bytes) {
    Event& ev = b.add(lane, EventKind::collective, Category::communication, s, e, "dp all-reduce");
    ev.collective = Collective::all_reduce;
    ev.bytes = bytes;
    ev.group_size = 2;
    b.commit();
  };
  for (int step = 0; step < 3; ++step) {
    const std::int64_t s = 100'000 + step * 10'000;
    b.add(early, EventKind::kernel, Category::compute, s, s + 1000, "mlp.fc");
    b.commit();
    reduce(early_comm, s + 1000, s + 3000, 4096);
    b.add(early, EventKind::sync, Category::synchronization, s + 1500, s + 3000, "wait dp");
    b.commit();
    // Made once here and twice on the other rank: the order pairs nothing,
    // so all of it is transfer.
    reduce(early, s + 4000, s + 4200, 64);
    b.add(late, EventKind::kernel, Category::compute, s, s + 2500, "mlp.fc");
    b.commit();
    reduce(late, s + 2500, s + 3000, 4096);
    reduce(late, s + 3000, s + 3100, 64);
    reduce(late, s + 3100, s + 3200, 64);
    w.add(StepMetrics{0, step, s, s + 10'000, 1.0, 100, 0});
    w.add(StepMetrics{1, step, s, s + 10'000, 1.0, 100, 0});
  }
  w.set_meta("predicted_step",
             R"({"step_seconds": 3e-6, "breakdown": {"compute.gemm": 2.5e-6,
                 "communication.dp": 5e-7}})");
  auto r = b.close();
  auto ranks = measure_rank_parts(*r);
  QVERIFY2(ranks, ranks ? "" : ranks.message().c_str());
  QCOMPARE(ranks->size(), std::size_t{2});
  const std::vector<std::vector<std::pair<const char*, double>>> expected = {
      {{"compute.gemm", 1000}, {"communication.dp", 700}, {"wait", 1500}, {"idle", 6800}},
      {{"compute.gemm", 2500}, {"communication.dp", 700}, {"wait", 0}, {"idle", 6800}}};
  for (std::size_t rank = 0; rank < 2; ++rank) {
    for (const auto& [name, ns] : expected[rank]) {
      QVERIFY2(std::abs((*ranks)[rank].part(name) - ns * 1e-9) < 1e-12,
               qPrintable(QString("rank %1 %2: %3 s, expected %4 ns")
                              .arg(rank)
                              .arg(name)
                              .arg((*ranks)[rank].part(name))
                              .arg(ns)));
    }
  }
  // The comparison holds the late rank (the most compute) against the
  // prediction: its reductions (500 + 200 ns) are all transfer.
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  QCOMPARE(run->prediction->critical_rank, 1);
  bool compared = false;
  for (const PredictedVsMeasured& row : run->prediction->breakdown) {
    if (row.name != "communication.dp") continue;
    QVERIFY(std::abs(*row.measured_s - 7e-7) < 1e-12);
    compared = true;
  }
  QVERIFY(compared);
  QCOMPARE(describe_part("wait"), std::string("waiting in collectives for slower ranks"));
  // Calls matched by their order on each rank: the n-th of each rank.
  const std::vector<double> shortest = shortest_of_each_call({{2000, 300, 900}, {500, 700}, {800}});
  QCOMPARE(shortest, (std::vector<double>{500, 300, 900}));
}

// A rank whose figures for step 1 were lost: its calls still carry their
// step, and each is paired with the other rank's call of that step, not
// with the other rank's second call. Step k's all-reduce transfers 100 (2k
// + 1) ns, and rank 0 comes to it 1000 ns early in every step.
void TestTraceAnalysis::collectivesPairedByTheirStep() {
  QTemporaryDir dir;
  Builder b(dir, "steps.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  w.add_rank({1, "node", "CPU", 2, 0, false});
  const LaneId lanes[] = {w.add_lane(0, LaneKind::cpu_thread, "compute", 0),
                          w.add_lane(1, LaneKind::cpu_thread, "compute", 0)};
  for (int step = 0; step < 4; ++step) {
    const std::int64_t s = 100'000 + step * 10'000;
    const std::int64_t transfer = 100 * (2 * step + 1);
    for (int rank : {0, 1}) {
      const std::int64_t start = rank == 0 ? s : s + 1000;
      Event& ev = b.add(lanes[rank], EventKind::collective, Category::communication, start,
                        s + 1000 + transfer, "dp all-reduce");
      ev.collective = Collective::all_reduce;
      ev.bytes = 4096;
      ev.group_size = 2;
      ev.step = step;
      b.commit();
      if (rank == 0 || step != 1) w.add(StepMetrics{rank, step, s, s + 10'000, 1.0, 100, 0});
    }
  }
  auto r = b.close();
  auto ranks = measure_rank_parts(*r);
  QVERIFY2(ranks, ranks ? "" : ranks.message().c_str());
  // Rank 0's steps 1-3 (the first is the warm-up): 1000 ns waiting in
  // each, transfers of 300, 500 and 700.
  QVERIFY2(std::abs((*ranks)[0].part("wait") - 1000e-9) < 1e-12,
           qPrintable(QString::number((*ranks)[0].part("wait"))));
  QVERIFY2(std::abs((*ranks)[0].part("communication.dp") - 500e-9) < 1e-12,
           qPrintable(QString::number((*ranks)[0].part("communication.dp"))));
}

// Leading steps left out of what a run measured: the first (with three or
// more), then those still 1.5 times the second half's median, up to half.
void TestTraceAnalysis::warmUpSteps_data() {
  QTest::addColumn<QList<double>>("lengths");
  QTest::addColumn<int>("warm_up");
  QTest::addRow("two steps") << QList<double>{5, 1} << 0;
  QTest::addRow("steady after the first") << QList<double>{5, 1, 1, 1, 1, 1} << 1;
  QTest::addRow("three slow (a DP 2 run)")
      << QList<double>{6.1, 3.8, 3.5, 1.9, 1.1, 1.0, 1.0, 1.0, 1.0, 1.4} << 4;
  QTest::addRow("at most half") << QList<double>{9, 9, 9, 9, 9, 1, 1, 1} << 4;
  QTest::addRow("1.4 times is steady") << QList<double>{3, 1.4, 1, 1, 1, 1} << 1;
}

void TestTraceAnalysis::warmUpSteps() {
  QFETCH(QList<double>, lengths);
  QFETCH(int, warm_up);
  QCOMPARE(warm_up_steps(std::vector<double>(lengths.begin(), lengths.end())),
           static_cast<std::size_t>(warm_up));
}

// What a live ETA takes each step left to cost: the mean of the steps so
// far past the warm-up. A GPU run's first step is a hundred times a later
// one; the mean of all four below would say 26 s a step, not 1.
void TestTraceAnalysis::expectedStepLeavesTheWarmUpOut_data() {
  QTest::addColumn<QList<double>>("lengths");
  QTest::addColumn<double>("expected");
  QTest::addRow("none yet") << QList<double>{} << 0.0;
  QTest::addRow("the first alone") << QList<double>{100} << 100.0;
  QTest::addRow("two: both") << QList<double>{100, 1} << 50.5;
  QTest::addRow("a GPU run's first") << QList<double>{100, 1, 1.2, 0.8} << 1.0;
  QTest::addRow("three slow (a DP 2 run)")
      << QList<double>{6.1, 3.8, 3.5, 1.9, 1.1, 1.0, 1.0, 1.0, 1.0, 1.4} << 6.5 / 6;
}

void TestTraceAnalysis::expectedStepLeavesTheWarmUpOut() {
  QFETCH(QList<double>, lengths);
  QFETCH(double, expected);
  const double got = expected_step_seconds(std::vector<double>(lengths.begin(), lengths.end()));
  QVERIFY2(std::abs(got - expected) < 1e-9, qPrintable(QString::number(got)));
}

// A run whose first two steps are slow: the parts and the step measured are
// those of the four after them.
void TestTraceAnalysis::slowFirstStepsLeftOut() {
  QTemporaryDir dir;
  Builder b(dir, "warm.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  const LaneId lane = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  std::int64_t t = 100'000;
  for (int step = 0; step < 6; ++step) {
    const std::int64_t length = step == 0 ? 30'000 : step == 1 ? 20'000 : 10'000;
    b.add(lane, EventKind::kernel, Category::compute, t, t + length / 2, "mlp.fc");
    b.commit();
    w.add(StepMetrics{0, step, t, t + length, 1.0, 100, 0});
    t += length;
  }
  w.set_meta("predicted_step", R"({"step_seconds": 1e-5, "breakdown": {"compute.gemm": 5e-6}})");
  auto r = b.close();
  auto parts = measure_step_parts(*r);
  QVERIFY2(parts, parts ? "" : parts.message().c_str());
  QCOMPARE(parts->steps, 4);
  QVERIFY(std::abs(parts->step_s - 10e-6) < 1e-12);
  QVERIFY(std::abs(parts->part("compute.gemm") - 5e-6) < 1e-12);
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  QCOMPARE(run->prediction->steps, 4);
  QVERIFY(std::abs(run->prediction->measured_step_s - 10e-6) < 1e-12);
  // What the comparison says it measured.
  QCOMPARE(parts->warm_up, 2);
  QCOMPARE(run->prediction->critical_steps, 4);
  QCOMPARE(run->prediction->critical_warm_up, 2);
  QCOMPARE(describe_steps(4, 2), std::string("4 steps after the warm-up (the first 2)"));
  QCOMPARE(describe_steps(4, 1), std::string("4 steps after the first (the warm-up)"));
  QCOMPARE(describe_steps(2, 0), std::string("2 steps"));
}

// A two-stage pipeline, three steps of 20 µs (the first a warm-up):
//   rank 0, the first stage: [0,8000) mlp.fc; [8000,8100) pp send;
//     [8100,15000) pp recv of the gradients, waiting for the last stage in
//     every step;
//   rank 1, the last stage: [0,200) pp recv; [200,5000) mlp.fc;
//     [5000,6000) cross-entropy; [6000,6100) pp send.
// The same 1 KiB message takes 200 ns to arrive on rank 1, so rank 0's
// receives are 200 ns of transfer and 6700 ns of bubble. The first stage
// has more compute, but a prediction with a loss part timed the last.
void TestTraceAnalysis::pipelineParts_data() {
  QTest::addColumn<QString>("breakdown");
  QTest::addColumn<QString>("pipeline");  // the prediction's pacing stage, "" for none
  QTest::addColumn<int>("critical");
  QTest::addRow("the last stage predicted") << R"("compute.gemm": 4e-6, "compute.loss": 1e-6)"
                                            << "" << 1;
  QTest::addRow("no loss predicted") << R"("compute.gemm": 8e-6)"
                                     << "" << 0;
  // Named by the prediction, whatever the parts: a middle stage paces a
  // plan of three or more (its two held sends), one that has no loss part,
  // where the most compute picked the first stage.
  QTest::addRow("the first stage named")
      << R"("compute.gemm": 4e-6, "compute.loss": 1e-6)"
      << R"("stages": 2, "ranks_per_stage": 1, "pacing": "first")" << 0;
  QTest::addRow("the last stage named")
      << R"("compute.gemm": 8e-6)"
      << R"("stages": 2, "ranks_per_stage": 1, "pacing": "last")" << 1;
  QTest::addRow("a middle stage named")
      << R"("compute.gemm": 8e-6)"
      << R"("stages": 3, "ranks_per_stage": 1, "pacing": "middle")" << 1;
  // A stage no rank of the store holds (a store of fewer ranks): the parts decide.
  QTest::addRow("a stage not in the store")
      << R"("compute.gemm": 8e-6)"
      << R"("stages": 4, "ranks_per_stage": 2, "pacing": "last")" << 0;
}

void TestTraceAnalysis::pipelineParts() {
  QFETCH(QString, breakdown);
  QFETCH(QString, pipeline);
  QFETCH(int, critical);
  QTemporaryDir dir;
  Builder b(dir, "pipeline.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  w.add_rank({1, "node", "CPU", 2, 0, false});
  const LaneId first = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const LaneId last = w.add_lane(1, LaneKind::cpu_thread, "compute", 0);
  auto p2p = [&](LaneId lane, std::int64_t s, std::int64_t e, bool send) {
    Event& ev =
        b.add(lane, EventKind::p2p, Category::communication, s, e, send ? "pp send" : "pp recv");
    ev.collective = send ? Collective::send : Collective::recv;
    ev.bytes = 1024;
    ev.group_size = 8;  // the communicator's size, as PyTorch's "Group size" gives it
    b.commit();
  };
  for (int step = 0; step < 3; ++step) {
    const std::int64_t s = 100'000 + step * 20'000;
    b.add(first, EventKind::kernel, Category::compute, s, s + 8000, "mlp.fc");
    b.commit();
    p2p(first, s + 8000, s + 8100, true);
    p2p(first, s + 8100, s + 15'000, false);
    p2p(last, s, s + 200, false);
    b.add(last, EventKind::kernel, Category::compute, s + 200, s + 5000, "mlp.fc");
    b.commit();
    b.add(last, EventKind::kernel, Category::compute, s + 5000, s + 6000, "cross-entropy");
    b.commit();
    p2p(last, s + 6000, s + 6100, true);
    w.add(StepMetrics{0, step, s, s + 20'000, 1.0, 100, 0});
    w.add(StepMetrics{1, step, s, s + 20'000, 1.0, 100, 0});
  }
  const QString pace = pipeline.isEmpty() ? QString() : R"(, "pipeline": {)" + pipeline + "}";
  w.set_meta(
      "predicted_step",
      (R"({"step_seconds": 2e-5, "breakdown": {)" + breakdown + "}" + pace + "}").toStdString());
  auto r = b.close();
  auto ranks = measure_rank_parts(*r);
  QVERIFY2(ranks, ranks ? "" : ranks.message().c_str());
  QCOMPARE(ranks->size(), std::size_t{2});
  const std::vector<std::vector<std::pair<const char*, double>>> expected = {
      {{"compute.gemm", 8000}, {"communication.pp", 300}, {"bubble", 6700}, {"idle", 5000}},
      {{"compute.gemm", 4800},
       {"compute.loss", 1000},
       {"communication.pp", 300},
       {"bubble", 0},
       {"idle", 13'900}}};
  for (std::size_t rank = 0; rank < 2; ++rank) {
    const StepParts& parts = (*ranks)[rank];
    QCOMPARE(parts.rank, static_cast<std::int32_t>(rank));
    for (const auto& [name, ns] : expected[rank]) {
      QVERIFY2(std::abs(parts.part(name) - ns * 1e-9) < 1e-12,
               qPrintable(QString("rank %1 %2: %3 s, expected %4 ns")
                              .arg(rank)
                              .arg(name)
                              .arg(parts.part(name))
                              .arg(ns)));
    }
  }
  auto most = measure_step_parts(*r);
  QVERIFY(most);
  QCOMPARE(most->rank, 0);  // the most compute
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  // A send or a receive joins two ranks, whatever its communicator's size.
  QCOMPARE(run->collectives.size(), std::size_t{2});
  for (const CollectiveStats& c : run->collectives) QCOMPARE(c.ranks, 2);
  QVERIFY(run->prediction);
  QCOMPARE(run->prediction->critical_rank, critical);
}

void TestTraceAnalysis::predictedVersusMeasured() {
  QTemporaryDir dir;
  Builder b(dir, "predicted.cstrace");
  write_worked_example(b);
  // A part measured by annotation ranges with its name: 300 + 400 ns, one per step.
  const LaneId nvtx = b.writer->add_lane(0, LaneKind::annotation, "NVTX", 3);
  b.add(nvtx, EventKind::annotation, Category::other, 1000, 1300, "dp_allreduce");
  b.commit();
  b.add(nvtx, EventKind::annotation, Category::other, 5000, 5400, "dp_allreduce");
  b.commit();
  b.writer->set_meta("predicted_step",
                     R"({"step_seconds": 3.5e-6,
                         "categories": {"compute": 1.2e-6, "communication": 5e-7, "memory": 2e-7,
                                        "synchronization": 1e-7, "other": 1.5e-6, "bubble": 0},
                         "parts": {"dp_allreduce": 3e-7, "embedding": 1e-7}})");
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  const PredictionComparison& p = *run->prediction;
  QCOMPARE(p.predicted_step_s, 3.5e-6);
  QCOMPARE(p.steps, 2);
  // Means of steps 0 and 1 (see perStep): spans 3200 and 3800.
  QCOMPARE(p.measured_step_s, 3500e-9);
  std::map<std::string, PredictedVsMeasured> c;
  for (const auto& row : p.categories)
    c[row.name] = row;
  QCOMPARE(c.size(), std::size_t{6});
  QCOMPARE(c["compute"].predicted_s, 1.2e-6);
  QCOMPARE(*c["compute"].measured_s, (1000 + 1490) / 2.0 * 1e-9);
  QCOMPARE(*c["communication"].measured_s, (1000 + 0) / 2.0 * 1e-9);
  QCOMPARE(*c["memory"].measured_s, (0 + 500) / 2.0 * 1e-9);
  QCOMPARE(*c["synchronization"].measured_s, (0 + 100) / 2.0 * 1e-9);
  QCOMPARE(*c["other"].measured_s, (1200 + 100 + 1610) / 2.0 * 1e-9);
  QVERIFY(!c["bubble"].measured_s);  // not a category the trace measures
  double sum = 0;
  for (const char* k : {"compute", "communication", "memory", "synchronization", "other"})
    sum += *c[k].measured_s;
  QVERIFY(std::abs(sum - p.measured_step_s) < 1e-15);
  std::map<std::string, PredictedVsMeasured> parts;
  for (const auto& row : p.parts)
    parts[row.name] = row;
  QCOMPARE(*parts["dp_allreduce"].measured_s, 700 / 2.0 * 1e-9);
  QVERIFY(!parts["embedding"].measured_s);
}

void TestTraceAnalysis::predictionErrorsNameTheField_data() {
  QTest::addColumn<QString>("json");
  QTest::addColumn<QString>("message");
  QTest::addRow("not JSON") << "{step"
                            << "meta predicted_step: not valid JSON";
  QTest::addRow("no step") << "{}"
                           << "meta predicted_step: /step_seconds: must be a number";
  QTest::addRow("bad category") << R"({"step_seconds": 1, "categories": {"compute": "1s"}})"
                                << "/categories/compute: must be a number of seconds";
  QTest::addRow("parts not object") << R"({"step_seconds": 1, "parts": [1]})"
                                    << "/parts: must be an object";
}

void TestTraceAnalysis::predictionErrorsNameTheField() {
  QFETCH(QString, json);
  QFETCH(QString, message);
  QTemporaryDir dir;
  Builder b(dir, "bad.cstrace");
  write_worked_example(b);
  b.writer->set_meta("predicted_step", json.toStdString());
  auto r = b.close();
  // Said, and the run's own figures stand (the error stopped them all).
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(!run->prediction);
  QVERIFY(!run->ranks.empty());
  const QString got = QString::fromStdString(run->prediction_error);
  QVERIFY2(got.contains(message) && got.contains(QString::fromStdString(b.path)), qPrintable(got));
}

// The run's machine probe against the prediction's: the ratios, whether
// the machine drifted, and a note (not an error: the rest of the comparison
// stands) when one side is missing, unreadable or of another shape.
void TestTraceAnalysis::machineProbe_data() {
  QTest::addColumn<QString>("recorded");   // meta machine_probe ("" for none)
  QTest::addColumn<QString>("predicted");  // the prediction's machine_probe ("" for none)
  QTest::addColumn<double>("gemm_ratio");  // -1: no comparison expected
  QTest::addColumn<double>("loop_ratio");
  QTest::addColumn<double>("all_reduce_ratio");
  QTest::addColumn<bool>("drifted");
  QTest::addColumn<QString>("text");  // in the drift's text, else in the note
  const QString model = R"({"width": 256, "precision": "fp32", "all_reduce_bytes": 1048576,
                            "ranks": 2, "gemm_seconds": 0.001, "loop_seconds": 0.0002,
                            "all_reduce_seconds": 0.0001})";
  QTest::addRow("same machine")
      << R"({"width": 256, "precision": "fp32", "all_reduce_bytes": 1048576, "ranks": 2,
             "gemm_seconds": 0.00105, "loop_seconds": 0.00021, "all_reduce_seconds": 0.000095})"
      << model << 1.05 << 1.05 << 0.95 << false << "GEMM probe (256 x 256 -> 1024 fp32): 1.05 ms";
  QTest::addRow("slower network")
      << R"({"width": 256, "precision": "fp32", "all_reduce_bytes": 1048576, "ranks": 2,
             "gemm_seconds": 0.001, "loop_seconds": 0.0002, "all_reduce_seconds": 0.00019})"
      << model << 1.0 << 1.0 << 1.9 << true << "all-reduce probe (1.00 MiB over 2 ranks)";
  QTest::addRow("slower cache-line handover")
      << R"({"width": 256, "precision": "fp32", "all_reduce_bytes": 1048576, "ranks": 2,
             "gemm_seconds": 0.001, "loop_seconds": 0.00045, "all_reduce_seconds": 0.0001})"
      << model << 1.0 << 2.25 << 1.0 << true
      << "layer-norm backward probe (65.5 k elements): 450 µs, the model says 200 µs (-56 %, 1/2.2 "
         "of the measured)";
  QTest::addRow("slower GEMMs, one rank, no loop probed")
      << R"({"width": 256, "precision": "fp32", "all_reduce_bytes": 1048576, "ranks": 1,
             "gemm_seconds": 0.0013, "all_reduce_seconds": 0})"
      << R"({"width": 256, "precision": "fp32", "all_reduce_bytes": 1048576, "ranks": 1,
             "gemm_seconds": 0.001, "loop_seconds": 0.0002, "all_reduce_seconds": 0})"
      << 1.3 << 0.0 << 0.0 << true << "(-23 %)";
  QTest::addRow("no probe in the run")
      << "" << model << -1.0 << 0.0 << 0.0 << false << "the run recorded no machine probe";
  QTest::addRow("no probe in the prediction")
      << model << "" << -1.0 << 0.0 << 0.0 << false << "the prediction holds no machine probe";
  QTest::addRow("unreadable probe")
      << R"({"width": "wide", "precision": "fp32"})" << model << -1.0 << 0.0 << 0.0 << false
      << "meta machine_probe: /width: must be an integer";
  QTest::addRow("other shape")
      << R"({"width": 512, "precision": "fp32", "all_reduce_bytes": 1048576, "ranks": 2,
             "gemm_seconds": 0.001, "all_reduce_seconds": 0.0001})"
      << model << -1.0 << 0.0 << 0.0 << false << "not the same shape";
}

void TestTraceAnalysis::machineProbe() {
  QFETCH(QString, recorded);
  QFETCH(QString, predicted);
  QFETCH(double, gemm_ratio);
  QFETCH(double, loop_ratio);
  QFETCH(double, all_reduce_ratio);
  QFETCH(bool, drifted);
  QFETCH(QString, text);
  QTemporaryDir dir;
  Builder b(dir, "probe.cstrace");
  write_worked_example(b);
  if (!recorded.isEmpty()) b.writer->set_meta("machine_probe", recorded.toStdString());
  QString prediction = R"({"step_seconds": 3.5e-6)";
  if (!predicted.isEmpty()) prediction += R"(, "machine_probe": )" + predicted;
  b.writer->set_meta("predicted_step", (prediction + "}").toStdString());
  auto r = b.close();
  auto run = analyze_run(*r);
  QVERIFY2(run, run ? "" : run.message().c_str());
  QVERIFY(run->prediction);
  const PredictionComparison& p = *run->prediction;
  QCOMPARE(p.predicted_step_s, 3.5e-6);  // the rest of the comparison stands
  if (gemm_ratio < 0) {
    QVERIFY(!p.machine);
    QVERIFY2(QString::fromStdString(p.machine_note).contains(text), p.machine_note.c_str());
    return;
  }
  QVERIFY2(p.machine, p.machine_note.c_str());
  QVERIFY(std::abs(p.machine->gemm_ratio() - gemm_ratio) < 1e-9);
  QVERIFY(std::abs(p.machine->loop_ratio() - loop_ratio) < 1e-9);
  QVERIFY(std::abs(p.machine->all_reduce_ratio() - all_reduce_ratio) < 1e-9);
  QCOMPARE(p.machine->drifted(), drifted);
  QVERIFY2(QString::fromStdString(p.machine->text()).contains(text), p.machine->text().c_str());
}

// A run in fp32 against one in bf16: the GEMM kernels are renamed, so no
// kernel name is in both, but their kind is, and the comparison by kind says
// how GEMM time changed (per step) while attention stayed.
void TestTraceAnalysis::compareByOperationKind() {
  QTemporaryDir dir;
  auto write = [&](const char* name, const char* gemm, std::int64_t gemm_ns) {
    Builder b(dir, name);
    b.writer->add_rank({0, "node", "GPU", 1, 0, false});
    const LaneId stream = b.writer->add_lane(0, LaneKind::gpu_stream, "stream 7", 0);
    for (int step = 0; step < 2; ++step) {
      const std::int64_t t = step * 10'000;
      b.writer->add(StepMetrics{0, step, t, t + 10'000, 1.0, 100, 0});
      b.add(stream, EventKind::kernel, Category::compute, t + 100, t + 100 + gemm_ns, gemm);
      b.commit();
      b.add(stream, EventKind::kernel, Category::compute, t + 5000, t + 5000 + gemm_ns, gemm);
      b.commit();
      b.add(stream, EventKind::kernel, Category::compute, t + 8000, t + 9000, "flash_fwd_kernel");
      b.commit();
    }
    auto run = analyze_run(*b.close());
    if (!run) qFatal("%s", run.message().c_str());
    return std::move(run).value();
  };
  const RunAnalysis fp32 = write("fp32.db", "sm80_xmma_gemm_f32f32_tf32f32_f32_nn", 2000);
  const RunAnalysis bf16 = write("bf16.db", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn", 800);
  const RunComparison c = compare_runs(fp32, bf16);
  QVERIFY(c.per_step);
  // By name: two kernels, each in one run only.
  QCOMPARE(c.kernels.size(), std::size_t{3});
  // By kind: GEMM 4000 -> 1600 ns a step (two instances each), attention unchanged.
  QCOMPARE(c.operation_kinds.size(), std::size_t{2});
  const ComparedFigure& gemm = c.operation_kinds[0];
  QCOMPARE(QString::fromStdString(gemm.name), QStringLiteral("GEMM compute"));
  QCOMPARE(gemm.a_ns, 4000.0);
  QCOMPARE(gemm.b_ns, 1600.0);
  QCOMPARE(gemm.a_count, std::int64_t{4});
  QCOMPARE(gemm.b_count, std::int64_t{4});
  const ComparedFigure& attention = c.operation_kinds[1];
  QCOMPARE(QString::fromStdString(attention.name), QStringLiteral("attention compute"));
  QCOMPARE(attention.change_ns(), 0.0);
}

// Two runs whose steps are alike but whose warm-up before the first step
// is not (a kernel of 50 us in one, none in the other): per step, the parts
// are each step's own (the span 10 us, not the run's 60 us over 2 steps),
// and the warm-up kernel is in neither run's figures.
void TestTraceAnalysis::compareLeavesOutWhatIsOutsideTheSteps() {
  QTemporaryDir dir;
  auto write = [&](const char* name, bool warm_up) {
    Builder b(dir, name);
    b.writer->add_rank({0, "node", "GPU", 1, 0, false});
    const LaneId stream = b.writer->add_lane(0, LaneKind::gpu_stream, "stream 7", 0);
    if (warm_up) {
      b.add(stream, EventKind::kernel, Category::compute, 0, 50'000, "autotune_kernel");
      b.commit();
    }
    for (int step = 0; step < 2; ++step) {
      const std::int64_t t = 50'000 + step * 10'000;
      b.writer->add(StepMetrics{0, step, t, t + 10'000, 1.0, 100, 0});
      b.add(stream, EventKind::kernel, Category::compute, t, t + 8000, "gemm_kernel");
      b.commit();
      b.add(stream, EventKind::kernel, Category::compute, t + 9000, t + 10'000, "adam_kernel");
      b.commit();
    }
    return b.close();
  };
  const auto warm = write("warm.db", true);
  const auto cold = write("cold.db", false);
  auto c = compare_stores(*warm, *cold);
  QVERIFY2(c, c ? "" : c.message().c_str());
  QVERIFY(c->per_step);
  QCOMPARE(c->a_steps, 2);
  std::map<std::string, const ComparedFigure*> parts;
  for (const ComparedFigure& f : c->parts)
    parts[f.name] = &f;
  QCOMPARE(parts.at("device span")->a_ns, 10'000.0);
  QCOMPARE(parts.at("device span")->b_ns, 10'000.0);
  QCOMPARE(parts.at("compute")->a_ns, 9000.0);
  QCOMPARE(parts.at("idle")->a_ns, 1000.0);
  QCOMPARE(parts.at("idle")->change_ns(), 0.0);
  for (const ComparedFigure& k : c->kernels)
    QVERIFY2(k.name != "autotune_kernel", "the warm-up kernel counted in a step");
  QCOMPARE(c->kernels.size(), std::size_t{2});
}

// A rank that stopped after one step of two (a crash): per step, each rank
// counts the steps it ran. Divided by 2 ranks x 2 steps, the same kernels
// read 25 % shorter than in a run whose ranks both ran two.
void TestTraceAnalysis::compareCountsEachRanksOwnSteps() {
  QTemporaryDir dir;
  auto write = [&](const char* name, int second_rank_steps) {
    Builder b(dir, name);
    for (std::int32_t rank = 0; rank < 2; ++rank) {
      b.writer->add_rank({rank, "node", "GPU", rank, 0, false});
      const LaneId stream = b.writer->add_lane(rank, LaneKind::gpu_stream, "stream 7", 0);
      for (int step = 0; step < (rank == 0 ? 2 : second_rank_steps); ++step) {
        const std::int64_t t = step * 10'000;
        b.writer->add(StepMetrics{rank, step, t, t + 10'000, 1.0, 100, 0});
        b.add(stream, EventKind::kernel, Category::compute, t, t + 8000, "gemm_kernel");
        b.commit();
      }
    }
    auto run = analyze_run(*b.close());
    if (!run) qFatal("%s", run.message().c_str());
    return std::move(run).value();
  };
  const RunComparison c = compare_runs(write("short.db", 1), write("whole.db", 2));
  QVERIFY(c.per_step);
  QCOMPARE(c.kernels.size(), std::size_t{1});
  QCOMPARE(c.kernels[0].a_ns, 8000.0);
  QCOMPARE(c.kernels[0].b_ns, 8000.0);
}

QTEST_GUILESS_MAIN(TestTraceAnalysis)
// The table by the mean and the one by the median must not read as
// opposite verdicts unsaid: a run whose one slow step held the mean 53 %
// above the median read -34 % in the first and +0.8 % in the second.
void TestTraceAnalysis::meanAgainstMedian_data() {
  QTest::addColumn<double>("mean");
  QTest::addColumn<double>("median");
  QTest::addColumn<QString>("said");  // "" when nothing is said
  QTest::addRow("one slow step") << 2.68e-3 << 1.75e-3 << "53 % above rank 1's median";
  QTest::addRow("ranks differ") << 1.5e-3 << 2.0e-3 << "25 % below rank 1's median";
  QTest::addRow("within 10 %%") << 1.9e-3 << 1.75e-3 << "";
  QTest::addRow("no median") << 1.9e-3 << 0.0 << "";
}

void TestTraceAnalysis::meanAgainstMedian() {
  QFETCH(double, mean);
  QFETCH(double, median);
  QFETCH(QString, said);
  const QString note = QString::fromStdString(cs::trace::mean_against_median_note(mean, median, 1));
  if (said.isEmpty()) {
    QVERIFY2(note.isEmpty(), qPrintable(note));
  } else {
    QVERIFY2(note.contains(said) && note.contains("steadier"), qPrintable(note));
  }
}

void TestTraceAnalysis::modelErrorFactor_data() {
  QTest::addColumn<double>("predicted");
  QTest::addColumn<double>("measured");
  QTest::addColumn<QString>("factor");
  QTest::addRow("close") << 1.1 << 1.0 << "";
  QTest::addRow("just under twice") << 1.99 << 1.0 << "";
  QTest::addRow("twice") << 2.0 << 1.0 << "2.0× the measured";
  QTest::newRow("+900 %") << 10.0 << 1.0 << "10× the measured";
  QTest::addRow("just under 10") << 9.96 << 1.0 << "10× the measured";
  QTest::addRow("half") << 0.5 << 1.0 << "1/2.0 of the measured";
  QTest::newRow("-90 %") << 0.1 << 1.0 << "1/10 of the measured";
  QTest::addRow("nothing predicted") << 0.0 << 1.0 << "";
  QTest::addRow("nothing measured") << 1.0 << 0.0 << "";
}

void TestTraceAnalysis::bytesForPeople_data() {
  QTest::addColumn<double>("bytes");
  QTest::addColumn<QString>("text");
  QTest::addRow("bytes") << 512.0 << "512 B";
  QTest::addRow("GiB") << 79.6 * 1073741824.0 << "79.6 GiB";
  QTest::addRow("EiB") << 3.0 * 1152921504606846976.0 << "3.00 EiB";
  QTest::addRow("ZiB") << 2.0 * 1180591620717411303424.0 << "2.00 ZiB";
  // An impossible plan's memory read "500588261196 EiB".
  QTest::addRow("past YiB") << 5.77e32 << "4.77e+08 YiB";
}

// What the CLI and the app print for a size.
void TestTraceAnalysis::bytesForPeople() {
  QFETCH(double, bytes);
  QFETCH(QString, text);
  QCOMPARE(QString::fromStdString(cs::format_bytes(bytes)), text);
}

// Times and counts past any plan a machine runs (1e9 GPUs, a model of 1e6
// layers) read as a power of ten, not 34 digits ("3476111111111111242500796300918784 days").
void TestTraceAnalysis::timesAndCountsForPeople_data() {
  QTest::addColumn<bool>("seconds");
  QTest::addColumn<double>("value");
  QTest::addColumn<QString>("text");
  QTest::addRow("ms") << true << 0.0123 << "12.3 ms";
  QTest::addRow("days") << true << 86400.0 * 412 << "412 days";
  QTest::addRow("a million days") << true << 86400.0 * 3.48e33 << "3.48e+33 days";
  QTest::addRow("parameters") << false << 175e9 << "175 B";
  QTest::addRow("trillions") << false << 2.59e18 << "2.59e+06 T";
  QTest::addRow("small") << false << 50257.0 << "50.3 k";
}

void TestTraceAnalysis::timesAndCountsForPeople() {
  QFETCH(bool, seconds);
  QFETCH(double, value);
  QFETCH(QString, text);
  QCOMPARE(QString::fromStdString(seconds ? cs::format_seconds(value) : cs::format_count(value)),
           text);
}

// A percentage hides a factor past -50 % or +100 %: -90 % is a tenth.
void TestTraceAnalysis::modelErrorFactor() {
  QFETCH(double, predicted);
  QFETCH(double, measured);
  QFETCH(QString, factor);
  QCOMPARE(QString::fromStdString(cs::model_error_factor(predicted, measured)), factor);
}

// The step breakdown places each event in its steps through WindowIndex;
// it must find exactly what clipping the event to every step finds, for
// steps that follow, touch, overlap and nest, and events of any length.
namespace {

// The parts of one path, summed: "part" -> ns, and rank -> ns.
std::pair<std::map<std::string, std::int64_t>, std::map<std::int32_t, std::int64_t>> sums(
    const CriticalPath& path) {
  std::map<std::string, std::int64_t> parts;
  std::map<std::int32_t, std::int64_t> ranks;
  for (const CriticalSegment& s : path.segments) {
    parts[std::string(s.part)] += s.end_ns - s.start_ns;
    ranks[s.rank] += s.end_ns - s.start_ns;
  }
  return {parts, ranks};
}

// The segments run from the step's start to its end without a gap or an overlap.
bool covers(const CriticalPath& path) {
  std::int64_t t = path.start_ns;
  for (const CriticalSegment& s : path.segments) {
    if (s.start_ns != t || s.end_ns <= s.start_ns) return false;
    t = s.end_ns;
  }
  return t == path.end_ns;
}

}  // namespace

// Rank 0 reduces on its communication thread from 1000 and waits for it;
// rank 1 computes until 2500 and joins then. The path ends on rank 0 (its
// optimizer ends last), takes its reduction from 2500 only, and goes on
// through rank 1's compute: rank 0's waiting is not on it.
void TestTraceAnalysis::criticalPathGoesThroughTheLateRank() {
  QTemporaryDir dir;
  Builder b(dir, "late.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  w.add_rank({1, "node", "CPU", 2, 0, false});
  const LaneId c0 = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const LaneId m0 = w.add_lane(0, LaneKind::cpu_thread, "communication", 1);
  const LaneId c1 = w.add_lane(1, LaneKind::cpu_thread, "compute", 0);
  auto reduce = [&](LaneId lane, std::int64_t s, std::int64_t e) {
    Event& ev = b.add(lane, EventKind::collective, Category::communication, s, e, "dp all-reduce");
    ev.collective = Collective::all_reduce;
    ev.bytes = 4096;
    ev.group_size = 2;
    b.commit();
  };
  for (int step = 0; step < 3; ++step) {
    const std::int64_t s = 100'000 + step * 10'000;
    b.add(c0, EventKind::kernel, Category::compute, s, s + 1000, "mlp.fc");
    b.commit();
    reduce(m0, s + 1000, s + 3000);
    b.add(c0, EventKind::sync, Category::synchronization, s + 1500, s + 3000, "wait dp");
    b.commit();
    b.add(c0, EventKind::kernel, Category::compute, s + 3000, s + 3700, "adamw");
    b.commit();
    b.add(c1, EventKind::kernel, Category::compute, s, s + 2500, "mlp.fc");
    b.commit();
    reduce(c1, s + 2500, s + 3000);
    b.add(c1, EventKind::kernel, Category::compute, s + 3000, s + 3600, "adamw");
    b.commit();
    w.add(StepMetrics{0, step, s, s + 10'000, 1.0, 100, 0});
    w.add(StepMetrics{1, step, s, s + 10'000, 1.0, 100, 0});
  }
  auto r = b.close();
  auto paths = critical_paths(*r);
  QVERIFY2(paths, paths ? "" : paths.message().c_str());
  QCOMPARE(paths->size(), std::size_t{3});
  for (const CriticalPath& p : *paths) {
    QVERIFY(covers(p));
    const auto [parts, ranks] = sums(p);
    const std::map<std::string, std::int64_t> expected = {
        {"compute.gemm", 2500}, {"communication.dp", 500}, {"optimizer", 700}, {"idle", 6300}};
    QCOMPARE(parts, expected);
    QCOMPARE(ranks, (std::map<std::int32_t, std::int64_t>{{0, 7500}, {1, 2500}}));
    QCOMPARE(p.segments.front().rank, 1);
    QCOMPARE(r->string(p.segments.front().name), std::string("mlp.fc"));
    // Each operation's own lane, where the timeline draws the path; none for idle.
    QCOMPARE(p.segments.front().lane, c1);
    for (const CriticalSegment& seg : p.segments) {
      if (seg.part == "idle") QCOMPARE(seg.lane.value, 0u);
      if (seg.part == "communication.dp") QCOMPARE(seg.lane, m0);  // from when rank 1 joined
      if (seg.part == "optimizer") QCOMPARE(seg.lane, c0);
    }
  }
  // Steps asked for: only they.
  auto one = critical_paths(*r, std::pair{1, 1});
  QVERIFY(one);
  QCOMPARE(one->size(), std::size_t{1});
  QCOMPARE(one->front().step, 1);
  // The means leave the first step out as warm-up, when asked.
  const CriticalPathSummary sum = summarize_critical_paths(*paths, true);
  QCOMPARE(sum.steps, 2);
  QCOMPARE(sum.warm_up, 1);
  QCOMPARE(sum.step_ns, 10'000.0);
  QCOMPARE(sum.parts.front(), (std::pair<std::string_view, double>{"compute.gemm", 2500}));
  QCOMPARE(sum.parts.back(), (std::pair<std::string_view, double>{"idle", 6300}));
  QCOMPARE(r->string(sum.operations.front().name), std::string("mlp.fc"));
  QCOMPARE(sum.operations.front().count, std::int64_t{2});
  QCOMPARE(summarize_critical_paths(*paths, false).steps, 3);
}

// A pipeline: stage 1 receives from 0 while stage 0 still computes; the
// receive is on the path from the send's start, and stage 0's compute before it.
void TestTraceAnalysis::criticalPathGoesThroughTheSend() {
  QTemporaryDir dir;
  Builder b(dir, "pipe.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "CPU", 1, 0, false});
  w.add_rank({1, "node", "CPU", 2, 0, false});
  const LaneId c0 = w.add_lane(0, LaneKind::cpu_thread, "compute", 0);
  const LaneId c1 = w.add_lane(1, LaneKind::cpu_thread, "compute", 0);
  auto transfer = [&](LaneId lane, std::int64_t s, std::int64_t e, bool send, std::int32_t peer) {
    Event& ev =
        b.add(lane, EventKind::p2p, Category::communication, s, e, send ? "pp send" : "pp recv");
    ev.collective = send ? Collective::send : Collective::recv;
    ev.peer = peer;
    ev.bytes = 64;
    b.commit();
  };
  const std::int64_t s = 50'000;
  b.add(c0, EventKind::kernel, Category::compute, s, s + 1000, "mlp.fc");
  b.commit();
  transfer(c0, s + 1000, s + 1200, true, 1);
  transfer(c1, s, s + 1200, false, 0);
  b.add(c1, EventKind::kernel, Category::compute, s + 1200, s + 2000, "mlp.fc");
  b.commit();
  w.add(StepMetrics{0, 0, s, s + 1200, 1.0, 100, 0});
  w.add(StepMetrics{1, 0, s, s + 2000, 1.0, 100, 0});
  auto r = b.close();
  auto paths = critical_paths(*r);
  QVERIFY2(paths, paths ? "" : paths.message().c_str());
  QCOMPARE(paths->size(), std::size_t{1});
  const CriticalPath& p = paths->front();
  QVERIFY(covers(p));
  const auto [parts, ranks] = sums(p);
  QCOMPARE(parts, (std::map<std::string, std::int64_t>{{"compute.gemm", 1800},
                                                       {"communication.pp", 200}}));
  QCOMPARE(ranks, (std::map<std::int32_t, std::int64_t>{{0, 1000}, {1, 1000}}));
}

// A trace with no steps (an Nsight export) is one step: its first event's
// start to its last event's end.
void TestTraceAnalysis::criticalPathOfATraceWithoutSteps() {
  QTemporaryDir dir;
  Builder b(dir, "nosteps.cstrace");
  TraceWriter& w = *b.writer;
  w.add_rank({0, "node", "GPU", 1, 0, false});
  const LaneId stream = w.add_lane(0, LaneKind::gpu_stream, "stream 7", 0);
  b.add(stream, EventKind::memcpy, Category::memory, 1000, 1500, "Memcpy HtoD");
  b.commit();
  b.add(stream, EventKind::kernel, Category::compute, 1700, 2500, "saxpy");
  b.commit();
  auto r = b.close();
  auto paths = critical_paths(*r);
  QVERIFY2(paths, paths ? "" : paths.message().c_str());
  QCOMPARE(paths->size(), std::size_t{1});
  QVERIFY(covers(paths->front()));
  QCOMPARE(paths->front().start_ns, std::int64_t{1000});
  QCOMPARE(paths->front().end_ns, std::int64_t{2500});
  QCOMPARE(sums(paths->front()).first,
           (std::map<std::string, std::int64_t>{
               {"memory", 500}, {"idle", 200}, {"compute.elementwise", 800}}));
  // Steps asked of a trace that has none: no path.
  auto none = critical_paths(*r, std::pair{0, 0});
  QVERIFY(none && none->empty());
}

// The committed CPU-engine run (DP 2): each step's path covers it end to
// end, and every segment but idle lies inside an operation of that name on
// that rank. That run spent most of its steps in exposed all-reduces (`trace
// stats`: 60-69 % of the span), and so does its path.
void TestTraceAnalysis::criticalPathOfARealRunCoversEachStep() {
  QTemporaryDir dir;
  const QString path = dir.filePath("dp2.db");
  QVERIFY(QFile::copy(CS_DATA_DIR "/cpu/cpu-engine-dp2.db", path));
  QFile(path).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  auto r = TraceReader::open(path.toStdString());
  QVERIFY2(r, r ? "" : r.message().c_str());
  auto paths = critical_paths(**r);
  QVERIFY2(paths, paths ? "" : paths.message().c_str());
  auto windows = job_step_windows(**r);
  QVERIFY(windows);
  QCOMPARE(paths->size(), windows->size());
  QVERIFY(!paths->empty());
  std::map<std::pair<std::int32_t, std::string>, std::vector<std::pair<std::int64_t, std::int64_t>>>
      events;
  for (const LaneInfo& lane : (*r)->lanes()) {
    QVERIFY((*r)->for_each_event({lane.id}, 0, std::numeric_limits<std::int64_t>::max(),
                                 [&](const StoredEvent& e) {
                                   events[{e.rank, (*r)->string(e.event.name)}].emplace_back(
                                       e.event.start_ns, e.event.end_ns);
                                   return true;
                                 }));
  }
  int ranks_met = 0;
  for (const CriticalPath& p : *paths) {
    QVERIFY2(covers(p), qPrintable(QString("step %1").arg(p.step)));
    std::set<std::int32_t> ranks;
    for (const CriticalSegment& s : p.segments) {
      ranks.insert(s.rank);
      if (s.part == "idle") continue;
      const auto& of_name = events[{s.rank, (*r)->string(s.name)}];
      QVERIFY2(
          std::any_of(of_name.begin(), of_name.end(),
                      [&](const auto& e) { return e.first <= s.start_ns && s.end_ns <= e.second; }),
          qPrintable(QString("step %1: %2 on rank %3")
                         .arg(p.step)
                         .arg((*r)->string(s.name).c_str())
                         .arg(s.rank)));
    }
    ranks_met = std::max(ranks_met, static_cast<int>(ranks.size()));
  }
  QCOMPARE(ranks_met, 2);  // the path crosses from one rank to the other
  const CriticalPathSummary sum = summarize_critical_paths(*paths, true);
  double total = 0, reduction = 0;
  for (const auto& [part, ns] : sum.parts) {
    total += ns;
    if (part == "communication.dp") reduction = ns;
  }
  QVERIFY(std::abs(total - sum.step_ns) < 1.0);
  QVERIFY2(reduction > 0.4 * sum.step_ns && reduction < 0.8 * sum.step_ns,
           qPrintable(QString::number(reduction / sum.step_ns)));
}

void TestTraceAnalysis::windowIndexFindsWhatEveryWindowWould_data() {
  QTest::addColumn<int>("windows");
  QTest::addColumn<int>("longest");  // a window's longest length, ns
  QTest::addColumn<int>("gap");      // largest step between two starts, ns
  QTest::addRow("none") << 0 << 10 << 10;
  QTest::addRow("one") << 1 << 50 << 10;
  QTest::addRow("steps one after another") << 200 << 10 << 10;
  QTest::addRow("steps with gaps") << 200 << 10 << 30;
  QTest::addRow("overlapping steps") << 200 << 60 << 10;
  QTest::addRow("nested in a long one") << 200 << 2000 << 5;
  QTest::addRow("same start") << 50 << 40 << 0;
}

void TestTraceAnalysis::windowIndexFindsWhatEveryWindowWould() {
  using cs::trace::Interval;
  QFETCH(int, windows);
  QFETCH(int, longest);
  QFETCH(int, gap);
  std::mt19937_64 random(static_cast<std::uint64_t>(windows * 7919 + longest * 31 + gap));
  std::vector<Interval> steps;
  std::int64_t start = 0;
  for (int k = 0; k < windows; ++k) {
    start += gap ? static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(gap + 1)) : 0;
    const auto length =
        static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(longest)) + 1;
    steps.emplace_back(start, start + length);
  }
  const cs::trace::WindowIndex index(steps);
  const std::int64_t span = start + longest + 20;
  for (int n = 0; n < 5000; ++n) {
    const auto a = static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(span)) - 10;
    const auto length = static_cast<std::int64_t>(
        random() % 3 == 0 ? random() % static_cast<std::uint64_t>(span) : random() % 8);
    const Interval event{a, a + length};
    std::vector<std::pair<std::size_t, Interval>> found, expected;
    index.for_each_overlap(event,
                           [&](std::size_t k, const Interval& c) { found.emplace_back(k, c); });
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const Interval c = cs::trace::clip(event, steps[k]);
      if (c.second > c.first) expected.emplace_back(k, c);
    }
    QVERIFY2(found == expected, qPrintable(QString("event [%1, %2): %3 windows found, %4 overlap")
                                               .arg(event.first)
                                               .arg(event.second)
                                               .arg(found.size())
                                               .arg(expected.size())));
  }
}

namespace {

// A store of tests/data copied where it may be opened (an older one is
// upgraded in place).
std::unique_ptr<TraceReader> open_copy(const QTemporaryDir& dir, const QString& fixture) {
  const QString path = dir.filePath(QFileInfo(fixture).fileName());
  QFile::remove(path);
  if (!QFile::copy(QStringLiteral(CS_DATA_DIR "/") + fixture, path)) return nullptr;
  QFile(path).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  auto r = TraceReader::open(path.toStdString());
  return r ? std::move(r).value() : nullptr;
}

// Each operation with FLOPs by name, timed the slow way: on a GPU rank
// every compute kernel on a stream (not the engine's own) goes to the
// operation whose span holds the start of the call with its correlation
// id; elsewhere the operation's own duration. (count, time) by name, and
// the operations of a GPU rank no kernel went to.
struct Expected {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_name;
  // Of them, those that launched a CUTLASS or cuBLAS TF32 GEMM.
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> tf32_by_name;
  std::int64_t without_kernels = 0;
};
Expected expected_rates(const TraceReader& r) {
  Expected out;
  for (const RankInfo& rank : r.ranks()) {
    std::set<std::uint32_t> streams;
    for (const LaneInfo& l : r.lanes())
      if (l.rank == rank.rank && l.kind == LaneKind::gpu_stream) streams.insert(l.id.value);
    struct Op {
      std::string name;
      std::int64_t start, end, ns = 0;
      int kernels = 0, tf32 = 0, reductions = 0;
    };
    std::vector<Op> ops;
    std::map<std::int64_t, std::int64_t> call_start;
    std::vector<std::tuple<std::int64_t, std::int64_t, bool, bool>> kernels;
    (void)r.for_each_event(
        {}, std::numeric_limits<std::int64_t>::min() / 4,
        std::numeric_limits<std::int64_t>::max() / 4, [&](const StoredEvent& se) {
          if (se.rank != rank.rank) return true;
          const Event& e = se.event;
          const bool on_stream = streams.count(e.lane.value) > 0;
          if (e.kind == EventKind::api_call && e.correlation > 0 &&
              !call_start.count(e.correlation))
            call_start[e.correlation] = e.start_ns;
          if (on_stream && e.kind == EventKind::kernel && e.category == Category::compute &&
              e.correlation > 0 && r.string(e.name).find("cs::worker::") == std::string::npos)
            kernels.emplace_back(e.correlation, e.end_ns - e.start_ns,
                                 r.string(e.name).find("s1688gemm") != std::string::npos ||
                                     r.string(e.name).find("tf32") != std::string::npos,
                                 r.string(e.name).starts_with("void splitKreduce_kernel"));
          if (!on_stream && e.flops > 0) ops.push_back({r.string(e.name), e.start_ns, e.end_ns});
          return true;
        });
    for (const auto& [correlation, ns, tf32, reduction] : kernels) {
      auto call = call_start.find(correlation);
      if (call == call_start.end()) continue;
      Op* inner = nullptr;
      for (Op& op : ops)
        if (op.start <= call->second && call->second < op.end &&
            (!inner || op.start > inner->start))
          inner = &op;
      if (inner) {
        inner->ns += ns;
        ++inner->kernels;
        inner->tf32 += tf32;
        inner->reductions += reduction;
      }
    }
    for (const Op& op : ops) {
      if (!streams.empty() && op.kernels == op.reductions) {
        ++out.without_kernels;
        continue;
      }
      auto& [count, ns] = out.by_name[op.name];
      ++count;
      ns += streams.empty() ? op.end - op.start : op.ns;
      if (op.tf32 > 0) {
        auto& [tf32_count, tf32_ns] = out.tf32_by_name[op.name];
        ++tf32_count;
        tf32_ns += op.ns;
      }
    }
  }
  return out;
}

const GemmRate* row_named(const GemmRates& g, const std::string& name) {
  for (const GemmRate& row : g.rows)
    if (row.name == name) return &row;
  return nullptr;
}

}  // namespace

// The real stores: the committed CPU-engine run (each op's own duration,
// no peak), the GPU check's CUDA-engine runs on an H200 (each GEMM range by
// its kernels, against the H200's datasheet: 989.4 TFLOP/s dense bf16,
// 66.9 fp32). Every row as the slow attribution above finds it, and one row
// checked to the nanosecond (SQL over the same store gave the same sums).
void TestTraceAnalysis::gemmRatesOfRealStores_data() {
  QTest::addColumn<QString>("fixture");
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("precision");
  QTest::addColumn<qint64>("count");
  QTest::addColumn<double>("flops");
  QTest::addColumn<qint64>("time_ns");
  QTest::addColumn<bool>("kernel_time");
  QTest::addColumn<double>("peak");  // 0: none
  QTest::addRow("CPU engine, DP 2")
      << "cpu/cpu-engine-dp2.db"
      << "mlp.fc wgrad"
      << "fp32" << qint64{20} << 1006632960.0 << qint64{34407232} << false << 0.0;
  QTest::addRow("H200, bf16 run") << "gpu/worker-bf16.db"
                                  << "gemm mlp.fc"
                                  << "bf16" << qint64{144} << 5566277615616.0 << qint64{7819898}
                                  << true << 989.4e12;
  QTest::addRow("H200, bf16 attention")
      << "gpu/worker-bf16.db"
      << "gemm attention"
      << "bf16" << qint64{144} << 3710851743744.0 << qint64{25106137} << true << 989.4e12;
  // An fp8 run: its FP8 GEMMs against the FP8 peak, its attention's (no
  // type recorded) in its storage type, BF16.
  QTest::addRow("H200, fp8 run") << "gpu/worker-fp8.db"
                                 << "gemm mlp.fc"
                                 << "fp8" << qint64{144} << 5566277615616.0 << qint64{5420559}
                                 << true << 1978.9e12;
  QTest::addRow("H200, fp8 run's attention")
      << "gpu/worker-fp8.db"
      << "gemm attention"
      << "bf16" << qint64{144} << 3710851743744.0 << qint64{25223746} << true << 989.4e12;
  QTest::addRow("H200, fp32 run") << "gpu/worker-fp32.db"
                                  << "gemm mlp.fc"
                                  << "fp32" << qint64{144} << 5566277615616.0 << qint64{112935662}
                                  << true << 66.9e12;
}

void TestTraceAnalysis::gemmRatesOfRealStores() {
  QFETCH(QString, fixture);
  QFETCH(QString, name);
  QFETCH(QString, precision);
  QFETCH(qint64, count);
  QFETCH(double, flops);
  QFETCH(qint64, time_ns);
  QFETCH(bool, kernel_time);
  QFETCH(double, peak);
  auto presets = cs::PresetCatalog::load_default();
  QVERIFY2(presets, presets ? "" : presets.message().c_str());
  QTemporaryDir dir;
  const auto r = open_copy(dir, fixture);
  QVERIFY(r);
  auto g = gemm_rates(*r, std::nullopt, &*presets);
  QVERIFY2(g, g ? "" : g.message().c_str());
  const GemmRate* row = row_named(*g, name.toStdString());
  QVERIFY(row);
  QCOMPARE(QString::fromStdString(row->precision), precision);
  QCOMPARE(row->count, count);
  QCOMPARE(row->flops, flops);
  QCOMPARE(row->time_ns, time_ns);
  QCOMPARE(row->kernel_time, kernel_time);
  QCOMPARE(row->peak_flops, peak);
  const double rate = flops / (static_cast<double>(time_ns) * 1e-9);
  QCOMPARE(row->flops_per_second(), rate);
  if (peak > 0) {
    QVERIFY(row->percent_of_peak());
    QCOMPARE(*row->percent_of_peak(), 100 * rate / peak);
  } else {
    QVERIFY(!row->percent_of_peak());
  }
  // Every row, as the slow way finds it; the shares add up to the whole.
  const Expected expected = expected_rates(*r);
  QCOMPARE(g->without_kernels, expected.without_kernels);
  QCOMPARE(g->rows.size(), expected.by_name.size());
  QVERIFY(expected.tf32_by_name.empty());  // cuBLAS ran the engine's GEMMs in their own type
  QCOMPARE(g->tf32_by_kernels, std::int64_t{0});
  double shares = 0;
  for (const GemmRate& each : g->rows) {
    const auto& [n, ns] = expected.by_name.at(each.name);
    QCOMPARE(each.count, n);
    QCOMPARE(each.time_ns, ns);
    shares += each.share;
  }
  QVERIFY(std::abs(shares - 1) < 1e-9);
  for (std::size_t i = 1; i < g->rows.size(); ++i)
    QVERIFY(g->rows[i - 1].time_ns >= g->rows[i].time_ns);
  // The same table is what the run's analysis holds.
  AnalysisOptions options;
  options.presets = &*presets;
  options.threads = 1;
  auto a = analyze_run(*r, options);
  QVERIFY2(a, a ? "" : a.message().c_str());
  QVERIFY(!a->gemms);  // asked for only: a pass of its own
  options.gemm_rates = true;
  a = analyze_run(*r, options);
  QVERIFY2(a, a ? "" : a.message().c_str());
  QCOMPARE(a->gemms->rows.size(), g->rows.size());
  QCOMPARE(a->gemms->rows.front().time_ns, g->rows.front().time_ns);
}

// A PyTorch profile (HTA's sampled trace, recorded with shapes): its
// aten::mm, addmm and bmm timed by the kernels each launched, those
// without a GEMM kernel recorded left out and counted. Its device ("GPU 0")
// is no preset's: no peak.
void TestTraceAnalysis::gemmRatesOfAPyTorchTrace() {
  QTemporaryDir dir;
  const std::string store = dir.filePath("sampled.db").toStdString();
  auto imported = import_traces({CS_DATA_DIR "/validation/kineto/sampled_rank-0.json.gz"}, store);
  QVERIFY2(imported, imported ? "" : imported.message().c_str());
  auto r = TraceReader::open(store);
  QVERIFY(r);
  auto presets = cs::PresetCatalog::load_default();
  QVERIFY(presets);
  auto g = gemm_rates(**r, std::nullopt, &*presets);
  QVERIFY2(g, g ? "" : g.message().c_str());
  // One aten::mm launched no kernel the trace kept, six only cuBLAS's
  // split-K reduction (the trace lost their GEMM kernels, which ran first):
  // timed by it, they read up to 60 TFLOP/s in FP32. Left out, and counted.
  QCOMPARE(g->without_kernels, std::int64_t{7});
  // Each operator, all precisions together.
  const std::map<std::string, std::pair<std::int64_t, std::int64_t>> want = {
      {"aten::mm", {224, 40883000}},
      {"aten::bmm", {40, 17882000}},
      {"aten::addmm", {107, 9155000}}};
  // Its fp32 matmuls ran on TF32 tensor cores (CUTLASS's s1688gemm
  // kernels) or on the FP32 pipes (ampere_sgemm, gemmk1): rated apart.
  const Expected expected = expected_rates(**r);
  QCOMPARE(expected.without_kernels, std::int64_t{7});
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_operator;
  std::int64_t tf32_ops = 0;
  for (const GemmRate& row : g->rows) {
    QVERIFY(row.kernel_time);
    QVERIFY(!row.percent_of_peak());
    by_operator[row.name].first += row.count;
    by_operator[row.name].second += row.time_ns;
    const auto tf32 = expected.tf32_by_name.count(row.name)
                          ? expected.tf32_by_name.at(row.name)
                          : std::pair<std::int64_t, std::int64_t>{0, 0};
    if (row.precision == "tf32") {
      QCOMPARE(std::make_pair(row.count, row.time_ns), tf32);
      tf32_ops += row.count;
    } else {
      QCOMPARE(row.precision, std::string("fp32"));
      const auto& [count, ns] = expected.by_name.at(row.name);
      QCOMPARE(std::make_pair(row.count, row.time_ns),
               std::make_pair(count - tf32.first, ns - tf32.second));
    }
  }
  QCOMPARE(by_operator, want);
  QCOMPARE(g->tf32_by_kernels, tf32_ops);
  QVERIFY2(tf32_ops > 100 && tf32_ops < 377, qPrintable(QString::number(tf32_ops)));
  const auto notes = gemm_rates_notes(*g);
  QVERIFY(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n ==
           "7 operations with FLOPs on a GPU rank launched no recorded kernel (or only "
           "cuBLAS's split-K reduction, its GEMM's lost): no GPU time, left out";
  }));
  const std::string tf32_note =
      std::to_string(tf32_ops) + " fp32 operations ran on TF32 tensor cores";
  QVERIFY(std::any_of(notes.begin(), notes.end(),
                      [&](const std::string& n) { return n.starts_with(tf32_note); }));
  // A window holds the operations that count in it.
  const TimeRange all = (*r)->time_range();
  auto none = gemm_rates(**r, TimeRange{all.start_ns - 10, all.start_ns - 5}, &*presets);
  QVERIFY(none && none->rows.empty() && none->without_kernels == 0);
}

// Which kernels computed an fp32 GEMM on TF32 tensor cores, by name: the
// names of real traces (HTA's A100 profile, cuBLAS on Ampere and Hopper).
void TestTraceAnalysis::tf32KernelNames_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<bool>("tf32");
  QTest::newRow("CUTLASS, float operands")
      << "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>("
         "cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)"
      << true;
  QTest::newRow("CUTLASS, tf32 operands")
      << "cutlass_80_tensorop_s1688tf32gemm_256x128_16x3_nn_align4" << true;
  QTest::newRow("cuBLAS xmma") << "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_stage6"
                               << true;
  QTest::newRow("CUTLASS, FP32 from three TF32 passes")
      << "cutlass_80_tensorop_s1688gemm_3xtf32_fast_128x128_16x4_nt_align4" << false;
  QTest::newRow("CUTLASS, half operands (Turing)")
      << "cutlass_75_tensorop_s1688gemm_f16_256x128_32x2_nt_align8" << false;
  QTest::newRow("cuBLAS SIMT") << "ampere_sgemm_128x64_nn" << false;
  QTest::newRow("cuBLAS gemv") << "void gemmk1_kernel<float, 256, 5, false, false, false, false>"
                               << false;
  QTest::newRow("cuBLAS bf16") << "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
                               << false;
}

void TestTraceAnalysis::tf32KernelNames() {
  QFETCH(QString, name);
  QFETCH(bool, tf32);
  QCOMPARE(cs::trace::tf32_kernel(name.toStdString()), tf32);
}

// Each operation with FLOPs timed alone (the run view's details): its
// kernels found from its own calls on, each operation as the table times
// it, so that all of them add up to the table's row (the figures above)
// and those that launched no recorded kernel are the table's left out.
void TestTraceAnalysis::gemmRateOfEachOperation_data() {
  QTest::addColumn<QString>("fixture");
  QTest::addColumn<QString>("name");
  QTest::addColumn<qint64>("count");
  QTest::addColumn<qint64>("time_ns");
  QTest::addColumn<qint64>("without_kernels");
  QTest::addColumn<bool>("kernel_time");
  QTest::addColumn<double>("peak");
  QTest::addRow("CPU engine, DP 2")
      << "cpu/cpu-engine-dp2.db"
      << "mlp.fc wgrad" << qint64{20} << qint64{34407232} << qint64{0} << false << 0.0;
  QTest::addRow("H200, bf16 run") << "gpu/worker-bf16.db"
                                  << "gemm mlp.fc" << qint64{144} << qint64{7819898} << qint64{0}
                                  << true << 989.4e12;
  QTest::addRow("H200, fp8 run's attention")
      << "gpu/worker-fp8.db"
      << "gemm attention" << qint64{144} << qint64{25223746} << qint64{0} << true << 989.4e12;
  QTest::addRow("PyTorch profile")
      << "validation/kineto/sampled_rank-0.json.gz"
      << "aten::mm" << qint64{224} << qint64{40883000} << qint64{7} << true << 0.0;
}

void TestTraceAnalysis::gemmRateOfEachOperation() {
  QFETCH(QString, fixture);
  QFETCH(QString, name);
  QFETCH(qint64, count);
  QFETCH(qint64, time_ns);
  QFETCH(qint64, without_kernels);
  QFETCH(bool, kernel_time);
  QFETCH(double, peak);
  auto presets = cs::PresetCatalog::load_default();
  QVERIFY(presets);
  QTemporaryDir dir;
  std::unique_ptr<TraceReader> r;
  if (fixture.endsWith(".json.gz")) {
    const std::string store = dir.filePath("imported.db").toStdString();
    auto imported =
        import_traces({(QStringLiteral(CS_DATA_DIR "/") + fixture).toStdString()}, store);
    QVERIFY2(imported, imported ? "" : imported.message().c_str());
    auto opened = TraceReader::open(store);
    QVERIFY(opened);
    r = std::move(opened).value();
  } else {
    r = open_copy(dir, fixture);
  }
  QVERIFY(r);
  auto ops = r->find_events(name.toStdString(), NameMatch::exact, 100000);
  QVERIFY2(ops, ops ? "" : ops.message().c_str());
  qint64 timed = 0, time = 0, without = 0;
  for (const StoredEvent& op : *ops) {
    auto one = gemm_rate_of(*r, op, &*presets);
    QVERIFY2(one, one ? "" : one.message().c_str());
    QCOMPARE(one->rate.name, name.toStdString());
    QCOMPARE(one->rate.kernel_time, kernel_time);
    QCOMPARE(one->rate.peak_flops, peak);
    QCOMPARE(one->rate.flops, op.event.flops);
    QVERIFY(one->rate.count == 0 || one->rate.count == 1);
    QVERIFY(one->rate.count == 1 || kernel_time);
    if (!kernel_time) QCOMPARE(one->rate.time_ns, op.event.duration_ns());
    timed += one->rate.count;
    time += one->rate.time_ns;
    without += one->rate.count == 0;
  }
  QCOMPARE(timed, count);
  QCOMPARE(time, time_ns);
  QCOMPARE(without, without_kernels);
}

// A GPU run with no operation that carries FLOPs (a profiled PyTorch DDP
// program, recorded without shapes): no rows, one line that says why. And
// without presets the H200's rates stand, with no percentage of peak.
void TestTraceAnalysis::gemmRatesWithoutFlopsOrPresets() {
  QTemporaryDir dir;
  const auto ddp = open_copy(dir, "gpu/torch-ddp.db");
  QVERIFY(ddp);
  auto g = gemm_rates(*ddp, std::nullopt, nullptr);
  QVERIFY(g);
  QVERIFY(g->rows.empty());
  QCOMPARE(g->without_kernels, std::int64_t{0});
  QVERIFY(gemm_rates_absent(*g).starts_with("No operation carries FLOPs"));
  const auto bf16 = open_copy(dir, "gpu/worker-bf16.db");
  QVERIFY(bf16);
  auto bare = gemm_rates(*bf16, std::nullopt, nullptr);
  QVERIFY(bare && !bare->rows.empty());
  for (const GemmRate& row : bare->rows) {
    QVERIFY(!row.percent_of_peak());
    QVERIFY(row.gpu.empty());
  }
  QCOMPARE(gemm_rates_notes(*bare),
           std::vector<std::string>{"no % of peak: no GPU presets were read"});
}

#include "tst_trace_analysis.moc"
