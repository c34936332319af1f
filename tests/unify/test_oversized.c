/*
 * tests/unify/test_oversized.c: one record must not stop the gateway for
 * good.
 *
 * hostile header: a producer at east writes a record whose aagw.prov is
 *   1,000,000 bytes between ordinary ones.  It is rejected (bad
 *   provenance) and dead-lettered at west without that header
 *   (aagw.dlq.dropped names it and its size; the value is kept); the
 *   flow goes on, a restart goes on, and the record is dead-lettered
 *   once.  Before: the dead-letter copy kept the header, was too large,
 *   and the flow failed closed at every start.
 * big value: a 999,900-byte value fits in the copy to west, but not in
 *   west's unified copy, which adds aagw.in: west's unify stage writes a
 *   stand-in in its place (same key, empty value,
 *   aagw.unify.oversize naming the sizes), counts it (oversized 1) and
 *   goes on; east's stage delivers the record itself; later records flow
 *   at both sites; SIGTERM exits 0 within the stop contract.  Before: the
 *   stage failed on it, the process exited, and every restart failed the
 *   same way.
 *
 * Embedded clusters only: the byte margins of the big value depend on the
 * topic names, which real clusters scope per test run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "unify.h"

#define MOCK_ONLY                                                              \
        "the byte margins depend on the topic names (scoped on real "          \
        "clusters)"

static const char *const sites[] = {"east", "west"};

/* Produce one record to 'topic' at 'alias' with an optional header;
 * waits for the acknowledgement.  Allows records up to 4 MB. */
