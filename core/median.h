#pragma once
// The medians the analyses, calibration and sweeps take, in one place.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace cs {

// The median of a sample: the middle value, or the mean of the two middle
// values for an even count; 0 for an empty sample.
// median_in_place reorders the values it is given instead of copying them
// (millions of durations: the copy's fresh pages cost more than the median).
template <class T>
double median_in_place(std::span<T> values) {
  if (values.empty()) return 0;
  const std::size_t n = values.size();
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (n % 2) return static_cast<double>(*mid);
  const T lower = *std::max_element(values.begin(), mid);
  return (static_cast<double>(lower) + static_cast<double>(*mid)) / 2;
}
template <class T>
double median(std::vector<T> values) {
  return median_in_place(std::span<T>(values));
}

// The middle sample itself (the upper of the two middle ones for an even
// count), where the figure must be one that was measured: a run's time, a
// clock offset; T{} for an empty sample.
template <class T>
T middle_sample(std::vector<T> values) {
  if (values.empty()) return T{};
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

}  // namespace cs
