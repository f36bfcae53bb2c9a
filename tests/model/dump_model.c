/* Runs a compiled model through one forward/backward pass and a few
 * optimizer steps, and writes everything a reference implementation needs to
 * recompute it to a safetensors file (tests/reference/check_model.py
 * rebuilds the model in PyTorch from it):
 *
 *   init.<name>      each parameter as tlm_model_init_params(seed) left it
 *   param.<name>     the parameters the checks start from (see
 *                    init_test_params: normal tensors scaled, norms jittered)
 *   tokens, targets  [micro, T] int32: the batch of the gradient check
 *   logits           [micro, T, V] after the forward pass
 *   loss             F64 scalar: the mean cross-entropy
 *   grad.<name>      the gradient of that loss
 *   train.tokens, train.targets  [S, batch, T]: one batch per optimizer step
 *   train.loss, train.grad_norm  F64 [S];  train.lr F32 [S]
 *   step<k>.<name>   the parameters after step k (1 <= k <= S; only k = S
 *                    with --final-only)
 *   adam.m.<name>, adam.v.<name>  AdamW's moments after the last step
 *
 * The metadata holds the model (sizes, per-layer widths, heads, head_dim,
 * norm_eps, rope_base, tie, mlp, and the mixer with its settings: gate,
 * chunk, inner_lr, cms periods), the parameter table (name, shape, decay,
 * init, std, CMS level and update period) and the training settings
 * actually used, as JSON strings.
 *
 * usage: dump_model MODEL.so OUT.safetensors [options]
 *        dump_model MODEL.so --time STEPS [options]   (prints training
 *        tokens/s over STEPS steps after one warm-up step, with the model
 *        and training settings, as one JSON line; writes nothing)
 *        dump_model MODEL.so --settings [options]   (the same JSON line's
 *        model and training settings alone, without building the model:
 *        what bench/gpu_peer.py rebuilds a large model from) 
 * options (the training settings default to those compiled into MODEL.so):
 *   --seed N --data-seed N --scale X --norm-noise X --ignore N
 *   --batch N --seq N --accumulate N --run N (steps to run) --steps N
 *   (schedule length) --warmup N --lr X --min-lr X --clip X --weight-decay X
 *   --threads N --final-only
 *   --scale-param SUBSTRING X  (repeatable) after the above, multiply every
 *   parameter whose name contains SUBSTRING by X: e.g. small q_proj and
 *   k_proj make Titans' l2norm(silu(.)) depend on its epsilon */
#include <inttypes.h>
#include <stdarg.h>
#include <time.h>

#include "model_util.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/safetensors.h"
#include "tlm_train_settings.h"
#include "trainer.h"

/* ---- a growing string, for the JSON metadata ---------------------------- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)k + 1 > b->cap) {
        b->cap = (b->n + (size_t)k + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) exit(2);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* ---- the tensors to write (copies) --------------------------------------- */

static tlm_st_tensor *g_t;
static int g_n, g_cap;

static void put(tlm_dtype dt, const void *data, int ndim, const int64_t *shape, const char *fmt, ...) {
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 256;
        g_t = realloc(g_t, (size_t)g_cap * sizeof *g_t);
        if (!g_t) exit(2);
    }
    tlm_st_tensor *t = &g_t[g_n++];
    memset(t, 0, sizeof *t);
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    t->name = strdup(name);
    t->dtype = dt;
    t->ndim = ndim;
    size_t bytes = tlm_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        bytes *= (size_t)shape[i];
    }
    void *copy = xcalloc(bytes, 1);
    memcpy(copy, data, bytes);
    t->data = copy;
}

/* every parameter tensor of a block laid out like the parameter block */
static void put_params(const tlm_so *so, const float *block, const char *prefix) {
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        put(TLM_F32, block + p->offset, (int)p->ndim, p->shape, "%s%s", prefix, tlm_so_str(so, p->name));
    }
}

/* ---- options ------------------------------------------------------------- */

typedef struct options {
    uint64_t seed, data_seed;
    double scale, norm_noise;
    int ignore, threads, time_steps;
    bool settings_only;
    int64_t run;             /* optimizer steps to run (default: the schedule's length) */
    bool final_only;
    int nscaled;             /* --scale-param */
    const char *scaled_name[8];
    double scaled_by[8];
} options;

/* the test parameters (init_test_params), then the --scale-param factors */
static void test_params(tlm_model *m, const options *o) {
    init_test_params(m, o->seed, o->scale, o->norm_noise);
    for (int k = 0; k < o->nscaled; k++)
        for (uint32_t i = 0; i < m->so->header->nparams; i++) {
            const tlm_abi_param *p = &m->so->params[i];
            if (!strstr(tlm_so_str(m->so, p->name), o->scaled_name[k])) continue;
            float *w = tlm_model_param(m, (int)i);
            for (int64_t j = 0; j < p->count; j++) w[j] = (float)(w[j] * o->scaled_by[k]);
        }
}

