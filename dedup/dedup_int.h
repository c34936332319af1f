/*
 * dedup/dedup_int.h: shared by the files of dedup/ only.
 *
 * ------------------------------- LAYOUT --------------------------------
 *
 * One RocksDB in <state_dir>/db, column families:
 *
 *   default        meta: "seq" -> last commit sequence number (BE64),
 *                  "slice" -> epoch length of the seen keys, ms (BE64),
 *                  "window" -> the window of the last primary open, ms
 *                  (BE64): a secondary opened without a window (aagw
 *                  audit) uses it, so its queries cut where the
 *                  gateway's do
 *   positions      scope \0 topic \0 partition(BE32) -> next, out_next
 *   journal        commit seq (BE64) -> the commit's deferred entries
 *   seen           epoch (8) + id hash (16) -> seen value   (deferred)
 *   lww            entity key hash (16)    -> lww value     (deferred)
 *   audit          akey                    -> audit value
 *   audit_id       id hash (16) + akey     -> ""            (deferred)
 *   audit_key      ekey hash (16) + akey   -> ""            (deferred)
 *   audit_verdict  verdict (1) + akey      -> ""
 *
 * akey = time_ms (BE64) + commit seq (BE64) + index in commit (BE32), so
 * the audit log sorts oldest first.  Every value (or, for the index
 * families, key) carries its time, which the compaction filter reads.
 *
 * Seen ids are grouped by epoch (time / slice, slice = window / 7 when the
 * store was created): leveled compaction only ever merges inside the
 * newest epoch, and an epoch that has left the window is dropped as whole
 * files (DeleteFilesInRange + DeleteRange), not rewritten by compactions.
 * The in-memory filter has one slot per epoch, so it also tells a lookup
 * which epoch to read; without it (rebuilding after an open, a secondary)
 * a lookup reads every live epoch.
 *
 * Why a journal.  Ids are hashes: inserting them one by one into RocksDB's
 * skip-list memtable costs a few microseconds each (a cache miss per level,
 * measured ~250k/s on the reference VM), four times the whole per-id budget.
 * So the "deferred" families (those keyed by a hash) are not written per
 * commit.  A commit writes one journal record holding its deferred entries
 * (one memtable insert per batch, in the same WriteBatch as the audit log,
 * the positions and the meta seq: atomic), and appends the same bytes to
 * the in-memory tail, a run with a hash index that lookups consult.  When
 * the run is full it is sealed and the indexer thread sorts it, writes one
 * SST file per family (SstFileWriter, sequential) and ingests them; a few
 * seconds later (so that a secondary that read the MANIFEST before the
 * ingestion still finds the entries in the journal) it deletes the run's
 * journal range.  After a crash the open replays the journal into the tail
 * (re-ingesting a run twice is harmless: same keys, same values).
 *
 * The seen family's files are laid out for the lookups the filter lets
 * through (a duplicate, or a false positive), which land anywhere in the
 * window: no compression, one index and one Bloom filter block per file
 * held by the table reader (no block cache lookup per level probed), and
 * lookups read data blocks without filling the block cache (store.c,
 * make_options()).  Its data lives in L1 (no dynamic level sizes, L1
 * never full): only the newest epoch has L0 files, merged into its L1
 * files once per 32 runs.
 *
 * Memory (cache_mb = M): block cache M/4 less the table readers (index
 * and filter blocks of the seen ids; dedup_cache_account() shrinks the
 * cache's capacity by them, down to M/32), memtables M/4
 * (db_write_buffer_size), tail M/4 (two runs of M/8: the active one and
 * the one being indexed; a third, indexed run is kept for reuse but its
 * pages are those of the previous one), M/8 for the indexer's sort
 * arrays, SST writers and RocksDB's own bookkeeping, and M/8 for what
 * none of these accounts for (allocator slack, flushes and compactions in
 * progress, thread stacks, the program's pages).  The id filter is
 * filter_mb on top.
 *
 * ------------------------------- FILTER --------------------------------
 *
 * A time-sliced blocked Bloom filter (bloom.c): n slots of filter_mb / n
 * each, slot s holding the ids whose time falls in epoch e (e = time /
 * slice, s = e % n, n = ceil(window / slice) + 1: 8 for a new store).  The
 * epochs that overlap [now - window, now] are at most n, so a slot is
 * reused only when everything in it has expired.  An id sets 8 bits in one
 * 64-byte block of its slot (one cache line).  A lookup probes the live
 * slots and reads RocksDB only in the epochs whose slot answered "maybe".
 *
 * With unify.filter: exact, each slot also holds the keys themselves (a
 * table behind the Bloom slot, bloom.c), and a "maybe" is settled there:
 * a key found in an epoch wholly inside the window is a duplicate without
 * a read (the seen lookup asks RocksDB only when the caller wants the
 * first-seen record, or in the epoch the window's cutoff cuts, where the
 * stored time decides).
 */
