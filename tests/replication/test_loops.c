/* tests/replication/test_loops.c: each loop-prevention mechanism alone
 * stops loops (DESIGN.md: "each mechanism alone must stop loops: tests run
 * each with the other off").
 *
 *  (a) prefix policy, provenance checks off: topic names alone, with
 *      MM2's default separator "." and with ".a." (a separator of letters
 *      and dots, as a seed document uses).
 *  (b) identity policy, topic-name checks off: provenance headers alone
 *      (every site's copy lands in the same topic name, so a record that
 *      went east -> west would go west -> east again without them).
 *
 * Records are produced at both sites; once each copy is complete, the
 * sizes at both sites must stay constant for a 10 s quiet period with the
 * gateway running (a loop would keep them growing), and no chained topic
 * (east.west.clicks, west.east.clicks) may appear. */
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
#define PER_SITE 2000
#define KEYS 500
#define REPL_TIMEOUT_MS 60000
#define QUIET_MS 10000

static const char *const sites[] = {"east", "west"};


/* The sizes of every topic of interest, at both sites. */
struct sizes {
        struct repl *r;
        const char  *topics[2][3]; /* per site, NULL-terminated */
        int64_t      base[2][3];
        char         what[256];
};

static void sizes_take(struct sizes *z, int64_t out[2][3]) {
        for (int s = 0; s < 2; s++)
                for (int t = 0; t < 3 && z->topics[s][t]; t++)
                        out[s][t] = repl_size(z->r, sites[s], z->topics[s][t]);
}

/* Condition: some size moved away from the baseline. */
static bool sizes_changed(void *arg) {
        struct sizes *z = arg;
        int64_t       now[2][3];

        sizes_take(z, now);
        for (int s = 0; s < 2; s++)
                for (int t = 0; t < 3 && z->topics[s][t]; t++)
                        if (now[s][t] != z->base[s][t]) {
                                snprintf(z->what, sizeof(z->what),
                                         "%s at %s went from %" PRId64
                                         " to %" PRId64,
                                         z->topics[s][t], sites[s],
                                         z->base[s][t], now[s][t]);
                                return true;
                        }
        return false;
}

/* The quiet period: with the gateway running, nothing moves for 10 s. */
static void expect_quiet(struct sizes *z) {
        sizes_take(z, z->base);
        if (harness_wait_until(sizes_changed, z, QUIET_MS)) {
                repl_dump_log(z->r, 30);
                fail_msg("replication did not settle: %s", z->what);
        }
        assert_true(repl_gw_running(z->r));
}

static void produce_both(struct repl *r, int from, int cnt) {
        const char *hdrs[] = {"trace=loop", NULL};

        repl_produce(r, "east", "clicks", "east", from, cnt, KEYS, hdrs, -1);
        repl_produce(r, "west", "clicks", "west", from, cnt, KEYS, hdrs, -1);
}

/* (a) Topic names alone: loop_check_headers=false makes the replicator
 * ignore incoming provenance (every record is stamped as local to the
 * source), so only the rule "never send west<sep>clicks to west" stops
 * west<sep>clicks at east from going back. */
