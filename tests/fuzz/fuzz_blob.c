/* libFuzzer target over the model.so descriptor validator (abi/model_so.c):
 * tlm_blob_validate and tlm_blob_read on descriptor bytes, as tlm_so_open
 * finds them in a model.so. The bytes are checked as they are (the size
 * and checksum checks), then again with the header's magic, version, size
 * and checksum set to match, so mutations reach the checks behind them (and
 * seeds written before an ABI version bump still do). A descriptor the
 * reader accepts must be printable in full (tlm_so_print_all follows every
 * index and offset): the contract is that accepted tables need no further
 * checks. Seeds: the descriptors of compiled models (extract_blob.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_checksum.h"
#include "model_so.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull;

static void check(const uint8_t *blob, size_t size) {
    tlm_err err = {""};
    bool valid = tlm_blob_validate(blob, size, &err);
    tlm_so_tables t;
    bool read = tlm_blob_read(blob, size, &t, &err);
    if (valid != read) abort();
    if (!read) return;
    if (!tlm_so_print_all(devnull, &t)) abort();
    tlm_so_tables_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
    /* the descriptor sits 8-byte aligned in model.so's .rodata */
    uint8_t *blob = malloc(size ? size : 1);
    if (!blob) abort();
    memcpy(blob, data, size);
    check(blob, size);
    if (size >= sizeof(tlm_blob_header)) {
        tlm_blob_header h;
        memcpy(&h, blob, sizeof h);
        h.magic = TLM_ABI_MAGIC;
        h.version = TLM_ABI_VERSION;
        h.size = size;
        h.checksum = tlm_abi_checksum(blob + sizeof h, size - sizeof h);
        memcpy(blob, &h, sizeof h);
        check(blob, size);
    }
    free(blob);
    return 0;
}
