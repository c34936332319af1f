/* tests/offsets/test_mm2.c: MM2 record formats (policy/mm2_format.c) against the
 * test's own reader of Kafka's schemas, and exact offset translation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "aagw_policy.h"
#include "mm2_ref.h"

static void test_heartbeat_bytes(void **state) {
        uint8_t k[64], v[16];
        size_t  kl = aagw_mm2_heartbeat_key("east", "west", k, sizeof(k));
        size_t  vl = aagw_mm2_heartbeat_value(0x0102030405060708, v, sizeof(v));
        static const uint8_t      want_k[] = {0, 4, 'e', 'a', 's', 't',
                                              0, 4, 'w', 'e', 's', 't'};
        static const uint8_t      want_v[] = {0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
        struct ref_heartbeat      r;
        struct aagw_mm2_heartbeat h;
        (void)state;

        assert_int_equal(kl, sizeof(want_k));
        assert_memory_equal(k, want_k, kl);
        assert_int_equal(vl, sizeof(want_v));
        assert_memory_equal(v, want_v, vl);
        assert_true(ref_heartbeat(k, kl, v, vl, &r));
        assert_string_equal(r.source, "east");
        assert_string_equal(r.target, "west");
        assert_int_equal(r.version, 0);
        assert_true(r.timestamp == 0x0102030405060708);
        assert_true(aagw_mm2_heartbeat_decode(k, kl, v, vl, &h));
        assert_true(h.timestamp_ms == 0x0102030405060708);
        /* truncated, trailing bytes, unknown version: refused */
        assert_false(aagw_mm2_heartbeat_decode(k, kl - 1, v, vl, &h));
        assert_false(aagw_mm2_heartbeat_decode(k, kl, v, vl - 1, &h));
        v[1] = 1;
        assert_false(aagw_mm2_heartbeat_decode(k, kl, v, vl, &h));
        /* short buffer: the length needed, nothing written past it */
        assert_int_equal(aagw_mm2_heartbeat_key("east", "west", k, 3), 12);
}

static void test_sync_bytes(void **state) {
        uint8_t              k[300], v[16];
        size_t               kl = aagw_mm2_sync_key("clicks", 7, k, sizeof(k));
        size_t               vl = aagw_mm2_sync_value(1234, 987, v, sizeof(v));
        struct ref_sync      r;
        struct aagw_mm2_sync s;
        (void)state;

        /* {topic STRING, partition INT32} / {upstream INT64, offset INT64}:
         * no version field in an offset-sync */
        assert_int_equal(kl, 2 + 6 + 4);
        assert_int_equal(vl, 16);
        assert_true(ref_sync(k, kl, v, vl, &r));
        assert_string_equal(r.topic, "clicks");
        assert_int_equal(r.partition, 7);
        assert_int_equal(r.upstream, 1234);
        assert_int_equal(r.downstream, 987);
        assert_true(aagw_mm2_sync_decode(k, kl, v, vl, &s));
        assert_string_equal(s.topic, "clicks");
        assert_int_equal(s.partition, 7);
        /* a negative length STRING is refused */
        k[0] = 0xff;
        assert_false(aagw_mm2_sync_decode(k, kl, v, vl, &s));
}

static void test_checkpoint_bytes(void **state) {
        uint8_t k[600], v[300];
        size_t  kl =
            aagw_mm2_checkpoint_key("g1", "east.clicks", 3, k, sizeof(k));
        size_t vl = aagw_mm2_checkpoint_value(50, 40, "meta", v, sizeof(v));
        struct ref_checkpoint      r;
        struct aagw_mm2_checkpoint c;
        (void)state;

        assert_true(ref_checkpoint(k, kl, v, vl, &r));
        assert_string_equal(r.group, "g1");
        assert_string_equal(r.topic, "east.clicks");
        assert_int_equal(r.partition, 3);
        assert_int_equal(r.version, 0);
        assert_int_equal(r.upstream, 50);
        assert_int_equal(r.downstream, 40);
        assert_string_equal(r.metadata, "meta");
        assert_int_equal(vl, 2 + 8 + 8 + 2 + 4);
        assert_true(aagw_mm2_checkpoint_decode(k, kl, v, vl, &c));
        assert_string_equal(c.metadata, "meta");
        assert_int_equal(c.downstream, 40);
}

