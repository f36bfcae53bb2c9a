/* The shard header's writer and reader, side by side (shard.h). */
#include "shard.h"

#include <string.h>

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

void tlm_shard_header(const tlm_shard *s, uint8_t *out) {
    memcpy(out, TLM_SHARD_MAGIC, 8);
    put32(out + 8, s->version);
    put32(out + 12, s->width);
    put64(out + 16, s->count);
    memcpy(out + 24, s->tokenizer, 32);
    put32(out + 56, s->vocab);
    put32(out + 60, (uint32_t)s->eot);
    put64(out + 64, s->bytes);
}

bool tlm_shard_parse(const uint8_t *data, size_t size, const char *name, tlm_shard *out, tlm_err *err) {
    if (size < 8 || memcmp(data, TLM_SHARD_MAGIC, 8))
        return tlm_fail(err, "%s: not a token shard (no TLMSHARD header)", name);
    if (size < TLM_SHARD_V1_HEADER_SIZE)
        return tlm_fail(err, "%s: truncated: the header is cut short (%zu bytes; a header has at least %d)", name, size,
                        TLM_SHARD_V1_HEADER_SIZE);
    tlm_shard s = {.version = get32(data + 8), .width = get32(data + 12), .count = get64(data + 16)};
    memcpy(s.tokenizer, data + 24, 32);
    s.vocab = get32(data + 56);
    s.eot = (int32_t)get32(data + 60);
    if (s.version != 1 && s.version != TLM_SHARD_VERSION)
        return tlm_fail(err, "%s: shard version %u (this tlm-run reads versions 1 and %d)", name, s.version,
                        TLM_SHARD_VERSION);
    s.header_size = s.version == 1 ? TLM_SHARD_V1_HEADER_SIZE : TLM_SHARD_HEADER_SIZE;
    if (size < s.header_size) return tlm_fail(err, "%s: truncated: the header is cut short", name);
    if (s.version >= 2) s.bytes = get64(data + 64);
    if (s.width != 2 && s.width != 4) return tlm_fail(err, "%s: token width %u (2 or 4)", name, s.width);
    if (s.vocab == 0 || (s.width == 2 && s.vocab > 65536) || s.vocab > (uint32_t)INT32_MAX)
        return tlm_fail(err, "%s: vocabulary size %u does not fit tokens of %u bytes", name, s.vocab, s.width);
    if (s.eot < -1 || (s.eot >= 0 && (uint32_t)s.eot >= s.vocab))
        return tlm_fail(err, "%s: end-of-text id %d is outside the vocabulary", name, (int)s.eot);
    uint64_t body = size - s.header_size;
    if (s.count > body / s.width)
        return tlm_fail(err, "%s: truncated: the header says %llu tokens, the file holds %llu", name,
                        (unsigned long long)s.count, (unsigned long long)(body / s.width));
    if (body != s.count * s.width)
        return tlm_fail(err, "%s: %llu byte%s after the %llu tokens the header says", name,
                        (unsigned long long)(body - s.count * s.width), body - s.count * s.width == 1 ? "" : "s",
                        (unsigned long long)s.count);
    s.tokens = data + s.header_size;
    *out = s;
    return true;
}

bool tlm_shard_check_ids(const tlm_shard *s, const char *name, tlm_err *err) {
    for (uint64_t i = 0; i < s->count; i++) {
        uint32_t id = tlm_shard_token(s, i);
        if (id >= s->vocab)
            return tlm_fail(err, "%s: token %llu is %u, outside the vocabulary (%u)", name, (unsigned long long)i + 1,
                            id, s->vocab);
    }
    return true;
}
