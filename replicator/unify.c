/*
 * replicator/unify.c: the unify stage of one site, its Kafka side.
 *
 * For every logical topic T at site S it reads T and the remote copies of
 * T held at S (east.T under the prefix policy; under identity the copies
 * share T), has each record decided (dedup: first occurrence of the global
 * id; lww: newest version per entity key) and writes the winners to
 * T<suffix> on S's cluster, partitioned by id hash (dedup) or entity key
 * hash (lww).  One thread per site.
 *
 * The decisions and the state behind them (the epochs that commit them
 * with the positions, the pending ids and winners, the fold of what a
 * previous run left in the output, the replay set) are the decider's,
 * reached through struct aagw_unify_state_ops (policy/aagw_policy.h,
 * filled by dedup/decider.c).  What this file keeps to make it exactly once
 * (docs/architecture.md, "Exactly once into the unified topic"):
 *
 *  - aagw is the only writer of the unified topic, and every record it
 *    writes carries its provenance (global id, origin, hlc) and its input
 *    coordinates at S (<prefix>in = TOPIC:PARTITION:OFFSET).
 *  - On start, before any input is read, each output partition is read
 *    from the stored output position to its end, and what is there is
 *    folded in (recover_output()).
 *  - Inputs then resume from the stored input positions.  Every record
 *    after them is either found (folded) or decided afresh; nothing is
 *    written twice and nothing is lost.
 */
#include "replicator_int.h"

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

#define MAX_TOPICS      1024
#define MAX_INPUTS      8  /* inputs per logical topic: T + copies */
#define BATCH_MAX       4096
#define LEADER_WAIT_MS 200 /* discovery interval while an input has no
                              leader */
/* The stall watch (aagw_stall_watch_look()), at most this often: a look
 * reads every input's position, and a stall takes seconds. */
#define STALL_LOOK_MS 1000
#define SCAN_TIMEOUT_MS 60000
/* How long the start-up scan waits for an output partition to answer
 * (see output_wait()) before the stage fails. */
#define OUTPUT_WAIT_MS 120000

/* -------------------------------------------------------------- TYPES --- */

struct uinput {
        char     topic[AAGW_TOPIC_MAX + 1];
        int32_t  nparts;
        int64_t *next;     /* next offset to take in, -1: from stored/start */
        bool    *dirty;    /* moved since the last sealed epoch */
        struct replicator_start *start; /* the first record after an
                                           assignment must be at 'next' */
        /* Scale-out: per (input partition i, output partition p) at
         * [i * out_parts + p], the next offset of i to decide for p
         * ('opos': as far as this process got; 'cpos': as far as its
         * last committed transaction got; -1: from the beginning).  Only
         * entries of owned p mean anything. */
        int64_t *opos, *cpos;
        int64_t *spos;     /* the standby's (scale_out.standby): from the
                              changelogs of output partitions others own */
        int32_t  opos_parts; /* input partitions they have room for */
        bool     seen;     /* in the last discovery */
        bool     led;      /* every partition had a leader at a
                              discovery: assigned from then on */
};

struct utopic {
        char                  name[AAGW_TOPIC_MAX + 1]; /* logical T */
        char                  out[AAGW_TOPIC_MAX + 1];
        char                  scope[AAGW_ALIAS_MAX + AAGW_TOPIC_MAX + 2];
        aagw_unify_mode_t     mode;
        const aagw_id_rule_t *id_rule;   /* borrowed; NULL: derived */
        aagw_id_rule_t       *ekey_rule; /* owned; NULL: the record key */
        rd_kafka_topic_t     *out_rkt;
        int32_t               out_parts;
        int                   out_id;          /* the decider's number */
        bool                  ready;           /* output recovered */
        /* Scale-out: the changelog topics (winners and positions; ids),
         * and whether the owned output partitions' state is restored
         * from them. */
        char                  state[AAGW_TOPIC_MAX + 1];
        char                  ids[AAGW_TOPIC_MAX + 1]; /* "": none (lww) */
        rd_kafka_topic_t     *state_rkt, *ids_rkt;
        bool                  restored;
        int64_t              *sb_next; /* scale_out.standby: per output
                                          partition p the next offset of
                                          its state partition [p] and ids
                                          partition [out_parts + p] the
                                          standby read, -1 none */
        int64_t              *kept_hw; /* per output partition p: the end
                                          of its state partition [p] and
                                          of its ids partition
                                          [out_parts + p] when a clean
                                          revocation took it, -1 */
        bool                  inputs_full_logged;
        struct uinput        *in[MAX_INPUTS];
        size_t                nin;
        _Atomic uint64_t      accepted, dropped, superseded, identical,
            rejected, records_out;
};

struct token {
        struct replicator_token base; /* the consumed record */
        struct utopic          *ut;
        unsigned                ep;   /* the decider's epoch */
        bool                    stub; /* the too-large record's stand-in */
        bool                    alone; /* scale-out: a suspect, sent with
                                          no other output record in flight
                                          (so_refusal()) */
};

/* Per-record scratch of one consumed batch. */
struct item {
        rd_kafka_message_t *m;
        struct utopic      *ut;
        struct uinput      *ui;
        int                 state; /* 0 decide, 1 skip (not ours / replay) */
        bool                own_hdrs; /* carries headers under our prefix */
        struct aagw_verdict *v;
};

struct aagw_unify {
        struct aagw_unify_conf conf;
        const struct aagw_unify_state_ops *ops;
        aagw_unify_state_t  *st;  /* ops' state */
        char                 site[AAGW_ALIAS_MAX + 1];
        char                 who[AAGW_ALIAS_MAX + 8]; /* "unify@SITE" */
        char                 owners_group[AAGW_TOPIC_MAX + 1]; /* scale-out */
        char                 in_hdr[AAGW_AFFIX_MAX + 8];
        char                 prov_hdr[AAGW_AFFIX_MAX + 8];
        rd_kafka_t          *consumer, *producer, *reader, *admin;
        rd_kafka_t          *end_probe; /* replicator_log_ends_at()'s */
        rd_kafka_queue_t    *cq;
        struct replicator_ctl ctl; /* state, stop, the failure */
        struct replicator_delivery delivery; /* on_delivery() */
        pthread_t            thread;
        bool                 thread_started;
        bool                 admin_unsupported;
        int64_t              last_refresh_ms;
        bool                 inputs_leaderless; /* an input waits for its
                                                   leaders: discover soon */

        struct utopic *topics[MAX_TOPICS];
        size_t         ntopics;

        struct aagw_pool tokens;

        /* batch scratch */
        struct item           *items;
        struct aagw_verdict   *verdicts;
        struct aagw_unify_rec *recs;   /* the records to decide */
        size_t                *ritem;  /* recs[i] is items[ritem[i]] */
        struct aagw_header    *hdrs;
        size_t                 hdr_cap;

        _Atomic uint64_t records_in, records_out, recovered, replayed,
            commits, accepted, dropped, superseded, identical, rejected,
            fetch_restarts, diverged, oversized,
            start_refetches;
        _Atomic int64_t  inflight, lag;
        struct aagw_reach reach; /* the site's cluster, from discover() */
        _Atomic int32_t  ntopics_pub, ninputs_pub;
        int64_t          last_lag_ms;
        aagw_stall_watch_t *stalls;
        bool             topics_full_logged;
        rd_kafka_topic_t *last_rkt;  /* input of the previous record */
        struct utopic    *last_ut;
        struct uinput    *last_ui;
        uint64_t          batch_no; /* consume batches taken (the start
                                       check) */

        /* Scale-out (conf.scale_out enabled; owner NULL otherwise): see
         * "SCALE-OUT" below. */
        bool          scale;        /* scale-out: the mode, for good */
        struct owner *owner;        /* NULL only while it is renewed */
        rd_kafka_t   *standby;      /* scale_out.standby: reads the
                                       changelogs of partitions others
                                       own (sb_poll()) */
        rd_kafka_queue_t *sbq;
        bool          sb_reassign;  /* ownership or topics changed */
        int64_t       sb_sig;       /* what sb_assign() assigned for */
        rd_kafka_t   *hw_probe;     /* read_uncommitted: the high
                                       watermark of a changelog */
        bool          need_renew;
        bool          kept_pending; /* so_revoking() noted kept_hw */
        struct changelog_ids_conf ids_conf; /* from unify.window */
        int64_t       renew_since_ms;
        int           renewals;     /* since renew_since_ms */
        rd_kafka_t   *out_producer; /* writes the output: the owner's
                                       transactional producer, or
                                       'producer' */
        int32_t       work_parts;   /* W */
        char          work[AAGW_TOPIC_MAX + 1];
        bool          txn_open, txn_poisoned, need_restore;
        int64_t       txn_started_ms, last_commit_ms, fence_seq, lost_ms;
        int64_t       txn_records; /* records produced in the open one */
        /* The records a transaction was aborted for (refused.c,
         * so_refusal()), and the stand-ins the open one holds: counted
         * (oversized) when it commits. */
        struct refused *refused;
        uint64_t        txn_stubs;
        pthread_mutex_t owned_lock; /* 'owned' for aagw_unify_owned() */
        char            owned[1024];
        _Atomic uint64_t rebalances, restores, restore_ms_total,
            restored_records, fenced, aborted, txn_commits;
        _Atomic int32_t  owned_parts;
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

/* Fail the stage closed: it stops and reports why. */
#define ufail(u, ...) replicator_fail(&(u)->ctl, __VA_ARGS__)

/* Scale-out ("SCALE-OUT" below). */
static bool   so_owns_any(const aagw_unify_t *u, const struct utopic *ut);
static int    so_state_topic(aagw_unify_t *u, struct utopic *ut,
                             const struct rd_kafka_metadata *md);
static size_t so_filter(aagw_unify_t *u, size_t nr);
static int    so_begin(aagw_unify_t *u);
static void   so_refused(aagw_unify_t *u, const char *topic, int32_t p,
                         rd_kafka_resp_err_t err);
static int    so_decided(aagw_unify_t *u, struct item *it,
                         const struct aagw_unify_rec *r, int64_t now);
static int    so_commit(aagw_unify_t *u);
static void   so_refusal(aagw_unify_t *u, struct token *tok,
                         const rd_kafka_message_t *m);
static void   so_settle(aagw_unify_t *u, int64_t until);
static bool   so_refused_keep(void *arg, struct refused_rec *r);
static rd_kafka_t *make_client(aagw_unify_t *u, rd_kafka_type_t type,
                               const char *role, const char *const *extra,
                               char *errstr, size_t errstr_size);

static struct token *token_get(aagw_unify_t *u) {
        return replicator_token_get(&u->tokens);
}

static void token_put(aagw_unify_t *u, struct token *t) {
        replicator_token_put(&u->tokens, &t->base);
}

/* ------------------------------------------------------------- EPOCHS --- */

/* The producer's own limit (message.max.bytes) or the broker's. */
static bool too_large(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
               err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

/*
 * A record whose unified copy is too large for the output (the producer's
 * message.max.bytes, or the topic's max.message.bytes) must not stop the
 * stage: it was decided like any other (its id delivered, or its version
 * the winner), so its place in the output is taken by a stand-in with the
 * same key, partition and timestamp, our headers, an empty value, and
 * <prefix>unify.oversize saying what was left out.  Counted (oversized),
 * logged at the 1st, 2nd, 4th, ... such record.  Returns the produce
 * error (0: queued, with 'tok' as its opaque).
 */
static rd_kafka_resp_err_t produce_stub(aagw_unify_t *u, struct token *tok,
                                        int32_t part,
                                        const rd_kafka_message_t *m,
                                        const rd_kafka_headers_t *src_h,
                                        rd_kafka_resp_err_t why) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(4);
        const char         *hn;
        const void         *hv;
        size_t              hs, hbytes = 0;
        char                note[AAGW_TOPIC_MAX + 256];
        char                name[AAGW_AFFIX_MAX + 32];
        rd_kafka_timestamp_type_t tstype;
        int64_t ts = rd_kafka_message_timestamp(tok->base.src, &tstype);

        for (size_t i = 0;
             src_h && !rd_kafka_header_get_all(src_h, i, &hn, &hv, &hs); i++) {
                if (aagw_prov_is_own_header(u->conf.policy, hn) &&
                    hs <= 4096)
                        rd_kafka_header_add(h, hn, -1, hv, (ssize_t)hs);
                else
                        hbytes += strlen(hn) + hs; /* left out */
        }
        snprintf(note, sizeof(note),
                 "value %zu bytes and headers %zu bytes left out: too large "
                 "for %s (%s)",
                 m->len, hbytes, tok->ut->out, rd_kafka_err2str(why));
        snprintf(name, sizeof(name), "%.*sunify.oversize",
                 (int)(strlen(u->in_hdr) - 2), u->in_hdr);
        rd_kafka_header_add(h, name, -1, note, -1);
        /* (Scale-out: counted when its transaction commits; 'tok' already
         * a stand-in is one the redo writes for a record so_refusal()
         * logged.) */
        bool     logged = tok->stub;
        uint64_t n = u->scale ? atomic_load(&u->oversized) + ++u->txn_stubs
                              : atomic_fetch_add(&u->oversized, 1) + 1;
        if (!(n & (n - 1)) && !logged)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: the unified copy of %s [%d] offset "
                         "%" PRId64 " is too large for %s (%s): written "
                         "without its value (%zu bytes) and the producer's "
                         "headers (%" PRIu64 " such records so far)",
                         u->site, rd_kafka_topic_name(tok->base.src->rkt),
                         (int)tok->base.src->partition, tok->base.src->offset,
                         tok->ut->out, rd_kafka_err2str(why), m->len, n);
        tok->stub = true;
        rd_kafka_resp_err_t err = rd_kafka_producev(
            u->out_producer, RD_KAFKA_V_RKT(tok->ut->out_rkt),
            RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_MSGFLAGS(0),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE("", 0),
            RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(h),
            RD_KAFKA_V_OPAQUE(tok), RD_KAFKA_V_END);
        if (err)
                rd_kafka_headers_destroy(h);
        return err;
}

/* Delivery report: the unify thread, inside rd_kafka_poll(producer). */
static void on_delivery(void *stage, void *t, const rd_kafka_message_t *m) {
        aagw_unify_t *u   = stage;
        struct token *tok = t;

        /* (Not in a transaction: the broker's refusal already made it
         * abortable, and the redo meets the same record again.) */
        if (too_large(m->err) && !tok->stub && !u->scale &&
            !atomic_load(&u->ctl.stop)) {
                /* The broker refused the size: the stand-in takes the
                 * same token, still in flight (same partition; records
                 * after it may already be ahead of it). */
                rd_kafka_headers_t *h = NULL;
                rd_kafka_message_headers(m, &h);
                if (!produce_stub(u, tok, m->partition, m, h, m->err))
                        return;
        }
        ADD(u->inflight, -1);
        if (u->scale && replicator_refused_for_good(m->err) &&
            !atomic_load(&u->ctl.stop))
                so_refusal(u, tok, m); /* remembered for the redo */
        if (u->scale && (m->err || m->offset < 0)) {
                /* In a transaction: whatever went wrong with a record
                 * (an implicit acknowledgement included, see below), the
                 * transaction is aborted and redone rather than trusted
                 * (so_commit()). */
                replicator_note_authz(u->site, m->err, "WRITE", "topic %s",
                                      tok->ut->out);
                if (!u->txn_poisoned && !replicator_refused_for_good(m->err) &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: delivery to %s [%d]: %s; the "
                                 "transaction is aborted and redone",
                                 u->site, tok->ut->out, (int)m->partition,
                                 m->err ? rd_kafka_err2str(m->err)
                                        : "acknowledged without an offset");
                u->txn_poisoned = true;
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                return;
        }
        if (!m->err && m->offset < 0) {
                /* Delivered without an offset: librdkafka acknowledged it
                 * implicitly (replicator_unsure_ack()).  Whether it is in
                 * the output only the output can say: the epoch never
                 * commits, and the restart's scan folds it if it is there
                 * and decides it again if not. */
                replicator_unsure_ack(&u->ctl, rd_kafka_topic_name(m->rkt),
                                      m->partition,
                                      rd_kafka_topic_name(tok->base.src->rkt),
                                      tok->base.src->partition,
                                      tok->base.src->offset);
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                return;
        }
        if (m->err) {
                /* Purged at a stop, or permanent (retriable errors never
                 * end here: unlimited delivery timeout).  The epoch never
                 * commits: a restart decides these records again. */
                replicator_note_authz(u->site, m->err, "WRITE", "topic %s",
                                      tok->ut->out);
                if (m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        ufail(u, "delivery to %s [%d] failed: %s",
                              tok->ut->out, (int)m->partition,
                              rd_kafka_err2str(m->err));
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                return;
        }
        if (tok->alone) {
                /* A suspect acknowledged alone: it was only batched with
                 * the record refused for good. */
                struct refused_rec *rr = refused_find(
                    u->refused, rd_kafka_topic_name(tok->base.src->rkt),
                    tok->base.src->partition, tok->base.src->offset);
                if (rr)
                        refused_del(u->refused, rr);
        }
        u->ops->acked(u->st, tok->ep, tok->ut->out_id, m->partition,
                      m->offset);
        INC(u->records_out);
        INC(tok->ut->records_out);
        token_put(u, tok);
}

/* Commit the oldest epochs whose records are all acknowledged, in order. */
static void commit_ready(aagw_unify_t *u) {
        char err[512];
        int  n = u->ops->commit(u->st, err, sizeof(err));

        if (n < 0)
                ufail(u, "%s", err);
        else if (n)
                ADD(u->commits, n);
}

/* Seal the open epoch (positions of the inputs it moved) and open the
 * next one, waiting for it to commit if all are busy. */
static int seal_epoch(aagw_unify_t *u) {
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                if (!ui->dirty[p])
                                        continue;
                                u->ops->reached(u->st, ui->topic, p,
                                                ui->next[p]);
                                ui->dirty[p] = false;
                        }
                }
        }
        if (!u->ops->seal(u->st))
                return 0; /* nothing happened: keep it open */
        bool opened;
        while (!(opened = u->ops->open(u->st)) && !atomic_load(&u->ctl.stop)) {
                rd_kafka_poll(u->producer, 5);
                commit_ready(u);
        }
        if (!opened)
                return -1;
        commit_ready(u);
        return 0;
}

