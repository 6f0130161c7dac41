// SPDX-License-Identifier: MIT
/*
 * load.c - `uzram load FILE`: store a file in a fresh device, read it back,
 * and report what it cost.
 *
 *   file --mmap--> 1 MiB chunks --uzram_write--> device   (timed)
 *   device --uzram_read--> 1 MiB buffer --memcmp--> file   (reads timed)
 *
 * The device is sized to the file, rounded up to whole pages; the bytes
 * past the end of the file must read back as zeros. The file is mapped
 * with MAP_POPULATE so that the write figures measure the device, not the
 * disk. With --randread N, N reads of one random 4 KiB page follow the
 * read back and are timed apart: with --cluster each decodes a whole
 * cluster. With --recompress ALGO[:LEVEL], the stored file is re-encoded
 * with that secondary algorithm (timed, then compacted) before it is read
 * back, so the round trip checks the recompressed data. --dict FILE gives
 * the algorithm a dictionary; --train-dict[=SIZE] trains one from the
 * stored file, keeps it if it pays, and re-encodes with it (timed, then
 * compacted), before any recompression. With --backing
 * TARGET (an empty file, a block device or an NBD URI), everything stored
 * is then written back (timed), so the reads go to the backing store.
 * Figures come from uzram_stats() after the reads (reads do not
 * change them). Exit status: 0 if every byte matched, 1 on a mismatch or a
 * failure, 2 on a usage error. Only the public API (uzram.h) is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uzram.h"
#include "../base/base.h"
#include "load.h"

#define CHUNK (1u << 20)

static void load_footer(FILE *f)
{
	fprintf(f, "algorithms: %s\n", uzram_algorithms());
}

static const struct cli_option load_opts_table[] = {
	CLI_CODEC_OPTIONS,
	{ "json", 'j', no_argument, NULL, "the figures as one JSON object" },
	{ "mem-limit", 'm', required_argument, "SIZE",
	  "the most memory the device may take (mem_limit)" },
	{ "randread", 'R', required_argument, "N",
	  "time N random 4 KiB reads" },
	{ "recompress", 'r', required_argument, "ALGO[:LEVEL][:dict=FILE]",
	  "then re-encode every page with this algorithm" },
	{ "dict", 'D', required_argument, "FILE",
	  "a dictionary for the algorithm (lz4, zstd)" },
	{ "train-dict", 't', optional_argument, "[=SIZE]",
	  "train a dictionary (64 KiB by default) from the data,\n"
	  "keep it if it pays, re-encode with it" },
	{ "save", 'S', required_argument, "IMAGE",
	  "save the device to IMAGE (uzram_save), open it\n"
	  "again and check that too" },
	{ "backing", 'b', required_argument, "FILE|DEVICE|NBD-URI",
	  "write everything back to this backing store and\n"
	  "read it from there" },
	{ "threads", 'T', required_argument, "N",
	  "worker threads for large writes (0 to 64)" },
	{ "dedup", 'U', no_argument, NULL,
	  "store clusters with equal bytes once" },
	{ "help", 'h', no_argument, NULL, "this text" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_command load_cmd = {
	.name = "load",
	.operands = "FILE",
	.summary = "Load FILE into a new device, read it back and compare, and report.\n",
	.shorts = "h",
	.opts = load_opts_table,
	.footer = load_footer,
	.brief = "load a file into a new device and report on it",
};

/* A size for --NAME, or a message; 0 or CLI_USAGE. */
static int load_size(const char *v, const char *name, unsigned long long max,
		     unsigned long long *out)
{
	if (!*v || parse_mem_size(v, out) || *out > max) {
		report_error("load", "bad size '%s' for --%s", v, name);
		return CLI_USAGE;
	}
	return 0;
}

