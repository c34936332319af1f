/*
 * tests/realkafka/test_scale_flow.c: three aagw processes of one site
 * share the flow east->west (scale-out), through a kill -9 and restart,
 * a clean stop and a zombie, and the copy holds every source record
 * exactly once, in source order per partition.
 *
 * Each process (`--site west --scale-out true --unify off`, its own
 * --member and state dir, scale_out.rebalance cooperative: kafka-scale
 * runs the eager default) joins the owners' group of the flow at west;
 * the group's assignment of the work topic aagw.aagw.east-west.work
 * decides which source partitions each copies, in transactions that
 * only the owner can commit (replicator/flow.c, SCALE-OUT).  A
 * VerifiableProducer writes `clicks` (12 partitions) at east all along.
 *
 *   1. all three copy; member a is SIGKILLed and started again at once:
 *      its partitions move when its session (6 s) expires, the new
 *      owners wait for its open transaction to be aborted
 *      (scale_out.transaction_timeout, 6 s here);
 *   2. member b is stopped with SIGTERM (exit 0: it commits and leaves
 *      the group);
 *   3. member c is SIGSTOPped past its session and SIGCONTed: a zombie
 *      whose next commit the group coordinator refuses, or whose
 *      assignment is taken back first: its copies stay aborted.
 *
 * Between the steps the test waits until the copy (read read_committed)
 * grew, so that each step finds the flow copying.  At the end, with the
 * producer stopped and every copy in, the members stop cleanly and the
 * copy is read read_committed by aagw.kafka.ReadToEnd: every record of
 * east's `clicks` once, in source order per partition; every acked value
 * once in `clicks`.  c's log must show that it lost its partitions to
 * the group (fenced, or its assignment lost); a's that c's return took
 * only some of its partitions (the rest copied on), and no member's log
 * that a rebalance took all its partitions at once;
 * and the copy holds more
 * records read_uncommitted than read_committed (aborted copies exist;
 * printed, and asserted).  Before the stop, the /status of a and c
 * (admin endpoints) name each partition of `clicks` as copied by exactly
 * one of them, and /metrics carries the aagw_scale_* series with the
 * member's name.  Also: a's restart after the kill waits for its
 * earlier run to leave the group; a fourth process started with c's
 * member name exits 1 naming the taken name; heartbeats come from one
 * member at a time (about one a second at east, not three); a consumer
 * group's commit at east is checkpointed at west for every partition
 * (each by the member that copies it).  Last, one process without
 * scale-out takes over the site on a new state dir: it resumes after the
 * members' copies (which end in transaction markers) and runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aagw_policy.h"
#include "rk.h"

#define PARTS    12
/* The zombie: past the 6 s session, within the 10 s transaction
 * timeout, so that its transaction is still open when it wakes. */
#define STALL_MS 8000
#define GROW     20 /* copies each partition gains in a step */
#define VIEWS 1200  /* records of the topic made while they copy */

static const char *const gw_args[] = {
    "--site",      "west",
    "--scale-out", "true",
    "--unify",     "off",
    "--topic",     "clicks|views",
    "--set",       "scale_out.session_timeout=6s",
    "--set",       "scale_out.rebalance=cooperative",
    "--set",       "mm2.checkpoints_interval=2s",
    "--admin",     "127.0.0.1:0",
    NULL};

/* A consumer with the properties 'kv' (name, value, ..., NULL). */
static rd_kafka_t *consumer_new(const char *const *kv) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        for (int i = 0; kv[i]; i += 2)
                assert_int_equal(rd_kafka_conf_set(conf, kv[i], kv[i + 1],
                                                   err, sizeof(err)),
                                 RD_KAFKA_CONF_OK);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err,
                                     sizeof(err));
        if (!c)
                fail_msg("a consumer: %s", err);
        return c;
}

/* Records of every partition of 'topic' at 'alias' read with
 * 'isolation' from the beginning to the end, in all and per partition
 * ('per', PARTS of them, may be NULL); -1 if the reader did not get
 * there within 30 s. */
