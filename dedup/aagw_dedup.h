/*
 * aagw - active-active replication gateway for Kafka
 *
 * dedup/aagw_dedup.h: the only dedup header other folders may include.
 *
 * dedup/ owns everything aagw keeps on disk: the state directory and its
 * single-owner lock, and (built on it) the RocksDB store of seen ids,
 * last-write-wins versions, the audit log and stored positions.
 */
#ifndef AAGW_DEDUP_H
#define AAGW_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aagw_unify_contract.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------- STATE DIRECTORY --------------------------- */

/**
 * A state directory owned by this process.  Two gateways writing the same
 * RocksDB would corrupt each other's positions, so ownership is an exclusive
 * flock(2) on `<dir>/LOCK.aagw`, which the kernel releases when the process
 * dies (kill -9 included): a stale lock file never blocks a restart.
 */
typedef struct aagw_statedir aagw_statedir_t;

/**
 * @brief Create @p dir (and parents) if needed and take its lock.
 *
 * @returns the owned directory, or NULL with a readable reason in
 * @p errstr.  When another process holds the lock the reason names its pid:
 * "state dir /x is in use by another aagw process (pid 123); stop it or
 * choose another state_dir".
 */
aagw_statedir_t *aagw_statedir_open(const char *dir, char *errstr,
                                    size_t errstr_size);

/** @returns the directory path; borrowed, valid until close. */
const char *aagw_statedir_path(const aagw_statedir_t *sd);

/** Release the lock and free @p sd.  NULL is a no-op. */
void aagw_statedir_close(aagw_statedir_t *sd);

/** @returns the pid recorded by the current holder of @p dir's lock, or -1
 *  if the directory is not locked (or has no lock file). */
pid_t aagw_statedir_owner(const char *dir);

/* -------------------------------- STORE -------------------------------- */

/**
 * The RocksDB state of one gateway, in the state directory: one database
 * with a column family per kind of state.  Writes go through the WAL
 * without fsync: a killed process (kill -9) loses nothing that was
 * written, a machine crash may lose the last moments, which the start-up
 * reconciliation from the output topics' tails recovers.
 *
 * Thread safety: every function may be called from any thread; a batch
 * (aagw_store_batch_t) is used by one thread at a time.  The store runs
 * two threads of its own (the tail indexer and, after an open, the filter
 * rebuild), besides RocksDB's background threads.
 */
typedef struct aagw_store aagw_store_t;

/** The store's clock: wall-clock milliseconds since the Unix epoch.  It
 *  is called from RocksDB's compaction threads too, so it must be
 *  thread-safe.  The store never lets its own notion of "now" go back. */
typedef int64_t(aagw_store_clock_t)(void *opaque);

struct aagw_store_opts {
        size_t  cache_mb;  /**< RocksDB block cache, write buffers and the
                                not yet indexed tail, MiB (>= 8; 0: 64) */
        int64_t window_ms; /**< unify window; > 0, or 0: 24 h for a
                                primary, and for a secondary the window
                                the last primary open recorded (24 h if
                                none) */
        size_t  filter_mb; /**< in-memory id filter, MiB; 0: 64 */
        bool    filter_exact; /**< the filter holds the ids themselves
                                   (~26 bytes each): a duplicate is known
                                   without a RocksDB read; else a Bloom
                                   filter (~7 bytes per id at the default
                                   size) whose "maybe" is read */
        aagw_store_clock_t *clock; /**< NULL: CLOCK_REALTIME */
        void               *clock_opaque;
};

/**
 * @brief Open (creating if needed) the store in @p sd's directory.
 * @p sd must stay open while the store is.  @p opts may be NULL (all
 * defaults).  Ids stored before are found at once; the in-memory filter
 * is rebuilt in the background and lookups read RocksDB until it is.
 * @returns the store, or NULL with the reason in @p errstr.
 */
aagw_store_t *aagw_store_open(const aagw_statedir_t *sd,
                              const struct aagw_store_opts *opts,
                              char *errstr, size_t errstr_size);

