// SPDX-License-Identifier: MIT
/*
 * server.c - the main loop of `uzram serve` and its client list; the
 * files around it are named in internal.h.
 *
 * The main thread owns everything that is not a client: it waits in poll()
 * on the listening socket(s), the control socket and a signalfd (all
 * signals it handles are blocked in every thread, so no handler ever runs).
 * Each accepted client gets a detached thread running nbd_conn_serve(),
 * which may start more threads for that client (see transmission.c).
 *
 *   SIGINT/SIGTERM/SIGHUP  stop accepting, set the shared stopping flag
 *                   (requests read from now on get NBD_ESHUTDOWN), shut the
 *                   read side of every client so its leader sees end of
 *                   input; requests in flight finish and their replies go
 *                   out; then remove the sockets
 *   SIGUSR1         print the figures (ctl_stats.c) to stderr
 *   SIGUSR2         (a front end with a leave hook: --ublk on a kept
 *                   store) as SIGTERM, but the front end leaves its
 *                   device to a new server instead of ending it
 *   SIGCHLD         (--run, captive.c) the command exited: stop as for
 *                   SIGTERM
 *   PATH.ctl        `uzram stat` and `uzram ctl` (ctl_server.c; where the socket
 *                   is: ctl_path.c); each control client is served by a
 *                   thread of its own, so the main loop only accepts it
 *   --image FILE    after the clients are gone, the device is saved to FILE
 *   cfg->frontend   (--ublk) started before the banner, stopped after the
 *                   clients and before the save
 *
 * nbd_server_run() is setup (server_init, server_listen), the loop
 * (server_loop) and the drain (server_drain). At shutdown, control threads
 * still running count as requests in flight: the server waits for them as
 * for clients before it lets go of the device.
 *
 * Lock rule: srv->lock guards the client list and the count of control
 * threads, and is acquired only when a client or control thread comes or
 * goes and at shutdown, never on the request path and never while a
 * control request runs; the counters are atomics (struct nbd_counters).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/report.h"
#include "internal.h"

struct client {
	struct server *srv;
	int fd;
	char peer[80];       /* from accept(): "HOST port PORT" */
	struct client *prev, *next;
};

/* ---- clients ---- */

static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct server *srv = cl->srv;

	(void)nbd_conn_serve_peer(&srv->export, &srv->ctr, cl->fd, cl->fd,
				  cl->peer[0] ? cl->peer : NULL);
	pthread_mutex_lock(&srv->lock);
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		srv->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	srv->nclients--;
	close(cl->fd);
	atomic_fetch_sub(&srv->ctr.conns_current, 1);
	pthread_cond_broadcast(&srv->gone_cv);
	pthread_mutex_unlock(&srv->lock);
	free(cl);
	return NULL;
}

static void accept_client(struct server *srv, int lfd, bool tcp)
{
	struct client *cl;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;
	int fd, one = 1, sndbuf = NBD_UNIX_SNDBUF;

	/* the peer now: once a client has hung up, getpeername() cannot say */
	fd = accept4(lfd, (struct sockaddr *)&ss, &sslen, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM)
			(void)poll(NULL, 0, 50); /* do not spin until one closes */
		return;
	}
	pthread_mutex_lock(&srv->lock);
	if (srv->cfg->max_connections &&
	    srv->nclients >= srv->cfg->max_connections) {
		pthread_mutex_unlock(&srv->lock);
		ctr_add(&srv->ctr.conns_refused, 1);
		close(fd);
		return;
	}
	cl = calloc(1, sizeof *cl);
	if (!cl) {
		pthread_mutex_unlock(&srv->lock);
		close(fd);
		return;
	}
	if (tcp) {
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		/* a client whose host vanished does not hold its slot forever */
		(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	} else {
		/*
		 * A Unix socket holds only sndbuf bytes of replies (212 KiB by
		 * default): a 256 KiB read reply would put the sending thread
		 * to sleep until the client drained it, so make room for whole
		 * replies (bench/notes.md, "Server design figures"). The
		 * kernel caps the size at net.core.wmem_max; where that is the
		 * usual 212 KiB this changes nothing. TCP tunes its own.
		 */
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	}
	cl->srv = srv;
	cl->fd = fd;
	if (tcp) {
		char host[64], port[8]; /* numeric: INET6_ADDRSTRLEN, "65535" */

		if (!getnameinfo((struct sockaddr *)&ss, sslen, host,
				 sizeof host, port, sizeof port,
				 NI_NUMERICHOST | NI_NUMERICSERV))
			snprintf(cl->peer, sizeof cl->peer, "%s port %s",
				 host, port);
	} else {
		snprintf(cl->peer, sizeof cl->peer, "a Unix socket client");
	}
	cl->next = srv->clients;
	if (cl->next)
		cl->next->prev = cl;
	srv->clients = cl;
	srv->nclients++;
	ctr_add(&srv->ctr.conns_current, 1);
	ctr_add(&srv->ctr.conns_total, 1);
	if (start_detached(client_main, cl)) {
		srv->clients = cl->next;
		if (cl->next)
			cl->next->prev = NULL;
		srv->nclients--;
		atomic_fetch_sub(&srv->ctr.conns_current, 1);
		close(fd);
		free(cl);
	}
	pthread_mutex_unlock(&srv->lock);
}

