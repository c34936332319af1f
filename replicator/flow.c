/*
 * replicator/flow.c: one replication direction, source -> target.
 *
 * The flow thread owns four clients of its own:
 *   - the source consumer, which assigns itself every partition of the
 *     topics discovery finds (no group distributes them: a restarted
 *     process reads again at once), at offsets it sets itself; it
 *     commits its positions to group aagw.<gateway-id>.<source>-<target>
 *     (never auto-committed, never read back);
 *   - the identity lease: a static member (group.instance.id) of group
 *     aagw.<gateway-id>.<source>-<target>.lease that reads nothing.  A
 *     second process with the same gateway id and site takes the
 *     instance id over, which fences this one (FENCED_INSTANCE_ID): the
 *     flow stops copying and takes the id back once; fenced again, it
 *     fails (flow_lease_fenced());
 *   - the target producer: idempotent, acks=all, unlimited delivery
 *     timeout, so a broker outage stalls the flow instead of losing data;
 *   - a target "reader" (an assign-only consumer) used at assignment to
 *     reconcile the stored position with what the target log holds
 *     (by the reconciler thread, flow_positions.c, beside the copying).
 * Topic creation goes through a fourth handle, kept apart from the data
 * path, because the Admin API can hang or abort a handle on some brokers;
 * the remote topics' creation, growth, configs and ACLs through topics.c
 * and its own two.
 *
 * Partitions.  A source partition is copied to the same partition of the
 * remote topic, never remapped.  When the source has partitions the copy
 * lacks (the source grew, or the copy was made smaller), discovery grows
 * the copy (topics_grow()); until the target producer sees a partition,
 * the source partition is "held": assigned but paused, and read from its
 * reconciled position (the beginning, for a new one) once it exists.  The
 * other partitions and topics keep flowing; a copy that cannot be grown is
 * reported (aagw_flow_missing(), log) with the command that fixes it.
 *
 * Positions.  Every consumed record takes a slot in its partition's ring,
 * in offset order.  A slot is done when the target acknowledged the copy
 * (or the dead-letter copy), or at once when the verdict skips it.  The
 * partition's position advances over the done prefix of the ring only, so
 * it never passes a record the target has not acknowledged.  Positions are
 * saved (pos_save, RocksDB in the gateway) every second, at an flow_unassign
 * and at stop; they are also committed to the group for lag tooling, but
 * never read back from it.
 *
 * Exactly once into the target, without transactions: on assignment the
 * flow reads the target partition from the stored out_next to its end and
 * finds the last record this flow wrote (provenance path ending in
 * source>target, source coordinates in the src or hop header).  It resumes
 * after that record.  Records in flight at a crash are thus either in the
 * target (found, not written again) or not (written again).  Under the
 * prefix policy aagw is the only writer of the target partition, so the
 * result is exact; under identity the same scan skips local records.
 *
 * Scale-out (scale_out.enabled): several processes of one site share the
 * flow; each copies the source partitions of the work partitions its
 * owners' group gives it, in transactions that only the owner can
 * commit, and reconciles a partition it gains against the target's last
 * stable offset.  No identity lease then.  See flow_scale.c.
 *
 * Files: flow.c (this: the thread, delivery, producing, the lease and the
 * lifecycle), flow_topics.c (discovery and assignment), flow_positions.c
 * (positions, reconciliation, truncation), flow_scale.c (scale-out); what
 * they share is in flow_int.h.
 */
#include "flow_int.h"

/* Up to a second, each bound at most 2x the one before, so that a
 * quantile read from the buckets tells 5 ms from 10, 50 from 100 and 500
 * from 1000 (a replicator's own waits are a few ms; librdkafka's
 * linger and fetch waits tens; stalls hundreds). */
const int64_t aagw_lat_bounds_ms[AAGW_LAT_BUCKETS - 1] = {
    1,   2,   3,   5,    7,    10,   15,   20,    30,    50,    75,   100,
    150, 200, 300, 500,  750,  1000, 2000, 5000,  10000, 30000, 60000};

/* -------------------------------------------------------------- TOKENS -- */

static struct token *token_get(aagw_flow_t *f) {
        return replicator_token_get(&f->tokens);
}

static void token_put(aagw_flow_t *f, struct token *t) {
        replicator_token_put(&f->tokens, &t->base);
}

/* ---------------------------------------------------------------- RING -- */

static int ring_push(struct ptrack *pt, int64_t src_off, int64_t origin_ms,
                     uint64_t *seqp) {
        if (pt->tail - pt->head == pt->cap) {
                size_t       ncap = pt->cap ? pt->cap * 2 : 1024;
                struct slot *nr   = malloc(ncap * sizeof(*nr));
                if (!nr)
                        return -1;
                for (uint64_t s = pt->head; s < pt->tail; s++)
                        nr[s & (ncap - 1)] = pt->ring[s & (pt->cap - 1)];
                free(pt->ring);
                pt->ring = nr;
                pt->cap  = ncap;
        }
        struct slot *sl = &pt->ring[pt->tail & (pt->cap - 1)];
        sl->src_off     = src_off;
        sl->out_off     = -1;
        sl->origin_ms   = origin_ms;
        sl->done        = 0;
        *seqp           = pt->tail++;
        return 0;
}

/* Offset-syncs: write (src, dst) when the delta dst - src differs from
 * the last one written, so that between two syncs every copy keeps the
 * same delta and translation is exact (policy/mm2.c).  Per-record syncs
 * are rate-bounded per partition; a suppressed one marks the next as
 * lossy, and the boundary sync at each save (flow_save_positions) restores
 * exactness from there on. */
void flow_sync_point(aagw_flow_t *f, struct ptrack *pt, int64_t src,
                     int64_t dst, bool bounded) {
        if (!f->mm2 || src < 0 || dst < 0)
                return;
        if (pt->sync_known && dst - src == pt->sync_delta)
                return;
        if (bounded) {
                int64_t now = f->now_cache;
                if (now - pt->sync_win_ms >= 1000) {
                        pt->sync_win_ms  = now;
                        pt->sync_win_cnt = 0;
                }
                if (pt->sync_win_cnt >= f->conf.mm2.sync_max_per_s &&
                    f->conf.mm2.sync_max_per_s > 0) {
                        pt->sync_lossy = true;
                        return;
                }
                pt->sync_win_cnt++;
        }
        mm2_sync(f->mm2, pt->tt->topic, pt->partition, src, dst,
                 pt->sync_lossy);
        pt->sync_known = true;
        pt->sync_delta = dst - src;
        pt->sync_lossy = false;
}

/* Move the position over the done prefix of the ring. */
static void ring_advance(aagw_flow_t *f, struct ptrack *pt) {
        while (pt->head < pt->tail) {
                struct slot *sl = &pt->ring[pt->head & (pt->cap - 1)];
                if (!sl->done)
                        break;
                /* (Scale-out: a copy is final only once its transaction
                 * commits; flow_scale_commit() writes the syncs then.) */
                if (!f->owner && sl->out_off >= 0)
                        flow_sync_point(f, pt, sl->src_off, sl->out_off, true);
                else if (!f->owner && !pt->sync_known)
                        flow_sync_point(f, pt, sl->src_off, pt->out_next, true);
                pt->next = sl->src_off + 1;
                if (sl->out_off >= 0)
                        pt->out_next = sl->out_off + 1;
                pt->head++;
        }
        atomic_store_explicit(&pt->pos_pub, pt->next, RELAXED);
}

static void lat_observe(aagw_flow_t *f, int64_t ms) {
        int b = 0;
        if (ms < 0)
                ms = 0;
        while (b < AAGW_LAT_BUCKETS - 1 && ms > aagw_lat_bounds_ms[b])
                b++;
        INC(f->lat_buckets[b]);
        ADD(f->lat_sum, (uint64_t)ms);
}

/* ---------------------------------------------------- DELIVERY REPORTS -- */

/* A copy of one of our heartbeats reached the target: its age is this
 * direction's replication latency, and its arrival our liveness. */
static void heartbeat_seen(aagw_flow_t *f, const rd_kafka_message_t *m) {
        struct aagw_mm2_heartbeat hb;

        if (!aagw_mm2_heartbeat_decode(m->key, m->key_len, m->payload, m->len,
                                       &hb) ||
            strcmp(hb.source, f->source) || strcmp(hb.target, f->target))
                return;
        atomic_store_explicit(&f->hb_latency_ms, f->now_cache - hb.timestamp_ms,
                              RELAXED);
        atomic_store_explicit(&f->hb_last_ms, f->now_cache, RELAXED);
}


