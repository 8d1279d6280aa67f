/* Time one CNI plugin run as the runtime sees it (benches/podstart.sh).
 *
 * Installed as NAME-timed next to the plugin NAME in the CNI bin dir, and named
 * by "type": "NAME-timed" in a conflist: it runs NAME with the same argv,
 * environment, stdin and stdout, waits for it, and appends one line to the
 * file podstart-timing.log in that bin dir (a file, not the environment:
 * podman runs DEL from a cleanup process whose environment is not ours):
 *   NAME CNI_COMMAND CNI_CONTAINERID START_NS END_NS CPU_US STATUS
 * (CLOCK_MONOTONIC from before fork to after reap; CPU is user + system of
 * the plugin's process tree, from wait4). Its exit status is the plugin's.
 * As NAME-waited it also waits, as a child subreaper, for every process the
 * plugin left behind (podtap's detach returns while a forked child still
 * waits out the kernel's unregistration of the TAPs): the time until the
 * kernel's work is done, which the runtime otherwise does not wait for.
 * Only in the bench's diagnostic chains: it adds a fork to every plugin run. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long cpu_us(const struct rusage *ru)
{
    return (long long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000LL +
           ru->ru_utime.tv_usec + ru->ru_stime.tv_usec;
}

/* The plugin's path: argv0 without its suffix; whether to wait for leftovers. */
static int target_of(const char *argv0, char *target, size_t size, int *waited)
{
    static const char *const suffixes[] = {"-timed", "-waited"};
    size_t n = strlen(argv0);
    for (int i = 0; i < 2; i++) {
        size_t s = strlen(suffixes[i]);
        if (n > s && n < size && strcmp(argv0 + n - s, suffixes[i]) == 0) {
            memcpy(target, argv0, n - s);
            target[n - s] = 0;
            *waited = i == 1;
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    char target[PATH_MAX];
    int waited = 0;
    (void)argc;
    if (target_of(argv[0], target, sizeof(target), &waited) != 0) {
        fprintf(stderr, "podstart-wrap: run me as <plugin>-timed or <plugin>-waited\n");
        return 2;
    }
    if (waited && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        perror("podstart-wrap: PR_SET_CHILD_SUBREAPER");
        return 1;
    }

    long long t0 = ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("podstart-wrap: fork");
        return 1;
    }
    if (pid == 0) {
        argv[0] = target;
        execv(target, argv);
        perror("podstart-wrap: exec");
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) {
        perror("podstart-wrap: wait4");
        return 1;
    }
    long long cpu = cpu_us(&ru);
    /* -waited: the orphans the plugin left are ours now; wait for them all. */
    while (waited && wait4(-1, NULL, 0, &ru) > 0)
        cpu += cpu_us(&ru);
    long long t1 = ns();
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    char log[PATH_MAX + 32];
    const char *name = strrchr(target, '/');
    if (name) {
        snprintf(log, sizeof(log), "%.*s/podstart-timing.log", (int)(name - target), target);
        int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            const char *cmd = getenv("CNI_COMMAND");
            const char *id = getenv("CNI_CONTAINERID");
            dprintf(fd, "%s %s %s %lld %lld %lld %d\n", name + 1,
                    cmd ? cmd : "-", id && *id ? id : "-", t0, t1, cpu, code);
            close(fd);
        }
    }
    return code;
}
