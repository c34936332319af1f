/* replicator/kconf.c: librdkafka client configurations. */
#include "replicator_int.h"
#include "stage.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>


aagw_err_t aagw_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                               const char *value, char *errstr,
                               size_t errstr_size) {
        char              why[512];
        rd_kafka_conf_res_t res;

        res = rd_kafka_conf_set(conf, name, value, why, sizeof(why));
        if (res == RD_KAFKA_CONF_OK)
                return AAGW_OK;
        /* librdkafka quotes the value in "Invalid value" messages; do not
         * let a password leak that way. */
        if (aagw_key_is_secret(name) && res == RD_KAFKA_CONF_INVALID)
                snprintf(errstr, errstr_size, "%s: invalid value", name);
        else
                snprintf(errstr, errstr_size, "%s: %s", name, why);
        return AAGW_ERR_CONFIG;
}

void aagw_kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                       const char *buf) {
        aagw_log_level_t l;

        if (level <= LOG_ERR)
                l = AAGW_LOG_ERROR;
        else if (level <= LOG_WARNING)
                l = AAGW_LOG_WARN;
        else if (level <= LOG_INFO)
                l = AAGW_LOG_INFO;
        else
                l = AAGW_LOG_DEBUG;
        aagw_log(l, "KAFKA", "%s: %s: %s", rd_kafka_name(rk), fac, buf);
        aagw_access_note_line(rk, fac, buf);
}

rd_kafka_conf_t *aagw_kafka_conf_new(const char *bootstraps, const char *role,
                                     char *errstr, size_t errstr_size) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        /* librdkafka's own lines go through aagw's log format. */
        rd_kafka_conf_set_log_cb(conf, aagw_kafka_log_cb);
        char             client_id[300];

        snprintf(client_id, sizeof(client_id), "aagw-%s", role ? role : "client");
        /* Recover from a broker restart in about a second instead of the
         * default 10 s backoff ceiling. */
        if (aagw_kafka_conf_set(conf, "client.id", client_id, errstr,
                                errstr_size) ||
            aagw_kafka_conf_set(conf, "reconnect.backoff.max.ms", "1000",
                                errstr, errstr_size) ||
            /* No client metrics to the brokers (KIP-714): aagw exports
             * its own.  With them on, librdkafka 2.8.0's rd_kafka_destroy()
             * waited a full second in about one client in four (a lost
             * wake-up in its telemetry shutdown), seconds per stop. */
            aagw_kafka_conf_set(conf, "enable.metrics.push", "false",
                                errstr, errstr_size) ||
            aagw_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr,
                                errstr_size)) {
                rd_kafka_conf_destroy(conf);
                return NULL;
        }
        return conf;
}

void aagw_kafka_instance_id(char *out, size_t out_size, const char *group,
                            const char *site) {
        snprintf(out, out_size, "%s@%s", group,
                 site && *site ? site : "all");
}

bool aagw_kafka_fatal(rd_kafka_t *rk, rd_kafka_resp_err_t err, char *errstr,
                      size_t errstr_size) {
        char                why[512];
        rd_kafka_resp_err_t ferr;

        if (err != RD_KAFKA_RESP_ERR__FATAL)
                return false;
        ferr = rd_kafka_fatal_error(rk, why, sizeof(why));
        if (ferr == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID)
                snprintf(errstr, errstr_size,
                         "%s: another process joined the consumer group "
                         "with this process's group.instance.id: two aagw "
                         "processes with the same gateway.id run the same "
                         "flow or unify stage (each needs its own --site, "
                         "or its own gateway.id), or this process stalled "
                         "longer than the consumer's session.timeout.ms "
                         "and its own rejoin took the id",
                         why);
        else
                snprintf(errstr, errstr_size, "fatal client error: %s",
                         ferr ? why : rd_kafka_err2str(err));
        return true;
}

void aagw_reach_note(struct aagw_reach *r, rd_kafka_resp_err_t err) {
        if (!err && r->cluster)
                aagw_access_ok(r->cluster, AAGW_ACCESS_OK);
        if (!err)
                atomic_store(&r->down_since_ms, 0);
        else if (!atomic_load(&r->down_since_ms))
                atomic_store(&r->down_since_ms, aagw_mono_ms());
}

