/*
 * replicator/unify_int.h: what the files of a unify stage share (unify.c
 * has the design): its settings, its state, and the functions one file
 * calls in another.  Internal to replicator/.
 */
#ifndef UNIFY_INT_H
#define UNIFY_INT_H

#include "replicator_int.h"
#include "stage.h"

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
 * (see unify_output_wait()) before the stage fails. */
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
        /* scale_out.route: the route topic itself (its partition p
         * holds the records of output partition p), or, for an input,
         * per partition the position its router (the process owning
         * it) last committed: a group offset, ROUTE_UNKNOWN until read
         * back (unify_route_fetch()). */
        bool     route;
        int64_t *rcpos;
        int32_t  rcpos_parts;
        bool     seen;     /* in the last discovery */
        bool     led;      /* every partition had a leader at a
                              discovery: assigned from then on */
        bool     asking;   /* the helper asks the consumer for its
                              leaders (unify_topics.c, "HELPER") */
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
        bool                  preparing;       /* the helper makes the output
                                                  or settles its ends */
        int32_t out_made;                      /* scale-out: its partitions as
                                                  the helper made it, 0 */
        /* Scale-out: the changelog topics (winners and positions; ids),
         * and whether the owned output partitions' state is restored
         * from them. */
        char                  state[AAGW_TOPIC_MAX + 1];
        char                  ids[AAGW_TOPIC_MAX + 1]; /* "": none (lww) */
        /* The site's audit topic (scale-out): every audit entry decided
         * here, in the decision's transaction, for `aagw audit`. */
        char                  audit[AAGW_TOPIC_MAX + 1];
        rd_kafka_topic_t     *state_rkt, *ids_rkt, *audit_rkt;
        /* scale_out.route: the site's route topic of this unified topic
         * (unify_route.c), as produced to and as read (its uinput, the
         * last of in[] once the output is ready). */
        char                  route[AAGW_TOPIC_MAX + 1];
        rd_kafka_topic_t     *route_rkt;
        struct uinput        *rin;
        int64_t              *purged; /* per route partition: deleted
                                         below this offset, -1 */
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
        bool                    route; /* a record routed into the route
                                          topic, not an output record */
        bool                    alone; /* scale-out: a suspect, sent with
                                          no other output record in flight
                                          (unify_scale_refusal()) */
};

/* Per-record scratch of one consumed batch. */
struct item {
        rd_kafka_message_t *m;
        struct utopic      *ut;
        struct uinput      *ui;
        int                 state; /* 0 decide, 1 skip (not ours),
                                          2 route (to route_p) */
        int32_t              route_p;
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
        char                 route_hdr[AAGW_AFFIX_MAX + 8];
        char                 oversize_hdr[AAGW_AFFIX_MAX + 24];
        bool                 route;       /* scale_out.route */
        bool                 in_owner_cb; /* inside an owner callback: no
                                             owner_poll() */
        /* The route partitions' purge (unify_route_purge()): the admin
         * answers' queue, the last request's time, one in flight. */
        rd_kafka_queue_t *purge_q;
        int64_t           purge_ms;
        bool              purge_pending;
        uint64_t          purge_errors;
        /* Per batch item: the input topic a routed record came from. */
        char (*otopic)[AAGW_TOPIC_MAX + 1];
        rd_kafka_t          *consumer, *producer, *reader, *admin;
        rd_kafka_t          *end_probe; /* replicator_log_ends_at()'s */
        rd_kafka_queue_t    *cq;
        struct replicator_ctl ctl; /* state, stop, the failure */
        struct replicator_delivery delivery; /* unify_on_delivery() */
        pthread_t            thread;
        bool                 thread_started;
        bool                 admin_unsupported;
        int64_t              last_refresh_ms;
        bool                 inputs_leaderless; /* an input waits for its
                                                   leaders: unify_discover soon */
        /* Discovery beside the stage (unify_topics.c, "HELPER"): the
         * metadata watch unify_discover() kicks, and the helper thread
         * with its jobs (a stage_worker). */
        bool                disc_started;
        aagw_md_watch_t    *mdw;
        struct stage_worker helper;

