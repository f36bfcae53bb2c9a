/* The Titans memory op (runtime/ops/titans.c) against a float64 reference.
 *
 * The reference is the recurrence written the plain way: a token loop in
 * double that keeps the whole (M, S) history, so a chunk's M0 is just
 * "the state after token c0 - 1", with no checkpoints or recomputation.
 *
 *   forward:  y of the op (float32) vs the reference, max |dy| / max |y|.
 *   backward: with a random R as dy, the scalar L = sum(y * R) of the
 *             reference; each of dq, dk, dv, dtheta, deta, dalpha at 48
 *             random entries against the central difference of L (in double,
 *             step 1e-5, so the difference itself is exact to ~1e-9); error
 *             max |analytic - fd| / max |fd| over those entries.
 * Inputs at the scales a model feeds: q, k unit vectors, v in (-1, 1),
 * theta in (0.001, 0.1), eta and alpha in (0.05, 0.95). Odd sizes: D = 5, 8,
 * 24; T = 1, 7, 33, 64; chunk C = 1, 2, 5, 16, 64 (C > T, and T not a
 * multiple of C; segments of 16 and 20 tokens, a partial last one); B = 2,
 * H = 3; packed qkv and separate tensors alternately.
 *
 * The float32 op lands near 1e-7 on both (worst 4e-7); a dropped or wrong
 * term (the chunk-start gradient of M0, a decay factor, M_t for M_{t-1})
 * gives 1e-2 or more and even a 0.1% scale error on one gradient gives
 * 1e-3, so the bounds (5e-6 forward, 2e-5 gradients) separate them.
 *
 * Also: bit-identical results for 1 and 2 threads (D = 24 and 128); the forward writes
 * exactly tlm_titans_saved_floats() floats of `saved` (all of them, none
 * past); the backward writes every entry of its gradients.
 *
 * `test_titans --dump OUT.safetensors` instead writes inputs, outputs and
 * gradients for tests/reference/check_titans.py (the PyTorch autograd
 * check). */
#include "test_util.h"
#include "titans_tokenwise.h"

#define FWD_TOL 5e-6
#define GRAD_TOL 2e-5
#define FD_STEP 1e-5
#define SAMPLES 96
#define TOK_TOL 1e-5

static tlm_rng g_rng;

/* One problem. q, k, v live in one block `x` of 3*B*T*H*D floats: packed
 * [B,T,3,H,D] or three [B,T,H,D] tensors one after another; the scalars in
 * `s` = theta, eta, alpha [B,T,H] one after another. xd, sd: the same in
 * double (what the reference and the finite differences move); dx, ds: the
 * op's gradients, at the same offsets. */
#define SCRATCH_THREADS 8

typedef struct {
    int B, T, H, D, C, stride;
    size_t qo, ko, vo; /* offsets of q, k, v in x */
    size_t nx, ns;
    float *x, *s, *dx, *ds, *y, *dy, *saved;
    float *scratch;      /* the backward's, for up to SCRATCH_THREADS threads */
    double *xd, *sd;
    double *Mh, *Sh, *e; /* reference history, (T+1) D^2 each */
} prob;

