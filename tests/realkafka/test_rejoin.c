/*
 * tests/realkafka/test_rejoin.c: a gateway killed with SIGKILL and
 * started again copies again at once, with the default settings, and a second process with its identity is found out.
 *
 * The flows assign themselves their partitions: nothing waits for a
 * consumer group.  A flow whose partitions came from a group (aagw before
 * this change) waited until the killed member's session expired: here the
 * session is 30 s, so a restart that copies within REJOIN_MS (10 s) can
 * only have read at once.  Static membership (KIP-345) also rejoined at
 * once, but librdkafka 2.0 (no KIP-814) handed the restarted member its
 * previous assignment: a topic added while the process was down was not
 * read.  So the last restart also widens the topic list to a topic that
 * was created, and filled, while aagw was down: it must be copied within
 * REJOIN_MS too.
 *
 * Two single-broker clusters; aagw replicates east -> west (--site west).
 * Each of KILLS rounds: RECS records produced at east, copied; aagw
 * SIGKILLed; RECS more produced; aagw started again; west's east.clicks
 * (and in the last round east.views) must hold them all within REJOIN_MS
 * of the start.  Then a second aagw on the same state dir is refused (the
 * state dir lock) and the first keeps copying; a third with the same
 * identity on another state dir fences the first's identity lease (a
 * static member, group.instance.id "aagw.<id>.<source>-<target>@<site>",
 * of a group that reads nothing).  A fenced flow stops copying and takes
 * the id back once (its own rejoin after a stall fences it too:
 * test_self_fence.c), which fences the third, and so on; fenced again
 * within 60 s of its restart, a flow fails.  So one of the two exits 1
 * naming group.instance.id, and the other copies on.  Counts are the
 * copies' high watermarks at west, exact after the survivor's clean stop
 * (a duplicate would raise them).
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

#define PARTS     4
#define VPARTS    2 /* of the topic added at the last restart */
#define RECS      200
#define KILLS     2
#define REJOIN_MS 10000

static void produce(struct rk *r, int n) {
        rk_produce(r, "east", "clicks", PARTS, "v", n);
}

/* Either of the two processes with one identity has exited. */
struct either {
        harness_proc_t *p[2];
        int             gone; /* index, -1 */
        int             rc;
};

static bool one_exited(void *arg) {
        struct either *e = arg;
        for (int i = 0; i < 2; i++)
                if (harness_proc_wait(e->p[i], 0, &e->rc) == AAGW_OK) {
                        e->gone = i;
                        return true;
                }
        return false;
}

/* With the topic list of the first rounds, and of the last one. */
static const char *const gw_args[] = {
    "--site", "west", "--topic", "clicks",
    /* A session long enough that waiting it out cannot pass for a
     * rejoin (rk_gw_start() sets 6 s; a later --set wins). */
    "--set", "clusters.east.properties.consumer.session.timeout.ms=30000",
    NULL};
static const char *const gw_args_views[] = {
    "--site", "west", "--topic", "clicks|views",
    "--set", "clusters.east.properties.consumer.session.timeout.ms=30000",
    NULL};

