// SPDX-License-Identifier: MIT
/*
 * ctl_client.c - the control channel's client, nbd_server_ctl(), which
 * `uzram stat` and `uzram ctl` use: send one request line (ctl_proto.c
 * says which), print the reply; nbd_server_ask() hands it back instead.
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

#include "../common/report.h"
#include "ctl.h"

int nbd_server_ask(const char *path, const char *request, const char *who,
		   char *reply, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = 0, rlen = strlen(request);
	ssize_t r;
	int fd;

	if (strlen(path) >= sizeof sa.sun_path) {
		report_error(who, "socket path too long: %s", path);
		return 1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		report_error(who, "no server answers on %s: %s", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (send(fd, request, rlen, MSG_NOSIGNAL) != (ssize_t)rlen) {
		report_error(who, "%s: %s", path, strerror(errno));
		close(fd);
		return 1;
	}
	while (len < n - 1 && (r = read(fd, reply + len, n - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	reply[len] = '\0';
	if (len == 0) {
		report_error(who, "%s: no reply", path);
		return 1;
	}
	if (!strncmp(reply, "error: ", 7)) {
		/* one line, "error: what\n" */
		report_error(who, "%.*s", (int)strcspn(reply + 7, "\n"),
			     reply + 7);
		return 1;
	}
	return 0;
}

int nbd_server_ctl(const char *path, const char *request, const char *who)
{
	char reply[CTL_REPLY_MAX];
	int r = nbd_server_ask(path, request, who, reply, sizeof reply);

	if (!r)
		fputs(reply, stdout);
	return r;
}
