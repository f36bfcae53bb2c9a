/* How much memory this process may still take. tlm_model_create compares
 * what a model needs with it before allocating, so sizes that do not fit
 * are refused with a message: the arena is zero-filled right after it is
 * allocated, and an allocation the kernel granted on credit would
 * otherwise end in the OOM killer, not in an error.
 *
 * The budget is the least of every limit that applies and can be read:
 *   TLM_MEMORY_LIMIT  a cap in bytes (suffix K, M, G or T: powers of 1024),
 *                     for tests and for users who want one; the limits
 *                     below still apply
 *   MemAvailable      /proc/meminfo
 *   cgroup v2         memory.max - memory.current of the process's cgroup
 *                     and of each ancestor
 *   cgroup v1         hierarchical_memory_limit (else memory.limit_in_bytes)
 *                     - memory.usage_in_bytes
 *   RLIMIT_AS         minus the process's VmSize; RLIMIT_DATA minus VmData
 * A cgroup's inactive page cache (inactive_file, total_inactive_file in
 * memory.stat) counts as free: the kernel reclaims it before it kills. A
 * limit whose files cannot be read is skipped. */
#ifndef TLM_RUNTIME_MEMORY_LIMIT_H
#define TLM_RUNTIME_MEMORY_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"

typedef struct tlm_memory_budget {
    int64_t bytes;   /* what may still be allocated; INT64_MAX: no limit found */
    char source[64]; /* the limit that set it, for messages: "MemAvailable", ... */
} tlm_memory_budget;

/* Reads every limit of this process. False (with err) only when
 * TLM_MEMORY_LIMIT is set and is not a size. */
bool tlm_memory_budget_read(tlm_memory_budget *b, tlm_err *err);

/* "18.2 GiB", "512.0 MiB", "12.0 KiB": bytes for a message. */
const char *tlm_fmt_bytes(char *buf, size_t n, int64_t bytes);

/* ---- the parsers, on the text of the files (exposed for the tests) ----
 * Each returns -1 when the value is absent or malformed. */

/* A size: digits, then optionally K, M, G or T (powers of 1024, an
 * optional "iB" or "B" after it); -1 past 2^62. */
int64_t tlm_parse_size(const char *s);
/* The number on the line that starts with key followed by ':' or a space
 * ("MemAvailable:  24096880 kB" in /proc/meminfo, "VmSize: ..." in
 * /proc/self/status, "inactive_file 16384" in memory.stat), in bytes: a
 * "kB" after the number multiplies it by 1024. */
int64_t tlm_keyed_value(const char *text, const char *key);
/* A cgroup file of one number (memory.max, memory.current,
 * memory.limit_in_bytes): "max", or a v1 "unlimited" of 2^62 or more, is
 * INT64_MAX. */
int64_t tlm_cgroup_value(const char *text);
/* The path of the process's cgroup from the text of /proc/self/cgroup:
 * version 2 reads the "0::PATH" line, version 1 the line whose controller
 * list holds "memory". False when there is none. */
bool tlm_cgroup_path(const char *proc_self_cgroup, int version, char *path, size_t n);
/* What a cgroup with this limit, usage and reclaimable cache still grants:
 * limit - max(0, usage - inactive), at least 0; INT64_MAX without a limit.
 * usage or inactive < 0: unknown (taken as 0). */
int64_t tlm_cgroup_headroom(int64_t limit, int64_t usage, int64_t inactive);

#endif
