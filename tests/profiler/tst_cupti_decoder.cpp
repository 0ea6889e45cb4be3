// The CUPTI tracer without a GPU: real CUPTI record structs (CUDA 13:
// Kernel10, Memcpy6, MemcpyPtoP4, Memset4, API, Synchronization2, Marker2,
// MarkerData2, Overhead3, ExternalCorrelation) laid out in buffers as CUPTI
// hands them over, replayed through the same pool, queue, decoding thread and
// decoder as live records. Also the recording file, the buffer cap and its
// dropped records, and the CUPTI source failing cleanly with no driver.

#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cstddef>
#include <fstream>
#include <map>
#include <set>

#include <cupti.h>
#include <nlohmann/json.hpp>

#include "core/kernel_names.h"
#include "core/run_clock.h"
#include "core/step_names.h"
#include "core/trace_analysis.h"
#include "core/trace_reader.h"
#include "profiler/activity_buffers.h"
#include "profiler/cupti/activity_decoder.h"
#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/replay_source.h"
#include "profiler/cupti/tracer.h"
#include "profiler/replay_file.h"
#include "tests/profiler/memory_trace_writer.h"

using cs::profiler::ReplayBuilder;
using cs::profiler::ReplayRecording;
using cs::test::MemoryTraceWriter;
using cs::trace::Category;
using cs::trace::Collective;
using cs::trace::DataType;
using cs::trace::Event;
using cs::trace::EventKind;
using cs::trace::LaneKind;

namespace {

// Nanoseconds on CLOCK_REALTIME, as CUPTI reports them with our clock.
constexpr std::uint64_t T0 = 1'760'000'000'000'000'000ull;

constexpr const char* kGemm = "_Z11gemm_kernelILi128EEvPKfS1_Pfiii";
constexpr const char* kAllReduceBf16 =
    "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE";
constexpr const char* kSendRecv = "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE";
constexpr const char* kGeneric = "_Z21ncclDevKernel_Generic24ncclDevKernelArgsStorageILm4096EE";
constexpr std::uint64_t kNcclSchema = (1u << 24);  // NVTX_PAYLOAD_SCHEMA_ID_STATIC_START

CUpti_ActivityKernel10 kernel(std::uint64_t start, std::uint64_t end, std::uint32_t device,
                              std::uint32_t stream, std::uint32_t correlation) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = device;
  k.contextId = 1;
  k.streamId = stream;
  k.correlationId = correlation;
  k.gridX = 128;
  k.gridY = k.gridZ = 1;
  k.blockX = 256;
  k.blockY = k.blockZ = 1;
  return k;
}

CUpti_ActivityAPI api(CUpti_ActivityKind kind, CUpti_CallbackId cbid, std::uint64_t start,
                      std::uint64_t end, std::uint32_t thread, std::uint32_t correlation) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.processId = 4242;
  a.threadId = thread;
  a.correlationId = correlation;
  return a;
}

CUpti_ActivityMemcpy6 memcpy_record(std::uint64_t start, std::uint64_t end, std::uint8_t copy_kind,
                                    std::uint64_t bytes, std::uint32_t correlation) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = 0;
  m.streamId = 13;
  m.correlationId = correlation;
  m.runtimeCorrelationId = correlation;
  m.copyCount = 1;
  return m;
}

CUpti_ActivityMarker2 marker(std::uint32_t flags, std::uint64_t time, std::uint32_t id,
                             std::uint32_t thread) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = static_cast<CUpti_ActivityFlag>(flags);
  m.timestamp = time;
  m.id = id;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.processId = 4242;
  m.objectId.pt.threadId = thread;
  return m;
}

// NCCL's payload for ncclAllReduce & co.: {commHash, bytes, op or peer or root}.
struct NcclPayload {
  std::uint64_t comm;
  std::size_t bytes;
  int third;
};
struct NvtxPayloadData {
  std::uint64_t schema_id;
  std::size_t size;
  const void* payload;
};

// An NCCL range as CUPTI records it: START (name, domain "NCCL"), MARKER_DATA
// with the extended payload, later END.
void nccl_range_start(ReplayBuilder& b, const char* call, std::uint32_t id, std::uint64_t time,
                      std::uint32_t thread, int schema, NcclPayload payload) {
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, time, id, thread),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string(call)},
                {offsetof(CUpti_ActivityMarker2, domain), b.add_string("NCCL")}});
  const auto bytes = b.add_blob(&payload, sizeof payload);
  NvtxPayloadData header{kNcclSchema + schema, sizeof payload, nullptr};
  const auto holder =
      b.add_blob(&header, sizeof header, {{offsetof(NvtxPayloadData, payload), bytes}});
  CUpti_ActivityMarkerData2 data{};
  data.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
  data.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_NONE;
  data.id = id;
  data.payloadKind = CUPTI_METRIC_VALUE_KIND_NVTX_EXTENDED_PAYLOAD;
  b.add_record(data, {{offsetof(CUpti_ActivityMarkerData2, payload), holder}});
}

void nccl_range_end(ReplayBuilder& b, std::uint32_t id, std::uint64_t time, std::uint32_t thread) {
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, time, id, thread));
}

void add_kernel(ReplayBuilder& b, const CUpti_ActivityKernel10& k, const char* name) {
  b.add_record(k, {{offsetof(CUpti_ActivityKernel10, name), b.add_string(name)}});
}

struct Replayed {
  MemoryTraceWriter writer;
  cs::profiler::TracerReport report;

  std::vector<Event> of_kind(EventKind kind) const {
    std::vector<Event> found;
    for (const Event& e : writer.events) {
      if (e.kind == kind) found.push_back(e);
    }
    return found;
  }
  const Event* named(const std::string& name) const {
    for (const Event& e : writer.events) {
      if (writer.text(e.name) == name) return &e;
    }
    return nullptr;
  }
  std::string lane_name(const Event& e) const { return writer.lane(e.lane).name; }
};

cs::profiler::TracerOptions replay_options(std::size_t buffer_bytes = 64 * 1024,
                                           std::size_t cap_bytes = 16 << 20) {
  cs::profiler::TracerOptions o;
  o.rank.rank = 3;
  o.rank.host = "replay-host";
  o.rank.device = "NVIDIA H200 (GPU 0)";
  o.rank.pid = 4242;
  o.buffer_bytes = buffer_bytes;
  o.buffer_cap_bytes = cap_bytes;
  o.memory_sample_period = std::chrono::milliseconds(0);
  return o;
}

std::unique_ptr<Replayed> replay(ReplayRecording recording,
                                 cs::profiler::TracerOptions options = replay_options()) {
  auto run = std::make_unique<Replayed>();
  auto tracer = cs::profiler::Tracer::start(
      cs::profiler::make_replay_source(std::move(recording), "test replay"), run->writer, options);
  if (!tracer) qFatal("tracer did not start: %s", tracer.message().c_str());
  run->report = (*tracer)->finalize();
  return run;
}

}  // namespace

class TestCuptiDecoder : public QObject {
  Q_OBJECT

 private slots:
  void recordsWalkAsCuptiLaysThemOut();
  void everyKind_data();
  void everyKind();
  void launchesLinkToTheirWork();
  void ncclKernelNames_data();
  void ncclKernelNames();
  void kernelBaseNames_data();
  void kernelBaseNames();
  void ncclKernelTakesItsNvtxRange();
  void pipelinePeersAreStoreRanks();
  void ncclKernelWaitsForTheRangeEnd();
  void groupedNcclCallsSizeOneKernel();
  void ncclKernelWithoutNvtxIsStillCommunication();
  void lanesPerStreamThreadAndDomain();
  void timestampsPassThroughExactly();
  void noisyAndOwnApiCallsAreFiltered();
  void stepsFromExternalCorrelation();
  void stepNames_data();
  void stepNames();
  void stepsFromNvtxRanges();
  void captureRangeKeepsWhatFallsInIt();
  void profilerCallsOpenAndCloseTheRange();
  void syncWaitsForItsCall();
  void overflowDropsAndReports();
  void dropWarningSaysWhoDropped_data();
  void dropWarningSaysWhoDropped();
  void captureThatCannotBeWrittenIsStored();
  void recordingFileRoundTrip();
  void captureRecordsWhatItDecodes();
  void damagedRecordings_data();
  void damagedRecordings();
  void realH200Probe();
  void realH200PyTorchDdp();
  void realH200PyTorchDdpSteps();
  void cuptiSourceWithoutDriverFailsCleanly();
  void memoryCounterNeedsADriver();
};

void TestCuptiDecoder::recordsWalkAsCuptiLaysThemOut() {
  // cuptiActivityGetNextRecord needs no driver: it walks our buffers of real
  // structs at sizeof(struct) strides, which is how the replay lays them out.
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  std::vector<std::pair<std::size_t, int>> expected;
  auto add = [&](const auto& record) {
    expected.emplace_back(b.buffer_size(), int(record.kind));
    b.add_record(record);
  };
  add(kernel(T0, T0 + 10, 0, 7, 1));
  add(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0, T0 + 5,
          1, 1));
  add(memcpy_record(T0, T0 + 3, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 64, 2));
  CUpti_ActivityMemset4 ms{};
  ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  add(ms);
  CUpti_ActivityMemcpyPtoP4 p2p{};
  p2p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  add(p2p);
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  add(sync);
  add(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, T0, 1, 1));
  CUpti_ActivityMarkerData2 data{};
  data.kind = CUPTI_ACTIVITY_KIND_MARKER_DATA;
  add(data);
  CUpti_ActivityOverhead3 overhead{};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  add(overhead);
  CUpti_ActivityExternalCorrelation ext{};
  ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  add(ext);
  b.end_buffer();
  auto& bytes = const_cast<std::vector<std::uint8_t>&>(b.recording().segments[0].bytes);
  CUpti_Activity* record = nullptr;
  std::size_t i = 0;
  while (cuptiActivityGetNextRecord(bytes.data(), bytes.size(), &record) == CUPTI_SUCCESS) {
    QVERIFY(i < expected.size());
    QCOMPARE(std::size_t(reinterpret_cast<std::uint8_t*>(record) - bytes.data()),
             expected[i].first);
    QCOMPARE(int(record->kind), expected[i].second);
    ++i;
  }
  QCOMPARE(i, expected.size());
  QCOMPARE(cs::profiler::count_records(bytes.data(), bytes.size()), expected.size());
}

