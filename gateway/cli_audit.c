/*
 * gateway/cli_audit.c: `aagw audit`, what the unify stage did with an
 * event, read from the gateway's state dir.
 *
 *   aagw audit id ID          first seen, then every later duplicate dropped
 *   aagw audit key KEY        the current last-write-wins winner, then the
 *                             versions accepted and superseded in the window
 *   aagw audit recent [...]   the newest entries since a time
 *   aagw audit summary [...]  counts per verdict, origin and topic
 *
 * The store is opened as a RocksDB secondary instance: no lock is taken,
 * so this works while the gateway runs (its view is the gateway's state at
 * open) and after it stopped.  The window is the one the gateway's store
 * recorded, so "not found" means what the gateway would think.  Under
 * scale-out the site's log is read from its cluster instead ("SCALE-OUT"
 * below).
 *
 * Output is an aligned table, or with --json one JSON object per line
 * (keys in docs/audit.md).  Ids and keys are arbitrary bytes: tables print
 * printable ASCII and valid UTF-8 as is, a backslash as \\ and any other
 * byte as \xNN; JSON prints valid UTF-8 as a JSON string (json-c escapes
 * it) and anything else as the table form plus the raw bytes in hex
 * ("id_hex", "key_hex").
 */
#include "gateway_int.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <json-c/json.h>

#include "aagw_dedup.h"

#define DEFAULT_SINCE_MS (10 * 60 * 1000)
#define DEFAULT_LIMIT 100
#define MAX_LIMIT 100000
#define MAX_SETS 64

/* Room for an escaped id or key: every byte may become \xNN. */
#define ESC_SIZE (4 * AAGW_AUDIT_EKEY_MAX + 8)

static void usage(FILE *out) {
        fprintf(out,
                "Usage: aagw audit id ID [OPTIONS]\n"
                "       aagw audit key KEY [OPTIONS]\n"
                "       aagw audit recent [--since DURATION] [--verdict V] "
                "[--limit N] [OPTIONS]\n"
                "       aagw audit summary [--since DURATION] [OPTIONS]\n"
                "\n"
                "What the unify stage did, from the gateway's state dir; "
                "works while the\n"
                "gateway runs (read-only, no lock) and after it stopped. "
                "Entries older than\n"
                "the gateway's window (unify.window) are gone.\n"
                "\n"
                "  id ID         where and when ID was first seen, and every "
                "later duplicate\n"
                "                dropped (where, when)\n"
                "  key KEY       the current last-write-wins winner of KEY, "
                "then its versions\n"
                "                in the window (accepted, superseded, "
                "identical), oldest first\n"
                "  recent        the newest entries, oldest first\n"
                "  summary       counts per verdict, per origin and per "
                "topic\n"
                "\n"
                "Options:\n"
                "      --since DURATION   recent, summary: entries from "
                "this long ago\n"
                "                         (500ms, 30s, 10m, 24h, 7d; "
                "default: recent 10m,\n"
                "                         summary the whole window)\n"
                "      --verdict V        recent: only accepted, dropped, "
                "superseded,\n"
                "                         identical or rejected\n"
                "      --limit N          recent: at most the newest N "
                "entries (default %d)\n"
                "      --json             one JSON object per line instead "
                "of a table\n"
                "      --state-dir DIR    the gateway's state dir "
                "(gateway.state_dir,\n"
                "                         default aagw-state)\n"
                "  -c, --config FILE      read gateway.state_dir from the "
                "gateway's config\n"
                "      --cluster A=B, --site, --scale-out, ...\n"
                "                         `aagw run`'s flags: with "
                "scale_out.enabled the\n"
                "                         site's audit is read from its "
                "cluster, not the\n"
                "                         state dir (docs/audit.md, "
                "\"Scale-out\")\n"
                "      --set KEY=VALUE    any config key, e.g. --set "
                "gateway.state_dir=DIR\n"
                "  -h, --help             this text\n"
                "\n"
                "An ID or KEY that starts with '-' goes after `--`. "
                "See docs/audit.md.\n"
                "Exit status: 0 found, 1 not found in the window or a "
                "store error, 2 usage.\n",
                DEFAULT_LIMIT);
}

/* ------------------------------ FORMATTING ------------------------------ */

/* Length of the valid UTF-8 sequence at 'p' (before 'end') with its code
 * point in *cp, or 0 if the bytes there are not one (overlong forms,
 * surrogates and code points above U+10FFFF included). */
