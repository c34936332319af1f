/*
 * replicator/unify_scale.c: a unify stage shared by the processes of a
 * site (scale_out.enabled): ownership of output partitions through
 * owner.c, the transactions that commit decisions with positions and
 * changelogs, refused records, and membership changes.
 */
#include "unify_int.h"

/* ---------------------------------------------------------- SCALE-OUT --- */

/*
 * With scale_out enabled, several processes of one site share this stage
 * (docs/deployment.md).
 *
 * Ownership: one owner (owner.c) per stage: group aagw.<gw>.<site>.unify
 * over the work topic aagw.<gw>.<site>.unify.work (W partitions, made
 * here if missing), transactional.id aagw.<gw>.<site>.unify.<member>.
 * Output partition p of every unified topic is this process's iff it
 * owns work partition p % W.
 *
 * Routing: with scale_out.route (the default) each input partition is
 * read by one process and its records routed into the site's route
 * topic by output partition (unify_route.c); the owner of output
 * partition p decides from route partition p.  Without it every process
 * reads every input partition, as the single-process stage does, and
 * decides only the records whose output partition (id hash, scoped
 * entity key hash: unify_out_part()) it owns, skipping the others: N
 * processes read the inputs N times.
 *
 * Positions are per (input partition i, output partition p): struct
 * uinput's opos/cpos.  An input partition is fetched from the smallest
 * position over the owned p, and a record for p at offset o is decided
 * iff p is owned and o >= opos[i][p] (unify_scale_filter()).  A p with no stored
 * position starts at the input's beginning, as a new input does.  With
 * the route, the route topic is one more input whose partition i holds
 * only records of p = i (its positions are opos[i][i]); the inputs'
 * positions stay as they were when the site last decided from them, and
 * a routed record below its input's position for p is skipped.
 *
 * Transactions: the output records and the changelog records of the
 * decisions (unify_scale_decided()) go out in the owner's transaction; at least
 * every scale_out.commit_interval (unify_scale_commit()) the positions that moved
 * go to the changelog and the transaction commits with the offsets of
 * every owned work partition (the fence, KIP-447).  Only then does the
 * decider store the decisions in RocksDB (the transaction filled one
 * epoch, stored by settle).  An aborted transaction drops them (ops->drop)
 * and the inputs go back to the committed positions (scale_redo()); a
 * fenced one, or partitions revoked by a rebalance, the same, and what
 * the group gives next is restored.  Before a rebalance takes the
 * partitions, the open transaction is committed (unify_scale_revoking(): the
 * assignment's metadata still fences then); a member the group already
 * moved on from finds its transaction refused and aborted.
 *
 * Changelogs (unify_scale_state_topic(), format in replicator_int.h), partitioned
 * as the output.  The state topic (compacted) holds the winners and
 * positions; the ids topic (dedup topics only) the ids, deleted by the
 * broker once they are older than unify.window and a margin, so that it
 * holds about one window of ids, not every id ever delivered.
 *
 * Restore (unify_scale_restore()): on gaining partitions, each newly owned output
 * partition's changelog partitions (ones it had before a clean
 * revocation, and that nobody wrote since, are kept: unify_scale_kept()) are read
 * from their beginning to their end, the state topic's first
 * (changelog_read(): read_committed, and the end waits for a transaction
 * a dead owner left open) and folded into the decider (ops->restore:
 * ids and winners, additive) and the positions; ids decided before the
 * window's start are skipped, as the decider would drop them.  A
 * partition whose changelog holds no position while its output holds
 * records was written by a single process (the site ran without
 * scale-out): its state is rebuilt from the output instead (unify_scale_seed()).
 * The local RocksDB is a cache: decisions reach it only after their
 * transaction committed.
 * The machinery for exactly once without transactions (the start-up
 * scan of the output, the replay set) is not used.
 */

#define SCALE_DRAIN_MS 10000

bool unify_scale_owns(const aagw_unify_t *u, int32_t p) {
        return u->owner && owner_owned(u->owner, p % u->work_parts);
}

bool unify_scale_owns_any(const aagw_unify_t *u, const struct utopic *ut) {
        for (int32_t p = 0; p < ut->out_parts; p++)
                if (unify_scale_owns(u, p))
                        return true;
        return false;
}

/* Room in 'ui''s position tables for all its partitions (new: -1). */
int unify_opos_fit(const struct utopic *ut, struct uinput *ui) {
        if (ui->opos_parts >= ui->nparts)
                return 0;
        size_t   n = (size_t)ui->nparts * (size_t)ut->out_parts;
        int64_t *o = realloc(ui->opos, n * sizeof(*o));
        if (!o)
                return -1;
        ui->opos   = o;
        int64_t *c = realloc(ui->cpos, n * sizeof(*c));
        if (!c)
                return -1;
        ui->cpos = c;
        int64_t *sp = realloc(ui->spos, n * sizeof(*sp));
        if (!sp)
                return -1;
        ui->spos = sp;
        for (size_t k = (size_t)ui->opos_parts * (size_t)ut->out_parts; k < n;
             k++)
                o[k] = c[k] = sp[k] = -1;
        ui->opos_parts = ui->nparts;
        return 0;
}

/* Every input of 'ut' fetched from the smallest position of the owned
 * output partitions (-1: the beginning). */
void unify_scale_positions(aagw_unify_t *u, struct utopic *ut) {
        for (size_t k = 0; k < ut->nin; k++) {
                struct uinput *ui = ut->in[k];
                if (unify_opos_fit(ut, ui)) {
                        ufail(u, "out of memory");
                        return;
                }
                for (int32_t i = 0; i < ui->nparts; i++) {
                        if (u->route) {
                                /* A route partition from its own position;
                                 * an input from its router's committed
                                 * one (read back first if unknown:
                                 * unify_route_fetch()). */
                                int64_t v =
                                    ui->route
                                        ? ui->opos[(size_t)i * ut->out_parts +
                                                   i]
                                    : i < ui->rcpos_parts ? ui->rcpos[i]
                                                          : ROUTE_UNKNOWN;
                                ui->next[i]  = v >= 0 ? v : -1;
                                ui->dirty[i] = false;
                                continue;
                        }
                        int64_t lo = INT64_MAX;
                        for (int32_t p = 0; p < ut->out_parts; p++) {
                                int64_t v =
                                    ui->opos[(size_t)i * ut->out_parts + p];
                                if (unify_scale_owns(u, p) && v < lo)
                                        lo = v;
                        }
                        ui->next[i]  = lo == INT64_MAX ? -1 : lo;
                        ui->dirty[i] = false;
                }
        }
}

