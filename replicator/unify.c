/*
 * replicator/unify.c: the unify stage of one site, its Kafka side.
 *
 * For every logical topic T at site S it reads T and the remote copies of
 * T held at S (east.T under the prefix policy; under identity the copies
 * share T), has each record decided (dedup: first occurrence of the global
 * id; lww: newest version per entity key) and writes the winners to
 * T<suffix> on S's cluster, partitioned by id hash (dedup) or entity key
 * hash (lww).  One thread per site.
 *
 * The decisions and the state behind them (the epochs that commit them
 * with the positions, the pending ids and winners, the fold of what a
 * previous run left in the output, the replay set) are the decider's,
 * reached through struct aagw_unify_state_ops
 * (policy/aagw_unify_contract.h, filled by dedup/decider.c): per consumed
 * batch one decide(), an acked() per delivery report and one settle().
 * What this file keeps to make it exactly once (docs/architecture.md,
 * "Exactly once into the unified topic"):
 *
 *  - aagw is the only writer of the unified topic, and every record it
 *    writes carries its provenance (global id, origin, hlc) and its input
 *    coordinates at S (<prefix>in = TOPIC:PARTITION:OFFSET).
 *  - On start, before any input is read, each output partition is read
 *    from the stored output position to its end, and what is there is
 *    folded in (output_settle(), then output_fold(), unify_topics.c).
 *  - Inputs then resume from the stored input positions.  Every record
 *    after them is either found (folded) or decided afresh; nothing is
 *    written twice and nothing is lost.
 *
 * Files: unify.c (this: epochs, decisions, producing, the thread and the
 * lifecycle), unify_topics.c (inputs, outputs and the start-up scan),
 * unify_scale.c (scale-out), unify_restore.c (scale-out restore and
 * standby), unify_route.c (scale-out's route topic); what they share is
 * in unify_int.h.
 */
#include "unify_int.h"

/* ------------------------------------------------------------- EPOCHS --- */

/* The producer's own limit (message.max.bytes) or the broker's. */
bool unify_too_large(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
               err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

/*
 * A record whose unified copy is too large for the output (the producer's
 * message.max.bytes, or the topic's max.message.bytes) must not stop the
 * stage: it was decided like any other (its id delivered, or its version
 * the winner), so its place in the output is taken by a stand-in with the
 * same key, partition and timestamp, our headers, an empty value, and
 * <prefix>unify.oversize saying what was left out.  Counted (oversized),
 * logged at the 1st, 2nd, 4th, ... such record.  Returns the unify_produce
 * error (0: queued, with 'tok' as its opaque).
 */
rd_kafka_resp_err_t
unify_produce_stub(aagw_unify_t *u, struct token *tok, int32_t part,
                   const rd_kafka_message_t *m, const rd_kafka_headers_t *src_h,
                   rd_kafka_resp_err_t why, const char *given) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(4);
        const char         *hn;
        const void         *hv;
        size_t              hs, hbytes = 0;
        char                note[AAGW_TOPIC_MAX + 256];
        char                name[AAGW_AFFIX_MAX + 32];
        rd_kafka_timestamp_type_t tstype;
        int64_t ts = rd_kafka_message_timestamp(tok->base.src, &tstype);

        for (size_t i = 0;
             src_h && !rd_kafka_header_get_all(src_h, i, &hn, &hv, &hs); i++) {
                if (aagw_prov_is_own_header(u->conf.policy, hn) &&
                    hs <= 4096)
                        rd_kafka_header_add(h, hn, -1, hv, (ssize_t)hs);
                else
                        hbytes += strlen(hn) + hs; /* left out */
        }
        if (given)
                copy_str(note, sizeof(note), given);
        else
                snprintf(note, sizeof(note),
                         "value %zu bytes and headers %zu bytes left out: too "
                         "large for %s (%s)",
                         m->len, hbytes, tok->ut->out, rd_kafka_err2str(why));
        copy_str(name, sizeof(name), u->oversize_hdr);
        rd_kafka_header_add(h, name, -1, note, -1);
        /* (Scale-out: counted when its transaction commits; 'tok' already
         * a stand-in is one the redo writes for a record unify_scale_refusal()
         * logged.) */
        bool     logged = tok->stub;
        uint64_t n = u->scale ? atomic_load(&u->oversized) + ++u->txn_stubs
                              : atomic_fetch_add(&u->oversized, 1) + 1;
        if (!(n & (n - 1)) && !logged)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: the unified copy of %s [%d] offset "
                         "%" PRId64 " is too large for %s (%s): written "
                         "without its value (%zu bytes) and the producer's "
                         "headers (%" PRIu64 " such records so far)",
                         u->site, rd_kafka_topic_name(tok->base.src->rkt),
                         (int)tok->base.src->partition, tok->base.src->offset,
                         tok->ut->out, rd_kafka_err2str(why), m->len, n);
        tok->stub = true;
        rd_kafka_resp_err_t err = rd_kafka_producev(
            u->out_producer, RD_KAFKA_V_RKT(tok->ut->out_rkt),
            RD_KAFKA_V_PARTITION(part), RD_KAFKA_V_MSGFLAGS(0),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE("", 0),
            RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(h),
            RD_KAFKA_V_OPAQUE(tok), RD_KAFKA_V_END);
        if (err)
                rd_kafka_headers_destroy(h);
        return err;
}

