/*
 * replicator/flow_topics.c: what a flow copies: discovery of the source
 * topics and partitions, the remote topics they go to (created and grown
 * through topics.c), held partitions, and the assignment of the source
 * consumer.
 */
#include "flow_int.h"

/* ------------------------------------------------------------ TOPICS ---- */

/* Scale-out: the work partition that source partition 'p' of 'tt'
 * belongs to; every partition of a topic in a different one, in turn,
 * so that one topic spreads over the processes. */
int32_t flow_work_of(const aagw_flow_t *f, const struct ttrack *tt,
                     int32_t p) {
        return (int32_t)((tt->hash + (uint32_t)p) % (uint32_t)f->work_cnt);
}

/* Whether this process copies source partition 'p' of 'tt' (always, as
 * the only process of its site). */
bool flow_owned(const aagw_flow_t *f, const struct ttrack *tt, int32_t p) {
        return !f->owner || owner_owned(f->owner, flow_work_of(f, tt, p));
}

struct ttrack *flow_topic_find(aagw_flow_t *f, const char *topic) {
        for (size_t i = 0; i < f->ntopics; i++)
                if (!strcmp(f->topics[i]->topic, topic))
                        return f->topics[i];
        return NULL;
}

/* Make room for 'n' partitions in 'tt' (stats readers take 'lock').
 * Returns 0, or -1 out of memory. */
static int parts_grow(struct ttrack *tt, int32_t n, pthread_mutex_t *lock) {
        if (n <= tt->partition_cnt)
                return 0;
        struct ptrack **np = realloc(tt->parts, (size_t)n * sizeof(*np));
        if (!np)
                return -1;
        memset(np + tt->partition_cnt, 0,
               (size_t)(n - tt->partition_cnt) * sizeof(*np));
        pthread_mutex_lock(lock);
        tt->parts         = np;
        tt->partition_cnt = n;
        pthread_mutex_unlock(lock);
        return 0;
}

struct ptrack *flow_part_get(aagw_flow_t *f, struct ttrack *tt,
                             int32_t partition) {
        if (partition < 0 || partition >= tt->partition_cnt)
                return NULL;
        if (!tt->parts[partition]) {
                struct ptrack *pt = calloc(1, sizeof(*pt));
                if (!pt)
                        return NULL;
                pt->tt            = tt;
                pt->partition     = partition;
                pt->next          = -1;
                pt->out_next      = -1;
                pt->saved_next    = -1;
                pt->saved_out     = -1;
                /* (The reconciler reads the table: flow_settle_all().) */
                pthread_mutex_lock(&f->ctl.lock);
                tt->parts[partition] = pt;
                pthread_mutex_unlock(&f->ctl.lock);
        }
        return tt->parts[partition];
}

/* Partition count of 'topic' on the cluster of 'rk', -1 if the topic does
 * not exist, -2 on error.  Asks for all topics so that the question never
 * auto-creates the topic. */
/* Create 'topic' with 'partitions' at the target, through the Admin API
 * or (with 'autocreate') the producer's auto-creation.  Returns its
 * partition count, or -1. */
static int make_topic(aagw_flow_t *f, const char *topic, int partitions,
                      bool autocreate) {
        struct replicator_topic_maker tm = {
            .admin             = f->admin,
            .producer          = autocreate ? f->producer : NULL,
            .tag               = "FLOW",
            .who               = f->name,
            .cluster           = f->target,
            .admin_unsupported = &f->admin_create_unsupported};
        return replicator_topic_make(&tm, topic, partitions);
}

/* Create the dead-letter topic (one partition) through the Admin API if
 * the target lacks it.  Clusters that do not auto-create topics (the
 * usual production setting, auto.create.topics.enable=false) would
 * otherwise fail the first dead-lettered record with an unknown topic;
 * where the Admin API is missing, the producer's auto-creation remains. */
void flow_dlq_ensure(aagw_flow_t *f) {
        const struct rd_kafka_metadata *md = NULL;
        int                             have;

        if (aagw_kafka_metadata(f->admin, true, NULL, &md, 5000, &f->ctl.stop))
                return; /* the produce reports what is wrong */
        have = replicator_md_partitions(md, f->dlq_topic);
        rd_kafka_metadata_destroy(md);
        if (have < 0)
                make_topic(f, f->dlq_topic, 1, false);
}

/* Partitions of the copy of 'tt' as the target producer sees them (a
 * partition it does not know cannot be produced to), -1 on error. */
