/*
 * aagw - active-active replication gateway for Kafka
 *
 * replicator/aagw_replicator.h: the only replicator header other folders may
 * include.  replicator/ owns every librdkafka data-path client: building
 * client configurations, the flows that consume one cluster and produce to
 * another, and the admin handle kept apart from the data path.
 */
#ifndef AAGW_REPLICATOR_H
#define AAGW_REPLICATOR_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "aagw_policy.h"
#include "aagw_unify_contract.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Clocks (aagw_wall_ms, aagw_mono_ms) and AAGW_STAT_ADD: aagw_policy.h. */

/* --------------------------- CLIENT SETTINGS --------------------------- */

/**
 * @brief Set one librdkafka property on @p conf.
 *
 * @returns AAGW_OK, or AAGW_ERR_CONFIG with "NAME: reason" in @p errstr
 * (librdkafka's own reason: unknown property, invalid value, ...).  Secret
 * values never appear in the message.
 */
aagw_err_t aagw_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                               const char *value, char *errstr,
                               size_t errstr_size);

/**
 * @brief A new client configuration for a cluster, with aagw's defaults
 * (reconnect backoff capped at 1 s, client.id "aagw-<role>") and the
 * bootstrap list set.  User properties are applied on top by the caller with
 * aagw_kafka_conf_set().
 *
 * @returns a conf the caller owns (rd_kafka_conf_destroy(), or pass it to
 * rd_kafka_new() which takes it), or NULL with the reason in @p errstr.
 */
rd_kafka_conf_t *aagw_kafka_conf_new(const char *bootstraps, const char *role,
                                     char *errstr, size_t errstr_size);

/**
 * @brief librdkafka log callback that writes through aagw_log() (facility
 * KAFKA), mapping syslog levels onto aagw's.  aagw_kafka_conf_new() installs
 * it; set it on any other conf with rd_kafka_conf_set_log_cb().
 */
void aagw_kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                       const char *buf);

/**
 * @brief Apply user properties (name/value pairs, @p kv[2*i] a name) for a
 * client of @p role ("consumer", "producer" or "admin").  A name without a
 * role prefix applies to every client; "consumer.x", "producer.x" and
 * "admin.x" apply property x to that role only (MirrorMaker 2's
 * convention), so consumer-only settings never reach a producer.
 * @returns AAGW_OK or AAGW_ERR_CONFIG with "NAME: reason" in @p errstr.
 */
aagw_err_t aagw_kafka_conf_apply(rd_kafka_conf_t *conf, const char *role,
                                 const char *const *kv, size_t kv_cnt,
                                 char *errstr, size_t errstr_size);

/** @returns @p name without its role prefix ("consumer.", "producer.",
 *  "admin."), for validation; a pointer into @p name. */
const char *aagw_kafka_prop_base(const char *name);

/* ------------------------------ PROCESS STOP ------------------------------ */

/**
 * @brief The process is stopping (true) or runs (false).  Every wait of
 * aagw's own on a Kafka answer (metadata, topic creation, admin calls)
 * gives up within a fraction of a second once it is set, whichever stage
 * waits: a stop must not sit out a 5 s request to a cluster that is gone.
 */
void aagw_kafka_process_stop(bool stopping);

/** @returns whether aagw_kafka_process_stop(true) was said. */
bool aagw_kafka_process_stopping(void);

/** Once stopping, no single wait on a Kafka answer (a commit, an abort,
 *  a group leave, a consumer's close) takes longer than this ... */
#define AAGW_STOP_WAIT_MS 500
/** ... and all of them end this long after the stop began: the rest of
 *  the 5 s a stop may take is for closing the clients. */
#define AAGW_STOP_KAFKA_BUDGET_MS 3000

/** @returns @p ms while the process runs; once it stops, what is left of
 *  the stop's budget for Kafka waits, at most AAGW_STOP_WAIT_MS (0: wait
 *  no more). */
int aagw_kafka_stop_wait_ms(int ms);

/* ---------------------------- REACHABILITY ---------------------------- */

/**
 * Whether a cluster answers, from the outcome of the periodic requests a
 * flow or unify stage makes anyway (topic discovery) plus a ping where it
 * makes none.  Written by the owning thread, read by any (the admin
 * endpoint).  Zeroed storage: the cluster answers.
 */
struct aagw_reach {
        _Atomic int64_t down_since_ms; /**< aagw_mono_ms() of the first
                                            failed request in a row; 0
                                            while requests succeed */
        const char     *cluster;       /**< its alias: an answer ends a
                                            login failure noted for it
                                            (aagw_access_ok()); NULL: none */
};

/** Record the outcome of a request to the cluster (@p err 0: answered). */
void aagw_reach_note(struct aagw_reach *r, rd_kafka_resp_err_t err);

/** @returns how long (ms, >= 1) the cluster has not answered, 0 while it
 *  answers. */
int64_t aagw_reach_down_ms(const struct aagw_reach *r);

/** Ask @p rk's cluster for the metadata of the topics the client knows
 *  (an admin client knows none: brokers only, the smallest request),
 *  again while no broker is reachable, for up to @p timeout_ms or until
 *  @p stop (may be NULL) or the thread's stage stop is set; @returns the
 *  error, RD_KAFKA_RESP_ERR__INTR if stopped, 0 if the cluster answered. */
rd_kafka_resp_err_t aagw_kafka_ping(rd_kafka_t *rk, int timeout_ms,
                                    const atomic_bool *stop);

/**
 * A thread that pings @p rk's cluster (aagw_kafka_ping(), 2 s timeout)
 * every @p interval_ms and notes the outcome in @p reach, so that a data
 * thread never blocks on it.  @p rk and @p reach must outlive it.
 * @returns the prober, or NULL (out of memory, no thread).
 */
typedef struct aagw_prober aagw_prober_t;
aagw_prober_t *aagw_prober_new(rd_kafka_t *rk, int interval_ms,
                               struct aagw_reach *reach);

/** Ask it to stop without waiting (no new ping starts); NULL: no-op. */
void aagw_prober_stop(aagw_prober_t *p);

/** Stop (waits for the slice of a ping in progress: at most 1 s past
 *  the stop, when the cluster does not answer) and free; NULL is a
 *  no-op. */
void aagw_prober_destroy(aagw_prober_t *p);

/* ---------------------------- CLUSTER ACCESS ---------------------------- */

/** Why aagw cannot work with a cluster although it may answer. */
typedef enum {
        AAGW_ACCESS_OK = 0,
        AAGW_ACCESS_AUTHENTICATION, /**< SASL login refused */
        AAGW_ACCESS_TLS,            /**< TLS handshake failed (CA, host
                                         name, client certificate) */
        AAGW_ACCESS_PROTOCOL,       /**< security.protocol does not match
                                         the listener */
        AAGW_ACCESS_AUTHORIZATION,  /**< an operation was denied (ACLs) */
} aagw_access_cause_t;

/** The access state of one cluster. */
struct aagw_access {
        aagw_access_cause_t cause;
        int64_t             since_ms; /**< wall clock of the first failure
                                           of this run of failures */
        int64_t             last_ms;  /**< wall clock of the latest */
        uint64_t            failures; /**< failures seen, ever */
        char                what[256];   /**< the cause and its fix */
        char                reason[512]; /**< as the broker or TLS said */
};

