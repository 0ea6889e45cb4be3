#include "profiler/worker/sweeps.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <string>

#include "core/calibration_meta.h"
#include "core/median.h"
#include "core/trace_analysis.h"

namespace cs::worker {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Fills `t` with a fixed pattern in [-scale/2, scale/2), in its own type.
void fill(Backend& backend, Tensor t, float scale) {
  std::vector<float> host(static_cast<std::size_t>(t.numel));
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = scale * (static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
  }
  if (t.dtype == DType::f32) {
    backend.upload(t, host.data());
    return;
  }
  Tensor staging = backend.alloc(t.numel, DType::f32, "staging");
  backend.upload(staging, host.data());
  backend.convert(t, staging);
  backend.release(staging);
}

}  // namespace

std::vector<GemmSample> gemm_sweep(Backend& backend, DType storage, const std::vector<int>& sizes,
                                   double seconds_per_size,
                                   const std::function<void(const GemmSample&)>& on_sample) {
  std::vector<GemmSample> samples;
  for (int n : sizes) {
    const std::int64_t elements = static_cast<std::int64_t>(n) * n;
    Tensor a = backend.alloc(elements, storage, "gemm a");
    Tensor b = backend.alloc(elements, storage, "gemm b");
    Tensor c = backend.alloc(elements, storage, "gemm c");
    fill(backend, a, 1.0f);
    fill(backend, b, 1.0f);
    const std::string name = "gemm " + std::to_string(n);

    // Warm up (cuBLAS picks its kernel), then time enough repetitions.
    backend.matmul_forward(c, a, b, Tensor{}, n, n, n, name);
    backend.synchronize();
    backend.take_gemm_ran_as();  // the warm-up's (a refused FP8 try) is not the sample's
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
    s.ran_as = backend.take_gemm_ran_as();
    samples.push_back(s);
    if (on_sample) on_sample(s);
    backend.release(a);
    backend.release(b);
    backend.release(c);
  }
  return samples;
}

std::vector<GemmSample> layer_gemm_sweep(Backend& backend, DType storage,
                                         const std::vector<int>& widths, double seconds_per_size,
                                         const std::function<void(const GemmSample&)>& on_sample) {
  std::vector<GemmSample> samples;
  auto keep = [&](GemmSample s) {
    if (on_sample) on_sample(s);
    samples.push_back(std::move(s));
  };
  auto filled = [&](std::int64_t elements, DType type, const char* what) {
    Tensor t = backend.alloc(elements, type, what);
    fill(backend, t, 1.0f);
    return t;
  };
  for (int h : widths) {
    const int N = h, C = h;  // h tokens of width h
    for (int OC : {h, 4 * h}) {
      const std::int64_t nc = std::int64_t{N} * C, oc = std::int64_t{OC} * C,
                         no = std::int64_t{N} * OC;
      // A layer's operands, in as many copies as take 8 MiB at least: each
      // repetition uses the next copy, so that the operands come from
      // memory or the last-level cache as a step's do (one layer's weights
      // are long out of the core's caches by its next use), not from L2.
      struct Operands {
        Tensor inp, weight, bias, out, dout, dinp, dweight, dbias;
      };
      const int copies = layer_gemm_set_copies(layer_gemm_set_bytes(dtype_bytes(storage), C, OC));
      std::vector<Operands> sets;
      for (int i = 0; i < copies; ++i) {
        sets.push_back({filled(nc, storage, "layer input"), filled(oc, storage, "layer weight"),
                        filled(OC, storage, "layer bias"),
                        backend.alloc(no, storage, "layer output"),
                        filled(no, storage, "layer output gradient"),
                        backend.alloc(nc, storage, "layer input gradient"),
                        backend.alloc(oc, DType::f32, "layer weight gradient"),
                        backend.alloc(OC, DType::f32, "layer bias gradient")});
      }
      const std::string name = "layer gemm " + std::to_string(C) + "x" + std::to_string(OC);
      std::size_t next_forward = 0, next_backward = 0;
      auto forward = [&] {
        Operands& o = sets[next_forward++ % sets.size()];
        backend.matmul_forward(o.out, o.inp, o.weight, o.bias, N, C, OC, name);
      };
      auto backward = [&] {
        Operands& o = sets[next_backward++ % sets.size()];
        backend.matmul_backward(o.dinp, o.dweight, o.dbias, o.dout, o.inp, o.weight, N, C, OC,
                                name);
      };
      // Warm up, then time forward and backward apart, enough repetitions
      // for half the size's time each.
      forward();
      backward();
      backend.synchronize();
      backend.take_gemm_ran_as();  // not the warm-up's
      auto timed = [&](const std::function<void()>& op, double seconds) {
        double start = now_seconds();
        op();
        backend.synchronize();
        const double one = std::max(1e-7, now_seconds() - start);
        const int repetitions = std::clamp(static_cast<int>(seconds / one), 1, 200);
        start = now_seconds();
        for (int r = 0; r < repetitions; ++r) op();
        backend.synchronize();
        return (now_seconds() - start) / repetitions;
      };
      const double forward_s = timed(forward, seconds_per_size / 4);
      const std::string forward_ran_as = backend.take_gemm_ran_as();
      const double backward_s = timed(backward, seconds_per_size / 4);
      const std::string backward_ran_as = backend.take_gemm_ran_as();
      const double flops = 2.0 * N * static_cast<double>(C) * OC;
      keep({N, OC, C, "forward", forward_s, flops / forward_s, forward_ran_as});
      // The two backward GEMMs do the same FLOPs: each one's share.
      keep({N, C, OC, "dgrad", backward_s / 2, flops / (backward_s / 2), backward_ran_as});
      keep({OC, C, N, "wgrad", backward_s / 2, flops / (backward_s / 2), backward_ran_as});
      for (Operands& o : sets) {
        for (Tensor* t : {&o.inp, &o.weight, &o.bias, &o.out, &o.dout, &o.dinp, &o.dweight,
                          &o.dbias}) {
          backend.release(*t);
        }
      }
    }
  }
  return samples;
}

