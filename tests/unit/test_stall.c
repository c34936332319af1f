/* tests/unit/test_stall.c: when the stall watch probes a partition and
 * when it reports it stalled (aagw_stall_observe(), aagw_stall_due()),
 * and the latency histogram's buckets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "aagw_replicator.h"

/* ------------------------------------------------ stall detection -- */

/* A partition whose position stands still while its leader holds more
 * is asked for its end after AAGW_STALL_PROBE_MS, reported once the stall
 * lasted AAGW_STALL_MS, then again only after twice as long. */
static void test_stall_reported(void **state) {
        struct aagw_stall_mark m;
        int64_t                t = 100000, reports[8];
        int                    nrep = 0;
        (void)state;

        aagw_stall_init(&m);
        assert_false(aagw_stall_observe(&m, 500, t)); /* first sight */
        assert_false(aagw_stall_observe(&m, 500, t + AAGW_STALL_PROBE_MS - 1));
        assert_true(aagw_stall_observe(&m, 500, t + AAGW_STALL_PROBE_MS));
        /* asked: not again within the probe interval */
        assert_false(aagw_stall_observe(&m, 500, t + AAGW_STALL_PROBE_MS + 1));
        /* The owner's loop, once a second for 3 minutes: every probe is
         * answered with more records than the position. */
        for (int64_t now = t + 1000; now <= t + 180000; now += 1000) {
                if (aagw_stall_observe(&m, 500, now))
                        aagw_stall_answer(&m, 900, now);
                if (aagw_stall_due(&m, now) && nrep < 8)
                        reports[nrep++] = now - t;
        }
        /* at 15 s, then after 30 s more (a fresh answer needed each time),
         * then after 60 s more */
        assert_int_equal(nrep, 3);
        assert_int_equal(reports[0], AAGW_STALL_MS);
        assert_true(reports[1] >= reports[0] + 2 * AAGW_STALL_MS &&
                    reports[1] <= reports[0] + 2 * AAGW_STALL_MS +
                                      AAGW_STALL_PROBE_MS);
        assert_true(reports[2] >= reports[1] + 4 * AAGW_STALL_MS &&
                    reports[2] <= reports[1] + 4 * AAGW_STALL_MS +
                                      AAGW_STALL_PROBE_MS);
}

/* Never a stall: a partition that moves, one whose leader holds nothing
 * more, one whose log ends in a transaction marker (one more offset), and
 * one whose only answer predates its last move. */
static void test_stall_not_reported(void **state) {
        struct aagw_stall_mark m;
        int64_t                t = 0;
        (void)state;

        aagw_stall_init(&m);
        for (int64_t pos = 0; pos < 100; pos++, t += 1000) {
                aagw_stall_observe(&m, pos, t);
                aagw_stall_answer(&m, pos + 50, t);
                assert_false(aagw_stall_due(&m, t));
        }
        aagw_stall_init(&m);
        aagw_stall_observe(&m, 7, 0);
        aagw_stall_answer(&m, 7, 1);
        assert_false(aagw_stall_due(&m, 10 * AAGW_STALL_MS));
        aagw_stall_answer(&m, 8, 2); /* a marker */
        assert_false(aagw_stall_due(&m, 10 * AAGW_STALL_MS));
        /* an answer from before the last move says nothing */
        aagw_stall_init(&m);
        aagw_stall_observe(&m, 7, 0);
        aagw_stall_answer(&m, 100, 10);
        aagw_stall_observe(&m, 8, 20); /* moved: the answer is dropped */
        assert_false(aagw_stall_due(&m, 20 + 10 * AAGW_STALL_MS));
        /* no answer at all */
        aagw_stall_init(&m);
        aagw_stall_observe(&m, 7, 0);
        assert_false(aagw_stall_due(&m, 10 * AAGW_STALL_MS));
}

/* The latency histogram's buckets (aagw_replication_latency_ms): rising
 * to 60 s, and up to a second each bound at most twice the one before,
 * so that 5, 50 and 500 ms fall in different buckets with one between
 * them.  The alert rules' tests name the 5 s and 10 s bounds. */
static int lat_bucket(int64_t ms) {
        int b = 0;
        while (b < AAGW_LAT_BUCKETS - 1 && ms > aagw_lat_bounds_ms[b])
                b++;
        return b;
}

static void test_latency_buckets(void **state) {
        bool has5000 = false, has10000 = false;
        (void)state;

        assert_int_equal(aagw_lat_bounds_ms[0], 1);
        assert_int_equal(aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 2], 60000);
        for (int k = 1; k < AAGW_LAT_BUCKETS - 1; k++) {
                assert_true(aagw_lat_bounds_ms[k] > aagw_lat_bounds_ms[k - 1]);
                if (aagw_lat_bounds_ms[k] <= 1000)
                        assert_true(aagw_lat_bounds_ms[k] <=
                                    2 * aagw_lat_bounds_ms[k - 1]);
                has5000 |= aagw_lat_bounds_ms[k] == 5000;
                has10000 |= aagw_lat_bounds_ms[k] == 10000;
        }
        assert_true(has5000 && has10000);
        assert_true(lat_bucket(5) + 1 < lat_bucket(50));
        assert_true(lat_bucket(50) + 1 < lat_bucket(500));
        assert_true(lat_bucket(500) + 1 < lat_bucket(5000));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_latency_buckets),
            cmocka_unit_test(test_stall_reported),
            cmocka_unit_test(test_stall_not_reported),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
