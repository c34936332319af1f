/*
 * gateway/engine.c: wires config, state and replication flows together and
 * runs them until a stop signal, --duration, or a flow failing closed.
 */
#include "gateway_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "aagw_dedup.h"
#include "aagw_replicator.h"

struct engine {
        aagw_config_t      *cfg;
        aagw_store_t       *store;
        aagw_repl_policy_t *policy;
        aagw_id_rule_t     *default_rule;
        aagw_id_rule_t    **topic_rules; /* per unify.topics.* instance */
        size_t              ntopic_rules;
        aagw_flow_t        *flows[GW_MAX_FLOWS];
        size_t              nflows;
        /* flows with replication.per_flow lists; NULL: e->policy */
        aagw_repl_policy_t *flow_pols[GW_MAX_FLOWS];
        aagw_unify_t       *unify[AAGW_SITES_MAX];
        aagw_decider_t     *deciders[AAGW_SITES_MAX];
        size_t              nunify;
        struct gw_admin    *admin;
        char                admin_file[4096]; /* "" when not written */
        bool                paused[GW_MAX_FLOWS]; /* through the endpoint */
        char                pause_file[4200];
        struct aagw_scale_out scale; /* scale_out.*, for every stage */
        char                  member[160];
        char                  mode[32]; /* gateway.mode's word, for /status */
        aagw_members_t       *members; /* the owner groups, for /status */
        /* Test hook: AAGW_TEST_POS_SAVE_FAIL (see pos_save()); NULL
         * unless set. */
        const char         *pos_save_fail;
        /* cfg's values as typed fields (aagw_config_settings()) */
        const struct aagw_settings *set;
};

/* ------------------------------------------------------- FLOW CALLBACKS -- */

static const aagw_id_rule_t *id_rule_for(void *opaque, const char *topic) {
        struct engine *e = opaque;
        for (size_t i = 0; i < e->ntopic_rules; i++)
                if (e->topic_rules[i] &&
                    !strcmp(e->set->unify.topics[i].name, topic))
                        return e->topic_rules[i];
        return e->default_rule;
}

/* Cluster 'alias's settings.  The plan and the site name configured
 * clusters only (validated); an empty entry, no bootstraps and no
 * properties, stands in for any other, as a missing key read before. */
static const struct aagw_cluster_settings *cluster_of(const struct engine *e,
                                                      const char *alias) {
        static const struct aagw_cluster_settings none;
        const struct aagw_cluster_settings       *c =
            aagw_settings_cluster(e->set, alias);
        return c ? c : &none;
}

static int pos_load(void *opaque, const char *scope, const char *topic,
                    int32_t partition, int64_t *next, int64_t *out_next) {
        struct engine  *e = opaque;
        struct aagw_pos pos;
        char            err[512];
        aagw_err_t      rc = aagw_store_pos_get(e->store, scope, topic,
                                                partition, &pos, err,
                                                sizeof(err));
        if (rc == AAGW_ERR_NOENT)
                return -1;
        if (rc) {
                aagw_log(AAGW_LOG_ERROR, "STATE", "%s", err);
                return -1;
        }
        *next     = pos.next;
        *out_next = pos.out_next;
        return 0;
}

/* Store a flow's positions.  A failure fails the flow closed (its
 * flow_save_positions()).  Test hook: while the file named by the environment
 * variable AAGW_TEST_POS_SAVE_FAIL (read once, at start) exists, every
 * save fails as one into a state dir that refuses writes would, so that
 * a test reaches the flow's own failure path (tests/replication/
 * test_state_full.c) without filling a file system, which takes root and
 * a write larger than what RocksDB preallocated for its log. */
static int pos_save(void *opaque, const char *scope,
                    const struct aagw_flow_pos *p, size_t cnt) {
        struct engine         *e = opaque;
        struct aagw_pos_entry *ent;
        char                   err[512];
        int                    rc = -1;

        if (e->pos_save_fail && access(e->pos_save_fail, F_OK) == 0) {
                aagw_log(AAGW_LOG_ERROR, "STATE",
                         "saving positions: refused (test hook: %s exists)",
                         e->pos_save_fail);
                return -1;
        }
        if (!(ent = calloc(cnt, sizeof(*ent))))
                return -1;
        for (size_t i = 0; i < cnt; i++)
                ent[i] = (struct aagw_pos_entry){
                    scope, p[i].topic, p[i].partition,
                    {p[i].next, p[i].out_next}};
        if (aagw_store_pos_put(e->store, ent, cnt, err, sizeof(err)) == AAGW_OK)
                rc = 0;
        else
                aagw_log(AAGW_LOG_ERROR, "STATE", "saving positions: %s", err);
        free(ent);
        return rc;
}

