/*
 * replicator/unify_topics.c: what a unify stage reads and writes: the
 * logical topics and their inputs as discovery finds them, their output
 * topics, and the start-up scan that folds in what a previous run left in
 * the outputs.
 */
#include "unify_int.h"

/* ---------------------------------------------------------- DISCOVERY --- */

/* The entity key of a record under 'ut''s rule: the record key, or a JSON
 * field.  Returns false if the record has none. */
bool unify_entity_key(const struct utopic *ut, const struct aagw_rec *rec,
                      const char *origin, char *buf, size_t size,
                      const void **ekey, size_t *len) {
        if (!ut->ekey_rule) {
                if (!rec->key)
                        return false;
                *ekey = rec->key;
                *len  = rec->key_len;
                return true;
        }
        if (aagw_id_extract(ut->ekey_rule, origin, rec, buf, size, len) !=
            AAGW_REASON_OK)
                return false;
        *ekey = buf;
        return true;
}

void unify_fill_rec(aagw_unify_t *u, const rd_kafka_message_t *m,
                    const char *topic, struct aagw_rec *rec) {
        rd_kafka_timestamp_type_t tstype;
        memset(rec, 0, sizeof(*rec));
        rec->topic        = topic;
        rec->partition    = m->partition;
        rec->offset       = m->offset;
        rec->timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
        rec->key          = m->key;
        rec->key_len      = m->key_len;
        rec->value        = m->payload;
        rec->value_len    = m->len;
        rec->hdr_cnt      = aagw_kafka_headers_view(m, &u->hdrs, &u->hdr_cap);
        rec->hdrs         = u->hdrs;
}

/* Wait until every partition of the output 'ut' answers a watermark
 * query.  While a partition's leader is gone (a broker died, and the
 * controller moves leadership only once the broker's session lapses: 9 s
 * by default) the query fails with a timeout, a transport error or "not
 * leader", and the start-up scan would fail the stage (and the gateway)
 * for a fault the cluster repairs by itself.  Returns 0, or -1 if the
 * stage is stopping or failed after OUTPUT_WAIT_MS. */
