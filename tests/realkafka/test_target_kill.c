/*
 * tests/realkafka/test_target_kill.c: aagw restarted while a partition
 * leader of the cluster it writes to is dead.
 *
 * west (1 broker) is the source: Kafka's VerifiableProducer (acks=all,
 * idempotent) writes to west's clicks until the kills are over
 * (--max-messages -1, then SIGTERM; about 40,000 records).  east has 3
 * brokers;
 * west.clicks (the remote copy) and clicks.unified there have
 * replication factor 3 and min.insync.replicas 2.  aagw runs both
 * directions and the unify stage (dedup, the derived id).
 *
 * Twice, the test SIGKILLs at the same moment the east broker leading a
 * partition aagw writes (west.clicks/0, then clicks.unified/0) and aagw,
 * and starts aagw again at once: its start-up scans of the targets meet
 * a leader that is gone and not yet replaced (the controller fences a
 * dead broker only when its session lapses).  Then it waits for a new
 * leader and for more acks, restarts the broker and waits for a full ISR.
 * aagw must ride through it: keep running, lose nothing, write nothing
 * twice.
 *
 * Asserted by content, read with read_committed (aagw.kafka.ReadToEnd):
 * west's clicks holds every acked value once; east's west.clicks exactly
 * the records of west's clicks, once each, same partition and order;
 * clicks.unified at east and at west each of them exactly once.
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

#include "rk.h"

#define NREC       40000 /* nominal: kill points and steps */
#define THROUGHPUT "450"
#define PARTS      6

/* The producer passed @want acks and aagw wrote more than @base records
 * to @topic at east since it started. */
struct when_arg {
        struct rk         *r;
        struct rk_counter *acks;
        harness_proc_t    *prod;
        const char        *topic;
        int64_t            want, base, now;
        bool               exited;
};

static bool when_ready(void *arg) {
        struct when_arg *a = arg;

        if (harness_proc_wait(a->prod, 0, NULL) != AAGW_ERR_TIMEOUT) {
                rk_count_poll(a->acks);
                a->exited = true;
                return true;
        }
        if (rk_count_poll(a->acks) < a->want)
                return false;
        a->now = rk_size(a->r, "east", a->topic);
        return a->now > a->base;
}

static void wait_when(struct rk *r, struct when_arg *a, const char *what) {
        if (!harness_wait_until(when_ready, a, 120000) || a->exited) {
                rk_gw_dump_log(r, 40);
                fail_msg("%s: the producer has %" PRId64 " acks (want %" PRId64
                         "), %s at east %" PRId64 " (was %" PRId64 "): %s",
                         what, a->acks->cnt, a->want, a->topic, a->now,
                         a->base,
                         a->exited ? "it exited" : "deadline passed");
        }
}