/* ---------------------------------------------------------- DISCOVERY --- */

/* Make sure the output of 'ut' exists; returns its partition count, or
 * -1 (retry at the next discovery). */
static int ensure_output(aagw_unify_t *u, struct utopic *ut, int want,
                         const struct rd_kafka_metadata *md) {
        struct replicator_topic_maker tm = {
            .admin             = u->admin,
            .producer          = u->producer,
            .tag               = "UNIFY",
            .who               = u->who,
            .cluster           = u->site,
            .admin_unsupported = &u->admin_unsupported};
        int have = replicator_md_partitions(md, ut->out);
        return have > 0 ? have : replicator_topic_make(&tm, ut->out, want);
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

static void fill_rec(aagw_unify_t *u, const rd_kafka_message_t *m,
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

/* Wait until every partition of the output 'ut' answers a watermark
 * query.  While a partition's leader is gone (a broker died, and the
 * controller moves leadership only once the broker's session lapses: 9 s
 * by default) the query fails with a timeout, a transport error or "not
 * leader", and the start-up scan would fail the stage (and the gateway)
 * for a fault the cluster repairs by itself.  Returns 0, or -1 if the
 * stage is stopping or failed after OUTPUT_WAIT_MS. */
static int output_wait(aagw_unify_t *u, struct utopic *ut) {
        int64_t deadline = aagw_mono_ms() + OUTPUT_WAIT_MS;
        bool    logged   = false;

        for (;;) {
                rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
                int32_t             p;
                int64_t             lo, hi;

                for (p = 0; p < ut->out_parts; p++)
                        if ((err = replicator_watermarks(
                                 u->reader, ut->out, p, &lo, &hi, 5000)))
                                break;
                if (!err)
                        return 0;
                if (atomic_load(&u->ctl.stop))
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
                replicator_refresh_leaders(u->reader, ut->out, 2000);
                struct timespec ts = {0, 250 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* Decode output record 'm' of 'ut' into 'r' (prov in u->verdicts[0],
 * the input topic in 'in_topic', the entity key in 'ebuf'): what the
 * stage decided when it wrote it.  Returns 1, or 0 if aagw did not write
 * it (logged) or it has no entity key. */
static int decode_output(aagw_unify_t *u, struct utopic *ut,
                         const rd_kafka_message_t *m,
                         struct aagw_unify_rec *r, char *in_topic,
                         size_t in_size, char *ebuf, size_t ebuf_size) {
        struct aagw_rec   rec;
        struct aagw_prov *p   = &u->verdicts[0].prov;
        const char       *inv = NULL;
        size_t            inlen = 0;

        fill_rec(u, m, ut->out, &rec);
        for (size_t i = 0; i < rec.hdr_cnt; i++)
                if (!strcmp(rec.hdrs[i].name, u->in_hdr)) {
                        inv   = rec.hdrs[i].value;
                        inlen = rec.hdrs[i].size;
                }
        memset(r, 0, sizeof(*r));
        bool ok = aagw_prov_decode(u->conf.policy, rec.hdrs, rec.hdr_cnt,
                                   p) == AAGW_REASON_OK &&
                  p->path_len;
        if (ok && inv) {
                ok = aagw_coords_parse(inv, inlen, in_topic, in_size,
                                       &r->partition, &r->offset);
        } else if (ok) {
                /* No input header: the stage stamped this record's
                 * provenance itself (origin here, one hop), so its source
                 * coordinates are where the stage read it. */
                ok = p->path_len == 1 && !strcmp(p->origin, u->site);
                copy_str(in_topic, in_size, p->src_topic);
                r->partition = p->src_partition;
                r->offset    = p->src_offset;
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
        r->mode      = ut->mode;
        r->prov      = p;
        r->scope     = ut->scope;
        r->topic     = in_topic;
        r->tombstone = m->payload == NULL;
        if (ut->mode == AAGW_UNIFY_LWW) {
                rec.topic = in_topic; /* the rule may derive from it */
                if (!entity_key(ut, &rec, p->origin, ebuf, ebuf_size,
                                &r->ekey, &r->ekey_len))
                        return 0;
        }
        return 1;
}

/* Fold one record found in the output (delivered by an earlier run whose
 * epoch did not commit) in.  Returns 1 if folded, 0 if not ours (or an
 * lww record without an entity key), -1 (the stage fails). */
static int fold_record(aagw_unify_t *u, struct utopic *ut,
                       const rd_kafka_message_t *m) {
        char                  in_topic[AAGW_TOPIC_MAX + 1];
        char                  ebuf[AAGW_ID_MAX + 1], err[256];
        struct aagw_unify_rec r;

        if (!decode_output(u, ut, m, &r, in_topic, sizeof(in_topic), ebuf,
                           sizeof(ebuf)))
                return 0;
        if (u->ops->fold(u->st, &r, aagw_wall_ms(), err, sizeof(err)))
                return -1;
        INC(u->recovered);
        return 1;
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
                rd_kafka_resp_err_t err = replicator_watermarks(
                    rk, topic, p, lo, hi, timeout_ms);
                if ((err != RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION &&
                     err != RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC &&
                     err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                     err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE &&
                     err != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION) ||
                    aagw_mono_ms() >= deadline)
                        return err;
                replicator_refresh_leaders(rk, topic, 1000);
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* One output partition's start-up scan. */
struct scan {
        aagw_unify_t  *u;
        struct utopic *ut;
        bool           nopos;       /* no stored position for it */
        size_t         found, found_nopos;
        int64_t        at;          /* after the last record folded */
        bool           fold_failed; /* else the store failed */
        char           err[512];
};

static bool scan_record(void *arg, const rd_kafka_message_t *m) {
        struct scan *sc = arg;

        sc->at = m->offset;
        if (fold_record(sc->u, sc->ut, m) < 0) {
                sc->fold_failed = true;
                return false;
        }
        sc->found++;
        sc->found_nopos += sc->nopos;
        sc->at = m->offset + 1;
        return !sc->u->ops->fold_commit(sc->u->st, false, sc->err,
                                        sizeof(sc->err));
}

static void scan_error(void *arg, rd_kafka_resp_err_t err,
                       const char *reason) {
        struct scan *sc = arg;
        (void)err;
        snprintf(sc->err, sizeof(sc->err), "%s", reason);
        aagw_log(AAGW_LOG_WARN, "UNIFY", "unify@%s: reading %s: %s",
                 sc->u->site, sc->ut->out, reason);
}

/* Read each output partition of 'ut' from the stored position to its end
 * and fold what is there.  Returns 0, or -1 (the stage fails). */
static int recover_output(aagw_unify_t *u, struct utopic *ut) {
        char   err[512];
        size_t found = 0, found_nopos = 0;

        if (output_wait(u, ut))
                return -1;
        /* Requests of the killed run still held by a broker, to any
         * output partition (replicator_settle_all()). */
        size_t nends = ut->out_parts > 0 ? (size_t)ut->out_parts : 1;
        struct replicator_end *ends = calloc(nends, sizeof(*ends));
        if (!ends) {
                ufail(u, "out of memory");
                return -1;
        }
        for (int32_t p = 0; p < ut->out_parts; p++)
                ends[p] = (struct replicator_end){ut->out, p, -1};
        int sa = replicator_settle_all(u->reader, u->end_probe, ends,
                                       (size_t)ut->out_parts, OUTPUT_WAIT_MS,
                                       &u->ctl.stop, "UNIFY", u->who);
        free(ends);
        if (sa < 0)
                return -1;
        if (sa > 0) {
                ufail(u, "%s: not every partition ends at its high "
                         "watermark after %d s; writing on could deliver "
                         "records twice",
                      ut->out, OUTPUT_WAIT_MS / 1000);
                return -1;
        }
        for (int32_t p = 0; p < ut->out_parts; p++) {
                int64_t lo, hi, from, next = -1;
                int     e = u->ops->pos(u->st, true, ut->out, p, &next, err,
                                        sizeof(err));
                if (e < 0) {
                        ufail(u, "%s", err);
                        return -1;
                }
                rd_kafka_resp_err_t kerr =
                    watermarks(u->reader, ut->out, p, &lo, &hi, 10000);
                if (kerr) {
                        ufail(u, "reading the end of %s [%d]: %s", ut->out,
                              (int)p, rd_kafka_err2str(kerr));
                        return -1;
                }
                /* Records the previous run left above the watermark (a
                 * replica in the ISR did not fetch them: a broker that
                 * died and is not fenced yet, or a new leader's watermark
                 * still behind its log) would be missed by the scan and
                 * delivered again: only this stage writes here, so wait
                 * until the watermark is the log's end. */
                int s = replicator_settle_end(u->reader, u->end_probe, ut->out,
                                              p, &lo, &hi, OUTPUT_WAIT_MS,
                                              &u->ctl.stop, "UNIFY", u->who);
                if (s < 0)
                        return -1;
                if (s > 0) {
                        ufail(u, "%s [%d]: its high watermark %" PRId64
                                 " did not reach the end of its leader's "
                                 "log in %d s (a replica in the ISR not "
                                 "fetching?); writing on could deliver "
                                 "records twice",
                              ut->out, (int)p, hi, OUTPUT_WAIT_MS / 1000);
                        return -1;
                }
                from = e ? lo : next;
                if (from < lo)
                        from = lo;
                if (from >= hi) {
                        if (e || next != hi)
                                u->ops->fold_out(u->st, ut->out, p, hi);
                        continue;
                }
                /* A deadline on progress, not on the whole scan: a long
                 * output (state dir lost) takes as long as it takes. */
                struct scan sc = {.u = u, .ut = ut, .nopos = e != 0};
                struct aagw_kafka_range r = {.topic      = ut->out,
                                             .partition  = p,
                                             .from       = from,
                                             .to         = hi,
                                             .timeout_ms = SCAN_TIMEOUT_MS,
                                             .progress   = true,
                                             .stop       = &u->ctl.stop,
                                             .fn         = scan_record,
                                             .on_error   = scan_error,
                                             .arg        = &sc};
                int64_t n;
                aagw_kafka_range_end_t end =
                    aagw_kafka_read_range(u->reader, &r, &n);
                found += sc.found;
                found_nopos += sc.found_nopos;
                if (end == AAGW_RANGE_ABORTED) {
                        if (sc.fold_failed)
                                ufail(u, "folding %s [%d] offset %" PRId64
                                         ": out of memory or bad value",
                                      ut->out, (int)p, sc.at);
                        else
                                ufail(u, "storing what %s holds: %s", ut->out,
                                      sc.err);
                        return -1;
                }
                if (end == AAGW_RANGE_FAILED) {
                        ufail(u, "reading %s [%d]: %s", ut->out, (int)p,
                              sc.err);
                        return -1;
                }
                if (end != AAGW_RANGE_DONE) {
                        ufail(u,
                              "reading %s [%d] from %" PRId64 " to %" PRId64
                              ": no progress for %d s at %" PRId64,
                              ut->out, (int)p, from, hi,
                              SCAN_TIMEOUT_MS / 1000,
                              sc.at > from ? sc.at : from);
                        return -1;
                }
                u->ops->fold_out(u->st, ut->out, p, hi);
        }
        if (u->ops->fold_commit(u->st, true, err, sizeof(err))) {
                ufail(u, "storing what %s holds: %s", ut->out, err);
                return -1;
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
        return 0;
}

static const char *topic_base(const aagw_repl_policy_t *pol,
                              const char *topic) {
        const char *t = topic, *up;
        while ((up = aagw_repl_topic_upstream(pol, t)))
                t = up;
        return t;
}

static struct utopic *utopic_get(aagw_unify_t *u, const char *name, bool create) {
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

        struct aagw_unify_topic tc;
        char                    err[512];
        memset(&tc, 0, sizeof(tc));
        if (u->conf.topic_conf(u->conf.opaque, name, &tc, err, sizeof(err))) {
                aagw_log(AAGW_LOG_ERROR, "UNIFY", "unify@%s: %s", u->site,
                         err);
                return NULL;
        }
        if (tc.mode == AAGW_UNIFY_OFF)
                return NULL;
        struct utopic *ut = calloc(1, sizeof(*ut));
        if (!ut) {
                aagw_id_rule_destroy(tc.ekey_rule);
                return NULL;
        }
        snprintf(ut->name, sizeof(ut->name), "%s", name);
        u->ops->lww_scope(u->st, name, ut->scope, sizeof(ut->scope));
        ut->mode      = tc.mode;
        ut->id_rule   = tc.id_rule;
        ut->ekey_rule = tc.ekey_rule;
        ut->out_id    = -1;
        memcpy(ut->out, tc.out, sizeof(ut->out));
        u->topics[u->ntopics++] = ut;
        atomic_store(&u->ntopics_pub, (int32_t)u->ntopics);
        return ut;
}

static void utopic_free(struct utopic *ut) {
        for (size_t i = 0; i < ut->nin; i++) {
                free(ut->in[i]->next);
                free(ut->in[i]->dirty);
                free(ut->in[i]->start);
                free(ut->in[i]->opos);
                free(ut->in[i]->cpos);
                free(ut->in[i]->spos);
                free(ut->in[i]);
        }
        if (ut->out_rkt)
                rd_kafka_topic_destroy(ut->out_rkt);
        if (ut->state_rkt)
                rd_kafka_topic_destroy(ut->state_rkt);
        if (ut->ids_rkt)
                rd_kafka_topic_destroy(ut->ids_rkt);
        free(ut->kept_hw);
        free(ut->sb_next);
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
        struct replicator_start *ns =
            realloc(ui->start, (size_t)nparts * sizeof(*ns));
        if (!ns)
                return -1;
        ui->start = ns;
        for (int32_t p = ui->nparts; p < nparts; p++) {
                ui->next[p]  = -1;
                ui->dirty[p] = false;
                replicator_start_arm(&ui->start[p], -1);
        }
        ui->nparts = nparts;
        return 0;
}

/* Assign every input partition at its position: the one in memory if it
 * was read already, else the stored one, else the beginning.  Each
 * partition assigned at an offset is checked to hand over its first
 * record there (replicator_start_take(), in process()). */
static void reassign(aagw_unify_t *u) {
        u->last_rkt = NULL; /* inputs changed: forget the cached one */
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(64);
        int32_t ninputs = 0;
        char    err[256];

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                /* Scale-out: only a topic whose owned partitions are
                 * restored, from the positions the restore set. */
                if (u->scale && (!ut->restored || !so_owns_any(u, ut)))
                        continue;
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        if (!ui->led)
                                continue;
                        ninputs++;
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                int64_t off = ui->next[p];
                                int64_t next;
                                if (off < 0 && !u->scale &&
                                    u->ops->pos(u->st, false, ui->topic, p,
                                                &next, err,
                                                sizeof(err)) == 0 &&
                                    next >= 0)
                                        off = ui->next[p] = next;
                                replicator_start_arm(&ui->start[p], off);
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

/* Whether the stage's consumer, asked for 'ui''s metadata itself, finds
 * every partition with a leader.  The request also fills the consumer's
 * cache, which an assignment then relies on: librdkafka 2.0 leaves a
 * partition it assigned while its cache lacked it (a topic created
 * moments ago, another handle's metadata newer) unserved until its
 * periodic refresh, minutes later. */
static bool consumer_knows(aagw_unify_t *u, const struct uinput *ui) {
        const struct rd_kafka_metadata *md  = NULL;
        rd_kafka_topic_t               *rkt =
            rd_kafka_topic_new(u->consumer, ui->topic, NULL);
        bool ok = false;

        if (!rkt)
                return false;
        if (!aagw_kafka_metadata(u->consumer, false, rkt, &md, 5000, NULL) &&
            md->topic_cnt == 1 && !md->topics[0].err &&
            md->topics[0].partition_cnt >= ui->nparts) {
                ok = true;
                for (int k = 0; k < md->topics[0].partition_cnt; k++)
                        if (md->topics[0].partitions[k].err ||
                            md->topics[0].partitions[k].leader < 0)
                                ok = false;
        }
        if (md)
                rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
        return ok;
}

static void discover(aagw_unify_t *u) {
        const struct rd_kafka_metadata *md = NULL;
        const aagw_repl_policy_t       *pol = u->conf.policy;
        bool                            changed = false;
        rd_kafka_resp_err_t err = aagw_kafka_metadata(u->admin, true, NULL,
                                                      &md, 5000, &u->ctl.stop);
        if (err == RD_KAFKA_RESP_ERR__INTR)
                return; /* stopping */
        u->inputs_leaderless = false;
        aagw_reach_note(&u->reach, err);
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
                                 ut->mode == AAGW_UNIFY_LWW ? "lww" : "dedup");
                }
                if (mt->partition_cnt > ui->nparts) {
                        if (uinput_resize(ui, mt->partition_cnt))
                                continue;
                        changed = true;
                }
                /* A topic created moments ago (a flow's copy of a remote
                 * topic) can be listed before its leaders are elected.
                 * librdkafka 2.0 keeps an assigned partition it found
                 * without a leader unfetched until a much later metadata
                 * refresh, with no watermark the stall detection could
                 * see: such an input waits for a discovery that finds
                 * every leader, here and in the consumer's own metadata
                 * (consumer_knows()).  (Once assigned, an input stays so:
                 * a leader lost later is the stall detection's case.) */
                bool led = true;
                for (int k = 0; k < mt->partition_cnt && !ui->led; k++)
                        if (mt->partitions[k].err ||
                            mt->partitions[k].leader < 0)
                                led = false;
                if (!ui->led && led && consumer_knows(u, ui)) {
                        ui->led = true;
                        changed = true;
                } else if (!ui->led) {
                        u->inputs_leaderless = true;
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
                if (ut->out_id < 0 &&
                    (ut->out_id = u->ops->output(u->st, ut->out, have)) < 0) {
                        ufail(u, "out of memory");
                        break;
                }
                if (atomic_load(&u->ctl.stop))
                        break;
                if (u->scale) {
                        /* No start-up scan: with transactions, what a
                         * previous owner wrote is committed together with
                         * its changelog, or not visible at all. */
                        if (so_state_topic(u, ut, md))
                                continue;
                        ut->out_rkt = rd_kafka_topic_new(u->out_producer,
                                                         ut->out, NULL);
                        replicator_refresh_leaders(u->out_producer, ut->out,
                                                   5000);
                        ut->ready    = true;
                        ut->restored = false;
                        u->need_restore = true;
                        changed         = true;
                        continue;
                }
                ut->out_rkt = rd_kafka_topic_new(u->producer, ut->out, NULL);
                /* The output's leaders for the handles that check its
                 * end and read its tail: see replicator_prime_topic(). */
                replicator_prime_topic(u->end_probe, u->reader, ut->out);
                if (recover_output(u, ut))
                        break;
                /* The producer's leaders as they are now, not as they were
                 * when it started (maybe during the outage the scan waited
                 * out): see replicator_refresh_leaders(). */
                replicator_refresh_leaders(u->producer, ut->out, 5000);
                ut->ready = true;
                changed   = true;
        }
        rd_kafka_metadata_destroy(md);
        if (changed && !atomic_load(&u->ctl.stop))
                reassign(u);
}

/* Records behind the inputs' high watermarks, from the watermarks the
 * consumer's fetches cached (no request); -1 while one is unknown. */
static void update_lag(aagw_unify_t *u) {
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

static struct utopic *topic_of(aagw_unify_t *u, const char *topic,
                               struct uinput **uip) {
        const char *base = topic_base(u->conf.policy, topic);
        for (size_t i = 0; i < u->ntopics; i++)
                if (!strcmp(u->topics[i]->name, base)) {
                        *uip = input_of(u->topics[i], topic);
                        return *uip ? u->topics[i] : NULL;
                }
        return NULL;
}

/* The output partition of a decided record: its id hash (dedup) or
 * scoped entity key hash (lww). */
static int32_t out_part(const struct utopic *ut,
                        const struct aagw_unify_rec *r) {
        uint64_t hk;
        memcpy(&hk, r->key, 8);
        return (int32_t)(hk % (uint64_t)ut->out_parts);
}

/* Produce an accepted record to the output.  Takes over 'it->m'. */
static int produce(aagw_unify_t *u, struct item *it,
                   const struct aagw_unify_rec *r) {
        rd_kafka_message_t *m  = it->m;
        struct utopic      *ut = it->ut;
        struct aagw_prov_hdrs ph;
        rd_kafka_headers_t *h = NULL;
        char                in[AAGW_COORDS_MAX];

        /* Resolved (validated or stamped) in pass 1, unchanged since.
         * Not into it->v->hdrs: lww keeps the entity key there. */
        aagw_prov_encode_resolved(u->conf.policy, &it->v->prov, &ph);
        h = replicator_copy_headers(u->conf.policy, m, NULL, 0, it->own_hdrs,
                                    2);
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

        int32_t part = out_part(ut, r);
        struct token *tok = token_get(u);
        if (!tok) {
                rd_kafka_headers_destroy(h);
                u->ops->lost(u->st, u->ops->sent(u->st));
                ufail(u, "out of memory");
                return -1;
        }
        tok->base.src = m;
        tok->ut       = ut;
        tok->ep  = u->ops->sent(u->st);
        rd_kafka_timestamp_type_t tstype;
        int64_t             ts = rd_kafka_message_timestamp(m, &tstype);
        rd_kafka_resp_err_t err;
        struct refused_rec *rr =
            u->scale && refused_count(u->refused)
                ? refused_find(u->refused, it->ui->topic, m->partition,
                               m->offset)
                : NULL;
        if (rr && rr->confirmed) {
                /* Scale-out: the output refused it as too large when the
                 * transaction was tried before (so_refusal()): the
                 * stand-in goes in its place, as on_delivery() sends it
                 * in single-process mode. */
                rr->resolved = true;
                tok->stub    = true; /* (logged: no second line) */
                if (!(err = produce_stub(u, tok, part, m, h, rr->err)))
                        rd_kafka_headers_destroy(h);
        } else {
                if (rr && !u->txn_poisoned) {
                        /* A suspect: alone in its batch, so that the
                         * broker's answer is about this record. */
                        so_settle(u, 0);
                        tok->alone = atomic_load(&u->inflight) == 0;
                }
                err = replicator_produce(u->out_producer, ut->out_rkt, part,
                                         m, h, ts, tok, &u->ctl.stop, NULL);
                /* Over the producer's message.max.bytes with our headers:
                 * the stand-in goes instead (scale-out too: nothing was
                 * sent, the transaction goes on). */
                if (too_large(err)) {
                        tok->alone = false;
                        if (!(err = produce_stub(u, tok, part, m, h, err)))
                                rd_kafka_headers_destroy(h);
                }
        }
        if (err) {
                rd_kafka_headers_destroy(h);
                tok->base.src = NULL;
                replicator_note_authz(u->site, err, "WRITE", "topic %s",
                                      ut->out);
                /* Decided, not sent: the epoch must not commit. */
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                if (u->scale && !atomic_load(&u->ctl.stop))
                        so_refused(u, ut->out, part, err);
                else if (!atomic_load(&u->ctl.stop))
                        ufail(u, "produce to %s [%d]: %s", ut->out, (int)part,
                              rd_kafka_err2str(err));
                return -1;
        }
        ADD(u->inflight, 1);
        u->txn_records++;
        it->m = NULL; /* the token owns it now */
        if (tok->alone) {
                /* Its answer before anything else is sent.  (Still
                 * unanswered, the token is still ours: nothing else is in
                 * flight.) */
                so_settle(u, 0);
                if (atomic_load(&u->inflight) > 0)
                        tok->alone = false;
        }
        return 0;
}

/* Decide and produce one consumed batch, then seal it as an epoch. */
static void process(aagw_unify_t *u, rd_kafka_message_t **msgs, size_t n) {
        size_t nr = 0;
        char   err[512];

        /* Pass 1: provenance, ids and keys. */
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
                        replicator_note_authz(
                            u->site, m->err, "READ",
                            "topic %s, group aagw.%s.unify.%s",
                            m->rkt ? rd_kafka_topic_name(m->rkt) : "?",
                            u->conf.gateway_id, u->site);
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
                struct replicator_start *ss = &it->ui->start[m->partition];
                if (ss->pending) {
                        struct replicator_start_ctx sc = {
                            u->consumer, "UNIFY", u->who, u->batch_no,
                            &u->start_refetches};
                        if (replicator_start_take(
                                ss, &sc, tn, m->partition,
                                it->ui->next[m->partition], m->offset))
                                continue; /* sought back: read again */
                }
                it->ui->next[m->partition]  = m->offset + 1;
                it->ui->dirty[m->partition] = true;
                INC(u->records_in);
                if (u->ops->replayed(u->st, tn, m->partition, m->offset)) {
                        /* Delivered by the previous run and folded in at
                         * the start. */
                        INC(u->replayed);
                        continue;
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
                it->state                = 0;
                struct aagw_unify_rec *r = &u->recs[nr];
                u->ritem[nr++]           = i;
                memset(r, 0, offsetof(struct aagw_unify_rec, key));
                r->probe     = false;
                r->mode      = it->ut->mode;
                r->prov      = &it->v->prov;
                r->scope     = it->ut->scope;
                r->topic     = it->ui->topic;
                r->partition = m->partition;
                r->offset    = m->offset;
                r->tombstone = m->payload == NULL;
                if ((r->diverged = it->v->path_forged)) {
                        /* Not written here by aagw: the other sites on its
                         * path will not have it.  Logged at 1, 2, 4, ... */
                        uint64_t d = atomic_fetch_add(&u->diverged, 1) + 1;
                        if (!(d & (d - 1)))
                                aagw_log(AAGW_LOG_WARN, "UNIFY",
                                         "unify@%s: %s [%d] offset %" PRId64
                                         ": its provenance path contradicts "
                                         "the topic name (forged, or "
                                         "forwarded from a copy): the "
                                         "sites' unified topics will differ "
                                         "(%" PRIu64 " such records so far)",
                                         u->site, it->ui->topic,
                                         (int)m->partition, m->offset, d);
                }
                if (it->v->kind != AAGW_VERDICT_REPLICATE) {
                        r->rejected = true; /* audited, dead-lettered */
                        continue;
                }
                /* lww: the key bytes must outlive this pass: a JSON
                 * field is copied into the verdict's scratch. */
                if (r->mode == AAGW_UNIFY_LWW &&
                    !entity_key(it->ut, &rec, it->v->prov.origin,
                                (char *)it->v->hdrs.buf,
                                sizeof(it->v->hdrs.buf), &r->ekey,
                                &r->ekey_len)) {
                        r->ekey     = NULL;
                        r->ekey_len = 0;
                        r->rejected = true; /* no entity key */
                        continue;
                }
                u->ops->key(u->st, r);
        }
        /* Scale-out: only what this process owns, in a transaction. */
        if (u->scale && u->txn_poisoned) {
                /* Nothing goes into a transaction that must abort:
                 * these records are read again after the redo. */
                so_commit(u);
                return;
        }
        if (u->scale && (nr = so_filter(u, nr)) && so_begin(u))
                return;
        int64_t now = aagw_wall_ms();
        /* Pass 2: the decisions, all at once (the decider asks the store
         * about every key no pending epoch knows, in one lookup). */
        if (nr && u->ops->decide(u->st, u->recs, nr, now, err,
                                 sizeof(err))) {
                ufail(u, "%s", err);
                return;
        }
        /* Pass 3, in order: count and produce. */
        for (size_t k = 0; k < nr; k++) {
                struct aagw_unify_rec *r  = &u->recs[k];
                struct item           *it = &u->items[u->ritem[k]];
                struct utopic         *ut = it->ut;
                switch (r->outcome) {
                case AAGW_UNIFY_REJECTED:
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
                        INC(u->rejected);
                        INC(ut->rejected);
                        continue;
                case AAGW_UNIFY_DROPPED:
                        INC(u->dropped);
                        INC(ut->dropped);
                        continue;
                case AAGW_UNIFY_SUPERSEDED:
                        INC(u->superseded);
                        INC(ut->superseded);
                        continue;
                case AAGW_UNIFY_IDENTICAL:
                        INC(u->identical);
                        INC(ut->identical);
                        continue;
                case AAGW_UNIFY_ACCEPTED:
                        break;
                }
                INC(u->accepted);
                INC(ut->accepted);
                if (u->scale && so_decided(u, it, r, now))
                        return;
                if (produce(u, it, r)) {
                        /* A stop while the producer's queue is full: the
                         * epoch is lost (produce()), so the drain stores
                         * none of this batch's positions. */
                        if (atomic_load(&u->ctl.stop))
                                aagw_log(AAGW_LOG_INFO, "UNIFY",
                                         "unify@%s: stopped in the middle "
                                         "of a batch, at decided record "
                                         "%zu of %zu: the batch's positions "
                                         "are not stored, a restart "
                                         "decides the rest again",
                                         u->site, k + 1, nr);
                        return;
                }
        }
        /* (Scale-out: the transaction's commit seals, so_commit().) */
        if (!u->scale && seal_epoch(u) && !atomic_load(&u->ctl.stop))
                ufail(u, "cannot open a new epoch");
}

/* ---------------------------------------------------------- SCALE-OUT --- */

/*
 * With scale_out enabled, several processes of one site share this stage
 * (docs/deployment.md).
 *
 * Ownership: one owner (owner.c) per stage: group aagw.<gw>.<site>.unify
 * over the work topic aagw.<gw>.<site>.unify.work (W partitions, made
 * here if missing), transactional.id aagw.<gw>.<site>.unify.<member>.
 * Output partition p of every unified topic is this process's iff it
 * owns work partition p % W.
 *
 * Routing: every process reads every input partition, as the
 * single-process stage does, and decides only the records whose output
 * partition (id hash, scoped entity key hash: out_part()) it owns; it
 * skips the others.  N processes read the inputs N times: the chosen
 * trade-off against a repartition topic (one more write and read of
 * every record, one more topic per unified topic).  Nothing is assumed
 * about how the inputs are partitioned, and for the few processes a site
 * runs, reading is the cheap part.
 *
 * Positions are per (input partition i, output partition p): struct
 * uinput's opos/cpos.  An input partition is fetched from the smallest
 * position over the owned p, and a record for p at offset o is decided
 * iff p is owned and o >= opos[i][p] (so_filter()).  A p with no stored
 * position starts at the input's beginning, as a new input does.
 *
 * Transactions: the output records and the changelog records of the
 * decisions (so_decided()) go out in the owner's transaction; at least
 * every scale_out.commit_interval (so_commit()) the positions that moved
 * go to the changelog and the transaction commits with the offsets of
 * every owned work partition (the fence, KIP-447).  Only then does the
 * decider store the decisions in RocksDB (the transaction filled one
 * epoch: seal, commit).  An aborted transaction drops them (ops->drop)
 * and the inputs go back to the committed positions (so_redo()); a
 * fenced one, or partitions revoked by a rebalance, the same, and what
 * the group gives next is restored.  Before a rebalance takes the
 * partitions, the open transaction is committed (so_revoking(): the
 * assignment's metadata still fences then); a member the group already
 * moved on from finds its transaction refused and aborted.
 *
 * Changelogs (so_state_topic(), format in replicator_int.h), partitioned
 * as the output.  The state topic (compacted) holds the winners and
 * positions; the ids topic (dedup topics only) the ids, deleted by the
 * broker once they are older than unify.window and a margin, so that it
 * holds about one window of ids, not every id ever delivered.
 *
 * Restore (so_restore()): on gaining partitions, each newly owned output
 * partition's changelog partitions (ones it had before a clean
 * revocation, and that nobody wrote since, are kept: so_kept()) are read
 * from their beginning to their end, the state topic's first
 * (changelog_read(): read_committed, and the end waits for a transaction
 * a dead owner left open) and folded into the decider (ops->restore:
 * ids and winners, additive) and the positions; ids decided before the
 * window's start are skipped, as the decider would drop them.  A
 * partition whose changelog holds no position while its output holds
 * records was written by a single process (the site ran without
 * scale-out): its state is rebuilt from the output instead (so_seed()).
 * The local RocksDB is a cache: decisions reach it only after their
 * transaction committed.
 * The machinery for exactly once without transactions (the start-up
 * scan of the output, the replay set) is not used.
 */

#define SO_DRAIN_MS 10000

static bool so_owns(const aagw_unify_t *u, int32_t p) {
        return u->owner && owner_owned(u->owner, p % u->work_parts);
}

static bool so_owns_any(const aagw_unify_t *u, const struct utopic *ut) {
        for (int32_t p = 0; p < ut->out_parts; p++)
                if (so_owns(u, p))
                        return true;
        return false;
}

/* Room in 'ui''s position tables for all its partitions (new: -1). */
static int opos_fit(const struct utopic *ut, struct uinput *ui) {
        if (ui->opos_parts >= ui->nparts)
                return 0;
        size_t   n = (size_t)ui->nparts * (size_t)ut->out_parts;
        int64_t *o = realloc(ui->opos, n * sizeof(*o));
        if (!o)
                return -1;
        ui->opos   = o;
        int64_t *c = realloc(ui->cpos, n * sizeof(*c));
        if (!c)
                return -1;
        ui->cpos = c;
        int64_t *sp = realloc(ui->spos, n * sizeof(*sp));
        if (!sp)
                return -1;
        ui->spos = sp;
        for (size_t k = (size_t)ui->opos_parts * (size_t)ut->out_parts; k < n;
             k++)
                o[k] = c[k] = sp[k] = -1;
        ui->opos_parts = ui->nparts;
        return 0;
}

/* Every input of 'ut' fetched from the smallest position of the owned
 * output partitions (-1: the beginning). */
static void so_positions(aagw_unify_t *u, struct utopic *ut) {
        for (size_t k = 0; k < ut->nin; k++) {
                struct uinput *ui = ut->in[k];
                if (opos_fit(ut, ui)) {
                        ufail(u, "out of memory");
                        return;
                }
                for (int32_t i = 0; i < ui->nparts; i++) {
                        int64_t lo = INT64_MAX;
                        for (int32_t p = 0; p < ut->out_parts; p++) {
                                int64_t v =
                                    ui->opos[(size_t)i * ut->out_parts + p];
                                if (so_owns(u, p) && v < lo)
                                        lo = v;
                        }
                        ui->next[i]  = lo == INT64_MAX ? -1 : lo;
                        ui->dirty[i] = false;
                }
        }
}

/* "clicks.unified 0,3; views.unified 1" and the count, for /status. */
static void so_publish(aagw_unify_t *u) {
        char    buf[sizeof(u->owned)];
        size_t  n   = 0;
        int32_t cnt = 0;

        buf[0] = '\0';
        for (size_t t = 0; t < u->ntopics && n < sizeof(buf); t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s ",
                                      n ? "; " : "", ut->out);
                bool any = false;
                for (int32_t p = 0; p < ut->out_parts && n < sizeof(buf); p++)
                        if (so_owns(u, p)) {
                                n += (size_t)snprintf(buf + n,
                                                      sizeof(buf) - n, "%s%d",
                                                      any ? "," : "", (int)p);
                                any = true;
                                cnt++;
                        }
                if (!any && n < sizeof(buf))
                        n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                                              "none");
        }
        pthread_mutex_lock(&u->owned_lock);
        memcpy(u->owned, buf, sizeof(buf));
        pthread_mutex_unlock(&u->owned_lock);
        atomic_store(&u->owned_parts, cnt);
}

/* Wait for the delivery report of every record produced (after a commit
 * or an abort), so that none reaches an epoch the decider reused.
 * Returns 0, or -1 (the stage fails). */
static int so_drain(aagw_unify_t *u) {
        int64_t deadline = aagw_mono_ms() + SO_DRAIN_MS;

        while (atomic_load(&u->inflight) > 0 && aagw_mono_ms() < deadline)
                rd_kafka_poll(u->out_producer, 10);
        if (atomic_load(&u->inflight) > 0) {
                ufail(u, "member %s: %" PRId64 " records without a delivery "
                         "report %d s after their transaction ended",
                      u->conf.scale_out->member, atomic_load(&u->inflight),
                      SO_DRAIN_MS / 1000);
                return -1;
        }
        return 0;
}

/* Unassign the inputs and drop what their queue holds (records fetched
 * from positions no longer wanted), then assign them afresh. */
static void so_reassign(aagw_unify_t *u) {
        rd_kafka_message_t *msgs[256];
        ssize_t             n;

        rd_kafka_assign(u->consumer, NULL);
        while ((n = rd_kafka_consume_batch_queue(u->cq, 0, msgs, 256)) > 0)
                for (ssize_t i = 0; i < n; i++)
                        rd_kafka_message_destroy(msgs[i]);
        reassign(u);
}

/* The open transaction is gone (aborted, fenced): forget its decisions
 * and go back to the committed positions. */
static void so_redo(aagw_unify_t *u) {
        u->txn_open  = false;
        u->txn_stubs = 0;
        if (refused_count(u->refused))
                refused_each(u->refused, so_refused_keep, NULL);
        if (so_drain(u))
                return;
        u->txn_poisoned = false;
        if (u->ops->drop(u->st)) {
                ufail(u, "out of memory");
                return;
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        if (opos_fit(ut, ui)) {
                                ufail(u, "out of memory");
                                return;
                        }
                        memcpy(ui->opos, ui->cpos,
                               (size_t)ui->opos_parts * ut->out_parts *
                                   sizeof(*ui->opos));
                }
                so_positions(u, ut);
        }
        so_reassign(u);
}

/* The owner failed for good: its producer (a transaction the
 * coordinator aborted on its own after transaction.timeout.ms, a zombie
 * woken after that; a transactional state the broker no longer accepts)
 * or its consumer.  A new producer (transactions initialised again:
 * so_renew(), from the stage's loop) is what a restart would make; the
 * membership goes on (a consumer failed for good fails the stage).  More than SO_RENEW_MAX of them within
 * SO_RENEW_WINDOW_MS is not a passing state: the stage fails. */
#define SO_RENEW_MAX       3
#define SO_RENEW_WINDOW_MS 60000

static void so_fatal(aagw_unify_t *u, const char *err) {
        const char *member = u->conf.scale_out->member;
        int64_t     now    = aagw_mono_ms();

        u->txn_open = false;
        if (u->need_renew)
                return;
        if (!u->renew_since_ms || now - u->renew_since_ms > SO_RENEW_WINDOW_MS) {
                u->renew_since_ms = now;
                u->renewals       = 0;
        }
        if (++u->renewals > SO_RENEW_MAX) {
                ufail(u, "member %s: %s (its transactional producer failed "
                         "for good %d times within %d s: does another "
                         "process run as member %s?)",
                      member, err, u->renewals, SO_RENEW_WINDOW_MS / 1000,
                      member);
                return;
        }
        aagw_log(AAGW_LOG_WARN, "UNIFY",
                 "unify@%s: member %s: %s; making a new transactional "
                 "producer",
                 u->site, member, err);
        u->need_renew = true;
}

/* What a transaction step's result means for the stage. */
static void so_result(aagw_unify_t *u, owner_result_t r, const char *err) {
        const char *member = u->conf.scale_out->member;

        switch (r) {
        case AAGW_OWNER_OK:
                return;
        case AAGW_OWNER_ABORTED:
                INC(u->aborted);
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: %s; redoing from the last "
                         "committed positions",
                         u->site, member, err);
                so_redo(u);
                return;
        case AAGW_OWNER_FENCED:
                INC(u->fenced);
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s fenced: %s; nothing of its "
                         "transaction (%" PRId64 " output records) is "
                         "visible, what the group gives it next is restored",
                         u->site, member, err, u->txn_records);
                so_redo(u);
                return;
        case AAGW_OWNER_FATAL:
                so_fatal(u, err);
                return;
        }
}

static int so_begin(aagw_unify_t *u) {
        char err[512];

        if (u->txn_open)
                return 0;
        owner_result_t r = owner_begin(u->owner, err, sizeof(err));
        if (r == AAGW_OWNER_OK) {
                u->txn_open       = true;
                u->txn_records    = 0;
                u->txn_started_ms = aagw_mono_ms();
                return 0;
        }
        so_result(u, r, err);
        return -1;
}

/* The transactional producer refused a record: the transaction is in
 * an abortable state (librdkafka 2.0.2 after an abort that purged
 * records: "skipped sequence numbers ... requires epoch bump"), and only
 * an abort gets it going again.  The next so_commit() aborts and redoes
 * (so_poll() runs it at once). */
static void so_refused(aagw_unify_t *u, const char *topic, int32_t p,
                       rd_kafka_resp_err_t err) {
        if (!u->txn_poisoned)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: produce to %s [%d]: %s; the "
                         "transaction is aborted and redone",
                         u->site, u->conf.scale_out->member, topic, (int)p,
                         rd_kafka_err2str(err));
        u->txn_poisoned = true;
}

/*
 * A record too large for the output (the topic's max.message.bytes)
 * makes its transaction abortable, and the redo decides it again: sent
 * again, it would be refused at every redo.  So each refusal for good
 * (replicator_refused_for_good()) is remembered by the record's input
 * coordinates (refused.c), and the redo writes its stand-in
 * (produce_stub(), as single-process mode does) in its place: the
 * decision stands (the changelog says delivered, ops->acked on the
 * stand-in's acknowledgement), the output holds one record for it.
 * The broker refuses a batch, not a record, so the refused batch's
 * records are suspects first: the redo sends each alone (no other
 * output record in flight, its answer awaited).  Refused alone, it is
 * too large for good (the next redo writes its stand-in); acknowledged,
 * it is forgotten.  A refusal other than the size, or of a stand-in,
 * fails the stage, as in single-process mode.  A record over the
 * producer's own message.max.bytes is refused by producev() before it is
 * sent: its stand-in goes at once, no abort.  Stand-ins are counted
 * (oversized) when their transaction commits.
 */

#define SO_ALONE_MS   5000   /* a suspect's wait to be alone, then for
                                its answer */
#define SO_REFUSED_MAX 100000 /* a batch is up to batch.num.messages */

static void so_refusal(aagw_unify_t *u, struct token *tok,
                       const rd_kafka_message_t *m) {
        const rd_kafka_message_t *src = tok->base.src;
        const char               *in  = rd_kafka_topic_name(src->rkt);
        struct refused_rec       *rr;

        if (tok->stub) {
                ufail(u, "delivery to %s [%d] failed: %s", tok->ut->out,
                      (int)m->partition, rd_kafka_err2str(m->err));
                return;
        }
        if (!(rr = refused_add(u->refused, in, src->partition,
                               src->offset))) {
                ufail(u, "member %s: %s [%d] offset %" PRId64 ": %s [%d] "
                         "refused its unified copy (%s) and %zu refused "
                         "records are remembered already (out of memory, "
                         "or more than %d)",
                      u->conf.scale_out->member, in, (int)src->partition,
                      src->offset, tok->ut->out, (int)m->partition,
                      rd_kafka_err2str(m->err), refused_count(u->refused),
                      SO_REFUSED_MAX);
                return;
        }
        rr->out_part = m->partition;
        if (rr->confirmed)
                return;
        rr->err = m->err;
        if (tok->alone && !too_large(m->err)) {
                ufail(u, "delivery to %s [%d] failed: %s", tok->ut->out,
                      (int)m->partition, rd_kafka_err2str(m->err));
        } else if (tok->alone) {
                rr->confirmed = true;
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: %s [%d] offset %" PRId64
                         ": its unified copy is too large for %s [%d] (%s); "
                         "the transaction is redone with its stand-in "
                         "instead",
                         u->site, u->conf.scale_out->member, in,
                         (int)src->partition, src->offset, tok->ut->out,
                         (int)m->partition, rd_kafka_err2str(m->err));
        } else if (!u->txn_poisoned) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: %s [%d] refused a batch (%s; "
                         "%s [%d] offset %" PRId64 " among it); the "
                         "transaction is aborted, and the redo sends each "
                         "record of the batch alone to find the one "
                         "refused for good",
                         u->site, u->conf.scale_out->member, tok->ut->out,
                         (int)m->partition, rd_kafka_err2str(m->err), in,
                         (int)src->partition, src->offset);
        }
}

