# SPDX-License-Identifier: MIT
# uzram - zram in userspace. One plain Makefile builds everything.
#
#   make              build/libuzram.a, build/libuzram.so, build/uzram.pc,
#                     build/uzram
#   make test         every test: unit tests, the same under ASan+UBSan and
#                     TSan, integration scripts with real NBD clients, and a
#                     short fuzz run
#   make run          the main job (see README.md)
#   make bench        the benchmark suite, writes BENCHMARKS.md
#   make SANITIZE=address|thread ...   a sanitizer build in build-asan/ or
#                     build-tsan/
#
# Each entry point first runs scripts/deps.sh, which installs the Debian
# packages it needs when they are missing and we are root.

VERSION := $(shell sed -n 's/^\#define UZRAM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$$/\2/p' include/uzram.h | paste -sd.)
SOVERSION := $(firstword $(subst ., ,$(VERSION)))

CC ?= cc
LD ?= ld
OBJCOPY ?= objcopy
SANITIZE ?=
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
# static: the uzram program carries libuzram.a; shared: it links
# libuzram.so, as the Debian package's does (debian/rules).
CLI_LINK ?= static
# Where make install-systemd puts the units, the generator and the
# sysusers file: systemd's own answer, else Debian 12's paths.
SYSTEMD_VAR = $(or $(shell pkg-config --variable=$(1) systemd 2>/dev/null),$(2))
UNITDIR ?= $(call SYSTEMD_VAR,systemdsystemunitdir,/lib/systemd/system)
GENERATORDIR ?= $(call SYSTEMD_VAR,systemdsystemgeneratordir,/lib/systemd/system-generators)
SYSUSERSDIR ?= $(call SYSTEMD_VAR,sysusersdir,/usr/lib/sysusers.d)
SYSCONFDIR ?= /etc

# The warning list lives here and only here.
WARNINGS := -Wall -Wextra -Werror -Wundef -Wcast-qual -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wvla \
	-Wformat=2 -Wno-format-nonliteral
OPT ?= -O2 -g

ifeq ($(SANITIZE),)
BUILD ?= build
SAN_FLAGS :=
else ifeq ($(SANITIZE),address)
BUILD ?= build-asan
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
else ifeq ($(SANITIZE),thread)
BUILD ?= build-tsan
SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
$(error SANITIZE must be empty, address or thread)
endif

DEPS_PKGS := liblz4 libzstd libdeflate libnbd
DEPS_CFLAGS = $(shell pkg-config --cflags $(DEPS_PKGS) 2>/dev/null)
DEPS_LIBS = $(shell pkg-config --libs $(DEPS_PKGS) 2>/dev/null)

# The NBD server's TLS (nbd/tls.c) and systemd's socket activation and
# readiness (server/activation.c, cli/mount/mount_stack.c); only the uzram
# program links them.
SERVER_PKGS := gnutls libsystemd
SERVER_CFLAGS = $(shell pkg-config --cflags $(SERVER_PKGS) 2>/dev/null)
SERVER_LIBS = $(shell pkg-config --libs $(SERVER_PKGS) 2>/dev/null)

BASE_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(WARNINGS) $(SAN_FLAGS) \
	-Iinclude $(DEPS_CFLAGS) $(CPPFLAGS) $(CFLAGS)
LIB_CFLAGS = $(BASE_CFLAGS) -Isrc -fPIC -fvisibility=hidden -DUZRAM_BUILDING
LDLIBS_ALL = $(DEPS_LIBS) -lpthread -lm
LINK = $(CC) $(SAN_FLAGS) $(LDFLAGS)

