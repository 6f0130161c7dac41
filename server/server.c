/*
 * server.c - the listening side of `uzram serve`: sockets, one thread per
 * client, signals, the control channel and the figures it reports.
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
 *   SIGUSR1         print the figures to stderr
 *   SIGCHLD         (--run) the command exited: stop as for SIGTERM
 *   PATH.ctl        `uzram stat` connects, sends "json\n" or "text\n" and
 *                   gets the same figures back (where it is: ctlpath.c);
 *                   `uzram ctl` sends commands (ctl.c)
 *   --image FILE    after the clients are gone, the device is saved to FILE
 *
 * The main thread only accepts on the control socket: each control client
 * is served by a detached thread of its own (at most CTL_MAX at once; more
 * get "error: busy"), which waits up to CTL_WAIT_MS for the request line
 * and runs it. So a silent control client, or a compact or recompress
 * that runs for seconds, never delays new NBD clients or a signal. At
 * shutdown, control threads still running count as requests in flight:
 * the server waits for them as for clients before it lets go of the
 * device.
 *
 * Lock rule: srv->lock guards the client list and the count of control
 * threads, and is taken only when a client or control thread comes or
 * goes and at shutdown, never on the request path and never while a
 * control request runs; the counters are atomics (struct nbd_counters).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define DRAIN_SECS 10  /* how long in-flight requests may take at exit */
#define CTL_WAIT_MS 1000
#define CTL_MAX 16     /* control requests served at once */

struct client {
	struct server *srv;
	int fd;
	struct client *prev, *next;
};

struct server {
	const struct nbd_server_config *cfg;
	struct nbd_export export; /* cfg's, with the shared state */
	struct nbd_shared shared;
	unsigned ctl_running;     /* control threads, under lock */
	struct nbd_counters ctr;
	time_t started;
	pthread_mutex_t lock;
	pthread_cond_t gone_cv; /* a client left */
	struct client *clients; /* under lock */
	unsigned nclients;      /* under lock */
	char sock_path[PATH_MAX];
	char ctl_path[PATH_MAX + 8];
	char uri[PATH_MAX + 600];
	pid_t child;            /* --run's command, 0 if none or reaped */
};

static const char *const cmd_names[NBD_CMD_NR + 1] = {
	"read", "write", "disc", "flush", "trim", "cache", "write_zeroes",
	"block_status", "unknown",
};

/* ---- figures ---- */

/* s as the inside of a JSON string, cut to fit n bytes. */
static const char *json_escape(const char *s, char *out, size_t n)
{
	size_t j = 0;

	for (; *s && j + 7 < n; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[j++] = '\\';
			out[j++] = (char)ch;
		} else if (ch < 0x20) {
			j += (size_t)snprintf(out + j, n - j, "\\u%04x", ch);
		} else {
			out[j++] = (char)ch;
		}
	}
	out[j] = '\0';
	return out;
}

