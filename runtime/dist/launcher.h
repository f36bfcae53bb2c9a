/* Whether this process was started by a parallel launcher (mpirun, srun,
 * mpiexec), read from the environment the launcher sets, without MPI: a
 * plain `tlm-run train` never pays MPI's start-up, so MPI is initialised
 * only when this says there are several processes. */
#ifndef TLM_DIST_LAUNCHER_H
#define TLM_DIST_LAUNCHER_H

#include <stddef.h>

/* The job's number of processes as the launcher's environment gives it
 * (Open MPI's OMPI_COMM_WORLD_SIZE, MPICH's and Intel MPI's PMI_SIZE,
 * MVAPICH's MV2_COMM_WORLD_SIZE, Slurm's srun SLURM_STEP_NUM_TASKS); 0 when
 * a launcher is there but says no size (PMIx's PMIX_RANK alone); -1 when
 * none started this process. name: the variable read (for messages). */
int tlm_launcher_size(const char **name);

/* This process's rank as the launcher's environment gives it
 * (OMPI_COMM_WORLD_RANK, PMI_RANK, MV2_COMM_WORLD_RANK, SLURM_PROCID,
 * PMIX_RANK); 0 when none says, so that a message meant once is printed
 * by the first process. */
int tlm_launcher_rank(void);

/* The size variables set (of those tlm_launcher_size reads), as
 * "A, B" into buf (len bytes): what to unset to run one process. */
void tlm_launcher_names(char *buf, size_t len);

/* Unsets the variables tlm_launcher_size reads, for a process that is not
 * one of the launcher's ranks though it was started by one, and starts
 * programs of its own (tlm-run study under mpirun or srun: each training
 * it started took itself for the launcher's rank, and the second failed
 * in MPI_Init). */
void tlm_launcher_forget(void);

#endif
