/*
 * replicator/stage.c: the stage runtime (stage.h): the thread and batch
 * loop both stages run, and the scale-out transaction driver.
 */
#include "stage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- LOOP --- */

void stage_init(struct stage *s, const struct stage_hooks *h,
                const struct stage_commit *commit, struct stage_txn *txn,
                void *self, struct replicator_ctl *ctl, const char *name,
                const bool *paused, size_t batch_max) {
        *s = (struct stage){.h         = h,
                            .commit    = commit,
                            .txn       = txn,
                            .self      = self,
                            .ctl       = ctl,
                            .name      = name,
                            .paused    = paused,
                            .batch_max = batch_max};
}

void stage_commit_finish(struct stage *s) {
        if (s->commit->finish)
                s->commit->finish(s->self);
}

void stage_unwait(struct stage *s) {
        aagw_qwait_destroy(s->wait);
        s->wait = NULL;
        if (s->pq)
                rd_kafka_queue_destroy(s->pq);
        s->pq = NULL;
        s->nq = 0;
}

/* The queues of this round and a wait on them and the producer's: woken
 * by records at the consumers and by delivery reports.  Without a wait
 * (out of pipes) the loop polls with short sleeps. */
static void stage_wait(struct stage *s) {
        rd_kafka_queue_t *qs[AAGW_FETCH_CONNECTIONS_MAX + 1];
        rd_kafka_t       *p = s->h->producer(s->self);

        s->nq = s->h->queues(s->self, s->qs, AAGW_FETCH_CONNECTIONS_MAX);
        for (int k = 0; k < s->nq; k++)
                qs[k] = s->qs[k].q;
        s->pq = p ? rd_kafka_queue_get_main(p) : NULL;
        if (s->pq)
                qs[s->nq] = s->pq;
        s->wait = aagw_qwait_new(qs, (size_t)s->nq + (s->pq ? 1 : 0));
}

int64_t stage_queued(const struct stage *s) {
        int64_t n = 0;

        for (int k = 0; k < s->nq; k++)
                n += (int64_t)rd_kafka_queue_length(s->qs[k].q);
        return n;
}

/* A short round and empty queues: the only time a partition that stands
 * still can be a stall (never the stage's own backlog, nor a pause). */
static void stage_look(struct stage *s, int64_t now) {
        struct aagw_stall_report r[16];

        s->last_look_ms = now;
        for (int k = 0; k < s->nq; k++) {
                if (!s->qs[k].stalls)
                        continue;
                aagw_stall_watch_look(s->qs[k].stalls, now, STAGE_LOOK_MS);
                size_t n = aagw_stall_watch_stalled(s->qs[k].stalls, now, r,
                                                    sizeof(r) / sizeof(r[0]));
                if (!n)
                        continue;
                aagw_fetch_stalls_note(s->qs[k].consumer, s->name, r, n,
                                       &s->ctl->stop);
                s->h->restart(s->self, k, r, n);
        }
}

