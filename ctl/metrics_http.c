// SPDX-License-Identifier: MIT
/*
 * metrics_http.c - the listener of `uzram serve --metrics`: plain HTTP/1.0,
 * GET (or HEAD) /metrics answered with format_prometheus() (metrics.c),
 * on a Unix socket or a TCP address; anything else gets 400, 404 or 405.
 * One request per connection, then close, as Prometheus's scrapers and
 * curl are content with.
 *
 * Each HTTP client is answered in a control thread (start_ctl_thread()),
 * so a slow scraper never delays the main loop, and drain_ctl() waits for
 * it at exit like any control request.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ctl.h"


#define HTTP_WAIT_MS 2000   /* for the request's head */
#define HTTP_HEAD_MAX 4096

static void http_send(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t w = send(fd, s, len, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		len -= (size_t)w;
	}
}

static void http_reply(int fd, const char *status, const char *extra,
		       const char *body, bool head_only)
{
	char head[256];
	int w = snprintf(head, sizeof head, "HTTP/1.0 %s\r\n"
			 "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
			 "Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
			 status, strlen(body), extra);

	http_send(fd, head, (size_t)w);
	if (!head_only)
		http_send(fd, body, strlen(body));
}

/* One HTTP request on fd: GET (or HEAD) /metrics, else 404 or 405. */
static void metrics_handle(struct server *srv, int fd)
{
	struct timeval tv = { .tv_sec = HTTP_WAIT_MS / 1000 };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char req[HTTP_HEAD_MAX + 1], *out;
	size_t len = 0;
	bool head;

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	/* the request line and headers, up to the blank line */
	while (len < HTTP_HEAD_MAX && poll(&p, 1, HTTP_WAIT_MS) == 1) {
		ssize_t r = recv(fd, req + len, HTTP_HEAD_MAX - len, 0);

		if (r <= 0)
			break;
		len += (size_t)r;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[len] = '\0';
	if (!strchr(req, '\n')) {
		http_reply(fd, "400 Bad Request", "", "a request line, please\n",
			   false);
		return;
	}
	head = !strncmp(req, "HEAD ", 5);
	if (strncmp(req, "GET ", 4) && !head) {
		http_reply(fd, "405 Method Not Allowed", "Allow: GET, HEAD\r\n",
			   "only GET /metrics\n", false);
		return;
	}
	if (strncmp(strchr(req, ' ') + 1, "/metrics ", 9) &&
	    strncmp(strchr(req, ' ') + 1, "/metrics?", 9)) {
		http_reply(fd, "404 Not Found", "", "try /metrics\n", head);
		return;
	}
	out = malloc(CTL_REPLY_MAX);
	if (!out || format_prometheus(srv, out, CTL_REPLY_MAX) < 0)
		http_reply(fd, "500 Internal Server Error", "",
			   "the figures do not fit\n", head);
	else
		http_reply(fd, "200 OK", "", out, head);
	free(out);
}

int metrics_listen(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;

	if (cfg->metrics_path) {
		if (abs_path(cfg->metrics_path, srv->metrics_path,
			     sizeof srv->metrics_path) < 0) {
			fprintf(stderr, "uzram serve: --metrics: path too long\n");
			return -1;
		}
		srv->mfd = listen_unix(srv->metrics_path);
		if (srv->mfd < 0)
			srv->metrics_path[0] = '\0';
		else
			snprintf(srv->metrics_addr, sizeof srv->metrics_addr,
				 "unix:%s", srv->metrics_path);
	} else {
		const char *host = cfg->metrics_host;
		bool v6 = strchr(host, ':') != NULL;
		char port[8];

		srv->mfd = listen_tcp(host, cfg->metrics_port, false, port);
		if (srv->mfd >= 0)
			snprintf(srv->metrics_addr, sizeof srv->metrics_addr,
				 "http://%s%s%s:%s/metrics", v6 ? "[" : "", host,
				 v6 ? "]" : "", port);
	}
	return srv->mfd < 0 ? -1 : 0;
}

void serve_metrics(struct server *srv)
{
	int fd = accept4(srv->mfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd >= 0)
		start_ctl_thread(srv, fd, metrics_handle,
				 "HTTP/1.0 503 Service Unavailable\r\n"
				 "Content-Length: 0\r\nConnection: close\r\n\r\n");
}

void metrics_close(struct server *srv)
{
	if (srv->mfd < 0)
		return;
	close(srv->mfd);
	srv->mfd = -1;
	if (srv->metrics_path[0])
		unlink(srv->metrics_path);
}
