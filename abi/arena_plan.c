#include "arena_plan.h"

#include <stdlib.h>
#include <string.h>

int64_t tlm_buffer_bytes(const tlm_abi_buffer *b, int64_t B, int64_t T) {
    const int64_t limit = (int64_t)1 << 50;
    if (B <= 0 || T <= 0 || B > limit / T) return 0;
    int64_t bt = B * T;
    if (b->per_token < 0 || b->per_token_t < 0) return 0;
    if (b->per_token && bt > limit / b->per_token) return 0;
    if (b->per_token_t && (T > limit / bt || b->per_token_t > limit / (bt * T))) return 0;
    if (b->per_seq < 0 || (b->per_seq && b->per_seq > limit / B)) return 0;
    int64_t floats = b->per_token * bt + b->per_token_t * bt * T + b->per_seq * B;
    if (floats > limit / 4) return 0;
    int64_t bytes = floats * 4;
    return (bytes + TLM_ARENA_ALIGN - 1) / TLM_ARENA_ALIGN * TLM_ARENA_ALIGN;
}

/* A placed buffer: its bytes [begin, end) and its lifetime [first, last]. */
typedef struct placed {
    int64_t begin, end;
    int first, last;
} placed;

typedef struct item {
    int index;
    int64_t bytes;
} item;

/* Largest first; equal sizes in table order, so the plan is reproducible. */
static int by_size(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->index - y->index;
}

static void touch(int *first, int *last, int buffer, int nbuffers, int op) {
    if (buffer < 0 || buffer >= nbuffers) return;
    if (first[buffer] < 0) first[buffer] = op;
    last[buffer] = op;
}

int64_t tlm_plan_arena(const tlm_abi_buffer *buffers, int nbuffers, const tlm_abi_op *ops, int nops, int64_t B,
                       int64_t T, int64_t *offsets, int *first_out, int *last_out) {
    int *first = malloc((size_t)nbuffers * sizeof *first + 1);
    int *last = malloc((size_t)nbuffers * sizeof *last + 1);
    item *order = malloc((size_t)nbuffers * sizeof *order + 1);
    placed *busy = malloc((size_t)nbuffers * sizeof *busy + 1);
    int64_t arena = 0;
    if (!first || !last || !order || !busy) {
        arena = -1;
        goto done;
    }
    for (int i = 0; i < nbuffers; i++) first[i] = last[i] = -1;
    for (int k = 0; k < nops; k++)
        for (int j = 0; j < 4; j++) {
            touch(first, last, ops[k].in[j], nbuffers, k);
            touch(first, last, ops[k].out[j], nbuffers, k);
        }
    int n = 0;
    for (int i = 0; i < nbuffers; i++) {
        offsets[i] = -1;
        if (first[i] < 0) continue;
        int64_t bytes = tlm_buffer_bytes(&buffers[i], B, T);
        if (bytes == 0 && (buffers[i].per_token || buffers[i].per_token_t || buffers[i].per_seq)) {
            arena = -1;
            goto done;
        }
        order[n++] = (item){i, bytes};
    }
    qsort(order, (size_t)n, sizeof *order, by_size);
    /* First fit: the lowest offset where the buffer overlaps no placed
     * buffer that is alive at the same time. The placed buffers are kept
     * sorted by offset, so each new one scans them once, in order, and
     * stops at the first gap that holds it: no sort per buffer, which made
     * a 4,096-layer model take a minute to plan. */
    int nplaced = 0;
    for (int k = 0; k < n; k++) {
        int i = order[k].index;
        int64_t bytes = order[k].bytes, at = 0;
        for (int j = 0; j < nplaced; j++) {
            const placed *p = &busy[j];
            if (p->first > last[i] || first[i] > p->last) continue;
            if (p->begin >= at + bytes) break;
            if (p->end > at) at = p->end;
        }
        offsets[i] = at;
        if (at + bytes > arena) arena = at + bytes;
        int lo = 0, hi = nplaced;   /* after every buffer that begins at or below `at` */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (busy[mid].begin <= at) lo = mid + 1;
            else hi = mid;
        }
        memmove(&busy[lo + 1], &busy[lo], (size_t)(nplaced - lo) * sizeof *busy);
        busy[lo] = (placed){at, at + bytes, first[i], last[i]};
        nplaced++;
    }
    if (first_out) memcpy(first_out, first, (size_t)nbuffers * sizeof *first);
    if (last_out) memcpy(last_out, last, (size_t)nbuffers * sizeof *last);
done:
    free(first);
    free(last);
    free(order);
    free(busy);
    return arena;
}