/* Delivery report: the unify thread, inside rd_kafka_poll(producer). */
void unify_on_delivery(void *stage, void *t, const rd_kafka_message_t *m) {
        aagw_unify_t *u   = stage;
        struct token *tok = t;

        if (tok->route) {
                /* A routed record: the transaction's, as an output
                 * record is; no decision rests on it here. */
                ADD(u->inflight, -1);
                if (m->err || m->offset < 0) {
                        replicator_note_authz(u->site, m->err, "WRITE",
                                              "topic %s", tok->ut->route);
                        if (!u->tx.broken &&
                            m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                            m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                                aagw_log(AAGW_LOG_WARN, "UNIFY",
                                         "unify@%s: routing to %s [%d]: %s; "
                                         "the transaction is aborted and "
                                         "redone",
                                         u->site, tok->ut->route,
                                         (int)m->partition,
                                         m->err ? rd_kafka_err2str(m->err)
                                                : "acknowledged without an "
                                                  "offset");
                        if (replicator_refused_for_good(m->err) &&
                            !atomic_load(&u->ctl.stop))
                                ufail(u,
                                      "%s [%d] refused a routed record for "
                                      "good (%s): raise its max.message.bytes "
                                      "to the inputs' largest record",
                                      tok->ut->route, (int)m->partition,
                                      rd_kafka_err2str(m->err));
                        u->tx.broken = true;
                }
                token_put(u, tok);
                return;
        }
        /* (Not in a transaction: the broker's refusal already made it
         * abortable, and the redo meets the same record again.) */
        if (unify_too_large(m->err) && !tok->stub && !u->scale &&
            !atomic_load(&u->ctl.stop)) {
                /* The broker refused the size: the stand-in takes the
                 * same token, still in flight (same partition; records
                 * after it may already be ahead of it). */
                rd_kafka_headers_t *h = NULL;
                rd_kafka_message_headers(m, &h);
                if (!unify_produce_stub(u, tok, m->partition, m, h, m->err,
                                        NULL))
                        return;
        }
        ADD(u->inflight, -1);
        if (u->scale && replicator_refused_for_good(m->err) &&
            !atomic_load(&u->ctl.stop))
                unify_scale_refusal(u, tok, m); /* remembered for the redo */
        if (u->scale && (m->err || m->offset < 0)) {
                /* In a transaction: whatever went wrong with a record
                 * (an implicit acknowledgement included, see below), the
                 * transaction is aborted and redone rather than trusted
                 * (unify_scale_commit()). */
                replicator_note_authz(u->site, m->err, "WRITE", "topic %s",
                                      tok->ut->out);
                if (!u->tx.broken && !replicator_refused_for_good(m->err) &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: delivery to %s [%d]: %s; the "
                                 "transaction is aborted and redone",
                                 u->site, tok->ut->out, (int)m->partition,
                                 m->err ? rd_kafka_err2str(m->err)
                                        : "acknowledged without an offset");
                u->tx.broken = true;
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                return;
        }
        if (!m->err && m->offset < 0 &&
            !replicator_implicit_ack(
                &u->ctl, rd_kafka_topic_name(m->rkt), m->partition,
                rd_kafka_topic_name(tok->base.src->rkt),
                tok->base.src->partition, tok->base.src->offset)) {
                /* Not trusted (an old librdkafka): the epoch never
                 * commits, and the restart's scan folds the record if the
                 * output holds it and decides it again if not. */
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                return;
        }
        if (m->err) {
                /* Purged at a stop, or permanent (retriable errors never
                 * end here: unlimited delivery timeout).  The epoch never
                 * commits: a restart decides these records again. */
                replicator_note_authz(u->site, m->err, "WRITE", "topic %s",
                                      tok->ut->out);
                if (m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
                        ufail(u, "delivery to %s [%d] failed: %s",
                              tok->ut->out, (int)m->partition,
                              rd_kafka_err2str(m->err));
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                return;
        }
        if (tok->alone) {
                /* A suspect acknowledged alone: it was only batched with
                 * the record refused for good. */
                struct refused_rec *rr = refused_find(
                    u->tx.refused, rd_kafka_topic_name(tok->base.src->rkt),
                    tok->base.src->partition, tok->base.src->offset);
                if (rr)
                        refused_del(u->tx.refused, rr);
        }
        u->ops->acked(u->st, tok->ep, tok->ut->out_id, m->partition,
                      m->offset);
        INC(u->records_out);
        INC(tok->ut->records_out);
        token_put(u, tok);
}

/* Settle with the decider: the input positions 'n' in u->reached (with
 * 'seal' the open epoch closes there) and the commit of the oldest epochs
 * whose records are all acknowledged, in order.  Returns settle()'s
 * answer (-1: the stage failed). */
static int settle(aagw_unify_t *u, size_t n, bool seal) {
        char     err[512];
        unsigned done;
        int      rc =
            u->ops->settle(u->st, u->reached, n, seal, &done, err, sizeof(err));

        if (rc < 0)
                ufail(u, "%s", err);
        else if (done)
                ADD(u->commits, done);
        return rc;
}

/* Commit the oldest epochs whose records are all acknowledged, in order. */
static void commit_ready(aagw_unify_t *u) {
        settle(u, 0, false);
}

/* Seal the open epoch (positions of the inputs it moved) and open the
 * next one, waiting for it to commit if all are busy. */
static int seal_epoch(aagw_unify_t *u) {
        size_t n = 0;

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                if (!ui->dirty[p])
                                        continue;
                                if (n == u->reached_cap) {
                                        /* Grown once to the inputs'
                                         * partitions, then kept. */
                                        size_t nc = n ? 2 * n : 256;
                                        void  *nr =
                                            realloc(u->reached,
                                                    nc * sizeof(*u->reached));
                                        if (!nr) {
                                                ufail(u, "out of memory");
                                                return -1;
                                        }
                                        u->reached     = nr;
                                        u->reached_cap = nc;
                                }
                                u->reached[n++] = (struct aagw_unify_pos){
                                    ui->topic, p, ui->next[p]};
                                ui->dirty[p] = false;
                        }
                }
        }
        int rc = settle(u, n, true);
        while (!rc && !atomic_load(&u->ctl.stop)) {
                rd_kafka_poll(u->producer, 5);
                rc = settle(u, 0, false);
        }
        return rc == 1 ? 0 : -1;
}

