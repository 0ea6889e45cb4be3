#include "core/machine_probe.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"

namespace cs {

using nlohmann::json;

MachineProbeShape machine_probe_shape(std::string_view backend, std::string_view precision,
                                      int ranks) {
  MachineProbeShape s;
  // CPU: 256 tokens x 256 -> 1024, 134 MFLOP, 0.9 ms with two BLAS threads
  // on the development VM (a point of the default layer GEMM sweep). CUDA:
  // 69 GFLOP, well past the width where an H200's GEMMs reach their rate.
  s.width = backend == "cuda" ? 2048 : 256;
  s.precision = std::string(precision);
  s.all_reduce_bytes = std::int64_t{1} << 20;
  s.ranks = std::max(1, ranks);
  return s;
}

std::string machine_probe_json(const MachineProbe& p) {
  return json_text(json{{"width", p.shape.width},
                        {"precision", p.shape.precision},
                        {"all_reduce_bytes", p.shape.all_reduce_bytes},
                        {"ranks", p.shape.ranks},
                        {"gemm_seconds", p.gemm_seconds},
                        {"loop_seconds", p.loop_seconds},
                        {"all_reduce_seconds", p.all_reduce_seconds}});
}

Result<MachineProbe> machine_probe_from_json(std::string_view text, std::string_view where) {
  const json j = parse_json_text(text);
  if (j.is_discarded()) return Error{std::string(where) + ": not valid JSON"};
  Diagnostics diag;
  ObjectReader r(j, "", diag);
  MachineProbe p;
  double bytes = -1;
  r.integer("width", p.shape.width, Range::at_least(1), true);
  r.text("precision", p.shape.precision, true);
  r.number("all_reduce_bytes", bytes, Range::non_negative(), true);
  r.integer("ranks", p.shape.ranks, Range::at_least(1), true);
  r.number("gemm_seconds", p.gemm_seconds, Range::non_negative(), true);
  r.number("loop_seconds", p.loop_seconds, Range::non_negative());
  r.number("all_reduce_seconds", p.all_reduce_seconds, Range::non_negative(), true);
  r.finish();
  if (!diag.empty()) return diag.to_error(where);
  p.shape.all_reduce_bytes = static_cast<std::int64_t>(bytes);
  return p;
}

namespace {
double ratio(double measured, double predicted) {
  return measured > 0 && predicted > 0 ? measured / predicted : 0;
}

// The model's error against the measurement, as every predicted-against-
// measured table gives it (predicted / measured - 1): from the probe's
// ratio, measured / predicted. It gave measured / predicted - 1, so one
// model too fast read -97 % in the tables and +7657 % here.
std::string model_error_percent(double measured_over_predicted) {
  const double pct = 100 * (1 / measured_over_predicted - 1);
  const std::string factor = model_error_factor(1, measured_over_predicted);
  return (pct >= 0 ? "+" : "") + format_fixed(pct, 0) + " %" +
         (factor.empty() ? "" : ", " + factor);
}
}  // namespace

double MachineDrift::gemm_ratio() const {
  return ratio(measured.gemm_seconds, predicted.gemm_seconds);
}

double MachineDrift::loop_ratio() const {
  return ratio(measured.loop_seconds, predicted.loop_seconds);
}

double MachineDrift::all_reduce_ratio() const {
  return ratio(measured.all_reduce_seconds, predicted.all_reduce_seconds);
}

// On the figure the text prints, the model's error against the measurement.
bool MachineDrift::drifted(double tolerance) const {
  for (double r : {gemm_ratio(), loop_ratio(), all_reduce_ratio()}) {
    if (r > 0 && std::abs(1 / r - 1) > tolerance) return true;
  }
  return false;
}

std::string MachineDrift::text() const {
  const MachineProbeShape& s = measured.shape;
  std::string out;
  if (gemm_ratio() > 0) {
    out += "GEMM probe (" + std::to_string(s.tokens()) + " x " + std::to_string(s.width) + " -> " +
           std::to_string(s.out()) + " " + s.precision +
           "): " + format_seconds(measured.gemm_seconds) + ", the model says " +
           format_seconds(predicted.gemm_seconds) + " (" + model_error_percent(gemm_ratio()) + ")";
  }
  if (loop_ratio() > 0) {
    if (!out.empty()) out += "; ";
    out += "layer-norm backward probe (" + format_count(static_cast<double>(s.loop_elements())) +
           " elements): " + format_seconds(measured.loop_seconds) + ", the model says " +
           format_seconds(predicted.loop_seconds) + " (" + model_error_percent(loop_ratio()) + ")";
  }
  if (all_reduce_ratio() > 0) {
    if (!out.empty()) out += "; ";
    out += "all-reduce probe (" + format_bytes(static_cast<double>(s.all_reduce_bytes)) + " over " +
           std::to_string(s.ranks) + " ranks): " + format_seconds(measured.all_reduce_seconds) +
           ", the model says " + format_seconds(predicted.all_reduce_seconds) + " (" +
           model_error_percent(all_reduce_ratio()) + ")";
  }
  return out;
}

}  // namespace cs
