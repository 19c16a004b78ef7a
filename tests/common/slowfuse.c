// A FUSE filesystem with one file, "disk", passed through to a backing file, that sleeps a
// fixed time before serving each read: the storage under a loop device made slow by
// construction (tests/common/slowdev.rs builds and mounts it).
//
//   slowfuse BACKING MOUNTPOINT READ_DELAY_US
//
// Every open is direct_io (no page cache on the FUSE side: each read of the loop device reaches
// this program), the daemon runs in the foreground and multithreaded (concurrent reads sleep
// concurrently, as a device with parallel channels). Writes pass through without delay.
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int backing_fd = -1;
static long delay_us;
static const char *name = "/disk";

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    (void)fi;
    memset(st, 0, sizeof *st);
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (strcmp(path, name) != 0) return -ENOENT;
    struct stat b;
    if (fstat(backing_fd, &b) < 0) return -errno;
    st->st_mode = S_IFREG | 0600;
    st->st_nlink = 1;
    st->st_size = b.st_size;
    return 0;
}

static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)off, (void)fi, (void)flags;
    if (strcmp(path, "/") != 0) return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, name + 1, NULL, 0, 0);
    return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi) {
    if (strcmp(path, name) != 0) return -ENOENT;
    fi->direct_io = 1;
    return 0;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path, (void)fi;
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    ssize_t n = pread(backing_fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int sf_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi) {
    (void)path, (void)fi;
    ssize_t n = pwrite(backing_fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int sf_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path, (void)fi;
    return (datasync ? fdatasync(backing_fd) : fsync(backing_fd)) < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
    .getattr = sf_getattr,
    .readdir = sf_readdir,
    .open = sf_open,
    .read = sf_read,
    .write = sf_write,
    .fsync = sf_fsync,
};

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s BACKING MOUNTPOINT READ_DELAY_US\n", argv[0]);
        return 2;
    }
    backing_fd = open(argv[1], O_RDWR);
    if (backing_fd < 0) {
        perror(argv[1]);
        return 1;
    }
    delay_us = strtol(argv[3], NULL, 10);
    char *fargv[] = {argv[0], "-f", argv[2], NULL};
    return fuse_main(3, fargv, &ops, NULL);
}