/* "clicks.unified 0,3; views.unified 1" and the count, for /status. */
void unify_scale_publish(aagw_unify_t *u) {
        char    buf[sizeof(u->owned)];
        size_t  n   = 0;
        int32_t cnt = 0;

        buf[0] = '\0';
        for (size_t t = 0; t < u->ntopics && n < sizeof(buf); t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s ",
                                      n ? "; " : "", ut->out);
                bool any = false;
                for (int32_t p = 0; p < ut->out_parts && n < sizeof(buf); p++)
                        if (unify_scale_owns(u, p)) {
                                n += (size_t)snprintf(buf + n,
                                                      sizeof(buf) - n, "%s%d",
                                                      any ? "," : "", (int)p);
                                any = true;
                                cnt++;
                        }
                if (!any && n < sizeof(buf))
                        n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                                              "none");
        }
        pthread_mutex_lock(&u->owned_lock);
        memcpy(u->owned, buf, sizeof(buf));
        pthread_mutex_unlock(&u->owned_lock);
        atomic_store(&u->owned_parts, cnt);
}

/* Wait for the delivery report of every record produced (after a commit
 * or an abort), so that none reaches an epoch the decider reused.
 * Returns 0, or -1 (the stage fails). */
static int scale_drain(aagw_unify_t *u) {
        int64_t deadline = aagw_mono_ms() + SCALE_DRAIN_MS;

        while (atomic_load(&u->inflight) > 0 && aagw_mono_ms() < deadline)
                rd_kafka_poll(u->out_producer, 10);
        if (atomic_load(&u->inflight) > 0) {
                ufail(u, "member %s: %" PRId64 " records without a delivery "
                         "report %d s after their transaction ended",
                      u->conf.scale_out->member, atomic_load(&u->inflight),
                      SCALE_DRAIN_MS / 1000);
                return -1;
        }
        return 0;
}

/* Unassign the inputs and drop what their queue holds (records fetched
 * from positions no longer wanted), then assign them afresh. */
void unify_scale_reassign(aagw_unify_t *u) {
        rd_kafka_message_t *msgs[256];
        ssize_t             n;

        rd_kafka_assign(u->consumer, NULL);
        while ((n = rd_kafka_consume_batch_queue(u->cq, 0, msgs, 256)) > 0)
                for (ssize_t i = 0; i < n; i++)
                        rd_kafka_message_destroy(msgs[i]);
        unify_reassign(u);
}

/* The open transaction is gone (aborted, fenced): forget its decisions
 * and go back to the committed positions. */
static void scale_redo(aagw_unify_t *u) {
        u->tx.open   = false;
        u->txn_stubs = 0;
        if (refused_count(u->tx.refused))
                refused_each(u->tx.refused, unify_scale_refused_keep, NULL);
        if (scale_drain(u))
                return;
        u->tx.broken = false;
        if (u->ops->drop(u->st)) {
                ufail(u, "out of memory");
                return;
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        if (unify_opos_fit(ut, ui)) {
                                ufail(u, "out of memory");
                                return;
                        }
                        memcpy(ui->opos, ui->cpos,
                               (size_t)ui->opos_parts * ut->out_parts *
                                   sizeof(*ui->opos));
                }
                unify_scale_positions(u, ut);
        }
        unify_scale_reassign(u);
}

/* What a transaction step's result means for the stage. */
static void scale_result(aagw_unify_t *u, owner_result_t r, const char *err) {
        const char *member = u->conf.scale_out->member;

        switch (r) {
        case AAGW_OWNER_OK:
                return;
        case AAGW_OWNER_ABORTED:
                INC(u->tx.aborted);
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: %s; redoing from the last "
                         "committed positions",
                         u->site, member, err);
                scale_redo(u);
                return;
        case AAGW_OWNER_FENCED:
                INC(u->tx.fenced);
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s fenced: %s; nothing of its "
                         "transaction (%" PRId64 " output records) is "
                         "visible, what the group gives it next is restored",
                         u->site, member, err, u->txn_records);
                scale_redo(u);
                return;
        case AAGW_OWNER_FATAL:
                stage_txn_fatal(&u->tx, err);
                return;
        }
}

int unify_scale_begin(aagw_unify_t *u) {
        char err[512];

        if (u->tx.open)
                return 0;
        owner_result_t r = stage_txn_begin(&u->tx, err, sizeof(err));
        if (r == AAGW_OWNER_OK) {
                u->txn_records = 0;
                return 0;
        }
        if (r != AAGW_OWNER_FATAL)
                scale_result(u, r, err);
        return -1;
}

/* The transactional producer refused a record: the transaction is in
 * an abortable state (librdkafka 2.0.2 after an abort that purged
 * records: "skipped sequence numbers ... requires epoch bump"), and only
 * an abort gets it going again.  The next unify_scale_commit() aborts and redoes
 * (unify_scale_poll() runs it at once). */
void unify_scale_refused(aagw_unify_t *u, const char *topic, int32_t p,
                      rd_kafka_resp_err_t err) {
        if (!u->tx.broken)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: unify_produce to %s [%d]: %s; the "
                         "transaction is aborted and redone",
                         u->site, u->conf.scale_out->member, topic, (int)p,
                         rd_kafka_err2str(err));
        u->tx.broken = true;
}

/*
 * A record too large for the output (the topic's max.message.bytes)
 * makes its transaction abortable, and the redo decides it again: sent
 * again, it would be refused at every redo.  So each refusal for good
 * (replicator_refused_for_good()) is remembered by the record's input
 * coordinates (refused.c), and the redo writes its stand-in
 * (unify_produce_stub(), as single-process mode does) in its place: the
 * decision stands (the changelog says delivered, ops->acked on the
 * stand-in's acknowledgement), the output holds one record for it.
 * The broker refuses a batch, not a record, so the refused batch's
 * records are suspects first: the redo sends each alone (no other
 * output record in flight, its answer awaited).  Refused alone, it is
 * too large for good (the next redo writes its stand-in); acknowledged,
 * it is forgotten.  A refusal other than the size, or of a stand-in,
 * fails the stage, as in single-process mode.  A record over the
 * producer's own message.max.bytes is refused by producev() before it is
 * sent: its stand-in goes at once, no abort.  Stand-ins are counted
 * (oversized) when their transaction commits.
 */