/**
 * @brief Open the store of @p state_dir read-only, as a RocksDB secondary
 * instance, for queries (aagw audit) while a gateway owns the directory or
 * after it stopped.  Takes no lock and writes nothing in @p state_dir (its
 * scratch files go to a private directory under $TMPDIR, removed at
 * close).  The view is the primary's state at open; call
 * aagw_store_catch_up() to move it forward.  Batches cannot be created.
 * With @p opts->window_ms 0 (or @p opts NULL) queries use the window the
 * gateway runs with (recorded by aagw_store_open(); 24 h if none was).
 * @returns the store, or NULL with the reason in @p errstr (e.g. no
 * database in @p state_dir).
 */
aagw_store_t *aagw_store_open_secondary(const char *state_dir,
                                        const struct aagw_store_opts *opts,
                                        char *errstr, size_t errstr_size);

/** @brief Secondary only: catch up with what the primary has written
 *  (a no-op on a primary).  Not concurrent with queries on @p st. */
aagw_err_t aagw_store_catch_up(aagw_store_t *st, char *errstr,
                               size_t errstr_size);

/** Stop the store's threads and close.  The not yet indexed tail stays in
 *  the journal and is replayed by the next open.  NULL is a no-op. */
void aagw_store_close(aagw_store_t *st);

/** A stored input position: what has been fully handled up to where. */
struct aagw_pos {
        int64_t next;     /**< next input offset to read */
        int64_t out_next; /**< the output partition's end when 'next' was
                               reached: a restart scans the output from
                               here to find records written after it */
};

/** One position to store, for aagw_store_pos_put(). */
struct aagw_pos_entry {
        const char     *scope; /**< e.g. "repl:east->west" */
        const char     *topic;
        int32_t         partition;
        struct aagw_pos pos;
};

/**
 * @brief Read the position of (@p scope, @p topic, @p partition).
 * @returns AAGW_OK, AAGW_ERR_NOENT if none was stored, or AAGW_ERR_STORE.
 */
aagw_err_t aagw_store_pos_get(aagw_store_t *st, const char *scope,
                              const char *topic, int32_t partition,
                              struct aagw_pos *pos, char *errstr,
                              size_t errstr_size);

/** Callback of aagw_store_pos_scopes(); return non-zero to stop. */
typedef int(aagw_scope_cb_t)(const char *scope, void *opaque);

/**
 * @brief Call @p cb once for each distinct scope with a stored position
 * that starts with @p prefix (e.g. "unify:" lists the sites whose unify
 * stage stored positions), in byte order.
 * @returns AAGW_OK or AAGW_ERR_STORE.
 */
aagw_err_t aagw_store_pos_scopes(aagw_store_t *st, const char *prefix,
                                 aagw_scope_cb_t *cb, void *opaque,
                                 char *errstr, size_t errstr_size);

/**
 * @brief Store @p cnt positions atomically (one WriteBatch).
 */
aagw_err_t aagw_store_pos_put(aagw_store_t *st,
                              const struct aagw_pos_entry *entries, size_t cnt,
                              char *errstr, size_t errstr_size);

/* ====================== UNIFY STATE (dedup, lww, audit) ================ *
 *
 * What the unify stage keeps, all in the same database so that one
 * WriteBatch can record "these ids were delivered, these versions won, this
 * is what happened, and the inputs are consumed up to here" atomically,
 * after the output topic acknowledged the records.
 *
 * Ids and entity keys are stored by their 128-bit XXH3 hash
 * (aagw_id_key()); the original bytes are kept in the audit log.
 * Seen ids and audit entries older than the window (opts.window_ms,
 * measured from when the entry was written, entry.time_ms) expire: lookups
 * ignore them at once and compaction removes them, so their disk is
 * bounded by traffic x window.  Last-write-wins winners do not expire:
 * one entry per entity key, kept so that a version older than the winner
 * is judged as such however late it arrives.  A
 * time_ms later than the store's clock is stored as the clock's "now" (a
 * window must not start in the future), a negative one as 0.
 *
 * The layout on disk (column families, the journal and its indexer, the
 * in-memory filter) is described at the top of dedup/dedup_int.h.
 */

