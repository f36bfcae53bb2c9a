/* See memory_limit.h: the least of the limits that apply to this process,
 * read from /proc, /sys/fs/cgroup and getrlimit. */
#include "tlm_rt/memory_limit.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define MAX_SIZE ((int64_t)1 << 62)

const char *tlm_fmt_bytes(char *buf, size_t n, int64_t bytes) {
    double b = (double)bytes;
    if (b >= 1073741824.0) snprintf(buf, n, "%.1f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    else snprintf(buf, n, "%.1f KiB", b / 1024.0);
    return buf;
}

/* The digits at *p (after blanks), advancing p past them: their value,
 * MAX_SIZE when it is 2^62 or more, -1 when there are none. */
static int64_t digits(const char **p) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (!isdigit((unsigned char)*s)) return -1;
    int64_t v = 0;
    for (; isdigit((unsigned char)*s); s++) v = v > (MAX_SIZE - 9) / 10 ? MAX_SIZE : v * 10 + (*s - '0');
    *p = s;
    return v < MAX_SIZE ? v : MAX_SIZE;
}

/* v * scale, at most MAX_SIZE */
static int64_t scaled(int64_t v, int64_t scale) { return v >= MAX_SIZE / scale ? MAX_SIZE : v * scale; }

int64_t tlm_parse_size(const char *s) {
    if (!s) return -1;
    int64_t v = digits(&s);
    if (v < 0) return -1;
    int64_t scale = 1;
    const char *units = "KMGT", *u = *s ? strchr(units, toupper((unsigned char)*s)) : NULL;
    if (u) {
        for (const char *k = units; k <= u; k++) scale *= 1024;
        s++;
        if (s[0] == 'i' && s[1] == 'B') s += 2;
        else if (s[0] == 'B') s++;
    }
    int64_t bytes = scaled(v, scale);
    return *s || bytes >= MAX_SIZE ? -1 : bytes;
}

int64_t tlm_keyed_value(const char *text, const char *key) {
    size_t klen = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, key, klen) != 0 || (line[klen] != ':' && line[klen] != ' ' && line[klen] != '\t')) continue;
        const char *p = line + klen + (line[klen] == ':');
        int64_t v = digits(&p);
        if (v < 0) return -1;
        while (*p == ' ' || *p == '\t') p++;
        return strncmp(p, "kB", 2) == 0 ? scaled(v, 1024) : v;
    }
    return -1;
}

int64_t tlm_cgroup_value(const char *text) {
    const char *p = text;
    while (*p == ' ' || *p == '\t') p++;
    int64_t v;
    if (strncmp(p, "max", 3) == 0) {
        v = INT64_MAX;
        p += 3;
    } else if ((v = digits(&p)) < 0) {
        return -1;
    }
    if (*p != '\0' && *p != '\n') return -1;
    return v >= MAX_SIZE ? INT64_MAX : v;
}

bool tlm_cgroup_path(const char *text, int version, char *path, size_t n) {
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        /* ID:CONTROLLERS:PATH */
        const char *c1 = strchr(line, ':'), *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (!c1 || c1 > end) continue;
        const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
        if (!c2) continue;
        bool match = false;
        if (version == 2) match = c1 == line + 1 && line[0] == '0' && c2 == c1 + 1;
        else
            for (const char *c = c1 + 1; c < c2;) {
                const char *comma = memchr(c, ',', (size_t)(c2 - c));
                const char *stop = comma ? comma : c2;
                if (stop - c == 6 && strncmp(c, "memory", 6) == 0) match = true;
                c = stop + 1;
            }
        if (!match) continue;
        size_t len = (size_t)(end - c2 - 1);
        if (len == 0 || c2[1] != '/' || len >= n) return false;
        memcpy(path, c2 + 1, len);
        path[len] = '\0';
        return true;
    }
    return false;
}

int64_t tlm_cgroup_headroom(int64_t limit, int64_t usage, int64_t inactive) {
    if (limit < 0 || limit == INT64_MAX) return INT64_MAX;
    int64_t used = (usage < 0 ? 0 : usage) - (inactive < 0 ? 0 : inactive);
    if (used < 0) used = 0;
    return limit > used ? limit - used : 0;
}

/* ---- reading the files ---- */

/* The text of a small file, or false. */
static bool read_text(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t got = fread(buf, 1, n - 1, f);
    bool ok = !ferror(f);
    fclose(f);
    buf[got] = '\0';
    return ok && got > 0;
}

/* The text of dir/name, or false (also when the path is too long). */
static bool read_in(const char *dir, const char *name, char *text, size_t n) {
    char path[4400];
    int len = snprintf(path, sizeof path, "%s/%s", dir, name);
    return len > 0 && (size_t)len < sizeof path && read_text(path, text, n);
}

