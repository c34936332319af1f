/*
 * aagw - active-active replication gateway for Kafka
 *
 * tests/soak/soak.c: the long fault runs (docs/reliability.md, "Long
 * runs").
 *
 *   two sites, east and west: embedded mock clusters in `aagw sandbox`
 *   processes of their own (one per site, so a site's brokers can be
 *   frozen with SIGSTOP and everything outlives a killed aagw), or real
 *   clusters from AAGW_TEST_BOOTSTRAPS_EAST/WEST
 *   -> traffic at both sites for the whole run, from this program's own
 *      idempotent producers (acks=all), which record every acknowledged
 *      record: clicks (dedup by json:event_id, ~5% also written at the
 *      other site as a client's retry) and profiles (last write wins per
 *      key, id json:update_id, timestamps on a 500 ms grid so versions
 *      collide, 10% of updates made at both sites with the same timestamp)
 *   -> aagw as two processes, `aagw run --site east` and `--site west`,
 *      each with its own state dir and admin endpoint
 *   -> faults: scenario `kill` (kill -9 of a random one of them at random
 *      moments, restarted at once, each cycle must show progress) or
 *      scenario `cut` (one site's brokers frozen for a while, /healthz and
 *      /metrics sampled, RPO and catch-up measured)
 *   -> at the end (traffic stopped, both sites idle, both gateways
 *      stopped) everything is read back and checked against what the
 *      producers were acknowledged, never against aagw's own counters:
 *        copies   each remote copy holds exactly its source's records,
 *                 once each, in order, per partition;
 *        dedup    each clicks.unified holds every acknowledged event id
 *                 exactly once, and nothing else;
 *        lww      each profiles.unified's last record per key is the
 *                 newest acknowledged version (greatest (timestamp,
 *                 origin, update_id)), at both sites.
 *   Exit 0 only if every invariant holds (and every fault cycle
 *   progressed); 1 otherwise; 2 for usage errors.
 *
 * Run `soak --help` for the options; docs/reliability.md has the commands
 * and the figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "harness.h"
#include "soak_util.h"

#define SITES 2
enum { T_CLICKS, T_PROFILES, NT };
static const char *const site_name[SITES] = {"east", "west"};
static const char *const tbase[NT]        = {"clicks", "profiles"};

#define MAX_PART 256
#define RETRY_RING 65536 /* pending client retries; power of two */
#define PROGRESS_TIMEOUT_MS 90000
#define IDLE_TIMEOUT_MS 300000
#define CATCHUP_TIMEOUT_MS 600000
/* Reading a topic back fails after this long without a record: the mock
 * serves one record batch per partition and fetch and finds it by a
 * linear scan, so reading 300,000 records back takes minutes. */
#define READ_STALL_MS 60000
#define READ_TIMEOUT_MS 1800000
#define SAMPLE_EVERY_MS 5000

/* ------------------------------ OPTIONS -------------------------------- */

struct opts {
        const char *scenario; /* "kill", "cut" or "disk-full" */
        int         cycles, duration_s, cut_s, pre_s, post_s, tmpfs_mb;
        int         clicks_per_s, updates_per_s, users, partitions, brokers;
        int         retry_permille, contended_permille;
        unsigned    seed;
        bool        quick, keep;
        const char *aagw_set[32];
        int         naagw_set;
};

static void usage(FILE *out) {
        fprintf(
            out,
            "Usage: soak [OPTIONS]\n"
            "\n"
            "Run aagw (two processes, one per site) under faults with traffic "
            "at both\n"
            "sites, then check every copy, every unified id and every "
            "last-write-wins\n"
            "winner against what this program's producers were "
            "acknowledged.\n"
            "\n"
            "  --scenario kill|cut|disk-full  kill: kill -9 cycles "
            "(default); cut: one\n"
            "                       site's brokers frozen for --cut seconds; "
            "disk-full:\n"
            "                       west's state dir (a tmpfs of --tmpfs-mb) "
            "filled for\n"
            "                       --cut seconds after its gateway stopped "
            "(root only)\n"
            "  --tmpfs-mb N         size of that tmpfs (32)\n"
            "  --cycles N           kill cycles (default 50)\n"
            "  --duration S         kill cycles spread over at least S "
            "seconds (600)\n"
            "  --quick              5 cycles over 60 s (the CI form); "
            "disk-full: --before 10\n"
            "                       --cut 5\n"
            "  --cut S              length of the cut (60)\n"
            "  --before S, --after S  traffic before the cut and after the "
            "catch-up (30, 20)\n"
            "  --clicks N           click events per second per site (100)\n"
            "  --updates N          profile updates per second per site (20)\n"
            "  --users N            profile keys (50)\n"
            "  --partitions N       partitions of every topic (16)\n"
            "  --brokers N          brokers per embedded cluster (1)\n"
            "  --seed N             random seed (default: time)\n"
            "  --aagw-set KEY=VALUE extra `--set` for both aagw processes "
            "(repeatable)\n"
            "  --keep               keep the run directory (logs, state "
            "dirs)\n"
            "\n"
            "Environment: AAGW_BIN (the aagw program), "
            "AAGW_TEST_BOOTSTRAPS_EAST/WEST\n"
            "(real clusters; with scripts/kafka-clusters, "
            "AAGW_KAFKA_RUN_DIR lets the cut\n"
            "freeze west's brokers).  Exit status: 0 every invariant holds, "
            "1 not, 2 usage.\n");
}

/* ------------------------------ STATE ---------------------------------- */

/* One record this program produced. */
struct rec {
        char   *value;
        char    id[24];
        int64_t ts;            /* the record's timestamp */
        int64_t enq_ms, ack_ms; /* monotonic */
        int64_t offset;
        int32_t partition;
        int16_t user;
        uint8_t site, topic;
        uint8_t state; /* 0 in flight, 1 acknowledged, 2 failed */
};

struct retry {
        int64_t due_ms, ts;
        char   *key, *value, id[24];
        int     at;
};

struct gw {
        harness_proc_t *proc;
        char           *state_dir, *log, *addr_file;
        char            addr[64];
        int             starts;
};

struct soak {
        struct opts o;
        char       *dir;
        bool        real;
        char       *bs[SITES];
        harness_proc_t *sandbox[SITES];
        char            topic[NT][128];  /* local topic names */
        char            copy[SITES][NT][160]; /* at site i: the other's */
        char            unified[NT][160];
        char            gwid[64];
        struct gw       gw[SITES];
        rd_kafka_t     *q[SITES]; /* watermarks and read-back */

        /* generator */
        rd_kafka_t     *rk[SITES];
        pthread_mutex_t mu;
        struct rec     *recs;
        size_t          nrecs, cap;
        uint64_t        produced[SITES][NT], acked[SITES][NT],
            failed[SITES][NT];
        struct retry   *ring;
        uint64_t        ring_head, ring_tail;
        unsigned        seed;
        uint64_t        seq[SITES][NT];
        int64_t         gen_start_ms, base_wall_ms;
        atomic_bool     stop;
        pthread_t       thr;
        bool            thr_started;

        /* results */
        int      failures;
        int64_t *progress_ms;
        int      ncycles, nprogress_fail;
        int64_t  idle_ms; /* from the traffic's stop to idle; -1 never */
};

static int64_t wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
        static int64_t t0;
        va_list        ap;
        int64_t        w = wall_ms();
        time_t         sec = (time_t)(w / 1000);
        struct tm      tm;
        if (!t0)
                t0 = harness_now_ms();
        gmtime_r(&sec, &tm);
        /* relative time, and UTC as in aagw's log lines */
        fprintf(stdout, "[%7.1fs %02d:%02d:%02d.%03dZ] ",
                (double)(harness_now_ms() - t0) / 1000.0, tm.tm_hour,
                tm.tm_min, tm.tm_sec, (int)(w % 1000));
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
        fflush(stdout);
}

static void failf(struct soak *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void failf(struct soak *s, const char *fmt, ...) {
        va_list ap;
        s->failures++;
        fprintf(stdout, "FAIL ");
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
        fflush(stdout);
}

/* Deliberate waits only (the random moments of the faults, the length of
 * the cut): never used to wait for something to happen. */
static void pause_ms(int64_t ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) && errno == EINTR)
                ;
}

static void *xmalloc(size_t n) {
        void *p = malloc(n);
        if (!p) {
                fprintf(stderr, "soak: out of memory\n");
                abort();
        }
        return p;
}

static char *xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p) {
                fprintf(stderr, "soak: out of memory\n");
                abort();
        }
        return p;
}

/* ------------------------------ CLIENTS -------------------------------- */

static rd_kafka_conf_t *conf_new(const char *bs) {
        rd_kafka_conf_t *c = rd_kafka_conf_new();
        char             err[256];
        if (rd_kafka_conf_set(c, "bootstrap.servers", bs, err, sizeof(err)) ||
            rd_kafka_conf_set(c, "reconnect.backoff.max.ms", "1000", err,
                              sizeof(err)) ||
            rd_kafka_conf_set(c, "client.id", "aagw-soak", err, sizeof(err))) {
                fprintf(stderr, "soak: %s\n", err);
                abort();
        }
        return c;
}

static void set(rd_kafka_conf_t *c, const char *k, const char *v) {
        char err[256];
        if (rd_kafka_conf_set(c, k, v, err, sizeof(err))) {
                fprintf(stderr, "soak: %s=%s: %s\n", k, v, err);
                abort();
        }
}

/* ---------------------------- GENERATOR -------------------------------- */

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct soak *s   = opaque;
        size_t       idx = (size_t)(uintptr_t)m->_private;
        (void)rk;
        pthread_mutex_lock(&s->mu);
        struct rec *r = &s->recs[idx];
        if (m->err) {
                r->state = 2;
                s->failed[r->site][r->topic]++;
                fprintf(stdout, "soak: produce %s at %s failed: %s\n", r->id,
                        site_name[r->site], rd_kafka_err2str(m->err));
        } else {
                r->state     = 1;
                r->partition = m->partition;
                r->offset    = m->offset;
                r->ack_ms    = harness_now_ms();
                s->acked[r->site][r->topic]++;
        }
        pthread_mutex_unlock(&s->mu);
}

