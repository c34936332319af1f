/* tests/replication/test_mesh.c: three sites, east, west and central.
 *
 *  (a) active-active mesh (six flows), multi_hop off: every record reaches
 *      every site exactly once, straight from its origin; no remote topic
 *      is re-replicated.
 *  (b) a ring with explicit flows east->west, west->central,
 *      central->east and multi_hop on: records travel two hops, reach
 *      every site exactly once and never come back to their origin, also
 *      across a SIGKILL and a restart without state in the middle.
 *
 * "Exactly once" is counted by global id over every topic of a site: the
 * derived id of a local record, the id in the aagw.prov header of a copy
 * (the derived id again when it is left empty). */
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
#define PER_SITE 1500
#define KEYS 300
#define NSITES 3
#define REPL_TIMEOUT_MS 90000

static const char *const sites[NSITES] = {"east", "west", "central"};


static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ids a site holds, one per record, across 'topics' (the local
 * "clicks" first): asserts that together they are exactly the ids of
 * every record produced at every site, each once.  'local' is the local
 * clicks read of each site, for the expected ids. */
static void expect_ids_once(struct repl *r, const char *site,
                            const char *const *topics, size_t ntopics,
                            const struct rrecs local[NSITES]) {
        size_t want_cnt = 0, got_cnt = 0;
        char **want, **got;

        for (size_t s = 0; s < NSITES; s++)
                want_cnt += local[s].cnt;
        want = calloc(want_cnt, sizeof(*want));
        got  = calloc(want_cnt + 1, sizeof(*got));
        assert_non_null(want);
        assert_non_null(got);
        want_cnt = 0;
        for (size_t s = 0; s < NSITES; s++)
                for (size_t i = 0; i < local[s].cnt; i++)
                        assert_true(asprintf(&want[want_cnt++],
                                             "%s:%s:%d:%" PRId64, sites[s],
                                             repl_topic(r, "clicks"),
                                             (int)local[s].v[i].p,
                                             local[s].v[i].o) > 0);
        for (size_t t = 0; t < ntopics; t++) {
                struct rrecs rs;
                char         id[1100];
                struct rprov pv;

                repl_read(r, site, topics[t], &rs);
                for (size_t i = 0; i < rs.cnt; i++) {
                        if (got_cnt == want_cnt)
                                fail_msg("%s holds more records than were "
                                         "produced (%s)",
                                         site, topics[t]);
                        if (rrec_prov(&rs.v[i], &pv) == 0) {
                                /* A local record: its derived id. */
                                assert_string_equal(topics[t], "clicks");
                                snprintf(id, sizeof(id), "%s:%s:%d:%" PRId64,
                                         site, repl_topic(r, "clicks"),
                                         (int)rs.v[i].p, rs.v[i].o);
                        } else {
                                /* A copy never comes back to its origin. */
                                assert_true(pv.id[0] != '\0');
                                snprintf(id, sizeof(id), "%s", pv.id);
                                assert_string_not_equal(pv.origin, site);
                        }
                        got[got_cnt] = strdup(id);
                        assert_non_null(got[got_cnt]);
                        got_cnt++;
                }
                rrecs_deinit(&rs);
        }
        qsort(want, want_cnt, sizeof(*want), cmp_str);
        qsort(got, got_cnt, sizeof(*got), cmp_str);
        if (got_cnt != want_cnt)
                fail_msg("%s holds %zu records, expected %zu", site, got_cnt,
                         want_cnt);
        for (size_t i = 0; i < want_cnt; i++) {
                if (i > 0 && !strcmp(got[i], got[i - 1]))
                        fail_msg("%s holds id %s twice", site, got[i]);
                assert_string_equal(got[i], want[i]);
        }
        for (size_t i = 0; i < want_cnt; i++) {
                free(want[i]);
                free(got[i]);
        }
        free(want);
        free(got);
}

static void produce_all(struct repl *r, int from, int cnt) {
        const char *hdrs[] = {"trace=mesh", NULL};

        for (size_t s = 0; s < NSITES; s++)
                repl_produce(r, sites[s], "clicks", sites[s], from, cnt, KEYS,
                             hdrs, -1);
}

/* ------------------------------ (a) MESH -------------------------------- */