int unify_output_wait(aagw_unify_t *u, const char *out, int32_t parts) {
        int64_t deadline = aagw_mono_ms() + OUTPUT_WAIT_MS;
        bool    logged   = false;

        for (;;) {
                rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
                int32_t             p;
                int64_t             lo, hi;

                for (p = 0; p < parts; p++)
                        if ((err = replicator_watermarks(u->reader, out, p, &lo,
                                                         &hi, 5000)))
                                break;
                if (!err)
                        return 0;
                if (atomic_load(&u->ctl.stop))
                        return -1;
                if (aagw_mono_ms() >= deadline) {
                        ufail(u, "reading the end of %s [%d]: %s for %d s", out,
                              (int)p, rd_kafka_err2str(err),
                              OUTPUT_WAIT_MS / 1000);
                        return -1;
                }
                if (!logged)
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: reading the end of %s [%d]: %s; "
                                 "trying again for up to %d s",
                                 u->site, out, (int)p, rd_kafka_err2str(err),
                                 OUTPUT_WAIT_MS / 1000);
                logged = true;
                replicator_refresh_leaders(u->reader, out, 2000);
                struct timespec ts = {0, 250 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* Decode output record 'm' of 'ut' into 'r' (prov in u->verdicts[0],
 * the input topic in 'in_topic', the entity key in 'ebuf'): what the
 * stage decided when it wrote it.  Returns 1, or 0 if aagw did not write
 * it (logged) or it has no entity key. */
int unify_decode_output(aagw_unify_t *u, struct utopic *ut,
                        const rd_kafka_message_t *m,
                        struct aagw_unify_rec *r, char *in_topic,
                        size_t in_size, char *ebuf, size_t ebuf_size) {
        struct aagw_rec   rec;
        struct aagw_prov *p   = &u->verdicts[0].prov;
        const char       *inv = NULL;
        size_t            inlen = 0;

        unify_fill_rec(u, m, ut->out, &rec);
        for (size_t i = 0; i < rec.hdr_cnt; i++)
                if (!strcmp(rec.hdrs[i].name, u->in_hdr)) {
                        inv   = rec.hdrs[i].value;
                        inlen = rec.hdrs[i].size;
                }
        memset(r, 0, sizeof(*r));
        bool ok = aagw_prov_decode(u->conf.policy, rec.hdrs, rec.hdr_cnt,
                                   p) == AAGW_REASON_OK &&
                  p->path_len;
        if (ok && inv) {
                ok = aagw_coords_parse(inv, inlen, in_topic, in_size,
                                       &r->partition, &r->offset);
        } else if (ok) {
                /* No input header: the stage stamped this record's
                 * provenance itself (origin here, one hop), so its source
                 * coordinates are where the stage read it. */
                ok = p->path_len == 1 && !strcmp(p->origin, u->site);
                copy_str(in_topic, in_size, p->src_topic);
                r->partition = p->src_partition;
                r->offset    = p->src_offset;
        }
        if (!ok) {
                /* Not ours: someone else wrote into the unified topic.
                 * It is not folded (we did not deliver it). */
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s [%d] offset %" PRId64
                         " was not written by aagw (no %s header, or "
                         "no %s for a record not stamped here); ignored",
                         u->site, ut->out, (int)m->partition, m->offset,
                         u->prov_hdr, u->in_hdr);
                return 0;
        }
        r->mode      = ut->mode;
        r->prov      = p;
        r->scope     = ut->scope;
        r->topic     = in_topic;
        r->tombstone = m->payload == NULL;
        if (ut->mode == AAGW_UNIFY_LWW) {
                rec.topic = in_topic; /* the rule may derive from it */
                if (!unify_entity_key(ut, &rec, p->origin, ebuf, ebuf_size,
                                &r->ekey, &r->ekey_len))
                        return 0;
        }
        return 1;
}

/* Fold one record found in the output (delivered by an earlier run whose
 * epoch did not commit) in.  Returns 1 if folded, 0 if not ours (or an
 * lww record without an entity key), -1 (the stage fails). */
int unify_fold_record(aagw_unify_t *u, struct utopic *ut,
                      const rd_kafka_message_t *m) {
        char                  in_topic[AAGW_TOPIC_MAX + 1];
        char                  ebuf[AAGW_ID_MAX + 1], err[256];
        struct aagw_unify_rec r;

        if (!unify_decode_output(u, ut, m, &r, in_topic, sizeof(in_topic), ebuf,
                           sizeof(ebuf)))
                return 0;
        if (u->ops->fold(u->st, &r, aagw_wall_ms(), err, sizeof(err)))
                return -1;
        INC(u->recovered);
        return 1;
}

/* The unify_watermarks of 'topic' ['p'] through 'rk'.  A topic created moments
 * ago (ensure_output() makes the output through the Admin API on clusters
 * that do not auto-create) is not yet in the client's metadata, and
 * librdkafka answers "Unknown partition" at once: ask for the topic's
 * metadata and try again, for up to 'timeout_ms' (and while its leaders
 * are being elected, "Not leader for partition"). */
rd_kafka_resp_err_t unify_watermarks(rd_kafka_t *rk, const char *topic,
                                     int32_t p, int64_t *lo, int64_t *hi,
                                     int timeout_ms) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        for (;;) {
                rd_kafka_resp_err_t err = replicator_watermarks(
                    rk, topic, p, lo, hi, timeout_ms);
                if ((err != RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION &&
                     err != RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC &&
                     err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                     err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE &&
                     err != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION) ||
                    aagw_mono_ms() >= deadline)
                        return err;
                replicator_refresh_leaders(rk, topic, 1000);
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* One output partition's start-up scan. */
struct scan {
        aagw_unify_t  *u;
        struct utopic *ut;
        bool           nopos;       /* no stored position for it */
        size_t         found, found_nopos;
        int64_t        at;          /* after the last record folded */
        bool           fold_failed; /* else the store failed */
        char           err[512];
};

static bool scan_record(void *arg, const rd_kafka_message_t *m) {
        struct scan *sc = arg;

        sc->at = m->offset;
        if (unify_fold_record(sc->u, sc->ut, m) < 0) {
                sc->fold_failed = true;
                return false;
        }
        sc->found++;
        sc->found_nopos += sc->nopos;
        sc->at = m->offset + 1;
        return !sc->u->ops->fold_commit(sc->u->st, false, sc->err,
                                        sizeof(sc->err));
}

static void scan_error(void *arg, rd_kafka_resp_err_t err,
                       const char *reason) {
        struct scan *sc = arg;
        (void)err;
        snprintf(sc->err, sizeof(sc->err), "%s", reason);
        aagw_log(AAGW_LOG_WARN, "UNIFY", "unify@%s: reading %s: %s",
                 sc->u->site, sc->ut->out, reason);
}

/* The ends of the output 'out' ('parts' partitions) before the start-up
 * scan: every partition answers (unify_output_wait()), nothing a killed
 * run left is still held by a broker (replicator_settle_all()), and each
 * high watermark is its leader's log end (replicator_settle_end()):
 * '*lo' and '*hi' of each partition.  Kafka only (no state): the
 * stage's helper thread asks it, or the stage's own thread.  Returns 0,
 * or -1 (stopping, or the stage failed). */
static int output_settle(aagw_unify_t *u, const char *out, int32_t parts,
                         int64_t *los, int64_t *his) {
        if (unify_output_wait(u, out, parts))
                return -1;
        /* Requests of the killed run still held by a broker, to any
         * output partition (replicator_settle_all()). */
        size_t                 nends = parts > 0 ? (size_t)parts : 1;
        struct replicator_end *ends = calloc(nends, sizeof(*ends));
        if (!ends) {
                ufail(u, "out of memory");
                return -1;
        }
        for (int32_t p = 0; p < parts; p++)
                ends[p] = (struct replicator_end){out, p, -1};
        int sa = replicator_settle_all(u->reader, u->end_probe, ends,
                                       (size_t)parts, OUTPUT_WAIT_MS,
                                       &u->ctl.stop, "UNIFY", u->who);
        free(ends);
        if (sa < 0)
                return -1;
        if (sa > 0) {
                ufail(u,
                      "%s: not every partition ends at its high "
                      "watermark after %d s; writing on could deliver "
                      "records twice",
                      out, OUTPUT_WAIT_MS / 1000);
                return -1;
        }
        for (int32_t p = 0; p < parts; p++) {
                rd_kafka_resp_err_t kerr = unify_watermarks(
                    u->reader, out, p, &los[p], &his[p], 10000);
                if (kerr) {
                        ufail(u, "reading the end of %s [%d]: %s", out, (int)p,
                              rd_kafka_err2str(kerr));
                        return -1;
                }
                /* Records the previous run left above the watermark (a
                 * replica in the ISR did not fetch them: a broker that
                 * died and is not fenced yet, or a new leader's watermark
                 * still behind its log) would be missed by the scan and
                 * delivered again: only this stage writes here, so wait
                 * until the watermark is the log's end. */
                int s = replicator_settle_end(u->reader, u->end_probe, out, p,
                                              &los[p], &his[p], OUTPUT_WAIT_MS,
                                              &u->ctl.stop, "UNIFY", u->who);
                if (s < 0)
                        return -1;
                if (s > 0) {
                        ufail(u,
                              "%s [%d]: its high watermark %" PRId64
                              " did not reach the end of its leader's "
                              "log in %d s (a replica in the ISR not "
                              "fetching?); writing on could deliver "
                              "records twice",
                              out, (int)p, his[p], OUTPUT_WAIT_MS / 1000);
                        return -1;
                }
        }
        return 0;
}

/* Read each output partition of 'ut' from the stored position to its
 * end, 'his' (settled by output_settle(), and no record written since:
 * only this stage writes there, and not before the topic is ready), and
 * fold what is there.  In the stage's thread: the decider's.  Returns 0,
 * or -1 (the stage fails). */
static int output_fold(aagw_unify_t *u, struct utopic *ut, const int64_t *los,
                       const int64_t *his) {
        char   err[512];
        size_t found = 0, found_nopos = 0;

        for (int32_t p = 0; p < ut->out_parts; p++) {
                int64_t lo = los[p], hi = his[p], from, next = -1;
                int     e = u->ops->pos(u->st, true, ut->out, p, &next, err,
                                        sizeof(err));
                if (e < 0) {
                        ufail(u, "%s", err);
                        return -1;
                }
                from = e ? lo : next;
                if (from < lo)
                        from = lo;
                if (from >= hi) {
                        if (e || next != hi)
                                u->ops->fold_out(u->st, ut->out, p, hi);
                        continue;
                }
                /* A deadline on progress, not on the whole scan: a long
                 * output (state dir lost) takes as long as it takes. */
                struct scan sc = {.u = u, .ut = ut, .nopos = e != 0};
                struct aagw_kafka_range r = {.topic      = ut->out,
                                             .partition  = p,
                                             .from       = from,
                                             .to         = hi,
                                             .timeout_ms = SCAN_TIMEOUT_MS,
                                             .progress   = true,
                                             .stop       = &u->ctl.stop,
                                             .fn         = scan_record,
                                             .on_error   = scan_error,
                                             .arg        = &sc};
                int64_t n;
                aagw_kafka_range_end_t end =
                    aagw_kafka_read_range(u->reader, &r, &n);
                found += sc.found;
                found_nopos += sc.found_nopos;
                if (end == AAGW_RANGE_ABORTED) {
                        if (sc.fold_failed)
                                ufail(u, "folding %s [%d] offset %" PRId64
                                         ": out of memory or bad value",
                                      ut->out, (int)p, sc.at);
                        else
                                ufail(u, "storing what %s holds: %s", ut->out,
                                      sc.err);
                        return -1;
                }
                if (end == AAGW_RANGE_FAILED) {
                        ufail(u, "reading %s [%d]: %s", ut->out, (int)p,
                              sc.err);
                        return -1;
                }
                if (end != AAGW_RANGE_DONE) {
                        ufail(u,
                              "reading %s [%d] from %" PRId64 " to %" PRId64
                              ": no progress for %d s at %" PRId64,
                              ut->out, (int)p, from, hi,
                              SCAN_TIMEOUT_MS / 1000,
                              sc.at > from ? sc.at : from);
                        return -1;
                }
                u->ops->fold_out(u->st, ut->out, p, hi);
        }
        if (u->ops->fold_commit(u->st, true, err, sizeof(err))) {
                ufail(u, "storing what %s holds: %s", ut->out, err);
                return -1;
        }
        /* Records in a partition the store knows nothing about: the
         * state dir is new or was lost (or emptied) while the unified
         * topic kept what earlier runs wrote.  Say so loudly: the state
         * is rebuilt from Kafka, and anything older than the topic's
         * retention is no longer known. */
        if (found_nopos)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s already holds %zu records but the "
                         "state store has no position for it: the state "
                         "dir is new or its state was lost; rebuilding the "
                         "state (ids delivered, last-write-wins winners, "
                         "input positions) from the topic, nothing is "
                         "written again",
                         u->site, ut->out, found_nopos);
        if (found > found_nopos)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: %s: %zu records written by the previous "
                         "run after its last stored state were found and "
                         "folded in; they are not written again",
                         u->site, ut->out, found - found_nopos);
        return 0;
}