static void test_rejoin(void **state) {
        struct rk *r = rk_new("rk-rejoin");
        int64_t    want = 0, want_views = 0;
        int64_t    took[KILLS];

        *state = r;
        rk_cluster_start(r, "east", 1);
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "east", "clicks", PARTS, 1, 0);
        rk_create_topic(r, "west", "east.clicks", PARTS, 1, 0);
        rk_gw_start(r, gw_args);
        for (int k = 0; k < KILLS; k++) {
                produce(r, RECS);
                want += RECS;
                rk_expect_size(r, "west", "east.clicks", want, 60000);
                rk_gw_stop(r, SIGKILL, 10000);
                produce(r, RECS);
                want += RECS;
                bool last = k == KILLS - 1;
                if (last) {
                        /* A new topic while aagw is down, and a restart
                         * whose topic list takes it in. */
                        rk_create_topic(r, "east", "views", VPARTS, 1, 0);
                        rk_produce(r, "east", "views", VPARTS, "w", RECS);
                        want_views = RECS;
                }
                int64_t t0 = harness_now_ms();
                rk_gw_start(r, last ? gw_args_views : gw_args);
                bool ok = rk_wait_size(r, "west", "east.clicks", want,
                                       REJOIN_MS);
                if (ok && last)
                        ok = rk_wait_size(r, "west", "east.views", want_views,
                                          (int)(REJOIN_MS - (harness_now_ms() -
                                                             t0)));
                took[k] = harness_now_ms() - t0;
                print_message("# restart %d: %" PRId64 " of %" PRId64
                              " records copied%s %.1f s after the start\n",
                              k + 1, rk_size(r, "west", "east.clicks") +
                                         (last ? rk_size(r, "west",
                                                         "east.views")
                                               : 0),
                              want + want_views,
                              last ? " (with the new topic views)" : "",
                              (double)took[k] / 1000.0);
                if (!ok) {
                        rk_gw_dump_log(r, 40);
                        fail_msg("restart %d: not caught up within %d ms",
                                 k + 1, REJOIN_MS);
                }
        }

        /* A second process on the same state dir: refused by the lock,
         * before it could join the group with the same member id. */
        const char *argv[96] = {harness_aagw_bin(), "run"};
        size_t      a        = 2;
        a += rk_gw_cluster_args(r, argv + a, 80);
        const char *const tail[] = {"--site", "west", "--topic", "clicks|views",
                                    "--state-dir", r->state, NULL};
        for (size_t i = 0; tail[i]; i++)
                argv[a++] = tail[i];
        argv[a]         = NULL;
        size_t state_at = a - 1; /* the --state-dir value */
        char *log2      = rk_path(r, "second.log");
        harness_proc_t *p2 = harness_proc_spawn(argv, NULL, log2, r->errstr,
                                                sizeof(r->errstr));
        assert_non_null(p2);
        int rc = -1;
        assert_int_equal(harness_proc_wait(p2, 30000, &rc), AAGW_OK);
        harness_proc_destroy(p2);
        assert_int_not_equal(rc, 0);
        char *text = harness_read_file(log2, NULL);
        assert_non_null(text);
        if (!strstr(text, "in use by another aagw process"))
                fail_msg("the second process did not say the state dir is "
                         "locked: %s",
                         text);
        free(text);
        free(log2);
        produce(r, RECS);
        want += RECS;
        rk_expect_size(r, "west", "east.clicks", want, 30000);
        rk_gw_expect_running(r);

        /* The same identity on another state dir, which the lock cannot
         * see: it takes the static member id over.  The two fence each
         * other until one is fenced again within 60 s of its restart: its
         * flow fails, naming the cause, instead of both copying. */
        char *state2 = rk_path(r, "state2");
        char *log3   = rk_path(r, "third.log");
        argv[state_at] = state2;
        harness_proc_t *p3 = harness_proc_spawn(argv, NULL, log3, r->errstr,
                                                sizeof(r->errstr));
        assert_non_null(p3);
        int64_t       t0 = harness_now_ms();
        struct either e  = {{r->gw, p3}, -1, -1};
        /* Usually seconds.  Up to the group's rebalance timeout (the
         * lease's max.poll.interval.ms, librdkafka's 300 s) when a
         * restarted lease's join waits for a rebalance: a CI run had
         * neither process fenced after 120 s. */
        if (!harness_wait_until(one_exited, &e, 330000)) {
                static const char *const lease[] = {"lease", "fenced",
                                                    "E [", NULL};
                rk_grep_file(r->gw_log, NULL, lease);
                rk_grep_file(log3, NULL, lease);
                fail_msg("two processes with one group.instance.id both "
                         "kept running for 330 s");
        }
        const char *gone_log = e.gone == 0 ? r->gw_log : log3;
        print_message("# the %s process exited %.1f s after the third "
                      "started\n",
                      e.gone == 0 ? "first" : "third",
                      (double)(harness_now_ms() - t0) / 1000.0);
        assert_int_not_equal(e.rc, 0);
        text = harness_read_file(gone_log, NULL);
        assert_non_null(text);
        if (!strstr(text, "with this process's group.instance.id") ||
            !strstr(text, "fenced again"))
                fail_msg("the fenced process did not say why:\n%s", text);
        free(text);
        harness_proc_destroy(e.p[e.gone]);
        if (e.gone == 0)
                r->gw = NULL;
        else
                p3 = NULL;
        /* the other copies on */
        produce(r, RECS);
        want += RECS;
        rk_expect_size(r, "west", "east.clicks", want, 60000);
        if (p3) {
                harness_proc_signal(p3, SIGTERM);
                rc = -1;
                assert_int_equal(harness_proc_wait(p3, 30000, &rc), AAGW_OK);
                assert_int_equal(harness_exit_code(rc), 0);
                harness_proc_destroy(p3);
        } else {
                assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);
        }
        /* Nothing copied twice. */
        assert_int_equal(rk_size(r, "west", "east.clicks"), want);
        assert_int_equal(rk_size(r, "west", "east.views"), want_views);
        free(state2);
        free(log3);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_rejoin, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
