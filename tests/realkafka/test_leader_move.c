/*
 * tests/realkafka/test_leader_move.c: partition leadership moved by the
 * operator, and a broker restarted cleanly, while aagw writes to them.
 *
 * east has 3 brokers; its west.clicks (the copy of west's clicks) and
 * clicks.unified have replication factor 3 and min.insync.replicas 2.
 * west has one broker.  VerifiableProducers (acks=all, idempotent) write
 * to clicks at both sites for the whole run; aagw copies both ways and
 * unifies at both sites (dedup, the derived id).
 *
 * 1. Under load, every partition of west.clicks and clicks.unified at
 *    east gets a new preferred leader: Kafka's ReassignPartitionsCommand
 *    reorders its replicas (the next broker after the current leader
 *    first), then LeaderElectionCommand runs a preferred election.  The
 *    test waits until every one of those partitions is led by its new
 *    leader, and until aagw wrote more to both topics and the producers
 *    got more acks.
 * 2. The broker leading clicks.unified/0 is stopped cleanly (SIGTERM: a
 *    controlled shutdown moves its leaderships first) under load; once
 *    the partition has another leader and aagw wrote more, it is started
 *    again and the test waits for a full ISR.
 *
 * Asserted by content at the end (rk_verify_clicks()): each site's clicks
 * holds every acked value once; each copy exactly the other site's
 * records, same partitions and order; both clicks.unified every record of
 * both sites exactly once.
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

#define THROUGHPUT "300"
#define PARTS      6
#define STEP       1500 /* acks (per producer) and records per phase */

static const char *const moved_topics[] = {"west.clicks", "clicks.unified"};

/* Both producers passed their @want acks, and aagw wrote more than
 * @base[i] records to moved_topics[i] at east. */
struct prog_arg {
        struct rk         *r;
        struct rk_counter *acks[2];
        int64_t            want[2], base[2], now[2];
};

static bool progressed(void *arg) {
        struct prog_arg *a = arg;

        for (int i = 0; i < 2; i++)
                if (rk_count_poll(a->acks[i]) < a->want[i])
                        return false;
        for (int i = 0; i < 2; i++) {
                a->now[i] = rk_size(a->r, "east", moved_topics[i]);
                if (a->now[i] <= a->base[i])
                        return false;
        }
        return true;
}

/* Wait for STEP more acks at each site and more records in both topics;
 * @returns the seconds it took. */
