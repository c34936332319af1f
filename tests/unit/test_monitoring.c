/*
 * tests/unit/test_monitoring.c: the shipped alert rules and Grafana
 * dashboard cannot rot.
 *
 * docs/alerts/aagw-alerts.yml is parsed with libyaml and
 * docs/grafana/aagw-dashboard.json with json-c; every aagw_* name in a
 * rule or panel expression must be a metric docs/metrics.md lists (a
 * histogram's _bucket, _sum and _count series count as the histogram).
 * The e2e test `admin` checks in turn that docs/metrics.md and the served
 * /metrics list the same names, so the chain reaches the code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <yaml.h>

#define MAX_NAMES 256

struct metric {
        char name[128];
        bool histogram;
};

struct fixture {
        struct metric metrics[MAX_NAMES];
        size_t        nmetrics;
        char         *alerts_doc[MAX_NAMES]; /* alert names in metrics.md */
        size_t        nalerts_doc;
        char          root[4096];
};

static char *slurp(const struct fixture *f, const char *rel) {
        char  path[8192];
        FILE *fp;
        long  len;
        char *buf;

        snprintf(path, sizeof(path), "%s/%s", f->root, rel);
        fp = fopen(path, "rb");
        if (!fp)
                fail_msg("cannot open %s", path);
        assert_int_equal(fseek(fp, 0, SEEK_END), 0);
        len = ftell(fp);
        assert_true(len > 0);
        rewind(fp);
        buf = malloc((size_t)len + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
        buf[len] = '\0';
        fclose(fp);
        return buf;
}

/* docs/metrics.md: metric rows "| `aagw_x{labels}` | type | ..." and alert
 * rows "| `AagwX` | ...". */
static int group_setup(void **state) {
        struct fixture *f   = calloc(1, sizeof(*f));
        const char     *env = getenv("AAGW_SOURCE_ROOT");
        char           *doc;

        assert_non_null(f);
        snprintf(f->root, sizeof(f->root), "%s", env && *env ? env : ".");
        doc = slurp(f, "docs/metrics.md");
        for (char *p = doc; (p = strstr(p, "\n| `")); p++) {
                const char *name = p + 4;
                size_t      len  = strcspn(name, "{`");
                if (!strncmp(name, "aagw_", 5)) {
                        struct metric *m    = &f->metrics[f->nmetrics++];
                        const char    *type = strstr(name, "` | ");
                        assert_true(f->nmetrics < MAX_NAMES);
                        snprintf(m->name, sizeof(m->name), "%.*s", (int)len,
                                 name);
                        m->histogram =
                            type && !strncmp(type + 4, "histogram", 9);
                } else if (!strncmp(name, "Aagw", 4)) {
                        assert_true(f->nalerts_doc < MAX_NAMES);
                        f->alerts_doc[f->nalerts_doc++] = strndup(name, len);
                }
        }
        free(doc);
        *state = f;
        return f->nmetrics >= 15 ? 0 : -1;
}

static int group_teardown(void **state) {
        struct fixture *f = *state;
        for (size_t i = 0; i < f->nalerts_doc; i++)
                free(f->alerts_doc[i]);
        free(f);
        return 0;
}

static bool documented(const struct fixture *f, const char *name, size_t len) {
        static const char *const suffixes[] = {"_bucket", "_sum", "_count"};

        for (size_t i = 0; i < f->nmetrics; i++) {
                const struct metric *m  = &f->metrics[i];
                size_t               ml = strlen(m->name);
                if (ml == len && !strncmp(m->name, name, len))
                        return true;
                if (!m->histogram || len <= ml || strncmp(m->name, name, ml))
                        continue;
                for (size_t s = 0; s < 3; s++)
                        if (len - ml == strlen(suffixes[s]) &&
                            !strncmp(name + ml, suffixes[s], len - ml))
                                return true;
        }
        return false;
}

/* Every aagw_* identifier in a PromQL expression is documented; returns
 * how many it found. */
static int check_expr(const struct fixture *f, const char *where,
                      const char *expr) {
        int n = 0;

        for (const char *p = expr; (p = strstr(p, "aagw_"));) {
                size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
                bool   word_start =
                    p == expr ||
                    !strchr("abcdefghijklmnopqrstuvwxyz"
                            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
                            p[-1]);
                if (word_start) {
                        if (!documented(f, p, len))
                                fail_msg("%s uses %.*s, which docs/metrics.md "
                                         "does not list",
                                         where, (int)len, p);
                        n++;
                }
                p += len;
        }
        return n;
}

/* ------------------------------------------------------------ GRAFANA --- */

struct walk {
        const struct fixture *f;
        int                   exprs, names;
        int                   ids[MAX_NAMES];
        size_t                nids;
};

static void walk_json(struct walk *w, json_object *o, const char *title) {
        if (json_object_is_type(o, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(o); i++)
                        walk_json(w, json_object_array_get_idx(o, i), title);
                return;
        }
        if (!json_object_is_type(o, json_type_object))
                return;
        json_object *t, *id, *type;
        if (json_object_object_get_ex(o, "title", &t))
                title = json_object_get_string(t);
        /* A panel: an object with a numeric id and a type. */
        if (json_object_object_get_ex(o, "type", &type) &&
            json_object_object_get_ex(o, "id", &id) &&
            json_object_is_type(id, json_type_int)) {
                int v = json_object_get_int(id);
                for (size_t i = 0; i < w->nids; i++)
                        if (w->ids[i] == v)
                                fail_msg("panel id %d is used twice", v);
                assert_true(w->nids < MAX_NAMES);
                w->ids[w->nids++] = v;
        }
        json_object_object_foreach(o, okey, val) {
                /* The macro's key may be NULL as far as gcc can tell. */
                const char *key = okey ? okey : "";
                if (!strcmp(key, "expr") || !strcmp(key, "definition") ||
                    (!strcmp(key, "query") &&
                     json_object_is_type(val, json_type_string))) {
                        char where[512];
                        snprintf(where, sizeof(where),
                                 "dashboard panel \"%s\" (%s)",
                                 title ? title : "?", key);
                        w->names += check_expr(w->f, where,
                                               json_object_get_string(val));
                        if (!strcmp(key, "expr"))
                                w->exprs++;
                } else {
                        walk_json(w, val, title);
                }
        }
}

static void test_dashboard(void **state) {
        struct fixture *f    = *state;
        char           *text = slurp(f, "docs/grafana/aagw-dashboard.json");
        enum json_tokener_error jerr;
        json_object            *d = json_tokener_parse_verbose(text, &jerr);
        json_object            *v;
        struct walk             w = {.f = f};

        if (!d)
                fail_msg("aagw-dashboard.json: %s",
                         json_tokener_error_desc(jerr));
        assert_true(json_object_object_get_ex(d, "title", &v));
        assert_true(json_object_object_get_ex(d, "uid", &v));
        assert_true(json_object_object_get_ex(d, "panels", &v));
        assert_true(json_object_array_length(v) >= 8);
        walk_json(&w, d, "(dashboard)");
        assert_true(w.exprs >= 15);
        assert_true(w.names >= w.exprs);
        json_object_put(d);
        free(text);
}

/* ------------------------------------------------------------- ALERTS --- */

static const char *scalar(yaml_node_t *n) {
        return n && n->type == YAML_SCALAR_NODE
                   ? (const char *)n->data.scalar.value
                   : NULL;
}

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map,
                            const char *key) {
        if (!map || map->type != YAML_MAPPING_NODE)
                return NULL;
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
             p < map->data.mapping.pairs.top; p++) {
                const char *k = scalar(yaml_document_get_node(doc, p->key));
                if (k && !strcmp(k, key))
                        return yaml_document_get_node(doc, p->value);
        }
        return NULL;
}

