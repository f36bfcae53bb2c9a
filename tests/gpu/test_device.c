/* gpu.device: the device API on the emulated device (TLM_TEST_DEVICE=
 * emulated): opening and its errors, the test switch, memory and its
 * accounting and range checks, a two-kernel module compiled, loaded and
 * launched, kernel lookup, launch shapes, and compile errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "test_util.h" /* CHECK, test_finish */

static bool has(const char *msg, const char *needle) { return strstr(msg, needle) != NULL; }

static void refused_name(const char *name, const char *needle) {
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open(name, &err);
    CHECK(d == NULL, "opened \"%s\"", name ? name : "(null)");
    CHECK(has(err.msg, needle), "\"%s\": message '%s' lacks '%s'", name ? name : "(null)", err.msg, needle);
    tlm_device_close(d);
}

static void test_names(void) {
    refused_name("cuda:", "lacks its number");
    refused_name("cuda:x", "not a device number");
    refused_name("cuda:-1", "not a device number");
    refused_name("cuda:1x", "not a device number");
    refused_name("cuda: 1", "not a device number");
    refused_name("cuda:99999999999", "too large");
    refused_name("cpu", "unknown device");
    refused_name("CUDA", "unknown device");
    refused_name("cudax", "unknown device");
    refused_name("", "unknown device");
    refused_name(NULL, "no device named");
    refused_name("cuda:1", "no CUDA device 1");

    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda:0", &err);
    CHECK(d != NULL, "cuda:0: %s", err.msg);
    tlm_device_close(d);
}

/* TLM_TEST_DEVICE picks the backend; a wrong value is named. */
static void test_switch(void) {
    setenv("TLM_TEST_DEVICE", "emulatd", 1);
    refused_name("cuda", "TLM_TEST_DEVICE=emulatd");
    /* Unset: the real device, which here either opens (a GPU) or says why
     * not; either way it is not the emulated one. */
    unsetenv("TLM_TEST_DEVICE");
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    if (d) CHECK(!tlm_device_get_info(d)->emulated, "the real backend reports itself emulated");
    else CHECK(err.msg[0] && !has(err.msg, "emulated"), "real backend's refusal: '%s'", err.msg);
    tlm_device_close(d);
    setenv("TLM_TEST_DEVICE", "emulated", 1);
}

static void test_info(tlm_device *d) {
    const tlm_device_info *info = tlm_device_get_info(d);
    CHECK(info->emulated, "not emulated");
    CHECK(strcmp(info->name, "emulated CUDA device (CPU)") == 0, "name %s", info->name);
    CHECK(info->cc_major == 9 && info->cc_minor == 0, "cc %d.%d", info->cc_major, info->cc_minor);
    CHECK(strcmp(info->arch, "sm_90") == 0, "arch %s", info->arch);
    CHECK(info->ordinal == 0 && info->driver_version == 0, "ordinal %d driver %d", info->ordinal, info->driver_version);
    CHECK(info->memory_total > ((uint64_t)64 << 20), "memory_total %llu", (unsigned long long)info->memory_total);
}