/* Serve delivery reports until at most 'until' output records are in
 * flight (SO_ALONE_MS at most). */
static void so_settle(aagw_unify_t *u, int64_t until) {
        int64_t deadline = aagw_mono_ms() + SO_ALONE_MS;

        while (atomic_load(&u->inflight) > until &&
               aagw_mono_ms() < deadline && !atomic_load(&u->ctl.stop))
                rd_kafka_poll(u->out_producer, 10);
}

/* refused_each() at a commit: its stand-ins are in; an output partition
 * no longer owned is another member's to find out.  At an abort (arg
 * NULL): its stand-ins go again. */
static bool so_refused_keep(void *arg, struct refused_rec *r) {
        aagw_unify_t *u = arg;

        if (!u) {
                r->resolved = false;
                return true;
        }
        return !r->resolved && so_owns(u, r->out_part);
}

/* Produce one changelog record into the open transaction: an id into
 * the ids topic, the others into the state topic. */
static int so_state(aagw_unify_t *u, struct utopic *ut, int32_t p,
                    const struct changelog_rec *c) {
        uint8_t             key[CHANGELOG_KEY_MAX], val[CHANGELOG_VAL_MAX];
        size_t              klen, vlen;
        rd_kafka_resp_err_t err;
        bool                id = c->kind == CHANGELOG_ID;

        changelog_encode(c, key, &klen, val, &vlen);
        while ((err = rd_kafka_producev(
                    u->out_producer,
                    RD_KAFKA_V_RKT(id ? ut->ids_rkt : ut->state_rkt),
                    RD_KAFKA_V_PARTITION(p),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE(val, vlen),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
               !atomic_load(&u->ctl.stop))
                rd_kafka_poll(u->out_producer, 10);
        if (err) {
                if (!atomic_load(&u->ctl.stop))
                        so_refused(u, id ? ut->ids : ut->state, p, err);
                return -1;
        }
        return 0;
}

/* Keep only the records whose output partition this process owns, at
 * or past that partition's position.  Returns how many are left. */
static size_t so_filter(aagw_unify_t *u, size_t nr) {
        size_t kept = 0;

        for (size_t k = 0; k < nr; k++) {
                struct aagw_unify_rec *r  = &u->recs[k];
                struct item           *it = &u->items[u->ritem[k]];
                struct utopic         *ut = it->ut;
                /* A rejected record has no output partition: audited by
                 * the owner of partition 0. */
                int32_t p = r->rejected ? 0 : out_part(ut, r);
                if (opos_fit(ut, it->ui)) {
                        ufail(u, "out of memory");
                        return 0;
                }
                if (!ut->restored || !so_owns(u, p) ||
                    r->offset < it->ui->opos[(size_t)r->partition *
                                                 ut->out_parts + p]) {
                        it->state = 1;
                        continue;
                }
                if (kept != k) {
                        u->recs[kept]  = *r;
                        u->ritem[kept] = u->ritem[k];
                }
                kept++;
        }
        return kept;
}

/* The changelog record of an accepted decision, into the transaction. */
static int so_decided(aagw_unify_t *u, struct item *it,
                      const struct aagw_unify_rec *r, int64_t now) {
        struct changelog_rec c;

        c.kind    = r->mode == AAGW_UNIFY_LWW ? CHANGELOG_WIN : CHANGELOG_ID;
        memcpy(c.key, r->key, 16);
        c.hlc     = r->prov->hlc;
        c.time_ms = now;
        copy_str(c.origin, sizeof(c.origin), r->prov->origin);
        if (c.kind == CHANGELOG_ID) {
                copy_str(c.topic, sizeof(c.topic), r->topic);
                c.partition = r->partition;
                c.offset    = r->offset;
        } else {
                c.tombstone = r->tombstone;
                c.id_len    = r->prov->id_len;
                memcpy(c.id, r->prov->id, r->prov->id_len);
                c.id[r->prov->id_len] = '\0';
        }
        return so_state(u, it->ut, out_part(it->ut, r), &c);
}

/* Commit the open transaction (opening one if positions moved): the
 * positions that moved go to the changelog first.  Returns 0, or -1 if
 * the stage failed. */
static int so_commit(aagw_unify_t *u) {
        struct changelog_rec c;
        char                 err[512];
        bool                 moved = false;

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        if (opos_fit(ut, ui)) {
                                ufail(u, "out of memory");
                                return -1;
                        }
                        for (int32_t i = 0; i < ui->nparts && !moved; i++)
                                for (int32_t p = 0; p < ut->out_parts; p++) {
                                        size_t  x = (size_t)i * ut->out_parts + p;
                                        if (so_owns(u, p) && ui->next[i] >= 0 &&
                                            ui->next[i] > ui->cpos[x])
                                                moved = true;
                                }
                }
        }
        if (u->txn_poisoned) {
                /* A record went wrong in it (on_delivery(),
                 * so_refused()). */
                owner_result_t r = owner_abort(u->owner, err, sizeof(err));
                so_result(u, r == AAGW_OWNER_OK ? AAGW_OWNER_ABORTED : r,
                          r == AAGW_OWNER_OK
                              ? "a record of the transaction failed; "
                                "transaction aborted"
                              : err);
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        }
        if (!moved && !u->txn_open)
                return 0;
        if (so_begin(u))
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        c.kind = CHANGELOG_POS;
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        copy_str(c.topic, sizeof(c.topic), ui->topic);
                        for (int32_t i = 0; i < ui->nparts; i++)
                                for (int32_t p = 0; p < ut->out_parts; p++) {
                                        size_t x = (size_t)i * ut->out_parts + p;
                                        if (!so_owns(u, p) || ui->next[i] < 0 ||
                                            ui->next[i] <= ui->cpos[x])
                                                continue;
                                        if (ui->next[i] > ui->opos[x])
                                                ui->opos[x] = ui->next[i];
                                        c.partition = i;
                                        c.offset    = ui->opos[x];
                                        if (so_state(u, ut, p, &c))
                                                return -1;
                                }
                }
        }
        if (u->txn_poisoned)
                return so_commit(u); /* (a position refused) */
        const rd_kafka_topic_partition_list_t *own = owner_partitions(u->owner);
        rd_kafka_topic_partition_list_t *offs =
            rd_kafka_topic_partition_list_new(own->cnt > 0 ? own->cnt : 1);
        /* The offsets mean nothing but the fence: any value >= 0. */
        u->fence_seq++;
        for (int i = 0; i < own->cnt; i++)
                rd_kafka_topic_partition_list_add(offs, u->work,
                                                  own->elems[i].partition)
                    ->offset = u->fence_seq;
        owner_result_t r = owner_commit(u->owner, offs, err, sizeof(err));
        rd_kafka_topic_partition_list_destroy(offs);
        if (r != AAGW_OWNER_OK) {
                so_result(u, r, err);
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        }
        u->txn_open = false;
        INC(u->txn_commits);
        /* Its stand-ins are in the output. */
        ADD(u->oversized, u->txn_stubs);
        u->txn_stubs = 0;
        if (refused_count(u->refused))
                refused_each(u->refused, so_refused_keep, u);
        if (so_drain(u))
                return -1;
        if (u->txn_poisoned) {
                /* Acknowledged without an offset inside a committed
                 * transaction (librdkafka's implicit acknowledgement,
                 * tests/realkafka/README.md): whether the record is in
                 * the output cannot be told; stop rather than guess. */
                ufail(u, "member %s: a record of a committed transaction "
                         "was acknowledged without an offset; restart the "
                         "process (its partitions are restored from the "
                         "changelog)",
                      u->conf.scale_out->member);
                return -1;
        }
        /* The transaction's one epoch: stored now. */
        if (u->ops->seal(u->st)) {
                int n = u->ops->commit(u->st, err, sizeof(err));
                if (n < 0) {
                        ufail(u, "%s", err);
                        return -1;
                }
                ADD(u->commits, n);
                if (!u->ops->open(u->st)) {
                        ufail(u, "the decider kept an epoch of a committed "
                                 "transaction");
                        return -1;
                }
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++)
                        memcpy(ut->in[k]->cpos, ut->in[k]->opos,
                               (size_t)ut->in[k]->opos_parts * ut->out_parts *
                                   sizeof(int64_t));
        }
        return 0;
}

