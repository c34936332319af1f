/* tests/offsets/test_failback.c: `aagw failover` between two sites that
 * both write (active-active), out and back again.
 *
 * east and west each write clicks (2 partitions); the gateway copies both
 * ways.  West's clicks [0] holds a run of records whose provenance names
 * east (a loop verdict: never copied), so west.clicks [0] at east skips
 * them and the translation back has to step over them.  Group g1 at east
 * has read part of clicks and of west.clicks.
 *
 * failover east -> west: east's clicks go forward onto east.clicks at
 * west (as before); g1's position in west.clicks goes back onto west's
 * clicks, its origin: the largest origin offset whose copies below it g1
 * has all read.  Then g1 reads on at west, and failover west -> east
 * (the failback) does the same the other way round; --dry-run first
 * commits nothing.  Every expected offset is worked out here from what
 * the test wrote, and read back from the clusters.
 *
 * test_via_origin: three sites (east, west, central: the clusters the
 * real-Kafka pass has), all active-active.  g1 at east has also read
 * central.clicks, a copy of a third site's topic; failover east -> west
 * moves it onto central.clicks at west through its origin: back through
 * central->east, forward through central->west (both skip a run of
 * central's records; west's copy starts after records it held before).
 * --dry-run first.  Then, with central not given to the command, its
 * rows say to give it; with central down (embedded clusters only), they
 * say so and the others still translate. */
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

#include "ofs.h"

/* West's clicks [0]: W_PLAIN plain records, W_LOOP that name east in
 * their provenance path (the flow west->east skips them), W_PLAIN more. */
#define W_PLAIN 4
#define W_LOOP 3

static json_object *field(json_object *j, const char *name) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(j, name, &v))
                fail_msg("failover report has no field %s: %s", name,
                         json_object_to_json_string(j));
        return v;
}

/* Both directions: the MM2 topics with one partition, clicks and the
 * copies with two. */
static struct repl *scene(void) {
        static const char *const sites[] = {"east", "west"};
        struct repl             *r       = repl_new(sites, 2);

        repl_create_topic(r, NULL, "clicks", 2);
        repl_create_topic(r, "west", "east.clicks", 2);
        repl_create_topic(r, "east", "west.clicks", 2);
        repl_create_topic(r, NULL, "heartbeats", 1);
        repl_create_topic(r, "west", "east.heartbeats", 1);
        repl_create_topic(r, "east", "west.heartbeats", 1);
        repl_create_topic(r, "east", "mm2-offset-syncs.west.internal", 1);
        repl_create_topic(r, "west", "mm2-offset-syncs.east.internal", 1);
        repl_create_topic(r, "west", "east.checkpoints.internal", 1);
        repl_create_topic(r, "east", "west.checkpoints.internal", 1);
        return r;
}

struct flow_pos {
        struct repl *r;
        const char  *src, *dst;
        int32_t      partition;
        int64_t      want, last;
};

/* The gateway's committed position of flow src->dst in clicks [p]. */
static bool flow_reached(void *arg) {
        struct flow_pos *f = arg;
        char             group[200];

        snprintf(group, sizeof(group), "aagw.%s.%s-%s",
                 repl_gateway_id(f->r), f->src, f->dst);
        f->last = ofs_committed(f->r, f->src, group, "clicks", f->partition);
        return f->last >= f->want;
}

static void wait_flow(struct repl *r, const char *src, const char *dst,
                      int32_t partition, int64_t want) {
        struct flow_pos f = {r, src, dst, partition, want, -1};

        if (!harness_wait_until(flow_reached, &f, OFS_TIMEOUT_MS)) {
                repl_dump_log(r, 40);
                fail_msg("%s->%s position of clicks [%d] is %" PRId64
                         ", expected %" PRId64,
                         src, dst, (int)partition, f.last, want);
        }
}

/* Run failover from 'from' to 'to' with --json ('dry' adds --dry-run);
 * the embedded cluster cannot tell about members, so --force there. */
