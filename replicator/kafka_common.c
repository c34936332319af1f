/*
 * replicator/kafka_common.c: the mechanics that the flows (flow.c) and
 * the unify stage (unify.c) share: their clients, failing closed, the
 * per-record tokens, producing under backpressure, the start check of an
 * assigned partition, the copy's headers, making a missing topic, and
 * reading a partition range to its end (also public, for gateway/).
 */
#include "replicator_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- CLIENTS --- */

void replicator_destroy_timed(rd_kafka_t *rk, int flags) {
        char    name[256];
        int64_t t0 = aagw_mono_ms(), ms;

        if (!rk)
                return;
        snprintf(name, sizeof(name), "%s", rd_kafka_name(rk));
        rd_kafka_destroy_flags(rk, flags);
        /* A stop is bounded at 5 s: a client that takes a good part of
         * it is worth a line. */
        if ((ms = aagw_mono_ms() - t0) >= 1000)
                aagw_log(AAGW_LOG_WARN, "KAFKA",
                         "%s: its shutdown took %" PRId64 " ms", name, ms);
}

static void *destroy_one(void *arg) {
        const struct replicator_doomed *d = arg;
        replicator_destroy_timed(d->rk, d->flags);
        return NULL;
}

rd_kafka_resp_err_t replicator_watermarks(rd_kafka_t *rk, const char *topic,
                                          int32_t partition, int64_t *lo,
                                          int64_t *hi, int timeout_ms) {
        int64_t             deadline = aagw_mono_ms() + timeout_ms;
        rd_kafka_resp_err_t err;

        for (;;) {
                int64_t left = deadline - aagw_mono_ms();
                err = rd_kafka_query_watermark_offsets(
                    rk, topic, partition, lo, hi,
                    left < 500 ? (left > 0 ? (int)left : 1) : 500);
                if ((err != RD_KAFKA_RESP_ERR__TIMED_OUT &&
                     err != RD_KAFKA_RESP_ERR__TRANSPORT) ||
                    aagw_mono_ms() >= deadline || replicator_stopping())
                        return err;
        }
}

bool replicator_consumer_close(rd_kafka_t *c, int ms) {
        rd_kafka_queue_t *q;
        rd_kafka_error_t *e;
        int64_t           deadline = aagw_mono_ms() + ms;
        bool              closed   = false;

        if (!c)
                return true;
        if (ms <= 0)
                return false;
        q = rd_kafka_queue_new(c);
        if ((e = rd_kafka_consumer_close_queue(c, q))) {
                rd_kafka_error_destroy(e);
        } else {
                while (!(closed = rd_kafka_consumer_closed(c)) &&
                       aagw_mono_ms() < deadline) {
                        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 50);
                        /* Answered even now: a client whose group
                         * waits for it never finishes its destroy. */
                        if (ev && rd_kafka_event_type(ev) ==
                                      RD_KAFKA_EVENT_REBALANCE)
                                rd_kafka_assign(c, NULL);
                        if (ev)
                                rd_kafka_event_destroy(ev);
                }
        }
        rd_kafka_queue_destroy(q);
        return closed;
}

void replicator_destroy_clients(const struct replicator_doomed *v, size_t n) {
        pthread_t t[16];
        bool      own[16] = {false};

        for (size_t i = 0; i < n; i++) {
                if (!v[i].rk)
                        continue;
                /* Without a thread (or past the array) it is destroyed
                 * here, which is only slower. */
                if (i < 16 && !pthread_create(&t[i], NULL, destroy_one,
                                              (void *)&v[i]))
                        own[i] = true;
                else
                        rd_kafka_destroy_flags(v[i].rk, v[i].flags);
        }
        for (size_t i = 0; i < n && i < 16; i++)
                if (own[i])
                        pthread_join(t[i], NULL);
}

/* Delivery report: the producer's poller (the flow or stage thread). */
static void dr_thunk(rd_kafka_t *rk, const rd_kafka_message_t *m,
                     void *opaque) {
        const struct replicator_delivery *d = opaque;
        (void)rk;
        if (m->_private)
                d->fn(d->stage, m->_private, m);
}

rd_kafka_t *replicator_client(const struct replicator_client *c,
                              const char *role, const char *const *extra,
                              char *errstr, size_t errstr_size) {
        char                     name[256];
        bool                     consumer = c->type == RD_KAFKA_CONSUMER;
        bool                     producer = c->type == RD_KAFKA_PRODUCER;
        bool                     lease    = !strcmp(role, "lease");
        struct aagw_kafka_client kc       = {
            .type       = c->type,
            .bootstraps = c->bootstraps,
            .name       = name,
            .role       = !strcmp(role, "reader") || lease ? "consumer"
                          : !strcmp(role, "meta") ||
                                  !strncmp(role, "topics-", 7)
                              ? "admin"
                              : role,
            .props      = c->props,
            .prop_cnt   = c->prop_cnt,
            .common     = consumer && !strcmp(role, "consumer") && !lease
                              ? aagw_kafka_consumer_props
                              : NULL,
            .extra      = extra,
            .last       = c->last,
            .opaque     = producer ? (void *)c->delivery : c->opaque,
            .dr_msg_cb  = producer && !strcmp(role, "producer") ? dr_thunk
                                                                : NULL,
            .rebalance_cb = consumer && (!strcmp(role, "consumer") || lease)
                                ? c->rebalance_cb
                                : NULL};

        snprintf(name, sizeof(name), "%s-%s", c->who, role);
        return aagw_kafka_client_new(&kc, errstr, errstr_size);
}

/* ------------------------------------------------------- FAILING CLOSED --- */

