/* tests/offsets/test_drill.c: `aagw drill` on embedded clusters.
 *
 * With replication running: the report's fields are present and agree
 * with each other and with the clusters (RPO 0 records, every partition
 * exact and verified, the committed offsets at west what the target's
 * provenance says they must be, RTO within the command's own run time).
 * Without --force it refuses, since the embedded cluster cannot tell
 * whether the group has members at west.  With the gateway stopped, the
 * drill fails with exit 1 and says that replication is not running. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofs.h"

/* MM2's heartbeats topic is one per cluster pair, keyed by the aliases
 * only: on shared real clusters the other tests' gateways keep
 * heartbeating east->west, so "this gateway stopped" cannot be seen.
 * kafka-drill (tests/realkafka) runs this case on real Kafka, with
 * clusters of its own. */
#define DRILL_STOPPED_MOCK_ONLY                                               \
        "needs the east->west heartbeats to itself (on shared clusters "     \
        "other gateways write them too)"

static json_object *field(json_object *j, const char *name) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(j, name, &v))
                fail_msg("drill report has no field %s", name);
        return v;
}

static const char *const drill_words[] = {
    "drill", "--group", "g1",     "--from",  "east",
    "--to",  "west",    "--json", "--force", NULL};

static void test_drill(void **state) {
        struct repl     *r = ofs_scene();
        harness_output_t o;
        int64_t          src[64];

        *state = r;
        ofs_produce(r, 0, "a", 0, 8, 0);
        ofs_produce(r, 0, "loop", 8, 4, 1); /* skipped: a loop verdict */
        ofs_produce(r, 0, "b", 12, 8, 0);
        ofs_produce(r, 1, "c", 0, 10, 0);
        ofs_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", 16 + 10, OFS_TIMEOUT_MS);
        repl_expect_size(r, "west", "east.heartbeats", 1, OFS_TIMEOUT_MS);
        /* g1 stopped at east inside the skipped run, and at 6 of [1] */
        ofs_commit(r, "east", "g1", "clicks", 0, 10);
        ofs_commit(r, "east", "g1", "clicks", 1, 6);

        /* Refused without --force: the embedded cluster cannot tell
         * whether g1 has members at west.  A real one can (none): there
         * the drill below runs without --force. */
        const char  *nf[] = {"drill", "--group", "g1",     "--from", "east",
                             "--to",  "west",    "--json", NULL};
        json_object *j;

        if (repl_real(r))
                goto drill;
        assert_int_equal(ofs_aagw(r, nf, &o), 1);
        if (!strstr(o.err, "cannot tell"))
                fail_msg("drill without --force: %s", o.err);
        j = json_tokener_parse(o.out);
        assert_non_null(j);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "failed");
        assert_false(json_object_get_boolean(field(j, "committed")));
        json_object_put(j);
        harness_output_deinit(&o);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), -1);

