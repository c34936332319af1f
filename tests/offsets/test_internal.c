/* tests/offsets/test_internal.c: the MM2 topics aagw writes, decoded with
 * the test's own reader of Kafka's schemas (mm2_ref.h), and exact
 * translation under the prefix policy with skipped records.
 *
 * East's clicks [0] gets 30 records: 0-9 plain, 10-12 carrying a
 * provenance path through west (loop verdict: skipped), 13-17 plain,
 * 18-19 with malformed provenance (dead-lettered), 20-29 plain; clicks
 * [1] gets 20 plain ones.  For EVERY committed offset 0..30 of [0], `aagw
 * offsets translate` must give the number of copies of records below it
 * (read back from the target's provenance with kcat), flagged exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mm2_ref.h"
#include "ofs.h"

/* The offset-syncs of this test's topic 'topic' (the topic is shared by
 * every gateway writing to the cluster pair: real clusters are shared by
 * the tests), with their offsets in the topic. */
struct syncs {
        const char     *topic;
        struct ref_sync v[256];
        int64_t         off[256];
        size_t          n;
        size_t          bad;
};

static void on_sync(void *arg, const void *k, size_t kl, const void *v,
                    size_t vl, int64_t off) {
        struct syncs   *s = arg;
        struct ref_sync y;

        if (!ref_sync(k, kl, v, vl, &y)) {
                s->bad++;
                return;
        }
        if (strcmp(y.topic, s->topic))
                return; /* another topic's, or the heartbeats' */
        if (s->n < 256) {
                s->off[s->n] = off;
                s->v[s->n++] = y;
        } else
                s->bad++;
}

static bool sync_at(const struct syncs *s, int64_t off) {
        for (size_t i = 0; i < s->n; i++)
                if (s->off[i] == off)
                        return true;
        return false;
}

/* Heartbeats written since 'since' (real clusters keep older ones, of
 * other tests' gateways too: the topic is one per cluster pair). */
struct hbs {
        int64_t since;
        size_t  n, bad;
        int64_t min_ts, max_ts;
        int64_t ts[4096];
};

static void on_hb(void *arg, const void *k, size_t kl, const void *v, size_t vl,
                  int64_t off) {
        struct hbs          *h = arg;
        struct ref_heartbeat hb;
        (void)off;
        if (!ref_heartbeat(k, kl, v, vl, &hb) || strcmp(hb.source, "east") ||
            strcmp(hb.target, "west") || hb.version != 0) {
                h->bad++;
                return;
        }
        if (hb.timestamp < h->since)
                return;
        if (h->n < 4096)
                h->ts[h->n] = hb.timestamp;
        if (!h->n || hb.timestamp < h->min_ts)
                h->min_ts = hb.timestamp;
        if (hb.timestamp > h->max_ts)
                h->max_ts = hb.timestamp;
        h->n++;
}

/* Heartbeats: the copies at west first, then the originals at east, so
 * that every copy counted has its original counted too (a heartbeat
 * written and copied between the two reads is in both or only in the
 * originals).  True once there is a copy. */
struct hb_pair {
        struct repl *r;
        int64_t      since;
        struct hbs   h, hc;
};

static bool hb_copied(void *arg) {
        struct hb_pair *p = arg;
        memset(&p->h, 0, sizeof(p->h));
        memset(&p->hc, 0, sizeof(p->hc));
        p->h.since = p->hc.since = p->since;
        ofs_read_raw(p->r, "west", "east.heartbeats", 0, on_hb, &p->hc);
        ofs_read_raw(p->r, "east", "heartbeats", 0, on_hb, &p->h);
        return p->hc.n >= 1;
}

struct ckpts {
        const char *group, *topic; /* scoped */
        int64_t     want_up, want_down;
        bool    found;
        size_t  bad;
        size_t  matches, want_matches; /* 0: one is enough */
};

static void on_ckpt(void *arg, const void *k, size_t kl, const void *v,
                    size_t vl, int64_t off) {
        struct ckpts         *c = arg;
        struct ref_checkpoint cp;
        (void)off;
        if (!ref_checkpoint(k, kl, v, vl, &cp) || cp.version != 0) {
                c->bad++;
                return;
        }
        if (!strcmp(cp.group, c->group) && !strcmp(cp.topic, c->topic) &&
            cp.partition == 0 && cp.upstream == c->want_up &&
            cp.downstream == c->want_down && ++c->matches >= c->want_matches)
                c->found = true;
}

