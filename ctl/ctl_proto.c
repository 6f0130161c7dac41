// SPDX-License-Identifier: MIT
/*
 * ctl_proto.c - the control channel's protocol (PATH.ctl; where it lives:
 * ctl_path.c; the server side: ctl_server.c; the client: ctl_client.c):
 * nbd_ctl_parse(), which reads a request line strictly.
 *
 * A request is one line: "json", "text", "prometheus" (metrics.c),
 * "compact", "mem-limit BYTES", "reset-max", "idle" or "recompress
 * PRIORITY FLAGS THRESHOLD", as zram's compact, mem_limit, mem_used_max,
 * idle and recompress files; the tier's
 * "idle SECONDS", "writeback FLAGS LIMIT [FIRST LAST]", "writeback-limit
 * ENABLE PAGES" and "backing-compact", as zram's idle (with an age),
 * writeback, writeback_limit_enable/writeback_limit and nothing (the
 * backing store's compaction is uzram's); and "train-dict PRIORITY SIZE"
 * (uzram_train_dictionary(), re-encoding what it keeps). Words are
 * separated by exactly one space, numbers are plain decimal digits (no
 * sign, no blank, no base prefix) that must fit their field, and nothing
 * may follow the last one: strtoull() alone would take " -1" as 2^64-1
 * and "+5" as 5. The reply starts with "ok" or "error:".
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

#define KNOWN "known: json, text, prometheus, compact, mem-limit BYTES, " \
	      "reset-max, idle [SECONDS], recompress PRIORITY FLAGS THRESHOLD, " \
	      "writeback FLAGS LIMIT [FIRST LAST], writeback-limit ENABLE PAGES, " \
	      "backing-compact, train-dict PRIORITY SIZE"

/*
 * A decimal number at *p, up to the next space or the end: digits only,
 * at most max. Advances *p past it. 0 or -1.
 */
