/* tests/replication/test_lifecycle.c: the gateway's life around the data.
 *
 *  - A topic created while the gateway runs (source topic at east, its
 *    remote copy at west) replicates within 10 s of its creation.
 *  - SIGTERM in the middle of a backlog: exit 0 within 10 s, every
 *    in-flight record acknowledged and its position stored, so that a
 *    restart reads exactly the records it had not copied yet (counted in
 *    the gateway's own statistics), and the copies end up exact.
 *  - Per-flow topic lists (replication.per_flow): east->west copies only
 *    its list (orders), west->east only its own (clicks), though both
 *    topics exist with records at both sites; each flow read only its
 *    own topic's records (its statistics) and the other topic's remote
 *    copy stays empty. */
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

#include "repl.h"

#define PARTS 8
#define KEYS 1000
#define REPL_TIMEOUT_MS 90000
#define NEW_TOPIC_MS 10000

static const char *const sites[] = {"east", "west"};


static void create_pair(struct repl *r, const char *topic, int parts) {
        char remote[128];

        repl_create_topic(r, NULL, topic, parts);
        snprintf(remote, sizeof(remote), "east.%s", topic);
        repl_create_topic(r, "west", remote, parts);
        snprintf(remote, sizeof(remote), "west.%s", topic);
        repl_create_topic(r, "east", remote, parts);
}

/* ------------------------------ NEW TOPIC ------------------------------- */

static void test_topic_created_while_running(void **state) {
        struct repl *r = repl_new(sites, 2);
        struct rrecs src, copy;
        int64_t      t0, took;

        *state = r;
        create_pair(r, "clicks", PARTS);
        repl_produce(r, "east", "clicks", "east", 0, 1000, KEYS, NULL, -1);
        repl_gw_start(r, NULL);
        /* Running and replicating before the new topic exists. */
        repl_expect_size(r, "west", "east.clicks", 1000, REPL_TIMEOUT_MS);

        /* The new topic at east and its remote copy at west; its records
         * are there from the start. */
        t0 = harness_now_ms();
        repl_create_topic(r, "east", "orders", 6);
        repl_create_topic(r, "west", "east.orders", 6);
        repl_produce(r, "east", "orders", "order", 0, 600, 100, NULL, -1);
        if (!repl_wait_size(r, "west", "east.orders", 600, NEW_TOPIC_MS)) {
                repl_dump_log(r, 40);
                fail_msg("east.orders at west holds %" PRId64
                         " of 600 records %d ms after orders was created",
                         repl_size(r, "west", "east.orders"), NEW_TOPIC_MS);
        }
        took = harness_now_ms() - t0;
        fprintf(stderr, "# orders replicated %" PRId64 " ms after creation\n",
                took);
        /* The old topic kept flowing through the rebalance. */
        repl_produce(r, "east", "clicks", "east", 1000, 1000, KEYS, NULL, -1);
        repl_expect_size(r, "west", "east.clicks", 2000, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        repl_read(r, "east", "orders", &src);
        repl_read(r, "west", "east.orders", &copy);
        assert_int_equal(src.cnt, 600);
        repl_check_copy(&src, "orders", "east", &copy, "east>west");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
        repl_read(r, "east", "clicks", &src);
        repl_read(r, "west", "east.clicks", &copy);
        repl_check_copy(&src, "clicks", "east", &copy, "east>west");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
        /* And nothing went the wrong way. */
        assert_false(repl_topic_listed(r, "east", "east.orders"));
        assert_false(repl_topic_listed(r, "west", "orders"));
}

/* ------------------------------- SIGTERM -------------------------------- */

/* "in N out M" of flow 'flow' in the last STATS line of the log, which
 * the gateway writes as it stops. */
static void last_stats(struct repl *r, const char *flow, uint64_t *in,
                       uint64_t *out) {
        char       *text = repl_log_text(r), needle[128];
        const char *p = text, *hit = NULL;

        snprintf(needle, sizeof(needle), "[STATS] %s ", flow);
        while ((p = strstr(p, needle)))
                hit = p++;
        if (!hit) {
                free(text);
                fail_msg("no statistics of %s in %s", flow, r->log);
        }
        hit = strstr(hit, " in ");
        assert_non_null(hit);
        assert_int_equal(sscanf(hit, " in %" SCNu64 " out %" SCNu64, in, out),
                         2);
        free(text);
}

static int64_t stop_timed(struct repl *r) {
        int64_t t0 = harness_now_ms();

        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        return harness_now_ms() - t0;
}

static void test_sigterm_and_restart(void **state) {
        const int    first[2] = {30000, 3000}; /* east, west */
        const int    more     = 1000;
        struct repl *r        = repl_new(sites, 2);
        struct rrecs src, copy;
        int64_t      copied[2], took;
        char        *text;

        *state = r;
        create_pair(r, "clicks", PARTS);
        repl_produce(r, "east", "clicks", "east", 0, first[0], KEYS, NULL, -1);
        repl_produce(r, "west", "clicks", "west", 0, first[1], KEYS, NULL, -1);
        repl_gw_start(r, NULL);
        /* Stop in the middle of the backlog, records in flight. */
        repl_expect_size(r, "west", "east.clicks", 2000, REPL_TIMEOUT_MS);
        took = stop_timed(r);
        fprintf(stderr, "# SIGTERM mid-backlog: exit 0 after %" PRId64 " ms\n",
                took);
        copied[0] = repl_size(r, "west", "east.clicks");
        copied[1] = repl_size(r, "east", "west.clicks");
        fprintf(stderr,
                "# copied at the stop: %" PRId64 " of %d, %" PRId64 " of %d\n",
                copied[0], first[0], copied[1], first[1]);
        assert_true(copied[0] >= 2000 && copied[0] <= first[0]);

        /* More while it is down, then the restart. */
        repl_produce(r, "east", "clicks", "east", first[0], more, KEYS, NULL,
                     -1);
        repl_produce(r, "west", "clicks", "west", first[1], more, KEYS, NULL,
                     -1);
        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", first[0] + more,
                         REPL_TIMEOUT_MS);
        repl_expect_size(r, "east", "west.clicks", first[1] + more,
                         REPL_TIMEOUT_MS);
        took = stop_timed(r);
        fprintf(stderr, "# second SIGTERM: exit 0 after %" PRId64 " ms\n",
                took);

        /* The restart read only what was new to it: the stored positions
         * were exact, no reconciliation had to move them. */
        for (int s = 0; s < 2; s++) {
                uint64_t in, out;
                char     flow[32];

                snprintf(flow, sizeof(flow), "%s->%s", sites[s], sites[1 - s]);
                last_stats(r, flow, &in, &out);
                assert_int_equal(in, (uint64_t)(first[s] + more - copied[s]));
                assert_int_equal(out, in);
        }
        text = repl_log_text(r);
        assert_null(strstr(text, "target holds copies up to"));
        free(text);

        for (int s = 0; s < 2; s++) {
                char remote[64], path[64];

                snprintf(remote, sizeof(remote), "%s.clicks", sites[s]);
                snprintf(path, sizeof(path), "%s>%s", sites[s], sites[1 - s]);
                repl_read(r, sites[s], "clicks", &src);
                repl_read(r, sites[1 - s], remote, &copy);
                assert_int_equal(src.cnt, first[s] + more);
                repl_check_copy(&src, "clicks", sites[s], &copy, path);
                rrecs_deinit(&src);
                rrecs_deinit(&copy);
        }
}

