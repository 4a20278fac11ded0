/*
 * main.c -- entry point of `ulysses`: dispatch to a subcommand.
 */
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
            "  version  print the version\n\n"
            "Run 'ulysses <command> --help' for the options of a command.\n");
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
    if (strcmp(cmd, "attn") == 0)
        return cmd_attn(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "ulysses: unknown command '%s' (see ulysses --help)\n", cmd);
    return ULY_EXIT_BADINPUT;
}