        struct utopic *topics[MAX_TOPICS];
        size_t         ntopics;

        struct aagw_pool tokens;

        /* batch scratch */
        struct item           *items;
        struct aagw_verdict   *verdicts;
        struct aagw_unify_rec *recs;   /* the records to decide */
        size_t                *ritem;  /* recs[i] is items[ritem[i]] */
        struct aagw_unify_pos *reached; /* input positions an epoch
                                           reached (seal_epoch()) */
        size_t                 reached_cap;
        struct aagw_header    *hdrs;
        size_t                 hdr_cap;

        _Atomic uint64_t records_in, records_out, recovered, replayed, commits,
            accepted, dropped, superseded, identical, rejected, fetch_restarts,
            diverged, oversized, start_refetches, routed, unrouted;
        _Atomic int64_t  inflight, lag;
        struct aagw_reach reach; /* the site's cluster, from unify_discover() */
        _Atomic int32_t  ntopics_pub, ninputs_pub;
        int64_t          last_lag_ms;
        aagw_stall_watch_t *stalls;
        struct stage        stage; /* the thread: stage.c, unify_hooks */
        bool             topics_full_logged;
        rd_kafka_topic_t *last_rkt;  /* input of the previous record */
        struct utopic    *last_ut;
        struct uinput    *last_ui;
        uint64_t          batch_no; /* consume batches taken (the start
                                       check) */

        /* Scale-out (conf.scale_out enabled; owner NULL otherwise): see
         * unify_scale.c. */
        bool          scale;        /* scale-out: the mode, for good */
        struct owner *owner;        /* NULL only while it is renewed */
        rd_kafka_t   *standby;      /* scale_out.standby: reads the
                                       changelogs of partitions others
                                       own (unify_sb_poll()) */
        rd_kafka_queue_t *sbq;
        bool          sb_reassign;  /* ownership or topics changed */
        int64_t       sb_sig;       /* what unify_sb_assign() assigned for */
        rd_kafka_t       *hw_probe;     /* read_uncommitted: the high
                                           watermark of a changelog */
        bool          kept_pending; /* unify_scale_revoking() noted kept_hw */
        struct changelog_ids_conf ids_conf;     /* from unify.window */
        rd_kafka_t   *out_producer; /* writes the output: the owner's
                                       transactional producer, or
                                       'producer' */
        int32_t       work_parts;   /* W */
        char          work[AAGW_TOPIC_MAX + 1];
        struct stage_txn          tx; /* the member's transactions */
        bool                      need_restore;
        int64_t                   last_commit_ms, lost_ms;
        int64_t       txn_records; /* records produced in the open one */
        /* The stand-ins the open transaction holds: counted (oversized)
         * when it commits. */
        uint64_t        txn_stubs;
        pthread_mutex_t owned_lock; /* 'owned' for aagw_unify_owned() */
        char            owned[1024];
        _Atomic uint64_t rebalances, restores, restore_ms_total,
            restored_records;
        _Atomic int32_t  owned_parts;
};

/* Copy the string 'src' into 'dst' (size bytes), truncating: snprintf
 * without the format parsing, on the per-record path. */
