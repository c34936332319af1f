/*
 * replicator/unify_route.c: the route topic of a unify stage shared by the
 * processes of a site (scale_out.route).
 *
 * Without it every process reads every input partition and decides the
 * records of the output partitions it owns: N processes read each input
 * N times, and the brokers serve it N times.  With it the inputs are
 * divided as the flows divide their source partitions: input partition
 * (t, i) is routed by the process owning work partition
 * (XXH32(t) + i) % W, which reads it once and writes each record, by its
 * output partition p (its id hash, dedup, or its scoped entity key hash,
 * lww: unify_out_part()), into partition p of the site's route topic
 * aagw.<id>.<site>.route.<unified topic>.  The process owning p reads
 * route partition p and decides from there as it would from the inputs.
 * A record whose p the router owns itself is decided at once, in the
 * transaction that commits the router's position (unify_process()): one
 * process routes nothing, N route about (N-1)/N of the records.
 *
 * Exactly once: the routed records go into the router's transaction with
 * its positions, committed as the owners' group's offsets of the input
 * partitions (the same TxnOffsetCommit whose work-partition offsets fence
 * a member the group moved on from).  A route partition read
 * read_committed thus holds each input record once; a zombie's routing
 * stays aborted.  A new router reads the committed offsets back
 * (stable only: a previous owner's transaction still open holds them
 * until it ends).  A decider's position is its route partition's offset,
 * kept in the changelog as any input position.
 *
 * A routed record is the input record (key, value, timestamp, headers)
 * with one more header, last: <prefix>route = TOPIC:PARTITION:OFFSET,
 * where it was read.  The decider takes the record as read there: the
 * provenance it stamps, the id it derives, the audit entry and the
 * unified copy's <prefix>in carry the input's coordinates, never the
 * route topic's, so the unified topic is the same as without the route.
 *
 * Input positions a site kept before it used the route (scale-out
 * without it, or a single process's output seeded) stay in the
 * changelog: a routed record below its input partition's position for
 * p was decided then and is skipped (unify_scale_filter()), so a router
 * that starts an input from its beginning delivers nothing twice.
 */
#include "unify_int.h"

#include <xxhash.h>

#define ROUTE_FETCH_MS 60000
/* A routed record is deleted once its decision is committed: the route
 * topic holds about this long of routed records, not its retention's
 * worth. */
#define ROUTE_PURGE_MS 10000

/* The work partition of input partition 'i' of 'topic': its router is
 * the member that owns it (as the flows divide their source partitions).
 * u->work_parts > 0. */
static int32_t input_work(const aagw_unify_t *u, const char *topic, int32_t i) {
        uint32_t h = XXH32(topic, strlen(topic), 0) + (uint32_t)i;

        return (int32_t)(h % (uint32_t)u->work_parts);
}

bool unify_reads(const aagw_unify_t *u, const struct uinput *ui, int32_t i) {
        if (!u->route)
                return true;
        if (ui->route)
                return unify_scale_owns(u, i);
        if (!u->owner || u->work_parts <= 0)
                return false;
        return owner_owned(u->owner, input_work(u, ui->topic, i));
}

/* The state partition that holds the router positions (rpos) of input
 * partition 'i' of 'topic': one whose output partition the router of
 * that input owns too (the work partition of both is the same; with
 * fewer output partitions than work partitions not always), so that
 * routers do not write into a state partition another member owns.  An
 * owner's unchanged state partitions are what lets it keep them across
 * a rebalance without reading them again (unify_scale_kept()). */
static int32_t rpos_partition(const aagw_unify_t *u, const struct utopic *ut,
                              const char *topic, int32_t i) {
        return u->work_parts > 0 ? input_work(u, topic, i) % ut->out_parts
                                 : i % ut->out_parts;
}

int unify_route_name(aagw_unify_t *u, const char *out, char *route) {
        return unify_site_topic(u, "route", out, route);
}

