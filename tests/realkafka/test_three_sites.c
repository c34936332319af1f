/*
 * tests/realkafka/test_three_sites.c: three sites active-active with the
 * unify stage, on real Kafka, through a kill -9 of one site's gateway and
 * a 30 s cut of another site; then `aagw offsets translate` and `aagw
 * failover` between every ordered pair of the three.
 *
 * Three single-broker clusters (east, west, north) and one aagw process
 * per site (`--site X --mode active-active`), each copying the other two
 * sites' `clicks` and `profiles` into its cluster and running its site's
 * unify stage: `clicks` dedup by key (`--id key`), `profiles` last write
 * wins per key.  A thread of the test writes at all three sites all along:
 *  - clicks: ids of each site's own; every tick one id written at two
 *    sites (every fourth tick at all three), on different partitions: a
 *    client's retry at another data center; every fifth own id twice at
 *    its site (a retry there);
 *  - profiles: every tick one key gets a version at each of the three
 *    sites at once (a conflict; the timestamps decide, version v at
 *    t0 + v ms), and every other tick an old version of another key is
 *    written again at some site (stale: it must never win).
 *
 * Faults, while it writes: west's gateway SIGKILLed and started again at
 * once; then north's broker frozen for 30 s (SIGSTOP, SIGCONT), and 5 s
 * into that west's gateway SIGKILLed and started again, so that it starts
 * with north silent.
 *
 * Asserted, with the test's own librdkafka readers (never aagw's
 * figures): during the cut, north's records reach neither east nor west,
 * and those two (west's restarted gateway too) unify each other's; the
 * gateways all run on; at every site `clicks.unified` (read_committed)
 * holds every id once; `profiles.unified` holds no record twice and each
 * key's last record is its newest version, the same winner at the three
 * sites; each
 * remote copy equals its source, partition by partition, in order; a
 * group committed on `clicks` at each site translates exactly to both
 * other sites' copies, and `aagw failover` commits that there (read back
 * with the test's own client); a group at east on `clicks`, `west.clicks`
 * and `north.clicks` fails over to west onto `east.clicks`, `clicks` and
 * `north.clicks` (the last via north's offset-syncs), where, by content,
 * it reads on exactly after what it had read at east.  Printed: how long each
 * site took to unify records written when west's gateway died, and after the
 * cut.
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

#include <json-c/json.h>
#include <librdkafka/rdkafka.h>

#include "rk.h"

#define NSITES 3
#define CLICK_PARTS 3
#define PROFILE_PARTS 2
#define KEYS 20
#define TICK_MS 50
#define IDS_PER_TICK 4
#define CUT_MS 30000
#define TIMEOUT_MS 90000

static const char *const sites[NSITES]   = {"east", "west", "north"};
static const char        letters[NSITES] = {'e', 'w', 'n'};

/* ------------------------------------------------------------ TRAFFIC --- */

struct traffic {
        rd_kafka_t *p[NSITES];
        pthread_t   th;
        atomic_bool stop;
        atomic_int  ticks;        /* ticks written completely */
        int         newest[KEYS]; /* newest version per key, -1 none */
        int64_t     t0;           /* timestamp base of the versions */
        atomic_int  failed;       /* delivery failures */
};

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct traffic *t = opaque;
        (void)rk;
        if (m->err)
                atomic_fetch_add(&t->failed, 1);
}

