/*
 * gateway/demo.c: the one-command demo (`aagw --mode active-active` with no
 * clusters configured).
 *
 *   two embedded clusters, east and west
 *   -> a generated two-DC clickstream at both sites (this file's generator
 *      thread, one idempotent producer per site)
 *   -> the gateway's flows and unify stages (gw_engine_run, driven through
 *      its tick hook)
 *   -> one live line per site per second
 *   -> at --duration (or Ctrl-C): the generator stops, the gateway drains
 *      until idle, and everything is read back and checked against what
 *      the generator itself knows it wrote.
 *
 * The traffic (fixed; the numbers are documented in docs/quickstart.md):
 *  - clicks: CLICKS_PER_S JSON events per second per site, event ids
 *    "<site>-<n>", keyed by user; RETRY_PERMILLE of them are retried by
 *    their client at the other site a little later (same event id, same
 *    payload): the cross-site duplicates the dedup unify stage drops.
 *  - profiles: UPDATES_PER_S updates per second per site over USERS users,
 *    update ids "<site>-u<n>", keyed by user id, with explicit create
 *    timestamps; CONTENDED_PERMILLE of them are matched by an update of
 *    the same user at the other site, half of those in the same
 *    millisecond: the conflicts last-write-wins resolves.
 *
 * The checks (each prints one PASS/FAIL line with its numbers):
 *  1. exactly-once: every generated event exactly once in each site's
 *     clicks.unified;
 *  2. no-loop: no topic carries its own site's prefix or two site prefixes,
 *     and each remote copy holds exactly the records produced at its origin;
 *  3. lww: each user's last record in profiles.unified is the same update
 *     at both sites, and it is the maximum version the generator computes
 *     on its own: (create timestamp, origin alias, update id), alias and id
 *     compared bytewise, the shorter first on a common prefix.
 */
#include "gateway_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "aagw_replicator.h"

#define SITES 2
#define PARTITIONS 8
#define CLICKS_PER_S 1000
#define RETRY_PERMILLE 50  /* clicks retried at the other site */
#define RETRY_DELAY_MS 500 /* retries follow within this */
#define UPDATES_PER_S 100
#define USERS 200
#define CONTENDED_PERMILLE 100 /* updates matched at the other site */
/* The embedded clusters keep about 5 MiB per partition in memory and drop
 * older data silently; the checks need every record.  A unified partition
 * fills at about 5 MiB per 100 s of this traffic, so the generator stops
 * producing after a minute (the gateway keeps running). */
#define MAX_SECONDS 60
#define DRAIN_TIMEOUT_MS 60000 /* from the generator's stop to idle */
#define READ_TIMEOUT_MS 30000  /* reading one topic back */
#define RETRY_RING 8192        /* retries not yet due; power of two */
#define AUDIT_IDS 3

static const char *const site_alias[SITES] = {"east", "west"};

/* Flags per generated click event, indexed by the event's sequence number
 * at its origin site. */
enum {
        EV_RETRIED    = 0x01, /* also produced at the other site */
        EV_UNIFIED0   = 0x02, /* seen in clicks.unified at site 0 (<< i) */
        EV_COPY       = 0x08, /* the origin's record seen in its copy */
        EV_COPY_RETRY = 0x10, /* the retry's record seen in its copy */
};
/* Flags per profile update, by sequence number at its origin. */
enum { UP_COPY = 0x01 };

/* A growable byte-per-item flag array. */
struct flags {
        uint8_t *v;
        size_t   cnt, cap;
};

struct site {
        const char      *alias;
        rd_kafka_t      *rk;     /* the generator's producer */
        struct flags     events; /* click events originating here */
        struct flags     updates;
        uint64_t         click_records; /* own events + retries of others */
        _Atomic uint64_t acked, failed; /* delivery reports, every topic */
        uint64_t         lat_prev[AAGW_LAT_BUCKETS]; /* live window start */
};

/* A profile version: (create timestamp, origin alias, update id). */
struct ver {
        int64_t ts;
        int     site;
        char    id[32];
        bool    set;
};

struct retry {
        int      origin;
        uint64_t seq;
        int      user, page;
        int64_t  ts, due_ms;
};

struct gw_demo {
        aagw_sandbox_t *sb;
        int             duration_s; /* of traffic; 0: until Ctrl-C */
        char            state_dir[PATH_MAX];
        char            exe[PATH_MAX]; /* for the audit commands */
        FILE           *out;
        struct site     s[SITES];
        struct ver      want[USERS]; /* the generator's winners */
        uint64_t        contended, same_ms;
        int             contended_user; /* one of the same-ms ones; -1 */
        struct retry    ring[RETRY_RING];
        uint64_t        ring_head, ring_tail;
        unsigned        seed;

        pthread_t   thr;
        bool        thr_started;
        atomic_bool gen_stop, gen_capped;
        /* The first copy at each site (ms after started_ms, -1 not yet),
         * seen by the watcher thread in the copies themselves. */
        pthread_t       fc_thr;
        bool            fc_started;
        _Atomic int64_t first_copy_ms[SITES];
        /* The live lines' worst replication p99: its bucket bound (ms,
         * -1 none yet), the site and the second of its line. */
        int64_t worst_p99_ms, worst_p99_s;
        int     worst_p99_site;

        enum { ST_INIT, ST_RUN, ST_DRAIN, ST_DONE } st;
        int64_t started_ms, stopped_ms;
        bool    by_signal, cap_noted;
        bool    passed;
};

/* ------------------------------------------------------------ HELPERS --- */

/* Append a zeroed flag; returns its index, or SIZE_MAX out of memory. */
static size_t flags_push(struct flags *f) {
        if (f->cnt == f->cap) {
                size_t   cap = f->cap ? 2 * f->cap : 65536;
                uint8_t *v   = realloc(f->v, cap);
                if (!v)
                        return SIZE_MAX;
                memset(v + f->cap, 0, cap - f->cap);
                f->v   = v;
                f->cap = cap;
        }
        return f->cnt++;
}

static int site_of(const char *alias, size_t len) {
        for (int i = 0; i < SITES; i++)
                if (strlen(site_alias[i]) == len &&
                    !memcmp(site_alias[i], alias, len))
                        return i;
        return -1;
}

/* Split an id "<site>-<n>" (clicks) or "<site>-u<n>" (profiles) into site
 * index and sequence number; false if it is not one of ours. */
static bool parse_id(const char *id, bool update, int *site, uint64_t *seq) {
        const char *dash = strchr(id, '-');
        char       *end;

        if (!dash || (*site = site_of(id, (size_t)(dash - id))) < 0)
                return false;
        dash++;
        if (update && *dash++ != 'u')
                return false;
        if (*dash < '0' || *dash > '9')
                return false;
        errno = 0;
        *seq  = strtoull(dash, &end, 10);
        return !errno && !*end;
}

