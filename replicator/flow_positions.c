/*
 * replicator/flow_positions.c: where a flow resumes: its stored positions,
 * the reconciliation of each assigned partition with what the target
 * already holds (the last copy this flow wrote), on the reconciler thread
 * beside the copying, the offset-syncs, and what it does when a source or
 * target partition was truncated or recreated.
 */
#include "flow_int.h"

/* ---------------------------------------------------------- POSITIONS --- */

/* Fill f->hdrs from a message's headers; returns the count. */
size_t flow_collect_headers(aagw_flow_t *f, const rd_kafka_message_t *m) {
        return aagw_kafka_headers_view(m, &f->hdrs, &f->hdr_cap);
}

/* What one reconciliation of 'pt' uses and finds: done by the reconciler
 * thread (RECONCILER below), or by the flow thread itself (scale-out, or
 * no reconciler).  It reads only what never changes in 'pt' (its topic,
 * partition and names), and reports what it found in 'ans' for the flow
 * thread to apply (flow_recon_apply()): the flow thread is the only writer
 * of a partition's state and of the flow's counters. */
struct recon {
        aagw_flow_t         *f;
        struct ptrack       *pt;
        bool                 on_stage; /* the flow thread's own */
        struct aagw_header **hdrs; /* header scratch of the thread */
        size_t              *hdr_cap;
        struct flow_recon    ans;
};

/* If 'm' (read from the target) was written by this flow, return the
 * source offset it copied, else -1. */
static int64_t written_by_us(struct recon *rc, const rd_kafka_message_t *m,
                             const char *topic, int32_t partition) {
        aagw_flow_t     *f = rc->f;
        struct aagw_prov prov;
        size_t           n = aagw_kafka_headers_view(m, rc->hdrs, rc->hdr_cap);
        struct aagw_header *h = *rc->hdrs;
        char                t[AAGW_TOPIC_MAX + 1];
        int32_t             p;
        int64_t             o;

        if (aagw_prov_decode(f->pol, h, n, &prov) != AAGW_REASON_OK ||
            prov.path_len < 2 ||
            strcmp(prov.path[prov.path_len - 1], f->target) ||
            strcmp(prov.path[prov.path_len - 2], f->source))
                return -1;
        for (size_t i = 0; i < n; i++) {
                if (h[i].value && !strcmp(h[i].name, f->hop_hdr)) {
                        if (!aagw_coords_parse(h[i].value, h[i].size, t,
                                               sizeof(t), &p, &o))
                                return -1;
                        return !strcmp(t, topic) && p == partition ? o : -1;
                }
        }
        /* No hop header: the record was stamped fresh by this flow, so its
         * origin coordinates are the source coordinates. */
        if (prov.path_len == 2 && !strcmp(prov.src_topic, topic) &&
            prov.src_partition == partition)
                return prov.src_offset;
        return -1;
}

static int64_t check_truncation(struct recon *rc, int64_t next);

/* The highest source offset among this flow's copies at target offsets
 * [from, to) of pt's remote partition, or -1 if none.  '*done' is false
 * if the deadline or a stop cut the read short. */
struct scan {
        struct recon  *rc;
        aagw_flow_t   *f;
        struct ptrack *pt;
        int64_t        found; /* last source offset copied, -1: none */
};

static bool scan_record(void *arg, const rd_kafka_message_t *m) {
        struct scan *sc = arg;
        int64_t      o =
            written_by_us(sc->rc, m, sc->pt->tt->topic, sc->pt->partition);
        if (o > sc->found)
                sc->found = o;
        return true;
}

static void scan_error(void *arg, rd_kafka_resp_err_t err,
                       const char *reason) {
        struct scan *sc = arg;
        (void)err;
        aagw_log(AAGW_LOG_WARN, "FLOW", "%s: reading %s [%d] at %s: %s",
                 sc->f->name, sc->pt->tt->remote, (int)sc->pt->partition,
                 sc->f->target, reason);
}

static int64_t scan_copies(struct recon *rc, int64_t from, int64_t to,
                           int timeout_ms, bool *done) {
        aagw_flow_t            *f  = rc->f;
        struct ptrack          *pt = rc->pt;
        struct scan             sc = {.rc = rc, .f = f, .pt = pt, .found = -1};
        struct aagw_kafka_range r  = {.topic      = pt->tt->remote,
                                      .partition  = pt->partition,
                                      .from       = from,
                                      .to         = to,
                                      .timeout_ms = timeout_ms,
                                      .stop       = &f->ctl.stop,
                                      .fn         = scan_record,
                                      .on_error   = scan_error,
                                      .arg        = &sc};
        int64_t                 n;

        *done = aagw_kafka_read_range(f->reader, &r, &n) == AAGW_RANGE_DONE;
        return sc.found;
}

/* Whether the flow writes the target partition of 'tt' ['p'] now: its
 * source partition is assigned, not held, and reconciled.  Under the
 * flow's lock (the topic table's shape). */
static bool part_copying(const struct ttrack *tt, int32_t p) {
        return p < tt->partition_cnt && tt->parts[p] &&
               atomic_load(&tt->parts[p]->copying);
}