/** How long (ms) a failure counts as current without being seen again. */
#define AAGW_ACCESS_CURRENT_MS 30000

/** Name a cluster: failures of clients with these bootstraps are its.
 *  Up to 16 clusters; registering an alias again is a no-op. */
void aagw_access_register(const char *alias, const char *bootstraps);

/** Forget every cluster (tests, a second engine in one process). */
void aagw_access_reset(void);

/** "ok", "authentication", "tls", "security_protocol", "authorization". */
const char *aagw_access_cause_name(aagw_access_cause_t c);

/** "authentication failed", "TLS handshake failed", ...: for messages. */
const char *aagw_access_cause_text(aagw_access_cause_t c);

/** aagw_access_get() of a failure seen in the last
 *  AAGW_ACCESS_CURRENT_MS; false while the cluster has none. */
bool aagw_access_current(const char *alias, struct aagw_access *out);

/** The cause of a librdkafka connection failure line, with the cause and
 *  its fix in @p what; AAGW_ACCESS_OK if it is no access problem. */
aagw_access_cause_t aagw_access_classify(const char *line, char *what,
                                         size_t what_size);

/** A librdkafka log line of client @p rk (aagw_kafka_log_cb() passes them
 *  all): an access failure is noted for its cluster, and logged once per
 *  new cause as an ERROR of facility ACCESS naming the cluster. */
void aagw_access_note_line(const rd_kafka_t *rk, const char *fac,
                           const char *line);

/** The alias of the cluster client @p rk talks to (by its
 *  bootstrap.servers, as aagw_access_note_line() tells them) into
 *  @p alias; false if no registered cluster has its bootstraps. */
bool aagw_access_alias_of(const rd_kafka_t *rk, char *alias, size_t size);

/** Note a failure of cluster @p alias found by a stage (authorization). */
void aagw_access_note(const char *alias, aagw_access_cause_t cause,
                      const char *what, const char *reason);

/** A request to @p alias succeeded: a failure of @p cause is over;
 *  AAGW_ACCESS_OK ends a login failure (authentication, TLS, protocol),
 *  not a denied operation, which only ages out (AAGW_ACCESS_CURRENT_MS). */
void aagw_access_ok(const char *alias, aagw_access_cause_t cause);

/** The registered aliases, in registration order, into @p out (up to
 *  @p max); @returns how many there are. */
size_t aagw_access_aliases(char (*out)[AAGW_ALIAS_MAX + 1], size_t max);

/** The state of @p alias into @p out; false (and a zeroed @p out) if it
 *  was never registered. */
bool aagw_access_get(const char *alias, struct aagw_access *out);

/* -------------------------------- POOLS -------------------------------- */

/**
 * A free list of fixed-size objects (the per-record tokens that ride on
 * produced messages as their opaque): allocated in chunks of 4096, never
 * returned to the system until aagw_pool_free(), no locking (one thread).
 */
struct aagw_pool {
        size_t  size;   /**< object size, set before first use */
        void   *free;   /**< free list, linked through each object's start */
        void  **chunks;
        size_t  nchunks;
};

/** @returns an object of @p p->size bytes (contents unspecified), or NULL
 *  when out of memory. */
void *aagw_pool_get(struct aagw_pool *p);
/** Give @p obj back to @p p. */
void aagw_pool_put(struct aagw_pool *p, void *obj);
/** Free every chunk (objects still out become invalid). */
void aagw_pool_free(struct aagw_pool *p);

/**
 * The managed properties (aagw_kafka_client.extra) of every data-path
 * producer, the flows' and the unify stages': idempotent, acks=all, no
 * delivery timeout (a record is delivered or fails permanently, never
 * expires), batches of up to 10,000 after 2 ms.
 */
extern const char *const aagw_kafka_producer_props[];

/**
 * The managed properties (aagw_kafka_client.common) of every data-path
 * consumer, the flows' and the unify stages': a queue bounded by bytes
 * (16 MiB), fetchers that look again 10 ms after it filled, and
 * fetch.wait.max.ms 10.  Why, in kconf.c and docs/operations.md
 * ("Catch-up and librdkafka's fetch pause").
 */
extern const char *const aagw_kafka_consumer_props[];

/** The fetch window of a consumer reading a cluster a round trip away:
 *  what one round trip may bring (aagw_fetch_window_size()). */
struct aagw_fetch_window {
        int64_t rtt_us;          /**< the round trip measured; -1 unknown */
        int     partitions;      /**< source partitions it is spread over */
        int64_t window_bytes;    /**< per round trip, all partitions */
        int64_t partition_bytes; /**< max.partition.fetch.bytes */
        int64_t queue_kbytes;    /**< queued.max.messages.kbytes */
        bool    base;            /**< the consumer props' own sizes */
        char    partition_s[24], queue_s[24]; /**< the two as text */
};

/** The rate a fetch window is sized for: bytes per second per flow, about
 *  what one flow copies on one core. */
#define AAGW_FETCH_WINDOW_RATE (320LL << 20)
/** The largest window sized automatically (a round trip of 200 ms);
 *  beyond it, the consumer properties set by hand. */
#define AAGW_FETCH_WINDOW_MAX (64LL << 20)

/**
 * @brief Size the fetch window for a source @p rtt_us away (-1: unknown)
 * whose copied topics have @p partitions partitions (<= 0: unknown,
 * taken as 16).
 *
 * A broker connection has one fetch in flight, so a flow receives at most
 * the partitions' max.partition.fetch.bytes per round trip.  The window
 * is AAGW_FETCH_WINDOW_RATE x the round trip (at most
 * AAGW_FETCH_WINDOW_MAX), spread over the partitions, never below
 * librdkafka's 1 MiB per partition; the queue holds one and a half
 * windows, never less than aagw_kafka_consumer_props' 16 MiB, so a new
 * answer can land while the last one drains.  Near the cluster (a few
 * ms) that is the base sizes, unchanged (@c base).
 */
void aagw_fetch_window_size(struct aagw_fetch_window *w, int64_t rtt_us,
                            int partitions);

/** The most source consumers (broker connections) a flow fetches over. */
#define AAGW_FETCH_CONNECTIONS_MAX 8
/** How many a flow opens by itself (replication.fetch_connections 0). */
#define AAGW_FETCH_CONNECTIONS_AUTO_MAX 4
/** The shortest round trip at which a flow opens more than one by itself:
 *  below it (one data center, neighbouring zones) the copy's CPU is the
 *  limit, and more consumers only cost (at a round trip of 1.7 ms, 3 of
 *  them copied 0.82x as fast on loopback, docs/benchmarks.md). */
#define AAGW_FETCH_CONNECTIONS_MIN_RTT_US 10000

/**
 * @brief How many source consumers a flow fetches its partitions over.
 *
 * One consumer has one broker connection, and so one fetch in flight, per
 * broker, and a TCP connection carries at most @p conn_bytes per round
 * trip (aagw_fetch_connection_bytes()).  @p asked > 0
 * (replication.fetch_connections) is taken as given; 0 asks for as many
 * connections as @p window_bytes (what a round trip should bring; 0:
 * nothing asked of the link) needs at @p conn_bytes each, at most
 * AAGW_FETCH_CONNECTIONS_AUTO_MAX.  Never more than the
 * flow's @p partitions (<= 0: unknown, no bound) nor
 * AAGW_FETCH_CONNECTIONS_MAX; never less than 1.
 */
