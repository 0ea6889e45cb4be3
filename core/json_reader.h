#pragma once
// Reading JSON objects field by field while collecting every problem with the
// JSON pointer where it sits, so that a message can say
// `cluster.json: /inter_node/bandwidth_gbps: must be > 0`. Fields a reader did
// not ask for are reported as unknown (with the closest known name), never
// silently dropped. The shared field reader: core's JSON formats, the
// planners, the profiler and both front ends read their JSON with it, so it
// includes nlohmann/json.hpp (headers that only name JSON types include
// nlohmann/json_fwd.hpp instead).

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/problem.h"
#include "core/result.h"

namespace cs {

class Diagnostics {
 public:
  void add(std::string pointer, std::string message);
  bool empty() const { return problems_.empty(); }
  const std::vector<Problem>& problems() const { return problems_; }
  // One line per problem: "<document>: <pointer>: <message>".
  Error to_error(std::string_view document) const;

 private:
  std::vector<Problem> problems_;
};

// Whole numbers in full (1048576, not 1.04858e+06); others as a stream has them.
std::string number_text(double v);

// Allowed interval of a number, and the rule's wording.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  // Values strictly between 0 and this are refused: by default the
  // subnormal doubles (1e-310), which no figure is; a rate whose 0 means
  // "none" sets the smallest real one.
  double least_above_zero = std::numeric_limits<double>::min();

  static Range any() { return {}; }
  static Range positive() { return {0, std::numeric_limits<double>::infinity(), true}; }
  static Range non_negative() { return {0, std::numeric_limits<double>::infinity(), false}; }
  static Range at_least(double v) { return {v, std::numeric_limits<double>::infinity(), false}; }
  static Range between(double a, double b) { return {a, b, false}; }

  bool contains(double v) const;
  std::string rule() const;  // "must be > 0", "must be between 0 and 1", ...
  // The rule `v` breaks: rule(), or "must be 0 (none) or at least 1e-06".
  std::string rule_broken_by(double v) const;
  // What a number written as `text` (a command-line value) breaks: "must
  // be > 0 (got 0)", "is not a number (got "two")"; empty when it keeps the rule.
  std::string broken_by(const std::string& text) const;
};

std::string json_pointer_append(std::string_view pointer, std::string_view key);

// The longest display name, plan name or preset name read (in characters,
// UTF-8 code points).
inline constexpr std::size_t kMaxLabelCharacters = 4096;

class ObjectReader {
 public:
  // Reports "must be an object" (and reads nothing) when j is not one.
  ObjectReader(const nlohmann::json& j, std::string pointer, Diagnostics& diag);

  bool is_object() const { return object_ != nullptr; }
  bool has(std::string_view key) const;
  std::string pointer(std::string_view key) const { return json_pointer_append(pointer_, key); }
  Diagnostics& diagnostics() { return diag_; }

  // Each getter marks the key as known. Absent optional keys leave `out` as it is.
  void number(std::string_view key, double& out, Range range = Range::any(), bool required = false);
  void integer(std::string_view key, int& out, Range range = Range::any(), bool required = false);
  void integer64(std::string_view key, std::int64_t& out, Range range = Range::any(),
                 bool required = false);
  void boolean(std::string_view key, bool& out);
  void text(std::string_view key, std::string& out, bool required = false);
  // Text shown as it is read (a display name, a plan's name): without
  // control characters (a newline or an escape code was printed raw to the
  // terminal, or split a line), and of at most kMaxLabelCharacters (a 20 MB
  // plan name took 613 MB in the app's lists).
  void label(std::string_view key, std::string& out, bool required = false);
  // A required label that names a preset, without "/" (read as a path).
  void name(std::string_view key, std::string& out);
  void text_list(std::string_view key, std::vector<std::string>& out);

  template <class E, std::size_t N>
  void choice(std::string_view key, E& out, const EnumNames<E, N>& names, bool required = false) {
    const nlohmann::json* v = field(key, required);
    if (!v) return;
    if (!v->is_string()) {
      diag_.add(pointer(key), "must be one of " + names.choices());
      return;
    }
    if (auto parsed = names.parse(v->get_ref<const std::string&>())) {
      out = *parsed;
    } else {
      diag_.add(pointer(key), "must be one of " + names.choices() + " (got \"" +
                                  v->get<std::string>() + "\")");
    }
  }

  // The raw value of a key (marked known), or nullptr when absent; reports
  // "is required" when required and absent.
  const nlohmann::json* field(std::string_view key, bool required = false);
  // Marks keys as known without reading them (handled elsewhere).
  void accept(std::initializer_list<std::string_view> keys);
  // Reports every key no getter asked for.
  void finish();

 private:
  const nlohmann::json* object_ = nullptr;
  std::string pointer_;
  Diagnostics& diag_;
  std::vector<std::string> known_;
};

// Closest name within a small edit distance, or "" when none is close.
std::string closest_name(std::string_view wrong, const std::vector<std::string>& names);

// nlohmann's message without its "[json.exception...]" tag and position:
// "syntax error while parsing value - ...", "number overflow parsing '1e309'".
std::string json_error_text(const nlohmann::json::exception& e);

// Reads a JSON file; errors name the file and, for a syntax error, the line and column.
Result<nlohmann::json> read_json_file(const std::string& path);
// Reads a JSON document from `in` to its end (standard input), with the
// checks of a file; errors name it as `name` ("standard input:3:7: ...").
Result<nlohmann::json> read_json_stream(std::istream& in, const std::string& name);

// JSON nested deeper than this is refused by every reader: copying or
// printing such a value recurses once per level (100000 levels overflowed
// the stack).
inline constexpr int kMaxJsonDepth = 256;
// Text from elsewhere (a store's meta row, a line of another program):
// the value, or a discarded one (is_discarded()) when it is not JSON or is
// nested past kMaxJsonDepth. Never throws.
nlohmann::json parse_json_text(std::string_view text);

}  // namespace cs