void replicator_ctl_init(struct replicator_ctl *ctl, const char *tag,
                         const char *who) {
        pthread_mutex_init(&ctl->lock, NULL);
        ctl->tag                = tag;
        ctl->implicit_acks      = 0;
        ctl->implicit_logged_ms = 0;
        snprintf(ctl->who, sizeof(ctl->who), "%s", who);
}

static atomic_bool process_stopping;
static _Atomic int64_t process_stop_at;

void aagw_kafka_process_stop(bool stopping) {
        /* Also called from a signal handler (gateway/signals.c):
         * clock_gettime() and lock-free atomics only. */
        if (stopping && !atomic_load(&process_stopping))
                atomic_store(&process_stop_at, aagw_mono_ms());
        atomic_store(&process_stopping, stopping);
}

bool aagw_kafka_process_stopping(void) {
        return atomic_load(&process_stopping);
}

/* A side thread's stage: its stop ends the thread's waits as the
 * process's stop does (replicator_stopping()). */
static _Thread_local const atomic_bool *thread_stop;

void replicator_thread_stop_flag(const atomic_bool *stop) {
        thread_stop = stop;
}

bool replicator_stopping(void) {
        return atomic_load(&process_stopping) ||
               (thread_stop && atomic_load(thread_stop));
}

int aagw_kafka_stop_wait_ms(int ms) {
        if (!atomic_load(&process_stopping))
                return ms;
        int64_t left = atomic_load(&process_stop_at) +
                       AAGW_STOP_KAFKA_BUDGET_MS - aagw_mono_ms();
        if (left < 0)
                left = 0;
        if (left > AAGW_STOP_WAIT_MS)
                left = AAGW_STOP_WAIT_MS;
        return ms < left ? ms : (int)left;
}

rd_kafka_event_t *replicator_queue_wait(rd_kafka_queue_t *q, int timeout_ms) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        for (;;) {
                int64_t left = deadline - aagw_mono_ms();
                rd_kafka_event_t *ev = rd_kafka_queue_poll(
                    q, left <= 0 ? 0 : left < 200 ? (int)left : 200);
                if (ev || left <= 0 || replicator_stopping())
                        return ev;
        }
}