/** Where and when an id was first delivered. */
struct aagw_seen {
        int64_t  time_ms;     /**< wall clock when delivered (window base) */
        uint64_t hlc;         /**< origin hybrid logical clock */
        char     site[AAGW_ALIAS_MAX + 1];   /**< site whose unify stage
                                                  delivered it */
        char     origin[AAGW_ALIAS_MAX + 1]; /**< site that first accepted
                                                  the event */
        char     topic[AAGW_TOPIC_MAX + 1];  /**< input topic it was read
                                                  from */
        int32_t  partition;
        int64_t  offset;
};

/**
 * @brief Look up @p n ids (16-byte keys).  found[i] tells whether key i is
 * stored and inside the window; @p seen (may be NULL) receives the entries
 * found (entries not found are left untouched).  A fast path (an in-memory
 * filter) answers most "never seen" lookups without reading RocksDB, and
 * never answers "absent" for a stored id; until it is rebuilt after an
 * open, every key is read.  Keys that pass the filter go to RocksDB as
 * one MultiGet per 256 keys.
 * @returns AAGW_OK, or AAGW_ERR_STORE for an I/O error or a corrupt stored
 * value (named in @p errstr); found[] is then unspecified.
 */
aagw_err_t aagw_store_seen_lookup(aagw_store_t *st,
                                  const uint8_t (*keys)[16], size_t n,
                                  bool *found, struct aagw_seen *seen,
                                  char *errstr, size_t errstr_size);

/* struct aagw_version and aagw_version_cmp(), the last-write-wins order,
 * are policy's (aagw_policy.h). */

/** The winning version of one entity. */
struct aagw_lww {
        int64_t             time_ms;   /**< when it won */
        struct aagw_version v;
        bool                tombstone; /**< the winner was a null value */
};

/** Look up the current winners of @p n entities (16-byte key hashes);
 *  semantics as aagw_store_seen_lookup(), without the filter, and
 *  without the window: a winner is found however old it is. */
aagw_err_t aagw_store_lww_lookup(aagw_store_t *st, const uint8_t (*keys)[16],
                                 size_t n, bool *found, struct aagw_lww *out,
                                 char *errstr, size_t errstr_size);

/** What the unify stage did with one record. */
typedef enum {
        AAGW_AUDIT_ACCEPTED   = 0, /**< delivered to the unified topic */
        AAGW_AUDIT_DROPPED    = 1, /**< dedup: id seen before */
        AAGW_AUDIT_SUPERSEDED = 2, /**< lww: older than the stored winner */
        AAGW_AUDIT_IDENTICAL  = 3, /**< lww: same version as the winner */
        AAGW_AUDIT_REJECTED   = 4, /**< bad provenance or id */
        AAGW_AUDIT_DIVERGED   = 5, /**< provenance path contradicts the
                                        topic name: the other sites on the
                                        path will not have the record (an
                                        extra entry; the record also gets
                                        its usual verdict) */
        AAGW_AUDIT__CNT
} aagw_audit_verdict_t;

/** @returns "accepted", "dropped", "superseded", "identical", "rejected",
 *  or "unknown". */
const char *aagw_audit_verdict_name(aagw_audit_verdict_t v);

/** Entity keys longer than this are kept truncated in the audit log (the
 *  by-key index always uses the hash of the whole key). */
#define AAGW_AUDIT_EKEY_MAX 1024

/** One audit log entry.  Pointers are borrowed for the call they are
 *  passed to (or, from a query callback, valid during the callback). */
struct aagw_audit {
        int64_t              time_ms;  /**< when the verdict was made */
        aagw_audit_verdict_t verdict;
        const char          *site;     /**< the unify stage's site */
        const char          *origin;
        const char          *topic;    /**< input topic */
        int32_t              partition;
        int64_t              offset;
        uint64_t             hlc;
        const void          *id;       /**< the global id, raw bytes */
        size_t               id_len;   /**< <= AAGW_ID_MAX */
        const void          *ekey;     /**< lww entity key, or NULL */
        size_t               ekey_len;
        bool                 ekey_truncated; /**< set by queries: the
                                                  stored key is the first
                                                  AAGW_AUDIT_EKEY_MAX bytes */
};