/* The producer's own limit (message.max.bytes) or the broker's. */
bool flow_too_large(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
               err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

/* A record the target refused for good (produce_errors).  Scale-out:
 * counted when its transaction commits, as the redo meets it again. */
static void count_refusal(aagw_flow_t *f) {
        if (f->owner)
                f->txn_errs++;
        else
                INC(f->produce_errors);
}


/* Delivery report: runs on the flow thread (rd_kafka_poll(producer)). */
/* The target topic or partition does not exist (any more): deleted while
 * the flow ran.  Records in flight get this, as does a produce call. */
static bool target_gone(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
               err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
               err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
}

/* The target's authorizer refused the write: its ACLs, not the record,
 * are at fault, and the next record would be refused the same way.
 * Dead-lettering would move the position past records that were never
 * copied (and the dead-letter topic is refused as well, most likely). */
static bool write_denied(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
               err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED ||
               err == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
}

/* Fail closed on a write the target's ACLs deny: the position stays
 * before the record, and a start once the ACL is granted copies it. */
static void fail_write_denied(aagw_flow_t *f, struct ptrack *pt,
                              const char *topic, rd_kafka_resp_err_t err) {
        if (atomic_load(&f->ctl.stop))
                return;
        flow_fail(f,
                  "write to topic %s at %s denied (%s): allow aagw's "
                  "principal WRITE on it (and IDEMPOTENT_WRITE on the "
                  "cluster for Kafka before 3.0); %s [%d] stays where it "
                  "was, nothing was dead-lettered, and a start once it is "
                  "allowed copies on from there",
                  topic, f->target, rd_kafka_err2name(err), pt->tt->topic,
                  (int)pt->partition);
}

/* Fail closed on a vanished target: its copies are gone with it, so
 * nothing sent to it may count as delivered.  The next start creates it
 * again and copies the source anew (flow_reconcile() sees the reset). */
static void fail_target_gone(aagw_flow_t *f, struct ptrack *pt,
                             rd_kafka_resp_err_t err) {
        if (atomic_load(&f->ctl.stop))
                return;
        INC(f->target_resets);
        flow_fail(f,
                  "target topic %s [%d] at %s is gone (deleted?): %s; the "
                  "copies it held are lost with it; restart aagw to create "
                  "it again and copy %s from its log start",
                  pt->tt->remote, (int)pt->partition, f->target,
                  rd_kafka_err2str(err), pt->tt->topic);
}

void flow_on_delivery(void *stage, void *t, const rd_kafka_message_t *m) {
        aagw_flow_t   *f   = stage;
        struct token  *tok = t;
        struct ptrack *pt  = tok->pt;
        struct slot   *sl = &pt->ring[tok->seq & (pt->cap - 1)];

        if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
            m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT ||
            m->err == RD_KAFKA_RESP_ERR__DESTROY) {
                /* Shutting down with records unacknowledged: they are
                 * neither delivered nor failed; the position stays before
                 * them and a restart sends them again. */
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err && f->owner) {
                /* Scale-out: any failed record fails its transaction
                 * (librdkafka makes it abortable), which can take no
                 * dead-letter copy either: flow_scale_poll() aborts it and
                 * copies the partitions again (flow_scale_failed()). */
                replicator_note_authz(f->target, m->err, "WRITE", "topic %s",
                                      rd_kafka_topic_name(m->rkt));
                flow_scale_failed(f, tok, m);
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err && target_gone(m->err)) {
                /* Not about this record: the copy is not there, and
                 * dead-lettering it would move the position past it. */
                if (!tok->dlq)
                        fail_target_gone(f, pt, m->err);
                else
                        flow_fail(f, "dead-letter topic %s at %s: %s",
                                  f->dlq_topic, f->target,
                                  rd_kafka_err2str(m->err));
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err && write_denied(m->err)) {
                replicator_note_authz(f->target, m->err, "WRITE", "topic %s",
                                      rd_kafka_topic_name(m->rkt));
                fail_write_denied(f, pt, rd_kafka_topic_name(m->rkt),
                                  m->err);
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->err) {
                /* Retriable errors never get here (unlimited delivery
                 * timeout): this one is permanent.  The record goes to
                 * the dead-letter topic with the error; a dead-letter
                 * copy too large for the target goes again without the
                 * record's key, value and headers; if that fails too,
                 * the flow fails closed rather than drop it. */
                count_refusal(f);
                replicator_note_authz(f->target, m->err, "WRITE", "topic %s",
                                      rd_kafka_topic_name(m->rkt));
                if (tok->dlq && !tok->stub && flow_too_large(m->err)) {
                        flow_produce_dlq_stub(f, tok, m, rd_kafka_err2str(m->err));
                        return;
                }
                if (!tok->dlq) {
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64
                                 ": delivery to %s failed: %s; dead-lettering",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, rd_kafka_topic_name(m->rkt),
                                 rd_kafka_err2str(m->err));
                        flow_produce_dlq(f, tok, m, rd_kafka_err2str(m->err));
                        return;
                }
                flow_fail(f,
                          "%s [%d] offset %" PRId64
                          ": dead-letter delivery failed: %s",
                          pt->tt->topic, (int)pt->partition, sl->src_off,
                          rd_kafka_err2str(m->err));
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        if (m->offset < 0 &&
            !replicator_implicit_ack(&f->ctl, rd_kafka_topic_name(m->rkt),
                                     m->partition, pt->tt->topic, pt->partition,
                                     sl->src_off)) {
                /* Not trusted (an old librdkafka): not counted, the
                 * position stays before it. */
                ADD(f->inflight, -1);
                token_put(f, tok);
                return;
        }
        sl->done = 1;
        if (tok->dlq) {
                if (f->owner)
                        f->txn_dlq++; /* counted at the commit */
                else
                        INC(f->dead_lettered);
        } else {
                if (tok->alone) {
                        /* A suspect, acknowledged alone: it was only
                         * batched with the record refused for good. */
                        struct refused_rec *rr =
                            refused_find(f->tx.refused, pt->tt->topic,
                                         pt->partition, sl->src_off);
                        if (rr)
                                refused_del(f->tx.refused, rr);
                }
                sl->out_off = m->offset;
                INC(f->records_out);
                INC(pt->records_out);
                ADD(f->bytes_out, m->len + m->key_len);
                lat_observe(f, f->now_cache - sl->origin_ms);
                if (pt->tt->is_hb)
                        heartbeat_seen(f, m);
        }
        ADD(f->inflight, -1);
        token_put(f, tok);
        ring_advance(f, pt);
}

/* ------------------------------------------------------------ PRODUCE --- */

/* Produce, waiting out a full local queue (backpressure) while serving
 * delivery reports.  Returns 0, or -1 with the error in 'errp' for
 * anything but a full queue, or when stopping. */
static int produce_retry(aagw_flow_t *f, rd_kafka_topic_t *rkt,
                         int32_t partition, const rd_kafka_message_t *m,
                         rd_kafka_headers_t *hdrs, int64_t ts, void *opaque,
                         rd_kafka_resp_err_t *errp) {
        *errp = replicator_produce(f->out, rkt, partition, m, hdrs, ts,
                                   opaque, &f->ctl.stop, &f->now_cache);
        return *errp ? -1 : 0;
}


/* Our own headers are kept in a dead-letter copy for the diagnosis, but
 * none longer than this (a valid aagw.prov is at most 2,369 bytes): a
 * hostile 1 MB one would make the copy too large for the target, and the
 * flow would fail on that record at every start. */
#define DLQ_OWN_HDR_MAX 4096
/* librdkafka's fetch.max.bytes: the most one fetch answer brings, so the
 * most one connection receives per round trip whatever its TCP window. */
#define FETCH_ANSWER_MAX (50LL << 20)
/* What a connection carries per round trip at the least: twice Kafka's
 * default socket.send.buffer.bytes (102400). */
#define FETCH_CONN_FLOOR (200LL << 10)

/* The dead-letter headers: why, and where the record came from. */
static void dlq_headers(aagw_flow_t *f, struct token *tok,
                        rd_kafka_headers_t *h, const char *why) {
        struct ptrack *pt = tok->pt;
        struct slot   *sl = &pt->ring[tok->seq & (pt->cap - 1)];
        char           name[AAGW_AFFIX_MAX + 32], coord[AAGW_TOPIC_MAX + 48];
        const char    *prefix = f->hop_hdr; /* "<prefix>hop" */
        size_t         plen   = strlen(prefix) - 3;

        snprintf(name, sizeof(name), "%.*sdlq.reason", (int)plen, prefix);
        rd_kafka_header_add(h, name, -1, why, -1);
        snprintf(name, sizeof(name), "%.*sdlq.source", (int)plen, prefix);
        snprintf(coord, sizeof(coord), "%s:%s:%d:%" PRId64, f->source,
                 pt->tt->topic, (int)pt->partition, sl->src_off);
        rd_kafka_header_add(h, name, -1, coord, -1);
}

/* Produce the dead-letter copy of 'tok' with key and value of 'm' (or
 * none) and headers 'h' (taken over); fail the flow if the producer
 * refuses it for anything but its size (then the stub goes instead). */
static void dlq_send(aagw_flow_t *f, struct token *tok,
                     const rd_kafka_message_t *m, rd_kafka_headers_t *h,
                     bool with_record) {
        struct ptrack            *pt = tok->pt;
        struct slot              *sl = &pt->ring[tok->seq & (pt->cap - 1)];
        rd_kafka_resp_err_t       err;
        rd_kafka_timestamp_type_t tstype;
        int64_t            ts   = rd_kafka_message_timestamp(m, &tstype);
        rd_kafka_message_t none = {0};

        /* Created on first use: a topic handle makes the producer ask for
         * its metadata, which auto-creates it on many clusters, and an
         * empty dead-letter topic at every site is noise. */
        if (!f->dlq_rkt) {
                flow_dlq_ensure(f);
                f->dlq_rkt = rd_kafka_topic_new(f->out, f->dlq_topic, NULL);
        }
        if (!produce_retry(f, f->dlq_rkt, RD_KAFKA_PARTITION_UA,
                           with_record ? m : &none, h, ts, tok, &err))
                return;
        rd_kafka_headers_destroy(h);
        replicator_note_authz(f->target, err, "WRITE", "topic %s",
                              f->dlq_topic);
        if (with_record && flow_too_large(err)) {
                count_refusal(f);
                flow_produce_dlq_stub(f, tok, m, rd_kafka_err2str(err));
                return;
        }
        if (f->owner && !target_gone(err) && !atomic_load(&f->ctl.stop)) {
                /* Scale-out: the transaction is unusable (its state, a
                 * fence), as in flow_handle(): it is redone, this record with
                 * it. */
                if (!f->tx.broken)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": produce to "
                                 "%s: %s; aborting the transaction",
                                 f->name, pt->tt->topic, (int)pt->partition,
                                 sl->src_off, f->dlq_topic,
                                 rd_kafka_err2str(err));
                f->tx.broken = true;
        } else if (!atomic_load(&f->ctl.stop)) {
                flow_fail(f,
                          "%s [%d] offset %" PRId64
                          ": cannot dead-letter to %s: %s",
                          pt->tt->topic, (int)pt->partition, sl->src_off,
                          f->dlq_topic, rd_kafka_err2str(err));
        }
        ADD(f->inflight, -1);
        token_put(f, tok);
}

/* Copy of 'm' for the dead-letter topic: original key, value, timestamp
 * and headers (ours only up to DLQ_OWN_HDR_MAX bytes each; the longer
 * ones are named in <prefix>dlq.dropped), plus where it came from and
 * why it is here. */