int unify_route_make(aagw_unify_t *u, const char *out, int32_t parts,
                     const struct rd_kafka_metadata *md) {
        /* Kept as long as Kafka keeps a topic by default: a record routed
         * waits there until its decider reads it, which a site down for
         * days must still find.  Large records: an input record with one
         * more header. */
        static const char *const conf[] = {"cleanup.policy",
                                           "delete",
                                           "retention.ms",
                                           "604800000",
                                           "max.message.bytes",
                                           "16777216",
                                           NULL};
        char                     route[AAGW_TOPIC_MAX + 1];
        int                      have;

        if (unify_route_name(u, out, route))
                return -1;
        have = replicator_md_partitions(md, route);
        if (have >= 0 && have != parts) {
                ufail(u,
                      "unified topic %s has %d partitions but its route "
                      "topic %s has %d: records are routed to the partition "
                      "of the unified topic they belong to, so the counts "
                      "must match.  Stop every process of site %s, let no "
                      "process read %s again (delete it once its records "
                      "are decided: its partitions' positions in the "
                      "changelog are at its end), and follow "
                      "docs/deployment.md, \"Growing a unified topic\"",
                      out, (int)parts, route, have, u->site, route);
                return -1;
        }
        if (have < 0 && unify_topic_create(u, "route topic", route, parts, conf,
                                           "decided records deleted"))
                return -1;
        return 0;
}

int unify_route_ready(aagw_unify_t *u, struct utopic *ut) {
        if (unify_route_name(u, ut->out, ut->route))
                return -1;
        if (!ut->route_rkt && !(ut->route_rkt = rd_kafka_topic_new(
                                    u->out_producer, ut->route, NULL))) {
                ufail(u, "out of memory");
                return -1;
        }
        if (!ut->purged) {
                if (!(ut->purged = malloc((size_t)ut->out_parts *
                                          sizeof(*ut->purged)))) {
                        ufail(u, "out of memory");
                        return -1;
                }
                for (int32_t p = 0; p < ut->out_parts; p++)
                        ut->purged[p] = -1;
        }
        if (ut->rin)
                return 0;
        if (ut->nin == MAX_INPUTS) {
                ufail(u, "%s: more than %d inputs with its route topic",
                      ut->out, MAX_INPUTS - 1);
                return -1;
        }
        struct uinput *ui = calloc(1, sizeof(*ui));
        if (!ui || unify_uinput_resize(ui, ut->out_parts)) {
                if (ui) {
                        free(ui->next);
                        free(ui->dirty);
                        free(ui->start);
                        free(ui);
                }
                ufail(u, "out of memory");
                return -1;
        }
        copy_str(ui->topic, sizeof(ui->topic), ut->route);
        ui->route         = true;
        ui->led           = true; /* (the helper waited for its leaders) */
        ut->rin           = ui;
        ut->in[ut->nin++] = ui;
        return 0;
}

/* Room in 'ui''s router positions for all its partitions (new:
 * unknown). */
static int rcpos_fit(struct uinput *ui) {
        if (ui->rcpos_parts >= ui->nparts)
                return 0;
        int64_t *r = realloc(ui->rcpos, (size_t)ui->nparts * sizeof(*r));
        if (!r)
                return -1;
        for (int32_t i = ui->rcpos_parts; i < ui->nparts; i++)
                r[i] = ROUTE_UNKNOWN;
        ui->rcpos       = r;
        ui->rcpos_parts = ui->nparts;
        return 0;
}

void unify_route_forget(aagw_unify_t *u) {
        for (size_t t = 0; t < u->ntopics; t++)
                for (size_t k = 0; k < u->topics[t]->nin; k++) {
                        struct uinput *ui = u->topics[t]->in[k];
                        for (int32_t i = 0; i < ui->rcpos_parts; i++)
                                ui->rcpos[i] = ROUTE_UNKNOWN;
                }
}

/* Whether input partition (ui, i) is routed here and its position is
 * still to be read back. */