static void produce(struct soak *s, int site, int t, const char *key,
                    const char *value, int64_t ts, const char *id, int user) {
        size_t idx;

        pthread_mutex_lock(&s->mu);
        if (s->nrecs == s->cap) {
                size_t      cap = s->cap ? s->cap * 2 : 65536;
                struct rec *n   = realloc(s->recs, cap * sizeof(*n));
                if (!n)
                        abort();
                s->recs = n;
                s->cap  = cap;
        }
        idx           = s->nrecs++;
        struct rec *r = &s->recs[idx];
        memset(r, 0, sizeof(*r));
        r->value     = xstrdup(value);
        r->ts        = ts;
        r->enq_ms    = harness_now_ms();
        r->offset    = -1;
        r->partition = -1;
        r->user      = (int16_t)user;
        r->site      = (uint8_t)site;
        r->topic     = (uint8_t)t;
        snprintf(r->id, sizeof(r->id), "%s", id);
        s->produced[site][t]++;
        pthread_mutex_unlock(&s->mu);

        for (;;) {
                rd_kafka_resp_err_t err = rd_kafka_producev(
                    s->rk[site], RD_KAFKA_V_TOPIC(s->topic[t]),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_KEY(key, strlen(key)),
                    RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                    RD_KAFKA_V_TIMESTAMP(ts),
                    RD_KAFKA_V_OPAQUE((void *)(uintptr_t)idx), RD_KAFKA_V_END);
                if (!err)
                        return;
                if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        pthread_mutex_lock(&s->mu);
                        s->recs[idx].state = 2;
                        s->failed[site][t]++;
                        pthread_mutex_unlock(&s->mu);
                        fprintf(stdout, "soak: produce %s: %s\n", id,
                                rd_kafka_err2str(err));
                        return;
                }
                rd_kafka_poll(s->rk[site], 10);
        }
}

static void new_click(struct soak *s, int i, int64_t now) {
        char     key[32], value[256], id[24];
        uint64_t seq  = s->seq[i][T_CLICKS]++;
        int      user = (int)(rand_r(&s->seed) % 1000);
        int64_t  ts   = wall_ms();

        snprintf(id, sizeof(id), "%s-%" PRIu64, site_name[i], seq);
        snprintf(key, sizeof(key), "user-%d", user);
        snprintf(value, sizeof(value),
                 "{\"event_id\":\"%s\",\"user_id\":\"%s\",\"page\":\"/p/%u\","
                 "\"ts\":%" PRId64 "}",
                 id, key, rand_r(&s->seed) % 100, ts);
        produce(s, i, T_CLICKS, key, value, ts, id, -1);
        if ((int)(rand_r(&s->seed) % 1000) < s->o.retry_permille &&
            s->ring_tail - s->ring_head < RETRY_RING) {
                struct retry *r = &s->ring[s->ring_tail++ & (RETRY_RING - 1)];
                r->due_ms       = now + 20 + rand_r(&s->seed) % 500;
                r->ts           = ts;
                r->key          = xstrdup(key);
                r->value        = xstrdup(value);
                r->at           = 1 - i;
                snprintf(r->id, sizeof(r->id), "%s", id);
        }
}

static void due_retries(struct soak *s, int64_t now) {
        while (s->ring_head < s->ring_tail) {
                struct retry *r = &s->ring[s->ring_head & (RETRY_RING - 1)];
                if (r->due_ms > now)
                        break;
                produce(s, r->at, T_CLICKS, r->key, r->value, r->ts, r->id,
                        -1);
                free(r->key);
                free(r->value);
                s->ring_head++;
        }
}

static void emit_update(struct soak *s, int i, int user, int64_t ts) {
        char     key[32], value[256], id[24];
        uint64_t seq = s->seq[i][T_PROFILES]++;

        snprintf(id, sizeof(id), "%s-u%" PRIu64, site_name[i], seq);
        snprintf(key, sizeof(key), "user-%d", user);
        snprintf(value, sizeof(value),
                 "{\"update_id\":\"%s\",\"user_id\":\"%s\",\"plan\":%u,"
                 "\"ts\":%" PRId64 "}",
                 id, key, rand_r(&s->seed) % 4, ts);
        produce(s, i, T_PROFILES, key, value, ts, id, user);
}

/* Timestamps on a 500 ms grid, up to 1.5 s in the past: versions of one
 * key collide (same timestamp: the origin, then the id decides) and
 * arrive out of order (an older version after a newer one). */
static void new_update(struct soak *s, int i) {
        int     user = (int)(rand_r(&s->seed) % (unsigned)s->o.users);
        int64_t now  = wall_ms();
        int64_t ts   = now - now % 500 - (int64_t)(rand_r(&s->seed) % 4) * 500;

        emit_update(s, i, user, ts);
        if ((int)(rand_r(&s->seed) % 1000) < s->o.contended_permille)
                emit_update(s, 1 - i, user, ts);
}

static void *gen_main(void *arg) {
        struct soak *s           = arg;
        uint64_t     n[SITES][NT] = {{0}};

        while (!atomic_load(&s->stop)) {
                int64_t  now = harness_now_ms();
                uint64_t el  = (uint64_t)(now - s->gen_start_ms);
                for (int i = 0; i < SITES; i++) {
                        uint64_t want = el * (uint64_t)s->o.clicks_per_s / 1000;
                        while (n[i][T_CLICKS] < want) {
                                new_click(s, i, now);
                                n[i][T_CLICKS]++;
                        }
                        want = el * (uint64_t)s->o.updates_per_s / 1000;
                        while (n[i][T_PROFILES] < want) {
                                new_update(s, i);
                                n[i][T_PROFILES]++;
                        }
                }
                due_retries(s, now);
                for (int i = 0; i < SITES; i++)
                        rd_kafka_poll(s->rk[i], 0);
                pause_ms(5); /* the traffic's pace, not a synchronisation */
        }
        /* Clients whose retry is pending send it now. */
        due_retries(s, INT64_MAX);
        for (int i = 0; i < SITES; i++)
                if (rd_kafka_flush(s->rk[i], 300000))
                        fprintf(stdout,
                                "soak: %d records at %s not acknowledged in "
                                "300 s\n",
                                rd_kafka_outq_len(s->rk[i]), site_name[i]);
        return NULL;
}

static void gen_start(struct soak *s) {
        for (int i = 0; i < SITES; i++) {
                rd_kafka_conf_t *c = conf_new(s->bs[i]);
                char             err[256];
                set(c, "enable.idempotence", "true");
                set(c, "acks", "all");
                set(c, "linger.ms", "5");
                set(c, "message.timeout.ms", "300000");
                rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
                rd_kafka_conf_set_opaque(c, s);
                if (!(s->rk[i] = rd_kafka_new(RD_KAFKA_PRODUCER, c, err,
                                              sizeof(err)))) {
                        fprintf(stderr, "soak: producer: %s\n", err);
                        exit(1);
                }
        }
        s->ring         = calloc(RETRY_RING, sizeof(*s->ring));
        s->gen_start_ms = harness_now_ms();
        s->base_wall_ms = wall_ms();
        if (!s->ring || pthread_create(&s->thr, NULL, gen_main, s)) {
                fprintf(stderr, "soak: cannot start the generator\n");
                exit(1);
        }
        s->thr_started = true;
}

static void gen_stop(struct soak *s) {
        if (!s->thr_started)
                return;
        atomic_store(&s->stop, true);
        pthread_join(s->thr, NULL);
        s->thr_started = false;
}

/* ---------------------------- WATERMARKS ------------------------------- */

static void q_new(struct soak *s) {
        for (int i = 0; i < SITES; i++) {
                rd_kafka_conf_t *c = conf_new(s->bs[i]);
                char             err[256], gid[96];
                snprintf(gid, sizeof(gid), "%s-reader", s->gwid);
                set(c, "group.id", gid);
                set(c, "enable.auto.commit", "false");
                set(c, "enable.partition.eof", "true");
                set(c, "fetch.wait.max.ms", "50");
                set(c, "auto.offset.reset", "earliest");
                if (!(s->q[i] = rd_kafka_new(RD_KAFKA_CONSUMER, c, err,
                                             sizeof(err)))) {
                        fprintf(stderr, "soak: consumer: %s\n", err);
                        exit(1);
                }
        }
}

/* High watermarks of every partition of 'topic' at 'site' into 'hi' (and
 * low ones into 'lo' if not NULL). @returns false if a query failed. */
static bool marks(struct soak *s, int site, const char *topic, int64_t *lo,
                  int64_t *hi) {
        for (int p = 0; p < s->o.partitions; p++) {
                int64_t l, h;
                if (rd_kafka_query_watermark_offsets(s->q[site], topic, p, &l,
                                                     &h, 5000))
                        return false;
                hi[p] = h;
                if (lo)
                        lo[p] = l;
        }
        return true;
}

static int64_t hw_sum(struct soak *s, int site, const char *topic) {
        int64_t hi[MAX_PART], sum = 0;
        if (!marks(s, site, topic, NULL, hi))
                return -1;
        for (int p = 0; p < s->o.partitions; p++)
                sum += hi[p];
        return sum;
}

/* ----------------------------- READ-BACK ------------------------------- */

/* A topic read back: per partition its records in offset order. */
struct tdata {
        int64_t lo[MAX_PART], hi[MAX_PART];
        size_t  n[MAX_PART];
        char  **v[MAX_PART], **k[MAX_PART];
};

static void tdata_free(struct tdata *t) {
        for (int p = 0; p < MAX_PART; p++) {
                for (size_t i = 0; i < t->n[p]; i++) {
                        free(t->v[p][i]);
                        free(t->k[p][i]);
                }
                free(t->v[p]);
                free(t->k[p]);
        }
        memset(t, 0, sizeof(*t));
}

static char *dupn(const void *p, size_t len) {
        char *d = xmalloc(len + 1);
        if (len)
                memcpy(d, p, len);
        d[len] = '\0';
        return d;
}