/* Stop all clients: first let them finish, then cut them off. */
static void drain_clients(struct server *srv)
{
	struct timespec deadline;
	int how = SHUT_RD;

	pthread_mutex_lock(&srv->lock);
	for (int round = 0; round < 2 && srv->nclients > 0; round++) {
		for (struct client *cl = srv->clients; cl; cl = cl->next)
			(void)shutdown(cl->fd, how);
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += DRAIN_SECS;
		while (srv->nclients > 0 &&
		       pthread_cond_timedwait(&srv->gone_cv, &srv->lock,
					      &deadline) != ETIMEDOUT)
			;
		how = SHUT_RDWR;
	}
	pthread_mutex_unlock(&srv->lock);
}

/*
 * The server's state before it listens: the buffer budget, checked
 * against --max-connections, the client list, and the signals, blocked in
 * every thread and read from srv->sfd. 0, or the exit status.
 */
static int server_init(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	pthread_condattr_t ca;
	sigset_t mask;

	if (nbd_shared_init(&srv->shared, cfg->buffer_limit,
			    cfg->handshake_secs, cfg->idle_secs) < 0) {
		report_error("serve", "bad buffer limit %zu",
			cfg->buffer_limit);
		return 1;
	}
	srv->shared.resident_buffers = cfg->resident_buffers;
	if (!cfg->max_connections ||
	    cfg->max_connections > nbd_max_connections_for(cfg->buffer_limit)) {
		report_error("serve", "a buffer limit of %zu bytes serves "
			"at most %u connections (%u KiB each, for what an idle "
			"one keeps, in half the budget): lower --max-connections "
			"or raise --buffer-limit", cfg->buffer_limit,
			nbd_max_connections_for(cfg->buffer_limit),
			2 * NBD_IDLE_BUF >> 10);
		nbd_shared_destroy(&srv->shared);
		return 2;
	}
	srv->export.shared = &srv->shared;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* immune to clock steps */
	pthread_mutex_init(&srv->lock, NULL);
	pthread_cond_init(&srv->gone_cv, &ca);
	pthread_condattr_destroy(&ca);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	if (cfg->run)
		sigaddset(&mask, SIGCHLD);
	if (cfg->frontend && cfg->frontend->leave)
		sigaddset(&mask, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by every thread */
	srv->sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (srv->sfd < 0) {
		report_error("serve", "signalfd: %s", strerror(errno));
		nbd_shared_destroy(&srv->shared);
		return 1;
	}
	return 0;
}

/* Close the export's sockets; remove the one we bound, not systemd's. */
static void close_listeners(struct server *srv)
{
	for (unsigned i = 0; i < srv->nlfd; i++)
		close(srv->lfd[i]);
	srv->nlfd = 0;
	if (!srv->tcp && !srv->activated)
		unlink(srv->sock_path);
}

/*
 * The export's socket (srv->lfd) and the control socket (srv->cfd), or
 * those systemd passed (activation.c); 0 or -1.
 */
static int server_listen(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	int n = activation_receive(srv);

	if (n < 0)
		return -1;
	if (n == 0) {
		srv->tcp = cfg->socket_path == NULL;
		if (srv->tcp) {
			snprintf(srv->tcp_host, sizeof srv->tcp_host, "%s",
				 cfg->tcp_host);
			snprintf(srv->tcp_port, sizeof srv->tcp_port, "%s",
				 cfg->tcp_port);
		} else if (abs_path(cfg->socket_path, srv->sock_path,
				    sizeof srv->sock_path) < 0) {
			report_error("serve", "socket path too long");
			return -1;
		}
	}
	/* TCP first: the control socket is named after the port bound */
	if (!srv->activated && srv->tcp) {
		char bound[NI_MAXSERV];

		srv->lfd[0] = listen_tcp(srv->tcp_host, srv->tcp_port,
					 !nbd_tls_required(cfg->export.tls),
					 bound);
		if (srv->lfd[0] < 0)
			return -1;
		srv->nlfd = 1;
		snprintf(srv->tcp_port, sizeof srv->tcp_port, "%s", bound);
	}
	if (srv->cfd < 0 &&
	    ctl_path_find(cfg->ctl_socket, srv->tcp ? NULL : srv->sock_path,
			  srv->tcp_port, true, "serve", srv->ctl_path,
			  sizeof srv->ctl_path) < 0) {
		close_listeners(srv);
		return -1;
	}
	if (!srv->activated && !srv->tcp) {
		srv->lfd[0] = listen_unix(srv->sock_path);
		if (srv->lfd[0] < 0)
			return -1;
		srv->nlfd = 1;
	}
	if (srv->cfd < 0) {
		srv->cfd = listen_unix(srv->ctl_path);
		if (srv->cfd < 0) {
			close_listeners(srv);
			return -1;
		}
		srv->own_ctl = true;
	}
	/* accept() must never block the main thread */
	(void)fcntl(srv->cfd, F_SETFL, fcntl(srv->cfd, F_GETFL) | O_NONBLOCK);
	if ((cfg->metrics_path || cfg->metrics_port) && metrics_listen(srv) < 0) {
		close(srv->cfd);
		if (srv->own_ctl)
			unlink(srv->ctl_path);
		close_listeners(srv);
		return -1;
	}
	if (srv->mfd >= 0)
		(void)fcntl(srv->mfd, F_SETFL,
			    fcntl(srv->mfd, F_GETFL) | O_NONBLOCK);
	return 0;
}

/*
 * Accept clients and control clients and answer signals until one says
 * stop: SIGINT, SIGTERM, SIGHUP, or (--run) the command's exit, whose
 * status goes to *run_status.
 */
static void server_loop(struct server *srv, int *run_status)
{
	struct signalfd_siginfo si;
	struct pollfd pf[3 + NBD_MAX_LISTEN];
	bool tcp[NBD_MAX_LISTEN];
	unsigned npf = 3 + srv->nlfd;
	char out[4096];

	pf[0] = (struct pollfd){ .fd = srv->sfd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = srv->cfd, .events = POLLIN };
	pf[2] = (struct pollfd){ .fd = srv->mfd, .events = POLLIN }; /* or -1 */
	for (unsigned i = 0; i < srv->nlfd; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof ss;

		pf[3 + i] = (struct pollfd){ .fd = srv->lfd[i], .events = POLLIN };
		tcp[i] = getsockname(srv->lfd[i], (struct sockaddr *)&ss,
				     &len) == 0 && ss.ss_family != AF_UNIX;
	}
	for (;;) {
		if (poll(pf, npf, -1) < 0) {
			if (errno == EINTR)
				continue;
			report_error("serve", "poll: %s", strerror(errno));
			break;
		}
		for (unsigned i = 0; i < srv->nlfd; i++)
			if (pf[3 + i].revents & POLLIN)
				accept_client(srv, srv->lfd[i], tcp[i]);
		if (pf[1].revents & POLLIN)
			serve_ctl(srv, srv->cfd);
		if (pf[2].revents & POLLIN)
			serve_metrics(srv);
		if (!(pf[0].revents & POLLIN) ||
		    read(srv->sfd, &si, sizeof si) != sizeof si)
			continue;
		if (si.ssi_signo == SIGUSR1) {
			format_stats(srv, false, out, sizeof out);
			fputs(out, stderr);
			continue;
		}
		if (si.ssi_signo == SIGCHLD) {
			if (command_exited(srv, run_status))
				break;
			continue;
		}
		srv->leaving = si.ssi_signo == SIGUSR2;
		report_error("serve", "got SIG%s, finishing requests "
			"in flight%s", sigabbrev_np((int)si.ssi_signo),
			srv->leaving ? ", then handing the device over" : "");
		break;
	}
}

/*
 * Stop accepting, let the clients and control requests finish, remove the
 * sockets, then save the --image. Returns the exit status: 1 if a thread
 * did not finish in time (then *busy is true) or the save failed, else
 * run_status with --run.
 */
static int server_drain(struct server *srv, int run_status, bool *busy)
{
	const struct nbd_server_config *cfg = srv->cfg;
	char out[4096];
	int status;

	atomic_store(&srv->shared.stopping, true);
	close_listeners(srv);
	drain_clients(srv);
	close(srv->cfd);
	if (srv->own_ctl)
		unlink(srv->ctl_path);
	metrics_close(srv);
	drain_ctl(srv);
	if (cfg->frontend && srv->frontend_up)
		(srv->leaving ? cfg->frontend->leave :
		 cfg->frontend->stop)(cfg->frontend->arg);
	/* A client that ignored both shutdowns still holds the device. */
	pthread_mutex_lock(&srv->lock);
	*busy = srv->nclients || srv->ctl_running;
	pthread_mutex_unlock(&srv->lock);
	status = *busy ? 1 : 0;
	if (status)
		report_error("serve", "%s did not finish in time",
			srv->nclients ? "clients" : "control requests");
	else if (cfg->run)
		status = run_status;
	/* --read-only: nothing a client did can have changed the device, and
	 * the image stays as it was (it was rewritten whole at every end) */
	if (cfg->image && !cfg->export.read_only) {
		/* a client that did not finish may still write: saves allow it */
		if (save_image(srv, cfg->image, out, sizeof out) < 0) {
			fprintf(stderr, "uzram %s: %s", report_name("serve"),
				out + 7);
			status = 1;
		} else {
			fprintf(stderr, "uzram %s: %s", report_name("serve"),
				out + 4);
		}
	}
	return status;
}

int nbd_server_run(const struct nbd_server_config *cfg, bool *busy)
{
	struct server srv = { .cfg = cfg, .started = time(NULL),
			      .export = cfg->export, .sfd = -1, .cfd = -1,
			      .mfd = -1 };
	int status, run_status = 1;

	*busy = false;
	status = server_init(&srv);
	if (status)
		return status; /* server_init() cleaned up after itself */
	if (server_listen(&srv) < 0) {
		status = 1;
		goto out;
	}
	make_uri(&srv);
	srv.frontend_up = !cfg->frontend ||
			  cfg->frontend->start(cfg->frontend->arg) == 0;
	if (srv.frontend_up)
		notify_ready(&srv);
	if (!srv.frontend_up) {
		/* it said why; drain at once */
	} else if (!cfg->run) {
		print_banner(&srv);
		server_loop(&srv, &run_status);
	} else if (start_command(&srv) == 0) {
		server_loop(&srv, &run_status);
	}
	status = server_drain(&srv, run_status, busy);
	if (!srv.frontend_up)
		status = 1;
out:
	if (srv.sfd >= 0)
		close(srv.sfd);
	if (!*busy) /* else a stuck thread may still use it */
		nbd_shared_destroy(&srv.shared);
	return status;
}
