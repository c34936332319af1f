/*
 * tests/realkafka/test_scale_window.c: under scale-out the unify stage's
 * dedup ids live in a topic of their own, aagw.<gw>.<site>.ids.<out>,
 * which the broker empties once they are older than unify.window and a
 * margin (replicator/unify.c "SCALE-OUT", format and settings in
 * replicator_int.h), so a new owner restores the window's ids, not every
 * id ever delivered.
 *
 * One broker (west) that checks retention every second.  Dedup topic
 * `clicks` and its remote copy `east.clicks` (id = record key, 2
 * partitions each), `clicks.unified` 2 partitions; unify.window 15 s, so
 * the ids topic keeps ids 30 s (the window is its own margin under a
 * minute).  east is named but not started, as in test_scale_unify.c.
 *
 *  1. The ids topic is there already with other settings (compacted,
 *     an hour's retention, as if unify.window had been another) and an
 *     override of its own.  Member a sets cleanup.policy delete,
 *     retention.ms 30000, retention.bytes -1, segment.ms 60000
 *     (DescribeConfigs), keeps the other override, and logs what it
 *     found.  The state topic is there too, holding an id record as
 *     versions before the ids topic wrote them (id "legacy0", decided
 *     now): a restores it.
 *  2. a unifies N old ids (o0 ..); "legacy0", sent first, is dropped as
 *     seen.  a stops cleanly.
 *  3. Once the window has passed but before the retention has, a fresh
 *     member b (empty state directory) restores: it reads the N ids from
 *     the ids topic and "legacy0" from the state topic, and skips all of
 *     them as past the window.
 *  4. The broker deletes the old ids (the ids topic's low watermarks
 *     reach their high ones).  b unifies M recent ids (r0 ..), stops.
 *  5. A fresh member c restores: it reads M ids (the old ones are gone)
 *     and "legacy0" (compaction keeps it; skipped), and fewer records in
 *     all than the N old ids alone.  Then a
 *     duplicate of a recent id and of an old id arrive at east.clicks:
 *     the recent one is dropped, the old one (out of the window) is
 *     delivered again, as the single-process stage does.
 *
 * a runs without the route topic (scale_out.route false), b and c with
 * it: their routers start the inputs from the beginning, and what a
 * decided is skipped by the input positions a left in the changelog (the
 * old ids are past the window: decided again, they would be delivered
 * again, and clicks.unified would hold them twice).
 *
 * Without the ids topic (ids in the compacted state topic, as before),
 * step 1 finds the topic as the test made it and steps 3 and 5 read
 * every id.
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
#include <time.h>

#include "replicator_int.h"
#include "rk.h"

#define PARTS     2
#define WINDOW_S  15
#define N_OLD     300
#define N_RECENT  60
#define IDS_TOPIC "aagw.aagw.west.ids.clicks.unified"
#define STATE_TOPIC "aagw.aagw.west.state.clicks.unified"
#define DONE      "rebalance done"

/* A consumer-less admin handle of our own for 'topic''s configs and
 * watermarks. */
static rd_kafka_t *client(struct rk *r) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "west"), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(rk);
        return rk;
}

/* The effective value of config 'name' of 'topic' (DescribeConfigs),
 * into 'buf'. */
