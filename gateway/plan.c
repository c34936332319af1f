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
        const char *const *items;
        size_t             nflows = aagw_config_list(cfg, "replication.flows",
                                                     &items);
        size_t      n    = aagw_config_instance_cnt(cfg, "clusters");
        const char *mode = aagw_config_str(cfg, "gateway.mode");
        const char *site = aagw_config_str(cfg, "gateway.site");
        struct gw_plan all;

        memset(p, 0, sizeof(*p));
        memset(&all, 0, sizeof(all));
        if (nflows) {
                for (size_t i = 0; i < nflows; i++) {
                        char        src[128];
                        const char *arrow = strstr(items[i], "->");
                        snprintf(src, sizeof(src), "%.*s",
                                 (int)(arrow - items[i]), items[i]);
                        add(&all, src, arrow + 2);
                }
        } else if (!strcmp(mode, "active-active")) {
                for (size_t i = 0; i < n; i++)
                        for (size_t j = 0; j < n; j++)
                                if (i != j)
                                        add(&all,
                                            aagw_config_instance(cfg,
                                                                 "clusters", i),
                                            aagw_config_instance(cfg,
                                                                 "clusters",
                                                                 j));
        } else if (!strcmp(mode, "active-passive")) {
                const char *primary = aagw_config_str(cfg, "gateway.primary");
                for (size_t i = 0; i < n; i++) {
                        const char *c = aagw_config_instance(cfg, "clusters", i);
                        if (strcmp(c, primary))
                                add(&all, primary, c);
                }
        } else { /* aggregate */
                const char *central = aagw_config_str(cfg, "gateway.central");
                for (size_t i = 0; i < n; i++) {
                        const char *c = aagw_config_instance(cfg, "clusters", i);
                        if (strcmp(c, central))
                                add(&all, c, central);
                }
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
static void naming_conf(const aagw_config_t *cfg, struct aagw_repl_conf *rc,
                        const char **sites) {
        size_t n = aagw_config_instance_cnt(cfg, "clusters");

        aagw_repl_conf_init(rc);
        if (n > AAGW_SITES_MAX)
                n = AAGW_SITES_MAX;
        for (size_t i = 0; i < n; i++)
                sites[i] = aagw_config_instance(cfg, "clusters", i);
        rc->sites     = sites;
        rc->site_cnt  = n;
        rc->naming    = strcmp(aagw_config_str(cfg, "replication.policy"),
                               "identity")
                            ? AAGW_NAMING_PREFIX
                            : AAGW_NAMING_IDENTITY;
        rc->separator = aagw_config_str(cfg, "replication.separator");
}

/* The separator against the cluster aliases, as the policy checks them
 * (an alias holding it, two aliases it makes ambiguous, MM2's internal
 * names too long), so that `config check` refuses what `run` would.  Only
 * the naming keys go in: every other policy key has its own check. */
int gw_separator_check(const aagw_config_t *cfg, char *err, size_t errsize) {
        struct aagw_repl_conf rc;
        const char           *sites[AAGW_SITES_MAX];

        if (!aagw_config_instance_cnt(cfg, "clusters"))
                return 0;
        naming_conf(cfg, &rc, sites);
        aagw_repl_policy_t *pol = aagw_repl_policy_new(&rc, err, errsize);
        if (!pol)
                return -1;
        aagw_repl_policy_destroy(pol);
        return 0;
}

/* replication.per_flow.<src>-><dst>.<leaf>, or "" without a flow. */
static void per_flow_key(char *buf, size_t size, const char *src,
                         const char *dst, const char *leaf) {
        if (src && dst)
                snprintf(buf, size, "replication.per_flow.%s->%s.%s", src,
                         dst, leaf);
        else
                buf[0] = '\0';
}

bool gw_flow_has_own_topics(const aagw_config_t *cfg, const char *src,
                            const char *dst) {
        char key[512];

        per_flow_key(key, sizeof(key), src, dst, "topics");
        if (aagw_config_is_set(cfg, key))
                return true;
        per_flow_key(key, sizeof(key), src, dst, "topics_exclude");
        return aagw_config_is_set(cfg, key);
}

aagw_repl_policy_t *gw_policy_new_flow(const aagw_config_t *cfg,
                                       const char *src, const char *dst,
                                       char *err, size_t errsize) {
        struct aagw_repl_conf rc;
        const char           *sites[AAGW_SITES_MAX];
        const char *const    *items;
        const char           *bad;

        naming_conf(cfg, &rc, sites);
        rc.multi_hop = aagw_config_bool(cfg, "replication.multi_hop");
        rc.header_prefix  = aagw_config_str(cfg, "replication.header_prefix");
        rc.unified_suffix = aagw_config_str(cfg, "unify.suffix");
        /* A flow's own lists replace the global ones, as MM2's
         * "east->west.topics" replaces "topics". */
        char key[512];
        per_flow_key(key, sizeof(key), src, dst, "topics");
        rc.topics_include_cnt = aagw_config_list(
            cfg, aagw_config_is_set(cfg, key) ? key : "replication.topics",
            &items);
        rc.topics_include = items;
        per_flow_key(key, sizeof(key), src, dst, "topics_exclude");
        rc.topics_exclude_cnt = aagw_config_list(
            cfg,
            aagw_config_is_set(cfg, key) ? key : "replication.topics_exclude",
            &items);
        rc.topics_exclude = items;
        rc.groups_include_cnt =
            aagw_config_list(cfg, "replication.groups", &items);
        rc.groups_include = items;
        rc.groups_exclude_cnt =
            aagw_config_list(cfg, "replication.groups_exclude", &items);
        rc.groups_exclude = items;
        rc.configs_exclude_cnt =
            aagw_config_list(cfg, "replication.topic_configs_exclude", &items);
        rc.configs_exclude = items;
        bad = aagw_config_str(cfg, "replication.bad_provenance");
        rc.on_bad_provenance = !strcmp(bad, "pass")   ? AAGW_BAD_PASS
                               : !strcmp(bad, "fail") ? AAGW_BAD_FAIL
                                                      : AAGW_BAD_DEAD_LETTER;
        bad = aagw_config_str(cfg, "replication.missing_id");
        rc.on_missing_id = !strcmp(bad, "derive") ? AAGW_BAD_PASS
                           : !strcmp(bad, "fail") ? AAGW_BAD_FAIL
                                                  : AAGW_BAD_DEAD_LETTER;
        /* Unified topics are never replicated: those named by the suffix
         * are built-in exclusions, those named per topic are added here
         * (as whole-name regexes, metacharacters escaped). */
        size_t nout = aagw_config_instance_cnt(cfg, "unify.topics");
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
                        char        key[512];
                        const char *out;
                        snprintf(key, sizeof(key), "unify.topics.%s.output",
                                 aagw_config_instance(cfg, "unify.topics", i));
                        if (!(out = aagw_config_str(cfg, key)))
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
        if (strcmp(aagw_config_str(cfg, "unify.mode"), "off"))
                return true;
        for (size_t i = 0; i < aagw_config_instance_cnt(cfg, "unify.topics");
             i++) {
                char        key[512];
                const char *m;
                snprintf(key, sizeof(key), "unify.topics.%s.mode",
                         aagw_config_instance(cfg, "unify.topics", i));
                if ((m = aagw_config_str(cfg, key)) && strcmp(m, "off"))
                        return true;
        }
        return false;
}

const char *gw_unify_topic(const aagw_config_t *cfg, const char *name,
                           char *out, size_t size) {
        char        key[AAGW_TOPIC_MAX + 64];
        const char *mode, *o;

        out[0] = '\0';
        snprintf(key, sizeof(key), "unify.topics.%s.mode", name);
        if (!(mode = aagw_config_str(cfg, key)))
                mode = aagw_config_str(cfg, "unify.mode");
        if (!strcmp(mode, "off"))
                return mode;
        snprintf(key, sizeof(key), "unify.topics.%s.output", name);
        if ((o = aagw_config_str(cfg, key)))
                snprintf(out, size, "%s", o);
        else if ((size_t)snprintf(out, size, "%s%s", name,
                                  aagw_config_str(cfg, "unify.suffix")) >=
                 size)
                out[0] = '\0';
        return mode;
}
