/*
 * policy/policy_int.h: what the replication-policy files of policy/ share.
 * Nothing outside policy/ includes this.
 */
#ifndef AAGW_POLICY_INT_H
#define AAGW_POLICY_INT_H

#include "aagw_policy.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ------------------------------- FILTERS ------------------------------- */

/* A list of compiled regexes (PCRE2, MM2's Java dialect), each matching
 * whole names only.  All zeroes is the empty list. */
struct policy_filter {
        size_t               cnt;
        pcre2_code         **res;
        pcre2_match_context *mctx; /* the match limit */
};

/* Compile 'pats' and append them; 'what' names the list in errors. */
int  policy_filter_add(struct policy_filter *f, const char *what,
                       const char *const *pats, size_t cnt, char *errstr,
                       size_t errstr_size);
void policy_filter_deinit(struct policy_filter *f);
bool policy_filter_match(const struct policy_filter *f, const char *name);

/* ----------------------------- THE POLICY ------------------------------ */

struct policy_site {
        char   name[AAGW_ALIAS_MAX + 1];
        size_t len;
};

struct aagw_repl_policy {
        aagw_naming_t      naming;
        bool               multi_hop;
        bool               allow_unknown_sites;
        aagw_bad_action_t  on_bad_provenance;
        aagw_bad_action_t  on_missing_id;
        size_t             site_cnt;
        struct policy_site sites[AAGW_SITES_MAX];
        char               sep[AAGW_SEP_MAX + 1];
        size_t             sep_len;
        char               own_prefix[AAGW_AFFIX_MAX + 1];
        size_t             own_prefix_len;
        char               unified_suffix[AAGW_AFFIX_MAX + 1];
        size_t             unified_suffix_len;
        char               hprefix[AAGW_AFFIX_MAX + 1];
        size_t             hprefix_len;
        /* The provenance header's full name ("aagw.prov"), built once so
         * encoding can hand out a borrowed pointer. */
        char                 prov_name[AAGW_AFFIX_MAX + 8];
        struct policy_filter topics_inc, topics_exc;
        struct policy_filter groups_inc, groups_exc;
        struct policy_filter configs_exc;
};

/* ------------------------------- HELPERS ------------------------------- */

bool policy_alias_valid(const char *s, size_t len);
bool policy_topic_valid(const char *s, size_t len);

/* Index of the configured site named by 's' ('len' bytes), or -1. */
int policy_site_index(const aagw_repl_policy_t *pol, const char *s, size_t len);

/* Canonical unsigned decimal: digits only, no leading zero, <= 'max'. */
bool policy_parse_dec(const char *s, size_t len, uint64_t max, uint64_t *out);

/* Write 'v' in decimal at 'buf' (room for 20 digits); returns the length. */
size_t policy_fmt_dec(char *buf, uint64_t v);

/* aagw_prov_encode() without its checks, for provenance that is valid by
 * construction (the verdict's: a decoded and validated path, or a fresh
 * stamp, plus a target that is a configured site not on the path). */
void policy_prov_encode_valid(const aagw_repl_policy_t *pol,
                              const struct aagw_prov *p,
                              struct aagw_prov_hdrs *out);

/* The topic-name loop rules of aagw_repl_topic_check(), without internal
 * topics and filters: what the per-record verdict runs. */
aagw_skip_t policy_topic_cycle(const aagw_repl_policy_t *pol,
                               const char *source, const char *target,
                               const char *topic);

/* true if the prefix-policy name of 'topic' from 'source' would exceed
 * AAGW_TOPIC_MAX. */
bool policy_name_too_long(const aagw_repl_policy_t *pol, const char *source,
                          const char *topic);

/* The rules on the topic's name: the loop rules (if 'cycle'), then the
 * remote name's length.  Shared by aagw_repl_topic_check() and the
 * verdict. */
aagw_skip_t policy_name_rules(const aagw_repl_policy_t *pol,
                              const char *source, const char *target,
                              const char *topic, bool cycle);

/* JSON: find top-level 'field' of the object in 'v' and copy its string or
 * integer value into 'out' (room for 'cap' bytes, no NUL added).  Parses
 * with json-c, so unlike the rest of the per-record path it allocates (and
 * frees before returning).  See json.c. */
aagw_reason_t policy_json_field(const void *v, size_t len, const char *field,
                                char *out, size_t cap, size_t *outlen);

#endif /* AAGW_POLICY_INT_H */
