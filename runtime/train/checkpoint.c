#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_config.h"
#include "errmsg.h"
#include "regular_file.h"
#include "le64.h"
#include "test_hook.h"
#include "tlm_rt/json.h"
#include "tlm_rt/ops.h" /* tlm_threads_can_split */

uint64_t tlm_fnv1a(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) { return tlm_fnv1a(h, s, strlen(s) + 1); }

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

uint64_t tlm_param_fingerprint(const tlm_so *so) {
    uint64_t h = TLM_FNV_OFFSET;
    char shape[96];
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        shape_text(shape, sizeof shape, (int)p->ndim, p->shape);
        h = fnv_str(h, tlm_so_str(so, p->name));
        h = fnv_str(h, shape);
    }
    return h;
}

/* ---- the checksum: tensors in file order, metadata sorted by key ----
 *
 * Written as "sum64:" and 16 hex digits: each tensor's name, dtype and shape
 * through FNV-1a, then its bytes as one 64-bit sum (mod 2^64) over their
 * little-endian words of mix(word + its index times an odd constant),
 * splitmix64's finaliser: a bijection, so that changing any one word
 * changes the sum, and the index makes a moved word change it too. A sum
 * has no order, so threads and vector lanes each add up a part, with the
 * same bits on any count, at the speed of memory: 8.8 GB/s on one thread
 * of a Zen 5, where FNV-1a over the bytes, one at a time, ran at 0.88 GB/s
 * (about 6 s for each write and each load of a 440M model's 5.3 GB
 * checkpoint). Checkpoints written before
 * (16 hex digits, FNV-1a over every byte) are still read. */

#define SUM_PREFIX "sum64:"
#define SUM_STEP 0x9e3779b97f4a7c15ull
#define SUM_BLOCK ((size_t)1 << 16) /* words a thread adds up at a time */

static inline uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A little-endian word, in one load (tlm_get_le64's bytes, which an omp
 * simd loop kept as eight loads) */
static inline uint64_t word_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* word i's share of the sum */
static inline uint64_t word_term(uint64_t word, size_t i) { return mix64(word + (uint64_t)(i + 1) * SUM_STEP); }

/* words [w0, w1) of p */
static uint64_t words_sum(const uint8_t *p, size_t w0, size_t w1) {
    uint64_t s = 0;
    for (size_t i = w0; i < w1; i++) s += word_term(word_at(p + 8 * i), i);
    return s;
}

static uint64_t data_sum(const void *data, size_t bytes) {
    const uint8_t *p = data;
    size_t words = bytes / 8, blocks = (words + SUM_BLOCK - 1) / SUM_BLOCK;
    uint64_t s = 0;
    if (blocks > 1 && tlm_threads_can_split()) {
#pragma omp parallel for schedule(static) reduction(+ : s)
        for (size_t b = 0; b < blocks; b++)
            s += words_sum(p, b * SUM_BLOCK, b + 1 < blocks ? (b + 1) * SUM_BLOCK : words);
    } else {
        s = words_sum(p, 0, words);
    }
    if (bytes % 8) { /* the last bytes, zero-padded to a word */
        uint8_t last[8] = {0};
        memcpy(last, p + 8 * words, bytes % 8);
        s += word_term(word_at(last), words);
    }
    return s;
}

static uint64_t hash_tensor(uint64_t h, const tlm_st_tensor *t, bool legacy) {
    char shape[96];
    shape_text(shape, sizeof shape, t->ndim, t->shape);
    h = fnv_str(h, t->name);
    h = fnv_str(h, tlm_dtype_name(t->dtype));
    h = fnv_str(h, shape);
    size_t bytes = tlm_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) bytes *= (size_t)t->shape[d];
    if (legacy) return tlm_fnv1a(h, t->data, bytes);
    uint8_t sum[8];
    tlm_put_le64(sum, data_sum(t->data, bytes));
    return tlm_fnv1a(h, sum, sizeof sum);
}

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const tlm_st_meta *)a)->key, ((const tlm_st_meta *)b)->key);
}

