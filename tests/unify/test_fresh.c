/*
 * tests/unify/test_fresh.c: the unify stage reads an input it discovered
 * before the input's leaders were elected.
 *
 * A flow creates the copy of a remote topic (west.T at east) moments
 * before the stage at that site lists it; on a loaded real cluster the
 * stage saw the topic with no leader yet, assigned it, and librdkafka
 * 2.0 then did not fetch it for minutes, with no watermark for the stall
 * detection to see: the stage read its other input only.  The stage now
 * assigns an input once every partition of it has a leader.  Here the
 * input east.clicks at west has its leader taken away
 * (rd_kafka_mock_partition_set_leader(..., -1)) before the gateway
 * starts, and given back once the stage listed it.
 *
 * Asserted: clicks.unified first holds west's 10 records (the stage
 * runs) while /status counts 1 input assigned (clicks, not the leaderless
 * east.clicks); after the leader is back, east.clicks' 10 as well within
 * 20 s, 2 inputs assigned, each value once.  (On the embedded cluster
 * librdkafka recovers a leaderless assigned partition by itself: the
 * minutes-long stall was seen on real Kafka only, and the input count
 * is what fails without the change.)  Embedded clusters only (leaders set by hand).
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

#define N 10
#define MOCK_ONLY                                                              \
        "takes a partition's leader away (rd_kafka_mock_partition_set_"        \
        "leader); a shared real cluster serves other tests"

static const char *const sites[] = {"east", "west"};

static const char *const gw_args[] = {"--site", "west", "--topic", "clicks",
                                      NULL};

static void test_leaderless_input(void **state) {
        struct repl *r = repl_new(sites, 2);

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        repl_create_topic(r, "west", "clicks", 1);
        repl_create_topic(r, "west", "east.clicks", 1);
        repl_produce(r, "west", "clicks", "w", 0, N, 0, NULL, 0);
        repl_produce(r, "west", "east.clicks", "e", 0, N, 0, NULL, 0);
        rd_kafka_mock_cluster_t *mc =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), "west");
        assert_non_null(mc);
        assert_int_equal(
            rd_kafka_mock_partition_set_leader(mc, "east.clicks", 0, -1), 0);

        unify_gw_start(r, "dedup", gw_args);
        repl_expect_log(r, "unify@west: east.clicks -> clicks.unified",
                        30000);
        repl_expect_size(r, "west", "clicks.unified", N, 60000);
        struct ustat st;
        assert_true(unify_stat(r, "west", &st));
        if (st.inputs != 1) {
                repl_dump_log(r, 30);
                fail_msg("the stage assigned %" PRId64 " inputs while "
                         "east.clicks had no leader, want 1 (clicks)",
                         st.inputs);
        }
        assert_int_equal(
            rd_kafka_mock_partition_set_leader(mc, "east.clicks", 0, 1), 0);
        repl_expect_size(r, "west", "clicks.unified", 2 * N, 20000);
        assert_true(unify_stat(r, "west", &st));
        assert_int_equal(st.inputs, 2);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        struct rrecs rs;
        int          seen[2][N] = {{0}};
        repl_read(r, "west", "clicks.unified", &rs);
        for (size_t i = 0; i < rs.cnt; i++) {
                char tag;
                int  v;
                if (sscanf(rs.v[i].val, "%c-%d", &tag, &v) != 2 ||
                    (tag != 'w' && tag != 'e') || v < 0 || v >= N)
                        fail_msg("clicks.unified holds %s", rs.v[i].val);
                if (seen[tag == 'e'][v]++)
                        fail_msg("clicks.unified holds %s twice",
                                 rs.v[i].val);
        }
        assert_int_equal(rs.cnt, 2 * N);
        fprintf(stderr, "# %d records unified, %d from an input that had "
                        "no leader when the stage listed it\n",
                2 * N, N);
        rrecs_deinit(&rs);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_leaderless_input, repl_setup,
                                            repl_teardown),
        };
        static const char *const all[] = {"test_leaderless_input", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("unify-fresh", tests, n, NULL, NULL)
                 : 0;
}