static void test_mesh_active_active(void **state) {
        static const char *const extra[] = {"--mode", "active-active", "--set",
                                            "replication.multi_hop=false",
                                            NULL};
        struct repl             *r       = repl_new(sites, NSITES);
        struct rrecs             local[NSITES];
        char                     name[64], path[64];

        *state = r;
        repl_create_topic(r, NULL, "clicks", PARTS);
        for (size_t s = 0; s < NSITES; s++)
                for (size_t o = 0; o < NSITES; o++)
                        if (o != s) {
                                snprintf(name, sizeof(name), "%s.clicks",
                                         sites[o]);
                                repl_create_topic(r, sites[s], name, PARTS);
                        }
        produce_all(r, 0, PER_SITE / 2);
        repl_gw_start(r, extra);
        produce_all(r, PER_SITE / 2, PER_SITE / 2);
        for (size_t s = 0; s < NSITES; s++)
                for (size_t o = 0; o < NSITES; o++)
                        if (o != s) {
                                snprintf(name, sizeof(name), "%s.clicks",
                                         sites[o]);
                                repl_expect_size(r, sites[s], name, PER_SITE,
                                                 REPL_TIMEOUT_MS);
                        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        for (size_t s = 0; s < NSITES; s++) {
                repl_read(r, sites[s], "clicks", &local[s]);
                assert_int_equal(local[s].cnt, PER_SITE);
        }
        /* Each direct copy exact, in order, with its path. */
        for (size_t s = 0; s < NSITES; s++)
                for (size_t o = 0; o < NSITES; o++) {
                        struct rrecs copy;

                        if (o == s)
                                continue;
                        snprintf(name, sizeof(name), "%s.clicks", sites[o]);
                        snprintf(path, sizeof(path), "%s>%s", sites[o],
                                 sites[s]);
                        repl_read(r, sites[s], name, &copy);
                        repl_check_copy(&local[o], "clicks", sites[o], &copy,
                                        path);
                        assert_int_equal(copy.cnt, PER_SITE);
                        rrecs_deinit(&copy);
                }
        /* Every id at every site exactly once, across all its topics. */
        for (size_t s = 0; s < NSITES; s++) {
                const char *topics[NSITES];
                char        names[NSITES][64];
                size_t      n = 0;

                topics[n++] = "clicks";
                for (size_t o = 0; o < NSITES; o++)
                        if (o != s) {
                                snprintf(names[n], sizeof(names[n]),
                                         "%s.clicks", sites[o]);
                                topics[n] = names[n];
                                n++;
                        }
                expect_ids_once(r, sites[s], topics, n, local);
                /* Nothing else: re-replicating a remote topic would add
                 * e.g. west.east.clicks at central. */
                repl_expect_topics(r, sites[s], topics, n);
        }
        for (size_t s = 0; s < NSITES; s++)
                rrecs_deinit(&local[s]);
}

/* ------------------------------ (b) RING -------------------------------- */

/* A two-hop copy: 'dst' (at the third site) must hold each record of
 * 'mid' (the first copy, read at the second site) once, in
 * order, with the origin's provenance, the full path, and aagw.hop giving
 * the coordinates the second hop read. */
static void check_second_hop(const struct rrecs *mid, const struct rrecs *dst,
                             const char *path) {
        char want[512], got[512], a[1024], b[1024];

        assert_int_equal(dst->cnt, mid->cnt);
        for (int32_t p = 0; p < PARTS; p++) {
                size_t i = 0, j = 0;

                for (;;) {
                        while (i < mid->cnt && mid->v[i].p != p)
                                i++;
                        while (j < dst->cnt && dst->v[j].p != p)
                                j++;
                        if (i == mid->cnt || j == dst->cnt)
                                break;
                        const struct rrec *x = &mid->v[i], *y = &dst->v[j];
                        assert_string_equal(x->key, y->key);
                        assert_string_equal(x->val, y->val);
                        assert_int_equal(x->ts, y->ts);
                        rrec_hdrs_without(x, "aagw.", a, sizeof(a));
                        rrec_hdrs_without(y, "aagw.", b, sizeof(b));
                        assert_string_equal(a, b);
                        /* Origin, id, coordinates and clock travel
                         * unchanged (the derived id stays left out); the
                         * path grows by the hop. */
                        struct rprov px, py;
                        assert_int_equal(rrec_prov(x, &px), 1);
                        assert_int_equal(rrec_prov(y, &py), 1);
                        assert_string_equal(py.origin, px.origin);
                        assert_string_equal(py.id_raw, px.id_raw);
                        assert_string_equal(py.id_raw, "");
                        assert_string_equal(py.src, px.src);
                        assert_string_equal(py.hlc, px.hlc);
                        assert_string_equal(py.path, path);
                        assert_int_equal(
                            rrec_hdr(y, "aagw.hop", got, sizeof(got)), 1);
                        /* the topic the second hop read (scoped) */
                        snprintf(want, sizeof(want), "%s:%d:%" PRId64,
                                 mid->topic, (int)p, x->o);
                        assert_string_equal(got, want);
                        i++;
                        j++;
                }
                /* Both ran out together: same count per partition. */
                while (i < mid->cnt && mid->v[i].p != p)
                        i++;
                while (j < dst->cnt && dst->v[j].p != p)
                        j++;
                assert_true(i == mid->cnt && j == dst->cnt);
        }
}

static void test_ring_multi_hop(void **state) {
        static const char *const extra[] = {
            "--set", "replication.flows=east->west",
            "--set", "replication.flows=west->central",
            "--set", "replication.flows=central->east",
            "--set", "replication.multi_hop=true",
            NULL};
        /* Per site: the one-hop copy from its ring predecessor and the
         * two-hop copy from the site before that. */
        static const struct {
                const char *site, *hop1, *hop2;
        } ring[NSITES] = {
            {"east", "central.clicks", "central.west.clicks"},
            {"west", "east.clicks", "east.central.clicks"},
            {"central", "west.clicks", "west.east.clicks"},
        };
        struct repl *r = repl_new(sites, NSITES);
        struct rrecs local[NSITES];

        *state = r;
        repl_create_topic(r, NULL, "clicks", PARTS);
        for (size_t s = 0; s < NSITES; s++) {
                repl_create_topic(r, ring[s].site, ring[s].hop1, PARTS);
                repl_create_topic(r, ring[s].site, ring[s].hop2, PARTS);
        }
        produce_all(r, 0, PER_SITE / 2);
        repl_gw_start(r, extra);
        /* A crash once second hops are under way, and a restart without
         * state: reconciling a second-hop copy finds this flow's records
         * by their aagw.hop coordinates, not by the origin coordinates in
         * aagw.prov. */
        repl_expect_size(r, "central", "west.east.clicks", 1, REPL_TIMEOUT_MS);
        assert_int_equal(repl_gw_stop(r, SIGKILL, REPL_STOP_TIMEOUT_MS),
                         128 + SIGKILL);
        assert_int_equal(harness_rmtree(r->state), 0);
        repl_gw_start(r, extra);
        produce_all(r, PER_SITE / 2, PER_SITE / 2);
        for (size_t s = 0; s < NSITES; s++) {
                repl_expect_size(r, ring[s].site, ring[s].hop1, PER_SITE,
                                 REPL_TIMEOUT_MS);
                repl_expect_size(r, ring[s].site, ring[s].hop2, PER_SITE,
                                 REPL_TIMEOUT_MS);
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        for (size_t s = 0; s < NSITES; s++) {
                repl_read(r, sites[s], "clicks", &local[s]);
                assert_int_equal(local[s].cnt, PER_SITE);
        }
        /* First hops: fresh provenance, exact, in order. */
        {
                struct rrecs c;

                repl_read(r, "west", "east.clicks", &c);
                repl_check_copy(&local[0], "clicks", "east", &c, "east>west");
                rrecs_deinit(&c);
                repl_read(r, "central", "west.clicks", &c);
                repl_check_copy(&local[1], "clicks", "west", &c,
                                "west>central");
                rrecs_deinit(&c);
                repl_read(r, "east", "central.clicks", &c);
                repl_check_copy(&local[2], "clicks", "central", &c,
                                "central>east");
                rrecs_deinit(&c);
        }
        /* Second hops: the first copy, copied on, path extended. */
        {
                static const struct {
                        const char *mid_site, *mid, *dst_site, *dst, *path;
                } hops[] = {
                    {"west", "east.clicks", "central", "west.east.clicks",
                     "east>west>central"},
                    {"central", "west.clicks", "east", "central.west.clicks",
                     "west>central>east"},
                    {"east", "central.clicks", "west", "east.central.clicks",
                     "central>east>west"},
                };
                for (size_t h = 0; h < 3; h++) {
                        struct rrecs mid, dst;

                        repl_read(r, hops[h].mid_site, hops[h].mid, &mid);
                        repl_read(r, hops[h].dst_site, hops[h].dst, &dst);
                        check_second_hop(&mid, &dst, hops[h].path);
                        rrecs_deinit(&mid);
                        rrecs_deinit(&dst);
                }
        }
        /* Every id everywhere exactly once; none back home. */
        for (size_t s = 0; s < NSITES; s++) {
                const char *topics[] = {"clicks", ring[s].hop1, ring[s].hop2};
                expect_ids_once(r, ring[s].site, topics, 3, local);
        }
        /* Nothing else at any site: a third hop (back to the origin, e.g.
         * central.west.east.clicks at east) or a wrong-way copy would show
         * up here. */
        for (size_t s = 0; s < NSITES; s++) {
                const char *topics[] = {"clicks", ring[s].hop1, ring[s].hop2};
                repl_expect_topics(r, ring[s].site, topics, 3);
        }
        for (size_t s = 0; s < NSITES; s++)
                rrecs_deinit(&local[s]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_mesh_active_active, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_ring_multi_hop, repl_setup,
                                            repl_teardown),
        };

        return cmocka_run_group_tests_name("replication-mesh", tests, NULL,
                                           NULL);
}
