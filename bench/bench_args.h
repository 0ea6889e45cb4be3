#pragma once
// The benchmarks' command lines, read one way: a value that is not a whole
// number in range (atoi read "abc" as 0, and a benchmark of 0 runs printed
// "nan" and exited 0), or an option no benchmark knows, ends the program
// with a line naming it, the usage, and exit status 2. And the process's
// CPU time, printed beside wall times.

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <time.h>

#include "core/parse_count.h"

namespace cs::bench {

[[noreturn]] inline void usage_error(const char* program, const std::string& what,
                                     const char* usage) {
  std::fprintf(stderr, "%s: %s\nusage: %s\n", program, what.c_str(), usage);
  std::exit(2);
}

// A whole number of at least `least` (and at most `most`), the whole of `text`.
inline long long count_arg(const char* program, const char* usage, const char* name,
                           const char* text, long long least, long long most = 1LL << 62) {
  const auto value = cs::parse_integer<long long>(text);
  if (!value || *value < least || *value > most) {
    const std::string range = most < (1LL << 62)
                                  ? " from " + std::to_string(least) + " to " + std::to_string(most)
                                  : ", at least " + std::to_string(least);
    usage_error(program,
                std::string(name) + " must be a whole number" + range + ", not '" + text + "'",
                usage);
  }
  return *value;
}

// A number above 0, the whole of `text`.
inline double positive_arg(const char* program, const char* usage, const char* name,
                           const char* text) {
  const std::string s(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !(value > 0)) {
    usage_error(program, std::string(name) + " must be a number above 0, not '" + s + "'", usage);
  }
  return value;
}

// This process's CPU time so far, all threads: on a shared machine a wall
// time includes waiting for a core, this does not.
inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace cs::bench