/* ------------------------------------------------- SCALE-OUT: RESTORE --- */

/* A partition given back to the process that a clean revocation took it
 * from need not be read again: its state here (RocksDB, the committed
 * positions) is what it committed last, as long as nobody wrote its
 * changelog partitions (state and ids) since.  so_revoking() notes the
 * end (the high watermark) of each owned one right after its last
 * commit; so_kept() compares.  Any other writer's transaction adds at
 * least a record and its marker to a partition it wrote (two offsets,
 * also when it was aborted); only this process's own commit marker may
 * land after the note (the coordinator writes markers after it answered
 * the commit): one offset per partition.  And nothing may be open (the
 * last stable offset, from the read_committed reader, is the end). */
static void so_kept_clear(aagw_unify_t *u) {
        for (size_t t = 0; t < u->ntopics; t++)
                for (int32_t p = 0; u->topics[t]->kept_hw &&
                                    p < 2 * u->topics[t]->out_parts;
                     p++)
                        u->topics[t]->kept_hw[p] = -1;
}

static void so_kept_note(aagw_unify_t *u) {
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                if (!ut->kept_hw &&
                    !(ut->kept_hw = malloc(2 * (size_t)ut->out_parts *
                                           sizeof(*ut->kept_hw))))
                        continue; /* (read again: only slower) */
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        int64_t lo, hi, hi_ids;
                        ut->kept_hw[p] = ut->kept_hw[ut->out_parts + p] = -1;
                        hi_ids = 0; /* (no ids topic: nothing to compare) */
                        if (so_owns(u, p) &&
                            !replicator_watermarks(
                                u->hw_probe, ut->state, p, &lo, &hi, 2000) &&
                            (!ut->ids[0] ||
                             !replicator_watermarks(
                                 u->hw_probe, ut->ids, p, &lo, &hi_ids,
                                 2000))) {
                                ut->kept_hw[p]                 = hi;
                                ut->kept_hw[ut->out_parts + p] = hi_ids;
                        }
                }
        }
        u->kept_pending = true;
}

