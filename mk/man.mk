# SPDX-License-Identifier: MIT
# man.mk - the man pages and the bash completion, made from the option
# tables of the program (cli/gen/gendoc.c) and the scdoc sources in doc/man/.
#
#   make man          build/man/*.1, *.3, *.5 (scdoc)
#   make completion   build/completion/uzram (bash)
#   make check-man    both, and the test that they agree with --help
#                     (tests/integration/t75-man.sh runs in make test too)
#
# A page's source may hold the lines @SYNOPSIS@, @OPTIONS@ (uzram-CMD.1:
# the command's, CMD from the file name) and @COMMANDS@ (uzram.1): each is
# replaced by what uzram-gendoc prints for it, so no option is written by
# hand twice.

MAN_SRCS := $(sort $(wildcard doc/man/*.scd))
MAN_PAGES := $(patsubst doc/man/%.scd,$(BUILD)/man/%,$(MAN_SRCS))
GENDOC := $(BUILD)/uzram-gendoc

.PHONY: man completion check-man

man: $(MAN_PAGES)
completion: $(BUILD)/completion/uzram
all: man completion

$(GENDOC): $(BUILD)/obj/cli/gen/gendoc.o $(filter-out %/cli/main.o,$(CLI_OBJS)) \
		$(BUILD)/libuzram.a
	$(LINK) -o $@ $^ $(LDLIBS_ALL) $(SERVER_LIBS) $(UBLK_LIBS) $(FUSE_LIBS) \
		$(BPF_LIBS)

# uzram-serve.1.scd -> CMD=serve; uzram.1.scd and the others have none.
$(BUILD)/man/%: doc/man/%.scd $(GENDOC) mk/man.mk
	@mkdir -p $(@D)
	@set -e; cmd=$$(echo $* | sed -n 's/^uzram-\(.*\)\.1$$/\1/p'); \
	while IFS= read -r line; do \
		case $$line in \
		@SYNOPSIS@) $(GENDOC) synopsis $$cmd ;; \
		@OPTIONS@) $(GENDOC) options $$cmd ;; \
		@COMMANDS@) $(GENDOC) commands ;; \
		*) printf '%s\n' "$$line" ;; \
		esac; \
	done < $< > $@.scd
	scdoc < $@.scd > $@.tmp && mv $@.tmp $@ && rm -f $@.scd

$(BUILD)/completion/uzram: $(GENDOC)
	@mkdir -p $(@D)
	$(GENDOC) bash > $@.tmp && bash -n $@.tmp && mv $@.tmp $@

check-man: all $(CORPUS_READY)
	UZRAM=$(abspath $(BUILD)/uzram) UZRAM_TEST_CORPUS=$(CORPUS_DIR) \
		bash tests/integration/t75-man.sh

# make install puts them where man and bash-completion look.
.PHONY: install-man
install: install-man
install-man: man completion
	@set -e; for p in $(MAN_PAGES); do \
		s=$${p##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
		install -m 644 $$p $(DESTDIR)$(PREFIX)/share/man/man$$s/; \
	done
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 $(BUILD)/completion/uzram \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/uzram

# and make uninstall takes them away again.
.PHONY: uninstall-man
uninstall: uninstall-man
uninstall-man:
	rm -f $(foreach p,$(MAN_PAGES),$(DESTDIR)$(PREFIX)/share/man/man$(subst .,,$(suffix $(p)))/$(notdir $(p))) \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/uzram

# README.md's "every option, in full" block, from the same tables
# (scripts/readme-options.sh; t75 checks that it agrees).
.PHONY: readme
readme: $(GENDOC)
	bash scripts/readme-options.sh $(GENDOC)