static size_t utf8_seq(const uint8_t *p, const uint8_t *end, uint32_t *cp) {
        size_t   n;
        uint32_t c, min;

        if (p[0] < 0x80) {
                *cp = p[0];
                return 1;
        }
        if ((p[0] & 0xe0) == 0xc0)
                n = 2, c = p[0] & 0x1f, min = 0x80;
        else if ((p[0] & 0xf0) == 0xe0)
                n = 3, c = p[0] & 0x0f, min = 0x800;
        else if ((p[0] & 0xf8) == 0xf0)
                n = 4, c = p[0] & 0x07, min = 0x10000;
        else
                return 0;
        if ((size_t)(end - p) < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                c = c << 6 | (p[i] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
                return 0;
        *cp = c;
        return n;
}

static bool utf8_valid(const uint8_t *p, size_t len) {
        const uint8_t *end = p + len;
        uint32_t       cp;
        size_t         n;

        for (; p < end; p += n)
                if (!(n = utf8_seq(p, end, &cp)))
                        return false;
        return true;
}

/* The table form of bytes 'p': printable ASCII and printable UTF-8 as
 * they are, a backslash doubled, anything else (controls, C1 controls,
 * bytes that are not UTF-8) as \xNN.  'out' has 4 * len + 1 bytes. */
static void escape(const void *vp, size_t len, char *out) {
        const uint8_t *p = vp, *end = p + len;
        uint32_t       cp;
        size_t         n;

        while (p < end) {
                n = utf8_seq(p, end, &cp);
                if (n && cp == '\\') {
                        *out++ = '\\';
                        *out++ = '\\';
                } else if (n && cp >= 0x20 && cp != 0x7f &&
                           !(cp >= 0x80 && cp < 0xa0)) {
                        memcpy(out, p, n);
                        out += n;
                } else {
                        n = 1;
                        out += sprintf(out, "\\x%02x", p[0]);
                }
                p += n;
        }
        *out = '\0';
}

static void hex(const void *vp, size_t len, char *out) {
        const uint8_t *p = vp;
        for (size_t i = 0; i < len; i++)
                out += sprintf(out, "%02x", p[i]);
        *out = '\0';
}

/* UTC ISO-8601 with milliseconds: 2024-05-01T10:00:00.123Z. */
static void iso_ms(int64_t ms, char *buf, size_t size) {
        int64_t   s = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
        time_t    t = (time_t)s;
        struct tm tm;

        if (!gmtime_r(&t, &tm)) {
                snprintf(buf, size, "%" PRId64, ms);
                return;
        }
        size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, size - n, ".%03dZ", (int)(ms - s * 1000));
}

/* A window as people write it: 24h, 90m, 30s, 1500ms (hours at most, so
 * the default reads "24h", as in the docs). */
static void fmt_window(int64_t ms, char *buf, size_t size) {
        static const struct {
                const char *unit;
                int64_t     ms;
        } units[] = {{"h", 3600000}, {"m", 60000}, {"s", 1000}};
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (ms > 0 && ms % units[i].ms == 0) {
                        snprintf(buf, size, "%" PRId64 "%s", ms / units[i].ms,
                                 units[i].unit);
                        return;
                }
        snprintf(buf, size, "%" PRId64 "ms", ms);
}

/* -------------------------------- TABLES -------------------------------- */

/* An aligned table.  Rows are kept until flushed (at the end, or every
 * TBL_CHUNK rows so that memory stays bounded; column widths then only
 * grow, and rows already printed keep theirs). */
#define TBL_MAXCOL 10
#define TBL_CHUNK 4096

struct table {
        size_t      ncol;
        const char *head[TBL_MAXCOL];
        bool        right[TBL_MAXCOL]; /* numbers: right-aligned */
        size_t      width[TBL_MAXCOL];
        char      **cells; /* nrows * ncol, malloc()ed */
        size_t      nrows;
        bool        head_done;
        bool        oom;
};

/* Display width: code points (the cells are escaped, so valid UTF-8). */
static size_t text_width(const char *s) {
        size_t w = 0;
        for (; *s; s++)
                w += ((uint8_t)*s & 0xc0) != 0x80;
        return w;
}

static void table_init(struct table *t, const char *const *heads,
                       const bool *right) {
        memset(t, 0, sizeof(*t));
        while (t->ncol < TBL_MAXCOL && heads[t->ncol]) {
                t->head[t->ncol]  = heads[t->ncol];
                t->right[t->ncol] = right && right[t->ncol];
                t->width[t->ncol] = text_width(heads[t->ncol]);
                t->ncol++;
        }
}

static void print_cell(const struct table *t, size_t c, const char *s) {
        size_t pad  = t->width[c] - text_width(s);
        bool   last = c + 1 == t->ncol;

        if (t->right[c])
                printf("%*s%s", (int)pad, "", s);
        else
                printf("%s%*s", s, last ? 0 : (int)pad, "");
        fputs(last ? "\n" : "  ", stdout);
}

static void table_flush(struct table *t) {
        if (!t->head_done) {
                for (size_t c = 0; c < t->ncol; c++)
                        print_cell(t, c, t->head[c]);
                t->head_done = true;
        }
        for (size_t r = 0; r < t->nrows; r++)
                for (size_t c = 0; c < t->ncol; c++) {
                        char *s = t->cells[r * t->ncol + c];
                        print_cell(t, c, s ? s : "?");
                        free(s);
                }
        t->nrows = 0;
}

static void table_row(struct table *t, const char *const *cells) {
        if (!t->cells &&
            !(t->cells = calloc(TBL_CHUNK * t->ncol, sizeof(char *)))) {
                t->oom = true;
                return;
        }
        for (size_t c = 0; c < t->ncol; c++) {
                char  *s = strdup(cells[c]);
                size_t w = text_width(cells[c]);
                if (!s)
                        t->oom = true;
                t->cells[t->nrows * t->ncol + c] = s;
                if (w > t->width[c])
                        t->width[c] = w;
        }
        if (++t->nrows == TBL_CHUNK)
                table_flush(t);
}

static void table_deinit(struct table *t) {
        for (size_t i = 0; i < t->nrows * t->ncol; i++)
                free(t->cells[i]);
        free(t->cells);
}

/* --------------------------------- JSON --------------------------------- */

static void json_print(json_object *o) {
        puts(json_object_to_json_string_ext(
            o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

/* "name": the bytes as a JSON string if they are UTF-8, else their table
 * form, plus "name_hex" with the raw bytes. */
static void json_add_bytes(json_object *o, const char *name, const void *p,
                           size_t len) {
        if (utf8_valid(p, len)) {
                json_object_object_add(o, name,
                                       json_object_new_string_len(p, (int)len));
                return;
        }
        char *esc = malloc(4 * len + 1), *hx = malloc(2 * len + 1);
        char  hname[64];
        if (esc && hx) {
                escape(p, len, esc);
                hex(p, len, hx);
                snprintf(hname, sizeof(hname), "%s_hex", name);
                json_object_object_add(o, name, json_object_new_string(esc));
                json_object_object_add(o, hname, json_object_new_string(hx));
        }
        free(esc);
        free(hx);
}

static void json_add_str(json_object *o, const char *name, const char *s) {
        json_add_bytes(o, name, s, strlen(s));
}

static void json_add_time(json_object *o, const char *name, int64_t ms) {
        char key[64], iso[40];
        snprintf(key, sizeof(key), "%s_ms", name);
        iso_ms(ms, iso, sizeof(iso));
        json_object_object_add(o, key, json_object_new_int64(ms));
        json_object_object_add(o, name, json_object_new_string(iso));
}

/* One audit entry as a JSON object ("type": "audit"); 'event' (audit id
 * only) may be NULL. */
static void json_audit(const struct aagw_audit *a, const char *event) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "type", json_object_new_string("audit"));
        json_add_time(o, "time", a->time_ms);
        json_object_object_add(
            o, "verdict",
            json_object_new_string(aagw_audit_verdict_name(a->verdict)));
        if (event)
                json_object_object_add(o, "event",
                                       json_object_new_string(event));
        json_add_str(o, "site", a->site);
        json_add_str(o, "origin", a->origin);
        json_add_str(o, "topic", a->topic);
        json_object_object_add(o, "partition",
                               json_object_new_int(a->partition));
        json_object_object_add(o, "offset", json_object_new_int64(a->offset));
        json_object_object_add(o, "hlc", json_object_new_uint64(a->hlc));
        json_add_bytes(o, "id", a->id, a->id_len);
        if (a->ekey) {
                json_add_bytes(o, "key", a->ekey, a->ekey_len);
                json_object_object_add(
                    o, "key_truncated",
                    json_object_new_boolean(a->ekey_truncated));
        }
        json_print(o);
}

/* -------------------------------- OPTIONS -------------------------------- */

enum {
        OPT_CONFIG = 'c',
        OPT_HELP   = 'h',
        OPT_STATE  = 900,
        OPT_SET,
        OPT_JSON,
        OPT_SINCE,
        OPT_VERDICT,
        OPT_LIMIT,
        OPT_CLUSTER,
        OPT_TABLE = 1000, /* + the key's row: its quick-start flag */
};

struct audit_opts {
        const char *sub; /* id, key, recent, summary */
        const char *arg; /* ID or KEY */
        const char *config_path;
        const char *sets[MAX_SETS][2]; /* key, value ("--state-dir" too) */
        const char *set_flag[MAX_SETS];
        size_t      nsets;
        bool        json;
        bool        has_since, has_verdict, has_limit;
        int64_t     since_ms; /* a duration */
        int         verdict;  /* -1: all */
        long        limit;
};

/* "aagw: audit: <message>" and the usage on stderr; returns EXIT_USAGE. */
static int usage_err(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...) {
        va_list ap;

        fputs("aagw: audit: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        usage(stderr);
        return EXIT_USAGE;
}

static int add_set(struct audit_opts *o, const char *key, const char *value,
                   const char *flag) {
        if (o->nsets == MAX_SETS) {
                gw_errorf("audit: too many options");
                return EXIT_USAGE;
        }
        o->sets[o->nsets][0]    = key;
        o->sets[o->nsets][1]    = value;
        o->set_flag[o->nsets++] = flag;
        return EXIT_OK;
}

/* Parse argv into 'o'.  Returns EXIT_OK, GW_HELP_SHOWN or EXIT_USAGE
 * (reported). */
static int parse_args(int argc, char **argv, struct audit_opts *o) {
        static const struct option own[] = {
            {"config", required_argument, NULL, OPT_CONFIG},
            {"state-dir", required_argument, NULL, OPT_STATE},
            {"set", required_argument, NULL, OPT_SET},
            {"json", no_argument, NULL, OPT_JSON},
            {"since", required_argument, NULL, OPT_SINCE},
            {"verdict", required_argument, NULL, OPT_VERDICT},
            {"limit", required_argument, NULL, OPT_LIMIT},
            {"help", no_argument, NULL, OPT_HELP},
            {"cluster", required_argument, NULL, OPT_CLUSTER}};
        struct option longopts[96];
        size_t        nlong = 0;
        int           opt, rc;
        char         *end;

        /* `run`'s cluster and quick-start flags too, so that a member's
         * command line (--cluster, --site, --scale-out, --gateway-id...)
         * names the site whose log a scale-out audit reads. */
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
                longopts[nlong++] = own[i];
        for (size_t i = 0; aagw_config_keys[i].path &&
                           nlong < sizeof(longopts) / sizeof(longopts[0]) - 1;
             i++) {
                const char *f = aagw_config_keys[i].flag;
                if (!f || !strcmp(f, "--cluster") || !strcmp(f, "--state-dir"))
                        continue;
                longopts[nlong++] = (struct option){f + 2, required_argument,
                                                    NULL, OPT_TABLE + (int)i};
        }
        longopts[nlong] = (struct option){NULL, 0, NULL, 0};

        memset(o, 0, sizeof(*o));
        o->verdict = -1;
        o->limit   = DEFAULT_LIMIT;
        optind     = 1;
        opterr     = 0;
        while ((opt = getopt_long(argc, argv, ":c:h", longopts, NULL)) != -1) {
                switch (opt) {
                case OPT_HELP:
                        usage(stdout);
                        return GW_HELP_SHOWN;
                case OPT_CONFIG:
                        o->config_path = optarg;
                        break;
                case OPT_STATE:
                        if ((rc = add_set(o, "gateway.state_dir", optarg,
                                          "--state-dir")))
                                return rc;
                        break;
                case OPT_SET: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg)
                                return usage_err("--set: expected KEY=VALUE, "
                                                 "got \"%s\"",
                                                 optarg);
                        if ((rc = add_set(o, optarg, eq + 1, "--set")))
                                return rc;
                        break;
                }
                case OPT_CLUSTER: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg)
                                return usage_err("--cluster: expected "
                                                 "ALIAS=BOOTSTRAPS, got \"%s\"",
                                                 optarg);
                        if ((rc = add_set(o, optarg, eq + 1, "--cluster")))
                                return rc;
                        break;
                }
                case OPT_JSON:
                        o->json = true;
                        break;
                case OPT_SINCE:
                        if (aagw_duration_parse(optarg, &o->since_ms) ||
                            o->since_ms <= 0)
                                return usage_err("--since: expected a "
                                                 "duration such as 30s, 10m "
                                                 "or 24h, got \"%s\"",
                                                 optarg);
                        o->has_since = true;
                        break;
                case OPT_VERDICT:
                        o->verdict = -1;
                        for (int v = 0; v < AAGW_AUDIT__CNT; v++)
                                if (!strcmp(optarg,
                                            aagw_audit_verdict_name(
                                                (aagw_audit_verdict_t)v)))
                                        o->verdict = v;
                        if (o->verdict < 0)
                                return usage_err(
                                    "--verdict: expected accepted, dropped, "
                                    "superseded, identical or rejected, got "
                                    "\"%s\"",
                                    optarg);
                        o->has_verdict = true;
                        break;
                case OPT_LIMIT:
                        errno    = 0;
                        o->limit = strtol(optarg, &end, 10);
                        if (errno || end == optarg || *end || o->limit < 1 ||
                            o->limit > MAX_LIMIT)
                                return usage_err("--limit: expected 1.."
                                                 "100000, got \"%s\"",
                                                 optarg);
                        o->has_limit = true;
                        break;
                case ':':
                        return usage_err("%s requires an argument",
                                         argv[optind - 1]);
                default:
                        if (opt >= OPT_TABLE) {
                                const struct cfg_key *k =
                                    &aagw_config_keys[opt - OPT_TABLE];
                                if ((rc = add_set(o, k->path, optarg, k->flag)))
                                        return rc;
                                break;
                        }
                        if (optopt)
                                gw_errorf("audit: unknown option -%c", optopt);
                        else
                                gw_errorf("audit: unknown option %s",
                                          argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc)
                return usage_err("a subcommand is required (id, key, recent, "
                                 "summary)");
        o->sub         = argv[optind++];
        bool takes_arg = !strcmp(o->sub, "id") || !strcmp(o->sub, "key");
        if (!takes_arg && strcmp(o->sub, "recent") && strcmp(o->sub, "summary"))
                return usage_err("unknown subcommand '%s'", o->sub);
        if (takes_arg) {
                if (optind >= argc)
                        return usage_err("%s: the %s is missing", o->sub,
                                         !strcmp(o->sub, "id") ? "ID" : "KEY");
                o->arg = argv[optind++];
                if (!strcmp(o->sub, "id") && strlen(o->arg) > AAGW_ID_MAX) {
                        gw_errorf("audit: id: longer than %d bytes, which no "
                                  "stored id is",
                                  AAGW_ID_MAX);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc)
                return usage_err("unexpected argument '%s'", argv[optind]);
        /* Options that the subcommand would silently ignore are mistakes. */
        bool recent = !strcmp(o->sub, "recent");
        if (o->has_since && takes_arg)
                return usage_err("%s: --since applies to recent and summary "
                                 "only",
                                 o->sub);
        if ((o->has_verdict || o->has_limit) && !recent)
                return usage_err("%s: %s applies to recent only", o->sub,
                                 o->has_verdict ? "--verdict" : "--limit");
        return EXIT_OK;
}

/* The state dir as `run` would find it: defaults, then -c FILE, then the
 * flags.  Returns EXIT_OK with the config in *cfgp, or EXIT_USAGE
 * (reported). */
static int load_config(const struct audit_opts *o, aagw_config_t **cfgp) {
        aagw_config_t *cfg = aagw_config_new();

        if (!cfg) {
                gw_errorf("out of memory");
                return EXIT_RUNTIME;
        }
        if (o->config_path)
                aagw_config_load_file(cfg, o->config_path);
        for (size_t i = 0; i < o->nsets; i++) {
                char        key[256];
                const char *k = o->sets[i][0];
                if (!strcmp(o->set_flag[i], "--set")) {
                        snprintf(key, sizeof(key), "%.*s",
                                 (int)(strchr(k, '=') - k), k);
                        k = key;
                } else if (!strcmp(o->set_flag[i], "--cluster")) {
                        snprintf(key, sizeof(key),
                                 "clusters.%.*s.bootstrap_servers",
                                 (int)(strchr(k, '=') - k), k);
                        k = key;
                }
                aagw_config_set(cfg, k, o->sets[i][1], o->set_flag[i]);
        }
        aagw_config_validate(cfg);
        if (*aagw_config_errors(cfg)) {
                gw_config_print_errors(cfg);
                aagw_config_destroy(cfg);
                return EXIT_USAGE;
        }
        *cfgp = cfg;
        return EXIT_OK;
}

/* ------------------------------ SUBCOMMANDS ------------------------------ */

/* audit id marks, per site, the first accepted entry as "first seen". */
struct firsts {
        size_t n;
        char   site[AAGW_AUDIT_SCOPES_MAX][AAGW_ALIAS_MAX + 1];
};

struct ctx {
        struct firsts            first;
        aagw_store_t            *st;
        const struct audit_opts *o;
        char                     window[32];
        struct table             t;
        size_t                   n; /* entries seen by the callback */
        const char *header;         /* printed before the first row, or NULL */
        char        err[1024];
};

/* The common cells of an entry: time, verdict or event, site, origin,
 * topic, partition, offset.  Buffers are the caller's. */
struct cells {
        char time[40], part[16], off[24], hlc[24];
        char site[4 * AAGW_ALIAS_MAX + 1], origin[4 * AAGW_ALIAS_MAX + 1];
        char topic[4 * AAGW_TOPIC_MAX + 1];
        char id[4 * AAGW_ID_MAX + 1], key[ESC_SIZE];
};

static void fill_cells(const struct aagw_audit *a, struct cells *c) {
        iso_ms(a->time_ms, c->time, sizeof(c->time));
        snprintf(c->part, sizeof(c->part), "%" PRId32, a->partition);
        snprintf(c->off, sizeof(c->off), "%" PRId64, a->offset);
        snprintf(c->hlc, sizeof(c->hlc), "%" PRIu64, a->hlc);
        escape(a->site, strlen(a->site), c->site);
        escape(a->origin, strlen(a->origin), c->origin);
        escape(a->topic, strlen(a->topic), c->topic);
        escape(a->id, a->id_len, c->id);
        if (a->ekey) {
                escape(a->ekey, a->ekey_len, c->key);
                if (a->ekey_truncated)
                        strcat(c->key, "...");
        } else {
                strcpy(c->key, "-");
        }
}

static void print_header(struct ctx *x) {
        if (x->header) {
                fputs(x->header, stdout);
                x->header = NULL;
        }
}

/* True the first time 'site' is asked about: audit id's first accepted
 * entry at a site is where the id was first seen there; later entries are
 * the duplicates dropped. */
static bool first_at(struct firsts *f, const char *site) {
        for (size_t i = 0; i < f->n; i++)
                if (!strcmp(f->site[i], site))
                        return false;
        if (f->n < AAGW_AUDIT_SCOPES_MAX)
                snprintf(f->site[f->n++], sizeof(f->site[0]), "%s", site);
        return true;
}

static int cb_id(const struct aagw_audit *a, void *opaque) {
        struct ctx  *x = opaque;
        const char  *event;
        struct cells c;

        x->n++;
        if (a->verdict == AAGW_AUDIT_ACCEPTED && first_at(&x->first, a->site)) {
                event = x->o->json ? "first_seen" : "first seen";
        } else {
                event = aagw_audit_verdict_name(a->verdict);
        }
        if (x->o->json) {
                json_audit(a, event);
                return 0;
        }
        print_header(x);
        fill_cells(a, &c);
        const char *row[] = {c.time,  event,  c.site, c.origin,
                             c.topic, c.part, c.off};
        table_row(&x->t, row);
        return 0;
}

static int cb_key(const struct aagw_audit *a, void *opaque) {
        struct ctx  *x = opaque;
        struct cells c;

        x->n++;
        if (x->o->json) {
                json_audit(a, NULL);
                return 0;
        }
        print_header(x);
        fill_cells(a, &c);
        const char *row[] = {c.time,  aagw_audit_verdict_name(a->verdict),
                             c.site,  c.origin,
                             c.topic, c.part,
                             c.off,   c.hlc,
                             c.id};
        table_row(&x->t, row);
        return 0;
}

static int not_found(struct ctx *x, const char *what) {
        char   esc[ESC_SIZE];
        size_t len = strlen(x->o->arg);

        /* A key may be longer than anything worth echoing. */
        escape(x->o->arg, len > AAGW_AUDIT_EKEY_MAX ? AAGW_AUDIT_EKEY_MAX : len,
               esc);
        if (len > AAGW_AUDIT_EKEY_MAX)
                strcat(esc, "...");
        gw_errorf("audit: %s '%s' not found in the last %s window", what, esc,
                  x->window);
        return EXIT_RUNTIME;
}

/* The common end of audit id and audit key: print the header (when
 * something was found in the state), then the entries the query
 * 'by' yields for (arg, len) through 'cb', as a table or JSON lines;
 * "not found" when neither the state nor the log knows 'what'. */
static int list_entries(struct ctx *x, const char *hdr, size_t nfound,
                        const char *const *heads, const bool *right,
                        aagw_err_t (*by)(aagw_store_t *, const void *, size_t,
                                         aagw_audit_cb_t *, void *, char *,
                                         size_t),
                        const void *arg, size_t len, aagw_audit_cb_t *cb,
                        const char *what) {
        x->header = hdr;
        if (nfound && !x->o->json)
                print_header(x);
        table_init(&x->t, heads, right);
        if (by(x->st, arg, len, cb, x, x->err, sizeof(x->err))) {
                table_deinit(&x->t);
                gw_errorf("audit: %s", x->err);
                return EXIT_RUNTIME;
        }
        if (!nfound && !x->n) {
                table_deinit(&x->t);
                return not_found(x, what);
        }
        if (!x->o->json) {
                if (x->n)
                        table_flush(&x->t);
                else
                        puts("(no audit entries in the window)");
        }
        table_deinit(&x->t);
        return x->t.oom ? EXIT_RUNTIME : EXIT_OK;
}

static int cmd_id(struct ctx *x) {
        static const char *const heads[] = {"TIME",   "EVENT", "SITE",
                                            "ORIGIN", "TOPIC", "PARTITION",
                                            "OFFSET", NULL};
        static const bool        right[] = {0, 0, 0, 0, 0, 1, 1};
        const char              *id      = x->o->arg;
        size_t                   len     = strlen(id);
        size_t                   nfound  = 0, off;
        char                     esc[4 * AAGW_ID_MAX + 1], t[40];
        static char              hdr[AAGW_AUDIT_SCOPES_MAX * 1024 + 8192];
        static struct aagw_id_state states[AAGW_AUDIT_SCOPES_MAX];
        struct cells             c; /* a seen entry's escaped strings */

        if (aagw_audit_id_state(x->st, id, len, states,
                                AAGW_AUDIT_SCOPES_MAX, &nfound, x->err,
                                sizeof(x->err))) {
                gw_errorf("audit: %s", x->err);
                return EXIT_RUNTIME;
        }
        escape(id, len, esc);
        off = (size_t)snprintf(hdr, sizeof(hdr), "id:          %s\n", esc);
        for (size_t k = 0; k < nfound; k++) {
                const struct aagw_seen seen = states[k].seen;

                iso_ms(seen.time_ms, t, sizeof(t));
                escape(seen.site, strlen(seen.site), c.site);
                escape(seen.origin, strlen(seen.origin), c.origin);
                escape(seen.topic, strlen(seen.topic), c.topic);
                if (x->o->json) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(
                            o, "type", json_object_new_string("first_seen"));
                        json_add_bytes(o, "id", id, len);
                        json_add_time(o, "time", seen.time_ms);
                        json_add_str(o, "site", seen.site);
                        json_add_str(o, "origin", seen.origin);
                        json_add_str(o, "topic", seen.topic);
                        json_object_object_add(
                            o, "partition",
                            json_object_new_int(seen.partition));
                        json_object_object_add(
                            o, "offset", json_object_new_int64(seen.offset));
                        json_object_object_add(
                            o, "hlc", json_object_new_uint64(seen.hlc));
                        json_print(o);
                }
                if (off < sizeof(hdr))
                        off += (size_t)snprintf(
                            hdr + off, sizeof(hdr) - off,
                            "first seen:  %s at %s (origin %s, %s [%" PRId32
                            "] offset %" PRId64 ")\n",
                            t, c.site, c.origin, c.topic, seen.partition,
                            seen.offset);
        }
        if (!nfound && off < sizeof(hdr))
                off += (size_t)snprintf(hdr + off, sizeof(hdr) - off,
                                        "first seen:  not in the window\n");
        if (off < sizeof(hdr))
                snprintf(hdr + off, sizeof(hdr) - off, "window:      %s\n\n",
                         x->window);
        return list_entries(x, hdr, nfound, heads, right,
                            aagw_store_audit_by_id, id, len, cb_id, "id");
}

static int cmd_key(struct ctx *x) {
        static const char *const heads[] = {
            "TIME",      "VERDICT", "SITE", "ORIGIN", "TOPIC",
            "PARTITION", "OFFSET",  "HLC",  "ID",     NULL};
        static const bool right[] = {0, 0, 0, 0, 0, 1, 1, 1, 0};
        const char       *k       = x->o->arg;
        size_t            len     = strlen(k);
        size_t            nfound  = 0, off;
        char              esc[ESC_SIZE], wid[4 * AAGW_ID_MAX + 1], t[40];
        char              worigin[4 * AAGW_ALIAS_MAX + 1];
        char              wsite[4 * AAGW_ALIAS_MAX + 1];
        char              wtopic[4 * AAGW_TOPIC_MAX + 1];
        static char       hdr[AAGW_AUDIT_SCOPES_MAX * (8 * AAGW_ID_MAX) +
                        ESC_SIZE + 512];
        static struct aagw_key_state states[AAGW_AUDIT_SCOPES_MAX];

        if (aagw_audit_key_state(x->st, k, len, states, AAGW_AUDIT_SCOPES_MAX,
                                 &nfound, x->err, sizeof(x->err))) {
                gw_errorf("audit: %s", x->err);
                return EXIT_RUNTIME;
        }
        escape(k, len > AAGW_AUDIT_EKEY_MAX ? AAGW_AUDIT_EKEY_MAX : len, esc);
        if (len > AAGW_AUDIT_EKEY_MAX)
                strcat(esc, "...");
        off = (size_t)snprintf(hdr, sizeof(hdr), "key:     %s\n", esc);
        for (size_t i = 0; i < nfound; i++) {
                const struct aagw_lww *w = &states[i].winner;

                iso_ms(w->time_ms, t, sizeof(t));
                escape(w->v.id, w->v.id_len, wid);
                escape(w->v.origin, strlen(w->v.origin), worigin);
                escape(states[i].site, strlen(states[i].site), wsite);
                escape(states[i].topic, strlen(states[i].topic), wtopic);
                if (x->o->json) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(
                            o, "type", json_object_new_string("winner"));
                        json_add_bytes(o, "key", k, len);
                        json_add_str(o, "site", states[i].site);
                        json_add_str(o, "topic", states[i].topic);
                        json_add_time(o, "time", w->time_ms);
                        json_object_object_add(
                            o, "hlc", json_object_new_uint64(w->v.hlc));
                        json_add_str(o, "origin", w->v.origin);
                        json_add_bytes(o, "id", w->v.id, w->v.id_len);
                        json_object_object_add(
                            o, "tombstone",
                            json_object_new_boolean(w->tombstone));
                        json_print(o);
                }
                if (off < sizeof(hdr))
                        off += (size_t)snprintf(
                            hdr + off, sizeof(hdr) - off,
                            "winner:  %s at %s: id %s, origin %s, hlc %" PRIu64
                            "%s, won at %s\n",
                            wtopic, wsite, wid, worigin, w->v.hlc,
                            w->tombstone ? " (tombstone)" : "", t);
        }
        if (!nfound && off < sizeof(hdr))
                off += (size_t)snprintf(hdr + off, sizeof(hdr) - off,
                                        "winner:  none in the window\n");
        if (off < sizeof(hdr))
                snprintf(hdr + off, sizeof(hdr) - off, "window:  %s\n\n",
                         x->window);
        return list_entries(x, hdr, nfound, heads, right,
                            aagw_store_audit_by_key, k, len, cb_key, "key");
}

