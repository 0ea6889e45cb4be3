#pragma once

#include <string>

namespace cs {

// A rule broken at a place in a document.
struct Problem {
  std::string pointer;  // JSON pointer, e.g. "/inter_node/bandwidth_gbps"; "" for the whole document
  std::string message;  // the rule, e.g. "must be > 0 (got -1)"
};

}  // namespace cs