int64_t aagw_reach_down_ms(const struct aagw_reach *r) {
        int64_t since = atomic_load(&r->down_since_ms), d;

        if (!since)
                return 0;
        d = aagw_mono_ms() - since;
        return d > 0 ? d : 1;
}

rd_kafka_resp_err_t aagw_kafka_ping(rd_kafka_t *rk, int timeout_ms,
                                    const atomic_bool *stop) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t             err;

        /* In slices that end at a stop (a destroy joins the prober). */
        err = aagw_kafka_metadata(rk, false, NULL, &md, timeout_ms, stop);
        if (!err)
                rd_kafka_metadata_destroy(md);
        return err;
}

struct aagw_prober {
        rd_kafka_t        *rk;
        struct aagw_reach *reach;
        int                interval_ms;
        struct side_thread t;
};

static void *prober_main(void *arg) {
        aagw_prober_t *p = arg;

        pthread_mutex_lock(&p->t.lock);
        while (!atomic_load(&p->t.stop)) {
                pthread_mutex_unlock(&p->t.lock);
                rd_kafka_resp_err_t err =
                    aagw_kafka_ping(p->rk, 2000, &p->t.stop);
                /* A ping cut short by the stop says nothing of the
                 * cluster. */
                if (err != RD_KAFKA_RESP_ERR__INTR)
                        aagw_reach_note(p->reach, err);
                pthread_mutex_lock(&p->t.lock);
                struct timespec due;
                side_thread_due(&due, p->interval_ms);
                while (!atomic_load(&p->t.stop) &&
                       pthread_cond_timedwait(&p->t.cond, &p->t.lock, &due) ==
                           0)
                        ;
        }
        pthread_mutex_unlock(&p->t.lock);
        return NULL;
}

aagw_prober_t *aagw_prober_new(rd_kafka_t *rk, int interval_ms,
                               struct aagw_reach *reach) {
        aagw_prober_t *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        p->rk          = rk;
        p->reach       = reach;
        p->interval_ms = interval_ms > 0 ? interval_ms : 5000;
        if (!side_thread_start(&p->t, prober_main, p)) {
                free(p);
                return NULL;
        }
        return p;
}

void aagw_prober_stop(aagw_prober_t *p) {
        if (p)
                side_thread_signal(&p->t);
}

void aagw_prober_destroy(aagw_prober_t *p) {
        if (!p)
                return;
        side_thread_stop(&p->t);
        free(p);
}

static const char *const roles[] = {"consumer.", "producer.", "admin."};

const char *aagw_kafka_prop_base(const char *name) {
        for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
                if (!strncmp(name, roles[i], strlen(roles[i])))
                        return name + strlen(roles[i]);
        return name;
}

/* The librdkafka name of operator property 'name' for a client of
 * 'role', or NULL if it is another role's ("producer.linger.ms" for a
 * consumer). */
static const char *prop_for_role(const char *name, const char *role) {
        const char *base = aagw_kafka_prop_base(name);
        size_t      rlen = strlen(role);

        if (base != name && (strncmp(name, role, rlen) || name[rlen] != '.'))
                return NULL;
        return base;
}

aagw_err_t aagw_kafka_conf_apply(rd_kafka_conf_t *conf, const char *role,
                                 const char *const *kv, size_t kv_cnt,
                                 char *errstr, size_t errstr_size) {
        for (size_t i = 0; i < kv_cnt; i++) {
                const char *base = prop_for_role(kv[2 * i], role);
                if (base && aagw_kafka_conf_set(conf, base, kv[2 * i + 1],
                                                errstr, errstr_size))
                        return AAGW_ERR_CONFIG;
        }
        return AAGW_OK;
}

int aagw_kafka_topic_create(rd_kafka_t *rk, const char *topic, int partitions,
                            int timeout_ms, char *errstr, size_t errstr_size) {
        return aagw_kafka_topic_create_conf(rk, topic, partitions, NULL,
                                            timeout_ms, errstr, errstr_size);
}

