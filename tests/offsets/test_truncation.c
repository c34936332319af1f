/* tests/offsets/test_truncation.c: source records lost to retention while
 * the gateway was stopped are reported, counted and skipped over in the
 * open, never silently.
 *
 * The embedded cluster keeps about 5 MiB per partition (MOCK-CLUSTER.md).
 * The gateway replicates 10 records of east's one-partition topic and
 * stops; 8 MiB more are produced, so the log start passes its stored
 * position (10).  On restart it logs the gap with the partition and the
 * offsets, counts it (truncations 1, truncated_records = log start - 10),
 * resumes at the log start (the default policy) and copies everything
 * from there.
 *
 * On real clusters retention is not something a test can wait for: the
 * log start is moved the way retention moves it, with DeleteRecords. */
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

#define BIG_CNT 800
#define BIG_LEN 10240

struct lo_cond {
        struct repl *r;
        int64_t      lo, hi;
};

static bool log_start_moved(void *arg) {
        struct lo_cond *c = arg;
        if (rd_kafka_query_watermark_offsets(ofs_admin(c->r, "east"),
                                             repl_topic(c->r, "big"), 0,
                                             &c->lo, &c->hi, 10000))
                return false;
        return c->lo > 10;
}

struct tgt_cond {
        struct repl *r;
        int64_t      want, hi;
};

static bool target_end(void *arg) {
        struct tgt_cond *c = arg;
        int64_t          lo;
        if (rd_kafka_query_watermark_offsets(ofs_admin(c->r, "west"),
                                             repl_topic(c->r, "east.big"), 0,
                                             &lo, &c->hi, 10000))
                return false;
        return c->hi >= c->want;
}


struct status_cond {
        struct repl *r;
        char         want[128];
        char         last[8192];
};

static bool status_has(void *arg) {
        struct status_cond *c = arg;
        harness_output_t    o;
        const char *argv[] = {harness_aagw_bin(), "status", "--state-dir",
                              c->r->state, NULL};
        bool        ok     = false;
        if (harness_run(argv, NULL, 0, 20000, &o, c->r->errstr,
                        sizeof(c->r->errstr)) == AAGW_OK) {
                snprintf(c->last, sizeof(c->last), "%s", o.out);
                ok = strstr(o.out, c->want) != NULL;
        }
        harness_output_deinit(&o);
        return ok;
}

/* What retention does, on a real cluster: records of 'topic' [0] at east
 * before 'before' deleted (the log start moves there). */
static void delete_records(struct repl *r, const char *topic, int64_t before) {
        rd_kafka_t                      *rk = ofs_admin(r, "east");
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);

        rd_kafka_topic_partition_list_add(l, topic, 0)->offset = before;
        rd_kafka_DeleteRecords_t *dr = rd_kafka_DeleteRecords_new(l);
        rd_kafka_DeleteRecords(rk, &dr, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        assert_non_null(ev);
        if (rd_kafka_event_error(ev))
                fail_msg("DeleteRecords %s: %s", topic,
                         rd_kafka_event_error_string(ev));
        const rd_kafka_topic_partition_list_t *offs =
            rd_kafka_DeleteRecords_result_offsets(
                rd_kafka_event_DeleteRecords_result(ev));
        assert_non_null(offs);
        assert_int_equal(offs->cnt, 1);
        if (offs->elems[0].err)
                fail_msg("DeleteRecords %s [0]: %s", topic,
                         rd_kafka_err2str(offs->elems[0].err));
        rd_kafka_event_destroy(ev);
        rd_kafka_DeleteRecords_destroy(dr);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_queue_destroy(q);
}