void unify_scale_refusal(aagw_unify_t *u, struct token *tok,
                      const rd_kafka_message_t *m) {
        const rd_kafka_message_t *src = tok->base.src;
        const char               *in  = rd_kafka_topic_name(src->rkt);
        struct refused_rec       *rr;

        if (tok->stub) {
                ufail(u, "delivery to %s [%d] failed: %s", tok->ut->out,
                      (int)m->partition, rd_kafka_err2str(m->err));
                return;
        }
        char what[AAGW_TOPIC_MAX + 128];
        snprintf(what, sizeof(what), "%s [%d] refused its unified copy (%s)",
                 tok->ut->out, (int)m->partition, rd_kafka_err2str(m->err));
        if (!(rr = stage_txn_refused(&u->tx, in, src->partition, src->offset,
                                     what)))
                return;
        rr->out_part = m->partition;
        if (rr->confirmed)
                return;
        rr->err = m->err;
        if (tok->alone && !unify_too_large(m->err)) {
                ufail(u, "delivery to %s [%d] failed: %s", tok->ut->out,
                      (int)m->partition, rd_kafka_err2str(m->err));
        } else if (tok->alone) {
                rr->confirmed = true;
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: %s [%d] offset %" PRId64
                         ": its unified copy is too large for %s [%d] (%s); "
                         "the transaction is redone with its stand-in "
                         "instead",
                         u->site, u->conf.scale_out->member, in,
                         (int)src->partition, src->offset, tok->ut->out,
                         (int)m->partition, rd_kafka_err2str(m->err));
        } else if (!u->tx.broken) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: %s [%d] refused a batch (%s; "
                         "%s [%d] offset %" PRId64 " among it); the "
                         "transaction is aborted, and the redo sends each "
                         "record of the batch alone to find the one "
                         "refused for good",
                         u->site, u->conf.scale_out->member, tok->ut->out,
                         (int)m->partition, rd_kafka_err2str(m->err), in,
                         (int)src->partition, src->offset);
        }
}

/* Serve delivery reports until at most 'until' output records are in
 * flight (STAGE_ALONE_MS at most). */
void unify_scale_settle(aagw_unify_t *u, int64_t until) {
        stage_settle(u->out_producer, &u->inflight, until, STAGE_ALONE_MS,
                     &u->ctl.stop, NULL);
}

/* refused_each() at a commit: its stand-ins are in; an output partition
 * no longer owned is another member's to find out.  At an abort (arg
 * NULL): its stand-ins go again. */
bool unify_scale_refused_keep(void *arg, struct refused_rec *r) {
        aagw_unify_t *u = arg;

        if (!u) {
                r->resolved = false;
                return true;
        }
        return !r->resolved && unify_scale_owns(u, r->out_part);
}

/* -1 if the stage failed, else 0: what a step that could not go on
 * returns when the stage itself goes on (a broken transaction is aborted
 * and redone, a stop ends the loop). */
static int scale_failed(aagw_unify_t *u) {
        return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
}

/* Produce one record of the stage's own into the open transaction. */
static int scale_produce(aagw_unify_t *u, rd_kafka_topic_t *rkt,
                         const char *topic, int32_t p, const void *key,
                         size_t klen, const void *val, size_t vlen) {
        rd_kafka_resp_err_t err;

        while (
            (err = rd_kafka_producev(
                 u->out_producer, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(p),
                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                 RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)val, vlen),
                 RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
            !atomic_load(&u->ctl.stop))
                rd_kafka_poll(u->out_producer, 10);
        if (err) {
                if (!atomic_load(&u->ctl.stop))
                        unify_scale_refused(u, topic, p, err);
                return -1;
        }
        return 0;
}

/* Produce one changelog record into the open transaction: an id into
 * the ids topic, the others into the state topic. */
int unify_scale_state(aagw_unify_t *u, struct utopic *ut, int32_t p,
                      const struct changelog_rec *c) {
        uint8_t key[CHANGELOG_KEY_MAX], val[CHANGELOG_VAL_MAX];
        size_t  klen, vlen;
        bool    id = c->kind == CHANGELOG_ID;

        changelog_encode(c, key, &klen, val, &vlen);
        return scale_produce(u, id ? ut->ids_rkt : ut->state_rkt,
                             id ? ut->ids : ut->state, p, key, klen, val, vlen);
}

/* An audit entry goes to the partition of its decision's changelog
 * records (a rejected record's to 0), keyed by the record's id: one id's
 * (or entity key's) entries are in one partition, in the order decided,
 * whichever input partition each copy came from. */
int unify_scale_audit(void *opaque, const struct aagw_unify_rec *r,
                      const void *entry, size_t len) {
        aagw_unify_t *u = opaque;

        if (r < u->recs || r >= u->recs + BATCH_MAX ||
            !u->items[u->ritem[r - u->recs]].ut) {
                ufail(u, "an audit entry of a record outside the batch");
                return -1;
        }
        struct utopic *ut = u->items[u->ritem[r - u->recs]].ut;
        int32_t        p  = r->rejected ? 0 : unify_out_part(ut, r);
        /* Refused: the transaction is broken and is aborted and redone,
         * decisions and entries with it; the decision itself stands
         * until then, as for a refused output record. */
        if (scale_produce(u, ut->audit_rkt, ut->audit, p, r->prov->id,
                          r->prov->id_len, entry, len))
                return scale_failed(u);
        return 0;
}

/* Keep only the records whose output partition this process owns, at
 * or past that partition's position.  Returns how many are left. */
