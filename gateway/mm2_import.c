/*
 * gateway/mm2_import.c: a MirrorMaker 2 properties file as aagw config.
 *
 * An operator moving from MM2 has an mm2.properties file (dedicated mode).
 * `aagw config import-mm2 FILE` prints the equivalent YAML, and `-c FILE`
 * takes such a file directly (aagw_config_load_file() recognizes it by its
 * content).  Both run the same translation here:
 *
 *   1. read the file as java.util.Properties does (comments, continuation
 *      lines, '=' ':' or blank as separator, \uXXXX and other escapes; the
 *      last of duplicate keys wins), keeping each key's line;
 *   2. translate every key, in three scopes: global keys, cluster keys
 *      ("A.bootstrap.servers", "A.<client property>") and flow keys
 *      ("A->B.enabled", "A->B.topics", or any global key per flow);
 *   3. hand each aagw setting to the config with its line
 *      (aagw_config_set_at()), so a bad value is reported at the line of
 *      the MM2 key that produced it; a key aagw does not apply is a
 *      warning ("ignored") or an error ("refused"), never dropped silently.
 *
 * "Refused" is for keys whose loss would change what is replicated or how
 * aagw authenticates (a custom replication policy, a JKS key or trust
 * store, flows that disagree on a setting aagw keeps once); "ignored" for
 * keys that only tune MM2's own machinery (Connect workers, tasks, REST)
 * or name features aagw does not have, each with the reason.  A refusal
 * gives the fix: the properties to write instead, or the command that
 * converts a file.  docs/migration.md has the table.
 *
 * Security settings are the Java client's; what librdkafka takes instead
 * is worked out per client in mm2_security.c: key and trust stores by
 * their type, JAAS logins by their module, and a PKCS#12 trust store,
 * which librdkafka cannot read, converted to PEM (pkcs12.c).
 */
#include "mm2_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------- READING -------------------------------- */

static void props_free(struct props *ps) {
        for (size_t i = 0; i < ps->n; i++) {
                free(ps->v[i].key);
                free(ps->v[i].val);
        }
        free(ps->v);
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\f';
}

/* Append the UTF-8 encoding of 'cp' to 'out' at '*o' (at most 4 bytes). */
static void put_utf8(char *out, size_t *o, unsigned cp) {
        if (cp >= 0xd800 && cp <= 0xdfff)
                cp = 0xfffd; /* a lone surrogate */
        if (cp < 0x80) {
                out[(*o)++] = (char)cp;
        } else if (cp < 0x800) {
                out[(*o)++] = (char)(0xc0 | (cp >> 6));
                out[(*o)++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
                out[(*o)++] = (char)(0xe0 | (cp >> 12));
                out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[(*o)++] = (char)(0x80 | (cp & 0x3f));
        } else {
                out[(*o)++] = (char)(0xf0 | (cp >> 18));
                out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[(*o)++] = (char)(0x80 | (cp & 0x3f));
        }
}

/* Four hex digits at 'p' (before 'end') as a code unit, or -1. */
static long hex4(const char *p, const char *end) {
        long v = 0;

        if (end - p < 4)
                return -1;
        for (int d = 0; d < 4; d++, p++) {
                if (!isxdigit((unsigned char)*p))
                        return -1;
                v = v * 16 + (isdigit((unsigned char)*p)
                                  ? *p - '0'
                                  : tolower((unsigned char)*p) - 'a' + 10);
        }
        return v;
}

/*
 * One logical line, 'p'..'end' (continuations already joined, each
 * continuation's leading blanks dropped), into key and value, with
 * Properties.load()'s unescaping: \t \n \r \f, \uXXXX (surrogate pairs
 * joined), and \c for any other c.  Note that "orders\d+" thus reads as
 * "ordersd+" in MM2 too: a regex backslash is written "\\" in a
 * properties file.  The file is ISO 8859-1, as Properties.load() of a
 * stream reads it (MM2 loads its file that way): bytes >= 0x80 are
 * Latin-1 characters, stored here as UTF-8.  '*lostp' gets the first
 * character of the value whose backslash was dropped where a regex would
 * have kept it ("\." read as "."), or 0: backslashes before a blank,
 * ':', '=', '#', '!' or another backslash are the file format's own.
 */
static int split_line(const char *p, const char *end, char **keyp,
                      char **valp, char *lostp) {
        char  *out = malloc((size_t)(end - p) * 4 + 2);
        char  *key;
        size_t o = 0;
        bool   in_key = true, sep_seen = false;

        if (!out)
                return -1;
        while (p < end) {
                char c = *p++;
                if (in_key && !sep_seen && (c == '=' || c == ':' || is_blank(c))) {
                        /* End of the key: blanks, then at most one '=' or
                         * ':', then blanks. */
                        out[o++] = '\0';
                        in_key   = false;
                        if (is_blank(c)) {
                                while (p < end && is_blank(*p))
                                        p++;
                                if (p < end && (*p == '=' || *p == ':'))
                                        p++;
                        }
                        while (p < end && is_blank(*p))
                                p++;
                        sep_seen = true;
                        continue;
                }
                if (c != '\\' || p == end) {
                        put_utf8(out, &o, (unsigned char)c);
                        continue;
                }
                c = *p++;
                switch (c) {
                case 't': out[o++] = '\t'; break;
                case 'n': out[o++] = '\n'; break;
                case 'r': out[o++] = '\r'; break;
                case 'f': out[o++] = '\f'; break;
                case 'u': {
                        long cp = hex4(p, end), lo;
                        if (cp < 0) {
                                free(out);
                                return -2; /* Java: "Malformed \uxxxx" */
                        }
                        p += 4;
                        if (cp >= 0xd800 && cp <= 0xdbff && end - p >= 6 &&
                            p[0] == '\\' && p[1] == 'u' &&
                            (lo = hex4(p + 2, end)) >= 0xdc00 && lo <= 0xdfff) {
                                cp = 0x10000 + ((cp - 0xd800) << 10) +
                                     (lo - 0xdc00);
                                p += 6;
                        }
                        put_utf8(out, &o, (unsigned)cp);
                        break;
                }
                default:
                        if (!in_key && !*lostp && !strchr("\\:= \t#!", c))
                                *lostp = c;
                        put_utf8(out, &o, (unsigned char)c);
                        break;
                }
        }
        if (in_key)
                out[o++] = '\0'; /* a key alone: empty value */
        out[o] = '\0';
        key    = strdup(out);
        *valp  = strdup(out + strlen(out) + 1);
        free(out);
        if (!key || !*valp) {
                free(key);
                free(*valp);
                return -1;
        }
        *keyp = key;
        return 0;
}

/* True if the natural line 'p'..'end' ends in an odd run of backslashes
 * (a continuation). */
static bool continues(const char *p, const char *end) {
        size_t n = 0;
        while (end > p && end[-1] == '\\') {
                end--;
                n++;
        }
        return n % 2 == 1;
}

/* Read 'text' into 'ps'.  Returns 0, or -1 with a message in 'why' and the
 * offending line in '*linep'. */
static int read_props(const char *text, size_t len, struct props *ps,
                      int *linep, char *why, size_t why_size) {
        const char *p = text, *end = text + len;
        int         line = 0;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *le = nl ? nl : end;
                int         first = ++line;
                char       *logical;
                size_t      ll = 0, lcap;

                while (p < le && (is_blank(*p) || *p == '\r'))
                        p++;
                if (p == le || *p == '#' || *p == '!') {
                        p = nl ? nl + 1 : end;
                        continue;
                }
                /* Join continuation lines. */
                lcap    = (size_t)(end - p) + 1;
                logical = malloc(lcap);
                if (!logical)
                        return -1;
                for (;;) {
                        const char *e = le;
                        if (e > p && e[-1] == '\r')
                                e--;
                        if (!continues(p, e)) {
                                memcpy(logical + ll, p, (size_t)(e - p));
                                ll += (size_t)(e - p);
                                p = nl ? nl + 1 : end;
                                break;
                        }
                        memcpy(logical + ll, p, (size_t)(e - p - 1));
                        ll += (size_t)(e - p - 1);
                        p = nl ? nl + 1 : end;
                        if (p >= end)
                                break;
                        line++;
                        nl = memchr(p, '\n', (size_t)(end - p));
                        le = nl ? nl : end;
                        while (p < le && is_blank(*p))
                                p++;
                }
                char *k, *v, lost = 0;
                int   rc = split_line(logical, logical + ll, &k, &v, &lost);
                free(logical);
                if (rc == -2) {
                        *linep = first;
                        snprintf(why, why_size, "malformed \\uXXXX escape");
                        return -1;
                }
                if (rc)
                        return -1;
                /* The last of duplicate keys wins, as in Java. */
                size_t i;
                for (i = 0; i < ps->n && strcmp(ps->v[i].key, k); i++)
                        ;
                if (i < ps->n) {
                        free(ps->v[i].key);
                        free(ps->v[i].val);
                } else {
                        if (ps->n == ps->cap) {
                                size_t       nc = ps->cap ? ps->cap * 2 : 32;
                                struct prop *nv =
                                    realloc(ps->v, nc * sizeof(*nv));
                                if (!nv) {
                                        free(k);
                                        free(v);
                                        return -1;
                                }
                                ps->v   = nv;
                                ps->cap = nc;
                        }
                        i = ps->n++;
                }
                ps->v[i] = (struct prop){k, v, first, false, false, lost};
        }
        return 0;
}

