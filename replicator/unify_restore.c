/*
 * replicator/unify_restore.c: scale-out state that moves between members:
 * restoring the decisions of gained partitions from their changelogs, the
 * warm standby that keeps reading them, and seeding a changelog from the
 * stored state.
 */
#include "unify_int.h"

/* ------------------------------------------------- SCALE-OUT: RESTORE --- */

/* A partition given back to the process that a clean revocation took it
 * from need not be read again: its state here (RocksDB, the committed
 * positions) is what it committed last, as long as nobody wrote its
 * changelog partitions (state and ids) since.  unify_scale_revoking() notes the
 * end (the high watermark) of each owned one right after its last
 * commit; unify_scale_kept() compares.  Any other writer's transaction adds at
 * least a record and its marker to a partition it wrote (two offsets,
 * also when it was aborted); only this process's own commit marker may
 * land after the note (the coordinator writes markers after it answered
 * the commit): one offset per partition.  And nothing may be open (the
 * last stable offset, from the read_committed reader, is the end). */
void unify_scale_kept_clear(aagw_unify_t *u) {
        for (size_t t = 0; t < u->ntopics; t++)
                for (int32_t p = 0; u->topics[t]->kept_hw &&
                                    p < 2 * u->topics[t]->out_parts;
                     p++)
                        u->topics[t]->kept_hw[p] = -1;
}

void unify_scale_kept_note(aagw_unify_t *u) {
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                if (!ut->kept_hw &&
                    !(ut->kept_hw = malloc(2 * (size_t)ut->out_parts *
                                           sizeof(*ut->kept_hw))))
                        continue; /* (read again: only slower) */
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        int64_t lo, hi, hi_ids;
                        ut->kept_hw[p] = ut->kept_hw[ut->out_parts + p] = -1;
                        hi_ids = 0; /* (no ids topic: nothing to compare) */
                        if (unify_scale_owns(u, p) &&
                            !replicator_watermarks(
                                u->hw_probe, ut->state, p, &lo, &hi, 2000) &&
                            (!ut->ids[0] ||
                             !replicator_watermarks(
                                 u->hw_probe, ut->ids, p, &lo, &hi_ids,
                                 2000))) {
                                ut->kept_hw[p]                 = hi;
                                ut->kept_hw[ut->out_parts + p] = hi_ids;
                        }
                }
        }
        u->kept_pending = true;
}

/* Whether partition 'p' of 'topic' ended at 'kept' when noted and
 * nobody wrote it since. */
static bool scale_unmoved(aagw_unify_t *u, const char *topic, int32_t p,
                       int64_t kept) {
        int64_t lo, hi, lso;

        return kept >= 0 &&
               !replicator_watermarks(u->hw_probe, topic, p, &lo,
                                                 &hi, 5000) &&
               !replicator_watermarks(u->reader, topic, p, &lo,
                                                 &lso, 5000) &&
               lso == hi && hi >= kept && hi - kept <= 1;
}

bool unify_scale_kept(aagw_unify_t *u, struct utopic *ut, int32_t p) {
        if (!ut->kept_hw)
                return false;
        int64_t kept = ut->kept_hw[p], kept_ids = ut->kept_hw[ut->out_parts + p];
        ut->kept_hw[p] = ut->kept_hw[ut->out_parts + p] = -1;
        return scale_unmoved(u, ut->state, p, kept) &&
               (!ut->ids[0] || scale_unmoved(u, ut->ids, p, kept_ids));
}

struct scale_restore_ctx {
        aagw_unify_t  *u;
        struct utopic *ut;
        int32_t        p;
        int64_t        assignments; /* owner_assignments() at the start */
        int64_t        n;
        int64_t        cutoff;      /* ids decided before it left the
                                       window: skipped */
        int64_t        ids, expired; /* ids read; of them skipped */
        size_t         unknown;     /* positions of inputs not known yet */
        int64_t        pos;         /* position records read */
        bool           failed;
        char           err[512];
};

/* Fold the id or winner of changelog record 'c' into the decider. */
static int restore_decision(aagw_unify_t *u, const struct changelog_rec *c,
                            char *err, size_t err_size) {
        struct aagw_unify_rec r;

        changelog_to_rec(c, &r, &u->verdicts[0].prov);
        return u->ops->restore(u->st, &r, c->time_ms, err, err_size);
}

