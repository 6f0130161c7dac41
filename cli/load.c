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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uzram.h"
#include "cli.h"

#define CHUNK (1u << 20)
#define MIB (1024.0 * 1024.0)

struct load_opts {
	const char *file;
	const char *algorithm;
	int level;
	unsigned long long mem_limit;
	unsigned long long cluster;
	unsigned long long randread; /* random 4 KiB reads to time */
	const char *recomp;          /* secondary algorithm, or NULL */
	const char *backing;         /* backing store, or NULL */
	int recomp_level;
	const char *dict;            /* dictionary file for the algorithm */
	const char *recomp_dict;     /* and for the secondary one */
	unsigned long long train;    /* train a dictionary of this size */
	const char *save;            /* image to save to, or NULL */
	bool json;
	bool dedup;
};

struct load_result {
	uint64_t file_size;
	uint64_t dev_size;
	uint32_t cluster_size;
	struct uzram_stats st;
	double write_s, read_s, randread_s, recomp_s, train_s, wb_s;
	uint64_t compr_before, mem_before; /* before recompression */
	uint64_t train_compr_before, train_mem_before; /* before training */
	struct uzram_train_report train;
	bool match;
	uint64_t mismatch_at; /* first differing byte when !match */
	/* --save: the image's size, save and open times, the memory of the
	 * device opened from it, and its own read back */
	uint64_t image_size, mem_opened;
	double save_s, open_s;
};

static void load_usage(FILE *f)
{
	fprintf(f, "usage: uzram load FILE [--algorithm A] [--level N] "
		   "[--json] [--mem-limit SIZE]\n"
		   "                 [--cluster SIZE] [--randread N] "
		   "[--recompress ALGO[:LEVEL][:dict=FILE]]\n"
		   "                 [--dict FILE] [--train-dict[=SIZE]] "
		   "[--save IMAGE]\n"
		   "                 [--backing FILE|DEVICE|NBD-URI] [--dedup]\n"
		   "  --save: save the device to IMAGE (uzram_save), open it "
		   "again and check that too\n"
		   "algorithms: %s\n", uzram_algorithms());
}

