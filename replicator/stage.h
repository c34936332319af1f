/*
 * replicator/stage.h: the stage runtime, what the copy stage (a flow)
 * and the unify stage share.  Internal to replicator/.
 *
 * Both stages move records the same way: one thread takes batches from
 * consumer queues without waiting, hands them to the stage, serves the
 * producer's delivery reports, restarts fetches the stall watch finds
 * standing still, waits on every queue at once when nothing came, and at
 * a stop drains and commits.  That loop is stage_main(); a stage fills
 * struct stage_hooks and never writes the loop again.
 *
 * Under scale-out both write through one member's transactional producer
 * (owner.c): begin, commit with the owned work partitions as the fence
 * (KIP-447), abort, a new producer after a fatal error (at most
 * STAGE_RENEW_MAX a minute: more is another process running as the same
 * member), the set of records the target refused (refused.c) and the
 * suspects among them sent alone.  That is struct stage_txn; what an
 * aborted transaction means for the stage's positions stays the stage's
 * (it redoes from its committed positions).
 */
#ifndef AAGW_STAGE_H
#define AAGW_STAGE_H

#include "replicator_int.h"

#include <time.h>

/* The stall watch is looked at no more often: a look reads every
 * partition's position, and a stall takes seconds. */
#define STAGE_LOOK_MS 1000

/* ------------------------------------------------------------- LOOP --- */

/* One consumer queue of a stage, and its stall watch (NULL: none). */
struct stage_queue {
        rd_kafka_t         *consumer;
        rd_kafka_queue_t   *q;
        aagw_stall_watch_t *stalls;
};

/* What a stage does at each point of the loop; 'self' is the stage.
 * Every hook runs in the stage's thread. */
struct stage_hooks {
        /* Before the loop: clients, scale-out, the first discovery.  0, or
         * -1 to end the thread (the stage failed or stops). */
        int (*start)(void *self);
        /* The queues to take batches from, each in turn (at most 'max');
         * asked again whenever the wait was dropped (stage_unwait()). */
        int (*queues)(void *self, struct stage_queue *qs, int max);
        /* The producer whose delivery reports wake the loop. */
        rd_kafka_t *(*producer)(void *self);
        /* Each round, before any batch: > 0 take batches, 0 not in this
         * round (no transaction open, ...), < 0 leave the loop. */
        int (*round)(void *self);
        /* Records taken from queue 'k': the stage's now. */
        void (*batch)(void *self, int k, rd_kafka_message_t **msgs, size_t n);
        /* After the round's batches ('n' records; 'full': a batch
         * filled): delivery reports, commits, saves, discovery.  < 0 to
         * leave the loop. */
        int (*after)(void *self, ssize_t n, bool full);
        /* Partitions of queue 'k' whose fetch stands still while their
         * leader holds more (already logged): start them again. */
        void (*restart)(void *self, int k, const struct aagw_stall_report *r,
                        size_t n);
        /* After the loop: drain what is in flight, commit, close. */
        void (*finish)(void *self);
};

/* How a stage makes its progress durable: in one process (positions
 * stored and committed at an interval) or, under scale-out, in the
 * transactions of its member's producer (stage_txn).  Each stage has
 * both; it picks one at its start, and the loop asks that one.  A hook
 * left NULL does nothing (start 0, round > 0, after 0). */
struct stage_commit {
        /* Before the stage's own start (scale-out: the work topic, the
         * owner).  0, or -1 to end the thread. */
        int (*start)(void *self);
        /* Each round, after the stage's round: > 0 records may be taken,
         * 0 not now (no transaction open), < 0 leave the loop. */
        int (*round)(void *self);
        /* After the round's batches: what is due made durable.  < 0 to
         * leave the loop. */
        int (*after)(void *self);
        /* At the stop: what is done made durable; the stage's finish
         * calls it where its drain allows (stage_commit_finish()). */
        void (*finish)(void *self);
        /* Scale-out: a new producer, once the transaction driver
         * (struct stage's txn) needs one; the loop has dropped its wait.
         * 0, or -1 to leave the loop. */
        int (*renew)(void *self);
};

struct stage {
        const struct stage_hooks  *h;
        const struct stage_commit *commit;
        struct stage_txn          *txn; /* scale-out's driver, NULL */
        void                     *self;
        struct replicator_ctl    *ctl;
        const char               *name; /* for the log: "east->west" */
        const bool *paused;    /* NULL: never; paused, no stall is looked for */
        size_t      batch_max; /* records taken from a queue at a time */
        /* The wait (NULL: to be made at the next round). */
        aagw_qwait_t      *wait;
        rd_kafka_queue_t  *pq; /* the producer's main queue */
        struct stage_queue qs[AAGW_FETCH_CONNECTIONS_MAX];
        int                nq;
        int64_t            last_look_ms;
};

