/* Starting and waiting for child processes (spawn.h). */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "regular_file.h"

/* In the child, before exec: only async-signal-safe calls. */
static void redirect(int target, const char *path, int flags) {
    int fd = open(path ? path : "/dev/null", flags | O_CLOEXEC, 0666);
    if (fd < 0) _exit(127);
    if (dup2(fd, target) < 0) _exit(127);
    close(fd);
}

/* An output of the child's, opened here in the runner: opened in the
 * child, a FIFO blocked it forever (no reader) and a folder or a dangling
 * link ended it with exit 127, which the study reported as the program's
 * failure. A regular file or a new one only; the open is non-blocking, so
 * a FIFO swapped in after the look is refused by fstat, not waited on. -1
 * with a reason naming path. */
static int open_output(const char *path, int flags, tlm_err *err) {
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) != 0 && errno == ENOENT)
        return tlm_fail(err, "%s is a symbolic link to a file that does not exist", path), -1;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return tlm_fail(err, "%s is %s, not a regular file", path, tlm_file_kind(st.st_mode)), -1;
    int fd = open(path, flags | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0) return tlm_fail(err, "cannot write %s: %s", path, strerror(errno)), -1;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tlm_fail(err, "cannot write %s: %s", path, strerror(e)), -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tlm_fail(err, "%s is %s, not a regular file", path, tlm_file_kind(st.st_mode)), -1;
    }
    /* above standard error, so that the child's dup2 of one onto its
     * standard output never replaces the other (a runner started with
     * its standard output closed got 1 here) */
    if (fd <= STDERR_FILENO) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1), e = errno;
        close(fd);
        if (high < 0) return tlm_fail(err, "cannot write %s: %s", path, strerror(e)), -1;
        fd = high;
    }
    /* the child writes it as a file opened plainly would be written */
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return tlm_fail(err, "cannot write %s: %s", path, strerror(e)), -1;
    }
    return fd;
}

/* In the child: fd (the runner's, close-on-exec) becomes target. */
static void redirect_fd(int target, int fd) {
    if (dup2(fd, target) < 0) _exit(127);
}

pid_t study_spawn(char *const argv[], const char *out_path, bool append, const char *err_path, tlm_err *err) {
    pid_t parent = getpid();
    int out_fd = -1, err_fd = -1;
    if (out_path && (out_fd = open_output(out_path, O_WRONLY | (append ? O_APPEND : O_TRUNC), err)) < 0) return -1;
    if (err_path && (err_fd = open_output(err_path, O_WRONLY | O_APPEND, err)) < 0) {
        if (out_fd >= 0) close(out_fd);
        return -1;
    }
    /* SIGINT, SIGTERM and SIGHUP blocked across the fork: until the child
     * has put back their default actions, one passed on to it would run the
     * runner's handler there (recorded in the child's copy, then lost at
     * exec: the program ran to its end). Blocked, it waits in the child
     * for the defaults, and ends it; in the runner, for the mask's return. */
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    sigprocmask(SIG_BLOCK, &stops, &old);
    pid_t pid = fork();
    if (pid != 0) {
        int e = errno;
        if (out_fd >= 0) close(out_fd);
        if (err_fd >= 0) close(err_fd);
        if (pid > 0) setpgid(pid, pid); /* both sides: a signal passed on at once finds the group */
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) tlm_fail(err, "cannot start %s: %s", argv[0], strerror(e));
        return pid;
    }
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127); /* the runner died before prctl */
    struct sigaction sa = {.sa_handler = SIG_DFL}, hup;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN)
        sigaction(SIGHUP, &sa, NULL); /* nohup's stays */
    sigset_t none; /* now a pending SIGINT, SIGTERM or SIGHUP ends the child */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    redirect(STDIN_FILENO, NULL, O_RDONLY);
    if (out_fd >= 0) redirect_fd(STDOUT_FILENO, out_fd);
    else redirect(STDOUT_FILENO, NULL, O_WRONLY);
    if (err_fd >= 0) redirect_fd(STDERR_FILENO, err_fd);
    else if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(127);
    execvp(argv[0], argv);
    static const char msg[] = "cannot run the program: exec failed\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(127);
    _exit(127);
}

int study_exit_status(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

void study_pass_signals(pid_t pid, const study_stop *stop, int from, int to) {
    for (int k = from + 1; k <= to; k++) {
        int sig = k >= 3 ? SIGKILL : stop->sig;
        /* the group, wrapper and program alike; the child itself if it
         * has not made its group yet (it is about to, from our fork) */
        if (kill(-pid, sig) != 0) kill(pid, sig);
    }
}

int study_run_child(char *const argv[], const char *out_path, bool append, const char *err_path, const study_stop *stop,
                    tlm_err *err) {
    pid_t pid = study_spawn(argv, out_path, append, err_path, err);
    if (pid < 0) return -1;
    int passed = 0, status;
    for (;;) {
        int now = stop ? stop->count : 0;
        if (now > passed) study_pass_signals(pid, stop, passed, now), passed = now;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) return study_exit_status(status);
        if (done < 0 && errno != EINTR) return tlm_fail(err, "waiting for %s: %s", argv[0], strerror(errno)), -1;
        /* polled, not blocked on: a signal between the look at stop and a
         * blocking wait would not be passed on until the child ended */
        struct timespec t = {0, 20 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
}
