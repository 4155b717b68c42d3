/* How many batch rows each cluster of a persistent E-series kernel takes (cuda/e1_cluster.cuh's
 * pick_group), and which of two cluster plans for the same rows runs (eng_plan_beats): plain C,
 * so that the rules are tested without a GPU (tests/test_cluster_groups.c). */
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

/* A cluster plan for B rows: bg rows a cluster of cs CTAs, of which `resident` clusters fit the
 * GPU at once. */
typedef struct {
  int bg, cs, resident;
} eng_cluster_plan_t;

/* Whether plan a beats plan b for the same B rows (the same work split two ways, e.g. E23's
 * forward on 8 or 16 CTAs a cluster): all its clusters resident at once first (a second wave
 * doubles the time), then the fewest batch rows a cluster (each row lengthens a step's loops and
 * exchanges), then more CTAs a cluster (each CTA's share of every loop and product is smaller). */
static inline int eng_plan_beats(int64_t B, eng_cluster_plan_t a, eng_cluster_plan_t b) {
  const int wave_a = a.resident >= (B + a.bg - 1) / a.bg;
  const int wave_b = b.resident >= (B + b.bg - 1) / b.bg;
  if (wave_a != wave_b) return wave_a;
  if (a.bg != b.bg) return a.bg < b.bg;
  return a.cs > b.cs;
}
