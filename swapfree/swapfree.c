// SPDX-License-Identifier: MIT
/*
 * swapfree.c - the server side of the freed swap slots (swapfree.h says
 * why and what it needs).
 *
 *   load:   the probe point, from the kernel's BTF: zswap_invalidate()
 *           (one swap entry since 6.9, type and offset in 6.7 and 6.8;
 *           then &swap_info from /proc/kallsyms), else swap_range_free()
 *           -> the program's constants -> load (libbpf relocates its
 *           field reads to the running kernel: it reads the kernel's
 *           BTF, megabytes, and the verifier allocates) -> the ring's
 *           reader. Before the device serves, when memory is no
 *           emergency: a server that adopts a device under a swap
 *           storm stalled here (v44)
 *   start:  the device's dev_t (stat) into the program's .bss -> the
 *           device's write hook -> attach: from here the kernel's frees
 *           of our slots land in the ring -> the drain thread
 *   drain:  under sf->lock: read the ring (runs of slots), discard each
 *           slot's page, adjacent runs as one discard (runs.c). Run by
 *           every write before it looks at the device (the hook), so the
 *           old copy of a slot goes before its new data lands; and by the
 *           thread, every DRAIN_MS or when the program finds the ring
 *           half full, so that memory comes back while nothing is written
 *   stop:   the thread ends, the hook goes, the program is detached
 *
 * The hook is installed before the probe is attached: no write can miss
 * an event that precedes it. Lock order: sf->lock, then the device's own
 * (uzram_discard() takes its slots' locks); nothing is held when a write
 * enters the hook.
 *
 * Under `serve --swap` this runs with the process locked in memory
 * (mlockall on fault) and under PR_SET_IO_FLUSHER: start() drains once,
 * so the drain's code is resident before the first write needs it, and
 * the thread touches its stack before the first drain; the ring is the
 * kernel's memory, mapped once.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "../common/report.h"
#include "runs.h"
#include "swapfree.h"
/* bpftool's generated code casts const away */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-qual"
#include "swapfree.skel.h"
#pragma GCC diagnostic pop

#define DRAIN_MS  1000          /* the thread's period */
#define STACK_TOUCH (64u << 10) /* the thread's stack, resident first */
#define KALLSYMS  "/proc/kallsyms"

struct swapfree {
	struct uzram *dev;
	struct swapfree_bpf *skel;   /* NULL: adopted (a keeper's probe) */
	struct swapfree_bpf__bss *bss; /* the program's globals: the
				      * skeleton's, or mapped from a fd */
	size_t bss_len;              /* bytes mapped by us, or 0 */
	int fds[2];                  /* adopted: the ring's and the
				      * globals' map; else -1 */
	uint64_t lost0;              /* the ring's losses before us */
	struct bpf_program *prog;    /* the probe this kernel takes */
	struct bpf_link *link;       /* and where it is attached */
	struct ring_buffer *ring;
	pthread_t thread;
	bool has_thread;
	int stop_fd;                 /* eventfd: the thread's end */
	uint64_t page;               /* bytes of a slot */
	pthread_mutex_t lock;        /* the ring's one reader, and runs */
	struct freed_runs runs;      /* to discard (runs.c) */
};

/* libbpf's warnings only, in our form; its progress is not news. */
static int libbpf_say(enum libbpf_print_level level, const char *fmt,
		      va_list ap)
{
	if (level != LIBBPF_WARN)
		return 0;
	fputs("uzram swapfree: libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

/* The address of a kernel data symbol (swap_info), or 0. */
static uint64_t kallsyms_data(const char *name)
{
	FILE *f = fopen(KALLSYMS, "re");
	char line[256], sym[128], type;
	unsigned long long addr;
	uint64_t found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%llx %c %127s", &addr, &type, sym) == 3 &&
		    strchr("bBdD", type) && !strcmp(sym, name))
			found = addr; /* 0 where kptr_restrict hides them */
	}
	fclose(f);
	return found;
}

/* Where the running kernel's BTF says the probe goes (swapfree.bpf.c). */
enum probe_point {
	PROBE_NONE,
	PROBE_ENTRY,       /* zswap_invalidate(swp_entry_t): 6.9 and later */
	PROBE_TYPE_OFFSET, /* zswap_invalidate(type, offset): 6.7, 6.8 */
	PROBE_RANGE,       /* swap_range_free(si, offset, nr): before */
};

