/*
 * tests/e2e/test_admin.c: the admin HTTP endpoint and `aagw status`.
 *
 * A gateway replicates between two embedded clusters (in this process)
 * with --admin 127.0.0.1:0; curl, an independent client, checks status
 * codes, content types, metric names and that the figures move with
 * traffic; pause/resume stops and restarts a flow; a bearer token is
 * enforced.  Every name docs/metrics.md lists is served and every served
 * name is documented.  Headless Chromium (Debian's chromium, $CHROMIUM)
 * loads the status page at / and the test reads what it drew from the
 * DOM: both sites, the flows, and record counts that follow the traffic.
 * TLS: a CA, a server and a client certificate, and a second CA with a
 * client of its own, made with openssl once per run; curl and `aagw
 * status` over HTTPS, with and without client certificates, the plain
 * health listener, and the refusals of bad TLS settings.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "aagw_build.h"
#include "aagw_replicator.h"
#include "harness.h"

#define WAIT_MS 60000

static const char *const sites[] = {"east", "west"};

struct fx {
        harness_clusters_t *hc;
        harness_proc_t     *gw;
        char               *dir, *state, *log;
        char                addr[128];
        const char         *token; /* what the figure readers send */
        /* On real clusters, which the tests share, names unique to this
         * test run: the scope, "<scope>-clicks" and its remote copies;
         * the gateway replicates only topics holding the scope.  On the
         * embedded ones (the test's own): no scope, "clicks". */
        char                *scope;
        char                 clicks[128];
        char                 topics[160];
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

