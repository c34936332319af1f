/*
 * tests/realkafka/rk.h: the fixture of the tests that need a real Apache
 * Kafka broker (meson suite `kafka`): clusters started by spawning
 * scripts/kafka-clusters (one launcher per cluster, so each can have its
 * own size), broker faults through its `ctl`, topics with a replication
 * factor and min.insync.replicas, the aagw program, Kafka's Java tools
 * (VerifiableProducer, aagw.kafka.ReadToEnd) run from the jar folder of
 * scripts/kafka-fetch, and their JSON events parsed.
 *
 * A missing Java or jar is a failure, never a skip: this suite exists to
 * run on real Kafka.  The helpers assert (cmocka): call them from inside a
 * test; rk_destroy() in teardown stops everything the test started.
 *
 * Environment (meson sets the first two):
 *  AAGW_SOURCE_ROOT  the source tree (scripts/kafka-clusters, kafka-fetch)
 *  AAGW_BIN          the aagw program
 *  AAGW_TEST_SECURITY  "ALIAS=KIND ..." (e.g. "east=scram-sha-512
 *                    west=mtls"): the launcher's --security for the named
 *                    clusters; the gateway then gets only their secured
 *                    listeners, the tests' own clients the plaintext ones
 *  AAGW_KAFKA_DIR    jar folder base, as scripts/kafka-fetch reads it
 *  AAGW_TEST_KEEP    keep the test directory (logs) afterwards
 */
#ifndef AAGW_TEST_RK_H
#define AAGW_TEST_RK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "harness.h"

#define RK_MAX_CLUSTERS 4

struct rk_cluster {
        char            alias[32];
        int             brokers;
        harness_proc_t *launcher;
        char           *run_dir; /* --dir of the launcher */
        char           *bs_file; /* --bootstraps-file */
        char           *log;     /* the launcher's stderr */
        char           *bs;      /* bootstraps once ready (plaintext) */
        char           *env_file; /* --env-file */
        harness_clusters_t *hc;  /* the gateway's view (secured listener) */
        rd_kafka_t     *admin;   /* metadata / watermarks / admin API */
};

struct rk {
        char             *dir;   /* temporary directory of the test */
        char             *lib;   /* the jar folder */
        char             *state; /* aagw's state dir */
        char             *log4j; /* log4j2 config of the Java tools */
        const char       *src;   /* source root */
        struct rk_cluster c[RK_MAX_CLUSTERS];
        size_t            ncl;
        harness_proc_t   *gw;
        int               gw_runs;
        char              gw_log[600];
        int64_t           t0; /* harness_now_ms() at rk_new() */
        char              errstr[1024];
};

/** Fetch the jars (scripts/kafka-fetch; fails the test if Java, Maven or
 *  a jar is missing) and make the test's directory. */
struct rk *rk_new(const char *tag);

/** Stop aagw and every launcher (SIGTERM, then SIGKILL), remove the
 *  directory unless AAGW_TEST_KEEP is set.  NULL is a no-op. */
void rk_destroy(struct rk *r);

/* cmocka fixture: *state holds the struct rk (set by the test). */
int rk_teardown(void **state);

/** Seconds since rk_new() (for the figures the tests print). */
double rk_elapsed(struct rk *r);

/* ------------------------------- CLUSTERS ------------------------------- */

/** Spawn `scripts/kafka-clusters --brokers N --dir D --bootstraps-file F
 *  ALIAS` (with --security ALIAS=KIND if AAGW_TEST_SECURITY names ALIAS)
 *  and wait (with a deadline) until it wrote the bootstraps. */
void rk_cluster_start(struct rk *r, const char *alias, int brokers);

/** rk_cluster_start() with extra broker properties ("KEY=VALUE",
 *  NULL-terminated; the launcher's --set). */
void rk_cluster_start_with(struct rk *r, const char *alias, int brokers,
                           const char *const *props);

/** @returns the bootstraps of @p alias; asserts it was started.  The
 *  plaintext listener: for the tests' own clients and tools. */