/* ---------------------------------------------------------- DECISIONS --- */

struct uinput *unify_input_of(struct utopic *ut, const char *topic) {
        for (size_t k = 0; k < ut->nin; k++)
                if (!strcmp(ut->in[k]->topic, topic))
                        return ut->in[k];
        return NULL;
}

static struct utopic *topic_of(aagw_unify_t *u, const char *topic,
                               struct uinput **uip) {
        for (size_t i = 0; u->route && i < u->ntopics; i++)
                if (u->topics[i]->rin && !strcmp(u->topics[i]->route, topic)) {
                        *uip = u->topics[i]->rin;
                        return u->topics[i];
                }
        const char *base = unify_topic_base(u->conf.policy, topic);
        for (size_t i = 0; i < u->ntopics; i++)
                if (!strcmp(u->topics[i]->name, base)) {
                        *uip = unify_input_of(u->topics[i], topic);
                        return *uip ? u->topics[i] : NULL;
                }
        return NULL;
}

/* The output partition of a keyed record (aagw_unify_key()): its id hash
 * (dedup) or scoped entity key hash (lww). */
int32_t unify_out_part(const struct utopic *ut,
                       const struct aagw_unify_rec *r) {
        uint64_t hk;
        memcpy(&hk, r->key, 8);
        return (int32_t)(hk % (uint64_t)ut->out_parts);
}

/* Produce an accepted record to the output.  Takes over 'it->m'. */
int unify_produce(aagw_unify_t *u, struct item *it,
                  const struct aagw_unify_rec *r, unsigned ep) {
        rd_kafka_message_t *m  = it->m;
        struct utopic      *ut = it->ut;
        struct aagw_prov_hdrs ph;
        rd_kafka_headers_t *h = NULL;
        char                in[AAGW_COORDS_MAX];

        /* A stand-in its router sent (the record was too large to
         * route): it goes out as the stand-in it is, with its note. */
        char rnote[AAGW_TOPIC_MAX + 256];
        rnote[0] = '\0';
        if (it->ui->route) {
                rd_kafka_headers_t *mh;
                const void         *nv;
                size_t              ns;
                const char         *nn;
                size_t              cnt;
                /* (Right before the route header, the last.) */
                if (!rd_kafka_message_headers(m, &mh) &&
                    (cnt = rd_kafka_header_cnt(mh)) >= 2 &&
                    !rd_kafka_header_get_all(mh, cnt - 2, &nn, &nv, &ns) &&
                    !strcmp(nn, u->oversize_hdr))
                        snprintf(rnote, sizeof(rnote), "%.*s", (int)ns,
                                 (const char *)nv);
        }
        /* Resolved (validated or stamped) in pass 1, unchanged since.
         * Not into it->v->hdrs: lww keeps the entity key there. */
        aagw_prov_encode_resolved(u->conf.policy, &it->v->prov, &ph);
        h = replicator_copy_headers(u->conf.policy, m, NULL, 0, it->own_hdrs,
                                    2);
        if (it->ui->route)
                rd_kafka_header_remove(h, u->route_hdr);
        for (size_t i = 0; i < ph.cnt; i++)
                rd_kafka_header_add(h, ph.hdrs[i].name, -1, ph.hdrs[i].value,
                                    (ssize_t)ph.hdrs[i].size);
        /* Where the stage read the record, for the start-up scan.  A
         * record stamped here carries it already: its provenance's source
         * coordinates are the input's (see unify_fold_record()). */
        if (!it->v->fresh) {
                size_t n =
                    aagw_coords_format(in, r->topic, r->partition, r->offset);
                rd_kafka_header_add(h, u->in_hdr, -1, in, (ssize_t)n);
        }

        int32_t part = unify_out_part(ut, r);
        struct token *tok = token_get(u);
        if (!tok) {
                rd_kafka_headers_destroy(h);
                u->ops->lost(u->st, ep);
                ufail(u, "out of memory");
                return -1;
        }
        tok->base.src = m;
        tok->ut       = ut;
        tok->ep       = ep;
        rd_kafka_timestamp_type_t tstype;
        int64_t             ts = rd_kafka_message_timestamp(m, &tstype);
        rd_kafka_resp_err_t err;
        struct refused_rec       *rr =
            u->scale && refused_count(u->tx.refused)
                      ? refused_find(u->tx.refused, it->ui->topic, m->partition,
                                     m->offset)
                      : NULL;
        if (rr && rr->confirmed) {
                /* Scale-out: the output refused it as too large when the
                 * transaction was tried before (unify_scale_refusal()): the
                 * stand-in goes in its place, as unify_on_delivery() sends it
                 * in single-process mode. */
                rr->resolved = true;
                tok->stub    = true; /* (logged: no second line) */
                if (!(err = unify_produce_stub(u, tok, part, m, h, rr->err,
                                               NULL)))
                        rd_kafka_headers_destroy(h);
        } else if (rnote[0]) {
                if (!(err = unify_produce_stub(
                          u, tok, part, m, h,
                          RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, rnote)))
                        rd_kafka_headers_destroy(h);
        } else {
                if (rr && !u->tx.broken) {
                        /* A suspect: alone in its batch, so that the
                         * broker's answer is about this record. */
                        unify_scale_settle(u, 0);
                        tok->alone = atomic_load(&u->inflight) == 0;
                }
                err = replicator_produce(u->out_producer, ut->out_rkt, part,
                                         m, h, ts, tok, &u->ctl.stop, NULL);
                /* Over the producer's message.max.bytes with our headers:
                 * the stand-in goes instead (scale-out too: nothing was
                 * sent, the transaction goes on). */
                if (unify_too_large(err)) {
                        tok->alone = false;
                        if (!(err = unify_produce_stub(u, tok, part, m, h, err,
                                                       NULL)))
                                rd_kafka_headers_destroy(h);
                }
        }
        if (err) {
                rd_kafka_headers_destroy(h);
                tok->base.src = NULL;
                replicator_note_authz(u->site, err, "WRITE", "topic %s",
                                      ut->out);
                /* Decided, not sent: the epoch must not commit. */
                u->ops->lost(u->st, tok->ep);
                token_put(u, tok);
                if (u->scale && !atomic_load(&u->ctl.stop))
                        unify_scale_refused(u, ut->out, part, err);
                else if (!atomic_load(&u->ctl.stop))
                        ufail(u, "unify_produce to %s [%d]: %s", ut->out, (int)part,
                              rd_kafka_err2str(err));
                return -1;
        }
        ADD(u->inflight, 1);
        u->txn_records++;
        it->m = NULL; /* the token owns it now */
        if (tok->alone) {
                /* Its answer before anything else is sent.  (Still
                 * unanswered, the token is still ours: nothing else is in
                 * flight.) */
                unify_scale_settle(u, 0);
                if (atomic_load(&u->inflight) > 0)
                        tok->alone = false;
        }
        return 0;
}

