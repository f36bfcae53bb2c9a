/* Target selection: named CPUs produce working objects (generic x86-64
 * always; x86-64-v3 / v4 when this machine can run them), O0 code is as
 * correct as O3, duplicate specs are emitted once, and bad input (unknown
 * CPU, bad spec, bad opt level) is a clean error, not a crash. The packing
 * transposes for CPUs that split 256-bit operations (Zen 1) are checked on
 * any AVX2 machine through TLM_CODEGEN_SPLIT_256, with the default tile
 * and with tiles of 5 and 10 rows (a part quad; two row groups). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_targets.h"
#include "mlp_check.h"

static int fails;

static const tlm_kernel_spec specs[] = {
    {TLM_MLP_SWIGLU, 72, 200}, {TLM_MLP_GELU, 72, 40}, {TLM_MLP_SWIGLU, 72, 200}, /* duplicate: must not clash */
};
/* the last: several row blocks of the packed A (MC = 384) */
static const mlp_case cases[] = {{37, 3, 30, 7, -5}, {5, 0, 5, 0, 0}, {800, 9, 795, 5, -3}};

static void check_target(const char *cpu, int opt_level, uint64_t *rng) {
    tlm_codegen_options opt = {cpu, opt_level};
    kernel_lib lib;
    char *err = NULL;
    if (!kernel_lib_build(&lib, specs, 3, &opt, &err)) {
        printf("FAIL cpu %s O%d: %s\n", cpu ? cpu : "(host)", opt_level, err);
        free(err);
        kernel_lib_close(&lib);
        fails++;
        return;
    }
    int f = 0;
    for (int s = 0; s < 2; s++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            f += mlp_check_spec(&lib, &specs[s], &cases[c], rng);
    printf("%s cpu %s O%d (codegen %.2fs)\n", f ? "FAIL" : "ok  ", cpu ? cpu : "(host)", opt_level,
           lib.codegen_seconds);
    fails += f;
    kernel_lib_close(&lib);
}

/* Which CPUs count as splitting 256-bit operations. */
static void check_split_256(const char *cpu, bool want) {
    cpu_target t;
    char *err = NULL;
    bool ok = cpu_target_resolve(cpu, &t, &err);
    int good = ok && t.split_256 == want;
    printf("%s cpu %s: split_256 %d (want %d)%s%s\n", good ? "ok  " : "FAIL", cpu, ok ? t.split_256 : -1, want,
           err ? ": " : "", err ? err : "");
    fails += !good;
    free(err);
    if (ok) cpu_target_dispose(&t);
}

/* x86-64-v3 kernels with the split-256 transposes forced on or off, under
 * a blocking ("mr,nv,kc,mc", NULL for the default). */
static void check_split_path(const char *split, const char *blocking, uint64_t *rng) {
    setenv("TLM_CODEGEN_SPLIT_256", split, 1);
    if (blocking) setenv("TLM_CODEGEN_BLOCKING", blocking, 1);
    printf("TLM_CODEGEN_SPLIT_256=%s TLM_CODEGEN_BLOCKING=%s:\n", split, blocking ? blocking : "(default)");
    check_target("x86-64-v3", 3, rng);
    unsetenv("TLM_CODEGEN_SPLIT_256");
    unsetenv("TLM_CODEGEN_BLOCKING");
}

/* Must fail with a message naming the problem, and leave no object. */
static void expect_error(const char *what, const tlm_kernel_spec *s, int n, const tlm_codegen_options *opt,
                         const char *needle) {
    char path[] = "/tmp/tlm_codegen_bad_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    unlink(path);
    char *err = NULL;
    bool ok = tlm_codegen_cpu_object(s, n, opt, path, &err);
    int good = !ok && err && strstr(err, needle) && access(path, F_OK) != 0;
    printf("%s %s -> %s\n", good ? "ok  " : "FAIL", what, err ? err : "(no error)");
    fails += !good;
    free(err);
    unlink(path);
}

int main(void) {
    uint64_t rng = test_seed();
    check_target("x86-64", 3, &rng);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        check_target("x86-64-v3", 3, &rng);
        check_split_path("1", NULL, &rng);
        check_split_path("0", NULL, &rng);
        check_split_path("1", "5,2,64,40", &rng);
        check_split_path("1", "10,1,64,40", &rng);
    } else {
        printf("skip x86-64-v3: this CPU lacks AVX2/FMA\n");
    }
    check_split_256("znver1", true);
    check_split_256("znver2", false);
    check_split_256("x86-64-v3", false);
    check_split_256("haswell", false);
    if (__builtin_cpu_supports("avx512f")) check_target("x86-64-v4", 3, &rng);
    else printf("skip x86-64-v4: this CPU lacks AVX-512\n");
    check_target(NULL, 0, &rng);

    tlm_codegen_options bad_cpu = {"not-a-cpu", 3};
    expect_error("unknown CPU", specs, 1, &bad_cpu, "not-a-cpu");
    tlm_kernel_spec bad_spec = {TLM_MLP_GELU, 72, 0};
    expect_error("width 0", &bad_spec, 1, NULL, "width");
    tlm_kernel_spec bad_kind = {(tlm_mlp)7, 72, 40};
    expect_error("unknown kind", &bad_kind, 1, NULL, "kind");
    setenv("TLM_CODEGEN_SPLIT_256", "yes", 1);
    expect_error("TLM_CODEGEN_SPLIT_256=yes", specs, 1, NULL, "TLM_CODEGEN_SPLIT_256");
    unsetenv("TLM_CODEGEN_SPLIT_256");
    tlm_codegen_options bad_level = {NULL, 9};
    expect_error("opt_level 9", specs, 1, &bad_level, "opt_level");
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}
