/*
 * gateway/config.c: loading, overriding, checking and printing the config.
 *
 * The YAML file is loaded into a libyaml document; the walk below maps each
 * node onto a row of the key table (config_keys.c) and stores the value by
 * its concrete path with its 1-based line:column.  Flags go through the
 * same value checks (check_value()), so a bad --policy and a bad
 * `policy:` get the same words.  Problems are collected, not fatal, so one
 * `aagw config check` run lists every mistake in the file.
 */
#include "gateway_int.h" /* gw_split_hostport, gw_host_is_loopback */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "aagw_replicator.h"

enum origin { ORIG_DEFAULT, ORIG_FILE, ORIG_FLAG };

/* Where a value (or one list item) came from. */
struct src {
        const char *file; /* interned file name, or the flag; NULL: default */
        int         line, col;
};

/* One stored setting.  Lists and property maps keep every item with its
 * own source so a later check can point at the exact element. */
struct cfg_val {
        const struct cfg_key *key;
        char                 *path;
        enum origin           origin;
        char                **items; /* CT_PROPS: name, value, name, ... */
        struct src           *srcs;
        size_t                n, cap;
};

/* A named entry of an instance mapping: clusters.east, unify.topics.clicks */
struct cfg_inst {
        char      *kind; /* "clusters", "unify.topics" */
        char      *name;
        struct src src;
};

struct aagw_config {
        struct cfg_val  *vals;
        size_t           nvals, capvals;
        struct cfg_inst *insts;
        size_t           ninsts, capinsts;
        char           **names; /* interned file names and flag names */
        size_t           nnames;
        char            *errs;
        size_t           errlen, errcap;
        int              nerrs;
        size_t           errs_shown; /* length before the "more" line */
        char            *warns; /* settings read but not applied */
        size_t           warnlen, warncap;
        bool             from_mm2; /* a file was read as mm2.properties */
};

/* ------------------------------- ERRORS -------------------------------- */

/* Errors past the first AAGW_CONFIG_ERRORS_SHOWN are counted, not
 * listed: a file of 200,000 unknown keys gave 200,000 lines.  The last
 * line then says how many more there are ("... and 199980 more errors"),
 * rewritten in place as the count grows. */
static void err_append(aagw_config_t *cfg, const char *line) {
        size_t len = strlen(line);
        char   more[96];

        if (cfg->nerrs >= AAGW_CONFIG_ERRORS_SHOWN) {
                cfg->nerrs++;
                if (!cfg->errs_shown)
                        cfg->errs_shown = cfg->errlen;
                len = (size_t)snprintf(
                    more, sizeof(more),
                    "... and %d more error%s (only the first %d are listed)",
                    cfg->nerrs - AAGW_CONFIG_ERRORS_SHOWN,
                    cfg->nerrs - AAGW_CONFIG_ERRORS_SHOWN == 1 ? "" : "s",
                    AAGW_CONFIG_ERRORS_SHOWN);
                cfg->errlen = cfg->errs_shown;
                line        = more;
        } else
                cfg->nerrs++;
        /* Counted even when the text cannot be kept: an error is never
         * lost. */
        if (cfg->errlen + len + 2 > cfg->errcap) {
                size_t ncap = (cfg->errcap + len + 2) * 2;
                char  *p    = realloc(cfg->errs, ncap);
                if (!p)
                        return;
                cfg->errs   = p;
                cfg->errcap = ncap;
        }
        memcpy(cfg->errs + cfg->errlen, line, len);
        cfg->errlen += len;
        cfg->errs[cfg->errlen++] = '\n';
        cfg->errs[cfg->errlen]   = '\0';
}

/* Record "file:line:col: path: message", or "--flag: path: message" for a
 * flag, or "path: message" when there is no source at all. */
static void __attribute__((format(printf, 4, 5)))
err_at(aagw_config_t *cfg, const struct src *src, const char *path,
       const char *fmt, ...) {
        char    msg[1024], line[1600];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (src && src->file && src->line > 0)
                snprintf(line, sizeof(line), "%s:%d:%d: %s%s%s", src->file,
                         src->line, src->col, path ? path : "",
                         path ? ": " : "", msg);
        else if (src && src->file)
                snprintf(line, sizeof(line), "%s: %s%s%s", src->file,
                         path ? path : "", path ? ": " : "", msg);
        else
                snprintf(line, sizeof(line), "%s%s%s", path ? path : "",
                         path ? ": " : "", msg);
        err_append(cfg, line);
}

const char *aagw_config_errors(const aagw_config_t *cfg) {
        return cfg->errs ? cfg->errs : "";
}

/* Intern a file or flag name so values can point at it for their whole
 * life without each keeping a copy. */
static const char *intern(aagw_config_t *cfg, const char *name) {
        for (size_t i = 0; i < cfg->nnames; i++)
                if (!strcmp(cfg->names[i], name))
                        return cfg->names[i];
        char **p = realloc(cfg->names, (cfg->nnames + 1) * sizeof(*p));
        if (!p)
                return "?";
        cfg->names = p;
        if (!(p[cfg->nnames] = strdup(name)))
                return "?";
        return p[cfg->nnames++];
}

void aagw_config_error_at(aagw_config_t *cfg, const char *file, int line,
                          const char *path, const char *fmt, ...) {
        struct src src = {intern(cfg, file), line, line > 0 ? 1 : 0};
        char       msg[1024];
        va_list    ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        err_at(cfg, &src, path, "%s", msg);
}

void aagw_config_warn_at(aagw_config_t *cfg, const char *file, int line,
                         const char *path, const char *fmt, ...) {
        char    msg[1024], out[1600];
        size_t  len;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(out, sizeof(out), "%s:%d: %s%s%s\n", file, line,
                 path ? path : "", path ? ": " : "", msg);
        len = strlen(out);
        if (cfg->warnlen + len + 1 > cfg->warncap) {
                size_t ncap = (cfg->warncap + len + 1) * 2;
                char  *p    = realloc(cfg->warns, ncap);
                if (!p)
                        return;
                cfg->warns   = p;
                cfg->warncap = ncap;
        }
        memcpy(cfg->warns + cfg->warnlen, out, len + 1);
        cfg->warnlen += len;
}

bool aagw_config_from_mm2(const aagw_config_t *cfg) {
        return cfg->from_mm2;
}

const char *aagw_config_warnings(const aagw_config_t *cfg) {
        return cfg->warns ? cfg->warns : "";
}

/* ----------------------------- KEY MATCHING ---------------------------- */

