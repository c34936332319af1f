/*
 * tests/realkafka/test_scale_unify.c: three aagw processes share west's
 * unify stage (scale-out, replicator/unify.c "SCALE-OUT") while records
 * flow, through a kill -9 and restart, a clean stop, and a zombie
 * (SIGSTOP past the session timeout, then SIGCONT).
 *
 * One broker (west).  The test writes the unify inputs itself, steadily,
 * from a thread: dedup topic `clicks` and its remote copy `east.clicks`
 * (id = record key, `--id key`; a third of the ids also in the copy, on
 * another partition, a fifth twice in `clicks`), lww topic `profiles` and
 * `east.profiles` (50 entity keys, versions with increasing timestamps,
 * and every 7th write a stale version again).  east is named but not
 * started (an address nobody answers): its flow copies nothing, aagw runs
 * on (the cheapest way to the two clusters aagw wants).  Members a, b, c
 * (`--scale-out true`, work topic 6 partitions, session 6 s).
 *
 * Asserted, with independent readers (ReadToEnd read_committed, and a
 * read_uncommitted count of our own):
 *  - clicks.unified holds every id written exactly once;
 *  - profiles.unified delivers each version at most once, and the last
 *    record of every entity key is its newest version;
 *  - the zombie said it lost its partitions to the group (fenced, or
 *    "moved on without this member"), and it had written records that
 *    nobody committed sees: the unified topics hold more records
 *    read_uncommitted than read_committed (aborted transactions), or,
 *    when the coordinator had fenced its producer before they reached
 *    the log, it logged a lost transaction holding records;
 *  - when b comes back, a or c keeps a partition it had without
 *    reading its changelog again (logged "not read again");
 *  - the route topics (scale_out.route, the default) hold each input
 *    record routed once, committed, by its input coordinates;
 *  - `aagw status` of a member shows its name, the output partitions it
 *    owns per unified topic, and its rebalance, restore and transaction
 *    counters;
 *  - after all three run again, are killed -9 and their state dirs are
 *    deleted, `aagw audit` with a member's flags and an empty state dir
 *    answers for the whole site from west: every duplicate written was
 *    dropped once and every lww version decided once (summary), a
 *    retried and copied id shows where it was first seen and both
 *    places its duplicates were dropped, and a key sent stale versions
 *    shows its winner and versions accepted and refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rk.h"

#define CLICK_PARTS   3
#define PROFILE_PARTS 2
#define KEYS          50
#define TICK_MS       50
#define IDS_PER_TICK  8

/* ------------------------------------------------------------ TRAFFIC --- */

struct traffic {
        rd_kafka_t    *p;
        pthread_t      th;
        atomic_bool    stop;
        atomic_int     ids;      /* click ids written: c0 .. c<ids-1> */
        int            versions; /* profile versions written */
        int            newest[KEYS]; /* newest version per key, -1 none */
        int64_t        t0;       /* timestamp base of the versions */
        atomic_int     failed;   /* delivery failures */
};

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct traffic *t = opaque;
        (void)rk;
        if (m->err)
                atomic_fetch_add(&t->failed, 1);
}

