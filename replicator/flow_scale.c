/*
 * replicator/flow_scale.c: a flow shared by the processes of a site
 * (scale_out.enabled): ownership of work partitions through owner.c, the
 * transactions that copy the owned source partitions, takeover of a
 * partition another member had, and the refused-record set.
 */
#include "flow_int.h"

/* ---------------------------------------------------------- SCALE-OUT --- */

/*
 * With scale_out enabled, the processes of one site share this flow: a
 * source partition (t, s) belongs to work partition (XXH32(t) + s) % W of
 * the work topic aagw.<gw>.<source>-<target>.work at the TARGET, and the
 * owners' group (owner.c) gives each work partition to one process.  The
 * copies of the owned partitions go into transactions of the owner's
 * producer (transactional.id aagw.<gw>.<source>-<target>.<member>), each
 * committed with the offsets of the owned work partitions, which the
 * group coordinator refuses from a member the group has moved on from: a
 * zombie's copies stay aborted, invisible to read_committed readers.
 * Positions (RocksDB, the group commit, offset-syncs) move only after a
 * commit (c_next, c_out); an aborted or fenced transaction drops every
 * partition, and those still owned are reconciled again against what the
 * target holds read_committed (flow_stable_end(), flow_reconcile()).  No identity
 * lease: the owners' group is the identity.
 *
 * A record the target refuses for good (too large for the copy's
 * max.message.bytes, invalid: replicator_refused_for_good()) takes its
 * transaction with it, and the redo would meet it again.  So the abort
 * remembers it (refused.c) and the redo writes its dead-letter copy
 * (flow_produce_dlq(), the same topic and headers as in single-process mode)
 * in its place, inside the transaction that moves past it; the copy's
 * other records go on.  The broker refuses a batch, not a record: every
 * record librdkafka had batched with the culprit comes back refused too.
 * So a refusal first makes a record a suspect, which the redo sends
 * alone (nothing else of the flow in flight, its answer awaited): refused
 * alone, it is refused for good (the next redo dead-letters it);
 * acknowledged, it is forgotten.  That costs a second abort per refused
 * batch, and a round trip per suspect, once.  A record over the
 * producer's own message.max.bytes is refused by producev() before it is
 * sent: dead-lettered at once, no abort.  Dead-lettered records and
 * produce errors are counted when their transaction commits.  A refused
 * dead-letter copy (too large) is remembered the same way and goes
 * without the record next time (flow_produce_dlq_stub()), not sent alone
 * first.
 */

/* A record of the open transaction failed (its delivery report): the
 * transaction is aborted and redone (flow_scale_poll()).  Timeouts, fencing
 * and the like the redo gets past; a refusal for good is remembered, see
 * above. */
void flow_scale_failed(aagw_flow_t *f, struct token *tok,
                       const rd_kafka_message_t *m) {
        struct ptrack      *pt = tok->pt;
        struct slot        *sl = &pt->ring[tok->seq & (pt->cap - 1)];
        struct refused_rec *rr = NULL;

        if (!replicator_refused_for_good(m->err) ||
            atomic_load(&f->ctl.stop)) {
                if (!f->tx.broken && m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": delivery "
                                 "to %s failed: %s; aborting the "
                                 "transaction",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, rd_kafka_topic_name(m->rkt),
                                 rd_kafka_err2str(m->err));
                f->tx.broken = true;
                return;
        }
        if (tok->dlq && (tok->stub || !flow_too_large(m->err))) {
                /* As in single-process mode: nowhere left to put it. */
                flow_fail(f,
                          "%s [%d] offset %" PRId64
                          ": dead-letter delivery failed: %s",
                          pt->tt->topic, (int)pt->partition, sl->src_off,
                          rd_kafka_err2str(m->err));
                return;
        }
        char what[AAGW_ALIAS_MAX + 128];
        snprintf(what, sizeof(what), "%s refused it (%s)", f->target,
                 rd_kafka_err2str(m->err));
        if (!(rr = stage_txn_refused(&f->tx, pt->tt->topic, pt->partition,
                                     sl->src_off, what)))
                return;
        if (tok->dlq) {
                /* Its dead-letter copy is too large: the redo sends one
                 * without the record. */
                rr->dlq_err = m->err;
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: the dead-letter copy of %s [%d] offset %" PRId64
                         " is too large for %s (%s); aborting the "
                         "transaction, the redo dead-letters it without its "
                         "key, value and headers",
                         f->name, pt->tt->topic, (int)pt->partition,
                         sl->src_off, f->dlq_topic, rd_kafka_err2str(m->err));
        } else if (tok->alone && !rr->confirmed) {
                rr->confirmed = true;
                rr->err       = m->err;
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d] offset %" PRId64 ": %s refuses its copy "
                         "for good (%s); the transaction is redone with its "
                         "dead-letter copy in %s instead",
                         f->name, pt->tt->topic, (int)pt->partition,
                         sl->src_off, f->target, rd_kafka_err2str(m->err),
                         f->dlq_topic);
        } else if (!rr->confirmed) {
                rr->err = m->err;
                if (!f->tx.broken)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": %s refused "
                                 "it with its batch (%s); aborting the "
                                 "transaction; the redo sends each record "
                                 "of the batch alone to find the one refused "
                                 "for good",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, f->target,
                                 rd_kafka_err2str(m->err));
        }
        f->tx.broken = true;
}

