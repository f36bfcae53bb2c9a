/* The benchmarks' numeric options, parsed one way: a whole number in
 * [lo, hi] written entirely in decimal digits (atoi took "abc" for 0 and
 * "3x" for 3, and a benchmark then ran on the wrong value). */
#ifndef TLM_BENCH_ARGS_H
#define TLM_BENCH_ARGS_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* *out = text as a whole number in [lo, hi]; false, *out untouched, when
 * it is not one. */
static inline bool bench_whole(const char *text, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

/* bench_whole, saying on stderr what was wrong: "PROG: FLAG takes a whole
 * number from LO to HI, not 'TEXT'". */
static inline bool bench_int_arg(const char *prog, const char *flag, const char *text, long lo, long hi, int *out) {
    if (bench_whole(text, lo, hi, out)) return true;
    fprintf(stderr, "%s: %s takes a whole number from %ld to %ld, not '%s'\n", prog, flag, lo, hi, text);
    return false;
}

#endif
