# SPDX-License-Identifier: Apache-2.0
dist_doc_DATA += doc/design.md doc/kernels.md doc/ulysses.md doc/reliability.md doc/cli.md doc/minicluster.md doc/glossary.md \
	doc/tutorial.md doc/methods.md doc/train.md doc/check.md doc/inference.md

# Man pages, generated so that they cannot disagree with the programs:
# ulysses(1) and ulysses-sim(1) from their --help texts (help2man, every
# subcommand included), libulysses(3) from the comments of the public headers.
# `make` builds them (man -l ulysses.1 works in the build tree); `make install`
# installs them.
EXTRA_DIST += doc/man/mkman.sh doc/man/mklibman.sh doc/man/ulysses.h2m \
	doc/man/ulysses-sim.h2m doc/man/libulysses.3.in
if HAVE_HELP2MAN
nodist_man1_MANS = ulysses.1 ulysses-sim.1
CLEANFILES += ulysses.1 ulysses-sim.1
ulysses.1: ulysses$(EXEEXT) $(srcdir)/doc/man/mkman.sh $(srcdir)/doc/man/ulysses.h2m
	$(AM_V_GEN)$(SHELL) $(srcdir)/doc/man/mkman.sh '$(HELP2MAN)' ./ulysses$(EXEEXT) ulysses \
	    'sequence-parallel attention on CPUs, and an explanation of it' $(srcdir)/doc/man/ulysses.h2m $@
ulysses-sim.1: ulysses-sim$(EXEEXT) $(srcdir)/doc/man/mkman.sh $(srcdir)/doc/man/ulysses-sim.h2m
	$(AM_V_GEN)$(SHELL) $(srcdir)/doc/man/mkman.sh '$(HELP2MAN)' ./ulysses-sim$(EXEEXT) ulysses-sim \
	    'cost model of sequence-parallel training on GPU clusters' $(srcdir)/doc/man/ulysses-sim.h2m $@
endif
if HAVE_MPI
nodist_man3_MANS = libulysses.3
CLEANFILES += libulysses.3
libulysses.3: $(srcdir)/doc/man/mklibman.sh $(srcdir)/doc/man/libulysses.3.in $(include_HEADERS)
	$(AM_V_GEN)$(SHELL) $(srcdir)/doc/man/mklibman.sh $(srcdir)/doc/man/libulysses.3.in $@ \
	    $(addprefix $(srcdir)/,$(include_HEADERS))
endif
TESTS += tests/man.sh
EXTRA_DIST += tests/man.sh

# The tutorial's figures (drawn by ulysses explain; tests/tutorial.sh checks
# that the tool still draws exactly these).
tutfigdir = $(docdir)/figures
dist_tutfig_DATA = doc/figures/ulysses-4x8-gqa.png doc/figures/megatron-sp-4.png \
	doc/figures/ring-causal-4.png doc/figures/zigzag-causal-4.png \
	doc/figures/allgather-causal-4.png doc/figures/usp-causal-4.png doc/figures/window-ring-4.png \
	doc/figures/docs-zigzag-4.png doc/figures/ring-causal-32.png
# The decode figures of doc/inference.md (ulysses explain --method dcp|helix --svg).
dist_tutfig_DATA += doc/figures/dcp-4.png doc/figures/helix-4.png
# The simulator's weak-scaling sweep plot (ulysses-sim sweep --plot; doc/simulator.md).
dist_tutfig_DATA += doc/figures/sweep-weak.png
EXTRA_DIST += doc/figures/RENDERER
# Every command of doc/tutorial.md, run and compared.
TESTS += tests/tutorial.sh
EXTRA_DIST += tests/tutorial.sh