/* refused_each() at a commit: what it dead-lettered is done with, as is
 * anything before the committed position (a suspect copied with others
 * after its wait to be alone ran out); and a source partition no longer
 * copied here is another member's to find out. */
static bool refused_keep(void *arg, struct refused_rec *r) {
        aagw_flow_t   *f  = arg;
        struct ttrack *tt = flow_topic_find(f, r->topic);
        struct ptrack *pt = tt && r->partition < tt->partition_cnt
                                ? tt->parts[r->partition]
                                : NULL;

        return !r->resolved && pt && pt->assigned && !pt->held &&
               flow_owned(f, tt, r->partition) && r->offset >= pt->c_next;
}

/* refused_each() at an abort: what it dead-lettered goes again. */
static bool refused_unmark(void *arg, struct refused_rec *r) {
        (void)arg;
        r->resolved = false;
        return true;
}

/* The open transaction is gone: its counts and marks with it. */
static void scale_forget(aagw_flow_t *f) {
        f->txn_dlq = f->txn_errs = 0;
        if (refused_count(f->tx.refused))
                refused_each(f->tx.refused, refused_unmark, NULL);
}

/* owner_conf.on_gained / on_lost: called inside owner_poll() and
 * owner_commit(); the flow acts once they returned (flow_scale_poll()). */
static void scale_gained(void *opaque,
                         const rd_kafka_topic_partition_list_t *parts) {
        aagw_flow_t *f = opaque;

        (void)parts;
        f->gained = true;
        INC(f->rebalances);
        atomic_store(&f->owned_work, owner_partitions(f->owner)->cnt);
        atomic_store(&f->leads_mm2, owner_owned(f->owner, 0));
}

static void scale_lost(void *opaque,
                       const rd_kafka_topic_partition_list_t *parts) {
        aagw_flow_t *f = opaque;

        (void)parts;
        f->lost    = true;
        f->lost_ms = aagw_mono_ms();
        atomic_store(&f->owned_work, owner_partitions(f->owner)->cnt);
        atomic_store(&f->leads_mm2, owner_owned(f->owner, 0));
}

/* owner.c, cooperative: the assignment is about to change (the owned
 * set is still this member's in the generation now): commit what the
 * open transaction copied, so that the change finds none open and only
 * the partitions that move stop. */
static void scale_revoking(void                                  *opaque,
                           const rd_kafka_topic_partition_list_t *parts) {
        aagw_flow_t *f = opaque;

        (void)parts;
        if (f->tx.open && !f->tx.need_renew)
                flow_scale_commit(f);
}

/* Give up the open transaction (aborted: its copies are never visible)
 * and every source partition with it, at once: a lost work partition is
 * no longer this process's to write, and the partitions still owned
 * resume from what the target holds, found anew (scale_gain()). */
