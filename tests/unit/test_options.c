// SPDX-License-Identifier: MIT
/*
 * test_options.c - the command line's value parsers and option parser
 * (cli/base/options.c), alone: sizes, numbers, levels, algorithm specs,
 * HOST:PORT, and cli_parse() over a table, with the values each accepts
 * and the spellings each must refuse (strtoull() and strtod() alone take
 * " -1", "+5", "0x10", "1e3" and "nan").
 *
 * CMOCKA_TEST_FILTER='test_size*' runs one test.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>

#include "testutil.h"
#include "cli/cli.h"

static void test_sizes(void **state)
{
	static const struct { const char *s; unsigned long long v; } good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "1k", 1024 }, { "1K", 1024 },
		{ "1KiB", 1024 }, { "1KB", 1024 }, { "2M", 2u << 20 },
		{ "1.5M", 3u << 19 }, { "1G", 1ull << 30 }, { "1GiB", 1ull << 30 },
		{ "2T", 2ull << 40 }, { "12B", 12 },
	};
	static const char *const bad[] = {
		"", " 1", "-1", "+5", "0x10", "1e3", "nan", "inf", "1X", "1MM",
		"1 M", "16777216T", "1M ",
	};
	unsigned long long v;

	(void)state;
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		v = 12345;
		if (parse_size(good[i].s, &v) || v != good[i].v)
			fail_msg("parse_size('%s') gave %llu, want %llu", good[i].s,
				 v, good[i].v);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (parse_size(bad[i], &v) != -EINVAL)
			fail_msg("parse_size('%s') took it (%llu)", bad[i], v);
}

/*
 * A device size on a command line: at least min, whole pages, and at most
 * the largest device, 16T (the library said "open: size 109951162777600 is
 * not between 1 and 17592186044416 bytes" for 100T).
 */
static void test_take_size(void **state)
{
	unsigned long long v;

	(void)state;
	assert_int_equal(cli_take_size("16T", 4096, &v), 0);
	assert_true(v == UZRAM_SIZE_MAX);
	assert_int_equal(cli_take_size("100T", 4096, &v), CLI_BAD_VALUE);
	assert_int_equal(cli_take_size("16388G", 4096, &v), CLI_BAD_VALUE);
	assert_int_equal(cli_take_size("1M", 4096, &v), 0);
	assert_int_equal(cli_take_size("4K", 16 << 20, &v), CLI_BAD_VALUE);
	assert_int_equal(cli_take_size("6000", 4096, &v), CLI_BAD_VALUE);
}

/*
 * Default sizes from RAM are whole 4K pages, which the device and every
 * size option take: half of 6,170,937 pages (a 24 GiB machine's) is not.
 */
