# SPDX-License-Identifier: Apache-2.0
# sim/: libusim (the discrete-event cost model) and the ulysses-sim command.
# Builds without MPI and without BLAS.

USIM_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DUSIM_SRC_PRESETS='"$(abs_top_srcdir)/sim/presets"' \
	-DUSIM_DATA_PRESETS='"$(pkgdatadir)/presets"'
USIM_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -O2

noinst_LTLIBRARIES += sim/libusim.la
sim_libusim_la_SOURCES = sim/usim.h sim/usim_internal.h sim/error.c sim/engine.c \
	sim/topo.c sim/net.c sim/net_internal.h sim/coll_engine.c sim/coll_engine.h sim/coll_internal.h sim/coll_group.c sim/coll_gen.c sim/coll_ring.c \
	sim/coll_tree.c sim/coll_class.c sim/coll_run.c sim/tuner.c sim/jsonutil.c sim/jsonutil.h sim/describe.c sim/model.c sim/hfconfig.c sim/hfconfig.h \
	sim/job.c sim/job.h sim/cost.c sim/cost.h sim/jobcoll.c sim/jobcoll.h sim/opsched.c sim/opsched.h \
	sim/program.c sim/program.h sim/pipeline.c sim/pipeline.h sim/compute.c sim/compute.h sim/trace.c sim/trace.h sim/simulate.c \
	sim/estimate.c sim/attnjob.c sim/infer.c sim/infer.h
sim_libusim_la_CPPFLAGS = $(USIM_CPPFLAGS)
sim_libusim_la_CFLAGS = $(USIM_CFLAGS)
sim_libusim_la_LIBADD = src/libulyplan.la $(JANSSON_LIBS) -lm

bin_PROGRAMS += ulysses-sim
ulysses_sim_SOURCES = sim/cli/main.c sim/cli/opts.c sim/cli/opts.h sim/cli/output.c sim/cli/files.c sim/cli/files.h \
	sim/cli/output.h sim/cli/sweep.c sim/cli/plan.c sim/cli/plan_launch.c sim/cli/plan_launch.h sim/cli/attn.c \
	sim/cli/coll.c sim/cli/infer.c sim/cli/docs.c sim/cli/calibrate.c
ulysses_sim_CPPFLAGS = $(USIM_CPPFLAGS)
ulysses_sim_CFLAGS = $(USIM_CFLAGS)
ulysses_sim_LDADD = sim/libusim.la src/libulybase_json.la $(JANSSON_LIBS) -lm

# Presets: installed under $(pkgdatadir)/presets/{platforms,models}.
simplatformsdir = $(pkgdatadir)/presets/platforms
dist_simplatforms_DATA = sim/presets/platforms/dgx-a100-40g.json \
	sim/presets/platforms/dgx-a100-80g.json sim/presets/platforms/dgx-h100.json \
	sim/presets/platforms/dgx-h100-2to1.json sim/presets/platforms/a100-pcie-4.json \
	sim/presets/platforms/dgx-h200.json sim/presets/platforms/l40s-pcie-8.json \
	sim/presets/platforms/gb200-nvl72.json sim/presets/platforms/mi300x-8.json
simmodelsdir = $(pkgdatadir)/presets/models
dist_simmodels_DATA = sim/presets/models/gpt-1.2b.json sim/presets/models/gpt-7b.json \
	sim/presets/models/gpt-30b.json sim/presets/models/llama-3-8b.json \
	sim/presets/models/gpt-1.2b-64h.json sim/presets/models/llama-3.1-405b.json \
	sim/presets/models/llama-3.1-70b.json sim/presets/models/qwen2.5-72b.json \
	sim/presets/models/llama-3.1-8b.json sim/presets/models/qwen3-32b.json

dist_doc_DATA += doc/simulator.md doc/planning.md doc/validation.md

# make validate: every published reference point (doc/validation.md is
# regenerated from sim/validation.md.in, keeping its local-cluster section).
.PHONY: validate
validate: ulysses-sim$(EXEEXT)
	ULYSSES_SIM=$(top_builddir)/ulysses-sim$(EXEEXT) $(SHELL) $(top_srcdir)/sim/validate.sh \
	  --doc $(top_srcdir)/doc/validation.md > $(top_builddir)/validation.md.tmp
	mv $(top_builddir)/validation.md.tmp $(top_srcdir)/doc/validation.md
	ULYSSES_SIM=$(top_builddir)/ulysses-sim$(EXEEXT) $(SHELL) $(top_srcdir)/sim/validate.sh --check

# Tests: one Check suite per module, and shell tests of the command line.
USIM_TEST_CFLAGS = $(USIM_CFLAGS) $(CHECK_CFLAGS)
USIM_TEST_LIBS = sim/libusim.la $(CHECK_LIBS) $(JANSSON_LIBS) -lm

check_PROGRAMS += sim/tests/test_engine sim/tests/test_net sim/tests/test_describe \
	sim/tests/test_workload sim/tests/test_rails sim/tests/test_attnjob sim/tests/test_props \
	sim/tests/test_golden sim/tests/test_classes sim/tests/test_infer sim/tests/test_pipeline