/* Count and log (at 1, 2, 4, ...) a record whose provenance path
 * contradicts its topic name: aagw did not write it here, so the other
 * sites on its path will not have it. */
static void note_diverged(aagw_unify_t *u, const struct aagw_unify_rec *r) {
        uint64_t d = atomic_fetch_add(&u->diverged, 1) + 1;
        if (!(d & (d - 1)))
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s [%d] offset %" PRId64
                         ": its provenance path contradicts "
                         "the topic name (forged, or "
                         "forwarded from a copy): the "
                         "sites' unified topics will differ "
                         "(%" PRIu64 " such records so far)",
                         u->site, r->topic, (int)r->partition, r->offset, d);
}

/* Decide and unify_produce one consumed batch, then seal it as an epoch. */
void unify_process(aagw_unify_t *u, rd_kafka_message_t **msgs, size_t n) {
        size_t   nr = 0, ndiverged = 0;
        unsigned ep = 0;
        char     err[512];

        /* Pass 1: provenance, ids and keys. */
        for (size_t i = 0; i < n; i++) {
                struct item *it = &u->items[i];
                memset(it, 0, sizeof(*it));
                it->m     = msgs[i];
                it->v     = &u->verdicts[i];
                it->state = 1;
                rd_kafka_message_t *m = msgs[i];
                if (m->err == RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT)
                        /* refused for good: see the flow's handle() */
                        ufail(u, "consume: %s: session.timeout.ms is outside "
                                 "%s's group.min/max.session.timeout.ms (set "
                                 "clusters.%s.properties.consumer."
                                 "session.timeout.ms)",
                              rd_kafka_message_errstr(m), u->site, u->site);
                if (m->err) {
                        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                                aagw_log(AAGW_LOG_WARN, "UNIFY",
                                         "unify@%s: consume: %s", u->site,
                                         rd_kafka_message_errstr(m));
                        replicator_note_authz(
                            u->site, m->err, "READ",
                            "topic %s, group aagw.%s.unify.%s",
                            m->rkt ? rd_kafka_topic_name(m->rkt) : "?",
                            u->conf.gateway_id, u->site);
                        continue;
                }
                const char *tn = rd_kafka_topic_name(m->rkt);
                if (m->rkt != u->last_rkt) {
                        u->last_ut  = topic_of(u, tn, &u->last_ui);
                        u->last_rkt = m->rkt;
                }
                it->ut = u->last_ut;
                it->ui = u->last_ui;
                if (!it->ut || m->partition >= it->ui->nparts)
                        continue;
                if (it->ui->next[m->partition] >= 0 &&
                    m->offset < it->ui->next[m->partition])
                        continue; /* re-fetched after a unify_reassign */
                struct replicator_start *ss = &it->ui->start[m->partition];
                if (ss->pending) {
                        struct replicator_start_ctx sc = {
                            u->consumer, "UNIFY", u->who, u->batch_no,
                            &u->start_refetches};
                        if (replicator_start_take(
                                ss, &sc, tn, m->partition,
                                it->ui->next[m->partition], m->offset))
                                continue; /* sought back: read again */
                }
                it->ui->next[m->partition]  = m->offset + 1;
                it->ui->dirty[m->partition] = true;
                struct aagw_rec rec;
                unify_fill_rec(u, m, tn, &rec);
                /* Under scale_out.route: an input record is routed here
                 * (its output partition worked out as a decider would),
                 * a routed one decided as read at its input. */
                bool routing = u->route && !it->ui->route;
                if (it->ui->route &&
                    !unify_route_unwrap(u, &rec, u->otopic[i],
                                        sizeof(u->otopic[i]))) {
                        uint64_t c = atomic_fetch_add(&u->unrouted, 1) + 1;
                        if (!(c & (c - 1)))
                                aagw_log(AAGW_LOG_WARN, "UNIFY",
                                         "unify@%s: %s [%d] offset %" PRId64
                                         ": no %s header: not routed by "
                                         "aagw, skipped (%" PRIu64 " such "
                                         "records so far)",
                                         u->site, tn, (int)m->partition,
                                         m->offset, u->route_hdr, c);
                        continue;
                }
                if (!it->ui->route)
                        INC(u->records_in);
                for (size_t h = 0; h < rec.hdr_cnt && !it->own_hdrs; h++)
                        it->own_hdrs = aagw_prov_is_own_header(
                            u->conf.policy, rec.hdrs[h].name);
                if (aagw_prov_resolve(u->conf.policy, u->site, &rec,
                                      it->ut->id_rule, u->conf.verdict_flags,
                                      it->v)) {
                        ufail(u, "%s [%d] offset %" PRId64
                                 ": cannot resolve provenance",
                              tn, (int)m->partition, m->offset);
                        return;
                }
                it->state                = 0;
                struct aagw_unify_rec *r = &u->recs[nr];
                u->ritem[nr++]           = i;
                memset(r, 0, offsetof(struct aagw_unify_rec, key));
                r->mode      = it->ut->mode;
                r->prov      = &it->v->prov;
                r->scope     = it->ut->scope;
                r->topic     = it->ui->route ? rec.topic : it->ui->topic;
                r->partition = rec.partition;
                r->offset    = rec.offset;
                r->tombstone = m->payload == NULL;
                /* Counted once decided: a replay is not (only decide()
                 * knows one).  Scale-out has no replays and counts every
                 * record it reads, its own or not, as it always did (a
                 * routed one where it is decided). */
                if ((r->diverged = it->v->path_forged)) {
                        if (u->scale && !routing)
                                note_diverged(u, r);
                        else if (!u->scale)
                                ndiverged++;
                }
                if (it->v->kind != AAGW_VERDICT_REPLICATE) {
                        r->rejected = true; /* audited, dead-lettered */
                        goto next;
                }
                /* lww: the key bytes must outlive this pass: a JSON
                 * field is copied into the verdict's scratch. */
                if (r->mode == AAGW_UNIFY_LWW &&
                    !unify_entity_key(it->ut, &rec, it->v->prov.origin,
                                (char *)it->v->hdrs.buf,
                                sizeof(it->v->hdrs.buf), &r->ekey,
                                &r->ekey_len)) {
                        r->ekey     = NULL;
                        r->ekey_len = 0;
                        r->rejected = true; /* no entity key */
                        goto next;
                }
                aagw_unify_key(u->site, r);
        next:
                if (routing) {
                        /* A rejected record has no output partition: it
                         * goes where its decider audits it (0).  One of
                         * an output partition owned here is decided at
                         * once, with no hop: in the transaction that
                         * commits its router's position, as a routed
                         * one would be. */
                        int32_t p = r->rejected ? 0 : unify_out_part(it->ut, r);
                        if (it->ut->restored && unify_scale_owns(u, p)) {
                                if (r->diverged)
                                        note_diverged(u, r);
                        } else {
                                it->route_p = p;
                                it->state   = 2;
                                nr--;
                        }
                }
        }
        /* Scale-out: only what this process owns, in a transaction. */
        if (u->scale && u->tx.broken) {
                /* Nothing goes into a transaction that must abort:
                 * these records are read again after the redo. */
                unify_scale_commit(u);
                return;
        }
        if (u->route && unify_route_send(u, n))
                return;
        if (u->scale && (nr = unify_scale_filter(u, nr)) && unify_scale_begin(u))
                return;
        int64_t now = aagw_wall_ms();
        /* Pass 2: the decisions, all at once (the decider asks the store
         * about every key no pending epoch knows, in one lookup), replays
         * found among them. */
        if (nr &&
            u->ops->decide(u->st, u->recs, nr, now, &ep, err, sizeof(err))) {
                ufail(u, "%s", err);
                return;
        }
        for (size_t k = 0; ndiverged && k < nr; k++)
                if (u->recs[k].diverged &&
                    u->recs[k].outcome != AAGW_UNIFY_REPLAYED) {
                        note_diverged(u, &u->recs[k]);
                        ndiverged--;
                }
        /* Pass 3, in order: count and unify_produce. */
        for (size_t k = 0; k < nr; k++) {
                struct aagw_unify_rec *r  = &u->recs[k];
                struct item           *it = &u->items[u->ritem[k]];
                struct utopic         *ut = it->ut;
                switch (r->outcome) {
                case AAGW_UNIFY_REJECTED:
                        if (it->v->kind != AAGW_VERDICT_REPLICATE &&
                            it->v->action == AAGW_BAD_FAIL) {
                                ufail(u, "%s [%d] offset %" PRId64
                                         ": bad provenance (%s) and "
                                         "bad_provenance is fail",
                                      it->ui->topic, (int)it->m->partition,
                                      it->m->offset,
                                      aagw_reason_name(it->v->reason
                                                           ? it->v->reason
                                                           : it->v->id_reason));
                                return;
                        }
                        INC(u->rejected);
                        INC(ut->rejected);
                        continue;
                case AAGW_UNIFY_DROPPED:
                        INC(u->dropped);
                        INC(ut->dropped);
                        continue;
                case AAGW_UNIFY_SUPERSEDED:
                        INC(u->superseded);
                        INC(ut->superseded);
                        continue;
                case AAGW_UNIFY_IDENTICAL:
                        INC(u->identical);
                        INC(ut->identical);
                        continue;
                case AAGW_UNIFY_REPLAYED:
                        /* Delivered by the previous run and folded in at
                         * the start. */
                        INC(u->replayed);
                        continue;
                case AAGW_UNIFY_ACCEPTED:
                        break;
                }
                INC(u->accepted);
                INC(ut->accepted);
                if (u->scale && unify_scale_decided(u, it, r, now))
                        return;
                if (unify_produce(u, it, r, ep)) {
                        /* A stop while the producer's queue is full: the
                         * epoch is lost (unify_produce()), so the drain stores
                         * none of this batch's positions. */
                        if (atomic_load(&u->ctl.stop))
                                aagw_log(AAGW_LOG_INFO, "UNIFY",
                                         "unify@%s: stopped in the middle "
                                         "of a batch, at decided record "
                                         "%zu of %zu: the batch's positions "
                                         "are not stored, a restart "
                                         "decides the rest again",
                                         u->site, k + 1, nr);
                        return;
                }
        }
        /* (Scale-out: the transaction's commit seals, unify_scale_commit().) */
        if (!u->scale && seal_epoch(u) && !atomic_load(&u->ctl.stop))
                ufail(u, "cannot open a new epoch");
}

