/* policy/naming.c: remote topic names and the topic-level loop rules.
 *
 * Under the prefix policy each hop prepends its source alias and the
 * separator, as MirrorMaker 2's DefaultReplicationPolicy does: east's
 * clicks is east.clicks at west, and west.east.clicks at a third site if
 * multi_hop carries it on.  Unlike MM2 we only peel off aliases of
 * configured sites, so a local topic that happens to contain the separator
 * ("web.clicks") is not mistaken for a remote one.  Under the identity
 * policy names carry no history and only provenance headers stop loops. */
#include "policy_int.h"

#include <string.h>

/* ----------------------------- NAME PARSING ---------------------------- */

/* Index of the site whose "<alias><sep>" starts 's' and leaves a non-empty
 * rest, or -1.  At most one site can match: repl_policy.c refuses alias
 * sets where two could. */
static int lead_site(const aagw_repl_policy_t *pol, const char *s, size_t len) {
        if (pol->naming != AAGW_NAMING_PREFIX)
                return -1;
        for (size_t i = 0; i < pol->site_cnt; i++) {
                const struct policy_site *site = &pol->sites[i];
                if (len > site->len + pol->sep_len &&
                    !memcmp(s, site->name, site->len) &&
                    !memcmp(s + site->len, pol->sep, pol->sep_len))
                        return (int)i;
        }
        return -1;
}

static bool starts_with(const char *s, size_t len, const char *p, size_t plen) {
        return len >= plen && !memcmp(s, p, plen);
}

static bool ends_with(const char *s, size_t len, const char *p, size_t plen) {
        return len >= plen && !memcmp(s + len - plen, p, plen);
}

const char *aagw_repl_topic_source(const aagw_repl_policy_t *pol,
                                   const char *topic) {
        int i = lead_site(pol, topic, strlen(topic));
        return i < 0 ? NULL : pol->sites[i].name;
}

const char *aagw_repl_topic_upstream(const aagw_repl_policy_t *pol,
                                     const char *topic) {
        int i = lead_site(pol, topic, strlen(topic));
        return i < 0 ? NULL : topic + pol->sites[i].len + pol->sep_len;
}

bool aagw_repl_topic_is_remote(const aagw_repl_policy_t *pol,
                               const char *topic) {
        return lead_site(pol, topic, strlen(topic)) >= 0;
}

size_t aagw_repl_topic_chain(const aagw_repl_policy_t *pol, const char *topic,
                             const char **chain, size_t max,
                             const char **base) {
        const char *p   = topic;
        size_t      len = strlen(topic);
        size_t      n   = 0;
        int         i;

        /* Count first: the name lists the newest hop first, the chain is
         * returned origin first, and it may not all fit. */
        while ((i = lead_site(pol, p, len)) >= 0) {
                size_t skip = pol->sites[i].len + pol->sep_len;
                p += skip;
                len -= skip;
                n++;
        }
        if (base)
                *base = p;
        if (!chain || !max)
                return n;
        p   = topic;
        len = strlen(topic);
        for (size_t k = 0; k < n; k++) {
                size_t skip;
                i = lead_site(pol, p, len);
                if (n - 1 - k < max)
                        chain[n - 1 - k] = pol->sites[i].name;
                skip = pol->sites[i].len + pol->sep_len;
                p += skip;
                len -= skip;
        }
        return n;
}

/* ----------------------------- LOOP RULES ------------------------------ */

aagw_skip_t policy_topic_cycle(const aagw_repl_policy_t *pol,
                               const char *source, const char *target,
                               const char *topic) {
        const char *p       = topic;
        size_t      len     = strlen(topic);
        int         src_i   = policy_site_index(pol, source, strlen(source));
        int         tgt_i   = policy_site_index(pol, target, strlen(target));
        uint64_t    seen    = 0;
        size_t      n       = 0;
        bool        to_tgt  = false;
        bool        repeats = false;
        int         i;

        while ((i = lead_site(pol, p, len)) >= 0) {
                size_t skip = pol->sites[i].len + pol->sep_len;
                if (i == tgt_i)
                        to_tgt = true;
                if (seen & (UINT64_C(1) << i))
                        repeats = true;
                seen |= UINT64_C(1) << i;
                p += skip;
                len -= skip;
                n++;
        }
        if (!n)
                return AAGW_SKIP_NONE;
        /* MirrorMaker 2's isCycle(): any hop of the chain, not only the
         * last, naming the target means the data came from there. */
        if (to_tgt)
                return AAGW_SKIP_TOPIC_FROM_TARGET;
        if (!pol->multi_hop)
                return AAGW_SKIP_REMOTE_TOPIC;
        if (repeats || (src_i >= 0 && (seen & (UINT64_C(1) << src_i))))
                return AAGW_SKIP_CHAIN_REPEATS_SITE;
        /* The copy would have crossed the chain, the source and now the
         * target: the same bound as a provenance path. */
        if (n + 2 > AAGW_PROV_MAX_HOPS)
                return AAGW_SKIP_TOO_MANY_HOPS;
        return AAGW_SKIP_NONE;
}

bool policy_name_too_long(const aagw_repl_policy_t *pol, const char *source,
                          const char *topic) {
        return pol->naming == AAGW_NAMING_PREFIX &&
               strlen(source) + pol->sep_len + strlen(topic) > AAGW_TOPIC_MAX;
}

