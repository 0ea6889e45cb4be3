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
#include <limits>
#include <map>
#include <set>

#include "core/trace_analysis.h"
#include "core/trace_critical_path.h"
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
  void pytorchProgramUnderTheInjectionLibrary();
  void captureRangeOfAPyTorchProgram();
  void fp8ForwardGemmsRanInFp8();
  void criticalPathOfOneGpuIsItsStepParts();
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
  // FP8 GEMMs ran in FP8, every shape (the first check's fell back to BF16):
  // 834 TFLOP/s, 42 % of the dense FP8 peak, the per-tensor scaling of
  // both operands included; the worker's fp8 run launched FP8 GEMMs only.
  const QJsonObject fp8 = gemm["fp8"].toObject();
  QCOMPARE(fp8["ran_as"].toArray(), QJsonArray{"fp8"});
  QCOMPARE(fp8["bf16_fallbacks"].toInt(), 0);
  QVERIFY2(fp8["best_tflops"].toDouble() > gemm["bf16"].toObject()["best_tflops"].toDouble(),
           qPrintable(QString::number(fp8["best_tflops"].toDouble())));
  const QJsonObject fp8_run = s["workers"].toObject()["fp8"].toObject();
  QVERIFY(fp8_run["fp8_gemms"].toInt() > 500);
  QCOMPARE(fp8_run["bf16_fallbacks"].toInt(), 0);
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
  QSKIP(
      "The committed GPU check ran on one GPU (the machine lent has one): NCCL runs one "
      "rank there and launches no kernel, so no NCCL kernel was recorded. Its NCCL calls "
      "are (pytorchProgramUnderTheInjectionLibrary); NCCL kernels are tested on synthetic "
      "records (tst_cupti_decoder).");
}

