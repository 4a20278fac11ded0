/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_sim_json.c -- libFuzzer harness for the simulator's description
 * loaders (usim_platform_load, usim_model_load in sim/describe.c).
 *
 * The first input byte selects the loader (even: platform, odd: model); the
 * rest is the JSON text.  The loaders take a path, so the text goes through
 * one temporary file per process (created on first use, rewritten for every
 * input, removed at exit).  Every input must get a status without crashing,
 * leaking or undefined arithmetic; a failure must leave a message that names
 * the file; a success must give a description the simulator can use
 * (positive, finite rates and sizes, consistent head counts).
 * Built by fuzz/build.sh.
 *
 * Not covered here: the simulation itself (a loaded description is not run).
 *
 * With -DULY_FUZZ_STANDALONE the file also builds without libFuzzer: main
 * replays the files named on the command line through the same entry point
 * and prints each loader's verdict (for reproducing a crash, and for the
 * corpus replay in make check).
 */
#define _POSIX_C_SOURCE 200809L   /* mkstemp, pwrite, ftruncate */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "usim.h"
#include "usim_internal.h"   /* usim_set_error: clear the message before each input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#include "simfile.h"

static const char *tmp_path;
static int last_status;

static int pos_finite(double x)
{
    return isfinite(x) && x > 0;
}

static void check_platform(const usim_platform *p)
{
    CHECK(memchr(p->name, 0, sizeof p->name));
    CHECK(strcmp(p->source, tmp_path) == 0);
    CHECK(p->gpus_per_node >= 1 && p->gpus_per_node <= 4096);
    CHECK(p->max_nodes >= 0);
    for (int t = 0; t < USIM_NDTYPE; t++)
        CHECK(pos_finite(p->peak_flops[t]));
    CHECK(p->gemm_eff > 0 && p->gemm_eff <= 1);
    CHECK(p->attn_eff > 0 && p->attn_eff <= 1);
    CHECK(p->attn_causal_skip == 0 || p->attn_causal_skip == 1);
    CHECK(pos_finite(p->hbm_bytes));
    CHECK(pos_finite(p->hbm_Bps));
    CHECK(isfinite(p->reserved_bytes) && p->reserved_bytes >= 0);
    CHECK(p->reserved_bytes < p->hbm_bytes);
    CHECK(pos_finite(usim_nvl_Bps(p)));
    CHECK(pos_finite(usim_nic_Bps(p)));
    CHECK(p->nvl_lat >= 0 && p->nic_lat >= 0);
    CHECK(isfinite(p->oversub) && p->oversub >= 1);
}

static void check_model(const usim_model *m)
{
    CHECK(memchr(m->name, 0, sizeof m->name));
    CHECK(strcmp(m->source, tmp_path) == 0);
    CHECK(m->layers >= 1 && m->hidden >= 1 && m->heads >= 1 && m->kv_heads >= 1);
    CHECK(m->ffn >= 1 && m->vocab >= 1 && m->seq >= 1);
    CHECK(m->micro_batch >= 1 && m->global_batch >= 1);
    CHECK(m->hidden % m->heads == 0);
    CHECK(m->heads % m->kv_heads == 0);
    CHECK(m->global_batch % m->micro_batch == 0);
    CHECK(m->dtype >= 0 && m->dtype < USIM_NDTYPE);
    CHECK(m->gated_mlp == 0 || m->gated_mlp == 1);
    CHECK(m->tied_embeddings == 0 || m->tied_embeddings == 1);
    CHECK(m->causal == 0 || m->causal == 1);
    CHECK(pos_finite(usim_model_params(m)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int model = data[0] & 1;
    tmp_path = fuzz_tmp_write(0, "fuzz_sim_json", data + 1, size - 1);
    usim_set_error(USIM_OK, "%s", "");
    if (model) {
        usim_model m;
        last_status = usim_model_load(tmp_path, &m);
        if (last_status == USIM_OK)
            check_model(&m);
    } else {
        usim_platform p;
        last_status = usim_platform_load(tmp_path, &p);
        if (last_status == USIM_OK)
            check_platform(&p);
    }
    CHECK(last_status >= 0 && last_status < USIM_NSTATUS);
    /* A failure says why, and where: every message names the file. */
    if (last_status != USIM_OK)
        CHECK(strstr(usim_last_error(), tmp_path) != NULL);
    return 0;
}

#ifdef ULY_FUZZ_STANDALONE
static void fuzz_report(const char *name, const unsigned char *data, size_t len)
{
    if (len == 0)
        printf("%s: empty (no selector byte)\n", name);
    else
        printf("%s: %s: %s\n", name, (data[0] & 1) ? "model" : "platform",
               last_status ? usim_last_error() : "ok");
}
#endif
#include "standalone.h"