static int64_t file_value(const char *dir, const char *name) {
    char text[64];
    return read_in(dir, name, text, sizeof text) ? tlm_cgroup_value(text) : -1;
}

static int64_t stat_value(const char *dir, const char *key) {
    char text[16384];
    return read_in(dir, "memory.stat", text, sizeof text) ? tlm_keyed_value(text, key) : -1;
}

static void consider(tlm_memory_budget *b, int64_t bytes, const char *source) {
    if (bytes >= 0 && bytes < b->bytes) {
        b->bytes = bytes;
        snprintf(b->source, sizeof b->source, "%s", source);
    }
}

/* cgroup v2: the process's cgroup and every ancestor below the root. */
static void cgroup_v2(tlm_memory_budget *b, const char *proc_cgroup) {
    char rel[4000], dir[4200];
    if (!tlm_cgroup_path(proc_cgroup, 2, rel, sizeof rel)) return;
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(rel, "/") == 0 ? "" : rel);
    for (;;) {
        int64_t limit = file_value(dir, "memory.max");
        if (limit >= 0)
            consider(b, tlm_cgroup_headroom(limit, file_value(dir, "memory.current"), stat_value(dir, "inactive_file")),
                     "cgroup memory.max");
        char *slash = strrchr(dir, '/');
        if (!slash || slash - dir <= (ptrdiff_t)strlen("/sys/fs")) break;   /* /sys/fs/cgroup done */
        *slash = '\0';
    }
}

/* cgroup v1: the memory controller's hierarchy (its limit already the least
 * of the ancestors'), at the process's path or, inside a container that
 * sees its own cgroup as the root, at the mount point. */
static void cgroup_v1(tlm_memory_budget *b, const char *proc_cgroup) {
    char rel[4000], dir[4200];
    const char *mount = "/sys/fs/cgroup/memory";
    if (!tlm_cgroup_path(proc_cgroup, 1, rel, sizeof rel)) return;
    snprintf(dir, sizeof dir, "%s%s", mount, strcmp(rel, "/") == 0 ? "" : rel);
    int64_t usage = file_value(dir, "memory.usage_in_bytes");
    if (usage < 0) {
        snprintf(dir, sizeof dir, "%s", mount);
        usage = file_value(dir, "memory.usage_in_bytes");
    }
    int64_t limit = stat_value(dir, "hierarchical_memory_limit");
    if (limit < 0) limit = file_value(dir, "memory.limit_in_bytes");
    if (limit >= MAX_SIZE) limit = INT64_MAX; /* memory.stat's "no limit" */
    if (limit >= 0)
        consider(b, tlm_cgroup_headroom(limit, usage, stat_value(dir, "total_inactive_file")),
                 "cgroup memory.limit_in_bytes");
}

static void rlimit_headroom(tlm_memory_budget *b, int resource, const char *status, const char *key,
                            const char *source) {
    struct rlimit r;
    if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
    int64_t cur = r.rlim_cur > (rlim_t)MAX_SIZE ? MAX_SIZE : (int64_t)r.rlim_cur;
    int64_t used = status ? tlm_keyed_value(status, key) : -1;
    consider(b, tlm_cgroup_headroom(cur, used, 0), source);
}

bool tlm_memory_budget_read(tlm_memory_budget *b, tlm_err *err) {
    b->bytes = INT64_MAX;
    snprintf(b->source, sizeof b->source, "no limit found");
    char text[16384];
    if (read_text("/proc/meminfo", text, sizeof text))
        consider(b, tlm_keyed_value(text, "MemAvailable"), "MemAvailable");
    if (read_text("/proc/self/cgroup", text, sizeof text)) {
        cgroup_v2(b, text);
        cgroup_v1(b, text);
    }
    bool have_status = read_text("/proc/self/status", text, sizeof text);
    rlimit_headroom(b, RLIMIT_AS, have_status ? text : NULL, "VmSize", "RLIMIT_AS");
    rlimit_headroom(b, RLIMIT_DATA, have_status ? text : NULL, "VmData", "RLIMIT_DATA");
    const char *cap = getenv("TLM_MEMORY_LIMIT");
    if (cap && *cap) {
        int64_t v = tlm_parse_size(cap);
        if (v < 0)
            return tlm_fail(
                err, "TLM_MEMORY_LIMIT=%.40s is not a size in bytes (a number, optionally with K, M, G or T)", cap);
        consider(b, v, "TLM_MEMORY_LIMIT");
    }
    return true;
}
