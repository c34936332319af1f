/*
 * tests/unify/test_crash.c: exactly once into the unified topics under
 * kill -9.
 *
 * A 200,000-record two-site run (east writes events 0..99999, west
 * 50000..149999) is produced in rounds while the gateway is SIGKILLed at
 * a random moment of each round, 10 times; then a last gateway runs to
 * the end.  Each site's clicks.unified must hold each of the 150,000 ids
 * exactly once, and the prefix-mode copies each source record exactly
 * once.  The figures of the last run show what the start-up scan folded
 * in.
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
#include <time.h>

#include "unify.h"

#define PER_SITE 100000
#define OVERLAP  50000
#define UNIQUE   (2 * PER_SITE - OVERLAP)
#define KILLS    10
#define ROUND    (PER_SITE / KILLS)

static void produce_round(struct repl *r, const char *site, int from,
                          int cnt) {
        struct urec *recs = calloc((size_t)cnt, sizeof(*recs));
        char(*kv)[2][96]  = calloc((size_t)cnt, sizeof(*kv));

        assert_true(recs && kv);
        for (int i = 0; i < cnt; i++) {
                int n = from + i;
                snprintf(kv[i][0], sizeof(kv[i][0]), "u%d", n % 1009);
                snprintf(kv[i][1], sizeof(kv[i][1]),
                         "{\"event_id\":\"e%d\",\"site\":\"%s\"}", n, site);
                recs[i] = (struct urec){kv[i][0], kv[i][1], 0, -1};
        }
        unify_produce(r, site, "clicks", recs, (size_t)cnt, NULL, NULL);
        free(recs);
        free(kv);
}

static bool past(void *arg) {
        return harness_now_ms() >= *(int64_t *)arg;
}

/* Both stages run and have taken in records of this round. */
struct busy_arg {
        struct repl *r;
        int64_t      min;
};

static bool busy(void *arg) {
        struct busy_arg *ba = arg;
        struct ustat     e, w;
        return unify_stat(ba->r, "east", &e) && unify_stat(ba->r, "west", &w) &&
               e.records_in > 0 && w.records_in > 0;
}

static void check_site(struct repl *r, const char *site) {
        struct rrecs rs;
        char        *seen = calloc(UNIQUE, 1);
        char         id[64];
        size_t       dups = 0, missing = 0;

        assert_non_null(seen);
        repl_read(r, site, "clicks.unified", &rs);
        for (size_t i = 0; i < rs.cnt; i++) {
                assert_true(unify_json_field(rs.v[i].val, "event_id", id,
                                             sizeof(id)));
                int n = atoi(id + 1);
                assert_true(n >= 0 && n < UNIQUE);
                if (seen[n]++)
                        dups++;
        }
        for (int n = 0; n < UNIQUE; n++)
                missing += !seen[n];
        if (dups || missing || rs.cnt != UNIQUE)
                fail_msg("%s: clicks.unified holds %zu records: %zu repeated, "
                         "%zu ids missing (want each of %d once)",
                         site, rs.cnt, dups, missing, UNIQUE);
        rrecs_deinit(&rs);
        free(seen);
}

static void test_kill9(void **state) {
        static const char *const sites[] = {"east", "west"};
        const char *const        extra[] = {"--id", "json:event_id", NULL};
        struct repl             *r = repl_new(sites, 2);
        unsigned                 seed = (unsigned)time(NULL);
        struct ustat             st;

        *state = r;
        print_message("# seed %u\n", seed);
        repl_create_topic(r, NULL, "clicks", 4);
        repl_create_topic(r, "west", "east.clicks", 4);
        repl_create_topic(r, "east", "west.clicks", 4);

        for (int k = 0; k < KILLS; k++) {
                unify_gw_start(r, "dedup", extra);
                produce_round(r, "east", k * ROUND, ROUND);
                produce_round(r, "west", OVERLAP + k * ROUND, ROUND);
                /* The fault: once both stages are at work on this round,
                 * a random moment later (0-1.5 s: the fault, not a wait
                 * for a condition). */
                struct busy_arg ba = {r, k * ROUND};
                if (!harness_wait_until(busy, &ba, 60000)) {
                        repl_dump_log(r, 60);
                        fail_msg("round %d: the unify stages took nothing "
                                 "in within 60 s",
                                 k);
                }
                int64_t at = harness_now_ms() + rand_r(&seed) % 1500;
                harness_wait_until(past, &at, 5000);
                repl_gw_stop(r, SIGKILL, REPL_STOP_TIMEOUT_MS);
        }
        unify_gw_start(r, "dedup", extra);
        repl_expect_size(r, "west", "east.clicks", PER_SITE, 180000);
        repl_expect_size(r, "east", "west.clicks", PER_SITE, 180000);
        repl_expect_size(r, "east", "clicks.unified", UNIQUE, 180000);
        repl_expect_size(r, "west", "clicks.unified", UNIQUE, 180000);
        unify_wait_idle(r, "east", -1, 120000);
        unify_wait_idle(r, "west", -1, 120000);
        for (int i = 0; i < 2; i++) {
                assert_true(unify_stat(r, sites[i], &st));
                print_message("# last run at %s: in %" PRId64 " accepted %" PRId64
                              " dropped %" PRId64 " recovered %" PRId64
                              " replayed %" PRId64 "\n",
                              sites[i], st.records_in, st.accepted, st.dropped,
                              st.recovered, st.replayed);
        }
        check_site(r, "east");
        check_site(r, "west");
        /* Prefix-mode copies: exactly once as well. */
        assert_int_equal(repl_size(r, "west", "east.clicks"), PER_SITE);
        assert_int_equal(repl_size(r, "east", "west.clicks"), PER_SITE);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        /* The state dir lost: the start-up scan folds the whole unified
         * topics, the inputs are read from their beginning, and nothing
         * is delivered again. */
        assert_int_equal(harness_rmtree(r->state), 0);
        unify_gw_start(r, "dedup", extra);
        for (int i = 0; i < 2; i++) {
                unify_wait_idle(r, sites[i], 2 * PER_SITE, 180000);
                assert_true(unify_stat(r, sites[i], &st));
                print_message("# state lost, at %s: in %" PRId64
                              " accepted %" PRId64 " recovered %" PRId64
                              " replayed %" PRId64 "\n",
                              sites[i], st.records_in, st.accepted,
                              st.recovered, st.replayed);
                assert_int_equal(st.accepted, 0);
                assert_int_equal(st.recovered, UNIQUE);
        }
        check_site(r, "east");
        check_site(r, "west");
        assert_int_equal(repl_size(r, "west", "east.clicks"), PER_SITE);
        assert_int_equal(repl_size(r, "east", "west.clicks"), PER_SITE);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_kill9, repl_setup,
                                            repl_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
