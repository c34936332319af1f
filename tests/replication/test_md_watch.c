/*
 * tests/replication/test_md_watch.c: the metadata watch
 * (replicator/md_watch.c), which asks a cluster for its metadata on a
 * thread of its own so that a flow never waits a round trip for it, and
 * aagw_kafka_round_trip_us(), which sizes a flow's fetch window.
 *
 * On a librdkafka mock cluster in this process, whose request round trip
 * the mock can stretch (rd_kafka_mock_broker_set_rtt()):
 *  - the newest answer, once, with a topic created meanwhile in it; an
 *    answer not taken is replaced by a newer one (after several
 *    intervals, one take and then none);
 *  - a cluster gone: the error comes through the take, nothing else;
 *  - the destroy ends a request in progress within its slice, and the
 *    caller is never held by a slow cluster while it takes;
 *  - the round trip measured against a broker made 60 ms slow is at
 *    least 60 ms and not much more; against the mock as it is, a few ms.
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

#define INTERVAL_MS 200

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct fx {
        rd_kafka_t              *mrk, *rk;
        rd_kafka_mock_cluster_t *mc;
};

static int setup(void **state) {
        static struct fx f;
        char             err[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        memset(&f, 0, sizeof(f));
        rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
        f.mrk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(f.mrk);
        f.mc = rd_kafka_mock_cluster_new(f.mrk, 1);
        assert_non_null(f.mc);
        conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "bootstrap.servers",
                          rd_kafka_mock_cluster_bootstraps(f.mc), NULL, 0);
        rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
        rd_kafka_conf_set(conf, "enable.metrics.push", "false", NULL, 0);
        f.rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(f.rk);
        *state = &f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        if (f->rk)
                rd_kafka_destroy(f->rk);
        if (f->mc)
                rd_kafka_mock_cluster_destroy(f->mc);
        if (f->mrk)
                rd_kafka_destroy(f->mrk);
        return 0;
}

static bool has_topic(const struct rd_kafka_metadata *md, const char *t) {
        for (int i = 0; md && i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, t) && !md->topics[i].err)
                        return true;
        return false;
}

/* Take until an answer comes or 'ms' pass. */
static bool take_within(aagw_md_watch_t *w, int ms, rd_kafka_resp_err_t *err,
                        const struct rd_kafka_metadata **md) {
        int64_t end = mono_ms() + ms;
        do {
                int64_t t0  = mono_ms();
                bool    got = aagw_md_watch_take(w, err, md);
                /* A take never waits for the cluster. */
                assert_true(mono_ms() - t0 < 50);
                if (got)
                        return true;
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
        } while (mono_ms() < end);
        return false;
}

static void test_take(void **state) {
        struct fx                      *f    = *state;
        const struct rd_kafka_metadata *md   = NULL;
        rd_kafka_resp_err_t             err  = RD_KAFKA_RESP_ERR_NO_ERROR;
        atomic_bool                     stop = false;

        assert_int_equal(rd_kafka_mock_topic_create(f->mc, "first", 2, 1), 0);
        aagw_md_watch_t *w = aagw_md_watch_new(f->rk, INTERVAL_MS, &stop);
        assert_non_null(w);
        assert_true(take_within(w, 5000, &err, &md));
        assert_int_equal(err, RD_KAFKA_RESP_ERR_NO_ERROR);
        assert_true(has_topic(md, "first"));
        assert_false(has_topic(md, "second"));
        rd_kafka_metadata_destroy(md);

        /* A topic made meanwhile is in a later answer; answers not taken
         * meanwhile were replaced, not queued (one take, then none). */
        assert_int_equal(rd_kafka_mock_topic_create(f->mc, "second", 1, 1), 0);
        struct timespec ts = {0, 3 * INTERVAL_MS * 1000000L};
        nanosleep(&ts, NULL);
        assert_true(take_within(w, 5000, &err, &md));
        int64_t taken = mono_ms();
        assert_int_equal(err, RD_KAFKA_RESP_ERR_NO_ERROR);
        assert_true(has_topic(md, "second"));
        rd_kafka_metadata_destroy(md);
        /* Nothing more unless a new interval's answer came meanwhile (a
         * slow machine, ASan). */
        if (aagw_md_watch_take(w, &err, &md)) {
                assert_true(mono_ms() - taken >= INTERVAL_MS / 2);
                if (md)
                        rd_kafka_metadata_destroy(md);
        }

        /* The cluster gone: the error comes through, with no metadata. */
        rd_kafka_mock_cluster_destroy(f->mc);
        f->mc          = NULL;
        int64_t end    = mono_ms() + 20000;
        bool    failed = false;
        while (!failed && mono_ms() < end)
                if (take_within(w, 1000, &err, &md)) {
                        if (err) {
                                assert_null(md);
                                failed = true;
                        } else {
                                /* from before the cluster went */
                                rd_kafka_metadata_destroy(md);
                        }
                }
        assert_true(failed);

        /* Destroyed while asking a cluster that does not answer: back
         * within the request's slice (0.5-2 s), not its 5 s timeout. */
        int64_t t0 = mono_ms();
        aagw_md_watch_destroy(w);
        assert_true(mono_ms() - t0 < 2500);
}

static void test_round_trip(void **state) {
        struct fx *f = *state;
        int64_t    near, far;

        near = aagw_kafka_round_trip_us(f->rk, 5000, NULL);
        assert_true(near > 0 && near < 20000);
        /* The mock delays every answer of broker 1 by 60 ms. */
        assert_int_equal(rd_kafka_mock_broker_set_rtt(f->mc, 1, 60), 0);
        far = aagw_kafka_round_trip_us(f->rk, 5000, NULL);
        print_message("# round trip %.2f ms, then %.2f ms\n",
                      (double)near / 1000, (double)far / 1000);
        assert_true(far >= 60000);
        assert_true(far < 60000 + 40000);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_take, setup, teardown),
            cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        };
        return cmocka_run_group_tests_name("md-watch", tests, NULL, NULL);
}