/* -------------------------------------------------------------- THREAD --- */

/* The stage's part in the stage loop (stage.c). */

static int unify_start(void *arg) {
        aagw_unify_t *u = arg;

        unify_discover(u);
        u->last_refresh_ms = aagw_mono_ms();
        if (atomic_load(&u->ctl.state) == AAGW_FLOW_STARTING)
                atomic_store(&u->ctl.state, AAGW_FLOW_RUNNING);
        return 0;
}

static int unify_queues(void *arg, struct stage_queue *qs, int max) {
        aagw_unify_t *u = arg;

        (void)max;
        qs[0] = (struct stage_queue){u->consumer, u->cq, u->stalls};
        return 1;
}

static rd_kafka_t *unify_out(void *arg) {
        return ((aagw_unify_t *)arg)->out_producer;
}

static int unify_round(void *arg) {
        aagw_unify_t *u = arg;
        int refresh_ms  = u->conf.refresh_ms > 0 ? u->conf.refresh_ms : 5000;

        if (aagw_mono_ms() - u->last_refresh_ms >=
            (u->inputs_leaderless && refresh_ms > LEADER_WAIT_MS
                 ? LEADER_WAIT_MS
                 : refresh_ms)) {
                unify_discover(u);
                u->last_refresh_ms = aagw_mono_ms();
        }
        unify_discovered(u);
        return 1;
}

