// SPDX-License-Identifier: MIT
/*
 * uzram-fio.c - a fio external ioengine over libuzram's public API, the way
 * SPDK ships its fio plugin:
 *
 *	ioengine=external:build/uzram-fio.so
 *	thread=1
 *	uzram_size=2g
 *	uzram_algorithm=lz4
 *
 * It is built against the headers of the installed fio (mk/bench.mk unpacks
 * them with `apt-get source fio`) and uses only include/uzram.h.
 *
 * One device per fio process
 *   All jobs of a fio run share one device, so that a fill job, the read jobs
 *   after it and the two jobs of a read/rewrite mix see the same data. The
 *   first job to start opens it with its options; later jobs must ask for
 *   the same size and algorithm or they fail. The device lives until the
 *   process exits (the object is linked -z nodelete, so fio's dlclose()
 *   between stonewalled groups does not drop it); jobs are threads
 *   (thread=1), forked jobs would each get a private device.
 *
 *	fio process
 *	  job "fill"  --.
 *	  job "read"  --+--> shared.dev (struct uzram *)
 *	  job "mix"   --'
 *
 * Engine options (after the ioengine= line):
 *   uzram_size       device size; default: the job's size + offset
 *   uzram_algorithm  "lz4" (default), "lz4hc", "zstd", "deflate"
 *   uzram_level      codec level, 0 for the codec's default
 *   uzram_cluster    compression unit in bytes (uzram_config.cluster_size),
 *                    0 for one page
 *   uzram_src        a file whose bytes writes carry instead of fio's buffer:
 *                    a write at device offset o takes the file's bytes at
 *                    o - offset of the job, wrapping at the file's end.
 *                    This is how the benchmark fills the device with real
 *                    data (fio itself can only write generated patterns).
 *   uzram_stats      a file to which each job appends, at its cleanup, one
 *                    JSON line: the device's uzram_stats and the process RSS
 *   uzram_discard    1: discard the whole device when the job starts
 * The same can be given as environment variables UZRAM_FIO_SIZE,
 * UZRAM_FIO_ALGORITHM, UZRAM_FIO_LEVEL, UZRAM_FIO_CLUSTER, UZRAM_FIO_SRC and UZRAM_FIO_STATS;
 * job options win. UZRAM_FIO_THREADS (environment only) gives the device
 * worker threads (uzram_config.threads). Each stats line also carries
 * cpu_seconds: the CPU time of the whole process (the device's threads
 * included) from the job's start to its end.
 *
 * Requests are synchronous in-process calls. At iodepth > 1 the engine
 * queues up to iodepth requests and runs them at commit, which is what a
 * queue means for a library with no I/O to wait for.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fio.h"
#include "optgroup.h"

#include "uzram.h"

struct uzfio_options {
	void *pad;		/* fio treats off1 == 0 as "no offset" */
	unsigned long long size;
	char *algorithm;
	int level;
	unsigned long long cluster;
	char *src;
	char *stats;
	unsigned int discard;
};

static struct fio_option options[] = {
	{
		.name = "uzram_size",
		.lname = "uzram device size",
		.type = FIO_OPT_STR_VAL,
		.off1 = offsetof(struct uzfio_options, size),
		.help = "Size of the uzram device (default: size + offset of the job)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "uzram_algorithm",
		.lname = "uzram algorithm",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct uzfio_options, algorithm),
		.help = "Compression algorithm: lz4, lz4hc, zstd, deflate",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "uzram_level",
		.lname = "uzram level",
		.type = FIO_OPT_INT,
		.off1 = offsetof(struct uzfio_options, level),
		.help = "Codec level (0: the codec's default)",
		.def = "0",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "uzram_cluster",
		.lname = "uzram cluster size",
		.type = FIO_OPT_STR_VAL,
		.off1 = offsetof(struct uzfio_options, cluster),
		.help = "Compression unit in bytes (0: one page)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "uzram_src",
		.lname = "uzram write source",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct uzfio_options, src),
		.help = "File whose bytes writes carry (at the same offset)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "uzram_stats",
		.lname = "uzram stats file",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct uzfio_options, stats),
		.help = "Append a JSON line of device stats at job cleanup",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "uzram_discard",
		.lname = "uzram discard at start",
		.type = FIO_OPT_BOOL,
		.off1 = offsetof(struct uzfio_options, discard),
		.help = "Discard the whole device when the job starts",
		.def = "0",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = NULL,
	},
};

