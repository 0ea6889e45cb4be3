#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "profiler/cuda/cuda_backend.h"

// dladdr: the file cuBLASLt was loaded from, in its refusal line.
#include <dlfcn.h>

namespace cs::worker {

namespace {

// ---------------------------------------------------------------- checks
[[noreturn]] void fail(const char* what, const std::string& detail, const char* file, int line) {
  throw std::runtime_error(std::string(what) + " failed: " + detail + " (" + file + ":" +
                           std::to_string(line) + ")");
}
#define CS_CUDA(call)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) fail(#call, cudaGetErrorString(e_), __FILE__, __LINE__);   \
  } while (0)
#define CS_CUBLAS(call)                                                                          \
  do {                                                                                           \
    cublasStatus_t s_ = (call);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) fail(#call, cublasGetStatusString(s_), __FILE__, __LINE__); \
  } while (0)

// "gelu" of "void cs::worker::CudaBackend::gelu(Tensor, Tensor)": the
// function's own name in a compiler's full signature.
std::string operation_name(std::string_view signature) {
  const auto open = signature.find('(');
  if (open == std::string_view::npos) return std::string(signature);
  const auto space_or_colon = signature.find_last_of(": ", open);
  const std::size_t from = space_or_colon == std::string_view::npos ? 0 : space_or_colon + 1;
  return std::string(signature.substr(from, open - from));
}

// The file cuBLASLt's code was loaded from: the shared library a process
// found (LD_LIBRARY_PATH, a wheel's copy), or the executable when linked in.
std::string cublaslt_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cublasLtMatmul), &info) != 0 && info.dli_fname &&
      *info.dli_fname) {
    return info.dli_fname;
  }
  return "an unknown file";
}

// ---------------------------------------------------------------- element access
__device__ __forceinline__ float tof(float v) { return v; }
__device__ __forceinline__ float tof(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float tof(__half v) { return __half2float(v); }
template <class T>
__device__ __forceinline__ T fromf(float v);
template <>
__device__ __forceinline__ float fromf<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 fromf<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half fromf<__half>(float v) { return __float2half(v); }

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(static_cast<float*>(nullptr)); return;
    case DType::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case DType::f16: f(static_cast<__half*>(nullptr)); return;
    default: throw std::invalid_argument("unsupported tensor type for the CUDA engine");
  }
}
#define CS_T(tag) std::remove_pointer_t<decltype(tag)>

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

int blocks_for(std::int64_t n, int threads = 256) {
  return static_cast<int>(std::min<std::int64_t>((n + threads - 1) / threads, 65535 * 8));
}
// A reduction's grid: its blocks each add one atomic on one address, so a
// bounded number of them (still about 2 000 threads per SM on an H200).
constexpr int kReductionBlocks = 1024;

// ---------------------------------------------------------------- kernels
// Grid-stride loops: any size works with a bounded grid.
#define GRID_LOOP(i, n) \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

template <class D, class S>
__global__ void convert_kernel(D* dst, const S* src, std::int64_t n) {
  GRID_LOOP(i, n) dst[i] = fromf<D>(tof(src[i]));
}

template <class T>
__global__ void scale_kernel(T* p, float factor, std::int64_t n) {
  GRID_LOOP(i, n) p[i] = fromf<T>(tof(p[i]) * factor);
}

template <class T>
__global__ void accumulate_kernel(T* dst, const T* src, std::int64_t n) {
  GRID_LOOP(i, n) dst[i] = fromf<T>(tof(dst[i]) + tof(src[i]));
}

template <class T>
__global__ void embedding_forward_kernel(T* out, const int* tokens, const T* wte, const T* wpe,
                                         int T_, int C, std::int64_t n) {
  GRID_LOOP(i, n) {
    const std::int64_t row = i / C;
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(row % T_);
    out[i] = fromf<T>(tof(wte[static_cast<std::int64_t>(tokens[row]) * C + c]) +
                      tof(wpe[static_cast<std::int64_t>(t) * C + c]));
  }
}

template <class T>
__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const T* dout,
                                          const int* tokens, int T_, int C, std::int64_t n) {
  GRID_LOOP(i, n) {
    const std::int64_t row = i / C;
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(row % T_);
    const float g = tof(dout[i]);
    atomicAdd(&dwte[static_cast<std::int64_t>(tokens[row]) * C + c], g);
    atomicAdd(&dwpe[static_cast<std::int64_t>(t) * C + c], g);
  }
}

// out[row, o] += bias[o]: one column per thread (a warp's columns are
// adjacent, so its accesses coalesce), rows strided over blockIdx.y. No
// 64-bit division per element: the H200 check's GPT-2 run spent longer in
// the `i % OC` version of this kernel than in the GEMM it followed.
template <class T>
__global__ void add_bias_kernel(T* out, const T* bias, int N, int OC) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  const float b = tof(bias[o]);
  for (int row = blockIdx.y; row < N; row += gridDim.y) {
    T* p = out + static_cast<std::int64_t>(row) * OC + o;
    *p = fromf<T>(tof(*p) + b);
  }
}

// dbias[o] += sum over rows of dout[row, o]; one thread per column, rows split over blockIdx.y.
template <class T>
__global__ void bias_grad_kernel(float* dbias, const T* dout, int N, int OC) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float s = 0;
  for (int r = blockIdx.y; r < N; r += gridDim.y) s += tof(dout[static_cast<std::int64_t>(r) * OC + o]);
  atomicAdd(&dbias[o], s);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}

