#include "load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "checkpoint_config.h"
#include "device_flag.h"
#include "corpus.h"
#include "gpu_model.h"
#include "regular_file.h"
#include "text_tokens.h"
#include "tlm_rt/blas_room.h"
#include "tlm_rt/ops.h"

bool cli_threads_start(const char *cmd, int threads, tlm_err *err) {
    if (!tlm_threads_start(threads, err)) return false;
    int got = tlm_get_num_threads();
    if (got < threads)
        cli_note(cmd, "--threads %d: this build runs at most %d threads (its OpenBLAS's limit)", threads, got);
    return true;
}

int open_model(const char *cmd, const char *path, int64_t threads, tlm_so *so) {
    if (!path) return cli_usage_error(cmd, "no MODEL.so given");
    tlm_err err = {""};
    if (!cli_threads_start(cmd, threads > 0 ? (int)threads : cli_cores(), &err)) return cli_error(cmd, "%s", err.msg);
    if (!tlm_so_open(path, so, &err)) return cli_error(cmd, "%s", err.msg);
    return 0;
}

int checkpoint_path_too_long(const char *cmd, const char *ckpt, const char *model) {
    if (ckpt) return cli_error(cmd, "--ckpt %.200s...: %s", ckpt, CKPT_PATH_TOO_LONG);
    return cli_error(
        cmd, "the default checkpoint folder checkpoints/MODEL, for model %.100s...: %s (name another with --ckpt)",
        model, CKPT_PATH_TOO_LONG);
}

