/*
 * gateway/config.c: loading, overriding and checking the config (its keys
 * and value checks are in config_values.c, its output in config_out.c).
 *
 * The YAML file is loaded into a libyaml document; the walk below maps each
 * node onto a row of the key table (config_keys.c) and stores the value by
 * its concrete path with its 1-based line:column.  Flags go through the
 * same value checks (gw_cfg_check_value()), so a bad --policy and a bad
 * `policy:` get the same words.  Problems are collected, not fatal, so one
 * `aagw config check` run lists every mistake in the file.
 */
#include "config_int.h" /* and gateway_int.h: gw_split_hostport, ... */

#include <assert.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "aagw_replicator.h"

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

/* ---------------------------- VALUE STORAGE ---------------------------- */

struct cfg_val *gw_cfg_val_find(const aagw_config_t *cfg, const char *path) {
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
        struct cfg_val *v = gw_cfg_val_find(cfg, path);
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

static void settings_free(struct aagw_settings *s);

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
                            gw_cfg_check_value(k, raw, &item, why, sizeof(why)) ||
                            val_push(v, item, NULL) == -1) {
                                free(raw);
                                goto fail;
                        }
                        free(raw);
                        p += len + (nl ? 1 : 0);
                        if (!gw_cfg_is_list_type(k->type))
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
        for (size_t i = 0; i < cfg->nenvrefs; i++)
                free(cfg->envrefs[i]);
        free(cfg->envrefs);
        settings_free(&cfg->set);
        free(cfg);
}

/* ---------------------------- ENV SUBSTITUTION ------------------------- */

/* Remember that the config read variable 'var' (once per name): it may
 * hold a secret, which the children aagw starts must not inherit
 * (aagw_config_env_refs()).  Out of memory: the name is lost, which
 * only weakens that protection. */
static void note_env_ref(aagw_config_t *cfg, const char *var) {
        char **nv;

        for (size_t i = 0; i < cfg->nenvrefs; i++)
                if (!strcmp(cfg->envrefs[i], var))
                        return;
        nv = realloc(cfg->envrefs, (cfg->nenvrefs + 1) * sizeof(*nv));
        if (!nv)
                return;
        cfg->envrefs = nv;
        if ((nv[cfg->nenvrefs] = strdup(var)))
                cfg->nenvrefs++;
}

size_t aagw_config_env_refs(const aagw_config_t *cfg,
                            const char *const **namesp) {
        *namesp = (const char *const *)cfg->envrefs;
        return cfg->nenvrefs;
}

/*
 * Replace ${NAME} and ${NAME:-default} with the environment's value; "$${"
 * stands for a literal "${".  Secrets thus stay out of the file.  Returns a
 * malloc()ed string, or NULL with the reason in 'why'.
 */
