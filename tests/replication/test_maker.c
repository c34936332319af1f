/* tests/replication/test_maker.c: a copy being made never holds the
 * copying back.
 *
 * The embedded clusters answer no Admin API request: creating a copy
 * there waits out the request timeout (3 s) before aagw falls back to the
 * broker's auto-creation.  That wait belongs to the flow's maker thread:
 * while a new source topic's copy is being made, the topics already
 * copied keep flowing.  Records go to `clicks` in small batches while
 * `views` appears at east; each batch must be copied within 1 s, from the
 * moment `views` exists until its copy is made and replicated (the log
 * says the cluster does not create topics through the Admin API, so the
 * slow path was taken).  With the creation in the flow thread, the batch
 * sent during the wait took 3 s and more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "repl.h"

#define PARTS 4
#define BATCH 5
#define COPY_MS 1000 /* what each batch may take to be copied */
#define WINDOW_MS 30000
#define REPL_TIMEOUT_MS 60000

static const char *const sites[] = {"east", "west"};

#define MAKER_MOCK_ONLY                                                        \
        "needs a cluster whose Admin API never answers (real brokers "         \
        "create a copy in milliseconds)"

static void test_copy_made_beside(void **state) {
        struct repl             *r       = repl_new(sites, 2);
        static const char *const extra[] = {
            "--set", "replication.refresh_topics_interval=500ms", NULL};
        int     sent = 0, batches = 0, slow = 0;
        int64_t worst = 0;

        *state = r;
        repl_mock_only(r, MAKER_MOCK_ONLY);
        repl_create_topic(r, "east", "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_gw_start(r, extra);
        repl_produce(r, "east", "clicks", "c", sent, BATCH, 0, NULL, -1);
        sent += BATCH;
        repl_expect_size(r, "west", "east.clicks", sent, REPL_TIMEOUT_MS);

        /* A topic without a copy: the flow asks for one. */
        repl_create_topic(r, "east", "views", 2);
        repl_produce(r, "east", "views", "v", 0, 3, 0, NULL, -1);
        int64_t until = harness_now_ms() + WINDOW_MS;
        while (!repl_log_has(r, "replicating views") &&
               harness_now_ms() < until) {
                repl_produce(r, "east", "clicks", "c", sent, BATCH, 0, NULL,
                             -1);
                sent += BATCH;
                int64_t t0 = harness_now_ms();
                if (!repl_wait_size(r, "west", "east.clicks", sent, COPY_MS))
                        slow++;
                int64_t took = harness_now_ms() - t0;
                if (took > worst)
                        worst = took;
                batches++;
        }
        print_message("# %d batches while the copy of views was made, "
                      "slowest copied in %" PRId64 " ms\n",
                      batches, worst);
        repl_expect_log(r, "replicating views", 0);
        /* The slow path was taken: creation refused by silence, then
         * auto-created. */
        assert_true(repl_log_has(r, "does not create topics through the "
                                    "Admin API"));
        /* The wait spans several batches (3 s of request timeout). */
        assert_true(batches >= 3);
        assert_int_equal(slow, 0);
        repl_expect_size(r, "west", "east.views", 3, REPL_TIMEOUT_MS);
        repl_expect_size(r, "west", "east.clicks", sent, REPL_TIMEOUT_MS);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_copy_made_beside, repl_setup,
                                            repl_teardown),
        };
        static const char *const only[] = {"test_copy_made_beside", NULL};
        size_t n = repl_mock_only_tests(tests, 1, only, MAKER_MOCK_ONLY);

        return _cmocka_run_group_tests("replication-maker", tests, n, NULL,
                                       NULL);
}