const char *unify_topic_base(const aagw_repl_policy_t *pol,
                             const char *topic) {
        const char *t = topic, *up;
        while ((up = aagw_repl_topic_upstream(pol, t)))
                t = up;
        return t;
}

static struct utopic *utopic_get(aagw_unify_t *u, const char *name, bool create) {
        for (size_t i = 0; i < u->ntopics; i++)
                if (!strcmp(u->topics[i]->name, name))
                        return u->topics[i];
        if (!create)
                return NULL;
        if (u->ntopics == MAX_TOPICS) {
                if (!u->topics_full_logged)
                        aagw_log(AAGW_LOG_ERROR, "UNIFY",
                                 "unify@%s: more than %d topics to unify; "
                                 "%s and later ones are not unified (narrow "
                                 "replication.topics or set unify.topics.T."
                                 "mode: off)",
                                 u->site, MAX_TOPICS, name);
                u->topics_full_logged = true;
                return NULL;
        }

        struct aagw_unify_topic tc;
        char                    err[512];
        memset(&tc, 0, sizeof(tc));
        if (u->conf.topic_conf(u->conf.opaque, name, &tc, err, sizeof(err))) {
                aagw_log(AAGW_LOG_ERROR, "UNIFY", "unify@%s: %s", u->site,
                         err);
                return NULL;
        }
        if (tc.mode == AAGW_UNIFY_OFF)
                return NULL;
        struct utopic *ut = calloc(1, sizeof(*ut));
        if (!ut) {
                aagw_id_rule_destroy(tc.ekey_rule);
                return NULL;
        }
        snprintf(ut->name, sizeof(ut->name), "%s", name);
        aagw_unify_lww_scope(u->site, name, ut->scope, sizeof(ut->scope));
        ut->mode      = tc.mode;
        ut->id_rule   = tc.id_rule;
        ut->ekey_rule = tc.ekey_rule;
        ut->out_id    = -1;
        memcpy(ut->out, tc.out, sizeof(ut->out));
        u->topics[u->ntopics++] = ut;
        atomic_store(&u->ntopics_pub, (int32_t)u->ntopics);
        return ut;
}