static bool scale_restore_rec(void *arg, const struct changelog_rec *c) {
        struct scale_restore_ctx *rc = arg;
        aagw_unify_t          *u  = rc->u;
        struct utopic         *ut = rc->ut;

        if (c->kind == CHANGELOG_RPOS)
                return true; /* a router's (unify_route_fetch()) */
        if (c->kind == CHANGELOG_POS) {
                rc->pos++;
                struct uinput *ui = unify_input_of(ut, c->topic);
                if (!ui) {
                        /* Not discovered here yet: it starts from its
                         * beginning for this partition, and what was
                         * decided is found seen (dedup) or not newer
                         * (lww). */
                        rc->unknown++;
                        return true;
                }
                if (c->partition < 0)
                        return true; /* not a partition: skipped */
                if ((c->partition >= ui->nparts &&
                     unify_uinput_resize(ui, c->partition + 1)) ||
                    unify_opos_fit(ut, ui)) {
                        rc->failed = true;
                        snprintf(rc->err, sizeof(rc->err), "out of memory");
                        return false;
                }
                size_t x = (size_t)c->partition * ut->out_parts + rc->p;
                ui->opos[x] = ui->cpos[x] = c->offset;
                return true;
        }
        if (c->kind == CHANGELOG_ID) {
                /* Dropped by the decider anyway; the ids topic still
                 * holds them for its margin, a state topic of an older
                 * version for good. */
                rc->ids++;
                if (c->time_ms < rc->cutoff) {
                        rc->expired++;
                        return true;
                }
        }
        if (restore_decision(u, c, rc->err, sizeof(rc->err)) ||
            (!(++rc->n & 1023) &&
             u->ops->fold_commit(u->st, false, rc->err, sizeof(rc->err)))) {
                rc->failed = true;
                return false;
        }
        return true;
}

/*
 * A partition whose changelog holds no position was never decided under
 * scale-out; if its output holds records, a single process wrote them
 * (the site ran without scale-out before), and its state is in that
 * process's RocksDB only.  It is rebuilt from the output itself, as the
 * single-process stage does when its state dir is lost: every record
 * names what it delivered (provenance, input coordinates), so the ids
 * and winners are folded in and written to the changelogs, and each
 * input partition's position for this output partition is past the last
 * input record delivered there (what follows it is decided again, and
 * found delivered or not newer where it was).  In transactions of at
 * most SCALE_SEED_TXN records; the positions go last, so a seed cut short
 * (a crash, a rebalance) is done again by the next owner, which writes
 * the same ids and winners again (harmless: the same keys).
 */
#define SCALE_SEED_TXN 20000

struct seed_pos {
        char    topic[AAGW_TOPIC_MAX + 1];
        int32_t partition;
        int64_t next;
};

struct seed_ctx {
        aagw_unify_t    *u;
        struct utopic   *ut;
        int32_t          p;
        struct seed_pos *pos;
        size_t           npos, cap;
        int64_t          n, foreign, other_part, in_txn, assignments;
        bool             failed, abandoned;
        char             err[512];
};

static bool seed_pos_note(struct seed_ctx *sc, const char *topic,
                          int32_t partition, int64_t offset) {
        for (size_t i = 0; i < sc->npos; i++)
                if (sc->pos[i].partition == partition &&
                    !strcmp(sc->pos[i].topic, topic)) {
                        if (offset + 1 > sc->pos[i].next)
                                sc->pos[i].next = offset + 1;
                        return true;
                }
        if (sc->npos == sc->cap) {
                size_t           cap = sc->cap ? 2 * sc->cap : 16;
                struct seed_pos *np  = realloc(sc->pos, cap * sizeof(*np));
                if (!np)
                        return false;
                sc->pos = np;
                sc->cap = cap;
        }
        struct seed_pos *sp = &sc->pos[sc->npos++];
        copy_str(sp->topic, sizeof(sp->topic), topic);
        sp->partition = partition;
        sp->next      = offset + 1;
        return true;
}

/* Close the seed's open transaction (and open the next one). */
static bool seed_commit(struct seed_ctx *sc) {
        aagw_unify_t *u = sc->u;

        if (u->ops->fold_commit(u->st, false, sc->err, sizeof(sc->err)))
                return false;
        if (unify_scale_commit(u) || u->tx.open || u->tx.broken) {
                snprintf(sc->err, sizeof(sc->err),
                         "its transaction did not commit");
                return false;
        }
        sc->in_txn = 0;
        return true;
}

