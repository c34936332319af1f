/*
 * gateway/config_values.c: the configuration's keys and values: which row
 * of the key table (config_keys.c) a path names, suggestions for unknown
 * names, and the value checks every file value and flag goes through.
 */
#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aagw_replicator.h"

/* ----------------------------- KEY MATCHING ---------------------------- */

bool gw_cfg_is_list_type(enum cfg_type t) {
        return t == CT_LIST || t == CT_REGEXES || t == CT_FLOWS;
}

/* Does concrete 'path' match table pattern 'pat'?  '*' stands for exactly
 * one segment (an alias or topic name, which never contain '.').  For
 * CT_PROPS the pattern matches the mapping itself; a property name after
 * it (which may contain dots) is returned in '*subp'. */
static bool pattern_match(const char *pat, const char *path, bool props,
                          const char **subp) {
        while (*pat && *path) {
                if (*pat == '*') {
                        const char *dot = strchr(path, '.');
                        size_t seg = dot ? (size_t)(dot - path) : strlen(path);
                        if (seg == 0)
                                return false;
                        path += seg;
                        pat++;
                        continue;
                }
                if (*pat != *path)
                        return false;
                pat++;
                path++;
        }
        if (*pat)
                return false;
        if (!*path) {
                if (subp)
                        *subp = NULL;
                return true;
        }
        if (props && *path == '.' && path[1]) {
                if (subp)
                        *subp = path + 1;
                return true;
        }
        return false;
}

const struct cfg_key *gw_cfg_key_for_path(const char *path, const char **subp) {
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (pattern_match(k->path, path, k->type == CT_PROPS, subp))
                        return k;
        return NULL;
}

const struct cfg_key *gw_cfg_key_exact(const char *pattern) {
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (!strcmp(k->path, pattern))
                        return k;
        return NULL;
}

/* True if some key lives below 'pattern' (so 'pattern' is a section). */
bool gw_cfg_is_section(const char *pattern) {
        size_t len = strlen(pattern);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (!strncmp(k->path, pattern, len) && k->path[len] == '.')
                        return true;
        return false;
}

/* Edit distance with adjacent transpositions (optimal string alignment),
 * case-insensitive, for "did you mean" on unknown keys: "mdoe" is one
 * step from "mode". */
static size_t edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), d[65][65];

        if (la > 64 || lb > 64)
                return 99;
        for (size_t i = 0; i <= la; i++)
                d[i][0] = i;
        for (size_t j = 0; j <= lb; j++)
                d[0][j] = j;
        for (size_t i = 1; i <= la; i++) {
                for (size_t j = 1; j <= lb; j++) {
                        int    ca = tolower((unsigned char)a[i - 1]);
                        int    cb = tolower((unsigned char)b[j - 1]);
                        size_t v  = d[i - 1][j - 1] + (ca != cb);
                        if (d[i - 1][j] + 1 < v)
                                v = d[i - 1][j] + 1;
                        if (d[i][j - 1] + 1 < v)
                                v = d[i][j - 1] + 1;
                        if (i > 1 && j > 1 &&
                            ca == tolower((unsigned char)b[j - 2]) &&
                            cb == tolower((unsigned char)a[i - 2]) &&
                            d[i - 2][j - 2] + 1 < v)
                                v = d[i - 2][j - 2] + 1;
                        d[i][j] = v;
                }
        }
        return d[la][lb];
}

/* The closest key name that may stand at 'prefix' (a pattern, "" for the
 * top level), or NULL if nothing is close enough to be a typo. */
const char *gw_cfg_suggest(const char *prefix, const char *name, char *buf,
                           size_t size) {
        size_t plen = strlen(prefix), best = 99;

        buf[0] = '\0';
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                const char *rest;
                if (plen) {
                        if (strncmp(k->path, prefix, plen) ||
                            k->path[plen] != '.')
                                continue;
                        rest = k->path + plen + 1;
                } else
                        rest = k->path;
                const char *dot = strchr(rest, '.');
                size_t      seg = dot ? (size_t)(dot - rest) : strlen(rest);
                char        cand[128];
                if (seg == 0 || seg >= sizeof(cand) || *rest == '*')
                        continue;
                memcpy(cand, rest, seg);
                cand[seg] = '\0';
                size_t d  = edit_distance(name, cand);
                if (d < best) {
                        best = d;
                        snprintf(buf, size, "%s", cand);
                }
        }
        size_t limit = strlen(name) <= 4 ? 1 : strlen(name) / 3 + 1;
        if (best > limit || best == 0)
                return NULL;
        return buf;
}

