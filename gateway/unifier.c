/*
 * gateway/unifier.c: the unify stage of one site.
 *
 * For every logical topic T at site S it reads T and the remote copies of
 * T held at S (east.T under the prefix policy; under identity the copies
 * share T), decides per record (dedup: first occurrence of the global id;
 * lww: newest version per entity key), and writes the winners to
 * T<suffix> on S's cluster, partitioned by id hash (dedup) or entity key
 * hash (lww).  One thread per site.
 *
 * Exactly once into the unified topic, without broker transactions
 * (docs/architecture.md, "Exactly once into the unified topic"):
 *
 *  - Records are decided in epochs (one consumed batch each).  The
 *    decisions of an epoch (seen ids, new winners, audit entries), the
 *    input positions reached and the output offsets acknowledged go to the
 *    store in ONE WriteBatch, once every record of the epoch and of every
 *    earlier epoch is acknowledged by the output.  Until then the epoch's
 *    ids and winners live in an in-memory pending map that later records
 *    are checked against first.
 *  - aagw is the only writer of the unified topic, and every record it
 *    writes carries its provenance (global id, origin, hlc) and its input
 *    coordinates at S (<prefix>in = TOPIC:PARTITION:OFFSET).
 *  - On start, before any input is read, each output partition is read
 *    from the stored output position to its end.  What is found there was
 *    delivered by a previous run whose epoch never committed: its id (or
 *    version) is folded into the store, with its audit entry, and its
 *    input coordinates are remembered so that re-reading that input record
 *    is recognised as a replay rather than a duplicate.
 *  - Inputs then resume from the stored input positions.  Every record
 *    after them is either found (folded) or decided afresh; nothing is
 *    written twice and nothing is lost.
 */
#include "gateway_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "aagw_dedup.h"
#include "aagw_replicator.h"

#define MAX_TOPICS      1024
#define MAX_INPUTS      8  /* inputs per logical topic: T + copies */
#define EPOCHS          8  /* decided but not yet committed batches */
#define BATCH_MAX       4096
#define WAKE_INTERVAL_MS 20 /* aagw_fetch_waker_poke(), at most */
#define ADMIN_TIMEOUT_MS 3000
#define SCAN_TIMEOUT_MS 60000
/* How long the start-up scan waits for an output partition to answer
 * (see output_wait()) before the stage fails. */
#define OUTPUT_WAIT_MS 120000
/* ... and how long its end offsets must then stay put (output_settle()). */
#define OUTPUT_SETTLE_MS 2000
#define REPLAY_MAX      (1 << 20) /* input coordinates found at start */

enum { MODE_DEDUP = 1, MODE_LWW = 2 };

/* ------------------------------------------------------------ KEY MAP --- */

/* Open addressing over 16-byte hashes (already uniform: XXH3-128), linear
 * probing, backward-shift deletion.  Value: the epoch that set it and an
 * optional owned pointer (an lww winner). */
struct kent {
        uint8_t  key[16];
        uint64_t epoch; /* 0: empty slot */
        void    *val;
};

struct kmap {
        struct kent *e;
        size_t       cap, cnt; /* cap: power of two */
};

static size_t kmap_home(const struct kmap *m, const uint8_t *k) {
        uint64_t h;
        memcpy(&h, k, 8);
        return (size_t)h & (m->cap - 1);
}

static struct kent *kmap_find(struct kmap *m, const uint8_t *k) {
        if (!m->cnt)
                return NULL;
        for (size_t i = kmap_home(m, k);; i = (i + 1) & (m->cap - 1)) {
                if (!m->e[i].epoch)
                        return NULL;
                if (!memcmp(m->e[i].key, k, 16))
                        return &m->e[i];
        }
}

/* Bring the home slot of 'k' towards the cache: a map of pending keys
 * is larger than L2 and every key lands somewhere random in it, so each
 * probe would otherwise wait for memory.  Issued a while before the
 * probe (see process() and commit_ready()). */
static void kmap_prefetch(const struct kmap *m, const uint8_t *k) {
        if (m->cap)
                __builtin_prefetch(&m->e[kmap_home(m, k)]);
}

static int kmap_grow(struct kmap *m) {
        size_t       ncap = m->cap ? m->cap * 2 : 4096;
        struct kent *ne   = calloc(ncap, sizeof(*ne));
        if (!ne)
                return -1;
        struct kmap nm = {ne, ncap, 0};
        for (size_t i = 0; i < m->cap; i++) {
                if (!m->e[i].epoch)
                        continue;
                size_t j = kmap_home(&nm, m->e[i].key);
                while (ne[j].epoch)
                        j = (j + 1) & (ncap - 1);
                ne[j] = m->e[i];
                nm.cnt++;
        }
        free(m->e);
        *m = nm;
        return 0;
}

/* Insert or find: returns the entry for 'k' (epoch 0 if new). */
static struct kent *kmap_put(struct kmap *m, const uint8_t *k) {
        if ((m->cnt + 1) * 2 > m->cap && kmap_grow(m))
                return NULL;
        size_t i = kmap_home(m, k);
        for (; m->e[i].epoch; i = (i + 1) & (m->cap - 1))
                if (!memcmp(m->e[i].key, k, 16))
                        return &m->e[i];
        memcpy(m->e[i].key, k, 16);
        m->e[i].val = NULL;
        m->cnt++;
        return &m->e[i];
}

static void kmap_del(struct kmap *m, struct kent *ent) {
        size_t i = (size_t)(ent - m->e);
        free(m->e[i].val);
        m->e[i].epoch = 0;
        m->e[i].val   = NULL;
        m->cnt--;
        /* Backward shift: pull later members of the probe run into the
         * hole when their home is not between the hole and them. */
        for (size_t j = (i + 1) & (m->cap - 1); m->e[j].epoch;
             j = (j + 1) & (m->cap - 1)) {
                size_t h = kmap_home(m, m->e[j].key);
                bool   move = i <= j ? (h <= i || h > j) : (h <= i && h > j);
                if (move) {
                        m->e[i]       = m->e[j];
                        m->e[j].epoch = 0;
                        m->e[j].val   = NULL;
                        i             = j;
                }
        }
}

static void kmap_free(struct kmap *m) {
        for (size_t i = 0; i < m->cap; i++)
                free(m->e[i].val);
        free(m->e);
        memset(m, 0, sizeof(*m));
}

/* -------------------------------------------------------------- TYPES --- */

struct uinput {
        char     topic[AAGW_TOPIC_MAX + 1];
        int32_t  nparts;
        int64_t *next;     /* next offset to take in, -1: from stored/start */
        bool    *dirty;    /* moved since the last sealed epoch */
        bool     seen;     /* in the last discovery */
};

struct utopic {
        char                  name[AAGW_TOPIC_MAX + 1]; /* logical T */
        char                  out[AAGW_TOPIC_MAX + 1];
        char                  scope[AAGW_ALIAS_MAX + AAGW_TOPIC_MAX + 2];
        int                   mode;
        const aagw_id_rule_t *id_rule;   /* borrowed; NULL: derived */
        aagw_id_rule_t       *ekey_rule; /* owned; NULL: the record key */
        rd_kafka_topic_t     *out_rkt;
        int32_t               out_parts;
        int64_t              *out_max[EPOCHS]; /* per partition, -1: none */
        bool                  ready;           /* output recovered */
        bool                  inputs_full_logged;
        struct uinput        *in[MAX_INPUTS];
        size_t                nin;
        _Atomic uint64_t      accepted, dropped, superseded, identical,
            rejected, records_out;
};

struct epoch {
        uint64_t            seq; /* 0: slot free */
        bool                sealed;
        int64_t             outstanding;
        aagw_store_batch_t *b;
        uint8_t            (*keys)[16]; /* pending map keys it set */
        size_t              nkeys, kcap;
        struct kmap        *kmap; /* which map the keys are in */
        uint8_t            *kmode; /* per key: MODE_DEDUP / MODE_LWW */
};

struct token {
        rd_kafka_message_t *src;
        struct utopic      *ut;
        unsigned            slot;
};

/* Per-record scratch of one consumed batch. */
struct item {
        rd_kafka_message_t *m;
        struct utopic      *ut;
        struct uinput      *ui;
        int                 state; /* 0 decide, 1 skip (not ours / replay) */
        bool                lookup; /* asked the store */
        bool                probe;  /* check the pending map first */
        bool                own_hdrs; /* carries headers under our prefix */
        size_t              li;     /* index in the lookup arrays */
        uint8_t             key[16]; /* id hash (dedup), ekey hash (lww) */
        size_t              ekey_len;
        const void         *ekey;
        struct aagw_verdict *v;
};

struct gw_unify {
        struct gw_unify_conf conf;
        char                 site[AAGW_ALIAS_MAX + 1];
        char                 scope_in[AAGW_ALIAS_MAX + 16];
        char                 scope_out[AAGW_ALIAS_MAX + 16];
        char                 in_hdr[AAGW_AFFIX_MAX + 8];
        char                 prov_hdr[AAGW_AFFIX_MAX + 8];
        rd_kafka_t          *consumer, *producer, *reader, *admin;
        rd_kafka_queue_t    *cq;
        pthread_t            thread;
        bool                 thread_started;
        atomic_bool          stop;
        _Atomic int          state;
        pthread_mutex_t      lock;
        char                 error[512];
        bool                 admin_unsupported;
        int64_t              last_refresh_ms;

        struct utopic *topics[MAX_TOPICS];
        size_t         ntopics;