bool aagw_config_is_mm2_properties(const char *text, size_t len) {
        const char *p = text, *end = text + len;

        /* A line "clusters = ..." / "clusters=...", or "X.bootstrap.servers"
         * followed by '=' or ':', at the start of a line.  No aagw YAML file
         * has either: aagw's YAML says "clusters:" with a mapping below, and
         * its keys are written with underscores. */
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *le = nl ? nl : end;
                const char *k;
                while (p < le && is_blank(*p))
                        p++;
                k = p;
                while (p < le && (isalnum((unsigned char)*p) ||
                                  strchr("._->", *p)))
                        p++;
                size_t klen = (size_t)(p - k);
                while (p < le && is_blank(*p))
                        p++;
                if (p < le && (*p == '=' || *p == ':')) {
                        char sep = *p++;
                        while (p < le && is_blank(*p))
                                p++;
                        if (klen == 8 && !memcmp(k, "clusters", 8) &&
                            (sep == '=' || (p < le && !strchr("{[&*!|>#", *p))))
                                return true;
                        if (klen > 18 &&
                            !memcmp(k + klen - 18, ".bootstrap.servers", 18))
                                return true;
                }
                p = nl ? nl + 1 : end;
        }
        return false;
}

/* ----------------------------- TRANSLATION ------------------------------ */

struct prop *mm2_find(struct mm2 *m, const char *key) {
        for (size_t i = 0; i < m->ps.n; i++)
                if (!strcmp(m->ps.v[i].key, key))
                        return &m->ps.v[i];
        return NULL;
}

void mm2_add_set_note(struct mm2 *m, const char *key, const char *val,
                      const struct prop *from, const char *note) {
        if (m->nsets == m->capsets) {
                size_t          nc = m->capsets ? m->capsets * 2 : 32;
                struct setting *nv = realloc(m->sets, nc * sizeof(*nv));
                if (!nv) {
                        m->oom = true;
                        return;
                }
                m->sets    = nv;
                m->capsets = nc;
        }
        struct setting *s = &m->sets[m->nsets];
        s->key            = strdup(key);
        s->val            = strdup(val);
        s->line           = from->line;
        s->mm2key         = from->key;
        s->note           = note;
        if (!s->key || !s->val) {
                free(s->key);
                free(s->val);
                m->oom = true;
                return;
        }
        m->nsets++;
}

void mm2_add_set(struct mm2 *m, const char *key, const char *val,
                 const struct prop *from) {
        mm2_add_set_note(m, key, val, from, NULL);
}

static void vrefuse(struct mm2 *m, struct prop *p, const char *fmt,
                    va_list ap) {
        char msg[1024];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        p->used    = true;
        m->refused = true;
        aagw_config_error_at(m->cfg, m->file, p->line, p->key,
                             "refused: %s%s", msg,
                             m->value_note ? m->value_note : "");
}

void mm2_refuse(struct mm2 *m, struct prop *p, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vrefuse(m, p, fmt, ap);
        va_end(ap);
}

/* mm2_refuse() once per property: a top-level security key is read by the
 * client of every cluster, but is one mistake in the file. */
void mm2_refuse_once(struct mm2 *m, struct prop *p, const char *fmt, ...) {
        va_list ap;

        m->refused = true;
        if (p->reported)
                return;
        p->reported = true;
        va_start(ap, fmt);
        vrefuse(m, p, fmt, ap);
        va_end(ap);
}

/* A warning: "ignored: why", or another 'verb' ("converted"). */
static void vwarn(struct mm2 *m, struct prop *p, const char *verb,
                  const char *fmt, va_list ap) {
        char msg[1024];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        p->used = true;
        aagw_config_warn_at(m->cfg, m->file, p->line, p->key, "%s: %s%s", verb,
                            msg, m->value_note ? m->value_note : "");
}

void mm2_ignore(struct mm2 *m, struct prop *p, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vwarn(m, p, "ignored", fmt, ap);
        va_end(ap);
}

void mm2_ignore_once(struct mm2 *m, struct prop *p, const char *fmt, ...) {
        va_list ap;

        if (p->reported) {
                p->used = true;
                return;
        }
        p->reported = true;
        va_start(ap, fmt);
        vwarn(m, p, "ignored", fmt, ap);
        va_end(ap);
}

/* "converted: what was done", for a key translated in a way the operator
 * should know about (a file aagw wrote). */
void mm2_converted(struct mm2 *m, struct prop *p, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vwarn(m, p, "converted", fmt, ap);
        va_end(ap);
}

/* "read as MirrorMaker 2 reads it: why", for a value aagw takes as MM2
 * does although the file probably meant something else. */
