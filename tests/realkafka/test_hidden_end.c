/*
 * tests/realkafka/test_hidden_end.c: a flow restarted while its target
 * partition's high watermark is held back below the leader's log must
 * not copy again what the previous run left above the watermark (2 and 7
 * records were copied twice in a kafka-target_kill run).
 *
 * east has 3 brokers; west.clicks there has replication factor 3 and
 * min.insync.replicas 2, and the brokers fence a dead broker only after
 * 60 s (broker.session.timeout.ms; replica.lag.time.max.ms as long), so
 * a follower killed stays in the ISR that long and the leader's high
 * watermark stays where that follower stopped.  aagw (west -> east)
 * copies RECS records; a follower of west.clicks/0 is SIGKILLed; RECS
 * more are copied: the leader appends them (its log file says so) but
 * cannot acknowledge them, and a consumer cannot see them.  aagw is then
 * SIGKILLed and started again at once, and the follower only once the
 * new run has either copied again (the bug: it took the watermark for
 * the end and resumed there, so its copies land after the hidden ones)
 * or said it waits for the watermark to reach the log's end.
 *
 * Asserted: the restarted flow logged the wait and its end; east's
 * west.clicks holds west's 2 * RECS values once each, in source order.
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

#define RECS 200

static const char *const gw_args[] = {"--topic", "clicks", NULL};

#define WAIT_LINE                                                             \
        "west.clicks [0]: its leader did not refuse a fetch after the end "   \
        "offset"
#define DONE_LINE "now the end of its leader's log"

static uint32_t be32(const unsigned char *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
               (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* The log end offset of east's node @node replica of west.clicks/0, from
 * its (only) segment file: the last whole batch's base offset plus its
 * last offset delta, plus one (Kafka's record batch v2: baseOffset
 * int64, batchLength int32, ..., lastOffsetDelta int32 at byte 23).
 * -1 if it cannot be read. */
static int64_t leader_log_end(struct rk *r, int node) {
        char   rel[200];
        size_t len = 0;

        snprintf(rel, sizeof(rel),
                 "kafka-east/east/node%d/data/west.clicks-0/"
                 "00000000000000000000.log",
                 node);
        char          *path = rk_path(r, rel);
        unsigned char *buf  = (unsigned char *)harness_read_file(path, &len);
        int64_t        end  = -1;

        free(path);
        for (size_t at = 0; buf && at + 27 <= len;) {
                uint64_t base = (uint64_t)be32(buf + at) << 32 |
                                be32(buf + at + 4);
                size_t   blen = be32(buf + at + 8);
                if (blen < 15 || at + 12 + blen > len)
                        break; /* being appended */
                end = (int64_t)base + (int64_t)be32(buf + at + 23) + 1;
                at += 12 + blen;
        }
        free(buf);
        return end;
}

struct log_arg {
        struct rk *r;
        int        node;
        int64_t    want, end;
        bool       waited;
};

static bool leader_holds(void *arg) {
        struct log_arg *a = arg;
        a->end            = leader_log_end(a->r, a->node);
        return a->end >= a->want;
}

static bool log_has(struct rk *r, const char *what) {
        char *text = harness_read_file(r->gw_log, NULL);
        bool  has  = text && strstr(text, what);
        free(text);
        return has;
}

/* The restarted run waits (fixed) or copied again past the hidden
 * records (the leader's log grew past them). */
static bool decided(void *arg) {
        struct log_arg *a = arg;
        a->waited         = log_has(a->r, WAIT_LINE);
        return a->waited || leader_holds(a);
}

static void test_hidden_end(void **state) {
        struct rk *r = rk_new("rk-hidden-end");
        static const char *const east_props[] = {
            "broker.session.timeout.ms=60000", "replica.lag.time.max.ms=60000",
            NULL};

        *state = r;
        rk_cluster_start_with(r, "east", 3, east_props);
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "east", "clicks", 1, 3, 2);
        rk_create_topic(r, "east", "west.clicks", 1, 3, 2);
        rk_create_topic(r, "west", "clicks", 1, 1, 0);
        rk_create_topic(r, "west", "east.clicks", 1, 1, 0);

        rk_gw_start(r, gw_args);
        rk_produce(r, "west", "clicks", 1, "a.", RECS);
        rk_expect_size(r, "east", "west.clicks", RECS, 60000);

        int leader = rk_leader(r, "east", "west.clicks", 0);
        assert_true(leader >= 1 && leader <= 3);
        int follower = leader % 3 + 1;
        rk_ctl(r, "east", "kill", follower, 60000);
        rk_produce(r, "west", "clicks", 1, "b.", RECS);
        struct log_arg la = {r, leader, 2 * RECS, -1, false};
        if (!harness_wait_until(leader_holds, &la, 30000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("east node %d (leader of west.clicks/0): log ends "
                         "at %" PRId64 ", want %d",
                         leader, la.end, 2 * RECS);
        }
        int64_t visible = rk_size(r, "east", "west.clicks");
        if (visible >= 2 * RECS)
                fail_msg("west.clicks/0 at east: %" PRId64 " records "
                         "visible with follower %d dead: its ISR dropped it "
                         "already, nothing is hidden to test with",
                         visible, follower);

        assert_int_equal(rk_gw_stop(r, SIGKILL, 10000), 128 + SIGKILL);
        rk_gw_start(r, gw_args);
        la.want = 2 * RECS + 1;
        if (!harness_wait_until(decided, &la, 40000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("restarted aagw neither waited for the watermark "
                         "nor copied again within 40 s");
        }
        print_message("# leader %d, follower %d killed: %" PRId64
                      " of %d records visible, the leader's log at %" PRId64
                      "; the restarted flow %s\n",
                      leader, follower, visible, 2 * RECS, la.end,
                      la.waited ? "waits" : "copied again");

        rk_ctl(r, "east", "start", follower, 180000);
        if (!rk_wait_isr(r, "east", "west.clicks", 3, 120000))
                fail_msg("west.clicks at east: ISR not full 120 s after "
                         "node %d restarted",
                         follower);
        rk_expect_size(r, "east", "west.clicks", 2 * RECS, 60000);
        rk_gw_expect_running(r);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        const char *const west_topics[] = {"clicks", NULL};
        const char *const east_topics[] = {"west.clicks", NULL};
        char *west_out = rk_read_topics(r, "west", "read-west", west_topics);
        char *east_out = rk_read_topics(r, "east", "read-east", east_topics);
        struct rk_read src, copy;
        rk_read_parse(west_out, "clicks", &src);
        rk_read_parse(east_out, "west.clicks", &copy);
        assert_int_equal(src.records, 2 * RECS);
        bool    ok        = rk_check("east west.clicks", src.values, NULL, &copy);
        int64_t order_bad = rk_order_diffs("east west.clicks", &src, &copy);
        print_message("# west.clicks at east: %" PRId64 " records for %d "
                      "sources; wall %.1f s\n",
                      copy.records, 2 * RECS, rk_elapsed(r));
        assert_true(ok);
        assert_int_equal(order_bad, 0);
        assert_true(la.waited);
        assert_true(log_has(r, DONE_LINE));
        rk_read_deinit(&src);
        rk_read_deinit(&copy);
        free(east_out);
        free(west_out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_hidden_end, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