const char *rk_bs(struct rk *r, const char *alias);

/** Store in @p argv the aagw words that give it every started cluster
 *  (`--cluster ALIAS=BS`, on a secured cluster its secured listener and a
 *  `--set clusters.ALIAS.properties.K=V` per setting; borrowed from @p r).
 *  @returns how many; asserts they fit in @p room. */
size_t rk_gw_cluster_args(struct rk *r, const char **argv, size_t room);

/** `scripts/kafka-clusters ctl --dir D VERB ALIAS NODE` (kill, start,
 *  ...); asserts it exits 0 within @p timeout_ms. */
void rk_ctl(struct rk *r, const char *alias, const char *verb, int node,
            int timeout_ms);

/** Grow @p topic at @p alias to @p total partitions (CreatePartitions);
 *  fails the test if the cluster refuses. */
void rk_grow_topic(struct rk *r, const char *alias, const char *topic,
                   int total);

/** Create @p topic at @p alias with @p parts partitions, replication
 *  factor @p rf and, if @p min_isr > 0, min.insync.replicas; wait until
 *  every partition has a leader and a full ISR. */
void rk_create_topic(struct rk *r, const char *alias, const char *topic,
                     int parts, int rf, int min_isr);

/** rk_create_topic() with topic configs: NAME, VALUE pairs, NULL-ended
 *  (may be NULL). */
void rk_create_topic_with(struct rk *r, const char *alias, const char *topic,
                          int parts, int rf, int min_isr,
                          const char *const *configs);

/** Start `east` with @p east_brokers brokers and `west` with one, and
 *  create at both `clicks`, the remote copy (`west.clicks` at east,
 *  `east.clicks` at west) and `clicks.unified`, @p parts partitions each:
 *  at east with replication factor @p east_brokers and min.insync.replicas
 *  @p east_min_isr (0: the broker's), at west with replication factor 1. */
void rk_clicks_clusters(struct rk *r, int east_brokers, int east_min_isr,
                        int parts);

/** Delete @p topic at @p alias (Admin DeleteTopics) and wait until the
 *  cluster's metadata no longer lists it. */
void rk_delete_topic(struct rk *r, const char *alias, const char *topic);

/** @returns the leader's node id of @p topic / @p partition at @p alias,
 *  -1 if none (or no metadata). */
int rk_leader(struct rk *r, const char *alias, const char *topic,
              int partition);

/** @returns the leader of @p topic / @p partition at @p alias once it is
 *  a broker other than @p old (after that broker was stopped or killed),
 *  or -1 if there is none such after @p timeout_ms. */
int rk_wait_new_leader(struct rk *r, const char *alias, const char *topic,
                       int partition, int old, int timeout_ms);

/** @returns true once every partition of @p topic at @p alias has a
 *  leader and @p isr in-sync replicas, false after @p timeout_ms. */
bool rk_wait_isr(struct rk *r, const char *alias, const char *topic, int isr,
                 int timeout_ms);

/** @returns the records of @p topic at @p alias (high - low watermarks
 *  summed), -1 if it cannot tell. */
int64_t rk_size(struct rk *r, const char *alias, const char *topic);

struct rk_bag;
/** Read @p topic at @p alias from its beginning to its end with
 *  isolation.level @p isolation (read_committed, read_uncommitted),
 *  adding each record's value to @p values (may be NULL).  Unlike
 *  rk_size() it counts records only, not transaction markers.
 *  @returns the records read; fails the test if the end is not reached
 *  within 60 s. */
int64_t rk_count(struct rk *r, const char *alias, const char *topic,
                 const char *isolation, struct rk_bag *values);

/** rk_count(), adding each record's last @p header (its value; "" if it
 *  has none) to @p values instead of its value. */
int64_t rk_count_header(struct rk *r, const char *alias, const char *topic,
                        const char *isolation, const char *header,
                        struct rk_bag *values);

/** @returns true once rk_size() reaches @p want, false after
 *  @p timeout_ms (printing what it holds). */