static void put(struct traffic *t, int site, const char *topic, int32_t part,
                const char *key, const char *val, int64_t ts) {
        rd_kafka_resp_err_t err;
        while (
            (err = rd_kafka_producev(
                 t->p[site], RD_KAFKA_V_TOPIC(topic),
                 RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_KEY(key, strlen(key)),
                 RD_KAFKA_V_VALUE((void *)val, strlen(val)),
                 RD_KAFKA_V_TIMESTAMP(ts),
                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
            RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(t->p[site], 10);
        if (err)
                atomic_fetch_add(&t->failed, 1);
}

/* An id of the dedup topic: key and value are the id. */
static void put_id(struct traffic *t, int site, int32_t part, const char *id) {
        put(t, site, "clicks", part % CLICK_PARTS, id, id, 0);
}

/* Profile version 'v' of key 'j' at 'site': key k<j>, value k<j>.<v>
 * (k<j>.<v>.old when written again late), timestamp t0 + v. */
static void put_version(struct traffic *t, int site, int j, int v, bool old) {
        char key[16], val[48];
        snprintf(key, sizeof(key), "k%d", j);
        snprintf(val, sizeof(val), "k%d.%d%s", j, v, old ? ".old" : "");
        put(t, site, "profiles", j % PROFILE_PARTS, key, val, t->t0 + v);
}

/* Whether 'site' writes s<tk>, the id shared in tick 'tk': two sites
 * each tick, all three every fourth. */
static bool shared_at(int tk, int site) {
        return site == tk % NSITES || site == (tk + 1) % NSITES || tk % 4 == 0;
}

/* Tick 'tk': IDS_PER_TICK own ids per site (<letter><i>) and the shared
 * id s<tk>; one key's conflict, and every other tick a stale version. */
static void tick(struct traffic *t, int tk) {
        char id[32];

        for (int s = 0; s < NSITES; s++) {
                for (int i = tk * IDS_PER_TICK; i < (tk + 1) * IDS_PER_TICK;
                     i++) {
                        snprintf(id, sizeof(id), "%c%d", letters[s], i);
                        put_id(t, s, i, id);
                        if (i % 5 == 0) /* a retry at the same site */
                                put_id(t, s, i + 1, id);
                }
                snprintf(id, sizeof(id), "s%d", tk);
                if (shared_at(tk, s))
                        put_id(t, s, tk + s, id);
        }
        /* A conflict: key tk % KEYS at every site at once; version
         * 3 tk + o at site (tk + o) % 3, so each site wins some keys. */
        int j = tk % KEYS;
        for (int o = 0; o < NSITES; o++)
                put_version(t, (tk + o) % NSITES, j, 3 * tk + o, false);
        t->newest[j] = 3 * tk + 2;
        /* Stale: a version of the next key from two rounds ago, again. */
        if (tk % 2 == 0 && tk + 1 >= 2 * KEYS) {
                int tk2 = tk + 1 - 2 * KEYS;
                put_version(t, tk % NSITES, tk2 % KEYS, 3 * tk2 + 1, true);
        }
}

static void *traffic_main(void *arg) {
        struct traffic *t  = arg;
        struct timespec ts = {0, TICK_MS * 1000000L};

        while (!atomic_load(&t->stop)) {
                int tk = atomic_load(&t->ticks);
                tick(t, tk);
                atomic_store(&t->ticks, tk + 1);
                for (int s = 0; s < NSITES; s++)
                        rd_kafka_poll(t->p[s], 0);
                nanosleep(&ts, NULL);
        }
        return NULL;
}

static void traffic_start(struct rk *r, struct traffic *t) {
        char err[512];

        memset(t, 0, sizeof(*t));
        for (int j = 0; j < KEYS; j++)
                t->newest[j] = -1;
        t->t0 = (int64_t)time(NULL) * 1000;
        for (int s = 0; s < NSITES; s++) {
                rd_kafka_conf_t         *conf = rd_kafka_conf_new();
                static const char *const kv[] = {
                    "enable.idempotence", "true", "acks", "all", "linger.ms",
                    "5",
                    /* Past the cut: north's records wait in the client
                     * until its broker answers again. */
                    "message.timeout.ms", "180000", NULL};
                assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                                   rk_bs(r, sites[s]), err,
                                                   sizeof(err)),
                                 RD_KAFKA_CONF_OK);
                for (int i = 0; kv[i]; i += 2)
                        assert_int_equal(rd_kafka_conf_set(conf, kv[i],
                                                           kv[i + 1], err,
                                                           sizeof(err)),
                                         RD_KAFKA_CONF_OK);
                rd_kafka_conf_set_dr_msg_cb(conf, dr);
                rd_kafka_conf_set_opaque(conf, t);
                assert_non_null(t->p[s] = rd_kafka_new(RD_KAFKA_PRODUCER, conf,
                                                       err, sizeof(err)));
        }
        assert_int_equal(pthread_create(&t->th, NULL, traffic_main, t), 0);
}

/* Stop writing and wait until every record is acknowledged. */
static void traffic_stop(struct traffic *t) {
        atomic_store(&t->stop, true);
        pthread_join(t->th, NULL);
        for (int s = 0; s < NSITES; s++) {
                rd_kafka_flush(t->p[s], 60000);
                assert_int_equal(rd_kafka_outq_len(t->p[s]), 0);
                rd_kafka_destroy(t->p[s]);
                t->p[s] = NULL;
        }
        assert_int_equal(atomic_load(&t->failed), 0);
}

/* --------------------------------------------------------------- IDS --- */

#define MAX_PROBES 16

/* Every id written: the ticks' and the probes. */
struct ids {
        int  ticks;
        char probes[MAX_PROBES][32];
        int  nprobes;
};

static int64_t ids_total(const struct ids *w) {
        return (int64_t)w->ticks * (NSITES * IDS_PER_TICK + 1) + w->nprobes;
}

/* Call 'fn' for every id written. */
static void ids_each(const struct ids *w, void (*fn)(const char *, void *),
                     void             *arg) {
        char id[32];

        for (int s = 0; s < NSITES; s++)
                for (int i = 0; i < w->ticks * IDS_PER_TICK; i++) {
                        snprintf(id, sizeof(id), "%c%d", letters[s], i);
                        fn(id, arg);
                }
        for (int tk = 0; tk < w->ticks; tk++) {
                snprintf(id, sizeof(id), "s%d", tk);
                fn(id, arg);
        }
        for (int i = 0; i < w->nprobes; i++)
                fn(w->probes[i], arg);
}

/* Probe ids 'PREFIX-<site>', one written now at each of the first
 * 'nsites' sites: how long until every site unified them measures how
 * long a fault held back the sites' records. */
static void probes_put(struct traffic *t, struct ids *w, const char *prefix,
                       int nsites) {
        for (int s = 0; s < nsites; s++) {
                assert_true(w->nprobes < MAX_PROBES);
                char *id = w->probes[w->nprobes++];
                snprintf(id, sizeof(w->probes[0]), "%s-%s", prefix, sites[s]);
                put_id(t, s, s, id);
                rd_kafka_poll(t->p[s], 0);
        }
}

/* -------------------------------------------------------------- TAILS --- */

/* A reader that follows one site's unified topics as they grow
 * (read_committed): for the times the test prints, not for its checks,
 * which read everything again from the start. */
struct tail {
        rd_kafka_t    *c;
        struct rk_bag *ids;        /* values of clicks.unified */
        int            last[KEYS]; /* profiles.unified: last version */
        bool           last_old[KEYS];
};

static rd_kafka_t *reader(struct rk *r, const char *alias,
                          const char *isolation) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             err[512];
        rd_kafka_t      *c;

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, alias), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_set(conf, "group.id", "three-sites-check", NULL, 0);
        rd_kafka_conf_set(conf, "isolation.level", isolation, NULL, 0);
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", NULL, 0);
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", NULL, 0);
        c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_poll_set_consumer(c);
        return c;
}