static void read_as(struct mm2 *m, struct prop *p, const char *how,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void read_as(struct mm2 *m, struct prop *p, const char *how,
                    const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vwarn(m, p, how, fmt, ap);
        va_end(ap);
}

/* ------------------------------------------------- comments in values -- */

/* The '#' that would start a comment after the value in most config
 * languages: at the value's start or after a blank.  A properties file has
 * no such comment (only a line whose first non-blank is '#' or '!' is
 * one), so Properties.load(), and MM2, take the whole rest of the line:
 * "false    # Active-Passive ..." is the value.  NULL when there is none. */
static const char *inline_hash(const char *v) {
        for (const char *c = v; *c; c++)
                if (*c == '#' && (c == v || is_blank(c[-1])))
                        return c;
        return NULL;
}

/* The value 'v' as a report quotes it: up to its inline '#', then "..."
 * (the comment itself is the file's business, and may be long). */
static void quote_upto_hash(char *buf, size_t size, const char *v) {
        const char *h = inline_hash(v);

        snprintf(buf, size, "\"%.*s%s\"", h ? (int)(h - v + 1) : (int)strlen(v),
                 v, h ? " ..." : "");
}

/* What MirrorMaker 2 makes of a scalar whose value holds a comment, by
 * the type its ConfigDef gives the key: booleans and numbers are refused
 * (the connector that reads them does not start), a class is looked up
 * by the whole text, strings are kept whole. */
static const char *mm2_verdict(const char *key) {
        size_t n = strlen(key);
#define ENDS(s) (n >= sizeof(s) - 1 && !strcmp(key + n - (sizeof(s) - 1), s))
        if (ENDS(".enabled"))
                return "refuses it too: neither true nor false";
        if (ENDS(".seconds") || ENDS(".ms") || ENDS(".max") ||
            ENDS(".factor"))
                return "refuses it too: not a number";
        if (ENDS(".class"))
                return "refuses it too: no class has that name";
        if (ENDS(".location"))
                return "refuses it too: neither source nor target";
#undef ENDS
        return "keeps all of it as well";
}

/* The next item of an MM2 comma-separated list at '*s' (blanks around it
 * dropped, empty items skipped), as a strdup() the caller frees; NULL at
 * the end of the list, or with '*oom' set. */
static char *next_item(const char **s, bool *oom) {
        while (**s) {
                const char *c = strchr(*s, ',');
                size_t      n = c ? (size_t)(c - *s) : strlen(*s);
                const char *a = *s, *b = *s + n;
                *s            = c ? c + 1 : *s + n;
                while (a < b && isspace((unsigned char)*a))
                        a++;
                while (b > a && isspace((unsigned char)b[-1]))
                        b--;
                if (b > a) {
                        char *item = strndup(a, (size_t)(b - a));
                        if (!item)
                                *oom = true;
                        return item;
                }
        }
        return NULL;
}

/* Add each item of MM2's comma-separated list 'p' under 'key' (every
 * list aagw takes is one of regexes).  Two ways a file says something
 * else than MM2 reads are told, once each, while aagw reads it as MM2:
 * a "# comment" after the list, which becomes part of the last items,
 * and a regex backslash the properties format ate ("\." is "."). */
static void add_list(struct mm2 *m, const char *key, struct prop *p) {
        const char *s = p->val, *h = inline_hash(p->val);
        char       *item;

        p->used = true;
        while ((item = next_item(&s, &m->oom))) {
                mm2_add_set(m, key, item, p);
                free(item);
        }
        if (p->reported)
                return;
        p->reported = true;
        /* The names Kafka 4.0 removed: MM2 3.x read them as the new ones,
         * MM2 4.x ignores them.  Excluding what the file excludes is the
         * safer reading of the two. */
        {
                const char *arrow = strstr(p->key, "->");
                const char *bare  = arrow && strchr(arrow, '.')
                                        ? strchr(arrow, '.') + 1
                                        : p->key;
                const char *now   = !strcmp(bare, "topics.whitelist") ? "topics"
                                    : !strcmp(bare, "topics.blacklist")
                                        ? "topics.exclude"
                                    : !strcmp(bare, "groups.whitelist") ? "groups"
                                    : !strcmp(bare, "groups.blacklist")
                                        ? "groups.exclude"
                                    : !strcmp(bare, "config.properties.blacklist")
                                        ? "config.properties.exclude"
                                        : NULL;
                if (now)
                        read_as(m, p, "read as MirrorMaker 2 before Kafka 4.0 "
                                      "read it",
                                "%s is the old name of %s, which Kafka 4.0 "
                                "removed: MM2 4.x ignores this line; rename "
                                "the key to keep MM2 and aagw alike",
                                bare, now);
        }
        if (h) {
                /* The item the '#' is in, as next_item() cut it. */
                const char *a = h, *b = strchr(h, ',');
                while (a > p->val && a[-1] != ',')
                        a--;
                while (is_blank(*a))
                        a++;
                if (!b)
                        b = h + strlen(h);
                while (b > a && is_blank(b[-1]))
                        b--;
                read_as(m, p, "read as MirrorMaker 2 reads it",
                        "a properties file has no comment after a value, so "
                        "\"%.*s\" is one of the regexes, comment included",
                        (int)(b - a), a);
        }
        if (p->lost_esc)
                read_as(m, p, "read as MirrorMaker 2 reads it",
                        "a properties file drops the backslash before "
                        "\"%c\", so the regexes are \"%s\"; write \"\\\\%c\" "
                        "in the file for the regex \"\\%c\"",
                        p->lost_esc, p->val, p->lost_esc, p->lost_esc);
}

static bool is_true(const char *v) {
        return !strcasecmp(v, "true");
}

static bool is_bool(const char *v) {
        return !strcasecmp(v, "true") || !strcasecmp(v, "false");
}

/* A positive number of seconds as an aagw duration ("30s"), or NULL. */
static bool seconds(const char *v, char *out, size_t size) {
        char     *e;
        long long n = strtoll(v, &e, 10);
        if (e == v || *e || n < 0 || n > 86400LL * 365)
                return false;
        snprintf(out, size, "%llds", n);
        return true;
}

/* --------------------------------------------------------- client keys -- */

/* Connect worker and MM2 machinery keys that may appear under a cluster
 * prefix ("A.offset.flush.interval.ms"); not client properties. */
const char *const mm2_worker_keys[] = {
    "offset.flush.interval.ms", "offset.flush.timeout.ms",
    "offset.storage.", "config.storage.", "status.storage.",
    "key.converter", "value.converter", "header.converter",
    "producer.override.", "consumer.override.", "admin.override.",
    "task.shutdown.graceful.timeout.ms", "scheduled.rebalance.max.delay.ms",
    "exactly.once.source.support", "group.id", NULL};

bool mm2_starts_with_any(const char *k, const char *const *list) {
        for (size_t i = 0; list[i]; i++) {
                size_t n = strlen(list[i]);
                if (list[i][n - 1] == '.' ? !strncmp(k, list[i], n)
                                          : !strcmp(k, list[i]))
                        return true;
        }
        return false;
}

/* ------------------------------------------------------ global settings -- */

/* A setting aagw holds once for every flow, and that MM2 may set globally
 * or per flow ("A->B.topics"). */
enum kind { K_LIST, K_SCALAR };

struct flowable {
        const char *mm2;   /* the global MM2 key */
        const char *alias; /* an older MM2 name, or NULL */
        enum kind   kind;
};

static const struct flowable flowables[] = {
    {"topics", "topics.whitelist", K_LIST},
    {"topics.exclude", "topics.blacklist", K_LIST},
    {"groups", "groups.whitelist", K_LIST},
    {"groups.exclude", "groups.blacklist", K_LIST},
    {"replication.policy.class", NULL, K_SCALAR},
    {"replication.policy.separator", NULL, K_SCALAR},
    {"replication.policy.internal.topic.separator.enabled", NULL, K_SCALAR},
    {"emit.heartbeats.enabled", NULL, K_SCALAR},
    {"emit.heartbeats.interval.seconds", NULL, K_SCALAR},
    {"emit.checkpoints.enabled", NULL, K_SCALAR},
    {"emit.checkpoints.interval.seconds", NULL, K_SCALAR},
    {"emit.offset-syncs.enabled", NULL, K_SCALAR},
    {"sync.group.offsets.enabled", NULL, K_SCALAR},
    {"sync.group.offsets.interval.seconds", NULL, K_SCALAR},
    {"refresh.topics.enabled", NULL, K_SCALAR},
    {"refresh.topics.interval.seconds", NULL, K_SCALAR},
    {"refresh.groups.enabled", NULL, K_SCALAR},
    {"refresh.groups.interval.seconds", NULL, K_SCALAR},
    {"offset-syncs.topic.location", NULL, K_SCALAR},
    {"replication.factor", NULL, K_SCALAR},
    {"sync.topic.configs.enabled", NULL, K_SCALAR},
    {"sync.topic.configs.interval.seconds", NULL, K_SCALAR},
    {"sync.topic.acls.enabled", NULL, K_SCALAR},
    {"sync.topic.acls.interval.seconds", NULL, K_SCALAR},
    {"config.properties.exclude", "config.properties.blacklist", K_LIST},
    {"tasks.max", NULL, K_SCALAR},
    {"offset.lag.max", NULL, K_SCALAR},
    {"checkpoints.topic.replication.factor", NULL, K_SCALAR},
    {"heartbeats.topic.replication.factor", NULL, K_SCALAR},
    {"offset-syncs.topic.replication.factor", NULL, K_SCALAR},
    {"heartbeats.topic.retention.ms", NULL, K_SCALAR},
    {"checkpoints.topic.retention.ms", NULL, K_SCALAR},
    {"topic.filter.class", NULL, K_SCALAR},
    {"group.filter.class", NULL, K_SCALAR},
    {"config.property.filter.class", NULL, K_SCALAR},
    {"exactly.once.source.support", NULL, K_SCALAR},
    {"consumer.poll.timeout.ms", NULL, K_SCALAR},
    {"admin.timeout.ms", NULL, K_SCALAR},
    {NULL, NULL, K_SCALAR},
};

/* The property that sets 'fl' for flow 'flow' ("A->B"), falling back to
 * the global one; NULL when neither is there. */
static struct prop *flow_value(struct mm2 *m, const struct flowable *fl,
                               const char *flow) {
        char         key[512];
        struct prop *p;

        snprintf(key, sizeof(key), "%s.%s", flow, fl->mm2);
        if ((p = mm2_find(m, key)))
                return p;
        if (fl->alias) {
                snprintf(key, sizeof(key), "%s.%s", flow, fl->alias);
                if ((p = mm2_find(m, key)))
                        return p;
        }
        if ((p = mm2_find(m, fl->mm2)))
                return p;
        return fl->alias ? mm2_find(m, fl->alias) : NULL;
}

static bool flow_enabled(const struct mm2 *m, const char *key) {
        const char *arrow = strstr(key, "->");
        const char *dot   = arrow ? strchr(arrow, '.') : NULL;

        for (size_t i = 0; dot && i < m->nflows; i++)
                if (strlen(m->flows[i]) == (size_t)(dot - key) &&
                    !strncmp(m->flows[i], key, (size_t)(dot - key)))
                        return true;
        return false;
}

/* Mark every property naming 'fl' (global, per enabled flow, old names)
 * used, so that the unknown-key sweep leaves them alone once 'fl' is
 * decided; a disabled flow's keys are reported by the sweep. */
static void mark_all(struct mm2 *m, const struct flowable *fl) {
        for (size_t i = 0; i < m->ps.n; i++) {
                const char *k     = m->ps.v[i].key;
                const char *arrow = strstr(k, "->");
                const char *dot   = arrow ? strchr(arrow, '.') : NULL;
                const char *bare  = dot ? dot + 1 : k;
                if (arrow && !flow_enabled(m, k))
                        continue;
                if (!strcmp(bare, fl->mm2) ||
                    (fl->alias && !strcmp(bare, fl->alias)))
                        m->ps.v[i].used = true;
        }
}

/* The property setting the separator of the first enabled flow that has
 * one (the flows must agree on it), or NULL. */
static struct prop *separator_prop(struct mm2 *m) {
        const struct flowable *sepfl = flowables;
        struct prop           *sep   = NULL;

        while (strcmp(sepfl->mm2, "replication.policy.separator"))
                sepfl++;
        for (size_t i = 0; i < m->nflows && !sep; i++)
                sep = flow_value(m, sepfl, m->flows[i]);
        return sep;
}

/* replication.policy.internal.topic.separator.enabled: MM2 (since 3.0)
 * names its internal topics with the separator unless this is false; it
 * reads the switch only when the file sets a separator, with
 * Boolean.parseBoolean() (anything but "true" in any case is false).
 * aagw always names them with its separator, so a switch that takes
 * effect is refused: aagw and MM2 would not find each other's
 * offset-syncs and checkpoints (the takeover reads MM2's). */
static void internal_separator(struct mm2 *m, struct prop *p, const char *v) {
        struct prop *sep = separator_prop(m);

        if (is_true(v) || !sep || !strcmp(sep->val, "."))
                p->used = true; /* MM2's own default, or no effect */
        else
                mm2_refuse(m, p,
                           "with the separator \"%s\" (line %d) MirrorMaker "
                           "2 would name its internal topics with dots "
                           "(mm2-offset-syncs.<cluster>.internal), aagw "
                           "names them with the separator, as MM2 does by "
                           "default: remove the line, or write "
                           "replication.policy.separator = .",
                           sep->val, sep->line);
}

/* Translate one decided setting 'fl' from 'p', whose value reads as 'v',
 * into aagw keys. */
static void translate_value(struct mm2 *m, const struct flowable *fl,
                            struct prop *p, const char *v) {
        const char *k = fl->mm2;
        char        d[64];

        if (!strcmp(k, "topics"))
                add_list(m, "replication.topics", p);
        else if (!strcmp(k, "topics.exclude"))
                add_list(m, "replication.topics_exclude", p);
        else if (!strcmp(k, "groups"))
                add_list(m, "replication.groups", p);
        else if (!strcmp(k, "groups.exclude"))
                add_list(m, "replication.groups_exclude", p);
        else if (!strcmp(k, "replication.policy.class")) {
                const char *cls = strrchr(v, '.') ? strrchr(v, '.') + 1 : v;
                if (!strcmp(cls, "DefaultReplicationPolicy"))
                        mm2_add_set(m, "replication.policy", "prefix", p);
                else if (!strcmp(cls, "IdentityReplicationPolicy"))
                        mm2_add_set(m, "replication.policy", "identity", p);
                else
                        mm2_refuse(
                            m, p,
                            "only MM2's DefaultReplicationPolicy (aagw's "
                            "prefix policy) and IdentityReplicationPolicy "
                            "(identity) have an equivalent");
        } else if (!strcmp(k, "replication.policy.separator")) {
                if (inline_hash(v))
                        mm2_refuse(m, p,
                                   "the separator is part of every remote "
                                   "topic name, and no topic name holds a "
                                   "blank or '#'");
                else
                        mm2_add_set(m, "replication.separator", v, p);
        } else if (!strcmp(k, "replication.policy.internal.topic.separator."
                              "enabled"))
                internal_separator(m, p, v);
        else if (!strcmp(k, "emit.heartbeats.enabled")) {
                if (!is_bool(v))
                        mm2_refuse(m, p, "expected true or false");
                else if (!is_true(v))
                        mm2_add_set(m, "mm2.heartbeats_interval", "0s", p);
        } else if (!strcmp(k, "emit.checkpoints.enabled")) {
                if (!is_bool(v))
                        mm2_refuse(m, p, "expected true or false");
                else if (!is_true(v))
                        mm2_add_set(m, "mm2.checkpoints_interval", "0s", p);
        } else if (!strcmp(k, "emit.heartbeats.interval.seconds") ||
                   !strcmp(k, "emit.checkpoints.interval.seconds") ||
                   !strcmp(k, "refresh.topics.interval.seconds")) {
                const char *to =
                    k[5] == 'h' ? "mm2.heartbeats_interval"
                    : k[5] == 'c' ? "mm2.checkpoints_interval"
                                  : "replication.refresh_topics_interval";
                if (!seconds(v, d, sizeof(d)))
                        mm2_refuse(m, p, "expected a number of seconds");
                else
                        mm2_add_set(m, to, d, p);
        } else if (!strcmp(k, "emit.offset-syncs.enabled") ||
                   !strcmp(k, "sync.group.offsets.enabled")) {
                if (!is_bool(v))
                        mm2_refuse(m, p, "expected true or false");
                else
                        mm2_add_set(m,
                                    k[0] == 'e' ? "mm2.offset_syncs"
                                                : "mm2.sync_group_offsets",
                                    is_true(v) ? "true" : "false", p);
        } else if (!strcmp(k, "offset-syncs.topic.location")) {
                if (inline_hash(v))
                        mm2_refuse(m, p, "expected source or target");
                else
                        mm2_add_set(m, "mm2.offset_syncs_location", v, p);
        }
        else if (!strcmp(k, "sync.group.offsets.interval.seconds"))
                mm2_ignore(m, p,
                           "aagw commits synced group offsets with each "
                           "checkpoint (mm2.checkpoints_interval)");
        else if (!strcmp(k, "refresh.topics.enabled")) {
                if (!is_true(v))
                        mm2_ignore(m, p,
                                   "aagw always discovers new topics, every "
                                   "replication.refresh_topics_interval");
                else
                        p->used = true;
        } else if (!strcmp(k, "refresh.groups.enabled") ||
                   !strcmp(k, "refresh.groups.interval.seconds"))
                mm2_ignore(m, p,
                           "aagw lists consumer groups with each checkpoint");
        else if (!strcmp(k, "sync.topic.configs.enabled") ||
                 !strcmp(k, "sync.topic.acls.enabled")) {
                if (!is_bool(v))
                        mm2_refuse(m, p, "expected true or false");
                else
                        mm2_add_set(m,
                                    k[11] == 'c'
                                        ? "replication.sync_topic_configs"
                                        : "replication.sync_topic_acls",
                                    is_true(v) ? "true" : "false", p);
        } else if (!strcmp(k, "sync.topic.configs.interval.seconds") ||
                   !strcmp(k, "sync.topic.acls.interval.seconds")) {
                if (!seconds(v, d, sizeof(d)))
                        mm2_refuse(m, p, "expected a number of seconds");
                else
                        mm2_add_set(
                            m,
                            k[11] == 'c'
                                ? "replication.sync_topic_configs_interval"
                                : "replication.sync_topic_acls_interval",
                            d, p);
        } else if (!strcmp(k, "config.properties.exclude"))
                add_list(m, "replication.topic_configs_exclude", p);
        else if (!strcmp(k, "replication.factor")) {
                char *end;
                long  rf = strtol(v, &end, 10);
                if (end == v || *end || rf < 1 || rf > 32767)
                        mm2_refuse(m, p,
                                   "expected a replication factor of 1 to "
                                   "32767");
                else
                        mm2_add_set(m, "replication.factor", v, p);
        } else if (strstr(k, ".replication.factor"))
                mm2_ignore(m, p,
                           "aagw creates its internal topics with the "
                           "target broker's default replication factor");
        else if (!strcmp(k, "tasks.max"))
                mm2_ignore(m, p,
                           "each aagw flow is one consumer and one "
                           "producer; run more aagw processes to scale");
        else if (!strcmp(k, "offset.lag.max"))
                mm2_ignore(m, p,
                           "aagw writes an offset-sync whenever a "
                           "partition's offset delta changes "
                           "(mm2.offset_syncs_max_rate bounds them)");
        else if (!strcmp(k, "exactly.once.source.support"))
                mm2_ignore(m, p,
                           "aagw copies exactly once without broker "
                           "transactions");
        else if (strstr(k, ".class"))
                mm2_refuse(m, p,
                           "a custom Java class has no aagw equivalent; "
                           "express the filter as topics / topics.exclude "
                           "/ groups / groups.exclude regexes");
        else
                mm2_ignore(m, p,
                           "tunes MirrorMaker 2's own machinery; aagw has "
                           "no such setting");
}

/* Translate one decided setting 'fl' with value 'p' into aagw keys, the
 * value read as MM2's ConfigDef reads it: trailing blanks dropped
 * (Properties.load() keeps them, ConfigDef trims), except where MM2 hands
 * the raw text on (the policy's separator and its internal-topic switch
 * reach DefaultReplicationPolicy.configure() untrimmed).  A "# comment"
 * after a scalar is told in every report about it. */
static void translate(struct mm2 *m, const struct flowable *fl,
                      struct prop *p) {
        char   note[512], q[160];
        char  *v;
        size_t n = strlen(p->val);

        if (fl->kind == K_LIST) {
                translate_value(m, fl, p, p->val);
                return;
        }
        if (strncmp(fl->mm2, "replication.policy.", 19) ||
            !strcmp(fl->mm2, "replication.policy.class"))
                while (n && is_blank(p->val[n - 1]))
                        n--;
        if (!(v = strndup(p->val, n))) {
                m->oom = true;
                return;
        }
        if (inline_hash(v)) {
                quote_upto_hash(q, sizeof(q), v);
                snprintf(note, sizeof(note),
                         "; the value is all of %s: a properties file has "
                         "no comment after a value, and MirrorMaker 2 %s; "
                         "put the comment on a line of its own",
                         q, mm2_verdict(fl->mm2));
                m->value_note = note;
        }
        translate_value(m, fl, p, v);
        m->value_note = NULL;
        free(v);
}

/* Topic lists that differ between flows: each flow that sets its own
 * ("A->B.topics") gets replication.per_flow.A->B.topics, the global
 * value (if any) stays replication.topics for the others, as MM2 reads
 * them.  False for settings aagw holds once for all flows. */
static bool per_flow_lists(struct mm2 *m, const struct flowable *fl) {
        const char *leaf = !strcmp(fl->mm2, "topics")           ? "topics"
                           : !strcmp(fl->mm2, "topics.exclude") ? "topics_exclude"
                                                                : NULL;
        char        key[512];
        struct prop *p;

        if (!leaf)
                return false;
        for (size_t i = 0; i < m->nflows; i++) {
                snprintf(key, sizeof(key), "%s.%s", m->flows[i], fl->mm2);
                if (!(p = mm2_find(m, key)) && fl->alias) {
                        snprintf(key, sizeof(key), "%s.%s", m->flows[i],
                                 fl->alias);
                        p = mm2_find(m, key);
                }
                if (!p)
                        continue;
                snprintf(key, sizeof(key), "replication.per_flow.%s.%s",
                         m->flows[i], leaf);
                add_list(m, key, p);
        }
        if ((p = mm2_find(m, fl->mm2)) ||
            (fl->alias && (p = mm2_find(m, fl->alias))))
                add_list(m, !strcmp(leaf, "topics")
                                ? "replication.topics"
                                : "replication.topics_exclude",
                         p);
        mark_all(m, fl);
        return true;
}

/* Decide each flowable setting over the enabled flows: one value for all,
 * per flow for the topic lists, or refused where they differ. */
static void decide_flowables(struct mm2 *m) {
        for (const struct flowable *fl = flowables; fl->mm2; fl++) {
                struct prop *first = NULL;
                bool         differ = false;
                size_t       set_cnt = 0;

                for (size_t i = 0; i < m->nflows; i++) {
                        struct prop *p = flow_value(m, fl, m->flows[i]);
                        if (p)
                                set_cnt++;
                        if (!first)
                                first = p;
                        else if (p && strcmp(p->val, first->val))
                                differ = true;
                }
                if (!first) {
                        /* A global key with no flow enabled to use it. */
                        first = mm2_find(m, fl->mm2);
                        if (!first && fl->alias)
                                first = mm2_find(m, fl->alias);
                        if (first && !m->nflows) {
                                mark_all(m, fl);
                                continue;
                        }
                        if (!first)
                                continue;
                }
                if ((differ || (set_cnt && set_cnt < m->nflows &&
                                !mm2_find(m, fl->mm2))) &&
                    per_flow_lists(m, fl))
                        continue;
                if (differ ||
                    (set_cnt && set_cnt < m->nflows && !mm2_find(m, fl->mm2))) {
                        mark_all(m, fl);
                        mm2_refuse(m, first,
                                   "the enabled flows do not agree on %s (a "
                                   "per-flow value differs, or only some flows "
                                   "set it); aagw applies one value to every "
                                   "flow: set it once for all",
                                   fl->mm2);
                        continue;
                }
                mark_all(m, fl);
                translate(m, fl, first);
        }
}

/* ------------------------------------------------------------- the file -- */

static bool valid_alias(const char *a) {
        size_t n = strlen(a);
        if (n < 1 || n > 64)
                return false;
        for (; *a; a++)
                if (!isalnum((unsigned char)*a) && *a != '_' && *a != '-')
                        return false;
        return true;
}

static int alias_idx(const struct mm2 *m, const char *a, size_t n) {
        for (size_t i = 0; i < m->nalias; i++)
                if (strlen(m->aliases[i]) == n && !strncmp(m->aliases[i], a, n))
                        return (int)i;
        return -1;
}

/* The separator the enabled flows use, as the file sets it ("." when it
 * does not); for messages. */
static const char *effective_separator(struct mm2 *m) {
        struct prop *sep = separator_prop(m);

        return sep ? sep->val : ".";
}

/* The file has no "clusters" line, which MM2 refuses as well ("Missing
 * required configuration "clusters""): a snippet such as
 * "A->B.enabled = true" alone.  Name the clusters its flow keys use, so
 * the fix can be copied. */
static void missing_clusters(struct mm2 *m) {
        const char *al[MAX_CLUSTERS];
        int         len[MAX_CLUSTERS];
        size_t      n = 0, o = 0;
        char        names[MAX_CLUSTERS * 68] = "";

        for (size_t i = 0; i < m->ps.n; i++) {
                const char *k = m->ps.v[i].key, *arrow = strstr(k, "->");
                const char *dot = arrow ? strchr(arrow, '.') : NULL;
                if (!dot)
                        continue;
                /* The source, then the target of "A->B.key". */
                const char *a[2] = {k, arrow + 2};
                int         l[2] = {(int)(arrow - k), (int)(dot - arrow - 2)};
                for (int e = 0; e < 2; e++) {
                        size_t j = 0;
                        while (j < n && !(len[j] == l[e] &&
                                          !strncmp(al[j], a[e], (size_t)l[e])))
                                j++;
                        if (j == n && n < MAX_CLUSTERS && l[e] > 0 &&
                            l[e] <= 64) {
                                al[n]    = a[e];
                                len[n++] = l[e];
                        }
                }
        }
        for (size_t j = 0; j < n; j++)
                o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%.*s",
                                      j ? ", " : "", len[j], al[j]);
        if (n)
                aagw_config_error_at(
                    m->cfg, m->file, 1, "clusters",
                    "no 'clusters = A, B' line, which MirrorMaker 2 requires "
                    "as well: the flows name %s; add 'clusters = %s' and "
                    "each one's <alias>.bootstrap.servers",
                    names, names);
        else
                aagw_config_error_at(m->cfg, m->file, 1, "clusters",
                                     "no 'clusters = A, B' line: not a "
                                     "MirrorMaker 2 dedicated-mode file");
}

