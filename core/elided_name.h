#pragma once
// Names of a trace (kernels, collectives, annotations, CUDA API calls,
// lanes) as the app's tables, timeline, tooltips and the run reports show
// them: whole up to kShownNameChars characters, else their first and last
// kShownNameChars / 2 characters around " … ". A heavily templated kernel's
// name runs to a few thousand characters (PyTorch's own reach 700); an
// import can hold one of 200,000 or more, which no reader can take in and
// every text layout measured whole (the app took seconds to open such a
// run, its PDF report minutes). The store keeps every name whole, and so do
// the Selection tab's details, the CSV tables, the Chrome trace and the
// CLI's JSON: what a user copies or a program reads.

#include <cstddef>
#include <string>
#include <string_view>

namespace cs {

inline constexpr std::size_t kShownNameChars = 1000;

// `utf8` in at most `chars` characters (UTF-8 code points) and the 3 of
// " … " between its start and its end: cut between characters, never inside
// one; reads the name's bytes once.
std::string elided_name(std::string_view utf8, std::size_t chars = kShownNameChars);

}  // namespace cs
