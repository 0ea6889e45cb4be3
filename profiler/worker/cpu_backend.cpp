#include "profiler/worker/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <cblas.h>
#include <unistd.h>

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

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int blas_threads) { openblas_set_num_threads(std::max(1, blas_threads)); }
  ~CpuBackend() override = default;

  std::string_view name() const override { return "cpu"; }
  std::string device_name() const override {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return std::string("CPU (") + host + ")";
  }

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

  void attention_forward(Tensor out, Tensor att, Tensor qkv, int B, int T, int C,
                         int NH) override {
    const double flops = 4.0 * B * static_cast<double>(T) * T * C;
    ScopedOp op(tracer_, "attention",
                OpSize{flops, 0, std::int64_t{B} * NH * T * T, trace_type(out.dtype)});
    const int hs = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    std::vector<float> row(T);
    dispatch(out.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* in = ptr<A>(qkv);
      A* o = ptr<A>(out);
      A* at = ptr<A>(att);
      for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < NH; ++h) {
            const std::int64_t q = (static_cast<std::int64_t>(b) * T + t) * 3 * C + h * hs;
            float maxv = -1e30f;
            for (int t2 = 0; t2 <= t; ++t2) {
              const std::int64_t k = (static_cast<std::int64_t>(b) * T + t2) * 3 * C + h * hs + C;
              float v = 0;
              for (int i = 0; i < hs; ++i) v += ld(in, q + i) * ld(in, k + i);
              row[t2] = v * scale;
              maxv = std::max(maxv, row[t2]);
            }
            float sum = 0;
            for (int t2 = 0; t2 <= t; ++t2) {
              row[t2] = std::exp(row[t2] - maxv);
              sum += row[t2];
            }
            const std::int64_t arow = ((static_cast<std::int64_t>(b) * NH + h) * T + t) * T;
            for (int t2 = 0; t2 < T; ++t2) st(at, arow + t2, t2 <= t ? row[t2] / sum : 0.0f);
            const std::int64_t orow = (static_cast<std::int64_t>(b) * T + t) * C + h * hs;
            for (int i = 0; i < hs; ++i) {
              float acc = 0;
              for (int t2 = 0; t2 <= t; ++t2) {
                const std::int64_t v =
                    (static_cast<std::int64_t>(b) * T + t2) * 3 * C + h * hs + 2 * C;
                acc += ld(at, arow + t2) * ld(in, v + i);
              }
              st(o, orow + i, acc);
            }
          }
        }
      }
    });
  }

  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor att, int B, int T, int C,
                          int NH) override {
    const double flops = 8.0 * B * static_cast<double>(T) * T * C;
    ScopedOp op(tracer_, "attention backward",
                OpSize{flops, 0, std::int64_t{B} * NH * T * T, trace_type(qkv.dtype)});
    const int hs = C / NH;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const std::int64_t n = static_cast<std::int64_t>(B) * T * 3 * C;
    // Gradients add up over positions: accumulate in fp32.
    std::vector<float>& acc = grow_vector(scratch_attn_, n);
    std::fill(acc.begin(), acc.begin() + n, 0.0f);
    std::vector<float> datt(T);
    std::vector<float> dpre(T);
    dispatch(qkv.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* in = ptr<A>(qkv);
      const A* at = ptr<A>(att);
      const A* d = ptr<A>(dout);
      for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < NH; ++h) {
            const std::int64_t arow = ((static_cast<std::int64_t>(b) * NH + h) * T + t) * T;
            const std::int64_t orow = (static_cast<std::int64_t>(b) * T + t) * C + h * hs;
            const std::int64_t q = (static_cast<std::int64_t>(b) * T + t) * 3 * C + h * hs;
            // out = sum_t2 att[t2] v[t2]
            for (int t2 = 0; t2 <= t; ++t2) {
              const std::int64_t v = (static_cast<std::int64_t>(b) * T + t2) * 3 * C + h * hs + 2 * C;
              const float a = ld(at, arow + t2);
              float s = 0;
              for (int i = 0; i < hs; ++i) {
                const float g = ld(d, orow + i);
                s += ld(in, v + i) * g;
                acc[v + i] += a * g;
              }
              datt[t2] = s;
            }
            // softmax
            float dot = 0;
            for (int t2 = 0; t2 <= t; ++t2) dot += ld(at, arow + t2) * datt[t2];
            for (int t2 = 0; t2 <= t; ++t2) dpre[t2] = ld(at, arow + t2) * (datt[t2] - dot);
            // preatt = scale * q . k[t2]
            for (int t2 = 0; t2 <= t; ++t2) {
              const std::int64_t k = (static_cast<std::int64_t>(b) * T + t2) * 3 * C + h * hs + C;
              const float g = dpre[t2] * scale;
              for (int i = 0; i < hs; ++i) {
                acc[q + i] += ld(in, k + i) * g;
                acc[k + i] += ld(in, q + i) * g;
              }
            }
          }
        }
      }
      A* dq = ptr<A>(dqkv);
      for (std::int64_t i = 0; i < n; ++i) st(dq, i, acc[i]);
    });
  }

  void gelu_forward(Tensor out, Tensor inp, std::int64_t n) override {
    ScopedOp op(tracer_, "gelu", loop_size(n, out.dtype));
    dispatch(out.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* x = ptr<A>(inp);
      A* o = ptr<A>(out);
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = ld(x, i);
        const float cube = 0.044715f * v * v * v;
        st(o, i, 0.5f * v * (1.0f + std::tanh(kGeluScale * (v + cube))));
      }
    });
  }

  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout, std::int64_t n) override {
    ScopedOp op(tracer_, "gelu backward", loop_size(n, dinp.dtype));
    dispatch(dinp.dtype, [&](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      const A* x = ptr<A>(inp);
      const A* d = ptr<A>(dout);
      A* dx = ptr<A>(dinp);
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = ld(x, i);
        const float cube = 0.044715f * v * v * v;
        const float arg = kGeluScale * (v + cube);
        const float th = std::tanh(arg);
        const float sech2 = 1.0f - th * th;
        const float grad =
            0.5f * (1.0f + th) + 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * v * v);
        st(dx, i, grad * ld(d, i));
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
  static float* grow(std::vector<float>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    return v.data();
  }
  static std::vector<float>& grow_vector(std::vector<float>& v, std::int64_t n) {
    grow(v, n);
    return v;
  }
  static void store(Tensor out, const float* values) {
    bf16* o = ptr<bf16>(out);
    for (std::int64_t i = 0; i < out.numel; ++i) o[i] = to_bf16(values[i]);
  }

  std::atomic<std::int64_t> bytes_{0};
  std::vector<float> scratch_a_, scratch_b_, scratch_c_, scratch_d_, scratch_bias_, scratch_attn_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int blas_threads) {
  return std::make_unique<CpuBackend>(blas_threads);
}

void reference_sgemm_nt(const float* a, const float* b, float* c, int m, int n, int k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
}

}  // namespace cs::worker
