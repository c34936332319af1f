/*
 * aagw - active-active replication gateway for Kafka
 *
 * tests/harness/harness.h: what end-to-end tests and benchmarks share:
 * temporary directories, child processes with deadlines, condition polling,
 * bootstraps files, kcat helpers, and clusters that are either an embedded
 * sandbox or real ones named in the environment.
 *
 * Rules the helpers follow, so that tests built on them do too:
 *  - Every wait has a deadline in milliseconds; nothing sleeps for a fixed
 *    time to "let things settle".  Conditions are polled.
 *  - Children get their stdout (and stderr) redirected, never the test's
 *    stdout, which carries the TAP stream.  They get SIGKILL when the
 *    thread that started them exits (PR_SET_PDEATHSIG), so a test that
 *    dies on a failed assertion leaks no sandbox.  Start children from
 *    the main thread, or from a thread that outlives them.
 *  - Errors come back as aagw_err_t plus a message in 'errstr', like the
 *    rest of aagw, so a test can assert on the code and print the reason.
 *
 * Environment:
 *  AAGW_BIN                     the aagw program (meson passes its path).
 *  KCAT                         the kcat program; "kcat" on PATH if unset.
 *  AAGW_TEST_BOOTSTRAPS_<ALIAS> bootstrap list of a real cluster for site
 *                               <ALIAS> (upper case, '-' as '_'); see
 *                               harness_clusters_new().  The tests' own
 *                               clients (kcat, librdkafka) use it.
 *  AAGW_TEST_GW_BOOTSTRAPS_<ALIAS>, AAGW_TEST_GW_PROPS_<ALIAS>,
 *  AAGW_TEST_JAVA_PROPS_<ALIAS>, AAGW_TEST_SECURITY_<ALIAS>
 *                               a secured listener of that cluster, for the
 *                               gateway under test only (see
 *                               harness_clusters_gw_args()).
 *  TMPDIR                       where temporary directories go (/tmp).
 */
#ifndef AAGW_HARNESS_H
#define AAGW_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aagw_gateway.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------- TIME AND NAMES ---------------------------- */

/** @returns milliseconds on the monotonic clock (for deadlines). */
int64_t harness_now_ms(void);

/**
 * @returns "<prefix>-<pid>-<n>-<ms>", unique within this process and very
 * likely across runs, for topic and group names: real clusters keep topics
 * between runs, and tests must never see each other's records.
 * malloc()ed; the caller frees it.  NULL only if out of memory.
 */
char *harness_unique_name(const char *prefix);

/* -------------------------- FILES AND DIRECTORIES ------------------------ */

/**
 * @brief Create a fresh directory "$TMPDIR/aagw-<tag>-XXXXXX" (/tmp when
 * TMPDIR is unset).
 * @returns its path, malloc()ed, or NULL with errno set.
 */
char *harness_tmpdir_new(const char *tag);

/** @brief Remove @p path and everything below it; symlinks are not
 *  followed.  @returns 0, or -1 with errno of the first failure. */
int harness_rmtree(const char *path);

/** @returns "<dir>/<name>", malloc()ed, or NULL if out of memory. */
char *harness_path_join(const char *dir, const char *name);

/**
 * @returns the whole content of @p path, NUL-terminated, malloc()ed, with
 * its length (without the NUL) in @p lenp if not NULL; or NULL with errno.
 */
char *harness_read_file(const char *path, size_t *lenp);

/* -------------------------------- WAITING -------------------------------- */

/** A condition to poll: @returns true once it holds. */
typedef bool(harness_cond_t)(void *arg);

/**
 * @brief Poll @p cond until it returns true or @p timeout_ms passed.
 * Polls quickly at first (1 ms), backing off to every 50 ms, so fast
 * conditions cost little latency and slow ones little CPU.  @p cond is
 * called at least once, and once more at the deadline.
 * @returns true if the condition held.
 */
bool harness_wait_until(harness_cond_t *cond, void *arg, int timeout_ms);

/** @returns true once @p path is a regular file of size > 0, false if
 *  that did not happen within @p timeout_ms. */
bool harness_wait_file(const char *path, int timeout_ms);

/* ---------------------------- CHILD PROCESSES ---------------------------- */

typedef struct harness_proc harness_proc_t;