rd_kafka_resp_err_t aagw_kafka_metadata(rd_kafka_t *rk, bool all_topics,
                                        rd_kafka_topic_t *only,
                                        const struct rd_kafka_metadata **mdp,
                                        int timeout_ms,
                                        const atomic_bool *stop) {
        int64_t             deadline = aagw_mono_ms() + timeout_ms;
        rd_kafka_resp_err_t err      = RD_KAFKA_RESP_ERR__TIMED_OUT;
        int                 slice    = 500;

        for (;;) {
                if ((stop && atomic_load(stop)) || replicator_stopping())
                        return RD_KAFKA_RESP_ERR__INTR;
                int64_t left = deadline - aagw_mono_ms();
                if (left <= 0)
                        return err;
                err = rd_kafka_metadata(rk, all_topics, only, mdp,
                                        (int)(left < slice ? left : slice));
                /* No broker reachable yet: asked again every half second
                 * until the time is up, as one long request would have
                 * waited.  No answer yet: a slow cluster gets a longer
                 * slice each time (a request that timed out is not
                 * answered to the next one), up to 2 s. */
                if (err == RD_KAFKA_RESP_ERR__TIMED_OUT)
                        slice = slice >= 1000 ? 2000 : slice * 2;
                else if (err != RD_KAFKA_RESP_ERR__TRANSPORT &&
                         err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
                        return err;
        }
}

static int64_t mono_us(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t aagw_kafka_round_trip_us(rd_kafka_t *rk, int timeout_ms,
                                 const atomic_bool *stop) {
        const struct rd_kafka_metadata *md   = NULL;
        int64_t                         best = -1;

        /* Brokers only (no topic asked for): the smallest request a
         * broker answers at once, so its time is the round trip. */
        if (aagw_kafka_metadata(rk, false, NULL, &md, timeout_ms, stop))
                return -1;
        rd_kafka_metadata_destroy(md);
        for (int i = 0; i < 2; i++) {
                int64_t t0 = mono_us();

                if ((stop && atomic_load(stop)) ||
                    rd_kafka_metadata(rk, false, NULL, &md, timeout_ms))
                        break;
                rd_kafka_metadata_destroy(md);
                int64_t t = mono_us() - t0;
                if (best < 0 || t < best)
                        best = t;
        }
        return best;
}

int64_t aagw_kafka_broker_send_buffer(rd_kafka_t *rk, int32_t broker,
                                      int timeout_ms) {
        char                       id[16], err[256];
        bool                       late;
        int64_t                    got = -1;
        rd_kafka_ConfigResource_t *res;
        rd_kafka_queue_t          *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t   *o =
            rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
        rd_kafka_event_t *ev;

        snprintf(id, sizeof(id), "%" PRId32, broker);
        res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, err,
                                                  sizeof(err));
        rd_kafka_DescribeConfigs(rk, &res, 1, o, q);
        ev = aagw_kafka_admin_answer(q, timeout_ms, &late, err, sizeof(err));
        if (ev) {
                size_t                            rn, cn;
                const rd_kafka_ConfigResource_t **rr =
                    rd_kafka_DescribeConfigs_result_resources(
                        rd_kafka_event_DescribeConfigs_result(ev), &rn);
                if (!aagw_kafka_config_err(rr, rn, err, sizeof(err))) {
                        const rd_kafka_ConfigEntry_t **ce =
                            rd_kafka_ConfigResource_configs(rr[0], &cn);
                        for (size_t i = 0; i < cn; i++) {
                                const char *v =
                                    rd_kafka_ConfigEntry_value(ce[i]);
                                char     *end;
                                long long b;
                                if (strcmp(rd_kafka_ConfigEntry_name(ce[i]),
                                           "socket.send.buffer.bytes") ||
                                    !v)
                                        continue;
                                b = strtoll(v, &end, 10);
                                if (end != v && !*end)
                                        got = b > 0 ? (int64_t)b : 0;
                        }
                }
                rd_kafka_event_destroy(ev);
        }
        rd_kafka_ConfigResource_destroy(res);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        return got;
}

void replicator_ctl_deinit(struct replicator_ctl *ctl) {
        pthread_mutex_destroy(&ctl->lock);
}

void replicator_fail(struct replicator_ctl *ctl, const char *fmt, ...) {
        va_list ap;
        bool    first;

        pthread_mutex_lock(&ctl->lock);
        if ((first = !ctl->error[0])) {
                va_start(ap, fmt);
                vsnprintf(ctl->error, sizeof(ctl->error), fmt, ap);
                va_end(ap);
                aagw_log(AAGW_LOG_ERROR, ctl->tag, "%s failed: %s", ctl->who,
                         ctl->error);
        }
        pthread_mutex_unlock(&ctl->lock);
        atomic_store(&ctl->state, AAGW_FLOW_FAILED);
        atomic_store(&ctl->stop, true);
}

void replicator_ctl_error(const struct replicator_ctl *ctl, char *buf,
                          size_t size) {
        struct replicator_ctl *c = (struct replicator_ctl *)ctl;
        pthread_mutex_lock(&c->lock);
        snprintf(buf, size, "%s", c->error);
        pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------- DENIALS --- */

/* "write to" for "WRITE": the words before the resource in a message. */
static const char *authz_verb(const char *op) {
        static const char *const v[][2] = {
            {"READ", "read"},
            {"WRITE", "write to"},
            {"CREATE", "create"},
            {"DESCRIBE", "describe"},
            {"ALTER", "alter"},
            {"DESCRIBE_CONFIGS", "describe the configs of"},
            {"ALTER_CONFIGS", "alter the configs of"},
            {"IDEMPOTENT_WRITE", "write idempotently to"},
        };
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
                if (!strcmp(op, v[i][0]))
                        return v[i][1];
        return op;
}

/* The part of 'list' ("topic T, group G") that starts with 'kind', as
 * "%.*s" length and start; the first part when none does. */
static const char *authz_part(const char *list, const char *kind, int *len) {
        const char *p = list, *q;
        size_t      kl = strlen(kind);

        for (;;) {
                q = strstr(p, ", ");
                if (kl && !strncmp(p, kind, kl)) {
                        *len = q ? (int)(q - p) : (int)strlen(p);
                        return p;
                }
                if (!q)
                        break;
                p = q + 2;
        }
        q    = strstr(list, ", ");
        *len = q ? (int)(q - list) : (int)strlen(list);
        return list;
}

/* Whether 'err' is a denial, and which kind of resource it names. */
static const char *authz_kind(rd_kafka_resp_err_t err) {
        switch (err) {
        case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED: return "topic ";
        case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED: return "group ";
        case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                return "transactional.id ";
        case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
        case RD_KAFKA_RESP_ERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED:
                return "";
        default: return NULL;
        }
}

static void authz_note(const char *alias, rd_kafka_resp_err_t err,
                       const char *kind, const char *operation,
                       const char *fmt, va_list ap) {
        const char *res;
        char        list[512], what[256];
        int         len;

        if (!strcmp(kind, "group "))
                operation = "READ"; /* join, fetch and commit offsets */
        else if (!strcmp(kind, "transactional.id "))
                operation = "WRITE";
        vsnprintf(list, sizeof(list), fmt, ap);
        res = authz_part(list, kind, &len);
        if (err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
                /* The cluster-wide right behind the request: a producer's
                 * id (IDEMPOTENT_WRITE, or WRITE on any topic), topic
                 * creation (CREATE), the ACL API (DESCRIBE, ALTER). */
                snprintf(what, sizeof(what),
                         "%s %.*s denied: allow aagw's principal %s on the "
                         "cluster",
                         authz_verb(operation), len, res,
                         !strcmp(operation, "WRITE") ? "IDEMPOTENT_WRITE"
                                                     : operation);
        else if (err ==
                 RD_KAFKA_RESP_ERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED)
                snprintf(what, sizeof(what),
                         "%s %.*s denied: the delegation token aagw "
                         "logged in with may not do that",
                         authz_verb(operation), len, res);
        else
                snprintf(what, sizeof(what),
                         "%s %.*s denied: allow aagw's principal %s on it",
                         !strcmp(kind, "group ") ? "use of consumer"
                         : !strcmp(kind, "transactional.id ")
                             ? "transactions with"
                             : authz_verb(operation),
                         len, res, operation);
        aagw_access_note(alias, AAGW_ACCESS_AUTHORIZATION, what,
                         rd_kafka_err2str(err));
}

bool replicator_note_authz(const char *alias, rd_kafka_resp_err_t err,
                           const char *operation, const char *fmt, ...) {
        const char *kind = authz_kind(err);
        va_list     ap;

        if (!kind)
                return false;
        va_start(ap, fmt);
        authz_note(alias, err, kind, operation, fmt, ap);
        va_end(ap);
        return true;
}

bool replicator_note_authz_rk(const rd_kafka_t *rk, rd_kafka_resp_err_t err,
                              const char *operation, const char *fmt, ...) {
        const char *kind = authz_kind(err);
        char        alias[AAGW_ALIAS_MAX + 1];
        va_list     ap;

        if (!kind)
                return false;
        if (!aagw_access_alias_of(rk, alias, sizeof(alias)))
                return true;
        va_start(ap, fmt);
        authz_note(alias, err, kind, operation, fmt, ap);
        va_end(ap);
        return true;
}


/* -------------------------------------------------------------- TOKENS --- */

void *replicator_token_get(struct aagw_pool *pool) {
        void *t = aagw_pool_get(pool);
        if (t)
                memset(t, 0, pool->size);
        return t;
}

void replicator_token_put(struct aagw_pool *pool, struct replicator_token *t) {
        if (t->src) {
                rd_kafka_message_destroy(t->src);
                t->src = NULL;
        }
        aagw_pool_put(pool, t);
}

/* ------------------------------------------------------------- PRODUCE --- */

rd_kafka_resp_err_t replicator_produce(rd_kafka_t *producer,
                                       rd_kafka_topic_t *rkt,
                                       int32_t partition,
                                       const rd_kafka_message_t *m,
                                       rd_kafka_headers_t *hdrs, int64_t ts,
                                       void *opaque, const atomic_bool *stop,
                                       int64_t *now_cache) {
        for (;;) {
                rd_kafka_resp_err_t err = rd_kafka_producev(
                    producer, RD_KAFKA_V_RKT(rkt),
                    RD_KAFKA_V_PARTITION(partition),
                    /* No copy: the consumed record outlives the
                     * produce (its token) until its final report. */
                    RD_KAFKA_V_MSGFLAGS(0),
                    RD_KAFKA_V_KEY(m->key, m->key_len),
                    RD_KAFKA_V_VALUE(m->payload, m->len),
                    RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                    RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(opaque),
                    RD_KAFKA_V_END);
                if (!err)
                        return RD_KAFKA_RESP_ERR_NO_ERROR;
                if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || atomic_load(stop))
                        return err;
                rd_kafka_poll(producer, 10);
                if (now_cache)
                        *now_cache = aagw_wall_ms();
        }
}

/* --------------------------------------------------------- START CHECK --- */

void replicator_start_arm(struct replicator_start *s, int64_t offset) {
        s->pending      = offset >= 0;
        s->refetched_at = -1;
        s->seek_batch   = 0;
}

/* Seek 'topic' ['partition'] back to 'expected' (see struct
 * replicator_start): the record at 'offset' is dropped whether or not the
 * seek succeeds; if it fails, the partition's next record tries again. */
static void start_seek_back(struct replicator_start *s,
                            const struct replicator_start_ctx *c,
                            const char *topic, int32_t partition,
                            int64_t expected, int64_t offset) {
        aagw_log(AAGW_LOG_WARN, c->tag,
                 "%s: %s [%d]: assigned at offset %" PRId64 " but the first "
                 "record fetched is at %" PRId64 ": fetching from %" PRId64
                 " again",
                 c->who, topic, (int)partition, expected, offset, expected);
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, topic, partition)->offset =
            expected;
        rd_kafka_error_t   *e   = rd_kafka_seek_partitions(c->consumer, l, 5000);
        rd_kafka_resp_err_t err = e ? rd_kafka_error_code(e) : l->elems[0].err;
        if (err) {
                aagw_log(AAGW_LOG_WARN, c->tag,
                         "%s: %s [%d]: seek to %" PRId64 ": %s", c->who, topic,
                         (int)partition, expected,
                         e ? rd_kafka_error_string(e) : rd_kafka_err2str(err));
        } else {
                s->refetched_at = expected;
                s->seek_batch   = c->batch_no;
                if (c->refetches)
                        AAGW_STAT_ADD(*c->refetches, 1);
        }
        if (e)
                rd_kafka_error_destroy(e);
        rd_kafka_topic_partition_list_destroy(l);
}

bool replicator_start_take(struct replicator_start *s,
                           const struct replicator_start_ctx *c,
                           const char *topic, int32_t partition,
                           int64_t expected, int64_t offset) {
        if (offset > expected) {
                if (s->refetched_at != expected) {
                        start_seek_back(s, c, topic, partition, expected,
                                        offset);
                        return true;
                }
                if (s->seek_batch == c->batch_no)
                        return true; /* fetched before the seek */
                aagw_log(AAGW_LOG_INFO, c->tag,
                         "%s: %s [%d]: fetched from %" PRId64 " again, the "
                         "first record is still at %" PRId64 ": the source "
                         "holds nothing in between",
                         c->who, topic, (int)partition, expected, offset);
        } else if (s->refetched_at == offset) {
                aagw_log(AAGW_LOG_WARN, c->tag,
                         "%s: %s [%d]: fetched from %" PRId64 " again: the "
                         "first record is there now (librdkafka had "
                         "started the partition past its assigned offset)",
                         c->who, topic, (int)partition, offset);
        }
        s->pending = false;
        return false;
}

/* ------------------------------------------------------------- HEADERS --- */

rd_kafka_headers_t *replicator_copy_headers(const aagw_repl_policy_t *pol,
                                            rd_kafka_message_t *m,
                                            const struct aagw_header *view,
                                            size_t view_cnt, bool own,
                                            size_t reserve) {
        rd_kafka_headers_t *h = NULL;
        char                names[8][AAGW_AFFIX_MAX + 32];
        size_t              n = 0;

        /* Copy the names first: removing a header frees it, and the view
         * points into the header list. */
        for (size_t i = 0; own && view && i < view_cnt && n < 8; i++)
                if (aagw_prov_is_own_header(pol, view[i].name))
                        snprintf(names[n++], sizeof(names[0]), "%s",
                                 view[i].name);
        if (rd_kafka_message_detach_headers(m, &h))
                h = NULL;
        for (size_t i = 0; h && i < n; i++)
                rd_kafka_header_remove(h, names[i]);
        /* No view, or more than 8 distinct own names (hostile, and rare):
         * the slow path strips the rest one by one. */
        if (h && own && (!view || n == 8)) {
                const char *name;
                const void *val;
                size_t      sz;
                for (size_t i = 0;
                     !rd_kafka_header_get_all(h, i, &name, &val, &sz);) {
                        if (aagw_prov_is_own_header(pol, name)) {
                                char copy[512];
                                snprintf(copy, sizeof(copy), "%s", name);
                                rd_kafka_header_remove(h, copy);
                        } else
                                i++;
                }
        }
        return h ? h : rd_kafka_headers_new(reserve);
}

/* -------------------------------------------------------------- TOPICS --- */

int replicator_md_partitions(const struct rd_kafka_metadata *md,
                             const char *topic) {
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, topic))
                        return md->topics[i].err ? -1
                                                 : md->topics[i].partition_cnt;
        return -1;
}