// One warp per row.
template <class T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp,
                                         const T* weight, const T* bias, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* x = inp + static_cast<std::int64_t>(row) * C;
  float s = 0;
  for (int i = lane; i < C; i += 32) s += tof(x[i]);
  const float m = warp_sum(s) / C;
  float v = 0;
  for (int i = lane; i < C; i += 32) {
    const float d = tof(x[i]) - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
  T* o = out + static_cast<std::int64_t>(row) * C;
  for (int i = lane; i < C; i += 32) o[i] = fromf<T>((tof(x[i]) - m) * r * tof(weight[i]) + tof(bias[i]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// One warp per row; weight and bias gradients summed per block in shared
// memory, then added once per block.
template <class T>
__global__ void layernorm_backward_kernel(T* dinp, float* dweight, float* dbias, const T* dout,
                                          const T* inp, const T* weight, const float* mean,
                                          const float* rstd, int N, int C) {
  extern __shared__ float shared[];  // 2C
  float* sw = shared;
  float* sb = shared + C;
  for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) shared[i] = 0;
  __syncthreads();
  const int warps = blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int row = blockIdx.x * warps + threadIdx.x / 32; row < N; row += gridDim.x * warps) {
    const std::int64_t base = static_cast<std::int64_t>(row) * C;
    const float m = mean[row];
    const float r = rstd[row];
    float dnorm_mean = 0;
    float dnorm_norm_mean = 0;
    for (int i = lane; i < C; i += 32) {
      const float norm = (tof(inp[base + i]) - m) * r;
      const float dnorm = tof(weight[i]) * tof(dout[base + i]);
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = warp_sum(dnorm_mean) / C;
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
    for (int i = lane; i < C; i += 32) {
      const float norm = (tof(inp[base + i]) - m) * r;
      const float g = tof(dout[base + i]);
      atomicAdd(&sb[i], g);
      atomicAdd(&sw[i], norm * g);
      const float dnorm = tof(weight[i]) * g;
      dinp[base + i] = fromf<T>(tof(dinp[base + i]) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    atomicAdd(&dweight[i], sw[i]);
    atomicAdd(&dbias[i], sb[i]);
  }
}

// qkv [B,T,3C] -> q, k, v [B,NH,T,hs]
template <class T>
__global__ void split_heads_kernel(T* q, T* k, T* v, const T* qkv, int B, int T_, int NH, int hs) {
  const std::int64_t n = static_cast<std::int64_t>(B) * NH * T_ * hs;
  const int C = NH * hs;
  GRID_LOOP(i, n) {
    const int d = static_cast<int>(i % hs);
    const int t = static_cast<int>((i / hs) % T_);
    const int h = static_cast<int>((i / (static_cast<std::int64_t>(hs) * T_)) % NH);
    const int b = static_cast<int>(i / (static_cast<std::int64_t>(hs) * T_ * NH));
    const std::int64_t src = (static_cast<std::int64_t>(b) * T_ + t) * 3 * C + h * hs + d;
    q[i] = qkv[src];
    k[i] = qkv[src + C];
    v[i] = qkv[src + 2 * C];
  }
}

// [B,NH,T,hs] -> [B,T,C]
template <class T>
__global__ void merge_heads_kernel(T* out, const T* in, int B, int T_, int NH, int hs) {
  const std::int64_t n = static_cast<std::int64_t>(B) * NH * T_ * hs;
  const int C = NH * hs;
  GRID_LOOP(i, n) {
    const int d = static_cast<int>(i % hs);
    const int t = static_cast<int>((i / hs) % T_);
    const int h = static_cast<int>((i / (static_cast<std::int64_t>(hs) * T_)) % NH);
    const int b = static_cast<int>(i / (static_cast<std::int64_t>(hs) * T_ * NH));
    out[(static_cast<std::int64_t>(b) * T_ + t) * C + h * hs + d] = in[i];
  }
}

// dq, dk, dv [B,NH,T,hs] -> dqkv [B,T,3C]
template <class T>
__global__ void join_heads_kernel(T* dqkv, const T* dq, const T* dk, const T* dv, int B, int T_,
                                  int NH, int hs) {
  const std::int64_t n = static_cast<std::int64_t>(B) * NH * T_ * hs;
  const int C = NH * hs;
  GRID_LOOP(i, n) {
    const int d = static_cast<int>(i % hs);
    const int t = static_cast<int>((i / hs) % T_);
    const int h = static_cast<int>((i / (static_cast<std::int64_t>(hs) * T_)) % NH);
    const int b = static_cast<int>(i / (static_cast<std::int64_t>(hs) * T_ * NH));
    const std::int64_t dst = (static_cast<std::int64_t>(b) * T_ + t) * 3 * C + h * hs + d;
    dqkv[dst] = dq[i];
    dqkv[dst + C] = dk[i];
    dqkv[dst + 2 * C] = dv[i];
  }
}

// Causal softmax of scale * preatt, row by row (one warp per row of T).
template <class T>
__global__ void causal_softmax_kernel(T* att, const float* preatt, float scale, int rows, int T_) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = row % T_;
  const float* x = preatt + static_cast<std::int64_t>(row) * T_;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += 32) m = fmaxf(m, x[j] * scale);
  m = warp_max(m);
  float s = 0;
  for (int j = lane; j <= t; j += 32) s += __expf(x[j] * scale - m);
  s = warp_sum(s);
  T* o = att + static_cast<std::int64_t>(row) * T_;
  for (int j = lane; j < T_; j += 32) o[j] = fromf<T>(j <= t ? __expf(x[j] * scale - m) / s : 0.0f);
}

// dpreatt = scale * att * (datt - sum(att * datt)), causal; written in the
// storage type D the next GEMMs read (no float copy and conversion pass).
template <class D, class T>
__global__ void softmax_backward_kernel(D* dpreatt, const float* datt, const T* att, float scale,
                                        int rows, int T_) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = row % T_;
  const std::int64_t base = static_cast<std::int64_t>(row) * T_;
  float dot = 0;
  for (int j = lane; j <= t; j += 32) dot += tof(att[base + j]) * datt[base + j];
  dot = warp_sum(dot);
  for (int j = lane; j < T_; j += 32) {
    dpreatt[base + j] =
        fromf<D>(j <= t ? scale * tof(att[base + j]) * (datt[base + j] - dot) : 0.0f);
  }
}

constexpr float kGeluScale = 0.7978845608028654f;

template <class T>
__global__ void gelu_forward_kernel(T* out, const T* inp, std::int64_t n) {
  GRID_LOOP(i, n) {
    const float x = tof(inp[i]);
    out[i] = fromf<T>(0.5f * x * (1.0f + tanhf(kGeluScale * (x + 0.044715f * x * x * x))));
  }
}

template <class T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, std::int64_t n) {
  GRID_LOOP(i, n) {
    const float x = tof(inp[i]);
    const float th = tanhf(kGeluScale * (x + 0.044715f * x * x * x));
    const float grad = 0.5f * (1.0f + th) +
                       0.5f * x * (1.0f - th * th) * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = fromf<T>(grad * tof(dout[i]));
  }
}

template <class T>
__global__ void residual_kernel(T* out, const T* a, const T* b, std::int64_t n) {
  GRID_LOOP(i, n) out[i] = fromf<T>(tof(a[i]) + tof(b[i]));
}

// One block per row: softmax, the loss, and (softmax - onehot) * dloss in place.
template <class T>
__global__ void crossentropy_kernel(float* losses, T* logits, const int* targets, int V, float dloss) {
  __shared__ float reduce[32];
  const int row = blockIdx.x;
  T* l = logits + static_cast<std::int64_t>(row) * V;
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, tof(l[v]));
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) reduce[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    float x = threadIdx.x < blockDim.x / 32 ? reduce[threadIdx.x] : -INFINITY;
    x = warp_max(x);
    if (threadIdx.x == 0) reduce[0] = x;
  }
  __syncthreads();
  m = reduce[0];
  __syncthreads();
  float s = 0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) s += __expf(tof(l[v]) - m);
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) reduce[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float x = threadIdx.x < blockDim.x / 32 ? reduce[threadIdx.x] : 0.0f;
    x = warp_sum(x);
    if (threadIdx.x == 0) reduce[0] = x;
  }
  __syncthreads();
  const float log_sum = logf(reduce[0]) + m;
  const int target = targets[row];
  if (threadIdx.x == 0) losses[row] = log_sum - tof(l[target]);
  __syncthreads();
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    const float p = __expf(tof(l[v]) - log_sum);
    l[v] = fromf<T>((p - (v == target ? 1.0f : 0.0f)) * dloss);
  }
}

