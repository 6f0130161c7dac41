// SPDX-License-Identifier: MIT
/*
 * test_swapfree.c - the freed swap slots as discards (swapfree/runs.c),
 * alone, on a real device: what the BPF ring names is dropped, nothing
 * else is, adjacent runs wait to become one discard, and runs not wholly
 * on the device (slot 0, past the end) are counted and change nothing.
 * The ring and the probe themselves need root and a kernel with kprobes:
 * the VM bench checks them (tests/vm/guest-swap.sh, guest-keeper.sh).
 *
 * CMOCKA_TEST_FILTER='test_model*' runs one test.
 */
#include <stdbool.h>

#include "testutil.h"
#include "swapfree/runs.h"

#define PAGE 4096u
#define SLOTS 1024u

/* A device of SLOTS pages, page n filled with a pattern of n (never 0). */
static struct uzram *filled(void)
{
	struct uzram_config cfg;
	struct uzram *dev;
	unsigned char buf[PAGE];

	uzram_config_init(&cfg);
	cfg.size = (uint64_t)SLOTS * PAGE;
	dev = tu_open(&cfg, "swapfree");
	for (uint32_t n = 0; n < SLOTS; n++) {
		for (uint32_t i = 0; i < PAGE; i++)
			buf[i] = (unsigned char)(n * 7 + i / 64 + 1) | 1;
		assert_int_equal(uzram_write(dev, buf, PAGE, (uint64_t)n * PAGE), 0);
	}
	return dev;
}

/* Whether page n holds its pattern (1), reads as a hole (0); fails else. */
static int stored(struct uzram *dev, uint32_t n)
{
	unsigned char buf[PAGE];
	uint64_t run;
	unsigned flags;
	bool zero = true, ours = true;

	assert_int_equal(uzram_read(dev, buf, PAGE, (uint64_t)n * PAGE), 0);
	for (uint32_t i = 0; i < PAGE; i++) {
		zero &= buf[i] == 0;
		ours &= buf[i] == ((unsigned char)(n * 7 + i / 64 + 1) | 1);
	}
	if (ours)
		return 1;
	if (!zero)
		fail_msg("page %u holds neither its data nor zeros", n);
	assert_int_equal(uzram_block_status(dev, (uint64_t)n * PAGE, PAGE,
					    &run, &flags), 0);
	assert_true(flags & UZRAM_STATUS_HOLE);
	return 0;
}

/* Adjacent runs are one discard, made when a run that does not follow comes. */
static void test_adjacent_wait(void **state)
{
	struct uzram *dev = filled();
	struct freed_runs r;

	(void)state;
	freed_runs_init(&r, dev, PAGE);
	assert_int_equal(r.nslots, SLOTS);
	freed_runs_add(&r, 5, 1);
	freed_runs_add(&r, 6, 2);
	assert_int_equal(stored(dev, 5), 1);     /* pending, not yet gone */
	freed_runs_add(&r, 100, 1);              /* not adjacent: 5-7 go */
	for (uint32_t n = 5; n < 8; n++)
		assert_int_equal(stored(dev, n), 0);
	assert_int_equal(stored(dev, 4), 1);
	assert_int_equal(stored(dev, 8), 1);
	assert_int_equal(stored(dev, 100), 1);
	freed_runs_flush(&r);
	assert_int_equal(stored(dev, 100), 0);
	assert_int_equal(stored(dev, 101), 1);
	freed_runs_flush(&r);                    /* nothing pending: nothing */
	assert_int_equal(r.slots, 4);
	assert_int_equal(r.outside, 0);
	uzram_close(dev);
}

