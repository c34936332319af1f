/* policy/repl_policy.c: the replication policy object and its checks.
 *
 * Everything a per-record decision needs is checked and precomputed here,
 * once, so the hot path never meets a bad alias, an ambiguous separator or
 * a regex that does not compile. */
#include "policy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- HELPERS ------------------------------- */

static bool is_alnum(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9');
}

/* Characters Kafka allows in a topic name. */
static bool is_topic_char(unsigned char c) {
        return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

bool policy_alias_valid(const char *s, size_t len) {
        if (len < 1 || len > AAGW_ALIAS_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (!is_alnum(c) && c != '_' && c != '-')
                        return false;
        }
        return true;
}

bool policy_topic_valid(const char *s, size_t len) {
        if (len < 1 || len > AAGW_TOPIC_MAX)
                return false;
        /* Kafka refuses these two names even though their characters are
         * legal: they would be directories of the log dir. */
        if ((len == 1 && s[0] == '.') ||
            (len == 2 && s[0] == '.' && s[1] == '.'))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!is_topic_char((unsigned char)s[i]))
                        return false;
        return true;
}

int policy_site_index(const aagw_repl_policy_t *pol, const char *s,
                      size_t len) {
        for (size_t i = 0; i < pol->site_cnt; i++)
                if (pol->sites[i].len == len &&
                    !memcmp(pol->sites[i].name, s, len))
                        return (int)i;
        return -1;
}