static prob make_prob(int B, int T, int H, int D, int C, bool packed) {
    prob p = {.B = B, .T = T, .H = H, .D = D, .C = C};
    size_t n = (size_t)B * T * H * D, BTH = (size_t)B * T * H;
    p.nx = 3 * n;
    p.ns = 3 * BTH;
    if (packed) {
        p.stride = 3 * H * D;
        p.qo = 0, p.ko = (size_t)H * D, p.vo = 2 * (size_t)H * D;
    } else {
        p.stride = H * D;
        p.qo = 0, p.ko = n, p.vo = 2 * n;
    }
    p.x = falloc(p.nx);
    p.s = falloc(p.ns);
    p.dx = falloc(p.nx);
    p.ds = falloc(p.ns);
    p.y = falloc(n);
    p.dy = falloc(n);
    p.saved = falloc(tlm_titans_saved_floats(B, T, H, D, C));
    p.scratch = falloc(tlm_titans_scratch_floats(D, C) * SCRATCH_THREADS);
    p.xd = malloc(p.nx * sizeof(double));
    p.sd = malloc(p.ns * sizeof(double));
    size_t DD = (size_t)D * D;
    p.Mh = malloc((T + 1) * DD * sizeof(double));
    p.Sh = malloc((T + 1) * DD * sizeof(double));
    p.e = malloc(D * sizeof(double));
    if (!p.xd || !p.sd || !p.Mh || !p.Sh || !p.e) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    /* q, k: random directions; v in (-1, 1) */
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < H; h++) {
                size_t at = ((size_t)b * T + t) * p.stride + (size_t)h * D;
                float *qk[2] = {p.x + p.qo + at, p.x + p.ko + at};
                for (int w = 0; w < 2; w++) {
                    tlm_rng_fill_normal(&g_rng, qk[w], D, 0.0f, 1.0f);
                    double ss = dot_d(qk[w], qk[w], D);
                    float r = (float)(1.0 / sqrt(ss));
                    for (int i = 0; i < D; i++) qk[w][i] *= r;
                }
                fill_uniform(&g_rng, p.x + p.vo + at, D, -1.0f, 1.0f);
            }
        }
    }
    fill_uniform(&g_rng, p.s, BTH, 0.001f, 0.1f);          /* theta */
    fill_uniform(&g_rng, p.s + BTH, 2 * BTH, 0.05f, 0.95f); /* eta, alpha */
    fill_uniform(&g_rng, p.dy, n, -1.0f, 1.0f);
    for (size_t i = 0; i < p.nx; i++) p.xd[i] = p.x[i];
    for (size_t i = 0; i < p.ns; i++) p.sd[i] = p.s[i];
    return p;
}

static void free_prob(prob *p) {
    free(p->x), free(p->s), free(p->dx), free(p->ds), free(p->y);
    free(p->dy), free(p->saved), free(p->xd), free(p->sd), free(p->Mh);
    free(p->Sh), free(p->e), free(p->scratch);
}

static void op_forward(prob *p) {
    size_t BTH = (size_t)p->B * p->T * p->H;
    tlm_titans_forward(p->y, p->saved, p->x + p->qo, p->x + p->ko, p->x + p->vo, p->stride, p->s, p->s + BTH,
                       p->s + 2 * BTH, p->B, p->T, p->H, p->D, p->C);
}

static void op_backward(prob *p) {
    int threads = tlm_get_num_threads();
    if (threads > SCRATCH_THREADS) threads = SCRATCH_THREADS;
    size_t BTH = (size_t)p->B * p->T * p->H;
    tlm_titans_backward(p->dx + p->qo, p->dx + p->ko, p->dx + p->vo, p->ds, p->ds + BTH, p->ds + 2 * BTH, p->dy,
                        p->saved, p->x + p->qo, p->x + p->ko, p->x + p->vo, p->stride, p->s, p->s + BTH, p->s + 2 * BTH,
                        p->B, p->T, p->H, p->D, p->C, p->scratch, threads);
}

/* The reference for one (b, h), from xd and sd: writes y_t into y (double,
 * [B,T,H*D], when not NULL) and returns sum_t y_t . dy_t. */
static double ref_pair(prob *p, int b, int h, double *y) {
    const int T = p->T, H = p->H, D = p->D;
    const size_t DD = (size_t)D * D, BTH = (size_t)p->B * T * H;
    memset(p->Mh, 0, DD * sizeof(double)); /* Mh[t+1]: after token t */
    memset(p->Sh, 0, DD * sizeof(double));
    double L = 0.0;
    for (int t = 0; t < T; t++) {
        size_t at = ((size_t)b * T + t) * p->stride + (size_t)h * D;
        const double *q = p->xd + p->qo + at, *k = p->xd + p->ko + at;
        const double *v = p->xd + p->vo + at;
        size_t th = ((size_t)b * T + t) * H + h;
        double theta = p->sd[th], eta = p->sd[BTH + th];
        double alpha = p->sd[2 * BTH + th];
        const double *M0 = p->Mh + (size_t)(t - t % p->C) * DD;
        const double *Mp = p->Mh + (size_t)t * DD, *Sp = p->Sh + (size_t)t * DD;
        double *M = p->Mh + (size_t)(t + 1) * DD, *S = p->Sh + (size_t)(t + 1) * DD;
        for (int i = 0; i < D; i++) {
            double a = -v[i];
            for (int j = 0; j < D; j++) a += M0[i * D + j] * k[j];
            p->e[i] = a;
        }
        for (int i = 0; i < D; i++) {
            double yi = 0.0;
            for (int j = 0; j < D; j++) {
                double g = 2.0 * p->e[i] * k[j];
                S[i * D + j] = eta * Sp[i * D + j] - theta * g;
                M[i * D + j] = (1.0 - alpha) * Mp[i * D + j] + S[i * D + j];
                yi += M[i * D + j] * q[j];
            }
            size_t yo = ((size_t)b * T + t) * H * D + (size_t)h * D + i;
            if (y) y[yo] = yi;
            L += yi * p->dy[yo];
        }
    }
    return L;
}