void unify_utopic_free(struct utopic *ut) {
        for (size_t i = 0; i < ut->nin; i++) {
                free(ut->in[i]->next);
                free(ut->in[i]->dirty);
                free(ut->in[i]->start);
                free(ut->in[i]->opos);
                free(ut->in[i]->cpos);
                free(ut->in[i]->spos);
                free(ut->in[i]->rcpos);
                free(ut->in[i]);
        }
        if (ut->route_rkt)
                rd_kafka_topic_destroy(ut->route_rkt);
        free(ut->purged);
        if (ut->out_rkt)
                rd_kafka_topic_destroy(ut->out_rkt);
        if (ut->state_rkt)
                rd_kafka_topic_destroy(ut->state_rkt);
        if (ut->ids_rkt)
                rd_kafka_topic_destroy(ut->ids_rkt);
        if (ut->audit_rkt)
                rd_kafka_topic_destroy(ut->audit_rkt);
        free(ut->kept_hw);
        free(ut->sb_next);
        aagw_id_rule_destroy(ut->ekey_rule);
        free(ut);
}

int unify_uinput_resize(struct uinput *ui, int32_t nparts) {
        int64_t *nn = realloc(ui->next, (size_t)nparts * sizeof(*nn));
        if (!nn)
                return -1;
        ui->next = nn;
        bool *nd = realloc(ui->dirty, (size_t)nparts * sizeof(*nd));
        if (!nd)
                return -1;
        ui->dirty = nd;
        struct replicator_start *ns =
            realloc(ui->start, (size_t)nparts * sizeof(*ns));
        if (!ns)
                return -1;
        ui->start = ns;
        for (int32_t p = ui->nparts; p < nparts; p++) {
                ui->next[p]  = -1;
                ui->dirty[p] = false;
                replicator_start_arm(&ui->start[p], -1);
        }
        ui->nparts = nparts;
        return 0;
}