static json_object *failover(struct repl *r, const char *from, const char *to,
                             bool dry) {
        const char      *w[16] = {"failover", "--group", "g1", "--from", from,
                                  "--to",     to,        "--json"};
        size_t           n     = 8;
        harness_output_t o;

        if (!repl_real(r))
                w[n++] = "--force";
        if (dry)
                w[n++] = "--dry-run";
        w[n]   = NULL;
        int rc = ofs_aagw(r, w, &o);
        fprintf(stderr, "# failover %s -> %s%s: %s", from, to,
                dry ? " (dry run)" : "", o.out);
        if (rc != 0)
                fail_msg("failover %s -> %s: exit %d\n%s%s", from, to, rc,
                         o.out, o.err);
        json_object *j = json_tokener_parse(o.out);
        harness_output_deinit(&o);
        assert_non_null(j);
        return j;
}

/* The row of 'j' for source topic 'topic' ['p']: its target topic,
 * translation and direction must be as given, exact, nothing re-read. */
static void expect_row(struct repl *r, json_object *j, const char *topic,
                       int p, const char *target, int64_t translated,
                       const char *direction, const char *action) {
        json_object *parts = field(j, "partitions");

        for (size_t i = 0; i < json_object_array_length(parts); i++) {
                json_object *e = json_object_array_get_idx(parts, i);
                if (strcmp(json_object_get_string(field(e, "topic")),
                           repl_topic(r, topic)) ||
                    json_object_get_int(field(e, "partition")) != p)
                        continue;
                assert_string_equal(
                    json_object_get_string(field(e, "target_topic")),
                    repl_topic(r, target));
                if (json_object_get_int64(field(e, "translated")) !=
                    translated)
                        fail_msg("%s [%d] -> %s: translated %" PRId64
                                 ", want %" PRId64 " (%s)",
                                 topic, p, target,
                                 json_object_get_int64(field(e, "translated")),
                                 translated,
                                 json_object_get_string(field(e, "note")));
                assert_true(json_object_get_boolean(field(e, "exact")));
                assert_int_equal(json_object_get_int64(field(e, "reread")), 0);
                assert_string_equal(
                    json_object_get_string(field(e, "direction")), direction);
                assert_string_equal(json_object_get_string(field(e, "action")),
                                    action);
                return;
        }
        fail_msg("no row for %s [%d]", topic, p);
}

/* ------------------------------------------------------ VIA ORIGIN -- */

/* central's clicks [0]: C_PLAIN plain records, C_LOOP whose provenance
 * path says they came from east (no flow copies them on), C_PLAIN more; west's
 * central.clicks [0] held C_OLD records before the gateway started. */
#define C_PLAIN 4
#define C_LOOP 3
#define C_OLD 3

static struct repl *scene3(void) {
        static const char *const sites[] = {"east", "west", "central"};
        struct repl             *r       = repl_new(sites, 3);
        char                     name[64];

        repl_create_topic(r, NULL, "clicks", 2);
        repl_create_topic(r, NULL, "heartbeats", 1);
        for (int s = 0; s < 3; s++)
                for (int d = 0; d < 3; d++) {
                        if (s == d)
                                continue;
                        snprintf(name, sizeof(name), "%s.clicks", sites[s]);
                        repl_create_topic(r, sites[d], name, 2);
                        snprintf(name, sizeof(name), "%s.heartbeats", sites[s]);
                        repl_create_topic(r, sites[d], name, 1);
                        snprintf(name, sizeof(name),
                                 "mm2-offset-syncs.%s.internal", sites[d]);
                        repl_create_topic(r, sites[s], name, 1);
                        snprintf(name, sizeof(name), "%s.checkpoints.internal",
                                 sites[s]);
                        repl_create_topic(r, sites[d], name, 1);
                }
        return r;
}

/* The row of 'topic' ['p'] in 'j' (fails if none). */
static json_object *row_of(struct repl *r, json_object *j, const char *topic,
                           int p) {
        json_object *parts = field(j, "partitions");

        for (size_t i = 0; i < json_object_array_length(parts); i++) {
                json_object *e = json_object_array_get_idx(parts, i);
                if (!strcmp(json_object_get_string(field(e, "topic")),
                            repl_topic(r, topic)) &&
                    json_object_get_int(field(e, "partition")) == p)
                        return e;
        }
        fail_msg("no row for %s [%d]: %s", topic, p,
                 json_object_to_json_string(j));
        return NULL;
}