static void tail_init(struct rk *r, struct tail *tl, const char *alias) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(CLICK_PARTS + PROFILE_PARTS);

        tl->c   = reader(r, alias, "read_committed");
        tl->ids = rk_bag_new();
        for (int j = 0; j < KEYS; j++)
                tl->last[j] = -1;
        for (int p = 0; p < CLICK_PARTS; p++)
                rd_kafka_topic_partition_list_add(l, "clicks.unified", p)
                    ->offset = RD_KAFKA_OFFSET_BEGINNING;
        for (int p = 0; p < PROFILE_PARTS; p++)
                rd_kafka_topic_partition_list_add(l, "profiles.unified", p)
                    ->offset = RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(tl->c, l), 0);
        rd_kafka_topic_partition_list_destroy(l);
}

static void tail_deinit(struct tail *tl) {
        if (tl->c) {
                rd_kafka_consumer_close(tl->c);
                rd_kafka_destroy(tl->c);
        }
        rk_bag_destroy(tl->ids);
        memset(tl, 0, sizeof(*tl));
}

/* Parse a profiles value k<j>.<v>[.old]; false if it is none. */
static bool parse_version(const char *val, size_t len, int *j, int *v,
                          bool *old) {
        char buf[64];
        int  n = 0;

        if (len >= sizeof(buf))
                return false;
        memcpy(buf, val, len);
        buf[len] = '\0';
        if (sscanf(buf, "k%d.%d%n", j, v, &n) != 2 || *j < 0 || *j >= KEYS)
                return false;
        *old = !strcmp(buf + n, ".old");
        return *old || buf[n] == '\0';
}

/* Take in what arrived. */
static void tail_poll(struct tail *tl) {
        rd_kafka_message_t *m;

        for (int n = 0; n < 20000 && (m = rd_kafka_consumer_poll(tl->c, 0));
             n++) {
                if (!m->err) {
                        const char *topic = rd_kafka_topic_name(m->rkt);
                        char        v[64];
                        int         j, ver;
                        bool        old;
                        if (!strcmp(topic, "clicks.unified")) {
                                snprintf(v, sizeof(v), "%.*s",
                                         (int)(m->len < 63 ? m->len : 63),
                                         m->payload ? (char *)m->payload : "");
                                rk_bag_add(tl->ids, v);
                        } else if (parse_version(m->payload, m->len, &j, &ver,
                                                 &old)) {
                                tl->last[j]     = ver;
                                tl->last_old[j] = old;
                        }
                }
                rd_kafka_message_destroy(m);
        }
}

struct tails {
        struct tail           t[NSITES];
        const struct ids     *w;
        int                   from_probe; /* the probes to wait for */
        bool                  reached[NSITES];
        double                at[NSITES]; /* rk_elapsed() when reached */
        struct rk            *r;
        const struct traffic *tr;
};

/* Every site unified the probes from 'from_probe' on. */
static bool probes_unified(void *arg) {
        struct tails *ts  = arg;
        bool          all = true;

        for (int s = 0; s < NSITES; s++) {
                tail_poll(&ts->t[s]);
                bool ok = true;
                for (int i = ts->from_probe; i < ts->w->nprobes; i++)
                        ok &= rk_bag_count(ts->t[s].ids, ts->w->probes[i]) > 0;
                if (ok && !ts->reached[s]) {
                        ts->reached[s] = true;
                        ts->at[s]      = rk_elapsed(ts->r);
                }
                all &= ok;
        }
        return all;
}

/* Every site unified every id, and each key's newest version. */
static bool all_unified(void *arg) {
        struct tails *ts  = arg;
        bool          all = true;

        for (int s = 0; s < NSITES; s++) {
                tail_poll(&ts->t[s]);
                all &= rk_bag_distinct(ts->t[s].ids) == ids_total(ts->w);
                for (int j = 0; j < KEYS; j++)
                        all &= ts->t[s].last[j] == ts->tr->newest[j] &&
                               !ts->t[s].last_old[j];
        }
        return all;
}

/* Wait for the probes from 'from' on at every site; print when each site
 * had them, counted from 'since' (rk_elapsed()). */
static void expect_probes(struct tails *ts, int from, double since,
                          const char *what) {
        ts->from_probe = from;
        memset(ts->reached, 0, sizeof(ts->reached));
        if (!harness_wait_until(probes_unified, ts, TIMEOUT_MS)) {
                for (int s = 0; s < NSITES; s++)
                        if (!ts->reached[s])
                                fprintf(stderr, "# %s: %s lacks a probe\n",
                                        what, sites[s]);
                fail_msg("%s: the probes are not unified everywhere within "
                         "%d s",
                         what, TIMEOUT_MS / 1000);
        }
        print_message("# %s: records written then unified at east %.1f s, "
                      "west %.1f s, north %.1f s later\n",
                      what, ts->at[0] - since, ts->at[1] - since,
                      ts->at[2] - since);
}

/* Fail the test (with its log) if 'g' exited. */
static void expect_running(struct rk_gw *g) {
        int st = -1;
        if (harness_proc_wait(g->proc, 0, &st) != AAGW_ERR_TIMEOUT) {
                rk_gwn_dump_log(g, 60);
                fail_msg("%s's gateway exited (status %d)", g->name, st);
        }
}

/* How many lines of the file 'path' that hold 'needle' repeat the one
 * before them that does, timestamp and all: one event logged twice. */
