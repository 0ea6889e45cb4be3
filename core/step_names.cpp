#include "core/step_names.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace cs::trace {

namespace {

// Whether `name` begins with `word`, in any case; removes it if so.
bool take_word(std::string_view& name, std::string_view word) {
  if (name.size() < word.size()) return false;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(name[i])) != word[i]) return false;
  }
  name.remove_prefix(word.size());
  return true;
}

}  // namespace

std::optional<std::int32_t> step_of_range_name(std::string_view name) {
  if (!(take_word(name, "profilerstep#") || take_word(name, "iteration") ||
        take_word(name, "iter") || take_word(name, "step")))
    return std::nullopt;
  if (!name.empty() &&
      (name[0] == ' ' || name[0] == '#' || name[0] == '_' || name[0] == '-' || name[0] == ':'))
    name.remove_prefix(1);
  // Digits only: from_chars would take a sign, and stop before a tail.
  if (name.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int32_t step = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), step);
  if (error != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return step;
}

std::optional<std::int32_t> StepRanges::started(std::uint64_t thread, std::string_view domain,
                                                std::string_view name, std::int64_t start) {
  if (domain == "NCCL" || (thread_ && *thread_ != thread) || start < busy_until_)
    return std::nullopt;
  const auto step = step_of_range_name(name);
  if (!step) return std::nullopt;
  thread_ = thread;
  busy_until_ = std::numeric_limits<std::int64_t>::max();  // until its end is given
  return step;
}

}  // namespace cs::trace