void flow_scale_drop(aagw_flow_t *f) {
        char why[512];

        f->lost = false;
        if (f->tx.open) {
                /* What was sent is let come back first (nothing new is
                 * sent): librdkafka 2.0.2 aborting with records in flight
                 * had EndTxn refused INVALID_TXN_STATE, a fatal error,
                 * in one run in three of kafka-scale_flow. */
                flow_drain(f, DRAIN_MS);
                stage_txn_abort(&f->tx, why, sizeof(why));
        }
        f->txn_dirty = false;
        /* The purged records' reports, and the committed positions
         * stored. */
        int gone = flow_unassign(f, NULL, DRAIN_MS);
        scale_forget(f);
        if (gone)
                return;
        f->tx.broken = false;
        f->gained    = true;
}

/* Work partitions were lost.  Cooperative, with nothing open (the
 * rebalance had the open transaction committed first: scale_revoking();
 * a commit that failed dropped everything already): only the source
 * partitions of the lost work partitions stop, the rest copy on.
 * Otherwise everything goes (flow_scale_drop()). */
static void scale_lose(aagw_flow_t *f) {
        if (!f->conf.scale_out->cooperative || f->tx.open || f->tx.broken ||
            !owner_partitions(f->owner)->cnt) {
                flow_scale_drop(f);
                return;
        }
        f->lost    = false;
        int before = (int)atomic_load(&f->nparts_assigned);
        if (flow_unassign_lost(f, DRAIN_MS))
                return;
        aagw_log(AAGW_LOG_INFO, "FLOW",
                 "%s: member %s let go of %d source partitions (a "
                 "cooperative rebalance moved their work partitions); %d "
                 "go on",
                 f->name, f->conf.scale_out->member,
                 before - (int)atomic_load(&f->nparts_assigned),
                 (int)atomic_load(&f->nparts_assigned));
        f->lost_ms = 0;
}

/* Take the owned source partitions this process does not copy yet:
 * each reconciled against the target (flow_assign_new() logs where each
 * resumed and how long finding it took). */
static void scale_gain(aagw_flow_t *f) {
        int64_t t0 = aagw_mono_ms();
        char    parts[1024];

        f->gained = false;
        /* Eager: reconciled here, on the flow thread, all at once: the
         * rebalance stopped every partition of this member, so nothing
         * copies meanwhile, and the member's first transaction waits for
         * the previous owners' to end anyway.  Cooperative: the
         * partitions kept copy on meanwhile, so the gained ones go to the
         * reconciler, as a topic found later does (flow_recon_ask()). */
        bool inline_    = !f->conf.scale_out->cooperative;
        f->recon_inline = inline_;
        for (size_t i = 0; i < f->ntopics && !atomic_load(&f->ctl.stop); i++)
                if (f->topics[i]->active)
                        flow_assign_new(f, f->topics[i]);
        f->recon_inline = false;
        stage_parts_str(owner_partitions(f->owner), parts, sizeof(parts));
        int64_t now = aagw_mono_ms();
        aagw_log(AAGW_LOG_INFO, "FLOW",
                 "%s: member %s owns work partitions [%s] of %s: %d source "
                 "partitions copied, %s in %" PRId64 " ms%s",
                 f->name, f->conf.scale_out->member, parts, f->work_topic,
                 (int)atomic_load(&f->nparts_assigned),
                 inline_ ? "reconciled"
                         : "the gained ones handed to the "
                           "reconciler",
                 now - t0, f->lost_ms ? " after a rebalance" : "");
        if (f->lost_ms)
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: rebalance took %" PRId64 " ms from losing the "
                         "previous partitions to %s",
                         f->name, now - f->lost_ms,
                         atomic_load(&f->nparts_assigned)
                             ? "copying again"
                             : "owning none (other members copy)");
        f->lost_ms = 0;
        /* (A member may own no partition at all: it runs.) */
        if (atomic_load(&f->ctl.state) == AAGW_FLOW_STARTING)
                atomic_store(&f->ctl.state, AAGW_FLOW_RUNNING);
}

/* Commit the open transaction: its copies acknowledged first, then the
 * offsets of every owned work partition with the group's metadata (the
 * fence).  Only then the positions are final. */