/* replicator_settle_all() over every target partition this flow's
 * producer writes; 'pt''s own watermarks end up in '*lo' / '*hi'.
 * Returns as replicator_settle_all().
 *
 * Partitions the flow copies into meanwhile (reconciled before: the
 * reconciler works beside the copying) are left out.  They grow with the
 * flow's own records, which would pass for requests of a killed run
 * being released: the wait would end only at "another writer"
 * (END_GROWING_MS), with a false warning.  And they add nothing to it:
 * each was reconciled after a settle of its own round, which found every
 * partition then known at its high watermark twice, so what the killed
 * run had held back there was appended before the flow wrote to it. */
int flow_settle_all(aagw_flow_t *f, struct ptrack *pt, int64_t *lo,
                    int64_t *hi, int wait_ms) {
        size_t n = 0, k = 0;
        int    r;

        pthread_mutex_lock(&f->ctl.lock);
        for (size_t i = 0; i < f->ntopics; i++)
                if (f->topics[i]->rkt && f->topics[i]->target_cnt > 0)
                        n += (size_t)f->topics[i]->target_cnt;
        struct replicator_end *ends = calloc(n ? n : 1, sizeof(*ends));
        if (!ends) {
                pthread_mutex_unlock(&f->ctl.lock);
                return 0; /* out of memory: the partition's own settle */
        }
        /* (The names live as long as the flow: a track, once in the
         * table, stays until the flow is destroyed.) */
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                if (!tt->rkt || tt->target_cnt <= 0)
                        continue;
                for (int32_t p = 0; p < tt->target_cnt; p++)
                        if (!part_copying(tt, p))
                                ends[k++] =
                                    (struct replicator_end){tt->remote, p, -1};
        }
        pthread_mutex_unlock(&f->ctl.lock);
        char who[AAGW_ALIAS_MAX + 160];
        snprintf(who, sizeof(who), "%s: at %s", f->name, f->target);
        r = replicator_settle_all(f->reader, f->end_probe, ends, k, wait_ms,
                                  &f->ctl.stop, "FLOW", who);
        for (size_t i = 0; r == 0 && i < k; i++)
                if (!strcmp(ends[i].topic, pt->tt->remote) &&
                    ends[i].partition == pt->partition && ends[i].hi > *hi) {
                        int64_t l, h;
                        if (!replicator_watermarks(
                                f->reader, pt->tt->remote, pt->partition, &l,
                                &h, 5000)) {
                                *lo = l;
                                *hi = h;
                        }
                }
        free(ends);
        return r;
}

/* The watermarks of the target partition of 'pt', once the high
 * watermark is the end of its leader's log.  While its leader is gone
 * (a broker died and the controller has not yet moved leadership, which
 * takes up to the broker session timeout) the query fails with a
 * timeout, a transport error or "not leader": ask for fresh metadata and
 * try again, for up to RECONCILE_WAIT_MS.  (Taking the target for empty
 * instead resumed at the stored position and copied again what the
 * previous run had written after it.)
 *
 * Then the watermark may be behind the log: the previous run's last
 * copies reached the leader, but a replica in the ISR (one on a broker
 * that died, until the controller fences it) has not fetched them, and a
 * scan up to the watermark would miss them; the flow would copy them
 * again, after them (2 and 7 records twice in a kafka-target_kill
 * run).  Under the prefix policy this flow is the target's
 * only writer and is not writing yet, so the wait for the watermark to
 * reach the log's end ends once the replicas caught up or the ISR
 * dropped the dead one; failing that within RECONCILE_WAIT_MS, the flow
 * fails closed.  Under identity, local producers may keep the log ahead
 * of the watermark: SETTLE_MAX_MS, then the watermark (logged). */