        struct epoch epochs[EPOCHS];
        uint64_t     next_seq;  /* seq of the open epoch */
        unsigned     open_slot; /* its slot */
        unsigned     oldest;    /* slot of the oldest uncommitted epoch */

        struct kmap  pend_ids;  /* dedup: ids decided, not committed */
        struct kmap  pend_lww;  /* lww: winners decided, not committed */
        struct kmap  replay;    /* input coordinates found in the output */

        struct aagw_pool tokens;

        /* batch scratch */
        struct item         *items;
        struct aagw_verdict *verdicts;
        uint8_t            (*lk_ids)[16];
        uint8_t            (*lk_lww)[16];
        bool                *found_ids, *found_lww;
        struct aagw_lww     *lww_out;
        struct aagw_header  *hdrs;
        size_t               hdr_cap;

        _Atomic uint64_t records_in, records_out, recovered, replayed,
            commits, accepted, dropped, superseded, identical, rejected,
            fetch_wakeups, fetch_restarts;
        _Atomic int64_t  inflight, lag;
        _Atomic int32_t  ntopics_pub, ninputs_pub;
        int64_t          last_lag_ms;
        aagw_fetch_waker_t *waker;
        int64_t          now_batch;  /* wall clock, read once per batch */
        bool             audit_accepted; /* dedup: log deliveries too */
        bool             topics_full_logged;
        rd_kafka_topic_t *last_rkt;  /* input of the previous record */
        struct utopic    *last_ut;
        struct uinput    *last_ui;
};

#define RELAXED memory_order_relaxed
/* Counters have one writer, the unify thread (delivery reports run in
 * its rd_kafka_poll()). */
#define ADD(x, n) AAGW_STAT_ADD(x, n)
#define INC(x) ADD(x, 1)

/* Copy the string 'src' into 'dst' (size bytes), truncating: snprintf
 * without the format parsing, on the per-record path. */
static void copy_str(char *dst, size_t size, const char *src) {
        size_t n = strnlen(src, size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

static void ufail(gw_unify_t *u, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ufail(gw_unify_t *u, const char *fmt, ...) {
        va_list ap;
        char    msg[512];
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&u->lock);
        if (!u->error[0])
                snprintf(u->error, sizeof(u->error), "%s", msg);
        pthread_mutex_unlock(&u->lock);
        if (atomic_exchange(&u->state, AAGW_FLOW_FAILED) != AAGW_FLOW_FAILED)
                aagw_log(AAGW_LOG_ERROR, "UNIFY", "unify@%s failed: %s",
                         u->site, msg);
        atomic_store(&u->stop, true);
}

static struct token *token_get(gw_unify_t *u) {
        struct token *t = aagw_pool_get(&u->tokens);
        if (t)
                memset(t, 0, sizeof(*t));
        return t;
}

static void token_put(gw_unify_t *u, struct token *t) {
        if (t->src)
                rd_kafka_message_destroy(t->src);
        t->src = NULL;
        aagw_pool_put(&u->tokens, t);
}

/* ------------------------------------------------------------- EPOCHS --- */

static int epoch_key(struct epoch *ep, const uint8_t *k, uint8_t mode) {
        if (ep->nkeys == ep->kcap) {
                size_t   nc = ep->kcap ? ep->kcap * 2 : 1024;
                uint8_t(*nk)[16] = realloc(ep->keys, nc * sizeof(*nk));
                uint8_t *nm      = nk ? realloc(ep->kmode, nc) : NULL;
                if (!nk || !nm) {
                        if (nk)
                                ep->keys = nk;
                        return -1;
                }
                ep->keys  = nk;
                ep->kmode = nm;
                ep->kcap  = nc;
        }
        memcpy(ep->keys[ep->nkeys], k, 16);
        ep->kmode[ep->nkeys++] = mode;
        return 0;
}

static struct epoch *open_epoch(gw_unify_t *u) {
        return &u->epochs[u->open_slot];
}

/* Delivery report: the unify thread, inside rd_kafka_poll(producer). */
static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        gw_unify_t   *u   = opaque;
        struct token *tok = m->_private;
        (void)rk;

        if (!tok)
                return;
        struct epoch *ep = &u->epochs[tok->slot];
        ADD(u->inflight, -1);
        if (m->err) {
                /* Purged at a stop, or permanent (retriable errors never
                 * end here: unlimited delivery timeout).  The epoch never
                 * commits: a restart decides these records again. */
                if (m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        ufail(u, "delivery to %s [%d] failed: %s",
                              tok->ut->out, (int)m->partition,
                              rd_kafka_err2str(m->err));
                ep->outstanding = INT64_MAX / 2; /* never commits */
                token_put(u, tok);
                return;
        }
        ep->outstanding--;
        int64_t *mx = &tok->ut->out_max[tok->slot][m->partition];
        if (m->offset > *mx)
                *mx = m->offset;
        INC(u->records_out);
        INC(tok->ut->records_out);
        token_put(u, tok);
}

/* Commit the oldest epochs whose records are all acknowledged, in order. */
static void commit_ready(gw_unify_t *u) {
        char err[512];

        for (;;) {
                struct epoch *ep = &u->epochs[u->oldest];
                if (!ep->seq || !ep->sealed || ep->outstanding > 0)
                        return;
                for (size_t t = 0; t < u->ntopics; t++) {
                        struct utopic *ut = u->topics[t];
                        int64_t       *mx = ut->out_max[u->oldest];
                        for (int32_t p = 0; mx && p < ut->out_parts; p++) {
                                if (mx[p] < 0)
                                        continue;
                                struct aagw_pos pos = {mx[p] + 1, -1};
                                aagw_store_batch_pos(ep->b, u->scope_out,
                                                     ut->out, p, &pos);
                                mx[p] = -1;
                        }
                }
                if (aagw_store_batch_size(ep->b) &&
                    aagw_store_batch_commit(ep->b, err, sizeof(err))) {
                        ufail(u, "storing the unify state: %s", err);
                        return;
                }
                INC(u->commits);
                for (size_t i = 0; i < ep->nkeys; i++) {
                        struct kmap *km = ep->kmode[i] == MODE_LWW
                                              ? &u->pend_lww
                                              : &u->pend_ids;
                        if (i + 8 < ep->nkeys)
                                kmap_prefetch(ep->kmode[i + 8] == MODE_LWW
                                                  ? &u->pend_lww
                                                  : &u->pend_ids,
                                              ep->keys[i + 8]);
                        struct kent *e = kmap_find(km, ep->keys[i]);
                        if (e && e->epoch == ep->seq)
                                kmap_del(km, e);
                }
                ep->nkeys       = 0;
                ep->seq         = 0;
                ep->sealed      = false;
                ep->outstanding = 0;
                u->oldest       = (u->oldest + 1) % EPOCHS;
        }
}

/* Seal the open epoch (positions of the inputs it moved) and open the
 * next slot, waiting for it to commit if all are busy. */
static int seal_epoch(gw_unify_t *u) {
        struct epoch *ep = open_epoch(u);

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                if (!ui->dirty[p])
                                        continue;
                                struct aagw_pos pos = {ui->next[p], -1};
                                aagw_store_batch_pos(ep->b, u->scope_in,
                                                     ui->topic, p, &pos);
                                ui->dirty[p] = false;
                        }
                }
        }
        if (!aagw_store_batch_size(ep->b) && !ep->outstanding &&
            !ep->nkeys)
                return 0; /* nothing happened: keep it open */
        ep->sealed   = true;
        unsigned nxt = (u->open_slot + 1) % EPOCHS;
        while (u->epochs[nxt].seq && !atomic_load(&u->stop)) {
                rd_kafka_poll(u->producer, 5);
                commit_ready(u);
        }
        if (u->epochs[nxt].seq)
                return -1;
        u->open_slot              = nxt;
        u->epochs[nxt].seq        = ++u->next_seq;
        u->epochs[nxt].sealed     = false;
        u->epochs[nxt].outstanding = 0;
        commit_ready(u);
        return 0;
}

/* ---------------------------------------------------------- DISCOVERY --- */

static int create_output(gw_unify_t *u, const char *topic, int partitions) {
        char err[512];
        if (u->admin_unsupported)
                return -2;
        int rc = aagw_kafka_topic_create(u->admin, topic, partitions,
                                         ADMIN_TIMEOUT_MS, err, sizeof(err));
        if (rc == 0)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: created %s with %d partitions", u->site,
                         topic, partitions);
        else if (rc == -2) {
                u->admin_unsupported = true;
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: cluster does not create topics through "
                         "the Admin API (%s); relying on broker "
                         "auto-creation",
                         u->site, err);
        } else
                aagw_log(AAGW_LOG_WARN, "UNIFY", "unify@%s: creating %s: %s",
                         u->site, topic, err);
        return rc;
}

/* Partition count of 'topic' in 'md', -1 if absent. */
static int md_parts(const struct rd_kafka_metadata *md, const char *topic) {
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, topic))
                        return md->topics[i].err ? -1
                                                 : md->topics[i].partition_cnt;
        return -1;
}

/* Make sure the output of 'ut' exists; returns its partition count, or
 * -1 (retry at the next discovery). */
static int ensure_output(gw_unify_t *u, struct utopic *ut, int want,
                         const struct rd_kafka_metadata *md) {
        int have = md_parts(md, ut->out);
        if (have > 0)
                return have;
        if (create_output(u, ut->out, want) == 0)
                return want;
        /* Auto-creation: ask the producer for this topic's metadata. */
        have = aagw_kafka_topic_autocreate(u->producer, ut->out, 5000);
        if (have > 0)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: %s auto-created with %d partitions",
                         u->site, ut->out, have);
        return have;
}

