/*
 * tests/bench/bench_util.h: what the benchmark programs in tests/bench
 * share: the clock, librdkafka clients and high watermarks, CPU figures
 * from /proc, the records and their preload, the common options, the
 * sandbox of a round, one measurement's skeleton (spawn, watch the
 * target, stop), the run loop, the per-run summary lines, and the bare
 * librdkafka consume -> produce loop that serves as the baseline.
 *
 * A program describes itself in a struct bench_prog and keeps its own
 * round state in a struct that starts with a struct bench_round.
 *
 * Benchmarks are programs, not tests: they print to stdout and stderr and
 * exit 0 (every measurement valid), 1 (one was not), 2 (usage).
 */
#ifndef AAGW_BENCH_UTIL_H
#define AAGW_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>
#include <sys/types.h>

#include <getopt.h>
#include <librdkafka/rdkafka.h>

#include "harness.h"

enum { BENCH_EXIT_OK = 0, BENCH_EXIT_RUNTIME = 1, BENCH_EXIT_USAGE = 2 };

#define BENCH_KAFKA_TIMEOUT_MS 10000   /* one metadata / ListOffsets call */
#define BENCH_FLUSH_TIMEOUT_MS 60000   /* the bare loop's flush at SIGTERM */
#define BENCH_SANDBOX_TIMEOUT_MS 60000 /* sandbox up, topics created */
#define BENCH_START_TIMEOUT_MS 90000   /* spawn -> first record at target */
#define BENCH_STALL_TIMEOUT_MS 30000   /* no progress at the target */
#define BENCH_EXIT_GRACE_MS 10000      /* child exited -> last record seen */
#define BENCH_STOP_TIMEOUT_MS 60000    /* SIGTERM -> exit */

/* ------------------------------------------------------------- PROGRAM -- */

/** The program's name for bench_errorf() and the shared helpers'
 *  messages ("bench_unify"); set first thing in main(). */
void bench_set_prog(const char *prog);

/** Print "PROG: " @p fmt "\n" to stderr. */
void bench_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

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

/* ------------------------------------------------------------- RECORDS -- */

/** Record @p i's key, "k<10 digits>", into @p key.  @returns its length. */
size_t bench_rec_key(size_t i, char *key, size_t size);

/**
 * @brief Record @p i's value: exactly @p vsize printable bytes (never '\n'
 * or '\x1f', the kcat separators) and a NUL; @p val holds vsize + 1.
 * With @p json a JSON object whose "id" field is the key (vsize >= 48).
 */
void bench_rec_value(size_t i, char *val, size_t vsize, bool json);

/** The partition kcat -P (and every librdkafka producer with the default
 *  partitioner) picks for a keyed record: crc32(key) % partitions. */
int32_t bench_rec_partition(rd_kafka_topic_t *rkt, const char *key,
                            size_t keylen, int partitions);

/** Fill @p vu (5 entries) with a copy of the record: topic, partition,
 *  key, value.  @returns 5. */
size_t bench_rec_vu(rd_kafka_vu_t *vu, rd_kafka_topic_t *rkt, int32_t partition,
                    const char *key, size_t keylen, const char *val,
                    size_t vlen);

/** Delivery report counters of a preload producer. */
struct bench_preload {
        int64_t delivered, failed;
        char    first_err[256];
};

/**
 * @brief An idempotent acks=all producer to @p bootstraps whose delivery
 * reports count into @p pl (which must outlive it).
 * @returns the producer, or NULL with the reason in @p errstr.
 */
rd_kafka_t *bench_preload_producer(const char           *bootstraps,
                                   struct bench_preload *pl, char *errstr,
                                   size_t errstr_size);

/** Produce one record (@p vu, @p cnt) of @p topic, waiting while the queue
 *  is full.  @returns 0, or -1 with "preload TOPIC: reason" in @p errstr. */
int bench_produce(rd_kafka_t *rk, const rd_kafka_vu_t *vu, size_t cnt,
                  const char *topic, char *errstr, size_t errstr_size);

