/*
 * main.c -- entry point of `ulysses`: dispatch to a subcommand.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ulysses <command> [options]\n\n"
            "DeepSpeed-Ulysses sequence-parallel attention on CPUs (MPI ranks play GPUs).\n\n"
            "commands:\n"
            "  attn     run attention (single process, or distributed under mpirun)\n"
            "  bench    benchmarks: kernel, memory, a2a\n"
            "  calibrate  measure this machine and write a ulysses-sim platform file\n"
            "  explain  show, step by step, who holds what and who sends what (no MPI)\n"
            "  train    train a GPT-2 model with sequence parallelism (losses equal for every grid)\n"
            "  version  print the version\n\n"
#ifndef HAVE_MPI
            "This build has no MPI (configured --without-mpi): only explain and version.\n"
#endif
            "Run 'ulysses <command> --help' for the options of a command.\n"
            "Tutorial: doc/tutorial.md; terms: doc/glossary.md; man ulysses.\n");
}

int exit_status_of(int status)
{
    switch (status) {
    case ULY_OK:
        return ULY_EXIT_OK;
    case ULY_EINVAL:
    case ULY_EOVERFLOW:
    case ULY_EFORMAT:
    case ULY_EMISMATCH:
    case ULY_ENONFINITE:
        return ULY_EXIT_BADINPUT;
    default: /* ULY_ENOMEM, ULY_EIO, ULY_EMPI, ULY_EPEER, ULY_EUNAVAIL: the run failed, not its input */
        return ULY_EXIT_RUNTIME;
    }
}

int main(int argc, char **argv)
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
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("ulysses %s\n", ULY_VERSION_STRING);
        return 0;
    }
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
#else
    if (strcmp(cmd, "attn") == 0 || strcmp(cmd, "bench") == 0 || strcmp(cmd, "train") == 0 ||
        strcmp(cmd, "calibrate") == 0) {
        fprintf(stderr, "ulysses: '%s' needs MPI, and this build was configured --without-mpi\n", cmd);
        return EXIT_BADINPUT;
    }
#endif
    fprintf(stderr, "ulysses: unknown command '%s' (see ulysses --help)\n", cmd);
    return ULY_EXIT_BADINPUT;
}