rd_kafka_resp_err_t flow_target_end(aagw_flow_t *f, struct ptrack *pt,
                                    int64_t *lo, int64_t *hi) {
        int64_t deadline = aagw_mono_ms() + RECONCILE_WAIT_MS;
        bool    logged   = false, prefix = strcmp(pt->tt->remote,
                                                  pt->tt->topic) != 0;

        for (;;) {
                rd_kafka_resp_err_t err = replicator_watermarks(
                    f->reader, pt->tt->remote, pt->partition, lo, hi, 5000);
                if (!err)
                        break;
                if (atomic_load(&f->ctl.stop) || aagw_mono_ms() >= deadline)
                        return err;
                if (!logged)
                        aagw_log(AAGW_LOG_WARN, "FLOW",
                                 "%s: reading the end of %s [%d] at %s: %s; "
                                 "trying again for up to %d s",
                                 f->name, pt->tt->remote, (int)pt->partition,
                                 f->target, rd_kafka_err2str(err),
                                 RECONCILE_WAIT_MS / 1000);
                logged = true;
                replicator_refresh_leaders(f->reader, pt->tt->remote, 2000);
                struct timespec ts = {0, 250 * 1000000L};
                nanosleep(&ts, NULL);
        }
        int64_t left = deadline - aagw_mono_ms();
        int     wait = !prefix ? SETTLE_MAX_MS
                       : left > 1000 ? (int)left : 1000;
        char    who[AAGW_ALIAS_MAX + 160];
        snprintf(who, sizeof(who), "%s: at %s", f->name, f->target);
        int r = replicator_settle_end(f->reader, f->end_probe, pt->tt->remote,
                                      pt->partition, lo, hi, wait,
                                      &f->ctl.stop, "FLOW", who);
        if (r < 0)
                return RD_KAFKA_RESP_ERR__DESTROY; /* stopping */
        if (r > 0 && prefix) {
                flow_fail(f,
                          "reconciling %s [%d]: %s [%d] at %s: its high "
                          "watermark %" PRId64 " did not reach the end of "
                          "its leader's log in %d s (a replica in the ISR "
                          "not fetching?); copying on could copy records "
                          "twice",
                          pt->tt->topic, (int)pt->partition, pt->tt->remote,
                          (int)pt->partition, f->target, *hi,
                          RECONCILE_WAIT_MS / 1000);
                return RD_KAFKA_RESP_ERR__TIMED_OUT;
        }
        if (r > 0)
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d] at %s: going by its high watermark "
                         "%" PRId64 " after %d s (identity policy: local "
                         "producers keep its leader's log ahead); a copy "
                         "of ours above it, if any, is copied again",
                         f->name, pt->tt->remote, (int)pt->partition,
                         f->target, *hi, SETTLE_MAX_MS / 1000);
        /* Requests of the killed run still held by a broker
         * (replicator_settle_all()): once per assignment round. */
        if (prefix && aagw_mono_ms() - f->settled_all_ms > SETTLE_ALL_AGAIN_MS) {
                left = deadline - aagw_mono_ms();
                r    = flow_settle_all(f, pt, lo, hi,
                                  left > 1000 ? (int)left : 1000);
                if (r < 0)
                        return RD_KAFKA_RESP_ERR__DESTROY;
                if (r > 0) {
                        flow_fail(f,
                                  "reconciling %s [%d]: not every partition "
                                  "this flow writes at %s ends at its high "
                                  "watermark after %d s; copying on could "
                                  "copy records twice",
                                  pt->tt->topic, (int)pt->partition,
                                  f->target, RECONCILE_WAIT_MS / 1000);
                        return RD_KAFKA_RESP_ERR__TIMED_OUT;
                }
                f->settled_all_ms = aagw_mono_ms();
        }
        /* The copies go to the leader the producer knows: the one that
         * just answered, not one from before an outage. */
        replicator_refresh_leaders(f->out, pt->tt->remote, 5000);
        return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Scale-out: the end of the target partition of 'pt' for a new owner,
 * its last stable offset once no transaction is open on it.  The
 * reader (read_committed) is answered the LSO, the high-watermark probe
 * (read_uncommitted) the high watermark.  While they differ, a
 * transaction of the previous owner is open there: if it was committed
 * its copies count, if it is aborted (by the coordinator after
 * transaction.timeout.ms, for a dead owner) they do not; either way the
 * last copy is only known once it ended.  flow_target_end()'s waits for the
 * log's end are not needed: a request of a dead owner held by a broker
 * belongs to a transaction that can no longer commit.  See flow_int.h. */