static void test_alerts(void **state) {
        struct fixture *f    = *state;
        char           *text = slurp(f, "docs/alerts/aagw-alerts.yml");
        yaml_parser_t   parser;
        yaml_document_t doc;
        yaml_node_t    *groups;
        const char     *names[MAX_NAMES];
        size_t          nrules = 0;

        assert_true(yaml_parser_initialize(&parser));
        yaml_parser_set_input_string(&parser, (const unsigned char *)text,
                                     strlen(text));
        if (!yaml_parser_load(&parser, &doc))
                fail_msg("aagw-alerts.yml:%zu:%zu: %s",
                         parser.problem_mark.line + 1,
                         parser.problem_mark.column + 1, parser.problem);
        groups = map_get(&doc, yaml_document_get_root_node(&doc), "groups");
        assert_non_null(groups);
        assert_int_equal(groups->type, YAML_SEQUENCE_NODE);
        for (yaml_node_item_t *g = groups->data.sequence.items.start;
             g < groups->data.sequence.items.top; g++) {
                yaml_node_t *grp   = yaml_document_get_node(&doc, *g);
                yaml_node_t *rules = map_get(&doc, grp, "rules");
                assert_non_null(scalar(map_get(&doc, grp, "name")));
                assert_non_null(rules);
                assert_int_equal(rules->type, YAML_SEQUENCE_NODE);
                for (yaml_node_item_t *r = rules->data.sequence.items.start;
                     r < rules->data.sequence.items.top; r++) {
                        yaml_node_t *rule = yaml_document_get_node(&doc, *r);
                        const char *name = scalar(map_get(&doc, rule, "alert"));
                        const char *expr = scalar(map_get(&doc, rule, "expr"));
                        const char *sev  = scalar(map_get(
                             &doc, map_get(&doc, rule, "labels"), "severity"));
                        const char *sum  = scalar(
                             map_get(&doc, map_get(&doc, rule, "annotations"),
                                     "summary"));
                        char where[256];

                        assert_non_null(name);
                        snprintf(where, sizeof(where), "alert %s", name);
                        if (!expr || !sev || !sum)
                                fail_msg("%s lacks expr, labels.severity or "
                                         "annotations.summary",
                                         where);
                        if (strcmp(sev, "critical") && strcmp(sev, "warning") &&
                            strcmp(sev, "info"))
                                fail_msg("%s: severity %s", where, sev);
                        for (size_t i = 0; i < nrules; i++)
                                if (!strcmp(names[i], name))
                                        fail_msg("alert %s defined twice",
                                                 name);
                        assert_true(nrules < MAX_NAMES);
                        names[nrules++] = name;
                        check_expr(f, where, expr);
                }
        }
        assert_true(nrules >= 8);

        /* docs/metrics.md's alert table lists exactly these rules. */
        for (size_t i = 0; i < nrules; i++) {
                bool found = false;
                for (size_t j = 0; j < f->nalerts_doc; j++)
                        found |= !strcmp(names[i], f->alerts_doc[j]);
                if (!found)
                        fail_msg("alert %s is not in docs/metrics.md's table",
                                 names[i]);
        }
        assert_int_equal(f->nalerts_doc, nrules);
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
        free(text);
}

/* The checker itself: an unknown name is caught, histogram series pass. */
static void test_checker(void **state) {
        struct fixture *f = *state;
        assert_true(documented(f, "aagw_replication_latency_ms_bucket", 34));
        assert_true(documented(f, "aagw_flow_up", 12));
        assert_false(documented(f, "aagw_flow_up_bucket", 19));
        assert_false(documented(f, "aagw_replication_lag", 20));
        assert_false(documented(f, "aagw_dedup_duplicates_total", 27));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_checker),
            cmocka_unit_test(test_dashboard),
            cmocka_unit_test(test_alerts),
        };
        return cmocka_run_group_tests_name("monitoring", tests, group_setup,
                                           group_teardown);
}