bool aagw_repl_topic_is_internal(const aagw_repl_policy_t *pol,
                                 const char *topic) {
        size_t len = strlen(topic);

        /* MirrorMaker 2's ReplicationPolicy.isInternalTopic() ... */
        if (starts_with(topic, len, "__", 2) ||
            starts_with(topic, len, ".", 1) ||
            ends_with(topic, len, ".internal", 9) ||
            ends_with(topic, len, "-internal", 9))
                return true;
        /* ... whose isMM2InternalTopic() is "<sep>internal": with "_" its
         * own topics are mm2-offset-syncs_west_internal and
         * east_checkpoints_internal. */
        if (len > pol->sep_len + 8 &&
            !memcmp(topic + len - 8, "internal", 8) &&
            !memcmp(topic + len - 8 - pol->sep_len, pol->sep, pol->sep_len))
                return true;
        /* ... plus what aagw itself writes: replicating a dead-letter topic
         * would spread poison, and a unified output already holds every
         * site's records, so copying it would duplicate them all. */
        return starts_with(topic, len, pol->own_prefix, pol->own_prefix_len) ||
               ends_with(topic, len, pol->unified_suffix,
                         pol->unified_suffix_len);
}

const char *aagw_repl_separator(const aagw_repl_policy_t *pol) {
        return pol->sep;
}

bool aagw_repl_topic_allowed(const aagw_repl_policy_t *pol, const char *topic) {
        return !aagw_repl_topic_is_internal(pol, topic) &&
               policy_filter_match(&pol->topics_inc, topic) &&
               !policy_filter_match(&pol->topics_exc, topic);
}

bool aagw_repl_group_allowed(const aagw_repl_policy_t *pol, const char *group) {
        /* aagw's own consumer groups ("aagw.<id>.<source>-<target>") are
         * its business, not a user's position to carry over. */
        return !starts_with(group, strlen(group), pol->own_prefix,
                            pol->own_prefix_len) &&
               policy_filter_match(&pol->groups_inc, group) &&
               !policy_filter_match(&pol->groups_exc, group);
}

bool aagw_repl_config_allowed(const aagw_repl_policy_t *pol, const char *name) {
        return !policy_filter_match(&pol->configs_exc, name);
}

aagw_skip_t aagw_repl_topic_check(const aagw_repl_policy_t *pol,
                                  const char *source, const char *target,
                                  const char *topic) {
        if (aagw_repl_topic_is_internal(pol, topic))
                return AAGW_SKIP_INTERNAL;
        if (!aagw_repl_topic_allowed(pol, topic))
                return AAGW_SKIP_FILTERED;
        return policy_name_rules(pol, source, target, topic, true);
}

aagw_skip_t policy_name_rules(const aagw_repl_policy_t *pol,
                              const char *source, const char *target,
                              const char *topic, bool cycle) {
        if (cycle) {
                aagw_skip_t cause =
                    policy_topic_cycle(pol, source, target, topic);
                if (cause != AAGW_SKIP_NONE)
                        return cause;
        }
        /* Not loop prevention but feasibility: the copy needs a name. */
        if (policy_name_too_long(pol, source, topic))
                return AAGW_SKIP_NAME_TOO_LONG;
        return AAGW_SKIP_NONE;
}

/* -------------------------------- NAMES -------------------------------- */

aagw_err_t aagw_repl_remote_topic(const aagw_repl_policy_t *pol,
                                  const char *source, const char *topic,
                                  char *buf, size_t size) {
        size_t slen, tlen, n;

        if (!pol || !source || !topic || !buf)
                return AAGW_ERR_INVAL;
        tlen = strlen(topic);
        if (pol->naming == AAGW_NAMING_IDENTITY) {
                if (tlen >= size)
                        return AAGW_ERR_INVAL;
                memcpy(buf, topic, tlen + 1);
                return AAGW_OK;
        }
        slen = strlen(source);
        if (!policy_alias_valid(source, slen))
                return AAGW_ERR_INVAL;
        n = slen + pol->sep_len + tlen;
        if (n > AAGW_TOPIC_MAX || n >= size)
                return AAGW_ERR_INVAL;
        memcpy(buf, source, slen);
        memcpy(buf + slen, pol->sep, pol->sep_len);
        memcpy(buf + slen + pol->sep_len, topic, tlen + 1);
        return AAGW_OK;
}

aagw_err_t aagw_repl_dlq_topic(const aagw_repl_policy_t *pol,
                               const char *source, char *buf, size_t size) {
        size_t slen, n;

        if (!pol || !source || !buf)
                return AAGW_ERR_INVAL;
        slen = strlen(source);
        if (!policy_alias_valid(source, slen))
                return AAGW_ERR_INVAL;
        n = pol->own_prefix_len + 4 + slen;
        if (n >= size)
                return AAGW_ERR_INVAL;
        memcpy(buf, pol->own_prefix, pol->own_prefix_len);
        memcpy(buf + pol->own_prefix_len, "dlq.", 4);
        memcpy(buf + pol->own_prefix_len + 4, source, slen + 1);
        return AAGW_OK;
}
