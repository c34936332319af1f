/*
 * replicator/mm2.c: the MirrorMaker 2 side of a flow (its thread); the
 * consumer group calls it makes are in groups.c.
 *
 *   heartbeats   every heartbeat_ms into the SOURCE's `heartbeats` topic
 *                (partition 0), key (source, target); the flow replicates
 *                the topic like any other, and measures each copy's
 *                latency when the target acknowledges it (flow.c).
 *   offset-syncs mm2-offset-syncs.<target>.internal at the source (MM2's
 *                default location) or mm2-offset-syncs.<source>.internal
 *                at the target; written by the flow thread through
 *                mm2_sync() whenever the source->target offset delta
 *                changes (flow.c decides when).
 *   checkpoints  <source>.checkpoints.internal at the target, every
 *                checkpoint_ms, for the groups the policy allows: their
 *                committed source offsets, translated exactly with the
 *                syncs this flow wrote (kept in memory, per partition).
 *
 * The checkpoint pass talks to the Admin API, which can be slow or hang on
 * some clusters: it runs on this file's own thread with its own handle,
 * never on the flow thread.  Every internal topic has one partition in
 * MM2; we write partition 0 whatever the topic has, so a topic that broker
 * auto-creation gave more partitions still reads the same.
 */
#include "replicator_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ADMIN_TIMEOUT_MS 5000
#define LIST_RETRY_MIN_MS 5000
#define LIST_RETRY_MAX_MS 300000
#define MAX_POINTS 64 /* sync points kept per partition for checkpoints */
#define CKPT_META_MAX 4096 /* commit metadata copied into a checkpoint */

struct mm2_part {
        char                  topic[AAGW_TOPIC_MAX + 1];
        int32_t               partition;
        struct aagw_mm2_point pts[MAX_POINTS];
        size_t                n;
};

struct mm2 {
        aagw_flow_t              *flow;
        struct aagw_mm2_conf      conf;
        const aagw_repl_policy_t *pol;
        char                      source[AAGW_ALIAS_MAX + 1];
        char                      target[AAGW_ALIAS_MAX + 1];
        char                      syncs_topic[AAGW_TOPIC_MAX + 1];
        char                      ckpt_topic[AAGW_TOPIC_MAX + 1];
        const char               *bootstraps;   /* source: for the group */
        const char *const        *props;        /* listing child (borrowed */
        size_t                    nprops;       /* from the engine's config) */
        rd_kafka_t               *src_producer; /* heartbeats, syncs */
        rd_kafka_t               *tgt_producer; /* the flow's: borrowed */
        rd_kafka_t               *src_admin;    /* groups and offsets */
        rd_kafka_t               *tgt_admin;    /* sync_group_offsets */
        rd_kafka_topic_t         *hb_rkt, *sync_rkt, *ckpt_rkt;

        pthread_t       thread;
        bool            started;
        pthread_mutex_t lock; /* parts; stop */
        pthread_cond_t  cond;
        bool            stop;
        atomic_bool     stopping; /* read by the blocking admin calls */
        /* Listing groups failed: when to ask again (mono ms), and the
         * next wait (doubling, LIST_RETRY_MAX_MS at most).  A failure is
         * often passing (a fresh cluster still loading its coordinators,
         * a child slow to start on a busy host), so it never disables
         * the listing for good. */
        int64_t list_retry_at, list_backoff_ms;
        bool    list_warned;

        struct mm2_part **parts;
        size_t            nparts, cap;

        _Atomic uint64_t syncs, checkpoints, heartbeats, group_synced;
};

bool mm2_is_heartbeats(const char *topic) {
        return !strcmp(topic, AAGW_MM2_HEARTBEATS_TOPIC);
}

/* --------------------------------------------------------------- SYNCS -- */