/* ---------------------------- audit recent ----------------------------- */

/* A copy of an audit entry that outlives the callback; the id and the
 * key are malloc()ed to their size (most are a few dozen bytes). */
struct saved {
        struct aagw_audit a;
        char              site[AAGW_ALIAS_MAX + 1];
        char              origin[AAGW_ALIAS_MAX + 1];
        char              topic[AAGW_TOPIC_MAX + 1];
        uint8_t          *id, *ekey;
};

/* The newest 'cap' entries seen so far, in a ring grown on demand up to
 * 'cap' (--limit is a bound, not an allocation). */
struct ring {
        struct saved *v;
        size_t        cap, alloc, n, head; /* head: the oldest when full */
        uint64_t      total;
        bool          oom;
};

static int cb_recent(const struct aagw_audit *a, void *opaque) {
        struct ring  *r = opaque;
        struct saved *s;

        r->total++;
        if (r->n == r->alloc && r->n < r->cap) {
                size_t na = r->alloc ? r->alloc * 2 : 64;
                void  *nv;
                if (na > r->cap)
                        na = r->cap;
                if (!(nv = realloc(r->v, na * sizeof(*r->v)))) {
                        r->oom = true;
                        return 1;
                }
                r->v     = nv;
                r->alloc = na;
        }
        if (r->n < r->cap) {
                s = &r->v[r->n++];
        } else {
                s       = &r->v[r->head];
                r->head = (r->head + 1) % r->cap;
                free(s->id);
                free(s->ekey);
        }
        s->a = *a;
        snprintf(s->site, sizeof(s->site), "%s", a->site);
        snprintf(s->origin, sizeof(s->origin), "%s", a->origin);
        snprintf(s->topic, sizeof(s->topic), "%s", a->topic);
        s->a.site   = s->site;
        s->a.origin = s->origin;
        s->a.topic  = s->topic;
        s->id       = malloc(a->id_len + 1);
        s->ekey     = a->ekey ? malloc(a->ekey_len + 1) : NULL;
        if (!s->id || (a->ekey && !s->ekey)) {
                free(s->id);
                free(s->ekey);
                s->id = s->ekey = NULL;
                r->oom          = true;
                return 1;
        }
        memcpy(s->id, a->id, a->id_len);
        s->a.id = s->id;
        if (a->ekey) {
                memcpy(s->ekey, a->ekey, a->ekey_len);
                s->a.ekey = s->ekey;
        }
        return 0;
}

