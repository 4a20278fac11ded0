# SPDX-License-Identifier: Apache-2.0
# tests/: Check suites (one per module) and MPI tests run under mpirun.

TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; top_srcdir='$(abs_top_srcdir)'; \
	MPIRUN='$(MPIRUN)'; \
	OMPI_ALLOW_RUN_AS_ROOT=1; OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; \
	OMPI_MCA_rmaps_base_oversubscribe=1; OPENBLAS_NUM_THREADS=1; \
	OMPI_MCA_mca_base_component_disable_dlclose=1; \
	OMPI_MCA_pml=ob1; OMPI_MCA_btl=self,vader; OMPI_MCA_ess_singleton_isolated=1; \
	LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"; \
	OMPI_MCA_orte_tmpdir_base=$${TMPDIR:-/tmp}/ulysses-test.$$$$; \
	mkdir -p "$$OMPI_MCA_orte_tmpdir_base" && trap 'rm -rf "$$OMPI_MCA_orte_tmpdir_base"' EXIT; \
	export top_builddir top_srcdir MPIRUN OMPI_ALLOW_RUN_AS_ROOT \
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe OPENBLAS_NUM_THREADS \
	OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_pml OMPI_MCA_btl \
	OMPI_MCA_ess_singleton_isolated LSAN_OPTIONS OMPI_MCA_orte_tmpdir_base;

TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(OPENMP_CFLAGS) $(BLAS_CFLAGS)
TEST_LIBS = src/libulykern.la $(CHECK_LIBS) $(BLAS_LIBS) -lm

check_PROGRAMS += tests/test_plan tests/test_ref tests/test_blocked tests/test_npy tests/test_alloc \
	tests/test_model
TESTS += tests/test_plan tests/test_ref tests/test_blocked tests/test_npy tests/test_alloc tests/test_model

# packed documents: the balancers' layouts and per-rank work (plan)
check_PROGRAMS += tests/test_plan_docs
TESTS += tests/test_plan_docs
tests_test_plan_docs_SOURCES = tests/test_plan_docs.c
tests_test_plan_docs_CFLAGS = $(TEST_CFLAGS)
tests_test_plan_docs_LDADD = $(TEST_LIBS)
tests_test_plan_docs_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

# inference: the KV layouts and decode volumes (plan), the decode kernel and its emulation
check_PROGRAMS += tests/test_infer_plan tests/test_infer_kernel
TESTS += tests/test_infer_plan tests/test_infer_kernel
tests_test_infer_plan_SOURCES = tests/test_infer_plan.c
tests_test_infer_plan_CFLAGS = $(TEST_CFLAGS)
tests_test_infer_plan_LDADD = $(TEST_LIBS)
tests_test_infer_plan_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
tests_test_infer_kernel_SOURCES = tests/test_infer_kernel.c tests/testutil.h tests/testutil.c
tests_test_infer_kernel_CFLAGS = $(TEST_CFLAGS)
tests_test_infer_kernel_LDADD = $(TEST_LIBS)
tests_test_infer_kernel_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

# `make bench`: the decode kernel against a STREAM copy in the same run (built on demand)
EXTRA_PROGRAMS = tests/bench_decode
CLEANFILES += tests/bench_decode$(EXEEXT)
tests_bench_decode_SOURCES = tests/bench_decode.c
tests_bench_decode_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -O3
tests_bench_decode_LDADD = src/libulykern.la $(BLAS_LIBS) -lm
tests_bench_decode_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

tests_test_model_SOURCES = tests/test_model.c tests/testutil.h tests/testutil.c
tests_test_model_CFLAGS = $(TEST_CFLAGS)
tests_test_model_LDADD = $(TEST_LIBS)
tests_test_model_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

tests_test_alloc_SOURCES = tests/test_alloc.c tests/testutil.h tests/testutil.c
tests_test_alloc_CFLAGS = $(TEST_CFLAGS)
tests_test_alloc_LDADD = $(TEST_LIBS)
tests_test_alloc_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

tests_test_plan_SOURCES = tests/test_plan.c tests/testutil.h tests/testutil.c
tests_test_plan_CFLAGS = $(TEST_CFLAGS)
tests_test_plan_LDADD = $(TEST_LIBS)
tests_test_plan_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

