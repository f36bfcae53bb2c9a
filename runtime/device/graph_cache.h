/* A step's device work replayed from CUDA graphs (device.h, "graphs"):
 * the caller names what the work's launches depend on in a key (its
 * phase, the batch's shape, whatever else is baked into their arguments),
 * and the work runs
 *   - the first time a key is seen: as it is, op by op (a warm-up: what
 *     allocates at first use, such as cuBLASLt's workspace or a GEMM's
 *     plan, does so outside any capture);
 *   - the second time: captured into a graph, which is launched at once;
 *   - from then on: as that graph's launch, without calling the work.
 * So the work must issue the same calls with the same argument values
 * every time for one key: a value that changes between runs must be read
 * from device memory, or be part of the key.
 *
 * Failures: the work failing while captured fails the run (its error,
 * e.g. "a download to the host during a CUDA graph capture: ...", is the
 * work's own). The driver failing to instantiate a graph is not the work's
 * fault: the cache then prints one warning line on stderr ("tlm: warning:
 * CUDA graphs off: ..."), stops capturing for good, and runs the work op
 * by op, this time and every later one.
 *
 * TLM_CUDA_GRAPHS=0 in the environment turns graphs off (every run op by
 * op), to compare the two; docs/gpu.md, "CUDA graphs". */
#ifndef TLM_GRAPH_CACHE_H
#define TLM_GRAPH_CACHE_H

#include "device.h"

typedef struct tlm_graph_key {
    int64_t words[6]; /* the caller's: unused words 0 */
} tlm_graph_key;

typedef bool (*tlm_graph_work)(void *ctx, tlm_err *err);

typedef struct tlm_graph_cache tlm_graph_cache;

/* NULL when out of memory (callers then run without graphs). */
tlm_graph_cache *tlm_graph_cache_new(tlm_device *d);
/* Destroys the graphs: before the memory and modules they use go. */
void tlm_graph_cache_free(tlm_graph_cache *c);

/* Runs work(ctx) for key as above; false with err when it failed. */
bool tlm_graph_cache_run(tlm_graph_cache *c, const tlm_graph_key *key, tlm_graph_work work, void *ctx, tlm_err *err);

/* Whether TLM_CUDA_GRAPHS holds a value a run takes: unset, empty, 0 or 1
 * (a misspelt switch that changed nothing would make a comparison of two
 * identical runs); false with the run's one line. */
bool tlm_graphs_setting_ok(tlm_err *err);

/* Whether TLM_CUDA_GRAPHS leaves graphs on (unset, empty or "1"; "0" turns
 * them off; tlm_graphs_setting_ok refuses any other value first). */
bool tlm_graphs_enabled(void);

/* How many runs were graph launches, and how many graphs were captured. */
typedef struct tlm_graph_stats {
    uint64_t launches, captures, plain_runs;
    bool disabled; /* instantiation failed once: graphs off for good */
} tlm_graph_stats;
tlm_graph_stats tlm_graph_cache_stats(const tlm_graph_cache *c);

#endif