static bool is_list_type(enum cfg_type t) {
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

static const struct cfg_key *key_for_path(const char *path, const char **subp) {
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (pattern_match(k->path, path, k->type == CT_PROPS, subp))
                        return k;
        return NULL;
}

static const struct cfg_key *key_exact(const char *pattern) {
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (!strcmp(k->path, pattern))
                        return k;
        return NULL;
}

/* True if some key lives below 'pattern' (so 'pattern' is a section). */
static bool is_section(const char *pattern) {
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
static const char *suggest(const char *prefix, const char *name, char *buf,
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

static bool all_chars(const char *s, const char *extra) {
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
static bool inst_name_ok(const char *kind, const char *name,
                         const char **whyp) {
        if (!strcmp(kind, "unify.topics")) {
                *whyp = "not a valid topic name";
                return all_chars(name, "._-") && strlen(name) <= 249;
        }
        if (!strcmp(kind, "replication.per_flow")) {
                const char *arrow = strstr(name, "->");
                char        src[128];
                *whyp = "not a flow SOURCE->TARGET of two cluster aliases";
                if (!arrow || (size_t)(arrow - name) >= sizeof(src))
                        return false;
                snprintf(src, sizeof(src), "%.*s", (int)(arrow - name), name);
                return *src && all_chars(src, "_-") && arrow[2] &&
                       all_chars(arrow + 2, "_-") && strcmp(src, arrow + 2) &&
                       strlen(src) <= 64 && strlen(arrow + 2) <= 64;
        }
        *whyp = "not a valid cluster alias (1 to 64 of A-Z a-z 0-9 _ -)";
        return all_chars(name, "_-") && strlen(name) <= 64;
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

static void choices_text(const char *choices, char *buf, size_t size) {
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

/*
 * Check one scalar (or one list item) against its key's type.  On success
 * '*normp' is a malloc()ed normalized copy (durations in canonical units,
 * booleans as true/false, flows without spaces).  On failure 'why' holds
 * the reason.
 */
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
                                 " characters, got %zu",
                                 k->min ? k->min : 1, k->max, len);
                        return -1;
                }
                break;
        case CT_NAME:
                if (!all_chars(s, "._-") || len > (size_t)k->max) {
                        snprintf(why, size,
                                 "expected 1 to %" PRId64
                                 " of A-Z a-z 0-9 . _ -, got \"%s\"",
                                 k->max, s);
                        return -1;
                }
                break;
        case CT_ALIAS:
                if (!all_chars(s, "_-") || len > 64) {
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
                        choices_text(k->choices, c, sizeof(c));
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
                if (len < 1 || len > 8 || strspn(s, "._-") != len) {
                        snprintf(why, size,
                                 "expected 1 to 8 of the characters . _ -, got "
                                 "\"%s\"",
                                 s);
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
                if (!all_chars(src, "_-") || !all_chars(dst, "_-")) {
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

/* ---------------------------- VALUE STORAGE ---------------------------- */

static struct cfg_val *val_find(const aagw_config_t *cfg, const char *path) {
        for (size_t i = 0; i < cfg->nvals; i++)
                if (!strcmp(cfg->vals[i].path, path))
                        return &cfg->vals[i];
        return NULL;
}

static void val_clear(struct cfg_val *v) {
        for (size_t i = 0; i < v->n; i++)
                free(v->items[i]);
        v->n = 0;
}

static struct cfg_val *val_get(aagw_config_t *cfg, const struct cfg_key *k,
                               const char *path) {
        struct cfg_val *v = val_find(cfg, path);
        if (v)
                return v;
        if (cfg->nvals == cfg->capvals) {
                size_t          ncap = cfg->capvals ? cfg->capvals * 2 : 32;
                struct cfg_val *p = realloc(cfg->vals, ncap * sizeof(*p));
                if (!p)
                        return NULL;
                cfg->vals    = p;
                cfg->capvals = ncap;
        }
        v = &cfg->vals[cfg->nvals];
        memset(v, 0, sizeof(*v));
        if (!(v->path = strdup(path)))
                return NULL;
        v->key = k;
        cfg->nvals++;
        return v;
}

/* Append an item (takes ownership of 'item'). */
static int val_push(struct cfg_val *v, char *item, const struct src *src) {
        if (v->n == v->cap) {
                size_t      ncap  = v->cap ? v->cap * 2 : 4;
                char      **items = realloc(v->items, ncap * sizeof(*items));
                if (!items)
                        goto fail;
                v->items    = items;
                struct src *srcs = realloc(v->srcs, ncap * sizeof(*srcs));
                if (!srcs)
                        goto fail;
                v->srcs = srcs;
                v->cap  = ncap;
        }
        v->items[v->n] = item;
        v->srcs[v->n]  = src ? *src : (struct src){NULL, 0, 0};
        v->n++;
        return 0;
fail:
        free(item);
        return -1;
}

static void val_remove(aagw_config_t *cfg, struct cfg_val *v) {
        size_t idx = (size_t)(v - cfg->vals);
        val_clear(v);
        free(v->items);
        free(v->srcs);
        free(v->path);
        memmove(&cfg->vals[idx], &cfg->vals[idx + 1],
                (cfg->nvals - idx - 1) * sizeof(*v));
        cfg->nvals--;
}

static void inst_add(aagw_config_t *cfg, const char *kind, const char *name,
                     const struct src *src) {
        for (size_t i = 0; i < cfg->ninsts; i++)
                if (!strcmp(cfg->insts[i].kind, kind) &&
                    !strcmp(cfg->insts[i].name, name))
                        return;
        if (cfg->ninsts == cfg->capinsts) {
                size_t           ncap = cfg->capinsts ? cfg->capinsts * 2 : 8;
                struct cfg_inst *p = realloc(cfg->insts, ncap * sizeof(*p));
                if (!p)
                        return;
                cfg->insts    = p;
                cfg->capinsts = ncap;
        }
        struct cfg_inst *in = &cfg->insts[cfg->ninsts];
        in->kind            = strdup(kind);
        in->name            = strdup(name);
        in->src             = src ? *src : (struct src){NULL, 0, 0};
        if (!in->kind || !in->name) {
                free(in->kind);
                free(in->name);
                return;
        }
        cfg->ninsts++;
}

/* For a concrete path under an instance mapping ("clusters.east.x"),
 * record the instance ("clusters", "east").  The kind is the pattern's
 * text before ".*". */
static void note_instance(aagw_config_t *cfg, const struct cfg_key *k,
                          const char *path, const struct src *src) {
        const char *star = strstr(k->path, ".*");
        if (!star)
                return;
        size_t klen = (size_t)(star - k->path);
        char   kind[128], name[128];
        if (klen >= sizeof(kind))
                return;
        memcpy(kind, k->path, klen);
        kind[klen]       = '\0';
        const char *nm   = path + klen + 1;
        const char *dot  = strchr(nm, '.');
        size_t      nlen = dot ? (size_t)(dot - nm) : strlen(nm);
        if (nlen >= sizeof(name))
                return;
        memcpy(name, nm, nlen);
        name[nlen] = '\0';
        inst_add(cfg, kind, name, src);
}

/* ------------------------------ LIFECYCLE ------------------------------ */

aagw_config_t *aagw_config_new(void) {
        aagw_config_t *cfg = calloc(1, sizeof(*cfg));

        if (!cfg)
                return NULL;
        /* Every plain key with a default gets a value now, so getters,
         * the dump and overrides all see one representation. */
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                if (!k->def || strchr(k->path, '*'))
                        continue;
                struct cfg_val *v = val_get(cfg, k, k->path);
                if (!v)
                        goto fail;
                v->origin = ORIG_DEFAULT;
                for (const char *p = k->def; *p;) {
                        const char *nl  = strchr(p, '\n');
                        size_t      len = nl ? (size_t)(nl - p) : strlen(p);
                        char       *raw  = strndup(p, len), *item = NULL;
                        char        why[256];
                        /* Normalize defaults like user values ("24h" is
                         * shown as "1d"), so a dump loads back equal. */
                        if (!raw ||
                            check_value(k, raw, &item, why, sizeof(why)) ||
                            val_push(v, item, NULL) == -1) {
                                free(raw);
                                goto fail;
                        }
                        free(raw);
                        p += len + (nl ? 1 : 0);
                        if (!is_list_type(k->type))
                                break;
                }
        }
        return cfg;
fail:
        aagw_config_destroy(cfg);
        return NULL;
}

void aagw_config_destroy(aagw_config_t *cfg) {
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->nvals; i++) {
                val_clear(&cfg->vals[i]);
                free(cfg->vals[i].items);
                free(cfg->vals[i].srcs);
                free(cfg->vals[i].path);
        }
        free(cfg->vals);
        for (size_t i = 0; i < cfg->ninsts; i++) {
                free(cfg->insts[i].kind);
                free(cfg->insts[i].name);
        }
        free(cfg->insts);
        for (size_t i = 0; i < cfg->nnames; i++)
                free(cfg->names[i]);
        free(cfg->names);
        free(cfg->errs);
        free(cfg->warns);
        free(cfg);
}

/* ---------------------------- ENV SUBSTITUTION ------------------------- */

/*
 * Replace ${NAME} and ${NAME:-default} with the environment's value; "$${"
 * stands for a literal "${".  Secrets thus stay out of the file.  Returns a
 * malloc()ed string, or NULL with the reason in 'why'.
 */
static char *subst_env(const char *in, char *why, size_t size) {
        size_t cap = strlen(in) + 64, o = 0;
        char  *out = malloc(cap);

        if (!out) {
                snprintf(why, size, "out of memory");
                return NULL;
        }
        for (const char *p = in; *p;) {
                const char *val = NULL;
                size_t      vlen;
                if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
                        val  = "${";
                        vlen = 2;
                        p += 3;
                } else if (p[0] == '$' && p[1] == '{') {
                        const char *close = strchr(p + 2, '}');
                        const char *name  = p + 2;
                        char        var[256];
                        if (!close) {
                                snprintf(why, size,
                                         "unterminated ${ in \"%s\"", in);
                                goto fail;
                        }
                        size_t      nlen = strcspn(name, ":}");
                        const char *def  = NULL;
                        size_t      dlen = 0;
                        if (name[nlen] == ':' && name[nlen + 1] == '-') {
                                def  = name + nlen + 2;
                                dlen = (size_t)(close - def);
                        } else if (name + nlen != close) {
                                snprintf(why, size,
                                         "bad variable reference \"%.*s\" "
                                         "(use ${NAME} or ${NAME:-default})",
                                         (int)(close - p + 1), p);
                                goto fail;
                        }
                        if (nlen == 0 || nlen >= sizeof(var) ||
                            !(isalpha((unsigned char)name[0]) ||
                              name[0] == '_')) {
                                snprintf(why, size,
                                         "bad environment variable name in "
                                         "\"%.*s\"",
                                         (int)(close - p + 1), p);
                                goto fail;
                        }
                        memcpy(var, name, nlen);
                        var[nlen] = '\0';
                        if (!all_chars(var, "_")) {
                                snprintf(why, size,
                                         "bad environment variable name "
                                         "\"%s\"",
                                         var);
                                goto fail;
                        }
                        val = getenv(var);
                        if (val)
                                vlen = strlen(val);
                        else if (def) {
                                val  = def;
                                vlen = dlen;
                        } else {
                                snprintf(why, size,
                                         "environment variable %s is not set",
                                         var);
                                goto fail;
                        }
                        p = close + 1;
                } else {
                        val  = p;
                        vlen = 1;
                        p++;
                }
                if (o + vlen + 1 > cap) {
                        cap       = (o + vlen + 1) * 2;
                        char *np2 = realloc(out, cap);
                        if (!np2) {
                                snprintf(why, size, "out of memory");
                                goto fail;
                        }
                        out = np2;
                }
                memcpy(out + o, val, vlen);
                o += vlen;
        }
        out[o] = '\0';
        return out;
fail:
        free(out);
        return NULL;
}

/* ------------------------------ YAML WALK ------------------------------ */

/* The key names of one mapping, for the duplicate check: a hash set, so
 * a mapping of n keys costs O(n), not the O(n^2) of comparing each key
 * with all before it (200,000 keys took over a minute that way).  It only
 * borrows the names (the document owns them).  If the table cannot be
 * allocated, every name counts as new: no duplicate is reported, nothing
 * else changes. */
struct nameset {
        const char **slot;
        size_t       mask;
};

static void nameset_init(struct nameset *ns, size_t n) {
        size_t cap = 16;
        while (cap < n * 2)
                cap *= 2;
        ns->slot = calloc(cap, sizeof(*ns->slot));
        ns->mask = cap - 1;
}

static void nameset_deinit(struct nameset *ns) {
        free(ns->slot);
}

/* Add 'name'; false if it was there already. */
static bool nameset_add(struct nameset *ns, const char *name) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        if (!ns->slot)
                return true;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
                h = (h ^ *c) * 1099511628211ull;
        for (size_t i = (size_t)h & ns->mask;; i = (i + 1) & ns->mask) {
                if (!ns->slot[i]) {
                        ns->slot[i] = name;
                        return true;
                }
                if (!strcmp(ns->slot[i], name))
                        return false;
        }
}

struct walk {
        aagw_config_t *cfg;
        yaml_document_t *doc;
        const char      *file; /* interned */
};

static struct src node_src(const struct walk *w, const yaml_node_t *n) {
        return (struct src){w->file, (int)n->start_mark.line + 1,
                            (int)n->start_mark.column + 1};
}

static const char *node_kind(const yaml_node_t *n) {
        switch (n->type) {
        case YAML_SCALAR_NODE:
                return "a scalar";
        case YAML_SEQUENCE_NODE:
                return "a list";
        case YAML_MAPPING_NODE:
                return "a mapping";
        default:
                return "nothing";
        }
}

/* YAML's null: an empty plain scalar, "~" or "null".  Setting a key to
 * null resets it to its default. */
static bool scalar_is_null(const yaml_node_t *n) {
        if (n->type != YAML_SCALAR_NODE ||
            n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        const char *s = (const char *)n->data.scalar.value;
        return !*s || !strcmp(s, "~") || !strcmp(s, "null") ||
               !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* Substitute, check and normalize one scalar node into a new item. */
static char *scalar_item(struct walk *w, const struct cfg_key *k,
                         const char *path, const yaml_node_t *n) {
        char        why[1024], *raw, *norm = NULL;
        struct src  src = node_src(w, n);

        if (n->type != YAML_SCALAR_NODE) {
                err_at(w->cfg, &src, path, "expected a scalar value, got %s",
                       node_kind(n));
                return NULL;
        }
        raw = subst_env((const char *)n->data.scalar.value, why, sizeof(why));
        if (!raw) {
                err_at(w->cfg, &src, path, "%s", why);
                return NULL;
        }
        if (check_value(k, raw, &norm, why, sizeof(why)) == -1) {
                /* Never echo a secret's value back in an error. */
                if (k->flags & CF_SECRET)
                        err_at(w->cfg, &src, path, "invalid value");
                else
                        err_at(w->cfg, &src, path, "%s", why);
        }
        free(raw);
        return norm;
}

static void walk_props(struct walk *w, const struct cfg_key *k,
                       const char *path, yaml_node_t *map) {
        struct cfg_val *v;

        if (scalar_is_null(map))
                return;
        if (map->type != YAML_MAPPING_NODE) {
                struct src src = node_src(w, map);
                err_at(w->cfg, &src, path,
                       "expected a mapping of librdkafka properties, got %s",
                       node_kind(map));
                return;
        }
        if (!(v = val_get(w->cfg, k, path)))
                return;
        if (v->origin != ORIG_FILE)
                val_clear(v);
        v->origin = ORIG_FILE;
        /* Names already there (an earlier file) count as seen. */
        struct nameset seen;
        nameset_init(&seen, (size_t)(map->data.mapping.pairs.top -
                                     map->data.mapping.pairs.start) +
                                v->n / 2);
        for (size_t i = 0; i < v->n; i += 2)
                nameset_add(&seen, v->items[i]);
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
             p < map->data.mapping.pairs.top; p++) {
                yaml_node_t *kn = yaml_document_get_node(w->doc, p->key);
                yaml_node_t *vn = yaml_document_get_node(w->doc, p->value);
                struct src   ks = node_src(w, kn), vs = node_src(w, vn);
                char         why[1024], sub[2048];

                if (kn->type != YAML_SCALAR_NODE) {
                        err_at(w->cfg, &ks, path,
                               "property names must be scalars");
                        continue;
                }
                const char *name = (const char *)kn->data.scalar.value;
                snprintf(sub, sizeof(sub), "%s.%s", path, name);
                if (!nameset_add(&seen, name)) {
                        err_at(w->cfg, &ks, sub, "duplicate key");
                        continue;
                }
                if (vn->type != YAML_SCALAR_NODE) {
                        err_at(w->cfg, &vs, sub,
                               "expected a scalar value, got %s",
                               node_kind(vn));
                        continue;
                }
                char *val = subst_env((const char *)vn->data.scalar.value,
                                      why, sizeof(why));
                if (!val) {
                        err_at(w->cfg, &vs, sub, "%s", why);
                        continue;
                }
                char *nm = strdup(name);
                if (!nm) {
                        free(val);
                        continue;
                }
                val_push(v, nm, &ks);
                val_push(v, val, &vs);
        }
        nameset_deinit(&seen);
}

static void walk_value(struct walk *w, const struct cfg_key *k,
                       const char *path, yaml_node_t *n) {
        struct cfg_val *v;

        if (k->type == CT_PROPS) {
                walk_props(w, k, path, n);
                return;
        }
        if (scalar_is_null(n)) {
                if ((v = val_find(w->cfg, path)) && !k->def)
                        val_remove(w->cfg, v);
                return;
        }
        if (is_list_type(k->type) && n->type == YAML_SEQUENCE_NODE) {
                char **items = calloc((size_t)(n->data.sequence.items.top -
                                               n->data.sequence.items.start) +
                                          1,
                                      sizeof(*items));
                struct src *srcs =
                    calloc((size_t)(n->data.sequence.items.top -
                                    n->data.sequence.items.start) +
                               1,
                           sizeof(*srcs));
                size_t cnt = 0;
                bool   bad = false;
                if (!items || !srcs) {
                        free(items);
                        free(srcs);
                        return;
                }
                for (yaml_node_item_t *it = n->data.sequence.items.start;
                     it < n->data.sequence.items.top; it++) {
                        yaml_node_t *in = yaml_document_get_node(w->doc, *it);
                        char        *s  = scalar_item(w, k, path, in);
                        if (!s) {
                                bad = true;
                                continue;
                        }
                        srcs[cnt]    = node_src(w, in);
                        items[cnt++] = s;
                }
                if (!bad && (v = val_get(w->cfg, k, path))) {
                        val_clear(v);
                        v->origin = ORIG_FILE;
                        for (size_t i = 0; i < cnt; i++)
                                val_push(v, items[i], &srcs[i]);
                } else {
                        for (size_t i = 0; i < cnt; i++)
                                free(items[i]);
                }
                free(items);
                free(srcs);
                return;
        }
        /* A scalar; for list keys a lone scalar is a one-item list. */
        char *s = scalar_item(w, k, path, n);
        if (!s)
                return;
        if (!(v = val_get(w->cfg, k, path))) {
                free(s);
                return;
        }
        val_clear(v);
        v->origin      = ORIG_FILE;
        struct src src = node_src(w, n);
        val_push(v, s, &src);
}

/*
 * Walk mapping 'map' whose keys live below 'path' (concrete) and 'pat'
 * (the same path with instance names replaced by '*'); both "" at the top.
 */
static void walk_mapping(struct walk *w, yaml_node_t *map, const char *path,
                         const char *pat) {
        char sub_path[1024], sub_pat[1024], want[1024], buf[128];

        if (map->type != YAML_MAPPING_NODE) {
                struct src src = node_src(w, map);
                if (scalar_is_null(map))
                        return;
                err_at(w->cfg, &src, *path ? path : NULL,
                       "expected a mapping, got %s", node_kind(map));
                return;
        }
        struct nameset seen;
        nameset_init(&seen, (size_t)(map->data.mapping.pairs.top -
                                     map->data.mapping.pairs.start));
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
             p < map->data.mapping.pairs.top; p++) {
                yaml_node_t *kn = yaml_document_get_node(w->doc, p->key);
                yaml_node_t *vn = yaml_document_get_node(w->doc, p->value);
                struct src   ks = node_src(w, kn);
                const char  *name;

                if (kn->type != YAML_SCALAR_NODE) {
                        err_at(w->cfg, &ks, *path ? path : NULL,
                               "keys must be scalars, got %s", node_kind(kn));
                        continue;
                }
                name = (const char *)kn->data.scalar.value;
                snprintf(sub_path, sizeof(sub_path), "%s%s%s", path,
                         *path ? "." : "", name);
                /* Duplicate keys in one mapping: YAML forbids them and
                 * libyaml does not check. */
                if (!nameset_add(&seen, name)) {
                        err_at(w->cfg, &ks, sub_path,
                               "duplicate key (the first one is kept)");
                        continue;
                }
                snprintf(sub_pat, sizeof(sub_pat), "%s%s%s", pat,
                         *pat ? "." : "", name);
                const struct cfg_key *k = key_exact(sub_pat);
                if (k) {
                        walk_value(w, k, sub_path, vn);
                        note_instance(w->cfg, k, sub_path, &ks);
                        continue;
                }
                if (strchr(name, '.') == NULL && is_section(sub_pat)) {
                        walk_mapping(w, vn, sub_path, sub_pat);
                        continue;
                }
                /* An instance name under "clusters" or "unify.topics". */
                snprintf(want, sizeof(want), "%s%s*", pat, *pat ? "." : "");
                if (*pat && is_section(want)) {
                        const char *why;
                        if (!inst_name_ok(pat, name, &why)) {
                                err_at(w->cfg, &ks, sub_path, "%s", why);
                                continue;
                        }
                        inst_add(w->cfg, pat, name, &ks);
                        if (!scalar_is_null(vn))
                                walk_mapping(w, vn, sub_path, want);
                        continue;
                }
                const char *s = suggest(pat, name, buf, sizeof(buf));
                if (s)
                        err_at(w->cfg, &ks, sub_path,
                               "unknown key (did you mean '%s'?)", s);
                else
                        err_at(w->cfg, &ks, sub_path, "unknown key");
        }
        nameset_deinit(&seen);
}

/* 1-based line and column of byte 'off' of 'text' (columns count
 * characters, as libyaml's marks do; UTF-8 continuation bytes are not
 * characters). */
static struct src text_pos(const char *file, const char *text, size_t len,
                           size_t off) {
        struct src src = {file, 1, 1};
        for (size_t i = 0; i < off && i < len; i++) {
                if (text[i] == '\n') {
                        src.line++;
                        src.col = 1;
                } else if (((unsigned char)text[i] & 0xC0) != 0x80)
                        src.col++;
        }
        return src;
}

/* Report why libyaml gave up, where it happened:
 * - a bad byte (invalid UTF-8, a control character): libyaml's reader
 *   leaves problem_mark at 0:0 and gives the byte offset instead, so the
 *   line and column are counted here;
 * - a construct still open at the end of the file (an unclosed [ or {, a
 *   quote): the end of the file says nothing, so the error points at
 *   where the construct starts (context_mark) and names the end;
 * - anything else at problem_mark. */
static void parse_error(aagw_config_t *cfg, const yaml_parser_t *p,
                        const char *file, const char *text, size_t len) {
        const char *problem = p->problem ? p->problem : "syntax error";
        struct src  at;

        if (p->error == YAML_READER_ERROR) {
                at = text_pos(file, text, len, p->problem_offset);
                if (p->problem_value >= 0)
                        err_at(cfg, &at, NULL, "%s (byte 0x%02X)", problem,
                               (unsigned)p->problem_value & 0xFFu);
                else
                        err_at(cfg, &at, NULL, "%s", problem);
                return;
        }
        at = (struct src){file, (int)p->problem_mark.line + 1,
                          (int)p->problem_mark.column + 1};
        /* Where the open construct starts: the context mark when it is
         * before the end (an unclosed quote), else the innermost open
         * collection on the parser's stack of start marks (an unclosed [
         * after a comma leaves the context mark at the end). */
        const yaml_mark_t *start = NULL;
        if (p->problem_mark.index >= len) {
                if (p->context && p->context_mark.index < p->problem_mark.index)
                        start = &p->context_mark;
                else if (p->marks.top > p->marks.start &&
                         p->marks.top[-1].index < p->problem_mark.index)
                        start = &p->marks.top[-1];
        }
        if (start) {
                struct src s = {file, (int)start->line + 1,
                                (int)start->column + 1};
                err_at(cfg, &s, NULL,
                       "%s%s%s; the file ends (at %d:%d) before what "
                       "starts here is closed",
                       problem, p->context ? " " : "",
                       p->context ? p->context : "", at.line, at.col);
                return;
        }
        err_at(cfg, &at, NULL, "%s%s%s", problem, p->context ? " " : "",
               p->context ? p->context : "");
}

/* Load YAML 'yaml' named 'name'.  'need_settings': a file given with -c
 * must hold some (an empty one used to start the demo silently). */
static aagw_err_t load_yaml(aagw_config_t *cfg, const char *name,
                            const char *yaml, size_t len, bool need_settings) {
        yaml_parser_t   parser;
        yaml_document_t doc;
        int             errs_before = cfg->nerrs;
        struct walk     w = {cfg, &doc, intern(cfg, name)};

        if (!yaml_parser_initialize(&parser)) {
                err_at(cfg, NULL, NULL, "%s: out of memory", name);
                return AAGW_ERR_CONFIG;
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *)yaml,
                                     len);
        if (!yaml_parser_load(&parser, &doc)) {
                parse_error(cfg, &parser, w.file, yaml, len);
                yaml_parser_delete(&parser);
                return AAGW_ERR_CONFIG;
        }
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (need_settings &&
            (!root || scalar_is_null(root) ||
             (root->type == YAML_MAPPING_NODE &&
              root->data.mapping.pairs.top == root->data.mapping.pairs.start)))
                err_at(cfg, &(struct src){w.file, 0, 0}, NULL,
                       "the file holds no settings (it is empty, only "
                       "comments, or null); without -c aagw runs the demo");
        if (root && !scalar_is_null(root))
                walk_mapping(&w, root, "", "");
        /* A second document would silently be ignored: refuse it. */
        yaml_document_t extra;
        if (yaml_parser_load(&parser, &extra)) {
                yaml_node_t *r2 = yaml_document_get_root_node(&extra);
                if (r2) {
                        struct src src = node_src(&w, r2);
                        err_at(cfg, &src, NULL,
                               "only one YAML document is allowed");
                }
                yaml_document_delete(&extra);
        }
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
        return cfg->nerrs > errs_before ? AAGW_ERR_CONFIG : AAGW_OK;
}

aagw_err_t aagw_config_load_string(aagw_config_t *cfg, const char *name,
                                   const char *yaml, size_t len) {
        return load_yaml(cfg, name, yaml, len, false);
}

aagw_err_t aagw_config_load_file(aagw_config_t *cfg, const char *path) {
        FILE      *f = fopen(path, "rb");
        char      *buf = NULL;
        size_t     len = 0, cap = 0, n;
        aagw_err_t err;

        if (!f) {
                err_at(cfg, NULL, NULL, "%s: cannot open: %s", path,
                       strerror(errno));
                return AAGW_ERR_CONFIG;
        }
        do {
                if (len + 4096 > cap) {
                        cap       = (len + 4096) * 2;
                        char *nbuf = realloc(buf, cap);
                        if (!nbuf) {
                                free(buf);
                                fclose(f);
                                err_at(cfg, NULL, NULL, "%s: out of memory",
                                       path);
                                return AAGW_ERR_CONFIG;
                        }
                        buf = nbuf;
                }
                n = fread(buf + len, 1, cap - len, f);
                len += n;
        } while (n > 0);
        if (ferror(f)) {
                err_at(cfg, NULL, NULL, "%s: read error: %s", path,
                       strerror(errno));
                free(buf);
                fclose(f);
                return AAGW_ERR_CONFIG;
        }
        fclose(f);
        /* An mm2.properties file is taken as it is, for operators moving
         * from MirrorMaker 2 (mm2_import.c). */
        if (aagw_config_is_mm2_properties(buf ? buf : "", len)) {
                cfg->from_mm2 = true;
                err           = aagw_config_load_mm2(cfg, path, buf, len);
        } else
                err = load_yaml(cfg, path, buf ? buf : "", len, true);
        free(buf);
        return err;
}

/* -------------------------------- FLAGS -------------------------------- */

/* Set one key from 'src'.  'orig' is ORIG_FLAG for command-line flags
 * (they replace the file's lists, then add up) or ORIG_FILE for settings
 * read from a file in another format (a list is built item by item). */
static aagw_err_t set_from(aagw_config_t *cfg, const char *key,
                           const char *value, struct src src,
                           enum origin orig) {
        const char           *sub = NULL;
        const struct cfg_key *k   = key_for_path(key, &sub);
        struct cfg_val       *v;
        char                  why[1024], *norm = NULL, base[1024];

        if (!k || (k->type == CT_PROPS && !sub)) {
                char        buf[128];
                const char *dot  = strrchr(key, '.');
                char        prefix[1024];
                size_t      plen = dot ? (size_t)(dot - key) : 0;
                snprintf(prefix, sizeof(prefix), "%.*s", (int)plen, key);
                const char *s = suggest(prefix, dot ? dot + 1 : key, buf,
                                        sizeof(buf));
                if (s)
                        err_at(cfg, &src, key,
                               "unknown key (did you mean '%s%s%s'?)", prefix,
                               *prefix ? "." : "", s);
                else
                        err_at(cfg, &src, key, "unknown key");
                return AAGW_ERR_CONFIG;
        }
        if (strchr(k->path, '*')) {
                /* The instance name must be valid too. */
                const char *star = strstr(k->path, "*");
                const char *nm   = key + (star - k->path);
                size_t      nlen = strcspn(nm, ".");
                char        name[256], kind[128];
                const char *why;
                snprintf(name, sizeof(name), "%.*s", (int)nlen, nm);
                snprintf(kind, sizeof(kind), "%.*s",
                         (int)(star - k->path - 1), k->path);
                if (nlen >= sizeof(name) || !inst_name_ok(kind, name, &why)) {
                        err_at(cfg, &src, key, "%s", why);
                        return AAGW_ERR_CONFIG;
                }
        }
        if (k->type == CT_PROPS) {
                size_t plen = (size_t)(sub - key) - 1;
                snprintf(base, sizeof(base), "%.*s", (int)plen, key);
                if (!(v = val_get(cfg, k, base)))
                        return AAGW_ERR_NOMEM;
                for (size_t i = 0; i < v->n; i += 2) {
                        if (!strcmp(v->items[i], sub)) {
                                char *nv = strdup(value);
                                if (!nv)
                                        return AAGW_ERR_NOMEM;
                                free(v->items[i + 1]);
                                v->items[i + 1] = nv;
                                v->srcs[i + 1]  = src;
                                return AAGW_OK;
                        }
                }
                char *nm = strdup(sub), *nv = strdup(value);
                if (!nm || !nv) {
                        free(nm);
                        free(nv);
                        return AAGW_ERR_NOMEM;
                }
                if (v->origin == ORIG_DEFAULT)
                        v->origin = orig;
                val_push(v, nm, &src);
                val_push(v, nv, &src);
                note_instance(cfg, k, base, &src);
                return AAGW_OK;
        }
        if (check_value(k, value, &norm, why, sizeof(why)) == -1) {
                if (k->flags & CF_SECRET)
                        err_at(cfg, &src, key, "invalid value");
                else
                        err_at(cfg, &src, key, "%s", why);
                return AAGW_ERR_CONFIG;
        }
        if (!(v = val_get(cfg, k, key))) {
                free(norm);
                return AAGW_ERR_NOMEM;
        }
        /* Flags replace what the file said; repeated list flags add up.
         * Items from a file start from the default, then add up. */
        if (!is_list_type(k->type) || v->origin != orig)
                val_clear(v);
        v->origin = orig;
        val_push(v, norm, &src);
        note_instance(cfg, k, key, &src);
        return AAGW_OK;
}

aagw_err_t aagw_config_set(aagw_config_t *cfg, const char *key,
                           const char *value, const char *origin) {
        struct src src = {intern(cfg, origin), 0, 0};

        return set_from(cfg, key, value, src, ORIG_FLAG);
}

aagw_err_t aagw_config_set_at(aagw_config_t *cfg, const char *key,
                              const char *value, const char *file, int line,
                              int col) {
        struct src src = {intern(cfg, file), line, col};

        return set_from(cfg, key, value, src, ORIG_FILE);
}

/* ------------------------------- GETTERS ------------------------------- */

const char *aagw_config_str(const aagw_config_t *cfg, const char *path) {
        const struct cfg_val *v = val_find(cfg, path);
        return v && v->n ? v->items[0] : NULL;
}

int64_t aagw_config_int(const aagw_config_t *cfg, const char *path) {
        const char *s = aagw_config_str(cfg, path);
        return s ? strtoll(s, NULL, 10) : 0;
}

bool aagw_config_bool(const aagw_config_t *cfg, const char *path) {
        const char *s = aagw_config_str(cfg, path);
        return s && !strcmp(s, "true");
}

int64_t aagw_config_duration_ms(const aagw_config_t *cfg, const char *path) {
        const char *s  = aagw_config_str(cfg, path);
        int64_t     ms = 0;
        if (s)
                aagw_duration_parse(s, &ms);
        return ms;
}

size_t aagw_config_list(const aagw_config_t *cfg, const char *path,
                        const char *const **itemsp) {
        const struct cfg_val *v = val_find(cfg, path);
        *itemsp                 = v ? (const char *const *)v->items : NULL;
        return v ? v->n : 0;
}

bool aagw_config_is_set(const aagw_config_t *cfg, const char *path) {
        const struct cfg_val *v = val_find(cfg, path);
        return v && v->origin != ORIG_DEFAULT;
}

size_t aagw_config_instance_cnt(const aagw_config_t *cfg, const char *kind) {
        size_t n = 0;
        for (size_t i = 0; i < cfg->ninsts; i++)
                n += !strcmp(cfg->insts[i].kind, kind);
        return n;
}

const char *aagw_config_instance(const aagw_config_t *cfg, const char *kind,
                                 size_t idx) {
        for (size_t i = 0; i < cfg->ninsts; i++)
                if (!strcmp(cfg->insts[i].kind, kind) && idx-- == 0)
                        return cfg->insts[i].name;
        return NULL;
}

size_t aagw_config_cluster_props(const aagw_config_t *cfg, const char *alias,
                                 const char *const **kvp) {
        char path[256];
        snprintf(path, sizeof(path), "clusters.%s.properties", alias);
        const struct cfg_val *v = val_find(cfg, path);
        *kvp = v ? (const char *const *)v->items : NULL;
        return v ? v->n / 2 : 0;
}

/* ------------------------------ VALIDATION ----------------------------- */

static const struct cfg_inst *inst_find(const aagw_config_t *cfg,
                                        const char *kind, const char *name) {
        for (size_t i = 0; i < cfg->ninsts; i++)
                if (!strcmp(cfg->insts[i].kind, kind) &&
                    !strcmp(cfg->insts[i].name, name))
                        return &cfg->insts[i];
        return NULL;
}

/* An alias-valued key must name a configured cluster. */
static void check_alias_ref(aagw_config_t *cfg, const char *path) {
        const struct cfg_val *v = val_find(cfg, path);
        if (!v || !v->n || !cfg->ninsts ||
            !aagw_config_instance_cnt(cfg, "clusters"))
                return;
        if (!inst_find(cfg, "clusters", v->items[0]))
                err_at(cfg, &v->srcs[0], path,
                       "no cluster named \"%s\" is configured", v->items[0]);
}

/* librdkafka properties that aagw sets itself: letting the user override
 * them would break its guarantees (commit ordering, idempotence), so they
 * are refused with a pointer to the real knob. */
static const char *managed_property(const char *name) {
        static const struct {
                const char *name, *why;
        } managed[] = {
            {"bootstrap.servers", "set clusters.<alias>.bootstrap_servers"},
            {"metadata.broker.list", "set clusters.<alias>.bootstrap_servers"},
            {"group.id", "aagw names its consumer groups from gateway.id"},
            {"group.instance.id",
             "aagw names its static group members from gateway.id and "
             "gateway.site"},
            {"enable.auto.commit", "aagw stores positions itself"},
            {"enable.auto.offset.store", "aagw stores positions itself"},
            {"enable.idempotence", "aagw always uses the idempotent producer"},
            {"acks", "aagw always produces with acks=all"},
            {"request.required.acks", "aagw always produces with acks=all"},
            {"isolation.level", "aagw chooses the isolation level"},
            {"transactional.id", "aagw does not rely on transactions"},
        };
        for (size_t i = 0; i < sizeof(managed) / sizeof(managed[0]); i++)
                if (!strcmp(name, managed[i].name))
                        return managed[i].why;
        return NULL;
}

static void check_cluster(aagw_config_t *cfg, const struct cfg_inst *in) {
        char            path[512], why[1024];
        struct cfg_val *v;

        snprintf(path, sizeof(path), "clusters.%s.bootstrap_servers",
                 in->name);
        if (!val_find(cfg, path))
                err_at(cfg, &in->src, path, "required key is missing");
        snprintf(path, sizeof(path), "clusters.%s.properties", in->name);
        if (!(v = val_find(cfg, path)))
                return;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        for (size_t i = 0; i + 1 < v->n; i += 2) {
                char        ppath[1024];
                /* "consumer.x" / "producer.x" / "admin.x" set x for one
                 * kind of client only; check x itself. */
                const char *base = aagw_kafka_prop_base(v->items[i]);
                const char *m    = managed_property(base);
                snprintf(ppath, sizeof(ppath), "%s.%s", path, v->items[i]);
                if (m) {
                        err_at(cfg, &v->srcs[i], ppath,
                               "managed by aagw (%s)", m);
                        continue;
                }
                /* aagw_kafka_conf_set() says "NAME: reason"; the path
                 * already names the property. */
                if (aagw_kafka_conf_set(conf, base, v->items[i + 1], why,
                                        sizeof(why)))
                        err_at(cfg, &v->srcs[i + 1], ppath, "librdkafka: %s",
                               why + strlen(base) + 2);
        }
        rd_kafka_conf_destroy(conf);
}

static bool is_loopback(const char *hostport) {
        char host[256];

        return gw_split_hostport(hostport, host, sizeof(host)) &&
               gw_host_is_loopback(host);
}

aagw_err_t aagw_config_validate(aagw_config_t *cfg) {
        int             errs_before = cfg->nerrs;
        size_t          nclusters   = aagw_config_instance_cnt(cfg, "clusters");
        const char     *mode        = aagw_config_str(cfg, "gateway.mode");
        struct cfg_val *v;

        for (size_t i = 0; i < cfg->ninsts; i++)
                if (!strcmp(cfg->insts[i].kind, "clusters"))
                        check_cluster(cfg, &cfg->insts[i]);

        check_alias_ref(cfg, "gateway.site");
        check_alias_ref(cfg, "gateway.primary");
        check_alias_ref(cfg, "gateway.central");

        if (nclusters == 1) {
                const struct cfg_inst *in = inst_find(
                    cfg, "clusters", aagw_config_instance(cfg, "clusters", 0));
                err_at(cfg, &in->src, "clusters",
                       "at least two clusters are needed to replicate");
        }
        if ((v = val_find(cfg, "replication.flows"))) {
                for (size_t i = 0; i < v->n; i++) {
                        char        src[128];
                        const char *arrow = strstr(v->items[i], "->");
                        snprintf(src, sizeof(src), "%.*s",
                                 (int)(arrow - v->items[i]), v->items[i]);
                        if (nclusters && !inst_find(cfg, "clusters", src))
                                err_at(cfg, &v->srcs[i], "replication.flows",
                                       "no cluster named \"%s\" is configured",
                                       src);
                        if (nclusters && !inst_find(cfg, "clusters", arrow + 2))
                                err_at(cfg, &v->srcs[i], "replication.flows",
                                       "no cluster named \"%s\" is configured",
                                       arrow + 2);
                        for (size_t j = 0; j < i; j++)
                                if (!strcmp(v->items[i], v->items[j]))
                                        err_at(cfg, &v->srcs[i],
                                               "replication.flows",
                                               "flow %s is listed twice",
                                               v->items[i]);
                }
        } else if (!strcmp(mode, "active-passive") &&
                   !val_find(cfg, "gateway.primary")) {
                v = val_find(cfg, "gateway.mode");
                err_at(cfg, &v->srcs[0], "gateway.primary",
                       "active-passive needs gateway.primary (--primary) or "
                       "replication.flows");
        } else if (!strcmp(mode, "aggregate") &&
                   !val_find(cfg, "gateway.central")) {
                v = val_find(cfg, "gateway.mode");
                err_at(cfg, &v->srcs[0], "gateway.central",
                       "aggregate needs gateway.central (--central) or "
                       "replication.flows");
        }

        /* Per-flow topic lists name flows between configured clusters,
         * and one of replication.flows when those are explicit (a list
         * for a flow that never runs is a mistake, not a no-op). */
        for (size_t i = 0; i < cfg->ninsts; i++) {
                const struct cfg_inst *in = &cfg->insts[i];
                const char *arrow;
                char        src[128];
                bool        listed = false;
                if (strcmp(in->kind, "replication.per_flow"))
                        continue;
                arrow = strstr(in->name, "->");
                snprintf(src, sizeof(src), "%.*s", (int)(arrow - in->name),
                         in->name);
                if (nclusters && (!inst_find(cfg, "clusters", src) ||
                                  !inst_find(cfg, "clusters", arrow + 2))) {
                        err_at(cfg, &in->src, "replication.per_flow",
                               "flow %s names a cluster that is not "
                               "configured",
                               in->name);
                        continue;
                }
                if (!(v = val_find(cfg, "replication.flows")))
                        continue;
                for (size_t j = 0; j < v->n; j++)
                        listed |= !strcmp(v->items[j], in->name);
                if (!listed)
                        err_at(cfg, &in->src, "replication.per_flow",
                               "flow %s is not one of replication.flows",
                               in->name);
        }

        if ((v = val_find(cfg, "admin.listen")) && v->n &&
            !is_loopback(v->items[0]) && !val_find(cfg, "admin.token"))
                err_at(cfg, &v->srcs[0], "admin.listen",
                       "a non-loopback address needs admin.token");

        return cfg->nerrs > errs_before ? AAGW_ERR_CONFIG : AAGW_OK;
}

/* -------------------------------- OUTPUT ------------------------------- */

/* Write 's' as a YAML double-quoted scalar. */
void aagw_config_yaml_quote(FILE *out, const char *s) {
        fputc('"', out);
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                /* YAML allows no C1 control (U+0080-U+009F) and neither
                 * U+FFFE nor U+FFFF unescaped, and reads U+0085, U+2028
                 * and U+2029 as line breaks: write them as escapes of the
                 * same code point, or the dump would not load back as it
                 * was. */
                if (c == 0xc2 && (unsigned char)s[1] >= 0x80 &&
                    (unsigned char)s[1] <= 0x9f) {
                        fprintf(out, "\\x%02x", (unsigned char)s[1]);
                        s++;
                        continue;
                }
                if (c == 0xe2 && (unsigned char)s[1] == 0x80 &&
                    ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9)) {
                        fputs(s[2] == (char)0xa8 ? "\\L" : "\\P", out);
                        s += 2;
                        continue;
                }
                if (c == 0xef && (unsigned char)s[1] == 0xbf &&
                    ((unsigned char)s[2] == 0xbe || (unsigned char)s[2] == 0xbf)) {
                        fprintf(out, "\\uFFF%c", s[2] == (char)0xbe ? 'E' : 'F');
                        s += 2;
                        continue;
                }
                /* The loader reads "${" as an environment reference and
                 * "$${" as a literal "${": keep a literal one literal. */
                if (c == '$' && s[1] == '{') {
                        fputs("$$", out);
                        continue;
                }
                if (c == '"' || c == '\\')
                        fprintf(out, "\\%c", c);
                else if (c == '\n')
                        fputs("\\n", out);
                else if (c == '\t')
                        fputs("\\t", out);
                else if (c < 0x20 || c == 0x7f)
                        fprintf(out, "\\x%02x", c);
                else
                        fputc(c, out);
        }
        fputc('"', out);
}

