#include "core/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

namespace cs {

std::string format_fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string format_significant(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  return buffer;
}

std::string model_error_factor(double predicted, double measured) {
  // One decimal below 10 as printed (9.96 reads "10", as 10 does).
  auto factor = [](double f) { return format_fixed(f, f < 9.95 ? 1 : 0); };
  if (measured > 0 && predicted >= 2 * measured)
    return factor(predicted / measured) + "× the measured";
  if (predicted > 0 && 2 * predicted <= measured)
    return "1/" + factor(measured / predicted) + " of the measured";
  return {};
}

namespace {
// Three significant digits, at most two decimals; a power of ten from a
// million of the unit on (an impossible plan's "3476111111111111242500796300918784
// days" read as a figure).
std::string three_digits(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3g", v);
    return buffer;
  }
  return format_fixed(v, a >= 100 ? 0 : (a >= 10 ? 1 : 2));
}
}  // namespace

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  constexpr int kLast = int(std::size(units)) - 1;
  int i = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024 && i < kLast) {
    v /= 1024;
    ++i;
  }
  if (i == 0) return format_fixed(v, 0) + " B";
  return three_digits(v) + " " + units[i];
}

std::string format_rate(double value, const char* unit) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E", "Z", "Y", "R", "Q"};
  int i = 0;
  double v = value;
  while (std::fabs(v) >= 1000 && i < int(std::size(prefixes)) - 1) {
    v /= 1000;
    ++i;
  }
  return three_digits(v) + " " + prefixes[i] + unit;
}

std::string format_seconds(double s) {
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-6) return three_digits(s * 1e9) + " ns";
  if (a < 1e-3) return three_digits(s * 1e6) + " µs";
  if (a < 1) return three_digits(s * 1e3) + " ms";
  if (a < 120) return three_digits(s) + " s";
  if (a < 7200) return three_digits(s / 60) + " min";
  if (a < 3 * 86400) return three_digits(s / 3600) + " h";
  return three_digits(s / 86400) + " days";
}

std::string format_count(double n) {
  const double a = std::fabs(n);
  if (a >= 1e12) return three_digits(n / 1e12) + " T";
  if (a >= 1e9) return three_digits(n / 1e9) + " B";
  if (a >= 1e6) return three_digits(n / 1e6) + " M";
  if (a >= 1e4) return three_digits(n / 1e3) + " k";
  return format_fixed(n, std::floor(n) == n ? 0 : 2);
}

std::string format_amount(double v) {
  if (v != 0 && std::fabs(v) < 100) return format_significant(v, 3);
  return format_count(std::fabs(v) < 1e4 ? std::round(v) : v);
}

std::string format_energy_kwh(double kwh) {
  if (std::fabs(kwh) < 1e4) return format_amount(kwh) + " kWh";
  return format_rate(kwh * 1e3, "Wh");
}

std::string format_usd(double usd) {
  return "$" + format_amount(usd);
}

std::string format_time_ns(std::int64_t ns, int decimals) {
  decimals = decimals < 0 ? 0 : decimals > 9 ? 9 : decimals;
  // In unsigned integers: exact at any time a store holds, INT64_MIN too.
  const bool negative = ns < 0;
  const std::uint64_t a =
      negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::uint64_t unit = 1;  // nanoseconds per last decimal
  for (int i = decimals; i < 9; ++i)
    unit *= 10;
  const std::uint64_t ticks = a / unit + (a % unit >= (unit + 1) / 2 ? 1 : 0);  // half up
  const std::uint64_t per_second = 1'000'000'000 / unit;
  std::string out = (negative && ticks > 0 ? "-" : "") + std::to_string(ticks / per_second);
  if (decimals > 0) {
    std::string digits = std::to_string(ticks % per_second);
    digits.insert(0, static_cast<std::size_t>(decimals) - digits.size(), '0');
    out += '.';
    for (int i = 0; i < decimals; ++i) {
      if (i > 0 && i % 3 == 0) out += "\u202f";  // narrow no-break space
      out += digits[static_cast<std::size_t>(i)];
    }
  }
  return out + " s";
}

namespace {

// The code point at `i` and its length in bytes (a stray byte: itself, 1).
char32_t code_point_at(std::string_view s, std::size_t i, std::size_t& length) {
  const auto b = static_cast<unsigned char>(s[i]);
  length = b < 0x80 ? 1 : b >> 5 == 0x6 ? 2 : b >> 4 == 0xE ? 3 : b >> 3 == 0x1E ? 4 : 1;
  if (i + length > s.size()) length = 1;
  // Each following byte must be 10xxxxxx; else the lead byte stands alone
  // (a Latin-1 "é" before "ab" is three characters, not one).
  for (std::size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) length = 1;
  }
  if (length == 1) return b;
  char32_t c = b & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k)
    c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return c;
}

std::size_t cells_of(char32_t c) {
  if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x200B && c <= 0x200F) ||
      (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE00 && c <= 0xFE0F)) {
    return 0;  // combining marks, zero-width spaces, variation selectors
  }
  const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) ||
                    (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
                    (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
                    (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
                    (c >= 0x1F680 && c <= 0x1F6FF) || (c >= 0x1F900 && c <= 0x1F9FF) ||
                    (c >= 0x20000 && c <= 0x3FFFD);
  return wide ? 2 : 1;
}

}  // namespace

std::size_t display_width(std::string_view utf8) {
  std::size_t cells = 0, length = 0;
  for (std::size_t i = 0; i < utf8.size(); i += length)
    cells += cells_of(code_point_at(utf8, i, length));
  return cells;
}

namespace {
bool begins_character(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
}
}  // namespace

std::size_t utf8_characters(std::string_view utf8) {
  return static_cast<std::size_t>(std::count_if(utf8.begin(), utf8.end(), begins_character));
}

std::string_view first_characters(std::string_view utf8, std::size_t chars) {
  std::size_t end = 0, count = 0;
  for (; end < utf8.size(); ++end) {
    if (begins_character(utf8[end]) && count++ == chars) break;
  }
  return utf8.substr(0, end);
}

std::string cut_for_message(std::string_view utf8, std::size_t chars) {
  const std::string_view kept = first_characters(utf8, chars);
  if (kept.size() == utf8.size()) return std::string(utf8);
  return std::string(kept) + "…";
}

std::string fit_width(std::string_view utf8, std::size_t cells) {
  if (display_width(utf8) <= cells) return std::string(utf8);
  if (cells <= 3) return std::string(cells, '.');
  // Two thirds of the room for the start, the rest for the end.
  const std::size_t room = cells - 3;
  const std::size_t head_cells = (room * 2 + 2) / 3;
  std::size_t head = 0, used = 0, length = 0;
  while (head < utf8.size()) {
    const std::size_t w = cells_of(code_point_at(utf8, head, length));
    if (used + w > head_cells) break;
    used += w;
    head += length;
  }
  // The end: the longest run of whole characters in what is left of the room.
  std::vector<std::size_t> starts;  // each character's first byte
  for (std::size_t i = head; i < utf8.size(); i += length) {
    code_point_at(utf8, i, length);
    starts.push_back(i);
  }
  std::size_t tail = utf8.size(), tail_cells = 0;
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    const std::size_t w = cells_of(code_point_at(utf8, *it, length));
    if (used + tail_cells + w > room) break;
    tail_cells += w;
    tail = *it;
  }
  return std::string(utf8.substr(0, head)) + "..." + std::string(utf8.substr(tail));
}

}  // namespace cs
