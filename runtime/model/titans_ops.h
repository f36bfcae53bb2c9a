/* The interpreter's cases for the titans mixer (included by model.c):
 * the activations around the memory and the memory itself.
 *
 *   q, k = l2norm(silu(x Wq)), l2norm(silu(x Wk)); v = silu(x Wv)
 *   theta = inner_lr sigmoid(x Wθ); eta = sigmoid(x Wη); alpha = sigmoid(x Wα)
 *
 * The gates are stored as three [N, H] blocks (theta, eta, alpha), the
 * layout tlm_titans_forward reads. */
#ifndef TLM_TITANS_OPS_H
#define TLM_TITANS_OPS_H

#define TLM_L2NORM_EPS 1e-6f

static float sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }

static void titans_op(tlm_model *m, const tlm_abi_op *op, float *in0, float *in1, float *in2, float *in3,
                      float *out0, float *out1, float *out2) {
    const tlm_abi_config *am = m->so->config;
    const int B = (int)m->run_B, T = (int)m->run_T, N = B * T;
    const int H = (int)am->heads, hd = (int)am->head_dim, A = H * hd;
    const float lr_max = (float)am->inner_lr;
    const size_t NH = (size_t)N * (size_t)H;
    switch (op->kind) {
    case TLM_OP_MEM_ACT:
        tlm_silu_forward(out0, in0, (size_t)N * 3 * (size_t)A);
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *act = out0 + (size_t)n * 3 * A;
            float *qkv = out1 + (size_t)n * 3 * A, *rnorm = out2 + (size_t)n * 2 * H;
            tlm_l2norm_forward(qkv, rnorm, act, H, hd, TLM_L2NORM_EPS);
            tlm_l2norm_forward(qkv + A, rnorm + H, act + A, H, hd, TLM_L2NORM_EPS);
            memcpy(qkv + 2 * A, act + 2 * A, (size_t)A * sizeof(float));
        }
        break;
    case TLM_OP_MEM_ACT_BACKWARD:
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            size_t at = (size_t)n * 3 * A;
            const float *rnorm = in3 + (size_t)n * 2 * H;
            tlm_l2norm_backward(out0 + at, in0 + at, in2 + at, rnorm, H, hd);
            tlm_l2norm_backward(out0 + at + A, in0 + at + A, in2 + at + A, rnorm + H, H, hd);
            memcpy(out0 + at + 2 * A, in0 + at + 2 * A, (size_t)A * sizeof(float));
        }
        tlm_silu_backward(out0, out0, in1, (size_t)N * 3 * (size_t)A);
        break;
    case TLM_OP_MEM_GATES:
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++) {
                const float *pre = in0 + (size_t)n * 3 * H;
                out0[(size_t)n * H + h] = lr_max * sigmoid_of(pre[h]);
                out0[NH + (size_t)n * H + h] = sigmoid_of(pre[H + h]);
                out0[2 * NH + (size_t)n * H + h] = sigmoid_of(pre[2 * H + h]);
            }
        break;
    case TLM_OP_MEM_GATES_BACKWARD:
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++) {
                float *dpre = out0 + (size_t)n * 3 * H;
                size_t i = (size_t)n * H + h;
                float s = in1[i] / lr_max, e = in1[NH + i], a = in1[2 * NH + i];
                dpre[h] = in0[i] * lr_max * s * (1 - s);
                dpre[H + h] = in0[NH + i] * e * (1 - e);
                dpre[2 * H + h] = in0[2 * NH + i] * a * (1 - a);
            }
        break;
    case TLM_OP_TITANS: {
        int64_t have = tlm_buffer_bytes(&m->so->buffers[op->out[1]], m->run_B, m->run_T) / 4;
        size_t need = tlm_titans_saved_floats(B, T, H, hd, (int)am->chunk);
        if ((size_t)have < need) {
            fprintf(stderr, "tlm-run: internal error: the memory checkpoint buffer holds %lld floats, "
                    "the memory needs %zu\n", (long long)have, need);
            abort();
        }
        tlm_titans_forward(out0, out1, in0, in0 + A, in0 + 2 * A, 3 * A, in1, in1 + NH, in1 + 2 * NH, B, T, H, hd,
                           (int)am->chunk);
        break;
    }
    case TLM_OP_TITANS_BACKWARD:
        tlm_titans_backward(out0, out0 + A, out0 + 2 * A, out1, out1 + NH, out1 + 2 * NH, in0, in3, in1, in1 + A,
                            in1 + 2 * A, 3 * A, in2, in2 + NH, in2 + 2 * NH, B, T, H, hd, (int)am->chunk);
        break;
    default:
        break;
    }
    (void)out2;
}

#endif
