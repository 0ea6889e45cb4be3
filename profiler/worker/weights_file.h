#pragma once
// A model's fp32 weights by parameter name, as the worker writes them with
// --dump-weights (the unsplit layout), for comparing runs of different splits.

#include <map>
#include <string>
#include <vector>

#include "core/result.h"

namespace cs::worker {

using NamedWeights = std::map<std::string, std::vector<float>>;

Status write_weights(const std::string& path, const NamedWeights& weights);
Result<NamedWeights> read_weights(const std::string& path);

}  // namespace cs::worker
