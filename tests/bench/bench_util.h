/*
 * tests/bench/bench_util.h: what the benchmark programs in tests/bench
 * share: the clock, librdkafka clients and high watermarks, CPU figures
 * from /proc, option parsing helpers, the per-run summary lines, and the
 * bare librdkafka consume -> produce loop that serves as the baseline.
 *
 * Benchmarks are programs, not tests: they print to stdout and stderr and
 * exit 0 (every measurement valid), 1 (one was not), 2 (usage).
 */
#ifndef AAGW_BENCH_UTIL_H
#define AAGW_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

#include <librdkafka/rdkafka.h>

enum { BENCH_EXIT_OK = 0, BENCH_EXIT_RUNTIME = 1, BENCH_EXIT_USAGE = 2 };

#define BENCH_KAFKA_TIMEOUT_MS 10000 /* one metadata / ListOffsets call */
#define BENCH_FLUSH_TIMEOUT_MS 60000 /* the bare loop's flush at SIGTERM */

/* ---------------------------------------------------------------- TIME -- */

/** @returns seconds on the monotonic clock. */
double bench_now_s(void);

/** Sleep @p ms milliseconds (resumed after signals). */
void bench_nap_ms(int ms);

/* --------------------------------------------------------------- KAFKA -- */

/**
 * @brief A client of @p bootstraps with @p props (name, value pairs,
 * NULL-terminated; may be NULL).
 * @returns the client, or NULL with the reason in @p errstr.
 */
rd_kafka_t *bench_client_new(rd_kafka_type_t type, const char *bootstraps,
                             const char *const *props, char *errstr,
                             size_t errstr_size);

/**
 * @brief High watermarks of partitions 0..cnt-1 of @p topic into @p per
 * (may be NULL) and their sum into @p sum.  With @p low, the low
 * watermarks instead (the log start: above 0 once the mock's retention
 * dropped records).  One ListOffsets request per leader
 * (offsets_for_times with the "latest" or "earliest" timestamp), so a
 * poll costs a round trip, not @p cnt.
 * @returns 0, or -1 with the reason in @p errstr.
 */
int bench_watermarks(rd_kafka_t *rk, const char *topic, int cnt, bool low,
                     int64_t *per, int64_t *sum, char *errstr,
                     size_t errstr_size);

/* ----------------------------------------------------------------- CPU -- */

/** @returns user + sys seconds from a /proc/.../stat file (a process or
 *  one of its threads), or NAN. */
double bench_stat_cpu_s(const char *path);

/** @returns user + sys seconds of process @p pid (all its threads), or
 *  NAN. */
double bench_proc_cpu_s(pid_t pid);

/**
 * @returns user + sys seconds of @p pid and of every process below it
 * that is still running (from /proc/PID/task/TID/children), or NAN if
 * @p pid is gone.  For a wrapper such as `perf record -- aagw` or
 * `sh -c 'a | b'` that is the whole tree.
 */
double bench_tree_cpu_s(pid_t pid);

/** @returns @p tv in seconds. */
double bench_tv_s(struct timeval tv);

/** @returns busy CPU-seconds of the whole machine since boot (every CPU;
 *  idle and iowait excluded), from /proc/stat, or NAN. */
double bench_machine_busy_s(void);

/** Write the CPU seconds of every thread of @p pid, one "tid comm
 *  seconds" line each, to @p path.  Best effort. */
void bench_threads_dump(pid_t pid, const char *path);

/* ------------------------------------------------------------- STRINGS -- */

/**
 * @brief Format into @p buf at @p *off and move @p *off past the string's
 * NUL, so that several arguments can share one buffer.
 * @returns the string (borrowed from @p buf).
 */
const char *bench_buf_printf(char *buf, size_t size, size_t *off,
                             const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** Parse a whole decimal number in [@p min, @p max] into @p out.
 *  @returns false for anything else ("8x", "", "-1", out of range). */
bool bench_parse_size(const char *s, size_t min, size_t max, size_t *out);

/** @returns the words of @p s (split on spaces and tabs), NULL-terminated,
 *  living as long as the program; NULL if there are none. */
char **bench_split_words(const char *s);

/* ------------------------------------------------------------- SUMMARY -- */

/** min..max of the finite values in v[0..n).  @returns false if none. */
bool bench_range(const double *v, int n, double *lo, double *hi);

/** Print "  WHAT  lo .. hi" (or one value, or "-") with @p decimals. */
void bench_print_range(const char *what, const double *v, int n, int decimals);

/** Print the per-run values of a ratio against its @p target (at least
 *  or at most) and in how many runs it was met. */
void bench_print_target(const char *what, const double *v, int n, double target,
                        bool at_least);

/* ----------------------------------------------------------- BARE LOOP -- */

/**
 * @brief The bare librdkafka loop, a baseline for aagw:
 *
 *   PROG --bare SRC_BOOTSTRAPS SRC_TOPIC[,SRC_TOPIC...] DST_BOOTSTRAPS
 *               DST_TOPIC [consumer.K=V|producer.K=V]...
 *
 * It assigns every partition of every source topic from the beginning
 * (no group join, no commits: the least a copy loop can do), copies key,
 * value, headers and timestamp of each record to the same partition of
 * DST_TOPIC through an idempotent acks=all producer with aagw's batching,
 * and on SIGTERM flushes and exits.
 *
 * @param prog  the program's name, for messages.
 * @param argc, argv  from "--bare" on (argv[0] is "--bare").
 * @returns 0 if every consumed record was delivered, 1 otherwise, 2 for
 * bad arguments.
 */
int bench_bare_main(const char *prog, int argc, char **argv);

#endif /* AAGW_BENCH_UTIL_H */