static void replay_key(const char *topic, int32_t part, int64_t off,
                       uint8_t key[16]) {
        char   buf[AAGW_COORDS_MAX];
        size_t n = aagw_coords_format(buf, topic, part, off);
        aagw_id_key(buf, n, key);
}

/* The entity key of a record under 'ut''s rule: the record key, or a JSON
 * field.  Returns false if the record has none. */
static bool entity_key(const struct utopic *ut, const struct aagw_rec *rec,
                       const char *origin, char *buf, size_t size,
                       const void **ekey, size_t *len) {
        if (!ut->ekey_rule) {
                if (!rec->key)
                        return false;
                *ekey = rec->key;
                *len  = rec->key_len;
                return true;
        }
        if (aagw_id_extract(ut->ekey_rule, origin, rec, buf, size, len) !=
            AAGW_REASON_OK)
                return false;
        *ekey = buf;
        return true;
}

static void fill_rec(gw_unify_t *u, const rd_kafka_message_t *m,
                     const char *topic, struct aagw_rec *rec) {
        rd_kafka_timestamp_type_t tstype;
        memset(rec, 0, sizeof(*rec));
        rec->topic        = topic;
        rec->partition    = m->partition;
        rec->offset       = m->offset;
        rec->timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
        rec->key          = m->key;
        rec->key_len      = m->key_len;
        rec->value        = m->payload;
        rec->value_len    = m->len;
        rec->hdr_cnt      = aagw_kafka_headers_view(m, &u->hdrs, &u->hdr_cap);
        rec->hdrs         = u->hdrs;
}

/* Once an output partition whose leader was unreachable answers again,
 * the new leader's high watermark may lag its log for a moment: records
 * the previous run wrote reached this replica but are not yet below the
 * watermark, and a scan up to it would miss them (and deliver them
 * again).  Only this stage writes the output and it is not writing yet:
 * wait until the sum of the end offsets stays put for OUTPUT_SETTLE_MS
 * (at most 15 s). */
