/*
 * tests/realkafka/test_drill.c: the disaster-recovery commands on real
 * Kafka, with clusters of the test's own (one broker each): `aagw drill`
 * passing and with replication stopped, failover and failback of a
 * group, and the active-active move of a group that read a remote topic.
 *
 * One aagw (active-active, both flows, unify off) copies east's clicks to
 * west's east.clicks and west's clicks to east's west.clicks, 2
 * partitions each.  The cases share the cluster pair and run in order;
 * each uses a group of its own.  Groups consume with the test's own
 * librdkafka consumer (assign(), offsets from the group's commits,
 * commits of exactly what was handed out), and every value it reads is
 * counted: the oracle for "nothing twice, nothing skipped" is that bag,
 * not aagw's report, whose numbers are compared with the offsets read
 * back from the clusters.
 *
 *  - drill: `aagw drill` (no --force: a real broker says whether the
 *    group has members) passes with RPO 0 records, every partition exact
 *    and verified, RTO (translation to verified resume) within the whole
 *    drill; the offsets committed at west are those of east (the copies
 *    are dense from offset 0).
 *  - failover and failback: group g reads part of east's clicks, fails
 *    over to west, reads more there (east.clicks and west's own clicks),
 *    more is written at both sites, and `aagw failover --from west --to
 *    east` (dry run first: nothing committed) moves it back: its position
 *    in east.clicks onto east's clicks (back through the offset-syncs of
 *    east->west), in west's clicks onto west.clicks.  g then reads every
 *    remaining record at east: over the three stints every value of both
 *    sites once.
 *  - active-active: group ga reads east's clicks and west.clicks at east,
 *    fails over to west and lands on east.clicks and on west's clicks
 *    (the remote topic's origin) where it stopped: again every value once.
 *  - replication stopped: with aagw stopped, the drill exits 1 saying
 *    replication east->west is stopped, and commits nothing at west.
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

#include "rk.h"

#define PARTS 2
#define TIMEOUT_MS 60000

static struct rk *rk; /* shared by the cases, stopped by group teardown */

/* East's clicks [0] holds NLOOP records whose provenance path names west
 * from offset loop_at on (-1: not yet): the flow east->west skips them
 * (a loop verdict), so east.clicks [0] at west is NLOOP behind from
 * there, and neither translation is the identity. */
#define NLOOP 3
static int64_t loop_at = -1;

/* Where a group at committed offset 'c' of east's clicks ['p'] resumes in
 * east.clicks at west: after the copies of the records below 'c'. */
static int64_t fwd(int p, int64_t c) {
        if (p != 0 || loop_at < 0 || c <= loop_at)
                return c;
        return c - (c - loop_at < NLOOP ? c - loop_at : NLOOP);
}

/* ...and back: position 'pos' in east.clicks ['p'] at west onto east's
 * clicks, the largest offset whose copies below it are those below 'pos'
 * (past the skipped run when the position is at its copy-less end). */
static int64_t bwd(int p, int64_t pos) {
        if (p != 0 || loop_at < 0 || pos < loop_at)
                return pos;
        return pos + NLOOP;
}

static const char *const topics_both[] = {"clicks", "heartbeats", NULL};

static int group_teardown(void **state) {
        (void)state;
        rk_destroy(rk);
        rk = NULL;
        return 0;
}

/* Clusters, topics, the gateway: once, by the first case that needs them
 * (a failure there fails every case). */
