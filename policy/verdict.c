/* policy/verdict.c: the per-record replication decision.
 *
 * Two independent mechanisms stop loops: topic names (under the prefix
 * policy) and provenance paths.  Each must stop a loop on its own, so each
 * can be switched off for tests, and neither depends on the other's
 * result.  This runs for every record: it works in the caller's verdict
 * struct and allocates nothing. */
#include "policy_int.h"

#include <string.h>

/* --------------------------------- CAUSES ------------------------------ */

/* clang-format off */
static const struct {
        const char *name;
        const char *desc;
} skips[AAGW_SKIP_COUNT] = {
    [AAGW_SKIP_NONE]     = {"none", "replicated"},
    [AAGW_SKIP_INTERNAL] = {"internal", "internal topic, never replicated"},
    [AAGW_SKIP_FILTERED] = {"filtered",
                            "topic excluded by the include/exclude filters"},
    [AAGW_SKIP_TOPIC_FROM_TARGET] = {"topic_from_target",
                                     "the topic name says it came from the "
                                     "target site"},
    [AAGW_SKIP_REMOTE_TOPIC] = {"remote_topic",
                                "remote topic, and multi_hop is off"},
    [AAGW_SKIP_CHAIN_REPEATS_SITE] = {"chain_repeats_site",
                                      "the topic name's chain would repeat a "
                                      "site"},
    [AAGW_SKIP_TOO_MANY_HOPS] = {"too_many_hops",
                                 "the copy would have crossed more than 16 "
                                 "sites"},
    [AAGW_SKIP_NAME_TOO_LONG] = {"name_too_long",
                                 "the remote topic name would exceed 249 "
                                 "bytes"},
    [AAGW_SKIP_PATH_HAS_TARGET] = {"path_has_target",
                                   "the record's provenance path contains "
                                   "the target site"},
    [AAGW_SKIP_REMOTE_RECORD] = {"remote_record",
                                 "the record was replicated into the "
                                 "source, and multi_hop is off"},
};
/* clang-format on */

const char *aagw_skip_name(aagw_skip_t s) {
        if ((unsigned)s >= AAGW_SKIP_COUNT)
                return "unknown";
        return skips[s].name;
}

const char *aagw_skip_str(aagw_skip_t s) {
        if ((unsigned)s >= AAGW_SKIP_COUNT)
                return "unknown cause";
        return skips[s].desc;
}

/* ------------------------------- RESOLVE ------------------------------- */

/* A flow endpoint must be a site this policy knows (or, with
 * allow_unknown_sites, at least an alias): anything else is a caller bug,
 * not a property of the record. */
static bool endpoint_ok(const aagw_repl_policy_t *pol, const char *site) {
        size_t len = strlen(site);

        if (!policy_alias_valid(site, len))
                return false;
        return pol->allow_unknown_sites ||
               policy_site_index(pol, site, len) >= 0;
}

static bool rec_ok(const struct aagw_rec *rec) {
        return rec->topic &&
               policy_topic_valid(rec->topic,
                                  strnlen(rec->topic, AAGW_TOPIC_MAX + 1)) &&
               rec->partition >= 0 && rec->offset >= 0 &&
               (rec->hdrs || !rec->hdr_cnt);
}

/* Stamp provenance for a record that originates at 'site': it carried
 * none, or carried bad provenance that the pass action discards.  The
 * clock is the record's own timestamp with counter 0, not a clock read
 * here, so every site and every replay stamps the same value and
 * last-write-wins picks the same winner everywhere. */