tests_test_ref_SOURCES = tests/test_ref.c tests/testutil.h tests/testutil.c
tests_test_ref_CFLAGS = $(TEST_CFLAGS)
tests_test_ref_LDADD = $(TEST_LIBS)
tests_test_ref_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

tests_test_blocked_SOURCES = tests/test_blocked.c tests/testutil.h tests/testutil.c
tests_test_blocked_CFLAGS = $(TEST_CFLAGS)
tests_test_blocked_LDADD = $(TEST_LIBS)
tests_test_blocked_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

tests_test_npy_SOURCES = tests/test_npy.c tests/testutil.h tests/testutil.c
tests_test_npy_CFLAGS = $(TEST_CFLAGS)
tests_test_npy_LDADD = $(TEST_LIBS)
tests_test_npy_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)

if HAVE_MPI
MPI_TEST_LIBS = src/libulysses.la $(CHECK_LIBS) $(BLAS_LIBS) $(MPI_LIBS) -lm
check_PROGRAMS += tests/test_dist
tests_test_dist_SOURCES = tests/test_dist.c tests/testutil.h tests/testutil.c
tests_test_dist_CFLAGS = $(TEST_CFLAGS) $(MPI_CFLAGS)
tests_test_dist_LDADD = $(MPI_TEST_LIBS)
tests_test_dist_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/test_dist.sh
EXTRA_DIST += tests/test_dist.sh

# inference: prefill into the KV-cache layouts, decode by dcp and helix
check_PROGRAMS += tests/test_infer
tests_test_infer_SOURCES = tests/test_infer.c tests/testutil.h tests/testutil.c
tests_test_infer_CFLAGS = $(TEST_CFLAGS) $(MPI_CFLAGS)
tests_test_infer_LDADD = $(MPI_TEST_LIBS)
tests_test_infer_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/test_infer.sh
EXTRA_DIST += tests/test_infer.sh

check_PROGRAMS += tests/test_methods
tests_test_methods_SOURCES = tests/test_methods.c tests/testutil.h tests/testutil.c
tests_test_methods_CFLAGS = $(TEST_CFLAGS) $(MPI_CFLAGS)
tests_test_methods_LDADD = $(MPI_TEST_LIBS)
tests_test_methods_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/test_methods.sh
EXTRA_DIST += tests/test_methods.sh

check_PROGRAMS += tests/test_train
tests_test_train_SOURCES = tests/test_train.c
tests_test_train_CFLAGS = $(TEST_CFLAGS) $(MPI_CFLAGS)
tests_test_train_LDADD = $(MPI_TEST_LIBS)
tests_test_train_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/test_train.sh tests/cli_train.sh
EXTRA_DIST += tests/test_train.sh tests/cli_train.sh

# the training step's benchmark (make bench-train; doc/performance.md, "Training step, round three")
EXTRA_PROGRAMS += tests/bench_train
CLEANFILES += tests/bench_train$(EXEEXT)
tests_bench_train_SOURCES = tests/bench_train.c
tests_bench_train_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_bench_train_LDADD = src/libulysses.la $(BLAS_LIBS) $(MPI_LIBS) -lm
endif

# the merged GEMMs' bitwise property under every OpenBLAS core type (doc/train.md, "Merged GEMMs")
check_PROGRAMS += tests/test_train_gemm
tests_test_train_gemm_SOURCES = tests/test_train_gemm.c
tests_test_train_gemm_LDADD = $(BLAS_LIBS)
TESTS += tests/test_train_gemm.sh
EXTRA_DIST += tests/test_train_gemm.sh tests/bench_train_torch.py
if HAVE_MPI