#ifndef AAGW_DEDUP_INT_H
#define AAGW_DEDUP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <rocksdb/c.h>

#include "aagw_dedup.h"

/* --------------------------- BYTE ORDER ------------------------------- */

static inline void dedup_put_be64(uint8_t *p, uint64_t u) {
        for (int i = 7; i >= 0; i--, u >>= 8)
                p[i] = (uint8_t)u;
}
static inline uint64_t dedup_get_be64(const uint8_t *p) {
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
                u = (u << 8) | p[i];
        return u;
}
static inline void dedup_put_be32(uint8_t *p, uint32_t u) {
        p[0] = (uint8_t)(u >> 24);
        p[1] = (uint8_t)(u >> 16);
        p[2] = (uint8_t)(u >> 8);
        p[3] = (uint8_t)u;
}
static inline uint32_t dedup_get_be32(const uint8_t *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
               (uint32_t)p[2] << 8 | p[3];
}
static inline void dedup_put_be16(uint8_t *p, uint16_t u) {
        p[0] = (uint8_t)(u >> 8);
        p[1] = (uint8_t)u;
}
static inline uint16_t dedup_get_be16(const uint8_t *p) {
        return (uint16_t)(p[0] << 8 | p[1]);
}

/* --------------------------- GROWING BUFFER ---------------------------- */

struct dedup_buf {
        uint8_t *p;
        size_t   len, cap;
};

/* Make room for 'n' more bytes.  Returns 0, or -1 if out of memory. */
int  dedup_buf_reserve(struct dedup_buf *b, size_t n);
void dedup_buf_free(struct dedup_buf *b);

/* ------------------------------- CODEC --------------------------------- */

/* Journal entry kinds (on disk: never renumber). */
enum {
        DK_SEEN      = 1,
        DK_LWW       = 2,
        DK_AUDIT_ID  = 3,
        DK_AUDIT_KEY = 4,
        DK__CNT      = 5
};

#define DEDUP_VALUE_V1 1
#define DEDUP_AKEY_LEN 20    /* time 8 + seq 8 + idx 4 */
#define DEDUP_SEENKEY_LEN 24 /* epoch 8 + id hash 16 */
#define DEDUP_IDXKEY_LEN (16 + DEDUP_AKEY_LEN)
#define DEDUP_ENTRY_HDR 4 /* kind, klen, vlen (BE16) */

/* One deferred entry: [kind][klen][vlen BE16][key][value]. */
struct dedup_entry {
        int            kind;
        const uint8_t *key;
        size_t         klen;
        const uint8_t *val;
        size_t         vlen;
};

/* Parse the entry at 'p' (before 'end').  Returns the next entry's
 * position, or NULL if the bytes are not a well-formed entry. */
const uint8_t *dedup_entry_next(const uint8_t *p, const uint8_t *end,
                                struct dedup_entry *e);
/* Append an entry to 'b'.  Returns 0, or -1 if out of memory. */
int dedup_entry_put(struct dedup_buf *b, int kind, const uint8_t *key,
                    size_t klen, const uint8_t *val, size_t vlen);

/* Encoders append to 'b' and return 0, -1 out of memory, -2 bad input
 * (with the reason in 'why'). */
int dedup_seen_encode(struct dedup_buf *b, const struct aagw_seen *s,
                      int64_t time_ms, const char **why);
int dedup_lww_encode(struct dedup_buf *b, const struct aagw_lww *l,
                     int64_t time_ms, const char **why);
int dedup_audit_encode(struct dedup_buf *b, const struct aagw_audit *a,
                       int64_t time_ms, const char **why);

/* Decoders return 0, or -1 with a description in 'errstr'. */
int dedup_value_time(const uint8_t *v, size_t len, int64_t *time_ms);
int dedup_seen_decode(const uint8_t *v, size_t len, struct aagw_seen *out,
                      char *errstr, size_t errstr_size);
int dedup_lww_decode(const uint8_t *v, size_t len, struct aagw_lww *out,
                     char *errstr, size_t errstr_size);

/* An audit entry decoded from a value (struct aagw_audit_decoded: valid
 * while the value is). */
int dedup_audit_decode(const uint8_t *v, size_t len,
                       struct aagw_audit_decoded *out, char *errstr,
                       size_t errstr_size);

/* Time carried by an entry of column family 'cf' (key or value), for the
 * compaction filter.  Returns 0, or -1 if it cannot be read. */
int dedup_entry_time(int cf, const uint8_t *key, size_t klen,
                     const uint8_t *val, size_t vlen, int64_t *time_ms);

