/*
 * tests/realkafka/test_txn_start.c: a flow resumed at an offset that
 * holds no record (a transaction marker) checks the jump to the first
 * record before it believes it (issue 16, "nothing acknowledged is
 * lost").
 *
 * A flow assigns a source partition at its stored position and used to
 * take any first record past it for compaction or markers; a consumer
 * that started late (tests/realkafka/README.md, "Settled") then moved
 * the position over records never copied.  Now the flow seeks back to
 * the assigned offset once and believes the gap only when the second
 * fetch starts past it again.  This test takes the legitimate path on a
 * real broker: east's clicks/0 gets RECS records in a transaction
 * (offsets 0..RECS-1, the commit marker at RECS); aagw (--site west)
 * copies them and stops with its position at RECS; RECS more in a
 * second transaction (RECS+1..2*RECS, marker 2*RECS+1); aagw started
 * again is assigned at RECS, whose first record is at RECS+1.
 *
 * Asserted: the restarted flow said it fetched again and found the
 * first record still at RECS+1; west's east.clicks holds the 2*RECS
 * values once each, in source order.
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

/* RECS records "t<from>".. into east's clicks/0, in one transaction. */
static void produce_txn(struct rk *r, int from) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "east"), err, sizeof(err)),
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
                int  len = snprintf(v, sizeof(v), "t%d", from + i);
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
                fail_msg("transaction at east: %s", rd_kafka_error_string(e));
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

static void test_txn_start(void **state) {
        struct rk *r = rk_new("rk-txn-start");
        char       line[256];

        *state = r;
        rk_cluster_start(r, "east", 1);
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "east", "clicks", 1, 1, 0);
        rk_create_topic(r, "west", "east.clicks", 1, 1, 0);

        produce_txn(r, 0);
        rk_gw_start(r, gw_args);
        rk_expect_size(r, "west", "east.clicks", RECS, 60000);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        produce_txn(r, RECS);
        rk_gw_start(r, gw_args);
        rk_expect_size(r, "west", "east.clicks", 2 * RECS, 60000);
        snprintf(line, sizeof(line),
                 "clicks [0]: assigned at offset %d but the first record "
                 "fetched is at %d: fetching from %d again",
                 RECS, RECS + 1, RECS);
        expect_log(r, line);
        snprintf(line, sizeof(line),
                 "clicks [0]: fetched from %d again, the first record is "
                 "still at %d: the source holds nothing in between",
                 RECS, RECS + 1);
        expect_log(r, line);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        const char *const topics[] = {"east.clicks", NULL};
        char *out = rk_read_topics(r, "west", "read-west", topics);
        struct rk_read copy;
        rk_read_parse(out, "east.clicks", &copy);
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
        print_message("# %d records in 2 transactions copied once each, in "
                      "order, across a restart at the first marker; wall "
                      "%.1f s\n",
                      2 * RECS, rk_elapsed(r));
        rk_read_deinit(&copy);
        free(out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_txn_start, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
