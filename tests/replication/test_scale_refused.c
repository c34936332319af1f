/*
 * tests/replication/test_scale_refused.c: `aagw run --scale-out true` on
 * librdkafka's mock cluster, which accepts transactions without
 * enforcing them, is refused before anything runs: exit 2 (a usage or
 * config error: the fix is in the command) and a message that names the
 * cluster, says why (a record of an aborted transaction is visible to
 * read_committed readers) and what to do instead.  Scale-out's fencing
 * rests on enforced transactions (replicator/unify.c, "SCALE-OUT").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_scale_out_refused_on_mock(void **state) {
        static const char *const aliases[] = {"east", "west"};
        char                     err[512];
        harness_output_t         o;
        (void)state;

        harness_clusters_t *hc =
            harness_clusters_new(aliases, 2, 1, err, sizeof(err));
        if (!hc)
                fail_msg("mock clusters: %s", err);
        char *dir = harness_tmpdir_new("scale-refused");
        assert_non_null(dir);
        const char *argv[64] = {harness_aagw_bin(), "run"};
        size_t      a        = 2;
        for (size_t i = 0; i < 2; i++) {
                size_t k = harness_clusters_gw_args(hc, aliases[i], argv + a,
                                                    48 - a);
                assert_true(k > 0);
                a += k;
        }
        const char *const tail[] = {"--site", "west", "--state-dir", dir,
                                    "--scale-out", "true", "--member", "m1",
                                    NULL};
        for (size_t i = 0; tail[i]; i++)
                argv[a++] = tail[i];
        argv[a] = NULL;
        memset(&o, 0, sizeof(o));
        assert_int_equal(harness_run(argv, NULL, 0, 60000, &o, err,
                                     sizeof(err)),
                         AAGW_OK);
        if (harness_exit_code(o.status) != 2 ||
            !strstr(o.err, "scale_out.enabled: cluster west cannot fence a "
                           "stalled process") ||
            !strstr(o.err, "read_committed") ||
            !strstr(o.err, "Run one process for the site without "
                           "scale_out instead"))
                fail_msg("exit %d, stderr:\n%s", harness_exit_code(o.status),
                         o.err);
        /* Refused before any stage ran: no unify owner joined. */
        assert_null(strstr(o.err, "[OWNER]"));
        print_message("# refused with exit 2: %.*s\n",
                      (int)strcspn(strstr(o.err, "scale_out.enabled"), "\n"),
                      strstr(o.err, "scale_out.enabled"));
        harness_output_deinit(&o);
        harness_rmtree(dir);
        free(dir);
        harness_clusters_destroy(hc);
}

int main(void) {
        /* On the real-Kafka pass (tests/README.md) the clusters are real
         * and shared: there scale-out is not refused, and a running
         * scale-out process would copy the other tests' topics
         * (tests/realkafka has the scale-out tests).  The whole program
         * is skipped, the TAP way repl.c's mock-only tests use. */
        if (getenv("AAGW_TEST_BOOTSTRAPS_EAST")) {
                printf("1..0 # SKIP on real clusters: only the embedded mock "
                       "refuses scale-out\n");
                return 0;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_scale_out_refused_on_mock),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