int aagw_kafka_topic_create_conf(rd_kafka_t *rk, const char *topic,
                                 int partitions, const char *const *configs,
                                 int timeout_ms, char *errstr,
                                 size_t errstr_size) {
        return aagw_kafka_topic_create_rf(rk, topic, partitions, -1, configs,
                                          timeout_ms, errstr, errstr_size);
}

int aagw_kafka_topic_create_rf(rd_kafka_t *rk, const char *topic,
                               int partitions, int replication_factor,
                               const char *const *configs, int timeout_ms,
                               char *errstr, size_t errstr_size) {
        rd_kafka_NewTopic_t     *nt;
        rd_kafka_AdminOptions_t *o;
        rd_kafka_queue_t        *q;
        rd_kafka_event_t        *ev;
        char                     why[256];
        int                      rc;

        nt = rd_kafka_NewTopic_new(topic, partitions,
                                   replication_factor > 0 ? replication_factor
                                                          : -1,
                                   why, sizeof(why));
        if (!nt) {
                snprintf(errstr, errstr_size, "%s", why);
                return -1;
        }
        for (size_t i = 0; configs && configs[i] && configs[i + 1]; i += 2)
                if (rd_kafka_NewTopic_set_config(nt, configs[i],
                                                 configs[i + 1])) {
                        snprintf(errstr, errstr_size, "config %s=%s refused",
                                 configs[i], configs[i + 1]);
                        rd_kafka_NewTopic_destroy(nt);
                        return -1;
                }
        q = rd_kafka_queue_new(rk);
        o = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, why,
                                                  sizeof(why));
        rd_kafka_AdminOptions_set_operation_timeout(o, timeout_ms, why,
                                                    sizeof(why));
        rd_kafka_CreateTopics(rk, &nt, 1, o, q);
        ev = replicator_queue_wait(q, timeout_ms + 2000);
        if (!ev || rd_kafka_event_error(ev)) {
                snprintf(errstr, errstr_size, "%s",
                         ev ? rd_kafka_event_error_string(ev) : "no answer");
                rc = -2;
        } else {
                size_t                         n;
                const rd_kafka_topic_result_t **tr =
                    rd_kafka_CreateTopics_result_topics(
                        rd_kafka_event_CreateTopics_result(ev), &n);
                rd_kafka_resp_err_t e = n ? rd_kafka_topic_result_error(tr[0])
                                          : RD_KAFKA_RESP_ERR__FAIL;
                rc = !e || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? 0 : -1;
                if (rc)
                        snprintf(errstr, errstr_size, "%s",
                                 rd_kafka_err2str(e));
                /* Every stage creates its topics here: a denial is told
                 * once, for the cluster of 'rk'. */
                if (rc)
                        replicator_note_authz_rk(rk, e, "CREATE", "topic %s",
                                                 topic);
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewTopic_destroy(nt);
        return rc;
}

int aagw_kafka_topic_autocreate(rd_kafka_t *producer, const char *topic,
                                int timeout_ms) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t   *rkt = rd_kafka_topic_new(producer, topic, NULL);
        rd_kafka_resp_err_t err;
        int                 have;

        if (!rkt)
                return -1;
        err = aagw_kafka_metadata(producer, false, rkt, &md, timeout_ms, NULL);
        rd_kafka_topic_destroy(rkt);
        if (err)
                return -1;
        have = md->topic_cnt && !md->topics[0].err ? md->topics[0].partition_cnt
                                                   : -1;
        rd_kafka_metadata_destroy(md);
        return have > 0 ? have : -1;
}