/* ---------------------------------------------------------------- SETUP -- */

static void *flow_destroy_thread(void *arg) {
        aagw_flow_destroy(arg, 10000);
        return NULL;
}

static void *unify_destroy_thread(void *arg) {
        aagw_unify_destroy(arg);
        return NULL;
}

/* Destroy the flows and unify stages at once, one thread each: each
 * closes several Kafka clients, and a close can take a second (a broker
 * thread that missed its wake-up); one stage after another, that was a
 * stop of many seconds. */
static void destroy_stages(struct engine *e) {
        size_t    n = e->nflows + e->nunify;
        pthread_t t[GW_MAX_FLOWS * 2];
        bool      own[GW_MAX_FLOWS * 2] = {false};

        for (size_t i = 0; i < n && i < GW_MAX_FLOWS * 2; i++) {
                bool flow = i < e->nflows;
                void *arg = flow ? (void *)e->flows[i]
                                 : (void *)e->unify[i - e->nflows];
                own[i] = !pthread_create(&t[i], NULL,
                                         flow ? flow_destroy_thread
                                              : unify_destroy_thread,
                                         arg);
        }
        for (size_t i = 0; i < n; i++) {
                if (i < GW_MAX_FLOWS * 2 && own[i])
                        pthread_join(t[i], NULL);
                else if (i < e->nflows)
                        aagw_flow_destroy(e->flows[i], 10000);
                else
                        aagw_unify_destroy(e->unify[i - e->nflows]);
        }
}

static void engine_free(struct engine *e) {
        /* The endpoint reads the flows: it goes first. */
        gw_admin_stop(e->admin);
        e->admin = NULL;
        aagw_members_destroy(e->members);
        e->members = NULL;
        if (e->admin_file[0])
                unlink(e->admin_file);
        for (size_t i = 0; i < e->nflows; i++)
                aagw_flow_stop(e->flows[i]);
        for (size_t i = 0; i < e->nunify; i++)
                aagw_unify_stop(e->unify[i]);
        destroy_stages(e);
        for (size_t i = 0; i < e->nunify; i++)
                aagw_decider_destroy(e->deciders[i]);
        for (size_t i = 0; i < GW_MAX_FLOWS; i++)
                aagw_repl_policy_destroy(e->flow_pols[i]);
        for (size_t i = 0; i < e->ntopic_rules; i++)
                aagw_id_rule_destroy(e->topic_rules[i]);
        free(e->topic_rules);
        aagw_id_rule_destroy(e->default_rule);
        aagw_repl_policy_destroy(e->policy);
        aagw_store_close(e->store);
}

