/* gpu.kernel_cache: the on-disk module cache (kernel_cache.h) on its own and
 * through tlm_device_module_load on the emulated device: the key and what
 * changes it, a miss then a hit (the report's fields), damaged entries
 * (a payload byte, a header byte, cut short, lengthened, not a file) each
 * removed, rebuilt and loaded fine, and unusable folders that only mean
 * compiling in memory, with one warning line.
 *
 * argv[1]: a folder of its own; each case sets XDG_CACHE_HOME under it. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device.h"
#include "kernel_cache.h"
#include "test_util.h" /* CHECK, test_finish */

static char work[512];

static bool has(const char *text, const char *needle) { return text && strstr(text, needle) != NULL; }

static void run(const char *cmd) {
    if (system(cmd) != 0) {
        printf("FAIL: %s\n", cmd);
        exit(1);
    }
}

/* The ways an entry is damaged; each is caught by tlm_kernel_cache_get,
 * and the marked ones also through the device (each costs a compile). */
static const struct {
    const char *what;
    long flip;  /* the byte to change, or -1 */
    long delta; /* else a change of length */
    long to;    /* or a new length (-1: none) */
    bool through_device;
} damage[] = {
    {"a payload byte flipped", 1000, 0, -1, true},
    {"a magic byte flipped", 3, 0, -1, true},
    {"a length byte flipped", 9, 0, -1, false},
    {"a hash byte flipped", 20, 0, -1, false},
    {"cut short", -1, -100, -1, true},
    {"cut inside the header", -1, 0, 10, false},
    {"one byte longer", -1, 1, -1, true},
    {"empty", -1, 0, 0, false},
};

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    if (!f || fseek(f, at, SEEK_SET) != 0) {
        printf("FAIL: cannot open %s\n", path);
        exit(1);
    }
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void spoil(const char *path, size_t i) {
    struct stat st;
    if (damage[i].flip >= 0) flip_byte(path, damage[i].flip);
    else
        CHECK(stat(path, &st) == 0 &&
                  truncate(path, damage[i].to >= 0 ? damage[i].to : st.st_size + damage[i].delta) == 0,
              "truncate %s", path);
}

/* ---- stderr captured to read the notes ---- */

static char captured[4096];
static int saved_stderr = -1;

static void capture_begin(void) {
    char path[1200];
    snprintf(path, sizeof path, "%s/stderr.txt", work);
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || saved_stderr < 0) {
        printf("FAIL: cannot capture stderr\n");
        exit(1);
    }
    dup2(fd, 2);
    close(fd);
}

