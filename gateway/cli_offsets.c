/*
 * gateway/cli_offsets.c: the disaster-recovery commands.
 *
 *   aagw offsets translate --group G --from east --to west [--json]
 *   aagw failover --group G --to west [--from east] [--dry-run] [--force]
 *                 [--json]
 *   aagw drill --group G --from east --to west [--json] [--deadline S]
 *
 * They take the same cluster flags as `run` (-c FILE, --cluster A=B,
 * --set K=V), read what the gateway wrote (offset-syncs, heartbeats, its
 * own committed positions) and the group's committed offsets, and never
 * touch the gateway's state dir, so they work while it runs.
 *
 * Translation: per source partition the group committed C; the points of
 * the offset-syncs topic give the target offset T (policy/mm2_format.c) and
 * whether it is exact.  The target topic is the policy's remote name of
 * the source topic (east.clicks under the prefix policy).  A topic at the
 * source that is a copy of one of the target's own (west.clicks at east,
 * moving to west) goes the other way: back onto its origin at the target,
 * through the offset-syncs of the flow target->source (translate_back()),
 * in `offsets translate` and `failover`, not in the drill.  A copy of a
 * third site's topic (north.clicks at east, moving to west) goes via its
 * origin: back through the offset-syncs of north->east, forward through
 * those of north->west, onto north.clicks at west (translate_via()); both
 * flows keep their syncs and positions at north (or, with
 * mm2.offset_syncs_location target, the syncs at east and at west), so
 * north must be a configured cluster, and answer.
 *
 * Active members: committing offsets for a group that is consuming at the
 * target would race it.  aagw asks DescribeConsumerGroups in a child
 * process (it hangs or aborts the handle on some clusters, the embedded
 * one among them); if the answer does not come, the cluster cannot tell,
 * and failover needs --force from an operator who stopped the consumers.
 */
#include "gateway_int.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aagw_replicator.h"

#define TIMEOUT_MS 10000
#define MAX_SYNC_POINTS 65536 /* per partition, when reading the topic */

/* ------------------------------------------------------------- OPTIONS -- */

struct opts {
        const char *group, *from, *to;
        bool        json, dry_run, force;
        int         deadline_s;
        int         max_hb_age_s;
        int         source_timeout_s; /* before target-only mode */
};

/* One source partition of the group and its translation. */
struct row {
        char                   topic[AAGW_TOPIC_MAX + 1];
        char                   remote[AAGW_TOPIC_MAX + 1];
        int32_t                partition;
        int64_t                committed; /* at the source */
        int64_t                repl_pos;  /* the gateway's position */
        int64_t                src_hi;
        struct aagw_mm2_xlate  x;
        struct aagw_mm2_point *pts;
        size_t                 npts;
        int64_t                target_before; /* group's target offset */
        /* Another replicator (MirrorMaker 2): aagw's own replication
         * group has no position for this partition. */
        bool    foreign;
        int64_t ck_up, ck_down; /* newest checkpoint of the group, -1 */
        bool    by_checkpoint;  /* translated = the checkpoint's offset */
        char    why[640];       /* a note that needs numbers */
        /* drill verification */
        int64_t prev_src, next_src; /* origin offsets around T, -1 none */
        bool    verified;
        /* target-only mode: the checkpoint cannot be used as it is */
        bool ambiguous;
        /* A copy of one of the target's own topics (west.clicks at east
         * when moving to west): the group's position in it goes back to
         * the origin topic at the target ('remote' holds the origin's
         * name), through the offset-syncs of the flow target->source. */
        bool    back;
        int64_t reread; /* records the group may read twice, -1 unknown */
        /* A copy of a third site's topic (north.clicks at east when moving
         * to west): 'via' is that site (borrowed from the policy),
         * 'origin' the topic's name there; 'remote' is the target's copy.
         * pts/npts/repl_pos are the flow via->source's, pts2/npts2/
         * repl_pos2 the flow via->target's; origin_off is the origin
         * offset between the two legs (-1 none). */
        const char            *via;
        char                   origin[AAGW_TOPIC_MAX + 1];
        struct aagw_mm2_point *pts2;
        size_t                 npts2;
        int64_t                repl_pos2, origin_off;
        /* failover: the group's offset at the target before the commit
         * (-1 none), and what was done with the row */
        int64_t     prev;
        const char *action;
};

struct ctx {
        struct opts         o;
        aagw_config_t      *cfg;
        aagw_repl_policy_t *pol;
        const char         *from_bs, *to_bs;
        const char *const *from_props, *const *to_props;
        size_t      from_nprops, to_nprops;
        rd_kafka_t *from_admin, *to_admin;
        struct row *rows;
        size_t      nrows;
        bool        members_unknown; /* the cluster could not tell */
        /* offsets, failover: copies of the target's topics at the source
         * are moved back onto their origin (rows[].back) */
        bool back_ok;
        /* The source did not answer within --source-timeout: translated
         * from the target's checkpoints alone (offsets, failover). */
        bool        target_only_ok; /* the command allows the mode */
        bool        target_only;
        char        source_err[256];
        char        err[1024];
        /* cfg's values as typed fields (aagw_config_settings()) */
        const struct aagw_settings *set;
};

/* Take our options out of argv (they are not config flags), leaving the
 * rest for gw_config_from_args().  Returns -1 on a usage error. */
static int take_opts(int *argcp, char **argv, struct opts *o) {
        int n = 1;

        for (int i = 1; i < *argcp; i++) {
                const char  *a   = argv[i];
                const char **dst = NULL;
                int         *num = NULL;

                if (!strcmp(a, "--group"))
                        dst = &o->group;
                else if (!strcmp(a, "--from"))
                        dst = &o->from;
                else if (!strcmp(a, "--to"))
                        dst = &o->to;
                else if (!strcmp(a, "--deadline"))
                        num = &o->deadline_s;
                else if (!strcmp(a, "--max-heartbeat-age"))
                        num = &o->max_hb_age_s;
                else if (!strcmp(a, "--source-timeout"))
                        num = &o->source_timeout_s;
                else if (!strcmp(a, "--json")) {
                        o->json = true;
                        continue;
                } else if (!strcmp(a, "--dry-run")) {
                        o->dry_run = true;
                        continue;
                } else if (!strcmp(a, "--force")) {
                        o->force = true;
                        continue;
                }
                if (!dst && !num) {
                        argv[n++] = argv[i];
                        continue;
                }
                if (i + 1 >= *argcp) {
                        gw_errorf("%s requires an argument", a);
                        return -1;
                }
                if (dst)
                        *dst = argv[++i];
                else {
                        char *end;
                        long  v = strtol(argv[++i], &end, 10);
                        if (*end || v <= 0 || v > 86400) {
                                gw_errorf("%s: expected seconds, got \"%s\"", a,
                                          argv[i]);
                                return -1;
                        }
                        *num = (int)v;
                }
        }
        argv[n] = NULL;
        *argcp  = n;
        return 0;
}

/* ------------------------------------------------------------- CLIENTS -- */

/* A client of cluster 'alias' (any configured one: the origin of a third
 * site's topic too).  NULL with the reason in c->err. */
static rd_kafka_t *client_at(struct ctx *c, const char *alias,
                             rd_kafka_type_t type, const char *group) {
        const struct aagw_cluster_settings *cl =
            aagw_settings_cluster(c->set, alias);
        char               name[128];
        const char *const *props;
        size_t             nprops;
        rd_kafka_conf_t   *conf;
        rd_kafka_t        *rk;

        if (!cl || !cl->bootstrap_servers) {
                snprintf(c->err, sizeof(c->err), "no cluster %s configured",
                         alias);
                return NULL;
        }
        props  = cl->properties.kv;
        nprops = cl->properties.n;
        snprintf(name, sizeof(name), "offsets-%s", alias);
        conf = aagw_kafka_conf_new(cl->bootstrap_servers, name, c->err,
                                   sizeof(c->err));
        if (!conf)
                return NULL;
        if (aagw_kafka_conf_apply(
                conf, type == RD_KAFKA_CONSUMER ? "consumer" : "admin", props,
                nprops, c->err, sizeof(c->err)) ||
            (type == RD_KAFKA_CONSUMER &&
             (aagw_kafka_conf_set(conf, "group.id", group, c->err,
                                  sizeof(c->err)) ||
              aagw_kafka_conf_set(conf, "enable.auto.commit", "false", c->err,
                                  sizeof(c->err)) ||
              aagw_kafka_conf_set(conf, "enable.partition.eof", "false", c->err,
                                  sizeof(c->err)) ||
              aagw_kafka_conf_set(conf, "fetch.wait.max.ms", "10", c->err,
                                  sizeof(c->err))))) {
                rd_kafka_conf_destroy(conf);
                return NULL;
        }
        rk = rd_kafka_new(type, conf, c->err, sizeof(c->err));
        if (!rk)
                rd_kafka_conf_destroy(conf);
        return rk;
}

static rd_kafka_t *client(struct ctx *c, bool from, rd_kafka_type_t type,
                          const char *group) {
        return client_at(c, from ? c->o.from : c->o.to, type, group);
}

/* Read 'topic' ['partition'] from 'from' up to (not including) 'to',
 * calling 'fn' per record until it returns false.  Returns the number of
 * records read, -1 if the deadline passed first. */
static int64_t read_range(rd_kafka_t *rk, const char *topic, int32_t partition,
                          int64_t from, int64_t to,
                          bool (*fn)(void *, const rd_kafka_message_t *),
                          void *arg) {
        struct aagw_kafka_range r = {.topic      = topic,
                                     .partition  = partition,
                                     .from       = from,
                                     .to         = to,
                                     .timeout_ms = TIMEOUT_MS,
                                     .fn         = fn,
                                     .arg        = arg};
        int64_t                 n;
        aagw_kafka_range_end_t  end = aagw_kafka_read_range(rk, &r, &n);

        return (end == AAGW_RANGE_TIMEOUT || end == AAGW_RANGE_FAILED) &&
                       n == 0
                   ? -1
                   : n;
}

/* ----------------------------------------------------------- TRANSLATE -- */

