/*
 * tests/interop/test_mm2_config.c: `aagw config import-mm2` reads a
 * MirrorMaker 2 file as MM2 reads it, checked against MM2's own code
 * (Kafka 4.1.1, through aagw.kafka.Mm2Interop's "mm2config": its
 * MirrorMakerConfig, clusterPairs() and MirrorSourceConnector's
 * validation).  No cluster: one JVM.
 *
 * Files: every mm2.properties of the seed documents
 * (tests/unit/mm2-seeds) and small ones for the readings aagw warns
 * about: a "# comment" after "enabled" and after a list, blanks after
 * "true" with and without heartbeats, the separator ".a.".  For each:
 *
 *   - MM2 refuses the file (no "clusters") exactly when aagw does;
 *   - the flows aagw enables are the pairs whose MirrorSourceConnector
 *     MM2 runs (a valid configuration with enabled true);
 *   - per flow, MM2's topics / groups lists are aagw's, item by item,
 *     "# comment" included; the exclusion lists too, except where the
 *     file uses a name Kafka 4.0 removed (topics.blacklist): MM2 4.x
 *     then has none, aagw reads it as MM2 3.x did and says so;
 *   - the separator is the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "interop.h"

static const char *const seeds[] = {
    "complete.properties",  "aggregation.properties",
    "active-passive.properties", "active-active.properties",
    "connectors-aggregation.properties",
};

/* name, text: the readings aagw warns about, one file each. */
static const char *const own[][2] = {
    {"comments.properties",
     "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
     "a->b.enabled = true\n"
     "b->a.enabled = true   # both ways\n"
     "topics = orders.*, payments.*  # money only\n"
     "groups = g1 # the app\n"},
    {"blanks.properties",
     "clusters = a, b, c\na.bootstrap.servers = x:1\n"
     "b.bootstrap.servers = y:1\nc.bootstrap.servers = z:1\n"
     "a->b.enabled = true  \n"
     "b->a.enabled = true \n"
     "b->a.emit.heartbeats.enabled = false\n"
     "a->c.enabled = false \n"},
    {"separator.properties",
     "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
     "a->b.enabled = true\nb->a.enabled = true\n"
     "replication.policy.separator = .a.\n"
     "topics = events\\\\..*\n"},
};

static json_object *get(json_object *o, const char *k) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(o, k, &v))
                fail_msg("no \"%s\" in %s", k, json_object_to_json_string(o));
        return v;
}

/* aagw's list 'leaf' for 'flow': its per-flow list, else the global one;
 * NULL when neither is set. */
static size_t aagw_list(const aagw_config_t *cfg, const char *flow,
                        const char *leaf, const char *const **items) {
        char key[256];

        snprintf(key, sizeof(key), "replication.per_flow.%s.%s", flow, leaf);
        if (!aagw_config_is_set(cfg, key))
                snprintf(key, sizeof(key), "replication.%s", leaf);
        if (!aagw_config_is_set(cfg, key)) {
                *items = NULL;
                return 0;
        }
        return aagw_config_list(cfg, key, items);
}