static int add_flow(struct engine *e, const char *src, const char *dst,
                    char *err, size_t errsize) {
        const aagw_config_t                *cfg = e->cfg;
        const struct aagw_settings         *s   = e->set;
        const struct aagw_cluster_settings *sc  = cluster_of(e, src);
        const struct aagw_cluster_settings *tc  = cluster_of(e, dst);
        struct aagw_flow_conf               fc;
        unsigned                            flags = 0;

        if (!s->replication.loop_check_topics)
                flags |= AAGW_VERDICT_F_NO_TOPIC_CHECK;
        if (!s->replication.loop_check_headers)
                flags |= AAGW_VERDICT_F_NO_HEADER_CHECK;
        memset(&fc, 0, sizeof(fc));
        fc.gateway_id        = s->gateway.id;
        fc.site              = s->gateway.site;
        fc.source            = src;
        fc.target            = dst;
        fc.source_bootstraps = sc->bootstrap_servers;
        fc.target_bootstraps = tc->bootstrap_servers;
        fc.source_prop_cnt   = sc->properties.n;
        fc.source_props      = sc->properties.kv;
        fc.fetch_window_fixed =
            s->replication.fetch_window == GW_FETCH_WINDOW_FIXED;
        fc.fetch_connections = s->replication.fetch_connections; /* auto: 0 */
        fc.target_prop_cnt   = tc->properties.n;
        fc.target_props      = tc->properties.kv;
        fc.policy            = e->policy;
        if (gw_flow_has_own_topics(cfg, src, dst)) {
                if (!(e->flow_pols[e->nflows] =
                          gw_policy_new_flow(cfg, src, dst, err, errsize)))
                        return -1;
                fc.policy = e->flow_pols[e->nflows];
        }
        fc.header_prefix = s->replication.header_prefix;
        fc.verdict_flags = flags;
        fc.refresh_ms    = (int)s->replication.refresh_topics_interval_ms;
        fc.id_rule_for   = id_rule_for;
        fc.pos_load      = pos_load;
        fc.pos_save      = pos_save;
        fc.opaque        = e;
        /* The MM2-format topics of this flow. */
        fc.mm2.heartbeat_ms  = (int)s->mm2.heartbeats_interval_ms;
        fc.mm2.checkpoint_ms = (int)s->mm2.checkpoints_interval_ms;
        fc.mm2.syncs         = s->mm2.offset_syncs;
        fc.mm2.syncs_at_target =
            s->mm2.offset_syncs_location == GW_SYNCS_AT_TARGET;
        fc.mm2.sync_max_per_s     = (int)s->mm2.offset_syncs_max_rate;
        fc.mm2.group_cnt          = s->replication.groups.n;
        fc.mm2.groups             = s->replication.groups.items;
        fc.mm2.sync_group_offsets = s->mm2.sync_group_offsets;
        fc.mm2.truncation_fail =
            s->replication.on_truncation == GW_TRUNCATION_FAIL;
        fc.mm2.takeover              = s->mm2.takeover;
        fc.scale_out                 = &e->scale;
        fc.topics.replication_factor = (int)s->replication.factor;
        fc.topics.sync_configs       = s->replication.sync_topic_configs;
        fc.topics.configs_interval_ms =
            (int)s->replication.sync_topic_configs_interval_ms;
        fc.topics.sync_acls = s->replication.sync_topic_acls;
        fc.topics.acls_interval_ms =
            (int)s->replication.sync_topic_acls_interval_ms;
        aagw_flow_t *f = aagw_flow_new(&fc, err, errsize);
        if (!f)
                return -1;
        e->flows[e->nflows++] = f;
        /* Paused through the endpoint before a restart: paused before it
         * reads anything now. */
        if (e->paused[e->nflows - 1]) {
                aagw_flow_pause(f, true);
                aagw_log(AAGW_LOG_WARN, "RUN",
                         "flow %s stays paused: it was paused through the "
                         "admin endpoint before the restart (%s); resume it "
                         "with POST /flows/%s-%s/resume",
                         aagw_flow_name(f), e->pause_file, src, dst);
        }
        return aagw_flow_start(f, err, errsize) == AAGW_OK ? 0 : -1;
}

/* How logical topic 'name' is unified: unify.topics.T.* over unify.*. */
static int topic_conf(void *opaque, const char *name,
                      struct aagw_unify_topic *tc, char *errstr,
                      size_t errstr_size) {
        struct engine                          *e = opaque;
        const struct aagw_unify_topic_settings *t =
            aagw_settings_unify_topic(e->set, name);
        enum gw_unify_mode mode;
        char               err[256];
        const char        *ek;

        mode = gw_unify_topic(e->cfg, name, tc->out, sizeof(tc->out));
        if (mode == GW_UNIFY_OFF) {
                tc->mode = AAGW_UNIFY_OFF;
                return 0;
        }
        tc->mode = mode == GW_UNIFY_LWW ? AAGW_UNIFY_LWW : AAGW_UNIFY_DEDUP;
        if (!tc->out[0]) {
                snprintf(errstr, errstr_size,
                         "%s: the unified topic name would exceed %d bytes; "
                         "set unify.topics.%s.output",
                         name, AAGW_TOPIC_MAX, name);
                return -1;
        }
        tc->id_rule = id_rule_for(e, name);
        if (!(ek = t ? t->entity_key : NULL))
                ek = e->set->unify.entity_key;
        if (ek && strcmp(ek, "key") &&
            !(tc->ekey_rule = aagw_id_rule_new(ek, err, sizeof(err)))) {
                snprintf(errstr, errstr_size, "unify.topics.%s.entity_key: %s",
                         name, err);
                return -1;
        }
        return 0;
}

