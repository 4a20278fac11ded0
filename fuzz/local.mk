# SPDX-License-Identifier: Apache-2.0
# fuzz/: corpus replay of the fuzz harnesses in make check.
#
# Each harness (fuzz/fuzz_*.c) built with -DULY_FUZZ_STANDALONE is a replayer:
# it runs the files named on its command line through the harness's checks and
# aborts on a violated one.  fuzz/replay.sh replays every seed corpus in
# fuzz/corpus/.  The libFuzzer builds are made by fuzz/build.sh (clang), not here.
# The corpora travel with the tarball through the top-level dist-hook.

FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -DULY_FUZZ_STANDALONE

check_PROGRAMS += fuzz/replay_npy fuzz/replay_sim_json fuzz/replay_args fuzz/replay_sim_run fuzz/replay_agree
TESTS += fuzz/replay.sh
EXTRA_DIST += fuzz/replay.sh

# .npy parser (src/npy.c)
fuzz_replay_npy_SOURCES = fuzz/fuzz_npy.c fuzz/standalone.h fuzz/tmpfile.h
fuzz_replay_npy_CPPFLAGS = $(FUZZ_CPPFLAGS)
fuzz_replay_npy_LDADD = src/libulykern.la -lm

# Simulator platform/model JSON loaders (sim/describe.c)
fuzz_replay_sim_json_SOURCES = fuzz/fuzz_sim_json.c fuzz/standalone.h fuzz/simfile.h fuzz/tmpfile.h fuzz/check.h
fuzz_replay_sim_json_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/sim
fuzz_replay_sim_json_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
fuzz_replay_sim_json_LDADD = sim/libusim.la $(JANSSON_LIBS) -lm

# Command-line parsers: args_parse (src/cli/args.c, compiled in: it is part of
# the ulysses program, not of a library) and ulysses-sim's count and list
# syntax (sim/cli/opts.c).
fuzz_replay_args_SOURCES = fuzz/fuzz_args.c fuzz/standalone.h fuzz/check.h src/cli/args.c src/cli/args.h \
	sim/cli/opts.c sim/cli/opts.h
fuzz_replay_args_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/sim/cli \
	-I$(top_srcdir)/src/cli
fuzz_replay_args_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
fuzz_replay_args_LDADD = sim/libusim.la $(JANSSON_LIBS) -lm

# The whole simulation: platform + model + command line through the loaders,
# option parser, resolution, memory model, estimate and simulation.
fuzz_replay_sim_run_SOURCES = fuzz/fuzz_sim_run.c fuzz/standalone.h fuzz/simfile.h fuzz/tmpfile.h fuzz/check.h sim/cli/opts.c \
	sim/cli/opts.h
fuzz_replay_sim_run_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/sim/cli
fuzz_replay_sim_run_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
fuzz_replay_sim_run_LDADD = sim/libusim.la $(JANSSON_LIBS) -lm

# The drivers' option agreement: records and verdict (src/cli/agree_table.c,
# compiled in like args.c; no MPI needed).
fuzz_replay_agree_SOURCES = fuzz/fuzz_agree.c fuzz/standalone.h fuzz/check.h src/cli/agree_table.c src/cli/agree_table.h
fuzz_replay_agree_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/src/cli
fuzz_replay_agree_LDADD = src/libulybase.la