/**
 * @brief Check that partition i of @p topic holds expect[i] (+ expect2[i]
 * if @p expect2) records; @p scratch holds @p cnt values.  @p what ("source",
 * "target") starts the message.
 * @returns 0, or -1 with the reason in @p errstr.
 */
int bench_counts_check(rd_kafka_t *rk, const char *topic, int cnt,
                       const int64_t *expect, const int64_t *expect2,
                       int64_t *scratch, const char *what, char *errstr,
                       size_t errstr_size);

/* ------------------------------------------------------------- OPTIONS -- */

#define BENCH_LIST_MAX 32    /* --aagw-arg, --bare-prop */
#define BENCH_OPTS_HELP (-1) /* bench_parse_opts(): help printed, exit 0 */

/** The options every benchmark program has (docs/benchmarks.md). */
struct bench_opts {
        size_t      records;
        int         runs;
        int         partitions;
        int         brokers;
        size_t      value_size;
        int         poll_ms;
        unsigned    only; /* bit per measurement */
        bool        keep;
        char      **aagw_prefix;               /* NULL-terminated, or NULL */
        const char *aagw_args[BENCH_LIST_MAX]; /* appended to aagw's argv */
        int         aagw_argc;
        const char *bare_props[BENCH_LIST_MAX]; /* consumer.K=V producer.K=V */
        int         bare_propc;
};

/**
 * @brief Set @p o to the defaults (1,000,000 records, 1 run, 64
 * partitions, 3 brokers, 200-byte values, 20 ms polls, every measurement)
 * and parse the command line into it and, through @p p->own_opt, into
 * the program's own options.
 * @returns BENCH_EXIT_OK; BENCH_OPTS_HELP (usage printed to stdout); or
 * BENCH_EXIT_USAGE (reason and usage printed to stderr).
 */
struct bench_prog;
int bench_parse_opts(int argc, char **argv, const struct bench_prog *p,
                     struct bench_opts *o);

/** Print the usage lines of the common options from --partitions to
 *  "--bare-prop consumer.K=V|producer.K=V" (its description is the
 *  program's). */
void bench_usage_common(FILE *out);

/**
 * @brief The start of main(): take @p p->name for messages, run the bare
 * loop if argv[1] is "--bare", else parse the options into @p o.
 * @returns -1 to go on, else the exit status to return (help, usage
 * error, the bare loop's).
 */
int bench_main_start(const struct bench_prog *p, int argc, char **argv,
                     struct bench_opts *o);

/**
 * @brief What every program does before its rounds: set AAGW_BIN to
 * @p aagw_bin unless set, find this program (for --bare) into @p self
 * (PATH_MAX bytes), ignore SIGPIPE and make the log directory from @p tag.
 * @returns the log directory (the caller frees it), or NULL (reason
 * printed).
 */
char *bench_setup(const char *aagw_bin, const char *tag, char *self,
                  size_t self_size);

/** Print the first line of the report: "PROG: date, system, CPUs,
 *  librdkafka VERSION" and @p tail. */
void bench_print_host(const char *tail);

/* ------------------------------------------------------------- ROUNDS -- */

/**
 * One run of a program: a fresh sandbox with clusters east and west and
 * the measurements in it.  Programs put it first in their own round
 * struct and cast back in their callbacks.
 */
struct bench_round {
        const struct bench_opts *o;
        int                      run;  /* 0-based */
        char                    *dir;  /* this run's logs (owned) */
        const char              *self; /* this program, for --bare */
        harness_proc_t          *sandbox;
        harness_bootstraps_t    *bs;
        const char              *east, *west;       /* borrowed from bs */
        rd_kafka_t              *east_rk, *west_rk; /* west_rk: if asked */
        void *res; /* this run's results (res_size bytes), zeroed per run */
        void *all; /* o->runs copies of res, one per run */
};

/** One measurement of a program, at index letter - 'a'. */
struct bench_meas_info {
        char        letter;
        const char *name; /* machine-readable */
        const char *label;
};