/* The parameters of the kernel's function name, or -1 if it has none. */
static int func_params(const struct btf *btf, const char *name)
{
	int id = btf__find_by_name_kind(btf, name, BTF_KIND_FUNC);
	const struct btf_type *t;

	if (id <= 0)
		return -1;
	t = btf__type_by_id(btf, btf__type_by_id(btf, (unsigned)id)->type);
	return t ? btf_vlen(t) : -1;
}

/* The probe point of this kernel; PROBE_NONE with errno when none. */
static enum probe_point probe_point(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	enum probe_point p = PROBE_NONE;
	int n;

	if (!btf)
		return PROBE_NONE; /* errno says why */
	n = func_params(btf, "zswap_invalidate");
	if (n == 1)
		p = PROBE_ENTRY;
	else if (n == 2)
		p = PROBE_TYPE_OFFSET;
	else if (func_params(btf, "swap_range_free") == 3)
		p = PROBE_RANGE;
	btf__free(btf);
	errno = ENOENT;
	return p;
}

/* One event: a run of freed slots (swapfree.bpf.c's struct freed_run). */
static int on_run(void *ctx, void *data, size_t len)
{
	struct swapfree *sf = ctx;
	uint64_t run[2];

	if (len >= sizeof run) {
		memcpy(run, data, sizeof run);
		freed_runs_add(&sf->runs, run[0], run[1]);
	}
	return 0;
}

/* The device's write hook, and the thread's work. */
static void swapfree_drain(void *arg)
{
	struct swapfree *sf = arg;

	pthread_mutex_lock(&sf->lock);
	(void)ring_buffer__consume(sf->ring);
	freed_runs_flush(&sf->runs);
	pthread_mutex_unlock(&sf->lock);
}