static void prefix_topics_only(void **state, const char *sep) {
        const char *const extra[] = {
            "--policy", "prefix", "--separator", sep, "--set",
            "replication.loop_check_headers=false", NULL};
        struct repl *r = repl_new(sites, 2);
        char         at_east[64], at_west[64];
        struct sizes z = {.r = r};
        struct rrecs src, copy;

        /* Real clusters' scoped names keep the separator ("east.a." +
         * "<scope>-clicks"). */
        snprintf(r->sep, sizeof(r->sep), "%s", sep);
        snprintf(at_east, sizeof(at_east), "west%sclicks", sep);
        snprintf(at_west, sizeof(at_west), "east%sclicks", sep);
        z.topics[0][0] = "clicks";
        z.topics[0][1] = at_east;
        z.topics[1][0] = "clicks";
        z.topics[1][1] = at_west;
        *state = r;
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_create_topic(r, "west", at_west, PARTS);
        repl_create_topic(r, "east", at_east, PARTS);
        produce_both(r, 0, PER_SITE / 2);
        repl_gw_start(r, extra);
        produce_both(r, PER_SITE / 2, PER_SITE / 2);
        repl_expect_size(r, "west", at_west, PER_SITE, REPL_TIMEOUT_MS);
        repl_expect_size(r, "east", at_east, PER_SITE, REPL_TIMEOUT_MS);

        expect_quiet(&z);
        assert_int_equal(z.base[0][0], PER_SITE); /* east clicks */
        assert_int_equal(z.base[0][1], PER_SITE); /* east west.clicks */
        assert_int_equal(z.base[1][0], PER_SITE);
        assert_int_equal(z.base[1][1], PER_SITE);
        /* No chained copy (east<sep>west<sep>clicks at east, ...). */
        for (int s = 0; s < 2; s++)
                repl_expect_topics(r, sites[s], z.topics[s], 2);

        /* And the copies are exact. */
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        repl_read(r, "east", "clicks", &src);
        repl_read(r, "west", at_west, &copy);
        repl_check_copy(&src, "clicks", "east", &copy, "east>west");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
        repl_read(r, "west", "clicks", &src);
        repl_read(r, "east", at_east, &copy);
        repl_check_copy(&src, "clicks", "west", &copy, "west>east");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

static void test_prefix_topics_only(void **state) {
        prefix_topics_only(state, ".");
}

static void test_prefix_topics_only_letters(void **state) {
        prefix_topics_only(state, ".a.");
}

/* Split 'rs' (a "clicks" under the identity policy) into local records
 * (no provenance) and copies. */
static void split_local(const struct rrecs *rs, struct rrecs *local) {
        size_t n = 0;

        memset(local, 0, sizeof(*local));
        memcpy(local->topic, rs->topic, sizeof(local->topic));
        local->v = calloc(rs->cnt + 1, sizeof(*local->v));
        assert_non_null(local->v);
        for (size_t i = 0; i < rs->cnt; i++)
                if (rrec_hdr(&rs->v[i], "aagw.prov", NULL, 0) == 0)
                        local->v[n++] = rs->v[i];
        local->cnt = n;
}

/* (b) Provenance alone: under the identity policy the copy of east's
 * clicks is west's clicks, which west -> east reads again; only the path
 * header ("east>west" contains east) stops it. */
static void test_identity_headers_only(void **state) {
        static const char *const extra[] = {
            "--policy", "identity", "--set",
            "replication.loop_check_topics=false", NULL};
        struct repl *r = repl_new(sites, 2);
        struct sizes z = {.r      = r,
                          .topics = {{"clicks", NULL}, {"clicks", NULL}}};
        struct rrecs east, west, east_local, west_local;

        *state = r;
        repl_create_topic(r, NULL, "clicks", PARTS);
        produce_both(r, 0, PER_SITE / 2);
        repl_gw_start(r, extra);
        produce_both(r, PER_SITE / 2, PER_SITE / 2);
        repl_expect_size(r, "west", "clicks", 2 * PER_SITE, REPL_TIMEOUT_MS);
        repl_expect_size(r, "east", "clicks", 2 * PER_SITE, REPL_TIMEOUT_MS);

        expect_quiet(&z);
        assert_int_equal(z.base[0][0], 2 * PER_SITE);
        assert_int_equal(z.base[1][0], 2 * PER_SITE);
        for (int s = 0; s < 2; s++)
                repl_expect_topics(r, sites[s], z.topics[s], 1);

        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        repl_read(r, "east", "clicks", &east);
        repl_read(r, "west", "clicks", &west);
        split_local(&east, &east_local);
        split_local(&west, &west_local);
        assert_int_equal(east_local.cnt, PER_SITE);
        assert_int_equal(west_local.cnt, PER_SITE);
        assert_int_equal(rrecs_count_tag(&east_local, "east"), PER_SITE);
        assert_int_equal(rrecs_count_tag(&west_local, "west"), PER_SITE);
        /* Each site's records are in the other's clicks exactly once, in
         * order; no record came back to its own site. */
        repl_check_copy(&east_local, "clicks", "east", &west, "east>west");
        repl_check_copy(&west_local, "clicks", "west", &east, "west>east");
        for (size_t i = 0; i < east.cnt; i++) {
                struct rprov pv;
                rrec_prov(&east.v[i], &pv);
                assert_string_not_equal(pv.origin, "east");
        }
        for (size_t i = 0; i < west.cnt; i++) {
                struct rprov pv;
                rrec_prov(&west.v[i], &pv);
                assert_string_not_equal(pv.origin, "west");
        }
        free(east_local.v);
        free(west_local.v);
        rrecs_deinit(&east);
        rrecs_deinit(&west);
}

/* Control: with both mechanisms off, identity replication does loop, so
 * the quiet-period checks above can see a loop when there is one.  Small
 * and short: the copies multiply until the gateway is killed. */
static void test_control_both_off_loops(void **state) {
        static const char *const extra[] = {
            "--policy", "identity",
            "--set",    "replication.loop_check_topics=false",
            "--set",    "replication.loop_check_headers=false",
            NULL};
        struct repl *r = repl_new(sites, 2);

        *state = r;
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_produce(r, "east", "clicks", "east", 0, 100, KEYS, NULL, -1);
        repl_gw_start(r, extra);
        /* 100 records, replicated back and forth: far more than 200. */
        repl_expect_size(r, "east", "clicks", 1000, REPL_TIMEOUT_MS);
        repl_expect_size(r, "west", "clicks", 1000, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGKILL, REPL_STOP_TIMEOUT_MS),
                         128 + SIGKILL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_control_both_off_loops, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_prefix_topics_only, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_prefix_topics_only_letters,
                                            repl_setup, repl_teardown),
            cmocka_unit_test_setup_teardown(test_identity_headers_only, repl_setup,
                                            repl_teardown),
        };

        return cmocka_run_group_tests_name("replication-loops", tests, NULL,
                                           NULL);
}