static void capture_end(void) {
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    char path[1200];
    snprintf(path, sizeof path, "%s/stderr.txt", work);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(captured, 1, sizeof captured - 1, f) : 0;
    captured[n] = '\0';
    if (f) fclose(f);
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void test_key(void) {
    uint8_t base[32], other[32];
    tlm_kernel_cache_key("src", "-O3", "nvrtc 13.0", "sm_90", base);
    tlm_kernel_cache_key("src", "-O3", "nvrtc 13.0", "sm_90", other);
    CHECK(memcmp(base, other, 32) == 0, "the same fields, another key");
    tlm_kernel_cache_key("src ", "-O3", "nvrtc 13.0", "sm_90", other);
    CHECK(memcmp(base, other, 32) != 0, "the source is not in the key");
    tlm_kernel_cache_key("src", "-O2", "nvrtc 13.0", "sm_90", other);
    CHECK(memcmp(base, other, 32) != 0, "the options are not in the key");
    tlm_kernel_cache_key("src", "-O3", "nvrtc 13.1", "sm_90", other);
    CHECK(memcmp(base, other, 32) != 0, "the compiler id is not in the key");
    tlm_kernel_cache_key("src", "-O3", "nvrtc 13.0", "sm_80", other);
    CHECK(memcmp(base, other, 32) != 0, "the arch is not in the key");
    /* the fields cannot run together */
    tlm_kernel_cache_key("ab", "c", "x", "y", base);
    tlm_kernel_cache_key("a", "bc", "x", "y", other);
    CHECK(memcmp(base, other, 32) != 0, "\"ab\"+\"c\" hashes as \"a\"+\"bc\"");
    tlm_kernel_cache_key("", "", "", "", base);
    tlm_kernel_cache_key("", "", "", " ", other);
    CHECK(memcmp(base, other, 32) != 0, "empty fields");

    char path[256];
    CHECK(tlm_kernel_cache_path("/d", base, path, sizeof path), "path");
    CHECK(strlen(path) == 3 + 64 + 4 && strncmp(path, "/d/", 3) == 0 && has(path, ".bin"), "path %s", path);
    CHECK(!tlm_kernel_cache_path("/d", base, path, 40), "a path that does not fit");
}

static void set_home(const char *sub) {
    char home[1200];
    snprintf(home, sizeof home, "%s/%s", work, sub);
    setenv("XDG_CACHE_HOME", home, 1);
}

/* put and get on their own, in a folder made by tlm_kernel_cache_dir */
static void test_store(void) {
    set_home("store");
    char dir[1200], path[1400];
    tlm_err why = {{0}};
    CHECK(tlm_kernel_cache_dir(dir, sizeof dir, &why), "%s", why.msg);
    char want[1200];
    snprintf(want, sizeof want, "%s/store/tlm/kernels", work);
    CHECK(strcmp(dir, want) == 0, "folder %s, expected %s", dir, want);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "mode %o", st.st_mode & 0777);

    uint8_t key[32];
    tlm_kernel_cache_key("x", "y", "z", "w", key);
    tlm_kernel_cache_path(dir, key, path, sizeof path);
    uint8_t *got = NULL;
    size_t n = 0;
    CHECK(!tlm_kernel_cache_get(path, &got, &n) && got == NULL, "a hit before any put");
    const uint8_t payload[] = "compiled bytes\0with a zero";
    CHECK(tlm_kernel_cache_put(path, payload, sizeof payload, &why), "%s", why.msg);
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == TLM_KERNEL_CACHE_HEADER + sizeof payload, "size");
    CHECK(tlm_kernel_cache_get(path, &got, &n) && n == sizeof payload && memcmp(got, payload, n) == 0, "round trip");
    free(got);
    CHECK(tlm_kernel_cache_put(path, payload, 0, &why), "%s", why.msg);
    CHECK(tlm_kernel_cache_get(path, &got, &n) && n == 0 && got != NULL, "an empty payload");
    free(got);
    /* every damage: a miss, one note, the entry gone */
    uint8_t big[2000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 31 + 7);
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        CHECK(tlm_kernel_cache_put(path, big, sizeof big, &why), "%s", why.msg);
        spoil(path, i);
        capture_begin();
        bool hit = tlm_kernel_cache_get(path, &got, &n);
        capture_end();
        CHECK(!hit && got == NULL, "%s: a hit", damage[i].what);
        CHECK(lines(captured) == 1 && has(captured, "tlm: note: kernel cache entry") && has(captured, path) &&
                  has(captured, "removed"),
              "%s: stderr: %s", damage[i].what, captured);
        CHECK(stat(path, &st) != 0, "%s: the entry is still there", damage[i].what);
    }
    /* a FIFO, a link or a dangling link under the entry's name: removed
     * (never opened: a FIFO would block), and the next put takes the place;
     * a folder: left alone, one note, and nothing stored over it */
    const char *const odd[] = {"mkfifo '%s'", "ln -s /etc/hostname '%s'", "ln -s nowhere '%s'", "mkdir '%s'"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        char make[1600];
        snprintf(make, sizeof make, odd[i], path);
        run(make);
        bool folder = i == 3;
        capture_begin();
        bool hit = tlm_kernel_cache_get(path, &got, &n);
        capture_end();
        CHECK(!hit && got == NULL, "%s: a hit", odd[i]);
        CHECK(lines(captured) == 1 && has(captured, path) &&
                  has(captured, folder ? "left alone, compiling in memory" : "removed, compiling again"),
              "%s: stderr: %s", odd[i], captured);
        CHECK(tlm_kernel_cache_blocked(path) == folder, "%s: blocked", odd[i]);
        CHECK(folder ? stat(path, &st) == 0 && S_ISDIR(st.st_mode) : lstat(path, &st) != 0, "%s: after", odd[i]);
        if (folder) {
            snprintf(make, sizeof make, "rmdir '%s'", path);
            run(make);
        }
    }
    CHECK(tlm_kernel_cache_put(path, big, sizeof big, &why), "%s", why.msg);
    /* no temporaries left behind */
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 1", dir);
    run(cmd);
}

/* ---- through the device ---- */

