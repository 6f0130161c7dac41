// SPDX-License-Identifier: MIT
/*
 * fuzz_nbd.c - libFuzzer target for the NBD server: the input is what a
 * client sends, from the first byte of the handshake through options into
 * transmission requests, served against a real 1 MiB device.
 *
 * Input layout: byte 0 picks the export (bit 0: read-only; bits 1-2: TLS
 * off, on, require, require) and the mode, the rest is the client's byte
 * stream. It is placed in a memfd that the connection reads like a socket;
 * replies go to /dev/null. Bit 4 serves the connection as if shutdown had
 * begun (every request gets NBD_ESHUTDOWN). Bit 3 instead feeds the rest
 * to the control channel's parser (ctl_proto.c) as one request line, and runs
 * what parses on the device (the limit is put back afterwards). The
 * connection code is the one
 * the server runs (nbd_conn_serve), threads included, so the handshake
 * parser, the request checks and every command path are covered. The
 * sanitizers (ASan, UBSan) and the device's own checks are the oracle,
 * plus one invariant: the connection must return.
 *
 * With TLS (a PSK, from a memfd) the options before NBD_OPT_STARTTLS and
 * STARTTLS itself are fuzzed. Whatever follows STARTTLS in the input was
 * sent before the server's ack, so the connection drops it unread; an
 * input that ends at STARTTLS runs a TLS handshake that meets the end.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uzram.h"
#include "ctl.h"

#define FUZZ_DEV_SIZE (1u << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nbd_export exports[8];
static struct nbd_counters counters;
static struct nbd_shared shared;
static int in_fd = -1, null_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char psk[] = "fuzz:000102030405060708090a0b0c0d0e0f\n";
	struct nbd_tls_config tc = { .mode = NBD_TLS_ON };
	const struct nbd_tls *tls[4];
	struct uzram_config cfg;
	struct uzram *dev;
	char path[PATH_MAX];
	int psk_fd;

	(void)argc;
	(void)argv;
	uzram_config_init(&cfg);
	cfg.size = FUZZ_DEV_SIZE;
	cfg.mem_limit = 256u << 10; /* reach -ENOSPC too */
	if (uzram_open(&cfg, &dev) < 0) {
		fprintf(stderr, "fuzz_nbd: cannot open a device\n");
		abort();
	}
	if (nbd_shared_init(&shared, 4u << 20, 30, 0) < 0)
		abort();
	psk_fd = memfd_create("nbd-psk", MFD_CLOEXEC);
	if (psk_fd < 0 || write(psk_fd, psk, strlen(psk)) != (ssize_t)strlen(psk))
		abort();
	snprintf(path, sizeof path, "/proc/self/fd/%d", psk_fd);
	tc.psk_file = path;
	tls[0] = NULL;
	tls[1] = nbd_tls_new(&tc);
	tc.mode = NBD_TLS_REQUIRE;
	tls[2] = tls[3] = nbd_tls_new(&tc);
	if (!tls[1] || !tls[2])
		abort();
	for (int i = 0; i < 8; i++)
		exports[i] = (struct nbd_export){
			.dev = dev,
			.size = uzram_size(dev),
			.name = i & 1 ? "ro" : "fuzz",
			.description = "fuzz device",
			.read_only = i & 1,
			.tls = tls[i >> 1],
			.shared = &shared,
		};
	in_fd = memfd_create("nbd-input", MFD_CLOEXEC);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (in_fd < 0 || null_fd < 0)
		abort();
	return 0;
}

static void fuzz_ctl(const uint8_t *data, size_t size)
{
	struct nbd_ctl_req rq;
	char out[4096];

	if (nbd_ctl_parse((const char *)data, size, &rq, out, sizeof out) < 0) {
		if (strncmp(out, "error: ", 7))
			abort();
		return;
	}
	if (rq.op == NBD_CTL_JSON || rq.op == NBD_CTL_TEXT)
		return;
	nbd_ctl_execute(exports[0].dev, &rq, out, sizeof out);
	if (strncmp(out, "ok", 2) && strncmp(out, "error: ", 7))
		abort();
	(void)uzram_set_mem_limit(exports[0].dev, 256u << 10);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 8) {
		fuzz_ctl(data + 1, size - 1);
		return 0;
	}
	atomic_store(&shared.stopping, (data[0] & 16) != 0);
	if (ftruncate(in_fd, 0) < 0 ||
	    pwrite(in_fd, data + 1, size - 1, 0) != (ssize_t)(size - 1) ||
	    lseek(in_fd, 0, SEEK_SET) != 0)
		abort();
	(void)nbd_conn_serve(&exports[data[0] & 7], &counters, in_fd, null_fd);
	return 0;
}
