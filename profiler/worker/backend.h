#pragma once
// The operations the GPT model is written against. The CPU backend runs them
// with OpenBLAS and plain C++; the CUDA backend with cuBLAS and its own
// kernels, in stream order. The model never touches memory directly: it only
// calls these, so one model serves both engines.
//
// Conventions (as in a GPT's training loop): N = B*T rows, C channels, OC
// output channels, V vocabulary, NH attention heads of this rank, hs = C/NH.
// Weights are [OC, C] row-major (out x in). "Backward" ops ACCUMULATE into
// parameter gradients (so micro-batches add up) and OVERWRITE activation
// gradients unless noted. Activations and weights are in the compute type;
// parameter gradients, optimizer state and master weights are fp32; losses fp32.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "profiler/worker/tensor.h"

namespace cs::worker {

class OpTracer;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;  // "cpu" or "cuda"
  virtual std::string device_name() const = 0;

  // Memory. alloc returns zeroed memory; `what` names it in errors and traces.
  virtual Tensor alloc(std::int64_t numel, DType dtype, std::string_view what) = 0;
  virtual void release(Tensor& t) = 0;
  virtual std::int64_t bytes_in_use() const = 0;
  virtual void upload(Tensor dst, const void* host) = 0;    // host -> tensor, dst.bytes()
  virtual void download(void* host, Tensor src) = 0;        // tensor -> host, src.bytes()
  virtual void zero(Tensor t) = 0;
  // dst = src, converting between fp32 / bf16 / fp16.
  virtual void convert(Tensor dst, Tensor src) = 0;
  virtual void scale(Tensor t, float factor) = 0;
  // dst += src (elementwise, same type).
  virtual void accumulate(Tensor dst, Tensor src) = 0;
  // Waits until every queued operation has finished (a no-op on the CPU).
  virtual void synchronize() = 0;
  // Every compute thread reads t, untraced, the way a step's multi-threaded
  // GEMMs read their operands. The operation sweep calls it before timing a
  // loop that, in training, writes what those GEMMs just read: on some
  // machines (virtual ones among them) taking those cache lines back from
  // the other cores costs the loop more than the loop's own work. A no-op
  // with one compute thread, and on a GPU.
  virtual void read_on_compute_threads(Tensor) {}

  // out[N,C] = wte[token] + wpe[t]
  virtual void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int B, int T,
                                 int C) = 0;
  // dwte[token] += dout, dwpe[t] += dout
  virtual void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, int B,
                                  int T, int C) = 0;

  // out = inp . weight^T + bias (bias may be empty); `flops_name` names the GEMM in traces.
  virtual void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, int N, int C,
                              int OC, std::string_view name) = 0;
  // dinp = dout . weight (overwritten; skipped when dinp is empty),
  // dweight += dout^T . inp, dbias += column sums of dout.
  virtual void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                               Tensor weight, int N, int C, int OC, std::string_view name) = 0;
  // The types the GEMMs since the last call ran in ("fp8", "bf16", or both
  // as "fp8+bf16": an fp8 run's backward, and the forwards cuBLASLt turned
  // down, run in BF16), and forgets them; empty where the backend does not
  // tell (the CPU's GEMMs run in the precision asked for). The sweeps mark
  // each sample with it, so that a sample is filed under what really ran.
  virtual std::string take_gemm_ran_as() { return {}; }

  // Layer norm over C per row; mean and rstd (fp32, N each) kept for backward.
  virtual void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight,
                                 Tensor bias, int N, int C) = 0;
  // dinp += (accumulates: the residual stream's gradient), dweight += , dbias +=
  virtual void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout,
                                  Tensor inp, Tensor weight, Tensor mean, Tensor rstd, int N,
                                  int C) = 0;

  // Causal self-attention of NH heads. qkv is [B,T,3C] (q | k | v, head h at
  // columns h*hs); att [B,NH,T,T] keeps the softmax for backward.
  virtual void attention_forward(Tensor out, Tensor att, Tensor qkv, int B, int T, int C,
                                 int NH) = 0;
  virtual void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor att, int B, int T,
                                  int C, int NH) = 0;

  virtual void gelu_forward(Tensor out, Tensor inp, std::int64_t n) = 0;
  virtual void gelu_backward(Tensor dinp, Tensor inp, Tensor dout, std::int64_t n) = 0;
  // out = a + b
  virtual void residual_forward(Tensor out, Tensor a, Tensor b, std::int64_t n) = 0;

  // Softmax cross-entropy of logits [N,V] against targets (int32, N): losses
  // (fp32, N) and dlogits = (softmax - onehot) * dloss, in place of logits.
  virtual void crossentropy_forward_backward(Tensor losses, Tensor logits, Tensor targets, int N,
                                             int V, float dloss) = 0;
  // Sum of a fp32 tensor, on the host.
  virtual double sum(Tensor t) = 0;
  // Sum of squares of a fp32 tensor, on the host (gradient norm).
  virtual double sum_of_squares(Tensor t) = 0;

  // True when every element of a fp32 tensor is finite (FP16 loss scaling).
  virtual bool all_finite(Tensor t) = 0;

  // AdamW on fp32 params with fp32 grads and moments; step t starts at 1.
  virtual void adamw(Tensor params, Tensor grads, Tensor m, Tensor v, float lr, float beta1,
                     float beta2, float eps, float weight_decay, int t) = 0;

  // Where op timings go (nullptr: not traced). The CUDA backend leaves timing
  // to CUPTI and only names its work.
  void set_tracer(OpTracer* tracer) { tracer_ = tracer; }
  OpTracer* tracer() const { return tracer_; }

 protected:
  OpTracer* tracer_ = nullptr;
};

}  // namespace cs::worker
