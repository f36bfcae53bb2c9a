/* A stand-in for the NVIDIA driver, built as libcuda.so.1 for
 * gpu.fake_driver only: it exports cuGetProcAddress_v2 and answers for one
 * pretend GPU, so the real device's opening path (the entry points looked
 * up by name for the CUDA 12.0 ABI, the device's info, the ordinal check,
 * the architecture check, the primary context's release on failure) runs
 * on a machine without a GPU, and so do the memory calls (host memory
 * here), module loading (NVRTC's real CUBIN, checked for its ELF magic) and
 * launches (recorded, not run; refused past the kernel's dynamic shared
 * memory allowance, 48 KiB less its static shared memory until
 * cuFuncSetAttribute raises it), the comm stream and
 * its events (traced),
 * and graphs: stream capture, instantiation, launch and destruction
 * (traced; a captured launch, copy or memset is a node of the graph, run
 * when the graph is launched).
 * cuBLASLt's own runtime needs far more of a
 * driver than this, so the first GEMM fails, which the test checks too.
 *
 * TLM_FAKE_CUDA picks the pretend machine: "h200" (default: compute
 * capability 9.0, 132 SMs), "no_device" (cuInit says CUDA_ERROR_NO_DEVICE),
 * "old_gpu" (compute capability 5.0, which NVRTC 13 no longer targets),
 * "old_driver" (an H200 whose driver supports CUDA 12.8 only),
 * "graph_fails" (an H200 whose cuGraphInstantiateWithFlags says
 * CUDA_ERROR_NOT_SUPPORTED).
 * No CUDA header: the types are the driver ABI's plain C ones. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
    SUCCESS = 0,
    INVALID_VALUE = 1,
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    NOT_FOUND = 500,
    NOT_SUPPORTED = 801,
    CAPTURE_UNSUPPORTED = 900,
};

static int retained; /* primary context references held */

static const char *machine(void) {
    const char *m = getenv("TLM_FAKE_CUDA");
    return m && *m ? m : "h200";
}

/* For the test: how many primary-context references are held now. */
int tlm_fake_cuda_contexts_retained(void) { return retained; }

static CUresult fake_cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case SUCCESS: *s = "CUDA_SUCCESS"; return SUCCESS;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return SUCCESS;
    case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return SUCCESS;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return SUCCESS;
    case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return SUCCESS;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return SUCCESS;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return SUCCESS;
    case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return SUCCESS;
    case CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return SUCCESS;
    default: *s = NULL; return INVALID_VALUE;
    }
}
static CUresult fake_cuGetErrorString(CUresult r, const char **s) {
    *s = r == NO_DEVICE ? "no CUDA-capable device is detected" : "fake driver error";
    return SUCCESS;
}
static CUresult fake_cuInit(unsigned flags) {
    if (flags) return INVALID_VALUE;
    return strcmp(machine(), "no_device") == 0 ? NO_DEVICE : SUCCESS;
}
static CUresult fake_cuDriverGetVersion(int *v) {
    *v = strcmp(machine(), "old_driver") == 0 ? 12080 : 13000;
    return SUCCESS;
}
static CUresult fake_cuDeviceGetCount(int *n) {
    *n = 1;
    return SUCCESS;
}
static CUresult fake_cuDeviceGet(int *d, int ordinal) {
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return SUCCESS;
}
static CUresult fake_cuDeviceGetName(char *name, int len, int dev) {
    if (dev != 0 || len <= 0) return INVALID_VALUE;
    snprintf(name, (size_t)len, "tlm fake GPU");
    return SUCCESS;
}
static CUresult fake_cuDeviceGetAttribute(int *v, int attribute, int dev) {
    bool old = strcmp(machine(), "old_gpu") == 0;
    if (dev != 0) return INVALID_DEVICE;
    switch (attribute) {
    case 75: *v = old ? 5 : 9; return SUCCESS;  /* compute capability, major */
    case 76: *v = 0; return SUCCESS;            /* minor */
    case 16: *v = old ? 16 : 132; return SUCCESS; /* multiprocessors */
    case 97: *v = old ? 49152 : 232448; return SUCCESS; /* shared memory per block, opted in */
    default: return INVALID_VALUE;
    }
}
static CUresult fake_cuDeviceTotalMem(size_t *bytes, int dev) {
    if (dev != 0) return INVALID_DEVICE;
    *bytes = (size_t)141 << 30;
    return SUCCESS;
}
/* What a real GPU reports: its total less what the context and our
 * allocations took (a pretend 0.5 GiB context; allocations not counted
 * here: the test checks the call, not the sum). */