void TestCuptiDecoder::everyKind_data() {
  QTest::addColumn<int>("which");
  QTest::addColumn<int>("kind");
  QTest::addColumn<int>("category");
  QTest::addColumn<int>("lane_kind");
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("lane");
  QTest::addColumn<qint64>("bytes");

  QTest::addRow("kernel")
      << 0 << int(EventKind::kernel) << int(Category::compute) << int(LaneKind::gpu_stream)
      << "void gemm_kernel<128>(float const*, float const*, float*, int, int, int)"
      << "GPU 1 stream 7" << qint64(0);
  QTest::addRow("nccl kernel")
      << 1 << int(EventKind::collective) << int(Category::communication)
      << int(LaneKind::gpu_stream)
      << "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
      << "GPU 1 stream 21" << qint64(0);
  QTest::addRow("memcpy") << 2 << int(EventKind::memcpy) << int(Category::memory)
                          << int(LaneKind::gpu_stream) << "Memcpy DtoH"
                          << "GPU 0 stream 13" << qint64(1 << 20);
  QTest::addRow("peer memcpy") << 3 << int(EventKind::memcpy) << int(Category::memory)
                               << int(LaneKind::gpu_stream) << "Memcpy PtoP"
                               << "GPU 1 stream 9" << qint64(4096);
  QTest::addRow("memset") << 4 << int(EventKind::memset) << int(Category::memory)
                          << int(LaneKind::gpu_stream) << "Memset"
                          << "GPU 0 stream 7" << qint64(256);
  QTest::addRow("runtime") << 5 << int(EventKind::api_call) << int(Category::other)
                           << int(LaneKind::cpu_thread) << "cudaMemcpyAsync"
                           << "Thread 100" << qint64(0);
  QTest::addRow("driver") << 6 << int(EventKind::api_call) << int(Category::other)
                          << int(LaneKind::cpu_thread) << "cuLaunchKernel"
                          << "Thread 101" << qint64(0);
  QTest::addRow("sync") << 7 << int(EventKind::sync) << int(Category::synchronization)
                        << int(LaneKind::cpu_thread) << "Stream synchronize"
                        << "Thread 100" << qint64(0);
  QTest::addRow("nvtx range") << 8 << int(EventKind::annotation) << int(Category::other)
                              << int(LaneKind::annotation) << "forward"
                              << "NVTX thread 100" << qint64(0);
  QTest::addRow("nvtx mark") << 9 << int(EventKind::annotation) << int(Category::other)
                             << int(LaneKind::annotation) << "checkpoint"
                             << "NVTX app thread 100" << qint64(0);
  QTest::addRow("overhead on a thread") << 10 << int(EventKind::overhead) << int(Category::other)
                                        << int(LaneKind::cpu_thread) << "CUPTI instrumentation"
                                        << "Thread 100" << qint64(0);
  QTest::addRow("overhead of the tracer") << 11 << int(EventKind::overhead) << int(Category::other)
                                          << int(LaneKind::cpu_thread) << "CUPTI buffer flush"
                                          << "Tracer overhead" << qint64(0);
}

void TestCuptiDecoder::everyKind() {
  QFETCH(int, which);
  QFETCH(int, kind);
  QFETCH(int, category);
  QFETCH(int, lane_kind);
  QFETCH(QString, name);
  QFETCH(QString, lane);
  QFETCH(qint64, bytes);

  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  switch (which) {
    case 0:
      add_kernel(b, kernel(T0 + 100, T0 + 900, 1, 7, 5), kGemm);
      break;
    case 1:
      add_kernel(b, kernel(T0 + 100, T0 + 900, 1, 21, 5), kAllReduceBf16);
      break;
    case 2:
      b.add_record(memcpy_record(T0 + 100, T0 + 900, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 1 << 20, 5));
      break;
    case 3: {
      CUpti_ActivityMemcpyPtoP4 m{};
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
      m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
      m.bytes = 4096;
      m.start = T0 + 100;
      m.end = T0 + 900;
      m.deviceId = 1;
      m.streamId = 9;
      m.srcDeviceId = 0;
      m.dstDeviceId = 1;
      m.correlationId = 5;
      b.add_record(m);
      break;
    }
    case 4: {
      CUpti_ActivityMemset4 m{};
      m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      m.bytes = 256;
      m.start = T0 + 100;
      m.end = T0 + 900;
      m.streamId = 7;
      m.correlationId = 5;
      b.add_record(m);
      break;
    }
    case 5:
      b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                       T0 + 100, T0 + 900, 100, 5));
      break;
    case 6:
      b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, T0 + 100,
                       T0 + 900, 101, 5));
      break;
    case 7: {
      b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME,
                       CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, T0 + 50, T0 + 950, 100,
                       6));
      CUpti_ActivitySynchronization2 s{};
      s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
      s.start = T0 + 100;
      s.end = T0 + 900;
      s.correlationId = 6;
      s.contextId = 1;
      s.streamId = 7;
      s.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
      b.add_record(s);
      break;
    }
    case 8:
      b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, T0 + 100, 9, 100),
                   {{offsetof(CUpti_ActivityMarker2, name), b.add_string("forward")}});
      b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, T0 + 900, 9, 100));
      break;
    case 9:
      b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, T0 + 100, 10, 100),
                   {{offsetof(CUpti_ActivityMarker2, name), b.add_string("checkpoint")},
                    {offsetof(CUpti_ActivityMarker2, domain), b.add_string("app")}});
      break;
    case 10:
    case 11: {
      CUpti_ActivityOverhead3 o{};
      o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
      o.start = T0 + 100;
      o.end = T0 + 900;
      if (which == 10) {
        o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION;
        o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
        o.objectId.pt.threadId = 100;
      } else {
        o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
        o.objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
        o.objectId.dcs.deviceId = 0;
      }
      b.add_record(o);
      break;
    }
  }
  b.end_buffer();
  const auto run = replay(b.take());
  const Event* e = run->named(name.toStdString());
  QVERIFY2(e, qPrintable("no event named " + name));
  QCOMPARE(int(e->kind), kind);
  QCOMPARE(int(e->category), category);
  QCOMPARE(int(run->writer.lane(e->lane).kind), lane_kind);
  QCOMPARE(QString::fromStdString(run->lane_name(*e)), lane);
  QCOMPARE(run->writer.lane(e->lane).rank, 3);
  QCOMPARE(e->bytes, bytes);
  if (which == 9) {
    QCOMPARE(e->start_ns, qint64(T0 + 100));
    QCOMPARE(e->end_ns, qint64(T0 + 100));
  } else {
    QCOMPARE(e->start_ns, qint64(T0 + 100));
    QCOMPARE(e->end_ns, qint64(T0 + 900));
  }
  QCOMPARE(run->report.dropped_records, std::uint64_t(0));
  QCOMPARE(run->report.counts.invalid_buffers, std::uint64_t(0));
  // The rank row and the report are in the store.
  QCOMPARE(run->writer.ranks.size(), std::size_t(1));
  QCOMPARE(run->writer.ranks[0].rank, 3);
  QCOMPARE(run->writer.meta.at("tracer.clock"), std::string("CLOCK_REALTIME"));
  QCOMPARE(run->writer.meta.at("tracer.dropped_records"), std::string("0"));
}

