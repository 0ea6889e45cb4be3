// The CUPTI tracer on a real GPU, in one process: starts the tracer with the
// CUPTI source, does known CUDA work (copies, a memset, cuBLAS GEMMs on two
// streams, syncs, NVTX ranges, a training-step correlation, NCCL all-reduces
// on a one-GPU communicator, alone and grouped), finalizes, and checks what
// was recorded against what was done. Prints one "check NAME: ok|FAIL ..."
// line per check and writes the events (TSV), a summary (JSON) and the raw
// CUPTI buffers (a replay recording, for the replay tests) to OUT_DIR.
//
// Built and run by scripts/gpu/cupti_device_check.sh. Usage: cupti_gpu_probe OUT_DIR

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if CS_PROBE_NCCL
#include <nccl.h>
#endif
#if CS_PROBE_CUBLAS
#include <cublas_v2.h>
#endif

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/cupti/cupti_source.h"
#include "profiler/cupti/tracer.h"
#include "tests/profiler/memory_trace_writer.h"

using cs::trace::Category;
using cs::trace::Collective;
using cs::trace::Event;
using cs::trace::EventKind;
using cs::trace::LaneKind;

void launch_scale(float* x, float factor, int n, cudaStream_t stream);  // probe_kernels.cu

namespace {

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int failures = 0;
nlohmann::json checks = nlohmann::json::object();

void check(const std::string& name, bool ok, const std::string& detail = "") {
  std::printf("check %s: %s%s%s\n", name.c_str(), ok ? "ok" : "FAIL", detail.empty() ? "" : " -- ",
              detail.c_str());
  checks[name] = {{"ok", ok}, {"detail", detail}};
  if (!ok) ++failures;
}

#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      return 3;                                                                            \
    }                                                                                      \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cupti_gpu_probe OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  cs::test::MemoryTraceWriter writer;
  cs::profiler::TracerOptions options;
  options.rank.rank = 0;
  options.rank.host = "gpu-probe";
  options.rank.pid = getpid();
  options.capture_path = out + "/probe.cupti";
  const std::int64_t t_before = now_ns();
  auto tracer = cs::profiler::Tracer::start(cs::profiler::make_cupti_source(), writer, options);
  check("tracer starts on CUPTI", tracer.ok(), tracer.ok() ? "" : tracer.message());
  if (!tracer) return 1;
  const auto main_thread = static_cast<std::uint32_t>(syscall(SYS_gettid));

  // --- known work ------------------------------------------------------------
  constexpr int n = 1024;  // GEMM size
  constexpr std::size_t bytes = std::size_t{n} * n * sizeof(float);
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s1 = nullptr, s2 = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  float *a = nullptr, *b = nullptr, *c = nullptr, *host = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  CUDA_OK(cudaMalloc(&c, bytes));
  CUDA_OK(cudaMallocHost(&host, bytes));
  std::fill(host, host + std::size_t{n} * n, 1.0f);
  nvtxRangePushA("probe:work");
  cs::profiler::push_step_correlation(7);
  CUDA_OK(cudaMemcpyAsync(a, host, bytes, cudaMemcpyHostToDevice, s1));
  CUDA_OK(cudaMemcpyAsync(b, host, bytes, cudaMemcpyHostToDevice, s1));
  CUDA_OK(cudaMemsetAsync(c, 0, bytes, s2));
  for (int i = 0; i < 3; ++i)
    launch_scale(a, 2.0f, n * n, s1);  // a = 8
  launch_scale(c, 2.0f, n * n, s2);
  CUDA_OK(cudaGetLastError());
#if CS_PROBE_CUBLAS
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasCreate failed\n");
    return 3;
  }
  const float one = 1.0f, zero = 0.0f;
  cublasSetStream(blas, s1);
  for (int i = 0; i < 2; ++i)
    cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
#else
  CUDA_OK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, s1));
#endif
  CUDA_OK(cudaStreamSynchronize(s1));
  cs::profiler::pop_step_correlation();
  cudaEvent_t done = nullptr;
  CUDA_OK(cudaEventCreate(&done));
  CUDA_OK(cudaEventRecord(done, s2));
  CUDA_OK(cudaEventSynchronize(done));
  CUDA_OK(cudaMemcpy(host, c, bytes, cudaMemcpyDeviceToHost));
  nvtxRangePop();
#if CS_PROBE_CUBLAS
  const float expected = 8.0f * n;  // c = a b with a = 8, b = 1
#else
  const float expected = 8.0f;
#endif
  const bool result_right = host[0] == expected;

  std::int64_t nccl_single_bytes = 0;