/* One option into the load_opts ctx (cli_parse()'s take). */
static int load_take(void *ctx, int key, char *v)
{
	struct load_opts *o = ctx;
	char *end;

	switch (key) {
	case 'j':
		o->json = true;
		return 0;
	case 'a':
		o->algorithm = v;
		return *v ? 0 : CLI_USAGE;
	case 'l':
		if (parse_level(v, &o->level) < 0) {
			report_error("load", "bad level '%s'", v);
			return CLI_USAGE;
		}
		return 0;
	case 'm':
		return load_size(v, "mem-limit", ULLONG_MAX, &o->mem_limit);
	case 'C':
		return cli_take_cluster(v, &o->cluster);
	case 'R':
		errno = 0;
		o->randread = strtoull(v, &end, 10);
		if (!*v || *end || errno || *v == '-') {
			report_error("load", "bad count '%s' for "
				"--randread", v);
			return CLI_USAGE;
		}
		return 0;
	case 'r':
		if (!*v || parse_algo_spec(v, &o->recomp, &o->recomp_level,
					   &o->recomp_dict)) {
			report_error("load", "bad value '%s' for "
				"--recompress, want ALGO[:LEVEL][:dict=FILE]",
				v);
			return CLI_USAGE;
		}
		return 0;
	case 't':
		o->train = UZRAM_DICT_DEFAULT_SIZE;
		if (v && (parse_size(v, &o->train) || !o->train)) {
			report_error("load", "bad size '%s' for "
				"--train-dict", v);
			return CLI_USAGE;
		}
		return 0;
	case 'D':
		o->dict = v;
		return *v ? 0 : CLI_USAGE;
	case 'b':
		o->backing = v;
		return *v ? 0 : CLI_USAGE;
	case 'S':
		o->save = v;
		return *v ? 0 : CLI_USAGE;
	case 'T':
		errno = 0;
		o->threads = strtoull(v, &end, 10);
		if (!*v || *end || errno || *v == '-' ||
		    o->threads > UZRAM_MAX_THREADS) {
			report_error("load", "bad count '%s' for "
				"--threads (0 to %d)", v, UZRAM_MAX_THREADS);
			return CLI_USAGE;
		}
		return 0;
	case 'U':
		o->dedup = true;
		return 0;
	default:
		return 2; /* not in load_opts_table */
	}
}

/* The options and FILE into o: -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, struct load_opts *o)
{
	int r;

	memset(o, 0, sizeof(*o));
	o->algorithm = "lz4";
	r = cli_parse(&load_cmd, argc, argv, load_take, o);
	if (r >= 0)
		return r;
	if (optind + 1 < argc)
		report_error("load", "more than one file ('%s', "
			"'%s')", argv[optind], argv[optind + 1]);
	else if (optind == argc)
		report_error("load", "no file given");
	else
		o->file = argv[optind];
	if (o->file)
		return -1;
	fprintf(stderr, "see `uzram load --help`\n");
	return 2;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of the whole process: its worker threads count too. */
static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The library's message names the failing offset; fall back on ours. */
static void fail_io(const char *what, const char *file, uint64_t off, int ret)
{
	if (*cli_lib_error())
		report_error("load", "cannot %s %s: %s", what, file,
			cli_lib_error());
	else
		report_error("load", "cannot %s %s: %s at offset %llu",
			what, file, uzram_strerror(ret),
			(unsigned long long)off);
}

/* Whether a[0..n) differs from b (zeros if b is NULL); where, in *at. */
static bool diff_at(const unsigned char *a, const unsigned char *b, size_t n,
		    size_t *at)
{
	if (b && !memcmp(a, b, n))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (a[i] != (b ? b[i] : 0)) {
			*at = i;
			return true;
		}
	}
	return false;
}

/*
 * Time o->randread reads of one 4 KiB page each at random page offsets:
 * the cost a small random read pays for the cluster size.
 */
static int randread(const struct load_opts *o, struct uzram *dev,
		    unsigned char *buf, struct load_result *r)
{
	uint64_t pages = r->dev_size / UZRAM_PAGE_SIZE, x = 0x9e3779b97f4a7c15ull;
	double t = now();

	for (unsigned long long i = 0; i < o->randread; i++) {
		uint64_t off;
		int ret;

		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		off = (x * 2685821657736338717ull >> 11) % pages *
		      UZRAM_PAGE_SIZE;
		ret = uzram_read(dev, buf, UZRAM_PAGE_SIZE, off);
		if (ret) {
			fail_io("read back", o->file, off, ret);
			return ret;
		}
	}
	r->randread_s = now() - t;
	return 0;
}

/*
 * Read the whole device back and compare it with map[0..len) and zeros
 * past it; reads are timed into r->read_s, a mismatch noted in r.
 */
static int verify(const struct load_opts *o, struct uzram *dev,
		  const unsigned char *map, uint64_t len, unsigned char *buf,
		  struct load_result *r)
{
	size_t at;
	double t;
	int ret;

