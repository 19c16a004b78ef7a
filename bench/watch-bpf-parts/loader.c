// Loads several builds of bpf/watch.bpf.c side by side, fills each one's filter the way
// `iolens watch --comm postgres` does (the PostgreSQL processes' wait-event and status-entry
// pointers from the binary's dynamic symbols), attaches its scheduler programs (tp_btf) and,
// after SECONDS, prints each program's runs and ns a run (kernel.bpf_stats_enabled, set by the
// caller). Used by bench/watch-bpf-parts.sh; not part of iolens.
//
// Usage: loader SECONDS POSTGRES_BINARY WAIT_SYM_OFF STATUS_SYM_OFF STATE_OFF OBJ...
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct pg_ptrs {
	unsigned long long wait, status;
	unsigned state_off, pad;
};

static const char *progs[] = { "btf_sched_switch", "btf_sched_wakeup", "btf_sched_wakeup_new",
			       "btf_sched_process_exit", "btf_sched_process_fork", "btf_task_rename", 0 };

static int drop(void *c, void *d, size_t s) { return 0; }

static int map_fd(struct bpf_object *o, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(o, name);
	if (!m) {
		fprintf(stderr, "no map %s\n", name);
		exit(1);
	}
	return bpf_map__fd(m);
}

// The watch's filter and clock; every process mapping BIN gets its pointers.
static int fill(struct bpf_object *o, const char *bin, unsigned long long wait_off,
		unsigned long long status_off, unsigned state_off)
{
	char comm[16] = "postgres";
	unsigned char one = 1;
	unsigned zero = 0;
	bpf_map_update_elem(map_fd(o, "watch_comms"), comm, &one, 0);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned long long clk[3] = { ts.tv_sec * 1000000000ULL + ts.tv_nsec, 1000000000ULL, 0 };
	bpf_map_update_elem(map_fd(o, "watch_clock"), &zero, clk, 0);
	int pg = map_fd(o, "pg_wait_ptr"), n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid = atoi(e->d_name);
		if (pid <= 0)
			continue;
		char path[64], line[512];
		snprintf(path, sizeof path, "/proc/%d/maps", pid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		// The binary's first mapping (file offset 0) is its load base.
		while (fgets(line, sizeof line, f)) {
			unsigned long long start, off;
			char perms[8];
			if (sscanf(line, "%llx-%*x %7s %llx", &start, perms, &off) == 3 && off == 0 &&
			    strstr(line, bin)) {
				struct pg_ptrs v = { start + wait_off, start + status_off, state_off, 0 };
				unsigned k = pid;
				bpf_map_update_elem(pg, &k, &v, 0);
				n++;
				break;
			}
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 7) {
		fprintf(stderr, "usage: loader SECONDS BIN WAIT_OFF STATUS_OFF STATE_OFF OBJ...\n");
		return 2;
	}
	int secs = atoi(argv[1]);
	unsigned long long wait_off = strtoull(argv[3], 0, 16), status_off = strtoull(argv[4], 0, 16);
	unsigned state_off = atoi(argv[5]);
	int nobj = argc - 6;
	struct bpf_object *objs[16];
	struct ring_buffer *rbs[16];
	if (nobj > 16)
		return 2;
	for (int i = 0; i < nobj; i++) {
		struct bpf_object *o = bpf_object__open_file(argv[i + 6], NULL);
		if (!o)
			return 1;
		struct bpf_program *p;
		bpf_object__for_each_program(p, o) {
			int keep = 0;
			for (int j = 0; progs[j]; j++)
				keep |= !strcmp(bpf_program__name(p), progs[j]);
			bpf_program__set_autoload(p, keep);
		}
		if (bpf_object__load(o)) {
			fprintf(stderr, "load %s failed\n", argv[i + 6]);
			return 1;
		}
		int n = fill(o, argv[2], wait_off, status_off, state_off);
		if (i == 0)
			fprintf(stderr, "%d processes of %s\n", n, argv[2]);
		objs[i] = o;
		rbs[i] = ring_buffer__new(map_fd(o, "events"), drop, NULL, NULL);
	}
	for (int i = 0; i < nobj; i++) {
		struct bpf_program *p;
		bpf_object__for_each_program(p, objs[i]) {
			if (bpf_program__autoload(p) && !bpf_program__attach(p)) {
				fprintf(stderr, "attach %s failed\n", bpf_program__name(p));
				return 1;
			}
		}
	}
	for (int t = 0; t < secs * 20; t++) {
		usleep(50000);
		for (int i = 0; i < nobj; i++)
			ring_buffer__consume(rbs[i]);
	}
	for (int i = 0; i < nobj; i++) {
		struct bpf_program *p;
		bpf_object__for_each_program(p, objs[i]) {
			const char *name = bpf_program__name(p);
			if (!bpf_program__autoload(p) || (strcmp(name, "btf_sched_switch") &&
							  strcmp(name, "btf_sched_wakeup")))
				continue;
			struct bpf_prog_info info = {};
			__u32 len = sizeof(info);
			bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len);
			printf("%d %s %s %llu %.1f\n", i, argv[i + 6], name + 4, info.run_cnt,
			       info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0);
		}
	}
	return 0;
}