/* Bytewise, the shorter first on a common prefix (memcmp then length). */
static int bytes_cmp(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        int    c = memcmp(a, b, la < lb ? la : lb);
        return c ? c : (la > lb) - (la < lb);
}

static int ver_cmp(const struct ver *a, const struct ver *b) {
        if (a->ts != b->ts)
                return a->ts < b->ts ? -1 : 1;
        int c = bytes_cmp(site_alias[a->site], site_alias[b->site]);
        return c ? c : bytes_cmp(a->id, b->id);
}

/* ---------------------------------------------------------- GENERATOR --- */

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct site *s = opaque;
        (void)rk;
        if (m->err) {
                atomic_fetch_add(&s->failed, 1);
                aagw_log(AAGW_LOG_ERROR, "DEMO", "generator at %s: %s [%d]: %s",
                         s->alias, rd_kafka_topic_name(m->rkt), m->partition,
                         rd_kafka_err2str(m->err));
        } else
                atomic_fetch_add(&s->acked, 1);
}

/* Produce one record, waiting out a full local queue. */
static void produce(struct site *s, const char *topic, const char *key,
                    const char *value, int64_t ts) {
        for (;;) {
                rd_kafka_resp_err_t err = rd_kafka_producev(
                    s->rk, RD_KAFKA_V_TOPIC(topic),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_KEY(key, strlen(key)),
                    RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                    RD_KAFKA_V_TIMESTAMP(ts), RD_KAFKA_V_END);
                if (!err)
                        return;
                if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        atomic_fetch_add(&s->failed, 1);
                        aagw_log(AAGW_LOG_ERROR, "DEMO",
                                 "generator at %s: %s: %s", s->alias, topic,
                                 rd_kafka_err2str(err));
                        return;
                }
                rd_kafka_poll(s->rk, 10);
        }
}

/* The click of event 'seq' from 'origin', written at site 'at' (its origin,
 * or the other site for the retry: same payload either way). */
static void emit_click(struct gw_demo *d, int at, int origin, uint64_t seq,
                       int user, int page, int64_t ts) {
        char key[32], value[256];
        snprintf(key, sizeof(key), "user-%d", user);
        snprintf(value, sizeof(value),
                 "{\"event_id\":\"%s-%" PRIu64 "\",\"user_id\":\"%s\","
                 "\"page\":\"/products/%d\",\"ts\":%" PRId64 "}",
                 site_alias[origin], seq, key, page, ts);
        /* A retry is a new send by the client: the same payload, but the
         * record's create time is now, as a producer gives it.  (With
         * the event's time it counted the client's retry delay, up to
         * half a second, as replication latency.) */
        produce(&d->s[at], "clicks", key, value,
                at == origin ? ts : aagw_wall_ms());
        d->s[at].click_records++;
}

static void new_click(struct gw_demo *d, int i, int64_t now) {
        struct site *s    = &d->s[i];
        size_t       seq  = flags_push(&s->events);
        int          user = (int)(rand_r(&d->seed) % USERS);
        int          page = (int)(rand_r(&d->seed) % 50);
        int64_t      ts   = aagw_wall_ms();

        if (seq == SIZE_MAX)
                return;
        emit_click(d, i, i, seq, user, page, ts);
        if ((int)(rand_r(&d->seed) % 1000) < RETRY_PERMILLE &&
            d->ring_tail - d->ring_head < RETRY_RING) {
                s->events.v[seq] |= EV_RETRIED;
                d->ring[d->ring_tail++ & (RETRY_RING - 1)] = (struct retry){
                    i,    seq, user,
                    page, ts,  now + 20 + rand_r(&d->seed) % RETRY_DELAY_MS};
        }
}

/* Write every retry due by 'now' (all of them if 'now' is INT64_MAX). */
static void due_retries(struct gw_demo *d, int64_t now) {
        while (d->ring_head < d->ring_tail) {
                struct retry *r = &d->ring[d->ring_head & (RETRY_RING - 1)];
                if (r->due_ms > now)
                        break;
                emit_click(d, 1 - r->origin, r->origin, r->seq, r->user,
                           r->page, r->ts);
                d->ring_head++;
        }
}

static void emit_update(struct gw_demo *d, int i, int user, int64_t ts) {
        static const char *const plans[] = {"free", "plus", "pro", "team"};
        struct site             *s       = &d->s[i];
        size_t                   seq     = flags_push(&s->updates);
        struct ver               v       = {.ts = ts, .site = i, .set = true};
        char                     key[32], value[256];

        if (seq == SIZE_MAX)
                return;
        snprintf(v.id, sizeof(v.id), "%s-u%zu", site_alias[i], seq);
        snprintf(key, sizeof(key), "user-%d", user);
        snprintf(value, sizeof(value),
                 "{\"update_id\":\"%s\",\"user_id\":\"%s\",\"plan\":\"%s\","
                 "\"ts\":%" PRId64 "}",
                 v.id, key, plans[rand_r(&d->seed) % 4], ts);
        produce(s, "profiles", key, value, ts);
        if (!d->want[user].set || ver_cmp(&v, &d->want[user]) > 0)
                d->want[user] = v;
}

static void new_update(struct gw_demo *d, int i) {
        int     user = (int)(rand_r(&d->seed) % USERS);
        int64_t ts   = aagw_wall_ms();

        emit_update(d, i, user, ts);
        if ((int)(rand_r(&d->seed) % 1000) >= CONTENDED_PERMILLE)
                return;
        /* The same user changes the profile at the other site at about
         * the same moment; half the time in the same millisecond, where
         * the origin alias decides. */
        int64_t ts2 = ts;
        if (rand_r(&d->seed) % 2)
                ts2 += 1 + rand_r(&d->seed) % 3;
        else if (d->contended_user < 0)
                d->contended_user = user;
        d->contended++;
        d->same_ms += ts2 == ts;
        emit_update(d, 1 - i, user, ts2);
}

