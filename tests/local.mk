# tests/: Check suites (one per module) and MPI tests run under mpirun.

TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; top_srcdir='$(abs_top_srcdir)'; \
	MPIRUN='$(MPIRUN)'; \
	OMPI_ALLOW_RUN_AS_ROOT=1; OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; \
	OMPI_MCA_rmaps_base_oversubscribe=1; OPENBLAS_NUM_THREADS=1; \
	export top_builddir top_srcdir MPIRUN OMPI_ALLOW_RUN_AS_ROOT \
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe OPENBLAS_NUM_THREADS;

TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(OPENMP_CFLAGS) $(BLAS_CFLAGS)
TEST_LIBS = src/libulykern.la $(CHECK_LIBS) $(BLAS_LIBS) -lm

check_PROGRAMS += tests/test_plan tests/test_ref tests/test_blocked tests/test_npy
TESTS += tests/test_plan tests/test_ref tests/test_blocked tests/test_npy

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

check_PROGRAMS += tests/npytool
tests_npytool_SOURCES = tests/npytool.c tests/testutil.h tests/testutil.c
tests_npytool_CFLAGS = $(TEST_CFLAGS)
tests_npytool_LDADD = $(TEST_LIBS)
tests_npytool_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
TESTS += tests/cli_attn.sh tests/symbols.sh
EXTRA_DIST += tests/cli_attn.sh tests/symbols.sh
endif
