#include "remove_on_signal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { SLOTS = 16, PATH_BYTES = 4200 };

/* A slot is written while its flag is 0 and read by the handler only while
 * it is 1, so the handler never sees a half-copied path. */
static char paths[SLOTS][PATH_BYTES];
static volatile sig_atomic_t in_use[SLOTS];
/* Every signal whose default ends the process and that a user or a pipe
 * sends (SIGPIPE: a reader gone; SIGALRM: `timeout -s ALRM`): INT, TERM
 * and HUP alone left a shard's temporary behind on the others. */
static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2};

static volatile pid_t child; /* 0: none */

/* Async-signal-safe: kill, waitpid, nanosleep. */
static void stop_child(void) {
    pid_t c = child;
    if (c <= 0) return;
    kill(c, SIGTERM); /* lld removes its own temporary on SIGTERM */
    for (int i = 0; i < 200; i++) {
        if (waitpid(c, NULL, WNOHANG) != 0) return;
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
}

void tlm_remove_registered_now(void) {
    int saved = errno;
    stop_child();
    for (int i = SLOTS - 1; i >= 0; i--) {
        if (!in_use[i]) continue;
        if (unlink(paths[i]) != 0 && (errno == EISDIR || errno == EPERM)) rmdir(paths[i]);
        in_use[i] = 0;
    }
    errno = saved;
}

static void remove_all(int sig) {
    tlm_remove_registered_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Once: the handler for each signal nobody else handles yet. */
static void install(void) {
    static bool done = false;
    if (done) return;
    done = true;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        struct sigaction old;
        if (sigaction(signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction sa = {0};
        sa.sa_handler = remove_all;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof signals / sizeof signals[0]; j++) sigaddset(&sa.sa_mask, signals[j]);
        sigaction(signals[i], &sa, NULL);
    }
}

bool tlm_remove_on_signal(const char *path) {
    size_t n = strlen(path);
    if (n >= PATH_BYTES) return false;
    install();
    /* the next free slot above every used one: newest last, removed first */
    int slot = SLOTS - 1;
    while (slot >= 0 && !in_use[slot]) slot--;
    if (++slot >= SLOTS) return false;
    memcpy(paths[slot], path, n + 1);
    in_use[slot] = 1;
    return true;
}

void tlm_signals_handled(sigset_t *set) {
    sigemptyset(set);
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) sigaddset(set, signals[i]);
}

void tlm_stop_child_on_signal(pid_t c) {
    if (c > 0) install();
    child = c;
}

void tlm_keep_on_signal(const char *path) {
    for (int i = SLOTS - 1; i >= 0; i--)
        if (in_use[i] && strcmp(paths[i], path) == 0) {
            in_use[i] = 0;
            return;
        }
}
