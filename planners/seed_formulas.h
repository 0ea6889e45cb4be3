#pragma once
// The seed articles' own formulas, kept exactly as they teach them, and put
// beside the models the planner uses instead (see docs/planner.md):
//  - communication time T = S*N/B + L*(N-1) (S bytes, N devices, B bytes/s,
//    L seconds), next to the ring all-reduce that moves 2(N-1)/N * S;
//  - INT8 quantisation: scale s = (max - min)/255, zero point z =
//    round(-min/s), q = round(x/s) + z clamped to the integer range,
//    x' = s (q - z);
//  - total training FLOPs = forward FLOPs x (1 forward + 2 backward) x batch
//    x iterations (the article writes x2; backward costs about twice the
//    forward, so the product uses x3).

#include <cstdint>

namespace cs::plan {

// The article's simple model: every device's S crosses one link of B, plus a
// latency per hop.
double simple_communication_seconds(double bytes, int devices, double bandwidth, double latency);

// Ring all-reduce on the same link: 2(N-1)/N * S/B + 2(N-1) L.
double ring_all_reduce_seconds(double bytes, int devices, double bandwidth, double latency);

// Asymmetric linear quantisation of [min, max] onto `bits`-bit integers.
struct QuantParams {
  double min = 0;      // the range quantised: the one asked for, widened to hold 0
  double max = 0;
  double scale = 0;    // s = (max - min) / (2^bits - 1)
  int zero_point = 0;  // the integer that represents 0.0
  int q_min = 0;       // integer range the values are clamped to
  int q_max = 0;
};

// signed_range false: [0, 2^bits - 1] with z = round(-min/s) (the article's z
// for [-0.5, 0.8] is 98); true: [-2^(bits-1), 2^(bits-1) - 1], z shifted by
// -2^(bits-1) so that the same reals map into range.
QuantParams quant_params(double min, double max, int bits = 8, bool signed_range = false);

// Symmetric (absmax) quantisation, as TensorRT and LLM.int8() do: the range
// is [-m, m] with m = max(|min|, |max|), s = m / (2^(bits-1) - 1), z = 0,
// integers [-(2^(bits-1) - 1), 2^(bits-1) - 1]. A lopsided tensor uses
// part of it: its error is larger than asymmetric's, for no zero point.
QuantParams symmetric_quant_params(double min, double max, int bits = 8);

// The article's mix: z = round(-min/s) as for unsigned, but values stored in
// a signed int8 [-128, 127]; 0.3 then maps to 157 and must be clamped to 127.
QuantParams article_int8_params(double min, double max);

struct Quantized {
  std::int64_t unclamped = 0;  // round(x/s) + z before clamping (saturated at +-9e18)
  int q = 0;                   // clamped to [q_min, q_max]
  bool clamped = false;        // the value overflowed the integer range
  double dequantized = 0;      // s (q - z)
  double error = 0;            // dequantized - x
};
Quantized quantize(double x, const QuantParams& params);

// Forward FLOPs per sample x 3 (1 forward + 2 backward) x the samples
// trained on: batch x iterations, or samples x epochs, where the last batch
// of an epoch holds only what is left (counted full, 50 000 CIFAR-10 images
// in batches of 256 were 50 176).
double training_flops(double forward_flops_per_sample, double samples_trained);

// Iterations of `epochs` passes over `samples` in batches of `batch` (the
// last, partial batch counts as an iteration, as a PyTorch DataLoader does;
// a part of an epoch is that part of the set, in whole samples).
double iterations_per_run(double samples, double batch, double epochs);
// The samples those passes train on.
double samples_per_run(double samples, double epochs);

}  // namespace cs::plan