static void output_settle(gw_unify_t *u, struct utopic *ut) {
        int64_t now = aagw_mono_ms(), quiet = now + OUTPUT_SETTLE_MS,
                cap = now + 15000, last = -1;

        while (!atomic_load(&u->stop) && (now = aagw_mono_ms()) < quiet &&
               now < cap) {
                int64_t sum = 0, lo, hi;
                bool    ok  = true;

                for (int32_t p = 0; ok && p < ut->out_parts; p++) {
                        ok = !rd_kafka_query_watermark_offsets(
                            u->reader, ut->out, p, &lo, &hi, 5000);
                        if (ok)
                                sum += hi;
                }
                if (ok && sum != last) {
                        if (last >= 0)
                                aagw_log(AAGW_LOG_INFO, "UNIFY",
                                         "unify@%s: %s grew by %" PRId64
                                         " records after the leader change",
                                         u->site, ut->out, sum - last);
                        last  = sum;
                        quiet = aagw_mono_ms() + OUTPUT_SETTLE_MS;
                }
                struct timespec ts = {0, 250 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* Wait until every partition of the output 'ut' answers a watermark
 * query.  While a partition's leader is gone (a broker died, and the
 * controller moves leadership only once the broker's session lapses: 9 s
 * by default) the query fails with a timeout, a transport error or "not
 * leader", and the start-up scan would fail the stage (and the gateway)
 * for a fault the cluster repairs by itself.  Returns 0, or -1 if the
 * stage is stopping or failed after OUTPUT_WAIT_MS. */
static int output_wait(gw_unify_t *u, struct utopic *ut) {
        int64_t deadline = aagw_mono_ms() + OUTPUT_WAIT_MS;
        bool    logged   = false;

        for (;;) {
                rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
                int32_t             p;
                int64_t             lo, hi;

                for (p = 0; p < ut->out_parts; p++)
                        if ((err = rd_kafka_query_watermark_offsets(
                                 u->reader, ut->out, p, &lo, &hi, 5000)))
                                break;
                if (!err && logged)
                        output_settle(u, ut);
                if (!err)
                        return 0;
                if (atomic_load(&u->stop))
                        return -1;
                if (aagw_mono_ms() >= deadline) {
                        ufail(u, "reading the end of %s [%d]: %s for %d s",
                              ut->out, (int)p, rd_kafka_err2str(err),
                              OUTPUT_WAIT_MS / 1000);
                        return -1;
                }
                if (!logged)
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: reading the end of %s [%d]: %s; "
                                 "trying again for up to %d s",
                                 u->site, ut->out, (int)p,
                                 rd_kafka_err2str(err), OUTPUT_WAIT_MS / 1000);
                logged = true;
                rd_kafka_topic_t *rkt = rd_kafka_topic_new(u->reader, ut->out,
                                                           NULL);
                const struct rd_kafka_metadata *md = NULL;
                if (rkt && !rd_kafka_metadata(u->reader, 0, rkt, &md, 2000))
                        rd_kafka_metadata_destroy(md);
                if (rkt)
                        rd_kafka_topic_destroy(rkt);
                struct timespec ts = {0, 250 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* Fold one record found in the output (delivered by an earlier run whose
 * epoch did not commit) into 'b'. */
static int fold_record(gw_unify_t *u, struct utopic *ut,
                       const rd_kafka_message_t *m, aagw_store_batch_t *b) {
        struct aagw_rec   rec;
        struct aagw_prov *p = &u->verdicts[0].prov;
        const char       *inv = NULL;
        size_t            inlen = 0;
        char              in_topic[AAGW_TOPIC_MAX + 1];
        int32_t           in_part;
        int64_t           in_off;
        uint8_t           key[16];

        fill_rec(u, m, ut->out, &rec);
        for (size_t i = 0; i < rec.hdr_cnt; i++)
                if (!strcmp(rec.hdrs[i].name, u->in_hdr)) {
                        inv   = rec.hdrs[i].value;
                        inlen = rec.hdrs[i].size;
                }
        bool ok = aagw_prov_decode(u->conf.policy, rec.hdrs, rec.hdr_cnt,
                                   p) == AAGW_REASON_OK &&
                  p->path_len;
        if (ok && inv) {
                ok = aagw_coords_parse(inv, inlen, in_topic, sizeof(in_topic),
                                       &in_part, &in_off);
        } else if (ok) {
                /* No input header: the stage stamped this record's
                 * provenance itself (origin here, one hop), so its source
                 * coordinates are where the stage read it. */
                ok = p->path_len == 1 && !strcmp(p->origin, u->site);
                copy_str(in_topic, sizeof(in_topic), p->src_topic);
                in_part = p->src_partition;
                in_off  = p->src_offset;
        }
        if (!ok) {
                /* Not ours: someone else wrote into the unified topic.
                 * It is not folded (we did not deliver it). */
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s [%d] offset %" PRId64
                         " was not written by aagw (no %s header, or "
                         "no %s for a record not stamped here); ignored",
                         u->site, ut->out, (int)m->partition, m->offset,
                         u->prov_hdr, u->in_hdr);
                return 0;
        }
        int64_t now = aagw_wall_ms();
        struct aagw_audit a = {
            .time_ms = now, .verdict = AAGW_AUDIT_ACCEPTED, .site = u->site,
            .origin = p->origin, .topic = in_topic, .partition = in_part,
            .offset = in_off, .hlc = p->hlc, .id = p->id, .id_len = p->id_len};
        if (ut->mode == MODE_DEDUP) {
                struct aagw_seen s = {.time_ms = now, .hlc = p->hlc,
                                      .partition = in_part, .offset = in_off};
                snprintf(s.site, sizeof(s.site), "%s", u->site);
                snprintf(s.origin, sizeof(s.origin), "%s", p->origin);
                snprintf(s.topic, sizeof(s.topic), "%s", in_topic);
                aagw_scoped_key(u->site, p->id, p->id_len, key);
                if (aagw_store_batch_seen(b, key, &s))
                        return -1;
        } else {
                char        ebuf[AAGW_ID_MAX + 1];
                const void *ek;
                size_t      eklen;
                bool        found;
                struct aagw_lww *cur = &u->lww_out[0], nw;
                char        err[256];

                rec.topic = in_topic; /* the rule may derive from it */
                if (!entity_key(ut, &rec, p->origin, ebuf, sizeof(ebuf), &ek,
                                &eklen))
                        return 0;
                aagw_scoped_key(ut->scope, ek, eklen, key);
                memset(&nw, 0, sizeof(nw));
                nw.time_ms   = now;
                nw.tombstone = m->payload == NULL;
                nw.v.hlc     = p->hlc;
                snprintf(nw.v.origin, sizeof(nw.v.origin), "%s", p->origin);
                nw.v.id_len = p->id_len;
                memcpy(nw.v.id, p->id, p->id_len);
                /* Output records of one key are in order in one partition,
                 * and the batch may already hold an earlier one: keep the
                 * pending map as the latest word. */
                struct kent *pe = kmap_find(&u->pend_lww, key);
                if (pe && pe->val)
                        *cur = *(struct aagw_lww *)pe->val, found = true;
                else if (aagw_store_lww_lookup(u->conf.store,
                                               (const uint8_t(*)[16])key, 1,
                                               &found, cur, err, sizeof(err)))
                        return -1;
                if (!found || aagw_version_cmp(&nw.v, &cur->v) > 0) {
                        if (aagw_store_batch_lww(b, key, &nw))
                                return -1;
                        if (!(pe = kmap_put(&u->pend_lww, key)))
                                return -1;
                        if (!pe->val && !(pe->val = malloc(sizeof(nw))))
                                return -1;
                        memcpy(pe->val, &nw, sizeof(nw));
                        pe->epoch = UINT64_MAX; /* recovery: dropped below */
                }
                a.ekey     = ek;
                a.ekey_len = eklen > AAGW_AUDIT_EKEY_MAX ? AAGW_AUDIT_EKEY_MAX
                                                         : eklen;
        }
        if ((ut->mode == MODE_LWW || u->audit_accepted) &&
            aagw_store_batch_audit(b, &a))
                return -1;
        /* The replay set tells a re-read of a folded record from a true
         * duplicate (only the audit log differs: "dropped" instead of no
         * entry); past its bound the rest are treated as duplicates. */
        if (u->replay.cnt < REPLAY_MAX) {
                replay_key(in_topic, in_part, in_off, key);
                struct kent *re = kmap_put(&u->replay, key);
                if (!re)
                        return -1;
                re->epoch = 1;
        }
        INC(u->recovered);
        return 0;
}

/* The watermarks of 'topic' ['p'] through 'rk'.  A topic created moments
 * ago (ensure_output() makes the output through the Admin API on clusters
 * that do not auto-create) is not yet in the client's metadata, and
 * librdkafka answers "Unknown partition" at once: ask for the topic's
 * metadata and try again, for up to 'timeout_ms' (and while its leaders
 * are being elected, "Not leader for partition"). */
static rd_kafka_resp_err_t watermarks(rd_kafka_t *rk, const char *topic,
                                      int32_t p, int64_t *lo, int64_t *hi,
                                      int timeout_ms) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        for (;;) {
                rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
                    rk, topic, p, lo, hi, timeout_ms);
                if ((err != RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION &&
                     err != RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC &&
                     err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                     err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE &&
                     err != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION) ||
                    aagw_mono_ms() >= deadline)
                        return err;
                rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
                const struct rd_kafka_metadata *md = NULL;
                if (rkt && !rd_kafka_metadata(rk, 0, rkt, &md, 1000))
                        rd_kafka_metadata_destroy(md);
                if (rkt)
                        rd_kafka_topic_destroy(rkt);
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* Read each output partition of 'ut' from the stored position to its end
 * and fold what is there.  Returns 0, or -1 (the stage fails). */
static int recover_output(gw_unify_t *u, struct utopic *ut) {
        char                err[512];
        aagw_store_batch_t *b = aagw_store_batch_new(u->conf.store);
        int                 rc = -1;
        size_t              found = 0, found_nopos = 0;

        if (!b) {
                ufail(u, "out of memory");
                return -1;
        }
        if (output_wait(u, ut))
                goto out;
        for (int32_t p = 0; p < ut->out_parts; p++) {
                struct aagw_pos pos;
                int64_t         lo, hi, from;
                aagw_err_t      e = aagw_store_pos_get(
                    u->conf.store, u->scope_out, ut->out, p, &pos, err,
                    sizeof(err));
                if (e && e != AAGW_ERR_NOENT) {
                        ufail(u, "%s", err);
                        goto out;
                }
                rd_kafka_resp_err_t kerr =
                    watermarks(u->reader, ut->out, p, &lo, &hi, 10000);
                if (kerr) {
                        ufail(u, "reading the end of %s [%d]: %s", ut->out,
                              (int)p, rd_kafka_err2str(kerr));
                        goto out;
                }
                from = e == AAGW_ERR_NOENT ? lo : pos.next;
                if (from < lo)
                        from = lo;
                if (from >= hi) {
                        if (e == AAGW_ERR_NOENT || pos.next != hi) {
                                struct aagw_pos np = {hi, -1};
                                aagw_store_batch_pos(b, u->scope_out, ut->out,
                                                     p, &np);
                        }
                        continue;
                }
                rd_kafka_topic_partition_list_t *l =
                    rd_kafka_topic_partition_list_new(1);
                rd_kafka_topic_partition_list_add(l, ut->out, p)->offset =
                    from;
                kerr = rd_kafka_assign(u->reader, l);
                rd_kafka_topic_partition_list_destroy(l);
                if (kerr) {
                        ufail(u, "reading %s [%d]: %s", ut->out, (int)p,
                              rd_kafka_err2str(kerr));
                        goto out;
                }
                /* A deadline on progress, not on the whole scan: a long
                 * output (state dir lost) takes as long as it takes. */
                int64_t deadline = aagw_mono_ms() + SCAN_TIMEOUT_MS, at = from;
                while (at < hi) {
                        if (aagw_mono_ms() > deadline || atomic_load(&u->stop)) {
                                ufail(u,
                                      "reading %s [%d] from %" PRId64
                                      " to %" PRId64 ": no progress for %d s "
                                      "at %" PRId64,
                                      ut->out, (int)p, from, hi,
                                      SCAN_TIMEOUT_MS / 1000, at);
                                rd_kafka_assign(u->reader, NULL);
                                goto out;
                        }
                        rd_kafka_message_t *m =
                            rd_kafka_consumer_poll(u->reader, 200);
                        if (!m)
                                continue;
                        if (m->err) {
                                /* The end: offsets up to hi that are not
                                 * records (compacted away, transaction
                                 * markers) never arrive. */
                                bool eof =
                                    m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                                    m->partition == p;
                                if (!eof)
                                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                                 "unify@%s: reading %s: %s",
                                                 u->site, ut->out,
                                                 rd_kafka_message_errstr(m));
                                rd_kafka_message_destroy(m);
                                if (eof)
                                        break;
                                continue;
                        }
                        if (m->partition == p && m->offset >= at) {
                                if (fold_record(u, ut, m, b)) {
                                        rd_kafka_message_destroy(m);
                                        rd_kafka_assign(u->reader, NULL);
                                        ufail(u, "folding %s [%d] offset "
                                                 "%" PRId64 ": out of memory "
                                                 "or bad value",
                                              ut->out, (int)p, m->offset);
                                        goto out;
                                }
                                found++;
                                found_nopos += e == AAGW_ERR_NOENT;
                                at       = m->offset + 1;
                                deadline = aagw_mono_ms() + SCAN_TIMEOUT_MS;
                                /* Bounded memory on a long scan: what is
                                 * folded so far can be stored (folding is
                                 * idempotent; the output position moves
                                 * only at the end of the partition). */
                                if (aagw_store_batch_size(b) >= 65536 &&
                                    aagw_store_batch_commit(b, err,
                                                            sizeof(err))) {
                                        rd_kafka_message_destroy(m);
                                        rd_kafka_assign(u->reader, NULL);
                                        ufail(u, "storing what %s holds: %s",
                                              ut->out, err);
                                        goto out;
                                }
                        }
                        rd_kafka_message_destroy(m);
                }
                rd_kafka_assign(u->reader, NULL);
                struct aagw_pos np = {hi, -1};
                aagw_store_batch_pos(b, u->scope_out, ut->out, p, &np);
        }
        if (aagw_store_batch_size(b) &&
            aagw_store_batch_commit(b, err, sizeof(err))) {
                ufail(u, "storing what %s holds: %s", ut->out, err);
                goto out;
        }
        /* Folded winners are in the store now. */
        for (size_t i = 0; i < u->pend_lww.cap; i++)
                if (u->pend_lww.e && u->pend_lww.e[i].epoch == UINT64_MAX) {
                        kmap_del(&u->pend_lww, &u->pend_lww.e[i]);
                        i = (size_t)-1; /* deletion shifts: rescan */
                }
        /* Records in a partition the store knows nothing about: the
         * state dir is new or was lost (or emptied) while the unified
         * topic kept what earlier runs wrote.  Say so loudly: the state
         * is rebuilt from Kafka, and anything older than the topic's
         * retention is no longer known. */
        if (found_nopos)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s already holds %zu records but the "
                         "state store has no position for it: the state "
                         "dir is new or its state was lost; rebuilding the "
                         "state (ids delivered, last-write-wins winners, "
                         "input positions) from the topic, nothing is "
                         "written again",
                         u->site, ut->out, found_nopos);
        if (found > found_nopos)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: %s: %zu records written by the previous "
                         "run after its last stored state were found and "
                         "folded in; they are not written again",
                         u->site, ut->out, found - found_nopos);
        rc = 0;
out:
        aagw_store_batch_destroy(b);
        return rc;
}

static const char *topic_base(const aagw_repl_policy_t *pol,
                              const char *topic) {
        const char *t = topic, *up;
        while ((up = aagw_repl_topic_upstream(pol, t)))
                t = up;
        return t;
}

static struct utopic *utopic_get(gw_unify_t *u, const char *name, bool create) {
        for (size_t i = 0; i < u->ntopics; i++)
                if (!strcmp(u->topics[i]->name, name))
                        return u->topics[i];
        if (!create)
                return NULL;
        if (u->ntopics == MAX_TOPICS) {
                if (!u->topics_full_logged)
                        aagw_log(AAGW_LOG_ERROR, "UNIFY",
                                 "unify@%s: more than %d topics to unify; "
                                 "%s and later ones are not unified (narrow "
                                 "replication.topics or set unify.topics.T."
                                 "mode: off)",
                                 u->site, MAX_TOPICS, name);
                u->topics_full_logged = true;
                return NULL;
        }