const char *const aagw_kafka_producer_props[] = {
    "enable.idempotence", "true", "acks", "all", "message.timeout.ms", "0",
    /* Across a WAN records arrive in one burst per fetch round trip, so
     * lingering batches nothing more and only adds its time: at 50 ms
     * and 2,000 records/s, 5 ms put aagw's p50 1 ms above MirrorMaker
     * 2's, 2 ms put it 1.5 ms below.  On loopback 2 ms cost no CPU
     * measurably at 1,000 and 10,000 records/s and halved the p50 at
     * 1,000 (docs/benchmarks.md, "Latency across the link"). */
    "linger.ms", "2", "batch.num.messages", "10000",
    /* Records in flight, each holding its consumed record (and the fetch
     * buffer around it) until acknowledged: 500,000 took a catch-up on
     * real Kafka to 460-750 MiB peak RSS, 100,000 (with the 16 MiB
     * consumer queue below) to 340-360 MiB at no measurable loss of
     * rate (docs/benchmarks.md, "Against MirrorMaker 2"). */
    "queue.buffering.max.messages", "100000", NULL};

const char *const aagw_kafka_consumer_props[] = {
    /* librdkafka stops fetching once queued.min.messages records or
     * queued.max.messages.kbytes wait in the queue: the bound that
     * matters is the bytes (memory); the record count is set out of the
     * way, since small records would hit it first and pause a fetcher
     * with little memory in use. */
    "queued.min.messages", "1000000",
    "queued.max.messages.kbytes", "16384",
    /* How long a fetcher waits before it looks again once the queue is
     * over its bounds (default 1000 ms): a stage that drains 16 MiB in a
     * fraction of a second then idled for the rest, and with the default
     * aagw copied at 0.58-0.65x of the rate it has with 10 ms (bench_mm2,
     * 500,000 records, 3 rounds).  librdkafka before 2.2 had no setting
     * and always waited the second; aagw then woke the fetchers itself. */
    "fetch.queue.backoff.ms", "10",
    /* A broker connection has one fetch in flight.  When every partition
     * in it is at its end, the broker holds it for fetch.wait.max.ms, and
     * partitions that became fetchable meanwhile (start offset resolved,
     * queue drained below the bound above, resumed) wait for it: up to
     * half a second with the default 500, seen as the copy standing
     * still.  librdkafka's mock cluster also holds it when records
     * arrive meanwhile (a real broker answers at once), so there the wait
     * is added to every record's latency under light traffic: 50 ms gave
     * a p99 of 2-5 times a 5 ms pipe's at 1,000 records/s
     * (docs/benchmarks.md, "Against MirrorMaker 2").  10 ms bounds both,
     * at up to 100 fetches a second per idle connection. */
    "fetch.wait.max.ms", "10",
    NULL};

/* librdkafka's max.partition.fetch.bytes and aagw's queue bound
 * (aagw_kafka_consumer_props): the sizes near the cluster. */
#define BASE_PARTITION_BYTES (1LL << 20)
#define BASE_QUEUE_KBYTES 16384LL

void aagw_fetch_window_size(struct aagw_fetch_window *w, int64_t rtt_us,
                            int partitions) {
        int64_t win = 0, part, queue;

        if (partitions <= 0)
                partitions = 16;
        if (rtt_us > 0)
                win = AAGW_FETCH_WINDOW_RATE *
                      (rtt_us < 10000000 ? rtt_us : 10000000) / 1000000;
        if (win > AAGW_FETCH_WINDOW_MAX)
                win = AAGW_FETCH_WINDOW_MAX;
        /* Rounded up to 64 KiB: sizes an operator can read in the log. */
        part = (win / partitions + 65535) / 65536 * 65536;
        if (part < BASE_PARTITION_BYTES)
                part = BASE_PARTITION_BYTES;
        if (part > AAGW_FETCH_WINDOW_MAX)
                part = AAGW_FETCH_WINDOW_MAX;
        queue = win * 3 / 2 / 1024;
        if (queue < BASE_QUEUE_KBYTES)
                queue = BASE_QUEUE_KBYTES;
        *w = (struct aagw_fetch_window){.rtt_us          = rtt_us,
                                        .partitions      = partitions,
                                        .window_bytes    = part * partitions,
                                        .partition_bytes = part,
                                        .queue_kbytes    = queue,
                                        .base = part == BASE_PARTITION_BYTES &&
                                                queue == BASE_QUEUE_KBYTES};
        snprintf(w->partition_s, sizeof(w->partition_s), "%" PRId64, part);
        snprintf(w->queue_s, sizeof(w->queue_s), "%" PRId64, queue);
}

