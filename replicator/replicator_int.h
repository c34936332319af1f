/*
 * replicator/replicator_int.h: what the files of replicator/ share.  Not
 * for other folders.
 */
#ifndef AAGW_REPLICATOR_INT_H
#define AAGW_REPLICATOR_INT_H

#include <stdatomic.h>

#include "aagw_replicator.h"

#include <pthread.h>
#include <stdatomic.h>

/* Counters have one writer, the stage's thread (delivery reports run in
 * its rd_kafka_poll()): a relaxed load and store, no read-modify-write. */
#define RELAXED memory_order_relaxed
#define ADD(x, n) AAGW_STAT_ADD(x, n)
#define INC(x) ADD(x, 1)

/* ------------------- SHARED MECHANICS (kafka_common.c) ------------------- */

/* Wait for the answer of an admin call on 'q' (request timeout
 * 'timeout_ms'): the result event, or NULL with the reason in 'errstr'
 * ('timed_out' set when it is only late: no answer, a timeout or a
 * transport error) if there is none or it failed as a whole. */
rd_kafka_event_t *aagw_kafka_admin_answer(rd_kafka_queue_t *q, int timeout_ms,
                                          bool *timed_out, char *errstr,
                                          size_t errstr_size);

/* rd_kafka_metadata() that gives up when '*stop' is set: asked in
 * slices until 'timeout_ms' has passed (half a second while no broker
 * is reachable; growing to 2 s while a cluster is slow to answer), so a
 * stage that discovers topics while its cluster is unreachable stops
 * within half a second (2 s at most), not at the end of the request
 * timeout.  Returns rd_kafka_metadata()'s result, or
 * RD_KAFKA_RESP_ERR__INTR (nothing in '*mdp') once '*stop' was set. */
rd_kafka_resp_err_t aagw_kafka_metadata(rd_kafka_t *rk, bool all_topics,
                                        rd_kafka_topic_t *only,
                                        const struct rd_kafka_metadata **mdp,
                                        int timeout_ms,
                                        const atomic_bool *stop);

/* The outcome of the one resource of a DescribeConfigs or AlterConfigs
 * answer ('rr', 'rn' as the result gives them): its error, with the
 * broker's message (or the error's name) in 'err'; __FAIL if the answer
 * names no resource. */
rd_kafka_resp_err_t aagw_kafka_config_err(
    const rd_kafka_ConfigResource_t **rr, size_t rn, char *err,
    size_t err_size);

/* rd_kafka_queue_poll() for an admin answer that gives up once the
 * process stops (aagw_kafka_process_stop()). */
rd_kafka_event_t *replicator_queue_wait(rd_kafka_queue_t *q, int timeout_ms);

/* One client to destroy: rd_kafka_destroy_flags(rk, flags); rk may be
 * NULL. */
struct replicator_doomed {
        rd_kafka_t *rk;
        int         flags;
};

/* Destroy 'n' clients at once, one thread each, and return when all are
 * gone.  A librdkafka destroy can wait up to a second for a broker
 * thread that missed its wake-up, and a stage has up to nine clients:
 * one after another that added up to several seconds of a stop. */
void replicator_destroy_clients(const struct replicator_doomed *v, size_t n);

/* rd_kafka_destroy_flags(), logging a WARN line naming the client when
 * it took a second or more; NULL is a no-op. */
void replicator_destroy_timed(rd_kafka_t *rk, int flags);

/* Close consumer @p c (leave its group, finish its commits) within
 * @p ms, serving a revocation meanwhile; NULL is a no-op.  A plain
 * rd_kafka_consumer_close() waits for a pending offset commit until the
 * coordinator answers, which a cluster that went away never does.
 * Destroy it afterwards with RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE.
 * @returns true if it closed in time. */
bool replicator_consumer_close(rd_kafka_t *c, int ms);

/* rd_kafka_query_watermark_offsets() that a stop does not wait for: the
 * question is asked for at most half a second at a time, again while a
 * broker does not answer (timed out, transport failure) and
 * @p timeout_ms allows, and no more once the process stops.  librdkafka
 * holds a single call for its whole timeout when the leader is gone. */
rd_kafka_resp_err_t replicator_watermarks(rd_kafka_t *rk, const char *topic,
                                          int32_t partition, int64_t *lo,
                                          int64_t *hi, int timeout_ms);

/* How long a stage's consumers get to close: short once the process
 * stops (a healthy cluster answers in milliseconds, one that is gone
 * never). */
#define REPLICATOR_CLOSE_MS() aagw_kafka_stop_wait_ms(10000)

/* Where a producer's delivery reports go: 'fn' gets each record's token
 * (the produce opaque; reports without one are not passed on).  Lives as
 * long as the producer. */
struct replicator_delivery {
        void (*fn)(void *stage, void *tok, const rd_kafka_message_t *m);
        void *stage;
};

/* What every client of one flow or stage has in common. */
struct replicator_client {
        rd_kafka_type_t    type;
        const char        *who; /* client.id prefix: "east->west" */
        const char        *bootstraps;
        const char *const *props;
        size_t             prop_cnt;
        void              *opaque; /* the rebalance callback's */
        const struct replicator_delivery *delivery; /* the producer's */
        void (*rebalance_cb)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t *parts,
                             void *opaque);
        const char *const *last; /* after the operator's properties */
};

/* A client of 'role': "consumer" (the data consumer: managed consumer
 * settings and the rebalance callback, if any), "lease" (a group member
 * that reads nothing: consumer properties and the rebalance callback),
 * "reader" (an assign-only consumer), "producer" (delivery reports),
 * "admin" or "meta" (admin properties).  Client id "WHO-ROLE". */
rd_kafka_t *replicator_client(const struct replicator_client *c,
                              const char *role, const char *const *extra,
                              char *errstr, size_t errstr_size);