void flow_scale_commit(aagw_flow_t *f) {
        char why[700];

        if (!f->tx.open)
                return;
        flow_drain(f, DRAIN_MS);
        if (atomic_load(&f->inflight) > 0 || !owner_partitions(f->owner)->cnt ||
            f->tx.broken) {
                INC(f->tx.aborted);
                flow_scale_drop(f);
                return;
        }
        switch (stage_txn_commit(&f->tx, NULL, why, sizeof(why))) {
        case AAGW_OWNER_OK:
                f->txn_dirty = false;
                ADD(f->dead_lettered, f->txn_dlq);
                ADD(f->produce_errors, f->txn_errs);
                f->txn_dlq = f->txn_errs = 0;
                for (size_t i = 0; i < f->ntopics; i++) {
                        struct ttrack *tt = f->topics[i];
                        for (int32_t p = 0; p < tt->partition_cnt; p++) {
                                struct ptrack *pt = tt->parts[p];
                                if (!pt || !pt->assigned || pt->held)
                                        continue;
                                pt->c_next = pt->next;
                                pt->c_out  = pt->out_next;
                                if (pt->next >= 0)
                                        flow_sync_point(f, pt, pt->next,
                                                        pt->out_next, false);
                        }
                }
                if (refused_count(f->tx.refused))
                        refused_each(f->tx.refused, refused_keep, f);
                break;
        case AAGW_OWNER_ABORTED:
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: member %s: %s; copying its partitions again "
                         "from what %s holds",
                         f->name, f->conf.scale_out->member, why, f->target);
                flow_scale_drop(f);
                break;
        case AAGW_OWNER_FENCED:
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: member %s fenced: %s; its copies since the "
                         "last commit stay invisible",
                         f->name, f->conf.scale_out->member, why);
                flow_scale_drop(f);
                break;
        case AAGW_OWNER_FATAL:
                break;
        }
}

/* Serve the ownership once per round of the stage loop: rebalances, the
 * commit when the transaction is old enough, a new transaction when
 * there are partitions to copy.  Returns whether records may be
 * consumed now (only into an open transaction). */
bool flow_scale_poll(aagw_flow_t *f) {
        char why[512];

        if (f->tx.need_renew)
                return false; /* flow_round() renews the producer first */

        if (owner_poll(f->owner, 0, why, sizeof(why))) {
                flow_fail(f, "member %s: owners' group %s: %s",
                          f->conf.scale_out->member, f->owners_group, why);
                return false;
        }
        if (f->tx.broken) {
                INC(f->tx.aborted);
                flow_scale_drop(f);
        }
        if (f->lost)
                scale_lose(f);
        if (f->gained && !atomic_load(&f->ctl.stop))
                scale_gain(f);
        if (f->tx.open && f->txn_dirty &&
            aagw_mono_ms() - f->tx.begun_ms >=
                f->conf.scale_out->commit_interval_ms)
                flow_scale_commit(f);
        if (f->lost)
                scale_lose(f);
        if (f->tx.open || atomic_load(&f->nparts_assigned) == 0 ||
            atomic_load(&f->ctl.stop))
                return f->tx.open;
        owner_result_t r = stage_txn_begin(&f->tx, why, sizeof(why));
        if (r == AAGW_OWNER_OK) {
                f->txn_dirty = false;
                return true;
        }
        if (r != AAGW_OWNER_FATAL)
                aagw_log(AAGW_LOG_WARN, "FLOW", "%s: member %s: %s",
                         f->name, f->conf.scale_out->member, why);
        return false;
}

/* The work topic (created with scale_out.work_partitions if missing; an
 * existing one keeps its count, which every member then uses) and the
 * owner.  Returns 0, or -1 with the flow failed. */
