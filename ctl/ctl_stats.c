// SPDX-License-Identifier: MIT
/*
 * ctl_stats.c - the figures `uzram stat` and SIGUSR1 report: the device's
 * (uzram_stats(), uzram_dict_info()) and the server's counters, as one
 * JSON object or as aligned "name value" lines (metrics.c: the same
 * figures in the Prometheus text format). The figures, their names and
 * how each is read off the snapshot are figures.h's list, written once.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "figures.h"
#include "../common/json.h"

const char *const stats_cmd_names[NBD_CMD_NR + 1] = {
	"read", "write", "disc", "flush", "trim", "cache", "write_zeroes",
	"block_status", "unknown",
};


/* The nf figures f, and the requests by type, as JSON or text into out. */
static int print_figures(struct server *srv, const struct figure *f,
			 size_t nf, bool json, char *out, size_t n)
{
	struct nbd_counters *c = &srv->ctr;
	char name[512]; /* the name, cut: the figures must fit one reply */
	size_t len = 0;

#define OUT(...) do { \
		int w_ = snprintf(out + len, len < n ? n - len : 0, __VA_ARGS__); \
		if (w_ > 0) \
			len += (size_t)w_; \
	} while (0)

	if (json) {
		OUT("{\"export\":\"%s\",\"algorithm\":\"%s\"",
		    json_escape(srv->cfg->export.name, name, sizeof name),
		    srv->cfg->algorithm);
		if (srv->metrics_addr[0])
			OUT(",\"metrics\":\"%s\"", json_escape(srv->metrics_addr,
							     name, sizeof name));
		for (size_t i = 0; i < nf; i++)
			OUT(",\"%s\":%llu", f[i].def->stat, (unsigned long long)f[i].v);
		OUT(",\"requests\":{");
		for (int i = 0; i <= NBD_CMD_NR; i++)
			OUT("%s\"%s\":%llu", i ? "," : "", stats_cmd_names[i],
			    (unsigned long long)atomic_load(&c->requests[i]));
		OUT("}}\n");
	} else {
		if (srv->cfg->export.name[0]) /* no blank first line */
			OUT("%-22s %s\n", "export", srv->cfg->export.name);
		OUT("%-22s %s\n", "algorithm", srv->cfg->algorithm);
		if (srv->metrics_addr[0])
			OUT("%-22s %s\n", "metrics", srv->metrics_addr);
		for (size_t i = 0; i < nf; i++)
			OUT("%-22s %llu\n", f[i].def->stat, (unsigned long long)f[i].v);
		for (int i = 0; i <= NBD_CMD_NR; i++)
			OUT("requests_%-13s %llu\n", stats_cmd_names[i],
			    (unsigned long long)atomic_load(&c->requests[i]));
	}
#undef OUT
	return len < n ? 0 : -1;
}

/* figures.h's list as a table; stats_figures() gives the values in its order. */
static const struct figure_def figure_defs[] = {
#define DEF(stat, prom, type, unit, help, value) { stat, prom, type, unit, help },
	FIGURES(DEF)
#undef DEF
};
#define NFIGURES (sizeof figure_defs / sizeof figure_defs[0])
_Static_assert(NFIGURES <= STATS_MAX_FIGURES, "STATS_MAX_FIGURES too small");

size_t stats_figures(struct server *srv, struct figure *out, size_t max)
{
	struct nbd_counters *c = &srv->ctr;
	struct uzram_stats st;
	struct uzram_dict_info di = { 0 };

	memset(&st, 0, sizeof st);
	(void)uzram_stats(srv->cfg->export.dev, &st, sizeof st);
	/* the device's dictionary (a walk of the table, as zram's mm_stat
	 * is not: only on request) */
	(void)uzram_dict_info(srv->cfg->export.dev, 0, &di);

	const uint64_t v[] = {
#define VALUE(stat, prom, type, unit, help, value) (uint64_t)(value),
		FIGURES(VALUE)
#undef VALUE
	};
	size_t nf = NFIGURES < max ? NFIGURES : max;

	for (size_t i = 0; i < nf; i++)
		out[i] = (struct figure){ &figure_defs[i], v[i] };
	return nf;
}

int format_stats(struct server *srv, bool json, char *out, size_t n)
{
	struct figure f[STATS_MAX_FIGURES];

	return print_figures(srv, f, stats_figures(srv, f, STATS_MAX_FIGURES),
			     json, out, n);
}
