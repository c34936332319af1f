/*
 * tests/unify/test_start.c: the unify stage checks the first record of an
 * input it assigns at a stored position, so that nothing acknowledged is
 * lost (replicator_start_take() in replicator/kafka_common.c).
 *
 * The stage resumes each input partition at its stored position.  A first
 * record past it can be legitimate (records deleted, a transaction
 * marker) or a consumer that started late (tests/realkafka/README.md,
 * "Settled"); the stage seeks back once and believes the gap only when the
 * second fetch starts at the same later offset.  On the embedded cluster
 * the legitimate gap comes from its retention (about 5 MiB a partition,
 * MOCK-CLUSTER.md): west's clicks/0 gets 10 records, unified, the gateway
 * stops with the stage's position at 10; then 1 KiB records until the
 * partition's log start LO is past 10.  At the restart the stage is
 * assigned at 10 and handed LO first.
 *
 * Asserted: the stage logs that it fetched from 10 again and found the
 * first record still at LO; /metrics counts one seek back
 * (aagw_unify_start_refetches_total); clicks.unified holds the 10 first
 * values and every value from LO on, each once (nothing after LO skipped,
 * nothing decided twice).  Embedded clusters only (their retention).
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

#include "unify.h"

#define FIRST    10
#define BIG      1024 /* value bytes */
#define ROUND    1000 /* records per round of filling */
#define MAX_RECS 20000
#define MOCK_ONLY                                                              \
        "moves a partition's log start by the embedded cluster's retention"

static const char *const sites[] = {"east", "west"};

static const char *const gw_args[] = {"--site", "west", "--topic", "clicks",
                                      NULL};

/* The log start of west's clicks/0. */
static int64_t log_start(struct repl *r) {
        char             err[512];
        int64_t          lo = -1, hi = -1;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           repl_bs(r, "west"), err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(rk);
        assert_int_equal(rd_kafka_query_watermark_offsets(
                             rk, repl_topic(r, "clicks"), 0, &lo, &hi, 10000),
                         0);
        rd_kafka_destroy(rk);
        return lo;
}

/* Records 'from'.. of 'cnt' into west's clicks/0: "v<i>" and BIG bytes. */
static void fill(struct repl *r, int from, int cnt) {
        struct urec *recs = calloc((size_t)cnt, sizeof(*recs));
        char        *vals = malloc((size_t)cnt * (BIG + 16));

        assert_true(recs && vals);
        for (int i = 0; i < cnt; i++) {
                char *v = vals + (size_t)i * (BIG + 16);
                int   n = snprintf(v, 16, "v%d ", from + i);
                memset(v + n, 'x', BIG - (size_t)n);
                v[BIG]  = '\0';
                recs[i] = (struct urec){NULL, v, 0, 0};
        }
        unify_produce(r, "west", "clicks", recs, (size_t)cnt, NULL, NULL);
        free(recs);
        free(vals);
}

static void test_start_past_stored(void **state) {
        struct repl *r = repl_new(sites, 2);
        char         line[256];
        int          total = FIRST;
        int64_t      lo;

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        repl_create_topic(r, "west", "clicks", 1);
        /* Spread over 4 partitions, the output stays within the
         * retention that drops the input's head. */
        repl_create_topic(r, "west", "clicks.unified", 4);
        unify_gw_start(r, "dedup", gw_args);
        fill(r, 0, FIRST);
        repl_expect_size(r, "west", "clicks.unified", FIRST, 60000);
        unify_wait_idle(r, "west", FIRST, 60000);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        while ((lo = log_start(r)) <= FIRST && total < MAX_RECS) {
                fill(r, total, ROUND);
                total += ROUND;
        }
        if (lo <= FIRST)
                fail_msg("clicks/0 at west still starts at %" PRId64
                         " after %d records of %d bytes",
                         lo, total, BIG);

        unify_gw_start(r, "dedup", gw_args);
        int64_t want = FIRST + (total - lo);
        repl_expect_size(r, "west", "clicks.unified", want, 60000);
        unify_wait_idle(r, "west", -1, 60000);
        snprintf(line, sizeof(line),
                 "unify@west: clicks [0]: assigned at offset %d but the "
                 "first record fetched is at %" PRId64
                 ": fetching from %d again",
                 FIRST, lo, FIRST);
        repl_expect_log(r, line, 0);
        snprintf(line, sizeof(line),
                 "unify@west: clicks [0]: fetched from %d again, the first "
                 "record is still at %" PRId64
                 ": the source holds nothing in between",
                 FIRST, lo);
        repl_expect_log(r, line, 0);
        char *metrics = unify_http_get(r, "/metrics");
        assert_non_null(metrics);
        if (!strstr(metrics,
                    "aagw_unify_start_refetches_total{site=\"west\"} 1\n"))
                fail_msg("/metrics does not count one seek back:\n%s",
                         metrics);
        free(metrics);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        struct rrecs rs;
        char        *seen = calloc((size_t)total, 1);
        assert_non_null(seen);
        repl_read(r, "west", "clicks.unified", &rs);
        for (size_t i = 0; i < rs.cnt; i++) {
                int v;
                if (sscanf(rs.v[i].val, "v%d ", &v) != 1 || v < 0 ||
                    v >= total || (v >= FIRST && v < lo))
                        fail_msg("clicks.unified holds %.20s", rs.v[i].val);
                if (seen[v]++)
                        fail_msg("clicks.unified holds v%d twice", v);
        }
        assert_int_equal((int64_t)rs.cnt, want);
        fprintf(stderr,
                "# stage resumed at %d, first record at %" PRId64
                " (retention), %" PRId64 " values unified once each\n",
                FIRST, lo, want);
        rrecs_deinit(&rs);
        free(seen);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_start_past_stored,
                                            repl_setup, repl_teardown),
        };
        static const char *const all[] = {"test_start_past_stored", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("unify-start", tests, n, NULL, NULL)
                 : 0;
}
