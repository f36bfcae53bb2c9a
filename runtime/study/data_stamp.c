#include "data_stamp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sha256.h"
#include "tlm_rt/data.h"

static void stamp_stat(tlm_sha256_ctx *h, const char *name, const struct stat *st) {
    char line[96];
    int n = snprintf(line, sizeof line, " %" PRId64 " %" PRId64 ".%09ld\n", (int64_t)st->st_size,
                     (int64_t)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
    tlm_sha256_update(h, name, strlen(name));
    tlm_sha256_update(h, line, (size_t)n);
}

/* A file, or the files of a folder that training reads
 * (tlm_data_folder_files): its texts, else its shards. */
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
    char **names;
    int n;
    bool shards;
    tlm_err ignored; /* a folder that names nothing: training says why */
    if (tlm_data_folder_files(path, &names, &n, &shards, &ignored) != 0) return;
    for (int i = 0; i < n; i++)
        if (stat(names[i], &st) == 0) stamp_stat(h, names[i], &st);
    tlm_data_texts_free(names, n);
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
