# SPDX-License-Identifier: MIT
# integration.mk - the integration scripts against sanitizer builds of uzram.
#
#   make check-integration-sanitizers   every tests/integration/t*.sh with
#                     $UZRAM = build-asan/uzram (ASan+UBSan), then with
#                     build-tsan/uzram (TSan)
#
# The scripts run a sanitizer build under setarch -R themselves
# (functions.sh), and a sanitizer report or a leak makes the server exit
# non-zero, which stop_server turns into a failure.

.PHONY: check-integration-sanitizers

check-integration-sanitizers:
	$(MAKE) SANITIZE=address check-integration
	$(MAKE) SANITIZE=thread check-integration
