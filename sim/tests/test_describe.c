/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_describe.c -- Check suite of platform and model descriptions: every
 * shipped preset loads with the documented numbers; bad files fail with the
 * file, line, column and key in the message.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"

#define DATA USIM_SRC_PRESETS "/../tests/data/"

static void preset(const char *kind, const char *name, char *path)
{
    ck_assert_int_eq(usim_preset_path(kind, name, path, 1024), USIM_OK);
}

START_TEST(test_platform_presets)
{
    static const char *const names[] = {"dgx-a100-40g", "dgx-a100-80g", "dgx-h100",
                                        "dgx-h100-2to1", "a100-pcie-4", "dgx-h200",
                                        "l40s-pcie-8", "gb200-nvl72", "mi300x-8"};
    char path[1024];
    usim_platform p;
    for (int i = 0; i < 9; i++) {
        preset("platforms", names[i], path);
        ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s: %s", names[i], usim_last_error());
        ck_assert_str_eq(p.name, names[i]);
        ck_assert(usim_nvl_Bps(&p) > 0 && usim_nic_Bps(&p) > 0 && p.hbm_bytes > 0);
    }
    preset("platforms", "dgx-a100-40g", path);
    usim_platform_load(path, &p);
    ck_assert_int_eq(p.gpus_per_node, 8);
    ck_assert(fabs(p.peak_flops[USIM_BF16] - 312e12) < 1);
    ck_assert(fabs(usim_nvl_Bps(&p) - 300e9 * 0.77) < 1);
    ck_assert(fabs(usim_nic_Bps(&p) - 25e9 * 0.96) < 1);
    ck_assert(fabs(p.hbm_bytes - 40.0 * 1073741824) < 1);
    ck_assert_int_eq(p.nvl_lat, 3000000);
    preset("platforms", "dgx-h100", path);
    usim_platform_load(path, &p);
    ck_assert(fabs(p.peak_flops[USIM_BF16] - 989e12) < 1);
    ck_assert(fabs(usim_nic_Bps(&p) - 50e9 * 0.96) < 1);
    ck_assert_int_eq(usim_platform_domain(&p), 8);
    ck_assert_int_eq(p.full_mesh, 0);
    /* an NVLink domain of 72 over nodes of 4; a full mesh of 7 peer links */
    preset("platforms", "gb200-nvl72", path);
    ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s", usim_last_error());
    ck_assert_int_eq(p.gpus_per_node, 4);
    ck_assert_int_eq(p.nvl_domain, 72);
    ck_assert_int_eq(usim_platform_domain(&p), 72);
    ck_assert(fabs(usim_nvl_Bps(&p) - 900e9 * 0.8) < 1);
    preset("platforms", "mi300x-8", path);
    ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s", usim_last_error());
    ck_assert_int_eq(p.full_mesh, 1);
    ck_assert(fabs(usim_mesh_link_Bps(&p) - 64e9 * 0.8) < 1);
    ck_assert(fabs(usim_nvl_Bps(&p) - 7 * 64e9 * 0.8) < 1);
    ck_assert_int_eq(usim_platform_domain(&p), 8);
}
END_TEST