static void *swapfree_main(void *arg)
{
	struct swapfree *sf = arg;
	struct pollfd p[2] = {
		{ .fd = ring_buffer__epoll_fd(sf->ring), .events = POLLIN },
		{ .fd = sf->stop_fd, .events = POLLIN },
	};
	char stack[STACK_TOUCH];

	memset(stack, 0, sizeof stack);
	__asm__ volatile("" : : "r"(stack) : "memory"); /* kept: touched */
	for (;;) {
		if (poll(p, 2, DRAIN_MS) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		swapfree_drain(sf);
	}
	return NULL;
}

/* The program, loaded; 0, or -errno after a message. */
static int swapfree_open(struct swapfree *sf, const char *who)
{
	enum probe_point point;
	uint64_t info;
	int r;

	point = probe_point();
	if (point == PROBE_NONE) {
		r = -errno;
		report_error(who, "freed swap slots: %s%s; the device keeps "
			     "freed slots' copies until the kernel discards "
			     "them", r == -ENOENT ? "this kernel has neither "
			     "zswap_invalidate() nor swap_range_free() to probe" :
			     "no BTF of the kernel: ",
			     r == -ENOENT ? "" : strerror(-r));
		return r;
	}
	info = point == PROBE_RANGE ? 0 : kallsyms_data("swap_info");
	if (point != PROBE_RANGE && !info) {
		report_error(who, "freed swap slots: no address of swap_info in "
			     KALLSYMS " (a kernel without CONFIG_KALLSYMS_ALL, "
			     "or kptr_restrict); the device keeps freed "
			     "slots' copies until the kernel discards them");
		return -ENOENT;
	}
	libbpf_set_print(libbpf_say);
	sf->skel = swapfree_bpf__open();
	if (!sf->skel) {
		r = -errno;
		report_error(who, "freed swap slots: the BPF program: %s",
			     strerror(-r));
		return r;
	}
	sf->bss = sf->skel->bss;
	sf->skel->rodata->swap_info_addr = info;
	sf->skel->rodata->two_args = point == PROBE_TYPE_OFFSET;
	sf->prog = point == PROBE_RANGE ? sf->skel->progs.on_range :
					  sf->skel->progs.on_entry;
	bpf_program__set_autoload(point == PROBE_RANGE ? sf->skel->progs.on_entry :
				  sf->skel->progs.on_range, false);
	r = swapfree_bpf__load(sf->skel);
	if (r < 0) {
		report_error(who, "freed swap slots: loading the BPF program: "
			     "%s (root, and a kernel with BPF and kprobes, "
			     "are needed)", strerror(-r));
		return r;
	}
	sf->ring = ring_buffer__new(bpf_map__fd(sf->skel->maps.freed), on_run,
				    sf, NULL);
	if (!sf->ring) {
		r = -errno;
		report_error(who, "freed swap slots: the ring: %s", strerror(-r));
		return r;
	}
	return 0;
}

static void swapfree_free(struct swapfree *sf)
{
	bpf_link__destroy(sf->link);
	ring_buffer__free(sf->ring);
	swapfree_bpf__destroy(sf->skel);
	if (sf->bss_len)
		munmap(sf->bss, sf->bss_len);
	for (int i = 0; i < 2; i++)
		if (sf->fds[i] >= 0)
			close(sf->fds[i]);
	if (sf->stop_fd >= 0)
		close(sf->stop_fd);
	pthread_mutex_destroy(&sf->lock);
	free(sf);
}

/* A swapfree of neither kind yet: NULL, or with its eventfd. */
static struct swapfree *swapfree_new(const char *who)
{
	struct swapfree *sf = calloc(1, sizeof *sf);

	if (!sf) {
		report_error(who, "freed swap slots: %s", strerror(ENOMEM));
		return NULL;
	}
	pthread_mutex_init(&sf->lock, NULL);
	sf->fds[0] = sf->fds[1] = -1;
	sf->page = (uint64_t)sysconf(_SC_PAGESIZE);
	sf->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (sf->stop_fd < 0) {
		report_error(who, "freed swap slots: eventfd: %s",
			     strerror(errno));
		swapfree_free(sf);
		return NULL;
	}
	return sf;
}

int swapfree_load(const char *who, struct swapfree **out)
{
	struct swapfree *sf = swapfree_new(who);
	int r;

	*out = NULL;
	if (!sf)
		return -ENOMEM;
	r = swapfree_open(sf, who);
	if (r < 0) {
		swapfree_free(sf);
		return r;
	}
	*out = sf;
	return 0;
}

/* The probe point's name, for messages. */
static const char *probe_name(const struct swapfree *sf)
{
	return sf->prog == sf->skel->progs.on_range ? "swap_range_free" :
						      "zswap_invalidate";
}

int swapfree_share(struct swapfree *sf, char *buf, size_t n, const char *who)
{
	int ring, data;

	sf->link = bpf_program__attach(sf->prog);
	if (!sf->link) {
		report_error(who, "freed swap slots: attaching the probe to "
			     "%s(): %s", probe_name(sf), strerror(errno));
		return -errno;
	}
	/* without FD_CLOEXEC: each server inherits them */
	ring = fcntl(bpf_map__fd(sf->skel->maps.freed), F_DUPFD, 3);
	data = fcntl(bpf_map__fd(sf->skel->maps.bss), F_DUPFD, 3);
	if (ring < 0 || data < 0) {
		report_error(who, "freed swap slots: %s", strerror(errno));
		if (ring >= 0)
			close(ring);
		return -EMFILE;
	}
	sf->fds[0] = ring;
	sf->fds[1] = data;
	snprintf(buf, n, "%d,%d", ring, data);
	return 0;
}

/* Whether fd is a BPF map of that type and value size (0: any). */
static bool map_is(int fd, uint32_t type, uint32_t value_size)
{
	struct bpf_map_info info;
	uint32_t len = sizeof info;

	memset(&info, 0, sizeof info);
	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
	       info.type == type &&
	       (!value_size || (info.value_size == value_size &&
				info.max_entries == 1 &&
				(info.map_flags & BPF_F_MMAPABLE)));
}

int swapfree_adopt(const char *fds, const char *who, struct swapfree **out)
{
	struct swapfree *sf;
	int ring, data, end = 0;

	*out = NULL;
	if (sscanf(fds, "%d,%d%n", &ring, &data, &end) != 2 ||
	    fds[end] || !map_is(ring, BPF_MAP_TYPE_RINGBUF, 0) ||
	    !map_is(data, BPF_MAP_TYPE_ARRAY, sizeof *sf->bss)) {
		report_error(who, "freed swap slots: %s: not the ring and the "
			     "globals of a keeper's probe", fds);
		return -EINVAL;
	}
	sf = swapfree_new(who);
	if (!sf)
		return -ENOMEM;
	(void)fcntl(ring, F_SETFD, FD_CLOEXEC); /* for us, not our children */
	(void)fcntl(data, F_SETFD, FD_CLOEXEC);
	sf->fds[0] = ring;
	sf->fds[1] = data;
	sf->bss_len = (size_t)sf->page;
	sf->bss = mmap(NULL, sf->bss_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       data, 0);
	if (sf->bss == MAP_FAILED) {
		sf->bss_len = 0;
		report_error(who, "freed swap slots: the probe's globals: %s",
			     strerror(errno));
		swapfree_free(sf);
		return -EINVAL;
	}
	sf->ring = ring_buffer__new(ring, on_run, sf, NULL);
	if (!sf->ring) {
		report_error(who, "freed swap slots: the ring: %s",
			     strerror(errno));
		swapfree_free(sf);
		return -EINVAL;
	}
	*out = sf;
	return 0;
}

int swapfree_start(struct swapfree *sf, struct uzram *dev, const char *path,
		   const char *who)
{
	sigset_t all, old;
	struct stat st;
	int r;

	r = stat(path, &st) < 0 ? -errno : S_ISBLK(st.st_mode) ? 0 : -ENOTBLK;
	if (r < 0) {
		report_error(who, "freed swap slots: %s: %s", path, strerror(-r));
		return r;
	}
	sf->dev = dev;
	freed_runs_init(&sf->runs, dev, sf->page);
	/*
	 * Read by the program from its attach on (the mapped .bss). An
	 * adopted probe is attached and may have our device already: the
	 * runs in its ring are the frees since the last server's last
	 * drain, of slots no write has reused since (each write drains
	 * first), and go with the first drain.
	 */
	sf->bss->target_dev = (major(st.st_rdev) << 20) | minor(st.st_rdev);
	sf->lost0 = __atomic_load_n(&sf->bss->lost, __ATOMIC_RELAXED);
	swapfree_drain(sf); /* its code resident (above) */
	uzram_set_write_hook(dev, swapfree_drain, sf);
	if (sf->skel && !(sf->link = bpf_program__attach(sf->prog))) {
		r = -errno;
		uzram_set_write_hook(dev, NULL, NULL);
		sf->dev = NULL;
		report_error(who, "freed swap slots: attaching the probe to "
			     "%s(): %s", probe_name(sf), strerror(-r));
		return r;
	}
	/* the server's signals are its main thread's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&sf->thread, NULL, swapfree_main, sf);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		/* the writes still drain it; only idle memory comes back later */
		report_error(who, "freed swap slots: no drain thread: %s",
			     strerror(r));
	} else {
		sf->has_thread = true;
		(void)pthread_setname_np(sf->thread, "uzram-swapfree");
	}
	return 0;
}

int swapfree_stats(struct swapfree *sf, struct swapfree_stats *st)
{
	if (!sf || !sf->dev)
		return -1;
	pthread_mutex_lock(&sf->lock);
	st->slots = sf->runs.slots;
	st->outside = sf->runs.outside;
	pthread_mutex_unlock(&sf->lock);
	st->lost = __atomic_load_n(&sf->bss->lost, __ATOMIC_RELAXED) - sf->lost0;
	return 0;
}

void swapfree_stop(struct swapfree *sf)
{
	uint64_t one = 1;

	if (!sf)
		return;
	/* an eventfd's write fails only past 2^64 - 2: never here */
	if (sf->has_thread && write(sf->stop_fd, &one, sizeof one) == sizeof one)
		pthread_join(sf->thread, NULL);
	bpf_link__destroy(sf->link);
	sf->link = NULL;
	if (sf->dev)
		uzram_set_write_hook(sf->dev, NULL, NULL);
	swapfree_free(sf);
}