/* Central difference of L wrt *x (an entry of xd or sd of pair b, h). */
static double fd_at(prob *p, double *x, int b, int h) {
    double old = *x;
    *x = old + FD_STEP;
    double lp = ref_pair(p, b, h, NULL);
    *x = old - FD_STEP;
    double lm = ref_pair(p, b, h, NULL);
    *x = old;
    return (lp - lm) / (2.0 * FD_STEP);
}

/* which: 0..2 = q, k, v; 3..5 = theta, eta, alpha. Returns the relative
 * error over SAMPLES random entries; *maxfd gets max |fd|. */
static double grad_err(prob *p, int which, double *maxfd) {
    const int T = p->T, H = p->H, D = p->D;
    const size_t BTH = (size_t)p->B * T * H;
    double diff = 0.0, mfd = 0.0;
    for (int n = 0; n < SAMPLES; n++) {
        int b = (int)tlm_rng_below(&g_rng, p->B);
        int t = (int)tlm_rng_below(&g_rng, T);
        int h = (int)tlm_rng_below(&g_rng, H);
        double fd;
        float an;
        if (which < 3) {
            size_t off = (which == 0   ? p->qo
                          : which == 1 ? p->ko
                                       : p->vo) +
                         ((size_t)b * T + t) * p->stride + (size_t)h * D + tlm_rng_below(&g_rng, D);
            fd = fd_at(p, p->xd + off, b, h);
            an = p->dx[off];
        } else {
            size_t off = (which - 3) * BTH + ((size_t)b * T + t) * H + h;
            fd = fd_at(p, p->sd + off, b, h);
            an = p->ds[off];
        }
        diff = fmax(diff, fabs(an - fd));
        mfd = fmax(mfd, fabs(fd));
    }
    *maxfd = mfd;
    return diff / (mfd > 1e-6 ? mfd : 1e-6);
}

static bool all_finite(const float *a, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return false;
    }
    return true;
}

static double worst[7];
static const char *wnames[7] = {"y", "dq", "dk", "dv", "dtheta", "deta", "dalpha"};

static void check_case(int B, int T, int H, int D, int C, bool packed) {
    prob p = make_prob(B, T, H, D, C, packed);
    size_t n = (size_t)B * T * H * D;
    op_forward(&p);
    double *yr = malloc(n * sizeof(double));
    if (!yr) exit(2);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) ref_pair(&p, b, h, yr);
    }
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(p.y[i] - yr[i]));
        m = fmax(m, fabs(yr[i]));
    }
    double err[7];
    err[0] = d / (m > 0 ? m : 1.0);
    /* gradients are WRITTEN: NaN left anywhere would be a hole */
    fill_const(p.dx, p.nx, NAN);
    fill_const(p.ds, p.ns, NAN);
    op_backward(&p);
    CHECK(all_finite(p.dx, p.nx) && all_finite(p.ds, p.ns), "D=%d T=%d C=%d: backward left gradient entries unwritten",
          D, T, C);
    for (int w = 0; w < 6; w++) {
        double mfd;
        err[w + 1] = grad_err(&p, w, &mfd);
        /* with T = 1, M_{-1} = S_{-1} = 0: deta, dalpha are exactly 0 */
        bool zero = T == 1 && (w == 4 || w == 5);
        if (!zero) { CHECK(mfd > 1e-4, "D=%d T=%d C=%d: d%s ~ 0, check is vacuous", D, T, C, wnames[w + 1]); }
    }
    printf("  D=%2d T=%2d C=%2d %s  y %.1e  dq %.1e dk %.1e dv %.1e  dth %.1e "
           "deta %.1e dalpha %.1e\n",
           D, T, C, packed ? "qkv" : "sep", err[0], err[1], err[2], err[3], err[4], err[5], err[6]);
    CHECK(err[0] < FWD_TOL, "D=%d T=%d C=%d: y off by %.3g", D, T, C, err[0]);
    for (int w = 1; w < 7; w++) {
        CHECK(err[w] < GRAD_TOL, "D=%d T=%d C=%d: %s off by %.3g", D, T, C, wnames[w], err[w]);
    }
    for (int w = 0; w < 7; w++) worst[w] = fmax(worst[w], err[w]);
    free(yr);
    free_prob(&p);
}