bool rk_wait_size(struct rk *r, const char *alias, const char *topic,
                  int64_t want, int timeout_ms);

/** Fail the test (with aagw's log) unless rk_size() reaches @p want
 *  within @p timeout_ms. */
void rk_expect_size(struct rk *r, const char *alias, const char *topic,
                    int64_t want, int timeout_ms);

/* -------------------------------- GATEWAY ------------------------------- */

/** Start `aagw run` with --cluster for every started cluster, the state
 *  dir, a short group session, 1 s topic refresh, then @p extra
 *  (NULL-terminated, may be NULL).  stderr goes to <dir>/gw-<n>.log. */
void rk_gw_start(struct rk *r, const char *const *extra);

/** Send @p sig and wait up to @p timeout_ms; @returns the exit code as a
 *  shell shows it, -1 if it had to be killed.  Fails the test on a
 *  sanitizer report in its log. */
int rk_gw_stop(struct rk *r, int sig, int timeout_ms);

/** Fail the test if the gateway is no longer running (with its log). */
void rk_gw_expect_running(struct rk *r);

/** Print the last @p lines of the current gateway log to stderr. */
void rk_gw_dump_log(struct rk *r, int lines);

/* ------------------------------ SEVERAL AAGW ------------------------------ */

/** One of several aagw processes (scale-out): its own state directory
 *  (<test dir>/state-NAME) and a log per run (<test dir>/gw-NAME-RUN.log).
 *  Zero it before the first start. */
struct rk_gw {
        char            name[32];
        harness_proc_t *proc;  /**< NULL while stopped */
        int             runs;
        char            log[600];   /**< the current (last) run's */
        char            state[600];
};

/** Start @p g as rk_gw_start() does, with `--member NAME` (@p name, or the
 *  name it had before when NULL) and its own state directory, which
 *  survives a stop (a restart resumes from it). */
void rk_gwn_start(struct rk *r, struct rk_gw *g, const char *name,
                  const char *const *extra);

/** Stop @p g as rk_gw_stop() does (stacks if it does not exit in time,
 *  the log's tail for an exit code other than 0, sanitizer reports fail
 *  the test).  @returns its exit code, or -1 if it did not exit. */
int rk_gwn_stop(struct rk *r, struct rk_gw *g, int sig, int timeout_ms);

/** Print the last @p lines of @p g's current log to stderr. */
/** GET @p url from the admin endpoint of @p g (its state dir's
 *  admin.addr; start it with `--admin 127.0.0.1:0`).  @returns the body,
 *  malloc()ed, or NULL. */
char *rk_gwn_http_get(const struct rk_gw *g, const char *url);
/** rk_gwn_http_get() that also stores the HTTP status in @p status (0 if
 *  there was no answer; may be NULL). */
char *rk_gwn_http_get_status(const struct rk_gw *g, const char *url,
                             int *status);
void rk_gwn_dump_log(const struct rk_gw *g, int lines);
/** @returns how often @p needle occurs in the file @p path (0 if it
 *  cannot be read). */
int rk_log_count(const char *path, const char *needle);
/** Wait until @p g's current log holds @p needle more than @p above
 *  times; fail the test (with the log's tail) after @p timeout_ms. */
void rk_gwn_expect_log(struct rk_gw *g, const char *needle, int above,
                       int timeout_ms);
/** Print the lines of the file @p path that hold @p tag (NULL: any line)
 *  and one of @p needles (NULL-terminated) to stderr, under a header. */
void rk_grep_file(const char *path, const char *tag,
                  const char *const *needles);
/** Print the lines of every run's log (gw-1.log, gw-2.log, ...) that hold
 *  @p tag and one of @p needles (NULL-terminated): what a failed check
 *  needs from aagw's side, e.g. where each run resumed a partition. */
void rk_gw_grep(struct rk *r, const char *tag, const char *const *needles);
/** The same for the server.log of every broker of cluster @p alias
 *  (while its launcher runs: it removes them on exit unless
 *  AAGW_TEST_KEEP is set), e.g. truncations of a target partition. */
