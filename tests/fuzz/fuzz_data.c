/* libFuzzer target over the data loader (runtime/io/data.c): the bytes go
 * to a file (and the same file as the one .txt of a folder), are loaded,
 * checked, cut into windows and sampled with a context length taken from
 * the first byte. Both ways of loading must give the same data, and every
 * window must be the bytes it says. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tlm_rt/data.h"
#include "tlm_rt/rng.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[4096], file[4200];

static void cleanup(void) {
    unlink(file);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, sizeof dir, "%s/fuzz_data.%ld", tmp, (long)getpid());
        snprintf(file, sizeof file, "%s/a.txt", dir);
        if (mkdir(dir, 0700) != 0) abort();
        atexit(cleanup);
    }
    FILE *fp = fopen(file, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) abort();

    tlm_err err;
    tlm_dataset ds, fromdir;
    int rc = tlm_data_load(&ds, file, &err);
    int rcdir = tlm_data_load(&fromdir, dir, &err);
    if (rc != rcdir || (rc == 0) != (size > 0)) abort();
    if (rc != 0) return 0;
    if (ds.n != size || fromdir.n != size || memcmp(ds.bytes, data, size) != 0 ||
        memcmp(fromdir.bytes, data, size) != 0)
        abort();
    tlm_data_free(&fromdir);

    int T = 1 + data[0] % 64;
    if ((tlm_data_check(&ds, T, &err) == 0) != (size >= (size_t)T + 1)) abort();
    size_t nw = tlm_data_num_windows(&ds, T);
    int32_t in[64], tgt[64];
    for (size_t i = 0; i <= nw; i++) {
        int w = tlm_data_window(&ds, i, T, in, tgt, &err);
        if ((w == 0) != (i < nw && size >= (size_t)T + 1)) abort();
        if (w != 0) continue;
        for (int t = 0; t < T; t++)
            if (in[t] != data[i * (size_t)T + t] || tgt[t] != data[i * (size_t)T + t + 1]) abort();
    }
    tlm_rng rng;
    tlm_rng_seed(&rng, size);
    int32_t bin[2 * 64], btgt[2 * 64];
    int s = tlm_data_sample_batch(&ds, &rng, 2, T, bin, btgt, &err);
    if ((s == 0) != (size >= (size_t)T + 1)) abort();
    for (int k = 0; s == 0 && k < 2 * T; k++)
        if (btgt[k] < 0 || btgt[k] > 255 || bin[k] < 0 || bin[k] > 255) abort();
    tlm_data_free(&ds);
    return 0;
}
