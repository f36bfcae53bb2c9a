/* tlm-run probe: the mechanistic probe of method.md. For every layer l,
 * rho_l is the cosine similarity between what the MLP adds,
 * MLP_l(norm(z_l)), and the residual stream z_l it is added to, averaged
 * over tokens. In trained models rho rises with depth: late MLPs reinforce
 * what is already in the stream, which is why tapering moves their width to
 * the early layers. Windows are consecutive (no sampling), so the numbers
 * reproduce exactly. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "corpus.h"
#include "device_flag.h"
#include "jsonl.h"
#include "load.h"
#include "tlm_rt/ops.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run probe MODEL.so [--ckpt DIR] [--data FILE|DIR] [options]\n"
          "\n"
          "Prints rho per layer: the mean cosine similarity between each layer's MLP output\n"
          "and the residual stream it is added to (for hope_attention, of all CMS levels\n"
          "together).\n"
          "  --ckpt DIR         the checkpoint's folder or file (default: checkpoints/MODEL)\n"
          "  --data FILE|DIR    the text, or token shards (default: Persuasion)\n"
          "  --batch N          windows per forward pass (default 8)\n"
          "  --context T        tokens per window (default: the model's train context)\n"
          "  --windows N        windows to average over (default 32; fewer if the text\n"
          "                     has fewer)\n"
          "  --device DEV       cpu (default), cuda or cuda:N\n"
          "  --precision P      bf16 (the GPU's default) or fp32\n"
          "  --threads N        CPU threads (default: all cores)\n"
          "  --json             one JSON object on stdout instead of the table:\n"
          "                     {\"kind\":\"probe\",\"windows\":N,\"context\":T,\"rho\":[rho of\n"
          "                     layer 0, ...]} (windows: those averaged over)\n"
          "\n"
          "Exit status: 0 ok, 1 error (model, checkpoint, data), 2 bad usage.\n",
          out);
}

/* Adds, for every token, cos(mlp_out, z) with mlp_out = next - z. */
static void add_cosines(const float *z, const float *next, int64_t N, int64_t D, double *sum) {
    for (int64_t n = 0; n < N; n++) {
        const float *a = z + n * D, *b = next + n * D;
        double dot = 0, aa = 0, mm = 0;
        for (int64_t d = 0; d < D; d++) {
            double mlp = (double)b[d] - (double)a[d];
            dot += mlp * a[d];
            aa += (double)a[d] * a[d];
            mm += mlp * mlp;
        }
        if (aa > 0 && mm > 0) *sum += dot / sqrt(aa * mm);
    }
}

enum {
    OPT_CKPT = 256,
    OPT_DATA,
    OPT_BATCH,
    OPT_CONTEXT,
    OPT_WINDOWS,
    OPT_THREADS,
    OPT_DEVICE,
    OPT_PRECISION,
    OPT_JSON
};
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"ckpt", required_argument, NULL, OPT_CKPT},
    {"data", required_argument, NULL, OPT_DATA},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"windows", required_argument, NULL, OPT_WINDOWS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

