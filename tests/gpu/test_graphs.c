/* gpu.graphs: CUDA graphs (device.h, "graphs"; graph_cache.h) on the
 * emulated device.
 *   - A capture records launches, GEMMs, copies and zeroings without
 *     running them; a launch of the graph runs them in order, as often as
 *     it is launched.
 *   - A launch's arguments are copied when it is recorded: a scalar
 *     argument changed on the host after the capture does not reach a
 *     replay (the negative check that a per-step value baked into a
 *     captured launch is caught here as on a GPU, where CUDA copies kernel
 *     parameters at capture).
 *   - A download, an upload, a sync, an allocation, a free or an event
 *     during a capture fails with one line naming it, spoils the capture,
 *     and the capture's end fails with that line; the device stays usable.
 *   - A kernel's first launch with more than 48 KiB of dynamic shared
 *     memory (it opts in then) is refused in a capture; made once outside,
 *     the same launch is captured and replays with its shared memory.
 *   - The graph cache warms up, captures, then replays, and with
 *     TLM_CUDA_GRAPHS=0 runs op by op; its failures are the work's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "graph_cache.h"
#include "test_util.h" /* CHECK, test_finish */

static const char source[] =
    "extern \"C\" __global__ void tlm_test_add(float *x, float v, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] += v;\n"
    "}\n"
    "extern \"C\" __global__ void tlm_test_scale_by(float *x, const float *by, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] *= by[0];\n"
    "}\n"
                             /* common.cuh's tlm::dynamic_shared, which this source does not include */
    "#ifdef TLM_CUDA_EMULATED\n"
    "#define TEST_SHARED ((float *)tlm_emu_dynamic_shared())\n"
    "#define TEST_SHARED_BYTES tlm_emu_dynamic_shared_size()\n"
    "#else\n"
    "extern __shared__ float test_shared[];\n"
    "#define TEST_SHARED test_shared\n"
    "__device__ unsigned test_shared_bytes() {\n"
    "    unsigned b;\n"
    "    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(b));\n"
    "    return b;\n"
    "}\n"
    "#define TEST_SHARED_BYTES test_shared_bytes()\n"
    "#endif\n"
                             /* x[i] += the dynamic shared memory's KiB, each thread's index passed to its
                              * neighbour through the buffer's far end on the way (one block) */
    "extern \"C\" __global__ void tlm_test_shared_kib(float *x, int n) {\n"
    "    unsigned i = threadIdx.x, words = TEST_SHARED_BYTES / 4, next = (i + 1) % blockDim.x;\n"
    "    TEST_SHARED[words - 1 - i] = (float)i;\n"
    "    __syncthreads();\n"
    "    if (i < (unsigned)n)\n"
    "        x[i] += TEST_SHARED[words - 1 - next] - (float)next + (float)(TEST_SHARED_BYTES / 1024);\n"
    "}\n";

enum { N = 64 };

typedef struct fixture {
    tlm_device *d;
    tlm_kernel *add, *scale_by, *shared_kib;
    tlm_dptr x, y, by;
} fixture;

static bool has(const char *msg, const char *needle) { return strstr(msg, needle) != NULL; }

static bool add(fixture *f, tlm_dptr x, float *v, tlm_err *err) {
    int n = N;
    void *args[] = {&x, v, &n};
    tlm_launch dims = {.grid = {1, 1, 1}, .block = {N, 1, 1}};
    return tlm_device_launch(f->d, f->add, dims, args, err);
}

static float first(fixture *f, tlm_dptr p) {
    float v[N];
    tlm_err err = {{0}};
    CHECK(tlm_device_download(f->d, v, p, sizeof v, &err), "%s", err.msg);
    for (int i = 1; i < N; i++) CHECK(v[i] == v[0], "element %d: %g, element 0: %g", i, v[i], v[0]);
    return v[0];
}

static void set(fixture *f, tlm_dptr p, float value) {
    float v[N];
    for (int i = 0; i < N; i++) v[i] = value;
    tlm_err err = {{0}};
    CHECK(tlm_device_upload(f->d, p, v, sizeof v, &err), "%s", err.msg);
}

/* Records, does not run; replays in order, with the arguments as they were
 * when recorded. */
