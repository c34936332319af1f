/*
 * replicator/flow_int.h: what the files of a flow share (flow.c has the
 * design): its settings, its state, and the functions one file calls in
 * another.  Internal to replicator/.
 */
#ifndef FLOW_INT_H
#define FLOW_INT_H

#include "replicator_int.h"
#include "stage.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#define SAVE_INTERVAL_MS 1000
/* How long a stopping flow waits for its in-flight records to be
 * acknowledged, unless aagw_flow_destroy() says otherwise.  A healthy
 * target acknowledges within milliseconds; one that does not answer for
 * 3 s will not answer before the stop must end (5 s), and whatever it
 * did not acknowledge is copied again by the next start. */
#define DRAIN_MS 3000
/* How long flow_reconcile() waits for the target partition to answer (a dead
 * leader is replaced within the broker session timeout, 9 s by default)
 * before it fails the flow rather than guess. */
#define RECONCILE_WAIT_MS 120000
/* Under the identity policy (local producers write the target too, so
 * its log may never end at the watermark for long), how long flow_reconcile()
 * waits for the watermark to be the end of the leader's log before it
 * goes by the watermark anyway (see flow_target_end()). */
#define SETTLE_MAX_MS 15000
/* How long one flow_settle_all() holds for the partitions reconciled after it
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
#define MAX_TOPICS 4096

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
        /* offset-syncs: the delta target - source of the
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
        /* Assigned and not held (flow_part_mark()): the flow writes its
         * target partition, which flow_settle_all() then leaves out. */
        atomic_bool copying;
        /* Handed to the reconciler (flow_recon_ask()) and not taken back
         * yet; 'recon_gen' counts the flow_unassign()s that made an
         * answer asked for before them stale (flow thread only). */
        bool     reconciling;
        uint32_t recon_gen;
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
        /* The copy's creation or growth, done by the maker thread
         * (flow_topics.c, "MAKER"): asked and not taken back yet; its
         * answer, taken back and not yet seen by a discovery (NULL:
         * none).  The flow thread's alone. */
        bool                  making;
        struct flow_make_job *made;
        bool                release_retry; /* held partitions to start
                                              again (a seek failed) */
        /* For reconciliation (flow_positions.c): the reader and the end
         * probe know the copy (replicator_prime_topic()); the copy grew
         * since, and the reader is to learn its new partitions; the
         * source consumers know the topic (source_prime()). */
        atomic_bool         primed, reader_stale, src_primed;
        uint32_t            hash; /* XXH32 of the topic (flow_work_of()) */
};

/* What reconciling one partition found (flow_positions.c): where it
 * resumes, and what the flow thread sets when it takes the answer. */
#define FLOW_RECON_KEEP INT64_MIN /* out_next, hi_seen: unchanged */
struct flow_recon {
        int64_t  next; /* an offset, or RD_KAFKA_OFFSET_BEGINNING */
        int64_t  fetch_from; /* where the consumer starts: 'next', or for
                                the beginning the log start if known */
        int64_t  out_next, hi_seen;
        bool     stored; /* the new start is stored (a recreated target) */
        uint64_t resets, truncations, truncated_records, target_resets;
        int64_t  txn_wait_ms; /* scale-out: flow_stable_end()'s wait */
};

/* A copy handed to the maker (flow_topics.c, "MAKER"), and its answer. */
struct flow_make_job {
        struct stage_job base; /* the maker's (stage_worker) */
        struct ttrack   *tt;
        int              want; /* the partitions the copy is to have */
        /* the answer */
        int rc;   /* 0, or -2 (try again) */
        int have; /* the partitions the producer sees, asked by the
                     maker; -1: not asked (scale-out) */
};

