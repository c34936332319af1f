/*
 * tests/realkafka/test_scale_migrate.c: a site whose unify stage ran in
 * one process without scale-out switches to scale-out, and nothing is
 * delivered twice.
 *
 * The scale-out owners find no changelog for any output partition: the
 * state the single process decided is only in its RocksDB.  Each owner
 * rebuilds a gained partition's state from the unified topic itself
 * (replicator/unify.c, unify_scale_seed(): the ids each record names, and past
 * which input offset each input partition was delivered there) and
 * writes it to the changelogs, so that later owners restore it.
 *
 * One broker (west); east named but not started, as in
 * test_scale_unify.c.  Dedup topic `clicks` and its remote copy
 * `east.clicks` (id = record key, 3 partitions each), `clicks.unified`
 * 6 partitions.
 *
 *  1. One process without scale-out unifies c0..c299 (from `clicks`);
 *     c0..c99 arrive again at `east.clicks` and are dropped.  It stops.
 *  2. Members a and b (`--scale-out true`, new state directories) start.
 *     c0..c149 arrive again at `east.clicks`, then c300..c399 (new).
 *     Once both members' inputs have no lag, clicks.unified read
 *     read_committed holds c0..c399 each exactly once, and the members
 *     logged a rebuild for each of the 6 output partitions.
 *  3. a stops, so b owns every partition: b restores them from the
 *     changelogs the rebuild wrote (no rebuild again), and c100..c199
 *     arriving once more are dropped.  The members run with
 *     scale_out.standby: b kept a warm copy of a's partitions, so its
 *     restore reads on from its standby's offsets (the partitions it
 *     gained are warm, and it reads fewer changelog records than a's
 *     partitions hold), and c400..c449 are delivered once.
 *
 * The same for the lww topic `profiles` (20 keys, versions with
 * increasing timestamps; `east.profiles` gets stale versions again):
 * profiles.unified holds each version once, each key's last record its
 * newest, through the single process, the switch (rebuilt winners: the
 * stale versions are dropped) and the warm takeover.
 *
 * Without the rebuild (empty changelogs), step 2 decides the inputs from
 * their beginning and delivers c0..c299 a second time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rk.h"

#define IN_PARTS  3
#define OUT_PARTS 6
#define DONE      "rebalance done"
#define REBUILT   "its state was rebuilt from them"
#define KEYS      20
#define LWW_PARTS 2

/* Versions 'from'..'to' of every lww key k<j> to 'topic' at west: value
 * k<j>.<v>, timestamp t0 + 10 v (a version sent again keeps its
 * timestamp); all acknowledged. */
static void put_versions(struct rk *r, const char *topic, int64_t t0,
                         int from, int to) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "west"), err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "enable.idempotence", "true",
                                           err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                     sizeof(err));
        assert_non_null(p);
        for (int v = from; v <= to; v++)
                for (int j = 0; j < KEYS; j++) {
                        char key[16], val[32];
                        snprintf(key, sizeof(key), "k%d", j);
                        snprintf(val, sizeof(val), "k%d.%d", j, v);
                        assert_int_equal(
                            rd_kafka_producev(
                                p, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_PARTITION(j % LWW_PARTS),
                                RD_KAFKA_V_KEY(key, strlen(key)),
                                RD_KAFKA_V_VALUE(val, strlen(val)),
                                RD_KAFKA_V_TIMESTAMP(t0 + 10 * v),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END),
                            RD_KAFKA_RESP_ERR_NO_ERROR);
                }
        assert_int_equal(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
        assert_int_equal(rd_kafka_outq_len(p), 0);
        rd_kafka_destroy(p);
}

/* profiles.unified holds versions 0..'newest' of every key once each,
 * and each key's last record is its version 'newest'. */
static void expect_versions(struct rk *r, int newest) {
        static int        reads;
        const char *const topics[] = {"profiles.unified", NULL};
        char              name[32];
        int64_t           deadline = harness_now_ms() + 30000;

        /* (As in expect_once(): the last commit may come a moment after
         * lag 0.) */
        while (rk_count(r, "west", "profiles.unified", "read_committed",
                        NULL) < KEYS * (newest + 1) &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 200 * 1000000L};
                nanosleep(&ts, NULL);
        }
        snprintf(name, sizeof(name), "read-profiles-%d", ++reads);
        char *out = rk_read_topics(r, "west", name, topics);
        struct rk_read pu;
        int            last[KEYS], doubled = 0, wrong = 0, missing = 0;

        rk_read_parse(out, "profiles.unified", &pu);
        assert_true(pu.done);
        /* (Doubled versions are counted per version below.) */
        (void)rk_lww_last(&pu, "profiles.unified", KEYS, last);
        for (int j = 0; j < KEYS; j++) {
                for (int v = 0; v <= newest; v++) {
                        char    val[32];
                        snprintf(val, sizeof(val), "k%d.%d", j, v);
                        int64_t k = rk_bag_count(pu.values, val);
                        missing += k == 0;
                        doubled += k > 1;
                }
                wrong += last[j] != newest;
        }
        print_message("# profiles.unified: %" PRId64 " records, want %d; %d "
                      "missing, %d doubled, %d keys not at version %d\n",
                      pu.records, KEYS * (newest + 1), missing, doubled,
                      wrong, newest);
        assert_int_equal(missing, 0);
        assert_int_equal(doubled, 0);
        assert_int_equal(wrong, 0);
        assert_int_equal(pu.records, KEYS * (newest + 1));
        rk_read_deinit(&pu);
        free(out);
}

