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

#include <stddef.h>
#include <sys/types.h>

#include "aagw_policy.h"

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
 */
typedef struct aagw_store aagw_store_t;

struct aagw_store_opts {
        size_t cache_mb; /**< block cache + write buffers, MiB (>= 8) */
};

/**
 * @brief Open (creating if needed) the store in @p sd's directory.
 * @p sd must stay open while the store is.
 * @returns the store, or NULL with the reason in @p errstr.
 */
aagw_store_t *aagw_store_open(const aagw_statedir_t *sd,
                              const struct aagw_store_opts *opts,
                              char *errstr, size_t errstr_size);

/** Flush memtables and close.  NULL is a no-op. */
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

/**
 * @brief Store @p cnt positions atomically (one WriteBatch).
 */
aagw_err_t aagw_store_pos_put(aagw_store_t *st,
                              const struct aagw_pos_entry *entries, size_t cnt,
                              char *errstr, size_t errstr_size);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_DEDUP_H */
