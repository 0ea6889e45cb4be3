#pragma once
// The shape the worker trains for a plan: the plan's transformer scaled down
// to fit this machine, keeping what the parallel plan needs (heads divisible
// by tp, layers by pp and its chunks), and a sentence saying what was scaled.

#include <string>

#include "core/result.h"
#include "core/workload.h"
#include "profiler/worker/gpt_model.h"

namespace cs {

struct ShapeLimits {
  int max_hidden = 256;
  int max_layers = 8;
  int max_seq = 128;
  int min_head_dim = 16;
};

struct WorkerShape {
  worker::GptConfig config;
  std::string scaled;  // "hidden 4096 -> 256, layers 32 -> 8, ..." or "" when unscaled
};

// `chunks`: model chunks per pipeline rank (the interleaved schedule); the
// layers are a multiple of pp x chunks.
Result<WorkerShape> worker_shape_for(const Workload& workload, int tp, int pp, int chunks = 1,
                                     const ShapeLimits& limits = {});

}  // namespace cs
