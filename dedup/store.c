/*
 * dedup/store.c: the RocksDB database of a state directory: options,
 * open (primary and secondary), close, positions, maintenance, stats.
 *
 * The layout and the reasons for it are at the top of dedup_int.h; the
 * unify state lives in lookup.c (lookups, batches), audit.c (queries),
 * indexer.c (journal, tail indexer, filter rebuild), filter.c, tail.c and
 * codec.c.
 *
 * Positions: keys are scope '\0' topic '\0' partition (4 bytes,
 * big-endian) so one scope's entries sort together; values are fixed-size
 * big-endian.
 */
#include "dedup_int.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DAY_MS (24 * 3600 * INT64_C(1000))

const char *const dedup_cf_names[CF_COUNT] = {
    "default", "positions", "journal",   "seen",         "lww",
    "audit",   "audit_id",  "audit_key", "audit_verdict"};

int dedup_kind_cf(int kind) {
        switch (kind) {
        case DK_SEEN:
                return CF_SEEN;
        case DK_LWW:
                return CF_LWW;
        case DK_AUDIT_ID:
                return CF_AUDIT_ID;
        case DK_AUDIT_KEY:
                return CF_AUDIT_KEY;
        default:
                return -1;
        }
}

/* Column families whose entries expire with the window. */
/* Column families whose entries expire with the window.  Not lww: a
 * forgotten winner would let an older version of its entity win again
 * when a late or replayed copy arrives (last-write-wins going backwards),
 * so winners are kept for good, one entry per entity key. */
static bool cf_windowed(int cf) {
        return cf == CF_SEEN || cf == CF_AUDIT ||
               cf == CF_AUDIT_ID || cf == CF_AUDIT_KEY ||
               cf == CF_AUDIT_VERDICT;
}

/* Column families keyed by a hash: filled by the indexer (SST ingestion),
 * Bloom filters; universal compaction except for the epoch-grouped seen
 * ids (leveled: merges stay inside the newest epoch). */
static bool cf_hashed(int cf) {
        return cf == CF_SEEN || cf == CF_LWW || cf == CF_AUDIT_ID ||
               cf == CF_AUDIT_KEY;
}

/* RocksDB hands us a malloc()ed message in 'err'; it is ours to free. */
int dedup_take_err(char *err, const char *op, char *errstr,
                   size_t errstr_size) {
        if (!err)
                return 0;
        /* ENOSPC: RocksDB names the file (under the state dir); say what
         * it means for aagw. */
        snprintf(errstr, errstr_size, "%s: %s%s", op, err,
                 strstr(err, "No space left")
                     ? " (the state dir's file system is full: nothing past "
                       "the stored state counts as done; free space and "
                       "restart aagw)"
                     : "");
        rocksdb_free(err);
        return -1;
}

