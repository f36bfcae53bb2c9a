/* The optimizers and the whole-gradient ops on the device, mirroring
 * tlm_rt/optim.h: the same arguments, update rules and preconditions as the
 * CPU functions of the same name, with the GPU context first, device
 * addresses for the arrays and err last. The kernels are runtime/gpu/
 * {adamw,sgd,grad_norm}.cu; tests/gpu/test_gpu_optim.c compares each with
 * its CPU function on the emulated device.
 *
 * Launches are asynchronous: false means a launch failed (err says why); a
 * kernel's own failure shows at the next tlm_device_sync. The norms wait for
 * their result (they copy it to the host). */
#ifndef TLM_GPU_OPTIM_H
#define TLM_GPU_OPTIM_H

#include <stddef.h>

#include "gpu.h"
#include "tlm_rt/optim.h"

/* torch.optim.AdamW over p, grad, m, v [n]; step t counts from 1. The step's
 * scalars are formed on the host as tlm_adamw_update forms them. */
bool tlm_gpu_adamw_update(tlm_gpu *g, const tlm_adamw *opt, tlm_dptr p, tlm_dptr grad, tlm_dptr m, tlm_dptr v, size_t n,
                          float lr, long t, bool decay, tlm_err *err);
/* The same over spans of one block (all four arrays indexed by offset),
 * each gradient read times grad_scale (the clipping's: tlm_clip_scale). */
bool tlm_gpu_adamw_update_spans(tlm_gpu *g, const tlm_adamw *opt, tlm_dptr p, tlm_dptr grad, float grad_scale,
                                tlm_dptr m, tlm_dptr v, const tlm_param_span *spans, int nspans, float lr, long t,
                                tlm_err *err);

/* torch.optim.SGD; buf may be 0 when opt->momentum is 0. */
bool tlm_gpu_sgd_update(tlm_gpu *g, const tlm_sgd *opt, tlm_dptr p, tlm_dptr grad, tlm_dptr buf, size_t n, float lr,
                        long t, bool decay, tlm_err *err);
bool tlm_gpu_sgd_update_spans(tlm_gpu *g, const tlm_sgd *opt, tlm_dptr p, tlm_dptr grad, float grad_scale, tlm_dptr buf,
                              const tlm_param_span *spans, int nspans, float lr, long t, tlm_err *err);

/* The global L2 norm of grad[0..n), or -1 with err when the device fails.
 * Deterministic: the sum of squares is taken in double over chunks that
 * depend on n alone (runtime/gpu/grad_norm.cu describes the order), so
 * the same gradient gives the same bits on every run and any grid. It need
 * not equal tlm_grad_norm's bits (the order differs); it agrees to about
 * 1e-12 relative. */
double tlm_gpu_grad_norm(tlm_gpu *g, tlm_dptr grad, size_t n, tlm_err *err);
/* sum[0..n) += x[0..n) scale, each product rounded first (times 1 is
 * exact): the micro-batches' and the chain's sums (scale 1), a slow
 * parameter's gradient sum (the clipping's scale). */
bool tlm_gpu_add(tlm_gpu *g, tlm_dptr sum, tlm_dptr x, float scale, size_t n, tlm_err *err);

#endif
