/* replicator/kconf.c: librdkafka client configurations. */
#include "aagw_replicator.h"

#include <fcntl.h>
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

#include <xxhash.h>

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
}

rd_kafka_conf_t *aagw_kafka_conf_new(const char *bootstraps, const char *role,
                                     char *errstr, size_t errstr_size) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        /* librdkafka's own lines go through aagw's log format. */
        rd_kafka_conf_set_log_cb(conf, aagw_kafka_log_cb);
        char             client_id[128];

        snprintf(client_id, sizeof(client_id), "aagw-%s", role ? role : "client");
        /* Recover from a broker restart in about a second instead of the
         * default 10 s backoff ceiling. */
        if (aagw_kafka_conf_set(conf, "client.id", client_id, errstr,
                                errstr_size) ||
            aagw_kafka_conf_set(conf, "reconnect.backoff.max.ms", "1000",
                                errstr, errstr_size) ||
            aagw_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr,
                                errstr_size)) {
                rd_kafka_conf_destroy(conf);
                return NULL;
        }
        return conf;
}

static const char *const roles[] = {"consumer.", "producer.", "admin."};

const char *aagw_kafka_prop_base(const char *name) {
        for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
                if (!strncmp(name, roles[i], strlen(roles[i])))
                        return name + strlen(roles[i]);
        return name;
}

