/*
 * tests/e2e/test_restart.c: what a restart keeps and what it says.
 *
 * A gateway replicates between two embedded clusters (in this process),
 * is stopped and started again on the same clusters:
 *   - a flow paused through the admin endpoint stays paused across the
 *     restart (nothing is copied while it is), and copies everything
 *     once resumed;
 *   - with the state dir deleted in between, the restart rebuilds the
 *     state from what the targets hold, writes nothing twice, and says
 *     so with a warning, for the flows and for the unify stages.
 * Copies are counted by reading the target topics with kcat, not from
 * aagw's counters.  Embedded clusters only (fixed topic names, exact
 * counts): on real clusters from the environment both tests skip.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "aagw_build.h"
#include "harness.h"

#define WAIT_MS 60000

static const char *const sites[] = {"east", "west"};

struct fx {
        harness_clusters_t *hc;
        harness_proc_t     *gw;
        char               *dir, *state;
        char                log[4200];
        char                addr[128];
        int                 run; /* starts so far: gw-N.log */
        char                errstr[1024];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        f->hc = harness_clusters_new(sites, 2, 1, f->errstr, sizeof(f->errstr));
        assert_non_null(f->hc);
        *state = f;
        if (harness_clusters_are_real(f->hc))
                return 0; /* the tests skip */
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
        f->dir   = harness_tmpdir_new("restart");
        f->state = harness_path_join(f->dir, "state");
        *state   = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        harness_proc_destroy(f->gw);
        harness_clusters_destroy(f->hc);
        if (f->dir)
                harness_rmtree(f->dir);
        free(f->dir);
        free(f->state);
        free(f);
        return 0;
}