/* The checksum of the tensors and of the metadata but its "checksum" entry
 * (sorted by key: independent of how a writer orders them), as the entry
 * holds it; legacy: as checkpoints before sum64 held it. */
static bool checksum_text(const tlm_st_tensor *ts, int nt, const tlm_st_meta *meta, int nm, bool legacy,
                          char out[TLM_CKPT_CHECKSUM_LEN]) {
    uint64_t h = TLM_FNV_OFFSET;
    for (int i = 0; i < nt; i++) h = hash_tensor(h, &ts[i], legacy);
    tlm_st_meta *sorted = malloc((size_t)(nm > 0 ? nm : 1) * sizeof *sorted);
    if (!sorted) return false;
    memcpy(sorted, meta, (size_t)nm * sizeof *sorted);
    qsort(sorted, (size_t)nm, sizeof *sorted, cmp_meta);
    for (int i = 0; i < nm; i++) {
        if (!strcmp(sorted[i].key, "checksum")) continue;
        h = fnv_str(h, sorted[i].key);
        h = fnv_str(h, sorted[i].value);
    }
    free(sorted);
    snprintf(out, TLM_CKPT_CHECKSUM_LEN, "%s%016" PRIx64, legacy ? "" : SUM_PREFIX, h);
    return true;
}

bool tlm_ckpt_checksum(const tlm_st_tensor *ts, int nt, const tlm_st_meta *meta, int nm,
                       char out[TLM_CKPT_CHECKSUM_LEN]) {
    return checksum_text(ts, nt, meta, nm, false, out);
}

/* ---- writing ---- */

bool tlm_ckpt_file_is_checkpoint(const char *path) {
    tlm_err err = {""};
    int fd = tlm_open_regular(path, &err);
    if (fd < 0) return false;
    uint8_t len8[8];
    char *header = NULL;
    bool found = false;
    if (read(fd, len8, sizeof len8) == (ssize_t)sizeof len8) {
        uint64_t len = tlm_get_le64(len8);
        const char *want = "\"" TLM_CKPT_FORMAT "\"";
        if (len >= 2 && len <= (64u << 20) && (header = malloc(len)) && read(fd, header, len) == (ssize_t)len &&
            header[0] == '{')
            found = memmem(header, len, want, strlen(want)) != NULL;
    }
    free(header);
    close(fd);
    return found;
}

/* ---- the checkpoint written atomically (atomic_file.h) ---- */

/* The checkpoint is written and fsynced to PATH.tmp.XXXXXX, then renamed
 * over PATH: the old checkpoint stays whole until the new one is, and a
 * crash leaves only temporaries that tlm_remove_stale_temps knows. (Its own
 * writes, not tlm_st_write's, so the test hook can stop between the write
 * and the rename.) */
static bool write_atomic(const char *path, const tlm_st_tensor *ts, int n, const tlm_st_meta *meta, int nmeta,
                         tlm_err *err) {
    tlm_atomic_file f;
    if (!tlm_atomic_open(&f, path, err)) return false;
    if (tlm_test_hook("ckpt_write")) {
        long long bytes = 0;
        for (int i = 0; i < n; i++) {
            long long nb = (long long)tlm_dtype_size(ts[i].dtype);
            for (int d = 0; d < ts[i].ndim; d++) nb *= ts[i].shape[d];
            bytes += nb;
        }
        tlm_test_kill_past(bytes / 2);
    }
    tlm_err e = {""};
    if (tlm_st_write_fd(f.fd, f.tmp, ts, n, meta, nmeta, &e) != 0) {
        tlm_atomic_abort(&f);
        return tlm_fail(err, "%s", e.msg);
    }
    tlm_test_kill_at("ckpt_rename");
    if (tlm_test_hook("ckpt_signals")) { /* test-only: Ctrl-C twice as the file is written, before its rename */
        raise(SIGINT);
        raise(SIGINT);
    }
    return tlm_atomic_commit(&f, err);
}