int aagw_fetch_connections(int64_t window_bytes, int64_t conn_bytes,
                           int partitions, int asked);

/** Linux's default limit of a socket's send buffer (net.ipv4.tcp_wmem's
 *  maximum): what a broker whose socket.send.buffer.bytes is -1 (the
 *  system's) may have in flight on one connection. */
#define AAGW_TCP_SEND_DEFAULT_MAX (4LL << 20)

/**
 * @brief The most one connection to the source brings per round trip:
 * what the receiving socket may hold (@p receive_max,
 * aagw_tcp_receive_max()), what the broker's socket may have in flight
 * (twice its @p send_buffer, as Linux counts it; 0: the system's default,
 * taken as AAGW_TCP_SEND_DEFAULT_MAX; < 0: unknown, not counted) and one
 * fetch answer (@p answer_max, fetch.max.bytes), whichever is least.
 */
int64_t aagw_fetch_connection_bytes(int64_t receive_max, int64_t send_buffer,
                                    int64_t answer_max);

/** The most one TCP connection of this host receives per round trip: the
 *  receive buffer's autotuning limit (net.ipv4.tcp_rmem's maximum), or
 *  Linux's default 6 MiB if it cannot be read. */
int64_t aagw_tcp_receive_max(void);

/** True if the operator's properties for @p role ("consumer") set a
 *  property of the fetch window (max.partition.fetch.bytes,
 *  queued.max.messages.kbytes, fetch.max.bytes): then they size it. */
bool aagw_fetch_window_set_by_hand(const char *const *kv, size_t kv_cnt,
                                   const char *role);

/**
 * @brief The send buffer @p broker of @p rk's cluster gives each client
 * connection (its socket.send.buffer.bytes, DescribeConfigs): what it can
 * have in flight on one connection, so at most what one connection brings
 * per round trip (Linux doubles it for its bookkeeping).
 * @returns the bytes; 0 for the operating system's default (-1 in the
 * broker's config); -1 if the cluster did not say within @p timeout_ms
 * (not allowed to describe it, or no answer).
 */
int64_t aagw_kafka_broker_send_buffer(rd_kafka_t *rk, int32_t broker,
                                      int timeout_ms);

/**
 * @brief The round trip to @p rk's cluster, in microseconds: the faster
 * of two metadata requests once a broker answers (the first, which may
 * open the connection, is not timed).
 * @returns it, or -1 if no broker answered within @p timeout_ms or
 * @p stop was set.
 */
int64_t aagw_kafka_round_trip_us(rd_kafka_t *rk, int timeout_ms,
                                 const atomic_bool *stop);

/** What aagw_kafka_client_new() builds. */
struct aagw_kafka_client {
        rd_kafka_type_t    type;
        const char        *bootstraps;
        const char        *name;  /**< client.id suffix, e.g. "east->west-consumer" */
        const char        *role;  /**< property prefix that applies:
                                       "consumer", "producer" or "admin" */
        const char *const *props; /**< user name/value pairs */
        size_t             prop_cnt;
        /** Managed name/value pairs shared by a kind of client
         *  (aagw_kafka_consumer_props), NULL-ended; NULL: none. */
        const char *const *common;
        const char *const *extra; /**< managed name/value pairs, NULL-ended,
                                       after common */
        /** Name/value pairs applied after the operator's properties (what
         *  aagw must decide whatever they say); NULL: none. */
        const char *const *last;
        void              *opaque;
        /** Delivery reports (producers); NULL: none. */
        void (*dr_msg_cb)(rd_kafka_t *rk, const rd_kafka_message_t *m,
                          void *opaque);
        /** Rebalances (group consumers); NULL: librdkafka's default. */
        void (*rebalance_cb)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t *parts,
                             void *opaque);
};

/**
 * @brief A librdkafka client: aagw_kafka_conf_new(), the managed
 * settings, then the user's properties for its role, callbacks, and
 * rd_kafka_new().
 * @returns the handle, or NULL with the reason in @p errstr.
 */
rd_kafka_t *aagw_kafka_client_new(const struct aagw_kafka_client *c,
                                  char *errstr, size_t errstr_size);

/**
 * @brief The static group membership id (KIP-345 group.instance.id) of
 * the identity lease of the flow whose group is @p group, run by the
 * process of @p site (NULL or empty: a process that runs every site):
 * "GROUP@SITE".  The same across restarts of one process; a second
 * process with the same gateway id and site takes it over, which fences
 * the first (FENCED_INSTANCE_ID).
 */
void aagw_kafka_instance_id(char *out, size_t out_size, const char *group,
                            const char *site);

/**
 * @brief Whether @p err is RD_KAFKA_RESP_ERR__FATAL on @p rk; if so the
 * reason goes to @p errstr (for a fenced static member, with what to
 * check: another process runs the same flow with the same gateway.id,
 * or this one stalled past session.timeout.ms and its rejoin took the id).
 */
bool aagw_kafka_fatal(rd_kafka_t *rk, rd_kafka_resp_err_t err, char *errstr,
                      size_t errstr_size);

/**
 * @brief Create @p topic with @p partitions (broker default replication)
 * through the Admin API of @p rk, waiting up to @p timeout_ms.
 * @returns 0 if created or it exists already, -1 if the broker refused
 * (reason in @p errstr), -2 if the cluster did not answer or does not
 * support the call (the embedded mock cluster: rely on auto-creation).
 */
int aagw_kafka_topic_create(rd_kafka_t *rk, const char *topic, int partitions,
                            int timeout_ms, char *errstr, size_t errstr_size);

/**
 * @brief aagw_kafka_topic_create() with topic configs: @p configs is NULL
 * or a NULL-terminated list of name, value pairs
 * ("cleanup.policy", "compact", NULL).  Borrowed for the call only.
 */
int aagw_kafka_topic_create_conf(rd_kafka_t *rk, const char *topic,
                                 int partitions, const char *const *configs,
                                 int timeout_ms, char *errstr,
                                 size_t errstr_size);

/** aagw_kafka_topic_create_conf() with a replication factor (<= 0: the
 *  broker's default). */
int aagw_kafka_topic_create_rf(rd_kafka_t *rk, const char *topic,
                               int partitions, int replication_factor,
                               const char *const *configs, int timeout_ms,
                               char *errstr, size_t errstr_size);

/**
 * @brief Have @p topic auto-created by the broker (a metadata request for
 * it from @p producer, whose cluster may create topics on request).
 * @returns its partition count, or -1 (not created, or no answer).
 */
int aagw_kafka_topic_autocreate(rd_kafka_t *producer, const char *topic,
                                int timeout_ms);

/**
 * @brief The headers of @p m as an array of views into the message (valid
 * while it lives and its headers are not detached), in @p *buf, grown as
 * needed (@p *cap entries; free() it when done).
 * @returns the number of headers (0 also when out of memory).
 */
size_t aagw_kafka_headers_view(const rd_kafka_message_t *m,
                               struct aagw_header **buf, size_t *cap);

