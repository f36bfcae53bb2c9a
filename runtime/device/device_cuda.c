/* The real CUDA device (device_impl.h's table for "cuda"): the driver
 * opened at run time (cuda_driver.h), kernels compiled by NVRTC to CUBIN
 * (nvrtc_compile.h) and GEMMs through cuBLASLt (cublaslt_gemm.h), both
 * opened at first use too (cuda_toolkit.h). Every
 * launch, copy and GEMM goes to the legacy default stream (the compute
 * stream), so they run in the order they were issued and a copy to the
 * host waits for them; launches chosen for the comm stream (device.h) go
 * to a stream created CU_STREAM_NON_BLOCKING at its first use, which the
 * legacy stream does not wait for: the two meet at events only.
 *
 * Graphs: a capture cannot be made on the legacy stream, so while one is
 * under way launches, GEMMs, copies (cuMemcpyDtoDAsync) and zeroings
 * (cuMemsetD8Async) go to a third stream, the capture stream (created
 * CU_STREAM_NON_BLOCKING at the first capture, captured in
 * CU_STREAM_CAPTURE_MODE_THREAD_LOCAL so another thread's device, in a
 * data-parallel run, is not disturbed); the instantiated graph is launched
 * on the legacy stream, in order with everything else.
 *
 * The CUDA context is current per thread: each call makes the device's
 * primary context current first, so any thread may drive the device. */
#include "device_impl.h"

#ifdef TLM_HAVE_CUDA

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublaslt_gemm.h"
#include "cuda_driver.h"
#include "cuda_toolkit.h"
#include "nvrtc_compile.h"

typedef struct cuda_device {
    const tlm_cuda_driver *drv;
    CUdevice dev;
    CUcontext ctx; /* the primary context, retained */
    tlm_cublaslt *blas; /* started by the first GEMM */
    CUstream comm;      /* the comm stream; NULL until first used */
    CUstream capture;   /* graph captures' stream; NULL until the first */
    char options[512]; /* NVRTC's options for this device's arch */
} cuda_device;

static cuda_device *state(tlm_device *d) { return d->impl; }

static bool bind(cuda_device *c, tlm_err *err) {
    return tlm_cuda_ok(c->drv, c->drv->cuCtxSetCurrent(c->ctx), err, "cuCtxSetCurrent");
}