static struct row *row_find(struct ctx *c, const char *topic,
                            int32_t partition) {
        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].partition == partition &&
                    !strcmp(c->rows[i].topic, topic))
                        return &c->rows[i];
        return NULL;
}

/* Add sync 's' to the points 'pts' (allocated on first use), 'n' used. */
static void points_add(struct aagw_mm2_point **pts, size_t *n,
                       const rd_kafka_message_t   *m,
                       const struct aagw_mm2_sync *s) {
        rd_kafka_headers_t *h = NULL;
        const void         *v;
        size_t              vs;

        if (!*pts && !(*pts = calloc(MAX_SYNC_POINTS, sizeof(**pts))))
                return;
        bool lossy =
            !rd_kafka_message_headers(m, &h) &&
            !rd_kafka_header_get_last(h, AAGW_MM2_SYNC_LOSSY_HDR, &v, &vs);
        aagw_mm2_points_add(
            *pts, n, MAX_SYNC_POINTS,
            (struct aagw_mm2_point){s->upstream, s->downstream, lossy});
}

static void sync_add(struct row *r, const rd_kafka_message_t *m,
                     const struct aagw_mm2_sync *s) {
        points_add(&r->pts, &r->npts, m, s);
}

static bool on_sync(void *arg, const rd_kafka_message_t *m) {
        struct ctx          *c = arg;
        struct aagw_mm2_sync s;
        struct row          *r;

        if (!aagw_mm2_sync_decode(m->key, m->key_len, m->payload, m->len, &s) ||
            !(r = row_find(c, s.topic, s.partition)) || r->back || r->via)
                return true;
        sync_add(r, m, &s);
        return true;
}

/* The offset-syncs of the flow target->source, for the rows that go back
 * to their origin: keyed by the origin topic. */
static bool on_sync_back(void *arg, const rd_kafka_message_t *m) {
        struct ctx          *c = arg;
        struct aagw_mm2_sync s;

        if (!aagw_mm2_sync_decode(m->key, m->key_len, m->payload, m->len, &s))
                return true;
        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].back && c->rows[i].partition == s.partition &&
                    !strcmp(c->rows[i].remote, s.topic))
                        sync_add(&c->rows[i], m, &s);
        return true;
}

static struct row *row_find_remote(struct ctx *c, const char *remote,
                                   int32_t partition) {
        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].partition == partition && !c->rows[i].back &&
                    !c->rows[i].via && !strcmp(c->rows[i].remote, remote))
                        return &c->rows[i];
        return NULL;
}

/* The group's checkpoints at the target (the newest per partition wins,
 * as RemoteClusterUtils.translateOffsets() reads them). */
static bool on_checkpoint(void *arg, const rd_kafka_message_t *m) {
        struct ctx                *c = arg;
        struct aagw_mm2_checkpoint ck;
        struct row                *r;

        if (aagw_mm2_checkpoint_decode(m->key, m->key_len, m->payload, m->len,
                                       &ck) &&
            !strcmp(ck.group, c->o.group) &&
            (r = row_find_remote(c, ck.topic, ck.partition))) {
                r->ck_up   = ck.upstream;
                r->ck_down = ck.downstream;
        }
        return true;
}

/* A partition another replicator copies (MirrorMaker 2).  Its offset-syncs
 * are written once the copy is acknowledged (a sync (u, d) says record u
 * is at d), so replication reached at least the last sync's upstream + 1:
 * that stands for the replicator's position, as long as the target holds
 * the translated offset (aagw's own boundary syncs, (next, out_next) at a
 * position save, say nothing about record 'next': should a partition of
 * aagw's have no committed position yet, the target's end keeps such a
 * translation from being called exact).  Then, where the group has a
 * checkpoint for its committed offset, that checkpoint is the other
 * replicator's own translation (what MM2's RemoteClusterUtils answers and
 * its sync.group.offsets commits): it is the answer, exact only if the
 * offset-syncs give the same offset.  MM2 translates at most one record
 * past a sync (KAFKA-14666), so a group between two syncs gets an earlier
 * offset from MM2 than from the syncs: its consumers re-read the
 * difference. */
static void translate_foreign(struct row *r, int64_t target_end) {
        struct aagw_mm2_xlate x;

        r->foreign  = true;
        r->repl_pos = r->npts ? r->pts[r->npts - 1].upstream + 1 : -1;
        aagw_mm2_translate(r->pts, r->npts, r->committed, r->repl_pos, &x);
        if (x.exact && x.offset > target_end) {
                x.exact = false;
                x.why   = "the target partition ends before the translated "
                          "offset (replication has not reached it)";
        }
        r->x = x;
        if (r->ck_up != r->committed || r->ck_down < 0)
                return;
        r->by_checkpoint = true;
        r->x.offset      = r->ck_down;
        if (x.exact && x.offset == r->ck_down) {
                r->x.why = "MirrorMaker 2's checkpoint";
                return;
        }
        r->x.exact = false;
        if (x.exact)
                snprintf(r->why, sizeof(r->why),
                         "MirrorMaker 2's checkpoint; the offset-syncs give "
                         "%" PRId64 " (%s %" PRId64 " record%s)",
                         x.offset,
                         x.offset > r->ck_down ? "re-reads" : "skips",
                         x.offset > r->ck_down ? x.offset - r->ck_down
                                               : r->ck_down - x.offset,
                         x.offset - r->ck_down == 1 ||
                                 r->ck_down - x.offset == 1
                             ? ""
                             : "s");
        else
                snprintf(r->why, sizeof(r->why),
                         "MirrorMaker 2's checkpoint; offset-syncs: %s",
                         x.why);
        r->x.why = r->why;
}

/* ------------------------------------------------- SOURCE UNREACHABLE -- */

/* Target-only mode: the source cluster did not answer, so neither the
 * group's committed offsets nor the offset-syncs (at the source by
 * default) can be read.  What the target holds is the group's newest
 * checkpoint per partition in <from>.checkpoints.internal, written by
 * aagw (exact translations only) or MirrorMaker 2 (never past the exact
 * one), same format.  Its downstream offset is where the group resumes:
 * never a gap, but the group may have consumed more at the source after
 * that checkpoint, which it then reads again (at most one checkpoint
 * interval of its consumption, plus MM2's own margin).  So no row is
 * exact, and a checkpoint offset outside the target partition's log
 * (past its end: the target was truncated or recreated; before its
 * start: retention deleted records) is ambiguous and never committed. */

struct ck_scan {
        struct ctx *c;
        size_t      cap;
};

static bool on_checkpoint_any(void *arg, const rd_kafka_message_t *m) {
        struct ck_scan            *k = arg;
        struct ctx                *c = k->c;
        struct aagw_mm2_checkpoint ck;
        struct row                *r;
        const char                *up = NULL;

        if (!aagw_mm2_checkpoint_decode(m->key, m->key_len, m->payload, m->len,
                                        &ck) ||
            strcmp(ck.group, c->o.group))
                return true;
        /* The remote topic of a source topic this flow replicates. */
        if (aagw_repl_topic_source(c->pol, ck.topic)) {
                if (strcmp(aagw_repl_topic_source(c->pol, ck.topic),
                           c->o.from))
                        return true;
                up = aagw_repl_topic_upstream(c->pol, ck.topic);
        } else if (c->set->replication.policy == AAGW_NAMING_IDENTITY)
                up = ck.topic;
        if (!up || !aagw_repl_topic_allowed(c->pol, up))
                return true;
        if (!(r = row_find_remote(c, ck.topic, ck.partition))) {
                if (c->nrows == k->cap) {
                        size_t      nc = k->cap ? 2 * k->cap : 16;
                        struct row *nv = realloc(c->rows, nc * sizeof(*nv));
                        if (!nv)
                                return false;
                        c->rows = nv;
                        k->cap  = nc;
                }
                r = &c->rows[c->nrows++];
                memset(r, 0, sizeof(*r));
                snprintf(r->topic, sizeof(r->topic), "%s", up);
                snprintf(r->remote, sizeof(r->remote), "%s", ck.topic);
                r->partition = ck.partition;
                r->repl_pos = r->src_hi = -1;
        }
        r->committed = r->ck_up = ck.upstream;
        r->ck_down   = ck.downstream;
        return true;
}

static int translate_target_only(struct ctx *c) {
        struct ck_scan k = {c, 0};
        char           topic[AAGW_TOPIC_MAX + 1];
        int64_t        lo, hi;
        rd_kafka_t    *rc;

        c->target_only = true;
        aagw_mm2_checkpoints_topic_sep(aagw_repl_separator(c->pol), c->o.from,
                                       topic, sizeof(topic));
        if (!(rc = client(c, false, RD_KAFKA_CONSUMER, "aagw-offsets-reader")))
                return -1;
        if (rd_kafka_query_watermark_offsets(rc, topic, 0, &lo, &hi,
                                             TIMEOUT_MS) ||
            read_range(rc, topic, 0, lo, hi, on_checkpoint_any, &k) < 0) {
                snprintf(c->err, sizeof(c->err),
                         "%s did not answer (%s) and %s at %s could not be "
                         "read: nothing to translate from",
                         c->o.from, c->source_err, topic, c->o.to);
                rd_kafka_consumer_close(rc);
                rd_kafka_destroy(rc);
                return -1;
        }
        rd_kafka_consumer_close(rc);
        rd_kafka_destroy(rc);
        if (!c->nrows) {
                snprintf(c->err, sizeof(c->err),
                         "%s did not answer (%s), and %s at %s holds no "
                         "checkpoint of group %s for the topics replicated "
                         "from %s: nothing to translate from",
                         c->o.from, c->source_err, topic, c->o.to, c->o.group,
                         c->o.from);
                return -1;
        }
        for (size_t i = 0; i < c->nrows; i++) {
                struct row *r = &c->rows[i];
                r->by_checkpoint = true;
                r->x.offset      = r->ck_down;
                r->x.exact       = false;
                /* what the group consumed after the checkpoint: unknown */
                r->reread = -1;
                r->prev   = -1;
                if (rd_kafka_query_watermark_offsets(c->to_admin, r->remote,
                                                     r->partition, &lo, &hi,
                                                     TIMEOUT_MS)) {
                        r->ambiguous = true;
                        r->x.why     = "the target partition's offsets "
                                       "could not be read";
                } else if (r->ck_down > hi || r->ck_down < lo) {
                        r->ambiguous = true;
                        snprintf(r->why, sizeof(r->why),
                                 "the checkpoint's offset is %s the target "
                                 "partition's log (%" PRId64 "..%" PRId64
                                 "): %s",
                                 r->ck_down > hi ? "past the end of"
                                                 : "before the start of",
                                 lo, hi,
                                 r->ck_down > hi
                                     ? "the target lost records or the topic "
                                       "was recreated"
                                     : "records were deleted there");
                        r->x.why = r->why;
                } else
                        r->x.why = "the newest checkpoint (source "
                                   "unreachable): records the group "
                                   "consumed after it are read again";
        }
        return 0;
}

