/* The memory budget's parsers (runtime/io/memory_limit.h) on fixture
 * texts of /proc/meminfo, /proc/self/status, /proc/self/cgroup and the
 * cgroup v1 and v2 files, and the budget read with TLM_MEMORY_LIMIT set. */
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tlm_rt/memory_limit.h"
#include "test_util.h"

static const char *meminfo = "MemTotal:       24683548 kB\n"
                             "MemFree:         1030520 kB\n"
                             "MemAvailable:   24096880 kB\n"
                             "Buffers:          102400 kB\n";

static const char *status = "Name:\ttlm-run\n"
                            "VmPeak:\t  123456 kB\n"
                            "VmSize:\t  120000 kB\n"
                            "VmData:\t   40000 kB\n";

/* a hybrid host: v1 controllers and the unified hierarchy's 0:: line */
static const char *cgroup_hybrid = "9:name=systemd:/\n"
                                   "5:devices:/\n"
                                   "4:memory:/process_api/4d912e231e03\n"
                                   "3:cpu,cpuacct:/\n"
                                   "0::/\n";
static const char *cgroup_v2 = "0::/user.slice/user-1000.slice/session-3.scope\n";
static const char *cgroup_v1_joined = "7:cpuacct,memory,cpu:/docker/abc\n";

static const char *stat_v2 = "anon 1048576\n"
                             "file 8388608\n"
                             "inactive_anon 0\n"
                             "active_anon 1048576\n"
                             "inactive_file 4194304\n"
                             "active_file 4194304\n";
static const char *stat_v1 = "cache 9740288\n"
                             "inactive_file 16384\n"
                             "hierarchical_memory_limit 9223372036854771712\n"
                             "total_inactive_file 390733824\n";

/* The child's share: returns 0 when the budget follows RLIMIT_AS. */
static int check_rlimit_as(void) {
    char status_now[16384] = "";
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        status_now[fread(status_now, 1, sizeof status_now - 1, f)] = '\0';
        fclose(f);
    }
    int64_t vm = tlm_keyed_value(status_now, "VmSize");
    CHECK(vm > 0, "VmSize in /proc/self/status");
    struct rlimit as;
    CHECK(getrlimit(RLIMIT_AS, &as) == 0, "getrlimit");
    rlim_t want = (rlim_t)(vm + (64 << 20));
    if (as.rlim_cur == RLIM_INFINITY || as.rlim_cur > want) as.rlim_cur = want;
    CHECK(setrlimit(RLIMIT_AS, &as) == 0, "setrlimit");
    tlm_memory_budget b;
    tlm_err err = {""};
    CHECK(tlm_memory_budget_read(&b, &err) && strcmp(b.source, "RLIMIT_AS") == 0 && b.bytes <= (64 << 20) &&
              b.bytes > (int64_t)as.rlim_cur - vm - (4 << 20),
          "RLIMIT_AS = VmSize + 64 MiB: %lld from %s", (long long)b.bytes, b.source);
    int rc = test_finish("test_memory_limit: RLIMIT_AS");
    fflush(stdout); /* the child leaves by _exit */
    return rc;
}