static bool seed_rec(void *arg, const rd_kafka_message_t *m) {
        struct seed_ctx      *sc = arg;
        aagw_unify_t         *u  = sc->u;
        struct utopic        *ut = sc->ut;
        struct aagw_unify_rec r;
        struct changelog_rec  c;
        char                  in_topic[AAGW_TOPIC_MAX + 1];
        char                  ebuf[AAGW_ID_MAX + 1];
        rd_kafka_timestamp_type_t tstype;

        if (!unify_decode_output(u, ut, m, &r, in_topic, sizeof(in_topic), ebuf,
                           sizeof(ebuf))) {
                sc->foreign++;
                return true;
        }
        aagw_unify_key(u->site, &r);
        if (unify_out_part(ut, &r) != sc->p) {
                /* Written by a process with another partition count or
                 * hash: not this partition's to decide. */
                sc->other_part++;
                return true;
        }
        int64_t ts = rd_kafka_message_timestamp(m, &tstype);
        if (ts < 0)
                ts = aagw_wall_ms();
        if (!seed_pos_note(sc, in_topic, r.partition, r.offset) ||
            u->ops->restore(u->st, &r, ts, sc->err, sizeof(sc->err))) {
                if (!sc->err[0])
                        snprintf(sc->err, sizeof(sc->err), "out of memory");
                sc->failed = true;
                return false;
        }
        memset(&c, 0, sizeof(c));
        c.kind    = r.mode == AAGW_UNIFY_LWW ? CHANGELOG_WIN : CHANGELOG_ID;
        memcpy(c.key, r.key, 16);
        c.hlc     = r.prov->hlc;
        c.time_ms = ts;
        copy_str(c.origin, sizeof(c.origin), r.prov->origin);
        if (c.kind == CHANGELOG_ID) {
                copy_str(c.topic, sizeof(c.topic), in_topic);
                c.partition = r.partition;
                c.offset    = r.offset;
        } else {
                c.tombstone = r.tombstone;
                c.id_len    = r.prov->id_len;
                memcpy(c.id, r.prov->id, r.prov->id_len);
                c.id[r.prov->id_len] = '\0';
        }
        if ((!u->tx.open && unify_scale_begin(u)) ||
            unify_scale_state(u, ut, sc->p, &c)) {
                snprintf(sc->err, sizeof(sc->err),
                         "writing its changelog failed");
                sc->failed = true;
                return false;
        }
        sc->n++;
        if (++sc->in_txn >= SCALE_SEED_TXN && !seed_commit(sc)) {
                sc->failed = true;
                return false;
        }
        /* Serve the group; the ownership moved: the next owner seeds. */
        if (!(sc->n & 1023)) {
                char err[512];
                if (owner_poll(u->owner, 0, err, sizeof(err)) ==
                    AAGW_OWNER_FATAL) {
                        ufail(u, "member %s: %s", u->conf.scale_out->member,
                              err);
                        sc->failed = true;
                        return false;
                }
                if (u->tx.need_renew ||
                    owner_assignments(u->owner) != sc->assignments ||
                    !unify_scale_owns(u, sc->p)) {
                        sc->abandoned = true;
                        return false;
                }
        }
        return true;
}

/* Seed output partition 'p' of 'ut' from the output if it holds records
 * (its changelog holds no position).  Returns 0, 1 (abandoned: the
 * ownership changed meanwhile), or -1 (the stage failed). */
