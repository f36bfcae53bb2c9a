#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "evaluate.h"

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

bool corpus_load(tlm_dataset *ds, const char *path, enum corpus_role role, int64_t T, int64_t vocab, char *name,
                 size_t namelen, tlm_err *err) {
    tlm_err e = {""};
    int rc;
    if (path && *path) {
        rc = tlm_data_load(ds, path, &e);
        if (rc == 0 && ds->nfiles > 1) snprintf(name, namelen, "%s (%d files)", path, ds->nfiles);
        else snprintf(name, namelen, "%s", path);
    } else if (role == CORPUS_TRAIN) {
        char paths[NTRAIN][4096];
        const char *list[NTRAIN];
        for (int i = 0; i < NTRAIN; i++) {
            snprintf(paths[i], sizeof paths[i], "%s/austen/%s", corpus_dir(), train_files[i]);
            list[i] = paths[i];
        }
        rc = tlm_data_load_files(ds, list, NTRAIN, &e);
        snprintf(name, namelen, "%s/austen (%d novels)", corpus_dir(), NTRAIN);
    } else {
        char file[4096];
        snprintf(file, sizeof file, "%s/austen/persuasion.txt", corpus_dir());
        rc = tlm_data_load(ds, file, &e);
        snprintf(name, namelen, "%s", file);
    }
    if (rc != 0) {
        tlm_fail(err, "%s", e.msg);
        return false;
    }
    if (tlm_data_check(ds, (int)T, &e) != 0) {
        tlm_fail(err, "%s: %s", name, e.msg);
        tlm_data_free(ds);
        return false;
    }
    int top = tlm_data_max_byte(ds);
    if (top >= vocab) {
        tlm_fail(err, "%s: holds byte %d, but the model's vocabulary has only %lld tokens", name, top,
                 (long long)vocab);
        tlm_data_free(ds);
        return false;
    }
    return true;
}

/* --ckpt names the file itself when it is one, or when it ends in
 * .safetensors (so that a missing one is reported as that file). */
static bool is_file(const char *p) {
    struct stat st;
    size_t n = strlen(p), k = strlen(".safetensors");
    if (n > k && !strcmp(p + n - k, ".safetensors") && !(stat(p, &st) == 0 && S_ISDIR(st.st_mode))) return true;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void checkpoint_dir(char *out, size_t n, const char *ckpt, const char *model) {
    if (!ckpt) snprintf(out, n, "checkpoints/%s", model);
    else if (is_file(ckpt)) {
        const char *slash = strrchr(ckpt, '/');
        if (!slash) snprintf(out, n, ".");
        else snprintf(out, n, "%.*s", (int)(slash - ckpt) > 0 ? (int)(slash - ckpt) : 1, ckpt);
    } else snprintf(out, n, "%s", ckpt);
}

void checkpoint_path(char *out, size_t n, const char *ckpt, const char *model) {
    if (ckpt && is_file(ckpt)) {
        snprintf(out, n, "%s", ckpt);
        return;
    }
    char dir[4096];
    checkpoint_dir(dir, sizeof dir, ckpt, model);
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
    snprintf(out, n, "%s/%s", dir, TLM_CKPT_FILE);
}
