/*
 * tests/unify/test_lww.c: last-write-wins converges.
 *
 * Both sites update 1,000 user profiles (entity key: the record key) in
 * interleaved chunks, with create timestamps drawn from a narrow range so
 * that many updates of one key share a millisecond, within a site and
 * across sites, and arrive out of timestamp order; some updates are
 * tombstones (null values, derived ids).  The test computes each key's
 * winner on its own, from what the producers were acknowledged: the
 * greatest (timestamp, origin alias, id), alias and id compared bytewise,
 * a shorter one first on a common prefix.  Each site's profiles.unified
 * must end with exactly that winner per key (the last record of the key),
 * and both sites must agree.
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

#include <json-c/json.h>

#include "unify.h"

#define KEYS     1000
#define PER_SITE 6000
#define CHUNK    1000
#define TS_SPAN  150 /* ms: plenty of equal timestamps */

struct ver {
        int64_t ts;
        char    origin[80];
        char    id[1100];
        bool    tomb;
        bool    set;
};

static int bytes_cmp(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        int    c  = memcmp(a, b, la < lb ? la : lb);
        return c ? c : (la > lb) - (la < lb);
}

static int ver_cmp(const struct ver *a, const struct ver *b) {
        if (a->ts != b->ts)
                return a->ts < b->ts ? -1 : 1;
        int c = bytes_cmp(a->origin, b->origin);
        return c ? c : bytes_cmp(a->id, b->id);
}

static struct ver want[KEYS];

static void produce_chunk(struct repl *r, const char *site, int from,
                          int64_t base, unsigned *seed) {
        struct urec *recs = calloc(CHUNK, sizeof(*recs));
        char(*kv)[2][160] = calloc(CHUNK, sizeof(*kv));
        int64_t     *offs  = calloc(CHUNK, sizeof(*offs));
        int32_t     *parts = calloc(CHUNK, sizeof(*parts));
        int         *keys  = calloc(CHUNK, sizeof(*keys));

        assert_true(recs && kv && offs && parts && keys);
        for (int i = 0; i < CHUNK; i++) {
                int  n    = from + i;
                bool tomb = rand_r(seed) % 50 == 0;
                keys[i]   = rand_r(seed) % KEYS;
                snprintf(kv[i][0], sizeof(kv[i][0]), "user-%d", keys[i]);
                snprintf(kv[i][1], sizeof(kv[i][1]),
                         "{\"update_id\":\"%s-%d\",\"user_id\":\"user-%d\","
                         "\"plan\":\"p%d\"}",
                         site, n, keys[i], n % 7);
                recs[i] = (struct urec){kv[i][0], tomb ? NULL : kv[i][1],
                                        base + rand_r(seed) % TS_SPAN, -1};
        }
        unify_produce(r, site, "profiles", recs, CHUNK, offs, parts);
        for (int i = 0; i < CHUNK; i++) {
                struct ver v = {.ts = recs[i].ts, .tomb = !recs[i].value,
                                .set = true};
                snprintf(v.origin, sizeof(v.origin), "%s", site);
                if (recs[i].value)
                        snprintf(v.id, sizeof(v.id), "%s-%d", site, from + i);
                else /* no update_id: the derived id */
                        snprintf(v.id, sizeof(v.id), "%s:%s:%d:%" PRId64,
                                 site, repl_topic(r, "profiles"),
                                 (int)parts[i], offs[i]);
                if (!want[keys[i]].set || ver_cmp(&v, &want[keys[i]]) > 0)
                        want[keys[i]] = v;
        }
        free(recs);
        free(kv);
        free(offs);
        free(parts);
        free(keys);
}

/* The last record of each key in profiles.unified at 'site'. */
static void winners(struct repl *r, const char *site, struct ver *got) {
        struct rrecs rs;
        int64_t      last_off[KEYS];

        memset(got, 0, KEYS * sizeof(*got));
        for (int k = 0; k < KEYS; k++)
                last_off[k] = -1;
        repl_read(r, site, "profiles.unified", &rs);
        for (size_t i = 0; i < rs.cnt; i++) {
                struct rprov pv;
                int          k;
                assert_int_equal(sscanf(rs.v[i].key, "user-%d", &k), 1);
                assert_true(k >= 0 && k < KEYS);
                if (rs.v[i].o < last_off[k])
                        continue;
                last_off[k] = rs.v[i].o;
                assert_int_equal(rrec_prov(&rs.v[i], &pv), 1);
                got[k].set  = true;
                got[k].ts   = rs.v[i].ts;
                got[k].tomb = !*rs.v[i].val;
                snprintf(got[k].origin, sizeof(got[k].origin), "%s",
                         pv.origin);
                snprintf(got[k].id, sizeof(got[k].id), "%s", pv.id);
        }
        rrecs_deinit(&rs);
}