std::vector<BandwidthSample> bandwidth_sweep(
    Backend& backend, const std::vector<std::int64_t>& bytes, int repetitions,
    const std::function<void(const BandwidthSample&)>& on_sample) {
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
    if (on_sample) on_sample(s);
    backend.release(dst);
    backend.release(src);
  }
  return samples;
}

namespace {

// One all-reduce size's figures, as nccl-tests reports them.
CollectiveSample all_reduce_sample(std::int64_t bytes, int ranks, double seconds) {
  CollectiveSample s;
  s.operation = "all_reduce";
  s.bytes = bytes;
  s.ranks = ranks;
  s.seconds = seconds;
  s.algorithm_bandwidth = static_cast<double>(bytes) / seconds;
  s.bus_bandwidth =
      s.algorithm_bandwidth * trace::bus_bandwidth_factor(trace::Collective::all_reduce, ranks);
  return s;
}

}  // namespace

std::vector<CollectiveSample> all_reduce_sweep(
    Backend& backend, Communicator& comm, const std::vector<std::int64_t>& bytes, int repetitions,
    const std::function<void(const CollectiveSample&)>& on_sample) {
  std::vector<CollectiveSample> samples;
  for (std::int64_t size : bytes) {
    const std::int64_t n = std::max<std::int64_t>(1, size / 4);
    Tensor t = backend.alloc(n, DType::f32, "all-reduce message");
    comm.all_reduce(t);  // warm up, and line the ranks up
    backend.synchronize();
    const double t0 = now_seconds();
    for (int r = 0; r < repetitions; ++r) comm.all_reduce(t);
    backend.synchronize();
    samples.push_back(all_reduce_sample(n * 4, comm.size(), (now_seconds() - t0) / repetitions));
    if (on_sample) on_sample(samples.back());
    backend.release(t);
  }
  return samples;
}