void rk_broker_grep(struct rk *r, const char *alias, const char *tag,
                    const char *const *needles);

/* ---------------------------------- JAVA -------------------------------- */

/** Spawn `java ... -cp LIB/(all jars) MAIN ARGS...` (@p args NULL-terminated),
 *  stdout to @p out (the JSON events), stderr to @p err. */
harness_proc_t *rk_java_spawn(struct rk *r, const char *main_class,
                              const char *const *args, const char *out,
                              const char *err);

/** Wait up to @p timeout_ms for a Java tool, fail unless it exits 0
 *  (printing @p err's tail). */
void rk_java_expect_exit0(struct rk *r, harness_proc_t *p, const char *what,
                          const char *err, int timeout_ms);

/** @returns "<dir>/<name>", malloc()ed. */
char *rk_path(struct rk *r, const char *name);

/** Produce @p n records to @p topic at @p alias with librdkafka
 *  (idempotent, acks=all), record i to partition i % @p parts with the
 *  value "<prefix><i>"; assert every one was acknowledged. */
void rk_produce(struct rk *r, const char *alias, const char *topic,
                int parts, const char *prefix, int n);
/** rk_produce() for i in [@p from, @p from + @p n), each record with the
 *  key "<prefix><i>" as well (an id under `--id key`). */
void rk_produce_keyed(struct rk *r, const char *alias, const char *topic,
                      int parts, const char *prefix, int from, int n);

/** Write @p text to <dir>/<name>; @returns the path, malloc()ed. */
char *rk_write(struct rk *r, const char *name, const char *text);

/* ------------------------------ JSON EVENTS ------------------------------ */

/** Lines of a file holding `"name":"@p event"`, counted incrementally (a
 *  running tool's stdout): call rk_count_poll() as often as needed. */
struct rk_counter {
        const char *path;
        char        needle[128]; /* "\"name\":\"EVENT\"" */
        long        off;
        int64_t     cnt;
        char        part[4096]; /* an unfinished last line */
        size_t      part_len;
};
void    rk_counter_init(struct rk_counter *c, const char *path,
                        const char *event);
int64_t rk_count_poll(struct rk_counter *c);

/** A multiset of strings (record values). */
struct rk_bag;
struct rk_bag *rk_bag_new(void);
void           rk_bag_destroy(struct rk_bag *b);
/** Add @p s; @returns its count after adding. */
int64_t rk_bag_add(struct rk_bag *b, const char *s);
/** @returns how often @p s was added. */
int64_t rk_bag_count(const struct rk_bag *b, const char *s);
/** @returns the number of additions / of distinct strings. */
int64_t rk_bag_total(const struct rk_bag *b);
int64_t rk_bag_distinct(const struct rk_bag *b);
/** Call @p fn for every distinct string with its count. */
void rk_bag_each(const struct rk_bag *b,
                 void (*fn)(const char *s, int64_t n, void *arg), void *arg);

/** What a VerifiableProducer printed: acked values (producer_send_success)
 *  and the values it reported as failed (producer_send_error). */
struct rk_produced {
        struct rk_bag *acked;
        struct rk_bag *failed;
        int64_t        sent, acked_reported; /* tool_data, -1 if absent */
};
void rk_produced_parse(const char *path, struct rk_produced *out);
void rk_produced_deinit(struct rk_produced *p);

/** What aagw.kafka.ReadToEnd printed for @p topic: the values, and per
 *  partition the values in offset order (for order checks). */
struct rk_read {
        struct rk_bag *values;
        char        ***part; /* part[p][i]: values of partition p */
        size_t        *part_cnt;
        int            nparts;
        int64_t        records;
        bool           done; /* read_done seen */
};
void rk_read_parse(const char *path, const char *topic, struct rk_read *out);
void rk_read_deinit(struct rk_read *rd);

/** A last-write-wins topic read with values "k<j>.<v>" (0 <= j < @p keys,
 *  version v): @p last[j] is the last version of key j in partition order
 *  (a key's versions share a partition), -1 if none; fails on any other
 *  value.  @returns the records whose value occurs more than once. */