/* The unify stage of 'site': its Kafka side (replicator/unify.c) with the
 * dedup decider (dedup/decider.c) behind it. */
static int add_unify(struct engine *e, const char *site, char *err,
                     size_t errsize) {
        const struct aagw_settings         *s = e->set;
        const struct aagw_cluster_settings *c = cluster_of(e, site);
        struct aagw_unify_conf              uc;
        struct aagw_decider_conf            dc = {.store = e->store,
                                                  .site  = site,
                                                  .audit_accepted =
                                                      s->unify.audit_accepted};

        aagw_decider_t *d = aagw_decider_new(&dc, err, errsize);
        if (!d)
                return -1;
        memset(&uc, 0, sizeof(uc));
        uc.gateway_id    = s->gateway.id;
        uc.site          = site;
        uc.bootstraps    = c->bootstrap_servers;
        uc.prop_cnt      = c->properties.n;
        uc.props         = c->properties.kv;
        uc.policy        = e->policy;
        uc.header_prefix = s->replication.header_prefix;
        if (!s->replication.loop_check_headers)
                uc.verdict_flags |= AAGW_VERDICT_F_NO_HEADER_CHECK;
        uc.refresh_ms   = (int)s->replication.refresh_topics_interval_ms;
        uc.topic_conf   = topic_conf;
        uc.opaque       = e;
        uc.state        = &aagw_decider_ops;
        uc.state_opaque = d;
        uc.scale_out    = &e->scale;
        uc.window_ms    = s->unify.window_ms;
        aagw_unify_t *u = aagw_unify_new(&uc, err, errsize);
        if (!u) {
                aagw_decider_destroy(d);
                return -1;
        }
        e->deciders[e->nunify] = d;
        e->unify[e->nunify++]  = u;
        return aagw_unify_start(u, err, errsize);
}

/* scale_out.*: the member name (by default the host name and a hash of
 * the state directory, so two processes on one host differ), and whether
 * the site's cluster fences the way scale-out needs (not the mock). */
static int scale_out_setup(struct engine *e, struct aagw_statedir *sd,
                           char *err, size_t errsize) {
        const struct aagw_settings         *s    = e->set;
        const char                         *site = s->gateway.site;
        const char                         *name = s->scale_out.member;
        const struct aagw_cluster_settings *c    = cluster_of(e, site);
        char                                why[700], host[128] = "aagw";
        int                                 rc;

        memset(&e->scale, 0, sizeof(e->scale));
        if (!s->scale_out.enabled)
                return 0;
        if (name) {
                snprintf(e->member, sizeof(e->member), "%s", name);
        } else {
                const char *path = aagw_statedir_path(sd);
                char       *real = realpath(path, NULL);
                const char *p    = real ? real : path;

                if (gethostname(host, sizeof(host)) || !*host)
                        snprintf(host, sizeof(host), "aagw");
                host[strcspn(host, ".")] = '\0';
                snprintf(e->member, sizeof(e->member), "%s-%08x", host,
                         (unsigned)XXH32(p, strlen(p), 0));
                free(real);
        }
        e->scale.enabled            = true;
        e->scale.member             = e->member;
        e->scale.work_partitions    = (int32_t)s->scale_out.work_partitions;
        e->scale.session_timeout_ms = (int)s->scale_out.session_timeout_ms;
        e->scale.txn_timeout_ms     = (int)s->scale_out.transaction_timeout_ms;
        e->scale.commit_interval_ms = (int)s->scale_out.commit_interval_ms;
        e->scale.standby            = s->scale_out.standby;
        e->scale.route              = s->scale_out.route;
        e->scale.cooperative =
            s->scale_out.rebalance == GW_REBALANCE_COOPERATIVE;

        rc = aagw_scale_out_check(c->bootstrap_servers, c->properties.kv,
                                  c->properties.n, s->gateway.id, site, why,
                                  sizeof(why));
        if (rc == 1) {
                aagw_log(AAGW_LOG_INFO, "RUN",
                         "scale-out: member %s of site %s (gateway %s); "
                         "cluster %s enforces transactions",
                         e->member, site, s->gateway.id, site);
                return 0;
        }
        if (rc == 0)
                snprintf(err, errsize,
                         "scale_out.enabled: cluster %s cannot fence a "
                         "stalled process (%s); scale-out needs Apache Kafka "
                         "with transactions. Run one process for the site "
                         "without scale_out instead",
                         site, why);
        else
                snprintf(err, errsize,
                         "scale_out.enabled: cannot check cluster %s's "
                         "transactions: %s",
                         site, why);
        return -1;
}

