/* safetensors: round trip, atomic replace, hand-made corrupt headers, and a
 * small fuzz (every truncation, byte flips, random garbage): the reader must
 * return an error (never crash) for every broken file. Built a second time
 * with AddressSanitizer + UBSan where the compiler supports it.
 *
 * usage: test_safetensors TMPDIR */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

static const char *g_dir;

static char *path_in(const char *name) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 1024, "%s/%s", g_dir, name);
    return p;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* Builds a file image from a header string (and `data` bytes of payload). */
static unsigned char *image(const char *header, size_t data, size_t *len) {
    size_t h = strlen(header);
    *len = 8 + h + data;
    unsigned char *b = calloc(*len, 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data; i++) b[8 + h + i] = (unsigned char)i;
    return b;
}

static void expect_error(const char *header, size_t data, const char *needle) {
    size_t len;
    unsigned char *b = image(header, data, &len);
    tlm_err err = {{0}};
    tlm_st_file *f = tlm_st_parse(b, len, &err);
    CHECK(f == NULL, "accepted bad header %s", header);
    CHECK(strstr(err.msg, needle) != NULL, "header %s: message '%s' lacks '%s'", header, err.msg, needle);
    tlm_st_close(f);
    free(b);
}

static void expect_ok(const char *header, size_t data) {
    size_t len;
    unsigned char *b = image(header, data, &len);
    tlm_err err = {{0}};
    tlm_st_file *f = tlm_st_parse(b, len, &err);
    CHECK(f != NULL, "rejected good header %s: %s", header, err.msg);
    tlm_st_close(f);
    free(b);
}

static void test_round_trip(void) {
    float a[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
    int64_t st[4] = {INT64_MIN, -1, 0, INT64_MAX};
    uint8_t bytes[5] = {0, 1, 127, 128, 255};
    float scalar = 42.0f;
    tlm_st_tensor ts[] = {
        {"model.layers.0.mlp.up_proj.weight", TLM_F32, 2, {2, 3}, a, 0},
        {"rng_state", TLM_I64, 1, {4}, st, 0},
        {"bytes \"quoted\" \\ ünï", TLM_U8, 1, {5}, bytes, 0},
        {"scalar", TLM_F32, 0, {0}, &scalar, 0},
        {"empty", TLM_F32, 2, {0, 7}, NULL, 0},
    };
    tlm_st_meta meta[] = {{"step", "12"}, {"format", "pt"}, {"note", "line\nbreak \"q\""}};
    const char *path = path_in("rt.safetensors");
    tlm_err err;
    CHECK(tlm_st_write(path, ts, 5, meta, 3, &err) == 0, "write: %s", err.msg);
    tlm_st_file *f = tlm_st_open(path, &err);
    CHECK(f != NULL, "open: %s", err.msg);
    if (!f) return;
    CHECK(tlm_st_count(f) == 5, "count %d", tlm_st_count(f));
    for (int i = 0; i < 5; i++) {
        const tlm_st_tensor *t = tlm_st_find(f, ts[i].name);
        CHECK(t != NULL, "missing %s", ts[i].name);
        if (!t) continue;
        CHECK(t->dtype == ts[i].dtype && t->ndim == ts[i].ndim, "%s header", ts[i].name);
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == ts[i].shape[d], "%s shape", ts[i].name);
        if (t->nbytes) CHECK(memcmp(t->data, ts[i].data, t->nbytes) == 0, "%s data", ts[i].name);
    }
    CHECK(strcmp(tlm_st_meta_get(f, "step"), "12") == 0, "meta step");
    CHECK(strcmp(tlm_st_meta_get(f, "note"), "line\nbreak \"q\"") == 0, "meta note");
    CHECK(tlm_st_meta_get(f, "nope") == NULL, "meta missing");
    CHECK(tlm_st_meta_count(f) == 3, "meta count");
    /* typed read with shape checks */
    float back[6];
    CHECK(tlm_st_read(f, ts[0].name, TLM_F32, 2, (int64_t[]){2, 3}, back, &err) == 0, "%s", err.msg);
    CHECK(memcmp(back, a, sizeof a) == 0, "tlm_st_read data");
    CHECK(tlm_st_read(f, ts[0].name, TLM_F32, 2, (int64_t[]){3, 2}, back, &err) != 0 &&
              strstr(err.msg, "shape [2,3], expected [3,2]"),
          "shape mismatch message: %s", err.msg);
    CHECK(tlm_st_read(f, ts[0].name, TLM_I64, 2, (int64_t[]){2, 3}, back, &err) != 0 &&
              strstr(err.msg, "dtype F32, expected I64"),
          "dtype mismatch message: %s", err.msg);
    CHECK(tlm_st_read(f, "absent", TLM_F32, 0, NULL, back, &err) != 0 && strstr(err.msg, "not found"),
          "missing tensor message: %s", err.msg);
    tlm_st_close(f);

    /* header padded to 8 bytes; the data section aligned */
    size_t len;
    unsigned char *b = slurp(path, &len);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h |= (uint64_t)b[i] << (8 * i);
    CHECK(h % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)h);
    CHECK(len == 8 + h + sizeof a + sizeof st + sizeof bytes + sizeof scalar, "file size %zu", len);
    free(b);

    /* atomic replace: write again over it, no temporaries left behind */
    a[0] = 9.0f;
    CHECK(tlm_st_write(path, ts, 1, NULL, 0, &err) == 0, "rewrite: %s", err.msg);
    f = tlm_st_open(path, &err);
    CHECK(f && tlm_st_count(f) == 1 && ((const float *)tlm_st_at(f, 0)->data)[0] == 9.0f, "rewritten file");
    tlm_st_close(f);
    DIR *d = opendir(g_dir);
    struct dirent *e;
    int temps = 0;
    while (d && (e = readdir(d))) temps += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    CHECK(temps == 0, "%d temporary files left", temps);

    /* writer errors */
    CHECK(tlm_st_write("/nonexistent-dir/x.safetensors", ts, 1, NULL, 0, &err) != 0 &&
              strstr(err.msg, "/nonexistent-dir/x.safetensors"),
          "unwritable dir: %s", err.msg);
    tlm_st_tensor dup[2] = {ts[0], ts[0]};
    CHECK(tlm_st_write(path, dup, 2, NULL, 0, &err) != 0 && strstr(err.msg, "duplicate"), "duplicate names: %s",
          err.msg);
    CHECK(tlm_st_open(path_in("missing.safetensors"), &err) == NULL && strstr(err.msg, "missing.safetensors"),
          "missing file: %s", err.msg);
    CHECK(tlm_st_open(g_dir, &err) == NULL, "a directory opened as a file");
}

