#include "profiler/worker/corpus.h"

#include <stdexcept>

namespace cs::worker {

extern const unsigned char kCorpusBytes[];
extern const std::size_t kCorpusSize;

std::string_view builtin_corpus() {
  return {reinterpret_cast<const char*>(kCorpusBytes), kCorpusSize};
}

Sampler::Sampler(std::string_view text, int seq, std::uint64_t seed)
    : text_(text), seq_(seq), seed_(seed) {
  if (text_.size() < static_cast<std::size_t>(seq_) + 2) {
    throw std::invalid_argument("the corpus is shorter than one sequence");
  }
}

void Sampler::fill(int step, int first, int count, std::vector<std::int32_t>& tokens,
                   std::vector<std::int32_t>& targets) const {
  tokens.resize(static_cast<std::size_t>(count) * seq_);
  targets.resize(tokens.size());
  const std::uint64_t span = text_.size() - seq_ - 1;
  for (int i = 0; i < count; ++i) {
    std::uint64_t x = seed_ ^ (static_cast<std::uint64_t>(step) << 32) ^
                      static_cast<std::uint64_t>(first + i);
    x += 0x9e3779b97f4a7c15ull;  // splitmix64
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    const std::size_t start = x % span;
    for (int t = 0; t < seq_; ++t) {
      tokens[static_cast<std::size_t>(i) * seq_ + t] = static_cast<unsigned char>(text_[start + t]);
      targets[static_cast<std::size_t>(i) * seq_ + t] =
          static_cast<unsigned char>(text_[start + t + 1]);
    }
  }
}

}  // namespace cs::worker