static void *gen_main(void *arg) {
        struct gw_demo *d             = arg;
        uint64_t        clicks[SITES] = {0}, updates[SITES] = {0};
        const uint64_t  max_clicks  = (uint64_t)MAX_SECONDS * CLICKS_PER_S;
        const uint64_t  max_updates = (uint64_t)MAX_SECONDS * UPDATES_PER_S;

        /* One click per site first, and the rest once both are
         * acknowledged: an idempotent producer sends nothing until the
         * cluster gave it a producer id (about a second on the embedded
         * clusters), and the records generated meanwhile would carry that
         * wait into the replication latency the live lines show. */
        int64_t ready_by = aagw_mono_ms() + 10000;
        for (int i = 0; i < SITES; i++) {
                new_click(d, i, aagw_mono_ms());
                clicks[i]++;
        }
        for (bool ready = false;
             !ready && !atomic_load(&d->gen_stop) && aagw_mono_ms() < ready_by;) {
                ready = true;
                for (int i = 0; i < SITES; i++) {
                        rd_kafka_poll(d->s[i].rk, 10);
                        if (!atomic_load(&d->s[i].acked) &&
                            !atomic_load(&d->s[i].failed))
                                ready = false;
                }
        }
        int64_t start = aagw_mono_ms();

        while (!atomic_load(&d->gen_stop)) {
                int64_t  now = aagw_mono_ms();
                uint64_t el  = (uint64_t)(now - start);
                for (int i = 0; i < SITES; i++) {
                        uint64_t want = el * CLICKS_PER_S / 1000;
                        if (want > max_clicks)
                                want = max_clicks;
                        while (clicks[i] < want) {
                                new_click(d, i, now);
                                clicks[i]++;
                        }
                        want = el * UPDATES_PER_S / 1000;
                        if (want > max_updates)
                                want = max_updates;
                        while (updates[i] < want) {
                                new_update(d, i);
                                updates[i]++;
                        }
                }
                due_retries(d, now);
                if (clicks[0] == max_clicks && !atomic_load(&d->gen_capped)) {
                        atomic_store(&d->gen_capped, true);
                        aagw_log(AAGW_LOG_WARN, "DEMO",
                                 "generator: stopped producing after %d s "
                                 "so that the embedded clusters (about 5 MiB "
                                 "per partition, in memory) keep every record "
                                 "for the checks; the gateway keeps running",
                                 MAX_SECONDS);
                }
                for (int i = 0; i < SITES; i++)
                        rd_kafka_poll(d->s[i].rk, 0);
                struct timespec nap = {0, 5 * 1000000L};
                nanosleep(&nap, NULL);
        }
        /* Clients whose retry is still pending send it now: every event
         * marked retried is written at both sites. */
        due_retries(d, INT64_MAX);
        for (int i = 0; i < SITES; i++) {
                rd_kafka_resp_err_t err = rd_kafka_flush(d->s[i].rk, 30000);
                if (err) {
                        int left = rd_kafka_outq_len(d->s[i].rk);
                        atomic_fetch_add(&d->s[i].failed, (uint64_t)left);
                        aagw_log(AAGW_LOG_ERROR, "DEMO",
                                 "generator at %s: %d records not "
                                 "acknowledged in 30 s",
                                 d->s[i].alias, left);
                }
        }
        return NULL;
}

/* ------------------------------------------------------- FIRST COPIES --- */

/* How long after the traffic started the first record reached each site
 * through the gateway: the end offsets of the copies there (east.clicks
 * and east.profiles at west, ...), asked through the generator's own
 * producer of that site every 10 ms until they hold a record.  The
 * demo's own look, not the gateway's counters. */
static void *first_copy_main(void *arg) {
        struct gw_demo *d    = arg;
        int             left = SITES;

        while (left > 0 && !atomic_load(&d->gen_stop)) {
                for (int i = 0; i < SITES; i++) {
                        rd_kafka_topic_partition_list_t *l;
                        char                             t[64];
                        bool                             got = false;

                        if (atomic_load(&d->first_copy_ms[i]) >= 0)
                                continue;
                        l = rd_kafka_topic_partition_list_new(2 * PARTITIONS);
                        for (int k = 0; k < 2; k++) {
                                snprintf(t, sizeof(t), "%s.%s",
                                         site_alias[1 - i],
                                         k ? "profiles" : "clicks");
                                for (int p = 0; p < PARTITIONS; p++)
                                        rd_kafka_topic_partition_list_add(l, t,
                                                                          p)
                                            ->offset = RD_KAFKA_OFFSET_END;
                        }
                        if (!rd_kafka_offsets_for_times(d->s[i].rk, l, 1000))
                                for (int k = 0; k < l->cnt; k++)
                                        got |= !l->elems[k].err &&
                                               l->elems[k].offset > 0;
                        rd_kafka_topic_partition_list_destroy(l);
                        if (got) {
                                atomic_store(&d->first_copy_ms[i],
                                             aagw_mono_ms() - d->started_ms);
                                left--;
                        }
                }
                struct timespec nap = {0, 10 * 1000000L};
                nanosleep(&nap, NULL);
        }
        return NULL;
}

static int gen_start(struct gw_demo *d, char *err, size_t errsize) {
        for (int i = 0; i < SITES; i++) {
                struct site     *s = &d->s[i];
                rd_kafka_conf_t *conf;

                conf = aagw_kafka_conf_new(
                    aagw_sandbox_bootstraps(d->sb, s->alias), "demo-generator",
                    err, errsize);
                if (!conf)
                        return -1;
                if (aagw_kafka_conf_set(conf, "enable.idempotence", "true", err,
                                        errsize) ||
                    aagw_kafka_conf_set(conf, "linger.ms", "5", err, errsize)) {
                        rd_kafka_conf_destroy(conf);
                        return -1;
                }
                rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
                rd_kafka_conf_set_opaque(conf, s);
                if (!(s->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                           errsize))) {
                        rd_kafka_conf_destroy(conf);
                        return -1;
                }
        }
        if (pthread_create(&d->thr, NULL, gen_main, d)) {
                snprintf(err, errsize, "cannot start the generator thread");
                return -1;
        }
        d->thr_started = true;
        /* (Without it the summary says the first copies were not seen.) */
        d->fc_started = !pthread_create(&d->fc_thr, NULL, first_copy_main, d);
        return 0;
}

static void gen_stop(struct gw_demo *d) {
        atomic_store(&d->gen_stop, true);
        if (d->fc_started) {
                pthread_join(d->fc_thr, NULL);
                d->fc_started = false;
        }
        if (!d->thr_started)
                return;
        pthread_join(d->thr, NULL);
        d->thr_started = false;
}

/* ------------------------------------------------------------ FIGURES --- */

/* One site's figures from the flows into it and its unify stage. */
struct figures {
        uint64_t produced, replicated, unified, dropped, conflicts, unify_in;
        uint64_t lat[AAGW_LAT_BUCKETS];
        int64_t  repl_lag, unify_lag, inflight, unify_inflight;
        bool     have_unify;
};

static bool flow_into(aagw_flow_t *f, const char *alias) {
        const char *arrow = strstr(aagw_flow_name(f), "->");
        return arrow && !strcmp(arrow + 2, alias);
}