static void test_topic_names(void **state) {
        char buf[256];
        (void)state;

        assert_int_equal(aagw_mm2_offset_syncs_topic("west", buf, sizeof(buf)),
                         AAGW_OK);
        assert_string_equal(buf, "mm2-offset-syncs.west.internal");
        assert_int_equal(aagw_mm2_checkpoints_topic("east", buf, sizeof(buf)),
                         AAGW_OK);
        assert_string_equal(buf, "east.checkpoints.internal");
        assert_int_equal(aagw_mm2_checkpoints_topic("east", buf, 10),
                         AAGW_ERR_INVAL);
}

/* Ground truth for the translation tests: source offsets 0..29, where
 * 'skipped' are not copied; copies get target offsets 0,1,2,... in order.
 * The right answer for committed C is the number of copies of offsets
 * below C.  The points are what flow.c writes: one per copy whose delta
 * changes (the first copy included). */
static size_t build(const bool *skipped, int n, struct aagw_mm2_point *pts) {
        size_t  np  = 0;
        int64_t out = 0, delta = INT64_MIN;
        for (int s = 0; s < n; s++) {
                if (skipped[s])
                        continue;
                if (out - s != delta) {
                        aagw_mm2_points_add(
                            pts, &np, 64,
                            (struct aagw_mm2_point){s, out, false});
                        delta = out - s;
                }
                out++;
        }
        return np;
}

static void test_translate_exact(void **state) {
        bool                  skipped[30] = {false};
        struct aagw_mm2_point pts[64];
        struct aagw_mm2_xlate x;
        (void)state;

        /* runs of skipped records in the middle (loop verdicts, dead
         * letters) and one at the very start */
        skipped[0] = skipped[5] = skipped[6] = skipped[7] = true;
        skipped[12] = skipped[20] = skipped[21] = true;
        size_t np                               = build(skipped, 30, pts);
        assert_int_equal(np, 4); /* at 1, 8, 13, 22 */
        for (int64_t c = 1; c <= 30; c++) {
                int64_t want = 0;
                for (int s = 0; s < c; s++)
                        want += !skipped[s];
                aagw_mm2_translate(pts, np, c, 30, &x);
                if (x.offset != want || !x.exact)
                        fail_msg("committed %d: got %d (exact %d), want %d",
                                 (int)c, (int)x.offset, x.exact, (int)want);
        }
        /* before the first point: the first copy, flagged */
        aagw_mm2_translate(pts, np, 0, 30, &x);
        assert_int_equal(x.offset, 0);
        assert_false(x.exact);
        /* past the last point, before replication got there */
        aagw_mm2_translate(pts, np, 29, 25, &x);
        assert_int_equal(x.offset, 29 - 22 + pts[3].downstream);
        assert_false(x.exact);
        assert_non_null(strstr(x.why, "not reached"));
        /* no points, no commit */
        aagw_mm2_translate(pts, 0, 5, 30, &x);
        assert_int_equal(x.offset, -1);
        assert_false(x.exact);
        aagw_mm2_translate(pts, np, -1, 30, &x);
        assert_false(x.exact);
}

/* Back from a position in the copy to the origin: for every position the
 * answer is the largest source offset whose copies below it are exactly
 * the ones read (brute force over the same layout as above), so a
 * consumer resuming there at the origin reads nothing twice and misses
 * nothing. */
