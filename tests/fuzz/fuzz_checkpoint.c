/* libFuzzer target over what reads a checkpoint (runtime/train/checkpoint.c
 * on top of the safetensors reader): tlm_ckpt_open's checks (format,
 * checksum, model, ABI version, parameter fingerprint, every parameter's
 * name, dtype and shape), then tlm_ckpt_load_params and
 * tlm_ckpt_load_trainer into a model and an AdamW and an SGD trainer.
 *
 * The model is ckpt_model.tlm (its descriptor ckpt_model.blob, read once).
 * A mutated file would almost never keep a valid checksum, so the bytes are
 * parsed, and when that succeeds written again with the checksum they now
 * have (computed as checkpoint.c does) wherever the metadata holds one:
 * the checks behind it are reached, and the checksum check itself is
 * reached by the bytes as they are whenever they do not parse back.
 * TLM_FUZZ_WRITE_SEEDS=DIR writes the seeds (corpus-checkpoint/) instead;
 * TLM_FUZZ_VERBOSE=1 prints how far each input got. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi_checksum.h"
#include "checkpoint.h"
#include "model.h"
#include "tlm_train_settings.h"
#include "trainer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tlm_so so;
static tlm_model model;
static tlm_trainer adamw, sgd;
static char path[4096];
static bool verbose;

static void cleanup(void) { unlink(path); }

static void die(const char *what, const tlm_err *err) {
    fprintf(stderr, "fuzz_checkpoint: %s: %s\n", what, err ? err->msg : "");
    abort();
}

static void write_seeds(const char *dir) {
    tlm_run_state st = {.step = 3, .tokens_seen = 48, .elapsed = 1.5};
    tlm_rng_seed(&st.data_rng, 7);
    tlm_st_meta extra[] = {{"settings", "{\"batch\":1}"}, {"created_by", "fuzz_checkpoint"}};
    const tlm_trainer *ts[2] = {&adamw, &sgd};
    const char *names[2] = {"adamw.safetensors", "sgd.safetensors"};
    for (int i = 0; i < 2; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        tlm_err err;
        if (!tlm_ckpt_save(p, ts[i], &st, extra, 2, &err)) die("writing a seed", &err);
    }
}

static void setup(void) {
    FILE *fp = fopen(TLM_FUZZ_CKPT_BLOB, "rb");
    if (!fp) die("cannot open " TLM_FUZZ_CKPT_BLOB, NULL);
    static uint8_t blob[1 << 16] __attribute__((aligned(64)));
    size_t n = fread(blob, 1, sizeof blob, fp);
    fclose(fp);
    /* the descriptor of this ABI version (the layout must not have changed:
     * tlm_blob_read says so otherwise; then regenerate ckpt_model.blob) */
    tlm_blob_header h;
    if (n < sizeof h) die("ckpt_model.blob is truncated", NULL);
    memcpy(&h, blob, sizeof h);
    h.version = TLM_ABI_VERSION;
    h.checksum = tlm_abi_checksum(blob + sizeof h, n - sizeof h);
    memcpy(blob, &h, sizeof h);
    tlm_err err;
    if (!tlm_blob_read(blob, n, &so.tables, &err)) die("ckpt_model.blob (regenerate it: extract_blob.sh)", &err);
    so.header = (const tlm_blob_header *)blob;
    so.strings = (const char *)blob + so.header->strings_off;
    if (!tlm_model_create(&model, &so, 1, so.config->context, true, 0, &err)) die("tlm_model_create", &err);
    tlm_model_init_params(&model, 1);
    tlm_abi_train s = *so.train;
    tlm_train_resolve_defaults(&s);
    s.batch = s.accumulate = 1;
    s.context = so.config->context;
    s.optimizer = TLM_OPT_ADAMW;
    if (!tlm_trainer_create(&adamw, &model, &s, false, &err)) die("tlm_trainer_create", &err);
    s.optimizer = TLM_OPT_SGD;
    if (!tlm_trainer_create(&sgd, &model, &s, false, &err)) die("tlm_trainer_create", &err);
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/fuzz_checkpoint.%ld.safetensors", tmp, (long)getpid());
    atexit(cleanup);
    verbose = getenv("TLM_FUZZ_VERBOSE") != NULL;
    const char *seeds = getenv("TLM_FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
}

static void load(const char *p) {
    tlm_err err = {""};
    tlm_st_file *f = tlm_ckpt_open(p, &so, &err);
    if (verbose) fprintf(stderr, "open: %s\n", f ? "ok" : err.msg);
    if (!f) return;
    tlm_run_state st;
    bool ok[3] = {tlm_ckpt_load_params(f, &model, &err), tlm_ckpt_load_trainer(f, &adamw, &st, &err),
                  tlm_ckpt_load_trainer(f, &sgd, &st, &err)};
    if (verbose) fprintf(stderr, "params %d, adamw %d, sgd %d\n", ok[0], ok[1], ok[2]);
    tlm_st_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) setup();
    tlm_err err;
    tlm_st_file *f = tlm_st_parse(data, size, &err);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) abort();
    if (!f) {
        load(path); /* refused by the reader, through tlm_ckpt_open */
        return 0;
    }
    int n = tlm_st_count(f), nm = tlm_st_meta_count(f);
    tlm_st_tensor *ts = calloc((size_t)(n ? n : 1), sizeof *ts);
    tlm_st_meta *meta = calloc((size_t)(nm ? nm : 1), sizeof *meta);
    if (!ts || !meta) abort();
    for (int i = 0; i < n; i++) ts[i] = *tlm_st_at(f, i);
    for (int i = 0; i < nm; i++) meta[i] = *tlm_st_meta_at(f, i);
    char sum[TLM_CKPT_CHECKSUM_LEN];
    if (!tlm_ckpt_checksum(ts, n, meta, nm, sum)) abort();
    for (int i = 0; i < nm; i++)
        if (!strcmp(meta[i].key, "checksum")) meta[i].value = sum;
    if (tlm_st_write(path, ts, n, meta, nm, &err) != 0) die("writing back a file the reader accepted", &err);
    load(path);
    free(ts);
    free(meta);
    tlm_st_close(f);
    return 0;
}