rd_kafka_resp_err_t flow_stable_end(aagw_flow_t *f, struct ptrack *pt,
                                    int64_t *lo, int64_t *hi, int64_t *waited,
                                    bool on_stage) {
        int64_t start = aagw_mono_ms(), deadline = start + RECONCILE_WAIT_MS;
        int64_t hlo, hw = -1;
        rd_kafka_resp_err_t err;

        *waited = 0;
        for (;;) {
                err = replicator_watermarks(
                    f->reader, pt->tt->remote, pt->partition, lo, hi, 5000);
                if (!err)
                        err = replicator_watermarks(
                            f->hw_probe, pt->tt->remote, pt->partition, &hlo,
                            &hw, 5000);
                if (!err && *hi >= hw)
                        break;
                if (atomic_load(&f->ctl.stop))
                        return RD_KAFKA_RESP_ERR__DESTROY;
                if (aagw_mono_ms() >= deadline) {
                        flow_fail(f,
                                  "reconciling %s [%d]: %s [%d] at %s: %s "
                                  "after %d s; a transaction of another "
                                  "member stays open past "
                                  "scale_out.transaction_timeout?",
                                  pt->tt->topic, (int)pt->partition,
                                  pt->tt->remote, (int)pt->partition,
                                  f->target,
                                  err ? rd_kafka_err2str(err)
                                      : "its last stable offset stays "
                                        "below its high watermark",
                                  RECONCILE_WAIT_MS / 1000);
                        return err ? err : RD_KAFKA_RESP_ERR__TIMED_OUT;
                }
                if (err) {
                        replicator_refresh_leaders(f->reader, pt->tt->remote,
                                                   2000);
                        replicator_refresh_leaders(f->hw_probe,
                                                   pt->tt->remote, 2000);
                }
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
        *waited = aagw_mono_ms() - start;
        /* The producer is the flow thread's (a new one replaces it after a
         * fatal error): the reconciler leaves it to find a moved leader
         * itself, at its first batch's "not leader". */
        if (on_stage)
                replicator_refresh_leaders(f->out, pt->tt->remote, 5000);
        return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* The target partition of 'pt' ends (at 'hi') below the stored target
 * position 'out_next': the topic was deleted and created again since the
 * position was stored, and the copies are gone.  With none of ours in it
 * (the usual case: aagw failed closed when it vanished, and created it
 * again on this start), the source is copied again from its log start,
 * and that start is stored at once so that a crash during the new copy
 * resumes it instead of starting over.  Copies of ours in it cannot be
 * completed in order (the records before them are missing): fail closed.
 * Returns where to resume. */
static int64_t target_reset(struct recon *rc, int64_t next, int64_t out_next,
                            int64_t lo, int64_t hi, int64_t found) {
        aagw_flow_t   *f     = rc->f;
        struct ptrack *pt    = rc->pt;
        const char    *topic = pt->tt->topic;
        int64_t        slo, shi;

        rc->ans.target_resets++;
        if (found >= 0) {
                flow_fail(f,
                          "%s [%d] at %s ends at offset %" PRId64 ", below "
                          "the stored copy position %" PRId64 ", and holds "
                          "copies up to source offset %" PRId64 " but not "
                          "the records before them (recreated while "
                          "copies were in flight, or truncated by an "
                          "unclean leader election); delete the topic and "
                          "restart aagw to copy %s [%d] anew",
                          pt->tt->remote, (int)pt->partition, f->target, hi,
                          out_next, found, topic, (int)pt->partition);
                return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        }
        if (replicator_watermarks(f->meta, topic, pt->partition,
                                             &slo, &shi, 10000)) {
                flow_fail(f, "%s [%d]: cannot read the source log start",
                          topic, (int)pt->partition);
                return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        }
        /* Both recreated (a whole cluster replaced): the source's reset
         * is reported and counted as well. */
        if (next > shi)
                check_truncation(rc, next);
        aagw_log(AAGW_LOG_ERROR, "FLOW",
                 "%s: %s [%d] at %s was recreated: it ends at offset %" PRId64
                 " (log start %" PRId64 "), below the stored copy position "
                 "%" PRId64 ", and holds no copies of ours; the copies of "
                 "%s [%d] up to source offset %" PRId64 " were lost with "
                 "the old topic; copying again from the source log start "
                 "%" PRId64,
                 f->name, pt->tt->remote, (int)pt->partition, f->target, hi,
                 lo, out_next, topic, (int)pt->partition, next - 1, slo);
        struct aagw_flow_pos pos = {topic, pt->partition, slo, hi};
        if (f->conf.pos_save &&
            f->conf.pos_save(f->conf.opaque, f->scope, &pos, 1)) {
                flow_fail(f, "%s [%d]: cannot store the position after the "
                             "target was recreated",
                          topic, (int)pt->partition);
                return slo;
        }
        rc->ans.stored   = true;
        rc->ans.out_next = hi;
        rc->ans.hi_seen  = shi;
        return slo;
}

/* Where to resume source partition 'pt': the stored position, moved past
 * every record of ours found in the target partition after the stored
 * target offset.  Returns the offset, or RD_KAFKA_OFFSET_BEGINNING.
 *
 * Our copies of one source partition are appended to one target
 * partition in source order, so the last of them names the highest
 * source offset copied.  The target is read backwards in growing
 * chunks from its end until a chunk holds one of ours: a few records
 * normally, and not the whole partition when the stored state is old or
 * lost (the target may hold far more than can be read at start). */
static int64_t reconcile(struct recon *rc) {
        aagw_flow_t   *f    = rc->f;
        struct ptrack *pt   = rc->pt;
        int64_t        next = -1, out_next = -1, lo, hi, found = -1;
        const char    *topic = pt->tt->topic;

        if (f->conf.pos_load &&
            f->conf.pos_load(f->conf.opaque, f->scope, topic, pt->partition,
                             &next, &out_next) == 0)
                ;
        else
                next = out_next = -1;
        int64_t stored = next;
        rd_kafka_resp_err_t err =
            f->owner ? flow_stable_end(f, pt, &lo, &hi, &rc->ans.txn_wait_ms,
                                       rc->on_stage)
                     : flow_target_end(f, pt, &lo, &hi);
        if (err) {
                /* Not knowing what the target holds, the stored position
                 * could copy again what the previous run wrote after it:
                 * fail closed (the next start reconciles). */
                if (!atomic_load(&f->ctl.stop))
                        flow_fail(f,
                                  "reconciling %s [%d]: cannot read the end "
                                  "of %s [%d] at %s in %d s: %s",
                                  topic, (int)pt->partition, pt->tt->remote,
                                  (int)pt->partition, f->target,
                                  RECONCILE_WAIT_MS / 1000,
                                  rd_kafka_err2str(err));
                return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        }
        /* No stored position, and the target's last record is not ours
         * (a remote topic: only replicators write there): another
         * replicator (MM2) filled it; resume where it stopped.  Unless
         * that is exact, the scan below still looks for copies of ours,
         * which would be the better answer. */
        int64_t tk = -1;
        if (next < 0 && hi > lo && f->takeover &&
            strcmp(pt->tt->remote, topic)) {
                bool    done, exact = false;
                int64_t tail =
                    scan_copies(rc, hi - 1, hi, RECONCILE_WAIT_MS, &done);
                if (done && tail < 0)
                        tk = takeover_position(f->takeover, f->reader, topic,
                                               pt->tt->remote, pt->partition,
                                               lo, hi, &f->ctl.stop, &exact);
                if (tk >= 0 && exact) {
                        rc->ans.out_next = hi;
                        next             = check_truncation(rc, tk);
                        return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
                }
        }
        /* The target ends below what we stored as copied: it was deleted
         * and created again (or lost records in an unclean leader
         * election).  Look at all of it. */
        bool    reset = out_next > hi;
        int64_t from  = out_next > lo && !reset ? out_next : lo;
        int64_t end = hi, span = 4096;
        while (found < 0 && end > from && !atomic_load(&f->ctl.stop)) {
                int64_t start = end - span > from ? end - span : from;
                bool    done;
                /* A deadline on each chunk (on progress): a target whose
                 * leader is moving answers again within seconds. */
                found = scan_copies(rc, start, end, RECONCILE_WAIT_MS, &done);
                if (!done) {
                        /* A partial read cannot tell the last copy: the
                         * stored position could copy records twice. */
                        if (!atomic_load(&f->ctl.stop))
                                flow_fail(f,
                                          "reconciling %s [%d]: could not "
                                          "read target offsets %" PRId64
                                          "..%" PRId64 " of %s at %s in %d s",
                                          topic, (int)pt->partition, start,
                                          end - 1, pt->tt->remote, f->target,
                                          RECONCILE_WAIT_MS / 1000);
                        return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
                }
                end = start;
                if (span < ((int64_t)1 << 24))
                        span *= 4;
        }
        if (reset && !atomic_load(&f->ctl.stop))
                return target_reset(rc, next, out_next, lo, hi, found);
        if (found >= 0 && next < 0) {
                /* Copies of ours but no stored position: the state dir is
                 * new or lost.  Not routine, so a warning that says so. */
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d]: no stored position (the state dir is "
                         "new or its state was lost), but the target holds "
                         "copies up to source offset %" PRId64 " in %s; "
                         "resuming at %" PRId64,
                         f->name, topic, (int)pt->partition, found,
                         pt->tt->remote, found + 1);
                next = found + 1;
        } else if (found >= 0 && found + 1 > next) {
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: %s [%d]: target holds copies up to source "
                         "offset %" PRId64 " (stored position %" PRId64
                         "); resuming at %" PRId64,
                         f->name, topic, (int)pt->partition, found, next,
                         found + 1);
                next = found + 1;
        }
        if (found < 0 && next < 0 && tk >= 0)
                next = tk; /* the takeover's, not exact (logged) */
        rc->ans.out_next = hi > out_next ? hi : out_next;
        aagw_log(AAGW_LOG_DEBUG, "FLOW",
                 "%s: %s [%d]: reconciled: %s [%d] ends at %" PRId64
                 ", last copy of source offset %" PRId64 ", stored position "
                 "%" PRId64 "; resuming at %" PRId64,
                 f->name, topic, (int)pt->partition, pt->tt->remote,
                 (int)pt->partition, hi, found, stored, next);
        next = check_truncation(rc, next);
        return next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
}