/** A program: its measurements, its own options, its rounds. */
struct bench_prog {
        const char *name;           /* "bench_unify": messages, --bare */
        int         meas_cnt;       /* letters 'a' .. 'a' + meas_cnt - 1 */
        size_t      res_size;       /* one run's results (every measurement) */
        size_t      min_value_size; /* --value-size */
        const char *shortopts;      /* own options, e.g. "d:i:", or NULL */
        const struct option *longopts; /* {NULL}-terminated, or NULL */
        /* Take own option 'opt' with 'arg'.  @returns false if 'arg' is
         * invalid.  NULL without own options. */
        bool (*own_opt)(int opt, const char *arg, void *ctx);
        void *ctx;
        void (*usage)(FILE *out);
        /* Start the round: sandbox up (bench_sandbox_start), expectations.
         * @returns 0, or -1 (reason printed; the sandbox is stopped). */
        int (*round_start)(struct bench_round *r);
        /* Measurement 'm' (0-based): @returns 0, or -1 (reason printed). */
        int (*measure)(struct bench_round *r, int m);
        /* After the measurements and the sandbox's stop: print. */
        void (*round_end)(struct bench_round *r);
        /* After the last run: the summary over o->runs results in 'all'. */
        void (*summary)(const struct bench_opts *o, const void *all);
};

/**
 * @brief Start the round's sandbox: clusters east and west with
 * @p topics (NULL-terminated) on both, a client to east and, with
 * @p west_client, one to west.
 * @returns 0, or -1 (reason printed).
 */
int bench_sandbox_start(struct bench_round *r, const char *const *topics,
                        bool west_client);

/** Stop the round's sandbox and its clients (reports a sandbox that had
 *  exited).  Safe on a half-started one. */
void bench_sandbox_stop(struct bench_round *r);

/**
 * @brief The runs: per run a directory "runK" below @p dir, then
 * round_start, the measurements of o->only in an order that rotates from
 * run to run (so that none always runs first, cold, or last, after the
 * most load), the sandbox's stop and round_end, and res saved to all;
 * then the summary, and
 * @p dir removed if every measurement was valid (unless --keep).
 * @returns the exit status: BENCH_EXIT_OK if every measurement was valid.
 */
int bench_run(const struct bench_prog *p, struct bench_round *r,
              const char *dir);

/* -------------------------------------------------------- MEASUREMENT -- */

#define BENCH_ARGV_MAX 128 /* a measured command line, NULL included */

/**
 * @brief aagw's command line for a measurement of @p r into @p argv:
 * the --aagw-prefix words, aagw, --cluster east=... --cluster west=...,
 * @p mode (NULL-terminated), --topic ^TOPIC$ --gateway-id bench-rK
 * --state-dir @p statedir, @p tail (NULL-terminated), then the
 * --aagw-arg values and NULL.  Strings it makes live in @p buf.
 */
void bench_aagw_argv(const struct bench_round *r, const char **argv,
                     const char *topic, const char *statedir,
                     const char *const *mode, const char *const *tail,
                     char *buf, size_t bufsize);

/**
 * @brief The bare loop's command line into @p argv: this program --bare,
 * east and @p srcs (comma-separated), @p dst_bootstraps and @p dst, then
 * @p props (@p propc "role.K=V"), the --bare-prop values and NULL.
 */
void bench_bare_argv(const struct bench_round *r, const char **argv,
                     const char *srcs, const char *dst_bootstraps,
                     const char *dst, const char *const *props, size_t propc);

/** CPU figures at one moment of a measurement. */
struct bench_sample {
        double t;     /* bench_now_s() */
        double child; /* the measured process tree, or 0 */
        double mock;  /* the sandbox */
        double busy;  /* the whole machine, bench_machine_busy_s() */
        double self;  /* this program, user + sys */
};

/** Take a sample; @p p NULL: no measured process (child 0). */
void bench_sample_take(struct bench_sample *s, harness_proc_t *p,
                       harness_proc_t *sandbox);