void TestCuptiDecoder::launchesLinkToTheirWork() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0,
                   T0 + 4000, 100, 71));
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                   T0 + 5000, T0 + 6000, 100, 72));
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 7000,
                   T0 + 8000, 101, 73));
  b.end_buffer();
  // GPU work arrives in a later buffer, as CUPTI delivers it once complete.
  b.begin_buffer();
  add_kernel(b, kernel(T0 + 10000, T0 + 20000, 0, 7, 71), kGemm);
  b.add_record(memcpy_record(T0 + 21000, T0 + 22000, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096, 72));
  CUpti_ActivityKernel10 triton = kernel(T0 + 23000, T0 + 24000, 0, 9, 73);
  triton.gridY = 3;
  triton.blockX = 128;
  triton.registersPerThread = 40;
  triton.staticSharedMemory = 1024;
  triton.dynamicSharedMemory = 2048;
  add_kernel(b, triton, "triton_poi_fused_add_0");
  b.end_buffer();
  const auto run = replay(b.take());
  QCOMPARE(run->writer.events.size(), std::size_t(6));
  // Each kernel's launch, as its record gives it (shared memory: static and
  // dynamic together, and the dynamic part); the copy has none.
  QCOMPARE(run->writer.launches.size(), std::size_t(2));
  for (const auto& [index, launch] : run->writer.launches) {
    const Event& e = run->writer.events[index];
    QCOMPARE(e.kind, EventKind::kernel);
    if (e.correlation == 71) {
      QCOMPARE(launch.grid[0], 128);
      QCOMPARE(launch.block[0], 256);
      QCOMPARE(launch.shared_memory_bytes, 0);
    } else {
      QCOMPARE(e.correlation, 73);
      QCOMPARE(launch.grid[1], 3);
      QCOMPARE(launch.blocks(), 128 * 3);
      QCOMPARE(launch.threads_per_block(), 128);
      QCOMPARE(launch.registers_per_thread, 40);
      QCOMPARE(launch.shared_memory_bytes, 3072);
      QCOMPARE(launch.dynamic_shared_memory_bytes, 2048);
    }
  }
  for (std::int64_t c : {71, 72, 73}) {
    int launches = 0;
    int work = 0;
    for (const Event& e : run->writer.events) {
      if (e.correlation != c) continue;
      if (e.kind == EventKind::api_call) {
        ++launches;
        QCOMPARE(run->writer.lane(e.lane).kind, LaneKind::cpu_thread);
      } else {
        ++work;
        QCOMPARE(run->writer.lane(e.lane).kind, LaneKind::gpu_stream);
      }
    }
    QCOMPARE(launches, 1);
    QCOMPARE(work, 1);
  }
  QVERIFY(run->named("cudaLaunchKernel"));
  QVERIFY(run->named("cuLaunchKernelEx"));
  QVERIFY(run->named("triton_poi_fused_add_0"));
}

void TestCuptiDecoder::ncclKernelNames_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<bool>("nccl");
  QTest::addColumn<int>("collective");
  QTest::addColumn<int>("dtype");
  QTest::addColumn<bool>("p2p");

  QTest::addRow("2.19+ mangled") << kAllReduceBf16 << true << int(Collective::all_reduce)
                                 << int(DataType::bf16) << false;
  QTest::addRow("2.19+ demangled")
      << "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)" << true
      << int(Collective::reduce_scatter) << int(DataType::fp32) << false;
  QTest::addRow("all-gather, no type")
      << "ncclDevKernel_AllGather_RING_LL" << true << int(Collective::all_gather)
      << int(DataType::none) << false;
  QTest::addRow("broadcast") << "ncclDevKernel_Broadcast_RING_SIMPLE" << true
                             << int(Collective::broadcast) << int(DataType::none) << false;
  QTest::addRow("reduce, fp16 tree") << "ncclDevKernel_Reduce_Sum_f16_TREE_LL128" << true
                                     << int(Collective::reduce) << int(DataType::fp16) << false;
  QTest::addRow("fp8 nvls") << "ncclDevKernel_AllReduce_Sum_f8e4m3_NVLS_SIMPLE" << true
                            << int(Collective::all_reduce) << int(DataType::fp8_e4m3) << false;
  QTest::addRow("signed sum on the unsigned kernel")
      << "ncclDevKernel_AllReduce_Sum_u32_RING_LL" << true << int(Collective::all_reduce)
      << int(DataType::int32) << false;
  QTest::addRow("sendrecv") << kSendRecv << true << int(Collective::send_recv)
                            << int(DataType::none) << true;
  QTest::addRow("generic") << kGeneric << true << int(Collective::none) << int(DataType::none)
                           << false;
  QTest::addRow("symmetric") << "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16" << true
                             << int(Collective::all_reduce) << int(DataType::bf16) << false;
  QTest::addRow("old float") << "ncclKernel_AllReduce_RING_LL_Sum_float" << true
                             << int(Collective::all_reduce) << int(DataType::fp32) << false;
  QTest::addRow("old mangled int8")
      << "_Z39ncclKernel_AllGather_RING_LL_Sum_int8_t12ncclWorkElem" << true
      << int(Collective::all_gather) << int(DataType::int8) << false;
  QTest::addRow("mangled beyond the demangler")
      << "_Z38ncclKernel_AllReduce_RING_LL_Sum_float13ncclWorkElemX" << true
      << int(Collective::all_reduce) << int(DataType::fp32) << false;
  QTest::addRow("old uint8 is not int8")
      << "ncclKernel_ReduceScatter_RING_SIMPLE_Sum_uint8_t" << true
      << int(Collective::reduce_scatter) << int(DataType::uint8) << false;
  QTest::addRow("old bfloat16") << "ncclKernel_AllReduce_TREE_LL128_Sum___nv_bfloat16" << true
                                << int(Collective::all_reduce) << int(DataType::bf16) << false;
  QTest::addRow("old sendrecv") << "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t" << true
                                << int(Collective::send_recv) << int(DataType::int8) << true;
  QTest::addRow("old int64") << "ncclKernel_AllReduce_RING_LL_Sum_int64_t" << true
                             << int(Collective::all_reduce) << int(DataType::int64) << false;
  QTest::addRow("old all-to-all") << "ncclKernel_AllToAll_RING_SIMPLE_Sum_float" << true
                                  << int(Collective::all_to_all) << int(DataType::fp32) << false;
  QTest::addRow("run-together (NCCL 2.4)")
      << "ncclAllReduceRingLLKernel_sum_f32" << true << int(Collective::all_reduce)
      << int(DataType::fp32) << false;
  QTest::addRow("compute kernel") << kGemm << false << 0 << 0 << false;
  QTest::addRow("a name merely containing nccl")
      << "void my_ncclish_kernel<float>(float*)" << false << 0 << 0 << false;
  QTest::addRow("pytorch kernel")
      << "void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, "
         "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
         "at::native::FillFunctor<float>, std::array<char*, 1ul>)"
      << false << 0 << 0 << false;
}

void TestCuptiDecoder::ncclKernelNames() {
  QFETCH(QString, name);
  QFETCH(bool, nccl);
  QFETCH(int, collective);
  QFETCH(int, dtype);
  QFETCH(bool, p2p);
  const auto parsed = cs::trace::parse_nccl_kernel_name(name.toStdString());
  QCOMPARE(parsed.has_value(), nccl);
  if (!parsed) return;
  QCOMPARE(int(parsed->collective), collective);
  QCOMPARE(int(parsed->dtype), dtype);
  QCOMPARE(parsed->point_to_point, p2p);
}

void TestCuptiDecoder::kernelBaseNames_data() {
  QTest::addColumn<QString>("demangled");
  QTest::addColumn<QString>("base");
  QTest::addRow("plain") << "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
                         << "ncclDevKernel_SendRecv";
  QTest::addRow("template with return type") << "void gemm_kernel<128>(float const*, float*)"
                                             << "gemm_kernel";
  QTest::addRow("anonymous namespace") << "void at::native::(anonymous namespace)::fill<float>(int)"
                                       << "at::native::(anonymous namespace)::fill";
  QTest::addRow("not mangled") << "triton_poi_fused_add_0"
                               << "triton_poi_fused_add_0";
}

void TestCuptiDecoder::kernelBaseNames() {
  QFETCH(QString, demangled);
  QFETCH(QString, base);
  const std::string text = demangled.toStdString();
  QCOMPARE(QString::fromStdString(std::string(cs::trace::kernel_base_name(text))), base);
  QCOMPARE(QString::fromStdString(cs::trace::demangle("_Z3addPfS_")),
           QString("add(float*, float*)"));
  QCOMPARE(QString::fromStdString(cs::trace::demangle("_Znot-a-name")), QString("_Znot-a-name"));
}

void TestCuptiDecoder::ncclKernelTakesItsNvtxRange() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  nccl_range_start(b, "ncclAllReduce", 40, T0 + 1000, 200, 5, {0x1234abcdULL, 1 << 20, 0});
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 1500,
                   T0 + 1800, 200, 11));
  nccl_range_end(b, 40, T0 + 2000, 200);
  add_kernel(b, kernel(T0 + 3000, T0 + 9000, 0, 21, 11), kAllReduceBf16);
  b.end_buffer();
  const auto run = replay(b.take());
  const auto collectives = run->of_kind(EventKind::collective);
  QCOMPARE(collectives.size(), std::size_t(1));
  const Event& k = collectives[0];
  QCOMPARE(k.category, Category::communication);
  QCOMPARE(k.collective, Collective::all_reduce);
  QCOMPARE(k.dtype, DataType::bf16);
  QCOMPARE(k.bytes, std::int64_t(1 << 20));
  QCOMPARE(k.count, std::int64_t(1 << 19));
  QCOMPARE(k.correlation, std::int64_t(11));
  QCOMPARE(run->report.counts.nccl_kernels, std::uint64_t(1));
  QCOMPARE(run->report.counts.nccl_annotated, std::uint64_t(1));
  // The NCCL call itself, on the NCCL domain's lane, named with its communicator.
  const Event* range = run->named("ncclAllReduce (comm 000000001234abcd)");
  QVERIFY(range);
  QCOMPARE(range->kind, EventKind::annotation);
  QCOMPARE(range->collective, Collective::all_reduce);
  QCOMPARE(range->bytes, std::int64_t(1 << 20));
  QCOMPARE(QString::fromStdString(run->lane_name(*range)), QString("NVTX NCCL thread 200"));
}

