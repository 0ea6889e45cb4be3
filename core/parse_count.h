#pragma once
// Integers read back from text other programs wrote (mpirun's lines,
// nccl-tests logs, Nsight thread names, file names, meta values, the
// environment): one home for the rule, since std::stoi threw on digits past
// an int (an internal error, or a launcher stopped) and read "2abc" as 2.

#include <charconv>
#include <optional>
#include <string_view>

namespace cs {

// A decimal integer that fits Int, the whole of `text`: digits with at most
// a leading '-' (for a signed Int), no '+', no spaces; nothing otherwise.
template <class Int = int>
std::optional<Int> parse_integer(std::string_view text) {
  Int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A non-negative decimal integer that fits an int (or Int), the whole of `text`
// (no sign, no spaces); nothing otherwise.
template <class Int = int>
std::optional<Int> parse_count(std::string_view text) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  return parse_integer<Int>(text);
}

}  // namespace cs