static void test_ram_share(void **state)
{
	static const struct {
		unsigned long long pages, psz; unsigned div;
		unsigned long long cap, want;
	} c[] = {
		{ 6170937, 4096, 2, 0, 3085468ull * 4096 },
		{ 6170938, 4096, 2, 0, 3085469ull * 4096 },
		{ 6170937, 4096, 2, 4096ull << 20, 4096ull << 20 },
		{ 1001, 4096, 2, 4096ull << 20, 500ull * 4096 },
		{ 3, 4096, 2, 0, 4096 },
		{ 1, 4096, 2, 0, 0 },
		{ 100003, 16384, 64, 0, 6250ull * 4096 },
		{ 65537, 65536, 2, 0, 524296ull * 4096 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		unsigned long long v = ram_share(c[i].pages, c[i].psz,
						 c[i].div, c[i].cap);

		if (v != c[i].want || v % 4096)
			fail_msg("ram_share(%llu, %llu, %u, %llu) = %llu, want "
				 "%llu", c[i].pages, c[i].psz, c[i].div,
				 c[i].cap, v, c[i].want);
	}
}

static void test_uints(void **state)
{
	unsigned long long v;

	(void)state;
	assert_int_equal(parse_uint("0", 10, &v), 0);
	assert_true(v == 0);
	assert_int_equal(parse_uint("10", 10, &v), 0);
	assert_true(v == 10);
	assert_int_equal(parse_uint("18446744073709551615", UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(parse_uint("11", 10, &v), -1);
	assert_int_equal(parse_uint("18446744073709551616", UINT64_MAX, &v), -1);
	assert_int_equal(parse_uint(" 1", 10, &v), -1);
	assert_int_equal(parse_uint("-1", 10, &v), -1);
	assert_int_equal(parse_uint("+1", 10, &v), -1);
	assert_int_equal(parse_uint("1x", 10, &v), -1);
	assert_int_equal(parse_uint("", 10, &v), -1);
}

static void test_levels_and_algorithms(void **state)
{
	char s[64];
	const char *name, *dict;
	int level;

	(void)state;
	assert_int_equal(parse_level("-5", &level), 0);
	assert_int_equal(level, -5);
	assert_int_equal(parse_level("1000", &level), 0);
	assert_int_equal(parse_level("1001", &level), -EINVAL);
	assert_int_equal(parse_level("", &level), -EINVAL);
	assert_int_equal(parse_level("3x", &level), -EINVAL);

	strcpy(s, "zstd:19");
	assert_int_equal(parse_algo_level(s, &name, &level), 0);
	assert_string_equal(name, "zstd");
	assert_int_equal(level, 19);
	strcpy(s, "lz4");
	assert_int_equal(parse_algo_level(s, &name, &level), 0);
	assert_string_equal(name, "lz4");
	assert_int_equal(level, 0);
	strcpy(s, ":3");
	assert_int_equal(parse_algo_level(s, &name, &level), -EINVAL);
	strcpy(s, "zstd:");
	assert_int_equal(parse_algo_level(s, &name, &level), -EINVAL);
	strcpy(s, "");
	assert_int_equal(parse_algo_level(s, &name, &level), -EINVAL);

	strcpy(s, "zstd:3:dict=/tmp/d");
	assert_int_equal(parse_algo_spec(s, &name, &level, &dict), 0);
	assert_string_equal(name, "zstd");
	assert_int_equal(level, 3);
	assert_string_equal(dict, "/tmp/d");
	strcpy(s, "lz4:dict=x");
	assert_int_equal(parse_algo_spec(s, &name, &level, &dict), 0);
	assert_string_equal(name, "lz4");
	assert_string_equal(dict, "x");
	strcpy(s, "lz4");
	assert_int_equal(parse_algo_spec(s, &name, &level, &dict), 0);
	assert_null(dict);
	strcpy(s, "lz4:dict=");
	assert_int_equal(parse_algo_spec(s, &name, &level, &dict), -EINVAL);
}

static void test_hostport(void **state)
{
	char s[64];
	const char *host, *port;

	(void)state;
	strcpy(s, "10809");
	assert_int_equal(split_hostport(s, &host, &port), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_string_equal(port, "10809");
	strcpy(s, "0.0.0.0:99");
	assert_int_equal(split_hostport(s, &host, &port), 0);
	assert_string_equal(host, "0.0.0.0");
	assert_string_equal(port, "99");
	strcpy(s, ":99");
	assert_int_equal(split_hostport(s, &host, &port), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_string_equal(port, "99");
	strcpy(s, "[::1]:7");
	assert_int_equal(split_hostport(s, &host, &port), 0);
	assert_string_equal(host, "::1");
	assert_string_equal(port, "7");
	strcpy(s, "[::1]");
	assert_int_equal(split_hostport(s, &host, &port), -1);
	strcpy(s, "[::1]:");
	assert_int_equal(split_hostport(s, &host, &port), -1);
	strcpy(s, "host:");
	assert_int_equal(split_hostport(s, &host, &port), -1);
}

/* ---- cli_parse() over a small table ---- */

struct taken {
	char log[256];
	int bad_on;      /* key whose value take() refuses */
};

static int take(void *ctx, int key, char *arg)
{
	struct taken *t = ctx;
	size_t n = strlen(t->log);

	snprintf(t->log + n, sizeof t->log - n, "%d=%s;", key, arg ? arg : "-");
	return key == t->bad_on ? CLI_BAD_VALUE : 0;
}

static const struct cli_option opts[] = {
	{ "size", 's', required_argument, "BYTES", "the size" },
	{ "force", 'f', no_argument, NULL, "go on" },
	{ "only-long", 1000, required_argument, "X", "a long option alone" },
	{ "help", 'h', no_argument, NULL, "this help" },
	{ NULL, 0, 0, NULL, NULL },
};
static const struct cli_command cmd = {
	.name = "test", .operands = "FILE", .shorts = "s:fh", .opts = opts,
};

static int run(struct taken *t, int argc, char **argv)
{
	optind = 0;     /* glibc: start over, as for a new argv */
	memset(t->log, 0, sizeof t->log);
	return cli_parse(&cmd, argc, argv, take, t);
}

static void test_cli_parse(void **state)
{
	struct taken t = { .bad_on = 0 };
	char a0[] = "test", a1[] = "-s", a2[] = "4k", a3[] = "--force",
	     a4[] = "--only-long=v", a5[] = "file", a6[] = "--nope",
	     a7[] = "--size", a8[] = "-fs1";
	char *ok_argv[] = { a0, a1, a2, a3, a4, a5, NULL };
	char *short_argv[] = { a0, a8, a5, NULL };
	char *unknown_argv[] = { a0, a6, NULL };
	char *missing_argv[] = { a0, a7, NULL };
	char *bad_argv[] = { a0, a1, a2, NULL };

	(void)state;
	assert_int_equal(run(&t, 6, ok_argv), -1);
	assert_string_equal(t.log, "115=4k;102=-;1000=v;");   /* s, f, only-long */
	assert_int_equal(optind, 5);
	assert_string_equal(ok_argv[optind], "file");

	assert_int_equal(run(&t, 3, short_argv), -1);
	assert_string_equal(t.log, "102=-;115=1;");

	assert_int_equal(run(&t, 2, unknown_argv), 2);
	assert_string_equal(t.log, "");
	assert_int_equal(run(&t, 2, missing_argv), 2);
	assert_string_equal(t.log, "");

	t.bad_on = 's';
	assert_int_equal(run(&t, 3, bad_argv), 2);
	assert_string_equal(t.log, "115=4k;");
	assert_ptr_equal(cli_find(opts, 'f'), &opts[1]);
	assert_null(cli_find(opts, 'z'));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_uints),
		cmocka_unit_test(test_take_size),
		cmocka_unit_test(test_ram_share),
		cmocka_unit_test(test_levels_and_algorithms),
		cmocka_unit_test(test_hostport),
		cmocka_unit_test(test_cli_parse),
	};

	return tu_run_tests(tests, NULL, NULL);
}
