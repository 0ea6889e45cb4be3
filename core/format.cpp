#include "core/format.h"

#include <cmath>
#include <cstdio>
#include <iterator>

namespace cs {

std::string format_fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

namespace {
// Three significant digits, at most two decimals.
std::string three_digits(double v) {
  const double a = std::fabs(v);
  return format_fixed(v, a >= 100 ? 0 : (a >= 10 ? 1 : 2));
}
}  // namespace

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int i = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024 && i < 6) {
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

}  // namespace cs