static struct mm2_part *part_find(struct mm2 *m, const char *topic,
                                  int32_t partition, bool create) {
        for (size_t i = 0; i < m->nparts; i++)
                if (m->parts[i]->partition == partition &&
                    !strcmp(m->parts[i]->topic, topic))
                        return m->parts[i];
        if (!create)
                return NULL;
        if (m->nparts == m->cap) {
                size_t            ncap = m->cap ? m->cap * 2 : 64;
                struct mm2_part **np   = realloc(m->parts, ncap * sizeof(*np));
                if (!np)
                        return NULL;
                m->parts = np;
                m->cap   = ncap;
        }
        struct mm2_part *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        snprintf(p->topic, sizeof(p->topic), "%s", topic);
        p->partition          = partition;
        m->parts[m->nparts++] = p;
        return p;
}

void mm2_sync(struct mm2 *m, const char *topic, int32_t partition,
              int64_t upstream, int64_t downstream, bool lossy) {
        unsigned char       key[AAGW_TOPIC_MAX + 8], val[16];
        size_t              kl, vl;
        rd_kafka_headers_t *h = NULL;
        rd_kafka_resp_err_t err;

        if (!m || !m->sync_rkt || upstream < 0 || downstream < 0)
                return;
        pthread_mutex_lock(&m->lock);
        struct mm2_part *p = part_find(m, topic, partition, true);
        if (p)
                aagw_mm2_points_add(
                    p->pts, &p->n, MAX_POINTS,
                    (struct aagw_mm2_point){upstream, downstream, lossy});
        pthread_mutex_unlock(&m->lock);

        kl = aagw_mm2_sync_key(topic, partition, key, sizeof(key));
        vl = aagw_mm2_sync_value(upstream, downstream, val, sizeof(val));
        if (lossy) {
                h = rd_kafka_headers_new(1);
                rd_kafka_header_add(h, AAGW_MM2_SYNC_LOSSY_HDR, -1, "1", 1);
        }
        err = rd_kafka_producev(
            m->conf.syncs_at_target ? m->tgt_producer : m->src_producer,
            RD_KAFKA_V_RKT(m->sync_rkt), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, kl),
            RD_KAFKA_V_VALUE(val, vl), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
        if (err) {
                if (h)
                        rd_kafka_headers_destroy(h);
                replicator_note_authz(
                    m->conf.syncs_at_target ? m->target : m->source, err,
                    "WRITE", "topic %s", rd_kafka_topic_name(m->sync_rkt));
                aagw_log(AAGW_LOG_WARN, "MM2",
                         "%s: offset-sync %s [%d] %" PRId64 "->%" PRId64
                         " not written: %s",
                         aagw_flow_name(m->flow), topic, (int)partition,
                         upstream, downstream, rd_kafka_err2str(err));
                return;
        }
        atomic_fetch_add(&m->syncs, 1);
}

/* ---------------------------------------------------------- HEARTBEATS -- */

static void heartbeat(struct mm2 *m) {
        unsigned char key[2 * AAGW_ALIAS_MAX + 8], val[16];
        size_t        kl =
            aagw_mm2_heartbeat_key(m->source, m->target, key, sizeof(key));
        size_t vl = aagw_mm2_heartbeat_value(aagw_wall_ms(), val, sizeof(val));
        rd_kafka_resp_err_t err = rd_kafka_producev(
            m->src_producer, RD_KAFKA_V_RKT(m->hb_rkt), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, kl),
            RD_KAFKA_V_VALUE(val, vl), RD_KAFKA_V_END);
        if (err) {
                replicator_note_authz(m->source, err, "WRITE", "topic %s",
                                      AAGW_MM2_HEARTBEATS_TOPIC);
                aagw_log(AAGW_LOG_WARN, "MM2", "%s: heartbeat: %s",
                         aagw_flow_name(m->flow), rd_kafka_err2str(err));
        } else
                atomic_fetch_add(&m->heartbeats, 1);
}

/* --------------------------------------------------------- CHECKPOINTS -- */

/* True if pattern 'p' can only match itself: what we fall back to when
 * the cluster cannot list groups ('.' matches itself, among others). */
static bool plain_name(const char *p) {
        if (!*p)
                return false;
        for (; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
                      *p == '.'))
                        return false;
        return true;
}