static int read_u64(const char **p, const char *end, uint64_t max,
		    uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s == end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s != ' '; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		/* v * 10 + d <= max, without wrapping (max may be below 9) */
		if (*s < '0' || *s > '9' || d > max || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

/* "N" or "N N N": count numbers separated by single spaces, nothing else. */
static int read_numbers(const char *s, const char *end, int count,
			const uint64_t *max, uint64_t *out)
{
	for (int i = 0; i < count; i++) {
		if (i > 0 && (s == end || *s++ != ' '))
			return -1;
		if (read_u64(&s, end, max[i], &out[i]) < 0)
			return -1;
	}
	return s == end ? 0 : -1;
}

/* How much of [s, end) to quote in a message (the line has no NUL). */
static int shown(const char *s, const char *end)
{
	return end - s < 40 ? (int)(end - s) : 40;
}

static bool word_is(const char *s, size_t len, const char *w)
{
	return len == strlen(w) && !memcmp(s, w, len);
}

/*
 * The requests of the tier and of dictionaries, whose word is followed by
 * numbers: "idle SECONDS", "writeback FLAGS LIMIT [FIRST LAST]",
 * "writeback-limit ENABLE PAGES", "train-dict PRIORITY SIZE".
 */
static int parse_numbered(const char *line, const char *sp, const char *end,
			  struct nbd_ctl_req *rq, char *err, size_t n)
{
	size_t wlen = (size_t)(sp - line);
	uint64_t v[4];

	if (word_is(line, wlen, "idle")) {
		const uint64_t max[1] = { UINT32_MAX };

		rq->op = NBD_CTL_IDLE_AGE;
		if (read_numbers(sp + 1, end, 1, max, v) == 0) {
			rq->threshold = (uint32_t)v[0];
			return 0;
		}
	} else if (word_is(line, wlen, "writeback")) {
		const uint64_t max[4] = { UINT32_MAX, UINT64_MAX, UINT64_MAX,
					  UINT64_MAX };

		rq->op = NBD_CTL_WRITEBACK;
		rq->first = 0;
		rq->last = UINT64_MAX;
		if (read_numbers(sp + 1, end, 2, max, v) == 0 ||
		    (read_numbers(sp + 1, end, 4, max, v) == 0 && v[2] <= v[3])) {
			rq->flags = (unsigned)v[0];
			rq->bytes = v[1];
			if (read_numbers(sp + 1, end, 4, max, v) == 0) {
				rq->first = v[2];
				rq->last = v[3];
			}
			return 0;
		}
	} else if (word_is(line, wlen, "writeback-limit")) {
		const uint64_t max[2] = { 1, UINT64_MAX };

		rq->op = NBD_CTL_WRITEBACK_LIMIT;
		if (read_numbers(sp + 1, end, 2, max, v) == 0) {
			rq->flags = (unsigned)v[0];
			rq->bytes = v[1];
			return 0;
		}
	} else {
		const uint64_t max[2] = { UZRAM_MAX_RECOMP, 1u << 20 };

		rq->op = NBD_CTL_TRAIN_DICT;
		if (read_numbers(sp + 1, end, 2, max, v) == 0) {
			rq->prio = (unsigned)v[0];
			rq->bytes = v[1];
			return 0;
		}
	}
	snprintf(err, n, "error: bad numbers in '%.*s' (" KNOWN ")\n",
		 shown(line, end), line);
	return -1;
}

int nbd_ctl_parse(const char *line, size_t len, struct nbd_ctl_req *rq,
		  char *err, size_t n)
{
	static const struct { const char *name; enum nbd_ctl_op op; } plain[] = {
		{ "json", NBD_CTL_JSON }, { "text", NBD_CTL_TEXT },
		{ "prometheus", NBD_CTL_PROMETHEUS },
		{ "compact", NBD_CTL_COMPACT }, { "reset-max", NBD_CTL_RESET_MAX },
		{ "idle", NBD_CTL_IDLE },
		{ "backing-compact", NBD_CTL_BACKING_COMPACT },
	};
	const char *end, *sp;
	uint64_t v[3];

	if (len > 0 && line[len - 1] == '\n')
		len--;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	end = line + len;
	memset(rq, 0, sizeof *rq);
	if (memchr(line, '\0', len) || memchr(line, '\n', len)) {
		snprintf(err, n, "error: a request is one line of text\n");
		return -1;
	}
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		if (word_is(line, len, plain[i].name)) {
			rq->op = plain[i].op;
			return 0;
		}
	}
	sp = memchr(line, ' ', len);
	if (sp && word_is(line, (size_t)(sp - line), "mem-limit")) {
		const uint64_t max[1] = { UINT64_MAX };

		rq->op = NBD_CTL_MEM_LIMIT;
		if (read_numbers(sp + 1, end, 1, max, v) == 0) {
			rq->bytes = v[0];
			return 0;
		}
		snprintf(err, n, "error: mem-limit wants a byte count in decimal "
			 "digits (0 to %llu), got '%.*s'\n",
			 (unsigned long long)UINT64_MAX, shown(sp + 1, end),
			 sp + 1);
		return -1;
	}
	if (sp && word_is(line, (size_t)(sp - line), "recompress")) {
		const uint64_t max[3] = { UZRAM_MAX_RECOMP, UINT32_MAX, UINT32_MAX };

		rq->op = NBD_CTL_RECOMPRESS;
		if (read_numbers(sp + 1, end, 3, max, v) == 0 && v[0] > 0) {
			rq->prio = (unsigned)v[0];
			rq->flags = (unsigned)v[1];
			rq->threshold = (uint32_t)v[2];
			return 0;
		}
		snprintf(err, n, "error: recompress wants PRIORITY (1 to %d) FLAGS "
			 "THRESHOLD in decimal digits, got '%.*s'\n",
			 UZRAM_MAX_RECOMP, shown(sp + 1, end), sp + 1);
		return -1;
	}
	if (sp && (word_is(line, (size_t)(sp - line), "idle") ||
		   word_is(line, (size_t)(sp - line), "writeback") ||
		   word_is(line, (size_t)(sp - line), "writeback-limit") ||
		   word_is(line, (size_t)(sp - line), "train-dict")))
		return parse_numbered(line, sp, end, rq, err, n);
	snprintf(err, n, "error: unknown request '%.*s' (" KNOWN ")\n",
		 shown(line, end), line);
	return -1;
}