void stage_init(struct stage *s, const struct stage_hooks *h,
                const struct stage_commit *commit, struct stage_txn *txn,
                void *self, struct replicator_ctl *ctl, const char *name,
                const bool *paused, size_t batch_max);

/* The thread: start, the loop until the stage stops or a hook leaves it,
 * finish; state STOPPED unless it failed.  'arg' is the struct stage. */
void *stage_main(void *arg);

/* The commit's finish, if it has one (the stage's finish calls it). */
void stage_commit_finish(struct stage *s);

/* Drop the wait and the queues it holds: before a hook replaces a
 * consumer or the producer (the wait has their queues' events).  The
 * next round waits on what the hooks give then. */
void stage_unwait(struct stage *s);

/* Records waiting in the stage's queues, all of them. */
int64_t stage_queued(const struct stage *s);

/* Purge what 'rk' holds (queued and in flight) and serve the reports
 * until nothing is in flight ('*inflight') or 'timeout_ms' passed: the
 * reports release the tokens and the consumed records they hold, which
 * must happen before the tokens are freed and the consumer destroyed
 * (rd_kafka_destroy() waits for every message of its own). */
void stage_purge(rd_kafka_t *rk, _Atomic int64_t *inflight, int timeout_ms);

/* Serve 'rk''s delivery reports until at most 'until' records are in
 * flight ('*inflight'), 'timeout_ms' passed or 'stop' is set; '*now'
 * (may be NULL) gets the wall clock after each wait. */
void stage_settle(rd_kafka_t *rk, _Atomic int64_t *inflight, int64_t until,
                  int timeout_ms, const atomic_bool *stop, int64_t *now);

/* ------------------------------------------------------- SIDE THREAD --- */

/* A thread beside a stage that sleeps on 'cond' until it has something
 * to do or is told to stop: the stage_worker below, the stall watch's
 * probe (stall.c), the metadata watch (md_watch.c).  What it waits for
 * is its owner's, under 'lock'; 'cond' runs on CLOCK_MONOTONIC (for a
 * pthread_cond_timedwait(), side_thread_due()). */
struct side_thread {
        pthread_t       thread;
        pthread_mutex_t lock;
        pthread_cond_t  cond;
        bool            started;
        atomic_bool     stop; /* side_thread_stop() */
};

/* Make the lock and the condition, and start 'fn'('arg'); false if the
 * thread cannot start (nothing left to undo). */
bool side_thread_start(struct side_thread *t, void *(*fn)(void *), void *arg);

/* Set 'stop' and signal under the lock, without waiting (the thread
 * ends at its next look at 'stop'); does nothing if it did not start. */
void side_thread_signal(struct side_thread *t);

/* side_thread_signal(), join, and undo the start; does nothing if the
 * thread did not start. */
void side_thread_stop(struct side_thread *t);

/* '*due': 'ms' from now, on the condition's clock. */
void side_thread_due(struct timespec *due, int ms);

/* ------------------------------------------------------------ WORKER --- */

/* A thread beside a stage for its round trips (reconciling a partition,
 * settling a new output's ends, asking leaders), so that the stage's own
 * thread never waits for one: jobs run in the order given, and the stage
 * takes the answers back in its loop. */
struct stage_job {
        struct stage_job *next; /* first member of the stage's own job */
};

struct stage_worker {
        /* Set before stage_worker_start(): */
        void *ctx;
        /* Without the lock: do 'j'. */
        void (*run)(void *ctx, struct stage_job *j);
        /* Under the lock (w->t.lock), before 'j' runs (NULL: none): may
         * look at the jobs behind it (w->todo) and drop the lock for a
         * while. */
        void (*ahead)(void *ctx, struct stage_worker *w, struct stage_job *j);
        /* Under the lock, once 'j' is answered: whether to tell the stage
         * now ('next', the job after it, may be NULL); NULL: always. */
        bool (*tell)(void *ctx, const struct stage_job *j,
                     const struct stage_job *next);
        /* Wake the stage's wait (rd_kafka_queue_yield() on a queue it
         * waits on). */
        void (*wake)(void *ctx);
        /* The stage's stop: every Kafka wait of a job ends at it
         * (replicator_thread_stop_flag()). */
        const atomic_bool *halt;

        struct side_thread t;
        struct stage_job  *todo, **tail, *done;
        atomic_bool        answered; /* 'done' holds answers to take */
};

/* Start the thread; false if there is none (out of threads: the stage
 * then does its jobs itself). */
bool stage_worker_start(struct stage_worker *w);

/* Queue 'j' (the worker's once given). */
void stage_worker_put(struct stage_worker *w, struct stage_job *j);

/* The answered jobs (newest first; the caller's now), NULL if none:
 * costs an atomic exchange when there are none. */
struct stage_job *stage_worker_take(struct stage_worker *w);

/* Stop the thread (a job under way ends at the stage's stop: its waits
 * watch the stage's stop flag) and give every job not taken to 'drop'. */
