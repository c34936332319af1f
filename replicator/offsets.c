/*
 * replicator/offsets.c: the MirrorMaker 2 side of a flow, and consumer
 * group offsets through the Admin API.
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

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_TIMEOUT_MS 5000
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
        bool            list_unsupported;

        struct mm2_part **parts;
        size_t            nparts, cap;

        _Atomic uint64_t syncs, checkpoints, heartbeats, group_synced;
};

/* The mm2 thread's stop flag, for the blocking calls below when they run
 * on it (NULL on any other thread: the commands wait their timeouts). */
static _Thread_local atomic_bool *cancel_flag;

static bool cancelled(void) {
        return cancel_flag && atomic_load(cancel_flag);
}

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
        if (err)
                aagw_log(AAGW_LOG_WARN, "MM2", "%s: heartbeat: %s",
                         aagw_flow_name(m->flow), rd_kafka_err2str(err));
        else
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
 * that refuse the call, the embedded one among them); on a cluster that
 * cannot list them, the plain names again.  Returns a malloc()ed array of
 * strdup()s. */
static char **list_groups(struct mm2 *m, size_t *np) {
        char **out = NULL, **all = NULL;
        size_t n = 0, nall = 0;
        bool   all_plain = m->conf.group_cnt > 0;
        char   err[512];

        *np = 0;
        for (size_t i = 0; i < m->conf.group_cnt; i++)
                all_plain &= plain_name(m->conf.groups[i]);
        if (!all_plain && !m->list_unsupported) {
                aagw_err_t rc = aagw_kafka_list_groups(
                    "/proc/self/exe", m->bootstraps, m->props, m->nprops,
                    ADMIN_TIMEOUT_MS, &all, &nall, err, sizeof(err));
                if (rc == AAGW_OK) {
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
                m->list_unsupported = true;
                aagw_log(AAGW_LOG_WARN, "MM2",
                         "%s: %s cannot list consumer groups (%s); "
                         "checkpointing only the groups named literally in "
                         "replication.groups",
                         aagw_flow_name(m->flow), m->source, err);
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

        if (!admin || rd_kafka_metadata(admin, 1, NULL, &md, ADMIN_TIMEOUT_MS))
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

        cancel_flag = &m->stopping;
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
                if (m->conf.heartbeat_ms > 0 && now >= next_hb) {
                        heartbeat(m);
                        next_hb = now + m->conf.heartbeat_ms;
                }
                if (m->conf.checkpoint_ms > 0 && now >= next_ck) {
                        /* The first pass after one interval: the flow has
                         * written its first syncs by then. */
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
        if (m->src_producer)
                rd_kafka_destroy(m->src_producer);
        if (m->src_admin)
                rd_kafka_destroy(m->src_admin);
        if (m->tgt_admin)
                rd_kafka_destroy(m->tgt_admin);
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

/* -------------------------------------------------------- GROUP OFFSETS -- */

/* Wait for an admin result; the error text of a failed one goes to
 * errstr.  Returns the event (caller destroys) or NULL. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, int timeout_ms,
                                    const char *what, char *errstr,
                                    size_t errstr_size) {
        rd_kafka_event_t *ev = NULL;
        /* In slices, so that a stopping mm2 thread need not wait out an
         * unreachable cluster's timeout. */
        for (int waited = 0; !ev && waited < timeout_ms + 1000; waited += 100) {
                if (cancelled()) {
                        snprintf(errstr, errstr_size, "%s: stopping", what);
                        return NULL;
                }
                ev = rd_kafka_queue_poll(q, 100);
        }
        if (!ev) {
                snprintf(errstr, errstr_size, "%s: no answer within %d ms",
                         what, timeout_ms);
                return NULL;
        }
        if (rd_kafka_event_error(ev)) {
                snprintf(errstr, errstr_size, "%s: %s", what,
                         rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
                return NULL;
        }
        return ev;
}

/* The commit's metadata string, into a list element librdkafka frees. */
static void copy_metadata(rd_kafka_topic_partition_t       *dst,
                          const rd_kafka_topic_partition_t *src) {
        free(dst->metadata);
        dst->metadata      = NULL;
        dst->metadata_size = 0;
        if (src->metadata && src->metadata_size &&
            (dst->metadata = malloc(src->metadata_size))) {
                memcpy(dst->metadata, src->metadata, src->metadata_size);
                dst->metadata_size = src->metadata_size;
        }
}

aagw_err_t aagw_kafka_group_offsets(rd_kafka_t *admin, const char *group,
                                    rd_kafka_topic_partition_list_t *parts,
                                    int timeout_ms, char *errstr,
                                    size_t errstr_size) {
        rd_kafka_queue_t        *q = rd_kafka_queue_new(admin);
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(
            admin, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
        rd_kafka_ListConsumerGroupOffsets_t *req =
            rd_kafka_ListConsumerGroupOffsets_new(group, parts);
        char       e[256];
        aagw_err_t rc = AAGW_ERR_KAFKA;

        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, e, sizeof(e));
        rd_kafka_ListConsumerGroupOffsets(admin, &req, 1, o, q);
        rd_kafka_event_t *ev = admin_wait(
            q, timeout_ms, "ListConsumerGroupOffsets", errstr, errstr_size);
        if (ev) {
                size_t                          n = 0;
                const rd_kafka_group_result_t **gr =
                    rd_kafka_ListConsumerGroupOffsets_result_groups(
                        rd_kafka_event_ListConsumerGroupOffsets_result(ev), &n);
                const rd_kafka_error_t *ge =
                    n ? rd_kafka_group_result_error(gr[0]) : NULL;
                if (!n)
                        snprintf(errstr, errstr_size,
                                 "ListConsumerGroupOffsets: empty answer");
                else if (ge)
                        snprintf(errstr, errstr_size,
                                 "ListConsumerGroupOffsets %s: %s", group,
                                 rd_kafka_error_string(ge));
                else {
                        const rd_kafka_topic_partition_list_t *got =
                            rd_kafka_group_result_partitions(gr[0]);
                        for (int i = 0; i < parts->cnt; i++) {
                                rd_kafka_topic_partition_t *tp =
                                    &parts->elems[i];
                                tp->offset = RD_KAFKA_OFFSET_INVALID;
                                for (int k = 0; got && k < got->cnt; k++)
                                        if (got->elems[k].partition ==
                                                tp->partition &&
                                            !strcmp(got->elems[k].topic,
                                                    tp->topic)) {
                                                tp->offset =
                                                    got->elems[k].offset;
                                                tp->err = got->elems[k].err;
                                                copy_metadata(tp,
                                                              &got->elems[k]);
                                        }
                        }
                        rc = AAGW_OK;
                }
                rd_kafka_event_destroy(ev);
        }
        rd_kafka_ListConsumerGroupOffsets_destroy(req);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        return rc;
}

aagw_err_t aagw_kafka_group_commit(rd_kafka_t *admin, const char *group,
                                   const rd_kafka_topic_partition_list_t *parts,
                                   int timeout_ms, char *errstr,
                                   size_t errstr_size) {
        rd_kafka_queue_t        *q = rd_kafka_queue_new(admin);
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(
            admin, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS);
        rd_kafka_AlterConsumerGroupOffsets_t *req =
            rd_kafka_AlterConsumerGroupOffsets_new(group, parts);
        char       e[256];
        aagw_err_t rc = AAGW_ERR_KAFKA;

        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, e, sizeof(e));
        rd_kafka_AlterConsumerGroupOffsets(admin, &req, 1, o, q);
        rd_kafka_event_t *ev = admin_wait(
            q, timeout_ms, "AlterConsumerGroupOffsets", errstr, errstr_size);
        if (ev) {
                size_t                          n = 0;
                const rd_kafka_group_result_t **gr =
                    rd_kafka_AlterConsumerGroupOffsets_result_groups(
                        rd_kafka_event_AlterConsumerGroupOffsets_result(ev),
                        &n);
                const rd_kafka_error_t *ge =
                    n ? rd_kafka_group_result_error(gr[0]) : NULL;
                const rd_kafka_topic_partition_list_t *got =
                    n ? rd_kafka_group_result_partitions(gr[0]) : NULL;
                rc = AAGW_OK;
                if (!n || ge) {
                        snprintf(errstr, errstr_size,
                                 "AlterConsumerGroupOffsets %s: %s", group,
                                 ge ? rd_kafka_error_string(ge)
                                    : "empty answer");
                        rc = AAGW_ERR_KAFKA;
                }
                for (int i = 0; rc == AAGW_OK && got && i < got->cnt; i++)
                        if (got->elems[i].err) {
                                snprintf(errstr, errstr_size,
                                         "commit %s [%d] for group %s: %s "
                                         "(a group with active members "
                                         "refuses it)",
                                         got->elems[i].topic,
                                         (int)got->elems[i].partition, group,
                                         rd_kafka_err2str(got->elems[i].err));
                                rc = AAGW_ERR_KAFKA;
                        }
                rd_kafka_event_destroy(ev);
        }
        rd_kafka_AlterConsumerGroupOffsets_destroy(req);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        return rc;
}

/* ------------------------------------------------------- MEMBERS PROBE -- */

int aagw_kafka_group_members_probe(const char        *bootstraps,
                                   const char *const *props, size_t prop_cnt,
                                   const char *group, int timeout_ms) {
        char             err[512];
        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(bootstraps, "probe", err, sizeof(err));
        rd_kafka_t *rk;

        if (!conf || aagw_kafka_conf_apply(conf, "admin", props, prop_cnt, err,
                                           sizeof(err))) {
                printf("error %s\n", err);
                return 1;
        }
        if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
                printf("error %s\n", err);
                return 1;
        }
        rd_kafka_queue_t        *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(
            rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, err,
                                                  sizeof(err));
        const char *groups[] = {group};
        rd_kafka_DescribeConsumerGroups(rk, groups, 1, o, q);
        rd_kafka_event_t *ev = admin_wait(
            q, timeout_ms, "DescribeConsumerGroups", err, sizeof(err));
        if (!ev) {
                printf("unsupported %s\n", err);
                fflush(stdout);
                _exit(0); /* the handle may hang: do not destroy it */
        }
        size_t                                      n = 0;
        const rd_kafka_ConsumerGroupDescription_t **d =
            rd_kafka_DescribeConsumerGroups_result_groups(
                rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
        const rd_kafka_error_t *ge =
            n ? rd_kafka_ConsumerGroupDescription_error(d[0]) : NULL;
        if (!n || ge)
                printf("unsupported %s\n",
                       ge ? rd_kafka_error_string(ge) : "empty answer");
        else if (rd_kafka_ConsumerGroupDescription_state(d[0]) ==
                 RD_KAFKA_CONSUMER_GROUP_STATE_UNKNOWN)
                printf("unsupported group state unknown\n");
        else
                printf("members %zu\n",
                       rd_kafka_ConsumerGroupDescription_member_count(d[0]));
        fflush(stdout);
        _exit(0);
}

/* Write 'len' bytes of 'p' to 'fd' without dying of SIGPIPE if the reader
 * is gone (the signal is blocked in this thread for the write, and a
 * pending one taken back).  false if not everything was written. */
static bool write_all_quiet(int fd, const char *p, size_t len) {
        sigset_t        pipe_set, old;
        struct timespec zero = {0, 0};
        bool            ok   = true;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        while (len) {
                ssize_t w = write(fd, p, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        ok = false;
                        break;
                }
                p += w;
                len -= (size_t)w;
        }
        if (!ok && errno == EPIPE)
                while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
                        ;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return ok;
}

/*
 * Run 'argv' with the client properties on its stdin and its stdout to a
 * pipe; collect up to 'size' - 1 bytes until EOF or 'timeout_ms', then
 * SIGKILL and reap it.  The properties (NAME NUL VALUE NUL ...) go
 * through the pipe, never the command line: argv is world-readable in
 * /proc/PID/cmdline and ps, and the properties hold passwords.
 */
static void run_child(const char *self_exe, const char **argv,
                      const char *const *props, size_t prop_cnt, char *buf,
                      size_t size, int timeout_ms) {
        int    fds[2], in[2];
        size_t len = 0;
        pid_t  pid;

        buf[0] = '\0';
        /* Close-on-exec: a child that another thread forks meanwhile must
         * not inherit them (a stray write end would keep the probe from
         * seeing the end of its stdin).  dup2() clears the flag on 0, 1. */
        if (pipe2(fds, O_CLOEXEC))
                return;
        if (pipe2(in, O_CLOEXEC)) {
                close(fds[0]);
                close(fds[1]);
                return;
        }
        pid = fork();
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(fds[1], 1);
                close(in[0]);
                close(in[1]);
                close(fds[0]);
                close(fds[1]);
                execv(self_exe, (char *const *)argv);
                _exit(127);
        }
        close(fds[1]);
        close(in[0]);
        if (pid < 0) {
                close(fds[0]);
                close(in[1]);
                return;
        }
        /* The child reads every property before it does anything else. */
        for (size_t i = 0; i < 2 * prop_cnt; i++)
                if (!write_all_quiet(in[1], props[i], strlen(props[i]) + 1))
                        break;
        close(in[1]);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                fd_set         rs;
                struct timeval tv = {0, 100000};
                FD_ZERO(&rs);
                FD_SET(fds[0], &rs);
                if (select(fds[0] + 1, &rs, NULL, NULL, &tv) > 0) {
                        ssize_t r = read(fds[0], buf + len, size - 1 - len);
                        if (r <= 0)
                                break;
                        len += (size_t)r;
                        if (len == size - 1)
                                break;
                }
                clock_gettime(CLOCK_MONOTONIC, &t);
                if ((t.tv_sec - t0.tv_sec) * 1000 +
                            (t.tv_nsec - t0.tv_nsec) / 1000000 >
                        timeout_ms + 3000 ||
                    cancelled())
                        break;
        }
        buf[len] = '\0';
        close(fds[0]);
        kill(pid, SIGKILL);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
}

int aagw_kafka_list_groups_probe(const char        *bootstraps,
                                 const char *const *props, size_t prop_cnt,
                                 int timeout_ms) {
        char             err[512];
        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(bootstraps, "probe", err, sizeof(err));
        rd_kafka_t *rk;

        if (!conf ||
            aagw_kafka_conf_apply(conf, "admin", props, prop_cnt, err,
                                  sizeof(err)) ||
            !(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
                printf("unsupported %s\n", err);
                return 1;
        }
        rd_kafka_queue_t        *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o =
            rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, err,
                                                  sizeof(err));
        rd_kafka_ListConsumerGroups(rk, o, q);
        rd_kafka_event_t *ev =
            admin_wait(q, timeout_ms, "ListConsumerGroups", err, sizeof(err));
        size_t                                      cnt = 0, nerr = 0;
        const rd_kafka_ListConsumerGroups_result_t *r =
            ev ? rd_kafka_event_ListConsumerGroups_result(ev) : NULL;
        const rd_kafka_ConsumerGroupListing_t **ls =
            r ? rd_kafka_ListConsumerGroups_result_valid(r, &cnt) : NULL;
        const rd_kafka_error_t **errs =
            r ? rd_kafka_ListConsumerGroups_result_errors(r, &nerr) : NULL;
        if (!ev)
                printf("unsupported %s\n", err);
        else if (nerr && !cnt)
                printf("unsupported ListConsumerGroups: %s\n",
                       rd_kafka_error_string(errs[0]));
        else {
                printf("groups %zu\n", cnt);
                for (size_t i = 0; i < cnt; i++)
                        printf("%s\n",
                               rd_kafka_ConsumerGroupListing_group_id(ls[i]));
        }
        fflush(stdout);
        _exit(0); /* the handle may be broken: do not destroy it */
}

aagw_err_t aagw_kafka_list_groups(const char *self_exe, const char *bootstraps,
                                  const char *const *props, size_t prop_cnt,
                                  int timeout_ms, char ***groups, size_t *cnt,
                                  char *errstr, size_t errstr_size) {
        char         tmo[32], *buf = malloc(65536);
        const char **argv = calloc(8, sizeof(*argv));
        size_t       a = 0, n = 0;

        *groups = NULL;
        *cnt    = 0;
        if (!buf || !argv) {
                free(buf);
                free(argv);
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        snprintf(tmo, sizeof(tmo), "%d", timeout_ms);
        argv[a++] = self_exe;
        argv[a++] = "offsets";
        argv[a++] = "probe-groups";
        argv[a++] = bootstraps;
        argv[a++] = tmo;
        argv[a]   = NULL;
        run_child(self_exe, argv, props, prop_cnt, buf, 65536, timeout_ms);
        free(argv);
        if (strncmp(buf, "groups ", 7)) {
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(errstr, errstr_size, "%s",
                         !strncmp(buf, "unsupported ", 12)
                             ? buf + 12
                             : "no answer (the call hangs or aborts on some "
                               "clusters)");
                free(buf);
                return AAGW_ERR_UNSUPPORTED;
        }
        size_t want = strtoul(buf + 7, NULL, 10);
        char **v    = calloc(want + 1, sizeof(*v));
        char  *line = strchr(buf, '\n');
        while (v && line && n < want) {
                char *end = strchr(line + 1, '\n');
                if (!end)
                        break; /* cut off: not a whole line */
                *end   = '\0';
                v[n++] = strdup(line + 1);
                line   = end;
        }
        free(buf);
        *groups = v;
        *cnt    = n;
        return AAGW_OK;
}

aagw_err_t aagw_kafka_group_members(const char        *self_exe,
                                    const char        *bootstraps,
                                    const char *const *props, size_t prop_cnt,
                                    const char *group, int timeout_ms,
                                    int *members, char *errstr,
                                    size_t errstr_size) {
        char         buf[1024], tmo[32];
        const char **argv = calloc(8, sizeof(*argv));
        size_t       a    = 0;

        if (!argv) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        snprintf(tmo, sizeof(tmo), "%d", timeout_ms);
        argv[a++] = self_exe;
        argv[a++] = "offsets";
        argv[a++] = "probe-group";
        argv[a++] = bootstraps;
        argv[a++] = group;
        argv[a++] = tmo;
        argv[a]   = NULL;
        run_child(self_exe, argv, props, prop_cnt, buf, sizeof(buf),
                  timeout_ms);
        free(argv);
        buf[strcspn(buf, "\n")] = '\0';
        if (!strncmp(buf, "members ", 8)) {
                *members = atoi(buf + 8);
                return AAGW_OK;
        }
        if (!strncmp(buf, "unsupported ", 12)) {
                snprintf(errstr, errstr_size, "DescribeConsumerGroups: %s",
                         buf + 12);
                return AAGW_ERR_UNSUPPORTED;
        }
        snprintf(errstr, errstr_size,
                 "DescribeConsumerGroups gave no answer within %d ms%s%.200s "
                 "(the call hangs or aborts on some clusters, the embedded "
                 "one among them)",
                 timeout_ms, buf[0] ? ": " : "", buf);
        return AAGW_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------ THE CHILD -- */

/* Read NAME NUL VALUE NUL ... from stdin to EOF (the parent's pipe). */
static char **read_props(size_t *pairs) {
        char  *buf = NULL, **kv = NULL;
        size_t len = 0, cap = 0, n = 0;

        *pairs = 0;
        for (;;) {
                if (len == cap) {
                        char *nb = realloc(buf, cap ? cap * 2 : 4096);
                        if (!nb)
                                goto fail;
                        buf = nb;
                        cap = cap ? cap * 2 : 4096;
                }
                ssize_t r = read(0, buf + len, cap - len);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        goto fail;
                if (r == 0)
                        break;
                len += (size_t)r;
        }
        for (size_t i = 0; i < len; i++)
                n += buf[i] == '\0';
        if (n % 2 || (len && buf[len - 1]))
                goto fail; /* cut off */
        if (!(kv = calloc(n + 1, sizeof(*kv))))
                goto fail;
        for (size_t i = 0, at = 0; i < n; i++) {
                kv[i] = buf + at; /* into buf, which stays allocated */
                at += strlen(buf + at) + 1;
        }
        *pairs = n / 2;
        if (!n)
                free(buf);
        return kv;
fail:
        free(buf);
        free(kv);
        return NULL;
}

int aagw_kafka_probe_main(int argc, char **argv) {
        size_t pairs;
        char **kv;

        if (argc < 2)
                return 2;
        if (!(kv = read_props(&pairs))) {
                printf("unsupported cannot read the client properties\n");
                return 1;
        }
        /* probe-group BOOTSTRAPS GROUP TIMEOUT_MS */
        if (!strcmp(argv[1], "probe-group") && argc == 5)
                return aagw_kafka_group_members_probe(
                    argv[2], (const char *const *)kv, pairs, argv[3],
                    atoi(argv[4]));
        /* probe-groups BOOTSTRAPS TIMEOUT_MS */
        if (!strcmp(argv[1], "probe-groups") && argc == 4)
                return aagw_kafka_list_groups_probe(
                    argv[2], (const char *const *)kv, pairs, atoi(argv[3]));
        return 2;
}
