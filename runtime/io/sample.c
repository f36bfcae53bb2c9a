/* Next-token sampling: temperature, top-k, one uniform draw. */
#include "tlm_rt/sample.h"

#include <math.h>
#include <stdbool.h>

/* The k-th largest value of a[0..n) (k from 1), by quickselect on a (which
 * it reorders): O(n) on average, no allocation. */
static float kth_largest(float *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1; /* index in descending order */
    while (lo < hi) {
        /* median of three as pivot, then a Hoare partition (descending) */
        int mid = lo + (hi - lo) / 2;
        float x = a[lo], y = a[mid], z = a[hi];
        float pivot = (x > y) == (y > z) ? y : ((y > x) == (x > z) ? x : z);
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

int tlm_sample(const float *logits, int V, float temperature, int top_k, tlm_rng *rng, float *scratch) {
    if (V <= 0) return -1;
    int best = 0;
    for (int v = 1; v < V; v++) {
        if (logits[v] > logits[best]) best = v;
    }
    if (temperature <= 0.0f || top_k == 1) return best;
    if (top_k <= 0 || top_k > V) top_k = V;

    /* keep the logits above the k-th largest, and as many ties at it (in
     * index order) as make exactly k */
    float cut = -INFINITY;
    int ties_left = V;
    if (top_k < V) {
        for (int v = 0; v < V; v++) scratch[v] = logits[v];
        cut = kth_largest(scratch, V, top_k);
        int above = 0;
        for (int v = 0; v < V; v++) above += logits[v] > cut;
        ties_left = top_k - above;
    }

    /* weights of softmax(logits / temperature), max subtracted */
    double total = 0.0;
    float mx = logits[best];
    for (int v = 0; v < V; v++) {
        bool keep = logits[v] > cut || top_k == V;
        if (!keep && logits[v] == cut && ties_left > 0) {
            keep = true;
            ties_left--;
        }
        float w = keep ? expf((logits[v] - mx) / temperature) : 0.0f;
        scratch[v] = w;
        total += w;
    }
    double x = tlm_rng_uniform(rng) * total, acc = 0.0;
    int last = best;
    for (int v = 0; v < V; v++) {
        if (scratch[v] <= 0.0f) continue;
        acc += scratch[v];
        last = v;
        if (x < acc) return v;
    }
    return last; /* x fell past the sum by rounding */
}