static bool plain_type(enum cfg_type t) {
        return t == CT_INT || t == CT_BOOL || t == CT_ENUM ||
               t == CT_DURATION;
}

static void dump_value(FILE *out, const struct cfg_key *k,
                       const struct cfg_val *v, const char *name,
                       int indent) {
        if (!v || (!v->n && !is_list_type(k->type) && k->type != CT_PROPS)) {
                fprintf(out, "%*s# %s: (unset)\n", indent, "", name);
                return;
        }
        if (k->type == CT_PROPS) {
                fprintf(out, "%*s%s:%s\n", indent, "", name, v->n ? "" : " {}");
                for (size_t i = 0; i + 1 < v->n; i += 2) {
                        fprintf(out, "%*s", indent + 2, "");
                        aagw_config_yaml_quote(out, v->items[i]);
                        fputs(": ", out);
                        aagw_config_yaml_quote(out, aagw_key_is_secret(v->items[i])
                                            ? AAGW_REDACTED
                                            : v->items[i + 1]);
                        fputc('\n', out);
                }
                return;
        }
        if (is_list_type(k->type)) {
                fprintf(out, "%*s%s:%s\n", indent, "", name, v->n ? "" : " []");
                for (size_t i = 0; i < v->n; i++) {
                        fprintf(out, "%*s- ", indent + 2, "");
                        aagw_config_yaml_quote(out, v->items[i]);
                        fputc('\n', out);
                }
                return;
        }
        fprintf(out, "%*s%s: ", indent, "", name);
        if (k->flags & CF_SECRET)
                aagw_config_yaml_quote(out, AAGW_REDACTED);
        else if (plain_type(k->type))
                fputs(v->items[0], out);
        else
                aagw_config_yaml_quote(out, v->items[0]);
        fputc('\n', out);
}