void TestCuptiDecoder::ncclKernelWaitsForTheRangeEnd() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  nccl_range_start(b, "ncclBroadcast", 41, T0 + 1000, 200, 6, {0x77, 65536, 2});
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 1500,
                   T0 + 1800, 200, 12));
  add_kernel(b, kernel(T0 + 3000, T0 + 4000, 0, 21, 12), "ncclDevKernel_Broadcast_RING_LL");
  b.end_buffer();
  b.begin_buffer();  // the range's end comes in the next buffer
  nccl_range_end(b, 41, T0 + 5000, 200);
  b.end_buffer();
  const auto run = replay(b.take());
  const auto collectives = run->of_kind(EventKind::collective);
  QCOMPARE(collectives.size(), std::size_t(1));
  QCOMPARE(collectives[0].collective, Collective::broadcast);
  QCOMPARE(collectives[0].bytes, std::int64_t(65536));
  QCOMPARE(collectives[0].peer, 2);  // the root
}

void TestCuptiDecoder::groupedNcclCallsSizeOneKernel() {
  // ncclGroupStart(); ncclSend(peer 1); ncclRecv(peer 1); ncclGroupEnd():
  // one SendRecv kernel, launched from ncclGroupEnd after both ranges ended.
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  nccl_range_start(b, "ncclSend", 50, T0 + 100, 300, 9, {0x99, 4096, 1});
  nccl_range_end(b, 50, T0 + 200, 300);
  nccl_range_start(b, "ncclRecv", 51, T0 + 300, 300, 10, {0x99, 8192, 1});
  nccl_range_end(b, 51, T0 + 400, 300);
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 500,
                   T0 + 600, 300, 13));
  add_kernel(b, kernel(T0 + 1000, T0 + 5000, 0, 22, 13), kSendRecv);
  b.end_buffer();
  const auto run = replay(b.take());
  const auto p2p = run->of_kind(EventKind::p2p);
  QCOMPARE(p2p.size(), std::size_t(1));
  QCOMPARE(p2p[0].category, Category::communication);
  QCOMPARE(p2p[0].bytes, std::int64_t(4096 + 8192));
  QCOMPARE(p2p[0].peer, 1);
  QCOMPARE(p2p[0].collective, Collective::send_recv);  // a send and a receive
  QVERIFY(run->named("ncclSend (comm 0000000000000099)"));
  QCOMPARE(run->named("ncclRecv (comm 0000000000000099)")->collective, Collective::recv);
}

// NCCL names a send's peer by its rank in the communicator (the CUDA
// engine's pipeline group, split from the world); the store numbers ranks
// as the world does. Rank 3 of a dp 2 x pp 2 run is stage 1 of replica 1:
// its pipeline group's rank 0 is world rank 1. Recorded as 0, its
// transfers named rank 0 (another replica's stage), and the critical path
// could not pair them. A collective's root is left as NCCL gave it.
void TestCuptiDecoder::pipelinePeersAreStoreRanks() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  nccl_range_start(b, "ncclSend", 60, T0 + 100, 300, 9, {0x99, 4096, 0});
  nccl_range_end(b, 60, T0 + 200, 300);
  nccl_range_start(b, "ncclRecv", 61, T0 + 300, 300, 10, {0x99, 8192, 0});
  nccl_range_end(b, 61, T0 + 400, 300);
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 500,
                   T0 + 600, 300, 13));
  add_kernel(b, kernel(T0 + 1000, T0 + 5000, 0, 22, 13), kSendRecv);
  nccl_range_start(b, "ncclBroadcast", 62, T0 + 6000, 300, 6, {0x77, 65536, 1});
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 6500,
                   T0 + 6800, 300, 14));
  nccl_range_end(b, 62, T0 + 7000, 300);
  add_kernel(b, kernel(T0 + 8000, T0 + 9000, 0, 21, 14), "ncclDevKernel_Broadcast_RING_LL");
  b.end_buffer();
  auto options = replay_options();
  options.p2p_peer_ranks = {1, 3};
  const auto run = replay(b.take(), options);
  const auto p2p = run->of_kind(EventKind::p2p);
  QCOMPARE(p2p.size(), std::size_t(1));
  QCOMPARE(p2p[0].peer, 1);
  QCOMPARE(run->named("ncclSend (comm 0000000000000099)")->peer, 1);
  QCOMPARE(run->named("ncclRecv (comm 0000000000000099)")->peer, 1);
  const auto collectives = run->of_kind(EventKind::collective);
  QCOMPARE(collectives.size(), std::size_t(1));
  QCOMPARE(collectives[0].peer, 1);  // the broadcast's root, NCCL's number
}

void TestCuptiDecoder::ncclKernelWithoutNvtxIsStillCommunication() {
  // No NCCL range at all (NVTX not injected): the kernel is written at once,
  // classified by its name only.
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0,
                   T0 + 10, 200, 14));
  add_kernel(b, kernel(T0 + 100, T0 + 900, 0, 21, 14), kGeneric);
  add_kernel(b, kernel(T0 + 1000, T0 + 1900, 0, 21, 15), kAllReduceBf16);  // launch not seen either
  b.end_buffer();
  const auto run = replay(b.take());
  const auto collectives = run->of_kind(EventKind::collective);
  QCOMPARE(collectives.size(), std::size_t(2));
  for (const Event& e : collectives) {
    QCOMPARE(e.category, Category::communication);
    QCOMPARE(e.bytes, std::int64_t(0));
  }
  QCOMPARE(run->report.counts.nccl_annotated, std::uint64_t(0));
}

void TestCuptiDecoder::lanesPerStreamThreadAndDomain() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  add_kernel(b, kernel(T0, T0 + 10, 0, 7, 1), kGemm);
  add_kernel(b, kernel(T0 + 20, T0 + 30, 0, 7, 2), kGemm);
  add_kernel(b, kernel(T0, T0 + 10, 0, 13, 3), kGemm);
  add_kernel(b, kernel(T0, T0 + 10, 1, 7, 4), kGemm);
  for (std::uint32_t thread : {100u, 101u, 100u}) {
    b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     T0, T0 + 1, thread, 9));
  }
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, T0, 1, 100),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string("a")}});
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, T0, 2, 100),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string("b")},
                {offsetof(CUpti_ActivityMarker2, domain), b.add_string("NCCL")}});
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, T0, 3, 101),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string("c")}});
  b.end_buffer();
  const auto run = replay(b.take());
  QStringList names;
  for (const auto& lane : run->writer.lanes)
    names << QString::fromStdString(lane.name);
  names.sort();
  QCOMPARE(names, QStringList({"GPU 0 stream 13", "GPU 0 stream 7", "GPU 1 stream 7",
                               "NVTX NCCL thread 100", "NVTX thread 100", "NVTX thread 101",
                               "Thread 100", "Thread 101"}));
  // GPU lanes sort by (device, stream), before threads, before NVTX lanes.
  auto sort_of = [&](const char* name) {
    for (const auto& lane : run->writer.lanes) {
      if (lane.name == name) return lane.sort_index;
    }
    return -1;
  };
  QVERIFY(sort_of("GPU 0 stream 7") < sort_of("GPU 0 stream 13"));
  QVERIFY(sort_of("GPU 0 stream 13") < sort_of("GPU 1 stream 7"));
  QVERIFY(sort_of("GPU 1 stream 7") < sort_of("Thread 100"));
  QVERIFY(sort_of("Thread 101") < sort_of("NVTX thread 100"));
  for (const auto& lane : run->writer.lanes)
    QCOMPARE(lane.rank, 3);
}

void TestCuptiDecoder::timestampsPassThroughExactly() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  add_kernel(b, kernel(T0 + 123'456'789, T0 + 123'458'289, 0, 7, 1), kGemm);
  add_kernel(b, kernel(0, 0, 0, 7, 2), kGemm);             // CUPTI had no timestamps for it
  add_kernel(b, kernel(T0 + 10, T0 + 5, 0, 7, 3), kGemm);  // ends before it starts
  b.end_buffer();
  const auto run = replay(b.take());
  QCOMPARE(run->writer.events.size(), std::size_t(1));
  QCOMPARE(run->writer.events[0].start_ns, std::int64_t(T0 + 123'456'789));
  QCOMPARE(run->writer.events[0].end_ns, std::int64_t(T0 + 123'458'289));
  QCOMPARE(run->writer.events[0].duration_ns(), std::int64_t(1500));
  QCOMPARE(run->report.counts.kernels, std::uint64_t(3));
  QCOMPARE(run->report.counts.without_timestamps, std::uint64_t(2));
}

void TestCuptiDecoder::noisyAndOwnApiCallsAreFiltered() {
  MemoryTraceWriter writer;
  cs::profiler::ActivityDecoder decoder(writer, {});
  decoder.ignore_thread(555);  // as the tracer's memory sampler registers itself
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, T0,
                   T0 + 1, 1, 1));
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, T0,
                   T0 + 1, 1, 2));
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020, T0,
                   T0 + 1, 1, 3));
  b.add_record(
      api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, T0, T0 + 1, 1, 4));
  b.add_record(
      api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, T0, T0 + 1, 1, 5));
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0, T0 + 1,
                   555, 6));
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0,
                   T0 + 1, 1, 7));
  b.add_record(
      api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, T0, T0 + 1, 1, 8));
  b.end_buffer();
  auto& bytes = const_cast<std::vector<std::uint8_t>&>(b.recording().segments[0].bytes);
  decoder.decode({bytes.data(), bytes.size(), bytes.size(), false});
  decoder.finish();
  QCOMPARE(decoder.counts().filtered_api_calls, std::uint64_t(6));
  QCOMPARE(decoder.counts().api_calls, std::uint64_t(2));
  QCOMPARE(writer.events.size(), std::size_t(2));
  QCOMPARE(writer.text(writer.events[0].name), std::string("cudaLaunchKernel"));
  QCOMPARE(writer.text(writer.events[1].name), std::string("cuLaunchKernel"));
}