/* Whether partition 'p' of 'topic' ended at 'kept' when noted and
 * nobody wrote it since. */
static bool so_unmoved(aagw_unify_t *u, const char *topic, int32_t p,
                       int64_t kept) {
        int64_t lo, hi, lso;

        return kept >= 0 &&
               !replicator_watermarks(u->hw_probe, topic, p, &lo,
                                                 &hi, 5000) &&
               !replicator_watermarks(u->reader, topic, p, &lo,
                                                 &lso, 5000) &&
               lso == hi && hi >= kept && hi - kept <= 1;
}

static bool so_kept(aagw_unify_t *u, struct utopic *ut, int32_t p) {
        if (!ut->kept_hw)
                return false;
        int64_t kept = ut->kept_hw[p], kept_ids = ut->kept_hw[ut->out_parts + p];
        ut->kept_hw[p] = ut->kept_hw[ut->out_parts + p] = -1;
        return so_unmoved(u, ut->state, p, kept) &&
               (!ut->ids[0] || so_unmoved(u, ut->ids, p, kept_ids));
}

struct so_restore_ctx {
        aagw_unify_t  *u;
        struct utopic *ut;
        int32_t        p;
        int64_t        assignments; /* owner_assignments() at the start */
        int64_t        n;
        int64_t        cutoff;      /* ids decided before it left the
                                       window: skipped */
        int64_t        ids, expired; /* ids read; of them skipped */
        size_t         unknown;     /* positions of inputs not known yet */
        int64_t        pos;         /* position records read */
        bool           failed;
        char           err[512];
};

/* Fold the id or winner of changelog record 'c' into the decider. */
static int restore_decision(aagw_unify_t *u, const struct changelog_rec *c,
                            char *err, size_t err_size) {
        struct aagw_prov     *pv = &u->verdicts[0].prov;
        struct aagw_unify_rec r;

        memset(&r, 0, sizeof(r));
        r.mode = c->kind == CHANGELOG_WIN ? AAGW_UNIFY_LWW : AAGW_UNIFY_DEDUP;
        memcpy(r.key, c->key, 16);
        copy_str(pv->origin, sizeof(pv->origin), c->origin);
        pv->hlc     = c->hlc;
        pv->id_len  = c->id_len;
        memcpy(pv->id, c->id, c->id_len);
        r.prov      = pv;
        r.topic     = c->topic;
        r.partition = c->partition;
        r.offset    = c->offset;
        r.tombstone = c->tombstone;
        return u->ops->restore(u->st, &r, c->time_ms, err, err_size);
}

static bool so_restore_rec(void *arg, const struct changelog_rec *c) {
        struct so_restore_ctx *rc = arg;
        aagw_unify_t          *u  = rc->u;
        struct utopic         *ut = rc->ut;

        if (c->kind == CHANGELOG_POS) {
                rc->pos++;
                struct uinput *ui = input_of(ut, c->topic);
                if (!ui) {
                        /* Not discovered here yet: it starts from its
                         * beginning for this partition, and what was
                         * decided is found seen (dedup) or not newer
                         * (lww). */
                        rc->unknown++;
                        return true;
                }
                if (c->partition < 0)
                        return true; /* not a partition: skipped */
                if ((c->partition >= ui->nparts &&
                     uinput_resize(ui, c->partition + 1)) ||
                    opos_fit(ut, ui)) {
                        rc->failed = true;
                        snprintf(rc->err, sizeof(rc->err), "out of memory");
                        return false;
                }
                size_t x = (size_t)c->partition * ut->out_parts + rc->p;
                ui->opos[x] = ui->cpos[x] = c->offset;
                return true;
        }
        if (c->kind == CHANGELOG_ID) {
                /* Dropped by the decider anyway; the ids topic still
                 * holds them for its margin, a state topic of an older
                 * version for good. */
                rc->ids++;
                if (c->time_ms < rc->cutoff) {
                        rc->expired++;
                        return true;
                }
        }
        if (restore_decision(u, c, rc->err, sizeof(rc->err)) ||
            (!(++rc->n & 1023) &&
             u->ops->fold_commit(u->st, false, rc->err, sizeof(rc->err)))) {
                rc->failed = true;
                return false;
        }
        return true;
}

/*
 * A partition whose changelog holds no position was never decided under
 * scale-out; if its output holds records, a single process wrote them
 * (the site ran without scale-out before), and its state is in that
 * process's RocksDB only.  It is rebuilt from the output itself, as the
 * single-process stage does when its state dir is lost: every record
 * names what it delivered (provenance, input coordinates), so the ids
 * and winners are folded in and written to the changelogs, and each
 * input partition's position for this output partition is past the last
 * input record delivered there (what follows it is decided again, and
 * found delivered or not newer where it was).  In transactions of at
 * most SO_SEED_TXN records; the positions go last, so a seed cut short
 * (a crash, a rebalance) is done again by the next owner, which writes
 * the same ids and winners again (harmless: the same keys).
 */
#define SO_SEED_TXN 20000

struct seed_pos {
        char    topic[AAGW_TOPIC_MAX + 1];
        int32_t partition;
        int64_t next;
};

struct seed_ctx {
        aagw_unify_t    *u;
        struct utopic   *ut;
        int32_t          p;
        struct seed_pos *pos;
        size_t           npos, cap;
        int64_t          n, foreign, other_part, in_txn, assignments;
        bool             failed, abandoned;
        char             err[512];
};

static bool seed_pos_note(struct seed_ctx *sc, const char *topic,
                          int32_t partition, int64_t offset) {
        for (size_t i = 0; i < sc->npos; i++)
                if (sc->pos[i].partition == partition &&
                    !strcmp(sc->pos[i].topic, topic)) {
                        if (offset + 1 > sc->pos[i].next)
                                sc->pos[i].next = offset + 1;
                        return true;
                }
        if (sc->npos == sc->cap) {
                size_t           cap = sc->cap ? 2 * sc->cap : 16;
                struct seed_pos *np  = realloc(sc->pos, cap * sizeof(*np));
                if (!np)
                        return false;
                sc->pos = np;
                sc->cap = cap;
        }
        struct seed_pos *sp = &sc->pos[sc->npos++];
        copy_str(sp->topic, sizeof(sp->topic), topic);
        sp->partition = partition;
        sp->next      = offset + 1;
        return true;
}

/* Close the seed's open transaction (and open the next one). */
static bool seed_commit(struct seed_ctx *sc) {
        aagw_unify_t *u = sc->u;

        if (u->ops->fold_commit(u->st, false, sc->err, sizeof(sc->err)))
                return false;
        if (so_commit(u) || u->txn_open || u->txn_poisoned) {
                snprintf(sc->err, sizeof(sc->err),
                         "its transaction did not commit");
                return false;
        }
        sc->in_txn = 0;
        return true;
}

static bool seed_rec(void *arg, const rd_kafka_message_t *m) {
        struct seed_ctx      *sc = arg;
        aagw_unify_t         *u  = sc->u;
        struct utopic        *ut = sc->ut;
        struct aagw_unify_rec r;
        struct changelog_rec  c;
        char                  in_topic[AAGW_TOPIC_MAX + 1];
        char                  ebuf[AAGW_ID_MAX + 1];
        rd_kafka_timestamp_type_t tstype;

        if (!decode_output(u, ut, m, &r, in_topic, sizeof(in_topic), ebuf,
                           sizeof(ebuf))) {
                sc->foreign++;
                return true;
        }
        u->ops->key(u->st, &r);
        if (out_part(ut, &r) != sc->p) {
                /* Written by a process with another partition count or
                 * hash: not this partition's to decide. */
                sc->other_part++;
                return true;
        }
        int64_t ts = rd_kafka_message_timestamp(m, &tstype);
        if (ts < 0)
                ts = aagw_wall_ms();
        if (!seed_pos_note(sc, in_topic, r.partition, r.offset) ||
            u->ops->restore(u->st, &r, ts, sc->err, sizeof(sc->err))) {
                if (!sc->err[0])
                        snprintf(sc->err, sizeof(sc->err), "out of memory");
                sc->failed = true;
                return false;
        }
        memset(&c, 0, sizeof(c));
        c.kind    = r.mode == AAGW_UNIFY_LWW ? CHANGELOG_WIN : CHANGELOG_ID;
        memcpy(c.key, r.key, 16);
        c.hlc     = r.prov->hlc;
        c.time_ms = ts;
        copy_str(c.origin, sizeof(c.origin), r.prov->origin);
        if (c.kind == CHANGELOG_ID) {
                copy_str(c.topic, sizeof(c.topic), in_topic);
                c.partition = r.partition;
                c.offset    = r.offset;
        } else {
                c.tombstone = r.tombstone;
                c.id_len    = r.prov->id_len;
                memcpy(c.id, r.prov->id, r.prov->id_len);
                c.id[r.prov->id_len] = '\0';
        }
        if ((!u->txn_open && so_begin(u)) || so_state(u, ut, sc->p, &c)) {
                snprintf(sc->err, sizeof(sc->err),
                         "writing its changelog failed");
                sc->failed = true;
                return false;
        }
        sc->n++;
        if (++sc->in_txn >= SO_SEED_TXN && !seed_commit(sc)) {
                sc->failed = true;
                return false;
        }
        /* Serve the group; the ownership moved: the next owner seeds. */
        if (!(sc->n & 1023)) {
                char err[512];
                if (owner_poll(u->owner, 0, err, sizeof(err)) ==
                    AAGW_OWNER_FATAL) {
                        ufail(u, "member %s: %s", u->conf.scale_out->member,
                              err);
                        sc->failed = true;
                        return false;
                }
                if (u->need_renew ||
                    owner_assignments(u->owner) != sc->assignments ||
                    !so_owns(u, sc->p)) {
                        sc->abandoned = true;
                        return false;
                }
        }
        return true;
}