/* Read 'topic' at 'site' from its low to its high watermarks. */
static bool read_topic(struct soak *s, int site, const char *topic,
                       struct tdata *t) {
        rd_kafka_t                      *rk = s->q[site];
        rd_kafka_topic_partition_list_t *l;
        int64_t  next[MAX_PART], deadline = harness_now_ms() + READ_TIMEOUT_MS;
        int64_t  t0 = harness_now_ms(), last = t0;
        size_t   total = 0;
        int      left = 0;
        bool     ok   = true;

        memset(t, 0, sizeof(*t));
        if (!marks(s, site, topic, t->lo, t->hi)) {
                fprintf(stdout, "soak: no watermarks for %s at %s\n", topic,
                        site_name[site]);
                return false;
        }
        l = rd_kafka_topic_partition_list_new(s->o.partitions);
        for (int p = 0; p < s->o.partitions; p++) {
                next[p] = t->lo[p];
                if (t->hi[p] > t->lo[p]) {
                        rd_kafka_topic_partition_list_add(l, topic, p)->offset =
                            t->lo[p];
                        left++;
                        t->v[p] = xmalloc(sizeof(char *) *
                                          (size_t)(t->hi[p] - t->lo[p]));
                        t->k[p] = xmalloc(sizeof(char *) *
                                          (size_t)(t->hi[p] - t->lo[p]));
                }
        }
        rd_kafka_assign(rk, l);
        rd_kafka_topic_partition_list_destroy(l);
        while (left > 0) {
                if (harness_now_ms() > deadline ||
                    harness_now_ms() - last > READ_STALL_MS) {
                        fprintf(stdout,
                                "soak: reading %s at %s timed out after %zu "
                                "records\n",
                                topic, site_name[site], total);
                        ok = false;
                        break;
                }
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
                if (!m)
                        continue;
                int p = m->partition;
                if (!m->err && p >= 0 && p < s->o.partitions &&
                    m->offset >= next[p] && m->offset < t->hi[p]) {
                        size_t i = t->n[p]++;
                        t->v[p][i] = dupn(m->payload, m->len);
                        t->k[p][i] = dupn(m->key, m->key_len);
                        next[p]    = m->offset + 1;
                        last       = harness_now_ms();
                        total++;
                        if (next[p] >= t->hi[p])
                                left--;
                } else if (m->err &&
                           m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        fprintf(stdout, "soak: reading %s at %s: %s\n", topic,
                                site_name[site], rd_kafka_message_errstr(m));
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_assign(rk, NULL);
        logf_("read %s at %s: %zu records in %.1f s", topic, site_name[site],
              total, (double)(harness_now_ms() - t0) / 1000.0);
        for (int p = 0; p < s->o.partitions && ok; p++)
                if (t->n[p] != (size_t)(t->hi[p] - t->lo[p])) {
                        fprintf(stdout,
                                "soak: %s[%d] at %s: read %zu records of "
                                "offsets %" PRId64 "..%" PRId64
                                " (a gap in the log?)\n",
                                topic, p, site_name[site], t->n[p], t->lo[p],
                                t->hi[p]);
                }
        return ok;
}

/* ------------------------------ GATEWAYS ------------------------------- */

static void gw_start(struct soak *s, int i) {
        struct gw  *g = &s->gw[i];
        const char *argv[96];
        char        clus[SITES][512], topics[512], lww[2][256];
        int         a = 0;
        char        err[256];

        remove(g->addr_file); /* a killed run's address is stale */
        argv[a++] = harness_aagw_bin();
        argv[a++] = "run";
        argv[a++] = "--site";
        argv[a++] = site_name[i];
        argv[a++] = "--mode";
        argv[a++] = "active-active";
        for (int j = 0; j < SITES; j++) {
                snprintf(clus[j], sizeof(clus[j]), "%s=%s", site_name[j],
                         s->bs[j]);
                argv[a++] = "--cluster";
                argv[a++] = clus[j];
        }
        argv[a++] = "--gateway-id";
        argv[a++] = s->gwid;
        argv[a++] = "--state-dir";
        argv[a++] = g->state_dir;
        argv[a++] = "--admin";
        argv[a++] = "127.0.0.1:0";
        snprintf(topics, sizeof(topics), "((east|west)\\.)?(%s|%s)",
                 s->topic[T_CLICKS], s->topic[T_PROFILES]);
        argv[a++] = "--topic";
        argv[a++] = topics;
        argv[a++] = "--unify";
        argv[a++] = "dedup";
        argv[a++] = "--id";
        argv[a++] = "json:event_id";
        snprintf(lww[0], sizeof(lww[0]), "unify.topics.%s.mode=lww",
                 s->topic[T_PROFILES]);
        snprintf(lww[1], sizeof(lww[1]), "unify.topics.%s.id=json:update_id",
                 s->topic[T_PROFILES]);
        argv[a++] = "--set";
        argv[a++] = lww[0];
        argv[a++] = "--set";
        argv[a++] = lww[1];
        for (int k = 0; k < s->o.naagw_set; k++) {
                argv[a++] = "--set";
                argv[a++] = s->o.aagw_set[k];
        }
        argv[a] = NULL;

        g->starts++;
        {
                FILE *f = fopen(g->log, "a");
                if (f) {
                        fprintf(f, "==== soak: start %d of aagw --site %s\n",
                                g->starts, site_name[i]);
                        fclose(f);
                }
        }
        g->proc = harness_proc_spawn(argv, g->log, g->log, err, sizeof(err));
        if (!g->proc) {
                fprintf(stderr, "soak: aagw: %s\n", err);
                exit(1);
        }
        g->addr[0] = '\0';
}

/* The admin address of gateway 'i' (read once the process wrote it). */
static const char *gw_addr(struct soak *s, int i) {
        struct gw *g = &s->gw[i];
        if (!g->addr[0]) {
                struct stat st;
                if (stat(g->addr_file, &st) || st.st_size == 0)
                        return NULL;
                char *t = harness_read_file(g->addr_file, NULL);
                if (!t)
                        return NULL;
                t[strcspn(t, "\n")] = '\0';
                snprintf(g->addr, sizeof(g->addr), "%s", t);
                free(t);
        }
        return g->addr;
}

/* @returns true if gateway 'i' still runs; reports its death. */
static bool gw_alive(struct soak *s, int i) {
        int status;
        if (harness_proc_wait(s->gw[i].proc, 0, &status) == AAGW_ERR_TIMEOUT)
                return true;
        failf(s, "aagw --site %s exited on its own with status %d (log %s)",
              site_name[i], harness_exit_code(status), s->gw[i].log);
        return false;
}

/* ----------------------------- SAMPLING -------------------------------- */

/* What the samples of one phase showed, per site. */
static const char *const phases[] = {"before", "cut", "catch-up", "after"};
#define NPHASES 4
struct hstat {
        int    n, non200, unanswered;
        int    lag_unknown;   /* samples with a NaN replication/unify lag */
        int    last_code;     /* /healthz of the phase's last sample */
        bool   last_unknown;  /* a NaN lag in the phase's last sample */
        double lag_max, hb_max, hb_min, ulag_max;
        bool   any;
};
static struct hstat hstats[NPHASES][SITES];

static void hstat_add(int phase, int site, int code, const char *metrics) {
        struct hstat *h = &hstats[phase][site];
        bool          f;
        double        mn;
        h->n++;
        h->last_code = code;
        if (code != 200)
                h->non200++;
        if (!metrics) {
                h->unanswered++;
                return;
        }
        double lag = soak_metric_sum(metrics, "aagw_replication_lag_records",
                                     &f, NULL);
        double hb  = soak_metric_sum(metrics, "aagw_heartbeat_age_ms", &f,
                                     &mn);
        double ul  = soak_metric_sum(metrics, "aagw_unify_lag_records", NULL,
                                     NULL);
        /* an unknown lag is NaN, and so is a sum with one in it */
        h->last_unknown = isnan(lag) || isnan(ul);
        if (h->last_unknown)
                h->lag_unknown++;
        if (!h->any || lag > h->lag_max)
                h->lag_max = lag;
        if (!h->any || hb > h->hb_max)
                h->hb_max = hb;
        if (!h->any || mn < h->hb_min)
                h->hb_min = mn;
        if (!h->any || ul > h->ulag_max)
                h->ulag_max = ul;
        h->any = true;
}

static void hstat_print(void) {
        for (int p = 0; p < NPHASES; p++)
                for (int i = 0; i < SITES; i++) {
                        struct hstat *h = &hstats[p][i];
                        if (!h->n)
                                continue;
                        fprintf(stdout,
                                "health %-8s %s: %d samples, /healthz not "
                                "200 in %d, /metrics unanswered %d; "
                                "replication lag max %.0f; heartbeat age "
                                "%.0f..%.0f ms; unify lag max %.0f; lag "
                                "unknown in %d\n",
                                phases[p], site_name[i], h->n, h->non200,
                                h->unanswered, h->lag_max, h->hb_min,
                                h->hb_max, h->ulag_max, h->lag_unknown);
                }
}

/* One sample of /healthz and /metrics of both gateways, as one line. */
static void sample(struct soak *s, const char *phase) {
        char line[4096];
        int  n = 0;

        for (int i = 0; i < SITES; i++) {
                const char *addr = gw_addr(s, i);
                char       *body = NULL, *mbody = NULL, mets[3000] = "";
                int         code = -1, mcode = -1;
                if (addr) {
                        code  = soak_http_get(addr, "/healthz", 3000, &body);
                        mcode = soak_http_get(addr, "/metrics", 3000, &mbody);
                }
                if (mbody) {
                        static const char *const names[] = {
                            "aagw_flow_up", "aagw_replication_lag_records",
                            "aagw_heartbeat_age_ms", "aagw_unify_up",
                            "aagw_unify_lag_records"};
                        for (size_t k = 0; k < sizeof(names) / sizeof(*names);
                             k++)
                                soak_metric_lines(mbody, names[k], mets,
                                                  sizeof(mets));
                }
                for (int p = 0; p < NPHASES; p++)
                        if (!strcmp(phase, phases[p]))
                                hstat_add(p, i, code,
                                          mcode == 200 ? mbody : NULL);
                if (body)
                        body[strcspn(body, "\r\n")] = '\0';
                n += snprintf(line + n, sizeof(line) - (size_t)n,
                              "%s%s: healthz %d \"%.40s\" metrics %d %s",
                              i ? " | " : "", site_name[i], code,
                              body ? body : "", mcode, mets);
                if (n >= (int)sizeof(line))
                        n = (int)sizeof(line) - 1;
                free(body);
                free(mbody);
        }
        logf_("sample %s: %s", phase, line);
}

/* --------------------------- CONDITIONS -------------------------------- */

/* The outputs of the gateway of 'site': the copies of the other site's
 * topics and the site's unified topics. */
static void outputs(struct soak *s, int site, const char *out[4]) {
        out[0] = s->copy[site][T_CLICKS];
        out[1] = s->copy[site][T_PROFILES];
        out[2] = s->unified[T_CLICKS];
        out[3] = s->unified[T_PROFILES];
}

struct progress_arg {
        struct soak *s;
        int          site;
        int64_t      at_kill[4];
        int64_t      t0, first[4]; /* when each output first advanced */
};

static bool progressed(void *arg) {
        struct progress_arg *pa = arg;
        const char          *out[4];
        bool                 all = true;
        outputs(pa->s, pa->site, out);
        for (int k = 0; k < 4; k++) {
                if (pa->first[k])
                        continue;
                int64_t h = hw_sum(pa->s, pa->site, out[k]);
                if (h > pa->at_kill[k])
                        pa->first[k] = harness_now_ms();
                else
                        all = false;
        }
        return all;
}

/* Copies caught up: for each direction and topic, the copy's high
 * watermark per partition >= 'need' (NULL: the source's current one). */
static bool copies_at(struct soak *s, int64_t need[SITES][NT][MAX_PART]) {
        for (int src = 0; src < SITES; src++)
                for (int t = 0; t < NT; t++) {
                        int64_t hs[MAX_PART], hc[MAX_PART];
                        if (!need && !marks(s, src, s->topic[t], NULL, hs))
                                return false;
                        if (!marks(s, 1 - src, s->copy[1 - src][t], NULL, hc))
                                return false;
                        for (int p = 0; p < s->o.partitions; p++)
                                if (hc[p] < (need ? need[src][t][p] : hs[p]))
                                        return false;
                }
        return true;
}

struct idle_arg {
        struct soak *s;
        int64_t      last[SITES][NT];
        int64_t      changed_ms;
        bool         lag_zero;
};

/* Idle: copies equal their sources, both unify stages report no lag and
 * nothing in flight, and the unified topics have not grown for 3 s. */
static bool idle(void *arg) {
        struct idle_arg *ia  = arg;
        struct soak     *s   = ia->s;
        int64_t          now = harness_now_ms();
        bool             same = true;

        for (int i = 0; i < SITES; i++)
                for (int t = 0; t < NT; t++) {
                        int64_t h = hw_sum(s, i, s->unified[t]);
                        if (h != ia->last[i][t])
                                same = false;
                        ia->last[i][t] = h;
                }
        if (!same || !ia->changed_ms)
                ia->changed_ms = now;
        if (!copies_at(s, NULL))
                return false;
        ia->lag_zero = true;
        for (int i = 0; i < SITES; i++) {
                const char *addr = gw_addr(s, i);
                char       *body = NULL;
                bool        f1, f2;
                double      lmin;
                if (!addr ||
                    soak_http_get(addr, "/metrics", 3000, &body) != 200) {
                        free(body);
                        return false;
                }
                double lag = soak_metric_sum(body, "aagw_unify_lag_records",
                                             &f1, &lmin);
                double inf = soak_metric_sum(
                    body, "aagw_unify_inflight_records", &f2, NULL);
                free(body);
                if (!f1 || lag != 0 || lmin < 0 || (f2 && inf != 0))
                        ia->lag_zero = false;
        }
        return ia->lag_zero && now - ia->changed_ms >= 3000;
}

/* ------------------------------- CHECKS -------------------------------- */

/* Bytewise, the shorter first on a common prefix. */
static int bytes_cmp(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        int    c  = memcmp(a, b, la < lb ? la : lb);
        return c ? c : (la > lb) - (la < lb);
}

/* Version order of two profile updates: (timestamp, origin, update id). */
static int ver_cmp(const struct rec *a, const struct rec *b) {
        if (a->ts != b->ts)
                return a->ts < b->ts ? -1 : 1;
        int c = bytes_cmp(site_name[a->site], site_name[b->site]);
        return c ? c : bytes_cmp(a->id, b->id);
}

struct totals {
        uint64_t acked_not_at_source;
        uint64_t copied, lost, duplicated, extra, misordered;
        uint64_t unified_ids[SITES], unified_dups[SITES],
            unified_missing[SITES], unified_unexpected[SITES];
        uint64_t keys, winners_ok[SITES], winners_agree;
        bool     truncated, unreadable;
};

/* Every acknowledged record of 'site'/'t' is at its offset in the source. */
static void check_source(struct soak *s, int site, int t,
                         const struct tdata *src, struct totals *tot) {
        int shown = 0;
        for (size_t i = 0; i < s->nrecs; i++) {
                const struct rec *r = &s->recs[i];
                if (r->site != site || r->topic != t || r->state != 1)
                        continue;
                int     p   = r->partition;
                int64_t idx = r->offset - src->lo[p];
                if (p >= 0 && p < s->o.partitions && idx >= 0 &&
                    idx < (int64_t)src->n[p] && !strcmp(src->v[p][idx], r->value))
                        continue;
                tot->acked_not_at_source++;
                if (shown++ < 5)
                        fprintf(stdout,
                                "  acknowledged but not in %s[%d]@%" PRId64
                                " at %s: %s\n",
                                s->topic[t], p, r->offset, site_name[site],
                                r->value);
        }
}

/* The copy at 1-src of src's topic t: exactly the source, per partition. */
static void check_copy(struct soak *s, int src, int t, const struct tdata *sd,
                       const struct tdata *cd, struct totals *tot) {
        int         shown = 0;
        const char *cname = s->copy[1 - src][t];

        for (int p = 0; p < s->o.partitions; p++) {
                bool same = sd->n[p] == cd->n[p];
                for (size_t i = 0; same && i < sd->n[p]; i++)
                        same = !strcmp(sd->v[p][i], cd->v[p][i]);
                tot->copied += cd->n[p];
                if (same)
                        continue;
                struct smap m = {0}, ms = {0};
                for (size_t i = 0; i < cd->n[p]; i++) {
                        int64_t *c = smap_put(&m, cd->v[p][i],
                                              strlen(cd->v[p][i]), 0);
                        if (++*c == 2) {
                                tot->duplicated++;
                                if (shown++ < 10)
                                        fprintf(stdout,
                                                "  duplicated in %s[%d] at "
                                                "%s (offset %" PRId64 "): %s\n",
                                                cname, p, site_name[1 - src],
                                                cd->lo[p] + (int64_t)i,
                                                cd->v[p][i]);
                        } else if (*c > 2)
                                tot->duplicated++;
                }
                for (size_t i = 0; i < sd->n[p]; i++) {
                        smap_put(&ms, sd->v[p][i], strlen(sd->v[p][i]), 0);
                        if (!smap_get(&m, sd->v[p][i], strlen(sd->v[p][i]))) {
                                tot->lost++;
                                if (shown++ < 10)
                                        fprintf(stdout,
                                                "  lost: %s[%d]@%" PRId64
                                                " at %s not in %s at %s: %s\n",
                                                s->topic[t], p,
                                                sd->lo[p] + (int64_t)i,
                                                site_name[src], cname,
                                                site_name[1 - src],
                                                sd->v[p][i]);
                        }
                }
                for (size_t i = 0; i < cd->n[p]; i++)
                        if (!smap_get(&ms, cd->v[p][i], strlen(cd->v[p][i]))) {
                                tot->extra++;
                                if (shown++ < 10)
                                        fprintf(stdout,
                                                "  extra in %s[%d]@%" PRId64
                                                " at %s: %s\n",
                                                cname, p,
                                                cd->lo[p] + (int64_t)i,
                                                site_name[1 - src],
                                                cd->v[p][i]);
                        }
                /* Same records, once each, in another order. */
                if (m.cnt == cd->n[p] && ms.cnt == sd->n[p] &&
                    cd->n[p] == sd->n[p]) {
                        tot->misordered++;
                        fprintf(stdout, "  %s[%d] at %s: order differs\n",
                                cname, p, site_name[1 - src]);
                }
                smap_deinit(&m);
                smap_deinit(&ms);
        }
}

static void check_unified_clicks(struct soak *s, int site,
                                 const struct tdata *u,
                                 const struct smap *want, struct totals *tot) {
        struct smap seen  = {0};
        int         shown = 0;
        char        id[64];

        for (int p = 0; p < s->o.partitions; p++)
                for (size_t i = 0; i < u->n[p]; i++) {
                        const char *v = u->v[p][i];
                        if (!soak_json_str(v, strlen(v), "event_id", id,
                                           sizeof(id)))
                                snprintf(id, sizeof(id), "(no event_id)");
                        int64_t *c = smap_put(&seen, id, strlen(id), 0);
                        if (++*c > 1) {
                                tot->unified_dups[site]++;
                                if (shown++ < 10)
                                        fprintf(stdout,
                                                "  duplicate in %s at %s: %s "
                                                "again at [%d]@%" PRId64 "\n",
                                                s->unified[T_CLICKS],
                                                site_name[site], id, p,
                                                u->lo[p] + (int64_t)i);
                        }
                        if (!smap_get(want, id, strlen(id))) {
                                tot->unified_unexpected[site]++;
                                if (shown++ < 10)
                                        fprintf(stdout,
                                                "  unexpected in %s at %s "
                                                "[%d]@%" PRId64 ": %s\n",
                                                s->unified[T_CLICKS],
                                                site_name[site], p,
                                                u->lo[p] + (int64_t)i, v);
                        }
                }
        tot->unified_ids[site] = seen.cnt;
        for (size_t i = 0; smap_next(want, &i); i++)
                if (!smap_get(&seen, want->k[i], want->klen[i])) {
                        tot->unified_missing[site]++;
                        if (shown++ < 10)
                                fprintf(stdout,
                                        "  missing from %s at %s: %s\n",
                                        s->unified[T_CLICKS], site_name[site],
                                        want->k[i]);
                }
        smap_deinit(&seen);
}

/* The last record per key in profiles.unified of 'site': key -> update id
 * (stored in 'last' as an index into 'ids'). */
static void last_per_key(struct soak *s, const struct tdata *u,
                         char (*last)[24]) {
        char id[24];
        for (int p = 0; p < s->o.partitions; p++)
                for (size_t i = 0; i < u->n[p]; i++) {
                        int user = -1;
                        if (sscanf(u->k[p][i], "user-%d", &user) != 1 ||
                            user < 0 || user >= s->o.users)
                                continue;
                        const char *v = u->v[p][i];
                        if (!soak_json_str(v, strlen(v), "update_id", id,
                                           sizeof(id)))
                                snprintf(id, sizeof(id), "(none)");
                        memcpy(last[user], id, sizeof(id));
                }
}

static void check_lww(struct soak *s, const struct tdata u[SITES],
                      struct totals *tot) {
        const struct rec **want = calloc((size_t)s->o.users, sizeof(*want));
        char (*last[SITES])[24];
        int shown = 0;

        for (int i = 0; i < SITES; i++) {
                last[i] = calloc((size_t)s->o.users, 24);
                last_per_key(s, &u[i], last[i]);
        }
        for (size_t i = 0; i < s->nrecs; i++) {
                const struct rec *r = &s->recs[i];
                if (r->topic != T_PROFILES || r->state != 1)
                        continue;
                if (!want[r->user] || ver_cmp(r, want[r->user]) > 0)
                        want[r->user] = r;
        }
        for (int k = 0; k < s->o.users; k++) {
                if (!want[k])
                        continue;
                tot->keys++;
                bool all = true;
                for (int i = 0; i < SITES; i++) {
                        if (!strcmp(last[i][k], want[k]->id))
                                tot->winners_ok[i]++;
                        else {
                                all = false;
                                if (shown++ < 10)
                                        fprintf(stdout,
                                                "  user-%d at %s: last in %s "
                                                "is %s, the newest "
                                                "acknowledged version is %s "
                                                "(ts %" PRId64 ")\n",
                                                k, site_name[i],
                                                s->unified[T_PROFILES],
                                                last[i][k][0] ? last[i][k]
                                                              : "(nothing)",
                                                want[k]->id, want[k]->ts);
                        }
                }
                if (all || !strcmp(last[0][k], last[1][k]))
                        tot->winners_agree++;
        }
        for (int i = 0; i < SITES; i++)
                free(last[i]);
        free(want);
}

static bool any_truncated(struct soak *s, const struct tdata *t,
                          const char *topic, int site) {
        for (int p = 0; p < s->o.partitions; p++)
                if (t->lo[p] > 0) {
                        fprintf(stdout,
                                "soak: %s[%d] at %s starts at offset %" PRId64
                                ": records were deleted (the mock keeps "
                                "about 5 MiB per partition); the check "
                                "cannot be made: lower the rates or raise "
                                "--partitions\n",
                                topic, p, site_name[site], t->lo[p]);
                        return true;
                }
        return false;
}

static void check_all(struct soak *s, struct totals *tot) {
        struct tdata src[SITES][NT], cp[SITES][NT], un[SITES][NT];
        struct smap  want = {0};

        memset(tot, 0, sizeof(*tot));
        for (int i = 0; i < SITES; i++)
                for (int t = 0; t < NT; t++) {
                        if (!read_topic(s, i, s->topic[t], &src[i][t]) ||
                            !read_topic(s, i, s->copy[i][t], &cp[i][t]) ||
                            !read_topic(s, i, s->unified[t], &un[i][t]))
                                tot->unreadable = true;
                        tot->truncated |=
                            any_truncated(s, &src[i][t], s->topic[t], i) ||
                            any_truncated(s, &cp[i][t], s->copy[i][t], i) ||
                            any_truncated(s, &un[i][t], s->unified[t], i);
                }
        for (int i = 0; i < SITES; i++)
                for (int t = 0; t < NT; t++) {
                        check_source(s, i, t, &src[i][t], tot);
                        /* the copy of i's topic lives at 1-i */
                        check_copy(s, i, t, &src[i][t], &cp[1 - i][t], tot);
                }
        for (size_t i = 0; i < s->nrecs; i++)
                if (s->recs[i].topic == T_CLICKS && s->recs[i].state == 1)
                        smap_put(&want, s->recs[i].id, strlen(s->recs[i].id),
                                 0);
        for (int i = 0; i < SITES; i++)
                check_unified_clicks(s, i, &un[i][T_CLICKS], &want, tot);
        struct tdata up[SITES] = {un[0][T_PROFILES], un[1][T_PROFILES]};
        check_lww(s, up, tot);
        uint64_t expected_ids = want.cnt;
        smap_deinit(&want);

        if (tot->unreadable)
                fprintf(stdout,
                        "soak: a topic was not read back completely: the "
                        "counts of missing records below are not verdicts "
                        "on aagw\n");
        fprintf(stdout,
                "%s copies: %" PRIu64 " records copied; lost %" PRIu64
                ", duplicated %" PRIu64 ", extra %" PRIu64
                ", partitions out of order %" PRIu64
                "; acknowledged but not at the source %" PRIu64 "\n",
                tot->lost || tot->duplicated || tot->extra ||
                        tot->misordered || tot->acked_not_at_source
                    ? "FAIL"
                    : "PASS",
                tot->copied, tot->lost, tot->duplicated, tot->extra,
                tot->misordered, tot->acked_not_at_source);
        bool ok = true;
        for (int i = 0; i < SITES; i++)
                ok &= !tot->unified_dups[i] && !tot->unified_missing[i] &&
                      !tot->unified_unexpected[i];
        fprintf(stdout,
                "%s dedup: %" PRIu64 " acknowledged event ids; east %s %" PRIu64
                " ids, %" PRIu64 " duplicates, %" PRIu64 " missing, %" PRIu64
                " unexpected; west %" PRIu64 " ids, %" PRIu64
                " duplicates, %" PRIu64 " missing, %" PRIu64 " unexpected\n",
                ok ? "PASS" : "FAIL", expected_ids, s->unified[T_CLICKS],
                tot->unified_ids[0], tot->unified_dups[0],
                tot->unified_missing[0], tot->unified_unexpected[0],
                tot->unified_ids[1], tot->unified_dups[1],
                tot->unified_missing[1], tot->unified_unexpected[1]);
        if (!ok)
                s->failures++;
        bool lok = tot->winners_ok[0] == tot->keys &&
                   tot->winners_ok[1] == tot->keys &&
                   tot->winners_agree == tot->keys;
        fprintf(stdout,
                "%s lww: %" PRIu64 " keys; newest acknowledged version last "
                "in %s at east %" PRIu64 ", at west %" PRIu64
                "; both sites agree on %" PRIu64 "\n",
                lok ? "PASS" : "FAIL", tot->keys, s->unified[T_PROFILES],
                tot->winners_ok[0], tot->winners_ok[1], tot->winners_agree);
        if (!lok)
                s->failures++;
        if (tot->lost || tot->duplicated || tot->extra || tot->misordered ||
            tot->acked_not_at_source)
                s->failures++;
        if (tot->truncated || tot->unreadable) {
                fprintf(stdout, "FAIL read-back: %s\n",
                        tot->truncated ? "a topic was truncated by retention"
                                       : "a topic could not be read");
                s->failures++;
        }
        for (int i = 0; i < SITES; i++)
                for (int t = 0; t < NT; t++) {
                        tdata_free(&src[i][t]);
                        tdata_free(&cp[i][t]);
                        tdata_free(&un[i][t]);
                }
}

/* ------------------------------- SETUP --------------------------------- */

static void clusters_start(struct soak *s) {
        const char *eb = getenv("AAGW_TEST_BOOTSTRAPS_EAST");
        const char *wb = getenv("AAGW_TEST_BOOTSTRAPS_WEST");
        char        err[512];
        char        pid[32];

        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        if ((eb && *eb) != (wb && *wb)) {
                fprintf(stderr, "soak: set AAGW_TEST_BOOTSTRAPS_EAST and "
                                "_WEST both, or neither\n");
                exit(2);
        }
        s->real = eb && *eb;
        if (s->real) {
                /* Shared clusters keep topics: names of this run only. */
                char *u = harness_unique_name("soak");
                for (char *c = u; *c; c++)
                        if (*c == '-')
                                *c = '_';
                for (int t = 0; t < NT; t++)
                        snprintf(s->topic[t], sizeof(s->topic[t]), "%s_%s", u,
                                 tbase[t]);
                snprintf(s->gwid, sizeof(s->gwid), "%s", u);
                free(u);
                s->bs[0] = xstrdup(eb);
                s->bs[1] = xstrdup(wb);
        } else {
                for (int t = 0; t < NT; t++)
                        snprintf(s->topic[t], sizeof(s->topic[t]), "%s",
                                 tbase[t]);
                snprintf(s->gwid, sizeof(s->gwid), "soak-%s", pid);
        }
        for (int i = 0; i < SITES; i++)
                for (int t = 0; t < NT; t++)
                        snprintf(s->copy[i][t], sizeof(s->copy[i][t]), "%s.%s",
                                 site_name[1 - i], s->topic[t]);
        for (int t = 0; t < NT; t++)
                snprintf(s->unified[t], sizeof(s->unified[t]), "%s.unified",
                         s->topic[t]);

        if (s->real) {
                const char *const   aliases[] = {"east", "west"};
                harness_clusters_t *hc =
                    harness_clusters_new(aliases, 2, 1, err, sizeof(err));
                if (!hc) {
                        fprintf(stderr, "soak: %s\n", err);
                        exit(1);
                }
                for (int i = 0; i < SITES; i++)
                        for (int t = 0; t < NT; t++) {
                                const char *names[3] = {
                                    s->topic[t], s->copy[i][t], s->unified[t]};
                                for (int k = 0; k < 3; k++)
                                        if (harness_clusters_create_topic(
                                                hc, site_name[i], names[k],
                                                s->o.partitions, err,
                                                sizeof(err))) {
                                                fprintf(stderr,
                                                        "soak: create %s at "
                                                        "%s: %s\n",
                                                        names[k], site_name[i],
                                                        err);
                                                exit(1);
                                        }
                        }
                harness_clusters_destroy(hc);
                return;
        }
        /* One sandbox process per site: it outlives a killed aagw, and
         * SIGSTOP on it freezes exactly that site's brokers. */
        for (int i = 0; i < SITES; i++) {
                char        part[16], brokers[16], *bsf, *logf;
                char        name[64];
                const char *argv[32];
                int         a = 0;

                snprintf(name, sizeof(name), "%s.bs", site_name[i]);
                bsf = harness_path_join(s->dir, name);
                snprintf(name, sizeof(name), "sandbox-%s.log", site_name[i]);
                logf = harness_path_join(s->dir, name);
                snprintf(part, sizeof(part), "%d", s->o.partitions);
                snprintf(brokers, sizeof(brokers), "%d", s->o.brokers);
                argv[a++] = harness_aagw_bin();
                argv[a++] = "sandbox";
                argv[a++] = "--clusters";
                argv[a++] = site_name[i];
                argv[a++] = "--brokers";
                argv[a++] = brokers;
                argv[a++] = "--partitions";
                argv[a++] = part;
                argv[a++] = "--bootstraps-file";
                argv[a++] = bsf;
                argv[a++] = "--log-level";
                argv[a++] = "warn";
                for (int t = 0; t < NT; t++) {
                        argv[a++] = "--topic";
                        argv[a++] = s->topic[t];
                        argv[a++] = "--topic";
                        argv[a++] = s->copy[i][t];
                        argv[a++] = "--topic";
                        argv[a++] = s->unified[t];
                }
                argv[a] = NULL;
                s->sandbox[i] =
                    harness_proc_spawn(argv, logf, logf, err, sizeof(err));
                if (!s->sandbox[i] || !harness_wait_file(bsf, 60000)) {
                        fprintf(stderr, "soak: sandbox %s did not start: %s\n",
                                site_name[i], s->sandbox[i] ? logf : err);
                        exit(1);
                }
                harness_bootstraps_t *b =
                    harness_bootstraps_load(bsf, err, sizeof(err));
                if (!b || !harness_bootstraps_get(b, site_name[i])) {
                        fprintf(stderr, "soak: %s\n", err);
                        exit(1);
                }
                s->bs[i] = xstrdup(harness_bootstraps_get(b, site_name[i]));
                harness_bootstraps_destroy(b);
                free(bsf);
                free(logf);
        }
}

/* Freeze (SIGSTOP) or thaw (SIGCONT) the brokers of 'site'. */
static bool site_signal(struct soak *s, int site, int sig) {
        if (!s->real)
                return harness_proc_signal(s->sandbox[site], sig) == 0;
        const char *run = getenv("AAGW_KAFKA_RUN_DIR");
        bool        any = false;
        if (!run)
                return false;
        for (int n = 0; n < 16; n++) {
                char  path[PATH_MAX];
                FILE *f;
                int   pid = 0;
                snprintf(path, sizeof(path), "%s/%s/node%d/pid", run,
                         site_name[site], n);
                if (!(f = fopen(path, "r")))
                        continue;
                if (fscanf(f, "%d", &pid) == 1 && pid > 0 && !kill(pid, sig))
                        any = true;
                fclose(f);
        }
        return any;
}

/* ----------------------------- SCENARIOS ------------------------------- */

static int cmp_i64(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

static void scenario_kill(struct soak *s) {
        int64_t start = harness_now_ms();
        int64_t until = start + (int64_t)s->o.duration_s * 1000;

        s->progress_ms = calloc((size_t)s->o.cycles + 1, sizeof(int64_t));
        for (int c = 0; c < s->o.cycles; c++) {
                /* Spread the kills over the duration: gaps random in
                 * [lo, 12] s, lo chosen so that gap + the mean time to
                 * progress so far fits what is left (lo = 2 once the
                 * cycles alone outlast the duration). */
                int64_t left   = until - harness_now_ms();
                int     done   = s->ncycles - s->nprogress_fail;
                double  mean   = 0;
                for (int k = 0; k < done; k++)
                        mean += (double)s->progress_ms[k] / 1000.0 / done;
                double target =
                    (double)left / 1000.0 / (s->o.cycles - c) - mean;
                double  lo     = 2.0 * target - 12.0;
                if (lo < 2)
                        lo = 2;
                if (lo > 12)
                        lo = 12;
                int64_t gap = (int64_t)(lo * 1000) +
                              (int64_t)(rand_r(&s->seed) %
                                        (unsigned)((12.0 - lo) * 1000 + 1));
                pause_ms(gap); /* the random moment of the fault */

                int                 site = (int)(rand_r(&s->seed) % SITES);
                struct progress_arg pa   = {.s = s, .site = site};
                const char         *out[4];
                if (!gw_alive(s, site) || !gw_alive(s, 1 - site))
                        break;
                harness_proc_signal(s->gw[site].proc, SIGKILL);
                harness_proc_wait(s->gw[site].proc, 10000, NULL);
                harness_proc_destroy(s->gw[site].proc);
                s->gw[site].proc = NULL;
                outputs(s, site, out);
                for (int k = 0; k < 4; k++)
                        pa.at_kill[k] = hw_sum(s, site, out[k]);
                int64_t t0 = harness_now_ms();
                pa.t0      = t0;
                gw_start(s, site);
                bool ok = harness_wait_until(progressed, &pa,
                                             PROGRESS_TIMEOUT_MS);
                int64_t took = harness_now_ms() - t0;
                s->ncycles++;
                if (ok) {
                        s->progress_ms[s->ncycles - s->nprogress_fail - 1] =
                            took;
                        logf_("cycle %d/%d: killed aagw --site %s after %.1f "
                              "s; progress %" PRId64 " ms after the restart "
                              "(%s %.1f s, %s %.1f s, %s %.1f s, %s %.1f s)",
                              c + 1, s->o.cycles, site_name[site],
                              (double)gap / 1000.0, took, out[0],
                              (double)(pa.first[0] - t0) / 1000.0, out[1],
                              (double)(pa.first[1] - t0) / 1000.0, out[2],
                              (double)(pa.first[2] - t0) / 1000.0, out[3],
                              (double)(pa.first[3] - t0) / 1000.0);
                } else {
                        char stuck[600] = "";
                        for (int k = 0; k < 4; k++)
                                if (!pa.first[k])
                                        snprintf(stuck + strlen(stuck),
                                                 sizeof(stuck) - strlen(stuck),
                                                 " %s (%" PRId64 " records)",
                                                 out[k], pa.at_kill[k]);
                        s->nprogress_fail++;
                        failf(s,
                              "cycle %d: aagw --site %s made no progress "
                              "within %d s of its restart, killed at %.1f s;"
                              " not advanced:%s; log %s",
                              c + 1, site_name[site], PROGRESS_TIMEOUT_MS / 1000,
                              (double)gap / 1000.0, stuck, s->gw[site].log);
                }
        }
        /* Traffic goes on until the duration is over. */
        if (harness_now_ms() < until)
                pause_ms(until - harness_now_ms());
}

struct catchup_arg {
        struct soak *s;
        int64_t      resume_ms;
        int64_t      need[SITES][NT][MAX_PART];
        bool         need_known;
        int64_t      acked_ms; /* when the backlog was acknowledged */
        int64_t      next_sample;
};

/* Caught up: every record enqueued before the resume is acknowledged, and
 * every copy holds its source up to the last of them. */
static bool caught_up(void *arg) {
        struct catchup_arg *ca = arg;
        struct soak        *s  = ca->s;
        int64_t             now = harness_now_ms();

        if (now >= ca->next_sample) {
                sample(s, "catch-up");
                ca->next_sample = now + SAMPLE_EVERY_MS;
        }
        if (!ca->need_known) {
                bool all = true;
                memset(ca->need, 0, sizeof(ca->need));
                pthread_mutex_lock(&s->mu);
                for (size_t i = 0; i < s->nrecs && all; i++) {
                        const struct rec *r = &s->recs[i];
                        if (r->enq_ms >= ca->resume_ms)
                                continue;
                        if (r->state == 0)
                                all = false;
                        else if (r->state == 1 &&
                                 r->offset + 1 >
                                     ca->need[r->site][r->topic][r->partition])
                                ca->need[r->site][r->topic][r->partition] =
                                    r->offset + 1;
                }
                pthread_mutex_unlock(&s->mu);
                if (!all)
                        return false;
                ca->need_known = true;
                ca->acked_ms   = now;
        }
        return copies_at(s, ca->need);
}

static void scenario_cut(struct soak *s) {
        const int cut = 1; /* west */
        int64_t   acked_end[SITES][NT][MAX_PART];
        int64_t   copy_hw[SITES][NT][MAX_PART];

        pause_ms((int64_t)s->o.pre_s * 1000); /* traffic before the cut */
        sample(s, "before");
        /* RPO: records acknowledged at a source and not yet in its copy
         * at the moment of the cut. */
        for (int src = 0; src < SITES; src++)
                for (int t = 0; t < NT; t++)
                        if (!marks(s, 1 - src, s->copy[1 - src][t], NULL,
                                   copy_hw[src][t]))
                                failf(s, "no watermarks before the cut");
        memset(acked_end, 0, sizeof(acked_end));
        int64_t cut_ms = harness_now_ms();
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < s->nrecs; i++) {
                const struct rec *r = &s->recs[i];
                if (r->state == 1 &&
                    r->offset + 1 > acked_end[r->site][r->topic][r->partition])
                        acked_end[r->site][r->topic][r->partition] =
                            r->offset + 1;
        }
        int64_t  oldest[SITES] = {INT64_MAX, INT64_MAX};
        uint64_t rpo[SITES]    = {0};
        for (size_t i = 0; i < s->nrecs; i++) {
                const struct rec *r = &s->recs[i];
                if (r->state == 1 &&
                    r->offset >= copy_hw[r->site][r->topic][r->partition]) {
                        rpo[r->site]++;
                        if (r->ack_ms < oldest[r->site])
                                oldest[r->site] = r->ack_ms;
                }
        }
        pthread_mutex_unlock(&s->mu);
        if (!site_signal(s, cut, SIGSTOP)) {
                failf(s, "cannot freeze %s's brokers", site_name[cut]);
                return;
        }
        logf_("cut: %s's brokers frozen (SIGSTOP) for %d s", site_name[cut],
              s->o.cut_s);
        for (int src = 0; src < SITES; src++)
                logf_("RPO at the cut, %s -> %s: %" PRIu64
                      " acknowledged records not yet copied, the oldest "
                      "acknowledged %" PRId64 " ms before the cut",
                      site_name[src], site_name[1 - src], rpo[src],
                      rpo[src] ? cut_ms - oldest[src] : 0);
        int64_t end = cut_ms + (int64_t)s->o.cut_s * 1000;
        while (harness_now_ms() < end) {
                int64_t next = harness_now_ms() + SAMPLE_EVERY_MS;
                sample(s, "cut");
                if (next > end)
                        next = end;
                if (next > harness_now_ms())
                        pause_ms(next - harness_now_ms());
        }
        struct catchup_arg *ca = calloc(1, sizeof(*ca));
        ca->s                  = s;
        site_signal(s, cut, SIGCONT);
        ca->resume_ms = harness_now_ms();
        logf_("cut over: %s's brokers continue (SIGCONT)", site_name[cut]);
        bool ok = harness_wait_until(caught_up, ca, CATCHUP_TIMEOUT_MS);
        int64_t took = harness_now_ms() - ca->resume_ms;
        if (ok)
                logf_("catch-up: every record written before the resume "
                      "acknowledged after %" PRId64 " ms and copied both "
                      "ways after %" PRId64 " ms",
                      ca->acked_ms - ca->resume_ms, took);
        else
                failf(s, "no catch-up within %d s of the resume",
                      CATCHUP_TIMEOUT_MS / 1000);
        s->progress_ms[0] = took;
        s->ncycles        = 1;
        free(ca);
        int64_t post_end = harness_now_ms() + (int64_t)s->o.post_s * 1000;
        while (harness_now_ms() < post_end) {
                int64_t next = harness_now_ms() + SAMPLE_EVERY_MS;
                sample(s, "after");
                if (next > post_end)
                        next = post_end;
                if (next > harness_now_ms())
                        pause_ms(next - harness_now_ms());
        }
        /* The cut must show: each gateway has a flow
         * or stage that uses the frozen cluster, so each says degraded
         * and reports a lag as unknown while it lasts; and both are
         * healthy again with known lags at the end. */
        for (int i = 0; i < SITES; i++) {
                const struct hstat *c = &hstats[1][i], *a = &hstats[3][i];
                if (!c->non200)
                        failf(s, "aagw --site %s: /healthz answered 200 in "
                                 "all %d samples of the cut",
                              site_name[i], c->n);
                if (!c->lag_unknown)
                        failf(s, "aagw --site %s: no lag was unknown (NaN) "
                                 "in the %d samples of the cut",
                              site_name[i], c->n);
                if (a->n && (a->last_code != 200 || a->last_unknown))
                        failf(s, "aagw --site %s: still degraded after the "
                                 "cut (last /healthz %d, lag %s)",
                              site_name[i], a->last_code,
                              a->last_unknown ? "unknown" : "known");
        }
}

/* Fill the file system of 'dir' with 'path' until ENOSPC; @returns the
 * bytes written, -1 on another error. */
static int64_t fill(const char *path) {
        static char buf[1 << 16];
        int64_t     n  = 0;
        int         fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        if (fd == -1)
                return -1;
        for (;;) {
                ssize_t w = write(fd, buf, sizeof(buf));
                if (w > 0) {
                        n += w;
                        continue;
                }
                int e = w < 0 ? errno : ENOSPC;
                close(fd);
                return e == ENOSPC ? n : -1;
        }
}

/* The log of gateway 'i' since its start number 'start'. */
static char *gw_log_since(struct soak *s, int i, int start) {
        char  mark[96];
        char *text = harness_read_file(s->gw[i].log, NULL), *p;

        snprintf(mark, sizeof(mark), "==== soak: start %d of aagw --site %s\n",
                 start, site_name[i]);
        if (text && (p = strstr(text, mark)))
                memmove(text, p, strlen(p) + 1);
        return text;
}

/* Wait up to 'ms' for gateway 'i' to exit; @returns its exit code, -1 if
 * it still runs.  The process handle is released when it exited. */
static int gw_exit_wait(struct soak *s, int i, int ms) {
        int status;

        if (harness_proc_wait(s->gw[i].proc, ms, &status) != AAGW_OK)
                return -1;
        harness_proc_destroy(s->gw[i].proc);
        s->gw[i].proc = NULL;
        return harness_exit_code(status);
}

/* What a gateway that stopped on a full state dir must have said: the
 * error with ENOSPC and the state dir's path, and no abort. */
static void check_enospc_log(struct soak *s, int i, int code,
                             const char *when) {
        char *log = gw_log_since(s, i, s->gw[i].starts);

        if (code != 1)
                failf(s, "%s: aagw --site %s exited %d, want 1 (log %s)", when,
                      site_name[i], code, s->gw[i].log);
        if (!log || !strstr(log, "No space left on device") ||
            !strstr(log, s->gw[i].state_dir))
                failf(s, "%s: the log of aagw --site %s does not name ENOSPC "
                         "and the state dir %s (log %s)",
                      when, site_name[i], s->gw[i].state_dir, s->gw[i].log);
        if (log && strstr(log, "Assertion"))
                failf(s, "%s: aagw --site %s aborted on an assertion (log %s)",
                      when, site_name[i], s->gw[i].log);
        free(log);
}

/* West's state dir (a tmpfs, mounted by main()) is filled while both
 * sites take traffic: west's gateway must stop with an error naming
 * ENOSPC and the state dir, having stored nothing it did not persist
 * (checked by the invariants at the end: a position or a unify epoch
 * claimed without being stored would show as a lost or doubled record
 * after the restart); a start while it is still full must be refused the
 * same way.  After --cut seconds the filler is deleted and the gateway
 * started again: catch-up is measured as for the cut. */
static void scenario_disk_full(struct soak *s) {
        const int site = 1; /* west */
        struct gw *g    = &s->gw[site];
        char      *filler = harness_path_join(g->state_dir, "filler");

        pause_ms((int64_t)s->o.pre_s * 1000); /* traffic before */
        int64_t t_full = harness_now_ms();
        int64_t bytes  = fill(filler);
        if (bytes < 0) {
                failf(s, "cannot fill %s: %s", filler, strerror(errno));
                free(filler);
                return;
        }
        logf_("disk-full: %s's state dir %s filled (%" PRId64 " bytes of "
              "filler, then ENOSPC)",
              site_name[site], g->state_dir, bytes);
        int code = gw_exit_wait(s, site, 120000);
        if (code < 0) {
                failf(s, "aagw --site %s still runs 120 s after its state dir "
                         "filled (log %s)",
                      site_name[site], g->log);
                harness_proc_signal(g->proc, SIGKILL);
                gw_exit_wait(s, site, 10000);
        } else {
                logf_("disk-full: aagw --site %s exited %d, %.1f s after the "
                      "state dir filled",
                      site_name[site], code,
                      (double)(harness_now_ms() - t_full) / 1000.0);
                check_enospc_log(s, site, code, "running");
        }
        /* A start with the state dir full again (the stopped process
         * left space behind: RocksDB preallocates its log). */
        char *filler2 = harness_path_join(g->state_dir, "filler2");
        int64_t more  = fill(filler2);
        gw_start(s, site);
        code = gw_exit_wait(s, site, 60000);
        if (code < 0) {
                /* It found room (a start removes RocksDB's obsolete
                 * files): then it must run correctly, which the
                 * invariants check; stopped before the space returns. */
                logf_("disk-full: a start on the full state dir (%" PRId64
                      " more bytes of filler) found room and runs; stopped "
                      "with SIGTERM",
                      more);
                harness_proc_signal(g->proc, SIGTERM);
                code = gw_exit_wait(s, site, 60000);
                if (code < 0) {
                        failf(s, "aagw --site %s did not stop within 60 s of "
                                 "SIGTERM (log %s)",
                              site_name[site], g->log);
                        harness_proc_signal(g->proc, SIGKILL);
                        gw_exit_wait(s, site, 10000);
                } else if (code != 0)
                        check_enospc_log(s, site, code, "start while full");
        } else {
                logf_("disk-full: a start on the full state dir (%" PRId64
                      " more bytes of filler) exited %d",
                      more, code);
                check_enospc_log(s, site, code, "start while full");
        }
        unlink(filler2);
        free(filler2);
        int64_t end = t_full + (int64_t)s->o.cut_s * 1000;
        if (harness_now_ms() < end)
                pause_ms(end - harness_now_ms());

        unlink(filler);
        free(filler);
        struct catchup_arg *ca = calloc(1, sizeof(*ca));
        struct progress_arg pa = {.s = s, .site = site};
        const char         *out[4];
        outputs(s, site, out);
        for (int k = 0; k < 4; k++)
                pa.at_kill[k] = hw_sum(s, site, out[k]);
        ca->s         = s;
        ca->resume_ms = harness_now_ms();
        ca->next_sample = INT64_MAX;
        pa.t0         = ca->resume_ms;
        logf_("disk-full: filler deleted after %.1f s; aagw --site %s "
              "started again",
              (double)(ca->resume_ms - t_full) / 1000.0, site_name[site]);
        gw_start(s, site);
        bool ok = harness_wait_until(caught_up, ca, CATCHUP_TIMEOUT_MS) &&
                  harness_wait_until(progressed, &pa, PROGRESS_TIMEOUT_MS);
        int64_t took = harness_now_ms() - ca->resume_ms;
        if (ok)
                logf_("catch-up: every record written before the restart "
                      "copied both ways and %s's unified topics growing "
                      "%" PRId64 " ms after the restart",
                      site_name[site], took);
        else
                failf(s, "no catch-up within %d s of the restart",
                      CATCHUP_TIMEOUT_MS / 1000);
        s->progress_ms[0] = took;
        s->ncycles        = 1;
        free(ca);
}

/* -------------------------------- MAIN --------------------------------- */

static int parse_args(int argc, char **argv, struct opts *o) {
        enum {
                O_SCEN = 256, O_CYC, O_DUR, O_QUICK, O_CUT, O_BEFORE, O_AFTER,
                O_TMPFS,
                O_CLICKS, O_UPD, O_USERS, O_PART, O_BROK, O_SEED, O_SET, O_KEEP
        };
        static const struct option lo[] = {
            {"scenario", 1, 0, O_SCEN},   {"cycles", 1, 0, O_CYC},
            {"tmpfs-mb", 1, 0, O_TMPFS},
            {"duration", 1, 0, O_DUR},    {"quick", 0, 0, O_QUICK},
            {"cut", 1, 0, O_CUT},         {"before", 1, 0, O_BEFORE},
            {"after", 1, 0, O_AFTER},     {"clicks", 1, 0, O_CLICKS},
            {"updates", 1, 0, O_UPD},     {"users", 1, 0, O_USERS},
            {"partitions", 1, 0, O_PART}, {"brokers", 1, 0, O_BROK},
            {"seed", 1, 0, O_SEED},       {"aagw-set", 1, 0, O_SET},
            {"keep", 0, 0, O_KEEP},       {"help", 0, 0, 'h'},
            {0, 0, 0, 0}};
        int c;

        *o = (struct opts){.scenario           = "kill",
                           .cycles             = 50,
                           .duration_s         = 600,
                           .cut_s              = 60,
                           .pre_s              = 30,
                           .post_s             = 20,
                           .tmpfs_mb           = 32,
                           .clicks_per_s       = 100,
                           .updates_per_s      = 20,
                           .users              = 50,
                           .partitions         = 16,
                           .brokers            = 1,
                           .retry_permille     = 50,
                           .contended_permille = 100,
                           .seed               = (unsigned)time(NULL)};
        while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
                int v = optarg ? atoi(optarg) : 0;
                switch (c) {
                case O_SCEN: o->scenario = optarg; break;
                case O_CYC: o->cycles = v; break;
                case O_DUR: o->duration_s = v; break;
                case O_QUICK:
                        o->quick      = true;
                        o->cycles     = 5;
                        o->duration_s = 60;
                        break;
                case O_CUT: o->cut_s = v; break;
                case O_BEFORE: o->pre_s = v; break;
                case O_AFTER: o->post_s = v; break;
                case O_TMPFS: o->tmpfs_mb = v; break;
                case O_CLICKS: o->clicks_per_s = v; break;
                case O_UPD: o->updates_per_s = v; break;
                case O_USERS: o->users = v; break;
                case O_PART: o->partitions = v; break;
                case O_BROK: o->brokers = v; break;
                case O_SEED: o->seed = (unsigned)strtoul(optarg, NULL, 10); break;
                case O_SET:
                        if (o->naagw_set >= 32)
                                return -1;
                        o->aagw_set[o->naagw_set++] = optarg;
                        break;
                case O_KEEP: o->keep = true; break;
                case 'h': usage(stdout); exit(0);
                default: return -1;
                }
        }
        if (optind != argc ||
            (strcmp(o->scenario, "kill") && strcmp(o->scenario, "cut") &&
             strcmp(o->scenario, "disk-full")) ||
            o->tmpfs_mb < 8 ||
            o->cycles < 1 || o->cycles > 10000 || o->duration_s < 0 ||
            o->cut_s < 1 || o->pre_s < 0 || o->post_s < 0 ||
            o->clicks_per_s < 1 || o->updates_per_s < 1 || o->users < 1 ||
            o->users > 30000 || o->partitions < 1 ||
            o->partitions > MAX_PART || o->brokers < 1 || o->brokers > 16)
                return -1;
        if (!strcmp(o->scenario, "disk-full") && o->quick) {
                o->pre_s = 10;
                o->cut_s = 5;
        }
        return 0;
}

int main(int argc, char **argv) {
        struct soak *s = calloc(1, sizeof(*s));
        char         uptime[128] = "";
        int64_t      t_start     = harness_now_ms();

        if (!s || parse_args(argc, argv, &s->o)) {
                usage(stderr);
                return 2;
        }
        if (!harness_aagw_bin()) {
                fprintf(stderr, "soak: set AAGW_BIN to the aagw program\n");
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        pthread_mutex_init(&s->mu, NULL);
        s->seed = s->o.seed;
        s->dir  = harness_tmpdir_new("soak");
        if (!s->dir) {
                perror("soak: tmpdir");
                return 1;
        }
        {
                FILE *f = fopen("/proc/loadavg", "r");
                if (f) {
                        if (fgets(uptime, sizeof(uptime), f))
                                uptime[strcspn(uptime, "\n")] = '\0';
                        fclose(f);
                }
        }
        logf_("soak: scenario %s, seed %u, dir %s, load %s", s->o.scenario,
              s->o.seed, s->dir, uptime);
        bool disk_full = !strcmp(s->o.scenario, "disk-full");
        if (disk_full) {
                /* West's state dir on a small tmpfs of its own. */
                char *dir = harness_path_join(s->dir, "west-state"), opt[32];
                snprintf(opt, sizeof(opt), "size=%dm", s->o.tmpfs_mb);
                mkdir(dir, 0755);
                if (mount("tmpfs", dir, "tmpfs", 0, opt)) {
                        fprintf(stdout, "soak: SKIP: scenario disk-full "
                                        "mounts a tmpfs for west's state dir "
                                        "and cannot (%s): run it as root\n",
                                strerror(errno));
                        harness_rmtree(s->dir);
                        return 77;
                }
                free(dir);
        }
        clusters_start(s);
        logf_("clusters (%s): east=%s west=%s", s->real ? "real" : "mock",
              s->bs[0], s->bs[1]);
        q_new(s);
        for (int i = 0; i < SITES; i++) {
                char name[64];
                snprintf(name, sizeof(name), "%s-state", site_name[i]);
                s->gw[i].state_dir = harness_path_join(s->dir, name);
                snprintf(name, sizeof(name), "aagw-%s.log", site_name[i]);
                s->gw[i].log       = harness_path_join(s->dir, name);
                s->gw[i].addr_file =
                    harness_path_join(s->gw[i].state_dir, "admin.addr");
                mkdir(s->gw[i].state_dir, 0755);
                gw_start(s, i);
        }
        for (int i = 0; i < SITES; i++)
                if (!harness_wait_file(s->gw[i].addr_file, 60000)) {
                        failf(s, "aagw --site %s wrote no admin address (log "
                                 "%s)",
                              site_name[i], s->gw[i].log);
                        goto done;
                }
        gen_start(s);
        {
                /* Both gateways at work before any fault. */
                struct progress_arg pa[SITES] = {{.s = s, .site = 0},
                                                 {.s = s, .site = 1}};
                for (int i = 0; i < SITES; i++)
                        if (!harness_wait_until(progressed, &pa[i], 120000)) {
                                failf(s,
                                      "aagw --site %s wrote nothing in 120 s "
                                      "(log %s)",
                                      site_name[i], s->gw[i].log);
                                goto done;
                        }
                logf_("both sites replicate and unify");
        }
        if (!strcmp(s->o.scenario, "kill")) {
                scenario_kill(s);
        } else {
                s->progress_ms = calloc(2, sizeof(int64_t));
                if (disk_full)
                        scenario_disk_full(s);
                else
                        scenario_cut(s);
        }

        logf_("traffic stops");
        gen_stop(s);
        for (int i = 0; i < SITES; i++)
                gw_alive(s, i);
        {
                struct idle_arg *ia = calloc(1, sizeof(*ia));
                s->idle_ms          = -1;
                ia->s               = s;
                int64_t t0          = harness_now_ms();
                if (!harness_wait_until(idle, ia, IDLE_TIMEOUT_MS))
                        failf(s,
                              "not idle %d s after the traffic stopped "
                              "(copies caught up: %s; unify lag 0: %s)",
                              IDLE_TIMEOUT_MS / 1000,
                              copies_at(s, NULL) ? "yes" : "no",
                              ia->lag_zero ? "yes" : "no");
                else {
                        s->idle_ms = harness_now_ms() - t0;
                        logf_("idle %" PRId64 " ms after the traffic stopped",
                              s->idle_ms);
                }
                free(ia);
        }
        /* Stopped gateways write nothing more: the read-back is final. */
        for (int i = 0; i < SITES; i++) {
                int status = 0;
                harness_proc_signal(s->gw[i].proc, SIGTERM);
                if (harness_proc_wait(s->gw[i].proc, 60000, &status) !=
                    AAGW_OK)
                        failf(s, "aagw --site %s did not stop within 60 s of "
                                 "SIGTERM",
                              site_name[i]);
                else if (harness_exit_code(status) != 0)
                        failf(s, "aagw --site %s exited %d on SIGTERM",
                              site_name[i], harness_exit_code(status));
        }

        /* A sanitizer build of aagw reports into its log (UBSan does not
         * even stop the process): any report is a failure. */
        for (int i = 0; i < SITES; i++) {
                static const char *const marks_[] = {
                    "runtime error:", "AddressSanitizer", "LeakSanitizer"};
                char *text = harness_read_file(s->gw[i].log, NULL);
                for (size_t k = 0; text && k < 3; k++)
                        if (strstr(text, marks_[k]))
                                failf(s, "aagw --site %s: sanitizer report "
                                         "(\"%s\") in %s",
                                      site_name[i], marks_[k], s->gw[i].log);
                free(text);
        }

        hstat_print();
        struct totals tot;
        check_all(s, &tot);

        {
                uint64_t prod[SITES] = {0}, ack[SITES] = {0}, fail[SITES] = {0};
                for (int i = 0; i < SITES; i++)
                        for (int t = 0; t < NT; t++) {
                                prod[i] += s->produced[i][t];
                                ack[i] += s->acked[i][t];
                                fail[i] += s->failed[i][t];
                        }
                int n = s->ncycles - s->nprogress_fail;
                qsort(s->progress_ms, (size_t)(n > 0 ? n : 0),
                      sizeof(int64_t), cmp_i64);
                fprintf(stdout,
                        "summary: scenario %s, %d %s in %.0f s (seed %u); "
                        "produced/acknowledged east %" PRIu64 "/%" PRIu64
                        " west %" PRIu64 "/%" PRIu64
                        " (failed %" PRIu64 "+%" PRIu64 "); copied %" PRIu64
                        ", lost %" PRIu64 ", duplicated %" PRIu64
                        "; unified ids east %" PRIu64 " west %" PRIu64
                        ", duplicates %" PRIu64 "+%" PRIu64
                        ", missing %" PRIu64 "+%" PRIu64
                        "; lww winners agreeing %" PRIu64 "/%" PRIu64
                        "; idle %" PRId64 " ms after the traffic stopped",
                        s->o.scenario, s->ncycles,
                        !strcmp(s->o.scenario, "kill") ? "kill cycles"
                        : disk_full                    ? "disk-full"
                                                       : "cut",
                        (double)(harness_now_ms() - t_start) / 1000.0,
                        s->o.seed, prod[0], ack[0], prod[1], ack[1], fail[0],
                        fail[1], tot.copied, tot.lost, tot.duplicated,
                        tot.unified_ids[0], tot.unified_ids[1],
                        tot.unified_dups[0], tot.unified_dups[1],
                        tot.unified_missing[0], tot.unified_missing[1],
                        tot.winners_agree, tot.keys, s->idle_ms);
                if (n > 0)
                        fprintf(stdout, "; %s median %" PRId64
                                        " ms, max %" PRId64 " ms",
                                strcmp(s->o.scenario, "kill")
                                    ? "catch-up"
                                    : "progress after restart",
                                s->progress_ms[n / 2], s->progress_ms[n - 1]);
                if (s->nprogress_fail)
                        fprintf(stdout, "; %d cycles without progress",
                                s->nprogress_fail);
                fprintf(stdout, "\n");
                if (fail[0] || fail[1])
                        failf(s, "%" PRIu64 " records were not acknowledged",
                              fail[0] + fail[1]);
        }
done:
        gen_stop(s);
        for (int i = 0; i < SITES; i++) {
                harness_proc_destroy(s->gw[i].proc);
                s->gw[i].proc = NULL;
        }
        {
                FILE *f = fopen("/proc/loadavg", "r");
                if (f) {
                        if (fgets(uptime, sizeof(uptime), f))
                                uptime[strcspn(uptime, "\n")] = '\0';
                        fclose(f);
                }
        }
        fprintf(stdout, "soak: %s (%d failures); load at the end %s\n",
                s->failures ? "FAIL" : "PASS", s->failures, uptime);
        for (int i = 0; i < SITES; i++) {
                if (s->rk[i])
                        rd_kafka_destroy(s->rk[i]);
                if (s->q[i]) {
                        rd_kafka_consumer_close(s->q[i]);
                        rd_kafka_destroy(s->q[i]);
                }
                harness_proc_destroy(s->sandbox[i]);
                free(s->bs[i]);
                free(s->gw[i].state_dir);
                free(s->gw[i].log);
                free(s->gw[i].addr_file);
        }
        if (disk_full) {
                char *dir = harness_path_join(s->dir, "west-state");
                umount2(dir, MNT_DETACH);
                free(dir);
        }
        if (s->failures || s->o.keep)
                fprintf(stdout, "soak: logs and state kept in %s\n", s->dir);
        else
                harness_rmtree(s->dir);
        for (size_t i = 0; i < s->nrecs; i++)
                free(s->recs[i].value);
        free(s->recs);
        free(s->ring);
        free(s->progress_ms);
        free(s->dir);
        int rc = s->failures ? 1 : 0;
        pthread_mutex_destroy(&s->mu);
        free(s);
        return rc;
}