static int64_t wall_ms(void *opaque) {
        struct timespec ts;
        (void)opaque;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t dedup_mono_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t dedup_now(aagw_store_t *st) {
        int64_t t    = st->clock(st->clock_opaque);
        int64_t prev = atomic_load_explicit(&st->now_max, memory_order_relaxed);
        while (t > prev &&
               !atomic_compare_exchange_weak(&st->now_max, &prev, t))
                ;
        return t > prev ? t : prev;
}

/* ------------------------- COMPACTION FILTER ------------------------- */

/* Drop an entry whose time is before the window.  Entries whose time
 * cannot be read are kept: we do not delete what we do not understand. */
static unsigned char cfilter_filter(void *state, int level, const char *key,
                                    size_t klen, const char *val, size_t vlen,
                                    char **new_val, size_t *new_vlen,
                                    unsigned char *changed) {
        struct dedup_cfilter *cs = state;
        int64_t               t;
        (void)level;
        (void)new_val;
        (void)new_vlen;
        *changed = 0;
        if (dedup_entry_time(cs->cf, (const uint8_t *)key, klen,
                             (const uint8_t *)val, vlen, &t))
                return 0;
        return t < dedup_now(cs->st) - cs->st->window_ms;
}

static const char *cfilter_name(void *state) {
        (void)state;
        return "aagw.window";
}

static void cfilter_destroy(void *state) {
        (void)state; /* the state lives in the store */
}

/* ------------------------------ OPTIONS ------------------------------ */

/* Everything RocksDB allocates is bounded by cache_mb (M): block cache
 * M/4, from which the seen family's table readers are deducted (see
 * dedup_cache_account()), all memtables M/4 via db_write_buffer_size.  The
 * tail takes M/4 (dedup_int.h).  M/8 is left to what no part accounts
 * for: allocator slack, the memory of flushes and compactions in
 * progress, thread stacks and the program's own pages, which all count in
 * the process's resident set (at 100M ids with cache_mb 256 the peak was
 * 7 MiB over cache_mb + filter_mb while the block cache had 3M/8, and
 * 2-9 MiB under it with 5M/16; docs/benchmarks.md).
 *
 * The seen family is read by lookups that the id filter let through (a
 * duplicate, or one of its rare false positives), each a random key, so
 * its read path is as short as RocksDB allows (measured with bench_dedup
 * --probe at 10M ids in the window: 9.0 us per stored id before, 4.9 us
 * after; docs/benchmarks.md):
 *  - no compression at any level: a read is one pread of the block from
 *    the page cache, no decompression (the data blocks are not worth
 *    caching: the reads are uniform over the whole window, and lookups
 *    read with fill_cache off);
 *  - index and filter blocks unpartitioned and held by the table readers,
 *    not the block cache: no cache lookup, no shard lock, no LRU update
 *    per level probed (L0 files of the newest epoch, each with its Bloom
 *    filter); their memory is taken off the block cache's capacity;
 *  - no Bloom filter in the last level (optimize_filters_for_hits): the id
 *    filter sends it (nearly) only ids that are there.
 * The other hashed families (lww, audit by id / key) keep partitioned
 * index and filter blocks charged to the block cache: only lww is read
 * per record, and not at the seen family's rate.
 *
 * Compression: the other hashed families are written by the indexer;
 * their keys are random, so only the last level / sorted run (where the
 * data stays) is compressed.  The journal is transient and not
 * compressed. */
/* Levels of the seen family: 2 (L0 and L1) for a store created by this
 * version, so that its data is in the last level, whose files carry no
 * Bloom filter (optimize_filters_for_hits): with more levels, ingestion
 * puts each epoch's first runs in L6..L2 (the lowest levels they do not
 * overlap), L1 is not the last level, and its filters held ~10 bits per
 * id in the table readers (~100 MiB at 100M ids).  A state dir written
 * with more levels keeps them (RocksDB cannot open it with fewer); its
 * OPTIONS file says how many. */
static int seen_num_levels(const aagw_store_t *st) {
        rocksdb_env_t      *env = rocksdb_create_default_env();
        rocksdb_options_t  *dbo = NULL, **cfo = NULL;
        char              **names = NULL, *err = NULL;
        size_t              n = 0;
        int                 levels = 2;

        rocksdb_load_latest_options(st->dbpath, env, true, NULL, &dbo, &n,
                                    &names, &cfo, &err);
        if (err) {
                rocksdb_free(err); /* no OPTIONS file: a new store */
        } else {
                for (size_t i = 0; i < n; i++)
                        if (!strcmp(names[i], dedup_cf_names[CF_SEEN]) &&
                            rocksdb_options_get_num_levels(cfo[i]) > 2)
                                levels = rocksdb_options_get_num_levels(cfo[i]);
                rocksdb_load_latest_options_destroy(dbo, names, cfo, n);
        }
        rocksdb_env_destroy(env);
        return levels;
}

static int make_options(aagw_store_t *st, char *errstr, size_t errstr_size) {
        size_t M     = st->cache_mb << 20;
        size_t cache = M / 4;
        int    shard = 0;

        /* Shards of at least 1 MiB (metadata blocks are partitioned, so
         * none is larger than a few KiB), at most 64 of them: the lookup
         * thread must not queue on a shard lock behind compactions. */
        while (shard < 6 && (cache >> (shard + 1)) >= ((size_t)1 << 20))
                shard++;
        rocksdb_lru_cache_options_t *lo = rocksdb_lru_cache_options_create();
        rocksdb_lru_cache_options_set_capacity(lo, cache);
        rocksdb_lru_cache_options_set_num_shard_bits(lo, shard);
        st->cache     = rocksdb_cache_create_lru_opts(lo);
        st->cache_cap = cache;
        rocksdb_lru_cache_options_destroy(lo);

        for (int b = 0; b < 2; b++) {
                rocksdb_block_based_table_options_t *t =
                    rocksdb_block_based_options_create();
                rocksdb_block_based_options_set_block_cache(t, st->cache);
                rocksdb_block_based_options_set_cache_index_and_filter_blocks(
                    t, 1);
                rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(
                    t, 1);
                rocksdb_block_based_options_set_pin_top_level_index_and_filter(
                    t, 1);
                rocksdb_block_based_options_set_index_type(
                    t,
                    rocksdb_block_based_table_index_type_two_level_index_search);
                if (b == 0) {
                        /* Point lookups: a hash index in each data block
                         * saves the binary search's cache misses. */
                        rocksdb_block_based_options_set_data_block_index_type(
                            t,
                            rocksdb_block_based_table_data_block_index_type_binary_search_and_hash);
                        rocksdb_block_based_options_set_data_block_hash_ratio(
                            t, 0.75);
                        st->bloom = rocksdb_filterpolicy_create_bloom_full(10);
                        rocksdb_block_based_options_set_filter_policy(
                            t, st->bloom);
                        rocksdb_block_based_options_set_partition_filters(t, 1);
                        st->topts_bloom = t;
                } else {
                        st->topts_plain = t;
                }
        }
        /* The seen family (see above): index and filter in the table
         * readers (cache_index_and_filter_blocks off, the default), one
         * binary-search index and one full filter per file. */
        st->topts_seen = rocksdb_block_based_options_create();
        rocksdb_block_based_options_set_block_cache(st->topts_seen, st->cache);
        rocksdb_block_based_options_set_data_block_index_type(
            st->topts_seen,
            rocksdb_block_based_table_data_block_index_type_binary_search_and_hash);
        rocksdb_block_based_options_set_data_block_hash_ratio(st->topts_seen,
                                                              0.75);
        if (st->filter_exact) {
                /* The exact id filter sends a seen id to RocksDB only for
                 * its first-seen record, in the epoch the window's cutoff
                 * cuts, or when a slot is full: rarely.  Bloom filters in
                 * the files would not pay for their memory, and bigger
                 * blocks make the index, held by the table readers, a
                 * quarter of the size (the readers held 12 MB instead of
                 * 79 at 100M ids). */
                rocksdb_block_based_options_set_block_size(st->topts_seen,
                                                           16 << 10);
        } else {
                rocksdb_block_based_options_set_filter_policy(
                    st->topts_seen, rocksdb_filterpolicy_create_bloom_full(10));
        }

        rocksdb_options_t *o = rocksdb_options_create();
        st->dbopts           = o;
        rocksdb_options_set_create_if_missing(o, !st->secondary);
        rocksdb_options_set_create_missing_column_families(o, !st->secondary);
        rocksdb_options_set_db_write_buffer_size(o, M / 4);
        rocksdb_options_set_max_total_wal_size(
            o, M / 2 > ((size_t)64 << 20) ? M / 2 : ((size_t)64 << 20));
        rocksdb_options_set_max_background_jobs(o, 2);
        /* Headers only.  Debian's librocksdb 7.8 keeps its assertions:
         * once a write to its LOG failed (the state dir's file system is
         * full), the next message logged there aborts the process
         * (WritableFileWriter's sync_without_flush_called_), and a full
         * disk is exactly when it logs.  aagw reports store errors
         * itself, with the state dir named. */
        rocksdb_options_set_info_log_level(o, 5 /* HEADER */);
        rocksdb_options_set_keep_log_file_num(o, 2);
        rocksdb_options_set_compression(o, rocksdb_lz4_compression);
        rocksdb_options_set_bytes_per_sync(o, (uint64_t)1 << 20);
        /* Obsolete files are deleted by a background thread, never by a
         * lookup or a commit that drops the last reference (an unlink can
         * take milliseconds on a file system mounted with discard). */
        rocksdb_options_set_avoid_unnecessary_blocking_io(o, 1);
        if (st->secondary)
                rocksdb_options_set_max_open_files(o, -1);

        for (int cf = 0; cf < CF_COUNT; cf++) {
                rocksdb_options_t *c = rocksdb_options_create_copy(o);
                size_t             wb;
                st->cfopts[cf] = c;
                if (cf_hashed(cf)) {
                        /* Filled by SST ingestion: the memtable stays
                         * empty. */
                        wb = M / 64;
                        rocksdb_options_set_compression(c,
                                                        rocksdb_no_compression);
                        if (cf == CF_SEEN) {
                                rocksdb_options_set_block_based_table_factory(
                                    c, st->topts_seen);
                                rocksdb_options_set_bottommost_compression(
                                    c, rocksdb_no_compression);
                                /* Epochs are key ranges that only grow
                                 * while they are the newest, then wait to
                                 * be dropped whole: one level below L0
                                 * (L1, never full; the only one in a new
                                 * store, see seen_num_levels()), so the
                                 * newest epoch's
                                 * L0 files merge into its L1 files once
                                 * per 32 runs, instead of cascading down
                                 * the levels of dynamic level sizes (with
                                 * 30 runs per epoch, as at 100M ids:
                                 * compaction CPU -25%, docs/benchmarks.md);
                                 * L1 is then the last level and its files
                                 * carry no Bloom filter.
                                 * Only the newest epoch has L0 files and
                                 * only its lookups probe them (in-memory
                                 * Bloom filters, see above). */
                                rocksdb_options_set_num_levels(
                                    c, seen_num_levels(st));
                                rocksdb_options_set_level_compaction_dynamic_level_bytes(
                                    c, 0);
                                rocksdb_options_set_max_bytes_for_level_base(
                                    c, (uint64_t)1 << 50);
                                rocksdb_options_set_level0_file_num_compaction_trigger(
                                    c, 32);
                                rocksdb_options_set_level0_slowdown_writes_trigger(
                                    c, 96);
                                rocksdb_options_set_level0_stop_writes_trigger(
                                    c, 128);
                                /* The id filter sends RocksDB (nearly) only
                                 * ids that are there: the last level's
                                 * Bloom filters would only take memory. */
                                rocksdb_options_set_optimize_filters_for_hits(
                                    c, 1);
                        } else {
                                rocksdb_options_set_block_based_table_factory(
                                    c, st->topts_bloom);
                                rocksdb_options_set_compaction_style(
                                    c, rocksdb_universal_compaction);
                                rocksdb_options_set_bottommost_compression(
                                    c, rocksdb_lz4_compression);
                        }
                } else {
                        wb = cf == CF_JOURNAL || cf == CF_AUDIT ? M / 16
                                                                : M / 64;
                        if (cf == CF_JOURNAL) {
                                rocksdb_options_set_compression(
                                    c, rocksdb_no_compression);
                                /* Journal entries live a few seconds:
                                 * compact L0 late (most of what it holds
                                 * is deleted by then; files below L0 are
                                 * dropped whole by DeleteFilesInRange), and
                                 * never stall writes on their count. */
                                rocksdb_options_set_level0_file_num_compaction_trigger(
                                    c, 8);
                                rocksdb_options_set_level0_slowdown_writes_trigger(
                                    c, 1 << 20);
                                rocksdb_options_set_level0_stop_writes_trigger(
                                    c, 1 << 20);
                        }
                        rocksdb_options_set_block_based_table_factory(
                            c, st->topts_plain);
                        rocksdb_options_set_level_compaction_dynamic_level_bytes(
                            c, 1);
                }
                rocksdb_options_set_write_buffer_size(
                    c, wb < ((size_t)256 << 10) ? (size_t)256 << 10 : wb);
                rocksdb_options_set_max_write_buffer_number(c, 2);
                if (cf_windowed(cf) && !st->secondary) {
                        st->cfstate[cf].st = st;
                        st->cfstate[cf].cf = cf;
                        st->cfilter[cf]    = rocksdb_compactionfilter_create(
                               &st->cfstate[cf], cfilter_destroy, cfilter_filter,
                               cfilter_name);
                        rocksdb_options_set_compaction_filter(c,
                                                              st->cfilter[cf]);
                }
        }
        (void)errstr;
        (void)errstr_size;
        return 0;
}

/* The block cache's capacity is its share of cache_mb less what the table
 * readers hold, down to an eighth of the share: past that (a window of
 * hundreds of millions of ids with a small cache_mb) the readers are
 * over the budget, which is logged once and shows in the stats. */
void dedup_cache_account(aagw_store_t *st) {
        uint64_t total = 0, v;
        size_t   cap, floor = st->cache_cap / 8;

        if (!st->db || !st->cache)
                return;
        for (int cf = 0; cf < CF_COUNT; cf++)
                if (st->cf[cf] &&
                    !rocksdb_property_int_cf(st->db, st->cf[cf],
                                             "rocksdb.estimate-table-readers-mem",
                                             &v))
                        total += v;
        atomic_store(&st->readers_mem, (size_t)total);
        cap = total + floor < st->cache_cap ? st->cache_cap - (size_t)total
                                            : floor;
        if (cap == floor && !st->cache_warned) {
                st->cache_warned = true;
                aagw_log(AAGW_LOG_WARN, "DEDUP",
                         "table readers hold %" PRIu64 " MiB (index and "
                         "filter blocks of the seen ids): more than the "
                         "block cache's %zu MiB share of cache_mb; memory "
                         "exceeds cache_mb by up to %" PRIu64 " MiB",
                         total >> 20, st->cache_cap >> 20,
                         (total + floor - st->cache_cap) >> 20);
        }
        if (cap != rocksdb_cache_get_capacity(st->cache))
                rocksdb_cache_set_capacity(st->cache, cap);
}

/* Every windowed family is compacted at least once per window (at least
 * daily), so the compaction filter sees files that nothing else would
 * rewrite (the oldest sorted run, trivially moved audit files). */
static void set_periodic_compaction(aagw_store_t *st) {
        char        val[32];
        const char *key = "periodic_compaction_seconds";
        const char *v   = val;
        int64_t     w   = st->window_ms < DAY_MS ? DAY_MS : st->window_ms;

        snprintf(val, sizeof(val), "%" PRId64, w / 1000);
        for (int cf = 0; cf < CF_COUNT; cf++) {
                char *err = NULL;
                if (!cf_windowed(cf) || !st->cf[cf])
                        continue;
                rocksdb_set_options_cf(st->db, st->cf[cf], 1, &key, &v, &err);
                if (err) {
                        aagw_log(AAGW_LOG_WARN, "DEDUP",
                                 "%s: cannot set %s: %s", dedup_cf_names[cf],
                                 key, err);
                        rocksdb_free(err);
                }
        }
}

/* -------------------------------- OPEN --------------------------------- */

static aagw_store_t *store_new(const char *dir, const struct aagw_store_opts *o,
                               bool secondary, char *errstr,
                               size_t errstr_size) {
        aagw_store_t *st = calloc(1, sizeof(*st));

        if (!st) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        st->secondary      = secondary;
        st->cache_mb       = o && o->cache_mb ? o->cache_mb : 64;
        st->filter_mb      = o && o->filter_mb ? o->filter_mb : 64;
        st->filter_exact   = o && o->filter_exact;
        st->window_ms      = o && o->window_ms ? o->window_ms : DAY_MS;
        st->window_default = !(o && o->window_ms);
        st->clock          = o && o->clock ? o->clock : wall_ms;
        st->clock_opaque   = o ? o->clock_opaque : NULL;
        if (st->cache_mb < 8 || st->window_ms < 0) {
                snprintf(errstr, errstr_size,
                         "store options: cache_mb must be >= 8 and "
                         "window_ms > 0 (got %zu, %" PRId64 ")",
                         st->cache_mb, st->window_ms);
                free(st);
                return NULL;
        }
        st->run_cap = (st->cache_mb << 20) / 8;
        if (!(st->dir = strdup(dir)) ||
            asprintf(&st->dbpath, "%s/db", dir) < 0) {
                st->dbpath = NULL;
                snprintf(errstr, errstr_size, "out of memory");
                aagw_store_close(st);
                return NULL;
        }
        pthread_mutex_init(&st->commit_mu, NULL);
        pthread_mutex_init(&st->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&st->cond, &ca);
        pthread_condattr_destroy(&ca);
        st->locks_init = true;
        st->wopts      = rocksdb_writeoptions_create();
        rocksdb_writeoptions_set_sync(st->wopts, 0);
        st->ropts   = rocksdb_readoptions_create();
        /* Seen lookups: data blocks straight from the file (see
         * make_options()); checksums are still verified. */
        st->sropts = rocksdb_readoptions_create();
        rocksdb_readoptions_set_fill_cache(st->sropts, 0);
        st->envopts = rocksdb_envoptions_create();
        st->ingopts = rocksdb_ingestexternalfileoptions_create();
        rocksdb_ingestexternalfileoptions_set_move_files(st->ingopts, 1);
        st->flushopts = rocksdb_flushoptions_create();
        rocksdb_flushoptions_set_wait(st->flushopts, 1);
        if (make_options(st, errstr, errstr_size)) {
                aagw_store_close(st);
                return NULL;
        }
        return st;
}

/* Read meta key 'key' (BE64) into *v; 1 if found, 0 if not, -1 error. */
static int read_meta(aagw_store_t *st, const char *key, uint64_t *v,
                     char *errstr, size_t errstr_size) {
        char  *err = NULL;
        size_t vlen;
        char  *val;

        if (!st->cf[CF_DEFAULT])
                return 0;
        val = rocksdb_get_cf(st->db, st->ropts, st->cf[CF_DEFAULT], key,
                             strlen(key), &vlen, &err);
        if (dedup_take_err(err, "rocksdb_get(meta)", errstr, errstr_size))
                return -1;
        if (!val)
                return 0;
        if (vlen != 8) {
                rocksdb_free(val);
                snprintf(errstr, errstr_size, "meta %s is corrupt (%zu bytes)",
                         key, vlen);
                return -1;
        }
        *v = dedup_get_be64((const uint8_t *)val);
        rocksdb_free(val);
        return 1;
}

/* Write meta key 'key' (BE64).  Returns 0, or -1 (errstr set). */
static int write_meta(aagw_store_t *st, const char *key, uint64_t v,
                      char *errstr, size_t errstr_size) {
        uint8_t b[8];
        char    op[64], *err = NULL;

        dedup_put_be64(b, v);
        rocksdb_put_cf(st->db, st->wopts, st->cf[CF_DEFAULT], key, strlen(key),
                       (const char *)b, sizeof(b), &err);
        snprintf(op, sizeof(op), "rocksdb_put(meta %s)", key);
        return dedup_take_err(err, op, errstr, errstr_size);
}

/* The commit seq, and the seen keys' epoch length: fixed when the store is
 * created (window / 7), kept across restarts whatever the window, since
 * the stored keys depend on it.  A longer window then needs more filter
 * slots, up to FILTER_SLOTS_MAX.
 *
 * The window: a primary records the one it runs with, and a secondary
 * opened without one takes it (24 h if none was recorded, as before), so
 * that `aagw audit` sees exactly what the gateway's lookups see and can
 * name the window in its answers.  Read before the slice, which a store
 * without meta derives from it. */
static int read_meta_all(aagw_store_t *st, char *errstr, size_t errstr_size) {
        uint64_t v;
        int      rc;

        if ((rc = read_meta(st, "seq", &v, errstr, errstr_size)) < 0)
                return -1;
        if (rc)
                st->seq = v;
        if (st->secondary && st->window_default) {
                if ((rc = read_meta(st, "window", &v, errstr, errstr_size)) < 0)
                        return -1;
                if (rc && v > 0 && v <= INT64_MAX)
                        st->window_ms = (int64_t)v;
        }
        if ((rc = read_meta(st, "slice", &v, errstr, errstr_size)) < 0)
                return -1;
        if (rc && v > 0 && v <= INT64_MAX) {
                st->slice_ms = (int64_t)v;
        } else {
                st->slice_ms =
                    (st->window_ms + FILTER_SLOTS - 2) / (FILTER_SLOTS - 1);
                if (!st->secondary &&
                    write_meta(st, "slice", (uint64_t)st->slice_ms, errstr,
                               errstr_size))
                        return -1;
        }
        /* A secondary has no filter: any window will do for its reads. */
        if (!st->secondary &&
            dedup_filter_slots(st->window_ms, st->slice_ms) < 0) {
                snprintf(errstr, errstr_size,
                         "window of %" PRId64 " ms is more than %d times the "
                         "%" PRId64 " ms epochs this state dir was created "
                         "with; use a shorter window or a new state dir",
                         st->window_ms, FILTER_SLOTS_MAX - 1, st->slice_ms);
                return -1;
        }
        if (!st->secondary && write_meta(st, "window", (uint64_t)st->window_ms,
                                         errstr, errstr_size))
                return -1;
        return 0;
}

/* Remove files left in <dir>/ingest by a crash between writing an SST
 * and ingesting it: the journal still holds their entries. */
static int prepare_ingest_dir(aagw_store_t *st, char *errstr,
                              size_t errstr_size) {
        char path[4096];

        snprintf(path, sizeof(path), "%s/ingest", st->dir);
        if (mkdir(path, 0750) == -1 && errno != EEXIST) {
                snprintf(errstr, errstr_size, "cannot create %s: %s", path,
                         strerror(errno));
                return -1;
        }
        /* The files are named <seq>-<kind>.sst. */
        DIR *d = opendir(path);
        if (!d) {
                snprintf(errstr, errstr_size, "cannot open %s: %s", path,
                         strerror(errno));
                return -1;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (n > 4 && !strcmp(de->d_name + n - 4, ".sst")) {
                        char f[4400];
                        snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
                        (void)unlink(f);
                }
        }
        closedir(d);
        return 0;
}

aagw_store_t *aagw_store_open(const aagw_statedir_t        *sd,
                              const struct aagw_store_opts *o, char *errstr,
                              size_t errstr_size) {
        const rocksdb_options_t *cf_opts[CF_COUNT];
        char                    *err = NULL;
        aagw_store_t            *st =
            store_new(aagw_statedir_path(sd), o, false, errstr, errstr_size);
        if (!st)
                return NULL;
        for (int i = 0; i < CF_COUNT; i++)
                cf_opts[i] = st->cfopts[i];
        st->db =
            rocksdb_open_column_families(st->dbopts, st->dbpath, CF_COUNT,
                                         dedup_cf_names, cf_opts, st->cf, &err);
        if (dedup_take_err(err, "rocksdb_open", errstr, errstr_size)) {
                st->db = NULL;
                goto fail;
        }
        if (read_meta_all(st, errstr, errstr_size) ||
            prepare_ingest_dir(st, errstr, errstr_size))
                goto fail;
        st->filter =
            dedup_filter_new(st->filter_mb << 20, st->window_ms, st->slice_ms,
                             st->filter_exact);
        st->active = calloc(1, sizeof(*st->active));
        if (!st->filter || !st->active ||
            dedup_run_init(st->active, st->run_cap)) {
                snprintf(errstr, errstr_size,
                         "out of memory (filter of %zu MiB, tail run of %zu "
                         "bytes)",
                         st->filter_mb, st->run_cap);
                goto fail;
        }
        if (dedup_replay_journal(st, errstr, errstr_size))
                goto fail;
        dedup_cache_account(st);
        set_periodic_compaction(st);
        if (dedup_threads_start(st, errstr, errstr_size))
                goto fail;
        return st;
fail:
        aagw_store_close(st);
        return NULL;
}

/* nftw callback for removing the secondary's scratch directory. */
static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
        (void)sb;
        (void)flag;
        (void)ftw;
        (void)remove(path); /* best effort: it is a scratch dir */
        return 0;
}

