#include "corpus.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "evaluate.h"
#include "regular_file.h"
#include "shard.h"
#include "tokenizer.h"

#ifndef TLM_DATA_DIR
#define TLM_DATA_DIR "data"
#endif

/* The Austen novels but Persuasion, which is held out for validation. */
static const char *const train_files[] = {"emma.txt", "mansfield_park.txt", "northanger_abbey.txt",
                                          "pride_and_prejudice.txt", "sense_and_sensibility.txt"};
#define NTRAIN ((int)(sizeof train_files / sizeof *train_files))

const char *corpus_dir(void) {
    const char *env = getenv("TLM_DATA");
    return env && *env ? env : TLM_DATA_DIR;
}

/* ---- token shards ---- */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* A regular file that starts with the shard magic. */
static bool has_magic(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[8];
    bool yes = fread(magic, 1, 8, f) == 8 && !memcmp(magic, TLM_SHARD_MAGIC, 8);
    fclose(f);
    return yes;
}

typedef struct shard_set {
    int n;                 /* shards read so far */
    uint8_t tokenizer[32];
    int32_t eot;
    bool bytes_known;
    uint64_t text_bytes, fnv;
} shard_set;

/* Reads all of fd from off in chunks: every id below both vocabularies,
 * the ids' bytes into the fingerprint. */
static bool scan_ids(int fd, const tlm_shard *s, const char *path, int64_t vocab, uint64_t *fnv, tlm_err *err) {
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) return tlm_fail(err, "%s: out of memory", path);
    uint64_t total = s->count * s->width, done = 0;
    bool ok = true;
    while (ok && done < total) {
        size_t want = total - done < CHUNK ? (size_t)(total - done) : CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)(s->header_size + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0 || got % s->width) {
            ok = tlm_fail(err, "%s: read error: %s", path, got < 0 ? strerror(errno) : "the file shrank");
            break;
        }
        *fnv = tlm_fnv1a(*fnv, buf, (size_t)got);
        size_t n = (size_t)got / s->width;
        uint32_t top = 0;
        if (s->width == 2)
            for (size_t i = 0; i < n; i++) {
                uint32_t id = (uint32_t)buf[2 * i] | (uint32_t)buf[2 * i + 1] << 8;
                top = id > top ? id : top;
            }
        else
            for (size_t i = 0; i < n; i++) {
                const uint8_t *p = buf + 4 * i;
                uint32_t id = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                top = id > top ? id : top;
            }
        if (top >= s->vocab || top >= (uint64_t)vocab) /* find the first offender for the message */
            for (size_t i = 0; i < n; i++) {
                const uint8_t *p = buf + s->width * i;
                uint32_t id = s->width == 2
                                  ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                                  : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                unsigned long long at = (unsigned long long)(done / s->width + i + 1);
                if (id >= s->vocab) {
                    ok = tlm_fail(err, "%s: token %llu is %u, outside the shard's vocabulary (%u)", path, at, id,
                                  s->vocab);
                    break;
                }
                if (id >= (uint64_t)vocab) {
                    ok = tlm_fail(err, "%s: token %llu is %u, but the model's vocabulary has only %lld tokens", path,
                                  at, id, (long long)vocab);
                    break;
                }
            }
        done += (uint64_t)got;
    }
    free(buf);
    return ok;
}

/* A shard is read through its mapping: cut short (truncated, or replaced
 * in place by `cp`) while a command reads it, the pages past its new end
 * raise SIGBUS, which killed the process ("Bus error", exit 135). A fault
 * inside a shard's mapping is said in one line instead, exit 1 (a
 * training's last checkpoint is intact; one being written is a temporary,
 * removed at the next start); any other SIGBUS gets its default action
 * back and recurs as before. Only async-signal-safe calls; the table of
 * mappings grows only while the data loads, before any window is read. */
typedef struct mapped_range {
    uintptr_t lo, hi;
} mapped_range;
static mapped_range *mapped;
static volatile size_t nmapped;