static void topic_config(rd_kafka_t *rk, const char *topic, const char *name,
                         char *buf, size_t size) {
        rd_kafka_ConfigResource_t *res =
            rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_DescribeConfigs(rk, &res, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        assert_non_null(ev);
        assert_int_equal(rd_kafka_event_error(ev), 0);
        size_t                            rn, cn;
        const rd_kafka_ConfigResource_t **rr =
            rd_kafka_DescribeConfigs_result_resources(
                rd_kafka_event_DescribeConfigs_result(ev), &rn);
        assert_int_equal(rn, 1);
        assert_int_equal(rd_kafka_ConfigResource_error(rr[0]), 0);
        const rd_kafka_ConfigEntry_t **ce =
            rd_kafka_ConfigResource_configs(rr[0], &cn);
        buf[0] = '\0';
        for (size_t i = 0; i < cn; i++)
                if (!strcmp(rd_kafka_ConfigEntry_name(ce[i]), name))
                        snprintf(buf, size, "%s",
                                 rd_kafka_ConfigEntry_value(ce[i])
                                     ? rd_kafka_ConfigEntry_value(ce[i])
                                     : "(null)");
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_ConfigResource_destroy(res);
}

/* Delete group 'group''s committed offsets of every partition of 'topic'
 * (PARTS), as the broker does when they expire. */
static void delete_offsets(rd_kafka_t *rk, const char *group,
                           const char *topic) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(PARTS);
        for (int p = 0; p < PARTS; p++)
                rd_kafka_topic_partition_list_add(l, topic, p);
        rd_kafka_DeleteConsumerGroupOffsets_t *d =
            rd_kafka_DeleteConsumerGroupOffsets_new(group, l);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_DeleteConsumerGroupOffsets(rk, &d, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        assert_non_null(ev);
        assert_int_equal(rd_kafka_event_error(ev), 0);
        size_t                          n;
        const rd_kafka_group_result_t **gr =
            rd_kafka_DeleteConsumerGroupOffsets_result_groups(
                rd_kafka_event_DeleteConsumerGroupOffsets_result(ev), &n);
        assert_int_equal(n, 1);
        assert_null(rd_kafka_group_result_error(gr[0]));
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_DeleteConsumerGroupOffsets_destroy(d);
        rd_kafka_topic_partition_list_destroy(l);
}

/* The unify stage's counter 'name' ("\"records_in\":") in member
 * 'g''s /status, -1 if absent. */
static long long unify_counter(const struct rk_gw *g, const char *name) {
        char       *body = rk_gwn_http_get(g, "/status");
        const char *u    = body ? strstr(body, "\"unify\"") : NULL;
        const char *ri   = u ? strstr(u, name) : NULL;
        long long   n    = ri ? atoll(ri + strlen(name)) : -1;
        free(body);
        return n;
}

/* Create 'topic' (PARTS partitions, one replica) with the configs 'kv'
 * (NULL-terminated name, value pairs). */
static void create_with(rd_kafka_t *rk, const char *topic,
                        const char *const *kv) {
        char                 err[512];
        rd_kafka_NewTopic_t *nt =
            rd_kafka_NewTopic_new(topic, PARTS, 1, err, sizeof(err));
        assert_non_null(nt);
        for (size_t i = 0; kv[i]; i += 2)
                assert_int_equal(rd_kafka_NewTopic_set_config(nt, kv[i],
                                                              kv[i + 1]),
                                 0);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
        assert_non_null(ev);
        assert_int_equal(rd_kafka_event_error(ev), 0);
        size_t                         n;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_CreateTopics_result_topics(
                rd_kafka_event_CreateTopics_result(ev), &n);
        assert_int_equal(n, 1);
        if (rd_kafka_topic_result_error(tr[0]))
                fail_msg("creating %s: %s", topic,
                         rd_kafka_topic_result_error_string(tr[0]));
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewTopic_destroy(nt);
}

/* Write the id record of id 'id' (--id key: the record key), decided
 * now at west, into its output partition of the state topic, as versions
 * before the ids topic did (not in a transaction: read_committed readers
 * see it as well). */
static void put_legacy_id(struct rk *r, const char *id) {
        struct changelog_rec c;
        uint8_t  key[CHANGELOG_KEY_MAX], val[CHANGELOG_VAL_MAX];
        size_t   klen, vlen;
        uint64_t hk;
        char     err[512];

        memset(&c, 0, sizeof(c));
        c.kind = CHANGELOG_ID;
        aagw_scoped_key("west", id, strlen(id), c.key);
        c.hlc     = 1;
        c.time_ms = (int64_t)time(NULL) * 1000;
        snprintf(c.origin, sizeof(c.origin), "west");
        snprintf(c.topic, sizeof(c.topic), "clicks");
        changelog_encode(&c, key, &klen, val, &vlen);
        memcpy(&hk, c.key, 8); /* the stage's output partition */
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, "west"), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(p);
        assert_int_equal(
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(STATE_TOPIC),
                              RD_KAFKA_V_PARTITION((int32_t)(hk % PARTS)),
                              RD_KAFKA_V_KEY(key, klen),
                              RD_KAFKA_V_VALUE(val, vlen),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
        assert_int_equal(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(p);
}

/* ---------------------------------------------------------------- LOGS --- */

/* What a member's restore logged: "restored P partitions of ...: R
 * records, B bytes in T ms (I ids, E of them past unify.window:
 * skipped)". */
struct restored {
        long long records, ids, expired;
};

static void restored_of(struct rk_gw *g, struct restored *rs) {
        char       *text = harness_read_file(g->log, NULL);
        const char *p    = text ? strstr(text, " restored ") : NULL;
        long long   bytes, ms;

        p = p ? strstr(p, "partitions of ") : NULL;
        p = p ? strstr(p, ": ") : NULL;
        if (!p || sscanf(p, ": %lld records, %lld bytes in %lld ms (%lld ids, "
                            "%lld of them",
                         &rs->records, &bytes, &ms, &rs->ids,
                         &rs->expired) != 5) {
                rk_gwn_dump_log(g, 40);
                free(text);
                fail_msg("%s: no restore line", g->log);
        }
        free(text);
        print_message("# member %s restored %lld records (%lld ids, %lld past "
                      "the window)\n",
                      g->name, rs->records, rs->ids, rs->expired);
}

/* ------------------------------------------------------------ DELETION --- */

struct deleted_arg {
        rd_kafka_t *rk;
        int64_t     lo[PARTS], hi[PARTS];
};

/* Every partition of the ids topic that held records holds none any
 * more: the broker deleted its segments (the low watermark is the high
 * one). */
static bool ids_deleted(void *arg) {
        struct deleted_arg *d = arg;

        for (int p = 0; p < PARTS; p++) {
                if (rd_kafka_query_watermark_offsets(d->rk, IDS_TOPIC, p,
                                                     &d->lo[p], &d->hi[p],
                                                     5000) ||
                    d->hi[p] == 0 || d->lo[p] < d->hi[p])
                        return false;
        }
        return true;
}

/* ---------------------------------------------------------------- TEST --- */

static void test_scale_window(void **state) {
        struct rk   *r = rk_new("rk-scale-window");
        struct rk_gw g[3];
        char         v[64];

        *state = r;
        memset(g, 0, sizeof(g));
        static const char *const props[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4",
            "group.initial.rebalance.delay.ms=0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms="
            "1000",
            /* Kafka looks for segments past their retention every 5
             * minutes by default. */
            "log.retention.check.interval.ms=1000",
            NULL};
        rk_cluster_start_with(r, "west", 1, props);
        rk_create_topic(r, "west", "clicks", PARTS, 1, 0);
        rk_create_topic(r, "west", "east.clicks", PARTS, 1, 0);
        rk_create_topic(r, "west", "clicks.unified", PARTS, 1, 0);

        char window[32];
        snprintf(window, sizeof(window), "unify.window=%ds", WINDOW_S);
        const char *const args[] = {
            "--cluster",   "east=127.0.0.1:9",
            "--site",      "west",
            "--scale-out", "true",
            "--id",        "key",
            "--topic",     "clicks",
            "--set",       window,
            "--set",       "scale_out.work_partitions=2",
            "--set",       "scale_out.session_timeout=6s",
            "--set",       "scale_out.transaction_timeout=10s",
            "--admin",     "127.0.0.1:0",
            "--set",       "scale_out.route=true",
            NULL};
        /* a runs without the route topic (every member reads every
         * input), b and c with it: a site switched to the route keeps
         * what it decided before (the input positions in the changelog
         * hold the routed records a decided back). */
        const char *args_a[sizeof(args) / sizeof(args[0])];
        memcpy(args_a, args, sizeof(args));
        args_a[sizeof(args) / sizeof(args[0]) - 2] = "scale_out.route=false";

        /* 1. The ids topic, there before with other settings. */
        rd_kafka_t              *rk    = client(r);
        static const char *const old[] = {"cleanup.policy", "compact",
                                          "retention.ms", "3600000",
                                          "max.message.bytes", "2000000",
                                          NULL};
        create_with(rk, IDS_TOPIC, old);
        static const char *const compact[] = {"cleanup.policy", "compact",
                                              NULL};
        create_with(rk, STATE_TOPIC, compact);
        put_legacy_id(r, "legacy0");
        rk_gwn_start(r, &g[0], "a", args_a);
        rk_gwn_expect_log(&g[0], DONE, 0, 60000);
        struct restored rs;
        restored_of(&g[0], &rs);
        assert_int_equal(rs.ids, 1);
        assert_int_equal(rs.expired, 0);
        rk_gwn_expect_log(
            &g[0], IDS_TOPIC " had cleanup.policy=compact retention.ms=3600000",
            0, 1000);
        struct {
                const char *name, *want;
        } conf[] = {{"cleanup.policy", "delete"},
                    {"retention.ms", "30000"},
                    {"retention.bytes", "-1"},
                    {"segment.ms", "60000"},
                    {"max.message.bytes", "2000000"}};
        for (size_t i = 0; i < sizeof(conf) / sizeof(conf[0]); i++) {
                topic_config(rk, IDS_TOPIC, conf[i].name, v, sizeof(v));
                print_message("# %s %s=%s\n", IDS_TOPIC, conf[i].name, v);
                assert_string_equal(v, conf[i].want);
        }
        topic_config(rk, "aagw.aagw.west.state.clicks.unified",
                     "cleanup.policy", v, sizeof(v));
        assert_string_equal(v, "compact");

        /* 2. Old ids, unified by a; "legacy0" first in partition 0. */
        rk_produce_keyed(r, "west", "clicks", PARTS, "legacy", 0, 1);
        rk_produce_keyed(r, "west", "clicks", PARTS, "o", 0, N_OLD);
        int64_t deadline = harness_now_ms() + 30000;
        while (rk_count(r, "west", "clicks.unified", "read_committed",
                        NULL) < N_OLD &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }
        struct rk_bag *got = rk_bag_new();
        assert_int_equal(rk_count(r, "west", "clicks.unified",
                                  "read_committed", got),
                         N_OLD);
        assert_int_equal(rk_bag_count(got, "legacy0"), 0);
        rk_bag_destroy(got);
        int64_t t_old = harness_now_ms(); /* every old id decided */
        assert_int_equal(rk_gwn_stop(r, &g[0], SIGTERM, 30000), 0);

        /* 3. Past the window, not yet past the retention: b reads the old
         * ids and skips them. */
        int64_t wait = t_old + WINDOW_S * 1000 + 500 - harness_now_ms();
        if (wait > 0) {
                struct timespec ts = {wait / 1000, (wait % 1000) * 1000000L};
                nanosleep(&ts, NULL);
        }
        rk_gwn_start(r, &g[1], "b", args);
        rk_gwn_expect_log(&g[1], DONE, 0, 60000);
        double b_at = (double)(harness_now_ms() - t_old) / 1000;
        restored_of(&g[1], &rs);
        print_message("# b restored %.1f s after the old ids were decided "
                      "(window %d s, retention %d s)\n",
                      b_at, WINDOW_S, 2 * WINDOW_S);
        if (rs.ids == 0 && b_at > 2 * WINDOW_S - 2)
                fail_msg("b restored too late (%.1f s): the broker may have "
                         "deleted the old ids already",
                         b_at);
        assert_int_equal(rs.ids, N_OLD + 1);
        assert_int_equal(rs.expired, N_OLD + 1);
        /* b made the route topic, with the settings deployment.md
         * gives it. */
        struct {
                const char *name, *want;
        } rconf[] = {{"cleanup.policy", "delete"},
                     {"retention.ms", "604800000"},
                     {"max.message.bytes", "16777216"}};
        for (size_t i = 0; i < sizeof(rconf) / sizeof(rconf[0]); i++) {
                topic_config(rk, "aagw.aagw.west.route.clicks.unified",
                             rconf[i].name, v, sizeof(v));
                assert_string_equal(v, rconf[i].want);
        }

        /* 4. The broker deletes them; recent ids, unified by b. */
        struct deleted_arg d = {.rk = rk};
        if (!harness_wait_until(ids_deleted, &d, 2 * WINDOW_S * 1000 + 30000))
                fail_msg("%s not emptied by the broker: [0] %" PRId64
                         "..%" PRId64 ", [1] %" PRId64 "..%" PRId64,
                         IDS_TOPIC, d.lo[0], d.hi[0], d.lo[1], d.hi[1]);
        print_message("# ids deleted %.1f s after the old ids were decided "
                      "(low watermarks %" PRId64 ", %" PRId64 ")\n",
                      (double)(harness_now_ms() - t_old) / 1000, d.lo[0],
                      d.lo[1]);
        rk_produce_keyed(r, "west", "clicks", PARTS, "r", 0, N_RECENT);
        deadline = harness_now_ms() + 30000;
        while (rk_count(r, "west", "clicks.unified", "read_committed",
                        NULL) < N_OLD + N_RECENT &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(rk_count(r, "west", "clicks.unified",
                                  "read_committed", NULL),
                         N_OLD + N_RECENT);
        assert_int_equal(rk_gwn_stop(r, &g[1], SIGTERM, 30000), 0);

        /* 5. c restores the window's ids only; dedup holds within the
         * window, not past it. */
        rk_gwn_start(r, &g[2], "c", args);
        rk_gwn_expect_log(&g[2], DONE, 0, 60000);
        restored_of(&g[2], &rs);
        assert_int_equal(rs.ids, N_RECENT + 1);
        assert_int_equal(rs.expired, 1);
        assert_true(rs.records < N_OLD);
        /* Same partition, the recent duplicate first: when the old one is
         * out, the recent one was decided. */
        rk_produce_keyed(r, "west", "east.clicks", PARTS, "r", 7, 1);
        rk_produce_keyed(r, "west", "east.clicks", PARTS, "o", 9, 1);
        deadline = harness_now_ms() + 30000;
        while (rk_count(r, "west", "clicks.unified", "read_committed",
                        NULL) < N_OLD + N_RECENT + 1 &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }
        got       = rk_bag_new();
        int64_t n = rk_count(r, "west", "clicks.unified",
                                      "read_committed", got);
        print_message("# clicks.unified: %" PRId64 " records; r7 %" PRId64
                      " times, o9 %" PRId64 " times\n",
                      n, rk_bag_count(got, "r7"), rk_bag_count(got, "o9"));
        assert_int_equal(rk_bag_count(got, "r7"), 1);
        assert_int_equal(rk_bag_count(got, "o9"), 2);
        assert_int_equal(n, N_OLD + N_RECENT + 1);
        rk_bag_destroy(got);
        assert_int_equal(rk_gwn_stop(r, &g[2], SIGTERM, 30000), 0);

        /* 6. One member alone on a new unified topic routes nothing (it
         * owns every output partition): its route partitions stay empty,
         * yet their positions reach the changelog, so its restart
         * restores from the changelog instead of taking the site for one
         * that ran without scale-out (a rebuild from the output), and
         * delivers nothing twice. */
        rk_create_topic(r, "west", "solo", PARTS, 1, 0);
        rk_create_topic(r, "west", "solo.unified", PARTS, 1, 0);
        const char *args_d[sizeof(args) / sizeof(args[0])];
        memcpy(args_d, args, sizeof(args));
        for (size_t i = 0; args_d[i]; i++)
                if (!strcmp(args_d[i], "clicks"))
                        args_d[i] = "solo";
        rk_produce_keyed(r, "west", "solo", PARTS, "s", 0, 50);
        rk_gwn_start(r, &g[0], "d", args_d);
        rk_gwn_expect_log(&g[0], DONE, 0, 60000);
        deadline = harness_now_ms() + 30000;
        while (rk_count(r, "west", "solo.unified", "read_committed", NULL) <
                   50 &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(rk_gwn_stop(r, &g[0], SIGTERM, 30000), 0);
        rk_gwn_start(r, &g[0], NULL, args_d);
        rk_gwn_expect_log(&g[0], DONE, 0, 60000);
        rk_produce_keyed(r, "west", "solo", PARTS, "s", 0, 60);
        deadline = harness_now_ms() + 30000;
        while (rk_count(r, "west", "solo.unified", "read_committed", NULL) <
                   60 &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }
        int rebuilt = rk_log_count(g[0].log, "had no changelog");
        got         = rk_bag_new();
        n = rk_count(r, "west", "solo.unified", "read_committed", got);
        print_message("# solo.unified after d's restart: %" PRId64
                      " records, %" PRId64 " distinct; rebuilds logged %d\n",
                      n, rk_bag_distinct(got), rebuilt);
        assert_int_equal(rebuilt, 0);
        assert_int_equal(n, 60);
        assert_int_equal(rk_bag_distinct(got), 60);
        rk_bag_destroy(got);
        assert_int_equal(rk_gwn_stop(r, &g[0], SIGTERM, 30000), 0);

        /* 7. The owners' group loses its offsets of solo (as when they
         * expire while every process is down): d's router finds its
         * positions in the state topic instead, and reads only what is
         * new. */
        delete_offsets(rk, "aagw.aagw.west.unify", "solo");
        rk_gwn_start(r, &g[0], NULL, args_d);
        rk_gwn_expect_log(&g[0], DONE, 0, 60000);
        rk_produce_keyed(r, "west", "solo", PARTS, "s", 60, 10);
        deadline = harness_now_ms() + 30000;
        while (rk_count(r, "west", "solo.unified", "read_committed", NULL) <
                   70 &&
               harness_now_ms() < deadline) {
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
        }
        long long read_in = unify_counter(&g[0], "\"records_in\":");
        /* Alone, d owns every unified partition: it decides what it
         * reads at once and routes nothing (metrics.md). */
        long long routed  = unify_counter(&g[0], "\"routed\":");
        int       found   = rk_log_count(
                    g[0].log, "holds no offset of 2 input partitions it routes now; "
                                      "2 of them found in the state topics");
        got = rk_bag_new();
        n   = rk_count(r, "west", "solo.unified", "read_committed", got);
        print_message("# solo's offsets deleted: d read %lld input records "
                      "after its restart (10 new), found its positions in "
                      "the state topic: %s; solo.unified %" PRId64
                      " records, %" PRId64 " distinct\n",
                      read_in, found ? "yes" : "no", n, rk_bag_distinct(got));
        if (!found)
                rk_gwn_dump_log(&g[0], 30);
        assert_true(found > 0);
        assert_int_equal(read_in, 10);
        assert_int_equal(routed, 0);
        assert_int_equal(n, 70);
        assert_int_equal(rk_bag_distinct(got), 70);
        rk_bag_destroy(got);
        assert_int_equal(rk_gwn_stop(r, &g[0], SIGTERM, 30000), 0);
        rd_kafka_destroy(rk);
        print_message("# wall %.1f s\n", rk_elapsed(r));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale_window, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