void *stage_main(void *arg) {
        struct stage        *s    = arg;
        const size_t         cap  = s->batch_max;
        rd_kafka_message_t **msgs = calloc(cap, sizeof(*msgs));
        bool                 started;

        if (!msgs) {
                replicator_fail(s->ctl, "out of memory");
                return NULL;
        }
        const struct stage_commit *c = s->commit;

        started = !(c->start && c->start(s->self)) && !s->h->start(s->self);
        while (started && !atomic_load(&s->ctl->stop)) {
                if (s->txn && s->txn->need_renew) {
                        /* The wait holds the old producer's queue. */
                        stage_unwait(s);
                        if (c->renew(s->self))
                                break;
                }
                int go = s->h->round(s->self);
                if (go >= 0 && c->round)
                        go = c->round(s->self);
                if (go < 0)
                        break;
                if (!s->wait && !s->nq)
                        stage_wait(s);
                /* What the queues hold, without waiting: waiting for a
                 * full batch would hold a record for the whole timeout
                 * under light traffic.  Under load the queues hold many
                 * records and the batches fill by themselves.  A batch
                 * per call: the queue lock is taken once per batch. */
                ssize_t n    = 0;
                bool    full = false;
                for (int k = 0; go > 0 && k < s->nq; k++) {
                        ssize_t got = rd_kafka_consume_batch_queue(
                            s->qs[k].q, 0, msgs, cap);
                        if (got <= 0)
                                continue;
                        s->h->batch(s->self, k, msgs, (size_t)got);
                        n += got;
                        full = full || (size_t)got == cap;
                }
                if (s->h->after(s->self, n, full) < 0 ||
                    (c->after && c->after(s->self) < 0))
                        break;
                int64_t now = aagw_mono_ms();
                if (!full && !(s->paused && *s->paused) &&
                    now - s->last_look_ms >= STAGE_LOOK_MS && !stage_queued(s))
                        stage_look(s, now);
                /* Nothing came: wait for records or delivery reports.
                 * The timeout paces the stall watch and the stage's
                 * periodic work; while records come, go round at once. */
                if (n <= 0)
                        aagw_qwait(s->wait, 100);
        }
        stage_unwait(s);
        free(msgs);
        if (started)
                s->h->finish(s->self);
        if (atomic_load(&s->ctl->state) != AAGW_FLOW_FAILED)
                atomic_store(&s->ctl->state, AAGW_FLOW_STOPPED);
        return NULL;
}

void stage_purge(rd_kafka_t *rk, _Atomic int64_t *inflight, int timeout_ms) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        do
                rd_kafka_poll(rk, 10);
        while (atomic_load(inflight) > 0 && aagw_mono_ms() < deadline);
}

void stage_settle(rd_kafka_t *rk, _Atomic int64_t *inflight, int64_t until,
                  int timeout_ms, const atomic_bool *stop, int64_t *now) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        while (atomic_load(inflight) > until && aagw_mono_ms() < deadline &&
               !atomic_load(stop)) {
                rd_kafka_poll(rk, 10);
                if (now)
                        *now = aagw_wall_ms();
        }
}

/* ------------------------------------------------------- SIDE THREAD --- */

bool side_thread_start(struct side_thread *t, void *(*fn)(void *), void *arg) {
        pthread_condattr_t ca;

        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->cond, &ca);
        pthread_condattr_destroy(&ca);
        atomic_store(&t->stop, false);
        t->started = !pthread_create(&t->thread, NULL, fn, arg);
        if (!t->started) {
                pthread_cond_destroy(&t->cond);
                pthread_mutex_destroy(&t->lock);
        }
        return t->started;
}

void side_thread_signal(struct side_thread *t) {
        if (!t->started)
                return;
        pthread_mutex_lock(&t->lock);
        atomic_store(&t->stop, true);
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->lock);
}

void side_thread_stop(struct side_thread *t) {
        if (!t->started)
                return;
        side_thread_signal(t);
        pthread_join(t->thread, NULL);
        t->started = false;
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
}

void side_thread_due(struct timespec *due, int ms) {
        clock_gettime(CLOCK_MONOTONIC, due);
        due->tv_sec += ms / 1000;
        due->tv_nsec += (long)(ms % 1000) * 1000000L;
        if (due->tv_nsec >= 1000000000L) {
                due->tv_sec++;
                due->tv_nsec -= 1000000000L;
        }
}

/* ------------------------------------------------------------ WORKER --- */

static void *worker_main(void *arg) {
        struct stage_worker *w = arg;

        replicator_thread_stop_flag(w->halt);
        pthread_mutex_lock(&w->t.lock);
        while (!atomic_load(&w->t.stop)) {
                struct stage_job *j = w->todo;
                if (!j) {
                        pthread_cond_wait(&w->t.cond, &w->t.lock);
                        continue;
                }
                if (w->ahead)
                        w->ahead(w->ctx, w, j);
                if (!(w->todo = j->next))
                        w->tail = &w->todo;
                pthread_mutex_unlock(&w->t.lock);
                w->run(w->ctx, j);
                pthread_mutex_lock(&w->t.lock);
                j->next = w->done;
                w->done = j;
                if (!w->tell || w->tell(w->ctx, j, w->todo)) {
                        atomic_store(&w->answered, true);
                        w->wake(w->ctx);
                }
        }
        pthread_mutex_unlock(&w->t.lock);
        return NULL;
}