static void produce1(struct repl *r, const char *alias, const char *topic,
                     const char *key, const void *value, size_t vlen,
                     const char *hname, const void *hval, size_t hlen) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           repl_bs(r, alias), err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "message.max.bytes",
                                           "4000000", err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                      sizeof(err));
        assert_non_null(rk);
        rd_kafka_headers_t *h = rd_kafka_headers_new(1);
        if (hname)
                rd_kafka_header_add(h, hname, -1, hval, (ssize_t)hlen);
        assert_int_equal(
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(repl_topic(r, topic)),
                              RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_KEY(key, strlen(key)),
                              RD_KAFKA_V_VALUE((void *)value, vlen),
                              RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
        assert_int_equal(rd_kafka_flush(rk, 60000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(rk);
}

static void setup_topics(struct repl *r) {
        repl_create_topic(r, NULL, "clicks", 1);
        repl_create_topic(r, "west", "east.clicks", 1);
        repl_create_topic(r, "east", "west.clicks", 1);
}

static void test_hostile_header(void **state) {
        struct repl *r = repl_new(sites, 2);
        struct rrecs dlq;
        char         buf[2048];
        size_t       big = 1000000;
        char        *junk = malloc(big);

        *state = r;
        assert_non_null(junk);
        memset(junk, 'x', big);
        setup_topics(r);
        unify_gw_start(r, "dedup", NULL);
        repl_produce(r, "east", "clicks", "n", 0, 5, 0, NULL, 0);
        produce1(r, "east", "clicks", "k", "hostile-0", 9, "aagw.prov", junk,
                 big);
        repl_produce(r, "east", "clicks", "n", 5, 5, 0, NULL, 0);
        free(junk);

        repl_expect_size(r, "west", "east.clicks", 10, 60000);
        repl_expect_size(r, "west", "aagw.dlq.east", 1, 60000);
        assert_true(repl_gw_running(r));
        repl_read(r, "west", "aagw.dlq.east", &dlq);
        assert_int_equal(dlq.cnt, 1);
        assert_string_equal(dlq.v[0].val, "hostile-0");
        assert_int_equal(rrec_hdr(&dlq.v[0], "aagw.prov", NULL, 0), 0);
        assert_int_equal(rrec_hdr(&dlq.v[0], "aagw.dlq.dropped", buf,
                                  sizeof(buf)),
                         1);
        assert_string_equal(buf, "aagw.prov (1000000 bytes)");
        assert_int_equal(rrec_hdr(&dlq.v[0], "aagw.dlq.reason", buf,
                                  sizeof(buf)),
                         1);
        assert_true(!strncmp(buf, "prov_", 5));
        rrecs_deinit(&dlq);

        /* a restart goes on, and does not dead-letter it again */
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        unify_gw_start(r, "dedup", NULL);
        repl_produce(r, "east", "clicks", "n", 10, 5, 0, NULL, 0);
        repl_expect_size(r, "west", "east.clicks", 15, 60000);
        unify_wait_idle(r, "west", 5, 60000); /* this run's */
        assert_true(repl_gw_running(r));
        assert_int_equal(repl_size(r, "west", "aagw.dlq.east"), 1);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

static void test_big_value(void **state) {
        struct repl *r = repl_new(sites, 2);
        struct rrecs rs;
        struct ustat st;
        char         buf[1024];
        size_t       big = 999900;
        char        *val = malloc(big);
        size_t       stubs = 0;

        *state = r;
        assert_non_null(val);
        memset(val, 'b', big);
        setup_topics(r);
        unify_gw_start(r, "dedup", NULL);
        repl_produce(r, "east", "clicks", "n", 0, 5, 0, NULL, 0);
        produce1(r, "east", "clicks", "big", val, big, NULL, NULL, 0);
        repl_produce(r, "east", "clicks", "n", 5, 5, 0, NULL, 0);
        free(val);

        repl_expect_size(r, "west", "east.clicks", 11, 60000);
        repl_expect_size(r, "east", "clicks.unified", 11, 60000);
        repl_expect_size(r, "west", "clicks.unified", 11, 60000);
        unify_wait_idle(r, "west", 11, 60000);
        assert_true(repl_gw_running(r));
        assert_true(unify_stat(r, "west", &st));
        assert_string_equal(st.state, "running");
        assert_int_equal(st.accepted, 11);
        assert_true(unify_stat(r, "east", &st));
        assert_int_equal(st.accepted, 11);

        /* west's unified topic: the ten records and the stand-in */
        repl_read(r, "west", "clicks.unified", &rs);
        assert_int_equal(rs.cnt, 11);
        for (size_t i = 0; i < rs.cnt; i++) {
                if (rrec_hdr(&rs.v[i], "aagw.unify.oversize", buf,
                             sizeof(buf)) != 1)
                        continue;
                stubs++;
                assert_string_equal(rs.v[i].key, "big");
                assert_string_equal(rs.v[i].val, "");
                assert_non_null(strstr(buf, "value 999900 bytes"));
                assert_int_equal(rrec_hdr(&rs.v[i], "aagw.prov", NULL, 0), 1);
        }
        assert_int_equal(stubs, 1);
        rrecs_deinit(&rs);
        char *metrics = unify_http_get(r, "/metrics");
        assert_non_null(metrics);
        assert_non_null(
            strstr(metrics, "aagw_unify_oversized_total{site=\"west\"} 1\n"));
        assert_non_null(
            strstr(metrics, "aagw_unify_oversized_total{site=\"east\"} 0\n"));
        free(metrics);

        /* later records flow at both sites */
        repl_produce(r, "east", "clicks", "n", 10, 5, 0, NULL, 0);
        repl_expect_size(r, "west", "clicks.unified", 16, 60000);
        repl_expect_size(r, "east", "clicks.unified", 16, 60000);
        int64_t t0   = harness_now_ms();
        int     code = repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS);
        fprintf(stderr, "# SIGTERM: exit %d after %lld ms\n", code,
                (long long)(harness_now_ms() - t0));
        assert_int_equal(code, 0);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_hostile_header, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_big_value, repl_setup,
                                            repl_teardown),
        };
        static const char *const all[] = {"test_hostile_header",
                                          "test_big_value", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("unify-oversized", tests, n, NULL,
                                           NULL)
                 : 0;
}