int load_checkpoint(const char *cmd, const tlm_so *so, const char *ckpt, tlm_model *m, char *path, size_t pathlen,
                    int64_t *step, char tokenizer[65], int64_t *trained) {
    const char *name = tlm_so_str(so, so->config->name);
    if (!checkpoint_path(path, pathlen, ckpt, name) || strlen(path) >= PATH_MAX)
        return checkpoint_path_too_long(cmd, ckpt, name);
    if (access(path, F_OK) != 0) {
        /* "train first" only where there is nothing: a --ckpt that is a
         * FIFO or a device, or a folder that cannot be read, says so */
        int e = errno;
        struct stat st;
        if (ckpt && stat(ckpt, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
            return cli_error(cmd, "--ckpt %s is %s, not a checkpoint or its folder", ckpt, tlm_file_kind(st.st_mode));
        if (e != ENOENT && e != ENOTDIR) return cli_error(cmd, "%s: %s", path, strerror(e));
        return cli_error(cmd, "no checkpoint at %s (train first: tlm-run train MODEL.so%s%s)", path,
                         ckpt ? " --ckpt " : "", ckpt ? ckpt : "");
    }
    tlm_err err = {""};
    tlm_st_file *f = tlm_ckpt_open(path, so, &err);
    if (!f) return cli_error(cmd, "%s", err.msg);
    bool ok = tlm_ckpt_load_params(f, m, &err) && tlm_model_params_to_device(m, &err);
    tlm_ckpt_meta_step(f, step); /* -1, shown as unknown, when it is not a step */
    const char *tok = tlm_st_meta_get(f, "tokenizer");
    if (tokenizer) snprintf(tokenizer, 65, "%s", tok ? tok : "bytes");
    if (trained) *trained = tlm_ckpt_trained_context(tlm_st_meta_get(f, "settings"), tlm_st_meta_get(f, "config"));
    tlm_st_close(f);
    return ok ? 0 : cli_error(cmd, "%s: %s", path, err.msg);
}

void note_untrained_positions(const char *cmd, const char *path, int64_t trained, int64_t window) {
    if (trained <= 0 || window <= trained) return;
    fflush(stdout); /* after the results, where both streams go to one place */
    cli_note(cmd,
             "%s was trained on windows of %" PRId64 " tokens; these are %" PRId64 ", and the positions past %" PRId64
             " were never trained",
             path, trained, window, trained);
}

const char *untrained_nan_hint(const tlm_so *so) {
    return so->config->mixer == TLM_MIXER_TITANS ? " (a Titans inner_lr too large?)" : "";
}

const char *nan_cause(const tlm_so *so, const char *path, int64_t step, char *buf, size_t n) {
    if (step != 0) snprintf(buf, n, "did the run of %s diverge?", path);
    else
        snprintf(buf, n, "%s is untrained (step 0): the model's settings make its initial weights diverge%s", path,
                 untrained_nan_hint(so));
    return buf;
}

const char *step_text(int64_t step, char buf[24]) {
    if (step < 0) return strcpy(buf, "unknown");
    snprintf(buf, 24, "%" PRId64, step);
    return buf;
}

int load_checkpoint_tokenizer(const char *cmd, const char *tok_path, const tlm_so *so, const char *ckpt_tokenizer,
                              const char *ckpt_path, tlm_tokenizer **tok) {
    text_tokens t;
    tlm_err err = {""};
    *tok = NULL;
    if (!text_tokens_open(&t, ckpt_tokenizer, ckpt_path, tok_path, so->tokenizer_path, INT64_MAX, &err))
        return cli_error(cmd, "%s", err.msg);
    *tok = t.tok;
    return 0;
}

int device_flag_open(const char *cmd, const char *value, tlm_device **dev) {
    *dev = NULL;
    if (device_flag_is_cpu(value)) return 0;
    tlm_err err = {""};
    *dev = tlm_device_open(value, &err);
    return *dev ? 0 : cli_error(cmd, "--device %s: %s", value, err.msg);
}

void print_device_suffix(const tlm_device *dev, tlm_precision p) {
    if (!dev) return;
    char where[300];
    device_flag_describe(dev, where, sizeof where);
    printf(", on %s, %s", where, tlm_precision_name(p));
}

void device_flag_describe(const tlm_device *dev, char *buf, size_t len) {
    if (!dev) {
        int n = tlm_get_num_threads();
        snprintf(buf, len, "cpu, %d thread%s", n, n == 1 ? "" : "s");
        return;
    }
    const tlm_device_info *i = tlm_device_get_info(dev);
    snprintf(buf, len, "cuda:%d %s (%s, %.1f GiB)", i->ordinal, i->name, i->arch,
             (double)i->memory_total / 1073741824.0);
}

void device_kernels_describe(const tlm_so *so, const tlm_device *dev, tlm_precision p, const char *graphs_off,
                             char *buf, size_t len) {
    char why[160];
    bool tc = tlm_gpu_attention_on_tensor_cores(so, tlm_device_get_info(dev), p, why, sizeof why);
    const bool none = !tc && !strcmp(why, "no attention");
    snprintf(buf, len, "attention: %s%s%s%s; CUDA graphs: %s%s%s",
             tc && tlm_gpu_attention_rows16(so, tlm_device_get_info(dev))
                 ? "tensor cores, 16 rows a warp (TLM_GPU_ATTENTION_ROWS=16)"
             : tc   ? "tensor cores"
             : none ? "none"
                    : "scalar",
             tc || none ? "" : " (", tc || none ? "" : why, tc || none ? "" : ")", graphs_off ? "off (" : "on",
             graphs_off ? graphs_off : "", graphs_off ? ")" : "");
}

void device_compile_report(const tlm_model *m, FILE *out) {
    const tlm_gpu *gpu = &m->gpu->gpu;
    const tlm_module_report *mlp = &m->gpu->mlp_report;
    double secs = m->gpu->mlp ? mlp->compile_seconds : 0;
    bool all_cached = !m->gpu->mlp || mlp->cache_hit, written = m->gpu->mlp && mlp->cache_written;
    for (int id = 0; id < TLM_GPU_MODULE_COUNT; id++) {
        if (!gpu->modules[id]) continue;
        secs += gpu->reports[id].compile_seconds;
        all_cached = all_cached && gpu->reports[id].cache_hit;
        written = written || gpu->reports[id].cache_written;
    }
    if (all_cached) fprintf(out, "kernels: from the cache (nothing compiled)\n");
    else fprintf(out, "kernels: compiled in %.1f s%s\n", secs, written ? ", cached for the next run" : "");
}