static int target_partitions(aagw_flow_t *f, struct ttrack *tt) {
        const struct rd_kafka_metadata *md = NULL;
        int                             n  = -1;

        /* (The maker's too: a stop must not wait out a target that
         * stopped answering.) */
        if (aagw_kafka_metadata(f->out, false, tt->rkt, &md, 5000,
                                &f->ctl.stop))
                return -1;
        if (md->topic_cnt == 1 && !md->topics[0].err)
                n = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
        return n;
}

/* Make sure the copy of 'tt' exists with 'want' partitions: created
 * (topics_create(): partitions, replication factor, configs), else
 * auto-created by the producer where the cluster lacks the Admin API; or
 * grown (topics_grow()).  Returns 0, or -2 on a transient error
 * (discovery tries again).  Admin API calls that may wait seconds (the
 * embedded cluster answers none): the maker thread's, not the copying
 * thread's. */
static int target_prepare(aagw_flow_t *f, struct ttrack *tt, int want) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t err;
        char                why[512];
        int                 have, rc;

        err = aagw_kafka_metadata(f->admin, true, NULL, &md, 5000,
                                  &f->ctl.stop);
        if (err == RD_KAFKA_RESP_ERR__INTR)
                return -2; /* stopping */
        if (err) {
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: metadata of %s failed: %s; retrying later",
                         f->name, f->target, rd_kafka_err2str(err));
                return -2;
        }
        have = replicator_md_partitions(md, tt->remote);
        rd_kafka_metadata_destroy(md);
        if (have < 0) {
                rc = topics_create(f->remote_topics, tt->topic, tt->remote,
                                   want, why, sizeof(why));
                if (rc == -1) {
                        if (!tt->create_warned)
                                aagw_log(AAGW_LOG_WARN, "FLOW",
                                         "%s: cannot create topic %s at %s: "
                                         "%s; retrying at every discovery",
                                         f->name, tt->remote, f->target, why);
                        tt->create_warned = true;
                        return -2;
                }
                if (rc == -2) {
                        if (!f->admin_create_unsupported)
                                aagw_log(AAGW_LOG_WARN, "FLOW",
                                         "%s: cluster %s does not create "
                                         "topics through the Admin API (%s); "
                                         "relying on broker auto-creation "
                                         "from now on",
                                         f->name, f->target, why);
                        f->admin_create_unsupported = true;
                        /* Auto-creation only, from now on. */
                        if (make_topic(f, tt->remote, want, true) < 0)
                                return -2;
                }
        } else if (have < want) {
                rc = topics_grow(f->remote_topics, tt->remote, want, why,
                                 sizeof(why));
                if (rc && tt->reported != want)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: cannot add partitions to %s at %s "
                                 "(%d -> %d): %s",
                                 f->name, tt->remote, f->target, have, want,
                                 why);
        }
        return 0;
}

/* The producer's handle of the copy of 'tt', made now if it has none
 * (which asks for the topic's metadata: on clusters that allow it, that
 * auto-creates the copy with the broker's partition count).  Under the
 * flow's lock: the reconciler reads it (flow_settle_all()).  Returns the
 * handle, or NULL. */
static rd_kafka_topic_t *target_handle(aagw_flow_t *f, struct ttrack *tt) {
        rd_kafka_topic_t *rkt;

        if (tt->rkt)
                return tt->rkt;
        if (!(rkt = rd_kafka_topic_new(f->out, tt->remote, NULL)))
                return NULL;
        pthread_mutex_lock(&f->ctl.lock);
        tt->rkt = rkt;
        pthread_mutex_unlock(&f->ctl.lock);
        return rkt;
}

/* The maker's last step: the partitions of the made copy as the
 * producer sees them, -1 on error.  Not under scale-out, where the
 * producer ('out') can be replaced by the flow thread at any time
 * (flow_scale_renew()): there the flow thread asks itself. */
static int target_count(aagw_flow_t *f, struct ttrack *tt) {
        if (!target_handle(f, tt))
                return -1;
        return target_partitions(f, tt);
}

/* ---------------------------------------------------------------- MAKER --- */