        const aagw_config_t *cfg = u->conf.cfg;
        char                 key[AAGW_TOPIC_MAX + 64], err[256];
        const char          *mode, *ek, *out;
        snprintf(key, sizeof(key), "unify.topics.%s.mode", name);
        if (!(mode = aagw_config_str(cfg, key)))
                mode = aagw_config_str(cfg, "unify.mode");
        if (!strcmp(mode, "off"))
                return NULL;
        struct utopic *ut = calloc(1, sizeof(*ut));
        if (!ut)
                return NULL;
        snprintf(ut->name, sizeof(ut->name), "%s", name);
        aagw_unify_lww_scope(u->site, name, ut->scope, sizeof(ut->scope));
        ut->mode = !strcmp(mode, "lww") ? MODE_LWW : MODE_DEDUP;
        snprintf(key, sizeof(key), "unify.topics.%s.output", name);
        if ((out = aagw_config_str(cfg, key)))
                snprintf(ut->out, sizeof(ut->out), "%s", out);
        else if ((size_t)snprintf(ut->out, sizeof(ut->out), "%s%s", name,
                                  aagw_config_str(cfg, "unify.suffix")) >=
                 sizeof(ut->out)) {
                aagw_log(AAGW_LOG_ERROR, "UNIFY",
                         "unify@%s: %s: the unified topic name would exceed "
                         "%d bytes; set unify.topics.%s.output",
                         u->site, name, AAGW_TOPIC_MAX, name);
                free(ut);
                return NULL;
        }
        ut->id_rule = u->conf.id_rule_for
                          ? u->conf.id_rule_for(u->conf.opaque, name)
                          : NULL;
        snprintf(key, sizeof(key), "unify.topics.%s.entity_key", name);
        if (!(ek = aagw_config_str(cfg, key)))
                ek = aagw_config_str(cfg, "unify.entity_key");
        if (ek && strcmp(ek, "key") &&
            !(ut->ekey_rule = aagw_id_rule_new(ek, err, sizeof(err)))) {
                aagw_log(AAGW_LOG_ERROR, "UNIFY", "unify@%s: %s: %s", u->site,
                         key, err);
                free(ut);
                return NULL;
        }
        u->topics[u->ntopics++] = ut;
        atomic_store(&u->ntopics_pub, (int32_t)u->ntopics);
        return ut;
}

static void utopic_free(struct utopic *ut) {
        for (size_t i = 0; i < ut->nin; i++) {
                free(ut->in[i]->next);
                free(ut->in[i]->dirty);
                free(ut->in[i]);
        }
        for (int s = 0; s < EPOCHS; s++)
                free(ut->out_max[s]);
        if (ut->out_rkt)
                rd_kafka_topic_destroy(ut->out_rkt);
        aagw_id_rule_destroy(ut->ekey_rule);
        free(ut);
}

static int uinput_resize(struct uinput *ui, int32_t nparts) {
        int64_t *nn = realloc(ui->next, (size_t)nparts * sizeof(*nn));
        if (!nn)
                return -1;
        ui->next = nn;
        bool *nd = realloc(ui->dirty, (size_t)nparts * sizeof(*nd));
        if (!nd)
                return -1;
        ui->dirty = nd;
        for (int32_t p = ui->nparts; p < nparts; p++) {
                ui->next[p]  = -1;
                ui->dirty[p] = false;
        }
        ui->nparts = nparts;
        return 0;
}

/* Assign every input partition at its position: the one in memory if it
 * was read already, else the stored one, else the beginning. */
static void reassign(gw_unify_t *u) {
        u->last_rkt = NULL; /* inputs changed: forget the cached one */
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(64);
        int32_t ninputs = 0;
        char    err[256];

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        ninputs++;
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                int64_t off = ui->next[p];
                                if (off < 0) {
                                        struct aagw_pos pos;
                                        if (aagw_store_pos_get(
                                                u->conf.store, u->scope_in,
                                                ui->topic, p, &pos, err,
                                                sizeof(err)) == AAGW_OK &&
                                            pos.next >= 0)
                                                off = ui->next[p] = pos.next;
                                }
                                rd_kafka_topic_partition_list_add(l, ui->topic,
                                                                  p)
                                    ->offset =
                                    off >= 0 ? off : RD_KAFKA_OFFSET_BEGINNING;
                        }
                }
        }
        rd_kafka_resp_err_t e = rd_kafka_assign(u->consumer, l);
        if (e)
                aagw_log(AAGW_LOG_WARN, "UNIFY", "unify@%s: assign: %s",
                         u->site, rd_kafka_err2str(e));
        atomic_store(&u->ninputs_pub, ninputs);
        rd_kafka_topic_partition_list_destroy(l);
}

static void discover(gw_unify_t *u) {
        const struct rd_kafka_metadata *md = NULL;
        const aagw_repl_policy_t       *pol = u->conf.policy;
        bool                            changed = false;
        rd_kafka_resp_err_t err = rd_kafka_metadata(u->admin, 1, NULL, &md,
                                                    5000);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: metadata failed: %s", u->site,
                         rd_kafka_err2str(err));
                return;
        }
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[i];
                if (mt->err || mt->partition_cnt <= 0 ||
                    aagw_repl_topic_is_internal(pol, mt->topic))
                        continue;
                const char *base = topic_base(pol, mt->topic);
                if (!aagw_repl_topic_allowed(pol, base) ||
                    aagw_repl_topic_is_internal(pol, base) ||
                    !strcmp(base, "heartbeats"))
                        continue;
                struct utopic *ut = utopic_get(u, base, true);
                if (!ut)
                        continue;
                struct uinput *ui = NULL;
                for (size_t k = 0; k < ut->nin; k++)
                        if (!strcmp(ut->in[k]->topic, mt->topic))
                                ui = ut->in[k];
                if (!ui) {
                        if (ut->nin == MAX_INPUTS) {
                                if (ut->inputs_full_logged)
                                        continue;
                                ut->inputs_full_logged = true;
                                aagw_log(AAGW_LOG_ERROR, "UNIFY",
                                         "unify@%s: %s: more than %d inputs "
                                         "for %s; not unified",
                                         u->site, mt->topic, MAX_INPUTS,
                                         ut->out);
                                continue;
                        }
                        if (!(ui = calloc(1, sizeof(*ui))))
                                continue;
                        snprintf(ui->topic, sizeof(ui->topic), "%s",
                                 mt->topic);
                        ut->in[ut->nin++] = ui;
                        changed           = true;
                        aagw_log(AAGW_LOG_INFO, "UNIFY",
                                 "unify@%s: %s -> %s (%s)", u->site,
                                 mt->topic, ut->out,
                                 ut->mode == MODE_LWW ? "lww" : "dedup");
                }
                if (mt->partition_cnt > ui->nparts) {
                        if (uinput_resize(ui, mt->partition_cnt))
                                continue;
                        changed = true;
                }
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (ut->ready || !ut->nin)
                        continue;
                int want = 1;
                for (size_t k = 0; k < ut->nin; k++)
                        if (ut->in[k]->nparts > want)
                                want = ut->in[k]->nparts;
                int have = ensure_output(u, ut, want, md);
                if (have <= 0)
                        continue;
                ut->out_parts = have;
                for (int s = 0; s < EPOCHS; s++) {
                        ut->out_max[s] = malloc((size_t)have * sizeof(int64_t));
                        if (!ut->out_max[s]) {
                                ufail(u, "out of memory");
                                break;
                        }
                        for (int p = 0; p < have; p++)
                                ut->out_max[s][p] = -1;
                }
                if (atomic_load(&u->stop))
                        break;
                ut->out_rkt = rd_kafka_topic_new(u->producer, ut->out, NULL);
                if (recover_output(u, ut))
                        break;
                ut->ready = true;
                changed   = true;
        }
        rd_kafka_metadata_destroy(md);
        if (changed && !atomic_load(&u->stop))
                reassign(u);
}

/* Records behind the inputs' high watermarks, from the watermarks the
 * consumer's fetches cached (no request); -1 while one is unknown. */
static void update_lag(gw_unify_t *u) {
        int64_t lag = 0;
        for (size_t t = 0; t < u->ntopics && lag >= 0; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                for (size_t i = 0; i < ut->nin && lag >= 0; i++) {
                        struct uinput *ui = ut->in[i];
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                int64_t lo, hi;
                                if (rd_kafka_get_watermark_offsets(
                                        u->consumer, ui->topic, p, &lo, &hi) ||
                                    hi < 0) {
                                        lag = -1;
                                        break;
                                }
                                int64_t at = ui->next[p] >= 0 ? ui->next[p]
                                                              : lo;
                                if (at < lo)
                                        at = lo;
                                if (hi > at)
                                        lag += hi - at;
                        }
                }
        }
        atomic_store(&u->lag, lag);
}

/* ---------------------------------------------------------- DECISIONS --- */

static struct uinput *input_of(struct utopic *ut, const char *topic) {
        for (size_t k = 0; k < ut->nin; k++)
                if (!strcmp(ut->in[k]->topic, topic))
                        return ut->in[k];
        return NULL;
}

static struct utopic *topic_of(gw_unify_t *u, const char *topic,
                               struct uinput **uip) {
        const char *base = topic_base(u->conf.policy, topic);
        for (size_t i = 0; i < u->ntopics; i++)
                if (!strcmp(u->topics[i]->name, base)) {
                        *uip = input_of(u->topics[i], topic);
                        return *uip ? u->topics[i] : NULL;
                }
        return NULL;
}

