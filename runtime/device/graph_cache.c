/* Replaying a step's work from CUDA graphs (graph_cache.h). */
#include "graph_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A step has a few shapes (train, eval, probe); beyond this many keys the
 * rest run op by op rather than holding ever more graphs. */
enum { MAX_KEYS = 16 };

typedef struct entry {
    tlm_graph_key key;
    tlm_graph *graph; /* NULL: seen once, captured at the next run */
} entry;

struct tlm_graph_cache {
    tlm_device *dev;
    entry entries[MAX_KEYS];
    int n;
    tlm_graph_stats stats;
};

bool tlm_graphs_setting_ok(tlm_err *err) {
    const char *v = getenv("TLM_CUDA_GRAPHS");
    if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
        return tlm_fail(err, "TLM_CUDA_GRAPHS=%s: expected 0 (off) or 1 (on, the default)", v);
    return true;
}

bool tlm_graphs_enabled(void) {
    const char *v = getenv("TLM_CUDA_GRAPHS");
    return !v || strcmp(v, "0") != 0;
}

tlm_graph_cache *tlm_graph_cache_new(tlm_device *d) {
    tlm_graph_cache *c = calloc(1, sizeof *c);
    if (c) c->dev = d;
    return c;
}

void tlm_graph_cache_free(tlm_graph_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) tlm_device_graph_destroy(c->dev, c->entries[i].graph);
    free(c);
}

tlm_graph_stats tlm_graph_cache_stats(const tlm_graph_cache *c) {
    tlm_graph_stats none = {0};
    return c ? c->stats : none;
}

static entry *find(tlm_graph_cache *c, const tlm_graph_key *key) {
    for (int i = 0; i < c->n; i++)
        if (memcmp(&c->entries[i].key, key, sizeof *key) == 0) return &c->entries[i];
    return NULL;
}

static bool run_plain(tlm_graph_cache *c, tlm_graph_work work, void *ctx, tlm_err *err) {
    c->stats.plain_runs++;
    return work(ctx, err);
}

/* Captures work into e's graph; false with err when the work failed (or
 * the capture was spoiled). An instantiation failure turns graphs off and
 * leaves e without one: the caller runs the work op by op. */
static bool capture(tlm_graph_cache *c, entry *e, tlm_graph_work work, void *ctx, tlm_err *err) {
    if (!tlm_device_capture_begin(c->dev, err)) return false;
    bool worked = work(ctx, err);
    bool instantiate_failed = false;
    tlm_err why = {{0}};
    e->graph = tlm_device_capture_end(c->dev, &instantiate_failed, &why);
    if (!worked) return false; /* its own error says what */
    if (e->graph) {
        c->stats.captures++;
        return true;
    }
    if (!instantiate_failed) return tlm_fail(err, "%s", why.msg);
    fprintf(stderr, "tlm: warning: CUDA graphs off: %s; running each step op by op\n", why.msg);
    c->stats.disabled = true;
    return true;
}

bool tlm_graph_cache_run(tlm_graph_cache *c, const tlm_graph_key *key, tlm_graph_work work, void *ctx, tlm_err *err) {
    if (c->stats.disabled || !tlm_graphs_enabled()) return run_plain(c, work, ctx, err);
    entry *e = find(c, key);
    if (!e) {
        if (c->n < MAX_KEYS) c->entries[c->n++] = (entry){.key = *key};
        return run_plain(c, work, ctx, err);
    }
    if (!e->graph) {
        if (!capture(c, e, work, ctx, err)) return false;
        if (!e->graph) return run_plain(c, work, ctx, err);
    }
    c->stats.launches++;
    return tlm_device_graph_launch(c->dev, e->graph, err);
}