/* MM2's list (JSON array, or null: unset) = aagw's. */
static void same_list(const char *file, const char *flow, const char *leaf,
                      json_object *mm2, const aagw_config_t *cfg) {
        const char *const *items;
        size_t             n = aagw_list(cfg, flow, leaf, &items);

        if (!mm2 || json_object_is_type(mm2, json_type_null)) {
                if (items)
                        fail_msg("%s %s %s: MM2 has none, aagw has %zu items",
                                 file, flow, leaf, n);
                return;
        }
        if (!items || n != json_object_array_length(mm2))
                fail_msg("%s %s %s: MM2 %s, aagw %zu items", file, flow, leaf,
                         json_object_to_json_string(mm2), n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(
                    items[i],
                    json_object_get_string(json_object_array_get_idx(mm2, i)));
}

/* One file: aagw's import against MM2's reading 'r'. */
static void compare(const char *file, const char *text, json_object *r) {
        aagw_config_t     *cfg = aagw_config_new();
        aagw_err_t         rc  = aagw_config_load_mm2(cfg, file, text,
                                                      strlen(text));
        json_object       *refused = NULL, *flows;
        const char *const *aflows;
        size_t             naflows, running = 0;
        bool old_excl = strstr(aagw_config_warnings(cfg), "blacklist is the "
                                                          "old name");

        if (json_object_object_get_ex(r, "refused", &refused)) {
                print_message("# %s: MM2 refuses it (%s); aagw: %s", file,
                              json_object_get_string(refused),
                              aagw_config_errors(cfg));
                assert_int_equal(rc, AAGW_ERR_CONFIG);
                assert_non_null(strstr(aagw_config_errors(cfg),
                                        "no 'clusters = A, B' line"));
                assert_non_null(strstr(json_object_get_string(refused),
                                       "\"clusters\""));
                aagw_config_destroy(cfg);
                return;
        }
        if (rc != AAGW_OK)
                fail_msg("%s: MM2 takes it, aagw refuses: %s", file,
                         aagw_config_errors(cfg));
        flows   = get(r, "flows");
        naflows = aagw_config_list(cfg, "replication.flows", &aflows);
        for (size_t i = 0; i < json_object_array_length(flows); i++) {
                json_object *f    = json_object_array_get_idx(flows, i);
                const char  *name = json_object_get_string(get(f, "flow"));
                bool         runs = json_object_get_boolean(get(f, "runs"));
                bool         ours = false;

                for (size_t k = 0; k < naflows; k++)
                        ours |= !strcmp(aflows[k], name);
                json_object *errs = get(f, "errors");
                print_message("# %s: %s: MM2 %s, aagw %s%s%s\n", file, name,
                              runs ? "runs it" : "does not run it",
                              ours ? "enables it" : "does not",
                              json_object_array_length(errs) ? "; MM2: " : "",
                              json_object_array_length(errs)
                                  ? json_object_to_json_string(errs)
                                  : "");
                if (runs != ours)
                        fail_msg("%s: flow %s: MM2 %s it, aagw %s", file, name,
                                 runs ? "runs" : "does not run",
                                 ours ? "enables it" : "does not");
                if (!runs)
                        continue;
                running++;
                same_list(file, name, "topics", get(f, "topics"), cfg);
                same_list(file, name, "groups", get(f, "groups"), cfg);
                if (!old_excl) {
                        same_list(file, name, "topics_exclude",
                                  get(f, "topics_exclude"), cfg);
                        same_list(file, name, "groups_exclude",
                                  get(f, "groups_exclude"), cfg);
                } else {
                        /* MM2 4.x has no topics.blacklist any more: its
                         * connector gets no exclusion list (its default),
                         * where aagw reads the list as MM2 3.x did. */
                        assert_true(json_object_is_type(
                            get(f, "topics_exclude"), json_type_null));
                        assert_true(json_object_is_type(
                            get(f, "groups_exclude"), json_type_null));
                }
                assert_string_equal(
                    aagw_config_str(cfg, "replication.separator"),
                    json_object_get_string(get(f, "separator")));
        }
        /* A pair MM2 makes no herder for does not run either. */
        assert_int_equal(naflows, running);
        aagw_config_destroy(cfg);
}

static struct io io;

static int teardown(void **state) {
        (void)state;
        if (io.dir)
                io_end(&io);
        return 0;
}

static void test_import_reads_as_mm2(void **state) {
        const size_t nseeds = sizeof(seeds) / sizeof(seeds[0]);
        const size_t nown   = sizeof(own) / sizeof(own[0]);
        const char  *root   = getenv("AAGW_SOURCE_ROOT");
        const char  *q[2 * (sizeof(seeds) / sizeof(seeds[0]) +
                            sizeof(own) / sizeof(own[0])) +
                       1];
        char        *paths[sizeof(seeds) / sizeof(seeds[0]) +
                    sizeof(own) / sizeof(own[0])];
        size_t       n = 0;
        (void)state;

        assert_non_null(root);
        io_begin_java(&io, "interop-mm2config");
        for (size_t i = 0; i < nseeds; i++) {
                assert_true(asprintf(&paths[i], "%s/tests/unit/mm2-seeds/%s",
                                     root, seeds[i]) > 0);
                q[n++] = "mm2config";
                q[n++] = paths[i];
        }
        for (size_t i = 0; i < nown; i++) {
                FILE *f;
                paths[nseeds + i] = harness_path_join(io.dir, own[i][0]);
                f                 = fopen(paths[nseeds + i], "w");
                assert_non_null(f);
                fputs(own[i][1], f);
                fclose(f);
                q[n++] = "mm2config";
                q[n++] = paths[nseeds + i];
        }
        q[n] = NULL;
        json_object *a = io_mm2_query(&io, q, nseeds + nown);

        for (size_t i = 0; i < nseeds + nown; i++) {
                char *text = harness_read_file(paths[i], NULL);
                assert_non_null(text);
                compare(i < nseeds ? seeds[i] : own[i - nseeds][0], text,
                        json_object_array_get_idx(a, i));
                free(text);
                free(paths[i]);
        }
        print_message("# %zu files: aagw's import = MirrorMaker 2's reading "
                      "(flows run, topic and group lists, separator)\n",
                      nseeds + nown);
        json_object_put(a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_import_reads_as_mm2, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