/* The groups to checkpoint: the plain names among the include patterns
 * when every pattern is one (nothing to list); else the source's groups
 * (ListConsumerGroups) the policy allows, asked in a child process
 * (aagw_kafka_list_groups(): librdkafka 2.0 leaks its client on clusters
 * that refuse the call, the embedded one among them); while the cluster
 * cannot list them (asked again with a growing wait), the plain names
 * again.  Returns a malloc()ed array of strdup()s. */
static char **list_groups(struct mm2 *m, size_t *np) {
        char **out = NULL, **all = NULL;
        size_t n = 0, nall = 0;
        bool   all_plain = m->conf.group_cnt > 0;
        char   err[512];

        *np = 0;
        for (size_t i = 0; i < m->conf.group_cnt; i++)
                all_plain &= plain_name(m->conf.groups[i]);
        if (!all_plain && aagw_mono_ms() >= m->list_retry_at) {
                aagw_err_t rc = aagw_kafka_list_groups(
                    "/proc/self/exe", m->bootstraps, m->props, m->nprops,
                    ADMIN_TIMEOUT_MS, &all, &nall, err, sizeof(err));
                if (rc == AAGW_OK) {
                        if (m->list_warned)
                                aagw_log(AAGW_LOG_INFO, "MM2",
                                         "%s: %s lists its consumer groups "
                                         "again",
                                         aagw_flow_name(m->flow), m->source);
                        m->list_warned     = false;
                        m->list_backoff_ms = 0;
                        m->list_retry_at   = 0;
                        out = calloc(nall + 1, sizeof(*out));
                        for (size_t i = 0; out && i < nall; i++)
                                if (aagw_repl_group_allowed(m->pol, all[i]))
                                        out[n++] = strdup(all[i]);
                        for (size_t i = 0; i < nall; i++)
                                free(all[i]);
                        free(all);
                        *np = n;
                        return out;
                }
                m->list_backoff_ms = m->list_backoff_ms ? m->list_backoff_ms * 2
                                                        : LIST_RETRY_MIN_MS;
                if (m->list_backoff_ms > LIST_RETRY_MAX_MS)
                        m->list_backoff_ms = LIST_RETRY_MAX_MS;
                m->list_retry_at = aagw_mono_ms() + m->list_backoff_ms;
                aagw_log(m->list_warned ? AAGW_LOG_DEBUG : AAGW_LOG_WARN, "MM2",
                         "%s: %s cannot list consumer groups (%s); "
                         "checkpointing only the groups named literally in "
                         "replication.groups until it can (next try in "
                         "%" PRId64 " s)",
                         aagw_flow_name(m->flow), m->source, err,
                         m->list_backoff_ms / 1000);
                m->list_warned = true;
        }
        out = calloc(m->conf.group_cnt + 1, sizeof(*out));
        for (size_t i = 0; out && i < m->conf.group_cnt; i++)
                if (plain_name(m->conf.groups[i]) &&
                    aagw_repl_group_allowed(m->pol, m->conf.groups[i]))
                        out[n++] = strdup(m->conf.groups[i]);
        *np = n;
        return out;
}

/* sync_group_offsets: commit the translated offsets 'xl' (target topics)
 * for 'group' at the target, only where they move the group forward.  A
 * group with active members there is left alone: the broker refuses the
 * commit (AlterConsumerGroupOffsets only succeeds for a group that is not
 * consuming), so no DescribeConsumerGroups is needed, which some clusters
 * cannot answer. */