static inline void copy_str(char *dst, size_t size, const char *src) {
        size_t n = strnlen(src, size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

/* Fail the stage closed: it stops and reports why. */
#define ufail(u, ...) replicator_fail(&(u)->ctl, __VA_ARGS__)

static inline struct token *token_get(aagw_unify_t *u) {
        return replicator_token_get(&u->tokens);
}

static inline void token_put(aagw_unify_t *u, struct token *t) {
        replicator_token_put(&u->tokens, &t->base);
}

/* ------------------------------------------------------ ACROSS FILES --- */

/* How the stage makes its decisions durable under scale-out
 * (unify_scale.c): the transactions of the member's producer. */
extern const struct stage_commit unify_commit_scale;

/* What one file of a unify stage calls in another (unify.c,
 * unify_topics.c, unify_scale.c, unify_restore.c). */

/* The producer's own limit (message.max.bytes) or the broker's. */
bool unify_too_large(rd_kafka_resp_err_t err);

/*
 * A record whose unified copy is too large for the output (the producer's
 * message.max.bytes, or the topic's max.message.bytes) must not stop the
 * stage: it was decided like any other (its id delivered, or its version
 * the winner), so its place in the output is taken by a stand-in with the
 * same key, partition and timestamp, our headers, an empty value, and
 * <prefix>unify.oversize saying what was left out.  Counted (oversized),
 * logged at the 1st, 2nd, 4th, ... such record.  'given': the note to
 * carry (a routed stand-in's), NULL: said here.  Returns the
 * unify_produce error (0: queued, with 'tok' as its opaque).
 */
rd_kafka_resp_err_t
unify_produce_stub(aagw_unify_t *u, struct token *tok, int32_t part,
                   const rd_kafka_message_t *m, const rd_kafka_headers_t *src_h,
                   rd_kafka_resp_err_t why, const char *given);

/* Delivery report: the unify thread, inside rd_kafka_poll(producer). */
void unify_on_delivery(void *stage, void *t, const rd_kafka_message_t *m);

struct uinput *unify_input_of(struct utopic *ut, const char *topic);

/* The output partition of a keyed record (aagw_unify_key()): its id hash
 * (dedup) or scoped entity key hash (lww). */
int32_t unify_out_part(const struct utopic *ut,
                       const struct aagw_unify_rec *r);

/* Produce an accepted record of epoch 'ep' (decide()'s) to the output.
 * Takes over 'it->m'. */
int unify_produce(aagw_unify_t *u, struct item *it,
                  const struct aagw_unify_rec *r, unsigned ep);

/* Decide and unify_produce one consumed batch, then seal it as an epoch. */
void unify_process(aagw_unify_t *u, rd_kafka_message_t **msgs, size_t n);

rd_kafka_t *unify_make_client(aagw_unify_t *u, rd_kafka_type_t type,
                              const char *role, const char *const *extra,
                              char *errstr, size_t errstr_size);

/* The entity key of a record under 'ut''s rule: the record key, or a JSON
 * field.  Returns false if the record has none. */
bool unify_entity_key(const struct utopic *ut, const struct aagw_rec *rec,
                      const char *origin, char *buf, size_t size,
                      const void **ekey, size_t *len);

void unify_fill_rec(aagw_unify_t *u, const rd_kafka_message_t *m,
                    const char *topic, struct aagw_rec *rec);

/* Wait until every partition of the output 'out' ('parts' of them)
 * answers a watermark query.  While a partition's leader is gone (a broker
 * died, and the controller moves leadership only once the broker's session
 * lapses: 9 s by default) the query fails with a timeout, a transport error or
 * "not leader", and the start-up scan would fail the stage (and the gateway)
 * for a fault the cluster repairs by itself.  Returns 0, or -1 if the
 * stage is stopping or failed after OUTPUT_WAIT_MS. */
int unify_output_wait(aagw_unify_t *u, const char *out, int32_t parts);

/* Decode output record 'm' of 'ut' into 'r' (prov in u->verdicts[0],
 * the input topic in 'in_topic', the entity key in 'ebuf'): what the
 * stage decided when it wrote it.  Returns 1, or 0 if aagw did not write
 * it (logged) or it has no entity key. */
int unify_decode_output(aagw_unify_t *u, struct utopic *ut,
                        const rd_kafka_message_t *m,
                        struct aagw_unify_rec *r, char *in_topic,
                        size_t in_size, char *ebuf, size_t ebuf_size);

/* Fold one record found in the output (delivered by an earlier run whose
 * epoch did not commit) in.  Returns 1 if folded, 0 if not ours (or an
 * lww record without an entity key), -1 (the stage fails). */
int unify_fold_record(aagw_unify_t *u, struct utopic *ut,
                      const rd_kafka_message_t *m);

/* The unify_watermarks of 'topic' ['p'] through 'rk'.  A topic created moments
 * ago (ensure_output() makes the output through the Admin API on clusters
 * that do not auto-create) is not yet in the client's metadata, and
 * librdkafka answers "Unknown partition" at once: ask for the topic's
 * metadata and try again, for up to 'timeout_ms' (and while its leaders
 * are being elected, "Not leader for partition"). */
rd_kafka_resp_err_t unify_watermarks(rd_kafka_t *rk, const char *topic,
                                     int32_t p, int64_t *lo, int64_t *hi,
                                     int timeout_ms);

const char *unify_topic_base(const aagw_repl_policy_t *pol,
                             const char *topic);

void unify_utopic_free(struct utopic *ut);

int unify_uinput_resize(struct uinput *ui, int32_t nparts);

/* Assign every input partition at its position: the one in memory if it
 * was read already, else the stored one, else the beginning.  Each
 * partition assigned at an offset is checked to hand over its first
 * record there (replicator_start_take(), in unify_process()). */
void unify_reassign(aagw_unify_t *u);

/* Ask for the site's metadata now (the stage's discovery cadence); the
 * discovery runs on it when it comes (unify_discovered()).  The first
 * call starts the watch and the helper; without them it runs here. */
void unify_discover(aagw_unify_t *u);

/* Act on what came since the last call: the metadata (the discovery
 * proper) and the helper's answers (inputs led, outputs made and folded
 * in, inputs assigned).  Called by unify_round() each round; costs a
 * lock and an atomic load when nothing came. */
void unify_discovered(aagw_unify_t *u);

/* Stop the watch and the helper (unify_finish(), once the loop ended). */
void unify_discovery_stop(aagw_unify_t *u);

/* Records behind the inputs' high unify_watermarks, from the unify_watermarks the
 * consumer's fetches cached (no request); -1 while one is unknown. */
void unify_update_lag(aagw_unify_t *u);

/* A partition given back to the process that a clean revocation took it
 * from need not be read again: its state here (RocksDB, the committed
 * positions) is what it committed last, as long as nobody wrote its
 * changelog partitions (state and ids) since.  unify_scale_revoking() notes the
 * end (the high watermark) of each owned one right after its last
 * commit; unify_scale_kept() compares.  Any other writer's transaction adds at
 * least a record and its marker to a partition it wrote (two offsets,
 * also when it was aborted); only this process's own commit marker may
 * land after the note (the coordinator writes markers after it answered
 * the commit): one offset per partition.  And nothing may be open (the
 * last stable offset, from the read_committed reader, is the end). */
void unify_scale_kept_clear(aagw_unify_t *u);

void unify_scale_kept_note(aagw_unify_t *u);

bool unify_scale_kept(aagw_unify_t *u, struct utopic *ut, int32_t p);

/* Seed output partition 'p' of 'ut' from the output if it holds records
 * (its changelog holds no position).  Returns 0, 1 (abandoned: the
 * ownership changed meanwhile), or -1 (the stage failed). */
int unify_scale_seed(aagw_unify_t *u, struct utopic *ut, int32_t p);

/* Restore every ready topic not restored yet for the owned partitions,
 * then fetch the inputs from the positions restored.  Returns 0, or -1
 * if the stage failed. */
int unify_scale_restore(aagw_unify_t *u);

/* Give the standby every changelog partition of an output partition this
 * process does not own, from where it got to. */
void unify_sb_assign(aagw_unify_t *u);

/* Serve the standby: unify_reassign after a change, fold in what arrived.
 * Returns 0, or -1 (the stage failed). */
int unify_sb_poll(aagw_unify_t *u);

bool unify_scale_owns(const aagw_unify_t *u, int32_t p);

bool unify_scale_owns_any(const aagw_unify_t *u, const struct utopic *ut);

/* Room in 'ui''s position tables for all its partitions (new: -1). */
int unify_opos_fit(const struct utopic *ut, struct uinput *ui);

/* Every input of 'ut' fetched from the smallest position of the owned
 * output partitions (-1: the beginning). */
void unify_scale_positions(aagw_unify_t *u, struct utopic *ut);

/* "clicks.unified 0,3; views.unified 1" and the count, for /status. */
void unify_scale_publish(aagw_unify_t *u);

/* Unassign the inputs and drop what their queue holds (records fetched
 * from positions no longer wanted), then assign them afresh. */
void unify_scale_reassign(aagw_unify_t *u);

int unify_scale_begin(aagw_unify_t *u);

/* The transactional producer refused a record: the transaction is in
 * an abortable state (librdkafka 2.0.2 after an abort that purged
 * records: "skipped sequence numbers ... requires epoch bump"), and only
 * an abort gets it going again.  The next unify_scale_commit() aborts and redoes
 * (unify_scale_poll() runs it at once). */
void unify_scale_refused(aagw_unify_t *u, const char *topic, int32_t p,
                      rd_kafka_resp_err_t err);

void unify_scale_refusal(aagw_unify_t *u, struct token *tok,
                      const rd_kafka_message_t *m);

/* Serve delivery reports until at most 'until' output records are in
 * flight (STAGE_ALONE_MS at most). */
void unify_scale_settle(aagw_unify_t *u, int64_t until);

/* refused_each() at a commit: its stand-ins are in; an output partition
 * no longer owned is another member's to find out.  At an abort (arg
 * NULL): its stand-ins go again. */
bool unify_scale_refused_keep(void *arg, struct refused_rec *r);

/* Produce one changelog record into the open transaction: an id into
 * the ids topic, the others into the state topic. */
int unify_scale_state(aagw_unify_t *u, struct utopic *ut, int32_t p,
                   const struct changelog_rec *c);

/* Keep only the records whose output partition this process owns, at
 * or past that partition's position.  Returns how many are left. */
size_t unify_scale_filter(aagw_unify_t *u, size_t nr);

/* The changelog record of an accepted decision, into the transaction. */
int unify_scale_decided(aagw_unify_t *u, struct item *it,
                     const struct aagw_unify_rec *r, int64_t now);

/* Commit the open transaction (opening one if positions moved): the
 * positions that moved go to the changelog first.  Returns 0, or -1 if
 * the stage failed. */
int unify_scale_commit(aagw_unify_t *u);

/* owner.c: a rebalance is about to take every owned partition: commit
 * what the open transaction holds while the assignment still fences (a
 * member the group moved on from is refused: FENCED, and scale_lost()
 * runs). */
void unify_scale_revoking(void *opaque,
                       const rd_kafka_topic_partition_list_t *parts);

/* Create 'topic' ('what' it is, for the log) with 'parts' partitions
 * and the settings 'conf' (NULL-terminated name, value pairs), logged
 * with 'how'.  Returns 0, or -1: refused (the stage failed) or to try
 * again at the next discovery (logged). */
int unify_topic_create(aagw_unify_t *u, const char *what, const char *topic,
                       int32_t parts, const char *const *conf, const char *how);

/* The site's topic of 'kind' (state, ids, audit, route) for unified
 * topic 'out', aagw.<id>.<site>.<kind>.<out>, into 'dst' (AAGW_TOPIC_MAX
 * + 1 bytes).  Returns 0, or -1 (the stage failed: too long a name). */
int unify_site_topic(aagw_unify_t *u, const char *kind, const char *out,
                     char *dst);
int unify_scale_changelog_names(aagw_unify_t *u, const char *out, char *state,
                                char *ids, char *audit);
/* The decider's audit entries under scale-out, into the open transaction
 * (aagw_unify_audit_fn, 'opaque' the stage). */
int unify_scale_audit(void *opaque, const struct aagw_unify_rec *r,
                      const void *entry, size_t len);
int unify_scale_changelogs_make(aagw_unify_t *u, const char *out, int32_t parts,
                                bool dedup);
int unify_scale_state_topic(aagw_unify_t *u, struct utopic *ut);

/* Join the site's unify owners: the work topic, the owner.  Returns 0,
 * or -1 (the stage failed). */
int unify_scale_start(aagw_unify_t *u);

/* A new transactional producer after stage_txn_fatal() (owner_renew(): the
 * membership and what it owns stay): what was in flight is dropped, the
 * topics' handles move to the new producer, and the inputs go back to
 * the committed positions, as after an abort.  If the group moved on
 * meanwhile, the owner says so at its next poll, as always.  Returns 0,
 * or -1 (the stage failed). */
int unify_scale_renew(aagw_unify_t *u);

/* One turn of the owner's side in the stage's loop: membership,
 * restore, the commit due.  Returns 0, or -1 if the stage failed. */
int unify_scale_poll(aagw_unify_t *u);

/* ------------------------------------------ ROUTE (unify_route.c) --- */

#define ROUTE_UNKNOWN (-3) /* rcpos: not read back from the group yet */

/* Whether this process reads partition 'i' of input 'ui': every one but
 * under scale_out.route, where it routes the input partitions it owns
 * and decides from the route partitions it owns. */
bool unify_reads(const aagw_unify_t *u, const struct uinput *ui, int32_t i);

/* The route topic of unified topic 'out' into 'route'.  Returns 0, or -1
 * (the stage failed: too long a name). */
int unify_route_name(aagw_unify_t *u, const char *out, char *route);

/* Make the route topic of 'out' with 'parts' partitions if missing, and
 * wait for its leaders (the helper's job).  Returns 0, or -1 (tried
 * again; the stage failed if the cluster refused or the count
 * differs). */
int unify_route_make(aagw_unify_t *u, const char *out, int32_t parts,
                     const struct rd_kafka_metadata *md);

/* The output of 'ut' is ready: its route topic's handle and input.
 * Returns 0, or -1 (the stage failed). */
int unify_route_ready(aagw_unify_t *u, struct utopic *ut);

/* Forget every router position read back (the ownership changed). */
void unify_route_forget(aagw_unify_t *u);

/* Read back the committed router positions this process needs now (of
 * input partitions it owns and has none of) and start them there.
 * Returns 0, or -1 (the stage failed). */
int unify_route_fetch(aagw_unify_t *u);

/* A routed record's input coordinates, from its last header (the view
 * 'rec' loses it).  Returns false if it has none (not aagw's). */
bool unify_route_unwrap(aagw_unify_t *u, struct aagw_rec *rec, char *topic,
                        size_t size);

/* Send this batch's records to route (state 2) into the open
 * transaction.  Returns 0, or -1 (the transaction is broken or the
 * stage failed). */
int unify_route_send(aagw_unify_t *u, size_t n);

/* Delete what the owned route partitions hold below their committed
 * positions (decided for good), at most every ROUTE_PURGE_MS, one
 * request at a time (answers taken here, never waited for). */
void unify_route_purge(aagw_unify_t *u);

/* Whether a router position moved since the last commit. */
bool unify_route_moved(aagw_unify_t *u);

/* The router positions to commit with the transaction (NULL: none, or
 * out of memory); the caller destroys it. */
rd_kafka_topic_partition_list_t *unify_route_positions(aagw_unify_t *u);

/* The router positions of 'l' into the open transaction, also as rpos
 * records of the state topics (the group's offsets can expire; these
 * do not).  Returns 0, or -1 (refused: the transaction is broken, or the
 * stage stops). */
int unify_route_log(aagw_unify_t *u, const rd_kafka_topic_partition_list_t *l);

/* The transaction committed: its router positions are the committed
 * ones. */
void unify_route_committed(aagw_unify_t *u);

#endif
