#pragma once
// std::regex (libstdc++) matches by recursion, a stack frame or more per
// character a repetition takes in: a 30 KB line that began like an
// nccl-tests rank line overflowed the stack (a crash, not an error). Text
// read from elsewhere (a log, mpirun's output, a foreign database's names)
// is matched through these, which take no text longer than
// kMaxRegexTextChars: every line the readers look for is far shorter.

#include <cstddef>
#include <regex>
#include <string>

namespace cs {

inline constexpr std::size_t kMaxRegexTextChars = 2048;

inline bool bounded_regex_search(const std::string& text, std::smatch& m, const std::regex& re) {
  return text.size() <= kMaxRegexTextChars && std::regex_search(text, m, re);
}

inline bool bounded_regex_match(const std::string& text, std::smatch& m, const std::regex& re) {
  return text.size() <= kMaxRegexTextChars && std::regex_match(text, m, re);
}

}  // namespace cs
