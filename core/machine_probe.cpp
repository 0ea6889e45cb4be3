#include "core/machine_probe.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/format.h"

namespace cs {

using nlohmann::json;

MachineProbeShape machine_probe_shape(std::string_view backend, std::string_view precision,
                                      int ranks) {
  MachineProbeShape s;
  // CPU: 256 tokens x 256 -> 1024, 134 MFLOP, about 1.5 ms on two cores (a
  // point of the default layer GEMM sweep). CUDA: 69 GFLOP, well past the
  // width where an H200's GEMMs reach their rate.
  s.width = backend == "cuda" ? 2048 : 256;
  s.precision = std::string(precision);
  s.all_reduce_bytes = std::int64_t{1} << 20;
  s.ranks = std::max(1, ranks);
  return s;
}

std::string machine_probe_json(const MachineProbe& p) {
  return json{{"width", p.shape.width},
              {"precision", p.shape.precision},
              {"all_reduce_bytes", p.shape.all_reduce_bytes},
              {"ranks", p.shape.ranks},
              {"gemm_seconds", p.gemm_seconds},
              {"all_reduce_seconds", p.all_reduce_seconds}}
      .dump();
}

Result<MachineProbe> machine_probe_from_json(std::string_view text, std::string_view where) {
  const std::string at(where);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Error{at + ": not valid JSON: " + e.what()};
  }
  if (!j.is_object()) return Error{at + ": must be a JSON object"};
  auto number = [&](const char* key, double least) -> Result<double> {
    if (!j.contains(key) || !j[key].is_number() || !(j[key].get<double>() >= least))
      return Error{at + ": /" + key + ": must be a number >= " + format_fixed(least, 0)};
    return j[key].get<double>();
  };
  MachineProbe p;
  auto width = number("width", 1);
  if (!width) return width.error();
  auto ranks = number("ranks", 1);
  if (!ranks) return ranks.error();
  auto bytes = number("all_reduce_bytes", 0);
  if (!bytes) return bytes.error();
  auto gemm = number("gemm_seconds", 0);
  if (!gemm) return gemm.error();
  auto all_reduce = number("all_reduce_seconds", 0);
  if (!all_reduce) return all_reduce.error();
  if (!j.contains("precision") || !j["precision"].is_string())
    return Error{at + ": /precision: must be a string"};
  p.shape.width = static_cast<int>(*width);
  p.shape.ranks = static_cast<int>(*ranks);
  p.shape.all_reduce_bytes = static_cast<std::int64_t>(*bytes);
  p.shape.precision = j["precision"].get<std::string>();
  p.gemm_seconds = *gemm;
  p.all_reduce_seconds = *all_reduce;
  return p;
}

namespace {
double ratio(double measured, double predicted) {
  return measured > 0 && predicted > 0 ? measured / predicted : 0;
}

std::string signed_percent(double r) {
  const double pct = 100 * (r - 1);
  return (pct >= 0 ? "+" : "") + format_fixed(pct, 0) + " %";
}
}  // namespace

double MachineDrift::gemm_ratio() const {
  return ratio(measured.gemm_seconds, predicted.gemm_seconds);
}

double MachineDrift::all_reduce_ratio() const {
  return ratio(measured.all_reduce_seconds, predicted.all_reduce_seconds);
}

bool MachineDrift::drifted(double tolerance) const {
  for (double r : {gemm_ratio(), all_reduce_ratio()}) {
    if (r > 0 && std::abs(r - 1) > tolerance) return true;
  }
  return false;
}

std::string MachineDrift::text() const {
  const MachineProbeShape& s = measured.shape;
  std::string out;
  if (gemm_ratio() > 0) {
    out += "GEMM probe (" + std::to_string(s.tokens()) + " x " + std::to_string(s.width) +
           " -> " + std::to_string(s.out()) + " " + s.precision +
           "): " + format_seconds(measured.gemm_seconds) + ", the model says " +
           format_seconds(predicted.gemm_seconds) + " (" + signed_percent(gemm_ratio()) + ")";
  }
  if (all_reduce_ratio() > 0) {
    if (!out.empty()) out += "; ";
    out += "all-reduce probe (" + format_bytes(static_cast<double>(s.all_reduce_bytes)) +
           " over " + std::to_string(s.ranks) +
           " ranks): " + format_seconds(measured.all_reduce_seconds) + ", the model says " +
           format_seconds(predicted.all_reduce_seconds) + " (" +
           signed_percent(all_reduce_ratio()) + ")";
  }
  return out;
}

}  // namespace cs
