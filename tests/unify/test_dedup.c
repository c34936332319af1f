/*
 * tests/unify/test_dedup.c: cross-site duplicates end up once in each
 * site's unified stream.
 *
 * east writes events e0..e9999 and west e5000..e14999 (the overlap is the
 * clients that retried at the other data center), in alternating chunks
 * while the gateway runs.  Each site's clicks.unified must hold each of
 * the 15,000 ids exactly once, with provenance naming that id, and the
 * stage's figures must add up (accepted 15,000, dropped 5,000).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "unify.h"

#define PER_SITE 10000
#define OVERLAP  5000
#define UNIQUE   (2 * PER_SITE - OVERLAP)
#define CHUNK    500

static void produce_chunk(struct repl *r, const char *site, int from,
                          int cnt) {
        struct urec *recs = calloc((size_t)cnt, sizeof(*recs));
        char(*kv)[2][128] = calloc((size_t)cnt, sizeof(*kv));

        assert_non_null(recs);
        assert_non_null(kv);
        for (int i = 0; i < cnt; i++) {
                int n = from + i;
                snprintf(kv[i][0], sizeof(kv[i][0]), "u%d", n % 97);
                snprintf(kv[i][1], sizeof(kv[i][1]),
                         "{\"event_id\":\"e%d\",\"user_id\":\"u%d\","
                         "\"page\":\"/p/%d\",\"site\":\"%s\"}",
                         n, n % 97, n % 13, site);
                recs[i] = (struct urec){kv[i][0], kv[i][1], 0, -1};
        }
        unify_produce(r, site, "clicks", recs, (size_t)cnt, NULL, NULL);
        free(recs);
        free(kv);
}

static void check_site(struct repl *r, const char *site) {
        struct rrecs rs;
        struct ustat st;
        char        *seen = calloc(UNIQUE, 1);
        char         id[64], hdr[512], want[300];
        int          local_stamped = 0, from_remote = 0;

        assert_non_null(seen);
        assert_true(unify_stat(r, site, &st));
        assert_int_equal(st.records_in, 2 * PER_SITE);
        assert_int_equal(st.accepted, UNIQUE);
        assert_int_equal(st.dropped, OVERLAP);
        assert_int_equal(st.records_out, UNIQUE);

        repl_read(r, site, "clicks.unified", &rs);
        if (rs.cnt != UNIQUE)
                fail_msg("%s: clicks.unified holds %zu records, want %d",
                         site, rs.cnt, UNIQUE);
        for (size_t i = 0; i < rs.cnt; i++) {
                struct rprov pv;
                assert_true(unify_json_field(rs.v[i].val, "event_id", id,
                                             sizeof(id)));
                int n = atoi(id + 1);
                assert_true(n >= 0 && n < UNIQUE);
                if (seen[n]++)
                        fail_msg("%s: %s twice in clicks.unified", site, id);
                /* Provenance names the same id; the input coordinates
                 * say where the stage read it: aagw.in for a record that
                 * came with provenance (a remote copy), the provenance's
                 * source for one the stage stamped (local, one hop). */
                assert_int_equal(rrec_prov(&rs.v[i], &pv), 1);
                assert_string_equal(pv.id, id);
                int nin = rrec_hdr(&rs.v[i], "aagw.in", hdr, sizeof(hdr));
                if (nin == 0) {
                        assert_string_equal(pv.path, site);
                        snprintf(want, sizeof(want), "%s:",
                                 repl_topic(r, "clicks"));
                        assert_true(!strncmp(pv.src, want, strlen(want)));
                        local_stamped++;
                } else {
                        assert_int_equal(nin, 1);
                        assert_true(strcmp(pv.path, site) != 0);
                        const char *e = repl_topic(r, "east.clicks");
                        const char *w = repl_topic(r, "west.clicks");
                        assert_true(
                            (!strncmp(hdr, e, strlen(e)) &&
                             hdr[strlen(e)] == ':') ||
                            (!strncmp(hdr, w, strlen(w)) &&
                             hdr[strlen(w)] == ':'));
                        from_remote++;
                }
        }
        /* Both kinds are there: a third of the ids exist only at the
         * other site, a third only here. */
        assert_true(local_stamped >= UNIQUE / 3 && from_remote >= UNIQUE / 3);
        assert_int_equal(local_stamped + from_remote, UNIQUE);
        rrecs_deinit(&rs);
        free(seen);
}