static void figures(struct gw_demo *d, const struct gw_engine_view *v, int i,
                    struct figures *fg) {
        memset(fg, 0, sizeof(*fg));
        fg->produced = atomic_load(&d->s[i].acked);
        for (size_t k = 0; k < v->nflows; k++) {
                struct aagw_flow_stats st;
                if (!flow_into(v->flows[k], site_alias[i]))
                        continue;
                aagw_flow_stats(v->flows[k], &st);
                fg->replicated += st.records_out;
                fg->repl_lag += st.lag;
                fg->inflight += st.inflight;
                for (int b = 0; b < AAGW_LAT_BUCKETS; b++)
                        fg->lat[b] += st.lat_buckets[b];
        }
        for (size_t k = 0; k < v->nunify; k++) {
                struct aagw_unify_stats st;
                if (strcmp(aagw_unify_site(v->unify[k]), site_alias[i]))
                        continue;
                aagw_unify_stats(v->unify[k], &st);
                fg->have_unify = true;
                fg->unified    = st.records_out;
                fg->dropped    = st.dropped;
                fg->conflicts  = st.superseded + st.identical;
                fg->unify_in   = st.records_in;
                fg->unify_lag  = st.lag;
                fg->inflight += st.inflight;
                fg->unify_inflight = st.inflight;
        }
}

/* The upper bound of the bucket holding quantile 'q' (percent) of the
 * counts 'b', as "<=5ms"; "-" without samples. */
static const char *quantile(const uint64_t *b, int q, char *buf, size_t size) {
        uint64_t n = 0, cum = 0, need;
        for (int k = 0; k < AAGW_LAT_BUCKETS; k++)
                n += b[k];
        if (!n)
                return "-";
        need = (n * (uint64_t)q + 99) / 100;
        for (int k = 0; k < AAGW_LAT_BUCKETS - 1; k++) {
                cum += b[k];
                if (cum >= need) {
                        snprintf(buf, size, "<=%" PRId64 "ms",
                                 aagw_lat_bounds_ms[k]);
                        return buf;
                }
        }
        snprintf(buf, size, ">%" PRId64 "ms",
                 aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 2]);
        return buf;
}

/* The upper bound (ms) of the bucket holding quantile 'q' (percent) of
 * the counts 'b'; -1 without samples, INT64_MAX past the last bound. */
static int64_t quantile_ms(const uint64_t *b, int q) {
        uint64_t n = 0, cum = 0, need;
        for (int k = 0; k < AAGW_LAT_BUCKETS; k++)
                n += b[k];
        if (!n)
                return -1;
        need = (n * (uint64_t)q + 99) / 100;
        for (int k = 0; k < AAGW_LAT_BUCKETS - 1; k++)
                if ((cum += b[k]) >= need)
                        return aagw_lat_bounds_ms[k];
        return INT64_MAX;
}

/* The live line of site 'i': latency over the last second (the histogram
 * since the previous line). */
static void live_line(struct gw_demo *d, const struct gw_engine_view *v, int i,
                      int64_t now) {
        struct figures fg;
        uint64_t       win[AAGW_LAT_BUCKETS];
        char           p50[24], p99[24];

        figures(d, v, i, &fg);
        for (int b = 0; b < AAGW_LAT_BUCKETS; b++) {
                win[b]              = fg.lat[b] - d->s[i].lat_prev[b];
                d->s[i].lat_prev[b] = fg.lat[b];
        }
        int64_t w = quantile_ms(win, 99);
        if (d->st == ST_RUN && w > d->worst_p99_ms) {
                d->worst_p99_ms   = w;
                d->worst_p99_s    = (now - d->started_ms) / 1000;
                d->worst_p99_site = i;
        }
        fprintf(d->out,
                "[%3" PRId64 "s] %-4s produced %7" PRIu64
                "  replicated in %7" PRIu64 "  unified %7" PRIu64
                "  dups dropped %6" PRIu64 "  lww conflicts %5" PRIu64
                "  latency p50 %s p99 %s  lag %" PRId64 "+%" PRId64 "\n",
                (now - d->started_ms) / 1000, site_alias[i], fg.produced,
                fg.replicated, fg.unified, fg.dropped, fg.conflicts,
                quantile(win, 50, p50, sizeof(p50)),
                quantile(win, 99, p99, sizeof(p99)), fg.repl_lag, fg.unify_lag);
}

/* Idle: every record the generator wrote was taken in by both unify
 * stages (so every one was replicated too: each stage reads the other
 * site's records from their copies), the stages are not behind, and
 * nothing they wrote is in flight.  The flows' lag and in-flight count
 * are not asked for: what is left of them once the unify stages have
 * everything is the MM2 heartbeat the gateway itself writes every
 * second, behind or in flight for part of each second (how long depends
 * on the machine), which the checks do not read. */
static bool idle(struct gw_demo *d, const struct gw_engine_view *v) {
        uint64_t all = 0;
        for (int i = 0; i < SITES; i++)
                all += atomic_load(&d->s[i].acked);
        for (int i = 0; i < SITES; i++) {
                struct figures fg;
                figures(d, v, i, &fg);
                if (!fg.have_unify || fg.unify_in < all ||
                    fg.unify_lag != 0 || fg.unify_inflight != 0)
                        return false;
        }
        return true;
}

/* ----------------------------------------------------------- READBACK --- */

struct readback {
        uint64_t records, unique, unknown;
        bool     truncated; /* the cluster dropped the log's start */
};

typedef void(record_fn)(struct gw_demo *d, int site, const char *id,
                        const rd_kafka_message_t *m, struct readback *rb,
                        void *arg);

/* The string field 'name' of the JSON object in 'm's value, into 'buf'. */
static bool json_str(json_tokener *tok, const rd_kafka_message_t *m,
                     const char *name, char *buf, size_t size) {
        json_object *o, *f;
        bool         ok = false;

        if (!m->payload)
                return false;
        json_tokener_reset(tok);
        o = json_tokener_parse_ex(tok, m->payload, (int)m->len);
        if (o && json_object_object_get_ex(o, name, &f) &&
            json_object_is_type(f, json_type_string)) {
                snprintf(buf, size, "%s", json_object_get_string(f));
                ok = true;
        }
        json_object_put(o);
        return ok;
}

/* What read_topic() hands each record to. */
struct reader {
        struct gw_demo  *d;
        int              site;
        const char      *field;
        record_fn       *fn;
        void            *arg;
        struct readback *rb;
        json_tokener    *tok;
};

static bool read_one(void *arg, const rd_kafka_message_t *m) {
        struct reader *r = arg;
        char           id[128];

        r->rb->records++;
        if (json_str(r->tok, m, r->field, id, sizeof(id)))
                r->fn(r->d, r->site, id, m, r->rb, r->arg);
        else
                r->rb->unknown++;
        return true;
}

/* Read 'topic' at site 'site' from its beginning to the high watermarks
 * (taken once, the gateway being idle), handing each record's 'field' to
 * 'fn'.  -1 with the reason in 'err'. */