/**
 * @returns the noise gauge between @p a and @p b: the machine's CPU that
 * neither the measured program (@p child seconds), the sandbox nor this
 * program used (other jobs on a shared machine), in cores; at least 0.
 */
double bench_others_cores(const struct bench_sample *a,
                          const struct bench_sample *b, double child);

/** One measurement in progress: its files, its process, what the watch
 *  saw. */
struct bench_meas {
        char            tag[32]; /* "run1-a" */
        const char     *label;   /* for messages */
        char           *out, *err, *statedir, *trace_path, *threads_path;
        FILE           *trace; /* seconds, records at the target */
        harness_proc_t *proc;
        double          t0, t_first, t_done, t_exit;
        int64_t         first_cnt; /* at the target at the first sighting */
        bool            exited;
        int             status;
};

/** Name the files of measurement @p letter of the round (in r->dir).
 *  @returns 0, or -1 (reason printed). */
int bench_meas_init(struct bench_meas *mm, const struct bench_round *r,
                    char letter, const char *label);

/** Close, kill and free what @p mm holds; remove its state dir unless
 *  @p keep_state. */
void bench_meas_deinit(struct bench_meas *mm, bool keep_state);

/** @returns 0 if @p topic is empty, else -1 (reason printed). */
int bench_meas_target_empty(struct bench_meas *mm, rd_kafka_t *rk,
                            const char *topic, int partitions);

/**
 * @brief Spawn @p argv (t0 is @p t0) and watch @p topic every
 * poll_ms until it holds @p want records, taking @p first (may be NULL)
 * at the first sighting and @p done (may be NULL) at completion.  Fails
 * on more than @p want records, on the program's exit without them, on
 * the sandbox's exit, on no record within BENCH_START_TIMEOUT_MS, and on
 * no progress for BENCH_STALL_TIMEOUT_MS.
 * @returns 0, or -1 (reason printed).
 */
int bench_meas_run(struct bench_meas *mm, const struct bench_round *r,
                   const char *const *argv, double t0, rd_kafka_t *rk,
                   const char *topic, int64_t want, struct bench_sample *first,
                   struct bench_sample *done);

/**
 * @brief Unless it exited by itself: with @p term, dump its threads' CPU
 * and send SIGTERM; then wait up to BENCH_STOP_TIMEOUT_MS.
 * @returns 0, or -1 (reason printed).
 */
int bench_meas_stop(struct bench_meas *mm, bool term);

/**
 * @brief Check the exit status.  A non-zero one is only reported when
 * @p wrapper (the command aagw ran under, which passes SIGTERM on and
 * reports the signal) is set.
 * @returns 0, or -1 (reason printed).
 */
int bench_meas_exit_ok(struct bench_meas *mm, const char *wrapper);

/* ------------------------------------------------------------- SUMMARY -- */

/** min..max of the finite values in v[0..n).  @returns false if none. */
bool bench_range(const double *v, int n, double *lo, double *hi);

/** Print "  WHAT  lo .. hi" (or one value, or "-") with @p decimals. */
void bench_print_range(const char *what, const double *v, int n, int decimals);

/** Print the per-run values of a ratio against its @p target (at least
 *  or at most) and in how many runs it was met. */
void bench_print_target(const char *what, const double *v, int n, double target,
                        bool at_least);

/**
 * @brief Start measurement @p m's row of a round's table: "  x label"
 * padded to @p width; if not @p valid, "FAILED" in a column of
 * @p failed_width and the end of the line.
 * @returns true if the caller prints the figures and the end of the line.
 */
bool bench_print_row(const struct bench_meas_info *mi, bool valid, int width,
                     int failed_width);

/** A figure of a measurement's result: its offset and label in the
 *  summary ("X label"), and the decimals. */
struct bench_field {
        const char *label;
        size_t      off; /* of a double */
        int         decimals;
};

/** The ratio of a figure of measurement x over that of y in one run,
 *  against a target or (target NAN) none. */