/* A partition handed to the reconciler, and its answer. */
struct flow_recon_job {
        struct stage_job       base; /* the reconciler's (stage_worker) */
        struct ptrack         *pt;
        uint32_t               gen;     /* pt->recon_gen when asked */
        bool                   release; /* held (flow_release_held()), else
                                           new (flow_assign_new()) */
        struct flow_recon ans;
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

/* One source consumer of a flow: a broker connection per broker, so one
 * fetch in flight to each (aagw_fetch_connections()). */
struct flow_fetcher {
        rd_kafka_t         *c;
        rd_kafka_queue_t   *q;      /* its queue */
        aagw_stall_watch_t *stalls; /* its partitions' fetches */
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
        int64_t                   settled_all_ms; /* flow_settle_all()'s last */
        /* Source metadata and watermarks on connections of their own: on
         * the consumer's, a request waits behind the fetch long-poll of
         * that broker (up to fetch.wait.max.ms), and the flow with it. */
        rd_kafka_t               *meta;
        /* The source consumers: 'consumer' is fx[0].c, which also
         * commits the group's offsets (an assign-only consumer commits
         * any partition); a partition is read by fx[flow_fx_of()]. */
        struct flow_fetcher fx[AAGW_FETCH_CONNECTIONS_MAX];
        int                 nfx;
        int                 cur_fx; /* whose batch flow_handle() is
                                       in */
        rd_kafka_topic_t         *dlq_rkt;
        pthread_t                 thread;
        bool                      thread_started;
        struct replicator_delivery delivery; /* flow_on_delivery() */
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
        /* The maker thread: creates and grows copies beside the copying
         * (flow_maker_start()); the flow thread takes the answers
         * (flow_made()). */
        struct stage_worker maker;
        /* The reconciler thread: finds where each partition a discovery
         * gives the flow resumes, beside the copying
         * (flow_reconciler_start()); the flow thread takes the answers
         * (flow_reconciled()). */
        struct stage_worker       recon;
        struct aagw_header       *recon_hdrs; /* its header scratch */
        size_t                    recon_hdr_cap;
        struct topics            *remote_topics; /* topics.c */
        char                     *target_bs; /* for the fix commands */

        struct ttrack **topics;
        size_t          ntopics;
        struct aagw_pool tokens;
        int64_t          last_save_ms, last_refresh_ms;
        /* The thread (stage.c runs it through flow_hooks) and its later
         * discoveries' metadata watch (NULL: none yet). */
        struct stage     stage;
        aagw_md_watch_t *mdw;
        /* The source consumer's fetch window (flow_fetch_window()); done
         * once sized or left at its base; rtt_us and window_bytes are
         * read by aagw_flow_stats(). */
        struct aagw_fetch_window window;
        bool                     window_done;
        _Atomic int64_t          window_rtt_us, window_bytes;
        _Atomic int32_t          window_conns;  /* nfx, for the stats */
        _Atomic int64_t          queue_records; /* the consumer's queue, as
                                                   the thread last saw it */
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

        /* MM2-format topics, truncation, heartbeat latency */
        struct mm2      *mm2;
        struct takeover *takeover; /* NULL: mm2.takeover off */
        _Atomic uint64_t truncations, truncated_records, resets, target_resets;
        _Atomic int64_t  hb_latency_ms, hb_last_ms;
        struct aagw_reach src_reach, tgt_reach; /* discovery, prober */
        aagw_prober_t    *prober; /* pings the target (admin client) */