bool tlm_ckpt_save(const char *path, const tlm_trainer *t, const tlm_run_state *st, const tlm_st_meta *extra,
                   int nextra, tlm_err *err) {
    const tlm_model *m = t->model;
    const tlm_so *so = m->so;
    int np = (int)so->header->nparams;
    bool adamw = t->settings.optimizer == TLM_OPT_ADAMW;
    int nstate = adamw ? 2 : 1;
    int nslow = t->grad_sum ? t->nslow : 0;
    int nnames = np * nstate + nslow;
    int ntensors = np * (1 + nstate) + nslow + 3;
    tlm_st_tensor *ts = calloc((size_t)ntensors, sizeof *ts);
    char **names = calloc((size_t)nnames + 1, sizeof *names);
    enum { NMETA_OWN = 10 };
    char *config = NULL;
    tlm_st_meta own[NMETA_OWN];
    bool ok = false;
    if (!ts || !names) {
        tlm_fail(err, "out of memory writing the checkpoint");
        goto out;
    }

    /* The parameters under their own names, then the optimizer's state per
     * parameter, as torch.optim names it. */
    int k = 0;
    for (int i = 0; i < np; i++) {
        const tlm_abi_param *p = &so->params[i];
        tlm_st_tensor base = {.name = tlm_so_str(so, p->name),
                              .dtype = TLM_F32,
                              .ndim = (int)p->ndim,
                              .shape = {p->shape[0], p->shape[1]},
                              .data = m->params + p->offset};
        ts[k++] = base;
        for (int s = 0; s < nstate; s++) {
            const char *kind = !adamw ? "momentum_buffer" : s == 0 ? "exp_avg" : "exp_avg_sq";
            const float *state = s == 0 ? t->m : t->v;
            size_t len = strlen(base.name) + 32;
            char *name = names[i * nstate + s] = malloc(len);
            if (!name) {
                tlm_fail(err, "out of memory writing the checkpoint");
                goto out;
            }
            snprintf(name, len, "optimizer.%s.%s", kind, base.name);
            ts[k] = base;
            ts[k].name = name;
            ts[k].data = state + p->offset;
            k++;
        }
    }
    /* Parameters updated every few steps (hope_attention's slower levels)
     * carry the gradients summed since their last update. */
    for (int i = 0; i < nslow; i++) {
        const tlm_abi_param *p = &so->params[t->slow[i]];
        const char *pname = tlm_so_str(so, p->name);
        size_t len = strlen(pname) + 32;
        char *name = names[np * nstate + i] = malloc(len);
        if (!name) {
            tlm_fail(err, "out of memory writing the checkpoint");
            goto out;
        }
        snprintf(name, len, "optimizer.grad_sum.%s", pname);
        ts[k++] = (tlm_st_tensor){.name = name,
                                  .dtype = TLM_F32,
                                  .ndim = (int)p->ndim,
                                  .shape = {p->shape[0], p->shape[1]},
                                  .data = t->grad_sum + p->offset};
    }
    int64_t step = st->step, tokens = st->tokens_seen, rng[4];
    tlm_rng_save(&st->data_rng, rng);
    ts[k++] = (tlm_st_tensor){.name = "train.step", .dtype = TLM_I64, .ndim = 1, .shape = {1}, .data = &step};
    ts[k++] = (tlm_st_tensor){.name = "train.tokens_seen", .dtype = TLM_I64, .ndim = 1, .shape = {1}, .data = &tokens};
    ts[k++] = (tlm_st_tensor){.name = "train.data_rng", .dtype = TLM_I64, .ndim = 1, .shape = {4}, .data = rng};

    config = tlm_ckpt_config_json(so);
    if (!config) {
        tlm_fail(err, "out of memory writing the checkpoint");
        goto out;
    }
    char abi[16], fp[24], sstep[24], stokens[24], elapsed[32], sum[TLM_CKPT_CHECKSUM_LEN];
    snprintf(abi, sizeof abi, "%u", so->header->version);
    snprintf(fp, sizeof fp, "%016" PRIx64, tlm_param_fingerprint(so));
    snprintf(sstep, sizeof sstep, "%" PRId64, step);
    snprintf(stokens, sizeof stokens, "%" PRId64, tokens);
    snprintf(elapsed, sizeof elapsed, "%.3f", st->elapsed);
    int nm = 0;
    own[nm++] = (tlm_st_meta){"format", TLM_CKPT_FORMAT};
    own[nm++] = (tlm_st_meta){"model", tlm_so_str(so, so->config->name)};
    own[nm++] = (tlm_st_meta){"abi_version", abi};
    own[nm++] = (tlm_st_meta){"param_fingerprint", fp};
    own[nm++] = (tlm_st_meta){"step", sstep};
    own[nm++] = (tlm_st_meta){"tokens_seen", stokens};
    own[nm++] = (tlm_st_meta){"elapsed", elapsed};
    own[nm++] = (tlm_st_meta){"optimizer", tlm_enum_name(&tlm_optimizer_enum, t->settings.optimizer)};
    own[nm++] = (tlm_st_meta){"config", config};
    /* tlm_st_write takes the entries by value, in one array: ours, the
     * checksum, the caller's */
    tlm_st_meta *flat = malloc((size_t)(nm + 1 + nextra) * sizeof *flat);
    if (!flat) {
        tlm_fail(err, "out of memory writing the checkpoint");
        goto out;
    }
    for (int i = 0; i < nm; i++) flat[i] = own[i];
    flat[nm++] = (tlm_st_meta){"checksum", ""}; /* left out of the sum */
    for (int i = 0; i < nextra; i++) flat[nm + i] = extra[i];
    if (!tlm_ckpt_checksum(ts, ntensors, flat, nm + nextra, sum)) {
        free(flat);
        tlm_fail(err, "out of memory writing the checkpoint");
        goto out;
    }
    flat[nm - 1].value = sum;
    ok = write_atomic(path, ts, ntensors, flat, nm + nextra, err);
    free(flat);
out:
    if (names)
        for (int i = 0; i < nnames; i++) free(names[i]);
    free(names);
    free(ts);
    free(config);
    return ok;
}

