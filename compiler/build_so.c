#include "build_so.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "codegen.h"
#include "descriptor.h"
#include "ir.h"
#include "link_so.h"
#include "remove_on_signal.h"
#include "xalloc.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void stage(const build_options *o, const char *what, double *t) {
    double t1 = now();
    if (o->timing) fprintf(o->timing, "  %-22s %8.1f ms\n", what, 1e3 * (t1 - *t));
    *t = t1;
}

bool build_shared_object(const checked_model *m, const char *out_path, const build_options *o) {
    /* Fail before the slow stages if the result cannot be written. */
    char *slash = strrchr(out_path, '/');
    char out_dir[4096];
    snprintf(out_dir, sizeof out_dir, "%.*s", slash ? (int)(slash - out_path) + 1 : 1, slash ? out_path : ".");
    if (access(out_dir, W_OK) != 0) {
        fprintf(stderr, "tlmc: cannot write %s: %s\n", out_path, strerror(errno));
        return false;
    }
    double t = now(), start = t;
    ir_model ir;
    if (!ir_lower(m, o->cpu_mlp, &ir)) {
        fprintf(stderr, "tlmc: %s: the memory plan does not fit in a 64-bit address space\n", m->name);
        ir_free(&ir);
        return false;
    }
    stage(o, "lower to IR", &t);

    char dir[] = "/tmp/tlmc-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("tlmc: cannot create a temporary directory");
        ir_free(&ir);
        return false;
    }
    char kernels_o[64], descriptor_o[64];
    snprintf(kernels_o, sizeof kernels_o, "%s/kernels.o", dir);
    snprintf(descriptor_o, sizeof descriptor_o, "%s/descriptor.o", dir);
    /* an interrupt removes the folder's files, then the folder */
    tlm_remove_on_signal(dir);
    tlm_remove_on_signal(kernels_o);
    tlm_remove_on_signal(descriptor_o);
    tlm_kernel_spec *specs = tlm_xcalloc((size_t)ir.nkernels + 1, sizeof *specs);
    for (int k = 0; k < ir.nkernels; k++)
        specs[k] = (tlm_kernel_spec){(tlm_mlp)ir.kernels[k].mlp, (int)ir.kernels[k].d_model, (int)ir.kernels[k].width};
    tlm_codegen_options copt = {o->cpu, o->opt_level};
    char *err = NULL, *cuda = NULL;
    uint8_t *blob = NULL;
    bool ok = tlm_codegen_cpu_object(specs, ir.nkernels, &copt, kernels_o, &err);
    if (ok) {
        stage(o, "CPU kernels (LLVM)", &t);
        cuda = tlm_codegen_cuda_source(specs, ir.nkernels);
        ok = cuda != NULL;
        if (!ok) err = tlm_xstrdup("cannot generate the CUDA source");
    }
    if (ok) {
        stage(o, "CUDA source", &t);
        size_t size;
        char *needs = tlm_codegen_cpu_needs(o->cpu, &err);
        ok = needs != NULL;
        if (ok) blob = blob_write(&ir, needs, &size);
        tlm_codegen_free(needs);
        if (ok) ok = tlm_codegen_descriptor_object(blob, size, specs, ir.nkernels, cuda, &copt, descriptor_o, &err);
    }
    if (ok) {
        stage(o, "descriptor", &t);
        const char *objects[2] = {kernels_o, descriptor_o};
        ok = link_shared_object(objects, 2, out_path, &err);
    }
    if (ok) {
        stage(o, "link", &t);
        if (o->timing) fprintf(o->timing, "  %-22s %8.1f ms\n", "total back end", 1e3 * (now() - start));
    } else {
        fprintf(stderr, "tlmc: %s: %s\n", m->name, err ? err : "code generation failed");
    }
    unlink(kernels_o);
    unlink(descriptor_o);
    rmdir(dir);
    tlm_keep_on_signal(descriptor_o);
    tlm_keep_on_signal(kernels_o);
    tlm_keep_on_signal(dir);
    free(err);
    free(cuda);
    free(blob);
    free(specs);
    ir_free(&ir);
    return ok;
}
