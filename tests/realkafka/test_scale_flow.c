/*
 * tests/realkafka/test_scale_flow.c: three aagw processes of one site
 * share the flow east->west (scale-out), through a kill -9 and restart,
 * a clean stop and a zombie, and the copy holds every source record
 * exactly once, in source order per partition.
 *
 * Each process (`--site west --scale-out true --unify off`, its own
 * --member and state dir) joins the owners' group of the flow at west;
 * the group's assignment of the work topic aagw.aagw.east-west.work
 * decides which source partitions each copies, in transactions that
 * only the owner can commit (replicator/flow.c, SCALE-OUT).  A
 * VerifiableProducer writes `clicks` (12 partitions) at east all along.
 *
 *   1. all three copy; member a is SIGKILLed and started again at once:
 *      its partitions move when its session (6 s) expires, the new
 *      owners wait for its open transaction to be aborted
 *      (scale_out.transaction_timeout, 6 s here);
 *   2. member b is stopped with SIGTERM (exit 0: it commits and leaves
 *      the group);
 *   3. member c is SIGSTOPped past its session and SIGCONTed: a zombie
 *      whose next commit the group coordinator refuses, or whose
 *      assignment is taken back first: its copies stay aborted.
 *
 * Between the steps the test waits until the copy (read read_committed)
 * grew, so that each step finds the flow copying.  At the end, with the
 * producer stopped and every copy in, the members stop cleanly and the
 * copy is read read_committed by aagw.kafka.ReadToEnd: every record of
 * east's `clicks` once, in source order per partition; every acked value
 * once in `clicks`.  c's log must show that it lost its partitions to
 * the group (fenced, or its assignment lost), and the copy holds more
 * records read_uncommitted than read_committed (aborted copies exist;
 * printed, and asserted).
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

#define PARTS    12
/* The zombie: past the 6 s session, within the 10 s transaction
 * timeout, so that its transaction is still open when it wakes. */
#define STALL_MS 8000
#define GROW     20 /* copies each partition gains in a step */

static const char *const gw_args[] = {
    "--site", "west", "--scale-out", "true", "--unify", "off",
    "--topic", "clicks",
    "--set", "scale_out.session_timeout=6s",
    NULL};

/* Records of every partition of 'topic' at 'alias' read with
 * 'isolation' from the beginning to the end, in all and per partition
 * ('per', PARTS of them, may be NULL); -1 if the reader did not get
 * there within 30 s. */
static int64_t count_records(struct rk *r, const char *alias,
                             const char *topic, const char *isolation,
                             int64_t *per) {
        char             err[512], group[64];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        snprintf(group, sizeof(group), "scale-flow-count-%s", isolation);
        const char *const kv[] = {"bootstrap.servers", rk_bs(r, alias),
                                  "group.id", group,
                                  "enable.auto.commit", "false",
                                  "enable.partition.eof", "true",
                                  "isolation.level", isolation,
                                  NULL};
        for (int i = 0; kv[i]; i += 2)
                assert_int_equal(rd_kafka_conf_set(conf, kv[i], kv[i + 1],
                                                   err, sizeof(err)),
                                 RD_KAFKA_CONF_OK);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err,
                                     sizeof(err));
        assert_non_null(c);
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(PARTS);
        for (int p = 0; p < PARTS; p++)
                rd_kafka_topic_partition_list_add(a, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, a), 0);
        rd_kafka_topic_partition_list_destroy(a);
        bool    eof[PARTS] = {false};
        int     eofs = 0;
        if (per)
                memset(per, 0, PARTS * sizeof(*per));
        int64_t n = 0, deadline = harness_now_ms() + 30000;
        while (eofs < PARTS && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                if (!m)
                        continue;
                if (!m->err) {
                        n++;
                        if (per && m->partition >= 0 && m->partition < PARTS)
                                per[m->partition]++;
                } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                         m->partition >= 0 && m->partition < PARTS &&
                         !eof[m->partition]) {
                        eof[m->partition] = true;
                        eofs++;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_destroy(c);
        return eofs == PARTS ? n : -1;
}

/* What the copy must reach: per partition (or, 'per' NULL, in all). */
struct grow {
        struct rk *r;
        int64_t    want[PARTS], now[PARTS];
        int64_t    want_all, now_all;
        bool       per;
};

static bool copy_grew(void *arg) {
        struct grow *g = arg;
        g->now_all = count_records(g->r, "west", "east.clicks",
                                   "read_committed", g->now);
        if (!g->per)
                return g->now_all >= g->want_all;
        for (int p = 0; p < PARTS; p++)
                if (g->now[p] < g->want[p])
                        return false;
        return true;
}

/* Wait (60 s) until every partition of the copy, read read_committed,
 * holds GROW records more than when the step began ('per'), or the copy
 * 'want_all' records in all: after a fault, each partition is copied
 * again, whoever owns it now. */
static void wait_copy(struct rk *r, struct rk_gw *gw, struct grow *g,
                      int64_t t0, const char *step) {
        if (!harness_wait_until(copy_grew, g, 60000)) {
                for (int i = 0; i < 3; i++)
                        if (gw[i].proc)
                                rk_gwn_dump_log(&gw[i], 30);
                for (int p = 0; g->per && p < PARTS; p++)
                        if (g->now[p] < g->want[p])
                                print_message("# partition %d: %" PRId64
                                              " copies, want %" PRId64 "\n",
                                              p, g->now[p], g->want[p]);
                fail_msg("%s: the copy did not grow in 60 s (%" PRId64
                         " records)",
                         step, g->now_all);
        }
        print_message("# %s: every partition copied again %.1f s after the "
                      "fault, copy %" PRId64 " records (%.1f s into the "
                      "test)\n",
                      step, (double)(harness_now_ms() - t0) / 1000.0,
                      g->now_all, rk_elapsed(r));
}