aagw_store_t *aagw_store_open_secondary(const char                   *state_dir,
                                        const struct aagw_store_opts *o,
                                        char *errstr, size_t errstr_size) {
        const rocksdb_options_t        *cf_opts[CF_COUNT];
        const char                     *names[CF_COUNT];
        rocksdb_column_family_handle_t *handles[CF_COUNT];
        int                             map[CF_COUNT], n = 0;
        char                           *err   = NULL, **have;
        size_t                          nhave = 0;
        const char                     *tmp   = getenv("TMPDIR");
        char                            sec[4096];
        struct stat                     sb;

        aagw_store_t *st = store_new(state_dir, o, true, errstr, errstr_size);
        if (!st)
                return NULL;
        if (stat(st->dbpath, &sb) == -1) {
                snprintf(errstr, errstr_size, "no aagw state in %s: %s",
                         state_dir, strerror(errno));
                goto fail;
        }
        /* Open the families that exist: a state dir written by an older
         * aagw may lack some (they then read as empty). */
        have =
            rocksdb_list_column_families(st->dbopts, st->dbpath, &nhave, &err);
        if (dedup_take_err(err, "rocksdb_list_column_families", errstr,
                           errstr_size))
                goto fail;
        for (int cf = 0; cf < CF_COUNT; cf++)
                for (size_t i = 0; i < nhave; i++)
                        if (!strcmp(have[i], dedup_cf_names[cf])) {
                                names[n]   = dedup_cf_names[cf];
                                cf_opts[n] = st->cfopts[cf];
                                map[n++]   = cf;
                                break;
                        }
        rocksdb_list_column_families_destroy(have, nhave);

        snprintf(sec, sizeof(sec), "%s/aagw-secondary-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(sec) || !(st->secdir = strdup(sec))) {
                snprintf(errstr, errstr_size, "cannot create %s: %s", sec,
                         strerror(errno));
                goto fail;
        }
        st->db = rocksdb_open_as_secondary_column_families(
            st->dbopts, st->dbpath, st->secdir, n, names, cf_opts, handles,
            &err);
        if (dedup_take_err(err, "rocksdb_open_as_secondary", errstr,
                           errstr_size)) {
                st->db = NULL;
                goto fail;
        }
        for (int i = 0; i < n; i++)
                st->cf[map[i]] = handles[i];
        if (read_meta_all(st, errstr, errstr_size))
                goto fail;
        st->active = calloc(1, sizeof(*st->active));
        if (!st->active || dedup_run_init(st->active, 0)) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        if (dedup_replay_journal(st, errstr, errstr_size))
                goto fail;
        dedup_cache_account(st);
        return st;
fail:
        aagw_store_close(st);
        return NULL;
}