void TestCuptiDecoder::stepsFromExternalCorrelation() {
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;  // kStepCorrelationKind
  x.externalId = 17;
  x.correlationId = 30;
  b.add_record(x);
  CUpti_ActivityExternalCorrelation other = x;  // someone else's kind: not a step
  other.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  other.externalId = 99;
  other.correlationId = 31;
  b.add_record(other);
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0,
                   T0 + 1, 1, 30));
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0,
                   T0 + 1, 1, 31));
  add_kernel(b, kernel(T0 + 5, T0 + 9, 0, 7, 30), kGemm);
  add_kernel(b, kernel(T0 + 10, T0 + 19, 0, 7, 31), kGemm);
  b.end_buffer();
  const auto run = replay(b.take());
  QCOMPARE(run->report.counts.external_correlations, std::uint64_t(2));
  for (const Event& e : run->writer.events)
    QCOMPARE(e.step, e.correlation == 30 ? 17 : -1);
  QCOMPARE(cs::profiler::kStepCorrelationKind, int(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2));
}

void TestCuptiDecoder::stepNames_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<int>("step");  // -1: not a step
  QTest::addRow("step N") << "step 12" << 12;
  QTest::addRow("Step#N") << "Step#3" << 3;
  QTest::addRow("iteration_N") << "iteration_7" << 7;
  QTest::addRow("Iteration N") << "Iteration 40" << 40;
  QTest::addRow("iter-N") << "iter-2" << 2;
  QTest::addRow("stepN") << "step5" << 5;
  QTest::addRow("ITER:N") << "ITER:0" << 0;
  QTest::addRow("PyTorch's") << "ProfilerStep#7" << 7;
  QTest::addRow("largest") << "step 2147483647" << 2147483647;
  QTest::addRow("past an int") << "step 2147483648" << -1;
  QTest::addRow("a word alone") << "step" << -1;
  QTest::addRow("a longer word") << "stepper 3" << -1;
  QTest::addRow("plural") << "steps 3" << -1;
  QTest::addRow("a tail") << "step 3 of 10" << -1;
  QTest::addRow("a head") << "train step 3" << -1;
  QTest::addRow("a sign") << "step -3" << -1;
  QTest::addRow("two separators") << "step  3" << -1;
  QTest::addRow("empty") << "" << -1;
}

void TestCuptiDecoder::stepNames() {
  QFETCH(QString, name);
  QFETCH(int, step);
  const auto found = cs::trace::step_of_range_name(name.toStdString());
  QCOMPARE(found ? *found : -1, step);
}

// A program traced from outside marks its steps with NVTX ranges: with
// steps_from_ranges (the injection library's), those of the first thread to
// close one are the rank's steps; others, and NCCL's, stay annotations.
void TestCuptiDecoder::stepsFromNvtxRanges() {
  auto build = [] {
    ReplayBuilder b(CUPTI_API_VERSION);
    b.begin_buffer();
    auto range = [&](std::uint32_t id, const char* name, std::uint64_t start, std::uint64_t end,
                     std::uint32_t thread, const char* domain = nullptr) {
      const auto start_marker = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, start, id, thread);
      if (domain) {
        b.add_record(start_marker,
                     {{offsetof(CUpti_ActivityMarker2, name), b.add_string(name)},
                      {offsetof(CUpti_ActivityMarker2, domain), b.add_string(domain)}});
      } else {
        b.add_record(start_marker, {{offsetof(CUpti_ActivityMarker2, name), b.add_string(name)}});
      }
      b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, end, id, thread));
    };
    range(1, "iteration 0", T0, T0 + 100, 100);
    range(2, "forward", T0 + 10, T0 + 40, 100);
    range(3, "iteration 1", T0 + 100, T0 + 200, 100);
    range(4, "step 9", T0 + 120, T0 + 130, 101);                   // another thread's
    range(5, "step 3", T0 + 140, T0 + 150, 100, "NCCL");           // NCCL's domain
    range(6, "Iteration 2", T0 + 200, T0 + 290, 100, "training");  // a domain of the program's
    // PyTorch's step range around one of the program's: the outer one is the
    // step, whichever order their records come in.
    range(7, "ProfilerStep#3", T0 + 300, T0 + 400, 100);
    range(8, "step 3", T0 + 310, T0 + 390, 100);
    b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, T0 + 400, 9, 100),
                 {{offsetof(CUpti_ActivityMarker2, name), b.add_string("ProfilerStep#4")}});
    b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, T0 + 410, 10, 100),
                 {{offsetof(CUpti_ActivityMarker2, name), b.add_string("step 4")}});
    b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, T0 + 490, 10, 100));
    b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, T0 + 500, 9, 100));
    add_kernel(b, kernel(T0 + 20, T0 + 60, 0, 7, 1), kGemm);
    b.end_buffer();
    return b.take();
  };
  auto options = replay_options();
  options.steps_from_ranges = true;
  const auto run = replay(build(), options);
  const auto steps = run->of_kind(EventKind::step);
  QCOMPARE(steps.size(), std::size_t(5));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    QCOMPARE(steps[i].step, static_cast<std::int32_t>(i));
    QCOMPARE(run->lane_name(steps[i]), std::string("steps"));
    QCOMPARE(run->writer.lane(steps[i].lane).kind, cs::trace::LaneKind::steps);
  }
  QCOMPARE(steps[1].start_ns, static_cast<std::int64_t>(T0 + 100));
  QCOMPARE(steps[1].end_ns, static_cast<std::int64_t>(T0 + 200));
  QCOMPARE(run->writer.text(steps[3].name), std::string("ProfilerStep#3"));
  QCOMPARE(run->writer.text(steps[4].name), std::string("ProfilerStep#4"));
  QCOMPARE(run->report.counts.steps, std::uint64_t(5));
  QCOMPARE(run->report.counts.nvtx_ranges, std::uint64_t(10));
  QStringList annotations;
  for (const Event& e : run->of_kind(EventKind::annotation))
    annotations << QString::fromStdString(run->writer.text(e.name) + " @ " + run->lane_name(e));
  annotations.sort();
  QCOMPARE(annotations, QStringList({"forward @ NVTX thread 100", "step 3 @ NVTX NCCL thread 100",
                                     "step 3 @ NVTX thread 100", "step 4 @ NVTX thread 100",
                                     "step 9 @ NVTX thread 101"}));
  QVERIFY(run->report.summary().find("10 NVTX ranges (5 of them steps)") != std::string::npos);

  // Off (the CUDA engine's worker, which records its steps itself): all
  // of them annotations.
  const auto plain = replay(build());
  QVERIFY(plain->of_kind(EventKind::step).empty());
  QCOMPARE(plain->of_kind(EventKind::annotation).size(), std::size_t(10));
}

// --capture-range cudaProfilerApi: what falls between the program's
// cudaProfilerStart and Stop is written, GPU work by the time of the call
// that launched it; the rest is counted.
void TestCuptiDecoder::captureRangeKeepsWhatFallsInIt() {
  auto range = std::make_shared<cs::profiler::CaptureRange>();
  QCOMPARE(range->spans(), 0);
  QVERIFY(!range->holds(static_cast<std::int64_t>(T0)));
  range->open(static_cast<std::int64_t>(T0 + 100));
  range->open(static_cast<std::int64_t>(T0 + 105));  // the driver's call inside the runtime's
  range->close(static_cast<std::int64_t>(T0 + 200));
  range->close(static_cast<std::int64_t>(T0 + 201));
  range->open(static_cast<std::int64_t>(T0 + 300));  // never stopped: open to the end
  QCOMPARE(range->spans(), 2);
  QVERIFY(range->holds(static_cast<std::int64_t>(T0 + 100)));
  QVERIFY(!range->holds(static_cast<std::int64_t>(T0 + 200)));
  QVERIFY(range->holds(static_cast<std::int64_t>(T0 + 1'000'000)));

  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  const auto launch = [&](std::uint64_t start, std::uint32_t correlation) {
    b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                     start, start + 5, 100, correlation));
  };
  launch(T0 + 50, 1);   // before the range: it and its kernel, run inside, left out
  launch(T0 + 150, 2);  // inside: it and its kernel, run after the stop, kept
  launch(T0 + 250, 3);  // between the spans: left out
  add_kernel(b, kernel(T0 + 110, T0 + 120, 0, 7, 1), kGemm);
  add_kernel(b, kernel(T0 + 210, T0 + 230, 0, 7, 2), kGemm);
  add_kernel(b, kernel(T0 + 260, T0 + 270, 0, 7, 3), kGemm);
  add_kernel(b, kernel(T0 + 310, T0 + 320, 0, 7, 99), kGemm);  // its call unknown: its own start
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, T0 + 20, 1, 100),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string("step 0")}});
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, T0 + 90, 1, 100));
  // Started just before cudaProfilerStart: the capture's, as it meets it.
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, T0 + 95, 2, 100),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string("step 1")}});
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, T0 + 190, 2, 100));
  b.end_buffer();
  auto options = replay_options();
  options.steps_from_ranges = true;
  options.capture_range = range;
  const auto run = replay(b.take(), options);
  const auto kernels = run->of_kind(EventKind::kernel);
  QCOMPARE(kernels.size(), std::size_t(2));
  QCOMPARE(kernels[0].correlation, std::int64_t(2));
  QCOMPARE(kernels[1].correlation, std::int64_t(99));
  const auto calls = run->of_kind(EventKind::api_call);
  QCOMPARE(calls.size(), std::size_t(1));
  QCOMPARE(calls[0].correlation, std::int64_t(2));
  const auto steps = run->of_kind(EventKind::step);
  QCOMPARE(steps.size(), std::size_t(1));
  QCOMPARE(steps[0].step, 1);
  QCOMPARE(steps[0].start_ns, static_cast<std::int64_t>(T0 + 95));
  QCOMPARE(run->report.counts.outside_capture_range, std::uint64_t(5));
  QCOMPARE(run->report.counts.kernels, std::uint64_t(4));  // all seen, two written
  QCOMPARE(run->report.counts.gpu_work_written, std::uint64_t(2));
  QCOMPARE(run->report.counts.steps, std::uint64_t(1));  // written, not seen
  QVERIFY2(
      run->report.summary().find("5 outside the capture range (not written)") != std::string::npos,
      run->report.summary().c_str());
  QVERIFY(run->report.warnings.empty());

  // A range that never opened: nothing is written, and the report says why.
  ReplayBuilder never(CUPTI_API_VERSION);
  never.begin_buffer();
  add_kernel(never, kernel(T0 + 10, T0 + 20, 0, 7, 5), kGemm);
  never.end_buffer();
  auto closed = replay_options();
  closed.capture_range = std::make_shared<cs::profiler::CaptureRange>();
  const auto none = replay(never.take(), closed);
  QVERIFY(none->of_kind(EventKind::kernel).empty());
  QCOMPARE(none->report.counts.outside_capture_range, std::uint64_t(1));
  QCOMPARE(none->report.counts.gpu_work_written, std::uint64_t(0));
  QVERIFY2(std::any_of(none->report.warnings.begin(), none->report.warnings.end(),
                       [](const std::string& w) {
                         return w.find(
                                    "the capture range never opened: the program did not call "
                                    "cudaProfilerStart") != std::string::npos;
                       }),
           "no warning");
}

