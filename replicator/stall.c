/*
 * replicator/stall.c: the stall watch (aagw_replicator.h, "STALL WATCH"):
 * finds the partitions whose fetch stands still while their leader holds
 * more, for the stage to restart them.  Used by flows and the unify stage.
 */
#include "stage.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

/* The marks of the partitions watched: open addressing on a hash of
 * (topic, partition), linear probing.  A collision only merges two
 * partitions' marks, i.e. changes when one of them is probed, nothing
 * else. */
struct watch_slot {
        uint64_t               key; /* 0: empty */
        struct aagw_stall_mark stall;
        char                  *topic; /* for reports; strdup()ed */
        int32_t                partition;
};

struct aagw_stall_watch {
        rd_kafka_t                      *consumer;
        struct side_thread                t;    /* the probe's */
        rd_kafka_topic_partition_list_t *req;  /* handed over, not sent */
        rd_kafka_topic_partition_list_t *ans;  /* end offsets answered */
        bool                              busy; /* req set, or being sent */
        int64_t                          last_ms;
        struct watch_slot                *slots; /* poke()'s thread only */
        size_t                           nslots, nused;
};

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

static uint64_t watch_key(const char *topic, int32_t partition) {
        uint64_t h = XXH3_64bits_withSeed(topic, strlen(topic),
                                          (uint64_t)(uint32_t)partition);
        return h ? h : 1;
}