static int log_repeats(const char *path, const char *needle) {
        char       *text = harness_read_file(path, NULL), *save = NULL;
        const char *prev = NULL;
        int         n    = 0;

        for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
             line       = strtok_r(NULL, "\n", &save)) {
                if (!strstr(line, needle))
                        continue;
                if (prev && !strcmp(prev, line))
                        n++;
                prev = line;
        }
        free(text);
        return n;
}

/* ------------------------------------------------------------ READING --- */

/* The records of 'topic' at 'alias' (read_committed), partition by
 * partition in order; 'fn' gets each one. */
typedef void(record_fn)(void *arg, int32_t partition, int64_t offset,
                        const char *val, size_t len);

/* ... of several topics with one consumer (one start-up, not one per
 * topic): 'fn' gets the records of topics[i] with args[i]. */
static void read_topics(struct rk *r, const char *alias,
                        const char *const *topics, int ntopics, int parts,
                        record_fn *fn, void *const *args) {
        rd_kafka_t                      *c = reader(r, alias, "read_committed");
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(parts * ntopics);
        int     eofs     = 0;
        bool    eof[4][8] = {{false}};
        int64_t deadline = harness_now_ms() + 60000;

        assert_true(parts <= 8 && ntopics <= 4);
        for (int t = 0; t < ntopics; t++)
                for (int p = 0; p < parts; p++)
                        rd_kafka_topic_partition_list_add(l, topics[t], p)
                            ->offset = RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(c, l), 0);
        rd_kafka_topic_partition_list_destroy(l);
        while (eofs < parts * ntopics && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                int                 t = 0;
                if (!m)
                        continue;
                while (t < ntopics - 1 &&
                       strcmp(rd_kafka_topic_name(m->rkt), topics[t]))
                        t++;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (!eof[t][m->partition]) {
                                eof[t][m->partition] = true;
                                eofs++;
                        }
                } else if (!m->err)
                        fn(args[t], m->partition, m->offset,
                           m->payload ? m->payload : "", m->len);
                else
                        fprintf(stderr, "# %s at %s: %s\n", topics[t], alias,
                                rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(c);
        rd_kafka_destroy(c);
        if (eofs < parts * ntopics)
                fail_msg("%s%s at %s: no end in 60 s", topics[0],
                         ntopics > 1 ? " and others" : "", alias);
}

static void read_topic(struct rk *r, const char *alias, const char *topic,
                       int parts, record_fn *fn, void *arg) {
        read_topics(r, alias, &topic, 1, parts, fn, &arg);
}

/* Values per partition joined with '\n'. */
struct joined {
        char  *buf[8];
        size_t len[8], cap[8];
};

static void join_record(void *arg, int32_t p, int64_t off, const char *val,
                        size_t len) {
        struct joined *j = arg;
        (void)off;
        while (j->len[p] + len + 2 > j->cap[p]) {
                j->cap[p] = j->cap[p] ? 2 * j->cap[p] : 4096;
                j->buf[p] = realloc(j->buf[p], j->cap[p]);
                assert_non_null(j->buf[p]);
        }
        memcpy(j->buf[p] + j->len[p], val, len);
        j->len[p] += len;
        j->buf[p][j->len[p]++] = '\n';
        j->buf[p][j->len[p]]   = '\0';
}

static void joined_deinit(struct joined *j) {
        for (int p = 0; p < 8; p++)
                free(j->buf[p]);
}

/* 'F.topic' at 'to' holds what 'topic' at 'from' holds, partition by
 * partition, in order. */
static void expect_copy(struct rk *r, int from, int to, const char *topic,
                        int parts) {
        struct joined a = {0}, b = {0};
        char          copy[64];

        snprintf(copy, sizeof(copy), "%s.%s", sites[from], topic);
        read_topic(r, sites[from], topic, parts, join_record, &a);
        read_topic(r, sites[to], copy, parts, join_record, &b);
        for (int p = 0; p < parts; p++) {
                if (a.len[p] != b.len[p] ||
                    (a.len[p] && memcmp(a.buf[p], b.buf[p], a.len[p])))
                        fail_msg("%s [%d] at %s (%zu bytes) differs from %s at "
                                 "%s (%zu bytes)",
                                 copy, p, sites[to], b.len[p], topic,
                                 sites[from], a.len[p]);
                assert_true(a.len[p] > 0);
        }
        joined_deinit(&a);
        joined_deinit(&b);
}

/* profiles.unified as read: each key's last version, values seen. */
struct lww_read {
        int            last[KEYS];
        bool           last_old[KEYS];
        struct rk_bag *values;
        int64_t        bad;
};

static void lww_record(void *arg, int32_t p, int64_t off, const char *val,
                       size_t len) {
        struct lww_read *lr = arg;
        char             v[64];
        int              j, ver;
        bool             old;

        (void)p;
        (void)off;
        snprintf(v, sizeof(v), "%.*s", (int)(len < 63 ? len : 63), val);
        rk_bag_add(lr->values, v);
        if (!parse_version(val, len, &j, &ver, &old)) {
                lr->bad++;
                return;
        }
        lr->last[j]     = ver;
        lr->last_old[j] = old;
}

struct id_check {
        const struct rk_bag *got;
        const char          *site;
        int64_t              missing, doubled;
};

static void check_id(const char *id, void *arg) {
        struct id_check *c = arg;
        int64_t          n = rk_bag_count(c->got, id);
        if (n == 0 && c->missing++ == 0)
                fprintf(stderr, "# %s: %s missing from clicks.unified\n",
                        c->site, id);
        if (n > 1 && c->doubled++ == 0)
                fprintf(stderr,
                        "# %s: %s %" PRId64 " times in clicks.unified\n",
                        c->site, id, n);
}

/* ------------------------------------------------------ TRANSLATION --- */