int unify_scale_seed(aagw_unify_t *u, struct utopic *ut, int32_t p) {
        struct seed_ctx sc = {.u = u, .ut = ut, .p = p,
                              .assignments = owner_assignments(u->owner)};
        int64_t         lo, hi, t0 = aagw_mono_ms(), n;
        rd_kafka_resp_err_t kerr;

        if ((kerr = unify_watermarks(u->hw_probe, ut->out, p, &lo, &hi, 10000))) {
                ufail(u, "reading the end of %s [%d]: %s", ut->out, (int)p,
                      rd_kafka_err2str(kerr));
                return -1;
        }
        if (lo >= hi)
                return 0;
        struct aagw_kafka_range r = {.topic      = ut->out,
                                     .partition  = p,
                                     .from       = lo,
                                     .to         = hi,
                                     .timeout_ms = SCAN_TIMEOUT_MS,
                                     .progress   = true,
                                     .stop       = &u->ctl.stop,
                                     .fn         = seed_rec,
                                     .arg        = &sc};
        aagw_kafka_range_end_t end = aagw_kafka_read_range(u->reader, &r, &n);
        if (sc.abandoned) {
                /* (What it committed is written again by the next
                 * owner's seed: no position was written yet.) */
                if (u->tx.open) {
                        char err[512];
                        stage_txn_abort(&u->tx, err, sizeof(err));
                        u->tx.broken = false;
                }
                free(sc.pos);
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1
                                                                       : 1;
        }
        if (end == AAGW_RANGE_DONE && !sc.failed) {
                /* The positions, last. */
                struct changelog_rec c;
                memset(&c, 0, sizeof(c));
                c.kind = CHANGELOG_POS;
                for (size_t i = 0; i < sc.npos && !sc.failed; i++) {
                        copy_str(c.topic, sizeof(c.topic), sc.pos[i].topic);
                        c.partition = sc.pos[i].partition;
                        c.offset    = sc.pos[i].next;
                        if ((!u->tx.open && unify_scale_begin(u)) ||
                            unify_scale_state(u, ut, p, &c)) {
                                snprintf(sc.err, sizeof(sc.err),
                                         "writing its positions failed");
                                sc.failed = true;
                        }
                }
                if (!sc.failed && u->tx.open && !seed_commit(&sc))
                        sc.failed = true;
        }
        if (end != AAGW_RANGE_DONE || sc.failed) {
                if (atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED &&
                    !atomic_load(&u->ctl.stop))
                        ufail(u, "member %s: seeding %s [%d] from %s [%d] "
                                 "(no changelog yet: the site ran without "
                                 "scale-out): %s",
                              u->conf.scale_out->member, ut->state, (int)p,
                              ut->out, (int)p,
                              sc.failed ? sc.err
                                        : "the output could not be read "
                                          "to its end");
                free(sc.pos);
                return atomic_load(&u->ctl.stop) &&
                               atomic_load(&u->ctl.state) != AAGW_FLOW_FAILED
                           ? 0
                           : -1;
        }
        /* What the inputs start from for p. */
        for (size_t i = 0; i < sc.npos; i++) {
                struct uinput *ui = unify_input_of(ut, sc.pos[i].topic);
                if (!ui || sc.pos[i].partition < 0)
                        continue;
                if ((sc.pos[i].partition >= ui->nparts &&
                     unify_uinput_resize(ui, sc.pos[i].partition + 1)) ||
                    unify_opos_fit(ut, ui)) {
                        free(sc.pos);
                        ufail(u, "out of memory");
                        return -1;
                }
                size_t x = (size_t)sc.pos[i].partition * ut->out_parts + p;
                ui->opos[x] = ui->cpos[x] = sc.pos[i].next;
        }
        aagw_log(AAGW_LOG_WARN, "UNIFY",
                 "unify@%s: member %s: %s [%d] had no changelog but holds "
                 "%" PRId64 " records (the site ran without scale-out): "
                 "its state was rebuilt from them and written to its "
                 "changelogs (%" PRId64 " ids or winners, %zu input "
                 "positions, %" PRId64
                 " records not aagw's, %" PRId64 " of another partition) "
                 "in %" PRId64 " ms; nothing is delivered again",
                 u->site, u->conf.scale_out->member, ut->out, (int)p,
                 hi - lo, sc.n, sc.npos, sc.foreign,
                 sc.other_part, aagw_mono_ms() - t0);
        free(sc.pos);
        return 0;
}

/* Serve the group while a restore runs; false (abandon it) once the
 * ownership changed. */
static bool scale_restore_tick(void *arg) {
        struct scale_restore_ctx *rc = arg;
        aagw_unify_t          *u  = rc->u;
        char                   err[512];

        if (owner_poll(u->owner, 0, err, sizeof(err)) == AAGW_OWNER_FATAL) {
                ufail(u, "member %s: %s", u->conf.scale_out->member, err);
                return false;
        }
        return !u->tx.need_renew &&
               owner_assignments(u->owner) == rc->assignments &&
               unify_scale_owns(u, rc->p);
}

/* Have the reader's metadata name 'topic': a partition of a topic its
 * cache lacks is fetched only after librdkafka's own lookups with their
 * growing backoff (0.5-1 s each on a fresh process, paid by the first
 * read of each changelog). */