/**
 * @brief Audit entry @p a as the store keeps it (versioned bytes, the
 * time in a->time_ms), into the malloc()ed buffer @p *buf of @p *cap
 * bytes, grown as needed (both may start 0).
 * @returns the length, or -1: out of memory, or a value the store
 * refuses (@p *why says which, else NULL).
 */
ssize_t aagw_audit_encode(const struct aagw_audit *a, uint8_t **buf,
                          size_t *cap, const char **why);

/** A decoded audit entry: @p a points into the strings beside it and into
 *  the bytes decoded (which must outlive it). */
struct aagw_audit_decoded {
        struct aagw_audit a;
        char              site[AAGW_ALIAS_MAX + 1];
        char              origin[AAGW_ALIAS_MAX + 1];
        char              topic[AAGW_TOPIC_MAX + 1];
};

/** Decode what aagw_audit_encode() wrote.  @returns AAGW_OK, or
 *  AAGW_ERR_STORE with @p errstr (not an audit entry of a known
 *  version). */
aagw_err_t aagw_audit_decode(const void *v, size_t len,
                             struct aagw_audit_decoded *out, char *errstr,
                             size_t errstr_size);

/* ------------------------------- BATCHES ------------------------------- */

/**
 * One atomic write: seen ids, winners, audit entries and positions.
 * The add functions copy what they are given.  They fail only on bad
 * input (a string too long or not NUL-terminated, an id longer than
 * AAGW_ID_MAX, an unknown verdict) or memory; the first failure also
 * sticks to the batch, so that its commit fails and writes nothing.
 */
typedef struct aagw_store_batch aagw_store_batch_t;

/** @returns a new empty batch, or NULL (out of memory, or @p st is a
 *  secondary). */
aagw_store_batch_t *aagw_store_batch_new(aagw_store_t *st);
void aagw_store_batch_destroy(aagw_store_batch_t *b); /**< NULL: no-op */
aagw_err_t aagw_store_batch_seen(aagw_store_batch_t *b, const uint8_t key[16],
                                 const struct aagw_seen *seen);
aagw_err_t aagw_store_batch_lww(aagw_store_batch_t *b, const uint8_t key[16],
                                const struct aagw_lww *lww);
aagw_err_t aagw_store_batch_audit(aagw_store_batch_t *b,
                                  const struct aagw_audit *a);
aagw_err_t aagw_store_batch_pos(aagw_store_batch_t *b, const char *scope,
                                const char *topic, int32_t partition,
                                const struct aagw_pos *pos);
/** @returns the number of entries added since the last commit. */
size_t aagw_store_batch_size(const aagw_store_batch_t *b);
/**
 * @brief Write everything added since the last commit in one WriteBatch
 * (WAL, no fsync) and empty @p b for reuse, also on failure.  Once it
 * returns AAGW_OK, lookups from any thread see the batch.
 * @returns AAGW_OK, the sticky error of a failed add (nothing written),
 * or AAGW_ERR_STORE (nothing written; also when the tail indexer has been
 * failing and the tail is full, e.g. disk full).
 */
aagw_err_t aagw_store_batch_commit(aagw_store_batch_t *b, char *errstr,
                                   size_t errstr_size);

/* ------------------------------- QUERIES ------------------------------- */

/** Callback per audit entry, oldest first; return non-zero to stop. */
typedef int(aagw_audit_cb_t)(const struct aagw_audit *a, void *opaque);

/** Every audit entry of global id @p id (raw bytes) in the window. */
aagw_err_t aagw_store_audit_by_id(aagw_store_t *st, const void *id,
                                  size_t len, aagw_audit_cb_t *cb,
                                  void *opaque, char *errstr,
                                  size_t errstr_size);
/** Every audit entry of lww entity key @p key in the window. */
aagw_err_t aagw_store_audit_by_key(aagw_store_t *st, const void *key,
                                   size_t len, aagw_audit_cb_t *cb,
                                   void *opaque, char *errstr,
                                   size_t errstr_size);
/** Entries with time_ms >= @p since_ms, optionally one verdict only
 *  (@p verdict < 0: all). */
aagw_err_t aagw_store_audit_since(aagw_store_t *st, int64_t since_ms,
                                  int verdict, aagw_audit_cb_t *cb,
                                  void *opaque, char *errstr,
                                  size_t errstr_size);