static bool fetch_due(const aagw_unify_t *u, const struct utopic *ut,
                      const struct uinput *ui, int32_t i) {
        return ut->ready && ut->restored && !ui->route && ui->led &&
               i < ui->rcpos_parts && ui->rcpos[i] == ROUTE_UNKNOWN &&
               unify_reads(u, ui, i);
}

/* The unified topic whose input 'topic' is, NULL if none. */
static struct utopic *topic_with(aagw_unify_t *u, const char *topic) {
        for (size_t t = 0; t < u->ntopics; t++)
                if (unify_input_of(u->topics[t], topic))
                        return u->topics[t];
        return NULL;
}

struct rpos_find {
        aagw_unify_t                    *u;
        rd_kafka_topic_partition_list_t *l;
        int64_t                          assignments;
        int                              found;
};

static bool rpos_rec(void *arg, const struct changelog_rec *c) {
        struct rpos_find *f = arg;

        if (c->kind != CHANGELOG_RPOS)
                return true;
        for (int j = 0; j < f->l->cnt; j++) {
                rd_kafka_topic_partition_t *e = &f->l->elems[j];
                if (e->opaque && e->partition == c->partition &&
                    !strcmp(e->topic, c->topic)) {
                        f->found += e->offset < 0;
                        e->offset = c->offset; /* (the newest wins) */
                }
        }
        return true;
}

/* Serve the group while the changelog is read; false (abandon) once the
 * ownership changed. */
static bool rpos_tick(void *arg) {
        struct rpos_find *f = arg;
        char              err[512];

        if (!f->u->in_owner_cb &&
            owner_poll(f->u->owner, 0, err, sizeof(err)) == AAGW_OWNER_FATAL) {
                ufail(f->u, "member %s: %s", f->u->conf.scale_out->member, err);
                return false;
        }
        return owner_assignments(f->u->owner) == f->assignments;
}

/*
 * Input partitions the group holds no offset of: a new site, or one
 * whose processes were all down longer than the brokers'
 * offsets.retention.minutes.  Their routers also wrote their positions
 * into the compacted state topic (kind rpos, in the partition
 * rpos_partition() names), which does not expire: read them back from there.
 * Returns 0, or 1 (abandoned: the ownership changed, or the stage failed).
 */
static int rpos_missing(aagw_unify_t *u, rd_kafka_topic_partition_list_t *l,
                        int64_t assignments) {
        struct rpos_find f       = {u, l, assignments, 0};
        int              missing = 0;
        char             err[512];

        for (int j = 0; j < l->cnt; j++) {
                l->elems[j].opaque = l->elems[j].offset < 0 ? (void *)1 : NULL;
                missing += l->elems[j].offset < 0;
        }
        for (int j = 0; j < l->cnt; j++) {
                rd_kafka_topic_partition_t *e    = &l->elems[j];
                struct utopic              *ut   = topic_with(u, e->topic);
                bool                        seen = false;
                if (!e->opaque || !ut || !ut->state[0] || ut->out_parts <= 0)
                        continue;
                int32_t q = rpos_partition(u, ut, e->topic, e->partition);
                /* One read per state partition. */
                for (int k = 0; k < j && !seen; k++)
                        seen = l->elems[k].opaque &&
                               topic_with(u, l->elems[k].topic) == ut &&
                               rpos_partition(u, ut, l->elems[k].topic,
                                              l->elems[k].partition) == q;
                if (seen)
                        continue;
                int64_t         records = 0, bytes = 0;
                changelog_end_t end =
                    changelog_read(u->reader, u->hw_probe, ut->state, q, -1,
                                   u->conf.scale_out->txn_timeout_ms + 60000,
                                   &u->ctl.stop, rpos_rec, rpos_tick, &f,
                                   &records, &bytes, err, sizeof(err));
                if (end == CHANGELOG_ABANDONED)
                        return 1;
                if (end == CHANGELOG_FAILED) {
                        ufail(u,
                              "member %s: reading the routers' positions "
                              "from %s [%d]: %s",
                              u->conf.scale_out->member, ut->state, (int)q,
                              err);
                        return 1;
                }
        }
        if (missing)
                aagw_log(AAGW_LOG_INFO, "UNIFY",
                         "unify@%s: member %s: group %s holds no offset of %d "
                         "input partitions it routes now; %d of them found "
                         "in the state topics (the rest start from their "
                         "beginning)",
                         u->site, u->conf.scale_out->member, u->owners_group,
                         missing, f.found);
        return 0;
}

