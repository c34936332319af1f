/*
 * aagw - active-active replication gateway for Kafka
 *
 * policy/aagw_base.h: what every folder uses and that decides nothing:
 * the two clocks, single-writer counters, error codes and logging.
 *
 * It lives in policy/ because policy/ is the one folder every other
 * includes, but it is kept out of aagw_policy.h so that header holds
 * decisions only: these read clocks (the clocks, the log line's time
 * stamp) and reach a sink the program installs, which no rule may do.
 * aagw_policy.h includes this header, so its users get both; a file that
 * needs only these (the log format, error names) includes it alone.
 */
#ifndef AAGW_BASE_H
#define AAGW_BASE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------- CLOCKS AND COUNTERS ------------------------- */

/* Shared by every folder: the replicator, the state store and the program
 * read the same two clocks and update single-writer counters the same way. */

/** Wall-clock milliseconds since the epoch (record timestamps, ages). */
static inline int64_t aagw_wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/** Monotonic milliseconds (intervals and deadlines). */
static inline int64_t aagw_mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/**
 * Add @p n to the _Atomic counter @p x that only one thread writes (a
 * stage's counters, written by its thread, read by stats): a relaxed load
 * and store instead of a locked read-modify-write per update.  Readers
 * still see whole values.
 */
#define AAGW_STAT_ADD(x, n)                                                    \
        atomic_store_explicit(&(x),                                            \
                              atomic_load_explicit(&(x),                       \
                                                   memory_order_relaxed) +     \
                                  (n),                                         \
                              memory_order_relaxed)

/* ------------------------------- ERRORS -------------------------------- */

/**
 * @brief Error codes shared by every module.
 *
 * 0 is success; failures are negative.  Functions that can fail return one
 * of these and, when a human needs the reason, write it to a caller-provided
 * 'errstr' buffer (only on failure).
 */
typedef enum {
        AAGW_OK         = 0,
        AAGW_ERR_CONFIG = -1, /**< bad user input: report it, keep serving */
        AAGW_ERR_STORE  = -2, /**< RocksDB or file-system I/O */
        AAGW_ERR_KAFKA  = -3, /**< librdkafka error, details in errstr */
        AAGW_ERR_NOMEM  = -4, /**< allocation failed */
        AAGW_ERR_BUSY   = -5, /**< resource held by someone else (state dir) */
        AAGW_ERR_INVAL  = -6, /**< bad argument from a caller (a bug) */
        AAGW_ERR_NOENT  = -7, /**< no such item */
        AAGW_ERR_TIMEOUT = -8, /**< deadline passed */
        AAGW_ERR_UNSUPPORTED = -9, /**< the peer lacks the feature */
} aagw_err_t;

/** @returns a static, human readable name for @p err; never NULL. */
const char *aagw_err2str(aagw_err_t err);

/* ------------------------------- LOGGING ------------------------------- */

typedef enum {
        AAGW_LOG_DEBUG = 0,
        AAGW_LOG_INFO  = 1,
        AAGW_LOG_WARN  = 2,
        AAGW_LOG_ERROR = 3,
        AAGW_LOG_OFF   = 4,
} aagw_log_level_t;

/** Lines below this level are not formatted at all (see aagw_log()). */
extern aagw_log_level_t aagw_log_level;

/**
 * @brief Where formatted log lines go.
 *
 * @p line is a complete line without the trailing newline, in the shape
 * `2026-05-01T10:00:00.123Z 4121 W [DEDUP] message`.  It is only valid
 * during the call.  The default sink discards everything; the program
 * installs one that writes to stderr.
 */
typedef void(aagw_log_sink_t)(aagw_log_level_t level, const char *line,
                              void *opaque);

/** Install @p sink (NULL restores the discarding sink). Not thread-safe:
 *  call it before starting threads. */
void aagw_log_set_sink(aagw_log_sink_t *sink, void *opaque);

/** @returns the level named @p name ("debug", "info", "warn", "error",
 *  "off"), or -1 if the name is unknown. */
int aagw_log_level_parse(const char *name);

/** @returns the single letter used in log lines for @p level (D I W E). */
char aagw_log_level_letter(aagw_log_level_t level);

/** Format and emit a line.  Use the aagw_log() macro instead. */
void aagw_log0(aagw_log_level_t level, const char *fac, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Log only if @p level passes aagw_log_level; arguments are not evaluated
 *  otherwise. */
#define aagw_log(level, fac, ...)                                              \
        do {                                                                   \
                if ((level) >= aagw_log_level)                                 \
                        aagw_log0((level), (fac), __VA_ARGS__);                \
        } while (0)

#ifdef __cplusplus
}
#endif
#endif /* AAGW_BASE_H */
