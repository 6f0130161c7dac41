// SPDX-License-Identifier: MIT
/*
 * serve_device.c - the device `uzram serve` exports, made from its
 * options: opened new or from --image (with --dict), its recompression
 * algorithms added, its writeback limit set. serve.c reads the options and
 * runs the server on what this makes.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uzram.h"
#include "serve.h"

/* Whether a file could be created beside path (errno says why not). */
bool serve_dir_writable(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (!slash)
		return access(".", W_OK) == 0;
	if (n >= sizeof dir) {
		errno = ENAMETOOLONG;
		return false;
	}
	memcpy(dir, path, n);
	dir[n] = '\0';
	return access(n ? dir : "/", W_OK) == 0;
}

/*
 * The option given explicitly that the device opened from an image
 * disagrees with, or NULL. want_size: --size's value (0: not given).
 */
static const char *image_conflict(const struct uzram_config *cfg,
				  const struct uzram *dev, uint64_t want_size,
				  bool algo_set, bool cluster_set)
{
	if (want_size && want_size != uzram_size(dev))
		return "size";
	if (algo_set && strcmp(cfg->algorithm,
			       uzram_algorithm(dev, cfg->fast_algorithm ? 1 : 0)))
		return "algorithm";
	if (cluster_set && cfg->cluster_size != uzram_cluster_size(dev) &&
	    !(cfg->cluster_size == 0 && uzram_cluster_size(dev) == UZRAM_PAGE_SIZE))
		return "cluster";
	return NULL;
}

/*
 * The device: from the image if there is one at `image` (then options
 * given explicitly must agree with it, and --dict is the image's), else a
 * new one with the dictionary at dict_path, if any. 0 or the exit status.
 */
int serve_open_device(struct uzram_config *cfg, const char *image,
		      const char *dict_path, bool size_set, bool algo_set,
		      bool cluster_set, struct uzram **dev)
{
	struct stat sb;
	void *dict = NULL;
	const char *clash;
	uint64_t want_size = 0;
	int r;

	if (image && stat(image, &sb) == 0) {
		cfg->image = image;
		/* the image's size, compared below as the other options are */
		want_size = size_set ? cfg->size : 0;
		cfg->size = 0;
		if (dict_path)
			report_error("serve", "--dict: the dictionaries "
				"of image %s are used", image);
	} else if (image && !serve_dir_writable(image)) {
		/* better now than at the end, with the data */
		report_error("serve", "--image %s: cannot write in its "
			"directory: %s", image, strerror(errno));
		return 1;
	} else if (dict_path) {
		if (read_dict("serve", dict_path, &dict, &cfg->dict_size))
			return 1;
		cfg->dict = dict;
	}
	/*
	 * A store to adopt has its own size: --size, if given, must match.
	 * (A file whose header is still zeros is made anew, at this size.)
	 */
	if (cfg->keep_fd >= 0 && !size_set && fstat(cfg->keep_fd, &sb) == 0 &&
	    sb.st_size > 0) {
		char magic = 0;

		if (pread(cfg->keep_fd, &magic, 1, 0) == 1 && magic)
			cfg->size = 0;
	}
	r = uzram_open(cfg, dev);
	free(dict);
	if (r < 0) {
		const char *why = cli_lib_error();

		report_error("serve", "cannot %s the device: %s",
			cfg->image ? "open" : "create",
			*why ? why : uzram_strerror(r));
		return 1;
	}
	/* one device per image: hold a new one's path from the start */
	if (image && !cfg->image && (r = uzram_image_claim(*dev, image)) < 0) {
		report_error("serve", "--image %s: %s", image,
			cli_lib_error());
		uzram_close(*dev);
		*dev = NULL;
		return 1;
	}
	clash = cfg->image ? image_conflict(cfg, *dev, want_size, algo_set,
					    cluster_set) : NULL;
	if (clash) {
		report_error("serve", "--%s conflicts with image %s "
			"(%llu bytes, %s, %u-byte clusters); leave it out",
			clash, image, (unsigned long long)uzram_size(*dev),
			uzram_algorithm(*dev, 0), uzram_cluster_size(*dev));
		uzram_close(*dev);
		*dev = NULL;
		return 1;
	}
	return 0;
}

/*
 * The --recomp-algorithm ones, at priorities 1, 2, 3 (2, 3 with a fast
 * algorithm, whose device has --algorithm at 1), with their
 * dictionaries; a device opened from an image may have them already (then
 * they must be the same algorithms, and keep the image's dictionaries).
 */
int serve_add_recomp(struct uzram *dev, const struct recomp_opt *recomp,
		     int n, int first)
{
	for (int i = 0; i < n; i++) {
		const char *have = uzram_algorithm(dev, i + first);
		void *dict;
		size_t dict_len;
		int r;

		if (have && !strcmp(have, recomp[i].name))
			continue;
		if (have) {
			report_error("serve", "--recomp-algorithm %s "
				"conflicts with the image's %s at priority "
				"%d", recomp[i].name, have, i + first);
			return 1;
		}
		r = uzram_add_recomp_algorithm(dev, recomp[i].name,
					       recomp[i].level);
		if (r > 0 && recomp[i].dict) {
			if (read_dict("serve", recomp[i].dict, &dict,
				      &dict_len))
				return 1;
			r = uzram_set_dictionary(dev, r, dict, dict_len, 0);
			free(dict);
		}
		if (r < 0) {
			report_error("serve", "--recomp-algorithm: %s",
				cli_lib_error());
			return 1;
		}
	}
	return 0;
}


/* --writeback-limit on the new device: 0, or 1 after a message. */
int serve_set_wb_limit(struct uzram *dev, uint64_t bytes)
{
	int r = uzram_set_writeback_limit(dev, 1, bytes / UZRAM_PAGE_SIZE);

	if (r < 0)
		report_error("serve", "--writeback-limit: %s",
			uzram_strerror(r));
	return r < 0;
}
