#include "core/json_text.h"

#include <vector>

namespace cs {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of the \uXXXX escape at t[i] ('\\'), or -1.
int escaped_unit(std::string_view t, std::size_t i) {
  if (i + 6 > t.size() || t[i] != '\\' || t[i + 1] != 'u') return -1;
  int unit = 0;
  for (std::size_t k = i + 2; k < i + 6; ++k) {
    const int d = hex_digit(t[k]);
    if (d < 0) return -1;
    unit = unit * 16 + d;
  }
  return unit;
}

bool in(unsigned char c, unsigned char lo, unsigned char hi) {
  return c >= lo && c <= hi;
}

// The length of the well-formed UTF-8 sequence at t[i] (Unicode's table
// 3-7, as nlohmann checks it), or 0.
std::size_t utf8_length(std::string_view t, std::size_t i) {
  auto at = [&](std::size_t k) {
    return i + k < t.size() ? static_cast<unsigned char>(t[i + k]) : 0;
  };
  const unsigned char c = at(0);
  if (in(c, 0xC2, 0xDF)) return in(at(1), 0x80, 0xBF) ? 2 : 0;
  if (in(c, 0xE0, 0xEF)) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return in(at(1), lo, hi) && in(at(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(c, 0xF0, 0xF4)) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return in(at(1), lo, hi) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// A string at t[i] ('"'): past it, or false.
bool skip_string(std::string_view t, std::size_t& i) {
  ++i;
  while (i < t.size()) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c == '"') {
      ++i;
      return true;
    }
    if (c < 0x20) return false;  // a control character must be escaped
    if (c < 0x80 && c != '\\') {
      ++i;
    } else if (c != '\\') {
      const std::size_t n = utf8_length(t, i);
      if (n == 0) return false;
      i += n;
    } else if (i + 1 < t.size() &&
               std::string_view("\"\\/bfnrt").find(t[i + 1]) != std::string_view::npos) {
      i += 2;
    } else {
      // \uXXXX: a high surrogate only with a low one after it.
      const int unit = escaped_unit(t, i);
      if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) return false;
      i += 6;
      if (unit >= 0xD800 && unit <= 0xDBFF) {
        const int low = escaped_unit(t, i);
        if (low < 0xDC00 || low > 0xDFFF) return false;
        i += 6;
      }
    }
  }
  return false;
}

bool skip_digits(std::string_view t, std::size_t& i) {
  const std::size_t from = i;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9')
    ++i;
  return i > from;
}

// A number at t[i]: past it, or false. The parser refuses one past a
// double's range (1e400, or 400 digits), and reads one below it as 0.
bool skip_number(std::string_view t, std::size_t& i) {
  const std::size_t from = i;
  if (t[i] == '-') ++i;
  if (i < t.size() && t[i] == '0') {
    ++i;
  } else if (!skip_digits(t, i)) {
    return false;
  }
  if (i < t.size() && t[i] == '.' && !skip_digits(t, ++i)) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!skip_digits(t, i)) return false;
  }
  // Without an exponent, fewer than 300 digits are well within the range:
  // the rest are parsed alone to know (few in a plan).
  const std::string_view number = t.substr(from, i - from);
  return (number.size() < 300 && number.find_first_of("eE") == std::string_view::npos) ||
         !nlohmann::json::parse(number, nullptr, false).is_discarded();
}

bool skip_scalar(std::string_view t, std::size_t& i) {
  if (t[i] == '"') return skip_string(t, i);
  if (t[i] == '-' || (t[i] >= '0' && t[i] <= '9')) return skip_number(t, i);
  for (std::string_view word : {"true", "false", "null"}) {
    if (t.substr(i, word.size()) == word) {
      i += word.size();
      return true;
    }
  }
  return false;
}

void skip_spaces(std::string_view t, std::size_t& i) {
  while (i < t.size() && is_space(t[i]))
    ++i;
}

}  // namespace

bool is_json_container_text(std::string_view t, int max_depth) {
  if (t.empty() || (t.front() != '{' && t.front() != '[')) return false;
  // The containers open around t[i]; depths are counted as parse_json_text's
  // callback counts them: a value or a key nested in more than max_depth
  // containers is too deep.
  std::vector<char> open;
  const auto too_deep = [&] { return open.size() > static_cast<std::size_t>(max_depth); };
  // Past a key and its colon, or false.
  const auto skip_key = [&](std::size_t& i) {
    if (i >= t.size() || t[i] != '"' || too_deep() || !skip_string(t, i)) return false;
    skip_spaces(t, i);
    if (i >= t.size() || t[i] != ':') return false;
    skip_spaces(t, ++i);
    return true;
  };
  std::size_t i = 0;
  for (;;) {
    // At a value.
    if (i >= t.size() || too_deep()) return false;
    if (t[i] == '{' || t[i] == '[') {
      const char close = t[i] == '{' ? '}' : ']';
      open.push_back(t[i]);
      skip_spaces(t, ++i);
      if (i < t.size() && t[i] == close) {
        open.pop_back();
        ++i;
      } else {
        if (open.back() == '{' && !skip_key(i)) return false;
        continue;
      }
    } else if (!skip_scalar(t, i)) {
      return false;
    }
    // After a value: a comma and the next, or the ends of containers.
    for (;;) {
      if (open.empty()) return i == t.size();  // nothing after it, not even a space
      skip_spaces(t, i);
      if (i >= t.size()) return false;
      if (t[i] == ',') {
        skip_spaces(t, ++i);
        if (open.back() == '{' && !skip_key(i)) return false;
        break;
      }
      if (t[i] != (open.back() == '{' ? '}' : ']')) return false;
      open.pop_back();
      ++i;
    }
  }
}

void write_json_laid_out(std::ostream& out, std::string_view t, int indent, int level) {
  std::string piece;
  constexpr std::size_t kPiece = 1 << 16;
  piece.reserve(2 * kPiece);
  const auto new_line = [&] {
    piece += '\n';
    piece.append(static_cast<std::size_t>(indent * level), ' ');
  };
  std::size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '"') {
      std::size_t end = i + 1;
      while (t[end] != '"')
        end += t[end] == '\\' ? 2 : 1;
      piece.append(t.substr(i, end + 1 - i));
      i = end + 1;
    } else if (c == '{' || c == '[') {
      skip_spaces(t, ++i);
      piece += c;
      if (t[i] == '}' || t[i] == ']') {
        piece += t[i++];
      } else {
        ++level;
        new_line();
      }
    } else if (c == '}' || c == ']') {
      --level;
      new_line();
      piece += c;
      ++i;
    } else if (c == ',') {
      piece += ',';
      new_line();
      ++i;
    } else if (c == ':') {
      piece += ": ";
      ++i;
    } else if (is_space(c)) {
      ++i;
    } else {
      // A number or a literal: up to what ends it.
      std::size_t end = i + 1;
      while (end < t.size() && !is_space(t[end]) && t[end] != ',' && t[end] != '}' && t[end] != ']')
        ++end;
      piece.append(t.substr(i, end - i));
      i = end;
    }
    if (piece.size() >= kPiece) {
      out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
      piece.clear();
    }
  }
  out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
}

}  // namespace cs
