/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_sim_run.c -- libFuzzer harness for the whole simulation: a platform
 * file, a model file and a command line go through the strict loaders, the
 * option parser, degree resolution, the memory model, the estimate and the
 * discrete-event simulation of every requested method.
 *
 * Input: PLATFORM-JSON \0 MODEL-JSON \0 ARGS, ARGS being the command line
 * with arguments separated by newlines (as `ulysses-sim ARGS`).  Promises
 * checked on every input: no crash, leak or undefined arithmetic; a failure
 * is a status with a message; a success is an answer that cannot mislead:
 * finite positive time, compute + exposed communication + bubble = iteration
 * time, MFU in (0, 1], finite memory and byte counts, the effective global
 * batch at least the requested one (and any difference warned).
 * Sizes are capped for fuzzing speed (GPUs <= 256, layers <= 8, micro-steps
 * x layers <= 64); the caps themselves are tested by the command-line tests.
 *
 * With -DULY_FUZZ_STANDALONE it replays files (make check replays the corpus).
 */
#define _POSIX_C_SOURCE 200809L   /* mkstemp, pwrite, ftruncate */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opts.h"
#include "usim.h"
#include "usim_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#include "simfile.h"

#define MAX_ARGS 32

static const char *tmp_path[2];
static int last_verdict;   /* 0 bad input, 1 simulated */

static void check_result(const usim_model *m, const usim_result *r)
{
    CHECK(isfinite(r->iter_s) && r->iter_s > 0);
    CHECK(isfinite(r->compute_s) && r->compute_s >= 0);
    double sum = r->compute_s + r->bubble_s;
    for (int k = 0; k < USIM_NKIND; k++) {
        CHECK(isfinite(r->exposed_s[k]) && r->exposed_s[k] >= 0);
        sum += r->exposed_s[k];
    }
    CHECK(fabs(sum - r->iter_s) <= 1e-6 * r->iter_s + 1e-6);
    CHECK(isfinite(r->mfu) && r->mfu > 0 && r->mfu <= 1);
    CHECK(isfinite(r->tflops) && r->tflops > 0);
    CHECK(isfinite(r->mem.total) && r->mem.total > 0);
    for (int c = 0; c < USIM_NCLASS; c++)
        CHECK(isfinite(r->sent_bytes[c]) && r->sent_bytes[c] >= 0);
    CHECK(r->global_batch >= m->global_batch);
    if (r->global_batch != m->global_batch) {
        int warned = 0;
        for (int k = 0; k < r->nwarn; k++)
            warned |= strstr(r->warn[k], "rounded up") != NULL;
        CHECK(warned);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    last_verdict = 0;
    const uint8_t *z1 = memchr(data, 0, size);
    if (!z1)
        return 0;
    const uint8_t *z2 = memchr(z1 + 1, 0, size - (size_t)(z1 + 1 - data));
    if (!z2)
        return 0;
    tmp_path[0] = fuzz_tmp_write(0, "fuzz_sim_run", data, (size_t)(z1 - data));
    tmp_path[1] = fuzz_tmp_write(1, "fuzz_sim_run", z1 + 1, (size_t)(z2 - z1 - 1));
    /* the command line: newline-separated arguments */
    size_t alen = size - (size_t)(z2 + 1 - data);
    char *args = malloc(alen + 1);
    if (!args)
        return 0;
    memcpy(args, z2 + 1, alen);
    args[alen] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (char *t = args; argc < MAX_ARGS && t && *t;) {
        char *nl = strchr(t, '\n');
        if (nl)
            *nl = 0;
        argv[argc++] = t;
        t = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;

    usim_set_error(USIM_OK, "%s", "");
    usim_platform p;
    usim_model base;
    opts o;
    opts_defaults(&o);
    int help = 0;
    if (usim_platform_load(tmp_path[0], &p) || usim_model_load(tmp_path[1], &base)) {
        CHECK(strstr(usim_last_error(), "fuzz_sim_run") != NULL);   /* names the file */
        goto out;
    }
    if (opts_parse(&o, argc, argv, 0, OPTS_RUN, &help) || help) {
        CHECK(help || opts_error()[0]);
        goto out;
    }
    int gpus = o.ngpus ? (int)o.gpus[0] : 8;
    if (gpus > 256 || (o.layers ? o.layers : base.layers) > 8)
        goto out;
    if (usim_platform_check_gpus(&p, gpus)) {
        CHECK(usim_last_error()[0]);
        goto out;
    }
    usim_model m = base;
    apply_model_overrides(&o, &m, o.nseqs ? o.seqs[0] : 0);
    if (m.global_batch / m.micro_batch > 64)
        goto out;
    usim_sim *sim = usim_sim_new(&p, gpus);
    CHECK(sim != NULL);
    for (int i = 0; i < o.nmethods; i++) {
        usim_job j = make_job(&o, o.methods[i], gpus);
        usim_memory mem;
        int fits;
        double est;
        usim_result r;
        int rc = usim_memory_estimate(&p, &m, &j, &mem, &fits);
        CHECK(rc == USIM_OK || rc == USIM_EINVAL);
        if (rc) {
            CHECK(usim_last_error()[0]);
            continue;
        }
        CHECK(isfinite(mem.total) && mem.total > 0);
        rc = usim_estimate(&p, &m, &j, &est);
        CHECK(rc == USIM_OK && isfinite(est) && est > 0);
        rc = usim_simulate(sim, &m, &j, NULL, &r);
        CHECK(rc == USIM_OK || rc == USIM_EINVAL);
        if (rc) {
            CHECK(usim_last_error()[0]);
            continue;
        }
        check_result(&m, &r);
        last_verdict = 1;
    }
    usim_sim_free(sim);
out:
    free(args);
    return 0;
}

#ifdef ULY_FUZZ_STANDALONE
static void fuzz_report(const char *path, const unsigned char *data, size_t len)
{
    (void)data;
    (void)len;
    printf("%s: %s\n", path, last_verdict ? "simulated" : "rejected or skipped");
}
#include "standalone.h"
#endif
