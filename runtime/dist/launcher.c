#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>

/* The first that is set wins: Open MPI sets PMIX_RANK too, Slurm's srun
 * sets SLURM_STEP_NUM_TASKS beside its MPI's own. */
static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"};

void tlm_launcher_forget(void) {
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) unsetenv(sizes[i]);
    unsetenv("PMIX_RANK");
}

/* The first of the n variables names[] that is set (its index in *which),
 * as a count: 0 when it is not a whole number from 0 to 2^24; -1 when none
 * is set. */
static int first_count(const char *const *names, size_t n, size_t *which) {
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v) continue;
        char *end;
        long count = strtol(v, &end, 10);
        *which = i;
        return *end || count < 0 || count > 1 << 24 ? 0 : (int)count;
    }
    return -1;
}

int tlm_launcher_size(const char **name) {
    size_t which;
    int n = first_count(sizes, sizeof sizes / sizeof *sizes, &which);
    if (n >= 0) {
        if (name) *name = sizes[which];
        return n;
    }
    if (getenv("PMIX_RANK")) {
        if (name) *name = "PMIX_RANK";
        return 0;
    }
    return -1;
}

int tlm_launcher_rank(void) {
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID",
                                        "PMIX_RANK"};
    size_t which;
    int n = first_count(ranks, sizeof ranks / sizeof *ranks, &which);
    return n > 0 ? n : 0;
}

void tlm_launcher_names(char *buf, size_t len) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes && used < len; i++) {
        const char *v = getenv(sizes[i]);
        if (!v || !*v) continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", sizes[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}
