/*
 * tests/unify/test_health.c: an outage is visible.
 *
 * A gateway replicates east <-> west and unifies at both sites.  Every
 * broker of west is set down (rd_kafka_mock_broker_set_down: connections
 * refused, so requests fail as to a frozen site).  Within a deadline:
 *  - /healthz answers 503 "degraded: ..." naming the flow that reads west
 *    (west->east, source), the one that writes it (east->west, target)
 *    and the unify stage at west;
 *  - /status says lag null (unknown) for west->east and the stage at west
 *    and source_reachable false, target_reachable false, cluster_reachable
 *    false where they apply; east's stage stays reachable with a number;
 *  - /metrics has NaN for those lags (never a stale 0) and 0 for
 *    aagw_replication_source_reachable / _target_reachable /
 *    aagw_unify_cluster_reachable.
 * West back up: /healthz "ok" again, the lags numbers, everything
 * reachable, and records written at west during the outage reach east.
 * Embedded clusters only: a shared real cluster serves other tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "unify.h"

#define BROKERS 3
#define MOCK_ONLY                                                              \
        "takes west's brokers down (rd_kafka_mock_broker_set_down); a shared " \
        "real cluster serves other tests"

static const char *const sites[] = {"east", "west"};

static void set_brokers(struct repl *r, const char *alias, bool up) {
        rd_kafka_mock_cluster_t *mc =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), alias);

        assert_non_null(mc);
        for (int b = 1; b <= BROKERS; b++)
                assert_int_equal(up ? rd_kafka_mock_broker_set_up(mc, b)
                                    : rd_kafka_mock_broker_set_down(mc, b),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
}

struct want {
        struct repl       *r;
        const char        *path;
        const char *const *has;  /* NULL-terminated */
        const char *const *lacks; /* NULL-terminated, may be NULL */
        char              *last;
};

static bool body_matches(void *arg) {
        struct want *w = arg;
        free(w->last);
        if (!(w->last = unify_http_get(w->r, w->path)))
                return false;
        for (size_t i = 0; w->has[i]; i++)
                if (!strstr(w->last, w->has[i]))
                        return false;
        for (size_t i = 0; w->lacks && w->lacks[i]; i++)
                if (strstr(w->last, w->lacks[i]))
                        return false;
        return true;
}

static void expect_body(struct repl *r, const char *path,
                        const char *const *has, const char *const *lacks,
                        int timeout_ms) {
        struct want w = {r, path, has, lacks, NULL};
        if (!harness_wait_until(body_matches, &w, timeout_ms)) {
                repl_dump_log(r, 30);
                /* the answer is long: name what did not match */
                for (size_t i = 0; w.last && has[i]; i++)
                        if (!strstr(w.last, has[i]))
                                fprintf(stderr, "# missing: %s", has[i]);
                for (size_t i = 0; w.last && lacks && lacks[i]; i++)
                        if (strstr(w.last, lacks[i])) {
                                const char *at = strstr(w.last, lacks[i]);
                                const char *bol = at;
                                while (bol > w.last && bol[-1] != '\n')
                                        bol--;
                                fprintf(stderr, "# present: %.*s\n",
                                        (int)strcspn(bol, "\n"), bol);
                        }
                fail_msg("GET %s never matched (%s)", path,
                         w.last ? "see above" : "no answer");
        }
        free(w.last);
}

/* The named member of flow @p name / unify @p site in /status. */
static json_object *status_of(json_object *root, const char *list,
                              const char *key, const char *name) {
        json_object *a, *v;
        if (!json_object_object_get_ex(root, list, &a))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (json_object_object_get_ex(e, key, &v) &&
                    !strcmp(json_object_get_string(v), name))
                        return e;
        }
        return NULL;
}