static CUresult fake_cuMemGetInfo(size_t *free_bytes, size_t *total) {
    if (retained == 0) return INVALID_CONTEXT;
    *total = (size_t)141 << 30;
    *free_bytes = *total - ((size_t)1 << 29);
    return SUCCESS;
}
static CUresult fake_cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    if (dev != 0) return INVALID_DEVICE;
    retained++;
    *ctx = &retained;
    return SUCCESS;
}
static CUresult fake_cuDevicePrimaryCtxRelease(int dev) {
    if (dev != 0 || retained == 0) return INVALID_CONTEXT;
    retained--;
    return SUCCESS;
}
static CUresult fake_cuCtxSetCurrent(void *ctx) { return ctx == &retained && retained > 0 ? SUCCESS : INVALID_CONTEXT; }
static CUresult fake_cuCtxSynchronize(void) { return SUCCESS; }
static CUresult fake_cuMemAlloc(unsigned long long *p, size_t n) {
    void *q = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!q) return 2;
    *p = (unsigned long long)(size_t)q;
    return SUCCESS;
}
static CUresult fake_cuMemFree(unsigned long long p) {
    free((void *)(size_t)p);
    return SUCCESS;
}
static CUresult fake_cuMemsetD8(unsigned long long p, unsigned char c, size_t n) {
    memset((void *)(size_t)p, c, n);
    return SUCCESS;
}
static CUresult fake_cuMemcpyHtoD(unsigned long long dst, const void *src, size_t n) {
    memcpy((void *)(size_t)dst, src, n);
    return SUCCESS;
}
static CUresult fake_cuMemcpyDtoH(void *dst, unsigned long long src, size_t n) {
    memcpy(dst, (const void *)(size_t)src, n);
    return SUCCESS;
}
static CUresult fake_cuMemcpyDtoD(unsigned long long dst, unsigned long long src, size_t n) {
    memmove((void *)(size_t)dst, (const void *)(size_t)src, n);
    return SUCCESS;
}
static CUresult fake_cuModuleLoadData(void **module, const void *image) {
    if (memcmp(image,
               "\x7f"
               "ELF",
               4) != 0)
        return INVALID_IMAGE;
    *module = (void *)image;
    return SUCCESS;
}
static CUresult fake_cuModuleUnload(void *module) { return module ? SUCCESS : INVALID_VALUE; }
/* Kernels: any name that starts with "tlm_" is found (the stand-in cannot
 * read a CUBIN's symbols); tlm_fake_launch_fails refuses to launch. */
enum { MAX_KERNELS = 16 };
static char kernel_names[MAX_KERNELS][64];
static int nkernels;
static unsigned last_grid[3], last_block[3];
static unsigned long long last_first_arg; /* the first parameter, read as a pointer */

static CUresult fake_cuModuleGetFunction(void **fn, void *module, const char *name) {
    if (!module) return INVALID_VALUE;
    if (strncmp(name, "tlm_", 4) != 0 || strlen(name) >= sizeof kernel_names[0]) return NOT_FOUND;
    for (int i = 0; i < nkernels; i++) {
        if (strcmp(kernel_names[i], name) == 0) {
            *fn = kernel_names[i];
            return SUCCESS;
        }
    }
    if (nkernels == MAX_KERNELS) return INVALID_VALUE;
    strcpy(kernel_names[nkernels], name);
    *fn = kernel_names[nkernels++];
    return SUCCESS;
}
/* Streams and events: two streams besides the legacy one (NULL), named
 * in the order they are made ("comm" then "capture": the test makes the
 * comm stream first), events by number; every call is written to a trace
 * the test reads. */
enum { STREAMS = 2 };
static char streams[STREAMS]; /* their addresses are the streams */
static bool stream_alive[STREAMS];
static int streams_made, events_made;
static char trace[4096];