static const char *jstr(void *o, const char *name) {
        json_object *v;
        return json_object_object_get_ex(o, name, &v) ? json_object_get_string(v)
                                                      : "";
}

static int64_t jint(void *o, const char *name) {
        json_object *v;
        return json_object_object_get_ex(o, name, &v) ? json_object_get_int64(v)
                                                      : -1;
}

/* aagw audit while the gateway runs (a secondary instance). */
static void check_audit(struct repl *r) {
        void  *o[16];
        size_t n;
        char   err[512];

        /* e5000 was written at both sites: each site's stream delivered
         * it once (first seen, from its seen-id entry) and dropped the
         * other copy.  Deliveries themselves are not in the audit log
         * by default (unify.audit_accepted). */
        const char *const id[] = {"id", "e5000", NULL};
        assert_int_equal(unify_audit(r, id, o, 16, &n, err, sizeof(err)), 0);
        int first = 0, acc = 0, dropped = 0;
        for (size_t i = 0; i < n; i++) {
                if (!strcmp(jstr(o[i], "type"), "first_seen")) {
                        first++;
                        assert_string_equal(jstr(o[i], "id"), "e5000");
                } else if (!strcmp(jstr(o[i], "verdict"), "accepted"))
                        acc++;
                else if (!strcmp(jstr(o[i], "verdict"), "dropped"))
                        dropped++;
                json_object_put(o[i]);
        }
        assert_int_equal(first, 2);
        assert_int_equal(acc, 0);
        assert_int_equal(dropped, 2);

        /* e42 was written at east only: first seen at both, dropped
         * nowhere. */
        const char *const id42[] = {"id", "e42", NULL};
        assert_int_equal(unify_audit(r, id42, o, 16, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2); /* 2 first_seen */
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(jstr(o[i], "origin"), "east");
                json_object_put(o[i]);
        }

        const char *const sum[] = {"summary", NULL};
        assert_int_equal(unify_audit(r, sum, o, 16, &n, err, sizeof(err)), 0);
        assert_true(n >= 1);
        assert_string_equal(jstr(o[0], "type"), "summary");
        assert_int_equal(jint(o[0], "accepted"), 0);
        assert_int_equal(jint(o[0], "dropped"), 2 * OVERLAP);
        for (size_t i = 0; i < n; i++)
                json_object_put(o[i]);

        const char *const none[] = {"id", "e999999", NULL};
        assert_int_equal(unify_audit(r, none, o, 16, &n, err, sizeof(err)), 1);
        assert_int_equal(n, 0);
        assert_non_null(strstr(err, "not found in the last 24h window"));
}

static void test_cross_site_duplicates(void **state) {
        static const char *const sites[] = {"east", "west"};
        const char *const extra[] = {"--id", "json:event_id", NULL};
        struct repl      *r = repl_new(sites, 2);

        *state = r;

        repl_create_topic(r, NULL, "clicks", 4);
        repl_create_topic(r, "west", "east.clicks", 4);
        repl_create_topic(r, "east", "west.clicks", 4);
        unify_gw_start(r, "dedup", extra);

        /* east: e0..e9999, west: e5000..e14999, interleaved. */
        for (int k = 0; k < PER_SITE; k += CHUNK) {
                produce_chunk(r, "east", k, CHUNK);
                produce_chunk(r, "west", OVERLAP + k, CHUNK);
        }
        repl_expect_size(r, "west", "east.clicks", PER_SITE, 120000);
        repl_expect_size(r, "east", "west.clicks", PER_SITE, 120000);
        unify_wait_idle(r, "east", 2 * PER_SITE, 120000);
        unify_wait_idle(r, "west", 2 * PER_SITE, 120000);
        check_site(r, "east");
        check_site(r, "west");
        /* Unified topics are never replicated. */
        assert_false(repl_topic_listed(r, "west", "east.clicks.unified"));
        assert_false(repl_topic_listed(r, "east", "west.clicks.unified"));
        check_audit(r);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_cross_site_duplicates,
                                            repl_setup, repl_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
