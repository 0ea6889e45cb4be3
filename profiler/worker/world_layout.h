#pragma once

#include "core/rank_order.h"

namespace cs::worker {

// This rank's place in a dp x tp x pp world, in Megatron's rank order
// (core/rank_order.h: tensor parallel innermost, then data, then pipeline).
struct WorldLayout {
  int world_rank = 0;
  int world_size = 1;
  int dp = 1, tp = 1, pp = 1;
  int dp_rank = 0, tp_rank = 0, pp_rank = 0;

  static WorldLayout of(int world_rank, int dp, int tp, int pp);
  RankOrder order() const { return {dp, tp, pp}; }
  RankCoordinates coordinates() const { return {dp_rank, tp_rank, pp_rank}; }
};

}  // namespace cs::worker