/* Creating a copy, or growing it, waits on the target's controller: up
 * to ADMIN_TIMEOUT_MS (topics.c) per call where the cluster answers none,
 * seconds while a controller is slow.  In the flow thread every topic
 * stood still meanwhile (the README demo copied nothing into a site for
 * 5 s while the heartbeats copy was being made).  So discovery hands a
 * copy to make to the maker thread (a stage_worker) and goes on; the
 * flow thread takes the answer back (flow_made()), hangs it on its topic
 * and asks for a discovery at once (flow_after()), which finds it there
 * (ensure_target()). */

/* A job of the maker (stage_worker): make or grow the copy of 'j->tt'
 * with 'j->want' partitions; the answer in 'j->rc' and 'j->have'. */
static void maker_job(void *arg, struct stage_job *sj) {
        aagw_flow_t          *f = arg;
        struct flow_make_job *j = (struct flow_make_job *)sj;

        j->rc   = target_prepare(f, j->tt, j->want);
        j->have = -1;
        if (!j->rc && !f->owner) {
                j->have = target_count(f, j->tt);
                if (j->have < 0)
                        j->rc = -2;
        }
}

/* A job not answered, or not taken back, at the stop: a discovery after
 * it asks again. */
static void maker_drop(struct stage_job *sj) {
        struct flow_make_job *j = (struct flow_make_job *)sj;

        j->tt->making = false;
        free(j);
}

void flow_maker_start(aagw_flow_t *f) {
        flow_reconciler_start(f);
        f->maker = (struct stage_worker){.ctx  = f,
                                         .halt = &f->ctl.stop,
                                         .run  = maker_job,
                                         .wake = flow_wake};
        stage_worker_start(&f->maker);
}

void flow_maker_stop(aagw_flow_t *f) {
        flow_reconciler_stop(f);
        stage_worker_stop(&f->maker, maker_drop);
}

bool flow_made(aagw_flow_t *f) {
        struct flow_make_job *j =
            (struct flow_make_job *)stage_worker_take(&f->maker);
        struct flow_make_job *next;

        if (!j)
                return false;
        for (; j; j = next) {
                next          = (struct flow_make_job *)j->base.next;
                j->tt->making = false;
                free(j->tt->made);
                j->tt->made = j;
        }
        return true;
}

/* The copy of 'tt' with 'want' partitions: returns the partitions the
 * producer sees (fewer than 'want' if the copy could not be grown), -2 on
 * a transient error, -3 while the maker works on it (discovery comes back
 * to it).  With the maker, no round trip of its own: the maker asked
 * for the copy's partitions too. */
static int ensure_target(aagw_flow_t *f, struct ttrack *tt, int want) {
        struct flow_make_job *j;
        int                   rc, have = -1;

        if (!f->maker.t.started) {
                rc = target_prepare(f, tt, want);
        } else if (tt->making) {
                return -3;
        } else if (tt->made && tt->made->want == want) {
                rc   = tt->made->rc;
                have = tt->made->have;
                free(tt->made);
                tt->made = NULL;
        } else {
                /* Not asked yet, or the source grew meanwhile: ask
                 * (again). */
                free(tt->made);
                tt->made = NULL;
                if (!(j = calloc(1, sizeof(*j))))
                        return -2;
                j->tt      = tt;
                j->want    = want;
                tt->making = true;
                stage_worker_put(&f->maker, &j->base);
                return -3;
        }
        if (rc)
                return rc;
        if (have >= 0)
                return have;
        /* The producer's topic handle only now (target_handle()), after
         * the copy was made. */
        if (!target_handle(f, tt))
                return -2;
        have = target_partitions(f, tt);
        return have < 0 ? -2 : have;
}

bool flow_topic_copied(const aagw_flow_t *f, const char *topic) {
        aagw_skip_t skip;

        if (!aagw_repl_topic_allowed(f->pol, topic) &&
            !(f->conf.mm2.heartbeat_ms > 0 && mm2_is_heartbeats(topic)))
                return false;
        skip = (f->conf.verdict_flags & AAGW_VERDICT_F_NO_TOPIC_CHECK)
                   ? AAGW_SKIP_NONE
                   : aagw_repl_topic_check(f->pol, f->source, f->target, topic);
        /* The heartbeats topic goes whatever replication.topics selects,
         * as in MM2 (its copies tell MirrorClient which clusters are
         * upstream); a local name, so no name rule can stop it. */
        if (skip == AAGW_SKIP_FILTERED && f->conf.mm2.heartbeat_ms > 0 &&
            mm2_is_heartbeats(topic))
                skip = AAGW_SKIP_NONE;
        return skip == AAGW_SKIP_NONE;
}

