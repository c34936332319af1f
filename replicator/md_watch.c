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
#include "stage.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct aagw_md_watch {
        rd_kafka_t        *rk;
        int                interval_ms;
        const atomic_bool *stage_stop;
        /* Its 'stop' (the destroy) ends the request too. */
        struct side_thread t;
        bool               kicked; /* asked for one now */
        /* the newest answer not taken yet */
        bool                            ready;
        rd_kafka_resp_err_t             err;
        const struct rd_kafka_metadata *md;
};

static void *md_watch_main(void *arg) {
        aagw_md_watch_t *w = arg;
        struct timespec  due;

        pthread_mutex_lock(&w->t.lock);
        for (;;) {
                side_thread_due(&due, w->interval_ms);
                while (!atomic_load(&w->t.stop) && !w->kicked &&
                       pthread_cond_timedwait(&w->t.cond, &w->t.lock, &due) ==
                           0)
                        ;
                if (atomic_load(&w->t.stop))
                        break;
                w->kicked = false;
                pthread_mutex_unlock(&w->t.lock);

                const struct rd_kafka_metadata *md = NULL;
                rd_kafka_resp_err_t             err = aagw_kafka_metadata(
                                w->rk, true, NULL, &md, 5000, &w->t.stop);
                if (err == RD_KAFKA_RESP_ERR__INTR ||
                    (w->stage_stop && atomic_load(w->stage_stop))) {
                        if (md)
                                rd_kafka_metadata_destroy(md);
                        pthread_mutex_lock(&w->t.lock);
                        break;
                }
                pthread_mutex_lock(&w->t.lock);
                /* An answer not taken is stale now. */
                if (w->md)
                        rd_kafka_metadata_destroy(w->md);
                w->md    = err ? NULL : md;
                w->err   = err;
                w->ready = true;
        }
        pthread_mutex_unlock(&w->t.lock);
        return NULL;
}

aagw_md_watch_t *aagw_md_watch_new(rd_kafka_t *rk, int interval_ms,
                                   const atomic_bool *stage_stop) {
        aagw_md_watch_t *w = calloc(1, sizeof(*w));

        if (!w)
                return NULL;
        w->rk          = rk;
        w->interval_ms = interval_ms > 0 ? interval_ms : 5000;
        w->stage_stop  = stage_stop;
        if (!side_thread_start(&w->t, md_watch_main, w)) {
                free(w);
                return NULL;
        }
        return w;
}

bool aagw_md_watch_take(aagw_md_watch_t *w, rd_kafka_resp_err_t *err,
                        const struct rd_kafka_metadata **md) {
        bool got;

        pthread_mutex_lock(&w->t.lock);
        if ((got = w->ready)) {
                *err     = w->err;
                *md      = w->md;
                w->md    = NULL;
                w->ready = false;
        }
        pthread_mutex_unlock(&w->t.lock);
        return got;
}

void aagw_md_watch_kick(aagw_md_watch_t *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->t.lock);
        w->kicked = true;
        pthread_cond_signal(&w->t.cond);
        pthread_mutex_unlock(&w->t.lock);
}

void aagw_md_watch_destroy(aagw_md_watch_t *w) {
        if (!w)
                return;
        side_thread_stop(&w->t);
        if (w->md)
                rd_kafka_metadata_destroy(w->md);
        free(w);
}