/* Assign every input partition at its position: the one in memory if it
 * was read already, else the stored one, else the beginning.  Each
 * partition assigned at an offset is checked to hand over its first
 * record there (replicator_start_take(), in unify_process()). */
void unify_reassign(aagw_unify_t *u) {
        u->last_rkt = NULL; /* inputs changed: forget the cached one */
        if (u->route && unify_route_fetch(u))
                return;
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(64);
        int32_t ninputs = 0;
        char    err[256];

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                /* Scale-out: only a topic whose owned partitions are
                 * restored, from the positions the restore set. */
                if (u->scale && (!ut->restored ||
                                 (!u->route && !unify_scale_owns_any(u, ut))))
                        continue;
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        if (!ui->led)
                                continue;
                        ninputs++;
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                int64_t off = ui->next[p];
                                int64_t next;
                                /* Route: only what is read here, an input
                                 * once its router position is known. */
                                if (u->route &&
                                    (!unify_reads(u, ui, p) ||
                                     (!ui->route &&
                                      (p >= ui->rcpos_parts ||
                                       ui->rcpos[p] == ROUTE_UNKNOWN))))
                                        continue;
                                if (off < 0 && !u->scale &&
                                    u->ops->pos(u->st, false, ui->topic, p,
                                                &next, err,
                                                sizeof(err)) == 0 &&
                                    next >= 0)
                                        off = ui->next[p] = next;
                                replicator_start_arm(&ui->start[p], off);
                                rd_kafka_topic_partition_list_add(l, ui->topic,
                                                                  p)
                                    ->offset =
                                    off >= 0 ? off : RD_KAFKA_OFFSET_BEGINNING;
                        }
                }
        }
        rd_kafka_resp_err_t e = rd_kafka_assign(u->consumer, l);
        if (e)
                aagw_log(AAGW_LOG_WARN, "UNIFY", "unify@%s: assign: %s",
                         u->site, rd_kafka_err2str(e));
        atomic_store(&u->ninputs_pub, ninputs);
        rd_kafka_topic_partition_list_destroy(l);
}

/* Whether the stage's consumer, asked for the metadata of input 'topic'
 * itself, finds its 'nparts' partitions, each with a leader.  The
 * request also fills the consumer's cache, which an assignment then
 * relies on: librdkafka 2.0 leaves a partition it assigned while its
 * cache lacked it (a topic created moments ago, another handle's
 * metadata newer) unserved until its periodic refresh, minutes later. */
static bool consumer_knows(aagw_unify_t *u, const char *topic, int32_t nparts) {
        const struct rd_kafka_metadata *md  = NULL;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(u->consumer, topic, NULL);
        bool ok = false;

        if (!rkt)
                return false;
        if (!aagw_kafka_metadata(u->consumer, false, rkt, &md, 5000, NULL) &&
            md->topic_cnt == 1 && !md->topics[0].err &&
            md->topics[0].partition_cnt >= nparts) {
                ok = true;
                for (int k = 0; k < md->topics[0].partition_cnt; k++)
                        if (md->topics[0].partitions[k].err ||
                            md->topics[0].partitions[k].leader < 0)
                                ok = false;
        }
        if (md)
                rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
        return ok;
}

/* ------------------------------------------------------------ HELPER --- */

/*
 * A discovery's round trips run beside the stage: the metadata is asked
 * for by a watch (md_watch.c) that unify_discover() kicks, and what a
 * discovery then has to ask the cluster is a job for the stage's helper
 * thread: an input's leaders as the stage's consumer sees them
 * (consumer_knows()), or a new output made (replicator_topic_make(): the
 * Admin API, up to its timeout where the cluster answers none) and its
 * ends settled for the start-up scan (output_settle(), which waits for
 * the cluster at least two rounds of END_ROUND_MS), or under scale-out
 * its changelogs made or checked (unify_scale_changelogs_make(), Admin
 * API calls of up to 30 s each).  In the stage's thread every unified
 * topic stood still meanwhile.  The answers come
 * back to the stage's thread (unify_discovered()), which keeps what
 * orders the inputs: an input is assigned once its leaders are known
 * both ways, and a topic's inputs only after its output was folded in
 * (output_fold(), the decider's).  Without the threads (they could not
 * start) a discovery does all of it in the stage's thread.
 */

struct unify_job {
        struct stage_job  base; /* the helper's (stage_worker) */
        struct utopic    *ut;
        struct uinput    *ui; /* leaders of this input; NULL: the output */
        char              topic[AAGW_TOPIC_MAX + 1]; /* ui's, or ut->out */
        int32_t           want; /* the output's partitions to make it with,
                                   or the input's partitions */
        int32_t have;           /* the output's partitions: known from the
                                   metadata, or as made; 0: to make */
        bool              scale;          /* scale-out: make the output and its
                                             changelogs (no scan: restore goes on
                                             in the stage) */
        bool dedup;                       /* (the ids changelog too) */
        /* the answer */
        int rc; /* 0, or -1: at the next discovery (or the
                   stage failed) */
        bool     led;
        int64_t *lo, *hi; /* the output's settled ends */
};