size_t unify_scale_filter(aagw_unify_t *u, size_t nr) {
        size_t kept = 0;

        for (size_t k = 0; k < nr; k++) {
                struct aagw_unify_rec *r  = &u->recs[k];
                struct item           *it = &u->items[u->ritem[k]];
                struct utopic         *ut = it->ut;
                /* A rejected record has no output partition: audited by
                 * the owner of partition 0. */
                int32_t p = r->rejected ? 0 : unify_out_part(ut, r);
                if (unify_opos_fit(ut, it->ui)) {
                        ufail(u, "out of memory");
                        return 0;
                }
                /* Read at (its route partition, its offset there) if
                 * routed, else as r says. */
                int32_t i   = it->ui->route ? it->m->partition : r->partition;
                int64_t off = it->ui->route ? it->m->offset : r->offset;
                if (it->ui->route && i != p) {
                        /* Routed by a count of partitions other than
                         * the output's now: deciding it here would
                         * break the ownership of its id. */
                        ufail(u,
                              "%s [%d] offset %" PRId64 " (%s [%d] offset "
                              "%" PRId64 ") belongs to %s [%d]: the route "
                              "topic and the unified topic disagree on "
                              "their partitions",
                              it->ui->topic, (int)i, off, r->topic,
                              (int)r->partition, r->offset, ut->out, (int)p);
                        return 0;
                }
                if (!ut->restored || !unify_scale_owns(u, p) ||
                    off < it->ui->opos[(size_t)i * ut->out_parts + p]) {
                        it->state = 1;
                        continue;
                }
                struct uinput *in =
                    it->ui->route ? unify_input_of(ut, r->topic) : NULL;
                if (in && r->partition < in->opos_parts &&
                    r->offset <
                        in->opos[(size_t)r->partition * ut->out_parts + p]) {
                        /* Decided before the site used the route (its
                         * input position for p is past it). */
                        it->state = 1;
                        continue;
                }
                if (kept != k) {
                        u->recs[kept]  = *r;
                        u->ritem[kept] = u->ritem[k];
                }
                kept++;
        }
        return kept;
}

/* The changelog record of an accepted decision, into the transaction. */
int unify_scale_decided(aagw_unify_t *u, struct item *it,
                     const struct aagw_unify_rec *r, int64_t now) {
        struct changelog_rec c;

        c.kind    = r->mode == AAGW_UNIFY_LWW ? CHANGELOG_WIN : CHANGELOG_ID;
        memcpy(c.key, r->key, 16);
        c.hlc     = r->prov->hlc;
        c.time_ms = now;
        copy_str(c.origin, sizeof(c.origin), r->prov->origin);
        if (c.kind == CHANGELOG_ID) {
                copy_str(c.topic, sizeof(c.topic), r->topic);
                c.partition = r->partition;
                c.offset    = r->offset;
        } else {
                c.tombstone = r->tombstone;
                c.id_len    = r->prov->id_len;
                memcpy(c.id, r->prov->id, r->prov->id_len);
                c.id[r->prov->id_len] = '\0';
        }
        return unify_scale_state(u, it->ut, unify_out_part(it->ut, r), &c);
}

/* Where input partition 'i' of 'ui' stands for the changelog.  A route
 * partition not read from yet stands at 0: its position is written all
 * the same, once, because a changelog partition without any position
 * means a site that ran without scale-out (unify_scale_seed()), and a
 * route partition may get no record at all (a router owning every
 * output partition routes nothing). */
static int64_t scale_next(const struct uinput *ui, int32_t i) {
        return ui->route && ui->next[i] < 0 ? 0 : ui->next[i];
}

/* Commit the open transaction (opening one if positions moved): the
 * positions that moved go to the changelog first.  Returns 0, or -1 if
 * the stage failed. */
int unify_scale_commit(aagw_unify_t *u) {
        struct changelog_rec c;
        char                 err[512];
        bool                 moved = false;

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        if (unify_opos_fit(ut, ui)) {
                                ufail(u, "out of memory");
                                return -1;
                        }
                        for (int32_t i = 0; i < ui->nparts && !moved; i++)
                                for (int32_t p = 0; p < ut->out_parts; p++) {
                                        size_t  x = (size_t)i * ut->out_parts + p;
                                        if (u->route && (!ui->route || i != p))
                                                continue;
                                        if (unify_scale_owns(u, p) &&
                                            scale_next(ui, i) >= 0 &&
                                            scale_next(ui, i) > ui->cpos[x])
                                                moved = true;
                                }
                }
        }
        if (u->tx.broken) {
                /* A record went wrong in it (unify_on_delivery(),
                 * unify_scale_refused()). */
                if (stage_txn_abort(&u->tx, err, sizeof(err)) == AAGW_OWNER_OK)
                        scale_result(u, AAGW_OWNER_ABORTED,
                                  "a record of the transaction failed; "
                                  "transaction aborted");
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        }
        if (!moved && u->route)
                moved = unify_route_moved(u);
        if (!moved && !u->tx.open)
                return 0;
        if (unify_scale_begin(u))
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        c.kind = CHANGELOG_POS;
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        copy_str(c.topic, sizeof(c.topic), ui->topic);
                        for (int32_t i = 0; i < ui->nparts; i++)
                                for (int32_t p = 0; p < ut->out_parts; p++) {
                                        size_t x = (size_t)i * ut->out_parts + p;
                                        /* (Route: an input's positions are
                                         * its router's, committed as the
                                         * group's offsets.) */
                                        if (u->route && (!ui->route || i != p))
                                                continue;
                                        int64_t nx = scale_next(ui, i);
                                        if (!unify_scale_owns(u, p) || nx < 0 ||
                                            nx <= ui->cpos[x])
                                                continue;
                                        if (nx > ui->opos[x])
                                                ui->opos[x] = nx;
                                        c.partition = i;
                                        c.offset    = ui->opos[x];
                                        /* Refused (the transaction is
                                         * broken: aborted and redone
                                         * below), or the stage stops. */
                                        if (unify_scale_state(u, ut, p, &c))
                                                return u->tx.broken
                                                           ? unify_scale_commit(
                                                                 u)
                                                           : scale_failed(u);
                                }
                }
        }
        rd_kafka_topic_partition_list_t *routed =
            u->route ? unify_route_positions(u) : NULL;
        if (!u->tx.broken && routed && unify_route_log(u, routed) &&
            !u->tx.broken) {
                rd_kafka_topic_partition_list_destroy(routed);
                return scale_failed(u);
        }
        if (u->tx.broken) {
                if (routed)
                        rd_kafka_topic_partition_list_destroy(routed);
                return unify_scale_commit(u); /* (a position refused) */
        }
        owner_result_t r = stage_txn_commit(&u->tx, routed, err, sizeof(err));
        if (routed)
                rd_kafka_topic_partition_list_destroy(routed);
        if (r != AAGW_OWNER_OK) {
                if (r != AAGW_OWNER_FATAL)
                        scale_result(u, r, err);
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        }
        /* Its stand-ins are in the output. */
        ADD(u->oversized, u->txn_stubs);
        u->txn_stubs = 0;
        if (refused_count(u->tx.refused))
                refused_each(u->tx.refused, unify_scale_refused_keep, u);
        if (scale_drain(u))
                return -1;
        if (u->tx.broken) {
                /* Acknowledged without an offset inside a committed
                 * transaction (librdkafka's implicit acknowledgement,
                 * tests/realkafka/README.md): whether the record is in
                 * the output cannot be told; stop rather than guess. */
                ufail(u, "member %s: a record of a committed transaction "
                         "was acknowledged without an offset; restart the "
                         "process (its partitions are restored from the "
                         "changelog)",
                      u->conf.scale_out->member);
                return -1;
        }
        /* The transaction's one epoch: stored now. */
        unsigned n;
        int rc = u->ops->settle(u->st, NULL, 0, true, &n, err, sizeof(err));
        if (rc < 0) {
                ufail(u, "%s", err);
                return -1;
        }
        ADD(u->commits, n);
        if (!rc) {
                ufail(u, "the decider kept an epoch of a committed "
                         "transaction");
                return -1;
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++)
                        memcpy(ut->in[k]->cpos, ut->in[k]->opos,
                               (size_t)ut->in[k]->opos_parts * ut->out_parts *
                                   sizeof(int64_t));
        }
        if (u->route)
                unify_route_committed(u);
        return 0;
}