static void test_memory(tlm_device *d) {
    tlm_err err = {{0}};
    const uint64_t base = tlm_device_memory_in_use(d);
    tlm_dptr a = tlm_device_alloc(d, 1000, &err);
    tlm_dptr b = tlm_device_alloc(d, 1000, &err);
    tlm_dptr empty = tlm_device_alloc(d, 0, &err);
    CHECK(a && b && empty, "alloc: %s", err.msg);
    if (!a || !b || !empty) return;
    CHECK(a % 256 == 0 && b % 256 == 0 && empty % 256 == 0, "alignment");
    CHECK(empty != a && empty != b, "a zero-byte allocation shares an address");
    CHECK(tlm_device_memory_in_use(d) == base + 2000, "in use %llu, expected %llu",
          (unsigned long long)tlm_device_memory_in_use(d), (unsigned long long)(base + 2000));

    unsigned char host[1000], back[1000];
    CHECK(tlm_device_download(d, back, a, sizeof back, &err), "%s", err.msg);
    bool zero = true;
    for (size_t i = 0; i < sizeof back; i++) zero = zero && back[i] == 0;
    CHECK(zero, "alloc is not zero-filled");

    for (size_t i = 0; i < sizeof host; i++) host[i] = (unsigned char)(i * 7 + 3);
    CHECK(tlm_device_upload(d, a, host, sizeof host, &err), "%s", err.msg);
    CHECK(tlm_device_copy(d, b, a, sizeof host, &err), "%s", err.msg);
    CHECK(tlm_device_zero(d, b + 100, 50, &err), "%s", err.msg);
    memset(back, 0xee, sizeof back);
    CHECK(tlm_device_download(d, back, b, sizeof back, &err), "%s", err.msg);
    bool same = true;
    for (size_t i = 0; i < sizeof back; i++) same = same && back[i] == (i >= 100 && i < 150 ? 0 : host[i]);
    CHECK(same, "copy then zero gave other bytes");
    /* a sub-range of an allocation */
    CHECK(tlm_device_upload(d, a + 990, host, 10, &err), "%s", err.msg);
    CHECK(tlm_device_sync(d, &err), "%s", err.msg);

    /* ranges outside an allocation, and overlapping copies, are refused */
    CHECK(!tlm_device_upload(d, a + 1, host, 1000, &err) && has(err.msg, "not inside one device allocation"), "%s",
          err.msg);
    CHECK(!tlm_device_download(d, back, a + 1000, 1, &err) && has(err.msg, "download"), "%s", err.msg);
    CHECK(!tlm_device_zero(d, 8, 1, &err) && has(err.msg, "zero"), "%s", err.msg);
    CHECK(!tlm_device_copy(d, a + 10, a, 100, &err) && has(err.msg, "overlap"), "%s", err.msg);
    CHECK(!tlm_device_copy(d, b, a + 500, 501, &err) && has(err.msg, "source"), "%s", err.msg);
    CHECK(!tlm_device_upload(d, a, NULL, 4, &err), "upload from NULL");
    CHECK(tlm_device_upload(d, 0, NULL, 0, &err), "a zero-byte upload is a no-op");

    tlm_device_free(d, b);
    CHECK(tlm_device_memory_in_use(d) == base + 1000, "after free: %llu",
          (unsigned long long)tlm_device_memory_in_use(d));
    tlm_device_free(d, b); /* twice, and unknown addresses: nothing */
    tlm_device_free(d, a + 8);
    tlm_device_free(d, 0);
    CHECK(tlm_device_memory_in_use(d) == base + 1000, "after bad frees: %llu",
          (unsigned long long)tlm_device_memory_in_use(d));
    CHECK(!tlm_device_upload(d, b, host, 1, &err), "upload to a freed allocation");
    tlm_device_free(d, a);
    tlm_device_free(d, empty);
    CHECK(tlm_device_memory_in_use(d) == base, "all freed: %llu", (unsigned long long)tlm_device_memory_in_use(d));

    /* more allocations than the table's first size, freed out of order */
    enum { N = 300 };
    tlm_dptr many[N];
    for (int i = 0; i < N; i++) many[i] = tlm_device_alloc(d, (size_t)i + 1, &err);
    for (int i = 0; i < N; i += 2) tlm_device_free(d, many[i]);
    bool ok = true;
    for (int i = 1; i < N; i += 2) ok = ok && tlm_device_upload(d, many[i], host, (size_t)i + 1, &err);
    CHECK(ok, "uploads into the survivors: %s", err.msg);
    for (int i = 1; i < N; i += 2) tlm_device_free(d, many[i]);
    CHECK(tlm_device_memory_in_use(d) == base, "many freed: %llu", (unsigned long long)tlm_device_memory_in_use(d));
}

