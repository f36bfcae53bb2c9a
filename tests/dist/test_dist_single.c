/* The launcher's detection (launcher.c) and dist.h without MPI
 * (dist_single.c): a plain process is the only rank; one started as one of
 * several refuses with a message; a launcher of one process is a plain
 * run. Built whether or not MPI is found, so the no-MPI path is tested in
 * every build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "launcher.h"

static int failures;

static void expect(bool ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) failures++;
}

static void clear(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS",
                          "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

int main(void) {
    tlm_dist d;
    tlm_err err = {""};
    const char *name = NULL;
    clear();
    expect(tlm_launcher_size(NULL) == -1, "no launcher in the environment: -1");
    expect(tlm_dist_start(&d, &err) && d.rank == 0 && d.ranks == 1 && !d.mpi, "a plain process: rank 0 of 1");
    expect(tlm_dist_max(&d, 15) == 15, "one rank's maximum is its own value");

    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    expect(tlm_launcher_size(&name) == 3 && strcmp(name, "OMPI_COMM_WORLD_SIZE") == 0, "Open MPI's size: 3");
    expect(!tlm_dist_start(&d, &err) && strstr(err.msg, "one of 3 processes (OMPI_COMM_WORLD_SIZE)") &&
               strstr(err.msg, "built without MPI"),
           "one of 3 without MPI: refused, naming the count and the variable");
    printf("    %s\n", err.msg);

    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    expect(tlm_dist_start(&d, &err) && d.ranks == 1, "a launcher of one process: a plain run");

    clear();
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    expect(tlm_launcher_size(&name) == 4 && strcmp(name, "SLURM_STEP_NUM_TASKS") == 0, "srun's task count: 4");
    clear();
    setenv("PMIX_RANK", "0", 1);
    expect(tlm_launcher_size(NULL) == 0, "PMIx alone: a launcher of unknown size (0)");
    expect(!tlm_dist_start(&d, &err) && strstr(err.msg, "one of several processes (PMIX_RANK)"),
           "PMIx without MPI: refused");
    clear();
    setenv("PMI_SIZE", "2x", 1);
    expect(tlm_launcher_size(NULL) == 0, "an unreadable size: unknown (0), not a plain run");
    clear();
    return failures ? 1 : 0;
}