/**
 * @brief Start @p argv (NULL-terminated; argv[0] is searched in PATH if it
 * has no '/') with stdin from /dev/null and stdout / stderr appended to
 * the given files (created 0644; NULL means /dev/null).
 *
 * The child gets default signal dispositions, an empty signal mask, the
 * test's environment, and SIGKILL when the calling thread exits.
 * @returns the handle, or NULL with the reason (including "exec failed")
 * in @p errstr.
 */
harness_proc_t *harness_proc_spawn(const char *const argv[],
                                   const char       *stdout_path,
                                   const char *stderr_path, char *errstr,
                                   size_t errstr_size);

/** @returns the child's pid. */
pid_t harness_proc_pid(const harness_proc_t *p);

/** @brief Send @p sig to the child (no-op once it was reaped).
 *  @returns 0 or -1 with errno. */
int harness_proc_signal(harness_proc_t *p, int sig);

/**
 * @brief Wait up to @p timeout_ms for the child to exit.
 * @returns AAGW_OK with the waitpid() status in @p status (may be NULL),
 * AAGW_ERR_TIMEOUT (the child keeps running), or AAGW_ERR_NOENT if
 * somebody else reaped it.  Waiting again after the child was reaped
 * returns the same status.
 */
aagw_err_t harness_proc_wait(harness_proc_t *p, int timeout_ms, int *status);

/** @brief SIGKILL the child if it still runs, reap it, free the handle.
 *  NULL is a no-op. */
void harness_proc_destroy(harness_proc_t *p);

/**
 * @returns the exit code for a waitpid() @p status the way a shell shows
 * it: the code for a normal exit, 128 + signal number for a death by
 * signal, -1 otherwise.
 */
int harness_exit_code(int status);

/* --------------------------- RUN TO COMPLETION --------------------------- */

/** What a finished command left behind. */
typedef struct harness_output {
        char  *out;     /**< stdout, NUL-terminated, malloc()ed */
        size_t out_len; /**< bytes in @c out without the NUL */
        char  *err;     /**< stderr, likewise */
        size_t err_len;
        int    status; /**< waitpid() status; see harness_exit_code() */
} harness_output_t;

/**
 * @brief Run @p argv to completion, feeding it @p in (@p in_len bytes; a
 * NULL @p in means stdin from /dev/null) and capturing stdout and stderr.
 *
 * If the command has not exited after @p timeout_ms it is killed with
 * SIGKILL and AAGW_ERR_TIMEOUT is returned; @p o still holds what it wrote
 * until then.
 * @returns AAGW_OK once the command exited, whatever its status: check
 * @p o->status.  Other errors mean it could not be started.  In every case
 * release @p o with harness_output_deinit().
 */
aagw_err_t harness_run(const char *const argv[], const void *in, size_t in_len,
                       int timeout_ms, harness_output_t *o, char *errstr,
                       size_t errstr_size);

/** Free the buffers of @p o and zero it. */
void harness_output_deinit(harness_output_t *o);

/* --------------------------------- LINES --------------------------------- */

/** A text split into lines.  A plain value type: read the fields freely. */
typedef struct harness_lines {
        char **v; /**< @c cnt lines without their '\n' */
        size_t cnt;
} harness_lines_t;

/** @brief Split @p text at '\n' into @p l; a trailing newline does not
 *  start an empty last line.  @returns 0, or -1 if out of memory. */
int harness_lines_split(const char *text, harness_lines_t *l);

/** Free the lines and zero @p l. */
void harness_lines_deinit(harness_lines_t *l);

/* ------------------------------- BOOTSTRAPS ------------------------------ */

/** alias -> bootstrap list, as `aagw sandbox` prints and writes them. */
typedef struct harness_bootstraps harness_bootstraps_t;

/**
 * @brief Parse `alias=bootstraps` lines.  Blank lines and lines starting
 * with '#' are skipped.
 * @returns the map, or NULL with "line N: reason" in @p errstr (no '=',
 * empty alias or list, duplicate alias, no lines at all).
 */
harness_bootstraps_t *harness_bootstraps_parse(const char *text, char *errstr,
                                               size_t errstr_size);

/** @brief harness_bootstraps_parse() on the content of @p path; errors
 *  read "path: ..." */