void flow_recon_apply(aagw_flow_t *f, struct ptrack *pt,
                      const struct flow_recon *a) {
        if (a->out_next != FLOW_RECON_KEEP)
                pt->out_next = a->out_next;
        if (a->hi_seen != FLOW_RECON_KEEP)
                pt->hi_seen = a->hi_seen;
        if (a->stored) { /* target_reset() stored the new start */
                pt->saved_next = a->next;
                pt->saved_out  = a->out_next;
        }
        ADD(f->resets, a->resets);
        ADD(f->truncations, a->truncations);
        ADD(f->truncated_records, a->truncated_records);
        ADD(f->target_resets, a->target_resets);
}

/* Find where 'pt' resumes: the replicator's handles know its topic
 * first (replicator_prime_topic(), once per topic; the reader's leaders
 * again after the copy grew), then reconcile(). */
static void recon_run(struct recon *rc) {
        aagw_flow_t   *f  = rc->f;
        struct ttrack *tt = rc->pt->tt;

        rc->ans = (struct flow_recon){.out_next = FLOW_RECON_KEEP,
                                      .hi_seen  = FLOW_RECON_KEEP};
        if (!atomic_exchange(&tt->primed, true)) {
                atomic_store(&tt->reader_stale, false);
                replicator_prime_topic(f->end_probe, f->reader, tt->remote);
        } else if (atomic_exchange(&tt->reader_stale, false)) {
                replicator_refresh_leaders(f->reader, tt->remote, 5000);
        }
        rc->ans.next = reconcile(rc);
        /* Copied from its first record: the consumer is assigned the
         * source's log start as found here.  Left to resolve the
         * beginning itself, it sends a ListOffsets per partition, and a
         * batch of 80 held the fetches of the topics already copied for
         * some 40 ms on the embedded cluster.  Records deleted meanwhile
         * make that offset out of range, and the consumer's reset
         * (earliest) starts at the new log start, as the beginning
         * would. */
        rc->ans.fetch_from = rc->ans.next;
        int64_t lo, hi;
        if (rc->ans.next == RD_KAFKA_OFFSET_BEGINNING &&
            !atomic_load(&f->ctl.stop) &&
            !replicator_watermarks(f->meta, tt->topic, rc->pt->partition, &lo,
                                   &hi, 5000) &&
            lo >= 0)
                rc->ans.fetch_from = lo;
}