static struct rk *scene(void) {
        static const char *const small[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4", NULL};
        static const char *const gw[] = {
            "--mode",  "active-active", "--unify", "off",
            "--topic", "clicks",        "--set",   "mm2.heartbeats_interval=1s",
            NULL};

        if (rk)
                return rk;
        loop_at = -1;
        rk      = rk_new("rk-drill");
        rk_cluster_start_with(rk, "east", 1, small);
        rk_cluster_start_with(rk, "west", 1, small);
        for (size_t i = 0; topics_both[i]; i++) {
                char remote[64];
                int  parts = strcmp(topics_both[i], "clicks") ? 1 : PARTS;
                rk_create_topic(rk, "east", topics_both[i], parts, 1, 0);
                rk_create_topic(rk, "west", topics_both[i], parts, 1, 0);
                snprintf(remote, sizeof(remote), "west.%s", topics_both[i]);
                rk_create_topic(rk, "east", remote, parts, 1, 0);
                snprintf(remote, sizeof(remote), "east.%s", topics_both[i]);
                rk_create_topic(rk, "west", remote, parts, 1, 0);
        }
        rk_create_topic(rk, "east", "mm2-offset-syncs.west.internal", 1, 1, 0);
        rk_create_topic(rk, "west", "mm2-offset-syncs.east.internal", 1, 1, 0);
        rk_create_topic(rk, "east", "west.checkpoints.internal", 1, 1, 0);
        rk_create_topic(rk, "west", "east.checkpoints.internal", 1, 1, 0);
        rk_gw_start(rk, gw);
        return rk;
}

/* ------------------------------------------------------------ RUN AAGW -- */

static int aagw(struct rk *r, const char *const *words, harness_output_t *o) {
        const char *argv[96];
        size_t      a = 0;

        argv[a++] = harness_aagw_bin();
        for (size_t i = 0; words[i]; i++)
                argv[a++] = words[i];
        a += rk_gw_cluster_args(r, argv + a, 64);
        argv[a] = NULL;
        assert_int_equal(
            harness_run(argv, NULL, 0, 120000, o, r->errstr, sizeof(r->errstr)),
            AAGW_OK);
        if (strstr(o->err, "runtime error:") ||
            strstr(o->err, "AddressSanitizer"))
                fail_msg("aagw %s: sanitizer report:\n%s", words[0], o->err);
        return harness_exit_code(o->status);
}

static json_object *field(json_object *j, const char *name) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(j, name, &v))
                fail_msg("no field %s in %s", name,
                         json_object_to_json_string(j));
        return v;
}

/* `aagw failover --group G --from F --to T --json [--dry-run]`, exit 0. */
static json_object *failover(struct rk *r, const char *group, const char *from,
                             const char *to, bool dry) {
        const char      *w[] = {"failover", "--group", group,
                                "--from",   from,      "--to",
                                to,         "--json",  dry ? "--dry-run" : NULL,
                                NULL};
        harness_output_t o;
        int64_t          t0 = harness_now_ms();
        int              rc = aagw(r, w, &o);

        fprintf(stderr, "# failover %s %s -> %s%s in %.1f s: %s", group, from,
                to, dry ? " (dry run)" : "",
                (double)(harness_now_ms() - t0) / 1000.0, o.out);
        if (rc != 0)
                fail_msg("failover %s -> %s: exit %d\n%s%s", from, to, rc,
                         o.out, o.err);
        json_object *j = json_tokener_parse(o.out);
        harness_output_deinit(&o);
        assert_non_null(j);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            dry ? "dry-run" : "committed");
        assert_true(json_object_get_boolean(field(j, "exact")));
        assert_int_equal(json_object_get_int64(field(j, "reread")), 0);
        return j;
}

/* The row of failover report 'j' for 'topic' ['p'], or NULL. */
static json_object *row(json_object *j, const char *topic, int p) {
        json_object *parts = field(j, "partitions");

        for (size_t i = 0; i < json_object_array_length(parts); i++) {
                json_object *e = json_object_array_get_idx(parts, i);
                if (!strcmp(json_object_get_string(field(e, "topic")), topic) &&
                    json_object_get_int(field(e, "partition")) == p)
                        return e;
        }
        return NULL;
}

/* ------------------------------------------------------------- GROUPS -- */

