/* tests/replication/test_outage.c: the target cluster goes away while
 * records flow.
 *
 * Every broker of west (the target of east -> west; the mock does not
 * move leadership, so taking all three down is what makes the partition
 * leaders unreachable whichever broker leads) is set down with
 * rd_kafka_mock_broker_set_down() while east keeps taking records.
 *
 *  - Down 5 s and back: the gateway rides it out (the producer retries
 *    without a delivery timeout; a position never passes an
 *    unacknowledged record) and delivers everything: nothing lost,
 *    nothing duplicated, order kept, the reverse flow (whose SOURCE was
 *    down) intact as well.
 *  - SIGKILL during the outage, restart after it: records read but
 *    undeliverable for three position saves are not lost.
 *  - SIGTERM during the outage: exit within the stop deadline, exit 1
 *    with the reason (undelivered records), no crash; a restart delivers
 *    the rest exactly once.
 *  - Writes denied by the target's authorizer: the flow fails closed,
 *    dead-letters nothing, and a restart copies the rest once. */
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
#include <time.h>

#include "repl.h"

#define PARTS 8
#define KEYS 1000
#define BATCH 2000
#define DOWN_MS 5000
#define REPL_TIMEOUT_MS 90000

static const char *const sites[] = {"east", "west"};


/* Every test here takes a whole cluster down.  On real clusters that
 * would break the other tests sharing it; tests/realkafka kills brokers
 * of clusters of its own instead. */
#define MOCK_ONLY                                                             \
        "takes the target cluster's brokers down (rd_kafka_mock_broker_"     \
        "set_down); a shared real cluster serves other tests"

/* Both sites' topics made, BATCH records at east copied to west by a
 * running gateway. */
static void copy_first_batch(struct repl *r) {
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_create_topic(r, "east", "west.clicks", PARTS);
        repl_produce(r, "east", "clicks", "east", 0, BATCH, KEYS, NULL, -1);
        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", BATCH, REPL_TIMEOUT_MS);
}