void flow_discover(aagw_flow_t *f) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t              err;

        err = aagw_kafka_metadata(f->meta, true, NULL, &md, 5000,
                                  &f->ctl.stop);
        flow_discover_md(f, err, md);
}

void flow_discover_md(aagw_flow_t *f, rd_kafka_resp_err_t err,
                      const struct rd_kafka_metadata *md) {
        bool changed = false;

        if (err == RD_KAFKA_RESP_ERR__INTR)
                return; /* stopping */
        /* The copies made since, on their topics (ensure_target()). */
        flow_made(f);
        aagw_reach_note(&f->src_reach, err);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: metadata of %s failed: %s", f->name, f->source,
                         rd_kafka_err2str(err));
                return;
        }
        for (size_t i = 0; i < f->ntopics; i++)
                f->topics[i]->seen = false;
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[i];
                struct ttrack                       *tt;

                if (mt->err || mt->partition_cnt <= 0) {
                        /* There, but not answering now (no leader, ...):
                         * not gone.  A deleted topic is not listed. */
                        if ((tt = flow_topic_find(f, mt->topic)))
                                tt->seen = true;
                        continue;
                }
                if (!flow_topic_copied(f, mt->topic))
                        continue;
                tt = flow_topic_find(f, mt->topic);
                if (!tt) {
                        if (f->ntopics == MAX_TOPICS)
                                continue;
                        tt = calloc(1, sizeof(*tt));
                        if (!tt || !(tt->topic = strdup(mt->topic))) {
                                free(tt);
                                continue;
                        }
                        if (aagw_repl_remote_topic(f->pol, f->source,
                                                   mt->topic, tt->remote,
                                                   sizeof(tt->remote))) {
                                free(tt->topic);
                                free(tt);
                                continue;
                        }
                        tt->is_hb   = mm2_is_heartbeats(mt->topic);
                        tt->hash    = XXH32(mt->topic, strlen(mt->topic), 0);
                        /* The per-topic part of every verdict, once. */
                        aagw_skip_t tc;
                        tt->prechecked =
                            aagw_repl_precheck(f->pol, f->source, f->target,
                                               mt->topic,
                                               f->conf.verdict_flags,
                                               &tc) == AAGW_OK &&
                            tc == AAGW_SKIP_NONE;
                        tt->id_rule = f->conf.id_rule_for
                                          ? f->conf.id_rule_for(f->conf.opaque,
                                                                mt->topic)
                                          : NULL;
                        pthread_mutex_lock(&f->ctl.lock);
                        f->topics[f->ntopics++] = tt;
                        pthread_mutex_unlock(&f->ctl.lock);
                }
                tt->seen = true;
                if (tt->active && tt->partition_cnt >= mt->partition_cnt &&
                    tt->target_cnt >= tt->partition_cnt && !tt->release_retry)
                        continue;
                int have = ensure_target(f, tt, mt->partition_cnt);
                if (have < 0)
                        continue; /* transient, or being made: next time */
                if (tt->active && mt->partition_cnt > tt->partition_cnt)
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: %s grew from %d to %d partitions at %s",
                                 f->name, tt->topic, tt->partition_cnt,
                                 mt->partition_cnt, f->source);
                if (parts_grow(tt, mt->partition_cnt, &f->ctl.lock))
                        continue;
                flow_target_count(f, tt, have, mt->partition_cnt);
                if (!tt->active) {
                        tt->active = true;
                        atomic_fetch_add(&f->ntopics_active, 1);
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: replicating %s (%d partitions) to %s at "
                                 "%s",
                                 f->name, tt->topic, mt->partition_cnt,
                                 tt->remote, f->target);
                        topics_track(f->remote_topics, tt->topic, tt->remote);
                        /* (Its first reconciliation primes the handles
                         * that do it: replicator_prime_topic().) */
                        changed = true;
                }
                /* After a fence, nothing until the lease holds the id
                 * again (flow_after() assigns then). */
                if (!f->lease_wait)
                        flow_assign_new(f, tt);
        }
        rd_kafka_metadata_destroy(md);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (tt->active && !tt->seen) {
                        aagw_log(AAGW_LOG_INFO, "FLOW",
                                 "%s: topic %s is gone from %s; no longer "
                                 "reading it",
                                 f->name, tt->topic, f->source);
                        if (flow_unassign(f, tt, 10000))
                                break;
                        tt->active = false;
                        atomic_store(&tt->primed, false);
                        atomic_store(&tt->src_primed, false);
                        atomic_fetch_sub(&f->ntopics_active, 1);
                        changed    = true;
                }
        }
        if ((changed || f->subscription_dirty) && f->lease) {
                rd_kafka_topic_partition_list_t *sub =
                    rd_kafka_topic_partition_list_new((int)f->ntopics);
                for (size_t i = 0; i < f->ntopics; i++)
                        if (f->topics[i]->active)
                                rd_kafka_topic_partition_list_add(
                                    sub, f->topics[i]->topic,
                                    RD_KAFKA_PARTITION_UA);
                if (sub->cnt == 0)
                        err = rd_kafka_unsubscribe(f->lease);
                else
                        err = rd_kafka_subscribe(f->lease, sub);
                f->subscription_dirty = err != 0;
                if (err)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: identity lease: subscribe failed: %s",
                                 f->name, rd_kafka_err2str(err));
                rd_kafka_topic_partition_list_destroy(sub);
        }
}

