# SPDX-License-Identifier: MIT
# deb.mk - the Debian packages (debian/, doc/packaging.md).
#
#   make deb          build/deb/uzram_*.deb, libuzram0_*.deb, libuzram-dev_*.deb
#                     with dpkg-buildpackage from a copy of the tree, then
#                     lintian on them (errors fail, warnings are printed)
#   make check-deb    make deb, then the packages installed into a fresh
#                     Debian 12 root (scripts/check-deb.sh): uzram --version,
#                     the README's example against libuzram-dev, uzram load
#
# The copy holds the files git knows or would add (so a build never sees
# build/ or an old debian/ tree), or the whole tree but build*/ when it is
# not a git checkout.

DEB_OUT := $(abspath build/deb)
DEB_SRC := $(DEB_OUT)/uzram-$(VERSION)

.PHONY: deb check-deb

deb:
	@scripts/deps.sh build deb
	@test "$$(dpkg-parsechangelog -S Version)" = "$(VERSION)" || { \
		echo "deb: debian/changelog is at $$(dpkg-parsechangelog -S Version)," \
			"include/uzram.h at $(VERSION): add a changelog entry" >&2; exit 1; }
	rm -rf $(DEB_OUT) && mkdir -p $(DEB_SRC)
	if git rev-parse --git-dir >/dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
			tar --null --ignore-failed-read -T - -cf - 2>/dev/null; \
	else \
		tar --exclude='./build*' -cf - .; \
	fi | tar -xf - -C $(DEB_SRC)
	cd $(DEB_SRC) && dpkg-buildpackage -b -us -uc > $(DEB_OUT)/build.log 2>&1 || { \
		tail -n 40 $(DEB_OUT)/build.log >&2; \
		echo "deb: dpkg-buildpackage failed; the whole log: $(DEB_OUT)/build.log" >&2; \
		exit 1; }
	@cd $(DEB_OUT) && ls *.deb
	lintian --fail-on error --info --no-tag-display-limit $(DEB_OUT)/*.changes \
		| tee $(DEB_OUT)/lintian.txt

check-deb: deb $(CORPUS_READY)
	bash scripts/check-deb.sh $(DEB_OUT) $(CORPUS_DIR)
	@mkdir -p $(dir $(TEST_RESULTS)) && echo check-deb >> $(TEST_RESULTS)

# make test-system: the packages in a Debian 12 guest booted with systemd
# as init under qemu, with one swap and one /tmp in uzram.conf
# (tests/system/boot.sh). Not in make test: minutes of TCG.
.PHONY: test-system
test-system: deb
	bash tests/system/boot.sh $(DEB_OUT)
