#include "profiler/worker/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <cblas.h>

#include "core/host_name.h"
#include "profiler/worker/op_tracer.h"

namespace cs::worker {

namespace {

// Storage access: arithmetic is always fp32.
inline float ld(const float* p, std::int64_t i) { return p[i]; }
inline float ld(const bf16* p, std::int64_t i) { return to_float(p[i]); }
inline void st(float* p, std::int64_t i, float v) { p[i] = v; }
inline void st(bf16* p, std::int64_t i, float v) { p[i] = to_bf16(v); }

// Calls f with a null pointer of the storage type of t.
template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(static_cast<float*>(nullptr)); return;
    case DType::bf16: f(static_cast<bf16*>(nullptr)); return;
    default: throw std::invalid_argument("the CPU engine computes in fp32 or bf16, not " +
                                         std::string(to_string(t)));
  }
}

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data);
}

// fp32 view of a tensor: the tensor itself when fp32, else a widened copy in
// `scratch`.
const float* as_f32(const Tensor& t, std::int64_t n, std::vector<float>& scratch) {
  if (t.dtype == DType::f32) return ptr<float>(t);
  scratch.resize(static_cast<std::size_t>(n));
  const bf16* src = ptr<bf16>(t);
  for (std::int64_t i = 0; i < n; ++i) scratch[i] = to_float(src[i]);
  return scratch.data();
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)

trace::DataType trace_type(DType t) {
  switch (t) {
    case DType::f32:
      return trace::DataType::fp32;
    case DType::bf16:
      return trace::DataType::bf16;
    case DType::f16:
      return trace::DataType::fp16;
    case DType::i32:
      return trace::DataType::int32;
  }
  return trace::DataType::none;
}

// A loop over `elements` of type `t` (the trace records what it processed).
OpSize loop_size(std::int64_t elements, DType t, std::int64_t bytes = 0) {
  return {0, bytes, elements, trace_type(t)};
}