START_TEST(test_model_presets)
{
    char path[1024];
    usim_model m;
    preset("models", "gpt-7b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.layers, 32);
    ck_assert_int_eq(m.hidden, 4096);
    ck_assert_int_eq(m.heads, 32);
    ck_assert_int_eq(m.kv_heads, 32);
    double P = usim_model_params(&m);
    ck_assert_msg(P > 6.5e9 && P < 6.9e9, "gpt-7b params %g", P);
    preset("models", "llama-3-8b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.kv_heads, 8);
    ck_assert_int_eq(m.ffn, 14336);
    ck_assert_int_eq(m.vocab, 128256);
    ck_assert_int_eq(m.gated_mlp, 1);
    P = usim_model_params(&m);
    ck_assert_msg(fabs(P - 8.03e9) < 0.02e9, "llama-3-8b params %g", P);
    preset("models", "gpt-1.2b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    P = usim_model_params(&m);
    ck_assert_msg(P > 1.1e9 && P < 1.4e9, "gpt-1.2b params %g", P);
    preset("models", "gpt-30b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    P = usim_model_params(&m);
    ck_assert_msg(P > 28e9 && P < 31e9, "gpt-30b params %g", P);
}
END_TEST

START_TEST(test_preset_lookup)
{
    char path[1024];
    ck_assert_int_eq(usim_preset_path("platforms", "no-such-thing", path, sizeof path), USIM_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "no-such-thing"));
    ck_assert_int_eq(usim_preset_path("platforms", "/nonexistent/x.json", path, sizeof path),
                     USIM_ENOTFOUND);
    ck_assert_int_eq(usim_preset_path("platforms", DATA "tiny-platform.json", path, sizeof path), USIM_OK);
}
END_TEST

static void expect_error(const char *file, int status, const char *const *needles)
{
    usim_platform p;
    int rc = usim_platform_load(file, &p);
    ck_assert_int_eq(rc, status);
    const char *msg = usim_last_error();
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(msg, needles[i]) != NULL, "'%s' not in '%s'", needles[i], msg);
}

START_TEST(test_bad_platforms)
{
    expect_error(DATA "bad-syntax.json", USIM_EFORMAT,
                 (const char *[]){"bad-syntax.json:4:", "syntax", NULL});
    expect_error(DATA "missing-key.json", USIM_EFORMAT,
                 (const char *[]){"missing-key.json:15:", "inter_node.nic_bw_Gbps", "missing", NULL});
    expect_error(DATA "wrong-type.json", USIM_EFORMAT,
                 (const char *[]){"wrong-type.json:8:5:", "gpu.hbm_GiB", "expected a number", NULL});
    expect_error(DATA "zero-bw.json", USIM_EFORMAT,
                 (const char *[]){"zero-bw.json:16:5:", "inter_node.nic_bw_Gbps", "> 0", NULL});
    expect_error(DATA "typo-key.json", USIM_EFORMAT,
                 (const char *[]){"typo-key.json:13:", "inter_node.spine_oversubscribtion", "unknown key",
                                  "nearest valid key: 'spine_oversubscription'", NULL});
    expect_error(DATA "no-such-file.json", USIM_ENOTFOUND, (const char *[]){"no-such-file", NULL});
    /* topology keys: a full mesh names its per-link rate, a domain whole nodes */
    expect_error(DATA "mesh-with-bw.json", USIM_EFORMAT,
                 (const char *[]){"mesh-with-bw.json:11:", "intra_node.bw_GBps_per_dir",
                                  "link_bw_GBps_per_dir", NULL});
    expect_error(DATA "bad-domain.json", USIM_EFORMAT,
                 (const char *[]){"bad-domain.json:11:", "intra_node.nvlink_domain_gpus",
                                  "multiple of gpus_per_node (4)", "got 6", NULL});
    expect_error(DATA "bad-topology.json", USIM_EFORMAT,
                 (const char *[]){"intra_node.topology", "\"switch\" or \"full_mesh\"", "fullmesh", NULL});
    expect_error(DATA "mesh-nvls.json", USIM_EFORMAT,
                 (const char *[]){"intra_node.nvls", "no switch", NULL});
}
END_TEST

START_TEST(test_bad_models)
{
    usim_model m;
    ck_assert_int_eq(usim_model_load(DATA "model-bad-heads.json", &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "model-bad-heads.json:5:3: key 'heads'"));
    /* a platform file is not a model: its first key a model does not know is named */
    ck_assert_int_eq(usim_model_load(DATA "tiny-platform.json", &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "tiny-platform.json:4:3: key 'gpus_per_node': unknown key"));
    /* a misspelled key: file, line, column, the key and the nearest valid key */
    ck_assert_int_eq(usim_model_load(DATA "model-typo.json", &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(),
                                 "model-typo.json:7:3: key 'kv_head': unknown key (nearest valid key: 'kv_heads'"));
}
END_TEST

static Suite *make_describe_suite(void)
{
    Suite *s = suite_create("describe");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, test_platform_presets);
    tcase_add_test(tc, test_model_presets);
    tcase_add_test(tc, test_preset_lookup);
    tcase_add_test(tc, test_bad_platforms);
    tcase_add_test(tc, test_bad_models);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_describe_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