void flow_produce_dlq(aagw_flow_t *f, struct token *tok,
                      const rd_kafka_message_t *m, const char *why) {
        rd_kafka_headers_t *src_hdrs = NULL, *h;
        char                dropped[512] = "", name[AAGW_AFFIX_MAX + 32];
        const char         *hn;
        const void         *hv;
        size_t              hs, dl = 0;

        tok->dlq  = true;
        tok->stub = false;
        if (rd_kafka_message_headers(m, &src_hdrs) ||
            !(h = rd_kafka_headers_new(rd_kafka_header_cnt(src_hdrs) + 3)))
                h = rd_kafka_headers_new(4);
        for (size_t i = 0;
             src_hdrs && !rd_kafka_header_get_all(src_hdrs, i, &hn, &hv, &hs);
             i++) {
                if (hs > DLQ_OWN_HDR_MAX &&
                    aagw_prov_is_own_header(f->pol, hn)) {
                        if (dl < sizeof(dropped))
                                dl += (size_t)snprintf(
                                    dropped + dl, sizeof(dropped) - dl,
                                    "%s%.64s (%zu bytes)", dl ? ", " : "", hn,
                                    hs);
                        continue;
                }
                rd_kafka_header_add(h, hn, -1, hv, (ssize_t)hs);
        }
        dlq_headers(f, tok, h, why);
        if (dropped[0]) {
                snprintf(name, sizeof(name), "%.*sdlq.dropped",
                         (int)(strlen(f->hop_hdr) - 3), f->hop_hdr);
                rd_kafka_header_add(h, name, -1, dropped, -1);
        }
        dlq_send(f, tok, m, h, true);
}

/* The dead-letter copy was too large for the target: send one without
 * the record's key, value and headers, saying what was left out; the
 * source coordinates find the record. */
void flow_produce_dlq_stub(aagw_flow_t *f, struct token *tok,
                           const rd_kafka_message_t *m, const char *why) {
        rd_kafka_headers_t *src_hdrs = NULL, *h = rd_kafka_headers_new(4);
        char                note[256], name[AAGW_AFFIX_MAX + 32];
        const char         *hn;
        const void         *hv;
        size_t              hs, hbytes = 0;

        tok->stub = true;
        if (!rd_kafka_message_headers(m, &src_hdrs))
                for (size_t i = 0;
                     !rd_kafka_header_get_all(src_hdrs, i, &hn, &hv, &hs); i++)
                        hbytes += strlen(hn) + hs;
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: the dead-letter copy of %s [%d] offset %" PRId64
                 " is too large for %s (%s): dead-lettering it without its "
                 "key (%zu bytes), value (%zu bytes) and headers (%zu bytes)",
                 f->name, tok->pt->tt->topic, (int)tok->pt->partition,
                 tok->pt->ring[tok->seq & (tok->pt->cap - 1)].src_off,
                 f->dlq_topic, why, m->key_len, m->len, hbytes);
        dlq_headers(f, tok, h, why);
        snprintf(note, sizeof(note),
                 "key %zu bytes, value %zu bytes, headers %zu bytes left "
                 "out: too large",
                 m->key_len, m->len, hbytes);
        snprintf(name, sizeof(name), "%.*sdlq.stripped",
                 (int)(strlen(f->hop_hdr) - 3), f->hop_hdr);
        rd_kafka_header_add(h, name, -1, note, -1);
        dlq_send(f, tok, m, h, false);
}

/* ------------------------------------------------------------ RECORDS --- */

/* The consumer jumped from 'read_next' to 'offset'.  Compaction and
 * transaction markers do that legitimately; a log start beyond
 * 'read_next' means retention deleted records before we read them (the
 * consumer was reset to the earliest offset): count and log the gap. */
static void check_gap(aagw_flow_t *f, struct ptrack *pt, int64_t offset) {
        int64_t lo, hi;

        if (rd_kafka_get_watermark_offsets(
                flow_fx_consumer(f, pt->tt->topic, pt->partition),
                pt->tt->topic, pt->partition, &lo, &hi) ||
            lo <= pt->read_next)
                return;
        INC(f->truncations);
        ADD(f->truncated_records, (uint64_t)(offset - pt->read_next));
        aagw_log(AAGW_LOG_ERROR, "FLOW",
                 "%s: %s [%d]: source log start %" PRId64 " passed the read "
                 "position %" PRId64 ": records %" PRId64 "..%" PRId64
                 " were deleted before they were replicated; continuing at "
                 "%" PRId64,
                 f->name, pt->tt->topic, (int)pt->partition, lo,
                 pt->read_next, pt->read_next, offset - 1, offset);
        if (f->conf.mm2.truncation_fail)
                flow_fail(f, "%s [%d]: source truncated at %" PRId64,
                          pt->tt->topic, (int)pt->partition, pt->read_next);
}

/* Scale-out: what the transactions before found of this record
 * (refused.c); NULL: nothing. */
static struct refused_rec *refused_of(aagw_flow_t *f, const struct ttrack *tt,
                                      const rd_kafka_message_t *m) {
        if (!f->owner || !refused_count(f->tx.refused))
                return NULL;
        return refused_find(f->tx.refused, tt->topic, m->partition, m->offset);
}

/* Serve delivery reports until at most 'until' records are in flight,
 * or 'timeout_ms' passed. */
static void settle_inflight(aagw_flow_t *f, int64_t until, int timeout_ms) {
        stage_settle(f->out, &f->inflight, until, timeout_ms, &f->ctl.stop,
                     &f->now_cache);
}

/* Decide and act on one consumed record.  Returns true if 'm' now belongs
 * to an in-flight produce (destroyed with its final delivery report). */