/* The op against the token-by-token form above, on the same inputs and a
 * random dy: max |op - old| / max(max |old|, 1e-3) per tensor (y and each
 * gradient) under TOK_TOL. The floor 1e-3 only matters for a tensor that is
 * all but zero (none here: every max is >= 1e-2). */
static double worst_tok[7];

static void check_tokenwise(int B, int T, int H, int D, int C, bool packed) {
    prob p = make_prob(B, T, H, D, C, packed);
    size_t n = (size_t)B * T * H * D, BTH = (size_t)B * T * H;
    float *y0 = falloc(n), *dx0 = falloc(p.nx), *ds0 = falloc(p.ns);
    float *saved0 = falloc(tok_saved_floats(B, T, H, D, C)), *scr0 = falloc(tok_scratch_floats(D, C));
    const float *q = p.x + p.qo, *k = p.x + p.ko, *v = p.x + p.vo;
    tok_forward(y0, saved0, q, k, v, p.stride, p.s, p.s + BTH, p.s + 2 * BTH, B, T, H, D, C);
    memset(dx0, 0, p.nx * sizeof(float));
    tok_backward(dx0 + p.qo, dx0 + p.ko, dx0 + p.vo, ds0, ds0 + BTH, ds0 + 2 * BTH, p.dy, saved0, q, k, v, p.stride,
                 p.s, p.s + BTH, p.s + 2 * BTH, B, T, H, D, C, scr0, 1);
    op_forward(&p);
    memset(p.dx, 0, p.nx * sizeof(float));
    op_backward(&p);
    /* the saved layout is shared with the device kernel: the errors are the
     * same (up to rounding) and so are the checkpoints */
    size_t nsv = tlm_titans_saved_floats(B, T, H, D, C);
    CHECK(nsv == tok_saved_floats(B, T, H, D, C), "saved size changed");
    const float *parts[7][2] = {
        {y0, p.y},   {dx0 + p.qo, p.dx + p.qo}, {dx0 + p.ko, p.dx + p.ko},      {dx0 + p.vo, p.dx + p.vo},
        {ds0, p.ds}, {ds0 + BTH, p.ds + BTH},   {ds0 + 2 * BTH, p.ds + 2 * BTH}};
    double err[8];
    for (int w = 0; w < 7; w++) {
        size_t len = w < 4 ? n : BTH;
        /* in a packed qkv the parts interleave: walk the tensor's own rows */
        double d = 0.0, m = 0.0;
        for (size_t i = 0; i < len; i++) {
            size_t at = i;
            if (w >= 1 && w <= 3 && packed) at = (i / ((size_t)H * D)) * p.stride + i % ((size_t)H * D);
            d = fmax(d, fabs((double)parts[w][1][at] - parts[w][0][at]));
            m = fmax(m, fabs((double)parts[w][0][at]));
        }
        err[w] = d / fmax(m, 1e-3);
    }
    double ds = 0.0, ms = 0.0;
    for (size_t i = 0; i < nsv; i++) {
        ds = fmax(ds, fabs((double)p.saved[i] - saved0[i]));
        ms = fmax(ms, fabs((double)saved0[i]));
    }
    err[7] = ds / fmax(ms, 1e-3);
    printf("  B=%d T=%3d H=%d D=%2d C=%3d %s  y %.1e dq %.1e dk %.1e dv %.1e dth %.1e deta %.1e dalpha %.1e saved "
           "%.1e\n",
           B, T, H, D, C, packed ? "qkv" : "sep", err[0], err[1], err[2], err[3], err[4], err[5], err[6], err[7]);
    for (int w = 0; w < 7; w++) {
        CHECK(err[w] < TOK_TOL, "D=%d T=%d C=%d: %s off the token-by-token op by %.3g", D, T, C, wnames[w], err[w]);
        worst_tok[w] = fmax(worst_tok[w], err[w]);
    }
    CHECK(err[7] < TOK_TOL, "D=%d T=%d C=%d: saved off the token-by-token op by %.3g", D, T, C, err[7]);
    free(y0), free(dx0), free(ds0), free(saved0), free(scr0);
    free_prob(&p);
}

