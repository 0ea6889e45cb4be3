#pragma once

namespace cs::worker {

// Rank layout of a dp x tp x pp world, as Megatron lays it out: tensor
// parallel innermost (neighbours on one node), then data, then pipeline.
struct WorldLayout {
  int world_rank = 0;
  int world_size = 1;
  int dp = 1, tp = 1, pp = 1;
  int dp_rank = 0, tp_rank = 0, pp_rank = 0;

  static WorldLayout of(int world_rank, int dp, int tp, int pp);
  int rank_of(int dp_rank, int tp_rank, int pp_rank) const;
};

}  // namespace cs::worker