int replicator_topic_make(const struct replicator_topic_maker *tm,
                          const char *topic, int partitions) {
        char err[256];
        int  rc = -2;

        if (!*tm->admin_unsupported)
                rc = aagw_kafka_topic_create(tm->admin, topic, partitions,
                                             3000, err, sizeof(err));
        if (rc == 0) {
                aagw_log(AAGW_LOG_INFO, tm->tag,
                         "%s: created topic %s with %d partitions at %s",
                         tm->who, topic, partitions, tm->cluster);
                return partitions;
        }
        if (rc == -2 && !*tm->admin_unsupported) {
                /* Timed out or unsupported: this cluster lacks the
                 * feature.  Say so once and rely on auto-creation. */
                *tm->admin_unsupported = true;
                aagw_log(AAGW_LOG_WARN, tm->tag,
                         "%s: cluster %s does not create topics through the "
                         "Admin API (%s); relying on broker auto-creation "
                         "from now on",
                         tm->who, tm->cluster, err);
        } else if (rc == -1)
                aagw_log(AAGW_LOG_WARN, tm->tag,
                         "%s: cannot create topic %s at %s: %s", tm->who,
                         topic, tm->cluster, err);
        if (!tm->producer)
                return -1;
        /* Auto-creation: ask the producer, which may create topics, for
         * this topic's metadata. */
        int have = aagw_kafka_topic_autocreate(tm->producer, topic, 5000);
        if (have > 0)
                aagw_log(AAGW_LOG_INFO, tm->tag,
                         "%s: topic %s auto-created at %s with %d partitions",
                         tm->who, topic, tm->cluster, have);
        return have > 0 ? have : -1;
}