static void release_noted(aagw_flow_t *f, const struct ptrack *pt,
                          int64_t off) {
        if (off == RD_KAFKA_OFFSET_BEGINNING)
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: %s [%d] now has a partition at %s; copying "
                         "from its first record",
                         f->name, pt->tt->topic, (int)pt->partition, f->target);
        else
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: %s [%d] now has a partition at %s; copying "
                         "from offset %" PRId64,
                         f->name, pt->tt->topic, (int)pt->partition, f->target,
                         off);
}

/* Let the consumers fetch the held partitions of 'l', positioned
 * (flow_part_start()) at the offsets in 'l'.  Resumed first and sought
 * after: the seek's barrier drops whatever the resumed fetch brought from
 * elsewhere. */
static void release_start(aagw_flow_t *f, rd_kafka_topic_partition_list_t *l) {
        if (!l->cnt)
                return;
        if (!f->paused) {
                rd_kafka_error_t *r = flow_fx_apply(f, FX_RESUME, l, 0);
                if (r)
                        rd_kafka_error_destroy(r);
        }
        rd_kafka_error_t *e = flow_fx_apply(f, FX_SEEK, l, 5000);
        if (!e)
                return;
        /* (librdkafka 2.0 can answer "timed out" at once.)  Held again,
         * and started again at the next discovery: nothing is read
         * meanwhile. */
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: starting %s's new partitions: seek: %s; trying again "
                 "at the next discovery",
                 f->name, l->elems[0].topic, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        if ((e = flow_fx_apply(f, FX_PAUSE, l, 0)))
                rd_kafka_error_destroy(e);
        for (int i = 0; i < l->cnt; i++) {
                struct ttrack *tt = flow_topic_find(f, l->elems[i].topic);
                struct ptrack *pt = tt->parts[l->elems[i].partition];
                flow_part_mark(pt, true, true);
                pt->next = -1;
                atomic_store_explicit(&pt->pos_pub, -1, RELAXED);
                tt->release_retry = true;
        }
}

/* The held partitions of 'tt' below its target count: position each
 * (flow_reconcile(): a new partition from its first record), then let the
 * consumer fetch it (release_start()). */
void flow_release_held(aagw_flow_t *f, struct ttrack *tt) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(tt->target_cnt);

        /* (A copy may have more partitions than its source: made by
         * hand, or auto-created with the broker's num.partitions.) */
        int32_t n         = tt->target_cnt < tt->partition_cnt ? tt->target_cnt
                                                               : tt->partition_cnt;
        tt->release_retry = false;
        for (int32_t p = 0; p < n && !atomic_load(&f->ctl.stop); p++) {
                struct ptrack *pt = tt->parts[p];
                if (!pt || !pt->assigned || !pt->held || pt->reconciling)
                        continue;
                /* Positioned and released once reconciled
                 * (flow_reconciled()). */
                if (flow_recon_ask(f, pt, true))
                        continue;
                int64_t off = flow_reconcile(f, pt, NULL);
                flow_part_start(f, pt, off);
                release_noted(f, pt, off);
                rd_kafka_topic_partition_list_add(l, tt->topic, p)->offset =
                    off;
        }
        release_start(f, l);
        rd_kafka_topic_partition_list_destroy(l);
}