static bool read_info(const tlm_cuda_driver *drv, CUdevice dev, int ordinal, tlm_device_info *info, tlm_err *err) {
    memset(info, 0, sizeof *info);
    size_t total = 0;
    int shared_optin = 0;
    if (!tlm_cuda_ok(drv, drv->cuDeviceGetName(info->name, (int)sizeof info->name, dev), err, "cuDeviceGetName") ||
        !tlm_cuda_ok(drv, drv->cuDeviceGetAttribute(&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     err, "cuDeviceGetAttribute(compute capability)") ||
        !tlm_cuda_ok(drv, drv->cuDeviceGetAttribute(&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     err, "cuDeviceGetAttribute(compute capability)") ||
        !tlm_cuda_ok(drv, drv->cuDeviceGetAttribute(&info->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                     err, "cuDeviceGetAttribute(multiprocessor count)") ||
        !tlm_cuda_ok(
            drv, drv->cuDeviceGetAttribute(&shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
            err, "cuDeviceGetAttribute(shared memory per block, opted in)") ||
        !tlm_cuda_ok(drv, drv->cuDeviceTotalMem(&total, dev), err, "cuDeviceTotalMem"))
        return false;
    info->name[sizeof info->name - 1] = '\0';
    info->emulated = false;
    info->ordinal = ordinal;
    info->driver_version = drv->version;
    info->memory_total = total;
    info->shared_optin = shared_optin > 0 ? (unsigned)shared_optin : 0;
    snprintf(info->arch, sizeof info->arch, "sm_%d%d", info->cc_major, info->cc_minor);
    return true;
}

static bool cuda_open(tlm_device *d, int ordinal, tlm_err *err) {
    const tlm_cuda_driver *drv = tlm_cuda_driver_get(err);
    if (!drv) return false;
    int count = 0;
    if (!tlm_cuda_ok(drv, drv->cuDeviceGetCount(&count), err, "cuDeviceGetCount")) return false;
    if (count <= 0) return tlm_fail(err, "no CUDA device: the NVIDIA driver is installed but sees no GPU");
    if (ordinal < 0 || ordinal >= count) {
        if (count == 1)
            return tlm_fail(err, "cuda:%d: no such device (this machine has one CUDA device: cuda:0)", ordinal);
        return tlm_fail(err, "cuda:%d: no such device (this machine has %d CUDA devices: cuda:0 to cuda:%d)", ordinal,
                        count, count - 1);
    }
    cuda_device *c = calloc(1, sizeof *c);
    if (!c) return tlm_fail(err, "out of memory");
    c->drv = drv;
    if (!tlm_cuda_ok(drv, drv->cuDeviceGet(&c->dev, ordinal), err, "cuDeviceGet(%d)", ordinal) ||
        !read_info(drv, c->dev, ordinal, &d->info, err)) {
        free(c);
        return false;
    }
    /* NVRTC's CUBINs and cuBLASLt's embedded runtime are this toolkit's:
     * an older driver would open the device and fail at the first module
     * or GEMM, so it is refused here, by name. */
    if (d->info.driver_version / 1000 < CUDA_VERSION / 1000) {
        tlm_fail(err,
                 "the NVIDIA driver supports CUDA %d.%d; this tlm-run's NVRTC and cuBLASLt are CUDA %d, which needs a "
                 "newer driver",
                 d->info.driver_version / 1000, d->info.driver_version % 1000 / 10, CUDA_VERSION / 1000);
        free(c);
        return false;
    }
    /* NVRTC (cuda_toolkit.h) loads here, at the device's opening: where it
     * does not, the line says so rather than that no arch is supported. */
    if (!tlm_nvrtc_api_get(err)) {
        free(c);
        return false;
    }
    if (!tlm_nvrtc_supports(d->info.arch)) {
        tlm_fail(
            err,
            "%s (cuda:%d) is %s, which this build's %s cannot compile for (a CUDA toolkit that supports it is needed)",
            d->info.name, ordinal, d->info.arch, tlm_nvrtc_version());
        free(c);
        return false;
    }
    if (!tlm_cuda_ok(drv, drv->cuDevicePrimaryCtxRetain(&c->ctx, c->dev), err, "cuDevicePrimaryCtxRetain")) {
        free(c);
        return false;
    }
    if (!bind(c, err)) {
        drv->cuDevicePrimaryCtxRelease(c->dev);
        free(c);
        return false;
    }
    tlm_nvrtc_options(d->info.arch, c->options, sizeof c->options);
    d->impl = c;
    return true;
}

static void cuda_close(tlm_device *d) {
    cuda_device *c = state(d);
    if (!c) return;
    if (c->blas) {
        bind(c, NULL);
        tlm_cublaslt_close(c->blas);
        d->bytes_in_use -=
            d->bytes_in_use < TLM_CUBLASLT_WORKSPACE_BYTES ? d->bytes_in_use : TLM_CUBLASLT_WORKSPACE_BYTES;
    }
    if (c->comm && bind(c, NULL)) c->drv->cuStreamDestroy(c->comm);
    if (c->capture && bind(c, NULL)) {
        CUgraph unfinished = NULL; /* a capture left open: ended and dropped */
        if (d->capturing && c->drv->cuStreamEndCapture(c->capture, &unfinished) == CUDA_SUCCESS && unfinished)
            c->drv->cuGraphDestroy(unfinished);
        c->drv->cuStreamDestroy(c->capture);
    }
    c->drv->cuDevicePrimaryCtxRelease(c->dev);
    free(c);
    d->impl = NULL;
}

static tlm_dptr cuda_alloc(tlm_device *d, size_t bytes, tlm_err *err) {
    cuda_device *c = state(d);
    CUdeviceptr p = 0;
    /* cuMemAlloc refuses 0 bytes; its blocks are 256-byte aligned. */
    size_t n = bytes ? bytes : 1;
    if (!bind(c, err) ||
        !tlm_cuda_ok(c->drv, c->drv->cuMemAlloc(&p, n), err, "cuMemAlloc(%zu bytes) on %s", bytes, d->info.name))
        return 0;
    if (!tlm_cuda_ok(c->drv, c->drv->cuMemsetD8(p, 0, n), err, "cuMemsetD8(%zu bytes)", n)) {
        c->drv->cuMemFree(p);
        return 0;
    }
    return (tlm_dptr)p;
}

static void cuda_free(tlm_device *d, tlm_dptr p) {
    cuda_device *c = state(d);
    if (!p || !bind(c, NULL)) return;
    c->drv->cuMemFree((CUdeviceptr)p);
}

static bool cuda_upload(tlm_device *d, tlm_dptr dst, const void *src, size_t bytes, tlm_err *err) {
    cuda_device *c = state(d);
    return bind(c, err) && tlm_cuda_ok(c->drv, c->drv->cuMemcpyHtoD((CUdeviceptr)dst, src, bytes), err,
                                       "copying %zu bytes to the device", bytes);
}

static bool cuda_download(tlm_device *d, void *dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    cuda_device *c = state(d);
    /* Waits for the launches before it: a kernel's failure shows here. */
    return bind(c, err) && tlm_cuda_ok(c->drv, c->drv->cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes), err,
                                       "copying %zu bytes from the device", bytes);
}

static bool cuda_copy(tlm_device *d, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err) {
    cuda_device *c = state(d);
    if (d->capturing)
        return bind(c, err) &&
               tlm_cuda_ok(c->drv, c->drv->cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, c->capture),
                           err, "copying %zu bytes on the device (captured)", bytes);
    return bind(c, err) && tlm_cuda_ok(c->drv, c->drv->cuMemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src, bytes), err,
                                       "copying %zu bytes on the device", bytes);
}

static bool cuda_zero(tlm_device *d, tlm_dptr dst, size_t bytes, tlm_err *err) {
    cuda_device *c = state(d);
    if (d->capturing)
        return bind(c, err) && tlm_cuda_ok(c->drv, c->drv->cuMemsetD8Async((CUdeviceptr)dst, 0, bytes, c->capture), err,
                                           "zeroing %zu bytes (captured)", bytes);
    return bind(c, err) &&
           tlm_cuda_ok(c->drv, c->drv->cuMemsetD8((CUdeviceptr)dst, 0, bytes), err, "zeroing %zu bytes", bytes);
}

static bool cuda_sync(tlm_device *d, tlm_err *err) {
    cuda_device *c = state(d);
    return bind(c, err) &&
           tlm_cuda_ok(c->drv, c->drv->cuCtxSynchronize(), err, "a kernel or GEMM failed on %s", d->info.name);
}

static bool cuda_memory_free(tlm_device *d, uint64_t *bytes, tlm_err *err) {
    cuda_device *c = state(d);
    size_t free_bytes = 0, total = 0;
    if (!bind(c, err) || !tlm_cuda_ok(c->drv, c->drv->cuMemGetInfo(&free_bytes, &total), err, "cuMemGetInfo"))
        return false;
    *bytes = free_bytes;
    return true;
}

static const char *cuda_compiler_id(tlm_device *d) {
    (void)d;
    return tlm_nvrtc_version();
}

static const char *cuda_compile_options(tlm_device *d) { return state(d)->options; }

static bool cuda_compile(tlm_device *d, const char *what, const char *source, uint8_t **bin, size_t *size,
                         tlm_err *err) {
    tlm_err why;
    if (tlm_nvrtc_compile(source, d->info.arch, bin, size, &why)) return true;
    return tlm_fail(err, "compiling %s: %s", what, why.msg);
}

/* The module handle is the CUmodule itself (device.c counts its bytes). */
static bool cuda_load(tlm_device *d, const char *what, const uint8_t *bin, size_t size, void **handle, tlm_err *err) {
    cuda_device *c = state(d);
    CUmodule module = NULL;
    if (!bind(c, err) || !tlm_cuda_ok(c->drv, c->drv->cuModuleLoadData(&module, bin), err,
                                      "loading %s (a %zu-byte CUBIN for %s) with the driver of CUDA %d.%d", what, size,
                                      d->info.arch, c->drv->version / 1000, c->drv->version % 1000 / 10))
        return false;
    *handle = module;
    return true;
}

static void cuda_unload(tlm_device *d, void *handle) {
    cuda_device *c = state(d);
    if (handle && bind(c, NULL)) c->drv->cuModuleUnload((CUmodule)handle);
}

static bool cuda_kernel(tlm_device *d, void *module_handle, const char *name, void **fn, unsigned *static_shared,
                        tlm_err *err) {
    cuda_device *c = state(d);
    CUfunction f = NULL;
    if (!bind(c, err)) return false;
    CUresult r = c->drv->cuModuleGetFunction(&f, (CUmodule)module_handle, name);
    if (r == CUDA_ERROR_NOT_FOUND) return tlm_fail(err, "the module has no kernel named %s", name);
    if (!tlm_cuda_ok(c->drv, r, err, "cuModuleGetFunction(%s)", name)) return false;
    int bytes = 0;
    if (!tlm_cuda_ok(c->drv, c->drv->cuFuncGetAttribute(&bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), err,
                     "cuFuncGetAttribute(%s, static shared memory)", name))
        return false;
    *static_shared = bytes > 0 ? (unsigned)bytes : 0;
    *fn = f;
    return true;
}

/* The driver's stream for s: NULL (the legacy default stream) for the
 * compute stream; the comm stream, created at its first use. */
static bool stream_of(tlm_device *d, tlm_stream s, CUstream *stream, tlm_err *err) {
    cuda_device *c = state(d);
    *stream = NULL;
    if (!bind(c, err)) return false;
    if (d->capturing) {
        /* device.c lets nothing but the compute stream's work in */
        *stream = c->capture;
        return true;
    }
    if (s == TLM_STREAM_COMPUTE) return true;
    if (!c->comm && !tlm_cuda_ok(c->drv, c->drv->cuStreamCreate(&c->comm, CU_STREAM_NON_BLOCKING), err,
                                 "cuStreamCreate (the comm stream)"))
        return false;
    *stream = c->comm;
    return true;
}

static bool cuda_allow_shared(tlm_device *d, void *fn, const char *name, unsigned bytes, tlm_err *err) {
    cuda_device *c = state(d);
    return bind(c, err) &&
           tlm_cuda_ok(
               c->drv,
               c->drv->cuFuncSetAttribute((CUfunction)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes),
               err, "letting %s have %u bytes of dynamic shared memory (cuFuncSetAttribute)", name, bytes);
}

static bool cuda_launch(tlm_device *d, void *fn, const char *name, tlm_launch dims, void **args, tlm_err *err) {
    cuda_device *c = state(d);
    CUstream stream;
    if (!stream_of(d, d->launch_stream, &stream, err)) return false;
    CUresult r = c->drv->cuLaunchKernel((CUfunction)fn, dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0],
                                        dims.block[1], dims.block[2], dims.shared_bytes, stream, args, NULL);
    if (r == CUDA_SUCCESS) return true;
    /* the message only on failure: launches are the hot path */
    char shared[64] = "";
    if (dims.shared_bytes) snprintf(shared, sizeof shared, ", %u bytes of dynamic shared memory", dims.shared_bytes);
    return tlm_cuda_ok(c->drv, r, err, "launching %s (grid %ux%ux%u, block %ux%ux%u%s)", name, dims.grid[0],
                       dims.grid[1], dims.grid[2], dims.block[0], dims.block[1], dims.block[2], shared);
}

