/*
 * tests/realkafka/test_txn_start.c: a flow and a unify stage resumed at an
 * offset that holds no record (a transaction marker) check the jump to
 * the first record before they believe it (nothing acknowledged
 * may be lost).
 *
 * Both assign a partition at their stored position and used to take any
 * first record past it for compaction or markers; a consumer that started
 * late (tests/realkafka/README.md, "Settled") then moved the position over
 * records never copied or unified.  Now they seek back to the assigned
 * offset once and believe the gap only when the second fetch starts past
 * it again (replicator_start_take(), replicator/kafka_common.c).  This
 * test takes the legitimate path on a real broker: east's clicks/0 and
 * west's clicks/0 (the unify stage's local input) each get RECS records
 * in a transaction (offsets 0..RECS-1, the commit marker at RECS); aagw
 * (--site west: the flow east->west and west's unify stage) copies and
 * unifies them and stops with both positions at RECS; RECS more in a
 * second transaction at each (RECS+1..2*RECS, marker 2*RECS+1); aagw
 * started again is assigned at RECS, whose first record is at RECS+1, in
 * the flow and in the stage.
 *
 * Asserted: the restarted flow and the restarted unify stage each said
 * they fetched again and found the first record still at RECS+1; west's
 * east.clicks holds east's 2*RECS values once each, in source order, and
 * west's clicks.unified the 4*RECS values of both sites once each.
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

#define RECS 50

/* RECS records "<tag><from>".. into clicks/0 at 'alias', in one
 * transaction. */
static void produce_txn(struct rk *r, const char *alias, const char *tag,
                        int from) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, alias), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "transactional.id",
                                           "rk-txn-start", err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(p);
        rd_kafka_error_t *e = rd_kafka_init_transactions(p, 60000);
        if (!e)
                e = rd_kafka_begin_transaction(p);
        for (int i = 0; !e && i < RECS; i++) {
                char v[32];
                int  len = snprintf(v, sizeof(v), "%s%d", tag, from + i);
                assert_int_equal(
                    rd_kafka_producev(p, RD_KAFKA_V_TOPIC("clicks"),
                                      RD_KAFKA_V_PARTITION(0),
                                      RD_KAFKA_V_VALUE(v, (size_t)len),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        if (!e)
                e = rd_kafka_commit_transaction(p, 60000);
        if (e)
                fail_msg("transaction at %s: %s", alias, rd_kafka_error_string(e));
        rd_kafka_destroy(p);
}

static const char *const gw_args[] = {"--site", "west", "--topic", "clicks",
                                      NULL};

static void expect_log(struct rk *r, const char *what) {
        char *text = harness_read_file(r->gw_log, NULL);

        assert_non_null(text);
        if (!strstr(text, what)) {
                rk_gw_dump_log(r, 40);
                fail_msg("%s does not say: %s", r->gw_log, what);
        }
        free(text);
}

/* The restarted 'who' (a flow, a unify stage) said it fetched clicks [0]
 * again from RECS and found the first record still at RECS+1. */
static void expect_refetch(struct rk *r, const char *who) {
        char line[256];

        snprintf(line, sizeof(line),
                 "%s: clicks [0]: assigned at offset %d but the first "
                 "record fetched is at %d: fetching from %d again",
                 who, RECS, RECS + 1, RECS);
        expect_log(r, line);
        snprintf(line, sizeof(line),
                 "%s: clicks [0]: fetched from %d again, the first record "
                 "is still at %d: the source holds nothing in between",
                 who, RECS, RECS + 1);
        expect_log(r, line);
}

static void test_txn_start(void **state) {
        struct rk *r = rk_new("rk-txn-start");

        *state = r;
        /* Kafka creates 50 partitions for each of its internal topics
         * at their first use (the first group, the first transaction);
         * 4 are plenty here and quicker to create. */
        static const char *const small[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4", NULL};
        rk_cluster_start_with(r, "east", 1, small);
        rk_cluster_start_with(r, "west", 1, small);
        rk_create_topic(r, "east", "clicks", 1, 1, 0);
        rk_create_topic(r, "west", "east.clicks", 1, 1, 0);
        rk_create_topic(r, "west", "clicks", 1, 1, 0);
        rk_create_topic(r, "west", "clicks.unified", 1, 1, 0);

        produce_txn(r, "east", "t", 0);
        produce_txn(r, "west", "w", 0);
        rk_gw_start(r, gw_args);
        rk_expect_size(r, "west", "east.clicks", RECS, 60000);
        rk_expect_size(r, "west", "clicks.unified", 2 * RECS, 60000);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        produce_txn(r, "east", "t", RECS);
        produce_txn(r, "west", "w", RECS);
        rk_gw_start(r, gw_args);
        rk_expect_size(r, "west", "east.clicks", 2 * RECS, 60000);
        rk_expect_size(r, "west", "clicks.unified", 4 * RECS, 60000);
        expect_refetch(r, "east->west");
        expect_refetch(r, "unify@west");
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        const char *const topics[] = {"east.clicks", "clicks.unified", NULL};
        char *out = rk_read_topics(r, "west", "read-west", topics);
        struct rk_read copy, uni;
        rk_read_parse(out, "east.clicks", &copy);
        rk_read_parse(out, "clicks.unified", &uni);
        assert_true(copy.done);
        assert_int_equal(copy.nparts >= 1, 1);
        assert_int_equal(copy.part_cnt[0], 2 * RECS);
        for (int i = 0; i < 2 * RECS; i++) {
                char v[32];
                snprintf(v, sizeof(v), "t%d", i);
                if (strcmp(copy.part[0][i], v))
                        fail_msg("east.clicks/0 at west: index %d holds %s, "
                                 "want %s",
                                 i, copy.part[0][i], v);
        }
        /* Unified: every value of both sites once (nothing skipped over
         * at the marker, nothing decided twice). */
        assert_int_equal(uni.records, 4 * RECS);
        for (int i = 0; i < 2 * RECS; i++) {
                char v[32];
                for (int k = 0; k < 2; k++) {
                        snprintf(v, sizeof(v), "%s%d", k ? "w" : "t", i);
                        if (rk_bag_count(uni.values, v) != 1)
                                fail_msg("clicks.unified at west holds %s "
                                         "%" PRId64 " times, want once",
                                         v, rk_bag_count(uni.values, v));
                }
        }
        print_message("# %d records in 2 transactions at each site copied "
                      "and unified once each across a restart at the first "
                      "marker; wall %.1f s\n",
                      4 * RECS, rk_elapsed(r));
        rk_read_deinit(&copy);
        rk_read_deinit(&uni);
        free(out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_txn_start, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