/* The slot of (topic, partition), created if new; NULL: out of memory. */
static struct watch_slot *watch_slot(aagw_stall_watch_t *w, const char *topic,
                                   int32_t partition) {
        uint64_t key = watch_key(topic, partition);

        if ((w->nused + 1) * 2 > w->nslots) {
                size_t            n  = w->nslots ? w->nslots * 2 : 256;
                struct watch_slot *ns = calloc(n, sizeof(*ns));
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
                aagw_stall_init(&w->slots[i].stall);
        w->nused++;
        return &w->slots[i];
}

/* The end offsets of the partitions of '*l' as their leaders know them,
 * for up to 5 s.  Asked in slices, each twice the last (a request that
 * timed out is not answered to the next), so that the watch's destroy,
 * which joins this thread, does not wait out a cluster that stopped
 * answering: it ends at the watch's or the process's stop.  On success
 * '*l' is the answer. */
static rd_kafka_resp_err_t probe_ends(aagw_stall_watch_t               *w,
                                      rd_kafka_topic_partition_list_t **l) {
        int64_t             deadline = aagw_mono_ms() + 5000;
        rd_kafka_resp_err_t e        = RD_KAFKA_RESP_ERR__TIMED_OUT;

        for (int slice = 500;
             e == RD_KAFKA_RESP_ERR__TIMED_OUT && !atomic_load(&w->t.stop) &&
             !replicator_stopping();
             slice *= 2) {
                int64_t left = deadline - aagw_mono_ms();
                if (left <= 0)
                        break;
                rd_kafka_topic_partition_list_t *c =
                    rd_kafka_topic_partition_list_copy(*l);
                e = rd_kafka_offsets_for_times(
                    w->consumer, c, left < slice ? (int)left : slice);
                if (e) {
                        rd_kafka_topic_partition_list_destroy(c);
                        continue;
                }
                rd_kafka_topic_partition_list_destroy(*l);
                *l = c;
        }
        return e;
}

static void *watch_main(void *arg) {
        aagw_stall_watch_t *w = arg;

        pthread_mutex_lock(&w->t.lock);
        for (;;) {
                while (!w->req && !atomic_load(&w->t.stop))
                        pthread_cond_wait(&w->t.cond, &w->t.lock);
                if (atomic_load(&w->t.stop))
                        break;
                rd_kafka_topic_partition_list_t *l = w->req;
                w->req = NULL;
                pthread_mutex_unlock(&w->t.lock);
                /* The answer, the end offsets as each leader knows
                 * them, tells stalled partitions apart
                 * (aagw_stall_watch_stalled()). */
                rd_kafka_resp_err_t e = probe_ends(w, &l);
                pthread_mutex_lock(&w->t.lock);
                if (!e && !w->ans) {
                        w->ans = l;
                        l      = NULL;
                }
                w->busy = false;
                pthread_mutex_unlock(&w->t.lock);
                if (l)
                        rd_kafka_topic_partition_list_destroy(l);
                pthread_mutex_lock(&w->t.lock);
        }
        pthread_mutex_unlock(&w->t.lock);
        return NULL;
}

aagw_stall_watch_t *aagw_stall_watch_new(rd_kafka_t *consumer) {
        aagw_stall_watch_t *w = calloc(1, sizeof(*w));

        if (!w)
                return NULL;
        w->consumer = consumer;
        w->last_ms  = INT64_MIN / 2;
        if (!side_thread_start(&w->t, watch_main, w)) {
                free(w);
                return NULL;
        }
        return w;
}

int aagw_stall_watch_look(aagw_stall_watch_t *w, int64_t now_ms,
                           int min_interval_ms) {
        rd_kafka_topic_partition_list_t *a = NULL, *probe = NULL;
        int                              n = 0;
        bool                             busy;

        if (!w || now_ms - w->last_ms < min_interval_ms)
                return 0;
        pthread_mutex_lock(&w->t.lock);
        busy = w->busy;
        rd_kafka_topic_partition_list_t *ans = w->ans;
        w->ans = NULL;
        pthread_mutex_unlock(&w->t.lock);
        for (int i = 0; ans && i < ans->cnt; i++) {
                const rd_kafka_topic_partition_t *tp = &ans->elems[i];
                struct watch_slot                 *ws;
                if (!tp->err && tp->offset >= 0 &&
                    (ws = watch_slot(w, tp->topic, tp->partition)))
                        aagw_stall_answer(&ws->stall, tp->offset, now_ms);
        }
        if (ans)
                rd_kafka_topic_partition_list_destroy(ans);
        if (busy || rd_kafka_assignment(w->consumer, &a) || !a)
                return 0;
        if (a->cnt && !rd_kafka_position(w->consumer, a) &&
            (probe = rd_kafka_topic_partition_list_new(a->cnt))) {
                for (int i = 0; i < a->cnt; i++) {
                        const rd_kafka_topic_partition_t *tp = &a->elems[i];
                        struct watch_slot                 *ws;
                        if (tp->offset < 0 ||
                            !(ws = watch_slot(w, tp->topic, tp->partition)))
                                continue;
                        /* Still too long: ask its leader, past the cache. */
                        if (aagw_stall_observe(&ws->stall, tp->offset, now_ms))
                                rd_kafka_topic_partition_list_add(
                                    probe, tp->topic, tp->partition)
                                    ->offset = RD_KAFKA_OFFSET_END;
                }
        }
        rd_kafka_topic_partition_list_destroy(a);
        if (probe && (n = probe->cnt) > 0) {
                w->last_ms = now_ms;
                pthread_mutex_lock(&w->t.lock);
                w->req  = probe;
                w->busy = true;
                pthread_cond_signal(&w->t.cond);
                pthread_mutex_unlock(&w->t.lock);
        } else if (probe) {
                rd_kafka_topic_partition_list_destroy(probe);
        }
        return n;
}

size_t aagw_stall_watch_stalled(aagw_stall_watch_t *w, int64_t now_ms,
                                struct aagw_stall_report *out, size_t max) {
        size_t n = 0;

        for (size_t i = 0; w && i < w->nslots && n < max; i++) {
                struct watch_slot *ws = &w->slots[i];
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
                            const struct aagw_stall_report *r, size_t n,
                            const atomic_bool *stop) {
        const struct rd_kafka_metadata *md;

        for (size_t i = 0; i < n; i++)
                aagw_log(AAGW_LOG_WARN, "FETCH",
                         "%s: %s [%" PRId32 "] has not moved from offset %" PRId64
                         " for %" PRId64 " s while its leader holds up to %"
                         PRId64 ": restarting its fetch",
                         who, r[i].topic, r[i].partition, r[i].pos,
                         r[i].still_ms / 1000, r[i].end);
        /* Leaders as the cluster knows them now: a fetcher left on the
         * old leader is what this undoes.  Asked on the stage's thread:
         * a stop ends the wait. */
        if (n && !aagw_kafka_metadata(consumer, true, NULL, &md, 2000, stop))
                rd_kafka_metadata_destroy(md);
}

void aagw_stall_watch_destroy(aagw_stall_watch_t *w) {
        if (!w)
                return;
        side_thread_stop(&w->t);
        if (w->req)
                rd_kafka_topic_partition_list_destroy(w->req);
        if (w->ans)
                rd_kafka_topic_partition_list_destroy(w->ans);
        for (size_t i = 0; i < w->nslots; i++)
                free(w->slots[i].topic);
        free(w->slots);
        free(w);
}