int64_t flow_reconcile(aagw_flow_t *f, struct ptrack *pt,
                       int64_t *txn_wait_ms) {
        struct recon rc = {.f        = f,
                           .pt       = pt,
                           .on_stage = true,
                           .hdrs     = &f->hdrs,
                           .hdr_cap  = &f->hdr_cap};

        recon_run(&rc);
        flow_recon_apply(f, pt, &rc.ans);
        if (txn_wait_ms)
                *txn_wait_ms = rc.ans.txn_wait_ms;
        return rc.ans.next;
}

/* --------------------------------------------------------- RECONCILER --- */

/* The source consumers learn the leaders of the topics of 'j' and of
 * every job waiting behind it that they do not know yet, in one metadata
 * request per consumer (asked without a topic, it covers the topics the
 * handle knows: its own and these, given handles for it).  Assigned a
 * topic missing from its metadata, a consumer looks the leaders up
 * itself, in a scan once a second, and the topic's first records wait
 * for it; and on the embedded cluster each metadata request of a source
 * consumer held the fetches of the topics already copied for tens of
 * milliseconds (bench_latency --new-topics: with one request per new
 * topic, 20 such stalls).  Under the reconciler's lock; the requests are
 * made without it. */
static void source_prime(void *arg, struct stage_worker *w,
                         struct stage_job *first) {
        aagw_flow_t           *f = arg;
        struct flow_recon_job *j = (struct flow_recon_job *)first;
        rd_kafka_topic_t *rkts[64];
        const char       *names[64];
        size_t            n = 0;

        for (; j && n < sizeof(names) / sizeof(*names);
             j = (struct flow_recon_job *)j->base.next) {
                struct ttrack *tt  = j->pt->tt;
                bool           dup = false;
                if (atomic_load(&tt->src_primed))
                        continue;
                for (size_t i = 0; i < n && !dup; i++)
                        dup = names[i] == tt->topic;
                if (!dup) {
                        atomic_store(&tt->src_primed, true);
                        names[n++] = tt->topic;
                }
        }
        if (!n)
                return;
        pthread_mutex_unlock(&w->t.lock);
        for (int k = 0; k < f->nfx; k++) {
                const struct rd_kafka_metadata *md = NULL;
                size_t                          m  = 0;
                for (size_t i = 0; i < n; i++)
                        if ((rkts[m] = rd_kafka_topic_new(f->fx[k].c, names[i],
                                                          NULL)))
                                m++;
                if (!aagw_kafka_metadata(f->fx[k].c, false, NULL, &md, 2000,
                                         &f->ctl.stop))
                        rd_kafka_metadata_destroy(md);
                while (m)
                        rd_kafka_topic_destroy(rkts[--m]);
        }
        pthread_mutex_lock(&w->t.lock);
}

/* Jobs are taken in the order asked (a topic's partitions one after
 * another).  The answers of a topic are told at once, when the next job
 * is of another topic: one assignment per topic, not per partition.
 * Telling wakes the flow thread's wait (rd_kafka_queue_yield() on the
 * first source consumer's queue, which the stage loop waits on): a topic
 * starts when it is reconciled, not at the wait's next timeout. */
static void recon_job(void *arg, struct stage_job *sj) {
        aagw_flow_t           *f  = arg;
        struct flow_recon_job *j  = (struct flow_recon_job *)sj;
        struct recon           rc = {.f       = f,
                                     .pt      = j->pt,
                                     .hdrs    = &f->recon_hdrs,
                                     .hdr_cap = &f->recon_hdr_cap};

        recon_run(&rc);
        j->ans = rc.ans;
}

static bool recon_tell(void *arg, const struct stage_job *sj,
                       const struct stage_job *next) {
        (void)arg;
        return !next || ((const struct flow_recon_job *)next)->pt->tt !=
                            ((const struct flow_recon_job *)sj)->pt->tt;
}

void flow_wake(void *arg) {
        aagw_flow_t *f = arg;

        if (f->fx[0].q)
                rd_kafka_queue_yield(f->fx[0].q);
}

void flow_reconciler_start(aagw_flow_t *f) {
        f->recon = (struct stage_worker){.ctx   = f,
                                         .halt  = &f->ctl.stop,
                                         .run   = recon_job,
                                         .ahead = source_prime,
                                         .tell  = recon_tell,
                                         .wake  = flow_wake};
        stage_worker_start(&f->recon);
}

static void job_drop(struct stage_job *j) {
        free(j);
}

void flow_reconciler_stop(aagw_flow_t *f) {
        stage_worker_stop(&f->recon, job_drop);
        free(f->recon_hdrs);
        f->recon_hdrs    = NULL;
        f->recon_hdr_cap = 0;
}

bool flow_recon_ask(aagw_flow_t *f, struct ptrack *pt, bool release) {
        struct flow_recon_job *j;

        if (!f->recon.t.started || f->recon_inline ||
            !(j = calloc(1, sizeof(*j))))
                return false;
        j->pt           = pt;
        j->gen          = pt->recon_gen;
        j->release      = release;
        pt->reconciling = true;
        stage_worker_put(&f->recon, &j->base);
        return true;
}

