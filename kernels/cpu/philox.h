/* Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3" (SC'11), exactly as Random123 defines it: 10 rounds, multipliers 0xD2511F53 and
 * 0xCD9E8D57, key bumped by the Weyl constants 0x9E3779B9 and 0xBB67AE85 between rounds. */
#ifndef ENG_KCPU_PHILOX_H
#define ENG_KCPU_PHILOX_H

#include <stdint.h>

void eng_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The engine's use of it: block `block` of generator `seed` is counter {lo, hi of block, 0, 0}
 * under key {lo, hi of seed}. */
static inline void eng_philox_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
  const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  eng_philox4x32_10(ctr, key, out);
}

#endif
