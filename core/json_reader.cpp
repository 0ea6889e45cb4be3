#include "core/json_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "core/format.h"
#include "core/text_file.h"
#include "core/utf8.h"

namespace cs {

void Diagnostics::add(std::string pointer, std::string message) {
  problems_.push_back({std::move(pointer), std::move(message)});
}

Error Diagnostics::to_error(std::string_view document) const {
  std::string text;
  for (const Problem& p : problems_) {
    if (!text.empty()) text += '\n';
    text += document;
    text += ": ";
    text += p.pointer.empty() ? "/" : p.pointer;
    text += ": ";
    text += p.message;
  }
  return {text};
}

std::string number_text(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  // The shortest text that reads back as v: a bound rounded to 6 digits
  // (1/1024 as 0.000976562) refused the value it printed.
  char text[32];
  const auto written = std::to_chars(text, text + sizeof text, v);
  return std::string(text, written.ptr);
}

bool Range::contains(double v) const {
  if (!std::isfinite(v)) return false;  // no figure is infinite (--tokens inf)
  if (v != 0 && std::fabs(v) < least_above_zero) return false;
  if (lo_open ? !(v > lo) : !(v >= lo)) return false;
  return v <= hi;
}

std::string Range::rule() const {
  const bool low = std::isfinite(lo);
  const bool high = std::isfinite(hi);
  if (low && high && !lo_open) return "must be between " + number_text(lo) + " and " + number_text(hi);
  if (low && high) return "must be > " + number_text(lo) + " and <= " + number_text(hi);
  if (low) return std::string(lo_open ? "must be > " : "must be >= ") + number_text(lo);
  if (high) return "must be <= " + number_text(hi);
  return "must be a number";
}

std::string Range::rule_broken_by(double v) const {
  auto within = [&](double x) { return (lo_open ? x > lo : x >= lo) && x <= hi; };
  // Only a value the interval holds is refused for being too close to 0;
  // any other breaks the interval (1e-310 for a bandwidth of at least 0.001).
  if (std::isfinite(v) && v != 0 && std::fabs(v) < least_above_zero && within(v)) {
    // In full: "at least 2.2e-308 (got 2.2e-308)" refused a value it named.
    const std::string least = number_text(least_above_zero);
    if (!within(0)) {  // (0, hi]: "must be 0 or ..." offered a refused 0
      return "must be at least " + least +
             (std::isfinite(hi) ? " and <= " + number_text(hi) : std::string());
    }
    if (least_above_zero > std::numeric_limits<double>::min())
      return "must be 0 (none) or at least " + least;
    return "must be 0 or at least " + least + (lo < 0 ? " in size" : "");
  }
  return rule();
}

std::string Range::broken_by(const std::string& text) const {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isnan(value))
    return "is not a number (got \"" + text + "\")";
  if (!std::isfinite(value)) return "must be a finite number (got " + text + ")";
  if (!contains(value)) return rule_broken_by(value) + " (got " + text + ")";
  return {};
}

std::string json_pointer_append(std::string_view pointer, std::string_view key) {
  std::string out(pointer);
  out += '/';
  for (char c : key) {  // RFC 6901 escaping
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

ObjectReader::ObjectReader(const nlohmann::json& j, std::string pointer, Diagnostics& diag)
    : pointer_(std::move(pointer)), diag_(diag) {
  if (j.is_object()) {
    object_ = &j;
  } else {
    diag_.add(pointer_, "must be an object");
  }
}

bool ObjectReader::has(std::string_view key) const {
  return object_ && object_->contains(key);
}

const nlohmann::json* ObjectReader::field(std::string_view key, bool required) {
  known_.emplace_back(key);
  if (!object_) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) {
    if (required) diag_.add(pointer(key), "is required");
    return nullptr;
  }
  return &*it;
}

void ObjectReader::accept(std::initializer_list<std::string_view> keys) {
  for (auto k : keys) known_.emplace_back(k);
}

void ObjectReader::number(std::string_view key, double& out, Range range, bool required) {
  const nlohmann::json* v = field(key, required);
  if (!v) return;
  if (!v->is_number()) {
    diag_.add(pointer(key), "must be a number");
    return;
  }
  const double value = v->get<double>();
  if (!range.contains(value)) {
    diag_.add(pointer(key), range.rule_broken_by(value) + " (got " + number_text(value) + ")");
    return;
  }
  out = value;
}

void ObjectReader::integer64(std::string_view key, std::int64_t& out, Range range, bool required) {
  const nlohmann::json* v = field(key, required);
  if (!v) return;
  // Past 2^53 a double is not every integer: whole numbers as JSON wrote them.
  if (v->is_number_unsigned() &&
      v->get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    diag_.add(pointer(key), "must fit in a 64-bit integer (got " + v->dump() + ")");
    return;
  }
  const bool whole = v->is_number_integer() ||
                     (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
                      std::abs(v->get<double>()) < 9.2e18);
  if (!whole) {
    diag_.add(pointer(key), v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()
                                ? "must fit in a 64-bit integer (got " + v->dump() + ")"
                                : "must be an integer");
    return;
  }
  const std::int64_t value =
      v->is_number_integer() ? v->get<std::int64_t>() : static_cast<std::int64_t>(v->get<double>());
  if (!range.contains(static_cast<double>(value))) {
    diag_.add(pointer(key), range.rule() + " (got " + std::to_string(value) + ")");
    return;
  }
  out = value;
}

void ObjectReader::integer(std::string_view key, int& out, Range range, bool required) {
  const nlohmann::json* v = field(key, required);
  if (!v) return;
  const bool whole = v->is_number_integer() ||
                     (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>());
  if (!whole) {
    diag_.add(pointer(key), "must be an integer");
    return;
  }
  const double value = v->get<double>();
  if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min()) {
    diag_.add(pointer(key), "must fit in a 32-bit integer (got " + number_text(value) + ")");
    return;
  }
  if (!range.contains(value)) {
    diag_.add(pointer(key), range.rule() + " (got " + number_text(value) + ")");
    return;
  }
  out = static_cast<int>(value);
}