bool stage_worker_start(struct stage_worker *w) {
        w->todo = w->done = NULL;
        w->tail           = &w->todo;
        atomic_store(&w->answered, false);
        return side_thread_start(&w->t, worker_main, w);
}

void stage_worker_put(struct stage_worker *w, struct stage_job *j) {
        j->next = NULL;
        pthread_mutex_lock(&w->t.lock);
        *w->tail = j;
        w->tail  = &j->next;
        pthread_cond_signal(&w->t.cond);
        pthread_mutex_unlock(&w->t.lock);
}

struct stage_job *stage_worker_take(struct stage_worker *w) {
        struct stage_job *j;

        if (!w->t.started || !atomic_exchange(&w->answered, false))
                return NULL;
        pthread_mutex_lock(&w->t.lock);
        j       = w->done;
        w->done = NULL;
        pthread_mutex_unlock(&w->t.lock);
        return j;
}

void stage_worker_stop(struct stage_worker *w,
                       void (*drop)(struct stage_job *j)) {
        if (!w->t.started)
                return;
        side_thread_stop(&w->t);
        for (struct stage_job *l = w->todo, *n; l; l = n) {
                n = l->next;
                drop(l);
        }
        for (struct stage_job *l = w->done, *n; l; l = n) {
                n = l->next;
                drop(l);
        }
        w->todo = w->done = NULL;
}

/* ---------------------------------------------------------- SCALE-OUT --- */

int stage_txn_init(struct stage_txn *t, struct replicator_ctl *ctl,
                   const char *name, const char *member) {
        *t = (struct stage_txn){.ctl = ctl, .name = name, .member = member};
        return (t->refused = refused_new(STAGE_REFUSED_MAX)) ? 0 : -1;
}

void stage_txn_deinit(struct stage_txn *t) {
        refused_destroy(t->refused);
        t->refused = NULL;
}

void stage_txn_fatal(struct stage_txn *t, const char *why) {
        int64_t now = aagw_mono_ms();

        t->open = false;
        if (t->need_renew)
                return;
        if (!t->renew_since_ms ||
            now - t->renew_since_ms > STAGE_RENEW_WINDOW_MS) {
                t->renew_since_ms = now;
                t->renewals       = 0;
        }
        if (++t->renewals > STAGE_RENEW_MAX) {
                replicator_fail(t->ctl,
                                "member %s: transactions: %s (its "
                                "transactional producer failed for good %d "
                                "times within %d s: does another process "
                                "run as member %s?)",
                                t->member, why, t->renewals,
                                STAGE_RENEW_WINDOW_MS / 1000, t->member);
                return;
        }
        aagw_log(AAGW_LOG_WARN, t->ctl->tag,
                 "%s: member %s: %s; its open transaction stays invisible; "
                 "making a new transactional producer",
                 t->name, t->member, why);
        t->need_renew = true;
}

owner_result_t stage_txn_begin(struct stage_txn *t, char *why,
                               size_t why_size) {
        if (t->open)
                return AAGW_OWNER_OK;
        owner_result_t r = owner_begin(t->owner, why, why_size);
        if (r == AAGW_OWNER_OK) {
                t->open     = true;
                t->begun_ms = aagw_mono_ms();
        } else if (r == AAGW_OWNER_FATAL) {
                stage_txn_fatal(t, why);
        }
        return r;
}

