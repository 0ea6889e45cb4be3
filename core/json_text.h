#pragma once
// JSON as text, for every document the product writes: a string that is not
// UTF-8 (a Linux path is bytes; a name read from a foreign file) has its bad
// bytes replaced by U+FFFD, where nlohmann's plain dump() throws (a launcher
// aborted on a store path with a Latin-1 byte).

#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cs {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Whether `text` is a JSON object or array, whole, that nlohmann's parser
// reads (parse_json_text: strict RFC 8259, UTF-8, nested at most
// `max_depth`): checked in one pass, without building a tree. It may refuse
// text the parser would read (a NUL byte, which the parser takes for the end;
// a byte-order mark or spaces around it): those are read the slow way.
bool is_json_container_text(std::string_view text, int max_depth);

// Writes `text`, which is_json_container_text accepted, laid out as
// json_text(parsed, indent) lays out a value nested `level` deep in its
// document: one member or element a line, `indent` more spaces a level, {}
// and [] when empty. Its strings and numbers are copied as written, which is
// the point: a tree of a large cluster's plan (tens of MB) took seconds and
// most of a GB, and a tree rewrites numbers (0.1000000000000000055511 as 0.1,
// 1E5 as 100000.0) and escapes ("\u00e9" as "é").
void write_json_laid_out(std::ostream& out, std::string_view text, int indent, int level);

}  // namespace cs