/* Seed output partition 'p' of 'ut' from the output if it holds records
 * (its changelog holds no position).  Returns 0, 1 (abandoned: the
 * ownership changed meanwhile), or -1 (the stage failed). */
static int so_seed(aagw_unify_t *u, struct utopic *ut, int32_t p) {
        struct seed_ctx sc = {.u = u, .ut = ut, .p = p,
                              .assignments = owner_assignments(u->owner)};
        int64_t         lo, hi, t0 = aagw_mono_ms(), n;
        rd_kafka_resp_err_t kerr;

        if ((kerr = watermarks(u->hw_probe, ut->out, p, &lo, &hi, 10000))) {
                ufail(u, "reading the end of %s [%d]: %s", ut->out, (int)p,
                      rd_kafka_err2str(kerr));
                return -1;
        }
        if (lo >= hi)
                return 0;
        struct aagw_kafka_range r = {.topic      = ut->out,
                                     .partition  = p,
                                     .from       = lo,
                                     .to         = hi,
                                     .timeout_ms = SCAN_TIMEOUT_MS,
                                     .progress   = true,
                                     .stop       = &u->ctl.stop,
                                     .fn         = seed_rec,
                                     .arg        = &sc};
        aagw_kafka_range_end_t end = aagw_kafka_read_range(u->reader, &r, &n);
        if (sc.abandoned) {
                /* (What it committed is written again by the next
                 * owner's seed: no position was written yet.) */
                if (u->txn_open) {
                        char err[512];
                        if (owner_abort(u->owner, err, sizeof(err)) ==
                            AAGW_OWNER_FATAL)
                                so_fatal(u, err);
                        u->txn_open = u->txn_poisoned = false;
                }
                free(sc.pos);
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1
                                                                       : 1;
        }
        if (end == AAGW_RANGE_DONE && !sc.failed) {
                /* The positions, last. */
                struct changelog_rec c;
                memset(&c, 0, sizeof(c));
                c.kind = CHANGELOG_POS;
                for (size_t i = 0; i < sc.npos && !sc.failed; i++) {
                        copy_str(c.topic, sizeof(c.topic), sc.pos[i].topic);
                        c.partition = sc.pos[i].partition;
                        c.offset    = sc.pos[i].next;
                        if ((!u->txn_open && so_begin(u)) ||
                            so_state(u, ut, p, &c)) {
                                snprintf(sc.err, sizeof(sc.err),
                                         "writing its positions failed");
                                sc.failed = true;
                        }
                }
                if (!sc.failed && u->txn_open && !seed_commit(&sc))
                        sc.failed = true;
        }
        if (end != AAGW_RANGE_DONE || sc.failed) {
                if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED &&
                    !atomic_load(&u->ctl.stop))
                        ufail(u, "member %s: seeding %s [%d] from %s [%d] "
                                 "(no changelog yet: the site ran without "
                                 "scale-out): %s",
                              u->conf.scale_out->member, ut->state, (int)p,
                              ut->out, (int)p,
                              sc.failed ? sc.err
                                        : "the output could not be read "
                                          "to its end");
                free(sc.pos);
                return atomic_load(&u->ctl.stop) &&
                               atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED
                           ? 0
                           : -1;
        }
        /* What the inputs start from for p. */
        for (size_t i = 0; i < sc.npos; i++) {
                struct uinput *ui = input_of(ut, sc.pos[i].topic);
                if (!ui || sc.pos[i].partition < 0)
                        continue;
                if ((sc.pos[i].partition >= ui->nparts &&
                     uinput_resize(ui, sc.pos[i].partition + 1)) ||
                    opos_fit(ut, ui)) {
                        free(sc.pos);
                        ufail(u, "out of memory");
                        return -1;
                }
                size_t x = (size_t)sc.pos[i].partition * ut->out_parts + p;
                ui->opos[x] = ui->cpos[x] = sc.pos[i].next;
        }
        aagw_log(AAGW_LOG_WARN, "UNIFY",
                 "unify@%s: member %s: %s [%d] had no changelog but holds "
                 "%" PRId64 " records (the site ran without scale-out): "
                 "its state was rebuilt from them and written to its "
                 "changelogs (%" PRId64 " ids or winners, %zu input "
                 "positions, %" PRId64
                 " records not aagw's, %" PRId64 " of another partition) "
                 "in %" PRId64 " ms; nothing is delivered again",
                 u->site, u->conf.scale_out->member, ut->out, (int)p,
                 hi - lo, sc.n, sc.npos, sc.foreign,
                 sc.other_part, aagw_mono_ms() - t0);
        free(sc.pos);
        return 0;
}

/* Serve the group while a restore runs; false (abandon it) once the
 * ownership changed. */
static bool so_restore_tick(void *arg) {
        struct so_restore_ctx *rc = arg;
        aagw_unify_t          *u  = rc->u;
        char                   err[512];

        if (owner_poll(u->owner, 0, err, sizeof(err)) == AAGW_OWNER_FATAL) {
                ufail(u, "member %s: %s", u->conf.scale_out->member, err);
                return false;
        }
        return !u->need_renew &&
               owner_assignments(u->owner) == rc->assignments &&
               so_owns(u, rc->p);
}

/* Restore every ready topic not restored yet for the owned partitions,
 * then fetch the inputs from the positions restored.  Returns 0, or -1
 * if the stage failed. */
static int so_restore(aagw_unify_t *u) {
        int64_t t0 = aagw_mono_ms(), records = 0, bytes = 0, ids = 0,
                expired = 0;
        int     parts = 0, kept = 0, warmed = 0;
        char    err[512], names[512], owned[sizeof(u->owned)];
        size_t  nn = 0;

        u->need_restore = false;
        names[0]        = '\0';
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || ut->restored)
                        continue;
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        if (!so_owns(u, p))
                                continue;
                        bool keep = so_kept(u, ut, p);
                        /* The standby read this partition up to
                         * sb_next: go on from there (given up now:
                         * owned). */
                        int64_t sb_state = -1, sb_ids = -1;
                        if (ut->sb_next) {
                                sb_state = ut->sb_next[p];
                                sb_ids   = ut->sb_next[ut->out_parts + p];
                                ut->sb_next[p] =
                                    ut->sb_next[ut->out_parts + p] = -1;
                        }
                        bool warm = !keep && (sb_state >= 0 || sb_ids >= 0);
                        bool sb_pos = false;
                        for (size_t k = 0; k < ut->nin; k++) {
                                struct uinput *ui = ut->in[k];
                                if (opos_fit(ut, ui)) {
                                        ufail(u, "out of memory");
                                        return -1;
                                }
                                for (int32_t i = 0; i < ui->nparts; i++) {
                                        size_t x = (size_t)i * ut->out_parts + p;
                                        sb_pos |= warm && ui->spos[x] >= 0;
                                        ui->opos[x] = ui->cpos[x] =
                                            keep   ? ui->cpos[x]
                                            : warm ? ui->spos[x]
                                                   : -1;
                                        ui->spos[x] = -1;
                                }
                        }
                        u->sb_reassign |= u->standby != NULL;
                        if (keep) {
                                kept++;
                                continue;
                        }
                        warmed += warm;
                        struct so_restore_ctx rc = {
                            .u = u, .ut = ut, .p = p,
                            .assignments = owner_assignments(u->owner),
                            .cutoff = aagw_wall_ms() - u->conf.window_ms};
                        /* Positions and winners (and the ids an older
                         * version wrote there), then the window's ids. */
                        const char *from = ut->state;
                        changelog_end_t e = changelog_read(
                            u->reader, u->hw_probe, from, p, sb_state,
                            u->conf.scale_out->txn_timeout_ms + 60000,
                            &u->ctl.stop, so_restore_rec, so_restore_tick,
                            &rc, &records, &bytes, err, sizeof(err));
                        if (!rc.failed && e == CHANGELOG_DONE && ut->ids[0]) {
                                from = ut->ids;
                                e    = changelog_read(
                                    u->reader, u->hw_probe, from, p, sb_ids,
                                    u->conf.scale_out->txn_timeout_ms + 60000,
                                    &u->ctl.stop, so_restore_rec,
                                    so_restore_tick, &rc, &records, &bytes,
                                    err, sizeof(err));
                        }
                        ids += rc.ids;
                        expired += rc.expired;
                        if (rc.failed || e == CHANGELOG_FAILED) {
                                ufail(u, "member %s: restoring %s [%d]: %s",
                                      u->conf.scale_out->member, from,
                                      (int)p, rc.failed ? rc.err : err);
                                return -1;
                        }
                        int seed = e == CHANGELOG_DONE && !rc.pos && !sb_pos
                                           ? so_seed(u, ut, p)
                                           : 0;
                        if (seed < 0)
                                return -1;
                        if (seed > 0)
                                e = CHANGELOG_ABANDONED;
                        if (rc.unknown)
                                aagw_log(AAGW_LOG_INFO, "UNIFY",
                                         "unify@%s: %s [%d]: %zu positions of "
                                         "inputs not discovered yet; they "
                                         "start from the beginning",
                                         u->site, ut->state, (int)p,
                                         rc.unknown);
                        if (u->ops->fold_commit(u->st, true, err,
                                                sizeof(err))) {
                                ufail(u, "storing what %s holds: %s",
                                      ut->state, err);
                                return -1;
                        }
                        if (e == CHANGELOG_ABANDONED)
                                /* Stopping, or the group moved on: the
                                 * next assignment is restored afresh. */
                                return atomic_load(&u->ctl.state) ==
                                               AAGW_FLOW_FAILED
                                           ? -1
                                           : 0;
                        parts++;
                }
                so_positions(u, ut);
                ut->restored = true;
                if (nn < sizeof(names))
                        nn += (size_t)snprintf(names + nn, sizeof(names) - nn,
                                               "%s%s", nn ? ", " : "",
                                               ut->out);
        }
        int64_t ms = aagw_mono_ms() - t0;
        ADD(u->restores, (uint64_t)parts);
        ADD(u->restore_ms_total, (uint64_t)ms);
        ADD(u->restored_records, (uint64_t)records);
        so_publish(u);
        pthread_mutex_lock(&u->owned_lock);
        memcpy(owned, u->owned, sizeof(owned));
        pthread_mutex_unlock(&u->owned_lock);
        so_kept_clear(u);
        if (parts)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s restored %d partitions of %s "
                         "from their changelogs: %" PRId64
                         " records, %" PRId64 " bytes in %" PRId64
                         " ms (%" PRId64 " ids, %" PRId64
                         " of them past unify.window: skipped; %d "
                         "partitions warm: read on from the standby's "
                         "offsets)",
                         u->site, u->conf.scale_out->member, parts, names,
                         records, bytes, ms, ids, expired, warmed);
        if (kept)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s kept %d partitions it had "
                         "before the rebalance (their changelogs unchanged "
                         "since it committed them): not read again",
                         u->site, u->conf.scale_out->member, kept);
        if (u->lost_ms) {
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s: rebalance done in %" PRId64
                         " ms; owns %s",
                         u->site, u->conf.scale_out->member,
                         aagw_mono_ms() - u->lost_ms,
                         owned[0] ? owned : "none");
                u->lost_ms = 0;
        }
        so_reassign(u);
        return 0;
}

/* ------------------------------------------------- SCALE-OUT: STANDBY --- */

/*
 * scale_out.standby: every process keeps a warm copy of the output
 * partitions the others own.  An assign-only read_committed consumer
 * ('standby') reads the state and ids partitions of every output
 * partition this process does not own, from where it got to (ut->sb_next)
 * or their beginning, and folds each record in as a restore does: ids
 * and winners into the decider (stored at once), positions into the
 * inputs' 'spos'.  When the process gains such a partition, its restore
 * takes the positions from 'spos' and reads the changelogs from
 * ut->sb_next on: what was written since the standby's last read, not
 * the whole changelog (so_restore()).  A partition it owned and lost
 * starts over from the beginning (its standby offsets were given up at
 * the gain: the process's own state stopped at its last commit, which
 * no offset names).  Every process reads every changelog, as it reads
 * every input.
 */

/* Take changelog record 'm' of the standby into the state.  Returns 0, or
 * -1 with the reason in 'err'. */
static int sb_apply(aagw_unify_t *u, const rd_kafka_message_t *m,
                    int64_t cutoff, char *err, size_t err_size) {
        const char          *topic = rd_kafka_topic_name(m->rkt);
        struct utopic       *ut    = NULL;
        struct changelog_rec c;
        int32_t              p     = m->partition;
        size_t               idx   = 0;

        for (size_t t = 0; t < u->ntopics && !ut; t++) {
                struct utopic *x = u->topics[t];
                if (!x->sb_next || p < 0 || p >= x->out_parts)
                        continue;
                if (!strcmp(topic, x->state)) {
                        ut  = x;
                        idx = (size_t)p;
                } else if (x->ids[0] && !strcmp(topic, x->ids)) {
                        ut  = x;
                        idx = (size_t)x->out_parts + (size_t)p;
                }
        }
        /* Owned meanwhile (the restore reads it), or read already. */
        if (!ut || so_owns(u, p) ||
            (ut->sb_next[idx] >= 0 && m->offset < ut->sb_next[idx]))
                return 0;
        ut->sb_next[idx] = m->offset + 1;
        if (!changelog_decode(m->key, m->key_len, m->payload, m->len, &c))
                return 0; /* (another version's: skipped, as a restore) */
        if (c.kind == CHANGELOG_POS) {
                struct uinput *ui = input_of(ut, c.topic);
                if (!ui || c.partition < 0)
                        return 0;
                if ((c.partition >= ui->nparts &&
                     uinput_resize(ui, c.partition + 1)) ||
                    opos_fit(ut, ui)) {
                        snprintf(err, err_size, "out of memory");
                        return -1;
                }
                ui->spos[(size_t)c.partition * ut->out_parts + p] = c.offset;
                return 0;
        }
        if (c.kind == CHANGELOG_ID && c.time_ms < cutoff)
                return 0;
        return restore_decision(u, &c, err, err_size);
}

/* Give the standby every changelog partition of an output partition this
 * process does not own, from where it got to. */
static void sb_assign(aagw_unify_t *u) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(16);

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->state_rkt || ut->out_parts <= 0)
                        continue;
                if (!ut->sb_next) {
                        size_t n = 2 * (size_t)ut->out_parts;
                        if (!(ut->sb_next = malloc(n * sizeof(int64_t))))
                                continue; /* (cold restores: only slower) */
                        for (size_t k = 0; k < n; k++)
                                ut->sb_next[k] = -1;
                }
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        int64_t s = ut->sb_next[p],
                                i = ut->sb_next[ut->out_parts + p];
                        if (so_owns(u, p))
                                continue;
                        rd_kafka_topic_partition_list_add(l, ut->state, p)
                            ->offset = s >= 0 ? s : RD_KAFKA_OFFSET_BEGINNING;
                        if (ut->ids[0])
                                rd_kafka_topic_partition_list_add(l, ut->ids,
                                                                  p)
                                    ->offset =
                                    i >= 0 ? i : RD_KAFKA_OFFSET_BEGINNING;
                }
        }
        rd_kafka_resp_err_t err = rd_kafka_assign(u->standby, l);
        if (err)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: the standby's %d changelog "
                         "partitions: %s (tried again)",
                         u->site, u->conf.scale_out->member, l->cnt,
                         rd_kafka_err2str(err));
        else
                u->sb_reassign = false;
        rd_kafka_topic_partition_list_destroy(l);
}