// e^x, written so that the compiler vectorises the loops that call it
// (std::exp is a libm call per element): x = n ln2 + r with |r| <= ln2 / 2
// (ln2 split in two, Cody-Waite), e^r by its Taylor polynomial to r^6
// (relative error below 2e-7), 2^n built in the exponent bits. x is clamped
// to [-80, 80], where neither the result nor 1 / (1 + result) is subnormal.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -80.0f), 80.0f);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int blas_threads) : blas_threads_(std::max(1, blas_threads)) {
    openblas_set_num_threads(blas_threads_);
  }
  ~CpuBackend() override = default;

  std::string_view name() const override { return "cpu"; }
  std::string device_name() const override { return "CPU (" + this_host_name() + ")"; }

  Tensor alloc(std::int64_t numel, DType dtype, std::string_view) override {
    Tensor t{nullptr, numel, dtype};
    if (numel > 0) {
      t.data = std::calloc(static_cast<std::size_t>(numel), dtype_bytes(dtype));
      if (!t.data) throw std::bad_alloc();
      bytes_ += t.bytes();
    }
    return t;
  }
  void release(Tensor& t) override {
    if (t.data) {
      bytes_ -= t.bytes();
      std::free(t.data);
    }
    t = Tensor{};
  }
  std::int64_t bytes_in_use() const override { return bytes_; }
  void upload(Tensor dst, const void* host) override { std::memcpy(dst.data, host, dst.bytes()); }

  // The tensor's bytes as rows of 128 floats, read as a weight-gradient GEMM
  // reads its transposed operand (t^T . x): OpenBLAS splits the 128 output
  // rows among its threads, so each reads its columns of every row, and
  // every cache line is then held by more than one core.
  void read_on_compute_threads(Tensor t) override {
    constexpr int kColumns = 128;
    constexpr int kWidth = 64;
    const std::int64_t rows = t.bytes() / (kColumns * static_cast<std::int64_t>(sizeof(float)));
    if (blas_threads_ < 2 || rows < 1) return;
    float* x = grow(scratch_share_x_, rows * kWidth);
    float* y = grow(scratch_share_y_, std::int64_t{kColumns} * kWidth);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kColumns, kWidth, static_cast<int>(rows),
                1.0f, static_cast<const float*>(t.data), kColumns, x, kWidth, 0.0f, y, kWidth);
  }
  void download(void* host, Tensor src) override { std::memcpy(host, src.data, src.bytes()); }
  void zero(Tensor t) override {
    ScopedOp op(tracer_, "zero", loop_size(t.numel, t.dtype, t.bytes()));
    std::memset(t.data, 0, t.bytes());
  }
  void synchronize() override {}

  void convert(Tensor dst, Tensor src) override {
    if (dst.dtype == src.dtype) {
      std::memcpy(dst.data, src.data, src.bytes());
      return;
    }
    ScopedOp op(tracer_, "convert",
                loop_size(src.numel, dst.dtype, src.bytes() + src.numel * dtype_bytes(dst.dtype)));
    dispatch(dst.dtype, [&](auto* d_tag) {
      using D = std::remove_pointer_t<decltype(d_tag)>;
      dispatch(src.dtype, [&](auto* s_tag) {
        using S = std::remove_pointer_t<decltype(s_tag)>;
        D* d = ptr<D>(dst);
        const S* s = ptr<S>(src);
        for (std::int64_t i = 0; i < src.numel; ++i) st(d, i, ld(s, i));
      });
    });
  }

  void scale(Tensor t, float factor) override {
    ScopedOp op(tracer_, "scale", loop_size(t.numel, t.dtype, 2 * t.bytes()));
    dispatch(t.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* p = ptr<T>(t);
      for (std::int64_t i = 0; i < t.numel; ++i) st(p, i, ld(p, i) * factor);
    });
  }

  void accumulate(Tensor dst, Tensor src) override {
    ScopedOp op(tracer_, "accumulate", loop_size(dst.numel, dst.dtype, 3 * dst.bytes()));
    dispatch(dst.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* d = ptr<T>(dst);
      const T* s = ptr<T>(src);
      for (std::int64_t i = 0; i < dst.numel; ++i) st(d, i, ld(d, i) + ld(s, i));
    });
  }

  void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int B, int T,
                         int C) override {
    ScopedOp op(tracer_, "embedding", loop_size(std::int64_t{B} * T * C, out.dtype));
    const std::int32_t* tok = ptr<std::int32_t>(tokens);
    dispatch(out.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      A* o = ptr<A>(out);
      const A* te = ptr<A>(wte);
      const A* pe = ptr<A>(wpe);
      for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
          const std::int64_t row = static_cast<std::int64_t>(b) * T + t;
          const std::int64_t ix = tok[row];
          for (int i = 0; i < C; ++i) {
            st(o, row * C + i, ld(te, ix * C + i) + ld(pe, static_cast<std::int64_t>(t) * C + i));
          }
        }
      }
    });
  }

  void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, int B, int T,
                          int C) override {
    ScopedOp op(tracer_, "embedding backward", loop_size(std::int64_t{B} * T * C, dout.dtype));
    const std::int32_t* tok = ptr<std::int32_t>(tokens);
    float* dte = ptr<float>(dwte);
    float* dpe = ptr<float>(dwpe);
    dispatch(dout.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* d = ptr<A>(dout);
      for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
          const std::int64_t row = static_cast<std::int64_t>(b) * T + t;
          const std::int64_t ix = tok[row];
          for (int i = 0; i < C; ++i) {
            const float g = ld(d, row * C + i);
            dte[ix * C + i] += g;
            dpe[static_cast<std::int64_t>(t) * C + i] += g;
          }
        }
      }
    });
  }

  void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, int N, int C, int OC,
                      std::string_view op_name) override {
    ScopedOp op(tracer_, op_name,
                OpSize{2.0 * N * C * OC,
                       (std::int64_t{N} * C + std::int64_t{OC} * C) * dtype_bytes(inp.dtype) +
                           std::int64_t{N} * OC * dtype_bytes(out.dtype),
                       std::int64_t{N} * OC, trace_type(inp.dtype)});
    const float* a = as_f32(inp, static_cast<std::int64_t>(N) * C, scratch_a_);
    const float* w = as_f32(weight, static_cast<std::int64_t>(OC) * C, scratch_b_);
    float* c = out.dtype == DType::f32 ? ptr<float>(out) : grow(scratch_c_, std::int64_t{N} * OC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, a, C, w, C, 0.0f, c, OC);
    if (!bias.empty()) {
      const float* bs = as_f32(bias, OC, scratch_bias_);
      for (int n = 0; n < N; ++n) {
        for (int o = 0; o < OC; ++o) c[static_cast<std::int64_t>(n) * OC + o] += bs[o];
      }
    }
    if (out.dtype != DType::f32) store(out, c);
  }

  void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                       Tensor weight, int N, int C, int OC, std::string_view op_name) override {
    const float* d = as_f32(dout, static_cast<std::int64_t>(N) * OC, scratch_c_);
    if (!dinp.empty()) {
      std::string name(op_name);
      ScopedOp op(tracer_, name += " dgrad",
                  OpSize{2.0 * N * C * OC,
                         (std::int64_t{N} * OC + std::int64_t{OC} * C + std::int64_t{N} * C) *
                             dtype_bytes(dout.dtype),
                         std::int64_t{N} * C, trace_type(dout.dtype)});
      const float* w = as_f32(weight, static_cast<std::int64_t>(OC) * C, scratch_b_);
      float* di = dinp.dtype == DType::f32 ? ptr<float>(dinp) : grow(scratch_d_, std::int64_t{N} * C);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, d, OC, w, C, 0.0f, di,
                  C);
      if (dinp.dtype != DType::f32) store(dinp, di);
    }
    {
      std::string name(op_name);
      ScopedOp op(tracer_, name += " wgrad",
                  OpSize{2.0 * N * C * OC,
                         (std::int64_t{N} * OC + std::int64_t{N} * C) * dtype_bytes(dout.dtype) +
                             std::int64_t{OC} * C * 4,
                         std::int64_t{OC} * C, trace_type(dout.dtype)});
      const float* a = as_f32(inp, static_cast<std::int64_t>(N) * C, scratch_a_);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, d, OC, a, C, 1.0f,
                  ptr<float>(dweight), C);
      if (!dbias.empty()) {
        float* db = ptr<float>(dbias);
        for (int n = 0; n < N; ++n) {
          for (int o = 0; o < OC; ++o) db[o] += d[static_cast<std::int64_t>(n) * OC + o];
        }
      }
    }
  }

  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight,
                         Tensor bias, int N, int C) override {
    ScopedOp op(tracer_, "layernorm", loop_size(std::int64_t{N} * C, out.dtype));
    float* m = ptr<float>(mean);
    float* r = ptr<float>(rstd);
    dispatch(out.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* x = ptr<A>(inp);
      const A* w = ptr<A>(weight);
      const A* b = ptr<A>(bias);
      A* o = ptr<A>(out);
      for (int n = 0; n < N; ++n) {
        const std::int64_t row = static_cast<std::int64_t>(n) * C;
        double s = 0;
        for (int i = 0; i < C; ++i) s += ld(x, row + i);
        const float mu = static_cast<float>(s / C);
        double v = 0;
        for (int i = 0; i < C; ++i) {
          const float dx = ld(x, row + i) - mu;
          v += dx * dx;
        }
        const float rs = 1.0f / std::sqrt(static_cast<float>(v / C) + 1e-5f);
        for (int i = 0; i < C; ++i) {
          st(o, row + i, (ld(x, row + i) - mu) * rs * ld(w, i) + ld(b, i));
        }
        m[n] = mu;
        r[n] = rs;
      }
    });
  }

  void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                          Tensor weight, Tensor mean, Tensor rstd, int N, int C) override {
    ScopedOp op(tracer_, "layernorm backward", loop_size(std::int64_t{N} * C, dinp.dtype));
    const float* m = ptr<float>(mean);
    const float* r = ptr<float>(rstd);
    float* dw = ptr<float>(dweight);
    float* db = ptr<float>(dbias);
    dispatch(dinp.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      A* dx = ptr<A>(dinp);
      const A* d = ptr<A>(dout);
      const A* x = ptr<A>(inp);
      const A* w = ptr<A>(weight);
      for (int n = 0; n < N; ++n) {
        const std::int64_t row = static_cast<std::int64_t>(n) * C;
        float dnorm_mean = 0;
        float dnorm_norm_mean = 0;
        for (int i = 0; i < C; ++i) {
          const float norm = (ld(x, row + i) - m[n]) * r[n];
          const float dnorm = ld(w, i) * ld(d, row + i);
          dnorm_mean += dnorm;
          dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; ++i) {
          const float norm = (ld(x, row + i) - m[n]) * r[n];
          const float g = ld(d, row + i);
          db[i] += g;
          dw[i] += norm * g;
          const float dnorm = ld(w, i) * g;
          st(dx, row + i, ld(dx, row + i) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r[n]);
        }
      }
    });
  }

  // Attention per (batch, head) with BLAS: S = scale Q K^T, a causal softmax
  // row by row, O = P V (Q, K, V and O are strided views of qkv and out). The
  // upper triangle of S is computed and thrown away: a GEMM is still far
  // faster than the loops it replaces. bf16 operands are widened to fp32;
  // P is rounded to bf16 as it is stored, and O uses the rounded P, which is
  // what backward reads back.
  void attention_forward(Tensor out, Tensor att, Tensor qkv, int B, int T, int C,
                         int NH) override {
    const double flops = 4.0 * B * static_cast<double>(T) * T * C;
    ScopedOp op(tracer_, "attention",
                OpSize{flops, 0, std::int64_t{B} * NH * T * T, trace_type(out.dtype)});
    const OneBlasThread one_thread(blas_threads_);
    const int hs = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const std::int64_t TT = static_cast<std::int64_t>(T) * T;
    const float* in = as_f32(qkv, static_cast<std::int64_t>(B) * T * 3 * C, scratch_a_);
    const bool f32 = out.dtype == DType::f32;
    float* o = f32 ? ptr<float>(out) : grow(scratch_c_, static_cast<std::int64_t>(B) * T * C);
    float* p_buffer = f32 ? nullptr : grow(scratch_attn_, TT);
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < NH; ++h) {
        const float* q = in + static_cast<std::int64_t>(b) * T * 3 * C + h * hs;
        const float* k = q + C;
        const float* v = q + 2 * C;
        const std::int64_t slice = (static_cast<std::int64_t>(b) * NH + h) * TT;
        float* p = f32 ? ptr<float>(att) + slice : p_buffer;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, 3 * C, k, 3 * C,
                    0.0f, p, T);
        for (int t = 0; t < T; ++t) {
          float* row = p + static_cast<std::int64_t>(t) * T;
          float maxv = row[0];
          for (int t2 = 1; t2 <= t; ++t2) maxv = std::max(maxv, row[t2]);
          for (int t2 = 0; t2 <= t; ++t2) row[t2] = fast_exp(row[t2] - maxv);
          float sum = 0;
          for (int t2 = 0; t2 <= t; ++t2) sum += row[t2];
          const float inv = 1.0f / sum;
          for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
          for (int t2 = t + 1; t2 < T; ++t2) row[t2] = 0.0f;
        }
        if (!f32) {
          bf16* a = ptr<bf16>(att) + slice;
          for (std::int64_t i = 0; i < TT; ++i) {
            a[i] = to_bf16(p[i]);
            p[i] = to_float(a[i]);
          }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, v, 3 * C,
                    0.0f, o + static_cast<std::int64_t>(b) * T * C + h * hs, C);
      }
    }
    if (!f32) store(out, o);
  }

  // dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) scale (the softmax's
  // backward), dQ = dS K, dK = dS^T Q; each of dQ, dK, dV written once.
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor att, int B, int T, int C,
                          int NH) override {
    const double flops = 8.0 * B * static_cast<double>(T) * T * C;
    ScopedOp op(tracer_, "attention backward",
                OpSize{flops, 0, std::int64_t{B} * NH * T * T, trace_type(qkv.dtype)});
    const OneBlasThread one_thread(blas_threads_);
    const int hs = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const std::int64_t TT = static_cast<std::int64_t>(T) * T;
    const std::int64_t n = static_cast<std::int64_t>(B) * T * 3 * C;
    const float* in = as_f32(qkv, n, scratch_a_);
    const float* d = as_f32(dout, static_cast<std::int64_t>(B) * T * C, scratch_b_);
    const bool f32 = dqkv.dtype == DType::f32;
    float* dq = f32 ? ptr<float>(dqkv) : grow(scratch_d_, n);
    float* buffers = grow(scratch_attn_, 2 * TT);
    float* p_buffer = buffers;
    float* ds = buffers + TT;
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < NH; ++h) {
        const std::int64_t base = static_cast<std::int64_t>(b) * T * 3 * C + h * hs;
        const float* q = in + base;
        const float* k = q + C;
        const float* v = q + 2 * C;
        const float* d_out = d + static_cast<std::int64_t>(b) * T * C + h * hs;
        const std::int64_t slice = (static_cast<std::int64_t>(b) * NH + h) * TT;
        const float* p = p_buffer;
        if (att.dtype == DType::f32) {
          p = ptr<float>(att) + slice;
        } else {
          const bf16* a = ptr<bf16>(att) + slice;
          for (std::int64_t i = 0; i < TT; ++i) p_buffer[i] = to_float(a[i]);
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, d_out, C, 0.0f,
                    dq + base + 2 * C, 3 * C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d_out, C, v, 3 * C,
                    0.0f, ds, T);
        for (int t = 0; t < T; ++t) {
          const float* p_row = p + static_cast<std::int64_t>(t) * T;
          float* row = ds + static_cast<std::int64_t>(t) * T;
          float dot = 0;
          for (int t2 = 0; t2 <= t; ++t2) dot += p_row[t2] * row[t2];
          for (int t2 = 0; t2 <= t; ++t2) row[t2] = p_row[t2] * (row[t2] - dot) * scale;
          for (int t2 = t + 1; t2 < T; ++t2) row[t2] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, ds, T, k, 3 * C,
                    0.0f, dq + base, 3 * C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, ds, T, q, 3 * C, 0.0f,
                    dq + base + C, 3 * C);
      }
    }
    if (!f32) store(dqkv, dq);
  }

  // GELU, tanh form: 0.5 x (1 + tanh(a)) = x sigmoid(2a), a = sqrt(2/pi)(x +
  // 0.044715 x^3); one vectorised exp instead of a tanh (an expm1 and more).
  void gelu_forward(Tensor out, Tensor inp, std::int64_t n) override {
    ScopedOp op(tracer_, "gelu", loop_size(n, out.dtype));
    dispatch(out.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* x = ptr<A>(inp);
      A* o = ptr<A>(out);
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = ld(x, i);
        const float a = kGeluScale * (v + 0.044715f * v * v * v);
        st(o, i, v / (1.0f + fast_exp(-2.0f * a)));
      }
    });
  }

  // d/dx: s + 2 x s (1 - s) a'(x), s = sigmoid(2a) (= (1 + tanh a) / 2).
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout, std::int64_t n) override {
    ScopedOp op(tracer_, "gelu backward", loop_size(n, dinp.dtype));
    dispatch(dinp.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* x = ptr<A>(inp);
      const A* d = ptr<A>(dout);
      A* dx = ptr<A>(dinp);
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = ld(x, i);
        const float a = kGeluScale * (v + 0.044715f * v * v * v);
        const float s = 1.0f / (1.0f + fast_exp(-2.0f * a));
        const float da = kGeluScale * (1.0f + 3.0f * 0.044715f * v * v);
        st(dx, i, (s + 2.0f * v * s * (1.0f - s) * da) * ld(d, i));
      }
    });
  }

  void residual_forward(Tensor out, Tensor a, Tensor b, std::int64_t n) override {
    ScopedOp op(tracer_, "residual", loop_size(n, out.dtype));
    dispatch(out.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* x = ptr<A>(a);
      const A* y = ptr<A>(b);
      A* o = ptr<A>(out);
      for (std::int64_t i = 0; i < n; ++i) st(o, i, ld(x, i) + ld(y, i));
    });
  }

  void crossentropy_forward_backward(Tensor losses, Tensor logits, Tensor targets, int N, int V,
                                     float dloss) override {
    ScopedOp op(tracer_, "cross-entropy", loop_size(std::int64_t{N} * V, logits.dtype));
    float* loss = ptr<float>(losses);
    const std::int32_t* tgt = ptr<std::int32_t>(targets);
    dispatch(logits.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      A* l = ptr<A>(logits);
      for (int n = 0; n < N; ++n) {
        const std::int64_t row = static_cast<std::int64_t>(n) * V;
        float maxv = -1e30f;
        for (int v = 0; v < V; ++v) maxv = std::max(maxv, ld(l, row + v));
        double sum = 0;
        for (int v = 0; v < V; ++v) sum += std::exp(ld(l, row + v) - maxv);
        const float log_sum = static_cast<float>(std::log(sum)) + maxv;
        loss[n] = log_sum - ld(l, row + tgt[n]);
        for (int v = 0; v < V; ++v) {
          const float p = std::exp(ld(l, row + v) - log_sum);
          st(l, row + v, (p - (v == tgt[n] ? 1.0f : 0.0f)) * dloss);
        }
      }
    });
  }

  double sum(Tensor t) override {
    double s = 0;
    const float* p = ptr<float>(t);
    for (std::int64_t i = 0; i < t.numel; ++i) s += p[i];
    return s;
  }

  double sum_of_squares(Tensor t) override {
    ScopedOp op(tracer_, "gradient norm", loop_size(t.numel, t.dtype, t.bytes()));
    double s = 0;
    const float* p = ptr<float>(t);
    for (std::int64_t i = 0; i < t.numel; ++i) s += static_cast<double>(p[i]) * p[i];
    return s;
  }

  bool all_finite(Tensor t) override {
    const float* p = ptr<float>(t);
    for (std::int64_t i = 0; i < t.numel; ++i) {
      if (!std::isfinite(p[i])) return false;
    }
    return true;
  }

  void adamw(Tensor params, Tensor grads, Tensor m, Tensor v, float lr, float beta1, float beta2,
             float eps, float weight_decay, int t) override {
    ScopedOp op(tracer_, "adamw", loop_size(params.numel, params.dtype, 7 * params.bytes()));
    float* p = ptr<float>(params);
    const float* g = ptr<float>(grads);
    float* mm = ptr<float>(m);
    float* vv = ptr<float>(v);
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(t));
    const float c2 = 1.0f - std::pow(beta2, static_cast<float>(t));
    for (std::int64_t i = 0; i < params.numel; ++i) {
      mm[i] = beta1 * mm[i] + (1 - beta1) * g[i];
      vv[i] = beta2 * vv[i] + (1 - beta2) * g[i] * g[i];
      const float mhat = mm[i] / c1;
      const float vhat = vv[i] / c2;
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * p[i]);
    }
  }

 private:
  // The attention core's GEMMs are one head's (T x T x head width): tiny.
  // OpenBLAS splits those above 256 K multiply-adds among its threads, and
  // the hand-off costs more than the split saves: a 1-rank run with 2
  // threads ran 96-token heads at 20 GFLOP/s and 64-token ones, which stay
  // on one thread, at 42. They run on one thread; the others wait.
  class OneBlasThread {
   public:
    explicit OneBlasThread(int threads) : threads_(threads) {
      if (threads_ > 1) openblas_set_num_threads(1);
    }
    ~OneBlasThread() {
      if (threads_ > 1) openblas_set_num_threads(threads_);
    }
    OneBlasThread(const OneBlasThread&) = delete;
    OneBlasThread& operator=(const OneBlasThread&) = delete;

   private:
    int threads_;
  };

  static float* grow(std::vector<float>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    return v.data();
  }
  static void store(Tensor out, const float* values) {
    bf16* o = ptr<bf16>(out);
    for (std::int64_t i = 0; i < out.numel; ++i) o[i] = to_bf16(values[i]);
  }

  int blas_threads_ = 1;
  std::atomic<std::int64_t> bytes_{0};
  std::vector<float> scratch_a_, scratch_b_, scratch_c_, scratch_d_, scratch_bias_, scratch_attn_;
  std::vector<float> scratch_share_x_, scratch_share_y_;  // read_on_compute_threads
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int blas_threads) {
  return std::make_unique<CpuBackend>(blas_threads);
}

void reference_sgemm_nt(const float* a, const float* b, float* c, int m, int n, int k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
}

}  // namespace cs::worker
