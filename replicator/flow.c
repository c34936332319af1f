/*
 * replicator/flow.c: one replication direction, source -> target.
 *
 * The flow thread owns four clients of its own:
 *   - the source consumer, which assigns itself every partition of the
 *     topics discovery finds (no group distributes them: a restarted
 *     process reads again at once), at offsets it sets itself; it
 *     commits its positions to group aagw.<gateway-id>.<source>-<target>
 *     (never auto-committed, never read back);
 *   - the identity lease: a static member (group.instance.id) of group
 *     aagw.<gateway-id>.<source>-<target>.lease that reads nothing.  A
 *     second process with the same gateway id and site takes the
 *     instance id over, which fences this one (FENCED_INSTANCE_ID): the
 *     flow stops copying and takes the id back once; fenced again, it
 *     fails (lease_fenced());
 *   - the target producer: idempotent, acks=all, unlimited delivery
 *     timeout, so a broker outage stalls the flow instead of losing data;
 *   - a target "reader" (an assign-only consumer) used at assignment to
 *     reconcile the stored position with what the target log holds.
 * Topic creation goes through a fourth handle, kept apart from the data
 * path, because the Admin API can hang or abort a handle on some brokers;
 * the remote topics' creation, growth, configs and ACLs through topics.c
 * and its own two.
 *
 * Partitions.  A source partition is copied to the same partition of the
 * remote topic, never remapped.  When the source has partitions the copy
 * lacks (the source grew, or the copy was made smaller), discovery grows
 * the copy (topics_grow()); until the target producer sees a partition,
 * the source partition is "held": assigned but paused, and read from its
 * reconciled position (the beginning, for a new one) once it exists.  The
 * other partitions and topics keep flowing; a copy that cannot be grown is
 * reported (aagw_flow_missing(), log) with the command that fixes it.
 *
 * Positions.  Every consumed record takes a slot in its partition's ring,
 * in offset order.  A slot is done when the target acknowledged the copy
 * (or the dead-letter copy), or at once when the verdict skips it.  The
 * partition's position advances over the done prefix of the ring only, so
 * it never passes a record the target has not acknowledged.  Positions are
 * saved (pos_save, RocksDB in the gateway) every second, at an unassign
 * and at stop; they are also committed to the group for lag tooling, but
 * never read back from it.
 *
 * Exactly once into the target, without transactions: on assignment the
 * flow reads the target partition from the stored out_next to its end and
 * finds the last record this flow wrote (provenance path ending in
 * source>target, source coordinates in the src or hop header).  It resumes
 * after that record.  Records in flight at a crash are thus either in the
 * target (found, not written again) or not (written again).  Under the
 * prefix policy aagw is the only writer of the target partition, so the
 * result is exact; under identity the same scan skips local records.
 *
 * Scale-out (scale_out.enabled): several processes of one site share the
 * flow; each copies the source partitions of the work partitions its
 * owners' group gives it, in transactions that only the owner can
 * commit, and reconciles a partition it gains against the target's last
 * stable offset.  No identity lease then.  See SCALE-OUT below.
 */
#include "replicator_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

/* Up to a second, each bound at most 2x the one before, so that a
 * quantile read from the buckets tells 5 ms from 10, 50 from 100 and 500
 * from 1000 (a replicator's own waits are a few ms; librdkafka's
 * linger and fetch waits tens; stalls hundreds). */
const int64_t aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 1] = {
    1,   2,   3,   5,    7,    10,   15,   20,    30,    50,    75,   100,
    150, 200, 300, 500,  750,  1000, 2000, 5000,  10000, 30000, 60000};

#define SAVE_INTERVAL_MS 1000
/* How long a stopping flow waits for its in-flight records to be
 * acknowledged, unless aagw_flow_destroy() says otherwise.  A healthy
 * target acknowledges within milliseconds; one that does not answer for
 * 3 s will not answer before the stop must end (5 s), and whatever it
 * did not acknowledge is copied again by the next start. */
#define DRAIN_MS 3000
/* How long reconcile() waits for the target partition to answer (a dead
 * leader is replaced within the broker session timeout, 9 s by default)
 * before it fails the flow rather than guess. */
#define RECONCILE_WAIT_MS 120000
/* Under the identity policy (local producers write the target too, so
 * its log may never end at the watermark for long), how long reconcile()
 * waits for the watermark to be the end of the leader's log before it
 * goes by the watermark anyway (see target_end()). */
#define SETTLE_MAX_MS 15000
/* How long one settle_all() holds for the partitions reconciled after it
 * (one assignment round): every partition waits for it only once. */
#define SETTLE_ALL_AGAIN_MS 2000
/* A fenced identity lease (FENCED_INSTANCE_ID) stops the copy once the
 * records in flight are acknowledged, waited for up to RESTART_DRAIN_MS,
 * and is restarted.  Fenced again within REFENCE_MS of that restart, the
 * flow fails: two processes with one identity would otherwise take the
 * group.instance.id from each other forever. */
#define RESTART_DRAIN_MS 30000
#define REFENCE_MS 60000
/* How long a restarted lease holds the id before the flow copies again:
 * three of its heartbeats, in which the process it fenced learns of it
 * (at its next heartbeat) and stops copying. */
#define LEASE_SETTLE_MS 3000
/* The stall watch (aagw_stall_watch_look()) is looked at no more often:
 * a look reads every partition's position, and a stall takes seconds. */
#define STALL_LOOK_MS 1000
#define MAX_TOPICS 4096
/* Scale-out: how long a suspect (a record refused with its batch, see
 * SCALE-OUT) waits for the records before it, and then for its own
 * answer, to be sent alone.  A few ms normally (linger.ms 5 and a round
 * trip); past this, it goes with the others and stays a suspect. */
#define ALONE_MS 5000
/* Records remembered as refused at once, at most: a refused batch makes
 * every record of it a suspect, and librdkafka batches up to
 * batch.num.messages (10,000) records per partition. */
#define REFUSED_MAX 100000

/* --------------------------------------------------------------- TYPES -- */

struct slot {
        int64_t src_off;
        int64_t out_off;   /* target offset once acked, -1 if not copied */
        int64_t origin_ms; /* for the latency histogram */
        uint8_t done;
};

struct ptrack {
        struct ttrack *tt;
        int32_t        partition;
        bool           assigned;
        bool           held; /* assigned, paused: no target partition yet */
        struct slot   *ring;
        size_t         cap; /* power of two */
        uint64_t       head, tail; /* slot sequence numbers */
        int64_t        next;       /* position: every offset below is done */
        int64_t        read_next;  /* after the last offset taken in */
        int64_t        out_next;   /* target offset after last acked copy */
        int64_t        saved_next, saved_out;
        _Atomic int64_t  high;     /* source high watermark, last seen */
        _Atomic int64_t  pos_pub;  /* 'next', published for stats */
        _Atomic uint64_t records_out;
        /* offset-syncs (offsets issue): the delta target - source of the
         * last sync written, and the rate bound's window */
        bool             sync_known, sync_lossy;
        int64_t          sync_delta;
        int64_t          sync_win_ms;
        int              sync_win_cnt;
        int64_t          hi_seen; /* highest source end offset seen */
        /* The first record after an assignment must be at the
         * assigned offset (replicator_start_take()). */
        struct replicator_start start;
        /* Scale-out: 'next' and 'out_next' as of the last committed
         * transaction; only these are stored and synced. */
        int64_t          c_next, c_out;
};

struct ttrack {
        char               *topic;
        char                remote[AAGW_TOPIC_MAX + 1];
        rd_kafka_topic_t   *rkt; /* target topic handle */
        const aagw_id_rule_t *id_rule;
        int32_t             partition_cnt;
        struct ptrack     **parts;
        int32_t             target_cnt; /* partitions of the copy that the
                                           producer sees; from here on held */
        int32_t             reported;   /* source count last reported as
                                           missing at the target */
        int32_t             missing;    /* partitions held for lack of a
                                           target partition */
        bool                active;  /* found by discovery: assigned */
        bool                refused; /* target lacks partitions */
        bool                seen;    /* in the last discovery */
        bool                is_hb;   /* the MM2 heartbeats topic */
        bool                prechecked; /* aagw_repl_precheck() passed */
        bool                create_warned; /* creation refused, said once */
        bool                release_retry; /* held partitions to start
                                              again (a seek failed) */
        uint32_t            hash; /* XXH32 of the topic (work_of()) */
};

/* The msg_opaque of every produced record: which slot it fills. */
struct token {
        struct replicator_token base; /* the consumed record: its key and
                                         value are produced without a copy,
                                         so it lives until the final
                                         delivery report */
        struct ptrack          *pt;
        uint64_t                seq;
        bool                    dlq;
        bool                    stub; /* the dead-letter copy without key,
                                         value and the producer's headers */
        bool                    alone; /* scale-out: a suspect, sent with
                                          nothing else in flight (see
                                          SCALE-OUT) */
};

struct aagw_flow {
        char                      name[2 * AAGW_ALIAS_MAX + 3];
        char                      who[2 * AAGW_ALIAS_MAX + 4]; /* "NAME:" */
        char                      scope[2 * AAGW_ALIAS_MAX + 8];
        char                      source[AAGW_ALIAS_MAX + 1];
        char                      target[AAGW_ALIAS_MAX + 1];
        char                      dlq_topic[AAGW_TOPIC_MAX + 1];
        char                      hop_hdr[AAGW_AFFIX_MAX + 8];
        const aagw_repl_policy_t *pol;
        struct aagw_flow_conf     conf;
        char                      group[512];    /* the consumer's commits */
        char                      lease_group[520];
        char                      instance[600]; /* the lease's
                                                    group.instance.id */
        rd_kafka_t               *consumer, *producer, *reader, *admin;
        rd_kafka_t               *lease; /* identity lease, NULL: none */
        /* Asks whether a target partition's log ends at its high
         * watermark (replicator_log_ends_at()): assign-only, reports an
         * offset out of range instead of resetting it. */
        rd_kafka_t               *end_probe;
        int64_t                   settled_all_ms; /* settle_all()'s last */
        /* Source metadata and watermarks on connections of their own: on
         * the consumer's, a request waits behind the fetch long-poll of
         * that broker (up to fetch.wait.max.ms), and the flow with it. */
        rd_kafka_t               *meta;
        rd_kafka_queue_t         *cq; /* the consumer's queue */
        rd_kafka_topic_t         *dlq_rkt;
        pthread_t                 thread;
        bool                      thread_started;
        struct replicator_delivery delivery; /* on_delivery() */
        struct replicator_ctl     ctl; /* state, stop, the failure; its
                                          lock also guards the topic
                                          table's shape */
        atomic_bool               paused_req;
        _Atomic int               drain_ms; /* at a stop: DRAIN_MS, or the
                                               destroy's timeout */
        int64_t                   stop_at;  /* when the thread stopped, 0:
                                               running (flow thread) */
        bool                      paused;
        bool                      admin_create_unsupported;
        struct topics            *remote_topics; /* topics.c */
        char                     *target_bs; /* for the fix commands */

        struct ttrack **topics;
        size_t          ntopics;
        struct aagw_pool tokens;
        int64_t         last_save_ms, last_refresh_ms, last_poke_ms;
        aagw_stall_watch_t *stalls;
        _Atomic uint64_t fetch_restarts; /* stalled fetches restarted */
        _Atomic uint64_t consumer_restarts; /* leases restarted after a
                                               fence */
        _Atomic uint64_t start_refetches; /* replicator_start_take() */
        bool            fenced;     /* the lease is FENCED_INSTANCE_ID */
        bool            lease_held; /* the lease joined (was assigned) */
        int64_t         lease_held_ms; /* mono ms when it joined */
        bool            lease_wait; /* fenced: copy nothing until the
                                       restarted lease holds the id */
        int64_t         restart_ms; /* mono ms of the last restart, 0 */
        bool            subscription_dirty;

        int64_t now_cache; /* wall ms, refreshed around each poll */
        uint64_t batch_no;  /* consume batches taken (the start check) */
        rd_kafka_topic_t *last_rkt; /* topic of the previous record */
        struct ttrack    *last_tt;

        /* per-record scratch, reused: no allocation per record */
        struct aagw_header *hdrs;
        size_t              hdr_cap;
        struct aagw_verdict verdict;

        /* counters */
        _Atomic uint64_t records_in, records_out, bytes_out, bad_passed,
            dead_lettered, produce_errors, lat_sum;
        _Atomic uint64_t skipped[AAGW_SKIP_COUNT];
        _Atomic uint64_t diverged; /* path_forged verdicts */
        _Atomic uint64_t rejected[AAGW_REASON_COUNT];
        _Atomic uint64_t lat_buckets[AAGW_LAT_BUCKETS];
        _Atomic int64_t  inflight;
        _Atomic int32_t  ntopics_active, nparts_assigned, ntopics_refused,
            nparts_missing;

        /* offsets issue: MM2 topics, truncation, heartbeat latency */
        struct mm2      *mm2;
        struct takeover *takeover; /* NULL: mm2.takeover off */
        _Atomic uint64_t truncations, truncated_records, resets, target_resets;
        _Atomic int64_t  hb_latency_ms, hb_last_ms;
        struct aagw_reach src_reach, tgt_reach; /* discovery, prober */
        aagw_prober_t    *prober; /* pings the target (admin client) */

        /* Scale-out (conf.scale_out enabled; see SCALE-OUT below).  'out'
         * writes the copies: the owner's transactional producer there,
         * 'producer' otherwise. */
        rd_kafka_t      *out;
        struct owner    *owner;     /* NULL: one process copies all */
        rd_kafka_t      *hw_probe;  /* read_uncommitted: high watermarks */
        char             work_topic[600];
        char             owners_group[600];
        char             txn_id[600];
        int32_t          work_cnt;
        bool             txn_open;  /* a transaction is begun */
        bool             txn_dirty; /* it took records since */
        bool             txn_broken; /* a record of it failed */
        int64_t          txn_ms;    /* mono ms when it was begun */
        bool             gained, lost; /* ownership changed: to act on
                                          after owner_poll()/_commit() */
        int64_t          lost_ms;   /* mono ms of the last loss, 0 */
        int64_t          txn_wait_ms; /* stable_end()'s last wait */
        bool             need_renew;  /* the producer failed for good:
                                         flow_main() makes a new one */
        int              renewals;    /* within the window since ... */
        int64_t          renew_since_ms;
        atomic_bool      leads_mm2; /* owns work partition 0 */
        /* The records a transaction was aborted for (refused.c), and
         * what the open one dead-lettered and counts as produce errors:
         * added to the counters when it commits. */
        struct refused  *refused;
        uint64_t         txn_dlq, txn_errs;
        _Atomic uint64_t rebalances, fenced_txns, aborted_txns,
            committed_txns;
        _Atomic int32_t  owned_work;
};

#define RELAXED memory_order_relaxed
/* Counters have one writer, the flow thread (delivery reports run in
 * its rd_kafka_poll()). */
#define ADD(x, n) AAGW_STAT_ADD(x, n)
#define INC(x) ADD(x, 1)

/* Fail the flow closed: it stops consuming and reports why. */
#define flow_fail(f, ...) replicator_fail(&(f)->ctl, __VA_ARGS__)

/* -------------------------------------------------------------- TOKENS -- */

static struct token *token_get(aagw_flow_t *f) {
        return replicator_token_get(&f->tokens);
}

static void token_put(aagw_flow_t *f, struct token *t) {
        replicator_token_put(&f->tokens, &t->base);
}

/* ---------------------------------------------------------------- RING -- */

static int ring_push(struct ptrack *pt, int64_t src_off, int64_t origin_ms,
                     uint64_t *seqp) {
        if (pt->tail - pt->head == pt->cap) {
                size_t       ncap = pt->cap ? pt->cap * 2 : 1024;
                struct slot *nr   = malloc(ncap * sizeof(*nr));
                if (!nr)
                        return -1;
                for (uint64_t s = pt->head; s < pt->tail; s++)
                        nr[s & (ncap - 1)] = pt->ring[s & (pt->cap - 1)];
                free(pt->ring);
                pt->ring = nr;
                pt->cap  = ncap;
        }
        struct slot *sl = &pt->ring[pt->tail & (pt->cap - 1)];
        sl->src_off     = src_off;
        sl->out_off     = -1;
        sl->origin_ms   = origin_ms;
        sl->done        = 0;
        *seqp           = pt->tail++;
        return 0;
}

/* Offset-syncs: write (src, dst) when the delta dst - src differs from
 * the last one written, so that between two syncs every copy keeps the
 * same delta and translation is exact (policy/mm2.c).  Per-record syncs
 * are rate-bounded per partition; a suppressed one marks the next as
 * lossy, and the boundary sync at each save (save_positions) restores
 * exactness from there on. */
static void sync_point(aagw_flow_t *f, struct ptrack *pt, int64_t src,
                       int64_t dst, bool bounded) {
        if (!f->mm2 || src < 0 || dst < 0)
                return;
        if (pt->sync_known && dst - src == pt->sync_delta)
                return;
        if (bounded) {
                int64_t now = f->now_cache;
                if (now - pt->sync_win_ms >= 1000) {
                        pt->sync_win_ms  = now;
                        pt->sync_win_cnt = 0;
                }
                if (pt->sync_win_cnt >= f->conf.mm2.sync_max_per_s &&
                    f->conf.mm2.sync_max_per_s > 0) {
                        pt->sync_lossy = true;
                        return;
                }
                pt->sync_win_cnt++;
        }
        mm2_sync(f->mm2, pt->tt->topic, pt->partition, src, dst,
                 pt->sync_lossy);
        pt->sync_known = true;
        pt->sync_delta = dst - src;
        pt->sync_lossy = false;
}

/* Move the position over the done prefix of the ring. */
static void ring_advance(aagw_flow_t *f, struct ptrack *pt) {
        while (pt->head < pt->tail) {
                struct slot *sl = &pt->ring[pt->head & (pt->cap - 1)];
                if (!sl->done)
                        break;
                /* (Scale-out: a copy is final only once its transaction
                 * commits; scale_commit() writes the syncs then.) */
                if (!f->owner && sl->out_off >= 0)
                        sync_point(f, pt, sl->src_off, sl->out_off, true);
                else if (!f->owner && !pt->sync_known)
                        sync_point(f, pt, sl->src_off, pt->out_next, true);
                pt->next = sl->src_off + 1;
                if (sl->out_off >= 0)
                        pt->out_next = sl->out_off + 1;
                pt->head++;
        }
        atomic_store_explicit(&pt->pos_pub, pt->next, RELAXED);
}

static void lat_observe(aagw_flow_t *f, int64_t ms) {
        int b = 0;
        if (ms < 0)
                ms = 0;
        while (b < AAGW_LAT_BUCKETS - 1 && ms > aagw_lat_bounds_ms[b])
                b++;
        INC(f->lat_buckets[b]);
        ADD(f->lat_sum, (uint64_t)ms);
}

/* ---------------------------------------------------- DELIVERY REPORTS -- */

