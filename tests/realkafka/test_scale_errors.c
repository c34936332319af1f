/*
 * tests/realkafka/test_scale_errors.c: under scale-out, no single record
 * stops the gateway.  Two aagw processes of site west (members a and b,
 * `--scale-out true`) share the flow east->west and west's unify stage;
 * among the records are some the targets refuse for good:
 *
 *  - east's `clicks`: e19 and e22 (adjacent in partition 1) are 50,000
 *    bytes, over the max.message.bytes (20,000) of their copy
 *    `east.clicks` at west: the broker refuses them, with the records
 *    batched beside them; e41 is 150,000 bytes, over the producers'
 *    message.max.bytes (100,000 here): librdkafka refuses it before it
 *    is sent;
 *  - west's `clicks`: w31 (50,000 bytes) is over the max.message.bytes
 *    (20,000) of `clicks.unified`, w50 (150,000) over the producers'.
 *
 * The test writes every record in one burst per site (so the big ones
 * share batches with their neighbours), once both members own their
 * partitions, and checks with a reader of its own (librdkafka,
 * read_committed):
 *  - `east.clicks` holds every other east record exactly once, in its
 *    source partition, in source order;
 *  - `aagw.dlq.east` holds exactly e19, e22 and e41, each once, with
 *    aagw.dlq.reason, aagw.dlq.source (the source coordinates) and the
 *    copy's headers (aagw.prov); e19 and e22 with their value, e41
 *    without (its dead-letter copy is over the producer's limit too:
 *    aagw.dlq.stripped);
 *  - `clicks.unified` holds every id of both sites that reached west
 *    once: w31 and w50 as stand-ins (empty value, aagw.unify.oversize);
 *  - the /status counters of the two members add up: dead_lettered 3,
 *    produce_errors 4 (the three refused copies and e41's dead-letter
 *    copy, as in single-process mode), oversized 2;
 *  - a third member started with scale_out.rebalance cooperative among
 *    these eager ones exits 1, naming the setting;
 *  - both members still run and stop with status 0.
 * Without the redo's replacement the flow fails (exit 1) at e19 and the
 * unify stage aborts and redoes its transaction forever.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rk.h"

#define PARTS        3
#define N            60      /* records per site */
#define LIMIT        "20000" /* max.message.bytes of the two targets */
#define BIG          50000   /* over LIMIT */
#define HUGE         150000  /* over PRODUCER_MAX */
#define PRODUCER_MAX "100000"
#define REASON       "Broker: Message size too large"

/* The size of record 'i' of 'site' ('e' or 'w'); 0: small. */
static size_t big_size(char site, int i) {
        if (site == 'e')
                return i == 19 || i == 22 ? BIG : i == 41 ? HUGE : 0;
        return i == 31 ? BIG : i == 50 ? HUGE : 0;
}

static bool dead_lettered(int i) {
        return big_size('e', i) > 0;
}

/* ------------------------------------------------------------ WRITING --- */

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        (void)rk;
        if (m->err)
                ++*(int *)opaque;
}

/* Write N records to 'topic' at 'alias' in one burst: key "<site><i>",
 * partition i % PARTS, value the key (a big one: the key, ':' and
 * filler up to its size). */
static void write_site(struct rk *r, const char *alias, const char *topic,
                       char site) {
        char             err[512];
        int              failed = 0;
        rd_kafka_conf_t *conf   = rd_kafka_conf_new();
        const char *const kv[] = {"bootstrap.servers", rk_bs(r, alias),
                                  "enable.idempotence", "true",
                                  "linger.ms", "50",
                                  NULL};

        for (int k = 0; kv[k]; k += 2)
                assert_int_equal(rd_kafka_conf_set(conf, kv[k], kv[k + 1], err,
                                                   sizeof(err)),
                                 RD_KAFKA_CONF_OK);
        rd_kafka_conf_set_dr_msg_cb(conf, dr);
        rd_kafka_conf_set_opaque(conf, &failed);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                     sizeof(err));
        assert_non_null(p);
        for (int i = 0; i < N; i++) {
                char   key[16];
                size_t len = big_size(site, i);
                snprintf(key, sizeof(key), "%c%d", site, i);
                char *val = malloc(len ? len : strlen(key) + 1);
                assert_non_null(val);
                if (len) {
                        memset(val, 'x', len);
                        memcpy(val, key, strlen(key));
                        val[strlen(key)] = ':';
                } else {
                        len = strlen(key);
                        memcpy(val, key, len);
                }
                assert_int_equal(
                    rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic),
                                      RD_KAFKA_V_PARTITION(i % PARTS),
                                      RD_KAFKA_V_KEY(key, strlen(key)),
                                      RD_KAFKA_V_VALUE(val, len),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                                      RD_KAFKA_V_END),
                    0);
        }
        assert_int_equal(rd_kafka_flush(p, 30000), 0);
        rd_kafka_destroy(p);
        assert_int_equal(failed, 0);
}