/* One kernel that writes 7 * (i + 1) at i. */
static const char source[] =
    "extern \"C\" __global__ void fill(float *x, int n) {\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "    x[i] = 7.0f * (float)(i + 1);\n"
    "}\n";

/* Loads source, runs its kernel and checks the result; the report back. */
static tlm_module_report load_and_run(tlm_device *d, const char *what) {
    tlm_module_report r;
    memset(&r, 0xa5, sizeof r);
    tlm_err err = {{0}};
    tlm_module *m = tlm_device_module_load(d, what, source, &r, &err);
    CHECK(m != NULL, "%s: %s", what, err.msg);
    if (!m) return r;
    tlm_kernel *k = tlm_device_kernel(d, m, "fill", &err);
    tlm_dptr x = tlm_device_alloc(d, 100 * sizeof(float), &err);
    int n = 100;
    void *args[] = {&x, &n};
    float back[100] = {0};
    bool ok = k && x && tlm_device_launch(d, k, (tlm_launch){.grid = {2, 1, 1}, .block = {32, 1, 1}}, args, &err) &&
              tlm_device_download(d, back, x, sizeof back, &err);
    CHECK(ok, "%s: %s", what, err.msg);
    int wrong = 0;
    for (int i = 0; i < n; i++) wrong += back[i] != 7.0f * (float)(i + 1);
    CHECK(wrong == 0, "%s: %d wrong", what, wrong);
    tlm_device_free(d, x);
    tlm_device_module_unload(d, m);
    return r;
}

static void check_miss(const tlm_module_report *r, const char *what) {
    CHECK(!r->cache_hit && r->cache_written, "%s: hit %d written %d", what, r->cache_hit, r->cache_written);
    CHECK(r->compile_seconds > 0, "%s: compile_seconds %g", what, r->compile_seconds);
}

static void check_hit(const tlm_module_report *r, const char *what) {
    CHECK(r->cache_hit && !r->cache_written, "%s: hit %d written %d", what, r->cache_hit, r->cache_written);
    CHECK(r->compile_seconds == 0, "%s: compile_seconds %g", what, r->compile_seconds);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void test_miss_hit_damage(tlm_device *d) {
    set_home("device");
    capture_begin();
    tlm_module_report first = load_and_run(d, "a miss");
    capture_end();
    check_miss(&first, "first load");
    CHECK(captured[0] == '\0', "a miss printed: %s", captured);
    char want[1200];
    snprintf(want, sizeof want, "%s/device/tlm/kernels/", work);
    CHECK(strncmp(first.cache_path, want, strlen(want)) == 0 && has(first.cache_path, ".bin"), "cache_path %s",
          first.cache_path);
    const char *path = first.cache_path;
    const long size = file_size(path);
    CHECK(size > TLM_KERNEL_CACHE_HEADER, "entry of %ld bytes", size);

    tlm_module_report r = load_and_run(d, "a hit");
    check_hit(&r, "second load");
    CHECK(strcmp(r.cache_path, path) == 0, "another entry: %s", r.cache_path);

    /* the same module twice at once (both loaded from the one entry) */
    tlm_err err = {{0}};
    tlm_module *m1 = tlm_device_module_load(d, "twice", source, NULL, &err);
    tlm_module *m2 = tlm_device_module_load(d, "twice", source, NULL, &err);
    CHECK(m1 && m2 && tlm_device_kernel(d, m1, "fill", &err) && tlm_device_kernel(d, m2, "fill", &err), "%s", err.msg);
    tlm_device_module_unload(d, m1);
    tlm_device_module_unload(d, m2);

    /* each damage: noticed, removed, rebuilt, and the rebuilt entry hits */
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        if (!damage[i].through_device) continue;
        spoil(path, i);
        capture_begin();
        r = load_and_run(d, damage[i].what);
        capture_end();
        check_miss(&r, damage[i].what);
        CHECK(has(captured, "tlm: note: kernel cache entry") && has(captured, path) && lines(captured) == 1,
              "%s: stderr: %s", damage[i].what, captured);
        CHECK(file_size(path) == size, "%s: rebuilt entry of %ld bytes, was %ld", damage[i].what, file_size(path),
              size);
        r = load_and_run(d, damage[i].what);
        check_hit(&r, damage[i].what);
    }
    printf("the first entry: %ld bytes, first compile %.2f s\n", size, first.compile_seconds);

    /* a sound entry whose payload the backend refuses (not a shared
     * object): dropped and compiled again, once */
    static const uint8_t garbage[] = "not an ELF file";
    CHECK(tlm_kernel_cache_put(path, garbage, sizeof garbage, &err), "%s", err.msg);
    capture_begin();
    r = load_and_run(d, "a sound entry that does not load");
    capture_end();
    check_miss(&r, "a sound entry that does not load");
    CHECK(has(captured, "does not load") && lines(captured) == 1, "stderr: %s", captured);
    CHECK(file_size(path) == size, "rebuilt entry of %ld bytes, was %ld", file_size(path), size);

    /* a folder where the entry belongs: left alone (not ours to remove); the
     * module is compiled and not stored, and one line says so (not a second
     * calling the cache's folder unusable: it works) */
    CHECK(unlink(path) == 0 && mkdir(path, 0700) == 0, "mkdir %s", path);
    capture_begin();
    r = load_and_run(d, "a folder as the entry");
    capture_end();
    CHECK(!r.cache_hit && !r.cache_written, "folder as entry: hit %d written %d", r.cache_hit, r.cache_written);
    CHECK(has(captured, "a directory") && has(captured, "left alone, compiling in memory") && lines(captured) == 1,
          "stderr: %s", captured);
    rmdir(path);
}

