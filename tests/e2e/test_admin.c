/*
 * tests/e2e/test_admin.c: the admin HTTP endpoint and `aagw status`.
 *
 * A gateway replicates between two embedded clusters (in this process)
 * with --admin 127.0.0.1:0; curl, an independent client, checks status
 * codes, content types, metric names and that the figures move with
 * traffic; pause/resume stops and restarts a flow; a bearer token is
 * enforced.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "harness.h"

#define WAIT_MS 60000

static const char *const sites[] = {"east", "west"};

struct fx {
        harness_clusters_t *hc;
        harness_proc_t     *gw;
        char               *dir, *state, *log;
        char                addr[128];
        char                errstr[1024];
};

struct http {
        int   code;
        char *headers; /* the head, lower-cased */
        char *body;
        harness_output_t o;
};

static void http_deinit(struct http *h) {
        free(h->headers);
        harness_output_deinit(&h->o);
        memset(h, 0, sizeof(*h));
}

/* curl -s -i [-X METHOD] [-H auth] URL */
static void http(struct fx *f, const char *method, const char *path,
                 const char *token, struct http *h) {
        char        url[512], auth[512];
        const char *argv[12];
        int         n = 0;

        memset(h, 0, sizeof(*h));
        snprintf(url, sizeof(url), "http://%s%s", f->addr, path);
        argv[n++] = "curl";
        argv[n++] = "-s";
        argv[n++] = "-i";
        argv[n++] = "-X";
        argv[n++] = method;
        if (token) {
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
                argv[n++] = "-H";
                argv[n++] = auth;
        }
        argv[n++] = url;
        argv[n]   = NULL;
        assert_int_equal(harness_run(argv, NULL, 0, 10000, &h->o, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(h->o.status), 0);
        char *sep = strstr(h->o.out, "\r\n\r\n");
        assert_non_null(sep);
        *sep       = '\0';
        h->body    = sep + 4;
        h->headers = strdup(h->o.out);
        for (char *p = h->headers; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                        *p = (char)(*p - 'A' + 'a');
        assert_int_equal(sscanf(h->o.out, "HTTP/%*s %d", &h->code), 1);
}

/* The value of a metric line "name{labels} value", or -1 if absent. */
static long long metric(const char *body, const char *series) {
        const char *p = body;
        size_t      len = strlen(series);
        while ((p = strstr(p, series))) {
                if ((p == body || p[-1] == '\n') && p[len] == ' ')
                        return atoll(p + len + 1);
                p += len;
        }
        return -1;
}

static void start_gw(struct fx *f, const char *const *extra) {
        const char *argv[40];
        int         n = 0;
        char        c1[512], c2[512], addrfile[4200];

        snprintf(c1, sizeof(c1), "east=%s",
                 harness_clusters_bootstraps(f->hc, "east"));
        snprintf(c2, sizeof(c2), "west=%s",
                 harness_clusters_bootstraps(f->hc, "west"));
        argv[n++] = harness_aagw_bin();
        argv[n++] = "--cluster";
        argv[n++] = c1;
        argv[n++] = "--cluster";
        argv[n++] = c2;
        argv[n++] = "--state-dir";
        argv[n++] = f->state;
        argv[n++] = "--admin";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--unify";
        argv[n++] = "off";
        argv[n++] = "--set";
        argv[n++] = "clusters.east.properties.consumer.session.timeout.ms=3000";
        argv[n++] = "--set";
        argv[n++] = "clusters.west.properties.consumer.session.timeout.ms=3000";
        /* The counters below are exact: no heartbeat records among them
         * (tests/offsets covers heartbeats). */
        argv[n++] = "--set";
        argv[n++] = "mm2.heartbeats_interval=0s";
        for (size_t i = 0; extra && extra[i]; i++)
                argv[n++] = extra[i];
        argv[n] = NULL;
        f->gw   = harness_proc_spawn(argv, NULL, f->log, f->errstr,
                                     sizeof(f->errstr));
        assert_non_null(f->gw);
        snprintf(addrfile, sizeof(addrfile), "%s/admin.addr", f->state);
        if (!harness_wait_file(addrfile, WAIT_MS)) {
                char *log = harness_read_file(f->log, NULL);
                fail_msg("no %s; log:\n%s", addrfile, log ? log : "");
        }
        char *a = harness_read_file(addrfile, NULL);
        assert_non_null(a);
        a[strcspn(a, "\n")] = '\0';
        snprintf(f->addr, sizeof(f->addr), "%s", a);
        free(a);
}

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        f->hc = harness_clusters_new(sites, 2, 1, f->errstr, sizeof(f->errstr));
        assert_non_null(f->hc);
        assert_int_equal(harness_clusters_create_topic(f->hc, NULL, "clicks", 4,
                                                       f->errstr,
                                                       sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_clusters_create_topic(f->hc, "west",
                                                       "east.clicks", 4,
                                                       f->errstr,
                                                       sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_clusters_create_topic(f->hc, "east",
                                                       "west.clicks", 4,
                                                       f->errstr,
                                                       sizeof(f->errstr)),
                         AAGW_OK);
        f->dir   = harness_tmpdir_new("admin");
        f->state = harness_path_join(f->dir, "state");
        f->log   = harness_path_join(f->dir, "gw.log");
        *state   = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        harness_proc_destroy(f->gw);
        harness_clusters_destroy(f->hc);
        harness_rmtree(f->dir);
        free(f->dir);
        free(f->state);
        free(f->log);
        free(f);
        return 0;
}

static void produce(struct fx *f, int from, int cnt) {
        harness_record_t *recs = calloc((size_t)cnt, sizeof(*recs));
        char            (*kv)[2][32] = calloc((size_t)cnt, sizeof(*kv));
        for (int i = 0; i < cnt; i++) {
                snprintf(kv[i][0], 32, "k%d", (from + i) % 40);
                snprintf(kv[i][1], 32, "v%d", from + i);
                recs[i].key   = kv[i][0];
                recs[i].value = kv[i][1];
        }
        assert_int_equal(harness_kcat_produce(
                             harness_clusters_bootstraps(f->hc, "east"),
                             "clicks", recs, (size_t)cnt, NULL, -1, 30000,
                             f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        free(recs);
        free(kv);
}

struct out_arg {
        struct fx *f;
        long long  want;
};

static bool out_reached(void *arg) {
        struct out_arg *a = arg;
        struct http     h;
        http(a->f, "GET", "/metrics", NULL, &h);
        long long v = metric(
            h.body, "aagw_replication_records_out_total{flow=\"east->west\"}");
        http_deinit(&h);
        return v == a->want;
}

/* True once the east->west out counter is anything but 500. */
static bool out_changed(void *arg) {
        struct out_arg *a = arg;
        struct http     h;
        http(a->f, "GET", "/metrics", NULL, &h);
        long long v = metric(
            h.body, "aagw_replication_records_out_total{flow=\"east->west\"}");
        http_deinit(&h);
        return v != 500;
}

static void test_endpoints(void **state) {
        struct fx  *f = *state;
        struct http h;

        start_gw(f, NULL);

        http(f, "GET", "/healthz", NULL, &h);
        assert_int_equal(h.code, 200);
        assert_string_equal(h.body, "ok\n");
        http_deinit(&h);

        http(f, "GET", "/nope", NULL, &h);
        assert_int_equal(h.code, 404);
        http_deinit(&h);

        /* Metrics: names present, values move with traffic. */
        produce(f, 0, 500);
        struct out_arg oa = {f, 500};
        assert_true(harness_wait_until(out_reached, &oa, WAIT_MS));
        http(f, "GET", "/metrics", NULL, &h);
        assert_int_equal(h.code, 200);
        assert_non_null(strstr(h.headers, "content-type: text/plain; "
                                          "version=0.0.4"));
        assert_int_equal(
            metric(h.body,
                   "aagw_replication_records_in_total{flow=\"east->west\"}"),
            500);
        assert_int_equal(
            metric(h.body,
                   "aagw_replication_records_out_total{flow=\"west->east\"}"),
            0);
        assert_int_equal(metric(h.body, "aagw_flow_up{flow=\"east->west\"}"),
                         1);
        assert_int_equal(
            metric(h.body, "aagw_replication_latency_ms_count{flow=\"east->"
                           "west\"}"),
            500);
        assert_int_equal(
            metric(h.body, "aagw_replication_latency_ms_bucket{flow=\"east->"
                           "west\",le=\"+Inf\"}"),
            500);
        assert_int_equal(
            metric(h.body, "aagw_replication_skipped_total{flow=\"east->west\","
                           "cause=\"path_has_target\"}"),
            0);
        assert_non_null(strstr(h.body, "# TYPE aagw_replication_latency_ms "
                                       "histogram\n"));
        assert_non_null(strstr(h.body, "# TYPE "
                                       "aagw_replication_records_out_total "
                                       "counter\n"));
        http_deinit(&h);

        /* Status JSON. */
        http(f, "GET", "/status", NULL, &h);
        assert_int_equal(h.code, 200);
        assert_non_null(strstr(h.headers, "content-type: application/json"));
        assert_non_null(strstr(h.body, "\"name\":\"east->west\",\"state\":"
                                       "\"running\""));
        assert_non_null(strstr(h.body, "\"records_out\":500"));
        assert_non_null(strstr(h.body, "\"librdkafka\":\"2."));
        http_deinit(&h);

        /* `aagw status` finds the endpoint through the state dir. */
        {
                const char      *argv[] = {harness_aagw_bin(), "status",
                                           "--state-dir", f->state, NULL};
                harness_output_t o;
                assert_int_equal(harness_run(argv, NULL, 0, 10000, &o,
                                             f->errstr, sizeof(f->errstr)),
                                 AAGW_OK);
                assert_int_equal(harness_exit_code(o.status), 0);
                assert_non_null(strstr(o.out, "# Flow east->west\nstate:"
                                              "running\n"));
                assert_non_null(strstr(o.out, "\nrecords_out:500\n"));
                harness_output_deinit(&o);
        }

        /* Pause: new records wait; resume: they arrive. */
        http(f, "POST", "/flows/east-west/pause", NULL, &h);
        assert_int_equal(h.code, 202);
        http_deinit(&h);
        http(f, "POST", "/flows/east-north/pause", NULL, &h);
        assert_int_equal(h.code, 404);
        http_deinit(&h);
        http(f, "GET", "/flows/east-west/pause", NULL, &h);
        assert_int_equal(h.code, 405);
        http_deinit(&h);
        produce(f, 500, 200);
        /* While paused none of them is copied: a quiet period of 3 s (an
         * unpaused flow copies them in well under a second) in which the
         * counter must not move. */
        struct out_arg moved = {f, 700};
        assert_false(harness_wait_until(out_changed, &moved, 3000));
        {
                const char      *argv[] = {harness_aagw_bin(), "status",
                                           "--state-dir", f->state, NULL};
                harness_output_t o;
                assert_int_equal(harness_run(argv, NULL, 0, 10000, &o,
                                             f->errstr, sizeof(f->errstr)),
                                 AAGW_OK);
                assert_non_null(strstr(o.out, "# Flow east->west\nstate:"
                                              "paused\n"));
                harness_output_deinit(&o);
        }
        http(f, "POST", "/flows/east->west/resume", NULL, &h);
        assert_int_equal(h.code, 202);
        http_deinit(&h);
        struct out_arg all = {f, 700};
        assert_true(harness_wait_until(out_reached, &all, WAIT_MS));

        /* SIGTERM: clean exit, the address file is removed. */
        assert_int_equal(harness_proc_signal(f->gw, SIGTERM), 0);
        int st;
        assert_int_equal(harness_proc_wait(f->gw, 15000, &st), AAGW_OK);
        assert_int_equal(harness_exit_code(st), 0);
        char addrfile[4200];
        snprintf(addrfile, sizeof(addrfile), "%s/admin.addr", f->state);
        assert_null(fopen(addrfile, "r"));

        /* And `aagw status` now says it cannot reach it. */
        {
                const char      *argv[] = {harness_aagw_bin(), "status",
                                           "--admin", f->addr, NULL};
                harness_output_t o;
                assert_int_equal(harness_run(argv, NULL, 0, 10000, &o,
                                             f->errstr, sizeof(f->errstr)),
                                 AAGW_OK);
                assert_int_equal(harness_exit_code(o.status), 1);
                assert_non_null(strstr(o.err, "cannot reach the admin "
                                              "endpoint"));
                harness_output_deinit(&o);
        }
}

static void test_token(void **state) {
        struct fx        *f       = *state;
        static const char token[] = "s3cret-token-0123456789";
        const char       *extra[] = {"--set", "admin.token=s3cret-token-0123456789",
                                     NULL};
        struct http       h;

        start_gw(f, extra);
        http(f, "GET", "/metrics", NULL, &h);
        assert_int_equal(h.code, 401);
        assert_non_null(strstr(h.headers, "www-authenticate: bearer"));
        http_deinit(&h);
        http(f, "GET", "/healthz", "wrong-token-0123456789", &h);
        assert_int_equal(h.code, 401);
        http_deinit(&h);
        http(f, "GET", "/healthz", token, &h);
        assert_int_equal(h.code, 200);
        http_deinit(&h);
        /* The token never shows in the log. */
        assert_int_equal(harness_proc_signal(f->gw, SIGTERM), 0);
        int st;
        assert_int_equal(harness_proc_wait(f->gw, 15000, &st), AAGW_OK);
        assert_int_equal(harness_exit_code(st), 0);
        char *log = harness_read_file(f->log, NULL);
        assert_non_null(log);
        assert_null(strstr(log, token));
        assert_non_null(strstr(log, "bearer token required"));
        free(log);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_endpoints, setup, teardown),
            cmocka_unit_test_setup_teardown(test_token, setup, teardown),
        };
        return cmocka_run_group_tests_name("admin", tests, NULL, NULL);
}
