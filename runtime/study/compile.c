/* Compiling the variants, skipping those up to date (compile.h). */
#include "compile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "model_so.h"
#include "sha256.h"
#include "spawn.h"

/* What every variant's recipe shares, hashed once for the study: the
 * files tlmc read (the .tlm file and the modules it uses, each by path and
 * bytes; a plan without that list: the .tlm file) and tlmc's version. */
static void recipe_base(const study_plan *plan, const char *version, tlm_sha256_ctx *ctx) {
    tlm_sha256_init(ctx);
    const char *const *files = plan->nsources ? (const char *const *)plan->sources : (const char *const *)&plan->file;
    for (int i = 0; i < (plan->nsources ? plan->nsources : 1); i++) {
        tlm_err e = {""};
        size_t n;
        char *text = study_read_file(files[i], &n, &e);
        tlm_sha256_update(ctx, files[i], strlen(files[i]) + 1); /* with its NUL: the parts cannot run into each other */
        if (text) tlm_sha256_update(ctx, text, n);
        else tlm_sha256_update(ctx, "missing", 8); /* tlmc says why */
        free(text);
    }
    tlm_sha256_update(ctx, version, strlen(version) + 1);
}

/* A variant's recipe: the study's, the plan as it bears on this variant
 * (its own entry, none of the others and no seeds: a study that grew by a
 * variant or a seed compiles only what it added, study_plan_grown), and
 * its name. */
static bool recipe_hash(const tlm_sha256_ctx *base, const study_plan *plan, const study_variant *v, char hex[65],
                        tlm_err *err) {
    study_variant one = *v; /* a shallow copy: the plan's variants are not const */
    study_plan alone = *plan;
    alone.variants = &one, alone.nvariants = 1, alone.nseeds = 0;
    char *json = study_plan_json(&alone);
    if (!json) return tlm_fail(err, "out of memory");
    tlm_sha256_ctx ctx = *base;
    tlm_sha256_update(&ctx, json, strlen(json) + 1);
    tlm_sha256_update(&ctx, v->name, strlen(v->name) + 1);
    free(json);
    uint8_t digest[TLM_SHA256_SIZE];
    tlm_sha256_final(&ctx, digest);
    tlm_sha256_hex(digest, hex);
    return true;
}

/* The model's recipe is unchanged (its hash file holds hex, then the
 * SHA-256 of the .so compiled from it) and the model is that .so, whole: a
 * .so damaged after it was written (cut short, a bit flipped) would keep
 * its hash and fail every run, and another variant's .so copied over it
 * would train that variant under this one's name, so either is compiled
 * again, saying why in one progress line. (A hash file written before it
 * held the .so's SHA-256 vouches for the recipe only.) */
static bool up_to_date(const study_variant *v, const char *so, const char *hash_path, const char *hex, char digest[65],
                       study_progress *pr) {
    size_t n;
    tlm_err e = {""};
    if (!study_exists(so)) return false;
    char *text = study_read_file(hash_path, &n, &e);
    bool same = text && n >= 64 && !strncmp(text, hex, 64) && study_file_sha256(so, digest, &e);
    bool other = same && n >= 129 && text[64] == ' ' && strncmp(text + 65, digest, 64);
    free(text);
    if (!same) return false;
    if (!tlm_so_check_file(so, &e)) {
        study_progress_event(pr, "compiling %s again: %s", v->name, e.msg);
        return false;
    }
    if (other)
        study_progress_event(pr, "compiling %s again: %s is not the model compiled for it (its SHA-256 changed)",
                             v->name, so);
    return !other;
}

static bool compile_one(const study_plan *plan, const study_variant *v, const char *tlmc, const char *dir,
                        const tlm_sha256_ctx *base, char digest[65], study_progress *pr, const study_stop *stop,
                        tlm_err *err) {
    char so[4200], tmp[4200], hash_path[4300], log[4300], hex[65];
    snprintf(so, sizeof so, "%s/%s.so", dir, v->name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp.so", dir, v->name);
    snprintf(hash_path, sizeof hash_path, "%s.hash", so);
    snprintf(log, sizeof log, "%s/%s.log", dir, v->name);
    if (!recipe_hash(base, plan, v, hex, err)) return false;
    if (up_to_date(v, so, hash_path, hex, digest, pr)) return true;
    remove(hash_path);
    /* tlmc FILE (--study NAME --variant V | the plan's compile arguments) -o TMP */
    char *argv[80], file[4200];
    int argc = 0;
    argv[argc++] = (char *)tlmc;
    if (!study_child_path(plan->file, strlen(plan->file), file, sizeof file)) /* a plan file's "-x.tlm" */
        return tlm_fail(err, "%s: the path is too long", plan->file);
    argv[argc++] = file;
    if (v->compile)
        for (int i = 0; i < v->ncompile; i++) argv[argc++] = v->compile[i];
    else {
        argv[argc++] = "--study", argv[argc++] = plan->name;
        argv[argc++] = "--variant", argv[argc++] = v->name;
    }
    argv[argc++] = "-o", argv[argc++] = tmp, argv[argc] = NULL;
    double t0 = study_now();
    int rc = study_run_child(argv, log, false, NULL, stop, err);
    if (rc < 0) return false;
    if (stop->count) { /* stopped: whatever tlmc made of the signal is moot */
        remove(tmp);
        return false;
    }
    if (rc != 0) {
        char last[1024];
        study_last_line(log, last, sizeof last);
        remove(tmp);
        return tlm_fail(err, "compiling variant %s failed (tlmc exit %d): %s (see %s)", v->name, rc, last, log);
    }
    tlm_err why;
    if (!study_file_sha256(tmp, digest, &why)) {
        remove(tmp);
        return tlm_fail(err, "%s: tlmc wrote no model there (see %s)", tmp, log);
    }
    if (rename(tmp, so) != 0) return tlm_fail(err, "%s: cannot rename into place: %s", so, strerror(errno));
    char line[160];
    int len = snprintf(line, sizeof line, "%s %s\n", hex, digest);
    if (!tlm_write_file_atomic(hash_path, line, (size_t)len, err)) return false;
    char took[32];
    study_duration(took, sizeof took, study_now() - t0);
    study_progress_event(pr, "compiled %s (%s)", v->name, took);
    return true;
}

bool study_compile(const study_plan *plan, const char *tlmc, const char *dir, char (*digests)[65], study_progress *pr,
                   const study_stop *stop, tlm_err *err) {
    char vpath[4300];
    snprintf(vpath, sizeof vpath, "%s/tlmc.version", dir);
    char *argv[] = {(char *)tlmc, "--version", NULL};
    int rc = study_run_child(argv, vpath, false, NULL, stop, err);
    if (stop->count) return false;
    if (rc < 0) return false;
    if (rc != 0) return tlm_fail(err, "%s --version failed (exit %d)", tlmc, rc);
    size_t n;
    char *version = study_read_file(vpath, &n, err);
    if (!version) return false;
    tlm_sha256_ctx base;
    recipe_base(plan, version, &base);
    bool ok = true;
    for (int i = 0; ok && i < plan->nvariants; i++) {
        if (stop->count) break;
        ok = compile_one(plan, &plan->variants[i], tlmc, dir, &base, digests[i], pr, stop, err);
    }
    free(version);
    return ok;
}