// Reduced in the block first, as amax_kernel. Launched with at most
// kReductionBlocks blocks of 256 threads.
__global__ void sum_kernel(double* out, const float* x, std::int64_t n, int squares) {
  __shared__ double warp_sums[8];
  double s = 0;
  GRID_LOOP(i, n) s += squares ? static_cast<double>(x[i]) * x[i] : x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_xor_sync(0xffffffff, s, o);
    if (threadIdx.x == 0) atomicAdd(out, s);
  }
}

__global__ void count_non_finite_kernel(int* out, const float* x, std::int64_t n) {
  GRID_LOOP(i, n) {
    if (!isfinite(x[i])) atomicAdd(out, 1);
  }
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, std::int64_t n, float lr,
                             float b1, float b2, float eps, float wd, float c1, float c2) {
  GRID_LOOP(i, n) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1 - b1) * gi;
    const float vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p[i]);
  }
}

// FP8: the largest magnitude of a tensor, then the tensor scaled into E4M3.
// Reduced in the block first: one atomic per block, not one per warp (a
// warp's atomics on one address serialised the pass over a large tensor).
// Launched with at most kReductionBlocks blocks of 256 threads.
template <class T>
__global__ void amax_kernel(float* amax, const T* x, std::int64_t n) {
  __shared__ float warp_maxima[8];
  float m = 0;
  GRID_LOOP(i, n) m = fmaxf(m, fabsf(tof(x[i])));
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) warp_maxima[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warp_maxima[threadIdx.x] : 0.0f;
    m = warp_max(m);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
  }
}

template <class T>
__global__ void to_fp8_kernel(__nv_fp8_e4m3* out, const T* x, const float* amax, float* inverse_scale,
                              std::int64_t n) {
  // scale maps amax to 448 (E4M3's largest normal); the GEMM multiplies by 1/scale.
  const float a = *amax > 0 ? *amax : 1.0f;
  const float scale = 448.0f / a;
  if (blockIdx.x == 0 && threadIdx.x == 0) *inverse_scale = 1.0f / scale;
  GRID_LOOP(i, n) out[i] = __nv_fp8_e4m3(tof(x[i]) * scale);
}

