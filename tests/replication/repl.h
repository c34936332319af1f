/*
 * tests/replication/repl.h: what the replication end-to-end tests share,
 * on top of tests/harness: a set of sandbox clusters plus the aagw program
 * run against them (started, SIGKILLed, stopped, restarted on one state
 * dir), topic sizes from watermarks for waiting, and kcat reads parsed
 * into records for the assertions.
 *
 * The helpers assert (cmocka): call them from inside a test only.  A
 * failed assertion longjmps out of the test; repl_destroy() in teardown
 * then kills the gateway and stops the clusters.
 *
 * Records the tests produce have the key "k<i % keys>" and the value
 * "<tag>-<i>" (i zero-padded to 7 digits), so a value names its origin
 * and sequence number, and keys spread records over the partitions.
 */
#ifndef AAGW_TEST_REPL_H
#define AAGW_TEST_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* Deadlines: generous for ASan on a loaded 2-core machine; a healthy run
 * needs a fraction of each. */
#define REPL_KCAT_TIMEOUT_MS 60000
#define REPL_STOP_TIMEOUT_MS 10000 /* SIGTERM to exit: the contract */
#define REPL_MAX_SITES 4

struct repl {
        harness_clusters_t *hc;
        const char         *sites[REPL_MAX_SITES];
        size_t              nsites;
        char               *dir;   /* temporary directory of the test */
        char               *state; /* <dir>/state: the gateway's state dir */
        harness_proc_t     *gw;
        int                 gw_runs;  /* starts so far: log file names */
        char                log[512]; /* stderr of the current gateway */
        rd_kafka_t         *wm[REPL_MAX_SITES]; /* watermark clients */
        char                errstr[1024];
};

/** Start sandbox clusters for @p sites (3 brokers each) and a temporary
 *  directory.  Asserts on failure. */
struct repl *repl_new(const char *const *sites, size_t nsites);

/** Kill the gateway if it runs, stop the clusters, remove the directory
 *  (kept, and its path printed, if @p keep or AAGW_TEST_KEEP is set).
 *  NULL is a no-op. */
void repl_destroy(struct repl *r, bool keep);

/* cmocka per-test fixture: the test stores its struct repl in *state;
 * teardown destroys it (and its gateway and clusters). */
int repl_setup(void **state);
int repl_teardown(void **state);

/** @returns the bootstraps of @p alias; asserts it exists. */
const char *repl_bs(struct repl *r, const char *alias);

/** Create @p topic with @p parts partitions at @p alias (NULL: every
 *  site). */
void repl_create_topic(struct repl *r, const char *alias, const char *topic,
                       int parts);

/**
 * @brief Start `aagw run` against every site, state dir r->state, with the
 * settings every test needs (topic refresh 1 s, consumer session timeout
 * 3 s, heartbeat 500 ms, no unify stage), then @p extra (NULL-terminated
 * argv words, may be NULL).  stderr goes to <dir>/gw-<n>.log.
 */
void repl_gw_start(struct repl *r, const char *const *extra);

/**
 * @brief Send @p sig to the gateway and wait up to @p timeout_ms for it.
 * @returns its exit code as a shell shows it (128+N for signal N), or -1
 * if it did not exit in time (it is then killed).  The handle is gone
 * afterwards either way.
 */
int repl_gw_stop(struct repl *r, int sig, int timeout_ms);

/** @returns true if the gateway runs (not exited). */
bool repl_gw_running(struct repl *r);

/** Wait up to @p timeout_ms for the gateway to exit by itself.
 *  @returns its exit code, or -1 if it still runs. */
int repl_gw_wait_exit(struct repl *r, int timeout_ms);

/** Print the last @p lines lines of the current gateway log to stderr
 *  (diagnostics for a failing test). */
void repl_dump_log(struct repl *r, int lines);

/** @returns the content of the current gateway log, malloc()ed. */
char *repl_log_text(struct repl *r);

/**
 * @returns the records @p topic holds at @p alias (sum over partitions of
 * high - low watermark), 0 if the topic does not exist.  Never creates the
 * topic.
 */
int64_t repl_size(struct repl *r, const char *alias, const char *topic);

/** @returns true once repl_size() >= @p want, false after @p timeout_ms. */
bool repl_wait_size(struct repl *r, const char *alias, const char *topic,
                    int64_t want, int timeout_ms);

