/* 64-bit little-endian integers in byte buffers, as the file formats store
 * them (the safetensors header length, the model.so integrity trailer). */
#ifndef TLM_LE64_H
#define TLM_LE64_H

#include <stdint.h>

static inline void tlm_put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t tlm_get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
