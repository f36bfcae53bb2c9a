/* The whole model's gradient (tlm_model_backward) against finite
 * differences of its loss (tlm_model_forward), for each model.so given.
 *
 * The model computes in float32, so a plain central difference is noisy:
 * the loss carries rounding noise eps_L ~ 1e-7, which a step h turns into
 * eps_L / h, while the truncation error grows as h^2. Instead of single
 * coordinates this test differentiates along directions d, where the loss
 * changes by h g.d, far above the noise, and removes the h^2 term by
 * Richardson extrapolation:
 *
 *   D(h) = (L(p + h d) - L(p - h d)) / 2h          = g.d + c h^2 + O(h^4)
 *   R(h) = (4 D(h/2) - D(h)) / 3                   = g.d + O(h^4)
 *
 * R is formed for h = h0, h0/2, ..., h0/2^(NSTEPS-1), and the estimate kept
 * is the R(h) that agrees best with R(h/2) (where truncation and noise
 * balance). Each direction is scaled so ||d|| = ||p_T|| over the tensors T
 * it touches, so h is a relative change of the weights; h0 is H0, or less
 * so that the loss changes by at most MAX_CHANGE to first order (a steep
 * direction is also a curved one).
 *
 * Directions, for every parameter tensor T:
 *   gradient  d = g_T (the tensor's own gradient):  g.d = ||g_T|| ||d||, the
 *             largest derivative any direction of that size has; a gradient
 *             that is too large or small, or misses a term that is not
 *             orthogonal to the rest, shows directly.
 *             Bound: |R - g.d| / |g.d| <= GRAD_DIR_TOL.
 *   random    NRANDOM directions d ~ N(0, 1) on T: catch errors orthogonal
 *             to g_T. Bound: |R - g.d| / (||g_T|| ||d||) <= RANDOM_DIR_TOL.
 * and over all tensors at once the whole gradient, and NGLOBAL random
 * directions (each tensor's part scaled to its own ||p_T||).
 *
 * usage: test_model_fd MODEL.so...   (one or more) */
#include "model_util.h"
#include "tlm_rt/ops.h"

enum { NSTEPS = 6, NRANDOM = 2, NGLOBAL = 8 };
static const double H0 = 0.2;           /* the largest relative step */
static const double MAX_CHANGE = 0.05;   /* ... or less, so the loss changes by at most this */
static const double GRAD_DIR_TOL = 1e-3; /* seen: <= 1.2e-4 */
/* seen: <= 3e-5 with the AVX-512 kernels (an EPYC then taken for a Zen 4,
 * most likely a Zen 5: docs/performance.md); 1.2e-4 with the AVX2
 * ones on a Zen 1 (titans_exact's eta_proj: its float32 loss is noisier
 * along that direction; the same with this stop's RMSNorm, RoPE and AdamW
 * reverted to stop 29's). */
static const double RANDOM_DIR_TOL = 2.5e-4;

typedef struct fd_case {
    tlm_model m;
    const tlm_so *so;
    int32_t *tokens, *targets;
    int64_t B, T;
    float *p0;   /* the parameters at which the gradient is checked */
    float *g;    /* their gradient */
    double *dir; /* a direction, param_floats long (zeros outside its support) */
    int64_t lo, hi; /* the direction's support [lo, hi) */
} fd_case;

static double loss_at(fd_case *c, double h) {
    float *p = c->m.params;
    for (int64_t i = c->lo; i < c->hi; i++) p[i] = (float)((double)c->p0[i] + h * c->dir[i]);
    double loss = tlm_model_forward(&c->m, c->tokens, c->targets, c->B, c->T);
    memcpy(p + c->lo, c->p0 + c->lo, (size_t)(c->hi - c->lo) * sizeof *p);
    return loss;
}

/* The Richardson-extrapolated directional derivative; *spread: how far it
 * is from the next estimate (an error estimate). */
static double derivative(fd_case *c, double slope, double *spread) {
    double D[NSTEPS + 1], R[NSTEPS];
    double h0 = fmin(H0, MAX_CHANGE / fabs(slope));
    for (int k = 0; k <= NSTEPS; k++) {
        double h = h0 / (double)(1 << k);
        D[k] = (loss_at(c, h) - loss_at(c, -h)) / (2 * h);
    }
    for (int k = 0; k < NSTEPS; k++) R[k] = (4 * D[k + 1] - D[k]) / 3;
    int best = 0;
    for (int k = 1; k + 1 < NSTEPS; k++)
        if (fabs(R[k] - R[k + 1]) < fabs(R[best] - R[best + 1])) best = k;
    *spread = fabs(R[best] - R[best + 1]);
    return R[best];
}

/* Scales dir on [lo, hi) so that its norm is that of the parameters there;
 * returns the norm. */
static double scale_to_params(fd_case *c, int64_t lo, int64_t hi) {
    double dn = 0, pn = 0;
    for (int64_t i = lo; i < hi; i++) {
        dn += c->dir[i] * c->dir[i];
        pn += (double)c->p0[i] * c->p0[i];
    }
    double s = dn > 0 ? sqrt(pn / dn) : 0;
    for (int64_t i = lo; i < hi; i++) c->dir[i] *= s;
    return sqrt(pn);
}