static bool cuda_gemm(tlm_device *d, const tlm_gemm *g, tlm_err *err) {
    cuda_device *c = state(d);
    if (d->launch_stream != TLM_STREAM_COMPUTE) return tlm_fail(err, "GEMMs run on the compute stream only");
    if (!bind(c, err)) return false;
    /* cuBLASLt (its runtime, its workspace) starts at the first GEMM: a
     * command that runs none does not pay for it. Not in a capture, where
     * its allocation would be illegal: the first step runs uncaptured. */
    if (!c->blas && d->capturing)
        return tlm_fail(err, "cuBLASLt starts at the first GEMM, which may not be inside a CUDA graph capture (run "
                             "the step once without a graph first)");
    if (!c->blas) {
        if (!(c->blas = tlm_cublaslt_open(c->drv, err))) return false;
        d->bytes_in_use += TLM_CUBLASLT_WORKSPACE_BYTES;
    }
    return tlm_cublaslt_gemm(c->blas, g, d->capturing ? c->capture : NULL, err);
}

/* Events without timing: they only order the two streams. */
static bool cuda_event_create(tlm_device *d, void **event, tlm_err *err) {
    cuda_device *c = state(d);
    CUevent e = NULL;
    if (!bind(c, err) || !tlm_cuda_ok(c->drv, c->drv->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), err, "cuEventCreate"))
        return false;
    *event = e;
    return true;
}