std::vector<CollectiveSample> cold_all_reduce_sweep(
    Backend& backend, Communicator& comm, const std::vector<std::int64_t>& bytes, int repetitions,
    const std::function<void(const CollectiveSample&)>& on_sample) {
  // One write per 64-byte line evicts them.
  std::vector<float> evict(static_cast<std::size_t>(kColdSweepEvictBytes) / sizeof(float), 0.0f);
  std::vector<CollectiveSample> samples;
  for (std::int64_t size : bytes) {
    const std::int64_t n = std::max<std::int64_t>(1, size / 4);
    Tensor t = backend.alloc(n, DType::f32, "all-reduce message");
    comm.all_reduce(t);  // warm up, and line the ranks up
    double total = 0;
    for (int r = 0; r < repetitions; ++r) {
      for (std::size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.0f;
      std::fill_n(t.as<float>(), n, 1.0f);
      // Together: a rank arriving early would do part of the call before
      // the other rank's clock starts.
      comm.barrier();
      const double t0 = now_seconds();
      comm.all_reduce(t);
      total += now_seconds() - t0;
    }
    samples.push_back(all_reduce_sample(n * 4, comm.size(), total / repetitions));
    if (on_sample) on_sample(samples.back());
    backend.release(t);
  }
  return samples;
}

namespace {

// Repeats `op` until `seconds` have passed (at least twice, after one warm-up).
OpSample repeat(const std::string& name, std::int64_t elements, double seconds,
                const std::function<void()>& op, Backend& backend) {
  op();
  backend.synchronize();
  OpSample s;
  s.operation = name;
  s.elements = elements;
  const double t0 = now_seconds();
  double elapsed = 0;
  while (s.repetitions < 2 || elapsed < seconds) {
    op();
    ++s.repetitions;
    if (s.repetitions % 4 == 0 || s.repetitions < 4) {
      backend.synchronize();
      elapsed = now_seconds() - t0;
    }
    if (s.repetitions >= 100000) break;
  }
  backend.synchronize();
  s.seconds = (now_seconds() - t0) / s.repetitions;
  return s;
}

// As repeat, with the compute threads reading `shared` before every
// repetition (untimed): the loop then meets its operands where training
// leaves them, just read by the multi-threaded GEMMs before it.
OpSample repeat_after_gemms(const std::string& name, std::int64_t elements, double seconds,
                            const std::vector<Tensor>& shared, const std::function<void()>& op,
                            Backend& backend) {
  OpSample s;
  s.operation = name;
  s.elements = elements;
  double timed = 0;
  const double t0 = now_seconds();
  for (int warm_up = 1; s.repetitions < 2 || now_seconds() - t0 < seconds; warm_up = 0) {
    for (const Tensor& t : shared) backend.read_on_compute_threads(t);
    backend.synchronize();
    const double start = now_seconds();
    op();
    backend.synchronize();
    if (warm_up) continue;
    timed += now_seconds() - start;
    if (++s.repetitions >= 100000) break;
  }
  s.seconds = timed / s.repetitions;
  return s;
}

// A layer norm over N tokens of width C: input, output (which the backward
// reads as its output gradient) and weights filled.
struct NormTensors {
  Tensor x, y, dx, w, b, dw, db, mean, rstd;
  NormTensors(Backend& backend, DType storage, int N, int C) {
    const std::int64_t nc = std::int64_t{N} * C;
    x = backend.alloc(nc, storage, "x");
    y = backend.alloc(nc, storage, "y");
    dx = backend.alloc(nc, storage, "dx");
    w = backend.alloc(C, storage, "norm weight");
    b = backend.alloc(C, storage, "norm bias");
    dw = backend.alloc(C, DType::f32, "norm dweight");
    db = backend.alloc(C, DType::f32, "norm dbias");
    mean = backend.alloc(N, DType::f32, "mean");
    rstd = backend.alloc(N, DType::f32, "rstd");
    fill(backend, x, 2.0f);
    fill(backend, y, 1.0f);
    fill(backend, w, 1.0f);
  }
  void release(Backend& backend) {
    for (Tensor* t : {&x, &y, &dx, &w, &b, &dw, &db, &mean, &rstd}) backend.release(*t);
  }
};

// The layer norm's backward as training meets it: its input gradient is the
// residual stream's, which the projection's GEMMs read just before.
OpSample layernorm_backward_after_gemms(Backend& backend, NormTensors& n, int N, int C,
                                        double seconds) {
  return repeat_after_gemms(
      "layernorm backward", std::int64_t{N} * C, seconds, {n.dx},
      [&] { backend.layernorm_backward(n.dx, n.dw, n.db, n.y, n.x, n.w, n.mean, n.rstd, N, C); },
      backend);
}

// The sizes the engine's models run at: on the CPU a small GPT's
// activations (tokens 128..1024, width 64..256, up to 4 M parameters: a
// rank's optimizer costs less per parameter once its state leaves the
// caches); on a GPU a GPT-2-sized one (tokens 2048..8192, width
// 768..1024, up to 64 M parameters), where smaller loops would time the
// kernel launch rather than the loop.
struct OpSweepShapes {
  std::vector<std::pair<int, int>> shapes;           // tokens, width
  std::vector<std::array<int, 4>> attention_shapes;  // batch, sequence, width, heads
  std::vector<std::int64_t> parameter_counts;
};

OpSweepShapes op_sweep_shapes(const Backend& backend) {
  const bool gpu = backend.name() == "cuda";
  OpSweepShapes out;
  out.shapes = gpu ? std::vector<std::pair<int, int>>{{2048, 768}, {8192, 768}, {8192, 1024}}
                   : std::vector<std::pair<int, int>>{{128, 64}, {512, 128}, {1024, 256}};
  out.attention_shapes =
      gpu ? std::vector<std::array<int, 4>>{{2, 1024, 768, 12},
                                            {8, 1024, 768, 12},
                                            {4, 2048, 1024, 16}}
          : std::vector<std::array<int, 4>>{{1, 64, 64, 4}, {2, 128, 128, 4}, {2, 128, 256, 8}};
  out.parameter_counts =
      gpu ? std::vector<std::int64_t>{std::int64_t{1} << 22, std::int64_t{1} << 24,
                                      std::int64_t{1} << 26}
          : std::vector<std::int64_t>{std::int64_t{1} << 16, std::int64_t{1} << 18,
                                      std::int64_t{1} << 20, std::int64_t{1} << 22};
  return out;
}

}  // namespace

int op_sweep_points(const Backend& backend, DType storage) {
  const OpSweepShapes o = op_sweep_shapes(backend);
  // Per activation shape: layer norm and its backward, residual, GELU and
  // its backward, embedding and its backward, cross-entropy; per attention
  // shape forward and backward; per parameter count AdamW, the gradient
  // norm, scale, zero, and the conversion to a narrower working type.
  const int per_parameters = storage != DType::f32 ? 5 : 4;
  return static_cast<int>(8 * o.shapes.size() + 2 * o.attention_shapes.size() +
                          per_parameters * o.parameter_counts.size());
}

std::vector<OpSample> op_sweep(Backend& backend, DType storage, double seconds_per_point,
                               const std::function<void(const OpSample&)>& on_sample) {
  std::vector<OpSample> samples;
  auto keep = [&](OpSample s) {
    if (on_sample) on_sample(s);
    samples.push_back(std::move(s));
  };
  constexpr int kVocab = 256;
  const auto [shapes, attention_shapes, parameter_counts] = op_sweep_shapes(backend);
  for (const auto& [N, C] : shapes) {
    const std::int64_t nc = std::int64_t{N} * C;
    NormTensors norm(backend, storage, N, C);
    auto& [x, y, dx, w, b, dw, db, mean, rstd] = norm;
    keep(repeat("layernorm", nc, seconds_per_point,
                [&] { backend.layernorm_forward(y, mean, rstd, x, w, b, N, C); }, backend));
    keep(layernorm_backward_after_gemms(backend, norm, N, C, seconds_per_point));
    keep(repeat("residual", nc, seconds_per_point, [&] { backend.residual_forward(dx, x, y, nc); },
                backend));
    // GELU runs on the MLP's 4C-wide activations.
    Tensor h = backend.alloc(4 * nc, storage, "h");
    Tensor hg = backend.alloc(4 * nc, storage, "h gelu");
    fill(backend, h, 4.0f);
    keep(repeat("gelu", 4 * nc, seconds_per_point, [&] { backend.gelu_forward(hg, h, 4 * nc); },
                backend));
    keep(repeat("gelu backward", 4 * nc, seconds_per_point,
                [&] { backend.gelu_backward(h, hg, hg, 4 * nc); }, backend));
    // Embedding lookup and its gradient over a byte vocabulary.
    Tensor tokens = backend.alloc(N, DType::i32, "tokens");
    std::vector<std::int32_t> ids(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i) ids[i] = (i * 37) % kVocab;
    backend.upload(tokens, ids.data());
    Tensor wte = backend.alloc(std::int64_t{kVocab} * C, storage, "wte");
    Tensor wpe = backend.alloc(nc, storage, "wpe");
    Tensor dwte = backend.alloc(std::int64_t{kVocab} * C, DType::f32, "dwte");
    Tensor dwpe = backend.alloc(nc, DType::f32, "dwpe");
    keep(repeat("embedding", nc, seconds_per_point,
                [&] { backend.embedding_forward(y, tokens, wte, wpe, 1, N, C); }, backend));
    keep(repeat("embedding backward", nc, seconds_per_point,
                [&] { backend.embedding_backward(dwte, dwpe, x, tokens, 1, N, C); }, backend));
    // Cross-entropy over the byte vocabulary (forward and backward in one pass).
    Tensor logits = backend.alloc(std::int64_t{N} * kVocab, storage, "logits");
    Tensor losses = backend.alloc(N, DType::f32, "losses");
    fill(backend, logits, 1.0f);  // its gradient, written in place, stays finite when repeated
    keep(repeat("cross-entropy", std::int64_t{N} * kVocab, seconds_per_point,
                [&] { backend.crossentropy_forward_backward(losses, logits, tokens, N, kVocab, 1.0f); },
                backend));
    norm.release(backend);
    for (Tensor* t : {&h, &hg, &tokens, &wte, &wpe, &dwte, &dwpe, &logits, &losses}) {
      backend.release(*t);
    }
  }
  // The causal attention core: batch x heads x sequence² scores, head width 16..64.
  for (const auto& [B, T, C, NH] : attention_shapes) {
    const std::int64_t n = std::int64_t{B} * T;
    Tensor qkv = backend.alloc(n * 3 * C, storage, "qkv");
    Tensor out = backend.alloc(n * C, storage, "out");
    Tensor att = backend.alloc(std::int64_t{B} * NH * T * T, storage, "att");
    Tensor dqkv = backend.alloc(n * 3 * C, storage, "dqkv");
    fill(backend, qkv, 1.0f);
    fill(backend, out, 1.0f);
    const std::int64_t scores = std::int64_t{B} * NH * T * T;
    OpSample forward = repeat("attention", scores, seconds_per_point,
                              [&] { backend.attention_forward(out, att, qkv, B, T, C, NH); }, backend);
    forward.flops = 4.0 * B * T * static_cast<double>(T) * C;
    keep(forward);
    OpSample backward =
        repeat("attention backward", scores, seconds_per_point,
               [&] { backend.attention_backward(dqkv, out, qkv, att, B, T, C, NH); }, backend);
    backward.flops = 8.0 * B * T * static_cast<double>(T) * C;
    keep(backward);
    for (Tensor* t : {&qkv, &out, &att, &dqkv}) backend.release(*t);
  }
  // The optimizer's passes over the parameters (fp32 gradients and state).
  for (std::int64_t P : parameter_counts) {
    Tensor params = backend.alloc(P, DType::f32, "params");
    Tensor grads = backend.alloc(P, DType::f32, "grads");
    Tensor m = backend.alloc(P, DType::f32, "adam.m");
    Tensor v = backend.alloc(P, DType::f32, "adam.v");
    fill(backend, grads, 0.01f);
    int t = 0;
    // The step's GEMMs read every weight and wrote every weight gradient.
    keep(repeat_after_gemms(
        "adamw", P, seconds_per_point, {params, grads},
        [&] { backend.adamw(params, grads, m, v, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, ++t); },
        backend));
    keep(repeat("gradient norm", P, seconds_per_point, [&] { (void)backend.sum_of_squares(grads); },
                backend));
    keep(repeat("scale", P, seconds_per_point, [&] { backend.scale(grads, 1.0f); }, backend));
    keep(repeat("zero", P, seconds_per_point, [&] { backend.zero(m); }, backend));
    if (storage != DType::f32) {
      Tensor working = backend.alloc(P, storage, "weights");
      keep(repeat("convert", P, seconds_per_point, [&] { backend.convert(working, params); },
                  backend));
      backend.release(working);
    }
    for (Tensor* x : {&params, &grads, &m, &v}) backend.release(*x);
  }
  return samples;
}

MachineProbe probe_machine(Backend& backend, Communicator& world, DType storage,
                           const MachineProbeShape& shape, double seconds) {
  MachineProbe probe;
  probe.shape = shape;
  Tensor t = backend.alloc(std::max<std::int64_t>(1, shape.all_reduce_bytes / 4), DType::f32,
                           "probe all-reduce");
  // Every rank starts the GEMM at once (ranks sharing cores then each get
  // the share the model gives them), and the all-reduce's first call warms up.
  if (world.size() > 1) {
    world.all_reduce(t);
    backend.synchronize();
  }
  for (const GemmSample& g : layer_gemm_sweep(backend, storage, {shape.width}, 4 * seconds)) {
    if (g.layout == "forward" && g.n == shape.out()) probe.gemm_seconds = g.seconds;
  }
  {
    NormTensors norm(backend, storage, shape.tokens(), shape.width);
    backend.layernorm_forward(norm.y, norm.mean, norm.rstd, norm.x, norm.w, norm.b,
                              shape.tokens(), shape.width);
    probe.loop_seconds =
        layernorm_backward_after_gemms(backend, norm, shape.tokens(), shape.width, seconds).seconds;
    norm.release(backend);
  }
  if (world.size() > 1 && shape.all_reduce_bytes > 0) {
    world.all_reduce(t);  // lines the ranks up after their GEMMs
    backend.synchronize();
    std::vector<double> times;
    for (int r = 0; r < 20; ++r) {
      const double t0 = now_seconds();
      world.all_reduce(t);
      backend.synchronize();
      times.push_back(now_seconds() - t0);
    }
    probe.all_reduce_seconds = middle_sample(std::move(times));
  }
  backend.release(t);
  return probe;
}

}  // namespace cs::worker
