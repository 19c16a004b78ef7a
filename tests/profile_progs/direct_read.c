// Test program for tests/profile.rs: reads 4 KiB blocks at random offsets of argv[1] with
// O_DIRECT pread in read_blocks() (so every read waits for the device), until killed.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) long read_blocks(int fd, char *buf, long blocks)
{
	long n = 0;
	for (;;) {
		off_t off = (off_t)(random() % blocks) * 4096;
		if (pread(fd, buf, 4096, off) != 4096) {
			perror("pread");
			exit(1);
		}
		n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	char *buf;
	if (posix_memalign((void **)&buf, 4096, 4096))
		return 1;
	long blocks = lseek(fd, 0, SEEK_END) / 4096;
	printf("reading\n");
	fflush(stdout);
	return (int)read_blocks(fd, buf, blocks);
}