        /* Scale-out (conf.scale_out enabled; see flow_scale.c).  'out'
         * writes the copies: the owner's transactional producer there,
         * 'producer' otherwise. */
        rd_kafka_t      *out;
        struct owner    *owner;     /* NULL: one process copies all */
        rd_kafka_t      *hw_probe;  /* read_uncommitted: high watermarks */
        char             work_topic[600];
        char             owners_group[600];
        char             txn_id[600];
        int32_t          work_cnt;
        struct stage_txn tx;           /* the member's transactions */
        bool             txn_dirty;    /* the open one took records */
        bool             gained, lost; /* ownership changed: to act on
                                          after owner_poll()/_commit() */
        int64_t          lost_ms;      /* mono ms of the last loss, 0 */
        /* Reconciled on the flow thread itself, not the reconciler:
         * scale_gain() after a rebalance, which stopped all copying. */
        bool             recon_inline;
        atomic_bool      leads_mm2; /* owns work partition 0 */
        /* What the open transaction dead-lettered and counts as produce
         * errors: added to the counters when it commits. */
        uint64_t         txn_dlq, txn_errs;
        _Atomic uint64_t rebalances;
        _Atomic int32_t  owned_work;
};

/* Fail the flow closed: it stops consuming and reports why. */
#define flow_fail(f, ...) replicator_fail(&(f)->ctl, __VA_ARGS__)

/* ------------------------------------------------------ ACROSS FILES --- */

/* What one file of a flow calls in another (flow.c, flow_topics.c,
 * flow_positions.c, flow_scale.c). */

/* Offset-syncs: write (src, dst) when the delta dst - src differs from
 * the last one written, so that between two syncs every copy keeps the
 * same delta and translation is exact (policy/mm2.c).  Per-record syncs
 * are rate-bounded per partition; a suppressed one marks the next as
 * lossy, and the boundary sync at each save (flow_save_positions) restores
 * exactness from there on. */
void flow_sync_point(aagw_flow_t *f, struct ptrack *pt, int64_t src,
                     int64_t dst, bool bounded);

/* The producer's own limit (message.max.bytes) or the broker's. */
bool flow_too_large(rd_kafka_resp_err_t err);

void flow_on_delivery(void *stage, void *t, const rd_kafka_message_t *m);

/* Copy of 'm' for the dead-letter topic: original key, value, timestamp
 * and headers (ours only up to DLQ_OWN_HDR_MAX bytes each; the longer
 * ones are named in <prefix>dlq.dropped), plus where it came from and
 * why it is here. */
void flow_produce_dlq(aagw_flow_t *f, struct token *tok,
                      const rd_kafka_message_t *m, const char *why);

/* The dead-letter copy was too large for the target: send one without
 * the record's key, value and headers, saying what was left out; the
 * source coordinates find the record. */
void flow_produce_dlq_stub(aagw_flow_t *f, struct token *tok,
                           const rd_kafka_message_t *m, const char *why);

/* Decide and act on one consumed record.  Returns true if 'm' now belongs
 * to an in-flight produce (destroyed with its final delivery report). */
bool flow_handle(aagw_flow_t *f, rd_kafka_message_t *m);

/* The source consumer (index into f->fx) that reads 'topic' ['p']: the
 * same for a partition all the flow's life, spread so that a topic's
 * partitions go round the consumers. */
int flow_fx_of(const aagw_flow_t *f, const char *topic, int32_t p);

static inline rd_kafka_t *flow_fx_consumer(const aagw_flow_t *f,
                                           const char *topic, int32_t p) {
        return f->fx[flow_fx_of(f, topic, p)].c;
}

enum flow_fx_op {
        FX_ASSIGN,   /* rd_kafka_incremental_assign() */
        FX_UNASSIGN, /* rd_kafka_incremental_unassign() */
        FX_PAUSE,
        FX_RESUME,
        FX_SEEK /* rd_kafka_seek_partitions(), 'timeout_ms' each */
};

/* Apply 'op' to each partition of 'l' at the consumer that reads it; the
 * elements' err are set as the call set them.  Returns the first error
 * (the caller's to destroy), NULL if none. */
rd_kafka_error_t *flow_fx_apply(aagw_flow_t *f, enum flow_fx_op op,
                                rd_kafka_topic_partition_list_t *l,
                                int                              timeout_ms);

/* Records waiting in the consumers' queues, all of them. */
int64_t flow_fx_queued(const aagw_flow_t *f);

void flow_set_paused(aagw_flow_t *f, bool pause);

/* Serve the identity lease: its group's callbacks (flow_lease_cb()) and
 * errors.  Fenced, it sets f->fenced for flow_lease_fenced(). */
void flow_lease_poll(aagw_flow_t *f);

/* The identity lease was fenced (FENCED_INSTANCE_ID, fatal in
 * librdkafka): its group gave the flow's group.instance.id to a newer
 * member, another process with this gateway id and site, or this
 * process's own lease rejoining after the process stalled past its
 * session.  Stop copying (the records in flight acknowledged, the
 * positions stored, every partition unassigned), replace the lease, and
 * copy again, every partition reconciled against the target, only once
 * the new lease has held the id for LEASE_SETTLE_MS (flow_single_after()): the
 * other process, fenced in turn, has stopped copying by then.  Fails the flow, and returns
 * -1, if it cannot, or if the last restart was less than REFENCE_MS ago:
 * two processes take the id from each other, and this one gives up. */
int flow_lease_fenced(aagw_flow_t *f);

/* After a fence, the restarted lease holds the id: every partition is
 * the flow's again (flow_assign_new(): reconciled against the target, which
 * the other process may have written to meanwhile). */
void flow_lease_regained(aagw_flow_t *f);

/* Fill f->hdrs from a message's headers; returns the count. */
size_t flow_collect_headers(aagw_flow_t *f, const rd_kafka_message_t *m);

/* replicator_settle_all() over every target partition this flow's
 * producer writes; 'pt''s own watermarks end up in '*lo' / '*hi'.
 * Returns as replicator_settle_all(). */
int flow_settle_all(aagw_flow_t *f, struct ptrack *pt, int64_t *lo,
                    int64_t *hi, int wait_ms);

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
 * again, after them (2 and 7 records twice in a kafka-target_kill
 * run).  Under the prefix policy this flow is the target's
 * only writer and is not writing yet, so the wait for the watermark to
 * reach the log's end ends once the replicas caught up or the ISR
 * dropped the dead one; failing that within RECONCILE_WAIT_MS, the flow
 * fails closed.  Under identity, local producers may keep the log ahead
 * of the watermark: SETTLE_MAX_MS, then the watermark (logged). */
rd_kafka_resp_err_t flow_target_end(aagw_flow_t *f, struct ptrack *pt,
                                    int64_t *lo, int64_t *hi);

/* Scale-out: the end of the target partition of 'pt' for a new owner,
 * its last stable offset once no transaction is open on it.  The
 * reader (read_committed) is answered the LSO, the high-watermark probe
 * (read_uncommitted) the high watermark.  While they differ, a
 * transaction of the previous owner is open there: if it was committed
 * its copies count, if it is aborted (by the coordinator after
 * transaction.timeout.ms, for a dead owner) they do not; either way the
 * last copy is only known once it ended.  flow_target_end()'s waits for the
 * log's end are not needed: a request of a dead owner held by a broker
 * belongs to a transaction that can no longer commit.  Sets '*waited'
 * to the time that took.  On the flow thread ('on_stage'), also gives
 * the producer the partition's current leader.  Fails the flow after
 * RECONCILE_WAIT_MS. */
rd_kafka_resp_err_t flow_stable_end(aagw_flow_t *f, struct ptrack *pt,
                                    int64_t *lo, int64_t *hi, int64_t *waited,
                                    bool on_stage);

/* Where to resume source partition 'pt': the stored position, moved past
 * every record of ours found in the target partition after the stored
 * target offset.  Returns the offset, or RD_KAFKA_OFFSET_BEGINNING.
 *
 * Our copies of one source partition are appended to one target
 * partition in source order, so the last of them names the highest
 * source offset copied.  The target is read backwards in growing
 * chunks from its end until a chunk holds one of ours: a few records
 * normally, and not the whole partition when the stored state is old or
 * lost (the target may hold far more than can be read at start).
 * Under scale-out '*txn_wait_ms' (may be NULL) gets how long it waited
 * for the previous owner's open transactions. */
int64_t flow_reconcile(aagw_flow_t *f, struct ptrack *pt, int64_t *txn_wait_ms);

/* Record whether 'pt' is assigned and held (the flow thread's view) and
 * whether the flow writes its target partition now (the reconciler's). */
static inline void flow_part_mark(struct ptrack *pt, bool assigned, bool held) {
        pt->assigned = assigned;
        pt->held     = held;
        atomic_store(&pt->copying, assigned && !held);
}

/* The reconciler: a thread that runs flow_reconcile()'s round trips to
 * the target (the stored position, the target's end and its settling,
 * the scan of its tail) beside the copying, started and stopped with
 * the maker (flow_maker_start()).  In the flow thread they held every
 * topic still while a new one started (the README demo's per-second p99
 * reached a second when its flows took up the heartbeats topic). */
void flow_reconciler_start(aagw_flow_t *f);
void flow_reconciler_stop(aagw_flow_t *f);

/* Hand 'pt' to the reconciler ('release': a held partition whose copy
 * now has it, else one to assign), marking it reconciling.  Returns
 * false if there is none (scale-out keeps its reconciliation in the
 * flow thread, where its transactions are): reconcile in place. */
bool flow_recon_ask(aagw_flow_t *f, struct ptrack *pt, bool release);

/* The answers told since the last call (a topic's at once), a list the
 * caller frees; NULL if none. */
struct flow_recon_job *flow_recon_take(aagw_flow_t *f);

/* Set what an answer found in 'pt' and in the flow's counters (flow
 * thread). */
void flow_recon_apply(aagw_flow_t *f, struct ptrack *pt,
                      const struct flow_recon *a);

/* Start copying the partitions the reconciler answered for: assigned at
 * the offsets found, or (held ones) resumed and sought there.  An answer
 * asked for before an flow_unassign() of its partition is dropped, and
 * the partition asked for again if the flow still copies its topic.
 * Called by flow_after() each round; costs an atomic load when there is
 * nothing. */
void flow_reconciled(aagw_flow_t *f);

/* Persist the positions that moved, and commit them to the group. */
void flow_save_positions(aagw_flow_t *f, bool force);

/* Serve delivery reports until nothing is in flight, for up to
 * 'timeout_ms'; once the flow stops, no longer than what is left of the
 * drain time its destroy allowed (aagw_flow_destroy()). */
void flow_drain(aagw_flow_t *f, int timeout_ms);

/* The copy of 'tt' has 'have' partitions that the producer sees, its
 * source 'want': hold the source partitions the copy lacks, start those
 * it has now, and report the difference (once per source count). */
void flow_target_count(aagw_flow_t *f, struct ttrack *tt, int have,
                       int want);

/* Every partition of 'tt' is the flow's: a partition the copy has is
 * reconciled and read from there, one it lacks is held (assigned, paused,
 * positioned when the copy has it: flow_target_count()).  Incremental, so the
 * partitions already read keep their place and what is in flight. */
void flow_assign_new(aagw_flow_t *f, struct ttrack *tt);

/* Finish what is in flight (up to 'drain_ms'), store the positions and
 * unassign the partitions of 'tt' (NULL: of every topic).  Returns 0, or
 * -1 with the flow failed if records were still in flight: their
 * delivery reports would land in the rings of a later assignment. */
int flow_unassign(aagw_flow_t *f, struct ttrack *tt, int drain_ms);

/* flow_unassign() of only the source partitions whose work partition
 * this process no longer owns (a cooperative rebalance took it): the
 * others go on where they are. */
int flow_unassign_lost(aagw_flow_t *f, int drain_ms);

/* The identity lease's group gave it partitions: it reads none of them
 * (an empty assignment); that it was given any tells that it holds the
 * group.instance.id. */
void flow_lease_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                   rd_kafka_topic_partition_list_t *parts, void *opaque);