static void unify_batch(void *arg, int k, rd_kafka_message_t **msgs, size_t n) {
        aagw_unify_t *u = arg;

        (void)k;
        u->batch_no++;
        unify_process(u, msgs, n);
        for (size_t i = 0; i < n; i++)
                if (u->items[i].m)
                        rd_kafka_message_destroy(u->items[i].m);
}

static int unify_after(void *arg, ssize_t n, bool full) {
        aagw_unify_t *u = arg;

        (void)n;
        (void)full;
        rd_kafka_poll(u->out_producer, 0);
        if (aagw_mono_ms() - u->last_lag_ms >= 500) {
                unify_update_lag(u);
                u->last_lag_ms = aagw_mono_ms();
        }
        return 0;
}

/* Inputs whose fetch stands still while their leader holds more (the
 * stall watch): a new assignment at the stage's own positions, on the
 * refreshed metadata, starts them again. */
static void unify_restart(void *arg, int k, const struct aagw_stall_report *r,
                          size_t n) {
        aagw_unify_t *u = arg;

        (void)k;
        (void)r;
        (void)n;
        rd_kafka_assign(u->consumer, NULL);
        unify_reassign(u);
        INC(u->fetch_restarts);
}

static void unify_finish(void *arg) {
        aagw_unify_t *u = arg;

        unify_discovery_stop(u);
        stage_commit_finish(&u->stage);
}

/* One process decides every output partition: each batch is an epoch
 * (seal_epoch()), stored in RocksDB once all of its records were
 * acknowledged (commit_ready()). */
static int single_after(void *arg) {
        commit_ready(arg);
        return 0;
}

/* Drain: what was produced is acknowledged and committed, or the next
 * start finds it in the output.  A stopping process gives it what a flow
 * gives its own (3 s: a stop has 5 s in all). */
static void single_finish(void *arg) {
        aagw_unify_t *u        = arg;
        int64_t       deadline =
            aagw_mono_ms() + (aagw_kafka_process_stopping() ? 3000 : 10000);

        seal_epoch(u);
        while (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED &&
               atomic_load(&u->inflight) > 0 && aagw_mono_ms() < deadline) {
                rd_kafka_poll(u->producer, 20);
                commit_ready(u);
        }
        if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED) {
                rd_kafka_poll(u->producer, 0);
                commit_ready(u);
        }
}

static const struct stage_commit unify_commit_single = {
    .after = single_after, .finish = single_finish};

static const struct stage_hooks unify_hooks = {.start    = unify_start,
                                               .queues   = unify_queues,
                                               .producer = unify_out,
                                               .round    = unify_round,
                                               .batch    = unify_batch,
                                               .after    = unify_after,
                                               .restart  = unify_restart,
                                               .finish   = unify_finish};

/* ---------------------------------------------------------- LIFECYCLE --- */

rd_kafka_t *unify_make_client(aagw_unify_t *u, rd_kafka_type_t type,
                              const char *role, const char *const *extra,
                              char *errstr, size_t errstr_size) {
        struct replicator_client c = {.type       = type,
                                      .who        = u->who,
                                      .bootstraps = u->conf.bootstraps,
                                      .props      = u->conf.props,
                                      .prop_cnt   = u->conf.prop_cnt,
                                      .opaque     = u,
                                      .delivery   = &u->delivery};
        return replicator_client(&c, role, extra, errstr, errstr_size);
}