/* ---- reading ---- */

static bool verify_checksum(const tlm_st_file *f, const char *path, tlm_err *err) {
    const char *want = tlm_st_meta_get(f, "checksum");
    if (!want) return tlm_fail(err, "%s: no checksum in the metadata (not written by tlm-run?)", path);
    int nt = tlm_st_count(f), nm = tlm_st_meta_count(f);
    tlm_st_tensor *ts = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *ts);
    tlm_st_meta *meta = malloc((size_t)(nm > 0 ? nm : 1) * sizeof *meta);
    char got[TLM_CKPT_CHECKSUM_LEN];
    bool ok = ts && meta;
    for (int i = 0; ok && i < nt; i++) ts[i] = *tlm_st_at(f, i);
    for (int i = 0; ok && i < nm; i++) meta[i] = *tlm_st_meta_at(f, i);
    ok = ok && checksum_text(ts, nt, meta, nm, strncmp(want, SUM_PREFIX, strlen(SUM_PREFIX)) != 0, got);
    free(ts);
    free(meta);
    if (!ok) return tlm_fail(err, "%s: out of memory", path);
    if (strcmp(got, want) != 0)
        return tlm_fail(err, "%s: checksum mismatch: the file is damaged (or was edited)", path);
    return true;
}

/* The first parameter whose tensor is missing or has another shape. */
static bool describe_difference(const tlm_st_file *f, const tlm_so *so, const char *path, tlm_err *err) {
    const char *model = tlm_so_str(so, so->config->name);
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        const char *name = tlm_so_str(so, p->name);
        const tlm_st_tensor *t = tlm_st_find(f, name);
        char here[96], there[96];
        shape_text(here, sizeof here, (int)p->ndim, p->shape);
        if (!t)
            return tlm_fail(err, "%s: written for a different `%s`: it has no %s (was the model recompiled?)", path,
                            model, name);
        shape_text(there, sizeof there, t->ndim, t->shape);
        if (t->dtype != TLM_F32 || strcmp(here, there) != 0)
            return tlm_fail(err,
                            "%s: written for a different `%s`: %s is %s %s there, F32 %s here (was the model "
                            "recompiled?)",
                            path, model, name, tlm_dtype_name(t->dtype), there, here);
    }
    return tlm_fail(err, "%s: written for a different `%s` (its parameter table differs)", path, model);
}