/* The device of this process; lock protects every field. */
static struct {
	pthread_mutex_t lock;
	struct uzram *dev;
	char algorithm[32];
	int level;
	uint32_t cluster;
	long rss_open_kib;	/* process RSS before the device existed */
} shared = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Per job: the write source and the queue used at iodepth > 1. */
struct uzfio_job {
	struct uzram *dev;
	int src_fd;
	uint64_t src_size;
	uint64_t src_base;	/* device offset of the source's byte 0 */
	unsigned int nr_queued;
	unsigned int nr_events;
	double cpu0;		/* process CPU seconds at the job's start */
	struct io_u **queued;
	struct io_u **events;
};

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *opt_or_env(const char *opt, const char *env)
{
	return opt && *opt ? opt : getenv(env);
}

static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int open_shared(struct thread_data *td, uint64_t size,
		       const char *algorithm, int level, uint32_t cluster)
{
	struct uzram_config cfg;
	int ret = 0;

	pthread_mutex_lock(&shared.lock);
	if (shared.dev) {
		if (uzram_size(shared.dev) < size ||
		    strcmp(shared.algorithm, algorithm) || shared.level != level ||
		    shared.cluster != cluster) {
			log_err("uzram: job %s asks for %" PRIu64 " bytes of %s/%d "
				"in %u-byte clusters but the device of this "
				"process is %" PRIu64 " bytes of %s/%d in %u\n",
				td->o.name, size, algorithm, level, cluster,
				uzram_size(shared.dev), shared.algorithm,
				shared.level, shared.cluster);
			ret = -EINVAL;
		}
		goto out;
	}
	shared.rss_open_kib = rss_kib();
	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.algorithm = algorithm;
	cfg.level = level;
	cfg.cluster_size = cluster;
	if (getenv("UZRAM_FIO_THREADS"))
		cfg.threads = (uint32_t)atoi(getenv("UZRAM_FIO_THREADS"));
	ret = uzram_open(&cfg, &shared.dev);
	if (ret) {
		log_err("uzram: uzram_open(%" PRIu64 ", %s, %d): %s: %s\n",
			size, algorithm, level, uzram_strerror(ret),
			uzram_last_error());
		goto out;
	}
	snprintf(shared.algorithm, sizeof shared.algorithm, "%s", algorithm);
	shared.level = level;
	shared.cluster = cluster;
out:
	pthread_mutex_unlock(&shared.lock);
	return ret;
}

/* Closing the device when the process ends keeps leak checkers quiet. */
__attribute__((destructor)) static void close_shared(void)
{
	uzram_close(shared.dev);
	shared.dev = NULL;
}

/* "N" with an optional binary k/m/g/t suffix, as fio's own size options. */
static uint64_t parse_size(const char *s)
{
	static const char units[] = "kmgt";
	unsigned long long v;
	const char *u;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	if (*end && (u = strchr(units, tolower((unsigned char)*end)))) {
		v <<= 10 * (u - units + 1);
		end++;
	}
	return *end ? 0 : v;
}

static uint64_t job_size(struct thread_data *td, const struct uzfio_options *o)
{
	const char *env;
	uint64_t v;

	if (o->size)
		return o->size;
	env = getenv("UZRAM_FIO_SIZE");
	if (env && *env) {
		v = parse_size(env);
		if (!v)
			log_err("uzram: bad UZRAM_FIO_SIZE '%s'\n", env);
		return v;
	}
	return td->o.size + td->o.start_offset;
}

static int uzfio_setup(struct thread_data *td)
{
	struct uzfio_options *o = td->eo;
	const char *algorithm = opt_or_env(o->algorithm, "UZRAM_FIO_ALGORITHM");
	const char *level_env = getenv("UZRAM_FIO_LEVEL");
	int level = o->level ? o->level : (level_env ? atoi(level_env) : 0);
	const char *cluster_env = getenv("UZRAM_FIO_CLUSTER");
	uint32_t cluster = (uint32_t)(o->cluster ? o->cluster :
			   (cluster_env ? strtoul(cluster_env, NULL, 0) : 0));
	uint64_t size = job_size(td, o);
	struct fio_file *f;
	unsigned int i;
	int ret;

	if (!algorithm)
		algorithm = "lz4";
	if (!size) {
		log_err("uzram: job %s: set uzram_size (or size=)\n", td->o.name);
		return 1;
	}
	ret = open_shared(td, size, algorithm, level, cluster);
	if (ret)
		return 1;
	/* There is no file: one pseudo file stands for the device. */
	if (!td->files_index) {
		add_file(td, "uzram", 0, 0);
		td->o.nr_files = td->o.nr_files ? : 1;
		td->o.open_files++;
	}
	for_each_file(td, f, i) {
		f->real_file_size = uzram_size(shared.dev);
		fio_file_set_size_known(f);
	}
	return 0;
}