bool flow_handle(aagw_flow_t *f, rd_kafka_message_t *m) {
        struct aagw_verdict *v = &f->verdict;
        struct ttrack       *tt;
        struct ptrack       *pt;
        struct aagw_rec      rec;
        rd_kafka_timestamp_type_t tstype;
        uint64_t             seq;
        char                 why[640];

        if (aagw_kafka_fatal(f->fx[f->cur_fx].c, m->err, why, sizeof(why))) {
                flow_fail(f, "consume: %s", why);
                return false;
        }
        if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        aagw_log(AAGW_LOG_WARN, "FLOW", "%s: consume: %s",
                                 f->name, rd_kafka_message_errstr(m));
                replicator_note_authz(f->source, m->err, "READ",
                                      "topic %s, group %s",
                                      m->rkt ? rd_kafka_topic_name(m->rkt)
                                             : "?",
                                      f->group);
                return false;
        }
        INC(f->records_in);
        if (m->rkt == f->last_rkt) {
                tt = f->last_tt;
        } else {
                tt          = flow_topic_find(f, rd_kafka_topic_name(m->rkt));
                f->last_rkt = m->rkt;
                f->last_tt  = tt;
        }
        pt = tt ? flow_part_get(f, tt, m->partition) : NULL;
        if (!pt || !pt->assigned || pt->held)
                return false; /* not ours (any more), or not yet: it will
                                 be re-read */
        if (m->offset < pt->read_next)
                return false; /* already taken in (re-fetch after a seek) */
        /* (Scale-out: the stage loop consumes only with a transaction open.) */
        f->txn_dirty = true;
        if (pt->start.pending) {
                struct replicator_start_ctx sc = {
                    flow_fx_consumer(f, tt->topic, pt->partition), "FLOW",
                    f->name, f->batch_no, &f->start_refetches};
                if (replicator_start_take(&pt->start, &sc, tt->topic,
                                          pt->partition, pt->read_next,
                                          m->offset))
                        return false;
        }
        if (pt->next < 0)
                pt->next = m->offset; /* from the beginning */
        else if (m->offset > pt->read_next)
                check_gap(f, pt, m->offset);
        pt->read_next = m->offset + 1;

        memset(&rec, 0, sizeof(rec));
        rec.topic        = tt->topic;
        rec.partition    = m->partition;
        rec.offset       = m->offset;
        rec.timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
        rec.key          = m->key;
        rec.key_len      = m->key_len;
        rec.value        = m->payload;
        rec.value_len    = m->len;
        rec.hdr_cnt      = flow_collect_headers(f, m);
        rec.hdrs         = f->hdrs;

        if (aagw_repl_verdict(f->pol, f->source, f->target, &rec, tt->id_rule,
                              f->conf.verdict_flags |
                                  (tt->prechecked ? AAGW_VERDICT_F_PRECHECKED
                                                  : 0),
                              v)) {
                flow_fail(f, "%s [%d] offset %" PRId64 ": verdict failed",
                          tt->topic, (int)m->partition, m->offset);
                return false;
        }
        int64_t origin_ms = v->kind == AAGW_VERDICT_REPLICATE
                                ? aagw_hlc_ms(v->prov.hlc)
                                : rec.timestamp_ms;
        if (ring_push(pt, m->offset, origin_ms, &seq)) {
                flow_fail(f, "out of memory");
                return false;
        }
        struct slot *sl = &pt->ring[seq & (pt->cap - 1)];

        if (v->path_forged) {
                /* Not written here by aagw: the sites on its path will
                 * never all hold it.  Logged at 1, 2, 4, 8, ... */
                uint64_t n = atomic_fetch_add_explicit(
                                 &f->diverged, 1, memory_order_relaxed) +
                             1;
                if (!(n & (n - 1)))
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64 ": its "
                                 "provenance path contradicts the topic "
                                 "name (forged, or forwarded from a copy): "
                                 "the sites will diverge (%" PRIu64
                                 " such records so far)",
                                 f->name, tt->topic, (int)m->partition,
                                 m->offset, n);
        }
        if (v->kind == AAGW_VERDICT_SKIP) {
                INC(f->skipped[v->skip]);
                sl->done = 1;
                ring_advance(f, pt);
                return false;
        }
        if (v->kind == AAGW_VERDICT_REJECT) {
                INC(f->rejected[v->reason ? v->reason : v->id_reason]);
                if (v->action == AAGW_BAD_FAIL) {
                        flow_fail(f,
                                  "%s [%d] offset %" PRId64
                                  ": bad provenance (%s) and bad_provenance "
                                  "is fail",
                                  tt->topic, (int)m->partition, m->offset,
                                  aagw_reason_name(v->reason ? v->reason
                                                             : v->id_reason));
                        return false;
                }
                struct token *tok = token_get(f);
                if (!tok) {
                        flow_fail(f, "out of memory");
                        return false;
                }
                tok->pt  = pt;
                tok->seq = seq;
                tok->base.src = m;
                ADD(f->inflight, 1);
                struct refused_rec *rr = refused_of(f, tt, m);
                if (rr && rr->dlq_err) {
                        /* Scale-out: its dead-letter copy was too large
                         * for the target when the transaction was tried
                         * before: without the record this time. */
                        rr->resolved = true;
                        count_refusal(f);
                        flow_produce_dlq_stub(f, tok, m,
                                         rd_kafka_err2str(rr->dlq_err));
                        return true;
                }
                flow_produce_dlq(f, tok, m,
                            aagw_reason_name(v->reason ? v->reason
                                                       : v->id_reason));
                return true;
        }
        if (v->reason != AAGW_REASON_OK)
                INC(f->bad_passed);

        /* The copy: the producer's headers (taken over from the consumed
         * record, not copied) minus any under our prefix, then the
         * verdict's provenance, and the hop coordinates when the record
         * was not stamped here. */
        rd_kafka_headers_t *h = replicator_copy_headers(
            f->pol, m, rec.hdrs, rec.hdr_cnt, rec.hdr_cnt > 0,
            v->hdrs.cnt + 1);
        for (size_t i = 0; i < v->hdrs.cnt; i++)
                rd_kafka_header_add(h, v->hdrs.hdrs[i].name, -1,
                                    v->hdrs.hdrs[i].value,
                                    (ssize_t)v->hdrs.hdrs[i].size);
        if (!v->fresh) {
                char   hop[AAGW_COORDS_MAX];
                size_t n = aagw_coords_format(hop, tt->topic, m->partition,
                                              m->offset);
                rd_kafka_header_add(h, f->hop_hdr, -1, hop, (ssize_t)n);
        }
        struct token *tok = token_get(f);
        if (!tok) {
                rd_kafka_headers_destroy(h);
                flow_fail(f, "out of memory");
                return false;
        }
        tok->pt    = pt;
        tok->seq   = seq;
        tok->dlq   = false;
        tok->alone = false;
        tok->base.src = m;
        ADD(f->inflight, 1);
        struct refused_rec *rr = refused_of(f, tt, m);
        if (rr && rr->confirmed) {
                /* Scale-out: the target refused this copy for good when
                 * the transaction was tried before (flow_scale_failed()): its
                 * dead-letter copy goes into this one instead, with the
                 * copy's headers, as flow_on_delivery() sends it in
                 * single-process mode. */
                rd_kafka_message_set_headers(m, h);
                rr->resolved = true;
                count_refusal(f);
                if (rr->dlq_err)
                        flow_produce_dlq_stub(f, tok, m,
                                         rd_kafka_err2str(rr->dlq_err));
                else
                        flow_produce_dlq(f, tok, m, rd_kafka_err2str(rr->err));
                return true;
        }
        if (rr && !f->tx.broken) {
                /* A suspect: alone in its batch, so that the target's
                 * answer is about this record. */
                settle_inflight(f, 1, STAGE_ALONE_MS);
                tok->alone = atomic_load(&f->inflight) == 1;
        }
        rd_kafka_resp_err_t err;
        if (produce_retry(f, tt->rkt, m->partition, m, h, rec.timestamp_ms,
                          tok, &err)) {
                if (flow_too_large(err) && !atomic_load(&f->ctl.stop)) {
                        /* The copy's headers go back on the record for
                         * its dead-letter copy (as a refused copy's
                         * delivery report would carry them). */
                        rd_kafka_message_set_headers(m, h);
                        /* Over the producer's message.max.bytes with our
                         * headers: permanent, as a refusal by the broker
                         * would be (flow_on_delivery()).  Scale-out as well:
                         * nothing was sent, the transaction goes on. */
                        tok->alone = false;
                        count_refusal(f);
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: %s [%d] offset %" PRId64
                                 ": the copy is too large (%s); "
                                 "dead-lettering",
                                 f->name, tt->topic, (int)m->partition,
                                 m->offset, rd_kafka_err2str(err));
                        flow_produce_dlq(f, tok, m, rd_kafka_err2str(err));
                        return true;
                }
                rd_kafka_headers_destroy(h);
                ADD(f->inflight, -1);
                tok->base.src = NULL; /* the caller still owns 'm' */
                token_put(f, tok);
                replicator_note_authz(f->target, err, "WRITE", "topic %s",
                                      tt->remote);
                if (f->owner && !target_gone(err) &&
                    !atomic_load(&f->ctl.stop)) {
                        /* Scale-out: the transaction is unusable (its
                         * state, a fence): every partition is copied
                         * again from what the target holds
                         * (flow_scale_drop()), this record with them. */
                        if (!f->tx.broken)
                                aagw_log(AAGW_LOG_WARN, "FLOW",
                                         "%s: produce to %s [%d]: %s; "
                                         "aborting the transaction",
                                         f->name, tt->remote,
                                         (int)m->partition,
                                         rd_kafka_err2str(err));
                        f->tx.broken = true;
                } else if (target_gone(err))
                        fail_target_gone(f, pt, err);
                else if (write_denied(err))
                        /* librdkafka refuses at once what a refused
                         * write's topic gets next. */
                        fail_write_denied(f, pt, tt->remote, err);
                else if (!atomic_load(&f->ctl.stop))
                        flow_fail(f, "produce to %s [%d]: %s", tt->remote,
                                  (int)m->partition, rd_kafka_err2str(err));
                return false;
        }
        if (tok->alone) {
                /* Its answer before anything else is sent.  (Still
                 * unanswered, the token is still ours: nothing else is in
                 * flight.) */
                settle_inflight(f, 0, STAGE_ALONE_MS);
                if (atomic_load(&f->inflight) > 0)
                        tok->alone = false;
        }
        return true;
}

/* ------------------------------------------------------------- THREAD --- */

void flow_set_paused(aagw_flow_t *f, bool pause) {
        for (int k = 0; k < f->nfx; k++) {
                rd_kafka_topic_partition_list_t *a = NULL;
                if (rd_kafka_assignment(f->fx[k].c, &a) || !a)
                        continue;
                if (pause)
                        rd_kafka_pause_partitions(f->fx[k].c, a);
                else {
                        /* Held partitions stay paused: they have no target
                         * partition to go to. */
                        rd_kafka_topic_partition_list_t *r =
                            rd_kafka_topic_partition_list_new(a->cnt);
                        for (int i = 0; i < a->cnt; i++) {
                                struct ttrack *tt =
                                    flow_topic_find(f, a->elems[i].topic);
                                struct ptrack *pt =
                                    tt ? flow_part_get(f, tt,
                                                       a->elems[i].partition)
                                       : NULL;
                                if (!pt || !pt->held)
                                        rd_kafka_topic_partition_list_add(
                                            r, a->elems[i].topic,
                                            a->elems[i].partition);
                        }
                        rd_kafka_resume_partitions(f->fx[k].c, r);
                        rd_kafka_topic_partition_list_destroy(r);
                }
                rd_kafka_topic_partition_list_destroy(a);
        }
        f->paused = pause;
        atomic_store(&f->ctl.state, pause ? AAGW_FLOW_PAUSED : AAGW_FLOW_RUNNING);
        aagw_log(AAGW_LOG_INFO, "FLOW", "%s: %s", f->name,
                 pause ? "paused" : "resumed");
}

static int make_lease(aagw_flow_t *f, char *errstr, size_t errstr_size);

/* Serve the identity lease: its group's callbacks (flow_lease_cb()) and
 * errors.  Fenced, it sets f->fenced for flow_lease_fenced(). */
void flow_lease_poll(aagw_flow_t *f) {
        rd_kafka_message_t *m;
        char                why[640];

        while (f->lease && !f->fenced &&
               (m = rd_kafka_consumer_poll(f->lease, 0))) {
                if (m->err == RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT) {
                        /* The broker refuses to let it join, and will
                         * forever: say what to change. */
                        flow_fail(f, "identity lease: %s: session.timeout.ms "
                                     "is outside %s's group.min/max."
                                     "session.timeout.ms (set clusters.%s."
                                     "properties.consumer.session.timeout.ms)",
                                  rd_kafka_message_errstr(m), f->source,
                                  f->source);
                } else if (aagw_kafka_fatal(f->lease, m->err, why,
                                            sizeof(why))) {
                        if (rd_kafka_fatal_error(f->lease, NULL, 0) ==
                            RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID)
                                f->fenced = true;
                        else
                                flow_fail(f, "identity lease: %s", why);
                } else if (m->err) {
                        /* (A subscribed topic deleted meanwhile, a
                         * coordinator moving: the lease reads nothing.) */
                        aagw_log(AAGW_LOG_DEBUG, "FLOW",
                                 "%s: identity lease: %s", f->name,
                                 rd_kafka_message_errstr(m));
                        replicator_note_authz(f->source, m->err, "READ",
                                              "group %s", f->lease_group);
                }
                rd_kafka_message_destroy(m);
        }
}

/* The identity lease was fenced (FENCED_INSTANCE_ID, fatal in
 * librdkafka): its group gave the flow's group.instance.id to a newer
 * member, another process with this gateway id and site, or this
 * process's own lease rejoining after the process stalled past its
 * session.  Stop copying (the records in flight acknowledged, the
 * positions stored, every partition unassigned), replace the lease, and
 * copy again, every partition reconciled against the target, only once
 * the new lease has held the id for LEASE_SETTLE_MS (flow_single_after()): the
 * other process, fenced in turn, has stopped copying by then.  Fails the flow, and returns
 * -1, if it cannot, or if the last restart was less than REFENCE_MS ago:
 * two processes take the id from each other, and this one gives up. */