static int cmd_recent(struct ctx *x) {
        static const char *const heads[] = {
            "TIME",      "VERDICT", "SITE", "ORIGIN", "TOPIC",
            "PARTITION", "OFFSET",  "ID",   "KEY",    NULL};
        static const bool right[] = {0, 0, 0, 0, 0, 1, 1, 0, 0};
        int64_t     since = x->o->has_since ? x->o->since_ms : DEFAULT_SINCE_MS;
        struct ring r;
        int         rc = EXIT_OK;

        memset(&r, 0, sizeof(r));
        r.cap = (size_t)x->o->limit;
        if (aagw_store_audit_since(x->st, aagw_wall_ms() - since, x->o->verdict,
                                   cb_recent, &r, x->err, sizeof(x->err))) {
                gw_errorf("audit: %s", x->err);
                rc = EXIT_RUNTIME;
                goto out;
        }
        if (r.oom) {
                gw_errorf("audit: out of memory for --limit %ld entries",
                          x->o->limit);
                rc = EXIT_RUNTIME;
                goto out;
        }
        table_init(&x->t, heads, right);
        for (size_t i = 0; i < r.n; i++) {
                const struct aagw_audit *a =
                    &r.v[(r.n < r.cap ? i : (r.head + i) % r.cap)].a;
                struct cells c;
                if (x->o->json) {
                        json_audit(a, NULL);
                        continue;
                }
                fill_cells(a, &c);
                const char *row[] = {
                    c.time,  aagw_audit_verdict_name(a->verdict),
                    c.site,  c.origin,
                    c.topic, c.part,
                    c.off,   c.id,
                    c.key};
                table_row(&x->t, row);
        }
        if (!x->o->json) {
                if (r.n)
                        table_flush(&x->t);
                else
                        puts("(no audit entries)");
                if (r.total > r.n)
                        printf("(%" PRIu64 " older entries not shown; "
                               "raise --limit)\n",
                               r.total - r.n);
        }
        table_deinit(&x->t);
        if (x->t.oom)
                rc = EXIT_RUNTIME;
out:
        for (size_t i = 0; i < r.n; i++) {
                free(r.v[i].id);
                free(r.v[i].ekey);
        }
        free(r.v);
        return rc;
}

