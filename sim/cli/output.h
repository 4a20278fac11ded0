/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.h -- printing results of ulysses-sim: table, CSV, JSON.  Every
 * number carries its unit in the header.
 */
#ifndef USIM_CLI_OUTPUT_H
#define USIM_CLI_OUTPUT_H

#include <stdio.h>
#include "usim.h"

typedef struct row {
    uly_method method;
    int ok;
    char err[300];
    usim_result r;
    int has_max;
    int64_t max_seq;
    int max_bind;      /* USIM_BIND_*: what one granule more than max_seq exceeds */
} row;

void out_table(FILE *f, const usim_platform *p, const usim_model *m, const row *rows, int n);
void out_csv_header(FILE *f);
/* The offload bits as the CSV and JSON print them: "none", "activations",
 * "optimizer+params", "activations+optimizer", ... */
void out_offload(int bits, char *buf, size_t n);
/* The attention kernel of a job: "flash", "unfused" or "unfused+dropout". */
const char *out_attn_kernel(const usim_job *j);
void out_csv_row(FILE *f, const usim_platform *p, const usim_model *m, int gpus, const row *r);
/* s (a name or key read from a file) made safe to print: uly_sanitize of
 * src/base into buf (of OUT_SAFE bytes); returns buf. */
#define OUT_SAFE 512
const char *out_safe(const char *s, char *buf);

/* 0, or -1 when out of memory or the write fails. */
int out_json(FILE *f, const usim_platform *p, const usim_model *m, int gpus, const row *rows, int n);

#endif