static int64_t count_records(struct rk *r, const char *alias,
                             const char *topic, const char *isolation,
                             int64_t *per) {
        char group[64];

        snprintf(group, sizeof(group), "scale-flow-count-%s", isolation);
        const char *const kv[] = {"bootstrap.servers", rk_bs(r, alias),
                                  "group.id", group,
                                  "enable.auto.commit", "false",
                                  "enable.partition.eof", "true",
                                  "isolation.level", isolation,
                                  NULL};
        rd_kafka_t *c = consumer_new(kv);
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(PARTS);
        for (int p = 0; p < PARTS; p++)
                rd_kafka_topic_partition_list_add(a, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, a), 0);
        rd_kafka_topic_partition_list_destroy(a);
        bool    eof[PARTS] = {false};
        int     eofs = 0;
        if (per)
                memset(per, 0, PARTS * sizeof(*per));
        int64_t n = 0, deadline = harness_now_ms() + 30000;
        while (eofs < PARTS && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                if (!m)
                        continue;
                if (!m->err) {
                        n++;
                        if (per && m->partition >= 0 && m->partition < PARTS)
                                per[m->partition]++;
                } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                         m->partition >= 0 && m->partition < PARTS &&
                         !eof[m->partition]) {
                        eof[m->partition] = true;
                        eofs++;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_destroy(c);
        return eofs == PARTS ? n : -1;
}

/* What the copy must reach: per partition (or, 'per' NULL, in all). */
struct grow {
        struct rk *r;
        int64_t    want[PARTS], now[PARTS];
        int64_t    want_all, now_all;
        bool       per;
};

static bool copy_grew(void *arg) {
        struct grow *g = arg;
        g->now_all = count_records(g->r, "west", "east.clicks",
                                   "read_committed", g->now);
        if (!g->per)
                return g->now_all >= g->want_all;
        for (int p = 0; p < PARTS; p++)
                if (g->now[p] < g->want[p])
                        return false;
        return true;
}

/* Wait (60 s) until every partition of the copy, read read_committed,
 * holds GROW records more than when the step began ('per'), or the copy
 * 'want_all' records in all: after a fault, each partition is copied
 * again, whoever owns it now. */
static void wait_copy(struct rk *r, struct rk_gw *gw, struct grow *g,
                      int64_t t0, const char *step) {
        if (!harness_wait_until(copy_grew, g, 60000)) {
                for (int i = 0; i < 3; i++)
                        if (gw[i].proc)
                                rk_gwn_dump_log(&gw[i], 30);
                for (int p = 0; g->per && p < PARTS; p++)
                        if (g->now[p] < g->want[p])
                                print_message("# partition %d: %" PRId64
                                              " copies, want %" PRId64 "\n",
                                              p, g->now[p], g->want[p]);
                fail_msg("%s: the copy did not grow in 60 s (%" PRId64
                         " records)",
                         step, g->now_all);
        }
        print_message("# %s: every partition copied again %.1f s after the "
                      "fault, copy %" PRId64 " records (%.1f s into the "
                      "test)\n",
                      step, (double)(harness_now_ms() - t0) / 1000.0,
                      g->now_all, rk_elapsed(r));
}

/* The copy's partitions now, GROW more each to be reached. */
static void step_begin(struct rk *r, struct grow *g) {
        memset(g, 0, sizeof(*g));
        g->r   = r;
        g->per = true;
        assert_true(count_records(r, "west", "east.clicks", "read_committed",
                                  g->want) >= 0);
        for (int p = 0; p < PARTS; p++)
                g->want[p] += GROW;
}


/* What the running members' /status say they copy: 'seen[p]' counts
 * the members that copy clicks [p]; false if a member did not answer or
 * named another member. */
struct owned {
        struct rk_gw *gw;
        int           seen[PARTS];
        char          why[256];
};

static bool owned_once(void *arg) {
        struct owned *o = arg;

        memset(o->seen, 0, sizeof(o->seen));
        for (int i = 0; i < 3; i++) {
                if (!o->gw[i].proc)
                        continue;
                char        *body = rk_gwn_http_get(&o->gw[i], "/status");
                json_object *st   = body ? json_tokener_parse(body) : NULL;
                json_object *flows, *so, *v, *owned, *parts;
                free(body);
                if (!st || !json_object_object_get_ex(st, "flows", &flows) ||
                    json_object_array_length(flows) != 1 ||
                    !json_object_object_get_ex(
                        json_object_array_get_idx(flows, 0), "scale_out",
                        &so) ||
                    !json_object_object_get_ex(so, "member", &v) ||
                    strcmp(json_object_get_string(v), o->gw[i].name) ||
                    !json_object_object_get_ex(so, "owned", &owned)) {
                        snprintf(o->why, sizeof(o->why),
                                 "member %s: no scale_out in /status",
                                 o->gw[i].name);
                        json_object_put(st);
                        return false;
                }
                if (json_object_object_get_ex(owned, "clicks", &parts))
                        for (size_t k = 0; k < json_object_array_length(parts);
                             k++) {
                                int p = json_object_get_int(
                                    json_object_array_get_idx(parts, k));
                                if (p >= 0 && p < PARTS)
                                        o->seen[p]++;
                        }
                json_object_put(st);
        }
        for (int p = 0; p < PARTS; p++)
                if (o->seen[p] != 1) {
                        snprintf(o->why, sizeof(o->why),
                                 "clicks [%d] is copied by %d members", p,
                                 o->seen[p]);
                        return false;
                }
        return true;
}