/* Print every key of the table in table order, opening and closing YAML
 * sections as the dotted paths change.  Instance patterns ("clusters.*")
 * are printed once per instance with all their keys. */
void aagw_config_dump(const aagw_config_t *cfg, FILE *out) {
        char prev_top[64] = "";

        fputs("# aagw effective configuration (secrets redacted)\n", out);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                const char *dot  = strchr(k->path, '.');
                size_t      tlen = (size_t)(dot - k->path);
                char        top[64];
                snprintf(top, sizeof(top), "%.*s", (int)tlen, k->path);
                const char *star = strstr(k->path, ".*.");
                if (strcmp(top, prev_top)) {
                        fprintf(out, "%s:\n", top);
                        snprintf(prev_top, sizeof(prev_top), "%s", top);
                }
                if (!star) {
                        /* Two-level keys are "section.name"; deeper plain
                         * keys do not exist in the table. */
                        dump_value(out, k, val_find(cfg, k->path), dot + 1, 2);
                        continue;
                }
                char kind[128];
                snprintf(kind, sizeof(kind), "%.*s",
                         (int)(star - k->path), k->path);
                /* "clusters" instances sit right under their section;
                 * "unify.topics" ones under a "topics:" sub-mapping. */
                const char *sub    = strchr(kind, '.');
                int         indent = sub ? 4 : 2;
                size_t      ninst  = aagw_config_instance_cnt(cfg, kind);
                if (sub)
                        fprintf(out, "  %s:%s\n", sub + 1, ninst ? "" : " {}");
                else if (!ninst)
                        fprintf(out, "  {}\n");
                for (size_t i = 0; i < ninst; i++) {
                        const char *in = aagw_config_instance(cfg, kind, i);
                        fprintf(out, "%*s%s:\n", indent, "", in);
                        for (const struct cfg_key *k2 = k; k2->path; k2++) {
                                if (strncmp(k2->path, kind, strlen(kind)) ||
                                    strncmp(k2->path + strlen(kind), ".*.", 3))
                                        continue;
                                char        path[512];
                                const char *leaf = k2->path + strlen(kind) + 3;
                                snprintf(path, sizeof(path), "%s.%s.%s", kind,
                                         in, leaf);
                                const struct cfg_val *v = val_find(cfg, path);
                                if (!v && !(k2->flags & CF_REQUIRED))
                                        continue;
                                dump_value(out, k2, v, leaf, indent + 2);
                        }
                }
                /* Skip the remaining rows of this instance pattern. */
                while (k[1].path && !strncmp(k[1].path, kind, strlen(kind)) &&
                       !strncmp(k[1].path + strlen(kind), ".*.", 3))
                        k++;
        }
}