/* Slot 0 (the swap header) and runs past the end are counted, not dropped. */
static void test_outside(void **state)
{
	struct uzram *dev = filled();
	struct freed_runs r;

	(void)state;
	freed_runs_init(&r, dev, PAGE);
	freed_runs_add(&r, 0, 1);
	freed_runs_add(&r, 0, 3);
	freed_runs_add(&r, SLOTS, 1);
	freed_runs_add(&r, SLOTS - 2, 3);        /* reaches one past the end */
	freed_runs_add(&r, 1, UINT64_MAX);       /* count would wrap */
	freed_runs_add(&r, 9, 0);                /* nothing freed */
	freed_runs_flush(&r);
	assert_int_equal(r.slots, 0);
	assert_true(r.outside == 1 + 3 + 1 + 3 + UINT64_MAX);
	for (uint32_t n = 0; n < SLOTS; n++)
		assert_int_equal(stored(dev, n), 1);
	freed_runs_add(&r, SLOTS - 2, 2);        /* the last two: ours */
	freed_runs_flush(&r);
	assert_int_equal(stored(dev, SLOTS - 3), 1);
	assert_int_equal(stored(dev, SLOTS - 2), 0);
	assert_int_equal(stored(dev, SLOTS - 1), 0);
	uzram_close(dev);
}

/* A run grows to FREED_RUN_MAX slots at most; the next one starts anew. */
static void test_run_max(void **state)
{
	struct uzram_config cfg;
	struct uzram *dev;
	struct freed_runs r;
	unsigned char page[PAGE];
	const uint64_t last = FREED_RUN_MAX + 1; /* first slot past the run */

	(void)state;
	uzram_config_init(&cfg);
	cfg.size = (FREED_RUN_MAX + 8ull) * PAGE;
	dev = tu_open(&cfg, "swapfree, run max");
	memset(page, 'k', sizeof page);
	for (uint64_t n = 1; n <= last; n += last - 1)
		assert_int_equal(uzram_write(dev, page, PAGE, n * PAGE), 0);
	freed_runs_init(&r, dev, PAGE);
	freed_runs_add(&r, 1, FREED_RUN_MAX - 1);
	freed_runs_add(&r, FREED_RUN_MAX, 1);    /* adjacent, now the max */
	assert_int_equal(r.len, FREED_RUN_MAX);
	freed_runs_add(&r, last, 1);             /* adjacent, but past it */
	assert_int_equal(r.start, last);
	assert_int_equal(r.len, 1);
	assert_int_equal(uzram_read(dev, page, PAGE, 1 * PAGE), 0);
	assert_int_equal(page[0], 0);            /* the full run went */
	assert_int_equal(uzram_read(dev, page, PAGE, last * PAGE), 0);
	assert_int_equal(page[0], 'k');          /* the new one waits */
	freed_runs_flush(&r);
	assert_int_equal(uzram_read(dev, page, PAGE, last * PAGE), 0);
	assert_int_equal(page[0], 0);
	uzram_close(dev);
}

/*
 * Against a model: random runs (some adjacent to the last, some outside
 * the device), flushes at random; at the end every slot the model freed
 * is a hole and every other holds its data, and the counts agree.
 */
static void test_model(void **state)
{
	struct uzram *dev = filled();
	struct freed_runs r;
	bool freed[SLOTS] = { false };
	uint64_t seed = 0x5eedf3ee, slots = 0, outside = 0, next = 1;
	uint64_t rounds = tu_scaled(3000);

	(void)state;
	freed_runs_init(&r, dev, PAGE);
	for (uint64_t i = 0; i < rounds; i++) {
		uint64_t pick = tu_rand(&seed) % 10;
		uint64_t slot = pick < 3 ? next : tu_rand(&seed) % (SLOTS + 8);
		uint64_t count = 1 + tu_rand(&seed) % (pick == 9 ? 40 : 4);

		if (slot == 0 || slot >= SLOTS || count > SLOTS - slot) {
			outside += count;
		} else {
			slots += count;
			for (uint64_t n = slot; n < slot + count; n++)
				freed[n] = true;
		}
		freed_runs_add(&r, slot, count);
		next = slot + count;
		if (tu_rand(&seed) % 16 == 0)
			freed_runs_flush(&r);
	}
	freed_runs_flush(&r);
	assert_true(r.slots == slots);
	assert_true(r.outside == outside);
	for (uint32_t n = 0; n < SLOTS; n++)
		if (stored(dev, n) != !freed[n])
			fail_msg("slot %u: %s", n, freed[n] ? "freed but stored" :
				 "dropped but never freed");
	uzram_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adjacent_wait),
		cmocka_unit_test(test_outside),
		cmocka_unit_test(test_run_max),
		cmocka_unit_test(test_model),
	};

	return tu_run_tests(tests, NULL, NULL);
}
