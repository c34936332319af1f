/* tests/replication/test_bidir.c: two sites, prefix policy, both
 * directions at once.
 *
 * 10,000 keyed records with headers at EACH site on an 8-partition topic,
 * half produced before the gateway starts and half while it runs.  Every
 * record must appear exactly once in the remote copy at the other site,
 * in the same partition and the same order, with key, value, timestamp
 * and the producer's headers intact, plus fresh provenance (origin, path
 * "east>west", src = the source partition and offset, derived id, hlc).
 * kcat is the independent reader of both sides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl.h"

#define PARTS 8
#define PER_SITE 10000
#define BEFORE 5000
#define BATCH 1000
#define KEYS 1000
#define REPL_TIMEOUT_MS 90000

static const char *const sites[] = {"east", "west"};


/* Batch 0 and most others go where their keys hash to; batch 2 is
 * produced to one explicit partition (not where its keys hash) and
 * batch 4 has no keys: the copy must keep the source partition, not
 * re-partition by key. */
static void produce_batch(struct repl *r, const char *site, int from, int cnt,
                          int batch_no) {
        char        trace[64];
        const char *hdrs[] = {trace, "app=clickstream", NULL};

        snprintf(trace, sizeof(trace), "trace=%s-b%d", site, batch_no);
        repl_produce(r, site, "clicks", site, from, cnt,
                     batch_no == 4 ? 0 : KEYS, hdrs, batch_no == 2 ? 5 : -1);
}

static void bidirectional(void **state, const char *const *extra,
                          const char *log_says) {
        struct repl *r = repl_new(sites, 2);
        struct rrecs east, west, east_copy, west_copy;
        bool         used[PARTS] = {false};
        int          nused       = 0;

        *state = r;
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_create_topic(r, "east", "west.clicks", PARTS);

        /* Half before the gateway runs... */
        for (size_t s = 0; s < 2; s++)
                produce_batch(r, sites[s], 0, BEFORE, 0);
        repl_gw_start(r, extra);
        /* ...and half while it replicates: wait until it has started. */
        repl_expect_size(r, "west", "east.clicks", 1, REPL_TIMEOUT_MS);
        for (int b = 0; b < (PER_SITE - BEFORE) / BATCH; b++)
                for (size_t s = 0; s < 2; s++)
                        produce_batch(r, sites[s], BEFORE + b * BATCH, BATCH,
                                      b + 1);
        assert_true(repl_gw_running(r));

        repl_expect_size(r, "west", "east.clicks", PER_SITE, REPL_TIMEOUT_MS);
        repl_expect_size(r, "east", "west.clicks", PER_SITE, REPL_TIMEOUT_MS);
        /* A clean stop ends replication: nothing can land after the reads
         * below. */
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        repl_read(r, "east", "clicks", &east);
        repl_read(r, "west", "clicks", &west);
        repl_read(r, "west", "east.clicks", &east_copy);
        repl_read(r, "east", "west.clicks", &west_copy);
        assert_int_equal(east.cnt, PER_SITE);
        assert_int_equal(west.cnt, PER_SITE);
        assert_int_equal(rrecs_count_tag(&east, "east"), PER_SITE);
        assert_int_equal(rrecs_count_tag(&west, "west"), PER_SITE);
        /* Keys did spread the records: the check covers many partitions. */
        for (size_t i = 0; i < east.cnt; i++)
                if (!used[east.v[i].p]) {
                        used[east.v[i].p] = true;
                        nused++;
                }
        assert_int_equal(nused, PARTS);

        repl_check_copy(&east, "clicks", "east", &east_copy, "east>west");
        repl_check_copy(&west, "clicks", "west", &west_copy, "west>east");
        /* Nothing else in the copies (check_copy counts by origin). */
        assert_int_equal(east_copy.cnt, PER_SITE);
        assert_int_equal(west_copy.cnt, PER_SITE);
        /* The producers' local topics got nothing back. */
        assert_int_equal(repl_size(r, "east", "clicks"), PER_SITE);
        assert_int_equal(repl_size(r, "west", "clicks"), PER_SITE);
        {
                const char *at_east[] = {"clicks", "west.clicks"};
                const char *at_west[] = {"clicks", "east.clicks"};

                repl_expect_topics(r, "east", at_east, 2);
                repl_expect_topics(r, "west", at_west, 2);
        }

        if (log_says)
                assert_true(repl_log_has(r, log_says));

        rrecs_deinit(&east);
        rrecs_deinit(&west);
        rrecs_deinit(&east_copy);
        rrecs_deinit(&west_copy);
}

static void test_bidirectional(void **state) {
        bidirectional(state, NULL, NULL);
}

/* Each flow reads its partitions through three source consumers: every
 * partition is read by one of them, in order, once. */
static void test_bidirectional_connections(void **state) {
        static const char *const extra[] = {
            "--set", "replication.fetch_connections=3", NULL};

        bidirectional(state, extra, "over 3 connections");
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_bidirectional, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_bidirectional_connections,
                                            repl_setup, repl_teardown),
        };

        return cmocka_run_group_tests_name("replication-bidir", tests, NULL,
                                           NULL);
}