static void shard_cut_short(int sig, siginfo_t *info, void *context) {
    (void)context;
    uintptr_t at = (uintptr_t)info->si_addr;
    /* a fault's address only: sent by kill (si_code <= 0), si_addr is not one */
    for (size_t i = 0; i < nmapped && info->si_code > 0; i++) {
        if (at < mapped[i].lo || at >= mapped[i].hi) continue;
        static const char msg[] = "tlm-run: a token shard it was reading was cut short or replaced (SIGBUS); "
                                  "stopping (a training's last checkpoint is intact)\n";
        ssize_t written = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)written;
        _exit(1);
    }
    /* not ours (another mapping's fault, or kill -BUS): ends the process
     * as it would have, once the handler returns */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Watches [map, map + size) for SIGBUS; false when out of memory (the
 * shard is then read unwatched, as before). */
static bool watch_mapped_shard(const void *map, size_t size) {
    static size_t cap;
    if (nmapped == cap) {
        size_t ncap = cap ? 2 * cap : 16;
        mapped_range *grown = realloc(mapped, ncap * sizeof *grown);
        if (!grown) return false;
        mapped = grown, cap = ncap;
    }
    mapped[nmapped] = (mapped_range){(uintptr_t)map, (uintptr_t)map + size};
    nmapped = nmapped + 1;
    if (nmapped == 1) {
        struct sigaction sa = {0};
        sa.sa_sigaction = shard_cut_short;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
    }
    return true;
}

/* Checks one shard and adds it to ds, mapped. */
static bool load_shard(tlm_dataset *ds, const char *path, int64_t vocab, shard_set *set, tlm_err *err) {
    int fd = tlm_open_regular(path, err);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        tlm_fail(err, "%s: %s", path, strerror(errno));
        close(fd);
        return false;
    }
    uint8_t head[TLM_SHARD_HEADER_SIZE] = {0};
    size_t size = (size_t)st.st_size;
    size_t want = size < sizeof head ? size : sizeof head;
    tlm_shard s;
    bool ok = pread(fd, head, want, 0) == (ssize_t)want && tlm_shard_parse(head, size, path, &s, err);
    if (!ok && !err->msg[0]) tlm_fail(err, "%s: read error: %s", path, strerror(errno));
    if (ok && set->n > 0 && memcmp(s.tokenizer, set->tokenizer, 32))
        ok = tlm_fail(err, "%s: made with another tokenizer than the shards before it", path);
    else if (ok && set->n > 0 && s.eot != set->eot)
        ok = tlm_fail(err, "%s: end-of-text id %d, the shards before it have %d", path, (int)s.eot, (int)set->eot);
    if (ok) ok = scan_ids(fd, &s, path, vocab, &set->fnv, err);
    /* The scan leaves the shard in the page cache in large folios (read
     * ahead), and a window's page fault would map a whole folio: drop them,
     * so that a fault maps about the pages a window reads. */
    if (ok) (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    void *map = NULL;
    if (ok && s.count > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            map = NULL;
            ok = tlm_fail(err, "%s: cannot map the shard: %s", path, strerror(errno));
        } else {
            (void)madvise(map, size, MADV_RANDOM); /* windows are drawn at random: no read-ahead */
            (void)watch_mapped_shard(map, size);
        }
    }
    close(fd);
    if (ok && map &&
        tlm_data_add_segment(ds, map, size, (const uint8_t *)map + s.header_size, s.count, s.width, err) != 0)
        ok = false;
    if (!ok) return false;
    if (set->n == 0) {
        memcpy(set->tokenizer, s.tokenizer, 32);
        set->eot = s.eot;
        set->bytes_known = true;
    }
    set->n++;
    set->bytes_known = set->bytes_known && s.version >= 2;
    set->text_bytes += s.bytes;
    return true;
}

/* A folder's shards. 1: it has .txt files (text), 0: loaded, -1: error. */
static int load_shard_folder(tlm_dataset *ds, const char *path, int64_t vocab, shard_set *set, tlm_err *err) {
    char **names;
    int n;
    bool shards;
    if (tlm_data_folder_files(path, &names, &n, &shards, err) != 0) return -1;
    int rc = shards ? 0 : 1;
    for (int i = 0; i < n && shards && !rc; i++)
        if (!load_shard(ds, names[i], vocab, set, err)) rc = -1;
    tlm_data_texts_free(names, n);
    return rc;
}