/* A record of the open transaction failed (its delivery report): the
 * transaction is aborted and redone (flow_scale_poll()).  Timeouts, fencing
 * and the like the redo gets past; a refusal for good is remembered, see
 * above. */
void flow_scale_failed(aagw_flow_t *f, struct token *tok,
                       const rd_kafka_message_t *m);

/* Give up the open transaction (aborted: its copies are never visible)
 * and every source partition with it, at once: a lost work partition is
 * no longer this process's to write, and the partitions still flow_owned
 * resume from what the target holds, found anew (scale_gain()). */
void flow_scale_drop(aagw_flow_t *f);

/* Commit the open transaction: its copies acknowledged first, then the
 * offsets of every owned work partition with the group's metadata (the
 * fence).  Only then the positions are final. */
void flow_scale_commit(aagw_flow_t *f);

/* Serve the ownership once per round of the stage loop: rebalances, the
 * commit when the transaction is old enough, a new transaction when
 * there are partitions to copy.  Returns whether records may be
 * consumed now (only into an open transaction). */
bool flow_scale_poll(aagw_flow_t *f);

/* The work topic (created with scale_out.work_partitions if missing; an
 * existing one keeps its count, which every member then uses) and the
 * owner.  Returns 0, or -1 with the flow failed. */
int flow_scale_start(aagw_flow_t *f);