/* Whether MirrorMaker 2 runs flow 'p' ("A->B.enabled"; the flow is the
 * key's first 'flen' bytes).  MM2 reads the value twice:
 * MirrorMakerConfig.clusterPairs() makes a herder for A->B if
 * Boolean.parseBoolean() of it is true (exactly "true", any case, no
 * blank after it) or heartbeats are on for the pair (the default), and
 * the pair's connectors then parse it with ConfigDef (trimmed, refused
 * unless true or false; a refused connector does not start).  So
 * "true " runs unless heartbeats are off, and "false  # comment" or
 * "true  # comment" runs nothing: read as false, with a warning. */
static bool flow_runs(struct mm2 *m, struct prop *p, size_t flen) {
        char         key[512], q[160];
        size_t       n = strlen(p->val);
        struct prop *hb;
        bool         herder;

        if (inline_hash(p->val)) {
                quote_upto_hash(q, sizeof(q), p->val);
                read_as(m, p, "read as false, the flow not enabled",
                        "a properties file has no comment after a value, so "
                        "the value is all of %s, which MirrorMaker 2's "
                        "connectors refuse as neither true nor false: MM2 "
                        "runs none of this flow either",
                        q);
                return false;
        }
        while (n && is_blank(p->val[n - 1]))
                n--;
        if (!(n == 4 && !strncasecmp(p->val, "true", 4)) &&
            !(n == 5 && !strncasecmp(p->val, "false", 5))) {
                mm2_refuse(m, p, "expected true or false");
                return false;
        }
        if (n != 4)
                return false;
        if (n == strlen(p->val))
                return true;
        /* "true" and blanks: the connectors take it, but only if the
         * pair has a herder, which then comes from heartbeats alone. */
        snprintf(key, sizeof(key), "%.*s.emit.heartbeats.enabled", (int)flen,
                 p->key);
        if (!(hb = mm2_find(m, key)))
                hb = mm2_find(m, "emit.heartbeats.enabled");
        herder = !hb || !strcasecmp(hb->val, "true");
        if (!herder)
                read_as(m, p, "read as false, the flow not enabled",
                        "\"true\" followed by blanks is not \"true\" to "
                        "MirrorMaker 2's clusterPairs(), and with %s = %s "
                        "(line %d) nothing else makes MM2 run this flow",
                        hb->key, hb->val, hb->line);
        return herder;
}