/* A copy of one of our heartbeats reached the target: its age is this
 * direction's replication latency, and its arrival our liveness. */
static void heartbeat_seen(aagw_flow_t *f, const rd_kafka_message_t *m) {
        struct aagw_mm2_heartbeat hb;

        if (!aagw_mm2_heartbeat_decode(m->key, m->key_len, m->payload, m->len,
                                       &hb) ||
            strcmp(hb.source, f->source) || strcmp(hb.target, f->target))
                return;
        atomic_store_explicit(&f->hb_latency_ms, f->now_cache - hb.timestamp_ms,
                              RELAXED);
        atomic_store_explicit(&f->hb_last_ms, f->now_cache, RELAXED);
}

static void produce_dlq(aagw_flow_t *f, struct token *tok,
                        const rd_kafka_message_t *m, const char *why);
static void produce_dlq_stub(aagw_flow_t *f, struct token *tok,
                             const rd_kafka_message_t *m, const char *why);

/* The producer's own limit (message.max.bytes) or the broker's. */
static bool too_large(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
               err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

/* A record the target refused for good (produce_errors).  Scale-out:
 * counted when its transaction commits, as the redo meets it again. */
static void count_refusal(aagw_flow_t *f) {
        if (f->owner)
                f->txn_errs++;
        else
                INC(f->produce_errors);
}

static void scale_failed(aagw_flow_t *f, struct token *tok,
                         const rd_kafka_message_t *m);

/* Delivery report: runs on the flow thread (rd_kafka_poll(producer)). */
/* The target topic or partition does not exist (any more): deleted while
 * the flow ran.  Records in flight get this, as does a produce call. */
static bool target_gone(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
               err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
               err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
}

/* The target's authorizer refused the write: its ACLs, not the record,
 * are at fault, and the next record would be refused the same way.
 * Dead-lettering would move the position past records that were never
 * copied (and the dead-letter topic is refused as well, most likely). */
static bool write_denied(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
               err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED ||
               err == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
}

/* Fail closed on a write the target's ACLs deny: the position stays
 * before the record, and a start once the ACL is granted copies it. */
static void fail_write_denied(aagw_flow_t *f, struct ptrack *pt,
                              const char *topic, rd_kafka_resp_err_t err) {
        if (atomic_load(&f->ctl.stop))
                return;
        flow_fail(f,
                  "write to topic %s at %s denied (%s): allow aagw's "
                  "principal WRITE on it (and IDEMPOTENT_WRITE on the "
                  "cluster for Kafka before 3.0); %s [%d] stays where it "
                  "was, nothing was dead-lettered, and a start once it is "
                  "allowed copies on from there",
                  topic, f->target, rd_kafka_err2name(err), pt->tt->topic,
                  (int)pt->partition);
}

/* Fail closed on a vanished target: its copies are gone with it, so
 * nothing sent to it may count as delivered.  The next start creates it
 * again and copies the source anew (reconcile() sees the reset). */
static void fail_target_gone(aagw_flow_t *f, struct ptrack *pt,
                             rd_kafka_resp_err_t err) {
        if (atomic_load(&f->ctl.stop))
                return;
        INC(f->target_resets);
        flow_fail(f,
                  "target topic %s [%d] at %s is gone (deleted?): %s; the "
                  "copies it held are lost with it; restart aagw to create "
                  "it again and copy %s from its log start",
                  pt->tt->remote, (int)pt->partition, f->target,
                  rd_kafka_err2str(err), pt->tt->topic);
}

static void on_delivery(void *stage, void *t, const rd_kafka_message_t *m) {
        aagw_flow_t   *f   = stage;
        struct token  *tok = t;
        struct ptrack *pt  = tok->pt;
        struct slot   *sl = &pt->ring[tok->seq & (pt->cap - 1)];

        if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
            m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT ||
            m->err == RD_KAFKA_RESP_ERR__DESTROY) {
                /* Shutting down with records unacknowledged: they are
                 * neither delivered nor failed; the position stays before
                 * them and a restart sends them again. */
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err && f->owner) {
                /* Scale-out: any failed record fails its transaction
                 * (librdkafka makes it abortable), which can take no
                 * dead-letter copy either: scale_poll() aborts it and
                 * copies the partitions again (scale_failed()). */
                replicator_note_authz(f->target, m->err, "WRITE", "topic %s",
                                      rd_kafka_topic_name(m->rkt));
                scale_failed(f, tok, m);
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err && target_gone(m->err)) {
                /* Not about this record: the copy is not there, and
                 * dead-lettering it would move the position past it. */
                if (!tok->dlq)
                        fail_target_gone(f, pt, m->err);
                else
                        flow_fail(f, "dead-letter topic %s at %s: %s",
                                  f->dlq_topic, f->target,
                                  rd_kafka_err2str(m->err));
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err && write_denied(m->err)) {
                replicator_note_authz(f->target, m->err, "WRITE", "topic %s",
                                      rd_kafka_topic_name(m->rkt));
                fail_write_denied(f, pt, rd_kafka_topic_name(m->rkt),
                                  m->err);
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err) {
                /* Retriable errors never get here (unlimited delivery
                 * timeout): this one is permanent.  The record goes to
                 * the dead-letter topic with the error; a dead-letter
                 * copy too large for the target goes again without the
                 * record's key, value and headers; if that fails too,
                 * the flow fails closed rather than drop it. */
                count_refusal(f);
                replicator_note_authz(f->target, m->err, "WRITE", "topic %s",
                                      rd_kafka_topic_name(m->rkt));
                if (tok->dlq && !tok->stub && too_large(m->err)) {
                        produce_dlq_stub(f, tok, m, rd_kafka_err2str(m->err));
                        return;
                }
                if (!tok->dlq) {
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64
                                 ": delivery to %s failed: %s; dead-lettering",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, rd_kafka_topic_name(m->rkt),
                                 rd_kafka_err2str(m->err));
                        produce_dlq(f, tok, m, rd_kafka_err2str(m->err));
                        return;
                }
                flow_fail(f,
                          "%s [%d] offset %" PRId64
                          ": dead-letter delivery failed: %s",
                          pt->tt->topic, (int)pt->partition, sl->src_off,
                          rd_kafka_err2str(m->err));
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->offset < 0) {
                /* Delivered without an offset (replicator_unsure_ack()):
                 * not counted, the position stays before it. */
                replicator_unsure_ack(&f->ctl, rd_kafka_topic_name(m->rkt),
                                      m->partition, pt->tt->topic,
                                      pt->partition, sl->src_off);
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        sl->done = 1;
        if (tok->dlq) {
                if (f->owner)
                        f->txn_dlq++; /* counted at the commit */
                else
                        INC(f->dead_lettered);
        } else {
                if (tok->alone) {
                        /* A suspect, acknowledged alone: it was only
                         * batched with the record refused for good. */
                        struct refused_rec *rr = refused_find(
                            f->refused, pt->tt->topic, pt->partition,
                            sl->src_off);
                        if (rr)
                                refused_del(f->refused, rr);
                }
                sl->out_off = m->offset;
                INC(f->records_out);
                INC(pt->records_out);
                ADD(f->bytes_out, m->len + m->key_len);
                lat_observe(f, f->now_cache - sl->origin_ms);
                if (pt->tt->is_hb)
                        heartbeat_seen(f, m);
        }
        ADD(f->inflight, -1);
        token_put(f, tok);
        ring_advance(f, pt);
}

/* ------------------------------------------------------------ PRODUCE --- */

/* Produce, waiting out a full local queue (backpressure) while serving
 * delivery reports.  Returns 0, or -1 with the error in 'errp' for
 * anything but a full queue, or when stopping. */
static int produce_retry(aagw_flow_t *f, rd_kafka_topic_t *rkt,
                         int32_t partition, const rd_kafka_message_t *m,
                         rd_kafka_headers_t *hdrs, int64_t ts, void *opaque,
                         rd_kafka_resp_err_t *errp) {
        *errp = replicator_produce(f->out, rkt, partition, m, hdrs, ts,
                                   opaque, &f->ctl.stop, &f->now_cache);
        return *errp ? -1 : 0;
}

static void dlq_ensure(aagw_flow_t *f);

/* Our own headers are kept in a dead-letter copy for the diagnosis, but
 * none longer than this (a valid aagw.prov is at most 2,369 bytes): a
 * hostile 1 MB one would make the copy too large for the target, and the
 * flow would fail on that record at every start. */
#define DLQ_OWN_HDR_MAX 4096

/* The dead-letter headers: why, and where the record came from. */
static void dlq_headers(aagw_flow_t *f, struct token *tok,
                        rd_kafka_headers_t *h, const char *why) {
        struct ptrack *pt = tok->pt;
        struct slot   *sl = &pt->ring[tok->seq & (pt->cap - 1)];
        char           name[AAGW_AFFIX_MAX + 32], coord[AAGW_TOPIC_MAX + 48];
        const char    *prefix = f->hop_hdr; /* "<prefix>hop" */
        size_t         plen   = strlen(prefix) - 3;

        snprintf(name, sizeof(name), "%.*sdlq.reason", (int)plen, prefix);
        rd_kafka_header_add(h, name, -1, why, -1);
        snprintf(name, sizeof(name), "%.*sdlq.source", (int)plen, prefix);
        snprintf(coord, sizeof(coord), "%s:%s:%d:%" PRId64, f->source,
                 pt->tt->topic, (int)pt->partition, sl->src_off);
        rd_kafka_header_add(h, name, -1, coord, -1);
}

/* Produce the dead-letter copy of 'tok' with key and value of 'm' (or
 * none) and headers 'h' (taken over); fail the flow if the producer
 * refuses it for anything but its size (then the stub goes instead). */
static void dlq_send(aagw_flow_t *f, struct token *tok,
                     const rd_kafka_message_t *m, rd_kafka_headers_t *h,
                     bool with_record) {
        struct ptrack            *pt = tok->pt;
        struct slot              *sl = &pt->ring[tok->seq & (pt->cap - 1)];
        rd_kafka_resp_err_t       err;
        rd_kafka_timestamp_type_t tstype;
        int64_t            ts   = rd_kafka_message_timestamp(m, &tstype);
        rd_kafka_message_t none = {0};

        /* Created on first use: a topic handle makes the producer ask for
         * its metadata, which auto-creates it on many clusters, and an
         * empty dead-letter topic at every site is noise. */
        if (!f->dlq_rkt) {
                dlq_ensure(f);
                f->dlq_rkt = rd_kafka_topic_new(f->out, f->dlq_topic, NULL);
        }
        if (!produce_retry(f, f->dlq_rkt, RD_KAFKA_PARTITION_UA,
                           with_record ? m : &none, h, ts, tok, &err))
                return;
        rd_kafka_headers_destroy(h);
        replicator_note_authz(f->target, err, "WRITE", "topic %s",
                              f->dlq_topic);
        if (with_record && too_large(err)) {
                count_refusal(f);
                produce_dlq_stub(f, tok, m, rd_kafka_err2str(err));
                return;
        }
        if (f->owner && !target_gone(err) && !atomic_load(&f->ctl.stop)) {
                /* Scale-out: the transaction is unusable (its state, a
                 * fence), as in handle(): it is redone, this record with
                 * it. */
                if (!f->txn_broken)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": produce to "
                                 "%s: %s; aborting the transaction",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, f->dlq_topic,
                                 rd_kafka_err2str(err));
                f->txn_broken = true;
        } else if (!atomic_load(&f->ctl.stop)) {
                flow_fail(f,
                          "%s [%d] offset %" PRId64
                          ": cannot dead-letter to %s: %s",
                          pt->tt->topic, (int)pt->partition, sl->src_off,
                          f->dlq_topic, rd_kafka_err2str(err));
        }
        ADD(f->inflight, -1);
        token_put(f, tok);
}

/* Copy of 'm' for the dead-letter topic: original key, value, timestamp
 * and headers (ours only up to DLQ_OWN_HDR_MAX bytes each; the longer
 * ones are named in <prefix>dlq.dropped), plus where it came from and
 * why it is here. */
static void produce_dlq(aagw_flow_t *f, struct token *tok,
                        const rd_kafka_message_t *m, const char *why) {
        rd_kafka_headers_t *src_hdrs = NULL, *h;
        char                dropped[512] = "", name[AAGW_AFFIX_MAX + 32];
        const char         *hn;
        const void         *hv;
        size_t              hs, dl = 0;

        tok->dlq  = true;
        tok->stub = false;
        if (rd_kafka_message_headers(m, &src_hdrs) ||
            !(h = rd_kafka_headers_new(rd_kafka_header_cnt(src_hdrs) + 3)))
                h = rd_kafka_headers_new(4);
        for (size_t i = 0;
             src_hdrs && !rd_kafka_header_get_all(src_hdrs, i, &hn, &hv, &hs);
             i++) {
                if (hs > DLQ_OWN_HDR_MAX &&
                    aagw_prov_is_own_header(f->pol, hn)) {
                        if (dl < sizeof(dropped))
                                dl += (size_t)snprintf(
                                    dropped + dl, sizeof(dropped) - dl,
                                    "%s%.64s (%zu bytes)", dl ? ", " : "", hn,
                                    hs);
                        continue;
                }
                rd_kafka_header_add(h, hn, -1, hv, (ssize_t)hs);
        }
        dlq_headers(f, tok, h, why);
        if (dropped[0]) {
                snprintf(name, sizeof(name), "%.*sdlq.dropped",
                         (int)(strlen(f->hop_hdr) - 3), f->hop_hdr);
                rd_kafka_header_add(h, name, -1, dropped, -1);
        }
        dlq_send(f, tok, m, h, true);
}

/* The dead-letter copy was too large for the target: send one without
 * the record's key, value and headers, saying what was left out; the
 * source coordinates find the record. */
static void produce_dlq_stub(aagw_flow_t *f, struct token *tok,
                             const rd_kafka_message_t *m, const char *why) {
        rd_kafka_headers_t *src_hdrs = NULL, *h = rd_kafka_headers_new(4);
        char                note[256], name[AAGW_AFFIX_MAX + 32];
        const char         *hn;
        const void         *hv;
        size_t              hs, hbytes = 0;

        tok->stub = true;
        if (!rd_kafka_message_headers(m, &src_hdrs))
                for (size_t i = 0;
                     !rd_kafka_header_get_all(src_hdrs, i, &hn, &hv, &hs); i++)
                        hbytes += strlen(hn) + hs;
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: the dead-letter copy of %s [%d] offset %" PRId64
                 " is too large for %s (%s): dead-lettering it without its "
                 "key (%zu bytes), value (%zu bytes) and headers (%zu bytes)",
                 f->name, tok->pt->tt->topic, (int)tok->pt->partition,
                 tok->pt->ring[tok->seq & (tok->pt->cap - 1)].src_off,
                 f->dlq_topic, why, m->key_len, m->len, hbytes);
        dlq_headers(f, tok, h, why);
        snprintf(note, sizeof(note),
                 "key %zu bytes, value %zu bytes, headers %zu bytes left "
                 "out: too large",
                 m->key_len, m->len, hbytes);
        snprintf(name, sizeof(name), "%.*sdlq.stripped",
                 (int)(strlen(f->hop_hdr) - 3), f->hop_hdr);
        rd_kafka_header_add(h, name, -1, note, -1);
        dlq_send(f, tok, m, h, false);
}

/* ------------------------------------------------------------ TOPICS ---- */

/* Scale-out: the work partition that source partition 'p' of 'tt'
 * belongs to; every partition of a topic in a different one, in turn,
 * so that one topic spreads over the processes. */
static int32_t work_of(const aagw_flow_t *f, const struct ttrack *tt,
                       int32_t p) {
        return (int32_t)((tt->hash + (uint32_t)p) % (uint32_t)f->work_cnt);
}

/* Whether this process copies source partition 'p' of 'tt' (always, as
 * the only process of its site). */
static bool owned(const aagw_flow_t *f, const struct ttrack *tt, int32_t p) {
        return !f->owner || owner_owned(f->owner, work_of(f, tt, p));
}

static struct ttrack *topic_find(aagw_flow_t *f, const char *topic) {
        for (size_t i = 0; i < f->ntopics; i++)
                if (!strcmp(f->topics[i]->topic, topic))
                        return f->topics[i];
        return NULL;
}

/* Make room for 'n' partitions in 'tt' (stats readers take 'lock').
 * Returns 0, or -1 out of memory. */
static int parts_grow(struct ttrack *tt, int32_t n, pthread_mutex_t *lock) {
        if (n <= tt->partition_cnt)
                return 0;
        struct ptrack **np = realloc(tt->parts, (size_t)n * sizeof(*np));
        if (!np)
                return -1;
        memset(np + tt->partition_cnt, 0,
               (size_t)(n - tt->partition_cnt) * sizeof(*np));
        pthread_mutex_lock(lock);
        tt->parts         = np;
        tt->partition_cnt = n;
        pthread_mutex_unlock(lock);
        return 0;
}

static struct ptrack *part_get(aagw_flow_t *f, struct ttrack *tt,
                               int32_t partition) {
        if (partition < 0 || partition >= tt->partition_cnt)
                return NULL;
        if (!tt->parts[partition]) {
                struct ptrack *pt = calloc(1, sizeof(*pt));
                if (!pt)
                        return NULL;
                pt->tt            = tt;
                pt->partition     = partition;
                pt->next          = -1;
                pt->out_next      = -1;
                pt->saved_next    = -1;
                pt->saved_out     = -1;
                tt->parts[partition] = pt;
        }
        (void)f;
        return tt->parts[partition];
}

/* Partition count of 'topic' on the cluster of 'rk', -1 if the topic does
 * not exist, -2 on error.  Asks for all topics so that the question never
 * auto-creates the topic. */
/* Create 'topic' with 'partitions' at the target, through the Admin API
 * or (with 'autocreate') the producer's auto-creation.  Returns its
 * partition count, or -1. */
static int make_topic(aagw_flow_t *f, const char *topic, int partitions,
                      bool autocreate) {
        struct replicator_topic_maker tm = {
            .admin             = f->admin,
            .producer          = autocreate ? f->producer : NULL,
            .tag               = "FLOW",
            .who               = f->name,
            .cluster           = f->target,
            .admin_unsupported = &f->admin_create_unsupported};
        return replicator_topic_make(&tm, topic, partitions);
}

/* Create the dead-letter topic (one partition) through the Admin API if
 * the target lacks it.  Clusters that do not auto-create topics (the
 * usual production setting, auto.create.topics.enable=false) would
 * otherwise fail the first dead-lettered record with an unknown topic;
 * where the Admin API is missing, the producer's auto-creation remains. */
static void dlq_ensure(aagw_flow_t *f) {
        const struct rd_kafka_metadata *md = NULL;
        int                             have;

        if (aagw_kafka_metadata(f->admin, true, NULL, &md, 5000, NULL))
                return; /* the produce reports what is wrong */
        have = replicator_md_partitions(md, f->dlq_topic);
        rd_kafka_metadata_destroy(md);
        if (have < 0)
                make_topic(f, f->dlq_topic, 1, false);
}