int main(void) {
    /* sizes: TLM_MEMORY_LIMIT's syntax */
    CHECK(tlm_parse_size("0") == 0, "0");
    CHECK(tlm_parse_size("1048576") == 1048576, "plain bytes");
    CHECK(tlm_parse_size("4K") == 4096, "4K");
    CHECK(tlm_parse_size("3M") == 3 << 20, "3M");
    CHECK(tlm_parse_size("2G") == (int64_t)2 << 30, "2G");
    CHECK(tlm_parse_size("2g") == (int64_t)2 << 30, "2g");
    CHECK(tlm_parse_size("1GiB") == (int64_t)1 << 30, "1GiB");
    CHECK(tlm_parse_size("1GB") == (int64_t)1 << 30, "1GB");
    CHECK(tlm_parse_size("5T") == (int64_t)5 << 40, "5T");
    CHECK(tlm_parse_size("") == -1 && tlm_parse_size(NULL) == -1, "empty");
    CHECK(tlm_parse_size("abc") == -1, "abc");
    CHECK(tlm_parse_size("-1") == -1, "negative");
    CHECK(tlm_parse_size("12X") == -1, "unknown unit");
    CHECK(tlm_parse_size("1G extra") == -1, "trailing text");
    CHECK(tlm_parse_size("99999999999999999999") == -1, "past 2^62");
    CHECK(tlm_parse_size("8388608T") == -1, "2^63 bytes");

    /* keyed lines: /proc/meminfo, /proc/self/status, memory.stat */
    CHECK(tlm_keyed_value(meminfo, "MemAvailable") == (int64_t)24096880 * 1024, "MemAvailable");
    CHECK(tlm_keyed_value(meminfo, "MemTotal") == (int64_t)24683548 * 1024, "MemTotal (first line)");
    CHECK(tlm_keyed_value(meminfo, "Buffers") == (int64_t)102400 * 1024, "the last line");
    CHECK(tlm_keyed_value(meminfo, "Mem") == -1, "a key's prefix is not the key");
    CHECK(tlm_keyed_value("MemTotal: 1 kB\n", "MemAvailable") == -1, "an old kernel without MemAvailable");
    CHECK(tlm_keyed_value("MemAvailable: lots\n", "MemAvailable") == -1, "not a number");
    CHECK(tlm_keyed_value("", "MemAvailable") == -1, "empty");
    CHECK(tlm_keyed_value(status, "VmSize") == (int64_t)120000 * 1024, "VmSize, tab-separated");
    CHECK(tlm_keyed_value(status, "VmData") == (int64_t)40000 * 1024, "VmData");
    CHECK(tlm_keyed_value(stat_v2, "inactive_file") == 4194304, "v2 inactive_file, bytes");
    CHECK(tlm_keyed_value(stat_v2, "file") == 8388608, "'file' is not 'inactive_file'");
    CHECK(tlm_keyed_value(stat_v1, "total_inactive_file") == 390733824, "v1 total_inactive_file");
    CHECK(tlm_keyed_value(stat_v1, "inactive_file") == 16384, "v1 inactive_file");
    CHECK(tlm_keyed_value(stat_v1, "hierarchical_memory_limit") == (int64_t)1 << 62, "v1 no limit: 2^62, saturated");

    /* one-number cgroup files */
    CHECK(tlm_cgroup_value("max\n") == INT64_MAX, "v2 max");
    CHECK(tlm_cgroup_value("536870912\n") == 536870912, "v2 512 MiB");
    CHECK(tlm_cgroup_value("9223372036854771712\n") == INT64_MAX, "v1 unlimited");
    CHECK(tlm_cgroup_value("4611686018427387904") == INT64_MAX, "2^62");
    CHECK(tlm_cgroup_value("maximum\n") == -1, "maximum");
    CHECK(tlm_cgroup_value("12 kB\n") == -1, "trailing text");
    CHECK(tlm_cgroup_value("\n") == -1 && tlm_cgroup_value("") == -1, "empty");

    /* /proc/self/cgroup */
    char path[256];
    CHECK(tlm_cgroup_path(cgroup_hybrid, 1, path, sizeof path) && strcmp(path, "/process_api/4d912e231e03") == 0,
          "v1 memory line: %s", path);
    CHECK(tlm_cgroup_path(cgroup_hybrid, 2, path, sizeof path) && strcmp(path, "/") == 0, "hybrid 0::/");
    CHECK(tlm_cgroup_path(cgroup_v2, 2, path, sizeof path) &&
              strcmp(path, "/user.slice/user-1000.slice/session-3.scope") == 0,
          "v2 path: %s", path);
    CHECK(!tlm_cgroup_path(cgroup_v2, 1, path, sizeof path), "no v1 memory controller on a v2 host");
    CHECK(tlm_cgroup_path(cgroup_v1_joined, 1, path, sizeof path) && strcmp(path, "/docker/abc") == 0,
          "memory among joined controllers");
    CHECK(!tlm_cgroup_path("4:memoryx:/a\n3:xmemory:/b\n", 1, path, sizeof path), "only the controller 'memory'");
    CHECK(!tlm_cgroup_path(cgroup_v1_joined, 2, path, sizeof path), "no 0:: line");
    CHECK(!tlm_cgroup_path("0::/a/very/long/path\n", 2, path, 8), "a path longer than the buffer");
    CHECK(!tlm_cgroup_path("", 2, path, sizeof path) && !tlm_cgroup_path("garbage", 1, path, sizeof path),
          "empty or malformed");

    /* headroom = limit - (usage - inactive file cache) */
    CHECK(tlm_cgroup_headroom(INT64_MAX, 100, 0) == INT64_MAX, "no limit");
    CHECK(tlm_cgroup_headroom(1000, 300, 0) == 700, "limit - usage");
    CHECK(tlm_cgroup_headroom(1000, 300, 100) == 800, "the inactive cache counts as free");
    CHECK(tlm_cgroup_headroom(1000, 300, 500) == 1000, "more cache than usage");
    CHECK(tlm_cgroup_headroom(1000, 1500, 0) == 0, "over the limit: nothing");
    CHECK(tlm_cgroup_headroom(1000, -1, -1) == 1000, "usage unknown");

    /* the budget: a cap in TLM_MEMORY_LIMIT is the least limit; a bad one fails */
    tlm_memory_budget b;
    tlm_err err = {""};
    setenv("TLM_MEMORY_LIMIT", "1M", 1);
    CHECK(tlm_memory_budget_read(&b, &err) && b.bytes == 1048576 && strcmp(b.source, "TLM_MEMORY_LIMIT") == 0,
          "TLM_MEMORY_LIMIT=1M: %lld from %s", (long long)b.bytes, b.source);
    setenv("TLM_MEMORY_LIMIT", "lots", 1);
    CHECK(!tlm_memory_budget_read(&b, &err) && strstr(err.msg, "TLM_MEMORY_LIMIT=lots is not a size"), "bad cap: %s",
          err.msg);
    unsetenv("TLM_MEMORY_LIMIT");
    CHECK(tlm_memory_budget_read(&b, &err) && b.bytes > 0, "this process's budget: %lld", (long long)b.bytes);
    char n[32];
    printf("  this process may take %s more (%s)\n",
           b.bytes == INT64_MAX ? "any amount" : tlm_fmt_bytes(n, sizeof n, b.bytes), b.source);
    CHECK(strcmp(tlm_fmt_bytes(n, sizeof n, (int64_t)3 << 29), "1.5 GiB") == 0, "1.5 GiB: %s", n);
    CHECK(strcmp(tlm_fmt_bytes(n, sizeof n, 512 << 20), "512.0 MiB") == 0, "512 MiB: %s", n);

    /* RLIMIT_AS at this process's size + 64 MiB leaves about 64 MiB. In a
     * child process: the limit would otherwise stay on this one, where
     * OpenBLAS's threads allocate their buffers whenever they start. */
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) _exit(check_rlimit_as());
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the RLIMIT_AS check in a child (status %d)", status);
    return test_finish("test_memory_limit");
}