int unify_route_fetch(aagw_unify_t *u) {
        rd_kafka_topic_partition_list_t *l;
        char                             err[512];
        int64_t assignments = owner_assignments(u->owner);
        int64_t deadline    = aagw_mono_ms() + ROUTE_FETCH_MS;

        if (!u->route || !u->owner)
                return 0;
        l = rd_kafka_topic_partition_list_new(16);
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        if (ui->route || rcpos_fit(ui)) {
                                if (!ui->route) {
                                        rd_kafka_topic_partition_list_destroy(
                                            l);
                                        ufail(u, "out of memory");
                                        return -1;
                                }
                                continue;
                        }
                        for (int32_t i = 0; i < ui->nparts; i++)
                                if (fetch_due(u, ut, ui, i))
                                        rd_kafka_topic_partition_list_add(
                                            l, ui->topic, i);
                }
        }
        if (!l->cnt) {
                rd_kafka_topic_partition_list_destroy(l);
                return 0;
        }
        /* The group is served meanwhile (the wait may last a previous
         * owner's transaction timeout); a changed ownership ends it: the
         * next assignment reads its own. */
        for (;;) {
                rd_kafka_resp_err_t e = owner_committed(u->owner, l, 2000);
                if (!e)
                        break;
                if (!u->in_owner_cb &&
                    owner_poll(u->owner, 0, err, sizeof(err)) ==
                        AAGW_OWNER_FATAL) {
                        rd_kafka_topic_partition_list_destroy(l);
                        ufail(u, "member %s: %s", u->conf.scale_out->member,
                              err);
                        return -1;
                }
                if (atomic_load(&u->ctl.stop) || u->tx.need_renew ||
                    owner_assignments(u->owner) != assignments) {
                        rd_kafka_topic_partition_list_destroy(l);
                        return 0;
                }
                nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
                if (aagw_mono_ms() >= deadline) {
                        rd_kafka_topic_partition_list_destroy(l);
                        ufail(u,
                              "member %s: reading the routers' committed "
                              "positions from group %s: %s",
                              u->conf.scale_out->member, u->owners_group,
                              rd_kafka_err2str(e));
                        return -1;
                }
        }
        if (rpos_missing(u, l, assignments)) {
                rd_kafka_topic_partition_list_destroy(l);
                return atomic_load(&u->ctl.state) == AAGW_FLOW_FAILED ? -1 : 0;
        }
        for (int j = 0; j < l->cnt; j++) {
                const rd_kafka_topic_partition_t *e = &l->elems[j];
                for (size_t t = 0; t < u->ntopics; t++) {
                        struct uinput *ui =
                            unify_input_of(u->topics[t], e->topic);
                        if (!ui || e->partition >= ui->rcpos_parts)
                                continue;
                        int64_t off = e->offset >= 0 ? e->offset : -1;
                        ui->rcpos[e->partition] = off;
                        ui->next[e->partition]  = off;
                        ui->dirty[e->partition] = false;
                }
        }
        rd_kafka_topic_partition_list_destroy(l);
        return 0;
}

bool unify_route_unwrap(aagw_unify_t *u, struct aagw_rec *rec, char *topic,
                        size_t size) {
        if (!rec->hdr_cnt)
                return false;
        const struct aagw_header *h = &rec->hdrs[rec->hdr_cnt - 1];
        if (strcmp(h->name, u->route_hdr) ||
            !aagw_coords_parse(h->value, h->size, topic, size, &rec->partition,
                               &rec->offset))
                return false;
        rec->hdr_cnt--;
        rec->topic = topic;
        return true;
}