/* Partitions of the copy of 'tt' as the target producer sees them (a
 * partition it does not know cannot be produced to), -1 on error. */
static int target_partitions(aagw_flow_t *f, struct ttrack *tt) {
        const struct rd_kafka_metadata *md = NULL;
        int                             n  = -1;

        if (aagw_kafka_metadata(f->out, false, tt->rkt, &md, 5000, NULL))
                return -1;
        if (md->topic_cnt == 1 && !md->topics[0].err)
                n = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
        return n;
}

/* Make sure the copy of 'tt' exists with 'want' partitions: created
 * (topics_create(): partitions, replication factor, configs), else
 * auto-created by the producer where the cluster lacks the Admin API; or
 * grown (topics_grow()).  Returns the partitions the producer sees (fewer
 * than 'want' if the copy could not be grown), or -2 on a transient error
 * (discovery tries again). */
static int ensure_target(aagw_flow_t *f, struct ttrack *tt, int want) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t err;
        char                why[512];
        int                 have, rc;

        err = aagw_kafka_metadata(f->admin, true, NULL, &md, 5000,
                                  &f->ctl.stop);
        if (err == RD_KAFKA_RESP_ERR__INTR)
                return -2; /* stopping */
        if (err) {
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: metadata of %s failed: %s; retrying later",
                         f->name, f->target, rd_kafka_err2str(err));
                return -2;
        }
        have = replicator_md_partitions(md, tt->remote);
        rd_kafka_metadata_destroy(md);
        if (have < 0) {
                rc = topics_create(f->remote_topics, tt->topic, tt->remote,
                                   want, why, sizeof(why));
                if (rc == -1) {
                        if (!tt->create_warned)
                                aagw_log(AAGW_LOG_WARN, "FLOW",
                                         "%s: cannot create topic %s at %s: "
                                         "%s; retrying at every discovery",
                                         f->name, tt->remote, f->target, why);
                        tt->create_warned = true;
                        return -2;
                }
                if (rc == -2) {
                        if (!f->admin_create_unsupported)
                                aagw_log(AAGW_LOG_WARN, "FLOW",
                                         "%s: cluster %s does not create "
                                         "topics through the Admin API (%s); "
                                         "relying on broker auto-creation "
                                         "from now on",
                                         f->name, f->target, why);
                        f->admin_create_unsupported = true;
                        /* Auto-creation only, from now on. */
                        if (make_topic(f, tt->remote, want, true) < 0)
                                return -2;
                }
        } else if (have < want) {
                rc = topics_grow(f->remote_topics, tt->remote, want, why,
                                 sizeof(why));
                if (rc && tt->reported != want)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: cannot add partitions to %s at %s "
                                 "(%d -> %d): %s",
                                 f->name, tt->remote, f->target, have, want,
                                 why);
        }
        /* The producer's topic handle only now: it asks for the topic's
         * metadata, which auto-creates it (with the broker's partition
         * count) on clusters that allow that. */
        if (!tt->rkt &&
            !(tt->rkt = rd_kafka_topic_new(f->out, tt->remote, NULL)))
                return -2;
        have = target_partitions(f, tt);
        return have < 0 ? -2 : have;
}

/* The copy of 'tt' has 'have' partitions that the producer sees, its
 * source 'want': hold the source partitions the copy lacks, start those
 * it has now, and report the difference (once per source count). */
static void target_count(aagw_flow_t *f, struct ttrack *tt, int have,
                         int want);
/* Assign the consumer the partitions of 'tt' it lacks (all, for a topic
 * just found; the new ones, after the source grew). */
static void assign_new(aagw_flow_t *f, struct ttrack *tt);
/* Finish what is in flight (up to 'drain_ms'), store the positions and
 * unassign the partitions of 'tt' (NULL: of every topic).  Returns 0, or
 * -1 with the flow failed if records were still in flight: their
 * delivery reports would land in the rings of a later assignment. */
static int unassign(aagw_flow_t *f, struct ttrack *tt, int drain_ms);

/* Scan the source cluster for matching topics and assign their
 * partitions to the consumer; the identity lease subscribes to them. */
static void discover(aagw_flow_t *f) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t              err;
        bool                             changed = false;

        err = aagw_kafka_metadata(f->meta, true, NULL, &md, 5000,
                                  &f->ctl.stop);
        if (err == RD_KAFKA_RESP_ERR__INTR)
                return; /* stopping */
        aagw_reach_note(&f->src_reach, err);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: metadata of %s failed: %s", f->name, f->source,
                         rd_kafka_err2str(err));
                return;
        }
        for (size_t i = 0; i < f->ntopics; i++)
                f->topics[i]->seen = false;
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[i];
                struct ttrack                       *tt;
                aagw_skip_t                          skip;

                if (mt->err || mt->partition_cnt <= 0) {
                        /* There, but not answering now (no leader, ...):
                         * not gone.  A deleted topic is not listed. */
                        if ((tt = topic_find(f, mt->topic)))
                                tt->seen = true;
                        continue;
                }
                if (!aagw_repl_topic_allowed(f->pol, mt->topic) &&
                    !(f->conf.mm2.heartbeat_ms > 0 &&
                      mm2_is_heartbeats(mt->topic)))
                        continue;
                skip = (f->conf.verdict_flags & AAGW_VERDICT_F_NO_TOPIC_CHECK)
                           ? AAGW_SKIP_NONE
                           : aagw_repl_topic_check(f->pol, f->source,
                                                   f->target, mt->topic);
                /* The heartbeats topic goes whatever replication.topics
                 * selects, as in MM2 (its copies tell MirrorClient which
                 * clusters are upstream); a local name, so no name rule
                 * can stop it. */
                if (skip == AAGW_SKIP_FILTERED &&
                    f->conf.mm2.heartbeat_ms > 0 && mm2_is_heartbeats(mt->topic))
                        skip = AAGW_SKIP_NONE;
                if (skip != AAGW_SKIP_NONE)
                        continue;
                tt = topic_find(f, mt->topic);
                if (!tt) {
                        if (f->ntopics == MAX_TOPICS)
                                continue;
                        tt = calloc(1, sizeof(*tt));
                        if (!tt || !(tt->topic = strdup(mt->topic))) {
                                free(tt);
                                continue;
                        }
                        if (aagw_repl_remote_topic(f->pol, f->source,
                                                   mt->topic, tt->remote,
                                                   sizeof(tt->remote))) {
                                free(tt->topic);
                                free(tt);
                                continue;
                        }
                        tt->is_hb   = mm2_is_heartbeats(mt->topic);
                        tt->hash    = XXH32(mt->topic, strlen(mt->topic), 0);
                        /* The per-topic part of every verdict, once. */
                        aagw_skip_t tc;
                        tt->prechecked =
                            aagw_repl_precheck(f->pol, f->source, f->target,
                                               mt->topic,
                                               f->conf.verdict_flags,
                                               &tc) == AAGW_OK &&
                            tc == AAGW_SKIP_NONE;
                        tt->id_rule = f->conf.id_rule_for
                                          ? f->conf.id_rule_for(f->conf.opaque,
                                                                mt->topic)
                                          : NULL;
                        pthread_mutex_lock(&f->ctl.lock);
                        f->topics[f->ntopics++] = tt;
                        pthread_mutex_unlock(&f->ctl.lock);
                }
                tt->seen = true;
                if (tt->active && tt->partition_cnt >= mt->partition_cnt &&
                    tt->target_cnt >= tt->partition_cnt && !tt->release_retry)
                        continue;
                int have = ensure_target(f, tt, mt->partition_cnt);
                if (have == -2)
                        continue; /* transient: try again next time */
                if (tt->active && mt->partition_cnt > tt->partition_cnt)
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: %s grew from %d to %d partitions at %s",
                                 f->name, tt->topic, tt->partition_cnt,
                                 mt->partition_cnt, f->source);
                if (parts_grow(tt, mt->partition_cnt, &f->ctl.lock))
                        continue;
                target_count(f, tt, have, mt->partition_cnt);
                if (!tt->active) {
                        tt->active = true;
                        atomic_fetch_add(&f->ntopics_active, 1);
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: replicating %s (%d partitions) to %s at "
                                 "%s",
                                 f->name, tt->topic, mt->partition_cnt,
                                 tt->remote, f->target);
                        topics_track(f->remote_topics, tt->topic, tt->remote);
                        /* Before its partitions are reconciled: see
                         * replicator_prime_topic(). */
                        replicator_prime_topic(f->end_probe, f->reader,
                                               tt->remote);
                        changed = true;
                }
                /* After a fence, nothing until the lease holds the id
                 * again (flow_main() assigns then). */
                if (!f->lease_wait)
                        assign_new(f, tt);
        }
        rd_kafka_metadata_destroy(md);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (tt->active && !tt->seen) {
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: topic %s is gone from %s; no longer "
                                 "reading it",
                                 f->name, tt->topic, f->source);
                        if (unassign(f, tt, 10000))
                                break;
                        tt->active = false;
                        atomic_fetch_sub(&f->ntopics_active, 1);
                        changed    = true;
                }
        }
        if ((changed || f->subscription_dirty) && f->lease) {
                rd_kafka_topic_partition_list_t *sub =
                    rd_kafka_topic_partition_list_new((int)f->ntopics);
                for (size_t i = 0; i < f->ntopics; i++)
                        if (f->topics[i]->active)
                                rd_kafka_topic_partition_list_add(
                                    sub, f->topics[i]->topic,
                                    RD_KAFKA_PARTITION_UA);
                if (sub->cnt == 0)
                        err = rd_kafka_unsubscribe(f->lease);
                else
                        err = rd_kafka_subscribe(f->lease, sub);
                f->subscription_dirty = err != 0;
                if (err)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: identity lease: subscribe failed: %s",
                                 f->name, rd_kafka_err2str(err));
                rd_kafka_topic_partition_list_destroy(sub);
        }
}

/* ---------------------------------------------------------- POSITIONS --- */

/* Fill f->hdrs from a message's headers; returns the count. */
static size_t collect_headers(aagw_flow_t *f, const rd_kafka_message_t *m) {
        return aagw_kafka_headers_view(m, &f->hdrs, &f->hdr_cap);
}

/* If 'm' (read from the target) was written by this flow, return the
 * source offset it copied, else -1. */
static int64_t written_by_us(aagw_flow_t *f, const rd_kafka_message_t *m,
                             const char *topic, int32_t partition) {
        struct aagw_prov prov;
        size_t           n = collect_headers(f, m);
        char             t[AAGW_TOPIC_MAX + 1];
        int32_t          p;
        int64_t          o;

        if (aagw_prov_decode(f->pol, f->hdrs, n, &prov) != AAGW_REASON_OK ||
            prov.path_len < 2 ||
            strcmp(prov.path[prov.path_len - 1], f->target) ||
            strcmp(prov.path[prov.path_len - 2], f->source))
                return -1;
        for (size_t i = 0; i < n; i++) {
                if (f->hdrs[i].value && !strcmp(f->hdrs[i].name, f->hop_hdr)) {
                        if (!aagw_coords_parse(f->hdrs[i].value, f->hdrs[i].size, t,
                                          sizeof(t), &p, &o))
                                return -1;
                        return !strcmp(t, topic) && p == partition ? o : -1;
                }
        }
        /* No hop header: the record was stamped fresh by this flow, so its
         * origin coordinates are the source coordinates. */
        if (prov.path_len == 2 && !strcmp(prov.src_topic, topic) &&
            prov.src_partition == partition)
                return prov.src_offset;
        return -1;
}

static int64_t check_truncation(aagw_flow_t *f, struct ptrack *pt,
                                int64_t next);

/* The highest source offset among this flow's copies at target offsets
 * [from, to) of pt's remote partition, or -1 if none.  '*done' is false
 * if the deadline or a stop cut the read short. */
struct scan {
        aagw_flow_t   *f;
        struct ptrack *pt;
        int64_t        found; /* last source offset copied, -1: none */
};

static bool scan_record(void *arg, const rd_kafka_message_t *m) {
        struct scan *sc = arg;
        int64_t      o  = written_by_us(sc->f, m, sc->pt->tt->topic,
                                        sc->pt->partition);
        if (o > sc->found)
                sc->found = o;
        return true;
}

static void scan_error(void *arg, rd_kafka_resp_err_t err,
                       const char *reason) {
        struct scan *sc = arg;
        (void)err;
        aagw_log(AAGW_LOG_WARN, "FLOW", "%s: reading %s [%d] at %s: %s",
                 sc->f->name, sc->pt->tt->remote, (int)sc->pt->partition,
                 sc->f->target, reason);
}

static int64_t scan_copies(aagw_flow_t *f, struct ptrack *pt, int64_t from,
                           int64_t to, int timeout_ms, bool *done) {
        struct scan             sc = {.f = f, .pt = pt, .found = -1};
        struct aagw_kafka_range r  = {.topic      = pt->tt->remote,
                                      .partition  = pt->partition,
                                      .from       = from,
                                      .to         = to,
                                      .timeout_ms = timeout_ms,
                                      .stop       = &f->ctl.stop,
                                      .fn         = scan_record,
                                      .on_error   = scan_error,
                                      .arg        = &sc};
        int64_t                 n;

        *done = aagw_kafka_read_range(f->reader, &r, &n) == AAGW_RANGE_DONE;
        return sc.found;
}

/* replicator_settle_all() over every target partition this flow's
 * producer writes; 'pt''s own watermarks end up in '*lo' / '*hi'.
 * Returns as replicator_settle_all(). */
static int settle_all(aagw_flow_t *f, struct ptrack *pt, int64_t *lo,
                      int64_t *hi, int wait_ms) {
        size_t n = 0, k = 0;
        int    r;

        for (size_t i = 0; i < f->ntopics; i++)
                if (f->topics[i]->rkt && f->topics[i]->target_cnt > 0)
                        n += (size_t)f->topics[i]->target_cnt;
        struct replicator_end *ends = calloc(n ? n : 1, sizeof(*ends));
        if (!ends)
                return 0; /* out of memory: the partition's own settle */
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (!tt->rkt || tt->target_cnt <= 0)
                        continue;
                for (int32_t p = 0; p < tt->target_cnt; p++)
                        ends[k++] = (struct replicator_end){tt->remote, p, -1};
        }
        char who[AAGW_ALIAS_MAX + 160];
        snprintf(who, sizeof(who), "%s: at %s", f->name, f->target);
        r = replicator_settle_all(f->reader, f->end_probe, ends, k, wait_ms,
                                  &f->ctl.stop, "FLOW", who);
        for (size_t i = 0; r == 0 && i < k; i++)
                if (!strcmp(ends[i].topic, pt->tt->remote) &&
                    ends[i].partition == pt->partition && ends[i].hi > *hi) {
                        int64_t l, h;
                        if (!replicator_watermarks(
                                f->reader, pt->tt->remote, pt->partition, &l,
                                &h, 5000)) {
                                *lo = l;
                                *hi = h;
                        }
                }
        free(ends);
        return r;
}

/* The watermarks of the target partition of 'pt', once the high
 * watermark is the end of its leader's log.  While its leader is gone
 * (a broker died and the controller has not yet moved leadership, which
 * takes up to the broker session timeout) the query fails with a
 * timeout, a transport error or "not leader": ask for fresh metadata and
 * try again, for up to RECONCILE_WAIT_MS.  (Taking the target for empty
 * instead resumed at the stored position and copied again what the
 * previous run had written after it.)
 *
 * Then the watermark may be behind the log: the previous run's last
 * copies reached the leader, but a replica in the ISR (one on a broker
 * that died, until the controller fences it) has not fetched them, and a
 * scan up to the watermark would miss them; the flow would copy them
 * again, after them (issue 16: 2 and 7 records twice in
 * kafka-target_kill).  Under the prefix policy this flow is the target's
 * only writer and is not writing yet, so the wait for the watermark to
 * reach the log's end ends once the replicas caught up or the ISR
 * dropped the dead one; failing that within RECONCILE_WAIT_MS, the flow
 * fails closed.  Under identity, local producers may keep the log ahead
 * of the watermark: SETTLE_MAX_MS, then the watermark (logged). */
static rd_kafka_resp_err_t target_end(aagw_flow_t *f, struct ptrack *pt,
                                      int64_t *lo, int64_t *hi) {
        int64_t deadline = aagw_mono_ms() + RECONCILE_WAIT_MS;
        bool    logged   = false, prefix = strcmp(pt->tt->remote,
                                                  pt->tt->topic) != 0;

        for (;;) {
                rd_kafka_resp_err_t err = replicator_watermarks(
                    f->reader, pt->tt->remote, pt->partition, lo, hi, 5000);
                if (!err)
                        break;
                if (atomic_load(&f->ctl.stop) || aagw_mono_ms() >= deadline)
                        return err;
                if (!logged)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: reading the end of %s [%d] at %s: %s; "
                                 "trying again for up to %d s",
                                 f->name, pt->tt->remote, (int)pt->partition,
                                 f->target, rd_kafka_err2str(err),
                                 RECONCILE_WAIT_MS / 1000);
                logged = true;
                replicator_refresh_leaders(f->reader, pt->tt->remote, 2000);
                struct timespec ts = {0, 250 * 1000000L};
                nanosleep(&ts, NULL);
        }
        int64_t left = deadline - aagw_mono_ms();
        int     wait = !prefix ? SETTLE_MAX_MS
                       : left > 1000 ? (int)left : 1000;
        char    who[AAGW_ALIAS_MAX + 160];
        snprintf(who, sizeof(who), "%s: at %s", f->name, f->target);
        int r = replicator_settle_end(f->reader, f->end_probe, pt->tt->remote,
                                      pt->partition, lo, hi, wait,
                                      &f->ctl.stop, "FLOW", who);
        if (r < 0)
                return RD_KAFKA_RESP_ERR__DESTROY; /* stopping */
        if (r > 0 && prefix) {
                flow_fail(f,
                          "reconciling %s [%d]: %s [%d] at %s: its high "
                          "watermark %" PRId64 " did not reach the end of "
                          "its leader's log in %d s (a replica in the ISR "
                          "not fetching?); copying on could copy records "
                          "twice",
                          pt->tt->topic, (int)pt->partition, pt->tt->remote,
                          (int)pt->partition, f->target, *hi,
                          RECONCILE_WAIT_MS / 1000);
                return RD_KAFKA_RESP_ERR__TIMED_OUT;
        }
        if (r > 0)
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d] at %s: going by its high watermark "
                         "%" PRId64 " after %d s (identity policy: local "
                         "producers keep its leader's log ahead); a copy "
                         "of ours above it, if any, is copied again",
                         f->name, pt->tt->remote, (int)pt->partition,
                         f->target, *hi, SETTLE_MAX_MS / 1000);
        /* Requests of the killed run still held by a broker
         * (replicator_settle_all()): once per assignment round. */
        if (prefix && aagw_mono_ms() - f->settled_all_ms > SETTLE_ALL_AGAIN_MS) {
                left = deadline - aagw_mono_ms();
                r    = settle_all(f, pt, lo, hi,
                                  left > 1000 ? (int)left : 1000);
                if (r < 0)
                        return RD_KAFKA_RESP_ERR__DESTROY;
                if (r > 0) {
                        flow_fail(f,
                                  "reconciling %s [%d]: not every partition "
                                  "this flow writes at %s ends at its high "
                                  "watermark after %d s; copying on could "
                                  "copy records twice",
                                  pt->tt->topic, (int)pt->partition,
                                  f->target, RECONCILE_WAIT_MS / 1000);
                        return RD_KAFKA_RESP_ERR__TIMED_OUT;
                }
                f->settled_all_ms = aagw_mono_ms();
        }
        /* The copies go to the leader the producer knows: the one that
         * just answered, not one from before an outage. */
        replicator_refresh_leaders(f->out, pt->tt->remote, 5000);
        return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Scale-out: the end of the target partition of 'pt' for a new owner,
 * its last stable offset once no transaction is open on it.  The
 * reader (read_committed) is answered the LSO, the high-watermark probe
 * (read_uncommitted) the high watermark.  While they differ, a
 * transaction of the previous owner is open there: if it was committed
 * its copies count, if it is aborted (by the coordinator after
 * transaction.timeout.ms, for a dead owner) they do not; either way the
 * last copy is only known once it ended.  target_end()'s waits for the
 * log's end are not needed: a request of a dead owner held by a broker
 * belongs to a transaction that can no longer commit.  Sets
 * f->txn_wait_ms.  Fails the flow after RECONCILE_WAIT_MS. */
