#include "data_stamp.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sha256.h"

static void stamp_stat(tlm_sha256_ctx *h, const char *name, const struct stat *st) {
    char line[96];
    int n = snprintf(line, sizeof line, " %" PRId64 " %" PRId64 ".%09ld\n", (int64_t)st->st_size,
                     (int64_t)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
    tlm_sha256_update(h, name, strlen(name));
    tlm_sha256_update(h, line, (size_t)n);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A file, or a folder's files (not dot files, sorted: readdir's order is
 * arbitrary), as the loaders read them. */
static void stamp_path(tlm_sha256_ctx *h, const char *path) {
    struct stat st;
    tlm_sha256_update(h, path, strlen(path) + 1);
    if (stat(path, &st) != 0) {
        tlm_sha256_update(h, "missing\n", 8);
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        stamp_stat(h, "", &st);
        return;
    }
    DIR *dir = opendir(path);
    if (!dir) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!more) break;
            names = more;
        }
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(dir);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        char file[4400];
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) stamp_stat(h, names[i], &st);
        free(names[i]);
    }
    free(names);
}

void study_data_stamp(const study_plan *plan, char hex[65]) {
    tlm_sha256_ctx h;
    tlm_sha256_init(&h);
    const char *role[] = {"data", "val"};
    const char *one[] = {plan->data, plan->val};
    for (int i = 0; i < 2; i++) {
        tlm_sha256_update(&h, role[i], strlen(role[i]) + 1);
        if (one[i]) stamp_path(&h, one[i]); /* NULL: the bundled corpora */
    }
    char **lists[] = {plan->eval, plan->choices, plan->cloze};
    const int counts[] = {plan->neval, plan->nchoices, plan->ncloze};
    for (int l = 0; l < 3; l++) {
        tlm_sha256_update(&h, "list", 5);
        for (int i = 0; i < counts[l]; i++) stamp_path(&h, lists[l][i]);
    }
    uint8_t digest[TLM_SHA256_SIZE];
    tlm_sha256_final(&h, digest);
    tlm_sha256_hex(digest, hex);
}