harness_bootstraps_t *harness_bootstraps_load(const char *path, char *errstr,
                                              size_t errstr_size);

/** @returns the number of aliases. */
size_t harness_bootstraps_cnt(const harness_bootstraps_t *b);

/** @returns alias @p idx in file order, or NULL; borrowed. */
const char *harness_bootstraps_alias(const harness_bootstraps_t *b, size_t idx);

/** @returns the bootstraps of @p alias or NULL; borrowed. */
const char *harness_bootstraps_get(const harness_bootstraps_t *b,
                                   const char                 *alias);

/** NULL is a no-op. */
void harness_bootstraps_destroy(harness_bootstraps_t *b);

/* -------------------------------- PROGRAMS ------------------------------- */

/** @returns $AAGW_BIN, or NULL if unset or empty (meson sets it). */
const char *harness_aagw_bin(void);

/** @returns $KCAT, or "kcat" (found on PATH) if unset or empty. */
const char *harness_kcat_bin(void);

/** @returns true if harness_kcat_bin() names an executable file.  Tests
 *  that need kcat skip when it is missing: it is an optional tool. */
bool harness_kcat_available(void);

/* --------------------------------- KCAT ---------------------------------- */

/** One record for harness_kcat_produce(). */
typedef struct harness_record {
        const char *key;   /**< NULL: no key (the partitioner picks) */
        const char *value; /**< not NULL */
} harness_record_t;

/**
 * @brief Produce @p cnt records to @p topic with
 * `kcat -P -b B -t T -K \x1f -D \x1e [-H h]... [-p P]`, the records fed on
 * stdin; kcat waits for every delivery report before it exits.  The
 * producer is idempotent, so records keep their order per partition even
 * across retries.
 *
 * @param headers    NULL, or a NULL-terminated list of "name=value" added
 *                   to every record.
 * @param partition  the partition for every record, or -1 to let the
 *                   (key-hashing) partitioner choose.
 * @returns AAGW_OK once kcat exited 0; AAGW_ERR_INVAL if a key or value
 * contains the \x1e or \x1f separators; AAGW_ERR_KAFKA with kcat's stderr
 * in @p errstr if kcat failed; AAGW_ERR_TIMEOUT after @p timeout_ms.
 */
aagw_err_t harness_kcat_produce(const char *bootstraps, const char *topic,
                                const harness_record_t *recs, size_t cnt,
                                const char *const *headers, int partition,
                                int timeout_ms, char *errstr,
                                size_t errstr_size);

/**
 * @brief Read @p topic from the beginning to the current end of every
 * partition with `kcat -C -b B -t T -o beginning -e -q -f FORMAT`.
 *
 * @param format  kcat's -f format, e.g. "%p %o %k %s\n" (partition,
 *                offset, key, value); every record must end in one '\n'
 *                for the output to split into one line per record.
 * @param lines   receives the output lines; release with
 *                harness_lines_deinit().
 * @remark A topic that does not exist reads as empty (no lines, AAGW_OK)
 *         and is not created, on real and embedded clusters alike.
 */
aagw_err_t harness_kcat_consume(const char *bootstraps, const char *topic,
                                const char *format, int timeout_ms,
                                harness_lines_t *lines, char *errstr,
                                size_t errstr_size);

/**
 * @returns the partition count of @p topic according to `kcat -L`, 0 if
 * kcat does not list the topic, or -1 with the reason in @p errstr.
 */
int harness_kcat_partition_cnt(const char *bootstraps, const char *topic,
                               int timeout_ms, char *errstr,
                               size_t errstr_size);

/* ------------------------------- CLUSTERS -------------------------------- */

/** A set of clusters by alias: real ones or an embedded sandbox. */
typedef struct harness_clusters harness_clusters_t;

/**
 * @brief Clusters for @p aliases.
 *
 * If AAGW_TEST_BOOTSTRAPS_<ALIAS> is set for every alias, those clusters
 * are used and nothing is started; if it is set for none, an
 * aagw_sandbox_t with @p brokers brokers per cluster is started in this
 * process.  Setting it for some aliases only is an error: a test half on
 * real clusters would pass for the wrong reasons.
 * @returns the clusters, or NULL with the reason in @p errstr.
 */
