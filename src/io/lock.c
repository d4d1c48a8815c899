/* lock.c — exclusive locks on files (flock), which name their holder's pid, for what one process at a time may
 * write (a run directory). */
#include "io/files.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* The pid a lock file records, or 0 when it records none (yet). */
static long recorded_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *end;
    long pid = strtol(buf, &end, 10);
    return end != buf && (*end == '\n' || *end == 0) && pid > 0 ? pid : 0;
}

/* The holder writes its pid just after it takes the lock: wait up to ~0.2 s for it. */
static long holder_pid(int fd)
{
    const struct timespec pause = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    long pid = recorded_pid(fd);
    for (int i = 0; i < 20 && pid == 0; i++) {
        nanosleep(&pause, NULL);
        pid = recorded_pid(fd);
    }
    return pid;
}

sf_status sf_lock_acquire(const char *path, int *out)
{
    *out = -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return sf_fail(SF_ERR_IO, "cannot create the lock file %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == ENOLCK || err == EOPNOTSUPP) { /* a file system without locks: go on unlocked */
            close(fd);
            return SF_OK;
        }
        long pid = err == EWOULDBLOCK ? holder_pid(fd) : 0;
        close(fd);
        if (err != EWOULDBLOCK) return sf_fail(SF_ERR_IO, "cannot lock %s: %s", path, strerror(err));
        if (pid == 0) return sf_fail(SF_ERR_STATE, "%s is locked by another process", path);
        return sf_fail(SF_ERR_STATE, "%s is locked by process %ld", path, pid);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        sf_status s = sf_fail(SF_ERR_IO, "writing the lock file %s: %s", path, strerror(errno));
        close(fd); /* releases the lock */
        return s;
    }
    *out = fd;
    return SF_OK;
}

void sf_lock_release(int fd)
{
    if (fd >= 0) close(fd); /* closing the last descriptor releases the flock */
}
