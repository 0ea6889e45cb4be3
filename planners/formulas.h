#pragma once
// Published closed forms the planner is built on, one function each, so that
// a test can hold each against the number its paper prints. Sources:
// Korthikanti et al. 2022 (activations, model FLOPs), Rajbhandari et al. 2020
// (ZeRO model state), Narayanan et al. 2021 (pipeline bubble, interleaving),
// Kaplan et al. 2020 (C = 6PD).

#include "core/plans.h"

namespace cs::plan {

// Activation bytes one transformer layer keeps for backward, for one
// micro-batch of b sequences, on one GPU. Korthikanti et al. 2022, Table 2,
// generalised to element size e (2 bytes in the paper), 1-byte dropout masks,
// grouped-query K/V and a gated or plain MLP of width ffn:
//   none           sbh(34 + 5as/h)
//   TP             sbh(10 + 24/t + 5as/(ht))
//   TP+SP          (sbh/t)(34 + 5as/h)
//   TP+selective   sbh(10 + 24/t)
//   TP+SP+selective 34 sbh/t
//   full recompute 2sbh (the layer's input only; /t with SP)
// Fused (flash) attention never stores the s x s scores: like selective.
struct LayerShape {
  double seq = 0, batch = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0;
  bool gated_mlp = false;
  bool dropout = true;  // its masks (one byte an element) are kept for backward
};
// Bytes of one layer's attention scores kept for backward when they are
// stored (unfused, not recomputed): the softmax output, and with dropout its
// mask and output, (2e + 1) a s^2 b / t (5as^2b at e = 2), else e a s^2 b / t.
double stored_scores_bytes(const LayerShape& shape, int tp, double element_bytes);
// gemm_input_bytes: how the inputs of the four GEMMs are kept (QKV, the
// projection, the MLP's two); 0 as the other activations. FP8 training
// (Transformer Engine) keeps them as the FP8 copies the GEMMs read, 1 byte:
// the layer-norm outputs and the MLP's activation output only so; the
// attention output also in 16 bits where fused attention's backward reads it.
double activation_bytes_per_layer(const LayerShape& shape, int tp, bool sequence_parallel,
                                  Recompute recompute, bool flash_attention,
                                  double element_bytes = 2, double gemm_input_bytes = 0);

// Model FLOPs of one step of B sequences through a GPT of L layers, hidden h,
// sequence s, vocabulary V (forward + backward, no recomputation):
// 72 B s L h^2 (1 + s/(6h) + V/(12 L h)). Korthikanti et al. 2022, Sec. 6.
double megatron_model_flops(double batch, double seq, double layers, double hidden, double vocab);

// Model FLOPs of one token, forward + backward (3 x forward, no
// recomputation), of a transformer of any shape: per layer the QKV
// projection (grouped-query K/V), the output projection, the MLP (three
// matrices when gated) and attention over the full s x s square, plus the LM
// head. For a GPT shape (kv = heads, ffn = 4h, plain MLP) it is
// megatron_model_flops(1, s, L, h, V) / s. What the planner's MFU counts.
double model_flops_per_token(const TransformerShape& shape);

// Training compute C = 6 P D (parameters x tokens), Kaplan et al. 2020.
double six_pd_flops(double parameters, double tokens);

// Bytes of model state per parameter for mixed-precision Adam: 2 (fp16
// weights) + 2 (fp16 gradients) + 12 (fp32 master, m, v) = 16, and
// how ZeRO shards it over n data-parallel ranks (Rajbhandari et al. 2020):
// stage 0: 16, 1: 4 + 12/n, 2: 2 + 14/n, 3: 16/n.
double zero_model_state_bytes(double parameters, int ranks, int zero_stage);

// Megatron-LM with an fp32 main gradient: 2 + 4 + 12 = 18 bytes per
// parameter, or 6 + 12/n with the distributed optimizer (ZeRO-1).
double megatron_model_state_bytes(double parameters, int ranks, bool distributed_optimizer);

// Pipeline bubble as a fraction of the ideal step: (p-1)/m for 1F1B, and
// (p-1)/(v m) with v interleaved model chunks per device (Narayanan et al. 2021).
double pipeline_bubble_fraction(int stages, int micro_batches, int virtual_stages = 1);

// Model chunks in flight on pipeline rank `rank` (0-based) of `stages` under
// Megatron's schedules: warm-up micro-batches + 1, at most all of them.
// 1F1B: stages - rank; interleaved: 2(stages - rank - 1) + (v - 1) stages + 1.
int chunks_in_flight(int stages, int rank, int virtual_stages, int micro_batches);

}  // namespace cs::plan
