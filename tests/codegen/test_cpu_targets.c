/* Target selection: named CPUs produce working objects (generic x86-64
 * always; x86-64-v3 / v4 when this machine can run them), O0 code is as
 * correct as O3, duplicate specs are emitted once, and bad input (unknown
 * CPU, bad spec, bad opt level) is a clean error, not a crash. The packing
 * transposes for CPUs that split 256-bit operations (Zen 1) are checked on
 * any AVX2 machine through TLM_CODEGEN_SPLIT_256, with the default tile
 * and with tiles of 5 and 10 rows (a part quad; two row groups), on odd
 * shapes too, and the IR must show which path was built. So must the
 * wide AVX-512 tile (6 x 4 vectors: Intel's CPUs, Zens 4 and 5 from d_model 768),
 * checked for the CPUs and models that get it and those that do not, and
 * run where AVX-512 is. */
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

/* For the split-256 transposes: d_model and widths that are not multiples
 * of 8, so that packing meets partial 8-float k chunks (masked loads). */
static const tlm_kernel_spec odd_specs[] = {{TLM_MLP_SWIGLU, 300, 37}, {TLM_MLP_GELU, 17, 3}};

/* Builds `n` specs (the last may repeat one) and checks the first two. */
static void check_specs(const char *cpu, int opt_level, const tlm_kernel_spec *sp, int n, uint64_t *rng) {
    tlm_codegen_options opt = {cpu, opt_level};
    kernel_lib lib;
    char *err = NULL;
    if (!kernel_lib_build(&lib, sp, n, &opt, &err)) {
        printf("FAIL cpu %s O%d: %s\n", cpu ? cpu : "(host)", opt_level, err);
        free(err);
        fails++;
        return;
    }
    int f = 0;
    for (int s = 0; s < 2; s++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) f += mlp_check_spec(&lib, &sp[s], &cases[c], rng);
    printf("%s cpu %s O%d (codegen %.2fs)\n", f ? "FAIL" : "ok  ", cpu ? cpu : "(host)", opt_level,
           lib.codegen_seconds);
    fails += f;
    kernel_lib_close(&lib);
}

static void check_target(const char *cpu, int opt_level, uint64_t *rng) { check_specs(cpu, opt_level, specs, 3, rng); }

/* A CPU's two per-target settings: whether it splits 256-bit operations
 * (split_256) and from which d_model its AVX-512 kernels use the wide tile
 * (wide_tile_from, gemm_default_blocking; 0: never). */
static void check_flag(const char *flag, const char *cpu, int want) {
    cpu_target t;
    char *err = NULL;
    bool ok = cpu_target_resolve(cpu, &t, &err);
    int got = !ok ? -1 : strcmp(flag, "split_256") == 0 ? t.split_256 : t.wide_tile_from;
    int good = got == want;
    printf("%s cpu %s: %s %d (want %d)%s%s\n", good ? "ok  " : "FAIL", cpu, flag, got, want, err ? ": " : "",
           err ? err : "");
    fails += !good;
    free(err);
    if (ok) cpu_target_dispose(&t);
}

/* Occurrences of `needle` in the IR file at `path` inside the definitions
 * of functions whose name starts with `fn` ("" for the whole file); -1 if
 * the file cannot be read. A definition runs from its "define" line to the
 * closing brace at the start of a line. */
static int count_in_ir(const char *path, const char *fn, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char head[128];
    snprintf(head, sizeof head, "@%s", fn);
    int n = 0, inside = !*fn;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (*fn && !strncmp(line, "define ", 7)) inside = strstr(line, head) != NULL;
        else if (*fn && line[0] == '}') inside = 0;
        if (inside)
            for (const char *p = line; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    }
    fclose(f);
    return n;
}

/* The halves' stores (volatile 4-float stores: nothing else in codegen is
 * volatile) in functions `fn` of the IR dump: some, or none. */
static void expect_halves(const char *path, const char *fn, bool some, const char *split) {
    int n = count_in_ir(path, fn, "store volatile <4 x float>");
    int good = some ? n > 0 : n == 0;
    printf("%s %s: %d stores of halves (split %s)\n", good ? "ok  " : "FAIL", *fn ? fn : "the module", n, split);
    fails += !good;
}

/* x86-64-v3 kernels with the split-256 transposes forced on or off, under
 * a blocking ("mr,nv,kc,mc", NULL for the default), on tiny's kind of
 * shapes and on odd ones. The optimised IR must hold the halves' stores in
 * both transposing packers when the transposes are on and nowhere when off, so
 * a setting that stopped reaching either packer fails here even where both
 * paths are correct. */