check_PROGRAMS += tests/npytool
tests_npytool_SOURCES = tests/npytool.c tests/testutil.h tests/testutil.c
tests_npytool_CFLAGS = $(TEST_CFLAGS)
tests_npytool_LDADD = $(TEST_LIBS)
tests_npytool_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/cli_attn.sh tests/cli_reliability.sh tests/cli_shm.sh tests/symbols.sh tests/cli_calibrate.sh
# tensor formats and layouts of ulysses attn (.npy f16, .safetensors, --layout, --scale, --lse)
TESTS += tests/cli_formats.sh
EXTRA_DIST += tests/cli_formats.sh
EXTRA_DIST += tests/cli_attn.sh tests/cli_reliability.sh tests/cli_shm.sh tests/symbols.sh tests/lsan.supp tests/cli_calibrate.sh
# packed documents: the pairs each rank of ulysses attn evaluates == ulysses-sim docs
TESTS += tests/docs_balance.sh
EXTRA_DIST += tests/docs_balance.sh
# ulysses infer: prefill and decode with --check on 1-3 ranks, bad inputs, --json
TESTS += tests/cli_infer.sh
EXTRA_DIST += tests/cli_infer.sh
# The progress line of long work: on a terminal only (script(1) gives one), never with --quiet.
TESTS += tests/cli_progress.sh
EXTRA_DIST += tests/cli_progress.sh
# doc/reliability.md's status table, every row run (needs both programs and mpirun).
TESTS += tests/doc_status.sh
EXTRA_DIST += tests/doc_status.sh tests/ulimit.sh
# The memory preflight's library part == what the library allocates, every rank (ULYSSES_MEMORY_REPORT).
TESTS += tests/cli_memory.sh
EXTRA_DIST += tests/cli_memory.sh

endif

# The mini-cluster (network namespaces + tc + Open MPI over TCP, see
# doc/minicluster.md): needs root and the MPI build; exit 77 from the script
# means "cannot run here" and is reported as a skip.
check-minicluster: all
	@$(AM_TESTS_ENVIRONMENT) sh $(abs_top_srcdir)/tests/minicluster/check.sh; rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "check-minicluster: SKIPPED (see the message above)"; exit 0; fi; exit $$rc
.PHONY: check-minicluster
EXTRA_DIST += tests/minicluster/minicluster.sh tests/minicluster/mc-agent.sh tests/minicluster/check.sh \
	tests/minicluster/validate-local.sh tests/minicluster/validate-local-notes.md

# ulysses-sim, calibrated here, against our own ulysses attn runs on 1 node
# and on a 2-node mini-cluster at two link rates; writes the local section of
# doc/validation.md (about 15 minutes on 2 cores; needs root for 2 nodes).
validate-local: all
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' \
	  sh $(abs_top_srcdir)/tests/minicluster/validate-local.sh --doc $(abs_top_srcdir)/doc/validation.md
.PHONY: validate-local

# ulysses explain needs no MPI: built and tested in every configuration.
TESTS += tests/cli_explain.sh tests/explain_figs.sh
EXTRA_DIST += tests/cli_explain.sh tests/explain_figs.sh tests/expect.sh
TESTS += tests/explain_html.sh tests/explain_decode.sh
EXTRA_DIST += tests/explain_decode.sh
EXTRA_DIST += tests/explain_html.sh tests/explain_html_check.py

# No call cycle between the files of a library or program, no include cycle
# between headers (nm over the objects; every configuration).
TESTS += tests/cycles.sh
EXTRA_DIST += tests/cycles.sh

# Serial suites under valgrind memcheck (not part of `make check`: slow).
# Check forks each test; valgrind follows the forks, so every test is checked.
VALGRIND_TESTS = tests/test_plan tests/test_ref tests/test_blocked tests/test_npy tests/test_alloc tests/test_model \
	sim/tests/test_engine sim/tests/test_net sim/tests/test_describe sim/tests/test_workload
