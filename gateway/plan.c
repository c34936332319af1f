/*
 * gateway/plan.c: which replication flows this process runs.
 *
 * The topology comes from gateway.mode (or an explicit replication.flows
 * list, as MirrorMaker 2 writes "east->west"), and --site narrows it to the
 * flows whose target is that site: one process per data center, each
 * writing only to its local cluster, is the production shape (a process
 * then never produces across the WAN, only consumes).
 */
#include "gateway_int.h"

#include <stdio.h>
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