static int audit_add(gw_unify_t *u, struct epoch *ep, struct item *it,
                     aagw_audit_verdict_t verdict) {
        const struct aagw_prov *p = &it->v->prov;
        struct aagw_audit       a = {
            .time_ms   = u->now_batch,
            .verdict   = verdict,
            .site      = u->site,
            .origin    = p->path_len ? p->origin : u->site,
            .topic     = it->ui->topic,
            .partition = it->m->partition,
            .offset    = it->m->offset,
            .hlc       = p->hlc,
            .id        = p->id,
            .id_len    = p->id_len,
            .ekey      = it->ekey,
            .ekey_len  = it->ekey_len > AAGW_AUDIT_EKEY_MAX
                             ? AAGW_AUDIT_EKEY_MAX
                             : it->ekey_len};
        return aagw_store_batch_audit(ep->b, &a) ? -1 : 0;
}

/* Produce an accepted record to the output.  Takes over 'it->m'. */
static int produce(gw_unify_t *u, struct epoch *ep, struct item *it) {
        rd_kafka_message_t *m  = it->m;
        struct utopic      *ut = it->ut;
        struct aagw_prov_hdrs ph;
        rd_kafka_headers_t *h = NULL;
        char                in[AAGW_COORDS_MAX];
        uint64_t            hk;

        /* Resolved (validated or stamped) in pass 1, unchanged since.
         * Not into it->v->hdrs: lww keeps the entity key there. */
        aagw_prov_encode_resolved(u->conf.policy, &it->v->prov, &ph);
        if (!rd_kafka_message_detach_headers(m, &h) && h && it->own_hdrs) {
                const char *name;
                const void *val;
                size_t      sz;
                for (size_t i = 0;
                     !rd_kafka_header_get_all(h, i, &name, &val, &sz);) {
                        if (aagw_prov_is_own_header(u->conf.policy, name)) {
                                char copy[512];
                                snprintf(copy, sizeof(copy), "%s", name);
                                rd_kafka_header_remove(h, copy);
                        } else
                                i++;
                }
        } else if (!h)
                h = rd_kafka_headers_new(2);
        for (size_t i = 0; i < ph.cnt; i++)
                rd_kafka_header_add(h, ph.hdrs[i].name, -1, ph.hdrs[i].value,
                                    (ssize_t)ph.hdrs[i].size);
        /* Where the stage read the record, for the start-up scan.  A
         * record stamped here carries it already: its provenance's source
         * coordinates are the input's (see fold_record()). */
        if (!it->v->fresh) {
                size_t n = aagw_coords_format(in, it->ui->topic, m->partition,
                                              m->offset);
                rd_kafka_header_add(h, u->in_hdr, -1, in, (ssize_t)n);
        }

        memcpy(&hk, it->key, 8);
        int32_t part = (int32_t)(hk % (uint64_t)ut->out_parts);
        struct token *tok = token_get(u);
        if (!tok) {
                rd_kafka_headers_destroy(h);
                ufail(u, "out of memory");
                return -1;
        }
        tok->src  = m;
        tok->ut   = ut;
        tok->slot = u->open_slot;
        rd_kafka_timestamp_type_t tstype;
        int64_t ts = rd_kafka_message_timestamp(m, &tstype);
        for (;;) {
                rd_kafka_resp_err_t err = rd_kafka_producev(
                    u->producer, RD_KAFKA_V_RKT(ut->out_rkt),
                    RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_MSGFLAGS(0),
                    RD_KAFKA_V_KEY(m->key, m->key_len),
                    RD_KAFKA_V_VALUE(m->payload, m->len),
                    RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                    RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE(tok),
                    RD_KAFKA_V_END);
                if (!err)
                        break;
                if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL ||
                    atomic_load(&u->stop)) {
                        rd_kafka_headers_destroy(h);
                        tok->src = NULL;
                        token_put(u, tok);
                        if (!atomic_load(&u->stop))
                                ufail(u, "produce to %s [%d]: %s", ut->out,
                                      (int)part, rd_kafka_err2str(err));
                        return -1;
                }
                rd_kafka_poll(u->producer, 10);
        }
        ep->outstanding++;
        ADD(u->inflight, 1);
        it->m = NULL; /* the token owns it now */
        return 0;
}