/* ---------------------------- audit summary ---------------------------- */

/* Counts per name (origin or topic) in a small open-addressing table;
 * names past SUM_MAX distinct ones are counted under "(other)", so memory
 * stays bounded whatever the store holds. */
#define SUM_MAX 1024
#define SUM_SLOTS 2048

struct bucket {
        char    *name;
        uint64_t n[AAGW_AUDIT__CNT];
        uint64_t total;
};

struct counter {
        struct bucket *slot[SUM_SLOTS];
        size_t         n;
        struct bucket  other;
        bool           oom;
};

static uint32_t fnv1a(const char *s) {
        uint32_t h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 16777619u;
        return h;
}

static void count(struct counter *c, const char *name, int verdict) {
        size_t         i = fnv1a(name) % SUM_SLOTS;
        struct bucket *b = NULL;

        while (c->slot[i] && strcmp(c->slot[i]->name, name))
                i = (i + 1) % SUM_SLOTS;
        if (c->slot[i]) {
                b = c->slot[i];
        } else if (c->n < SUM_MAX && (b = calloc(1, sizeof(*b))) &&
                   (b->name = strdup(name))) {
                c->slot[i] = b;
                c->n++;
        } else {
                if (b)
                        free(b);
                b = &c->other;
        }
        b->n[verdict]++;
        b->total++;
}

