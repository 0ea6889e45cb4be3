// What the GPU check measured on a real GPU (tests/data/gpu: an NVIDIA H200,
// CUDA 13.0, the CUDA engine traced by CUPTI), read here without a GPU: the
// kernels and their launches, streams, GEMM rates against the sweep, the
// summary's figures, and CUPTI's raw buffers of that run replayed through the
// decoder again.

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <map>
#include <set>

#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "profiler/cupti/replay_source.h"
#include "profiler/cupti/tracer.h"

using namespace cs;

namespace {

const QString kGpuDir = CS_DATA_DIR "/gpu";

// A copy in a temporary folder: opening a store must never touch the committed one.
std::unique_ptr<trace::TraceReader> open_copy(const QTemporaryDir& dir, const QString& name) {
  const QString copy = dir.filePath(name);
  QFile::remove(copy);
  if (!QFile::copy(kGpuDir + "/" + name, copy)) qFatal("cannot copy %s", qPrintable(name));
  QFile(copy).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
  auto reader = trace::TraceReader::open(copy.toStdString());
  if (!reader) qFatal("%s", reader.message().c_str());
  return std::move(reader).value();
}

QJsonObject summary() {
  QFile f(kGpuDir + "/summary.json");
  if (!f.open(QIODevice::ReadOnly)) qFatal("no summary.json");
  return QJsonDocument::fromJson(f.readAll()).object();
}

std::vector<trace::StoredEvent> all_events(const trace::TraceReader& r) {
  std::vector<trace::StoredEvent> out;
  const trace::TimeRange range = r.time_range();
  (void)r.for_each_event({}, range.start_ns, range.end_ns + 1, [&](const trace::StoredEvent& e) {
    out.push_back(e);
    return true;
  });
  return out;
}

}  // namespace

class TestGpuTraces : public QObject {
  Q_OBJECT

 private slots:
  void stores_data();
  void kernelsHaveTheirLaunches();
  void kernelsHaveTheirLaunches_data() { stores_data(); }
  void streamsAreOrdered();
  void streamsAreOrdered_data() { stores_data(); }
  void hostRunsAheadOfTheStream();
  void hostRunsAheadOfTheStream_data() { stores_data(); }
  void gemmRatesMatchTheSweep();
  void copiesAndSetsRunAtMemorySpeeds();
  void lossFallsAndStepsAreRecorded();
  void summaryFigures();
  void replayedBuffersDecodeToTheSameKernels();
  void ncclKernelsAreCommunication();
  void attentionKernelsCountAsAttention();
  void attentionKernelsCountAsAttention_data() { stores_data(); }
};

void TestGpuTraces::stores_data() {
  QTest::addColumn<QString>("store");
  for (const char* s : {"worker-bf16.db", "worker-fp32.db", "worker-fp8.db"}) QTest::addRow("%s", s) << s;
}

// Every kernel is tied to the runtime or driver call that launched it.
void TestGpuTraces::kernelsHaveTheirLaunches() {
  QFETCH(QString, store);
  QTemporaryDir dir;
  auto r = open_copy(dir, store);
  QCOMPARE(QString::fromStdString(r->run().source), QString("cuda-engine"));
  QVERIFY(!r->ranks().empty());
  QVERIFY2(r->ranks().front().device.find("H200") != std::string::npos, r->ranks().front().device.c_str());

  std::set<std::int64_t> launches;
  std::vector<trace::StoredEvent> kernels;
  for (const auto& e : all_events(*r)) {
    if (e.event.kind == trace::EventKind::api_call) launches.insert(e.event.correlation);
    if (e.event.kind == trace::EventKind::kernel) kernels.push_back(e);
  }
  QVERIFY2(kernels.size() > 5000, qPrintable(QString::number(kernels.size())));
  int unresolved = 0;
  for (const auto& k : kernels) {
    QVERIFY(k.event.correlation != 0);
    if (!launches.count(k.event.correlation)) ++unresolved;
    QCOMPARE(k.event.category, trace::Category::compute);  // one GPU: no NCCL kernels in these runs
  }
  QCOMPARE(unresolved, 0);
}

