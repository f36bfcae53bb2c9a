/* A seeded generator for initialisation, data sampling and text sampling:
 * xoshiro256** (Blackman & Vigna), seeded through splitmix64. The whole
 * state is the four words of tlm_rng, so a checkpoint saves and restores it
 * exactly (e.g. as an I64 tensor of shape [4]). */
#ifndef TLM_RT_RNG_H
#define TLM_RT_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tlm_rng {
    uint64_t s[4];
} tlm_rng;

void tlm_rng_seed(tlm_rng *r, uint64_t seed);
uint64_t tlm_rng_next(tlm_rng *r);
/* uniform in [0, 1) with 53 random bits */
double tlm_rng_uniform(tlm_rng *r);
/* uniform integer in [0, n), unbiased (rejection); n > 0 */
uint64_t tlm_rng_below(tlm_rng *r, uint64_t n);
/* standard normal by Box-Muller; uses two uniforms and keeps no spare, so
 * the state stays just the four words */
double tlm_rng_normal(tlm_rng *r);
/* out[i] = mean + std * N(0,1): Box-Muller using both values of each pair */
void tlm_rng_fill_normal(tlm_rng *r, float *out, size_t n, float mean, float std);
/* out[i] uniform in [lo, hi) */
void tlm_rng_fill_uniform(tlm_rng *r, float *out, size_t n, float lo, float hi);

/* state <-> int64 words, for checkpoints (bit-for-bit). load refuses
 * (false, r untouched) the all-zero state, which xoshiro never leaves and
 * no seed gives: a damaged checkpoint's, on which every bounded draw
 * (tlm_rng_below) would retry forever. */
void tlm_rng_save(const tlm_rng *r, int64_t out[4]);
bool tlm_rng_load(tlm_rng *r, const int64_t in[4]);

#endif