/* path as shards: 0 loaded, 1 not shards (text), -1 error. */
static int load_shards(tlm_dataset *ds, const char *path, int64_t vocab, corpus_info *info, tlm_err *err) {
    struct stat st;
    shard_set set = {.fnv = TLM_FNV_OFFSET, .eot = -1};
    int rc;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) rc = load_shard_folder(ds, path, vocab, &set, err);
    else if (ends_with(path, ".bin") || has_magic(path)) rc = load_shard(ds, path, vocab, &set, err) ? 0 : -1;
    else rc = 1;
    if (rc != 0) {
        tlm_data_free(ds);
        return rc;
    }
    ds->nfiles = set.n;
    info->shards = true;
    tlm_tok_hash_hex(set.tokenizer, info->tokenizer);
    info->eot = set.eot;
    info->text_bytes = set.bytes_known ? set.text_bytes : 0;
    snprintf(info->fingerprint, sizeof info->fingerprint, "shards %zu:%016" PRIx64, ds->n, set.fnv);
    return 0;
}

int corpus_default_files(enum corpus_role role, char paths[][4096]) {
    _Static_assert(NTRAIN <= CORPUS_MAX_DEFAULT, "room for the bundled training texts");
    if (role == CORPUS_VALID) {
        snprintf(paths[0], 4096, "%s/austen/persuasion.txt", corpus_dir());
        return 1;
    }
    for (int i = 0; i < NTRAIN; i++) snprintf(paths[i], 4096, "%s/austen/%s", corpus_dir(), train_files[i]);
    return NTRAIN;
}

int corpus_files(const char *path, enum corpus_role role, char ***names, int *n, corpus_source *source, tlm_err *err) {
    struct stat st;
    if (path && *path && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        bool shards;
        if (tlm_data_folder_files(path, names, n, &shards, err) != 0) return -1;
        *source = shards ? CORPUS_FOLDER_SHARDS : CORPUS_FOLDER_TEXTS;
        return 0;
    }
    char bundled[CORPUS_MAX_DEFAULT][4096];
    int count = path && *path ? 1 : corpus_default_files(role, bundled);
    *source = path && *path ? CORPUS_FILE : CORPUS_BUNDLED;
    *names = calloc((size_t)count, sizeof **names), *n = 0;
    for (int i = 0; *names && i < count; i++) {
        if (!((*names)[i] = strdup(*source == CORPUS_FILE ? path : bundled[i]))) break;
        (*n)++;
    }
    if (*n == count) return 0;
    tlm_data_texts_free(*names, *n);
    return tlm_fail(err, "out of memory"), -1;
}

bool corpus_val_in_data(const char *data, const char *val, char *shared, size_t n) {
    char **tn, **vn;
    int ntrain, nval;
    corpus_source source;
    tlm_err ignored; /* a listing that fails: the loaders said why */
    if (n) shared[0] = '\0';
    if (corpus_files(data, CORPUS_TRAIN, &tn, &ntrain, &source, &ignored) != 0) return false;
    if (corpus_files(val, CORPUS_VALID, &vn, &nval, &source, &ignored) != 0) {
        tlm_data_texts_free(tn, ntrain);
        return false;
    }
    bool found = false;
    for (int v = 0; v < nval && !found; v++)
        for (int t = 0; t < ntrain && !found; t++)
            if ((found = tlm_same_file(vn[v], tn[t]))) snprintf(shared, n, "%s", vn[v]);
    tlm_data_texts_free(tn, ntrain);
    tlm_data_texts_free(vn, nval);
    return found;
}

/* corpus_load's reading, before its checks: false with a reason (nothing
 * held). */