struct bench_ratio {
        const char *what;
        size_t      off; /* of a double */
        int         x, y;
        double      target;
        bool        at_least;
};

/**
 * @returns the figure at @p off of measurement @p x over that of @p y in
 * @p res (one run: an array of results of @p size bytes each, whose first
 * member is "bool valid"), or NAN if either is not valid.
 */
double bench_ratio(const void *res, size_t size, size_t off, int x, int y);

/**
 * @brief The summary over the runs: a header; for each measurement in
 * o->only the range of every field of @p f ({NULL}-terminated); then
 * "targets:" and every ratio of @p q ({NULL}-terminated) per run.
 * @p all holds o->runs x @p meas_cnt results of @p size bytes each.
 */
void bench_print_summary(const struct bench_opts *o, int meas_cnt,
                         const void *all, size_t size,
                         const struct bench_field *f,
                         const struct bench_ratio *q);

/* ---------------------------------------------------------- REAL KAFKA -- */

/**
 * @brief Create @p topic with @p partitions (replication factor 1) on a
 * real cluster (auto-create is off there).  An existing topic with that
 * many partitions is fine.
 * @returns 0, or -1 with the reason in @p errstr.
 */
int bench_topic_create(rd_kafka_t *rk, const char *topic, int partitions,
                       char *errstr, size_t errstr_size);

/** Delete @p topics (@p cnt) on a real cluster: best effort, so that a
 *  long benchmark does not fill the disk. */
void bench_topics_delete(rd_kafka_t *rk, const char *const *topics,
                         size_t cnt);

/** @returns the peak resident set (VmHWM) of @p pid in KiB, or -1. */
long bench_proc_hwm_kib(pid_t pid);

/** The java command line of a Kafka tool: the JVM options of @p jvm
 *  (NULL-terminated), -cp AAGW_KAFKA_LIB/'*', @p main; argv entries are
 *  written to @p argv from @p *a on; strings live in @p buf.
 *  @returns false if AAGW_KAFKA_LIB is unset. */
bool bench_java_argv(const char **argv, size_t *a, const char *const *jvm,
                     const char *main, const char *log4j, char *buf,
                     size_t bufsize, size_t *off);

/**
 * @brief Write a MirrorMaker 2 dedicated-mode configuration to @p path:
 * clusters @p alias (bootstraps @p src) and west (@p dst), @p alias->west
 * only, topics @p topic, tasks.max @p tasks, the settings a 1-broker
 * cluster needs, and an idempotent acks=all producer (docs/benchmarks.md
 * lists them).  MM2 copies @p topic to "ALIAS.TOPIC" and keeps its own
 * state in topics named after @p alias: a new alias starts afresh.
 * @returns 0, or -1 (reason printed).
 */
int bench_mm2_config_write(const char *path, const char *alias,
                           const char *src, const char *dst,
                           const char *topic, int tasks);

/** Write a log4j2 configuration that sends WARN and above to stderr
 *  into @p path.  @returns 0, or -1 (reason printed). */
int bench_log4j_write(const char *path);

/**
 * @brief For --wan: east as the replicators reach it over a WAN, from
 * scripts/kafka-clusters --wan-delay MS: the bootstraps behind its delay
 * proxy (AAGW_TEST_WAN_BOOTSTRAPS_EAST) into @p src and MS, the round
 * trip (AAGW_TEST_WAN_DELAY_MS), into @p rtt_ms; both borrowed from the
 * environment.
 * @returns 0, or -1 (reason printed): no WAN listener, or a secured one
 * (the benchmarks' clients speak plaintext only).
 */
int bench_wan_source(const char **src, const char **rtt_ms);

/* The JVM options of Kafka's own scripts: connect-mirror-maker.sh
 * (KAFKA_HEAP_OPTS -Xms256M -Xmx2G) and kafka-run-class.sh's defaults. */
extern const char *const bench_mm2_jvm[];
/* kafka-producer-perf-test.sh: -Xmx512M and kafka-run-class.sh's. */
extern const char *const bench_perf_jvm[];

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
