// SPDX-License-Identifier: MIT
/*
 * thread_start.c - the library's own threads (base.h): started with every
 * signal blocked, since signals are the embedding program's, and named
 * for ps and perf.
 */
#include <signal.h>

#include "base.h"

int thread_start(pthread_t *th, void *(*fn)(void *), void *arg,
		 const char *name)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return -ret;
	if (name)
		(void)pthread_setname_np(*th, name);
	return 0;
}