// CUPTI's callbacks of the program's profiler calls, as it delivers them:
// cudaProfilerStart reaches it as the runtime's call and, inside it, the
// driver's, each at its entry and its exit.
void TestCuptiDecoder::profilerCallsOpenAndCloseTheRange() {
  using cs::profiler::follow_profiler_call;
  cs::profiler::CaptureRange range;
  auto call = [&](CUpti_CallbackDomain domain, std::uint32_t cbid, CUpti_ApiCallbackSite site) {
    CUpti_CallbackData data{};
    data.callbackSite = site;
    follow_profiler_call(range, domain, cbid, &data);
  };
  const auto runtime = CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto driver = CUPTI_CB_DOMAIN_DRIVER_API;
  // Other calls and sites, and no call data, do nothing.
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER);
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
  call(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_ENTER);
  follow_profiler_call(range, runtime, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, nullptr);
  QCOMPARE(range.spans(), 0);
  // torch.cuda.profiler.start(): opened once.
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_ENTER);
  const std::int64_t opened = cs::trace::run_clock_ns();
  call(driver, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_ENTER);
  call(driver, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_EXIT);
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
  QCOMPARE(range.spans(), 1);
  QVERIFY(range.holds(opened));
  // stop(): closed at its entry.
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, CUPTI_API_ENTER);
  const std::int64_t closed = cs::trace::run_clock_ns();
  call(driver, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_ENTER);
  QVERIFY(range.holds(opened));
  QVERIFY(!range.holds(closed));
  // A driver-only start (cuProfilerStart called directly) opens a second span.
  call(driver, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_ENTER);
  QCOMPARE(range.spans(), 2);
  QVERIFY(range.holds(cs::trace::run_clock_ns()));
}

void TestCuptiDecoder::syncWaitsForItsCall() {
  ReplayBuilder b(CUPTI_API_VERSION);
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  s.start = T0 + 10;
  s.end = T0 + 90;
  s.correlationId = 61;
  b.begin_buffer();
  b.add_record(s);  // before the call that made it
  CUpti_ActivitySynchronization2 orphan = s;
  orphan.correlationId = 62;  // its call is never seen
  b.add_record(orphan);
  b.end_buffer();
  b.begin_buffer();
  b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
                   T0, T0 + 100, 123, 61));
  b.end_buffer();
  const auto run = replay(b.take());
  const auto syncs = run->of_kind(EventKind::sync);
  QCOMPARE(syncs.size(), std::size_t(2));
  for (const Event& e : syncs) {
    QCOMPARE(e.category, Category::synchronization);
    QCOMPARE(QString::fromStdString(run->lane_name(e)),
             e.correlation == 61 ? QString("Thread 123")
                                 : QString("Synchronization (calling thread unknown)"));
  }
}

void TestCuptiDecoder::overflowDropsAndReports() {
  // Six buffers of three kernels; a pool of two 4 KiB buffers. CUPTI asks for
  // buffers ahead of filling them, so the last four are refused: their twelve
  // records are dropped, and CUPTI reported five more dropped after buffer six.
  ReplayBuilder b(CUPTI_API_VERSION);
  std::uint32_t correlation = 1;
  for (int buffer = 0; buffer < 6; ++buffer) {
    b.begin_buffer();
    for (int i = 0; i < 3; ++i, ++correlation) {
      add_kernel(b, kernel(T0 + correlation * 100, T0 + correlation * 100 + 50, 0, 7, correlation),
                 kGemm);
    }
    b.end_buffer(buffer == 5 ? 5 : 0);
  }
  const auto run = replay(b.take(), replay_options(4096, 8192));
  QCOMPARE(run->writer.events.size(), std::size_t(6));
  QCOMPARE(run->report.refused_buffers, std::uint64_t(4));
  QCOMPARE(run->report.dropped_records, std::uint64_t(17));
  QCOMPARE(run->report.peak_buffer_bytes, std::size_t(8192));
  QCOMPARE(run->writer.meta.at("tracer.dropped_records"), std::string("17"));
  QCOMPARE(run->writer.meta.at("tracer.refused_buffers"), std::string("4"));
  const auto warnings = nlohmann::json::parse(run->writer.meta.at("tracer.warnings"));
  QVERIFY2(warnings.dump().find("17 activity records were dropped") != std::string::npos,
           warnings.dump().c_str());
  QVERIFY(run->report.summary().find("17 records dropped") != std::string::npos);
  const auto counts = nlohmann::json::parse(run->writer.meta.at("tracer.counts"));
  QCOMPARE(counts.at("kernels").get<int>(), 6);
}

void TestCuptiDecoder::dropWarningSaysWhoDropped_data() {
  // The warning blamed full trace buffers ("full 0 times (decoding fell
  // behind)") even when none was refused and CUPTI alone reported the drops.
  QTest::addColumn<std::size_t>("cap");
  QTest::addColumn<QString>("expected");
  QTest::addColumn<QString>("absent");
  QTest::addRow("buffers refused")
      << std::size_t(4096)
      << "4 activity records were dropped: the 4.00 KiB of trace buffers "
         "were full 1 times"
      << "CUPTI itself";
  QTest::addRow("only CUPTI's own drops")
      << std::size_t(16 << 20) << "3 activity records were dropped by CUPTI itself"
      << "were full";
}

void TestCuptiDecoder::dropWarningSaysWhoDropped() {
  QFETCH(std::size_t, cap);
  QFETCH(QString, expected);
  QFETCH(QString, absent);
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  add_kernel(b, kernel(T0 + 100, T0 + 200, 0, 7, 1), kGemm);
  b.end_buffer();
  b.begin_buffer();
  add_kernel(b, kernel(T0 + 300, T0 + 400, 0, 7, 2), kGemm);
  b.end_buffer(3);  // CUPTI reported three records dropped after this buffer
  const auto run = replay(b.take(), replay_options(4096, cap));
  const std::string warnings = nlohmann::json::parse(run->writer.meta.at("tracer.warnings")).dump();
  QVERIFY2(warnings.find(expected.toStdString()) != std::string::npos, warnings.c_str());
  QVERIFY2(warnings.find(absent.toStdString()) == std::string::npos, warnings.c_str());
}

void TestCuptiDecoder::captureThatCannotBeWrittenIsStored() {
  // The capture is written at the end; its failure was added to the report
  // after the warnings had gone into the store, so the store never said so.
  QTemporaryDir dir;
  QFile blocker(dir.filePath("not-a-folder"));
  QVERIFY(blocker.open(QIODevice::WriteOnly));
  blocker.close();
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  add_kernel(b, kernel(T0 + 100, T0 + 200, 0, 7, 1), kGemm);
  b.end_buffer();
  auto options = replay_options();
  options.capture_path = dir.filePath("not-a-folder/captured.cupti").toStdString();
  const auto run = replay(b.take(), options);
  QCOMPARE(run->writer.events.size(), std::size_t(1));
  const std::string warnings = nlohmann::json::parse(run->writer.meta.at("tracer.warnings")).dump();
  QVERIFY2(warnings.find(options.capture_path + ": cannot create the file") != std::string::npos,
           warnings.c_str());
}