/* The copy's partitions now, GROW more each to be reached. */
static void step_begin(struct rk *r, struct grow *g) {
        memset(g, 0, sizeof(*g));
        g->r   = r;
        g->per = true;
        assert_true(count_records(r, "west", "east.clicks", "read_committed",
                                  g->want) >= 0);
        for (int p = 0; p < PARTS; p++)
                g->want[p] += GROW;
}

static bool file_has(const char *path, const char *s) {
        char *text = harness_read_file(path, NULL);
        bool  has  = text && strstr(text, s);
        free(text);
        return has;
}

static void test_scale_flow(void **state) {
        struct rk   *r = rk_new("rk-scale-flow");
        struct rk_gw gw[3];
        char        *p_out, *p_err;

        *state = r;
        memset(gw, 0, sizeof(gw));
        rk_cluster_start(r, "east", 1);
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "east", "clicks", PARTS, 1, 0);
        harness_proc_t *prod =
            rk_clicks_producer(r, "east", "1", "400", &p_out, &p_err);
        rk_gwn_start(r, &gw[0], "a", gw_args);
        rk_gwn_start(r, &gw[1], "b", gw_args);
        rk_gwn_start(r, &gw[2], "c", gw_args);
        struct grow g;
        step_begin(r, &g);
        wait_copy(r, gw, &g, harness_now_ms(), "three members");

        /* 1: kill -9 and restart */
        step_begin(r, &g);
        int64_t t0 = harness_now_ms();
        assert_int_equal(rk_gwn_stop(r, &gw[0], SIGKILL, 10000),
                         128 + SIGKILL);
        rk_gwn_start(r, &gw[0], NULL, gw_args);
        wait_copy(r, gw, &g, t0, "a killed, restarted");

        /* 2: a clean stop */
        step_begin(r, &g);
        t0 = harness_now_ms();
        assert_int_equal(rk_gwn_stop(r, &gw[1], SIGTERM, 30000), 0);
        wait_copy(r, gw, &g, t0, "b stopped");

        /* 3: the zombie */
        step_begin(r, &g);
        t0 = harness_now_ms();
        assert_int_equal(harness_proc_signal(gw[2].proc, SIGSTOP), 0);
        usleep(STALL_MS * 1000);
        assert_int_equal(harness_proc_signal(gw[2].proc, SIGCONT), 0);
        wait_copy(r, gw, &g, t0, "c stalled 8 s");

        rk_producer_stop(r, prod, p_err);
        harness_proc_destroy(prod);
        struct rk_produced pr;
        rk_produced_parse(p_out, &pr);
        int64_t acked = rk_bag_total(pr.acked);
        print_message("# producer: %" PRId64 " acked, %" PRId64 " failed\n",
                      acked, rk_bag_total(pr.failed));
        int64_t src_n =
            count_records(r, "east", "clicks", "read_committed", NULL);
        assert_true(src_n >= acked);
        memset(&g, 0, sizeof(g));
        g.r        = r;
        g.want_all = src_n;
        wait_copy(r, gw, &g, harness_now_ms(), "caught up");

        int64_t uncommitted =
            count_records(r, "west", "east.clicks", "read_uncommitted", NULL);
        bool c_lost = file_has(gw[2].log, "fenced") ||
                      file_has(gw[2].log, "moved on without this member");
        print_message("# copy read_uncommitted %" PRId64 " (aborted copies "
                      "%" PRId64 "); c's log: %s\n",
                      uncommitted, uncommitted - src_n,
                      c_lost ? "lost its partitions to the group" : "nothing");
        assert_int_equal(rk_gwn_stop(r, &gw[0], SIGTERM, 30000), 0);
        assert_int_equal(rk_gwn_stop(r, &gw[2], SIGTERM, 30000), 0);

        const char *east_topics[] = {"clicks", NULL};
        const char *west_topics[] = {"east.clicks", NULL};
        char *east_out = rk_read_topics(r, "east", "read-east", east_topics);
        char *west_out = rk_read_topics(r, "west", "read-west", west_topics);
        struct rk_read src, copy;
        rk_read_parse(east_out, "clicks", &src);
        rk_read_parse(west_out, "east.clicks", &copy);
        bool src_ok = rk_check_source("east clicks", pr.acked, pr.failed, &src);
        bool ok     = rk_check("west east.clicks", src.values, NULL, &copy);
        int64_t order_bad = rk_order_diffs("west east.clicks", &src, &copy);
        print_message("# %" PRId64 " source records, wall %.1f s\n",
                      src.records, rk_elapsed(r));
        if (!ok || order_bad) {
                const char *const needles[] = {"takeover", "fenced", "owns",
                                               "lost", "aborted", NULL};
                for (int i = 0; i < 3; i++)
                        rk_grep_file(gw[i].log, "FLOW", needles);
        }
        assert_true(src_ok);
        assert_true(ok);
        assert_int_equal(order_bad, 0);
        assert_true(c_lost);
        assert_true(uncommitted > src_n);
        rk_produced_deinit(&pr);
        rk_read_deinit(&src);
        rk_read_deinit(&copy);
        free(east_out);
        free(west_out);
        free(p_out);
        free(p_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale_flow, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