static int format_stats(struct server *srv, bool json, char *out, size_t n)
{
	struct nbd_counters *c = &srv->ctr;
	struct uzram_stats st;
	char name[512];
	size_t len = 0;

	struct uzram_dict_info di = { 0 };

	memset(&st, 0, sizeof st);
	(void)uzram_stats(srv->cfg->export.dev, &st, sizeof st);
	/* the device's dictionary (a walk of the table, as zram's mm_stat
	 * is not: only on request) */
	(void)uzram_dict_info(srv->cfg->export.dev, 0, &di);

	const struct { const char *name; uint64_t v; } f[] = {
		{ "disksize", st.disksize },
		{ "orig_data_size", st.orig_data_size },
		{ "compr_data_size", st.compr_data_size },
		{ "mem_used_total", st.mem_used_total },
		{ "mem_limit", st.mem_limit },
		{ "mem_used_max", st.mem_used_max },
		{ "same_pages", st.same_pages },
		{ "pages_compacted", st.pages_compacted },
		{ "huge_pages", st.huge_pages },
		{ "pages_stored", st.pages_stored },
		{ "failed_reads", st.failed_reads },
		{ "failed_writes", st.failed_writes },
		{ "invalid_io", st.invalid_io },
		{ "table_bytes", st.table_bytes },
		{ "pages_unchanged", st.pages_unchanged },
		{ "pages_recompressed", st.pages_recompressed },
		{ "dict_bytes", di.dict_size },
		{ "dict_pages", di.dict_size ? di.pages : 0 },
		{ "dict_pages_previous", di.pages_previous },
		{ "bd_capacity", st.bd_capacity },
		{ "bd_count", st.bd_count },
		{ "bd_bytes", st.bd_bytes },
		{ "bd_space", st.bd_space },
		{ "bd_reads", st.bd_reads },
		{ "bd_writes", st.bd_writes },
		{ "bd_failed_reads", st.bd_failed_reads },
		{ "bd_failed_writes", st.bd_failed_writes },
		{ "bd_wb_limit", st.bd_wb_limit },
		{ "bd_compacted", st.bd_compacted },
		{ "pages_written_back", st.pages_written_back },
		{ "pages_written_through", st.pages_written_through },
		{ "policy_runs", st.policy_runs },
		{ "policy_recompressed", st.policy_recompressed },
		{ "policy_written_back", st.policy_written_back },
		{ "pages_deduped", st.pages_deduped },
		{ "dedup_bytes_saved", st.dedup_bytes_saved },
		{ "dedup_index_bytes", st.dedup_index_bytes },
		{ "slot_lock_waits", st.slot_lock_waits },
		{ "slot_lock_wait_ns", st.slot_lock_wait_ns },
		{ "slot_read_waits", st.slot_read_waits },
		{ "slot_read_wait_ns", st.slot_read_wait_ns },
		{ "class_lock_waits", st.class_lock_waits },
		{ "class_lock_wait_ns", st.class_lock_wait_ns },
		{ "frame_waits", st.frame_waits },
		{ "frame_wait_ns", st.frame_wait_ns },
		{ "connections_current", atomic_load(&c->conns_current) },
		{ "connections_total", atomic_load(&c->conns_total) },
		{ "connections_refused", atomic_load(&c->conns_refused) },
		{ "bytes_read", atomic_load(&c->bytes_read) },
		{ "bytes_written", atomic_load(&c->bytes_written) },
		{ "errors", atomic_load(&c->errors) },
		{ "protocol_errors", atomic_load(&c->proto_errors) },
		{ "uptime_seconds", (uint64_t)(time(NULL) - srv->started) },
	};
#define OUT(...) do { \
		int w_ = snprintf(out + len, len < n ? n - len : 0, __VA_ARGS__); \
		if (w_ > 0) \
			len += (size_t)w_; \
	} while (0)

	if (json) {
		OUT("{\"export\":\"%s\",\"algorithm\":\"%s\"",
		    json_escape(srv->cfg->export.name, name, sizeof name),
		    srv->cfg->algorithm);
		for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
			OUT(",\"%s\":%llu", f[i].name, (unsigned long long)f[i].v);
		OUT(",\"requests\":{");
		for (int i = 0; i <= NBD_CMD_NR; i++)
			OUT("%s\"%s\":%llu", i ? "," : "", cmd_names[i],
			    (unsigned long long)atomic_load(&c->requests[i]));
		OUT("}}\n");
	} else {
		OUT("%-22s %s\n%-22s %s\n", "export", srv->cfg->export.name,
		    "algorithm", srv->cfg->algorithm);
		for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
			OUT("%-22s %llu\n", f[i].name, (unsigned long long)f[i].v);
		for (int i = 0; i <= NBD_CMD_NR; i++)
			OUT("requests_%-13s %llu\n", cmd_names[i],
			    (unsigned long long)atomic_load(&c->requests[i]));
	}
#undef OUT
	return len < n ? 0 : -1;
}