/**
 * @brief STALL WATCH: finds a consumer's partitions whose fetch stands
 * still while their leader holds more.
 *
 * A consumer's cached high watermark comes from the partition's last
 * fetch: a fetcher left idle on a leader that is gone (librdkafka 2.0
 * did this after a leader change) makes its partition look caught up for
 * good, and nothing in the consumer's own view tells it apart from an
 * idle source.  The watch asks the leaders of partitions that did not
 * move for AAGW_STALL_PROBE_MS for their end offsets, on its own thread
 * (a broker may answer only after a pending fetch long-poll: the caller
 * never waits), and reports those whose leader holds more.  No fetch
 * state changes.
 */
typedef struct aagw_stall_watch aagw_stall_watch_t;

/** A watch over @p consumer (which must outlive it); NULL: out of memory
 *  or no thread. */
aagw_stall_watch_t *aagw_stall_watch_new(rd_kafka_t *consumer);

/**
 * @brief Call when a poll of the consumer came back short with its queue
 * empty (a stage with records queued is busy, not stalled).  Takes in the
 * leaders' answers to the last probe and hands the assigned partitions
 * due for a probe (aagw_stall_observe()) to the watch's thread; never
 * blocks on the network.  Nothing is looked at within @p min_interval_ms
 * of the last probe sent, or while one is still out.
 * @returns the number of partitions handed over for a probe.
 */
int aagw_stall_watch_look(aagw_stall_watch_t *w, int64_t now_ms,
                          int min_interval_ms);

/** Stop the thread (waiting for a request in progress) and free; NULL is
 *  a no-op.  Before the consumer is closed. */
void aagw_stall_watch_destroy(aagw_stall_watch_t *w);

/**
 * @brief The stalled partitions of the watch's consumer: those whose
 * position has not moved for a while although their leader, asked
 * directly, holds at least two more records (one more can be a
 * transaction marker, which a consumer never returns).
 *
 * look() asks the leaders of partitions that did not move for
 * AAGW_STALL_PROBE_MS for their end offsets; this call compares their
 * answers with the positions.
 * The caller restarts what it gets (a metadata refresh, then a new
 * assignment or a seek) and logs it.  A partition reported and still not
 * moving is reported again after twice the wait, up to 10 minutes.
 *
 * @returns how many stalled partitions were written to @p out (at most
 * @p max).
 */
struct aagw_stall_report {
        char    topic[AAGW_TOPIC_MAX + 1];
        int32_t partition;
        int64_t pos;      /**< the consumer's position */
        int64_t end;      /**< the leader's end offset, as answered */
        int64_t still_ms; /**< how long the position has not moved */
};
size_t aagw_stall_watch_stalled(aagw_stall_watch_t *w, int64_t now_ms,
                                struct aagw_stall_report *out, size_t max);

/** Log one WARN line per stalled partition of @p who ("east->west",
 *  "unify@west"), and refresh @p consumer's metadata (up to 2 s, less
 *  once @p stop is set: the stage's stop flag, may be NULL), so that a
 *  restart finds the partitions' current leaders. */
void aagw_fetch_stalls_note(rd_kafka_t *consumer, const char *who,
                            const struct aagw_stall_report *r, size_t n,
                            const atomic_bool *stop);

/** Probe the end of a partition that did not move for this long. */
#define AAGW_STALL_PROBE_MS 5000
/** Report a partition that did not move for this long first. */
#define AAGW_STALL_MS 15000

/** What the watch remembers of a partition's progress (stall detection). */
struct aagw_stall_mark {
        int64_t pos;      /**< position last seen; -1: none yet */
        int64_t since_ms; /**< since when it has not moved */
        int64_t end;      /**< the leader's end offset; -1: not asked */
        int64_t end_ms;   /**< when that answer came */
        int64_t probe_ms; /**< when its end was last asked for */
        int64_t wait_ms;  /**< how long a stall must last to be reported */
};

/** A fresh mark. */
void aagw_stall_init(struct aagw_stall_mark *m);

/** Note position @p pos at @p now_ms (a move restarts the clock and
 *  forgets the answer); @returns true if the partition's end is to be
 *  asked for now (it has not moved for AAGW_STALL_PROBE_MS, and was not
 *  asked within that long). */
bool aagw_stall_observe(struct aagw_stall_mark *m, int64_t pos,
                        int64_t now_ms);

/** Note the leader's answer @p end, received at @p now_ms. */
void aagw_stall_answer(struct aagw_stall_mark *m, int64_t end,
                       int64_t now_ms);

/** @returns true if the partition is stalled at @p now_ms: it has not
 *  moved for the mark's wait, and an answer since it last moved says the
 *  leader holds at least two more records.  Reporting doubles the wait
 *  (up to 10 minutes) and restarts the clock. */
bool aagw_stall_due(struct aagw_stall_mark *m, int64_t now_ms);


/**
 * A data-path thread's wait for work on its librdkafka queues (the source
 * consumer's, the target producer's main queue with its delivery
 * reports).  librdkafka writes a byte to a pipe when one of them gets an
 * op (queue I/O events), so one poll() waits for both and returns as soon
 * as either has something: the traffic sets the pace, not a timeout.
 * Without it, rd_kafka_consume_batch_queue() waits for a full batch or
 * its timeout, which at 1,000 records/s is the whole timeout per record,
 * and delivery reports wait for the next consume call.
 *
 * Use: take what the queues hold without waiting
 * (rd_kafka_consume_batch_queue() with timeout 0, rd_kafka_poll() with
 * 0), then aagw_qwait() when that found nothing.  A byte that came
 * between the take and the wait makes the wait return at once.
 */
typedef struct aagw_qwait aagw_qwait_t;

/** A wait for @p cnt queues (at most AAGW_FETCH_CONNECTIONS_MAX + 2),
 *  which must outlive it.  NULL: out of memory or no pipe; the caller
 *  then polls with timeouts. */
aagw_qwait_t *aagw_qwait_new(rd_kafka_queue_t *const *qs, size_t cnt);

/** Wait up to @p timeout_ms for an op on a queue since the last call;
 *  with @p w NULL, sleep @p timeout_ms capped to 5 ms. */
void aagw_qwait(aagw_qwait_t *w, int timeout_ms);

/** Turn the queues' events off and free; NULL is a no-op. */
void aagw_qwait_destroy(aagw_qwait_t *w);

/* -------------------------------- FLOWS -------------------------------- */

/**
 * A flow replicates the matching topics of one source cluster into one
 * target cluster: consume (group aagw.<gateway-id>.<source>-<target>),
 * decide per record (policy), produce with provenance, keep partition and
 * order, and advance the stored source position only for records the
 * target acknowledged.  One thread per flow.
 */
typedef struct aagw_flow aagw_flow_t;

/**
 * Scale-out within a site (docs/deployment.md).  Processes started with
 * the same gateway id and site share the site's work: each stage (a
 * flow, the unify stage) joins a consumer group subscribed to its work
 * topic on the cluster it writes to, owns what the group assigns it
 * (replicator/owner.c) and writes in transactions that commit the work
 * topic's offsets with the group's metadata, so the broker refuses the
 * commit of a process the group has moved on from (KIP-447).
 */