int flow_lease_fenced(aagw_flow_t *f) {
        char    why[512], msg[640], errstr[512];
        int64_t now = aagw_mono_ms();

        f->fenced = false;
        rd_kafka_fatal_error(f->lease, why, sizeof(why));
        if (f->restart_ms && now - f->restart_ms < REFENCE_MS) {
                aagw_kafka_fatal(f->lease, RD_KAFKA_RESP_ERR__FATAL, msg,
                                 sizeof(msg));
                flow_fail(f, "identity lease: %s; fenced again %.1f s after "
                             "the lease was restarted for the same reason",
                          msg, (double)(now - f->restart_ms) / 1000.0);
                return -1;
        }
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: identity lease fenced (%s): group %s gave its "
                 "group.instance.id %s to a newer member, another process "
                 "with this gateway id and site or this process's own rejoin "
                 "after it stalled past session.timeout.ms; stopping the "
                 "copy and restarting the lease",
                 f->name, why, f->lease_group, f->instance);
        if (flow_unassign(f, NULL, RESTART_DRAIN_MS))
                return -1;
        rd_kafka_destroy_flags(f->lease, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
        f->lease      = NULL;
        f->lease_held = false;
        f->lease_wait = true;
        if (make_lease(f, errstr, sizeof(errstr))) {
                flow_fail(f, "identity lease fenced (%s); cannot restart it: "
                             "%s",
                          why, errstr);
                return -1;
        }
        f->restart_ms = aagw_mono_ms();
        INC(f->consumer_restarts);
        f->subscription_dirty = true;
        flow_discover(f);
        return 0;
}

/* After a fence, the restarted lease holds the id: every partition is
 * the flow's again (flow_assign_new(): reconciled against the target, which
 * the other process may have written to meanwhile). */
void flow_lease_regained(aagw_flow_t *f) {
        f->lease_wait = false;
        aagw_log(AAGW_LOG_INFO, "FLOW",
                 "%s: identity lease restarted; copying again", f->name);
        for (size_t i = 0; i < f->ntopics; i++)
                if (f->topics[i]->active)
                        flow_assign_new(f, f->topics[i]);
}

/* ---------------------------------------------------------- LIFECYCLE --- */

/* The source consumer never joins its group: its session timeout only
 * bounds how long a commit waits for a coordinator (librdkafka holds it
 * that long), and its destroy waits for that commit.  The commits are
 * for lag tooling, the positions are the state dir's: a commit that
 * could not be made is made again at the next save, and a stop with the
 * source gone waits 0.5 s instead of the session timeout an operator set
 * for the identity lease (or librdkafka's 45 s).  Applied after the
 * operator's consumer properties. */
static const char *const consumer_last[] = {
    "session.timeout.ms", "500",
    "heartbeat.interval.ms", "100",
    NULL};

static rd_kafka_t *make_client(aagw_flow_t *f, rd_kafka_type_t type,
                               const char *role, const char *bootstraps,
                               const char *const *props, size_t nprops,
                               const char *const *extra, char *errstr,
                               size_t errstr_size) {
        struct replicator_client c = {.type         = type,
                                      .who          = f->name,
                                      .bootstraps   = bootstraps,
                                      .props        = props,
                                      .prop_cnt     = nprops,
                                      .opaque       = f,
                                      .delivery     = &f->delivery,
                                      .last = !strcmp(role, "consumer")
                                                  ? consumer_last
                                                  : NULL,
                                      .rebalance_cb = !strcmp(role, "lease")
                                                          ? flow_lease_cb
                                                          : NULL};
        return replicator_client(&c, role, extra, errstr, errstr_size);
}

/* Make the identity lease: at the start, and again after a fence
 * (flow_lease_fenced()).  flow_discover() subscribes it.  Returns 0, or -1 with
 * 'errstr' set. */
static int make_lease(aagw_flow_t *f, char *errstr, size_t errstr_size) {
        const char *extra[] = {
            "group.id", f->lease_group,
            "group.instance.id", f->instance,
            "enable.auto.commit", "false",
            "enable.auto.offset.store", "false",
            "session.timeout.ms", "10000",
            "heartbeat.interval.ms", "1000",
            NULL};

        f->lease = make_client(f, RD_KAFKA_CONSUMER, "lease",
                               f->conf.source_bootstraps, f->conf.source_props,
                               f->conf.source_prop_cnt, extra, errstr,
                               errstr_size);
        if (!f->lease)
                return -1;
        rd_kafka_poll_set_consumer(f->lease);
        return 0;
}

/* Make the source consumers, f->nfx of them (assign-only; the first's
 * group id for the commits), their queues and stall watches.  The queue
 * bound is the window's, shared among them.  Returns 0, or -1 with
 * 'errstr' set (those made are left for flow_drop_consumers()). */
static int make_consumers(aagw_flow_t *f, char *errstr, size_t errstr_size) {
        char    queue_s[24];
        int64_t queue = f->window.queue_kbytes / (f->nfx > 0 ? f->nfx : 1);

        /* (No less than a few answers' worth each.) */
        snprintf(queue_s, sizeof(queue_s), "%" PRId64,
                 queue < 4096 ? (int64_t)4096 : queue);
        const char *extra[] = {
            "group.id", f->group, "enable.auto.commit", "false",
            "enable.auto.offset.store", "false", "auto.offset.reset",
            "earliest", "enable.partition.eof", "false",
            /* The window sized from the round trip, if not the base
             * (flow_fetch_window()); else the list ends here. */
            f->window.base ? NULL : "max.partition.fetch.bytes",
            f->window.partition_s, "queued.max.messages.kbytes",
            f->nfx > 1 ? queue_s : f->window.queue_s, NULL};

        if (f->nfx < 1)
                f->nfx = 1;
        for (int k = 0; k < f->nfx; k++) {
                struct flow_fetcher *x = &f->fx[k];
                x->c                   = make_client(
                                      f, RD_KAFKA_CONSUMER, "consumer", f->conf.source_bootstraps,
                                      f->conf.source_props, f->conf.source_prop_cnt, extra,
                                      errstr, errstr_size);
                if (!x->c)
                        return -1;
                rd_kafka_poll_set_consumer(x->c);
                x->q = rd_kafka_queue_get_consumer(x->c);
                if (!(x->stalls = aagw_stall_watch_new(x->c))) {
                        snprintf(errstr, errstr_size, "cannot start a thread");
                        return -1;
                }
        }
        f->consumer = f->fx[0].c;
        atomic_store(&f->window_conns, f->nfx);
        return 0;
}

/* Destroy the source consumers without closing them (nothing of a group
 * to leave: they are assign-only). */
static void flow_drop_consumers(aagw_flow_t *f) {
        for (int k = 0; k < AAGW_FETCH_CONNECTIONS_MAX; k++) {
                struct flow_fetcher *x = &f->fx[k];
                aagw_stall_watch_destroy(x->stalls);
                if (x->q)
                        rd_kafka_queue_destroy(x->q);
                if (x->c)
                        rd_kafka_destroy_flags(
                            x->c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
                *x = (struct flow_fetcher){0};
        }
        f->consumer = NULL;
}

/* Size the source consumer's fetch window from the round trip to the
 * source (aagw_fetch_window_size()), once, before anything is assigned to
 * the consumer: a consumer's properties are fixed when it is made, so a
 * window other than the base means a new consumer, which costs nothing
 * while it holds no partition.  A source that does not answer yet is
 * measured again before the next discovery; one that only answered
 * discovery keeps the base window (logged).  The source's metadata it
 * asks for (all topics, for the partitions the window is spread over) is
 * the discovery's too: returns true with it in 'merr' and 'mdp' (the
 * caller's), false if it asked for none. */
static bool flow_fetch_window(aagw_flow_t *f, rd_kafka_resp_err_t *merr,
                              const struct rd_kafka_metadata **mdp) {
        const struct rd_kafka_metadata *md;
        char                            err[512];
        int                             parts = 0;
        int64_t                         rtt;

        if (f->window_done)
                return false;
        if (f->ntopics) {
                f->window_done = true;
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: fetch window left at its base size: the round "
                         "trip to %s was not measured before its first "
                         "partitions were assigned (a restart measures it)",
                         f->name, f->source);
                return false;
        }
        *mdp = NULL;
        *merr =
            aagw_kafka_metadata(f->meta, true, NULL, mdp, 5000, &f->ctl.stop);
        if (*merr) /* measured again before the next discovery */
                return true;
        md = *mdp;
        for (int i = 0; i < md->topic_cnt; i++)
                if (!md->topics[i].err && md->topics[i].partition_cnt > 0 &&
                    flow_topic_copied(f, md->topics[i].topic))
                        parts += md->topics[i].partition_cnt;
        if ((rtt = aagw_kafka_round_trip_us(f->meta, 5000, &f->ctl.stop)) < 0)
                return true;
        f->window_done = true;
        atomic_store(&f->window_rtt_us, rtt);
        /* Measured all the same: the round trip is a gauge.  Set by
         * hand, the window is the operator's (window_bytes stays 0: not
         * aagw's), and so is the number of connections. */
        bool by_hand = aagw_fetch_window_set_by_hand(
            f->conf.source_props, f->conf.source_prop_cnt, "consumer");
        if (!by_hand) {
                aagw_fetch_window_size(
                    &f->window, f->conf.fetch_window_fixed ? -1 : rtt, parts);
                atomic_store(&f->window_bytes, f->window.window_bytes);
        }
        /* What a round trip should bring, for the number of connections:
         * the window before its rounding to partitions, so that a link
         * whose connections carry little (a broker's small send buffer)
         * gets more of them even while the window is the base. */
        int64_t need = 0;
        if (!by_hand && !f->conf.fetch_window_fixed &&
            rtt >= AAGW_FETCH_CONNECTIONS_MIN_RTT_US) {
                need = AAGW_FETCH_WINDOW_RATE * rtt / 1000000;
                if (need > AAGW_FETCH_WINDOW_MAX)
                        need = AAGW_FETCH_WINDOW_MAX;
        }
        int64_t sndbuf = -1;
        /* (Not asked below what any connection carries, nor near the
         * cluster: no request more at the start.) */
        if (need > FETCH_CONN_FLOOR && f->conf.fetch_connections <= 0 &&
            md->broker_cnt > 0)
                sndbuf = aagw_kafka_broker_send_buffer(
                    f->meta, md->brokers[0].id, 1000 + (int)(3 * rtt / 1000));
        int64_t conn = aagw_fetch_connection_bytes(aagw_tcp_receive_max(),
                                                   sndbuf, FETCH_ANSWER_MAX);
        int     n    = aagw_fetch_connections(need, conn, parts,
                                              f->conf.fetch_connections);
        if (f->window.base && n == 1) {
                aagw_log(AAGW_LOG_DEBUG, "FLOW",
                         "%s: round trip to %s %.1f ms: base fetch window",
                         f->name, f->source, (double)rtt / 1000);
                return true;
        }
        if (f->window.base)
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: round trip to %s %.1f ms: base fetch window, "
                         "over %d connections (one brings at most %" PRId64
                         " KiB per round trip; "
                         "replication.fetch_connections sets the number)",
                         f->name, f->source, (double)rtt / 1000, n, conn >> 10);
        else
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: round trip to %s %.1f ms: fetch window %" PRId64
                         " MiB per round trip (max.partition.fetch.bytes "
                         "%" PRId64 " over %d partitions, "
                         "queued.max.messages.kbytes %" PRId64 "), over %d "
                         "connection%s (one brings at most %" PRId64 " KiB "
                         "per round trip; replication.fetch_window fixed "
                         "keeps the base, replication.fetch_connections "
                         "sets the number)",
                         f->name, f->source, (double)rtt / 1000,
                         f->window.window_bytes >> 20,
                         f->window.partition_bytes, f->window.partitions,
                         f->window.queue_kbytes, n, n == 1 ? "" : "s",
                         conn >> 10);
        flow_drop_consumers(f);
        f->nfx = n;
        if (make_consumers(f, err, sizeof(err)))
                replicator_fail(&f->ctl,
                                "source consumers with a larger fetch window: "
                                "%s",
                                err);
        return true;
}

