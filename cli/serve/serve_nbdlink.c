// SPDX-License-Identifier: MIT
/*
 * serve_nbdlink.c - the kernel's NBD client driven by `serve --keeper
 * --nbd-device N` (doc/keep.md, "Over NBD"): the keeper, not nbd-client,
 * attaches /dev/nbdN to the server's Unix socket, and attaches it again to
 * each new server after a death, so that swap on /dev/nbdN waits for the
 * new server instead of failing.
 *
 * keeper_link_*() (serve.h) are the keeper's calls; under them:
 *
 *   nbdlink_dial()     connect to the server's socket, and the handshake
 *                      (fixed newstyle, NBD_OPT_EXPORT_NAME ""): the fd in
 *                      transmission, with the export's size and flags;
 *                      one per CPU, up to 4 (swap_nbd_connections()),
 *                      each a hardware queue of the kernel's
 *   nbdlink_attach()   generic netlink, family "nbd": NBD_CMD_CONNECT the
 *                      first time (with a request timeout and a dead
 *                      connection timeout), NBD_CMD_RECONFIGURE after,
 *                      which puts the fd in place of the dead socket
 *   nbdlink_dead()     whether the kernel said NBD_CMD_LINK_DEAD for N
 *                      (the family's multicast group "nbd_mc_group")
 *   nbdlink_detach()   NBD_CMD_DISCONNECT: the I/O that waits fails
 *
 * Why the kernel loses no request (drivers/block/nbd.c, 6.1): a socket
 * that ends is marked dead; a request submitted then waits in
 * wait_for_reconnect() for up to the dead connection timeout; a request
 * that was sent on the dead socket times out after NBDLINK_TIMEOUT_S
 * (nbd_xmit_timeout(), one connection with a timeout set) and is requeued,
 * then sent again on the new socket, a write whole: the one cluster a
 * kill cut short is written again. Without the timeout such a request
 * would wait for ever.
 *
 * Nothing here allocates: the messages are built in buffers on the stack,
 * as the keeper needs (it runs while swap waits for the new server).
 */
#include <errno.h>
#include <endian.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define NBDLINK_TIMEOUT_S 5       /* a request on a dead socket, resent */
#define NBDLINK_DEAD_S 300        /* I/O waits this long for a server */
#define NBDLINK_BLOCK 4096
#define NBDLINK_CONNS_MAX 4       /* swap_nbd_connections() at most */
#ifndef NBD_FLAG_CAN_MULTI_CONN
#define NBD_FLAG_CAN_MULTI_CONN (1 << 8)   /* linux/nbd.h */
#endif
#define NBD_MAGIC_INIT 0x4e42444d41474943ull   /* "NBDMAGIC" */
#define NBD_MAGIC_OPT 0x49484156454f5054ull    /* "IHAVEOPT" */

struct nlbuf {
	struct nlmsghdr *n;
	char b[1024] __attribute__((aligned(NLMSG_ALIGNTO)));
};

static void msg_init(struct nlbuf *m, uint16_t family, uint8_t cmd)
{
	struct genlmsghdr *g;

	memset(m->b, 0, sizeof m->b);
	m->n = (struct nlmsghdr *)m->b;
	m->n->nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	m->n->nlmsg_type = family;
	m->n->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	g = NLMSG_DATA(m->n);
	g->cmd = cmd;
	g->version = 1;
}

static struct nlattr *put(struct nlbuf *m, uint16_t type, const void *v,
			  size_t len)
{
	struct nlattr *a = (struct nlattr *)(m->b + NLMSG_ALIGN(m->n->nlmsg_len));

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	if (len)
		memcpy((char *)a + NLA_HDRLEN, v, len);
	m->n->nlmsg_len = NLMSG_ALIGN(m->n->nlmsg_len) + NLA_ALIGN(a->nla_len);
	return a;
}

static void put_u32(struct nlbuf *m, uint16_t type, uint32_t v)
{
	put(m, type, &v, sizeof v);
}

static void put_u64(struct nlbuf *m, uint16_t type, uint64_t v)
{
	put(m, type, &v, sizeof v);
}

static void nest_end(struct nlbuf *m, struct nlattr *a)
{
	a->nla_len = (uint16_t)(m->b + m->n->nlmsg_len - (char *)a);
}