// ---------------------------------------------------------------- the backend
class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, CudaCompute compute) : device_(device), compute_(compute) {
    // No destructor runs for a constructor that throws: free what was made.
    try {
      acquire();
    } catch (...) {
      free_resources();
      throw;
    }
  }
  ~CudaBackend() override {
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);
    for (Tensor& t : scratch_)
      release(t);
    free_resources();
  }

 private:
  void acquire() {
    CS_CUDA(cudaSetDevice(device_));
    CS_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CS_CUBLAS(cublasCreate(&cublas_));
    CS_CUBLAS(cublasSetStream(cublas_, stream_));
    CS_CUBLAS(cublasLtCreate(&lt_));
    CS_CUDA(cudaMalloc(&workspace_, kWorkspace));
    CS_CUDA(cudaMalloc(&scratch_scalars_, kScratchScalarBytes));
    cudaDeviceProp prop{};
    CS_CUDA(cudaGetDeviceProperties(&prop, device_));
    name_ = prop.name;
    // Ada (8.9) and Hopper on have FP8 tensor cores, which cuBLASLt's E4M3
    // GEMMs use.
    fp8_capable_ = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
    if (compute_ == CudaCompute::fp8 && !fp8_capable_) {
      throw std::runtime_error(name_ + " has no FP8 tensor cores (compute capability " +
                               std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                               "; FP8 needs 8.9 or newer)");
    }
    // TF32 tensor cores for fp32 storage only when asked for.
    gemm_compute_ = compute_ == CudaCompute::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                    : compute_ == CudaCompute::fp32 ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                    : CUBLAS_COMPUTE_32F;
  }
  // What acquire() made, whichever part of it was made.
  void free_resources() {
    cudaSetDevice(device_);
    fp8_plans_.clear();  // before the cuBLASLt handle goes
    for (void* p : fp8_buffers_)
      if (p) cudaFree(p);
    if (workspace_) cudaFree(workspace_);
    if (scratch_scalars_) cudaFree(scratch_scalars_);
    if (lt_) cublasLtDestroy(lt_);
    if (cublas_) cublasDestroy(cublas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

 public:
  std::string_view name() const override { return "cuda"; }
  std::string take_gemm_ran_as() override {
    // The run's own precision where a GEMM names no other type (an fp8
    // run's GEMMs outside cuBLASLt, its attention's, run in its BF16 storage).
    static constexpr const char* kAsked[] = {"fp32", "tf32", "bf16", "fp16", "bf16"};
    const std::string_view asked = kAsked[static_cast<int>(compute_)];
    const bool as_asked = ran_in_ & kRanAsAsked;
    const bool bf16 = (ran_in_ & kRanBf16) || (as_asked && asked == "bf16");
    std::string ran(as_asked && asked != "bf16" ? asked : std::string_view());
    for (const auto& [did, type] :
         {std::pair{(ran_in_ & kRanFp8) != 0, "fp8"}, std::pair{bf16, "bf16"}}) {
      if (!did) continue;
      if (!ran.empty()) ran += '+';
      ran += type;
    }
    ran_in_ = 0;
    return ran;
  }
  std::string device_name() const override { return name_ + " (GPU " + std::to_string(device_) + ")"; }
  cudaStream_t stream() const { return stream_; }
  void set_hooks(GemmHooks hooks) { hooks_ = std::move(hooks); }

  Tensor alloc(std::int64_t numel, DType dtype, std::string_view what) override {
    Tensor t{nullptr, numel, dtype};
    if (numel == 0) return t;
    const cudaError_t e = cudaMalloc(&t.data, static_cast<std::size_t>(t.bytes()));
    if (e != cudaSuccess) {
      // Only cudaErrorMemoryAllocation is a full GPU; any other error (a
      // device fault an earlier kernel left, a lost device) says its name.
      const std::string sizes = " (" + std::to_string(t.bytes()) + " bytes, " +
                                std::to_string(bytes_.load()) + " already in use)";
      if (e == cudaErrorMemoryAllocation) {
        throw std::runtime_error("out of GPU memory allocating " + std::string(what) + sizes);
      }
      throw std::runtime_error("cudaMalloc failed allocating " + std::string(what) + sizes + ": " +
                               cudaGetErrorName(e) + ", " + cudaGetErrorString(e));
    }
    CS_CUDA(cudaMemsetAsync(t.data, 0, static_cast<std::size_t>(t.bytes()), stream_));
    bytes_ += t.bytes();
    return t;
  }
  void release(Tensor& t) override {
    // While a failure unwinds (an NCCL error, a peer gone) the stream may
    // hold a collective spinning for a peer that will not come: waiting on
    // it, or cudaFree (which waits for the device), would keep the rank from
    // reaching ncclCommAbort. The process ends; the memory goes with it.
    if (t.data && std::uncaught_exceptions() > 0) {
      t = Tensor{};
      return;
    }
    if (t.data) {
      cudaStreamSynchronize(stream_);
      cudaFree(t.data);
      bytes_ -= t.bytes();
    }
    t = Tensor{};
  }
  std::int64_t bytes_in_use() const override { return bytes_; }
  void upload(Tensor dst, const void* host) override {
    CS_CUDA(cudaMemcpyAsync(dst.data, host, static_cast<std::size_t>(dst.bytes()),
                            cudaMemcpyHostToDevice, stream_));
    // The host buffer may change right after: wait for the copy.
    CS_CUDA(cudaStreamSynchronize(stream_));
  }
  void download(void* host, Tensor src) override {
    CS_CUDA(cudaMemcpyAsync(host, src.data, static_cast<std::size_t>(src.bytes()),
                            cudaMemcpyDeviceToHost, stream_));
    CS_CUDA(cudaStreamSynchronize(stream_));
  }
  void zero(Tensor t) override {
    CS_CUDA(cudaMemsetAsync(t.data, 0, static_cast<std::size_t>(t.bytes()), stream_));
  }
  void synchronize() override { CS_CUDA(cudaStreamSynchronize(stream_)); }

  void convert(Tensor dst, Tensor src) override {
    if (dst.dtype == src.dtype) {
      CS_CUDA(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(src.bytes()),
                              cudaMemcpyDeviceToDevice, stream_));
      return;
    }
    dispatch(dst.dtype, [&](auto* d) {
      dispatch(src.dtype, [&](auto* s) {
        convert_kernel<<<blocks_for(src.numel), 256, 0, stream_>>>(dst.as<CS_T(d)>(), src.as<CS_T(s)>(),
                                                                   src.numel);
      });
    });
    check_launch();
  }
  void scale(Tensor t, float factor) override {
    dispatch(t.dtype, [&](auto* tag) {
      scale_kernel<<<blocks_for(t.numel), 256, 0, stream_>>>(t.as<CS_T(tag)>(), factor, t.numel);
    });
    check_launch();
  }
  void accumulate(Tensor dst, Tensor src) override {
    dispatch(dst.dtype, [&](auto* tag) {
      accumulate_kernel<<<blocks_for(dst.numel), 256, 0, stream_>>>(dst.as<CS_T(tag)>(),
                                                                    src.as<CS_T(tag)>(), dst.numel);
    });
    check_launch();
  }

  void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int B, int T,
                         int C) override {
    const std::int64_t n = static_cast<std::int64_t>(B) * T * C;
    dispatch(out.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      embedding_forward_kernel<<<blocks_for(n), 256, 0, stream_>>>(
          out.as<X>(), tokens.as<int>(), wte.as<X>(), wpe.as<X>(), T, C, n);
    });
    check_launch();
  }
  void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, int B, int T,
                          int C) override {
    const std::int64_t n = static_cast<std::int64_t>(B) * T * C;
    dispatch(dout.dtype, [&](auto* tag) {
      embedding_backward_kernel<<<blocks_for(n), 256, 0, stream_>>>(
          dwte.as<float>(), dwpe.as<float>(), dout.as<CS_T(tag)>(), tokens.as<int>(), T, C, n);
    });
    check_launch();
  }

  // Column-major view of row-major operands (see matmul_forward in backend.h):
  // out^T[OC,N] = W^T' . inp^T.
  void matmul_forward(Tensor out, Tensor inp, Tensor weight, Tensor bias, int N, int C, int OC,
                      std::string_view op_name) override {
    const double flops = 2.0 * N * C * OC;
    // FP8 where the shape allows it and cuBLASLt has not turned this shape
    // down before: a refused shape runs in BF16 straight away, without the
    // casts and the failing calls again (counted as a fallback each time).
    const bool fp8_shape =
        compute_ == CudaCompute::fp8 && C % 16 == 0 && OC % 16 == 0 && N % 16 == 0;
    const bool try_fp8 = fp8_shape && !fp8_refused_.count({N, C, OC});
    // The GEMM reads 1-byte copies of its operands when it runs in FP8.
    const std::int64_t bytes =
        try_fp8 ? static_cast<std::int64_t>(N) * C + static_cast<std::int64_t>(C) * OC +
                      static_cast<std::int64_t>(N) * OC * dtype_bytes(out.dtype)
                : operand_bytes(N, C, OC, inp, weight, out);
    Hooked h(*this, op_name, "", flops, bytes);
    if (try_fp8 && fp8_gemm_nt(out, inp, weight, N, C, OC)) {
      h.computed_in = trace::DataType::fp8_e4m3;
    } else {
      if (try_fp8) {
        fp8_refused_.insert({N, C, OC});  // it ran in BF16 inside
      } else {
        if (fp8_shape) ++fp8_fallbacks_;
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, out, OC, 0.0f);
      }
      if (compute_ == CudaCompute::fp8) h.computed_in = trace::DataType::bf16;
    }
    if (!bias.empty()) {
      const dim3 grid((OC + 255) / 256, std::min(N, 1024));
      dispatch(out.dtype, [&](auto* tag) {
        add_bias_kernel<<<grid, 256, 0, stream_>>>(out.as<CS_T(tag)>(), bias.as<CS_T(tag)>(), N, OC);
      });
      check_launch();
    }
  }

  void matmul_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                       Tensor weight, int N, int C, int OC, std::string_view op_name) override {
    const double flops = 2.0 * N * C * OC;
    if (!dinp.empty()) {
      Hooked h(*this, op_name, " dgrad", flops, operand_bytes(N, OC, C, dout, weight, dinp));
      if (compute_ == CudaCompute::fp8) h.computed_in = trace::DataType::bf16;  // backward in BF16
      // dinp^T[C,N] = W^T[C,OC] . dout^T[OC,N]
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, dinp, C, 0.0f);
    }
    {
      Hooked h(*this, op_name, " wgrad", flops, operand_bytes(C, N, OC, inp, dout, dweight));
      if (compute_ == CudaCompute::fp8) h.computed_in = trace::DataType::bf16;
      // dW^T[C,OC] += inp^T[C,N] . dout[N,OC]
      gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, dweight, C, 1.0f);
    }
    if (!dbias.empty()) {
      dim3 grid((OC + 255) / 256, std::min(N, 128));
      dispatch(dout.dtype, [&](auto* tag) {
        bias_grad_kernel<<<grid, 256, 0, stream_>>>(dbias.as<float>(), dout.as<CS_T(tag)>(), N, OC);
      });
      check_launch();
    }
  }

  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight,
                         Tensor bias, int N, int C) override {
    const int warps = 8;
    dispatch(out.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      layernorm_forward_kernel<<<(N + warps - 1) / warps, 32 * warps, 0, stream_>>>(
          out.as<X>(), mean.as<float>(), rstd.as<float>(), inp.as<X>(), weight.as<X>(), bias.as<X>(), N, C);
    });
    check_launch();
  }

  void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                          Tensor weight, Tensor mean, Tensor rstd, int N, int C) override {
    const int warps = 8;
    const int blocks = std::max(1, std::min((N + warps - 1) / warps, 1024));
    const std::size_t shared = 2 * static_cast<std::size_t>(C) * sizeof(float);
    dispatch(dinp.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      if (shared > 48 * 1024) {
        CS_CUDA(cudaFuncSetAttribute(layernorm_backward_kernel<X>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
      }
      layernorm_backward_kernel<<<blocks, 32 * warps, shared, stream_>>>(
          dinp.as<X>(), dweight.as<float>(), dbias.as<float>(), dout.as<X>(), inp.as<X>(),
          weight.as<X>(), mean.as<float>(), rstd.as<float>(), N, C);
    });
    check_launch();
  }

  // Attention through batched GEMMs: preatt = q k^T, att = causal softmax,
  // out = att v; q, k, v split per head first.
  void attention_forward(Tensor out, Tensor att, Tensor qkv, int B, int T, int C, int NH) override {
    const int hs = C / NH;
    const std::int64_t per_head = static_cast<std::int64_t>(B) * NH * T * hs;
    const std::int64_t scores = static_cast<std::int64_t>(B) * NH * T * T;
    Tensor q = scratch(0, per_head, qkv.dtype), k = scratch(1, per_head, qkv.dtype),
           v = scratch(2, per_head, qkv.dtype), y = scratch(3, per_head, qkv.dtype);
    Tensor preatt = scratch(4, scores, DType::f32);
    dispatch(qkv.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      split_heads_kernel<<<blocks_for(per_head), 256, 0, stream_>>>(q.as<X>(), k.as<X>(), v.as<X>(),
                                                                     qkv.as<X>(), B, T, NH, hs);
    });
    check_launch();
    const double flops = 4.0 * B * static_cast<double>(T) * T * C;
    Hooked h(*this, "attention", "", flops);
    // preatt[T,T] (row-major) = q[T,hs] k^T: column-major preatt^T = k . q^T
    batched_gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, k, hs, static_cast<std::int64_t>(T) * hs, q, hs,
                 static_cast<std::int64_t>(T) * hs, preatt, T, static_cast<std::int64_t>(T) * T, B * NH, 0.0f);
    const int rows = B * NH * T;
    dispatch(att.dtype, [&](auto* tag) {
      causal_softmax_kernel<<<(rows + 7) / 8, 256, 0, stream_>>>(att.as<CS_T(tag)>(), preatt.as<float>(),
                                                                 1.0f / std::sqrt(static_cast<float>(hs)), rows, T);
    });
    check_launch();
    // y[T,hs] = att[T,T] . v[T,hs]: column-major y^T = v^T . att^T
    batched_gemm(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, v, hs, static_cast<std::int64_t>(T) * hs, att, T,
                 static_cast<std::int64_t>(T) * T, y, hs, static_cast<std::int64_t>(T) * hs, B * NH, 0.0f);
    dispatch(out.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      merge_heads_kernel<<<blocks_for(per_head), 256, 0, stream_>>>(out.as<X>(), y.as<X>(), B, T, NH, hs);
    });
    check_launch();
  }

  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor att, int B, int T, int C,
                          int NH) override {
    const int hs = C / NH;
    const std::int64_t per_head = static_cast<std::int64_t>(B) * NH * T * hs;
    const std::int64_t scores = static_cast<std::int64_t>(B) * NH * T * T;
    const std::int64_t sh = static_cast<std::int64_t>(T) * hs;
    const std::int64_t ss = static_cast<std::int64_t>(T) * T;
    Tensor q = scratch(0, per_head, qkv.dtype), k = scratch(1, per_head, qkv.dtype),
           v = scratch(2, per_head, qkv.dtype), dy = scratch(3, per_head, qkv.dtype);
    Tensor datt = scratch(4, scores, DType::f32);
    Tensor dq = scratch(6, per_head, qkv.dtype), dk = scratch(7, per_head, qkv.dtype),
           dv = scratch(8, per_head, qkv.dtype);
    Tensor dpre_t = scratch(9, scores, qkv.dtype);
    dispatch(qkv.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      split_heads_kernel<<<blocks_for(per_head), 256, 0, stream_>>>(q.as<X>(), k.as<X>(), v.as<X>(),
                                                                     qkv.as<X>(), B, T, NH, hs);
      // dout [B,T,C] -> [B,NH,T,hs]: split_heads on a 3C layout does not fit; use merge's inverse.
      split_single<X>(dy.as<X>(), dout.as<X>(), B, T, NH, hs);
    });
    check_launch();
    const double flops = 8.0 * B * static_cast<double>(T) * T * C;
    Hooked h(*this, "attention backward", "", flops);
    // datt[T,T] = dy[T,hs] . v^T : column-major datt^T = v . dy^T
    batched_gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, v, hs, sh, dy, hs, sh, datt, T, ss, B * NH, 0.0f);
    // dv[T,hs] = att^T[T,T] . dy[T,hs]: column-major dv^T = dy^T . att
    batched_gemm(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, dy, hs, sh, att, T, ss, dv, hs, sh, B * NH, 0.0f);
    const int rows = B * NH * T;
    dispatch(dpre_t.dtype, [&](auto* d) {
      dispatch(att.dtype, [&](auto* tag) {
        softmax_backward_kernel<<<(rows + 7) / 8, 256, 0, stream_>>>(
            dpre_t.as<CS_T(d)>(), datt.as<float>(), att.as<CS_T(tag)>(),
            1.0f / std::sqrt(static_cast<float>(hs)), rows, T);
      });
    });
    check_launch();
    // dq[T,hs] = dpre[T,T] . k[T,hs]: column-major dq^T = k^T . dpre^T
    batched_gemm(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, k, hs, sh, dpre_t, T, ss, dq, hs, sh, B * NH, 0.0f);
    // dk[T,hs] = dpre^T . q: column-major dk^T = q^T . dpre
    batched_gemm(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, q, hs, sh, dpre_t, T, ss, dk, hs, sh, B * NH, 0.0f);
    dispatch(qkv.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      join_heads_kernel<<<blocks_for(per_head), 256, 0, stream_>>>(dqkv.as<X>(), dq.as<X>(), dk.as<X>(),
                                                                    dv.as<X>(), B, T, NH, hs);
    });
    check_launch();
  }

  void gelu_forward(Tensor out, Tensor inp, std::int64_t n) override {
    dispatch(out.dtype, [&](auto* tag) {
      gelu_forward_kernel<<<blocks_for(n), 256, 0, stream_>>>(out.as<CS_T(tag)>(), inp.as<CS_T(tag)>(), n);
    });
    check_launch();
  }
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout, std::int64_t n) override {
    dispatch(dinp.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      gelu_backward_kernel<<<blocks_for(n), 256, 0, stream_>>>(dinp.as<X>(), inp.as<X>(), dout.as<X>(), n);
    });
    check_launch();
  }
  void residual_forward(Tensor out, Tensor a, Tensor b, std::int64_t n) override {
    dispatch(out.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      residual_kernel<<<blocks_for(n), 256, 0, stream_>>>(out.as<X>(), a.as<X>(), b.as<X>(), n);
    });
    check_launch();
  }
  void crossentropy_forward_backward(Tensor losses, Tensor logits, Tensor targets, int N, int V,
                                     float dloss) override {
    dispatch(logits.dtype, [&](auto* tag) {
      crossentropy_kernel<<<N, 256, 0, stream_>>>(losses.as<float>(), logits.as<CS_T(tag)>(),
                                                  targets.as<int>(), V, dloss);
    });
    check_launch();
  }

  double sum(Tensor t) override { return reduce(t, 0); }
  double sum_of_squares(Tensor t) override { return reduce(t, 1); }

  bool all_finite(Tensor t) override {
    int* count = static_cast<int*>(scratch_scalars_);
    CS_CUDA(cudaMemsetAsync(count, 0, sizeof(int), stream_));
    count_non_finite_kernel<<<blocks_for(t.numel), 256, 0, stream_>>>(count, t.as<float>(), t.numel);
    check_launch();
    int host = 0;
    CS_CUDA(cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, stream_));
    CS_CUDA(cudaStreamSynchronize(stream_));
    return host == 0;
  }

  void adamw(Tensor params, Tensor grads, Tensor m, Tensor v, float lr, float beta1, float beta2,
             float eps, float weight_decay, int t) override {
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(t));
    const float c2 = 1.0f - std::pow(beta2, static_cast<float>(t));
    adamw_kernel<<<blocks_for(params.numel), 256, 0, stream_>>>(
        params.as<float>(), grads.as<float>(), m.as<float>(), v.as<float>(), params.numel, lr,
        beta1, beta2, eps, weight_decay, c1, c2);
    check_launch();
  }

 private:
  static constexpr std::size_t kWorkspace = 32u << 20;
  static constexpr std::size_t kScratchScalarBytes = 256;  // reductions' result, FP8 amax and scales

  // The largest power of two up to 256 that divides the address.
  static std::uint32_t pointer_alignment(const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    std::uint32_t alignment = 256;
    while (alignment > 1 && address % alignment != 0) alignment /= 2;
    return alignment;
  }

  // Names the GEMM for the tracer (NVTX range + the hooks' correlation).
  struct Hooked {
    Hooked(CudaBackend& b, std::string_view name, const char* suffix, double flops,
           std::int64_t bytes = 0)
        : backend(b) {
      std::string label(name);
      label += suffix;
      id = ++b.gemm_ids_;
      nvtxRangePushA(label.c_str());
      if (backend.hooks_.before) backend.hooks_.before(id, label, flops, bytes);
    }
    ~Hooked() {
      backend.ran_in_ |= computed_in == trace::DataType::fp8_e4m3 ? kRanFp8
                         : computed_in == trace::DataType::bf16   ? kRanBf16
                                                                  : kRanAsAsked;
      if (backend.hooks_.after) backend.hooks_.after(id, computed_in);
      nvtxRangePop();
    }
    CudaBackend& backend;
    std::uint64_t id = 0;
    trace::DataType computed_in = trace::DataType::none;  // see GemmHooks::after
  };

  // What a GEMM [rows x inner] . [inner x cols] reads and writes, as the
  // planner counts it: both operands once and the result once.
  static std::int64_t operand_bytes(std::int64_t rows, std::int64_t inner, std::int64_t cols,
                                    const Tensor& a, const Tensor& b, const Tensor& result) {
    return rows * inner * dtype_bytes(a.dtype) + inner * cols * dtype_bytes(b.dtype) +
           rows * cols * dtype_bytes(result.dtype);
  }

  // A failed launch names the backend operation that made it (the kernel's
  // caller), not only the error.
  void check_launch(std::source_location where = std::source_location::current()) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      const std::string what = "kernel launch in " + operation_name(where.function_name());
      fail(what.c_str(), cudaGetErrorString(e), where.file_name(), static_cast<int>(where.line()));
    }
  }

  template <class X>
  void split_single(X* out, const X* in, int B, int T, int NH, int hs) {
    // [B,T,C] -> [B,NH,T,hs], the inverse of merge_heads.
    const std::int64_t n = static_cast<std::int64_t>(B) * NH * T * hs;
    split_single_launch(out, in, B, T, NH, hs, n);
  }
  template <class X>
  void split_single_launch(X* out, const X* in, int B, int T, int NH, int hs, std::int64_t n);

  Tensor scratch(int index, std::int64_t numel, DType dtype) {
    if (scratch_.size() <= static_cast<std::size_t>(index)) scratch_.resize(index + 1);
    Tensor& t = scratch_[index];
    if (t.bytes() < numel * dtype_bytes(dtype)) {
      release(t);
      t = alloc(numel * dtype_bytes(dtype) / 2 + 1, DType::f16, "attention scratch");
    }
    return Tensor{t.data, numel, dtype};
  }

  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, Tensor a, int lda,
            Tensor b, int ldb, Tensor c, int ldc, float beta) {
    const float alpha = 1.0f;
    CS_CUBLAS(cublasGemmEx(cublas_, ta, tb, m, n, k, &alpha, a.data, cuda_type(a.dtype), lda, b.data,
                           cuda_type(b.dtype), ldb, &beta, c.data, cuda_type(c.dtype), ldc,
                           gemm_compute_, CUBLAS_GEMM_DEFAULT));
  }

  void batched_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, Tensor a,
                    int lda, std::int64_t sa, Tensor b, int ldb, std::int64_t sb, Tensor c, int ldc,
                    std::int64_t sc, int batches, float beta) {
    const float alpha = 1.0f;
    CS_CUBLAS(cublasGemmStridedBatchedEx(cublas_, ta, tb, m, n, k, &alpha, a.data, cuda_type(a.dtype),
                                         lda, sa, b.data, cuda_type(b.dtype), ldb, sb, &beta, c.data,
                                         cuda_type(c.dtype), ldc, sc, batches, gemm_compute_,
                                         CUBLAS_GEMM_DEFAULT));
  }

  // FP8 E4M3 forward GEMM, out = inp . W^T, with per-tensor scales from the
  // current amax of each operand (current scaling). False: cuBLASLt turned
  // the shape down and the GEMM ran in BF16.
  bool fp8_gemm_nt(Tensor out, Tensor inp, Tensor weight, int N, int C, int OC) {
    const std::int64_t na = static_cast<std::int64_t>(OC) * C;
    const std::int64_t nb = static_cast<std::int64_t>(N) * C;
    __nv_fp8_e4m3* a8 = fp8_buffer(0, na);
    __nv_fp8_e4m3* b8 = fp8_buffer(1, nb);
    // Each scalar in a 16-byte slot of its own past the reductions' 8 bytes:
    // the amax of A and B, then the inverse scales cuBLASLt reads (the
    // alignment cuBLASLt asks of its other operands).
    float* slots = static_cast<float*>(scratch_scalars_);
    float* amax_a = slots + 4;
    float* amax_b = slots + 8;
    float* scale_a = slots + 12;
    float* scale_b = slots + 16;
    CS_CUDA(cudaMemsetAsync(amax_a, 0, 8 * sizeof(float), stream_));
    dispatch(weight.dtype, [&](auto* tag) {
      using X = CS_T(tag);
      amax_kernel<<<std::min(blocks_for(na), kReductionBlocks), 256, 0, stream_>>>(
          amax_a, weight.as<X>(), na);
      amax_kernel<<<std::min(blocks_for(nb), kReductionBlocks), 256, 0, stream_>>>(amax_b,
                                                                                   inp.as<X>(), nb);
      to_fp8_kernel<<<blocks_for(na), 256, 0, stream_>>>(a8, weight.as<X>(), amax_a, scale_a, na);
      to_fp8_kernel<<<blocks_for(nb), 256, 0, stream_>>>(b8, inp.as<X>(), amax_b, scale_b, nb);
    });
    check_launch();

    const std::uint32_t align_a = pointer_alignment(a8), align_b = pointer_alignment(b8),
                        align_d = pointer_alignment(out.data);
    const float alpha = 1.0f;
    const float beta = 0.0f;
    // A shape seen before reuses its descriptors and the algorithm that ran
    // it: the heuristic costs more host time than a small GEMM takes.
    const Fp8PlanKey key{N,
                         C,
                         OC,
                         static_cast<int>(out.dtype),
                         static_cast<int>(align_a),
                         static_cast<int>(align_b),
                         static_cast<int>(align_d)};
    if (auto known = fp8_plans_.find(key); known != fp8_plans_.end()) {
      const Fp8Plan& plan = *known->second;
      const cublasStatus_t status = cublasLtMatmul(
          lt_, plan.desc, &alpha, a8, plan.la, b8, plan.lb, &beta, out.data, plan.lc, out.data,
          plan.lc, plan.implicit_algo ? nullptr : &plan.algo, workspace_, kWorkspace, stream_);
      if (status == CUBLAS_STATUS_SUCCESS) {
        ++fp8_gemms_;
        return true;
      }
      fp8_plans_.erase(known);  // planned afresh below, and refused there if it must be
    }

    auto plan = std::make_unique<Fp8Plan>();
    const cublasOperation_t opT = CUBLAS_OP_T;
    const cublasOperation_t opN = CUBLAS_OP_N;
    CS_CUBLAS(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatmulDesc_t desc = plan->desc;
    CS_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    CS_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    // The scales live at fixed addresses, so a cached descriptor stays right.
    CS_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof scale_a));
    CS_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof scale_b));
    CS_CUBLAS(cublasLtMatrixLayoutCreate(&plan->la, CUDA_R_8F_E4M3, C, OC, C));
    CS_CUBLAS(cublasLtMatrixLayoutCreate(&plan->lb, CUDA_R_8F_E4M3, C, N, C));
    CS_CUBLAS(cublasLtMatrixLayoutCreate(&plan->lc, cuda_type(out.dtype), OC, N, OC));
    cublasLtMatrixLayout_t la = plan->la, lb = plan->lb, lc = plan->lc;
    CS_CUBLAS(cublasLtMatmulPreferenceCreate(&plan->pref));
    cublasLtMatmulPreference_t pref = plan->pref;
    CS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &kWorkspace, sizeof kWorkspace));
    // The heuristic assumes 256-byte aligned matrices unless told otherwise.
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                         sizeof align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                         sizeof align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                         sizeof align_d);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                         sizeof align_d);
    // Try the heuristic's candidates in order; a shape no FP8 kernel takes
    // runs in BF16 instead, and the fallback is counted and reported.
    cublasLtMatmulHeuristicResult_t heuristics[8] = {};
    int found = 0;
    const cublasStatus_t heuristic =
        cublasLtMatmulAlgoGetHeuristic(lt_, desc, la, lb, lc, lc, pref, 8, heuristics, &found);
    cublasStatus_t status = CUBLAS_STATUS_NOT_SUPPORTED;
    // A candidate's fields hold only when its own state is success.
    cublasStatus_t candidate_state = CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < found && status != CUBLAS_STATUS_SUCCESS; ++i) {
      if (heuristics[i].state != CUBLAS_STATUS_SUCCESS) {
        candidate_state = heuristics[i].state;
        continue;
      }
      status = cublasLtMatmul(lt_, desc, &alpha, a8, la, b8, lb, &beta, out.data, lc, out.data, lc,
                              &heuristics[i].algo, workspace_, kWorkspace, stream_);
      if (status == CUBLAS_STATUS_SUCCESS) plan->algo = heuristics[i].algo;
    }
    // Last, cuBLASLt's own choice (no algorithm: its implicit heuristic with
    // default preferences), in case our preferences ruled out the kernel.
    const cublasStatus_t explicit_status = status;
    if (status != CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmul(lt_, desc, &alpha, a8, la, b8, lb, &beta, out.data, lc, out.data, lc,
                              nullptr, workspace_, kWorkspace, stream_);
      plan->implicit_algo = true;
    }
    if (status != CUBLAS_STATUS_SUCCESS) {
      if (fp8_fallbacks_++ == 0) {
        // Whether cuBLASLt accepts the first candidate for these layouts
        // tells a layout problem from one with the pointers passed at run time.
        cublasLtMatmulHeuristicResult_t check{};
        const cublasStatus_t algo_check =
            found > 0 ? cublasLtMatmulAlgoCheck(lt_, desc, la, lb, lc, lc, &heuristics[0].algo, &check)
                      : heuristic;
        // Which cuBLASLt answered: its version and the library it was
        // loaded from (a CUDA toolkit's, or one a Python package put first).
        std::fprintf(stderr,
                     "clusterscope-worker: FP8 GEMM %dx%dx%d not supported by cuBLASLt (%s, %d "
                     "candidates, a refused one's state %s; its own choice %s; heuristic %s, "
                     "algorithm check %s; alignment A %u, B %u, D %u bytes; cuBLASLt %zu from %s): "
                     "running such GEMMs in BF16\n",
                     N, OC, C, cublasGetStatusString(explicit_status), found,
                     cublasGetStatusString(candidate_state), cublasGetStatusString(status),
                     cublasGetStatusString(heuristic), cublasGetStatusString(algo_check), align_a,
                     align_b, align_d, cublasLtGetVersion(), cublaslt_library().c_str());
      }
      gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, out, OC, 0.0f);
      return false;
    }
    ++fp8_gemms_;
    fp8_plans_.emplace(key, std::move(plan));
    return true;
  }

  __nv_fp8_e4m3* fp8_buffer(int index, std::int64_t n) {
    if (fp8_buffers_.size() <= static_cast<std::size_t>(index)) {
      fp8_buffers_.resize(index + 1, nullptr);
      fp8_sizes_.resize(index + 1, 0);
    }
    if (fp8_sizes_[index] < n) {
      if (fp8_buffers_[index]) {
        cudaStreamSynchronize(stream_);
        cudaFree(fp8_buffers_[index]);
        fp8_buffers_[index] = nullptr;  // a failed cudaMalloc below must not leave it to free again
        fp8_sizes_[index] = 0;
      }
      CS_CUDA(cudaMalloc(&fp8_buffers_[index], static_cast<std::size_t>(n)));
      fp8_sizes_[index] = n;
    }
    return static_cast<__nv_fp8_e4m3*>(fp8_buffers_[index]);
  }

  double reduce(Tensor t, int squares) {
    double* out = static_cast<double*>(scratch_scalars_);
    CS_CUDA(cudaMemsetAsync(out, 0, sizeof(double), stream_));
    sum_kernel<<<std::min(blocks_for(t.numel), kReductionBlocks), 256, 0, stream_>>>(
        out, t.as<float>(), t.numel, squares);
    check_launch();
    double host = 0;
    CS_CUDA(cudaMemcpyAsync(&host, out, sizeof host, cudaMemcpyDeviceToHost, stream_));
    CS_CUDA(cudaStreamSynchronize(stream_));
    return host;
  }

  int device_;
  CudaCompute compute_;
  std::string name_;
  bool fp8_capable_ = false;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cublasComputeType_t gemm_compute_ = CUBLAS_COMPUTE_32F;
  void* workspace_ = nullptr;
  void* scratch_scalars_ = nullptr;
  std::vector<Tensor> scratch_;
  std::vector<void*> fp8_buffers_;
  std::vector<std::int64_t> fp8_sizes_;
  // An FP8 GEMM's cuBLASLt descriptors and the algorithm that ran it, per
  // shape, output type and operand alignments; released with the backend.
  struct Fp8Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool implicit_algo = false;  // cuBLASLt's own choice (no algorithm passed)
    Fp8Plan() = default;
    Fp8Plan(const Fp8Plan&) = delete;
    Fp8Plan& operator=(const Fp8Plan&) = delete;
    ~Fp8Plan() {
      if (pref) cublasLtMatmulPreferenceDestroy(pref);
      for (cublasLtMatrixLayout_t l : {la, lb, lc}) {
        if (l) cublasLtMatrixLayoutDestroy(l);
      }
      if (desc) cublasLtMatmulDescDestroy(desc);
    }
  };
  using Fp8PlanKey = std::array<int, 7>;  // N, C, OC, output type, alignments of A, B, D
  std::map<Fp8PlanKey, std::unique_ptr<Fp8Plan>> fp8_plans_;
  std::atomic<std::int64_t> bytes_{0};
  std::uint64_t gemm_ids_ = 0;
  GemmHooks hooks_;

 public:
  // What the GEMMs ran in since take_gemm_ran_as last asked: kRan* bits.
  static constexpr unsigned kRanAsAsked = 1, kRanFp8 = 2, kRanBf16 = 4;
  unsigned ran_in_ = 0;
  std::uint64_t fp8_gemms_ = 0;      // forward GEMMs that ran in FP8
  std::uint64_t fp8_fallbacks_ = 0;  // ... and those that fell back to BF16
  std::set<std::array<int, 3>> fp8_refused_;  // (N, C, OC) shapes cuBLASLt turned down
};