/** Entries with @p from_ms <= time_ms < @p to_ms, optionally one verdict
 *  only (@p verdict < 0: all).  Memory stays bounded however many match. */
aagw_err_t aagw_store_audit_range(aagw_store_t *st, int64_t from_ms,
                                  int64_t to_ms, int verdict,
                                  aagw_audit_cb_t *cb, void *opaque,
                                  char *errstr, size_t errstr_size);

/* ---------------------------- MAINTENANCE ------------------------------ */

/* ============================== THE DECIDER ============================ *
 *
 * The decisions of one site's unify stage and the state behind them, with
 * no Kafka in sight (the stage's Kafka side is replicator/unify.c; they
 * meet through struct aagw_unify_state_ops, policy/aagw_unify_contract.h:
 * aagw_decider_ops below).
 *
 * Records are decided in epochs: one consumed batch each.  An epoch's
 * decisions (seen ids, new winners, audit entries), the input positions
 * it reached and the output offsets acknowledged for it go to the store
 * in ONE WriteBatch, once every record it accepted and every earlier
 * epoch is acknowledged.  Until then its ids and winners are pending, in
 * memory, and later records are checked against them first.  At start,
 * what a previous run delivered after its last commit is folded in
 * (aagw_decider_fold()), and re-reading such a record's input is a replay
 * (AAGW_UNIFY_REPLAYED), not a duplicate.  One thread uses a decider.
 */
typedef struct aagw_unify_state aagw_decider_t; /* the contract's opaque */

/** The decider as the unify stage's state (replicator/unify.c): every
 *  member is the aagw_decider_* function of the same name. */
extern const struct aagw_unify_state_ops aagw_decider_ops;

/** Decided but not committed epochs at most; the stage waits beyond. */
#define AAGW_DECIDER_EPOCHS 8

struct aagw_decider_conf {
        aagw_store_t *store;          /**< borrowed; outlives the decider */
        const char   *site;           /**< the unify stage's site */
        bool          audit_accepted; /**< dedup: audit deliveries too */
};

/** @returns a decider with epoch 1 open, or NULL with @p errstr. */
aagw_decider_t *aagw_decider_new(const struct aagw_decider_conf *c,
                                 char *errstr, size_t errstr_size);
/** Free; what is not committed is lost (a restart folds it in from the
 *  output).  NULL is a no-op. */
void aagw_decider_destroy(aagw_decider_t *d);

/**
 * @brief Decide @p n records in order, into the open epoch: each gets
 * r->outcome.  A record at input coordinates the fold found in the output
 * is REPLAYED (once) and gets no verdict.  The others need r->key
 * (aagw_unify_key() with the decider's site) unless rejected; those
 * decided before in a pending epoch are answered from memory, the rest
 * with one store lookup per kind.  @p now_ms stamps the seen entries,
 * winners and audit entries.  Every ACCEPTED record is in flight in epoch
 * @p *epoch until aagw_decider_acked() (or aagw_decider_lost()).
 * @returns 0, or -1 (store or memory) with @p errstr; the epoch then
 * never commits.
 */
int aagw_decider_decide(aagw_decider_t *d, struct aagw_unify_rec *recs,
                        size_t n, int64_t now_ms, unsigned *epoch, char *errstr,
                        size_t errstr_size);

/** A record of epoch @p ep is acknowledged at output @p out [@p part]
 *  @p off. */
void aagw_decider_acked(aagw_decider_t *d, unsigned ep, int out, int32_t part,
                        int64_t off);
/** A record of epoch @p ep will never be acknowledged (or was never
 *  sent): the epoch, and every later one, never commits. */
void aagw_decider_lost(aagw_decider_t *d, unsigned ep);

/**
 * @brief Record the @p n input positions @p reached in the open epoch;
 * with @p seal close it (an epoch where nothing happened stays open);
 * store the oldest sealed epochs whose records are all acknowledged, in
 * epoch order (how many in @p *committed); open the next epoch after a
 * seal.
 * @returns 1 if an epoch is open, 0 while the next one's slot is still
 * taken (commit, or wait for acknowledgements, and call again), -1 with
 * @p errstr.
 */