/* The mode line above the table. */
static void print_mode(const struct ctx *c, FILE *out) {
        if (c->target_only)
                fprintf(out,
                        "mode: target-only: %s did not answer in %d s (%s); "
                        "offsets are group %s's newest checkpoints at %s\n",
                        c->o.from, c->o.source_timeout_s, c->source_err,
                        c->o.group, c->o.to);
        else
                fprintf(out, "mode: source: %s answered; offsets are "
                             "translated from the group's committed offsets "
                             "there\n",
                        c->o.from);
}

static bool any_ambiguous(const struct ctx *c) {
        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].ambiguous)
                        return true;
        return false;
}

/* ---------------------------------------------------- BACK TO ORIGIN -- */

/* If 'topic' at the source is a copy of one of the target's own topics
 * (west.clicks at east when moving to west; one hop, prefix policy), the
 * origin's name at the target ("clicks"), borrowed from 'topic'; else
 * NULL.  Only where the command moves such positions (offsets, failover). */
static const char *back_origin(const struct ctx *c, const char *topic) {
        const char *src, *up;

        if (!c->back_ok || !(src = aagw_repl_topic_source(c->pol, topic)) ||
            strcmp(src, c->o.to) ||
            !(up = aagw_repl_topic_upstream(c->pol, topic)) ||
            aagw_repl_topic_is_remote(c->pol, up) ||
            !aagw_repl_topic_allowed(c->pol, up))
                return NULL;
        return up;
}

/* The rows that go back to their origin at the target: the group's
 * position in the copy at the source, through the offset-syncs of the
 * flow target->source (which made the copy), onto the origin partition.
 * Those syncs are where that flow keeps them: at the target (its source)
 * by default, named after the source cluster; at the source with
 * mm2.offset_syncs_location target.  Its own position (group
 * aagw.<id>.<target>-<source> at the target) says how far past the last
 * sync the copies are known to reach. */
static int translate_back(struct ctx *c, bool at_target) {
        char        rgroup[512], stopic[AAGW_TOPIC_MAX + 1], e[512];
        size_t      nback = 0;
        int64_t     lo = 0, hi = 0;
        rd_kafka_t *rd;

        for (size_t i = 0; i < c->nrows; i++)
                nback += c->rows[i].back;
        if (!nback)
                return 0;
        rd_kafka_topic_partition_list_t *pos =
            rd_kafka_topic_partition_list_new((int)nback);
        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].back)
                        rd_kafka_topic_partition_list_add(
                            pos, c->rows[i].remote, c->rows[i].partition);
        snprintf(rgroup, sizeof(rgroup), "aagw.%s.%s-%s", c->set->gateway.id,
                 c->o.to, c->o.from);
        if (!aagw_kafka_group_offsets(c->to_admin, rgroup, pos, TIMEOUT_MS, e,
                                      sizeof(e)))
                for (size_t i = 0, k = 0; i < c->nrows; i++)
                        if (c->rows[i].back)
                                c->rows[i].repl_pos = pos->elems[k++].offset;
        rd_kafka_topic_partition_list_destroy(pos);

        aagw_mm2_offset_syncs_topic_sep(aagw_repl_separator(c->pol),
                                        at_target ? c->o.to : c->o.from, stopic,
                                        sizeof(stopic));
        if (!(rd = client(c, at_target, RD_KAFKA_CONSUMER,
                          "aagw-offsets-reader")))
                return -1;
        if (!rd_kafka_query_watermark_offsets(rd, stopic, 0, &lo, &hi,
                                              TIMEOUT_MS) &&
            read_range(rd, stopic, 0, lo, hi, on_sync_back, c) < 0) {
                snprintf(c->err, sizeof(c->err),
                         "reading %s at %s: no records before the deadline",
                         stopic, at_target ? c->o.from : c->o.to);
                rd_kafka_consumer_close(rd);
                rd_kafka_destroy(rd);
                return -1;
        }
        rd_kafka_consumer_close(rd);
        rd_kafka_destroy(rd);
        for (size_t i = 0; i < c->nrows; i++) {
                struct row *r = &c->rows[i];
                if (!r->back)
                        continue;
                aagw_mm2_translate_back(r->pts, r->npts, r->committed,
                                        r->repl_pos, &r->x, &r->reread);
                if (r->x.exact) {
                        snprintf(r->why, sizeof(r->why),
                                 "back to the origin (offset-syncs of "
                                 "%s->%s)",
                                 c->o.to, c->o.from);
                        r->x.why = r->why;
                } else if (r->reread > 0) {
                        snprintf(r->why, sizeof(r->why),
                                 "back to the origin: %s", r->x.why);
                        r->x.why = r->why;
                }
        }
        return 0;
}

/* ------------------------------------------------------- VIA ORIGIN -- */

/* If 'topic' at the source is a copy of a third site's own topic
 * (north.clicks at east when moving to west; one hop, prefix policy), the
 * origin's name there ("clicks", borrowed from 'topic'), and that site in
 * '*site' (borrowed from the policy) unless 'site' is NULL; else NULL.
 * Only sites configured as clusters are recognized (the policy knows no
 * other), and only where the command moves such positions. */
static const char *via_origin(const struct ctx *c, const char *topic,
                              const char **site) {
        const char *src, *up;

        if (!c->back_ok || !(src = aagw_repl_topic_source(c->pol, topic)) ||
            !strcmp(src, c->o.to) || !strcmp(src, c->o.from) ||
            !(up = aagw_repl_topic_upstream(c->pol, topic)) ||
            aagw_repl_topic_is_remote(c->pol, up) ||
            !aagw_repl_topic_allowed(c->pol, up))
                return NULL;
        if (site)
                *site = src;
        return up;
}

struct via_scan {
        struct ctx *c;
        const char *site;
        bool        second; /* the flow site->target, else site->source */
};

/* The offset-syncs of a flow from a third site, keyed by its own topic
 * names (the rows' 'origin'). */
static bool on_sync_via(void *arg, const rd_kafka_message_t *m) {
        struct via_scan     *v = arg;
        struct aagw_mm2_sync s;

        if (!aagw_mm2_sync_decode(m->key, m->key_len, m->payload, m->len, &s))
                return true;
        for (size_t i = 0; i < v->c->nrows; i++) {
                struct row *r = &v->c->rows[i];
                if (r->via && !strcmp(r->via, v->site) &&
                    r->partition == s.partition && !strcmp(r->origin, s.topic))
                        points_add(v->second ? &r->pts2 : &r->pts,
                                   v->second ? &r->npts2 : &r->npts, m, &s);
        }
        return true;
}

/* Read the offset-syncs of the flow 'site'->'dst' into the rows of
 * 'site' (leg 'second').  They are where that flow writes them: at
 * 'site' (its source) named after 'dst' by default, at 'dst' named after
 * 'site' with mm2.offset_syncs_location target.  Returns 0, or -1 with
 * the reason in 'why'. */
static int via_syncs(struct ctx *c, const char *site, const char *dst,
                     bool second, bool at_target, char *why, size_t size) {
        char                topic[AAGW_TOPIC_MAX + 1];
        const char         *at = at_target ? dst : site;
        struct via_scan     v  = {c, site, second};
        int64_t             lo, hi;
        rd_kafka_resp_err_t err;
        rd_kafka_t         *rd;

        aagw_mm2_offset_syncs_topic_sep(aagw_repl_separator(c->pol),
                                        at_target ? site : dst, topic,
                                        sizeof(topic));
        if (!(rd =
                  client_at(c, at, RD_KAFKA_CONSUMER, "aagw-offsets-reader"))) {
                snprintf(why, size, "%.400s", c->err);
                return -1;
        }
        err = rd_kafka_query_watermark_offsets(rd, topic, 0, &lo, &hi,
                                               TIMEOUT_MS);
        if (err)
                snprintf(why, size, "%s at %s: %s", topic, at,
                         rd_kafka_err2str(err));
        else if (read_range(rd, topic, 0, lo, hi, on_sync_via, &v) < 0)
                snprintf(why, size,
                         "reading %s at %s: no records before the deadline",
                         topic, at);
        rd_kafka_consumer_close(rd);
        rd_kafka_destroy(rd);
        return err || why[0] ? -1 : 0;
}

/* The positions of aagw's flows 'site'->'dst' in the origin topics of the
 * rows of 'site' (group aagw.<id>.<site>-<dst> at 'site'): into repl_pos
 * (dst the source) or repl_pos2 (dst the target).  Left at -1 if they
 * cannot be read: past the last sync nothing is then exact. */
static void via_positions(struct ctx *c, rd_kafka_t *adm, const char *site,
                          const char *dst, bool second) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)c->nrows);
        char rgroup[512], e[512];

        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].via && !strcmp(c->rows[i].via, site))
                        rd_kafka_topic_partition_list_add(l, c->rows[i].origin,
                                                          c->rows[i].partition);
        snprintf(rgroup, sizeof(rgroup), "aagw.%s.%s-%s", c->set->gateway.id,
                 site, dst);
        if (!aagw_kafka_group_offsets(adm, rgroup, l, TIMEOUT_MS, e, sizeof(e)))
                for (size_t i = 0, k = 0; i < c->nrows; i++)
                        if (c->rows[i].via && !strcmp(c->rows[i].via, site))
                                *(second ? &c->rows[i].repl_pos2
                                         : &c->rows[i].repl_pos) =
                                    l->elems[k++].offset;
        rd_kafka_topic_partition_list_destroy(l);
}