static rd_kafka_t *consumer(struct rk *r, const char *alias,
                            const char *group) {
        char             err[512];
        rd_kafka_conf_t *c    = rd_kafka_conf_new();
        const char      *kv[] = {"bootstrap.servers",
                                 rk_bs(r, alias),
                                 "group.id",
                                 group,
                                 "enable.auto.commit",
                                 "false",
                                 "auto.offset.reset",
                                 "earliest",
                                 "fetch.wait.max.ms",
                                 "10",
                                 "enable.metrics.push",
                                 "false",
                                 NULL};

        for (size_t i = 0; kv[i]; i += 2)
                if (rd_kafka_conf_set(c, kv[i], kv[i + 1], err, sizeof(err)))
                        fail_msg("%s: %s", kv[i], err);
        rd_kafka_t *rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
        assert_non_null(rk_);
        return rk_;
}

/* The group's committed offset of 'topic' ['p'] at 'alias', -1 if none
 * (read back from the broker, not from aagw's report). */
static int64_t committed(struct rk *r, const char *alias, const char *group,
                         const char *topic, int p) {
        rd_kafka_t                      *c = consumer(r, alias, group);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);

        rd_kafka_topic_partition_list_add(l, topic, p);
        assert_int_equal(rd_kafka_committed(c, l, 10000), 0);
        int64_t o = l->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(c);
        return o < 0 ? -1 : o;
}

/* Group 'group' consumes 'want' records of 'topics' (NULL-terminated,
 * every partition) at 'alias' from its committed offsets (earliest where
 * it has none), adds each value to 'seen', commits exactly what it was
 * handed and leaves.  want < 0: everything up to the ends as they are
 * now.  Returns the records read. */