static void reader_knows(aagw_unify_t *u, const char *topic) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(u->reader, topic, NULL);

        if (!rkt)
                return;
        if (!aagw_kafka_metadata(u->reader, false, rkt, &md, 5000, NULL))
                rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
}

/* Restore every ready topic not restored yet for the owned partitions,
 * then fetch the inputs from the positions restored.  Returns 0, or -1
 * if the stage failed. */
int unify_scale_restore(aagw_unify_t *u) {
        int64_t t0 = aagw_mono_ms(), records = 0, bytes = 0, ids = 0,
                expired = 0;
        int     parts = 0, kept = 0, warmed = 0;
        char    err[512], names[512], owned[sizeof(u->owned)];
        size_t  nn = 0;

        u->need_restore = false;
        names[0]        = '\0';
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || ut->restored)
                        continue;
                /* (Each restore: the cache forgets a topic no handle
                 * holds, after metadata.max.age.ms.) */
                reader_knows(u, ut->state);
                if (ut->ids[0])
                        reader_knows(u, ut->ids);
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        if (!unify_scale_owns(u, p))
                                continue;
                        bool keep = unify_scale_kept(u, ut, p);
                        /* The standby read this partition up to
                         * sb_next: go on from there (given up now:
                         * owned). */
                        int64_t sb_state = -1, sb_ids = -1;
                        if (ut->sb_next) {
                                sb_state = ut->sb_next[p];
                                sb_ids   = ut->sb_next[ut->out_parts + p];
                                ut->sb_next[p] =
                                    ut->sb_next[ut->out_parts + p] = -1;
                        }
                        bool warm = !keep && (sb_state >= 0 || sb_ids >= 0);
                        bool sb_pos = false;
                        for (size_t k = 0; k < ut->nin; k++) {
                                struct uinput *ui = ut->in[k];
                                if (unify_opos_fit(ut, ui)) {
                                        ufail(u, "out of memory");
                                        return -1;
                                }
                                for (int32_t i = 0; i < ui->nparts; i++) {
                                        size_t x = (size_t)i * ut->out_parts + p;
                                        sb_pos |= warm && ui->spos[x] >= 0;
                                        ui->opos[x] = ui->cpos[x] =
                                            keep   ? ui->cpos[x]
                                            : warm ? ui->spos[x]
                                                   : -1;
                                        ui->spos[x] = -1;
                                }
                        }
                        u->sb_reassign |= u->standby != NULL;
                        if (keep) {
                                kept++;
                                continue;
                        }
                        warmed += warm;
                        struct scale_restore_ctx rc = {
                            .u = u, .ut = ut, .p = p,
                            .assignments = owner_assignments(u->owner),
                            .cutoff = aagw_wall_ms() - u->conf.window_ms};
                        /* Positions and winners (and the ids an older
                         * version wrote there), then the window's ids. */
                        const char *from = ut->state;
                        changelog_end_t e = changelog_read(
                            u->reader, u->hw_probe, from, p, sb_state,
                            u->conf.scale_out->txn_timeout_ms + 60000,
                            &u->ctl.stop, scale_restore_rec, scale_restore_tick,
                            &rc, &records, &bytes, err, sizeof(err));
                        if (!rc.failed && e == CHANGELOG_DONE && ut->ids[0]) {
                                from = ut->ids;
                                e    = changelog_read(
                                    u->reader, u->hw_probe, from, p, sb_ids,
                                    u->conf.scale_out->txn_timeout_ms + 60000,
                                    &u->ctl.stop, scale_restore_rec,
                                    scale_restore_tick, &rc, &records, &bytes,
                                    err, sizeof(err));
                        }
                        ids += rc.ids;
                        expired += rc.expired;
                        if (rc.failed || e == CHANGELOG_FAILED) {
                                ufail(u, "member %s: restoring %s [%d]: %s",
                                      u->conf.scale_out->member, from,
                                      (int)p, rc.failed ? rc.err : err);
                                return -1;
                        }
                        int seed = e == CHANGELOG_DONE && !rc.pos && !sb_pos
                                           ? unify_scale_seed(u, ut, p)
                                           : 0;
                        if (seed < 0)
                                return -1;
                        if (seed > 0)
                                e = CHANGELOG_ABANDONED;
                        if (rc.unknown)
                                aagw_log(AAGW_LOG_INFO, "UNIFY",
                                         "unify@%s: %s [%d]: %zu positions of "
                                         "inputs not discovered yet; they "
                                         "start from the beginning",
                                         u->site, ut->state, (int)p,
                                         rc.unknown);
                        if (u->ops->fold_commit(u->st, true, err,
                                                sizeof(err))) {
                                ufail(u, "storing what %s holds: %s",
                                      ut->state, err);
                                return -1;
                        }
                        if (e == CHANGELOG_ABANDONED)
                                /* Stopping, or the group moved on: the
                                 * next assignment is restored afresh. */
                                return atomic_load(&u->ctl.state) ==
                                               AAGW_FLOW_FAILED
                                           ? -1
                                           : 0;
                        parts++;
                }
                unify_scale_positions(u, ut);
                ut->restored = true;
                if (nn < sizeof(names))
                        nn += (size_t)snprintf(names + nn, sizeof(names) - nn,
                                               "%s%s", nn ? ", " : "",
                                               ut->out);
        }
        int64_t ms = aagw_mono_ms() - t0;
        ADD(u->restores, (uint64_t)parts);
        ADD(u->restore_ms_total, (uint64_t)ms);
        ADD(u->restored_records, (uint64_t)records);
        unify_scale_publish(u);
        pthread_mutex_lock(&u->owned_lock);
        memcpy(owned, u->owned, sizeof(owned));
        pthread_mutex_unlock(&u->owned_lock);
        unify_scale_kept_clear(u);
        if (parts)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s restored %d partitions of %s "
                         "from their changelogs: %" PRId64
                         " records, %" PRId64 " bytes in %" PRId64
                         " ms (%" PRId64 " ids, %" PRId64
                         " of them past unify.window: skipped; %d "
                         "partitions warm: read on from the standby's "
                         "offsets)",
                         u->site, u->conf.scale_out->member, parts, names,
                         records, bytes, ms, ids, expired, warmed);
        if (kept)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s kept %d partitions it had "
                         "before the rebalance (their changelogs unchanged "
                         "since it committed them): not read again",
                         u->site, u->conf.scale_out->member, kept);
        /* Not done while a topic's output or changelogs are still being
         * made (the discovery helper's job): its restore follows. */
        bool preparing = false;
        for (size_t t = 0; t < u->ntopics && !preparing; t++)
                preparing = u->topics[t]->preparing;
        if (u->lost_ms && !preparing) {
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s: rebalance done in %" PRId64
                         " ms; owns %s",
                         u->site, u->conf.scale_out->member,
                         aagw_mono_ms() - u->lost_ms,
                         owned[0] ? owned : "none");
                u->lost_ms = 0;
        }
        unify_scale_reassign(u);
        return 0;
}