static int stream_index(const void *stream) {
    for (int i = 0; i < STREAMS; i++)
        if (stream == &streams[i]) return i;
    return -1;
}
static void traced(const char *fmt, const void *stream, int event) {
    static const char *const names[STREAMS] = {"comm", "capture"};
    size_t n = strlen(trace);
    int i = stream_index(stream);
    const char *name = stream == NULL ? "legacy" : i >= 0 ? names[i] : "?";
    snprintf(trace + n, sizeof trace - n, fmt, name, event);
}
static bool known_stream(const void *stream) {
    int i = stream_index(stream);
    return stream == NULL || (i >= 0 && stream_alive[i]);
}

static CUresult fake_cuStreamCreate(void **stream, unsigned flags) {
    if (streams_made == STREAMS || flags != 1 /* CU_STREAM_NON_BLOCKING */) return INVALID_VALUE;
    stream_alive[streams_made] = true;
    *stream = &streams[streams_made++];
    traced("create %s non-blocking; ", *stream, 0);
    return SUCCESS;
}
static CUresult fake_cuStreamDestroy(void *stream) {
    int i = stream_index(stream);
    if (i < 0 || !stream_alive[i]) return INVALID_VALUE;
    stream_alive[i] = false;
    traced("destroy %s; ", stream, 0);
    return SUCCESS;
}
/* An event is the number it was made with, stored in the pointer. */
static CUresult fake_cuEventCreate(void **event, unsigned flags) {
    if (flags != 2 /* CU_EVENT_DISABLE_TIMING */) return INVALID_VALUE;
    *event = (void *)(uintptr_t)++events_made;
    return SUCCESS;
}
static CUresult fake_cuEventDestroy(void *event) {
    if (!event) return INVALID_VALUE;
    traced("destroy event %2$d; ", NULL, (int)(uintptr_t)event);
    return SUCCESS;
}
static CUresult fake_cuEventRecord(void *event, void *stream) {
    if (!event || !known_stream(stream)) return INVALID_VALUE;
    traced("record %2$d on %1$s; ", stream, (int)(uintptr_t)event);
    return SUCCESS;
}
static CUresult fake_cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
    if (!event || flags != 0 || !known_stream(stream)) return INVALID_VALUE;
    traced("%s waits %d; ", stream, (int)(uintptr_t)event);
    return SUCCESS;
}

/* For the test: the streams, events and graphs calls so far. */
const char *tlm_fake_cuda_stream_trace(void) { return trace; }

/* Graphs: a capture on one stream collects nodes; a graph and an
 * executable graph are both a node list here. */
enum { MAX_NODES = 16 };
typedef enum node_kind { NODE_LAUNCH, NODE_MEMCPY, NODE_MEMSET } node_kind;
typedef struct node {
    node_kind kind;
    unsigned long long dst, src;
    size_t bytes;
} node;
typedef struct graph {
    node nodes[MAX_NODES];
    int n;
} graph;
static void *capturing;     /* the stream under capture, or NULL */
static graph captured;      /* its nodes so far */
static int graphs_alive;    /* graphs and executable graphs not destroyed */

/* For the test: graphs and executable graphs not yet destroyed. */
int tlm_fake_cuda_graphs_alive(void) { return graphs_alive; }

static CUresult add_node(node_kind kind, unsigned long long dst, unsigned long long src, size_t bytes) {
    if (captured.n == MAX_NODES) return INVALID_VALUE;
    captured.nodes[captured.n++] = (node){kind, dst, src, bytes};
    return SUCCESS;
}

