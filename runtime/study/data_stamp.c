#include "data_stamp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sha256.h"
#include "tlm_rt/data.h"
#include "tlm_rt/json.h"

/* The stamp's two forms built side by side: the hash (its bytes as they
 * always were, so that older runs' stamps still match) and the listing, a
 * line a file, for saying which file changed. */
typedef struct stamper {
    tlm_sha256_ctx h;
    tlm_strbuf listing;
} stamper;

static void stamp_stat(stamper *s, const char *name, const char *path, const struct stat *st) {
    char line[96];
    int n = snprintf(line, sizeof line, " %" PRId64 " %" PRId64 ".%09ld\n", (int64_t)st->st_size,
                     (int64_t)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
    tlm_sha256_update(&s->h, name, strlen(name));
    tlm_sha256_update(&s->h, line, (size_t)n);
    tlm_sb_printf(&s->listing, "%.*s %s\n", n - 2, line + 1, path); /* the same fields, then the path */
}

/* A file, or the files of a folder that training reads
 * (tlm_data_folder_files): its texts, else its shards. */
static void stamp_path(stamper *s, const char *path) {
    struct stat st;
    tlm_sha256_update(&s->h, path, strlen(path) + 1);
    if (stat(path, &st) != 0) {
        tlm_sha256_update(&s->h, "missing\n", 8);
        tlm_sb_printf(&s->listing, "missing %s\n", path);
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        stamp_stat(s, "", path, &st);
        return;
    }
    char **names;
    int n;
    bool shards;
    tlm_err ignored; /* a folder that names nothing: training says why */
    if (tlm_data_folder_files(path, &names, &n, &shards, &ignored) != 0) return;
    for (int i = 0; i < n; i++)
        if (stat(names[i], &st) == 0) stamp_stat(s, names[i], names[i], &st);
    tlm_data_texts_free(names, n);
}

char *study_data_stamp(const study_plan *plan, char hex[65]) {
    stamper s = {0};
    tlm_sha256_init(&s.h);
    const char *role[] = {"data", "val"};
    const char *one[] = {plan->data, plan->val};
    for (int i = 0; i < 2; i++) {
        tlm_sha256_update(&s.h, role[i], strlen(role[i]) + 1);
        if (one[i]) stamp_path(&s, one[i]); /* NULL: the bundled corpora */
    }
    char **lists[] = {plan->eval, plan->choices, plan->cloze};
    const int counts[] = {plan->neval, plan->nchoices, plan->ncloze};
    for (int l = 0; l < 3; l++) {
        tlm_sha256_update(&s.h, "list", 5);
        for (int i = 0; i < counts[l]; i++) stamp_path(&s, lists[l][i]);
    }
    uint8_t digest[TLM_SHA256_SIZE];
    tlm_sha256_final(&s.h, digest);
    tlm_sha256_hex(digest, hex);
    if (s.listing.oom || !s.listing.buf) {
        tlm_sb_free(&s.listing);
        return calloc(1, 1); /* no listing: study_data_change says nothing */
    }
    return s.listing.buf;
}

/* A listing's line [l, end): its head ("missing", or "SIZE SECONDS.NANOS")
 * and its path; false when it is neither (a damaged listing). */
typedef struct listed {
    const char *head, *path;
    int head_len, path_len;
} listed;

static bool split_line(const char *l, const char *end, listed *f) {
    const char *sp = memchr(l, ' ', (size_t)(end - l));
    if (sp && (sp - l != 7 || memcmp(l, "missing", 7) != 0)) sp = memchr(sp + 1, ' ', (size_t)(end - sp - 1));
    if (!sp) return false;
    *f = (listed){l, sp + 1, (int)(sp - l), (int)(end - sp - 1)};
    return true;
}

static bool is_missing(const listed *f) { return f->head_len == 7 && memcmp(f->head, "missing", 7) == 0; }

static int by_path(const void *x, const void *y) {
    const listed *a = x, *b = y;
    int c = memcmp(a->path, b->path, (size_t)(a->path_len < b->path_len ? a->path_len : b->path_len));
    return c ? c : (a->path_len > b->path_len) - (a->path_len < b->path_len);
}

/* A listing's lines sorted by path (malloc'd, *n of them), or NULL when a
 * line is neither form (a damaged listing) or memory runs out. */
static listed *sorted_lines(const char *text, int *n) {
    int lines = 0;
    for (const char *l = text; (l = strchr(l, '\n')); l++) lines++;
    listed *f = malloc((size_t)(lines ? lines : 1) * sizeof *f);
    if (!f) return NULL;
    *n = 0;
    for (const char *l = text, *end; (end = strchr(l, '\n')); l = end + 1)
        if (!split_line(l, end, &f[(*n)++])) {
            free(f);
            return NULL;
        }
    qsort(f, (size_t)*n, sizeof *f, by_path);
    return f;
}

/* How then's line t and now's line w of one path differ, said into why;
 * false when they do not. */
static bool line_change(const listed *t, const listed *w, char *why, size_t n_why) {
    int n = t->path_len;
    if (is_missing(t) != is_missing(w))
        snprintf(why, n_why, is_missing(w) ? "%.*s is gone" : "%.*s was missing then", n, t->path);
    else if (t->head_len != w->head_len || memcmp(t->head, w->head, (size_t)t->head_len) != 0) {
        long long then = atoll(t->head), now = atoll(w->head);
        if (then != now) snprintf(why, n_why, "%.*s changed since: %lld bytes then, %lld now", n, t->path, then, now);
        else snprintf(why, n_why, "%.*s changed since: the same size, modified at another time", n, t->path);
    } else return false;
    return true;
}

/* Both listings sorted by path and walked side by side: the first path
 * (in byte order) whose lines differ, or that one of them lacks. Sorted,
 * not searched line by line, as a folder of shards can list 100,000. */
bool study_data_change(const char *then, const char *now, char *why, size_t n_why) {
    int nt = 0, nw = 0;
    listed *t = sorted_lines(then, &nt), *w = t ? sorted_lines(now, &nw) : NULL;
    bool found = false;
    for (int i = 0, j = 0; w && !found && (i < nt || j < nw);) {
        int c = i == nt ? 1 : j == nw ? -1 : by_path(&t[i], &w[j]);
        if (c < 0) snprintf(why, n_why, "%.*s is no longer there", t[i].path_len, t[i].path), found = true;
        else if (c > 0) snprintf(why, n_why, "%.*s is new", w[j].path_len, w[j].path), found = true;
        else found = line_change(&t[i++], &w[j++], why, n_why);
    }
    free(t), free(w);
    return found;
}