struct flow_recon_job *flow_recon_take(aagw_flow_t *f) {
        return (struct flow_recon_job *)stage_worker_take(&f->recon);
}

/* --------------------------------------------------------- TRUNCATION --- */

/* The source partition's end offset went below what we read: the topic
 * was deleted and recreated (or its log reset).  Offsets now name other
 * records, so the flow stops here (loudly) and the next start resumes at
 * the new log start (flow_reconcile() sees it), rather than mapping new records
 * onto old positions or skipping them silently. */
static void source_shrank(aagw_flow_t *f, struct ptrack *pt, int64_t hi) {
        if (hi >= pt->hi_seen || pt->read_next <= hi) {
                if (hi > pt->hi_seen)
                        pt->hi_seen = hi;
                return;
        }
        /* The consumer's cached watermark comes from its last fetch: just
         * after a leader change the new leader's high watermark can be
         * below the old one's for a moment (kafka-leader_kill).  Ask the
         * leader itself (a new leader answers ListOffsets only once its
         * watermark is current, KIP-207) before calling it a reset. */
        int64_t qlo, qhi;
        if (replicator_watermarks(f->meta, pt->tt->topic,
                                             pt->partition, &qlo, &qhi,
                                             5000) ||
            qhi >= pt->read_next)
                return;
        hi = qhi;
        INC(f->resets);
        aagw_log(AAGW_LOG_ERROR, "FLOW",
                 "%s: %s [%d]: source end offset went back from %" PRId64
                 " to %" PRId64 " (read up to %" PRId64
                 "): the partition was reset or recreated",
                 f->name, pt->tt->topic, (int)pt->partition, pt->hi_seen, hi,
                 pt->read_next);
        pt->hi_seen = hi;
        flow_fail(f,
                  "%s [%d]: source partition reset (end offset %" PRId64
                  " below position %" PRId64 "); restart to resume from its "
                  "log start",
                  pt->tt->topic, (int)pt->partition, hi, pt->read_next);
}

/* Where to resume when the stored position 'next' is outside the source
 * log [lo, hi): records deleted before we copied them (retention,
 * DeleteRecords) or a reset partition.  Logged with the offsets, counted,
 * and resumed at the log start (or failed, on_truncation: fail). */
static int64_t check_truncation(struct recon *rc, int64_t next) {
        aagw_flow_t   *f  = rc->f;
        struct ptrack *pt = rc->pt;
        int64_t        lo, hi;

        if (next < 0 ||
            replicator_watermarks(f->meta, pt->tt->topic,
                                             pt->partition, &lo, &hi, 10000))
                return next;
        rc->ans.hi_seen = hi;
        if (next > hi) {
                rc->ans.resets++;
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: %s [%d]: stored position %" PRId64
                         " is past the source end offset %" PRId64
                         " (log start %" PRId64 "): the partition was reset "
                         "or recreated; %s",
                         f->name, pt->tt->topic, (int)pt->partition, next, hi,
                         lo,
                         f->conf.mm2.truncation_fail
                             ? "failing (on_truncation: fail)"
                             : "resuming at its log start");
        } else if (next < lo) {
                rc->ans.truncations++;
                rc->ans.truncated_records += (uint64_t)(lo - next);
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: %s [%d]: source log start %" PRId64
                         " passed the stored position %" PRId64 ": %" PRId64
                         " records were deleted before they were replicated "
                         "(retention or DeleteRecords); gap %" PRId64
                         "..%" PRId64 "; %s",
                         f->name, pt->tt->topic, (int)pt->partition, lo, next,
                         lo - next, next, lo - 1,
                         f->conf.mm2.truncation_fail
                             ? "failing (on_truncation: fail)"
                             : "resuming at the log start");
        } else
                return next;
        if (f->conf.mm2.truncation_fail)
                flow_fail(f, "%s [%d]: source truncated or reset (position "
                             "%" PRId64 ", log %" PRId64 "..%" PRId64 ")",
                          pt->tt->topic, (int)pt->partition, next, lo, hi);
        return lo;
}