aagw_err_t aagw_kafka_conf_apply(rd_kafka_conf_t *conf, const char *role,
                                 const char *const *kv, size_t kv_cnt,
                                 char *errstr, size_t errstr_size) {
        size_t rlen = strlen(role);

        for (size_t i = 0; i < kv_cnt; i++) {
                const char *name = kv[2 * i], *base = aagw_kafka_prop_base(name);
                if (base != name &&
                    (strncmp(name, role, rlen) || name[rlen] != '.'))
                        continue; /* another role's property */
                if (aagw_kafka_conf_set(conf, base, kv[2 * i + 1], errstr,
                                        errstr_size))
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
        rd_kafka_NewTopic_t     *nt;
        rd_kafka_AdminOptions_t *o;
        rd_kafka_queue_t        *q;
        rd_kafka_event_t        *ev;
        char                     why[256];
        int                      rc;

        nt = rd_kafka_NewTopic_new(topic, partitions, -1, why, sizeof(why));
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
        ev = rd_kafka_queue_poll(q, timeout_ms + 2000);
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
        err = rd_kafka_metadata(producer, 0, rkt, &md, timeout_ms);
        rd_kafka_topic_destroy(rkt);
        if (err)
                return -1;
        have = md->topic_cnt && !md->topics[0].err ? md->topics[0].partition_cnt
                                                   : -1;
        rd_kafka_metadata_destroy(md);
        return have > 0 ? have : -1;
}

const char *const aagw_kafka_producer_props[] = {
    "enable.idempotence", "true",
    "acks", "all",
    "message.timeout.ms", "0",
    "linger.ms", "5",
    "batch.num.messages", "10000",
    /* Records in flight, each holding its consumed record (and the fetch
     * buffer around it) until acknowledged: 500,000 took a catch-up on
     * real Kafka to 460-750 MiB peak RSS, 100,000 (with the 16 MiB
     * consumer queue below) to 340-360 MiB at no measurable loss of
     * rate (docs/benchmarks.md, "Against MirrorMaker 2"). */
    "queue.buffering.max.messages", "100000",
    NULL};

const char *const aagw_kafka_consumer_props[] = {
    /* librdkafka 2.0 stops fetching for about a second once
     * queued.min.messages records wait in the queue (fixed by
     * fetch.queue.backoff.ms in 2.2): a deep queue keeps the fetcher busy,
     * the byte bound keeps memory bounded (and the fetch waker below
     * restarts a parked fetcher). */
    "queued.min.messages", "1000000",
    "queued.max.messages.kbytes", "16384",
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

struct aagw_qwait {
        int               fd[2]; /* read, write; both non-blocking */
        rd_kafka_queue_t *qs[4];
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

/* The marks of the partitions a waker woke: open addressing on a hash of
 * (topic, partition), linear probing.  A collision only merges two
 * partitions' marks, i.e. changes when one of them is woken, nothing else. */
struct wake_slot {
        uint64_t               key; /* 0: empty */
        struct aagw_wake_mark  mark;
        struct aagw_stall_mark stall;
        char                  *topic; /* for reports; strdup()ed */
        int32_t                partition;
};

struct aagw_fetch_waker {
        rd_kafka_t                      *consumer;
        pthread_t                        thread;
        pthread_mutex_t                  lock;
        pthread_cond_t                   cond;
        rd_kafka_topic_partition_list_t *req;  /* handed over, not sent */
        rd_kafka_topic_partition_list_t *ans;  /* end offsets answered */
        bool                             busy; /* req set, or being sent */
        bool                             stop;
        int64_t                          last_ms;
        struct wake_slot                *slots; /* poke()'s thread only */
        size_t                           nslots, nused;
};

bool aagw_wake_due(struct aagw_wake_mark *m, int64_t pos, int64_t hi,
                   int64_t now_ms) {
        if (m->at_ms != INT64_MIN && m->pos == pos && m->hi == hi &&
            now_ms - m->at_ms < AAGW_WAKE_STILL_MS)
                return false;
        m->pos   = pos;
        m->hi    = hi;
        m->at_ms = now_ms;
        return true;
}

void aagw_stall_init(struct aagw_stall_mark *m) {
        *m = (struct aagw_stall_mark){-1, 0, -1, 0, INT64_MIN / 2,
                                      AAGW_STALL_MS};
}

bool aagw_stall_observe(struct aagw_stall_mark *m, int64_t pos,
                        int64_t now_ms) {
        if (pos != m->pos) {
                m->pos      = pos;
                m->since_ms = now_ms;
                m->end      = -1;
                m->wait_ms  = AAGW_STALL_MS;
                return false;
        }
        if (now_ms - m->since_ms < AAGW_STALL_PROBE_MS ||
            now_ms - m->probe_ms < AAGW_STALL_PROBE_MS)
                return false;
        m->probe_ms = now_ms;
        return true;
}

void aagw_stall_answer(struct aagw_stall_mark *m, int64_t end,
                       int64_t now_ms) {
        m->end    = end;
        m->end_ms = now_ms;
}

bool aagw_stall_due(struct aagw_stall_mark *m, int64_t now_ms) {
        if (m->pos < 0 || m->end < 0 || m->end_ms < m->since_ms ||
            m->end < m->pos + 2 || now_ms - m->since_ms < m->wait_ms)
                return false;
        m->since_ms = now_ms;
        m->wait_ms  = m->wait_ms * 2 > 600000 ? 600000 : m->wait_ms * 2;
        return true;
}

static uint64_t wake_key(const char *topic, int32_t partition) {
        uint64_t h = XXH3_64bits_withSeed(topic, strlen(topic),
                                          (uint64_t)(uint32_t)partition);
        return h ? h : 1;
}

/* The slot of (topic, partition), created if new; NULL: out of memory. */
static struct wake_slot *wake_slot(aagw_fetch_waker_t *w, const char *topic,
                                   int32_t partition) {
        uint64_t key = wake_key(topic, partition);

        if ((w->nused + 1) * 2 > w->nslots) {
                size_t            n  = w->nslots ? w->nslots * 2 : 256;
                struct wake_slot *ns = calloc(n, sizeof(*ns));
                if (!ns)
                        return NULL;
                for (size_t i = 0; i < w->nslots; i++) {
                        if (!w->slots[i].key)
                                continue;
                        size_t j = (size_t)w->slots[i].key & (n - 1);
                        while (ns[j].key)
                                j = (j + 1) & (n - 1);
                        ns[j] = w->slots[i];
                }
                free(w->slots);
                w->slots  = ns;
                w->nslots = n;
        }
        size_t i = (size_t)key & (w->nslots - 1);
        for (; w->slots[i].key; i = (i + 1) & (w->nslots - 1))
                if (w->slots[i].key == key)
                        return &w->slots[i];
        if (!(w->slots[i].topic = strdup(topic)))
                return NULL;
        w->slots[i].key        = key;
        w->slots[i].partition  = partition;
        w->slots[i].mark.at_ms = INT64_MIN;
        aagw_stall_init(&w->slots[i].stall);
        w->nused++;
        return &w->slots[i];
}

static void *waker_main(void *arg) {
        aagw_fetch_waker_t *w = arg;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!w->req && !w->stop)
                        pthread_cond_wait(&w->cond, &w->lock);
                if (w->stop)
                        break;
                rd_kafka_topic_partition_list_t *l = w->req;
                w->req = NULL;
                pthread_mutex_unlock(&w->lock);
                /* The request wakes the leaders' threads; the answer,
                 * the end offsets, tells stalled partitions apart
                 * (aagw_fetch_waker_stalled()). */
                rd_kafka_resp_err_t e =
                    rd_kafka_offsets_for_times(w->consumer, l, 5000);
                pthread_mutex_lock(&w->lock);
                if (!e && !w->ans) {
                        w->ans = l;
                        l      = NULL;
                }
                w->busy = false;
                pthread_mutex_unlock(&w->lock);
                if (l)
                        rd_kafka_topic_partition_list_destroy(l);
                pthread_mutex_lock(&w->lock);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

aagw_fetch_waker_t *aagw_fetch_waker_new(rd_kafka_t *consumer) {
        aagw_fetch_waker_t *w = calloc(1, sizeof(*w));

        if (!w)
                return NULL;
        w->consumer = consumer;
        w->last_ms  = INT64_MIN / 2;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        if (pthread_create(&w->thread, NULL, waker_main, w)) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->lock);
                free(w);
                return NULL;
        }
        return w;
}

int aagw_fetch_waker_poke(aagw_fetch_waker_t *w, int64_t now_ms,
                          int min_interval_ms) {
        rd_kafka_topic_partition_list_t *a = NULL, *lag = NULL;
        int                              n = 0;
        bool                             busy;

        if (!w || now_ms - w->last_ms < min_interval_ms)
                return 0;
        pthread_mutex_lock(&w->lock);
        busy = w->busy;
        rd_kafka_topic_partition_list_t *ans = w->ans;
        w->ans = NULL;
        pthread_mutex_unlock(&w->lock);
        for (int i = 0; ans && i < ans->cnt; i++) {
                const rd_kafka_topic_partition_t *tp = &ans->elems[i];
                struct wake_slot                 *ws;
                if (!tp->err && tp->offset >= 0 &&
                    (ws = wake_slot(w, tp->topic, tp->partition)))
                        aagw_stall_answer(&ws->stall, tp->offset, now_ms);
        }
        if (ans)
                rd_kafka_topic_partition_list_destroy(ans);
        if (busy || rd_kafka_assignment(w->consumer, &a) || !a)
                return 0;
        if (a->cnt && !rd_kafka_position(w->consumer, a) &&
            (lag = rd_kafka_topic_partition_list_new(a->cnt))) {
                for (int i = 0; i < a->cnt; i++) {
                        const rd_kafka_topic_partition_t *tp = &a->elems[i];
                        int64_t                           lo, hi;
                        struct wake_slot                 *ws;
                        bool                              want;
                        if (tp->offset < 0)
                                continue;
                        /* No memory for a slot: woken, as before. */
                        ws   = wake_slot(w, tp->topic, tp->partition);
                        want = !rd_kafka_get_watermark_offsets(
                                   w->consumer, tp->topic, tp->partition, &lo,
                                   &hi) &&
                               hi > tp->offset &&
                               (!ws ||
                                aagw_wake_due(&ws->mark, tp->offset, hi,
                                              now_ms));
                        /* Still too long: ask its leader, past the cache. */
                        if (ws && aagw_stall_observe(&ws->stall, tp->offset,
                                                     now_ms))
                                want = true;
                        if (want)
                                rd_kafka_topic_partition_list_add(
                                    lag, tp->topic, tp->partition)
                                    ->offset = RD_KAFKA_OFFSET_END;
                }
        }
        rd_kafka_topic_partition_list_destroy(a);
        if (lag && (n = lag->cnt) > 0) {
                w->last_ms = now_ms;
                pthread_mutex_lock(&w->lock);
                w->req  = lag;
                w->busy = true;
                pthread_cond_signal(&w->cond);
                pthread_mutex_unlock(&w->lock);
        } else if (lag) {
                rd_kafka_topic_partition_list_destroy(lag);
        }
        return n;
}

size_t aagw_fetch_waker_stalled(aagw_fetch_waker_t *w, int64_t now_ms,
                                struct aagw_stall_report *out, size_t max) {
        size_t n = 0;

        for (size_t i = 0; w && i < w->nslots && n < max; i++) {
                struct wake_slot *ws = &w->slots[i];
                int64_t           since;
                if (!ws->key)
                        continue;
                since = ws->stall.since_ms;
                if (!aagw_stall_due(&ws->stall, now_ms))
                        continue;
                snprintf(out[n].topic, sizeof(out[n].topic), "%s", ws->topic);
                out[n].partition = ws->partition;
                out[n].pos       = ws->stall.pos;
                out[n].end       = ws->stall.end;
                out[n].still_ms  = now_ms - since;
                n++;
        }
        return n;
}

void aagw_fetch_stalls_note(rd_kafka_t *consumer, const char *who,
                            const struct aagw_stall_report *r, size_t n) {
        const struct rd_kafka_metadata *md;

        for (size_t i = 0; i < n; i++)
                aagw_log(AAGW_LOG_WARN, "FETCH",
                         "%s: %s [%" PRId32 "] has not moved from offset %" PRId64
                         " for %" PRId64 " s while its leader holds up to %"
                         PRId64 ": restarting its fetch",
                         who, r[i].topic, r[i].partition, r[i].pos,
                         r[i].still_ms / 1000, r[i].end);
        /* Leaders as the cluster knows them now: a fetcher left on the
         * old leader is what this undoes. */
        if (n && !rd_kafka_metadata(consumer, 1, NULL, &md, 2000))
                rd_kafka_metadata_destroy(md);
}

void aagw_fetch_waker_destroy(aagw_fetch_waker_t *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        if (w->req)
                rd_kafka_topic_partition_list_destroy(w->req);
        if (w->ans)
                rd_kafka_topic_partition_list_destroy(w->ans);
        for (size_t i = 0; i < w->nslots; i++)
                free(w->slots[i].topic);
        free(w->slots);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
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