harness_clusters_t *harness_clusters_new(const char *const *aliases,
                                         size_t alias_cnt, int brokers,
                                         char *errstr, size_t errstr_size);

/**
 * @brief Real clusters for @p aliases as a `scripts/kafka-clusters
 * --env-file` wrote them: NAME=VALUE lines with the variables
 * harness_clusters_new() reads from the environment.  For tests that start
 * their own launcher.  Every alias must have its AAGW_TEST_BOOTSTRAPS_
 * line.
 * @returns the clusters, or NULL with the reason in @p errstr.
 */
harness_clusters_t *harness_clusters_load(const char        *env_file,
                                          const char *const *aliases,
                                          size_t alias_cnt, char *errstr,
                                          size_t errstr_size);

/** @returns true if the clusters came from the environment. */
bool harness_clusters_are_real(const harness_clusters_t *hc);

/** @returns the bootstraps of @p alias or NULL; borrowed.  On a secured
 *  cluster this is its plaintext listener: the one for the tests' own
 *  clients and tools, never for the gateway under test. */
const char *harness_clusters_bootstraps(const harness_clusters_t *hc,
                                        const char               *alias);

/** @returns the bootstraps the gateway under test is to use for @p alias:
 *  the secured listener (AAGW_TEST_GW_BOOTSTRAPS_<ALIAS>) if the cluster
 *  has one, else harness_clusters_bootstraps(); NULL for an unknown
 *  alias.  Borrowed. */
const char *harness_clusters_gw_bootstraps(const harness_clusters_t *hc,
                                           const char               *alias);

/**
 * @brief The aagw arguments that give it cluster @p alias: "--cluster",
 * "ALIAS=BOOTSTRAPS" (harness_clusters_gw_bootstraps()), then for a
 * secured cluster "--set", "clusters.ALIAS.properties.KEY=VALUE" for each
 * line of its librdkafka settings file (AAGW_TEST_GW_PROPS_<ALIAS>, read
 * by harness_clusters_new()).
 *
 * The words are stored in @p argv[0..]; they are borrowed from @p hc and
 * stay valid until harness_clusters_destroy().  Nothing is NULL-terminated.
 * @returns the number of words stored (at least 2), or 0 if @p alias is
 * unknown or they do not fit in @p room.
 */
size_t harness_clusters_gw_args(const harness_clusters_t *hc,
                                const char *alias, const char **argv,
                                size_t room);

/** @returns the kind of the secured listener of @p alias
 *  (AAGW_TEST_SECURITY_<ALIAS>: "scram-sha-512", "mtls", ...), or
 *  "plaintext"; borrowed. */
const char *harness_clusters_security(const harness_clusters_t *hc,
                                      const char               *alias);

/** @returns the Java clients' settings file for the secured listener of
 *  @p alias (AAGW_TEST_JAVA_PROPS_<ALIAS>: MirrorMaker 2's `ALIAS.` keys,
 *  a tool's --command-config), or NULL if it has none; borrowed. */
const char *harness_clusters_java_props(const harness_clusters_t *hc,
                                        const char               *alias);

/** @returns the librdkafka settings file for the secured listener of
 *  @p alias (AAGW_TEST_GW_PROPS_<ALIAS>, whose lines
 *  harness_clusters_gw_args() passes as --set), or NULL if it has none;
 *  borrowed. */
const char *harness_clusters_gw_props(const harness_clusters_t *hc,
                                      const char               *alias);

/** @returns the sandbox (for fault injection), or NULL on real clusters;
 *  borrowed. */
aagw_sandbox_t *harness_clusters_sandbox(const harness_clusters_t *hc);

/**
 * @brief Create @p topic with @p partitions on cluster @p alias, or on
 * every cluster if @p alias is NULL, and wait until its metadata shows all
 * partitions.  Real clusters get it through the Admin API with the
 * broker's default replication factor.  An existing topic with the same
 * partition count is not an error.
 */
aagw_err_t harness_clusters_create_topic(harness_clusters_t *hc,
                                         const char *alias, const char *topic,
                                         int partitions, char *errstr,
                                         size_t errstr_size);

/** Stop the sandbox, if any, and free. NULL is a no-op. */
void harness_clusters_destroy(harness_clusters_t *hc);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_HARNESS_H */
