/* xoshiro256** 1.0 (Blackman & Vigna, public domain reference), seeded by
 * splitmix64 as its authors recommend, so any 64-bit seed (0 included)
 * gives a well-mixed, non-zero state. */
#include "tlm_rt/rng.h"

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void tlm_rng_seed(tlm_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t tlm_rng_next(tlm_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tlm_rng_uniform(tlm_rng *r) { return (double)(tlm_rng_next(r) >> 11) * 0x1.0p-53; }

/* Rejection keeps it unbiased: the 2^64 mod n smallest words are redrawn,
 * so the rest split into equally many values per residue. */
uint64_t tlm_rng_below(tlm_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t threshold = (0 - n) % n; /* = 2^64 mod n */
    for (;;) {
        uint64_t x = tlm_rng_next(r);
        if (x >= threshold) return x % n;
    }
}

/* One Box-Muller pair from two uniforms; u1 in (0, 1] so log(u1) is finite. */
static void box_muller(tlm_rng *r, double *z0, double *z1) {
    double u1 = (double)((tlm_rng_next(r) >> 11) + 1) * 0x1.0p-53;
    double u2 = tlm_rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1));
    double a = 2.0 * 3.14159265358979323846 * u2;
    *z0 = rad * cos(a);
    *z1 = rad * sin(a);
}

double tlm_rng_normal(tlm_rng *r) {
    double z0, z1;
    box_muller(r, &z0, &z1);
    return z0;
}

void tlm_rng_fill_normal(tlm_rng *r, float *out, size_t n, float mean, float std) {
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        double z0, z1;
        box_muller(r, &z0, &z1);
        out[i] = (float)(mean + std * z0);
        out[i + 1] = (float)(mean + std * z1);
    }
    if (i < n) out[i] = (float)(mean + std * tlm_rng_normal(r));
}

void tlm_rng_fill_uniform(tlm_rng *r, float *out, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        float x = (float)(lo + (hi - lo) * tlm_rng_uniform(r));
        /* rounding to float can land on hi itself; keep the interval open */
        out[i] = x < hi ? x : nextafterf(hi, lo);
    }
}

/* memcpy: the bits travel unchanged (a cast of words >= 2^63 to int64 is
 * implementation-defined) */
void tlm_rng_save(const tlm_rng *r, int64_t out[4]) { memcpy(out, r->s, sizeof r->s); }

bool tlm_rng_load(tlm_rng *r, const int64_t in[4]) {
    if (!(in[0] | in[1] | in[2] | in[3])) return false;
    memcpy(r->s, in, sizeof r->s);
    return true;
}