/* Commit 'off[p]' for 'group' on 'topic' [p] at 'alias'. */
static void commit(struct rk *r, const char *alias, const char *group,
                   const char *topic, const int64_t *off, int parts) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             err[512];
        rd_kafka_t      *c;

        rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, alias), err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "group.id", group, err, sizeof(err));
        c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(parts);
        for (int p = 0; p < parts; p++)
                rd_kafka_topic_partition_list_add(l, topic, p)->offset = off[p];
        assert_int_equal(rd_kafka_commit(c, l, 0), 0);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(c);
}

/* The offsets 'group' has committed on 'topic' at 'alias' (-1: none). */
static void committed(struct rk *r, const char *alias, const char *group,
                      const char *topic, int64_t *off, int parts) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             err[512];
        rd_kafka_t      *c;

        rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, alias), err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "group.id", group, err, sizeof(err));
        c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(parts);
        for (int p = 0; p < parts; p++)
                rd_kafka_topic_partition_list_add(l, topic, p);
        assert_int_equal(rd_kafka_committed(c, l, 30000), 0);
        for (int p = 0; p < parts; p++)
                off[p] = l->elems[p].err ? -1 : l->elems[p].offset;
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(c);
}

/* `aagw WORDS... <every cluster>`: its exit code, output in 'o'. */
static int aagw(struct rk *r, const char *const *words, harness_output_t *o) {
        const char *argv[96];
        size_t      a = 0;

        argv[a++] = harness_aagw_bin();
        for (size_t i = 0; words[i]; i++)
                argv[a++] = words[i];
        a += rk_gw_cluster_args(r, argv + a, 64);
        argv[a] = NULL;
        assert_int_equal(
            harness_run(argv, NULL, 0, 60000, o, r->errstr, sizeof(r->errstr)),
            AAGW_OK);
        return harness_exit_code(o->status);
}

/* Group g-FROM, committed at 'from' on clicks at 'off', translated to and
 * failed over to 'to': each partition exact at the same offset of
 * FROM.clicks (an exact copy from offset 0), and committed there. */
static void translate_and_failover(struct rk *r, int from, int to,
                                   const int64_t *off) {
        char             group[32], copy[64];
        harness_output_t o;
        int64_t          got[CLICK_PARTS];

        snprintf(group, sizeof(group), "g-%s", sites[from]);
        snprintf(copy, sizeof(copy), "%s.clicks", sites[from]);
        const char *tr[] = {"offsets", "translate", "--group", group,
                            "--from",  sites[from], "--to",    sites[to],
                            "--json",  NULL};
        int         rc   = aagw(r, tr, &o);
        if (rc)
                fail_msg("translate %s -> %s: exit %d\n%s%s", sites[from],
                         sites[to], rc, o.out, o.err);
        json_object *j = json_tokener_parse(o.out), *parts;
        assert_non_null(j);
        assert_true(json_object_object_get_ex(j, "partitions", &parts));
        int rows = 0;
        for (size_t i = 0; i < json_object_array_length(parts); i++) {
                json_object *pe = json_object_array_get_idx(parts, i), *v;
                assert_true(json_object_object_get_ex(pe, "topic", &v));
                if (strcmp(json_object_get_string(v), "clicks"))
                        continue;
                rows++;
                assert_true(json_object_object_get_ex(pe, "partition", &v));
                int p = json_object_get_int(v);
                assert_true(p >= 0 && p < CLICK_PARTS);
                assert_true(json_object_object_get_ex(pe, "target_topic", &v));
                assert_string_equal(json_object_get_string(v), copy);
                assert_true(json_object_object_get_ex(pe, "committed", &v));
                assert_int_equal(json_object_get_int64(v), off[p]);
                assert_true(json_object_object_get_ex(pe, "translated", &v));
                assert_int_equal(json_object_get_int64(v), off[p]);
                assert_true(json_object_object_get_ex(pe, "exact", &v));
                assert_true(json_object_get_boolean(v));
        }
        assert_int_equal(rows, CLICK_PARTS);
        json_object_put(j);
        harness_output_deinit(&o);

        const char *fo[] = {"failover",  "--group", group,     "--from",
                            sites[from], "--to",    sites[to], NULL};
        rc               = aagw(r, fo, &o);
        if (rc)
                fail_msg("failover %s -> %s: exit %d\n%s%s", sites[from],
                         sites[to], rc, o.out, o.err);
        harness_output_deinit(&o);
        committed(r, sites[to], group, copy, got, CLICK_PARTS);
        for (int p = 0; p < CLICK_PARTS; p++)
                if (got[p] != off[p])
                        fail_msg("failover %s -> %s: %s [%d] committed at "
                                 "%" PRId64 ", want %" PRId64,
                                 sites[from], sites[to], copy, p, got[p],
                                 off[p]);
}

/* One group at east reading all three sources of clicks there: its own
 * 'clicks', west's copy 'west.clicks' and north's 'north.clicks' (a
 * third site's topic, for a move to west).  Positions halfway. */
static const char *const via_topics[NSITES] = {"clicks", "west.clicks",
                                               "north.clicks"};
/* ... and where each goes at west: forward onto east's copy, back onto
 * west's own, via north onto west's copy of north's. */
static const char *const via_targets[NSITES]    = {"east.clicks", "clicks",
                                                   "north.clicks"};
static const char *const via_directions[NSITES] = {"forward", "to-origin",
                                                   "via-origin"};

/* Records of one topic partition by partition: offset and value. */
struct offvals {
        size_t   n[CLICK_PARTS], cap[CLICK_PARTS];
        int64_t *off[CLICK_PARTS];
        char   **val[CLICK_PARTS];
};