static int read_topic(struct gw_demo *d, int site, const char *topic,
                      const char *field, record_fn *fn, void *arg,
                      struct readback *rb, char *err, size_t errsize) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t               *rkt;
        rd_kafka_conf_t                *conf;
        rd_kafka_t                     *rk;
        json_tokener                   *tok = json_tokener_new();
        int64_t left = 0, deadline = aagw_mono_ms() + READ_TIMEOUT_MS;
        int     nparts = 0, rc = -1;
        struct reader rd = {d, site, field, fn, arg, rb, tok};

        memset(rb, 0, sizeof(*rb));
        conf = aagw_kafka_conf_new(
            aagw_sandbox_bootstraps(d->sb, site_alias[site]), "demo-check", err,
            errsize);
        if (!conf || !tok) {
                if (conf)
                        rd_kafka_conf_destroy(conf);
                json_tokener_free(tok);
                return -1;
        }
        /* assign() wants a group id; nothing joins or commits. */
        if (aagw_kafka_conf_set(conf, "group.id", "aagw-demo-check", err,
                                errsize) ||
            aagw_kafka_conf_set(conf, "enable.auto.commit", "false", err,
                                errsize)) {
                rd_kafka_conf_destroy(conf);
                json_tokener_free(tok);
                return -1;
        }
        if (!(rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, errsize))) {
                rd_kafka_conf_destroy(conf);
                json_tokener_free(tok);
                return -1;
        }
        rkt                   = rd_kafka_topic_new(rk, topic, NULL);
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        rd_kafka_topic_destroy(rkt);
        if (e || md->topic_cnt != 1 || md->topics[0].err) {
                snprintf(err, errsize, "%s at %s: metadata: %s", topic,
                         site_alias[site],
                         rd_kafka_err2str(e ? e : md->topics[0].err));
                goto out;
        }
        nparts = md->topics[0].partition_cnt;
        if (nparts > 256)
                nparts = 256;
        for (int p = 0; p < nparts; p++) {
                int64_t lo, hi, n;
                if ((e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo,
                                                          &hi, 10000))) {
                        snprintf(err, errsize, "%s [%d] at %s: watermarks: %s",
                                 topic, p, site_alias[site],
                                 rd_kafka_err2str(e));
                        goto out;
                }
                rb->truncated |= lo > 0;
                int64_t wait = deadline - aagw_mono_ms();
                struct aagw_kafka_range r = {
                    .topic      = topic,
                    .partition  = p,
                    .from       = lo,
                    .to         = hi,
                    .timeout_ms = wait > 0 ? (int)wait : 0,
                    .fn         = read_one,
                    .arg        = &rd};
                aagw_kafka_read_range(rk, &r, &n);
                left += hi - lo - n;
        }
        if (left > 0) {
                snprintf(err, errsize,
                         "%s at %s: %" PRId64 " records not read in %d s",
                         topic, site_alias[site], left, READ_TIMEOUT_MS / 1000);
                goto out;
        }
        rc = 0;
out:
        if (md)
                rd_kafka_metadata_destroy(md);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        json_tokener_free(tok);
        return rc;
}

/* Mark 'bit' on the event or update named 'id' (from 'want_site' only, if
 * >= 0): a first sighting counts as unique. */
static void mark(struct gw_demo *d, const char *id, bool update, int want_site,
                 uint8_t bit, struct readback *rb) {
        int      site;
        uint64_t seq;

        if (!parse_id(id, update, &site, &seq) ||
            (want_site >= 0 && site != want_site)) {
                rb->unknown++;
                return;
        }
        struct flags *f = update ? &d->s[site].updates : &d->s[site].events;
        if (seq >= f->cnt) {
                rb->unknown++;
                return;
        }
        if (!(f->v[seq] & bit))
                rb->unique++;
        f->v[seq] |= bit;
}

static void on_unified_click(struct gw_demo *d, int site, const char *id,
                             const rd_kafka_message_t *m, struct readback *rb,
                             void *arg) {
        (void)m;
        (void)arg;
        mark(d, id, false, -1, (uint8_t)(EV_UNIFIED0 << site), rb);
}

/* At 'site', the copy of the other site's clicks: the other site's own
 * events and its retries of this site's events. */
static void on_copied_click(struct gw_demo *d, int site, const char *id,
                            const rd_kafka_message_t *m, struct readback *rb,
                            void *arg) {
        int      origin;
        uint64_t seq;
        (void)m;
        (void)arg;
        if (!parse_id(id, false, &origin, &seq) ||
            seq >= d->s[origin].events.cnt) {
                rb->unknown++;
                return;
        }
        if (origin == site && !(d->s[origin].events.v[seq] & EV_RETRIED)) {
                rb->unknown++; /* never written at the other site */
                return;
        }
        mark(d, id, false, origin, origin == site ? EV_COPY_RETRY : EV_COPY,
             rb);
}

static void on_copied_update(struct gw_demo *d, int site, const char *id,
                             const rd_kafka_message_t *m, struct readback *rb,
                             void *arg) {
        (void)m;
        (void)arg;
        mark(d, id, true, 1 - site, UP_COPY, rb);
}

/* The last record of each user in profiles.unified: 'arg' is an array of
 * USERS winners (update id and the offset it was read at). */
struct winner {
        char    id[32];
        int32_t partition;
        int64_t offset;
};

static void on_unified_update(struct gw_demo *d, int site, const char *id,
                              const rd_kafka_message_t *m, struct readback *rb,
                              void *arg) {
        struct winner *w = arg;
        int            user;
        char           key[32];
        (void)d;
        (void)site;
        if (!m->key || m->key_len >= sizeof(key)) {
                rb->unknown++;
                return;
        }
        memcpy(key, m->key, m->key_len);
        key[m->key_len] = '\0';
        if (sscanf(key, "user-%d", &user) != 1 || user < 0 || user >= USERS) {
                rb->unknown++;
                return;
        }
        /* All versions of a key are in one partition, in decision order. */
        if (w[user].id[0] && w[user].partition == m->partition &&
            w[user].offset > m->offset)
                return;
        snprintf(w[user].id, sizeof(w[user].id), "%s", id);
        w[user].partition = m->partition;
        w[user].offset    = m->offset;
        rb->unique++;
}

/* ------------------------------------------------------------- CHECKS --- */

/* Topics that should not exist: a site's own prefix, or two site
 * prefixes (a copy of a copy). */
