#pragma once
// A JSON object kept as text (a run store's meta value), parsed or refused
// with `where` named: "<where>: not valid JSON: ..." or "<where>: must be a
// JSON object".

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace cs {

inline Result<nlohmann::json> parse_json_object(std::string_view text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Error{where + ": not valid JSON: " + e.what()};
  }
  if (!j.is_object()) return Error{where + ": must be a JSON object"};
  return j;
}

}  // namespace cs