static int bucket_cmp(const void *pa, const void *pb) {
        const struct bucket *a = *(const struct bucket *const *)pa;
        const struct bucket *b = *(const struct bucket *const *)pb;
        return strcmp(a->name, b->name);
}

/* The buckets sorted by name, "(other)" last if used; malloc()ed. */
static struct bucket **counter_sorted(struct counter *c, size_t *np) {
        struct bucket **v = malloc((c->n + 1) * sizeof(*v));
        size_t          n = 0;

        if (!v)
                return NULL;
        for (size_t i = 0; i < SUM_SLOTS; i++)
                if (c->slot[i])
                        v[n++] = c->slot[i];
        qsort(v, n, sizeof(*v), bucket_cmp);
        if (c->other.total) {
                c->other.name = "(other)";
                v[n++]        = &c->other;
        }
        *np = n;
        return v;
}

static void counter_free(struct counter *c) {
        for (size_t i = 0; i < SUM_SLOTS; i++)
                if (c->slot[i]) {
                        free(c->slot[i]->name);
                        free(c->slot[i]);
                }
}

struct summary {
        uint64_t       n[AAGW_AUDIT__CNT], total;
        struct counter origins, topics;
};

static int cb_summary(const struct aagw_audit *a, void *opaque) {
        struct summary *s = opaque;
        s->n[a->verdict]++;
        s->total++;
        count(&s->origins, a->origin, (int)a->verdict);
        count(&s->topics, a->topic, (int)a->verdict);
        return 0;
}

static void add_counts(json_object *o, const uint64_t *n, uint64_t total) {
        json_object_object_add(o, "entries", json_object_new_uint64(total));
        for (int v = 0; v < AAGW_AUDIT__CNT; v++)
                json_object_object_add(
                    o, aagw_audit_verdict_name((aagw_audit_verdict_t)v),
                    json_object_new_uint64(n[v]));
}