static rd_kafka_resp_err_t stable_end(aagw_flow_t *f, struct ptrack *pt,
                                      int64_t *lo, int64_t *hi) {
        int64_t start = aagw_mono_ms(), deadline = start + RECONCILE_WAIT_MS;
        int64_t hlo, hw = -1;
        rd_kafka_resp_err_t err;

        f->txn_wait_ms = 0;
        for (;;) {
                err = replicator_watermarks(
                    f->reader, pt->tt->remote, pt->partition, lo, hi, 5000);
                if (!err)
                        err = replicator_watermarks(
                            f->hw_probe, pt->tt->remote, pt->partition, &hlo,
                            &hw, 5000);
                if (!err && *hi >= hw)
                        break;
                if (atomic_load(&f->ctl.stop))
                        return RD_KAFKA_RESP_ERR__DESTROY;
                if (aagw_mono_ms() >= deadline) {
                        flow_fail(f,
                                  "reconciling %s [%d]: %s [%d] at %s: %s "
                                  "after %d s; a transaction of another "
                                  "member stays open past "
                                  "scale_out.transaction_timeout?",
                                  pt->tt->topic, (int)pt->partition,
                                  pt->tt->remote, (int)pt->partition,
                                  f->target,
                                  err ? rd_kafka_err2str(err)
                                      : "its last stable offset stays "
                                        "below its high watermark",
                                  RECONCILE_WAIT_MS / 1000);
                        return err ? err : RD_KAFKA_RESP_ERR__TIMED_OUT;
                }
                if (err) {
                        replicator_refresh_leaders(f->reader, pt->tt->remote,
                                                   2000);
                        replicator_refresh_leaders(f->hw_probe,
                                                   pt->tt->remote, 2000);
                }
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
        f->txn_wait_ms = aagw_mono_ms() - start;
        replicator_refresh_leaders(f->out, pt->tt->remote, 5000);
        return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static int64_t check_truncation(aagw_flow_t *f, struct ptrack *pt,
                                int64_t next);

/* The target partition of 'pt' ends (at 'hi') below the stored target
 * position 'out_next': the topic was deleted and created again since the
 * position was stored, and the copies are gone.  With none of ours in it
 * (the usual case: aagw failed closed when it vanished, and created it
 * again on this start), the source is copied again from its log start,
 * and that start is stored at once so that a crash during the new copy
 * resumes it instead of starting over.  Copies of ours in it cannot be
 * completed in order (the records before them are missing): fail closed.
 * Returns where to resume. */
static int64_t target_reset(aagw_flow_t *f, struct ptrack *pt, int64_t next,
                            int64_t out_next, int64_t lo, int64_t hi,
                            int64_t found) {
        const char *topic = pt->tt->topic;
        int64_t     slo, shi;

        INC(f->target_resets);
        if (found >= 0) {
                flow_fail(f,
                          "%s [%d] at %s ends at offset %" PRId64 ", below "
                          "the stored copy position %" PRId64 ", and holds "
                          "copies up to source offset %" PRId64 " but not "
                          "the records before them (recreated while "
                          "copies were in flight, or truncated by an "
                          "unclean leader election); delete the topic and "
                          "restart aagw to copy %s [%d] anew",
                          pt->tt->remote, (int)pt->partition, f->target, hi,
                          out_next, found, topic, (int)pt->partition);
                return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        }
        if (replicator_watermarks(f->meta, topic, pt->partition,
                                             &slo, &shi, 10000)) {
                flow_fail(f, "%s [%d]: cannot read the source log start",
                          topic, (int)pt->partition);
                return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        }
        /* Both recreated (a whole cluster replaced): the source's reset
         * is reported and counted as well. */
        if (next > shi)
                check_truncation(f, pt, next);
        aagw_log(AAGW_LOG_ERROR, "FLOW",
                 "%s: %s [%d] at %s was recreated: it ends at offset %" PRId64
                 " (log start %" PRId64 "), below the stored copy position "
                 "%" PRId64 ", and holds no copies of ours; the copies of "
                 "%s [%d] up to source offset %" PRId64 " were lost with "
                 "the old topic; copying again from the source log start "
                 "%" PRId64,
                 f->name, pt->tt->remote, (int)pt->partition, f->target, hi,
                 lo, out_next, topic, (int)pt->partition, next - 1, slo);
        struct aagw_flow_pos pos = {topic, pt->partition, slo, hi};
        if (f->conf.pos_save &&
            f->conf.pos_save(f->conf.opaque, f->scope, &pos, 1)) {
                flow_fail(f, "%s [%d]: cannot store the position after the "
                             "target was recreated",
                          topic, (int)pt->partition);
                return slo;
        }
        pt->saved_next = slo;
        pt->saved_out  = hi;
        pt->out_next   = hi;
        pt->hi_seen    = shi;
        return slo;
}

/* Where to resume source partition 'pt': the stored position, moved past
 * every record of ours found in the target partition after the stored
 * target offset.  Returns the offset, or RD_KAFKA_OFFSET_BEGINNING.
 *
 * Our copies of one source partition are appended to one target
 * partition in source order, so the last of them names the highest
 * source offset copied.  The target is read backwards in growing
 * chunks from its end until a chunk holds one of ours: a few records
 * normally, and not the whole partition when the stored state is old or
 * lost (the target may hold far more than can be read at start). */
static int64_t reconcile(aagw_flow_t *f, struct ptrack *pt) {
        int64_t next = -1, out_next = -1, lo, hi, found = -1;
        const char *topic = pt->tt->topic;

        if (f->conf.pos_load &&
            f->conf.pos_load(f->conf.opaque, f->scope, topic, pt->partition,
                             &next, &out_next) == 0)
                ;
        else
                next = out_next = -1;
        int64_t stored = next;
        rd_kafka_resp_err_t err = f->owner ? stable_end(f, pt, &lo, &hi)
                                           : target_end(f, pt, &lo, &hi);
        if (err) {
                /* Not knowing what the target holds, the stored position
                 * could copy again what the previous run wrote after it:
                 * fail closed (the next start reconciles). */
                if (!atomic_load(&f->ctl.stop))
                        flow_fail(f,
                                  "reconciling %s [%d]: cannot read the end "
                                  "of %s [%d] at %s in %d s: %s",
                                  topic, (int)pt->partition, pt->tt->remote,
                                  (int)pt->partition, f->target,
                                  RECONCILE_WAIT_MS / 1000,
                                  rd_kafka_err2str(err));
                return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        }
        /* No stored position, and the target's last record is not ours
         * (a remote topic: only replicators write there): another
         * replicator (MM2) filled it; resume where it stopped.  Unless
         * that is exact, the scan below still looks for copies of ours,
         * which would be the better answer. */
        int64_t tk = -1;
        if (next < 0 && hi > lo && f->takeover &&
            strcmp(pt->tt->remote, topic)) {
                bool    done, exact = false;
                int64_t tail = scan_copies(f, pt, hi - 1, hi,
                                           RECONCILE_WAIT_MS, &done);
                if (done && tail < 0)
                        tk = takeover_position(f->takeover, f->reader, topic,
                                               pt->tt->remote, pt->partition,
                                               lo, hi, &f->ctl.stop, &exact);
                if (tk >= 0 && exact) {
                        pt->out_next = hi;
                        next         = check_truncation(f, pt, tk);
                        return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
                }
        }
        /* The target ends below what we stored as copied: it was deleted
         * and created again (or lost records in an unclean leader
         * election).  Look at all of it. */
        bool    reset = out_next > hi;
        int64_t from  = out_next > lo && !reset ? out_next : lo;
        int64_t end = hi, span = 4096;
        while (found < 0 && end > from && !atomic_load(&f->ctl.stop)) {
                int64_t start = end - span > from ? end - span : from;
                bool    done;
                /* A deadline on each chunk (on progress): a target whose
                 * leader is moving answers again within seconds. */
                found = scan_copies(f, pt, start, end, RECONCILE_WAIT_MS,
                                    &done);
                if (!done) {
                        /* A partial read cannot tell the last copy: the
                         * stored position could copy records twice. */
                        if (!atomic_load(&f->ctl.stop))
                                flow_fail(f,
                                          "reconciling %s [%d]: could not "
                                          "read target offsets %" PRId64
                                          "..%" PRId64 " of %s at %s in %d s",
                                          topic, (int)pt->partition, start,
                                          end - 1, pt->tt->remote, f->target,
                                          RECONCILE_WAIT_MS / 1000);
                        return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
                }
                end = start;
                if (span < ((int64_t)1 << 24))
                        span *= 4;
        }
        if (reset && !atomic_load(&f->ctl.stop))
                return target_reset(f, pt, next, out_next, lo, hi, found);
        if (found >= 0 && next < 0) {
                /* Copies of ours but no stored position: the state dir is
                 * new or lost.  Not routine, so a warning that says so. */
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d]: no stored position (the state dir is "
                         "new or its state was lost), but the target holds "
                         "copies up to source offset %" PRId64 " in %s; "
                         "resuming at %" PRId64,
                         f->name, topic, (int)pt->partition, found,
                         pt->tt->remote, found + 1);
                next = found + 1;
        } else if (found >= 0 && found + 1 > next) {
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: %s [%d]: target holds copies up to source "
                         "offset %" PRId64 " (stored position %" PRId64
                         "); resuming at %" PRId64,
                         f->name, topic, (int)pt->partition, found, next,
                         found + 1);
                next = found + 1;
        }
        if (found < 0 && next < 0 && tk >= 0)
                next = tk; /* the takeover's, not exact (logged) */
        pt->out_next = hi > out_next ? hi : out_next;
        aagw_log(AAGW_LOG_DEBUG, "FLOW",
                 "%s: %s [%d]: reconciled: %s [%d] ends at %" PRId64
                 ", last copy of source offset %" PRId64 ", stored position "
                 "%" PRId64 "; resuming at %" PRId64,
                 f->name, topic, (int)pt->partition, pt->tt->remote,
                 (int)pt->partition, hi, found, stored, next);
        next = check_truncation(f, pt, next);
        return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
}

/* --------------------------------------------------------- TRUNCATION --- */

/* The source partition's end offset went below what we read: the topic
 * was deleted and recreated (or its log reset).  Offsets now name other
 * records, so the flow stops here (loudly) and the next start resumes at
 * the new log start (reconcile() sees it), rather than mapping new records
 * onto old positions or skipping them silently. */
static void source_shrank(aagw_flow_t *f, struct ptrack *pt, int64_t hi) {
        if (hi >= pt->hi_seen || pt->read_next <= hi) {
                if (hi > pt->hi_seen)
                        pt->hi_seen = hi;
                return;
        }
        /* The consumer's cached watermark comes from its last fetch: just
         * after a leader change the new leader's high watermark can be
         * below the old one's for a moment (kafka-leader_kill).  Ask the
         * leader itself (a new leader answers ListOffsets only once its
         * watermark is current, KIP-207) before calling it a reset. */
        int64_t qlo, qhi;
        if (replicator_watermarks(f->meta, pt->tt->topic,
                                             pt->partition, &qlo, &qhi,
                                             5000) ||
            qhi >= pt->read_next)
                return;
        hi = qhi;
        INC(f->resets);
        aagw_log(AAGW_LOG_ERROR, "FLOW",
                 "%s: %s [%d]: source end offset went back from %" PRId64
                 " to %" PRId64 " (read up to %" PRId64
                 "): the partition was reset or recreated",
                 f->name, pt->tt->topic, (int)pt->partition, pt->hi_seen, hi,
                 pt->read_next);
        pt->hi_seen = hi;
        flow_fail(f,
                  "%s [%d]: source partition reset (end offset %" PRId64
                  " below position %" PRId64 "); restart to resume from its "
                  "log start",
                  pt->tt->topic, (int)pt->partition, hi, pt->read_next);
}

/* Where to resume when the stored position 'next' is outside the source
 * log [lo, hi): records deleted before we copied them (retention,
 * DeleteRecords) or a reset partition.  Logged with the offsets, counted,
 * and resumed at the log start (or failed, on_truncation: fail). */
static int64_t check_truncation(aagw_flow_t *f, struct ptrack *pt,
                                int64_t next) {
        int64_t lo, hi;

        if (next < 0 ||
            replicator_watermarks(f->meta, pt->tt->topic,
                                             pt->partition, &lo, &hi, 10000))
                return next;
        pt->hi_seen = hi;
        if (next > hi) {
                INC(f->resets);
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: %s [%d]: stored position %" PRId64
                         " is past the source end offset %" PRId64
                         " (log start %" PRId64 "): the partition was reset "
                         "or recreated; %s",
                         f->name, pt->tt->topic, (int)pt->partition, next, hi,
                         lo,
                         f->conf.mm2.truncation_fail
                             ? "failing (on_truncation: fail)"
                             : "resuming at its log start");
        } else if (next < lo) {
                INC(f->truncations);
                ADD(f->truncated_records, (uint64_t)(lo - next));
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: %s [%d]: source log start %" PRId64
                         " passed the stored position %" PRId64 ": %" PRId64
                         " records were deleted before they were replicated "
                         "(retention or DeleteRecords); gap %" PRId64
                         "..%" PRId64 "; %s",
                         f->name, pt->tt->topic, (int)pt->partition, lo, next,
                         lo - next, next, lo - 1,
                         f->conf.mm2.truncation_fail
                             ? "failing (on_truncation: fail)"
                             : "resuming at the log start");
        } else
                return next;
        if (f->conf.mm2.truncation_fail)
                flow_fail(f, "%s [%d]: source truncated or reset (position "
                             "%" PRId64 ", log %" PRId64 "..%" PRId64 ")",
                          pt->tt->topic, (int)pt->partition, next, lo, hi);
        return lo;
}

/* Persist the positions that moved, and commit them to the group. */
static void save_positions(aagw_flow_t *f, bool force) {
        struct aagw_flow_pos            *pos;
        size_t                           n = 0, cap = 0;
        rd_kafka_topic_partition_list_t *commit;

        (void)force;
        for (size_t i = 0; i < f->ntopics; i++)
                cap += (size_t)f->topics[i]->partition_cnt;
        if (!cap)
                return;
        pos    = calloc(cap, sizeof(*pos));
        commit = rd_kafka_topic_partition_list_new((int)cap);
        if (!pos)
                goto out;
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        struct ptrack *pt = tt->parts[p];
                        int64_t        lo, hi;
                        if (pt && pt->assigned &&
                            !rd_kafka_get_watermark_offsets(
                                f->consumer, tt->topic, p, &lo, &hi) &&
                            hi >= 0) {
                                atomic_store_explicit(&pt->high, hi, RELAXED);
                                source_shrank(f, pt, hi);
                        }
                        /* The boundary sync: everything below 'next' is
                         * below 'out_next' at the target.  Written when
                         * its delta is new, e.g. after a run of skipped
                         * records at the end of what was read.
                         * (Scale-out: scale_commit() writes it.) */
                        if (pt && pt->assigned && pt->next >= 0 &&
                            pt->head == pt->tail && !f->owner)
                                sync_point(f, pt, pt->next, pt->out_next,
                                           false);
                        if (!pt)
                                continue;
                        /* Scale-out: only what a transaction committed
                         * is final. */
                        int64_t nx = f->owner ? pt->c_next : pt->next;
                        int64_t ox = f->owner ? pt->c_out : pt->out_next;
                        if (nx < 0 ||
                            (nx == pt->saved_next && ox == pt->saved_out))
                                continue;
                        pos[n++] = (struct aagw_flow_pos){tt->topic, p, nx,
                                                          ox};
                        if (pt->assigned)
                                rd_kafka_topic_partition_list_add(commit,
                                                                  tt->topic, p)
                                    ->offset = nx;
                }
        }
        if (n && f->conf.pos_save &&
            f->conf.pos_save(f->conf.opaque, f->scope, pos, n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        struct ptrack *pt =
                            topic_find(f, pos[i].topic)->parts[pos[i].partition];
                        pt->saved_next = pos[i].next;
                        pt->saved_out  = pos[i].out_next;
                }
        } else if (n && f->conf.pos_save) {
                /* The state dir refuses writes (full, read-only): stop
                 * rather than copy on with positions only in memory, and
                 * commit nothing to the group past what is stored. */
                if (!atomic_load(&f->ctl.stop))
                        flow_fail(f, "cannot store positions in the state "
                                     "dir (see the STATE error above); "
                                     "stopping at the stored positions");
                goto out;
        }
        /* (Not once a stop has spent its time for Kafka: the commit
         * would only hold the consumer's destroy.) */
        if (commit->cnt && f->consumer && aagw_kafka_stop_wait_ms(1) > 0)
                rd_kafka_commit(f->consumer, commit, 1 /* async */);
out:
        free(pos);
        rd_kafka_topic_partition_list_destroy(commit);
}

/* Wait for every in-flight record (delivery reports arrive here). */
/* Serve delivery reports until nothing is in flight, for up to
 * 'timeout_ms'; once the flow stops, no longer than what is left of the
 * drain time its destroy allowed (aagw_flow_destroy()). */