static void test_via_origin(void **state) {
        struct repl             *r = scene3();
        char                     hdr[160];
        const char              *loop[] = {hdr, NULL};
        static const char *const gw[]   = {"--mode", "active-active", "--set",
                                           "mm2.heartbeats_interval=1s", NULL};

        *state = r;
        /* a record of east's that reached central (path east>central) */
        snprintf(hdr, sizeof(hdr),
                 "aagw.prov=1;east>central;%s:0:5;1714557600123:0;",
                 repl_topic(r, "clicks"));
        repl_produce(r, "east", "clicks", "e", 0, 6, 0, NULL, 0);
        repl_produce(r, "west", "clicks", "w", 0, 4, 0, NULL, 0);
        repl_produce(r, "central", "clicks", "c", 0, C_PLAIN, 0, NULL, 0);
        repl_produce(r, "central", "clicks", "l", C_PLAIN, C_LOOP, 0, loop, 0);
        repl_produce(r, "central", "clicks", "c", C_PLAIN + C_LOOP, C_PLAIN, 0,
                     NULL, 0);
        repl_produce(r, "central", "clicks", "x", 0, 3, 0, NULL, 1);
        repl_produce(r, "west", "central.clicks", "old", 0, C_OLD, 0, NULL, 0);
        repl_gw_start(r, gw);
        repl_expect_size(r, "east", "central.clicks", 2 * C_PLAIN + 3,
                         OFS_TIMEOUT_MS);
        repl_expect_size(r, "west", "central.clicks", C_OLD + 2 * C_PLAIN + 3,
                         OFS_TIMEOUT_MS);
        repl_expect_size(r, "west", "east.clicks", 6, OFS_TIMEOUT_MS);
        repl_expect_size(r, "east", "west.clicks", 4, OFS_TIMEOUT_MS);
        wait_flow(r, "central", "east", 0, 2 * C_PLAIN + C_LOOP);
        wait_flow(r, "central", "west", 0, 2 * C_PLAIN + C_LOOP);
        wait_flow(r, "central", "east", 1, 3);
        wait_flow(r, "central", "west", 1, 3);
        wait_flow(r, "east", "west", 0, 6);
        wait_flow(r, "west", "east", 0, 4);

        /* g1 at east: 4 of clicks [0], 2 of west.clicks [0]; in
         * central.clicks [0] the C_PLAIN copies before the skipped run
         * and one after it (origin C_PLAIN + C_LOOP): it resumes at
         * origin C_PLAIN + C_LOOP + 1, whose copy at west follows the
         * C_OLD records and the C_PLAIN + 1 copies of the origin records
         * below it; in central.clicks [1] at 2 (no skip, no older
         * records). */
        ofs_commit(r, "east", "g1", "clicks", 0, 4);
        ofs_commit(r, "east", "g1", "west.clicks", 0, 2);
        ofs_commit(r, "east", "g1", "central.clicks", 0, C_PLAIN + 1);
        ofs_commit(r, "east", "g1", "central.clicks", 1, 2);
        const int64_t want0 = C_OLD + C_PLAIN + 1;

        json_object *j = failover(r, "east", "west", true);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "dry-run");
        assert_int_equal(json_object_array_length(field(j, "partitions")), 4);
        expect_row(r, j, "central.clicks", 0, "central.clicks", want0,
                   "via-origin", "would commit");
        json_object *e = row_of(r, j, "central.clicks", 0);
        assert_string_equal(json_object_get_string(field(e, "origin_cluster")),
                            "central");
        assert_string_equal(json_object_get_string(field(e, "origin_topic")),
                            repl_topic(r, "clicks"));
        assert_int_equal(json_object_get_int64(field(e, "origin_offset")),
                         C_PLAIN + C_LOOP + 1);
        json_object_put(j);
        assert_int_equal(ofs_committed(r, "west", "g1", "central.clicks", 0),
                         -1);

        j = failover(r, "east", "west", false);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "committed");
        assert_int_equal(json_object_get_int64(field(j, "reread")), 0);
        expect_row(r, j, "clicks", 0, "east.clicks", 4, "forward", "committed");
        expect_row(r, j, "west.clicks", 0, "clicks", 2, "to-origin",
                   "committed");
        expect_row(r, j, "central.clicks", 0, "central.clicks", want0,
                   "via-origin", "committed");
        expect_row(r, j, "central.clicks", 1, "central.clicks", 2, "via-origin",
                   "committed");
        json_object_put(j);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), 4);
        assert_int_equal(ofs_committed(r, "west", "g1", "clicks", 0), 2);
        assert_int_equal(ofs_committed(r, "west", "g1", "central.clicks", 0),
                         want0);
        assert_int_equal(ofs_committed(r, "west", "g1", "central.clicks", 1),
                         2);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        /* Given east's and west's clusters only, central is no site to
         * the command: central.clicks looks like one of east's own
         * topics, with no offset-sync; its rows say what would move them
         * via their origin. */
        {
                const char      *w[] = {"offsets", "translate", "--group", "g1",
                                        "--from",  "east",      "--to",    "west",
                                        "--json",  NULL};
                harness_output_t o;
                size_t           nsites = r->nsites;
                r->nsites = 2; /* ofs_aagw() passes the first two sites' */
                int rc    = ofs_aagw(r, w, &o);
                r->nsites = nsites;
                fprintf(stderr, "# central not given: %s", o.out);
                assert_int_equal(rc, 1);
                j = json_tokener_parse(o.out);
                harness_output_deinit(&o);
                assert_non_null(j);
                e = row_of(r, j, "central.clicks", 0);
                assert_string_equal(
                    json_object_get_string(field(e, "direction")), "forward");
                assert_string_equal(
                    json_object_get_string(field(e, "target_topic")),
                    repl_topic(r, "east.central.clicks"));
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 -1);
                assert_non_null(strstr(json_object_get_string(field(e, "note")),
                                       "--cluster central=HOST:PORT"));
                json_object_put(j);
        }

        /* central down (its offset-syncs are kept there): its rows say so
         * and get no offset; east's and west's still translate. */
        if (!repl_real(r)) {
                const char      *w[] = {"offsets", "translate",
                                        "--group", "g1",
                                        "--from",  "east",
                                        "--to",    "west",
                                        "--json",  "--source-timeout",
                                        "1",       NULL};
                harness_output_t o;
                repl_set_brokers(r, "central", false);
                int rc = ofs_aagw(r, w, &o);
                fprintf(stderr, "# central down: %s", o.out);
                assert_int_equal(rc, 1);
                j = json_tokener_parse(o.out);
                harness_output_deinit(&o);
                assert_non_null(j);
                e = row_of(r, j, "central.clicks", 0);
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 -1);
                assert_false(json_object_get_boolean(field(e, "exact")));
                assert_non_null(strstr(json_object_get_string(field(e, "note")),
                                       "central did not answer"));
                assert_true(json_object_get_boolean(
                    field(row_of(r, j, "clicks", 0), "exact")));
                assert_true(json_object_get_boolean(
                    field(row_of(r, j, "west.clicks", 0), "exact")));
                json_object_put(j);
        } else
                print_message("# skip on real clusters: central down (it "
                              "would take a shared cluster's brokers "
                              "down)\n");
        ofs_done();
}