/* A record over the producer's message.max.bytes goes to its route
 * partition as a stand-in: its key, an empty value, our headers (up to
 * 4 KiB each), the route header and <prefix>unify.oversize saying what
 * was left out; the decider decides it (its id from our provenance or
 * its key) and writes it to the output as the stand-in it is.  'h' is
 * the record's headers with the route header, still the caller's.
 * Returns the producev error (0: sent, with 'tok' as its opaque). */
static rd_kafka_resp_err_t route_stub(aagw_unify_t *u, struct item *it,
                                      struct token             *tok,
                                      const rd_kafka_headers_t *h,
                                      rd_kafka_resp_err_t       why) {
        const rd_kafka_message_t *m  = it->m;
        rd_kafka_headers_t       *sh = rd_kafka_headers_new(4);
        const char               *hn;
        const void               *hv;
        size_t                    hs, hbytes = 0;
        char                      note[AAGW_TOPIC_MAX + 256];
        rd_kafka_timestamp_type_t tstype;
        int64_t                   ts = rd_kafka_message_timestamp(m, &tstype);

        const void *at  = NULL;
        size_t      atn = 0;

        for (size_t i = 0; !rd_kafka_header_get_all(h, i, &hn, &hv, &hs); i++) {
                if (!strcmp(hn, u->route_hdr)) {
                        at  = hv; /* (the last: added by the caller) */
                        atn = hs;
                } else if (aagw_prov_is_own_header(u->conf.policy, hn) &&
                           hs <= 4096)
                        rd_kafka_header_add(sh, hn, -1, hv, (ssize_t)hs);
                else
                        hbytes += strlen(hn) + hs;
        }
        snprintf(note, sizeof(note),
                 "value %zu bytes and headers %zu bytes left out: too large "
                 "to route into %s (%s)",
                 m->len, hbytes, it->ut->route, rd_kafka_err2str(why));
        /* The note right before the route header: where the decider
         * looks for it (an input's own header of that name is not). */
        rd_kafka_header_add(sh, u->oversize_hdr, -1, note, -1);
        rd_kafka_header_add(sh, u->route_hdr, -1, at, (ssize_t)atn);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(
                    u->out_producer, RD_KAFKA_V_RKT(it->ut->route_rkt),
                    RD_KAFKA_V_PARTITION(it->route_p), RD_KAFKA_V_MSGFLAGS(0),
                    RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE("", 0),
                    RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                    RD_KAFKA_V_HEADERS(sh), RD_KAFKA_V_OPAQUE(tok),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
               !atomic_load(&u->ctl.stop))
                rd_kafka_poll(u->out_producer, 10);
        if (err)
                rd_kafka_headers_destroy(sh);
        else
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: %s [%d] offset %" PRId64 " (%zu bytes) "
                         "is over the producer's message.max.bytes: routed "
                         "as a stand-in, and unified as one",
                         u->site, it->ui->topic, (int)m->partition, m->offset,
                         m->len);
        return err;
}

int unify_route_send(aagw_unify_t *u, size_t n) {
        bool begun = false;

        for (size_t i = 0; i < n; i++) {
                struct item *it = &u->items[i];
                if (it->state != 2)
                        continue;
                if (!begun && unify_scale_begin(u))
                        return -1;
                begun                  = true;
                rd_kafka_message_t *m  = it->m;
                struct utopic      *ut = it->ut;
                rd_kafka_headers_t *h  = NULL;
                char                at[AAGW_COORDS_MAX];
                size_t len = aagw_coords_format(at, it->ui->topic, m->partition,
                                                m->offset);

                if (rd_kafka_message_detach_headers(m, &h) || !h)
                        h = rd_kafka_headers_new(1);
                rd_kafka_header_add(h, u->route_hdr, -1, at, (ssize_t)len);
                struct token *tok = token_get(u);
                if (!tok) {
                        rd_kafka_headers_destroy(h);
                        ufail(u, "out of memory");
                        return -1;
                }
                tok->base.src = m;
                tok->ut       = ut;
                tok->route    = true;
                rd_kafka_timestamp_type_t tstype;
                int64_t             ts = rd_kafka_message_timestamp(m, &tstype);
                rd_kafka_resp_err_t err = replicator_produce(
                    u->out_producer, ut->route_rkt, it->route_p, m, h, ts, tok,
                    &u->ctl.stop, NULL);
                if (err && unify_too_large(err)) {
                        /* Over the producer's message.max.bytes: its
                         * stand-in goes instead, as the unified copy's
                         * would (the decider writes it as one). */
                        rd_kafka_resp_err_t why = err;
                        if (!(err = route_stub(u, it, tok, h, why))) {
                                rd_kafka_headers_destroy(h);
                                goto sent;
                        }
                }
                if (err) {
                        rd_kafka_headers_destroy(h);
                        tok->base.src = NULL;
                        token_put(u, tok);
                        if (atomic_load(&u->ctl.stop))
                                return -1;
                        unify_scale_refused(u, ut->route, it->route_p, err);
                        return -1;
                }
        sent:
                ADD(u->inflight, 1);
                u->txn_records++;
                INC(u->routed);
                it->m = NULL; /* the token's now */
        }
        return 0;
}