static CUresult fake_cuStreamBeginCapture(void *stream, int mode) {
    if (!stream || !known_stream(stream) || capturing || mode != 1 /* THREAD_LOCAL */) return INVALID_VALUE;
    capturing = stream;
    captured.n = 0;
    traced("begin capture on %s (thread-local); ", stream, 0);
    return SUCCESS;
}
static CUresult fake_cuStreamEndCapture(void *stream, void **out) {
    if (!stream || stream != capturing) return INVALID_VALUE;
    capturing = NULL;
    graph *g = malloc(sizeof *g);
    if (!g) return INVALID_VALUE;
    *g = captured;
    graphs_alive++;
    *out = g;
    traced("end capture on %s: %d nodes; ", stream, g->n);
    return SUCCESS;
}
static CUresult fake_cuGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags) {
    if (!g || flags != 0) return INVALID_VALUE;
    if (strcmp(machine(), "graph_fails") == 0) return NOT_SUPPORTED;
    graph *e = malloc(sizeof *e);
    if (!e) return INVALID_VALUE;
    *e = *(graph *)g;
    graphs_alive++;
    *exec = e;
    traced("instantiate %2$d nodes; ", NULL, e->n);
    return SUCCESS;
}
static CUresult fake_cuGraphDestroy(void *g) {
    if (!g) return INVALID_VALUE;
    free(g);
    graphs_alive--;
    traced("destroy graph; ", NULL, 0);
    return SUCCESS;
}
static CUresult fake_cuGraphExecDestroy(void *e) {
    if (!e) return INVALID_VALUE;
    free(e);
    graphs_alive--;
    traced("destroy executable graph; ", NULL, 0);
    return SUCCESS;
}
static int launches; /* kernel launches run, plain or from a graph */
static CUresult fake_cuGraphLaunch(void *e, void *stream) {
    if (!e || !known_stream(stream) || capturing) return INVALID_VALUE;
    const graph *g = e;
    for (int i = 0; i < g->n; i++) {
        const node *nd = &g->nodes[i];
        if (nd->kind == NODE_LAUNCH) launches++;
        if (nd->kind == NODE_MEMCPY) memmove((void *)(size_t)nd->dst, (const void *)(size_t)nd->src, nd->bytes);
        if (nd->kind == NODE_MEMSET) memset((void *)(size_t)nd->dst, (int)nd->src, nd->bytes);
    }
    traced("graph launch on %s; ", stream, 0);
    return SUCCESS;
}
static CUresult fake_cuMemcpyDtoDAsync(unsigned long long dst, unsigned long long src, size_t n, void *stream) {
    if (!known_stream(stream)) return INVALID_VALUE;
    traced("memcpy on %s; ", stream, 0);
    if (stream && stream == capturing) return add_node(NODE_MEMCPY, dst, src, n);
    memmove((void *)(size_t)dst, (const void *)(size_t)src, n);
    return SUCCESS;
}
static CUresult fake_cuMemsetD8Async(unsigned long long p, unsigned char c, size_t n, void *stream) {
    if (!known_stream(stream)) return INVALID_VALUE;
    traced("memset on %s; ", stream, 0);
    if (stream && stream == capturing) return add_node(NODE_MEMSET, p, c, n);
    memset((void *)(size_t)p, c, n);
    return SUCCESS;
}

/* Each function's dynamic shared memory allowance, as a GPU keeps it
 * (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): for the kernels by
 * name, which is what the stand-in's CUfunction is; and the calls made. */
enum { MAX_ALLOWED = 8 };
static struct {
    char name[64];
    int bytes;
} allowed[MAX_ALLOWED];
static int allow_calls;
/* A kernel's static shared memory: 4 KiB for tlm_fake_fill, none for the
 * others. */
static int static_shared(const char *name) { return strcmp(name, "tlm_fake_fill") == 0 ? 4096 : 0; }
static int shared_allowed(const char *name) {
    for (int i = 0; i < MAX_ALLOWED; i++)
        if (strcmp(allowed[i].name, name) == 0) return allowed[i].bytes;
    return 48 * 1024 - static_shared(name);
}
static CUresult fake_cuFuncGetAttribute(int *v, int attribute, void *f) {
    if (!f || attribute != 1) return INVALID_VALUE; /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    *v = static_shared(f);
    return SUCCESS;
}
static CUresult fake_cuFuncSetAttribute(void *f, int attribute, int value) {
    if (!f || attribute != 8 || value < 0 || value + static_shared(f) > 232448) return INVALID_VALUE;
    allow_calls++;
    for (int i = 0; i < MAX_ALLOWED; i++)
        if (!allowed[i].name[0] || strcmp(allowed[i].name, f) == 0) {
            snprintf(allowed[i].name, sizeof allowed[i].name, "%s", (const char *)f);
            allowed[i].bytes = value;
            return SUCCESS;
        }
    return INVALID_VALUE;
}
/* For the test: cuFuncSetAttribute's calls so far, and the last launch's
 * dynamic shared memory. */