/* ------------------------------------------------------------ READING --- */

struct rec {
        int32_t             partition;
        int64_t             offset;
        char                key[32];
        size_t              len;
        char                head[32]; /* the value's first bytes */
        rd_kafka_headers_t *hdrs;     /* NULL: none */
};

struct recs {
        struct rec *v;
        size_t      n;
};

/* The last value of header 'name' of 'rc', NUL-terminated into 'buf';
 * NULL if it has none. */
static const char *hdr(const struct rec *rc, const char *name, char *buf,
                       size_t size) {
        const void *v;
        size_t      len;

        if (!rc->hdrs ||
            rd_kafka_header_get_last(rc->hdrs, name, &v, &len))
                return NULL;
        snprintf(buf, size, "%.*s", (int)len, v ? (const char *)v : "");
        return buf;
}

static bool topic_listed(struct rk *r, rd_kafka_t *c, const char *topic,
                         int *parts) {
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, topic, NULL);
        bool              ok  = false;

        (void)r;
        if (!rd_kafka_metadata(c, 0, rkt, &md, 5000)) {
                ok = md->topic_cnt == 1 && !md->topics[0].err &&
                     md->topics[0].partition_cnt > 0;
                if (ok)
                        *parts = md->topics[0].partition_cnt;
                rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_destroy(rkt);
        return ok;
}

/* Every record of 'topic' at 'alias', read read_committed from the
 * beginning to the end. */
static void read_all(struct rk *r, const char *alias, const char *topic,
                     struct recs *out) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const char *const kv[] = {"bootstrap.servers", rk_bs(r, alias),
                                  "group.id", "rk-scale-errors",
                                  "enable.auto.commit", "false",
                                  "enable.partition.eof", "true",
                                  "isolation.level", "read_committed",
                                  "allow.auto.create.topics", "false",
                                  NULL};
        int parts = 0;

        memset(out, 0, sizeof(*out));
        for (int k = 0; kv[k]; k += 2)
                assert_int_equal(rd_kafka_conf_set(conf, kv[k], kv[k + 1], err,
                                                   sizeof(err)),
                                 RD_KAFKA_CONF_OK);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        int64_t deadline = harness_now_ms() + 20000;
        while (!topic_listed(r, c, topic, &parts) &&
               harness_now_ms() < deadline)
                usleep(200 * 1000);
        if (!parts)
                fail_msg("%s at %s: not there", topic, alias);
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(parts);
        for (int p = 0; p < parts; p++)
                rd_kafka_topic_partition_list_add(a, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, a), 0);
        rd_kafka_topic_partition_list_destroy(a);
        int  eofs = 0;
        bool eof[64] = {false};
        assert_true(parts <= 64);
        deadline = harness_now_ms() + 30000;
        while (eofs < parts && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (!eof[m->partition]) {
                                eof[m->partition] = true;
                                eofs++;
                        }
                } else if (!m->err) {
                        out->v = realloc(out->v, (out->n + 1) * sizeof(*out->v));
                        assert_non_null(out->v);
                        struct rec *rc = &out->v[out->n++];
                        memset(rc, 0, sizeof(*rc));
                        rc->partition = m->partition;
                        rc->offset    = m->offset;
                        rc->len       = m->len;
                        snprintf(rc->key, sizeof(rc->key), "%.*s",
                                 (int)m->key_len,
                                 m->key ? (const char *)m->key : "");
                        snprintf(rc->head, sizeof(rc->head), "%.*s",
                                 (int)(m->len < 31 ? m->len : 31),
                                 m->payload ? (const char *)m->payload : "");
                        rd_kafka_message_detach_headers(m, &rc->hdrs);
                } else {
                        print_message("# %s: %s\n", topic,
                                      rd_kafka_message_errstr(m));
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(c);
        rd_kafka_destroy(c);
        if (eofs < parts)
                fail_msg("%s at %s: not read to its end in 30 s", topic,
                         alias);
}