int aagw_decider_settle(aagw_decider_t *d, const struct aagw_unify_pos *reached,
                        size_t n, bool seal, unsigned *committed, char *errstr,
                        size_t errstr_size);

/** The stored position of an input (@p output false) or output
 *  partition.  @returns 0 with @p next, 1 if none is stored, -1 with
 *  @p errstr. */
int aagw_decider_pos(aagw_decider_t *d, bool output, const char *topic,
                     int32_t part, int64_t *next, char *errstr,
                     size_t errstr_size);

/** Register output @p topic with @p nparts partitions.  @returns its
 *  number for aagw_decider_acked(), or -1 (memory). */
int aagw_decider_output(aagw_decider_t *d, const char *topic, int32_t nparts);

/** Epochs sealed that are not committed. */
size_t aagw_decider_uncommitted(const aagw_decider_t *d);
/** Keys aagw_decider_decide() asked the store about, since the start (the
 *  rest were answered by a pending epoch). */
uint64_t aagw_decider_lookups(const aagw_decider_t *d);

/**
 * @brief Fold in one record found in the output at start (delivered by a
 * run whose epoch never committed): r describes it as it was decided (its
 * provenance, input coordinates, entity key); r->key is set here.  Its id
 * or version goes into the store with its audit entry at the next
 * aagw_decider_fold_commit() and its input coordinates into the replay
 * set.
 * @returns 0, or -1 (memory, store or a bad value) with @p errstr.
 */
int aagw_decider_fold(aagw_decider_t *d, struct aagw_unify_rec *r,
                      int64_t now_ms, char *errstr, size_t errstr_size);
/**
 * @brief Fold in one decision restored from a changelog (scale-out: the
 * state of an output partition this process was just given, written by
 * its previous owner inside committed transactions).  @p r carries the
 * key (r->key, as decided), the mode, and for dedup the input
 * coordinates, origin and hlc of the delivery; for lww the winning
 * version (prov's hlc, origin, id) and r->tombstone.  @p time_ms is when
 * it was decided (the window's base).  Additive: an id stays seen, a
 * winner only moves forward.  Stored at the next
 * aagw_decider_fold_commit(); no audit entry (the previous owner wrote
 * it in its own store), no replay set.
 * @returns 0, or -1 (memory, store) with @p errstr.
 */
int aagw_decider_restore(aagw_decider_t *d, const struct aagw_unify_rec *r,
                         int64_t time_ms, char *errstr, size_t errstr_size);
/**
 * @brief Forget every decision that is not committed: the pending ids and
 * winners of every epoch, their batches, and open a fresh epoch
 * (scale-out: the transaction that carried them was aborted, or the
 * partitions they belong to were lost; the new owner redoes them).
 * Delivery reports for the dropped epochs must not come after this.
 * @returns 0, or -1 (out of memory: the decider must not be used on).
 */
int aagw_decider_drop(aagw_decider_t *d);
/** Hand every audit entry decided from now on to @p fn too, encoded as
 *  aagw_audit_decode() reads it (NULL: stop).  Only decide()'s entries:
 *  a fold's are the previous run's, already handed over by it. */
void aagw_decider_audit_out(aagw_decider_t *d, aagw_unify_audit_fn *fn,
                            void *opaque);
/** Output @p topic [@p part] was scanned up to @p next. */
void aagw_decider_fold_out(aagw_decider_t *d, const char *topic, int32_t part,
                           int64_t next);
/** Store what was folded: if it is large (bounded memory on a long scan)
 *  or at the @p end of an output.  @returns 0 or -1 with @p errstr. */
int aagw_decider_fold_commit(aagw_decider_t *d, bool end, char *errstr,
                             size_t errstr_size);

/* ============================= AUDIT QUERIES =========================== */

/** Prefix of the unify stage's position scopes: "unify:SITE" (inputs) and
 *  "unify:SITE:out" (its output). */
#define AAGW_UNIFY_POS_PREFIX "unify:"

/** The position scope of @p site's unify stage: its inputs, or its
 *  @p output. */
