/* What gpu.mma and gpu.attention_tc share: a check that prints "ok" or
 * "FAIL" and counts failures, and host and device buffers on g_dev that end
 * the test with a message when they cannot be had. Each test program
 * includes it once (the definitions are static inline). */
#ifndef TLM_TC_TEST_H
#define TLM_TC_TEST_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

static tlm_device *g_dev;
static int g_failures;

static inline void check(bool ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) g_failures++;
}

static inline void die(const char *what, const tlm_err *err) {
    printf("FAIL %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* Zeroed host memory. */
static inline void *xalloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) die("out of host memory", NULL);
    return p;
}

/* A device copy of bytes at x. */
static inline tlm_dptr put(const void *x, size_t bytes) {
    tlm_err err = {{0}};
    tlm_dptr p = tlm_device_alloc(g_dev, bytes ? bytes : 1, &err);
    if (!p || (bytes && !tlm_device_upload(g_dev, p, x, bytes, &err))) die("upload", &err);
    return p;
}

/* bytes of 0xff on the device (a float NaN, a bf16 NaN): what a kernel
 * does not write stays NaN. */
static inline tlm_dptr nans(size_t bytes) {
    unsigned char *x = xalloc(bytes);
    memset(x, 0xff, bytes);
    tlm_dptr p = put(x, bytes);
    free(x);
    return p;
}

/* The device's bytes at p, after the launches so far. */
static inline void get(void *x, tlm_dptr p, size_t bytes) {
    tlm_err err = {{0}};
    if (!tlm_device_sync(g_dev, &err) || !tlm_device_download(g_dev, x, p, bytes, &err)) die("download", &err);
}

#endif