static void check_split_path(const char *split, const char *blocking, uint64_t *rng) {
    char ir_path[4096];
    if (!test_temp_file(ir_path, sizeof ir_path, "tlm_split_ir")) {
        fails++;
        return;
    }
    setenv("TLM_CODEGEN_SPLIT_256", split, 1);
    if (blocking) setenv("TLM_CODEGEN_BLOCKING", blocking, 1);
    setenv("TLM_CODEGEN_DUMP_IR", ir_path, 1);
    printf("TLM_CODEGEN_SPLIT_256=%s TLM_CODEGEN_BLOCKING=%s:\n", split, blocking ? blocking : "(default)");
    check_target("x86-64-v3", 3, rng);
  /* on: in both packing routines that transpose (A's rows, with and
   * without the activation, and B's NK panels); off: nowhere */
    if (split[0] == '1') {
        expect_halves(ir_path, "tlm_pack_a_rows", true, split);
        expect_halves(ir_path, "tlm_pack_b_nk", true, split);
    } else {
        expect_halves(ir_path, "", false, split);
    }
    unsetenv("TLM_CODEGEN_DUMP_IR");
    check_specs("x86-64-v3", 3, odd_specs, 2, rng);
    unsetenv("TLM_CODEGEN_SPLIT_256");
    unsetenv("TLM_CODEGEN_BLOCKING");
    unlink(ir_path);
}

/* The tile function of `cpu`'s kernels for `spec`, in its optimised IR:
 * how often it addresses byte offset 192, a fourth 16-float vector (of B's
 * step in the panel, and of each C row of the tile); -1 on a failure. */
static int tile_ir_count(const char *cpu, const tlm_kernel_spec *spec, char **err) {
    char ir_path[4096], obj_path[4096];
    if (!test_temp_file(ir_path, sizeof ir_path, "tlm_tile_ir")) return -1;
    if (!test_temp_file(obj_path, sizeof obj_path, "tlm_tile_obj")) {
        unlink(ir_path);
        return -1;
    }
    setenv("TLM_CODEGEN_DUMP_IR", ir_path, 1);
    tlm_codegen_options opt = {cpu, 3};
    bool ok = tlm_codegen_cpu_object(spec, 1, &opt, obj_path, err);
    unsetenv("TLM_CODEGEN_DUMP_IR");
    int n = ok ? count_in_ir(ir_path, "tlm_tile", "i64 192") : -1;
    unlink(ir_path);
    unlink(obj_path);
    return n;
}

/* The wide tile, 4 vectors across (nv = 4 at 16 floats), reaches the
 * emitter exactly when `wide`: its tile addresses the fourth vector many
 * more times than x86-64-v4's 12 x 32 tile for the same spec (31 against
 * 4 at d_model 768, where other constants are 192 too; 32 against 0 at
 * 72). (MR and KC are check_tile_text's.) Code for any x86-64 CPU can be
 * generated here; only running it needs that CPU. */
static void check_tile_ir(const char *cpu, const tlm_kernel_spec *spec, bool wide) {
    char *err = NULL;
    int n = tile_ir_count(cpu, spec, &err), base = n < 0 ? -1 : tile_ir_count("x86-64-v4", spec, &err);
    int good = n >= 0 && base >= 0 && (wide ? n >= base + 16 : n < base + 16);
    printf("%s cpu %s, d_model %d: %d addresses of a fourth B vector in tlm_tile, x86-64-v4's %d (wide tile %d)%s%s\n",
           good ? "ok  " : "FAIL", cpu, spec->d_model, n, base, wide, err ? ": " : "", err ? err : "");
    fails += !good;
    free(err);
}