aagw_flow_t *aagw_flow_new(const struct aagw_flow_conf *c, char *errstr,
                           size_t errstr_size) {
        aagw_flow_t *f = calloc(1, sizeof(*f));
        char         group[512], hp[AAGW_AFFIX_MAX + 1];

        if (!f) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        f->conf        = *c;
        f->src_reach.cluster = c->source;
        f->tgt_reach.cluster = c->target;
        f->tokens.size = sizeof(struct token);
        f->pol  = c->policy;
        aagw_fetch_window_size(&f->window, -1, 0);
        atomic_store(&f->window_rtt_us, -1);
        snprintf(f->source, sizeof(f->source), "%s", c->source);
        snprintf(f->target, sizeof(f->target), "%s", c->target);
        snprintf(f->name, sizeof(f->name), "%s->%s", c->source, c->target);
        snprintf(f->who, sizeof(f->who), "%s:", f->name);
        replicator_ctl_init(&f->ctl, "FLOW", f->who);
        atomic_store(&f->drain_ms, DRAIN_MS);
        f->delivery = (struct replicator_delivery){flow_on_delivery, f};
        snprintf(f->scope, sizeof(f->scope), "repl:%s->%s", c->source,
                 c->target);
        if (f->conf.refresh_ms <= 0)
                f->conf.refresh_ms = 5000;
        f->topics = calloc(MAX_TOPICS, sizeof(*f->topics));
        if (!f->topics) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        /* "<prefix>hop" lives under the provenance prefix, so the copy
         * step, which drops our own headers, drops it too. */
        snprintf(hp, sizeof(hp), "%s",
                 c->header_prefix ? c->header_prefix : "aagw.");
        snprintf(f->hop_hdr, sizeof(f->hop_hdr), "%shop", hp);
        if (aagw_repl_dlq_topic(f->pol, c->source, f->dlq_topic,
                                sizeof(f->dlq_topic))) {
                snprintf(errstr, errstr_size, "bad source alias %s", c->source);
                goto fail;
        }

        snprintf(group, sizeof(group), "aagw.%s.%s-%s", c->gateway_id,
                 c->source, c->target);
        /* The consumer assigns itself its partitions: a restarted process
         * reads again at once, not after the killed member's session
         * timed out and the group rebalanced.  A second process with the
         * same identity is told apart by the lease, a static member of a
         * group of its own (the commits' group stays without members, or
         * the broker would refuse them). */
        snprintf(f->group, sizeof(f->group), "%s", group);
        snprintf(f->lease_group, sizeof(f->lease_group), "%s.lease", group);
        aagw_kafka_instance_id(f->instance, sizeof(f->instance), group,
                               c->site);
        /* The reader only ever assign()s: the group id is never joined or
         * committed to, but librdkafka's consumer wants one. */
        char reader_group[600];
        snprintf(reader_group, sizeof(reader_group), "%s.reader", group);
        bool scale = c->scale_out && c->scale_out->enabled;
        if (scale) {
                snprintf(f->work_topic, sizeof(f->work_topic), "%s.work",
                         group);
                snprintf(f->owners_group, sizeof(f->owners_group),
                         "%s.owners", group);
                snprintf(f->txn_id, sizeof(f->txn_id), "%s.%s", group,
                         c->scale_out->member);
        }
        const char *reader_extra[] = {
            "group.id", reader_group,
            "enable.auto.commit", "false",
            /* The reader is read_committed (librdkafka's default), and a
             * target's last offsets may be transaction markers, which
             * never arrive as records: under scale-out always, and in a
             * copy that processes of a scale-out site (or another
             * transactional writer) wrote before.  The end of a scan is
             * then told by the partition's end (aagw_kafka_read_range()). */
            "enable.partition.eof", "true",
            "auto.offset.reset", "earliest",
            /* flow_reconcile() scans one partition after the other; with the
             * default 500 ms the fetch long-poll left over from the
             * previous partition delays the next one on the same broker
             * by half a second, per partition, inside the assignment. */
            "fetch.wait.max.ms", "10",
            NULL};
        /* Scale-out: the owners' group is the identity (no lease). */
        if (make_consumers(f, errstr, errstr_size) ||
            (!scale && make_lease(f, errstr, errstr_size)))
                goto fail;
        f->producer = make_client(f, RD_KAFKA_PRODUCER, "producer",
                                  c->target_bootstraps, c->target_props,
                                  c->target_prop_cnt,
                                  aagw_kafka_producer_props, errstr,
                                  errstr_size);
        if (!f->producer)
                goto fail;
        f->out    = f->producer; /* flow_scale_start() replaces it */
        f->reader = make_client(f, RD_KAFKA_CONSUMER, "reader",
                                c->target_bootstraps, c->target_props,
                                c->target_prop_cnt, reader_extra, errstr,
                                errstr_size);
        if (!f->reader)
                goto fail;
        const char *probe_kv[REPLICATOR_END_PROBE_KV];
        f->end_probe = make_client(f, RD_KAFKA_CONSUMER, "end-probe",
                                c->target_bootstraps, c->target_props,
                                c->target_prop_cnt,
                                replicator_end_probe_props(reader_group,
                                                           probe_kv),
                                errstr, errstr_size);
        if (!f->end_probe)
                goto fail;
        const char *hw_extra[] = {
            "group.id", reader_group,
            "enable.auto.commit", "false",
            "isolation.level", "read_uncommitted",
            NULL};
        if (scale &&
            !(f->hw_probe = make_client(f, RD_KAFKA_CONSUMER, "hw-probe",
                                        c->target_bootstraps, c->target_props,
                                        c->target_prop_cnt, hw_extra, errstr,
                                        errstr_size)))
                goto fail;
        f->meta = make_client(f, RD_KAFKA_PRODUCER, "meta",
                              c->source_bootstraps, c->source_props,
                              c->source_prop_cnt, NULL, errstr, errstr_size);
        if (!f->meta)
                goto fail;
        f->admin = make_client(f, RD_KAFKA_PRODUCER, "admin",
                               c->target_bootstraps, c->target_props,
                               c->target_prop_cnt, NULL, errstr, errstr_size);
        if (!f->admin)
                goto fail;
        /* The target gets no request of the flow thread's while nothing
         * is copied: a thread asks it, for /healthz. */
        if (!(f->prober = aagw_prober_new(f->admin, f->conf.refresh_ms,
                                          &f->tgt_reach))) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                goto fail;
        }
        if (c->mm2.takeover &&
            !(f->takeover = takeover_new(&f->conf, f->pol, f->name, errstr,
                                         errstr_size)))
                goto fail;
        {
                rd_kafka_t *ts = make_client(
                    f, RD_KAFKA_PRODUCER, "topics-src", c->source_bootstraps,
                    c->source_props, c->source_prop_cnt, NULL, errstr,
                    errstr_size);
                rd_kafka_t *tg =
                    ts ? make_client(f, RD_KAFKA_PRODUCER, "topics-tgt",
                                     c->target_bootstraps, c->target_props,
                                     c->target_prop_cnt, NULL, errstr,
                                     errstr_size)
                       : NULL;
                if (!tg) {
                        if (ts)
                                rd_kafka_destroy(ts);
                        goto fail;
                }
                f->remote_topics =
                    topics_new(f->name, f->pol, &c->topics, ts, tg);
                f->target_bs = strdup(c->target_bootstraps);
                if (!f->remote_topics || !f->target_bs) {
                        if (!f->remote_topics) {
                                rd_kafka_destroy(ts);
                                rd_kafka_destroy(tg);
                        }
                        snprintf(errstr, errstr_size, "out of memory");
                        goto fail;
                }
        }
        atomic_store(&f->hb_latency_ms, -1);
        if (c->mm2.heartbeat_ms > 0 || c->mm2.checkpoint_ms > 0 ||
            c->mm2.syncs) {
                f->mm2 = mm2_new(f, c, f->producer, errstr, errstr_size);
                if (!f->mm2)
                        goto fail;
        }
        atomic_store(&f->ctl.state, AAGW_FLOW_STARTING);
        return f;
