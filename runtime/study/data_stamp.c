#include "data_stamp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sha256.h"
#include "tlm_rt/data.h"

/* The stamp's two forms built side by side: the hash (its bytes as they
 * always were, so that older runs' stamps still match) and the listing, a
 * line a file, for saying which file changed. */
typedef struct stamper {
    tlm_sha256_ctx h;
    char *listing;
    size_t len, cap;
    bool oom;
} stamper;

static void list_line(stamper *s, const char *fmt_size_time, const char *path) {
    size_t need = strlen(fmt_size_time) + strlen(path) + 2;
    if (s->oom) return;
    if (s->len + need + 1 > s->cap) {
        size_t cap = 2 * (s->len + need + 1) + 256;
        char *p = realloc(s->listing, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->listing = p, s->cap = cap;
    }
    s->len += (size_t)snprintf(s->listing + s->len, s->cap - s->len, "%s %s\n", fmt_size_time, path);
}

static void stamp_stat(stamper *s, const char *name, const char *path, const struct stat *st) {
    char line[96];
    int n = snprintf(line, sizeof line, " %" PRId64 " %" PRId64 ".%09ld\n", (int64_t)st->st_size,
                     (int64_t)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
    tlm_sha256_update(&s->h, name, strlen(name));
    tlm_sha256_update(&s->h, line, (size_t)n);
    line[n - 1] = '\0';
    list_line(s, line + 1, path);
}

/* A file, or the files of a folder that training reads
 * (tlm_data_folder_files): its texts, else its shards. */
static void stamp_path(stamper *s, const char *path) {
    struct stat st;
    tlm_sha256_update(&s->h, path, strlen(path) + 1);
    if (stat(path, &st) != 0) {
        tlm_sha256_update(&s->h, "missing\n", 8);
        list_line(s, "missing", path);
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
    if (s.oom || !s.listing) {
        free(s.listing);
        return calloc(1, 1); /* no listing: study_data_change says nothing */
    }
    return s.listing;
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

/* The line of `listing` for path, or false. */
static bool find_path(const char *listing, const listed *want, listed *found) {
    for (const char *l = listing, *end; (end = strchr(l, '\n')); l = end + 1)
        if (split_line(l, end, found) && found->path_len == want->path_len &&
            memcmp(found->path, want->path, (size_t)want->path_len) == 0)
            return true;
    return false;
}

/* The first file of listing a that b lacks or lists otherwise, said into
 * why (a is the run's listing when a_is_then). */
static bool first_change(const char *a, const char *b, bool a_is_then, char *why, size_t n_why) {
    for (const char *l = a, *end; (end = strchr(l, '\n')); l = end + 1) {
        listed f, g;
        if (!split_line(l, end, &f)) return false;
        int n = f.path_len;
        const char *path = f.path;
        if (!find_path(b, &f, &g))
            snprintf(why, n_why, a_is_then ? "%.*s is no longer in its folder" : "%.*s is new in its folder", n, path);
        else if (is_missing(&f) != is_missing(&g))
            snprintf(why, n_why, is_missing(a_is_then ? &g : &f) ? "%.*s is gone" : "%.*s was missing then", n, path);
        else if (f.head_len != g.head_len || memcmp(f.head, g.head, (size_t)f.head_len) != 0) {
            long long then = atoll(a_is_then ? f.head : g.head), now = atoll(a_is_then ? g.head : f.head);
            if (then != now) snprintf(why, n_why, "%.*s changed since: %lld bytes then, %lld now", n, path, then, now);
            else snprintf(why, n_why, "%.*s changed since: the same size, modified at another time", n, path);
        } else continue;
        return true;
    }
    return false;
}

bool study_data_change(const char *then, const char *now, char *why, size_t n_why) {
    return first_change(then, now, true, why, n_why) || first_change(now, then, false, why, n_why);
}
