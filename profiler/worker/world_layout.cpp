#include "profiler/worker/world_layout.h"

namespace cs::worker {

WorldLayout WorldLayout::of(int world_rank, int dp, int tp, int pp) {
  WorldLayout l;
  l.world_rank = world_rank;
  l.world_size = dp * tp * pp;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.tp_rank = world_rank % tp;
  l.dp_rank = (world_rank / tp) % dp;
  l.pp_rank = world_rank / (tp * dp);
  return l;
}

int WorldLayout::rank_of(int dp_rank_, int tp_rank_, int pp_rank_) const {
  return (pp_rank_ * dp + dp_rank_) * tp + tp_rank_;
}

}  // namespace cs::worker