static void test_failback(void **state) {
        struct repl *r = scene();
        const char  *loop[] = {
            "aagw.prov=1;east>west;clicks:0:5;1714557600123:0;", NULL};
        static const char *const gw[] = {
            "--mode", "active-active", "--set", "mm2.heartbeats_interval=1s",
            NULL};

        *state = r;
        repl_produce(r, "east", "clicks", "e", 0, 12, 0, NULL, 0);
        repl_produce(r, "east", "clicks", "f", 0, 6, 0, NULL, 1);
        repl_produce(r, "west", "clicks", "w", 0, W_PLAIN, 0, NULL, 0);
        repl_produce(r, "west", "clicks", "l", W_PLAIN, W_LOOP, 0, loop, 0);
        repl_produce(r, "west", "clicks", "w", W_PLAIN + W_LOOP, W_PLAIN, 0,
                     NULL, 0);
        repl_produce(r, "west", "clicks", "x", 0, 5, 0, NULL, 1);
        repl_gw_start(r, gw);
        repl_expect_size(r, "west", "east.clicks", 18, OFS_TIMEOUT_MS);
        repl_expect_size(r, "east", "west.clicks", 2 * W_PLAIN + 5,
                         OFS_TIMEOUT_MS);
        wait_flow(r, "east", "west", 0, 12);
        wait_flow(r, "east", "west", 1, 6);
        wait_flow(r, "west", "east", 0, 2 * W_PLAIN + W_LOOP);
        wait_flow(r, "west", "east", 1, 5);

        /* g1 at east: 7 of clicks [0], 4 of [1]; all W_PLAIN copies before
         * the skipped run in west.clicks [0] (so at west it resumes past
         * the run, at the first record after it), 2 of [1]. */
        ofs_commit(r, "east", "g1", "clicks", 0, 7);
        ofs_commit(r, "east", "g1", "clicks", 1, 4);
        ofs_commit(r, "east", "g1", "west.clicks", 0, W_PLAIN);
        ofs_commit(r, "east", "g1", "west.clicks", 1, 2);

        json_object *j = failover(r, "east", "west", false);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "committed");
        assert_true(json_object_get_boolean(field(j, "committed")));
        assert_int_equal(json_object_get_int64(field(j, "reread")), 0);
        assert_int_equal(json_object_array_length(field(j, "partitions")), 4);
        expect_row(r, j, "clicks", 0, "east.clicks", 7, "forward",
                   "committed");
        expect_row(r, j, "clicks", 1, "east.clicks", 4, "forward",
                   "committed");
        expect_row(r, j, "west.clicks", 0, "clicks", W_PLAIN + W_LOOP,
                   "to-origin", "committed");
        expect_row(r, j, "west.clicks", 1, "clicks", 2, "to-origin",
                   "committed");
        json_object_put(j);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 0), 7);
        assert_int_equal(ofs_committed(r, "west", "g1", "east.clicks", 1), 4);
        assert_int_equal(ofs_committed(r, "west", "g1", "clicks", 0),
                         W_PLAIN + W_LOOP);
        assert_int_equal(ofs_committed(r, "west", "g1", "clicks", 1), 2);

        /* g1 reads on at west: east.clicks [0] to 10, west's clicks [0]
         * to one record past the run's end (W_PLAIN + W_LOOP + 1: the
         * copies of its first W_PLAIN + 1 plain records are below
         * W_PLAIN + 1 at east). */
        ofs_commit(r, "west", "g1", "east.clicks", 0, 10);
        ofs_commit(r, "west", "g1", "clicks", 0, W_PLAIN + W_LOOP + 1);

        /* The dry run says so and commits nothing. */
        j = failover(r, "west", "east", true);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "dry-run");
        assert_false(json_object_get_boolean(field(j, "committed")));
        expect_row(r, j, "east.clicks", 0, "clicks", 10, "to-origin",
                   "would commit");
        json_object_put(j);
        assert_int_equal(ofs_committed(r, "east", "g1", "clicks", 0), 7);
        assert_int_equal(ofs_committed(r, "east", "g1", "west.clicks", 0),
                         W_PLAIN);

        j = failover(r, "west", "east", false);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "committed");
        assert_int_equal(json_object_get_int64(field(j, "reread")), 0);
        expect_row(r, j, "east.clicks", 0, "clicks", 10, "to-origin",
                   "committed");
        expect_row(r, j, "east.clicks", 1, "clicks", 4, "to-origin",
                   "committed");
        expect_row(r, j, "clicks", 0, "west.clicks", W_PLAIN + 1, "forward",
                   "committed");
        expect_row(r, j, "clicks", 1, "west.clicks", 2, "forward",
                   "committed");
        json_object_put(j);
        assert_int_equal(ofs_committed(r, "east", "g1", "clicks", 0), 10);
        assert_int_equal(ofs_committed(r, "east", "g1", "clicks", 1), 4);
        assert_int_equal(ofs_committed(r, "east", "g1", "west.clicks", 0),
                         W_PLAIN + 1);
        assert_int_equal(ofs_committed(r, "east", "g1", "west.clicks", 1), 2);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        ofs_done();
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_failback, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_via_origin, repl_setup,
                                            repl_teardown),
        };
        return cmocka_run_group_tests_name("offsets-failback", tests, NULL,
                                           NULL);
}
