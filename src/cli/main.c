/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c -- entry point of `ulysses`: dispatch to a subcommand.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"
#include "cli.h"
#ifdef HAVE_MPI
#include <cblas.h>
#include <mpi.h>
#include "ulysses.h"
#endif
#ifdef HAVE_CAIRO
#include <cairo.h>
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ulysses <command> [options]\n\n"
            "DeepSpeed-Ulysses sequence-parallel attention on CPUs (MPI ranks play GPUs).\n\n"
            "commands:\n"
            "  attn     run attention (single process, or distributed under mpirun)\n"
            "  bench    benchmarks: kernel, memory, a2a\n"
            "  calibrate  measure this machine and write a ulysses-sim platform file\n"
            "  check    check a framework's sequence-parallel attention dumps against the fp64 reference\n"
            "  explain  show, step by step, who holds what and who sends what (no MPI)\n"
            "  infer    prefill a prompt, then decode over a sharded KV cache (dcp, helix)\n"
            "  train    train a GPT-2 model with sequence parallelism (losses equal for every grid)\n"
            "  version  print the version (also: ulysses --version)\n\n"
            "options:\n"
            "  -h, --help  this text\n"
            "  --version   the version, what this build was built with, and the license\n\n"
#ifndef HAVE_MPI
            "This build has no MPI (configured --without-mpi): only explain and version.\n"
#endif
            "Run 'ulysses <command> --help' for the options of a command.\n"
            "OMP_NUM_THREADS above 4 per usable core (or above 1024) is clamped, with a note.\n"
            "Exit status: 0 success, 1 run-time failure (also a write error on the standard output),\n"
            "2 bad input (doc/reliability.md).\n"
            "Tutorial: doc/tutorial.md; terms: doc/glossary.md; man ulysses.\n");
}

/* The OpenMP default thread count (OMP_NUM_THREADS) is clamped to
 * ULY_OMP_THREADS_PER_CORE x the cores this process may run on, and to
 * ULY_OMP_THREADS_MAX: libgomp crashes (SIGSEGV) when it cannot start the
 * threads of a parallel region, and thousands of threads on a few cores
 * serve nobody.  The adjustment is printed (once under mpirun: by the first
 * rank).  --threads options have their own stated range. */
enum { ULY_OMP_THREADS_PER_CORE = 4, ULY_OMP_THREADS_MAX = 1024 };

static void clamp_omp_threads(void)
{
#ifdef _OPENMP
    int cores = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    if (cores < 1) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cores = n > 0 && n < ULY_OMP_THREADS_MAX ? (int)n : 1;
    }
    long cap = (long)cores * ULY_OMP_THREADS_PER_CORE;
    if (cap > ULY_OMP_THREADS_MAX)
        cap = ULY_OMP_THREADS_MAX;
    const int have = omp_get_max_threads();
    if (have <= cap)
        return;
    omp_set_num_threads((int)cap);
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    if (!r || strcmp(r, "0") == 0)
        fprintf(stderr,
                "ulysses: OMP_NUM_THREADS asks for %d threads; using %ld (at most %d per core of the %d this "
                "process may run on, at most %d)\n",
                have, cap, ULY_OMP_THREADS_PER_CORE, cores, ULY_OMP_THREADS_MAX);
#endif
}

/* ------------------------------------------------------------ --version
 * `ulysses --version` (and `ulysses version`): the program's version, then
 * what this build of the library was built with, then the license.  Asks
 * nothing of MPI but its version (allowed before MPI_Init). */
static int print_version(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            printf("usage: ulysses --version | ulysses version\n"
                   "Prints the version, what this build was built with, and the license.\n");
            return 0;
        }
        fprintf(stderr, "ulysses: %s takes no arguments ('%s')\n", argv[0], argv[1]);
        return ULY_EXIT_BADINPUT;
    }
    printf("ulysses %s\n", ULY_VERSION_STRING);
#ifdef HAVE_MPI
    int mv = 0, ms = 0;
    MPI_Get_version(&mv, &ms);
    printf("libulysses %s: MPI %d.%d", ULY_VERSION_STRING, mv, ms);
#if defined(OMPI_MAJOR_VERSION) && defined(OMPI_MINOR_VERSION) && defined(OMPI_RELEASE_VERSION)
    printf(" (Open MPI %d.%d.%d)", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#endif
#ifdef _OPENMP
    printf(", OpenMP %d", (int)_OPENMP);
#else
    printf(", no OpenMP");
#endif
#ifdef HAVE_OPENBLAS_GET_CORENAME
    printf(", OpenBLAS (%s core)", openblas_get_corename());
#else
    printf(", OpenBLAS");
#endif
    printf(", kernels %s", uly_kernel_isa());
#else
    printf("libulysses %s: no MPI (configured --without-mpi: explain only)", ULY_VERSION_STRING);
#endif
#ifdef HAVE_CAIRO
    printf(", explain figures by cairo %s\n", cairo_version_string());
#else
    printf(", no cairo (no explain figures)\n");
#endif
    printf("License: Apache-2.0 <https://www.apache.org/licenses/LICENSE-2.0> (the file LICENSE)\n");
    return 0;
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return ULY_EXIT_BADINPUT;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return print_version(argc - 1, argv + 1);
    clamp_omp_threads();
    if (strcmp(cmd, "explain") == 0)
        return cmd_explain(argc - 1, argv + 1);
#ifdef HAVE_MPI
    if (strcmp(cmd, "attn") == 0)
        return cmd_attn(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "calibrate") == 0)
        return cmd_calibrate(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "infer") == 0)
        return cmd_infer(argc - 1, argv + 1);
    /* the independent checker: one process */
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 1, argv + 1);
#else
    if (strcmp(cmd, "attn") == 0 || strcmp(cmd, "bench") == 0 || strcmp(cmd, "train") == 0 ||
        strcmp(cmd, "infer") == 0 || strcmp(cmd, "calibrate") == 0 || strcmp(cmd, "check") == 0) {
        fprintf(stderr, "ulysses: '%s' needs MPI, and this build was configured --without-mpi\n", cmd);
        return EXIT_BADINPUT;
    }
#endif
    fprintf(stderr, "ulysses: unknown command '%s' (see ulysses --help)\n", cmd);
    return ULY_EXIT_BADINPUT;
}

int main(int argc, char **argv)
{
    int rc = run(argc, argv);
    /* What was printed must have reached the standard output: a write error
     * (a full disk, a closed pipe's EPIPE with SIGPIPE ignored) is a failure
     * of the run, never a silent exit 0.  Every subcommand ends here. */
    errno = 0;
    int bad = ferror(stdout);
    if (fflush(stdout) != 0)
        bad = 1;
    int err = errno;
    if (fclose(stdout) != 0) {
        bad = 1;
        if (!err)
            err = errno;
    }
    if (bad) {
        if (err)
            fprintf(stderr, "ulysses: error writing the standard output: %s\n", strerror(err));
        else /* an earlier flush failed: its errno is gone */
            fprintf(stderr, "ulysses: error writing the standard output (output was lost)\n");
        if (rc == 0)
            rc = ULY_EXIT_RUNTIME;
    }
    return rc;
}
