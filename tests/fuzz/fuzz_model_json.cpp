// The JSON documents a user hands the planner (gpu, link, cluster, workload,
// parallel and precision plans, whole plans naming presets), read and, when
// they are a plan, estimated: an impossible plan must be an error, not UB.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/json_reader.h"
#include "core/model_json.h"
#include "core/predicted_step.h"
#include "core/presets.h"
#include "planners/estimate.h"
#include "planners/estimate_json.h"
#include "planners/timeline.h"

namespace {
const cs::PresetCatalog* catalog() {
  static const cs::PresetCatalog* loaded = [] {
    auto c = cs::PresetCatalog::load(CLUSTERSCOPE_FUZZ_PRESETS);
    if (!c) std::abort();
    return new cs::PresetCatalog(std::move(c).value());
  }();
  return loaded;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)cs::trace::read_predicted_step(text, "fuzz");
  const nlohmann::json j = cs::parse_json_text(text);
  if (j.is_discarded()) return 0;
  (void)cs::validate_json(j, "fuzz.json", catalog());
  auto doc = cs::document_from_json(j, "fuzz.json", catalog());
  if (!doc) return 0;
  if (const auto* plan = std::get_if<cs::Plan>(&doc.value())) {
    (void)cs::plan::check_plan(*plan);
    if (auto e = cs::plan::estimate(*plan)) {
      (void)cs::plan::to_json(*e).dump();
      (void)cs::plan::predicted_step(*e);
      (void)cs::plan::memory_problem(*plan, *e);
    }
    if (auto t = cs::plan::predict_timeline(*plan)) (void)cs::plan::to_json(*t).dump();
    (void)cs::to_json(*plan).dump();
  }
  return 0;
}