/* The rows of one third site 'site': is it there (within
 * --source-timeout, as the source), the two flows' positions and
 * offset-syncs, then the composition (policy/mm2_format.c).  A site that does
 * not answer leaves its rows without a translation when the syncs live
 * there (the default), or not exact past the last sync (their flows'
 * positions unknown) when they live at the source and the target. */
static void via_site(struct ctx *c, const char *site, bool at_target) {
        const struct rd_kafka_metadata *md        = NULL;
        char                            down[512] = "", legs[2][512] = {"", ""};
        rd_kafka_t *adm = client_at(c, site, RD_KAFKA_PRODUCER, NULL);

        if (!adm)
                snprintf(down, sizeof(down), "%.400s", c->err);
        else {
                rd_kafka_resp_err_t err = rd_kafka_metadata(
                    adm, 0, NULL, &md, c->o.source_timeout_s * 1000);
                if (err)
                        snprintf(down, sizeof(down),
                                 "%s did not answer in %d s (%s)", site,
                                 c->o.source_timeout_s, rd_kafka_err2str(err));
                else {
                        rd_kafka_metadata_destroy(md);
                        via_positions(c, adm, site, c->o.from, false);
                        via_positions(c, adm, site, c->o.to, true);
                }
                rd_kafka_destroy(adm);
        }
        if (down[0] && !at_target)
                snprintf(legs[0], sizeof(legs[0]),
                         "%s; the offset-syncs of %s->%s and %s->%s are "
                         "kept there",
                         down, site, c->o.from, site, c->o.to);
        else {
                via_syncs(c, site, c->o.from, false, at_target, legs[0],
                          sizeof(legs[0]));
                via_syncs(c, site, c->o.to, true, at_target, legs[1],
                          sizeof(legs[1]));
        }
        for (size_t i = 0; i < c->nrows; i++) {
                struct row         *r = &c->rows[i];
                struct aagw_mm2_via v;
                if (!r->via || strcmp(r->via, site))
                        continue;
                if (legs[0][0] || legs[1][0]) {
                        r->x = (struct aagw_mm2_xlate){-1, false, ""};
                        snprintf(r->why, sizeof(r->why),
                                 "via the origin %s: %s", site,
                                 legs[0][0] ? legs[0] : legs[1]);
                        r->x.why = r->why;
                        continue;
                }
                aagw_mm2_translate_via(r->pts, r->npts, r->repl_pos, r->pts2,
                                       r->npts2, r->repl_pos2, r->committed,
                                       &r->x, &v);
                r->origin_off = v.origin;
                r->reread     = v.reread;
                if (r->x.exact)
                        snprintf(r->why, sizeof(r->why),
                                 "via the origin (%s %s %" PRId64
                                 ", offset-syncs of %s->%s and %s->%s)",
                                 site, r->origin, v.origin, site, c->o.from,
                                 site, c->o.to);
                else
                        snprintf(r->why, sizeof(r->why),
                                 "via the origin %s: %s->%s: %s%s%s", site,
                                 site, v.back.exact ? c->o.to : c->o.from,
                                 r->x.why, down[0] ? "; " : "", down);
                r->x.why = r->why;
        }
}

/* A forward row without offset-syncs whose name starts like a copy
 * ("north.clicks") from a site the command was not given: the policy
 * knows only the configured clusters as sites, so it took the topic for
 * one of the source's own.  Say what would move it via its origin. */
static void unknown_site_note(const struct ctx *c, struct row *r) {
        const char *sep = aagw_repl_separator(c->pol), *at;
        char        alias[AAGW_TOPIC_MAX + 1];

        if (r->npts || r->by_checkpoint || !sep || !*sep ||
            c->set->replication.policy == AAGW_NAMING_IDENTITY ||
            !(at = strstr(r->topic, sep)) || at == r->topic)
                return;
        snprintf(alias, sizeof(alias), "%.*s", (int)(at - r->topic), r->topic);
        if (aagw_settings_cluster(c->set, alias))
                return;
        snprintf(r->why, sizeof(r->why),
                 "%s; if %.*s is a site (and this its copy of %s), give the "
                 "command that cluster too (--cluster %.*s=HOST:PORT) to "
                 "move it via its origin",
                 r->x.why, (int)(at - r->topic), r->topic, at + strlen(sep),
                 (int)(at - r->topic), r->topic);
        r->x.why = r->why;
}

/* Every third site the group's topics at the source come from. */
static int translate_via(struct ctx *c, bool at_target) {
        for (size_t i = 0; i < c->nrows; i++) {
                bool first = c->rows[i].via != NULL;
                for (size_t k = 0; first && k < i; k++)
                        first = !c->rows[k].via ||
                                strcmp(c->rows[k].via, c->rows[i].via);
                if (first)
                        via_site(c, c->rows[i].via, at_target);
        }
        return 0;
}

/* The group's partitions at the source, their committed offsets and the
 * gateway's positions; then the offset-syncs, the group's checkpoints,
 * and the translation.  A source that does not answer within
 * --source-timeout switches offsets/failover to target-only mode. */
static int translate(struct ctx *c) {
        const struct rd_kafka_metadata  *md = NULL;
        rd_kafka_topic_partition_list_t *l, *pos;
        rd_kafka_resp_err_t              err;
        char rgroup[512], stopic[AAGW_TOPIC_MAX + 1];
        bool                             at_target =
            c->set->mm2.offset_syncs_location == GW_SYNCS_AT_TARGET;

        err = rd_kafka_metadata(c->from_admin, 1, NULL, &md,
                                c->target_only_ok
                                    ? c->o.source_timeout_s * 1000
                                    : TIMEOUT_MS);
        if (err && c->target_only_ok) {
                snprintf(c->source_err, sizeof(c->source_err), "%s",
                         rd_kafka_err2str(err));
                return translate_target_only(c);
        }
        if (err) {
                snprintf(c->err, sizeof(c->err), "metadata of %s: %s",
                         c->o.from, rd_kafka_err2str(err));
                return -1;
        }
        l = rd_kafka_topic_partition_list_new(16);
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *t = &md->topics[i];
                if (t->err ||
                    (!back_origin(c, t->topic) &&
                     !via_origin(c, t->topic, NULL) &&
                     (!aagw_repl_topic_allowed(c->pol, t->topic) ||
                      aagw_repl_topic_check(c->pol, c->o.from, c->o.to,
                                            t->topic) != AAGW_SKIP_NONE)))
                        continue;
                for (int p = 0; p < t->partition_cnt; p++)
                        rd_kafka_topic_partition_list_add(l, t->topic, p);
        }
        rd_kafka_metadata_destroy(md);
        pos = rd_kafka_topic_partition_list_copy(l);
        snprintf(rgroup, sizeof(rgroup), "aagw.%s.%s-%s", c->set->gateway.id,
                 c->o.from, c->o.to);
        if (!l->cnt ||
            aagw_kafka_group_offsets(c->from_admin, c->o.group, l, TIMEOUT_MS,
                                     c->err, sizeof(c->err)) ||
            aagw_kafka_group_offsets(c->from_admin, rgroup, pos, TIMEOUT_MS,
                                     c->err, sizeof(c->err))) {
                if (!l->cnt)
                        snprintf(c->err, sizeof(c->err),
                                 "%s has no topics replicated to %s", c->o.from,
                                 c->o.to);
                rd_kafka_topic_partition_list_destroy(l);
                rd_kafka_topic_partition_list_destroy(pos);
                return -1;
        }
        c->rows = calloc((size_t)l->cnt, sizeof(*c->rows));
        for (int i = 0; c->rows && i < l->cnt; i++) {
                struct row *r;
                int64_t     lo, hi;
                if (l->elems[i].offset < 0)
                        continue;
                r = &c->rows[c->nrows++];
                snprintf(r->topic, sizeof(r->topic), "%s", l->elems[i].topic);
                r->partition = l->elems[i].partition;
                r->committed = l->elems[i].offset;
                r->repl_pos  = pos->elems[i].offset;
                r->src_hi    = -1;
                r->ck_up = r->ck_down = -1;
                r->reread             = -1;
                r->prev               = -1;
                if (!rd_kafka_query_watermark_offsets(c->from_admin, r->topic,
                                                      r->partition, &lo, &hi,
                                                      TIMEOUT_MS))
                        r->src_hi = hi;
                r->repl_pos2 = r->origin_off = -1;
                const char *via, *up;
                if (back_origin(c, r->topic)) {
                        r->back     = true;
                        r->repl_pos = -1;
                        snprintf(r->remote, sizeof(r->remote), "%s",
                                 back_origin(c, r->topic));
                } else if ((up = via_origin(c, r->topic, &via))) {
                        /* positions of the flows from 'via', read there */
                        r->via      = via;
                        r->repl_pos = -1;
                        snprintf(r->origin, sizeof(r->origin), "%s", up);
                        aagw_repl_remote_topic(c->pol, via, up, r->remote,
                                               sizeof(r->remote));
                } else
                        aagw_repl_remote_topic(c->pol, c->o.from, r->topic,
                                               r->remote, sizeof(r->remote));
        }
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_topic_partition_list_destroy(pos);
        if (!c->nrows) {
                snprintf(c->err, sizeof(c->err),
                         "group %s has no committed offsets at %s for the "
                         "topics replicated to %s",
                         c->o.group, c->o.from, c->o.to);
                return -1;
        }

        /* The offset-syncs: partition 0 of the topic, start to end. */
        aagw_mm2_offset_syncs_topic_sep(aagw_repl_separator(c->pol),
                                        at_target ? c->o.from : c->o.to, stopic,
                                        sizeof(stopic));
        rd_kafka_t *rd =
            client(c, !at_target, RD_KAFKA_CONSUMER, "aagw-offsets-reader");
        int64_t lo = 0, hi = 0;
        if (!rd)
                return -1;
        if (!rd_kafka_query_watermark_offsets(rd, stopic, 0, &lo, &hi,
                                              TIMEOUT_MS) &&
            read_range(rd, stopic, 0, lo, hi, on_sync, c) < 0) {
                snprintf(c->err, sizeof(c->err),
                         "reading %s at %s: no records before the deadline",
                         stopic, at_target ? c->o.to : c->o.from);
                rd_kafka_destroy(rd);
                return -1;
        }
        /* The group's checkpoints: <from><sep>checkpoints<sep>internal at
         * the target, read only for partitions another replicator copies
         * (aagw's own checkpoints repeat its translation). */
        bool any_foreign = false;
        for (size_t i = 0; i < c->nrows; i++)
                any_foreign |= c->rows[i].repl_pos < 0 && !c->rows[i].back &&
                               !c->rows[i].via;
        if (any_foreign) {
                rd_kafka_t *rc = client(c, false, RD_KAFKA_CONSUMER,
                                        "aagw-offsets-reader");
                aagw_mm2_checkpoints_topic_sep(aagw_repl_separator(c->pol),
                                               c->o.from, stopic,
                                               sizeof(stopic));
                if (rc && !rd_kafka_query_watermark_offsets(
                              rc, stopic, 0, &lo, &hi, TIMEOUT_MS))
                        read_range(rc, stopic, 0, lo, hi, on_checkpoint, c);
                if (rc) {
                        rd_kafka_consumer_close(rc);
                        rd_kafka_destroy(rc);
                }
        }
        rd_kafka_consumer_close(rd);
        rd_kafka_destroy(rd);
        for (size_t i = 0; i < c->nrows; i++) {
                struct row *r = &c->rows[i];
                int64_t tlo, thi = -1;
                if (r->back || r->via)
                        continue;
                if (r->repl_pos < 0) {
                        if (rd_kafka_query_watermark_offsets(
                                c->to_admin, r->remote, r->partition, &tlo,
                                &thi, TIMEOUT_MS))
                                thi = -1;
                        translate_foreign(r, thi);
                }
                else
                        aagw_mm2_translate(r->pts, r->npts, r->committed,
                                           r->repl_pos, &r->x);
                /* By a checkpoint that is behind the syncs' answer, the
                 * group reads the difference again. */
                r->reread = r->x.exact ? 0 : -1;
                if (r->by_checkpoint && r->x.offset >= 0) {
                        struct aagw_mm2_xlate x;
                        aagw_mm2_translate(r->pts, r->npts, r->committed,
                                           r->repl_pos, &x);
                        if (x.exact)
                                r->reread = x.offset > r->x.offset
                                                ? x.offset - r->x.offset
                                                : 0;
                }
                unknown_site_note(c, r);
        }
        return translate_back(c, at_target) ? -1 : translate_via(c, at_target);
}