static void sync_group(struct mm2 *m, const char *group,
                       rd_kafka_topic_partition_list_t *xl) {
        rd_kafka_topic_partition_list_t *cur =
            rd_kafka_topic_partition_list_copy(xl);
        rd_kafka_topic_partition_list_t *fwd =
            rd_kafka_topic_partition_list_new(xl->cnt);
        char err[512];

        if (aagw_kafka_group_offsets(m->tgt_admin, group, cur, ADMIN_TIMEOUT_MS,
                                     err, sizeof(err)) == 0)
                for (int i = 0; i < xl->cnt; i++)
                        if (xl->elems[i].offset > cur->elems[i].offset)
                                rd_kafka_topic_partition_list_add(
                                    fwd, xl->elems[i].topic,
                                    xl->elems[i].partition)
                                    ->offset = xl->elems[i].offset;
        if (fwd->cnt) {
                if (aagw_kafka_group_commit(m->tgt_admin, group, fwd,
                                            ADMIN_TIMEOUT_MS, err,
                                            sizeof(err)) == 0)
                        atomic_fetch_add(&m->group_synced, 1);
                else
                        aagw_log(AAGW_LOG_DEBUG, "MM2",
                                 "%s: not syncing group %s at %s: %s",
                                 aagw_flow_name(m->flow), group, m->target,
                                 err);
        }
        rd_kafka_topic_partition_list_destroy(cur);
        rd_kafka_topic_partition_list_destroy(fwd);
}

static void checkpoint_group(struct mm2 *m, const char *group,
                             const struct aagw_flow_part_stats *ps,
                             size_t                             nps) {
        rd_kafka_topic_partition_list_t *l =
            rd_kafka_topic_partition_list_new((int)nps);
        char                             err[512];
        rd_kafka_topic_partition_list_t *xl =
            rd_kafka_topic_partition_list_new((int)nps);

        for (size_t i = 0; i < nps; i++)
                if (!mm2_is_heartbeats(ps[i].topic))
                        rd_kafka_topic_partition_list_add(l, ps[i].topic,
                                                          ps[i].partition);
        if (!l->cnt ||
            aagw_kafka_group_offsets(m->src_admin, group, l, ADMIN_TIMEOUT_MS,
                                     err, sizeof(err))) {
                if (l->cnt)
                        aagw_log(AAGW_LOG_DEBUG, "MM2",
                                 "%s: offsets of group %s: %s",
                                 aagw_flow_name(m->flow), group, err);
                rd_kafka_topic_partition_list_destroy(l);
                rd_kafka_topic_partition_list_destroy(xl);
                return;
        }
        for (int i = 0; i < l->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &l->elems[i];
                struct aagw_mm2_xlate       x;
                int64_t                     pos = -1;
                char                        remote[AAGW_TOPIC_MAX + 1];
                unsigned char key[AAGW_MM2_GROUP_MAX + AAGW_TOPIC_MAX + 16];
                /* MM2 copies the commit's metadata into the checkpoint,
                 * and RemoteClusterUtils hands it back: so do we (up to
                 * Kafka's default offset.metadata.max.bytes). */
                char          meta[CKPT_META_MAX + 1];
                unsigned char val[32 + CKPT_META_MAX];

                if (tp->err || tp->offset < 0)
                        continue;
                for (size_t k = 0; k < nps; k++)
                        if (ps[k].partition == tp->partition &&
                            !strcmp(ps[k].topic, tp->topic))
                                pos = ps[k].next;
                pthread_mutex_lock(&m->lock);
                struct mm2_part *p =
                    part_find(m, tp->topic, tp->partition, false);
                if (p)
                        aagw_mm2_translate(p->pts, p->n, tp->offset, pos, &x);
                pthread_mutex_unlock(&m->lock);
                /* Only exact translations: a checkpoint that might skip
                 * or repeat records is worse than none. */
                if (!p || !x.exact ||
                    aagw_repl_remote_topic(m->pol, m->source, tp->topic, remote,
                                           sizeof(remote)))
                        continue;
                size_t kl = aagw_mm2_checkpoint_key(
                    group, remote, tp->partition, key, sizeof(key));
                size_t ml = tp->metadata && tp->metadata_size
                                ? tp->metadata_size
                                : 0;
                if (ml > CKPT_META_MAX)
                        ml = CKPT_META_MAX;
                if (ml)
                        memcpy(meta, tp->metadata, ml);
                meta[ml]  = '\0';
                size_t vl = aagw_mm2_checkpoint_value(tp->offset, x.offset,
                                                      meta, val, sizeof(val));
                if (kl > sizeof(key) || vl > sizeof(val))
                        continue;
                rd_kafka_topic_partition_list_add(xl, remote, tp->partition)
                    ->offset = x.offset;
                if (!rd_kafka_producev(
                        m->tgt_producer, RD_KAFKA_V_RKT(m->ckpt_rkt),
                        RD_KAFKA_V_PARTITION(0),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(key, kl), RD_KAFKA_V_VALUE(val, vl),
                        RD_KAFKA_V_END))
                        atomic_fetch_add(&m->checkpoints, 1);
        }
        if (m->conf.sync_group_offsets && xl->cnt)
                sync_group(m, group, xl);
        rd_kafka_topic_partition_list_destroy(xl);
        rd_kafka_topic_partition_list_destroy(l);
}