/* Save the device to path (the --image one if NULL); the reply in out. */
static int save_image(struct server *srv, const char *path, char *out,
		      size_t n)
{
	struct timespec t0, t1;
	int r;

	if (!path) {
		snprintf(out, n, "error: save: no path given, and the server "
			 "has no --image\n");
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = uzram_save(srv->cfg->export.dev, path, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) {
		snprintf(out, n, "error: %s\n", uzram_last_error());
		return -1;
	}
	snprintf(out, n, "ok: saved %s in %.3f s\n", path,
		 (double)(t1.tv_sec - t0.tv_sec) +
		 (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}

/*
 * "save" (to the server's --image) or "save PATH" (an absolute path): the
 * one request ctl.c does not parse, as it needs the server's --image.
 */
static void save_request(struct server *srv, const char *req, size_t len,
			 char *out, size_t n)
{
	char path[PATH_MAX];

	while (len > 4 && (req[len - 1] == '\n' || req[len - 1] == '\r'))
		len--;
	if (len == 4) {
		save_image(srv, srv->cfg->image, out, n);
		return;
	}
	if (len - 5 >= sizeof path || req[5] != '/' ||
	    memchr(req + 5, '\0', len - 5)) {
		snprintf(out, n, "error: save wants an absolute path\n");
		return;
	}
	memcpy(path, req + 5, len - 5);
	path[len - 5] = '\0';
	save_image(srv, path, out, n);
}

/* One request line of len bytes from the control socket; the reply in out. */
static void ctl_request(struct server *srv, const char *req, size_t len,
			char *out, size_t n)
{
	struct nbd_ctl_req rq;

	if (len >= 4 && !memcmp(req, "save", 4) &&
	    (len == 4 || req[4] == ' ' || req[4] == '\n' || req[4] == '\r')) {
		save_request(srv, req, len, out, n);
		return;
	}
	if (nbd_ctl_parse(req, len, &rq, out, n) < 0)
		return;
	if (rq.op == NBD_CTL_JSON || rq.op == NBD_CTL_TEXT)
		format_stats(srv, rq.op == NBD_CTL_JSON, out, n);
	else
		nbd_ctl_execute(srv->cfg->export.dev, &rq, out, n);
}

struct ctl_client {
	struct server *srv;
	int fd;
};

static void *ctl_main(void *arg)
{
	struct ctl_client *cc = arg;
	struct server *srv = cc->srv;
	struct pollfd p = { .fd = cc->fd, .events = POLLIN };
	char req[PATH_MAX + 16], out[4096];
	ssize_t r;

	if (poll(&p, 1, CTL_WAIT_MS) == 1) {
		r = recv(cc->fd, req, sizeof req, MSG_DONTWAIT);
		if (r > 0) {
			ctl_request(srv, req, (size_t)r, out, sizeof out);
			(void)send(cc->fd, out, strlen(out),
				   MSG_NOSIGNAL | MSG_DONTWAIT);
		}
	}
	close(cc->fd);
	free(cc);
	pthread_mutex_lock(&srv->lock);
	srv->ctl_running--;
	pthread_cond_broadcast(&srv->gone_cv);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/* Accept one control client and hand it to a thread of its own. */
static void serve_ctl(struct server *srv, int lfd)
{
	static const char busy[] = "error: busy, try again\n";
	struct ctl_client *cc;
	pthread_attr_t attr;
	pthread_t tid;
	bool started = false;
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	cc = malloc(sizeof *cc);
	pthread_mutex_lock(&srv->lock);
	if (cc && srv->ctl_running < CTL_MAX) {
		*cc = (struct ctl_client){ srv, fd };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256u << 10);
		started = !pthread_create(&tid, &attr, ctl_main, cc);
		pthread_attr_destroy(&attr);
		srv->ctl_running += started;
	}
	pthread_mutex_unlock(&srv->lock);
	if (!started) {
		(void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		free(cc);
	}
}

/* Wait (at most DRAIN_SECS) for control requests still running. */
static void drain_ctl(struct server *srv)
{
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += DRAIN_SECS;
	pthread_mutex_lock(&srv->lock);
	while (srv->ctl_running > 0 &&
	       pthread_cond_timedwait(&srv->gone_cv, &srv->lock,
				      &deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&srv->lock);
}

/* ---- clients ---- */

static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct server *srv = cl->srv;

	(void)nbd_conn_serve(&srv->export, &srv->ctr, cl->fd, cl->fd);
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
	pthread_attr_t attr;
	struct client *cl;
	pthread_t tid;
	int fd, one = 1, sndbuf = NBD_UNIX_SNDBUF;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
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
		 * to sleep until the client drained it. With room for whole
		 * replies, nbdcopy's copy out took 1,200-2,600 context switches
		 * instead of 5,300-6,600 and 15-20% less server CPU. The
		 * kernel caps the size at net.core.wmem_max (4 MiB on the VM
		 * measured; where it is the usual 212 KiB this changes
		 * nothing). TCP tunes its own.
		 */
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	}
	cl->srv = srv;
	cl->fd = fd;
	cl->next = srv->clients;
	if (cl->next)
		cl->next->prev = cl;
	srv->clients = cl;
	srv->nclients++;
	ctr_add(&srv->ctr.conns_current, 1);
	ctr_add(&srv->ctr.conns_total, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256u << 10);
	if (pthread_create(&tid, &attr, client_main, cl)) {
		srv->clients = cl->next;
		if (cl->next)
			cl->next->prev = NULL;
		srv->nclients--;
		atomic_fetch_sub(&srv->ctr.conns_current, 1);
		close(fd);
		free(cl);
	}
	pthread_attr_destroy(&attr);
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

/* ---- sockets ---- */

/* 1 if a server answers on a Unix socket at path, else 0. */
static int unix_alive(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	r = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return r;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof sa.sun_path) {
		fprintf(stderr, "uzram serve: socket path too long: %s\n", path);
		return -1;
	}
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			fprintf(stderr, "uzram serve: %s exists and is not a socket\n",
				path);
			return -1;
		}
		if (unix_alive(path)) {
			fprintf(stderr, "uzram serve: a server is already running on %s\n",
				path);
			return -1;
		}
		unlink(path); /* stale */
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	old = umask(0177); /* the socket is born with mode 0600 */
	r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0 || listen(fd, 128) < 0)
		goto fail;
	return fd;
fail:
	fprintf(stderr, "uzram serve: cannot listen on %s: %s\n", path,
		strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Whether a is on the loopback interface: 127.0.0.0/8, ::1 or ::ffff:127.x. */
static bool loopback(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)a)
			      ->sin_addr.s_addr) >> 24) == 127;
	if (a->sa_family == AF_INET6) {
		const struct in6_addr *ip =
			&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(ip) ||
		       (IN6_IS_ADDR_V4MAPPED(ip) && ip->s6_addr[12] == 127);
	}
	return false;
}