/* Every parameter present as F32 with its shape: the fingerprint says so for
 * the names and shapes the writer recorded; this checks the tensors. */
static bool params_match(const tlm_st_file *f, const tlm_so *so) {
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        const tlm_st_tensor *t = tlm_st_find(f, tlm_so_str(so, p->name));
        if (!t || t->dtype != TLM_F32 || t->ndim != (int)p->ndim || t->shape[0] != p->shape[0] ||
            (p->ndim == 2 && t->shape[1] != p->shape[1]))
            return false;
    }
    return true;
}

/* The metadata entry key as a whole number (decimal digits alone, in
 * range), or -1: absent, empty, signed, or anything else. */
static int64_t meta_whole_number(const tlm_st_file *f, const char *key) {
    const char *s = tlm_st_meta_get(f, key);
    char *end;
    errno = 0;
    long long v = s && *s >= '0' && *s <= '9' ? strtoll(s, &end, 10) : -1;
    return v >= 0 && !*end && errno == 0 ? (int64_t)v : -1;
}

tlm_st_file *tlm_ckpt_open(const char *path, const tlm_so *so, tlm_err *err) {
    tlm_err e = {""};
    tlm_st_file *f = tlm_st_open(path, &e);
    if (!f) {
        tlm_fail(err, "%s", e.msg);
        return NULL;
    }
    const char *format = tlm_st_meta_get(f, "format");
    const char *model = tlm_st_meta_get(f, "model");
    const char *abi = tlm_st_meta_get(f, "abi_version");
    const int64_t abi_version = meta_whole_number(f, "abi_version"); /* -1: not a version */
    const char *fp = tlm_st_meta_get(f, "param_fingerprint");
    const char *name = tlm_so_str(so, so->config->name);
    char want_fp[24];
    snprintf(want_fp, sizeof want_fp, "%016" PRIx64, tlm_param_fingerprint(so));
    bool ok = false;
    if (!format || strcmp(format, TLM_CKPT_FORMAT) != 0)
        tlm_fail(err, "%s: not a tlm checkpoint (format `%s`, expected `%s`)", path, format ? format : "none",
                 TLM_CKPT_FORMAT);
    else if (!verify_checksum(f, path, err))
        ;
    else if (!model || strcmp(model, name) != 0)
        tlm_fail(err, "%s: a checkpoint of model `%s`, not `%s`", path, model ? model : "?", name);
    else if (abi_version < TLM_CKPT_OLDEST_ABI || abi_version > so->header->version)
        tlm_fail(err, "%s: written with ABI version %s; this tlm-run reads checkpoints of versions %u to %u", path,
                 abi ? abi : "?", TLM_CKPT_OLDEST_ABI, so->header->version);
    else if (!fp || strcmp(fp, want_fp) != 0 || !params_match(f, so)) describe_difference(f, so, path, err);
    else ok = tlm_ckpt_config_matches(tlm_st_meta_get(f, "config"), so, path, err);
    if (!ok) {
        tlm_st_close(f);
        return NULL;
    }
    return f;
}

bool tlm_ckpt_meta_step(const tlm_st_file *f, int64_t *step) {
    *step = meta_whole_number(f, "step");
    return *step >= 0;
}

bool tlm_ckpt_load_params(const tlm_st_file *f, tlm_model *m, tlm_err *err) {
    const tlm_so *so = m->so;
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        tlm_err e = {""};
        if (tlm_st_read(f, tlm_so_str(so, p->name), TLM_F32, (int)p->ndim, p->shape, m->params + p->offset, &e) != 0)
            return tlm_fail(err, "checkpoint: %s", e.msg);
    }
    return true;
}