/* ---------------------------------------------------------- READ RANGE --- */

aagw_kafka_range_end_t aagw_kafka_read_range(rd_kafka_t *rk,
                                             const struct aagw_kafka_range *r,
                                             int64_t *nread) {
        rd_kafka_topic_partition_list_t *a;
        int64_t deadline = aagw_mono_ms() + r->timeout_ms, last = r->from - 1;
        aagw_kafka_range_end_t end = AAGW_RANGE_DONE;
        rd_kafka_resp_err_t    err;

        *nread = 0;
        if (r->from >= r->to)
                return AAGW_RANGE_DONE;
        a = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, r->topic, r->partition)->offset =
            r->from;
        err = rd_kafka_assign(rk, a);
        rd_kafka_topic_partition_list_destroy(a);
        if (err) {
                if (r->on_error)
                        r->on_error(r->arg, err, rd_kafka_err2str(err));
                return AAGW_RANGE_FAILED;
        }
        while (last < r->to - 1) {
                if (r->stop && atomic_load(r->stop)) {
                        end = AAGW_RANGE_STOPPED;
                        break;
                }
                if (aagw_mono_ms() > deadline) {
                        end = AAGW_RANGE_TIMEOUT;
                        break;
                }
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
                if (!m)
                        continue;
                if (m->err) {
                        /* The end (a reader with enable.partition.eof):
                         * offsets up to 'to' that are not records
                         * (compacted away, transaction markers) never
                         * arrive.  Only an end at or past 'to' ends the
                         * range: a read_committed reader's end stops at
                         * a transaction still open (the last stable
                         * offset), and what follows it is waited for. */
                        bool eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
                        if (eof && m->partition == r->partition &&
                            m->offset >= r->to) {
                                rd_kafka_message_destroy(m);
                                break;
                        }
                        if (!eof && r->on_error)
                                r->on_error(r->arg, m->err,
                                            rd_kafka_message_errstr(m));
                        rd_kafka_message_destroy(m);
                        continue;
                }
                if (m->partition != r->partition || m->offset <= last) {
                        rd_kafka_message_destroy(m);
                        continue;
                }
                last = m->offset;
                if (r->progress)
                        deadline = aagw_mono_ms() + r->timeout_ms;
                /* Past the range (its end was compacted away): done, and
                 * that record is not the caller's to judge. */
                bool more = true;
                if (m->offset < r->to) {
                        (*nread)++;
                        more = r->fn(r->arg, m);
                }
                rd_kafka_message_destroy(m);
                if (!more) {
                        end = AAGW_RANGE_ABORTED;
                        break;
                }
        }
        rd_kafka_assign(rk, NULL);
        return end;
}

/* ------------------------------------------------ A PARTITION'S TRUE END --- */