static bool all_exact(const struct ctx *c) {
        for (size_t i = 0; i < c->nrows; i++)
                if (!c->rows[i].x.exact)
                        return false;
        return true;
}

/* REREAD: records a consumer resuming at the translation may read a
 * second time ("?" when nothing bounds it). */
static void print_rows(const struct ctx *c, FILE *out) {
        fprintf(out, "%-24s %4s %12s  %-24s %12s %5s %6s  %s\n", "TOPIC",
                "PART", "COMMITTED", "TARGET TOPIC", "TRANSLATED", "EXACT",
                "REREAD", "NOTE");
        for (size_t i = 0; i < c->nrows; i++) {
                const struct row *r = &c->rows[i];
                char              rr[24] = "?";
                if (r->reread >= 0)
                        snprintf(rr, sizeof(rr), "%" PRId64, r->reread);
                fprintf(out,
                        "%-24s %4d %12" PRId64 "  %-24s %12" PRId64
                        " %5s %6s  %s\n",
                        r->topic, (int)r->partition, r->committed, r->remote,
                        r->x.offset, r->x.exact ? "yes" : "no", rr, r->x.why);
        }
}

/* JSON string; our names are [A-Za-z0-9._-] but the group is user text. */
static void json_str(FILE *out, const char *s) {
        fputc('"', out);
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                if (ch == '"' || ch == '\\')
                        fprintf(out, "\\%c", ch);
                else if (ch < 0x20)
                        fprintf(out, "\\u%04x", ch);
                else
                        fputc(ch, out);
        }
        fputc('"', out);
}

static void json_rows(const struct ctx *c, FILE *out) {
        fprintf(out, "\"partitions\":[");
        for (size_t i = 0; i < c->nrows; i++) {
                const struct row *r = &c->rows[i];
                fprintf(out, "%s{\"topic\":", i ? "," : "");
                json_str(out, r->topic);
                fprintf(out,
                        ",\"partition\":%d,\"committed\":%" PRId64
                        ",\"target_topic\":",
                        (int)r->partition, r->committed);
                json_str(out, r->remote);
                fprintf(out,
                        ",\"translated\":%" PRId64 ",\"exact\":%s,"
                        "\"replicated_to\":%" PRId64
                        ",\"translated_by\":\"%s\",\"checkpoint\":%" PRId64
                        ",\"note\":",
                        r->x.offset, r->x.exact ? "true" : "false",
                        r->repl_pos,
                        r->by_checkpoint ? "checkpoint" : "offset-syncs",
                        r->ck_up == r->committed ? r->ck_down : -1);
                json_str(out, r->x.why);
                fprintf(out, ",\"direction\":\"%s\",\"reread\":%" PRId64,
                        r->back  ? "to-origin"
                        : r->via ? "via-origin"
                                 : "forward",
                        r->reread);
                if (r->via) {
                        fprintf(out, ",\"origin_cluster\":");
                        json_str(out, r->via);
                        fprintf(out, ",\"origin_topic\":");
                        json_str(out, r->origin);
                        /* replicated_to is the flow via->source's */
                        fprintf(out,
                                ",\"origin_offset\":%" PRId64
                                ",\"replicated_to_target\":%" PRId64,
                                r->origin_off, r->repl_pos2);
                }
                if (r->action) {
                        fprintf(out,
                                ",\"target_before\":%" PRId64
                                ",\"action\":\"%s\"",
                                r->prev, r->action);
                }
                fputc('}', out);
        }
        fputc(']', out);
}

/* ------------------------------------------------------------- COMMAND -- */

static void usage_offsets(FILE *out) {
        fprintf(out,
                "Usage: aagw offsets translate --group G --from SRC --to DST "
                "[--json] [CLUSTER OPTIONS]\n"
                "\n"
                "Translate consumer group G's committed offsets at SRC into "
                "offsets at DST,\n"
                "per partition, from the offset-syncs aagw writes. EXACT "
                "says whether a\n"
                "consumer resuming there provably reads no record twice and "
                "misses none;\n"
                "REREAD how many records it may read twice (0 when exact, "
                "? unknown).\n"
                "Copies of DST's topics at SRC (west.clicks at east, DST "
                "west) go back onto\n"
                "their origin at DST (clicks), by the offset-syncs of "
                "DST->SRC. Copies of a\n"
                "third site's topics (north.clicks) go onto DST's copies "
                "via their origin:\n"
                "back by the offset-syncs of north->SRC, forward by those "
                "of north->DST\n"
                "(north must be configured, and answer within "
                "--source-timeout).\n"
                "Cluster options are those of `aagw run` (-c FILE, --cluster "
                "ALIAS=HOST:PORT,\n"
                "--set KEY=VALUE, --policy ...).\n"
                "  --source-timeout S  if SRC does not answer in S seconds "
                "(default 5),\n"
                "                      translate from G's checkpoints at DST "
                "alone\n"
                "                      (target-only mode; never exact)\n"
                "Exit status: 0 all exact, 1 a partition is not exact or a "
                "cluster failed,\n"
                "2 usage.\n");
}

static void usage_failover(FILE *out) {
        fprintf(out,
                "Usage: aagw failover --group G --to DST [--from SRC] "
                "[--dry-run] [--force] [--json]\n"
                "                     [CLUSTER OPTIONS]\n"
                "\n"
                "Translate group G's offsets from SRC (default: the only "
                "other cluster) and\n"
                "commit them for G at DST, so its consumers restarted at DST "
                "continue where\n"
                "they stopped. SRC's own topics go onto their copies at DST "
                "(clicks ->\n"
                "east.clicks); copies of DST's topics at SRC go back onto "
                "their origin at DST\n"
                "(west.clicks at east -> clicks at west) through the "
                "offset-syncs of DST->SRC;\n"
                "copies of a third site's topics onto DST's copies via "
                "their origin\n"
                "(north.clicks at east -> north.clicks at west, through "
                "north's clicks):\n"
                "the active-active move, and the failback after a failover "
                "(--from west\n"
                "--to east after east -> west). REREAD: records G may read "
                "twice (0 when\n"
                "exact). Refused while G has active members at DST; "
                "where the cluster\n"
                "cannot tell (DescribeConsumerGroups unsupported or hanging, "
                "as on the embedded\n"
                "clusters), --force is required once the consumers are "
                "stopped. Partitions\n"
                "whose translation is not exact are refused unless --force.\n"
                "If SRC does not answer in --source-timeout S seconds "
                "(default 5), the\n"
                "offsets are G's newest checkpoints at DST (target-only mode: "
                "no record\n"
                "skipped, those consumed after the checkpoint read again; "
                "needs --force);\n"
                "a checkpoint outside its target partition's log is never "
                "committed.\n"
                "  --dry-run   print what would be committed, commit nothing\n"
                "  --json      one JSON object: result, reason, mode, "
                "committed, reread and\n"
                "              the partitions, each with its direction "
                "(forward, to-origin,\n"
                "              via-origin), reread, target_before and "
                "action\n"
                "Exit status: 0 committed (or dry run), 1 refused or failed, "
                "2 usage.\n");
}