aagw_err_t aagw_store_catch_up(aagw_store_t *st, char *errstr,
                               size_t errstr_size) {
        char *err = NULL;

        if (!st->secondary)
                return AAGW_OK;
        rocksdb_try_catch_up_with_primary(st->db, &err);
        if (dedup_take_err(err, "rocksdb_try_catch_up_with_primary", errstr,
                           errstr_size))
                return AAGW_ERR_STORE;
        /* The tail is whatever the journal holds now. */
        if (dedup_replay_journal(st, errstr, errstr_size))
                return AAGW_ERR_STORE;
        return AAGW_OK;
}

void aagw_store_close(aagw_store_t *st) {
        if (!st)
                return;
        if (st->locks_init)
                dedup_threads_stop(st);
        if (st->db) {
                rocksdb_cancel_all_background_work(st->db, 1);
                for (int i = 0; i < CF_COUNT; i++)
                        if (st->cf[i])
                                rocksdb_column_family_handle_destroy(st->cf[i]);
                rocksdb_close(st->db);
        }
        for (int i = 0; i < CF_COUNT; i++) {
                if (st->cfopts[i])
                        rocksdb_options_destroy(st->cfopts[i]);
                if (st->cfilter[i])
                        rocksdb_compactionfilter_destroy(st->cfilter[i]);
        }
        if (st->dbopts)
                rocksdb_options_destroy(st->dbopts);
        /* The bloom policies belong to the table options. */
        if (st->topts_bloom)
                rocksdb_block_based_options_destroy(st->topts_bloom);
        if (st->topts_seen)
                rocksdb_block_based_options_destroy(st->topts_seen);
        if (st->topts_plain)
                rocksdb_block_based_options_destroy(st->topts_plain);
        if (st->cache)
                rocksdb_cache_destroy(st->cache);
        if (st->wopts)
                rocksdb_writeoptions_destroy(st->wopts);
        if (st->ropts)
                rocksdb_readoptions_destroy(st->ropts);
        if (st->sropts)
                rocksdb_readoptions_destroy(st->sropts);
        if (st->envopts)
                rocksdb_envoptions_destroy(st->envopts);
        if (st->ingopts)
                rocksdb_ingestexternalfileoptions_destroy(st->ingopts);
        if (st->flushopts)
                rocksdb_flushoptions_destroy(st->flushopts);
        if (st->secdir) {
                nftw(st->secdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
                free(st->secdir);
        }
        dedup_run_free(st->active);
        free(st->active);
        dedup_run_free(st->sealed);
        free(st->sealed);
        dedup_run_free(st->spare);
        free(st->spare);
        dedup_filter_destroy(st->filter);
        dedup_buf_free(&st->jbuf);
        if (st->locks_init) {
                pthread_cond_destroy(&st->cond);
                pthread_mutex_destroy(&st->mu);
                pthread_mutex_destroy(&st->commit_mu);
        }
        free(st->dbpath);
        free(st->dir);
        free(st);
}

int64_t aagw_store_window_ms(const aagw_store_t *st) {
        return st->window_ms;
}

/* ------------------------------ POSITIONS ------------------------------ */

static size_t pos_key(char *buf, size_t size, const char *scope,
                      const char *topic, int32_t partition) {
        size_t sl = strlen(scope), tl = strlen(topic);
        if (sl + tl + 6 > size)
                return 0;
        memcpy(buf, scope, sl + 1);
        memcpy(buf + sl + 1, topic, tl + 1);
        dedup_put_be32((uint8_t *)buf + sl + tl + 2, (uint32_t)partition);
        return sl + tl + 6;
}

size_t dedup_pos_encode(char *key, size_t size, const char *scope,
                        const char *topic, int32_t partition,
                        const struct aagw_pos *pos, uint8_t val[16]) {
        size_t klen = pos_key(key, size, scope, topic, partition);
        dedup_put_be64(val, (uint64_t)pos->next);
        dedup_put_be64(val + 8, (uint64_t)pos->out_next);
        return klen;
}

aagw_err_t aagw_store_pos_get(aagw_store_t *st, const char *scope,
                              const char *topic, int32_t partition,
                              struct aagw_pos *pos, char *errstr,
                              size_t errstr_size) {
        char   key[1024], *err = NULL, *val;
        size_t klen = pos_key(key, sizeof(key), scope, topic, partition), vlen;

        if (!klen) {
                snprintf(errstr, errstr_size, "position key too long");
                return AAGW_ERR_INVAL;
        }
        if (!st->cf[CF_POSITIONS])
                return AAGW_ERR_NOENT;
        val = rocksdb_get_cf(st->db, st->ropts, st->cf[CF_POSITIONS], key, klen,
                             &vlen, &err);
        if (dedup_take_err(err, "rocksdb_get(positions)", errstr, errstr_size))
                return AAGW_ERR_STORE;
        if (!val)
                return AAGW_ERR_NOENT;
        if (vlen != 16) {
                rocksdb_free(val);
                snprintf(errstr, errstr_size,
                         "position of %s %s [%d] is corrupt (%zu bytes)", scope,
                         topic, (int)partition, vlen);
                return AAGW_ERR_STORE;
        }
        pos->next     = (int64_t)dedup_get_be64((uint8_t *)val);
        pos->out_next = (int64_t)dedup_get_be64((uint8_t *)val + 8);
        rocksdb_free(val);
        return AAGW_OK;
}

aagw_err_t aagw_store_pos_scopes(aagw_store_t *st, const char *prefix,
                                 aagw_scope_cb_t *cb, void *opaque,
                                 char *errstr, size_t errstr_size) {
        rocksdb_iterator_t *it;
        char                last[1024] = "", *err = NULL;
        size_t              plen = strlen(prefix);
        bool                have = false;

        if (!st->cf[CF_POSITIONS])
                return AAGW_OK;
        it = rocksdb_create_iterator_cf(st->db, st->ropts, st->cf[CF_POSITIONS]);
        for (rocksdb_iter_seek(it, prefix, plen); rocksdb_iter_valid(it);
             rocksdb_iter_next(it)) {
                size_t      klen;
                const char *k = rocksdb_iter_key(it, &klen);
                size_t      slen = strnlen(k, klen);
                if (klen < plen || memcmp(k, prefix, plen))
                        break;
                if (slen == klen || slen >= sizeof(last))
                        continue; /* not scope\0...: not a position */
                if (have && strlen(last) == slen && !memcmp(last, k, slen))
                        continue;
                memcpy(last, k, slen);
                last[slen] = '\0';
                have       = true;
                if (cb(last, opaque))
                        break;
        }
        rocksdb_iter_get_error(it, &err);
        rocksdb_iter_destroy(it);
        if (dedup_take_err(err, "iterating positions", errstr, errstr_size))
                return AAGW_ERR_STORE;
        return AAGW_OK;
}

aagw_err_t aagw_store_pos_put(aagw_store_t *st, const struct aagw_pos_entry *e,
                              size_t cnt, char *errstr, size_t errstr_size) {
        rocksdb_writebatch_t *wb;
        char                 *err = NULL;

        if (st->secondary) {
                snprintf(errstr, errstr_size, "store is read-only");
                return AAGW_ERR_INVAL;
        }
        wb = rocksdb_writebatch_create();
        for (size_t i = 0; i < cnt; i++) {
                char    key[1024];
                uint8_t val[16];
                size_t  klen =
                    dedup_pos_encode(key, sizeof(key), e[i].scope, e[i].topic,
                                     e[i].partition, &e[i].pos, val);
                if (!klen) {
                        rocksdb_writebatch_destroy(wb);
                        snprintf(errstr, errstr_size, "position key too long");
                        return AAGW_ERR_INVAL;
                }
                rocksdb_writebatch_put_cf(wb, st->cf[CF_POSITIONS], key, klen,
                                          (const char *)val, sizeof(val));
        }
        rocksdb_write(st->db, st->wopts, wb, &err);
        rocksdb_writebatch_destroy(wb);
        if (dedup_take_err(err, "rocksdb_write(positions)", errstr,
                           errstr_size))
                return AAGW_ERR_STORE;
        return AAGW_OK;
}

/* ----------------------------- MAINTENANCE ----------------------------- */

aagw_err_t aagw_store_flush(aagw_store_t *st, char *errstr,
                            size_t errstr_size) {
        if (st->secondary)
                return AAGW_OK;
        pthread_mutex_lock(&st->commit_mu);
        pthread_mutex_lock(&st->mu);
        int rc =
            st->active->len ? dedup_seal_locked(st, errstr, errstr_size) : 0;
        while (!rc && st->sealed) {
                if (st->ix_failed || st->stopping) {
                        snprintf(errstr, errstr_size, "tail indexer: %s",
                                 st->ix_failed ? st->ix_err : "stopping");
                        rc = -1;
                        break;
                }
                pthread_cond_wait(&st->cond, &st->mu);
        }
        pthread_mutex_unlock(&st->mu);
        pthread_mutex_unlock(&st->commit_mu);
        if (rc)
                return AAGW_ERR_STORE;
        for (int cf = 0; cf < CF_COUNT; cf++) {
                char *err = NULL;
                rocksdb_flush_cf(st->db, st->flushopts, st->cf[cf], &err);
                if (dedup_take_err(err, "rocksdb_flush", errstr, errstr_size))
                        return AAGW_ERR_STORE;
        }
        return AAGW_OK;
}

aagw_err_t aagw_store_compact(aagw_store_t *st, char *errstr,
                              size_t errstr_size) {
        aagw_err_t rc = aagw_store_flush(st, errstr, errstr_size);

        if (rc || st->secondary)
                return rc;
        for (int cf = 0; cf < CF_COUNT; cf++)
                if (cf_windowed(cf))
                        rocksdb_compact_range_cf(st->db, st->cf[cf], NULL, 0,
                                                 NULL, 0);
        return AAGW_OK;
}

void aagw_store_stats_get(aagw_store_t *st, struct aagw_store_stats *out) {
        int64_t now = dedup_now(st);

        memset(out, 0, sizeof(*out));
        out->seen_lookups   = atomic_load(&st->n_lookups);
        out->seen_filtered  = atomic_load(&st->n_filtered);
        out->seen_exact_hits = atomic_load(&st->n_exact_hits);
        out->seen_tail_hits = atomic_load(&st->n_tail_hits);
        out->seen_reads     = atomic_load(&st->n_reads);
        out->seen_read_hits = atomic_load(&st->n_read_hits);
        out->commits        = atomic_load(&st->n_commits);
        out->runs_indexed   = atomic_load(&st->n_runs);
        out->indexer_errors = atomic_load(&st->n_ix_errors);
        out->index_us       = atomic_load(&st->us_index);
        out->tail_wait_us   = atomic_load(&st->us_tail_wait);
        out->cache_usage = st->cache ? rocksdb_cache_get_usage(st->cache) : 0;
        out->readers_bytes = atomic_load(&st->readers_mem);
        pthread_mutex_lock(&st->mu);
        out->filter_ready = st->filter && st->filter_ready;
        if (st->filter) {
                out->filter_bytes = dedup_filter_bytes(st->filter);
                out->filter_ids   = dedup_filter_ids(st->filter, now);
        }
        out->tail_bytes = (st->active ? st->active->len : 0) +
                          (st->sealed ? st->sealed->len : 0);
        pthread_mutex_unlock(&st->mu);
}