const char *const *replicator_end_probe_props(const char *group,
                                              const char **kv) {
        static const char *const props[] = {
            "enable.auto.commit", "false",
            "enable.partition.eof", "false",
            /* The answer itself: an offset out of range is reported, not
             * reset (librdkafka's __AUTO_OFFSET_RESET, with the offset
             * asked for). */
            "auto.offset.reset", "error",
            /* An offset above the watermark gets empty fetches: short. */
            "fetch.wait.max.ms", "10",
            /* The answer is an error, and librdkafka backs a partition
             * off for fetch.error.backoff.ms (500) after one, across an
             * unassign and a new assign: asking about the same partition
             * again within that (replicator_settle_all()'s second round,
             * a flow's next partition after it) waited out the rest of
             * the 500 ms, 0.43 s for one question in a kept run.  The
             * probe holds one partition for one question at a time (up
             * to END_PROBE_MS), so the short backoff cannot spin long
             * against a broker that fails. */
            "fetch.error.backoff.ms", "10",
            NULL};
        size_t n = 0;

        kv[n++] = "group.id";
        kv[n++] = group;
        for (size_t i = 0; props[i]; i++)
                kv[n++] = props[i];
        kv[n] = NULL;
        return kv;
}

/* How long one fetch past the end waits for the broker's answer (the
 * out-of-range answer takes one round trip once connected), and the
 * pause between two rounds of replicator_settle_end(). */
#define END_PROBE_MS 2000
#define END_ROUND_MS 250
/* replicator_settle_all(): watermarks growing this long are a writer,
 * not requests being released. */
#define END_GROWING_MS 2000

void replicator_refresh_leaders(rd_kafka_t *rk, const char *topic,
                                int timeout_ms) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;

        /* Asked in slices, given up at the process's stop (a cluster
         * that is gone would hold the stop for the whole timeout). */
        if (rkt && !aagw_kafka_metadata(rk, false, rkt, &md, timeout_ms, NULL))
                rd_kafka_metadata_destroy(md);
        if (rkt)
                rd_kafka_topic_destroy(rkt);
}

void replicator_prime_topic(rd_kafka_t *probe, rd_kafka_t *reader,
                            const char *topic) {
        replicator_refresh_leaders(probe, topic, 2000);
        replicator_refresh_leaders(reader, topic, 2000);
}

/* Whether watermarks grew in every round for END_GROWING_MS: a writer
 * (not requests being released, which drain in well under a second).
 * '*since': when the growth began, -1 if it did not grow last round. */
static bool writer_seen(int64_t *since, bool grew) {
        int64_t now = aagw_mono_ms();

        if (!grew)
                *since = -1;
        else if (*since < 0)
                *since = now;
        return *since >= 0 && now - *since >= END_GROWING_MS;
}

bool replicator_log_ends_at(rd_kafka_t *probe, const char *topic,
                            int32_t partition, int64_t hi, int timeout_ms) {
        rd_kafka_topic_partition_list_t *a;
        int64_t deadline = aagw_mono_ms() + timeout_ms;
        bool    ends = false, answered = false;

        a = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, topic, partition)->offset = hi + 1;
        rd_kafka_resp_err_t err = rd_kafka_assign(probe, a);
        rd_kafka_topic_partition_list_destroy(a);
        if (err)
                return false;
        /* Not past the process's stop: a leader that is gone never
         * answers, and the stop waits for this (a reconciliation under
         * way is joined before the flow stops). */
        while (!answered && aagw_mono_ms() < deadline &&
               !replicator_stopping()) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(probe, 100);
                if (!m)
                        continue;
                /* Only this question's answer: an error left from an
                 * earlier call names the offset that call asked for. */
                if (m->rkt && m->partition == partition &&
                    !strcmp(rd_kafka_topic_name(m->rkt), topic)) {
                        if (!m->err) {
                                answered = true; /* the watermark moved */
                        } else if ((m->err ==
                                        RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
                                    m->err ==
                                        RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) &&
                                   m->offset == hi + 1) {
                                answered = ends = true;
                        }
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_assign(probe, NULL);
        return ends;
}

int replicator_settle_end(rd_kafka_t *reader, rd_kafka_t *probe,
                          const char *topic, int32_t partition, int64_t *lo,
                          int64_t *hi, int wait_ms, const atomic_bool *stop,
                          const char *tag, const char *who) {
        int64_t start = aagw_mono_ms(), first = *hi, growing = -1;
        bool    logged = false;

        for (;;) {
                if (stop && atomic_load(stop))
                        return -1;
                bool ends = replicator_log_ends_at(probe, topic, partition,
                                                   *hi, END_PROBE_MS);
                aagw_log(AAGW_LOG_DEBUG, tag,
                         "%s: %s [%d]: a fetch at %" PRId64 " (the high "
                         "watermark + 1) %s",
                         who, topic, (int)partition, *hi + 1,
                         ends ? "is out of range: the log ends there"
                              : "is not refused: the log may go on");
                if (ends) {
                        if (logged)
                                aagw_log(AAGW_LOG_INFO, tag,
                                         "%s: %s [%d]: end offset %" PRId64
                                         " -> %" PRId64 ", now the end of "
                                         "its leader's log (after %.1f s)",
                                         who, topic, (int)partition, first,
                                         *hi,
                                         (double)(aagw_mono_ms() - start) /
                                             1000.0);
                        return 0;
                }
                if (aagw_mono_ms() - start >= wait_ms)
                        return 1;
                if (!logged)
                        aagw_log(AAGW_LOG_WARN, tag,
                                 "%s: %s [%d]: its leader did not refuse a "
                                 "fetch after the end offset %" PRId64
                                 " (the high watermark): the log may hold "
                                 "records a consumer cannot see yet (a "
                                 "replica in the ISR has not fetched them, "
                                 "e.g. a broker that died and is not fenced "
                                 "yet); waiting for up to %d s until the "
                                 "watermark is the log's end",
                                 who, topic, (int)partition, *hi,
                                 wait_ms / 1000);
                logged = true;
                replicator_refresh_leaders(reader, topic, 2000);
                replicator_refresh_leaders(probe, topic, 2000);
                struct timespec ts = {0, END_ROUND_MS * 1000000L};
                nanosleep(&ts, NULL);
                int64_t l, h;
                if (!replicator_watermarks(reader, topic, partition,
                                                      &l, &h, 5000)) {
                        /* Growing on and on: a writer. */
                        bool writer = writer_seen(&growing, h > *hi);
                        *lo = l;
                        *hi = h;
                        if (writer) {
                                aagw_log(AAGW_LOG_WARN, tag,
                                         "%s: %s [%d] keeps growing "
                                         "(another writer: a second process "
                                         "with this gateway's identity?); "
                                         "going by its watermark %" PRId64,
                                         who, topic, (int)partition, *hi);
                                return 0;
                        }
                }
        }
}