static void recs_free(struct recs *rs) {
        for (size_t i = 0; i < rs->n; i++)
                if (rs->v[i].hdrs)
                        rd_kafka_headers_destroy(rs->v[i].hdrs);
        free(rs->v);
}

static size_t key_count(const struct recs *rs, const char *key,
                        const struct rec **last) {
        size_t n = 0;
        for (size_t i = 0; i < rs->n; i++)
                if (!strcmp(rs->v[i].key, key)) {
                        n++;
                        if (last)
                                *last = &rs->v[i];
                }
        return n;
}

/* ------------------------------------------------------------- STATUS --- */


/* What the two members' /status say, added up. */
struct status {
        struct rk_gw *gw;
        int           copiers[PARTS]; /* members copying clicks [p] */
        int           unify_owned;    /* output partitions owned */
        int64_t       dead_lettered, produce_errors, oversized;
        bool          running;        /* every flow and stage running */
        char          why[256];
};

static int64_t json_i64(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v)
                                                     : -1;
}

static bool status_read(struct status *s) {
        memset(s->copiers, 0, sizeof(s->copiers));
        s->unify_owned   = 0;
        s->dead_lettered = s->produce_errors = s->oversized = 0;
        s->running       = true;
        for (int i = 0; i < 2; i++) {
                char        *body = rk_gwn_http_get(&s->gw[i], "/status");
                json_object *st   = body ? json_tokener_parse(body) : NULL;
                json_object *flows, *un, *f, *u, *so, *owned, *parts, *v;
                free(body);
                if (!st || !json_object_object_get_ex(st, "flows", &flows) ||
                    json_object_array_length(flows) != 1 ||
                    !json_object_object_get_ex(st, "unify", &un) ||
                    json_object_array_length(un) != 1) {
                        snprintf(s->why, sizeof(s->why),
                                 "member %s: no /status (yet)",
                                 s->gw[i].name);
                        json_object_put(st);
                        return false;
                }
                f = json_object_array_get_idx(flows, 0);
                u = json_object_array_get_idx(un, 0);
                s->dead_lettered += json_i64(f, "dead_lettered");
                s->produce_errors += json_i64(f, "produce_errors");
                s->oversized += json_i64(u, "oversized");
                if (!json_object_object_get_ex(f, "state", &v) ||
                    strcmp(json_object_get_string(v), "running") ||
                    !json_object_object_get_ex(u, "state", &v) ||
                    strcmp(json_object_get_string(v), "running"))
                        s->running = false;
                if (json_object_object_get_ex(f, "scale_out", &so) &&
                    json_object_object_get_ex(so, "owned", &owned) &&
                    json_object_object_get_ex(owned, "clicks", &parts))
                        for (size_t k = 0; k < json_object_array_length(parts);
                             k++) {
                                int p = json_object_get_int(
                                    json_object_array_get_idx(parts, k));
                                if (p >= 0 && p < PARTS)
                                        s->copiers[p]++;
                        }
                if (json_object_object_get_ex(u, "scale_out", &so))
                        s->unify_owned += (int)json_i64(so, "owned_partitions");
                json_object_put(st);
        }
        return true;
}

/* Both members run, each partition of clicks is copied by one of them
 * and the unified topic's partitions are all owned. */
static bool settled(void *arg) {
        struct status *s = arg;

        if (!status_read(s))
                return false;
        for (int p = 0; p < PARTS; p++)
                if (s->copiers[p] != 1) {
                        snprintf(s->why, sizeof(s->why),
                                 "clicks [%d] copied by %d members", p,
                                 s->copiers[p]);
                        return false;
                }
        if (s->unify_owned != PARTS) {
                snprintf(s->why, sizeof(s->why),
                         "%d of %d clicks.unified partitions owned",
                         s->unify_owned, PARTS);
                return false;
        }
        if (!s->running) {
                snprintf(s->why, sizeof(s->why), "a stage is not running");
                return false;
        }
        return true;
}