static void drain(aagw_flow_t *f, int timeout_ms) {
        int64_t start = aagw_mono_ms(), deadline = start + timeout_ms, now;
        while (atomic_load(&f->inflight) > 0) {
                now = aagw_mono_ms();
                if (f->stop_at &&
                    f->stop_at + atomic_load(&f->drain_ms) < deadline)
                        deadline = f->stop_at + atomic_load(&f->drain_ms);
                if (now >= deadline)
                        break;
                rd_kafka_poll(f->out, 50);
                f->now_cache = aagw_wall_ms();
        }
        if (atomic_load(&f->inflight) > 0)
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %" PRId64 " records still unacknowledged after "
                         "%" PRId64 " ms; their positions are not stored",
                         f->name, atomic_load(&f->inflight),
                         aagw_mono_ms() - start);
}

/* Start copying 'pt' from source offset 'offset' (reconcile()'s answer). */
static void part_start(aagw_flow_t *f, struct ptrack *pt, int64_t offset) {
        pt->next       = offset >= 0 ? offset : -1;
        pt->read_next  = pt->next >= 0 ? pt->next : 0;
        pt->saved_next = -2; /* save once after assign */
        pt->head = pt->tail = 0;
        replicator_start_arm(&pt->start, pt->next);
        if (!pt->assigned)
                atomic_fetch_add(&f->nparts_assigned, 1);
        pt->assigned   = true;
        pt->held       = false;
        pt->sync_known = false;
        pt->c_next     = pt->next;
        pt->c_out      = pt->out_next;
        atomic_store_explicit(&pt->pos_pub, pt->next, RELAXED);
        aagw_log(AAGW_LOG_DEBUG, "FLOW",
                 "%s: assigned %s [%d] from offset %" PRId64, f->name, pt->tt->topic, (int)pt->partition, offset);
}

/* The held partitions of 'tt' below its target count: position each
 * (reconcile(): a new partition from its first record), then let the
 * consumer fetch it.  Resumed first and sought after: the seek's barrier
 * drops whatever the resumed fetch brought from elsewhere. */
static void release_held(aagw_flow_t *f, struct ttrack *tt) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(tt->target_cnt);

        tt->release_retry = false;
        for (int32_t p = 0; p < tt->target_cnt && !atomic_load(&f->ctl.stop);
             p++) {
                struct ptrack *pt = tt->parts[p];
                if (!pt || !pt->assigned || !pt->held)
                        continue;
                int64_t off = reconcile(f, pt);
                part_start(f, pt, off);
                rd_kafka_topic_partition_list_add(l, tt->topic, p)->offset =
                    off;
                if (off == RD_KAFKA_OFFSET_BEGINNING)
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: %s [%d] now has a partition at %s; "
                                 "copying from its first record",
                                 f->name, tt->topic, (int)p, f->target);
                else
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: %s [%d] now has a partition at %s; "
                                 "copying from offset %" PRId64,
                                 f->name, tt->topic, (int)p, f->target, off);
        }
        if (l->cnt) {
                if (!f->paused)
                        rd_kafka_resume_partitions(f->consumer, l);
                rd_kafka_error_t *e =
                    rd_kafka_seek_partitions(f->consumer, l, 5000);
                if (e) {
                        /* (librdkafka 2.0 can answer "timed out" at
                         * once.)  Held again, and started again at the
                         * next discovery: nothing is read meanwhile. */
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: starting %s's new partitions: seek: "
                                 "%s; trying again at the next discovery",
                                 f->name, tt->topic, rd_kafka_error_string(e));
                        rd_kafka_error_destroy(e);
                        rd_kafka_pause_partitions(f->consumer, l);
                        for (int i = 0; i < l->cnt; i++) {
                                struct ptrack *pt =
                                    tt->parts[l->elems[i].partition];
                                pt->held = true;
                                pt->next = -1;
                                atomic_store_explicit(&pt->pos_pub, -1,
                                                      RELAXED);
                        }
                        tt->release_retry = true;
                }
        }
        rd_kafka_topic_partition_list_destroy(l);
}

static void target_count(aagw_flow_t *f, struct ttrack *tt, int have,
                         int want) {
        int32_t missing = want > have ? want - have : 0;

        if (tt->target_cnt > 0 && have > tt->target_cnt) {
                /* The copy grew: the reader (reconcile()) learns of the
                 * new partitions now, not from a failed watermark query
                 * and a wait for the end offset to settle. */
                replicator_refresh_leaders(f->reader, tt->remote, 5000);
        }
        pthread_mutex_lock(&f->ctl.lock);
        tt->target_cnt = have;
        atomic_fetch_add(&f->nparts_missing, missing - tt->missing);
        tt->missing = missing;
        pthread_mutex_unlock(&f->ctl.lock);
        if (missing && !tt->refused) {
                tt->refused = true;
                atomic_fetch_add(&f->ntopics_refused, 1);
        } else if (!missing && tt->refused) {
                tt->refused = false;
                atomic_fetch_sub(&f->ntopics_refused, 1);
        }
        if (missing && tt->reported != want) {
                tt->reported = want;
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: %s has %d partitions at %s, its source %s has "
                         "%d: source partitions %d..%d are held (not read, "
                         "nothing lost) until the copy has them; the other "
                         "partitions and topics keep flowing. Fix: "
                         "kafka-topics.sh --bootstrap-server %s --alter "
                         "--topic %s --partitions %d",
                         f->name, tt->remote, have, f->target, tt->topic, want,
                         have, want - 1, f->target_bs, tt->remote, want);
        } else if (!missing && tt->reported) {
                tt->reported = 0;
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: %s has all %d partitions at %s now", f->name,
                         tt->remote, want, f->target);
        }
        release_held(f, tt);
}

/* Every partition of 'tt' is the flow's: a partition the copy has is
 * reconciled and read from there, one it lacks is held (assigned, paused,
 * positioned when the copy has it: target_count()).  Incremental, so the
 * partitions already read keep their place and what is in flight. */
static void assign_new(aagw_flow_t *f, struct ttrack *tt) {
        rd_kafka_topic_partition_list_t *l, *held;
        rd_kafka_error_t                *e;

        l    = rd_kafka_topic_partition_list_new(tt->partition_cnt);
        held = rd_kafka_topic_partition_list_new(tt->partition_cnt);
        for (int32_t p = 0; p < tt->partition_cnt && !atomic_load(&f->ctl.stop);
             p++) {
                struct ptrack *pt = part_get(f, tt, p);
                int64_t        off;
                if (!pt || pt->assigned || !owned(f, tt, p))
                        continue;
                if (p >= tt->target_cnt) {
                        off      = RD_KAFKA_OFFSET_BEGINNING;
                        pt->held = true;
                        pt->assigned = true;
                        pt->next = -1;
                        atomic_store_explicit(&pt->pos_pub, -1, RELAXED);
                        atomic_fetch_add(&f->nparts_assigned, 1);
                        rd_kafka_topic_partition_list_add(held, tt->topic, p);
                } else {
                        int64_t t0 = aagw_mono_ms();
                        off        = reconcile(f, pt);
                        part_start(f, pt, off);
                        if (f->owner)
                                aagw_log(AAGW_LOG_INFO, "FLOW",
                                         "%s: takeover: %s [%d] (work "
                                         "partition %d) resumes at %s%" PRId64
                                         "; found in %" PRId64 " ms, %" PRId64
                                         " of them waiting for open "
                                         "transactions",
                                         f->name, tt->topic, (int)p,
                                         (int)work_of(f, tt, p),
                                         off < 0 ? "its first record " : "",
                                         off < 0 ? (int64_t)0 : off,
                                         aagw_mono_ms() - t0, f->txn_wait_ms);
                }
                rd_kafka_topic_partition_list_add(l, tt->topic, p)->offset =
                    off;
        }
        if (!l->cnt)
                goto out;
        e = rd_kafka_incremental_assign(f->consumer, l);
        if (e) {
                /* Unassigned again: the next discovery tries again. */
                aagw_log(AAGW_LOG_WARN, "FLOW", "%s: assigning %s: %s",
                         f->name, tt->topic, rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                for (int i = 0; i < l->cnt; i++) {
                        struct ptrack *pt = tt->parts[l->elems[i].partition];
                        pt->assigned = false;
                        pt->held     = false;
                        atomic_fetch_sub(&f->nparts_assigned, 1);
                }
                tt->release_retry = true;
                goto out;
        }
        /* A paused flow (paused before, or kept paused across a restart)
         * stays paused on partitions it takes now; records fetched
         * before the pause are dropped by librdkafka's pause barrier. */
        if (f->paused)
                rd_kafka_pause_partitions(f->consumer, l);
        else if (held->cnt)
                rd_kafka_pause_partitions(f->consumer, held);
        if (atomic_load(&f->ctl.state) == AAGW_FLOW_STARTING)
                atomic_store(&f->ctl.state, AAGW_FLOW_RUNNING);
out:
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_topic_partition_list_destroy(held);
}

static int unassign(aagw_flow_t *f, struct ttrack *tt, int drain_ms) {
        rd_kafka_topic_partition_list_t *l;

        drain(f, drain_ms);
        if (atomic_load(&f->inflight) > 0) {
                /* (Stopping: flow_main() drains and stores once more.) */
                if (!atomic_load(&f->ctl.stop))
                        flow_fail(f, "%" PRId64 " records still "
                                     "unacknowledged after %d ms: cannot "
                                     "let go of %s's partitions",
                                  atomic_load(&f->inflight), drain_ms,
                                  tt ? tt->topic : "the topics");
                return -1;
        }
        save_positions(f, true);
        l = rd_kafka_topic_partition_list_new(16);
        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *t = f->topics[i];
                if (tt && t != tt)
                        continue;
                for (int32_t p = 0; p < t->partition_cnt; p++) {
                        struct ptrack *pt = t->parts[p];
                        if (!pt || !pt->assigned)
                                continue;
                        pt->assigned = false;
                        pt->held     = false;
                        atomic_fetch_sub(&f->nparts_assigned, 1);
                        rd_kafka_topic_partition_list_add(l, t->topic, p);
                }
        }
        pthread_mutex_unlock(&f->ctl.lock);
        if (l->cnt) {
                rd_kafka_error_t *e =
                    rd_kafka_incremental_unassign(f->consumer, l);
                if (e) {
                        aagw_log(AAGW_LOG_WARN, "FLOW", "%s: unassign: %s",
                                 f->name, rd_kafka_error_string(e));
                        rd_kafka_error_destroy(e);
                }
        }
        rd_kafka_topic_partition_list_destroy(l);
        return 0;
}

/* The identity lease's group gave it partitions: it reads none of them
 * (an empty assignment); that it was given any tells that it holds the
 * group.instance.id. */
static void lease_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t *parts, void *opaque) {
        aagw_flow_t *f = opaque;

        (void)parts;
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
                /* (At every join: a start, a rejoin, a topic added.) */
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: identity lease holds group.instance.id %s in "
                         "group %s",
                         f->name, f->instance, f->lease_group);
                if (!f->lease_held) {
                        f->lease_held    = true;
                        f->lease_held_ms = aagw_mono_ms();
                }
        }
        rd_kafka_assign(rk, NULL);
}

/* ------------------------------------------------------------ RECORDS --- */

/* The consumer jumped from 'read_next' to 'offset'.  Compaction and
 * transaction markers do that legitimately; a log start beyond
 * 'read_next' means retention deleted records before we read them (the
 * consumer was reset to the earliest offset): count and log the gap. */
static void check_gap(aagw_flow_t *f, struct ptrack *pt, int64_t offset) {
        int64_t lo, hi;

        if (rd_kafka_get_watermark_offsets(f->consumer, pt->tt->topic,
                                           pt->partition, &lo, &hi) ||
            lo <= pt->read_next)
                return;
        INC(f->truncations);
        ADD(f->truncated_records, (uint64_t)(offset - pt->read_next));
        aagw_log(AAGW_LOG_ERROR, "FLOW",
                 "%s: %s [%d]: source log start %" PRId64 " passed the read "
                 "position %" PRId64 ": records %" PRId64 "..%" PRId64
                 " were deleted before they were replicated; continuing at "
                 "%" PRId64,
                 f->name, pt->tt->topic, (int)pt->partition, lo,
                 pt->read_next, pt->read_next, offset - 1, offset);
        if (f->conf.mm2.truncation_fail)
                flow_fail(f, "%s [%d]: source truncated at %" PRId64,
                          pt->tt->topic, (int)pt->partition, pt->read_next);
}

/* Scale-out: what the transactions before found of this record
 * (refused.c); NULL: nothing. */
static struct refused_rec *refused_of(aagw_flow_t *f, const struct ttrack *tt,
                                      const rd_kafka_message_t *m) {
        if (!f->owner || !refused_count(f->refused))
                return NULL;
        return refused_find(f->refused, tt->topic, m->partition, m->offset);
}

/* Serve delivery reports until at most 'until' records are in flight,
 * or 'timeout_ms' passed. */
static void settle_inflight(aagw_flow_t *f, int64_t until, int timeout_ms) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        while (atomic_load(&f->inflight) > until &&
               aagw_mono_ms() < deadline && !atomic_load(&f->ctl.stop)) {
                rd_kafka_poll(f->out, 10);
                f->now_cache = aagw_wall_ms();
        }
}

/* Decide and act on one consumed record.  Returns true if 'm' now belongs
 * to an in-flight produce (destroyed with its final delivery report). */
static bool handle(aagw_flow_t *f, rd_kafka_message_t *m) {
        struct aagw_verdict *v = &f->verdict;
        struct ttrack       *tt;
        struct ptrack       *pt;
        struct aagw_rec      rec;
        rd_kafka_timestamp_type_t tstype;
        uint64_t             seq;
        char                 why[640];

        if (aagw_kafka_fatal(f->consumer, m->err, why, sizeof(why))) {
                flow_fail(f, "consume: %s", why);
                return false;
        }
        if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        aagw_log(AAGW_LOG_WARN, "FLOW", "%s: consume: %s",
                                 f->name, rd_kafka_message_errstr(m));
                replicator_note_authz(f->source, m->err, "READ",
                                      "topic %s, group %s",
                                      m->rkt ? rd_kafka_topic_name(m->rkt)
                                             : "?",
                                      f->group);
                return false;
        }
        INC(f->records_in);
        if (m->rkt == f->last_rkt) {
                tt = f->last_tt;
        } else {
                tt          = topic_find(f, rd_kafka_topic_name(m->rkt));
                f->last_rkt = m->rkt;
                f->last_tt  = tt;
        }
        pt = tt ? part_get(f, tt, m->partition) : NULL;
        if (!pt || !pt->assigned || pt->held)
                return false; /* not ours (any more), or not yet: it will
                                 be re-read */
        if (m->offset < pt->read_next)
                return false; /* already taken in (re-fetch after a seek) */
        /* (Scale-out: flow_main() consumes only with a transaction open.) */
        f->txn_dirty = true;
        if (pt->start.pending) {
                struct replicator_start_ctx sc = {
                    f->consumer, "FLOW", f->name, f->batch_no,
                    &f->start_refetches};
                if (replicator_start_take(&pt->start, &sc, tt->topic,
                                          pt->partition, pt->read_next,
                                          m->offset))
                        return false;
        }
        if (pt->next < 0)
                pt->next = m->offset; /* from the beginning */
        else if (m->offset > pt->read_next)
                check_gap(f, pt, m->offset);
        pt->read_next = m->offset + 1;

        memset(&rec, 0, sizeof(rec));
        rec.topic        = tt->topic;
        rec.partition    = m->partition;
        rec.offset       = m->offset;
        rec.timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
        rec.key          = m->key;
        rec.key_len      = m->key_len;
        rec.value        = m->payload;
        rec.value_len    = m->len;
        rec.hdr_cnt      = collect_headers(f, m);
        rec.hdrs         = f->hdrs;

        if (aagw_repl_verdict(f->pol, f->source, f->target, &rec, tt->id_rule,
                              f->conf.verdict_flags |
                                  (tt->prechecked ? AAGW_VERDICT_F_PRECHECKED
                                                  : 0),
                              v)) {
                flow_fail(f, "%s [%d] offset %" PRId64 ": verdict failed",
                          tt->topic, (int)m->partition, m->offset);
                return false;
        }
        int64_t origin_ms = v->kind == AAGW_VERDICT_REPLICATE
                                ? aagw_hlc_ms(v->prov.hlc)
                                : rec.timestamp_ms;
        if (ring_push(pt, m->offset, origin_ms, &seq)) {
                flow_fail(f, "out of memory");
                return false;
        }
        struct slot *sl = &pt->ring[seq & (pt->cap - 1)];

        if (v->path_forged) {
                /* Not written here by aagw: the sites on its path will
                 * never all hold it.  Logged at 1, 2, 4, 8, ... */
                uint64_t n = atomic_fetch_add_explicit(
                                 &f->diverged, 1, memory_order_relaxed) +
                             1;
                if (!(n & (n - 1)))
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": its "
                                 "provenance path contradicts the topic "
                                 "name (forged, or forwarded from a copy): "
                                 "the sites will diverge (%" PRIu64
                                 " such records so far)",
                                 f->name, tt->topic, (int)m->partition,
                                 m->offset, n);
        }
        if (v->kind == AAGW_VERDICT_SKIP) {
                INC(f->skipped[v->skip]);
                sl->done = 1;
                ring_advance(f, pt);
                return false;
        }
        if (v->kind == AAGW_VERDICT_REJECT) {
                INC(f->rejected[v->reason ? v->reason : v->id_reason]);
                if (v->action == AAGW_BAD_FAIL) {
                        flow_fail(f,
                                  "%s [%d] offset %" PRId64
                                  ": bad provenance (%s) and bad_provenance "
                                  "is fail",
                                  tt->topic, (int)m->partition, m->offset,
                                  aagw_reason_name(v->reason ? v->reason
                                                             : v->id_reason));
                        return false;
                }
                struct token *tok = token_get(f);
                if (!tok) {
                        flow_fail(f, "out of memory");
                        return false;
                }
                tok->pt  = pt;
                tok->seq = seq;
                tok->base.src = m;
                ADD(f->inflight, 1);
                struct refused_rec *rr = refused_of(f, tt, m);
                if (rr && rr->dlq_err) {
                        /* Scale-out: its dead-letter copy was too large
                         * for the target when the transaction was tried
                         * before: without the record this time. */
                        rr->resolved = true;
                        count_refusal(f);
                        produce_dlq_stub(f, tok, m,
                                         rd_kafka_err2str(rr->dlq_err));
                        return true;
                }
                produce_dlq(f, tok, m,
                            aagw_reason_name(v->reason ? v->reason
                                                       : v->id_reason));
                return true;
        }
        if (v->reason != AAGW_REASON_OK)
                INC(f->bad_passed);

        /* The copy: the producer's headers (taken over from the consumed
         * record, not copied) minus any under our prefix, then the
         * verdict's provenance, and the hop coordinates when the record
         * was not stamped here. */
        rd_kafka_headers_t *h = replicator_copy_headers(
            f->pol, m, rec.hdrs, rec.hdr_cnt, rec.hdr_cnt > 0,
            v->hdrs.cnt + 1);
        for (size_t i = 0; i < v->hdrs.cnt; i++)
                rd_kafka_header_add(h, v->hdrs.hdrs[i].name, -1,
                                    v->hdrs.hdrs[i].value,
                                    (ssize_t)v->hdrs.hdrs[i].size);
        if (!v->fresh) {
                char   hop[AAGW_COORDS_MAX];
                size_t n = aagw_coords_format(hop, tt->topic, m->partition,
                                              m->offset);
                rd_kafka_header_add(h, f->hop_hdr, -1, hop, (ssize_t)n);
        }
        struct token *tok = token_get(f);
        if (!tok) {
                rd_kafka_headers_destroy(h);
                flow_fail(f, "out of memory");
                return false;
        }
        tok->pt    = pt;
        tok->seq   = seq;
        tok->dlq   = false;
        tok->alone = false;
        tok->base.src = m;
        ADD(f->inflight, 1);
        struct refused_rec *rr = refused_of(f, tt, m);
        if (rr && rr->confirmed) {
                /* Scale-out: the target refused this copy for good when
                 * the transaction was tried before (scale_failed()): its
                 * dead-letter copy goes into this one instead, with the
                 * copy's headers, as on_delivery() sends it in
                 * single-process mode. */
                rd_kafka_message_set_headers(m, h);
                rr->resolved = true;
                count_refusal(f);
                if (rr->dlq_err)
                        produce_dlq_stub(f, tok, m,
                                         rd_kafka_err2str(rr->dlq_err));
                else
                        produce_dlq(f, tok, m, rd_kafka_err2str(rr->err));
                return true;
        }
        if (rr && !f->txn_broken) {
                /* A suspect: alone in its batch, so that the target's
                 * answer is about this record. */
                settle_inflight(f, 1, ALONE_MS);
                tok->alone = atomic_load(&f->inflight) == 1;
        }
        rd_kafka_resp_err_t err;
        if (produce_retry(f, tt->rkt, m->partition, m, h, rec.timestamp_ms,
                          tok, &err)) {
                if (too_large(err) && !atomic_load(&f->ctl.stop)) {
                        /* The copy's headers go back on the record for
                         * its dead-letter copy (as a refused copy's
                         * delivery report would carry them). */
                        rd_kafka_message_set_headers(m, h);
                        /* Over the producer's message.max.bytes with our
                         * headers: permanent, as a refusal by the broker
                         * would be (on_delivery()).  Scale-out as well:
                         * nothing was sent, the transaction goes on. */
                        tok->alone = false;
                        count_refusal(f);
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64
                                 ": the copy is too large (%s); "
                                 "dead-lettering",
                                 f->name, tt->topic, (int)m->partition,
                                 m->offset, rd_kafka_err2str(err));
                        produce_dlq(f, tok, m, rd_kafka_err2str(err));
                        return true;
                }
                rd_kafka_headers_destroy(h);
                ADD(f->inflight, -1);
                tok->base.src = NULL; /* the caller still owns 'm' */
                token_put(f, tok);
                replicator_note_authz(f->target, err, "WRITE", "topic %s",
                                      tt->remote);
                if (f->owner && !target_gone(err) &&
                    !atomic_load(&f->ctl.stop)) {
                        /* Scale-out: the transaction is unusable (its
                         * state, a fence): every partition is copied
                         * again from what the target holds
                         * (scale_drop()), this record with them. */
                        if (!f->txn_broken)
                                aagw_log(AAGW_LOG_WARN, "FLOW",
                                         "%s: produce to %s [%d]: %s; "
                                         "aborting the transaction",
                                         f->name, tt->remote,
                                         (int)m->partition,
                                         rd_kafka_err2str(err));
                        f->txn_broken = true;
                } else if (target_gone(err))
                        fail_target_gone(f, pt, err);
                else if (write_denied(err))
                        /* librdkafka refuses at once what a refused
                         * write's topic gets next. */
                        fail_write_denied(f, pt, tt->remote, err);
                else if (!atomic_load(&f->ctl.stop))
                        flow_fail(f, "produce to %s [%d]: %s", tt->remote,
                                  (int)m->partition, rd_kafka_err2str(err));
                return false;
        }
        if (tok->alone) {
                /* Its answer before anything else is sent.  (Still
                 * unanswered, the token is still ours: nothing else is in
                 * flight.) */
                settle_inflight(f, 0, ALONE_MS);
                if (atomic_load(&f->inflight) > 0)
                        tok->alone = false;
        }
        return true;
}