owner_result_t stage_txn_commit(struct stage_txn                      *t,
                                const rd_kafka_topic_partition_list_t *pos,
                                char *why, size_t why_size) {
        const rd_kafka_topic_partition_list_t *own = owner_partitions(t->owner);
        rd_kafka_topic_partition_list_t       *offs =
            rd_kafka_topic_partition_list_copy(own);

        /* The offsets mean nothing but the fence: any value >= 0. */
        t->fence_seq++;
        for (int i = 0; i < offs->cnt; i++)
                offs->elems[i].offset = t->fence_seq;
        for (int i = 0; pos && i < pos->cnt; i++)
                rd_kafka_topic_partition_list_add(offs, pos->elems[i].topic,
                                                  pos->elems[i].partition)
                    ->offset = pos->elems[i].offset;
        owner_result_t r = owner_commit(t->owner, offs, why, why_size);
        rd_kafka_topic_partition_list_destroy(offs);
        t->open = false;
        switch (r) {
        case AAGW_OWNER_OK:
                AAGW_STAT_ADD(t->committed, 1);
                break;
        case AAGW_OWNER_ABORTED:
                AAGW_STAT_ADD(t->aborted, 1);
                break;
        case AAGW_OWNER_FENCED:
                AAGW_STAT_ADD(t->fenced, 1);
                break;
        case AAGW_OWNER_FATAL:
                stage_txn_fatal(t, why);
                break;
        }
        return r;
}

owner_result_t stage_txn_abort(struct stage_txn *t, char *why,
                               size_t why_size) {
        owner_result_t r = owner_abort(t->owner, why, why_size);

        t->open = false;
        if (r == AAGW_OWNER_FATAL)
                stage_txn_fatal(t, why);
        return r;
}

int stage_txn_renew(struct stage_txn *t, rd_kafka_t *old,
                    int (*detach)(void *self),
                    int (*attach)(void *self, rd_kafka_t *producer),
                    void *self) {
        char why[512];

        t->need_renew = false;
        rd_kafka_purge(old, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        if (detach(self))
                return -1;
        if (owner_renew(t->owner, why, sizeof(why)) != AAGW_OWNER_OK) {
                replicator_fail(t->ctl, "member %s: %s", t->member, why);
                return -1;
        }
        t->open = t->broken = false;
        return attach(self, owner_producer(t->owner));
}

struct refused_rec *stage_txn_refused(struct stage_txn *t, const char *topic,
                                      int32_t p, int64_t offset,
                                      const char *what) {
        struct refused_rec *rr = refused_add(t->refused, topic, p, offset);

        if (!rr)
                replicator_fail(t->ctl,
                                "member %s: %s [%d] offset %" PRId64
                                ": %s, and %zu refused records are "
                                "remembered already (out of memory, or "
                                "more than %d)",
                                t->member, topic, (int)p, offset, what,
                                refused_count(t->refused), STAGE_REFUSED_MAX);
        return rr;
}

struct owner *stage_txn_join(struct stage_txn *t, struct owner_conf *oc,
                             const struct replicator_delivery *d) {
        char why[512];

        oc->member    = t->member;
        oc->dr_msg_cb = stage_owner_dr;
        oc->dr_opaque = (void *)d;
        oc->stop      = &t->ctl->stop;
        if (!(t->owner = owner_new(oc, why, sizeof(why))))
                replicator_fail(t->ctl, "member %s: %s", t->member, why);
        return t->owner;
}

void stage_owner_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        const struct replicator_delivery *d = opaque;

        (void)rk;
        if (m->_private)
                d->fn(d->stage, m->_private, m);
}

void stage_parts_str(const rd_kafka_topic_partition_list_t *l, char *buf,
                     size_t size) {
        size_t n = 0;

        buf[0] = '\0';
        for (int i = 0; l && i < l->cnt && n < size; i++)
                n += (size_t)snprintf(buf + n, size - n, "%s%" PRId32,
                                      i ? "," : "", l->elems[i].partition);
        if (!l || !l->cnt)
                snprintf(buf, size, "none");
}