static void job_free(struct unify_job *j) {
        free(j->lo);
        free(j->hi);
        free(j);
}

/* What a job asks of the cluster: no state but its own. */
static void job_run(aagw_unify_t *u, struct unify_job *j) {
        if (j->ui) {
                j->led = consumer_knows(u, j->topic, j->want);
                return;
        }
        if (j->have <= 0) {
                struct replicator_topic_maker tm = {.admin    = u->admin,
                                                    .producer = u->producer,
                                                    .tag      = "UNIFY",
                                                    .who      = u->who,
                                                    .cluster  = u->site,
                                                    .admin_unsupported =
                                                        &u->admin_unsupported};
                j->have = replicator_topic_make(&tm, j->topic, j->want);
        }
        j->rc = j->have > 0 ? 0 : -1;
        if (!j->rc && j->scale && !atomic_load(&u->ctl.stop))
                j->rc =
                    unify_scale_changelogs_make(u, j->topic, j->have, j->dedup);
        if (!j->rc && j->scale && u->route) {
                /* The route topic is read as an input: by a consumer that
                 * knows its leaders (see consumer_knows()). */
                char    route[AAGW_TOPIC_MAX + 1];
                int64_t until = aagw_mono_ms() + 10000;
                j->rc         = unify_route_name(u, j->topic, route);
                while (!j->rc && !consumer_knows(u, route, j->have)) {
                        if (atomic_load(&u->ctl.stop) ||
                            aagw_mono_ms() >= until) {
                                j->rc = -1; /* at the next discovery */
                                break;
                        }
                        nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
                }
        }
        if (j->rc || j->scale || atomic_load(&u->ctl.stop))
                return;
        j->lo = calloc((size_t)j->have, sizeof(*j->lo));
        j->hi = calloc((size_t)j->have, sizeof(*j->hi));
        if (!j->lo || !j->hi) {
                ufail(u, "out of memory");
                j->rc = -1;
                return;
        }
        /* The output's leaders for the handles that check its end and
         * read its tail: see replicator_prime_topic(). */
        replicator_prime_topic(u->end_probe, u->reader, j->topic);
        j->rc = output_settle(u, j->topic, j->have, j->lo, j->hi);
        /* The producer's leaders as they are now, not as they were when
         * it started (maybe during the outage the wait for the ends took):
         * see replicator_refresh_leaders(). */
        if (!j->rc)
                replicator_refresh_leaders(u->producer, j->topic, 5000);
}

static void helper_job(void *arg, struct stage_job *j) {
        job_run(arg, (struct unify_job *)j);
}

/* Wakes the stage's wait (the stage loop waits on this queue): the
 * answer is taken at once. */
static void helper_wake(void *arg) {
        rd_kafka_queue_yield(((aagw_unify_t *)arg)->cq);
}

static void helper_drop(struct stage_job *j) {
        job_free((struct unify_job *)j);
}

static bool output_ready(aagw_unify_t *u, struct unify_job *j);

/* Hand 'j' to the helper, or (none) run it here and act on it.  Returns
 * whether the inputs to assign changed (only when run here). */
static bool job_ask(aagw_unify_t *u, struct unify_job *j) {
        if (j->ui)
                j->ui->asking = true;
        else
                j->ut->preparing = true;
        if (u->helper.t.started) {
                stage_worker_put(&u->helper, &j->base);
                return false;
        }
        job_run(u, j);
        bool changed;
        if (j->ui) {
                j->ui->asking = false;
                if (!(changed = j->led))
                        u->inputs_leaderless = true;
                else
                        j->ui->led = true;
        } else {
                changed = output_ready(u, j);
        }
        job_free(j);
        return changed;
}

static struct unify_job *job_new(struct utopic *ut, struct uinput *ui,
                                 const char *topic, int32_t want,
                                 int32_t have) {
        struct unify_job *j = calloc(1, sizeof(*j));

        if (!j)
                return NULL;
        j->ut   = ut;
        j->ui   = ui;
        j->want = want;
        j->have = have;
        copy_str(j->topic, sizeof(j->topic), topic);
        return j;
}

/* ---------------------------------------------------------- DISCOVERY --- */

/* The output of 'ut' is made ('j->have' partitions) and, but under
 * scale-out, its ends settled: register it with the decider, fold in
 * what a previous run left there, and let its inputs be assigned.
 * Under scale-out the helper made its changelogs too, and restore
 * follows instead.  Returns whether the topic became ready. */