void ObjectReader::boolean(std::string_view key, bool& out) {
  const nlohmann::json* v = field(key);
  if (!v) return;
  if (!v->is_boolean()) {
    diag_.add(pointer(key), "must be true or false");
    return;
  }
  out = v->get<bool>();
}

void ObjectReader::text(std::string_view key, std::string& out, bool required) {
  const nlohmann::json* v = field(key, required);
  if (!v) return;
  if (!v->is_string()) {
    diag_.add(pointer(key), "must be a string");
    return;
  }
  out = v->get<std::string>();
  if (required && out.empty()) diag_.add(pointer(key), "must not be empty");
}

void ObjectReader::label(std::string_view key, std::string& out, bool required) {
  text(key, out, required);
  const auto control = std::find_if(out.begin(), out.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (control != out.end()) {
    diag_.add(pointer(key), "must not hold control characters (a newline, a tab, an escape code)");
  }
  if (const std::size_t characters = utf8_characters(out); characters > kMaxLabelCharacters) {
    diag_.add(pointer(key), "must be at most " + std::to_string(kMaxLabelCharacters) +
                                " characters long (it holds " + std::to_string(characters) + ")");
  }
}

void ObjectReader::name(std::string_view key, std::string& out) {
  label(key, out, true);
  // A name is typed after --cluster, --gpu, --model or a link flag, where one
  // with a slash reads as a file's path, and it names the preset's file.
  if (out.find('/') != std::string::npos) {
    diag_.add(pointer(key), "must not hold \"/\" (\"" + cut_for_message(out) +
                                "\" would read as a file's path where a preset is named)");
  }
}

void ObjectReader::text_list(std::string_view key, std::vector<std::string>& out) {
  const nlohmann::json* v = field(key);
  if (!v) return;
  if (!v->is_array() || !std::all_of(v->begin(), v->end(), [](const auto& e) { return e.is_string(); })) {
    diag_.add(pointer(key), "must be a list of strings");
    return;
  }
  out = v->get<std::vector<std::string>>();
}

void ObjectReader::finish() {
  if (!object_) return;
  for (const auto& [key, value] : object_->items()) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string message = "unknown field";
    if (std::string near = closest_name(key, known_); !near.empty()) {
      message += " (did you mean \"" + near + "\"?)";
    }
    diag_.add(pointer(cut_for_message(key)), message);
  }
}

namespace {
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string closest_name(std::string_view wrong, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, wrong.size() / 3) + 1;
  for (const std::string& n : names) {
    // The distance is at least the lengths' difference: a name that far
    // off is not computed (a 100 MB key took 31 s against the known ones).
    const std::size_t length_difference =
        wrong.size() > n.size() ? wrong.size() - n.size() : n.size() - wrong.size();
    if (length_difference >= best_distance) continue;
    const std::size_t d = edit_distance(wrong, n);
    if (d < best_distance) {
      best_distance = d;
      best = n;
    }
  }
  return best;
}

namespace {

// "path:line:column" of byte `offset` (1-based) of `text`.
std::string position(const std::string& path, const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i + 1 < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return path + ":" + std::to_string(line) + ":" + std::to_string(column);
}

}  // namespace

std::string json_error_text(const nlohmann::json::exception& e) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax
  // error ...", "[json.exception.out_of_range.406] number overflow ...".
  std::string what = e.what();
  if (auto column = what.find("column "); column != std::string::npos) {
    if (auto colon = what.find(": ", column); colon != std::string::npos)
      return what.substr(colon + 2);
  }
  if (auto bracket = what.find("] "); bracket != std::string::npos) return what.substr(bracket + 2);
  return what;
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Error{path + ": is a folder, not a JSON file"};
  // A device reads forever (/dev/zero: 512 MiB read into memory, 1 GB, before
  // the bound refused it).
  if (const std::string device = device_kind(path); !device.empty())
    return Error{path + ": is " + device + ", not a JSON file: save the document to a file"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot open file: " + std::strerror(errno)};
  return read_json_stream(in, path);
}