// One CUDA stream runs its kernels one after another: start times never go
// back. On Hopper a kernel may start a little before its predecessor ends
// (programmatic dependent launch: cuBLASLt's split-K reduce starts ~0.1 us
// before its GEMM ends, seen in these traces), so overlaps are allowed only
// that small and that rare.
void TestGpuTraces::streamsAreOrdered() {
  QFETCH(QString, store);
  QTemporaryDir dir;
  auto r = open_copy(dir, store);
  int streams = 0;
  for (const trace::LaneInfo& lane : r->lanes()) {
    if (lane.kind != trace::LaneKind::gpu_stream) continue;
    ++streams;
    std::int64_t previous_end = 0;
    std::int64_t previous_start = 0;
    int kernels = 0;
    int overlaps = 0;
    (void)r->for_each_event({lane.id}, lane.first_ns, lane.last_ns + 1, [&](const trace::StoredEvent& e) {
      if (e.event.kind != trace::EventKind::kernel) return true;
      ++kernels;
      if (e.event.end_ns <= e.event.start_ns) qFatal("kernel with no duration");
      if (e.event.start_ns < previous_start) qFatal("kernels out of order on %s", lane.name.c_str());
      if (e.event.start_ns < previous_end) {
        ++overlaps;
        if (previous_end - e.event.start_ns > 1000) qFatal("kernels overlap by over 1 us on %s", lane.name.c_str());
      }
      previous_start = e.event.start_ns;
      previous_end = e.event.end_ns;
      return true;
    });
    QVERIFY(kernels > 0);
    QVERIFY2(overlaps * 100 < kernels, qPrintable(QString("%1 overlaps in %2 kernels").arg(overlaps).arg(kernels)));
  }
  QVERIFY(streams >= 1);
}

// Each stream's idle time and queue (HTA's): every operation on it was
// launched by a call, its idle and busy time make up its span, and the
// engine's host, launching asynchronously, runs ahead of the GPU: kernels
// queue on the stream (310 at most in the bf16 run).
void TestGpuTraces::hostRunsAheadOfTheStream() {
  QFETCH(QString, store);
  QTemporaryDir dir;
  auto r = open_copy(dir, store);
  auto a = trace::analyze_rank(*r, r->ranks().front().rank);
  QVERIFY2(a, a ? "" : a.message().c_str());
  QVERIFY(!a->streams.empty());
  for (const trace::StreamIdle& s : a->streams) {
    QCOMPARE(s.launched, s.events);
    QCOMPARE(s.busy_ns + s.idle_ns(), s.span_ns);
    QVERIFY2(s.queue_max >= 10 && s.queue_mean > 1,
             qPrintable(QString("%1: queue at most %2, %3 on average")
                            .arg(QString::fromStdString(s.name))
                            .arg(s.queue_max)
                            .arg(s.queue_mean)));
  }
}

// The GEMMs of a training step, timed on the GPU through their kernels, run
// at rates the sweep of the same GPU bounds.
void TestGpuTraces::gemmRatesMatchTheSweep() {
  QTemporaryDir dir;
  auto r = open_copy(dir, "worker-bf16.db");
  const double best = summary()["gemm"].toObject()["bf16"].toObject()["best_tflops"].toDouble();
  QVERIFY(best > 500);

  std::vector<trace::StoredEvent> events = all_events(*r);
  std::map<std::int64_t, const trace::StoredEvent*> kernel_of;  // correlation -> kernel
  std::vector<const trace::StoredEvent*> launches;
  for (const auto& e : events) {
    if (e.event.kind == trace::EventKind::kernel) kernel_of[e.event.correlation] = &e;
    if (e.event.kind == trace::EventKind::api_call) launches.push_back(&e);
  }
  std::sort(launches.begin(), launches.end(),
            [](auto* a, auto* b) { return a->event.start_ns < b->event.start_ns; });
  int measured = 0;
  double fastest = 0;
  for (const auto& op : events) {
    if (op.event.kind != trace::EventKind::cpu_op || op.event.flops < 30e9) continue;  // the big GEMMs
    // The kernels the op launched: launches inside its host interval.
    auto first = std::lower_bound(launches.begin(), launches.end(), op.event.start_ns,
                                  [](auto* e, std::int64_t t) { return e->event.start_ns < t; });
    std::int64_t gpu_ns = 0;
    for (auto it = first; it != launches.end() && (*it)->event.start_ns < op.event.end_ns; ++it) {
      auto k = kernel_of.find((*it)->event.correlation);
      if (k != kernel_of.end()) gpu_ns += k->second->event.duration_ns();
    }
    if (gpu_ns == 0) continue;
    const double tflops = op.event.flops / (gpu_ns * 1e-9) / 1e12;
    fastest = std::max(fastest, tflops);
    QVERIFY2(tflops < best * 1.15, qPrintable(QString("%1: %2 TFLOP/s, above the sweep's %3")
                                                 .arg(QString::fromStdString(r->string(op.event.name)))
                                                 .arg(tflops).arg(best)));
    ++measured;
  }
  QVERIFY2(measured > 100, qPrintable(QString::number(measured)));
  QVERIFY2(fastest > 0.4 * best, qPrintable(QString("fastest %1 vs sweep %2").arg(fastest).arg(best)));
  qInfo("%d GEMMs measured through their kernels; fastest %.0f TFLOP/s, sweep best %.0f", measured,
        fastest, best);
}

