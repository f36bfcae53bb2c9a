/* dist.comm_stream: the emulated device's comm stream (device.h "streams
 * and events"), on which the device path's gradient chain relies to make
 * ordering mistakes fail in CI. Its host calls are deferred: queuing runs
 * nothing, nor do a download or the compute stream waiting for an event of
 * its own; the compute stream waiting for an event recorded on the comm
 * stream runs the calls before that event and no later one; a sync runs
 * the rest. A kernel launch chosen for the comm stream runs in place
 * inside one of its host calls and is refused outside (it cannot be
 * deferred); a GEMM is refused there. Runs on the emulated device
 * (TLM_TEST_DEVICE=emulated, set here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

static int failures;

static void expect(bool ok, const char *what, const char *got) {
    if (ok) {
        printf("dist.comm_stream: ok: %s: %s\n", what, got);
        return;
    }
    fprintf(stderr, "dist.comm_stream: FAILED: %s: got \"%s\"\n", what, got);
    failures++;
}

static void die(const char *what, const tlm_err *err) {
    fprintf(stderr, "dist.comm_stream: %s: %s\n", what, err->msg);
    exit(1);
}

/* The calls that have run, in order: "12" after calls 1 and 2. */
static char ran[16];

static void call(void *ctx) {
    size_t n = strlen(ran);
    if (n + 1 < sizeof ran) ran[n] = *(const char *)ctx;
}

/* A launch from a host call, as the chain's additions are made. */
typedef struct launch_in_call {
    tlm_device *d;
    tlm_kernel *k;
    tlm_dptr x;
    bool ok;
    tlm_err err;
} launch_in_call;

static void launch_call(void *ctx) {
    launch_in_call *l = ctx;
    int n = 64;
    void *args[] = {&l->x, &n};
    tlm_stream was = tlm_device_launch_stream(l->d, TLM_STREAM_COMM);
    l->ok = tlm_device_launch(l->d, l->k, (tlm_launch){.grid = {1, 1, 1}, .block = {64, 1, 1}}, args, &l->err);
    tlm_device_launch_stream(l->d, was);
}

static void queue(tlm_device *d, void (*fn)(void *), void *ctx) {
    tlm_err err;
    if (!tlm_device_comm_host_call(d, fn, ctx, &err)) die("queue a host call", &err);
}

int main(void) {
    setenv("TLM_TEST_DEVICE", "emulated", 1);
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    if (!d) die("open the emulated device", &err);
    tlm_event *compute = tlm_device_event_create(d, &err), *comm = compute ? tlm_device_event_create(d, &err) : NULL;
    if (!compute || !comm) die("event create", &err);
    static const char one = '1', two = '2', three = '3';

    queue(d, call, (void *)&one);
    expect(strcmp(ran, "") == 0, "a queued call waits", ran);
    if (!tlm_device_event_record(d, comm, TLM_STREAM_COMM, &err) ||
        !tlm_device_event_record(d, compute, TLM_STREAM_COMPUTE, &err) ||
        !tlm_device_stream_wait(d, TLM_STREAM_COMM, compute, &err) ||
        !tlm_device_stream_wait(d, TLM_STREAM_COMPUTE, compute, &err))
        die("events", &err);
    expect(strcmp(ran, "") == 0, "waits on a compute event run nothing", ran);
    float back[64];
    tlm_dptr x = tlm_device_alloc(d, sizeof back, &err);
    if (!x) die("alloc", &err);
    queue(d, call, (void *)&two);
    if (!tlm_device_download(d, back, x, sizeof back, &err)) die("download", &err);
    expect(strcmp(ran, "") == 0, "a download runs nothing of the comm stream", ran);
    if (!tlm_device_stream_wait(d, TLM_STREAM_COMPUTE, comm, &err)) die("wait", &err);
    expect(strcmp(ran, "1") == 0, "the compute stream waiting runs the calls before the event, no later one", ran);
    queue(d, call, (void *)&three);
    if (!tlm_device_sync(d, &err)) die("sync", &err);
    expect(strcmp(ran, "123") == 0, "a sync runs the rest, in order", ran);
    if (!tlm_device_stream_wait(d, TLM_STREAM_COMPUTE, comm, &err)) die("wait", &err);
    expect(strcmp(ran, "123") == 0, "a call runs once", ran);

    /* Launches: in place inside a host call, refused outside it. */
    const char *source = "extern \"C\" __global__ void tlm_test_fill(float *x, int n) {\n"
                         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  if (i < n) x[i] = 2.0f;\n"
                         "}\n";
    tlm_module *m = tlm_device_module_load(d, "a test kernel", source, NULL, &err);
    tlm_kernel *k = m ? tlm_device_kernel(d, m, "tlm_test_fill", &err) : NULL;
    if (!k) die("module", &err);
    launch_in_call l = {d, k, x, false, {{0}}};
    tlm_stream was = tlm_device_launch_stream(d, TLM_STREAM_COMM);
    int n = 64;
    void *args[] = {&x, &n};
    const char *msg =
        tlm_device_launch(d, k, (tlm_launch){.grid = {1, 1, 1}, .block = {64, 1, 1}}, args, &err) ? "(ran)" : err.msg;
    expect(strstr(msg, "runs launches on the comm stream only from a host call there") != NULL,
           "a launch on the comm stream outside a host call", msg);
    msg = tlm_device_gemm(
              d, &(tlm_gemm){.m = 1, .n = 1, .k = 1, .a = x, .b = x, .d = x, .lda = 1, .ldb = 1, .ldd = 1, .batch = 1},
              &err)
              ? "(ran)"
              : err.msg;
    expect(strcmp(msg, "GEMMs run on the compute stream only") == 0, "a GEMM on the comm stream", msg);
    tlm_device_launch_stream(d, was);
    queue(d, launch_call, &l);
    if (!tlm_device_event_record(d, comm, TLM_STREAM_COMM, &err)) die("record", &err);
    if (!tlm_device_download(d, back, x, sizeof back, &err)) die("download", &err);
    expect(back[0] == 0.0f && back[63] == 0.0f, "before the wait the kernel has not run", "zeros");
    if (!tlm_device_stream_wait(d, TLM_STREAM_COMPUTE, comm, &err) ||
        !tlm_device_download(d, back, x, sizeof back, &err))
        die("wait", &err);
    expect(l.ok && back[0] == 2.0f && back[63] == 2.0f, "a launch from a host call runs there",
           l.ok ? "filled" : l.err.msg);

    tlm_device_event_destroy(d, compute);
    tlm_device_event_destroy(d, comm);
    tlm_device_free(d, x);
    tlm_device_close(d);
    return failures ? 1 : 0;
}
