/*
 * options.c - the values of command-line options that several
 * subcommands take: sizes, "ALGO[:LEVEL][:dict=PATH]", dictionary files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int parse_level(const char *s, int *level)
{
	char *end;
	long l;

	errno = 0;
	l = strtol(s, &end, 10);
	if (!*s || *end || errno || l < -UZRAM_CLI_MAX_LEVEL ||
	    l > UZRAM_CLI_MAX_LEVEL)
		return -EINVAL;
	*level = (int)l;
	return 0;
}

int parse_algo_level(char *s, const char **name, int *level)
{
	char *colon = strchr(s, ':');
	int l = 0;

	if (colon && parse_level(colon + 1, &l) < 0)
		return -EINVAL;
	if (s == colon || !*s)
		return -EINVAL;
	if (colon)
		*colon = '\0';
	*name = s;
	*level = l;
	return 0;
}

int parse_algo_spec(char *s, const char **name, int *level, const char **dict)
{
	char *d = strstr(s, ":dict=");

	*dict = NULL;
	if (d) {
		*d = '\0';
		*dict = d + strlen(":dict=");
		if (!**dict)
			return -EINVAL;
	}
	return parse_algo_level(s, name, level);
}

int read_dict(const char *cmd, const char *path, void **buf, size_t *len)
{
	/* the library takes 1 MiB at most; one byte more tells it is too big */
	const size_t max = (1u << 20) + 1;
	unsigned char *b = malloc(max);
	size_t n = 0;
	ssize_t r;
	int fd;

	if (!b) {
		fprintf(stderr, "uzram %s: out of memory\n", cmd);
		return -ENOMEM;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "uzram %s: cannot open dictionary %s: %s\n",
			cmd, path, strerror(errno));
		free(b);
		return -errno;
	}
	while (n < max && (r = read(fd, b + n, max - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "uzram %s: cannot read dictionary %s: "
				"%s\n", cmd, path, strerror(errno));
			close(fd);
			free(b);
			return -EIO;
		}
		n += (size_t)r;
	}
	close(fd);
	*buf = b;
	*len = n;
	return 0;
}

int parse_size(const char *s, unsigned long long *out)
{
	char *end;
	double v;

	/* Plain decimals only: strtod would also take " -1", "+5", "0x10",
	 * "1e3" and "nan". */
	size_t digits = strspn(s, "0123456789.");

	if (digits == 0)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end != s + digits || v < 0)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v *= 1024.0; end++; break;
	case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': v *= 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'i' && end[-1] != *s) /* accept "KiB" spellings too */
		end++;
	if (*end == 'B')
		end++;
	if (*end != '\0' || v >= 18446744073709551616.0)
		return -EINVAL;
	*out = (unsigned long long)v;
	return 0;
}