/* ------------------------------------------------------------- THREAD --- */

static void set_paused(aagw_flow_t *f, bool pause) {
        rd_kafka_topic_partition_list_t *a = NULL;
        if (rd_kafka_assignment(f->consumer, &a) || !a)
                return;
        if (pause)
                rd_kafka_pause_partitions(f->consumer, a);
        else {
                /* Held partitions stay paused: they have no target
                 * partition to go to. */
                rd_kafka_topic_partition_list_t *r =
                    rd_kafka_topic_partition_list_new(a->cnt);
                for (int i = 0; i < a->cnt; i++) {
                        struct ttrack *tt = topic_find(f, a->elems[i].topic);
                        struct ptrack *pt =
                            tt ? part_get(f, tt, a->elems[i].partition) : NULL;
                        if (!pt || !pt->held)
                                rd_kafka_topic_partition_list_add(
                                    r, a->elems[i].topic,
                                    a->elems[i].partition);
                }
                rd_kafka_resume_partitions(f->consumer, r);
                rd_kafka_topic_partition_list_destroy(r);
        }
        rd_kafka_topic_partition_list_destroy(a);
        f->paused = pause;
        atomic_store(&f->ctl.state, pause ? AAGW_FLOW_PAUSED : AAGW_FLOW_RUNNING);
        aagw_log(AAGW_LOG_INFO, "FLOW", "%s: %s", f->name,
                 pause ? "paused" : "resumed");
}

/* Partitions whose fetch stands still while the leader holds more (the
 * stall watch): seek each to where the flow is, on the refreshed metadata,
 * which starts its fetch again.  Only with the queue empty and the flow
 * not paused, so a flow that holds back (a full target) or an operator's
 * pause is never taken for a stall. */
static void restart_stalled(aagw_flow_t *f, int64_t now) {
        struct aagw_stall_report r[16];
        size_t n = aagw_stall_watch_stalled(f->stalls, now, r, 16);

        if (!n)
                return;
        aagw_fetch_stalls_note(f->consumer, f->name, r, n);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)n);
        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, r[i].topic,
                                                  r[i].partition)
                    ->offset = r[i].pos;
        rd_kafka_error_t *e = rd_kafka_seek_partitions(f->consumer, l, 2000);
        if (e) {
                aagw_log(AAGW_LOG_WARN, "FETCH", "%s: seek: %s", f->name,
                         rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
        }
        rd_kafka_topic_partition_list_destroy(l);
        INC(f->fetch_restarts);
}

static int make_lease(aagw_flow_t *f, char *errstr, size_t errstr_size);

/* Serve the identity lease: its group's callbacks (lease_cb()) and
 * errors.  Fenced, it sets f->fenced for lease_fenced(). */
static void lease_poll(aagw_flow_t *f) {
        rd_kafka_message_t *m;
        char                why[640];

        while (f->lease && !f->fenced &&
               (m = rd_kafka_consumer_poll(f->lease, 0))) {
                if (m->err == RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT) {
                        /* The broker refuses to let it join, and will
                         * forever: say what to change. */
                        flow_fail(f, "identity lease: %s: session.timeout.ms "
                                     "is outside %s's group.min/max."
                                     "session.timeout.ms (set clusters.%s."
                                     "properties.consumer.session.timeout.ms)",
                                  rd_kafka_message_errstr(m), f->source,
                                  f->source);
                } else if (aagw_kafka_fatal(f->lease, m->err, why,
                                            sizeof(why))) {
                        if (rd_kafka_fatal_error(f->lease, NULL, 0) ==
                            RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID)
                                f->fenced = true;
                        else
                                flow_fail(f, "identity lease: %s", why);
                } else if (m->err) {
                        /* (A subscribed topic deleted meanwhile, a
                         * coordinator moving: the lease reads nothing.) */
                        aagw_log(AAGW_LOG_DEBUG, "FLOW",
                                 "%s: identity lease: %s", f->name,
                                 rd_kafka_message_errstr(m));
                        replicator_note_authz(f->source, m->err, "READ",
                                              "group %s", f->lease_group);
                }
                rd_kafka_message_destroy(m);
        }
}

/* The identity lease was fenced (FENCED_INSTANCE_ID, fatal in
 * librdkafka): its group gave the flow's group.instance.id to a newer
 * member, another process with this gateway id and site, or this
 * process's own lease rejoining after the process stalled past its
 * session.  Stop copying (the records in flight acknowledged, the
 * positions stored, every partition unassigned), replace the lease, and
 * copy again, every partition reconciled against the target, only once
 * the new lease has held the id for LEASE_SETTLE_MS (flow_main()): the
 * other process, fenced in turn, has stopped copying by then.  Fails the flow, and returns
 * -1, if it cannot, or if the last restart was less than REFENCE_MS ago:
 * two processes take the id from each other, and this one gives up. */
static int lease_fenced(aagw_flow_t *f) {
        char    why[512], msg[640], errstr[512];
        int64_t now = aagw_mono_ms();

        f->fenced = false;
        rd_kafka_fatal_error(f->lease, why, sizeof(why));
        if (f->restart_ms && now - f->restart_ms < REFENCE_MS) {
                aagw_kafka_fatal(f->lease, RD_KAFKA_RESP_ERR__FATAL, msg,
                                 sizeof(msg));
                flow_fail(f, "identity lease: %s; fenced again %.1f s after "
                             "the lease was restarted for the same reason",
                          msg, (double)(now - f->restart_ms) / 1000.0);
                return -1;
        }
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: identity lease fenced (%s): group %s gave its "
                 "group.instance.id %s to a newer member, another process "
                 "with this gateway id and site or this process's own rejoin "
                 "after it stalled past session.timeout.ms; stopping the "
                 "copy and restarting the lease",
                 f->name, why, f->lease_group, f->instance);
        if (unassign(f, NULL, RESTART_DRAIN_MS))
                return -1;
        rd_kafka_destroy_flags(f->lease, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
        f->lease      = NULL;
        f->lease_held = false;
        f->lease_wait = true;
        if (make_lease(f, errstr, sizeof(errstr))) {
                flow_fail(f, "identity lease fenced (%s); cannot restart it: "
                             "%s",
                          why, errstr);
                return -1;
        }
        f->restart_ms = aagw_mono_ms();
        INC(f->consumer_restarts);
        f->subscription_dirty = true;
        discover(f);
        return 0;
}

/* After a fence, the restarted lease holds the id: every partition is
 * the flow's again (assign_new(): reconciled against the target, which
 * the other process may have written to meanwhile). */
static void lease_regained(aagw_flow_t *f) {
        f->lease_wait = false;
        aagw_log(AAGW_LOG_INFO, "FLOW",
                 "%s: identity lease restarted; copying again", f->name);
        for (size_t i = 0; i < f->ntopics; i++)
                if (f->topics[i]->active)
                        assign_new(f, f->topics[i]);
}

/* ---------------------------------------------------------- SCALE-OUT --- */

/*
 * With scale_out enabled, the processes of one site share this flow: a
 * source partition (t, s) belongs to work partition (XXH32(t) + s) % W of
 * the work topic aagw.<gw>.<source>-<target>.work at the TARGET, and the
 * owners' group (owner.c) gives each work partition to one process.  The
 * copies of the owned partitions go into transactions of the owner's
 * producer (transactional.id aagw.<gw>.<source>-<target>.<member>), each
 * committed with the offsets of the owned work partitions, which the
 * group coordinator refuses from a member the group has moved on from: a
 * zombie's copies stay aborted, invisible to read_committed readers.
 * Positions (RocksDB, the group commit, offset-syncs) move only after a
 * commit (c_next, c_out); an aborted or fenced transaction drops every
 * partition, and those still owned are reconciled again against what the
 * target holds read_committed (stable_end(), reconcile()).  No identity
 * lease: the owners' group is the identity.
 *
 * A record the target refuses for good (too large for the copy's
 * max.message.bytes, invalid: replicator_refused_for_good()) takes its
 * transaction with it, and the redo would meet it again.  So the abort
 * remembers it (refused.c) and the redo writes its dead-letter copy
 * (produce_dlq(), the same topic and headers as in single-process mode)
 * in its place, inside the transaction that moves past it; the copy's
 * other records go on.  The broker refuses a batch, not a record: every
 * record librdkafka had batched with the culprit comes back refused too.
 * So a refusal first makes a record a suspect, which the redo sends
 * alone (nothing else of the flow in flight, its answer awaited): refused
 * alone, it is refused for good (the next redo dead-letters it);
 * acknowledged, it is forgotten.  That costs a second abort per refused
 * batch, and a round trip per suspect, once.  A record over the
 * producer's own message.max.bytes is refused by producev() before it is
 * sent: dead-lettered at once, no abort.  Dead-lettered records and
 * produce errors are counted when their transaction commits.  A refused
 * dead-letter copy (too large) is remembered the same way and goes
 * without the record next time (produce_dlq_stub()), not sent alone
 * first.
 */

/* A record of the open transaction failed (its delivery report): the
 * transaction is aborted and redone (scale_poll()).  Timeouts, fencing
 * and the like the redo gets past; a refusal for good is remembered, see
 * above. */
static void scale_failed(aagw_flow_t *f, struct token *tok,
                         const rd_kafka_message_t *m) {
        struct ptrack      *pt = tok->pt;
        struct slot        *sl = &pt->ring[tok->seq & (pt->cap - 1)];
        struct refused_rec *rr = NULL;

        if (!replicator_refused_for_good(m->err) ||
            atomic_load(&f->ctl.stop)) {
                if (!f->txn_broken && m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": delivery "
                                 "to %s failed: %s; aborting the "
                                 "transaction",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, rd_kafka_topic_name(m->rkt),
                                 rd_kafka_err2str(m->err));
                f->txn_broken = true;
                return;
        }
        if (tok->dlq && (tok->stub || !too_large(m->err))) {
                /* As in single-process mode: nowhere left to put it. */
                flow_fail(f,
                          "%s [%d] offset %" PRId64
                          ": dead-letter delivery failed: %s",
                          pt->tt->topic, (int)pt->partition, sl->src_off,
                          rd_kafka_err2str(m->err));
                return;
        }
        if (!(rr = refused_add(f->refused, pt->tt->topic, pt->partition,
                               sl->src_off))) {
                flow_fail(f,
                          "member %s: %s [%d] offset %" PRId64 ": %s refused "
                          "it (%s) and %zu refused records are remembered "
                          "already (out of memory, or more than %d)",
                          f->conf.scale_out->member, pt->tt->topic,
                          (int)pt->partition, sl->src_off, f->target,
                          rd_kafka_err2str(m->err),
                          refused_count(f->refused), REFUSED_MAX);
                return;
        }
        if (tok->dlq) {
                /* Its dead-letter copy is too large: the redo sends one
                 * without the record. */
                rr->dlq_err = m->err;
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: the dead-letter copy of %s [%d] offset %" PRId64
                         " is too large for %s (%s); aborting the "
                         "transaction, the redo dead-letters it without its "
                         "key, value and headers",
                         f->name, pt->tt->topic, (int)pt->partition,
                         sl->src_off, f->dlq_topic, rd_kafka_err2str(m->err));
        } else if (tok->alone && !rr->confirmed) {
                rr->confirmed = true;
                rr->err       = m->err;
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d] offset %" PRId64 ": %s refuses its copy "
                         "for good (%s); the transaction is redone with its "
                         "dead-letter copy in %s instead",
                         f->name, pt->tt->topic, (int)pt->partition,
                         sl->src_off, f->target, rd_kafka_err2str(m->err),
                         f->dlq_topic);
        } else if (!rr->confirmed) {
                rr->err = m->err;
                if (!f->txn_broken)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": %s refused "
                                 "it with its batch (%s); aborting the "
                                 "transaction; the redo sends each record "
                                 "of the batch alone to find the one refused "
                                 "for good",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, f->target,
                                 rd_kafka_err2str(m->err));
        }
        f->txn_broken = true;
}

/* refused_each() at a commit: what it dead-lettered is done with, as is
 * anything before the committed position (a suspect copied with others
 * after its wait to be alone ran out); and a source partition no longer
 * copied here is another member's to find out. */
static bool refused_keep(void *arg, struct refused_rec *r) {
        aagw_flow_t   *f  = arg;
        struct ttrack *tt = topic_find(f, r->topic);
        struct ptrack *pt = tt && r->partition < tt->partition_cnt
                                ? tt->parts[r->partition]
                                : NULL;

        return !r->resolved && pt && pt->assigned && !pt->held &&
               owned(f, tt, r->partition) && r->offset >= pt->c_next;
}

/* refused_each() at an abort: what it dead-lettered goes again. */
static bool refused_unmark(void *arg, struct refused_rec *r) {
        (void)arg;
        r->resolved = false;
        return true;
}

/* The open transaction is gone: its counts and marks with it. */
static void scale_forget(aagw_flow_t *f) {
        f->txn_dlq = f->txn_errs = 0;
        if (refused_count(f->refused))
                refused_each(f->refused, refused_unmark, NULL);
}

/* "0,3" of a partition list ("none" if empty), for the log. */
static void parts_str(const rd_kafka_topic_partition_list_t *l, char *buf,
                      size_t size) {
        size_t n = 0;

        buf[0] = '\0';
        for (int i = 0; l && i < l->cnt && n < size; i++)
                n += (size_t)snprintf(buf + n, size - n, "%s%" PRId32,
                                      i ? "," : "", l->elems[i].partition);
        if (!l || !l->cnt)
                snprintf(buf, size, "none");
}

/* owner_conf.on_gained / on_lost: called inside owner_poll() and
 * owner_commit(); the flow acts once they returned (scale_poll()). */
static void scale_gained(void *opaque,
                         const rd_kafka_topic_partition_list_t *parts) {
        aagw_flow_t *f = opaque;

        (void)parts;
        f->gained = true;
        INC(f->rebalances);
        atomic_store(&f->owned_work, owner_partitions(f->owner)->cnt);
        atomic_store(&f->leads_mm2, owner_owned(f->owner, 0));
}

static void scale_lost(void *opaque,
                       const rd_kafka_topic_partition_list_t *parts) {
        aagw_flow_t *f = opaque;

        (void)parts;
        f->lost    = true;
        f->lost_ms = aagw_mono_ms();
        atomic_store(&f->owned_work, owner_partitions(f->owner)->cnt);
        atomic_store(&f->leads_mm2, owner_owned(f->owner, 0));
}

/* Delivery reports of the owner's producer: as the flow's own. */
static void scale_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                     void *opaque) {
        (void)rk;
        if (m->_private)
                on_delivery(opaque, m->_private, m);
}

#define RENEW_MAX       3     /* new producers per window, then fail */
#define RENEW_WINDOW_MS 60000