static unsigned last_shared;
int tlm_fake_cuda_shared(unsigned *last_launch_shared) {
    *last_launch_shared = last_shared;
    return allow_calls;
}

static CUresult fake_cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    /* a launch past the kernel's allowance fails, as on a GPU */
    if (!f || shared > (unsigned)shared_allowed(f) || !known_stream(stream) || extra != NULL || !params)
        return INVALID_VALUE;
    if (stream) traced("launch on %s; ", stream, 0);
    if (strcmp((const char *)f, "tlm_fake_launch_fails") == 0) return INVALID_VALUE;
    if (stream && stream == capturing) return add_node(NODE_LAUNCH, 0, 0, 0); /* run at the graph's launches */
    launches++;
    last_shared = shared;
    last_grid[0] = gx, last_grid[1] = gy, last_grid[2] = gz;
    last_block[0] = bx, last_block[1] = by, last_block[2] = bz;
    memcpy(&last_first_arg, params[0], sizeof last_first_arg);
    return SUCCESS;
}

/* For the test: launches so far, and the last one's grid, block and first
 * parameter (a pointer). */
int tlm_fake_cuda_launches(unsigned grid[3], unsigned block[3], unsigned long long *first_arg) {
    *first_arg = last_first_arg;
    memcpy(grid, last_grid, sizeof last_grid);
    memcpy(block, last_block, sizeof last_block);
    return launches;
}

/* The names tlm may ask for; anything else is "not found", as a real
 * driver says for a name it does not know. */
#define FAKE(name) {#name, (void *)fake_##name}
static const struct {
    const char *name;
    void *fn;
} functions[] = {
    FAKE(cuGetErrorName),
    FAKE(cuGetErrorString),
    FAKE(cuInit),
    FAKE(cuDriverGetVersion),
    FAKE(cuDeviceGetCount),
    FAKE(cuDeviceGet),
    FAKE(cuDeviceGetName),
    FAKE(cuDeviceGetAttribute),
    FAKE(cuDeviceTotalMem),
    FAKE(cuMemGetInfo),
    FAKE(cuDevicePrimaryCtxRetain),
    FAKE(cuDevicePrimaryCtxRelease),
    FAKE(cuCtxSetCurrent),
    FAKE(cuCtxSynchronize),
    FAKE(cuMemAlloc),
    FAKE(cuMemFree),
    FAKE(cuMemsetD8),
    FAKE(cuMemcpyHtoD),
    FAKE(cuMemcpyDtoH),
    FAKE(cuMemcpyDtoD),
    FAKE(cuModuleLoadData),
    FAKE(cuModuleUnload),
    FAKE(cuModuleGetFunction),
    FAKE(cuFuncGetAttribute),
    FAKE(cuFuncSetAttribute),
    FAKE(cuLaunchKernel),
    FAKE(cuStreamCreate),
    FAKE(cuStreamDestroy),
    FAKE(cuEventCreate),
    FAKE(cuEventDestroy),
    FAKE(cuEventRecord),
    FAKE(cuStreamWaitEvent),
    FAKE(cuMemcpyDtoDAsync),
    FAKE(cuMemsetD8Async),
    FAKE(cuStreamBeginCapture),
    FAKE(cuStreamEndCapture),
    FAKE(cuGraphInstantiateWithFlags),
    FAKE(cuGraphLaunch),
    FAKE(cuGraphExecDestroy),
    FAKE(cuGraphDestroy),
};

/* cuGetProcAddress (CUDA 12.0's form). Only the 12.0 ABI or later is
 * served: an older one would mean tlm asked for legacy variants. */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    *pfn = NULL;
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        if (strcmp(symbol, functions[i].name) != 0) continue;
        if (version < 12000 || flags != 0) {
            if (status) *status = 2; /* CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT */
            return NOT_FOUND;
        }
        *pfn = functions[i].fn;
        if (status) *status = 0;
        return SUCCESS;
    }
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return NOT_FOUND;
}
