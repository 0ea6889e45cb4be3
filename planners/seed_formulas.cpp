#include "planners/seed_formulas.h"

#include <algorithm>
#include <cmath>

#include "planners/collectives.h"

namespace cs::plan {

double simple_communication_seconds(double bytes, int devices, double bandwidth, double latency) {
  if (devices <= 1 || bandwidth <= 0) return 0;
  return bytes * devices / bandwidth + latency * (devices - 1);
}

double ring_all_reduce_seconds(double bytes, int devices, double bandwidth, double latency) {
  if (bandwidth <= 0) return 0;
  return ring_seconds(trace::Collective::all_reduce, devices, bytes,
                      Tier{bandwidth, 1, latency, {}});
}

QuantParams quant_params(double min, double max, int bits, bool signed_range) {
  QuantParams q;
  const int levels = (1 << bits) - 1;  // 255 for 8 bits
  // The range must hold 0 exactly (padding and ReLU zeros stay exact).
  min = std::min(min, 0.0);
  max = std::max(max, 0.0);
  q.min = min;
  q.max = max;
  q.scale = (max > min) ? (max - min) / levels : 1.0;
  const int unsigned_zero = static_cast<int>(std::lround(-min / q.scale));
  if (signed_range) {
    q.q_min = -(1 << (bits - 1));
    q.q_max = (1 << (bits - 1)) - 1;
    q.zero_point = unsigned_zero + q.q_min;
  } else {
    q.q_min = 0;
    q.q_max = levels;
    q.zero_point = unsigned_zero;
  }
  return q;
}

QuantParams symmetric_quant_params(double min, double max, int bits) {
  QuantParams q;
  const double m = std::max(std::fabs(min), std::fabs(max));
  q.q_max = (1 << (bits - 1)) - 1;
  q.q_min = -q.q_max;
  q.min = -m;
  q.max = m;
  q.scale = m > 0 ? m / q.q_max : 1.0;
  q.zero_point = 0;
  return q;
}

QuantParams article_int8_params(double min, double max) {
  QuantParams q = quant_params(min, max, 8, false);
  q.q_min = -128;
  q.q_max = 127;
  return q;
}

Quantized quantize(double x, const QuantParams& p) {
  Quantized out;
  // Saturated before the conversion: a value far outside a tiny range
  // overflows any integer (and llround's result is then unspecified).
  constexpr double kLimit = 9e18;
  out.unclamped = static_cast<std::int64_t>(
      std::clamp(std::round(x / p.scale) + p.zero_point, -kLimit, kLimit));
  const std::int64_t clamped = std::clamp<std::int64_t>(out.unclamped, p.q_min, p.q_max);
  out.clamped = clamped != out.unclamped;
  out.q = static_cast<int>(clamped);
  out.dequantized = p.scale * (out.q - p.zero_point);
  out.error = out.dequantized - x;
  return out;
}

double training_flops(double forward_flops_per_sample, double samples_trained) {
  // 1 forward + 2 backward (gradients of the inputs and of the weights).
  return forward_flops_per_sample * 3 * samples_trained;
}

namespace {
// The samples of the part of a pass past the whole ones (2.5 epochs: half
// the set), whole; 1.1 - 1 is 0.10000000000000009 in a double, and its
// ceiling would add a sample.
double samples_of_part_pass(double samples, double epochs) {
  const double part = (epochs - std::floor(epochs)) * samples;
  const double nearest = std::round(part);
  return std::fabs(part - nearest) < 1e-9 * std::max(1.0, samples) ? nearest : std::ceil(part);
}
}  // namespace

double iterations_per_run(double samples, double batch, double epochs) {
  if (batch <= 0) return 0;
  // Whole passes, then the part of one, each ending in a partial batch.
  return std::floor(epochs) * std::ceil(samples / batch) +
         std::ceil(samples_of_part_pass(samples, epochs) / batch);
}

double samples_per_run(double samples, double epochs) {
  return std::floor(epochs) * samples + samples_of_part_pass(samples, epochs);
}

}  // namespace cs::plan
