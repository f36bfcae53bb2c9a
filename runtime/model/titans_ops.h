/* The interpreter's cases for the titans mixer (included by model.c). */
#ifndef TLM_TITANS_OPS_H
#define TLM_TITANS_OPS_H

static void titans_op(tlm_model *m, const tlm_abi_op *op, float *in0, float *in1, float *in2, float *in3,
                      float *out0, float *out1, float *out2) {
    (void)m, (void)op, (void)in0, (void)in1, (void)in2, (void)in3, (void)out0, (void)out1, (void)out2;
    fprintf(stderr, "tlm-run: this runtime cannot run titans models yet\n");
    abort();
}

#endif