struct aagw_scale_out {
        bool        enabled;            /**< false: one process per site */
        const char *member;             /**< unique among the site's
                                             processes; in transactional
                                             ids and client ids */
        int32_t     work_partitions;    /**< of every work topic */
        int         session_timeout_ms; /**< the owner groups' */
        int         txn_timeout_ms;     /**< transaction.timeout.ms */
        int         commit_interval_ms; /**< open transaction's age at
                                             which it is committed */
        bool        standby;            /**< warm copies of the unify
                                             partitions others own */
        bool        route;              /**< unify inputs divided among
                                             the processes and routed
                                             through a route topic */
        bool        cooperative;        /**< cooperative-sticky owner
                                             groups (else eager) */
};

/**
 * @brief Whether @p bootstraps can host scale-out: create (if missing) the
 * one-partition topic aagw.<gateway_id>.<site>.txn-check and check there
 * that a record of an aborted transaction is hidden from read_committed
 * readers (librdkafka's mock cluster accepts transactions without
 * enforcing them, and fencing rests on them).  Takes a few seconds.
 * @returns 1 (enforced), 0 (not enforced: why in @p errstr), -1 (could not
 * tell: the reason in @p errstr).
 */
int aagw_scale_out_check(const char *bootstraps, const char *const *props,
                         size_t prop_cnt, const char *gateway_id,
                         const char *site, char *errstr, size_t errstr_size);

/* --------------------------- SCALE-OUT MEMBERS --------------------------- */

/** The processes sharing a site's work, as the group coordinators see
 *  them (replicator/members.c): a thread describes the owner groups at an
 *  interval and keeps the last answer. */
typedef struct aagw_members aagw_members_t;

#define AAGW_MEMBERS_MAX       64   /**< members shown per group */
#define AAGW_MEMBERS_PARTS_MAX 1000 /**< = the most work partitions */

#define AAGW_MEMBER_INSTANCE_MAX 24

struct aagw_member_info {
        char    member[160]; /**< scale_out.member (from its client id) */
        char    instance[AAGW_MEMBER_INSTANCE_MAX]; /**< the process's
                                 owner instance ("" if none) */
        char    id[200];     /**< the group's member id for it */
        char    host[128];   /**< as the coordinator saw it ("/10.1.2.3") */
        int32_t nparts;
        int32_t parts[AAGW_MEMBERS_PARTS_MAX]; /**< work partitions, sorted */
};

struct aagw_group_info {
        char    group[300];
        char    stage[160]; /**< "unify@west", "east->west" */
        char    state[32];  /**< "Stable", "PreparingRebalance", "Empty",
                                 ... or "unknown" (see error) */
        char    error[256]; /**< why the last description failed; "" */
        int64_t at_ms;      /**< wall clock of the last description */
        size_t  n;
        struct aagw_member_info m[AAGW_MEMBERS_MAX];
};

struct aagw_members_conf {
        const char        *bootstraps; /**< the site's cluster */
        const char *const *props;
        size_t             prop_cnt;
        const char *const *groups; /**< n owner groups */
        const char *const *stages; /**< their stages' names */
        size_t             n;
        int                interval_ms; /**< <= 0: 5 s */
};

/** Start describing; NULL with the reason in @p errstr. */
aagw_members_t *aagw_members_new(const struct aagw_members_conf *c,
                                 char *errstr, size_t errstr_size);
/** Copy the last view of up to @p max groups (heap it: a group's view is
 *  about 260 KiB) into @p out; thread-safe.  @returns how many. */
size_t aagw_members_get(aagw_members_t *ms, struct aagw_group_info *out,
                        size_t max);
/** Stop the thread and free; NULL is a no-op. */
void aagw_members_destroy(aagw_members_t *ms);

/** A position to persist: see aagw_flow_conf.pos_save. */
struct aagw_flow_pos {
        const char *topic;     /**< source topic */
        int32_t     partition;
        int64_t     next;      /**< next source offset to read */
        int64_t     out_next;  /**< target offset after the last acked
                                    record (-1: none yet) */
};

struct aagw_flow_conf {
        const char *gateway_id;
        /** The process's site (--site, gateway.site); NULL: every site.
         *  Part of the identity lease's static member id. */
        const char *site;
        const char *source, *target; /**< cluster aliases */
        /** Client settings of each cluster: bootstraps and user properties
         *  (name/value pairs as for aagw_kafka_conf_apply()); borrowed,
         *  must outlive the flow (its thread makes clients again: the
         *  identity lease after a fence, the consumer with its window). */
        const char        *source_bootstraps, *target_bootstraps;
        const char *const *source_props, *const *target_props;
        size_t             source_prop_cnt, target_prop_cnt;
        /** The source consumer's fetch window stays at its base sizes,
         *  whatever the round trip to the source (replication.fetch_window
         *  fixed); false: sized from it (aagw_fetch_window_size()). */
        bool               fetch_window_fixed;
        /** Source consumers the partitions are spread over
         *  (aagw_fetch_connections()'s @p asked; 0: as the window needs). */
        int fetch_connections;
        /** Borrowed; must outlive the flow. */
        const aagw_repl_policy_t *policy;
        const char *header_prefix; /**< as in the policy; NULL: "aagw." */
        unsigned                  verdict_flags; /**< AAGW_VERDICT_F_* */
        int                       refresh_ms;    /**< topic discovery */
        /** The id rule of a source topic (NULL: derived).  Called from the
         *  flow thread once per newly seen topic; the rule is borrowed and
         *  must outlive the flow. */
        const aagw_id_rule_t *(*id_rule_for)(void *opaque, const char *topic);
        /** Load the stored position of a source partition: return 0 and
         *  fill next/out_next, or -1 if none is stored.  Called when a
         *  partition is assigned, from the flow's reconciler thread (or
         *  the flow thread), while the flow thread may call pos_save:
         *  both must be thread-safe. */
        int (*pos_load)(void *opaque, const char *scope, const char *topic,
                        int32_t partition, int64_t *next, int64_t *out_next);
        /** Persist positions atomically; return 0 or -1 (logged, retried
         *  at the next save).  Called from the flow thread, and from its
         *  reconciler thread for a partition not yet assigned (a target
         *  found recreated: the new start is stored at once). */
        int (*pos_save)(void *opaque, const char *scope,
                        const struct aagw_flow_pos *pos, size_t cnt);
        void *opaque;
        /** MM2-format internal topics (heartbeats, offset-syncs,
         *  checkpoints); all zero: none.  See "MM2 TOPICS" below. */
        struct aagw_mm2_conf {
                int  heartbeat_ms;  /**< heartbeats interval, 0: off */
                int  checkpoint_ms; /**< checkpoints interval, 0: off */
                bool syncs;         /**< write offset-syncs */
                bool syncs_at_target; /**< MM2 offset-syncs.topic.location
                                           target (default: source) */
                int  sync_max_per_s;  /**< per partition; 0: 100 */
                /** Consumer groups to checkpoint when the source cannot
                 *  list groups: the include patterns that are plain names
                 *  (borrowed; must outlive the flow). */
                const char *const *groups;
                size_t             group_cnt;
                bool               sync_group_offsets;
                bool               truncation_fail; /**< on_truncation fail */
                /** A partition with no stored position whose target
                 *  another replicator filled resumes where that one
                 *  stopped (replicator/takeover.c), not at the log start */
                bool               takeover;
        } mm2;
        /** Remote topics (replicator/topics.c); all zero: broker default
         *  replication factor, no config or ACL sync. */
        struct aagw_topics_conf {
                int  replication_factor; /**< <= 0: the broker's default */
                bool sync_configs;       /**< copy topic configs */
                int  configs_interval_ms; /**< <= 0: 10 min */
                bool sync_acls;          /**< copy topic ACLs */
                int  acls_interval_ms;   /**< <= 0: 10 min */
        } topics;
        /** Borrowed, must outlive the flow; NULL or not enabled: this
         *  process copies every source partition (identity lease). */
        const struct aagw_scale_out *scale_out;
};

