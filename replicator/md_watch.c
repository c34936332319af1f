/*
 * replicator/md_watch.c: a cluster's metadata asked for on a thread of its
 * own, at an interval, for a stage to take when it is ready
 * (replicator_int.h, "METADATA WATCH").
 *
 * Why: a metadata request costs the stage a round trip.  Across a WAN a
 * flow that asked for it in its own thread stood still for that round
 * trip at every topic refresh, and the records fetched meanwhile waited:
 * at 50 ms and 2,000 records/s that was aagw's p99 of 117 ms against
 * MirrorMaker 2's 87 (docs/benchmarks.md, "Latency across the link").
 */
#include "replicator_int.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct aagw_md_watch {
        rd_kafka_t        *rk;
        int                interval_ms;
        const atomic_bool *stage_stop;
        pthread_t          thread;
        bool               started;
        pthread_mutex_t    lock;
        pthread_cond_t     cond;
        atomic_bool        stop;   /* destroy: ends the request too */
        bool               kicked; /* asked for one now */
        /* the newest answer not taken yet */
        bool                            ready;
        rd_kafka_resp_err_t             err;
        const struct rd_kafka_metadata *md;
};

static void *md_watch_main(void *arg) {
        aagw_md_watch_t *w = arg;
        struct timespec  due;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                clock_gettime(CLOCK_MONOTONIC, &due);
                due.tv_sec += w->interval_ms / 1000;
                due.tv_nsec += (long)(w->interval_ms % 1000) * 1000000L;
                if (due.tv_nsec >= 1000000000L) {
                        due.tv_sec++;
                        due.tv_nsec -= 1000000000L;
                }
                while (!atomic_load(&w->stop) && !w->kicked &&
                       pthread_cond_timedwait(&w->cond, &w->lock, &due) == 0)
                        ;
                if (atomic_load(&w->stop))
                        break;
                w->kicked = false;
                pthread_mutex_unlock(&w->lock);

                const struct rd_kafka_metadata *md = NULL;
                rd_kafka_resp_err_t             err =
                    aagw_kafka_metadata(w->rk, true, NULL, &md, 5000, &w->stop);
                if (err == RD_KAFKA_RESP_ERR__INTR ||
                    (w->stage_stop && atomic_load(w->stage_stop))) {
                        if (md)
                                rd_kafka_metadata_destroy(md);
                        pthread_mutex_lock(&w->lock);
                        break;
                }
                pthread_mutex_lock(&w->lock);
                /* An answer not taken is stale now. */
                if (w->md)
                        rd_kafka_metadata_destroy(w->md);
                w->md    = err ? NULL : md;
                w->err   = err;
                w->ready = true;
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

aagw_md_watch_t *aagw_md_watch_new(rd_kafka_t *rk, int interval_ms,
                                   const atomic_bool *stage_stop) {
        aagw_md_watch_t   *w = calloc(1, sizeof(*w));
        pthread_condattr_t ca;

        if (!w)
                return NULL;
        w->rk          = rk;
        w->interval_ms = interval_ms > 0 ? interval_ms : 5000;
        w->stage_stop  = stage_stop;
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w->cond, &ca);
        pthread_condattr_destroy(&ca);
        if (pthread_create(&w->thread, NULL, md_watch_main, w)) {
                aagw_md_watch_destroy(w);
                return NULL;
        }
        w->started = true;
        return w;
}

bool aagw_md_watch_take(aagw_md_watch_t *w, rd_kafka_resp_err_t *err,
                        const struct rd_kafka_metadata **md) {
        bool got;

        pthread_mutex_lock(&w->lock);
        if ((got = w->ready)) {
                *err     = w->err;
                *md      = w->md;
                w->md    = NULL;
                w->ready = false;
        }
        pthread_mutex_unlock(&w->lock);
        return got;
}

void aagw_md_watch_kick(aagw_md_watch_t *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->kicked = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

void aagw_md_watch_destroy(aagw_md_watch_t *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        atomic_store(&w->stop, true);
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
        if (w->started)
                pthread_join(w->thread, NULL);
        if (w->md)
                rd_kafka_metadata_destroy(w->md);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
}
