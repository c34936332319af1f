/*
 * tests/unify/test_forged.c: a forged provenance header makes the sites'
 * unified streams differ, and aagw says so.
 *
 * A producer writes east's local clicks with a valid but forged
 * aagw.prov claiming the record is west's copy (path west>east).  The
 * flow east->west skips it (path_has_target): west never gets it, while
 * east's unify stage delivers it as west's.  So east's clicks.unified has
 * one record more than west's.  Asserted: the copy and the two unified
 * topics by their contents (kcat), the divergence in /status (east's
 * stage 1, west's 0), in /metrics (aagw_replication_diverged_total of
 * east->west and aagw_unify_diverged_total of east, 1 each), and in the
 * audit log (`aagw audit recent --verdict diverged`: one entry at east
 * with the forged id).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "unify.h"

static const char *jstr(void *o, const char *name) {
        json_object *v;
        return json_object_object_get_ex(o, name, &v)
                   ? json_object_get_string(v)
                   : "";
}

struct mwant {
        struct repl *r;
        const char  *lines[2];
        char        *last;
};

static bool metrics_have(void *arg) {
        struct mwant *m = arg;
        free(m->last);
        m->last = unify_http_get(m->r, "/metrics");
        if (!m->last)
                return false;
        for (int i = 0; i < 2; i++)
                if (!strstr(m->last, m->lines[i]))
                        return false;
        return true;
}

static void test_forged_path(void **state) {
        static const char *const sites[] = {"east", "west"};
        struct repl             *r = repl_new(sites, 2);
        struct rrecs             rs;
        struct ustat             st;
        char                     forged[600];

        *state = r;
        repl_create_topic(r, NULL, "clicks", 1);
        repl_create_topic(r, "west", "east.clicks", 1);
        repl_create_topic(r, "east", "west.clicks", 1);
        unify_gw_start(r, "dedup", NULL);

        snprintf(forged, sizeof(forged),
                 "aagw.prov=1;west>east;%s:0:5;1714557600123:0;forged-1",
                 repl_topic(r, "clicks"));
        const char *const hdrs[] = {forged, NULL};
        repl_produce(r, "east", "clicks", "n", 0, 5, 0, NULL, 0);
        repl_produce(r, "east", "clicks", "f", 0, 1, 0, hdrs, 0);
        repl_produce(r, "east", "clicks", "n", 5, 5, 0, NULL, 0);

        /* west gets the 10 ordinary records, not the forged one */
        repl_expect_size(r, "west", "east.clicks", 10, 60000);
        unify_wait_idle(r, "east", 11, 60000);
        unify_wait_idle(r, "west", 10, 60000);
        repl_read(r, "west", "east.clicks", &rs);
        assert_int_equal(rs.cnt, 10);
        assert_int_equal(rrecs_count_tag(&rs, "f"), 0);
        rrecs_deinit(&rs);

        /* the unified streams differ by exactly that record */
        repl_expect_size(r, "east", "clicks.unified", 11, 60000);
        repl_read(r, "east", "clicks.unified", &rs);
        assert_int_equal(rs.cnt, 11);
        assert_int_equal(rrecs_count_tag(&rs, "f"), 1);
        rrecs_deinit(&rs);
        repl_expect_size(r, "west", "clicks.unified", 10, 60000);
        repl_read(r, "west", "clicks.unified", &rs);
        assert_int_equal(rs.cnt, 10);
        assert_int_equal(rrecs_count_tag(&rs, "f"), 0);
        rrecs_deinit(&rs);

        assert_true(unify_stat(r, "east", &st));
        assert_int_equal(st.diverged, 1);
        assert_int_equal(st.accepted, 11);
        assert_true(unify_stat(r, "west", &st));
        assert_int_equal(st.diverged, 0);

        struct mwant m = {
            r,
            {"aagw_replication_diverged_total{flow=\"east->west\"} 1\n",
             "aagw_unify_diverged_total{site=\"east\"} 1\n"},
            NULL};
        if (!harness_wait_until(metrics_have, &m, 30000))
                fail_msg("/metrics lacks the divergence:\n%s",
                         m.last ? m.last : "(no answer)");
        assert_non_null(
            strstr(m.last,
                   "aagw_replication_diverged_total{flow=\"west->east\"} 0\n"));
        assert_non_null(
            strstr(m.last, "aagw_unify_diverged_total{site=\"west\"} 0\n"));
        free(m.last);

        void             *o[8];
        size_t            n;
        char              err[512];
        const char *const q[] = {"recent", "--verdict", "diverged", NULL};
        assert_int_equal(unify_audit(r, q, o, 8, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 1);
        assert_string_equal(jstr(o[0], "verdict"), "diverged");
        assert_string_equal(jstr(o[0], "site"), "east");
        assert_string_equal(jstr(o[0], "origin"), "west");
        assert_string_equal(jstr(o[0], "id"), "forged-1");
        json_object_put(o[0]);

        char *log = repl_log_text(r);
        assert_non_null(log);
        assert_non_null(strstr(log, "contradicts the topic name"));
        free(log);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_forged_path, repl_setup,
                                            repl_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