/* Send m on fd and read its ack: 0, or the negative errno. */
static int talk(int fd, struct nlbuf *m, char *reply, size_t n)
{
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	ssize_t len;

	if (sendto(fd, m->b, m->n->nlmsg_len, 0, (struct sockaddr *)&to,
		   sizeof to) < 0)
		return -errno;
	for (;;) {
		len = recv(fd, reply, n, 0);
		if (len < 0)
			return errno == EINTR ? -EINTR : -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)reply;
		     NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len))
			if (h->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
	}
}

/* The attributes of a generic netlink message: each, by type, to fn. */
#define FOR_ATTRS(a, start, len) \
	for (struct nlattr *a = (struct nlattr *)(start); \
	     (len) >= (int)NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && \
	     a->nla_len <= (len); \
	     (len) -= NLA_ALIGN(a->nla_len), \
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))

/* The multicast group's id out of CTRL_ATTR_MCAST_GROUPS, or 0. */
static uint32_t mcast_id(struct nlattr *groups)
{
	int len = groups->nla_len - NLA_HDRLEN;

	FOR_ATTRS(g, (char *)groups + NLA_HDRLEN, len) {
		int glen = g->nla_len - NLA_HDRLEN;
		uint32_t id = 0;
		bool ours = false;

		FOR_ATTRS(x, (char *)g + NLA_HDRLEN, glen) {
			if (x->nla_type == CTRL_ATTR_MCAST_GRP_ID)
				memcpy(&id, (char *)x + NLA_HDRLEN, 4);
			if (x->nla_type == CTRL_ATTR_MCAST_GRP_NAME)
				ours = !strcmp((char *)x + NLA_HDRLEN,
					       NBD_GENL_MCAST_GROUP_NAME);
		}
		if (ours)
			return id;
	}
	return 0;
}

/* The family "nbd": its id into *family and its group's into *group. */
static int resolve(int fd, uint16_t *family, uint32_t *group)
{
	struct nlbuf m;
	char reply[4096] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h = (struct nlmsghdr *)reply;
	ssize_t len;
	int alen;

	msg_init(&m, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	m.n->nlmsg_flags = NLM_F_REQUEST;
	put(&m, CTRL_ATTR_FAMILY_NAME, NBD_GENL_FAMILY_NAME,
	    sizeof NBD_GENL_FAMILY_NAME);
	if (sendto(fd, m.b, m.n->nlmsg_len, 0, (struct sockaddr *)&to,
		   sizeof to) < 0 ||
	    (len = recv(fd, reply, sizeof reply, 0)) < 0)
		return -errno;
	if (!NLMSG_OK(h, (size_t)len) || h->nlmsg_type == NLMSG_ERROR)
		return -ENOENT;
	alen = (int)h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	*family = 0;
	*group = 0;
	FOR_ATTRS(a, (char *)NLMSG_DATA(h) + GENL_HDRLEN, alen) {
		if (a->nla_type == CTRL_ATTR_FAMILY_ID)
			memcpy(family, (char *)a + NLA_HDRLEN, 2);
		if (a->nla_type == CTRL_ATTR_MCAST_GROUPS)
			*group = mcast_id(a);
	}
	return *family ? 0 : -ENOENT;
}

static int nbdlink_open(struct keeper_link *l)
{
	struct sockaddr_nl me = { .nl_family = AF_NETLINK };
	uint32_t group;
	int r;

	l->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	l->events = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			   NETLINK_GENERIC);
	if (l->fd < 0 || l->events < 0)
		return -errno;
	r = resolve(l->fd, &l->family, &group);
	if (r < 0)
		return r;
	if (!group)
		return -ENOENT;
	/*
	 * Bound, so that it has a port id of its own: the kernel's
	 * broadcasts come from port 0 and skip every socket of that port,
	 * which an unbound socket has (af_netlink.c, do_one_broadcast()).
	 */
	if (bind(l->events, (struct sockaddr *)&me, sizeof me) < 0 ||
	    setsockopt(l->events, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
		       &group, sizeof group) < 0)
		return -errno;
	return 0;
}

void keeper_link_close(struct keeper_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	if (l->events >= 0)
		close(l->events);
	l->fd = l->events = -1;
}

/* All of n bytes, or -1. */
static int io_all(int fd, void *buf, size_t n, bool out)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = out ? send(fd, (char *)buf + done, n - done,
				       MSG_NOSIGNAL) :
			    recv(fd, (char *)buf + done, n - done, 0);

		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* The client's half of the handshake on fd: 0, or -1. */