static void test_target_kill(void **state) {
        struct rk *r = rk_new("rk-target");

        *state = r;
        rk_clicks_clusters(r, 3, 2, PARTS);

        const char *const gw_args[] = {"--topic", "clicks", "--unify", "dedup",
                                       NULL};
        rk_gw_start(r, gw_args);

        char           *prod_out, *prod_err;
        int64_t         t_prod = harness_now_ms();
        harness_proc_t *prod   = rk_clicks_producer(r, "west", "2", THROUGHPUT,
                                                    &prod_out, &prod_err);
        struct rk_counter acks;
        rk_counter_init(&acks, prod_out, "producer_send_success");

        static const char *const targets[] = {"west.clicks", "clicks.unified"};
        for (int k = 0; k < 2; k++) {
                const char     *topic = targets[k];
                /* The first at 1/8 of the run, the second as soon as
                 * the cluster is whole again (a round takes 20-45 s). */
                struct when_arg w = {
                    r,     &acks, prod,
                    topic, k == 0 ? NREC / 8 : acks.cnt + NREC / 40,
                    rk_size(r, "east", topic),
                    0,     false};
                wait_when(r, &w, "before a kill");
                int leader = rk_leader(r, "east", topic, 0);
                assert_true(leader >= 1 && leader <= 3);
                int64_t at = acks.cnt, t_kill = harness_now_ms();
                rk_ctl(r, "east", "kill", leader, 60000);
                rk_gw_expect_running(r);
                assert_int_equal(rk_gw_stop(r, SIGKILL, 10000), 128 + SIGKILL);
                rk_gw_start(r, gw_args);
                int now = rk_wait_new_leader(r, "east", topic, 0, leader,
                                             60000);
                if (now < 0)
                        fail_msg("%s/0 at east: no new leader 60 s after "
                                 "broker %d was killed",
                                 topic, leader);
                int64_t t_moved = harness_now_ms();
                /* The restarted gateway copies again, with the broker
                 * still down. */
                w = (struct when_arg){r,     &acks, prod,
                                      topic, at + NREC / 20,
                                      rk_size(r, "east", topic),
                                      0,     false};
                wait_when(r, &w, "with a broker down");
                rk_gw_expect_running(r);
                rk_ctl(r, "east", "start", leader, 180000);
                if (!rk_wait_isr(r, "east", topic, 3, 120000))
                        fail_msg("%s at east: ISR not full again 120 s after "
                                 "broker %d restarted",
                                 topic, leader);
                print_message("# kill %d: broker %d (leader of %s/0) and "
                              "aagw at %" PRId64 " acks, aagw restarted at "
                              "once; new leader %d after %.1f s; back in "
                              "sync %.1f s after the kill\n",
                              k + 1, leader, topic, at, now,
                              (double)(t_moved - t_kill) / 1000.0,
                              (double)(harness_now_ms() - t_kill) / 1000.0);
        }
        /* The producer runs until the cluster is whole again and aagw
         * copied more, however long the rounds took. */
        struct when_arg w = {r,     &acks, prod, "west.clicks",
                             acks.cnt + NREC / 40,
                             rk_size(r, "east", "west.clicks"),
                             0,     false};
        wait_when(r, &w, "after the kills");
        rk_producer_stop(r, prod, prod_err);
        harness_proc_destroy(prod);

        struct rk_produced pr;
        rk_produced_parse(prod_out, &pr);
        int64_t acked = rk_bag_total(pr.acked);
        print_message("# producer: %" PRId64 " acked, %" PRId64
                      " failed, tool_data sent %" PRId64 ", %.1f s\n",
                      acked, rk_bag_total(pr.failed), pr.sent,
                      (double)(harness_now_ms() - t_prod) / 1000.0);
        assert_true(acked > 0);

        bool caught_up =
            rk_wait_size(r, "east", "west.clicks", acked, 120000) &&
            rk_wait_size(r, "east", "clicks.unified", acked, 120000) &&
            rk_wait_size(r, "west", "clicks.unified", acked, 120000);
        rk_gw_expect_running(r);
        if (!caught_up)
                rk_gw_dump_log(r, 40);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        /* Every acked record once in clicks, west.clicks (same partitions,
         * same order) and both clicks.unified. */
        bool ok = rk_verify_clicks(r, NULL, &pr, "end");
        if (!ok) {
                /* Where each run resumed each partition, and what its
                 * consumer did at the start (the gap this test
                 * was written for). */
                static const char *const needles[] = {
                    "resuming", "first record", "fetched from", "seek",
                    "dead-letter", "restarting its fetch", "unacknowledged",
                    NULL};
                rk_gw_grep(r, "[FLOW]", needles);
                rk_gw_grep(r, "[FETCH]", needles);
                /* And whether east truncated or moved the copies'
                 * partitions (leader epochs, ELR, unclean recovery). */
                static const char *const broker[] = {
                    "Truncat", "epoch", "ELR", "nclean", "recover", NULL};
                rk_broker_grep(r, "east", "west.clicks-", broker);
        }
        print_message("# 2 broker + aagw kills, %" PRId64 " acked, %d aagw "
                      "runs, wall %.1f s\n",
                      acked, r->gw_runs, rk_elapsed(r));
        assert_true(ok);

        rk_produced_deinit(&pr);
        free(prod_out);
        free(prod_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_target_kill, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