/* The owner's producer failed for good (librdkafka's fatal error): a
 * zombie whose open transaction the coordinator aborted and fenced
 * (epoch bumped) while it stood still, or an abort refused as
 * INVALID_TXN_STATE.  Nothing of its open transaction becomes visible
 * either way; flow_main() makes a new producer (owner_renew(), the
 * membership is kept) and the owned partitions are reconciled again.
 * More than RENEW_MAX in a minute is another process running as this
 * member: the flow fails. */
static void scale_fatal(aagw_flow_t *f, const char *why) {
        const char *member = f->conf.scale_out->member;
        int64_t     now    = aagw_mono_ms();

        f->txn_open = false;
        if (f->need_renew)
                return;
        if (!f->renew_since_ms || now - f->renew_since_ms > RENEW_WINDOW_MS) {
                f->renew_since_ms = now;
                f->renewals       = 0;
        }
        if (++f->renewals > RENEW_MAX) {
                flow_fail(f,
                          "member %s: transactions: %s (its transactional "
                          "producer failed for good %d times within %d s: "
                          "does another process run as member %s?)",
                          member, why, f->renewals, RENEW_WINDOW_MS / 1000,
                          member);
                return;
        }
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: member %s: %s; its open transaction stays invisible; "
                 "making a new transactional producer",
                 f->name, member, why);
        f->need_renew = true;
}

/* Give up the open transaction (aborted: its copies are never visible)
 * and every source partition with it, at once: a lost work partition is
 * no longer this process's to write, and the partitions still owned
 * resume from what the target holds, found anew (scale_gain()). */
static void scale_drop(aagw_flow_t *f) {
        char why[512];

        f->lost = false;
        if (f->txn_open) {
                /* What was sent is let come back first (nothing new is
                 * sent): librdkafka 2.0.2 aborting with records in flight
                 * had EndTxn refused INVALID_TXN_STATE, a fatal error,
                 * in one run in three of kafka-scale_flow. */
                drain(f, DRAIN_MS);
                if (owner_abort(f->owner, why, sizeof(why)) ==
                    AAGW_OWNER_FATAL)
                        scale_fatal(f, why);
                f->txn_open = false;
        }
        f->txn_dirty = false;
        /* The purged records' reports, and the committed positions
         * stored. */
        int gone = unassign(f, NULL, DRAIN_MS);
        scale_forget(f);
        if (gone)
                return;
        f->txn_broken = false;
        f->gained     = true;
}

/* Take the owned source partitions this process does not copy yet:
 * each reconciled against the target (assign_new() logs where each
 * resumed and how long finding it took). */
static void scale_gain(aagw_flow_t *f) {
        int64_t t0 = aagw_mono_ms();
        char    parts[1024];

        f->gained = false;
        for (size_t i = 0; i < f->ntopics && !atomic_load(&f->ctl.stop); i++)
                if (f->topics[i]->active)
                        assign_new(f, f->topics[i]);
        parts_str(owner_partitions(f->owner), parts, sizeof(parts));
        int64_t now = aagw_mono_ms();
        aagw_log(AAGW_LOG_INFO, "FLOW",
                 "%s: member %s owns work partitions [%s] of %s: %d source "
                 "partitions, reconciled in %" PRId64 " ms%s",
                 f->name, f->conf.scale_out->member, parts, f->work_topic,
                 (int)atomic_load(&f->nparts_assigned), now - t0,
                 f->lost_ms ? " after a rebalance" : "");
        if (f->lost_ms)
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: rebalance took %" PRId64 " ms from losing the "
                         "previous partitions to %s",
                         f->name, now - f->lost_ms,
                         atomic_load(&f->nparts_assigned)
                             ? "copying again"
                             : "owning none (other members copy)");
        f->lost_ms = 0;
        /* (A member may own no partition at all: it runs.) */
        if (atomic_load(&f->ctl.state) == AAGW_FLOW_STARTING)
                atomic_store(&f->ctl.state, AAGW_FLOW_RUNNING);
}

/* Commit the open transaction: its copies acknowledged first, then the
 * offsets of every owned work partition with the group's metadata (the
 * fence).  Only then the positions are final. */
static void scale_commit(aagw_flow_t *f) {
        const rd_kafka_topic_partition_list_t *own =
            owner_partitions(f->owner);
        char why[700];

        if (!f->txn_open)
                return;
        drain(f, DRAIN_MS);
        if (atomic_load(&f->inflight) > 0 || !own->cnt || f->txn_broken) {
                INC(f->aborted_txns);
                scale_drop(f);
                return;
        }
        rd_kafka_topic_partition_list_t *offs =
            rd_kafka_topic_partition_list_copy(own);
        for (int i = 0; i < offs->cnt; i++)
                offs->elems[i].offset = 0; /* any >= 0: it is the fence */
        owner_result_t r = owner_commit(f->owner, offs, why, sizeof(why));
        rd_kafka_topic_partition_list_destroy(offs);
        f->txn_open = false;
        switch (r) {
        case AAGW_OWNER_OK:
                INC(f->committed_txns);
                f->txn_dirty = false;
                ADD(f->dead_lettered, f->txn_dlq);
                ADD(f->produce_errors, f->txn_errs);
                f->txn_dlq = f->txn_errs = 0;
                for (size_t i = 0; i < f->ntopics; i++) {
                        struct ttrack *tt = f->topics[i];
                        for (int32_t p = 0; p < tt->partition_cnt; p++) {
                                struct ptrack *pt = tt->parts[p];
                                if (!pt || !pt->assigned || pt->held)
                                        continue;
                                pt->c_next = pt->next;
                                pt->c_out  = pt->out_next;
                                if (pt->next >= 0)
                                        sync_point(f, pt, pt->next,
                                                   pt->out_next, false);
                        }
                }
                if (refused_count(f->refused))
                        refused_each(f->refused, refused_keep, f);
                break;
        case AAGW_OWNER_ABORTED:
                INC(f->aborted_txns);
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: member %s: %s; copying its partitions again "
                         "from what %s holds",
                         f->name, f->conf.scale_out->member, why, f->target);
                scale_drop(f);
                break;
        case AAGW_OWNER_FENCED:
                INC(f->fenced_txns);
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: member %s fenced: %s; its copies since the "
                         "last commit stay invisible",
                         f->name, f->conf.scale_out->member, why);
                scale_drop(f);
                break;
        case AAGW_OWNER_FATAL:
                scale_fatal(f, why);
                break;
        }
}

/* Serve the ownership once per round of flow_main(): rebalances, the
 * commit when the transaction is old enough, a new transaction when
 * there are partitions to copy.  Returns whether records may be
 * consumed now (only into an open transaction). */
static bool scale_poll(aagw_flow_t *f) {
        char why[512];

        if (f->need_renew)
                return false; /* flow_main() renews the producer first */

        if (owner_poll(f->owner, 0, why, sizeof(why))) {
                flow_fail(f, "member %s: owners' group %s: %s",
                          f->conf.scale_out->member, f->owners_group, why);
                return false;
        }
        if (f->txn_broken) {
                INC(f->aborted_txns);
                f->lost = true;
        }
        if (f->lost)
                scale_drop(f);
        if (f->gained && !atomic_load(&f->ctl.stop))
                scale_gain(f);
        if (f->txn_open && f->txn_dirty &&
            aagw_mono_ms() - f->txn_ms >= f->conf.scale_out->commit_interval_ms)
                scale_commit(f);
        if (f->lost)
                scale_drop(f);
        if (f->txn_open || atomic_load(&f->nparts_assigned) == 0 ||
            atomic_load(&f->ctl.stop))
                return f->txn_open;
        owner_result_t r = owner_begin(f->owner, why, sizeof(why));
        if (r == AAGW_OWNER_OK) {
                f->txn_open  = true;
                f->txn_dirty = false;
                f->txn_ms    = aagw_mono_ms();
                return true;
        }
        if (r == AAGW_OWNER_FATAL)
                scale_fatal(f, why);
        else
                aagw_log(AAGW_LOG_WARN, "FLOW", "%s: member %s: %s",
                         f->name, f->conf.scale_out->member, why);
        return false;
}

/* The work topic (created with scale_out.work_partitions if missing; an
 * existing one keeps its count, which every member then uses) and the
 * owner.  Returns 0, or -1 with the flow failed. */
static int scale_start(aagw_flow_t *f) {
        const struct aagw_scale_out *so = f->conf.scale_out;
        char errstr[700];
        int  have = owner_work_topic(f->admin, f->work_topic,
                                     so->work_partitions, errstr,
                                     sizeof(errstr));

        if (have < 0) {
                flow_fail(f, "member %s: the owners' work topic at %s: %s",
                          so->member, f->target, errstr);
                return -1;
        }
        if (have != so->work_partitions)
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: work topic %s has %d partitions, not "
                         "scale_out.work_partitions %d: using %d (every "
                         "member must use the same count)",
                         f->name, f->work_topic, have, so->work_partitions,
                         have);
        f->work_cnt = have;
        struct owner_conf oc = {
            .bootstraps         = f->conf.target_bootstraps,
            .props              = f->conf.target_props,
            .prop_cnt           = f->conf.target_prop_cnt,
            .group              = f->owners_group,
            .topic              = f->work_topic,
            .member             = so->member,
            .transactional_id   = f->txn_id,
            .session_timeout_ms = so->session_timeout_ms,
            .txn_timeout_ms     = so->txn_timeout_ms,
            .on_gained          = scale_gained,
            .on_lost            = scale_lost,
            .opaque             = f,
            .dr_msg_cb          = scale_dr,
            .dr_opaque          = f,
            .stop               = &f->ctl.stop};
        if (!(f->refused = refused_new(REFUSED_MAX))) {
                flow_fail(f, "member %s: out of memory", so->member);
                return -1;
        }
        if (!(f->owner = owner_new(&oc, errstr, sizeof(errstr)))) {
                flow_fail(f, "member %s: %s", so->member, errstr);
                return -1;
        }
        f->out = owner_producer(f->owner);
        return 0;
}

/* A new transactional producer after scale_fatal(): what was in flight
 * is purged, every partition let go (the committed positions stored),
 * the topic handles moved to the new producer, and the partitions still
 * owned reconciled again (scale_gain()).  The caller holds no queue of
 * the old producer.  Returns 0, or -1 (the flow failed). */
static int scale_renew(aagw_flow_t *f) {
        char why[512];

        f->need_renew = false;
        rd_kafka_purge(f->out,
                       RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        drain(f, DRAIN_MS);
        if (unassign(f, NULL, DRAIN_MS))
                return -1;
        for (size_t i = 0; i < f->ntopics; i++)
                if (f->topics[i]->rkt) {
                        rd_kafka_topic_destroy(f->topics[i]->rkt);
                        f->topics[i]->rkt = NULL;
                }
        if (f->dlq_rkt) {
                rd_kafka_topic_destroy(f->dlq_rkt);
                f->dlq_rkt = NULL;
        }
        f->out = f->producer; /* no handle of the old one is left */
        if (owner_renew(f->owner, why, sizeof(why)) != AAGW_OWNER_OK) {
                flow_fail(f, "member %s: %s", f->conf.scale_out->member,
                          why);
                return -1;
        }
        f->out = owner_producer(f->owner);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (tt->active &&
                    !(tt->rkt = rd_kafka_topic_new(f->out, tt->remote, NULL))) {
                        flow_fail(f, "%s: a topic handle: out of memory",
                                  tt->remote);
                        return -1;
                }
        }
        f->txn_open = f->txn_dirty = f->txn_broken = false;
        f->gained   = true;
        scale_forget(f);
        return 0;
}

bool flow_scaled(const aagw_flow_t *f) {
        return f->conf.scale_out && f->conf.scale_out->enabled;
}

bool flow_leads_mm2(const aagw_flow_t *f) {
        return !f->conf.scale_out || !f->conf.scale_out->enabled ||
               atomic_load(&((aagw_flow_t *)f)->leads_mm2);
}

static void *flow_main(void *arg) {
        aagw_flow_t *f = arg;

        /* Before the first topic handle is made on its producer. */
        if (f->conf.scale_out && f->conf.scale_out->enabled &&
            scale_start(f))
                return NULL;
        /* Woken by records at the consumer and by delivery reports. */
        rd_kafka_queue_t *pq     = rd_kafka_queue_get_main(f->out);
        rd_kafka_queue_t *qs[2]  = {f->cq, pq};
        aagw_qwait_t     *qwait  = aagw_qwait_new(qs, 2);

        f->now_cache = aagw_wall_ms();
        /* Kept paused across a restart: paused before the first
         * assignment, which then starts paused (assign_new()). */
        if (atomic_load(&f->paused_req))
                set_paused(f, true);
        discover(f);
        f->last_refresh_ms = f->last_save_ms = aagw_mono_ms();
        while (!atomic_load(&f->ctl.stop)) {
                if (f->owner && f->need_renew) {
                        /* The producer's queue goes with it. */
                        aagw_qwait_destroy(qwait);
                        rd_kafka_queue_destroy(pq);
                        qwait = NULL;
                        pq    = NULL;
                        if (scale_renew(f))
                                break;
                        pq     = rd_kafka_queue_get_main(f->out);
                        qs[1]  = pq;
                        qwait  = aagw_qwait_new(qs, 2);
                }
                bool want_pause = atomic_load(&f->paused_req);
                if (want_pause != f->paused)
                        set_paused(f, want_pause);
                /* A batch per call: the queue lock is taken once per
                 * batch, not per record.  Rebalance events are served
                 * from the same queue (the callback runs in here). */
                rd_kafka_message_t *batch[1024];
                const ssize_t       cap = sizeof(batch) / sizeof(batch[0]);
                /* What the queue holds, without waiting: waiting for a
                 * full batch would hold a record for the whole timeout
                 * under light traffic.  Under load the queue holds many
                 * records and the batches fill by themselves. */
                ssize_t n = 0;
                if (!f->owner || scale_poll(f))
                        n = rd_kafka_consume_batch_queue(f->cq, 0, batch,
                                                         (size_t)cap);
                f->batch_no++;
                for (ssize_t i = 0; i < n; i++) {
                        if (atomic_load(&f->ctl.stop) ||
                            !handle(f, batch[i]))
                                rd_kafka_message_destroy(batch[i]);
                }
                lease_poll(f);
                if (f->fenced && lease_fenced(f))
                        break;
                if (f->lease_wait && f->lease_held &&
                    aagw_mono_ms() - f->lease_held_ms >= LEASE_SETTLE_MS)
                        lease_regained(f);
                f->now_cache = aagw_wall_ms();
                rd_kafka_poll(f->out, 0);
                if (f->out != f->producer)
                        rd_kafka_poll(f->producer, 0);
                /* A short poll and an empty queue: the only time a
                 * partition that stands still can be a stall. */
                int64_t now = aagw_mono_ms();
                if (n < cap && !f->paused &&
                    now - f->last_poke_ms >= STALL_LOOK_MS &&
                    !rd_kafka_queue_length(f->cq)) {
                        f->last_poke_ms = now;
                        aagw_stall_watch_look(f->stalls, now, STALL_LOOK_MS);
                        restart_stalled(f, now);
                }
                if (now - f->last_save_ms >= SAVE_INTERVAL_MS) {
                        save_positions(f, false);
                        f->last_save_ms = now;
                }
                if (now - f->last_refresh_ms >= f->conf.refresh_ms) {
                        discover(f);
                        f->last_refresh_ms = aagw_mono_ms();
                }
                /* Nothing came: wait for records or delivery reports.
                 * The timeout paces the stall watch and the saves; while
                 * records come, go round at once. */
                if (n <= 0)
                        aagw_qwait(qwait, 100);
        }
        if (qwait)
                aagw_qwait_destroy(qwait);
        if (pq)
                rd_kafka_queue_destroy(pq);
        /* Stop: no more consuming; finish in-flight, store, close (a
         * static member does not leave its group: a restart with the same
         * identity takes the id back at once). */
        f->stop_at = aagw_mono_ms();
        /* Scale-out: what was copied counts once committed; the owner
         * leaves the group in aagw_flow_destroy(). */
        if (f->owner && atomic_load(&f->ctl.state) != AAGW_FLOW_FAILED)
                scale_commit(f);
        drain(f, atomic_load(&f->drain_ms));
        save_positions(f, true);
        aagw_stall_watch_destroy(f->stalls);
        f->stalls = NULL;
        replicator_consumer_close(f->consumer, REPLICATOR_CLOSE_MS());
        /* The lease is not closed: a static member leaves nothing behind
         * by closing (it stays in its group until the session times out),
         * and librdkafka 2.0.2's close of a lease that was given its
         * partitions a moment before has been seen to wait forever inside
         * its own unassign (kafka-txn_start, a stop 0.1 s after the
         * assignment, gdb stacks).  aagw_flow_destroy() destroys it
         * without the close. */
        if (atomic_load(&f->ctl.state) != AAGW_FLOW_FAILED)
                atomic_store(&f->ctl.state, AAGW_FLOW_STOPPED);
        return NULL;
}

/* ---------------------------------------------------------- LIFECYCLE --- */

/* The source consumer never joins its group: its session timeout only
 * bounds how long a commit waits for a coordinator (librdkafka holds it
 * that long), and its destroy waits for that commit.  The commits are
 * for lag tooling, the positions are the state dir's: a commit that
 * could not be made is made again at the next save, and a stop with the
 * source gone waits 0.5 s instead of the session timeout an operator set
 * for the identity lease (or librdkafka's 45 s).  Applied after the
 * operator's consumer properties. */
static const char *const consumer_last[] = {
    "session.timeout.ms", "500",
    "heartbeat.interval.ms", "100",
    NULL};

static rd_kafka_t *make_client(aagw_flow_t *f, rd_kafka_type_t type,
                               const char *role, const char *bootstraps,
                               const char *const *props, size_t nprops,
                               const char *const *extra, char *errstr,
                               size_t errstr_size) {
        struct replicator_client c = {.type         = type,
                                      .who          = f->name,
                                      .bootstraps   = bootstraps,
                                      .props        = props,
                                      .prop_cnt     = nprops,
                                      .opaque       = f,
                                      .delivery     = &f->delivery,
                                      .last = !strcmp(role, "consumer")
                                                  ? consumer_last
                                                  : NULL,
                                      .rebalance_cb = !strcmp(role, "lease")
                                                          ? lease_cb
                                                          : NULL};
        return replicator_client(&c, role, extra, errstr, errstr_size);
}

/* Make the identity lease: at the start, and again after a fence
 * (lease_fenced()).  discover() subscribes it.  Returns 0, or -1 with
 * 'errstr' set. */
static int make_lease(aagw_flow_t *f, char *errstr, size_t errstr_size) {
        const char *extra[] = {
            "group.id", f->lease_group,
            "group.instance.id", f->instance,
            "enable.auto.commit", "false",
            "enable.auto.offset.store", "false",
            "session.timeout.ms", "10000",
            "heartbeat.interval.ms", "1000",
            NULL};

        f->lease = make_client(f, RD_KAFKA_CONSUMER, "lease",
                               f->conf.source_bootstraps, f->conf.source_props,
                               f->conf.source_prop_cnt, extra, errstr,
                               errstr_size);
        if (!f->lease)
                return -1;
        rd_kafka_poll_set_consumer(f->lease);
        return 0;
}