static int64_t consume(struct rk *r, const char *alias, const char *group,
                       const char *const *topics, int64_t want,
                       struct rk_bag *seen) {
        rd_kafka_t                      *c = consumer(r, alias, group);
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(8);
        int64_t got = 0, left = 0;

        for (size_t t = 0; topics[t]; t++)
                for (int p = 0; p < PARTS; p++)
                        rd_kafka_topic_partition_list_add(a, topics[t], p)
                            ->offset = RD_KAFKA_OFFSET_STORED;
        if (want < 0) {
                /* up to the ends: from the group's offsets (or the log
                 * start) to the high watermarks */
                rd_kafka_topic_partition_list_t *cm =
                    rd_kafka_topic_partition_list_copy(a);
                assert_int_equal(rd_kafka_committed(c, cm, 10000), 0);
                for (int i = 0; i < cm->cnt; i++) {
                        int64_t lo, hi;
                        assert_int_equal(rd_kafka_query_watermark_offsets(
                                             c, cm->elems[i].topic,
                                             cm->elems[i].partition, &lo, &hi,
                                             10000),
                                         0);
                        left +=
                            hi - (cm->elems[i].offset >= 0 ? cm->elems[i].offset
                                                           : lo);
                }
                rd_kafka_topic_partition_list_destroy(cm);
                want = left;
        }
        assert_int_equal(rd_kafka_assign(c, a), 0);
        rd_kafka_topic_partition_list_destroy(a);
        int64_t deadline = harness_now_ms() + TIMEOUT_MS;
        while (got < want && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
                if (!m)
                        continue;
                if (!m->err) {
                        char v[64];
                        snprintf(v, sizeof(v), "%.*s", (int)m->len,
                                 (const char *)m->payload);
                        rk_bag_add(seen, v);
                        got++;
                } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        fail_msg("%s at %s: %s", group, alias,
                                 rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
        }
        if (got < want)
                fail_msg("group %s at %s read %" PRId64 " of %" PRId64
                         " records",
                         group, alias, got, want);
        if (got)
                assert_int_equal(rd_kafka_commit(c, NULL, 0), 0);
        rd_kafka_destroy(c);
        return got;
}

/* NLOOP records "lf<i>" at the end of east's clicks [0], each with a
 * provenance whose path holds west: records east->west must not copy. */
static void produce_loop(struct rk *r) {
        char             err[512];
        int64_t          lo, hi;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "east"), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(p);
        assert_int_equal(rd_kafka_query_watermark_offsets(p, "clicks", 0, &lo,
                                                          &loop_at, 10000),
                         0);
        for (int i = 0; i < NLOOP; i++) {
                static const char prov[] =
                    "1;west>east;clicks:0:5;1714557600123:0;";
                char v[16];
                int  len = snprintf(v, sizeof(v), "lf%d", i);
                assert_int_equal(
                    rd_kafka_producev(
                        p, RD_KAFKA_V_TOPIC("clicks"), RD_KAFKA_V_PARTITION(0),
                        RD_KAFKA_V_VALUE(v, (size_t)len),
                        RD_KAFKA_V_HEADER("aagw.prov", prov,
                                          (ssize_t)sizeof(prov) - 1),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        assert_int_equal(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(p);
        assert_int_equal(rd_kafka_query_watermark_offsets(
                             r->c[0].admin, "clicks", 0, &lo, &hi, 10000),
                         0);
        assert_int_equal(hi, loop_at + NLOOP); /* nobody else writes */
}

/* The loop records: at most once (they are not in the copy, so a group
 * that moved on before reading them at east never sees them). */
static void check_loop(const struct rk_bag *seen) {
        for (int i = 0; i < NLOOP; i++) {
                char v[16];
                snprintf(v, sizeof(v), "lf%d", i);
                if (rk_bag_count(seen, v) > 1)
                        fail_msg("%s read %" PRId64 " times", v,
                                 rk_bag_count(seen, v));
        }
}

/* Every value "<prefix><i>" for i < n in 'seen' exactly once; returns
 * how many are missing or doubled (printed). */
static int64_t check_once(const struct rk_bag *seen, const char *prefix,
                          int n) {
        int64_t bad = 0;

        for (int i = 0; i < n; i++) {
                char    v[64];
                int64_t k;
                snprintf(v, sizeof(v), "%s%d", prefix, i);
                if ((k = rk_bag_count(seen, v)) != 1) {
                        if (bad++ < 10)
                                print_message("# %s read %" PRId64 " times\n",
                                              v, k);
                }
        }
        return bad;
}

/* Wait until the gateway's flow 'src'->'dst' has copied clicks up to its
 * ends at 'src' (its own committed positions, group aagw.aagw.SRC-DST),
 * which is what makes a translation exact. */
struct caught_up {
        struct rk  *r;
        const char *src, *dst;
};

static bool flow_caught_up(void *arg) {
        struct caught_up *c = arg;
        char              group[64];

        snprintf(group, sizeof(group), "aagw.aagw.%s-%s", c->src, c->dst);
        for (int p = 0; p < PARTS; p++) {
                int64_t lo, hi;
                if (rd_kafka_query_watermark_offsets(
                        c->r->c[strcmp(c->src, "east") ? 1 : 0].admin, "clicks",
                        p, &lo, &hi, 5000) ||
                    (hi > lo &&
                     committed(c->r, c->src, group, "clicks", p) < hi))
                        return false;
        }
        return true;
}

static void wait_caught_up(struct rk *r) {
        struct caught_up e = {r, "east", "west"}, w = {r, "west", "east"};

        if (!harness_wait_until(flow_caught_up, &e, TIMEOUT_MS) ||
            !harness_wait_until(flow_caught_up, &w, TIMEOUT_MS)) {
                rk_gw_dump_log(r, 40);
                fail_msg("the gateway did not copy clicks both ways in %d s",
                         TIMEOUT_MS / 1000);
        }
}

/* ---------------------------------------------------------------- CASES -- */

static void test_drill_passes(void **state) {
        struct rk *r = scene();
        (void)state;

        rk_produce_keyed(r, "east", "clicks", PARTS, "d", 0, 40);
        wait_caught_up(r);
        /* gd stopped at east after 13 records of [0] and 9 of [1] */
        struct rk_bag                   *seen = rk_bag_new();
        rd_kafka_t                      *c    = consumer(r, "east", "gd");
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(2);
        rd_kafka_topic_partition_list_add(l, "clicks", 0)->offset = 13;
        rd_kafka_topic_partition_list_add(l, "clicks", 1)->offset = 9;
        assert_int_equal(rd_kafka_commit(c, l, 0), 0);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(c);

        const char      *w[] = {"drill", "--group", "gd",     "--from", "east",
                                "--to",  "west",    "--json", NULL};
        harness_output_t o;
        int64_t          t0      = harness_now_ms();
        int              rc      = aagw(r, w, &o);
        int64_t          elapsed = harness_now_ms() - t0;
        fprintf(stderr, "# drill: %s", o.out);
        if (rc != 0)
                fail_msg("drill: exit %d\n%s%s", rc, o.out, o.err);
        json_object *j = json_tokener_parse(o.out);
        harness_output_deinit(&o);
        assert_non_null(j);
        assert_string_equal(json_object_get_string(field(j, "result")), "ok");
        assert_int_equal(json_object_get_int(field(j, "partition_count")), 2);
        assert_int_equal(json_object_get_int(field(j, "exact")), 2);
        assert_int_equal(json_object_get_int(field(j, "verified")), 2);
        assert_true(json_object_get_boolean(field(j, "committed")));
        assert_int_equal(json_object_get_int64(field(j, "rpo_records")), 0);
        int64_t rpo_ms = json_object_get_int64(field(j, "rpo_ms"));
        double  rto    = json_object_get_double(field(j, "rto_s"));
        double  drill  = json_object_get_double(field(j, "drill_s"));
        assert_true(rpo_ms >= 0 && rpo_ms < 10000);
        assert_true(rto > 0 && rto <= drill && drill * 1000 <= elapsed);
        /* committed at west where east had them: the copies start at 0 */
        assert_int_equal(committed(r, "west", "gd", "east.clicks", 0), 13);
        assert_int_equal(committed(r, "west", "gd", "east.clicks", 1), 9);
        for (int p = 0; p < 2; p++) {
                json_object *e = row(j, "clicks", p);
                assert_non_null(e);
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 p ? 9 : 13);
        }
        print_message("# drill on real Kafka: RPO %" PRId64 " records, %" PRId64
                      " ms (lag at start %" PRId64
                      " records); RTO %.3f s (translation to verified "
                      "resume), whole drill %.3f s\n",
                      json_object_get_int64(field(j, "rpo_records")), rpo_ms,
                      json_object_get_int64(field(j, "lag_records_at_start")),
                      rto, drill);
        json_object_put(j);
        /* and gd at west reads exactly the 18 records after its position */
        static const char *const copy[] = {"east.clicks", NULL};
        assert_int_equal(consume(r, "west", "gd", copy, -1, seen), 18);
        for (int i = 0; i < 40; i++) {
                char v[16];
                snprintf(v, sizeof(v), "d%d", i);
                /* record i is in partition i % 2 at offset i / 2 */
                int64_t want = (i % 2 ? i / 2 >= 9 : i / 2 >= 13) ? 1 : 0;
                if (rk_bag_count(seen, v) != want)
                        fail_msg("%s read %" PRId64 " times at west, want "
                                 "%" PRId64,
                                 v, rk_bag_count(seen, v), want);
        }
        rk_bag_destroy(seen);
}

static void test_failover_failback(void **state) {
        struct rk               *r         = scene();
        struct rk_bag           *seen      = rk_bag_new();
        static const char *const at_east[] = {"clicks", NULL};
        static const char *const at_west[] = {"east.clicks", "clicks", NULL};
        static const char *const back[]    = {"clicks", "west.clicks", NULL};
        (void)state;

        /* g's stream: east's clicks (the drill case's d0..d39, then
         * f0..f39) and west's v0..v29, then 10 more of each while g is
         * stopped at west.  g reads 50 of east's 80 there. */
        rk_produce_keyed(r, "east", "clicks", PARTS, "f", 0, 40);
        produce_loop(r);
        rk_produce_keyed(r, "west", "clicks", PARTS, "v", 0, 30);
        int64_t n_east = consume(r, "east", "g", at_east, 50, seen);
        wait_caught_up(r);
        json_object *j = failover(r, "g", "east", "west", false);
        for (int p = 0; p < PARTS; p++) {
                json_object *e = row(j, "clicks", p);
                int64_t      c = committed(r, "east", "g", "clicks", p);
                if (c < 0) {
                        assert_null(e);
                        continue;
                }
                assert_non_null(e);
                assert_string_equal(
                    json_object_get_string(field(e, "direction")), "forward");
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 fwd(p, c));
                assert_int_equal(committed(r, "west", "g", "east.clicks", p),
                                 fwd(p, c));
        }
        json_object_put(j);

        int64_t n_west = consume(r, "west", "g", at_west, 50, seen);
        int64_t pos_copy[PARTS], pos_local[PARTS];
        for (int p = 0; p < PARTS; p++) {
                pos_copy[p]  = committed(r, "west", "g", "east.clicks", p);
                pos_local[p] = committed(r, "west", "g", "clicks", p);
        }
        rk_produce_keyed(r, "east", "clicks", PARTS, "f", 40, 10);
        rk_produce_keyed(r, "west", "clicks", PARTS, "v", 30, 10);
        wait_caught_up(r);

        /* The dry run shows the move and commits nothing at east. */
        int64_t before[PARTS];
        for (int p = 0; p < PARTS; p++)
                before[p] = committed(r, "east", "g", "clicks", p);
        j = failover(r, "g", "west", "east", true);
        for (int p = 0; p < PARTS; p++) {
                assert_int_equal(committed(r, "east", "g", "clicks", p),
                                 before[p]);
                assert_int_equal(committed(r, "east", "g", "west.clicks", p),
                                 -1);
                json_object *e = row(j, "east.clicks", p);
                if (e)
                        assert_string_equal(
                            json_object_get_string(field(e, "action")),
                            "would commit");
        }
        json_object_put(j);

        /* The failback. */
        j = failover(r, "g", "west", "east", false);
        for (int p = 0; p < PARTS; p++) {
                json_object *e = row(j, "east.clicks", p);
                assert_non_null(e);
                assert_string_equal(
                    json_object_get_string(field(e, "direction")), "to-origin");
                assert_string_equal(
                    json_object_get_string(field(e, "target_topic")), "clicks");
                assert_int_equal(json_object_get_int64(field(e, "committed")),
                                 pos_copy[p]);
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 bwd(p, pos_copy[p]));
                assert_int_equal(
                    json_object_get_int64(field(e, "target_before")),
                    before[p]);
                assert_int_equal(committed(r, "east", "g", "clicks", p),
                                 bwd(p, pos_copy[p]));
                if (pos_local[p] < 0)
                        continue;
                e = row(j, "clicks", p);
                assert_non_null(e);
                assert_string_equal(
                    json_object_get_string(field(e, "direction")), "forward");
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 pos_local[p]);
                assert_int_equal(committed(r, "east", "g", "west.clicks", p),
                                 pos_local[p]);
        }
        json_object_put(j);

        /* g at east reads the rest: over its three stints every f* and
         * v* once (plus the drill's d*, read once at the start). */
        int64_t n_back = consume(r, "east", "g", back, -1, seen);
        int64_t bad    = check_once(seen, "f", 50) + check_once(seen, "v", 40) +
                      check_once(seen, "d", 40);
        print_message("# failover and failback: g read %" PRId64
                      " records at east, %" PRId64 " at west, %" PRId64
                      " at east again; %" PRId64 " values missing or twice; "
                      "east.clicks [0] at %" PRId64 " -> clicks [0] at %" PRId64
                      " (%d loop records from %" PRId64 ")\n",
                      n_east, n_west, n_back, bad, pos_copy[0],
                      bwd(0, pos_copy[0]), NLOOP, loop_at);
        assert_int_equal(bad, 0);
        check_loop(seen);
        rk_bag_destroy(seen);
}