#if CS_PROBE_NCCL
  ncclComm_t comm = nullptr;
  int device = 0;
  const bool nccl_up = ncclCommInitAll(&comm, 1, &device) == ncclSuccess;
  check("nccl communicator", nccl_up);
  if (nccl_up) {
    // With one rank NCCL launches no kernel: an in-place all-reduce does
    // nothing on the GPU, an out-of-place one copies. Its NVTX ranges are
    // real, with the payload NCCL gives them.
    constexpr std::size_t count = 1 << 19;  // 2 MiB: no other copy has that size
    nccl_single_bytes = count * sizeof(float);
    for (int i = 0; i < 3; ++i)
      ncclAllReduce(a, a, count, ncclFloat, ncclSum, comm, s1);
    ncclAllReduce(a, b, count, ncclFloat, ncclSum, comm, s1);
    ncclGroupStart();
    ncclAllReduce(b, b, count / 2, ncclFloat, ncclSum, comm, s1);
    ncclAllReduce(c, c, count / 4, ncclFloat, ncclSum, comm, s1);
    ncclGroupEnd();
    CUDA_OK(cudaStreamSynchronize(s1));
    ncclCommDestroy(comm);
  }
#endif
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a few memory samples
  const cs::profiler::TracerReport report = (*tracer)->finalize();
  const std::int64_t t_after = now_ns();
#if CS_PROBE_CUBLAS
  cublasDestroy(blas);
#endif

  // --- what was recorded -----------------------------------------------------
  std::printf("report: %s\n", report.summary().c_str());
  for (const std::string& w : report.warnings)
    std::printf("warning: %s\n", w.c_str());
  const auto& events = writer.events;
  auto name_of = [&](const Event& e) { return writer.text(e.name); };
  auto lane_of = [&](const Event& e) { return writer.lane(e.lane); };

  check("result", result_right, "c[0] = " + std::to_string(host[0]));
  check("no records dropped", report.dropped_records == 0 && report.counts.invalid_buffers == 0,
        std::to_string(report.dropped_records) + " dropped, " +
            std::to_string(report.counts.invalid_buffers) + " invalid buffers");

  std::map<std::int64_t, int> launches;  // correlation -> api calls
  for (const Event& e : events) {
    if (e.kind == EventKind::api_call) ++launches[e.correlation];
  }
  int kernels = 0, scales = 0, gemms = 0, linked = 0, stepped = 0;
  for (const Event& e : events) {
    if (e.kind != EventKind::kernel) continue;
    ++kernels;
    const std::string name = name_of(e);
    if (name == "scale_kernel(float*, float, int)") ++scales;
    if (name.find("gemm") != std::string::npos || name.find("Gemm") != std::string::npos) ++gemms;
    if (launches.count(e.correlation)) ++linked;
    if (e.step == 7) ++stepped;
  }
  check("kernels recorded and demangled", scales == 4,
        std::to_string(scales) + " scale_kernel(float*, float, int) of " + std::to_string(kernels) +
            " kernels");
#if CS_PROBE_CUBLAS
  check("cublas kernels", gemms >= 2, std::to_string(gemms) + " with gemm in the name");
#endif
  check("kernels linked to launches", kernels > 0 && linked == kernels,
        std::to_string(linked) + " of " + std::to_string(kernels));
  check("step correlation", stepped >= 4, std::to_string(stepped) + " kernels of step 7");

  int htod = 0, dtoh = 0, memsets = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::memcpy && name_of(e) == "Memcpy HtoD" &&
        e.bytes == std::int64_t(bytes))
      ++htod;
    if (e.kind == EventKind::memcpy && name_of(e) == "Memcpy DtoH" &&
        e.bytes == std::int64_t(bytes))
      ++dtoh;
    if (e.kind == EventKind::memset && e.bytes == std::int64_t(bytes)) ++memsets;
  }
  check("copies with sizes", htod == 2 && dtoh == 1,
        std::to_string(htod) + " HtoD, " + std::to_string(dtoh) + " DtoH");
  check("memset with size", memsets == 1, std::to_string(memsets));

  int stream_syncs = 0, event_syncs = 0;
  const std::string main_lane = "Thread " + std::to_string(main_thread);
  for (const Event& e : events) {
    if (e.kind != EventKind::sync) continue;
    if (lane_of(e).name != main_lane) continue;
    if (name_of(e) == "Stream synchronize") ++stream_syncs;
    if (name_of(e) == "Event synchronize") ++event_syncs;
  }
  check("syncs on the calling thread", stream_syncs >= 1 && event_syncs >= 1,
        std::to_string(stream_syncs) + " stream, " + std::to_string(event_syncs) +
            " event syncs on " + main_lane);

  int probe_ranges = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::annotation && name_of(e) == "probe:work" &&
        lane_of(e).name == "NVTX thread " + std::to_string(main_thread)) {
      ++probe_ranges;
    }
  }
  check("nvtx range", probe_ranges == 1,
        std::to_string(probe_ranges) + " (needs NVTX_INJECTION64_PATH)");