/* replicator_log_ends_at() for every partition of 'ends' at once (one
 * assignment of the probe, each at its 'hi' + 1), 'ok[i]' set to the
 * answer; partitions with 'hi' < 0 are not asked ('ok' true).  Asked one
 * after another, a round of replicator_settle_all() took some 40 ms per
 * partition on the embedded cluster (the probe's assignment, its fetch
 * and the answer), 1.2 s of a flow's start for two topics of 8
 * partitions; at once, about one partition's time. */
static void logs_end_at(rd_kafka_t *probe, const struct replicator_end *ends,
                        size_t n, bool *ok, int timeout_ms) {
        rd_kafka_topic_partition_list_t *a;
        int64_t                          deadline = aagw_mono_ms() + timeout_ms;
        size_t                           asked = 0, answered = 0;

        a = rd_kafka_topic_partition_list_new(n ? (int)n : 1);
        for (size_t i = 0; i < n; i++) {
                ok[i] = ends[i].hi < 0;
                if (ends[i].hi < 0)
                        continue;
                rd_kafka_topic_partition_list_add(a, ends[i].topic,
                                                  ends[i].partition)
                    ->offset = ends[i].hi + 1;
                asked++;
        }
        if (!asked || rd_kafka_assign(probe, a)) {
                rd_kafka_topic_partition_list_destroy(a);
                return;
        }
        rd_kafka_topic_partition_list_destroy(a);
        bool *done = calloc(n, sizeof(*done));
        while (done && answered < asked && aagw_mono_ms() < deadline &&
               !replicator_stopping()) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(probe, 100);
                if (!m)
                        continue;
                for (size_t i = 0; m->rkt && i < n; i++) {
                        if (done[i] || ends[i].hi < 0 ||
                            m->partition != ends[i].partition ||
                            strcmp(rd_kafka_topic_name(m->rkt), ends[i].topic))
                                continue;
                        /* Only this question's answer, as in
                         * replicator_log_ends_at(). */
                        if (!m->err) {
                                done[i] = true; /* the watermark moved */
                                answered++;
                        } else if (
                            (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
                             m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) &&
                            m->offset == ends[i].hi + 1) {
                                done[i] = ok[i] = true;
                                answered++;
                        }
                        break;
                }
                rd_kafka_message_destroy(m);
        }
        free(done);
        rd_kafka_assign(probe, NULL);
}

static int settle_all(rd_kafka_t *reader, rd_kafka_t *probe,
                      struct replicator_end *ends, bool *ends_ok, size_t n,
                      int wait_ms, const atomic_bool *stop, const char *tag,
                      const char *who) {
        int64_t start = aagw_mono_ms(), growing = -1;
        bool    logged = false, prev = false;

        for (size_t i = 0; i < n; i++)
                ends[i].hi = -1;
        for (;;) {
                bool   all = true, same = true, grew = false;
                size_t i;
                if (stop && atomic_load(stop))
                        return -1;
                for (i = 0; i < n; i++) {
                        int64_t l, h;
                        /* A partition whose leader does not answer (it
                         * died; its successor is not elected yet) holds
                         * no request of ours: a dead broker appends
                         * nothing later, and one that lost the
                         * leadership refuses what it still reads. */
                        if (replicator_watermarks(
                                reader, ends[i].topic, ends[i].partition, &l,
                                &h, 5000)) {
                                same &= ends[i].hi == -2;
                                ends[i].hi = -2;
                                replicator_refresh_leaders(
                                    reader, ends[i].topic, 2000);
                                continue;
                        }
                        same &= h == ends[i].hi;
                        grew |= ends[i].hi >= 0 && h > ends[i].hi;
                        ends[i].hi = h;
                }
                logs_end_at(probe, ends, n, ends_ok, END_PROBE_MS);
                for (i = 0; i < n && ends_ok[i]; i++)
                        ;
                all = i == n;
                if (all && prev && same) {
                        if (logged)
                                aagw_log(AAGW_LOG_INFO, tag,
                                         "%s: every partition it writes "
                                         "ends at its watermark (after "
                                         "%.1f s)",
                                         who,
                                         (double)(aagw_mono_ms() - start) /
                                             1000.0);
                        return 0;
                }
                prev = all;
                /* Watermarks that keep moving: someone writes there (a
                 * second process with this identity), which is not a
                 * held request (it drains in well under a second once
                 * released): waiting for it is no use. */
                if (writer_seen(&growing, grew)) {
                        aagw_log(AAGW_LOG_WARN, tag,
                                 "%s: the partitions it writes keep "
                                 "growing (another writer: a second "
                                 "process with this gateway's identity?); "
                                 "going on",
                                 who);
                        return 0;
                }
                if (aagw_mono_ms() - start >= wait_ms)
                        return 1;
                if (!all && !logged) {
                        aagw_log(AAGW_LOG_WARN, tag,
                                 "%s: %s [%d] does not end at its "
                                 "watermark (or does not answer): a request "
                                 "of the previous run may still be held by "
                                 "its broker; waiting for up to %d s until "
                                 "every partition it writes does",
                                 who, i < n ? ends[i].topic : "?",
                                 i < n ? (int)ends[i].partition : -1,
                                 wait_ms / 1000);
                        logged = true;
                }
                if (!all && i < n) {
                        aagw_log(AAGW_LOG_DEBUG, tag,
                                 "%s: %s [%d]: watermark %" PRId64 ", not "
                                 "(yet) the end of its leader's log, or no "
                                 "answer",
                                 who, ends[i].topic, (int)ends[i].partition,
                                 ends[i].hi);
                        replicator_refresh_leaders(reader, ends[i].topic, 2000);
                        replicator_refresh_leaders(probe, ends[i].topic, 2000);
                }
                struct timespec ts = {0, END_ROUND_MS * 1000000L};
                nanosleep(&ts, NULL);
        }
}