/* ------------------------------------------ SCALE-OUT: MEMBERSHIP --- */

/* owner.c: partitions gained (an assignment). */
static void scale_gained(void *opaque,
                      const rd_kafka_topic_partition_list_t *parts) {
        aagw_unify_t *u = opaque;

        INC(u->rebalances);
        if (!u->lost_ms)
                u->lost_ms = aagw_mono_ms();
        aagw_log(AAGW_LOG_INFO, "UNIFY",
                 "unify@%s: member %s gained %d work partitions of %s: "
                 "restoring their state",
                 u->site, u->conf.scale_out->member, parts->cnt, u->work);
        for (size_t t = 0; t < u->ntopics; t++)
                u->topics[t]->restored = false;
        unify_route_forget(u);
        u->need_restore = true;
        u->sb_reassign  = true;
}

/* owner.c: a rebalance is about to take every owned partition: commit
 * what the open transaction holds while the assignment still fences (a
 * member the group moved on from is refused: FENCED, and scale_lost()
 * runs). */
void unify_scale_revoking(void *opaque,
                       const rd_kafka_topic_partition_list_t *parts) {
        aagw_unify_t *u = opaque;
        (void)parts;
        u->in_owner_cb = true;
        if (u->tx.open && !u->tx.need_renew)
                unify_scale_commit(u);
        u->in_owner_cb = false;
        /* Committed, and still the owner (a fenced commit lost all). */
        if (!u->tx.open && !u->tx.need_renew && !atomic_load(&u->ctl.stop) &&
            owner_partitions(u->owner)->cnt)
                unify_scale_kept_note(u);
}

/* owner.c: partitions lost (revoked, or fenced): stop writing at once. */
static void scale_lost(void *opaque,
                    const rd_kafka_topic_partition_list_t *parts) {
        aagw_unify_t *u       = opaque;
        bool          open    = u->tx.open;
        int64_t       records = u->txn_records;
        char          err[512], what[96];

        if (!u->lost_ms)
                u->lost_ms = aagw_mono_ms();
        /* Only a clean revocation right after unify_scale_revoking() keeps. */
        if (!u->kept_pending)
                unify_scale_kept_clear(u);
        u->kept_pending = false;
        if (u->tx.open) {
                if (stage_txn_abort(&u->tx, err, sizeof(err)) !=
                    AAGW_OWNER_OK) {
                        /* Its records stay aborted (the coordinator ends
                         * the transaction); a new owner goes on. */
                        rd_kafka_purge(u->out_producer,
                                       RD_KAFKA_PURGE_F_QUEUE |
                                           RD_KAFKA_PURGE_F_INFLIGHT);
                }
        }
        if (open)
                snprintf(what, sizeof(what),
                         "its open transaction (%" PRId64
                         " output records) is aborted",
                         records);
        else
                snprintf(what, sizeof(what), "no transaction was open");
        aagw_log(AAGW_LOG_INFO, "UNIFY",
                 "unify@%s: member %s lost %d work partitions of %s: %s; %s",
                 u->site, u->conf.scale_out->member, parts->cnt, u->work, what,
                 owner_partitions(u->owner)->cnt
                     ? "the partitions it keeps go on once restored"
                     : "inputs wait for the next assignment");
        if (scale_drain(u))
                return;
        u->tx.broken = false;
        if (u->ops->drop(u->st)) {
                ufail(u, "out of memory");
                return;
        }
        for (size_t t = 0; t < u->ntopics; t++)
                u->topics[t]->restored = false;
        unify_route_forget(u);
        rd_kafka_assign(u->consumer, NULL);
        u->sb_reassign = true;
        /* A cooperative rebalance took some and left the rest: no
         * assignment follows for those, so restore them now (what the
         * revocation's commit noted is kept, not read again). */
        if (owner_partitions(u->owner)->cnt)
                u->need_restore = true;
        unify_scale_publish(u);
}

int unify_site_topic(aagw_unify_t *u, const char *kind, const char *out,
                     char *dst) {
        char name[3 * AAGW_TOPIC_MAX];

        if ((size_t)snprintf(name, sizeof(name), "aagw.%s.%s.%s.%s",
                             u->conf.gateway_id, u->site, kind,
                             out) >= AAGW_TOPIC_MAX + 1) {
                ufail(u,
                      "the %s topic of %s, %s, is longer than Kafka's %d "
                      "bytes for a topic name (shorten gateway.id or the "
                      "unified topic's name)",
                      kind, out, name, AAGW_TOPIC_MAX);
                return -1;
        }
        memcpy(dst, name, strlen(name) + 1);
        return 0;
}

/* The changelogs of unified topic 'out' into 'state' and 'ids', its audit
 * topic into 'audit' (each AAGW_TOPIC_MAX + 1 bytes).  Returns 0, or -1
 * (the stage failed: a name longer than Kafka allows). */
int unify_scale_changelog_names(aagw_unify_t *u, const char *out, char *state,
                                char *ids, char *audit) {
        return unify_site_topic(u, "state", out, state) ||
                       unify_site_topic(u, "ids", out, ids) ||
                       unify_site_topic(u, "audit", out, audit)
                   ? -1
                   : 0;
}

