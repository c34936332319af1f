/*
 * tests/interop/interop.h: what the MirrorMaker 2 interop tests share.
 *
 * They run on real Apache Kafka only (meson suite `kafka`): two clusters,
 * east and west, from AAGW_TEST_BOOTSTRAPS_EAST / _WEST when both are set,
 * else started by the test itself (scripts/kafka-clusters with an env
 * file), secured as AAGW_TEST_SECURITY says ("east=scram-sha-512
 * west=mtls": the launcher's --security for each word; meson sets it).
 * The gateways, MirrorMaker 2 and MM2's client code get the clusters'
 * secured listeners, if any; the tests' own clients (kcat, librdkafka,
 * Kafka's tools) the plaintext ones.  MirrorMaker 2's own Java code runs as child JVMs from
 * the jar folder of scripts/kafka-fetch: aagw.kafka.Mm2Interop answers
 * MirrorClient / RemoteClusterUtils queries as JSON lines, and
 * org.apache.kafka.connect.mirror.MirrorMaker replicates.  A missing Java
 * or jar folder fails the test: in this suite nothing is optional.
 */
#ifndef AAGW_TEST_INTEROP_H
#define AAGW_TEST_INTEROP_H

#include <json-c/json.h>
#include <librdkafka/rdkafka.h>

#include "harness.h"

#define IO_CMD_MS 60000 /* one aagw command or query JVM */

struct io {
        char                 *dir;      /* the test's temporary directory */
        harness_proc_t       *launcher; /* scripts/kafka-clusters, or NULL */
        bool                  own;      /* clusters started by the test */
        harness_clusters_t   *hc;       /* the clusters */
        char                 *lib;      /* the jar folder */
        rd_kafka_t           *admin[2]; /* east, west */
        char                 *run_dir;  /* the launcher's --dir, or NULL */
        harness_proc_t       *procs[8]; /* gateways, MM2 */
        size_t                nprocs;
        char                  errstr[2048];
};

/* Clusters and the jar folder (asserts on failure); io_end() stops what
 * the test started. */
void io_begin(struct io *io, const char *tag);

/* The temporary directory and the jar folder only, for MM2 code that
 * needs no cluster (io_mm2_query() of "names" or "mm2config"). */
void io_begin_java(struct io *io, const char *tag);
void io_end(struct io *io);

/* "east" or "west" bootstraps: the plaintext listener, for the tests' own
 * clients and tools. */
const char *io_bs(struct io *io, const char *alias);

/* The bootstraps the gateway, MirrorMaker 2 and MM2's client code use:
 * the secured listener if the cluster has one (io_mm2_query() passes its
 * settings along). */
const char *io_gw_bs(struct io *io, const char *alias);

/* Create 'topic' with 'partitions' at 'alias'. */
void io_topic(struct io *io, const char *alias, const char *topic,
              int partitions);

/* Produce 'cnt' records "<tag>-<i>" to 'topic' ['partition'] at 'alias'. */
void io_produce(struct io *io, const char *alias, const char *topic,
                int32_t partition, int cnt, const char *tag);

/* Commit 'offset' for 'group' on 'topic' ['partition'] at 'alias', with
 * the metadata io_commit_metadata() makes. */
void io_commit(struct io *io, const char *alias, const char *group,
               const char *topic, int32_t partition, int64_t offset);

void io_commit_metadata(char *buf, size_t size, const char *group,
                        int32_t partition);

/* High watermark of 'topic' ['partition'] at 'alias', -1 on error. */
int64_t io_end_offset(struct io *io, const char *alias, const char *topic,
                      int32_t partition);

/* Every record of 'topic' [0] at 'alias' from the start to the current
 * end, raw, to 'fn'; returns the count, -1 if the topic cannot be read. */
typedef void(io_rec_fn)(void *arg, const rd_kafka_message_t *m);
long io_read(struct io *io, const char *alias, const char *topic,
             int32_t partition, io_rec_fn *fn, void *arg);

/* Start a child process whose output goes to DIR/<name>.log; it is
 * stopped (SIGTERM, then SIGKILL) by io_end(). */
harness_proc_t *io_spawn(struct io *io, const char *name,
                         const char *const *argv);

/* `aagw run` from 'primary' to the other cluster (active-passive, unify
 * off, checkpoints every second) with 'extra' flags. */
harness_proc_t *io_gateway(struct io *io, const char *name,
                           const char *primary, const char *const *extra);

/* `scripts/kafka-clusters ctl VERB ALIAS 1` on the test's own clusters
 * (term: stop the broker cleanly; kill; start); asserts it worked. */
void io_ctl(struct io *io, const char *verb, const char *alias);

/* Run `aagw WORDS... --cluster east=.. --cluster west=..`; returns the
 * exit code; output in 'o' (caller deinits). */
int io_aagw(struct io *io, const char *const *words, harness_output_t *o);

/* Print "# <head>: exit <rc>", then every line of o's stdout (and of
 * its stderr if 'with_err') as a TAP comment: meson's TAP parser warns
 * about any line that is not one. */
void io_show(const char *head, int rc, const harness_output_t *o,
             bool with_err);

/* Run aagw.kafka.Mm2Interop with 'args' (one JVM), the clusters' Java
 * client settings given as --config for their io_gw_bs(); returns the answers,
 * one JSON object per query in order (json_object_put() the array).
 * Asserts that the JVM ran and answered every query. */
json_object *io_mm2_query(struct io *io, const char *const *args,
                          size_t nqueries);

/* Real MirrorMaker 2 (dedicated mode, one JVM; log in DIR/mm2.log)
 * replicating east->west the topics matching 'topics', with settings for
 * one-broker test clusters (heartbeats and checkpoints every second) and
 * 'extra' (more "key=value\n" lines, may be NULL).  Stopped by io_end(). */
harness_proc_t *io_mm2(struct io *io, const char *topics, const char *extra);

/* A java command line for 'main' with the jar folder and a log4j2
 * configuration writing to DIR/<log>; 'argv' must hold 16 + 'nargs'. */
void io_java_argv(struct io *io, const char **argv, const char *log,
                  const char *main, const char *const *args, size_t nargs);

/* Sets of strings from a JSON array. */
bool io_json_has(json_object *arr, const char *s);

#endif