static bool load_unchecked(tlm_dataset *ds, const char *path, enum corpus_role role, int64_t vocab, char *name,
                           size_t namelen, corpus_info *info, tlm_err *err) {
    tlm_err e = {""};
    *info = (corpus_info){.eot = -1};
    snprintf(info->tokenizer, sizeof info->tokenizer, "bytes");
    *ds = (tlm_dataset){0};
    int rc = path && *path ? load_shards(ds, path, vocab, info, &e) : 1;
    if (rc <= 0) {
        if (rc == 0 && ds->nfiles > 1) snprintf(name, namelen, "%s (%d shards)", path, ds->nfiles);
        else snprintf(name, namelen, "%s", path);
    } else if (path && *path) {
        rc = tlm_data_load(ds, path, &e);
        if (rc == 0 && ds->nfiles > 1) snprintf(name, namelen, "%s (%d files)", path, ds->nfiles);
        else snprintf(name, namelen, "%s", path);
    } else {
        char paths[CORPUS_MAX_DEFAULT][4096];
        const char *list[CORPUS_MAX_DEFAULT];
        int n = corpus_default_files(role, paths);
        for (int i = 0; i < n; i++) list[i] = paths[i];
        rc = tlm_data_load_files(ds, list, n, &e);
        if (n == 1) snprintf(name, namelen, "%s", list[0]);
        else snprintf(name, namelen, "%s/austen (%d novels)", corpus_dir(), n);
    }
    if (rc != 0 && !(path && *path)) { /* the default data: where it was looked for, and how to name other */
        const char *env = getenv("TLM_DATA");
        tlm_fail(err, "%s (the default %s data, in %s%s; --data FILE names other)", e.msg,
                 role == CORPUS_TRAIN ? "training" : "validation", corpus_dir(), env && *env ? ", from $TLM_DATA" : "");
        return false;
    }
    if (rc != 0) {
        tlm_fail(err, "%s", e.msg);
        return false;
    }
    return true;
}

/* corpus_load's checks of what load_unchecked read: false with a reason,
 * ds freed. */
static bool check_loaded(tlm_dataset *ds, int64_t T, int64_t vocab, const char *name, corpus_info *info, tlm_err *err) {
    tlm_err e = {""};
    if (tlm_data_check(ds, (int)T, &e) != 0) {
        tlm_fail(err, "%s: %s", name, e.msg);
        tlm_data_free(ds);
        return false;
    }
    if (info->shards) return true; /* the ids were checked as they were read */
    int top = tlm_data_max_byte(ds);
    if (top >= vocab) {
        tlm_fail(err, "%s: holds byte %d, but the model's vocabulary has only %lld tokens", name, top,
                 (long long)vocab);
        tlm_data_free(ds);
        return false;
    }
    info->text_bytes = ds->n;
    return true;
}

bool corpus_load(tlm_dataset *ds, const char *path, enum corpus_role role, int64_t T, int64_t vocab, char *name,
                 size_t namelen, corpus_info *info, tlm_err *err) {
    corpus_info local;
    if (!info) info = &local;
    return load_unchecked(ds, path, role, vocab, name, namelen, info, err) &&
           check_loaded(ds, T, vocab, name, info, err);
}

bool corpus_load_for(tlm_dataset *ds, const char *path, int64_t T, int64_t vocab, char *name, size_t namelen,
                     corpus_info *info, const char *ckpt_tokenizer, const char *ckpt_path, const char *tokenizer_path,
                     tlm_err *err) {
    if (!load_unchecked(ds, path, CORPUS_VALID, vocab, name, namelen, info, err)) return false;
    if (!corpus_same_tokenizer(info, name, path, ckpt_tokenizer, ckpt_path, tokenizer_path, err)) {
        tlm_data_free(ds);
        return false;
    }
    return check_loaded(ds, T, vocab, name, info, err);
}

const char *corpus_tokenize_input(const char *path) { return path && *path ? path : "TEXT"; }

const char *corpus_tokenize_output(const char *path, char *buf, size_t len) {
    if (!path || !*path) return "corpus.bin";
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    /* "/", and "." or ".." (a folder named by where it is) */
    if (start == end || (end - start <= 2 && strspn(path + start, ".") >= end - start)) return "corpus.bin";
    snprintf(buf, len, "%.*s.bin", (int)(end - start), path + start);
    return buf;
}