static double wait_progress(struct rk *r, struct rk_counter **acks,
                            const char *what) {
        struct prog_arg a = {r, {acks[0], acks[1]}, {0, 0}, {0, 0}, {0, 0}};
        int64_t         t0 = harness_now_ms();

        for (int i = 0; i < 2; i++) {
                a.want[i] = rk_count_poll(acks[i]) + STEP;
                a.base[i] = rk_size(r, "east", moved_topics[i]);
        }
        if (!harness_wait_until(progressed, &a, 120000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("%s: no progress in 120 s: acks %" PRId64 "/%" PRId64
                         " (want %" PRId64 "/%" PRId64 "), west.clicks %" PRId64
                         " (was %" PRId64 "), clicks.unified %" PRId64
                         " (was %" PRId64 ")",
                         what, acks[0]->cnt, acks[1]->cnt, a.want[0],
                         a.want[1], a.now[0], a.base[0], a.now[1], a.base[1]);
        }
        rk_gw_expect_running(r);
        return (double)(harness_now_ms() - t0) / 1000.0;
}

/* New preferred leader of each partition: the broker after its leader. */
struct plan {
        int leader[2][PARTS];
};

static int next_broker(int b) { return b % 3 + 1; }

static char *plan_json(struct rk *r, struct plan *pl, bool election) {
        size_t cap = 8192, n = 0;
        char  *js  = malloc(cap);

        assert_non_null(js);
        n += (size_t)snprintf(js + n, cap - n, election ? "{\"partitions\":["
                                                        : "{\"version\":1,"
                                                          "\"partitions\":[");
        for (int t = 0; t < 2; t++)
                for (int p = 0; p < PARTS; p++) {
                        bool first = !t && !p;
                        int  old = rk_leader(r, "east", moved_topics[t], p);
                        assert_true(old >= 1 && old <= 3);
                        int l = pl->leader[t][p] = next_broker(old);
                        n += (size_t)snprintf(
                            js + n, cap - n,
                            "%s{\"topic\":\"%s\",\"partition\":%d", first ? "" : ",",
                            moved_topics[t], p);
                        if (!election)
                                n += (size_t)snprintf(
                                    js + n, cap - n, ",\"replicas\":[%d,%d,%d]",
                                    l, next_broker(l), next_broker(next_broker(l)));
                        n += (size_t)snprintf(js + n, cap - n, "}");
                }
        snprintf(js + n, cap - n, "]}");
        return js;
}

static bool all_moved(void *arg) {
        void      **a  = arg;
        struct rk  *r  = a[0];
        struct plan *pl = a[1];

        for (int t = 0; t < 2; t++)
                for (int p = 0; p < PARTS; p++)
                        if (rk_leader(r, "east", moved_topics[t], p) !=
                            pl->leader[t][p])
                                return false;
        return true;
}

static void run_tool(struct rk *r, const char *main_class,
                     const char *const *args, const char *name) {
        char out[64], err[64];

        snprintf(out, sizeof(out), "%s.out", name);
        snprintf(err, sizeof(err), "%s.err", name);
        char           *po = rk_path(r, out), *pe = rk_path(r, err);
        harness_proc_t *p  = rk_java_spawn(r, main_class, args, po, pe);
        rk_java_expect_exit0(r, p, name, pe, 120000);
        harness_proc_destroy(p);
        free(po);
        free(pe);
}

static void test_leader_move(void **state) {
        struct rk *r = rk_new("rk-move");

        *state = r;
        rk_clicks_clusters(r, 3, 2, PARTS);

        const char *const gw_args[] = {"--topic", "clicks", "--unify", "dedup",
                                       NULL};
        rk_gw_start(r, gw_args);

        char           *out[2], *err[2];
        harness_proc_t *prod[2];
        struct rk_counter c[2], *acks[2] = {&c[0], &c[1]};
        prod[0] = rk_clicks_producer(r, "east", "1", THROUGHPUT, &out[0],
                                     &err[0]);
        prod[1] = rk_clicks_producer(r, "west", "2", THROUGHPUT, &out[1],
                                     &err[1]);
        for (int i = 0; i < 2; i++)
                rk_counter_init(&c[i], out[i], "producer_send_success");
        double t_warm = wait_progress(r, acks, "warm-up");

        /* 1: reassignment (replica order) and a preferred election. */
        struct plan pl;
        char       *reassign = plan_json(r, &pl, false);
        char       *elect    = plan_json(r, &pl, true);
        char       *f_re     = rk_write(r, "reassign.json", reassign);
        char       *f_el     = rk_write(r, "elect.json", elect);
        int64_t     t_move   = harness_now_ms();
        const char *const re_args[] = {"--bootstrap-server", rk_bs(r, "east"),
                                       "--reassignment-json-file", f_re,
                                       "--execute", NULL};
        run_tool(r, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                 re_args, "reassign");
        const char *const el_args[] = {"--bootstrap-server", rk_bs(r, "east"),
                                       "--election-type", "PREFERRED",
                                       "--path-to-json-file", f_el, NULL};
        run_tool(r, "org.apache.kafka.tools.LeaderElectionCommand", el_args,
                 "elect");
        void *ma[2] = {r, &pl};
        if (!harness_wait_until(all_moved, ma, 60000))
                fail_msg("leaders of west.clicks / clicks.unified at east not "
                         "all moved 60 s after the election");
        double t_moved = (double)(harness_now_ms() - t_move) / 1000.0;
        double t_prog1 = wait_progress(r, acks, "after the leader move");
        print_message("# leader move: %d partitions got new leaders %.1f s "
                      "after the reassignment began; %d more acks per site "
                      "and aagw writing to both topics %.1f s later\n",
                      2 * PARTS, t_moved, STEP, t_prog1);

        /* 2: a clean broker restart under load. */
        int leader = rk_leader(r, "east", "clicks.unified", 0);
        assert_true(leader >= 1 && leader <= 3);
        int64_t t_term = harness_now_ms();
        rk_ctl(r, "east", "term", leader, 60000);
        int now = rk_wait_new_leader(r, "east", "clicks.unified", 0, leader,
                                     60000);
        if (now < 0)
                fail_msg("clicks.unified/0 at east: no new leader 60 s after "
                         "broker %d stopped",
                         leader);
        double t_down = (double)(harness_now_ms() - t_term) / 1000.0;
        double t_prog2 = wait_progress(r, acks, "with a broker stopped");
        rk_ctl(r, "east", "start", leader, 180000);
        for (int t = 0; t < 2; t++)
                if (!rk_wait_isr(r, "east", moved_topics[t], 3, 120000))
                        fail_msg("%s at east: ISR not full 120 s after broker "
                                 "%d restarted",
                                 moved_topics[t], leader);
        double t_back = (double)(harness_now_ms() - t_term) / 1000.0;
        double t_prog3 = wait_progress(r, acks, "after the broker restart");
        print_message("# clean restart of broker %d (leader of "
                      "clicks.unified/0): stopped in %.1f s (new leader %d), "
                      "aagw progressed %.1f s later; back in sync %.1f s after "
                      "the SIGTERM; progress after it %.1f s\n",
                      leader, t_down, now, t_prog2, t_back, t_prog3);

        struct rk_produced pr[2];
        int64_t            acked[2];
        for (int i = 0; i < 2; i++) {
                rk_producer_stop(r, prod[i], err[i]);
                harness_proc_destroy(prod[i]);
                rk_produced_parse(out[i], &pr[i]);
                acked[i] = rk_bag_total(pr[i].acked);
        }
        bool caught_up =
            rk_wait_size(r, "east", "west.clicks", acked[1], 120000) &&
            rk_wait_size(r, "west", "east.clicks", acked[0], 120000) &&
            rk_wait_size(r, "east", "clicks.unified", acked[0] + acked[1],
                         120000) &&
            rk_wait_size(r, "west", "clicks.unified", acked[0] + acked[1],
                         120000);
        rk_gw_expect_running(r);
        if (!caught_up)
                rk_gw_dump_log(r, 40);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);
        bool ok = rk_verify_clicks(r, &pr[0], &pr[1], "end");
        print_message("# leader-move: acked east %" PRId64 ", west %" PRId64
                      " (failed %" PRId64 "/%" PRId64 "), warm-up %.1f s, "
                      "wall %.1f s\n",
                      acked[0], acked[1], rk_bag_total(pr[0].failed),
                      rk_bag_total(pr[1].failed), t_warm, rk_elapsed(r));
        assert_true(ok);

        for (int i = 0; i < 2; i++) {
                rk_produced_deinit(&pr[i]);
                free(out[i]);
                free(err[i]);
        }
        free(reassign);
        free(elect);
        free(f_re);
        free(f_el);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_leader_move, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