#if CS_PROBE_NCCL
  int nccl_ranges = 0, nccl_sized = 0, nccl_comm = 0, nccl_copies = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::memcpy && name_of(e) == "Memcpy DtoD" && e.bytes == nccl_single_bytes)
      ++nccl_copies;
    if (e.kind != EventKind::annotation || name_of(e).rfind("ncclAllReduce", 0) != 0) continue;
    ++nccl_ranges;
    if (e.collective == Collective::all_reduce && e.bytes == nccl_single_bytes) ++nccl_sized;
    if (name_of(e).find(" (comm ") != std::string::npos) ++nccl_comm;
  }
  check("nccl ranges", nccl_ranges == 6,
        std::to_string(nccl_ranges) + " ncclAllReduce NVTX ranges");
  check("nccl ranges sized from their payload", nccl_sized == 4 && nccl_comm == 6,
        std::to_string(nccl_sized) + " with " + std::to_string(nccl_single_bytes) + " bytes, " +
            std::to_string(nccl_comm) + " with a communicator");
  check("nccl one-rank copy", nccl_copies == 1, std::to_string(nccl_copies) + " DtoD copies");
#endif

  // Times: inside the run, on CLOCK_REALTIME, and GPU work in order per stream.
  int outside = 0, overlapping = 0;
  std::map<std::uint32_t, std::vector<const Event*>> per_lane;
  for (const Event& e : events) {
    if (e.start_ns < t_before - 1'000'000'000 || e.end_ns > t_after + 1'000'000'000 ||
        e.end_ns < e.start_ns)
      ++outside;
    if (lane_of(e).kind == LaneKind::gpu_stream) per_lane[e.lane.value].push_back(&e);
  }
  for (auto& [lane, list] : per_lane) {
    std::sort(list.begin(), list.end(),
              [](const Event* x, const Event* y) { return x->start_ns < y->start_ns; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (list[i]->start_ns < list[i - 1]->end_ns) ++overlapping;
    }
  }
  check("timestamps on the host clock", outside == 0,
        std::to_string(outside) + " events outside the run");
  check("stream work does not overlap", overlapping == 0,
        std::to_string(overlapping) + " overlaps");

  const bool device_named =
      !writer.ranks.empty() && writer.ranks[0].device.find("(GPU 0)") != std::string::npos;
  check("rank device", device_named, writer.ranks.empty() ? "no rank row" : writer.ranks[0].device);
  double peak = 0;
  for (const auto& s : writer.counters)
    peak = std::max(peak, s.value);
  check("gpu memory counter", !writer.counters.empty() && peak > double(3 * bytes),
        std::to_string(writer.counters.size()) + " samples, peak " + std::to_string(peak / 1e6) +
            " MB");

  // --- files to bring back ---------------------------------------------------
  std::ofstream tsv(out + "/probe_events.tsv");
  tsv << "kind\tcategory\tlane\tname\tstart_ns\tend_"
         "ns\tcorrelation\tbytes\tcollective\tdtype\tcount\tpeer\tstep\n";
  for (const Event& e : events) {
    tsv << int(e.kind) << '\t' << int(e.category) << '\t' << lane_of(e).name << '\t' << name_of(e)
        << '\t' << e.start_ns << '\t' << e.end_ns << '\t' << e.correlation << '\t' << e.bytes
        << '\t' << int(e.collective) << '\t' << int(e.dtype) << '\t' << e.count << '\t' << e.peer
        << '\t' << e.step << '\n';
  }
  nlohmann::json summary = {{"checks", checks},
                            {"failures", failures},
                            {"report", report.summary()},
                            {"warnings", report.warnings},
                            {"meta", writer.meta},
                            {"device", writer.ranks.empty() ? "" : writer.ranks[0].device},
                            {"cupti_version", cs::profiler::loaded_cupti_version()}};
  std::ofstream(out + "/probe_summary.json") << summary.dump(2) << '\n';
  std::printf("%d failed checks\n", failures);
  return failures == 0 ? 0 : 1;
}