static int uzfio_init(struct thread_data *td)
{
	struct uzfio_options *o = td->eo;
	const char *src = opt_or_env(o->src, "UZRAM_FIO_SRC");
	struct uzfio_job *j;
	struct stat st;

	j = calloc(1, sizeof(*j));
	if (!j)
		return 1;
	td->io_ops_data = j;
	j->dev = shared.dev;
	j->src_fd = -1;
	j->cpu0 = cpu_seconds();
	if (td->o.iodepth > 1) {
		j->queued = calloc(td->o.iodepth, sizeof(*j->queued));
		j->events = calloc(td->o.iodepth, sizeof(*j->events));
		if (!j->queued || !j->events)
			return 1;
	}
	if (src) {
		j->src_fd = open(src, O_RDONLY | O_CLOEXEC);
		if (j->src_fd < 0 || fstat(j->src_fd, &st) || !st.st_size) {
			log_err("uzram: cannot use %s as write source: %s\n",
				src, strerror(errno));
			return 1;
		}
		j->src_size = st.st_size;
		j->src_base = td->o.start_offset;
	}
	if (o->discard) {
		int ret = uzram_discard(j->dev, uzram_size(j->dev), 0);

		if (ret) {
			log_err("uzram: discard: %s\n", uzram_strerror(ret));
			return 1;
		}
	}
	return 0;
}