/* The flow's part in the stage loop (stage_main()), and how it makes
 * its progress durable: in one process (flow.c) or in a site's
 * transactions (flow_scale.c). */
extern const struct stage_hooks  flow_hooks;
extern const struct stage_commit flow_commit_single, flow_commit_scale;

/* Scale-out: the work partition that source partition 'p' of 'tt'
 * belongs to; every partition of a topic in a different one, in turn,
 * so that one topic spreads over the processes. */
int32_t flow_work_of(const aagw_flow_t *f, const struct ttrack *tt,
                     int32_t p);

/* Whether this process copies source partition 'p' of 'tt' (always, as
 * the only process of its site). */
bool flow_owned(const aagw_flow_t *f, const struct ttrack *tt, int32_t p);

struct ttrack *flow_topic_find(aagw_flow_t *f, const char *topic);

struct ptrack *flow_part_get(aagw_flow_t *f, struct ttrack *tt,
                             int32_t partition);

/* Create the dead-letter topic (one partition) through the Admin API if
 * the target lacks it.  Clusters that do not auto-create topics (the
 * usual production setting, auto.create.topics.enable=false) would
 * otherwise fail the first dead-lettered record with an unknown topic;
 * where the Admin API is missing, the producer's auto-creation remains. */
void flow_dlq_ensure(aagw_flow_t *f);