	r->match = true;
	r->read_s = 0;
	for (uint64_t off = 0; off < r->dev_size; off += CHUNK) {
		size_t n = r->dev_size - off < CHUNK ?
			   (size_t)(r->dev_size - off) : CHUNK;
		size_t in_file = off >= len ? 0 :
				 len - off < n ? (size_t)(len - off) : n;

		t = now();
		ret = uzram_read(dev, buf, n, off);
		r->read_s += now() - t;
		if (ret) {
			fail_io("read back", o->file, off, ret);
			return ret;
		}
		if (r->match && diff_at(buf, map + off, in_file, &at)) {
			r->match = false;
			r->mismatch_at = off + at;
		} else if (r->match &&
			   diff_at(buf + in_file, NULL, n - in_file, &at)) {
			r->match = false;
			r->mismatch_at = off + in_file + at;
		}
	}
	return 0;
}

/*
 * --save: save the device to o->save (timed), open the image in a second
 * device (timed) and check every byte of that one too.
 */
static int save_and_reopen(const struct load_opts *o, struct uzram *dev,
			   const unsigned char *map, uint64_t len,
			   unsigned char *buf, struct load_result *r)
{
	struct uzram_config cfg;
	struct uzram *back = NULL;
	struct uzram_stats st;
	struct stat sb;
	double t = now(), read_s = r->read_s;
	int ret = uzram_save(dev, o->save, 0);

	r->save_s = now() - t;
	if (ret) {
		report_error("load", "--save: %s", cli_lib_error());
		return ret;
	}
	if (stat(o->save, &sb) == 0)
		r->image_size = (uint64_t)sb.st_size;
	uzram_config_init(&cfg);
	cfg.image = o->save;
	cfg.dedup = o->dedup;
	t = now();
	ret = uzram_open(&cfg, &back);
	r->open_s = now() - t;
	if (ret) {
		report_error("load", "cannot open the image: %s",
			cli_lib_error());
		return ret;
	}
	if (uzram_stats(back, &st, sizeof st) == 0)
		r->mem_opened = st.mem_used_total;
	ret = verify(o, back, map, len, buf, r);
	r->read_s = read_s;
	uzram_close(back);
	return ret;
}

/* The compressed bytes and memory a step starts from. */
static void before(struct uzram *dev, uint64_t *compr, uint64_t *mem)
{
	struct uzram_stats st;

	if (uzram_stats(dev, &st, sizeof st) == 0) {
		*compr = st.compr_data_size;
		*mem = st.mem_used_total;
	}
}

/* Re-encode what is stored with o->recomp, then compact; timed together. */
static int recompress(const struct load_opts *o, struct uzram *dev,
		      struct load_result *r)
{
	double t;
	long n;
	int prio;

	before(dev, &r->compr_before, &r->mem_before);
	prio = uzram_add_recomp_algorithm(dev, o->recomp, o->recomp_level);
	if (prio >= 0 && o->recomp_dict) {
		void *d;
		size_t len;
		int ret = read_dict("load", o->recomp_dict, &d, &len);

		if (ret)
			return ret;
		ret = uzram_set_dictionary(dev, prio, d, len, 0);
		free(d);
		if (ret)
			prio = ret;
	}
	if (prio < 0) {
		report_error("load", "--recompress: %s",
			cli_lib_error());
		return prio;
	}
	t = now();
	n = uzram_recompress(dev, prio, 0, 0);
	if (n >= 0)
		n = uzram_compact(dev);
	r->recomp_s = now() - t;
	if (n < 0) {
		report_error("load", "recompress: %s",
			cli_lib_error());
		return (int)n;
	}
	return 0;
}

/*
 * Train a dictionary for the device's algorithm and re-encode what it made
 * with it, then compact; timed together.
 */
static int train(const struct load_opts *o, struct uzram *dev,
		 struct load_result *r)
{
	double t;
	long n;
	int ret;

	before(dev, &r->train_compr_before, &r->train_mem_before);
	t = now();
	ret = uzram_train_dictionary(dev, 0, (size_t)o->train,
				     UZRAM_DICT_REENCODE, &r->train);
	n = ret < 0 ? ret : uzram_compact(dev);
	r->train_s = now() - t;
	if (n < 0) {
		report_error("load", "--train-dict: %s",
			cli_lib_error());
		return (int)n;
	}
	if (!r->train.kept)
		report_error("load", "--train-dict: %s",
			cli_lib_error());
	return 0;
}

/* Write map[0..len) to a fresh device, read it back and compare. */
/* A device for len bytes of o->file, as o says; 0 or a negative errno. */
static int open_device(const struct load_opts *o, uint64_t len,
		       struct uzram **dev)
{
	struct uzram_config cfg;
	void *dict = NULL;
	int ret;