/* Persist the positions that moved, and commit them to the group. */
void flow_save_positions(aagw_flow_t *f, bool force) {
        struct aagw_flow_pos            *pos;
        size_t                           n = 0, cap = 0;
        rd_kafka_topic_partition_list_t *commit;

        (void)force;
        for (size_t i = 0; i < f->ntopics; i++)
                cap += (size_t)f->topics[i]->partition_cnt;
        if (!cap)
                return;
        pos    = calloc(cap, sizeof(*pos));
        commit = rd_kafka_topic_partition_list_new((int)cap);
        if (!pos)
                goto out;
        for (size_t i = 0; i < f->ntopics; i++) {
                struct ttrack *tt = f->topics[i];
                for (int32_t p = 0; p < tt->partition_cnt; p++) {
                        struct ptrack *pt = tt->parts[p];
                        int64_t        lo, hi;
                        if (pt && pt->assigned &&
                            !rd_kafka_get_watermark_offsets(
                                flow_fx_consumer(f, tt->topic, p), tt->topic, p,
                                &lo, &hi) &&
                            hi >= 0) {
                                atomic_store_explicit(&pt->high, hi, RELAXED);
                                source_shrank(f, pt, hi);
                        }
                        /* The boundary sync: everything below 'next' is
                         * below 'out_next' at the target.  Written when
                         * its delta is new, e.g. after a run of skipped
                         * records at the end of what was read.
                         * (Scale-out: flow_scale_commit() writes it.) */
                        if (pt && pt->assigned && pt->next >= 0 &&
                            pt->head == pt->tail && !f->owner)
                                flow_sync_point(f, pt, pt->next, pt->out_next,
                                           false);
                        if (!pt)
                                continue;
                        /* Scale-out: only what a transaction committed
                         * is final. */
                        int64_t nx = f->owner ? pt->c_next : pt->next;
                        int64_t ox = f->owner ? pt->c_out : pt->out_next;
                        if (nx < 0 ||
                            (nx == pt->saved_next && ox == pt->saved_out))
                                continue;
                        pos[n++] = (struct aagw_flow_pos){tt->topic, p, nx,
                                                          ox};
                        if (pt->assigned)
                                rd_kafka_topic_partition_list_add(commit,
                                                                  tt->topic, p)
                                    ->offset = nx;
                }
        }
        if (n && f->conf.pos_save &&
            f->conf.pos_save(f->conf.opaque, f->scope, pos, n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        struct ptrack *pt =
                            flow_topic_find(f, pos[i].topic)->parts[pos[i].partition];
                        pt->saved_next = pos[i].next;
                        pt->saved_out  = pos[i].out_next;
                }
        } else if (n && f->conf.pos_save) {
                /* The state dir refuses writes (full, read-only): stop
                 * rather than copy on with positions only in memory, and
                 * commit nothing to the group past what is stored. */
                if (!atomic_load(&f->ctl.stop))
                        flow_fail(f, "cannot store positions in the state "
                                     "dir (see the STATE error above); "
                                     "stopping at the stored positions");
                goto out;
        }
        /* (Not once a stop has spent its time for Kafka: the commit
         * would only hold the consumer's destroy.) */
        if (commit->cnt && f->consumer && aagw_kafka_stop_wait_ms(1) > 0)
                rd_kafka_commit(f->consumer, commit, 1 /* async */);
out:
        free(pos);
        rd_kafka_topic_partition_list_destroy(commit);
}

/* Wait for every in-flight record (delivery reports arrive here). */
/* Start copying 'pt' from source offset 'offset' (flow_reconcile()'s answer). */
void flow_part_start(aagw_flow_t *f, struct ptrack *pt, int64_t offset) {
        pt->next       = offset >= 0 ? offset : -1;
        pt->read_next  = pt->next >= 0 ? pt->next : 0;
        pt->saved_next = -2; /* save once after assign */
        pt->head = pt->tail = 0;
        replicator_start_arm(&pt->start, pt->next);
        if (!pt->assigned)
                atomic_fetch_add(&f->nparts_assigned, 1);
        flow_part_mark(pt, true, false);
        pt->sync_known = false;
        pt->c_next     = pt->next;
        pt->c_out      = pt->out_next;
        atomic_store_explicit(&pt->pos_pub, pt->next, RELAXED);
        aagw_log(AAGW_LOG_DEBUG, "FLOW",
                 "%s: assigned %s [%d] from offset %" PRId64, f->name, pt->tt->topic, (int)pt->partition, offset);
}

void flow_target_count(aagw_flow_t *f, struct ttrack *tt, int have,
                       int want) {
        int32_t missing = want > have ? want - have : 0;

        if (tt->target_cnt > 0 && have > tt->target_cnt) {
                /* The copy grew: the reader (flow_reconcile()) learns of the
                 * new partitions before it reconciles them, not from a
                 * failed watermark query and a wait for the end offset to
                 * settle. */
                atomic_store(&tt->reader_stale, true);
        }
        pthread_mutex_lock(&f->ctl.lock);
        tt->target_cnt = have;
        atomic_fetch_add(&f->nparts_missing, missing - tt->missing);
        tt->missing = missing;
        pthread_mutex_unlock(&f->ctl.lock);
        if (missing && !tt->refused) {
                tt->refused = true;
                atomic_fetch_add(&f->ntopics_refused, 1);
        } else if (!missing && tt->refused) {
                tt->refused = false;
                atomic_fetch_sub(&f->ntopics_refused, 1);
        }
        if (missing && tt->reported != want) {
                tt->reported = want;
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: %s has %d partitions at %s, its source %s has "
                         "%d: source partitions %d..%d are held (not read, "
                         "nothing lost) until the copy has them; the other "
                         "partitions and topics keep flowing. Fix: "
                         "kafka-topics.sh --bootstrap-server %s --alter "
                         "--topic %s --partitions %d",
                         f->name, tt->remote, have, f->target, tt->topic, want,
                         have, want - 1, f->target_bs, tt->remote, want);
        } else if (!missing && tt->reported) {
                tt->reported = 0;
                aagw_log(AAGW_LOG_INFO, "FLOW",
                         "%s: %s has all %d partitions at %s now", f->name,
                         tt->remote, want, f->target);
        }
        flow_release_held(f, tt);
}