/* The view of the site's owner groups for /status and /metrics: the
 * unify stage's and every inbound flow's, named by the stages
 * themselves. */
static int members_start(struct engine *e, char *err, size_t errsize) {
        const struct aagw_cluster_settings *c =
            cluster_of(e, e->set->gateway.site);
        char                     stages[GW_MAX_FLOWS + 1][160];
        const char              *np[GW_MAX_FLOWS + 1], *sp[GW_MAX_FLOWS + 1];
        struct aagw_members_conf mc = {0};

        for (size_t i = 0; i < e->nflows && mc.n < GW_MAX_FLOWS; i++) {
                const char *g = aagw_flow_owner_group(e->flows[i]);
                if (!*g)
                        continue;
                np[mc.n]   = g;
                sp[mc.n++] = aagw_flow_name(e->flows[i]);
        }
        for (size_t i = 0; i < e->nunify && mc.n < GW_MAX_FLOWS + 1; i++) {
                const char *g = aagw_unify_owner_group(e->unify[i]);
                if (!*g)
                        continue;
                np[mc.n] = g;
                snprintf(stages[mc.n], sizeof(stages[mc.n]), "unify@%s",
                         aagw_unify_site(e->unify[i]));
                sp[mc.n] = stages[mc.n];
                mc.n++;
        }
        if (!mc.n)
                return 0;
        mc.bootstraps  = c->bootstrap_servers;
        mc.prop_cnt    = c->properties.n;
        mc.props       = c->properties.kv;
        mc.groups      = np;
        mc.stages      = sp;
        mc.interval_ms = 5000;
        e->members     = aagw_members_new(&mc, err, errsize);
        return e->members ? 0 : -1;
}

/* Start the admin endpoint and publish its address in the state dir
 * (written to a temporary file and renamed, so readers never see half). */
static int admin_start(struct engine *e, struct aagw_statedir *sd,
                       const struct gw_admin_conf *conf, char *err,
                       size_t errsize) {
        const struct aagw_settings *s = e->set;
        struct gw_admin_view        v = {
                   .gateway_id = s->gateway.id,
                   .site       = s->gateway.site,
                   .mode    = aagw_settings_word(s, &s->gateway.mode, e->mode,
                                                 sizeof(e->mode)),
                   .started = time(NULL),
                   .flows   = e->flows,
                   .nflows  = e->nflows,
                   .unify   = e->unify,
                   .nunify  = e->nunify,
                   .paused  = e->paused,
                   .pause_file = e->pause_file,
                   .member     = e->scale.enabled ? e->member : NULL,
                   .members    = e->members,
        };
        char  tmp[4200];
        FILE *f;

        e->admin = gw_admin_start(conf, &v, err, errsize);
        if (!e->admin)
                return -1;
        aagw_log(AAGW_LOG_INFO, "ADMIN", "admin endpoint at %s://%s/ (%s%s)",
                 gw_admin_is_tls(e->admin) ? "https" : "http",
                 gw_admin_addr(e->admin),
                 conf->token ? "bearer token required" : "no token",
                 conf->tls && conf->tls->client_ca
                     ? ", client certificates required"
                     : "");
        /* Before the address file: whoever waits for that file finds
         * this line in the log. */
        if (gw_admin_health_addr(e->admin))
                aagw_log(AAGW_LOG_INFO, "ADMIN",
                         "health listener at http://%s/ (/healthz and "
                         "/metrics only)",
                         gw_admin_health_addr(e->admin));
        snprintf(e->admin_file, sizeof(e->admin_file), "%s/%s",
                 aagw_statedir_path(sd), GW_ADMIN_ADDR_FILE);
        snprintf(tmp, sizeof(tmp), "%s.tmp", e->admin_file);
        /* "HOST:PORT", as `aagw status --admin` takes it; with TLS
         * "https://HOST:PORT", so that `aagw status` knows. */
        if (!(f = fopen(tmp, "w")) ||
            fprintf(f, "%s%s\n", gw_admin_is_tls(e->admin) ? "https://" : "",
                    gw_admin_addr(e->admin)) < 0 ||
            fclose(f) ||
            rename(tmp, e->admin_file)) {
                aagw_log(AAGW_LOG_WARN, "ADMIN", "cannot write %s: %s",
                         e->admin_file, strerror(errno));
                e->admin_file[0] = '\0';
        }
        return 0;
}

