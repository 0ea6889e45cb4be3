#include "profiler/worker/sweeps.h"

#include <algorithm>
#include <chrono>

namespace cs::worker {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double all_reduce_bus_factor(int ranks) { return ranks > 0 ? 2.0 * (ranks - 1) / ranks : 0; }

std::vector<GemmSample> gemm_sweep(Backend& backend, DType storage, const std::vector<int>& sizes,
                                   double seconds_per_size,
                                   const std::function<void(const GemmSample&)>& on_sample) {
  std::vector<GemmSample> samples;
  for (int n : sizes) {
    const std::int64_t elements = static_cast<std::int64_t>(n) * n;
    Tensor a = backend.alloc(elements, storage, "gemm a");
    Tensor b = backend.alloc(elements, storage, "gemm b");
    Tensor c = backend.alloc(elements, storage, "gemm c");
    std::vector<float> host(static_cast<std::size_t>(elements));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    Tensor staging = backend.alloc(elements, DType::f32, "gemm staging");
    backend.upload(staging, host.data());
    backend.convert(a, staging);
    backend.convert(b, staging);
    backend.release(staging);
    const std::string name = "gemm " + std::to_string(n);

    // Warm up (cuBLAS picks its kernel), then time enough repetitions.
    backend.matmul_forward(c, a, b, Tensor{}, n, n, n, name);
    backend.synchronize();
    const double start = now_seconds();
    backend.matmul_forward(c, a, b, Tensor{}, n, n, n, name);
    backend.synchronize();
    const double one = std::max(1e-7, now_seconds() - start);
    const int repetitions = std::clamp(static_cast<int>(seconds_per_size / one), 1, 200);
    const double t0 = now_seconds();
    for (int r = 0; r < repetitions; ++r) backend.matmul_forward(c, a, b, Tensor{}, n, n, n, name);
    backend.synchronize();
    GemmSample s;
    s.m = s.n = s.k = n;
    s.seconds = (now_seconds() - t0) / repetitions;
    s.flops_per_second = 2.0 * n * static_cast<double>(n) * n / s.seconds;
    samples.push_back(s);
    if (on_sample) on_sample(s);
    backend.release(a);
    backend.release(b);
    backend.release(c);
  }
  return samples;
}

std::vector<BandwidthSample> bandwidth_sweep(Backend& backend, const std::vector<std::int64_t>& bytes,
                                             int repetitions) {
  std::vector<BandwidthSample> samples;
  for (std::int64_t size : bytes) {
    const std::int64_t n = std::max<std::int64_t>(1, size / 4);
    Tensor dst = backend.alloc(n, DType::f32, "bandwidth dst");
    Tensor src = backend.alloc(n, DType::f32, "bandwidth src");
    backend.accumulate(dst, src);
    backend.synchronize();
    const double t0 = now_seconds();
    for (int r = 0; r < repetitions; ++r) backend.accumulate(dst, src);
    backend.synchronize();
    BandwidthSample s;
    s.bytes = 3 * n * 4;
    s.seconds = (now_seconds() - t0) / repetitions;
    s.bytes_per_second = s.bytes / s.seconds;
    samples.push_back(s);
    backend.release(dst);
    backend.release(src);
  }
  return samples;
}

std::vector<CollectiveSample> all_reduce_sweep(Backend& backend, Communicator& comm,
                                               const std::vector<std::int64_t>& bytes,
                                               int repetitions) {
  std::vector<CollectiveSample> samples;
  for (std::int64_t size : bytes) {
    const std::int64_t n = std::max<std::int64_t>(1, size / 4);
    Tensor t = backend.alloc(n, DType::f32, "all-reduce message");
    comm.all_reduce(t);  // warm up, and line the ranks up
    backend.synchronize();
    const double t0 = now_seconds();
    for (int r = 0; r < repetitions; ++r) comm.all_reduce(t);
    backend.synchronize();
    CollectiveSample s;
    s.operation = "all_reduce";
    s.bytes = n * 4;
    s.ranks = comm.size();
    s.seconds = (now_seconds() - t0) / repetitions;
    s.algorithm_bandwidth = s.bytes / s.seconds;
    s.bus_bandwidth = s.algorithm_bandwidth * all_reduce_bus_factor(s.ranks);
    samples.push_back(s);
    backend.release(t);
  }
  return samples;
}

}  // namespace cs::worker