fail:
        aagw_flow_destroy(f, 0);
        return NULL;
}

aagw_err_t aagw_flow_start(aagw_flow_t *f, char *errstr, size_t errstr_size) {
        stage_init(&f->stage, &flow_hooks,
                   flow_scaled(f) ? &flow_commit_scale : &flow_commit_single,
                   flow_scaled(f) ? &f->tx : NULL, f, &f->ctl, f->name,
                   &f->paused, 1024);
        int rc = pthread_create(&f->thread, NULL, stage_main, &f->stage);
        if (rc) {
                snprintf(errstr, errstr_size, "cannot start thread: %s",
                         strerror(rc));
                return AAGW_ERR_NOMEM;
        }
        f->thread_started = true;
        if (f->mm2 && mm2_start(f->mm2, errstr, errstr_size))
                return AAGW_ERR_NOMEM;
        if (topics_start(f->remote_topics, errstr, errstr_size))
                return AAGW_ERR_NOMEM;
        return AAGW_OK;
}

void aagw_flow_stop(aagw_flow_t *f) {
        atomic_store(&f->ctl.stop, true);
        mm2_stop(f->mm2);
        /* Its ping in progress (up to 2 s against a dead target) ends
         * while the flow drains, not in aagw_flow_destroy(). */
        aagw_prober_stop(f->prober);
        topics_stop(f->remote_topics);
}

void aagw_flow_pause(aagw_flow_t *f, bool pause) {
        atomic_store(&f->paused_req, pause);
}

void aagw_flow_destroy(aagw_flow_t *f, int timeout_ms) {
        if (!f)
                return;
        /* Before the stop: the thread reads it when it starts draining,
         * and again while it drains (after aagw_flow_stop() too). */
        atomic_store(&f->drain_ms, timeout_ms > 0 ? timeout_ms : 0);
        /* The side threads' stops too: a ping or a topic creation under
         * way on a target that stopped answering ends while the stage
         * drains, not after it. */
        aagw_flow_stop(f);
        if (f->thread_started)
                pthread_join(f->thread, NULL);
        aagw_prober_destroy(f->prober); /* before the admin client */
        f->prober = NULL;
        /* Before the producer it borrows; flushes its own. */
        mm2_destroy(f->mm2, 500);
        takeover_destroy(f->takeover);
        topics_destroy(f->remote_topics);
        free(f->target_bs);
        if (f->producer) {
                /* Delivery reports of anything left refer to tokens and
                 * partitions we are about to free: purge and serve them
                 * first (flow_on_delivery() leaves purged records undone).
                 * Every one: a report left unserved leaves its token's
                 * consumed record undestroyed, and with it the consumer
                 * topic it refers to.  Purged reports come within
                 * milliseconds; the bound is for a client that hangs. */
                stage_purge(f->out, &f->inflight, 5000);
        }
        for (size_t i = 0; f->topics && i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (tt->rkt)
                        rd_kafka_topic_destroy(tt->rkt);
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        if (tt->parts[p])
                                free(tt->parts[p]->ring);
                        free(tt->parts[p]);
                }
                free(tt->parts);
                free(tt->made);
                free(tt->topic);
                free(tt);
        }
        free(f->topics);
        if (f->dlq_rkt)
                rd_kafka_topic_destroy(f->dlq_rkt);
        /* After the topic handles on its producer: aborts what is open
         * and leaves the owners' group (the others take over at once). */
        owner_destroy(f->owner);
        stage_txn_deinit(&f->tx);
        _Static_assert(AAGW_FETCH_CONNECTIONS_MAX == 8,
                       "the source consumers listed below");
        for (int k = 0; k < AAGW_FETCH_CONNECTIONS_MAX; k++) {
                aagw_stall_watch_destroy(f->fx[k].stalls);
                if (f->fx[k].q)
                        rd_kafka_queue_destroy(f->fx[k].q);
        }
        replicator_destroy_clients(
            (const struct replicator_doomed[]){
                {f->producer, 0},
                {f->fx[0].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[1].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[2].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[3].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[4].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[5].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[6].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->fx[7].c, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->lease, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE},
                {f->reader, 0},
                {f->end_probe, 0},
                {f->hw_probe, 0},
                {f->meta, 0},
                {f->admin, 0}},
            8 + AAGW_FETCH_CONNECTIONS_MAX - 1);
        aagw_pool_free(&f->tokens);
        free(f->hdrs);
        replicator_ctl_deinit(&f->ctl);
        free(f);
}

/* ------------------------------------------------------------- STATUS --- */

aagw_flow_state_t aagw_flow_state(const aagw_flow_t *f) {
        return (aagw_flow_state_t)atomic_load(&((aagw_flow_t *)f)->ctl.state);
}

const char *aagw_flow_state_name(aagw_flow_state_t st) {
        static const char *names[] = {"starting", "running", "paused",
                                      "failed", "stopped"};
        return (unsigned)st < 5 ? names[st] : "unknown";
}

void aagw_flow_error(const aagw_flow_t *fc, char *buf, size_t size) {
        aagw_flow_t *f = (aagw_flow_t *)fc;
        replicator_ctl_error(&f->ctl, buf, size);
}

const char *aagw_flow_name(const aagw_flow_t *f) {
        return f->name;
}

const char *aagw_flow_owner_group(const aagw_flow_t *f) {
        return f->owners_group;
}

#define LOAD(x) atomic_load_explicit(&(x), RELAXED)

void aagw_flow_stats(const aagw_flow_t *fc, struct aagw_flow_stats *st) {
        aagw_flow_t *f = (aagw_flow_t *)fc;

        memset(st, 0, sizeof(*st));
        st->records_in     = LOAD(f->records_in);
        st->records_out    = LOAD(f->records_out);
        st->bytes_out      = LOAD(f->bytes_out);
        st->bad_passed     = LOAD(f->bad_passed);
        st->dead_lettered  = LOAD(f->dead_lettered);
        st->produce_errors = LOAD(f->produce_errors);
        st->fetch_restarts = LOAD(f->fetch_restarts);
        st->consumer_restarts = LOAD(f->consumer_restarts);
        st->start_refetches = LOAD(f->start_refetches);
        st->lat_sum_ms     = LOAD(f->lat_sum);
        for (int i = 0; i < AAGW_SKIP_COUNT; i++)
                st->skipped[i] = LOAD(f->skipped[i]);
        st->diverged = LOAD(f->diverged);
        for (int i = 0; i < AAGW_REASON_COUNT; i++)
                st->rejected[i] = LOAD(f->rejected[i]);
        /* The count is the sum of the buckets read here, not a counter
         * read at another instant: a scrape's +Inf bucket always equals
         * its _count, as Prometheus expects of a histogram. */
        for (int i = 0; i < AAGW_LAT_BUCKETS; i++) {
                st->lat_buckets[i] = LOAD(f->lat_buckets[i]);
                st->lat_count += st->lat_buckets[i];
        }
        st->inflight       = LOAD(f->inflight);
        st->topics         = LOAD(f->ntopics_active);
        st->partitions     = LOAD(f->nparts_assigned);
        st->topics_refused = LOAD(f->ntopics_refused);
        st->partitions_missing = LOAD(f->nparts_missing);
        topics_stats(f->remote_topics, st);
        st->truncations       = LOAD(f->truncations);
        st->truncated_records = LOAD(f->truncated_records);
        st->resets            = LOAD(f->resets);
        st->target_resets     = LOAD(f->target_resets);
        st->heartbeat_latency_ms = LOAD(f->hb_latency_ms);
        st->heartbeat_age_ms =
            LOAD(f->hb_last_ms) ? aagw_wall_ms() - LOAD(f->hb_last_ms) : -1;
        mm2_stats(f->mm2, st);
        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        struct ptrack *pt = tt->parts[p];
                        if (!pt || !pt->assigned)
                                continue;
                        int64_t hi  = LOAD(pt->high);
                        int64_t pos = LOAD(pt->pos_pub);
                        if (hi > pos && pos >= 0)
                                st->lag += hi - pos;
                }
        }
        pthread_mutex_unlock(&f->ctl.lock);
        if (f->conf.scale_out && f->conf.scale_out->enabled) {
                st->member          = f->conf.scale_out->member;
                st->rebalances      = LOAD(f->rebalances);
                st->txn_committed   = LOAD(f->tx.committed);
                st->txn_aborted     = LOAD(f->tx.aborted);
                st->txn_fenced      = LOAD(f->tx.fenced);
                st->work_partitions = LOAD(f->owned_work);
        }
        st->source_down_ms = aagw_reach_down_ms(&f->src_reach);
        st->target_down_ms = aagw_reach_down_ms(&f->tgt_reach);
        st->source_rtt_us       = LOAD(f->window_rtt_us);
        st->fetch_window_bytes  = LOAD(f->window_bytes);
        st->fetch_connections   = LOAD(f->window_conns);
        st->fetch_queue_records = LOAD(f->queue_records);
        /* The watermarks last seen are stale: say unknown, not 0. */
        if (st->source_down_ms)
                st->lag = -1;
}

size_t aagw_flow_partitions(const aagw_flow_t *fc,
                            struct aagw_flow_part_stats *out, size_t max) {
        aagw_flow_t *f = (aagw_flow_t *)fc;
        size_t       n = 0;

        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        struct ptrack *pt = tt->parts[p];
                        if (!pt)
                                continue;
                        if (n < max) {
                                snprintf(out[n].topic, sizeof(out[n].topic),
                                         "%s", tt->topic);
                                out[n].partition   = p;
                                out[n].next        = LOAD(pt->pos_pub);
                                out[n].high        = LOAD(pt->high);
                                out[n].records_out = LOAD(pt->records_out);
                                out[n].assigned    = pt->assigned;
                        }
                        n++;
                }
        }
        pthread_mutex_unlock(&f->ctl.lock);
        return out && n > max ? max : n;
}

