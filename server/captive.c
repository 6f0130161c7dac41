// SPDX-License-Identifier: MIT
/*
 * captive.c - `uzram serve --run CMD`, as nbdkit's captive mode: once the
 * server listens it runs sh -c CMD with the export's address in the
 * environment, and the main loop stops when the command exits (SIGCHLD),
 * with its exit status.
 */
#include <signal.h>
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/report.h"
#include "internal.h"

/*
 * --run: start sh -c CMD with the server's address in its environment, its
 * signal mask and SIGPIPE back to the defaults. Called before any client
 * thread exists, so setenv() races with nothing. 0 or -1.
 */
int start_command(struct server *srv)
{
	const struct nbd_server_config *cfg = srv->cfg;
	char sh[] = "sh", c[] = "-c", *cmd = strdup(cfg->run);
	char *argv[] = { sh, c, cmd, NULL };
	posix_spawnattr_t attr;
	sigset_t none, def;
	int err;

	if (!cmd) {
		report_error("serve", "--run: %s", strerror(errno));
		return -1;
	}

	if (setenv("uri", srv->uri, 1) ||
	    setenv("exportname", cfg->export.name, 1) ||
	    (!srv->tcp ? setenv("unixsocket", srv->sock_path, 1)
		       : setenv("port", srv->tcp_port, 1))) {
		report_error("serve", "setenv: %s", strerror(errno));
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
		report_error("serve", "cannot run '%s': %s", cfg->run,
			strerror(err));
		srv->child = 0;
		return -1;
	}
	return 0;
}

/* Whether --run's command has exited; if so, its status as sh reports it. */
bool command_exited(struct server *srv, int *status)
{
	int ws;

	if (!srv->child || waitpid(srv->child, &ws, WNOHANG) != srv->child)
		return false;
	srv->child = 0;
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return true;
}