static aagw_verdict_kind_t stamp(const aagw_repl_policy_t *pol,
                                 const char *site, const struct aagw_rec *rec,
                                 const aagw_id_rule_t *id_rule,
                                 struct aagw_verdict *v) {
        struct aagw_prov *p   = &v->prov;
        size_t            len = strlen(site);
        aagw_reason_t     r;

        v->fresh = true;
        memcpy(p->origin, site, len + 1);
        memcpy(p->path[0], site, len + 1);
        p->path_len = 1;
        memcpy(p->src_topic, rec->topic, strlen(rec->topic) + 1);
        p->src_partition = rec->partition;
        p->src_offset    = rec->offset;
        p->hlc           = aagw_hlc_make(rec->timestamp_ms, 0);
        r = aagw_id_extract(id_rule, site, rec, p->id, sizeof(p->id),
                            &p->id_len);
        if (r == AAGW_REASON_OK)
                return AAGW_VERDICT_REPLICATE;
        v->id_reason = r;
        if (pol->on_missing_id != AAGW_BAD_PASS) {
                v->reason = r;
                v->action = pol->on_missing_id;
                return AAGW_VERDICT_REJECT;
        }
        /* The derived id always fits: alias, topic and two numbers. */
        p->id_len = aagw_id_derive(site, rec->topic, rec->partition,
                                   rec->offset, p->id, sizeof(p->id));
        return AAGW_VERDICT_REPLICATE;
}

/* Under the prefix policy a topic's name lists the sites its records
 * came through (west.clicks at east: west), and aagw writes a copy's path
 * as exactly those sites plus the one holding it (west>east).  Provenance
 * whose path says otherwise was not written there by aagw.  With
 * allow_unknown_sites an unknown hop stays in the name unpeeled, so the
 * comparison would be wrong: it is not made. */
static bool path_contradicts_name(const aagw_repl_policy_t *pol,
                                  const char *topic,
                                  const struct aagw_prov *p) {
        const char *chain[AAGW_PROV_MAX_HOPS];
        size_t      n;

        if (pol->naming != AAGW_NAMING_PREFIX || pol->allow_unknown_sites)
                return false;
        n = aagw_repl_topic_chain(pol, topic, chain, AAGW_PROV_MAX_HOPS,
                                  NULL);
        if (n + 1 != p->path_len)
                return true;
        for (size_t i = 0; i < n; i++)
                if (strcmp(chain[i], p->path[i]))
                        return true;
        return false;
}

/* The record's provenance as read at 'site', into v->prov.  Sets v->kind
 * to REPLICATE (usable) or REJECT and fills the reason fields. */
static void resolve(const aagw_repl_policy_t *pol, const char *site,
                    const struct aagw_rec *rec, const aagw_id_rule_t *id_rule,
                    unsigned flags, struct aagw_verdict *v) {
        aagw_reason_t r;

        v->skip      = AAGW_SKIP_NONE;
        v->reason    = AAGW_REASON_OK;
        v->id_reason = AAGW_REASON_OK;
        v->action    = AAGW_BAD_PASS;
        v->fresh     = false;
        v->hdrs.cnt  = 0;
        v->path_forged = false;
        if (flags & AAGW_VERDICT_F_NO_HEADER_CHECK) {
                v->kind = stamp(pol, site, rec, id_rule, v);
                return;
        }
        r = aagw_prov_decode(pol, rec->hdrs, rec->hdr_cnt, &v->prov);
        if (r == AAGW_REASON_OK)
                r = aagw_prov_validate(pol, &v->prov, site);
        if (r == AAGW_REASON_OK && v->prov.path_len) {
                v->kind        = AAGW_VERDICT_REPLICATE;
                v->path_forged = path_contradicts_name(pol, rec->topic,
                                                       &v->prov);
                return;
        }
        if (r != AAGW_REASON_OK) {
                v->reason = r;
                if (pol->on_bad_provenance != AAGW_BAD_PASS) {
                        v->kind   = AAGW_VERDICT_REJECT;
                        v->action = pol->on_bad_provenance;
                        return;
                }
        }
        v->kind = stamp(pol, site, rec, id_rule, v);
}

void aagw_prov_encode_resolved(const aagw_repl_policy_t *pol,
                               const struct aagw_prov *p,
                               struct aagw_prov_hdrs *out) {
        policy_prov_encode_valid(pol, p, out);
}

aagw_err_t aagw_prov_resolve(const aagw_repl_policy_t *pol, const char *site,
                             const struct aagw_rec *rec,
                             const aagw_id_rule_t *id_rule, unsigned flags,
                             struct aagw_verdict *v) {
        if (!pol || !site || !rec || !v || !endpoint_ok(pol, site) ||
            !rec_ok(rec))
                return AAGW_ERR_INVAL;
        resolve(pol, site, rec, id_rule, flags, v);
        return AAGW_OK;
}