/* "0123..." hex of the first 'n' bytes of 'p' into 'out' (2n+1). */
void dedup_hex(const uint8_t *p, size_t n, char *out);

/* ------------------------------- FILTER -------------------------------- */

/* A new store cuts the window into FILTER_SLOTS - 1 slices (its epoch
 * length, kept in the meta "slice"); a store reopened with a longer window
 * needs more slots, up to FILTER_SLOTS_MAX (a bit mask per key). */
#define FILTER_SLOTS 8
#define FILTER_SLOTS_MAX 64

/* The epoch of time 't': floor(t / slice), 0 for t < 0. */
static inline int64_t dedup_epoch(int64_t t, int64_t slice_ms) {
        return (t < 0 ? 0 : t) / slice_ms;
}

struct dedup_filter;

/* Slots needed for 'window_ms' in epochs of 'slice_ms', or -1 if more than
 * FILTER_SLOTS_MAX. */
int dedup_filter_slots(int64_t window_ms, int64_t slice_ms);
/* 'bytes' of memory (rounded down to whole blocks or entries): a Bloom
 * filter, or with 'exact' a table of the keys themselves (bloom.c).
 * Returns NULL if out of memory or too many slots.  Not thread-safe: the
 * store locks. */
struct dedup_filter *dedup_filter_new(size_t bytes, int64_t window_ms,
                                      int64_t slice_ms, bool exact);
void                 dedup_filter_destroy(struct dedup_filter *f);
/* Add 'n' keys with their times (ms) at store time 'now'.  Keys whose
 * time is outside the window are skipped. */
void dedup_filter_add(struct dedup_filter *f, const uint8_t (*keys)[16],
                      const int64_t *times, size_t n, int64_t now);
/* slots[i] = bit mask of the slots that may hold key i (live ones only);
 * sure[i] (may be NULL for a Bloom filter) = those of them that certainly
 * do (exact mode only, else 0). */
void dedup_filter_probe(const struct dedup_filter *f, const uint8_t (*keys)[16],
                        size_t n, int64_t now, uint64_t *slots,
                        uint64_t *sure);
bool dedup_filter_is_exact(const struct dedup_filter *f);
/* The epoch slot 'slot' holds (-1: none). */
int64_t  dedup_filter_slot_epoch(const struct dedup_filter *f, int slot);
size_t   dedup_filter_bytes(const struct dedup_filter *f);
uint64_t dedup_filter_ids(const struct dedup_filter *f, int64_t now);

/* -------------------------------- TAIL --------------------------------- */

/* A run: journal-encoded entries in commit order plus a hash index of its
 * seen and lww entries (the newest entry of a key wins). */
struct dedup_run {
        uint8_t  *buf;
        size_t    len, cap;
        uint32_t *slots; /* buf offset + 1, 0 = empty */
        size_t    nslots, nidx;
        uint64_t  seq_lo, seq_hi; /* journal seqs in the run, 0: none */
};

/* Returns 0, or -1 if out of memory. */
int  dedup_run_init(struct dedup_run *r, size_t cap);
void dedup_run_free(struct dedup_run *r);
/* Empty 'r', keeping its memory. */
void dedup_run_reset(struct dedup_run *r);
/* Make room for 'len' bytes holding up to 'nkeys' indexed entries, so
 * that the next append of that size cannot fail.  0, or -1 (memory). */
int dedup_run_reserve(struct dedup_run *r, size_t len, size_t nkeys);
/* Append journal record 'p' of 'len' bytes with seq 'seq' (0: none).
 * Returns 0, or -1 if the record is malformed (nothing appended). */
int dedup_run_append(struct dedup_run *r, const uint8_t *p, size_t len,
                     uint64_t seq);
/* The value of the newest entry of (kind, key), or NULL. */
const uint8_t *dedup_run_get(const struct dedup_run *r, int kind,
                             const uint8_t key[16], size_t *vlen);

/* -------------------------------- STORE -------------------------------- */

enum {
        CF_DEFAULT,
        CF_POSITIONS,
        CF_JOURNAL,
        CF_SEEN,
        CF_LWW,
        CF_AUDIT,
        CF_AUDIT_ID,
        CF_AUDIT_KEY,
        CF_AUDIT_VERDICT,
        CF_COUNT
};
extern const char *const dedup_cf_names[CF_COUNT];
/* The column family of a journal entry kind. */
int dedup_kind_cf(int kind);

struct dedup_cfilter {
        aagw_store_t *st;
        int           cf;
};

/* A sealed run waiting for its journal range to be deleted. */
struct dedup_pending {
        uint64_t seq_lo, seq_hi;
        int64_t  due_mono_ms;
};
#define DEDUP_PENDING_MAX 64