/* plaintext: clients may skip TLS, so warn off loopback. */
static int listen_tcp(const char *host, const char *port, bool plaintext)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai, *a;
	int fd = -1, one = 1, r;

	r = getaddrinfo(host, port, &hints, &ai);
	if (r) {
		fprintf(stderr, "uzram serve: cannot resolve %s:%s: %s\n", host,
			port, gai_strerror(r));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0)
			continue;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
		    listen(fd, 128) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd >= 0 && plaintext && !loopback(a->ai_addr))
		fprintf(stderr, "uzram serve: warning: serving %s:%s without "
			"--tls=require: anyone who can reach it can read and "
			"write the device\n", host, port);
	freeaddrinfo(ai);
	if (fd < 0)
		fprintf(stderr, "uzram serve: cannot listen on %s:%s: %s\n",
			host, port, strerror(errno));
	return fd;
}

/* path made absolute, so the printed URI works from anywhere; 0 or -1. */
static int abs_path(const char *path, char *out, size_t n)
{
	char cwd[PATH_MAX];
	int r;

	if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
		r = snprintf(out, n, "%s", path);
	else
		r = snprintf(out, n, "%s/%s", cwd, path[0] == '.' &&
			     path[1] == '/' ? path + 2 : path);
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

/* The URI of the export; nbds: with TLS (the client adds its keys). */
static void make_uri(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	const char *s = cfg->export.tls ? "s" : "";

	if (cfg->socket_path)
		snprintf(srv->uri, sizeof srv->uri, "nbd%s+unix:///%s?socket=%s",
			 s, cfg->export.name, srv->sock_path);
	else
		snprintf(srv->uri, sizeof srv->uri, "nbd%s://%s:%s/%s", s,
			 cfg->tcp_host, cfg->tcp_port, cfg->export.name);
}

static void print_banner(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	const char *name = cfg->export.name, *uri = srv->uri;
	char nflag[NBD_MAX_STRING + 8] = "";

	if (name[0])
		snprintf(nflag, sizeof nflag, " -N %s", name);
	printf("uzram: serving %s (%llu bytes, %s%s)\n", cfg->export.description,
	       (unsigned long long)cfg->export.size, cfg->algorithm,
	       cfg->export.read_only ? ", read-only" : "");
	printf("uri: %s\n", uri);
	if (cfg->socket_path)
		printf("  nbd-client: nbd-client -unix %s /dev/nbd0%s\n",
		       srv->sock_path, nflag);
	else
		printf("  nbd-client: nbd-client %s %s /dev/nbd0%s\n",
		       cfg->tcp_host, cfg->tcp_port, nflag);
	printf("  qemu:       qemu-img info '%s'   (or -drive file=%s,format=raw)\n",
	       uri, uri);
	printf("  nbdfuse:    mkdir -p /tmp/uzram && nbdfuse /tmp/uzram '%s' &  (file /tmp/uzram/nbd)\n",
	       uri);
	printf("  stats:      uzram stat --ctl-socket %s   (or kill -USR1 %d)\n",
	       srv->ctl_path, (int)getpid());
	printf("ready\n");
	fflush(stdout);
}

/*
 * --run: start sh -c CMD with the server's address in its environment, its
 * signal mask and SIGPIPE back to the defaults. Called before any client
 * thread exists, so setenv() races with nothing. 0 or -1.
 */
static int start_command(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	char sh[] = "sh", c[] = "-c", *cmd = strdup(cfg->run);
	char *argv[] = { sh, c, cmd, NULL };
	posix_spawnattr_t attr;
	sigset_t none, def;
	int err;

	if (!cmd) {
		perror("uzram serve: --run");
		return -1;
	}

	if (setenv("uri", srv->uri, 1) ||
	    setenv("exportname", cfg->export.name, 1) ||
	    (cfg->socket_path ? setenv("unixsocket", srv->sock_path, 1)
			      : setenv("port", cfg->tcp_port, 1))) {
		perror("uzram serve: setenv");
		free(cmd);
		return -1;
	}
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
					POSIX_SPAWN_SETSIGDEF);
	err = posix_spawn(&srv->child, "/bin/sh", NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	free(cmd);
	if (err) {
		fprintf(stderr, "uzram serve: cannot run '%s': %s\n", cfg->run,
			strerror(err));
		srv->child = 0;
		return -1;
	}
	return 0;
}

/* Whether --run's command has exited; if so, its status as sh reports it. */
static bool command_exited(struct server *srv, int *status)
{
	int ws;

	if (!srv->child || waitpid(srv->child, &ws, WNOHANG) != srv->child)
		return false;
	srv->child = 0;
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return true;
}

int nbd_server_run(const struct nbd_server_config *cfg)
{
	struct server srv = { .cfg = cfg, .started = time(NULL),
			      .export = cfg->export };
	struct signalfd_siginfo si;
	struct pollfd pf[3];
	sigset_t mask;
	int lfd, cfd = -1, sfd, status = 1, run_status = 1;
	bool tcp = cfg->socket_path == NULL;
	pthread_condattr_t ca;
	char out[4096];

	if (nbd_shared_init(&srv.shared, cfg->buffer_limit, cfg->handshake_secs,
			    cfg->idle_secs) < 0) {
		fprintf(stderr, "uzram serve: bad buffer limit %zu\n",
			cfg->buffer_limit);
		return 1;
	}
	if (!cfg->max_connections ||
	    cfg->max_connections > nbd_max_connections_for(cfg->buffer_limit)) {
		fprintf(stderr, "uzram serve: a buffer limit of %zu bytes serves "
			"at most %u connections (%u KiB each, for what an idle "
			"one keeps, in half the budget): lower --max-connections "
			"or raise --buffer-limit\n", cfg->buffer_limit,
			nbd_max_connections_for(cfg->buffer_limit),
			2 * NBD_IDLE_BUF >> 10);
		nbd_shared_destroy(&srv.shared);
		return 2;
	}
	srv.export.shared = &srv.shared;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* immune to clock steps */
	pthread_mutex_init(&srv.lock, NULL);
	pthread_cond_init(&srv.gone_cv, &ca);
	pthread_condattr_destroy(&ca);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	if (cfg->run)
		sigaddset(&mask, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by every thread */
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) {
		perror("uzram serve: signalfd");
		goto out;
	}

	if (abs_path(cfg->socket_path ? cfg->socket_path : "uzram.sock",
		     srv.sock_path, sizeof srv.sock_path) < 0) {
		fprintf(stderr, "uzram serve: socket path too long\n");
		goto out;
	}
	if (ctl_path_find(cfg->ctl_socket, tcp ? NULL : srv.sock_path,
			  cfg->tcp_port, true, "uzram serve", srv.ctl_path,
			  sizeof srv.ctl_path) < 0)
		goto out;
	lfd = tcp ? listen_tcp(cfg->tcp_host, cfg->tcp_port,
				     !nbd_tls_required(cfg->export.tls))
		  : listen_unix(srv.sock_path);
	if (lfd < 0)
		goto out;
	cfd = listen_unix(srv.ctl_path);
	if (cfd < 0) {
		close(lfd);
		if (!tcp)
			unlink(srv.sock_path);
		goto out;
	}
	if (cfd >= 0) /* accept() must never block the main thread */
		(void)fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) | O_NONBLOCK);

	make_uri(&srv);
	if (!cfg->run)
		print_banner(&srv);
	else if (start_command(&srv) < 0)
		goto stop;
	pf[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	pf[2] = (struct pollfd){ .fd = cfd, .events = POLLIN };
	for (;;) {
		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("uzram serve: poll");
			break;
		}
		if (pf[1].revents & POLLIN)
			accept_client(&srv, lfd, tcp);
		if (pf[2].revents & POLLIN)
			serve_ctl(&srv, cfd);
		if (!(pf[0].revents & POLLIN) ||
		    read(sfd, &si, sizeof si) != sizeof si)
			continue;
		if (si.ssi_signo == SIGUSR1) {
			format_stats(&srv, false, out, sizeof out);
			fputs(out, stderr);
			continue;
		}
		if (si.ssi_signo == SIGCHLD) {
			if (command_exited(&srv, &run_status))
				break;
			continue;
		}
		fprintf(stderr, "uzram serve: %s, finishing requests in flight\n",
			strsignal((int)si.ssi_signo));
		break;
	}
