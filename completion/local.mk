# SPDX-License-Identifier: Apache-2.0
# Bash completion of both programs, generated from their --help texts
# (completion/mkcompletion.sh, as the man pages are) so that it cannot
# disagree with them; installed by `make install` in the bash-completion
# directory (configure --with-bash-completion-dir), each file named after its
# program.  tests/completion.sh checks it.
COMPLETIONS = completion/ulysses completion/ulysses-sim
EXTRA_DIST += completion/mkcompletion.sh
CLEANFILES += $(COMPLETIONS)
if BASH_COMPLETION
nodist_bashcompletion_DATA = $(COMPLETIONS)
else
noinst_DATA = $(COMPLETIONS)
endif
completion/ulysses: ulysses$(EXEEXT) $(srcdir)/completion/mkcompletion.sh
	$(AM_V_GEN)$(MKDIR_P) completion && \
	    $(SHELL) $(srcdir)/completion/mkcompletion.sh ./ulysses$(EXEEXT) ulysses $@
completion/ulysses-sim: ulysses-sim$(EXEEXT) $(srcdir)/completion/mkcompletion.sh
	$(AM_V_GEN)$(MKDIR_P) completion && \
	    $(SHELL) $(srcdir)/completion/mkcompletion.sh ./ulysses-sim$(EXEEXT) ulysses-sim $@
