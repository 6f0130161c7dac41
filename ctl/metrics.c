// SPDX-License-Identifier: MIT
/*
 * metrics.c - the figures of `uzram stat` (ctl_stats.c) in the Prometheus text
 * exposition format, version 0.0.4, for `uzram stat --prometheus` (the
 * control request "prometheus") and for the HTTP listener of `uzram serve
 * --metrics` (GET /metrics, on a Unix socket or a TCP address).
 *
 * Names follow Prometheus's conventions: uzram_ and the figure, the base
 * unit in the name (_bytes, _seconds), _total for counters, no _total on
 * gauges. Each metric has HELP and TYPE lines, and its HELP ends with
 * "(stat: NAME)", the figure's name in `uzram stat --json`, which is how
 * tests/integration/t76-metrics.sh ties the two together. Every series has
 * the label export. Each figure's Prometheus name, type, unit and HELP are
 * in figures.h's list, next to its stat name, so no figure can be left
 * without them.
 *
 * metrics_http.c serves the same text over HTTP.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "ctl.h"

/* s as a label value (backslash, double quote and newline escaped). */
static const char *label_escape(const char *s, char *out, size_t n)
{
	size_t j = 0;

	for (; *s && j + 3 < n; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			out[j++] = '\\';
			out[j++] = *s == '\n' ? 'n' : *s;
		} else {
			out[j++] = *s;
		}
	}
	out[j] = '\0';
	return out;
}

int format_prometheus(struct server *srv, char *out, size_t n)
{
	static const char *const types[] = {
		[FIG_GAUGE] = "gauge", [FIG_COUNTER] = "counter",
	};
	struct figure f[STATS_MAX_FIGURES];
	size_t nf = stats_figures(srv, f, STATS_MAX_FIGURES), len = 0;
	char exp[512], algo[128];

#define OUT(...) do { \
		int w_ = snprintf(out + len, len < n ? n - len : 0, __VA_ARGS__); \
		if (w_ > 0) \
			len += (size_t)w_; \
	} while (0)

	label_escape(srv->cfg->export.name, exp, sizeof exp);
	OUT("# HELP uzram_info the export and its algorithm "
	    "(stat: export, algorithm)\n"
	    "# TYPE uzram_info gauge\n"
	    "uzram_info{export=\"%s\",algorithm=\"%s\"} 1\n", exp,
	    label_escape(srv->cfg->algorithm, algo, sizeof algo));
	for (size_t i = 0; i < nf; i++) {
		const struct figure_def *d = f[i].def;

		OUT("# HELP uzram_%s %s (stat: %s)\n# TYPE uzram_%s %s\n",
		    d->prom, d->help, d->stat, d->prom, types[d->type]);
		if (d->unit == FIG_NS)
			OUT("uzram_%s{export=\"%s\"} %llu.%09llu\n", d->prom, exp,
			    (unsigned long long)(f[i].v / 1000000000u),
			    (unsigned long long)(f[i].v % 1000000000u));
		else
			OUT("uzram_%s{export=\"%s\"} %llu\n", d->prom, exp,
			    (unsigned long long)f[i].v);
	}
	OUT("# HELP uzram_requests_total NBD requests by type (stat: requests)\n"
	    "# TYPE uzram_requests_total counter\n");
	for (int i = 0; i <= NBD_CMD_NR; i++)
		OUT("uzram_requests_total{export=\"%s\",type=\"%s\"} %llu\n", exp,
		    stats_cmd_names[i],
		    (unsigned long long)atomic_load(&srv->ctr.requests[i]));
#undef OUT
	return len < n ? 0 : -1;
}