/* Call 'fn' on each input partition routed here whose committed
 * position is known, while it returns false; returns whether one
 * returned true. */
static bool route_walk(aagw_unify_t *u,
                       bool (*fn)(aagw_unify_t *u, struct uinput *ui, int32_t i,
                                  void *arg),
                       void *arg) {
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                if (!ut->ready || !ut->restored)
                        continue;
                for (size_t k = 0; k < ut->nin; k++) {
                        struct uinput *ui = ut->in[k];
                        for (int32_t i = 0; !ui->route && i < ui->rcpos_parts;
                             i++)
                                if (ui->rcpos[i] != ROUTE_UNKNOWN &&
                                    unify_reads(u, ui, i) && fn(u, ui, i, arg))
                                        return true;
                }
        }
        return false;
}

/* Where a router stands in input partition 'i': an input partition not
 * read from yet at 0, committed once all the same, so that the group
 * holds an offset of every partition routed (one without is read back
 * from the state topics: rpos_missing()). */
static int64_t router_next(const struct uinput *ui, int32_t i) {
        return ui->next[i] >= 0 ? ui->next[i] : 0;
}

static bool moved_one(aagw_unify_t *u, struct uinput *ui, int32_t i,
                      void *arg) {
        (void)u;
        (void)arg;
        return router_next(ui, i) != ui->rcpos[i];
}

bool unify_route_moved(aagw_unify_t *u) {
        return route_walk(u, moved_one, NULL);
}

static bool add_moved(aagw_unify_t *u, struct uinput *ui, int32_t i,
                      void *arg) {
        rd_kafka_topic_partition_list_t **l = arg;

        if (!moved_one(u, ui, i, NULL))
                return false;
        if (!*l)
                *l = rd_kafka_topic_partition_list_new(16);
        rd_kafka_topic_partition_list_add(*l, ui->topic, i)->offset =
            router_next(ui, i);
        return false;
}

rd_kafka_topic_partition_list_t *unify_route_positions(aagw_unify_t *u) {
        rd_kafka_topic_partition_list_t *l = NULL;

        route_walk(u, add_moved, &l);
        return l;
}

static bool set_committed(aagw_unify_t *u, struct uinput *ui, int32_t i,
                          void *arg) {
        (void)u;
        (void)arg;
        ui->rcpos[i] = router_next(ui, i);
        return false;
}

int unify_route_log(aagw_unify_t *u, const rd_kafka_topic_partition_list_t *l) {
        struct changelog_rec c;

        memset(&c, 0, sizeof(c));
        c.kind = CHANGELOG_RPOS;
        for (int j = 0; l && j < l->cnt; j++) {
                struct utopic *ut = topic_with(u, l->elems[j].topic);
                if (!ut || ut->out_parts <= 0)
                        continue;
                copy_str(c.topic, sizeof(c.topic), l->elems[j].topic);
                c.partition = l->elems[j].partition;
                c.offset    = l->elems[j].offset;
                if (unify_scale_state(
                        u, ut, rpos_partition(u, ut, c.topic, c.partition), &c))
                        return -1;
        }
        return 0;
}