static int looped_topics(struct gw_demo *d, int site, char *names, size_t size,
                         char *err, size_t errsize) {
        const struct rd_kafka_metadata *md;
        rd_kafka_conf_t                *conf;
        rd_kafka_t                     *rk;
        int                             n = 0;

        conf = aagw_kafka_conf_new(
            aagw_sandbox_bootstraps(d->sb, site_alias[site]), "demo-check", err,
            errsize);
        if (!conf)
                return -1;
        if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errsize))) {
                rd_kafka_conf_destroy(conf);
                return -1;
        }
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
        if (e) {
                snprintf(err, errsize, "metadata at %s: %s", site_alias[site],
                         rd_kafka_err2str(e));
                rd_kafka_destroy(rk);
                return -1;
        }
        for (int t = 0; t < md->topic_cnt; t++) {
                const char *name     = md->topics[t].topic, *dot;
                int         prefixes = 0, first = -1;
                while ((dot = strchr(name, '.')) &&
                       site_of(name, (size_t)(dot - name)) >= 0) {
                        if (first < 0)
                                first = site_of(name, (size_t)(dot - name));
                        prefixes++;
                        name = dot + 1;
                }
                if (prefixes >= 2 || first == site) {
                        size_t len = strlen(names);
                        snprintf(names + len, size - len, " %s at %s",
                                 md->topics[t].topic, site_alias[site]);
                        n++;
                }
        }
        rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
        return n;
}

static uint64_t count_flag(const struct flags *f, uint8_t bit) {
        uint64_t n = 0;
        for (size_t k = 0; k < f->cnt; k++)
                n += (f->v[k] & bit) != 0;
        return n;
}

/* Check 1: each site's clicks.unified holds every event exactly once. */
static bool check_exactly_once(struct gw_demo *d, uint64_t events, char *line,
                               size_t size) {
        bool   ok  = true;
        size_t len = 0;
        char   err[512];

        len += (size_t)snprintf(line, size, "%" PRIu64 " events generated",
                                events);
        for (int i = 0; i < SITES && len < size; i++) {
                struct readback rb;
                if (read_topic(d, i, "clicks.unified", "event_id",
                               on_unified_click, NULL, &rb, err, sizeof(err))) {
                        len += (size_t)snprintf(line + len, size - len, "; %s",
                                                err);
                        ok = false;
                        continue;
                }
                ok &= rb.records == events && rb.unique == events &&
                      !rb.truncated;
                len += (size_t)snprintf(
                    line + len, size - len,
                    "; %s clicks.unified %" PRIu64 " records, %" PRIu64
                    " unique, %" PRIu64 " missing%s",
                    site_alias[i], rb.records, rb.unique, events - rb.unique,
                    rb.truncated ? " (log start dropped by the cluster)" : "");
        }
        return ok;
}

/* Check 2: no looped topic; each copy holds exactly its origin's records. */
static bool check_no_loop(struct gw_demo *d, char *line, size_t size) {
        char   names[1024] = "", err[512];
        bool   ok          = true;
        int    looped      = 0;
        size_t len         = 0;

        for (int i = 0; i < SITES; i++) {
                int n =
                    looped_topics(d, i, names, sizeof(names), err, sizeof(err));
                if (n < 0) {
                        len += (size_t)snprintf(line + len, size - len, "%s; ",
                                                err);
                        ok = false;
                } else
                        looped += n;
        }
        ok &= looped == 0;
        len += (size_t)snprintf(line + len, size - len, "%d looped topics%s%s",
                                looped, looped ? ":" : "", names);
        for (int i = 0; i < SITES && len < size; i++) {
                int  o = 1 - i;
                char topic[64];
                for (int kind = 0; kind < 2 && len < size; kind++) {
                        struct readback rb;
                        uint64_t        expect;
                        uint64_t        found;
                        snprintf(topic, sizeof(topic), "%s.%s", site_alias[o],
                                 kind ? "profiles" : "clicks");
                        if (read_topic(
                                d, i, topic, kind ? "update_id" : "event_id",
                                kind ? on_copied_update : on_copied_click, NULL,
                                &rb, err, sizeof(err))) {
                                len += (size_t)snprintf(line + len, size - len,
                                                        "; %s", err);
                                ok = false;
                                continue;
                        }
                        if (kind) {
                                expect = d->s[o].updates.cnt;
                                found  = count_flag(&d->s[o].updates, UP_COPY);
                        } else {
                                expect = d->s[o].click_records;
                                found =
                                    count_flag(&d->s[o].events, EV_COPY) +
                                    count_flag(&d->s[i].events, EV_COPY_RETRY);
                        }
                        uint64_t extra = rb.records - rb.unique;
                        ok &= found == expect && rb.unique == expect &&
                              extra == 0 && !rb.truncated;
                        len += (size_t)snprintf(
                            line + len, size - len,
                            "; %s %s %" PRIu64 " records, %" PRIu64
                            " missing, %" PRIu64 " extra of %" PRIu64
                            " produced at %s",
                            site_alias[i], topic, rb.records, expect - found,
                            extra, expect, site_alias[o]);
                }
        }
        return ok;
}

/* Check 3: the same winner per user at both sites, the generator's. */
static bool check_lww(struct gw_demo *d, char *line, size_t size) {
        static struct winner w[SITES][USERS];
        int                  users = 0, same = 0, right = 0;
        char                 err[512];
        bool                 ok  = true;
        size_t               len = 0;

        memset(w, 0, sizeof(w));
        for (int i = 0; i < SITES; i++) {
                struct readback rb;
                if (read_topic(d, i, "profiles.unified", "update_id",
                               on_unified_update, w[i], &rb, err,
                               sizeof(err))) {
                        len += (size_t)snprintf(line + len, size - len, "%s; ",
                                                err);
                        ok = false;
                }
                ok &= !rb.truncated;
        }
        for (int u = 0; u < USERS; u++) {
                if (!d->want[u].set)
                        continue;
                users++;
                bool agree = w[0][u].id[0] && !strcmp(w[0][u].id, w[1][u].id);
                same += agree;
                right += agree && !strcmp(w[0][u].id, d->want[u].id);
        }
        ok &= same == users && right == users;
        snprintf(line + len, size - len,
                 "%d users updated; winners identical at %s and %s for %d; "
                 "equal to the generator's maximum version for %d",
                 users, site_alias[0], site_alias[1], same, right);
        return ok;
}