/* Forward and backward at 1 and 2 threads give the same bits. */
static void check_threads(int B, int T, int H, int D, int C) {
    int saved_threads = tlm_get_num_threads();
    prob p = make_prob(B, T, H, D, C, true);
    size_t n = (size_t)p.B * p.T * p.H * p.D;
    size_t ns = tlm_titans_saved_floats(p.B, p.T, p.H, p.D, p.C);
    float *ref[4];
    for (int run = 0; run < 2; run++) {
        tlm_set_num_threads(run + 1);
        op_forward(&p);
        op_backward(&p);
        if (run == 0) {
            ref[0] = falloc(n), ref[1] = falloc(ns);
            ref[2] = falloc(p.nx), ref[3] = falloc(p.ns);
            memcpy(ref[0], p.y, n * sizeof(float));
            memcpy(ref[1], p.saved, ns * sizeof(float));
            memcpy(ref[2], p.dx, p.nx * sizeof(float));
            memcpy(ref[3], p.ds, p.ns * sizeof(float));
        } else {
            bool same = !memcmp(ref[0], p.y, n * sizeof(float)) && !memcmp(ref[1], p.saved, ns * sizeof(float)) &&
                        !memcmp(ref[2], p.dx, p.nx * sizeof(float)) && !memcmp(ref[3], p.ds, p.ns * sizeof(float));
            printf("  1 vs 2 threads (B=%d T=%d H=%d D=%d C=%d): %s\n", B, T, H, D, C,
                   same ? "bit-identical" : "DIFFERENT");
            CHECK(same, "results depend on the thread count");
        }
    }
    for (int i = 0; i < 4; i++) free(ref[i]);
    free_prob(&p);
    tlm_set_num_threads(saved_threads);
}

/* The forward writes every float of its tlm_titans_saved_floats() and
 * nothing past it; the size follows the documented layout. */
static void check_saved(void) {
    const int cases[][5] = {{2, 33, 3, 5, 5}, {2, 64, 3, 8, 16}, {1, 7, 2, 24, 64}, {2, 40, 1, 6, 1}};
    const size_t guard = 4096;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int B = cases[c][0], T = cases[c][1], H = cases[c][2], D = cases[c][3];
        int C = cases[c][4];
        int K = C * ((16 + C - 1) / C), nseg = (T + K - 1) / K;
        size_t want = (size_t)B * H * ((size_t)nseg * 2 * D * D + (size_t)T * D);
        size_t got = tlm_titans_saved_floats(B, T, H, D, C);
        CHECK(got == want, "saved floats %zu, expected %zu", got, want);
        prob p = make_prob(B, T, H, D, C, c % 2 == 0);
        free(p.saved);
        p.saved = falloc(got + guard);
        fill_const(p.saved, got, NAN);
        fill_const(p.saved + got, guard, 12345.0f);
        op_forward(&p);
        bool tail = true;
        for (size_t i = 0; i < guard; i++) tail &= p.saved[got + i] == 12345.0f;
        CHECK(all_finite(p.saved, got), "forward left part of saved unwritten");
        CHECK(tail, "forward wrote past tlm_titans_saved_floats");
        free_prob(&p);
    }
    size_t tiny = tlm_titans_saved_floats(8, 256, 4, 64, 16);
    printf("  saved size: exact for 4 shapes; B=8 T=256 H=4 D=64 C=16: %zu floats "
           "(%.1f MB)\n",
           tiny, tiny * 4.0 / 1e6);
    CHECK(tiny * 4 < 64u << 20, "saved state too big for the tiny model");
}

/* ---- --dump: inputs, outputs and gradients for check_titans.py ---------- */

