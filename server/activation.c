// SPDX-License-Identifier: MIT
/*
 * activation.c - `uzram serve` started by systemd: socket activation
 * (sd_listen_fds(3)) and readiness (sd_notify(3)), through libsystemd.
 *
 * A .socket unit binds the export's sockets and hands them over as file
 * descriptors 3, 4, ... with LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES in
 * the environment, as for nbdkit. Every passed socket must be a listening
 * stream socket; the one named "ctl" (FileDescriptorName=ctl) is the
 * control socket, every other one (Unix or TCP, at most NBD_MAX_LISTEN)
 * carries NBD. The first NBD socket names the export in the URI and, when
 * no "ctl" socket is passed, places the control socket as if it had been
 * given with --socket or --tcp. Sockets systemd made are never unlinked:
 * they outlive the server, which is the point of activation.
 *
 * Readiness: once the server listens, READY=1 (and the URI as STATUS=)
 * goes to $NOTIFY_SOCKET, for Type=notify units, and NOTIFY_SOCKET is
 * removed from the environment so that --run's command does not inherit
 * it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "internal.h"

bool nbd_socket_activated(void)
{
	return sd_listen_fds(0) > 0;
}

/* The path a passed Unix socket is bound to, into out; 0 or -1. */
static int unix_path(int fd, char *out, size_t n)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof sa;
	size_t plen;

	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0 ||
	    sa.sun_family != AF_UNIX)
		return -1;
	plen = len - offsetof(struct sockaddr_un, sun_path);
	if (plen == 0 || sa.sun_path[0] == '\0' || plen >= n)
		return -1;
	memcpy(out, sa.sun_path, plen);
	out[plen] = '\0';
	return 0;
}

/* The first NBD socket's address into srv: sock_path, or tcp_host/port. */
static int activated_address(struct server *srv, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int r;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		fprintf(stderr, "uzram serve: passed socket %d: %s\n", fd,
			strerror(errno));
		return -1;
	}
	if (ss.ss_family == AF_UNIX) {
		if (unix_path(fd, srv->sock_path, sizeof srv->sock_path) < 0) {
			fprintf(stderr, "uzram serve: passed Unix socket %d has "
				"no path name (abstract or unbound): clients "
				"need one\n", fd);
			return -1;
		}
		srv->tcp = false;
		return 0;
	}
	r = getnameinfo((struct sockaddr *)&ss, len, srv->tcp_host,
			sizeof srv->tcp_host, srv->tcp_port, sizeof srv->tcp_port,
			NI_NUMERICHOST | NI_NUMERICSERV);
	if (r) {
		fprintf(stderr, "uzram serve: passed socket %d: %s\n", fd,
			gai_strerror(r));
		return -1;
	}
	srv->tcp = true;
	return 0;
}

int activation_adopt(struct server *srv)
{
	char **names = NULL;
	int n, r = -1;

	n = sd_listen_fds_with_names(1, &names);
	if (n <= 0) {
		if (n < 0)
			fprintf(stderr, "uzram serve: LISTEN_FDS: %s\n",
				strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "unknown";
		bool ctl = !strcmp(name, "ctl");

		(void)fcntl(fd, F_SETFD, FD_CLOEXEC); /* not for --run's command */
		if ((ctl ? sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0)
			 : sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1)) <= 0) {
			fprintf(stderr, "uzram serve: passed file descriptor %d "
				"(%s) is not a listening stream socket%s\n", fd,
				name, ctl ? " of the Unix family" : "");
			goto out;
		}
		if (ctl && srv->cfd >= 0) {
			fprintf(stderr, "uzram serve: two sockets named ctl "
				"were passed (%d and %d)\n", srv->cfd, fd);
			goto out;
		}
		if (!ctl && srv->nlfd == NBD_MAX_LISTEN) {
			fprintf(stderr, "uzram serve: more than %d NBD sockets "
				"were passed\n", NBD_MAX_LISTEN);
			goto out;
		}
		if (ctl)
			srv->cfd = fd;
		else
			srv->lfd[srv->nlfd++] = fd;
	}
	if (!srv->nlfd) {
		fprintf(stderr, "uzram serve: systemd passed only the control "
			"socket (ctl), no socket for NBD\n");
		goto out;
	}
	if (srv->cfd >= 0 &&
	    unix_path(srv->cfd, srv->ctl_path, sizeof srv->ctl_path) < 0) {
		fprintf(stderr, "uzram serve: the passed control socket %d has "
			"no path name: uzram stat and ctl need one\n", srv->cfd);
		goto out;
	}
	srv->activated = true;
	r = activated_address(srv, srv->lfd[0]);
out:
	if (names)
		for (int i = 0; i < n; i++)
			free(names[i]);
	free(names);
	return r < 0 ? -1 : n;
}

void notify_ready(const struct server *srv)
{
	(void)sd_notifyf(1, "READY=1\nSTATUS=serving %s", srv->uri);
}