/* "--name VALUE" or "--name=VALUE"; advances *i past what it used. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, name, n))
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		fprintf(stderr, "uzram load: %s needs a value\n", name);
		return "";
	}
	return argv[++*i];
}

static int parse_args(int argc, char **argv, struct load_opts *o)
{
	const char *v;

	memset(o, 0, sizeof(*o));
	o->algorithm = "lz4";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			load_usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--dedup")) {
			o->dedup = true;
		} else if ((v = opt_value(argc, argv, &i, "--algorithm"))) {
			if (!*v)
				return -EINVAL;
			o->algorithm = v;
		} else if ((v = opt_value(argc, argv, &i, "--level"))) {
			char *end;
			long l;

			errno = 0;
			l = strtol(v, &end, 10);
			if (!*v || *end || errno || l < INT_MIN || l > INT_MAX) {
				fprintf(stderr, "uzram load: bad level '%s'\n",
					v);
				return -EINVAL;
			}
			o->level = (int)l;
		} else if ((v = opt_value(argc, argv, &i, "--mem-limit"))) {
			if (!*v || parse_size(v, &o->mem_limit)) {
				fprintf(stderr,
					"uzram load: bad size '%s' for "
					"--mem-limit\n", v);
				return -EINVAL;
			}
		} else if ((v = opt_value(argc, argv, &i, "--cluster"))) {
			if (!*v || parse_size(v, &o->cluster) ||
			    o->cluster > UINT32_MAX) {
				fprintf(stderr,
					"uzram load: bad size '%s' for "
					"--cluster\n", v);
				return -EINVAL;
			}
		} else if ((v = opt_value(argc, argv, &i, "--randread"))) {
			char *end;

			errno = 0;
			o->randread = strtoull(v, &end, 10);
			if (!*v || *end || errno || *v == '-') {
				fprintf(stderr, "uzram load: bad count '%s' "
					"for --randread\n", v);
				return -EINVAL;
			}
		} else if ((v = opt_value(argc, argv, &i, "--backing"))) {
			if (!*v)
				return -EINVAL;
			o->backing = v;
		} else if ((v = opt_value(argc, argv, &i, "--recompress"))) {
			/* v points into argv[i], which is ours to cut */
			if (!*v || parse_algo_spec(argv[i] + (v - argv[i]),
						   &o->recomp,
						   &o->recomp_level,
						   &o->recomp_dict)) {
				fprintf(stderr, "uzram load: bad value '%s' "
					"for --recompress, want "
					"ALGO[:LEVEL][:dict=FILE]\n", v);
				return -EINVAL;
			}
		} else if ((v = opt_value(argc, argv, &i, "--dict"))) {
			if (!*v)
				return -EINVAL;
			o->dict = v;
		} else if (!strcmp(a, "--train-dict")) {
			o->train = UZRAM_DICT_DEFAULT_SIZE;
		} else if (!strncmp(a, "--train-dict=", 13)) {
			if (parse_size(a + 13, &o->train) || !o->train) {
				fprintf(stderr, "uzram load: bad size '%s' for "
					"--train-dict\n", a + 13);
				return -EINVAL;
			}
		} else if ((v = opt_value(argc, argv, &i, "--save"))) {
			if (!*v)
				return -EINVAL;
			o->save = v;
		} else if (a[0] == '-' && a[1] != '\0') {
			fprintf(stderr, "uzram load: unknown option '%s'\n", a);
			return -EINVAL;
		} else if (o->file) {
			fprintf(stderr, "uzram load: more than one file ('%s', "
				"'%s')\n", o->file, a);
			return -EINVAL;
		} else {
			o->file = a;
		}
	}
	if (!o->file) {
		fprintf(stderr, "uzram load: no file given\n");
		return -EINVAL;
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The library's message names the failing offset; fall back on ours. */
static void fail_io(const char *what, const char *file, uint64_t off, int ret)
{
	if (*uzram_last_error())
		fprintf(stderr, "uzram load: cannot %s %s: %s\n", what, file,
			uzram_last_error());
	else
		fprintf(stderr, "uzram load: cannot %s %s: %s at offset %llu\n",
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
		fprintf(stderr, "uzram load: --save: %s\n", uzram_last_error());
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
		fprintf(stderr, "uzram load: cannot open the image: %s\n",
			uzram_last_error());
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
		fprintf(stderr, "uzram load: --recompress: %s\n",
			uzram_last_error());
		return prio;
	}
	t = now();
	n = uzram_recompress(dev, prio, 0, 0);
	if (n >= 0)
		n = uzram_compact(dev);
	r->recomp_s = now() - t;
	if (n < 0) {
		fprintf(stderr, "uzram load: recompress: %s\n",
			uzram_last_error());
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
		fprintf(stderr, "uzram load: --train-dict: %s\n",
			uzram_last_error());
		return (int)n;
	}
	if (!r->train.kept)
		fprintf(stderr, "uzram load: --train-dict: %s\n",
			uzram_last_error());
	return 0;
}

/* Write map[0..len) to a fresh device, read it back and compare. */
static int load(const struct load_opts *o, const unsigned char *map,
		uint64_t len, struct load_result *r)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;
	unsigned char *buf;
	void *dict = NULL;
	uint64_t off;
	double t;
	int ret;

	buf = malloc(CHUNK);
	if (!buf) {
		fprintf(stderr, "uzram load: out of memory\n");
		return -ENOMEM;
	}
	uzram_config_init(&cfg);
	cfg.size = len;
	cfg.algorithm = o->algorithm;
	cfg.level = o->level;
	cfg.mem_limit = o->mem_limit;
	cfg.cluster_size = (uint32_t)o->cluster;
	if (o->dict) {
		ret = read_dict("load", o->dict, &dict, &cfg.dict_size);
		if (ret)
			goto out;
		cfg.dict = dict;
	}
	cfg.backing = o->backing;
	cfg.dedup = o->dedup;
	ret = uzram_open(&cfg, &dev);
	free(dict);
	if (ret) {
		fprintf(stderr, "uzram load: cannot open a device for %s: %s\n",
			o->file, uzram_last_error());
		goto out;
	}
	r->file_size = len;
	r->dev_size = uzram_size(dev);
	r->cluster_size = uzram_cluster_size(dev);

	t = now();
	for (off = 0; off < len; off += CHUNK) {
		size_t n = len - off < CHUNK ? (size_t)(len - off) : CHUNK;

		ret = uzram_write(dev, map + off, n, off);
		if (ret) {
			fail_io("store", o->file, off, ret);
			goto out;
		}
	}
	r->write_s = now() - t;

	if (o->train) {
		ret = train(o, dev, r);
		if (ret)
			goto out;
	}
	if (o->recomp) {
		ret = recompress(o, dev, r);
		if (ret)
			goto out;
	}
	if (o->backing) {
		long n;

		t = now();
		n = uzram_writeback(dev, 0, 0, UINT64_MAX, 0);
		r->wb_s = now() - t;
		if (n < 0) {
			fprintf(stderr, "uzram load: writeback: %s\n",
				uzram_last_error());
			ret = (int)n;
			goto out;
		}
	}

	ret = verify(o, dev, map, len, buf, r);
	if (ret)
		goto out;
	ret = randread(o, dev, buf, r);
	if (ret)
		goto out;
	ret = uzram_stats(dev, &r->st, sizeof(r->st));
	if (ret) {
		fprintf(stderr, "uzram load: cannot read the counters: %s\n",
			uzram_last_error());
		goto out;
	}
	if (o->save && r->match)
		ret = save_and_reopen(o, dev, map, len, buf, r);
out:
	uzram_close(dev);
	free(buf);
	return ret;
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

static double mb_s(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / s / 1e6 : 0;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_u64(const char *key, uint64_t v)
{
	printf("  \"%s\": %llu,\n", key, (unsigned long long)v);
}

/* A ratio, or null when the denominator is 0 (nothing compressed). */
static void json_ratio(const char *key, uint64_t a, uint64_t b)
{
	if (b)
		printf("  \"%s\": %.4f,\n", key, ratio(a, b));
	else
		printf("  \"%s\": null,\n", key);
}

static void print_json(const struct load_opts *o, const struct load_result *r)
{
	const struct uzram_stats *st = &r->st;

	printf("{\n  \"file\": ");
	json_string(o->file);
	printf(",\n  \"algorithm\": ");
	json_string(o->algorithm);
	printf(",\n  \"level\": %d,\n", o->level);
	json_u64("mem_limit", o->mem_limit);
	printf("  \"cluster_size\": %u,\n", (unsigned)r->cluster_size);
	json_u64("file_size", r->file_size);
	json_u64("disksize", st->disksize);
	json_u64("orig_data_size", st->orig_data_size);
	json_u64("compr_data_size", st->compr_data_size);
	json_u64("mem_used_total", st->mem_used_total);
	json_u64("mem_used_max", st->mem_used_max);
	json_ratio("ratio_compr", st->orig_data_size, st->compr_data_size);
	json_ratio("ratio_mem", st->orig_data_size, st->mem_used_total);
	json_u64("same_pages", st->same_pages);
	json_u64("huge_pages", st->huge_pages);
	json_u64("pages_stored", st->pages_stored);
	json_u64("table_bytes", st->table_bytes);
	json_u64("pages_deduped", st->pages_deduped);
	json_u64("dedup_bytes_saved", st->dedup_bytes_saved);
	json_u64("dedup_index_bytes", st->dedup_index_bytes);
	printf("  \"recompress\": ");
	if (o->recomp) {
		json_string(o->recomp);
		printf(",\n  \"recompress_level\": %d,\n", o->recomp_level);
		printf("  \"recompress_seconds\": %.6f,\n", r->recomp_s);
		json_u64("pages_recompressed", st->pages_recompressed);
		json_u64("compr_data_size_before", r->compr_before);
		json_u64("mem_used_before", r->mem_before);
	} else {
		printf("null,\n");
	}
	printf("  \"dict\": ");
	if (o->dict)
		json_string(o->dict);
	else
		printf("null");
	printf(",\n  \"train_dict\": ");
	if (o->train) {
		const struct uzram_train_report *t = &r->train;

		printf("{\"kept\": %s, \"dict_size\": %llu, "
		       "\"train_bytes\": %llu, \"test_bytes\": %llu, "
		       "\"bytes_without\": %llu, \"bytes_with\": %llu, "
		       "\"train_us\": %llu, \"pages_reencoded\": %llu, "
		       "\"seconds\": %.6f, \"compr_data_size_before\": %llu, "
		       "\"mem_used_before\": %llu},\n",
		       t->kept ? "true" : "false",
		       (unsigned long long)t->dict_size,
		       (unsigned long long)t->train_bytes,
		       (unsigned long long)t->test_bytes,
		       (unsigned long long)t->bytes_without,
		       (unsigned long long)t->bytes_with,
		       (unsigned long long)t->train_us,
		       (unsigned long long)t->pages_reencoded, r->train_s,
		       (unsigned long long)r->train_compr_before,
		       (unsigned long long)r->train_mem_before);
	} else {
		printf("null,\n");
	}
	printf("  \"backing\": ");
	if (o->backing) {
		json_string(o->backing);
		printf(",\n  \"writeback_seconds\": %.6f,\n", r->wb_s);
		json_u64("bd_count", st->bd_count);
		json_u64("bd_bytes", st->bd_bytes);
		json_u64("bd_space", st->bd_space);
		json_u64("bd_reads", st->bd_reads);
	} else {
		printf("null,\n");
	}
	printf("  \"write_seconds\": %.6f,\n", r->write_s);
	printf("  \"read_seconds\": %.6f,\n", r->read_s);
	printf("  \"write_mb_s\": %.1f,\n", mb_s(r->file_size, r->write_s));
	printf("  \"read_mb_s\": %.1f,\n", mb_s(r->dev_size, r->read_s));
	json_u64("randread_4k", o->randread);
	if (o->randread)
		printf("  \"randread_4k_us\": %.3f,\n",
		       r->randread_s * 1e6 / (double)o->randread);
	else
		printf("  \"randread_4k_us\": null,\n");
	printf("  \"image\": ");
	if (o->save) {
		json_string(o->save);
		printf(",\n");
		json_u64("image_size", r->image_size);
		printf("  \"save_seconds\": %.6f,\n", r->save_s);
		printf("  \"open_seconds\": %.6f,\n", r->open_s);
		json_u64("mem_used_opened", r->mem_opened);
	} else {
		printf("null,\n");
	}
	if (r->match)
		printf("  \"first_mismatch\": null,\n");
	else
		json_u64("first_mismatch", r->mismatch_at);
	printf("  \"round_trip\": \"%s\"\n}\n", r->match ? "ok" : "mismatch");
}

static void row_size(const char *name, uint64_t v)
{
	printf("  %-18s %15llu bytes %12.2f MiB\n", name,
	       (unsigned long long)v, (double)v / MIB);
}

static void row_count(const char *name, uint64_t v)
{
	printf("  %-18s %15llu\n", name, (unsigned long long)v);
}

static void row_ratio(const char *name, uint64_t a, uint64_t b)
{
	if (b)
		printf("  %-18s %15.3f\n", name, ratio(a, b));
	else
		printf("  %-18s %15s\n", name, "-");
}

static void print_table(const struct load_opts *o, const struct load_result *r)
{
	const struct uzram_stats *st = &r->st;

	printf("uzram load %s\n", o->file);
	printf("  %-18s %15s", "algorithm", o->algorithm);
	if (o->level)
		printf(" level %d\n", o->level);
	else
		printf(" (default level)\n");
	if (o->mem_limit)
		row_size("mem_limit", o->mem_limit);
	row_count("cluster_size", r->cluster_size);
	row_size("file size", r->file_size);
	row_size("orig_data_size", st->orig_data_size);
	row_size("compr_data_size", st->compr_data_size);
	row_size("mem_used_total", st->mem_used_total);
	row_size("mem_used_max", st->mem_used_max);
	row_ratio("ratio orig/compr", st->orig_data_size, st->compr_data_size);
	row_ratio("ratio orig/mem", st->orig_data_size, st->mem_used_total);
	row_count("same_pages", st->same_pages);
	row_count("huge_pages", st->huge_pages);
	row_count("pages_stored", st->pages_stored);
	if (o->dedup) {
		row_count("pages_deduped", st->pages_deduped);
		row_size("dedup_bytes_saved", st->dedup_bytes_saved);
		row_size("dedup_index_bytes", st->dedup_index_bytes);
	}
	printf("  %-18s %15.1f MB/s  (%.3f s)\n", "write",
	       mb_s(r->file_size, r->write_s), r->write_s);
	if (o->recomp) {
		printf("  %-18s %15s level %d: %llu pages in %.3f s\n",
		       "recompress", o->recomp, o->recomp_level,
		       (unsigned long long)st->pages_recompressed, r->recomp_s);
		row_size("compr before", r->compr_before);
		row_size("mem_used before", r->mem_before);
	}
	if (o->dict)
		printf("  %-18s %15s\n", "dictionary", o->dict);
	if (o->train) {
		const struct uzram_train_report *t = &r->train;

		printf("  %-18s %15s %llu bytes: %llu -> %llu bytes on the "
		       "test sample, %llu pages re-encoded, %.3f s\n",
		       "train-dict", t->kept ? "kept" : "not kept",
		       (unsigned long long)t->dict_size,
		       (unsigned long long)t->bytes_without,
		       (unsigned long long)t->bytes_with,
		       (unsigned long long)t->pages_reencoded, r->train_s);
		row_size("compr before", r->train_compr_before);
		row_size("mem_used before", r->train_mem_before);
	}
	if (o->backing) {
		printf("  %-18s %15.1f MB/s  (%.3f s)\n", "writeback",
		       mb_s(r->file_size, r->wb_s), r->wb_s);
		row_count("bd_count", st->bd_count);
		row_size("bd_bytes", st->bd_bytes);
		row_size("bd_space", st->bd_space);
	}
	printf("  %-18s %15.1f MB/s  (%.3f s)\n", "read",
	       mb_s(r->dev_size, r->read_s), r->read_s);
	if (o->randread)
		printf("  %-18s %15.3f us   (%llu reads)\n", "random 4K read",
		       r->randread_s * 1e6 / (double)o->randread, o->randread);
	if (o->save) {
		row_size("image size", r->image_size);
		printf("  %-18s %15.1f MB/s  (%.3f s)\n", "save",
		       mb_s(r->image_size, r->save_s), r->save_s);
		printf("  %-18s %15.1f MB/s  (%.3f s)\n", "open image",
		       mb_s(r->image_size, r->open_s), r->open_s);
		row_size("mem_used opened", r->mem_opened);
	}
	if (r->match)
		printf("  %-18s %15s\n", "round trip", "ok");
	else
		printf("  %-18s %15s at byte %llu\n", "round trip", "MISMATCH",
		       (unsigned long long)r->mismatch_at);
}

int cmd_load(int argc, char **argv)
{
	struct load_opts o;
	struct load_result r;
	struct stat sb;
	void *map;
	int fd, ret;

	if (parse_args(argc, argv, &o)) {
		load_usage(stderr);
		return 2;
	}
	fd = open(o.file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "uzram load: cannot open %s: %s\n", o.file,
			strerror(errno));
		return 1;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		fprintf(stderr, "uzram load: %s is not a regular file\n",
			o.file);
		close(fd);
		return 1;
	}
	if (sb.st_size == 0) {
		fprintf(stderr, "uzram load: %s is empty\n", o.file);
		close(fd);
		return 1;
	}
	if ((uint64_t)sb.st_size > SIZE_MAX) {
		fprintf(stderr, "uzram load: %s is too large to map\n", o.file);
		close(fd);
		return 1;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ,
		   MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		fprintf(stderr, "uzram load: cannot map %s: %s\n", o.file,
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
		fprintf(stderr, "uzram load: %s: data read back differs at "
			"byte %llu\n", o.file,
			(unsigned long long)r.mismatch_at);
		return 1;
	}
	return 0;
}