static int handshake(int fd, uint64_t *size, uint16_t *flags)
{
	struct __attribute__((packed)) {
		uint64_t magic, opt_magic;
		uint16_t flags;
	} hello;
	struct __attribute__((packed)) {
		uint32_t cflags;
		uint64_t magic;
		uint32_t opt, len;
	} ask = {
		htobe32(3), htobe64(NBD_MAGIC_OPT), htobe32(1), 0,
	};  /* FIXED_NEWSTYLE | NO_ZEROES; NBD_OPT_EXPORT_NAME "" */
	struct __attribute__((packed)) {
		uint64_t size;
		uint16_t flags;
	} go;

	if (io_all(fd, &hello, sizeof hello, false) < 0 ||
	    be64toh(hello.magic) != NBD_MAGIC_INIT ||
	    be64toh(hello.opt_magic) != NBD_MAGIC_OPT ||
	    !(be16toh(hello.flags) & 2))     /* the server's NO_ZEROES */
		return -1;
	if (io_all(fd, &ask, sizeof ask, true) < 0 ||
	    io_all(fd, &go, sizeof go, false) < 0)
		return -1;
	*size = be64toh(go.size);
	*flags = be16toh(go.flags);
	return 0;
}

static int nbdlink_dial(const char *path, uint64_t *size, uint16_t *flags)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = NBDLINK_TIMEOUT_S };
	int fd;

	if (strlen(path) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	errno = 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    handshake(fd, size, flags) < 0) {
		int e = errno ? errno : EPROTO;

		close(fd);
		return -e;
	}
	/* the kernel sets its own timeouts on the socket it is given */
	tv.tv_sec = 0;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	return fd;
}

static int nbdlink_attach(struct keeper_link *l, const int *sock, int n,
			  uint64_t size, uint16_t flags)
{
	struct nlbuf m;
	char reply[1024] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlattr *socks, *item;
	int r;

	msg_init(&m, l->family, l->attached ? NBD_CMD_RECONFIGURE :
		 NBD_CMD_CONNECT);
	put_u32(&m, NBD_ATTR_INDEX, (uint32_t)l->index);
	if (!l->attached) {
		put_u64(&m, NBD_ATTR_SIZE_BYTES, size);
		put_u64(&m, NBD_ATTR_BLOCK_SIZE_BYTES, NBDLINK_BLOCK);
		put_u64(&m, NBD_ATTR_SERVER_FLAGS, flags);
	}
	put_u64(&m, NBD_ATTR_TIMEOUT, NBDLINK_TIMEOUT_S);
	put_u64(&m, NBD_ATTR_DEAD_CONN_TIMEOUT, NBDLINK_DEAD_S);
	socks = put(&m, NBD_ATTR_SOCKETS | NLA_F_NESTED, NULL, 0);
	for (int i = 0; i < n; i++) {
		item = put(&m, NBD_SOCK_ITEM | NLA_F_NESTED, NULL, 0);
		put_u32(&m, NBD_SOCK_FD, (uint32_t)sock[i]);
		nest_end(&m, item);
	}
	nest_end(&m, socks);
	r = talk(l->fd, &m, reply, sizeof reply);
	if (!r)
		l->attached = true;
	return r;
}

static int nbdlink_detach(struct keeper_link *l)
{
	struct nlbuf m;
	char reply[1024] __attribute__((aligned(NLMSG_ALIGNTO)));

	msg_init(&m, l->family, NBD_CMD_DISCONNECT);
	put_u32(&m, NBD_ATTR_INDEX, (uint32_t)l->index);
	return talk(l->fd, &m, reply, sizeof reply);
}

static bool nbdlink_dead(struct keeper_link *l)
{
	char buf[4096] __attribute__((aligned(NLMSG_ALIGNTO)));
	bool dead = false;
	ssize_t len;

	while ((len = recv(l->events, buf, sizeof buf, 0)) > 0) {
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			struct genlmsghdr *g = NLMSG_DATA(h);
			int alen = (int)h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

			if (h->nlmsg_type != l->family ||
			    g->cmd != NBD_CMD_LINK_DEAD)
				continue;
			FOR_ATTRS(a, (char *)g + GENL_HDRLEN, alen)
				if (a->nla_type == NBD_ATTR_INDEX &&
				    *(uint32_t *)((char *)a + NLA_HDRLEN) ==
				    (uint32_t)l->index)
					dead = true;
		}
	}
	return dead;
}

#define RELINK_GRACE_S 2        /* for the kernel's NBD_CMD_LINK_DEAD */
#define RELINK_SAY_S 10         /* a dial failing this long is reported */