// A PyTorch program (scripts/gpu/torch_ddp_smoke.py: DistributedDataParallel
// over NCCL, 20 steps, bf16 autocast) run by `clusterscope profile --
// torchrun ...` on the H200: recorded through the injection library into
// the process's store, which names its rank as torchrun gave it. Every
// kernel is tied to its launch, each stream runs its kernels in order, and
// NCCL's own NVTX ranges give each collective with its size: DDP's first
// broadcast of the parameters, each step's all-reduces of their gradients,
// and the program's closing all-reduce of 2 MiB.
void TestGpuTraces::pytorchProgramUnderTheInjectionLibrary() {
  QTemporaryDir dir;
  auto r = open_copy(dir, "torch-ddp.db");
  QCOMPARE(r->meta("source"), std::optional<std::string>("cupti"));
  QCOMPARE(r->meta("process.launcher"), std::optional<std::string>("torchrun"));
  QCOMPARE(r->meta("process.rank"), std::optional<std::string>("0"));
  QCOMPARE(r->meta("process.world_size"), std::optional<std::string>("1"));
  QVERIFY(r->meta("command_line").value_or("").find("torch_ddp_smoke.py") != std::string::npos);
  QCOMPARE(r->meta("tracer.dropped_records"), std::optional<std::string>("0"));

  const std::vector<trace::StoredEvent> events = all_events(*r);
  std::set<std::int64_t> launches;
  std::map<std::uint32_t, std::vector<const trace::StoredEvent*>> by_stream;  // by lane
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;
  std::vector<const trace::StoredEvent*> nccl;
  for (const auto& e : events) {
    const std::string& name = r->string(e.event.name);
    if (e.event.kind == trace::EventKind::api_call) launches.insert(e.event.correlation);
    if (e.event.kind == trace::EventKind::kernel) by_stream[e.event.lane.value].push_back(&e);
    // The program's "step N" ranges: its steps in a store recorded since
    // the tracer takes them so (docs/cupti-tracer.md), NVTX ranges before.
    if ((e.event.kind == trace::EventKind::step || e.event.kind == trace::EventKind::annotation) &&
        name.starts_with("step "))
      steps.emplace_back(e.event.start_ns, e.event.end_ns);
    if (e.event.kind == trace::EventKind::annotation && name.starts_with("nccl") &&
        name.find(" (comm ") != std::string::npos) {
      nccl.push_back(&e);
    }
  }
  int kernels = 0, unresolved = 0;
  for (auto& [lane, list] : by_stream) {
    // In the order they ended; on one stream they started in that order too.
    std::sort(list.begin(), list.end(),
              [](auto* a, auto* b) { return a->event.end_ns < b->event.end_ns; });
    for (std::size_t i = 0; i < list.size(); ++i) {
      ++kernels;
      if (!launches.count(list[i]->event.correlation)) ++unresolved;
      QVERIFY(list[i]->event.end_ns > list[i]->event.start_ns);
      if (i > 0) QVERIFY(list[i]->event.start_ns >= list[i - 1]->event.start_ns);
    }
  }
  QVERIFY2(kernels > 1000, qPrintable(QString::number(kernels)));
  QCOMPARE(unresolved, 0);
  QCOMPARE(static_cast<int>(steps.size()), 20);

  // The model: Linear(1024, 4096), GELU, Linear(4096, 1024), LayerNorm(1024),
  // Linear(1024, 1024): 9 445 376 fp32 parameters, 37 781 504 bytes.
  const std::int64_t parameter_bytes = 9445376LL * 4;
  std::vector<std::int64_t> reduced(steps.size(), 0);
  int broadcasts_of_the_model = 0, closing = 0;
  for (const trace::StoredEvent* e : nccl) {
    // Host-side ranges of the calls (category other: the time is the
    // host's enqueueing, not the transfer's), with the call's size.
    const std::string& name = r->string(e->event.name);
    if (name.starts_with("ncclBroadcast") && e->event.bytes == parameter_bytes) {
      QCOMPARE(e->event.collective, trace::Collective::broadcast);
      ++broadcasts_of_the_model;
    }
    if (!name.starts_with("ncclAllReduce")) continue;
    QCOMPARE(e->event.collective, trace::Collective::all_reduce);
    if (e->event.bytes == std::int64_t{2} << 20) ++closing;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (e->event.start_ns >= steps[i].first && e->event.end_ns <= steps[i].second)
        reduced[i] += e->event.bytes;
    }
  }
  QCOMPARE(broadcasts_of_the_model, 1);
  QCOMPARE(closing, 1);
  for (std::size_t i = 0; i < steps.size(); ++i)
    QVERIFY2(reduced[i] == parameter_bytes,
             qPrintable(QString("step %1: %2 bytes all-reduced").arg(i).arg(reduced[i])));
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

// `clusterscope profile --capture-range cudaProfilerApi` of the same program
// calling cudaProfilerStart before its step 8 and cudaProfilerStop after its
// step 11 (scripts/gpu-check.sh): those steps, and nothing the program did
// before the start.
void TestGpuTraces::captureRangeOfAPyTorchProgram() {
  if (!QFile::exists(kGpuDir + "/torch-ddp-capture.db")) {
    QSKIP(
        "No capture-range recording yet: scripts/gpu-check.sh writes torch-ddp-capture.db on a "
        "GPU (the committed check ran before it did); the range itself is tested on CUPTI "
        "records in tst_cupti_decoder (captureRangeKeepsWhatFallsInIt).");
  }
  QTemporaryDir dir;
  auto r = open_copy(dir, "torch-ddp-capture.db");
  std::vector<std::int32_t> steps;
  std::int64_t first_step = std::numeric_limits<std::int64_t>::max();
  std::int64_t first_call = std::numeric_limits<std::int64_t>::max();
  int kernels = 0;
  for (const auto& e : all_events(*r)) {
    if (e.event.kind == trace::EventKind::step) {
      steps.push_back(e.event.step);
      first_step = std::min(first_step, e.event.start_ns);
    }
    if (e.event.kind == trace::EventKind::api_call)
      first_call = std::min(first_call, e.event.start_ns);
    kernels += e.event.kind == trace::EventKind::kernel;
  }
  std::sort(steps.begin(), steps.end());
  QCOMPARE(steps, (std::vector<std::int32_t>{8, 9, 10, 11}));
  QVERIFY(kernels > 0);
  // The range opened at cudaProfilerStart, after the synchronize that ends
  // step 7 and just before step 8's range: no call of before it.
  QVERIFY2(first_call >= first_step - 5'000'000,
           qPrintable(QString("first call %1 ms before the first step")
                          .arg(double(first_step - first_call) * 1e-6)));
  const QJsonObject counts =
      QJsonDocument::fromJson(QByteArray::fromStdString(r->meta("tracer.counts").value_or("{}")))
          .object();
  QVERIFY(counts["outside_capture_range"].toDouble() > 0);
  // Held against its plan (scripts/gpu/torch_ddp_smoke.plan.json), per step.
  QVERIFY(r->meta("predicted_step"));
  auto analysis = trace::analyze_run(*r);
  QVERIFY2(analysis, analysis ? "" : analysis.message().c_str());
  QVERIFY(analysis->prediction);
  QCOMPARE(analysis->prediction->steps > 0, true);
  QVERIFY(analysis->prediction->measured_step_s > 0);
}

