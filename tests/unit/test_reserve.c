// SPDX-License-Identifier: MIT
/*
 * test_reserve.c - uzram_reserve(): the reserve is resident and counted at
 * once, stores take their memory from it (mem_used_total does not grow
 * while the data fits), discards do not give it back to the OS (the
 * cache's floor), it stops at mem_limit with -ENOSPC, and 0 ends it so
 * that uzram_compact() returns it.
 */
#include <errno.h>

#include "uzram.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define RESERVE (8 * MIB)
#define DATA (4 * MIB)

static uint64_t mem_used(struct uzram *dev)
{
	struct uzram_stats st;

	assert_int_equal(uzram_stats(dev, &st, sizeof st), 0);
	return st.mem_used_total;
}

static struct uzram *open_dev(uint64_t limit)
{
	struct uzram_config cfg;
	struct uzram *dev = NULL;

	uzram_config_init(&cfg);
	cfg.size = 64 * MIB;
	cfg.mem_limit = limit;
	assert_int_equal(uzram_open(&cfg, &dev), 0);
	return dev;
}

static void test_reserve_serves_stores(void **state)
{
	struct uzram *dev = open_dev(0);
	uint64_t m0, m1, m2, m3;
	size_t len;
	uint8_t *data = tu_corpus("heap-python.core", DATA, &len);

	(void)state;
	assert_true(len == DATA);
	m0 = mem_used(dev);
	assert_int_equal(uzram_reserve(dev, RESERVE), 0);
	m1 = mem_used(dev);
	assert_true(m1 >= m0 + RESERVE);

	/* 4 MiB of data compresses into less than the 8 MiB reserve */
	for (uint64_t off = 0; off < DATA; off += MIB)
		assert_int_equal(uzram_write(dev, data + off, MIB, off), 0);
	m2 = mem_used(dev);
	/* what stores add beyond the reserve: descriptors, the slot table */
	assert_true(m2 <= m1 + MIB / 4);

	/* discarding all of it keeps the reserve resident */
	assert_int_equal(uzram_discard(dev, DATA, 0), 0);
	uzram_compact(dev);
	m3 = mem_used(dev);
	if (m3 < RESERVE)
		fail_msg("the reserve was given back: %llu bytes held after "
			 "discard and compact, %llu reserved",
			 (unsigned long long)m3, (unsigned long long)RESERVE);

	/* 0 ends the reserve; compaction gives it back */
	assert_int_equal(uzram_reserve(dev, 0), 0);
	uzram_compact(dev);
	m3 = mem_used(dev);
	assert_true(m3 < m0 + RESERVE / 2);
	free(data);
	uzram_close(dev);
}

static void test_reserve_stops_at_limit(void **state)
{
	struct uzram *dev = open_dev(2 * MIB);

	(void)state;
	assert_int_equal(uzram_reserve(dev, RESERVE), -ENOSPC);
	assert_true(mem_used(dev) <= 2 * MIB);
	assert_int_equal(uzram_reserve(NULL, RESERVE), -EINVAL);
	uzram_close(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_serves_stores),
		cmocka_unit_test(test_reserve_stops_at_limit),
	};

	return tu_run_tests(tests, NULL, NULL);
}