nlohmann::json parse_json_text(std::string_view text) {
  bool too_deep = false;
  auto shallow = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  nlohmann::json parsed = nlohmann::json::parse(text, shallow, /*allow_exceptions=*/false);
  return too_deep ? nlohmann::json(nlohmann::json::value_t::discarded) : parsed;
}

Result<nlohmann::json> read_json_stream(std::istream& in, const std::string& path) {
  // Read in pieces up to a bound: a device such as /dev/zero never ends.
  constexpr std::size_t kMaxBytes = std::size_t{512} << 20;
  std::string text;
  char piece[1 << 16];
  while (in.read(piece, sizeof piece) || in.gcount() > 0) {
    text.append(piece, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      return Error{path + ": more than 512 MiB: not a JSON document ClusterScope reads"};
  }
  // nlohmann's parser takes a NUL byte for the end of the text: what
  // follows one would go unread.
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    // Nothing but NUL bytes: what a crash or a power cut can leave of a file
    // just written (it was said to be UTF-16).
    if (text.find_first_not_of('\0') == std::string::npos) {
      return Error{path + ": invalid JSON: all " + std::to_string(text.size()) +
                   " bytes are NUL: the file is damaged (zeroed, as a crash or a power cut "
                   "can leave a file)"};
    }
    // UTF-16 (a Windows editor's "Unicode"): a NUL beside every ASCII byte.
    const bool bom = text.size() >= 2 && ((text[0] == '\xFF' && text[1] == '\xFE') ||
                                          (text[0] == '\xFE' && text[1] == '\xFF'));
    if (bom || (text.size() >= 2 && ((text[0] == '\0') != (text[1] == '\0'))))
      return Error{path + ": invalid JSON: UTF-16 text; save it as UTF-8"};
    return Error{position(path, text, nul + 1) + ": invalid JSON: a NUL byte (a binary file?)"};
  }
  // nlohmann's parser reports a malformed document by byte, and a number
  // past a double's range (1e309) by the number alone.
  // A key given twice in one object: nlohmann keeps the last silently, and
  // "tp": 2, "tp": 4 is a typo or an edit half made, as an unknown field is.
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open_objects;
  std::map<std::string, int> as_key;  // times each text was a key, for the place
  std::optional<std::pair<std::string, int>> twice;
  // Nesting past any document of ours: copying or printing such a value
  // recurses once per level, and 100000 levels overflowed the stack.
  constexpr int kMaxDepth = kMaxJsonDepth;
  bool too_deep = false;
  auto check_keys = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kMaxDepth) {
      too_deep = true;
      return false;  // discarded: what is kept stays shallow
    }
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      const int nth = ++as_key[key];
      if (!open_objects.empty() && !open_objects.back().insert(key).second && !twice)
        twice = {key, nth};
    }
    return true;
  };
  try {
    nlohmann::json parsed = nlohmann::json::parse(text, check_keys);
    if (too_deep) {
      return Error{path + ": invalid JSON: nested more than " + std::to_string(kMaxDepth) +
                   " levels deep"};
    }
    if (!twice) return parsed;
    // The n-th "key" followed by a colon is where it was given again.
    const std::string quoted = '"' + twice->first + '"';
    std::size_t at = std::string::npos;
    for (std::size_t from = 0, n = 0; n < static_cast<std::size_t>(twice->second);
         from = at + quoted.size()) {
      at = text.find(quoted, from);
      if (at == std::string::npos) break;
      const std::size_t colon = text.find_first_not_of(" \t\r\n", at + quoted.size());
      if (colon != std::string::npos && text[colon] == ':') ++n;
    }
    return Error{(at == std::string::npos ? path : position(path, text, at + 1)) +
                 ": invalid JSON: \"" + cut_for_message(twice->first) +
                 "\" is given twice in one object (which one is meant?)"};
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann quotes the bytes it last read: a stray byte stays valid UTF-8.
    return Error{position(path, text, e.byte) +
                 ": invalid JSON: " + valid_utf8(json_error_text(e))};
  } catch (const nlohmann::json::exception& e) {
    // "number overflow parsing '1e309'": placed by the number.
    const std::string what = json_error_text(e);
    std::string where = path;
    if (auto quote = what.find('\''); quote != std::string::npos) {
      const std::string number = what.substr(quote + 1, what.rfind('\'') - quote - 1);
      if (auto at = text.find(number); !number.empty() && at != std::string::npos)
        where = position(path, text, at + 1);
    }
    return Error{where + ": invalid JSON: " + what + " (beyond a double's range)"};
  }
}

}  // namespace cs