/* Start the gateway ('unify': "on" or "off"); its log is f->log. */
static void start_gw(struct fx *f, const char *unify) {
        const char *argv[96];
        size_t      n = 0;
        char        addrfile[4200];

        snprintf(f->log, sizeof(f->log), "%s/gw-%d.log", f->dir, ++f->run);
        argv[n++] = harness_aagw_bin();
        for (int i = 0; i < 2; i++) {
                /* the secured listener and its settings, if any */
                size_t k = harness_clusters_gw_args(
                    f->hc, i ? "west" : "east", argv + n,
                    sizeof(argv) / sizeof(argv[0]) - n - 20);
                assert_true(k > 0);
                n += k;
        }
        argv[n++] = "--state-dir";
        argv[n++] = f->state;
        argv[n++] = "--admin";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--topic";
        argv[n++] = "clicks";
        if (!strcmp(unify, "off")) {
                argv[n++] = "--unify";
                argv[n++] = "off";
        }
        argv[n++] = "--set";
        argv[n++] = "clusters.east.properties.consumer.session.timeout.ms=3000";
        argv[n++] = "--set";
        argv[n++] = "clusters.west.properties.consumer.session.timeout.ms=3000";
        argv[n++] = "--set";
        argv[n++] = "mm2.heartbeats_interval=0s";
        argv[n]   = NULL;
        f->gw = harness_proc_spawn(argv, NULL, f->log, f->errstr,
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

static void stop_gw(struct fx *f) {
        int st;
        assert_int_equal(harness_proc_signal(f->gw, SIGTERM), 0);
        assert_int_equal(harness_proc_wait(f->gw, 20000, &st), AAGW_OK);
        assert_int_equal(harness_exit_code(st), 0);
        harness_proc_destroy(f->gw);
        f->gw = NULL;
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

/* Records in 'topic' at 'site', read with kcat. */
static long count(struct fx *f, const char *site, const char *topic) {
        harness_lines_t l;
        assert_int_equal(harness_kcat_consume(
                             harness_clusters_bootstraps(f->hc, site), topic,
                             "%o\n", 30000, &l, f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        long n = (long)l.cnt;
        harness_lines_deinit(&l);
        return n;
}

/* curl -s -X METHOD URL: the body, malloc()ed; the status in *code. */
static char *http(struct fx *f, const char *method, const char *path,
                  int *code) {
        char             url[512];
        const char      *argv[] = {"curl", "-s", "-X", method, "-w",
                                   "\n%{http_code}", url, NULL};
        harness_output_t o;

        snprintf(url, sizeof(url), "http://%s%s", f->addr, path);
        assert_int_equal(harness_run(argv, NULL, 0, 10000, &o, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(o.status), 0);
        char *nl = strrchr(o.out, '\n');
        assert_non_null(nl);
        *code = atoi(nl + 1);
        *nl   = '\0';
        char *body = strdup(o.out);
        harness_output_deinit(&o);
        return body;
}

/* The value of metric line 'series' ("name{labels}"), or -1. */
static long long metric(struct fx *f, const char *series) {
        int       code;
        char     *body = http(f, "GET", "/metrics", &code);
        long long v    = -1;
        size_t    len  = strlen(series);
        for (const char *p = body; (p = strstr(p, series)); p += len)
                if ((p == body || p[-1] == '\n') && p[len] == ' ') {
                        v = atoll(p + len + 1);
                        break;
                }
        free(body);
        return v;
}

struct want {
        struct fx  *f;
        const char *site, *topic, *series;
        long        n;
};

static bool count_is(void *arg) {
        struct want *w = arg;
        return count(w->f, w->site, w->topic) == w->n;
}

static bool metric_is(void *arg) {
        struct want *w = arg;
        return metric(w->f, w->series) == w->n;
}

static bool log_has(void *arg) {
        struct want *w   = arg;
        char        *log = harness_read_file(w->f->log, NULL);
        bool         has = log && strstr(log, w->series);
        free(log);
        return has;
}

/* ------------------------------------------------------------ PAUSES --- */

static void test_pause_survives_restart(void **state) {
        struct fx  *f = *state;
        int         code;
        char       *body, path[4200];

        if (!f->state)
                skip(); /* real clusters */

        start_gw(f, "off");
        produce(f, 0, 100);
        struct want copied = {f, "west", "east.clicks", NULL, 100};
        assert_true(harness_wait_until(count_is, &copied, WAIT_MS));

        body = http(f, "POST", "/flows/east-west/pause", &code);
        assert_int_equal(code, 202);
        free(body);
        struct want paused = {f, NULL, NULL,
                              "aagw_flow_paused{flow=\"east->west\"}", 1};
        assert_true(harness_wait_until(metric_is, &paused, 5000));
        stop_gw(f);
        snprintf(path, sizeof(path), "%s/paused-flows", f->state);
        body = harness_read_file(path, NULL);
        assert_non_null(body);
        assert_string_equal(body, "east->west\n");
        free(body);

        /* Written while it is down; after the restart it is paused from
         * the start: not one of them is copied.  The quiet period starts
         * once the flow holds its partitions (it would copy at once). */
        produce(f, 100, 50);
        start_gw(f, "off");
        assert_true(harness_wait_until(metric_is, &paused, WAIT_MS));
        struct want parts = {f, NULL, NULL,
                             "aagw_replication_partitions{flow=\"east->west\"}",
                             4};
        assert_true(harness_wait_until(metric_is, &parts, WAIT_MS));
        struct want more = {f, "west", "east.clicks", NULL, 101};
        assert_false(harness_wait_until(count_is, &more, 3000));
        assert_int_equal(count(f, "west", "east.clicks"), 100);
        struct want said = {f, NULL, NULL,
                            "W [RUN] flow east->west stays paused", 0};
        assert_true(log_has(&said));
        /* The other direction was never paused. */
        struct want other = {f, NULL, NULL,
                             "aagw_flow_paused{flow=\"west->east\"}", 0};
        assert_true(metric_is(&other));

        /* Resumed: everything arrives, and the file is gone. */
        body = http(f, "POST", "/flows/east-west/resume", &code);
        assert_int_equal(code, 202);
        free(body);
        struct want all = {f, "west", "east.clicks", NULL, 150};
        assert_true(harness_wait_until(count_is, &all, WAIT_MS));
        assert_int_equal(access(path, F_OK), -1);
        stop_gw(f);

        /* And the next start does not pause it. */
        start_gw(f, "off");
        struct want running = {f, NULL, NULL,
                               "aagw_flow_paused{flow=\"east->west\"}", 0};
        assert_true(harness_wait_until(metric_is, &running, WAIT_MS));
        produce(f, 150, 10);
        struct want last = {f, "west", "east.clicks", NULL, 160};
        assert_true(harness_wait_until(count_is, &last, WAIT_MS));
        stop_gw(f);
}

/* ---------------------------------------------------- LOST STATE DIR --- */

static void test_lost_state_dir_warns(void **state) {
        struct fx *f = *state;

        if (!f->state)
                skip(); /* real clusters */

        start_gw(f, "on");
        produce(f, 0, 100);
        struct want copied  = {f, "west", "east.clicks", NULL, 100};
        struct want unified = {f, "east", "clicks.unified", NULL, 100};
        struct want unified_w = {f, "west", "clicks.unified", NULL, 100};
        assert_true(harness_wait_until(count_is, &copied, WAIT_MS));
        assert_true(harness_wait_until(count_is, &unified, WAIT_MS));
        assert_true(harness_wait_until(count_is, &unified_w, WAIT_MS));
        stop_gw(f);

        /* The state dir is lost. */
        assert_int_equal(harness_rmtree(f->state), 0);
        start_gw(f, "on");
        struct want unify_warn = {
            f, NULL, NULL,
            "W [UNIFY] unify@east: clicks.unified already holds 100 records "
            "but the state store has no position for it: the state dir is "
            "new or its state was lost; rebuilding the state",
            0};
        struct want flow_warn = {f, NULL, NULL,
                                 "W [FLOW] east->west: clicks [", 0};
        struct want flow_warn2 = {
            f, NULL, NULL,
            "no stored position (the state dir is new or its state was "
            "lost), but the target holds copies up to source offset ",
            0};
        assert_true(harness_wait_until(log_has, &unify_warn, WAIT_MS));
        assert_true(harness_wait_until(log_has, &flow_warn, WAIT_MS));
        assert_true(log_has(&flow_warn2));

        /* Rebuilt, not redone: the recovery found all 100, and new
         * records are copied once. */
        struct want recovered = {
            f, NULL, NULL, "aagw_unify_recovered_total{site=\"east\"}", 100};
        assert_true(harness_wait_until(metric_is, &recovered, WAIT_MS));
        produce(f, 100, 20);
        struct want copied2  = {f, "west", "east.clicks", NULL, 120};
        struct want unified2 = {f, "east", "clicks.unified", NULL, 120};
        assert_true(harness_wait_until(count_is, &copied2, WAIT_MS));
        assert_true(harness_wait_until(count_is, &unified2, WAIT_MS));
        stop_gw(f);
        assert_int_equal(count(f, "west", "east.clicks"), 120);
        assert_int_equal(count(f, "east", "clicks.unified"), 120);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_pause_survives_restart, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_lost_state_dir_warns, setup,
                                            teardown),
        };
        return cmocka_run_group_tests_name("restart", tests, NULL, NULL);
}