size_t aagw_flow_missing(const aagw_flow_t *fc, struct aagw_flow_missing *out,
                         size_t max) {
        aagw_flow_t *f = (aagw_flow_t *)fc;
        size_t       n = 0;

        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (!tt->active || tt->missing <= 0)
                        continue;
                if (n < max) {
                        int32_t want = tt->target_cnt + tt->missing;
                        snprintf(out[n].topic, sizeof(out[n].topic), "%s",
                                 tt->topic);
                        snprintf(out[n].remote, sizeof(out[n].remote), "%s",
                                 tt->remote);
                        out[n].source_partitions = want;
                        out[n].target_partitions = tt->target_cnt;
                        snprintf(out[n].fix, sizeof(out[n].fix),
                                 "kafka-topics.sh --bootstrap-server %s "
                                 "--alter --topic %s --partitions %d",
                                 f->target_bs, tt->remote, (int)want);
                }
                n++;
        }
        pthread_mutex_unlock(&f->ctl.lock);
        return out && n > max ? max : n;
}

/* ------------------------------------------------- THE STAGE'S HOOKS --- */

/* The flow's part in the stage loop (stage.c). */

static int flow_start(void *arg) {
        aagw_flow_t *f = arg;

        /* Before the loop waits on the consumer's queue. */
        rd_kafka_resp_err_t             merr;
        const struct rd_kafka_metadata *md;
        bool asked = flow_fetch_window(f, &merr, &md);
        if (!f->consumer) { /* failed */
                if (asked && md)
                        rd_kafka_metadata_destroy(md);
                f->stop_at = aagw_mono_ms();
                return -1;
        }
        f->now_cache = aagw_wall_ms();
        /* Kept paused across a restart: paused before the first
         * assignment, which then starts paused (flow_assign_new()). */
        if (atomic_load(&f->paused_req))
                flow_set_paused(f, true);
        flow_maker_start(f);
        if (asked)
                flow_discover_md(f, merr, md);
        else
                flow_discover(f);
        f->last_refresh_ms = f->last_save_ms = aagw_mono_ms();
        /* Later discoveries: the metadata asked for beside the copying
         * (NULL, out of threads: asked for here, as the first).  Only once
         * the fetch window is sized: until then each refresh measures it
         * again, and that request is the discovery's; a watch beside it
         * would ask the same silent source twice and log each failure. */
        if (f->window_done)
                f->mdw = aagw_md_watch_new(f->meta, f->conf.refresh_ms,
                                           &f->ctl.stop);
        return 0;
}

static int flow_queues(void *arg, struct stage_queue *qs, int max) {
        aagw_flow_t *f = arg;

        for (int k = 0; k < f->nfx && k < max; k++)
                qs[k] = (struct stage_queue){f->fx[k].c, f->fx[k].q,
                                             f->fx[k].stalls};
        return f->nfx < max ? f->nfx : max;
}

static rd_kafka_t *flow_out(void *arg) {
        return ((aagw_flow_t *)arg)->out;
}

static int flow_round(void *arg) {
        aagw_flow_t *f          = arg;
        bool         want_pause = atomic_load(&f->paused_req);

        if (want_pause != f->paused)
                flow_set_paused(f, want_pause);
        return 1;
}

static void flow_batch(void *arg, int k, rd_kafka_message_t **msgs, size_t n) {
        aagw_flow_t *f = arg;

        f->cur_fx = k;
        for (size_t i = 0; i < n; i++)
                if (atomic_load(&f->ctl.stop) || !flow_handle(f, msgs[i]))
                        rd_kafka_message_destroy(msgs[i]);
}

static int flow_after(void *arg, ssize_t n, bool full) {
        aagw_flow_t *f = arg;

        (void)n;
        (void)full;
        f->batch_no++;
        atomic_store_explicit(&f->queue_records, flow_fx_queued(f),
                              memory_order_relaxed);
        f->now_cache = aagw_wall_ms();
        rd_kafka_poll(f->out, 0);
        if (f->out != f->producer)
                rd_kafka_poll(f->producer, 0);
        int64_t now = aagw_mono_ms();
        if (now - f->last_save_ms >= SAVE_INTERVAL_MS) {
                flow_save_positions(f, false);
                f->last_save_ms = now;
        }
        rd_kafka_resp_err_t             merr;
        const struct rd_kafka_metadata *md;
        if (now - f->last_refresh_ms >= f->conf.refresh_ms) {
                /* The source did not answer the first time. */
                bool asked = false;
                if (!f->window_done) {
                        /* It may replace the queue the wait holds. */
                        stage_unwait(&f->stage);
                        asked = flow_fetch_window(f, &merr, &md);
                }
                if (atomic_load(&f->ctl.stop) || !f->consumer) {
                        if (asked && md) /* stopping, or failed */
                                rd_kafka_metadata_destroy(md);
                        return -1;
                }
                if (asked)
                        flow_discover_md(f, merr, md);
                else if (!f->mdw)
                        flow_discover(f);
                if (!f->mdw && f->window_done)
                        f->mdw = aagw_md_watch_new(f->meta, f->conf.refresh_ms,
                                                   &f->ctl.stop);
                f->last_refresh_ms = aagw_mono_ms();
        }
        /* A copy was made (or could not be): its topic starts at the
         * discovery asked for now. */
        if (flow_made(f)) {
                if (f->mdw)
                        aagw_md_watch_kick(f->mdw);
                else
                        f->last_refresh_ms = 0;
        }
        if (f->mdw && aagw_md_watch_take(f->mdw, &merr, &md))
                flow_discover_md(f, merr, md);
        flow_reconciled(f);
        return 0;
}

/* Partitions whose fetch stands still while the leader holds more (the
 * stall watch): seek each to where the flow is, on the refreshed metadata,
 * which starts its fetch again. */
static void flow_restart(void *arg, int k, const struct aagw_stall_report *r,
                         size_t n) {
        aagw_flow_t                     *f = arg;
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)n);

        for (size_t i = 0; i < n; i++)
                rd_kafka_topic_partition_list_add(l, r[i].topic, r[i].partition)
                    ->offset = r[i].pos;
        rd_kafka_error_t *e = rd_kafka_seek_partitions(f->fx[k].c, l, 2000);
        if (e) {
                aagw_log(AAGW_LOG_WARN, "FETCH", "%s: seek: %s", f->name,
                         rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
        }
        rd_kafka_topic_partition_list_destroy(l);
        INC(f->fetch_restarts);
}

/* Stop: no more consuming; finish in-flight, store, close (a static
 * member does not leave its group: a restart with the same identity
 * takes the id back at once). */
static void flow_finish(void *arg) {
        aagw_flow_t *f = arg;

        aagw_md_watch_destroy(f->mdw);
        f->mdw = NULL;
        flow_maker_stop(f);
        f->stop_at = aagw_mono_ms();
        stage_commit_finish(&f->stage);
        flow_drain(f, atomic_load(&f->drain_ms));
        flow_save_positions(f, true);
        for (int k = 0; k < f->nfx; k++) {
                aagw_stall_watch_destroy(f->fx[k].stalls);
                f->fx[k].stalls = NULL;
                replicator_consumer_close(f->fx[k].c, REPLICATOR_CLOSE_MS());
        }
        /* The lease is not closed: a static member leaves nothing behind
         * by closing (it stays in its group until the session times out),
         * and librdkafka 2.0.2's close of a lease that was given its
         * partitions a moment before has been seen to wait forever inside
         * its own unassign (kafka-txn_start, a stop 0.1 s after the
         * assignment, gdb stacks).  aagw_flow_destroy() destroys it
         * without the close. */
}

/* One process copies every partition: positions are stored at an
 * interval (flow_after()), and the identity lease keeps a second process
 * with the same identity from copying too. */
static int flow_single_after(void *arg) {
        aagw_flow_t *f = arg;

        flow_lease_poll(f);
        if (f->fenced && flow_lease_fenced(f))
                return -1;
        if (f->lease_wait && f->lease_held &&
            aagw_mono_ms() - f->lease_held_ms >= LEASE_SETTLE_MS)
                flow_lease_regained(f);
        return 0;
}

const struct stage_commit flow_commit_single = {.after = flow_single_after};

const struct stage_hooks flow_hooks = {.start    = flow_start,
                                       .queues   = flow_queues,
                                       .producer = flow_out,
                                       .round    = flow_round,
                                       .batch    = flow_batch,
                                       .after    = flow_after,
                                       .restart  = flow_restart,
                                       .finish   = flow_finish};

/* Serve delivery reports until nothing is in flight, for up to
 * 'timeout_ms'; once the flow stops, no longer than what is left of the
 * drain time its destroy allowed (aagw_flow_destroy()). */
void flow_drain(aagw_flow_t *f, int timeout_ms) {
        int64_t start = aagw_mono_ms(), deadline = start + timeout_ms, now;
        while (atomic_load(&f->inflight) > 0) {
                now = aagw_mono_ms();
                if (f->stop_at &&
                    f->stop_at + atomic_load(&f->drain_ms) < deadline)
                        deadline = f->stop_at + atomic_load(&f->drain_ms);
                if (now >= deadline)
                        break;
                rd_kafka_poll(f->out, 50);
                f->now_cache = aagw_wall_ms();
        }
        if (atomic_load(&f->inflight) > 0)
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %" PRId64 " records still unacknowledged after "
                         "%" PRId64 " ms; their positions are not stored",
                         f->name, atomic_load(&f->inflight),
                         aagw_mono_ms() - start);
}

/* The identity lease's group gave it partitions: it reads none of them
 * (an empty assignment); that it was given any tells that it holds the
 * group.instance.id. */
void flow_lease_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                   rd_kafka_topic_partition_list_t *parts, void *opaque) {
        aagw_flow_t *f = opaque;

        (void)parts;
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
                /* (At every join: a start, a rejoin, a topic added.) */
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: identity lease holds group.instance.id %s in "
                         "group %s",
                         f->name, f->instance, f->lease_group);
                if (!f->lease_held) {
                        f->lease_held    = true;
                        f->lease_held_ms = aagw_mono_ms();
                }
        }
        rd_kafka_assign(rk, NULL);
}