static bool read_i64(const tlm_st_file *f, const char *name, int64_t n, int64_t *dst, tlm_err *err) {
    tlm_err e = {""};
    int64_t shape[1] = {n};
    if (tlm_st_read(f, name, TLM_I64, 1, shape, dst, &e) != 0) return tlm_fail(err, "checkpoint: %s", e.msg);
    return true;
}

bool tlm_ckpt_load_trainer(const tlm_st_file *f, tlm_trainer *t, tlm_run_state *st, tlm_err *err) {
    const tlm_so *so = t->model->so;
    bool adamw = t->settings.optimizer == TLM_OPT_ADAMW;
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        const char *pname = tlm_so_str(so, p->name);
        for (int s = 0; s < (adamw ? 2 : 1); s++) {
            const char *kind = !adamw ? "momentum_buffer" : s == 0 ? "exp_avg" : "exp_avg_sq";
            float *state = (s == 0 ? t->m : t->v) + p->offset;
            char name[512];
            snprintf(name, sizeof name, "optimizer.%s.%s", kind, pname);
            tlm_err e = {""};
            if (!tlm_st_find(f, name))
                return tlm_fail(err, "checkpoint: no %s (was it written with another optimizer?)", name);
            if (tlm_st_read(f, name, TLM_F32, (int)p->ndim, p->shape, state, &e) != 0)
                return tlm_fail(err, "checkpoint: %s", e.msg);
        }
    }
    for (int i = 0; t->grad_sum && i < t->nslow; i++) {
        const tlm_abi_param *p = &so->params[t->slow[i]];
        char name[512];
        snprintf(name, sizeof name, "optimizer.grad_sum.%s", tlm_so_str(so, p->name));
        tlm_err e = {""};
        if (tlm_st_read(f, name, TLM_F32, (int)p->ndim, p->shape, t->grad_sum + p->offset, &e) != 0)
            return tlm_fail(err, "checkpoint: %s", e.msg);
    }
    int64_t step, tokens, rng[4];
    if (!read_i64(f, "train.step", 1, &step, err) || !read_i64(f, "train.tokens_seen", 1, &tokens, err) ||
        !read_i64(f, "train.data_rng", 4, rng, err))
        return false;
    if (step < 0 || tokens < 0) return tlm_fail(err, "checkpoint: negative step or token count");
    /* Bounds no run reaches (steps <= 2^40, tlm_train_settings.h): a
     * count past them, checksummed or not, would overflow the token count
     * the next steps add to it, and the checkpoint they wrote would be
     * refused by this very check. */
    if (step > TLM_CKPT_MAX_STEP)
        return tlm_fail(err, "checkpoint: train.step is %" PRId64 ", past the %" PRId64 " steps any run takes", step,
                        (int64_t)TLM_CKPT_MAX_STEP);
    if (tokens > TLM_CKPT_MAX_TOKENS)
        return tlm_fail(err, "checkpoint: train.tokens_seen is %" PRId64 ", past the 2^62 tokens any run trains on",
                        tokens);
    /* the metadata says what eval, sample and --dry-run show, the tensors
     * what the run continues from: they must be one run state */
    const char *names[2] = {"step", "tokens_seen"};
    const int64_t tensors[2] = {step, tokens};
    for (int i = 0; i < 2; i++) {
        const char *meta = tlm_st_meta_get(f, names[i]);
        if (meta_whole_number(f, names[i]) != tensors[i])
            return tlm_fail(err, "checkpoint: the metadata's %s (%.40s) is not train.%s (%" PRId64 ")", names[i],
                            meta ? meta : "none", names[i], tensors[i]);
    }
    st->step = step;
    st->tokens_seen = tokens;
    if (!tlm_rng_load(&st->data_rng, rng))
        return tlm_fail(err, "checkpoint: train.data_rng is all zeros, a state no run has (the file is damaged)");
    const char *elapsed = tlm_st_meta_get(f, "elapsed");
    st->elapsed = elapsed ? strtod(elapsed, NULL) : 0;
    t->step = (long)step;
    return true;
}
