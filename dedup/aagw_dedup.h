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

#ifdef __cplusplus
}
#endif
#endif /* AAGW_DEDUP_H */