static void test_record_and_replay(fixture *f) {
    tlm_err err = {{0}};
    set(f, f->x, 1), set(f, f->y, 0), set(f, f->by, 3);
    CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
    CHECK(tlm_device_capturing(f->d), "not capturing after capture_begin");
    float v = 2;
    int n = N;
    void *scale_args[] = {&f->x, &f->by, &n};
    tlm_launch dims = {.grid = {1, 1, 1}, .block = {N, 1, 1}};
    /* x = (x + 2) * by; y = x; x = 0; then x += 2 again */
    bool ok = add(f, f->x, &v, &err) && tlm_device_launch(f->d, f->scale_by, dims, scale_args, &err) &&
              tlm_device_copy(f->d, f->y, f->x, N * sizeof(float), &err) &&
              tlm_device_zero(f->d, f->x, N * sizeof(float), &err) && add(f, f->x, &v, &err);
    CHECK(ok, "recording: %s", err.msg);
    /* changed after the launches were recorded: a replay must not see it */
    v = 100;
    bool failed = true;
    tlm_graph *g = tlm_device_capture_end(f->d, &failed, &err);
    CHECK(g != NULL && !failed, "capture_end: %s", err.msg);
    CHECK(!tlm_device_capturing(f->d), "still capturing after capture_end");
    CHECK(first(f, f->x) == 1 && first(f, f->y) == 0, "the capture ran its work (x %g, y %g)", first(f, f->x),
          first(f, f->y));
    if (!g) return;
    CHECK(tlm_device_graph_launch(f->d, g, &err), "%s", err.msg);
    CHECK(first(f, f->y) == 9 && first(f, f->x) == 2, "first launch: y %g (expected 9), x %g (expected 2)",
          first(f, f->y), first(f, f->x));
    /* what the graph reads from device memory is read at each launch */
    set(f, f->x, 5), set(f, f->by, 10);
    CHECK(tlm_device_graph_launch(f->d, g, &err), "%s", err.msg);
    CHECK(first(f, f->y) == 70 && first(f, f->x) == 2, "second launch: y %g (expected 70), x %g (expected 2)",
          first(f, f->y), first(f, f->x));
    tlm_device_graph_destroy(f->d, g);
}

/* The negative check: a host scalar baked into a captured launch keeps its
 * captured value at every replay, so a step that passed its step count or
 * dloss this way would be caught by a comparison with the plain run. */
static void test_arguments_copied(fixture *f) {
    tlm_err err = {{0}};
    set(f, f->x, 0);
    float step = 1;
    CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
    CHECK(add(f, f->x, &step, &err), "%s", err.msg);
    tlm_graph *g = tlm_device_capture_end(f->d, NULL, &err);
    CHECK(g != NULL, "%s", err.msg);
    if (!g) return;
    float plain = 0;
    for (step = 1; step <= 4; step++) {
        plain += step;
        CHECK(tlm_device_graph_launch(f->d, g, &err), "%s", err.msg);
    }
    const float replayed = first(f, f->x);
    CHECK(replayed == 4 && plain == 10, "four replays added %g (expected 4 x the captured 1, the plain sum is %g)",
          replayed, plain);
    tlm_device_graph_destroy(f->d, g);
}

typedef enum forbidden { DOWNLOAD, UPLOAD, SYNC, ALLOC, FREE, EVENT, GRAPH_LAUNCH, FORBIDDEN_COUNT } forbidden;

/* One forbidden call during a capture: its line, then the capture's end
 * with the same line; the device works afterwards. */
static void test_forbidden(fixture *f, forbidden which) {
    static const char *const names[] = {
        "a download to the host", "an upload from the host", "a device sync", "an allocation", "a free",
        "an event record",        "a graph launch"};
    tlm_err err = {{0}}, end = {{0}};
    float host[N] = {0};
    tlm_dptr spare = tlm_device_alloc(f->d, 64, &err);
    tlm_event *e = tlm_device_event_create(f->d, &err);
    tlm_graph *inner = NULL;
    if (which == GRAPH_LAUNCH) {
        CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
        inner = tlm_device_capture_end(f->d, NULL, &err);
        CHECK(inner != NULL, "%s", err.msg);
    }
    CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
    float v = 1;
    CHECK(add(f, f->x, &v, &err), "%s", err.msg);
    bool refused = true;
    err.msg[0] = '\0';
    switch (which) {
    case DOWNLOAD: refused = !tlm_device_download(f->d, host, f->x, sizeof host, &err); break;
    case UPLOAD: refused = !tlm_device_upload(f->d, f->x, host, sizeof host, &err); break;
    case SYNC: refused = !tlm_device_sync(f->d, &err); break;
    case ALLOC: refused = tlm_device_alloc(f->d, 64, &err) == 0; break;
    case FREE: tlm_device_free(f->d, spare); break;
    case EVENT: refused = !tlm_device_event_record(f->d, e, TLM_STREAM_COMPUTE, &err); break;
    case GRAPH_LAUNCH: refused = !tlm_device_graph_launch(f->d, inner, &err); break;
    case FORBIDDEN_COUNT: break;
    }
    CHECK(refused, "%s during a capture was not refused", names[which]);
    if (which != FREE)
        CHECK(has(err.msg, names[which]) && has(err.msg, "during a CUDA graph capture") && !strchr(err.msg, '\n'),
              "%s: the message '%s' does not name it in one line", names[which], err.msg);
    bool failed = true;
    tlm_graph *g = tlm_device_capture_end(f->d, &failed, &end);
    CHECK(g == NULL && !failed, "%s: the spoiled capture ended with a graph", names[which]);
    CHECK(has(end.msg, names[which]) && has(end.msg, "during a CUDA graph capture"),
          "%s: capture_end's message '%s' does not say why", names[which], end.msg);
    tlm_device_graph_destroy(f->d, g);
    tlm_device_graph_destroy(f->d, inner);
    /* usable afterwards: the freed block is still held and frees now */
    set(f, f->x, 3);
    CHECK(first(f, f->x) == 3, "%s: the device is unusable after the spoiled capture", names[which]);
    tlm_device_free(f->d, spare);
    tlm_device_event_destroy(f->d, e);
}