static void summary(struct gw_demo *d, const struct gw_engine_view *v,
                    bool was_idle, int64_t idle_after_ms) {
        static char line[8192];
        uint64_t events = 0, retried = 0, clicks = 0, updates = 0, failed = 0;
        const char *failed_checks[5];
        int         nfailed = 0;

        for (int i = 0; i < SITES; i++) {
                events += d->s[i].events.cnt;
                retried += count_flag(&d->s[i].events, EV_RETRIED);
                clicks += d->s[i].click_records;
                updates += d->s[i].updates.cnt;
                failed += atomic_load(&d->s[i].failed);
        }
        fprintf(d->out, "\n== summary ==\n");
        fprintf(d->out,
                "traffic: %" PRId64 " s, stopped by %s; gateway %s %.1f s "
                "after the generator stopped\n",
                (d->stopped_ms - d->started_ms) / 1000,
                d->by_signal ? "a signal" : "--duration",
                was_idle ? "idle" : "still busy", idle_after_ms / 1000.0);
        fprintf(d->out,
                "generated: %" PRIu64 " click events (%" PRIu64
                " retried at the other site: %" PRIu64
                " click records), %" PRIu64
                " profile updates of %d users (%" PRIu64 " contended, %" PRIu64
                " in the same millisecond), %" PRIu64 " delivery failures\n",
                events, retried, clicks, updates, USERS, d->contended,
                d->same_ms, failed);
        for (int i = 0; i < SITES; i++) {
                struct figures fg;
                char           p50[24], p99[24];
                figures(d, v, i, &fg);
                fprintf(d->out,
                        "%s: produced %" PRIu64 ", replicated in %" PRIu64
                        ", unified %" PRIu64 ", dups dropped %" PRIu64
                        ", lww conflicts %" PRIu64
                        ", replication latency p50 %s p99 %s\n",
                        site_alias[i], fg.produced, fg.replicated, fg.unified,
                        fg.dropped, fg.conflicts,
                        quantile(fg.lat, 50, p50, sizeof(p50)),
                        quantile(fg.lat, 99, p99, sizeof(p99)));
        }
        fprintf(d->out, "timing: first copy");
        for (int i = 0; i < SITES; i++) {
                int64_t fc = atomic_load(&d->first_copy_ms[i]);
                if (fc >= 0)
                        fprintf(d->out, "%s at %s %.2f s", i ? "," : "",
                                site_alias[i], (double)fc / 1000.0);
                else
                        fprintf(d->out, "%s at %s not seen", i ? "," : "",
                                site_alias[i]);
        }
        fprintf(d->out, " after the traffic started; worst per-second "
                        "replication p99 ");
        if (d->worst_p99_ms < 0)
                fprintf(d->out, "-\n");
        else if (d->worst_p99_ms == INT64_MAX)
                fprintf(d->out, ">%" PRId64 "ms (%s, [%3" PRId64 "s])\n",
                        aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 2],
                        site_alias[d->worst_p99_site], d->worst_p99_s);
        else
                fprintf(d->out, "<=%" PRId64 "ms (%s, [%3" PRId64 "s])\n",
                        d->worst_p99_ms, site_alias[d->worst_p99_site],
                        d->worst_p99_s);
        if (!was_idle) {
                fprintf(d->out,
                        "FAIL idle: not idle %d s after the generator "
                        "stopped (see the last live lines); checking anyway\n",
                        DRAIN_TIMEOUT_MS / 1000);
                failed_checks[nfailed++] = "idle";
        }
        if (failed) {
                fprintf(d->out,
                        "FAIL delivery: %" PRIu64 " generated records were "
                        "not acknowledged by the embedded clusters\n",
                        failed);
                failed_checks[nfailed++] = "delivery";
        }
        bool ok = check_exactly_once(d, events, line, sizeof(line));
        fprintf(d->out, "%s exactly-once: %s\n", ok ? "PASS" : "FAIL", line);
        if (!ok)
                failed_checks[nfailed++] = "exactly-once";
        fflush(d->out);
        line[0] = '\0';
        ok      = check_no_loop(d, line, sizeof(line));
        fprintf(d->out, "%s no-loop: %s\n", ok ? "PASS" : "FAIL", line);
        if (!ok)
                failed_checks[nfailed++] = "no-loop";
        fflush(d->out);
        line[0] = '\0';
        ok      = check_lww(d, line, sizeof(line));
        fprintf(d->out, "%s lww: %s\n", ok ? "PASS" : "FAIL", line);
        if (!ok)
                failed_checks[nfailed++] = "lww";

        /* What to look at next: a few retried events (one copy of each
         * was dropped at each site) and a user updated at both sites. */
        fprintf(d->out, "try:\n");
        for (int i = 0; i < SITES; i++) {
                int shown = 0, limit = i ? 1 : AUDIT_IDS - 1;
                for (size_t k = 0; k < d->s[i].events.cnt && shown < limit; k++)
                        if (d->s[i].events.v[k] & EV_RETRIED) {
                                fprintf(d->out,
                                        "  %s audit id %s-%zu --state-dir %s"
                                        "   # retried at %s: one copy "
                                        "dropped per site\n",
                                        d->exe, site_alias[i], k, d->state_dir,
                                        site_alias[1 - i]);
                                shown++;
                        }
        }
        if (d->contended_user >= 0)
                fprintf(d->out,
                        "  %s audit key user-%d --state-dir %s"
                        "   # updated at both sites in the same "
                        "millisecond\n",
                        d->exe, d->contended_user, d->state_dir);
        if (nfailed == 0)
                fprintf(d->out, "demo: PASS, all 3 invariants hold\n");
        else {
                fprintf(d->out, "demo: FAIL:");
                for (int k = 0; k < nfailed; k++)
                        fprintf(d->out, " %s", failed_checks[k]);
                fprintf(d->out, "\n");
        }
        fflush(d->out);
        d->passed = nfailed == 0;
}

/* --------------------------------------------------------------- TICK --- */

static bool demo_tick(void *opaque, const struct gw_engine_view *v) {
        struct gw_demo *d   = opaque;
        int64_t         now = aagw_mono_ms();
        char            err[512];

        if (d->st == ST_INIT) {
                if (gen_start(d, err, sizeof(err))) {
                        gw_errorf("demo generator: %s", err);
                        d->st = ST_DONE;
                        return true;
                }
                d->started_ms = now;
                d->st         = ST_RUN;
                return false;
        }
        for (int i = 0; i < SITES; i++)
                live_line(d, v, i, now);
        fflush(d->out);
        if (d->st == ST_RUN && !d->cap_noted && atomic_load(&d->gen_capped)) {
                d->cap_noted = true;
                fprintf(d->out,
                        "demo: the generator stopped producing after %d s: "
                        "the embedded clusters keep about 5 MiB per "
                        "partition in memory, and the checks need every "
                        "record; the gateway keeps running\n",
                        MAX_SECONDS);
        }
        if (d->st == ST_RUN) {
                bool over = d->duration_s > 0 &&
                            now - d->started_ms >= d->duration_s * 1000LL;
                if (!over && !v->stop_requested)
                        return false;
                gen_stop(d);
                d->by_signal  = !over;
                d->stopped_ms = now;
                d->st         = ST_DRAIN;
                fprintf(d->out,
                        "demo: generator stopped; waiting until the gateway "
                        "is idle (up to %d s), then reading everything "
                        "back\n",
                        DRAIN_TIMEOUT_MS / 1000);
                fflush(d->out);
                return false;
        }
        if (d->st == ST_DRAIN) {
                bool is_idle = idle(d, v);
                if (!is_idle && now - d->stopped_ms < DRAIN_TIMEOUT_MS)
                        return false;
                summary(d, v, is_idle, now - d->stopped_ms);
                d->st = ST_DONE;
        }
        return true;
}