static void cuda_event_destroy(tlm_device *d, void *event) {
    cuda_device *c = state(d);
    if (event && bind(c, NULL)) c->drv->cuEventDestroy((CUevent)event);
}

static bool cuda_event_record(tlm_device *d, void *event, tlm_stream s, tlm_err *err) {
    cuda_device *c = state(d);
    CUstream stream;
    return stream_of(d, s, &stream, err) &&
           tlm_cuda_ok(c->drv, c->drv->cuEventRecord((CUevent)event, stream), err, "cuEventRecord");
}

static bool cuda_stream_wait(tlm_device *d, tlm_stream s, void *event, tlm_err *err) {
    cuda_device *c = state(d);
    CUstream stream;
    return stream_of(d, s, &stream, err) &&
           tlm_cuda_ok(c->drv, c->drv->cuStreamWaitEvent(stream, (CUevent)event, CU_EVENT_WAIT_DEFAULT), err,
                       "cuStreamWaitEvent");
}

static bool cuda_comm_stream(tlm_device *d, void **handle, tlm_err *err) {
    CUstream stream;
    if (!stream_of(d, TLM_STREAM_COMM, &stream, err)) return false;
    *handle = stream;
    return true;
}

/* ---- graphs: stream capture ---- */

static bool cuda_capture_begin(tlm_device *d, tlm_err *err) {
    cuda_device *c = state(d);
    if (!bind(c, err)) return false;
    if (!c->capture && !tlm_cuda_ok(c->drv, c->drv->cuStreamCreate(&c->capture, CU_STREAM_NON_BLOCKING), err,
                                    "cuStreamCreate (the graph capture stream)"))
        return false;
    return tlm_cuda_ok(c->drv, c->drv->cuStreamBeginCapture(c->capture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), err,
                       "cuStreamBeginCapture");
}