// The worker's fp8 run records what each GEMM ran in: every forward GEMM of
// the linear layers and the head in FP8 E4M3 (4 x 12 layers + 1 a step, 12
// steps), their input and weight gradients in BF16, as the engine runs them.
void TestGpuTraces::fp8ForwardGemmsRanInFp8() {
  QTemporaryDir dir;
  auto r = open_copy(dir, "worker-fp8.db");
  std::map<std::pair<bool, trace::DataType>, int> ran;  // (backward, ran in) -> GEMMs
  for (const auto& e : all_events(*r)) {
    if (e.event.kind != trace::EventKind::cpu_op) continue;
    const std::string& name = r->string(e.event.name);
    if (!name.starts_with("gemm ") || name.starts_with("gemm attention")) continue;
    const bool backward = name.ends_with(" dgrad") || name.ends_with(" wgrad");
    ++ran[{backward, e.event.dtype}];
  }
  const int forward = 12 * (4 * 12 + 1);
  QCOMPARE(ran[std::make_pair(false, trace::DataType::fp8_e4m3)], forward);
  QCOMPARE(ran[std::make_pair(true, trace::DataType::bf16)], 2 * forward);
  QCOMPARE(ran.size(), std::size_t{2});
}

// On one GPU the critical path runs through every kernel of the step, so its
// parts are the step's measured parts: each kernel takes the kind of the
// operation it was launched in (the attention's batched GEMMs are
// attention), and elementwise work is the optimizer's only when launched
// outside the passes (the GPU runs up to 18 ms behind the host here).
void TestGpuTraces::criticalPathOfOneGpuIsItsStepParts() {
  QTemporaryDir dir;
  auto r = open_copy(dir, "worker-bf16.db");
  auto path = trace::summarize_critical_paths(*r);
  QVERIFY2(path, path ? "" : path.message().c_str());
  auto parts = trace::measure_step_parts(*r);
  QVERIFY2(parts, parts ? "" : parts.message().c_str());
  QCOMPARE(path->steps, parts->steps);
  int compared = 0;
  for (const auto& [name, ns] : path->parts) {
    if (!(name.starts_with("compute.") || name == "optimizer") || ns < 1e6) continue;
    const double measured_s = parts->part(name);
    QVERIFY2(std::abs(ns * 1e-9 / measured_s - 1) < 0.02,
             qPrintable(QString("%1: %2 ms on the path, %3 ms measured")
                            .arg(QString::fromUtf8(name.data(), int(name.size())))
                            .arg(ns * 1e-6)
                            .arg(measured_s * 1e3)));
    ++compared;
  }
  QCOMPARE(compared, 6);  // GEMMs, attention, norm, activation, elementwise, optimizer
}

QTEST_GUILESS_MAIN(TestGpuTraces)
#include "tst_gpu_traces.moc"