static void offval_record(void *arg, int32_t p, int64_t off, const char *val,
                          size_t len) {
        struct offvals *ov = arg;
        if (ov->n[p] == ov->cap[p]) {
                ov->cap[p] = ov->cap[p] ? 2 * ov->cap[p] : 1024;
                ov->off[p] = realloc(ov->off[p], ov->cap[p] * sizeof(int64_t));
                ov->val[p] = realloc(ov->val[p], ov->cap[p] * sizeof(char *));
                assert_true(ov->off[p] && ov->val[p]);
        }
        ov->off[p][ov->n[p]] = off;
        ov->val[p][ov->n[p]] = strndup(val, len);
        ov->n[p]++;
}

static void offvals_deinit(struct offvals *ov) {
        for (int p = 0; p < CLICK_PARTS; p++) {
                for (size_t i = 0; i < ov->n[p]; i++)
                        free(ov->val[p][i]);
                free(ov->off[p]);
                free(ov->val[p]);
        }
}

/* Records below offset 'pos' in partition 'p'. */
static size_t below(const struct offvals *ov, int p, int64_t pos) {
        size_t k = 0;
        while (k < ov->n[p] && ov->off[p][k] < pos)
                k++;
        return k;
}

/* Group g-via at east, committed on clicks, west.clicks and north.clicks,
 * failed over to west.  Checked with the test's own client and reads:
 * the group's offsets at west, on east.clicks, clicks and north.clicks,
 * let it read exactly what it had not read at east: per partition, the
 * records below its offset at west are by content the ones below its
 * position at east, in order, and the ones from there on too (none
 * read twice, none skipped).  The --json rows name each direction. */
static void failover_via_origin(struct rk *r) {
        const char      *group = "g-via";
        double           t0    = rk_elapsed(r);
        int64_t          pos[NSITES][CLICK_PARTS], got[CLICK_PARTS];
        harness_output_t o;

        for (int t = 0; t < NSITES; t++) {
                for (int p = 0; p < CLICK_PARTS; p++) {
                        int64_t lo, hi;
                        assert_int_equal(rd_kafka_query_watermark_offsets(
                                             r->c[0].admin, via_topics[t], p,
                                             &lo, &hi, 10000),
                                         0);
                        pos[t][p] = lo + (hi - lo) / 2 + p;
                }
                commit(r, "east", group, via_topics[t], pos[t], CLICK_PARTS);
        }
        const char *fo[] = {"failover", "--group", group,    "--from", "east",
                            "--to",     "west",    "--json", NULL};
        int         rc   = aagw(r, fo, &o);
        if (rc)
                fail_msg("failover east -> west of %s: exit %d\n%s%s", group,
                         rc, o.out, o.err);
        json_object *j = json_tokener_parse(o.out), *parts;
        assert_non_null(j);
        assert_true(json_object_object_get_ex(j, "partitions", &parts));
        assert_int_equal(json_object_array_length(parts), NSITES * CLICK_PARTS);
        for (size_t i = 0; i < json_object_array_length(parts); i++) {
                json_object *pe = json_object_array_get_idx(parts, i), *v;
                int          t  = -1;
                assert_true(json_object_object_get_ex(pe, "topic", &v));
                for (int k = 0; k < NSITES; k++)
                        if (!strcmp(json_object_get_string(v), via_topics[k]))
                                t = k;
                assert_true(t >= 0);
                assert_true(json_object_object_get_ex(pe, "direction", &v));
                assert_string_equal(json_object_get_string(v),
                                    via_directions[t]);
                assert_true(json_object_object_get_ex(pe, "target_topic", &v));
                assert_string_equal(json_object_get_string(v), via_targets[t]);
                assert_true(json_object_object_get_ex(pe, "exact", &v));
                assert_true(json_object_get_boolean(v));
        }
        json_object_put(j);
        harness_output_deinit(&o);

        print_message("# failover east -> west of g-via: %.1f s\n",
                      rk_elapsed(r) - t0);
        struct offvals at_src[NSITES], at_dst[NSITES];
        void          *src_args[NSITES], *dst_args[NSITES];
        memset(at_src, 0, sizeof(at_src));
        memset(at_dst, 0, sizeof(at_dst));
        for (int t = 0; t < NSITES; t++) {
                src_args[t] = &at_src[t];
                dst_args[t] = &at_dst[t];
        }
        read_topics(r, "east", via_topics, NSITES, CLICK_PARTS, offval_record,
                    src_args);
        read_topics(r, "west", via_targets, NSITES, CLICK_PARTS, offval_record,
                    dst_args);
        for (int t = 0; t < NSITES; t++) {
                const struct offvals *a = &at_src[t], *b = &at_dst[t];
                committed(r, "west", group, via_targets[t], got, CLICK_PARTS);
                for (int p = 0; p < CLICK_PARTS; p++) {
                        size_t ks   = below(a, p, pos[t][p]);
                        size_t kd   = below(b, p, got[p]);
                        bool   same = ks == kd && a->n[p] == b->n[p];
                        for (size_t i = 0; same && i < a->n[p]; i++)
                                same = !strcmp(a->val[p][i], b->val[p][i]);
                        if (!same)
                                fail_msg("%s [%d] at east, position %" PRId64
                                         " (%zu of %zu records read) -> %s "
                                         "at west: committed %" PRId64
                                         " (%zu of %zu records below it), "
                                         "or the records differ",
                                         via_topics[t], p, pos[t][p], ks,
                                         a->n[p], via_targets[t], got[p], kd,
                                         b->n[p]);
                }
        }
        for (int t = 0; t < NSITES; t++) {
                offvals_deinit(&at_src[t]);
                offvals_deinit(&at_dst[t]);
        }
}