struct ckpt_cond {
        struct repl *r;
        struct ckpts c;
};

static bool ckpt_found(void *arg) {
        struct ckpt_cond *cc = arg;
        cc->c.found          = false;
        cc->c.matches        = 0;
        ofs_read_raw(cc->r, "west", "east.checkpoints.internal", 0, on_ckpt,
                     &cc->c);
        return cc->c.found;
}

struct west_cond {
        struct repl *r;
        int64_t      want, last;
};

static bool west_at(void *arg) {
        struct west_cond *c = arg;
        c->last = ofs_committed(c->r, "west", "g1", "east.clicks", 0);
        return c->last == c->want;
}

static int64_t wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_internal_topics(void **state) {
        struct repl *r  = ofs_scene();
        int64_t      t0 = wall_ms();
        int64_t      src[64];
        size_t       n;

        *state = r;
        ofs_produce(r, 0, "a", 0, 10, 0);
        ofs_produce(r, 0, "loop", 10, 3, 1);
        ofs_produce(r, 0, "b", 13, 5, 0);
        ofs_produce(r, 0, "bad", 18, 2, 2);
        ofs_produce(r, 0, "c", 20, 10, 0);
        ofs_produce(r, 1, "d", 0, 20, 0);
        const char *sync[] = {"--set", "mm2.sync_group_offsets=true", NULL};
        ofs_gw_start(r, sync);
        repl_expect_size(r, "west", "east.clicks", 25 + 20, OFS_TIMEOUT_MS);
        ofs_wait_position(r, 0, 30);
        ofs_wait_position(r, 1, 20);

        /* Ground truth from the target itself (kcat, provenance). */
        n = ofs_copies(r, 0, src, 64);
        assert_int_equal(n, 25);
        for (size_t i = 0; i < n; i++)
                assert_false((src[i] >= 10 && src[i] <= 12) || src[i] == 18 ||
                             src[i] == 19);

        /* Every committed offset of [0], through the command. */
        for (int64_t c = 0; c <= 30; c++) {
                harness_output_t o;
                char             cs[32];
                const char      *words[] = {
                         "offsets", "translate", "--group", "g1",     "--from",
                         "east",    "--to",      "west",    "--json", NULL};
                ofs_commit(r, "east", "g1", "clicks", 0, c);
                int          rc = ofs_aagw(r, words, &o);
                json_object *j = json_tokener_parse(o.out), *parts, *p0 = NULL;
                if (rc != 0 || !j)
                        fail_msg("translate at %d: exit %d\n%s%s", (int)c, rc,
                                 o.out, o.err);
                assert_true(json_object_object_get_ex(j, "partitions", &parts));
                for (size_t i = 0; i < json_object_array_length(parts); i++) {
                        json_object *e = json_object_array_get_idx(parts, i),
                                    *v;
                        json_object_object_get_ex(e, "partition", &v);
                        if (json_object_get_int(v) == 0)
                                p0 = e;
                }
                assert_non_null(p0);
                json_object *tr, *ex, *cm, *tt;
                json_object_object_get_ex(p0, "translated", &tr);
                json_object_object_get_ex(p0, "exact", &ex);
                json_object_object_get_ex(p0, "committed", &cm);
                json_object_object_get_ex(p0, "target_topic", &tt);
                snprintf(cs, sizeof(cs), "%" PRId64, c);
                assert_int_equal(json_object_get_int64(cm), c);
                assert_string_equal(json_object_get_string(tt),
                                    repl_topic(r, "east.clicks"));
                if (json_object_get_int64(tr) != ofs_expected(src, n, c) ||
                    !json_object_get_boolean(ex))
                        fail_msg("committed %s: translated %" PRId64
                                 " exact %d, want %" PRId64 " exact",
                                 cs, json_object_get_int64(tr),
                                 json_object_get_boolean(ex),
                                 ofs_expected(src, n, c));
                json_object_put(j);
                harness_output_deinit(&o);
        }

        /* Offset-syncs, decoded by the test: each one true to the target,
         * and one at every delta change (first copy, after each run). */
        static struct syncs s;
        memset(&s, 0, sizeof(s));
        s.topic = repl_topic(r, "clicks");
        ofs_read_raw(r, "east", "mm2-offset-syncs.west.internal", 0, on_sync,
                     &s);
        assert_int_equal(s.bad, 0);
        bool at0 = false, at13 = false, at20 = false, p1 = false;
        for (size_t i = 0; i < s.n; i++) {
                struct ref_sync *y = &s.v[i];
                if (y->partition == 1) {
                        p1 |= y->upstream == 0 && y->downstream == 0;
                        continue;
                }
                assert_int_equal(y->partition, 0);
                /* a sync names where the record is, or would be */
                assert_int_equal(y->downstream,
                                 ofs_expected(src, n, y->upstream));
                at0 |= y->upstream == 0 && y->downstream == 0;
                at13 |= y->upstream == 13 && y->downstream == 10;
                at20 |= y->upstream == 20 && y->downstream == 15;
        }
        assert_true(at0 && at13 && at20 && p1);
        /* kcat sees the same records: at their offsets, keys of 2 + the
         * topic's length + 4 bytes and 16-byte values */
        {
                harness_lines_t l;
                size_t          ours = 0;
                char            want[64];

                snprintf(want, sizeof(want), "%zu 16", 6 + strlen(s.topic));
                assert_int_equal(
                    harness_kcat_consume(repl_bs(r, "east"),
                                         "mm2-offset-syncs.west.internal",
                                         "%o %K %S\n", OFS_TIMEOUT_MS, &l,
                                         r->errstr, sizeof(r->errstr)),
                    AAGW_OK);
                for (size_t i = 0; i < l.cnt; i++) {
                        char *sp = strchr(l.v[i], ' ');

                        assert_non_null(sp);
                        if (!sync_at(&s, strtoll(l.v[i], NULL, 10)))
                                continue;
                        assert_string_equal(sp + 1, want);
                        ours++;
                }
                assert_int_equal(ours, s.n);
                harness_lines_deinit(&l);
        }

        /* Heartbeats at the source and their copies at the target. */
        static struct hb_pair hp;
        memset(&hp, 0, sizeof(hp));
        hp.r = r;
        /* On shared real clusters, only heartbeats of this test's time;
         * other gateways' copies of them are at west too. */
        hp.since = repl_real(r) ? t0 - 1000 : 0;
        if (!harness_wait_until(hb_copied, &hp, 20000))
                fail_msg("no heartbeat copied to west (%zu at east)", hp.h.n);
        struct hbs *h = &hp.h, *hc = &hp.hc;
        assert_int_equal(h->bad + hc->bad, 0);
        if (!(h->n >= 1 && (repl_real(r) || hc->n <= h->n)))
                fail_msg("heartbeats: %zu at east, %zu copies at west", h->n,
                         hc->n);
        assert_true(h->min_ts >= t0 - 1000 && h->max_ts <= wall_ms());
        assert_true(hc->max_ts <= h->max_ts);
        /* every copy is a copy of a heartbeat written at east */
        for (size_t i = 0; i < hc->n && i < 4096; i++) {
                size_t k = 0;

                while (k < h->n && k < 4096 && h->ts[k] != hc->ts[i])
                        k++;
                if (k == h->n || k == 4096)
                        fail_msg("heartbeat copy at west of %" PRId64
                                 " has no original at east",
                                 hc->ts[i]);
        }

        /* A checkpoint for g1's last commit (30 -> 25). */
        struct ckpt_cond cc = {r,
                               {repl_topic(r, "g1"),
                                repl_topic(r, "east.clicks"), 30, 25, false, 0,
                                0, 1}};
        if (!harness_wait_until(ckpt_found, &cc, 20000)) {
                repl_dump_log(r, 30);
                fail_msg("no checkpoint g1 east.clicks [0] 30 -> 25");
        }
        assert_int_equal(cc.c.bad, 0);

        /* sync_group_offsets: g1 (no members at west) follows, 25 ... */
        struct west_cond wc = {r, 25, -1};
        if (!harness_wait_until(west_at, &wc, 20000))
                fail_msg("g1 at west is at %" PRId64 ", want 25", wc.last);
        /* ... and never moves back: g1 rewinds at east to 5 (translated
         * 5); once that checkpoint is out, west still says 25. */
        ofs_commit(r, "east", "g1", "clicks", 0, 5);
        cc.c.want_up   = 5;
        cc.c.want_down = 5;
        /* two passes: the group sync of the first is then done too */
        cc.c.want_matches = 2;
        if (!harness_wait_until(ckpt_found, &cc, 20000))
                fail_msg("no checkpoint g1 east.clicks [0] 5 -> 5");
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), 25);

        /* The counters behind the new metrics. */
        {
                harness_output_t o;
                const char      *argv[] = {harness_aagw_bin(), "status",
                                           "--state-dir", r->state, NULL};
                assert_int_equal(harness_run(argv, NULL, 0, 20000, &o,
                                             r->errstr, sizeof(r->errstr)),
                                 AAGW_OK);
                assert_int_equal(harness_exit_code(o.status), 0);
                assert_null(strstr(o.out, "offset_syncs:0\n"));
                assert_non_null(strstr(o.out, "offset_syncs:"));
                assert_null(strstr(o.out, "checkpoints:0\n"));
                assert_non_null(strstr(o.out, "truncations:0\n"));
                assert_null(strstr(o.out, "heartbeat_latency_ms:-1\n"));
                harness_output_deinit(&o);
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

/* The rate bound: at most one sync per second and partition.  20 records
 * alternating skipped / copied, replicated in one burst, change the delta
 * ten times: one sync gets out, the rest are suppressed, and the boundary
 * sync at the next position save carries the lossy mark.  Translation
 * inside that range says it is not exact (exit 1) instead of guessing;
 * at the points themselves it is exact. */
static void test_sync_rate_bound(void **state) {
        struct repl     *r = ofs_scene();
        harness_output_t o;
        harness_lines_t  l;
        const char      *words[] = {"offsets", "translate", "--group", "g1",
                                    "--from",  "east",      "--to",    "west",
                                    "--json",  NULL};
        size_t           lossy   = 0;

        *state = r;
        for (int i = 0; i < 10; i++) {
                ofs_produce(r, 0, "loop", 2 * i, 1, 1);
                ofs_produce(r, 0, "a", 2 * i + 1, 1, 0);
        }
        const char *bound[] = {"--set", "mm2.offset_syncs_max_rate=1", NULL};
        ofs_gw_start(r, bound);
        repl_expect_size(r, "west", "east.clicks", 10, OFS_TIMEOUT_MS);
        ofs_wait_position(r, 0, 20);

        ofs_commit(r, "east", "g1", "clicks", 0, 7);
        assert_int_equal(ofs_aagw(r, words, &o), 1);
        json_object *j = json_tokener_parse(o.out), *parts, *p0, *v;
        assert_non_null(j);
        assert_true(json_object_object_get_ex(j, "partitions", &parts));
        p0 = json_object_array_get_idx(parts, 0);
        assert_true(json_object_object_get_ex(p0, "exact", &v));
        assert_false(json_object_get_boolean(v));
        assert_true(json_object_object_get_ex(p0, "note", &v));
        assert_non_null(strstr(json_object_get_string(v), "suppressed"));
        json_object_put(j);
        harness_output_deinit(&o);

        /* at the boundary point: exact, and right (10 copies below 20) */
        ofs_commit(r, "east", "g1", "clicks", 0, 20);
        if (ofs_aagw(r, words, &o) != 0)
                fail_msg("translate at 20:\n%s%s", o.out, o.err);
        assert_non_null(strstr(o.out, "\"translated\":10,\"exact\":true"));
        harness_output_deinit(&o);

        /* the mark is on the wire, as a header MM2 ignores */
        assert_int_equal(harness_kcat_consume(repl_bs(r, "east"),
                                              "mm2-offset-syncs.west.internal",
                                              "%o %h\n", OFS_TIMEOUT_MS, &l,
                                              r->errstr, sizeof(r->errstr)),
                         AAGW_OK);
        static struct syncs ours; /* this test's syncs among them */
        memset(&ours, 0, sizeof(ours));
        ours.topic = repl_topic(r, "clicks");
        ofs_read_raw(r, "east", "mm2-offset-syncs.west.internal", 0, on_sync,
                     &ours);
        for (size_t i = 0; i < l.cnt; i++)
                lossy += sync_at(&ours, strtoll(l.v[i], NULL, 10)) &&
                         strstr(l.v[i], AAGW_MM2_SYNC_LOSSY_HDR "=1") != NULL;
        assert_true(lossy >= 1);
        harness_lines_deinit(&l);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_internal_topics, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_sync_rate_bound, repl_setup,
                                            repl_teardown),
        };
        return cmocka_run_group_tests_name("offsets-internal", tests, NULL,
                                           NULL);
}