/* The lifecycle state of a flow or stage and how it fails closed. */
struct replicator_ctl {
        pthread_mutex_t lock;
        char            error[1024]; /* the first failure */
        _Atomic int     state;      /* aagw_flow_state_t */
        atomic_bool     stop;
        const char     *tag;        /* log tag: "FLOW", "UNIFY" */
        char            who[2 * AAGW_ALIAS_MAX + 16]; /* "east->west:" */
        /* Implicit acknowledgements since the last line that told of
         * them, and when that was (replicator_implicit_ack()). */
        uint64_t implicit_acks;
        int64_t  implicit_logged_ms;
};

void replicator_ctl_init(struct replicator_ctl *ctl, const char *tag,
                         const char *who);
void replicator_ctl_deinit(struct replicator_ctl *ctl);
/* Fail closed: keep (and log) the first reason, state FAILED, stop. */
void replicator_fail(struct replicator_ctl *ctl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void replicator_ctl_error(const struct replicator_ctl *ctl, char *buf,
                          size_t size);

/* A request to cluster 'alias' failed with 'err': if that is a denial
 * (TOPIC_, GROUP_, TRANSACTIONAL_ID_, CLUSTER_ or
 * DELEGATION_TOKEN_AUTHORIZATION_FAILED), note it in the access registry
 * (aagw_access_note(), an ERROR of facility ACCESS once per new cause)
 * naming the ACL operation the request needed ('operation': "READ",
 * "WRITE", "CREATE", "ALTER_CONFIGS", ...) and the resource, formatted
 * from 'fmt': "topic T", "group G", "transactional.id X", several joined
 * by ", " when the request touched more than one kind (a consumer's topic
 * and group); the one the error names is kept.  Any other 'err' costs a
 * comparison and nothing else: call it on error branches only.
 * Returns true if 'err' was a denial. */
bool replicator_note_authz(const char *alias, rd_kafka_resp_err_t err,
                           const char *operation, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for client 'rk', whose cluster is told by its bootstraps
 * (aagw_access_alias_of()): for code that holds a client, not an alias. */
bool replicator_note_authz_rk(const rd_kafka_t *rk, rd_kafka_resp_err_t err,
                              const char *operation, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A per-record token (the produce opaque) starts with this: the consumed
 * record, whose key and value are produced without a copy. */
struct replicator_token {
        rd_kafka_message_t *src;
};

/* A zeroed token from 'pool' (pool->size bytes), NULL: out of memory. */
void *replicator_token_get(struct aagw_pool *pool);
/* Destroy its record, if any, and give it back. */
void replicator_token_put(struct aagw_pool *pool, struct replicator_token *t);

/* Produce 'm''s key and value (no copy) with 'hdrs', waiting out a full
 * local queue (backpressure) while serving delivery reports (and setting
 * '*now_cache', if not NULL, after each wait).  Returns 0, or the error:
 * anything but a full queue, or a full queue once 'stop' is set. */
rd_kafka_resp_err_t replicator_produce(rd_kafka_t *producer,
                                       rd_kafka_topic_t *rkt,
                                       int32_t partition,
                                       const rd_kafka_message_t *m,
                                       rd_kafka_headers_t *hdrs, int64_t ts,
                                       void *opaque, const atomic_bool *stop,
                                       int64_t *now_cache);

/* The headers for 'm''s copy: taken from 'm' (not copied) without those
 * under the header prefix, or new ones with room for 'reserve'.  'own'
 * false: 'm' has none of ours (nothing to strip).  'view' (may be NULL)
 * is aagw_kafka_headers_view() of 'm': it spares a pass for most
 * records. */
rd_kafka_headers_t *replicator_copy_headers(const aagw_repl_policy_t *pol,
                                            rd_kafka_message_t *m,
                                            const struct aagw_header *view,
                                            size_t view_cnt, bool own,
                                            size_t reserve);

/* Partition count of 'topic' in 'md', -1 if absent. */
int replicator_md_partitions(const struct rd_kafka_metadata *md,
                             const char *topic);

/* Who makes missing topics at one cluster, and how. */
struct replicator_topic_maker {
        rd_kafka_t *admin;
        rd_kafka_t *producer; /* NULL: no auto-creation */
        const char *tag, *who, *cluster;
        bool       *admin_unsupported; /* set once the Admin API is not
                                          there: auto-creation only */
};

/* Create missing 'topic' with 'partitions' through the Admin API, or have
 * the producer's cluster auto-create it.  Returns its partition count, or
 * -1 (try again later). */
int replicator_topic_make(const struct replicator_topic_maker *tm,
                          const char *topic, int partitions);

/* The start check.  A partition assigned (or sought) at an explicit
 * offset must hand over its first record at that offset.  A later one can
 * be legitimate (compaction, a transaction marker, retention), but it is
 * also what a consumer that started at the wrong place looks like:
 * librdkafka 2.0 was seen starting a partition assigned at an explicit
 * offset one fetch of its backlog later (tests/realkafka/README.md,
 * "Settled"), and a stage that took the jump as compaction stored its
 * position over records it never took in.  So the first record past the
 * assigned offset is dropped and the partition sought back once; only a
 * second fetch that starts at the same later offset is believed.  One per
 * partition, in the flow's or stage's thread. */
struct replicator_start {
        bool     pending;      /* no record taken since the assignment */
        int64_t  refetched_at; /* offset sought back to, -1: none */
        uint64_t seek_batch;   /* the consume batch of that seek */
};

/* Who checks: the consumer to seek, the log's tag and name, the consume
 * batch being handled (records of the batch that held the jump were
 * fetched before the seek) and the counter of seeks back. */
struct replicator_start_ctx {
        rd_kafka_t       *consumer;
        const char       *tag; /* "FLOW", "UNIFY" */
        const char       *who; /* "east->west", "unify@west" */
        uint64_t          batch_no;
        _Atomic uint64_t *refetches;
};

/* Arm the check of a partition just assigned at 'offset'; a logical
 * offset (negative: the beginning, the end) has nothing to check. */
void replicator_start_arm(struct replicator_start *s, int64_t offset);

/* The first record of 'topic' ['partition'] since the check was armed
 * (s->pending) came at 'offset'; 'expected' is the assigned offset (the
 * caller drops records below it as re-fetched).  Logs what it finds;
 * returns true if the caller is to drop the record because a seek back to
 * 'expected' is under way (then the check stays pending), false if the
 * record is to be taken (the check is done: it was at 'expected', or the
 * second fetch confirmed the jump). */
bool replicator_start_take(struct replicator_start *s,
                           const struct replicator_start_ctx *c,
                           const char *topic, int32_t partition,
                           int64_t expected, int64_t offset);

/* ------------------------- A PARTITION'S TRUE END ------------------------ */

/* The client properties (NULL-terminated KEY, VALUE list, in 'kv') of
 * the assign-only consumer that replicator_log_ends_at() asks through,
 * with group id 'group' (never joined): it reports an offset out of
 * range, never resets it.  Returns 'kv'. */
#define REPLICATOR_END_PROBE_KV 13
const char *const *replicator_end_probe_props(const char *group,
                                              const char **kv);

/* Whether the leader's log of 'topic' ['partition'] ends at 'hi', the
 * high watermark a ListOffsets just answered, or holds records after it.
 * A consumer sees only up to the high watermark, and the watermark stays
 * behind the log while a replica in the ISR has not fetched the tail
 * (one that died is in the ISR until the controller fences it, 9 s by
 * default): records a killed writer left there are invisible to a scan
 * up to 'hi', and become visible later.  Asked with a fetch at 'hi' + 1
 * through 'probe' (assign-only, replicator_end_probe_props): the broker
 * answers "offset out of range" only when that offset is past its log
 * end, and an empty fetch when it is in the log but above the watermark.
 * Returns true on the out-of-range answer within 'timeout_ms'; false when
 * records came (the watermark moved), nothing came, or it failed. */
bool replicator_log_ends_at(rd_kafka_t *probe, const char *topic,
                            int32_t partition, int64_t hi, int timeout_ms);

/* Wait until the high watermark of 'topic' ['partition'] is the end of
 * its leader's log (replicator_log_ends_at()), querying the watermarks
 * through 'reader' again each round; '*lo' and '*hi' are those of the
 * last query (the caller's, to start with).  For a partition only the
 * caller writes, which it does not while it waits, the wait ends once
 * the replicas caught up or the ISR dropped the one that holds the
 * watermark back.  Logs the wait once (tag, who).  Returns 0 once it
 * holds, 1 if 'wait_ms' passed first, -1 if '*stop' was set. */
int replicator_settle_end(rd_kafka_t *reader, rd_kafka_t *probe,
                          const char *topic, int32_t partition, int64_t *lo,
                          int64_t *hi, int wait_ms, const atomic_bool *stop,
                          const char *tag, const char *who);

/* Fetch 'topic''s metadata now through 'probe' and 'reader' (the
 * handles that ask replicator_log_ends_at()'s question and scan the
 * topic's tail), before their first assign() of it.  Without it, the
 * first fetch of a topic new to a handle waited 0.7-1 s for its leader
 * (fits librdkafka 2.0.2's once-a-second scan of leaderless topics; not
 * confirmed in its source): in a kept real-Kafka run a restarted flow
 * spent that on each of its three topics in turn, on both handles,
 * before copying anything; primed, the first answer came 15-75 ms after
 * the topic was found. */
void replicator_prime_topic(rd_kafka_t *probe, rd_kafka_t *reader,
                            const char *topic);

/* One partition a flow or stage writes (replicator_settle_all()); 'hi'
 * is set to its high watermark. */
struct replicator_end {
        const char *topic;
        int32_t     partition;
        int64_t     hi;
};

/* Wait until every partition in 'ends' (all that one producer of the
 * caller writes) ends at its high watermark, in two rounds END_ROUND_MS
 * apart that find the same watermarks.  A broker handles one request of a
 * connection at a time: while a produce request of a killed run waits
 * for its ISR (a follower that died and is not fenced yet), the run's
 * next requests stay unread in the socket and are appended when the
 * first completes, seconds later, to any partition (a kafka-target_kill
 * run had 250 records appended after the restart had reconciled their
 * partition, and copied them again).  The held request leaves a log
 * ahead of its watermark on some partition of that producer; once none
 * is, what it held back has been appended (the second round sees it).
 * A partition whose leader does not answer counts as settled (nothing
 * held can land there); one that answers must end at its watermark.
 * Watermarks that keep growing for 2 s mean another writer (a second
 * process with the same identity): logged, and returns 0.
 * Logs the wait once (tag, who).  Returns 0, 1 if 'wait_ms' passed
 * first, -1 if '*stop' was set. */
int replicator_settle_all(rd_kafka_t *reader, rd_kafka_t *probe,
                          struct replicator_end *ends, size_t n, int wait_ms,
                          const atomic_bool *stop, const char *tag,
                          const char *who);

/* ------------------------ LIBRDKAFKA 2.0'S PRODUCER ---------------------- */

/* Fresh metadata of 'topic' for 'rk', waited for up to 'timeout_ms': a
 * client left on a leader that died keeps asking it until its next
 * periodic refresh (librdkafka 2.0: minutes).  A producer made while a
 * broker was down keeps that broker as the leader it knew; its first
 * batches then meet "not leader", and librdkafka 2.0.2 can lose records
 * in the leader change that follows (replicator_implicit_ack()), so flows
 * ask through their producer before the first copies after a start-up
 * scan.  Best effort: a failure only leaves the old leaders in place. */
void replicator_refresh_leaders(rd_kafka_t *rk, const char *topic,
                                int timeout_ms);

/* The Kafka waits of this file (watermarks, metadata, leaders, settling
 * a partition's end, admin answers) end early when the process stops,
 * and on a side thread also when its stage stops: the thread names the
 * stage's stop flag once (NULL: none) with replicator_thread_stop_flag().
 * A stage's destroy joins its side threads, and a job under way on a
 * target that stopped answering would otherwise hold it for the job's
 * whole timeout (seconds). */
void replicator_thread_stop_flag(const atomic_bool *stop);
bool replicator_stopping(void);

/* A delivery report without an error but without an offset: librdkafka
 * acknowledged the record implicitly, because a later batch of its
 * partition succeeded.  With an idempotent producer that is sound: the
 * partition's leader takes a producer's batches only in sequence, so the
 * later one proves this one written (its own answer was lost, e.g. with
 * the leader that died holding it; kafka-leader_kill meets it).
 * librdkafka before 2.8.0 (2.0.2 seen) also did it to a batch refused
 * with "not leader" when the partition had moved meanwhile: it sent the
 * later batches to the new leader first, which took them (a leader
 * accepts any first sequence of a producer id it holds no state for),
 * and the refused records were reported delivered without ever being
 * written (kafka-target_kill: 94 + 110 records missing from
 * clicks.unified, IMPLICITACK in the client's debug log).
 * With a librdkafka that keeps a refused batch first, returns true: the
 * caller counts the record delivered at an unknown offset (noted in the
 * log at most once a minute per 'ctl').  With an older one, fails 'ctl'
 * closed, naming the record ('topic' ['partition'] at the target, the
 * copy of 'src_topic' ['src_partition'] at 'src_offset'), and returns
 * false: the caller must not count it delivered. */
bool replicator_implicit_ack(struct replicator_ctl *ctl, const char *topic,
                             int32_t partition, const char *src_topic,
                             int32_t src_partition, int64_t src_offset);
/* The same for librdkafka version 'lib' (rd_kafka_version()'s form):
 * what the tests call to see both answers. */
bool replicator_implicit_ack_lib(struct replicator_ctl *ctl, int lib,
                                 const char *topic, int32_t partition,
                                 const char *src_topic, int32_t src_partition,
                                 int64_t src_offset);

/* ------------------------- METADATA WATCH (md_watch.c) ------------------- */

/* A cluster's metadata (all topics) asked for every 'interval_ms' on a
 * thread of its own, so that the stage thread never waits a round trip
 * for it; the stage takes the newest answer when it is ready. */
typedef struct aagw_md_watch aagw_md_watch_t;

/* 'rk' is borrowed and must outlive the watch; a request in progress ends
 * when 'stage_stop' (may be NULL) or the process stops.  NULL: no
 * thread. */
aagw_md_watch_t *aagw_md_watch_new(rd_kafka_t *rk, int interval_ms,
                                   const atomic_bool *stage_stop);
/* The newest answer since the last take: true with 'err' and 'md' (NULL
 * on an error; the caller destroys it), false if none came since. */
bool aagw_md_watch_take(aagw_md_watch_t *w, rd_kafka_resp_err_t *err,
                        const struct rd_kafka_metadata **md);
/* Ask for the metadata now instead of at the end of the interval (a
 * stage that has something to act on at its next discovery). */
void aagw_md_watch_kick(aagw_md_watch_t *w);
/* Stop and join the thread (a request in progress ends within its
 * 0.5-2 s slice). */
void aagw_md_watch_destroy(aagw_md_watch_t *w);

/* ------------------------ MM2 TOPICS OF ONE FLOW (mm2.c) ------------------ */

/* The MM2-format side of a flow: heartbeats into the source's `heartbeats`
 * topic, offset-syncs (written from the flow thread through mm2_sync()),
 * checkpoints for consumer groups, on a thread of its own so that slow
 * Admin API calls never stall the data path. */
struct mm2;

/* 'target_producer' is the flow's (borrowed; outlives the mm2). */
struct mm2 *mm2_new(aagw_flow_t *flow, const struct aagw_flow_conf *c,
                    rd_kafka_t *target_producer, char *errstr,
                    size_t errstr_size);
int         mm2_start(struct mm2 *m, char *errstr, size_t errstr_size);
/* Ask the thread to stop (returns at once; thread-safe): slow Admin API
 * calls in progress are abandoned. */
void mm2_stop(struct mm2 *m);
/* Stop the thread, flush what was produced (up to 'timeout_ms'), free.
 * NULL is a no-op. */
void mm2_destroy(struct mm2 *m, int timeout_ms);

/* Write one offset-sync: source 'topic' ['partition'] offset 'upstream'
 * is (or goes) at 'downstream' in the target.  Flow thread only; never
 * blocks. */
void mm2_sync(struct mm2 *m, const char *topic, int32_t partition,
              int64_t upstream, int64_t downstream, bool lossy);

/* Counters for aagw_flow_stats(). */
void mm2_stats(const struct mm2 *m, struct aagw_flow_stats *st);

/* Whether the flow writes the per-flow MM2 records (heartbeats): always
 * as the only process of its site; under scale-out only while it owns
 * work partition 0 (flow.c).  Thread-safe. */
bool flow_leads_mm2(const aagw_flow_t *flow);
/* Whether the flow runs under scale-out (its copied partitions are its
 * assigned ones, each copied by one process of the site). */
bool flow_scaled(const aagw_flow_t *flow);

/* Whether 'topic' is the heartbeats topic this deployment writes. */
bool mm2_is_heartbeats(const char *topic);

/* ------------------------------ GROUPS (groups.c) ------------------------ */

/* The calling thread's group calls give up once '*flag' is set (the mm2
 * thread's stop); NULL: they wait out their timeouts. */
void groups_cancel_on(atomic_bool *flag);

/* ------------- TAKING OVER FROM MIRRORMAKER 2 (takeover.c) ------------- */

/* Where a flow partition with no stored position resumes when its target
 * partition was filled by another replicator: from that replicator's
 * offset-syncs and the target's tail, checked against the source. */
struct takeover;

/* 'c' and 'pol' are the flow's (borrowed; outlive the takeover). */
struct takeover *takeover_new(const struct aagw_flow_conf *c,
                              const aagw_repl_policy_t *pol, const char *name,
                              char *errstr, size_t errstr_size);
/* NULL is a no-op. */
void takeover_destroy(struct takeover *t);

/* The source offset where 'topic' ['partition'] resumes, given that its
 * target partition 'remote' holds offsets ['lo', 'hi') and its last
 * record is not this flow's; read through 'reader' (the flow's target
 * reader, assign-only).  '*exact': the target's last record was found at
 * the source, so the offset repeats and skips nothing; otherwise it is
 * after the newest offset-sync (repeats at most what was copied after
 * it).  -1: no offset-sync to go by.  Logs what it decided, with the
 * offsets.  Flow thread only. */
int64_t takeover_position(struct takeover *t, rd_kafka_t *reader,
                          const char *topic, const char *remote,
                          int32_t partition, int64_t lo, int64_t hi,
                          const atomic_bool *stop, bool *exact);

/* ------------------- REMOTE TOPICS OF ONE FLOW (topics.c) ----------------- */

/* Creation, growth, config and ACL sync of a flow's remote topics, on two
 * admin handles of its own ('src' at the source, 'tgt' at the target;
 * topics_new() takes them over, also on failure).  'pol' is borrowed and
 * outlives it. */
struct topics;

struct topics *topics_new(const char *name, const aagw_repl_policy_t *pol,
                          const struct aagw_topics_conf *c, rd_kafka_t *src,
                          rd_kafka_t *tgt);
/* Start the sync thread (none when both syncs are off). */
int  topics_start(struct topics *t, char *errstr, size_t errstr_size);
/* Ask the thread to stop (returns at once). */
void topics_stop(struct topics *t);
/* Join, close the handles, free.  NULL is a no-op. */
void topics_destroy(struct topics *t);

/* Create 'remote' at the target for source topic 'topic': 'partitions',
 * the configured replication factor and the source's copied configs.
 * Returns 0 (created, or it exists), -1 if the target refused (reason in
 * 'errstr'), -2 if the target lacks the API (timed out or unsupported;
 * remembered: later calls return -2 at once). */
int topics_create(struct topics *t, const char *topic, const char *remote,
                  int partitions, char *errstr, size_t errstr_size);

/* Grow 'remote' at the target to 'partitions' (CreatePartitions).
 * Returns as topics_create(). */
int topics_grow(struct topics *t, const char *remote, int partitions,
                char *errstr, size_t errstr_size);

/* Keep the configs and ACLs of 'remote' in line with those of 'topic'
 * (synced at once, then every interval).  Thread-safe; once per topic. */
void topics_track(struct topics *t, const char *topic, const char *remote);

/* The topic_* counters for aagw_flow_stats(). */
void topics_stats(const struct topics *t, struct aagw_flow_stats *st);

/* ------------------------ WORK OWNERSHIP (owner.c) ----------------------- */

/* Who owns which partition of a work topic among the processes of one
 * site, and transactions that only the owner can commit (KIP-447).  The
 * process joins a consumer group subscribed to the work topic: the
 * group's assignment is the ownership.  It reads nothing through that
 * consumer.  Its one transactional producer (transactional.id per
 * process) adds the offsets of the owned work partitions to each
 * transaction with the group metadata of the assignment, so the broker
 * refuses the commit of a member the group has moved on from (a process
 * that stalled past max.poll.interval.ms, a zombie) and its records stay
 * aborted: invisible to read_committed readers.  Work topic and
 * transaction must be on the same cluster.  Not thread-safe: one thread
 * calls every function of one owner. */
struct owner;

struct owner_conf {
        const char        *bootstraps;
        const char *const *props; /* user properties, as
                                     aagw_kafka_conf_apply() takes them;
                                     borrowed, outlive the owner
                                     (owner_renew()) */
        size_t             prop_cnt;
        const char        *group;  /* consumer group of the owners */
        const char        *topic;  /* the work topic */
        const char        *member; /* client.id "aagw-MEMBER-owner~INSTANCE" and
                                      "aagw-MEMBER-txn"; log name */
        const char        *transactional_id;
        int session_timeout_ms;   /* 0: 10 s */
        int max_poll_interval_ms; /* 0: 30 s; >= the session timeout */
        int txn_timeout_ms;       /* transaction.timeout.ms; 0: 10 s */
        int init_timeout_ms;      /* init_transactions(); 0: 30 s */
        int commit_timeout_ms;    /* owner_commit()'s retries; 0: 10 s */
        /* Partitions of the work topic this process now owns, or owns no
         * longer (revoked, or owner_commit() found it fenced): the caller
         * stops writing for those before it returns.  Called from
         * owner_poll() and owner_commit(); the list is borrowed for the
         * call.  NULL: not told. */
        void (*on_gained)(void *opaque,
                          const rd_kafka_topic_partition_list_t *parts);
        void (*on_lost)(void *opaque,
                        const rd_kafka_topic_partition_list_t *parts);
        /* A rebalance is about to take 'parts' (every owned partition,
         * eager; cooperative: the owned set, before any change of it,
         * also a gain): the assignment's metadata still fences, so the
         * caller may owner_commit() its open transaction now rather than
         * lose it.  Not called when the group already moved on without this
         * member (nothing it commits would be accepted).  Called from
         * owner_poll(); on_lost follows.  NULL: not told. */
        void (*on_revoking)(void *opaque,
                            const rd_kafka_topic_partition_list_t *parts);
        void *opaque;
        /* Delivery reports of the transactional producer (NULL: none),
         * with 'dr_opaque' as the callback's opaque: served by the
         * caller's rd_kafka_poll() of owner_producer(), and by the flush
         * of owner_commit(). */
        void (*dr_msg_cb)(rd_kafka_t *rk, const rd_kafka_message_t *m,
                          void *opaque);
        void *dr_opaque;
        /* Set: owner_new() gives up waiting for the member name
         * (name_free() in owner.c).  NULL: not asked. */
        const atomic_bool *stop;
        /* Cooperative-sticky rebalancing (owner.c's top says how it
         * fences): a rebalance takes only what moves; false: eager
         * (roundrobin).  Every member of a group must agree (the
         * coordinator refuses a member whose protocol no other has). */
        bool cooperative;
        /* true: no look for another member of this name (a cluster that
         * cannot describe groups: librdkafka 2.0.2 asserts when the
         * embedded mock is asked). */
        bool no_name_check;
};

/* How a transaction of an owner ended (owner_begin(), owner_commit()). */
typedef enum {
        AAGW_OWNER_OK      = 0,
        AAGW_OWNER_ABORTED = -1, /* aborted (an abortable producer error,
                                    retriable errors past the deadline):
                                    ownership stands, redo the work */
        AAGW_OWNER_FENCED  = -2, /* aborted: the group moved on without
                                    this member (every partition reported
                                    lost), or the offsets named a
                                    partition it does not own */
        AAGW_OWNER_FATAL   = -3, /* the producer is unusable (its
                                    transactional.id was taken by another
                                    process, or the outcome of the
                                    transaction is unknown): destroy the
                                    owner */
} owner_result_t;

/* Join 'c->group', make the transactional producer and initialise its
 * transactions (fencing an earlier producer with the same id).  The
 * strings of 'c' are copied.  Returns the owner, owning nothing yet
 * (owner_poll() gets the assignment), or NULL with the reason. */
struct owner *owner_new(const struct owner_conf *c, char *errstr,
                        size_t errstr_size);

/* Serve the group membership for up to 'timeout_ms' (returns earlier
 * once ownership changed): rebalances call on_gained / on_lost.  Must be
 * called more often than max.poll.interval.ms, or the group gives this
 * process's partitions away.  Returns 0, or AAGW_OWNER_FATAL with the
 * reason (the consumer failed for good). */
int owner_poll(struct owner *o, int timeout_ms, char *errstr,
               size_t errstr_size);

/* Whether this process owns work partition 'partition' as far as it
 * knows (the group may have moved on since: owner_commit() tells). */
bool owner_owned(const struct owner *o, int32_t partition);

/* The owned partitions of the work topic; borrowed, valid until the next
 * owner_poll() or owner_commit(). */
const rd_kafka_topic_partition_list_t *owner_partitions(const struct owner *o);

/* How many assignments this member was given so far (0: none yet): it
 * goes up at every rebalance this process took part in (cooperative:
 * at every one that changed its share, a loss too).  librdkafka
 * 2.0.2 does not expose the group's generation id itself (the consumer
 * group metadata is opaque). */
int64_t owner_assignments(const struct owner *o);

/* How many records of the work topic the membership consumer fetched
 * (and dropped) although its partitions are paused: 0 unless a fetch
 * slipped in before a pause. */
int64_t owner_dropped(const struct owner *o);

/* This owner's instance: what its consumer's client.id carries after
 * "aagw-MEMBER-owner~", and what tells its membership from another
 * process's of the same member name. */
const char *owner_instance(const struct owner *o);

/* Begin a transaction.  Returns AAGW_OWNER_OK, or a result with the
 * reason ('errstr'). */
owner_result_t owner_begin(struct owner *o, char *errstr,
                           size_t errstr_size);

/* Replace a transactional producer that failed for good (a transaction
 * the coordinator aborted on its own, a state the broker refuses) with
 * a new one, its transactions initialised again (fencing the old one);
 * the group membership and what it owns stay.  The caller has no handle
 * (topic, queue) of the old producer left and no record in flight.
 * Returns AAGW_OWNER_OK, or AAGW_OWNER_FATAL with the reason (then no
 * producer: destroy the owner). */
owner_result_t owner_renew(struct owner *o, char *errstr, size_t errstr_size);

/* Abort the open transaction, if any (the caller lost its partitions,
 * or found something in it it cannot vouch for).  Returns AAGW_OWNER_OK
 * (aborted, or none was open) or AAGW_OWNER_FATAL with the reason. */
owner_result_t owner_abort(struct owner *o, char *errstr, size_t errstr_size);

/* The transactional producer, to produce into the open transaction
 * (records to any topic of the cluster).  Borrowed; the owner's. */
rd_kafka_t *owner_producer(struct owner *o);

/* Commit the open transaction with 'offsets' as the group's offsets of
 * the work topic: at least one, each of an owned partition and at 0 or
 * more (they are the fence: the coordinator refuses them from a member
 * the group has moved on from).  Offsets of other topics in the list
 * are the caller's positions, committed with the transaction and read
 * back with owner_committed().  Retriable errors are retried for up to
 * commit_timeout_ms.  Returns AAGW_OWNER_OK once committed, or what
 * happened, with the reason in 'errstr' (AAGW_OWNER_ABORTED for offsets
 * that would not fence). */
owner_result_t owner_commit(struct owner *o,
                            const rd_kafka_topic_partition_list_t *offsets,
                            char *errstr, size_t errstr_size);

/* The group's committed offsets of 'parts' (any topics: positions a
 * caller committed with owner_commit()), stable ones only: one request
 * of up to 'timeout_ms'; an element without one is left at
 * RD_KAFKA_OFFSET_INVALID.  Returns the first error (while a
 * transaction holds an offset: one to ask again on). */
rd_kafka_resp_err_t owner_committed(struct owner                    *o,
                                    rd_kafka_topic_partition_list_t *parts,
                                    int timeout_ms);

/* Create work topic 'topic' with 'want' partitions through 'admin' if it
 * is missing, and wait (up to 30 s) until the cluster's metadata shows
 * it.  Returns its partition count (another member may have made it
 * with another count: every member must go by the topic's), or -1 with
 * the reason. */
int owner_work_topic(rd_kafka_t *admin, const char *topic, int want,
                     char *errstr, size_t errstr_size);

/* Abort an open transaction (if any), leave the group and free, each
 * step bounded (a few seconds).  on_lost is not called.  NULL is a
 * no-op. */
void owner_destroy(struct owner *o);

/* Whether the cluster at 'bootstraps' enforces transactions: a record
 * produced to 'topic' [0] (it must exist) in a transaction that is then
 * aborted must be invisible to a read_committed reader and visible to a
 * read_uncommitted one.  librdkafka's mock cluster accepts transactions
 * without enforcing them.  Returns 1 (enforced), 0 (not enforced, why in
 * 'errstr'), or -1 (could not tell: the reason in 'errstr'). */
int owner_txn_enforced(const char *bootstraps, const char *const *props,
                       size_t prop_cnt, const char *topic, char *errstr,
                       size_t errstr_size);


/* Describe the consumer groups g[0..n) (each g[i].group set) through
 * 'admin' into 'g': state and members, or the reason in g[i].error
 * (members.c).  Returns false if any description failed: librdkafka
 * 2.0.2 can then hang in rd_kafka_destroy() of 'admin' (seen on the
 * embedded mock, which lacks the request), so the caller leaves it. */
bool members_describe(rd_kafka_t *admin, struct aagw_group_info *g,
                      size_t n, int timeout_ms);

/* ------------------ RECORDS REFUSED FOR GOOD (refused.c) ----------------- */

/* Whether the broker's 'err' for a produced record refuses its content
 * for good (too large, invalid, a timestamp out of range): sent again it
 * would be refused again.  Timeouts, leader moves, fencing and the
 * transaction's own state are not refusals: a redo gets past them. */
bool replicator_refused_for_good(rd_kafka_resp_err_t err);

/* A record a transaction was aborted for, by its input coordinates (the
 * flow: source topic, partition, offset; the unify stage: input topic,
 * partition, offset). */
struct refused_rec {
        char                topic[AAGW_TOPIC_MAX + 1];
        int32_t             partition;
        int64_t             offset;
        rd_kafka_resp_err_t err;       /* the refusal */
        rd_kafka_resp_err_t dlq_err;   /* the flow: its dead-letter copy's
                                          refusal (then sent without the
                                          record), 0 none */
        int32_t             out_part;  /* the unify stage: its output
                                          partition */
        bool                confirmed; /* refused when sent alone */
        bool                resolved;  /* its replacement is in the open
                                          transaction */
};

/* The set of one flow or stage (one thread), at most 'max' records.
 * NULL when out of memory; refused_destroy(NULL) is a no-op. */
struct refused *refused_new(size_t max);
void            refused_destroy(struct refused *rs);
size_t          refused_count(const struct refused *rs);
/* Borrowed, valid until it is deleted; NULL: not in the set. */
struct refused_rec *refused_find(struct refused *rs, const char *topic,
                                 int32_t partition, int64_t offset);
/* The record's entry, added (zeroed but for its coordinates) if new;
 * NULL when the set is full or memory is short. */
struct refused_rec *refused_add(struct refused *rs, const char *topic,
                                int32_t partition, int64_t offset);
void refused_del(struct refused *rs, struct refused_rec *r);
/* Call 'keep' for every record (in no order); those it returns false
 * for are deleted.  'keep' NULL deletes all. */
void refused_each(struct refused *rs,
                  bool (*keep)(void *arg, struct refused_rec *r), void *arg);

/* ------------------------- UNIFY CHANGELOG (changelog.c) ------------------ */

/* The scale-out unify stage's state of one output partition p of the
 * unified topic <out>, as records in partition p of its changelog topics
 * (the ids topic only for a dedup <out>), written only inside the
 * owner's transactions (together with the output records they explain),
 * so that whoever owns p next restores it:
 *
 *   aagw.<gw>.<site>.state.<out>  compacted: winners and positions, which
 *                                 must outlive any window
 *   aagw.<gw>.<site>.ids.<out>    cleanup.policy=delete: the dedup ids,
 *                                 kept for unify.window and a margin
 *                                 (changelog_ids_conf())
 *
 * Binary, big-endian, versioned by the first key byte
 * (CHANGELOG_VERSION); a record of another version or kind is skipped on
 * restore (logged), never misread:
 *
 *   kind  key                                   value
 *   id    1 'i' KEY16                           HLC8 TIME8 PART4 OFF8
 *                                               OLEN1 ORIGIN TOPIC
 *         a dedup id (its scoped hash KEY16) delivered into p: origin,
 *         input coordinates and hlc of the delivery, TIME when decided
 *         (the window's base); in the ids topic
 *   win   1 'w' KEY16                           HLC8 TIME8 TOMB1 OLEN1
 *                                               ORIGIN ID
 *         the lww winner of entity KEY16 (scoped entity key hash) in p
 *   pos   1 'p' PART4 TOPIC                     NEXT8
 *         the next offset of input TOPIC [PART] for output p: every
 *         record below it whose output partition is p is decided
 *   rpos  1 'r' PART4 TOPIC                     NEXT8
 *         scale_out.route: the next offset of input TOPIC [PART] its
 *         router will route (as committed to the owners' group, whose
 *         offsets can expire), in partition PART % the partition count
 *         whatever p; not a decision's position (restores skip it)
 *
 * Compaction keeps the newest record of each key of the state topic: an
 * entity's winner (winners never expire, as in the single-process stage)
 * and an input's position.  The ids topic loses whole segments once
 * they are older than its retention; a restore skips the ids it still
 * finds that left the window.  Ids in a state topic (where versions
 * before the ids topic wrote them, and compaction keeps them for good)
 * are restored the same way. */
#define CHANGELOG_VERSION 1
#define CHANGELOG_KEY_MAX (6 + AAGW_TOPIC_MAX)
#define CHANGELOG_VAL_MAX (32 + AAGW_ALIAS_MAX + AAGW_ID_MAX + AAGW_TOPIC_MAX)

enum changelog_kind {
        CHANGELOG_ID   = 'i',
        CHANGELOG_WIN  = 'w',
        CHANGELOG_POS  = 'p',
        CHANGELOG_RPOS = 'r'
};

/* One changelog record, decoded (caller storage: about 1.4 KB). */
struct changelog_rec {
        enum changelog_kind kind;
        uint8_t  key[16];                 /* id, win */
        uint64_t hlc;                     /* id, win */
        int64_t  time_ms;                 /* id, win: when decided */
        char     origin[AAGW_ALIAS_MAX + 1]; /* id, win */
        char     topic[AAGW_TOPIC_MAX + 1];  /* id: input; pos: input */
        int32_t  partition;               /* id, pos: input partition */
        int64_t  offset;                  /* id: input offset; pos: next */
        bool     tombstone;               /* win */
        size_t   id_len;                  /* win */
        char     id[AAGW_ID_MAX + 1];     /* win */
};

/* Encode 'c' into 'key' (CHANGELOG_KEY_MAX bytes) and 'val'
 * (CHANGELOG_VAL_MAX); their lengths into 'klen', 'vlen'. */
void changelog_encode(const struct changelog_rec *c, uint8_t *key,
                      size_t *klen, uint8_t *val, size_t *vlen);

/* Decode a record; false if it is not one of this version (or is cut
 * short). */
bool changelog_decode(const void *key, size_t klen, const void *val,
                      size_t vlen, struct changelog_rec *c);

/* The decision (id or winner) of 'c' as the decider's restore() takes it,
 * its provenance in 'pv'; 'r' borrows 'c' and 'pv' (site_log.c). */
void changelog_to_rec(const struct changelog_rec *c, struct aagw_unify_rec *r,
                      struct aagw_prov *pv);

/* How changelog_read() ended. */
typedef enum {
        CHANGELOG_DONE      = 0, /* read to the end */
        CHANGELOG_ABANDONED = 1, /* 'fn' or 'tick' returned false, or 'stop' */
        CHANGELOG_FAILED    = 2, /* reason in errstr */
} changelog_end_t;

/* Read 'topic' ['partition'] from offset 'from' (< 0: its beginning; a
 * standby goes on where it got to) to its end through
 * 'reader' (an assign-only consumer with isolation.level read_committed
 * and enable.partition.eof; assigned for the call), handing each decoded
 * record to 'fn'.  The end is the high watermark when the read starts,
 * asked of 'hw' (a client with isolation.level read_uncommitted: a
 * read_committed one's ListOffsets answers the last stable offset);
 * it is reached at a record there or at an end of partition at or past
 * it.  A read_committed reader's end of partition is the last stable
 * offset, which stays below a transaction still open (a previous owner
 * that died mid-transaction) until the coordinator ends it
 * (transaction.timeout.ms): the read waits for that, so nothing the
 * previous owner may still commit is missed.  'tick' (may be NULL) is
 * called about every 200 ms (the caller serves its group membership);
 * false abandons.  Fails after 'idle_ms' without progress.  Counts
 * records and bytes (key + value) into 'records', 'bytes'. */
changelog_end_t changelog_read(rd_kafka_t *reader, rd_kafka_t *hw,
                               const char *topic, int32_t partition,
                               int64_t from, int idle_ms,
                               const atomic_bool *stop,
                               bool (*fn)(void *arg,
                                          const struct changelog_rec *c),
                               bool (*tick)(void *arg), void *arg,
                               int64_t *records, int64_t *bytes,
                               char *errstr, size_t errstr_size);

/* The ids topic's settings for a window of 'window_ms' (unify.window):
 * records are removed by whole segments once the newest record of a
 * segment is older than retention_ms, so an id stays at least that long
 * and at most about retention_ms + segment_ms. */
struct changelog_ids_conf {
        int64_t retention_ms; /* the window and a margin for clocks */
        int64_t segment_ms;   /* a segment rolls at least this often */
};
void changelog_ids_conf(int64_t window_ms, struct changelog_ids_conf *c);

/* What an existing ids topic's effective settings mean (the strings as
 * DescribeConfigs gives them; NULL: not given). */
typedef enum {
        CHANGELOG_IDS_AS_WANTED = 0,
        CHANGELOG_IDS_DIFFERS   = 1, /* set them: ids are kept longer than
                                        needed, or never removed */
        CHANGELOG_IDS_UNSAFE    = 2, /* set them: ids inside the window may
                                        be removed (shorter retention, a
                                        size limit), and a restore would
                                        miss them */
} changelog_ids_state_t;
changelog_ids_state_t changelog_ids_check(const struct changelog_ids_conf *want,
                                          const char *cleanup_policy,
                                          const char *retention_ms,
                                          const char *retention_bytes,
                                          const char *segment_ms);

/* How changelog_ids_topic() found (and left) an ids topic. */
typedef enum {
        CHANGELOG_IDS_CREATED = 0, /* made with the settings */
        CHANGELOG_IDS_KEPT    = 1, /* there, settings as wanted */
        CHANGELOG_IDS_ALTERED = 2, /* there; its settings were changed
                                      (what from: 'errstr') */
        CHANGELOG_IDS_STALE   = 3, /* there; its settings could not be
                                      read, or they differ and could not
                                      be changed but keep every id of the
                                      window ('errstr') */
        CHANGELOG_IDS_REFUSED = 4, /* could not be made, or its settings
                                      would lose ids inside the window and
                                      could not be changed ('errstr') */
        CHANGELOG_IDS_RETRY   = 5, /* the cluster did not answer in time
                                      ('errstr') */
} changelog_ids_end_t;

/* Make the ids topic 'topic' ('partitions' partitions, the broker's
 * replication factor, the settings of 'want') through the admin handle
 * 'admin', or, with 'exists', bring an existing one's settings in line:
 * DescribeConfigs, then (librdkafka 2.0 has no IncrementalAlterConfigs)
 * AlterConfigs with the topic's other overrides carried over.  Each
 * admin call waits up to 'timeout_ms'. */
changelog_ids_end_t changelog_ids_topic(rd_kafka_t *admin, const char *topic,
                                        int partitions, bool exists,
                                        const struct changelog_ids_conf *want,
                                        int timeout_ms, char *errstr,
                                        size_t errstr_size);

#endif