static void usage_drill(FILE *out) {
        fprintf(out,
                "Usage: aagw drill --group G --from SRC --to DST [--json] "
                "[--deadline S]\n"
                "                  [--max-heartbeat-age S] [--force] "
                "[CLUSTER OPTIONS]\n"
                "\n"
                "The failover drill as one command: check SRC->DST "
                "heartbeats, wait until\n"
                "replication lag of G's partitions is zero (--deadline, "
                "default 60 s),\n"
                "translate, commit at DST, verify that a consumer resuming "
                "there reads\n"
                "exactly the records after G's position at SRC (by "
                "provenance origin\n"
                "offsets), and report RPO and RTO. --force as for failover.\n"
                "RPO: rpo_records, the replication lag of G's partitions at "
                "cut-over (0 when\n"
                "the drill passes; lag_records_at_start: when it began), "
                "rpo_ms in time. RTO:\n"
                "rto_s, from the translation to the verified resume; "
                "drill_s: the whole run.\n"
                "Copies of DST's topics at SRC are not part of the drill "
                "(use failover).\n"
                "Exit status: 0 verified, 1 failed (the report says why), 2 "
                "usage.\n");
}

/* Common start: options, config, policy, clients. */
static int setup(struct ctx *c, int argc, char **argv, void (*usage)(FILE *),
                 bool need_from) {
        struct gw_run_opts                  ro;
        const struct aagw_cluster_settings *from, *to;
        int                                 rc;

        memset(c, 0, sizeof(*c));
        c->o.deadline_s       = 60;
        c->o.max_hb_age_s     = 10;
        c->o.source_timeout_s = 5;
        if (argc >= 2 &&
            (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
                usage(stdout);
                return GW_HELP_SHOWN;
        }
        if (take_opts(&argc, argv, &c->o)) {
                usage(stderr);
                return EXIT_USAGE;
        }
        rc = gw_config_from_args(argc, argv, 0, usage, &c->cfg, &ro);
        if (rc != EXIT_OK)
                return rc;
        c->set = aagw_config_settings(c->cfg);
        /* Commands print their results: library chatter only from warn
         * up, unless asked for less. */
        aagw_log_level_t lvl = c->set->gateway.log_level;
        gw_log_init(lvl > AAGW_LOG_WARN ? lvl : AAGW_LOG_WARN);
        if (!c->o.from && !need_from && c->set->nclusters == 2 && c->o.to) {
                for (size_t i = 0; i < 2; i++)
                        if (strcmp(c->set->clusters[i].alias, c->o.to))
                                c->o.from = c->set->clusters[i].alias;
        }
        if (!c->o.group || !c->o.from || !c->o.to) {
                gw_errorf("--group, --from and --to are required%s",
                          need_from ? ""
                                    : " (--from may be left out with "
                                      "exactly two clusters)");
                usage(stderr);
                return EXIT_USAGE;
        }
        if (!strcmp(c->o.from, c->o.to)) {
                gw_errorf("--from and --to name the same cluster");
                return EXIT_USAGE;
        }
        from       = aagw_settings_cluster(c->set, c->o.from);
        to         = aagw_settings_cluster(c->set, c->o.to);
        c->from_bs = from ? from->bootstrap_servers : NULL;
        c->to_bs   = to ? to->bootstrap_servers : NULL;
        if (!c->from_bs || !c->to_bs) {
                gw_errorf("no cluster %s configured (--cluster %s=HOST:PORT)",
                          c->from_bs ? c->o.to : c->o.from,
                          c->from_bs ? c->o.to : c->o.from);
                return EXIT_USAGE;
        }
        c->from_props  = from->properties.kv;
        c->from_nprops = from->properties.n;
        c->to_props    = to->properties.kv;
        c->to_nprops   = to->properties.n;
        if (!(c->pol = gw_policy_new_flow(c->cfg, c->o.from, c->o.to, c->err,
                                          sizeof(c->err)))) {
                gw_errorf("replication policy: %s", c->err);
                return EXIT_USAGE;
        }
        c->from_admin = client(c, true, RD_KAFKA_PRODUCER, NULL);
        c->to_admin =
            c->from_admin ? client(c, false, RD_KAFKA_PRODUCER, NULL) : NULL;
        if (!c->to_admin) {
                gw_errorf("%s", c->err);
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}

static void teardown(struct ctx *c) {
        for (size_t i = 0; i < c->nrows; i++) {
                free(c->rows[i].pts);
                free(c->rows[i].pts2);
        }
        free(c->rows);
        if (c->from_admin)
                rd_kafka_destroy(c->from_admin);
        if (c->to_admin)
                rd_kafka_destroy(c->to_admin);
        aagw_repl_policy_destroy(c->pol);
        aagw_config_destroy(c->cfg);
}

int gw_cmd_offsets(int argc, char **argv) {
        struct ctx c;
        int        rc;

        /* `aagw offsets probe-group(s) ...`: the child side of the group
         * probes (replicator/offsets.c); not for users. */
        if (argc >= 2 && (!strcmp(argv[1], "probe-group") ||
                          !strcmp(argv[1], "probe-groups")))
                return aagw_kafka_probe_main(argc, argv);
        if (argc < 2 || strcmp(argv[1], "translate")) {
                if (argc >= 2 &&
                    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
                        usage_offsets(stdout);
                        return EXIT_OK;
                }
                gw_errorf("offsets: %s", argc < 2 ? "a subcommand is required "
                                                    "(translate)"
                                                  : "unknown subcommand");
                usage_offsets(stderr);
                return EXIT_USAGE;
        }
        rc = setup(&c, argc - 1, argv + 1, usage_offsets, true);
        c.target_only_ok = true;
        c.back_ok        = true;
        if (rc == GW_HELP_SHOWN) {
                teardown(&c);
                return EXIT_OK;
        }
        if (rc != EXIT_OK) {
                teardown(&c);
                return rc;
        }
        if (translate(&c)) {
                gw_errorf("offsets translate: %s", c.err);
                teardown(&c);
                return EXIT_RUNTIME;
        }
        if (c.o.json) {
                printf("{\"group\":");
                json_str(stdout, c.o.group);
                printf(",\"from\":\"%s\",\"to\":\"%s\",\"exact\":%s,", c.o.from,
                       c.o.to, all_exact(&c) ? "true" : "false");
                printf("\"mode\":\"%s\",\"source_error\":",
                       c.target_only ? "target-only" : "source");
                json_str(stdout, c.source_err);
                fputc(',', stdout);
                json_rows(&c, stdout);
                printf("}\n");
        } else {
                print_mode(&c, stdout);
                print_rows(&c, stdout);
        }
        rc = all_exact(&c) ? EXIT_OK : EXIT_RUNTIME;
        teardown(&c);
        return rc;
}

/* Active members of the group at the target: 0 to go ahead, else refuse
 * (with the reason printed).  --force only overrides "cannot tell". */
static int check_members(struct ctx *c, bool quiet) {
        int        members = -1;
        char       why[512];
        aagw_err_t rc = aagw_kafka_group_members(
            "/proc/self/exe", c->to_bs, c->to_props, c->to_nprops, c->o.group,
            5000, &members, why, sizeof(why));

        if (rc == AAGW_OK && members > 0) {
                snprintf(c->err, sizeof(c->err),
                         "group %s has %d active member%s at %s: stop its "
                         "consumers there first (--force does not override "
                         "this)",
                         c->o.group, members, members == 1 ? "" : "s", c->o.to);
                return -1;
        }
        if (rc == AAGW_OK)
                return 0;
        c->members_unknown = true;
        if (!c->o.force) {
                snprintf(c->err, sizeof(c->err),
                         "cannot tell whether group %s has active members at "
                         "%s (%s); make sure its consumers there are stopped "
                         "and re-run with --force",
                         c->o.group, c->o.to, why);
                return -1;
        }
        if (!quiet)
                fprintf(
                    stderr,
                    "aagw: warning: cannot tell whether group %s has active "
                    "members at %s (%s); going ahead because of --force\n",
                    c->o.group, c->o.to, why);
        return 0;
}

/* Commit the translations for the group at the target. */
static int commit_target(struct ctx *c) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)c->nrows);
        int rc;

        for (size_t i = 0; i < c->nrows; i++)
                if (c->rows[i].x.offset >= 0)
                        rd_kafka_topic_partition_list_add(l, c->rows[i].remote,
                                                          c->rows[i].partition)
                            ->offset = c->rows[i].x.offset;
        rc = aagw_kafka_group_commit(c->to_admin, c->o.group, l, TIMEOUT_MS,
                                     c->err, sizeof(c->err))
                 ? -1
                 : 0;
        rd_kafka_topic_partition_list_destroy(l);
        return rc;
}

/* The group's offsets at the target now: into rows[].prev before the
 * commit ('before'), into rows[].target_before after it. */
static void target_offsets(struct ctx *c, bool before) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)c->nrows);
        char e[512];

        for (size_t i = 0; i < c->nrows; i++) {
                rd_kafka_topic_partition_list_add(l, c->rows[i].remote,
                                                  c->rows[i].partition);
                *(before ? &c->rows[i].prev : &c->rows[i].target_before) = -1;
        }
        if (!aagw_kafka_group_offsets(c->to_admin, c->o.group, l, TIMEOUT_MS, e,
                                      sizeof(e)))
                for (int i = 0; i < l->cnt && (size_t)i < c->nrows; i++)
                        *(before ? &c->rows[i].prev
                                 : &c->rows[i].target_before) =
                            l->elems[i].offset < 0 ? -1 : l->elems[i].offset;
        rd_kafka_topic_partition_list_destroy(l);
}

/* failover --json: the outcome, the mode, the records the group may read
 * twice over all partitions (-1 if a row cannot bound it) and the rows,
 * each with what was done with it. */
static void print_failover_json(const struct ctx *c, const char *result,
                                const char *reason, bool committed) {
        int64_t reread = 0;

        for (size_t i = 0; i < c->nrows; i++)
                reread = reread < 0 || c->rows[i].reread < 0
                             ? -1
                             : reread + c->rows[i].reread;
        printf("{\"result\":\"%s\",\"reason\":", result);
        json_str(stdout, reason);
        printf(",\"group\":");
        json_str(stdout, c->o.group);
        printf(",\"from\":\"%s\",\"to\":\"%s\",\"mode\":\"%s\","
               "\"dry_run\":%s,\"committed\":%s,\"exact\":%s,"
               "\"reread\":%" PRId64 ",",
               c->o.from, c->o.to, c->target_only ? "target-only" : "source",
               c->o.dry_run ? "true" : "false", committed ? "true" : "false",
               c->nrows && all_exact(c) ? "true" : "false", reread);
        json_rows(c, stdout);
        printf("}\n");
}