template <class T>
__global__ void split_single_kernel(T* out, const T* in, int B, int T_, int NH, int hs, std::int64_t n) {
  const int C = NH * hs;
  GRID_LOOP(i, n) {
    const int d = static_cast<int>(i % hs);
    const int t = static_cast<int>((i / hs) % T_);
    const int h = static_cast<int>((i / (static_cast<std::int64_t>(hs) * T_)) % NH);
    const int b = static_cast<int>(i / (static_cast<std::int64_t>(hs) * T_ * NH));
    out[i] = in[(static_cast<std::int64_t>(b) * T_ + t) * C + h * hs + d];
  }
}

template <class X>
void CudaBackend::split_single_launch(X* out, const X* in, int B, int T, int NH, int hs, std::int64_t n) {
  split_single_kernel<<<blocks_for(n), 256, 0, stream_>>>(out, in, B, T, NH, hs, n);
}

}  // namespace

DType cuda_storage_type(CudaCompute compute) {
  switch (compute) {
    case CudaCompute::fp32:
    case CudaCompute::tf32: return DType::f32;
    case CudaCompute::bf16:
    case CudaCompute::fp8: return DType::bf16;
    case CudaCompute::fp16: return DType::f16;
  }
  return DType::f32;
}

Result<CudaCompute> cuda_compute_from_string(const std::string& p) {
  if (p == "fp32") return CudaCompute::fp32;
  if (p == "tf32") return CudaCompute::tf32;
  if (p == "bf16") return CudaCompute::bf16;
  if (p == "fp16") return CudaCompute::fp16;
  if (p == "fp8") return CudaCompute::fp8;
  return Error{"the CUDA engine computes in fp32, tf32, bf16, fp16 or fp8, not " + p};
}