static void translate_all(struct mm2 *m) {
        struct prop *cl = mm2_find(m, "clusters");

        if (!cl) {
                missing_clusters(m);
                m->refused = true;
                return;
        }
        cl->used = true;
        /* clusters = A, B */
        {
                const char *s = cl->val;
                char       *al, note[256];
                if (inline_hash(cl->val)) {
                        snprintf(note, sizeof(note),
                                 " (a properties file has no comment after "
                                 "a value: MirrorMaker 2 reads that alias as "
                                 "well; put the comment on a line of its "
                                 "own)");
                        m->value_note = note;
                }
                while ((al = next_item(&s, &m->oom))) {
                        if (!valid_alias(al)) {
                                mm2_refuse(m, cl,
                                           "cluster alias \"%s\": aagw aliases "
                                           "are 1 to 64 of A-Z a-z 0-9 _ -",
                                           al);
                                free(al);
                        } else if (m->nalias == MAX_CLUSTERS ||
                                   alias_idx(m, al, strlen(al)) >= 0) {
                                mm2_refuse(m, cl,
                                           "cluster alias \"%s\" repeated "
                                           "or more than %d clusters",
                                           al, MAX_CLUSTERS);
                                free(al);
                        } else
                                m->aliases[m->nalias++] = al;
                }
                m->value_note = NULL;
                if (m->oom)
                        return;
        }

        /* Cluster and flow scopes; flows first, so 'enabled' is known. */
        for (size_t i = 0; i < m->ps.n; i++) {
                struct prop *p     = &m->ps.v[i];
                const char  *arrow = strstr(p->key, "->");
                const char  *dot;
                int          si, ti;

                if (!arrow || !(dot = strchr(arrow, '.')))
                        continue;
                si = alias_idx(m, p->key, (size_t)(arrow - p->key));
                ti = alias_idx(m, arrow + 2, (size_t)(dot - arrow - 2));
                if (si < 0 || ti < 0 || si == ti) {
                        mm2_refuse(m, p,
                                   "the flow does not name two different "
                                   "clusters of 'clusters'");
                        continue;
                }
                if (strcmp(dot + 1, "enabled"))
                        continue;
                p->used = true;
                if (!flow_runs(m, p, (size_t)(dot - p->key)))
                        continue;
                if (m->nflows < MAX_FLOWS) {
                        m->flows[m->nflows] =
                            strndup(p->key, (size_t)(dot - p->key));
                        if (!m->flows[m->nflows]) {
                                m->oom = true;
                                return;
                        }
                        mm2_add_set(m, "replication.flows", m->flows[m->nflows],
                                    p);
                        m->nflows++;
                }
        }
        if (!m->nflows) {
                aagw_config_error_at(m->cfg, m->file, cl->line, "clusters",
                                     "no flow is enabled (A->B.enabled = "
                                     "true): MirrorMaker 2 would replicate "
                                     "nothing");
                m->refused = true;
        }
        for (size_t a = 0; a < m->nalias; a++) {
                char         key[512];
                struct prop *bs;
                snprintf(key, sizeof(key), "%s.bootstrap.servers",
                         m->aliases[a]);
                if (!(bs = mm2_find(m, key))) {
                        aagw_config_error_at(m->cfg, m->file, cl->line, key,
                                             "cluster %s has no bootstrap "
                                             "servers",
                                             m->aliases[a]);
                        m->refused = true;
                        continue;
                }
                bs->used = true;
                if (inline_hash(bs->val)) {
                        char q[160];
                        quote_upto_hash(q, sizeof(q), bs->val);
                        mm2_refuse(m, bs,
                                   "the value is all of %s: a properties "
                                   "file has no comment after a value, and "
                                   "MirrorMaker 2's clients refuse it too "
                                   "(not a host:port); put the comment on a "
                                   "line of its own",
                                   q);
                        continue;
                }
                snprintf(key, sizeof(key), "clusters.%s.bootstrap_servers",
                         m->aliases[a]);
                mm2_add_set(m, key, bs->val, bs);
        }
        /* Key and trust stores first: their keys are read together. */
        mm2_translate_stores(m);
        /* Per-cluster client properties, then the top-level ones MM2
         * gives every cluster that does not set its own. */
        for (size_t i = 0; i < m->ps.n; i++) {
                struct prop *p   = &m->ps.v[i];
                const char  *dot = strchr(p->key, '.');
                int          ai;
                if (p->used || strstr(p->key, "->") || !dot)
                        continue;
                ai = alias_idx(m, p->key, (size_t)(dot - p->key));
                if (ai < 0)
                        continue;
                mm2_client_prop(m, m->aliases[ai], dot + 1, p);
        }
        for (size_t i = 0; i < m->ps.n; i++) {
                struct prop *p = &m->ps.v[i];
                if (p->used || strstr(p->key, "->") ||
                    (strncmp(p->key, "security.", 9) &&
                     strncmp(p->key, "ssl.", 4) && strncmp(p->key, "sasl.", 5)))
                        continue;
                for (size_t a = 0; a < m->nalias; a++) {
                        char own[512];
                        snprintf(own, sizeof(own), "%s.%s", m->aliases[a],
                                 p->key);
                        if (!mm2_find(m, own))
                                mm2_client_prop(m, m->aliases[a], p->key, p);
                }
                p->used = true;
        }
        decide_flowables(m);
        /* MM2 replicates; it has no unified topics.  The translation keeps
         * to that: the unify stage is off until the operator turns it on
         * (unify.mode), so a migration creates no topic MM2 would not. */
        {
                static char       why[] = "(MirrorMaker 2 has no unify stage)";
                const struct prop pseudo = {why, NULL, cl->line, true, false, 0};
                mm2_add_set(m, "unify.mode", "off", &pseudo);
        }
        /* Per-flow keys of flows that are not enabled, and anything left. */
        for (size_t i = 0; i < m->ps.n; i++) {
                struct prop *p = &m->ps.v[i];
                if (p->used)
                        continue;
                const char *arrow = strstr(p->key, "->");
                const char *bare  = arrow && strchr(arrow, '.')
                                        ? strchr(arrow, '.') + 1
                                        : p->key;
                if (arrow && !flow_enabled(m, p->key))
                        mm2_ignore(m, p, "its flow is not enabled");
                else if (!strncmp(bare, "replication.policy.", 19))
                        /* Passed to DefaultReplicationPolicy.configure(),
                         * which reads only the keys above. */
                        mm2_ignore(m, p,
                                   "MirrorMaker 2 has no such key and "
                                   "ignores it too: its separator is "
                                   "replication.policy.separator, so MM2 "
                                   "names remote topics <alias>%s<topic> "
                                   "with this file",
                                   effective_separator(m));
                else if (arrow)
                        mm2_ignore(m, p,
                                   "not a per-flow MirrorMaker 2 setting "
                                   "aagw knows");
                else if (!strncmp(p->key, "config.providers", 16))
                        mm2_refuse(m, p,
                                   "aagw does not run MM2's config "
                                   "providers: write secrets as ${VAR} "
                                   "environment references in the YAML "
                                   "instead (values here are taken "
                                   "literally)");
                else if (mm2_starts_with_any(p->key, mm2_worker_keys) ||
                         !strncmp(p->key, "dedicated.mode.", 15) ||
                         !strncmp(p->key, "listeners", 9) ||
                         !strncmp(p->key, "rest.", 5))
                        mm2_ignore(m, p,
                                   "a Kafka Connect worker or REST setting; "
                                   "aagw keeps its state in the state "
                                   "directory");
                else
                        mm2_ignore(m, p,
                                   "not a MirrorMaker 2 setting aagw knows");
        }
}