/* ------------------------------- VERDICT ------------------------------- */

static aagw_err_t skip(struct aagw_verdict *v, aagw_skip_t cause) {
        v->kind      = AAGW_VERDICT_SKIP;
        v->skip      = cause;
        v->reason    = AAGW_REASON_OK;
        v->id_reason = AAGW_REASON_OK;
        v->action    = AAGW_BAD_PASS;
        v->fresh     = false;
        v->hdrs.cnt  = 0;
        return AAGW_OK;
}

static bool flow_ok(const aagw_repl_policy_t *pol, const char *source,
                    const char *target) {
        return endpoint_ok(pol, source) && endpoint_ok(pol, target) &&
               strcmp(source, target);
}

aagw_err_t aagw_repl_precheck(const aagw_repl_policy_t *pol,
                              const char *source, const char *target,
                              const char *topic, unsigned flags,
                              aagw_skip_t *cause) {
        if (!pol || !source || !target || !topic || !cause ||
            !flow_ok(pol, source, target) ||
            !policy_topic_valid(topic, strnlen(topic, AAGW_TOPIC_MAX + 1)))
                return AAGW_ERR_INVAL;
        *cause = policy_name_rules(pol, source, target, topic,
                                   !(flags & AAGW_VERDICT_F_NO_TOPIC_CHECK));
        return AAGW_OK;
}

aagw_err_t aagw_repl_verdict(const aagw_repl_policy_t *pol, const char *source,
                             const char *target, const struct aagw_rec *rec,
                             const aagw_id_rule_t *id_rule, unsigned flags,
                             struct aagw_verdict *v) {
        struct aagw_prov *p;
        aagw_skip_t       cause;

        if (!pol || !source || !target || !rec || !v)
                return AAGW_ERR_INVAL;
        v->path_forged = false; /* skip() leaves it as resolve() set it */
        if (flags & AAGW_VERDICT_F_PRECHECKED) {
                /* Endpoints, topic name and topic rules: checked once
                 * for the topic by aagw_repl_precheck(). */
                if (!rec->topic || rec->partition < 0 || rec->offset < 0 ||
                    (!rec->hdrs && rec->hdr_cnt))
                        return AAGW_ERR_INVAL;
        } else {
                if (!flow_ok(pol, source, target) || !rec_ok(rec))
                        return AAGW_ERR_INVAL;
                /* 1. The name: cheapest, and needs no header at all. */
                cause = policy_name_rules(
                    pol, source, target, rec->topic,
                    !(flags & AAGW_VERDICT_F_NO_TOPIC_CHECK));
                if (cause != AAGW_SKIP_NONE)
                        return skip(v, cause);
        }

        /* 2. What the record says about itself. */
        resolve(pol, source, rec, id_rule, flags, v);
        if (v->kind == AAGW_VERDICT_REJECT)
                return AAGW_OK;
        p = &v->prov;

        /* 3. The path rules, for provenance the record brought along
         * (fresh provenance is [source] and passes them all). */
        if (!v->fresh) {
                for (size_t i = 0; i < p->path_len; i++)
                        if (!strcmp(p->path[i], target))
                                return skip(v, AAGW_SKIP_PATH_HAS_TARGET);
                /* The path ends at the source, so a path longer than one
                 * hop means aagw copied the record here. */
                if (p->path_len > 1 && !pol->multi_hop)
                        return skip(v, AAGW_SKIP_REMOTE_RECORD);
                if (p->path_len >= AAGW_PROV_MAX_HOPS)
                        return skip(v, AAGW_SKIP_TOO_MANY_HOPS);
        }

        /* 4. The target joins the path: it is about to hold the record. */
        memcpy(p->path[p->path_len], target, strlen(target) + 1);
        p->path_len++;
        /* Valid by construction: the checks of aagw_prov_encode() were
         * a fifth of the verdict's cost per record. */
        policy_prov_encode_valid(pol, p, &v->hdrs);
        v->kind = AAGW_VERDICT_REPLICATE;
        return AAGW_OK;
}
