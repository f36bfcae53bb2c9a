/* The profile's busy shares (runtime/model/profile.h): every thread's CPU
 * time counts, a serial stretch leaves the other threads idle, and the
 * table and JSON say so, with the note on spinning waits exactly when
 * OpenMP's threads spin.
 *
 * Run with OMP_WAIT_POLICY=passive (ctest sets it): a waiting thread then
 * sleeps, so a serial op's CPU time is its one thread's. The bounds hold on
 * a loaded machine too: each thread burns a fixed amount of its own CPU
 * time, and the checks bound CPU seconds, not wall time, from below. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "profile.h"
#include "test_util.h"
#include "tlm_rt/ops.h"

static const double BURN = 0.040; /* seconds of CPU time per thread */

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile double sink;

/* Spins until this thread has had `seconds` of CPU time. */
static void burn(double seconds) {
    double t0 = thread_cpu(), x = 1;
    while (thread_cpu() - t0 < seconds)
        for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

/* The profile printed, as one string (malloc'd). */
static char *printed(const tlm_profile *p, bool json) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) exit(2);
    if (json) tlm_profile_write_json(p, f);
    else tlm_profile_print(p, f);
    fclose(f);
    return text;
}

/* The busy column of op's row, in percent (-1: no such row or column). */
static double busy_of(const char *table, const char *op) {
    char key[64];
    snprintf(key, sizeof key, "\n  %-24s ", op);
    const char *row = strstr(table, key);
    if (!row) return -1;
    const char *end = strchr(row + 1, '\n'), *pct = NULL;
    for (const char *c = row + 1; c < end; c++)
        if (*c == '%') pct = c; /* the row's last '%' closes the busy column */
    if (!pct) return -1;
    const char *num = pct;
    while (num > row && (num[-1] == '.' || (num[-1] >= '0' && num[-1] <= '9'))) num--;
    return atof(num);
}

int main(void) {
    CHECK(tlm_threads_wait_passively(), "OMP_WAIT_POLICY is not passive: run as ctest does");
    tlm_set_num_threads(2);
    const int threads = tlm_get_num_threads();
    if (threads < 2) printf("built without OpenMP: only the one-thread accounting is checked\n");
    else check_team_of(2);

    /* A model whose config the FLOP count reads; the two op kinds used
     * (embed, rope) have no FLOPs. */
    tlm_abi_config config = {.d_model = 8, .heads = 1, .head_dim = 8, .vocab = 16};
    tlm_so so = {0};
    so.config = &config;
    tlm_model m = {0};
    m.so = &so, m.run_B = 1, m.run_T = 1;
    tlm_abi_op serial = {.kind = TLM_OP_EMBED}, parallel = {.kind = TLM_OP_ROPE};

    tlm_profile p = {0};
    p.threads = threads;
    tlm_profile_mark step = tlm_profile_now();
#pragma omp parallel num_threads(threads)
    burn(0.001); /* the team exists before it is timed */

    tlm_profile_mark t0 = tlm_profile_now();
    burn(BURN);
    tlm_profile_op(&p, &m, &serial, t0);

    t0 = tlm_profile_now();
#pragma omp parallel num_threads(threads)
    burn(BURN);
    tlm_profile_op(&p, &m, &parallel, t0);
    tlm_profile_steps(&p, 1, step);

    const double s_cpu = p.cpu_seconds[TLM_OP_EMBED], par_cpu = p.cpu_seconds[TLM_OP_ROPE];
    CHECK(s_cpu >= BURN && s_cpu < BURN + 0.5 * BURN, "serial op: %.4f s of CPU time, wanted one thread's %.3f", s_cpu,
          BURN);
    CHECK(par_cpu >= threads * BURN * 0.999, "parallel op: %.4f s of CPU time, wanted every thread's (%d x %.3f)",
          par_cpu, threads, BURN);
    CHECK(p.step_cpu_seconds >= s_cpu + par_cpu, "the step's CPU time %.4f s is less than its ops' %.4f s",
          p.step_cpu_seconds, s_cpu + par_cpu);

    char *table = printed(&p, false);
    printf("%s", table);
    double serial_busy = busy_of(table, "embed"), parallel_busy = busy_of(table, "rope");
    CHECK(strstr(table, "GFLOP/s     busy\n") != NULL, "no busy column");
    CHECK(serial_busy >= 0 && serial_busy <= 100.0 / threads * 1.25, "serial op %.1f%% busy at %d threads", serial_busy,
          threads);
    CHECK(parallel_busy >= 0 && parallel_busy <= 100, "parallel op %.1f%% busy", parallel_busy);
    char line[64];
    snprintf(line, sizeof line, "\n  %d thread%s: busy ", threads, threads == 1 ? "" : "s");
    CHECK(strstr(table, line) != NULL, "no threads line");
    CHECK(strstr(table, "spin") == NULL, "the spinning note under OMP_WAIT_POLICY=passive");
    free(table);

    char *json = printed(&p, true);
    char want[64];
    snprintf(want, sizeof want, "\"threads\": %d, \"cpu_seconds\": ", threads);
    CHECK(strstr(json, want) != NULL, "JSON without the threads and CPU seconds: %s", json);
    CHECK(strstr(json, "\"waits_spin\": false") != NULL, "JSON: waits_spin not false: %s", json);
    CHECK(strstr(json, "{\"op\": \"rope\", \"calls\": 1, ") != NULL &&
              strstr(json, "null, \"cpu_seconds\": ") != NULL && strstr(json, ", \"busy\": ") != NULL,
          "JSON ops without their CPU seconds and busy share: %s", json);
    free(json);

    /* OpenMP's default: waiting threads spin, and the table says so */
    setenv("OMP_WAIT_POLICY", "active", 1);
    table = printed(&p, false);
    json = printed(&p, true);
    CHECK((strstr(table, "OMP_WAIT_POLICY=passive counts them as idle") != NULL) == (threads > 1),
          "the spinning note %s at %d threads", threads > 1 ? "missing" : "shown", threads);
    CHECK(strstr(json, threads > 1 ? "\"waits_spin\": true" : "\"waits_spin\": false") != NULL,
          "JSON: waits_spin wrong at %d threads: %s", threads, json);
    free(table);
    free(json);

    /* On a device: no busy shares */
    p.threads = 0;
    table = printed(&p, false);
    json = printed(&p, true);
    CHECK(strstr(table, "busy") == NULL && strstr(json, "busy") == NULL && strstr(json, "threads") == NULL,
          "busy shares on a device:\n%s\n%s", table, json);
    free(table);
    free(json);
    return test_finish("test_profile_busy");
}
