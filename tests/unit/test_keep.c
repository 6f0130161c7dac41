// SPDX-License-Identifier: MIT
/*
 * test_keep.c - a kept store (uzram_config.keep_fd, doc/keep.md): a device
 * in a memfd that a new process adopts after the old one is killed.
 *
 *  - adopt_same: a child writes every kind of cluster (hole, zero,
 *    same-filled, compressed, raw) and is SIGKILLed; the parent adopts the
 *    store: every byte and the figures are the child's, and the adopted
 *    device takes writes, discards and compaction;
 *  - kill_anywhere: the randomized model test: children that adopt the store
 *    and rewrite and discard random clusters are SIGKILLed after a random
 *    delay (during the adoption itself, or at any point of a write); after
 *    each kill the op in flight is sent again (as RECOVERY_REISSUE does)
 *    and every cluster holds what the model says;
 *  - refused: a flipped header byte, a file that is no store, a slot naming
 *    a handle that holds no object, a size that differs (-EUCLEAN, -EINVAL),
 *    and the features a kept store does not take (-EOPNOTSUPP); a file
 *    sized but without its header yet (a kill at the creation) is new;
 *  - torn: a slot whose writer was killed between its two stores;
 *  - pages_back: freeing gives the memfd's pages back (holes punched).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define PG 4096u
#define NCL 2048u                       /* clusters of the device */
#define TABLE_OFF (UINT64_C(2) << 20)   /* keep.c's layout */

TU_CORPUS_MIX(4 << 20, 4 << 20)

/* The bytes of cluster idx at version ver (0: never written, zeros). */
static void gen(uint64_t idx, uint64_t ver, uint8_t *p)
{
	uint64_t s = ver * 0x9e3779b97f4a7c15ull + idx + 1;

	memset(p, 0, PG);
	if (!ver)
		return;
	switch (tu_rand(&s) % 5) {
	case 0:                         /* zeros */
		break;
	case 1:                         /* one 8-byte value repeated */
		for (unsigned i = 0; i < PG; i += 8)
			memcpy(p + i, &s, 8);
		break;
	case 2:                         /* random: kept raw (huge) */
		for (unsigned i = 0; i < PG; i += 8) {
			uint64_t r = tu_rand(&s);

			memcpy(p + i, &r, 8);
		}
		break;
	default:                        /* real data, compressed */
		memcpy(p, corpus + (tu_rand(&s) % (corpus_len / PG)) * PG, PG);
		memcpy(p, &ver, sizeof ver);
		break;
	}
}

