#include "core/calibration_meta.h"

#include <nlohmann/json.hpp>

#include "core/json_object.h"
#include "core/json_text.h"

namespace cs {

using nlohmann::json;

std::string calibration_meta_json(const CalibrationInfo& info) {
  json phases = json::array();
  for (const CalibrationPhase& p : info.phases) {
    phases.push_back({{"ranks", p.ranks},
                      {"first_rank", p.first_rank},
                      {"threads", p.threads},
                      {"precision", p.precision}});
  }
  return json_text(json{{"engine", info.engine},
                        {"host", info.host},
                        {"device", info.device},
                        {"host_memory_bytes", info.host_memory_bytes},
                        {"cpu_cores", info.cpu_cores},
                        {"phases", phases}});
}

Result<CalibrationInfo> calibration_info_from_json(std::string_view text, std::string_view where) {
  const std::string at(where);
  auto parsed = parse_json_object(text, at);
  if (!parsed) return parsed.error();
  json j = std::move(parsed).value();
  if (!j.contains("phases") || !j["phases"].is_array())
    return Error{at + ": /phases: must be a list"};
  CalibrationInfo info;
  try {
    info.engine = j.value("engine", "");
    info.host = j.value("host", "");
    info.device = j.value("device", "");
    info.host_memory_bytes = j.value("host_memory_bytes", 0.0);
    info.cpu_cores = j.value("cpu_cores", 0);
    for (std::size_t i = 0; i < j["phases"].size(); ++i) {
      const json& p = j["phases"][i];
      const std::string ptr = at + ": /phases/" + std::to_string(i);
      if (!p.is_object() || !p.contains("ranks") || !p["ranks"].is_number_integer() ||
          p["ranks"].get<int>() < 1) {
        return Error{ptr + "/ranks: must be an integer >= 1"};
      }
      CalibrationPhase ph;
      ph.ranks = p["ranks"].get<int>();
      ph.first_rank = p.value("first_rank", 0);
      ph.threads = p.value("threads", 0);
      ph.precision = p.value("precision", "fp32");
      if (ph.first_rank < 0) return Error{ptr + "/first_rank: must be >= 0"};
      info.phases.push_back(ph);
    }
  } catch (const json::exception& e) {
    return Error{at + ": " + e.what()};
  }
  return info;
}

}  // namespace cs