void TestCuptiDecoder::recordingFileRoundTrip() {
  auto build = [] {
    ReplayBuilder b(CUPTI_API_VERSION);
    b.begin_buffer();
    nccl_range_start(b, "ncclAllGather", 70, T0 + 100, 400, 4, {0xabc, 3 << 20, 0});
    b.add_record(api(CUPTI_ACTIVITY_KIND_RUNTIME,
                     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, T0 + 200, T0 + 300, 400,
                     90));
    nccl_range_end(b, 70, T0 + 400, 400);
    add_kernel(b, kernel(T0 + 500, T0 + 900, 0, 30, 90), kGeneric);
    b.end_buffer(2);
    return b.take();
  };
  QTemporaryDir dir;
  const std::string path = dir.filePath("run.cupti").toStdString();
  QVERIFY(cs::profiler::write_replay(path, build()).ok());
  auto from_file = cs::profiler::open_replay_source(path);
  QVERIFY2(from_file.ok(), from_file.ok() ? "" : from_file.message().c_str());
  QVERIFY((*from_file)->describe().find("run.cupti") != std::string::npos);

  MemoryTraceWriter writer;
  auto tracer = cs::profiler::Tracer::start(std::move(from_file).value(), writer, replay_options());
  QVERIFY(tracer.ok());
  const auto report = (*tracer)->finalize();
  const auto direct = replay(build());
  QCOMPARE(writer.events.size(), direct->writer.events.size());
  for (std::size_t i = 0; i < writer.events.size(); ++i) {
    const Event& a = writer.events[i];
    const Event& b = direct->writer.events[i];
    QCOMPARE(writer.text(a.name), direct->writer.text(b.name));
    QCOMPARE(a.start_ns, b.start_ns);
    QCOMPARE(a.end_ns, b.end_ns);
    QCOMPARE(a.bytes, b.bytes);
    QCOMPARE(a.collective, b.collective);
  }
  // The Generic kernel took its collective from the ncclAllGather range.
  const auto collectives = direct->of_kind(EventKind::collective);
  QCOMPARE(collectives.size(), std::size_t(1));
  QCOMPARE(collectives[0].collective, Collective::all_gather);
  QCOMPARE(collectives[0].bytes, std::int64_t(3 << 20));
  QCOMPARE(report.dropped_records, std::uint64_t(2));
}

void TestCuptiDecoder::captureRecordsWhatItDecodes() {
  // What a run on a GPU keeps with CLUSTERSCOPE_CUPTI_CAPTURE: the buffers as
  // handed over, names and NVTX payloads copied out. Replaying the capture
  // gives the same events.
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  nccl_range_start(b, "ncclReduceScatter", 80, T0 + 100, 500, 7, {0xfeed, 1 << 16, 0});
  b.add_record(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, T0 + 200,
                   T0 + 300, 500, 95));
  nccl_range_end(b, 80, T0 + 400, 500);
  b.end_buffer();
  b.begin_buffer();
  add_kernel(b, kernel(T0 + 500, T0 + 900, 0, 31, 95),
             "_Z43ncclDevKernel_ReduceScatter_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE");
  add_kernel(b, kernel(T0 + 1000, T0 + 1900, 0, 7, 96), kGemm);
  b.end_buffer(3);
  QTemporaryDir dir;
  auto options = replay_options();
  options.capture_path = dir.filePath("captured.cupti").toStdString();
  const auto first = replay(b.take(), options);
  QVERIFY(QFile::exists(dir.filePath("captured.cupti")));

  auto captured = cs::profiler::open_replay_source(options.capture_path);
  QVERIFY2(captured.ok(), captured.ok() ? "" : captured.message().c_str());
  MemoryTraceWriter writer;
  auto tracer = cs::profiler::Tracer::start(std::move(captured).value(), writer, replay_options());
  QVERIFY(tracer.ok());
  const auto report = (*tracer)->finalize();
  QCOMPARE(writer.events.size(), first->writer.events.size());
  QCOMPARE(writer.events.size(), std::size_t(4));
  for (std::size_t i = 0; i < writer.events.size(); ++i) {
    const Event& a = writer.events[i];
    const Event& c = first->writer.events[i];
    QCOMPARE(writer.text(a.name), first->writer.text(c.name));
    QCOMPARE(a.kind, c.kind);
    QCOMPARE(a.start_ns, c.start_ns);
    QCOMPARE(a.end_ns, c.end_ns);
    QCOMPARE(a.bytes, c.bytes);
    QCOMPARE(a.collective, c.collective);
    QCOMPARE(a.correlation, c.correlation);
  }
  const auto collectives = first->of_kind(EventKind::collective);
  QCOMPARE(collectives.size(), std::size_t(1));
  QCOMPARE(collectives[0].collective, Collective::reduce_scatter);
  QCOMPARE(collectives[0].bytes, std::int64_t(1 << 16));
  QCOMPARE(collectives[0].count, std::int64_t(1 << 14));
  QCOMPARE(report.dropped_records, std::uint64_t(3));  // CUPTI's drop report is captured too
}

void TestCuptiDecoder::damagedRecordings_data() {
  QTest::addColumn<QString>("damage");
  QTest::addColumn<QString>("message");  // empty: reads, and replays without a crash
  QTest::addRow("not a recording") << "magic"
                                   << "not a CUPTI activity recording";
  QTest::addRow("future format") << "version"
                                 << "recording format version 2 is not the supported version 1";
  QTest::addRow("cut short") << "truncate"
                             << "truncated";
  QTest::addRow("fixup out of range") << "fixup"
                                      << "points outside the recording";
  QTest::addRow("huge segment") << "size"
                                << "claims";
  // Counts and sizes past the file's bytes were allocated before reading
  // (16M segments: 640 MiB; a 4 GiB segment: 4 GiB); now the file is cut short.
  QTest::addRow("segment past the file") << "size 4 GiB"
                                         << "truncated segment";
  QTest::addRow("segment count past the file") << "count"
                                               << "truncated segment";
  QTest::addRow("fixup count past the file") << "fixup count"
                                             << "truncated fixup";
  QTest::addRow("trailing bytes") << "append"
                                  << "unexpected bytes after the fixup table";
  QTest::addRow("scrambled records") << "scramble"
                                     << "";
  QTest::addRow("missing file") << "missing"
                                << "cannot open file";
}