static int dump(const char *path) {
    /* B, T, H, D, C: a small shape and the tiny model's head, C = 1 and 16;
     * C = 3 (chunks inside a segment), the 440M's C = 64 with T not a
     * multiple of it, and C = 100 (a chunk in two blocks) */
    static const int cases[7][5] = {{2, 40, 2, 16, 1}, {2, 40, 2, 16, 16},  {1, 256, 2, 64, 1},  {1, 256, 2, 64, 16},
                                    {2, 40, 2, 16, 3}, {1, 200, 2, 64, 64}, {1, 150, 2, 16, 100}};
    enum { NCASE = 7, PER = 6 };
    static tlm_st_tensor t[NCASE * PER];
    static char names[NCASE * PER][32];
    static prob ps[NCASE];
    int nt = 0;
    for (int c = 0; c < NCASE; c++) {
        const int *s = cases[c];
        prob *p = &ps[c];
        *p = make_prob(s[0], s[1], s[2], s[3], s[4], true);
        op_forward(p);
        op_backward(p);
        const int64_t B = s[0], T = s[1], H = s[2], D = s[3];
        struct {
            const char *n;
            const float *d;
            int nd;
            int64_t sh[5];
        } ent[PER] = {
            {"qkv", p->x, 5, {B, T, 3, H, D}},   {"scalars", p->s, 4, {3, B, T, H}}, /* theta, eta, alpha */
            {"dy", p->dy, 3, {B, T, H * D}},     {"y", p->y, 3, {B, T, H * D}},
            {"dqkv", p->dx, 5, {B, T, 3, H, D}}, {"dscalars", p->ds, 4, {3, B, T, H}},
        };
        for (int e = 0; e < PER; e++) {
            snprintf(names[nt], sizeof names[nt], "c%d.%s", c, ent[e].n);
            t[nt] = (tlm_st_tensor){names[nt], TLM_F32, ent[e].nd, {0}, ent[e].d, 0};
            for (int i = 0; i < ent[e].nd; i++) t[nt].shape[i] = ent[e].sh[i];
            nt++;
        }
    }
    char cfg[256];
    int len = snprintf(cfg, sizeof cfg, "[");
    for (int c = 0; c < NCASE; c++) {
        len += snprintf(cfg + len, sizeof cfg - len, "%s[%d,%d,%d,%d,%d]", c ? "," : "", cases[c][0], cases[c][1],
                        cases[c][2], cases[c][3], cases[c][4]);
    }
    snprintf(cfg + len, sizeof cfg - len, "]");
    tlm_st_meta meta[1] = {{"cases", cfg}};
    tlm_err err;
    int rc = tlm_st_write(path, t, nt, meta, 1, &err);
    for (int c = 0; c < NCASE; c++) free_prob(&ps[c]);
    if (rc != 0) {
        fprintf(stderr, "test_titans: %s\n", err.msg);
        return 1;
    }
    printf("test_titans: wrote %d tensors (%d cases) to %s\n", nt, NCASE, path);
    return 0;
}

int main(int argc, char **argv) {
    tlm_rng_seed(&g_rng, 20250607);
    if (argc == 3 && !strcmp(argv[1], "--dump")) return dump(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_titans [--dump OUT.safetensors]\n");
        return 2;
    }
    static const int Ds[] = {5, 8, 24}, Ts[] = {1, 7, 33, 64};
    static const int Cs[] = {1, 2, 3, 4, 5, 16, 64, 100};
    printf("forward vs float64 reference, backward vs its finite differences "
           "(B=2 H=3)\n");
    int n = 0;
    for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 4; b++) {
            for (int c = 0; c < 8; c++) check_case(2, Ts[b], 3, Ds[a], Cs[c], n++ % 2);
        }
    }
    printf("worst:");
    for (int w = 0; w < 7; w++) printf(" %s %.1e", wnames[w], worst[w]);
    printf("  (bounds %.0e, %.0e)\n", FWD_TOL, GRAD_TOL);
    check_case(1, 150, 2, 8, 100, false); /* blocks of 64 + 36 in a chunk, a partial chunk */
    check_case(1, 150, 2, 8, 64, true);
    printf("the op vs the token-by-token form (y, gradients, saved; bound %.0e)\n", TOK_TOL);
    static const int tw[][5] = {{2, 256, 2, 64, 16},  {1, 200, 2, 64, 64}, {2, 50, 3, 24, 3}, {1, 37, 2, 16, 4},
                                {1, 230, 2, 16, 100}, {2, 40, 2, 8, 1},    {1, 3, 2, 8, 4},   {1, 70, 1, 32, 200}};
    for (size_t c = 0; c < sizeof tw / sizeof tw[0]; c++)
        check_tokenwise(tw[c][0], tw[c][1], tw[c][2], tw[c][3], tw[c][4], c % 2);
    printf("worst vs token-by-token:");
    for (int w = 0; w < 7; w++) printf(" %s %.1e", wnames[w], worst_tok[w]);
    printf("\n");
    check_threads(3, 70, 3, 24, 5);
    /* D = 128 (the 760M and 1.3B heads): products past OpenBLAS's
     * single-thread threshold, called from the op's threads */
    check_threads(2, 150, 3, 128, 64);
    check_saved();
    return test_finish("test_titans");
}