static void test_bad_headers(void) {
    expect_ok("{}", 0);
    expect_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_ok("{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}   ", 1);
    expect_error("", 0, "JSON");
    expect_error("[]", 0, "not a JSON object");
    expect_error("{\"a\":1}", 0, "not an object");
    expect_error("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_error("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "non-negative");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before they begin");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8,
                 "truncated: tensor 'a' ends at data offset 16, but the file holds 8 bytes of data (8 short)");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "size");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", 8, "size");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, "overlaps");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "trailing");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 8, "duplicate");
    expect_error("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__");
    expect_error("{\"__metadata__\":[]}", 0, "__metadata__");
    expect_error("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "NUL");
    expect_error("{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "empty");
    expect_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}} x", 1, "JSON");
    expect_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],}}", 1, "JSON");
    /* deep nesting is refused, not recursed into */
    char deep[300] = "{\"a\":";
    for (int i = 0; i < 200; i++) strcat(deep, "[");
    expect_error(deep, 0, "nesting");
    /* header length past the end of the file (cut short), or absurd (not
     * a safetensors file: a GGUF file, tlm-run export's, said so) */
    unsigned char small[12] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    tlm_err err;
    CHECK(tlm_st_parse(small, sizeof small, &err) == NULL &&
              strstr(err.msg, "truncated: the header is 200 bytes, the file holds 4 after its length"),
          "%s", err.msg);
    unsigned char huge[10] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    CHECK(tlm_st_parse(huge, sizeof huge, &err) == NULL && strstr(err.msg, "not a safetensors file"), "%s", err.msg);
    unsigned char gguf[16] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    CHECK(tlm_st_parse(gguf, sizeof gguf, &err) == NULL && strstr(err.msg, "a GGUF file") &&
              strstr(err.msg, "not a safetensors checkpoint"),
          "%s", err.msg);
    CHECK(tlm_st_parse(small, 5, &err) == NULL && strstr(err.msg, "too short"), "%s", err.msg);
}

/* Parses a mutated image; on success checks that every tensor lies inside
 * the buffer (the invariant callers rely on). */
static int try_parse(const unsigned char *b, size_t len) {
    tlm_err err = {{0}};
    tlm_st_file *f = tlm_st_parse(b, len, &err);
    if (!f) {
        CHECK(err.msg[0] != '\0', "error without a message");
        return 0;
    }
    size_t total = 0;
    for (int i = 0; i < tlm_st_count(f); i++) total += tlm_st_at(f, i)->nbytes;
    CHECK(total <= len, "tensors larger than the file");
    tlm_st_close(f);
    return 1;
}