aagw_unify_t *aagw_unify_new(const struct aagw_unify_conf *c, char *errstr,
                             size_t errstr_size) {
        aagw_unify_t *u = calloc(1, sizeof(*u));
        char          group[AAGW_ALIAS_MAX * 2 + 64], rgroup[sizeof(group) + 8];
        const char   *hp = c->header_prefix ? c->header_prefix : "aagw.";

        if (!u) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        u->conf        = *c;
        if (u->conf.window_ms <= 0)
                u->conf.window_ms = 24 * 3600 * 1000LL;
        changelog_ids_conf(u->conf.window_ms, &u->ids_conf);
        u->ops         = c->state;
        u->st          = c->state_opaque;
        u->tokens.size = sizeof(struct token);
        snprintf(u->site, sizeof(u->site), "%s", c->site);
        u->reach.cluster = u->site;
        snprintf(u->who, sizeof(u->who), "unify@%s", c->site);
        if (c->scale_out && c->scale_out->enabled)
                snprintf(u->owners_group, sizeof(u->owners_group),
                         "aagw.%s.%s.unify", c->gateway_id, c->site);
        replicator_ctl_init(&u->ctl, "UNIFY", u->who);
        pthread_mutex_init(&u->owned_lock, NULL);
        u->delivery = (struct replicator_delivery){unify_on_delivery, u};
        snprintf(u->in_hdr, sizeof(u->in_hdr), "%sin", hp);
        snprintf(u->prov_hdr, sizeof(u->prov_hdr), "%sprov", hp);
        snprintf(u->route_hdr, sizeof(u->route_hdr), "%sroute", hp);
        snprintf(u->oversize_hdr, sizeof(u->oversize_hdr), "%sunify.oversize",
                 hp);
        u->route = c->scale_out && c->scale_out->enabled && c->scale_out->route;
        if (u->route && !(u->otopic = calloc(BATCH_MAX, sizeof(*u->otopic)))) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        u->items    = calloc(BATCH_MAX, sizeof(*u->items));
        u->verdicts = calloc(BATCH_MAX, sizeof(*u->verdicts));
        u->recs     = calloc(BATCH_MAX, sizeof(*u->recs));
        u->ritem    = calloc(BATCH_MAX, sizeof(*u->ritem));
        if (!u->items || !u->verdicts || !u->recs || !u->ritem) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }

        snprintf(group, sizeof(group), "aagw.%s.unify.%s", c->gateway_id,
                 c->site);
        snprintf(rgroup, sizeof(rgroup), "%s.reader", group);
        const char *consumer_extra[] = {
            "group.id", group,
            "enable.auto.commit", "false",
            "enable.auto.offset.store", "false",
            "auto.offset.reset", "earliest",
            "enable.partition.eof", "false",
            NULL};
        const char *probe_kv[REPLICATOR_END_PROBE_KV];
        const char *reader_extra[] = {
            "group.id", rgroup,
            "enable.auto.commit", "false",
            "enable.partition.eof", "true",
            "auto.offset.reset", "earliest",
            "fetch.wait.max.ms", "10",
            NULL};
        if (!(u->consumer = unify_make_client(u, RD_KAFKA_CONSUMER, "consumer",
                                        consumer_extra, errstr, errstr_size)))
                goto fail;
        rd_kafka_poll_set_consumer(u->consumer);
        u->cq = rd_kafka_queue_get_consumer(u->consumer);
        if (!(u->stalls = aagw_stall_watch_new(u->consumer))) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                goto fail;
        }
        if (!(u->producer = unify_make_client(u, RD_KAFKA_PRODUCER, "producer",
                                        aagw_kafka_producer_props, errstr,
                                        errstr_size)) ||
            !(u->reader = unify_make_client(u, RD_KAFKA_CONSUMER, "reader",
                                      reader_extra, errstr, errstr_size)) ||
            !(u->end_probe = unify_make_client(
                  u, RD_KAFKA_CONSUMER, "end-probe",
                  replicator_end_probe_props(rgroup, probe_kv), errstr,
                  errstr_size)) ||
            !(u->admin = unify_make_client(u, RD_KAFKA_PRODUCER, "admin", NULL,
                                     errstr, errstr_size)))
                goto fail;
        u->out_producer = u->producer;
        atomic_store(&u->ctl.state, AAGW_FLOW_STARTING);
        return u;
fail:
        aagw_unify_destroy(u);
        return NULL;
}

int aagw_unify_start(aagw_unify_t *u, char *errstr, size_t errstr_size) {
        bool scaled = u->conf.scale_out && u->conf.scale_out->enabled;
        stage_init(&u->stage, &unify_hooks,
                   scaled ? &unify_commit_scale : &unify_commit_single,
                   scaled ? &u->tx : NULL, u, &u->ctl, u->who, NULL, BATCH_MAX);
        int err = pthread_create(&u->thread, NULL, stage_main, &u->stage);
        if (err) {
                snprintf(errstr, errstr_size, "cannot start a thread: %s",
                         strerror(err));
                return -1;
        }
        u->thread_started = true;
        return 0;
}

void aagw_unify_stop(aagw_unify_t *u) {
        if (u)
                atomic_store(&u->ctl.stop, true);
}

