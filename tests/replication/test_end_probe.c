/*
 * tests/replication/test_end_probe.c: replicator_log_ends_at() and
 * replicator_settle_end() (replicator/kafka_common.c), which flows and
 * the unify stage use before they trust a target partition's high
 * watermark as the end of what a previous run wrote.
 *
 * On a librdkafka mock cluster in this process (which, like Kafka,
 * answers a fetch past the log end with OFFSET_OUT_OF_RANGE and one at
 * the end with nothing): the probe says yes only for the true end, no
 * for an offset the log goes past (records come, or nothing within the
 * timeout), does not take an earlier call's answer for a later one, and
 * the settle loop moves a stale end to the true one.  A log that holds
 * records above its watermark needs a real broker: test_hidden_end.c in
 * tests/realkafka.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "replicator_int.h"

#define RECS 10

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static rd_kafka_t *consumer(const char *bootstraps, const char *const *kv) {
        char             err[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           bootstraps, err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
        for (size_t i = 0; kv[i]; i += 2)
                assert_int_equal(
                    rd_kafka_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)),
                    RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(rk);
        return rk;
}

static void test_end_probe(void **state) {
        char             err[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        (void)state;

        rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
        rd_kafka_t *mrk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                       sizeof(err));
        assert_non_null(mrk);
        rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(mrk, 1);
        assert_non_null(mc);
        const char *bs = rd_kafka_mock_cluster_bootstraps(mc);
        assert_int_equal(rd_kafka_mock_topic_create(mc, "t", 1, 1), 0);

        conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "bootstrap.servers", bs, NULL, 0);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(p);
        for (int i = 0; i < RECS; i++)
                assert_int_equal(
                    rd_kafka_producev(p, RD_KAFKA_V_TOPIC("t"),
                                      RD_KAFKA_V_PARTITION(0),
                                      RD_KAFKA_V_VALUE("v", 1),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END),
                    0);
        assert_int_equal(rd_kafka_flush(p, 10000), 0);
        rd_kafka_destroy(p);

        const char *kv[REPLICATOR_END_PROBE_KV];
        rd_kafka_t *probe = consumer(bs, replicator_end_probe_props("g", kv));
        static const char *const reader_kv[] = {"group.id", "g", NULL};
        rd_kafka_t *reader = consumer(bs, reader_kv);

        /* The end: refused at once (well within the timeout). */
        int64_t t0 = mono_ms();
        assert_true(replicator_log_ends_at(probe, "t", 0, RECS, 10000));
        assert_true(mono_ms() - t0 < 5000);
        /* Records after it: they come, no. */
        t0 = mono_ms();
        assert_false(replicator_log_ends_at(probe, "t", 0, RECS - 3, 10000));
        assert_true(mono_ms() - t0 < 5000);
        /* One record after it, the fetch lands at the end: nothing comes,
         * no (after the timeout), and the earlier "out of range" for
         * RECS + 1 is not taken for this question's answer. */
        assert_false(replicator_log_ends_at(probe, "t", 0, RECS - 1, 1000));
        assert_true(replicator_log_ends_at(probe, "t", 0, RECS, 10000));

        /* The settle loop: a stale end moves to the true one. */
        int64_t lo = 0, hi = RECS - 4;
        assert_int_equal(replicator_settle_end(reader, probe, "t", 0, &lo, &hi,
                                               20000, NULL, "TEST", "test"),
                         0);
        assert_int_equal(hi, RECS);
        /* A log that goes on past the end offset: no answer to wait
         * for, so 1 once the wait is over. */
        atomic_bool stop = false;
        hi               = RECS - 1;
        assert_int_equal(replicator_settle_end(reader, probe, "t", 0, &lo, &hi,
                                               0, &stop, "TEST", "test"),
                         1);
        stop = true;
        assert_int_equal(replicator_settle_end(reader, probe, "t", 0, &lo, &hi,
                                               20000, &stop, "TEST", "test"),
                         -1);

        rd_kafka_consumer_close(probe);
        rd_kafka_destroy(probe);
        rd_kafka_consumer_close(reader);
        rd_kafka_destroy(reader);
        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(mrk);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_end_probe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
