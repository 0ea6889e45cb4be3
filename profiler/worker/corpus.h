#pragma once
// The built-in training text and how a step's samples are drawn from it.

#include <cstdint>
#include <string_view>
#include <vector>

namespace cs::worker {

// The seed articles (resources/corpus), byte-level tokens 0-255.
std::string_view builtin_corpus();

// Samples of a step: sample i of step s starts at a position that depends only
// on (seed, s, i), so any split of the global batch over ranks and micro-
// batches sees exactly the samples an unsplit run sees.
class Sampler {
 public:
  Sampler(std::string_view text, int seq, std::uint64_t seed);
  // tokens and targets of `count` consecutive samples from `first`, B*T each.
  void fill(int step, int first, int count, std::vector<std::int32_t>& tokens,
            std::vector<std::int32_t>& targets) const;

 private:
  std::string_view text_;
  int seq_;
  std::uint64_t seed_;
};

}  // namespace cs::worker