static void mm2_free(struct mm2 *m) {
        props_free(&m->ps);
        for (size_t i = 0; i < m->nalias; i++)
                free(m->aliases[i]);
        for (size_t i = 0; i < m->nflows; i++)
                free(m->flows[i]);
        for (size_t i = 0; i < m->nsets; i++) {
                free(m->sets[i].key);
                free(m->sets[i].val);
        }
        free(m->sets);
        for (size_t i = 0; i < m->npems; i++) {
                free(m->pems[i].path);
                free(m->pems[i].pem);
        }
        free(m->pems);
}

/* Read and translate; false if the file could not be read at all. */
static bool mm2_run(struct mm2 *m, aagw_config_t *cfg, const char *file,
                    const char *text, size_t len, const char *pem_dir) {
        char why[256] = "out of memory";
        int  line     = 0;

        memset(m, 0, sizeof(*m));
        m->file    = file;
        m->cfg     = cfg;
        m->pem_dir = pem_dir;
        if (read_props(text, len, &m->ps, &line, why, sizeof(why))) {
                aagw_config_error_at(cfg, file, line, NULL, "%s", why);
                return false;
        }
        translate_all(m);
        if (m->oom) {
                aagw_config_error_at(cfg, file, 0, NULL, "out of memory");
                return false;
        }
        return true;
}

