/* io_faults.c: an LD_PRELOAD shim that makes writes to files under one directory fail.
 *
 * A stand-in for a disk that fills up or fails (ENOSPC, EIO), the way SQLite's and LMDB's
 * test suites inject I/O errors: every write-side call (write, pwrite, fsync, fdatasync,
 * ftruncate) on a file under the armed directory is counted, and call number `fail_at`
 * (0-based) fails with `err`; when `sticky`, so does every later one (a full disk stays full).
 * Controlled from Python through ctypes: hb_fault_arm(), hb_fault_calls().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long calls;
static long fail_at = -1;
static int fail_errno;
static int sticky;
static char dir[PATH_MAX];
static size_t dir_len;

void hb_fault_arm(long at, int err, int keep_failing, const char *where)
{
    calls = 0;
    fail_at = at;
    fail_errno = err;
    sticky = keep_failing;
    dir_len = 0;
    if (where != NULL) {
        strncpy(dir, where, sizeof dir - 1);
        dir[sizeof dir - 1] = '\0';
        dir_len = strlen(dir);
    }
}

long hb_fault_calls(void) { return calls; }

/* 1 if this call must fail (errno set), 0 to pass it through. */
static int should_fail(int fd)
{
    char link[64];
    char target[PATH_MAX];
    ssize_t n;
    if (dir_len == 0)
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof target - 1);
    if (n < (ssize_t)dir_len || strncmp(target, dir, dir_len) != 0)
        return 0;
    long k = calls++;
    if (fail_at >= 0 && (k == fail_at || (sticky && k > fail_at))) {
        errno = fail_errno;
        return 1;
    }
    return 0;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*fd_fn)(int);
typedef int (*truncate_fn)(int, off_t);

/* The next definition of `name` after this library's (libc's). */
static void *real(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

ssize_t write(int fd, const void *buf, size_t count)
{
    static write_fn next;
    if (next == NULL)
        next = (write_fn)real("write");
    return should_fail(fd) ? -1 : next(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    static pwrite_fn next;
    if (next == NULL)
        next = (pwrite_fn)real("pwrite");
    return should_fail(fd) ? -1 : next(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
    static pwrite_fn next;
    if (next == NULL)
        next = (pwrite_fn)real("pwrite64");
    return should_fail(fd) ? -1 : next(fd, buf, count, offset);
}

int fsync(int fd)
{
    static fd_fn next;
    if (next == NULL)
        next = (fd_fn)real("fsync");
    return should_fail(fd) ? -1 : next(fd);
}

int fdatasync(int fd)
{
    static fd_fn next;
    if (next == NULL)
        next = (fd_fn)real("fdatasync");
    return should_fail(fd) ? -1 : next(fd);
}

int ftruncate(int fd, off_t length)
{
    static truncate_fn next;
    if (next == NULL)
        next = (truncate_fn)real("ftruncate");
    return should_fail(fd) ? -1 : next(fd, length);
}

int ftruncate64(int fd, off_t length)
{
    static truncate_fn next;
    if (next == NULL)
        next = (truncate_fn)real("ftruncate64");
    return should_fail(fd) ? -1 : next(fd, length);
}