/* ----------------------------- VALUE CHECKS ---------------------------- */

bool gw_cfg_all_chars(const char *s, const char *extra) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
                        return false;
        return true;
}

/* Is 'name' a valid instance name under mapping 'kind'?  Topic names
 * under "unify.topics", flows ("east->west") under
 * "replication.per_flow", cluster aliases elsewhere.  '*whyp' says what
 * was expected. */
bool gw_cfg_inst_name_ok(const char *kind, const char *name,
                         const char **whyp) {
        if (!strcmp(kind, "unify.topics")) {
                *whyp = "not a valid topic name";
                return gw_cfg_all_chars(name, "._-") && strlen(name) <= 249;
        }
        if (!strcmp(kind, "replication.per_flow")) {
                const char *arrow = strstr(name, "->");
                char        src[128];
                *whyp = "not a flow SOURCE->TARGET of two cluster aliases";
                if (!arrow || (size_t)(arrow - name) >= sizeof(src))
                        return false;
                snprintf(src, sizeof(src), "%.*s", (int)(arrow - name), name);
                return *src && gw_cfg_all_chars(src, "_-") && arrow[2] &&
                       gw_cfg_all_chars(arrow + 2, "_-") && strcmp(src, arrow + 2) &&
                       strlen(src) <= 64 && strlen(arrow + 2) <= 64;
        }
        *whyp = "not a valid cluster alias (1 to 64 of A-Z a-z 0-9 _ -)";
        return gw_cfg_all_chars(name, "_-") && strlen(name) <= 64;
}

int aagw_duration_parse(const char *s, int64_t *msp) {
        static const struct {
                const char *unit;
                int64_t     ms;
        } units[] = {{"ms", 1},          {"s", 1000},     {"m", 60000},
                     {"h", 3600000},     {"d", 86400000}};
        int64_t total = 0;

        if (!s || !*s)
                return -1;
        while (*s) {
                char   *end;
                int64_t v;
                size_t  i;

                if (!isdigit((unsigned char)*s))
                        return -1;
                errno = 0;
                v     = strtoll(s, &end, 10);
                if (errno || end == s)
                        return -1;
                s = end;
                for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                        size_t ul = strlen(units[i].unit);
                        /* "ms" must win over "m". */
                        if (!strncmp(s, units[i].unit, ul) &&
                            !(ul == 1 && s[0] == 'm' && s[1] == 's'))
                                break;
                }
                if (i == sizeof(units) / sizeof(units[0]))
                        return -1;
                if (v > INT64_MAX / units[i].ms ||
                    total > INT64_MAX - v * units[i].ms)
                        return -1;
                total += v * units[i].ms;
                s += strlen(units[i].unit);
        }
        *msp = total;
        return 0;
}

void aagw_duration_format(int64_t ms, char *buf, size_t size) {
        static const struct {
                const char *unit;
                int64_t     ms;
        } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000},
                     {"s", 1000}};
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (ms > 0 && ms % units[i].ms == 0) {
                        snprintf(buf, size, "%" PRId64 "%s", ms / units[i].ms,
                                 units[i].unit);
                        return;
                }
        }
        snprintf(buf, size, "%" PRId64 "ms", ms);
}

void gw_cfg_choices_text(const char *choices, char *buf, size_t size) {
        size_t o = 0;
        for (const char *c = choices; *c && o + 3 < size; c++) {
                if (*c == '|') {
                        buf[o++] = ',';
                        buf[o++] = ' ';
                } else
                        buf[o++] = *c;
        }
        buf[o] = '\0';
}