/* ---------------------------------------------------------------- TEST --- */

static void test_three_sites(void **state) {
        struct rk     *r = rk_new("rk-three-sites");
        struct rk_gw   g[NSITES];
        struct traffic t;
        struct ids     w = {0};
        struct tails   ts;

        *state = r;
        memset(g, 0, sizeof(g));
        memset(&ts, 0, sizeof(ts));
        for (int s = 0; s < NSITES; s++)
                rk_cluster_start(r, sites[s], 1);
        for (int s = 0; s < NSITES; s++) {
                rk_create_topic(r, sites[s], "clicks", CLICK_PARTS, 1, 0);
                rk_create_topic(r, sites[s], "profiles", PROFILE_PARTS, 1, 0);
                rk_create_topic(r, sites[s], "clicks.unified", CLICK_PARTS, 1,
                                0);
                rk_create_topic(r, sites[s], "profiles.unified", PROFILE_PARTS,
                                1, 0);
        }

        const char *args[NSITES][16];
        for (int s = 0; s < NSITES; s++) {
                const char *a[] = {"--site",  sites[s],
                                   "--mode",  "active-active",
                                   "--id",    "key",
                                   "--topic", "clicks",
                                   "--topic", "profiles",
                                   "--set",   "unify.topics.profiles.mode=lww",
                                   NULL};
                memcpy(args[s], a, sizeof(a));
                rk_gwn_start(r, &g[s], sites[s], args[s]);
        }
        traffic_start(r, &t);
        for (int s = 0; s < NSITES; s++)
                tail_init(r, &ts.t[s], sites[s]);
        ts.w  = &w;
        ts.r  = r;
        ts.tr = &t;

        /* Running: the first probes through at every site. */
        double since = rk_elapsed(r);
        probes_put(&t, &w, "start", NSITES);
        expect_probes(&ts, 0, since, "start");

        /* west's gateway dies (kill -9) and is started again at once. */
        int from = w.nprobes;
        rk_gwn_stop(r, &g[1], SIGKILL, 10000);
        since = rk_elapsed(r);
        probes_put(&t, &w, "kill", NSITES);
        rk_gwn_start(r, &g[1], NULL, args[1]);
        expect_probes(&ts, from, since, "kill -9 of west's gateway");

        /* north cut off for 30 s: its broker frozen.  To the other sites
         * that is what a partition looks like on the wire: connections
         * stay open and requests go unanswered (no reset, no refusal),
         * so their flows from north wait on timeouts, not on errors; and
         * north's gateway meets the same from its own cluster, so no
         * record enters or leaves north for 30 s.  A frozen delay proxy
         * in front of north (--wan-delay) would cut only the others' way
         * to north: north's gateway reaches east and west through their
         * proxies, which the others share, so that way could not be cut
         * alone.  What the freeze does not show: north's clients cannot
         * write meanwhile (their records wait in the client, with the
         * timestamps of the cut, and land at the end). */
        from = w.nprobes;
        rk_ctl(r, "north", "stop", 1, 30000);
        double cut = rk_elapsed(r);
        probes_put(&t, &w, "cut", NSITES);
        int64_t east_before = rk_bag_total(ts.t[0].ids);
        int64_t west_before = rk_bag_total(ts.t[1].ids);
        /* 5 s into the cut west's gateway dies again and starts again
         * at once, with north unreachable: east's and west's records
         * must not wait for north. */
        double rekill = -1, rekill_done = -1;
        int    rekill_from = 0;
        while ((rk_elapsed(r) - cut) * 1000 < CUT_MS) {
                struct timespec nap = {0, 100 * 1000000L};
                tail_poll(&ts.t[0]);
                tail_poll(&ts.t[1]);
                if (rekill < 0 && rk_elapsed(r) - cut >= 5) {
                        rk_gwn_stop(r, &g[1], SIGKILL, 10000);
                        rekill      = rk_elapsed(r);
                        rekill_from = w.nprobes;
                        probes_put(&t, &w, "cutkill", 2);
                        rk_gwn_start(r, &g[1], NULL, args[1]);
                }
                if (rekill >= 0 && rekill_done < 0) {
                        bool ok = true;
                        for (int s = 0; s < 2; s++)
                                for (int i = rekill_from; i < w.nprobes; i++)
                                        ok &= rk_bag_count(ts.t[s].ids,
                                                           w.probes[i]) > 0;
                        if (ok)
                                rekill_done = rk_elapsed(r);
                }
                nanosleep(&nap, NULL);
        }
        if (rekill_done < 0) {
                rk_gwn_dump_log(&g[1], 60);
                fail_msg("west's gateway, restarted during north's cut, did "
                         "not unify east's and west's records before its "
                         "end");
        }
        print_message("# kill -9 of west's gateway during the cut: east's "
                      "and west's records written then unified at west "
                      "%.1f s later\n",
                      rekill_done - rekill);
        /* Its flow from north, started with north silent, asks north for
         * metadata once per refresh, not twice (the fetch window's
         * request and a metadata watch's, each failure logged). */
        int repeats = log_repeats(g[1].log, "metadata of north failed");
        if (repeats)
                fail_msg("%s: %d warnings about north's metadata logged twice",
                         g[1].log, repeats);
        /* The cut held: north's probe reached neither east nor west,
         * while the two of them unified each other's. */
        for (int s = 0; s < 2; s++) {
                tail_poll(&ts.t[s]);
                if (rk_bag_count(ts.t[s].ids, "cut-north"))
                        fail_msg("%s unified north's record during the cut",
                                 sites[s]);
                if (!rk_bag_count(ts.t[s].ids, "cut-east") ||
                    !rk_bag_count(ts.t[s].ids, "cut-west"))
                        fail_msg("%s did not unify east's and west's records "
                                 "during the cut",
                                 sites[s]);
        }
        /* Counted from the `ctl start` that sends SIGCONT (the launcher
         * sends it within its poll interval, so the figures are upper
         * bounds). */
        since = rk_elapsed(r);
        rk_ctl(r, "north", "start", 1, 60000);
        print_message("# north cut for %.1f s; east unified %" PRId64
                      " records meanwhile, west %" PRId64 "\n",
                      since - cut, rk_bag_total(ts.t[0].ids) - east_before,
                      rk_bag_total(ts.t[1].ids) - west_before);
        expect_probes(&ts, from, since, "30 s cut of north, from its end");
        for (int s = 0; s < NSITES; s++)
                expect_running(&g[s]);

        traffic_stop(&t);
        w.ticks = atomic_load(&t.ticks);
        since   = rk_elapsed(r);
        if (!harness_wait_until(all_unified, &ts, TIMEOUT_MS)) {
                for (int s = 0; s < NSITES; s++)
                        fprintf(stderr,
                                "# %s: %" PRId64 " of %" PRId64 " ids\n",
                                sites[s], rk_bag_distinct(ts.t[s].ids),
                                ids_total(&w));
                fail_msg("the sites did not converge within %d s",
                         TIMEOUT_MS / 1000);
        }
        print_message("# %d ticks, %" PRId64 " ids; all three sites converged "
                      "%.1f s after the last write\n",
                      w.ticks, ids_total(&w), rk_elapsed(r) - since);

        /* The checks, each site read again from the start. */
        for (int s = 0; s < NSITES; s++) {
                struct rk_bag  *got = rk_bag_new();
                struct id_check ic  = {got, sites[s], 0, 0};
                int64_t         n   = rk_count(r, sites[s], "clicks.unified",
                                               "read_committed", got);
                ids_each(&w, check_id, &ic);
                print_message(
                    "# %s clicks.unified: %" PRId64 " records, %" PRId64
                    " ids missing, %" PRId64 " doubled (of %" PRId64 ")\n",
                    sites[s], n, ic.missing, ic.doubled, ids_total(&w));
                assert_int_equal(ic.missing, 0);
                assert_int_equal(ic.doubled, 0);
                assert_int_equal(n, ids_total(&w));
                assert_int_equal(rk_bag_distinct(got), ids_total(&w));
                rk_bag_destroy(got);

                struct lww_read lr = {.values = rk_bag_new()};
                for (int j = 0; j < KEYS; j++)
                        lr.last[j] = -1;
                read_topic(r, sites[s], "profiles.unified", PROFILE_PARTS,
                           lww_record, &lr);
                assert_int_equal(lr.bad, 0);
                assert_int_equal(rk_bag_total(lr.values),
                                 rk_bag_distinct(lr.values));
                for (int j = 0; j < KEYS; j++)
                        if (lr.last[j] != t.newest[j] || lr.last_old[j])
                                fail_msg("%s profiles.unified: k%d ends at "
                                         "%d%s, its newest version is %d",
                                         sites[s], j, lr.last[j],
                                         lr.last_old[j] ? " (old)" : "",
                                         t.newest[j]);
                print_message("# %s profiles.unified: %" PRId64
                              " versions delivered, each once; every key's "
                              "last its newest\n",
                              sites[s], rk_bag_total(lr.values));
                rk_bag_destroy(lr.values);
        }
        for (int f = 0; f < NSITES; f++)
                for (int to = 0; to < NSITES; to++) {
                        if (f == to)
                                continue;
                        expect_copy(r, f, to, "clicks", CLICK_PARTS);
                        expect_copy(r, f, to, "profiles", PROFILE_PARTS);
                }

        /* Offsets: a group at each site, halfway through each partition
         * of clicks, moved to each of the other two sites. */
        double t_tr = rk_elapsed(r);
        for (int f = 0; f < NSITES; f++) {
                int64_t off[CLICK_PARTS];
                char    group[32];
                assert_string_equal(r->c[f].alias, sites[f]);
                for (int p = 0; p < CLICK_PARTS; p++) {
                        int64_t lo, hi;
                        assert_int_equal(
                            rd_kafka_query_watermark_offsets(
                                r->c[f].admin, "clicks", p, &lo, &hi, 10000),
                            0);
                        off[p] = hi / 2 + p;
                }
                snprintf(group, sizeof(group), "g-%s", sites[f]);
                commit(r, sites[f], group, "clicks", off, CLICK_PARTS);
                for (int to = 0; to < NSITES; to++)
                        if (to != f)
                                translate_and_failover(r, f, to, off);
        }
        print_message("# translate + failover for the 6 ordered pairs: "
                      "%.1f s\n",
                      rk_elapsed(r) - t_tr);
        t_tr = rk_elapsed(r);
        failover_via_origin(r);
        print_message("# failover east -> west of a group on clicks, "
                      "west.clicks and north.clicks (forward, to-origin, "
                      "via-origin), checked by content: %.1f s\n",
                      rk_elapsed(r) - t_tr);

        for (int s = 0; s < NSITES; s++)
                tail_deinit(&ts.t[s]);
        for (int s = 0; s < NSITES; s++)
                assert_int_equal(rk_gwn_stop(r, &g[s], SIGTERM, 30000), 0);
        print_message("# %.1f s in all\n", rk_elapsed(r));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_three_sites, rk_teardown),
        };
        return cmocka_run_group_tests_name("kafka-three_sites", tests, NULL,
                                           NULL);
}