static void test_fuzz(void) {
    size_t len;
    unsigned char *good = slurp(path_in("fuzz.safetensors"), &len);
    CHECK(good != NULL, "no fuzz seed file");
    if (!good) return;
    CHECK(try_parse(good, len) == 1, "seed file does not parse");
    /* every proper prefix is an error */
    int accepted = 0;
    for (size_t cut = 0; cut < len; cut++) accepted += try_parse(good, cut);
    CHECK(accepted == 0, "%d truncated files accepted", accepted);
    printf("  truncation at each of %zu offsets: all rejected\n", len);
    /* byte flips everywhere: header flips must be caught or harmless;
     * data flips are legal files */
    unsigned char *b = malloc(len);
    static const unsigned char masks[] = {0x01, 0x02, 0x10, 0x20, 0x80, 0xFF};
    int runs = 0, ok = 0;
    for (size_t i = 0; i < len; i++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(b, good, len);
            b[i] ^= masks[m];
            ok += try_parse(b, len);
            runs++;
        }
    }
    /* structural characters dropped in */
    static const char evil[] = "{}[]\",:\\0-9e.";
    for (size_t i = 8; i < len; i++) {
        for (size_t m = 0; m < sizeof evil - 1; m++) {
            memcpy(b, good, len);
            b[i] = (unsigned char)evil[m];
            ok += try_parse(b, len);
            runs++;
        }
    }
    printf("  %d mutated files: %d rejected with a message, %d valid (data bytes)\n", runs, runs - ok, ok);
    /* random garbage after a plausible length */
    tlm_rng r;
    tlm_rng_seed(&r, 5);
    for (int k = 0; k < 2000; k++) {
        size_t n = 8 + (size_t)tlm_rng_below(&r, 64);
        for (size_t i = 0; i < n; i++) b[i] = (unsigned char)tlm_rng_below(&r, 256);
        uint64_t h = tlm_rng_below(&r, n - 7);
        for (int i = 0; i < 8; i++) b[i] = (unsigned char)(h >> (8 * i));
        if (n > 8) b[8] = '{';
        try_parse(b, n);
    }
    free(b);
    free(good);
}

/* tlm_st_open reads the header before the whole file: a huge sparse file
 * of zeros (a damaged checkpoint) is a bad header, said at once, not "out
 * of memory" after trying to read 64 GiB; the other header errors are the
 * parser's own. */
static void test_open_header_first(void) {
    struct {
        const char *name;
        long long size;
        const char *needle;
    } cases[] = {{"sparse.safetensors", 64LL << 30, "bad header"},
                 {"short.safetensors", 3, "file too short (3 bytes)"},
                 {"long_header.safetensors", 64, "truncated: the header is 200 bytes"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = path_in(cases[i].name);
        FILE *fp = fopen(path, "wb");
        CHECK(fp != NULL, "cannot create %s", path);
        if (!fp) continue;
        if (i == 2) { /* a header length past the file's end */
            unsigned char len8[8] = {200, 0, 0, 0, 0, 0, 0, 0};
            fwrite(len8, 1, 8, fp);
        }
        CHECK(ftruncate(fileno(fp), (off_t)cases[i].size) == 0, "%s: ftruncate", cases[i].name);
        fclose(fp);
        tlm_err err = {{0}};
        tlm_st_file *f = tlm_st_open(path, &err);
        CHECK(f == NULL && strstr(err.msg, cases[i].needle) && strstr(err.msg, cases[i].name), "%s: '%s' lacks '%s'",
              cases[i].name, err.msg, cases[i].needle);
        tlm_st_close(f);
        remove(path);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_safetensors TMPDIR\n");
        return 2;
    }
    g_dir = argv[1];
    mkdir(g_dir, 0755);
    test_round_trip();
    test_bad_headers();
    test_open_header_first();
    /* a small seed file for the fuzzer: two tensors and metadata */
    float w[3] = {1, 2, 3};
    int64_t s[2] = {7, -7};
    tlm_st_tensor ts[] = {{"w", TLM_F32, 1, {3}, w, 0}, {"s", TLM_I64, 2, {1, 2}, s, 0}};
    tlm_st_meta meta[] = {{"k", "v"}};
    tlm_err err;
    CHECK(tlm_st_write(path_in("fuzz.safetensors"), ts, 2, meta, 1, &err) == 0, "%s", err.msg);
    test_fuzz();
    return test_finish("test_safetensors");
}
