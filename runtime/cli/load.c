#include "load.h"

#include <stdlib.h>
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "corpus.h"
#include "tlm_rt/ops.h"

int open_model(const char *cmd, const char *path, int64_t threads, tlm_so *so) {
    if (!path) return cli_usage_error(cmd, "no MODEL.so given");
    tlm_set_num_threads(threads > 0 ? (int)threads : cli_cores());
    tlm_err err = {""};
    if (!tlm_so_open(path, so, &err)) return cli_error(cmd, "%s", err.msg);
    return 0;
}

int load_checkpoint(const char *cmd, const tlm_so *so, const char *ckpt, tlm_model *m, char *path, size_t pathlen,
                    int64_t *step) {
    const char *name = tlm_so_str(so, so->config->name);
    checkpoint_path(path, pathlen, ckpt, name);
    if (access(path, F_OK) != 0)
        return cli_error(cmd, "no checkpoint at %s (train first: tlm-run train MODEL.so%s%s)", path,
                         ckpt ? " --ckpt " : "", ckpt ? ckpt : "");
    tlm_err err = {""};
    tlm_st_file *f = tlm_ckpt_open(path, so, &err);
    if (!f) return cli_error(cmd, "%s", err.msg);
    bool ok = tlm_ckpt_load_params(f, m, &err) && tlm_model_params_to_device(m, &err);
    const char *s = tlm_st_meta_get(f, "step");
    *step = s ? atoll(s) : -1;
    tlm_st_close(f);
    return ok ? 0 : cli_error(cmd, "%s: %s", path, err.msg);
}
