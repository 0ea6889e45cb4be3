#pragma once
// Megatron's rank order: which global rank holds which data-, tensor- and
// pipeline-parallel coordinate. Tensor-parallel ranks are fastest (so a
// tensor-parallel group sits on one node), then data-parallel, then pipeline:
//
//   rank = (pp_rank x dp + dp_rank) x tp + tp_rank
//
// The one home of this order: the engines' communicators, the weight
// gathering, the predicted timeline's ranks and the planner's placements of
// groups on nodes all follow it. Ranks and coordinates count from 0; a rank
// is in [0, world_size()).

namespace cs {

struct RankCoordinates {
  int dp = 0;  // data-parallel rank: which replica
  int tp = 0;  // tensor-parallel rank
  int pp = 0;  // pipeline stage
  friend constexpr bool operator==(const RankCoordinates&, const RankCoordinates&) = default;
};

struct RankOrder {
  int dp = 1;
  int tp = 1;
  int pp = 1;

  constexpr int world_size() const { return dp * tp * pp; }
  constexpr RankCoordinates coordinates(int rank) const {
    return {(rank / tp) % dp, rank % tp, rank / (tp * dp)};
  }
  constexpr int rank(const RankCoordinates& c) const { return (c.pp * dp + c.dp) * tp + c.tp; }
  // The first rank of a pipeline stage (its data- and tensor-parallel rank 0).
  constexpr int first_rank_of_stage(int stage) const { return rank({0, 0, stage}); }

  // Which group of each kind a rank belongs to: the ranks that share the other
  // two coordinates, numbered 0 .. (world_size / group size) - 1 (the colours
  // that split the world communicator).
  constexpr int data_parallel_group(const RankCoordinates& c) const { return c.pp * tp + c.tp; }
  constexpr int tensor_parallel_group(const RankCoordinates& c) const { return c.pp * dp + c.dp; }
  constexpr int pipeline_group(const RankCoordinates& c) const { return c.dp * tp + c.tp; }
};

}  // namespace cs
