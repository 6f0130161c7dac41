# SPDX-License-Identifier: MIT
# test.mk - the phases of `make test`, run TEST_JOBS at a time (default: one
# more than the cores).
#
#   make test                 everything below (see the Makefile)
#   make test TEST_JOBS=1     one phase at a time, as make test ran before
#
# Most phases use one core (a unit test binary at a time, an integration
# script at a time, a fuzzer) and the integration scripts spend much of
# their time waiting on clients, servers and the kernel: run one after the
# other on the 2 cores of the guideline's machine, make test kept about
# one core busy (user + sys 13.3 min in 12.5 min of wall time). Two phases
# at a time lose no test and no iteration. Three on two cores: the longest
# phase, the integration scripts, still waits on its clients and servers
# for a third of its time, which a third phase now uses (fresh clones,
# 2026-12-05: 18.0-19.1 min with two at a time before v35 came in, 17.8
# and 19.1 min with three after, CPU 1,868-1,976 s and 1,991-2,121 s:
# no loss, a gain within the spread between runs). The fuzzers, run
# for a fixed time, then get about half a core: fewer runs, the same
# seeds. The phases:
#
#   test-build       the three corpora, the plain build, the unit test
#                    binaries: everything the phases share, made once before
#                    any phase reads it
#   test-unit        unit tests, default corpus, TEST_SCALE 1
#   test-unit-alt    unit tests, second corpus, TEST_SCALE 0.5, then the
#                    third (source text), TEST_SCALE 0.25
#   test-asan        ASan+UBSan build, unit tests at 0.25, then the
#                    integration scripts of INTEGRATION_ASAN against
#                    build-asan/uzram
#   test-tsan        TSan build, unit tests at 0.1
#   test-integration the integration scripts on the default corpus, then
#                    those whose checks depend on the data on the second
#                    one, then INTEGRATION_TEXT on the third: one phase, as
#                    the runs must not meet (t65 opens /dev/fuse to every
#                    user while it runs and puts its mode back at the end)
#   check-install    the installed library (scripts/check-install.sh)
#   test-deb         make deb, then the packages installed by apt into a
#                    fresh Debian 12 root (make check-deb, mk/deb.mk); its
#                    first run also makes that root (build/deb-root.tar)
#   check-header, check-layers, check-namespace, check-spdx   (the Makefile)
#   fuzz-smoke-nbd, fuzz-smoke-image   the two fuzzers (mk/fuzz.mk)
#   test-vm-quick    the VM bench (mk/vm.mk): the kernel's NBD client
#                    against uzram, a hang reported with its stack, and
#                    uzram swapon/swapoff, in one guest; qemu TCG, about
#                    3.5 min; then v45 (the keeper over NBD: SIGKILLs and
#                    a restart under the swap hog) in its own, 1-3 min
#   test-vm-ublk     the ublk tests in a 6.12 guest, then swap on Debian
#                    13's newest kernel beside its zram (mk/vm.mk; not
#                    the keeper's v44: see there), about 4 min
#   test-vm-swap-uzram   swap on uzram with its server in the guest: two
#                    processes rewriting random pages (1.33x the guest's
#                    RAM) on ublk, then stress-ng's vm stressors for
#                    30 s (mk/vm.mk), about 2 min; swap over
#                    NBD is v45's, in test-vm-quick
#
# Each phase's output is printed whole when it ends (--output-sync), so
# the lines of two phases never mix; a failing phase stops make test once
# the phases running beside it end, and make test then ends with what
# failed (scripts/test-summary.sh: each failed phase's failing lines, from
# its log in build/test-logs/), as CI shows only the end of the output.
#
# make test makes test-build first, alone (TEST_JOBS jobs at a time), so no two
# phases ever build the same file: the only builds in the phases are their
# own, and they write apart (build-asan/, build-tsan/, build-fuzz/).

TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))

