// SPDX-License-Identifier: MIT
/*
 * test_ctl.c - the control channel's request parser (ctl/ctl_proto.c,
 * nbd_ctl_parse()), alone: what each request line parses to, and that
 * every line the grammar refuses is refused with a message, not read
 * loosely (strtoull() would take " -1" as 2^64-1 and "+5" as 5).
 *
 * CMOCKA_TEST_FILTER='test_refused*' runs one test.
 */
#include <limits.h>
#include <stdint.h>

#include "testutil.h"
#include "ctl/ctl.h"

static int parse(const char *line, struct nbd_ctl_req *rq, char *err,
		 size_t n)
{
	err[0] = '\0';
	return nbd_ctl_parse(line, strlen(line), rq, err, n);
}

/* line parses; *rq is what it parsed to */
static struct nbd_ctl_req ok(const char *line)
{
	struct nbd_ctl_req rq;
	char err[512];

	if (parse(line, &rq, err, sizeof err))
		fail_msg("'%s' was refused: %s", line, err);
	return rq;
}

/* line is refused with a message that starts "error: " and holds want */
static void refused(const char *line, const char *want)
{
	struct nbd_ctl_req rq;
	char err[512];

	if (!parse(line, &rq, err, sizeof err))
		fail_msg("'%s' was accepted (op %d)", line, (int)rq.op);
	if (strncmp(err, "error: ", 7) || !strstr(err, want))
		fail_msg("'%s': the message '%s' does not say '%s'", line, err,
			 want);
	assert_int_equal(err[strlen(err) - 1], '\n');
}

static void test_plain_words(void **state)
{
	(void)state;
	assert_int_equal(ok("json").op, NBD_CTL_JSON);
	assert_int_equal(ok("text\n").op, NBD_CTL_TEXT);
	assert_int_equal(ok("prometheus").op, NBD_CTL_PROMETHEUS);
	assert_int_equal(ok("compact\r\n").op, NBD_CTL_COMPACT);
	assert_int_equal(ok("reset-max").op, NBD_CTL_RESET_MAX);
	assert_int_equal(ok("idle").op, NBD_CTL_IDLE);
	assert_int_equal(ok("backing-compact").op, NBD_CTL_BACKING_COMPACT);
}

static void test_numbers(void **state)
{
	struct nbd_ctl_req rq;

	(void)state;
	rq = ok("mem-limit 1048576");
	assert_int_equal(rq.op, NBD_CTL_MEM_LIMIT);
	assert_true(rq.bytes == 1048576);
	rq = ok("mem-limit 18446744073709551615");
	assert_true(rq.bytes == UINT64_MAX);
	rq = ok("mem-limit 0");
	assert_true(rq.bytes == 0);

	rq = ok("recompress 2 5 3000\n");
	assert_int_equal(rq.op, NBD_CTL_RECOMPRESS);
	assert_int_equal(rq.prio, 2);
	assert_int_equal(rq.flags, 5);
	assert_int_equal(rq.threshold, 3000);

	rq = ok("idle 30");
	assert_int_equal(rq.op, NBD_CTL_IDLE_AGE);
	assert_int_equal(rq.threshold, 30);

	rq = ok("writeback 1 100");
	assert_int_equal(rq.op, NBD_CTL_WRITEBACK);
	assert_int_equal(rq.flags, 1);
	assert_true(rq.bytes == 100);
	assert_true(rq.first == 0 && rq.last == UINT64_MAX);
	rq = ok("writeback 0 0 7 9");
	assert_true(rq.first == 7 && rq.last == 9);

	rq = ok("writeback-limit 1 4096");
	assert_int_equal(rq.op, NBD_CTL_WRITEBACK_LIMIT);
	assert_int_equal(rq.flags, 1);
	assert_true(rq.bytes == 4096);

	rq = ok("train-dict 0 65536");
	assert_int_equal(rq.op, NBD_CTL_TRAIN_DICT);
	assert_int_equal(rq.prio, 0);
	assert_true(rq.bytes == 65536);
}

static void test_refused_numbers(void **state)
{
	(void)state;
	refused("mem-limit -1", "mem-limit wants a byte count");
	refused("mem-limit +5", "mem-limit wants a byte count");
	refused("mem-limit 0x10", "mem-limit wants a byte count");
	refused("mem-limit  5", "mem-limit wants a byte count");
	refused("mem-limit 5 ", "mem-limit wants a byte count");
	refused("mem-limit 18446744073709551616", "mem-limit wants a byte count");
	refused("mem-limit ", "mem-limit wants a byte count");
	refused("recompress 0 0 0", "recompress wants PRIORITY");
	refused("recompress 4 0 0", "recompress wants PRIORITY");
	refused("recompress 1 0", "recompress wants PRIORITY");
	refused("recompress 1 0 4294967296", "recompress wants PRIORITY");
	refused("idle 4294967296", "bad numbers in 'idle 4294967296'");
	refused("writeback 1", "bad numbers");
	refused("writeback 0 0 9 7", "bad numbers");   /* first > last */
	refused("writeback 0 0 7", "bad numbers");
	refused("writeback-limit 2 1", "bad numbers");
	refused("train-dict 0 1048577", "bad numbers");
}

static void test_refused_lines(void **state)
{
	struct nbd_ctl_req rq;
	char err[512];
	static const char nul[] = "json\0text";

	(void)state;
	refused("frobnicate", "unknown request 'frobnicate'");
	refused("JSON", "unknown request");
	refused("json ", "unknown request");
	refused(" json", "unknown request");
	refused("", "unknown request");
	refused("json\ntext", "one line");
	assert_int_equal(nbd_ctl_parse(nul, sizeof nul - 1, &rq, err, sizeof err), -1);
	assert_non_null(strstr(err, "one line"));
	/* a long line is quoted cut, and the message still fits */
	refused("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		"unknown request 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'");
}

/* A message cut to a small buffer is still a terminated string. */
static void test_small_error_buffer(void **state)
{
	struct nbd_ctl_req rq;
	char err[16];

	(void)state;
	memset(err, 'x', sizeof err);
	assert_int_equal(parse("nonsense", &rq, err, sizeof err), -1);
	assert_int_equal(err[sizeof err - 1], '\0');
	assert_int_equal(strncmp(err, "error: ", 7), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_words),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_refused_numbers),
		cmocka_unit_test(test_refused_lines),
		cmocka_unit_test(test_small_error_buffer),
	};

	return tu_run_tests(tests, NULL, NULL);
}