/* ---------------------------- PER-FLOW TOPICS --------------------------- */

static void test_per_flow_topics(void **state) {
        struct repl *r = repl_new(sites, 2);
        char         ew[300], we[300];
        struct rrecs src, copy;

        *state = r;
        create_pair(r, "orders", 4);
        create_pair(r, "clicks", 4);
        for (int s = 0; s < 2; s++) {
                repl_produce(r, sites[s], "orders", sites[s], 0, 200, KEYS,
                             NULL, -1);
                repl_produce(r, sites[s], "clicks", sites[s], 0, 300, KEYS,
                             NULL, -1);
        }
        snprintf(ew, sizeof(ew), "replication.per_flow.east->west.topics=%s",
                 repl_topic(r, "orders"));
        snprintf(we, sizeof(we), "replication.per_flow.west->east.topics=%s",
                 repl_topic(r, "clicks"));
        repl_gw_start(r, (const char *const[]){"--set", ew, "--set", we,
                                               NULL});
        repl_expect_size(r, "west", "east.orders", 200, REPL_TIMEOUT_MS);
        repl_expect_size(r, "east", "west.clicks", 300, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        /* Each flow consumed its own topic only. */
        for (int s = 0; s < 2; s++) {
                uint64_t in, out;
                char     flow[32];
                snprintf(flow, sizeof(flow), "%s->%s", sites[s], sites[1 - s]);
                last_stats(r, flow, &in, &out);
                assert_int_equal(in, s == 0 ? 200 : 300);
                assert_int_equal(out, in);
        }
        assert_int_equal(repl_size(r, "west", "east.clicks"), 0);
        assert_int_equal(repl_size(r, "east", "west.orders"), 0);
        repl_read(r, "east", "orders", &src);
        repl_read(r, "west", "east.orders", &copy);
        repl_check_copy(&src, "orders", "east", &copy, "east>west");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
        repl_read(r, "west", "clicks", &src);
        repl_read(r, "east", "west.clicks", &copy);
        repl_check_copy(&src, "clicks", "west", &copy, "west>east");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_topic_created_while_running, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_sigterm_and_restart, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_per_flow_topics, repl_setup,
                                            repl_teardown),
        };

        return cmocka_run_group_tests_name("replication-lifecycle", tests, NULL,
                                           NULL);
}