/* Commit 'off[p]' for every partition of clicks at east as group "app". */
static void app_commit(struct rk *r, const int64_t *off) {
        const char *const kv[] = {"bootstrap.servers", rk_bs(r, "east"),
                                  "group.id", "app", "log_level", "3", NULL};

        rd_kafka_t *c = consumer_new(kv);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(PARTS);
        for (int p = 0; p < PARTS; p++)
                rd_kafka_topic_partition_list_add(l, "clicks", p)->offset =
                    off[p];
        rd_kafka_resp_err_t e = rd_kafka_commit(c, l, 0);
        if (e)
                fail_msg("group app's commit at east: %s", rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(c);
}

/* Group app's checkpoints of east.clicks at west (the newest per
 * partition, from east.checkpoints.internal): how many partitions have
 * one whose upstream offset is 'want[p]' and whose downstream offset is
 * in (0, the copy's end]. */
struct ckpts {
        struct rk     *r;
        const int64_t *want;
        int64_t        up[PARTS], down[PARTS], end[PARTS];
        int            ok;
};

static bool ckpts_all(void *arg) {
        struct ckpts    *k = arg;
        const char *const kv[] = {"bootstrap.servers", rk_bs(k->r, "west"),
                                  "group.id", "scale-flow-ckpts",
                                  "enable.auto.commit", "false",
                                  "enable.partition.eof", "true",
                                  "log_level", "3", NULL};
        rd_kafka_t *c = consumer_new(kv);
        for (int p = 0; p < PARTS; p++) {
                int64_t lo;
                k->up[p] = k->down[p] = -1;
                if (rd_kafka_query_watermark_offsets(c, "east.clicks", p, &lo,
                                                     &k->end[p], 5000))
                        k->end[p] = -1;
        }
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, "east.checkpoints.internal", 0)
            ->offset = RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, a), 0);
        rd_kafka_topic_partition_list_destroy(a);
        int64_t deadline = harness_now_ms() + 10000;
        bool    eof      = false;
        while (!eof && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                struct aagw_mm2_checkpoint ck;
                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        eof = true;
                else if (!m->err &&
                         aagw_mm2_checkpoint_decode(m->key, m->key_len,
                                                    m->payload, m->len, &ck) &&
                         !strcmp(ck.group, "app") &&
                         !strcmp(ck.topic, "east.clicks") &&
                         ck.partition >= 0 && ck.partition < PARTS) {
                        k->up[ck.partition]   = ck.upstream;
                        k->down[ck.partition] = ck.downstream;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_destroy(c);
        k->ok = 0;
        for (int p = 0; p < PARTS; p++)
                k->ok += k->up[p] == k->want[p] && k->down[p] > 0 &&
                         k->down[p] <= k->end[p];
        return k->ok == PARTS;
}

/* Whether 'g''s only flow runs with every partition of clicks (and the
 * heartbeats') assigned, by its /status. */
static bool solo_running(void *arg) {
        struct rk_gw *g    = arg;
        char         *body = rk_gwn_http_get(g, "/status");
        json_object  *st   = body ? json_tokener_parse(body) : NULL;
        json_object  *flows, *v;
        bool          ok = false;

        free(body);
        if (st && json_object_object_get_ex(st, "flows", &flows) &&
            json_object_array_length(flows) == 1) {
                json_object *f = json_object_array_get_idx(flows, 0);
                ok = json_object_object_get_ex(f, "state", &v) &&
                     !strcmp(json_object_get_string(v), "running") &&
                     json_object_object_get_ex(f, "partitions", &v) &&
                     json_object_get_int(v) >= PARTS + 1;
        }
        json_object_put(st);
        return ok;
}

/* Lines of 'path' holding 's'. */
static int file_count(const char *path, const char *s) {
        char *text = harness_read_file(path, NULL);
        int   n    = 0;
        for (const char *p = text; p && (p = strstr(p, s)); p += strlen(s))
                n++;
        free(text);
        return n;
}

static bool file_has(const char *path, const char *s) {
        char *text = harness_read_file(path, NULL);
        bool  has  = text && strstr(text, s);
        free(text);
        return has;
}

struct log_wait {
        const char *path, *what;
};

static bool log_has(void *arg) {
        struct log_wait *w = arg;
        return file_has(w->path, w->what);
}

static void test_scale_flow(void **state) {
        struct rk   *r = rk_new("rk-scale-flow");
        struct rk_gw gw[3];
        char        *p_out, *p_err;

        *state = r;
        memset(gw, 0, sizeof(gw));
        rk_cluster_start(r, "east", 1);
        rk_cluster_start(r, "west", 1);
        rk_create_topic(r, "east", "clicks", PARTS, 1, 0);
        harness_proc_t *prod =
            rk_clicks_producer(r, "east", "1", "400", &p_out, &p_err);
        rk_gwn_start(r, &gw[0], "a", gw_args);
        rk_gwn_start(r, &gw[1], "b", gw_args);
        rk_gwn_start(r, &gw[2], "c", gw_args);
        int64_t t_members = harness_now_ms();
        struct grow g;
        step_begin(r, &g);
        wait_copy(r, gw, &g, harness_now_ms(), "three members");

        /* A topic made while the members copy: each owner of one of its
         * partitions reconciles it on its reconciler thread, beside the
         * copying of clicks, and copies it inside its transactions. */
        rk_create_topic(r, "east", "views", PARTS, 1, 0);
        rk_produce(r, "east", "views", PARTS, "v", VIEWS);

        /* 1: kill -9 and restart */
        step_begin(r, &g);
        int64_t t0 = harness_now_ms();
        assert_int_equal(rk_gwn_stop(r, &gw[0], SIGKILL, 10000),
                         128 + SIGKILL);
        rk_gwn_start(r, &gw[0], NULL, gw_args);
        wait_copy(r, gw, &g, t0, "a killed, restarted");
        /* The new run found the killed one still in the group and
         * waited for its session to end (the others may have copied its
         * partitions before that wait was over). */
        struct log_wait left = {gw[0].log, "the earlier member of this name "
                                           "left group"};
        assert_true(harness_wait_until(log_has, &left, 30000));

        /* 2: a clean stop */
        step_begin(r, &g);
        t0 = harness_now_ms();
        assert_int_equal(rk_gwn_stop(r, &gw[1], SIGTERM, 30000), 0);
        wait_copy(r, gw, &g, t0, "b stopped");

        /* 3: the zombie */
        step_begin(r, &g);
        t0 = harness_now_ms();
        assert_int_equal(harness_proc_signal(gw[2].proc, SIGSTOP), 0);
        usleep(STALL_MS * 1000);
        assert_int_equal(harness_proc_signal(gw[2].proc, SIGCONT), 0);
        wait_copy(r, gw, &g, t0, "c stalled 8 s");

        rk_producer_stop(r, prod, p_err);
        harness_proc_destroy(prod);
        struct rk_produced pr;
        rk_produced_parse(p_out, &pr);
        int64_t acked = rk_bag_total(pr.acked);
        print_message("# producer: %" PRId64 " acked, %" PRId64 " failed\n",
                      acked, rk_bag_total(pr.failed));
        int64_t src_n =
            count_records(r, "east", "clicks", "read_committed", NULL);
        assert_true(src_n >= acked);
        memset(&g, 0, sizeof(g));
        g.r        = r;
        g.want_all = src_n;
        wait_copy(r, gw, &g, harness_now_ms(), "caught up");
        /* Every record of views once in its copy (read_committed),
         * through the kill, the stop and the zombie. */
        int64_t views = -1, t_views = harness_now_ms();
        while ((views = count_records(r, "west", "east.views", "read_committed",
                                      NULL)) != VIEWS &&
               harness_now_ms() - t_views < 60000)
                usleep(500 * 1000);
        print_message("# east.views at west: %" PRId64 " records "
                      "read_committed, %d made at east while the members "
                      "copied clicks\n",
                      views, VIEWS);
        assert_int_equal(views, VIEWS);

        /* Checkpoints under scale-out: a consumer group commits the end
         * of every partition at east; each member checkpoints the
         * partitions it copies, so every partition gets its checkpoint
         * (2 s interval), translated into the copy. */
        int64_t per_src[PARTS];
        assert_int_equal(count_records(r, "east", "clicks", "read_committed",
                                       per_src),
                         src_n);
        app_commit(r, per_src);
        struct ckpts ck = {.r = r, .want = per_src};
        int64_t      t_ck = harness_now_ms();
        if (!harness_wait_until(ckpts_all, &ck, 30000)) {
                for (int p = 0; p < PARTS; p++)
                        print_message("#   clicks [%d]: committed %" PRId64
                                      ", checkpoint %" PRId64 " -> %" PRId64
                                      ", copy end %" PRId64 "\n",
                                      p, per_src[p], ck.up[p], ck.down[p],
                                      ck.end[p]);
                fail_msg("group app: %d of %d partitions checkpointed", ck.ok,
                         PARTS);
        }
        print_message("# group app: all %d partitions checkpointed at west "
                      "%" PRId64 " ms after its commit\n",
                      PARTS, harness_now_ms() - t_ck);

        /* a and c run: each source partition is copied by exactly one
         * of them, by their own account; /metrics names the member. */
        struct owned own = {.gw = gw};
        if (!harness_wait_until(owned_once, &own, 20000))
                fail_msg("/status of a and c: %s", own.why);
        char *m = rk_gwn_http_get(&gw[0], "/metrics");
        assert_non_null(m);
        assert_non_null(strstr(m, "aagw_scale_rebalances_total{flow=\"east->"
                                  "west\",member=\"a\"}"));
        assert_non_null(strstr(m, "aagw_scale_transactions_committed_total{"
                                  "flow=\"east->west\",member=\"a\"}"));
        free(m);
        /* The text `aagw status` prints. */
        char *t = rk_gwn_http_get(&gw[2], "/status?format=text");
        assert_non_null(t);
        assert_non_null(strstr(t, "\nmember:c\n"));
        assert_non_null(strstr(t, "\nowned:"));
        print_message("# c's aagw status: %.*s\n",
                      (int)strcspn(strstr(t, "\nowned:") + 1, "\n"),
                      strstr(t, "\nowned:") + 1);
        free(t);
        print_message("# /status: every partition of clicks copied by one "
                      "member (a or c)\n");

        /* A process started with c's member name while c runs: it
         * waits for the session (6 s) plus 5 s, then exits 1 naming the
         * taken name; a and c copy on. */
        {
                static const char *const dup_args[] = {
                    "--site",      "west",
                    "--scale-out", "true",
                    "--unify",     "off",
                    "--topic",     "clicks",
                    "--set",       "scale_out.session_timeout=6s",
                    "--set",       "scale_out.rebalance=cooperative",
                    "--member",    "c",
                    NULL};
                struct rk_gw dup;
                int          status = 0;
                memset(&dup, 0, sizeof(dup));
                int64_t t1 = harness_now_ms();
                rk_gwn_start(r, &dup, "dup", dup_args);
                assert_int_equal(harness_proc_wait(dup.proc, 40000, &status),
                                 AAGW_OK);
                harness_proc_destroy(dup.proc);
                dup.proc = NULL;
                print_message("# a second process named c: exit %d after "
                              "%" PRId64 " ms\n",
                              harness_exit_code(status),
                              harness_now_ms() - t1);
                if (harness_exit_code(status) != 1 ||
                    !file_has(dup.log, "member name c is taken")) {
                        rk_gwn_dump_log(&dup, 30);
                        fail_msg("a second process named c was not refused");
                }
                assert_true(harness_now_ms() - t1 >= 11000);
                if (!harness_wait_until(owned_once, &own, 20000))
                        fail_msg("/status of a and c after the second c: %s",
                                 own.why);
        }

        /* Heartbeats (1 s; MM2's topic at the source) come from one
         * member at a time, the owner of work partition 0, and keep
         * coming through the kill, the stop and the stall: about one a
         * second over the run, not one per member. */
        double  span_s = (double)(harness_now_ms() - t_members) / 1000.0;
        int64_t hbs    = rk_size(r, "east", "heartbeats");
        print_message("# heartbeats at east: %" PRId64 " over %.1f s "
                      "(interval 1 s, three members)\n",
                      hbs, span_s);
        assert_true(hbs <= (int64_t)(span_s * 1.25) + 5);
        assert_true(hbs >= (int64_t)(span_s * 0.4));

        int64_t uncommitted =
            count_records(r, "west", "east.clicks", "read_uncommitted", NULL);
        bool c_lost = file_has(gw[2].log, "fenced") ||
                      file_has(gw[2].log, "moved on without this member");
        print_message("# copy read_uncommitted %" PRId64 " (aborted copies "
                      "%" PRId64 "); c's log: %s\n",
                      uncommitted, uncommitted - src_n,
                      c_lost ? "lost its partitions to the group" : "nothing");
        /* Cooperative: when c came back from its stall, a (which had
         * taken over everything) gave up only the partitions that moved
         * to c and copied on with the rest; no member ever had all its
         * partitions taken by a rebalance. */
        bool a_some = file_has(gw[0].log, "a cooperative rebalance moves") &&
                      file_has(gw[0].log, "go on");
        bool all = false;
        for (int i = 0; i < 3; i++)
                all |= file_has(gw[i].log, "revoked by a rebalance") ||
                       file_has(gw[i].log, "assignment replaced");
        print_message("# a's log: %s; %s\n",
                      a_some ? "gave up some partitions, copied on with "
                               "the rest"
                             : "never gave up only some",
                      all ? "a member had all taken at once"
                          : "no member had all taken at once");
        assert_true(a_some);
        assert_false(all);
        assert_int_equal(rk_gwn_stop(r, &gw[0], SIGTERM, 30000), 0);
        assert_int_equal(rk_gwn_stop(r, &gw[2], SIGTERM, 30000), 0);

        /* Back to one process without scale-out, on a new state dir: the
         * copy's partitions end in transaction markers, which its
         * read_committed scans never see as records; it must still find
         * where the members' copies end (in each of the 12 partitions)
         * and run, copying nothing twice (checked below). */
        {
                static const char *const solo_args[] = {
                    "--site", "west", "--unify", "off", "--topic", "clicks",
                    "--admin", "127.0.0.1:0", NULL};
                struct rk_gw solo;
                memset(&solo, 0, sizeof(solo));
                int64_t t1 = harness_now_ms();
                rk_gwn_start(r, &solo, "solo", solo_args);
                if (!harness_wait_until(solo_running, &solo, 60000)) {
                        rk_gwn_dump_log(&solo, 30);
                        fail_msg("one process after scale-out: not running "
                                 "with every partition within 60 s");
                }
                int resumed = file_count(solo.log, "no stored position");
                print_message("# one process after scale-out: running in "
                              "%" PRId64 " ms, resumed %d partitions after "
                              "the members' copies\n",
                              harness_now_ms() - t1, resumed);
                assert_true(resumed >= PARTS);
                assert_int_equal(rk_gwn_stop(r, &solo, SIGTERM, 30000), 0);
        }

        const char *east_topics[] = {"clicks", NULL};
        const char *west_topics[] = {"east.clicks", NULL};
        char *east_out = rk_read_topics(r, "east", "read-east", east_topics);
        char *west_out = rk_read_topics(r, "west", "read-west", west_topics);
        struct rk_read src, copy;
        rk_read_parse(east_out, "clicks", &src);
        rk_read_parse(west_out, "east.clicks", &copy);
        bool src_ok = rk_check_source("east clicks", pr.acked, pr.failed, &src);
        bool ok     = rk_check("west east.clicks", src.values, NULL, &copy);
        int64_t order_bad = rk_order_diffs("west east.clicks", &src, &copy);
        print_message("# %" PRId64 " source records, wall %.1f s\n",
                      src.records, rk_elapsed(r));
        if (!ok || order_bad) {
                const char *const needles[] = {"takeover", "fenced", "owns",
                                               "lost", "aborted", NULL};
                for (int i = 0; i < 3; i++)
                        rk_grep_file(gw[i].log, "FLOW", needles);
        }
        assert_true(src_ok);
        assert_true(ok);
        assert_int_equal(order_bad, 0);
        assert_true(c_lost);
        assert_true(uncommitted > src_n);
        rk_produced_deinit(&pr);
        rk_read_deinit(&src);
        rk_read_deinit(&copy);
        free(east_out);
        free(west_out);
        free(p_out);
        free(p_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale_flow, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