/**
 * @brief Create a flow (clients are created, nothing is consumed yet).
 * @returns the flow, or NULL with the reason in @p errstr.
 */
aagw_flow_t *aagw_flow_new(const struct aagw_flow_conf *conf, char *errstr,
                           size_t errstr_size);

/** Start the flow's thread. */
aagw_err_t aagw_flow_start(aagw_flow_t *flow, char *errstr,
                           size_t errstr_size);

/** Ask the flow to stop (returns at once; thread-safe). */
void aagw_flow_stop(aagw_flow_t *flow);

/**
 * @brief Stop consuming, wait for every in-flight record to be
 * acknowledged (up to @p timeout_ms in all, also when aagw_flow_stop()
 * came first; a flow only stopped waits 8 s), store positions, close the
 * clients and join the thread.  NULL is a no-op.
 */
void aagw_flow_destroy(aagw_flow_t *flow, int timeout_ms);

/** Pause or resume consumption (thread-safe). */
void aagw_flow_pause(aagw_flow_t *flow, bool pause);

typedef enum {
        AAGW_FLOW_STARTING = 0,
        AAGW_FLOW_RUNNING,
        AAGW_FLOW_PAUSED,
        AAGW_FLOW_FAILED,  /**< failed closed; see aagw_flow_error() */
        AAGW_FLOW_STOPPED,
} aagw_flow_state_t;

/** @returns the state; thread-safe. */
aagw_flow_state_t aagw_flow_state(const aagw_flow_t *flow);
/** @returns "starting", "running", ... */
const char *aagw_flow_state_name(aagw_flow_state_t st);
/** Copy the reason of a FAILED flow into @p buf ("" otherwise). */
void aagw_flow_error(const aagw_flow_t *flow, char *buf, size_t size);
/** @returns "source->target"; borrowed. */
const char *aagw_flow_name(const aagw_flow_t *flow);
/** Scale-out: the consumer group that shares this flow's source
 *  partitions (borrowed, the flow's lifetime); "" without scale-out. */
const char *aagw_flow_owner_group(const aagw_flow_t *flow);

/** Replication latency histogram bounds, in ms (last bucket: +Inf). */
#define AAGW_LAT_BUCKETS 24
extern const int64_t aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 1];

/** Counters of a flow (all monotonic except the gauges marked). */
struct aagw_flow_stats {
        uint64_t records_in;   /**< consumed */
        uint64_t records_out;  /**< acknowledged by the target */
        uint64_t bytes_out;    /**< key + value bytes acknowledged */
        uint64_t skipped[AAGW_SKIP_COUNT];     /**< loops prevented, ... */
        uint64_t rejected[AAGW_REASON_COUNT];  /**< bad provenance / id */
        uint64_t diverged;     /**< provenance path contradicts the topic
                                    name (aagw_verdict.path_forged) */
        uint64_t bad_passed;   /**< bad provenance stripped (pass) */
        uint64_t dead_lettered;
        uint64_t produce_errors; /**< permanent delivery failures */
        uint64_t fetch_restarts; /**< stalled partition fetches restarted
                                      (aagw_stall_watch_stalled()) */
        uint64_t consumer_restarts; /**< identity leases replaced after
                                         FENCED_INSTANCE_ID */
        uint64_t start_refetches; /**< source partitions sought back to
                                       their assigned offset: the first
                                       record after an assignment came
                                       later (the start check) */
        uint64_t lat_count, lat_sum_ms;
        uint64_t lat_buckets[AAGW_LAT_BUCKETS]; /**< count per bucket (not
                                                     cumulative) */
        int64_t  lag;           /**< gauge: records behind, all partitions;
                                     -1: unknown (the source does not
                                     answer) */
        int64_t  inflight;      /**< gauge */
        int32_t  topics;        /**< gauge: topics replicated */
        int32_t  partitions;    /**< gauge: partitions assigned */
        int32_t  topics_refused; /**< gauge: topics with source partitions
                                      held (the target has fewer) */
        int32_t  partitions_missing; /**< gauge: those partitions */
        uint64_t topic_configs_synced; /**< AlterConfigs applied */
        uint64_t topic_acls_synced;    /**< ACLs created at the target */
        uint64_t topic_sync_errors;    /**< config/ACL sync calls failed */
        /* MM2-format topics and source truncation */
        uint64_t truncations;       /**< log start passed the position */
        uint64_t truncated_records; /**< records lost to those */
        uint64_t resets;            /**< source end offset went backwards */
        uint64_t target_resets;     /**< target deleted or its log restarted */
        uint64_t offset_syncs;      /**< offset-sync records written */
        uint64_t checkpoints;       /**< checkpoint records written */
        uint64_t heartbeats;        /**< heartbeat records written */
        uint64_t group_offsets_synced; /**< sync_group_offsets commits */
        int64_t  heartbeat_latency_ms; /**< gauge: last heartbeat copy, -1 */
        int64_t  heartbeat_age_ms;  /**< gauge: since the last one, -1 */
        /** gauges: how long the source / target cluster has not answered
         *  the flow's requests (ms), 0 while it answers */
        int64_t  source_down_ms, target_down_ms;
        /** gauges: the round trip to the source measured at the start (us,
         *  -1 not yet), the fetch window sized from it (bytes per round
         *  trip, all partitions; 0: not yet, or set by hand in the
         *  consumer's properties), and the records the source
         *  consumer's queue holds now (near 0 while the flow waits on the
         *  link, not the link on the flow) */
        int64_t  source_rtt_us, fetch_window_bytes, fetch_queue_records;
        int32_t  fetch_connections; /**< source consumers; 0: not yet */
        /** Scale-out (zero and NULL otherwise) */
        const char *member;          /**< this process's member name
                                          (borrowed, as the flow's conf) */
        uint64_t rebalances;         /**< assignments of the owners' group
                                          to this member */
        uint64_t txn_committed;      /**< transactions committed */
        uint64_t txn_aborted;        /**< aborted: their copies redone */
        uint64_t txn_fenced;         /**< refused: the group moved on */
        int32_t  work_partitions;    /**< gauge: work partitions owned */
};

/** Snapshot the counters (thread-safe, relaxed). */
void aagw_flow_stats(const aagw_flow_t *flow, struct aagw_flow_stats *st);

/** One partition's figures, for aagw_flow_partitions(). */
struct aagw_flow_part_stats {
        char     topic[250];
        int32_t  partition;
        int64_t  next;      /**< position */
        int64_t  high;      /**< source high watermark last seen */
        uint64_t records_out;
        bool     assigned;  /**< copied by this process now (scale-out:
                                 its work partition is owned here) */
};