/* One table (or JSON line per bucket) of counts per 'what'. */
static void print_counter(struct ctx *x, struct counter *c, const char *what,
                          const char *head) {
        const char     *heads[TBL_MAXCOL] = {head, "ENTRIES"};
        bool            right[TBL_MAXCOL] = {0, 1, 1, 1, 1, 1, 1, 1};
        size_t          nb;
        struct bucket **v = counter_sorted(c, &nb);
        struct table    t;
        char            num[AAGW_AUDIT__CNT + 1][24];
        char            esc[4 * AAGW_TOPIC_MAX + 1];
        char            upper[AAGW_AUDIT__CNT][16];

        if (!v) {
                x->t.oom = true;
                return;
        }
        for (int i = 0; i < AAGW_AUDIT__CNT; i++) {
                const char *nm =
                    aagw_audit_verdict_name((aagw_audit_verdict_t)i);
                size_t j;
                for (j = 0; nm[j] && j + 1 < sizeof(upper[i]); j++)
                        upper[i][j] = (char)(nm[j] - 'a' + 'A');
                upper[i][j]  = '\0';
                heads[2 + i] = upper[i];
        }
        table_init(&t, heads, right);
        for (size_t b = 0; b < nb; b++) {
                if (x->o->json) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "type",
                                               json_object_new_string(what));
                        json_add_str(o, what, v[b]->name);
                        add_counts(o, v[b]->n, v[b]->total);
                        json_print(o);
                        continue;
                }
                const char *row[TBL_MAXCOL];
                escape(v[b]->name, strlen(v[b]->name), esc);
                row[0] = esc;
                snprintf(num[0], sizeof(num[0]), "%" PRIu64, v[b]->total);
                row[1] = num[0];
                for (int i = 0; i < AAGW_AUDIT__CNT; i++) {
                        snprintf(num[i + 1], sizeof(num[i + 1]), "%" PRIu64,
                                 v[b]->n[i]);
                        row[2 + i] = num[i + 1];
                }
                table_row(&t, row);
        }
        if (!x->o->json && nb) {
                putchar('\n');
                table_flush(&t);
        }
        table_deinit(&t);
        free(v);
}

static int cmd_summary(struct ctx *x) {
        int64_t         now = aagw_wall_ms(), window = aagw_store_window_ms(x->st);
        int64_t         since = x->o->has_since && x->o->since_ms < window
                                    ? x->o->since_ms
                                    : window;
        struct summary *s     = calloc(1, sizeof(*s));
        char            t[40], d[32];
        int             rc = EXIT_OK;

        if (!s) {
                gw_errorf("out of memory");
                return EXIT_RUNTIME;
        }
        if (aagw_store_audit_since(x->st, now - since, -1, cb_summary, s,
                                   x->err, sizeof(x->err))) {
                gw_errorf("audit: %s", x->err);
                rc = EXIT_RUNTIME;
                goto out;
        }
        iso_ms(now - since, t, sizeof(t));
        fmt_window(since, d, sizeof(d));
        if (x->o->json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "type",
                                       json_object_new_string("summary"));
                json_add_time(o, "since", now - since);
                json_object_object_add(o, "window",
                                       json_object_new_string(x->window));
                json_object_object_add(o, "window_ms",
                                       json_object_new_int64(window));
                add_counts(o, s->n, s->total);
                json_print(o);
        } else {
                printf("since:      %s (last %s; window %s)\n"
                       "entries:    %" PRIu64 "\n",
                       t, d, x->window, s->total);
                for (int v = 0; v < AAGW_AUDIT__CNT; v++) {
                        char label[24];
                        snprintf(
                            label, sizeof(label), "%s:",
                            aagw_audit_verdict_name((aagw_audit_verdict_t)v));
                        printf("%-12s%" PRIu64 "\n", label, s->n[v]);
                }
        }
        print_counter(x, &s->origins, "origin", "ORIGIN");
        print_counter(x, &s->topics, "topic", "TOPIC");
        if (x->t.oom)
                rc = EXIT_RUNTIME;
out:
        counter_free(&s->origins);
        counter_free(&s->topics);
        free(s);
        return rc;
}

/* ------------------------------ SCALE-OUT ------------------------------- */

/*
 * Under scale-out every member decides some of the site's records and
 * keeps them in its own state dir, so no state dir answers for the site.
 * What the members committed is in the site's cluster: the changelogs
 * (ids, winners, positions) and the audit topics, written in the
 * decisions' transactions.  They are read into a store of their own in
 * a temporary directory, which the queries then read as they read a
 * state dir; it is removed at the end.  Any host that reaches the
 * cluster answers the same, also after every member's state dir is
 * gone.  The cost is a read of about one window of the site's decisions.
 */
#define SITE_TIMEOUT_MS 30000
#define SITE_COMMIT_EVERY 4096

struct site_load {
        aagw_store_t       *st;
        aagw_decider_t     *d;
        aagw_store_batch_t *b;
        char                scope[AAGW_ALIAS_MAX + 16];
        int64_t             pending;
        int64_t             decisions, positions, entries, bad;
        char                err[512];
};

static int site_flush(struct site_load *l) {
        if (aagw_decider_ops.fold_commit(l->d, true, l->err, sizeof(l->err)) ||
            aagw_store_batch_commit(l->b, l->err, sizeof(l->err)))
                return -1;
        l->pending = 0;
        return 0;
}

static int site_decision(void *opaque, const struct aagw_unify_rec *r,
                         int64_t time_ms) {
        struct site_load *l = opaque;

        l->decisions++;
        if (aagw_decider_ops.restore(l->d, r, time_ms, l->err, sizeof(l->err)))
                return -1;
        return ++l->pending % SITE_COMMIT_EVERY ? 0 : site_flush(l);
}

static int site_position(void *opaque, const char *topic, int32_t partition,
                         int64_t next) {
        struct site_load *l   = opaque;
        struct aagw_pos   pos = {.next = next, .out_next = -1};

        l->positions++;
        if (partition < 0 ||
            aagw_store_batch_pos(l->b, l->scope, topic, partition, &pos))
                return partition < 0 ? 0 : -1;
        return ++l->pending % SITE_COMMIT_EVERY ? 0 : site_flush(l);
}

static int site_audit(void *opaque, const void *entry, size_t len) {
        struct site_load         *l = opaque;
        struct aagw_audit_decoded a;
        char                      why[256];

        if (aagw_audit_decode(entry, len, &a, why, sizeof(why))) {
                if (!l->bad++)
                        fprintf(stderr,
                                "aagw: audit: an audit record that is not "
                                "an entry of this version skipped: %s\n",
                                why);
                return 0;
        }
        l->entries++;
        if (aagw_store_batch_audit(l->b, &a.a))
                return -1;
        return ++l->pending % SITE_COMMIT_EVERY ? 0 : site_flush(l);
}

/* A client of the site's cluster that reads committed records by
 * assignment (it never joins a group). */
static rd_kafka_t *site_reader(const struct aagw_cluster_settings *cl,
                               char *err, size_t size) {
        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(cl->bootstrap_servers, "audit", err, size);
        if (!conf)
                return NULL;
        if (aagw_kafka_conf_apply(conf, "consumer", cl->properties.kv,
                                  cl->properties.n, err, size) ||
            aagw_kafka_conf_set(conf, "group.id", "aagw-audit", err, size) ||
            aagw_kafka_conf_set(conf, "enable.auto.commit", "false", err,
                                size) ||
            aagw_kafka_conf_set(conf, "enable.partition.eof", "true", err,
                                size) ||
            /* Partitions are read one after the other, each to its end:
             * the broker's wait at the end would add to every one. */
            aagw_kafka_conf_set(conf, "fetch.wait.max.ms", "10", err, size) ||
            aagw_kafka_conf_set(conf, "isolation.level", "read_committed", err,
                                size)) {
                rd_kafka_conf_destroy(conf);
                return NULL;
        }
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, size);
        if (!rk)
                rd_kafka_conf_destroy(conf);
        return rk;
}