static bool output_ready(aagw_unify_t *u, struct unify_job *j) {
        struct utopic *ut = j->ut;

        ut->preparing = false;
        if (j->rc || atomic_load(&u->ctl.stop))
                return false;
        ut->out_parts = j->have;
        if (ut->out_id < 0 &&
            (ut->out_id = u->ops->output(u->st, ut->out, j->have)) < 0) {
                ufail(u, "out of memory");
                return false;
        }
        if (u->scale) {
                ut->out_made = j->have;
                if (unify_scale_state_topic(u, ut) ||
                    (u->route && unify_route_ready(u, ut)))
                        return false;
                /* No start-up scan: with transactions, what a previous
                 * owner wrote is committed together with its changelog,
                 * or not visible at all. */
                ut->out_rkt =
                    rd_kafka_topic_new(u->out_producer, ut->out, NULL);
                replicator_refresh_leaders(u->out_producer, ut->out, 5000);
                ut->ready       = true;
                ut->restored    = false;
                u->need_restore = true;
                return true;
        }
        ut->out_rkt = rd_kafka_topic_new(u->producer, ut->out, NULL);
        if (output_fold(u, ut, j->lo, j->hi))
                return false;
        ut->ready = true;
        return true;
}

/* The discovery proper, on the site's metadata ('err' from the request;
 * takes 'md'): inputs found, grown, and assigned once led; outputs made
 * and folded in.  What needs the cluster goes to the helper. */
static void discover_md(aagw_unify_t *u, rd_kafka_resp_err_t err,
                        const struct rd_kafka_metadata *md) {
        const aagw_repl_policy_t *pol     = u->conf.policy;
        bool                      changed = false;

        if (err == RD_KAFKA_RESP_ERR__INTR)
                return; /* stopping */
        u->inputs_leaderless = false;
        aagw_reach_note(&u->reach, err);
        if (err) {
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: metadata failed: %s", u->site,
                         rd_kafka_err2str(err));
                return;
        }
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[i];
                if (mt->err || mt->partition_cnt <= 0 ||
                    aagw_repl_topic_is_internal(pol, mt->topic))
                        continue;
                const char *base = unify_topic_base(pol, mt->topic);
                if (!aagw_repl_topic_allowed(pol, base) ||
                    aagw_repl_topic_is_internal(pol, base) ||
                    !strcmp(base, "heartbeats"))
                        continue;
                struct utopic *ut = utopic_get(u, base, true);
                if (!ut)
                        continue;
                struct uinput *ui = NULL;
                for (size_t k = 0; k < ut->nin; k++)
                        if (!strcmp(ut->in[k]->topic, mt->topic))
                                ui = ut->in[k];
                if (!ui) {
                        if (ut->nin == MAX_INPUTS) {
                                if (ut->inputs_full_logged)
                                        continue;
                                ut->inputs_full_logged = true;
                                aagw_log(AAGW_LOG_ERROR, "UNIFY",
                                         "unify@%s: %s: more than %d inputs "
                                         "for %s; not unified",
                                         u->site, mt->topic, MAX_INPUTS,
                                         ut->out);
                                continue;
                        }
                        if (!(ui = calloc(1, sizeof(*ui))))
                                continue;
                        snprintf(ui->topic, sizeof(ui->topic), "%s",
                                 mt->topic);
                        ut->in[ut->nin++] = ui;
                        changed           = true;
                        aagw_log(AAGW_LOG_INFO, "UNIFY",
                                 "unify@%s: %s -> %s (%s)", u->site,
                                 mt->topic, ut->out,
                                 ut->mode == AAGW_UNIFY_LWW ? "lww" : "dedup");
                }
                if (mt->partition_cnt > ui->nparts) {
                        if (unify_uinput_resize(ui, mt->partition_cnt))
                                continue;
                        changed = true;
                }
                /* A topic created moments ago (a flow's copy of a remote
                 * topic) can be listed before its leaders are elected.
                 * librdkafka 2.0 keeps an assigned partition it found
                 * without a leader unfetched until a much later metadata
                 * refresh, with no watermark the stall detection could
                 * see: such an input waits for a discovery that finds
                 * every leader, here and in the consumer's own metadata
                 * (consumer_knows(), the helper's).  (Once assigned, an
                 * input stays so: a leader lost later is the stall
                 * detection's case.) */
                bool led = true;
                for (int k = 0; k < mt->partition_cnt && !ui->led; k++)
                        if (mt->partitions[k].err ||
                            mt->partitions[k].leader < 0)
                                led = false;
                if (!ui->led && led && !ui->asking) {
                        struct unify_job *j =
                            job_new(ut, ui, ui->topic, ui->nparts, 0);
                        if (j)
                                changed |= job_ask(u, j);
                }
                if (!ui->led)
                        u->inputs_leaderless = true;
        }
        for (size_t t = 0; t < u->ntopics && !atomic_load(&u->ctl.stop); t++) {
                struct utopic *ut = u->topics[t];
                if (ut->ready || ut->preparing || !ut->nin)
                        continue;
                int want = 1;
                for (size_t k = 0; k < ut->nin; k++)
                        if (ut->in[k]->nparts > want)
                                want = ut->in[k]->nparts;
                /* Known to the cluster: nothing to make (scale-out: as
                 * made before, if the metadata lags). */
                int have = replicator_md_partitions(md, ut->out);
                if (have <= 0 && u->scale)
                        have = ut->out_made;
                struct unify_job *j =
                    job_new(ut, NULL, ut->out, want, have > 0 ? have : 0);
                if (!j)
                        continue;
                j->scale = u->scale;
                j->dedup = ut->mode == AAGW_UNIFY_DEDUP;
                changed |= job_ask(u, j);
        }
        rd_kafka_metadata_destroy(md);
        if (changed && !atomic_load(&u->ctl.stop))
                unify_reassign(u);
}

