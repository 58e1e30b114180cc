/*
 * faultfs: an LD_PRELOAD shim that makes fsync or writes fail on demand, for the fault
 * injection tests (tests/it/faults.rs in crates/cli). It stands in for a disk that reports
 * errors: the real call is not made when a fault fires, and the caller gets EIO.
 *
 * Control: the environment variable FAULTFS_CONTROL names a file. Before each intercepted call
 * the shim reads that file, if it exists; its first line arms one fault:
 *
 *   fsync N          the Nth fsync or fdatasync from now fails
 *   write SUFFIX N   the Nth write (write, pwrite) to a file whose path ends with SUFFIX fails
 *
 * When the fault fires, the control file is removed (later calls succeed, as on a disk whose
 * error went away, which is what makes a silent retry dangerous) and a line naming the fault
 * and the file is appended to FAULTFS_CONTROL.fired.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int armed_count = 0; /* calls seen since the current control file was read */

static void fd_path(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    out[n < 0 ? 0 : n] = '\0';
}

/* Whether this call (kind "fsync" or "write", on fd) must fail. */
static int should_fail(const char *kind, int fd) {
    const char *control = getenv("FAULTFS_CONTROL");
    if (control == NULL) return 0;
    FILE *f = fopen(control, "r");
    if (f == NULL) {
        armed_count = 0;
        return 0;
    }
    char line[512] = {0};
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (got == NULL) return 0;
    char want[16] = {0}, suffix[256] = {0};
    int nth = 1;
    if (strncmp(line, "fsync", 5) == 0) {
        strcpy(want, "fsync");
        sscanf(line + 5, "%d", &nth);
    } else if (strncmp(line, "write", 5) == 0) {
        strcpy(want, "write");
        sscanf(line + 5, "%255s %d", suffix, &nth);
    } else {
        return 0;
    }
    if (strcmp(want, kind) != 0) return 0;
    char path[4096];
    fd_path(fd, path, sizeof path);
    size_t lp = strlen(path), ls = strlen(suffix);
    if (ls > 0 && (lp < ls || strcmp(path + lp - ls, suffix) != 0)) return 0;
    if (++armed_count < nth) return 0;
    armed_count = 0;
    unlink(control);
    char fired[4200];
    snprintf(fired, sizeof fired, "%s.fired", control);
    FILE *log = fopen(fired, "a");
    if (log != NULL) {
        fprintf(log, "%s %s\n", kind, path);
        fclose(log);
    }
    return 1;
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = dlsym(RTLD_NEXT, "fsync");
    if (should_fail("fsync", fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = dlsym(RTLD_NEXT, "fdatasync");
    if (should_fail("fsync", fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
    static ssize_t (*real)(int, const void *, size_t) = NULL;
    if (real == NULL) real = dlsym(RTLD_NEXT, "write");
    if (should_fail("write", fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t) = NULL;
    if (real == NULL) real = dlsym(RTLD_NEXT, "pwrite");
    if (should_fail("write", fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off64_t) = NULL;
    if (real == NULL) real = dlsym(RTLD_NEXT, "pwrite64");
    if (should_fail("write", fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd, buf, count, offset);
}