static void checkpoints(struct mm2 *m) {
        size_t                       ngroups, nps;
        char                       **groups = list_groups(m, &ngroups);
        struct aagw_flow_part_stats *ps;

        nps = aagw_flow_partitions(m->flow, NULL, 0);
        ps  = calloc(nps + 1, sizeof(*ps));
        if (groups && ps) {
                nps = aagw_flow_partitions(m->flow, ps, nps);
                /* Under scale-out a partition is checkpointed by the
                 * member that copies it: it alone has the syncs of what
                 * it copied (in m's sync points), and its position.  The
                 * checkpoint records are keyed per partition, so the
                 * members' checkpoints never overwrite each other. */
                if (flow_scaled(m->flow)) {
                        size_t k = 0;
                        for (size_t i = 0; i < nps; i++)
                                if (ps[i].assigned)
                                        ps[k++] = ps[i];
                        nps = k;
                }
                for (size_t i = 0; i < ngroups && !atomic_load(&m->stopping);
                     i++)
                        checkpoint_group(m, groups[i], ps, nps);
        }
        for (size_t i = 0; groups && i < ngroups; i++)
                free(groups[i]);
        free(groups);
        free(ps);
}

/* -------------------------------------------------------------- THREAD -- */

/* Create MM2 topic 'topic' through 'admin' if its cluster lacks it: one
 * partition, compacted, as MirrorMaker 2 makes its internal topics.  A
 * cluster with auto.create.topics.enable=false (the production norm)
 * would otherwise drop every heartbeat, offset-sync and checkpoint
 * (librdkafka fails records for unknown topics after its metadata
 * timeout).  The embedded mock cannot create topics (it auto-creates):
 * a timeout there is not an error. */
static int ensure_topic(struct mm2 *m, rd_kafka_t *admin, const char *topic,
                        const char *where) {
        static const char *const compact[] = {"cleanup.policy", "compact",
                                              NULL};
        const struct rd_kafka_metadata *md = NULL;
        char                            err[256];
        bool                            have = false;

        if (!admin || aagw_kafka_metadata(admin, true, NULL, &md,
                                          ADMIN_TIMEOUT_MS, &m->stopping))
                return 0; /* the produce reports what is wrong */
        for (int i = 0; i < md->topic_cnt; i++)
                have |= !strcmp(md->topics[i].topic, topic) &&
                        !md->topics[i].err;
        rd_kafka_metadata_destroy(md);
        if (have)
                return 0;
        int rc = aagw_kafka_topic_create_conf(admin, topic, 1, compact,
                                              ADMIN_TIMEOUT_MS, err,
                                              sizeof(err));
        if (rc == 0)
                aagw_log(AAGW_LOG_INFO, "MM2", "%s: created topic %s at %s",
                         aagw_flow_name(m->flow), topic, where);
        else if (rc == -1)
                aagw_log(AAGW_LOG_WARN, "MM2",
                         "%s: cannot create topic %s at %s: %s",
                         aagw_flow_name(m->flow), topic, where, err);
        return rc;
}