/* Serve the standby: reassign after a change, fold in what arrived.
 * Returns 0, or -1 (the stage failed). */
static int sb_poll(aagw_unify_t *u) {
        rd_kafka_message_t *msgs[512];
        char                err[512];
        int64_t             sig = owner_assignments(u->owner) * 1024;

        for (size_t t = 0; t < u->ntopics; t++)
                sig += u->topics[t]->ready && u->topics[t]->state_rkt;
        if (u->sb_reassign || sig != u->sb_sig) {
                u->sb_sig = sig;
                sb_assign(u);
        }
        ssize_t n = rd_kafka_consume_batch_queue(u->sbq, 0, msgs, 512);
        int64_t cutoff = aagw_wall_ms() - u->conf.window_ms;
        int     rc     = 0;
        for (ssize_t i = 0; i < n; i++) {
                if (!rc && !msgs[i]->err &&
                    sb_apply(u, msgs[i], cutoff, err, sizeof(err)))
                        rc = -1;
                rd_kafka_message_destroy(msgs[i]);
        }
        /* Stored at once: nothing the standby read waits in memory. */
        if (!rc && n > 0 &&
            u->ops->fold_commit(u->st, true, err, sizeof(err)))
                rc = -1;
        if (rc)
                ufail(u, "member %s: the standby: %s",
                      u->conf.scale_out->member, err);
        return rc;
}

/* ------------------------------------------ SCALE-OUT: MEMBERSHIP --- */

/* owner.c: partitions gained (an assignment). */
static void so_gained(void *opaque,
                      const rd_kafka_topic_partition_list_t *parts) {
        aagw_unify_t *u = opaque;

        INC(u->rebalances);
        if (!u->lost_ms)
                u->lost_ms = aagw_mono_ms();
        aagw_log(AAGW_LOG_INFO, "UNIFY",
                 "unify@%s: member %s gained %d work partitions of %s: "
                 "restoring their state",
                 u->site, u->conf.scale_out->member, parts->cnt, u->work);
        for (size_t t = 0; t < u->ntopics; t++)
                u->topics[t]->restored = false;
        u->need_restore = true;
        u->sb_reassign  = true;
}

/* owner.c: a rebalance is about to take every owned partition: commit
 * what the open transaction holds while the assignment still fences (a
 * member the group moved on from is refused: FENCED, and so_lost()
 * runs). */
static void so_revoking(void *opaque,
                        const rd_kafka_topic_partition_list_t *parts) {
        aagw_unify_t *u = opaque;
        (void)parts;
        if (u->txn_open && !u->need_renew)
                so_commit(u);
        /* Committed, and still the owner (a fenced commit lost all). */
        if (!u->txn_open && !u->need_renew && !atomic_load(&u->ctl.stop) &&
            owner_partitions(u->owner)->cnt)
                so_kept_note(u);
}

/* owner.c: partitions lost (revoked, or fenced): stop writing at once. */
static void so_lost(void *opaque,
                    const rd_kafka_topic_partition_list_t *parts) {
        aagw_unify_t *u       = opaque;
        bool          open    = u->txn_open;
        int64_t       records = u->txn_records;
        char          err[512], what[96];

        if (!u->lost_ms)
                u->lost_ms = aagw_mono_ms();
        /* Only a clean revocation right after so_revoking() keeps. */
        if (!u->kept_pending)
                so_kept_clear(u);
        u->kept_pending = false;
        if (u->txn_open) {
                owner_result_t r = owner_abort(u->owner, err, sizeof(err));
                u->txn_open      = false;
                if (r != AAGW_OWNER_OK) {
                        /* Its records stay aborted (the coordinator ends
                         * the transaction); a new owner goes on. */
                        so_fatal(u, err);
                        rd_kafka_purge(u->out_producer,
                                       RD_KAFKA_PURGE_F_QUEUE |
                                           RD_KAFKA_PURGE_F_INFLIGHT);
                }
        }
        if (open)
                snprintf(what, sizeof(what),
                         "its open transaction (%" PRId64
                         " output records) is aborted",
                         records);
        else
                snprintf(what, sizeof(what), "no transaction was open");
        aagw_log(AAGW_LOG_INFO, "UNIFY",
                 "unify@%s: member %s lost %d work partitions of %s: %s; "
                 "inputs wait for the next assignment",
                 u->site, u->conf.scale_out->member, parts->cnt, u->work,
                 what);
        if (so_drain(u))
                return;
        u->txn_poisoned = false;
        if (u->ops->drop(u->st)) {
                ufail(u, "out of memory");
                return;
        }
        for (size_t t = 0; t < u->ntopics; t++)
                u->topics[t]->restored = false;
        rd_kafka_assign(u->consumer, NULL);
        u->sb_reassign = true;
        so_publish(u);
}

/* Delivery reports of the owner's producer: records carry a token
 * (output records) or none (changelog records, copied). */
static void so_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        (void)rk;
        if (m->_private)
                on_delivery(opaque, m->_private, m);
}

/* Make the changelog topics of 'ut' if missing, both with as many
 * partitions as its output: the state topic (compacted) and, for a dedup
 * topic, the ids topic (deleting after unify.window and a margin:
 * changelog_ids_conf()).
 * An ids topic that is there gets its settings checked and, if they
 * differ (unify.window changed), set again; if that is refused, the
 * stage goes on with a warning while no id inside the window can be
 * lost (or the settings cannot be read), and fails otherwise.  Returns 0, or -1 (tried again at the next
 * discovery; the stage fails if the cluster refused). */
static int so_ids_topic(aagw_unify_t *u, struct utopic *ut,
                        const struct rd_kafka_metadata *md);

static int so_state_topic(aagw_unify_t *u, struct utopic *ut,
                          const struct rd_kafka_metadata *md) {
        static const char *const conf[] = {"cleanup.policy", "compact", NULL};
        char                     err[1024];
        int                      have;

        char name[3 * AAGW_TOPIC_MAX], ids[3 * AAGW_TOPIC_MAX];
        snprintf(ids, sizeof(ids), "aagw.%s.%s.ids.%s", u->conf.gateway_id,
                 u->site, ut->out);
        if ((size_t)snprintf(name, sizeof(name), "aagw.%s.%s.state.%s",
                             u->conf.gateway_id, u->site, ut->out) >=
                sizeof(ut->state) ||
            strlen(ids) >= sizeof(ut->ids)) {
                ufail(u, "the changelog of %s, %s, is longer than Kafka's "
                         "%d bytes for a topic name (shorten gateway.id or "
                         "the unified topic's name)",
                      ut->out, name, AAGW_TOPIC_MAX);
                return -1;
        }
        memcpy(ut->state, name, strlen(name) + 1);
        memcpy(ut->ids, ids, strlen(ids) + 1);
        have = replicator_md_partitions(md, ut->state);
        if (have < 0) {
                int rc = aagw_kafka_topic_create_conf(u->admin, ut->state,
                                                      ut->out_parts, conf,
                                                      30000, err, sizeof(err));
                if (rc == -1) {
                        ufail(u, "creating the changelog %s at %s: %s",
                              ut->state, u->site, err);
                        return -1;
                }
                if (rc == -2) {
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: creating the changelog %s: %s; "
                                 "trying again",
                                 u->site, ut->state, err);
                        return -1;
                }
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: changelog %s: %d partitions, compacted",
                         u->site, ut->state, ut->out_parts);
        } else if (have != ut->out_parts) {
                ufail(u, "changelog %s has %d partitions, its output %s %d: "
                         "they must match (delete the changelog only with "
                         "every process of the site stopped)",
                      ut->state, have, ut->out, ut->out_parts);
                return -1;
        }
        if (ut->mode != AAGW_UNIFY_DEDUP) {
                ut->ids[0] = '\0'; /* (lww: winners only) */
        } else if (so_ids_topic(u, ut, md)) {
                return -1;
        }
        if ((!ut->state_rkt &&
             !(ut->state_rkt = rd_kafka_topic_new(u->out_producer, ut->state,
                                                  NULL))) ||
            (ut->ids[0] && !ut->ids_rkt &&
             !(ut->ids_rkt = rd_kafka_topic_new(u->out_producer, ut->ids,
                                                NULL)))) {
                ufail(u, "out of memory");
                return -1;
        }
        replicator_refresh_leaders(u->out_producer, ut->state, 5000);
        if (ut->ids[0])
                replicator_refresh_leaders(u->out_producer, ut->ids, 5000);
        return 0;
}

/* so_state_topic() for the ids topic of a dedup topic 'ut'. */
static int so_ids_topic(aagw_unify_t *u, struct utopic *ut,
                        const struct rd_kafka_metadata *md) {
        char err[1024];
        int  have = replicator_md_partitions(md, ut->ids);

        if (have >= 0 && have != ut->out_parts) {
                ufail(u, "changelog %s has %d partitions, its output %s %d: "
                         "they must match (delete the changelog only with "
                         "every process of the site stopped)",
                      ut->ids, have, ut->out, ut->out_parts);
                return -1;
        }
        switch (changelog_ids_topic(u->admin, ut->ids, ut->out_parts,
                                    have >= 0, &u->ids_conf, 30000, err,
                                    sizeof(err))) {
        case CHANGELOG_IDS_CREATED:
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: changelog %s: %d partitions, ids kept "
                         "%" PRId64 " s (unify.window %" PRId64
                         " s and a margin), segments of %" PRId64 " s",
                         u->site, ut->ids, ut->out_parts,
                         u->ids_conf.retention_ms / 1000,
                         u->conf.window_ms / 1000,
                         u->ids_conf.segment_ms / 1000);
                break;
        case CHANGELOG_IDS_KEPT:
                break;
        case CHANGELOG_IDS_ALTERED:
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: changelog %s (unify.window %" PRId64
                         " s): %s",
                         u->site, ut->ids, u->conf.window_ms / 1000, err);
                break;
        case CHANGELOG_IDS_STALE:
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: changelog %s (unify.window %" PRId64
                         " s): %s; going on with the topic as it is: set "
                         "cleanup.policy=delete retention.ms=%" PRId64
                         " retention.bytes=-1 segment.ms=%" PRId64
                         " on it by hand, or grant aagw DescribeConfigs and "
                         "AlterConfigs on it",
                         u->site, ut->ids, u->conf.window_ms / 1000, err,
                         u->ids_conf.retention_ms, u->ids_conf.segment_ms);
                break;
        case CHANGELOG_IDS_REFUSED:
                if (have < 0) {
                        ufail(u, "creating the changelog %s at %s: %s",
                              ut->ids, u->site, err);
                        return -1;
                }
                ufail(u, "changelog %s (unify.window %" PRId64 " s): %s; "
                         "with these settings ids inside the window would "
                         "be removed and a new owner would deliver them "
                         "again: set them by hand, or grant aagw "
                         "AlterConfigs on the topic",
                      ut->ids, u->conf.window_ms / 1000, err);
                return -1;
        case CHANGELOG_IDS_RETRY:
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: changelog %s: %s; trying again", u->site,
                         ut->ids, err);
                return -1;
        }
        return 0;
}

/* This process's owner: its membership and transactional producer
 * (group, transactional.id from the gateway id, site and member).
 * Returns 0, or -1 (the stage failed). */
static int so_owner(aagw_unify_t *u) {
        const struct aagw_scale_out *so = u->conf.scale_out;
        const char *group = u->owners_group;
        char txn_id[AAGW_TOPIC_MAX + 64], err[512];

        snprintf(txn_id, sizeof(txn_id), "aagw.%s.%s.unify.%s",
                 u->conf.gateway_id, u->site, so->member);
        struct owner_conf oc = {
            .bootstraps           = u->conf.bootstraps,
            .props                = u->conf.props,
            .prop_cnt             = u->conf.prop_cnt,
            .group                = group,
            .topic                = u->work,
            .member               = so->member,
            .transactional_id     = txn_id,
            .session_timeout_ms   = so->session_timeout_ms,
            .max_poll_interval_ms = so->session_timeout_ms,
            .txn_timeout_ms       = so->txn_timeout_ms,
            .on_gained            = so_gained,
            .on_lost              = so_lost,
            .on_revoking          = so_revoking,
            .opaque               = u,
            .dr_msg_cb            = so_dr,
            .dr_opaque            = u,
            .stop                 = &u->ctl.stop};
        if (!(u->owner = owner_new(&oc, err, sizeof(err)))) {
                ufail(u, "member %s: %s", so->member, err);
                return -1;
        }
        u->out_producer = owner_producer(u->owner);
        aagw_log(AAGW_LOG_INFO, "UNIFY",
                 "unify@%s: member %s of group %s (%s, %d partitions): "
                 "output partition p is decided here while it owns "
                 "p %% %d",
                 u->site, so->member, group, u->work, (int)u->work_parts,
                 (int)u->work_parts);
        return 0;
}

/* Join the site's unify owners: the work topic, the owner.  Returns 0,
 * or -1 (the stage failed). */
static int so_start(aagw_unify_t *u) {
        const struct aagw_scale_out *so = u->conf.scale_out;
        char              err[512];
        int               rc;
        /* The high watermark itself: a read_committed client's
         * ListOffsets answers the last stable offset. */
        static const char *const hw_extra[] = {
            "isolation.level", "read_uncommitted",
            "enable.auto.commit", "false", NULL};

        u->scale      = true;
        u->work_parts = so->work_partitions > 0 ? so->work_partitions : 12;
        if (!(u->refused = refused_new(SO_REFUSED_MAX))) {
                ufail(u, "member %s: out of memory", so->member);
                return -1;
        }
        snprintf(u->work, sizeof(u->work), "aagw.%s.%s.unify.work",
                 u->conf.gateway_id, u->site);
        if (!(u->hw_probe = make_client(u, RD_KAFKA_CONSUMER, "reader",
                                        hw_extra, err, sizeof(err)))) {
                ufail(u, "member %s: %s", so->member, err);
                return -1;
        }
        if (so->standby) {
                char sb_group[AAGW_TOPIC_MAX + 16];
                snprintf(sb_group, sizeof(sb_group), "%s.standby",
                         u->owners_group);
                const char *sb_extra[] = {
                    "group.id", sb_group, /* never joined: assign only */
                    "enable.auto.commit", "false",
                    "enable.partition.eof", "false",
                    "isolation.level", "read_committed", NULL};
                if (!(u->standby = make_client(u, RD_KAFKA_CONSUMER,
                                               "standby", sb_extra, err,
                                               sizeof(err)))) {
                        ufail(u, "member %s: %s", so->member, err);
                        return -1;
                }
                u->sbq         = rd_kafka_queue_get_consumer(u->standby);
                u->sb_reassign = true;
        }
        rc = owner_work_topic(u->admin, u->work, u->work_parts, err,
                              sizeof(err));
        if (rc < 0) {
                ufail(u, "member %s: the owners' work topic at %s: %s",
                      so->member, u->site, err);
                return -1;
        }
        if (rc != u->work_parts) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s has %d partitions, not "
                         "scale_out.work_partitions %d: going by the topic "
                         "(every member must use the same count)",
                         u->site, u->work, rc, (int)u->work_parts);
                u->work_parts = rc;
        }
        return so_owner(u);
}

/* A new transactional producer after so_fatal() (owner_renew(): the
 * membership and what it owns stay): what was in flight is dropped, the
 * topics' handles move to the new producer, and the inputs go back to
 * the committed positions, as after an abort.  If the group moved on
 * meanwhile, the owner says so at its next poll, as always.  Returns 0,
 * or -1 (the stage failed). */