static double num_arg(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "dump_model: %s needs a value\n", argv[*i]);
        exit(2);
    }
    char *end;
    double v = strtod(argv[++*i], &end);
    if (*end) {
        fprintf(stderr, "dump_model: bad number `%s` for %s\n", argv[*i], argv[*i - 1]);
        exit(2);
    }
    return v;
}

static const char *schedule_name(uint32_t k) { return tlm_enum_name(&tlm_lr_enum, k); }

static void metadata(const tlm_so *so, const tlm_abi_train *s, const options *o, int64_t T, sbuf *model, sbuf *params,
                     sbuf *train, sbuf *check) {
    const tlm_abi_config *am = so->config;
    sb_printf(model,
              "{\"name\": \"%s\", \"vocab\": %" PRId64 ", \"context\": %" PRId64 ", \"d_model\": %" PRId64
              ", \"layers\": %" PRId64 ", \"heads\": %" PRId64 ", \"head_dim\": %" PRId64
              ", \"mlp\": \"%s\", \"tie_embeddings\": %s, \"norm_eps\": %.17g, \"rope_base\": %.17g, "
              "\"widths\": [",
              tlm_so_str(so, am->name), am->vocab, am->context, am->d_model, am->layers, am->heads, am->head_dim,
              tlm_enum_name(&tlm_mlp_enum, am->mlp), am->tie_embeddings ? "true" : "false", am->norm_eps,
              am->rope_base);
    for (int64_t l = 0; l < am->layers; l++) sb_printf(model, "%s%" PRId64, l ? ", " : "", so->layers[l].width);
    sb_printf(model, "], \"mixer\": \"%s\", \"gate\": \"%s\", \"chunk\": %" PRId64 ", \"inner_lr\": %.17g, \"cms\": [",
              tlm_enum_name(&tlm_mixer_enum, am->mixer), tlm_enum_name(&tlm_gate_enum, am->gate), am->chunk,
              am->inner_lr);
    for (uint32_t i = 0; i < am->ncms && i < 8; i++) sb_printf(model, "%s%" PRId64, i ? ", " : "", am->cms[i]);
    sb_printf(model, "]}");

    sb_printf(params, "[");
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        sb_printf(params, "%s{\"name\": \"%s\", \"layer\": %d, \"shape\": [%" PRId64, i ? ", " : "",
                  tlm_so_str(so, p->name), p->layer, p->shape[0]);
        if (p->ndim == 2) sb_printf(params, ", %" PRId64, p->shape[1]);
        sb_printf(params, "], \"decay\": %s, \"init\": \"%s\", \"init_std\": %.17g, \"level\": %u, \"period\": %u}",
                  p->decay ? "true" : "false",
                  p->init == TLM_INIT_NORMAL ? "normal"
                  : p->init == TLM_INIT_ONES ? "ones"
                                             : "zeros",
                  p->init_std, p->level, p->period);
    }
    sb_printf(params, "]");

    sb_printf(train,
              "{\"optimizer\": \"%s\", \"batch\": %" PRId64 ", \"accumulate\": %" PRId64 ", \"seq\": %" PRId64
              ", \"run\": %" PRId64 ", \"steps\": %" PRId64 ", \"warmup\": %" PRId64
              ", \"schedule\": \"%s\", \"lr\": %.17g, \"min_lr\": %.17g, \"beta1\": %.17g, \"beta2\": %.17g, "
              "\"eps\": %.17g, \"weight_decay\": %.17g, \"grad_clip\": %.17g, \"decay_embeddings\": false}",
              tlm_enum_name(&tlm_optimizer_enum, s->optimizer), s->batch, s->accumulate, T, o->run, s->steps, s->warmup,
              schedule_name(s->lr_schedule), s->lr, s->min_lr, s->beta1, s->beta2, s->eps, s->weight_decay,
              s->grad_clip);

    sb_printf(check,
              "{\"seed\": %" PRIu64 ", \"data_seed\": %" PRIu64 ", \"scale\": %.17g, \"norm_noise\": %.17g, "
              "\"ignore\": %d, \"threads\": %d, \"scale_param\": {",
              o->seed, o->data_seed, o->scale, o->norm_noise, o->ignore, tlm_get_num_threads());
    for (int k = 0; k < o->nscaled; k++)
        sb_printf(check, "%s\"%s\": %.17g", k ? ", " : "", o->scaled_name[k], o->scaled_by[k]);
    sb_printf(check, "}}");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: dump_model MODEL.so OUT.safetensors [options]\n"
              "       dump_model MODEL.so --time STEPS [options]\n",
              stderr);
        return 2;
    }
    const char *so_path = argv[1], *out = NULL;
    tlm_so so;
    open_so(so_path, &so);
    tlm_abi_train s = *so.train;
    options o = {.seed = so.train->seed, .data_seed = 7, .scale = 5.0, .norm_noise = 0.2, .run = -1};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--seed")) o.seed = (uint64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--data-seed")) o.data_seed = (uint64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--scale")) o.scale = num_arg(argc, argv, &i);
        else if (!strcmp(a, "--norm-noise")) o.norm_noise = num_arg(argc, argv, &i);
        else if (!strcmp(a, "--ignore")) o.ignore = (int)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--threads")) o.threads = (int)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--time")) o.time_steps = (int)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--settings")) o.settings_only = true;
        else if (!strcmp(a, "--run")) o.run = (int64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--final-only")) o.final_only = true;
        else if (!strcmp(a, "--scale-param") && i + 1 < argc && o.nscaled < 8) {
            o.scaled_name[o.nscaled] = argv[++i];
            o.scaled_by[o.nscaled++] = num_arg(argc, argv, &i);
        } else if (!strcmp(a, "--batch")) s.batch = (int64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--seq")) s.context = (int64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--accumulate")) s.accumulate = (int64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--steps")) s.steps = (int64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--warmup")) s.warmup = (int64_t)num_arg(argc, argv, &i);
        else if (!strcmp(a, "--lr")) s.lr = num_arg(argc, argv, &i);
        else if (!strcmp(a, "--min-lr")) s.min_lr = num_arg(argc, argv, &i);
        else if (!strcmp(a, "--clip")) s.grad_clip = num_arg(argc, argv, &i);
        else if (!strcmp(a, "--weight-decay")) s.weight_decay = num_arg(argc, argv, &i);
        else if (a[0] != '-' && !out) out = a;
        else {
            fprintf(stderr, "dump_model: unknown argument `%s`\n", a);
            return 2;
        }
    }
    tlm_train_resolve_defaults(&s); /* min_lr: a tenth of lr as the flags left it, as tlm-run does */
    if (o.settings_only) {
        sbuf model = {0}, params = {0}, train = {0}, check = {0};
        metadata(&so, &s, &o, s.context, &model, &params, &train, &check);
        printf("{\"batch\": %" PRId64 ", \"seq\": %" PRId64 ", \"model\": %s, \"train\": %s}\n", s.batch, s.context,
               model.s, train.s);
        free(model.s), free(params.s), free(train.s), free(check.s);
        tlm_so_close(&so);
        return 0;
    }
    if (!out && !o.time_steps) {
        fputs("dump_model: no output file\n", stderr);
        return 2;
    }
    if (o.run < 0) o.run = s.steps;
    if (o.threads > 0) tlm_set_num_threads(o.threads);
    if (s.accumulate < 1 || s.batch % s.accumulate) {
        fputs("dump_model: the batch must be a multiple of --accumulate\n", stderr);
        return 2;
    }
    const int64_t V = so.config->vocab, T = s.context, micro = s.batch / s.accumulate, S = o.run;

    tlm_model m;
    create_model(&m, &so, micro, T, true);
    tlm_trainer tr;
    tlm_err err = {""};
    test_params(&m, &o);
    if (!tlm_trainer_create(&tr, &m, &s, false, &err)) {
        fprintf(stderr, "dump_model: %s\n", err.msg);
        return 1;
    }
    tlm_rng data;
    tlm_rng_seed(&data, o.data_seed);

    if (o.time_steps > 0) {
        /* timing mode: a fresh random batch per step, as a data loader
         * would hand out; one warm-up step outside the clock */
        int32_t *x = xcalloc((size_t)(s.batch * T), sizeof *x), *y = xcalloc((size_t)(s.batch * T), sizeof *y);
        double t0 = 0, loss = 0;
        for (int k = 0; k <= o.time_steps; k++) {
            if (k == 1) t0 = now();
            draw_batch(&data, V, s.batch, T, 0, x, y);
            loss = tlm_trainer_step(&tr, x, y, T).loss;
        }
        double sec = now() - t0;
        sbuf model = {0}, params = {0}, train = {0}, check = {0};
        metadata(&so, &s, &o, T, &model, &params, &train, &check);
        printf("{\"threads\": %d, \"batch\": %" PRId64 ", \"seq\": %" PRId64 ", \"steps\": %d, \"seconds\": %.6f, "
               "\"tokens_per_s\": %.1f, \"last_loss\": %.6f, \"model\": %s, \"train\": %s}\n",
               tlm_get_num_threads(), s.batch, T, o.time_steps, sec, (double)(s.batch * T * o.time_steps) / sec, loss,
               model.s, train.s);
        free(model.s), free(params.s), free(train.s), free(check.s);
        free(x), free(y);
        tlm_trainer_destroy(&tr);
        tlm_model_destroy(&m);
        tlm_so_close(&so);
        return 0;
    }

    /* The parameters as initialised, then as the checks use them. */
    tlm_model_init_params(&m, o.seed);
    put_params(&so, m.params, "init.");
    test_params(&m, &o);
    put_params(&so, m.params, "param.");

    /* One forward and backward pass on a fixed micro-batch. */
    int32_t *tokens = xcalloc((size_t)(micro * T), sizeof *tokens);
    int32_t *targets = xcalloc((size_t)(micro * T), sizeof *targets);
    draw_batch(&data, V, micro, T, o.ignore, tokens, targets);
    tlm_model_zero_grads(&m);
    double loss = tlm_model_forward(&m, tokens, targets, micro, T);
    put(TLM_F32, tlm_model_logits(&m), 3, (int64_t[]){micro, T, V}, "logits");
    tlm_model_backward(&m, 1.0f);
    put(TLM_I32, tokens, 2, (int64_t[]){micro, T}, "tokens");
    put(TLM_I32, targets, 2, (int64_t[]){micro, T}, "targets");
    put(TLM_F64, &loss, 0, NULL, "loss");
    put_params(&so, m.grads, "grad.");
    printf("%s: loss %.6f on %lld x %lld tokens\n", tlm_so_str(&so, so.config->name), loss, (long long)micro,
           (long long)T);

    /* S optimizer steps, one fresh batch each. */
    int32_t *xs = xcalloc((size_t)(S * s.batch * T) + 1, sizeof *xs);
    int32_t *ys = xcalloc((size_t)(S * s.batch * T) + 1, sizeof *ys);
    double *losses = xcalloc((size_t)S, sizeof *losses), *norms = xcalloc((size_t)S, sizeof *norms);
    float *lrs = xcalloc((size_t)S, sizeof *lrs);
    for (int64_t k = 0; k < S; k++) {
        int32_t *x = xs + k * s.batch * T, *y = ys + k * s.batch * T;
        draw_batch(&data, V, s.batch, T, o.ignore, x, y);
        tlm_step_result r = tlm_trainer_step(&tr, x, y, T);
        if (!r.finite) {
            fprintf(stderr, "dump_model: step %lld is not finite\n", (long long)k + 1);
            return 1;
        }
        losses[k] = r.loss;
        norms[k] = r.grad_norm;
        lrs[k] = r.lr;
        printf("  step %lld: loss %.6f, grad norm %.4f, lr %.3g\n", (long long)k + 1, r.loss, r.grad_norm,
               (double)r.lr);
        if (!o.final_only || k == S - 1) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "step%lld.", (long long)k + 1);
            put_params(&so, m.params, prefix);
        }
    }
    if (S > 0) {
        put(TLM_I32, xs, 3, (int64_t[]){S, s.batch, T}, "train.tokens");
        put(TLM_I32, ys, 3, (int64_t[]){S, s.batch, T}, "train.targets");
        put(TLM_F64, losses, 1, (int64_t[]){S}, "train.loss");
        put(TLM_F64, norms, 1, (int64_t[]){S}, "train.grad_norm");
        put(TLM_F32, lrs, 1, (int64_t[]){S}, "train.lr");
        put_params(&so, tr.m, "adam.m.");
        if (tr.v) put_params(&so, tr.v, "adam.v.");
    }

    sbuf model = {0}, params = {0}, train = {0}, check = {0};
    metadata(&so, &s, &o, T, &model, &params, &train, &check);
    tlm_st_meta meta[] = {{"model", model.s}, {"params", params.s}, {"train", train.s}, {"check", check.s}};
    tlm_err e;
    int rc = tlm_st_write(out, g_t, g_n, meta, 4, &e);
    if (rc != 0) fprintf(stderr, "dump_model: %s\n", e.msg);
    else printf("wrote %d tensors to %s\n", g_n, out);

    for (int i = 0; i < g_n; i++) {
        free((char *)g_t[i].name);
        free((void *)g_t[i].data);
    }
    free(g_t);
    free(model.s), free(params.s), free(train.s), free(check.s);
    free(tokens), free(targets), free(xs), free(ys), free(losses), free(norms), free(lrs);
    tlm_trainer_destroy(&tr);
    tlm_model_destroy(&m);
    tlm_so_close(&so);
    return rc == 0 ? 0 : 1;
}
