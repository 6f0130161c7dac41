// SPDX-License-Identifier: MIT
/*
 * ctl_alone.c - the control channel without the NBD server: for a device
 * that another front end serves in this process (`uzram mount --via fs`,
 * cli/mount/mount_fs.c), so that `uzram stat` and `uzram ctl` work on it as on
 * `uzram serve`. The same requests and replies (ctl_server.c), on a socket
 * of its own, accepted by one thread; each client is served by a thread
 * of its own, as in the server. The NBD figures stay zero.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"

struct nbd_ctl_alone {
	struct server srv;
	struct nbd_server_config cfg;
	pthread_t thread;
	int stop[2];                /* a pipe: written to stop the thread */
};

static void *accept_main(void *arg)
{
	struct nbd_ctl_alone *c = arg;
	struct pollfd p[2] = { { .fd = c->srv.cfd, .events = POLLIN },
			       { .fd = c->stop[0], .events = POLLIN } };

	while (poll(p, 2, -1) >= 0 || errno == EINTR) {
		if (p[1].revents)
			break;
		if (p[0].revents & POLLIN)
			serve_ctl(&c->srv, c->srv.cfd);
	}
	return NULL;
}

struct nbd_ctl_alone *nbd_ctl_alone_start(struct uzram *dev,
					  const char *algorithm,
					  const char *ctl_path)
{
	struct nbd_ctl_alone *c = calloc(1, sizeof *c);

	if (!c || strlen(ctl_path) >= sizeof c->srv.ctl_path) {
		free(c);
		return NULL;
	}
	c->cfg.export.dev = dev;
	c->cfg.export.name = "";
	c->cfg.algorithm = algorithm;
	/* the device holds the files' data but not the tree, which lives in
	 * the keeper's memory until umount: a device image of it would mount
	 * as nothing */
	c->cfg.no_save = "a uzram mount's tree is saved into its --image at "
			 "umount; a device image alone would not hold it";
	c->srv.cfg = &c->cfg;
	c->srv.started = time(NULL);
	snprintf(c->srv.ctl_path, sizeof c->srv.ctl_path, "%s", ctl_path);
	pthread_mutex_init(&c->srv.lock, NULL);
	pthread_cond_init(&c->srv.gone_cv, NULL);
	c->stop[0] = c->stop[1] = -1;
	c->srv.cfd = listen_unix(ctl_path);
	if (c->srv.cfd < 0 || pipe2(c->stop, O_CLOEXEC) < 0 ||
	    pthread_create(&c->thread, NULL, accept_main, c) != 0) {
		if (c->srv.cfd >= 0) {
			close(c->srv.cfd);
			unlink(ctl_path);
		}
		if (c->stop[0] >= 0) {
			close(c->stop[0]);
			close(c->stop[1]);
		}
		free(c);
		return NULL;
	}
	return c;
}

void nbd_ctl_alone_stop(struct nbd_ctl_alone *c)
{
	if (!c)
		return;
	(void)!write(c->stop[1], "x", 1);
	pthread_join(c->thread, NULL);
	close(c->srv.cfd);
	unlink(c->srv.ctl_path);
	drain_ctl(&c->srv);
	close(c->stop[0]);
	close(c->stop[1]);
	free(c);
}