bool policy_parse_dec(const char *s, size_t len, uint64_t max, uint64_t *out) {
        uint64_t v = 0;

        /* Canonical only ("0", "17"; not "", "017", "+1", " 1"), so that
         * decode -> encode reproduces the header byte for byte and two
         * spellings of one coordinate cannot exist. */
        if (len < 1 || len > 20 || (len > 1 && s[0] == '0'))
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned d = (unsigned char)s[i] - '0';
                if (d > 9 || d > max)
                        return false;
                if (v > (max - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *out = v;
        return true;
}

/* Two digits per division, written from the end: offsets and
 * millisecond clocks have 6 to 13 digits, and every copied record
 * formats three of them (the hop's offset, the clock, the derived id). */
static const char dec_pairs[201] = "00010203040506070809"
                                   "10111213141516171819"
                                   "20212223242526272829"
                                   "30313233343536373839"
                                   "40414243444546474849"
                                   "50515253545556575859"
                                   "60616263646566676869"
                                   "70717273747576777879"
                                   "80818283848586878889"
                                   "90919293949596979899";

size_t policy_fmt_dec(char *buf, uint64_t v) {
        size_t n = 1;
        for (uint64_t t = v; t >= 10; t /= 10)
                n++;
        char *p = buf + n;
        while (v >= 100) {
                unsigned r = (unsigned)(v % 100);
                v /= 100;
                *--p = dec_pairs[2 * r + 1];
                *--p = dec_pairs[2 * r];
        }
        if (v >= 10) {
                *--p = dec_pairs[2 * v + 1];
                *--p = dec_pairs[2 * v];
        } else
                *--p = (char)('0' + v);
        return n;
}

/* ------------------------------- CHECKS -------------------------------- */

/* Copy an affix (separator, prefix or suffix) made of topic characters,
 * or 'def' when 'v' is NULL.  Returns false with the reason in 'errstr'. */
static bool take_affix(const char *what, const char *v, const char *def,
                       size_t max, char *dst, size_t *lenp, char *errstr,
                       size_t errstr_size) {
        size_t len;

        if (!v)
                v = def;
        len = strlen(v);
        if (len < 1 || len > max) {
                snprintf(errstr, errstr_size,
                         "%s: expected 1 to %zu of A-Z a-z 0-9 . _ -, got "
                         "\"%s\"",
                         what, max, v);
                return false;
        }
        for (size_t i = 0; i < len; i++) {
                if (!is_topic_char((unsigned char)v[i])) {
                        snprintf(errstr, errstr_size,
                                 "%s: expected 1 to %zu of A-Z a-z 0-9 . _ "
                                 "-, got \"%s\"",
                                 what, max, v);
                        return false;
                }
        }
        memcpy(dst, v, len + 1);
        *lenp = len;
        return true;
}

/* Under the prefix policy a topic's leading "<alias><sep>" must name one
 * site only.  An alias containing the separator ("us.east" with ".") could
 * be split two ways, and so could two aliases where one plus the separator
 * starts the other plus the separator ("a" and "a-" with "--": "a---x" is
 * a + "--" + "-x" and a- + "--" + "x").  Refuse both here, so that
 * peeling a prefix off a topic name is unambiguous forever after.  Third,
 * the separator may not start inside "<alias><sep>": MirrorMaker 2 reads
 * the source up to the separator's first occurrence, and must find the
 * alias aagw wrote. */
static bool check_alias_sep(const aagw_repl_policy_t *pol, char *errstr,
                            size_t errstr_size) {
        for (size_t i = 0; i < pol->site_cnt; i++) {
                const struct policy_site *a = &pol->sites[i];
                if (strstr(a->name, pol->sep)) {
                        snprintf(errstr, errstr_size,
                                 "sites[%zu]: \"%s\" contains the separator "
                                 "\"%s\"",
                                 i, a->name, pol->sep);
                        return false;
                }
        }
        for (size_t i = 0; i < pol->site_cnt; i++) {
                for (size_t j = 0; j < pol->site_cnt; j++) {
                        const struct policy_site *a = &pol->sites[i];
                        const struct policy_site *b = &pol->sites[j];
                        char ab[AAGW_ALIAS_MAX + AAGW_SEP_MAX + 1];
                        char bb[AAGW_ALIAS_MAX + AAGW_SEP_MAX + 1];
                        if (i == j || a->len >= b->len)
                                continue;
                        memcpy(ab, a->name, a->len);
                        memcpy(ab + a->len, pol->sep, pol->sep_len);
                        memcpy(bb, b->name, b->len);
                        memcpy(bb + b->len, pol->sep, pol->sep_len);
                        if (!memcmp(ab, bb, a->len + pol->sep_len)) {
                                snprintf(errstr, errstr_size,
                                         "sites[%zu]: \"%s\" and \"%s\" are "
                                         "ambiguous with the separator "
                                         "\"%s\"",
                                         j, b->name, a->name, pol->sep);
                                return false;
                        }
                }
        }
        for (size_t i = 0; i < pol->site_cnt; i++) {
                const struct policy_site *a = &pol->sites[i];
                char ab[AAGW_ALIAS_MAX + AAGW_SEP_MAX + 1];
                /* MirrorMaker 2's topicSource() splits a name at the
                 * first occurrence of the separator.  With letters in
                 * separators that can start inside the alias ("a" with
                 * "aa": "aaa..." splits at 0), and MM2's tooling and
                 * cycle check would read another source than ours. */
                memcpy(ab, a->name, a->len);
                memcpy(ab + a->len, pol->sep, pol->sep_len + 1);
                if (strstr(ab, pol->sep) != ab + a->len) {
                        snprintf(errstr, errstr_size,
                                 "sites[%zu]: \"%s\" followed by the separator "
                                 "\"%s\" holds the separator earlier "
                                 "(\"%s\"): MirrorMaker 2 would read the "
                                 "source alias as \"%.*s\"",
                                 i, a->name, pol->sep, ab,
                                 (int)(strstr(ab, pol->sep) - ab), ab);
                        return false;
                }
        }
        return true;
}

/* The separator names MirrorMaker 2's internal topics too, under either
 * policy: "mm2-offset-syncs" SEP alias SEP "internal" is the longest, and
 * MM2 itself would only find out when the broker refuses to create it. */
static bool check_sep_names(const aagw_repl_policy_t *pol, char *errstr,
                            size_t errstr_size) {
        for (size_t i = 0; i < pol->site_cnt; i++) {
                size_t n = strlen("mm2-offset-syncs") + 2 * pol->sep_len +
                           pol->sites[i].len + strlen("internal");
                if (n > AAGW_TOPIC_MAX) {
                        snprintf(errstr, errstr_size,
                                 "separator: %zu characters are too many "
                                 "with site \"%s\": MirrorMaker 2's topic "
                                 "mm2-offset-syncs<separator>%s<separator>"
                                 "internal would have %zu characters, Kafka "
                                 "allows %d",
                                 pol->sep_len, pol->sites[i].name,
                                 pol->sites[i].name, n, AAGW_TOPIC_MAX);
                        return false;
                }
        }
        return true;
}

static bool take_sites(aagw_repl_policy_t          *pol,
                       const struct aagw_repl_conf *conf, char *errstr,
                       size_t errstr_size) {
        if (!conf->sites || conf->site_cnt < 1 ||
            conf->site_cnt > AAGW_SITES_MAX) {
                snprintf(errstr, errstr_size,
                         "sites: expected 1 to %d site aliases, got %zu",
                         AAGW_SITES_MAX, conf->sites ? conf->site_cnt : 0);
                return false;
        }
        for (size_t i = 0; i < conf->site_cnt; i++) {
                const char *s   = conf->sites[i];
                size_t      len = s ? strlen(s) : 0;
                if (!s || !policy_alias_valid(s, len)) {
                        snprintf(errstr, errstr_size,
                                 "sites[%zu]: \"%s\" is not a site alias (1 "
                                 "to %d of A-Z a-z 0-9 _ -)",
                                 i, s ? s : "", AAGW_ALIAS_MAX);
                        return false;
                }
                if (policy_site_index(pol, s, len) >= 0) {
                        snprintf(errstr, errstr_size,
                                 "sites[%zu]: \"%s\" is listed twice", i, s);
                        return false;
                }
                memcpy(pol->sites[i].name, s, len + 1);
                pol->sites[i].len = len;
                pol->site_cnt     = i + 1;
        }
        return true;
}

/* ------------------------------ LIFETIME ------------------------------- */

void aagw_repl_conf_init(struct aagw_repl_conf *conf) {
        memset(conf, 0, sizeof(*conf));
        conf->naming            = AAGW_NAMING_PREFIX;
        conf->on_bad_provenance = AAGW_BAD_DEAD_LETTER;
        conf->on_missing_id     = AAGW_BAD_PASS;
}

aagw_repl_policy_t *aagw_repl_policy_new(const struct aagw_repl_conf *conf,
                                         char *errstr, size_t errstr_size) {
        /* MirrorMaker 2's default groups.exclude. */
        static const char *const def_groups_exc[] = {"console-consumer-.*",
                                                     "connect-.*", "__.*"};
        /* MirrorMaker 2's default topics.exclude, always applied here: the
         * user's list adds to it (see docs/provenance.md). */
        static const char *const builtin_topics_exc[] = {
            "__.*", ".*[-.]internal", ".*\\.replica"};
        static const char *const match_all[] = {".*"};
        /* MirrorMaker 2's default config.properties.exclude
         * (DefaultConfigPropertyFilter), always applied here: the user's
         * list adds to it. */
        static const char *const builtin_configs_exc[] = {
            "follower\\.replication\\.throttled\\.replicas",
            "leader\\.replication\\.throttled\\.replicas",
            "message\\.timestamp\\..*", "unclean\\.leader\\.election\\.enable",
            "min\\.insync\\.replicas"};
        const char *const  *pats;
        size_t              cnt;
        aagw_repl_policy_t *pol;

        if (!conf) {
                snprintf(errstr, errstr_size, "no configuration");
                return NULL;
        }
        pol = calloc(1, sizeof(*pol));
        if (!pol) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        if (conf->naming != AAGW_NAMING_PREFIX &&
            conf->naming != AAGW_NAMING_IDENTITY) {
                snprintf(errstr, errstr_size, "naming: unknown value %d",
                         (int)conf->naming);
                goto fail;
        }
        if ((unsigned)conf->on_bad_provenance > AAGW_BAD_FAIL ||
            (unsigned)conf->on_missing_id > AAGW_BAD_FAIL) {
                snprintf(errstr, errstr_size, "%s: unknown action %d",
                         (unsigned)conf->on_bad_provenance > AAGW_BAD_FAIL
                             ? "on_bad_provenance"
                             : "on_missing_id",
                         (unsigned)conf->on_bad_provenance > AAGW_BAD_FAIL
                             ? (int)conf->on_bad_provenance
                             : (int)conf->on_missing_id);
                goto fail;
        }
        pol->naming              = conf->naming;
        pol->multi_hop           = conf->multi_hop;
        pol->allow_unknown_sites = conf->allow_unknown_sites;
        pol->on_bad_provenance   = conf->on_bad_provenance;
        pol->on_missing_id       = conf->on_missing_id;

        if (!take_affix("separator", conf->separator, ".", AAGW_SEP_MAX,
                        pol->sep, &pol->sep_len, errstr, errstr_size) ||
            !take_affix("header_prefix", conf->header_prefix, "aagw.",
                        AAGW_AFFIX_MAX, pol->hprefix, &pol->hprefix_len, errstr,
                        errstr_size) ||
            !take_affix("own_prefix", conf->own_prefix, "aagw.", AAGW_AFFIX_MAX,
                        pol->own_prefix, &pol->own_prefix_len, errstr,
                        errstr_size) ||
            !take_affix("unified_suffix", conf->unified_suffix, ".unified",
                        AAGW_AFFIX_MAX, pol->unified_suffix,
                        &pol->unified_suffix_len, errstr, errstr_size))
                goto fail;
        if (!take_sites(pol, conf, errstr, errstr_size))
                goto fail;
        if (!check_sep_names(pol, errstr, errstr_size) ||
            (pol->naming == AAGW_NAMING_PREFIX &&
             !check_alias_sep(pol, errstr, errstr_size)))
                goto fail;
        snprintf(pol->prov_name, sizeof(pol->prov_name), "%sprov",
                 pol->hprefix);

        /* Filters are lists the policy compiles once; calloc() left them
         * empty.  The built-in topic exclusions come first and the user's
         * list adds to them (an error index still counts the user's). */
        pats = conf->topics_include ? conf->topics_include : match_all;
        cnt  = conf->topics_include ? conf->topics_include_cnt : 1;
        if (policy_filter_add(&pol->topics_inc, "topics.include", pats, cnt,
                              errstr, errstr_size) ||
            policy_filter_add(&pol->topics_exc, "topics.exclude (built-in)",
                              builtin_topics_exc, 3, errstr, errstr_size) ||
            (conf->topics_exclude &&
             policy_filter_add(&pol->topics_exc, "topics.exclude",
                               conf->topics_exclude, conf->topics_exclude_cnt,
                               errstr, errstr_size)))
                goto fail;
        pats = conf->groups_include ? conf->groups_include : match_all;
        cnt  = conf->groups_include ? conf->groups_include_cnt : 1;
        if (policy_filter_add(&pol->groups_inc, "groups.include", pats, cnt,
                              errstr, errstr_size))
                goto fail;
        pats = conf->groups_exclude ? conf->groups_exclude : def_groups_exc;
        cnt  = conf->groups_exclude ? conf->groups_exclude_cnt : 3;
        if (policy_filter_add(&pol->groups_exc, "groups.exclude", pats, cnt,
                              errstr, errstr_size))
                goto fail;
        if (policy_filter_add(&pol->configs_exc, "configs.exclude (built-in)",
                              builtin_configs_exc, 5, errstr, errstr_size) ||
            (conf->configs_exclude &&
             policy_filter_add(&pol->configs_exc, "configs.exclude",
                               conf->configs_exclude,
                               conf->configs_exclude_cnt, errstr,
                               errstr_size)))
                goto fail;
        return pol;

fail:
        aagw_repl_policy_destroy(pol);
        return NULL;
}

void aagw_repl_policy_destroy(aagw_repl_policy_t *pol) {
        if (!pol)
                return;
        policy_filter_deinit(&pol->topics_inc);
        policy_filter_deinit(&pol->topics_exc);
        policy_filter_deinit(&pol->groups_inc);
        policy_filter_deinit(&pol->groups_exc);
        policy_filter_deinit(&pol->configs_exc);
        free(pol);
}