EXTRA_DIST += tests/valgrind.supp
check-valgrind: $(check_PROGRAMS)
	@status=0; for t in $(VALGRIND_TESTS); do \
	  echo "== valgrind $$t"; \
	  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 $(LIBTOOL) --mode=execute valgrind -q \
	    --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	    --suppressions=$(abs_top_srcdir)/tests/valgrind.supp ./$$t > $$t.valgrind.log 2>&1; \
	  rc=$$?; tail -n 3 $$t.valgrind.log; \
	  if [ $$rc -ne 0 ]; then echo "FAIL: $$t (exit $$rc, see $$t.valgrind.log)"; status=1; fi; \
	done; \
	for h in $(VALGRIND_FUZZ); do \
	  echo "== valgrind fuzz/replay_$$h (corpus)"; \
	  $(LIBTOOL) --mode=execute valgrind -q --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite,indirect --suppressions=$(abs_top_srcdir)/tests/valgrind.supp \
	    ./fuzz/replay_$$h $(abs_top_srcdir)/fuzz/corpus/$$h/* > fuzz/replay_$$h.valgrind.log 2>&1; \
	  rc=$$?; tail -n 1 fuzz/replay_$$h.valgrind.log; \
	  if [ $$rc -ne 0 ]; then echo "FAIL: fuzz/replay_$$h (exit $$rc, see fuzz/replay_$$h.valgrind.log)"; status=1; fi; \
	done; \
	for f in "--format json --method usp,ring --gpus 128 --seq 256K" "coll --op all-reduce --gpus 8 --bytes 256M --format json" \
	         "attn --platform dgx-h100 --gpus 8 --format json"; do \
	  echo "== valgrind ulysses-sim $$f"; \
	  $(LIBTOOL) --mode=execute valgrind -q --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite,indirect ./ulysses-sim $$f > sim.valgrind.log 2>&1 || \
	    { echo "FAIL: ulysses-sim $$f (see sim.valgrind.log)"; status=1; }; \
	done; exit $$status
VALGRIND_FUZZ = npy sim_json args sim_run agree
.PHONY: check-valgrind

# The reliability catalogue as one table (each failure class, its command,
# every rank's exit status, the message); not in `make check`.
EXTRA_DIST += tests/reliability_table.sh
reliability-table: ulysses$(EXEEXT) ulysses-sim$(EXEEXT) tests/npytool$(EXEEXT)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(abs_top_srcdir)/tests/reliability_table.sh
.PHONY: reliability-table
CLEANFILES += tests/*.valgrind.log sim/tests/*.valgrind.log fuzz/*.valgrind.log sim.valgrind.log

# The output files' helper of both programs (src/base/base_out.c): no MPI, no BLAS.
check_PROGRAMS += tests/test_base_out
TESTS += tests/test_base_out
tests_test_base_out_SOURCES = tests/test_base_out.c
tests_test_base_out_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_base_out_LDADD = src/libulybase.la $(CHECK_LIBS)

# The independent checker (ulysses_check.h, doc/check.md).
check_PROGRAMS += tests/test_check
TESTS += tests/test_check
tests_test_check_SOURCES = tests/test_check.c tests/testutil.h tests/testutil.c
tests_test_check_CFLAGS = $(TEST_CFLAGS)
tests_test_check_LDADD = $(TEST_LIBS)
tests_test_check_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
# tests/cli_check.sh: ulysses check on dumps written by tests/chkdump
if HAVE_MPI
check_PROGRAMS += tests/chkdump
tests_chkdump_SOURCES = tests/chkdump.c tests/testutil.h tests/testutil.c
tests_chkdump_CFLAGS = $(TEST_CFLAGS)
tests_chkdump_LDADD = $(TEST_LIBS)
tests_chkdump_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/cli_check.sh
EXTRA_DIST += tests/cli_check.sh
# ulysses check --data: the training-level checks of per-rank token ids,
# labels, positions and losses, on dumps written by tests/datagen (correct
# and with planted defects).  The driver's check needs the MPI build.
check_PROGRAMS += tests/datagen
tests_datagen_SOURCES = tests/datagen.c
tests_datagen_CFLAGS = $(TEST_CFLAGS)
tests_datagen_LDADD = $(TEST_LIBS)
tests_datagen_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/cli_check_data.sh
EXTRA_DIST += tests/cli_check_data.sh
endif

# Installation conventions: the bash completion (completion/, sourced in
# bash: commands, options, values, every option of every --help) and
# ulysses.pc (a program linked through pkg-config --static against
# libulysses.a, then run), --version of both programs (the package's version,
# the build, the license).
TESTS += tests/completion.sh tests/pkgconfig.sh tests/version.sh
EXTRA_DIST += tests/completion.sh tests/pkgconfig.sh tests/version.sh
# Every column, row label, "label:" and JSON key / CSV column the documented
# outputs print is defined in doc/glossary.md (tests/glossary.sh lists the
# commands, one a line; MPI lines are skipped without MPI).
TESTS += tests/glossary.sh
EXTRA_DIST += tests/glossary.sh tests/glossary_terms.awk tests/glossary_check.awk

# Every source file names its license (SPDX-License-Identifier, LICENSE).
TESTS += tests/spdx.sh
EXTRA_DIST += tests/spdx.sh