static void put(struct traffic *t, const char *topic, int32_t part,
                const char *key, const char *val, int64_t ts) {
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(
                    t->p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
                    RD_KAFKA_V_KEY(key, strlen(key)),
                    RD_KAFKA_V_VALUE((void *)val, strlen(val)),
                    RD_KAFKA_V_TIMESTAMP(ts),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(t->p, 10);
        if (err)
                atomic_fetch_add(&t->failed, 1);
}

/* One profile version: key k<j>, value k<j>.<v>, timestamp t0 + v. */
static void put_version(struct traffic *t, int j, int v, bool copy) {
        char key[16], val[32];
        snprintf(key, sizeof(key), "k%d", j);
        snprintf(val, sizeof(val), "k%d.%d", j, v);
        put(t, copy ? "east.profiles" : "profiles", j % PROFILE_PARTS, key,
            val, t->t0 + v);
}

static void *traffic_main(void *arg) {
        struct traffic *t = arg;
        struct timespec ts = {0, TICK_MS * 1000000L};

        while (!atomic_load(&t->stop)) {
                int base = atomic_load(&t->ids);
                for (int i = base; i < base + IDS_PER_TICK; i++) {
                        char id[16];
                        snprintf(id, sizeof(id), "c%d", i);
                        put(t, "clicks", i % CLICK_PARTS, id, id, 0);
                        if (i % 3 == 0) /* the other site's copy */
                                put(t, "east.clicks", (i + 1) % CLICK_PARTS,
                                    id, id, 0);
                        if (i % 5 == 0) /* a client's retry */
                                put(t, "clicks", (i + 2) % CLICK_PARTS, id,
                                    id, 0);
                }
                atomic_store(&t->ids, base + IDS_PER_TICK);
                for (int k = 0; k < 4; k++) {
                        int v = ++t->versions;
                        int j = v % KEYS;
                        put_version(t, j, v, v % 2);
                        t->newest[j] = v;
                        if (v % 7 == 0 && v > 3 * KEYS)
                                /* stale: an older version of another key,
                                 * again */
                                put_version(t, (v - 3 * KEYS) % KEYS,
                                            v - 3 * KEYS, !(v % 2));
                }
                rd_kafka_poll(t->p, 0);
                nanosleep(&ts, NULL);
        }
        rd_kafka_flush(t->p, 60000);
        return NULL;
}

static void traffic_start(struct rk *r, struct traffic *t) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        memset(t, 0, sizeof(*t));
        for (int j = 0; j < KEYS; j++)
                t->newest[j] = -1;
        t->t0 = (int64_t)time(NULL) * 1000;
        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "west"), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "enable.idempotence", "true",
                                           err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "linger.ms", "5", err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_set_dr_msg_cb(conf, dr);
        rd_kafka_conf_set_opaque(conf, t);
        assert_non_null(t->p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                             sizeof(err)));
        assert_int_equal(pthread_create(&t->th, NULL, traffic_main, t), 0);
}

static void traffic_stop(struct traffic *t) {
        atomic_store(&t->stop, true);
        pthread_join(t->th, NULL);
        assert_int_equal(rd_kafka_outq_len(t->p), 0);
        rd_kafka_destroy(t->p);
        assert_int_equal(atomic_load(&t->failed), 0);
}

/* ---------------------------------------------------------------- LOGS --- */

struct log_wait {
        const char *path, *needle;
        int         above;
};

static bool log_grew(void *arg) {
        struct log_wait *w = arg;
        return rk_log_count(w->path, w->needle) > w->above;
}

#define DONE "rebalance done"
#define KEPT "not read again"

/* --------------------------------------------------------- COUNTING --- */

/* Records of 'topic' at west read with 'isolation' up to the end. */
static int64_t count_records(struct rk *r, const char *topic,
                             const char *isolation) {
        return rk_count(r, "west", topic, isolation, NULL);
}

/* The records the zombie had produced into the transaction it then lost:
 * the "(N output records)" of the first abort or fence it logged after
 * the group moved on without it.  -1: none logged. */
static int64_t zombie_records(const char *path) {
        char       *text = harness_read_file(path, NULL);
        const char *lost = text ? strstr(text, "moved on without this member")
                                : NULL;
        const char *fenced = text ? strstr(text, " fenced: ") : NULL;
        long long   n      = -1;

        if (!lost || (fenced && fenced < lost))
                lost = fenced;
        for (const char *p = lost; p && (p = strstr(p, "transaction (")); p++)
                if (sscanf(p, "transaction (%lld output records)", &n) == 1)
                        break;
        free(text);
        return n;
}

/* The sum of the low watermarks of 'topic' at west: records deleted
 * from its beginning (retention, DeleteRecords). */