/* Start and stop the maker thread (flow_start(), flow_finish()).  Without it (it could
 * not start) copies are made in the flow thread, as discovery finds
 * them. */
void flow_maker_start(aagw_flow_t *f);
void flow_maker_stop(aagw_flow_t *f);

/* Take the maker's answers, each to its topic, where the next discovery
 * finds it.  Returns whether there were any (a discovery to ask for). */
bool flow_made(aagw_flow_t *f);

/* Wake the flow thread's wait (the stage_worker hook of the reconciler
 * and the maker): rd_kafka_queue_yield() on the first source consumer's
 * queue, which the stage loop waits on. */
void flow_wake(void *f);

/* Scan the source cluster for matching topics and assign their
 * partitions to the consumer; the identity lease subscribes to them. */
void flow_discover(aagw_flow_t *f);

/* The same with the source's metadata at hand ('err' from the request:
 * nothing to do on an error but note it); takes 'md'. */
void flow_discover_md(aagw_flow_t *f, rd_kafka_resp_err_t err,
                      const struct rd_kafka_metadata *md);

/* Whether the flow copies source topic 'topic' (replication.topics, the
 * loop checks by name, the heartbeats topic). */
bool flow_topic_copied(const aagw_flow_t *f, const char *topic);

/* Start copying 'pt' from source offset 'offset' (flow_reconcile()'s answer). */
void flow_part_start(aagw_flow_t *f, struct ptrack *pt, int64_t offset);

/* The held partitions of 'tt' below its target count: position each
 * (flow_reconcile(): a new partition from its first record), then let the
 * consumer fetch it.  Resumed first and sought after: the seek's barrier
 * drops whatever the resumed fetch brought from elsewhere. */
void flow_release_held(aagw_flow_t *f, struct ttrack *tt);

/* A new transactional producer after stage_txn_fatal(): what was in flight
 * is purged, every partition let go (the committed positions stored),
 * the topic handles moved to the new producer, and the partitions still
 * owned reconciled again (scale_gain()).  The caller holds no queue of
 * the old producer.  Returns 0, or -1 (the flow failed). */
int flow_scale_renew(aagw_flow_t *f);

#endif