struct aagw_store {
        char   *dir;    /* state dir */
        char   *dbpath; /* <dir>/db */
        char   *secdir; /* secondary's scratch dir, or NULL */
        bool    secondary;
        int64_t window_ms;
        bool    window_default; /* opened with window_ms 0 (24 h) */
        int64_t slice_ms; /* epoch length of the seen keys (meta) */
        size_t  cache_mb, filter_mb, run_cap;
        bool    filter_exact;

        aagw_store_clock_t *clock;
        void               *clock_opaque;
        _Atomic int64_t     now_max;

        rocksdb_t                           *db;
        rocksdb_options_t                   *dbopts;
        rocksdb_options_t                   *cfopts[CF_COUNT];
        rocksdb_block_based_table_options_t *topts_bloom, *topts_plain,
            *topts_seen;
        rocksdb_filterpolicy_t              *bloom; /* owned by topts */
        rocksdb_cache_t                     *cache;
        size_t cache_cap;        /* block cache share of cache_mb */
        _Atomic size_t readers_mem; /* table readers, last accounted */
        bool   cache_warned;     /* readers outgrew the share (logged) */
        rocksdb_compactionfilter_t          *cfilter[CF_COUNT];
        struct dedup_cfilter                 cfstate[CF_COUNT];
        rocksdb_writeoptions_t              *wopts;
        rocksdb_readoptions_t               *ropts; /* point reads */
        rocksdb_readoptions_t               *sropts; /* seen lookups */
        rocksdb_envoptions_t                *envopts;
        rocksdb_ingestexternalfileoptions_t *ingopts;
        rocksdb_flushoptions_t              *flushopts;
        rocksdb_column_family_handle_t      *cf[CF_COUNT];

        /* 'mu' guards everything below it; 'commit_mu' serializes
         * commits (held across the RocksDB write, never taken under
         * 'mu'). */
        pthread_mutex_t commit_mu;
        pthread_mutex_t mu;
        pthread_cond_t  cond; /* indexer work / run indexed / stop */
        bool            locks_init;

        uint64_t             seq;    /* last commit seq (commit_mu) */
        struct dedup_run    *active; /* never NULL on a primary */
        struct dedup_run    *sealed; /* being indexed, or NULL */
        struct dedup_run    *spare;  /* an indexed run kept for reuse */
        struct dedup_filter *filter; /* NULL on a secondary */
        bool                 filter_ready;
        bool                 stopping;
        bool                 ix_failed;
        char                 ix_err[512];
        struct dedup_pending pending[DEDUP_PENDING_MAX];
        size_t               npending;
        int64_t              expired_upto, expired_epoch; /* indexer */
        pthread_t            ix_thread, rb_thread;
        bool                 ix_started, rb_started;
        struct dedup_buf     jbuf; /* commit scratch (commit_mu) */

        _Atomic uint64_t n_lookups, n_filtered, n_exact_hits, n_tail_hits,
            n_reads, n_read_hits, n_commits, n_runs, n_ix_errors, us_tail_wait, us_index;
};

/* CLOCK_MONOTONIC in microseconds (for the stats' durations). */
int64_t dedup_mono_us(void);

/* A position's key (returns its length, 0 if too long for 'size') and
 * 16-byte value. */
size_t dedup_pos_encode(char *key, size_t size, const char *scope,
                        const char *topic, int32_t partition,
                        const struct aagw_pos *pos, uint8_t val[16]);

/* Take the table readers' memory (the seen family's index and filter
 * blocks, outside the block cache) off the block cache's capacity, so
 * that cache_mb stays a bound.  Cheap; called after each indexed run. */
void dedup_cache_account(aagw_store_t *st);

/* The store's "now": the clock, never going back. */
int64_t dedup_now(aagw_store_t *st);

/* RocksDB's malloc()ed message in 'err' -> errstr; frees it.  Returns 0
 * if there was no error, else -1. */
int dedup_take_err(char *err, const char *op, char *errstr, size_t errstr_size);

/* indexer.c */
int  dedup_replay_journal(aagw_store_t *st, char *errstr, size_t errstr_size);
int  dedup_index_run(aagw_store_t *st, struct dedup_run *r, char *errstr,
                     size_t errstr_size);
int  dedup_delete_journal(aagw_store_t *st, uint64_t lo, uint64_t hi,
                          char *errstr, size_t errstr_size);
int  dedup_threads_start(aagw_store_t *st, char *errstr, size_t errstr_size);
void dedup_threads_stop(aagw_store_t *st);
/* Seal the active run (caller holds 'mu' and 'commit_mu'): waits while
 * another run is being indexed.  Returns 0, or -1 with the indexer's
 * error if it has been failing. */
int dedup_seal_locked(aagw_store_t *st, char *errstr, size_t errstr_size);

#endif /* AAGW_DEDUP_INT_H */
