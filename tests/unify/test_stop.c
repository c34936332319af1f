/*
 * tests/unify/test_stop.c: a graceful stop in the middle of a batch stores
 * none of that batch's positions (the loss fixed by 1c0ca79).
 *
 * The unify stage advances its input positions over a whole consumed
 * batch while it decides it, then produces the accepted records one by
 * one, waiting while the producer's queue is full.  A stop in that wait
 * leaves the rest of the batch decided but not sent: its epoch must then
 * never be stored, or the positions skip records that were never
 * written.  The window is reached by ordering, not by timing:
 *  - west's clicks (the input) has its leader on broker 1, clicks.unified
 *    (the output) on broker 2, and the stage's producer holds at most
 *    QMAX records (queue.buffering.max.messages);
 *  - with 10 records unified, broker 2 is set down and N more records
 *    are written: the stage sends QMAX of them and waits for room that
 *    cannot come (its in-flight count reaches QMAX, read on /status);
 *  - SIGTERM; once the stage logs that it stopped in the middle of a
 *    batch, broker 2 comes back, so the drain has the records in flight
 *    acknowledged: their epoch would be complete, and stored if it had
 *    not been marked lost.
 * Asserted: the stop exits 0 and says so; a restart finds the records
 * acknowledged during the drain in the output (recovered >= 1: they
 * were written but their epoch not stored) and clicks.unified ends with
 * each of the 10 + N values exactly once.  Embedded clusters only (it
 * sets a broker down).
 */
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

#include "unify.h"

#define QMAX 20
#define N    2000
#define MOCK_ONLY                                                              \
        "sets the output's leader broker down (rd_kafka_mock_broker_set_"      \
        "down); a shared real cluster serves other tests"

static const char *const sites[] = {"east", "west"};

static const char *const gw_args[] = {
    "--site", "west", "--topic", "clicks", "--set",
    "clusters.west.properties.producer.queue.buffering.max.messages=20",
    NULL};

/* The stage at west has QMAX records in flight: its queue is full. */
static bool stage_blocked(void *arg) {
        struct ustat st;
        return unify_stat(arg, "west", &st) && st.inflight >= QMAX;
}

static void test_stop_mid_batch(void **state) {
        struct repl *r = repl_new(sites, 2);

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        repl_create_topic(r, "west", "clicks", 1);
        repl_create_topic(r, "west", "clicks.unified", 1);
        rd_kafka_mock_cluster_t *mc =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), "west");
        assert_non_null(mc);
        assert_int_equal(
            rd_kafka_mock_partition_set_leader(mc, "clicks", 0, 1), 0);
        assert_int_equal(
            rd_kafka_mock_partition_set_leader(mc, "clicks.unified", 0, 2),
            0);

        unify_gw_start(r, "dedup", gw_args);
        repl_produce(r, "west", "clicks", "w", 0, 10, 0, NULL, 0);
        repl_expect_size(r, "west", "clicks.unified", 10, 60000);
        unify_wait_idle(r, "west", 10, 60000);

        assert_int_equal(rd_kafka_mock_broker_set_down(mc, 2), 0);
        repl_produce(r, "west", "clicks", "w", 10, N, 0, NULL, 0);
        if (!harness_wait_until(stage_blocked, r, 60000)) {
                repl_dump_log(r, 30);
                fail_msg("the stage at west never had %d records in flight "
                         "with the output's leader down",
                         QMAX);
        }
        assert_int_equal(harness_proc_signal(r->gw, SIGTERM), 0);
        repl_expect_log(r, "unify@west: stopped in the middle of a batch",
                        10000);
        assert_int_equal(rd_kafka_mock_broker_set_up(mc, 2), 0);
        int code = repl_gw_wait_exit(r, 30000);
        if (code != 0) {
                repl_dump_log(r, 30);
                fail_msg("SIGTERM: exit %d, want 0", code);
        }

        unify_gw_start(r, "dedup", gw_args);
        repl_expect_size(r, "west", "clicks.unified", 10 + N, 60000);
        unify_wait_idle(r, "west", -1, 60000);
        struct ustat st;
        assert_true(unify_stat(r, "west", &st));
        if (st.recovered < 1) {
                repl_dump_log(r, 30);
                fail_msg("the restart recovered %" PRId64 " records from the "
                         "output: the drain acknowledged none, the window "
                         "was not reached",
                         st.recovered);
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        struct rrecs rs;
        char        *seen = calloc(10 + N, 1);
        assert_non_null(seen);
        repl_read(r, "west", "clicks.unified", &rs);
        for (size_t i = 0; i < rs.cnt; i++) {
                int v;
                if (sscanf(rs.v[i].val, "w-%d", &v) != 1 || v < 0 ||
                    v >= 10 + N)
                        fail_msg("clicks.unified holds %s", rs.v[i].val);
                if (seen[v]++)
                        fail_msg("clicks.unified holds w-%d twice", v);
        }
        for (int v = 0; v < 10 + N; v++)
                if (!seen[v])
                        fail_msg("clicks.unified lacks w-%d (of %zu records)",
                                 v, rs.cnt);
        fprintf(stderr,
                "# %d values unified once each across a stop in the middle "
                "of a batch; %" PRId64 " found in the output by the restart\n",
                10 + N, st.recovered);
        rrecs_deinit(&rs);
        free(seen);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_stop_mid_batch, repl_setup,
                                            repl_teardown),
        };
        static const char *const all[] = {"test_stop_mid_batch", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("unify-stop", tests, n, NULL, NULL)
                 : 0;
}