static void test_active_active_remote(void **state) {
        struct rk               *r         = scene();
        struct rk_bag           *seen      = rk_bag_new();
        static const char *const at_east[] = {"clicks", "west.clicks", NULL};
        static const char *const at_west[] = {"east.clicks", "clicks", NULL};
        (void)state;

        /* ga reads 70 of the 133 records of east's clicks (NLOOP of them
         * never copied) and west.clicks (the copy of west's v0..v39) */
        wait_caught_up(r);
        int64_t      n_east = consume(r, "east", "ga", at_east, 70, seen);
        json_object *j      = failover(r, "ga", "east", "west", false);
        for (int p = 0; p < PARTS; p++) {
                int64_t      c = committed(r, "east", "ga", "west.clicks", p);
                json_object *e = row(j, "west.clicks", p);
                if (c < 0) {
                        assert_null(e);
                        continue;
                }
                assert_non_null(e);
                assert_string_equal(
                    json_object_get_string(field(e, "direction")), "to-origin");
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 c);
                assert_int_equal(committed(r, "west", "ga", "clicks", p), c);
                /* east's own clicks go forward, as in any failover */
                if ((c = committed(r, "east", "ga", "clicks", p)) < 0)
                        continue;
                assert_non_null(e = row(j, "clicks", p));
                assert_int_equal(json_object_get_int64(field(e, "translated")),
                                 fwd(p, c));
                assert_int_equal(committed(r, "west", "ga", "east.clicks", p),
                                 fwd(p, c));
        }
        json_object_put(j);
        int64_t n_west = consume(r, "west", "ga", at_west, -1, seen);
        int64_t bad    = check_once(seen, "f", 50) + check_once(seen, "v", 40) +
                      check_once(seen, "d", 40);
        print_message("# active-active: ga read %" PRId64 " at east, %" PRId64
                      " at west; %" PRId64 " values missing or twice\n",
                      n_east, n_west, bad);
        assert_int_equal(bad, 0);
        check_loop(seen);
        rk_bag_destroy(seen);
}