static int scale_ids_topic(aagw_unify_t *u, const char *out, const char *ids,
                           int32_t parts, const struct rd_kafka_metadata *md);
static int scale_audit_topic(aagw_unify_t *u, const char *out,
                             const char *audit, int32_t parts,
                             const struct rd_kafka_metadata *md);

/* Refuse a unified topic whose partition count differs from its
 * changelog's: it was grown (or made anew) under scale-out.  A record's
 * unified partition is its id's (or entity key's) hash modulo the count,
 * and each member restores only its own partitions' changelogs: with
 * the new count, an id delivered before would be looked for in a
 * partition whose changelog never held it, and delivered again.  The
 * way out keeps every id inside unify.window (docs/deployment.md,
 * "Growing a unified topic"). */
static void parts_mismatch(aagw_unify_t *u, const char *out, int32_t parts,
                           const char *changelog, int have) {
        ufail(u,
              "unified topic %s has %d partitions but its changelog %s "
              "has %d: the unified topic was grown while the site ran "
              "scale-out.  Ids are routed to unified partitions by "
              "their hash, and each process restores only its "
              "partitions' changelogs, so with the new count ids "
              "already delivered would be delivered again: not "
              "starting.  To go on with %d partitions: stop every "
              "process of site %s, delete the changelogs "
              "aagw.%s.%s.state.%s and aagw.%s.%s.ids.%s, the audit "
              "topic aagw.%s.%s.audit.%s and the route topic "
              "aagw.%s.%s.route.%s, run the site "
              "in one process (scale_out.enabled: false) for at least "
              "unify.window, then start scale-out again "
              "(docs/deployment.md, \"Growing a unified topic\")",
              out, (int)parts, changelog, have, (int)parts, u->site,
              u->conf.gateway_id, u->site, out, u->conf.gateway_id, u->site,
              out, u->conf.gateway_id, u->site, out, u->conf.gateway_id,
              u->site, out);
}

int unify_topic_create(aagw_unify_t *u, const char *what, const char *topic,
                       int32_t parts, const char *const *conf,
                       const char *how) {
        char err[1024];
        int  made = aagw_kafka_topic_create_conf(u->admin, topic, parts, conf,
                                                 30000, err, sizeof(err));

        if (made == -1) {
                ufail(u, "creating the %s %s at %s: %s", what, topic, u->site,
                      err);
                return -1;
        }
        if (made == -2) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: creating the %s %s: %s; trying again",
                         u->site, what, topic, err);
                return -1;
        }
        aagw_log(AAGW_LOG_INFO, "UNIFY", "unify@%s: %s %s: %d partitions, %s",
                 u->site, what, topic, (int)parts, how);
        return 0;
}

/* Make the changelog topics of unified topic 'out' if missing, both with
 * its 'parts' partitions: the state topic (compacted) and, for a dedup
 * topic ('dedup'), the ids topic (deleting after unify.window and a
 * margin: changelog_ids_conf()).
 * An ids topic that is there gets its settings checked and, if they
 * differ (unify.window changed), set again; if that is refused, the
 * stage goes on with a warning while no id inside the window can be
 * lost (or the settings cannot be read), and fails otherwise.
 * Admin API round trips only (up to 30 s each where the controller is
 * slow), no state of the stage's: the discovery helper's job, beside
 * the stage (unify_topics.c).  Returns 0, or -1 (tried again at the next
 * discovery; the stage fails if the cluster refused). */
int unify_scale_changelogs_make(aagw_unify_t *u, const char *out, int32_t parts,
                                bool dedup) {
        static const char *const conf[] = {"cleanup.policy", "compact", NULL};
        char state[AAGW_TOPIC_MAX + 1], ids[AAGW_TOPIC_MAX + 1],
            audit[AAGW_TOPIC_MAX + 1];
        const struct rd_kafka_metadata *md = NULL;
        int                             have, rc = -1;

        if (unify_scale_changelog_names(u, out, state, ids, audit))
                return -1;
        rd_kafka_resp_err_t e =
            aagw_kafka_metadata(u->admin, true, NULL, &md, 5000, &u->ctl.stop);
        if (e) {
                if (e != RD_KAFKA_RESP_ERR__INTR)
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: metadata for the changelogs of "
                                 "%s: %s; trying again",
                                 u->site, out, rd_kafka_err2str(e));
                return -1;
        }
        have = replicator_md_partitions(md, state);
        if (have < 0) {
                if (unify_topic_create(u, "changelog", state, parts, conf,
                                       "compacted"))
                        goto done;
        } else if (have != parts) {
                parts_mismatch(u, out, parts, state, have);
                goto done;
        }
        rc = (dedup ? scale_ids_topic(u, out, ids, parts, md) : 0) ||
             scale_audit_topic(u, out, audit, parts, md) ||
             (u->route && unify_route_make(u, out, parts, md));
done:
        rd_kafka_metadata_destroy(md);
        return rc;
}

/* The stage's side, once unify_scale_changelogs_make() made them: the
 * producer's handles of the changelogs of 'ut'.  Returns 0, or -1 (the
 * stage failed). */
int unify_scale_state_topic(aagw_unify_t *u, struct utopic *ut) {
        if (unify_scale_changelog_names(u, ut->out, ut->state, ut->ids,
                                        ut->audit))
                return -1;
        if (ut->mode != AAGW_UNIFY_DEDUP)
                ut->ids[0] = '\0'; /* (lww: winners only) */
        if ((!ut->state_rkt && !(ut->state_rkt = rd_kafka_topic_new(
                                     u->out_producer, ut->state, NULL))) ||
            (ut->ids[0] && !ut->ids_rkt &&
             !(ut->ids_rkt =
                   rd_kafka_topic_new(u->out_producer, ut->ids, NULL))) ||
            (!ut->audit_rkt && !(ut->audit_rkt = rd_kafka_topic_new(
                                     u->out_producer, ut->audit, NULL)))) {
                ufail(u, "out of memory");
                return -1;
        }
        replicator_refresh_leaders(u->out_producer, ut->state, 5000);
        if (ut->ids[0])
                replicator_refresh_leaders(u->out_producer, ut->ids, 5000);
        return 0;
}