int aagw_fetch_connections(int64_t window_bytes, int64_t conn_bytes,
                           int partitions, int asked) {
        int64_t n = asked;

        if (n <= 0) {
                n = 1;
                if (window_bytes > 0 && conn_bytes > 0)
                        n = (window_bytes + conn_bytes - 1) / conn_bytes;
                if (n > AAGW_FETCH_CONNECTIONS_AUTO_MAX)
                        n = AAGW_FETCH_CONNECTIONS_AUTO_MAX;
        }
        if (n > AAGW_FETCH_CONNECTIONS_MAX)
                n = AAGW_FETCH_CONNECTIONS_MAX;
        if (partitions > 0 && n > partitions)
                n = partitions;
        return n < 1 ? 1 : (int)n;
}

int64_t aagw_fetch_connection_bytes(int64_t receive_max, int64_t send_buffer,
                                    int64_t answer_max) {
        int64_t b = receive_max > 0 ? receive_max : answer_max;

        /* Linux doubles a set SO_SNDBUF to leave room for its own
         * bookkeeping; with the large segments of fetch answers nearly
         * all of it carries data. */
        if (send_buffer > 0 && 2 * send_buffer < b)
                b = 2 * send_buffer;
        else if (!send_buffer && AAGW_TCP_SEND_DEFAULT_MAX < b)
                b = AAGW_TCP_SEND_DEFAULT_MAX;
        return answer_max > 0 && answer_max < b ? answer_max : b;
}

int64_t aagw_tcp_receive_max(void) {
        /* "min default max"; the kernel grows a socket's receive buffer
         * up to max unless the program fixes it (SO_RCVBUF, librdkafka's
         * socket.receive.buffer.bytes), which also stops the growth. */
        long long lo, def, max;
        FILE     *fp  = fopen("/proc/sys/net/ipv4/tcp_rmem", "re");
        int       got = fp ? fscanf(fp, "%lld %lld %lld", &lo, &def, &max) : 0;

        if (fp)
                fclose(fp);
        return got == 3 && max > 0 ? (int64_t)max : 6LL << 20;
}

bool aagw_fetch_window_set_by_hand(const char *const *kv, size_t kv_cnt,
                                   const char *role) {
        static const char *const window[] = {"max.partition.fetch.bytes",
                                             "queued.max.messages.kbytes",
                                             "fetch.max.bytes", NULL};

        for (size_t i = 0; i < kv_cnt; i++) {
                const char *base = prop_for_role(kv[2 * i], role);
                for (size_t k = 0; base && window[k]; k++)
                        if (!strcmp(base, window[k]))
                                return true;
        }
        return false;
}

struct aagw_qwait {
        int               fd[2]; /* read, write; both non-blocking */
        rd_kafka_queue_t *qs[AAGW_FETCH_CONNECTIONS_MAX + 2];
        size_t            cnt;
};

aagw_qwait_t *aagw_qwait_new(rd_kafka_queue_t *const *qs, size_t cnt) {
        aagw_qwait_t *w = calloc(1, sizeof(*w));

        if (!w || cnt > sizeof(w->qs) / sizeof(w->qs[0]) ||
            pipe2(w->fd, O_NONBLOCK | O_CLOEXEC)) {
                free(w);
                return NULL;
        }
        for (size_t i = 0; i < cnt; i++) {
                w->qs[i] = qs[i];
                /* librdkafka writes from its own threads: never blocks,
                 * since the pipe is non-blocking and drained by every
                 * wait. */
                rd_kafka_queue_io_event_enable(qs[i], w->fd[1], "q", 1);
        }
        w->cnt = cnt;
        return w;
}

void aagw_qwait(aagw_qwait_t *w, int timeout_ms) {
        char buf[64];

        if (!w) {
                struct timespec ts = {0, (timeout_ms < 5 ? timeout_ms : 5) *
                                             1000000L};
                nanosleep(&ts, NULL);
                return;
        }
        struct pollfd pfd = {.fd = w->fd[0], .events = POLLIN};
        if (poll(&pfd, 1, timeout_ms) > 0)
                while (read(w->fd[0], buf, sizeof(buf)) > 0)
                        ;
}