/*
 * /dev/nbdN to the server's socket, if it listens (else the next call
 * tries again); -1 when the first attach failed.
 *
 * After a death, RECONFIGURE waits for the kernel's NBD_CMD_LINK_DEAD
 * (or RELINK_GRACE_S): given while the kernel has not yet marked the old
 * socket dead, it would be taken as a success and do nothing (6.1's
 * nbd_reconnect_socket() finds no dead socket: -ENOSPC, which
 * nbd_genl_reconfigure() returns as 0), and the device would wait.
 * With several sockets each new one takes the place of a dead one, in
 * order, until none is dead: the kernel stops at the first it refuses
 * (-ENOSPC again) and we close what it did not take. A socket that died
 * after the first NBD_CMD_LINK_DEAD brings its own, and another relink;
 * meanwhile its requests go to the live ones (nbd.c's find_fallback()).
 */
static int relink(struct keeper_link *l)
{
	uint64_t size = 0;
	uint16_t flags = 0;
	int fd[NBDLINK_CONNS_MAX] = { -1 }, n, r = 0;

	if (l->attached && !l->dead_seen &&
	    time(NULL) - l->relink_at < RELINK_GRACE_S)
		return 0;
	for (n = 0; n < l->conns; n++) {
		fd[n] = nbdlink_dial(l->sock, &size, &flags);
		if (fd[n] < 0) {
			r = fd[n];
			break;
		}
	}
	if (r < 0) {            /* not yet listening */
		while (n > 0)
			close(fd[--n]);
		if (!l->dial_said && time(NULL) - l->relink_at >= RELINK_SAY_S) {
			report_error("serve", "--keeper: /dev/nbd%d waits: %s: "
				"%s", l->index, l->sock, strerror(-r));
			l->dial_said = true;
		}
		return 0;
	}
	/* a server that cannot take several: one, as nbd-client's default */
	if (!(flags & NBD_FLAG_CAN_MULTI_CONN))
		while (n > 1)
			close(fd[--n]);
	r = nbdlink_attach(l, fd, n, size, flags);
	while (n > 0)           /* the kernel holds its own */
		close(fd[--n]);
	l->relink = l->dead_seen = l->dial_said = false;
	if (r < 0) {
		report_error("serve", "--keeper: cannot attach /dev/nbd%d: %s",
			l->index, strerror(-r));
		return l->attached ? 0 : -1;
	}
	printf("uzram serve: block device /dev/nbd%d\n", l->index);
	fflush(stdout);
	return 0;
}

int keeper_link_step(struct keeper_link *l)
{
	if (l->index < 0)
		return 0;
	if (nbdlink_dead(l) && l->attached) {
		if (!l->relink)
			l->relink_at = time(NULL);
		l->relink = l->dead_seen = true;
		report_error("serve", "--keeper: the kernel reports /dev/nbd%d's "
			"connection dead", l->index);
	}
	return l->relink ? relink(l) : 0;
}

void keeper_link_lost(struct keeper_link *l)
{
	if (l->index < 0)
		return;
	l->relink = true;
	l->relink_at = time(NULL);
}

void keeper_link_give_up(struct keeper_link *l)
{
	if (l->index >= 0 && l->attached)
		(void)nbdlink_detach(l);
}

/* The value of --socket in args, or NULL. */
static const char *socket_arg(char **args)
{
	for (size_t i = 0; args[i]; i++) {
		if (!strcmp(args[i], "--socket") && args[i + 1])
			return args[i + 1];
		if (!strncmp(args[i], "--socket=", 9))
			return args[i] + 9;
	}
	return NULL;
}

int keeper_link_open(struct keeper_link *l, int index, char **args)
{
	int r;

	memset(l, 0, sizeof *l);
	l->index = index;
	l->fd = l->events = -1;
	if (index < 0)
		return 0;
	l->conns = swap_nbd_connections();
	if (l->conns > NBDLINK_CONNS_MAX)
		l->conns = NBDLINK_CONNS_MAX;
	l->sock = socket_arg(args);
	if (!l->sock) {
		report_error("serve", "--keeper --nbd-device needs --socket");
		return 1;
	}
	r = nbdlink_open(l);
	if (r < 0) {
		report_error("serve", "--keeper --nbd-device %d: the kernel's "
			"NBD netlink: %s (modprobe nbd)", index, strerror(-r));
		return 1;
	}
	return 0;
}