int replicator_settle_all(rd_kafka_t *reader, rd_kafka_t *probe,
                          struct replicator_end *ends, size_t n, int wait_ms,
                          const atomic_bool *stop, const char *tag,
                          const char *who) {
        bool *ok = calloc(n ? n : 1, sizeof(*ok));
        int   r;

        if (!ok)
                return 1; /* out of memory: not known to have settled */
        r = settle_all(reader, probe, ends, ok, n, wait_ms, stop, tag, who);
        free(ok);
        return r;
}

/* ------------------------------------------ IMPLICIT ACKNOWLEDGEMENTS --- */

/* The first librdkafka release aagw has seen keep a refused batch ahead
 * of the later ones in a leader change (kafka-leader_kill and
 * kafka-target_kill exact over 3 runs of each; 2.0.2 lost records). */
#define IMPLICIT_ACK_SOUND 0x020800ff

bool replicator_implicit_ack(struct replicator_ctl *ctl, const char *topic,
                             int32_t partition, const char *src_topic,
                             int32_t src_partition, int64_t src_offset) {
        return replicator_implicit_ack_lib(ctl, rd_kafka_version(), topic,
                                           partition, src_topic, src_partition,
                                           src_offset);
}

bool replicator_implicit_ack_lib(struct replicator_ctl *ctl, int lib,
                                 const char *topic, int32_t partition,
                                 const char *src_topic, int32_t src_partition,
                                 int64_t src_offset) {
        if (lib < IMPLICIT_ACK_SOUND) {
                replicator_fail(
                    ctl,
                    "%s [%d]: the copy of %s [%d] offset %" PRId64
                    " was reported delivered without an offset "
                    "(librdkafka acknowledged it implicitly after a later "
                    "batch; librdkafka %d.%d.%d does that also to records a "
                    "leader refused and that were never written): stopping "
                    "rather than count it delivered; a restart checks what "
                    "the target holds",
                    topic, (int)partition, src_topic, (int)src_partition,
                    src_offset, (lib >> 24) & 0xff, (lib >> 16) & 0xff,
                    (lib >> 8) & 0xff);
                return false;
        }
        int64_t now = aagw_mono_ms();
        pthread_mutex_lock(&ctl->lock);
        uint64_t n = ++ctl->implicit_acks;
        bool     say =
            !ctl->implicit_logged_ms || now - ctl->implicit_logged_ms >= 60000;
        if (say) {
                ctl->implicit_acks      = 0;
                ctl->implicit_logged_ms = now;
        }
        pthread_mutex_unlock(&ctl->lock);
        if (say)
                aagw_log(AAGW_LOG_WARN, ctl->tag,
                         "%s: %s [%d]: the copy of %s [%d] offset %" PRId64
                         " and %" PRIu64 " other record(s) since the last "
                         "such line were acknowledged without an offset "
                         "(their request's answer was lost, a later batch "
                         "of the partition was written, so they were too): "
                         "counted delivered; no offset sync is written for "
                         "them",
                         ctl->who, topic, (int)partition, src_topic,
                         (int)src_partition, src_offset, n - 1);
        return true;
}

/* ------------------------------------------------------ CONFIG ANSWERS --- */

rd_kafka_resp_err_t aagw_kafka_config_err(
    const rd_kafka_ConfigResource_t **rr, size_t rn, char *err,
    size_t err_size) {
        if (!rn) {
                snprintf(err, err_size, "the answer names no topic");
                return RD_KAFKA_RESP_ERR__FAIL;
        }
        rd_kafka_resp_err_t e   = rd_kafka_ConfigResource_error(rr[0]);
        const char         *msg = rd_kafka_ConfigResource_error_string(rr[0]);
        if (e)
                snprintf(err, err_size, "%s",
                         msg && *msg ? msg : rd_kafka_err2str(e));
        return e;
}

rd_kafka_event_t *aagw_kafka_admin_answer(rd_kafka_queue_t *q, int timeout_ms,
                                          bool *timed_out, char *errstr,
                                          size_t errstr_size) {
        rd_kafka_event_t *ev = replicator_queue_wait(q, timeout_ms + 2000);

        *timed_out = !ev;
        if (!ev) {
                snprintf(errstr, errstr_size,
                         replicator_stopping() ? "no answer before the stop"
                                               : "no answer in %d ms",
                         timeout_ms);
                return NULL;
        }
        if (rd_kafka_event_error(ev)) {
                *timed_out =
                    rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR__TIMED_OUT ||
                    rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR__TRANSPORT;
                snprintf(errstr, errstr_size, "%s",
                         rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
                return NULL;
        }
        return ev;
}