/** Copy up to @p max partition figures; @returns how many it copied,
 *  or with @p out NULL how many there are (the count may grow between
 *  the two calls: a topic discovered meanwhile). */
size_t aagw_flow_partitions(const aagw_flow_t *flow,
                            struct aagw_flow_part_stats *out, size_t max);

/** A topic whose copy has fewer partitions than its source, which aagw
 *  could not grow: source partitions from @c target_partitions on are held
 *  (not read) until the copy has them. */
struct aagw_flow_missing {
        char    topic[250];  /**< source topic */
        char    remote[250]; /**< its copy at the target */
        int32_t source_partitions, target_partitions;
        char    fix[1024];   /**< the command that adds the partitions */
};

/** Copy up to @p max such topics; @returns how many it copied, or with
 *  @p out NULL how many there are. */
size_t aagw_flow_missing(const aagw_flow_t *flow,
                         struct aagw_flow_missing *out, size_t max);

/* ===================== MM2 TOPICS AND GROUP OFFSETS ====================== */

/*
 * Helpers for the offsets commands and the checkpoint task: consumer group
 * offsets through the Admin API (each call on the caller's handle, bounded
 * by @p timeout_ms).  DescribeConsumerGroups is NOT among them: on some
 * clusters (the embedded one) it hangs the handle; see
 * aagw_kafka_group_members().
 */

/** Fill the committed offsets of @p group into @p parts (offset -1001
 *  RD_KAFKA_OFFSET_INVALID where none). */
aagw_err_t aagw_kafka_group_offsets(rd_kafka_t *admin, const char *group,
                                    rd_kafka_topic_partition_list_t *parts,
                                    int timeout_ms, char *errstr,
                                    size_t errstr_size);

/** Commit @p parts for @p group (AlterConsumerGroupOffsets).  Per-partition
 *  errors are reported in @p parts and fail the call. */
aagw_err_t aagw_kafka_group_commit(rd_kafka_t *admin, const char *group,
                                   const rd_kafka_topic_partition_list_t *parts,
                                   int timeout_ms, char *errstr,
                                   size_t errstr_size);

/**
 * @brief How many members @p group has on the cluster at @p bootstraps, by
 * DescribeConsumerGroups on a throw-away handle in a CHILD PROCESS
 * (@p self_exe re-executed as `SELF offsets probe-group`), so a cluster on
 * which the call hangs or aborts costs a deadline, not the caller.
 * @returns AAGW_OK with the count in @p members, AAGW_ERR_UNSUPPORTED
 * (the cluster cannot tell: hung, refused or aborted) or another error,
 * each with the reason in @p errstr.
 */
aagw_err_t aagw_kafka_group_members(const char *self_exe,
                                    const char *bootstraps,
                                    const char *const *props, size_t prop_cnt,
                                    const char *group, int timeout_ms,
                                    int *members, char *errstr,
                                    size_t errstr_size);

/**
 * @brief The consumer groups of the cluster at @p bootstraps
 * (ListConsumerGroups), asked in a child process as
 * aagw_kafka_group_members() does (`SELF offsets probe-groups`).
 * @returns AAGW_OK with @p groups (malloc()ed array of malloc()ed names,
 * @p cnt of them; the caller frees), or AAGW_ERR_UNSUPPORTED with the
 * reason in @p errstr.
 */
aagw_err_t aagw_kafka_list_groups(const char *self_exe,
                                  const char *bootstraps,
                                  const char *const *props, size_t prop_cnt,
                                  int timeout_ms, char ***groups, size_t *cnt,
                                  char *errstr, size_t errstr_size);

/**
 * @brief Name the environment variables that the children of
 * aagw_kafka_group_members() and aagw_kafka_list_groups() must not
 * inherit: the ones the config's ${VAR} references read, which may hold
 * passwords.  The children get their client properties through a pipe
 * and need none of them.  @p names is copied; a call replaces the last
 * list.  Call it before the threads that probe start.
 * @returns AAGW_OK, or AAGW_ERR_NOMEM with the last list kept.
 */
aagw_err_t aagw_kafka_child_env_hide(const char *const *names, size_t cnt);

/** The listing itself (run in the child): prints "groups N" and N names,
 *  or "unsupported REASON". */
int aagw_kafka_list_groups_probe(const char *bootstraps,
                                 const char *const *props, size_t prop_cnt,
                                 int timeout_ms);

/**
 * @brief The child side of aagw_kafka_group_members() and
 * aagw_kafka_list_groups(): `SELF offsets probe-group BOOTSTRAPS GROUP
 * TIMEOUT_MS` or `SELF offsets probe-groups BOOTSTRAPS TIMEOUT_MS`, with
 * the client properties (NAME NUL VALUE NUL ...) on stdin: they never
 * appear on a command line.  @p argv[1] is the probe's name.
 * @returns an exit code (2: not a probe's arguments).
 */
int aagw_kafka_probe_main(int argc, char **argv);

/** The probe itself (run in the child): prints "members N" or
 *  "unsupported REASON" on stdout.  @returns an exit code. */
int aagw_kafka_group_members_probe(const char *bootstraps,
                                   const char *const *props, size_t prop_cnt,
                                   const char *group, int timeout_ms);

/* ----------------------------- READ A RANGE ---------------------------- */

/** How aagw_kafka_read_range() ended. */
typedef enum {
        AAGW_RANGE_DONE    = 0, /**< read to the end of the range */
        AAGW_RANGE_ABORTED = 1, /**< the callback returned false */
        AAGW_RANGE_TIMEOUT = 2, /**< the deadline passed first */
        AAGW_RANGE_STOPPED = 3, /**< @p stop was set first */
        AAGW_RANGE_FAILED  = 4, /**< the partition could not be assigned */
} aagw_kafka_range_end_t;

/** One partition range to read, [@p from, @p to). */
struct aagw_kafka_range {
        const char        *topic;
        int32_t            partition;
        int64_t            from, to;
        int                timeout_ms; /**< the deadline */
        bool               progress;   /**< the deadline restarts at each
                                            record (a long range takes as
                                            long as it takes) */
        const atomic_bool *stop;       /**< NULL: none */
        /** Each record in the range, in order; false: stop reading. */
        bool (*fn)(void *arg, const rd_kafka_message_t *m);
        /** Consumer errors (not the end of the partition); may be NULL. */
        void (*on_error)(void *arg, rd_kafka_resp_err_t err,
                         const char *reason);
        void *arg;
};

/**
 * @brief Read a range of one partition through the assign-only consumer
 * @p rk (assigned for the call, unassigned after).  The read ends at the
 * range's last offset, at a record past it (its end was compacted away),
 * or, for a consumer with enable.partition.eof, at an end of the
 * partition at or past the range's end (offsets that are not records,
 * such as transaction markers, never arrive; a read_committed end below
 * it is a transaction still open, waited for until the deadline).
 * @returns how it ended, with the number of records handed to fn in
 * @p nread.
 */
aagw_kafka_range_end_t aagw_kafka_read_range(rd_kafka_t *rk,
                                             const struct aagw_kafka_range *r,
                                             int64_t *nread);

/* ------------------------------ SITE LOG ------------------------------- */

