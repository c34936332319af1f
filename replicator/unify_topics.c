/*
 * replicator/unify_topics.c: what a unify stage reads and writes: the
 * logical topics and their inputs as discovery finds them, their output
 * topics, and the start-up scan that folds in what a previous run left in
 * the outputs.
 */
#include "unify_int.h"

/* ---------------------------------------------------------- DISCOVERY --- */

/* Make sure the output of 'ut' exists; returns its partition count, or
 * -1 (retry at the next discovery). */
static int ensure_output(aagw_unify_t *u, struct utopic *ut, int want,
                         const struct rd_kafka_metadata *md) {
        struct replicator_topic_maker tm = {
            .admin             = u->admin,
            .producer          = u->producer,
            .tag               = "UNIFY",
            .who               = u->who,
            .cluster           = u->site,
            .admin_unsupported = &u->admin_unsupported};
        int have = replicator_md_partitions(md, ut->out);
        return have > 0 ? have : replicator_topic_make(&tm, ut->out, want);
}

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
int unify_output_wait(aagw_unify_t *u, struct utopic *ut) {
        int64_t deadline = aagw_mono_ms() + OUTPUT_WAIT_MS;
        bool    logged   = false;

        for (;;) {
                rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
                int32_t             p;
                int64_t             lo, hi;

                for (p = 0; p < ut->out_parts; p++)
                        if ((err = replicator_watermarks(
                                 u->reader, ut->out, p, &lo, &hi, 5000)))
                                break;
                if (!err)
                        return 0;
                if (atomic_load(&u->ctl.stop))
                        return -1;
                if (aagw_mono_ms() >= deadline) {
                        ufail(u, "reading the end of %s [%d]: %s for %d s",
                              ut->out, (int)p, rd_kafka_err2str(err),
                              OUTPUT_WAIT_MS / 1000);
                        return -1;
                }
                if (!logged)
                        aagw_log(AAGW_LOG_WARN, "UNIFY",
                                 "unify@%s: reading the end of %s [%d]: %s; "
                                 "trying again for up to %d s",
                                 u->site, ut->out, (int)p,
                                 rd_kafka_err2str(err), OUTPUT_WAIT_MS / 1000);
                logged = true;
                replicator_refresh_leaders(u->reader, ut->out, 2000);
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

/* Read each output partition of 'ut' from the stored position to its end
 * and fold what is there.  Returns 0, or -1 (the stage fails). */
int unify_recover_output(aagw_unify_t *u, struct utopic *ut) {
        char   err[512];
        size_t found = 0, found_nopos = 0;

        if (unify_output_wait(u, ut))
                return -1;
        /* Requests of the killed run still held by a broker, to any
         * output partition (replicator_settle_all()). */
        size_t nends = ut->out_parts > 0 ? (size_t)ut->out_parts : 1;
        struct replicator_end *ends = calloc(nends, sizeof(*ends));
        if (!ends) {
                ufail(u, "out of memory");
                return -1;
        }
        for (int32_t p = 0; p < ut->out_parts; p++)
                ends[p] = (struct replicator_end){ut->out, p, -1};
        int sa = replicator_settle_all(u->reader, u->end_probe, ends,
                                       (size_t)ut->out_parts, OUTPUT_WAIT_MS,
                                       &u->ctl.stop, "UNIFY", u->who);
        free(ends);
        if (sa < 0)
                return -1;
        if (sa > 0) {
                ufail(u, "%s: not every partition ends at its high "
                         "watermark after %d s; writing on could deliver "
                         "records twice",
                      ut->out, OUTPUT_WAIT_MS / 1000);
                return -1;
        }
        for (int32_t p = 0; p < ut->out_parts; p++) {
                int64_t lo, hi, from, next = -1;
                int     e = u->ops->pos(u->st, true, ut->out, p, &next, err,
                                        sizeof(err));
                if (e < 0) {
                        ufail(u, "%s", err);
                        return -1;
                }
                rd_kafka_resp_err_t kerr =
                    unify_watermarks(u->reader, ut->out, p, &lo, &hi, 10000);
                if (kerr) {
                        ufail(u, "reading the end of %s [%d]: %s", ut->out,
                              (int)p, rd_kafka_err2str(kerr));
                        return -1;
                }
                /* Records the previous run left above the watermark (a
                 * replica in the ISR did not fetch them: a broker that
                 * died and is not fenced yet, or a new leader's watermark
                 * still behind its log) would be missed by the scan and
                 * delivered again: only this stage writes here, so wait
                 * until the watermark is the log's end. */
                int s = replicator_settle_end(u->reader, u->end_probe, ut->out,
                                              p, &lo, &hi, OUTPUT_WAIT_MS,
                                              &u->ctl.stop, "UNIFY", u->who);
                if (s < 0)
                        return -1;
                if (s > 0) {
                        ufail(u, "%s [%d]: its high watermark %" PRId64
                                 " did not reach the end of its leader's "
                                 "log in %d s (a replica in the ISR not "
                                 "fetching?); writing on could deliver "
                                 "records twice",
                              ut->out, (int)p, hi, OUTPUT_WAIT_MS / 1000);
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
                free(ut->in[i]);
        }
        if (ut->out_rkt)
                rd_kafka_topic_destroy(ut->out_rkt);
        if (ut->state_rkt)
                rd_kafka_topic_destroy(ut->state_rkt);
        if (ut->ids_rkt)
                rd_kafka_topic_destroy(ut->ids_rkt);
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
                if (u->scale && (!ut->restored || !unify_so_owns_any(u, ut)))
                        continue;
                for (size_t i = 0; i < ut->nin; i++) {
                        struct uinput *ui = ut->in[i];
                        if (!ui->led)
                                continue;
                        ninputs++;
                        for (int32_t p = 0; p < ui->nparts; p++) {
                                int64_t off = ui->next[p];
                                int64_t next;
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

/* Whether the stage's consumer, asked for 'ui''s metadata itself, finds
 * every partition with a leader.  The request also fills the consumer's
 * cache, which an assignment then relies on: librdkafka 2.0 leaves a
 * partition it assigned while its cache lacked it (a topic created
 * moments ago, another handle's metadata newer) unserved until its
 * periodic refresh, minutes later. */
static bool consumer_knows(aagw_unify_t *u, const struct uinput *ui) {
        const struct rd_kafka_metadata *md  = NULL;
        rd_kafka_topic_t               *rkt =
            rd_kafka_topic_new(u->consumer, ui->topic, NULL);
        bool ok = false;

        if (!rkt)
                return false;
        if (!aagw_kafka_metadata(u->consumer, false, rkt, &md, 5000, NULL) &&
            md->topic_cnt == 1 && !md->topics[0].err &&
            md->topics[0].partition_cnt >= ui->nparts) {
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

void unify_discover(aagw_unify_t *u) {
        const struct rd_kafka_metadata *md = NULL;
        const aagw_repl_policy_t       *pol = u->conf.policy;
        bool                            changed = false;
        rd_kafka_resp_err_t err = aagw_kafka_metadata(u->admin, true, NULL,
                                                      &md, 5000, &u->ctl.stop);
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
                 * (consumer_knows()).  (Once assigned, an input stays so:
                 * a leader lost later is the stall detection's case.) */
                bool led = true;
                for (int k = 0; k < mt->partition_cnt && !ui->led; k++)
                        if (mt->partitions[k].err ||
                            mt->partitions[k].leader < 0)
                                led = false;
                if (!ui->led && led && consumer_knows(u, ui)) {
                        ui->led = true;
                        changed = true;
                } else if (!ui->led) {
                        u->inputs_leaderless = true;
                }
        }
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (ut->ready || !ut->nin)
                        continue;
                int want = 1;
                for (size_t k = 0; k < ut->nin; k++)
                        if (ut->in[k]->nparts > want)
                                want = ut->in[k]->nparts;
                int have = ensure_output(u, ut, want, md);
                if (have <= 0)
                        continue;
                ut->out_parts = have;
                if (ut->out_id < 0 &&
                    (ut->out_id = u->ops->output(u->st, ut->out, have)) < 0) {
                        ufail(u, "out of memory");
                        break;
                }
                if (atomic_load(&u->ctl.stop))
                        break;
                if (u->scale) {
                        /* No start-up scan: with transactions, what a
                         * previous owner wrote is committed together with
                         * its changelog, or not visible at all. */
                        if (unify_so_state_topic(u, ut, md))
                                continue;
                        ut->out_rkt = rd_kafka_topic_new(u->out_producer,
                                                         ut->out, NULL);
                        replicator_refresh_leaders(u->out_producer, ut->out,
                                                   5000);
                        ut->ready    = true;
                        ut->restored = false;
                        u->need_restore = true;
                        changed         = true;
                        continue;
                }
                ut->out_rkt = rd_kafka_topic_new(u->producer, ut->out, NULL);
                /* The output's leaders for the handles that check its
                 * end and read its tail: see replicator_prime_topic(). */
                replicator_prime_topic(u->end_probe, u->reader, ut->out);
                if (unify_recover_output(u, ut))
                        break;
                /* The producer's leaders as they are now, not as they were
                 * when it started (maybe during the outage the scan waited
                 * out): see replicator_refresh_leaders(). */
                replicator_refresh_leaders(u->producer, ut->out, 5000);
                ut->ready = true;
                changed   = true;
        }
        rd_kafka_metadata_destroy(md);
        if (changed && !atomic_load(&u->ctl.stop))
                unify_reassign(u);
}

/* Records behind the inputs' high unify_watermarks, from the unify_watermarks the
 * consumer's fetches cached (no request); -1 while one is unknown. */
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
                                if (rd_kafka_get_watermark_offsets(
                                        u->consumer, ui->topic, p, &lo, &hi) ||
                                    hi < 0) {
                                        lag = -1;
                                        break;
                                }
                                int64_t at = ui->next[p] >= 0 ? ui->next[p]
                                                              : lo;
                                if (at < lo)
                                        at = lo;
                                if (hi > at)
                                        lag += hi - at;
                        }
                }
        }
        atomic_store(&u->lag, lag);
}