void aagw_unify_destroy(aagw_unify_t *u) {
        if (!u)
                return;
        atomic_store(&u->ctl.stop, true);
        if (u->thread_started)
                pthread_join(u->thread, NULL);
        aagw_stall_watch_destroy(u->stalls);
        if (u->out_producer) {
                /* Unacknowledged records are not committed: a restart
                 * finds them in the output or decides them again.  Their
                 * delivery reports release the input records they hold,
                 * which must happen before the consumer is destroyed:
                 * rd_kafka_destroy() waits for every message of its own
                 * and hung for good after a failed stage (a full state
                 * dir, a deleted input topic). */
                stage_purge(u->out_producer, &u->inflight, 5000);
        }
        if (u->consumer) {
                replicator_consumer_close(u->consumer, REPLICATOR_CLOSE_MS());
                if (u->cq)
                        rd_kafka_queue_destroy(u->cq);
                rd_kafka_destroy_flags(u->consumer,
                                       RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                if (u->topics[t]->out_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->out_rkt);
                        u->topics[t]->out_rkt = NULL;
                }
                if (u->topics[t]->state_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->state_rkt);
                        u->topics[t]->state_rkt = NULL;
                }
                if (u->topics[t]->ids_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->ids_rkt);
                        u->topics[t]->ids_rkt = NULL;
                }
                if (u->topics[t]->audit_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->audit_rkt);
                        u->topics[t]->audit_rkt = NULL;
                }
                if (u->topics[t]->route_rkt) {
                        rd_kafka_topic_destroy(u->topics[t]->route_rkt);
                        u->topics[t]->route_rkt = NULL;
                }
        }
        if (u->scale && u->ops->audit_out)
                u->ops->audit_out(u->st, NULL, NULL);
        /* Aborts what is still open, leaves the group: the others take
         * over at once. */
        owner_destroy(u->owner);
        stage_txn_deinit(&u->tx);
        replicator_consumer_close(u->reader, REPLICATOR_CLOSE_MS());
        replicator_consumer_close(u->end_probe, REPLICATOR_CLOSE_MS());
        if (u->sbq)
                rd_kafka_queue_destroy(u->sbq);
        if (u->purge_q)
                rd_kafka_queue_destroy(u->purge_q);
        replicator_destroy_clients(
            (const struct replicator_doomed[]){
                {u->producer, 0},
                {u->reader, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {u->end_probe, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {u->admin, 0},
                {u->hw_probe, 0},
                {u->standby, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE}},
            6);
        for (size_t t = 0; t < u->ntopics; t++)
                unify_utopic_free(u->topics[t]);
        aagw_pool_free(&u->tokens);
        free(u->items);
        free(u->otopic);
        free(u->verdicts);
        free(u->recs);
        free(u->ritem);
        free(u->reached);
        free(u->hdrs);
        replicator_ctl_deinit(&u->ctl);
        pthread_mutex_destroy(&u->owned_lock);
        free(u);
}

aagw_flow_state_t aagw_unify_state(const aagw_unify_t *u) {
        return (aagw_flow_state_t)atomic_load(&((aagw_unify_t *)u)->ctl.state);
}

const char *aagw_unify_site(const aagw_unify_t *u) {
        return u->site;
}

const char *aagw_unify_owner_group(const aagw_unify_t *u) {
        return u->owners_group;
}

void aagw_unify_error(const aagw_unify_t *uc, char *buf, size_t size) {
        aagw_unify_t *u = (aagw_unify_t *)uc;
        replicator_ctl_error(&u->ctl, buf, size);
}

void aagw_unify_stats(const aagw_unify_t *uc, struct aagw_unify_stats *st) {
        aagw_unify_t *u = (aagw_unify_t *)uc;
        memset(st, 0, sizeof(*st));
#define LD(x) atomic_load_explicit(&u->x, RELAXED)
        st->records_in  = LD(records_in);
        st->records_out = LD(records_out);
        st->accepted    = LD(accepted);
        st->dropped     = LD(dropped);
        st->superseded  = LD(superseded);
        st->identical   = LD(identical);
        st->rejected    = LD(rejected);
        st->diverged    = LD(diverged);
        st->oversized   = LD(oversized);
        st->recovered   = LD(recovered);
        st->replayed    = LD(replayed);
        st->commits     = LD(commits);
        st->fetch_restarts = LD(fetch_restarts);
        st->start_refetches = LD(start_refetches);
        st->inflight    = LD(inflight);
        st->lag         = LD(lag);
        st->down_ms     = aagw_reach_down_ms(&u->reach);
        if (st->down_ms)
                st->lag = -1; /* the unify_watermarks last seen are stale */
        st->topics      = LD(ntopics_pub);
        st->inputs      = LD(ninputs_pub);
        st->rebalances  = LD(rebalances);
        st->restores    = LD(restores);
        st->restore_ms_total = LD(restore_ms_total);
        st->restored_records = LD(restored_records);
        st->routed           = LD(routed);
        st->fenced           = LD(tx.fenced);
        st->aborted          = LD(tx.aborted);
        st->txn_commits      = LD(tx.committed);
        st->owned_partitions = LD(owned_parts);
#undef LD
}

const char *aagw_unify_member(const aagw_unify_t *u) {
        return u->conf.scale_out && u->conf.scale_out->enabled
                   ? u->conf.scale_out->member
                   : NULL;
}

void aagw_unify_owned(const aagw_unify_t *uc, char *buf, size_t size) {
        aagw_unify_t *u = (aagw_unify_t *)uc;
        pthread_mutex_lock(&u->owned_lock);
        snprintf(buf, size, "%s", u->owned[0] ? u->owned : "none");
        pthread_mutex_unlock(&u->owned_lock);
}