/* Unusable folders: one warning line, the module still loads. */
static void test_unusable(tlm_device *d) {
    char file[1200], cmd[2600];
    snprintf(file, sizeof file, "%s/a_file", work);
    snprintf(cmd, sizeof cmd, "echo x > '%s'", file);
    run(cmd);
    struct {
        const char *what, *home, *needle;
    } cases[] = {
        {"the cache home is a file", "a_file", "Not a directory"},
        {"the cache folder is a file", "kernels_file", "not a directory"},
    };
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/kernels_file/tlm' && echo x > '%s/kernels_file/tlm/kernels'", work, work);
    run(cmd);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        set_home(cases[i].home);
        capture_begin();
        tlm_module_report r = load_and_run(d, cases[i].what);
        capture_end();
        CHECK(!r.cache_hit && !r.cache_written && r.cache_path[0] == '\0', "%s: hit %d written %d path '%s'",
              cases[i].what, r.cache_hit, r.cache_written, r.cache_path);
        CHECK(r.compile_seconds > 0, "%s: compile_seconds %g", cases[i].what, r.compile_seconds);
        CHECK(has(captured, "tlm: warning: kernel cache ") && has(captured, "unusable (") &&
                  has(captured, "); compiling in memory\n") && has(captured, cases[i].needle) && lines(captured) == 1,
              "%s: stderr: %s", cases[i].what, captured);
        /* a run loads several modules: the same folder, no second line */
        capture_begin();
        r = load_and_run(d, cases[i].what);
        capture_end();
        CHECK(!r.cache_written && captured[0] == '\0', "%s, a second module: stderr: %s", cases[i].what, captured);
    }
    /* neither XDG_CACHE_HOME nor HOME */
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    capture_begin();
    tlm_module_report r = load_and_run(d, "no home");
    capture_end();
    CHECK(!r.cache_hit && !r.cache_written, "no home: hit %d written %d", r.cache_hit, r.cache_written);
    CHECK(has(captured, "neither XDG_CACHE_HOME nor HOME") && lines(captured) == 1, "stderr: %s", captured);
    /* HOME alone: $HOME/.cache/tlm/kernels */
    char fake_home[1200];
    snprintf(fake_home, sizeof fake_home, "%s/home", work);
    setenv("HOME", fake_home, 1);
    r = load_and_run(d, "HOME alone");
    CHECK(r.cache_written && has(r.cache_path, "/home/.cache/tlm/kernels/"), "HOME alone: %s", r.cache_path);
    if (home) setenv("HOME", home, 1);
    free(home);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_kernel_cache WORK_FOLDER\n");
        return 2;
    }
    snprintf(work, sizeof work, "%s", argv[1]);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", work, work);
    run(cmd);
    test_key();
    test_store();
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    CHECK(d != NULL && tlm_device_get_info(d)->emulated, "the emulated device (TLM_TEST_DEVICE=emulated): %s", err.msg);
    if (d) {
        test_miss_hit_damage(d);
        test_unusable(d);
        tlm_device_close(d);
    }
    return test_finish("gpu.kernel_cache");
}