int flow_scale_start(aagw_flow_t *f) {
        const struct aagw_scale_out *so = f->conf.scale_out;
        char errstr[700];
        int  have = owner_work_topic(f->admin, f->work_topic,
                                     so->work_partitions, errstr,
                                     sizeof(errstr));

        if (have < 0) {
                flow_fail(f, "member %s: the owners' work topic at %s: %s",
                          so->member, f->target, errstr);
                return -1;
        }
        if (have != so->work_partitions)
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: work topic %s has %d partitions, not "
                         "scale_out.work_partitions %d: using %d (every "
                         "member must use the same count)",
                         f->name, f->work_topic, have, so->work_partitions,
                         have);
        f->work_cnt = have;
        struct owner_conf oc = {.bootstraps         = f->conf.target_bootstraps,
                                .props              = f->conf.target_props,
                                .prop_cnt           = f->conf.target_prop_cnt,
                                .group              = f->owners_group,
                                .topic              = f->work_topic,
                                .transactional_id   = f->txn_id,
                                .session_timeout_ms = so->session_timeout_ms,
                                .txn_timeout_ms     = so->txn_timeout_ms,
                                .on_gained          = scale_gained,
                                .on_lost            = scale_lost,
                                .on_revoking =
                                    so->cooperative ? scale_revoking : NULL,
                                .cooperative = so->cooperative,
                                .opaque      = f};
        if (stage_txn_init(&f->tx, &f->ctl, f->name, so->member)) {
                flow_fail(f, "member %s: out of memory", so->member);
                return -1;
        }
        if (!(f->owner = stage_txn_join(&f->tx, &oc, &f->delivery)))
                return -1;
        f->out = owner_producer(f->owner);
        return 0;
}

/* stage_txn_renew()'s steps for a flow: let go of every partition (the
 * purged records' reports served, the committed positions stored) and
 * the topic handles on the old producer; then handles on the new one,
 * and the partitions still owned reconciled again (scale_gain()). */
static int renew_detach(void *arg) {
        aagw_flow_t *f = arg;

        flow_drain(f, DRAIN_MS);
        if (flow_unassign(f, NULL, DRAIN_MS))
                return -1;
        for (size_t i = 0; i < f->ntopics; i++)
                if (f->topics[i]->rkt) {
                        rd_kafka_topic_destroy(f->topics[i]->rkt);
                        f->topics[i]->rkt = NULL;
                }
        if (f->dlq_rkt) {
                rd_kafka_topic_destroy(f->dlq_rkt);
                f->dlq_rkt = NULL;
        }
        f->out = f->producer; /* no handle of the old one is left */
        return 0;
}

static int renew_attach(void *arg, rd_kafka_t *producer) {
        aagw_flow_t *f = arg;

        f->out = producer;
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (tt->active &&
                    !(tt->rkt = rd_kafka_topic_new(f->out, tt->remote, NULL))) {
                        flow_fail(f, "%s: a topic handle: out of memory",
                                  tt->remote);
                        return -1;
                }
        }
        f->txn_dirty = false;
        f->gained    = true;
        scale_forget(f);
        return 0;
}

/* A new transactional producer after stage_txn_fatal().  The caller
 * holds no queue of the old producer.  Returns 0, or -1 (the flow
 * failed). */
int flow_scale_renew(aagw_flow_t *f) {
        return stage_txn_renew(&f->tx, f->out, renew_detach, renew_attach, f);
}

/* The stage loop's side of it (stage_commit). */

static int scale_start(void *arg) {
        /* Before the first topic handle is made on its producer. */
        return flow_scale_start(arg);
}

static int scale_round(void *arg) {
        return flow_scale_poll(arg);
}

static int scale_renew(void *arg) {
        return flow_scale_renew(arg);
}

/* What was copied counts once committed; the owner leaves the group in
 * aagw_flow_destroy(). */
static void scale_finish(void *arg) {
        aagw_flow_t *f = arg;

        if (atomic_load(&f->ctl.state) != AAGW_FLOW_FAILED)
                flow_scale_commit(f);
}

const struct stage_commit flow_commit_scale = {.start  = scale_start,
                                               .round  = scale_round,
                                               .finish = scale_finish,
                                               .renew  = scale_renew};

bool flow_scaled(const aagw_flow_t *f) {
        return f->conf.scale_out && f->conf.scale_out->enabled;
}

bool flow_leads_mm2(const aagw_flow_t *f) {
        return !f->conf.scale_out || !f->conf.scale_out->enabled ||
               atomic_load(&((aagw_flow_t *)f)->leads_mm2);
}