// The copies and sets CUPTI recorded, with their bytes: the run's table
// (Nsight Systems' cuda_gpu_mem_size_sum) holds what the store's events hold,
// and their bytes over their time give rates a real H200 reaches: the large
// sets and the device copy near its memory's (4.8 TB/s on the datasheet,
// 2.7-2.8 TB/s in the check's copy sweep), the host's copies far below.
void TestGpuTraces::copiesAndSetsRunAtMemorySpeeds() {
  QTemporaryDir dir;
  auto r = open_copy(dir, "worker-bf16.db");
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_name;  // count, bytes
  for (const auto& e : all_events(*r)) {
    if (e.event.kind != trace::EventKind::memcpy && e.event.kind != trace::EventKind::memset)
      continue;
    auto& [count, bytes] = by_name[r->string(e.event.name)];
    ++count;
    bytes += e.event.bytes;
  }
  auto a = trace::analyze_run(*r);
  QVERIFY2(a, a ? "" : a.message().c_str());
  QCOMPARE(a->memory_ops.size(), by_name.size());
  std::map<std::string, double> rate;
  for (const trace::MemoryOpStats& m : a->memory_ops) {
    QCOMPARE(m.time.count, by_name[m.time.name].first);
    QCOMPARE(m.total_bytes, by_name[m.time.name].second);
    rate[m.time.name] = m.throughput_gbps;
  }
  QVERIFY2(rate["Memset"] > 1000 && rate["Memset"] < 4800,
           qPrintable(QString::number(rate["Memset"])));
  QVERIFY2(rate["Memcpy DtoD"] > 1000 && rate["Memcpy DtoD"] < 4800,
           qPrintable(QString::number(rate["Memcpy DtoD"])));
  QVERIFY2(rate["Memcpy HtoD"] > 1 && rate["Memcpy HtoD"] < 100,
           qPrintable(QString::number(rate["Memcpy HtoD"])));
  // The engine's NVTX ranges, by name: each step's forward, and a layer's
  // GEMMs once per layer and step.
  std::map<std::string, std::int64_t> ranges;
  for (const trace::KernelStats& k : a->annotations)
    ranges[k.name] = k.count;
  QCOMPARE(ranges["forward 0"], std::int64_t(12));
  QCOMPARE(ranges["attn.qkv"], std::int64_t(144));
}

void TestGpuTraces::lossFallsAndStepsAreRecorded() {
  QTemporaryDir dir;
  auto r = open_copy(dir, "worker-bf16.db");
  auto steps = r->steps();
  QVERIFY(steps.ok());
  QCOMPARE(static_cast<int>(steps->size()), 12);
  QVERIFY(steps->back().loss < steps->front().loss - 0.5);
  for (const auto& s : *steps) QVERIFY(s.end_ns > s.start_ns);
}

void TestGpuTraces::summaryFigures() {
  const QJsonObject s = summary();
  QVERIFY(s["gpus"].toArray()[0].toObject()["name"].toString().contains("H200"));
  const QJsonObject gemm = s["gemm"].toObject();
  for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) {
    const double fraction = gemm[p].toObject()["fraction_of_peak"].toDouble();
    QVERIFY2(fraction > 0.6 && fraction <= 1.0, qPrintable(QString("%1: %2").arg(p).arg(fraction)));
  }
  const double overhead = s["tracer_overhead"].toObject()["overhead_fraction"].toDouble();
  QVERIFY2(overhead > -0.05 && overhead < 0.10, qPrintable(QString::number(overhead)));
  // Known gap, kept visible: no FP8 GEMM ran in FP8 on this run (cuBLASLt
  // refused every shape; the engine fell back to BF16 and said so).
  QVERIFY(gemm["fp8"].toObject()["fraction_of_peak"].toDouble() < 0.5);
}

