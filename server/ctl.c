/*
 * ctl.c - the requests of the control channel (PATH.ctl, see server.c):
 * parsing, strictly, and running those that act on the device.
 *
 * A request is one line: "json", "text", "compact", "mem-limit BYTES",
 * "reset-max", "idle" or "recompress PRIORITY FLAGS THRESHOLD", as zram's
 * compact, mem_limit, mem_used_max, idle and recompress files; the tier's
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
#include <stdio.h>
#include <string.h>

#include "server.h"

#define KNOWN "known: json, text, compact, mem-limit BYTES, reset-max, " \
	      "idle [SECONDS], recompress PRIORITY FLAGS THRESHOLD, writeback " \
	      "FLAGS LIMIT [FIRST LAST], writeback-limit ENABLE PAGES, " \
	      "backing-compact, train-dict PRIORITY SIZE"

/*
 * A decimal number at *p, up to the next space or the end: digits only,
 * at most max. Advances *p past it. 0 or -1.
 */
static int take_u64(const char **p, const char *end, uint64_t max,
		    uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s == end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s != ' '; s++) {
		if (*s < '0' || *s > '9' || v > (max - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = v;
	return 0;
}

/* "N" or "N N N": count numbers separated by single spaces, nothing else. */
static int take_numbers(const char *s, const char *end, int count,
			const uint64_t *max, uint64_t *out)
{
	for (int i = 0; i < count; i++) {
		if (i > 0 && (s == end || *s++ != ' '))
			return -1;
		if (take_u64(&s, end, max[i], &out[i]) < 0)
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
		if (take_numbers(sp + 1, end, 1, max, v) == 0) {
			rq->threshold = (uint32_t)v[0];
			return 0;
		}
	} else if (word_is(line, wlen, "writeback")) {
		const uint64_t max[4] = { UINT32_MAX, UINT64_MAX, UINT64_MAX,
					  UINT64_MAX };

		rq->op = NBD_CTL_WRITEBACK;
		rq->first = 0;
		rq->last = UINT64_MAX;
		if (take_numbers(sp + 1, end, 2, max, v) == 0 ||
		    (take_numbers(sp + 1, end, 4, max, v) == 0 && v[2] <= v[3])) {
			rq->flags = (unsigned)v[0];
			rq->bytes = v[1];
			if (take_numbers(sp + 1, end, 4, max, v) == 0) {
				rq->first = v[2];
				rq->last = v[3];
			}
			return 0;
		}
	} else if (word_is(line, wlen, "writeback-limit")) {
		const uint64_t max[2] = { 1, UINT64_MAX };

		rq->op = NBD_CTL_WRITEBACK_LIMIT;
		if (take_numbers(sp + 1, end, 2, max, v) == 0) {
			rq->flags = (unsigned)v[0];
			rq->bytes = v[1];
			return 0;
		}
	} else {
		const uint64_t max[2] = { UZRAM_MAX_RECOMP, 1u << 20 };

		rq->op = NBD_CTL_TRAIN_DICT;
		if (take_numbers(sp + 1, end, 2, max, v) == 0) {
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
		if (take_numbers(sp + 1, end, 1, max, v) == 0) {
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
		if (take_numbers(sp + 1, end, 3, max, v) == 0 && v[0] > 0) {
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

/* train-dict: train, keep if it pays, re-encode, and say what was measured. */
static void train_dict(struct uzram *dev, const struct nbd_ctl_req *rq,
		       char *out, size_t n)
{
	struct uzram_train_report rep;
	int r = uzram_train_dictionary(dev, (int)rq->prio, (size_t)rq->bytes,
				       UZRAM_DICT_REENCODE, &rep);

	if (r < 0)
		snprintf(out, n, "error: %s\n", uzram_last_error());
	else if (r == 0)
		snprintf(out, n, "ok: not kept: %s\n", uzram_last_error());
	else
		snprintf(out, n, "ok: kept a dictionary of %llu bytes: %llu -> "
			 "%llu bytes on the test sample, %llu pages re-encoded\n",
			 (unsigned long long)rep.dict_size,
			 (unsigned long long)rep.bytes_without,
			 (unsigned long long)rep.bytes_with,
			 (unsigned long long)rep.pages_reencoded);
}

void nbd_ctl_execute(struct uzram *dev, const struct nbd_ctl_req *rq,
		     char *out, size_t n)
{
	struct uzram_stats st;
	long r;

	switch (rq->op) {
	case NBD_CTL_COMPACT:
		r = uzram_compact(dev);
		if (r < 0)
			snprintf(out, n, "error: compact: %s\n",
				 uzram_strerror((int)r));
		else
			snprintf(out, n, "ok: %ld pages given back\n", r);
		return;
	case NBD_CTL_MEM_LIMIT:
		if (uzram_set_mem_limit(dev, rq->bytes) < 0)
			snprintf(out, n, "error: mem-limit: %s\n",
				 uzram_last_error());
		else
			snprintf(out, n, "ok: mem_limit %llu\n",
				 (unsigned long long)rq->bytes);
		return;
	case NBD_CTL_RECOMPRESS:
		r = uzram_recompress(dev, (int)rq->prio, rq->flags, rq->threshold);
		if (r < 0)
			snprintf(out, n, "error: %s\n", uzram_last_error());
		else
			snprintf(out, n, "ok: %ld pages re-encoded\n", r);
		return;
	case NBD_CTL_IDLE:
		snprintf(out, n, "ok: %ld pages marked idle\n",
			 uzram_mark_idle(dev));
		return;
	case NBD_CTL_RESET_MAX:
		(void)uzram_reset_mem_used_max(dev);
		(void)uzram_stats(dev, &st, sizeof st);
		snprintf(out, n, "ok: mem_used_max %llu\n",
			 (unsigned long long)st.mem_used_max);
		return;
	case NBD_CTL_IDLE_AGE:
		r = uzram_mark_idle_age(dev, rq->threshold);
		if (r < 0)
			snprintf(out, n, "error: %s\n", uzram_last_error());
		else
			snprintf(out, n, "ok: %ld pages marked idle\n", r);
		return;
	case NBD_CTL_WRITEBACK:
		r = uzram_writeback(dev, rq->flags, rq->first, rq->last,
				    rq->bytes);
		if (r < 0)
			snprintf(out, n, "error: %s\n", uzram_last_error());
		else
			snprintf(out, n, "ok: %ld pages written back\n", r);
		return;
	case NBD_CTL_WRITEBACK_LIMIT:
		if (uzram_set_writeback_limit(dev, rq->flags != 0, rq->bytes) < 0)
			snprintf(out, n, "error: %s\n", uzram_last_error());
		else if (rq->flags)
			snprintf(out, n, "ok: writeback limited to %llu pages\n",
				 (unsigned long long)rq->bytes);
		else
			snprintf(out, n, "ok: writeback not limited\n");
		return;
	case NBD_CTL_BACKING_COMPACT:
		r = uzram_backing_compact(dev);
		if (r < 0)
			snprintf(out, n, "error: %s\n", uzram_last_error());
		else
			snprintf(out, n, "ok: %ld bytes of backing store freed\n",
				 r);
		return;
	case NBD_CTL_TRAIN_DICT:
		train_dict(dev, rq, out, n);
		return;
	case NBD_CTL_JSON:
	case NBD_CTL_TEXT:
		break;
	}
	snprintf(out, n, "error: not a device command\n");
}
