/* The batch rows a cluster of the persistent E-series kernels (eng_pick_group in
 * cuda/cluster_groups.h), against resident-cluster counts written out by hand: the H200's (15
 * clusters of 8 whole-SM CTAs on 132 SMs, 30 when two CTAs share an SM), plans that do not exist
 * past some rows, and none that runs; and which of two plans for the same rows runs
 * (eng_plan_beats: E23's forward on clusters of 8 or of 16 CTAs, 7 of which are resident;
 * eng_bwd_plan_beats: its backward, where the parts a segment is walked in come before the CTAs).
 * No GPU needed. */
#include "cuda/cluster_groups.h"
#include "support.h"

/* resident(g) from a table (index g, 1..8), and which g were asked. */
typedef struct {
  int n[9];
  int asked[9];
} table_t;

static int from_table(void *ctx, int g) {
  table_t *t = ctx;
  t->asked[g]++;
  return t->n[g];
}

static table_t all_of(int n) {
  table_t t = {{0}, {0}};
  for (int g = 1; g <= 8; g++) t.n[g] = n;
  return t;
}

/* The rows a cluster for B rows in clusters of 8 CTAs on 132 SMs (an H200), up to 8 rows, when n
 * clusters of any plan can be resident. */
static int pick_h200(int64_t B, int pow2, int n) {
  table_t t = all_of(n);
  return eng_pick_group(B, 8, 132, 8, pow2, from_table, &t);
}

Test(cluster_groups, sixteen_clusters_of_four_do_not_fit_fifteen) {
  /* B = 64 on an H200 with whole-SM CTAs: 16 clusters of 4 rows would run the 16th alone after
   * the others; 13 of 5 are all resident. The kernels compiled per power of two take 8. */
  table_t t = all_of(15);
  cr_assert_eq(eng_pick_group(64, 8, 132, 8, 0, from_table, &t), 5);
  /* asked only where 132 SMs could hold every cluster: g = 4 (128 CTAs) and g = 5 (104) */
  for (int g = 1; g <= 8; g++)
    cr_assert_eq(t.asked[g], g == 4 || g == 5, "g = %d asked %d times", g, t.asked[g]);
  cr_assert_eq(pick_h200(64, 1, 15), 8);
}

Test(cluster_groups, two_ctas_an_sm_keep_sixteen_clusters) {
  cr_assert_eq(pick_h200(64, 0, 30), 4);
  cr_assert_eq(pick_h200(4, 0, 30), 1);
  cr_assert_eq(pick_h200(16, 0, 15), 2); /* 16 clusters of 1 row: one too many */
  cr_assert_eq(pick_h200(15, 0, 15), 1);
}

Test(cluster_groups, too_many_rows_for_one_wave_take_the_most_rows_that_run) {
  cr_assert_eq(pick_h200(256, 0, 15), 8); /* 32 clusters: 3 waves */
  /* plans of 3 rows and more do not exist (their shared memory): the largest that runs */
  for (int pow2 = 0; pow2 <= 1; pow2++) {
    table_t t = all_of(0);
    t.n[1] = t.n[2] = 15;
    cr_assert_eq(eng_pick_group(64, 8, 132, 8, pow2, from_table, &t), 2, "pow2 %d", pow2);
  }
}

Test(cluster_groups, nothing_runs) {
  cr_assert_eq(pick_h200(64, 0, 0), 0);
  table_t t = all_of(0);
  cr_assert_eq(eng_pick_group(3, 16, 132, 8, 1, from_table, &t), 0);
}

/* The plan pick_group finds for B rows on clusters of cs CTAs, n of which are resident. */
static eng_cluster_plan_t plan_of(int64_t B, int cs, int n) {
  table_t t = all_of(n);
  const int bg = eng_pick_group(B, cs, 132, 8, 0, from_table, &t);
  return (eng_cluster_plan_t){bg, cs, n, 0};
}