// CUPTI's own buffers of the bf16 run, replayed through the decoder here,
// give the kernels the run's store holds.
void TestGpuTraces::replayedBuffersDecodeToTheSameKernels() {
  QTemporaryDir dir;
  auto source = profiler::open_replay_source((kGpuDir + "/cupti-bf16.replay").toStdString());
  QVERIFY2(source.ok(), source.ok() ? "" : source.message().c_str());
  const std::string path = dir.filePath("replayed.db").toStdString();
  auto writer = trace::TraceWriter::create(path, {"replay", "cupti", 0, "CLOCK_REALTIME"});
  QVERIFY(writer.ok());
  profiler::TracerOptions options;
  options.rank.device = "replay";
  options.memory_sample_period = std::chrono::milliseconds(0);
  auto tracer = profiler::Tracer::start(std::move(source).value(), **writer, options);
  QVERIFY2(tracer.ok(), tracer.ok() ? "" : tracer.message().c_str());
  const profiler::TracerReport report = (*tracer)->finalize();
  tracer->reset();
  QVERIFY((*writer)->close().ok());

  auto original = open_copy(dir, "worker-bf16.db");
  std::int64_t kernels = 0;
  for (const auto& e : all_events(*original)) kernels += e.event.kind == trace::EventKind::kernel;
  QCOMPARE(static_cast<std::int64_t>(report.counts.kernels), kernels);
  QCOMPARE(report.dropped_records, std::uint64_t{0});
}

void TestGpuTraces::ncclKernelsAreCommunication() {
  QSKIP("The committed GPU check ran on one GPU with the worker at dp = 1, and its PyTorch "
        "program step had no `clusterscope profile` yet: no NCCL kernel was recorded. "
        "The next GPU check records them (scripts/gpu-check.sh).");
}


// The worker's attention runs cuBLAS batched GEMMs (Q.K^T, P.V) inside its
// "gemm attention" ranges; their kernels are named for cuBLAS only. The
// measured parts count them as attention, as the planner does, not as GEMMs.
void TestGpuTraces::attentionKernelsCountAsAttention() {
  QFETCH(QString, store);
  QTemporaryDir dir;
  auto r = open_copy(dir, store);
  const std::vector<trace::StoredEvent> events = all_events(*r);
  std::vector<std::pair<std::int64_t, std::int64_t>> attention_ops, steps;
  std::map<std::int64_t, std::int64_t> launch;  // correlation -> API call start
  for (const trace::StoredEvent& e : events) {
    const std::string& name = r->string(e.event.name);
    if (e.event.kind == trace::EventKind::cpu_op && name.starts_with("gemm attention"))
      attention_ops.emplace_back(e.event.start_ns, e.event.end_ns);
    if (e.event.kind == trace::EventKind::api_call && e.event.correlation > 0)
      launch[e.event.correlation] = e.event.start_ns;
    if (e.event.kind == trace::EventKind::step) steps.emplace_back(e.event.start_ns, e.event.end_ns);
  }
  QVERIFY(!attention_ops.empty());
  std::sort(steps.begin(), steps.end());
  QVERIFY(steps.size() >= 3);
  // Per step (the first, a warm-up, left out as the parts leave it out): the
  // time of the kernels launched inside the attention ranges.
  std::vector<double> per_step(steps.size(), 0);
  int counted = 0;
  for (const trace::StoredEvent& e : events) {
    if (e.event.kind != trace::EventKind::kernel || e.event.category != trace::Category::compute)
      continue;
    auto l = launch.find(e.event.correlation);
    if (l == launch.end()) continue;
    const bool in_attention =
        std::any_of(attention_ops.begin(), attention_ops.end(),
                    [&](const auto& op) { return op.first <= l->second && l->second < op.second; });
    if (!in_attention) continue;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      if (e.event.start_ns >= steps[s].first && e.event.end_ns <= steps[s].second) {
        per_step[s] += static_cast<double>(e.event.end_ns - e.event.start_ns) * 1e-9;
        ++counted;
      }
    }
  }
  QVERIFY(counted > 0);
  per_step.erase(per_step.begin());
  std::sort(per_step.begin(), per_step.end());
  const double launched_in_attention = per_step[per_step.size() / 2];
  auto parts = trace::measure_step_parts(*r);
  QVERIFY2(parts, parts ? "" : parts.message().c_str());
  const double attention = parts->part("compute.attention");
  QVERIFY2(attention >= 0.95 * launched_in_attention,
           qPrintable(QString("attention part %1 s, its GEMM kernels %2 s")
                          .arg(attention)
                          .arg(launched_in_attention)));
  // Those GEMMs are most of the attention's time on the GPU.
  QVERIFY2(launched_in_attention > 0.5 * attention,
           qPrintable(QString("%1 of %2 s").arg(launched_in_attention).arg(attention)));
}

QTEST_GUILESS_MAIN(TestGpuTraces)
#include "tst_gpu_traces.moc"