/* ------------------------------------------------- SCALE-OUT: STANDBY --- */

/*
 * scale_out.standby: every process keeps a warm copy of the output
 * partitions the others own.  An assign-only read_committed consumer
 * ('standby') reads the state and ids partitions of every output
 * partition this process does not own, from where it got to (ut->sb_next)
 * or their beginning, and folds each record in as a restore does: ids
 * and winners into the decider (stored at once), positions into the
 * inputs' 'spos'.  When the process gains such a partition, its restore
 * takes the positions from 'spos' and reads the changelogs from
 * ut->sb_next on: what was written since the standby's last read, not
 * the whole changelog (unify_scale_restore()).  A partition it owned and lost
 * starts over from the beginning (its standby offsets were given up at
 * the gain: the process's own state stopped at its last commit, which
 * no offset names).  Every process reads every changelog, as it reads
 * every input.
 */

/* Take changelog record 'm' of the standby into the state.  Returns 0, or
 * -1 with the reason in 'err'. */
static int sb_apply(aagw_unify_t *u, const rd_kafka_message_t *m,
                    int64_t cutoff, char *err, size_t err_size) {
        const char          *topic = rd_kafka_topic_name(m->rkt);
        struct utopic       *ut    = NULL;
        struct changelog_rec c;
        int32_t              p     = m->partition;
        size_t               idx   = 0;

        for (size_t t = 0; t < u->ntopics && !ut; t++) {
                struct utopic *x = u->topics[t];
                if (!x->sb_next || p < 0 || p >= x->out_parts)
                        continue;
                if (!strcmp(topic, x->state)) {
                        ut  = x;
                        idx = (size_t)p;
                } else if (x->ids[0] && !strcmp(topic, x->ids)) {
                        ut  = x;
                        idx = (size_t)x->out_parts + (size_t)p;
                }
        }
        /* Owned meanwhile (the restore reads it), or read already. */
        if (!ut || unify_scale_owns(u, p) ||
            (ut->sb_next[idx] >= 0 && m->offset < ut->sb_next[idx]))
                return 0;
        ut->sb_next[idx] = m->offset + 1;
        if (!changelog_decode(m->key, m->key_len, m->payload, m->len, &c))
                return 0; /* (another version's: skipped, as a restore) */
        if (c.kind == CHANGELOG_RPOS)
                return 0; /* a router's */
        if (c.kind == CHANGELOG_POS) {
                struct uinput *ui = unify_input_of(ut, c.topic);
                if (!ui || c.partition < 0)
                        return 0;
                if ((c.partition >= ui->nparts &&
                     unify_uinput_resize(ui, c.partition + 1)) ||
                    unify_opos_fit(ut, ui)) {
                        snprintf(err, err_size, "out of memory");
                        return -1;
                }
                ui->spos[(size_t)c.partition * ut->out_parts + p] = c.offset;
                return 0;
        }
        if (c.kind == CHANGELOG_ID && c.time_ms < cutoff)
                return 0;
        return restore_decision(u, &c, err, err_size);
}