/* ---------------------------------------------------------------- API --- */

/* Without a state dir given, the demo takes a fresh one under $TMPDIR:
 * its clusters start empty, and stored positions and seen ids from an
 * earlier run would skip or drop the new records. */
int gw_demo_state_dir(aagw_config_t *cfg, char *err, size_t errsize) {
        const char *tmp = getenv("TMPDIR");
        char        path[PATH_MAX];

        if (aagw_config_is_set(cfg, "gateway.state_dir"))
                return EXIT_OK;
        snprintf(path, sizeof(path), "%s/aagw-demo-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(path)) {
                snprintf(err, errsize, "%s: %s", path, strerror(errno));
                return EXIT_RUNTIME;
        }
        aagw_config_set(cfg, "gateway.state_dir", path, "demo");
        /* Bound again (aagw_config_settings()) for what reads it next. */
        if (aagw_config_validate(cfg) != AAGW_OK) {
                snprintf(err, errsize, "%s", aagw_config_errors(cfg));
                return EXIT_USAGE;
        }
        return EXIT_OK;
}

/* A state dir given by the user must hold nothing but the lock this
 * process just took. */
int gw_demo_check_state_dir(const char *dir, char *err, size_t errsize) {
        DIR           *dh = opendir(dir);
        struct dirent *de;
        bool           empty = true;

        if (!dh) {
                snprintf(err, errsize, "%s: %s", dir, strerror(errno));
                return EXIT_RUNTIME;
        }
        while ((de = readdir(dh)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    strcmp(de->d_name, "LOCK.aagw"))
                        empty = false;
        closedir(dh);
        if (empty)
                return EXIT_OK;
        snprintf(err, errsize,
                 "the demo starts empty clusters and needs an empty state "
                 "dir, but %s holds state (from an earlier run?): remove it "
                 "or name another --state-dir",
                 dir);
        return EXIT_USAGE;
}

/* Unify settings the demo's topics need, unless the user chose others. */
static void set_default(aagw_config_t *cfg, const char *key,
                        const char *value) {
        if (!aagw_config_is_set(cfg, key))
                aagw_config_set(cfg, key, value, "demo");
}

gw_demo_t *gw_demo_new(aagw_config_t *cfg, int duration_s, FILE *out, char *err,
                       size_t errsize) {
        static const char *const topics[][2] = {
            /* topic, the one cluster that holds it (NULL: both) */
            {"clicks", NULL},         {"profiles", NULL},
            {"east.clicks", "west"},  {"east.profiles", "west"},
            {"west.clicks", "east"},  {"west.profiles", "east"},
            {"clicks.unified", NULL}, {"profiles.unified", NULL},
        };
        gw_demo_t *d = calloc(1, sizeof(*d));

        if (!d) {
                snprintf(err, errsize, "out of memory");
                return NULL;
        }
        d->duration_s     = duration_s;
        d->out            = out;
        d->contended_user = -1;
        d->worst_p99_ms   = -1;
        for (int i = 0; i < SITES; i++)
                atomic_store(&d->first_copy_ms[i], -1);
        d->seed           = (unsigned)aagw_wall_ms();
        for (int i = 0; i < SITES; i++)
                d->s[i].alias = site_alias[i];
        const char *dir = aagw_config_settings(cfg)->gateway.state_dir;
        if (!realpath(dir, d->state_dir))
                snprintf(d->state_dir, sizeof(d->state_dir), "%s", dir);
        ssize_t n = readlink("/proc/self/exe", d->exe, sizeof(d->exe) - 1);
        if (n > 0)
                d->exe[n] = '\0';
        else
                snprintf(d->exe, sizeof(d->exe), "aagw");

        if (!(d->sb = aagw_sandbox_new(site_alias, SITES, 3, err, errsize)))
                goto fail;
        /* The mock cannot create topics through the Admin API: the local
         * topics, the remote copies (as many partitions, so each source
         * partition maps onto its own) and the unified outputs exist up
         * front. */
        for (size_t i = 0; i < sizeof(topics) / sizeof(topics[0]); i++)
                if (aagw_sandbox_create_topic(d->sb, topics[i][1], topics[i][0],
                                              PARTITIONS, err, errsize))
                        goto fail;
        for (int i = 0; i < SITES; i++) {
                char key[128];
                snprintf(key, sizeof(key), "clusters.%s.bootstrap_servers",
                         site_alias[i]);
                aagw_config_set(cfg, key,
                                aagw_sandbox_bootstraps(d->sb, site_alias[i]),
                                "demo");
        }
        set_default(cfg, "unify.topics.clicks.mode", "dedup");
        set_default(cfg, "unify.topics.clicks.id", "json:event_id");
        set_default(cfg, "unify.topics.profiles.mode", "lww");
        set_default(cfg, "unify.topics.profiles.id", "json:update_id");

        fprintf(
            out,
            "demo: embedded clusters east at %s and west at %s; state "
            "dir %s\n"
            "demo: per site and second %d clicks (%d.%d%% retried at the "
            "other site) and %d profile updates of %d users; %s\n",
            aagw_sandbox_bootstraps(d->sb, "east"),
            aagw_sandbox_bootstraps(d->sb, "west"), d->state_dir, CLICKS_PER_S,
            RETRY_PERMILLE / 10, RETRY_PERMILLE % 10, UPDATES_PER_S, USERS,
            duration_s > 0 ? "checks after --duration" : "checks after Ctrl-C");
        fflush(out);
        return d;
fail:
        gw_demo_destroy(d);
        return NULL;
}

void gw_demo_hooks(gw_demo_t *d, struct gw_engine_hooks *h) {
        h->opaque = d;
        h->tick   = demo_tick;
}

int gw_demo_finish(gw_demo_t *d, int engine_rc) {
        gen_stop(d);
        if (d->st != ST_DONE || engine_rc != EXIT_OK) {
                if (d->st != ST_DONE)
                        fprintf(d->out, "demo: FAIL: the gateway stopped "
                                        "before the checks ran\n");
                fflush(d->out);
                return engine_rc != EXIT_OK ? engine_rc : EXIT_RUNTIME;
        }
        return d->passed ? EXIT_OK : EXIT_RUNTIME;
}

void gw_demo_destroy(gw_demo_t *d) {
        if (!d)
                return;
        gen_stop(d);
        for (int i = 0; i < SITES; i++) {
                if (d->s[i].rk)
                        rd_kafka_destroy(d->s[i].rk);
                free(d->s[i].events.v);
                free(d->s[i].updates.v);
        }
        aagw_sandbox_destroy(d->sb);
        free(d);
}
