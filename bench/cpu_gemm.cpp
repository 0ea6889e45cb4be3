// GEMM throughput of the CPU engine's backend against OpenBLAS called
// directly on the same shapes (target: ratio >= 0.9).
//
// The shapes are those of a training step of the worker's GPT (N = batch x
// sequence rows, C hidden, F = 4C MLP, V = 256 byte vocabulary). fp32: the
// backend's matmul_forward / matmul_backward against the same cblas_sgemm
// calls on the same buffers. bf16: the backend with bf16 operands (widened
// to fp32 for BLAS, the result narrowed back, as this OpenBLAS has no bf16
// GEMM) against sgemm on fp32 copies of the same values.
//
// Runs alternate between the two sides and the best of several trials is
// kept, so that other load on the machine hurts both alike.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>
#include <unistd.h>

#include "bench/bench_args.h"
#include "profiler/worker/cpu_backend.h"

using namespace cs::worker;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  const char* name;
  int N, C, OC;
};

template <class F>
double best_seconds(F&& f, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

void fill(Backend& b, Tensor t, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> host(static_cast<std::size_t>(t.numel));
  for (float& v : host)
    v = normal(rng);
  if (t.dtype == DType::f32) {
    b.upload(t, host.data());
  } else {
    Tensor tmp = b.alloc(t.numel, DType::f32, "tmp");
    b.upload(tmp, host.data());
    b.convert(t, tmp);
    b.release(tmp);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // BLAS threads; 0 or none: one per core.
  constexpr const char* kUsage = "bench_cpu_gemm [BLAS threads]";
  if (argc > 2) cs::bench::usage_error("bench_cpu_gemm", "too many arguments", kUsage);
  const int threads = argc > 1 ? static_cast<int>(cs::bench::count_arg(
                                     "bench_cpu_gemm", kUsage, "BLAS threads", argv[1], 0, 4096))
                               : 0;
  const int hw = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  auto backend = make_cpu_backend(threads > 0 ? threads : hw);
  Backend& b = *backend;
  std::mt19937 rng(1);

  const int C = 256, F = 1024, V = 256, N = 8 * 128;
  const Shape shapes[] = {
      {"attn.qkv   N x C -> 3C", N, C, 3 * C}, {"attn.proj  N x C -> C", N, C, C},
      {"mlp.fc     N x C -> 4C", N, C, F},     {"mlp.proj   N x 4C -> C", N, F, C},
      {"lm_head    N x C -> V", N, C, V},
  };
  std::printf("CPU engine GEMM throughput vs OpenBLAS direct (%d BLAS threads, best of trials)\n",
              threads > 0 ? threads : hw);
  std::printf("%-24s %-5s %-9s %12s %12s %7s\n", "shape", "type", "pass", "engine", "OpenBLAS",
              "ratio");
  double worst = 1e9;
  for (DType type : {DType::f32, DType::bf16}) {
    double engine_total = 0, reference_total = 0;  // seconds over every shape and pass
    for (const Shape& s : shapes) {
      Tensor inp = b.alloc(std::int64_t{s.N} * s.C, type, "inp");
      Tensor w = b.alloc(std::int64_t{s.OC} * s.C, type, "w");
      Tensor out = b.alloc(std::int64_t{s.N} * s.OC, type, "out");
      Tensor dout = b.alloc(std::int64_t{s.N} * s.OC, type, "dout");
      Tensor dinp = b.alloc(std::int64_t{s.N} * s.C, type, "dinp");
      Tensor dw = b.alloc(std::int64_t{s.OC} * s.C, DType::f32, "dw");
      fill(b, inp, rng);
      fill(b, w, rng);
      fill(b, dout, rng);
      // The reference's fp32 operands: the same values.
      std::vector<float> a32(static_cast<std::size_t>(inp.numel)),
          w32(static_cast<std::size_t>(w.numel)), d32(static_cast<std::size_t>(dout.numel)),
          c32(static_cast<std::size_t>(out.numel)), di32(static_cast<std::size_t>(dinp.numel)),
          dw32(static_cast<std::size_t>(dw.numel), 0.0f);
      {
        Tensor t = b.alloc(inp.numel, DType::f32, "x");
        b.convert(t, inp);
        b.download(a32.data(), t);
        b.release(t);
        t = b.alloc(w.numel, DType::f32, "x");
        b.convert(t, w);
        b.download(w32.data(), t);
        b.release(t);
        t = b.alloc(dout.numel, DType::f32, "x");
        b.convert(t, dout);
        b.download(d32.data(), t);
        b.release(t);
      }
      const double gemm_flops = 2.0 * s.N * s.C * s.OC;
      const int reps = 3;
      // Forward.
      double e_fwd = 1e30, r_fwd = 1e30, e_bwd = 1e30, r_bwd = 1e30;
      for (int trial = 0; trial < 25; ++trial) {
        e_fwd = std::min(
            e_fwd,
            best_seconds([&] { b.matmul_forward(out, inp, w, Tensor{}, s.N, s.C, s.OC, "bench"); },
                         reps));
        r_fwd = std::min(
            r_fwd,
            best_seconds(
                [&] { reference_sgemm_nt(a32.data(), w32.data(), c32.data(), s.N, s.OC, s.C); },
                reps));
        e_bwd = std::min(e_bwd, best_seconds(
                                    [&] {
                                      b.matmul_backward(dinp, dw, Tensor{}, dout, inp, w, s.N, s.C,
                                                        s.OC, "bench");
                                    },
                                    reps));
        r_bwd = std::min(r_bwd, best_seconds(
                                    [&] {
                                      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.N,
                                                  s.C, s.OC, 1.0f, d32.data(), s.OC, w32.data(),
                                                  s.C, 0.0f, di32.data(), s.C);
                                      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.OC,
                                                  s.C, s.N, 1.0f, d32.data(), s.OC, a32.data(), s.C,
                                                  1.0f, dw32.data(), s.C);
                                    },
                                    reps));
      }
      const char* tname = type == DType::f32 ? "fp32" : "bf16";
      const double fr = r_fwd / e_fwd;
      const double br = r_bwd / e_bwd;
      std::printf("%-24s %-5s %-9s %8.1f GF/s %8.1f GF/s %7.3f\n", s.name, tname, "forward",
                  gemm_flops / e_fwd * 1e-9, gemm_flops / r_fwd * 1e-9, fr);
      std::printf("%-24s %-5s %-9s %8.1f GF/s %8.1f GF/s %7.3f\n", s.name, tname, "backward",
                  2 * gemm_flops / e_bwd * 1e-9, 2 * gemm_flops / r_bwd * 1e-9, br);
      worst = std::min({worst, fr, br});
      engine_total += e_fwd + e_bwd;
      reference_total += r_fwd + r_bwd;
      for (Tensor* t : {&inp, &w, &out, &dout, &dinp, &dw})
        b.release(*t);
    }
    std::printf("%s, all shapes (a step's GEMMs): ratio %.3f (target >= 0.9)\n",
                type == DType::f32 ? "fp32" : "bf16", reference_total / engine_total);
  }
  std::printf("worst single ratio: %.3f\n", worst);
  return 0;
}