int cmd_probe(int argc, char **argv) {
    const char *model_path = NULL, *ckpt = NULL, *data = NULL, *device = NULL, *precision_value = NULL;
    int64_t batch = 8, context = 0, windows = 32, threads = 0;
    bool json = false;
    cli_args a = {.cmd = "probe", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_CKPT: ok = cli_path(&a, &ckpt); break;
        case OPT_DATA: /* eval's --data repeats; here a second would be dropped unseen */
            if (data) return cli_usage_error("probe", "--data given twice: probe reads one text (eval scores several)");
            ok = cli_path(&a, &data);
            break;
        case OPT_BATCH: ok = cli_int(&a, 1, 1 << 16, &batch); break;
        case OPT_CONTEXT: ok = cli_int(&a, 1, INT32_MAX, &context); break;
        case OPT_WINDOWS: ok = cli_int(&a, 1, 1 << 20, &windows); break;
        case OPT_THREADS: ok = cli_int(&a, 1, 4096, &threads); break;
        case OPT_DEVICE:
            device = a.val;
            if (device_flag_check("probe", device)) return 2;
            break;
        case OPT_PRECISION:
            if (precision_flag_check("probe", a.val)) return 2;
            precision_value = a.val;
            break;
        case OPT_JSON: json = true; break;
        case 1:
            if (!cli_model_path(&a, &model_path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }

    tlm_precision precision;
    if (precision_flag_resolve("probe", device, precision_value, &precision)) return 2;
    tlm_err err = {""};
    char path[4200], name[4200];
    tlm_so so;
    int opened = open_model("probe", model_path, threads, &so);
    if (opened) return opened;
    tlm_device *dev = NULL;
    if ((opened = device_flag_open("probe", device, &dev))) {
        tlm_so_close(&so);
        return opened;
    }
    const tlm_abi_config *am = so.config;
    if (context == 0) context = so.train->context > 0 ? so.train->context : am->context;
    if (batch > windows) batch = windows;
    tlm_model m = {0};
    tlm_dataset ds = {0};
    corpus_info info;
    char ckpt_tokenizer[65];
    int64_t step = 0, trained = -1;
    int rc = 0;
    int64_t L = am->layers, D = am->d_model;
    double *sum = calloc((size_t)L, sizeof *sum);
    /* the context checked before it sizes anything: a huge one is a usage
     * error, not "out of memory" */
    bool too_long = context > am->context;
    int32_t *in = too_long ? NULL : malloc((size_t)(batch * context) * sizeof *in),
            *tgt = too_long ? NULL : malloc((size_t)(batch * context) * sizeof *tgt);
    if (too_long)
        rc = cli_usage_error("probe", "--context %" PRId64 " is longer than the model's context (%" PRId64 ")", context,
                             am->context);
    else if (!sum || !in || !tgt) rc = cli_error("probe", "out of memory");
    /* The training layout keeps every layer's residual stream to the end
     * of the forward pass; the inference one reuses it. */
    else if (!tlm_model_create_on(&m, &so, dev, precision, batch, context, true, 0, &err))
        rc = cli_error("probe", "%s", err.msg);
    else if ((rc = load_checkpoint("probe", &so, ckpt, &m, path, sizeof path, &step, ckpt_tokenizer, &trained)) != 0)
        ;
    else if (!corpus_load_for(&ds, data, context, am->vocab, name, sizeof name, &info, ckpt_tokenizer, path, NULL,
                              &err))
        rc = cli_error("probe", "%s", err.msg);
    int64_t available = rc ? 0 : (int64_t)tlm_data_num_windows(&ds, (int)context);
    if (!rc && available < 1)
        rc = cli_error("probe", "%s is shorter than one window of %" PRId64 " tokens", name, context);
    if (!rc && windows > available) windows = available;
    int64_t done = 0;
    while (!rc && done < windows) {
        int64_t b = windows - done < batch ? windows - done : batch;
        for (int64_t i = 0; i < b && !rc; i++)
            if (tlm_data_window(&ds, (size_t)(done + i), (int)context, in + i * context, tgt + i * context, &err) != 0)
                rc = cli_error("probe", "%s: %s", name, err.msg);
        if (rc) break;
        double loss = tlm_model_forward(&m, in, tgt, b, context);
        if (tlm_model_device_error(&m)) {
            rc = cli_error("probe", "%s", tlm_model_device_error(&m));
            break;
        }
        if (!isfinite(loss)) {
            rc = cli_error("probe", "the model's loss is not finite on %s", name);
            break;
        }
        for (int64_t l = 0; l < L && !rc; l++) {
            const float *z = tlm_model_buffer(&m, TLM_B_MID, (int)l);
            const float *next = tlm_model_buffer(&m, TLM_B_RESID, (int)l + 1);
            if (!z || !next) {
                rc = cli_error("probe", "%s", tlm_model_device_error(&m));
                break;
            }
            add_cosines(z, next, b * context, D, &sum[l]);
        }
        done += b;
    }
    if (!rc && json) {
        /* the windows averaged over, which a short text makes fewer than asked */
        printf("{\"kind\":\"probe\",\"windows\":%" PRId64 ",\"context\":%" PRId64 ",\"rho\":[", done, context);
        for (int64_t l = 0; l < L; l++) {
            char rho[32];
            jsonl_number(rho, sizeof rho, sum[l] / (double)(done * context));
            printf("%s%s", l ? "," : "", rho);
        }
        printf("]}\n");
    } else if (!rc) {
        char st[24];
        printf("model %s, checkpoint %s (step %s), %s: %" PRId64 " window%s of %" PRId64 " token%s",
               tlm_so_str(&so, am->name), path, step_text(step, st), name, done, done == 1 ? "" : "s", context,
               context == 1 ? "" : "s");
        print_device_suffix(dev, precision);
        printf("\n");
        printf("%5s %7s %8s\n", "layer", "d_ff", "rho");
        for (int64_t l = 0; l < L; l++)
            printf("%5" PRId64 " %7" PRId64 " %8.4f\n", l, so.layers[l].width, sum[l] / (double)(done * context));
    }
    if (!rc) note_untrained_positions("probe", path, trained, context);
    free(sum);
    free(in);
    free(tgt);
    tlm_data_free(&ds);
    tlm_model_destroy(&m);
    if (dev) tlm_device_close(dev);
    tlm_so_close(&so);
    return rc;
}