static void test_target_down_5s(void **state) {
        struct repl    *r = repl_new(sites, 2);
        int64_t         before;
        int64_t         t0;
        struct timespec ts     = {DOWN_MS / 1000, (DOWN_MS % 1000) * 1000000L};
        int             n_east = 0, n_west = 0;

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_create_topic(r, "east", "west.clicks", PARTS);

        repl_produce(r, "east", "clicks", "east", n_east, BATCH, KEYS, NULL,
                     -1);
        n_east += BATCH;
        repl_produce(r, "west", "clicks", "west", n_west, BATCH, KEYS, NULL,
                     -1);
        n_west += BATCH;
        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", BATCH, REPL_TIMEOUT_MS);

        /* Records that arrive while the target is away: queued in flight
         * at the gateway when west goes down, the rest read during the
         * outage. */
        repl_produce(r, "east", "clicks", "east", n_east, BATCH, KEYS, NULL,
                     -1);
        n_east += BATCH;
        repl_set_brokers(r, "west", false);
        t0 = harness_now_ms();
        repl_produce(r, "east", "clicks", "east", n_east, BATCH, KEYS, NULL,
                     -1);
        n_east += BATCH;
        /* The outage itself lasts a fixed time: this sleep is the fault,
         * not a synchronisation. */
        while (nanosleep(&ts, &ts) == -1)
                ;
        assert_true(repl_gw_running(r));
        repl_set_brokers(r, "west", true);
        fprintf(stderr, "# west was down for %" PRId64 " ms\n",
                harness_now_ms() - t0);

        /* More after the recovery, at both sites. */
        repl_produce(r, "east", "clicks", "east", n_east, BATCH, KEYS, NULL,
                     -1);
        n_east += BATCH;
        repl_produce(r, "west", "clicks", "west", n_west, BATCH, KEYS, NULL,
                     -1);
        n_west += BATCH;
        before = repl_size(r, "west", "east.clicks");
        fprintf(stderr,
                "# east.clicks at west right after recovery: %" PRId64
                " of %d\n",
                before, n_east);
        repl_expect_size(r, "west", "east.clicks", n_east, REPL_TIMEOUT_MS);
        repl_expect_size(r, "east", "west.clicks", n_west, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        repl_expect_clicks_copied(r, "east", "west", n_east);
        repl_expect_clicks_copied(r, "west", "east", n_west);
}

/* The sharper form: the gateway is SIGKILLed while the target is down.
 * It has read records it could not deliver, for seconds, across several
 * position saves; if a stored position ever passed an unacknowledged
 * record, the restart would skip those records and they would be lost. */
static void test_kill_while_target_down(void **state) {
        struct repl    *r = repl_new(sites, 2);
        struct rrecs    src, copy;
        struct timespec ts = {3, 0};

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        copy_first_batch(r);

        repl_set_brokers(r, "west", false);
        repl_produce(r, "east", "clicks", "east", BATCH, BATCH, KEYS, NULL, -1);
        /* The fault: 3 s of outage (three position saves) with these
         * records read and undeliverable, then the crash. */
        while (nanosleep(&ts, &ts) == -1)
                ;
        assert_true(repl_gw_running(r));
        assert_int_equal(repl_gw_stop(r, SIGKILL, REPL_STOP_TIMEOUT_MS),
                         128 + SIGKILL);
        repl_set_brokers(r, "west", true);

        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", 2 * BATCH, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        repl_read(r, "east", "clicks", &src);
        repl_read(r, "west", "east.clicks", &copy);
        assert_int_equal(src.cnt, 2 * BATCH);
        repl_check_copy(&src, "clicks", "east", &copy, "east>west");
        assert_int_equal(copy.cnt, 2 * BATCH);
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

/* SIGTERM while the target is down: the gateway cannot drain.  It must
 * still exit within the stop deadline, say that it failed to deliver,
 * keep positions behind the undelivered records, and a restart once the
 * target is back must deliver them exactly once. */
static void test_sigterm_while_target_down(void **state) {
        struct repl    *r = repl_new(sites, 2);
        struct rrecs    src, copy;
        struct timespec ts = {2, 0};
        int64_t         t0;
        int             code;
        char           *text;

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        copy_first_batch(r);

        repl_set_brokers(r, "west", false);
        repl_produce(r, "east", "clicks", "east", BATCH, BATCH, KEYS, NULL, -1);
        while (nanosleep(&ts, &ts) == -1)
                ;
        t0   = harness_now_ms();
        code = repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS);
        fprintf(stderr,
                "# SIGTERM with the target down: exit %d after %" PRId64
                " ms\n",
                code, harness_now_ms() - t0);
        /* Undelivered records are a partial failure (exit 1), said so. */
        if (code != 1) {
                repl_dump_log(r, 15);
                fail_msg("exit %d, expected 1", code);
        }
        text = repl_log_text(r);
        assert_non_null(strstr(text, "aagw: flow east->west: "));
        assert_non_null(strstr(text, "records not acknowledged by the "
                                     "target before the stop deadline"));
        free(text);
        repl_set_brokers(r, "west", true);

        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", 2 * BATCH, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        repl_read(r, "east", "clicks", &src);
        repl_read(r, "west", "east.clicks", &copy);
        repl_check_copy(&src, "clicks", "east", &copy, "east>west");
        assert_int_equal(copy.cnt, 2 * BATCH);
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

/* The target's authorizer refuses the copies (TOPIC_AUTHORIZATION_FAILED
 * on every Produce request to west, pushed into the embedded cluster):
 * an ACL, not the records, is at fault.  The flow fails closed, naming
 * the topic, the cluster and the ACL to grant; nothing goes to the
 * dead-letter topic, and a start once the writes are allowed copies
 * every record, once. */
static void test_write_denied(void **state) {
        struct repl *r = repl_new(sites, 2);
        struct rrecs src, copy;
        int          code;
        char        *text;

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        copy_first_batch(r);

        rd_kafka_mock_cluster_t *west =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), "west");
        assert_non_null(west);
        /* Kafka's API key of Produce requests (librdkafka's own name for
         * it is not in its public headers). */
        const int16_t       produce_key = 0;
        rd_kafka_resp_err_t denied[1000];
        for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
                denied[i] = RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
        rd_kafka_mock_push_request_errors_array(
            west, produce_key, sizeof(denied) / sizeof(denied[0]),
            denied);
        repl_produce(r, "east", "clicks", "east", BATCH, BATCH, KEYS, NULL, -1);
        code = repl_gw_wait_exit(r, 30000);
        rd_kafka_mock_clear_request_errors(west, produce_key);
        if (code != 1) {
                repl_dump_log(r, 20);
                fail_msg("exit %d, expected 1 (the flow failed closed)", code);
        }
        text = repl_log_text(r);
        if (!strstr(text, "denied (TOPIC_AUTHORIZATION_FAILED): allow aagw's "
                          "principal WRITE on it") ||
            !strstr(text, "nothing was dead-lettered") ||
            !strstr(text, "E [ACCESS] cluster west") || strstr(text,
                                                              "dead-lettering")) {
                free(text);
                repl_dump_log(r, 30);
                fail_msg("the log does not name the denied write as expected");
        }
        free(text);
        /* Nothing dead-lettered: west has no dead-letter topic. */
        assert_int_equal(repl_size(r, "west", "aagw.dlq.east"), 0);
        assert_int_equal(repl_size(r, "west", "east.clicks"), BATCH);

        /* Allowed again: every record copied, once, in order. */
        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", 2 * BATCH, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        repl_read(r, "east", "clicks", &src);
        repl_read(r, "west", "east.clicks", &copy);
        repl_check_copy(&src, "clicks", "east", &copy, "east>west");
        assert_int_equal(copy.cnt, 2 * BATCH);
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_sigterm_while_target_down, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_target_down_5s, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_kill_while_target_down, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_write_denied, repl_setup,
                                            repl_teardown),
        };
        static const char *const all[] = {
            "test_sigterm_while_target_down", "test_target_down_5s",
            "test_kill_while_target_down", "test_write_denied", NULL};
        size_t n = repl_mock_only_tests(tests,
                                        sizeof(tests) / sizeof(tests[0]), all,
                                        MOCK_ONLY);

        return n ? _cmocka_run_group_tests("replication-outage", tests, n,
                                           NULL, NULL)
                 : 0;
}