static void test_convergence(void **state) {
        static const char *const sites[] = {"east", "west"};
        struct repl *r = repl_new(sites, 2);
        char         mode_key[200], id_key[200];
        const char  *extra[] = {"--set", mode_key, "--set", id_key, NULL};
        unsigned     seed = 20261129;
        int64_t      base = harness_now_ms() - 60000;
        static struct ver east[KEYS], west[KEYS];
        struct ustat st;

        *state = r;
        /* The per-topic keys name the (scoped) topic. */
        snprintf(mode_key, sizeof(mode_key), "unify.topics.%s.mode=lww",
                 repl_topic(r, "profiles"));
        snprintf(id_key, sizeof(id_key), "unify.topics.%s.id=json:update_id",
                 repl_topic(r, "profiles"));
        memset(want, 0, sizeof(want));
        repl_create_topic(r, NULL, "profiles", 4);
        repl_create_topic(r, "west", "east.profiles", 4);
        repl_create_topic(r, "east", "west.profiles", 4);
        unify_gw_start(r, "dedup", extra);

        /* Chunks alternate between the sites; each chunk's timestamps
         * overlap the previous ones, so later arrivals are often older. */
        for (int k = 0; k < PER_SITE; k += CHUNK) {
                produce_chunk(r, "east", k, base + k / 10, &seed);
                produce_chunk(r, "west", k, base + k / 10, &seed);
        }
        repl_expect_size(r, "west", "east.profiles", PER_SITE, 120000);
        repl_expect_size(r, "east", "west.profiles", PER_SITE, 120000);
        unify_wait_idle(r, "east", 2 * PER_SITE, 120000);
        unify_wait_idle(r, "west", 2 * PER_SITE, 120000);

        winners(r, "east", east);
        winners(r, "west", west);
        int keys_with_winner = 0;
        for (int k = 0; k < KEYS; k++) {
                if (!want[k].set) {
                        assert_false(east[k].set);
                        continue;
                }
                if (!east[k].set || ver_cmp(&east[k], &want[k]) ||
                    east[k].tomb != want[k].tomb)
                        fail_msg("user-%d at east: winner %" PRId64
                                 "/%s/%s, want %" PRId64 "/%s/%s",
                                 k, east[k].ts, east[k].origin, east[k].id,
                                 want[k].ts, want[k].origin, want[k].id);
                if (ver_cmp(&west[k], &east[k]) || west[k].tomb != east[k].tomb)
                        fail_msg("user-%d: east and west disagree (%s vs %s)",
                                 k, east[k].id, west[k].id);
                keys_with_winner++;
        }
        assert_true(keys_with_winner > KEYS * 9 / 10);
        /* Every input record has exactly one outcome. */
        for (int i = 0; i < 2; i++) {
                assert_true(unify_stat(r, sites[i], &st));
                assert_int_equal(st.records_in, 2 * PER_SITE);
                assert_int_equal(st.accepted + st.superseded + st.identical +
                                     st.rejected,
                                 2 * PER_SITE);
                assert_int_equal(st.rejected, 0);
                assert_true(st.superseded > 0);
                assert_int_equal(st.records_out, st.accepted);
        }
        /* aagw audit key: the stored winners are the same ones, at both
         * sites, for a sample of keys. */
        for (int k = 0; k < KEYS; k += 97) {
                char              key[32];
                void             *o[256];
                size_t            n;
                int               winners_seen = 0;
                const char *const args[] = {"key", key, NULL};
                if (!want[k].set)
                        continue;
                snprintf(key, sizeof(key), "user-%d", k);
                assert_int_equal(unify_audit(r, args, o, 256, &n, NULL, 0), 0);
                for (size_t i = 0; i < n; i++) {
                        json_object *v;
                        if (json_object_object_get_ex(o[i], "type", &v) &&
                            !strcmp(json_object_get_string(v), "winner")) {
                                winners_seen++;
                                assert_true(
                                    json_object_object_get_ex(o[i], "id", &v));
                                assert_string_equal(json_object_get_string(v),
                                                    want[k].id);
                                assert_true(json_object_object_get_ex(
                                    o[i], "topic", &v));
                                assert_string_equal(json_object_get_string(v),
                                                    repl_topic(r, "profiles"));
                        }
                        json_object_put(o[i]);
                }
                assert_int_equal(winners_seen, 2);
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_convergence, repl_setup,
                                            repl_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
