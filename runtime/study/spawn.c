/* Starting and waiting for child processes (spawn.h). */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child, before exec: only async-signal-safe calls. */
static void redirect(int target, const char *path, int flags) {
    int fd = open(path ? path : "/dev/null", flags | O_CLOEXEC, 0666);
    if (fd < 0) _exit(127);
    if (dup2(fd, target) < 0) _exit(127);
    close(fd);
}

pid_t study_spawn(char *const argv[], const char *out_path, bool append, const char *err_path, tlm_err *err) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        tlm_fail(err, "cannot start %s: %s", argv[0], strerror(errno));
        return -1;
    }
    if (pid > 0) return pid;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127); /* the runner died before prctl */
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    redirect(STDIN_FILENO, NULL, O_RDONLY);
    int out_flags = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC);
    redirect(STDOUT_FILENO, out_path, out_flags);
    if (err_path) redirect(STDERR_FILENO, err_path, O_WRONLY | O_CREAT | O_APPEND);
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

int study_run_child(char *const argv[], const char *out_path, bool append, const char *err_path, tlm_err *err) {
    pid_t pid = study_spawn(argv, out_path, append, err_path, err);
    if (pid < 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return tlm_fail(err, "waiting for %s: %s", argv[0], strerror(errno)), -1;
    return study_exit_status(status);
}