void aagw_qwait_destroy(aagw_qwait_t *w) {
        if (!w)
                return;
        for (size_t i = 0; i < w->cnt; i++)
                rd_kafka_queue_io_event_enable(w->qs[i], -1, NULL, 0);
        close(w->fd[0]);
        close(w->fd[1]);
        free(w);
}

size_t aagw_kafka_headers_view(const rd_kafka_message_t *m,
                               struct aagw_header **buf, size_t *cap) {
        rd_kafka_headers_t *h = NULL;
        const char         *name;
        const void         *val;
        size_t              size, n = 0, cnt;

        if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR)
                return 0;
        cnt = rd_kafka_header_cnt(h);
        if (cnt > *cap) {
                struct aagw_header *nb = realloc(*buf, cnt * sizeof(*nb));
                if (!nb)
                        return 0;
                *buf = nb;
                *cap = cnt;
        }
        while (n < cnt && !rd_kafka_header_get_all(h, n, &name, &val, &size)) {
                (*buf)[n].name  = name;
                (*buf)[n].value = val;
                (*buf)[n].size  = size;
                n++;
        }
        return n;
}

rd_kafka_t *aagw_kafka_client_new(const struct aagw_kafka_client *c,
                                  char *errstr, size_t errstr_size) {
        rd_kafka_conf_t *conf = aagw_kafka_conf_new(c->bootstraps, c->name,
                                                    errstr, errstr_size);
        rd_kafka_t      *rk;

        if (!conf)
                return NULL;
        for (size_t i = 0; c->common && c->common[i]; i += 2)
                if (aagw_kafka_conf_set(conf, c->common[i], c->common[i + 1],
                                        errstr, errstr_size))
                        goto fail;
        for (size_t i = 0; c->extra && c->extra[i]; i += 2)
                if (aagw_kafka_conf_set(conf, c->extra[i], c->extra[i + 1],
                                        errstr, errstr_size))
                        goto fail;
        if (aagw_kafka_conf_apply(conf, c->role, c->props, c->prop_cnt, errstr,
                                  errstr_size))
                goto fail;
        for (size_t i = 0; c->last && c->last[i]; i += 2)
                if (aagw_kafka_conf_set(conf, c->last[i], c->last[i + 1],
                                        errstr, errstr_size))
                        goto fail;
        rd_kafka_conf_set_opaque(conf, c->opaque);
        if (c->dr_msg_cb)
                rd_kafka_conf_set_dr_msg_cb(conf, c->dr_msg_cb);
        if (c->rebalance_cb)
                rd_kafka_conf_set_rebalance_cb(conf, c->rebalance_cb);
        if (!(rk = rd_kafka_new(c->type, conf, errstr, errstr_size)))
                goto fail;
        return rk;
fail:
        rd_kafka_conf_destroy(conf);
        return NULL;
}

void *aagw_pool_get(struct aagw_pool *p) {
        if (!p->free) {
                enum { CHUNK = 4096 };
                size_t sz = p->size < sizeof(void *) ? sizeof(void *) : p->size;
                char  *c  = malloc(CHUNK * sz);
                void **cs = realloc(p->chunks, (p->nchunks + 1) * sizeof(*cs));
                if (!c || !cs) {
                        free(c);
                        if (cs)
                                p->chunks = cs;
                        return NULL;
                }
                p->chunks               = cs;
                p->chunks[p->nchunks++] = c;
                for (int i = 0; i < CHUNK; i++)
                        aagw_pool_put(p, c + (size_t)i * sz);
        }
        void *obj = p->free;
        memcpy(&p->free, obj, sizeof(void *));
        return obj;
}

void aagw_pool_put(struct aagw_pool *p, void *obj) {
        memcpy(obj, &p->free, sizeof(void *));
        p->free = obj;
}

void aagw_pool_free(struct aagw_pool *p) {
        for (size_t i = 0; i < p->nchunks; i++)
                free(p->chunks[i]);
        free(p->chunks);
        p->chunks  = NULL;
        p->nchunks = 0;
        p->free    = NULL;
}