/* unify_scale_changelogs_make() for the ids topic of a dedup topic. */
static int scale_ids_topic(aagw_unify_t *u, const char *out, const char *ids,
                           int32_t parts, const struct rd_kafka_metadata *md) {
        char err[1024];
        int  have = replicator_md_partitions(md, ids);

        if (have >= 0 && have != parts) {
                parts_mismatch(u, out, parts, ids, have);
                return -1;
        }
        switch (changelog_ids_topic(u->admin, ids, parts, have >= 0,
                                    &u->ids_conf, 30000, err, sizeof(err))) {
        case CHANGELOG_IDS_CREATED:
                aagw_log(
                    AAGW_LOG_INFO, "UNIFY",
                    "unify@%s: changelog %s: %d partitions, ids kept "
                    "%" PRId64 " s (unify.window %" PRId64
                    " s and a margin), segments of %" PRId64 " s",
                    u->site, ids, (int)parts, u->ids_conf.retention_ms / 1000,
                    u->conf.window_ms / 1000, u->ids_conf.segment_ms / 1000);
                break;
        case CHANGELOG_IDS_KEPT:
                break;
        case CHANGELOG_IDS_ALTERED:
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: changelog %s (unify.window %" PRId64
                         " s): %s",
                         u->site, ids, u->conf.window_ms / 1000, err);
                break;
        case CHANGELOG_IDS_STALE:
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: changelog %s (unify.window %" PRId64
                         " s): %s; going on with the topic as it is: set "
                         "cleanup.policy=delete retention.ms=%" PRId64
                         " retention.bytes=-1 segment.ms=%" PRId64
                         " on it by hand, or grant aagw DescribeConfigs and "
                         "AlterConfigs on it",
                         u->site, ids, u->conf.window_ms / 1000, err,
                         u->ids_conf.retention_ms, u->ids_conf.segment_ms);
                break;
        case CHANGELOG_IDS_REFUSED:
                if (have < 0) {
                        ufail(u, "creating the changelog %s at %s: %s", ids,
                              u->site, err);
                        return -1;
                }
                ufail(u,
                      "changelog %s (unify.window %" PRId64 " s): %s; "
                      "with these settings ids inside the window would "
                      "be removed and a new owner would deliver them "
                      "again: set them by hand, or grant aagw "
                      "AlterConfigs on the topic",
                      ids, u->conf.window_ms / 1000, err);
                return -1;
        case CHANGELOG_IDS_RETRY:
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: changelog %s: %s; trying again", u->site,
                         ids, err);
                return -1;
        }
        return 0;
}

/* unify_scale_changelogs_make() for the audit topic: kept as the ids
 * are (unify.window and a margin).  Settings it cannot have only shorten
 * what `aagw audit` answers for the whole site: said, not fatal (a topic
 * that cannot be made at all is: its entries would have nowhere to go). */
static int scale_audit_topic(aagw_unify_t *u, const char *out,
                             const char *audit, int32_t parts,
                             const struct rd_kafka_metadata *md) {
        char err[1024];
        int  have = replicator_md_partitions(md, audit);

        /* Its partitions are the changelogs': one decision's entries go
         * to the partition of its changelog records. */
        if (have >= 0 && have != parts) {
                parts_mismatch(u, out, parts, audit, have);
                return -1;
        }
        switch (changelog_ids_topic(u->admin, audit, parts, have >= 0,
                                    &u->ids_conf, 30000, err, sizeof(err))) {
        case CHANGELOG_IDS_CREATED:
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: audit topic %s: %d partitions, entries "
                         "kept %" PRId64 " s",
                         u->site, audit, (int)parts,
                         u->ids_conf.retention_ms / 1000);
                return 0;
        case CHANGELOG_IDS_KEPT:
        case CHANGELOG_IDS_ALTERED:
                return 0;
        case CHANGELOG_IDS_STALE:
        case CHANGELOG_IDS_REFUSED:
                if (have < 0) {
                        ufail(u, "creating the audit topic %s at %s: %s", audit,
                              u->site, err);
                        return -1;
                }
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: audit topic %s: %s; going on with its "
                         "settings as they are (`aagw audit` answers for "
                         "as long as it keeps its entries)",
                         u->site, audit, err);
                return 0;
        case CHANGELOG_IDS_RETRY:
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: audit topic %s: %s; trying again", u->site,
                         audit, err);
                return -1;
        }
        return 0;
}

/* This process's owner: its membership and transactional producer
 * (group, transactional.id from the gateway id, site and member).
 * Returns 0, or -1 (the stage failed). */
static int scale_owner(aagw_unify_t *u) {
        const struct aagw_scale_out *so = u->conf.scale_out;
        const char *group = u->owners_group;
        char                         txn_id[AAGW_TOPIC_MAX + 64];

        snprintf(txn_id, sizeof(txn_id), "aagw.%s.%s.unify.%s",
                 u->conf.gateway_id, u->site, so->member);
        struct owner_conf oc = {.bootstraps           = u->conf.bootstraps,
                                .props                = u->conf.props,
                                .prop_cnt             = u->conf.prop_cnt,
                                .group                = group,
                                .topic                = u->work,
                                .transactional_id     = txn_id,
                                .session_timeout_ms   = so->session_timeout_ms,
                                .max_poll_interval_ms = so->session_timeout_ms,
                                .txn_timeout_ms       = so->txn_timeout_ms,
                                .on_gained            = scale_gained,
                                .on_lost              = scale_lost,
                                .on_revoking          = unify_scale_revoking,
                                .cooperative          = so->cooperative,
                                .opaque               = u};
        if (!(u->owner = stage_txn_join(&u->tx, &oc, &u->delivery)))
                return -1;
        u->out_producer = owner_producer(u->owner);
        aagw_log(AAGW_LOG_INFO, "UNIFY",
                 "unify@%s: member %s of group %s (%s, %d partitions): "
                 "output partition p is decided here while it owns "
                 "p %% %d",
                 u->site, so->member, group, u->work, (int)u->work_parts,
                 (int)u->work_parts);
        return 0;
}

/* Join the site's unify owners: the work topic, the owner.  Returns 0,
 * or -1 (the stage failed). */
