/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_base_out.c -- Check suite for the output files of both programs
 * (src/base/base_out.c): outputs that are inputs or each other, the commit
 * of a set (nothing renamed while a destination changed; a failure midway
 * naming what was and was not committed), and the stale temporaries of
 * killed runs (removed unless a live process holds them locked).  Each test
 * works in its own fresh directory under /tmp.
 */
#define _GNU_SOURCE

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base_out.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_base_out_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* dir + "/" + name into a static ring of buffers. */
static const char *at(const char *name)
{
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The content of path ("" when missing). */
static const char *get(const char *path)
{
    static char buf[256];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* Write text into o's temporary through its descriptor and make it ready. */
static void fill(uly_out *o, const char *text)
{
    ck_assert_int_eq(write(o->fd, text, strlen(text)), (ssize_t)strlen(text));
    ck_assert_int_eq(uly_out_ready(o), 0);
}

/* How many temporaries of output name are in dir. */
static int ntmp(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '^\\.%s\\.tmp' > '%s/.count'", dir, name, dir);
    ck_assert_int_ne(system(cmd), -1);
    return atoi(get(at(".count")));
}

START_TEST(commit_renames_all)
{
    put(at("a"), "old a");
    uly_out o[3] = {{.path = at("a"), .what = "--a"}, {.path = NULL, .what = "--unused"},
                    {.path = at("b"), .what = "--b"}};
    ck_assert_int_eq(uly_out_prepare(o, 3, NULL, 0), 0);
    ck_assert_int_eq(ntmp("a") + ntmp("b"), 2);
    fill(&o[0], "new a");
    /* not every output ready: nothing renamed */
    ck_assert_int_eq(uly_out_commit(o, 3), ULY_EXIT_RUNTIME);
    ck_assert_ptr_nonnull(strstr(uly_base_last_error(), "--b"));
    ck_assert_str_eq(get(at("a")), "old a");
    fill(&o[2], "new b");
    ck_assert_int_eq(uly_out_commit(o, 3), 0);
    ck_assert_str_eq(get(at("a")), "new a");
    ck_assert_str_eq(get(at("b")), "new b");
    ck_assert_int_eq(o[0].committed && o[2].committed, 1);
    uly_out_discard(o, 3);
    ck_assert_int_eq(ntmp("a") + ntmp("b"), 0);
}
END_TEST

START_TEST(changed_destination_renames_nothing)
{
    uly_out o[2] = {{.path = at("a"), .what = "--a"}, {.path = at("b"), .what = "--b"}};
    ck_assert_int_eq(uly_out_prepare(o, 2, NULL, 0), 0);
    fill(&o[0], "new a");
    fill(&o[1], "new b");
    put(at("b"), "theirs"); /* another process creates the second destination */
    ck_assert_int_eq(uly_out_commit(o, 2), ULY_EXIT_RUNTIME);
    ck_assert_msg(strstr(uly_base_last_error(), "--b ") &&
                      strstr(uly_base_last_error(), "was created by another process during this run") &&
                      strstr(uly_base_last_error(), "no output was replaced: --a, --b"),
                  "%s", uly_base_last_error());
    ck_assert_int_eq(access(at("a"), F_OK), -1); /* the first was not renamed either */
    ck_assert_str_eq(get(at("b")), "theirs");
    uly_out_discard(o, 2);
    ck_assert_int_eq(ntmp("a"), 0);
    ck_assert_int_eq(ntmp("b"), 1); /* this run's result, named in the message, is kept */
}
END_TEST

START_TEST(failure_midway_names_committed)
{
    put(at("a"), "old a");
    put(at("b"), "old b");
    uly_out o[2] = {{.path = at("a"), .what = "--a"}, {.path = at("b"), .what = "--b"}};
    ck_assert_int_eq(uly_out_prepare(o, 2, NULL, 0), 0);
    fill(&o[0], "new a");
    fill(&o[1], "new b");
    ck_assert_int_eq(unlink(o[1].tmp), 0); /* the second rename will fail */
    ck_assert_int_eq(uly_out_commit(o, 2), ULY_EXIT_RUNTIME);
    char want[512];
    snprintf(want, sizeof want, "--b %s: cannot rename the finished file into place: No such file or directory "
             "(committed: --a %s; not committed: --b %s)", at("b"), at("a"), at("b"));
    ck_assert_str_eq(uly_base_last_error(), want);
    ck_assert_str_eq(get(at("a")), "new a");
    ck_assert_str_eq(get(at("b")), "old b");
    uly_out_discard(o, 2);
}
END_TEST

START_TEST(outputs_and_inputs)
{
    put(at("in"), "input");
    ck_assert_int_eq(link(at("in"), at("link")), 0);
    ck_assert_int_eq(symlink("in", at("slink")), 0);
    const uly_in ins[2] = {{.path = NULL, .what = "--unused", .replaced_by = NULL},
                           {.path = at("in"), .what = "--resume", .replaced_by = "--checkpoint"}};
    /* the one output allowed to be the input */
    uly_out c = {.path = at("in"), .what = "--checkpoint"};
    ck_assert_int_eq(uly_out_check(&c, 1, ins, 2), 0);
    /* any other, also through a hard link */
    uly_out l = {.path = at("link"), .what = "--log"};
    ck_assert_int_eq(uly_out_prepare(&l, 1, ins, 2), ULY_EXIT_BADINPUT);
    char want[512];
    snprintf(want, sizeof want, "--log %s is also an input (--resume %s): writing it would destroy the input",
             at("link"), at("in"));
    ck_assert_str_eq(uly_base_last_error(), want);
    ck_assert_ptr_null(l.tmp);
    /* a symbolic link (to an input or not): the rename would replace the link */
    uly_out sl = {.path = at("slink"), .what = "--log"};
    ck_assert_int_eq(uly_out_prepare(&sl, 1, NULL, 0), ULY_EXIT_BADINPUT);
    snprintf(want, sizeof want,
             "--log %s: is a symbolic link; outputs are replaced by renaming, so name the file it points to",
             at("slink"));
    ck_assert_str_eq(uly_base_last_error(), want);
    ck_assert_ptr_null(sl.tmp);
    /* two outputs, one not yet created, by canonical path */
    ck_assert_int_eq(mkdir(at("d"), 0777), 0);
    uly_out two[2] = {{.path = at("new"), .what = "--out"}, {.path = at("d/../new"), .what = "--plot"}};
    ck_assert_int_eq(uly_out_prepare(two, 2, NULL, 0), ULY_EXIT_BADINPUT);
    ck_assert_ptr_nonnull(strstr(uly_base_last_error(), "--out and --plot name the same file"));
    /* a missing directory: refused before anything is created */
    uly_out m = {.path = at("nodir/x"), .what = "--out"};
    ck_assert_int_eq(uly_out_prepare(&m, 1, NULL, 0), ULY_EXIT_BADINPUT);
    ck_assert_ptr_nonnull(strstr(uly_base_last_error(), "No such file or directory"));
    ck_assert_str_eq(get(at("in")), "input");
    ck_assert_int_eq(ntmp("new") + ntmp("in") + ntmp("link") + ntmp("slink"), 0);
}
END_TEST

START_TEST(stale_temporaries)
{
    put(at(".s.tmpKILLED"), "a killed run's");
    put(at(".s.tmpLIVE01"), "a live run's");
    put(at(".s.tmpTOOLONG"), "not a temporary of s");
    put(at(".sx.tmpABCDEF"), "another output's");
    int held = open(at(".s.tmpLIVE01"), O_RDONLY);
    ck_assert_int_ge(held, 0);
    ck_assert_int_eq(flock(held, LOCK_EX | LOCK_NB), 0);
    uly_out o = {.path = at("s"), .what = "--out"};
    ck_assert_int_eq(uly_out_prepare(&o, 1, NULL, 0), 0);
    ck_assert_int_eq(o.stale, 1);
    ck_assert_int_eq(access(at(".s.tmpKILLED"), F_OK), -1);
    ck_assert_str_eq(get(at(".s.tmpLIVE01")), "a live run's");
    ck_assert_str_eq(get(at(".s.tmpTOOLONG")), "not a temporary of s");
    ck_assert_str_eq(get(at(".sx.tmpABCDEF")), "another output's");
    /* this run's own temporary is locked: a second preparation keeps it */
    uly_out o2 = {.path = at("s"), .what = "--out"};
    ck_assert_int_eq(uly_out_prepare(&o2, 1, NULL, 0), 0);
    ck_assert_int_eq(o2.stale, 0);
    ck_assert_int_eq(access(o.tmp, F_OK), 0);
    uly_out_discard(&o2, 1);
    uly_out_discard(&o, 1);
    close(held);
}
END_TEST

START_TEST(note_lists_the_set)
{
    uly_out o[3] = {{.path = at("a"), .what = "--a"}, {.path = NULL, .what = "--x"}, {.path = at("b"), .what = "--b"}};
    ck_assert_int_eq(uly_out_prepare(o, 3, NULL, 0), 0);
    char buf[256];
    ck_assert_str_eq(uly_out_note(&o[2], buf, sizeof buf), " (no output was replaced: --a, --b keep their previous content)");
    uly_out one = {.path = at("c"), .what = "--c"};
    ck_assert_int_eq(uly_out_prepare(&one, 1, NULL, 0), 0);
    ck_assert_str_eq(uly_out_note(&one, buf, sizeof buf), "");
    uly_out_discard(o, 3);
    uly_out_discard(&one, 1);
}
END_TEST

static Suite *make_base_out_suite(void)
{
    Suite *s = suite_create("base_out");
    TCase *t = tcase_create("outputs");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, commit_renames_all);
    tcase_add_test(t, changed_destination_renames_nothing);
    tcase_add_test(t, failure_midway_names_committed);
    tcase_add_test(t, outputs_and_inputs);
    tcase_add_test(t, stale_temporaries);
    tcase_add_test(t, note_lists_the_set);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_base_out_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