void unify_route_committed(aagw_unify_t *u) {
        route_walk(u, set_committed, NULL);
}

/* The answer to a purge: errors logged at the 1st, 2nd, 4th, ...; the
 * partitions of a failed request are asked for again next time. */
static void purge_answered(aagw_unify_t *u, rd_kafka_event_t *ev) {
        const rd_kafka_topic_partition_list_t *l   = NULL;
        rd_kafka_resp_err_t                    err = rd_kafka_event_error(ev);
        const char *why = rd_kafka_event_error_string(ev);

        if (!err && (l = rd_kafka_DeleteRecords_result_offsets(
                         rd_kafka_event_DeleteRecords_result(ev))))
                for (int i = 0; i < l->cnt && !err; i++)
                        if ((err = l->elems[i].err))
                                why = rd_kafka_err2str(err);
        if (!err)
                return;
        for (size_t t = 0; t < u->ntopics; t++)
                for (int32_t p = 0;
                     u->topics[t]->purged && p < u->topics[t]->out_parts; p++)
                        u->topics[t]->purged[p] = -1;
        uint64_t n = ++u->purge_errors;
        if (!(n & (n - 1)))
                aagw_log(AAGW_LOG_WARN, "UNIFY",
                         "unify@%s: deleting decided records from the route "
                         "topics: %s (%" PRIu64 " such failures so far; "
                         "they stay until the topics' retention.ms: grant "
                         "aagw Delete on them)",
                         u->site, why ? why : rd_kafka_err2str(err), n);
}

void unify_route_purge(aagw_unify_t *u) {
        rd_kafka_event_t *ev;

        if (!u->route)
                return;
        while (u->purge_q && (ev = rd_kafka_queue_poll(u->purge_q, 0))) {
                if (rd_kafka_event_type(ev) ==
                    RD_KAFKA_EVENT_DELETERECORDS_RESULT) {
                        purge_answered(u, ev);
                        u->purge_pending = false;
                }
                rd_kafka_event_destroy(ev);
        }
        int64_t now = aagw_mono_ms();
        if (u->purge_pending || now - u->purge_ms < ROUTE_PURGE_MS)
                return;
        u->purge_ms                        = now;
        rd_kafka_topic_partition_list_t *l = NULL;
        for (size_t t = 0; t < u->ntopics; t++) {
                struct utopic *ut = u->topics[t];
                struct uinput *ri = ut->rin;
                if (!ut->ready || !ut->restored || !ri || !ut->purged ||
                    ri->opos_parts < ut->out_parts)
                        continue;
                for (int32_t p = 0; p < ut->out_parts; p++) {
                        int64_t at = ri->cpos[(size_t)p * ut->out_parts + p];
                        if (!unify_scale_owns(u, p) || at <= 0 ||
                            at <= ut->purged[p])
                                continue;
                        if (!l)
                                l = rd_kafka_topic_partition_list_new(16);
                        rd_kafka_topic_partition_list_add(l, ut->route, p)
                            ->offset  = at;
                        ut->purged[p] = at;
                }
        }
        if (!l)
                return;
        if (!u->purge_q)
                u->purge_q = rd_kafka_queue_new(u->admin);
        rd_kafka_DeleteRecords_t *dr = rd_kafka_DeleteRecords_new(l);
        rd_kafka_AdminOptions_t  *o  = rd_kafka_AdminOptions_new(
              u->admin, RD_KAFKA_ADMIN_OP_DELETERECORDS);
        char err[256];
        rd_kafka_AdminOptions_set_request_timeout(o, 30000, err, sizeof(err));
        rd_kafka_DeleteRecords(u->admin, &dr, 1, o, u->purge_q);
        rd_kafka_DeleteRecords_destroy(dr);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_topic_partition_list_destroy(l);
        u->purge_pending = true;
}
