/* The descriptor's checksum: FNV-1a, 64 bits, over the bytes after the
 * header. Not cryptographic; it catches damaged files. */
#ifndef TLM_ABI_CHECKSUM_H
#define TLM_ABI_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t tlm_abi_checksum(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

#endif
