# SPDX-License-Identifier: MIT
# help.mk - make help: the targets a user or a developer runs, one line
# each. The phases of make test (mk/test.mk) and the helpers the targets
# below call are left out. A target added for people to run gets its line
# here; tests/layers/help.sh checks that each line names a real target.

define HELP_TEXT
Build and install
  all                    the library, the uzram program, man pages, completion (the default)
  lib / cli              only the library / only the program
  man / completion       the man pages (build/man) / bash completion
  install                into PREFIX (/usr/local), then ldconfig; install-man, install-systemd for the rest
  uninstall              what install put into PREFIX (and the man pages)
  readme                 README.md's every-option block, from the option tables
  deb                    the Debian packages, in build/deb
  clean                  remove build*/
Run
  run                    the README's first job: load real data, then serve a device
Test (make test runs the first group whole)
  test                   every test below but test-system and soak; about 15 min on 2 cores
  check-unit             the unit tests (T=test_NAME one binary, FILTER=glob its cases)
  check-integration      the integration scripts (T=tNN-name.sh one of them)
  check-sanitizers       the unit tests under ASan+UBSan, then TSan
  check-integration-sanitizers   the integration scripts against the ASan build
  check-layers           calls and includes between folders against src/LAYERS
  check-namespace        the libraries define only uzram_* names
  check-spdx             every source file names its licence
  check-header           include/uzram.h on its own, as C and C++
  check-install          the installed library, used as the README shows
  check-man              the man pages agree with the option tables
  check-deb              the packages installed by apt into a fresh Debian root
  fuzz / fuzz-smoke      the fuzzers, long / short
  test-vm                the VM bench's tests (qemu TCG; VM_TESTS=tests/vm/vNN-x.sh one)
                         (VM_KERNEL=trixie-backports: on Debian 13's newest kernel)
  test-vm-swap           the swap tests once, zram and uzram in each guest
  test-vm-swap-repeat    the same VM_REPEAT times (default 5)
  test-vm-keeper         swap that survives SIGKILLs and a restart of its server (v44, 6.12)
  test-vm-keeper-repeat  v44 VM_REPEAT times in a row (default 5)
  test-vm-keeper-nbd     the same over the kernel's NBD client (v45, 6.1)
  test-vm-keeper-nbd-repeat  v45 VM_REPEAT times in a row (default 5)
  test-vm-swap-beyond-ram  a swap hog of 3x RAM with a backing file, zram beside (v51)
  test-system            a Debian guest with systemd booting the packages (about 9 min)
  soak                   the long randomized run (tests/soak.sh)
Measure (writes BENCHMARKS.md and bench/results.json)
  bench                  the whole benchmark suite
  bench-quick            a short subset
  bench-callgrind        the library's instructions per page written and read (REV=rev: beside rev's)
  bench-cluster / bench-dedup / bench-dict / bench-image / bench-mount / bench-tiers / bench-ublk
                         one section each
  bench-fs / bench-fs-rtt   uzram's own file system beside tmpfs / one request's round trip (root)
endef
export HELP_TEXT

.PHONY: help
help:
	@printf '%s\n' "$$HELP_TEXT"
