#pragma once
// JSON as text, for every document the product writes: a string that is not
// UTF-8 (a Linux path is bytes; a name read from a foreign file) has its bad
// bytes replaced by U+FFFD, where nlohmann's plain dump() throws (a launcher
// aborted on a store path with a Latin-1 byte).

#include <string>

#include <nlohmann/json.hpp>

namespace cs {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cs