LIB_SRCS := $(sort $(wildcard src/*/*.c))
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
# The programs use only include/uzram.h (src/LAYERS): the CLI (cli/, and
# a folder per command under it: cli/base, cli/mount, cli/swap, cli/load,
# cli/serve), the NBD connection engine (nbd/), the listening side's
# ground (listen/), the control channel (ctl/), the server's top
# (server/), the ublk front end (ublk/), the freed swap slots (swapfree/)
# and uzram's own file system (fs/);
# common/ is what cli/ and the server's folders share. cli/gen/ is the
# documentation generator (mk/man.mk), not part of the program.
CLI_SRCS := $(sort $(wildcard cli/*.c) $(filter-out cli/gen/%,$(wildcard cli/*/*.c)) \
	$(wildcard nbd/*.c) $(wildcard listen/*.c) $(wildcard ctl/*.c) \
	$(wildcard server/*.c) $(wildcard ublk/*.c) \
	$(wildcard common/*.c) $(wildcard fs/*.c) \
	$(filter-out %.bpf.c,$(wildcard swapfree/*.c)))
CLI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
INTEGRATION := $(sort $(wildcard tests/integration/t*.sh))
SYSTEMD_UNITS := $(sort $(wildcard systemd/*.service systemd/*.socket))
# Scripts whose checks do not depend on which bytes the corpus holds (the
# protocol, signals, TLS, limits, and those that read no byte of it, with
# data of their own (fio's, qemu-io's patterns): make test runs them on one
# corpus only.
INTEGRATION_ANY_DATA := $(addprefix tests/integration/,t20-nbdinfo.sh \
	t24-messages.sh t27-run.sh t40-qemu-io.sh t45-fio.sh \
	t50-bad-client.sh t53-limits.sh t54-signals-ctl.sh t55-tls.sh \
	t56-ctl-socket.sh t57-spec-errors.sh t58-tcp-port.sh t59-ublk-cli.sh t63-fs-diff.sh \
	t64-mount-gone.sh t65-mount.sh \
	t66-fs.sh t67-fs-image.sh t68-fs-loop.sh t72-image-lock.sh t73-backing-blocks.sh \
	t75-man.sh t76-metrics.sh \
	t80-readme.sh t82-generator.sh t83-socket-activation.sh)

.PHONY: all lib cli deps deps-test deps-bench unit check-unit check-header \
	check-sanitizers check-integration check-install check-layers check-namespace check-spdx test run bench bench-quick fuzz \
	fuzz-smoke install uninstall install-systemd clean
.DEFAULT_GOAL := all

all: deps lib cli

deps:
	@scripts/deps.sh build
deps-test: deps
	@scripts/deps.sh test
deps-bench: deps
	@scripts/deps.sh bench

lib: $(BUILD)/libuzram.a $(BUILD)/libuzram.so $(BUILD)/uzram.pc \
	$(BUILD)/uzram-uninstalled.pc
cli: $(BUILD)/uzram

$(BUILD)/obj/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/cli/%.o: cli/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/common/%.o: common/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/server/%.o: server/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(SERVER_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/nbd/%.o: nbd/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(SERVER_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/listen/%.o: listen/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/ctl/%.o: ctl/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -MMD -MP -c -o $@ $<

# The ublk front end's io_uring (ublk/); only the uzram program links it.
UBLK_PKGS := liburing
UBLK_CFLAGS = $(shell pkg-config --cflags $(UBLK_PKGS) 2>/dev/null)
UBLK_LIBS = $(shell pkg-config --libs $(UBLK_PKGS) 2>/dev/null)

$(BUILD)/obj/ublk/%.o: ublk/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(UBLK_CFLAGS) -MMD -MP -c -o $@ $<

# The freed swap slots (swapfree/): a BPF program (swapfree.bpf.c, built by
# clang for the BPF target) inside a skeleton header that bpftool writes,
# loaded by libbpf; only the uzram program links it.
BPF_PKGS := libbpf
BPF_CFLAGS = $(shell pkg-config --cflags $(BPF_PKGS) 2>/dev/null)
BPF_LIBS = $(shell pkg-config --libs $(BPF_PKGS) 2>/dev/null)
BPF_CLANG ?= clang
BPF_ARCH_INC := /usr/include/$(shell $(CC) -print-multiarch 2>/dev/null)
# bpf_tracing.h's name for the machine (where a probe finds its arguments)
BPF_ARCH := $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(shell uname -m)))

$(BUILD)/obj/swapfree/swapfree.bpf.o: swapfree/swapfree.bpf.c
	@mkdir -p $(@D)
	$(BPF_CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_$(BPF_ARCH) \
		-I$(BPF_ARCH_INC) $(BPF_CFLAGS) -c -o $@ $<

$(BUILD)/obj/swapfree/swapfree.skel.h: $(BUILD)/obj/swapfree/swapfree.bpf.o
	bpftool gen skeleton $< name swapfree_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/swapfree/swapfree.o: $(BUILD)/obj/swapfree/swapfree.skel.h

$(BUILD)/obj/swapfree/%.o: swapfree/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(BPF_CFLAGS) -I$(BUILD)/obj/swapfree -MMD -MP -c -o $@ $<

# uzram's own file system (fs/): libfuse3's low-level API; only the uzram
# program links it.
FUSE_PKGS := fuse3
FUSE_CFLAGS = $(shell pkg-config --cflags $(FUSE_PKGS) 2>/dev/null)
FUSE_LIBS = $(shell pkg-config --libs $(FUSE_PKGS) 2>/dev/null)

$(BUILD)/obj/fs/%.o: fs/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(FUSE_CFLAGS) -MMD -MP -c -o $@ $<

# The static library is one relocatable object whose hidden symbols are
# made local, so that it defines no global name but the public uzram_*
# ones, as the shared object exports (doc/layout.md, "Namespace";
# scripts/check-namespace.sh checks both).
$(BUILD)/obj/libuzram.o: $(LIB_OBJS)
	$(LD) -r -o $@.tmp $^
	$(OBJCOPY) --localize-hidden $@.tmp $@
	rm -f $@.tmp

$(BUILD)/libuzram.a: $(BUILD)/obj/libuzram.o
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# The unit tests call internal functions: they link the objects as they
# are, in archives of their own (the library's, and the programs' but for
# main(), for the tests of server/ and cli/ parts).
$(BUILD)/tests/libuzram-internal.a: $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

PROG_OBJS := $(filter-out $(BUILD)/obj/cli/main.o,$(CLI_OBJS))
$(BUILD)/tests/libuzram-programs.a: $(PROG_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libuzram.so: $(LIB_OBJS)
	$(LINK) -shared -Wl,-soname,libuzram.so.$(SOVERSION) -o $@ $^ $(LDLIBS_ALL)

# uzram.pc names PREFIX, so it is remade when PREFIX changes: the stamp
# holds the value the last build saw, and is rewritten only when it
# differs (make install PREFIX=/x after make installed a .pc that said
# /usr/local). The static link's needs go in Requires.private and
# Libs.private, so `pkg-config --static --libs uzram` is the whole list.
PC_PRIVATE := -lpthread -lm
$(BUILD)/prefix.stamp: FORCE
	@mkdir -p $(@D)
	@echo '$(PREFIX)' | cmp -s - $@ || echo '$(PREFIX)' > $@

$(BUILD)/uzram.pc: Makefile include/uzram.h $(BUILD)/prefix.stamp
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' \
		'libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))' '' 'Name: uzram' \
		'Description: compressed RAM block device in userspace' \
		'License: MIT' \
		'Version: $(VERSION)' 'Requires.private: $(DEPS_PKGS)' \
		'Libs: -L$${libdir} -luzram' 'Libs.private: $(PC_PRIVATE)' \
		'Cflags: -I$${includedir}' > $@

# The same for a program built against the tree, without make install:
# pkg-config prefers NAME-uninstalled.pc where PKG_CONFIG_PATH leads it
# (PKG_CONFIG_PATH=build pkg-config --static ... uzram, as the README
# shows). It links the archive.
$(BUILD)/uzram-uninstalled.pc: Makefile include/uzram.h
	@mkdir -p $(@D)
	printf '%s\n' 'includedir=$(abspath include)' \
		'libdir=$(abspath $(BUILD))' '' 'Name: uzram' \
		'Description: compressed RAM block device in userspace (build tree)' \
		'Version: $(VERSION)' 'Requires.private: $(DEPS_PKGS)' \
		'Libs: $${libdir}/libuzram.a' 'Libs.private: $(PC_PRIVATE)' \
		'Cflags: -I$${includedir}' > $@

.PHONY: FORCE
FORCE:

ifeq ($(CLI_LINK),shared)
$(BUILD)/uzram: $(CLI_OBJS) $(BUILD)/libuzram.so
	$(LINK) -o $@ $(CLI_OBJS) -L$(BUILD) -luzram $(LDLIBS_ALL) $(SERVER_LIBS) \
		$(UBLK_LIBS) $(FUSE_LIBS) $(BPF_LIBS)
else
$(BUILD)/uzram: $(CLI_OBJS) $(BUILD)/libuzram.a
	$(LINK) -o $@ $(CLI_OBJS) $(BUILD)/libuzram.a $(LDLIBS_ALL) $(SERVER_LIBS) \
		$(UBLK_LIBS) $(FUSE_LIBS) $(BPF_LIBS)
endif

# Unit tests may include private headers from src/ to test one layer.
$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) \
		$(BUILD)/tests/libuzram-programs.a $(BUILD)/tests/libuzram-internal.a
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(SERVER_CFLAGS) -Isrc -I. -o $@ $< \
		$(BUILD)/tests/libuzram-programs.a $(BUILD)/tests/libuzram-internal.a \
		$(shell pkg-config --cflags --libs cmocka libxxhash) $(LDLIBS_ALL) \
		$(SERVER_LIBS) $(FUSE_LIBS) $(BPF_LIBS)

unit: $(UNIT_BINS)

# Sanitizer runtimes of this toolchain cannot map their shadow memory with
# the kernel's full ASLR entropy; run them with randomisation off.
ifneq ($(SANITIZE),)
RUN_TEST := setarch $(shell uname -m) -R
endif

# UZRAM_TEST_SCALE scales the randomized tests: 1 in the plain build, less
# under the sanitizers, which are several times slower.
#
# The tests read real data: a corpus made by scripts/corpus.sh (a tar of
# installed files and a Python core image). CORPUS=DIR uses a folder of
# one's own instead (it must hold files.tar and heap-python.core); the
# same variable steers make run and make bench. make test also runs the
# unit and integration tests on a second corpus, taken from other
# directories in another order and cut at another size, so that a test
# tuned to one machine's bytes fails here and not on a user's machine,
# and on a third of source text (mk/test.mk).
CORPUS ?=
CORPUS_ALT_DIR := $(abspath build/corpus-alt)
ifeq ($(CORPUS),)
CORPUS_DIR := $(abspath build/corpus)
CORPUS_READY := $(CORPUS_DIR)/MANIFEST
$(CORPUS_READY):
	bash scripts/corpus.sh $(CORPUS_DIR) 8 >/dev/null
else
CORPUS_DIR := $(abspath $(CORPUS))
CORPUS_READY := corpus-given
.PHONY: corpus-given
corpus-given:
	@for f in files.tar heap-python.core; do \
		test -s $(CORPUS_DIR)/$$f || { echo "CORPUS=$(CORPUS): no $$f in it" >&2; exit 1; }; \
	done
endif

# The benchmarks' corpus, 512 MiB of files.tar (bench-cluster, bench-dict;
# make bench's driver makes the same one itself), or CORPUS=DIR.
ifeq ($(CORPUS),)
BENCH_CORPUS_DIR := $(abspath build/bench-corpus)
BENCH_CORPUS_READY := $(BENCH_CORPUS_DIR)/MANIFEST
$(BENCH_CORPUS_READY):
	bash scripts/corpus.sh $(BENCH_CORPUS_DIR) 512 >/dev/null
else
BENCH_CORPUS_DIR := $(CORPUS_DIR)
BENCH_CORPUS_READY := $(CORPUS_READY)
endif

$(CORPUS_ALT_DIR)/MANIFEST:
	CORPUS_DIRS="usr/share usr/lib" CORPUS_SEED=11 \
		bash scripts/corpus.sh $(CORPUS_ALT_DIR) 12 >/dev/null

# A third corpus, of another kind and size: source text, 2 MiB each of
# headers, the Python library and Perl's (6 MiB; corpus.sh's shares). Its
# tar is what differs: it takes the second corpus's core image (a link),
# which spares make test a third Python process and gcore.
CORPUS_TEXT_DIR := $(abspath build/corpus-text)
$(CORPUS_TEXT_DIR)/MANIFEST: $(CORPUS_ALT_DIR)/MANIFEST
	mkdir -p $(CORPUS_TEXT_DIR)
	ln -f $(CORPUS_ALT_DIR)/heap-python.core $(CORPUS_TEXT_DIR)/ 2>/dev/null || \
		cp $(CORPUS_ALT_DIR)/heap-python.core $(CORPUS_TEXT_DIR)/
	CORPUS_DIRS="usr/include:2 usr/lib/python3.*:2 usr/share/perl5" \
		bash scripts/corpus.sh $(CORPUS_TEXT_DIR) 6 >/dev/null

# make test counts every test program that passed here, for its summary.
TEST_RESULTS := $(abspath build/test-results.txt)

# One test: make check-unit T=test_store [FILTER='*same*'] builds and runs
# that binary alone (FILTER: a glob of its test names, CMOCKA_TEST_FILTER);
# make check-integration T=t20 one script (doc/layout.md, "Tests").
T ?=
FILTER ?=
ifneq ($(T),)
UNIT_RUN := $(filter $(BUILD)/tests/$(T) $(BUILD)/tests/$(T:.c=),$(UNIT_BINS))
INTEGRATION_RUN := $(filter tests/integration/$(T)-% tests/integration/$(T) \
	tests/integration/$(T).sh,$(INTEGRATION))
else
UNIT_RUN := $(UNIT_BINS)
INTEGRATION_RUN = $(INTEGRATION)
endif

check-unit: $(UNIT_RUN) $(CORPUS_READY)
	@test -n "$(UNIT_RUN)" || { echo "check-unit: no unit test '$(T)' (known: $(notdir $(UNIT_BINS)))" >&2; exit 1; }
	@mkdir -p $(dir $(TEST_RESULTS))
	@set -e; for t in $(UNIT_RUN); do \
		echo "== $$t"; s=$$(date +%s); UZRAM_TEST_SCALE=$(TEST_SCALE) \
		CMOCKA_TEST_FILTER='$(FILTER)' \
		UZRAM_TEST_CORPUS=$(CORPUS_DIR) $(RUN_TEST) $$t; \
		echo "== $$t: $$(($$(date +%s) - s)) s"; \
		echo "$$t $(CORPUS_DIR)" >> $(TEST_RESULTS); \
	done

check-header:
	@mkdir -p $(BUILD)
	$(CC) -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c include/uzram.h
	$(CXX) -Wall -Wextra -Werror -fsyntax-only -x c++ include/uzram.h

# The calls and includes between the folders are those src/LAYERS
# declares, and none loops (scripts/check-layers.sh); tests/layers/plant.sh
# first shows that the check fails on each kind of planted edge.
check-layers: all
	bash tests/layers/plant.sh
	bash tests/layers/help.sh
	bash tests/layers/api-map.sh
	bash scripts/check-layers.sh src/LAYERS $(BUILD)/obj $(LIB_OBJS) $(CLI_OBJS)

check-sanitizers:
	$(MAKE) SANITIZE=address TEST_SCALE=0.25 check-unit
	$(MAKE) SANITIZE=thread TEST_SCALE=0.1 check-unit

check-integration: all $(CORPUS_READY)
	@test -n "$(INTEGRATION_RUN)" || { echo "check-integration: no script '$(T)' (known: $(notdir $(INTEGRATION)))" >&2; exit 1; }
	@test $(words $(INTEGRATION_RUN)) = 1 -o -z "$(T)" || { echo "check-integration: T=$(T) names $(INTEGRATION_RUN)" >&2; exit 1; }
	@dups=$$(printf '%s\n' $(notdir $(INTEGRATION)) | cut -d- -f1 | sort | uniq -d); \
		test -z "$$dups" || { echo "check-integration: script numbers used twice: $$dups" >&2; exit 1; }
	@mkdir -p $(dir $(TEST_RESULTS))
	@set -e; for t in $(INTEGRATION_RUN); do \
		echo "== $$t"; s=$$(date +%s); UZRAM=$(abspath $(BUILD)/uzram) \
		UZRAM_TEST_CORPUS=$(CORPUS_DIR) bash $$t; \
		echo "== $$t: $$(($$(date +%s) - s)) s"; \
		echo "$$t $(CORPUS_DIR)" >> $(TEST_RESULTS); \
	done

TEST_SCALE ?= 1

# The phases of make test and why they run two at a time: mk/test.mk.
test: deps-test deps-vm
	@mkdir -p build && rm -rf $(TEST_RESULTS) $(TEST_TIMES) $(TEST_LOGS)
	$(MAKE) -j$(TEST_JOBS) --no-print-directory test-build
	@$(MAKE) -j$(TEST_JOBS) --no-print-directory --output-sync=target test-phases || \
		{ scripts/test-summary.sh $(TEST_LOGS); exit 1; }
	@echo "phases, in seconds:"; sort -rn $(TEST_TIMES) | sed 's/^/  /'
	@sed -n 's/.*(CPU \([0-9]*\) s)$$/\1/p' $(TEST_TIMES) | \
		awk '{ s += $$1 } END { print "  CPU of the phases together: " s " s" }'
	@echo "tests: $$(wc -l < $(TEST_RESULTS)) passed, 0 failed"

# Every source file names its licence, MIT (scripts/check-spdx.sh).
check-spdx:
	@mkdir -p $(dir $(TEST_RESULTS))
	bash scripts/check-spdx.sh
	@echo check-spdx >> $(TEST_RESULTS)

# Every section of BENCHMARKS.md survives the next make bench: generated,
# or kept word for word in bench/sections/ (bench/report.py check).
check-bench-doc:
	@mkdir -p $(dir $(TEST_RESULTS))
	python3 bench/report.py check .
	@echo check-bench-doc >> $(TEST_RESULTS)

# The libraries define only uzram_* names (scripts/check-namespace.sh).
check-namespace: lib
	@mkdir -p $(dir $(TEST_RESULTS))
	bash scripts/check-namespace.sh $(BUILD)
	@echo check-namespace >> $(TEST_RESULTS)

# The installed library, used as the README shows (scripts/check-install.sh).
check-install: all
	@mkdir -p $(dir $(TEST_RESULTS))
	bash scripts/check-install.sh $(MAKE)
	@echo check-install >> $(TEST_RESULTS)

run: all
	@scripts/deps.sh run
	@CORPUS_DIR=$(if $(CORPUS),$(abspath $(CORPUS))) bash scripts/run.sh $(BUILD)/uzram

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(PREFIX)/bin
	install -m 644 include/uzram.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libuzram.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libuzram.so $(DESTDIR)$(LIBDIR)/libuzram.so.$(VERSION)
	ln -sf libuzram.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libuzram.so.$(SOVERSION)
	ln -sf libuzram.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libuzram.so
	install -m 644 $(BUILD)/uzram.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 755 $(BUILD)/uzram $(DESTDIR)$(PREFIX)/bin/
	@$(if $(DESTDIR),:,bash scripts/ldconfig-after.sh install $(LIBDIR))

# What make install put there, with the same PREFIX (and DESTDIR).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/uzram.h $(DESTDIR)$(LIBDIR)/libuzram.a \
		$(DESTDIR)$(LIBDIR)/libuzram.so $(DESTDIR)$(LIBDIR)/libuzram.so.$(SOVERSION) \
		$(DESTDIR)$(LIBDIR)/libuzram.so.$(VERSION) \
		$(DESTDIR)$(LIBDIR)/pkgconfig/uzram.pc $(DESTDIR)$(PREFIX)/bin/uzram
	@$(if $(DESTDIR),:,bash scripts/ldconfig-after.sh uninstall $(LIBDIR))

# The systemd side (systemd/README.md): units, the generator that makes
# them from $(SYSCONFDIR)/uzram/uzram.conf, the sysusers file of the
# server's user, and a commented config. Separate from install, whose
# PREFIX may be /usr/local where systemd looks for none of these.
install-systemd:
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(GENERATORDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(SYSCONFDIR)/uzram/uzram.conf.d
	install -m 644 $(SYSTEMD_UNITS) $(DESTDIR)$(UNITDIR)/
	sed 's|@BINDIR@|$(PREFIX)/bin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g; s|@UNITDIR@|$(UNITDIR)|g' \
		systemd/uzram-generator > $(DESTDIR)$(GENERATORDIR)/uzram-generator
	chmod 755 $(DESTDIR)$(GENERATORDIR)/uzram-generator
	install -m 644 systemd/sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/uzram.conf
	install -m 644 systemd/uzram.conf $(DESTDIR)$(SYSCONFDIR)/uzram/uzram.conf

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include mk/*.mk
-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d)
