/* The dense bf16 tensor-core peak of the GPUs we know, the denominator of
 * MFU. A GPU not in the table gets 0, and the progress line then shows no
 * MFU rather than a wrong one. Never the "with sparsity" figures. */
#ifndef TLM_GPU_PEAKS_H
#define TLM_GPU_PEAKS_H

/* TFLOP/s for a device name as the driver reports it ("NVIDIA H200"), 0
 * when unknown. */
double tlm_gpu_peak_bf16_tflops(const char *name);

#endif