/* Dynamic shared memory past the 48 KiB every block may have: the kernel's
 * first such launch opts it in (device.h), which a capture refuses, spoiled
 * as by any forbidden call; once launched outside, the same launch is
 * captured and each replay has its shared memory. Past the device's limit
 * a launch is refused. */
static void test_dynamic_shared(fixture *f) {
    enum { KIB = 64 };
    tlm_err err = {{0}}, end = {{0}};
    int n = N;
    void *args[] = {&f->x, &n};
    tlm_launch dims = {.grid = {1, 1, 1}, .block = {N, 1, 1}, .shared_bytes = KIB * 1024};
    set(f, f->x, 1);
    CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
    CHECK(!tlm_device_launch(f->d, f->shared_kib, dims, args, &err) &&
              has(err.msg, "tlm_test_shared_kib's first launch with 65536 bytes of dynamic shared memory (past 49152) "
                           "during a CUDA graph capture"),
          "the opt-in in a capture: '%s'", err.msg);
    bool failed = true;
    tlm_graph *g = tlm_device_capture_end(f->d, &failed, &end);
    CHECK(g == NULL && !failed && has(end.msg, "dynamic shared memory"), "the spoiled capture's end: '%s'", end.msg);
    tlm_device_graph_destroy(f->d, g);
    CHECK(tlm_device_launch(f->d, f->shared_kib, dims, args, &err), "outside a capture: %s", err.msg);
    CHECK(first(f, f->x) == 1 + KIB, "x after one launch: %g (expected %d)", first(f, f->x), 1 + KIB);
    CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
    CHECK(tlm_device_launch(f->d, f->shared_kib, dims, args, &err), "captured, once opted in: %s", err.msg);
    g = tlm_device_capture_end(f->d, NULL, &err);
    CHECK(g != NULL, "%s", err.msg);
    if (g) {
        CHECK(tlm_device_graph_launch(f->d, g, &err) && tlm_device_graph_launch(f->d, g, &err), "%s", err.msg);
        CHECK(first(f, f->x) == 1 + 3 * KIB, "x after two replays: %g (expected %d)", first(f, f->x), 1 + 3 * KIB);
        tlm_device_graph_destroy(f->d, g);
    }
    unsigned most = tlm_device_get_info(f->d)->shared_optin;
    CHECK(most >= 96 * 1024, "the device's opt-in limit: %u bytes", most);
    dims.shared_bytes = most + 16;
    char want[400];
    snprintf(want, sizeof want, "%u bytes of dynamic shared memory and 0 of static (%s gives a block at most %u)",
             most + 16, tlm_device_get_info(f->d)->name, most);
    CHECK(!tlm_device_launch(f->d, f->shared_kib, dims, args, &err) && has(err.msg, want), "past the limit: '%s'",
          err.msg);
}

static void test_capture_misuse(fixture *f) {
    tlm_err err = {{0}};
    CHECK(tlm_device_capture_end(f->d, NULL, &err) == NULL && has(err.msg, "no CUDA graph capture"),
          "capture_end without a capture: '%s'", err.msg);
    CHECK(tlm_device_capture_begin(f->d, &err), "%s", err.msg);
    CHECK(!tlm_device_capture_begin(f->d, &err) && has(err.msg, "already under way"), "a second capture: '%s'",
          err.msg);
    tlm_device_graph_destroy(f->d, tlm_device_capture_end(f->d, NULL, &err));
    CHECK(!tlm_device_graph_launch(f->d, NULL, &err) && has(err.msg, "no graph"), "launching no graph: '%s'", err.msg);
}

