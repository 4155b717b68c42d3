/* How many batch rows each cluster of a persistent E-series kernel takes (cuda/e1_cluster.cuh's
 * pick_group): plain C, so that the rule is tested without a GPU (tests/test_cluster_groups.c). */
#pragma once

#include <stdint.h>

/* The batch rows a cluster (or CTA) for B rows in clusters of cs CTAs: the fewest g of 1..most
 * (powers of two when pow2) whose ceil(B / g) clusters are all resident at once, for the most
 * parallel chains in one wave; where none are, the largest g that runs at all (more waves); 0
 * where none runs. resident(ctx, g): how many clusters of the plan for g rows can be resident at
 * once (0 where that plan does not exist). It is asked only where the sms could hold all the
 * clusters, or to fall back: each answer is an occupancy query. Not sms / cs: a cluster's CTAs
 * share a GPC, and the GPCs' SMs do not split into whole clusters (an H200 holds 15 clusters of 8
 * CTAs of a whole SM each, not 16); a persistent kernel whose clusters do not all fit runs the
 * rest in a second wave, at twice the time. */
static inline int eng_pick_group(int64_t B, int cs, int sms, int most, int pow2,
                                 int (*resident)(void *ctx, int g), void *ctx) {
  int last = 1;
  for (int g = 1; g <= most; g = pow2 ? 2 * g : g + 1) {
    const int64_t groups = (B + g - 1) / g;
    if (groups * cs <= sms && resident(ctx, g) >= groups) return g;
    last = g;
  }
  for (int g = last; g >= 1; g = pow2 ? g / 2 : g - 1)
    if (resident(ctx, g) > 0) return g;
  return 0;
}