Result<int> cuda_device_count() {
  int count = 0;  // the static runtime may leave it unwritten when there is no driver
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInitializationError) {
    cudaGetLastError();
    return Error{std::string("no GPU: ") + (e == cudaErrorNoDevice ? "the CUDA driver reports no device"
                                                                  : "no usable NVIDIA driver (" +
                                                                        std::string(cudaGetErrorString(e)) + ")")};
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Error{std::string("no GPU: ") + cudaGetErrorString(e)};
  }
  if (count <= 0) return Error{"no GPU: the CUDA driver reports no device"};
  return count;
}

Result<CudaDeviceInfo> cuda_device_info(int device) {
  auto count = cuda_device_count();
  if (!count) return count.error();
  if (device >= *count) {
    return Error{"GPU " + std::to_string(device) + " does not exist (" + std::to_string(*count) +
                 " found)"};
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return Error{"cannot query GPU " + std::to_string(device)};
  CudaDeviceInfo info;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  cudaRuntimeGetVersion(&info.runtime_version);
  cudaDriverGetVersion(&info.driver_version);
  return info;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(int device, CudaCompute compute) {
  auto info = cuda_device_info(device);
  if (!info) return info.error();
  try {
    return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, compute));
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
}

void set_gemm_hooks(Backend& backend, GemmHooks hooks) {
  static_cast<CudaBackend&>(backend).set_hooks(std::move(hooks));
}

std::pair<std::uint64_t, std::uint64_t> cuda_fp8_gemm_counts(Backend& backend) {
  auto& b = static_cast<CudaBackend&>(backend);
  return {b.fp8_gemms_, b.fp8_fallbacks_};
}

void* cuda_compute_stream(Backend& backend) { return static_cast<CudaBackend&>(backend).stream(); }

void cuda_use_device(int device) { CS_CUDA(cudaSetDevice(device)); }

double cuda_device_memory_used(int device) {
  int current = 0;
  cudaGetDevice(&current);
  cudaSetDevice(device);
  std::size_t free_bytes = 0, total = 0;
  const bool ok = cudaMemGetInfo(&free_bytes, &total) == cudaSuccess;
  cudaSetDevice(current);
  return ok ? static_cast<double>(total - free_bytes) : 0.0;
}

}  // namespace cs::worker