/* Start the watch and the helper (the stage's first discovery).  The
 * watch asks only when kicked: unify_round() paces the discoveries (its
 * refresh interval, or LEADER_WAIT_MS while an input waits for its
 * leaders). */
static void discovery_start(aagw_unify_t *u) {
        u->disc_started = true;
        u->helper       = (struct stage_worker){.ctx  = u,
                                                .run  = helper_job,
                                                .wake = helper_wake,
                                                .halt = &u->ctl.stop};
        if (stage_worker_start(&u->helper))
                u->mdw =
                    aagw_md_watch_new(u->admin, 24 * 3600 * 1000, &u->ctl.stop);
}

void unify_discover(aagw_unify_t *u) {
        if (!u->disc_started)
                discovery_start(u);
        if (u->mdw) {
                aagw_md_watch_kick(u->mdw);
                return;
        }
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t             err =
            aagw_kafka_metadata(u->admin, true, NULL, &md, 5000, &u->ctl.stop);
        discover_md(u, err, md);
}

void unify_discovered(aagw_unify_t *u) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t             err;
        struct unify_job               *j, *next;
        bool                            changed = false;

        if (u->mdw && aagw_md_watch_take(u->mdw, &err, &md))
                discover_md(u, err, md);
        if (!(j = (struct unify_job *)stage_worker_take(&u->helper)))
                return;
        for (; j; j = next) {
                next = (struct unify_job *)j->base.next;
                if (j->ui) {
                        j->ui->asking = false;
                        if (j->led) {
                                j->ui->led = true;
                                changed    = true;
                        } else {
                                u->inputs_leaderless = true;
                        }
                } else if (j->scale) {
                        /* Made, with its changelogs: restore next. */
                        j->ut->preparing = false;
                        j->ut->out_made  = j->rc ? 0 : j->have;
                        if (!atomic_load(&u->ctl.stop))
                                changed |= output_ready(u, j);
                } else if (!atomic_load(&u->ctl.stop)) {
                        changed |= output_ready(u, j);
                }
                job_free(j);
        }
        if (changed && !atomic_load(&u->ctl.stop))
                unify_reassign(u);
}

void unify_discovery_stop(aagw_unify_t *u) {
        if (!u->disc_started)
                return;
        aagw_md_watch_destroy(u->mdw);
        u->mdw = NULL;
        /* A job under way ends at the stage's stop (its waits watch
         * u->ctl.stop; a topic's creation within the Admin API's
         * timeout). */
        stage_worker_stop(&u->helper, helper_drop);
        u->disc_started = false;
}

/* Records behind the inputs' high watermarks, from the watermarks the
 * consumer's fetches cached (no request); -1 while one is unknown. */
/* Where the consumer stands in a route partition, if past 'at': a
 * transaction's commit marker ends the partition, and the consumer steps
 * over it without a record to show for it. */
static int64_t route_position(aagw_unify_t *u, const struct uinput *ui,
                              int32_t p, int64_t at) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, ui->topic, p);
        if (!rd_kafka_position(u->consumer, l) && l->elems[0].offset > at)
                at = l->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(l);
        return at;
}

void unify_update_lag(aagw_unify_t *u) {
        int64_t lag = 0;
        for (size_t t = 0; t < u->ntopics && lag >= 0; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready)
                        continue;
                for (size_t i = 0; i < ut->nin && lag >= 0; i++) {
                        struct uinput *ui = ut->in[i];
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                int64_t lo, hi;
                                if (!unify_reads(u, ui, p))
                                        continue;
                                if (rd_kafka_get_watermark_offsets(
                                        u->consumer, ui->topic, p, &lo, &hi) ||
                                    hi < 0) {
                                        lag = -1;
                                        break;
                                }
                                int64_t at = ui->next[p] >= 0 ? ui->next[p]
                                                              : lo;
                                if (ui->route)
                                        at = route_position(u, ui, p, at);
                                if (at < lo)
                                        at = lo;
                                if (hi > at)
                                        lag += hi - at;
                        }
                }
        }
        atomic_store(&u->lag, lag);
}
