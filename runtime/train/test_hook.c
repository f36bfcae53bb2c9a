/* Test-only crash points: see test_hook.h. */
#include "test_hook.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

bool tlm_test_hook(const char *point) {
    static long visits;
    const char *spec = getenv("TLM_TEST_KILL_AT");
    if (!spec || !*spec) return false;
    size_t len = strcspn(spec, ":");
    if (strlen(point) != len || strncmp(spec, point, len) != 0) return false;
    long n = spec[len] == ':' ? strtol(spec + len + 1, NULL, 10) : 1;
    return ++visits == (n > 0 ? n : 1);
}

_Noreturn void tlm_test_kill(void) {
    raise(SIGKILL);
    _exit(137); /* not reached */
}

static void kill_on_signal(int sig) {
    (void)sig;
    tlm_test_kill();
}

void tlm_test_kill_past(long long bytes) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0) return;
    rl.rlim_cur = (rlim_t)bytes;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) rl.rlim_cur = rl.rlim_max;
    signal(SIGXFSZ, kill_on_signal);
    setrlimit(RLIMIT_FSIZE, &rl);
}

void tlm_test_kill_at(const char *point) {
    if (tlm_test_hook(point)) tlm_test_kill();
}
