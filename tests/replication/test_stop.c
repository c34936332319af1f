/* tests/replication/test_stop.c: a SIGTERM ends aagw within 5 s, with its
 * clusters up, unreachable from the start, or gone while it ran.
 *
 * Each case is tried AAGW_TEST_STOP_TRIES times (default 3; the bound is
 * claimed for 20 of 20, which `AAGW_TEST_STOP_TRIES=20 meson test -C build
 * repl-stop` checks), the SIGTERM landing at a different moment of the
 * gateway's life each time.  The gateway runs two flows and the two
 * sites' unify stages.  Each stop's time is printed; the slowest is the
 * figure docs/operations.md quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "repl.h"

#define PARTS 4
#define STOP_BOUND_MS 5000
#define REPL_TIMEOUT_MS 60000

static const char *const sites[] = {"east", "west"};
static const char *const unify_on[] = {"--unify", "dedup", NULL};

static int tries(void) {
        const char *v = getenv("AAGW_TEST_STOP_TRIES");
        int         n = v ? atoi(v) : 3;
        return n > 0 ? n : 3;
}

/* Where in the gateway's life the SIGTERM lands: 0-1.4 s after the
 * moment the case waits for, different in each try. */
static void nap_for_try(int i) {
        long            ms = (long)((i * 350) % 1500);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

/* SIGTERM; the exit code, and the time it took in 'ms'. */
static int stop_timed(struct repl *r, int64_t *ms) {
        int64_t t0 = harness_now_ms();
        int     code = repl_gw_stop(r, SIGTERM, 30000);
        *ms          = harness_now_ms() - t0;
        return code;
}

static void report(const char *what, int n, const int64_t *ms) {
        int64_t worst = 0;
        fprintf(stderr, "# %s: stops in", what);
        for (int i = 0; i < n; i++) {
                fprintf(stderr, " %" PRId64, ms[i]);
                if (ms[i] > worst)
                        worst = ms[i];
        }
        fprintf(stderr, " ms (slowest %" PRId64 " ms of %d)\n", worst, n);
}

struct file_has {
        const char *path, *what;
};

static bool file_has(void *arg) {
        struct file_has *f = arg;
        char             buf[65536];
        FILE            *fp = fopen(f->path, "r");
        size_t           n;

        if (!fp)
                return false;
        n = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        return strstr(buf, f->what) != NULL;
}

static void make_topics(struct repl *r) {
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_create_topic(r, "east", "west.clicks", PARTS);
}

/* Try i: 100 more records at east, a gateway started, and all of them
 * copied to west before the stop. */
static void run_and_copy(struct repl *r, int i) {
        repl_produce(r, "east", "clicks", "east", i * 100, 100, 50, NULL, -1);
        repl_gw_start(r, unify_on);
        repl_expect_size(r, "west", "east.clicks", (i + 1) * 100,
                         REPL_TIMEOUT_MS);
}

/* Clusters up: records flow both ways and are unified, then SIGTERM. */
static void test_stop_clusters_up(void **state) {
        struct repl *r = repl_new(sites, 2);
        int          n = tries();
        int64_t     *ms = calloc((size_t)n, sizeof(*ms));

        *state = r;
        assert_non_null(ms);
        make_topics(r);
        for (int i = 0; i < n; i++) {
                run_and_copy(r, i);
                nap_for_try(i);
                int code = stop_timed(r, &ms[i]);
                if (code != 0 || ms[i] > STOP_BOUND_MS) {
                        repl_dump_log(r, 30);
                        fail_msg("try %d: exit %d after %" PRId64 " ms", i,
                                 code, ms[i]);
                }
        }
        report("clusters up", n, ms);
        free(ms);
}

/* Clusters that never answer (ports nobody listens on): SIGTERM once the
 * stages run and while they look for their topics. */
static void test_stop_unreachable_from_start(void **state) {
        struct repl *r = repl_new(sites, 2);
        int          n = tries();
        int64_t     *ms = calloc((size_t)n, sizeof(*ms));
        char         dir[512], log[600], addr[2][64];

        *state = r;
        assert_non_null(ms);
        snprintf(dir, sizeof(dir), "%s/unreachable", r->dir);
        snprintf(log, sizeof(log), "%s/gw.log", r->dir);
        /* Ports of sockets bound and closed: refused at once. */
        for (int k = 0; k < 2; k++)
                snprintf(addr[k], sizeof(addr[k]), "%s=127.0.0.1:%d",
                         sites[k], k + 1);
        for (int i = 0; i < n; i++) {
                const char *argv[] = {harness_aagw_bin(), "run",
                                      "--cluster", addr[0],
                                      "--cluster", addr[1],
                                      "--state-dir", dir,
                                      "--unify", "dedup",
                                      "--gateway-id", repl_gateway_id(r),
                                      NULL};
                harness_proc_t *p;
                int             st;

                unlink(log);
                assert_non_null(p = harness_proc_spawn(argv, log, log,
                                                       r->errstr,
                                                       sizeof(r->errstr)));
                struct file_has running = {log, "I [RUN] running 2 flows "
                                                "and 2 unify"};
                assert_true(harness_wait_until(file_has, &running, 30000));
                nap_for_try(i);
                int64_t t0 = harness_now_ms();
                assert_int_equal(harness_proc_signal(p, SIGTERM), 0);
                if (harness_proc_wait(p, 30000, &st) != AAGW_OK)
                        fail_msg("try %d: no exit 30 s after SIGTERM", i);
                ms[i] = harness_now_ms() - t0;
                harness_proc_destroy(p);
                if (harness_exit_code(st) != 0 || ms[i] > STOP_BOUND_MS)
                        fail_msg("try %d: exit %d after %" PRId64 " ms", i,
                                 harness_exit_code(st), ms[i]);
        }
        report("clusters unreachable from the start", n, ms);
        free(ms);
}

/* Both clusters go away while records flow: SIGTERM 0-1.4 s later.
 * Records the target never acknowledged make it exit 1 (said so); the
 * bound holds either way. */
static void test_stop_clusters_gone(void **state) {
        struct repl *r = repl_new(sites, 2);
        int          n = tries();
        int64_t     *ms = calloc((size_t)n, sizeof(*ms));

        *state = r;
        assert_non_null(ms);
        make_topics(r);
        for (int i = 0; i < n; i++) {
                run_and_copy(r, i);
                repl_set_brokers(r, "east", false);
                repl_set_brokers(r, "west", false);
                nap_for_try(i);
                int code = stop_timed(r, &ms[i]);
                repl_set_brokers(r, "east", true);
                repl_set_brokers(r, "west", true);
                if ((code != 0 && code != 1) || ms[i] > STOP_BOUND_MS) {
                        repl_dump_log(r, 30);
                        fail_msg("try %d: exit %d after %" PRId64 " ms", i,
                                 code, ms[i]);
                }
        }
        report("clusters gone while it ran", n, ms);
        free(ms);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_stop_clusters_up, repl_teardown),
            cmocka_unit_test_teardown(test_stop_unreachable_from_start,
                                      repl_teardown),
            cmocka_unit_test_teardown(test_stop_clusters_gone,
                                      repl_teardown),
        };
        /* Taking every broker down is for the embedded clusters: a
         * shared real cluster serves other tests. */
        static const char *const gone[] = {"test_stop_clusters_gone", NULL};
        size_t n = repl_mock_only_tests(
            tests, sizeof(tests) / sizeof(tests[0]), gone,
            "takes every broker down; a shared real cluster serves other "
            "tests");

        return n ? _cmocka_run_group_tests("replication-stop", tests, n, NULL,
                                           NULL)
                 : 0;
}