static int new_memfd(void)
{
	int fd = memfd_create("uzram-test-keep", MFD_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

static int keep_open(int fd, uint64_t size, struct uzram **dev)
{
	struct uzram_config cfg;

	uzram_config_init(&cfg);
	cfg.size = size;
	cfg.keep_fd = fd;
	cfg.threads = tu_threads(0);
	return uzram_open(&cfg, dev);
}

static struct uzram *keep_adopt(int fd)
{
	struct uzram *dev = NULL;
	/* the size: a store whose maker died before its header is made anew */
	int r = keep_open(fd, NCL * PG, &dev);

	if (r)
		fail_msg("adopt: %d (%s)", r, uzram_last_error());
	return dev;
}

/* Every cluster against ver[] (and alt[], a second version allowed). */
static void check_all(struct uzram *dev, const uint64_t *ver, uint64_t *alt)
{
	uint8_t got[PG], want[PG];

	for (uint64_t i = 0; i < NCL; i++) {
		assert_int_equal(uzram_read(dev, got, PG, i * PG), 0);
		gen(i, ver[i], want);
		if (!memcmp(got, want, PG))
			continue;
		if (alt && alt[i] != UINT64_MAX) {
			gen(i, alt[i], want);
			if (!memcmp(got, want, PG))
				continue;
		}
		fail_msg("cluster %llu: not version %llu%s",
			 (unsigned long long)i, (unsigned long long)ver[i],
			 alt && alt[i] != UINT64_MAX ? " nor the one in flight" : "");
	}
}

/* ---- adopt_same ---- */

static void adopt_same(void **state)
{
	struct uzram_stats *before = mmap(NULL, sizeof *before,
					  PROT_READ | PROT_WRITE,
					  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t ver[NCL];
	struct uzram_stats after;
	struct uzram_keep_info info;
	struct uzram *dev;
	int fd = new_memfd(), status;
	uint8_t buf[PG];
	pid_t pid;

	(void)state;
	assert_true(before != MAP_FAILED);
	for (uint64_t i = 0; i < NCL; i++)
		ver[i] = i % 7 ? i + 1 : 0;      /* some holes */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (keep_open(fd, NCL * PG, &dev))
			_exit(2);
		for (uint64_t i = 0; i < NCL; i++) {
			if (!ver[i])
				continue;
			gen(i, ver[i], buf);
			if (uzram_write(dev, buf, PG, i * PG))
				_exit(3);
		}
		uzram_stats(dev, before, sizeof *before);
		raise(SIGKILL);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	dev = keep_adopt(fd);
	assert_int_equal(uzram_keep_info(dev, &info), 0);
	assert_int_equal(info.kept, 1);
	assert_int_equal(info.adopted, 1);
	assert_int_equal(info.torn, 0);
	check_all(dev, ver, NULL);
	uzram_stats(dev, &after, sizeof after);
	assert_int_equal(after.pages_stored, before->pages_stored);
	assert_int_equal(after.compr_data_size, before->compr_data_size);
	assert_int_equal(after.same_pages, before->same_pages);
	assert_int_equal(after.huge_pages, before->huge_pages);
	assert_true(after.mem_used_total <= before->mem_used_total);
	assert_true(after.mem_used_total >= after.compr_data_size);

	/* the adopted device is a device: rewrite, discard, compact */
	for (uint64_t i = 0; i < NCL; i += 3) {
		ver[i] = NCL + i + 1;
		gen(i, ver[i], buf);
		assert_int_equal(uzram_write(dev, buf, PG, i * PG), 0);
	}
	for (uint64_t i = 1; i < NCL; i += 5) {
		ver[i] = 0;
		assert_int_equal(uzram_discard(dev, PG, i * PG), 0);
	}
	check_all(dev, ver, NULL);
	uzram_compact(dev);
	check_all(dev, ver, NULL);
	uzram_close(dev);
	/* and adopting again (a clean close leaves the store) */
	dev = keep_adopt(fd);
	check_all(dev, ver, NULL);
	uzram_close(dev);
	close(fd);
	munmap(before, sizeof *before);
}

/* ---- kill_anywhere ---- */

struct progress {
	_Atomic uint64_t started;   /* op number + 1 */
	_Atomic uint64_t done;
};

struct op {
	uint64_t idx;
	bool discard;
};

static struct op op_at(uint64_t *seed)
{
	uint64_t r = tu_rand(seed);

	return (struct op){ .idx = r % NCL, .discard = (r >> 40) % 8 == 0 };
}

/* The child: adopt, then rewrite and discard until killed. */
static void writer(int fd, struct progress *pr, uint64_t seed, uint64_t base)
{
	struct uzram *dev;
	uint8_t buf[PG];

	if (keep_open(fd, NCL * PG, &dev))
		_exit(2);
	for (uint64_t n = 0;; n++) {
		struct op o = op_at(&seed);

		atomic_store(&pr->started, n + 1);
		if (o.discard) {
			if (uzram_discard(dev, PG, o.idx * PG))
				_exit(3);
		} else {
			gen(o.idx, base + n, buf);
			if (uzram_write(dev, buf, PG, o.idx * PG))
				_exit(3);
		}
		atomic_store(&pr->done, n + 1);
	}
}

static void kill_anywhere(void **state)
{
	struct progress *pr = mmap(NULL, sizeof *pr, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	static uint64_t ver[NCL], alt[NCL];
	uint64_t rounds = tu_scaled(24), base = 1, rs = (uint64_t)time(NULL);
	uint64_t torn = 0, adopted = 0;
	int fd = new_memfd();

	(void)state;
	assert_true(pr != MAP_FAILED);
	memset(ver, 0, sizeof ver);
	print_message("seed %llu\n", (unsigned long long)rs);
	for (uint64_t round = 0; round < rounds; round++) {
		uint64_t seed = tu_rand(&rs) | 1, n, s = seed;
		struct uzram_keep_info info;
		struct uzram *dev;
		int status;
		pid_t pid;

		atomic_store(&pr->started, 0);
		atomic_store(&pr->done, 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			writer(fd, pr, seed, base);
		/* 0 to 40 ms: within the adoption, or any point of a write */
		usleep((useconds_t)(tu_rand(&rs) % 40000));
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status))
			fail_msg("the writer exited with %d", WEXITSTATUS(status));

		/* the model: the ops done, and the one in flight, if any */
		n = atomic_load(&pr->done);
		for (uint64_t i = 0; i < n; i++) {
			struct op o = op_at(&s);

			ver[o.idx] = o.discard ? 0 : base + i;
		}
		memset(alt, 0xff, sizeof alt);
		if (atomic_load(&pr->started) > n) {
			struct op o = op_at(&s);

			alt[o.idx] = o.discard ? 0 : base + n;
		}
		dev = keep_adopt(fd);
		assert_int_equal(uzram_keep_info(dev, &info), 0);
		assert_true(info.torn <= 1);
		/*
		 * The op in flight is sent again, as ublk's RECOVERY_REISSUE
		 * does: a slot its kill left torn may hold anything until then
		 * (doc/keep.md); every other cluster must be the model's now.
		 */
		for (uint64_t i = 0; i < NCL; i++) {
			uint8_t buf[PG];

			if (alt[i] == UINT64_MAX)
				continue;
			if (alt[i]) {
				gen(i, alt[i], buf);
				assert_int_equal(uzram_write(dev, buf, PG, i * PG), 0);
			} else {
				assert_int_equal(uzram_discard(dev, PG, i * PG), 0);
			}
			ver[i] = alt[i];
		}
		check_all(dev, ver, NULL);
		torn += info.torn;
		adopted += info.slots;
		uzram_close(dev);
		base += n + 1;
	}
	print_message("%llu rounds, %llu ops, %llu clusters adopted, %llu torn\n",
		      (unsigned long long)rounds, (unsigned long long)base,
		      (unsigned long long)adopted, (unsigned long long)torn);
	close(fd);
	munmap(pr, sizeof *pr);
}

/* ---- refused ---- */

static int open_err(int fd, uint64_t size)
{
	struct uzram *dev = NULL;
	int r = keep_open(fd, size, &dev);

	if (!r)
		uzram_close(dev);
	return r;
}

static void refused(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev;
	int fd = new_memfd(), junk = new_memfd();
	uint8_t buf[PG], b;
	uint64_t val;

	(void)state;
	/* a store holding one compressed cluster, 5 */
	assert_int_equal(keep_open(fd, NCL * PG, &dev), 0);
	memcpy(buf, corpus, PG);
	assert_int_equal(uzram_write(dev, buf, PG, 5 * PG), 0);
	uzram_close(dev);

	/* a size that differs */
	assert_int_equal(open_err(fd, 2 * NCL * PG), -EINVAL);
	assert_non_null(strstr(uzram_last_error(), "bytes"));

	/* a flipped bit in the header */
	assert_int_equal(pread(fd, &b, 1, 24), 1);
	b ^= 4;
	assert_int_equal(pwrite(fd, &b, 1, 24), 1);
	assert_int_equal(open_err(fd, 0), -EUCLEAN);
	assert_non_null(strstr(uzram_last_error(), "checksum"));
	b ^= 4;
	assert_int_equal(pwrite(fd, &b, 1, 24), 1);
	assert_int_equal(open_err(fd, 0), 0);

	/* cluster 5's slot names a handle that holds nothing */
	assert_int_equal(pread(fd, &val, 8, TABLE_OFF + 5 * 16 + 8), 8);
	val = (val & ~0xffffffffull) | ((uint32_t)val + 1000);
	assert_int_equal(pwrite(fd, &val, 8, TABLE_OFF + 5 * 16 + 8), 8);
	assert_int_equal(open_err(fd, 0), -EUCLEAN);
	assert_non_null(strstr(uzram_last_error(), "cluster 5"));

	/* a file that is no store */
	memset(buf, 0x5a, PG);
	assert_int_equal(pwrite(junk, buf, PG, 0), PG);
	assert_int_equal(open_err(junk, 0), -EUCLEAN);
	assert_non_null(strstr(uzram_last_error(), "not a kept store"));

	/* a file sized, its header not yet written (its maker died): new */
	{
		int fresh = new_memfd();

		assert_int_equal(ftruncate(fresh, 1 << 20), 0);
		assert_int_equal(keep_open(fresh, NCL * PG, &dev), 0);
		uzram_close(dev);
		assert_int_equal(open_err(fresh, 0), 0);   /* a store now */
		close(fresh);
	}

	/* what a kept store does not take */
	uzram_config_init(&cfg);
	cfg.size = NCL * PG;
	cfg.keep_fd = new_memfd();
	cfg.dedup = 1;
	assert_int_equal(uzram_open(&cfg, &dev), -EOPNOTSUPP);
	assert_non_null(strstr(uzram_last_error(), "dedup"));
	cfg.dedup = 0;
	cfg.cluster_size = 16384;
	assert_int_equal(uzram_open(&cfg, &dev), -EOPNOTSUPP);
	close(cfg.keep_fd);
	close(junk);
	close(fd);
}

/* ---- torn: a slot the kill caught between its two stores ---- */

static void torn(void **state)
{
	struct uzram_keep_info info;
	struct uzram *dev;
	uint32_t writer = 1u << 31;
	uint64_t val, ver[NCL] = { 0 };
	int fd = new_memfd();
	uint8_t buf[PG];

	(void)state;
	assert_int_equal(keep_open(fd, NCL * PG, &dev), 0);
	for (uint64_t i = 3; i < 8; i++) {
		ver[i] = 3 + 5 * i;     /* kinds: see gen() */
		gen(i, ver[i], buf);
		assert_int_equal(uzram_write(dev, buf, PG, i * PG), 0);
	}
	uzram_close(dev);
	/* cluster 5: locked by a writer, its value whole: kept */
	assert_int_equal(pwrite(fd, &writer, 4, TABLE_OFF + 5 * 16), 4);
	dev = keep_adopt(fd);
	assert_int_equal(uzram_keep_info(dev, &info), 0);
	assert_int_equal(info.torn, 1);
	check_all(dev, ver, NULL);
	uzram_close(dev);
	/* cluster 6: locked, and its value names no object: a hole */
	assert_int_equal(pread(fd, &val, 8, TABLE_OFF + 6 * 16 + 8), 8);
	val ^= 0x5a5a5a5aull;
	assert_int_equal(pwrite(fd, &val, 8, TABLE_OFF + 6 * 16 + 8), 8);
	assert_int_equal(pwrite(fd, &writer, 4, TABLE_OFF + 6 * 16), 4);
	dev = keep_adopt(fd);
	assert_int_equal(uzram_keep_info(dev, &info), 0);
	assert_int_equal(info.torn, 1);
	ver[6] = 0;
	check_all(dev, ver, NULL);
	uzram_close(dev);
	close(fd);
}

/* ---- pages_back ---- */

static void pages_back(void **state)
{
	struct uzram *dev;
	struct stat st;
	uint64_t full;
	int fd = new_memfd();
	uint8_t buf[PG];

	(void)state;
	assert_int_equal(keep_open(fd, NCL * PG, &dev), 0);
	for (uint64_t i = 0; i < NCL; i++) {
		memcpy(buf, corpus + (i % (corpus_len / PG)) * PG, PG);
		assert_int_equal(uzram_write(dev, buf, PG, i * PG), 0);
	}
	assert_int_equal(fstat(fd, &st), 0);
	full = (uint64_t)st.st_blocks * 512;
	assert_true(full > NCL * PG / 16);
	assert_int_equal(uzram_discard(dev, NCL * PG, 0), 0);
	uzram_compact(dev);
	assert_int_equal(fstat(fd, &st), 0);
	/* what is left: the header, the slot table, some metadata */
	if ((uint64_t)st.st_blocks * 512 > full / 4)
		fail_msg("the memfd holds %llu bytes after freeing all, %llu full",
			 (unsigned long long)st.st_blocks * 512,
			 (unsigned long long)full);
	uzram_close(dev);
	close(fd);
}

/* ---- reserve_kept ---- */

/*
 * The reserve (uzram_reserve(), serve --swap's) outlives its server: the
 * adopting process finds the resident free frames in its cache, counted,
 * and nothing is punched out of them. A server that takes the device over
 * while memory is short stores into them (tests/vm/v44 hung without).
 */
static void reserve_kept(void **state)
{
	const uint64_t reserve = 1u << 20;
	struct uzram_keep_info info;
	struct uzram_stats st;
	struct uzram *dev;
	struct stat sb;
	uint64_t held;
	uint8_t buf[PG];
	int fd = new_memfd();

	(void)state;
	assert_int_equal(keep_open(fd, NCL * PG, &dev), 0);
	for (uint64_t i = 0; i < 64; i++) {
		memcpy(buf, corpus + (i % (corpus_len / PG)) * PG, PG);
		assert_int_equal(uzram_write(dev, buf, PG, i * PG), 0);
	}
	assert_int_equal(uzram_reserve(dev, reserve), 0);
	assert_int_equal(fstat(fd, &sb), 0);
	held = (uint64_t)sb.st_blocks * 512;
	assert_true(held >= reserve);
	uzram_close(dev);               /* as a death: the file stays */

	dev = keep_adopt(fd);
	assert_int_equal(fstat(fd, &sb), 0);
	if ((uint64_t)sb.st_blocks * 512 < reserve)
		fail_msg("the adoption gave the reserve back: the memfd holds "
			 "%llu bytes, %llu before", (unsigned long long)
			 sb.st_blocks * 512, (unsigned long long)held);
	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	assert_true(st.mem_used_total >= reserve);
	/* and says so (serve's messages: "... MiB of reserve kept") */
	assert_int_equal(uzram_keep_info(dev, &info), 0);
	if (info.reserve < reserve)
		fail_msg("uzram_keep_info() says %llu bytes of reserve kept, "
			 "not %llu", (unsigned long long)info.reserve,
			 (unsigned long long)reserve);
	for (uint64_t i = 0; i < 64; i++) {
		uint8_t got[PG];

		memcpy(buf, corpus + (i % (corpus_len / PG)) * PG, PG);
		assert_int_equal(uzram_read(dev, got, PG, i * PG), 0);
		assert_memory_equal(got, buf, PG);
	}
	/* the kept cache is trimmed like any once the device is compacted */
	uzram_close(dev);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(adopt_same),
		cmocka_unit_test(kill_anywhere),
		cmocka_unit_test(refused),
		cmocka_unit_test(torn),
		cmocka_unit_test(pages_back),
		cmocka_unit_test(reserve_kept),
	};

	return tu_run_tests(tests, load_corpus, free_corpus);
}