/**
 * What a scale-out site's unify stage decided, read back from the site's
 * cluster (every member's transactions, committed ones only): for each
 * unified topic with an audit topic (aagw.<id>.<site>.audit.<topic>),
 * its changelogs' decisions and positions, then its audit entries.
 */
struct aagw_site_log_read {
        rd_kafka_t *reader; /**< assign-only consumer, read_committed,
                                 enable.partition.eof */
        rd_kafka_t *probe;  /**< metadata and watermarks */
        const char *gateway_id, *site;
        int         timeout_ms;  /**< per request; a read waits this
                                      long without progress */
        const atomic_bool *stop; /**< NULL: none */
        /** An id or winner as decided at @p time_ms (for the decider's
         *  restore()). */
        int (*decision)(void *opaque, const struct aagw_unify_rec *r,
                        int64_t time_ms);
        /** A stored position: input @p topic [@p partition] next. */
        int (*position)(void *opaque, const char *topic, int32_t partition,
                        int64_t next);
        /** An audit entry, as aagw_audit_decode() reads it. */
        int (*audit)(void *opaque, const void *entry, size_t len);
        void *opaque; /**< each returns 0, or non-zero to stop the read */
};

/** Read it all.  @returns AAGW_OK with the unified topics found in
 *  @p ntopics and the records read in @p records, or an error with
 *  @p errstr. */
aagw_err_t aagw_site_log_read(const struct aagw_site_log_read *q,
                              size_t *ntopics, int64_t *records, char *errstr,
                              size_t errstr_size);

/* -------------------------------- UNIFY -------------------------------- */

/**
 * The unify stage of one site (replicator/unify.c), its Kafka side: it
 * reads each logical topic T and its remote copies at the site and writes
 * the first occurrence of each id (dedup) or the newest version of each
 * entity (lww) to T's unified topic, exactly once.  One thread.  What to
 * deliver, and the state behind it, it asks of a decider through @ref
 * aagw_unify_state_ops (policy/aagw_unify_contract.h; dedup/'s decider
 * fills it), as flows reach their positions through pos_load/pos_save.
 */
typedef struct aagw_unify aagw_unify_t;

/** How one logical topic is unified (see aagw_unify_conf.topic_conf). */
struct aagw_unify_topic {
        aagw_unify_mode_t     mode;    /**< AAGW_UNIFY_OFF: not unified */
        char                  out[AAGW_TOPIC_MAX + 1]; /**< unified topic */
        const aagw_id_rule_t *id_rule; /**< borrowed; NULL: derived */
        aagw_id_rule_t       *ekey_rule; /**< lww: owned by the stage from
                                              then on; NULL: the key */
};

struct aagw_unify_conf {
        const char               *gateway_id;
        const char               *site;       /**< cluster alias */
        const char               *bootstraps; /**< of the site's cluster */
        const char *const        *props;      /**< its client properties */
        size_t                    prop_cnt;
        const aagw_repl_policy_t *policy;
        const char               *header_prefix;
        unsigned                  verdict_flags; /**< AAGW_VERDICT_F_* */
        int                       refresh_ms;    /**< topic discovery */
        /** How logical topic @p topic is unified.  @returns 0, or -1 with
         *  the reason (the topic is then not unified). */
        int (*topic_conf)(void *opaque, const char *topic,
                          struct aagw_unify_topic *tc, char *errstr,
                          size_t errstr_size);
        void *opaque;
        const struct aagw_unify_state_ops *state; /**< borrowed */
        aagw_unify_state_t                *state_opaque; /**< borrowed */
        /** Borrowed, must outlive the stage; NULL or not enabled: this
         *  process decides every partition. */
        const struct aagw_scale_out *scale_out;
        /** unify.window (0: 24 h).  Scale-out only: the retention of the
         *  ids topics, and the age past which a restore skips an id. */
        int64_t                   window_ms;
};

/** Counters (monotonic) and gauges of one unify stage. */
struct aagw_unify_stats {
        uint64_t records_in;  /**< input records taken in */
        uint64_t records_out; /**< written to unified topics, acknowledged */
        uint64_t accepted;    /**< delivered (dedup first / lww newer) */
        uint64_t dropped;     /**< dedup: id seen before */
        uint64_t superseded;  /**< lww: older than the winner */
        uint64_t identical;   /**< lww: the winner's own version again */
        uint64_t rejected;    /**< bad provenance or no entity key */
        uint64_t diverged;    /**< provenance path contradicts the topic
                                   name: audited as diverged */
        uint64_t oversized;   /**< written as a stand-in without value and
                                   the producer's headers: too large */
        uint64_t recovered;   /**< found in the output at start, folded in */
        uint64_t replayed;    /**< inputs re-read that were recovered */
        uint64_t commits;     /**< epochs stored */
        uint64_t fetch_restarts; /**< stalled input fetches restarted */
        uint64_t start_refetches; /**< input partitions sought back to
                                       their assigned offset (the start
                                       check, as the flows') */
        int64_t  inflight;    /**< produced, not yet acknowledged */
        int64_t  lag;         /**< input records not yet read; -1: unknown */
        int64_t  down_ms;     /**< the site's cluster has not answered for
                                   this long; 0 while it answers */
        int32_t  topics, inputs;
        /* Scale-out (all 0 without it). */
        uint64_t rebalances;       /**< assignments received */
        uint64_t restores;         /**< changelog partitions restored */
        uint64_t restore_ms_total; /**< time spent restoring */
        uint64_t restored_records; /**< changelog records read */
        uint64_t routed;           /**< input records written to the
                                        route topic (scale_out.route) */
        uint64_t fenced;           /**< transactions refused: the group
                                        had moved on (a zombie) */
        uint64_t aborted;          /**< transactions aborted and redone */
        uint64_t txn_commits;      /**< transactions committed */
        int32_t  owned_partitions; /**< gauge: output partitions owned,
                                        over every unified topic */
};

/** @returns the stage (its clients made, not started), or NULL with
 *  @p errstr. */
aagw_unify_t *aagw_unify_new(const struct aagw_unify_conf *c, char *errstr,
                             size_t errstr_size);
int aagw_unify_start(aagw_unify_t *u, char *errstr, size_t errstr_size);
/** Ask the stage to stop: it drains (up to 10 s) and stores its state. */
void aagw_unify_stop(aagw_unify_t *u);
/** Stop (joining the thread) and free; NULL is a no-op. */
void aagw_unify_destroy(aagw_unify_t *u);
aagw_flow_state_t aagw_unify_state(const aagw_unify_t *u);
const char *aagw_unify_site(const aagw_unify_t *u);
/** Scale-out: the consumer group that shares this stage's output
 *  partitions (borrowed, the stage's lifetime); "" without scale-out. */
const char *aagw_unify_owner_group(const aagw_unify_t *u);
void aagw_unify_error(const aagw_unify_t *u, char *buf, size_t size);
void aagw_unify_stats(const aagw_unify_t *u, struct aagw_unify_stats *st);
/** Scale-out: this process's member name (borrowed, the stage's
 *  lifetime), NULL when the stage decides every partition. */
const char *aagw_unify_member(const aagw_unify_t *u);
/** Scale-out: the output partitions owned, per unified topic
 *  ("clicks.unified 0,3; views.unified none"), or "none". */
void aagw_unify_owned(const aagw_unify_t *u, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* AAGW_REPLICATOR_H */