static void test_translate_back(void **state) {
        bool                  skipped[30] = {false};
        struct aagw_mm2_point pts[64];
        struct aagw_mm2_xlate x;
        int64_t               reread;
        (void)state;

        skipped[0] = skipped[5] = skipped[6] = skipped[7] = true;
        skipped[12] = skipped[20] = skipped[21] = true;
        size_t  np                              = build(skipped, 30, pts);
        int64_t copies                          = 0;
        for (int s = 0; s < 30; s++)
                copies += !skipped[s];
        for (int64_t pos = 0; pos <= copies; pos++) {
                /* the largest u with (copies of source < u) == pos */
                int64_t want = -1;
                for (int64_t u = 0; u <= 30; u++) {
                        int64_t below = 0;
                        for (int s = 0; s < u; s++)
                                below += !skipped[s];
                        if (below == pos)
                                want = u;
                }
                aagw_mm2_translate_back(pts, np, pos, 30, &x, &reread);
                if (x.offset != want || !x.exact || reread != 0)
                        fail_msg("position %d: got %d (exact %d, reread %d), "
                                 "want %d",
                                 (int)pos, (int)x.offset, x.exact, (int)reread,
                                 (int)want);
                /* and forward again lands on the same position */
                aagw_mm2_translate(pts, np, x.offset, 30, &x);
                assert_int_equal(x.offset, pos);
        }
        /* past the last point, before the flow's position got there */
        aagw_mm2_translate_back(pts, np, copies, 25, &x, &reread);
        assert_int_equal(x.offset, 30);
        assert_false(x.exact);
        assert_int_equal(reread, -1);
        assert_non_null(strstr(x.why, "not reached"));
        /* no points, no position */
        aagw_mm2_translate_back(pts, 0, 5, 30, &x, &reread);
        assert_int_equal(x.offset, -1);
        assert_false(x.exact);
        aagw_mm2_translate_back(pts, np, -1, 30, &x, &reread);
        assert_false(x.exact);

        /* A lossy segment: 10 source records became 5 copies somewhere in
         * between.  At a point it is exact; inside, the lowest answer (no
         * gap), with the most it can read twice. */
        struct aagw_mm2_point lp[2] = {{0, 0, false}, {10, 5, true}};
        aagw_mm2_translate_back(lp, 2, 5, 20, &x, &reread);
        assert_true(x.exact);
        assert_int_equal(x.offset, 10);
        aagw_mm2_translate_back(lp, 2, 3, 20, &x, &reread);
        assert_false(x.exact);
        assert_int_equal(x.offset, 3); /* none of the 5 skipped before it */
        assert_int_equal(reread, 5);   /* ... or all of them: 8 */
        /* before the first point: nothing of the copy was read */
        struct aagw_mm2_point late[1] = {{40, 7, false}};
        aagw_mm2_translate_back(late, 1, 2, 50, &x, &reread);
        assert_false(x.exact);
        assert_int_equal(x.offset, 40);
        assert_int_equal(reread, 0);
}

/* Composition through the origin (a third site's topic, north.clicks at
 * east -> north.clicks at west): origin offsets 0..29, copied to the
 * source site with one set of records skipped and to the target site
 * with another, the target's copy starting at offset 'base' (records it
 * held before).  Brute force: the group at the source at 'pos' has read
 * the copies of origin offsets below O, O the largest such; at the
 * target it resumes at the copy of O, base + copies of offsets below O. */
static size_t build_at(const bool *skipped, int n, int64_t base,
                       struct aagw_mm2_point *pts) {
        size_t np = build(skipped, n, pts);
        for (size_t i = 0; i < np; i++)
                pts[i].downstream += base;
        return np;
}