void stage_worker_stop(struct stage_worker *w,
                       void (*drop)(struct stage_job *j));

/* ---------------------------------------------------------- SCALE-OUT --- */

#define STAGE_RENEW_MAX 3 /* new producers per window, then fail */
#define STAGE_RENEW_WINDOW_MS 60000
/* How long a suspect (a record refused with its batch) waits for the
 * records before it, and then for its own answer, to be sent alone.  A
 * few ms normally (linger.ms and a round trip); past this, it goes with
 * the others and stays a suspect. */
#define STAGE_ALONE_MS 5000
/* Records remembered as refused at once, at most: a refused batch makes
 * every record of it a suspect, and librdkafka batches up to
 * batch.num.messages (10,000) records per partition. */
#define STAGE_REFUSED_MAX 100000

/* One member's transactions. */
struct stage_txn {
        struct replicator_ctl *ctl;
        const char            *name;   /* for the log */
        const char            *member; /* scale_out.member */
        struct owner          *owner;
        bool                   open;   /* begun, not ended */
        bool                   broken; /* a record of it failed: abort
                                          and redo */
        bool need_renew;               /* the producer failed for good:
                                          the loop makes a new one */
        int64_t begun_ms;              /* mono ms of the begin */
        int64_t fence_seq;
        int     renewals; /* since renew_since_ms */
        int64_t renew_since_ms;
        /* The records a transaction was aborted for (refused.c). */
        struct refused  *refused;
        _Atomic uint64_t committed, aborted, fenced;
};

/* 0, or -1 (out of memory). */
int  stage_txn_init(struct stage_txn *t, struct replicator_ctl *ctl,
                    const char *name, const char *member);
void stage_txn_deinit(struct stage_txn *t);

/* The producer failed for good (librdkafka's fatal error: a zombie the
 * coordinator fenced while it stood still, an abort refused as
 * INVALID_TXN_STATE).  Nothing of the open transaction becomes visible
 * either way; the loop makes a new producer (stage_txn_renew(), the
 * membership is kept).  More than STAGE_RENEW_MAX in a minute is another
 * process running as this member: the stage fails. */
void stage_txn_fatal(struct stage_txn *t, const char *why);

/* Begin a transaction unless one is open.  A fatal result has gone to
 * stage_txn_fatal(); the caller acts on the others ('why' says why). */
owner_result_t stage_txn_begin(struct stage_txn *t, char *why, size_t why_size);

/* Commit the open transaction with every owned work partition as the
 * fence, and 'pos' (NULL: none) as the group's offsets of the stage's
 * own topics.  Counted (committed, aborted, fenced); fatal goes to
 * stage_txn_fatal().  The transaction is closed whatever the result. */
owner_result_t stage_txn_commit(struct stage_txn                      *t,
                                const rd_kafka_topic_partition_list_t *pos,
                                char *why, size_t why_size);

/* Abort the open transaction (nothing of it is ever visible); fatal goes
 * to stage_txn_fatal(). */
owner_result_t stage_txn_abort(struct stage_txn *t, char *why, size_t why_size);

/* A new producer after stage_txn_fatal(): what 'old' holds is purged,
 * 'detach' lets go of everything made on it (drains its reports), the
 * owner makes a new one (membership kept), and 'attach' makes the
 * stage's handles on it.  Returns 0, or -1 (the stage failed). */
int stage_txn_renew(struct stage_txn *t, rd_kafka_t *old,
                    int (*detach)(void *self),
                    int (*attach)(void *self, rd_kafka_t *producer),
                    void *self);

/* A record of the transaction was refused for good (too large, invalid:
 * replicator_refused_for_good()): remember it by its input coordinates
 * ('what' names the refusal for the failure message).  Returns its entry,
 * or NULL with the stage failed (more than STAGE_REFUSED_MAX, or out of
 * memory).  Breaking the transaction is the caller's (after its log
 * line, which says whether it was broken already). */
struct refused_rec *stage_txn_refused(struct stage_txn *t, const char *topic,
                                      int32_t p, int64_t offset,
                                      const char *what);

/* Join the owners' group: owner_new() with 'oc', the member, the stop
 * and the delivery reports ('d', the stage's) filled in here.  Returns
 * the owner (t->owner), or NULL with the stage failed. */
struct owner *stage_txn_join(struct stage_txn *t, struct owner_conf *oc,
                             const struct replicator_delivery *d);

/* Delivery reports of an owner's producer: the 'opaque' is the stage's
 * struct replicator_delivery; records without a token are not passed
 * on (a changelog record, a dead-letter copy of the owner's own). */
void stage_owner_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);

/* "0,3" of a partition list ("none" if empty), for the log. */
void stage_parts_str(const rd_kafka_topic_partition_list_t *l, char *buf,
                     size_t size);

#endif
