#include "planners/formulas.h"

#include <algorithm>
#include <cstdint>

namespace cs::plan {

double stored_scores_bytes(const LayerShape& x, int tp, double e) {
  return (x.dropout ? 2 * e + 1 : e) * x.heads * x.seq * x.seq * x.batch / std::max(tp, 1);
}

double activation_bytes_per_layer(const LayerShape& x, int tp, bool sequence_parallel,
                                  Recompute recompute, bool flash_attention, double e,
                                  double gemm_input_bytes) {
  const double g = gemm_input_bytes > 0 ? gemm_input_bytes : e;
  const double t = std::max(tp, 1);
  const double sbh = x.seq * x.batch * x.hidden;
  const double sp_share = sequence_parallel ? 1.0 / t : 1.0;
  if (recompute == Recompute::full) return e * sbh * sp_share;  // 2sbh at e = 2

  const double mask = x.dropout ? 1 : 0;  // dropout masks are one byte per element
  const double kv_ratio = x.heads > 0 ? x.kv_heads / x.heads : 1;
  const double ffn_ratio = x.hidden > 0 ? x.ffn / x.hidden : 4;

  // Outside the tensor-parallel region (replicated unless sequence parallel):
  // two layer-norm inputs, the QKV and MLP inputs, two dropout masks: 4e + 2 (10 at e = 2).
  const double replicated = 2 * e + 2 * g + 2 * mask;
  // Inside it (split over t): Q and K, V, the projection input, the MLP's
  // inner activations (GeLU in and out; SwiGLU's gate and up, and their
  // product); the GeLU's output and SwiGLU's product are the last GEMM's input.
  const double qk = (1 + kv_ratio) * e;
  const double v = kv_ratio * e;
  const double projection_input = g == e ? e : flash_attention ? e + g : g;
  const double mlp_inner = ((x.gated_mlp ? 2 : 1) * e + g) * ffn_ratio;
  const double split = qk + v + projection_input + mlp_inner;  // 24 at e = 2, GPT shapes

  double bytes = sbh * (replicated * sp_share + split / t);
  const bool keeps_scores = recompute == Recompute::none && !flash_attention;
  if (keeps_scores) {
    // Without dropout the softmax output alone, which the weighted sum's backward reads.
    bytes += stored_scores_bytes(x, tp, e);
  } else if (flash_attention) {
    // Fused attention keeps the softmax log-sum-exp: one fp32 per head and token.
    bytes += 4 * x.heads * x.seq * x.batch / t;
  }
  return bytes;
}

double megatron_model_flops(double b, double s, double l, double h, double v) {
  return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
}

double model_flops_per_token(const TransformerShape& x) {
  const double h = x.hidden;
  const double d = x.heads > 0 ? h / x.heads : 0;
  const double qkv_cols = (x.heads + 2.0 * x.kv_heads) * d;
  const double up_cols = (x.gated_mlp ? 2.0 : 1.0) * x.ffn_hidden;
  const double layer = 2 * h * qkv_cols + 2 * (x.heads * d) * h + 2 * h * up_cols +
                       2 * x.ffn_hidden * h + 4.0 * x.seq_len * x.heads * d;
  return 3 * (x.layers * layer + 2 * h * x.vocab);
}

double six_pd_flops(double parameters, double tokens) {
  return 6 * parameters * tokens;
}

double zero_model_state_bytes(double psi, int ranks, int zero_stage) {
  const double n = std::max(ranks, 1);
  switch (zero_stage) {
    case 1:
      return 4 * psi + 12 * psi / n;
    case 2:
      return 2 * psi + 14 * psi / n;
    case 3:
      return 16 * psi / n;
    default:
      return 16 * psi;
  }
}

double megatron_model_state_bytes(double psi, int ranks, bool distributed_optimizer) {
  if (!distributed_optimizer) return 18 * psi;
  return 6 * psi + 12 * psi / std::max(ranks, 1);
}

double pipeline_bubble_fraction(int stages, int micro_batches, int virtual_stages) {
  if (stages <= 1 || micro_batches <= 0) return 0;
  return static_cast<double>(stages - 1) /
         (static_cast<double>(std::max(virtual_stages, 1)) * micro_batches);
}

int chunks_in_flight(int stages, int rank, int virtual_stages, int micro_batches) {
  // In 64 bits: a global batch of 2^30 is 2^30 micro-batches, which times 2
  // virtual stages overflowed an int (undefined behaviour). The result is
  // at most the warm-up's chunks, which fit an int.
  const std::int64_t v = std::max(virtual_stages, 1);
  const std::int64_t total = micro_batches * v;
  const std::int64_t behind = static_cast<std::int64_t>(stages) - rank - 1;
  const std::int64_t warmup = v == 1 ? behind : 2 * behind + (v - 1) * stages;
  return static_cast<int>(
      std::clamp<std::int64_t>(warmup + 1, 1, std::max<std::int64_t>(total, 1)));
}

}  // namespace cs::plan