/* A row without a translation (offset -1: an origin that did not
 * answer, no offset-syncs) is left out of the commit (commit_target()),
 * whatever happens to the others under --force. */
static void set_action(struct ctx *c, const char *action) {
        for (size_t i = 0; i < c->nrows; i++)
                c->rows[i].action =
                    c->rows[i].x.offset < 0 ? "not committed" : action;
}

/* Failover: translate (local topics forward onto their copies, copies of
 * the target's own topics back onto their origin), refuse what cannot be
 * committed safely, commit, read back.  The same command fails back:
 * after east -> west, `--from west --to east` moves the group's position
 * in east.clicks at west back onto east's clicks and its position in
 * west's clicks onto west.clicks at east. */
int gw_cmd_failover(int argc, char **argv) {
        struct ctx  c;
        int         rc           = setup(&c, argc, argv, usage_failover, false);
        char        reason[1200] = "";
        const char *result       = "refused";
        bool        committed    = false;

        c.target_only_ok = true;
        c.back_ok        = true;
        if (rc != EXIT_OK) {
                teardown(&c);
                return rc == GW_HELP_SHOWN ? EXIT_OK : rc;
        }
        if (translate(&c)) {
                result = "failed";
                snprintf(reason, sizeof(reason), "%s", c.err);
                goto out;
        }
        target_offsets(&c, true);
        set_action(&c, "not committed");
        if (!c.o.json) {
                print_mode(&c, stdout);
                print_rows(&c, stdout);
        }
        if (any_ambiguous(&c)) {
                snprintf(reason, sizeof(reason),
                         "a checkpoint's offset is outside its target "
                         "partition (see NOTE), so where the group stopped "
                         "is not known; nothing committed (--force does not "
                         "override this)");
                goto out;
        }
        if (c.target_only && !c.o.force) {
                snprintf(reason, sizeof(reason),
                         "%s is unreachable, so the offsets are the group's "
                         "newest checkpoints at %s: no record is skipped, "
                         "but what the group consumed at %s after them is "
                         "read again; accept that with --force",
                         c.o.from, c.o.to, c.o.from);
                goto out;
        }
        if (!all_exact(&c) && !c.o.force) {
                bool ck = false;
                for (size_t i = 0; i < c.nrows; i++)
                        ck |= !c.rows[i].x.exact && c.rows[i].by_checkpoint;
                snprintf(reason, sizeof(reason),
                         "a translation is not exact (see NOTE); %s, or "
                         "accept it with --force",
                         ck ? "MirrorMaker 2's checkpoint makes the group "
                              "read some records again (waiting does not "
                              "change that)"
                            : "wait for replication to catch up");
                goto out;
        }
        if (c.o.dry_run) {
                result = "dry-run";
                set_action(&c, "would commit");
                snprintf(reason, sizeof(reason),
                         "dry run: nothing committed for group %s at %s",
                         c.o.group, c.o.to);
                goto out;
        }
        if (check_members(&c, false) || commit_target(&c)) {
                snprintf(reason, sizeof(reason), "%s", c.err);
                goto out;
        }
        committed = true;
        result    = "committed";
        set_action(&c, "committed");
        target_offsets(&c, false);
        for (size_t i = 0; i < c.nrows; i++)
                if (c.rows[i].x.offset >= 0 &&
                    c.rows[i].target_before != c.rows[i].x.offset) {
                        result = "failed";
                        snprintf(reason, sizeof(reason),
                                 "%s [%d] reads back %" PRId64
                                 " at %s after committing %" PRId64,
                                 c.rows[i].remote, (int)c.rows[i].partition,
                                 c.rows[i].target_before, c.o.to,
                                 c.rows[i].x.offset);
                        goto out;
                }
        snprintf(reason, sizeof(reason),
                 "committed group %s at %s: %zu partitions; start its "
                 "consumers at %s",
                 c.o.group, c.o.to, c.nrows, c.o.to);
out:
        if (c.o.json)
                print_failover_json(&c, result, reason, committed);
        else if (!strcmp(result, "committed") || !strcmp(result, "dry-run"))
                printf("%s\n", reason);
        if (strcmp(result, "committed") && strcmp(result, "dry-run"))
                gw_errorf("failover: %s%s",
                          strcmp(result, "refused") ? "" : "refused: ", reason);
        rc = !strcmp(result, "committed") || !strcmp(result, "dry-run")
                 ? EXIT_OK
                 : EXIT_RUNTIME;
        teardown(&c);
        return rc;
}

/* --------------------------------------------------------------- DRILL -- */

struct hb_scan {
        const char *src, *dst;
        int64_t     newest; /* heartbeat timestamp, -1 none */
};

static bool on_heartbeat(void *arg, const rd_kafka_message_t *m) {
        struct hb_scan           *h = arg;
        struct aagw_mm2_heartbeat hb;

        if (aagw_mm2_heartbeat_decode(m->key, m->key_len, m->payload, m->len,
                                      &hb) &&
            !strcmp(hb.source, h->src) && !strcmp(hb.target, h->dst) &&
            hb.timestamp_ms > h->newest)
                h->newest = hb.timestamp_ms;
        return true;
}

/* Newest heartbeat (source->target) in 'topic' at the source cluster
 * ('from') or the target. */
static int64_t newest_heartbeat(struct ctx *c, bool from, const char *topic) {
        const struct rd_kafka_metadata *md    = NULL;
        struct hb_scan                  h     = {c->o.from, c->o.to, -1};
        int                             parts = 0;
        rd_kafka_t *rk = client(c, from, RD_KAFKA_CONSUMER, "aagw-drill-hb");

        if (!rk)
                return -1;
        if (rd_kafka_metadata(rk, 1, NULL, &md, TIMEOUT_MS)) {
                rd_kafka_destroy(rk);
                return -1;
        }
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, topic) && !md->topics[i].err)
                        parts = md->topics[i].partition_cnt;
        rd_kafka_metadata_destroy(md);
        for (int p = 0; p < parts; p++) {
                int64_t lo, hi;
                if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi,
                                                     TIMEOUT_MS) ||
                    hi <= lo)
                        continue;
                read_range(rk, topic, p, hi - 20 > lo ? hi - 20 : lo, hi,
                           on_heartbeat, &h);
        }
        rd_kafka_destroy(rk);
        return h.newest;
}

struct origin_scan {
        const aagw_repl_policy_t *pol;
        const char               *hop_hdr;
        int64_t                   off[2];
        int                       n;
};

/* The source offset a target record was copied from (provenance), -1. */
static bool on_origin(void *arg, const rd_kafka_message_t *m) {
        struct origin_scan *s = arg;
        rd_kafka_headers_t *h = NULL;
        struct aagw_header  hd[64];
        size_t              n = 0;
        const char         *name;
        const void         *val;
        size_t              size;
        struct aagw_prov    prov;
        int64_t             o = -1;

        if (!rd_kafka_message_headers(m, &h))
                while (n < 64 &&
                       !rd_kafka_header_get_all(h, n, &name, &val, &size)) {
                        hd[n] = (struct aagw_header){name, val, size};
                        n++;
                }
        for (size_t i = 0; i < n; i++)
                if (hd[i].value && !strcmp(hd[i].name, s->hop_hdr)) {
                        const char *v = hd[i].value, *colon = NULL;
                        for (size_t k = hd[i].size; k > 0; k--)
                                if (v[k - 1] == ':') {
                                        colon = v + k - 1;
                                        break;
                                }
                        if (colon)
                                o = strtoll(colon + 1, NULL, 10);
                }
        if (o < 0 && aagw_prov_decode(s->pol, hd, n, &prov) == AAGW_REASON_OK &&
            prov.path_len == 2)
                o = prov.src_offset;
        if (s->n < 2)
                s->off[s->n++] = o;
        return s->n < 2;
}

/* Read the target around each translated offset: the record before T must
 * come from below the group's source position, the one at T from at or
 * after it; a consumer resuming at T then reads no record twice and
 * misses none. */
static int verify(struct ctx *c, int *verified) {
        char        group[600];
        char        hop[AAGW_AFFIX_MAX + 8];
        rd_kafka_t *rk;

        snprintf(hop, sizeof(hop), "%shop", c->set->replication.header_prefix);
        snprintf(group, sizeof(group), "%s", c->o.group);
        if (!(rk = client(c, false, RD_KAFKA_CONSUMER, group)))
                return -1;
        *verified = 0;
        /* Resume as a consumer of the group would: from its committed
         * offsets at the target. */
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)c->nrows);
        for (size_t i = 0; i < c->nrows; i++)
                rd_kafka_topic_partition_list_add(l, c->rows[i].remote,
                                                  c->rows[i].partition);
        if (rd_kafka_committed(rk, l, TIMEOUT_MS)) {
                snprintf(c->err, sizeof(c->err),
                         "reading group %s's offsets at %s failed", c->o.group,
                         c->o.to);
                rd_kafka_topic_partition_list_destroy(l);
                rd_kafka_destroy(rk);
                return -1;
        }
        for (size_t i = 0; i < c->nrows; i++) {
                struct row        *r = &c->rows[i];
                int64_t            t = l->elems[i].offset, lo, hi;
                struct origin_scan s = {c->pol, hop, {-1, -1}, 0};

                r->prev_src = r->next_src = -1;
                if (t < 0 ||
                    rd_kafka_query_watermark_offsets(
                        rk, r->remote, r->partition, &lo, &hi, TIMEOUT_MS)) {
                        snprintf(c->err, sizeof(c->err),
                                 "%s [%d] at %s: no committed offset for the "
                                 "group after the commit",
                                 r->remote, (int)r->partition, c->o.to);
                        continue;
                }
                int64_t from = t > lo ? t - 1 : t;
                if (from < hi)
                        read_range(rk, r->remote, r->partition, from,
                                   t + 1 < hi ? t + 1 : hi, on_origin, &s);
                if (t > lo)
                        r->prev_src = s.off[0];
                if (t < hi)
                        r->next_src = s.off[t > lo ? 1 : 0];
                r->verified = (t <= lo || (r->prev_src >= 0 &&
                                           r->prev_src < r->committed)) &&
                              (t >= hi || r->next_src >= r->committed);
                if (r->verified)
                        (*verified)++;
                else
                        snprintf(c->err, sizeof(c->err),
                                 "%s [%d] at %s: resuming at %" PRId64
                                 " reads origin offset %" PRId64
                                 " after %" PRId64 ", but the group's source "
                                 "position is %" PRId64,
                                 r->remote, (int)r->partition, c->o.to, t,
                                 r->next_src, r->prev_src, r->committed);
        }
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(rk);
        return *verified == (int)c->nrows ? 0 : -1;
}