/* Decide and produce one consumed batch, then seal it as an epoch. */
static void process(gw_unify_t *u, rd_kafka_message_t **msgs, size_t n) {
        struct epoch *ep = open_epoch(u);
        size_t        nids = 0, nlww = 0;

        u->now_batch = aagw_wall_ms();
        char          err[512];

        /* Pass 1: provenance, ids and keys; which ones the store must
         * be asked about. */
        for (size_t i = 0; i < n; i++) {
                struct item *it = &u->items[i];
                memset(it, 0, sizeof(*it));
                it->m     = msgs[i];
                it->v     = &u->verdicts[i];
                it->state = 1;
                rd_kafka_message_t *m = msgs[i];
                if (m->err == RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT)
                        /* refused for good: see the flow's handle() */
                        ufail(u, "consume: %s: session.timeout.ms is outside "
                                 "%s's group.min/max.session.timeout.ms (set "
                                 "clusters.%s.properties.consumer."
                                 "session.timeout.ms)",
                              rd_kafka_message_errstr(m), u->site, u->site);
                if (m->err) {
                        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                                aagw_log(AAGW_LOG_WARN, "UNIFY",
                                         "unify@%s: consume: %s", u->site,
                                         rd_kafka_message_errstr(m));
                        continue;
                }
                const char *tn = rd_kafka_topic_name(m->rkt);
                if (m->rkt != u->last_rkt) {
                        u->last_ut  = topic_of(u, tn, &u->last_ui);
                        u->last_rkt = m->rkt;
                }
                it->ut = u->last_ut;
                it->ui = u->last_ui;
                if (!it->ut || m->partition >= it->ui->nparts)
                        continue;
                if (it->ui->next[m->partition] >= 0 &&
                    m->offset < it->ui->next[m->partition])
                        continue; /* re-fetched after a reassign */
                it->ui->next[m->partition]  = m->offset + 1;
                it->ui->dirty[m->partition] = true;
                INC(u->records_in);
                if (u->replay.cnt) {
                        uint8_t      rk[16];
                        struct kent *re;
                        replay_key(tn, m->partition, m->offset, rk);
                        if ((re = kmap_find(&u->replay, rk))) {
                                /* Delivered by the previous run and
                                 * folded in at the start. */
                                kmap_del(&u->replay, re);
                                INC(u->replayed);
                                continue;
                        }
                }
                struct aagw_rec rec;
                fill_rec(u, m, tn, &rec);
                for (size_t h = 0; h < rec.hdr_cnt && !it->own_hdrs; h++)
                        it->own_hdrs = aagw_prov_is_own_header(
                            u->conf.policy, rec.hdrs[h].name);
                if (aagw_prov_resolve(u->conf.policy, u->site, &rec,
                                      it->ut->id_rule, u->conf.verdict_flags,
                                      it->v)) {
                        ufail(u, "%s [%d] offset %" PRId64
                                 ": cannot resolve provenance",
                              tn, (int)m->partition, m->offset);
                        return;
                }
                it->state = 0;
                if (it->v->kind != AAGW_VERDICT_REPLICATE)
                        continue; /* rejected: decided in pass 2 */
                if (it->ut->mode == MODE_DEDUP) {
                        aagw_scoped_key(u->site, it->v->prov.id,
                                        it->v->prov.id_len, it->key);
                        kmap_prefetch(&u->pend_ids, it->key);
                        it->probe = true;
                } else {
                        /* The key bytes must outlive this pass: a JSON
                         * field is copied into the verdict's scratch. */
                        char *buf = (char *)it->v->hdrs.buf;
                        if (!entity_key(it->ut, &rec, it->v->prov.origin, buf,
                                        sizeof(it->v->hdrs.buf), &it->ekey,
                                        &it->ekey_len)) {
                                it->ekey = NULL;
                                continue;
                        }
                        aagw_scoped_key(it->ut->scope, it->ekey,
                                        it->ekey_len, it->key);
                        kmap_prefetch(&u->pend_lww, it->key);
                        it->probe = true;
                }
        }
        /* Pass 1b: keys decided in a pending epoch need no lookup (the
         * probes come a whole pass after their prefetch). */
        for (size_t i = 0; i < n; i++) {
                struct item *it = &u->items[i];
                if (!it->probe)
                        continue;
                if (it->ut->mode == MODE_DEDUP) {
                        if (kmap_find(&u->pend_ids, it->key))
                                continue;
                        it->lookup = true;
                        it->li     = nids;
                        memcpy(u->lk_ids[nids++], it->key, 16);
                } else {
                        if (kmap_find(&u->pend_lww, it->key))
                                continue;
                        it->lookup = true;
                        it->li     = nlww;
                        memcpy(u->lk_lww[nlww++], it->key, 16);
                }
        }
        if (nids && aagw_store_seen_lookup(u->conf.store,
                                           (const uint8_t(*)[16])u->lk_ids,
                                           nids, u->found_ids, NULL, err,
                                           sizeof(err))) {
                ufail(u, "looking up ids: %s", err);
                return;
        }
        if (nlww && aagw_store_lww_lookup(u->conf.store,
                                          (const uint8_t(*)[16])u->lk_lww,
                                          nlww, u->found_lww, u->lww_out, err,
                                          sizeof(err))) {
                ufail(u, "looking up winners: %s", err);
                return;
        }

        /* Pass 2, in order: the decisions. */
        for (size_t i = 0; i < n && !atomic_load(&u->stop); i++) {
                struct item   *it = &u->items[i];
                struct utopic *ut = it->ut;
                if (i + 8 < n && it[8].probe)
                        kmap_prefetch(it[8].ut->mode == MODE_DEDUP
                                          ? &u->pend_ids
                                          : &u->pend_lww,
                                      it[8].key);
                if (it->state)
                        continue;
                if (it->v->kind != AAGW_VERDICT_REPLICATE ||
                    (ut->mode == MODE_LWW && !it->ekey)) {
                        if (it->v->kind != AAGW_VERDICT_REPLICATE &&
                            it->v->action == AAGW_BAD_FAIL) {
                                ufail(u, "%s [%d] offset %" PRId64
                                         ": bad provenance (%s) and "
                                         "bad_provenance is fail",
                                      it->ui->topic, (int)it->m->partition,
                                      it->m->offset,
                                      aagw_reason_name(it->v->reason
                                                           ? it->v->reason
                                                           : it->v->id_reason));
                                return;
                        }
                        /* A rejected record keeps the derived id for the
                         * audit log; the replicator dead-letters it. */
                        struct aagw_prov *p = &it->v->prov;
                        p->path_len = 0;
                        p->id_len   = aagw_id_derive(
                            u->site, it->ui->topic, it->m->partition,
                            it->m->offset, p->id, sizeof(p->id));
                        if (p->id_len >= sizeof(p->id))
                                p->id_len = sizeof(p->id) - 1;
                        p->hlc = 0;
                        INC(u->rejected);
                        INC(ut->rejected);
                        if (audit_add(u, ep, it, AAGW_AUDIT_REJECTED))
                                goto oom;
                        continue;
                }
                if (ut->mode == MODE_DEDUP) {
                        bool dup = it->lookup ? u->found_ids[it->li] : true;
                        if (!dup && kmap_find(&u->pend_ids, it->key))
                                dup = true; /* earlier in this batch */
                        if (dup) {
                                INC(u->dropped);
                                INC(ut->dropped);
                                if (audit_add(u, ep, it, AAGW_AUDIT_DROPPED))
                                        goto oom;
                                continue;
                        }
                        const struct aagw_prov *p = &it->v->prov;
                        struct aagw_seen s = {
                            .time_ms = u->now_batch, .hlc = p->hlc,
                            .partition = it->m->partition,
                            .offset = it->m->offset};
                        copy_str(s.site, sizeof(s.site), u->site);
                        copy_str(s.origin, sizeof(s.origin), p->origin);
                        copy_str(s.topic, sizeof(s.topic), it->ui->topic);
                        struct kent *pe = kmap_put(&u->pend_ids, it->key);
                        /* The seen entry records the delivery (where,
                         * when, from which input): an audit entry too
                         * only if asked for (unify.audit_accepted). */
                        if (!pe || epoch_key(ep, it->key, MODE_DEDUP) ||
                            aagw_store_batch_seen(ep->b, it->key, &s) ||
                            (u->audit_accepted &&
                             audit_add(u, ep, it, AAGW_AUDIT_ACCEPTED)))
                                goto oom;
                        pe->epoch = ep->seq;
                } else {
                        const struct aagw_prov *p = &it->v->prov;
                        struct aagw_lww        *cur = NULL, nw;
                        struct kent            *pe =
                            kmap_find(&u->pend_lww, it->key);
                        if (pe)
                                cur = pe->val;
                        else if (it->lookup && u->found_lww[it->li])
                                cur = &u->lww_out[it->li];
                        memset(&nw.v, 0, offsetof(struct aagw_version, id));
                        nw.time_ms   = u->now_batch;
                        nw.tombstone = it->m->payload == NULL;
                        nw.v.hlc     = p->hlc;
                        copy_str(nw.v.origin, sizeof(nw.v.origin),
                                 p->origin);
                        nw.v.id_len = p->id_len;
                        memcpy(nw.v.id, p->id, p->id_len);
                        nw.v.id[p->id_len] = '\0';
                        int c = cur ? aagw_version_cmp(&nw.v, &cur->v) : 1;
                        if (c <= 0) {
                                aagw_audit_verdict_t av =
                                    c < 0 ? AAGW_AUDIT_SUPERSEDED
                                          : AAGW_AUDIT_IDENTICAL;
                                if (c < 0) {
                                        INC(u->superseded);
                                        INC(ut->superseded);
                                } else {
                                        INC(u->identical);
                                        INC(ut->identical);
                                }
                                if (audit_add(u, ep, it, av))
                                        goto oom;
                                continue;
                        }
                        if (!pe && !(pe = kmap_put(&u->pend_lww, it->key)))
                                goto oom;
                        if (!pe->val && !(pe->val = malloc(sizeof(nw))))
                                goto oom;
                        memcpy(pe->val, &nw, sizeof(nw));
                        pe->epoch = ep->seq;
                        if (epoch_key(ep, it->key, MODE_LWW) ||
                            aagw_store_batch_lww(ep->b, it->key, &nw) ||
                            audit_add(u, ep, it, AAGW_AUDIT_ACCEPTED))
                                goto oom;
                }
                INC(u->accepted);
                INC(ut->accepted);
                if (produce(u, ep, it))
                        return;
        }
        if (seal_epoch(u) && !atomic_load(&u->stop))
                ufail(u, "cannot open a new epoch");
        return;
oom:
        ufail(u, "out of memory (or a value the store refuses)");
}

/* -------------------------------------------------------------- THREAD --- */

/* Inputs whose fetcher librdkafka left idle (the waker's stall
 * detection, found after a leader change): a new assignment at the
 * stage's own positions, on the refreshed metadata, starts them again.
 * Only looked at with the queue empty, so the stage's own backlog is
 * never taken for a stall. */
static void restart_stalled(gw_unify_t *u, int64_t now) {
        struct aagw_stall_report r[16];
        char                     who[AAGW_ALIAS_MAX + 8];
        size_t n = aagw_fetch_waker_stalled(u->waker, now, r, 16);

        if (!n)
                return;
        snprintf(who, sizeof(who), "unify@%s", u->site);
        aagw_fetch_stalls_note(u->consumer, who, r, n);
        rd_kafka_assign(u->consumer, NULL);
        reassign(u);
        INC(u->fetch_restarts);
}

static void *unify_main(void *arg) {
        gw_unify_t          *u = arg;
        rd_kafka_message_t **msgs = calloc(BATCH_MAX, sizeof(*msgs));
        int                  refresh_ms = u->conf.refresh_ms > 0
                                              ? u->conf.refresh_ms
                                              : 5000;

        if (!msgs) {
                ufail(u, "out of memory");
                return NULL;
        }
        /* Woken by records at the consumer and by delivery reports
         * (aagw_qwait(), replicator/kconf.c). */
        rd_kafka_queue_t *pq    = rd_kafka_queue_get_main(u->producer);
        rd_kafka_queue_t *qs[2] = {u->cq, pq};
        aagw_qwait_t     *qwait = aagw_qwait_new(qs, 2);
        int64_t           last_poke_ms = 0;

        u->epochs[u->open_slot].seq = ++u->next_seq;
        discover(u);
        u->last_refresh_ms = aagw_mono_ms();
        if (atomic_load(&u->state) == AAGW_FLOW_STARTING)
                atomic_store(&u->state, AAGW_FLOW_RUNNING);
        while (!atomic_load(&u->stop)) {
                if (aagw_mono_ms() - u->last_refresh_ms >= refresh_ms) {
                        discover(u);
                        u->last_refresh_ms = aagw_mono_ms();
                }
                /* What the queue holds, without waiting (waiting for a
                 * full batch holds a record for the whole timeout under
                 * light traffic); under load the batches fill by
                 * themselves. */
                ssize_t n =
                    rd_kafka_consume_batch_queue(u->cq, 0, msgs, BATCH_MAX);
                if (n > 0) {
                        process(u, msgs, (size_t)n);
                        for (ssize_t i = 0; i < n; i++)
                                if (u->items[i].m)
                                        rd_kafka_message_destroy(
                                            u->items[i].m);
                }
                rd_kafka_poll(u->producer, 0);
                commit_ready(u);
                /* Short poll, empty queue, inputs with more: librdkafka
                 * 2.0 may have parked the fetchers (see kconf.c). */
                int64_t now = aagw_mono_ms();
                /* (Looked at no more often than a wake-up may be sent:
                 * a look reads every partition.) */
                if (n < BATCH_MAX && now - last_poke_ms >= WAKE_INTERVAL_MS &&
                    !rd_kafka_queue_length(u->cq)) {
                        last_poke_ms = now;
                        if (aagw_fetch_waker_poke(u->waker, now,
                                                  WAKE_INTERVAL_MS) > 0)
                                INC(u->fetch_wakeups);
                        restart_stalled(u, now);
                }
                if (now - u->last_lag_ms >= 500) {
                        update_lag(u);
                        u->last_lag_ms = aagw_mono_ms();
                }
                /* Nothing came: wait for records or delivery reports. */
                if (n <= 0)
                        aagw_qwait(qwait, 100);
        }
        aagw_qwait_destroy(qwait);
        rd_kafka_queue_destroy(pq);
        /* Drain: what was produced is acknowledged and committed, or the
         * next start finds it in the output. */
        int64_t deadline = aagw_mono_ms() + 10000;
        seal_epoch(u);
        while (atomic_load(&u->state) != AAGW_FLOW_FAILED &&
               atomic_load(&u->inflight) > 0 && aagw_mono_ms() < deadline) {
                rd_kafka_poll(u->producer, 20);
                commit_ready(u);
        }
        if (atomic_load(&u->state) != AAGW_FLOW_FAILED) {
                rd_kafka_poll(u->producer, 0);
                commit_ready(u);
        }
        free(msgs);
        if (atomic_load(&u->state) != AAGW_FLOW_FAILED)
                atomic_store(&u->state, AAGW_FLOW_STOPPED);
        return NULL;
}