aagw_err_t aagw_config_load_mm2(aagw_config_t *cfg, const char *file,
                                const char *text, size_t len) {
        struct mm2 m;
        aagw_err_t rc = AAGW_ERR_CONFIG;

        if (mm2_run(&m, cfg, file, text, len, NULL) && !m.refused) {
                rc = AAGW_OK;
                for (size_t i = 0; i < m.nsets; i++)
                        if (aagw_config_set_at(cfg, m.sets[i].key,
                                               m.sets[i].val, file,
                                               m.sets[i].line, 1))
                                rc = AAGW_ERR_CONFIG;
        }
        mm2_free(&m);
        return rc;
}

/* ------------------------------------------------------------ the YAML -- */

/* Settings under 'prefix' ("replication.") as YAML at 'indent': lists
 * gather their items, every line says where it came from. */
static void emit_section(FILE *out, const struct mm2 *m, const char *prefix,
                         int indent) {
        size_t pl = strlen(prefix);

        for (size_t i = 0; i < m->nsets; i++) {
                const struct setting *s = &m->sets[i];
                const char           *name;
                bool                  seen = false, list;

                if (strncmp(s->key, prefix, pl) || strchr(s->key + pl, '.'))
                        continue;
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(m->sets[j].key, s->key))
                                seen = true;
                if (seen)
                        continue;
                name = s->key + pl;
                list = !strcmp(name, "topics") ||
                       !strcmp(name, "topics_exclude") ||
                       !strcmp(name, "groups") ||
                       !strcmp(name, "groups_exclude") ||
                       !strcmp(name, "topic_configs_exclude") ||
                       !strcmp(name, "flows");
                if (!list) {
                        fprintf(out, "%*s%s: ", indent, "", name);
                        aagw_config_yaml_quote(out, s->val);
                        fprintf(out, "  # %s:%d %s%s%s\n", m->file, s->line,
                                s->mm2key, s->note ? " " : "",
                                s->note ? s->note : "");
                        continue;
                }
                fprintf(out, "%*s%s:\n", indent, "", name);
                for (size_t j = i; j < m->nsets; j++) {
                        if (strcmp(m->sets[j].key, s->key))
                                continue;
                        fprintf(out, "%*s- ", indent + 2, "");
                        aagw_config_yaml_quote(out, m->sets[j].val);
                        fprintf(out, "  # %s:%d %s\n", m->file,
                                m->sets[j].line, m->sets[j].mm2key);
                }
        }
}