static const char *type_text(const struct cfg_key *k, char *buf, size_t size) {
        char a[160], b[32];
        switch (k->type) {
        case CT_STR:
                return "string";
        case CT_NAME:
                return "name (A-Z a-z 0-9 . _ -)";
        case CT_ALIAS:
                return "cluster alias";
        case CT_INT:
                snprintf(buf, size, "integer, %" PRId64 " to %" PRId64,
                         k->min, k->max);
                return buf;
        case CT_BOOL:
                return "boolean";
        case CT_ENUM:
                choices_text(k->choices, a, sizeof(a));
                snprintf(buf, size, "one of %s", a);
                return buf;
        case CT_DURATION:
                aagw_duration_format(k->min, a, sizeof(a));
                aagw_duration_format(k->max, b, sizeof(b));
                snprintf(buf, size, "duration, %s to %s", a, b);
                return buf;
        case CT_HOSTPORT:
                return "HOST:PORT";
        case CT_IDRULE:
                return "id rule: header:NAME | key | json:FIELD | hash | "
                       "derived";
        case CT_KEYRULE:
                return "key rule: key | json:FIELD";
        case CT_SEP:
                return "separator";
        case CT_LIST:
                return "list of strings";
        case CT_REGEXES:
                return "list of regexes (PCRE2/Java syntax, whole name)";
        case CT_FLOWS:
                return "list of SOURCE->TARGET";
        case CT_PROPS:
                return "mapping of librdkafka properties";
        }
        return "?";
}