static const char *const single_args[] = {
    "--cluster", "east=127.0.0.1:9", "--site", "west", "--id", "key",
    "--topic", "clicks", "--topic", "profiles",
    "--set", "unify.topics.profiles.mode=lww",
    "--admin", "127.0.0.1:0", NULL};

static const char *const scale_args[] = {
    "--cluster", "east=127.0.0.1:9", "--site", "west", "--id", "key",
    "--topic", "clicks", "--topic", "profiles",
    "--set", "unify.topics.profiles.mode=lww",
    "--scale-out", "true",
    "--set", "scale_out.work_partitions=6",
    "--set", "scale_out.session_timeout=6s",
    "--set", "scale_out.transaction_timeout=10s",
    "--set", "scale_out.standby=true",
    "--admin", "127.0.0.1:0", NULL};

/* Whether every running member's unify stage runs with no input lag, by
 * its /status. */
struct caught {
        struct rk_gw *g;
        size_t        n;
};

static bool caught_up(void *arg) {
        struct caught *c = arg;

        for (size_t i = 0; i < c->n; i++) {
                if (!c->g[i].proc)
                        continue;
                char        *body = rk_gwn_http_get(&c->g[i], "/status");
                json_object *st   = body ? json_tokener_parse(body) : NULL;
                json_object *un, *v;
                bool         ok   = false;
                free(body);
                if (st && json_object_object_get_ex(st, "unify", &un) &&
                    json_object_array_length(un) == 1) {
                        json_object *u = json_object_array_get_idx(un, 0);
                        ok = json_object_object_get_ex(u, "state", &v) &&
                             !strcmp(json_object_get_string(v), "running") &&
                             json_object_object_get_ex(u, "lag", &v) &&
                             json_object_get_type(v) == json_type_int &&
                             json_object_get_int64(v) == 0;
                }
                json_object_put(st);
                if (!ok)
                        return false;
        }
        return true;
}

/* The counts of the last restore line in 'path': records read and
 * partitions warm; false if there is none. */
static bool last_restore(const char *path, long *records, int *warm) {
        char       *text = harness_read_file(path, NULL);
        const char *at = NULL, *p = text;

        while (p && (p = strstr(p, " from their changelogs: ")))
                at = p++;
        bool ok = at && sscanf(at, " from their changelogs: %ld records",
                               records) == 1;
        const char *w = ok ? strstr(at, " of them past unify.window: skipped; ")
                           : NULL;
        ok = ok && w &&
             sscanf(w, " of them past unify.window: skipped; %d partitions "
                       "warm",
                    warm) == 1;
        free(text);
        return ok;
}

/* Every id c<from>..c<to - 1> exactly once in clicks.unified, nothing
 * else; prints what is wrong. */
static void expect_once(struct rk *r, int from, int to) {
        struct rk_bag *vals = rk_bag_new();
        int64_t        n, deadline = harness_now_ms() + 30000;
        int            missing = 0, doubled = 0;

        /* Lag 0 says the inputs were read; the last transaction may
         * commit a moment later. */
        while ((n = rk_count(r, "west", "clicks.unified", "read_committed",
                             vals)) < to - from &&
               harness_now_ms() < deadline) {
                rk_bag_destroy(vals);
                vals = rk_bag_new();
                struct timespec ts = {0, 200 * 1000000L};
                nanosleep(&ts, NULL);
        }

        for (int i = from; i < to; i++) {
                char    id[16];
                snprintf(id, sizeof(id), "c%d", i);
                int64_t k = rk_bag_count(vals, id);
                if (k == 0 && !missing++)
                        print_message("# first missing: %s\n", id);
                if (k > 1 && !doubled++)
                        print_message("# first doubled: %s (%" PRId64
                                      " times)\n",
                                      id, k);
        }
        print_message("# clicks.unified: %" PRId64 " records, want %d; %d "
                      "missing, %d doubled\n",
                      n, to - from, missing, doubled);
        rk_bag_destroy(vals);
        assert_int_equal(missing, 0);
        assert_int_equal(doubled, 0);
        assert_int_equal(n, to - from);
}

