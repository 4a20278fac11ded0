/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rails.c -- Check suite of NICs shared between GPUs (rails): golden
 * cases derivable by hand on the network, and the loader's rules for
 * inter_node.nics_per_node.
 *
 * Platform: 4 GPUs per node, 0.1 GB/s NIC, 5 us NIC latency, so
 * bytes/bandwidth are whole picoseconds.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "usim.h"

#define US 1000000LL   /* ps */

static usim_platform plat(int nics, double oversub)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "rails");
    p.gpus_per_node = 4;
    p.nvl_peak_Bps = 1e9;
    p.nvl_eff = 1;
    p.nic_peak_Bps = 1e8;
    p.nic_eff = 1;
    p.nvl_lat = 1 * US;
    p.nic_lat = 5 * US;
    p.oversub = oversub;
    p.nics_per_node = nics;
    return p;
}

/* GPUs 0 and 1 of node 0 send 1 MB each to GPUs 4 and 5 of node 1. */
static usim_time two_senders(int nics, int src1)
{
    usim_platform p = plat(nics, 1);
    usim_net *n = usim_net_new(&p, 8);
    ck_assert_ptr_nonnull(n);
    usim_xfer x[2] = {{.src = 0, .dst = 4, .bytes = 1000000, .dep = {-1, -1}, .step = 0},
                      {.src = src1, .dst = 4 + src1, .bytes = 1000000, .dep = {-1, -1}, .step = 0}};
    usim_time mk;
    ck_assert_int_eq(usim_net_run(n, x, 2, NULL, &mk), USIM_OK);
    usim_net_free(n);
    return mk;
}

START_TEST(test_shared_nic)
{
    /* one NIC per GPU: each flow alone on its NIC, 1e6 B / 1e8 B/s = 10 ms */
    ck_assert_int_eq(two_senders(0, 1), 5 * US + 10000000000LL);
    ck_assert_int_eq(two_senders(4, 1), 5 * US + 10000000000LL);
    /* 2 NICs for 4 GPUs: GPUs 0 and 1 share NIC 0 (and 4, 5 share a receiving NIC): 20 ms */
    ck_assert_int_eq(two_senders(2, 1), 5 * US + 20000000000LL);
    /* GPUs 0 and 2 are on different NICs: 10 ms again */
    ck_assert_int_eq(two_senders(2, 2), 5 * US + 10000000000LL);
    /* 1 NIC for 4 GPUs: shared */
    ck_assert_int_eq(two_senders(1, 2), 5 * US + 20000000000LL);
}
END_TEST

START_TEST(test_spine_counts_nics)
{
    /* 4 GPUs of node 0 on 2 NICs each send 1 MB to node 1, spine oversubscribed 2:1: the spine
     * carries 2 NICs x 0.1 GB/s / 2 = 0.1 GB/s, so 4 MB take 40 ms */
    usim_platform p = plat(2, 2);
    usim_net *n = usim_net_new(&p, 8);
    usim_xfer x[4];
    for (int g = 0; g < 4; g++)
        x[g] = (usim_xfer){.src = g, .dst = 4 + g, .bytes = 1000000, .dep = {-1, -1}, .step = 0};
    usim_time mk;
    ck_assert_int_eq(usim_net_run(n, x, 4, NULL, &mk), USIM_OK);
    ck_assert_int_eq(mk, 5 * US + 40000000000LL);
    usim_net_free(n);
}
END_TEST

static const char *write_platform(const char *nics)
{
    static char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/test_rails.%d.json", dir && *dir ? dir : "/tmp", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"name\": \"r\", \"gpus_per_node\": 8,\n"
               " \"gpu\": {\"peak_tflops_bf16\": 100, \"gemm_efficiency\": 0.5, \"attention_efficiency\": 0.5,\n"
               "         \"hbm_GiB\": 16, \"hbm_bw_GBps\": 1000},\n"
               " \"intra_node\": {\"bw_GBps_per_dir\": 100, \"latency_us\": 1},\n"
               " \"inter_node\": {\"nic_bw_Gbps\": 400, \"nics_per_node\": %s, \"latency_us\": 5}}\n", nics);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

START_TEST(test_loader)
{
    usim_platform p;
    const char *path = write_platform("2");
    ck_assert_int_eq(usim_platform_load(path, &p), USIM_OK);
    ck_assert_int_eq(p.nics_per_node, 2);
    path = write_platform("3");
    ck_assert_int_eq(usim_platform_load(path, &p), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "key 'inter_node.nics_per_node': must divide gpus_per_node (8) (got 3)"));
    path = write_platform("0");
    ck_assert_int_eq(usim_platform_load(path, &p), USIM_EFORMAT);
    remove(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rails");
    TCase *tc = tcase_create("rails");
    tcase_add_test(tc, test_shared_nic);
    tcase_add_test(tc, test_spine_counts_nics);
    tcase_add_test(tc, test_loader);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