static int64_t low_sum(struct rk *r, const char *topic, int parts) {
        char             err[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        int64_t          sum  = 0;

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "west"), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        for (int p = 0; p < parts; p++) {
                int64_t lo = -1, hi = -1;
                assert_int_equal(rd_kafka_query_watermark_offsets(
                                     c, topic, p, &lo, &hi, 10000),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
                sum += lo;
        }
        rd_kafka_destroy(c);
        return sum;
}

/* --------------------------------------------------------------- AUDIT --- */

/* `aagw audit WHAT... --json` with a member's flags on a state dir that
 * holds nothing ('fresh'): under scale-out it reads the site's log from
 * west.  Returns its stdout (exit 0 asserted). */
static char *audit(struct rk *r, const char *const *member_args,
                   const char *fresh, const char *const *what) {
        const char      *argv[128];
        size_t           a = 0;
        harness_output_t o;
        char             err[256];

        argv[a++] = harness_aagw_bin();
        argv[a++] = "audit";
        for (size_t i = 0; what[i]; i++)
                argv[a++] = what[i];
        argv[a++] = "--json";
        argv[a++] = "--state-dir";
        argv[a++] = fresh;
        argv[a++] = "--member";
        argv[a++] = "a";
        a += rk_gw_cluster_args(r, argv + a, 32);
        for (size_t i = 0; member_args[i]; i++)
                argv[a++] = member_args[i];
        argv[a] = NULL;
        memset(&o, 0, sizeof(o));
        assert_int_equal(
            harness_run(argv, NULL, 0, 120000, &o, err, sizeof(err)), AAGW_OK);
        if (harness_exit_code(o.status) != 0)
                fail_msg("aagw audit %s %s: exit %d\n%s%s", what[0],
                         what[1] ? what[1] : "", harness_exit_code(o.status),
                         o.out ? o.out : "", o.err ? o.err : "");
        print_message("# aagw audit %s %s: %s", what[0], what[1] ? what[1] : "",
                      o.err ? o.err : "\n");
        char *out = o.out ? strdup(o.out) : strdup("");
        harness_output_deinit(&o);
        return out;
}

/* The integer after "\"name\":" in 'line', -1 if absent. */
static long long json_int(const char *line, const char *name) {
        char        pat[64];
        const char *p;
        snprintf(pat, sizeof(pat), "\"%s\":", name);
        p = strstr(line, pat);
        return p ? atoll(p + strlen(pat)) : -1;
}

/* Lines of 'out' holding 'needle'; their "topic"/"partition" pairs as
 * "topic[p]" appended to 'where' (blank separated). */
static int lines_with(const char *out, const char *needle, char *where,
                      size_t size) {
        int n = 0;
        for (const char *l = out; l && *l;) {
                const char *nl  = strchr(l, '\n');
                size_t      len = nl ? (size_t)(nl - l) : strlen(l);
                char        line[2048];
                snprintf(line, sizeof(line), "%.*s", (int)len, l);
                if (strstr(line, needle)) {
                        const char *t = strstr(line, "\"topic\":\"");
                        n++;
                        if (t && where) {
                                t += strlen("\"topic\":\"");
                                size_t at = strlen(where);
                                snprintf(where + at, size - at, "%.*s[%lld] ",
                                         (int)strcspn(t, "\""), t,
                                         json_int(line, "partition"));
                        }
                }
                l = nl ? nl + 1 : NULL;
        }
        return n;
}

/* ---------------------------------------------------------------- TEST --- */

static void test_scale_unify(void **state) {
        struct rk     *r = rk_new("rk-scale-unify");
        struct rk_gw   g[3];
        struct traffic t;
        const char    *names[3] = {"a", "b", "c"};

        *state = r;
        memset(g, 0, sizeof(g));
        static const char *const props[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4",
            "group.initial.rebalance.delay.ms=0",
            /* A dead owner's open transaction is aborted within 1 s of
             * its timeout (10 s): the new owner's restore waits for it
             * (Kafka's default check interval is 10 s). */
            "transaction.abort.timed.out.transaction.cleanup.interval.ms="
            "1000",
            NULL};
        rk_cluster_start_with(r, "west", 1, props);
        rk_create_topic(r, "west", "clicks", CLICK_PARTS, 1, 0);
        rk_create_topic(r, "west", "east.clicks", CLICK_PARTS, 1, 0);
        rk_create_topic(r, "west", "clicks.unified", 6, 1, 0);
        rk_create_topic(r, "west", "profiles", PROFILE_PARTS, 1, 0);
        rk_create_topic(r, "west", "east.profiles", PROFILE_PARTS, 1, 0);
        rk_create_topic(r, "west", "profiles.unified", 4, 1, 0);

        const char *const args[] = {
            "--cluster",   "east=127.0.0.1:9",
            "--site",      "west",
            "--scale-out", "true",
            "--id",        "key",
            "--topic",     "clicks",
            "--topic",     "profiles",
            "--set",       "unify.topics.profiles.mode=lww",
            "--set",       "scale_out.work_partitions=6",
            "--set",       "scale_out.route=true",
            "--set",       "scale_out.session_timeout=6s",
            "--set",       "scale_out.transaction_timeout=10s",
            "--set",       "scale_out.rebalance=cooperative",
            "--admin",     "127.0.0.1:0",
            NULL};
        for (int i = 0; i < 3; i++)
                rk_gwn_start(r, &g[i], names[i], args);
        for (int i = 0; i < 3; i++)
                rk_gwn_expect_log(&g[i], DONE, 0, 60000);
        traffic_start(r, &t);
        double t_start = rk_elapsed(r);

        /* Everyone busy for a moment, then b dies. */
        rk_expect_size(r, "west", "clicks.unified", 500, 30000);
        int a_done = rk_log_count(g[0].log, DONE);
        int c_done = rk_log_count(g[2].log, DONE);
        rk_gwn_stop(r, &g[1], SIGKILL, 10000);
        double t_kill = rk_elapsed(r);
        rk_gwn_expect_log(&g[0], DONE, a_done, 30000);
        rk_gwn_expect_log(&g[2], DONE, c_done, 30000);
        double takeover = rk_elapsed(r) - t_kill;
        /* b comes back: a and c let go of everything (eager) and get
         * back a share in which each keeps a partition it had (the
         * roundrobin assignor over members a, b, c): that one is not
         * read again (unify_scale_kept()). */
        int a_kept = rk_log_count(g[0].log, KEPT);
        int c_kept = rk_log_count(g[2].log, KEPT);
        a_done = rk_log_count(g[0].log, DONE);
        c_done = rk_log_count(g[2].log, DONE);
        rk_gwn_start(r, &g[1], NULL, args);
        rk_gwn_expect_log(&g[1], DONE, 0, 30000);
        rk_gwn_expect_log(&g[0], DONE, a_done, 30000);
        rk_gwn_expect_log(&g[2], DONE, c_done, 30000);
        int kept = rk_log_count(g[0].log, KEPT) - a_kept +
                   rk_log_count(g[2].log, KEPT) - c_kept;
        print_message("# after b's return, a and c logged %d times that they "
                      "kept partitions without reading them again\n",
                      kept);
        if (kept < 1) {
                rk_gwn_dump_log(&g[0], 40);
                fail_msg("neither a nor c kept a partition across b's return");
        }

        /* c stops cleanly: a and b take its partitions at once. */
        a_done = rk_log_count(g[0].log, DONE);
        int b_done = rk_log_count(g[1].log, DONE);
        assert_int_equal(rk_gwn_stop(r, &g[2], SIGTERM, 30000), 0);
        rk_gwn_expect_log(&g[0], DONE, a_done, 30000);
        rk_gwn_expect_log(&g[1], DONE, b_done, 30000);

        /* a stalls past its session: b takes everything; a wakes up as a
         * zombie with an open transaction. */
        b_done = rk_log_count(g[1].log, DONE);
        a_done = rk_log_count(g[0].log, DONE);
        assert_int_equal(harness_proc_signal(g[0].proc, SIGSTOP), 0);
        double t_stop = rk_elapsed(r);
        rk_gwn_expect_log(&g[1], DONE, b_done, 40000);
        double zombie_takeover = rk_elapsed(r) - t_stop;
        assert_int_equal(harness_proc_signal(g[0].proc, SIGCONT), 0);
        struct log_wait fenced = {g[0].log, "moved on without this member",
                                  0};
        struct log_wait fenced2 = {g[0].log, "fenced", 0};
        int64_t deadline = harness_now_ms() + 30000;
        while (!log_grew(&fenced) && !log_grew(&fenced2) &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
        if (!log_grew(&fenced) && !log_grew(&fenced2)) {
                rk_gwn_dump_log(&g[0], 60);
                fail_msg("the zombie a never said it lost its partitions");
        }
        /* What it had written in its open transaction was aborted (the
         * count of records it names is looked at in the report). */
        static const char *const zombie[] = {"moved on", "fenced",
                                             "is aborted", NULL};
        rk_grep_file(g[0].log, NULL, zombie);
        /* It rejoins. */
        rk_gwn_expect_log(&g[0], DONE, a_done, 40000);

        traffic_stop(&t);
        int ids = atomic_load(&t.ids);
        double t_traffic = rk_elapsed(r) - t_start;

        /* Everything unified: each id once (read_committed count). */
        int64_t want_clicks = ids;
        int64_t got = 0;
        deadline = harness_now_ms() + 60000;
        while ((got = count_records(r, "clicks.unified", "read_committed")) <
                   want_clicks &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 500 * 1000000L};
                nanosleep(&ts, NULL);
        }
        /* `aagw status` of b shows its membership and what it owns. */
        const char *const st_argv[] = {harness_aagw_bin(), "status",
                                       "--state-dir", g[1].state, NULL};
        harness_output_t  so;
        char              err[256];
        memset(&so, 0, sizeof(so));
        assert_int_equal(harness_run(st_argv, NULL, 0, 30000, &so, err,
                                     sizeof(err)),
                         AAGW_OK);
        if (harness_exit_code(so.status) != 0 ||
            !strstr(so.out, "\nmember:b\n") || !strstr(so.out, "\nowned:") ||
            !strstr(so.out, "clicks.unified ") ||
            !strstr(so.out, "\nrebalances:") ||
            !strstr(so.out, "\nrestores:") ||
            !strstr(so.out, "\ntransactions:") ||
            !strstr(so.out, "\nrouted:") ||
            atoll(strstr(so.out, "\nrouted:") + strlen("\nrouted:")) <= 0)
                fail_msg("aagw status of b (exit %d):\n%s%s",
                         harness_exit_code(so.status), so.out, so.err);
        const char *own = strstr(so.out, "\nowned:");
        const char *rtd = strstr(so.out, "\nrouted:");
        print_message("# aagw status of b: %.*s, %.*s\n",
                      (int)strcspn(own + 1, "\n"), own + 1,
                      (int)strcspn(rtd + 1, "\n"), rtd + 1);
        harness_output_deinit(&so);
        static const char *const what[] = {"restored", DONE, "fenced",
                                           "lost", "aborted", NULL};
        for (int i = 0; i < 3; i++)
                rk_grep_file(g[i].log, "UNIFY", what);
        assert_int_equal(rk_gwn_stop(r, &g[0], SIGTERM, 30000), 0);
        assert_int_equal(rk_gwn_stop(r, &g[1], SIGTERM, 30000), 0);

        int64_t committed = count_records(r, "clicks.unified",
                                          "read_committed") +
                            count_records(r, "profiles.unified",
                                          "read_committed");
        int64_t uncommitted = count_records(r, "clicks.unified",
                                            "read_uncommitted") +
                              count_records(r, "profiles.unified",
                                            "read_uncommitted");

        const char *const topics[] = {"clicks.unified", "profiles.unified",
                                      NULL};
        char *out = rk_read_topics(r, "west", "read-west", topics);
        struct rk_read cu, pu;
        rk_read_parse(out, "clicks.unified", &cu);
        rk_read_parse(out, "profiles.unified", &pu);
        assert_true(cu.done);
        assert_true(pu.done);

        /* dedup: every id once, nothing else. */
        int64_t missing = 0, dups = 0;
        for (int i = 0; i < ids; i++) {
                char    id[16];
                snprintf(id, sizeof(id), "c%d", i);
                int64_t n = rk_bag_count(cu.values, id);
                if (n == 0 && !missing++)
                        print_message("# first missing id: %s\n", id);
                if (n > 1 && !dups++)
                        print_message("# first doubled id: %s (%" PRId64
                                      " times)\n",
                                      id, n);
        }
        print_message("# clicks.unified: %" PRId64 " records, %d ids "
                      "written, %" PRId64 " missing, %" PRId64 " doubled\n",
                      cu.records, ids, missing, dups);
        assert_int_equal(missing, 0);
        assert_int_equal(dups, 0);
        assert_int_equal(cu.records, ids);

        /* lww: each version at most once; the last record of each key
         * is its newest version. */
        int     last[KEYS];
        int64_t wrong = 0;
        int64_t vdups = rk_lww_last(&pu, "profiles.unified", KEYS, last);
        for (int j = 0; j < KEYS; j++)
                if (last[j] != t.newest[j] && !wrong++)
                        print_message("# k%d: last unified version %d, "
                                      "newest written %d\n",
                                      j, last[j], t.newest[j]);
        print_message("# profiles.unified: %" PRId64 " records (%d versions "
                      "written), %" PRId64 " keys not at their newest, "
                      "%" PRId64 " versions doubled\n",
                      pu.records, t.versions, wrong, vdups);
        assert_int_equal(wrong, 0);
        assert_int_equal(vdups, 0);

        /* Each input record was read by one member: the records routed
         * (those whose unified partition another member owned) are in
         * the route topics once each, committed, by their input
         * coordinates (aagw.route), and never more than were written
         * to the inputs; the killed member's and the zombie's routing
         * stayed aborted.  (The others were decided where they were
         * read, with no hop.) */
        int64_t extras_w = 0, stale_w = 0;
        for (int i = 0; i < ids; i++)
                extras_w += (i % 3 == 0) + (i % 5 == 0);
        for (int v = 1; v <= t.versions; v++)
                stale_w += v % 7 == 0 && v > 3 * KEYS;
        const char *route_topics[] = {"aagw.aagw.west.route.clicks.unified",
                                      "aagw.aagw.west.route.profiles.unified"};
        int64_t     inputs_w[]     = {ids + extras_w, t.versions + stale_w};
        int         route_parts[]  = {6, 4};
        for (int k = 0; k < 2; k++) {
                struct rk_bag *at = rk_bag_new();
                int64_t        n  = rk_count_header(r, "west", route_topics[k],
                                                    "read_committed", "aagw.route", at);
                int64_t        distinct = rk_bag_distinct(at);
                /* Decided records are deleted from the route topic as
                 * their decisions commit (every 10 s). */
                int64_t purged = low_sum(r, route_topics[k], route_parts[k]);
                print_message("# %s: %" PRId64 " records, %" PRId64
                              " input coordinates (inputs got %" PRId64
                              "), %" PRId64 " without one; %" PRId64
                              " offsets deleted from its beginning\n",
                              route_topics[k], n, distinct, inputs_w[k],
                              rk_bag_count(at, ""), purged);
                assert_true(purged > 0);
                assert_true(n > 0);
                assert_int_equal(distinct, n);
                assert_int_equal(rk_bag_count(at, ""), 0);
                assert_true(n < inputs_w[k]);
                rk_bag_destroy(at);
        }

        /* The zombie wrote and was not committed: records of aborted
         * transactions in the topics, or (when the coordinator had
         * already fenced its producer, whose records then never reach
         * the log) its log naming the records it had produced into the
         * transaction it lost; either way none of them is doubled in
         * the committed output (checked above). */
        int64_t zr = zombie_records(g[0].log);
        print_message("# unified records: %" PRId64 " read_committed, "
                      "%" PRId64 " read_uncommitted (aborted transactions); "
                      "the zombie's lost transaction held %" PRId64
                      " output records\n",
                      committed, uncommitted, zr);
        assert_true(uncommitted > committed || zr > 0);
        print_message("# takeover after kill -9: %.1f s; after SIGSTOP: "
                      "%.1f s; traffic %.1f s; wall %.1f s\n",
                      takeover, zombie_takeover, t_traffic, rk_elapsed(r));

        /* The site's audit from a host that has none of it: all three
         * members run again, are killed -9, and their state dirs are
         * deleted; `aagw audit` with a member's flags and an empty state
         * dir reads what they committed from west. */
        double t_again = rk_elapsed(r);
        for (int i = 0; i < 3; i++)
                rk_gwn_start(r, &g[i], NULL, args); /* (a new log each) */
        for (int i = 0; i < 3; i++)
                rk_gwn_expect_log(&g[i], DONE, 0, 60000);
        for (int i = 0; i < 3; i++) {
                rk_gwn_stop(r, &g[i], SIGKILL, 10000);
                assert_int_equal(harness_rmtree(g[i].state), 0);
        }
        double t_killed = rk_elapsed(r);
        char   fresh[600];
        snprintf(fresh, sizeof(fresh), "%s/fresh-host", r->dir);

        /* Every duplicate written was dropped once, every lww version
         * written was decided once, and the accepted ones are what
         * profiles.unified holds. */
        int64_t extras = 0, stale = 0;
        for (int i = 0; i < ids; i++)
                extras += (i % 3 == 0) + (i % 5 == 0);
        for (int v = 1; v <= t.versions; v++)
                stale += v % 7 == 0 && v > 3 * KEYS;
        static const char *const summary[] = {"summary", NULL};
        char                    *sum       = audit(r, args, fresh, summary);
        const char              *first = strstr(sum, "\"type\":\"summary\"");
        assert_non_null(first);
        long long dropped    = json_int(first, "dropped"),
                  accepted   = json_int(first, "accepted"),
                  superseded = json_int(first, "superseded"),
                  identical  = json_int(first, "identical"),
                  rejected   = json_int(first, "rejected");
        print_message("# site audit: dropped %lld (duplicates written %" PRId64
                      "), lww accepted %lld superseded %lld identical %lld "
                      "(versions written %" PRId64 ", unified %" PRId64 ")\n",
                      dropped, extras, accepted, superseded, identical,
                      (int64_t)t.versions + stale, pu.records);
        assert_int_equal(dropped, extras);
        assert_int_equal(accepted, pu.records);
        assert_int_equal(accepted + superseded + identical,
                         (int64_t)t.versions + stale);
        assert_int_equal(rejected, 0);
        free(sum);

        /* One retried id (also copied from east): where it was first
         * seen and where both duplicates were dropped, at the three
         * places it was written. */
        int  k = (ids / 2) / 15 * 15;
        char id[16], want[3][32], where[1024] = "";
        snprintf(id, sizeof(id), "c%d", k);
        snprintf(want[0], sizeof(want[0]), "clicks[%d] ", k % CLICK_PARTS);
        snprintf(want[1], sizeof(want[1]), "east.clicks[%d] ",
                 (k + 1) % CLICK_PARTS);
        snprintf(want[2], sizeof(want[2]), "clicks[%d] ",
                 (k + 2) % CLICK_PARTS);
        const char *const by_id[] = {"id", id, NULL};
        char             *ido     = audit(r, args, fresh, by_id);
        int               nfirst =
            lines_with(ido, "\"type\":\"first_seen\"", where, sizeof(where));
        int ndrop =
            lines_with(ido, "\"verdict\":\"dropped\"", where, sizeof(where));
        print_message("# audit id %s: first seen + dropped at %s\n", id, where);
        if (nfirst != 1 || ndrop != 2 || !strstr(where, want[0]) ||
            !strstr(where, want[1]) || !strstr(where, want[2]))
                fail_msg("audit id %s: %d first seen, %d dropped, at %s "
                         "(written at %s%s%s):\n%s",
                         id, nfirst, ndrop, where, want[0], want[1], want[2],
                         ido);
        free(ido);

        /* One entity key sent stale versions: its winner, and versions
         * accepted and refused. */
        int  v = t.versions / 7 * 7; /* the last stale version sent */
        char key[16];
        assert_true(v > 3 * KEYS);
        snprintf(key, sizeof(key), "k%d", (v - 3 * KEYS) % KEYS);
        const char *const by_key[] = {"key", key, NULL};
        char             *ko       = audit(r, args, fresh, by_key);
        int               nwin = lines_with(ko, "\"type\":\"winner\"", NULL, 0);
        int nacc = lines_with(ko, "\"verdict\":\"accepted\"", NULL, 0);
        int nref = lines_with(ko, "\"verdict\":\"superseded\"", NULL, 0) +
                   lines_with(ko, "\"verdict\":\"identical\"", NULL, 0);
        print_message("# audit key %s: %d winner line(s), %d accepted, %d "
                      "superseded or identical\n",
                      key, nwin, nacc, nref);
        if (nwin < 1 || nacc < 1 || nref < 1)
                fail_msg("audit key %s:\n%s", key, ko);
        free(ko);
        print_message("# audit phase: members up again and killed in %.1f s, "
                      "three audits in %.1f s\n",
                      t_killed - t_again, rk_elapsed(r) - t_killed);

        rk_read_deinit(&cu);
        rk_read_deinit(&pu);
        free(out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale_unify, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
