#pragma once
// The order a pipeline rank runs its forward and backward passes, as
// Megatron-LM schedules them: one home for the planner's timeline and the
// engines' trainer.

#include <vector>

namespace cs {

struct PipelinePass {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;  // model chunk (virtual stage) of this rank, 0 without interleaving
};

// 1F1B (Narayanan et al. 2021): stage s of `stages` runs stages - s - 1
// warm-up forwards, then alternates one forward and one backward, then
// drains the backwards. Interleaved (`chunks` > 1, Megatron's virtual
// pipeline): the rank holds `chunks` model chunks; virtual micro-batches
// walk the chunks `stages` micro-batches at a time (forward chunk 0 to
// chunks - 1, backward the other way) after 2 (stages - s - 1) +
// (chunks - 1) stages warm-up forwards. Without a pipeline it is forward,
// backward per micro-batch. Interleaving needs the micro-batches to be a
// multiple of `stages` (the planner's check).
std::vector<PipelinePass> pipeline_schedule(int stages, int stage, int micro_batches, int chunks);

// The most micro-batches of each chunk that `passes` hold in flight
// (forward run, backward not yet): the activation sets a chunk keeps. A
// chunk's micro-batches start and end in order, so micro-batch m can use
// set m % in_flight[chunk].
std::vector<int> pipeline_in_flight(const std::vector<PipelinePass>& passes, int chunks);

}  // namespace cs
