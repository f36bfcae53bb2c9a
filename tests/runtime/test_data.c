/* The byte-level data loader: files, folders (sorted, only *.txt), clear
 * errors for missing / empty / too short inputs, window sampling that is
 * deterministic for a seed and resumable from a saved generator state.
 *
 * usage: test_data TMPDIR [AUSTEN_DIR] */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "tlm_rt/memory_limit.h"

static const char *g_dir;

static char *path_in(const char *name) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 1024, "%s/%s", g_dir, name);
    return p;
}

static void write_bytes(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("cannot create %s\n", path);
        exit(2);
    }
    fwrite(bytes, 1, n, f);
    fclose(f);
}

static void write_file(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

static void expect_load_error(const char *path, const char *needle) {
    tlm_dataset ds;
    tlm_err err = {{0}};
    int rc = tlm_data_load(&ds, path, &err);
    CHECK(rc == -1, "loading %s succeeded", path);
    CHECK(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    CHECK(ds.bytes == NULL && ds.n == 0, "dataset not cleared on error");
    printf("  error as expected: %s\n", err.msg);
}

static void test_errors(void) {
    expect_load_error(path_in("no-such-file.txt"), "No such file");
    expect_load_error(path_in("no-such-file.txt"), "no-such-file.txt");
    write_file(path_in("empty.txt"), "");
    expect_load_error(path_in("empty.txt"), "empty");
    mkdir(path_in("emptydir"), 0755);
    expect_load_error(path_in("emptydir"), "no .txt files");
    mkdir(path_in("onlyempty"), 0755);
    write_file(path_in("onlyempty/a.txt"), "");
    expect_load_error(path_in("onlyempty"), "empty");
    mkdir(path_in("withdir"), 0755);
    mkdir(path_in("withdir/sub.txt"), 0755); /* a folder named like a text: a subfolder, not read */
    unlink(path_in("withdir/a.txt"));        /* a run before this one's */
    expect_load_error(path_in("withdir"), "no .txt files in this directory");
    write_file(path_in("withdir/a.txt"), "abcdefgh");
    {
        char **names;
        int n;
        tlm_err e;
        CHECK(tlm_data_texts(path_in("withdir"), &names, &n, &e) == 0 && n == 1 && strstr(names[0], "/a.txt"),
              "withdir: its text alone, not the folder sub.txt");
        tlm_data_texts_free(names, n);
    }

    tlm_dataset ds;
    tlm_err err;
    CHECK(tlm_data_load_files(&ds, NULL, 0, &err) == -1, "no files accepted");

    /* too short for a window */
    write_file(path_in("short.txt"), "abc");
    CHECK(tlm_data_load(&ds, path_in("short.txt"), &err) == 0, "%s", err.msg);
    CHECK(tlm_data_check(&ds, 2, &err) == 0, "3 bytes hold a window of 2+1");
    CHECK(tlm_data_check(&ds, 3, &err) == -1 && strstr(err.msg, "too short"), "%s", err.msg);
    printf("  error as expected: %s\n", err.msg);
    int32_t in[8], tg[8];
    tlm_rng r;
    tlm_rng_seed(&r, 1);
    CHECK(tlm_data_sample_batch(&ds, &r, 1, 3, in, tg, &err) == -1, "sampling a too-short file");
    CHECK(tlm_data_sample_batch(&ds, &r, 2, 2, in, tg, &err) == 0, "%s", err.msg);
    CHECK(in[0] == 'a' && in[1] == 'b' && tg[0] == 'b' && tg[1] == 'c', "only window");
    CHECK(tlm_data_check(&ds, 0, &err) == -1, "T = 0 accepted");
    tlm_data_free(&ds);
}

static void test_folder(void) {
    mkdir(path_in("corpus"), 0755);
    write_file(path_in("corpus/b.txt"), "BBBB");
    write_file(path_in("corpus/a.txt"), "aaa");
    write_file(path_in("corpus/c.md"), "ignored");
    write_file(path_in("corpus/.hidden.txt"), "ignored");
    write_bytes(path_in("corpus/C.txt"), "\xff\x00z", 3); /* uppercase sorts first */
    tlm_dataset ds;
    tlm_err err;
    CHECK(tlm_data_load(&ds, path_in("corpus"), &err) == 0, "%s", err.msg);
    CHECK(ds.n == 10 && ds.nfiles == 3, "n %zu files %d", ds.n, ds.nfiles);
    CHECK(ds.n == 10 && memcmp(ds.bytes, "\xff\x00zaaaBBBB", 10) == 0, "order or content");
    /* byte ids, including 0 and 255 */
    int32_t in[9], tg[9];
    CHECK(tlm_data_window(&ds, 0, 9, in, tg, &err) == 0, "%s", err.msg);
    CHECK(in[0] == 255 && in[1] == 0 && tg[0] == 0 && tg[8] == 'B', "byte ids");
    CHECK(tlm_data_num_windows(&ds, 3) == 3, "windows of 3 in 10 bytes");
    /* bytes: ff 00 z a a a B B B B; window i starts at 3i */
    CHECK(tlm_data_window(&ds, 1, 3, in, tg, &err) == 0 && in[0] == 'a' && tg[2] == 'B', "window 1");
    CHECK(tlm_data_window(&ds, 2, 3, in, tg, &err) == 0 && in[0] == 'B' && tg[2] == 'B', "window 2");
    CHECK(tlm_data_window(&ds, 3, 3, in, tg, &err) == -1 && strstr(err.msg, "out of range"), "window 3: %s", err.msg);
    /* an explicit list keeps its order */
    const char *files[2] = {path_in("corpus/b.txt"), path_in("corpus/a.txt")};
    tlm_dataset d2;
    CHECK(tlm_data_load_files(&d2, files, 2, &err) == 0 && d2.n == 7 && memcmp(d2.bytes, "BBBBaaa", 7) == 0,
          "file list order");
    tlm_data_free(&d2);
    tlm_data_free(&ds);
}

static void test_sampling(const char *austen) {
    tlm_dataset ds;
    tlm_err err;
    if (austen && tlm_data_load(&ds, austen, &err) == 0) {
        printf("  %s: %zu bytes from %d files\n", austen, ds.n, ds.nfiles);
        CHECK(ds.n > 1000000 && ds.nfiles >= 5, "austen corpus too small");
    } else {
        if (austen) printf("  (no corpus: %s)\n", err.msg);
        /* a synthetic corpus */
        size_t n = 100000;
        char *text = malloc(n + 1);
        for (size_t i = 0; i < n; i++) text[i] = (char)('a' + i * 7 % 26);
        text[n] = '\0';
        write_file(path_in("synthetic.txt"), text);
        free(text);
        CHECK(tlm_data_load(&ds, path_in("synthetic.txt"), &err) == 0, "%s", err.msg);
    }
    enum { B = 4, T = 64 };
    int32_t in1[B * T], tg1[B * T], in2[B * T], tg2[B * T];
    tlm_rng r1, r2;
    tlm_rng_seed(&r1, 2024);
    tlm_rng_seed(&r2, 2024);
    bool same = true, shifted = true, inrange = true;
    for (int step = 0; step < 50; step++) {
        tlm_data_sample_batch(&ds, &r1, B, T, in1, tg1, &err);
        tlm_data_sample_batch(&ds, &r2, B, T, in2, tg2, &err);
        same &= memcmp(in1, in2, sizeof in1) == 0 && memcmp(tg1, tg2, sizeof tg1) == 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t + 1 < T; t++) shifted &= tg1[b * T + t] == in1[b * T + t + 1];
        for (int i = 0; i < B * T; i++) inrange &= in1[i] >= 0 && in1[i] < 256;
    }
    CHECK(same, "same seed, different batches");
    CHECK(shifted, "targets are not inputs shifted by one");
    CHECK(inrange, "token ids outside 0..255");
    /* a different seed gives different windows */
    tlm_rng r3;
    tlm_rng_seed(&r3, 2025);
    tlm_data_sample_batch(&ds, &r3, B, T, in2, tg2, &err);
    tlm_data_sample_batch(&ds, &r1, B, T, in1, tg1, &err);
    CHECK(memcmp(in1, in2, sizeof in1) != 0, "different seeds, same batch");
    /* resume: save the generator, draw, restore, draw again */
    int64_t saved[4];
    tlm_rng_save(&r1, saved);
    tlm_data_sample_batch(&ds, &r1, B, T, in1, tg1, &err);
    tlm_rng back;
    CHECK(tlm_rng_load(&back, saved), "a saved state refused");
    tlm_data_sample_batch(&ds, &back, B, T, in2, tg2, &err);
    CHECK(memcmp(in1, in2, sizeof in1) == 0, "restored generator gives another batch");
    printf("  50 batches of %dx%d: deterministic for a seed, resumable\n", B, T);
    tlm_data_free(&ds);

    /* windows reach both ends of a small file, uniformly */
    write_file(path_in("ends.txt"), "0123456789");
    tlm_data_load(&ds, path_in("ends.txt"), &err);
    int count[10] = {0};
    tlm_rng_seed(&r1, 3);
    for (int k = 0; k < 7000; k++) {
        int32_t i4[4], t4[4];
        tlm_data_sample_batch(&ds, &r1, 1, 4, i4, t4, &err);
        count[i4[0] - '0']++;
    }
    /* 4+1 tokens from 10 bytes: starts 0..5, each ~1/6 */
    for (int s = 0; s < 10; s++) {
        if (s <= 5) CHECK(count[s] > 1000 && count[s] < 1350, "start %d drawn %d times", s, count[s]);
        else CHECK(count[s] == 0, "start %d out of range drawn", s);
    }
    tlm_data_free(&ds);
}

/* Token segments (what shards become): ids of 2 and 4 bytes in mappings
 * the dataset owns, one after the other; windows run across segments and
 * across an empty one, and walk the ids in order. */
static void *segment(const uint32_t *ids, size_t n, uint32_t width, size_t *size) {
    *size = n * width + 1;
    uint8_t *p = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        printf("mmap failed\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < width; k++) p[1 + i * width + k] = (uint8_t)(ids[i] >> (8 * k));
    return p;
}

static void test_segments(void) {
    const uint32_t a[] = {1, 2, 3, 4, 5}, b[] = {70000, 7, 8}, c[] = {9, 10, 11, 12};
    tlm_dataset ds = {0};
    tlm_err err = {{0}};
    size_t sa, sb, sc, se;
    void *ma = segment(a, 5, 2, &sa), *mb = segment(b, 3, 4, &sb), *mc = segment(c, 4, 2, &sc);
    void *me = segment(c, 0, 2, &se);
    CHECK(tlm_data_add_segment(&ds, ma, sa, (uint8_t *)ma + 1, 5, 2, &err) == 0, "%s", err.msg);
    CHECK(tlm_data_add_segment(&ds, me, se, (uint8_t *)me + 1, 0, 2, &err) == 0, "%s", err.msg);
    CHECK(tlm_data_add_segment(&ds, mb, sb, (uint8_t *)mb + 1, 3, 4, &err) == 0, "%s", err.msg);
    CHECK(tlm_data_add_segment(&ds, mc, sc, (uint8_t *)mc + 1, 4, 2, &err) == 0, "%s", err.msg);
    const uint32_t all[] = {1, 2, 3, 4, 5, 70000, 7, 8, 9, 10, 11, 12};
    CHECK(ds.n == 12, "segments: %zu tokens, want 12", ds.n);
    for (size_t i = 0; i < 12; i++) CHECK(tlm_data_token(&ds, i) == all[i], "token %zu", i);
    CHECK(tlm_data_num_windows(&ds, 3) == 3, "3 windows of 3");
    for (size_t w = 0; w < 3; w++) {
        int32_t in[3], tgt[3];
        CHECK(tlm_data_window(&ds, w, 3, in, tgt, &err) == 0, "%s", err.msg);
        for (int t = 0; t < 3; t++)
            CHECK(in[t] == (int32_t)all[w * 3 + t] && tgt[t] == (int32_t)all[w * 3 + t + 1], "window %zu", w);
    }
    tlm_rng rng;
    tlm_rng_seed(&rng, 3);
    int32_t in[4 * 6], tgt[4 * 6];
    CHECK(tlm_data_sample_batch(&ds, &rng, 4, 6, in, tgt, &err) == 0, "%s", err.msg);
    for (int r = 0; r < 4; r++) {
        int s = -1;
        for (int k = 0; k + 6 < 12; k++)
            if ((int32_t)all[k] == in[r * 6]) s = k;
        CHECK(s >= 0, "sampled row %d starts at no token", r);
        for (int t = 0; s >= 0 && t < 6; t++)
            CHECK(in[r * 6 + t] == (int32_t)all[s + t] && tgt[r * 6 + t] == (int32_t)all[s + t + 1], "row %d", r);
    }
    tlm_data_free(&ds);
    CHECK(ds.n == 0 && ds.nseg == 0, "segments not cleared");
}

/* A text that fits what the process may still take loads, when twice it
 * would not: a child process under an address-space limit of its size
 * now plus 1.5 x the file's reads it (the loader once doubled its buffer
 * as the read reached the end, and failed there). Not under
 * AddressSanitizer, whose allocator reserves its space up front. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_DATA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_DATA_ASAN 1
#endif

static void test_fits_once(void) {
#ifndef TEST_DATA_ASAN
    const size_t size = (size_t)96 << 20;
    const char *path = path_in("fits_once.txt");
    FILE *f = fopen(path, "wb");
    CHECK(f && ftruncate(fileno(f), (off_t)size) == 0, "cannot make %s", path);
    if (f) fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        char status[8192] = "";
        FILE *st = fopen("/proc/self/status", "r");
        size_t got = st ? fread(status, 1, sizeof status - 1, st) : 0;
        if (st) fclose(st);
        status[got] = 0;
        int64_t vm = tlm_keyed_value(status, "VmSize");
        struct rlimit lim = {(rlim_t)(vm + (int64_t)(size * 3 / 2)), RLIM_INFINITY};
        if (vm <= 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
        tlm_dataset ds;
        tlm_err err = {{0}};
        int rc = tlm_data_load(&ds, path, &err);
        if (rc != 0) printf("    %s\n", err.msg);
        _exit(rc == 0 && ds.n == size ? 0 : 1);
    }
    int wstatus = 0;
    CHECK(pid > 0 && waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0,
          "a 96 MiB text under an address-space limit 1.5 x its size above the process's: exit %d",
          WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    unlink(path);
#endif
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_data TMPDIR [CORPUS_DIR]\n");
        return 2;
    }
    g_dir = argv[1];
    mkdir(g_dir, 0755);
    test_errors();
    test_folder();
    test_segments();
    test_sampling(argc > 2 ? argv[2] : NULL);
    test_fits_once();
    return test_finish("test_data");
}