/* Give the standby every changelog partition of an output partition this
 * process does not own, from where it got to. */
void unify_sb_assign(aagw_unify_t *u) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new(16);

        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->state_rkt || ut->out_parts <= 0)
                        continue;
                if (!ut->sb_next) {
                        size_t n = 2 * (size_t)ut->out_parts;
                        if (!(ut->sb_next = malloc(n * sizeof(int64_t))))
                                continue; /* (cold restores: only slower) */
                        for (size_t k = 0; k < n; k++)
                                ut->sb_next[k] = -1;
                }
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        int64_t s = ut->sb_next[p],
                                i = ut->sb_next[ut->out_parts + p];
                        if (unify_scale_owns(u, p))
                                continue;
                        rd_kafka_topic_partition_list_add(l, ut->state, p)
                            ->offset = s >= 0 ? s : RD_KAFKA_OFFSET_BEGINNING;
                        if (ut->ids[0])
                                rd_kafka_topic_partition_list_add(l, ut->ids,
                                                                  p)
                                    ->offset =
                                    i >= 0 ? i : RD_KAFKA_OFFSET_BEGINNING;
                }
        }
        rd_kafka_resp_err_t err = rd_kafka_assign(u->standby, l);
        if (err)
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: member %s: the standby's %d changelog "
                         "partitions: %s (tried again)",
                         u->site, u->conf.scale_out->member, l->cnt,
                         rd_kafka_err2str(err));
        else
                u->sb_reassign = false;
        rd_kafka_topic_partition_list_destroy(l);
}

/* Serve the standby: unify_reassign after a change, fold in what arrived.
 * Returns 0, or -1 (the stage failed). */
int unify_sb_poll(aagw_unify_t *u) {
        rd_kafka_message_t *msgs[512];
        char                err[512];
        int64_t             sig = owner_assignments(u->owner) * 1024;

        for (size_t t = 0; t < u->ntopics; t++)
                sig += u->topics[t]->ready && u->topics[t]->state_rkt;
        if (u->sb_reassign || sig != u->sb_sig) {
                u->sb_sig = sig;
                unify_sb_assign(u);
        }
        ssize_t n = rd_kafka_consume_batch_queue(u->sbq, 0, msgs, 512);
        int64_t cutoff = aagw_wall_ms() - u->conf.window_ms;
        int     rc     = 0;
        for (ssize_t i = 0; i < n; i++) {
                if (!rc && !msgs[i]->err &&
                    sb_apply(u, msgs[i], cutoff, err, sizeof(err)))
                        rc = -1;
                rd_kafka_message_destroy(msgs[i]);
        }
        /* Stored at once: nothing the standby read waits in memory. */
        if (!rc && n > 0 &&
            u->ops->fold_commit(u->st, true, err, sizeof(err)))
                rc = -1;
        if (rc)
                ufail(u, "member %s: the standby: %s",
                      u->conf.scale_out->member, err);
        return rc;
}