void aagw_unify_pos_scope(const char *site, bool output, char *buf,
                          size_t size);

/** Most scopes (sites, or site and topic pairs) one query looks at. */
#define AAGW_AUDIT_SCOPES_MAX 64

/** Where a global id was first delivered, at one site. */
struct aagw_id_state {
        char             site[AAGW_ALIAS_MAX + 1];
        struct aagw_seen seen;
};

/**
 * @brief What the state holds of global id @p id (raw bytes): for each site
 * whose unify stage has state (stored positions) or whose audit log names
 * the id, its first delivery there, if still inside the window.
 * @returns AAGW_OK with up to @p max entries in @p out and their count in
 * @p n (0: unknown to every seen set), or an error with @p errstr.
 */
aagw_err_t aagw_audit_id_state(aagw_store_t *st, const void *id, size_t len,
                               struct aagw_id_state *out, size_t max,
                               size_t *n, char *errstr, size_t errstr_size);

/** The winner of an entity at one site and logical topic. */
struct aagw_key_state {
        char            site[AAGW_ALIAS_MAX + 1];
        char            topic[AAGW_TOPIC_MAX + 1];
        struct aagw_lww winner;
};

/**
 * @brief The current winners of entity key @p key: for each (site, logical
 * topic) its audit log names the key in, the stored winner.  Winners do
 * not expire; the audit entries that lead to them do, so a key whose last
 * audit entry left the window is not found.
 * @returns AAGW_OK with up to @p max entries and their count in @p n, or
 * an error with @p errstr.
 */
aagw_err_t aagw_audit_key_state(aagw_store_t *st, const void *key,
                                size_t len, struct aagw_key_state *out,
                                size_t max, size_t *n, char *errstr,
                                size_t errstr_size);

/** @returns the window in milliseconds the store was opened with (for a
 *  secondary opened with window_ms 0: the one the primary recorded). */
int64_t aagw_store_window_ms(const aagw_store_t *st);

/**
 * @brief Index the whole tail now and flush RocksDB's memtables (waits).
 * Not needed for durability (the journal is); for tests, tools and a
 * quick next open.  A no-op on a secondary.
 */
aagw_err_t aagw_store_flush(aagw_store_t *st, char *errstr,
                            size_t errstr_size);

/**
 * @brief aagw_store_flush(), then a manual compaction of every windowed
 * column family, which drops what has expired.  Compaction runs by itself
 * in the background; this is for tests and `aagw` maintenance commands.
 */
aagw_err_t aagw_store_compact(aagw_store_t *st, char *errstr,
                              size_t errstr_size);

/** Counters (monotonic) and gauges for metrics. */
struct aagw_store_stats {
        bool     filter_ready;     /**< gauge: the filter answers misses */
        size_t   filter_bytes;     /**< gauge: configured filter size */
        uint64_t filter_ids;       /**< gauge: ids in the live slices */
        uint64_t seen_lookups;     /**< keys asked to seen_lookup */
        uint64_t seen_filtered;    /**< ... answered "absent" by the filter */
        uint64_t seen_exact_hits;  /**< ... answered "seen" by the exact
                                        filter, without a read */
        uint64_t seen_tail_hits;   /**< ... found in the unindexed tail */
        uint64_t seen_reads;       /**< ... read from RocksDB */
        uint64_t seen_read_hits;   /**< ... and found there (in window) */
        uint64_t commits;
        uint64_t runs_indexed;     /**< tail runs written as SST files */
        uint64_t indexer_errors;
        uint64_t index_us;         /**< time the indexer spent on runs */
        uint64_t tail_wait_us;     /**< time commits waited for the indexer
                                        (the tail was full): back-pressure */
        size_t   tail_bytes;       /**< gauge: unindexed tail in memory */
        size_t   cache_usage;      /**< gauge: RocksDB block cache bytes */
        size_t   readers_bytes;    /**< gauge: RocksDB table readers (the
                                        seen ids' index and filter blocks),
                                        taken off the block cache's
                                        capacity */
};

/** Fill @p out with the current figures (cheap; no I/O). */
void aagw_store_stats_get(aagw_store_t *st, struct aagw_store_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_DEDUP_H */