void TestCuptiDecoder::damagedRecordings() {
  QFETCH(QString, damage);
  QFETCH(QString, message);
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  add_kernel(b, kernel(T0, T0 + 10, 0, 7, 1), kAllReduceBf16);
  b.add_record(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, T0, 3, 1),
               {{offsetof(CUpti_ActivityMarker2, name), b.add_string("x")}});
  b.end_buffer();
  QTemporaryDir dir;
  const std::string path = dir.filePath("damaged.cupti").toStdString();
  QVERIFY(cs::profiler::write_replay(path, b.recording()).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::size_t first_segment = 24;  // after magic, version, CUPTI version, count
  if (damage == "magic") bytes[0] = 'X';
  if (damage == "version") bytes[8] = 2;
  if (damage == "truncate") bytes.resize(bytes.size() / 2);
  if (damage == "fixup") bytes[bytes.size() - 20] = 9;  // the last fixup's target segment
  if (damage == "size") bytes[first_segment + 16 + 6] = 0x7f;
  if (damage == "size 4 GiB")
    bytes.replace(first_segment + 16, 8, std::string("\0\0\0\0\1\0\0\0", 8));
  if (damage == "count") bytes[16 + 3] = 1;  // + 2^24 segments
  if (damage == "fixup count") {
    // The fixup table follows the last segment: its count is 8 bytes before
    // its entries (24 bytes each).
    const std::size_t fixups = b.recording().fixups.size();
    bytes[bytes.size() - 24 * fixups - 8 + 3] = 1;  // + 2^24 fixups
  }
  if (damage == "append") bytes += "junk";
  if (damage == "scramble") {
    // Keep the kernel's kind but garble everything after it in the buffer.
    for (std::size_t i = first_segment + 24 + 40; i < first_segment + 24 + 216 + 56; ++i) {
      bytes[i] = static_cast<char>(i * 37 + 11);
    }
  }
  if (damage != "missing") {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  auto source = cs::profiler::open_replay_source(damage == "missing" ? path + ".gone" : path);
  if (!message.isEmpty()) {
    QVERIFY(!source.ok());
    QVERIFY2(QString::fromStdString(source.message()).contains(message), source.message().c_str());
    QVERIFY2(QString::fromStdString(source.message()).contains("damaged.cupti"),
             source.message().c_str());
    return;
  }
  QVERIFY(source.ok());
  MemoryTraceWriter writer;
  auto tracer = cs::profiler::Tracer::start(std::move(source).value(), writer, replay_options());
  QVERIFY(tracer.ok());
  (*tracer)->finalize();  // whatever the garbage says, no crash and no stray pointer followed
}

namespace {

// Replays a recording made on an H200 (tests/data/gpu/README.md) through the
// tracer, with the checks that hold for any healthy trace.
std::unique_ptr<Replayed> replay_h200(const char* file) {
  const std::string path = std::string(CS_DATA_DIR) + "/gpu/" + file;
  auto source = cs::profiler::open_replay_source(path);
  if (!source) qFatal("%s", source.message().c_str());
  auto run = std::make_unique<Replayed>();
  auto options =
      replay_options(std::size_t{1} << 20, std::size_t{256} << 20);  // room for every buffer
  auto tracer = cs::profiler::Tracer::start(std::move(source).value(), run->writer, options);
  if (!tracer) qFatal("%s", tracer.message().c_str());
  run->report = (*tracer)->finalize();
  return run;
}

// Every kernel's launch is in the trace; GPU work on a stream never overlaps.
void check_healthy(const Replayed& run) {
  QCOMPARE(run.report.dropped_records, std::uint64_t(0));
  QCOMPARE(run.report.counts.invalid_buffers, std::uint64_t(0));
  QCOMPARE(run.report.counts.without_timestamps, std::uint64_t(0));
  std::set<std::int64_t> calls;
  for (const Event& e : run.writer.events) {
    if (e.kind == EventKind::api_call) calls.insert(e.correlation);
  }
  std::map<std::uint32_t, std::vector<const Event*>> streams;
  for (const Event& e : run.writer.events) {
    QVERIFY(e.end_ns >= e.start_ns);
    QVERIFY(e.start_ns > std::int64_t(T0));  // CLOCK_REALTIME nanoseconds of 2026
    if (e.kind == EventKind::kernel)
      QVERIFY2(calls.count(e.correlation), run.writer.text(e.name).c_str());
    if (run.writer.lane(e.lane).kind == LaneKind::gpu_stream) streams[e.lane.value].push_back(&e);
  }
  for (auto& [lane, events] : streams) {
    std::sort(events.begin(), events.end(),
              [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    for (std::size_t i = 1; i < events.size(); ++i)
      QVERIFY(events[i]->start_ns >= events[i - 1]->end_ns);
  }
}

}  // namespace

void TestCuptiDecoder::realH200Probe() {
  // tests/gpu/cupti_gpu_probe.cpp's known work, recorded on the GPU.
  const auto run = replay_h200("h200_probe.cupti");
  check_healthy(*run);
  const auto& c = run->report.counts;
  // As decoded live on the H200 (its report: 6 kernels, 134 copies, 195
  // memsets, 137 syncs, 10 NVTX ranges, 109 overheads).
  QCOMPARE(c.kernels, std::uint64_t(6));
  QCOMPARE(c.memcpys, std::uint64_t(134));
  QCOMPARE(c.memsets, std::uint64_t(195));
  QCOMPARE(c.syncs, std::uint64_t(137));
  QCOMPARE(c.nvtx_ranges, std::uint64_t(10));
  QCOMPARE(c.overheads, std::uint64_t(109));
  int scales = 0, stepped = 0, sized_ranges = 0, comm_ranges = 0, nccl_copies = 0, htod = 0;
  for (const Event& e : run->writer.events) {
    const std::string name = run->writer.text(e.name);
    if (name == "scale_kernel(float*, float, int)") ++scales;
    if (e.kind == EventKind::kernel && e.step == 7) ++stepped;
    if (e.kind == EventKind::annotation && name.rfind("ncclAllReduce (comm ", 0) == 0) {
      ++comm_ranges;
      if (e.bytes == 2 << 20 && e.collective == Collective::all_reduce) ++sized_ranges;
    }
    if (name == "Memcpy DtoD" && e.bytes == 2 << 20) ++nccl_copies;
    if (name == "Memcpy HtoD" && e.bytes == 4 << 20) ++htod;
  }
  QCOMPARE(scales, 4);
  QCOMPARE(stepped, 6);
  QCOMPARE(comm_ranges, 6);
  QCOMPARE(sized_ranges, 4);
  QCOMPARE(nccl_copies, 1);
  QCOMPARE(htod, 2);
}

void TestCuptiDecoder::realH200PyTorchDdp() {
  // scripts/gpu/torch_ddp_smoke.py, 30 steps, rank 0 of 1 under torchrun,
  // recorded by the injection library.
  const auto run = replay_h200("h200_torch_ddp_rank0.cupti");
  check_healthy(*run);
  QCOMPARE(run->report.counts.kernels, std::uint64_t(1733));
  QCOMPARE(run->report.counts.memcpys, std::uint64_t(404));
  QCOMPARE(run->report.counts.syncs, std::uint64_t(994));
  int steps = 0, all_reduces = 0, known_size = 0, ddp_buckets = 0;
  for (const Event& e : run->writer.events) {
    const std::string name = run->writer.text(e.name);
    if (e.kind != EventKind::annotation) continue;
    if (name.rfind("step ", 0) == 0 && run->lane_name(e).rfind("NVTX thread ", 0) == 0) ++steps;
    if (name.rfind("ncclAllReduce (comm ", 0) == 0 &&
        run->lane_name(e).rfind("NVTX NCCL thread ", 0) == 0) {
      ++all_reduces;
      if (e.bytes == 2 << 20) ++known_size;  // the script's 2 MiB bf16 all-reduce
      if (e.bytes > 4 << 20) ++ddp_buckets;
    }
  }
  QCOMPARE(steps, 30);
  QCOMPARE(all_reduces, 119);
  QCOMPARE(known_size, 1);
  QVERIFY(ddp_buckets >= 30);
  // PyTorch's noise is filtered: no cudaThreadExchangeStreamCaptureMode.
  QVERIFY(!run->named("cudaThreadExchangeStreamCaptureMode"));
  QVERIFY(run->named("cudaLaunchKernel"));
}

// The PyTorch program's "step N" ranges, recorded on the H200, are its steps
// once the injection library takes steps from ranges: written into a real
// store, the analysis finds its 30 steps, the first (CUDA's start, cuBLAS's
// and NCCL's set-up) left out as warm-up.
void TestCuptiDecoder::realH200PyTorchDdpSteps() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("ddp.db").toStdString();
  {
    auto source = cs::profiler::open_replay_source(std::string(CS_DATA_DIR) +
                                                   "/gpu/h200_torch_ddp_rank0.cupti");
    QVERIFY2(source, source ? "" : source.message().c_str());
    cs::trace::RunInfo info;
    info.title = "replayed";
    info.source = "cupti";
    auto writer = cs::trace::TraceWriter::create(path, info);
    QVERIFY2(writer, writer ? "" : writer.message().c_str());
    auto options = replay_options(std::size_t{1} << 20, std::size_t{256} << 20);
    options.rank.rank = 0;
    options.steps_from_ranges = true;
    auto tracer = cs::profiler::Tracer::start(std::move(source).value(), **writer, options);
    QVERIFY2(tracer, tracer ? "" : tracer.message().c_str());
    QCOMPARE((*tracer)->finalize().counts.steps, std::uint64_t(30));
    tracer->reset();
    QVERIFY((*writer)->close());
  }
  auto reader = cs::trace::TraceReader::open(path);
  QVERIFY2(reader, reader ? "" : reader.message().c_str());
  auto windows = cs::trace::job_step_windows(**reader);
  QVERIFY2(windows, windows ? "" : windows.message().c_str());
  QCOMPARE(windows->size(), std::size_t(30));
  std::vector<double> lengths;
  for (std::size_t i = 0; i < windows->size(); ++i) {
    QCOMPARE((*windows)[i].step, static_cast<std::int32_t>(i));
    if (i > 0) QVERIFY((*windows)[i].start >= (*windows)[i - 1].end);
    lengths.push_back(double((*windows)[i].end - (*windows)[i].start));
  }
  QVERIFY(cs::trace::warm_up_steps(lengths) >= 1);
  auto analysis = cs::trace::analyze_run(**reader);
  QVERIFY2(analysis, analysis ? "" : analysis.message().c_str());
  QCOMPARE(analysis->ranks.size(), std::size_t(1));
  const auto& rank = analysis->ranks.front();
  QCOMPARE(rank.steps.size(), std::size_t(30));
  // Each step of the loop ran its kernels: compute in every step.
  for (const auto& step : rank.steps)
    QVERIFY2(step.breakdown.compute_ns > 0, qPrintable(QString::number(step.step)));
  // The median step is the loop's (about 3 ms on the H200), not the first's
  // (324 ms).
  QCOMPARE(analysis->stragglers.ranks.size(), std::size_t(1));
  const double median = analysis->stragglers.ranks.front().step_ns;
  QVERIFY2(median > 1e6 && median < 10e6, qPrintable(QString::number(median)));
}

void TestCuptiDecoder::cuptiSourceWithoutDriverFailsCleanly() {
  // This machine has CUPTI but no driver and no GPU: starting fails with a
  // sentence, and a second attempt (or the tracer) fails the same way.
  cs::profiler::BufferPool pool(1 << 20, 4 << 20);
  cs::profiler::BufferQueue queue;
  auto source = cs::profiler::make_cupti_source();
  const cs::Status started = source->start(pool, queue);
  QVERIFY(!started.ok());
  QVERIFY2(QString::fromStdString(started.message()).contains("no usable NVIDIA GPU and driver"),
           started.message().c_str());
  MemoryTraceWriter writer;
  auto tracer =
      cs::profiler::Tracer::start(cs::profiler::make_cupti_source(), writer, replay_options());
  QVERIFY(!tracer.ok());
  QVERIFY(writer.events.empty());
  QVERIFY(writer.ranks.empty());
  QVERIFY(cs::profiler::loaded_cupti_version() >= 130000);
}

void TestCuptiDecoder::memoryCounterNeedsADriver() {
  auto options = replay_options();
  options.memory_sample_period = std::chrono::milliseconds(10);
  ReplayBuilder b(CUPTI_API_VERSION);
  b.begin_buffer();
  add_kernel(b, kernel(T0, T0 + 10, 0, 7, 1), kGemm);
  b.end_buffer();
  const auto run = replay(b.take(), options);
  QVERIFY(run->writer.counters.empty());
  const auto warnings = nlohmann::json::parse(run->writer.meta.at("tracer.warnings"));
  QVERIFY2(
      warnings.dump().find("no GPU memory counter: no CUDA driver is loaded") != std::string::npos,
      warnings.dump().c_str());
}

QTEST_GUILESS_MAIN(TestCuptiDecoder)
#include "tst_cupti_decoder.moc"