/* Two kernels, a commented-out one and a string that looks like one: only
 * the real two are kernels (a third would be an export of nothing, and the
 * module would not compile). */
static const char two_kernels[] =
    "// extern \"C\" __global__ void ghost(float *x) {}\n"
    "/* extern \"C\" __global__ void ghost2(float *x) {} */\n"
    "static const char *note = \"extern \\\"C\\\" __global__ void ghost3(\";\n"
    "__device__ float twice(float v) { return 2.0f * v; }\n"
    "extern \"C\" __global__ void add_index(float *x, int n) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    x[i] += (float)i;\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "    block_sums(const float *x, float *sums, float scale, long long n) {\n"
    "  __shared__ float part[256];\n"
    "  float s = 0.0f;\n"
    "  for (long long i = threadIdx.x; i < n; i += blockDim.x) s += x[i];\n"
    "  part[threadIdx.x] = s;\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x == 0) {\n"
    "    float t = 0.0f;\n"
    "    for (unsigned j = 0; j < blockDim.x; j++) t += part[j];\n"
    "    sums[blockIdx.x] = twice(t) * scale;\n"
    "  }\n"
    "}\n";

static void test_kernels(tlm_device *d) {
    tlm_err err = {{0}};
    const uint64_t before = tlm_device_memory_in_use(d);
    tlm_module_report report;
    tlm_module *m = tlm_device_module_load(d, "the test's kernels", two_kernels, &report, &err);
    CHECK(m != NULL, "load: %s", err.msg);
    if (!m) return;
    CHECK(tlm_device_memory_in_use(d) > before, "a loaded module counts as memory in use");
    tlm_kernel *add = tlm_device_kernel(d, m, "add_index", &err);
    tlm_kernel *sums = tlm_device_kernel(d, m, "block_sums", &err);
    CHECK(add && sums, "lookup: %s", err.msg);
    CHECK(tlm_device_kernel(d, m, "add_index", &err) == add, "a second lookup gives another handle");
    for (int i = 0; i < 3; i++) {
        const char *ghost = i == 0 ? "ghost" : i == 1 ? "ghost2" : "ghost3";
        CHECK(!tlm_device_kernel(d, m, ghost, &err) && has(err.msg, ghost) && has(err.msg, "the test's kernels"),
              "%s: %s", ghost, err.msg);
    }
    CHECK(!tlm_device_kernel(d, m, "twice", &err) && has(err.msg, "no kernel"), "a __device__ function: %s", err.msg);

    enum { N = 1000 };
    float host[N];
    for (int i = 0; i < N; i++) host[i] = 0.5f * (float)(i % 7);
    tlm_dptr x = tlm_device_alloc(d, sizeof host, &err);
    tlm_dptr out = tlm_device_alloc(d, 3 * sizeof(float), &err);
    CHECK(x && out, "alloc: %s", err.msg);
    if (add && sums && x && out) {
        CHECK(tlm_device_upload(d, x, host, sizeof host, &err), "%s", err.msg);
        int n = N;
        void *add_args[] = {&x, &n};
        /* 2 blocks of 64 threads stride over the 1000 elements */
        tlm_launch dims = {.grid = {2, 1, 1}, .block = {64, 1, 1}};
        CHECK(tlm_device_launch(d, add, dims, add_args, &err), "add_index: %s", err.msg);
        float back[N];
        CHECK(tlm_device_download(d, back, x, sizeof back, &err), "%s", err.msg);
        int wrong = 0;
        double total = 0;
        for (int i = 0; i < N; i++) {
            wrong += back[i] != host[i] + (float)i;
            total += back[i];
        }
        CHECK(wrong == 0, "add_index: %d of %d elements wrong", wrong, N);

        float scale = 0.25f;
        long long count = N;
        void *sum_args[] = {&x, &out, &scale, &count};
        tlm_launch three = {.grid = {3, 1, 1}, .block = {256, 1, 1}};
        CHECK(tlm_device_launch(d, sums, three, sum_args, &err), "block_sums: %s", err.msg);
        float got[3];
        CHECK(tlm_device_download(d, got, out, sizeof got, &err), "%s", err.msg);
        /* every value is a multiple of 0.5 below 2^24: the float sums are exact */
        for (int b = 0; b < 3; b++)
            CHECK(got[b] == (float)(2 * total * 0.25), "block %d: %g, expected %g", b, got[b], 2 * total * 0.25);
    }

    /* shapes CUDA refuses are refused before the backend sees them */
    int n = 1;
    void *args[] = {&x, &n};
    struct {
        tlm_launch dims;
        const char *needle;
    } bad[] = {
        {{.grid = {0, 1, 1}, .block = {32, 1, 1}}, "zero dimension"},
        {{.grid = {1, 1, 1}, .block = {32, 0, 1}}, "zero dimension"},
        {{.grid = {1, 1, 1}, .block = {48, 1, 1}}, "multiple of 32"},
        {{.grid = {1, 1, 1}, .block = {1056, 1, 1}}, "at most 1024"},
        {{.grid = {1, 1, 1}, .block = {64, 32, 1}}, "at most 1024"},
        {{.grid = {1, 1, 1}, .block = {32, 1, 65}}, "at most 1024"},
        {{.grid = {1, 65536, 1}, .block = {32, 1, 1}}, "grid"},
        {{.grid = {1, 1, 65536}, .block = {32, 1, 1}}, "grid"},
        {{.grid = {2147483648u, 1, 1}, .block = {32, 1, 1}}, "grid"},
    };
    for (size_t i = 0; add && i < sizeof bad / sizeof *bad; i++) {
        CHECK(!tlm_device_launch(d, add, bad[i].dims, args, &err), "shape %zu launched", i);
        CHECK(has(err.msg, bad[i].needle) && has(err.msg, "add_index"), "shape %zu: '%s' lacks '%s'", i, err.msg,
              bad[i].needle);
    }
    CHECK(!tlm_device_launch(d, NULL, (tlm_launch){.grid = {1, 1, 1}, .block = {32, 1, 1}}, args, &err),
          "a NULL kernel");

    tlm_device_free(d, x);
    tlm_device_free(d, out);
    tlm_device_module_unload(d, m);
    CHECK(tlm_device_memory_in_use(d) == before, "after unload: %llu, before %llu",
          (unsigned long long)tlm_device_memory_in_use(d), (unsigned long long)before);
}

/* A profile's device table (kernel_times.h): launches and GEMMs timed
 * only while a table is attached, under its op; the MLP's widths as one
 * row; a full table's rest in "(others)"; the printed and JSON forms. */
static void test_kernel_times(tlm_device *d) {
    tlm_err err = {{0}};
    tlm_module_report report;
    tlm_module *m = tlm_device_module_load(d, "the test's kernels", two_kernels, &report, &err);
    tlm_kernel *add = m ? tlm_device_kernel(d, m, "add_index", &err) : NULL;
    CHECK(add != NULL, "load: %s", err.msg);
    tlm_dptr x = tlm_device_alloc(d, 64 * sizeof(float), &err);
    tlm_dptr y = tlm_device_alloc(d, 64 * sizeof(float), &err);
    CHECK(x && y, "alloc: %s", err.msg);
    static tlm_kernel_times t;
    memset(&t, 0, sizeof t);
    int n = 64;
    void *args[] = {&x, &n};
    tlm_launch dims = {.grid = {1, 1, 1}, .block = {64, 1, 1}};
    /* 8 x 8 by 8 x 8, f32: 2 m n k = 1024 FLOPs */
    tlm_gemm g = {.m = 8,
                  .n = 8,
                  .k = 8,
                  .a = x,
                  .b = x,
                  .d = y,
                  .lda = 8,
                  .ldb = 8,
                  .ldd = 8,
                  .batch = 1,
                  .alpha = 1.0f,
                  .a_type = TLM_GEMM_F32,
                  .b_type = TLM_GEMM_F32,
                  .cd_type = TLM_GEMM_F32};
    if (add && x && y) {
        CHECK(tlm_device_launch(d, add, dims, args, &err), "%s", err.msg); /* not attached: not counted */
        tlm_device_time_kernels(d, &t);
        t.op = "mlp";
        for (int i = 0; i < 2; i++) CHECK(tlm_device_launch(d, add, dims, args, &err), "%s", err.msg);
        t.op = NULL;
        CHECK(tlm_device_gemm(d, &g, &err), "%s", err.msg);
        g.c = y, g.ldc = 8, g.beta = 1.0f, g.trans_a = true;
        CHECK(tlm_device_gemm(d, &g, &err), "%s", err.msg);
        tlm_device_time_kernels(d, NULL);
        CHECK(tlm_device_launch(d, add, dims, args, &err), "%s", err.msg);
    }
    CHECK(t.n == 3, "%d rows, wanted 3", t.n);
    CHECK(t.rows[0].op && !strcmp(t.rows[0].op, "mlp") && !strcmp(t.rows[0].what, "add_index") &&
              t.rows[0].calls == 2 && t.rows[0].seconds > 0 && t.rows[0].flops == 0,
          "row 0: %s: %s, %lld calls", t.rows[0].op ? t.rows[0].op : "(none)", t.rows[0].what, t.rows[0].calls);
    CHECK(!t.rows[1].op && !strcmp(t.rows[1].what, "gemm NN f32->f32") && t.rows[1].calls == 1 &&
              t.rows[1].flops == 1024,
          "row 1: %s, %lld calls, %g FLOPs", t.rows[1].what, t.rows[1].calls, t.rows[1].flops);
    CHECK(!strcmp(t.rows[2].what, "gemm TN f32->f32 +C"), "row 2: %s", t.rows[2].what);

    /* widths aggregated; other digits kept */
    memset(&t, 0, sizeof t);
    t.op = "mlp";
    tlm_kernel_times_add(&t, "tlm_mlp_swiglu_d1024_w4224_act", 2.0, 0);
    tlm_kernel_times_add(&t, "tlm_mlp_swiglu_d1024_w1408_act", 1.0, 0);
    tlm_kernel_times_add(&t, "tlm_attention_tc_fwd_d128", 4.0, 0);
    CHECK(t.n == 2 && !strcmp(t.rows[0].what, "tlm_mlp_swiglu_d1024_w*_act") && t.rows[0].calls == 2 &&
              t.rows[0].seconds == 3.0 && !strcmp(t.rows[1].what, "tlm_attention_tc_fwd_d128"),
          "aggregated: %d rows, %s", t.n, t.rows[0].what);
    int order[TLM_KERNEL_TIMES_MAX + 1];
    CHECK(tlm_kernel_times_order(&t, order) == 2 && order[0] == 1, "the longest first");
    /* full: the rest in one row */
    for (int i = 0; i < TLM_KERNEL_TIMES_MAX + 10; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%d", i);
        tlm_kernel_times_add(&t, name, 0.001, 0);
    }
    const tlm_kernel_time *others = &t.rows[TLM_KERNEL_TIMES_MAX];
    CHECK(t.n == TLM_KERNEL_TIMES_MAX && !strcmp(others->what, "(others)") && others->calls == 12,
          "full: %d rows, (others) %lld calls", t.n, others->calls);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tlm_kernel_times_print(&t, 2, 20.0, 3, f);
    fclose(f);
    CHECK(text && has(text, "device kernels and GEMMs") && has(text, "mlp: tlm_attention_tc_fwd_d128") &&
              has(text, "(254 more rows: 254 calls") && has(text, "(any op): (others)"),
          "the table:\n%s", text ? text : "");
    free(text);
    f = open_memstream(&text, &len);
    CHECK(tlm_kernel_times_write_json(&t, 20.0, f), "JSON written");
    fclose(f);
    int rows = 0;
    for (const char *p = text; p && (p = strstr(p, "\"kernel\": ")); p++) rows++;
    CHECK(text && text[0] == '[' && text[len - 1] == ']' && rows == TLM_KERNEL_TIMES_MAX + 1 &&
              has(text, "{\"op\": \"mlp\", \"kernel\": \"tlm_attention_tc_fwd_d128\", \"calls\": 1, \"seconds\": 4, "
                        "\"share\": 0.200000, \"gflops\": null}") &&
              has(text, "{\"op\": \"(any op)\", \"kernel\": \"(others)\""),
          "JSON: %d rows: %.300s", rows, text ? text : "");
    free(text);
    tlm_device_free(d, x);
    tlm_device_free(d, y);
    if (m) tlm_device_module_unload(d, m);
}

/* The compiler's own words come back in err. */
static void test_compile_errors(tlm_device *d) {
    tlm_err err = {{0}};
    const char *broken = "extern \"C\" __global__ void broken(float *x) {\n"
                         "  x[0] = no_such_function(x);\n"
                         "}\n";
    tlm_module *m = tlm_device_module_load(d, "a broken source", broken, NULL, &err);
    CHECK(m == NULL, "a broken source loaded");
    CHECK(has(err.msg, "a broken source") && has(err.msg, "no_such_function") && has(err.msg, "error"), "message: %s",
          err.msg);
    CHECK(has(err.msg, "source.cu:2:"), "the error's line is the source's: %s", err.msg);
    CHECK(!has(err.msg, "/tlm-emu-"), "the temporary folder shows: %s", err.msg);
    tlm_device_module_unload(d, m);

    CHECK(!tlm_device_module_load(d, "nothing", NULL, NULL, &err), "a NULL source loaded");

    /* A compiler that is not there is named; that is no crash and no hang. */
    setenv("TLM_EMU_CXX", "/nonexistent/c++", 1);
    tlm_device *other = tlm_device_open("cuda", &err);
    CHECK(other != NULL, "%s", err.msg);
    if (other) {
        CHECK(!tlm_device_module_load(other, "the test's kernels", two_kernels, NULL, &err),
              "compiled without a compiler");
        CHECK(has(err.msg, "/nonexistent/c++") && has(err.msg, "TLM_EMU_CXX"), "message: %s", err.msg);
        tlm_device_close(other);
    }
    unsetenv("TLM_EMU_CXX");
}

/* Closing a device frees what is still allocated and loaded (run under
 * ASan/valgrind this leaks nothing). */
static void test_close_frees(void) {
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    CHECK(d != NULL, "%s", err.msg);
    if (!d) return;
    CHECK(tlm_device_alloc(d, 4096, &err) != 0, "%s", err.msg);
    CHECK(tlm_device_module_load(d, "the test's kernels", two_kernels, NULL, &err) != NULL, "%s", err.msg);
    tlm_device_close(d);
    tlm_device_close(NULL);
}

int main(void) {
    const char *mode = getenv("TLM_TEST_DEVICE");
    if (!mode || strcmp(mode, "emulated") != 0) {
        printf("FAIL: run with TLM_TEST_DEVICE=emulated (ctest sets it)\n");
        return 1;
    }
    test_names();
    test_switch();
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    CHECK(d != NULL, "open: %s", err.msg);
    if (d) {
        test_info(d);
        test_memory(d);
        test_kernels(d);
        test_kernel_times(d);
        test_compile_errors(d);
        tlm_device_close(d);
    }
    test_close_frees();
    return test_finish("gpu.device");
}