static char *subst_env(aagw_config_t *cfg, const char *in, char *why,
                       size_t size) {
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
                        if (!gw_cfg_all_chars(var, "_")) {
                                snprintf(why, size,
                                         "bad environment variable name "
                                         "\"%s\"",
                                         var);
                                goto fail;
                        }
                        val = getenv(var);
                        if (val) {
                                vlen = strlen(val);
                                note_env_ref(cfg, var);
                        }
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
        raw = subst_env(w->cfg, (const char *)n->data.scalar.value, why,
                        sizeof(why));
        if (!raw) {
                err_at(w->cfg, &src, path, "%s", why);
                return NULL;
        }
        /* The reason never holds a secret's value (gw_cfg_check_value()). */
        if (gw_cfg_check_value(k, raw, &norm, why, sizeof(why)) == -1)
                err_at(w->cfg, &src, path, "%s", why);
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
                char *val = subst_env(w->cfg,
                                      (const char *)vn->data.scalar.value,
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
                if ((v = gw_cfg_val_find(w->cfg, path)) && !k->def)
                        val_remove(w->cfg, v);
                return;
        }
        if (gw_cfg_is_list_type(k->type) && n->type == YAML_SEQUENCE_NODE) {
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
                const struct cfg_key *k = gw_cfg_key_exact(sub_pat);
                if (k) {
                        walk_value(w, k, sub_path, vn);
                        note_instance(w->cfg, k, sub_path, &ks);
                        continue;
                }
                if (strchr(name, '.') == NULL && gw_cfg_is_section(sub_pat)) {
                        walk_mapping(w, vn, sub_path, sub_pat);
                        continue;
                }
                /* An instance name under "clusters" or "unify.topics". */
                snprintf(want, sizeof(want), "%s%s*", pat, *pat ? "." : "");
                if (*pat && gw_cfg_is_section(want)) {
                        const char *why;
                        if (!gw_cfg_inst_name_ok(pat, name, &why)) {
                                err_at(w->cfg, &ks, sub_path, "%s", why);
                                continue;
                        }
                        inst_add(w->cfg, pat, name, &ks);
                        if (!scalar_is_null(vn))
                                walk_mapping(w, vn, sub_path, want);
                        continue;
                }
                const char *s = gw_cfg_suggest(pat, name, buf, sizeof(buf));
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

        cfg->bound = false;
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
        const struct cfg_key *k   = gw_cfg_key_for_path(key, &sub);
        struct cfg_val       *v;
        char                  why[1024], *norm = NULL, base[1024];

        cfg->bound = false;
        if (!k || (k->type == CT_PROPS && !sub)) {
                char        buf[128];
                const char *dot  = strrchr(key, '.');
                char        prefix[1024];
                size_t      plen = dot ? (size_t)(dot - key) : 0;
                snprintf(prefix, sizeof(prefix), "%.*s", (int)plen, key);
                const char *s = gw_cfg_suggest(prefix, dot ? dot + 1 : key, buf,
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
                if (nlen >= sizeof(name) || !gw_cfg_inst_name_ok(kind, name, &why)) {
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
        if (gw_cfg_check_value(k, value, &norm, why, sizeof(why)) == -1) {
                err_at(cfg, &src, key, "%s", why);
                return AAGW_ERR_CONFIG;
        }
        if (!(v = val_get(cfg, k, key))) {
                free(norm);
                return AAGW_ERR_NOMEM;
        }
        /* Flags replace what the file said; repeated list flags add up.
         * Items from a file start from the default, then add up. */
        if (!gw_cfg_is_list_type(k->type) || v->origin != orig)
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
        const struct cfg_val *v = gw_cfg_val_find(cfg, path);
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
        const struct cfg_val *v = gw_cfg_val_find(cfg, path);
        *itemsp                 = v ? (const char *const *)v->items : NULL;
        return v ? v->n : 0;
}

bool aagw_config_is_set(const aagw_config_t *cfg, const char *path) {
        const struct cfg_val *v = gw_cfg_val_find(cfg, path);
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
        const struct cfg_val *v = gw_cfg_val_find(cfg, path);
        *kvp = v ? (const char *const *)v->items : NULL;
        return v ? v->n / 2 : 0;
}

/* ------------------------------- BINDING ------------------------------- */

/* Index of 'word' among the '|'-separated 'choices', or -1. */
static int choice_index(const char *choices, const char *word) {
        size_t len = strlen(word);
        int    i   = 0;

        for (const char *c = choices; c && *c; i++) {
                const char *bar = strchr(c, '|');
                size_t      cl  = bar ? (size_t)(bar - c) : strlen(c);
                if (cl == len && !strncmp(c, word, len))
                        return i;
                c = bar ? bar + 1 : NULL;
        }
        return -1;
}

/* FNV-1a of the 'len' bytes at 's'. */
static size_t name_hash(const char *s, size_t len) {
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
        return (size_t)h;
}

/* Store key 'k's value 'v' (NULL: unset) in its field at 'dst', as the
 * getters read it: every value was checked against its type when it was
 * set, so the conversions cannot fail here. */
static void bind_value(void *dst, const struct cfg_key *k,
                       const struct cfg_val *v) {
        const char *s = v && v->n ? v->items[0] : NULL;
        int64_t     x = 0;

        switch (k->ftype) {
        case FT_NONE:
                break;
        case FT_STR:
                *(const char **)dst = s;
                break;
        case FT_I64:
                if (s && k->type == CT_DURATION)
                        aagw_duration_parse(s, &x);
                else if (s)
                        x = strtoll(s, NULL, 10);
                *(int64_t *)dst = x;
                break;
        case FT_BOOL:
                *(bool *)dst = s && !strcmp(s, "true");
                break;
        case FT_ENUM:
                /* Unset (a key without default): -1, which the enum
                 * of such a key names (GW_UNIFY_INHERIT). */
                *(int *)dst = s ? choice_index(k->choices, s) : -1;
                break;
        case FT_LIST:
                *(struct aagw_cfg_list *)dst = (struct aagw_cfg_list){
                    v ? (const char *const *)v->items : NULL, v ? v->n : 0,
                    v && v->origin != ORIG_DEFAULT};
                break;
        case FT_PROPS:
                *(struct aagw_cfg_props *)dst = (struct aagw_cfg_props){
                    v ? (const char *const *)v->items : NULL, v ? v->n / 2 : 0};
                break;
        }
}

_Static_assert(offsetof(struct aagw_cluster_settings, alias) == 0 &&
                   offsetof(struct aagw_flow_settings, name) == 0 &&
                   offsetof(struct aagw_unify_topic_settings, name) == 0,
               "an instance struct starts with its name");

/* The entries of instance mapping 'kind' as an array of '*np' structs of
 * 'size' bytes, each named by its first member (a const char *) and
 * filled from the values of the "KIND.*.LEAF" rows.  One pass over the
 * values, each finding its entry through a hash of the names: a config
 * with 20,000 unify.topics took 51 s looking each value up by path.
 * NULL with *np == 0 when there is none; -1: out of memory. */
static int bind_instances(aagw_config_t *cfg, const char *kind, size_t size,
                          void **arrp, size_t *np) {
        size_t  n = aagw_config_instance_cnt(cfg, kind), j = 0, mask = 15;
        size_t  klen = strlen(kind);
        char   *arr;
        size_t *slot; /* entry index + 1 by name hash; 0: empty */

        *arrp = NULL;
        *np   = 0;
        if (!n)
                return 0;
        while (mask + 1 < 2 * n)
                mask = mask * 2 + 1;
        arr  = calloc(n, size);
        slot = calloc(mask + 1, sizeof(*slot));
        if (!arr || !slot) {
                free(arr);
                free(slot);
                return -1;
        }
        for (size_t i = 0; i < cfg->ninsts; i++) {
                const char *name = cfg->insts[i].name;
                char       *e    = arr + j * size;
                size_t      h;
                if (strcmp(cfg->insts[i].kind, kind))
                        continue;
                *(const char **)e = name;
                /* Unset first: an enum's unset is -1, not 0. */
                for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                        if (!strncmp(k->path, kind, klen) &&
                            !strncmp(k->path + klen, ".*.", 3))
                                bind_value(e + k->off, k, NULL);
                h = name_hash(name, strlen(name)) & mask;
                while (slot[h])
                        h = (h + 1) & mask;
                slot[h] = ++j;
        }
        for (size_t i = 0; i < cfg->nvals; i++) {
                const struct cfg_val *v = &cfg->vals[i];
                const char           *name, *dot;
                size_t                nlen, h;
                if (strncmp(v->key->path, kind, klen) ||
                    strncmp(v->key->path + klen, ".*.", 3))
                        continue;
                name = v->path + klen + 1;
                dot  = strchr(name, '.');
                nlen = dot ? (size_t)(dot - name) : strlen(name);
                for (h = name_hash(name, nlen) & mask; slot[h];
                     h = (h + 1) & mask) {
                        char *e = arr + (slot[h] - 1) * size;
                        if (!strncmp(*(const char **)e, name, nlen) &&
                            !(*(const char **)e)[nlen]) {
                                bind_value(e + v->key->off, v->key, v);
                                break;
                        }
                }
        }
        free(slot);
        *arrp = arr;
        *np   = j;
        return 0;
}

static void settings_free(struct aagw_settings *s) {
        free(s->clusters);
        free(s->replication.per_flow);
        free(s->unify.topics);
        memset(s, 0, sizeof(*s));
}

/* Fill cfg->set from the stored values: the plain keys through their
 * rows' offsets, the instance mappings into arrays of their own. */
static int bind_settings(aagw_config_t *cfg) {
        struct aagw_settings *s = &cfg->set;
        void                 *a, *b, *c;
        int                   rc;

        settings_free(s);
        cfg->bound = false;
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (!strchr(k->path, '*'))
                        bind_value((char *)s + k->off, k,
                                   gw_cfg_val_find(cfg, k->path));
        rc = bind_instances(cfg, "clusters", sizeof(*s->clusters), &a,
                            &s->nclusters);
        rc |= bind_instances(cfg, "replication.per_flow",
                             sizeof(*s->replication.per_flow), &b,
                             &s->replication.nper_flow);
        rc |= bind_instances(cfg, "unify.topics", sizeof(*s->unify.topics), &c,
                             &s->unify.ntopics);
        s->clusters             = a;
        s->replication.per_flow = b;
        s->unify.topics         = c;
        if (rc) {
                settings_free(s);
                return -1;
        }
        cfg->bound = true;
        return 0;
}

const struct aagw_settings *aagw_config_settings(const aagw_config_t *cfg) {
        assert(cfg->bound && "aagw_config_validate() after every change");
        return &cfg->set;
}

const struct aagw_cluster_settings *
aagw_settings_cluster(const struct aagw_settings *s, const char *alias) {
        for (size_t i = 0; alias && i < s->nclusters; i++)
                if (!strcmp(s->clusters[i].alias, alias))
                        return &s->clusters[i];
        return NULL;
}

const struct aagw_flow_settings *
aagw_settings_per_flow(const struct aagw_settings *s, const char *src,
                       const char *dst) {
        size_t sl = src ? strlen(src) : 0;

        for (size_t i = 0; src && dst && i < s->replication.nper_flow; i++) {
                const char *n = s->replication.per_flow[i].name;
                if (!strncmp(n, src, sl) && !strncmp(n + sl, "->", 2) &&
                    !strcmp(n + sl + 2, dst))
                        return &s->replication.per_flow[i];
        }
        return NULL;
}

const struct aagw_unify_topic_settings *
aagw_settings_unify_topic(const struct aagw_settings *s, const char *topic) {
        for (size_t i = 0; topic && i < s->unify.ntopics; i++)
                if (!strcmp(s->unify.topics[i].name, topic))
                        return &s->unify.topics[i];
        return NULL;
}

const char *aagw_settings_word(const struct aagw_settings *s, const void *field,
                               char *buf, size_t size) {
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                int         idx;
                const char *c;
                if (k->ftype != FT_ENUM || strchr(k->path, '*') ||
                    (const char *)s + k->off != (const char *)field)
                        continue;
                idx = *(const int *)field;
                for (c = k->choices; idx > 0 && c; idx--)
                        if ((c = strchr(c, '|')))
                                c++;
                if (idx < 0 || !c)
                        return NULL;
                snprintf(buf, size, "%.*s", (int)strcspn(c, "|"), c);
                return buf;
        }
        return NULL;
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
        const struct cfg_val *v = gw_cfg_val_find(cfg, path);
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

/* librdkafka before 2.6.1 sends the SCRAM client nonce twice, which
 * Kafka 4 refuses as bad credentials (it checks RFC 5802 strictly).  aagw
 * is built against a newer one, but an older one can still be loaded in
 * its place (LD_LIBRARY_PATH): say so at the start, not as a login that
 * fails for no visible reason.  Returns true with the reason in 'why'. */
static bool scram_unusable(const char *mechanism, char *why, size_t size) {
        Dl_info where;

        if (strncasecmp(mechanism, "SCRAM-", 6) ||
            rd_kafka_version() >= 0x020601ff)
                return false;
        if (!dladdr((void *)(uintptr_t)rd_kafka_version, &where) || !where.dli_fname)
                where.dli_fname = "?";
        snprintf(why, size,
                 "%s needs librdkafka >= 2.6.1, but this aagw runs with "
                 "librdkafka %s (%s), whose SCRAM login Kafka 4 brokers "
                 "refuse as invalid credentials; run aagw without "
                 "LD_LIBRARY_PATH pointing at it (scripts/setup builds a "
                 "current one)",
                 mechanism, rd_kafka_version_str(), where.dli_fname);
        return true;
}

static void check_cluster(aagw_config_t *cfg, const struct cfg_inst *in) {
        char            path[512], why[1024];
        struct cfg_val *v;

        snprintf(path, sizeof(path), "clusters.%s.bootstrap_servers",
                 in->name);
        if (!gw_cfg_val_find(cfg, path))
                err_at(cfg, &in->src, path, "required key is missing");
        snprintf(path, sizeof(path), "clusters.%s.properties", in->name);
        if (!(v = gw_cfg_val_find(cfg, path)))
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
                else if ((!strcmp(base, "sasl.mechanism") ||
                          !strcmp(base, "sasl.mechanisms")) &&
                         scram_unusable(v->items[i + 1], why, sizeof(why)))
                        err_at(cfg, &v->srcs[i + 1], ppath, "%s", why);
                else if ((!strcmp(base, "max.in.flight") ||
                          !strcmp(base,
                                  "max.in.flight.requests.per.connection")) &&
                         atoi(v->items[i + 1]) > 5)
                        /* librdkafka refuses it only when the producer is
                         * made, i.e. after the start: say it here. */
                        err_at(cfg, &v->srcs[i + 1], ppath,
                               "at most 5 with the idempotent producer aagw "
                               "uses (got %s)",
                               v->items[i + 1]);
        }
        rd_kafka_conf_destroy(conf);
}

static bool is_loopback(const char *hostport) {
        char host[256];

        return gw_split_hostport(hostport, host, sizeof(host)) &&
               gw_host_is_loopback(host);
}

/* The admin endpoint's TLS and health listener keys: what goes
 * together.  Each key set without what makes it do something is an
 * error, not a silent no-op.  The files themselves are read at start
 * (gateway/admin_tls.c). */
static void check_admin_tls(aagw_config_t *cfg) {
        static const char *const needs_listen[] = {
            "admin.tls.cert", "admin.tls.key", "admin.tls.key_password",
            "admin.tls.client_ca", "admin.health_listen"};
        struct cfg_val *cert   = gw_cfg_val_find(cfg, "admin.tls.cert");
        struct cfg_val *key    = gw_cfg_val_find(cfg, "admin.tls.key");
        struct cfg_val *listen = gw_cfg_val_find(cfg, "admin.listen");
        struct cfg_val *v;

        for (size_t i = 0; i < sizeof(needs_listen) / sizeof(*needs_listen);
             i++)
                if (!listen && (v = gw_cfg_val_find(cfg, needs_listen[i])))
                        err_at(cfg, &v->srcs[0], needs_listen[i],
                               "set admin.listen (--admin) as well: without "
                               "it there is no admin endpoint");
        if (!cert != !key)
                err_at(cfg, cert ? &cert->srcs[0] : &key->srcs[0],
                       cert ? "admin.tls.cert" : "admin.tls.key",
                       "admin.tls.cert and admin.tls.key go together: set "
                       "both or neither");
        if (!key && (v = gw_cfg_val_find(cfg, "admin.tls.key_password")))
                err_at(cfg, &v->srcs[0], "admin.tls.key_password",
                       "set without admin.tls.key");
        if ((!cert || !key) &&
            (v = gw_cfg_val_find(cfg, "admin.tls.client_ca")))
                err_at(cfg, &v->srcs[0], "admin.tls.client_ca",
                       "client certificates need TLS: set admin.tls.cert "
                       "and admin.tls.key as well");
        if ((v = gw_cfg_val_find(cfg, "admin.health_listen")) && v->n &&
            !is_loopback(v->items[0]))
                err_at(cfg, &v->srcs[0], "admin.health_listen",
                       "must be a loopback address: it answers without "
                       "token or client certificate");
}

aagw_err_t aagw_config_validate(aagw_config_t *cfg) {
        int             errs_before = cfg->nerrs;
        size_t          nclusters   = aagw_config_instance_cnt(cfg, "clusters");
        const char     *mode        = aagw_config_str(cfg, "gateway.mode");
        struct cfg_val *v;

        /* First: the cross-checks below build the policy from the typed
         * settings (gw_separator_check()), as the program will.  Every
         * value already passed its own check when it was set. */
        if (bind_settings(cfg))
                err_at(cfg, NULL, NULL, "out of memory");

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
        if ((v = gw_cfg_val_find(cfg, "replication.flows"))) {
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
                   !gw_cfg_val_find(cfg, "gateway.primary")) {
                v = gw_cfg_val_find(cfg, "gateway.mode");
                err_at(cfg, &v->srcs[0], "gateway.primary",
                       "active-passive needs gateway.primary (--primary) or "
                       "replication.flows");
        } else if (!strcmp(mode, "aggregate") &&
                   !gw_cfg_val_find(cfg, "gateway.central")) {
                v = gw_cfg_val_find(cfg, "gateway.mode");
                err_at(cfg, &v->srcs[0], "gateway.central",
                       "aggregate needs gateway.central (--central) or "
                       "replication.flows");
        }

        if (aagw_config_bool(cfg, "scale_out.enabled") &&
            !aagw_config_str(cfg, "gateway.site") &&
            (v = gw_cfg_val_find(cfg, "scale_out.enabled")))
                err_at(cfg, &v->srcs[0], "scale_out.enabled",
                       "the processes of a scale-out share one site's work: "
                       "set gateway.site (--site) as well");

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
                if (!(v = gw_cfg_val_find(cfg, "replication.flows")))
                        continue;
                for (size_t j = 0; j < v->n; j++)
                        listed |= !strcmp(v->items[j], in->name);
                if (!listed)
                        err_at(cfg, &in->src, "replication.per_flow",
                               "flow %s is not one of replication.flows",
                               in->name);
        }

        /* Aliases are checked one by one above; against the separator
         * only when it was set (the default "." cannot be in an alias). */
        if (cfg->bound &&
            (v = gw_cfg_val_find(cfg, "replication.separator")) && v->n) {
                char why[512];
                /* A bad alias is reported as such already. */
                if (gw_separator_check(cfg, why, sizeof(why)) &&
                    strstr(why, "separator"))
                        err_at(cfg, &v->srcs[0], "replication.separator",
                               "%s",
                               strncmp(why, "separator: ", 11) ? why
                                                               : why + 11);
        }

        if ((v = gw_cfg_val_find(cfg, "admin.listen")) && v->n &&
            !is_loopback(v->items[0]) && !gw_cfg_val_find(cfg, "admin.token"))
                err_at(cfg, &v->srcs[0], "admin.listen",
                       "a non-loopback address needs admin.token");
        check_admin_tls(cfg);

        return cfg->nerrs > errs_before ? AAGW_ERR_CONFIG : AAGW_OK;
}