static void log_stats(struct engine *e) {
        for (size_t i = 0; i < e->nflows; i++) {
                struct aagw_flow_stats st;
                uint64_t               skipped = 0, rejected = 0;
                aagw_flow_stats(e->flows[i], &st);
                for (int k = 0; k < AAGW_SKIP_COUNT; k++)
                        skipped += st.skipped[k];
                for (int k = 0; k < AAGW_REASON_COUNT; k++)
                        rejected += st.rejected[k];
                aagw_log(AAGW_LOG_INFO, "STATS",
                         "%s %s: topics %d partitions %d in %" PRIu64
                         " out %" PRIu64 " skipped %" PRIu64
                         " rejected %" PRIu64 " dead-lettered %" PRIu64
                         " lag %" PRId64 " inflight %" PRId64,
                         aagw_flow_name(e->flows[i]),
                         aagw_flow_state_name(aagw_flow_state(e->flows[i])),
                         st.topics, st.partitions, st.records_in,
                         st.records_out, skipped, rejected, st.dead_lettered,
                         st.lag, st.inflight);
        }
        for (size_t i = 0; i < e->nunify; i++) {
                struct aagw_unify_stats st;
                aagw_unify_stats(e->unify[i], &st);
                aagw_log(AAGW_LOG_INFO, "STATS",
                         "unify@%s %s: topics %d inputs %d in %" PRIu64
                         " accepted %" PRIu64 " dropped %" PRIu64
                         " superseded %" PRIu64 " identical %" PRIu64
                         " rejected %" PRIu64 " out %" PRIu64
                         " recovered %" PRIu64 " inflight %" PRId64,
                         aagw_unify_site(e->unify[i]),
                         aagw_flow_state_name(aagw_unify_state(e->unify[i])),
                         st.topics, st.inputs, st.records_in, st.accepted,
                         st.dropped, st.superseded, st.identical, st.rejected,
                         st.records_out, st.recovered, st.inflight);
        }
}

/* Ask every flow to stop and wait (up to 'timeout_ms') until each has
 * drained and stored its positions: a running flow turns STOPPED only
 * once its thread is done. */
static void stop_flows(struct engine *e, int timeout_ms) {
        struct timespec nap = {0, 20 * 1000000L};
        int64_t         waited = 0;
        bool            busy   = true;

        for (size_t i = 0; i < e->nflows; i++)
                aagw_flow_stop(e->flows[i]);
        for (size_t i = 0; i < e->nunify; i++)
                aagw_unify_stop(e->unify[i]);
        while (busy && waited < timeout_ms) {
                busy = false;
                for (size_t i = 0; i < e->nflows; i++) {
                        aagw_flow_state_t st = aagw_flow_state(e->flows[i]);
                        busy |= st != AAGW_FLOW_STOPPED &&
                                st != AAGW_FLOW_FAILED;
                }
                for (size_t i = 0; i < e->nunify; i++) {
                        aagw_flow_state_t st = aagw_unify_state(e->unify[i]);
                        busy |= st != AAGW_FLOW_STOPPED &&
                                st != AAGW_FLOW_FAILED;
                }
                if (busy) {
                        nanosleep(&nap, NULL);
                        waited += 20;
                }
        }
}

/* Give 'hooks' their once-a-second look at the running engine; true when
 * they ask to stop. */
static bool hooks_tick(struct engine *e, const struct gw_engine_hooks *hooks,
                       bool signalled, int64_t *next_ms) {
        if (!hooks || !hooks->tick || aagw_mono_ms() < *next_ms)
                return false;
        struct gw_engine_view v = {
            .flows          = e->flows,
            .nflows         = e->nflows,
            .unify          = e->unify,
            .nunify         = e->nunify,
            .stop_requested = signalled,
        };
        bool stop = hooks->tick(hooks->opaque, &v);
        *next_ms  = aagw_mono_ms() + 1000;
        return stop;
}

/* A start step that failed because a stop signal came meanwhile (its
 * waits on Kafka gave up): a stop, not an error.  Sets *rc. */