/* ---- the graph cache ---- */

typedef struct counting_work {
    fixture *f;
    float v;
    int calls;
    bool download; /* a forbidden call inside the work */
} counting_work;

static bool work_fn(void *ctx, tlm_err *err) {
    counting_work *w = ctx;
    w->calls++;
    float host;
    if (w->download && !tlm_device_download(w->f->d, &host, w->f->x, sizeof host, err)) return false;
    return add(w->f, w->f->x, &w->v, err);
}

static void test_cache(fixture *f) {
    tlm_err err = {{0}};
    tlm_graph_cache *c = tlm_graph_cache_new(f->d);
    CHECK(c != NULL, "no cache");
    if (!c) return;
    tlm_graph_key key = {{1, 2, 3}}, other = {{1, 2, 4}};
    counting_work w = {f, 1, 0, false};
    set(f, f->x, 0);
    for (int i = 0; i < 5; i++) CHECK(tlm_graph_cache_run(c, &key, work_fn, &w, &err), "run %d: %s", i, err.msg);
    tlm_graph_stats st = tlm_graph_cache_stats(c);
    CHECK(first(f, f->x) == 5, "five runs added %g", first(f, f->x));
    CHECK(w.calls == 2 && st.captures == 1 && st.launches == 4 && st.plain_runs == 1,
          "warm-up, capture, replays: %d calls of the work, %llu captures, %llu launches, %llu plain", w.calls,
          (unsigned long long)st.captures, (unsigned long long)st.launches, (unsigned long long)st.plain_runs);
    /* switched off: every run calls the work */
    setenv("TLM_CUDA_GRAPHS", "0", 1);
    CHECK(!tlm_graphs_enabled(), "TLM_CUDA_GRAPHS=0 leaves graphs on");
    for (int i = 0; i < 2; i++) CHECK(tlm_graph_cache_run(c, &key, work_fn, &w, &err), "%s", err.msg);
    CHECK(w.calls == 4 && first(f, f->x) == 7, "TLM_CUDA_GRAPHS=0: %d calls, x %g", w.calls, first(f, f->x));
    unsetenv("TLM_CUDA_GRAPHS");
    /* a work that downloads fails at its capture with its own line */
    counting_work bad = {f, 1, 0, true};
    CHECK(tlm_graph_cache_run(c, &other, work_fn, &bad, &err), "warm-up: %s", err.msg);
    CHECK(!tlm_graph_cache_run(c, &other, work_fn, &bad, &err) && has(err.msg, "a download to the host during a CUDA"),
          "a download in a captured work: '%s'", err.msg);
    CHECK(!tlm_device_capturing(f->d), "left capturing after a failed work");
    tlm_graph_cache_free(c);
}

int main(void) {
    tlm_err err = {{0}};
    fixture f = {0};
    f.d = tlm_device_open("cuda", &err);
    if (!f.d) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        return 1;
    }
    tlm_module *m = tlm_device_module_load(f.d, "the graph test's kernels", source, NULL, &err);
    CHECK(m != NULL, "%s", err.msg);
    if (m) {
        f.add = tlm_device_kernel(f.d, m, "tlm_test_add", &err);
        f.scale_by = tlm_device_kernel(f.d, m, "tlm_test_scale_by", &err);
        f.shared_kib = tlm_device_kernel(f.d, m, "tlm_test_shared_kib", &err);
        f.x = tlm_device_alloc(f.d, N * sizeof(float), &err);
        f.y = tlm_device_alloc(f.d, N * sizeof(float), &err);
        f.by = tlm_device_alloc(f.d, N * sizeof(float), &err);
        CHECK(f.add && f.scale_by && f.shared_kib && f.x && f.y && f.by, "%s", err.msg);
    }
    if (f.add && f.scale_by && f.shared_kib && f.x && f.y && f.by) {
        test_record_and_replay(&f);
        test_arguments_copied(&f);
        for (int i = 0; i < FORBIDDEN_COUNT; i++) test_forbidden(&f, (forbidden)i);
        test_capture_misuse(&f);
        test_dynamic_shared(&f);
        test_cache(&f);
    }
    tlm_device_close(f.d);
    return test_finish("test_graphs");
}
