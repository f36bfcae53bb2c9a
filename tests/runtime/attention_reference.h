/* Attention's y, lse and gradients against float64 (the equations
 * written out with the full probability matrix), for test_ops_grad.c and
 * test_attention_schedules.c. Include after test_util.h. */
#ifndef TLM_TEST_ATTENTION_REFERENCE_H
#define TLM_TEST_ATTENTION_REFERENCE_H

/* q, k, v (rows `stride` apart), the op's y and lse, and R: the gradient of
 * y the backward was given */
typedef struct {
    int B, T, H, D, stride;
    float *q, *k, *v, *y, *lse, *R;
} att_ctx;

/* The op's y, lse and gradients against the equations in double, written
 * out with the full probability matrix (ops.h's tlm_attention_forward):
 * the blocked kernels must agree at any T and D, across block edges. */
static void check_attention_reference(const att_ctx *c, const float *dq, const float *dk, const float *dv,
                                      const char *name) {
    const int B = c->B, T = c->T, H = c->H, D = c->D, C = H * D, st = c->stride;
    const double scale = 1.0 / sqrt((double)D);
    double *p = calloc((size_t)T * T, sizeof(double)), *ds = calloc((size_t)T * T, sizeof(double));
    double err_y = 0, err_lse = 0, err_d = 0, mag_y = 0, mag_d = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
#define Q(t, d) (double)c->q[((size_t)b * T + (t)) * st + (size_t)h * D + (d)]
#define K(t, d) (double)c->k[((size_t)b * T + (t)) * st + (size_t)h * D + (d)]
#define V(t, d) (double)c->v[((size_t)b * T + (t)) * st + (size_t)h * D + (d)]
#define DY(t, d) (double)c->R[((size_t)b * T + (t)) * C + (size_t)h * D + (d)]
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double sc = 0;
                    for (int d = 0; d < D; d++) sc += Q(t, d) * K(u, d);
                    p[(size_t)t * T + u] = sc * scale;
                    mx = fmax(mx, sc * scale);
                }
                for (int u = 0; u <= t; u++) sum += exp(p[(size_t)t * T + u] - mx);
                double lse = mx + log(sum);
                for (int u = 0; u <= t; u++) p[(size_t)t * T + u] = exp(p[(size_t)t * T + u] - lse);
                err_lse = fmax(err_lse, fabs(lse - c->lse[((size_t)b * T + t) * H + h]));
                double rowdot = 0;
                for (int d = 0; d < D; d++) {
                    double y = 0;
                    for (int u = 0; u <= t; u++) y += p[(size_t)t * T + u] * V(u, d);
                    err_y = fmax(err_y, fabs(y - c->y[((size_t)b * T + t) * C + (size_t)h * D + d]));
                    mag_y = fmax(mag_y, fabs(y));
                    rowdot += DY(t, d) * y;
                }
                for (int u = 0; u <= t; u++) {
                    double dp = 0;
                    for (int d = 0; d < D; d++) dp += DY(t, d) * V(u, d);
                    ds[(size_t)t * T + u] = p[(size_t)t * T + u] * (dp - rowdot) * scale;
                }
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    double gq = 0, gk = 0, gv = 0;
                    for (int u = 0; u <= t; u++) gq += ds[(size_t)t * T + u] * K(u, d);
                    for (int x = t; x < T; x++) {
                        gk += ds[(size_t)x * T + t] * Q(x, d);
                        gv += p[(size_t)x * T + t] * DY(x, d);
                    }
                    size_t i = ((size_t)b * T + t) * st + (size_t)h * D + d;
                    err_d = fmax(err_d, fmax(fabs(gq - dq[i]), fmax(fabs(gk - dk[i]), fabs(gv - dv[i]))));
                    mag_d = fmax(mag_d, fmax(fabs(gq), fmax(fabs(gk), fabs(gv))));
                }
#undef Q
#undef K
#undef V
#undef DY
        }
    printf("  %-16s vs float64 (B=%d T=%d H=%d D=%d): y %.1e  lse %.1e  dqkv %.1e (relative)\n", name, B, T, H, D,
           err_y / mag_y, err_lse, err_d / mag_d);
    CHECK(err_y <= 1e-5 * mag_y, "%s: y off the float64 reference by %.3g", name, err_y);
    CHECK(err_lse <= 1e-5, "%s: lse off the float64 reference by %.3g", name, err_lse);
    CHECK(err_d <= 1e-5 * mag_d, "%s: dq, dk, dv off the float64 reference by %.3g", name, err_d);
    free(p), free(ds);
}

#endif