static int so_renew(aagw_unify_t *u) {
        char err[512];

        u->need_renew = false;
        rd_kafka_purge(u->out_producer,
                       RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        if (so_drain(u))
                return -1;
        so_kept_clear(u);
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (ut->out_rkt)
                        rd_kafka_topic_destroy(ut->out_rkt);
                if (ut->state_rkt)
                        rd_kafka_topic_destroy(ut->state_rkt);
                if (ut->ids_rkt)
                        rd_kafka_topic_destroy(ut->ids_rkt);
                ut->out_rkt = ut->state_rkt = ut->ids_rkt = NULL;
        }
        u->out_producer = u->producer; /* (no handle of the old one left) */
        if (owner_renew(u->owner, err, sizeof(err)) != AAGW_OWNER_OK) {
                ufail(u, "member %s: %s", u->conf.scale_out->member, err);
                return -1;
        }
        u->out_producer = owner_producer(u->owner);
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                if (!(ut->out_rkt = rd_kafka_topic_new(u->out_producer,
                                                       ut->out, NULL)) ||
                    !(ut->state_rkt = rd_kafka_topic_new(u->out_producer,
                                                         ut->state, NULL)) ||
                    (ut->ids[0] &&
                     !(ut->ids_rkt = rd_kafka_topic_new(u->out_producer,
                                                        ut->ids, NULL)))) {
                        ufail(u, "out of memory");
                        return -1;
                }
        }
        so_redo(u);
        return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
}

/* One turn of the owner's side in the stage's loop: membership,
 * restore, the commit due.  Returns 0, or -1 if the stage failed. */
static int so_poll(aagw_unify_t *u) {
        char    err[512];
        int64_t now;

        if (owner_poll(u->owner, 0, err, sizeof(err)) == AAGW_OWNER_FATAL) {
                ufail(u, "member %s: %s", u->conf.scale_out->member, err);
                return -1;
        }
        if (u->need_renew)
                return 0; /* the stage's loop renews the producer first */
        if (u->need_restore && so_restore(u))
                return -1;
        if (u->standby && sb_poll(u))
                return -1;
        now = aagw_mono_ms();
        int iv = u->conf.scale_out->commit_interval_ms > 0
                     ? u->conf.scale_out->commit_interval_ms
                     : 200;
        if (now - (u->txn_open ? u->txn_started_ms : u->last_commit_ms) >=
            iv) {
                u->last_commit_ms = now;
                return so_commit(u);
        }
        return 0;
}

/* -------------------------------------------------------------- THREAD --- */

/* Inputs whose fetch stands still while their leader holds more (the
 * stall watch): a new assignment at the
 * stage's own positions, on the refreshed metadata, starts them again.
 * Only looked at with the queue empty, so the stage's own backlog is
 * never taken for a stall. */
static void restart_stalled(aagw_unify_t *u, int64_t now) {
        struct aagw_stall_report r[16];
        char                     who[AAGW_ALIAS_MAX + 8];
        size_t n = aagw_stall_watch_stalled(u->stalls, now, r, 16);

        if (!n)
                return;
        snprintf(who, sizeof(who), "unify@%s", u->site);
        aagw_fetch_stalls_note(u->consumer, who, r, n);
        rd_kafka_assign(u->consumer, NULL);
        reassign(u);
        INC(u->fetch_restarts);
}

static void *unify_main(void *arg) {
        aagw_unify_t          *u = arg;
        rd_kafka_message_t **msgs = calloc(BATCH_MAX, sizeof(*msgs));
        int                  refresh_ms = u->conf.refresh_ms > 0
                                              ? u->conf.refresh_ms
                                              : 5000;

        if (!msgs) {
                ufail(u, "out of memory");
                return NULL;
        }
        if (u->conf.scale_out && u->conf.scale_out->enabled && so_start(u)) {
                free(msgs);
                return NULL;
        }
        /* Woken by records at the consumer and by delivery reports
         * (aagw_qwait(), replicator/kconf.c). */
        rd_kafka_queue_t *pq    = rd_kafka_queue_get_main(u->out_producer);
        rd_kafka_queue_t *qs[2] = {u->cq, pq};
        aagw_qwait_t     *qwait = aagw_qwait_new(qs, 2);
        int64_t           last_poke_ms = 0;

        discover(u);
        u->last_refresh_ms = aagw_mono_ms();
        if (atomic_load(&u->ctl.state) == AAGW_FLOW_STARTING)
                atomic_store(&u->ctl.state, AAGW_FLOW_RUNNING);
        while (!atomic_load(&u->ctl.stop)) {
                if (aagw_mono_ms() - u->last_refresh_ms >=
                    (u->inputs_leaderless && refresh_ms > LEADER_WAIT_MS
                         ? LEADER_WAIT_MS
                         : refresh_ms)) {
                        discover(u);
                        u->last_refresh_ms = aagw_mono_ms();
                }
                if (u->scale && u->need_renew) {
                        /* The wait holds the old producer's queue. */
                        aagw_qwait_destroy(qwait);
                        rd_kafka_queue_destroy(pq);
                        qwait = NULL;
                        pq    = NULL;
                        if (so_renew(u))
                                break;
                        pq    = rd_kafka_queue_get_main(u->out_producer);
                        qs[1] = pq;
                        qwait = aagw_qwait_new(qs, 2);
                }
                if (u->scale && so_poll(u))
                        break;
                /* What the queue holds, without waiting (waiting for a
                 * full batch holds a record for the whole timeout under
                 * light traffic); under load the batches fill by
                 * themselves. */
                ssize_t n =
                    rd_kafka_consume_batch_queue(u->cq, 0, msgs, BATCH_MAX);
                if (n > 0) {
                        u->batch_no++;
                        process(u, msgs, (size_t)n);
                        for (ssize_t i = 0; i < n; i++)
                                if (u->items[i].m)
                                        rd_kafka_message_destroy(
                                            u->items[i].m);
                }
                rd_kafka_poll(u->out_producer, 0);
                if (!u->scale)
                        commit_ready(u);
                /* A short poll and an empty queue: the only time an
                 * input that stands still can be a stall. */
                int64_t now = aagw_mono_ms();
                if (n < BATCH_MAX && now - last_poke_ms >= STALL_LOOK_MS &&
                    !rd_kafka_queue_length(u->cq)) {
                        last_poke_ms = now;
                        aagw_stall_watch_look(u->stalls, now, STALL_LOOK_MS);
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
        if (pq)
                rd_kafka_queue_destroy(pq);
        /* Drain: what was produced is acknowledged and committed, or the
         * next start finds it in the output.  A process that stops gives
         * it what a flow gives its own (3 s: a stop has 5 s in all). */
        int64_t deadline =
            aagw_mono_ms() + (aagw_kafka_process_stopping() ? 3000 : 10000);
        if (u->scale) {
                /* What the open transaction holds is committed (or
                 * aborted and redone by the next owner). */
                if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED &&
                    u->owner && !u->need_renew)
                        so_commit(u);
                free(msgs);
                if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED)
                        atomic_store(&u->ctl.state, AAGW_FLOW_STOPPED);
                return NULL;
        }
        seal_epoch(u);
        while (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED &&
               atomic_load(&u->inflight) > 0 && aagw_mono_ms() < deadline) {
                rd_kafka_poll(u->producer, 20);
                commit_ready(u);
        }
        if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED) {
                rd_kafka_poll(u->producer, 0);
                commit_ready(u);
        }
        free(msgs);
        if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED)
                atomic_store(&u->ctl.state, AAGW_FLOW_STOPPED);
        return NULL;
}

/* ---------------------------------------------------------- LIFECYCLE --- */

static rd_kafka_t *make_client(aagw_unify_t *u, rd_kafka_type_t type,
                               const char *role, const char *const *extra,
                               char *errstr, size_t errstr_size) {
        struct replicator_client c = {.type       = type,
                                      .who        = u->who,
                                      .bootstraps = u->conf.bootstraps,
                                      .props      = u->conf.props,
                                      .prop_cnt   = u->conf.prop_cnt,
                                      .opaque     = u,
                                      .delivery   = &u->delivery};
        return replicator_client(&c, role, extra, errstr, errstr_size);
}

aagw_unify_t *aagw_unify_new(const struct aagw_unify_conf *c, char *errstr,
                             size_t errstr_size) {
        aagw_unify_t *u = calloc(1, sizeof(*u));
        char          group[AAGW_ALIAS_MAX * 2 + 64], rgroup[sizeof(group) + 8];
        const char   *hp = c->header_prefix ? c->header_prefix : "aagw.";

        if (!u) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        u->conf        = *c;
        if (u->conf.window_ms <= 0)
                u->conf.window_ms = 24 * 3600 * 1000LL;
        changelog_ids_conf(u->conf.window_ms, &u->ids_conf);
        u->ops         = c->state;
        u->st          = c->state_opaque;
        u->tokens.size = sizeof(struct token);
        snprintf(u->site, sizeof(u->site), "%s", c->site);
        u->reach.cluster = u->site;
        snprintf(u->who, sizeof(u->who), "unify@%s", c->site);
        if (c->scale_out && c->scale_out->enabled)
                snprintf(u->owners_group, sizeof(u->owners_group),
                         "aagw.%s.%s.unify", c->gateway_id, c->site);
        replicator_ctl_init(&u->ctl, "UNIFY", u->who);
        pthread_mutex_init(&u->owned_lock, NULL);
        u->delivery = (struct replicator_delivery){on_delivery, u};
        snprintf(u->in_hdr, sizeof(u->in_hdr), "%sin", hp);
        snprintf(u->prov_hdr, sizeof(u->prov_hdr), "%sprov", hp);
        u->items    = calloc(BATCH_MAX, sizeof(*u->items));
        u->verdicts = calloc(BATCH_MAX, sizeof(*u->verdicts));
        u->recs     = calloc(BATCH_MAX, sizeof(*u->recs));
        u->ritem    = calloc(BATCH_MAX, sizeof(*u->ritem));
        if (!u->items || !u->verdicts || !u->recs || !u->ritem) {
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
        const char *probe_kv[REPLICATOR_END_PROBE_KV];
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
        if (!(u->stalls = aagw_stall_watch_new(u->consumer))) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                goto fail;
        }
        if (!(u->producer = make_client(u, RD_KAFKA_PRODUCER, "producer",
                                        aagw_kafka_producer_props, errstr,
                                        errstr_size)) ||
            !(u->reader = make_client(u, RD_KAFKA_CONSUMER, "reader",
                                      reader_extra, errstr, errstr_size)) ||
            !(u->end_probe = make_client(
                  u, RD_KAFKA_CONSUMER, "end-probe",
                  replicator_end_probe_props(rgroup, probe_kv), errstr,
                  errstr_size)) ||
            !(u->admin = make_client(u, RD_KAFKA_PRODUCER, "admin", NULL,
                                     errstr, errstr_size)))
                goto fail;
        u->out_producer = u->producer;
        atomic_store(&u->ctl.state, AAGW_FLOW_STARTING);
        return u;
fail:
        aagw_unify_destroy(u);
        return NULL;
}

int aagw_unify_start(aagw_unify_t *u, char *errstr, size_t errstr_size) {
        int err = pthread_create(&u->thread, NULL, unify_main, u);
        if (err) {
                snprintf(errstr, errstr_size, "cannot start a thread: %s",
                         strerror(err));
                return -1;
        }
        u->thread_started = true;
        return 0;
}

void aagw_unify_stop(aagw_unify_t *u) {
        if (u)
                atomic_store(&u->ctl.stop, true);
}

void aagw_unify_destroy(aagw_unify_t *u) {
        if (!u)
                return;
        atomic_store(&u->ctl.stop, true);
        if (u->thread_started)
                pthread_join(u->thread, NULL);
        aagw_stall_watch_destroy(u->stalls);
        if (u->out_producer) {
                /* Unacknowledged records are not committed: a restart
                 * finds them in the output or decides them again.  Their
                 * delivery reports release the input records they hold,
                 * which must happen before the consumer is destroyed:
                 * rd_kafka_destroy() waits for every message of its own
                 * and hung for good after a failed stage (a full state
                 * dir, a deleted input topic). */
                int64_t deadline = aagw_mono_ms() + 5000;
                rd_kafka_purge(u->out_producer, RD_KAFKA_PURGE_F_QUEUE |
                                                    RD_KAFKA_PURGE_F_INFLIGHT);
                do
                        rd_kafka_poll(u->out_producer, 10);
                while (atomic_load(&u->inflight) > 0 &&
                       aagw_mono_ms() < deadline);
        }
        if (u->consumer) {
                replicator_consumer_close(u->consumer, REPLICATOR_CLOSE_MS());
                if (u->cq)
                        rd_kafka_queue_destroy(u->cq);
                rd_kafka_destroy_flags(u->consumer,
                                       RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                if (u->topics[t]->out_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->out_rkt);
                        u->topics[t]->out_rkt = NULL;
                }
                if (u->topics[t]->state_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->state_rkt);
                        u->topics[t]->state_rkt = NULL;
                }
                if (u->topics[t]->ids_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->ids_rkt);
                        u->topics[t]->ids_rkt = NULL;
                }
        }
        /* Aborts what is still open, leaves the group: the others take
         * over at once. */
        owner_destroy(u->owner);
        refused_destroy(u->refused);
        replicator_consumer_close(u->reader, REPLICATOR_CLOSE_MS());
        replicator_consumer_close(u->end_probe, REPLICATOR_CLOSE_MS());
        if (u->sbq)
                rd_kafka_queue_destroy(u->sbq);
        replicator_destroy_clients(
            (const struct replicator_doomed[]){
                {u->producer, 0},
                {u->reader, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {u->end_probe, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {u->admin, 0},
                {u->hw_probe, 0},
                {u->standby, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE}},
            6);
        for (size_t t = 0; t < u->ntopics; t++)
                utopic_free(u->topics[t]);
        aagw_pool_free(&u->tokens);
        free(u->items);
        free(u->verdicts);
        free(u->recs);
        free(u->ritem);
        free(u->hdrs);
        replicator_ctl_deinit(&u->ctl);
        pthread_mutex_destroy(&u->owned_lock);
        free(u);
}

aagw_flow_state_t aagw_unify_state(const aagw_unify_t *u) {
        return (aagw_flow_state_t)atomic_load(&((aagw_unify_t *)u)->ctl.state);
}

const char *aagw_unify_site(const aagw_unify_t *u) {
        return u->site;
}

const char *aagw_unify_owner_group(const aagw_unify_t *u) {
        return u->owners_group;
}

void aagw_unify_error(const aagw_unify_t *uc, char *buf, size_t size) {
        aagw_unify_t *u = (aagw_unify_t *)uc;
        replicator_ctl_error(&u->ctl, buf, size);
}

void aagw_unify_stats(const aagw_unify_t *uc, struct aagw_unify_stats *st) {
        aagw_unify_t *u = (aagw_unify_t *)uc;
        memset(st, 0, sizeof(*st));
#define LD(x) atomic_load_explicit(&u->x, RELAXED)
        st->records_in  = LD(records_in);
        st->records_out = LD(records_out);
        st->accepted    = LD(accepted);
        st->dropped     = LD(dropped);
        st->superseded  = LD(superseded);
        st->identical   = LD(identical);
        st->rejected    = LD(rejected);
        st->diverged    = LD(diverged);
        st->oversized   = LD(oversized);
        st->recovered   = LD(recovered);
        st->replayed    = LD(replayed);
        st->commits     = LD(commits);
        st->fetch_restarts = LD(fetch_restarts);
        st->start_refetches = LD(start_refetches);
        st->inflight    = LD(inflight);
        st->lag         = LD(lag);
        st->down_ms     = aagw_reach_down_ms(&u->reach);
        if (st->down_ms)
                st->lag = -1; /* the watermarks last seen are stale */
        st->topics      = LD(ntopics_pub);
        st->inputs      = LD(ninputs_pub);
        st->rebalances  = LD(rebalances);
        st->restores    = LD(restores);
        st->restore_ms_total = LD(restore_ms_total);
        st->restored_records = LD(restored_records);
        st->fenced      = LD(fenced);
        st->aborted     = LD(aborted);
        st->txn_commits = LD(txn_commits);
        st->owned_partitions = LD(owned_parts);
#undef LD
}

const char *aagw_unify_member(const aagw_unify_t *u) {
        return u->conf.scale_out && u->conf.scale_out->enabled
                   ? u->conf.scale_out->member
                   : NULL;
}

void aagw_unify_owned(const aagw_unify_t *uc, char *buf, size_t size) {
        aagw_unify_t *u = (aagw_unify_t *)uc;
        pthread_mutex_lock(&u->owned_lock);
        snprintf(buf, size, "%s", u->owned[0] ? u->owned : "none");
        pthread_mutex_unlock(&u->owned_lock);
}