drill:;
        int64_t t0      = harness_now_ms();
        int     rc      = ofs_aagw(r, repl_real(r) ? nf : drill_words, &o);
        int64_t elapsed = harness_now_ms() - t0;
        if (rc != 0)
                fail_msg("drill: exit %d\n%s%s", rc, o.out, o.err);
        fprintf(stderr, "# drill report: %s", o.out);
        j = json_tokener_parse(o.out);
        assert_non_null(j);
        assert_string_equal(json_object_get_string(field(j, "result")), "ok");
        assert_string_equal(json_object_get_string(field(j, "group")),
                            repl_topic(r, "g1"));
        assert_string_equal(json_object_get_string(field(j, "from")), "east");
        assert_string_equal(json_object_get_string(field(j, "to")), "west");
        assert_int_equal(json_object_get_int(field(j, "partition_count")), 2);
        assert_int_equal(json_object_get_int(field(j, "exact")), 2);
        assert_int_equal(json_object_get_int(field(j, "verified")), 2);
        assert_true(json_object_get_boolean(field(j, "committed")));
        assert_int_equal(json_object_get_int64(field(j, "rpo_records")), 0);
        int64_t rpo_ms = json_object_get_int64(field(j, "rpo_ms"));
        assert_true(rpo_ms >= 0 && rpo_ms < 10000);
        int64_t age = json_object_get_int64(field(j, "heartbeat_age_ms"));
        assert_true(age >= 0 && age <= 10000);
        assert_true(json_object_get_int64(field(j, "lag_wait_ms")) >= 0);
        /* RTO from the translation to the verified resume, within the
         * whole drill, within the command's run */
        double rto   = json_object_get_double(field(j, "rto_s"));
        double drill = json_object_get_double(field(j, "drill_s"));
        assert_true(rto > 0 && rto <= drill);
        assert_true(drill * 1000 <= (double)elapsed);
        assert_true(json_object_get_int64(field(j, "lag_records_at_start")) >=
                    0);
        /* the per-partition rows agree with the target's provenance and
         * with what is now committed at west */
        json_object *parts = field(j, "partitions");
        assert_true(json_object_is_type(parts, json_type_array));
        assert_int_equal(json_object_array_length(parts), 2);
        for (size_t i = 0; i < 2; i++) {
                json_object *e = json_object_array_get_idx(parts, i);
                int          p = json_object_get_int(field(e, "partition"));
                assert_true(json_object_get_boolean(field(e, "exact")));
                assert_int_equal(json_object_get_int64(field(e, "committed")),
                                 p == 0 ? 10 : 6);
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 p == 0 ? 8 : 6);
        }
        size_t n0 = ofs_copies(r, 0, src, 64);
        assert_int_equal(n0, 16);
        assert_int_equal(ofs_expected(src, n0, 10), 8);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), 8);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 1), 6);
        json_object_put(j);
        harness_output_deinit(&o);

        /* The text report carries the same fields. */
        const char *text[] = {"drill", "--group", "g1",      "--from", "east",
                              "--to",  "west",    "--force", NULL};
        assert_int_equal(ofs_aagw(r, text, &o), 0);
        static const char *const keys[] = {"result:ok\n",
                                           "rpo_records:0\n",
                                           "rpo_ms:",
                                           "rto_s:",
                                           "drill_s:",
                                           "lag_records_at_start:",
                                           "heartbeat_age_ms:",
                                           "exact:2\n",
                                           "verified:2\n",
                                           "committed:yes\n",
                                           "partition_count:2\n"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (!strstr(o.out, keys[i]))
                        fail_msg("text report lacks %s:\n%s", keys[i], o.out);
        harness_output_deinit(&o);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

struct stopped {
        struct repl *r;
        char         out[4096], err[4096];
        int          rc;
};

/* The drill with a heartbeat age limit of 1 s: true once it fails for
 * want of fresh heartbeats.  Without --force, so that a run that still
 * saw a fresh heartbeat stops at the member check and commits nothing. */
static bool past(void *arg) {
        return harness_now_ms() >= *(int64_t *)arg;
}

static bool drill_fails(void *arg) {
        struct stopped  *s = arg;
        harness_output_t o;
        const char      *w[] = {"drill",  "--group", "g1",
                                "--from", "east",    "--to",
                                "west",   "--json",  "--max-heartbeat-age",
                                "1",      "--force", NULL};
        s->rc                = ofs_aagw(s->r, w, &o);
        snprintf(s->out, sizeof(s->out), "%s", o.out);
        snprintf(s->err, sizeof(s->err), "%s", o.err);
        harness_output_deinit(&o);
        return s->rc == 1 && strstr(s->out, "stopped or stalled");
}

static void test_drill_replication_stopped(void **state) {
        struct repl   *r = ofs_scene();
        struct stopped s = {r, "", "", -1};

        *state = r;
        repl_mock_only(r, DRILL_STOPPED_MOCK_ONLY);
        ofs_produce(r, 0, "a", 0, 10, 0);
        ofs_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", 10, OFS_TIMEOUT_MS);
        repl_expect_size(r, "west", "east.heartbeats", 1, OFS_TIMEOUT_MS);
        ofs_commit(r, "east", "g1", "clicks", 0, 4);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        /* With --force (the embedded cluster cannot tell about members)
         * a drill that passed would commit: run it only once the newest
         * heartbeat copy is surely older than the 1 s limit. */
        int64_t quiet_at = harness_now_ms() + 1500;
        harness_wait_until(past, &quiet_at, 5000);
        if (!drill_fails(&s))
                fail_msg("drill with replication stopped: exit %d\n%s%s", s.rc,
                         s.out, s.err);
        json_object *j = json_tokener_parse(s.out);
        assert_non_null(j);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "failed");
        assert_non_null(strstr(json_object_get_string(field(j, "reason")),
                               "replication east->west is stopped"));
        assert_false(json_object_get_boolean(field(j, "committed")));
        assert_true(json_object_get_int64(field(j, "heartbeat_age_ms")) > 1000);
        /* no resume, so no RTO; the drill's own time is there */
        assert_true(json_object_get_double(field(j, "rto_s")) < 0);
        assert_true(json_object_get_double(field(j, "drill_s")) > 0);
        assert_non_null(strstr(s.err, "drill failed"));
        json_object_put(j);
        /* nothing was committed at west */
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), -1);
        ofs_done();
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_drill, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_drill_replication_stopped,
                                            repl_setup, repl_teardown),
        };
        static const char *const stopped[] = {"test_drill_replication_stopped",
                                              NULL};
        size_t n = repl_mock_only_tests(
            tests, sizeof(tests) / sizeof(tests[0]),
            stopped, DRILL_STOPPED_MOCK_ONLY);

        return _cmocka_run_group_tests("offsets-drill", tests, n, NULL, NULL);
}
