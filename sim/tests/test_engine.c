/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_engine.c -- Check suite of the event engine: time order, tie order,
 * monotone clock (and that its check survives NDEBUG), determinism.
 */
#define NDEBUG 1   /* the clock check must not depend on assert() */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"

typedef struct rec {
    usim_time t[4096];
    int64_t arg[4096];
    int n;
} rec;

static void h_rec(usim_engine *e, void *ctx, int64_t arg)
{
    rec *r = ctx;
    r->t[r->n] = usim_engine_now(e);
    r->arg[r->n] = arg;
    r->n++;
}

START_TEST(test_time_order)
{
    usim_engine *e = usim_engine_new();
    rec r = {.n = 0};
    usim_time ts[] = {50, 10, 30, 20, 40};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(usim_engine_at(e, ts[i], h_rec, &r, i), USIM_OK);
    ck_assert_int_eq(usim_engine_run(e), USIM_OK);
    ck_assert_int_eq(r.n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(r.t[i], 10 * (i + 1));
    ck_assert_int_eq(usim_engine_events(e), 5);
    ck_assert_int_eq(usim_engine_now(e), 50);
    usim_engine_free(e);
}
END_TEST

START_TEST(test_ties_in_schedule_order)
{
    usim_engine *e = usim_engine_new();
    rec r = {.n = 0};
    for (int i = 0; i < 1000; i++)
        usim_engine_at(e, 7, h_rec, &r, i);
    usim_engine_run(e);
    ck_assert_int_eq(r.n, 1000);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(r.arg[i], i);
    usim_engine_free(e);
}
END_TEST

/* Handlers that schedule more work: at now (runs after the queued same-time
 * events) and later. */
static void h_chain(usim_engine *e, void *ctx, int64_t arg)
{
    rec *r = ctx;
    h_rec(e, ctx, arg);
    if (arg < 2000 && r->n < 4000) {
        usim_engine_at(e, usim_engine_now(e) + (arg * 7919) % 13, h_chain, ctx, arg + 1);
        usim_engine_at(e, usim_engine_now(e), h_rec, ctx, -arg);
    }
}

START_TEST(test_monotone_and_deterministic)
{
    rec a = {.n = 0}, b = {.n = 0};
    rec *rs[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        usim_engine *e = usim_engine_new();
        uint64_t x = 12345;
        for (int i = 0; i < 200; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            usim_engine_at(e, (usim_time)(x >> 50), h_rec, rs[k], i);
        }
        usim_engine_at(e, 3, h_chain, rs[k], 0);
        usim_engine_run(e);
        usim_engine_free(e);
    }
    ck_assert_int_gt(a.n, 200);
    ck_assert_int_eq(a.n, b.n);
    ck_assert(memcmp(a.t, b.t, sizeof a.t) == 0);
    ck_assert(memcmp(a.arg, b.arg, sizeof a.arg) == 0);
    for (int i = 1; i < a.n; i++)
        ck_assert_int_ge(a.t[i], a.t[i - 1]);
}
END_TEST

START_TEST(test_past_rejected)
{
    usim_engine *e = usim_engine_new();
    rec r = {.n = 0};
    usim_engine_at(e, 100, h_rec, &r, 0);
    usim_engine_run(e);
    ck_assert_int_eq(usim_engine_at(e, 99, h_rec, &r, 1), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "past"));
    ck_assert_int_eq(usim_engine_at(e, 100, h_rec, &r, 2), USIM_OK);
    usim_engine_reset(e);
    ck_assert_int_eq(usim_engine_now(e), 0);
    ck_assert_int_eq(usim_engine_at(e, 0, h_rec, &r, 3), USIM_OK);
    usim_engine_free(e);
}
END_TEST

/* The invariant check aborts even with NDEBUG defined (top of this file). */
START_TEST(test_check_survives_ndebug)
{
    USIM_CHECK(1 == 2);
}
END_TEST

static Suite *make_engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_time_order);
    tcase_add_test(tc, test_ties_in_schedule_order);
    tcase_add_test(tc, test_monotone_and_deterministic);
    tcase_add_test(tc, test_past_rejected);
    tcase_add_test_raise_signal(tc, test_check_survives_ndebug, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_engine_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