/* Split what `curl -i` printed (h->o.out) into status, head, body. */
static void http_parse(struct http *h) {
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

/* curl -s -i [-X METHOD | -I] [-H auth] [-H header] URL */
static void http_hdr(struct fx *f, const char *method, const char *path,
                     const char *token, const char *header, struct http *h) {
        char        url[512], auth[512];
        const char *argv[16];
        int         n = 0;

        memset(h, 0, sizeof(*h));
        snprintf(url, sizeof(url), "http://%s%s", f->addr, path);
        argv[n++] = "curl";
        argv[n++] = "-s";
        argv[n++] = "-i";
        if (!strcmp(method, "HEAD")) {
                argv[n++] = "-I";
        } else {
                argv[n++] = "-X";
                argv[n++] = method;
        }
        if (header) {
                argv[n++] = "-H";
                argv[n++] = header;
        }
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
        http_parse(h);
}

static void http(struct fx *f, const char *method, const char *path,
                 const char *token, struct http *h) {
        http_hdr(f, method, path, token, NULL, h);
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

/* aagw's --cluster (and --set, on secured clusters) for both sites from
 * argv[n]; @returns the new n. */
static size_t cluster_args(struct fx *f, const char **argv, size_t n,
                           size_t size) {
        for (int i = 0; i < 2; i++) {
                size_t k = harness_clusters_gw_args(f->hc, sites[i], argv + n,
                                                    size - n);
                assert_true(k > 0);
                n += k;
        }
        return n;
}

static void start_gw(struct fx *f, const char *const *extra) {
        const char *argv[96];
        size_t      n = 0;
        char        addrfile[4200];

        argv[n++] = harness_aagw_bin();
        n = cluster_args(f, argv, n, sizeof(argv) / sizeof(argv[0]) - 40);
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
        if (*f->scope) {
                argv[n++] = "--set";
                argv[n++] = f->topics;
                argv[n++] = "--gateway-id"; /* its groups: aagw.<id>.* */
                argv[n++] = f->scope;
        }
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(n < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[n++] = extra[i];
        }
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

/* @p topic at both sites and its copies (east.<topic> at west, west.<topic>
 * at east): the embedded clusters cannot create topics through the Admin
 * API, so the gateway could not. */
static void create_both_ways(struct fx *f, const char *topic, int parts) {
        char copy[300];

        assert_int_equal(harness_clusters_create_topic(f->hc, NULL, topic,
                                                       parts, f->errstr,
                                                       sizeof(f->errstr)),
                         AAGW_OK);
        for (int i = 0; i < 2; i++) {
                snprintf(copy, sizeof(copy), "%s.%s", sites[i], topic);
                assert_int_equal(harness_clusters_create_topic(
                                     f->hc, sites[1 - i], copy, parts,
                                     f->errstr, sizeof(f->errstr)),
                                 AAGW_OK);
        }
}

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        f->hc = harness_clusters_new(sites, 2, 1, f->errstr, sizeof(f->errstr));
        assert_non_null(f->hc);
        f->scope = harness_clusters_are_real(f->hc) ? harness_unique_name("t")
                                                    : strdup("");
        assert_non_null(f->scope);
        snprintf(f->clicks, sizeof(f->clicks), "%s%sclicks", f->scope,
                 *f->scope ? "-" : "");
        snprintf(f->topics, sizeof(f->topics), "replication.topics=.*%s.*",
                 f->scope);
        create_both_ways(f, f->clicks, 4);
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
        free(f->scope);
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
                             f->clicks, recs, (size_t)cnt, NULL, -1, 30000,
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
        http(a->f, "GET", "/metrics", a->f->token, &h);
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

/* The flow applied a pause (POST .../pause only asks for one: 202). */
static bool flow_paused(void *arg) {
        struct fx  *f = arg;
        struct http h;
        http(f, "GET", "/metrics", NULL, &h);
        long long v = metric(h.body, "aagw_flow_paused{flow=\"east->west\"}");
        http_deinit(&h);
        return v == 1;
}

struct healthz_arg {
        struct fx  *f;
        const char *token;
        int         code;
        char        body[512];
};

static bool healthz_ok(void *arg) {
        struct healthz_arg *a = arg;
        struct http         h;
        http(a->f, "GET", "/healthz", a->token, &h);
        a->code = h.code;
        snprintf(a->body, sizeof(a->body), "%s", h.body ? h.body : "");
        http_deinit(&h);
        return a->code == 200 && !strcmp(a->body, "ok\n");
}

/* /healthz says "ok" once every cluster has answered: a gateway just
 * started may not have heard from a secured cluster on a loaded machine
 * yet (its first ping is bounded at 2 s), and says so with a 503. */
static void expect_healthy(struct fx *f, const char *token) {
        struct healthz_arg a = {f, token, 0, ""};
        if (!harness_wait_until(healthz_ok, &a, WAIT_MS))
                fail_msg("/healthz: %d %s", a.code, a.body);
}

static void test_endpoints(void **state) {
        struct fx  *f = *state;
        struct http h;

        start_gw(f, NULL);

        expect_healthy(f, NULL);

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
        /* The pause is taken at the flow's next poll: records produced
         * before that may still be copied (with a 50 ms fetch wait they
         * were, now and then). */
        assert_true(harness_wait_until(flow_paused, f, 5000));
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
        expect_healthy(f, token);
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


/* ------------------------------------------- METHODS, TYPES, GUARDS --- */

static void expect_status(struct fx *f, const char *method, const char *path,
                          const char *header, int code, const char *in_head) {
        struct http h;
        http_hdr(f, method, path, f->token, header, &h);
        if (h.code != code)
                fail_msg("%s %s%s%s: %d, expected %d\n%s", method, path,
                         header ? " with " : "", header ? header : "", h.code,
                         code, h.headers);
        if (in_head && !strstr(h.headers, in_head))
                fail_msg("%s %s: no '%s' in\n%s", method, path, in_head,
                         h.headers);
        http_deinit(&h);
}

/* Both flows of /status have measured the round trip to their source
 * (source_rtt_ms is null until then). */
static bool both_measured(void *arg) {
        struct fx   *f = arg;
        struct http  h;
        json_object *st, *fl, *rtt;
        int          n = 0;

        http(f, "GET", "/status", NULL, &h);
        st = json_tokener_parse(h.body);
        http_deinit(&h);
        if (!st)
                return false;
        if (json_object_object_get_ex(st, "flows", &fl))
                for (size_t i = 0; i < json_object_array_length(fl); i++)
                        n += json_object_object_get_ex(
                                 json_object_array_get_idx(fl, i),
                                 "source_rtt_ms", &rtt) &&
                             rtt;
        json_object_put(st);
        return n == 2;
}

static void test_methods_and_types(void **state) {
        struct fx  *f = *state;
        struct http h;
        char        hdr[256];

        start_gw(f, NULL);

        /* Content types. */
        expect_status(f, "GET", "/", NULL, 200,
                      "content-type: text/html; charset=utf-8");
        expect_status(f, "GET", "/", NULL, 200,
                      "content-security-policy: default-src 'none'");
        expect_status(f, "HEAD", "/", NULL, 200, "content-type: text/html");
        expect_status(f, "GET", "/healthz", NULL, 200,
                      "content-type: text/plain");
        expect_status(f, "GET", "/status", NULL, 200,
                      "content-type: application/json");
        expect_status(f, "GET", "/status?format=text", NULL, 200,
                      "content-type: text/plain");
        expect_status(f, "GET", "/metrics", NULL, 200,
                      "content-type: text/plain; version=0.0.4");

        /* Wrong methods: 405 and what is allowed. */
        expect_status(f, "POST", "/", NULL, 405, "allow: get, head");
        expect_status(f, "POST", "/status", NULL, 405, "allow: get, head");
        expect_status(f, "DELETE", "/metrics", NULL, 405, "allow: get, head");
        expect_status(f, "PUT", "/healthz", NULL, 405, "allow: get, head");
        expect_status(f, "GET", "/flows/east-west/pause", NULL, 405,
                      "allow: post");
        expect_status(f, "DELETE", "/flows/east-west/resume", NULL, 405,
                      "allow: post");
        /* Unknown paths and flows. */
        expect_status(f, "GET", "/status/", NULL, 404, NULL);
        expect_status(f, "GET", "/index.html", NULL, 404, NULL);
        expect_status(f, "POST", "/flows/east-west/stop", NULL, 404, NULL);
        expect_status(f, "POST", "/flows/north-west/pause", NULL, 404, NULL);

        /* The page: self-contained, and it polls /status. */
        http(f, "GET", "/", NULL, &h);
        assert_non_null(strstr(h.body, "<svg id=\"topo\""));
        assert_non_null(strstr(h.body, "fetch(\"/status\""));
        assert_null(strstr(h.body, "src=\"http"));
        assert_null(strstr(h.body, "href=\"http"));
        http_deinit(&h);

        /* Without a token the endpoint answers only to loopback names
         * (DNS rebinding), and refuses another site's page (CSRF). */
        expect_status(f, "GET", "/status", "Host: attacker.example:80", 403,
                      NULL);
        expect_status(f, "GET", "/", "Host: 127.0.0.1.attacker.example", 403,
                      NULL);
        snprintf(hdr, sizeof(hdr), "Host: localhost:%s",
                 strrchr(f->addr, ':') + 1);
        expect_status(f, "GET", "/status", hdr, 200, NULL);
        expect_status(f, "POST", "/flows/east-west/pause",
                      "Origin: http://attacker.example", 403, NULL);
        http(f, "GET", "/status", NULL, &h);
        assert_null(strstr(h.body, "\"state\":\"paused\""));
        http_deinit(&h);
        snprintf(hdr, sizeof(hdr), "Origin: http://%s", f->addr);
        expect_status(f, "POST", "/flows/east-west/pause", hdr, 202, NULL);
        expect_status(f, "POST", "/flows/east-west/resume", hdr, 202, NULL);

        /* The /status fields the page draws from. */
        http(f, "GET", "/status", NULL, &h);
        json_object *st = json_tokener_parse(h.body), *v, *fl;
        assert_non_null(st);
        assert_true(json_object_object_get_ex(st, "sites", &v));
        assert_int_equal(json_object_array_length(v), 2);
        assert_string_equal(
            json_object_get_string(json_object_array_get_idx(v, 0)), "east");
        assert_string_equal(
            json_object_get_string(json_object_array_get_idx(v, 1)), "west");
        assert_true(json_object_object_get_ex(st, "now_ms", &v));
        assert_true(json_object_get_int64(v) > 1600000000000LL);
        assert_true(json_object_object_get_ex(st, "flows", &fl));
        assert_int_equal(json_object_array_length(fl), 2);
        for (size_t i = 0; i < 2; i++) {
                json_object *o = json_object_array_get_idx(fl, i), *n, *src,
                            *dst;
                char         name[64];
                assert_true(json_object_object_get_ex(o, "name", &n));
                assert_true(json_object_object_get_ex(o, "source", &src));
                assert_true(json_object_object_get_ex(o, "target", &dst));
                snprintf(name, sizeof(name), "%s->%s",
                         json_object_get_string(src),
                         json_object_get_string(dst));
                assert_string_equal(name, json_object_get_string(n));
                assert_true(json_object_object_get_ex(o, "latency_p99_ms", &v));
                assert_int_equal(json_object_get_int64(v), 0); /* no traffic */
        }
        json_object_put(st);
        http_deinit(&h);

        /* Each flow measured the round trip to its source before its
         * first assignment and sized its fetch window from it over the 4
         * partitions of clicks (its only topic: no heartbeats here, and
         * the remote copy at its source is not copied back). */
        assert_true(harness_wait_until(both_measured, f, WAIT_MS));
        http(f, "GET", "/status", NULL, &h);
        st = json_tokener_parse(h.body);
        assert_non_null(st);
        assert_true(json_object_object_get_ex(st, "flows", &fl));
        for (size_t i = 0; i < 2; i++) {
                json_object *o = json_object_array_get_idx(fl, i), *rtt, *win;
                struct aagw_fetch_window w;
                assert_true(
                    json_object_object_get_ex(o, "source_rtt_ms", &rtt));
                assert_true(
                    json_object_object_get_ex(o, "fetch_window_bytes", &win));
                assert_true(
                    json_object_object_get_ex(o, "fetch_queue_records", &v));
                assert_true(json_object_get_int64(v) >= 0);
                /* Near the cluster (under 10 ms) one source consumer. */
                assert_true(
                    json_object_object_get_ex(o, "fetch_connections", &v));
                if (json_object_get_double(rtt) <
                    AAGW_FETCH_CONNECTIONS_MIN_RTT_US / 1000.0)
                        assert_int_equal(json_object_get_int(v), 1);
                double ms = json_object_get_double(rtt);
                assert_true(ms > 0 && ms < 5000);
                aagw_fetch_window_size(&w, (int64_t)(ms * 1000 + 0.5), 4);
                assert_int_equal(json_object_get_int64(win), w.window_bytes);
                print_message(
                    "# %s: round trip %.2f ms, window %" PRId64 " bytes\n",
                    json_object_get_string(json_object_object_get(o, "name")),
                    ms, w.window_bytes);
        }
        json_object_put(st);
        http_deinit(&h);
}

/* A non-loopback admin address without a token is refused before the
 * gateway starts; with a token it starts, and the token is required. */
static void test_non_loopback_needs_token(void **state) {
        struct fx       *f = *state;
        harness_output_t o;
        const char      *argv[96];
        size_t           n = 0;

        argv[n++] = harness_aagw_bin();
        n = cluster_args(f, argv, n, sizeof(argv) / sizeof(argv[0]) - 10);
        argv[n++] = "--state-dir";
        argv[n++] = f->state;
        argv[n++] = "--admin";
        argv[n++] = "0.0.0.0:0";
        argv[n++] = "--duration";
        argv[n++] = "1";
        argv[n]   = NULL;
        assert_int_equal(harness_run(argv, NULL, 0, 20000, &o, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(o.status), 2);
        assert_non_null(strstr(o.err, "--admin: admin.listen: a non-loopback "
                                      "address needs admin.token"));
        harness_output_deinit(&o);

        const char *extra[] = {"--admin", "0.0.0.0:0", "--set",
                               "admin.token=0123456789abcdef-wildcard", NULL};
        start_gw(f, extra);
        /* The address file names the wildcard address; connect through
         * loopback, which it includes. */
        char port[16];
        snprintf(port, sizeof(port), "%s", strrchr(f->addr, ':') + 1);
        snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%s", port);
        expect_status(f, "GET", "/status", NULL, 401, "www-authenticate");
        f->token = "0123456789abcdef-wildcard";
        expect_status(f, "GET", "/status", NULL, 200, NULL);
        /* With a token any Host is accepted (the token is the guard). */
        expect_status(f, "GET", "/status", "Host: gw.example:9644", 200, NULL);
}

/* ----------------------------------------------------------- METRICS --- */

/* Names in docs/metrics.md's table: lines "| `aagw_name{...}` | ..." */
static char **documented_metrics(size_t *cnt) {
        char  path[4200];
        char *doc, **names = NULL;
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/docs/metrics.md", AAGW_SOURCE_ROOT);
        doc = harness_read_file(path, NULL);
        assert_non_null(doc);
        for (char *p = doc; (p = strstr(p, "\n| `aagw_")); p++) {
                const char *b = p + 4;
                size_t      len = strcspn(b, "{`");
                names = realloc(names, (n + 1) * sizeof(*names));
                assert_non_null(names);
                names[n++] = strndup(b, len);
        }
        free(doc);
        *cnt = n;
        return names;
}

static void test_metric_names_documented(void **state) {
        struct fx  *f = *state;
        struct http h;
        size_t      ndoc;
        char      **doc = documented_metrics(&ndoc);

        assert_true(ndoc >= 15);
        start_gw(f, NULL);
        http(f, "GET", "/metrics", NULL, &h);
        for (size_t i = 0; i < ndoc; i++) {
                char line[256];
                snprintf(line, sizeof(line), "# TYPE %s ", doc[i]);
                if (!strstr(h.body, line))
                        fail_msg("docs/metrics.md lists %s; /metrics does not "
                                 "serve it",
                                 doc[i]);
        }
        for (char *p = h.body; (p = strstr(p, "# TYPE ")); p++) {
                const char *name = p + 7;
                size_t      len  = strcspn(name, " ");
                bool        found = false;
                for (size_t i = 0; i < ndoc; i++)
                        if (strlen(doc[i]) == len &&
                            !strncmp(doc[i], name, len))
                                found = true;
                if (!found)
                        fail_msg("/metrics serves %.*s; docs/metrics.md does "
                                 "not document it",
                                 (int)len, name);
        }
        http_deinit(&h);
        for (size_t i = 0; i < ndoc; i++)
                free(doc[i]);
        free(doc);
}

struct scrape {
        long long in, out, bytes, lat_count, lat_inf;
};

static void scrape(struct fx *f, struct scrape *s) {
        struct http h;
        http(f, "GET", "/metrics", NULL, &h);
        assert_int_equal(h.code, 200);
        s->in  = metric(h.body, "aagw_replication_records_in_total{flow=\"east"
                                "->west\"}");
        s->out = metric(h.body, "aagw_replication_records_out_total{flow=\""
                                "east->west\"}");
        s->bytes = metric(h.body, "aagw_replication_bytes_out_total{flow=\""
                                  "east->west\"}");
        s->lat_count = metric(h.body, "aagw_replication_latency_ms_count{"
                                      "flow=\"east->west\"}");
        s->lat_inf = metric(h.body, "aagw_replication_latency_ms_bucket{flow="
                                    "\"east->west\",le=\"+Inf\"}");
        http_deinit(&h);
}

struct moved_arg {
        struct fx    *f;
        struct scrape base, now;
};

/* True once every counter moved past the base scrape. */
static bool all_moved(void *arg) {
        struct moved_arg *m = arg;
        scrape(m->f, &m->now);
        return m->now.in > m->base.in && m->now.out > m->base.out &&
               m->now.bytes > m->base.bytes &&
               m->now.lat_count > m->base.lat_count &&
               m->now.lat_inf > m->base.lat_inf;
}

static bool all_copied(void *arg) {
        struct moved_arg *m = arg;
        scrape(m->f, &m->now);
        return m->now.in >= 50000 && m->now.out == m->now.in;
}

/* Four batches, each written by kcat (an independent producer) while
 * the gateway runs: after each one every counter has moved past the
 * previous scrape, and never backwards.  Batches, not one long producer
 * raced against the scrapes, so a fast machine cannot copy everything
 * before the first look. */
static void test_counters_move_under_load(void **state) {
        struct fx        *f       = *state;
        const int         batches = 4, per = 12500;
        struct moved_arg  m       = {.f = f};
        int               st;

        start_gw(f, NULL);
        scrape(f, &m.now);
        for (int b = 0; b < batches; b++) {
                char  name[64];
                snprintf(name, sizeof(name), "records-%d.txt", b);
                char *file = harness_path_join(f->dir, name);
                FILE *fp   = fopen(file, "w");
                assert_non_null(fp);
                for (int i = 0; i < per; i++)
                        fprintf(fp, "click-%06d-%s\n", b * per + i,
                                "padding-so-the-copy-takes-a-moment");
                assert_int_equal(fclose(fp), 0);

                const char *argv[] = {harness_kcat_bin(), "-P", "-q", "-b",
                                      harness_clusters_bootstraps(f->hc,
                                                                  "east"),
                                      "-t", f->clicks, "-X", "linger.ms=20",
                                      "-l", file, NULL};
                harness_proc_t *prod = harness_proc_spawn(
                    argv, NULL, NULL, f->errstr, sizeof(f->errstr));
                assert_non_null(prod);
                assert_int_equal(harness_proc_wait(prod, 60000, &st), AAGW_OK);
                assert_int_equal(harness_exit_code(st), 0);
                harness_proc_destroy(prod);
                free(file);

                m.base = m.now;
                if (!harness_wait_until(all_moved, &m, WAIT_MS))
                        fail_msg("batch %d: counters did not all move: in "
                                 "%lld->%lld out %lld->%lld bytes %lld->%lld "
                                 "latency count %lld->%lld",
                                 b, m.base.in, m.now.in, m.base.out,
                                 m.now.out, m.base.bytes, m.now.bytes,
                                 m.base.lat_count, m.now.lat_count);
                /* One scrape is one histogram: +Inf is the count. */
                assert_int_equal(m.now.lat_inf, m.now.lat_count);
                assert_true(m.now.in <= (long long)(b + 1) * per);
                assert_true(m.now.out <= m.now.in);
        }
        /* Once the gateway caught up, every record was copied once and
         * observed once by the latency histogram. */
        if (!harness_wait_until(all_copied, &m, WAIT_MS))
                fail_msg("after the producer: in %lld, out %lld, expected %d",
                         m.now.in, m.now.out, batches * per);
        assert_int_equal(m.now.in, batches * per);
        assert_int_equal(m.now.lat_count, m.now.out);
        assert_int_equal(m.now.lat_inf, m.now.out);
        assert_true(m.now.bytes == (long long)m.now.out * 47);
}

struct backlog_arg {
        struct fx *f;
        long long  want;
        long long  out, unify_out;
};

/* True once both the flow and east's unify stage wrote 'want' records. */
static bool caught_up(void *arg) {
        struct backlog_arg *w = arg;
        struct http         h;
        http(w->f, "GET", "/metrics", NULL, &h);
        w->out = metric(h.body, "aagw_replication_records_out_total{flow=\""
                                "east->west\"}");
        w->unify_out =
            metric(h.body, "aagw_unify_records_out_total{site=\"east\"}");
        http_deinit(&h);
        return w->out == w->want && w->unify_out == w->want;
}

/* A backlog behind a consumer queue bounded to 16 KiB, about 60
 * queuefuls: the flow's and the unify stage's fetchers stop at every full
 * queue and must start again by themselves (librdkafka looks again after
 * fetch.queue.backoff.ms; aagw no longer wakes them).  Everything arrives,
 * once.  The time it took is printed (on the embedded cluster 4 s with
 * aagw's 10 ms pause and with librdkafka's default of a second alike:
 * what that setting is worth shows on real brokers, docs/benchmarks.md). */
static void test_backlog_small_queue(void **state) {
        struct fx         *f = *state;
        const int          n = 20000;
        struct backlog_arg w = {.f = f, .want = n};
        /* fetch.wait.max.ms back at librdkafka's 500: with aagw's 10, a
         * broker with one partition still fetching re-checks its parked
         * ones itself every 10 ms, and the pause would never show. */
        const char *const extra[] = {
            "--unify", "dedup",
            "--set", "clusters.east.properties.consumer.queued.max.messages."
                     "kbytes=16",
            "--set", "clusters.east.properties.consumer.fetch.wait.max.ms=500",
            NULL};

        produce(f, 0, n);
        int64_t t0 = harness_now_ms();
        start_gw(f, extra);
        if (!harness_wait_until(caught_up, &w, WAIT_MS))
                fail_msg("backlog not through in %d ms: east->west out %lld, "
                         "unified at east %lld, of %lld",
                         WAIT_MS, w.out, w.unify_out, w.want);
        print_message("# %d records behind a 16 KiB queue: through in %lld "
                      "ms (start included)\n",
                      n, (long long)(harness_now_ms() - t0));
        /* Nothing twice: the counters stay put once caught up. */
        struct http h;
        http(f, "GET", "/metrics", NULL, &h);
        assert_int_equal(metric(h.body, "aagw_replication_records_in_total{"
                                        "flow=\"east->west\"}"),
                         w.want);
        assert_int_equal(metric(h.body, "aagw_unify_records_total{site=\""
                                        "east\",outcome=\"accepted\"}"),
                         w.want);
        http_deinit(&h);
}

/* ----------------------------------------- HEARTBEATS UNDER A FILTER --- */

/* One scrape of both directions' heartbeat figures.  A heartbeat copy
 * acknowledged at time T shows as age = now - T, so "now - age" (on the
 * test's clock, taken before the scrape, so never later than the
 * gateway's now) is when the newest acknowledged copy got there, to
 * within the scrape's duration. */
struct hb_scrape {
        long long age[2], latency[2], written[2]; /* east->west, west->east */
        int64_t   acked[2];                       /* test clock; -1: none */
};

static const char *const hb_flows[2] = {"east->west", "west->east"};

static void hb_scrape(struct fx *f, struct hb_scrape *s) {
        struct http h;
        char        series[128];
        int64_t     before = harness_now_ms();

        http(f, "GET", "/metrics", NULL, &h);
        assert_int_equal(h.code, 200);
        for (int i = 0; i < 2; i++) {
                snprintf(series, sizeof(series),
                         "aagw_heartbeat_age_ms{flow=\"%s\"}", hb_flows[i]);
                s->age[i] = metric(h.body, series);
                snprintf(series, sizeof(series),
                         "aagw_heartbeat_latency_ms{flow=\"%s\"}", hb_flows[i]);
                s->latency[i] = metric(h.body, series);
                snprintf(series, sizeof(series),
                         "aagw_mm2_heartbeats_total{flow=\"%s\"}", hb_flows[i]);
                s->written[i] = metric(h.body, series);
                s->acked[i]   = s->age[i] >= 0 ? before - s->age[i] : -1;
        }
        http_deinit(&h);
}

struct hb_arg {
        struct fx       *f;
        struct hb_scrape now;
        int64_t          since[2]; /* a copy acknowledged after this */
        int              fresh[2]; /* scrapes that saw one, per flow */
        long long        max_age[2];
        int              paused;   /* flow index held paused, or -1 */
        long long        stale_ms; /* the paused flow's age must pass it */
};

/* How long a heartbeat copy may take to be acknowledged and seen while
 * both sites run: ten heartbeat intervals, for a loaded 2-core machine
 * under ASan; an unhealthy direction stays above it for good. */
#define HB_FRESH_MS 10000

/* Both directions keep acknowledging copies: true once each flow showed
 * a first copy and then three newer ones (a new heartbeat each time);
 * every scrape's age is recorded for the bound. */
static bool hb_keep_crossing(void *arg) {
        struct hb_arg *a = arg;

        hb_scrape(a->f, &a->now);
        for (int i = 0; i < 2; i++) {
                if (a->now.age[i] > a->max_age[i])
                        a->max_age[i] = a->now.age[i];
                /* 500 ms apart: a new heartbeat, not scrape jitter */
                if (a->now.acked[i] > a->since[i] + 500) {
                        a->since[i] = a->now.acked[i];
                        a->fresh[i]++;
                }
        }
        return a->fresh[0] >= 4 && a->fresh[1] >= 4;
}

/* The paused flow's age passed stale_ms while the other flow acknowledged
 * a copy after the pause. */
static bool hb_paused_stale(void *arg) {
        struct hb_arg *a = arg;
        int            p = a->paused, o = 1 - a->paused;

        hb_scrape(a->f, &a->now);
        if (a->now.age[o] > a->max_age[o])
                a->max_age[o] = a->now.age[o];
        if (a->now.acked[o] > a->since[o])
                a->fresh[o]++;
        return a->now.age[p] > a->stale_ms && a->fresh[o] > 0;
}

/* The flow index @c paused acknowledged a copy after since[paused]. */
static bool hb_resumed(void *arg) {
        struct hb_arg *a = arg;

        hb_scrape(a->f, &a->now);
        return a->now.acked[a->paused] > a->since[a->paused];
}

/* With replication.topics naming only the test's clicks
 * topic, the heartbeats topic is still replicated in both directions
 * (as in MirrorMaker 2), so each flow's heartbeat age is known (not -1)
 * and stays small while both sites run: new copies keep being
 * acknowledged.  A paused direction's age grows past several heartbeat
 * intervals while the other stays fresh, and drops again on resume.
 * /status (JSON and text) says the same as /metrics. */
static void test_heartbeats_under_topic_filter(void **state) {
        struct fx  *f = *state;
        char        filter[200];
        struct http h;
        struct hb_arg a = {.f = f, .paused = -1};

        /* The heartbeats topics and their copies, as MM2 makes them (on
         * real clusters they may exist already: not an error). */
        create_both_ways(f, "heartbeats", 1);
        snprintf(filter, sizeof(filter), "replication.topics=%s", f->clicks);
        const char *const extra[] = {"--set", "mm2.heartbeats_interval=1s",
                                     "--set", filter, NULL};
        start_gw(f, extra);

        /* Known in both directions, and kept fresh. */
        a.since[0] = a.since[1] = -1;
        if (!harness_wait_until(hb_keep_crossing, &a, WAIT_MS))
                fail_msg("heartbeat copies acknowledged: east->west %d, "
                         "west->east %d (ages %lld, %lld; written %lld, "
                         "%lld)",
                         a.fresh[0], a.fresh[1], a.now.age[0], a.now.age[1],
                         a.now.written[0], a.now.written[1]);
        for (int i = 0; i < 2; i++) {
                if (a.max_age[i] > HB_FRESH_MS)
                        fail_msg("%s: heartbeat age reached %lld ms while "
                                 "both sites ran",
                                 hb_flows[i], a.max_age[i]);
                assert_true(a.now.written[i] >= 3);
                assert_true(a.now.latency[i] >= 0 &&
                            a.now.latency[i] <= HB_FRESH_MS);
        }
        /* The filter is in force: only clicks and the heartbeats. */
        http(f, "GET", "/status", NULL, &h);
        assert_int_equal(h.code, 200);
        {
                json_object *j = json_tokener_parse(h.body), *flows;
                assert_non_null(j);
                assert_true(json_object_object_get_ex(j, "flows", &flows));
                assert_int_equal(json_object_array_length(flows), 2);
                for (size_t i = 0; i < 2; i++) {
                        json_object *fl = json_object_array_get_idx(flows, i),
                                    *v;
                        assert_true(json_object_object_get_ex(fl, "topics",
                                                              &v));
                        assert_int_equal(json_object_get_int(v), 2);
                        assert_true(json_object_object_get_ex(
                            fl, "heartbeat_age_ms", &v));
                        assert_true(json_object_is_type(v, json_type_int));
                        assert_true(json_object_get_int64(v) >= 0 &&
                                    json_object_get_int64(v) <= HB_FRESH_MS);
                        assert_true(json_object_object_get_ex(
                            fl, "heartbeat_latency_ms", &v));
                        assert_true(json_object_is_type(v, json_type_int));
                }
                json_object_put(j);
        }
        http_deinit(&h);
        http(f, "GET", "/status?format=text", NULL, &h);
        assert_int_equal(h.code, 200);
        assert_non_null(strstr(h.body, "\nheartbeat_age_ms:"));
        assert_null(strstr(h.body, "\nheartbeat_age_ms:-1\n"));
        assert_null(strstr(h.body, "\nheartbeat_latency_ms:-1\n"));
        http_deinit(&h);

        /* Pause east->west: its age grows past three intervals while
         * west->east still acknowledges copies. */
        http(f, "POST", "/flows/east-west/pause", NULL, &h);
        assert_int_equal(h.code, 202);
        http_deinit(&h);
        assert_true(harness_wait_until(flow_paused, f, WAIT_MS));
        a.paused     = 0;
        a.stale_ms   = 3000;
        a.since[1]   = harness_now_ms();
        a.fresh[1]   = 0;
        a.max_age[1] = 0;
        if (!harness_wait_until(hb_paused_stale, &a, WAIT_MS))
                fail_msg("paused east->west: heartbeat age %lld; west->east "
                         "copies since the pause %d",
                         a.now.age[0], a.fresh[1]);
        if (a.max_age[1] > HB_FRESH_MS)
                fail_msg("west->east: heartbeat age reached %lld ms while "
                         "east->west was paused",
                         a.max_age[1]);
        /* ... and keeps growing: no copy is acknowledged while paused (a
         * new one would show as acknowledged over 3 s later; the two
         * estimates of the same one differ by a scrape's duration) */
        long long stale = a.now.age[0];
        int64_t   last  = a.now.acked[0];
        hb_scrape(f, &a.now);
        assert_true(a.now.age[0] >= stale);
        assert_true(a.now.acked[0] <= last + 1000);

        /* Resume: a copy acknowledged after the resume. */
        a.since[0] = harness_now_ms();
        http(f, "POST", "/flows/east-west/resume", NULL, &h);
        assert_int_equal(h.code, 202);
        http_deinit(&h);
        if (!harness_wait_until(hb_resumed, &a, WAIT_MS))
                fail_msg("resumed east->west: heartbeat age still %lld",
                         a.now.age[0]);
}

/* ------------------------------------------------ THE PAGE IN CHROMIUM --- */

static const char *chromium_bin(void) {
        const char *c = getenv("CHROMIUM");
        return c && *c ? c : "/usr/bin/chromium";
}

/* Load http://ADDR/SUFFIX in headless Chromium and return the DOM after
 * the page ran for 'budget_ms' of virtual time (network waits do not
 * count, so every poll's /status answer has arrived). */
static char *render(struct fx *f, const char *suffix, int budget_ms) {
        char             url[512], budget[64], udd[4200];
        harness_output_t o;
        static int       runs;

        snprintf(url, sizeof(url), "http://%s/%s", f->addr, suffix);
        snprintf(budget, sizeof(budget), "--virtual-time-budget=%d",
                 budget_ms);
        /* A fresh profile each time: no cache, no stored token. */
        snprintf(udd, sizeof(udd), "--user-data-dir=%s/chromium-%d", f->dir,
                 runs++);
        /* --no-sandbox: tests may run as root, where Chromium's sandbox
         * refuses to start; the page is our own, on loopback.  The
         * background-networking flags keep it off the (closed) network. */
        const char *argv[] = {chromium_bin(), "--headless", "--no-sandbox",
                              "--disable-gpu", "--disable-quic",
                              "--no-first-run", "--disable-background-networking",
                              "--disable-component-update", "--disable-sync",
                              "--disable-dev-shm-usage", udd, budget,
                              "--dump-dom", url, NULL};
        assert_int_equal(harness_run(argv, NULL, 0, 45000, &o, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        if (harness_exit_code(o.status) != 0 || !strstr(o.out, "</html>"))
                fail_msg("chromium exited %d:\n%s", harness_exit_code(o.status),
                         o.err);
        char *dom = o.out;
        o.out     = NULL;
        harness_output_deinit(&o);
        return dom;
}

/* The number in <td data-flow="FLOW" data-field="FIELD">N, or -1. */
static long long dom_field(const char *dom, const char *flow,
                           const char *field) {
        char        pat[256];
        const char *p;

        /* The serializer writes '>' in attribute values as &gt;. */
        snprintf(pat, sizeof(pat), "data-flow=\"%s\" data-field=\"%s\">",
                 flow, field);
        if (!(p = strstr(dom, pat)))
                return -1;
        return atoll(p + strlen(pat));
}

static long long dom_samples(const char *dom) {
        const char *p = strstr(dom, "<body data-samples=\"");
        return p ? atoll(p + 20) : -1;
}

/* What the page must show for a gateway replicating east <-> west. */
static void assert_page_shows(const char *dom, long long east_west_out) {
        assert_non_null(strstr(dom, "<g class=\"site\" data-site=\"east\">"));
        assert_non_null(strstr(dom, "<g class=\"site\" data-site=\"west\">"));
        assert_non_null(strstr(dom, ">east</text>"));
        assert_non_null(strstr(dom, ">west</text>"));
        assert_non_null(strstr(dom, "data-flow=\"east-&gt;west\" "
                                    "data-state=\"running\""));
        assert_non_null(strstr(dom, "data-flow=\"west-&gt;east\" "
                                    "data-state=\"running\""));
        assert_int_equal(dom_field(dom, "east-&gt;west", "records_out"),
                         east_west_out);
        assert_int_equal(dom_field(dom, "east-&gt;west", "records_in"),
                         east_west_out);
        assert_int_equal(dom_field(dom, "west-&gt;east", "records_out"), 0);
        assert_non_null(strstr(dom, "id=\"conn\" class=\"ok\">live<"));
}

static bool have_chromium(void) {
        return access(chromium_bin(), X_OK) == 0;
}

static void test_page_in_chromium(void **state) {
        struct fx *f = *state;

        if (!have_chromium()) {
                fprintf(stderr, "# %s not found: install Debian's chromium "
                                "(scripts/setup does)\n",
                        chromium_bin());
                skip();
        }
        start_gw(f, NULL);
        produce(f, 0, 300);
        struct out_arg a1 = {f, 300};
        assert_true(harness_wait_until(out_reached, &a1, WAIT_MS));

        /* First render: 3 s of page time is three polls of /status. */
        char *dom1 = render(f, "", 3000);
        assert_page_shows(dom1, 300);
        assert_true(dom_samples(dom1) >= 2);
        /* Each flow's lag sparkline holds one point per poll. */
        assert_non_null(strstr(dom1, "data-points=\""));
        {
                const char *p = strstr(dom1, "class=\"spark lag\"");
                assert_non_null(p);
                p = strstr(p, "data-points=\"");
                assert_non_null(p);
                assert_int_equal(atoll(p + 13), dom_samples(dom1));
        }

        /* More records flow; the second render shows the higher count. */
        produce(f, 300, 450);
        struct out_arg a2 = {f, 750};
        assert_true(harness_wait_until(out_reached, &a2, WAIT_MS));
        char *dom2 = render(f, "", 2000);
        assert_page_shows(dom2, 750);
        assert_true(dom_field(dom2, "east-&gt;west", "records_out") >
                    dom_field(dom1, "east-&gt;west", "records_out"));

        /* A failed flow is drawn as failed: not testable without breaking
         * a flow; a paused one is. */
        struct http h;
        http(f, "POST", "/flows/east-west/pause", NULL, &h);
        assert_int_equal(h.code, 202);
        http_deinit(&h);
        char *dom3 = render(f, "", 1500);
        assert_non_null(strstr(dom3, "data-flow=\"east-&gt;west\" "
                                     "data-state=\"paused\""));
        free(dom1);
        free(dom2);
        free(dom3);
}

/* With a token: the page still loads, takes the token from the fragment
 * and draws the data; without it, it asks for the token and shows none. */
static void test_page_with_token(void **state) {
        struct fx        *f       = *state;
        static const char token[] = "page-token-0123456789";
        const char       *extra[] = {"--set", "admin.token=page-token-0123456789",
                                     NULL};

        if (!have_chromium())
                skip();
        start_gw(f, extra);
        f->token = token;
        produce(f, 0, 120);
        struct out_arg a = {f, 120};
        assert_true(harness_wait_until(out_reached, &a, WAIT_MS));

        char *dom = render(f, "#token=page-token-0123456789", 2000);
        assert_page_shows(dom, 120);
        free(dom);

        dom = render(f, "", 1500);
        assert_non_null(strstr(dom, "id=\"conn\" class=\"bad\">token needed<"));
        assert_non_null(strstr(dom, "<section id=\"auth\" style=\"display: "
                                    "block;\">"));
        assert_int_equal(dom_field(dom, "east-&gt;west", "records_out"), -1);
        assert_null(strstr(dom, "data-site=\"east\""));
        free(dom);

        /* A wrong token gets no data either. */
        dom = render(f, "#token=wrong-token-0123456789", 1500);
        assert_non_null(strstr(dom, ">token needed<"));
        assert_int_equal(dom_field(dom, "east-&gt;west", "records_out"), -1);
        free(dom);
}

/* ------------------------------------------------ IDLE CONNECTIONS --- */

/* A TCP connection to the endpoint (f->addr is 127.0.0.1:PORT). */
static int tcp_connect(struct fx *f) {
        struct sockaddr_in sa;
        const char        *colon = strrchr(f->addr, ':');
        int                fd    = socket(AF_INET, SOCK_STREAM, 0);

        assert_true(fd >= 0);
        assert_non_null(colon);
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port   = htons((uint16_t)atoi(colon + 1));
        assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

/* GET /healthz answers 200 "ok" within 3 s. */
static void healthz_answers(struct fx *f, int open_cnt) {
        struct http h;
        int64_t     t0 = harness_now_ms();

        http(f, "GET", "/healthz", NULL, &h);
        assert_int_equal(h.code, 200);
        assert_string_equal(h.body, "ok\n");
        http_deinit(&h);
        int64_t took = harness_now_ms() - t0;
        if (took > 3000)
                fail_msg("/healthz took %lld ms behind %d idle connections",
                         (long long)took, open_cnt);
}

/* Connections that send a whole request head but only the start of the
 * body it announces (280, more than the 256-connection limit), then 100
 * that never send anything and 20 that send half a head, cannot keep a
 * real request out: /healthz answers at once (bounded: 3 s), again and
 * again, while they are all still open.  The body senders go in batches
 * of 20, each followed by a /healthz: answering it, the endpoint's one
 * thread has also read the heads sent before it. */
static void test_idle_connections_do_not_starve(void **state) {
        enum { HALF_BODY = 280, SILENT = 100, HALF_HEAD = 20,
               ALL = HALF_BODY + SILENT + HALF_HEAD };
        static const char body[] =
            "POST /flows/east-west/pause HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nx";
        static const char half[] = "GET /healthz HTTP/1.1\r\n"
                                   "Host: 127.0.0.1\r\n";
        struct fx *f = *state;
        int        fds[ALL], n = 0;

        start_gw(f, NULL);
        while (n < HALF_BODY) {
                for (int i = 0; i < 20; i++, n++) {
                        fds[n] = tcp_connect(f);
                        assert_int_equal(write(fds[n], body, sizeof(body) - 1),
                                         (ssize_t)(sizeof(body) - 1));
                }
                healthz_answers(f, n);
        }
        for (; n < HALF_BODY + SILENT; n++)
                fds[n] = tcp_connect(f);
        for (; n < ALL; n++) {
                fds[n] = tcp_connect(f);
                assert_int_equal(write(fds[n], half, sizeof(half) - 1),
                                 (ssize_t)(sizeof(half) - 1));
        }
        for (int round = 0; round < 3; round++)
                healthz_answers(f, n);
        for (int i = 0; i < ALL; i++)
                close(fds[i]);
}

/* ---------------------------------------------------------------- TLS --- */

/* A CA, a server certificate for IP 127.0.0.1 (its key also encrypted),
 * a client certificate, and a second CA with a client of its own: made
 * with openssl once per run (group setup), in their own temp dir. */
static char *pki;

#define KEY_PW "test-key-pass-0123"

static const char pki_cnf[] = "[req]\n"
                              "distinguished_name = dn\n"
                              "prompt = no\n"
                              "[dn]\n"
                              "CN = aagw test\n"
                              "[ca]\n"
                              "basicConstraints = critical, CA:TRUE\n"
                              "keyUsage = critical, keyCertSign, cRLSign\n"
                              "[server]\n"
                              "subjectAltName = IP:127.0.0.1\n"
                              "extendedKeyUsage = serverAuth\n"
                              "[client]\n"
                              "extendedKeyUsage = clientAuth\n";

/* `openssl ARGS...` in the pki dir; it must succeed. */
static void openssl(const char *first, ...) {
        const char      *argv[40];
        int              n = 0;
        va_list          ap;
        harness_output_t o;
        char             errstr[512];

        argv[n++] = "openssl";
        va_start(ap, first);
        for (const char *a = first; a && n < 39; a = va_arg(ap, const char *))
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        assert_int_equal(
            harness_run(argv, NULL, 0, 30000, &o, errstr, sizeof(errstr)),
            AAGW_OK);
        if (harness_exit_code(o.status) != 0)
                fail_msg("openssl %s: exit %d\n%s", first,
                         harness_exit_code(o.status), o.err);
        harness_output_deinit(&o);
}

/* The path of 'name' in the pki dir, in one of 32 static buffers used in
 * turn: enough for the argument lists of one test. */
static const char *pem(const char *name) {
        static char bufs[32][1024];
        static int  next;
        char       *b = bufs[next++ % 32];
        snprintf(b, sizeof(bufs[0]), "%s/%s", pki, name);
        return b;
}

/* A key pair 'name'.key and a certificate 'name'.pem with extensions
 * 'ext' of pki.cnf, signed by CA 'ca' (its base name; NULL: self-signed,
 * a CA). */
static void make_cert(const char *name, const char *cn, const char *ca,
                      const char *ext) {
        static int serial = 1;
        char       key[4200], crt[4200], csr[4200], subj[300];
        char       cakey[4200], cacrt[4200], ser[16];

        snprintf(key, sizeof(key), "%s/%s.key", pki, name);
        snprintf(crt, sizeof(crt), "%s/%s.pem", pki, name);
        snprintf(csr, sizeof(csr), "%s/%s.csr", pki, name);
        snprintf(subj, sizeof(subj), "/CN=%s", cn);
        if (!ca) {
                openssl("req", "-x509", "-config", pem("pki.cnf"),
                        "-extensions", ext, "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-noenc", "-keyout",
                        key, "-out", crt, "-days", "2", "-subj", subj, NULL);
                return;
        }
        snprintf(ser, sizeof(ser), "%d", ++serial);
        snprintf(cakey, sizeof(cakey), "%s/%s.key", pki, ca);
        snprintf(cacrt, sizeof(cacrt), "%s/%s.pem", pki, ca);
        openssl("req", "-new", "-config", pem("pki.cnf"), "-newkey", "ec",
                "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc", "-keyout",
                key, "-out", csr, "-subj", subj, NULL);
        openssl("x509", "-req", "-in", csr, "-CA", cacrt, "-CAkey", cakey,
                "-set_serial", ser, "-days", "2", "-extfile", pem("pki.cnf"),
                "-extensions", ext, "-out", crt, NULL);
}

/* Append file 'from' of the pki dir to 'to'. */
static void append(const char *to, const char *from) {
        char *text = harness_read_file(pem(from), NULL);
        FILE *f    = fopen(pem(to), "a");
        assert_non_null(text);
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        free(text);
}

static int group_setup(void **state) {
        FILE *f;
        char  cnf[4200];
        (void)state;

        pki = harness_tmpdir_new("admin-pki");
        snprintf(cnf, sizeof(cnf), "%s/pki.cnf", pki);
        if (!(f = fopen(cnf, "w")))
                return -1;
        fputs(pki_cnf, f);
        fclose(f);
        make_cert("ca", "aagw test CA", NULL, "ca");
        make_cert("server", "127.0.0.1", "ca", "server");
        make_cert("client", "aagw test client", "ca", "client");
        make_cert("other-ca", "another CA", NULL, "ca");
        make_cert("other-client", "a client of another CA", "other-ca",
                  "client");
        /* A server certificate from an intermediate CA, which the
         * certificate file carries after it: clients know the root. */
        make_cert("inter", "aagw test intermediate CA", "ca", "ca");
        make_cert("server-inter", "127.0.0.1", "inter", "server");
        append("server-chain.pem", "server-inter.pem");
        append("server-chain.pem", "inter.pem");
        openssl("pkey", "-in", pem("server.key"), "-aes256", "-passout",
                "pass:" KEY_PW, "-out", pem("server-enc.key"), NULL);
        return 0;
}

static int group_teardown(void **state) {
        (void)state;
        if (pki)
                harness_rmtree(pki);
        free(pki);
        return 0;
}

/* curl -s -i OPTS... [-H auth] URL: curl's exit code; when 0, 'h' holds
 * the answer.  http_deinit() 'h' either way. */
static int curl_rc(struct fx *f, const char *const *opts, const char *url,
                   const char *token, struct http *h) {
        const char *argv[24];
        char        auth[512];
        int         n = 0, rc;

        memset(h, 0, sizeof(*h));
        argv[n++] = "curl";
        argv[n++] = "-s";
        argv[n++] = "-i";
        for (size_t i = 0; opts && opts[i]; i++)
                argv[n++] = opts[i];
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
        rc = harness_exit_code(h->o.status);
        if (rc == 0)
                http_parse(h);
        return rc;
}

/* curl got no HTTP answer at all: refused before any request. */
static void assert_refused(struct fx *f, const char *const *opts,
                           const char *url, const char *token) {
        struct http h;
        int         rc = curl_rc(f, opts, url, token, &h);
        if (rc == 0 || strstr(h.o.out, "HTTP/"))
                fail_msg("%s: curl exit %d, answer:\n%s", url, rc, h.o.out);
        http_deinit(&h);
}

/* `aagw status ARGS... NULL`: its exit code; its output in 'o'. */
static int status_rc(struct fx *f, harness_output_t *o, ...) {
        const char *argv[24];
        int         n = 0;
        va_list     ap;

        argv[n++] = harness_aagw_bin();
        argv[n++] = "status";
        va_start(ap, o);
        for (const char *a; n < 23 && (a = va_arg(ap, const char *));)
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        assert_int_equal(
            harness_run(argv, NULL, 0, 20000, o, f->errstr, sizeof(f->errstr)),
            AAGW_OK);
        return harness_exit_code(o->status);
}

/* Stop the gateway (SIGTERM, exit 0) and return its log (free() it). */
static char *stop_gw(struct fx *f) {
        int st;
        assert_int_equal(harness_proc_signal(f->gw, SIGTERM), 0);
        assert_int_equal(harness_proc_wait(f->gw, 15000, &st), AAGW_OK);
        assert_int_equal(harness_exit_code(st), 0);
        char *log = harness_read_file(f->log, NULL);
        assert_non_null(log);
        return log;
}

#define TLS_TOKEN "tls-token-0123456789"

/* HTTPS with a server certificate (its key encrypted): curl and `aagw
 * status` get answers when they trust the CA, and nothing when they do
 * not; plain HTTP gets nothing; the token still applies. */
static void test_tls(void **state) {
        struct fx       *f          = *state;
        const char      *extra[]    = {"--admin-cert",
                                       pem("server.pem"),
                                       "--admin-key",
                                       pem("server-enc.key"),
                                       "--set",
                                       "admin.tls.key_password=" KEY_PW,
                                       "--set",
                                       "admin.token=" TLS_TOKEN,
                                       NULL};
        const char      *ca[]       = {"--cacert", pem("ca.pem"), NULL};
        const char      *other[]    = {"--cacert", pem("other-ca.pem"), NULL};
        const char      *insecure[] = {"--insecure", NULL};
        char             url[600], hostport[128], https[160];
        struct http      h;
        harness_output_t o;

        start_gw(f, extra);
        /* admin.addr names the endpoint with its scheme. */
        assert_true(!strncmp(f->addr, "https://", 8));
        snprintf(https, sizeof(https), "%s", f->addr);
        snprintf(hostport, sizeof(hostport), "%s", f->addr + 8);

        snprintf(url, sizeof(url), "%s/healthz", https);
        assert_int_equal(curl_rc(f, ca, url, TLS_TOKEN, &h), 0);
        assert_int_equal(h.code, 200);
        assert_string_equal(h.body, "ok\n");
        http_deinit(&h);
        /* The bearer token still applies over TLS. */
        snprintf(url, sizeof(url), "%s/metrics", https);
        assert_int_equal(curl_rc(f, ca, url, NULL, &h), 0);
        assert_int_equal(h.code, 401);
        http_deinit(&h);
        assert_int_equal(curl_rc(f, ca, url, TLS_TOKEN, &h), 0);
        assert_int_equal(h.code, 200);
        assert_true(metric(h.body, "aagw_flow_up{flow=\"east->west\"}") == 1);
        http_deinit(&h);
        /* Plain HTTP to the TLS port: no HTTP answer. */
        snprintf(url, sizeof(url), "http://%s/healthz", hostport);
        assert_refused(f, NULL, url, TLS_TOKEN);
        /* A client trusting another CA refuses the certificate (curl's
         * 60: "peer certificate cannot be authenticated"). */
        snprintf(url, sizeof(url), "%s/healthz", https);
        assert_int_equal(curl_rc(f, other, url, TLS_TOKEN, &h), 60);
        http_deinit(&h);
        /* Without verification, as a Kubernetes httpGet probe with
         * scheme HTTPS connects, it answers. */
        assert_int_equal(curl_rc(f, insecure, url, TLS_TOKEN, &h), 0);
        assert_int_equal(h.code, 200);
        http_deinit(&h);

        /* `aagw status`: https:// from the state dir, the CA from
         * --cacert. */
        assert_int_equal(status_rc(f, &o, "--state-dir", f->state, "--cacert",
                                   pem("ca.pem"), "--token", TLS_TOKEN, NULL),
                         0);
        assert_non_null(strstr(o.out, "# Flow east->west\nstate:"));
        harness_output_deinit(&o);
        assert_int_equal(status_rc(f, &o, "--admin", https, "--cacert",
                                   pem("ca.pem"), "--token", TLS_TOKEN,
                                   "--json", NULL),
                         0);
        assert_non_null(strstr(o.out, "\"name\":\"east->west\""));
        harness_output_deinit(&o);
        /* The certificate names IP 127.0.0.1 only: asked for as
         * localhost (the same address), it is refused. */
        {
                char lh[160];
                snprintf(lh, sizeof(lh), "https://localhost:%s",
                         strrchr(hostport, ':') + 1);
                assert_int_equal(status_rc(f, &o, "--admin", lh, "--cacert",
                                           pem("ca.pem"), "--token", TLS_TOKEN,
                                           NULL),
                                 1);
                assert_non_null(strstr(o.err, "The name in the certificate "
                                              "does not match"));
                harness_output_deinit(&o);
        }
        /* The system's CAs do not know the test CA; nor does another. */
        assert_int_equal(status_rc(f, &o, "--state-dir", f->state, "--token",
                                   TLS_TOKEN, NULL),
                         1);
        assert_non_null(strstr(o.err, "certificate is not trusted"));
        assert_string_equal(o.out, "");
        harness_output_deinit(&o);
        assert_int_equal(status_rc(f, &o, "--admin", https, "--cacert",
                                   pem("other-ca.pem"), "--token", TLS_TOKEN,
                                   NULL),
                         1);
        assert_non_null(strstr(o.err, "certificate is not trusted"));
        harness_output_deinit(&o);
        /* Plain HTTP to it: no answer, and the hint. */
        assert_int_equal(
            status_rc(f, &o, "--admin", hostport, "--token", TLS_TOKEN, NULL),
            1);
        assert_non_null(strstr(o.err, "not an HTTP answer (if the endpoint "
                                      "uses TLS: --admin https://"));
        harness_output_deinit(&o);
        /* TLS options for a plain address are a usage error. */
        assert_int_equal(status_rc(f, &o, "--admin", hostport, "--cacert",
                                   pem("ca.pem"), NULL),
                         2);
        harness_output_deinit(&o);

        char *log = stop_gw(f);
        assert_non_null(strstr(log, "admin endpoint at https://"));
        assert_null(strstr(log, KEY_PW));
        assert_null(strstr(log, TLS_TOKEN));
        free(log);
}

/* With admin.tls.client_ca only clients with a certificate from that CA
 * get past the handshake; the token applies on top.  The plain health
 * listener answers /healthz and /metrics, nothing else, without either.
 * The server's certificate is an intermediate CA's, the chain in its
 * file; clients trust the root only. */
static void test_tls_client_certs(void **state) {
        struct fx  *f         = *state;
        const char *extra[]   = {"--admin-cert",
                                 pem("server-chain.pem"),
                                 "--admin-key",
                                 pem("server-inter.key"),
                                 "--admin-client-ca",
                                 pem("ca.pem"),
                                 "--set",
                                 "admin.token=" TLS_TOKEN,
                                 "--admin-health",
                                 "127.0.0.1:0",
                                 NULL};
        const char *no_cert[] = {"--cacert", pem("ca.pem"), NULL};
        const char *cert[]    = {
               "--cacert", pem("ca.pem"),     "--cert", pem("client.pem"),
               "--key",    pem("client.key"), NULL};
        const char      *other[] = {"--cacert", pem("ca.pem"),
                                    "--cert",   pem("other-client.pem"),
                                    "--key",    pem("other-client.key"),
                                    NULL};
        char             url[600], health[160];
        struct http      h;
        harness_output_t o;

        start_gw(f, extra);
        assert_true(!strncmp(f->addr, "https://", 8));
        snprintf(url, sizeof(url), "%s/healthz", f->addr);

        assert_refused(f, no_cert, url, TLS_TOKEN);
        assert_refused(f, other, url, TLS_TOKEN);
        assert_int_equal(curl_rc(f, cert, url, TLS_TOKEN, &h), 0);
        assert_int_equal(h.code, 200);
        assert_string_equal(h.body, "ok\n");
        http_deinit(&h);
        /* A certificate does not replace the token. */
        assert_int_equal(curl_rc(f, cert, url, NULL, &h), 0);
        assert_int_equal(h.code, 401);
        http_deinit(&h);

        assert_int_equal(status_rc(f, &o, "--state-dir", f->state, "--cacert",
                                   pem("ca.pem"), "--cert", pem("client.pem"),
                                   "--key", pem("client.key"), "--token",
                                   TLS_TOKEN, NULL),
                         0);
        assert_non_null(strstr(o.out, "# Flow east->west\nstate:"));
        harness_output_deinit(&o);
        assert_int_equal(status_rc(f, &o, "--state-dir", f->state, "--cacert",
                                   pem("ca.pem"), "--token", TLS_TOKEN, NULL),
                         1);
        assert_non_null(strstr(o.err, "client certificate"));
        harness_output_deinit(&o);
        assert_int_equal(
            status_rc(f, &o, "--state-dir", f->state, "--cacert", pem("ca.pem"),
                      "--cert", pem("other-client.pem"), "--key",
                      pem("other-client.key"), "--token", TLS_TOKEN, NULL),
            1);
        assert_non_null(strstr(o.err, "admin.tls.client_ca"));
        harness_output_deinit(&o);

        /* The health listener; its address is logged before admin.addr
         * is written. */
        char *log = harness_read_file(f->log, NULL);
        assert_non_null(log);
        char *at = strstr(log, "health listener at http://");
        assert_non_null(at);
        at += strlen("health listener at ");
        snprintf(health, sizeof(health), "%.*s",
                 (int)(strchr(at + strlen("http://"), '/') - at), at);
        free(log);
        snprintf(url, sizeof(url), "%s/healthz", health);
        assert_int_equal(curl_rc(f, NULL, url, NULL, &h), 0);
        assert_int_equal(h.code, 200);
        assert_string_equal(h.body, "ok\n");
        http_deinit(&h);
        snprintf(url, sizeof(url), "%s/metrics", health);
        assert_int_equal(curl_rc(f, NULL, url, NULL, &h), 0);
        assert_int_equal(h.code, 200);
        assert_true(metric(h.body, "aagw_flow_up{flow=\"east->west\"}") == 1);
        http_deinit(&h);
        snprintf(url, sizeof(url), "%s/status", health);
        assert_int_equal(curl_rc(f, NULL, url, TLS_TOKEN, &h), 0);
        assert_int_equal(h.code, 404);
        http_deinit(&h);
        {
                const char *post[] = {"-X", "POST", NULL};
                snprintf(url, sizeof(url), "%s/flows/east-west/pause", health);
                assert_int_equal(curl_rc(f, post, url, TLS_TOKEN, &h), 0);
                assert_int_equal(h.code, 404);
                http_deinit(&h);
        }
        free(stop_gw(f));
}

/* A fixture without clusters: the refusals below come before any. */
static int setup_bare(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        f->scope = strdup("");
        f->dir   = harness_tmpdir_new("admin-cfg");
        f->state = harness_path_join(f->dir, "state");
        f->log   = harness_path_join(f->dir, "gw.log");
        *state   = f;
        return 0;
}

/* `aagw ARGS... NULL` with two unreachable clusters and the admin
 * endpoint on: exit 2, and stderr holds every string of 'want' (NULL-
 * terminated); nothing was started (no state dir). */
static void refused_with(struct fx *f, const char *const *args,
                         const char *const *want) {
        const char      *argv[32];
        int              n = 0;
        harness_output_t o;

        argv[n++] = harness_aagw_bin();
        argv[n++] = "--cluster";
        argv[n++] = "east=127.0.0.1:1";
        argv[n++] = "--cluster";
        argv[n++] = "west=127.0.0.1:2";
        argv[n++] = "--state-dir";
        argv[n++] = f->state;
        argv[n++] = "--admin";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--duration";
        argv[n++] = "1";
        for (size_t i = 0; args[i]; i++)
                argv[n++] = args[i];
        argv[n] = NULL;
        assert_int_equal(
            harness_run(argv, NULL, 0, 20000, &o, f->errstr, sizeof(f->errstr)),
            AAGW_OK);
        if (harness_exit_code(o.status) != 2)
                fail_msg("%s: exit %d, stderr:\n%s", args[0],
                         harness_exit_code(o.status), o.err);
        for (size_t i = 0; want[i]; i++)
                if (!strstr(o.err, want[i]))
                        fail_msg("no '%s' in stderr:\n%s", want[i], o.err);
        assert_null(strstr(o.err, KEY_PW));
        assert_int_equal(access(f->state, F_OK), -1);
        harness_output_deinit(&o);
}

static void test_tls_config_errors(void **state) {
        struct fx *f = *state;
        char       missing[4200], want[4300], want2[4300];

        /* One of cert and key: both named. */
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.pem"), NULL},
                     (const char *[]){"admin.tls.cert", "admin.tls.key", NULL});
        refused_with(
            f, (const char *[]){"--admin-key", pem("server.key"), NULL},
            (const char *[]){"admin.tls.cert and admin.tls.key", NULL});
        /* A key that cannot be read. */
        snprintf(missing, sizeof(missing), "%s/no-such.key", pki);
        snprintf(want, sizeof(want),
                 "admin.tls.key: %s: cannot read: No such "
                 "file or directory",
                 missing);
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.pem"),
                                      "--admin-key", missing, NULL},
                     (const char *[]){want, NULL});
        /* A key of another certificate. */
        snprintf(want, sizeof(want),
                 "admin.tls.key: %s does not match the "
                 "certificate in %s (admin.tls.cert)",
                 pem("client.key"), pem("server.pem"));
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.pem"),
                                      "--admin-key", pem("client.key"), NULL},
                     (const char *[]){want, NULL});
        /* Not PEM (the openssl config file), for each file key. */
        snprintf(want, sizeof(want), "admin.tls.cert: %s: not a PEM file",
                 pem("pki.cnf"));
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("pki.cnf"),
                                      "--admin-key", pem("server.key"), NULL},
                     (const char *[]){want, NULL});
        snprintf(want, sizeof(want), "admin.tls.client_ca: %s: not a PEM file",
                 pem("pki.cnf"));
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.pem"),
                                      "--admin-key", pem("server.key"),
                                      "--admin-client-ca", pem("pki.cnf"),
                                      NULL},
                     (const char *[]){want, NULL});
        /* Cert and key swapped. */
        snprintf(want, sizeof(want), "admin.tls.cert: %s: no PEM certificate",
                 pem("server.key"));
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.key"),
                                      "--admin-key", pem("server.pem"), NULL},
                     (const char *[]){want, "swapped", NULL});
        /* An encrypted key: without its password, with a wrong one; a
         * password for a key that is not encrypted. */
        snprintf(want, sizeof(want),
                 "admin.tls.key: %s: the key is "
                 "encrypted: set admin.tls.key_password",
                 pem("server-enc.key"));
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.pem"),
                                      "--admin-key", pem("server-enc.key"),
                                      NULL},
                     (const char *[]){want, NULL});
        snprintf(want, sizeof(want),
                 "admin.tls.key_password: does not "
                 "decrypt %s",
                 pem("server-enc.key"));
        refused_with(
            f,
            (const char *[]){"--admin-cert", pem("server.pem"), "--admin-key",
                             pem("server-enc.key"), "--set",
                             "admin.tls.key_password=wrong-pw-1", NULL},
            (const char *[]){want, NULL});
        snprintf(want2, sizeof(want2),
                 "admin.tls.key_password: set, but %s "
                 "(admin.tls.key) is not encrypted",
                 pem("server.key"));
        refused_with(f,
                     (const char *[]){"--admin-cert", pem("server.pem"),
                                      "--admin-key", pem("server.key"), "--set",
                                      "admin.tls.key_password=" KEY_PW, NULL},
                     (const char *[]){want2, NULL});
        /* Client certificates without TLS; a health listener that is
         * not on loopback. */
        refused_with(f,
                     (const char *[]){"--admin-client-ca", pem("ca.pem"), NULL},
                     (const char *[]){"admin.tls.client_ca: client "
                                      "certificates need TLS",
                                      NULL});
        refused_with(f, (const char *[]){"--admin-health", "0.0.0.0:0", NULL},
                     (const char *[]){"admin.health_listen: must be a "
                                      "loopback address",
                                      NULL});
}

int main(void) {
        const struct CMUnitTest tests[] =
        { cmocka_unit_test_setup_teardown(test_endpoints, setup, teardown),
          cmocka_unit_test_setup_teardown(test_token, setup, teardown),
          cmocka_unit_test_setup_teardown(test_methods_and_types, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_non_loopback_needs_token, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_metric_names_documented, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_counters_move_under_load, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_backlog_small_queue, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_heartbeats_under_topic_filter,
                                          setup, teardown),
          cmocka_unit_test_setup_teardown(test_page_in_chromium, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_page_with_token, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_idle_connections_do_not_starve,
                                          setup, teardown),
          cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
          cmocka_unit_test_setup_teardown(test_tls_client_certs, setup,
                                          teardown),
          cmocka_unit_test_setup_teardown(test_tls_config_errors, setup_bare,
                                          teardown),
        };
        return cmocka_run_group_tests_name("admin", tests, group_setup,
                                           group_teardown);
}