static void write_stats(struct thread_data *td, const char *path,
			double cpu)
{
	struct uzram_stats st;
	FILE *f;

	if (uzram_stats(shared.dev, &st, sizeof st))
		return;
	f = path ? fopen(path, "a") : NULL;
	if (path && !f) {
		log_err("uzram: cannot open %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f ? f : stdout,
		"{\"job\": \"%s\", \"algorithm\": \"%s\", \"cluster_size\": %u, "
		"\"rss_bytes\": %ld, "
		"\"rss_open_bytes\": %ld, "
		"\"disksize\": %" PRIu64 ", \"orig_data_size\": %" PRIu64 ", "
		"\"compr_data_size\": %" PRIu64 ", \"mem_used_total\": %" PRIu64 ", "
		"\"mem_used_max\": %" PRIu64 ", \"same_pages\": %" PRIu64 ", "
		"\"huge_pages\": %" PRIu64 ", \"pages_stored\": %" PRIu64 ", "
		"\"pages_compacted\": %" PRIu64 ", \"table_bytes\": %" PRIu64 ", "
		"\"failed_reads\": %" PRIu64 ", \"failed_writes\": %" PRIu64 ", "
		"\"slot_lock_waits\": %" PRIu64 ", \"slot_lock_wait_ns\": %" PRIu64 ", "
		"\"slot_read_waits\": %" PRIu64 ", \"slot_read_wait_ns\": %" PRIu64 ", "
		"\"class_lock_waits\": %" PRIu64 ", \"class_lock_wait_ns\": %" PRIu64 ", "
		"\"frame_waits\": %" PRIu64 ", \"frame_wait_ns\": %" PRIu64 ", "
		"\"cpu_seconds\": %.4f}\n",
		td->o.name, shared.algorithm, uzram_cluster_size(shared.dev),
		rss_kib() * 1024,
		shared.rss_open_kib * 1024, st.disksize,
		st.orig_data_size, st.compr_data_size, st.mem_used_total,
		st.mem_used_max, st.same_pages, st.huge_pages, st.pages_stored,
		st.pages_compacted, st.table_bytes, st.failed_reads,
		st.failed_writes, st.slot_lock_waits, st.slot_lock_wait_ns,
		st.slot_read_waits, st.slot_read_wait_ns, st.class_lock_waits,
		st.class_lock_wait_ns, st.frame_waits, st.frame_wait_ns, cpu);
	if (f)
		fclose(f);
}

static void uzfio_cleanup(struct thread_data *td)
{
	struct uzfio_options *o = td->eo;
	struct uzfio_job *j = td->io_ops_data;
	double cpu = 0;

	if (j) {
		cpu = cpu_seconds() - j->cpu0;
		if (j->src_fd >= 0)
			close(j->src_fd);
		free(j->queued);
		free(j->events);
		free(j);
		td->io_ops_data = NULL;
	}
	pthread_mutex_lock(&shared.lock);
	if (shared.dev)
		write_stats(td, opt_or_env(o->stats, "UZRAM_FIO_STATS"), cpu);
	pthread_mutex_unlock(&shared.lock);
}

/* Fill buf with the source file's bytes for device offset off. */
static int read_src(struct uzfio_job *j, void *buf, size_t len, uint64_t off)
{
	uint64_t pos = (off - j->src_base) % j->src_size;
	char *p = buf;

	while (len) {
		size_t n = len;
		ssize_t got;

		if (n > j->src_size - pos)
			n = j->src_size - pos;
		got = pread(j->src_fd, p, n, pos);
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		p += got;
		len -= got;
		pos = (pos + got) % j->src_size;
	}
	return 0;
}

static int do_io(struct uzfio_job *j, struct io_u *io_u)
{
	int ret;

	switch (io_u->ddir) {
	case DDIR_READ:
		return uzram_read(j->dev, io_u->xfer_buf, io_u->xfer_buflen,
				  io_u->offset);
	case DDIR_WRITE:
		if (j->src_fd >= 0) {
			ret = read_src(j, io_u->xfer_buf, io_u->xfer_buflen,
				       io_u->offset);
			if (ret)
				return ret;
		}
		return uzram_write(j->dev, io_u->xfer_buf, io_u->xfer_buflen,
				   io_u->offset);
	case DDIR_TRIM:
		return uzram_discard(j->dev, io_u->xfer_buflen, io_u->offset);
	case DDIR_SYNC:
	case DDIR_DATASYNC:
	case DDIR_SYNC_FILE_RANGE:
		return 0;
	default:
		return -EINVAL;
	}
}

static void finish(struct io_u *io_u, int ret)
{
	io_u->error = ret < 0 ? -ret : 0;
	io_u->resid = ret < 0 ? io_u->xfer_buflen : 0;
}

static enum fio_q_status uzfio_queue(struct thread_data *td, struct io_u *io_u)
{
	struct uzfio_job *j = td->io_ops_data;

	fio_ro_check(td, io_u);
	if (!j->queued) {
		finish(io_u, do_io(j, io_u));
		return FIO_Q_COMPLETED;
	}
	if (j->nr_queued == td->o.iodepth)
		return FIO_Q_BUSY;
	j->queued[j->nr_queued++] = io_u;
	return FIO_Q_QUEUED;
}

static int uzfio_commit(struct thread_data *td)
{
	struct uzfio_job *j = td->io_ops_data;
	struct timespec now;
	unsigned int i;

	if (!j->queued || !j->nr_queued)
		return 0;
	if (fio_fill_issue_time(td)) {
		fio_gettime(&now, NULL);
		for (i = 0; i < j->nr_queued; i++) {
			j->queued[i]->issue_time = now;
			io_u_queued(td, j->queued[i]);
		}
	}
	for (i = 0; i < j->nr_queued; i++) {
		finish(j->queued[i], do_io(j, j->queued[i]));
		j->events[j->nr_events++] = j->queued[i];
	}
	j->nr_queued = 0;
	return 0;
}

static int uzfio_getevents(struct thread_data *td, unsigned int min,
			   unsigned int max, const struct timespec fio_unused *t)
{
	struct uzfio_job *j = td->io_ops_data;
	unsigned int n;

	(void)max;
	if (j->nr_events < min)
		uzfio_commit(td);
	n = j->nr_events;
	j->nr_events = 0;
	return n;
}

static struct io_u *uzfio_event(struct thread_data *td, int event)
{
	struct uzfio_job *j = td->io_ops_data;

	return j->events[event];
}

static int uzfio_open_file(struct thread_data fio_unused *td,
			   struct fio_file fio_unused *f)
{
	return 0;
}

static int uzfio_close_file(struct thread_data fio_unused *td,
			    struct fio_file fio_unused *f)
{
	return 0;
}

static int uzfio_invalidate(struct thread_data fio_unused *td,
			    struct fio_file fio_unused *f)
{
	return 0;
}

/* fio looks this symbol up by name in the external engine. */
struct ioengine_ops ioengine = {
	.name = "uzram",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_DISKLESSIO | FIO_NODISKUTIL | FIO_NOEXTEND,
	.setup = uzfio_setup,
	.init = uzfio_init,
	.queue = uzfio_queue,
	.commit = uzfio_commit,
	.getevents = uzfio_getevents,
	.event = uzfio_event,
	.cleanup = uzfio_cleanup,
	.open_file = uzfio_open_file,
	.close_file = uzfio_close_file,
	.invalidate = uzfio_invalidate,
	.options = options,
	.option_struct_size = sizeof(struct uzfio_options),
};