static bool any_under(const struct mm2 *m, const char *prefix) {
        for (size_t i = 0; i < m->nsets; i++)
                if (!strncmp(m->sets[i].key, prefix, strlen(prefix)))
                        return true;
        return false;
}

/* Write 'pem' to 'path' whole or not at all (a temporary file renamed
 * over it), readable by all: CA certificates are public. */
static int write_pem(const char *path, const char *pem, char *why,
                     size_t why_size) {
        char   tmp[4200];
        int    fd;
        size_t len = strlen(pem);

        snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
        if ((fd = mkstemp(tmp)) < 0) {
                snprintf(why, why_size, "%s", strerror(errno));
                return -1;
        }
        bool ok = !fchmod(fd, 0644) && write(fd, pem, len) == (ssize_t)len &&
                  !fsync(fd);
        int e = errno;
        if (close(fd) && ok) {
                ok = false;
                e  = errno;
        }
        if (ok && rename(tmp, path)) {
                ok = false;
                e  = errno;
        }
        if (!ok) {
                snprintf(why, why_size, "%s", strerror(e));
                unlink(tmp);
                return -1;
        }
        return 0;
}

aagw_err_t aagw_config_mm2_to_yaml(aagw_config_t *cfg, const char *file,
                                   const char *text, size_t len, bool secrets,
                                   const char *pem_dir, FILE *out) {
        struct mm2 m;
        aagw_err_t rc = AAGW_ERR_CONFIG;
        char       why[256];

        if (!mm2_run(&m, cfg, file, text, len, pem_dir) || m.refused) {
                mm2_free(&m);
                return rc;
        }
        /* The converted trust stores the YAML names, now that it will be
         * printed. */
        for (size_t i = 0; i < m.npems; i++)
                if (write_pem(m.pems[i].path, m.pems[i].pem, why,
                              sizeof(why))) {
                        aagw_config_error_at(cfg, m.pems[i].path, 0, NULL,
                                             "cannot write: %s", why);
                        mm2_free(&m);
                        return AAGW_ERR_STORE;
                }
        fprintf(out, "# aagw configuration converted from MirrorMaker 2's %s\n"
                     "# (aagw config import-mm2); each line names the MM2 key "
                     "it came from.\n",
                file);
        fprintf(out, "clusters:\n");
        for (size_t a = 0; a < m.nalias; a++) {
                char pre[256];
                fprintf(out, "  %s:\n", m.aliases[a]);
                snprintf(pre, sizeof(pre), "clusters.%s.", m.aliases[a]);
                emit_section(out, &m, pre, 4);
                snprintf(pre, sizeof(pre), "clusters.%s.properties.",
                         m.aliases[a]);
                if (any_under(&m, pre)) {
                        fprintf(out, "    properties:\n");
                        /* Property names hold dots: print them whole. */
                        for (size_t i = 0; i < m.nsets; i++) {
                                const struct setting *s = &m.sets[i];
                                const char           *nm;
                                if (strncmp(s->key, pre, strlen(pre)))
                                        continue;
                                nm = s->key + strlen(pre);
                                fprintf(out, "      %s: ", nm);
                                if (!secrets && aagw_key_is_secret(nm)) {
                                        fprintf(out, "\"${MM2_");
                                        for (const char *c = m.aliases[a]; *c;
                                             c++)
                                                fputc(isalnum((unsigned char)*c)
                                                          ? toupper((unsigned char)*c)
                                                          : '_',
                                                      out);
                                        fputc('_', out);
                                        for (const char *c = nm; *c; c++)
                                                fputc(isalnum((unsigned char)*c)
                                                          ? toupper((unsigned char)*c)
                                                          : '_',
                                                      out);
                                        fputs("}\"", out);
                                } else
                                        aagw_config_yaml_quote(out, s->val);
                                fprintf(out, "  # %s:%d %s%s%s\n", file,
                                        s->line, s->mm2key, s->note ? " " : "",
                                        s->note ? s->note : "");
                        }
                }
        }
        if (any_under(&m, "replication.")) {
                fprintf(out, "replication:\n");
                emit_section(out, &m, "replication.", 2);
        }
        if (any_under(&m, "replication.per_flow.")) {
                fprintf(out, "  per_flow:\n");
                for (size_t i = 0; i < m.nflows; i++) {
                        char pre[256];
                        snprintf(pre, sizeof(pre), "replication.per_flow.%s.",
                                 m.flows[i]);
                        if (!any_under(&m, pre))
                                continue;
                        fprintf(out, "    %s:\n", m.flows[i]);
                        emit_section(out, &m, pre, 6);
                }
        }
        if (any_under(&m, "unify.")) {
                fprintf(out, "unify:\n");
                emit_section(out, &m, "unify.", 2);
        }
        if (any_under(&m, "mm2.")) {
                fprintf(out, "mm2:\n");
                emit_section(out, &m, "mm2.", 2);
        }
        rc = AAGW_OK;
        mm2_free(&m);
        return rc;
}
