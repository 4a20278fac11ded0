/*
 * check_data.c -- `ulysses check --data DIR` (the training-level checks):
 * not part of this build yet.
 */
#include <stdio.h>

#include "cli.h"

int check_data_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ulysses check --data: not built\n");
    return EXIT_BADINPUT;
}