/* Records behind: source end minus the gateway's position, per row. */
static int64_t lag_now(struct ctx *c) {
        rd_kafka_topic_partition_list_t *pos =
            rd_kafka_topic_partition_list_new((int)c->nrows);
        char    rgroup[512], e[512];
        int64_t lag = 0;

        snprintf(rgroup, sizeof(rgroup), "aagw.%s.%s-%s", c->set->gateway.id,
                 c->o.from, c->o.to);
        for (size_t i = 0; i < c->nrows; i++)
                rd_kafka_topic_partition_list_add(pos, c->rows[i].topic,
                                                  c->rows[i].partition);
        if (aagw_kafka_group_offsets(c->from_admin, rgroup, pos, TIMEOUT_MS, e,
                                     sizeof(e))) {
                rd_kafka_topic_partition_list_destroy(pos);
                return -1;
        }
        for (size_t i = 0; i < c->nrows; i++) {
                int64_t lo, hi, p = pos->elems[i].offset;
                if (rd_kafka_query_watermark_offsets(
                        c->from_admin, c->rows[i].topic, c->rows[i].partition,
                        &lo, &hi, TIMEOUT_MS)) {
                        lag = -1;
                        break;
                }
                lag += hi - (p < 0 ? lo : p) > 0 ? hi - (p < 0 ? lo : p) : 0;
        }
        rd_kafka_topic_partition_list_destroy(pos);
        return lag;
}

/* RPO and RTO as the runbook defines them: RPO is the replication lag,
 * what the target does not hold yet when the source is lost; RTO runs
 * from the translation (step c of the classic drill) to the verified
 * resume at the target (step e).  rpo_records is that lag at cut-over
 * (after the catch-up: 0 when the drill passes), lag_records_at_start
 * the lag when the drill began (what losing the source at that moment
 * would have cost); rto_s starts at the final translation, drill_s at
 * the command's start (the checks and the catch-up included). */
struct drill_report {
        bool    ok;
        char    reason[1200];
        int64_t hb_age_ms, lag_wait_ms, rpo_records, rpo_ms;
        int64_t lag_start;
        int     partitions, exact, verified;
        bool    committed;
        double  rto_s, drill_s;
};

static void print_report(const struct ctx *c, const struct drill_report *d) {
        if (c->o.json) {
                printf("{\"result\":\"%s\",\"reason\":",
                       d->ok ? "ok" : "failed");
                json_str(stdout, d->reason);
                printf(",\"group\":");
                json_str(stdout, c->o.group);
                printf(",\"from\":\"%s\",\"to\":\"%s\",\"heartbeat_age_ms\":"
                       "%" PRId64 ",\"lag_wait_ms\":%" PRId64
                       ",\"rpo_records\":%" PRId64 ",\"rpo_ms\":%" PRId64
                       ",\"lag_records_at_start\":%" PRId64
                       ",\"partition_count\":%d,"
                       "\"exact\":%d,\"committed\":%s,\"verified\":%d,"
                       "\"rto_s\":%.3f,\"drill_s\":%.3f,",
                       c->o.from, c->o.to, d->hb_age_ms, d->lag_wait_ms,
                       d->rpo_records, d->rpo_ms, d->lag_start, d->partitions,
                       d->exact, d->committed ? "true" : "false", d->verified,
                       d->rto_s, d->drill_s);
                json_rows(c, stdout);
                printf("}\n");
                return;
        }
        printf("# Drill\nresult:%s\nreason:%s\ngroup:%s\nfrom:%s\nto:%s\n"
               "heartbeat_age_ms:%" PRId64 "\nlag_wait_ms:%" PRId64
               "\nrpo_records:%" PRId64 "\nrpo_ms:%" PRId64
               "\nlag_records_at_start:%" PRId64
               "\npartition_count:%d\nexact:%d\ncommitted:%s\nverified:%d\n"
               "rto_s:%.3f\ndrill_s:%.3f\n",
               d->ok ? "ok" : "failed", d->reason, c->o.group, c->o.from,
               c->o.to, d->hb_age_ms, d->lag_wait_ms, d->rpo_records, d->rpo_ms,
               d->lag_start, d->partitions, d->exact,
               d->committed ? "yes" : "no", d->verified, d->rto_s, d->drill_s);
        if (c->nrows) {
                printf("\n");
                print_rows(c, stdout);
        }
}

int gw_cmd_drill(int argc, char **argv) {
        struct ctx          c;
        struct drill_report d;
        int64_t             t0 = aagw_mono_ms(), t_xlate = -1, hb_src, hb_dst;
        char                hb_remote[AAGW_TOPIC_MAX + 1];
        int                 rc = setup(&c, argc, argv, usage_drill, true);

        memset(&d, 0, sizeof(d));
        d.hb_age_ms = d.rpo_records = d.rpo_ms = d.lag_start = -1;
        if (rc != EXIT_OK) {
                teardown(&c);
                return rc == GW_HELP_SHOWN ? EXIT_OK : rc;
        }
        /* 0. May the group move at all?  Refused at once while it has
         * members at the target, or (without --force) while the cluster
         * cannot tell; checked again before the commit when it can. */
        if (check_members(&c, c.o.json)) {
                snprintf(d.reason, sizeof(d.reason), "%s", c.err);
                goto done;
        }
        /* 1. Is replication alive?  Our heartbeat copies at the target. */
        aagw_repl_remote_topic(c.pol, c.o.from, AAGW_MM2_HEARTBEATS_TOPIC,
                               hb_remote, sizeof(hb_remote));
        hb_dst      = newest_heartbeat(&c, false, hb_remote);
        d.hb_age_ms = hb_dst >= 0 ? aagw_wall_ms() - hb_dst : -1;
        if (hb_dst < 0 || d.hb_age_ms > (int64_t)c.o.max_hb_age_s * 1000) {
                snprintf(d.reason, sizeof(d.reason),
                         hb_dst < 0 ? "no heartbeat from %s in %s at %s: "
                                      "replication %s->%s is not running (or "
                                      "mm2.heartbeats_interval is 0s)"
                                    : "the newest heartbeat from %s in %s at "
                                      "%s is older than the limit: "
                                      "replication %s->%s is stopped or "
                                      "stalled",
                         c.o.from, hb_remote, c.o.to, c.o.from, c.o.to);
                goto done;
        }
        /* 2. Wait until replication caught up with the group's topics. */
        if (translate(&c)) {
                snprintf(d.reason, sizeof(d.reason), "%s", c.err);
                goto done;
        }
        d.partitions   = (int)c.nrows;
        int64_t waited = aagw_mono_ms(), deadline = t0 + c.o.deadline_s * 1000LL;
        d.lag_start = d.rpo_records = lag_now(&c);
        while (d.rpo_records != 0 && aagw_mono_ms() < deadline &&
               !gw_wait_stop(200))
                d.rpo_records = lag_now(&c);
        d.lag_wait_ms = aagw_mono_ms() - waited;
        /* RPO in time: how far the target's view of the source trails the
         * source at cut-over, by the newest heartbeat on each side. */
        hb_src = newest_heartbeat(&c, true, AAGW_MM2_HEARTBEATS_TOPIC);
        hb_dst = newest_heartbeat(&c, false, hb_remote);
        if (hb_src >= 0 && hb_dst >= 0)
                d.rpo_ms = hb_src > hb_dst ? hb_src - hb_dst : 0;
        if (d.rpo_records != 0) {
                snprintf(d.reason, sizeof(d.reason),
                         "replication lag of group %s's partitions is %" PRId64
                         " records after the %d s deadline",
                         c.o.group, d.rpo_records, c.o.deadline_s);
                goto done;
        }
        /* 3. Translate again, now that the positions are final: the
         * start of the RTO. */
        t_xlate = aagw_mono_ms();
        for (size_t i = 0; i < c.nrows; i++) {
                free(c.rows[i].pts);
                free(c.rows[i].pts2);
        }
        free(c.rows);
        c.rows  = NULL;
        c.nrows = 0;
        if (translate(&c)) {
                snprintf(d.reason, sizeof(d.reason), "%s", c.err);
                goto done;
        }
        for (size_t i = 0; i < c.nrows; i++)
                d.exact += c.rows[i].x.exact;
        if (!all_exact(&c)) {
                snprintf(d.reason, sizeof(d.reason),
                         "%d of %zu partitions do not translate exactly",
                         (int)c.nrows - d.exact, c.nrows);
                goto done;
        }
        /* 4. Commit at the target, 5. verify a resume there. */
        if ((!c.members_unknown && check_members(&c, c.o.json)) ||
            commit_target(&c)) {
                snprintf(d.reason, sizeof(d.reason), "%s", c.err);
                goto done;
        }
        d.committed = true;
        if (verify(&c, &d.verified)) {
                snprintf(d.reason, sizeof(d.reason), "verification: %s", c.err);
                goto done;
        }
        d.ok = true;
        snprintf(d.reason, sizeof(d.reason),
                 "group %s resumes at %s with no gap and no repeat", c.o.group,
                 c.o.to);
done:
        d.drill_s = (double)(aagw_mono_ms() - t0) / 1000.0;
        d.rto_s   = d.ok ? (double)(aagw_mono_ms() - t_xlate) / 1000.0 : -1;
        print_report(&c, &d);
        if (!d.ok)
                gw_errorf("drill failed: %s", d.reason);
        teardown(&c);
        return d.ok ? EXIT_OK : EXIT_RUNTIME;
}
