# SPDX-License-Identifier: Apache-2.0
# src/: libulysses (kernels, plan, npy, distributed) and the ulysses driver.

# The base library under both programs (src/base/base.h): exit statuses,
# the last-error message, allocation hooks, checked arithmetic, K/M/G
# integers, file reading, output files (base_out.c).  No dependency.  Its JSON half needs jansson and
# is linked only by the drivers and the simulator.
noinst_LTLIBRARIES += src/libulybase.la src/libulybase_json.la
src_libulybase_la_SOURCES = src/base/base.c src/base/base.h src/base/base_out.c src/base/base_out.h \
	src/base/base_progress.c src/base/base_progress.h
src_libulybase_la_CFLAGS = $(AM_CFLAGS)
src_libulybase_json_la_SOURCES = src/base/base_json.c src/base/base_json.h
src_libulybase_json_la_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
src_libulybase_json_la_LIBADD = src/libulybase.la $(JANSSON_LIBS)

# The plan layer and error handling: pure C, shared with the simulator.
noinst_LTLIBRARIES += src/libulyplan.la
src_libulyplan_la_SOURCES = src/plan.c src/plan_methods.c src/layout.c src/plan_kv.c src/plan_docs.c src/error.c src/internal.h
src_libulyplan_la_CFLAGS = $(AM_CFLAGS)
src_libulyplan_la_LIBADD = src/libulybase.la

# Kernels and .npy: no MPI.
noinst_LTLIBRARIES += src/libulykern.la
src_libulykern_la_SOURCES = src/kernel_ref.c src/kernel_blocked.c \
	src/kernel_blocked_impl.h src/vexp.h src/vexp.c src/vexp_impl.h src/npy.c src/merge.c src/kernel_decode.c src/infer_impl.h src/model.c src/model_impl.h \
	src/elem.c src/elem_impl.h src/safetensors.c src/tfile.c src/tfile_impl.h
# KERNEL_OPT_CFLAGS (-O3 unless the user set CFLAGS) comes after AM_CFLAGS's
# -O2.  No contraction into FMA: the SIMD clones of vexp.h must give the same
# bits whatever instructions they may use (-std=c11 implies it for GCC; this
# keeps it when a user's CFLAGS selects a GNU dialect).
src_libulykern_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(BLAS_CFLAGS) $(KERNEL_OPT_CFLAGS) \
	-ffp-contract=off -Wno-psabi $(JANSSON_CFLAGS)
src_libulykern_la_LIBADD = src/libulyplan.la $(BLAS_LIBS) $(JANSSON_LIBS)

# The independent checker (doc/check.md): reassembly, reference, cells,
# diagnosis, balance and the report's JSON.
src_libulykern_la_SOURCES += src/check.c src/check_diag.c src/check_impl.h
src_libulykern_la_CFLAGS += $(JANSSON_CFLAGS)
src_libulykern_la_LIBADD += $(JANSSON_LIBS)

include_HEADERS += include/ulysses.h include/ulysses_plan.h include/ulysses_kernels.h include/ulysses_npy.h \
	include/ulysses_model.h include/ulysses_check.h include/ulysses_infer.h

if HAVE_MPI
lib_LTLIBRARIES += src/libulysses.la
src_libulysses_la_SOURCES = src/comm.c src/comm.h src/buffers.c src/dist.c src/dist_impl.h src/dist_copy.c src/dist_a2a.c \
	src/dist_shm.c src/dist_ovl.c src/dist_ovs.c src/methods.h src/ring.c \
	src/allgather.c src/sp.c src/train.c src/infer.c
src_libulysses_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(MPI_CFLAGS) $(BLAS_CFLAGS)
src_libulysses_la_LIBADD = src/libulykern.la $(BLAS_LIBS) $(MPI_LIBS) -lm
src_libulysses_la_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS) -version-info 0:0:0 \
	-export-symbols-regex '^uly_'
include_HEADERS += include/ulysses_dist.h include/ulysses_train.h

endif

# The ulysses driver.  explain needs no MPI: without MPI the driver is built
# with explain alone, on the plan layer.
bin_PROGRAMS += ulysses
ulysses_SOURCES = src/cli/main.c src/cli/cli.h src/cli/status.c src/cli/args.c src/cli/args.h \
	src/cli/cmd_explain.c src/cli/explain.h src/cli/explain_draw.c src/cli/explain_canvas.c \
	src/cli/explain_canvas.h src/cli/explain_grid.c src/cli/explain_json.c src/cli/explain_html.c
if HAVE_MPI
ulysses_SOURCES += src/cli/drv.h src/cli/agree.c src/cli/agree_table.c src/cli/agree_table.h src/cli/outfile.c src/cli/preflight.c \
	src/cli/inputs.c src/cli/cmd_attn.c src/cli/attn_io.c src/cli/attn_io.h src/cli/cmd_bench.c src/cli/cmd_calibrate.c src/cli/cmd_train.c src/cli/cmd_infer.c \
	src/cli/timing.h src/cli/timing.c
# ulysses check --data: the training-level checks (no MPI; on the tensor-file reader)
ulysses_SOURCES += src/cli/check_data.c
ulysses_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(MPI_CFLAGS) $(BLAS_CFLAGS) $(CAIRO_CFLAGS) $(JANSSON_CFLAGS) -pthread
ulysses_LDADD = src/libulysses.la src/libulybase_json.la $(BLAS_LIBS) $(MPI_LIBS) $(CAIRO_LIBS) $(JANSSON_LIBS) -lm
ulysses_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS) -pthread
# ulysses check (doc/check.md): one process, no collectives
ulysses_SOURCES += src/cli/cmd_check.c
else
ulysses_CFLAGS = $(AM_CFLAGS) $(CAIRO_CFLAGS) $(JANSSON_CFLAGS)
ulysses_LDADD = src/libulyplan.la src/libulybase_json.la $(CAIRO_LIBS) $(JANSSON_LIBS) -lm
endif

# The page of `ulysses explain --html`: its template, one C string per line.
src/cli/explain_page.h: $(srcdir)/src/cli/explain_page.html
	$(AM_V_GEN)$(MKDIR_P) src/cli && $(SED) -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n",/' \
	  $(srcdir)/src/cli/explain_page.html > $@-t && mv $@-t $@
BUILT_SOURCES = src/cli/explain_page.h
$(ulysses_OBJECTS): src/cli/explain_page.h
CLEANFILES += src/cli/explain_page.h
EXTRA_DIST += src/cli/explain_page.html
nodist_ulysses_SOURCES = src/cli/explain_page.h
