/* Training data: text read as bytes, or memory-mapped token segments;
 * load, check, sample windows. */
#include "tlm_rt/data.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "regular_file.h"
#include "tlm_rt/memory_limit.h"

/* Appends the whole file to *buf (grown with realloc). The file's size is
 * checked against what the process may still take first: text is read into
 * memory whole, and a file larger than that was read until the OOM killer
 * ended the process. The buffer grows to the size at once, and past it
 * only for a file that goes on (doubling from the start, or once the
 * buffer was full, held up to twice the text). */
static int append_file(uint8_t **buf, size_t *len, size_t *cap, const char *path, const tlm_memory_budget *budget,
                       tlm_err *err) {
    FILE *f = tlm_fopen_regular(path, err);
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0) {
        int64_t need = (int64_t)*len + (int64_t)st.st_size;
        if (need > budget->bytes) {
            char size[32], before[80] = "", room[32];
            tlm_fmt_bytes(size, sizeof size, (int64_t)st.st_size);
            if (*len) {
                char so_far[32];
                tlm_fmt_bytes(so_far, sizeof so_far, (int64_t)*len);
                snprintf(before, sizeof before, ", after %s from the files before it", so_far);
            }
            tlm_fmt_bytes(room, sizeof room, budget->bytes);
            fclose(f);
            tlm_fail(err,
                     "%s: the text (%s%s) does not fit in memory (%s available, %s): text is read whole; "
                     "split it into files that fit and pre-tokenize them into shards (tlm-run tokenize), which are "
                     "read from disk",
                     path, size, before, room, budget->source);
            return -1;
        }
        if (*cap < (size_t)need + 1) {
            uint8_t *nb = realloc(*buf, (size_t)need + 1);
            if (!nb) {
                fclose(f);
                tlm_fail(err, "%s: out of memory reading the file", path);
                return -1;
            }
            *buf = nb;
            *cap = (size_t)need + 1;
        }
    }
    for (;;) {
        if (*len == *cap) { /* full: only a file that grew, or that reports no size, goes on */
            int c = fgetc(f);
            if (c == EOF) break;
            size_t ncap = *cap ? *cap * 2 : 1 << 20;
            uint8_t *nb = realloc(*buf, ncap);
            if (!nb) {
                fclose(f);
                tlm_fail(err, "%s: out of memory reading the file", path);
                return -1;
            }
            *buf = nb;
            *cap = ncap;
            (*buf)[(*len)++] = (uint8_t)c;
        }
        size_t got = fread(*buf + *len, 1, *cap - *len, f);
        *len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        tlm_fail(err, "%s: read error: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}

static int load_list(tlm_dataset *ds, const char *const *paths, int npaths, const char *what, tlm_err *err) {
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    tlm_memory_budget budget;
    if (!tlm_memory_budget_read(&budget, err)) return -1;
    for (int i = 0; i < npaths; i++) {
        if (append_file(&buf, &len, &cap, paths[i], &budget, err) != 0) {
            free(buf);
            return -1;
        }
    }
    if (len == 0) {
        tlm_fail(err, "%s: no data (empty)", what);
        free(buf);
        return -1;
    }
    ds->bytes = buf;
    ds->n = len;
    ds->nfiles = npaths;
    return 0;
}

int tlm_data_load_files(tlm_dataset *ds, const char *const *paths, int npaths, tlm_err *err) {
    *ds = (tlm_dataset){0};
    if (npaths <= 0) {
        tlm_fail(err, "no data files given");
        return -1;
    }
    return load_list(ds, paths, npaths, npaths == 1 ? paths[0] : "data files", err);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bool tlm_data_is_text_name(const char *name) {
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".txt") == 0;
}

bool tlm_path_in_folder(const char *path, const char *folder) {
    struct stat f, parent;
    const char *slash = strrchr(path, '/');
    char dir[4200];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    return stat(folder, &f) == 0 && S_ISDIR(f.st_mode) && stat(dir, &parent) == 0 && f.st_dev == parent.st_dev &&
           f.st_ino == parent.st_ino;
}

static bool is_shard_name(const char *name) {
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".bin") == 0;
}

bool tlm_data_not_new_input(const char *flag, const char *out, const char *folder, tlm_err *err) {
    const char *slash = strrchr(out, '/'), *name = slash ? slash + 1 : out;
    if (access(out, F_OK) == 0 || !tlm_path_in_folder(out, folder)) return true;
    if (tlm_data_is_text_name(name))
        return tlm_fail(err,
                        "%s %s would become a text of %s (a folder's *.txt files are its texts): give it another name",
                        flag, out, folder);
    if (!is_shard_name(name)) return true;
  /* a new shard changes only a folder of shards: a folder with texts reads those */
    char **names;
    int n;
    bool shards;
    tlm_err ignored;
    if (tlm_data_folder_files(folder, &names, &n, &shards, &ignored) != 0) return true;
    tlm_data_texts_free(names, n);
    return !shards || tlm_fail(err,
                               "%s %s would become a shard of %s (a folder's *.bin files are its shards): give it "
                               "another name",
                               flag, out, folder);
}

void tlm_data_texts_free(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Whether a folder's entry is a folder itself (a link to one too): a data
 * folder's subfolders are not read, whatever their names, so a checkpoint
 * folder `--ckpt data/run.txt` does not become a text. */
static bool is_folder(const char *path, const struct dirent *e) {
    if (e->d_type == DT_DIR) return true;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) return false;
    char full[8192];
    struct stat st;
    snprintf(full, sizeof full, "%s/%s", path, e->d_name);
    return stat(full, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The files of folder path whose names keep() takes, as "path/name",
 * sorted bytewise (readdir's order is arbitrary: sorted, the data, and so
 * training, is the same on every machine); possibly none. -1 + message
 * when the folder cannot be listed. */
static int list_folder(const char *path, bool (*keep)(const char *name), char ***names_out, int *n_out, tlm_err *err) {
    DIR *dir = opendir(path);
    if (!dir) return tlm_fail(err, "%s: cannot open directory: %s", path, strerror(errno)), -1;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (!keep(e->d_name) || is_folder(path, e)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, (size_t)cap * sizeof *names);
            if (!nn) goto oom;
            names = nn;
        }
        size_t len = strlen(path) + 1 + strlen(e->d_name) + 1;
        if (!(names[n] = malloc(len))) goto oom;
        snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(dir);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *names_out = names, *n_out = n;
    return 0;
oom:
    closedir(dir);
    tlm_data_texts_free(names, n);
    return tlm_fail(err, "%s: out of memory listing the directory", path), -1;
}

int tlm_data_texts(const char *path, char ***names_out, int *n_out, tlm_err *err) {
    *names_out = NULL, *n_out = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        tlm_fail(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        char **names = malloc(sizeof *names);
        if (!names || !(names[0] = strdup(path))) {
            free(names);
            tlm_fail(err, "%s: out of memory", path);
            return -1;
        }
        *names_out = names, *n_out = 1;
        return 0;
    }
    if (list_folder(path, tlm_data_is_text_name, names_out, n_out, err) != 0) return -1;
    if (*n_out) return 0;
    free(*names_out), *names_out = NULL;
    return tlm_fail(err, "%s: no .txt files in this directory", path), -1;
}

int tlm_data_folder_files(const char *path, char ***names_out, int *n_out, bool *shards, tlm_err *err) {
    if (list_folder(path, tlm_data_is_text_name, names_out, n_out, err) != 0) return -1;
    *shards = *n_out == 0;
    if (!*shards) return 0;
    free(*names_out);
    if (list_folder(path, is_shard_name, names_out, n_out, err) != 0) return -1;
    if (*n_out) return 0;
    free(*names_out), *names_out = NULL;
    return tlm_fail(err, "%s: no .txt files or .bin token shards in this directory", path), -1;
}

int tlm_data_load(tlm_dataset *ds, const char *path, tlm_err *err) {
    *ds = (tlm_dataset){0};
    char **names;
    int n;
    if (tlm_data_texts(path, &names, &n, err) != 0) return -1;
    int rc = load_list(ds, (const char *const *)names, n, path, err);
    tlm_data_texts_free(names, n);
    return rc;
}

void tlm_data_free(tlm_dataset *ds) {
    free(ds->bytes);
    for (int i = 0; i < ds->nseg; i++)
        if (ds->seg[i].map) munmap(ds->seg[i].map, ds->seg[i].map_size);
    free(ds->seg);
    *ds = (tlm_dataset){0};
}

int tlm_data_add_segment(tlm_dataset *ds, void *map, size_t map_size, const uint8_t *tokens, uint64_t count,
                         uint32_t width, tlm_err *err) {
    tlm_data_segment *seg = realloc(ds->seg, (size_t)(ds->nseg + 1) * sizeof *seg);
    if (!seg || (width != 2 && width != 4)) {
        if (seg) ds->seg = seg;
        if (map) munmap(map, map_size);
        tlm_fail(err, seg ? "token width %u (2 or 4)" : "out of memory", width);
        return -1;
    }
    ds->seg = seg;
    seg[ds->nseg++] = (tlm_data_segment){
        .tokens = tokens, .count = count, .start = ds->n, .width = width, .map = map, .map_size = map_size};
    ds->n += (size_t)count;
    return 0;
}

static uint32_t seg_token(const tlm_data_segment *s, uint64_t i) {
    const uint8_t *p = s->tokens + i * s->width;
    return s->width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                         : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The segment holding token i: the last one starting at or before it. */
static int find_segment(const tlm_dataset *ds, size_t i) {
    int lo = 0, hi = ds->nseg - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (ds->seg[mid].start <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

uint32_t tlm_data_token(const tlm_dataset *ds, size_t i) {
    if (ds->bytes) return ds->bytes[i];
    const tlm_data_segment *s = &ds->seg[find_segment(ds, i)];
    return seg_token(s, i - s->start);
}

int tlm_data_check(const tlm_dataset *ds, int T, tlm_err *err) {
    if (T <= 0) {
        tlm_fail(err, "context length must be positive (got %d)", T);
        return -1;
    }
    if ((!ds->bytes && !ds->nseg) || ds->n < (size_t)T + 1) {
        tlm_fail(err, "data too short: %zu token%s, a window needs %d (context %d + 1)", ds->n, ds->n == 1 ? "" : "s",
                 T + 1, T);
        return -1;
    }
    return 0;
}

/* Tokens [start, start + T]: inputs the first T, targets the last T. */
static void window(const tlm_dataset *ds, size_t start, int T, int32_t *in, int32_t *tgt) {
    if (ds->bytes) {
        const uint8_t *src = ds->bytes + start;
        for (int t = 0; t < T; t++) {
            in[t] = src[t];
            tgt[t] = src[t + 1];
        }
        return;
    }
    int k = find_segment(ds, start);
    uint64_t j = start - ds->seg[k].start;
    for (int t = 0; t <= T; t++, j++) {
        while (j >= ds->seg[k].count) j -= ds->seg[k++].count; /* on into the next segment */
        int32_t id = (int32_t)seg_token(&ds->seg[k], j);
        if (t < T) in[t] = id;
        if (t > 0) tgt[t - 1] = id;
    }
}

int tlm_data_sample_batch(const tlm_dataset *ds, tlm_rng *rng, int B, int T, int32_t *inputs, int32_t *targets,
                          tlm_err *err) {
    if (tlm_data_check(ds, T, err) != 0) return -1;
    /* starts 0 .. n-T-1: the last window ends on the last byte */
    uint64_t nstarts = (uint64_t)(ds->n - (size_t)T);
    for (int b = 0; b < B; b++) {
        size_t start = (size_t)tlm_rng_below(rng, nstarts);
        window(ds, start, T, inputs + (size_t)b * T, targets + (size_t)b * T);
    }
    return 0;
}

size_t tlm_data_num_windows(const tlm_dataset *ds, int T) {
    if (T <= 0 || ds->n < 1) return 0;
    return (ds->n - 1) / (size_t)T;
}

int tlm_data_window(const tlm_dataset *ds, size_t i, int T, int32_t *inputs, int32_t *targets, tlm_err *err) {
    size_t nw = tlm_data_num_windows(ds, T);
    if (tlm_data_check(ds, T, err) != 0) return -1;
    if (i >= nw) {
        tlm_fail(err, "window %zu out of range (%zu windows of %d)", i, nw, T);
        return -1;
    }
    window(ds, i * (size_t)T, T, inputs, targets);
    return 0;
}