# The scripts run against the ASan build (10 s together): the ways
# `uzram serve` ends and cleans up, which neither the unit tests nor the
# fuzzers reach: t27, --run's command's exit status, a signal, a refused
# option; t54, SIGHUP and SIGTERM with control clients and a recompress
# in flight; t26 and t57, control and protocol errors, and requests after
# shutdown began; t76, the --metrics listener's HTTP threads. A leak on
# one of those paths shows as LeakSanitizer's
# exit status (the device leak of `serve --run 'exit 3'` hid there). A full
# ASan pass of the scripts (make check-integration-sanitizers) takes
# minutes.
INTEGRATION_ASAN := $(addprefix tests/integration/,t26-ctl.sh t27-run.sh \
	t54-signals-ctl.sh t57-spec-errors.sh t76-metrics.sh)

# The scripts run on the third corpus (source text, 6 MiB): those whose
# checks need a property of the data (a size, pages that compress, shared
# clusters) and failed on corpora of other kinds before they made or
# picked data with it: t26 ctl and the memory limit, t28 recompression,
# t29 dictionaries, t31 dedup, t69 the tier, t70 images.
INTEGRATION_TEXT := $(addprefix tests/integration/,t26-ctl.sh \
	t28-recompress.sh t29-dict.sh t31-dedup.sh t69-tiers.sh t70-image.sh)

# make starts the phases in this order as job slots come free, the
# longest first (integration, the VM bench, then the sanitizers). Every phase can start at once,
# as test-build made what they need: a phase that waited for another
# would join the end of the queue when that one ended.
TEST_PHASES := test-integration test-vm-ublk test-vm-quick test-tsan test-asan test-vm-swap-uzram \
	test-deb test-unit test-unit-alt fuzz-smoke-nbd fuzz-smoke-image check-layers \
	check-namespace check-spdx check-install check-header check-bench-doc

.PHONY: test-phases test-build $(TEST_PHASES)

# Each phase runs in a make of its own, timed: make test ends with the
# seconds each phase took, longest first, and the CPU seconds (user +
# system) of everything it ran, so that CI's log shows what makes the run
# long and whether a phase keeps its core busy or waits (a VM phase's
# guest may keep two). The sub-make's status is the phase's.
TEST_TIMES := $(abspath build/test-times.txt)
TEST_LOGS := $(abspath build/test-logs)

test-timed-%:
	@t=$$(date +%s); mkdir -p $(TEST_LOGS); \
	{ $(MAKE) --no-print-directory $*; echo $$? > $(TEST_LOGS)/$*.rc; \
	  times > $(TEST_LOGS)/$*.cpu; } 2>&1 | \
		tee $(TEST_LOGS)/$*.log; r=$$(cat $(TEST_LOGS)/$*.rc); \
	echo "$$(($$(date +%s) - t)) s $* (CPU $$(scripts/cpu-seconds.sh \
		$(TEST_LOGS)/$*.cpu) s)" >> $(TEST_TIMES); exit $$r

# The corpora first: each keeps one core busy (Python, gcore) for a while.
test-build: $(CORPUS_ALT_DIR)/MANIFEST $(CORPUS_TEXT_DIR)/MANIFEST \
	$(CORPUS_READY) all unit

test-phases: $(addprefix test-timed-,$(TEST_PHASES))

test-unit:
	$(MAKE) TEST_SCALE=1 check-unit

test-unit-alt:
	$(MAKE) CORPUS=$(CORPUS_ALT_DIR) TEST_SCALE=0.5 check-unit
	$(MAKE) CORPUS=$(CORPUS_TEXT_DIR) TEST_SCALE=0.25 check-unit

test-asan:
	$(MAKE) SANITIZE=address TEST_SCALE=0.25 check-unit
	$(MAKE) SANITIZE=address INTEGRATION="$(INTEGRATION_ASAN)" \
		check-integration

test-tsan:
	$(MAKE) SANITIZE=thread TEST_SCALE=0.1 check-unit

test-deb:
	$(MAKE) check-deb

test-integration:
	$(MAKE) check-integration
	$(MAKE) CORPUS=$(CORPUS_ALT_DIR) \
		INTEGRATION="$(filter-out $(INTEGRATION_ANY_DATA),$(INTEGRATION))" \
		check-integration
	$(MAKE) CORPUS=$(CORPUS_TEXT_DIR) INTEGRATION="$(INTEGRATION_TEXT)" \
		check-integration