/* ---------------------------------------------------------- LIFECYCLE --- */

static rd_kafka_t *make_client(gw_unify_t *u, rd_kafka_type_t type,
                               const char *role, const char *const *extra,
                               char *errstr, size_t errstr_size) {
        char                     name[AAGW_ALIAS_MAX + 32];
        struct aagw_kafka_client c = {
            .type       = type,
            .bootstraps = u->conf.bootstraps,
            .name       = name,
            .role       = !strcmp(role, "reader") ? "consumer" : role,
            .props      = u->conf.props,
            .prop_cnt   = u->conf.prop_cnt,
            .common     = type == RD_KAFKA_CONSUMER && !strcmp(role, "consumer")
                              ? aagw_kafka_consumer_props
                              : NULL,
            .extra      = extra,
            .opaque     = u,
            .dr_msg_cb  = type == RD_KAFKA_PRODUCER && !strcmp(role, "producer")
                              ? dr_cb
                              : NULL};

        snprintf(name, sizeof(name), "unify@%s-%s", u->site, role);
        return aagw_kafka_client_new(&c, errstr, errstr_size);
}

gw_unify_t *gw_unify_new(const struct gw_unify_conf *c, char *errstr,
                         size_t errstr_size) {
        gw_unify_t *u = calloc(1, sizeof(*u));
        char        group[AAGW_ALIAS_MAX * 2 + 64], rgroup[sizeof(group) + 8];
        const char *hp = c->header_prefix ? c->header_prefix : "aagw.";

        if (!u) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        u->conf        = *c;
        u->tokens.size = sizeof(struct token);
        pthread_mutex_init(&u->lock, NULL);
        snprintf(u->site, sizeof(u->site), "%s", c->site);
        aagw_unify_pos_scope(c->site, false, u->scope_in, sizeof(u->scope_in));
        aagw_unify_pos_scope(c->site, true, u->scope_out, sizeof(u->scope_out));
        snprintf(u->in_hdr, sizeof(u->in_hdr), "%sin", hp);
        u->audit_accepted = aagw_config_bool(c->cfg, "unify.audit_accepted");
        snprintf(u->prov_hdr, sizeof(u->prov_hdr), "%sprov", hp);
        u->items    = calloc(BATCH_MAX, sizeof(*u->items));
        u->verdicts = calloc(BATCH_MAX, sizeof(*u->verdicts));
        u->lk_ids   = calloc(BATCH_MAX, sizeof(*u->lk_ids));
        u->lk_lww   = calloc(BATCH_MAX, sizeof(*u->lk_lww));
        u->found_ids = calloc(BATCH_MAX, sizeof(*u->found_ids));
        u->found_lww = calloc(BATCH_MAX, sizeof(*u->found_lww));
        u->lww_out  = calloc(BATCH_MAX, sizeof(*u->lww_out));
        if (!u->items || !u->verdicts || !u->lk_ids || !u->lk_lww ||
            !u->found_ids || !u->found_lww || !u->lww_out) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        for (int s = 0; s < EPOCHS; s++)
                if (!(u->epochs[s].b = aagw_store_batch_new(c->store))) {
                        snprintf(errstr, errstr_size, "out of memory");
                        goto fail;
                }

        snprintf(group, sizeof(group), "aagw.%s.unify.%s", c->gateway_id,
                 c->site);
        snprintf(rgroup, sizeof(rgroup), "%s.reader", group);
        const char *consumer_extra[] = {
            "group.id", group,
            "enable.auto.commit", "false",
            "enable.auto.offset.store", "false",
            "auto.offset.reset", "earliest",
            "enable.partition.eof", "false",
            NULL};
        const char *reader_extra[] = {
            "group.id", rgroup,
            "enable.auto.commit", "false",
            "enable.partition.eof", "true",
            "auto.offset.reset", "earliest",
            "fetch.wait.max.ms", "10",
            NULL};
        if (!(u->consumer = make_client(u, RD_KAFKA_CONSUMER, "consumer",
                                        consumer_extra, errstr, errstr_size)))
                goto fail;
        rd_kafka_poll_set_consumer(u->consumer);
        u->cq = rd_kafka_queue_get_consumer(u->consumer);
        if (!(u->waker = aagw_fetch_waker_new(u->consumer))) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                goto fail;
        }
        if (!(u->producer = make_client(u, RD_KAFKA_PRODUCER, "producer",
                                        aagw_kafka_producer_props, errstr,
                                        errstr_size)) ||
            !(u->reader = make_client(u, RD_KAFKA_CONSUMER, "reader",
                                      reader_extra, errstr, errstr_size)) ||
            !(u->admin = make_client(u, RD_KAFKA_PRODUCER, "admin", NULL,
                                     errstr, errstr_size)))
                goto fail;
        atomic_store(&u->state, AAGW_FLOW_STARTING);
        return u;
fail:
        gw_unify_destroy(u);
        return NULL;
}

int gw_unify_start(gw_unify_t *u, char *errstr, size_t errstr_size) {
        int err = pthread_create(&u->thread, NULL, unify_main, u);
        if (err) {
                snprintf(errstr, errstr_size, "cannot start a thread: %s",
                         strerror(err));
                return -1;
        }
        u->thread_started = true;
        return 0;
}

void gw_unify_stop(gw_unify_t *u) {
        if (u)
                atomic_store(&u->stop, true);
}

void gw_unify_destroy(gw_unify_t *u) {
        if (!u)
                return;
        atomic_store(&u->stop, true);
        if (u->thread_started)
                pthread_join(u->thread, NULL);
        aagw_fetch_waker_destroy(u->waker);
        if (u->consumer) {
                rd_kafka_consumer_close(u->consumer);
                if (u->cq)
                        rd_kafka_queue_destroy(u->cq);
                rd_kafka_destroy(u->consumer);
        }
        if (u->producer) {
                /* Unacknowledged records are not committed: a restart
                 * finds them in the output or decides them again. */
                rd_kafka_purge(u->producer, RD_KAFKA_PURGE_F_QUEUE |
                                                RD_KAFKA_PURGE_F_INFLIGHT);
                rd_kafka_poll(u->producer, 0);
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                if (u->topics[t]->out_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->out_rkt);
                        u->topics[t]->out_rkt = NULL;
                }
        }
        if (u->producer)
                rd_kafka_destroy(u->producer);
        if (u->reader) {
                rd_kafka_consumer_close(u->reader);
                rd_kafka_destroy(u->reader);
        }
        if (u->admin)
                rd_kafka_destroy(u->admin);
        for (size_t t = 0; t < u->ntopics; t++)
                utopic_free(u->topics[t]);
        for (int s = 0; s < EPOCHS; s++) {
                aagw_store_batch_destroy(u->epochs[s].b);
                free(u->epochs[s].keys);
                free(u->epochs[s].kmode);
        }
        kmap_free(&u->pend_ids);
        kmap_free(&u->pend_lww);
        kmap_free(&u->replay);
        aagw_pool_free(&u->tokens);
        free(u->items);
        free(u->verdicts);
        free(u->lk_ids);
        free(u->lk_lww);
        free(u->found_ids);
        free(u->found_lww);
        free(u->lww_out);
        free(u->hdrs);
        pthread_mutex_destroy(&u->lock);
        free(u);
}

aagw_flow_state_t gw_unify_state(const gw_unify_t *u) {
        return (aagw_flow_state_t)atomic_load(&((gw_unify_t *)u)->state);
}

const char *gw_unify_site(const gw_unify_t *u) {
        return u->site;
}

void gw_unify_error(const gw_unify_t *uc, char *buf, size_t size) {
        gw_unify_t *u = (gw_unify_t *)uc;
        pthread_mutex_lock(&u->lock);
        snprintf(buf, size, "%s", u->error);
        pthread_mutex_unlock(&u->lock);
}

void gw_unify_stats(const gw_unify_t *uc, struct gw_unify_stats *st) {
        gw_unify_t *u = (gw_unify_t *)uc;
        memset(st, 0, sizeof(*st));
#define LD(x) atomic_load_explicit(&u->x, RELAXED)
        st->records_in  = LD(records_in);
        st->records_out = LD(records_out);
        st->accepted    = LD(accepted);
        st->dropped     = LD(dropped);
        st->superseded  = LD(superseded);
        st->identical   = LD(identical);
        st->rejected    = LD(rejected);
        st->recovered   = LD(recovered);
        st->replayed    = LD(replayed);
        st->commits     = LD(commits);
        st->fetch_wakeups = LD(fetch_wakeups);
        st->fetch_restarts = LD(fetch_restarts);
        st->inflight    = LD(inflight);
        st->lag         = LD(lag);
        st->topics      = LD(ntopics_pub);
        st->inputs      = LD(ninputs_pub);
#undef LD
}