static bool past(void *arg) {
        return harness_now_ms() >= *(int64_t *)arg;
}

static void test_drill_replication_stopped(void **state) {
        struct rk *r = scene();
        (void)state;

        /* gs could move: committed at east, no members anywhere */
        rd_kafka_t                      *c = consumer(r, "east", "gs");
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, "clicks", 0)->offset = 5;
        assert_int_equal(rd_kafka_commit(c, l, 0), 0);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(c);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        /* The gateway is gone, so its newest heartbeat only ages: once
         * past the 1 s limit, the drill must refuse at its first step. */
        int64_t quiet = harness_now_ms() + 1500;
        harness_wait_until(past, &quiet, 5000);
        const char      *w[] = {"drill",  "--group", "gs",
                                "--from", "east",    "--to",
                                "west",   "--json",  "--max-heartbeat-age",
                                "1",      NULL};
        harness_output_t o;
        int              rc = aagw(r, w, &o);
        fprintf(stderr, "# drill, replication stopped: exit %d: %s", rc, o.out);
        assert_int_equal(rc, 1);
        json_object *j = json_tokener_parse(o.out);
        assert_non_null(j);
        assert_string_equal(json_object_get_string(field(j, "result")),
                            "failed");
        if (!strstr(json_object_get_string(field(j, "reason")),
                    "replication east->west is stopped"))
                fail_msg("reason: %s",
                         json_object_get_string(field(j, "reason")));
        assert_false(json_object_get_boolean(field(j, "committed")));
        assert_true(json_object_get_int64(field(j, "heartbeat_age_ms")) > 1000);
        assert_non_null(strstr(o.err, "drill failed"));
        json_object_put(j);
        harness_output_deinit(&o);
        assert_int_equal(committed(r, "west", "gs", "east.clicks", 0), -1);
        print_message("# wall %.1f s\n", rk_elapsed(r));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_drill_passes),
            cmocka_unit_test(test_failover_failback),
            cmocka_unit_test(test_active_active_remote),
            cmocka_unit_test(test_drill_replication_stopped),
        };
        return cmocka_run_group_tests_name("kafka-drill", tests, NULL,
                                           group_teardown);
}