TESTS += sim/tests/test_attnjob sim/tests/test_classes sim/tests/test_infer sim/tests/cli_infer.sh
EXTRA_DIST += sim/tests/cli_infer.sh
TESTS += sim/tests/cli_hfconfig.sh
EXTRA_DIST += sim/tests/cli_hfconfig.sh
# packed documents: ulysses-sim docs (the balancers, pytorch PR #189902's example)
TESTS += sim/tests/cli_docs.sh
EXTRA_DIST += sim/tests/cli_docs.sh
TESTS += sim/tests/cli_plan_maxseq.sh
EXTRA_DIST += sim/tests/cli_plan_maxseq.sh
TESTS += sim/tests/test_engine sim/tests/test_net sim/tests/test_describe \
	sim/tests/test_workload sim/tests/test_rails sim/tests/test_props sim/tests/test_golden \
	sim/tests/cli_basic.sh sim/tests/cli_errors.sh sim/tests/cli_sweep.sh sim/tests/cli_plan.sh \
	sim/tests/symbols.sh sim/tests/validate.sh sim/tests/cli_coll.sh sim/tests/test_pipeline
EXTRA_DIST += sim/validation/megatron-gpt-1.7b.json sim/validation/megatron-gpt-3.6b.json \
	sim/validation/megatron-gpt-7.5b.json sim/validation/megatron-gpt-18b.json \
	sim/validation/megatron-gpt-39b.json sim/validation/megatron-gpt-76b.json \
	sim/validation/megatron-gpt-145b.json sim/validation/megatron-gpt-310b.json \
	sim/validation/megatron-gpt-530b.json sim/validation/megatron-gpt-1t.json \
	sim/validation/megatron-gpt-175b.json
EXTRA_DIST += sim/validate.sh sim/bench-scale.sh sim/validation.md.in sim/tests/validate.sh sim/tests/cli_coll.sh \
	sim/tests/cli_plan.sh sim/tests/cli_basic.sh sim/tests/cli_errors.sh sim/tests/cli_sweep.sh sim/tests/symbols.sh \
	sim/tests/data/bad-syntax.json sim/tests/data/missing-key.json \
	sim/tests/data/wrong-type.json sim/tests/data/zero-bw.json \
	sim/tests/data/huge-latency.json sim/tests/data/huge-flops.json \
	sim/tests/data/model-bad-heads.json sim/tests/data/tiny-platform.json \
	sim/tests/data/typo-key.json sim/tests/data/unknown-key.json sim/tests/data/model-typo.json sim/tests/data/model-40-heads.json \
	sim/tests/data/cpu-2x2.json sim/tests/data/bad-bwd-eff.json \
	sim/tests/data/mesh-with-bw.json sim/tests/data/bad-domain.json sim/tests/data/bad-topology.json \
	sim/tests/data/mesh-nvls.json \
	sim/tests/data/cpu-2x2-call.json sim/tests/data/bad-a2a-call.json

sim_tests_test_attnjob_SOURCES = sim/tests/test_attnjob.c
sim_tests_test_attnjob_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_attnjob_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_attnjob_LDADD = $(USIM_TEST_LIBS) src/libulyplan.la

sim_tests_test_engine_SOURCES = sim/tests/test_engine.c
sim_tests_test_engine_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_engine_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_engine_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_net_SOURCES = sim/tests/test_net.c
sim_tests_test_net_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_net_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_net_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_describe_SOURCES = sim/tests/test_describe.c
sim_tests_test_describe_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_describe_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_describe_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_workload_SOURCES = sim/tests/test_workload.c
sim_tests_test_workload_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_workload_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_workload_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_props_SOURCES = sim/tests/test_props.c
sim_tests_test_props_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_props_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_props_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_pipeline_SOURCES = sim/tests/test_pipeline.c
sim_tests_test_pipeline_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_pipeline_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_pipeline_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_golden_SOURCES = sim/tests/test_golden.c
sim_tests_test_golden_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_golden_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_golden_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_infer_SOURCES = sim/tests/test_infer.c
sim_tests_test_infer_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_infer_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_infer_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_classes_SOURCES = sim/tests/test_classes.c
sim_tests_test_classes_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_classes_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_classes_LDADD = $(USIM_TEST_LIBS)

sim_tests_test_rails_SOURCES = sim/tests/test_rails.c
sim_tests_test_rails_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_rails_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_rails_LDADD = $(USIM_TEST_LIBS)

# The output files' rule (src/base/base_out.h) on ulysses-sim's outputs.
TESTS += sim/tests/cli_outputs.sh
EXTRA_DIST += sim/tests/cli_outputs.sh

# Traces (--trace, --trace-ranks): valid JSON, every file named, one process
# pair per traced GPU, and link-track slices that nest (sim/tests/trace_check).
check_PROGRAMS += sim/tests/trace_check
sim_tests_trace_check_SOURCES = sim/tests/trace_check.c
sim_tests_trace_check_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
sim_tests_trace_check_LDADD = $(JANSSON_LIBS)
TESTS += sim/tests/cli_trace.sh
EXTRA_DIST += sim/tests/cli_trace.sh

# Long-context techniques: golden memory terms and times, the command line.
check_PROGRAMS += sim/tests/test_longctx
TESTS += sim/tests/test_longctx sim/tests/cli_longctx.sh
EXTRA_DIST += sim/tests/cli_longctx.sh
sim_tests_test_longctx_SOURCES = sim/tests/test_longctx.c
sim_tests_test_longctx_CPPFLAGS = $(USIM_CPPFLAGS)
sim_tests_test_longctx_CFLAGS = $(USIM_TEST_CFLAGS)
sim_tests_test_longctx_LDADD = $(USIM_TEST_LIBS)
# ulysses-sim calibrate --nccl-tests: fit a platform to nccl-tests output
TESTS += sim/tests/cli_calibrate_nccl.sh
EXTRA_DIST += sim/tests/cli_calibrate_nccl.sh sim/tests/data/nccl-allreduce-2x8-mpi.txt \
	sim/tests/data/nccl-allgather-old-layout.txt sim/tests/data/nccl-alltoall-g8-nohash.txt