struct site_store {
        char             dir[4096];
        aagw_statedir_t *sd;
        aagw_store_t    *st;
};

static int rmtree_one(const char *path, const struct stat *sb, int flag,
                      struct FTW *ftw) {
        (void)sb;
        (void)flag;
        (void)ftw;
        return remove(path);
}

static void site_store_close(struct site_store *s) {
        aagw_store_close(s->st);
        aagw_statedir_close(s->sd);
        if (s->dir[0])
                nftw(s->dir, rmtree_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The site's log (aagw_site_log_read()) in a store in a new temporary
 * directory.  Returns EXIT_OK with s->st open, or EXIT_RUNTIME
 * (reported). */
static int site_store_open(const struct aagw_settings *set,
                           struct site_store          *s) {
        const char                         *site = set->gateway.site;
        const struct aagw_cluster_settings *cl =
            site ? aagw_settings_cluster(set, site) : NULL;
        const char            *tmp = getenv("TMPDIR");
        struct aagw_store_opts so  = {.cache_mb  = 16,
                                      .window_ms = set->unify.window_ms};
        struct site_load       l;
        rd_kafka_t            *rk = NULL;
        char                   err[1024];
        size_t                 ntopics = 0;
        int64_t                records = 0;
        int                    rc      = EXIT_RUNTIME;

        memset(s, 0, sizeof(*s));
        memset(&l, 0, sizeof(l));
        if (!cl || !cl->bootstrap_servers) {
                gw_errorf("audit: scale-out: the site's cluster %s is not "
                          "configured (--site, --cluster %s=HOST:PORT, or "
                          "the member's -c FILE)",
                          site ? site : "(gateway.site unset)",
                          site ? site : "ALIAS");
                return EXIT_RUNTIME;
        }
        snprintf(s->dir, sizeof(s->dir), "%s/aagw-audit-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(s->dir)) {
                gw_errorf("audit: a temporary directory in %s: %s",
                          tmp && *tmp ? tmp : "/tmp", strerror(errno));
                s->dir[0] = '\0';
                return EXIT_RUNTIME;
        }
        if (!(s->sd = aagw_statedir_open(s->dir, err, sizeof(err))) ||
            !(s->st = aagw_store_open(s->sd, &so, err, sizeof(err)))) {
                gw_errorf("audit: a store in %s: %s", s->dir, err);
                goto out;
        }
        struct aagw_decider_conf dc = {.store = s->st, .site = site};
        if (!(l.d = aagw_decider_new(&dc, err, sizeof(err))) ||
            !(l.b = aagw_store_batch_new(s->st))) {
                gw_errorf("audit: %s", l.d ? "out of memory" : err);
                goto out;
        }
        aagw_unify_pos_scope(site, false, l.scope, sizeof(l.scope));
        if (!(rk = site_reader(cl, err, sizeof(err)))) {
                gw_errorf("audit: a client of cluster %s: %s", site, err);
                goto out;
        }
        struct aagw_site_log_read q = {.reader     = rk,
                                       .probe      = rk,
                                       .gateway_id = set->gateway.id,
                                       .site       = site,
                                       .timeout_ms = SITE_TIMEOUT_MS,
                                       .decision   = site_decision,
                                       .position   = site_position,
                                       .audit      = site_audit,
                                       .opaque     = &l};
        if (aagw_site_log_read(&q, &ntopics, &records, err, sizeof(err))) {
                gw_errorf("audit: reading the log of site %s from cluster "
                          "%s (%s): %s%s%s",
                          site, site, cl->bootstrap_servers, err,
                          l.err[0] ? ": " : "", l.err);
                goto out;
        }
        if (site_flush(&l) || aagw_store_flush(s->st, err, sizeof(err))) {
                gw_errorf("audit: %s", l.err[0] ? l.err : err);
                goto out;
        }
        fprintf(stderr,
                "aagw: audit: site %s (scale-out) read from cluster %s: "
                "%zu unified topic%s, %" PRId64 " decisions, %" PRId64
                " audit entries\n",
                site, site, ntopics, ntopics == 1 ? "" : "s", l.decisions,
                l.entries);
        rc = EXIT_OK;
out:
        if (rk) {
                rd_kafka_consumer_close(rk);
                rd_kafka_destroy(rk);
        }
        aagw_store_batch_destroy(l.b);
        aagw_decider_destroy(l.d);
        if (rc != EXIT_OK) {
                site_store_close(s);
                memset(s, 0, sizeof(*s));
        }
        return rc;
}

/* -------------------------------- COMMAND -------------------------------- */

int gw_cmd_audit(int argc, char **argv) {
        struct audit_opts      o;
        struct ctx             x;
        aagw_config_t         *cfg = NULL;
        struct aagw_store_opts so  = {.cache_mb = 16};
        struct stat            sb;
        int                    rc;

        if ((rc = parse_args(argc, argv, &o)))
                return rc == GW_HELP_SHOWN ? EXIT_OK : rc;
        if ((rc = load_config(&o, &cfg)))
                return rc;
        memset(&x, 0, sizeof(x));
        x.o                             = &o;
        const struct aagw_settings *set = aagw_config_settings(cfg);
        struct site_store           site;
        bool                        scale = set->scale_out.enabled;
        if (scale) {
                gw_log_init(set->gateway.log_level > AAGW_LOG_WARN
                                ? set->gateway.log_level
                                : AAGW_LOG_WARN);
                rc = site_store_open(set, &site);
                aagw_config_destroy(cfg);
                if (rc)
                        return rc;
                x.st = site.st;
                goto query;
        }
        const char *dir = set->gateway.state_dir;
        if (stat(dir, &sb) == -1) {
                gw_errorf("audit: state dir %s: %s (name the gateway's with "
                          "--state-dir DIR or -c FILE)",
                          dir, strerror(errno));
                aagw_config_destroy(cfg);
                return EXIT_RUNTIME;
        }
        /* window_ms 0: the window the gateway recorded. */
        x.st = aagw_store_open_secondary(dir, &so, x.err, sizeof(x.err));
        aagw_config_destroy(cfg);
        if (!x.st) {
                gw_errorf("audit: %s", x.err);
                return EXIT_RUNTIME;
        }
query:
        fmt_window(aagw_store_window_ms(x.st), x.window, sizeof(x.window));
        if (!strcmp(o.sub, "id"))
                rc = cmd_id(&x);
        else if (!strcmp(o.sub, "key"))
                rc = cmd_key(&x);
        else if (!strcmp(o.sub, "recent"))
                rc = cmd_recent(&x);
        else
                rc = cmd_summary(&x);
        if (scale)
                site_store_close(&site);
        else
                aagw_store_close(x.st);
        if (fflush(stdout) == EOF && rc == EXIT_OK)
                rc = EXIT_RUNTIME;
        return rc;
}
