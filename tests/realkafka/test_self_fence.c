/*
 * tests/realkafka/test_self_fence.c: a flow whose identity lease is
 * fenced by its own rejoin copies on instead of stopping the gateway
 * (reliability.md, finding 9).
 *
 * Each flow keeps an identity lease: a static member (group.instance.id
 * "aagw.<id>.<source>-<target>@<site>") of group
 * "aagw.<id>.<source>-<target>.lease" that reads nothing.  A process
 * that stalls longer than its session (6 s here, rk_gw_start()) is
 * dropped from that group; librdkafka rejoins with the same instance id
 * and a new member id, and a request still carrying the old member id is
 * refused FENCED_INSTANCE_ID, which librdkafka makes fatal: exactly what
 * a second process with the same identity causes.  The flow stops
 * copying, restarts its lease, and once that holds the id again copies
 * on from positions reconciled against the target.
 *
 * The rejoin is made deterministic: while aagw is stopped (SIGSTOP) past
 * its session, the test joins the lease group with aagw's
 * group.instance.id, as librdkafka's rejoin would, and drops that member
 * without leaving.  At SIGCONT, aagw's lease, with its old member id, is
 * fenced.
 *
 * Two single-broker clusters; aagw replicates east -> west.  Round 1: a
 * stall alone (RECS produced meanwhile); round 2: a stall and the rejoin.
 * Asserts: aagw never exits, the restart's WARN line is logged, the flow
 * copies on, and after a clean stop west's east.clicks holds every east
 * record exactly once, in order.
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
#include <unistd.h>

#include "rk.h"

#define PARTS    4
#define RECS     300
#define FLOW     "aagw.aagw.east-west" /* gateway.id aagw, flow east->west */
#define GROUP    FLOW ".lease"         /* the identity lease's group */
#define INSTANCE FLOW "@west"          /* --site west */
#define STALL_MS 10000 /* the fault: past the 6 s session */
#define RESTART_LINE "restarting the lease"
#define HOLDS_LINE   "identity lease holds group.instance.id"

static void produce(struct rk *r, int round, int n) {
        char prefix[32];

        snprintf(prefix, sizeof(prefix), "r%d-", round);
        rk_produce(r, "east", "clicks", PARTS, prefix, n);
}

static bool log_has(struct rk *r, const char *s) {
        char *text = harness_read_file(r->gw_log, NULL);
        bool  has  = text && strstr(text, s);
        free(text);
        return has;
}

/* The lease logged that it joined (at every join), at least 'want'
 * times. */
struct holds {
        struct rk *r;
        int        want;
};

static bool lease_holds(void *arg) {
        struct holds *h    = arg;
        char         *text = harness_read_file(h->r->gw_log, NULL);
        int           n    = 0;
        for (const char *p = text; p && (p = strstr(p, HOLDS_LINE)); p++)
                n++;
        free(text);
        return n >= h->want;
}

/* Join aagw's lease group with its group.instance.id (a new member id
 * for that id: aagw's is stale from then on), wait for the assignment,
 * and drop the member without leaving the group. */
static void take_instance_id(struct rk *r) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const char *const kv[] = {
            "bootstrap.servers", rk_bs(r, "east"),
            "group.id", GROUP,
            "group.instance.id", INSTANCE,
            "enable.auto.commit", "false",
            /* held past aagw's SIGCONT */
            "session.timeout.ms", "30000",
            NULL};

        for (int i = 0; kv[i]; i += 2)
                assert_int_equal(rd_kafka_conf_set(conf, kv[i], kv[i + 1],
                                                   err, sizeof(err)),
                                 RD_KAFKA_CONF_OK);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_poll_set_consumer(c);
        rd_kafka_topic_partition_list_t *sub =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(sub, "clicks",
                                          RD_KAFKA_PARTITION_UA);
        assert_int_equal(rd_kafka_subscribe(c, sub), 0);
        rd_kafka_topic_partition_list_destroy(sub);
        int64_t deadline = harness_now_ms() + 30000;
        rd_kafka_topic_partition_list_t *a = NULL;
        while (harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                if (m)
                        rd_kafka_message_destroy(m);
                if (!rd_kafka_assignment(c, &a) && a && a->cnt > 0)
                        break;
                if (a)
                        rd_kafka_topic_partition_list_destroy(a);
                a = NULL;
        }
        if (!a)
                fail_msg("no assignment for group.instance.id %s in 30 s",
                         INSTANCE);
        print_message("# joined as %s: %d partitions\n", INSTANCE, a->cnt);
        rd_kafka_topic_partition_list_destroy(a);
        rd_kafka_destroy_flags(c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

static const char *const gw_args[] = {"--site", "west", "--topic", "clicks",
                                      NULL};

static void test_self_fence(void **state) {
        struct rk *r    = rk_new("rk-self-fence");
        int64_t    want = 0;
        int        round;

        *state = r;
        rk_cluster_start(r, "east", 1);
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "east", "clicks", PARTS, 1, 0);
        rk_create_topic(r, "west", "east.clicks", PARTS, 1, 0);
        rk_gw_start(r, gw_args);
        for (round = 1; round <= 2; round++) {
                produce(r, 2 * round, RECS);
                want += RECS;
                rk_expect_size(r, "west", "east.clicks", want, 60000);
                /* The copy does not wait for the lease: the stall must
                 * come after it joined, or there is nothing to fence. */
                struct holds h = {r, 1};
                if (!harness_wait_until(lease_holds, &h, 60000)) {
                        rk_gw_dump_log(r, 40);
                        fail_msg("the identity lease did not join in 60 s");
                }
                assert_int_equal(harness_proc_signal(r->gw, SIGSTOP), 0);
                int64_t t0 = harness_now_ms();
                produce(r, 2 * round + 1, RECS);
                want += RECS;
                if (round == 2)
                        take_instance_id(r);
                int64_t left = STALL_MS - (harness_now_ms() - t0);
                if (left > 0)
                        usleep((useconds_t)left * 1000);
                assert_int_equal(harness_proc_signal(r->gw, SIGCONT), 0);
                rk_expect_size(r, "west", "east.clicks", want, 60000);
                rk_gw_expect_running(r);
                print_message("# round %d: %" PRId64 " copied, restart "
                              "logged: %s\n",
                              round, rk_size(r, "west", "east.clicks"),
                              log_has(r, RESTART_LINE) ? "yes" : "no");
        }
        if (!log_has(r, RESTART_LINE)) {
                rk_gw_dump_log(r, 60);
                fail_msg("fenced, but no lease restart logged");
        }
        /* Copies on after the restart. */
        produce(r, 0, RECS);
        want += RECS;
        rk_expect_size(r, "west", "east.clicks", want, 60000);
        rk_gw_expect_running(r);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        const char *east_topics[] = {"clicks", NULL};
        const char *west_topics[] = {"east.clicks", NULL};
        char *east_out = rk_read_topics(r, "east", "read-east", east_topics);
        char *west_out = rk_read_topics(r, "west", "read-west", west_topics);
        struct rk_read src, copy;
        rk_read_parse(east_out, "clicks", &src);
        rk_read_parse(west_out, "east.clicks", &copy);
        assert_int_equal(src.records, want);
        bool    ok        = rk_check("west east.clicks", src.values, NULL, &copy);
        int64_t order_bad = rk_order_diffs("west east.clicks", &src, &copy);
        assert_true(ok);
        assert_int_equal(order_bad, 0);
        rk_read_deinit(&src);
        rk_read_deinit(&copy);
        free(east_out);
        free(west_out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_self_fence, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
