/* Which of OpenBLAS's kernel sets the linear maps' GEMMs run, for tlm-run
 * info and bench. A DYNAMIC_ARCH OpenBLAS picks one by the CPU when it
 * loads, unless OPENBLAS_CORETYPE names one; a machine may set it for every
 * process (the AMD EPYC Zen 5 of docs/performance.md sets Haswell, whose
 * GEMMs run at about half the speed of the Cooperlake kernels OpenBLAS picks
 * there itself), and the figures beside it should say so. */
#include "tlm_rt/ops.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

const char *tlm_blas_kernels(void) { return openblas_get_corename(); }

/* The variable is credited only where OpenBLAS runs the set it names
 * (OpenBLAS compares the names ignoring case): a name it does not know, or
 * a build that picks no set by name, leaves OpenBLAS's own pick. */
void tlm_blas_kernels_describe(char *buf, size_t n) {
    const char *named = getenv("OPENBLAS_CORETYPE"), *runs = tlm_blas_kernels();
    if (!named || !*named) snprintf(buf, n, "OpenBLAS's %s kernels", runs);
    else if (!strcasecmp(named, runs)) snprintf(buf, n, "OpenBLAS's %s kernels (OPENBLAS_CORETYPE=%s)", runs, named);
    else snprintf(buf, n, "OpenBLAS's %s kernels (OPENBLAS_CORETYPE=%s not applied)", runs, named);
}
