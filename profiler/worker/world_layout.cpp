#include "profiler/worker/world_layout.h"

namespace cs::worker {

WorldLayout WorldLayout::of(int world_rank, int dp, int tp, int pp) {
  const RankOrder order{dp, tp, pp};
  const RankCoordinates at = order.coordinates(world_rank);
  WorldLayout l;
  l.world_rank = world_rank;
  l.world_size = order.world_size();
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  l.dp_rank = at.dp;
  l.tp_rank = at.tp;
  l.pp_rank = at.pp;
  return l;
}

}  // namespace cs::worker