	uzram_config_init(&cfg);
	cfg.size = len;
	cfg.algorithm = o->algorithm;
	cfg.level = o->level;
	cfg.mem_limit = o->mem_limit;
	cfg.cluster_size = (uint32_t)o->cluster;
	cfg.threads = (uint32_t)o->threads;
	cfg.dedup = o->dedup;
	if (o->dict) {
		ret = read_dict("load", o->dict, &dict, &cfg.dict_size);
		if (ret)
			return ret;
		cfg.dict = dict;
	}
	cfg.backing = o->backing;
	ret = uzram_open(&cfg, dev);
	free(dict);
	if (ret)
		report_error("load", "cannot open a device for %s: %s",
			o->file, cli_lib_error());
	return ret;
}

/* The whole file into dev, CHUNK bytes a write, timed. */
static int store(const struct load_opts *o, struct uzram *dev,
		 const unsigned char *map, uint64_t len, struct load_result *r)
{
	double t = now(), cpu = cpu_now();
	int ret;

	for (uint64_t off = 0; off < len; off += CHUNK) {
		size_t n = len - off < CHUNK ? (size_t)(len - off) : CHUNK;

		ret = uzram_write(dev, map + off, n, off);
		if (ret) {
			fail_io("store", o->file, off, ret);
			return ret;
		}
	}
	r->write_s = now() - t;
	r->write_cpu_s = cpu_now() - cpu;
	return 0;
}

/* --backing: everything written back, timed. */
static int write_back(struct uzram *dev, struct load_result *r)
{
	double t = now();
	long n = uzram_writeback(dev, 0, 0, UINT64_MAX, 0);

	r->wb_s = now() - t;
	if (n < 0) {
		report_error("load", "writeback: %s",
			cli_lib_error());
		return (int)n;
	}
	return 0;
}

static int load(const struct load_opts *o, const unsigned char *map,
		uint64_t len, struct load_result *r)
{
	struct uzram *dev = NULL;
	unsigned char *buf;
	int ret;

	buf = malloc(CHUNK);
	if (!buf) {
		report_error("load", "out of memory");
		return -ENOMEM;
	}
	ret = open_device(o, len, &dev);
	if (ret)
		goto out;
	r->file_size = len;
	r->dev_size = uzram_size(dev);
	r->cluster_size = uzram_cluster_size(dev);

	ret = store(o, dev, map, len, r);
	if (!ret && o->train)
		ret = train(o, dev, r);
	if (!ret && o->recomp)
		ret = recompress(o, dev, r);
	if (!ret && o->backing)
		ret = write_back(dev, r);
	if (!ret)
		ret = verify(o, dev, map, len, buf, r);
	if (!ret)
		ret = randread(o, dev, buf, r);
	if (ret)
		goto out;
	ret = uzram_stats(dev, &r->st, sizeof(r->st));
	if (ret) {
		report_error("load", "cannot read the counters: %s",
			cli_lib_error());
		goto out;
	}
	if (o->save && r->match)
		ret = save_and_reopen(o, dev, map, len, buf, r);
out:
	uzram_close(dev);
	free(buf);
	return ret;
}

int cmd_load(int argc, char **argv)
{
	struct load_opts o;
	struct load_result r;
	struct stat sb;
	void *map;
	int fd, ret;

	ret = parse_args(argc, argv, &o);
	if (ret >= 0)
		return ret;
	/* O_NONBLOCK: a FIFO with no writer must not hang us before the
	 * check below refuses it */
	fd = open(o.file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		report_error("load", "cannot open %s: %s", o.file,
			strerror(errno));
		return 1;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		report_error("load", "%s is not a regular file",
			o.file);
		close(fd);
		return 1;
	}
	if (sb.st_size == 0) {
		report_error("load", "%s is empty", o.file);
		close(fd);
		return 1;
	}
	if ((uint64_t)sb.st_size > SIZE_MAX) {
		report_error("load", "%s is too large to map", o.file);
		close(fd);
		return 1;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ,
		   MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		report_error("load", "cannot map %s: %s", o.file,
			strerror(errno));
		return 1;
	}

	memset(&r, 0, sizeof(r));
	ret = load(&o, map, (uint64_t)sb.st_size, &r);
	munmap(map, (size_t)sb.st_size);
	if (ret)
		return 1;
	if (o.json)
		print_json(&o, &r);
	else
		print_table(&o, &r);
	if (!r.match) {
		report_error("load", "%s: data read back differs at "
			"byte %llu", o.file,
			(unsigned long long)r.mismatch_at);
		return 1;
	}
	return 0;
}