/* Assign the partitions of 'l' (positioned by flow_part_start() or held
 * by flow_assign_new(), at the offsets in 'l'); those also in 'held' are
 * paused at once.  Incremental, so the partitions already read keep
 * their place and what is in flight. */
static void assign_start(aagw_flow_t *f, rd_kafka_topic_partition_list_t *l,
                         rd_kafka_topic_partition_list_t *held) {
        rd_kafka_error_t *e;

        if (!l->cnt)
                return;
        e = flow_fx_apply(f, FX_ASSIGN, l, 0);
        if (e) {
                /* Unassigned again: the next discovery tries again. */
                aagw_log(AAGW_LOG_WARN, "FLOW", "%s: assigning %s: %s", f->name,
                         l->elems[0].topic, rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                for (int i = 0; i < l->cnt; i++) {
                        struct ttrack *tt =
                            flow_topic_find(f, l->elems[i].topic);
                        struct ptrack *pt = tt->parts[l->elems[i].partition];
                        flow_part_mark(pt, false, false);
                        atomic_fetch_sub(&f->nparts_assigned, 1);
                        tt->release_retry = true;
                }
                return;
        }
        /* A paused flow (paused before, or kept paused across a restart)
         * stays paused on partitions it takes now; records fetched
         * before the pause are dropped by librdkafka's pause barrier. */
        if (f->paused || held->cnt)
                e = flow_fx_apply(f, FX_PAUSE, f->paused ? l : held, 0);
        if (e)
                rd_kafka_error_destroy(e);
        if (atomic_load(&f->ctl.state) == AAGW_FLOW_STARTING)
                atomic_store(&f->ctl.state, AAGW_FLOW_RUNNING);
}

/* Scale-out: where a source partition this member now owns resumes, and
 * how long its reconciliation waited for open transactions of the
 * previous owner (flow_stable_end()). */
static void takeover_noted(aagw_flow_t *f, struct ptrack *pt, int64_t off,
                           int64_t txn_wait_ms) {
        aagw_log(AAGW_LOG_INFO, "FLOW",
                 "%s: takeover: %s [%d] (work partition %d) resumes at "
                 "%s%" PRId64 "; %" PRId64 " ms waiting for open "
                 "transactions",
                 f->name, pt->tt->topic, (int)pt->partition,
                 (int)flow_work_of(f, pt->tt, pt->partition),
                 off < 0 ? "its first record " : "", off < 0 ? (int64_t)0 : off,
                 txn_wait_ms);
}

/* Every partition of 'tt' is the flow's: a partition the copy has is
 * reconciled and read from there, one it lacks is held (assigned, paused,
 * positioned when the copy has it: flow_target_count()).  With the
 * reconciler, a partition the copy has is assigned once it answered
 * (flow_reconciled()). */
void flow_assign_new(aagw_flow_t *f, struct ttrack *tt) {
        rd_kafka_topic_partition_list_t *l, *held;

        l    = rd_kafka_topic_partition_list_new(tt->partition_cnt);
        held = rd_kafka_topic_partition_list_new(tt->partition_cnt);
        for (int32_t p = 0; p < tt->partition_cnt && !atomic_load(&f->ctl.stop);
             p++) {
                struct ptrack *pt = flow_part_get(f, tt, p);
                int64_t        off;
                if (!pt || pt->assigned || pt->reconciling ||
                    !flow_owned(f, tt, p))
                        continue;
                if (p >= tt->target_cnt) {
                        off = RD_KAFKA_OFFSET_BEGINNING;
                        flow_part_mark(pt, true, true);
                        pt->next = -1;
                        atomic_store_explicit(&pt->pos_pub, -1, RELAXED);
                        atomic_fetch_add(&f->nparts_assigned, 1);
                        rd_kafka_topic_partition_list_add(held, tt->topic, p);
                } else if (flow_recon_ask(f, pt, false)) {
                        continue; /* assigned once reconciled */
                } else {
                        int64_t waited = 0;
                        off            = flow_reconcile(f, pt, &waited);
                        flow_part_start(f, pt, off);
                        if (f->owner)
                                takeover_noted(f, pt, off, waited);
                }
                rd_kafka_topic_partition_list_add(l, tt->topic, p)->offset =
                    off;
        }
        assign_start(f, l, held);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_topic_partition_list_destroy(held);
}

/* Take the reconciler's answers (see flow_int.h). */
void flow_reconciled(aagw_flow_t *f) {
        struct flow_recon_job           *j = flow_recon_take(f), *next;
        rd_kafka_topic_partition_list_t *l, *rel, *none;
        bool                             again = false;

        if (!j)
                return;
        if (atomic_load(&f->ctl.stop)) {
                /* (Stopping: what was found is found again at the next
                 * start.) */
                for (; j; j = next) {
                        next = (struct flow_recon_job *)j->base.next;
                        j->pt->reconciling = false;
                        free(j);
                }
                return;
        }
        l    = rd_kafka_topic_partition_list_new(16);
        rel  = rd_kafka_topic_partition_list_new(16);
        none = rd_kafka_topic_partition_list_new(0);
        for (; j; j = next) {
                struct ptrack *pt = j->pt;
                struct ttrack *tt = pt->tt;

                next            = (struct flow_recon_job *)j->base.next;
                pt->reconciling = false;
                /* Let go of meanwhile (the topic is gone, the lease
                 * fenced): the target may have changed since.  Asked
                 * again if the flow still copies the topic. */
                if (j->gen != pt->recon_gen || pt->assigned != j->release ||
                    (j->release && !pt->held)) {
                        again = true;
                        free(j);
                        continue;
                }
                flow_recon_apply(f, pt, &j->ans);
                flow_part_start(f, pt, j->ans.next);
                if (f->owner && !j->release)
                        takeover_noted(f, pt, j->ans.next, j->ans.txn_wait_ms);
                if (j->release)
                        release_noted(f, pt, j->ans.next);
                rd_kafka_topic_partition_list_add(j->release ? rel : l,
                                                  tt->topic, pt->partition)
                    ->offset = j->ans.fetch_from;
                free(j);
        }
        assign_start(f, l, none);
        release_start(f, rel);
        /* (flow_assign_new() passes over what is assigned or being
         * reconciled.) */
        for (size_t k = 0; again && !f->lease_wait && k < f->ntopics; k++)
                if (f->topics[k]->active)
                        flow_assign_new(f, f->topics[k]);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_topic_partition_list_destroy(rel);
        rd_kafka_topic_partition_list_destroy(none);
}

static int unassign_where(aagw_flow_t *f, struct ttrack *tt, int drain_ms,
                          bool lost_only);

int flow_unassign(aagw_flow_t *f, struct ttrack *tt, int drain_ms) {
        return unassign_where(f, tt, drain_ms, false);
}

int flow_unassign_lost(aagw_flow_t *f, int drain_ms) {
        return unassign_where(f, NULL, drain_ms, true);
}

static int unassign_where(aagw_flow_t *f, struct ttrack *tt, int drain_ms,
                          bool lost_only) {
        rd_kafka_topic_partition_list_t *l;

        flow_drain(f, drain_ms);
        if (atomic_load(&f->inflight) > 0) {
                /* (Stopping: flow_finish() drains and stores once more.) */
                if (!atomic_load(&f->ctl.stop))
                        flow_fail(f, "%" PRId64 " records still "
                                     "unacknowledged after %d ms: cannot "
                                     "let go of %s's partitions",
                                  atomic_load(&f->inflight), drain_ms,
                                  tt ? tt->topic : "the topics");
                return -1;
        }
        flow_save_positions(f, true);
        l = rd_kafka_topic_partition_list_new(16);
        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *t = f->topics[i];
                if (tt && t != tt)
                        continue;
                for (int32_t p = 0; p < t->partition_cnt; p++) {
                        struct ptrack *pt = t->parts[p];
                        if (lost_only && flow_owned(f, t, p))
                                continue;
                        /* What the reconciler finds for it now is of
                         * before (flow_reconciled()). */
                        if (pt && pt->reconciling)
                                pt->recon_gen++;
                        if (!pt || !pt->assigned)
                                continue;
                        flow_part_mark(pt, false, false);
                        atomic_fetch_sub(&f->nparts_assigned, 1);
                        rd_kafka_topic_partition_list_add(l, t->topic, p);
                }
        }
        pthread_mutex_unlock(&f->ctl.lock);
        if (l->cnt) {
                rd_kafka_error_t *e = flow_fx_apply(f, FX_UNASSIGN, l, 0);
                if (e) {
                        aagw_log(AAGW_LOG_WARN, "FLOW", "%s: unassign: %s",
                                 f->name, rd_kafka_error_string(e));
                        rd_kafka_error_destroy(e);
                }
        }
        rd_kafka_topic_partition_list_destroy(l);
        return 0;
}