int64_t rk_lww_last(const struct rk_read *rd, const char *topic, int keys,
                    int *last);

/** Run ReadToEnd (read_committed) at @p alias on @p topics
 *  (NULL-terminated) into <dir>/<name> and assert it read to the end. */
char *rk_read_topics(struct rk *r, const char *alias, const char *name,
                     const char *const *topics);

/**
 * @brief Compare a copy against what it must hold: every string of
 * @p want once in @p got per occurrence in @p want.  Fills the figures;
 * @returns true if @p got equals @p want as a multiset.
 *  - missing: occurrences of @p want not in @p got
 *  - dups:    occurrences in @p got beyond those in @p want (of wanted
 *             strings)
 *  - extra:   occurrences in @p got of strings not in @p want at all,
 *             except those in @p allowed (may be NULL: values that may or
 *             may not be there, e.g. sends that failed), which must be
 *             there at most once: more counts as dups.
 */
struct rk_diff {
        int64_t missing, dups, extra, allowed_seen;
        char    first_missing[128], first_dup[128], first_extra[128];
};
bool rk_compare(const struct rk_bag *want, const struct rk_bag *allowed,
                const struct rk_bag *got, struct rk_diff *d);

/** rk_compare() of @p got against @p want (and @p allowed), the figures
 *  printed as a TAP comment under @p what; @returns true if equal and the
 *  reader reached the end. */
bool rk_check(const char *what, const struct rk_bag *want,
              const struct rk_bag *allowed, const struct rk_read *got);

/** @returns how many partitions of @p copy differ from @p src in their
 *  values' order or count (printing the first difference of each). */
int64_t rk_order_diffs(const char *what, const struct rk_read *src,
                       const struct rk_read *copy);

/** Like rk_check() for a source topic against its producer's events:
 *  every acked value once (@p failed ones at most once).  A value with no
 *  event at all (the tool stopped by a signal mid-send) is printed, not
 *  counted against it: the copies are checked against the source's
 *  content anyway. */
bool rk_check_source(const char *what, const struct rk_bag *acked,
                     const struct rk_bag *failed, const struct rk_read *got);

/** Stop a VerifiableProducer run with --max-messages -1: SIGTERM (its
 *  shutdown hook closes the producer, which reports every record in
 *  flight), then fail if it exits with another status than 0 or 143.
 *  One still running 60 s later is killed (its threads printed): what it
 *  acknowledged is in its output already. */
void rk_producer_stop(struct rk *r, harness_proc_t *p, const char *err);

/** Add every string of @p from (with its count) to @p into. */
void rk_bag_add_all(struct rk_bag *into, const struct rk_bag *from);

/** The producer settings the tests use: acks=all, idempotent, retries
 *  unlimited, 180 s delivery timeout. */
extern const char RK_PRODUCER_CONFIG[];

/** A VerifiableProducer writing `clicks` at @p alias for as long as it
 *  runs (--max-messages -1; stop it with rk_producer_stop()), values
 *  "@p prefix.<i>", 1,000 repeating keys, @p throughput records/s.  Its
 *  events go to <dir>/producer-@p alias.out (returned in @p out,
 *  malloc()ed), stderr to @p err (likewise). */
harness_proc_t *rk_clicks_producer(struct rk *r, const char *alias,
                                   const char *prefix, const char *throughput,
                                   char **out, char **err);

/** With aagw stopped, read `clicks`, the remote copy and `clicks.unified`
 *  at `east` and at `west` and check them against the producers' acks
 *  (@p east / @p west, NULL for a site nobody wrote to): each `clicks`
 *  holds every acked value once; each copy exactly the other site's
 *  records, same partitions and order; each `clicks.unified` every record
 *  of both sites exactly once.  The figures are printed, labelled
 *  @p what.  @returns true if all of it holds. */
bool rk_verify_clicks(struct rk *r, const struct rk_produced *east,
                      const struct rk_produced *west, const char *what);

#endif