static void expect_field(json_object *o, const char *field, const char *want) {
        json_object *v = NULL;
        assert_non_null(o);
        if (!json_object_object_get_ex(o, field, &v))
                fail_msg("no %s in %s", field, json_object_to_json_string(o));
        const char *got = v ? json_object_to_json_string(v) : "null";
        if (strcmp(got, want))
                fail_msg("%s: got %s, want %s in %s", field, got, want,
                         json_object_to_json_string(o));
}

static void test_outage_visible(void **state) {
        struct repl *r = repl_new(sites, 2);

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        repl_create_topic(r, NULL, "clicks", 2);
        repl_create_topic(r, "west", "east.clicks", 2);
        repl_create_topic(r, "east", "west.clicks", 2);
        unify_gw_start(r, "dedup", NULL);
        repl_produce(r, "east", "clicks", "e", 0, 10, 10, NULL, -1);
        repl_produce(r, "west", "clicks", "w", 0, 10, 10, NULL, -1);
        repl_expect_size(r, "east", "west.clicks", 10, 60000);
        repl_expect_size(r, "west", "east.clicks", 10, 60000);
        unify_wait_idle(r, "west", 20, 60000);
        const char *const ok[] = {"ok\n", NULL};
        expect_body(r, "/healthz", ok, NULL, 10000);

        set_brokers(r, "west", false);
        const char *const deg[] = {
            "degraded:",
            "flow west->east cannot reach west (source)",
            "flow east->west cannot reach west (target)",
            "unify stage at west cannot reach west", NULL};
        const char *const not_east[] = {"cannot reach east", NULL};
        expect_body(r, "/healthz", deg, not_east, 60000);

        char *body = unify_http_get(r, "/status");
        assert_non_null(body);
        json_object *root = json_tokener_parse(body);
        assert_non_null(root);
        json_object *we = status_of(root, "flows", "name", "west->east");
        json_object *ew = status_of(root, "flows", "name", "east->west");
        json_object *uw = status_of(root, "unify", "site", "west");
        json_object *ue = status_of(root, "unify", "site", "east");
        expect_field(we, "lag", "null");
        expect_field(we, "source_reachable", "false");
        expect_field(we, "target_reachable", "true");
        expect_field(ew, "target_reachable", "false");
        expect_field(ew, "source_reachable", "true");
        expect_field(uw, "lag", "null");
        expect_field(uw, "cluster_reachable", "false");
        expect_field(ue, "cluster_reachable", "true");
        expect_field(ue, "lag", "0");
        json_object_put(root);
        free(body);

        const char *const met[] = {
            "aagw_replication_lag_records{flow=\"west->east\"} NaN\n",
            "aagw_replication_source_reachable{flow=\"west->east\"} 0\n",
            "aagw_replication_target_reachable{flow=\"east->west\"} 0\n",
            "aagw_replication_source_reachable{flow=\"east->west\"} 1\n",
            "aagw_unify_lag_records{site=\"west\"} NaN\n",
            "aagw_unify_cluster_reachable{site=\"west\"} 0\n",
            "aagw_unify_cluster_reachable{site=\"east\"} 1\n", NULL};
        expect_body(r, "/metrics", met, NULL, 10000);

        /* written at west while the gateway could not read it: arrives
         * once west is back */
        set_brokers(r, "west", true);
        expect_body(r, "/healthz", ok, NULL, 60000);
        const char *const met_ok[] = {
            "aagw_replication_source_reachable{flow=\"west->east\"} 1\n",
            "aagw_replication_target_reachable{flow=\"east->west\"} 1\n",
            "aagw_unify_cluster_reachable{site=\"west\"} 1\n", NULL};
        const char *const no_nan[] = {"} NaN\n", NULL};
        expect_body(r, "/metrics", met_ok, no_nan, 30000);
        repl_produce(r, "west", "clicks", "w", 10, 10, 10, NULL, -1);
        repl_expect_size(r, "east", "west.clicks", 20, 60000);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_outage_visible, repl_setup,
                                            repl_teardown),
        };
        static const char *const all[] = {"test_outage_visible", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("unify-health", tests, n, NULL,
                                           NULL)
                 : 0;
}
