/*
 * tests/replication/test_state_full.c: a flow whose positions cannot be
 * stored stops at the stored ones (flow_save_positions()).
 *
 * A state dir that refuses writes (full, read-only) must stop a flow
 * rather than let it copy on with positions only in memory.  The soak's
 * disk-full scenario fills a tmpfs (root only), and there the unify
 * stage, the big writer, fails first; this test reaches the flow's own
 * path through the gateway's test hook AAGW_TEST_POS_SAVE_FAIL=FILE
 * (gateway/engine.c, pos_save(): every position save fails while FILE
 * exists), with the unify stage off.  Embedded clusters only.
 *
 * east's clicks is copied to west (1000 records); FILE is created and
 * 1000 more records are written at east.  Asserted: the gateway exits 1
 * by itself, its log names the refused save (STATE) and the flow
 * east->west failing with "cannot store positions in the state dir";
 * west->east, whose positions did not move, did not fail.  FILE removed,
 * a restart completes the copy (10 more records written after it):
 * west's east.clicks holds each of the 2010 records exactly once, in
 * source order (repl_check_copy()).
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
#include <unistd.h>

#include "repl.h"

#define PARTS 4
#define KEYS  100
/* The hook is the same on any cluster: the Kafka pass's time is better
 * spent elsewhere. */
#define MOCK_ONLY "a test hook of the gateway, not a cluster's behaviour"

static const char *const sites[] = {"east", "west"};

static void test_positions_refused(void **state) {
        struct repl *r = repl_new(sites, 2);
        struct rrecs src, copy;
        char        *full;

        *state = r;
        full   = harness_path_join(r->dir, "state-full");
        repl_create_topic(r, NULL, "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_create_topic(r, "east", "west.clicks", PARTS);
        repl_produce(r, "east", "clicks", "east", 0, 1000, KEYS, NULL, -1);
        assert_int_equal(setenv("AAGW_TEST_POS_SAVE_FAIL", full, 1), 0);
        repl_gw_start(r, NULL);
        repl_expect_size(r, "west", "east.clicks", 1000, 60000);

        FILE *f = fopen(full, "w");
        assert_non_null(f);
        fclose(f);
        repl_produce(r, "east", "clicks", "east", 1000, 1000, KEYS, NULL, -1);
        int code = repl_gw_wait_exit(r, 30000);
        if (code != 1) {
                repl_dump_log(r, 30);
                fail_msg("with its positions refused the gateway %s %d, "
                         "want exit 1",
                         code < 0 ? "still runs after" : "exited",
                         code < 0 ? 30 : code);
        }
        repl_expect_log(r, "[STATE] saving positions: refused", 0);
        repl_expect_log(r,
                        "east->west: failed: cannot store positions in the "
                        "state dir",
                        0);
        if (repl_log_has(r, "west->east: failed"))
                fail_msg("%s: west->east failed too", r->log);

        /* The records written while the saves failed may all have been
         * copied before the first refused save: 10 more show that the
         * restarted flow runs (and the copy check that the restart,
         * resuming below them, did not copy any twice). */
        assert_int_equal(unlink(full), 0);
        repl_gw_start(r, NULL);
        repl_produce(r, "east", "clicks", "east", 2000, 10, KEYS, NULL, -1);
        repl_expect_size(r, "west", "east.clicks", 2010, 60000);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        assert_int_equal(unsetenv("AAGW_TEST_POS_SAVE_FAIL"), 0);
        repl_read(r, "east", "clicks", &src);
        repl_read(r, "west", "east.clicks", &copy);
        assert_int_equal(src.cnt, 2010);
        assert_int_equal(copy.cnt, 2010);
        repl_check_copy(&src, "clicks", "east", &copy, "east>west");
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
        free(full);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_positions_refused,
                                            repl_setup, repl_teardown),
        };
        static const char *const all[] = {"test_positions_refused", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("repl-state-full", tests, n, NULL,
                                           NULL)
                 : 0;
}