int unify_scale_start(aagw_unify_t *u) {
        const struct aagw_scale_out *so = u->conf.scale_out;
        char              err[512];
        int               rc;
        /* The high watermark itself: a read_committed client's
         * ListOffsets answers the last stable offset. */
        static const char *const hw_extra[] = {
            "isolation.level", "read_uncommitted",
            "enable.auto.commit", "false", NULL};

        u->scale      = true;
        u->work_parts = so->work_partitions > 0 ? so->work_partitions : 12;
        /* The site's audit log: every member's entries in one place,
         * committed with the decisions (`aagw audit` reads it). */
        if (u->ops->audit_out)
                u->ops->audit_out(u->st, unify_scale_audit, u);
        if (stage_txn_init(&u->tx, &u->ctl, u->who, so->member)) {
                ufail(u, "member %s: out of memory", so->member);
                return -1;
        }
        snprintf(u->work, sizeof(u->work), "aagw.%s.%s.unify.work",
                 u->conf.gateway_id, u->site);
        if (!(u->hw_probe = unify_make_client(u, RD_KAFKA_CONSUMER, "reader",
                                        hw_extra, err, sizeof(err)))) {
                ufail(u, "member %s: %s", so->member, err);
                return -1;
        }
        if (so->standby) {
                char sb_group[AAGW_TOPIC_MAX + 16];
                snprintf(sb_group, sizeof(sb_group), "%s.standby",
                         u->owners_group);
                const char *sb_extra[] = {
                    "group.id", sb_group, /* never joined: assign only */
                    "enable.auto.commit", "false",
                    "enable.partition.eof", "false",
                    "isolation.level", "read_committed", NULL};
                if (!(u->standby = unify_make_client(u, RD_KAFKA_CONSUMER,
                                               "standby", sb_extra, err,
                                               sizeof(err)))) {
                        ufail(u, "member %s: %s", so->member, err);
                        return -1;
                }
                u->sbq         = rd_kafka_queue_get_consumer(u->standby);
                u->sb_reassign = true;
        }
        rc = owner_work_topic(u->admin, u->work, u->work_parts, err,
                              sizeof(err));
        if (rc < 0) {
                ufail(u, "member %s: the owners' work topic at %s: %s",
                      so->member, u->site, err);
                return -1;
        }
        if (rc != u->work_parts) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s has %d partitions, not "
                         "scale_out.work_partitions %d: going by the topic "
                         "(every member must use the same count)",
                         u->site, u->work, rc, (int)u->work_parts);
                u->work_parts = rc;
        }
        return scale_owner(u);
}

/* stage_txn_renew()'s steps for the stage: what was in flight drained,
 * the topics' handles on the old producer dropped; then handles on the
 * new one, and the inputs back to the committed positions, as after an
 * abort.  If the group moved on meanwhile, the owner says so at its
 * next poll, as always. */
static int renew_detach(void *arg) {
        aagw_unify_t *u = arg;

        if (scale_drain(u))
                return -1;
        unify_scale_kept_clear(u);
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (ut->out_rkt)
                        rd_kafka_topic_destroy(ut->out_rkt);
                if (ut->state_rkt)
                        rd_kafka_topic_destroy(ut->state_rkt);
                if (ut->ids_rkt)
                        rd_kafka_topic_destroy(ut->ids_rkt);
                if (ut->audit_rkt)
                        rd_kafka_topic_destroy(ut->audit_rkt);
                if (ut->route_rkt)
                        rd_kafka_topic_destroy(ut->route_rkt);
                ut->out_rkt = ut->state_rkt = ut->ids_rkt = ut->audit_rkt =
                    ut->route_rkt                         = NULL;
        }
        u->out_producer = u->producer; /* (no handle of the old one left) */
        return 0;
}

static int renew_attach(void *arg, rd_kafka_t *producer) {
        aagw_unify_t *u = arg;

        u->out_producer = producer;
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                if (!(ut->out_rkt =
                          rd_kafka_topic_new(u->out_producer, ut->out, NULL)) ||
                    !(ut->state_rkt = rd_kafka_topic_new(u->out_producer,
                                                         ut->state, NULL)) ||
                    (ut->ids[0] && !(ut->ids_rkt = rd_kafka_topic_new(
                                         u->out_producer, ut->ids, NULL))) ||
                    !(ut->audit_rkt = rd_kafka_topic_new(u->out_producer,
                                                         ut->audit, NULL)) ||
                    (ut->rin && !(ut->route_rkt = rd_kafka_topic_new(
                                      u->out_producer, ut->route, NULL)))) {
                        ufail(u, "out of memory");
                        return -1;
                }
        }
        scale_redo(u);
        return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
}

/* A new transactional producer after stage_txn_fatal() (the membership
 * and what it owns stay).  Returns 0, or -1 (the stage failed). */
int unify_scale_renew(aagw_unify_t *u) {
        return stage_txn_renew(&u->tx, u->out_producer, renew_detach,
                               renew_attach, u);
}

/* One turn of the owner's side in the stage's loop: membership,
 * restore, the commit due.  Returns 0, or -1 if the stage failed. */
int unify_scale_poll(aagw_unify_t *u) {
        char    err[512];
        int64_t now;

        if (owner_poll(u->owner, 0, err, sizeof(err)) == AAGW_OWNER_FATAL) {
                ufail(u, "member %s: %s", u->conf.scale_out->member, err);
                return -1;
        }
        if (u->tx.need_renew)
                return 0; /* the stage's loop renews the producer first */
        if (u->need_restore && unify_scale_restore(u))
                return -1;
        if (u->standby && unify_sb_poll(u))
                return -1;
        now = aagw_mono_ms();
        int iv = u->conf.scale_out->commit_interval_ms > 0
                     ? u->conf.scale_out->commit_interval_ms
                     : 200;
        unify_route_purge(u);
        if (now - (u->tx.open ? u->tx.begun_ms : u->last_commit_ms) >= iv) {
                u->last_commit_ms = now;
                return unify_scale_commit(u);
        }
        return 0;
}

/* The stage loop's side of it (stage_commit). */

static int scale_start(void *arg) {
        return unify_scale_start(arg);
}

static int scale_round(void *arg) {
        return unify_scale_poll(arg) ? -1 : 1;
}

static int scale_renew(void *arg) {
        return unify_scale_renew(arg);
}

/* What the open transaction holds is committed (or aborted and redone by
 * the next owner). */
static void scale_finish(void *arg) {
        aagw_unify_t *u = arg;

        if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED && u->owner &&
            !u->tx.need_renew)
                unify_scale_commit(u);
}

const struct stage_commit unify_commit_scale = {.start  = scale_start,
                                                .round  = scale_round,
                                                .finish = scale_finish,
                                                .renew  = scale_renew};