static void test_scale_migrate(void **state) {
        struct rk   *r = rk_new("rk-scale-migrate");
        struct rk_gw one, g[2];

        *state = r;
        memset(&one, 0, sizeof(one));
        memset(g, 0, sizeof(g));
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "west", "clicks", IN_PARTS, 1, 0);
        rk_create_topic(r, "west", "east.clicks", IN_PARTS, 1, 0);
        rk_create_topic(r, "west", "clicks.unified", OUT_PARTS, 1, 0);
        rk_create_topic(r, "west", "profiles", LWW_PARTS, 1, 0);
        rk_create_topic(r, "west", "east.profiles", LWW_PARTS, 1, 0);
        rk_create_topic(r, "west", "profiles.unified", 4, 1, 0);
        int64_t t0 = (int64_t)time(NULL) * 1000;

        /* 1: one process, no scale-out. */
        rk_produce_keyed(r, "west", "clicks", IN_PARTS, "c", 0, 300);
        rk_produce_keyed(r, "west", "east.clicks", IN_PARTS, "c", 0, 100);
        put_versions(r, "profiles", t0, 0, 4);
        rk_gwn_start(r, &one, "one", single_args);
        struct caught c1 = {&one, 1};
        if (!harness_wait_until(caught_up, &c1, 60000))
                fail_msg("the single process did not catch up in 60 s");
        expect_once(r, 0, 300);
        expect_versions(r, 4);
        assert_int_equal(rk_gwn_stop(r, &one, SIGTERM, 30000), 0);

        /* 2: two scale-out members on new state directories. */
        rk_gwn_start(r, &g[0], "a", scale_args);
        rk_gwn_start(r, &g[1], "b", scale_args);
        rk_gwn_expect_log(&g[0], DONE, 0, 60000);
        rk_gwn_expect_log(&g[1], DONE, 0, 60000);
        rk_produce_keyed(r, "west", "east.clicks", IN_PARTS, "c", 0, 150);
        rk_produce_keyed(r, "west", "clicks", IN_PARTS, "c", 300, 100);
        put_versions(r, "east.profiles", t0, 1, 3); /* stale */
        put_versions(r, "profiles", t0, 5, 5);
        struct caught c2 = {g, 2};
        if (!harness_wait_until(caught_up, &c2, 60000)) {
                rk_gwn_dump_log(&g[0], 30);
                fail_msg("members a and b did not catch up in 60 s");
        }
        int rebuilt = rk_log_count(g[0].log, REBUILT) +
                      rk_log_count(g[1].log, REBUILT);
        print_message("# a and b rebuilt %d output partitions from the "
                      "unified topics\n",
                      rebuilt);
        static const char *const what[] = {REBUILT, NULL};
        rk_grep_file(g[0].log, "UNIFY", what);
        rk_grep_file(g[1].log, "UNIFY", what);
        expect_once(r, 0, 400);
        expect_versions(r, 5);
        /* Every partition once: a rebalance between the two starts may
         * have moved one before its rebuild committed (then rebuilt
         * again by the next owner, which is harmless), never fewer. */
        assert_true(rebuilt >= OUT_PARTS + 4);

        /* 3: b alone restores what the rebuild wrote to the changelogs,
         * a's partitions warm from its standby. */
        int b_done    = rk_log_count(g[1].log, DONE);
        int b_rebuilt = rk_log_count(g[1].log, REBUILT);
        int64_t held  = rk_size(r, "west", "aagw.aagw.west.ids.clicks.unified");
        assert_int_equal(rk_gwn_stop(r, &g[0], SIGTERM, 30000), 0);
        rk_gwn_expect_log(&g[1], DONE, b_done, 40000);
        long records = -1;
        int  warm    = -1;
        assert_true(last_restore(g[1].log, &records, &warm));
        print_message("# b took a's partitions over: %d warm from its "
                      "standby, %ld changelog records read (the ids topic "
                      "holds %" PRId64 " offsets)\n",
                      warm, records, held);
        assert_true(warm >= 1);
        assert_true(records < held / 2);
        rk_produce_keyed(r, "west", "east.clicks", IN_PARTS, "c", 100, 100);
        struct caught c3 = {g, 2};
        if (!harness_wait_until(caught_up, &c3, 60000))
                fail_msg("b alone did not catch up in 60 s");
        assert_int_equal(rk_log_count(g[1].log, REBUILT), b_rebuilt);
        expect_once(r, 0, 400);
        rk_produce_keyed(r, "west", "clicks", IN_PARTS, "c", 400, 50);
        put_versions(r, "east.profiles", t0, 2, 2); /* stale */
        put_versions(r, "profiles", t0, 6, 6);
        if (!harness_wait_until(caught_up, &c3, 60000))
                fail_msg("b alone did not catch up with c400.. in 60 s");
        expect_once(r, 0, 450);
        expect_versions(r, 6);
        assert_int_equal(rk_gwn_stop(r, &g[1], SIGTERM, 30000), 0);
        print_message("# wall %.1f s\n", rk_elapsed(r));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale_migrate, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