static void def_text(const struct cfg_key *k, char *buf, size_t size) {
        size_t o = 0;
        if (!k->def) {
                snprintf(buf, size, "%s",
                         (k->flags & CF_REQUIRED) ? "required" : "unset");
                return;
        }
        for (const char *p = k->def; *p && o + 3 < size; p++) {
                if (*p == '\n') {
                        buf[o++] = ',';
                        buf[o++] = ' ';
                } else
                        buf[o++] = *p;
        }
        buf[o] = '\0';
}

void aagw_config_reference(FILE *out, bool markdown) {
        char tbuf[256], d[256];

        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                const char *t = type_text(k, tbuf, sizeof(tbuf));
                def_text(k, d, sizeof(d));
                if (markdown) {
                        fprintf(out, "### `%s`\n\n", k->path);
                        fprintf(out, "- type: %s\n", t);
                        fprintf(out, "- default: %s%s%s\n",
                                k->def ? "`" : "", d, k->def ? "`" : "");
                        if (k->flag)
                                fprintf(out, "- flag: `%s`\n", k->flag);
                        if (k->flags & CF_SECRET)
                                fprintf(out, "- secret: redacted in all "
                                             "output\n");
                        /* Markdown would take <id> for an HTML tag. */
                        fputc('\n', out);
                        for (const char *p = k->desc; *p; p++) {
                                if (*p == '<')
                                        fputs("&lt;", out);
                                else if (*p == '>')
                                        fputs("&gt;", out);
                                else
                                        fputc(*p, out);
                        }
                        fputs("\n\n", out);
                        continue;
                }
                fprintf(out, "%s\n    %s; default: %s%s%s\n", k->path, t, d,
                        k->flag ? "; flag: " : "", k->flag ? k->flag : "");
                /* Wrap the description at 76 columns, indented. */
                const char *p = k->desc;
                while (*p) {
                        size_t len = strlen(p), cut = len;
                        if (len > 72) {
                                cut = 72;
                                while (cut > 0 && p[cut] != ' ')
                                        cut--;
                                if (cut == 0)
                                        cut = 72;
                        }
                        fprintf(out, "    %.*s\n", (int)cut, p);
                        p += cut;
                        while (*p == ' ')
                                p++;
                }
        }
}