static bool stopped_while_starting(int *rc) {
        if (!gw_stop_signal)
                return false;
        aagw_log(AAGW_LOG_INFO, "RUN", "stop requested while starting");
        *rc = EXIT_OK;
        return true;
}

int gw_engine_run(aagw_config_t *cfg, const struct gw_plan *plan,
                  struct aagw_statedir *sd, int duration_s,
                  const struct gw_engine_hooks *hooks,
                  struct gw_admin_conf *admin) {
        struct engine          e;
        struct aagw_store_opts so = {0};
        char                   err[1024];
        int                    rc = EXIT_RUNTIME;

        memset(&e, 0, sizeof(e));
        e.cfg       = cfg;
        e.set       = aagw_config_settings(cfg);
        /* A refused login is told by the bootstraps of the client that
         * met it. */
        aagw_access_reset();
        aagw_kafka_process_stop(gw_stop_signal != 0);
        gw_starting = 1;
        if (gw_stop_signal)
                aagw_kafka_process_stop(true);
        for (size_t i = 0; i < e.set->nclusters; i++)
                aagw_access_register(e.set->clusters[i].alias,
                                     e.set->clusters[i].bootstrap_servers);
        e.pos_save_fail = getenv("AAGW_TEST_POS_SAVE_FAIL");
        if (e.pos_save_fail && !*e.pos_save_fail)
                e.pos_save_fail = NULL;
        snprintf(e.pause_file, sizeof(e.pause_file), "%s/%s",
                 aagw_statedir_path(sd), GW_PAUSE_FILE);
        so.cache_mb     = (size_t)e.set->unify.cache_mb;
        so.window_ms    = e.set->unify.window_ms;
        so.filter_mb    = (size_t)e.set->unify.filter_mb;
        so.filter_exact = e.set->unify.filter == GW_FILTER_EXACT;
        if (!(e.store = aagw_store_open(sd, &so, err, sizeof(err)))) {
                gw_errorf("state store: %s", err);
                goto out;
        }
        if (!(e.policy = gw_policy_new(cfg, err, sizeof(err)))) {
                gw_errorf("replication policy: %s", err);
                rc = EXIT_USAGE;
                goto out;
        }
        if (!(e.default_rule =
                  aagw_id_rule_new(e.set->unify.id, err, sizeof(err)))) {
                gw_errorf("unify.id: %s", err);
                rc = EXIT_USAGE;
                goto out;
        }
        e.ntopic_rules = e.set->unify.ntopics;
        e.topic_rules  = calloc(e.ntopic_rules + 1, sizeof(*e.topic_rules));
        for (size_t i = 0; i < e.ntopic_rules; i++) {
                const struct aagw_unify_topic_settings *t =
                    &e.set->unify.topics[i];
                if (!t->id)
                        continue;
                if (!(e.topic_rules[i] =
                          aagw_id_rule_new(t->id, err, sizeof(err)))) {
                        gw_errorf("unify.topics.%s.id: %s", t->name, err);
                        rc = EXIT_USAGE;
                        goto out;
                }
        }
        {
                char        names[GW_MAX_FLOWS][300];
                const char *np[GW_MAX_FLOWS];
                for (size_t i = 0; i < plan->nflows && i < GW_MAX_FLOWS; i++) {
                        snprintf(names[i], sizeof(names[i]), "%s->%s",
                                 plan->flows[i].src, plan->flows[i].dst);
                        np[i] = names[i];
                }
                if (gw_pauses_load(e.pause_file, np, plan->nflows, e.paused,
                                   err, sizeof(err))) {
                        gw_errorf("paused flows: %s", err);
                        goto out;
                }
        }
        if (scale_out_setup(&e, sd, err, sizeof(err)) == -1) {
                if (stopped_while_starting(&rc))
                        goto out;
                gw_errorf("%s", err);
                rc = EXIT_USAGE;
                goto out;
        }
        for (size_t i = 0; i < plan->nflows; i++) {
                if (add_flow(&e, plan->flows[i].src, plan->flows[i].dst, err,
                             sizeof(err)) == -1) {
                        if (stopped_while_starting(&rc))
                                goto out;
                        gw_errorf("flow %s->%s: %s", plan->flows[i].src,
                                  plan->flows[i].dst, err);
                        goto out;
                }
        }
        if (gw_unify_wanted(cfg)) {
                const char *site = e.set->gateway.site;
                size_t      n    = e.set->nclusters;
                for (size_t i = 0; i < n && e.nunify < AAGW_SITES_MAX; i++) {
                        const char *a = e.set->clusters[i].alias;
                        if (site && strcmp(site, a))
                                continue;
                        if (add_unify(&e, a, err, sizeof(err)) == -1) {
                                if (stopped_while_starting(&rc))
                                        goto out;
                                gw_errorf("unify stage at %s: %s", a, err);
                                goto out;
                        }
                }
        }
        if (e.scale.enabled && members_start(&e, err, sizeof(err))) {
                if (stopped_while_starting(&rc))
                        goto out;
                gw_errorf("scale-out members view: %s", err);
                goto out;
        }
        if (admin && admin->fd != -1) {
                struct gw_admin_conf conf = *admin;
                /* admin_start() owns the sockets, even on failure */
                admin->fd = admin->health_fd = -1;
                if (admin_start(&e, sd, &conf, err, sizeof(err)) == -1) {
                        gw_errorf("admin endpoint: %s", err);
                        rc = EXIT_RUNTIME;
                        goto out;
                }
        }
        gw_starting = 0;
        aagw_log(AAGW_LOG_INFO, "RUN", "running %zu flow%s and %zu unify "
                                       "stage%s; stop with SIGINT or SIGTERM",
                 e.nflows, e.nflows == 1 ? "" : "s", e.nunify,
                 e.nunify == 1 ? "" : "s");

        time_t  start = time(NULL), last_stats = start;
        int64_t next_tick = 0;
        bool    with_tick = hooks && hooks->tick;
        rc                = EXIT_OK;
        for (;;) {
                bool signalled = gw_wait_stop(200);
                if (signalled && !with_tick)
                        break;
                if (signalled) {
                        /* The tick decides when to stop; gw_wait_stop()
                         * returns at once from now on, so nap here. */
                        struct timespec nap = {0, 200 * 1000000L};
                        nanosleep(&nap, NULL);
                }
                time_t now = time(NULL);
                bool   failed = false;
                for (size_t i = 0; i < e.nflows; i++)
                        failed |= aagw_flow_state(e.flows[i]) ==
                                  AAGW_FLOW_FAILED;
                for (size_t i = 0; i < e.nunify; i++)
                        failed |= aagw_unify_state(e.unify[i]) ==
                                  AAGW_FLOW_FAILED;
                if (failed) {
                        rc = EXIT_RUNTIME;
                        break;
                }
                if (duration_s > 0 && now - start >= duration_s)
                        break;
                if (hooks_tick(&e, hooks, signalled, &next_tick))
                        break;
                if (now - last_stats >= 10) {
                        log_stats(&e);
                        last_stats = now;
                }
        }
        aagw_log(AAGW_LOG_INFO, "RUN", "stopping: finishing in-flight "
                                       "records and storing positions");
        /* Waits on a Kafka answer (topic creation, metadata) give up now:
         * a cluster that is gone would hold them for seconds. */
        aagw_kafka_process_stop(true);
        /* The last figures once the flows drained: logged before, they
         * showed acknowledged records as still in flight. */
        stop_flows(&e, 15000);
        log_stats(&e);
        /* Records the target never acknowledged (it was down at the
         * stop) are a partial failure: exit 1.  Their positions were not
         * stored, so the next start copies them. */
        for (size_t i = 0; i < e.nflows; i++) {
                struct aagw_flow_stats st;
                aagw_flow_stats(e.flows[i], &st);
                if (st.inflight > 0) {
                        gw_errorf("flow %s: %" PRId64 " records not "
                                  "acknowledged by the target before the "
                                  "stop deadline; the next start replicates "
                                  "them",
                                  aagw_flow_name(e.flows[i]), st.inflight);
                        rc = EXIT_RUNTIME;
                }
        }
out:
        gw_starting = 0;
        if (admin && admin->fd != -1)
                close(admin->fd);
        if (admin && admin->health_fd != -1)
                close(admin->health_fd);
        if (admin)
                admin->fd = admin->health_fd = -1;
        engine_free(&e);
        if (rc == EXIT_OK)
                aagw_log(AAGW_LOG_INFO, "RUN", "stopped");
        return rc;
}