static double dot_g(const fd_case *c, double *gnorm) {
    double an = 0, gn = 0;
    for (int64_t i = c->lo; i < c->hi; i++) {
        an += (double)c->g[i] * c->dir[i];
        gn += (double)c->g[i] * c->g[i];
    }
    *gnorm = sqrt(gn);
    return an;
}

static void check_direction(fd_case *c, const char *what, bool gradient_dir, double dnorm, double *worst) {
    double gnorm, an = dot_g(c, &gnorm), spread;
    double fd = derivative(c, an, &spread);
    double err = gradient_dir ? fabs(fd - an) / fabs(an) : fabs(fd - an) / (gnorm * dnorm);
    double tol = gradient_dir ? GRAD_DIR_TOL : RANDOM_DIR_TOL;
    bool ok = err <= tol && isfinite(fd);
    if (!ok || getenv("TLM_FD_VERBOSE"))
        printf("  %s %-50s %s  g.d %+.6e  fd %+.6e  err %.1e (bound %.0e)\n", ok ? "ok  " : "FAIL", what,
               gradient_dir ? "gradient" : "random  ", an, fd, err, tol);
    if (!ok) g_failures++;
    if (err > *worst) *worst = err;
}

static void check_model(const char *path) {
    tlm_so so;
    open_so(path, &so);
    fd_case c = {.so = &so, .B = 2, .T = so.train->context};
    create_model(&c.m, &so, c.B, c.T, true);
    init_test_params(&c.m, 5, 5.0, 0.2);
    const int64_t n = c.m.param_floats;
    c.tokens = xcalloc((size_t)(c.B * c.T), sizeof *c.tokens);
    c.targets = xcalloc((size_t)(c.B * c.T), sizeof *c.targets);
    tlm_rng rng;
    tlm_rng_seed(&rng, 17);
    draw_batch(&rng, so.config->vocab, c.B, c.T, 1, c.tokens, c.targets);
    c.p0 = xcalloc((size_t)n, sizeof *c.p0);
    c.g = xcalloc((size_t)n, sizeof *c.g);
    c.dir = xcalloc((size_t)n, sizeof *c.dir);
    memcpy(c.p0, c.m.params, (size_t)n * sizeof *c.p0);
    tlm_model_zero_grads(&c.m);
    double loss = tlm_model_forward(&c.m, c.tokens, c.targets, c.B, c.T);
    tlm_model_backward(&c.m, 1.0f);
    memcpy(c.g, c.m.grads, (size_t)n * sizeof *c.g);
    printf("%s: loss %.6f on %lld x %lld tokens, %u tensors\n", tlm_so_str(&so, so.config->name), loss, (long long)c.B,
           (long long)c.T, so.header->nparams);

    double worst_grad = 0, worst_rand = 0;
    for (uint32_t t = 0; t < so.header->nparams; t++) {
        const tlm_abi_param *p = &so.params[t];
        const char *name = tlm_so_str(&so, p->name);
        c.lo = p->offset;
        c.hi = p->offset + p->count;
        for (int64_t i = c.lo; i < c.hi; i++) c.dir[i] = c.g[i];
        double dn = scale_to_params(&c, c.lo, c.hi);
        check_direction(&c, name, true, dn, &worst_grad);
        for (int k = 0; k < NRANDOM; k++) {
            for (int64_t i = c.lo; i < c.hi; i++) c.dir[i] = tlm_rng_normal(&rng);
            dn = scale_to_params(&c, c.lo, c.hi);
            check_direction(&c, name, false, dn, &worst_rand);
        }
        for (int64_t i = c.lo; i < c.hi; i++) c.dir[i] = 0;
    }
    c.lo = 0;
    c.hi = n;
    for (int64_t i = 0; i < n; i++) c.dir[i] = c.g[i];
    check_direction(&c, "all tensors, the gradient", true, scale_to_params(&c, 0, n), &worst_grad);
    for (int k = 0; k < NGLOBAL; k++) {
        double dn2 = 0;
        for (uint32_t t = 0; t < so.header->nparams; t++) {
            const tlm_abi_param *p = &so.params[t];
            for (int64_t i = p->offset; i < p->offset + p->count; i++) c.dir[i] = tlm_rng_normal(&rng);
            double dn = scale_to_params(&c, p->offset, p->offset + p->count);
            dn2 += dn * dn;
        }
        char what[64];
        snprintf(what, sizeof what, "all tensors, random direction %d", k + 1);
        check_direction(&c, what, false, sqrt(dn2), &worst_rand);
        memset(c.dir, 0, (size_t)n * sizeof *c.dir);
    }
    printf("  %u gradient directions: worst |fd - g.d| / |g.d| %.1e (bound %.0e)\n", so.header->nparams + 1, worst_grad,
           GRAD_DIR_TOL);
    printf("  %u random directions: worst |fd - g.d| / (||g|| ||d||) %.1e (bound %.0e)\n",
           NRANDOM * so.header->nparams + NGLOBAL, worst_rand, RANDOM_DIR_TOL);
    free(c.tokens), free(c.targets), free(c.p0), free(c.g), free(c.dir);
    tlm_model_destroy(&c.m);
    tlm_so_close(&so);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: test_model_fd MODEL.so...\n", stderr);
        return 2;
    }
    /* one thread: these models are small, and OpenMP's waiting threads
     * make a loaded machine very slow */
    tlm_set_num_threads(1);
    for (int i = 1; i < argc; i++) check_model(argv[i]);
    return test_finish("test_model_fd");
}