static bool cuda_capture_end(tlm_device *d, bool keep, void **graph, tlm_err *err) {
    cuda_device *c = state(d);
    CUgraph captured = NULL;
    if (!bind(c, err)) return false;
    bool ok = tlm_cuda_ok(c->drv, c->drv->cuStreamEndCapture(c->capture, &captured), err, "cuStreamEndCapture");
    if (ok && keep) {
        CUgraphExec exec = NULL;
        ok = tlm_cuda_ok(c->drv, c->drv->cuGraphInstantiateWithFlags(&exec, captured, 0), err,
                         "cuGraphInstantiateWithFlags");
        if (ok) *graph = exec;
    }
    /* the executable graph is independent of the captured one */
    if (captured) c->drv->cuGraphDestroy(captured);
    return ok;
}

static bool cuda_graph_launch(tlm_device *d, void *graph, tlm_err *err) {
    cuda_device *c = state(d);
    return bind(c, err) && tlm_cuda_ok(c->drv, c->drv->cuGraphLaunch((CUgraphExec)graph, NULL), err,
                                       "cuGraphLaunch on %s", d->info.name);
}

static void cuda_graph_destroy(tlm_device *d, void *graph) {
    cuda_device *c = state(d);
    if (graph && bind(c, NULL)) c->drv->cuGraphExecDestroy((CUgraphExec)graph);
}

const tlm_device_backend tlm_device_cuda = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .memory_free = cuda_memory_free,
    .compiler_id = cuda_compiler_id,
    .compile_options = cuda_compile_options,
    .compile = cuda_compile,
    .load = cuda_load,
    .unload = cuda_unload,
    .kernel = cuda_kernel,
    .allow_shared = cuda_allow_shared,
    .launch = cuda_launch,
    .gemm = cuda_gemm,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait = cuda_stream_wait,
    .comm_stream = cuda_comm_stream,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
};

#else

/* Built without the CUDA toolkit: the real device cannot open, and says so
 * (the emulated device still runs the kernels for the tests). */
static bool cuda_open(tlm_device *d, int ordinal, tlm_err *err) {
    (void)d;
    (void)ordinal;
    return tlm_fail(err, "this tlm-run was built without the CUDA toolkit: the GPU backend is off");
}

const tlm_device_backend tlm_device_cuda = {.name = "cuda", .open = cuda_open};

#endif