/* tlm_codegen_cpu_tile's line for `cpu` holds `want`. */
static void check_tile_text(const char *cpu, int d_model, const char *want) {
    char *err = NULL;
    char *line = tlm_codegen_cpu_tile(cpu, d_model, &err);
    int good = line && strstr(line, want);
    printf("%s cpu %s, d_model %d: \"%s\" (want \"%s\")%s%s\n", good ? "ok  " : "FAIL", cpu, d_model,
           line ? line : "(none)", want, err ? ": " : "", err ? err : "");
    fails += !good;
    tlm_codegen_free(line);
    free(err);
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
  /* The checks below set these themselves; one left in the environment
   * would change what the others build. */
    unsetenv("TLM_CODEGEN_SPLIT_256");
    unsetenv("TLM_CODEGEN_BLOCKING");
    unsetenv("TLM_CODEGEN_DUMP_IR");
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
    check_flag("split_256", "znver1", true);
    check_flag("split_256", "znver2", false);
    check_flag("split_256", "x86-64-v3", false);
    check_flag("split_256", "haswell", false);
    check_flag("split_256", "bdver2", true);
    check_flag("wide_tile", "sapphirerapids", 1);
    check_flag("wide_tile", "skylake-avx512", 1);
    check_flag("wide_tile", "icelake-server", 1);
    check_flag("wide_tile", "znver5", 768);
    check_flag("wide_tile", "znver4", 768);
    check_flag("wide_tile", "x86-64-v4", 0);
    check_flag("wide_tile", "haswell", 0);
    check_tile_text("sapphirerapids", 256, "16-float vectors, 6 x 64 register tile, KC 128, MC 384");
    check_tile_text("znver4", 767, "16-float vectors, 12 x 32 register tile, KC 256, MC 384");
    check_tile_text("znver4", 768, "16-float vectors, 6 x 64 register tile, KC 128, MC 384");
    check_tile_text("znver5", 767, "16-float vectors, 12 x 32 register tile, KC 256, MC 384");
    check_tile_text("znver5", 768, "16-float vectors, 6 x 64 register tile, KC 128, MC 384");
    check_tile_text("x86-64-v3", 1024, "8-float vectors, 6 x 16 register tile, KC 256");
    check_tile_text("x86-64", 256, "4-float vectors, 6 x 8 register tile");
    setenv("TLM_CODEGEN_BLOCKING", "5,3,64,40", 1);
    check_tile_text("znver4", 256, "5 x 48 register tile, KC 64, MC 40 (set by TLM_CODEGEN_BLOCKING)");
    check_tile_text("znver5", 1024, "5 x 48 register tile, KC 64, MC 40 (set by TLM_CODEGEN_BLOCKING)");
    unsetenv("TLM_CODEGEN_BLOCKING");
  /* Zens 4 and 5 from d_model 768 (check_tile_text checks 767 against 768; this,
   * that tlm_codegen_cpu_object hands the specs' d_model to the rule) */
    static const tlm_kernel_spec wide_d = {TLM_MLP_SWIGLU, 768, 40};
    check_tile_ir("sapphirerapids", &specs[0], true);
    check_tile_ir("znver4", &specs[0], false);
    check_tile_ir("x86-64-v4", &specs[0], false);
    check_tile_ir("znver5", &specs[0], false);
    check_tile_ir("znver5", &wide_d, true);
    check_tile_ir("znver4", &wide_d, true);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl")) {
        check_target("x86-64-v4", 3, &rng);
      /* the wide tile on the same shapes, odd ones, and partial row tiles
       * of every size (rows 37 and 5 against 6-row tiles), as the oldest
       * CPU that gets it (a newer one's code may use what this host lacks) */
        check_target("skylake-avx512", 3, &rng);
        check_specs("skylake-avx512", 3, odd_specs, 2, &rng);
    } else {
        printf("skip running x86-64-v4 and skylake-avx512 kernels: this CPU lacks AVX-512\n");
    }
    check_target(NULL, 0, &rng);

    char *tile_err = NULL;
    char *no_tile = tlm_codegen_cpu_tile("not-a-cpu", 256, &tile_err);
    int tile_good = !no_tile && tile_err && strstr(tile_err, "not-a-cpu");
    printf("%s tile of an unknown CPU -> %s\n", tile_good ? "ok  " : "FAIL", tile_err ? tile_err : "(no error)");
    fails += !tile_good;
    tlm_codegen_free(no_tile);
    free(tile_err);
    tlm_codegen_options bad_cpu = {"not-a-cpu", 3};
    expect_error("unknown CPU", specs, 1, &bad_cpu, "not-a-cpu");
    tlm_kernel_spec bad_spec = {TLM_MLP_GELU, 72, 0};
    expect_error("width 0", &bad_spec, 1, NULL, "width");
    tlm_kernel_spec bad_kind = {(tlm_mlp)7, 72, 40};
    expect_error("unknown kind", &bad_kind, 1, NULL, "kind");
    setenv("TLM_CODEGEN_SPLIT_256", "yes", 1);
    expect_error("TLM_CODEGEN_SPLIT_256=yes", specs, 1, NULL, "TLM_CODEGEN_SPLIT_256");
    setenv("TLM_CODEGEN_SPLIT_256", "1", 1);
    tlm_codegen_options four_wide = {"x86-64", 3};
    expect_error("TLM_CODEGEN_SPLIT_256=1 on a 4-wide target", specs, 1, &four_wide, "needs 8-wide");
    unsetenv("TLM_CODEGEN_SPLIT_256");
    tlm_codegen_options bad_level = {NULL, 9};
    expect_error("opt_level 9", specs, 1, &bad_level, "opt_level");
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}