bool corpus_same_tokenizer(const corpus_info *info, const char *name, const char *path, const char *ckpt_tokenizer,
                           const char *ckpt_path, const char *tokenizer_path, tlm_err *err) {
    if (!strcmp(info->tokenizer, ckpt_tokenizer)) return true;
    bool data_bytes = !strcmp(info->tokenizer, "bytes"), ckpt_bytes = !strcmp(ckpt_tokenizer, "bytes");
    char shard[CORPUS_SHARD_NAME_BYTES];
    if (data_bytes && !info->shards)
        return tlm_fail(err,
                        "%s is text, but %s%s reads tokens of tokenizer %.16s...: tokenize it first: tlm-run "
                        "tokenize --tokenizer %s %s -o %s",
                        name, *ckpt_path ? "the checkpoint " : "the run", ckpt_path, ckpt_tokenizer,
                        tokenizer_path ? tokenizer_path : "TOKENIZER", corpus_tokenize_input(path),
                        corpus_tokenize_output(path, shard, sizeof shard));
    if (!*ckpt_path)
        return tlm_fail(err, "%s: tokenized %s%s, but the run's tokenizer is %s", name,
                        data_bytes ? "as " : "with tokenizer ", info->tokenizer, ckpt_tokenizer);
    return tlm_fail(err,
                    "%s: tokenized %s%s, but the checkpoint %s was trained on %s%s (a model reads only the tokens "
                    "it was trained on)",
                    name, data_bytes ? "as " : "with tokenizer ", info->tokenizer, ckpt_path,
                    ckpt_bytes ? "" : "tokenizer ", ckpt_tokenizer);
}

bool corpus_fits_model(const corpus_info *info, const char *name, const tlm_so *so, tlm_err *err) {
    if (!so->tokenizer_path) return true;
    char hex[65];
    tlm_tok_hash_hex(so->config->tokenizer_hash, hex);
    if (!strcmp(info->tokenizer, hex)) return true;
    if (!info->shards)
        return tlm_fail(err,
                        "%s is text, but the model reads tokens of its tokenizer %s; tokenize it first: tlm-run "
                        "tokenize --tokenizer %s DATA -o corpus.bin",
                        name, so->tokenizer_path, so->tokenizer_path);
    return tlm_fail(err, "%s: tokenized with tokenizer %.16s..., but the model's tokenizer %s is %.16s...", name,
                    info->tokenizer, so->tokenizer_path, hex);
}

/* --ckpt names the file itself when it is one, or when it ends in
 * .safetensors (so that a missing one is reported as that file). */
static bool is_file(const char *p) {
    struct stat st;
    size_t n = strlen(p), k = strlen(".safetensors");
    if (n > k && !strcmp(p + n - k, ".safetensors") && !(stat(p, &st) == 0 && S_ISDIR(st.st_mode))) return true;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

bool checkpoint_dir(char *out, size_t n, const char *ckpt, const char *model) {
    int len;
    if (!ckpt) len = snprintf(out, n, "checkpoints/%s", model);
    else if (is_file(ckpt)) {
        const char *slash = strrchr(ckpt, '/');
        if (!slash) len = snprintf(out, n, ".");
        else len = snprintf(out, n, "%.*s", (int)(slash - ckpt) > 0 ? (int)(slash - ckpt) : 1, ckpt);
    } else len = snprintf(out, n, "%s", ckpt);
    return len >= 0 && (size_t)len < n;
}

bool checkpoint_path(char *out, size_t n, const char *ckpt, const char *model) {
    if (ckpt && is_file(ckpt)) {
        int len = snprintf(out, n, "%s", ckpt);
        return len >= 0 && (size_t)len < n;
    }
    char dir[4096];
    if (!checkpoint_dir(dir, sizeof dir, ckpt, model)) {
        snprintf(out, n, "%s", dir);
        return false;
    }
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
    int k = snprintf(out, n, "%s%s%s", dir, !strcmp(dir, "/") ? "" : "/", TLM_CKPT_FILE); /* "/": no "//" */
    return k >= 0 && (size_t)k < n;
}