/** Like repl_wait_size() but fails the test (with the gateway log) on
 *  timeout. */
void repl_expect_size(struct repl *r, const char *alias, const char *topic,
                      int64_t want, int timeout_ms);

/**
 * @brief Assert that `kcat -L` at @p alias lists exactly the topics
 * @p want, ignoring Kafka's (__*) and aagw's own (aagw.*, e.g. the
 * dead-letter topics): a loop or a wrong-way flow would add one.
 */
void repl_expect_topics(struct repl *r, const char *alias,
                        const char *const *want, size_t nwant);

/** @returns true if `kcat -L` at @p alias lists @p topic. */
bool repl_topic_listed(struct repl *r, const char *alias, const char *topic);

/**
 * @brief Produce records @p from .. @p from + @p cnt - 1 with kcat:
 * key "k<i % keys>" (no key if @p keys is 0), value "<tag>-<i>", the given
 * headers ("name=value", NULL-terminated, may be NULL) on each, to
 * @p partition (-1: by key).
 */
void repl_produce(struct repl *r, const char *alias, const char *topic,
                  const char *tag, int from, int cnt, int keys,
                  const char *const *headers, int partition);

/* ------------------------------- RECORDS -------------------------------- */

/** One record as kcat printed it ("%p|%o|%T|%k|%s|%h"); strings point
 *  into the line buffers. */
struct rrec {
        int32_t     p;
        int64_t     o;
        int64_t     ts;
        const char *key;
        const char *val;
        const char *hdrs; /* "name=value,name=value" ("" if none) */
};

struct rrecs {
        harness_lines_t lines;
        struct rrec    *v;
        size_t          cnt;
};

/** Read all of @p topic at @p alias with kcat into @p out (release with
 *  rrecs_deinit()).  Must exist: kcat would auto-create it. */
void repl_read(struct repl *r, const char *alias, const char *topic,
               struct rrecs *out);

void rrecs_deinit(struct rrecs *rs);

/**
 * @returns how many headers named @p name @p rec has; the value of the
 * first one is copied into @p buf (NUL-terminated, truncated to @p size)
 * if @p buf is not NULL ("" when absent).
 */
int rrec_hdr(const struct rrec *rec, const char *name, char *buf, size_t size);

/** The aagw.prov header of a record, split into its fields. */
struct rprov {
        char path[1100];   /* "east>west" */
        char origin[80];   /* path[0] */
        char src[300];     /* "clicks:3:1234" */
        char hlc[32];      /* "1714557600123:0" */
        char id_raw[1100]; /* as sent: "" for the derived id */
        char id[1100];     /* the id: id_raw, or the derived id */
};

/**
 * @returns how many aagw.prov headers @p rec has.  When it has one, its
 * value is split into @p out (all "" if it is not "1;PATH;SRC;HLC;ID");
 * otherwise @p out is all "".
 */
int rrec_prov(const struct rrec *rec, struct rprov *out);

/** Copy into @p buf the header string of @p rec without the headers whose
 *  name starts with @p prefix ("aagw."). */
void rrec_hdrs_without(const struct rrec *rec, const char *prefix, char *buf,
                       size_t size);

/**
 * @brief Assert that the records of @p src (a local topic @p src_topic
 * read at site @p origin) are in @p dst exactly once each, in the same
 * partition and the same order, with key, value, timestamp and original
 * headers intact, and fresh provenance: the one header aagw.prov =
 * "1;<path>;<src_topic>:<p>:<o>;<ts>:0;" (coordinates and timestamp of the
 * source record; the empty id is the derived one), no other aagw.* header
 * (in particular no aagw.hop: the record was stamped by the first hop).
 *
 * Records of @p dst whose origin is not @p origin are ignored (the
 * identity policy mixes local records and copies in one topic); every
 * record of @p dst with that origin must be a copy of one in @p src.
 */
void repl_check_copy(const struct rrecs *src, const char *src_topic,
                     const char *origin, const struct rrecs *dst,
                     const char *path);

/** @returns the number of records of @p rs whose value starts with
 *  "<tag>-". */
size_t rrecs_count_tag(const struct rrecs *rs, const char *tag);

#endif /* AAGW_TEST_REPL_H */