static void *mm2_main(void *arg) {
        struct mm2 *m       = arg;
        int64_t     next_hb = 0, next_ck = 0;

        groups_cancel_on(&m->stopping);
        /* (-2: no answer, the cluster cannot create topics: do not wait
         * for it again.) */
        int made = 0;
        if (m->hb_rkt)
                made = ensure_topic(m, m->src_admin, AAGW_MM2_HEARTBEATS_TOPIC,
                                    m->source);
        if (m->sync_rkt && made != -2)
                made = ensure_topic(
                    m, m->conf.syncs_at_target ? m->tgt_admin : m->src_admin,
                    m->syncs_topic,
                    m->conf.syncs_at_target ? m->target : m->source);
        if (m->ckpt_rkt && made != -2)
                ensure_topic(m, m->tgt_admin, m->ckpt_topic, m->target);
        pthread_mutex_lock(&m->lock);
        while (!m->stop) {
                int64_t now = aagw_wall_ms();
                pthread_mutex_unlock(&m->lock);
                /* Heartbeats are per flow, not per partition: under
                 * scale-out one member writes them
                 * (flow_leads_mm2()). */
                bool lead = flow_leads_mm2(m->flow);
                if (m->conf.heartbeat_ms > 0 && now >= next_hb) {
                        if (lead)
                                heartbeat(m);
                        next_hb = now + m->conf.heartbeat_ms;
                }
                if (m->conf.checkpoint_ms > 0 && now >= next_ck) {
                        /* The first pass after one interval: the flow has
                         * written its first syncs by then.  Per
                         * partition: under scale-out each member for the
                         * partitions it copies (checkpoints()). */
                        if (next_ck)
                                checkpoints(m);
                        next_ck = aagw_wall_ms() + m->conf.checkpoint_ms;
                }
                rd_kafka_poll(m->src_producer, 0);
                pthread_mutex_lock(&m->lock);
                if (m->stop)
                        break;
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&m->cond, &m->lock, &ts);
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

/* ----------------------------------------------------------- LIFECYCLE -- */

static rd_kafka_t *client(const struct aagw_flow_conf *c, bool source,
                          rd_kafka_type_t type, const char *role, char *errstr,
                          size_t errstr_size) {
        char             name[256];
        rd_kafka_conf_t *conf;

        snprintf(name, sizeof(name), "%s->%s-mm2-%s", c->source, c->target,
                 role);
        conf = aagw_kafka_conf_new(source ? c->source_bootstraps
                                          : c->target_bootstraps,
                                   name, errstr, errstr_size);
        if (!conf)
                return NULL;
        if (aagw_kafka_conf_apply(
                conf, !strcmp(role, "admin") ? "admin" : "producer",
                source ? c->source_props : c->target_props,
                source ? c->source_prop_cnt : c->target_prop_cnt, errstr,
                errstr_size) ||
            aagw_kafka_conf_set(conf, "linger.ms", "5", errstr, errstr_size)) {
                rd_kafka_conf_destroy(conf);
                return NULL;
        }
        rd_kafka_t *rk = rd_kafka_new(type, conf, errstr, errstr_size);
        if (!rk)
                rd_kafka_conf_destroy(conf);
        return rk;
}

struct mm2 *mm2_new(aagw_flow_t *flow, const struct aagw_flow_conf *c,
                    rd_kafka_t *target_producer, char *errstr,
                    size_t errstr_size) {
        struct mm2 *m = calloc(1, sizeof(*m));

        if (!m) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        m->flow         = flow;
        m->conf         = c->mm2;
        m->pol          = c->policy;
        m->tgt_producer = target_producer;
        m->bootstraps   = c->source_bootstraps;
        m->props        = c->source_props;
        m->nprops       = c->source_prop_cnt;
        if (m->conf.sync_max_per_s <= 0)
                m->conf.sync_max_per_s = 100;
        pthread_mutex_init(&m->lock, NULL);
        pthread_cond_init(&m->cond, NULL);
        snprintf(m->source, sizeof(m->source), "%s", c->source);
        snprintf(m->target, sizeof(m->target), "%s", c->target);
        /* Named with the policy's separator, as MM2 does (Kafka >= 3.0). */
        if (aagw_mm2_offset_syncs_topic_sep(
                aagw_repl_separator(m->pol),
                m->conf.syncs_at_target ? c->source : c->target, m->syncs_topic,
                sizeof(m->syncs_topic)) ||
            aagw_mm2_checkpoints_topic_sep(aagw_repl_separator(m->pol),
                                           c->source, m->ckpt_topic,
                                           sizeof(m->ckpt_topic))) {
                snprintf(errstr, errstr_size, "alias too long for MM2 topics");
                goto fail;
        }
        m->src_producer =
            client(c, true, RD_KAFKA_PRODUCER, "producer", errstr, errstr_size);
        if (!m->src_producer)
                goto fail;
        m->src_admin =
            client(c, true, RD_KAFKA_PRODUCER, "admin", errstr, errstr_size);
        if (!m->src_admin)
                goto fail;
        /* At the target: group offsets, and creating the MM2 topics
         * written there. */
        if ((m->conf.sync_group_offsets || m->conf.checkpoint_ms > 0 ||
             (m->conf.syncs && m->conf.syncs_at_target)) &&
            !(m->tgt_admin = client(c, false, RD_KAFKA_PRODUCER, "admin",
                                    errstr, errstr_size)))
                goto fail;
        if (m->conf.heartbeat_ms > 0)
                m->hb_rkt = rd_kafka_topic_new(m->src_producer,
                                               AAGW_MM2_HEARTBEATS_TOPIC, NULL);
        if (m->conf.syncs)
                m->sync_rkt = rd_kafka_topic_new(
                    m->conf.syncs_at_target ? m->tgt_producer : m->src_producer,
                    m->syncs_topic, NULL);
        if (m->conf.checkpoint_ms > 0)
                m->ckpt_rkt =
                    rd_kafka_topic_new(m->tgt_producer, m->ckpt_topic, NULL);
        return m;
fail:
        mm2_destroy(m, 0);
        return NULL;
}

int mm2_start(struct mm2 *m, char *errstr, size_t errstr_size) {
        int rc = pthread_create(&m->thread, NULL, mm2_main, m);
        if (rc) {
                snprintf(errstr, errstr_size, "cannot start thread: %s",
                         strerror(rc));
                return -1;
        }
        m->started = true;
        return 0;
}

void mm2_stop(struct mm2 *m) {
        if (!m)
                return;
        atomic_store(&m->stopping, true);
        pthread_mutex_lock(&m->lock);
        m->stop = true;
        pthread_cond_signal(&m->cond);
        pthread_mutex_unlock(&m->lock);
}

void mm2_destroy(struct mm2 *m, int timeout_ms) {
        if (!m)
                return;
        atomic_store(&m->stopping, true);
        pthread_mutex_lock(&m->lock);
        m->stop = true;
        pthread_cond_signal(&m->cond);
        pthread_mutex_unlock(&m->lock);
        if (m->started)
                pthread_join(m->thread, NULL);
        if (m->src_producer && timeout_ms > 0)
                rd_kafka_flush(m->src_producer, timeout_ms);
        if (m->hb_rkt)
                rd_kafka_topic_destroy(m->hb_rkt);
        if (m->sync_rkt)
                rd_kafka_topic_destroy(m->sync_rkt);
        if (m->ckpt_rkt)
                rd_kafka_topic_destroy(m->ckpt_rkt);
        replicator_destroy_clients(
            (const struct replicator_doomed[]){{m->src_producer, 0},
                                               {m->src_admin, 0},
                                               {m->tgt_admin, 0}},
            3);
        for (size_t i = 0; i < m->nparts; i++)
                free(m->parts[i]);
        free(m->parts);
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        free(m);
}

void mm2_stats(const struct mm2 *mc, struct aagw_flow_stats *st) {
        struct mm2 *m = (struct mm2 *)mc;
        if (!m)
                return;
        st->offset_syncs         = atomic_load(&m->syncs);
        st->checkpoints          = atomic_load(&m->checkpoints);
        st->heartbeats           = atomic_load(&m->heartbeats);
        st->group_offsets_synced = atomic_load(&m->group_synced);
}
