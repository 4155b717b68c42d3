/* How many batch rows each cluster of a persistent E-series kernel takes (cuda/e1_cluster.cuh's
 * pick_group), and which of two cluster plans for the same rows runs (eng_plan_beats, and
 * eng_bwd_plan_beats for a backward): plain C,
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
 * GPU at once; for a backward that replays segments from checkpoints (E23's), `parts`: how many
 * parts a segment is walked in with its store on chip (each part replays the steps before it
 * again), ENG_PARTS_OFF_CHIP where the store is in global scratch (L2); 0 for a forward. */
typedef struct {
  int bg, cs, resident, parts;
} eng_cluster_plan_t;
#define ENG_PARTS_OFF_CHIP 1000000

/* The rules that hold in both directions: +1 where a beats b, -1 where b beats a, 0 where they
 * say nothing. All clusters resident at once first (a second wave doubles the time), then the
 * fewest batch rows a cluster (each row lengthens a step's loops and exchanges). */
static inline int eng_plan_rows_order(int64_t B, eng_cluster_plan_t a, eng_cluster_plan_t b) {
  const int wave_a = a.resident >= (B + a.bg - 1) / a.bg;
  const int wave_b = b.resident >= (B + b.bg - 1) / b.bg;
  if (wave_a != wave_b) return wave_a ? 1 : -1;
  if (a.bg != b.bg) return a.bg < b.bg ? 1 : -1;
  return 0;
}

/* Whether forward plan a beats plan b for the same B rows (the same work split two ways, e.g.
 * E23's forward on 8 or 16 CTAs a cluster): eng_plan_rows_order, then more CTAs a cluster (each
 * CTA's share of every loop and product is smaller). */
static inline int eng_plan_beats(int64_t B, eng_cluster_plan_t a, eng_cluster_plan_t b) {
  const int o = eng_plan_rows_order(B, a, b);
  return o ? o > 0 : a.cs > b.cs;
}

/* The same for a backward that replays segments (E23's): eng_plan_rows_order, then the fewest
 * parts a segment is walked in, then fewer CTAs a cluster: each step's two exchanges send partial
 * sums to every CTA and each softmax gradient adds one partial per CTA, so 16 CTAs lost 8% at
 * B = 4 N = 8, where 8 hold the segment in one part as well, and won 9% at B = 4 N = 64, where 8
 * walk it in two (H200, session 22). */
static inline int eng_bwd_plan_beats(int64_t B, eng_cluster_plan_t a, eng_cluster_plan_t b) {
  const int o = eng_plan_rows_order(B, a, b);
  if (o) return o > 0;
  if (a.parts != b.parts) return a.parts < b.parts;
  return a.cs < b.cs;
}
