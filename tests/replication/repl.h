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
 *
 * Topic names: the tests run on the embedded clusters and on shared real
 * ones (AAGW_TEST_BOOTSTRAPS_*), where topics outlive the test and other
 * tests run at the same time.  So a test writes its topics by their
 * logical names ("clicks", "east.clicks", "clicks.unified") and every
 * helper here that takes a topic scopes it to the test run with
 * repl_topic(): on real clusters "clicks" -> "<scope>-clicks",
 * "east.clicks" -> "east.<scope>-clicks", the gateway replicates only
 * topics holding the scope, and repl_expect_topics() looks at those only.
 * On the embedded clusters, which are the test's alone, the scope is
 * empty and the names stay as written.  Where a test hands a name to
 * aagw itself (argv, a config key, an expected log line) it calls
 * repl_topic() for it, so the same code checks the same thing on both.
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
#define REPL_BROKERS 3 /* brokers of each embedded cluster */
#define REPL_STOP_TIMEOUT_MS 10000 /* SIGTERM to exit: the contract */
#define REPL_MAX_SITES 4

struct repl_name; /* repl.c */
struct CMUnitTest; /* cmocka.h */

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
        char               *scope; /* unique per test run: see repl_topic() */
        struct repl_name   *names; /* logical -> scoped topic names */
        /* The separator of site prefixes repl_topic() skips; "": one of
         * "._-" (set it before the first repl_topic() of a test that
         * runs with another --separator). */
        char                sep[16];
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

/**
 * @returns the scoped name of topic @p name (see the top of this file):
 * leading "<site><sep>" parts (sep one of . _ -) are kept and the scope
 * goes before the rest (no change on the embedded clusters, where the
 * scope is empty).  Names that already hold the scope, Kafka's
 * (__*), aagw's (aagw.*) and MM2's internal topics (*heartbeats,
 * *.internal) are returned as they are.  Borrowed: valid until
 * repl_destroy().
 */
const char *repl_topic(struct repl *r, const char *name);

/** Give @p r the scope of @p from (before @p r names any topic): a test
 *  that plays one gateway's state dir against a second set of clusters
 *  needs the same names there. */
void repl_share_scope(struct repl *r, const struct repl *from);

/** @returns the gateway id repl_gw_start() gives aagw: the scope on real
 *  clusters, aagw's default "aagw" on the embedded ones.  Borrowed. */
const char *repl_gateway_id(const struct repl *r);

/** @returns true if the clusters are real ones from the environment. */
bool repl_real(const struct repl *r);

/**
 * @brief On real clusters, print "# skip on real clusters: <why>" and
 * skip the test (cmocka skip()); on the embedded ones do nothing.  For
 * tests that inject faults only the embedded clusters can take (or that
 * would break the other tests sharing a real cluster).
 */
void repl_mock_only(struct repl *r, const char *why);

/**
 * @brief For main(): on real clusters (AAGW_TEST_BOOTSTRAPS_EAST set),
 * leave the tests named in @p names (NULL-terminated) out of @p tests,
 * printing "# skip on real clusters: <name>: <why>" for each.
 *
 * Not cmocka's skip(): cmocka 1.1.5 reports a skipped test as "not ok N #
 * SKIP", which meson's TAP parser counts as a failure.  If no test is left,
 * the TAP plan "1..0 # SKIP <why>" is printed (meson: skipped) and the
 * caller returns 0 without running the group.
 * @returns the number of tests left, first in @p tests.
 */
size_t repl_mock_only_tests(struct CMUnitTest *tests, size_t cnt,
                            const char *const *names, const char *why);

/** @returns the bootstraps of @p alias; asserts it exists. */
const char *repl_bs(struct repl *r, const char *alias);

/** Set every broker of embedded cluster @p alias down or up again
 *  (rd_kafka_mock_broker_set_down/_up); the mock does not move leadership,
 *  so all of them is what makes its partitions unreachable.  Embedded
 *  clusters only (repl_mock_only()). */
void repl_set_brokers(struct repl *r, const char *alias, bool up);

/** Every broker of embedded cluster @p alias answers @p rtt_ms late
 *  (rd_kafka_mock_broker_set_rtt(); 0: at once again).  Embedded
 *  clusters only (repl_mock_only()). */
void repl_set_rtt(struct repl *r, const char *alias, int rtt_ms);

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

/** @returns true if the current gateway log contains @p what. */
bool repl_log_has(struct repl *r, const char *what);

/** Wait up to @p timeout_ms (0: look once) for the current gateway log to
 *  contain @p what; fails the test with the log's tail if it never
 *  does. */
void repl_expect_log(struct repl *r, const char *what, int timeout_ms);

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
 * @p want among this test's topics (those holding its scope), ignoring
 * Kafka's (__*) and aagw's own (aagw.*, e.g. the dead-letter topics): a
 * loop or a wrong-way flow would add one.
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

/** What repl_pace() measured. */
struct repl_paced {
        int     batches;  /**< batches sent */
        int     slow;     /**< of them, not there within the time given */
        int64_t worst_ms; /**< the longest wait for one */
};

/**
 * @brief Keep records flowing, and time them, while the gateway does
 * something slow beside them (makes a topic, reconciles one): until
 * @p done holds or @p window_ms passed, batches of @p batch records
 * (tag "c", numbered on from @p *sent, to @p partition: as
 * repl_produce()) to @p topic at @p alias, each waited for at
 * @p to_topic of @p to_alias for up to @p each_ms.  @p *sent counts
 * the records sent.
 */
struct repl_paced repl_pace(struct repl *r, const char *alias,
                            const char *topic, int partition,
                            const char *to_alias, const char *to_topic,
                            int *sent, int batch, int each_ms, int window_ms,
                            bool (*done)(struct repl *r));

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
        char            topic[256]; /* the (scoped) topic read */
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
 * @p src_topic is the logical name; the coordinates in aagw.prov name the
 * scoped topic that @p src was read from.
 */
void repl_check_copy(const struct rrecs *src, const char *src_topic,
                     const char *origin, const struct rrecs *dst,
                     const char *path);

/**
 * @brief Read "clicks" at @p from and "<from>.clicks" at @p to, and assert
 * that both hold @p want records and the copy holds each exactly once
 * (repl_check_copy(), path "<from>><to>").
 */
void repl_expect_clicks_copied(struct repl *r, const char *from,
                               const char *to, int64_t want);

/** @returns the number of records of @p rs whose value starts with
 *  "<tag>-". */
size_t rrecs_count_tag(const struct rrecs *rs, const char *tag);

#endif /* AAGW_TEST_REPL_H */
