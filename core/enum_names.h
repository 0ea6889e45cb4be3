#pragma once
// One table per enum maps values to the names used in JSON and on the command
// line, so that parsing, printing and "must be one of" messages agree.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cs {

template <class E, std::size_t N>
struct EnumNames {
  std::array<std::pair<E, std::string_view>, N> entries;

  constexpr std::string_view name(E value) const {
    for (const auto& [v, n] : entries) {
      if (v == value) return n;
    }
    return entries[0].second;
  }
  constexpr std::optional<E> parse(std::string_view text) const {
    for (const auto& [v, n] : entries) {
      if (n == text) return v;
    }
    return std::nullopt;
  }
  // "a, b or c", for error messages.
  std::string choices() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) out += (i + 1 == N) ? " or " : ", ";
      out += entries[i].second;
    }
    return out;
  }
};

template <class E, class... Pairs>
constexpr auto enum_names(Pairs... pairs) {
  return EnumNames<E, sizeof...(Pairs)>{{{pairs...}}};
}

}  // namespace cs
