/*
 * tests/unit/test_refused.c: the set of records a transaction was
 * aborted for (replicator/refused.c): found by all three coordinates,
 * kept through growth, deleted one by one or by refused_each(), bounded;
 * and which broker errors count as refusals for good.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "replicator_int.h"

static void test_find_by_all_coordinates(void **state) {
        struct refused *rs = refused_new(100);

        (void)state;
        assert_non_null(rs);
        assert_int_equal(refused_count(rs), 0);
        assert_null(refused_find(rs, "clicks", 0, 5));
        struct refused_rec *r = refused_add(rs, "clicks", 0, 5);
        assert_non_null(r);
        assert_string_equal(r->topic, "clicks");
        assert_false(r->confirmed);
        assert_false(r->resolved);
        assert_int_equal(r->err, 0);
        r->confirmed = true;
        /* Adding again gives the same entry, as it is. */
        assert_ptr_equal(refused_add(rs, "clicks", 0, 5), r);
        assert_true(refused_add(rs, "clicks", 0, 5)->confirmed);
        assert_int_equal(refused_count(rs), 1);
        assert_ptr_equal(refused_find(rs, "clicks", 0, 5), r);
        assert_null(refused_find(rs, "clicks", 1, 5));
        assert_null(refused_find(rs, "clicks", 0, 6));
        assert_null(refused_find(rs, "click", 0, 5));
        assert_null(refused_find(rs, "clicks.unified", 0, 5));
        refused_del(rs, r);
        assert_int_equal(refused_count(rs), 0);
        assert_null(refused_find(rs, "clicks", 0, 5));
        refused_destroy(rs);
        refused_destroy(NULL);
}

/* Past the initial buckets many times over: every record still found,
 * none twice. */
static void test_growth(void **state) {
        struct refused *rs = refused_new(100000);
        char            topic[32];

        (void)state;
        for (int i = 0; i < 20000; i++) {
                snprintf(topic, sizeof(topic), "t%d", i % 7);
                struct refused_rec *r = refused_add(rs, topic, i % 3, i);
                assert_non_null(r);
                r->out_part = i;
        }
        assert_int_equal(refused_count(rs), 20000);
        for (int i = 0; i < 20000; i++) {
                snprintf(topic, sizeof(topic), "t%d", i % 7);
                struct refused_rec *r = refused_find(rs, topic, i % 3, i);
                assert_non_null(r);
                assert_int_equal(r->out_part, i);
                assert_null(refused_find(rs, topic, (i + 1) % 3, i));
        }
        refused_destroy(rs);
}

static bool keep_unresolved(void *arg, struct refused_rec *r) {
        int *calls = arg;
        (*calls)++;
        return !r->resolved;
}

static bool clear_mark(void *arg, struct refused_rec *r) {
        (void)arg;
        r->resolved = false;
        return true;
}

/* What a commit and an abort do with the records of the transaction. */
static void test_each(void **state) {
        struct refused *rs    = refused_new(1000);
        int             calls = 0;

        (void)state;
        for (int i = 0; i < 500; i++)
                refused_add(rs, "clicks", 0, i)->resolved = i % 2;
        refused_each(rs, keep_unresolved, &calls);
        assert_int_equal(calls, 500);
        assert_int_equal(refused_count(rs), 250);
        for (int i = 0; i < 500; i++)
                if (i % 2)
                        assert_null(refused_find(rs, "clicks", 0, i));
                else
                        assert_non_null(refused_find(rs, "clicks", 0, i));
        refused_find(rs, "clicks", 0, 10)->resolved = true;
        refused_each(rs, clear_mark, NULL);
        assert_int_equal(refused_count(rs), 250);
        assert_false(refused_find(rs, "clicks", 0, 10)->resolved);
        refused_each(rs, NULL, NULL);
        assert_int_equal(refused_count(rs), 0);
        assert_null(refused_find(rs, "clicks", 0, 10));
        refused_destroy(rs);
}

static void test_bounded(void **state) {
        struct refused *rs = refused_new(3);
        char            longname[AAGW_TOPIC_MAX + 2];

        (void)state;
        assert_non_null(refused_add(rs, "a", 0, 1));
        assert_non_null(refused_add(rs, "a", 0, 2));
        assert_non_null(refused_add(rs, "a", 0, 3));
        assert_null(refused_add(rs, "a", 0, 4));
        /* one already in is still given */
        assert_non_null(refused_add(rs, "a", 0, 2));
        refused_del(rs, refused_find(rs, "a", 0, 1));
        assert_non_null(refused_add(rs, "a", 0, 4));
        memset(longname, 'x', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        refused_each(rs, NULL, NULL);
        assert_null(refused_add(rs, longname, 0, 1));
        refused_destroy(rs);
}

static void test_for_good(void **state) {
        (void)state;
        assert_true(replicator_refused_for_good(
            RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
        assert_true(replicator_refused_for_good(
            RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE));
        assert_true(replicator_refused_for_good(
            RD_KAFKA_RESP_ERR_INVALID_RECORD));
        assert_true(replicator_refused_for_good(
            RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP));
        /* a redo gets past these */
        const rd_kafka_resp_err_t passing[] = {
            RD_KAFKA_RESP_ERR_NO_ERROR,
            RD_KAFKA_RESP_ERR__MSG_TIMED_OUT,
            RD_KAFKA_RESP_ERR__TIMED_OUT,
            RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            RD_KAFKA_RESP_ERR__PURGE_QUEUE,
            RD_KAFKA_RESP_ERR__PURGE_INFLIGHT,
            RD_KAFKA_RESP_ERR__STATE,
            RD_KAFKA_RESP_ERR__FENCED,
            RD_KAFKA_RESP_ERR_PRODUCER_FENCED,
            RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
            RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
            RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID,
            RD_KAFKA_RESP_ERR__TRANSPORT,
        };
        for (size_t i = 0; i < sizeof(passing) / sizeof(passing[0]); i++)
                assert_false(replicator_refused_for_good(passing[i]));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_find_by_all_coordinates),
            cmocka_unit_test(test_growth),
            cmocka_unit_test(test_each),
            cmocka_unit_test(test_bounded),
            cmocka_unit_test(test_for_good),
        };
        return cmocka_run_group_tests_name("refused", tests, NULL, NULL);
}