stop:
	atomic_store(&srv.shared.stopping, true);
	close(lfd);
	if (!tcp)
		unlink(srv.sock_path);
	drain_clients(&srv);
	if (cfd >= 0) {
		close(cfd);
		unlink(srv.ctl_path);
	}
	drain_ctl(&srv);
	/* A client that ignored both shutdowns still holds the device. */
	pthread_mutex_lock(&srv.lock);
	status = srv.nclients || srv.ctl_running ? 1 : 0;
	pthread_mutex_unlock(&srv.lock);
	if (status)
		fprintf(stderr, "uzram serve: %s did not finish in time\n",
			srv.nclients ? "clients" : "control requests");
	else if (cfg->run)
		status = run_status;
	if (cfg->image) {
		/* a client that did not finish may still write: saves allow it */
		if (save_image(&srv, cfg->image, out, sizeof out) < 0) {
			fprintf(stderr, "uzram serve: %s", out + 7);
			status = 1;
		} else {
			fprintf(stderr, "uzram serve: %s", out + 4);
		}
	}
out:
	if (sfd >= 0)
		close(sfd);
	if (!status) /* else a stuck thread may still use it */
		nbd_shared_destroy(&srv.shared);
	return status;
}

int nbd_server_ctl(const char *path, const char *request, const char *who)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char reply[8192];
	size_t len = 0, rlen = strlen(request);
	ssize_t r;
	int fd;

	if (strlen(path) >= sizeof sa.sun_path) {
		fprintf(stderr, "%s: socket path too long: %s\n", who, path);
		return 1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		fprintf(stderr, "%s: no server answers on %s: %s\n", who, path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (send(fd, request, rlen, MSG_NOSIGNAL) != (ssize_t)rlen) {
		fprintf(stderr, "%s: %s: %s\n", who, path, strerror(errno));
		close(fd);
		return 1;
	}
	while (len < sizeof reply - 1 &&
	       (r = read(fd, reply + len, sizeof reply - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	reply[len] = '\0';
	if (len == 0) {
		fprintf(stderr, "%s: %s: no reply\n", who, path);
		return 1;
	}
	if (!strncmp(reply, "error: ", 7)) {
		fprintf(stderr, "%s: %s", who, reply + 7);
		return 1;
	}
	fputs(reply, stdout);
	return 0;
}
