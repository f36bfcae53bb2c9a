/* The emulated device's CUDA graphs (device.h, "graphs"): while a capture
 * is under way, device_emu.c records each launch, GEMM, copy and zeroing
 * here instead of running it, and a graph launch runs the records in
 * their order. A launch's argument values are copied into the record as it
 * is made, by the sizes the kernel's own declaration gives (cuda_emu.h's
 * tlm_emu_arg_sizes_<kernel>), as CUDA copies kernel parameters at
 * capture: a host value changed after the capture never reaches a replay,
 * here as on a GPU, so a step that bakes a per-step value into a captured
 * launch trains wrong in CI too. */
#ifndef TLM_EMU_GRAPH_H
#define TLM_EMU_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "device.h"

/* cuda_emu.h's entry points of one kernel. */
typedef int (*tlm_emu_entry)(const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, void **args,
                             char *err, size_t errlen);
typedef int (*tlm_emu_arg_sizes)(size_t *sizes, int cap);

typedef struct tlm_emu_kernel {
    tlm_emu_entry entry;
    int nargs;
    size_t *sizes;               /* nargs parameter sizes, in bytes */
    struct tlm_emu_kernel *next; /* the module's kernels, freed with it */
} tlm_emu_kernel;

/* Runs one launch now; false with "kernel NAME: ..." in err. */
bool tlm_emu_run_launch(const tlm_emu_kernel *k, const char *name, tlm_launch dims, void **args, tlm_err *err);

typedef struct tlm_emu_graph tlm_emu_graph;

tlm_emu_graph *tlm_emu_graph_new(void);
void tlm_emu_graph_free(tlm_emu_graph *g);
/* Records (false with err only when out of memory). The kernel must stay
 * loaded for as long as the graph is launched. */
bool tlm_emu_graph_launch(tlm_emu_graph *g, const tlm_emu_kernel *k, const char *name, tlm_launch dims, void **args,
                          tlm_err *err);
bool tlm_emu_graph_gemm(tlm_emu_graph *g, const tlm_gemm *gemm, tlm_err *err);
bool tlm_emu_graph_copy(tlm_emu_graph *g, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err);
bool tlm_emu_graph_zero(tlm_emu_graph *g, tlm_dptr dst, size_t bytes, tlm_err *err);
/* Runs the records in order; stops at the first failing launch. */
bool tlm_emu_graph_run(const tlm_emu_graph *g, tlm_err *err);

#endif
