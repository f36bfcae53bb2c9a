/* The float64 reference is itself right: its backward (ref_bwd_data,
 * ref_bwd_weight) matches central finite differences of its forward, for
 * the loss L = sum(c * y), y = MLP(x) with random c (so dout = c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_check.h"
#include "mlp_reference.h"

enum { D = 5, W = 7, ROWS = 3 };

typedef struct {
    tlm_mlp kind;
    double x[ROWS * D], wg[W * D], wu[W * D], wd[D * W], c[ROWS * D];
} problem;

static double loss(const problem *p) {
    double pg[ROWS * W], pu[ROWS * W], y[ROWS * D] = {0};
    ref_fwd(p->kind, D, W, ROWS, p->x, p->wg, p->wu, p->wd, pg, pu, y);
    double l = 0;
    for (int i = 0; i < ROWS * D; i++) l += p->c[i] * y[i];
    return l;
}

/* L as a function of the pre-activations directly. */
static double loss_from_pre(const problem *p, const double *pg, const double *pu) {
    double l = 0;
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < D; i++) {
            double y = 0;
            for (int j = 0; j < W; j++) y += ref_activation(p->kind, pg[r * W + j], pu[r * W + j]) * p->wd[i * W + j];
            l += p->c[r * D + i] * y;
        }
    return l;
}

static int fails, checks;

static void expect(const char *what, int index, double analytic, double numeric) {
    checks++;
    if (fabs(analytic - numeric) > 1e-6 * (1.0 + fabs(analytic))) {
        fails++;
        printf("FAIL %s[%d]: analytic %.10g, finite difference %.10g\n", what, index, analytic, numeric);
    }
}

/* Central difference of L in each element of `param` (n of them). */
static void check_param(problem *p, const char *what, double *param, int n, const double *analytic) {
    const double h = 1e-6;
    for (int i = 0; i < n; i++) {
        double keep = param[i];
        param[i] = keep + h;
        double up = loss(p);
        param[i] = keep - h;
        double down = loss(p);
        param[i] = keep;
        expect(what, i, analytic[i], (up - down) / (2 * h));
    }
}

static void check_kind(tlm_mlp kind, uint64_t *rng) {
    problem p;
    p.kind = kind;
    double *all[] = {p.x, p.wg, p.wu, p.wd, p.c};
    int sizes[] = {ROWS * D, W * D, W * D, D * W, ROWS * D};
    for (int a = 0; a < 5; a++)
        for (int i = 0; i < sizes[a]; i++) all[a][i] = test_uniform(rng, -1.5, 1.5);

    double pg[ROWS * W], pu[ROWS * W], y[ROWS * D] = {0};
    ref_fwd(kind, D, W, ROWS, p.x, p.wg, p.wu, p.wd, pg, pu, y);
    double dpg[ROWS * W], dpu[ROWS * W], dx[ROWS * D];
    ref_bwd_data(kind, D, W, ROWS, p.wg, p.wu, p.wd, pg, pu, p.c, dpg, dpu, dx);
    double dwg[W * D] = {0}, dwu[W * D] = {0}, dwd[D * W] = {0};
    ref_bwd_weight(kind, D, W, ROWS, p.x, pg, pu, p.c, dpg, dpu, dwg, dwu, dwd);

    int before = fails;
    check_param(&p, "dx", p.x, ROWS * D, dx);
    if (kind == TLM_MLP_SWIGLU) check_param(&p, "dw_gate", p.wg, W * D, dwg);
    check_param(&p, "dw_up", p.wu, W * D, dwu);
    check_param(&p, "dw_down", p.wd, D * W, dwd);
  /* d_pre_gate / d_pre_up against L(pre_gate, pre_up). */
    const double h = 1e-6;
    for (int which = kind == TLM_MLP_SWIGLU ? 0 : 1; which < 2; which++) {
        double *pre = which == 0 ? pg : pu, *grad = which == 0 ? dpg : dpu;
        for (int i = 0; i < ROWS * W; i++) {
            double keep = pre[i];
            pre[i] = keep + h;
            double l_up = loss_from_pre(&p, pg, pu);
            pre[i] = keep - h;
            double l_down = loss_from_pre(&p, pg, pu);
            pre[i] = keep;
            expect(which == 0 ? "d_pre_gate" : "d_pre_up", i, grad[i], (l_up - l_down) / (2 * h));
        }
    }
    printf("%s %s reference backward vs finite differences (D=%d W=%d rows=%d)\n", fails == before ? "ok  " : "FAIL",
           kind == TLM_MLP_SWIGLU ? "swiglu" : "gelu", D, W, ROWS);
}

int main(void) {
    uint64_t rng = test_seed();
    check_kind(TLM_MLP_SWIGLU, &rng);
    check_kind(TLM_MLP_GELU, &rng);
    printf("%s: %d of %d gradient elements off\n", fails ? "FAIL" : "PASS", fails, checks);
    return fails != 0;
}