/* The counters reached what the records ask for. */
static bool counted(void *arg) {
        struct status *s = arg;

        if (!status_read(s))
                return false;
        snprintf(s->why, sizeof(s->why),
                 "dead_lettered %" PRId64 ", produce_errors %" PRId64
                 ", oversized %" PRId64,
                 s->dead_lettered, s->produce_errors, s->oversized);
        return s->dead_lettered >= 3 && s->produce_errors >= 4 &&
               s->oversized >= 2;
}

/* The copy and the unified topic hold as many records as they must,
 * read_committed (the watermarks count aborted records too). */
struct sizes {
        struct rk *r;
        size_t     copy, uni;
};

static bool caught_up(void *arg) {
        struct sizes *z = arg;
        struct recs   rs;

        read_all(z->r, "west", "east.clicks", &rs);
        z->copy = rs.n;
        recs_free(&rs);
        read_all(z->r, "west", "clicks.unified", &rs);
        z->uni = rs.n;
        recs_free(&rs);
        return z->copy >= N - 3 && z->uni >= 2 * N - 3;
}

/* ---------------------------------------------------------------- TEST --- */

static void test_scale_errors(void **state) {
        struct rk   *r = rk_new("rk-scale-errors");
        struct rk_gw gw[2];
        char         buf[256], want[256];

        *state = r;
        memset(gw, 0, sizeof(gw));
        static const char *const props[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4",
            "group.initial.rebalance.delay.ms=0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms="
            "1000",
            NULL};
        static const char *const small[] = {"max.message.bytes", LIMIT, NULL};
        rk_cluster_start_with(r, "east", 1, props);
        rk_cluster_start_with(r, "west", 1, props);
        rk_create_topic(r, "east", "clicks", PARTS, 1, 0);
        rk_create_topic(r, "west", "clicks", PARTS, 1, 0);
        rk_create_topic_with(r, "west", "east.clicks", PARTS, 1, 0, small);
        rk_create_topic_with(r, "west", "clicks.unified", PARTS, 1, 0, small);
        double t_clusters = rk_elapsed(r);

        const char *const args[] = {
            "--site", "west", "--scale-out", "true", "--id", "key",
            "--topic", "clicks",
            "--set", "scale_out.session_timeout=6s",
            "--set", "scale_out.transaction_timeout=10s",
            /* east.clicks keeps its own max.message.bytes */
            "--set", "replication.sync_topic_configs=false",
            "--set",
            "clusters.west.properties.producer.message.max.bytes="
            PRODUCER_MAX,
            "--admin", "127.0.0.1:0",
            NULL};
        rk_gwn_start(r, &gw[0], "a", args);
        rk_gwn_start(r, &gw[1], "b", args);
        struct status st = {.gw = gw};
        if (!harness_wait_until(settled, &st, 60000)) {
                rk_gwn_dump_log(&gw[0], 30);
                rk_gwn_dump_log(&gw[1], 30);
                fail_msg("the members did not settle in 60 s: %s", st.why);
        }
        double t_settled = rk_elapsed(r);

        write_site(r, "east", "clicks", 'e');
        write_site(r, "west", "clicks", 'w');
        double       t_written = rk_elapsed(r);
        struct sizes z         = {r, 0, 0};
        bool         up        = harness_wait_until(caught_up, &z, 60000);
        bool         cnt       = harness_wait_until(counted, &st, 30000);
        double       t_done    = rk_elapsed(r);
        static const char *const needles[] = {
            "for good", "with its batch", "refused a batch", "too large",
            "dead-letter", "exiting", "failed", NULL};
        for (int i = 0; i < 2; i++)
                rk_grep_file(gw[i].log, NULL, needles);
        if (!up || !cnt) {
                rk_gwn_dump_log(&gw[0], 40);
                rk_gwn_dump_log(&gw[1], 40);
                fail_msg("%s: east.clicks %zu of %d, clicks.unified %zu of "
                         "%d records (read_committed); %s",
                         up ? "not counted" : "not copied", z.copy, N - 3,
                         z.uni, 2 * N - 3, st.why);
        }
        print_message("# /status of a + b: dead_lettered %" PRId64
                      ", produce_errors %" PRId64 ", oversized %" PRId64
                      "\n",
                      st.dead_lettered, st.produce_errors, st.oversized);
        assert_int_equal(st.dead_lettered, 3);
        assert_int_equal(st.produce_errors, 4);
        assert_int_equal(st.oversized, 2);
        assert_true(st.running);

        /* The copy: every other record once, in place and in order. */
        struct recs copy, dlq, uni;
        read_all(r, "west", "east.clicks", &copy);
        int64_t last[PARTS] = {-1, -1, -1};
        for (size_t k = 0; k < copy.n; k++) {
                const struct rec *rc = &copy.v[k];
                int               i  = -1;
                if (sscanf(rc->key, "e%d", &i) != 1 || i < 0 || i >= N ||
                    dead_lettered(i) || rc->partition != i % PARTS ||
                    strcmp(rc->head, rc->key) || i <= last[rc->partition])
                        fail_msg("east.clicks [%d] offset %" PRId64
                                 ": key %s, %zu bytes: not expected there",
                                 rc->partition, rc->offset, rc->key, rc->len);
                last[rc->partition] = i;
        }
        assert_int_equal(copy.n, N - 3);

        /* The dead-letter topic: the three, each once, with its reason,
         * source coordinates and the copy's headers. */
        read_all(r, "west", "aagw.dlq.east", &dlq);
        assert_int_equal(dlq.n, 3);
        for (int i = 0; i < N; i++) {
                if (!dead_lettered(i))
                        continue;
                snprintf(want, sizeof(want), "east:clicks:%d:%d", i % PARTS,
                         i / PARTS);
                int n = 0;
                for (size_t k = 0; k < dlq.n; k++) {
                        const struct rec *rc = &dlq.v[k];
                        if (!hdr(rc, "aagw.dlq.source", buf, sizeof(buf)) ||
                            strcmp(buf, want))
                                continue;
                        n++;
                        assert_non_null(
                            hdr(rc, "aagw.dlq.reason", buf, sizeof(buf)));
                        assert_string_equal(buf, REASON);
                        if (big_size('e', i) == BIG) {
                                char key[16];
                                snprintf(key, sizeof(key), "e%d:", i);
                                assert_int_equal(rc->len, BIG);
                                assert_int_equal(
                                    strncmp(rc->head, key, strlen(key)), 0);
                                assert_non_null(hdr(rc, "aagw.prov", buf,
                                                    sizeof(buf)));
                        } else {
                                assert_int_equal(rc->len, 0);
                                assert_non_null(hdr(rc, "aagw.dlq.stripped",
                                                    buf, sizeof(buf)));
                        }
                }
                if (n != 1)
                        fail_msg("aagw.dlq.east: %d dead-letter copies of "
                                 "%s",
                                 n, want);
        }
        print_message("# aagw.dlq.east: e19, e22, e41 once each, with "
                      "reason and source\n");

        /* The unified topic: every id that reached west once, the two
         * too large as stand-ins. */
        read_all(r, "west", "clicks.unified", &uni);
        int64_t missing = 0, doubled = 0;
        for (int s = 0; s < 2; s++)
                for (int i = 0; i < N; i++) {
                        char              key[16], site = s ? 'w' : 'e';
                        const struct rec *rc = NULL;
                        if (site == 'e' && dead_lettered(i))
                                continue;
                        snprintf(key, sizeof(key), "%c%d", site, i);
                        size_t n = key_count(&uni, key, &rc);
                        if (n == 0 && !missing++)
                                print_message("# first missing: %s\n", key);
                        if (n > 1 && !doubled++)
                                print_message("# first doubled: %s (%zu)\n",
                                              key, n);
                        if (n != 1)
                                continue;
                        if (big_size(site, i)) {
                                assert_int_equal(rc->len, 0);
                                assert_non_null(hdr(rc, "aagw.unify.oversize",
                                                    buf, sizeof(buf)));
                                print_message("# %s stand-in: %s\n", key, buf);
                        } else {
                                assert_string_equal(rc->head, key);
                        }
                }
        assert_int_equal(missing, 0);
        assert_int_equal(doubled, 0);
        assert_int_equal(uni.n, 2 * N - 3);

        /* A third process with the other rebalance protocol: the
         * groups refuse it, and it exits 1 naming the group and the
         * setting rather than wait for partitions it is never given; a
         * and b run on. */
        {
                const char *coop[sizeof(args) / sizeof(args[0]) + 2];
                size_t      k = 0;
                for (; args[k]; k++)
                        coop[k] = args[k];
                coop[k++] = "--set";
                coop[k++] = "scale_out.rebalance=cooperative";
                coop[k]   = NULL;
                struct rk_gw c;
                int          cst = 0;
                int64_t      t0  = harness_now_ms();
                memset(&c, 0, sizeof(c));
                rk_gwn_start(r, &c, "c", coop);
                assert_int_equal(harness_proc_wait(c.proc, 60000, &cst),
                                 AAGW_OK);
                harness_proc_destroy(c.proc);
                c.proc = NULL;
                if (harness_exit_code(cst) != 1 ||
                    !rk_log_count(c.log, "refuses this member: its members "
                                         "rebalance eagerly, this process "
                                         "cooperatively") ||
                    !rk_log_count(c.log, "scale_out.rebalance must be the "
                                         "same in every process")) {
                        rk_gwn_dump_log(&c, 30);
                        fail_msg("a cooperative member among eager ones: "
                                 "exit %d, not refused as expected",
                                 harness_exit_code(cst));
                }
                print_message("# member c (cooperative) among eager a and "
                              "b: exit 1 after %" PRId64 " ms\n",
                              harness_now_ms() - t0);
                for (int i = 0; i < 2; i++)
                        if (harness_proc_wait(gw[i].proc, 0, NULL) !=
                            AAGW_ERR_TIMEOUT)
                                fail_msg("member %s exited when c was "
                                         "refused",
                                         gw[i].name);
        }

        /* Both still run; clean stops. */
        assert_int_equal(rk_gwn_stop(r, &gw[0], SIGTERM, 30000), 0);
        assert_int_equal(rk_gwn_stop(r, &gw[1], SIGTERM, 30000), 0);

        /* The unified topic grown while the site ran scale-out: a member
         * refuses to start (exit 1), naming the changelog, the reason and
         * the way out, rather than route ids by the new count. */
        rk_grow_topic(r, "west", "clicks.unified", PARTS + 2);
        int64_t t_grown = harness_now_ms();
        int     status  = 0;
        rk_gwn_start(r, &gw[0], NULL, args);
        assert_int_equal(harness_proc_wait(gw[0].proc, 60000, &status),
                         AAGW_OK);
        harness_proc_destroy(gw[0].proc);
        gw[0].proc = NULL;
        snprintf(want, sizeof(want),
                 "unified topic clicks.unified has %d partitions but its "
                 "changelog aagw.aagw.west.state.clicks.unified has %d: the "
                 "unified topic was grown while the site ran scale-out",
                 PARTS + 2, PARTS);
        if (harness_exit_code(status) != 1 || !rk_log_count(gw[0].log, want) ||
            !rk_log_count(gw[0].log, "run the site in one process "
                                     "(scale_out.enabled: false) for at "
                                     "least unify.window") ||
            !rk_log_count(gw[0].log, "and the route topic "
                                     "aagw.aagw.west.route.clicks.unified")) {
                rk_gwn_dump_log(&gw[0], 30);
                fail_msg("grown unified topic: exit %d, not refused as "
                         "expected",
                         harness_exit_code(status));
        }
        print_message("# clicks.unified grown to %d partitions: member a "
                      "refused to start, exit 1 after %" PRId64 " ms\n",
                      PARTS + 2, harness_now_ms() - t_grown);
        print_message("# clusters %.1f s, members settled %.1f s, written "
                      "%.1f s, all in and counted %.1f s (%.1f s after the "
                      "writes); wall %.1f s\n",
                      t_clusters, t_settled, t_written, t_done,
                      t_done - t_written, rk_elapsed(r));
        recs_free(&copy);
        recs_free(&dlq);
        recs_free(&uni);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale_errors, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