static bool enum_has(const char *choices, const char *s) {
        size_t len = strlen(s);
        for (const char *c = choices; c && *c;) {
                const char *bar = strchr(c, '|');
                size_t      cl  = bar ? (size_t)(bar - c) : strlen(c);
                if (cl == len && !strncmp(c, s, len))
                        return true;
                c = bar ? bar + 1 : NULL;
        }
        return false;
}

static bool valid_hostport(const char *s, char *why, size_t size) {
        const char *colon;
        char       *end;
        long        port;

        if (s[0] == '[') {
                const char *rb = strchr(s, ']');
                if (!rb || rb[1] != ':' || rb == s + 1) {
                        snprintf(why, size,
                                 "expected HOST:PORT or [IPV6]:PORT, got \"%s\"",
                                 s);
                        return false;
                }
                colon = rb + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s))) {
                        snprintf(why, size,
                                 "expected HOST:PORT or [IPV6]:PORT, got \"%s\"",
                                 s);
                        return false;
                }
        }
        errno = 0;
        port  = strtol(colon + 1, &end, 10);
        if (errno || *end || end == colon + 1 || port < 0 || port > 65535) {
                snprintf(why, size, "port must be 0..65535, got \"%s\"",
                         colon + 1);
                return false;
        }
        return true;
}