Test(cluster_groups, sixteen_ctas_a_cluster_where_they_hold_as_few_rows) {
  /* B = 4: one row a cluster either way (4 of 15 and 4 of 7 resident), so more CTAs a row */
  cr_assert(eng_plan_beats(4, plan_of(4, 16, 7), plan_of(4, 8, 15)));
  cr_assert(!eng_plan_beats(4, plan_of(4, 8, 15), plan_of(4, 16, 7)));
  cr_assert_eq(plan_of(7, 16, 7).bg, 1);
  cr_assert(eng_plan_beats(7, plan_of(7, 16, 7), plan_of(7, 8, 15)));
  /* B = 8 and 16: 16 CTAs need 2 and 3 rows a cluster where 8 CTAs need 1 and 2 */
  for (int64_t B = 8; B <= 16; B += 8) {
    const eng_cluster_plan_t a = plan_of(B, 8, 15), b = plan_of(B, 16, 7);
    cr_assert_eq(a.bg + 1, b.bg, "B = %d", (int)B);
    cr_assert(eng_plan_beats(B, a, b), "B = %d", (int)B);
    cr_assert(!eng_plan_beats(B, b, a), "B = %d", (int)B);
  }
}

Test(cluster_groups, one_wave_beats_fewer_rows_a_cluster) {
  /* B = 64: 16 CTAs a cluster cannot hold every row in one wave (8 rows, 8 clusters, 7
   * resident), 8 CTAs can (5 rows, 13 clusters of 15) */
  const eng_cluster_plan_t a = plan_of(64, 8, 15), b = plan_of(64, 16, 7);
  cr_assert_eq(a.bg, 5);
  cr_assert_eq(b.bg, 8);
  cr_assert(eng_plan_beats(64, a, b));
  /* one wave even against fewer rows a cluster: 16 clusters of 4 rows, 7 resident */
  const eng_cluster_plan_t f = {4, 16, 7, 0};
  cr_assert(eng_plan_beats(64, a, f));
  cr_assert(!eng_plan_beats(64, f, a));
  /* with neither in one wave, fewer rows a cluster still wins */
  const eng_cluster_plan_t c = {8, 8, 3, 0}, e = {6, 16, 3, 0};
  cr_assert(eng_plan_beats(64, e, c));
  cr_assert(!eng_plan_beats(64, c, e));
}

/* plan_of with the parts a backward walks each segment in */
static eng_cluster_plan_t bwd_plan_of(int64_t B, int cs, int n, int parts) {
  eng_cluster_plan_t p = plan_of(B, cs, n);
  p.parts = parts;
  return p;
}

/* E23's backward at d = 512, B = 4 (one row a cluster on 8 or 16 CTAs): at N = 64, 8 CTAs walk
 * each 16-step segment in 2 parts and 16 CTAs in one, so 16; at N = 8 one part either way, so 8
 * (half the partial sums a step). B = 64: rows first (8 CTAs hold 5 rows in one wave, 16 hold 8
 * in two), whatever the parts. */
Test(cluster_groups, the_backward_takes_more_ctas_only_for_fewer_parts) {
  const eng_cluster_plan_t eight2 = bwd_plan_of(4, 8, 15, 2), sixteen1 = bwd_plan_of(4, 16, 7, 1);
  cr_assert(eng_bwd_plan_beats(4, sixteen1, eight2));
  cr_assert(!eng_bwd_plan_beats(4, eight2, sixteen1));
  const eng_cluster_plan_t eight1 = bwd_plan_of(4, 8, 15, 1);
  cr_assert(eng_bwd_plan_beats(4, eight1, sixteen1));
  cr_assert(!eng_bwd_plan_beats(4, sixteen1, eight1));
  /* a segment store on chip in parts beats one in global scratch */
  const eng_cluster_plan_t off = bwd_plan_of(4, 8, 15, ENG_PARTS_OFF_CHIP);
  cr_assert(eng_bwd_plan_beats(4, bwd_plan_of(4, 16, 7, 3), off));
  const eng_cluster_plan_t a = bwd_plan_of(64, 8, 15, ENG_PARTS_OFF_CHIP),
                           b = bwd_plan_of(64, 16, 7, 1);
  cr_assert_eq(a.bg, 5);
  cr_assert(eng_bwd_plan_beats(64, a, b));
  cr_assert(!eng_bwd_plan_beats(64, b, a));
}
