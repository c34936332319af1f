/*
 * gateway/plan.c: which replication flows this process runs, and the
 * replication policy (per flow, with its own topic lists) a config makes.
 *
 * The topology comes from gateway.mode (or an explicit replication.flows
 * list, as MirrorMaker 2 writes "east->west"), and --site narrows it to the
 * flows whose target is that site: one process per data center, each
 * writing only to its local cluster, is the production shape (a process
 * then never produces across the WAN, only consumes).
 */
#include "gateway_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aliases are at most 64 bytes (config validation); copy with an explicit
 * bound so the compiler can see nothing is cut. */
static void copy_alias(char dst[65], const char *src) {
        size_t n = strnlen(src, 64);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

static void add(struct gw_plan *p, const char *src, const char *dst) {
        for (size_t i = 0; i < p->nflows; i++)
                if (!strcmp(p->flows[i].src, src) &&
                    !strcmp(p->flows[i].dst, dst))
                        return;
        if (p->nflows == GW_MAX_FLOWS)
                return;
        copy_alias(p->flows[p->nflows].src, src);
        copy_alias(p->flows[p->nflows].dst, dst);
        p->nflows++;
}

int gw_plan_flows(const aagw_config_t *cfg, struct gw_plan *p, char *errstr,
                  size_t errstr_size) {
        const struct aagw_settings         *s     = aagw_config_settings(cfg);
        const struct aagw_cfg_list         *flows = &s->replication.flows;
        const struct aagw_cluster_settings *cl    = s->clusters;
        size_t                              n     = s->nclusters;
        const char                         *site  = s->gateway.site;
        char                                mode[32];
        struct gw_plan                      all;

        aagw_settings_word(s, &s->gateway.mode, mode, sizeof(mode));
        memset(p, 0, sizeof(*p));
        memset(&all, 0, sizeof(all));
        if (flows->n) {
                for (size_t i = 0; i < flows->n; i++) {
                        char        src[128];
                        const char *arrow = strstr(flows->items[i], "->");
                        snprintf(src, sizeof(src), "%.*s",
                                 (int)(arrow - flows->items[i]),
                                 flows->items[i]);
                        add(&all, src, arrow + 2);
                }
        } else if (s->gateway.mode == GW_MODE_ACTIVE_ACTIVE) {
                for (size_t i = 0; i < n; i++)
                        for (size_t j = 0; j < n; j++)
                                if (i != j)
                                        add(&all, cl[i].alias, cl[j].alias);
        } else if (s->gateway.mode == GW_MODE_ACTIVE_PASSIVE) {
                const char *primary = s->gateway.primary;
                for (size_t i = 0; i < n; i++)
                        if (strcmp(cl[i].alias, primary))
                                add(&all, primary, cl[i].alias);
        } else { /* aggregate */
                const char *central = s->gateway.central;
                for (size_t i = 0; i < n; i++)
                        if (strcmp(cl[i].alias, central))
                                add(&all, cl[i].alias, central);
        }
        for (size_t i = 0; i < all.nflows; i++)
                if (!site || !strcmp(all.flows[i].dst, site))
                        add(p, all.flows[i].src, all.flows[i].dst);
        if (all.nflows > GW_MAX_FLOWS) {
                snprintf(errstr, errstr_size, "more than %d flows",
                         GW_MAX_FLOWS);
                return -1;
        }
        if (p->nflows == 0) {
                snprintf(errstr, errstr_size,
                         site ? "no flow has site %s as its target (mode %s)"
                              : "no flows to run (mode %s)",
                         site ? site : mode, mode);
                return -1;
        }
        return 0;
}

/* ------------------------------------------------------------- POLICY --- */

/* The one place a config becomes the replication policy: every
 * replication.* key that the policy holds is read here, before anything
 * else is derived (tests/unit/test_config.c checks them key by key).
 * The flows and the offsets commands (cli_offsets.c) use the same one. */
aagw_repl_policy_t *gw_policy_new(const aagw_config_t *cfg, char *err,
                                  size_t errsize) {
        return gw_policy_new_flow(cfg, NULL, NULL, err, errsize);
}

/* The policy's sites (borrowed from 'cfg', in 'sites'), naming and
 * separator: what both the flows' policy and the separator check start
 * from. */
static void naming_conf(const struct aagw_settings *s,
                        struct aagw_repl_conf *rc, const char **sites) {
        size_t n = s->nclusters;

        aagw_repl_conf_init(rc);
        if (n > AAGW_SITES_MAX)
                n = AAGW_SITES_MAX;
        for (size_t i = 0; i < n; i++)
                sites[i] = s->clusters[i].alias;
        rc->sites     = sites;
        rc->site_cnt  = n;
        rc->naming    = s->replication.policy;
        rc->separator = s->replication.separator;
}

/* The separator against the cluster aliases, as the policy checks them
 * (an alias holding it, two aliases it makes ambiguous, MM2's internal
 * names too long), so that `config check` refuses what `run` would.  Only
 * the naming keys go in: every other policy key has its own check. */
int gw_separator_check(const aagw_config_t *cfg, char *err, size_t errsize) {
        const struct aagw_settings *s = aagw_config_settings(cfg);
        struct aagw_repl_conf       rc;
        const char                 *sites[AAGW_SITES_MAX];

        if (!s->nclusters)
                return 0;
        naming_conf(s, &rc, sites);
        aagw_repl_policy_t *pol = aagw_repl_policy_new(&rc, err, errsize);
        if (!pol)
                return -1;
        aagw_repl_policy_destroy(pol);
        return 0;
}

bool gw_flow_has_own_topics(const aagw_config_t *cfg, const char *src,
                            const char *dst) {
        const struct aagw_flow_settings *f =
            aagw_settings_per_flow(aagw_config_settings(cfg), src, dst);

        return f && (f->topics.set || f->topics_exclude.set);
}

aagw_repl_policy_t *gw_policy_new_flow(const aagw_config_t *cfg,
                                       const char *src, const char *dst,
                                       char *err, size_t errsize) {
        const struct aagw_settings      *s = aagw_config_settings(cfg);
        const struct aagw_flow_settings *f =
            aagw_settings_per_flow(s, src, dst);
        const struct aagw_cfg_list *inc = &s->replication.topics;
        const struct aagw_cfg_list *exc = &s->replication.topics_exclude;
        struct aagw_repl_conf       rc;
        const char                 *sites[AAGW_SITES_MAX];

        naming_conf(s, &rc, sites);
        rc.multi_hop      = s->replication.multi_hop;
        rc.header_prefix  = s->replication.header_prefix;
        rc.unified_suffix = s->unify.suffix;
        /* A flow's own lists replace the global ones, as MM2's
         * "east->west.topics" replaces "topics". */
        if (f && f->topics.set)
                inc = &f->topics;
        if (f && f->topics_exclude.set)
                exc = &f->topics_exclude;
        rc.topics_include_cnt  = inc->n;
        rc.topics_include      = inc->items;
        rc.topics_exclude_cnt  = exc->n;
        rc.topics_exclude      = exc->items;
        rc.groups_include_cnt  = s->replication.groups.n;
        rc.groups_include      = s->replication.groups.items;
        rc.groups_exclude_cnt  = s->replication.groups_exclude.n;
        rc.groups_exclude      = s->replication.groups_exclude.items;
        rc.configs_exclude_cnt = s->replication.topic_configs_exclude.n;
        rc.configs_exclude     = s->replication.topic_configs_exclude.items;
        rc.on_bad_provenance   = s->replication.bad_provenance;
        rc.on_missing_id       = s->replication.missing_id;
        /* Unified topics are never replicated: those named by the suffix
         * are built-in exclusions, those named per topic are added here
         * (as whole-name regexes, metacharacters escaped). */
        size_t nout = s->unify.ntopics;
        if (nout) {
                size_t       k = 0, base = rc.topics_exclude_cnt;
                const char **ex =
                    calloc(rc.topics_exclude_cnt + nout + 1, sizeof(*ex));
                if (!ex) {
                        snprintf(err, errsize, "out of memory");
                        return NULL;
                }
                for (size_t i = 0; i < rc.topics_exclude_cnt; i++)
                        ex[k++] = rc.topics_exclude[i];
                for (size_t i = 0; i < nout; i++) {
                        const char *out = s->unify.topics[i].output;
                        if (!out)
                                continue;
                        char *re = malloc(2 * strlen(out) + 1), *w = re;
                        if (!re)
                                continue;
                        for (const char *c = out; *c; c++) {
                                if (strchr(".[]{}()\\*+?|^$", *c))
                                        *w++ = '\\';
                                *w++ = *c;
                        }
                        *w      = '\0';
                        ex[k++] = re;
                }
                rc.topics_exclude     = ex;
                rc.topics_exclude_cnt = k;
                aagw_repl_policy_t *pol = aagw_repl_policy_new(&rc, err,
                                                               errsize);
                for (size_t i = base; i < k; i++)
                        free((char *)ex[i]);
                free(ex);
                return pol;
        }
        return aagw_repl_policy_new(&rc, err, errsize);
}

/* -------------------------------------------------------------- UNIFY --- */

bool gw_unify_wanted(const aagw_config_t *cfg) {
        const struct aagw_settings *s = aagw_config_settings(cfg);

        if (s->unify.mode != GW_UNIFY_OFF)
                return true;
        for (size_t i = 0; i < s->unify.ntopics; i++) {
                enum gw_unify_mode m = s->unify.topics[i].mode;
                if (m != GW_UNIFY_INHERIT && m != GW_UNIFY_OFF)
                        return true;
        }
        return false;
}

enum gw_unify_mode gw_unify_topic(const aagw_config_t *cfg, const char *name,
                                  char *out, size_t size) {
        const struct aagw_settings             *s = aagw_config_settings(cfg);
        const struct aagw_unify_topic_settings *t =
            aagw_settings_unify_topic(s, name);
        enum gw_unify_mode mode = t ? t->mode : GW_UNIFY_INHERIT;

        out[0] = '\0';
        if (mode == GW_UNIFY_INHERIT)
                mode = s->unify.mode;
        if (mode == GW_UNIFY_OFF)
                return mode;
        if (t && t->output)
                snprintf(out, size, "%s", t->output);
        else if ((size_t)snprintf(out, size, "%s%s", name, s->unify.suffix) >=
                 size)
                out[0] = '\0';
        return mode;
}