/* gw_cfg_check_value() without the care for secrets. */
static int check_value(const struct cfg_key *k, const char *s, char **normp,
                       char *why, size_t size) {
        char    buf[512];
        int64_t v;
        size_t  len = strlen(s);

        /* 'buf' holds a normalized form where a type has one; other values
         * are kept whole, whatever their length. */
        buf[0] = '\0';
        switch (k->type) {
        case CT_STR:
        case CT_LIST:
                if (len == 0) {
                        snprintf(why, size, "expected a non-empty string");
                        return -1;
                }
                if ((k->min && (int64_t)len < k->min) ||
                    (k->max && (int64_t)len > k->max)) {
                        snprintf(why, size,
                                 "expected %" PRId64 " to %" PRId64
                                 " characters",
                                 k->min ? k->min : 1, k->max);
                        if (!(k->flags & CF_SECRET))
                                snprintf(why + strlen(why),
                                         size - strlen(why), ", got %zu", len);
                        return -1;
                }
                break;
        case CT_NAME:
                if (!gw_cfg_all_chars(s, "._-") || len > (size_t)k->max) {
                        snprintf(why, size,
                                 "expected 1 to %" PRId64
                                 " of A-Z a-z 0-9 . _ -, got \"%s\"",
                                 k->max, s);
                        return -1;
                }
                break;
        case CT_ALIAS:
                if (!gw_cfg_all_chars(s, "_-") || len > 64) {
                        snprintf(why, size,
                                 "expected a cluster alias (1 to 64 of A-Z "
                                 "a-z 0-9 _ -), got \"%s\"",
                                 s);
                        return -1;
                }
                break;
        case CT_INT: {
                char *end;
                errno = 0;
                v     = strtoll(s, &end, 10);
                if (errno || end == s || *end) {
                        snprintf(why, size, "expected an integer, got \"%s\"",
                                 s);
                        return -1;
                }
                if (v < k->min || v > k->max) {
                        snprintf(why, size,
                                 "expected an integer from %" PRId64
                                 " to %" PRId64 ", got %" PRId64,
                                 k->min, k->max, v);
                        return -1;
                }
                snprintf(buf, sizeof(buf), "%" PRId64, v);
                break;
        }
        case CT_BOOL:
                if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
                    !strcasecmp(s, "on"))
                        snprintf(buf, sizeof(buf), "true");
                else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") ||
                         !strcasecmp(s, "off"))
                        snprintf(buf, sizeof(buf), "false");
                else {
                        snprintf(why, size,
                                 "expected true or false, got \"%s\"", s);
                        return -1;
                }
                break;
        case CT_ENUM:
                if (!enum_has(k->choices, s)) {
                        char c[256];
                        gw_cfg_choices_text(k->choices, c, sizeof(c));
                        snprintf(why, size, "expected one of %s, got \"%s\"",
                                 c, s);
                        return -1;
                }
                break;
        case CT_DURATION: {
                char a[32], b[32];
                if (aagw_duration_parse(s, &v) == -1) {
                        snprintf(why, size,
                                 "expected a duration such as 500ms, 5s, 10m, "
                                 "24h or 7d, got \"%s\"",
                                 s);
                        return -1;
                }
                if (v < k->min || v > k->max) {
                        aagw_duration_format(k->min, a, sizeof(a));
                        aagw_duration_format(k->max, b, sizeof(b));
                        snprintf(why, size,
                                 "expected a duration from %s to %s, got "
                                 "\"%s\"",
                                 a, b, s);
                        return -1;
                }
                aagw_duration_format(v, buf, sizeof(buf));
                break;
        }
        case CT_HOSTPORT:
                if (!valid_hostport(s, why, size))
                        return -1;
                break;
        case CT_IDRULE:
        case CT_KEYRULE:
                /* The policy's grammar (policy/idrule.c), not a copy. */
                if (!aagw_id_rule_check(s, k->type == CT_KEYRULE, why, size))
                        return -1;
                break;
        case CT_SEP:
                /* Any string MirrorMaker 2 can name topics with: it goes
                 * into every remote and internal topic name, so only a
                 * topic name's characters (MM2 takes any string, and
                 * fails later at the broker). */
                if (len < 1 || len > (size_t)k->max ||
                    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
                              "vwxyz0123456789._-") != len) {
                        snprintf(why, size,
                                 "expected 1 to %" PRId64 " of the characters of a "
                                 "topic name (A-Z a-z 0-9 . _ -), got \"%s\"",
                                 k->max, s);
                        return -1;
                }
                break;
        case CT_REGEXES:
                /* The same check the policy's filters make at start, so
                 * `config check` refuses exactly what `run` would. */
                if (aagw_regex_check(s, buf, sizeof(buf))) {
                        snprintf(why, size, "invalid regular expression %s",
                                 buf);
                        return -1;
                }
                break;
        case CT_FLOWS: {
                /* "east->west", spaces around the arrow allowed. */
                char        src[128], dst[128];
                const char *arrow = strstr(s, "->");
                size_t      o     = 0;
                if (!arrow) {
                        snprintf(why, size,
                                 "expected SOURCE->TARGET, got \"%s\"", s);
                        return -1;
                }
                for (const char *p = s; p < arrow && o < sizeof(src) - 1; p++)
                        if (!isspace((unsigned char)*p))
                                src[o++] = *p;
                src[o] = '\0';
                o      = 0;
                for (const char *p = arrow + 2; *p && o < sizeof(dst) - 1; p++)
                        if (!isspace((unsigned char)*p))
                                dst[o++] = *p;
                dst[o] = '\0';
                if (!gw_cfg_all_chars(src, "_-") || !gw_cfg_all_chars(dst, "_-")) {
                        snprintf(why, size,
                                 "expected SOURCE->TARGET with cluster "
                                 "aliases, got \"%s\"",
                                 s);
                        return -1;
                }
                if (!strcmp(src, dst)) {
                        snprintf(why, size,
                                 "a flow needs two different clusters, got "
                                 "\"%s\"",
                                 s);
                        return -1;
                }
                snprintf(buf, sizeof(buf), "%s->%s", src, dst);
                break;
        }
        case CT_PROPS:
                break;
        }
        if (!(*normp = strdup(buf[0] ? buf : s))) {
                snprintf(why, size, "out of memory");
                return -1;
        }
        return 0;
}

/*
 * Check one scalar (or one list item) against its key's type.  On success
 * '*normp' is a malloc()ed normalized copy (durations in canonical units,
 * booleans as true/false, flows without spaces).  On failure 'why' holds
 * the reason; for a secret (CF_SECRET) the reason never holds the value:
 * a length rule is stated without the length, anything else is "invalid
 * value".
 */
int gw_cfg_check_value(const struct cfg_key *k, const char *s, char **normp,
                       char *why, size_t size) {
        int rc = check_value(k, s, normp, why, size);

        if (rc == -1 && (k->flags & CF_SECRET) && k->type != CT_STR)
                snprintf(why, size, "invalid value");
        return rc;
}