static void test_translate_via(void **state) {
        bool                  at_src[30] = {false}, at_dst[30] = {false};
        struct aagw_mm2_point sp[64], dp[64];
        struct aagw_mm2_xlate x;
        struct aagw_mm2_via   v;
        (void)state;

        at_src[3] = at_src[4] = at_src[5] = at_src[17] = true;
        at_dst[1] = at_dst[10] = at_dst[11] = at_dst[25] = true;
        size_t  ns = build(at_src, 30, sp), nd = build_at(at_dst, 30, 7, dp);
        int64_t copies = 0;
        for (int s = 0; s < 30; s++)
                copies += !at_src[s];
        for (int64_t pos = 0; pos <= copies; pos++) {
                int64_t o = -1, want = 7;
                for (int64_t u = 0; u <= 30; u++) {
                        int64_t below = 0;
                        for (int s = 0; s < u; s++)
                                below += !at_src[s];
                        if (below == pos)
                                o = u;
                }
                for (int s = 0; s < o; s++)
                        want += !at_dst[s];
                aagw_mm2_translate_via(sp, ns, 30, dp, nd, 30, pos, &x, &v);
                if (x.offset != want || !x.exact || v.reread != 0 ||
                    v.origin != o)
                        fail_msg("position %d: got %d via origin %d (exact "
                                 "%d, reread %d), want %d via %d",
                                 (int)pos, (int)x.offset, (int)v.origin,
                                 x.exact, (int)v.reread, (int)want, (int)o);
        }
        /* Leg 2 lossy: origin 7 (exact at the source) lies in a segment of
         * the target's flow where 10 origin records became 5 copies: its
         * copy is at 2..5; the lowest, and up to 3 read twice. */
        struct aagw_mm2_point one[1]   = {{0, 0, false}};
        struct aagw_mm2_point lossy[2] = {{0, 0, false}, {10, 5, true}};
        aagw_mm2_translate_via(one, 1, 30, lossy, 2, 30, 7, &x, &v);
        assert_false(x.exact);
        assert_true(v.back.exact);
        assert_false(v.fwd.exact);
        assert_int_equal(v.origin, 7);
        assert_int_equal(x.offset, 2);
        assert_int_equal(v.reread, 3);
        assert_non_null(strstr(x.why, "suppressed"));
        /* Leg 2 past its last point before that flow got there: the
         * lowest is the last point's copy; at most 7 - 0 read twice. */
        aagw_mm2_translate_via(one, 1, 30, one, 1, 3, 7, &x, &v);
        assert_false(x.exact);
        assert_int_equal(x.offset, 0);
        assert_int_equal(v.reread, 7);
        assert_non_null(strstr(x.why, "not reached"));
        /* Leg 1 past its last point, its flow's position unknown: leg 2
         * exact, but nothing bounds what is read twice. */
        aagw_mm2_translate_via(one, 1, -1, one, 1, 30, 7, &x, &v);
        assert_false(x.exact);
        assert_int_equal(x.offset, 7);
        assert_int_equal(v.reread, -1);
        /* No points on either leg: no answer. */
        aagw_mm2_translate_via(one, 0, 30, one, 1, 30, 7, &x, &v);
        assert_int_equal(x.offset, -1);
        assert_false(x.exact);
        aagw_mm2_translate_via(one, 1, 30, one, 0, 30, 7, &x, &v);
        assert_int_equal(x.offset, -1);
        assert_false(x.exact);
        assert_int_equal(v.reread, -1);
}

static void test_translate_lossy_and_reset(void **state) {
        struct aagw_mm2_point pts[4];
        size_t                n = 0;
        struct aagw_mm2_xlate x;
        (void)state;

        aagw_mm2_points_add(pts, &n, 4, (struct aagw_mm2_point){0, 0, false});
        aagw_mm2_points_add(pts, &n, 4, (struct aagw_mm2_point){10, 5, true});
        aagw_mm2_translate(pts, n, 10, 20, &x);
        assert_true(x.exact); /* at a point: exact whatever came before */
        aagw_mm2_translate(pts, n, 7, 20, &x);
        assert_false(x.exact);
        assert_int_equal(x.offset, 5);
        /* the same upstream again (a restart) replaces, keeps lossy */
        aagw_mm2_points_add(pts, &n, 4, (struct aagw_mm2_point){10, 5, false});
        assert_int_equal(n, 2);
        assert_true(pts[1].lossy);
        /* offsets going back: a reset partition, old points dropped */
        assert_true(aagw_mm2_points_add(pts, &n, 4,
                                        (struct aagw_mm2_point){3, 40, false}));
        assert_int_equal(n, 1);
        assert_int_equal(pts[0].downstream, 40);
        /* full: the oldest goes */
        for (int i = 0; i < 5; i++)
                aagw_mm2_points_add(pts, &n, 4,
                                    (struct aagw_mm2_point){10 + i, i, false});
        assert_int_equal(n, 4);
        assert_int_equal(pts[0].upstream, 11);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_heartbeat_bytes),
            cmocka_unit_test(test_sync_bytes),
            cmocka_unit_test(test_checkpoint_bytes),
            cmocka_unit_test(test_topic_names),
            cmocka_unit_test(test_translate_exact),
            cmocka_unit_test(test_translate_lossy_and_reset),
            cmocka_unit_test(test_translate_back),
            cmocka_unit_test(test_translate_via),
        };
        return cmocka_run_group_tests_name("mm2", tests, NULL, NULL);
}
