// SPDX-License-Identifier: MIT
/*
 * sockets.c - where clients find the server: the listening Unix and TCP
 * sockets (a stale Unix socket is replaced, a live one refused), the
 * export's URI and the banner that tells how to connect.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../common/report.h"
#include "listen.h"

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

int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof sa.sun_path) {
		report_error("serve", "socket path too long: %s", path);
		return -1;
	}
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			report_error("serve", "%s exists and is not a socket",
				path);
			return -1;
		}
		if (unix_alive(path)) {
			report_error("serve", "a server is already running on %s",
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
	if (r < 0 || listen(fd, LISTEN_BACKLOG) < 0)
		goto fail;
	return fd;
fail:
	report_error("serve", "cannot listen on %s: %s", path,
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
int listen_tcp(const char *host, const char *port, bool plaintext,
	       char *port_out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai, *a;
	int fd = -1, one = 1, r;

	r = getaddrinfo(host, port, &hints, &ai);
	if (r) {
		report_error("serve", "cannot resolve %s:%s: %s", host,
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
		    listen(fd, LISTEN_BACKLOG) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof ss;
		unsigned bound = 0;

		if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
			bound = ntohs(ss.ss_family == AF_INET6 ?
				((struct sockaddr_in6 *)(void *)&ss)->sin6_port :
				((struct sockaddr_in *)(void *)&ss)->sin_port);
		snprintf(port_out, 6, "%u", bound);
	}
	if (fd >= 0 && plaintext && !loopback(a->ai_addr))
		report_error("serve", "warning: serving %s:%s without "
			"--tls=require: anyone who can reach it can read and "
			"write the device", host, port);
	freeaddrinfo(ai);
	if (fd < 0)
		report_error("serve", "cannot listen on %s:%s: %s",
			host, port, strerror(errno));
	return fd;
}

/* path made absolute, so the printed URI works from anywhere; 0 or -1. */
int abs_path(const char *path, char *out, size_t n)
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
void make_uri(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	const char *s = cfg->export.tls ? "s" : "";

	if (!srv->tcp)
		snprintf(srv->uri, sizeof srv->uri, "nbd%s+unix:///%s?socket=%s",
			 s, cfg->export.name, srv->sock_path);
	else if (strchr(srv->tcp_host, ':')) /* IPv6 */
		snprintf(srv->uri, sizeof srv->uri, "nbd%s://[%s]:%s/%s", s,
			 srv->tcp_host, srv->tcp_port, cfg->export.name);
	else
		snprintf(srv->uri, sizeof srv->uri, "nbd%s://%s:%s/%s", s,
			 srv->tcp_host, srv->tcp_port, cfg->export.name);
}

/*
 * Whether this kernel has the nbd module (loaded, built in, or there to
 * load), so that the banner offers nbd-client only where it can work.
 */
static bool nbd_module_present(void)
{
	static const char *const lists[] = { "modules.dep", "modules.builtin" };
	struct utsname u;
	char path[PATH_MAX], line[512];
	bool found = false;

	if (access("/sys/module/nbd", F_OK) == 0)
		return true;
	if (uname(&u) < 0)
		return false;
	for (size_t i = 0; i < 2 && !found; i++) {
		FILE *f;

		snprintf(path, sizeof path, "/lib/modules/%s/%s", u.release,
			 lists[i]);
		f = fopen(path, "re");
		while (f && !found && fgets(line, sizeof line, f))
			found = strstr(line, "/nbd.ko") != NULL;
		if (f)
			fclose(f);
	}
	return found;
}

void print_banner(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	const char *name = cfg->export.name, *uri = srv->uri;
	const char *prog = cfg->prog ? cfg->prog : "uzram";
	char nflag[NBD_MAX_STRING + 8] = "";

	if (name[0])
		snprintf(nflag, sizeof nflag, " -N %s", name);
	printf("uzram: serving %s (%llu bytes%s)\n", cfg->export.description,
	       (unsigned long long)cfg->export.size,
	       cfg->export.read_only ? ", read-only" : "");
	if (cfg->image)
		printf("image: %s, %s\n", cfg->image, cfg->image_opened ?
		       "opened (saved again at SIGINT or SIGTERM)" :
		       "new (created at SIGINT or SIGTERM, or by ctl save)");
	printf("uri: %s\n", uri);
	printf("  nbdinfo:    nbdinfo '%s'\n", uri);
	/*
	 * Not with a front end (--ublk): the check reads modules.dep, and a
	 * swap server on a tmpfs root (the VM bench) found its pages in swap
	 * on its own device; killed there (tests/vm/v44), it could not die
	 * (D, in shmem_swapin_folio) and its successor never came.
	 */
	if (cfg->frontend || !nbd_module_present())
		;
	else if (!srv->tcp)
		printf("  nbd-client: nbd-client -unix %s /dev/nbd0%s   (as root)\n",
		       srv->sock_path, nflag);
	else
		printf("  nbd-client: nbd-client %s %s /dev/nbd0%s   (as root)\n",
		       srv->tcp_host, srv->tcp_port, nflag);
	printf("  qemu:       qemu-img info '%s'   (or -drive file=%s,format=raw)\n",
	       uri, uri);
	printf("  nbdfuse:    mkdir -p /tmp/uzram && nbdfuse /tmp/uzram '%s' &  (file /tmp/uzram/nbd)\n",
	       uri);
	printf("  stats:      %s stat --ctl-socket %s   (or kill -USR1 %d)\n",
	       prog, srv->ctl_path, (int)getpid());
	if (srv->metrics_path[0])
		printf("metrics: %s   (curl --unix-socket %s http://localhost/metrics)\n",
		       srv->metrics_addr, srv->metrics_path);
	else if (srv->metrics_addr[0])
		printf("metrics: %s   (curl %s)\n", srv->metrics_addr,
		       srv->metrics_addr);
	printf("ready\n");
	fflush(stdout);
}
