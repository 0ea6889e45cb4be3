#pragma once
// Which windows (a rank's steps) an interval overlaps, found without going
// through all of them: the step breakdown places each event in its steps
// once, where clipping every event to every step took time in steps x
// events (15,000 steps took 80 s).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace cs::trace {

// [first, second) in nanoseconds.
using Interval = std::pair<std::int64_t, std::int64_t>;

inline Interval clip(const Interval& i, const Interval& window) {
  return {std::max(i.first, window.first), std::min(i.second, window.second)};
}

// Sorted, merged: overlapping and touching intervals joined, empty ones dropped.
inline std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// Whether `t` lies in one of `merged_intervals` (as merged() leaves them).
inline bool inside(const std::vector<Interval>& merged_intervals, std::int64_t t) {
  auto it = std::upper_bound(merged_intervals.begin(), merged_intervals.end(),
                             Interval{t, std::numeric_limits<std::int64_t>::max()});
  return it != merged_intervals.begin() && std::prev(it)->second > t;
}

// A host operation's range and the kind of work it names (operation_kind).
struct HostRange {
  Interval when;
  std::string_view kind;
};
// The kind of the host operation whose range holds `t` (of those sorted by
// start, the last to start by t), or `otherwise`: a GPU kernel takes the
// kind of the operation its launch fell in.
inline std::string_view kind_at(const std::vector<HostRange>& by_start, std::int64_t t,
                                std::string_view otherwise) {
  auto it = std::upper_bound(by_start.begin(), by_start.end(), t,
                             [](std::int64_t v, const HostRange& h) { return v < h.when.first; });
  return it != by_start.begin() && std::prev(it)->when.second > t ? std::prev(it)->kind : otherwise;
}

class WindowIndex {
 public:
  // windows sorted by start; they may overlap or nest (a rank's steps as
  // recorded). The index refers to them: they must outlive it.
  explicit WindowIndex(const std::vector<Interval>& windows) : windows_(windows) {
    std::int64_t reach = std::numeric_limits<std::int64_t>::min();
    for (const Interval& w : windows_) {
      reach = std::max(reach, w.second);
      reach_.push_back(reach);  // non-decreasing: the latest end so far
    }
  }
  // f(index, the part of i inside window index) for each window i overlaps
  // (a part of positive length), in window order.
  template <class F>
  void for_each_overlap(const Interval& i, F&& f) const {
    if (i.second <= i.first) return;
    // Windows that end after i starts begin where the reach passes i's start.
    auto from = std::upper_bound(reach_.begin(), reach_.end(), i.first);
    for (std::size_t k = static_cast<std::size_t>(from - reach_.begin()); k < windows_.size();
         ++k) {
      if (windows_[k].first >= i.second) break;  // sorted by start: none further overlaps
      const Interval c = clip(i, windows_[k]);
      if (c.second > c.first) f(k, c);
    }
  }

 private:
  const std::vector<Interval>& windows_;
  std::vector<std::int64_t> reach_;
};

}  // namespace cs::trace