static void test_truncation(void **state) {
        struct repl      *r  = ofs_scene();
        struct lo_cond    lc = {r, 0, 0};
        static char       big[BIG_LEN + 1];
        harness_record_t *recs = calloc(BIG_CNT, sizeof(*recs));

        *state = r;
        assert_non_null(recs);
        repl_create_topic(r, "east", "big", 1);
        repl_create_topic(r, "west", "east.big", 1);
        repl_produce(r, "east", "big", "small", 0, 10, 0, NULL, 0);
        ofs_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.big", 10, OFS_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        /* Past the retention while the gateway is stopped. */
        memset(big, 'x', BIG_LEN);
        for (int i = 0; i < BIG_CNT; i++)
                recs[i].value = big;
        if (harness_kcat_produce(repl_bs(r, "east"), repl_topic(r, "big"), recs,
                                 BIG_CNT, NULL, 0, OFS_TIMEOUT_MS, r->errstr,
                                 sizeof(r->errstr)))
                fail_msg("produce: %s", r->errstr);
        free(recs);
        if (repl_real(r))
                delete_records(r, repl_topic(r, "big"), 10 + BIG_CNT / 2);
        if (!harness_wait_until(log_start_moved, &lc, 20000))
                fail_msg("the embedded cluster kept big from %" PRId64
                         " to %" PRId64 ": retention did not drop the start",
                         lc.lo, lc.hi);
        assert_int_equal(lc.hi, 10 + BIG_CNT);

        ofs_gw_start(r, NULL);
        char want[256];
        snprintf(want, sizeof(want),
                 "%s [0]: source log start %" PRId64
                 " passed the stored position 10: %" PRId64 " records",
                 repl_topic(r, "big"), lc.lo, lc.lo - 10);
        repl_expect_log(r, want, 30000);
        snprintf(want, sizeof(want), "gap 10..%" PRId64, lc.lo - 1);
        repl_expect_log(r, want, 0);
        /* everything from the log start on is copied (the target's end
         * offset: its own retention drops old copies in turn) */
        struct tgt_cond tc = {r, 10 + (lc.hi - lc.lo), -1};
        if (!harness_wait_until(target_end, &tc, OFS_TIMEOUT_MS))
                fail_msg("east.big at west ends at %" PRId64 ", want %" PRId64,
                         tc.hi, tc.want);
        /* and counted, where the metrics come from */
        struct status_cond sc = {r, "", ""};
        snprintf(sc.want, sizeof(sc.want),
                 "truncations:1\ntruncated_records:%" PRId64 "\n", lc.lo - 10);
        if (!harness_wait_until(status_has, &sc, 20000))
                fail_msg("status lacks '%s':\n%s", sc.want, sc.last);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

/* A topic deleted and recreated: simulated by a second pair of clusters
 * (fresh logs, offsets from 0) under the first one's state dir.  The
 * stored position (40) is past the new end offset (10): the gateway says
 * so, counts a reset, and replicates the new log from its start. */
static void test_reset(void **state) {
        struct repl     *r1 = ofs_scene(), *r2;
        harness_output_t o;

        *state = r1;
        repl_produce(r1, "east", "clicks", "old", 0, 40, 0, NULL, 0);
        ofs_gw_start(r1, NULL);
        repl_expect_size(r1, "west", "east.clicks", 40, OFS_TIMEOUT_MS);
        ofs_wait_position(r1, 0, 40);
        assert_int_equal(repl_gw_stop(r1, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        r2               = ofs_scene_like(r1); /* the same names */
        const char *cp[] = {"cp", "-a", r1->state, r2->state, NULL};
        assert_int_equal(
            harness_run(cp, NULL, 0, 20000, &o, r2->errstr, sizeof(r2->errstr)),
            AAGW_OK);
        assert_int_equal(harness_exit_code(o.status), 0);
        harness_output_deinit(&o);
        repl_destroy(r1, false);
        *state = r2;
        ofs_done();

        repl_produce(r2, "east", "clicks", "new", 0, 10, 0, NULL, 0);
        ofs_gw_start(r2, NULL);
        repl_expect_size(r2, "west", "east.clicks", 10, OFS_TIMEOUT_MS);
        repl_expect_log(r2,
                        "clicks [0]: stored position 40 is past the source "
                        "end offset 10 (log start 0): the partition was "
                        "reset or recreated; resuming at its log start",
                        20000);
        /* counted: at least this one (the heartbeats partition, younger
         * in the new cluster too, may have been reset as well) */
        struct status_cond sc = {r2, "resets:", ""};
        if (!harness_wait_until(status_has, &sc, 20000))
                fail_msg("status lacks resets:\n%s", sc.last);
        assert_true(atoi(strstr(sc.last, "\nresets:") + 8) >= 1);
        /* every new record once: 10 copies, origin offsets 0..9 */
        int64_t src[32];
        size_t  n = ofs_copies(r2, 0, src, 32);
        assert_int_equal(n, 10);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(src[i], (int64_t)i);
        assert_int_equal(repl_gw_stop(r2, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_truncation, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_reset, repl_setup,
                                            repl_teardown),
        };
        static const char *const reset[] = {"test_reset", NULL};
        size_t n = repl_mock_only_tests(
            tests, sizeof(tests) / sizeof(tests[0]), reset,
            "simulates a recreated topic with a second pair of embedded "
            "clusters (on real ones: delete and recreate the topic, not "
            "written yet)");

        return _cmocka_run_group_tests("offsets-truncation", tests, n, NULL,
                                       NULL);
}