/* Make the source consumer (assign-only; its group id for the commits),
 * its queue and stall watch.  Returns 0, or -1 with 'errstr' set. */
static int make_consumer(aagw_flow_t *f, char *errstr, size_t errstr_size) {
        const char *extra[] = {
            "group.id", f->group,
            "enable.auto.commit", "false",
            "enable.auto.offset.store", "false",
            "auto.offset.reset", "earliest",
            "enable.partition.eof", "false",
            NULL};

        f->consumer = make_client(f, RD_KAFKA_CONSUMER, "consumer",
                                  f->conf.source_bootstraps,
                                  f->conf.source_props, f->conf.source_prop_cnt,
                                  extra, errstr, errstr_size);
        if (!f->consumer)
                return -1;
        rd_kafka_poll_set_consumer(f->consumer);
        f->cq = rd_kafka_queue_get_consumer(f->consumer);
        if (!(f->stalls = aagw_stall_watch_new(f->consumer))) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                return -1;
        }
        return 0;
}

aagw_flow_t *aagw_flow_new(const struct aagw_flow_conf *c, char *errstr,
                           size_t errstr_size) {
        aagw_flow_t *f = calloc(1, sizeof(*f));
        char         group[512], hp[AAGW_AFFIX_MAX + 1];

        if (!f) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        f->conf        = *c;
        f->src_reach.cluster = c->source;
        f->tgt_reach.cluster = c->target;
        f->tokens.size = sizeof(struct token);
        f->pol  = c->policy;
        snprintf(f->source, sizeof(f->source), "%s", c->source);
        snprintf(f->target, sizeof(f->target), "%s", c->target);
        snprintf(f->name, sizeof(f->name), "%s->%s", c->source, c->target);
        snprintf(f->who, sizeof(f->who), "%s:", f->name);
        replicator_ctl_init(&f->ctl, "FLOW", f->who);
        atomic_store(&f->drain_ms, DRAIN_MS);
        f->delivery = (struct replicator_delivery){on_delivery, f};
        snprintf(f->scope, sizeof(f->scope), "repl:%s->%s", c->source,
                 c->target);
        if (f->conf.refresh_ms <= 0)
                f->conf.refresh_ms = 5000;
        f->topics = calloc(MAX_TOPICS, sizeof(*f->topics));
        if (!f->topics) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        /* "<prefix>hop" lives under the provenance prefix, so the copy
         * step, which drops our own headers, drops it too. */
        snprintf(hp, sizeof(hp), "%s",
                 c->header_prefix ? c->header_prefix : "aagw.");
        snprintf(f->hop_hdr, sizeof(f->hop_hdr), "%shop", hp);
        if (aagw_repl_dlq_topic(f->pol, c->source, f->dlq_topic,
                                sizeof(f->dlq_topic))) {
                snprintf(errstr, errstr_size, "bad source alias %s", c->source);
                goto fail;
        }

        snprintf(group, sizeof(group), "aagw.%s.%s-%s", c->gateway_id,
                 c->source, c->target);
        /* The consumer assigns itself its partitions: a restarted process
         * reads again at once, not after the killed member's session
         * timed out and the group rebalanced.  A second process with the
         * same identity is told apart by the lease, a static member of a
         * group of its own (the commits' group stays without members, or
         * the broker would refuse them). */
        snprintf(f->group, sizeof(f->group), "%s", group);
        snprintf(f->lease_group, sizeof(f->lease_group), "%s.lease", group);
        aagw_kafka_instance_id(f->instance, sizeof(f->instance), group,
                               c->site);
        /* The reader only ever assign()s: the group id is never joined or
         * committed to, but librdkafka's consumer wants one. */
        char reader_group[600];
        snprintf(reader_group, sizeof(reader_group), "%s.reader", group);
        bool scale = c->scale_out && c->scale_out->enabled;
        if (scale) {
                snprintf(f->work_topic, sizeof(f->work_topic), "%s.work",
                         group);
                snprintf(f->owners_group, sizeof(f->owners_group),
                         "%s.owners", group);
                snprintf(f->txn_id, sizeof(f->txn_id), "%s.%s", group,
                         c->scale_out->member);
        }
        const char *reader_extra[] = {
            "group.id", reader_group,
            "enable.auto.commit", "false",
            /* The reader is read_committed (librdkafka's default), and a
             * target's last offsets may be transaction markers, which
             * never arrive as records: under scale-out always, and in a
             * copy that processes of a scale-out site (or another
             * transactional writer) wrote before.  The end of a scan is
             * then told by the partition's end (aagw_kafka_read_range()). */
            "enable.partition.eof", "true",
            "auto.offset.reset", "earliest",
            /* reconcile() scans one partition after the other; with the
             * default 500 ms the fetch long-poll left over from the
             * previous partition delays the next one on the same broker
             * by half a second, per partition, inside the assignment. */
            "fetch.wait.max.ms", "10",
            NULL};
        /* Scale-out: the owners' group is the identity (no lease). */
        if (make_consumer(f, errstr, errstr_size) ||
            (!scale && make_lease(f, errstr, errstr_size)))
                goto fail;
        f->producer = make_client(f, RD_KAFKA_PRODUCER, "producer",
                                  c->target_bootstraps, c->target_props,
                                  c->target_prop_cnt,
                                  aagw_kafka_producer_props, errstr,
                                  errstr_size);
        if (!f->producer)
                goto fail;
        f->out    = f->producer; /* scale_start() replaces it */
        f->reader = make_client(f, RD_KAFKA_CONSUMER, "reader",
                                c->target_bootstraps, c->target_props,
                                c->target_prop_cnt, reader_extra, errstr,
                                errstr_size);
        if (!f->reader)
                goto fail;
        const char *probe_kv[REPLICATOR_END_PROBE_KV];
        f->end_probe = make_client(f, RD_KAFKA_CONSUMER, "end-probe",
                                c->target_bootstraps, c->target_props,
                                c->target_prop_cnt,
                                replicator_end_probe_props(reader_group,
                                                           probe_kv),
                                errstr, errstr_size);
        if (!f->end_probe)
                goto fail;
        const char *hw_extra[] = {
            "group.id", reader_group,
            "enable.auto.commit", "false",
            "isolation.level", "read_uncommitted",
            NULL};
        if (scale &&
            !(f->hw_probe = make_client(f, RD_KAFKA_CONSUMER, "hw-probe",
                                        c->target_bootstraps, c->target_props,
                                        c->target_prop_cnt, hw_extra, errstr,
                                        errstr_size)))
                goto fail;
        f->meta = make_client(f, RD_KAFKA_PRODUCER, "meta",
                              c->source_bootstraps, c->source_props,
                              c->source_prop_cnt, NULL, errstr, errstr_size);
        if (!f->meta)
                goto fail;
        f->admin = make_client(f, RD_KAFKA_PRODUCER, "admin",
                               c->target_bootstraps, c->target_props,
                               c->target_prop_cnt, NULL, errstr, errstr_size);
        if (!f->admin)
                goto fail;
        /* The target gets no request of the flow thread's while nothing
         * is copied: a thread asks it, for /healthz. */
        if (!(f->prober = aagw_prober_new(f->admin, f->conf.refresh_ms,
                                          &f->tgt_reach))) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                goto fail;
        }
        if (c->mm2.takeover &&
            !(f->takeover = takeover_new(&f->conf, f->pol, f->name, errstr,
                                         errstr_size)))
                goto fail;
        {
                rd_kafka_t *ts = make_client(
                    f, RD_KAFKA_PRODUCER, "topics-src", c->source_bootstraps,
                    c->source_props, c->source_prop_cnt, NULL, errstr,
                    errstr_size);
                rd_kafka_t *tg =
                    ts ? make_client(f, RD_KAFKA_PRODUCER, "topics-tgt",
                                     c->target_bootstraps, c->target_props,
                                     c->target_prop_cnt, NULL, errstr,
                                     errstr_size)
                       : NULL;
                if (!tg) {
                        if (ts)
                                rd_kafka_destroy(ts);
                        goto fail;
                }
                f->remote_topics =
                    topics_new(f->name, f->pol, &c->topics, ts, tg);
                f->target_bs = strdup(c->target_bootstraps);
                if (!f->remote_topics || !f->target_bs) {
                        if (!f->remote_topics) {
                                rd_kafka_destroy(ts);
                                rd_kafka_destroy(tg);
                        }
                        snprintf(errstr, errstr_size, "out of memory");
                        goto fail;
                }
        }
        atomic_store(&f->hb_latency_ms, -1);
        if (c->mm2.heartbeat_ms > 0 || c->mm2.checkpoint_ms > 0 ||
            c->mm2.syncs) {
                f->mm2 = mm2_new(f, c, f->producer, errstr, errstr_size);
                if (!f->mm2)
                        goto fail;
        }
        atomic_store(&f->ctl.state, AAGW_FLOW_STARTING);
        return f;
fail:
        aagw_flow_destroy(f, 0);
        return NULL;
}

aagw_err_t aagw_flow_start(aagw_flow_t *f, char *errstr, size_t errstr_size) {
        int rc = pthread_create(&f->thread, NULL, flow_main, f);
        if (rc) {
                snprintf(errstr, errstr_size, "cannot start thread: %s",
                         strerror(rc));
                return AAGW_ERR_NOMEM;
        }
        f->thread_started = true;
        if (f->mm2 && mm2_start(f->mm2, errstr, errstr_size))
                return AAGW_ERR_NOMEM;
        if (topics_start(f->remote_topics, errstr, errstr_size))
                return AAGW_ERR_NOMEM;
        return AAGW_OK;
}

void aagw_flow_stop(aagw_flow_t *f) {
        atomic_store(&f->ctl.stop, true);
        mm2_stop(f->mm2);
        /* Its ping in progress (up to 2 s against a dead target) ends
         * while the flow drains, not in aagw_flow_destroy(). */
        aagw_prober_stop(f->prober);
        topics_stop(f->remote_topics);
}

void aagw_flow_pause(aagw_flow_t *f, bool pause) {
        atomic_store(&f->paused_req, pause);
}

void aagw_flow_destroy(aagw_flow_t *f, int timeout_ms) {
        if (!f)
                return;
        /* Before the stop: the thread reads it when it starts draining,
         * and again while it drains (after aagw_flow_stop() too). */
        atomic_store(&f->drain_ms, timeout_ms > 0 ? timeout_ms : 0);
        atomic_store(&f->ctl.stop, true);
        if (f->thread_started)
                pthread_join(f->thread, NULL);
        aagw_prober_destroy(f->prober); /* before the admin client */
        f->prober = NULL;
        /* Before the producer it borrows; flushes its own. */
        mm2_destroy(f->mm2, 500);
        takeover_destroy(f->takeover);
        topics_destroy(f->remote_topics);
        free(f->target_bs);
        if (f->producer) {
                /* Delivery reports of anything left refer to tokens and
                 * partitions we are about to free: purge and serve them
                 * first (on_delivery() leaves purged records undone).
                 * Every one: a report left unserved leaves its token's
                 * consumed record undestroyed, and with it the consumer
                 * topic it refers to.  Purged reports come within
                 * milliseconds; the bound is for a client that hangs. */
                int64_t deadline = aagw_mono_ms() + 5000;
                rd_kafka_purge(f->out, RD_KAFKA_PURGE_F_QUEUE |
                                           RD_KAFKA_PURGE_F_INFLIGHT);
                do
                        rd_kafka_poll(f->out, 10);
                while (atomic_load(&f->inflight) > 0 &&
                       aagw_mono_ms() < deadline);
        }
        for (size_t i = 0; f->topics && i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (tt->rkt)
                        rd_kafka_topic_destroy(tt->rkt);
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        if (tt->parts[p])
                                free(tt->parts[p]->ring);
                        free(tt->parts[p]);
                }
                free(tt->parts);
                free(tt->topic);
                free(tt);
        }
        free(f->topics);
        if (f->dlq_rkt)
                rd_kafka_topic_destroy(f->dlq_rkt);
        /* After the topic handles on its producer: aborts what is open
         * and leaves the owners' group (the others take over at once). */
        owner_destroy(f->owner);
        refused_destroy(f->refused);
        aagw_stall_watch_destroy(f->stalls);
        if (f->cq)
                rd_kafka_queue_destroy(f->cq);
        replicator_destroy_clients(
            (const struct replicator_doomed[]){
                {f->producer, 0},
                {f->consumer, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->lease, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->reader, 0},
                {f->end_probe, 0},
                {f->hw_probe, 0},
                {f->meta, 0},
                {f->admin, 0}},
            8);
        aagw_pool_free(&f->tokens);
        free(f->hdrs);
        replicator_ctl_deinit(&f->ctl);
        free(f);
}

/* ------------------------------------------------------------- STATUS --- */

aagw_flow_state_t aagw_flow_state(const aagw_flow_t *f) {
        return (aagw_flow_state_t)atomic_load(&((aagw_flow_t *)f)->ctl.state);
}

const char *aagw_flow_state_name(aagw_flow_state_t st) {
        static const char *names[] = {"starting", "running", "paused",
                                      "failed", "stopped"};
        return (unsigned)st < 5 ? names[st] : "unknown";
}

void aagw_flow_error(const aagw_flow_t *fc, char *buf, size_t size) {
        aagw_flow_t *f = (aagw_flow_t *)fc;
        replicator_ctl_error(&f->ctl, buf, size);
}

const char *aagw_flow_name(const aagw_flow_t *f) {
        return f->name;
}

const char *aagw_flow_owner_group(const aagw_flow_t *f) {
        return f->owners_group;
}

#define LOAD(x) atomic_load_explicit(&(x), RELAXED)

void aagw_flow_stats(const aagw_flow_t *fc, struct aagw_flow_stats *st) {
        aagw_flow_t *f = (aagw_flow_t *)fc;

        memset(st, 0, sizeof(*st));
        st->records_in     = LOAD(f->records_in);
        st->records_out    = LOAD(f->records_out);
        st->bytes_out      = LOAD(f->bytes_out);
        st->bad_passed     = LOAD(f->bad_passed);
        st->dead_lettered  = LOAD(f->dead_lettered);
        st->produce_errors = LOAD(f->produce_errors);
        st->fetch_restarts = LOAD(f->fetch_restarts);
        st->consumer_restarts = LOAD(f->consumer_restarts);
        st->start_refetches = LOAD(f->start_refetches);
        st->lat_sum_ms     = LOAD(f->lat_sum);
        for (int i = 0; i < AAGW_SKIP_COUNT; i++)
                st->skipped[i] = LOAD(f->skipped[i]);
        st->diverged = LOAD(f->diverged);
        for (int i = 0; i < AAGW_REASON_COUNT; i++)
                st->rejected[i] = LOAD(f->rejected[i]);
        /* The count is the sum of the buckets read here, not a counter
         * read at another instant: a scrape's +Inf bucket always equals
         * its _count, as Prometheus expects of a histogram. */
        for (int i = 0; i < AAGW_LAT_BUCKETS; i++) {
                st->lat_buckets[i] = LOAD(f->lat_buckets[i]);
                st->lat_count += st->lat_buckets[i];
        }
        st->inflight       = LOAD(f->inflight);
        st->topics         = LOAD(f->ntopics_active);
        st->partitions     = LOAD(f->nparts_assigned);
        st->topics_refused = LOAD(f->ntopics_refused);
        st->partitions_missing = LOAD(f->nparts_missing);
        topics_stats(f->remote_topics, st);
        st->truncations       = LOAD(f->truncations);
        st->truncated_records = LOAD(f->truncated_records);
        st->resets            = LOAD(f->resets);
        st->target_resets     = LOAD(f->target_resets);
        st->heartbeat_latency_ms = LOAD(f->hb_latency_ms);
        st->heartbeat_age_ms =
            LOAD(f->hb_last_ms) ? aagw_wall_ms() - LOAD(f->hb_last_ms) : -1;
        mm2_stats(f->mm2, st);
        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        struct ptrack *pt = tt->parts[p];
                        if (!pt || !pt->assigned)
                                continue;
                        int64_t hi  = LOAD(pt->high);
                        int64_t pos = LOAD(pt->pos_pub);
                        if (hi > pos && pos >= 0)
                                st->lag += hi - pos;
                }
        }
        pthread_mutex_unlock(&f->ctl.lock);
        if (f->conf.scale_out && f->conf.scale_out->enabled) {
                st->member          = f->conf.scale_out->member;
                st->rebalances      = LOAD(f->rebalances);
                st->txn_committed   = LOAD(f->committed_txns);
                st->txn_aborted     = LOAD(f->aborted_txns);
                st->txn_fenced      = LOAD(f->fenced_txns);
                st->work_partitions = LOAD(f->owned_work);
        }
        st->source_down_ms = aagw_reach_down_ms(&f->src_reach);
        st->target_down_ms = aagw_reach_down_ms(&f->tgt_reach);
        /* The watermarks last seen are stale: say unknown, not 0. */
        if (st->source_down_ms)
                st->lag = -1;
}

size_t aagw_flow_partitions(const aagw_flow_t *fc,
                            struct aagw_flow_part_stats *out, size_t max) {
        aagw_flow_t *f = (aagw_flow_t *)fc;
        size_t       n = 0;

        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        struct ptrack *pt = tt->parts[p];
                        if (!pt)
                                continue;
                        if (n < max) {
                                snprintf(out[n].topic, sizeof(out[n].topic),
                                         "%s", tt->topic);
                                out[n].partition   = p;
                                out[n].next        = LOAD(pt->pos_pub);
                                out[n].high        = LOAD(pt->high);
                                out[n].records_out = LOAD(pt->records_out);
                                out[n].assigned    = pt->assigned;
                        }
                        n++;
                }
        }
        pthread_mutex_unlock(&f->ctl.lock);
        return out && n > max ? max : n;
}

size_t aagw_flow_missing(const aagw_flow_t *fc, struct aagw_flow_missing *out,
                         size_t max) {
        aagw_flow_t *f = (aagw_flow_t *)fc;
        size_t       n = 0;

        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (!tt->active || tt->missing <= 0)
                        continue;
                if (n < max) {
                        int32_t want = tt->target_cnt + tt->missing;
                        snprintf(out[n].topic, sizeof(out[n].topic), "%s",
                                 tt->topic);
                        snprintf(out[n].remote, sizeof(out[n].remote), "%s",
                                 tt->remote);
                        out[n].source_partitions = want;
                        out[n].target_partitions = tt->target_cnt;
                        snprintf(out[n].fix, sizeof(out[n].fix),
                                 "kafka-topics.sh --bootstrap-server %s "
                                 "--alter --topic %s --partitions %d",
                                 f->target_bs, tt->remote, (int)want);
                }
                n++;
        }
        pthread_mutex_unlock(&f->ctl.lock);
        return out && n > max ? max : n;
}
