/*
 * tests/unify/test_discover.c: a new unified topic's output is made
 * beside the stage, not in its thread.
 *
 * The embedded clusters answer no Admin API request: making an output
 * there waits out the request timeout (3 s) before the stage falls back
 * to the broker's auto-creation.  That wait belongs to the stage's
 * helper thread (replicator/unify_topics.c, "HELPER"): while the output
 * of a new input topic is being made, and its ends settled for the
 * start-up scan, the topics already unified keep flowing.  Records go to
 * west's `clicks` in small batches while `views` appears at west without
 * `views.unified`; each batch must be unified within COPY_MS until
 * `views.unified` holds the records of `views` (the log says the cluster
 * does not create topics through the Admin API, so the slow path was
 * taken).  With the making in the stage's thread, the batch unified
 * during the wait took 3 s and more.  Embedded clusters only (real
 * brokers make an output in milliseconds).
 */
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
#include "unify.h"

#define BATCH 5
#define VIEWS 3
#define COPY_MS 1000 /* what each batch may take to be unified */
#define WINDOW_MS 30000
#define TIMEOUT_MS 60000
#define MOCK_ONLY                                                              \
        "needs a cluster whose Admin API never answers (real brokers make "    \
        "an output in milliseconds)"

static const char *const sites[] = {"east", "west"};

static const char *const gw_args[] = {
    "--site",  "west",
    "--topic", "clicks|views",
    "--set",   "replication.refresh_topics_interval=500ms",
    NULL};

static bool views_unified(struct repl *r) {
        return repl_size(r, "west", "views.unified") >= VIEWS;
}

static void test_output_made_beside(void **state) {
        struct repl *r    = repl_new(sites, 2);
        int          sent = 0;

        *state = r;
        repl_mock_only(r, MOCK_ONLY);
        repl_create_topic(r, "west", "clicks", 1);
        repl_create_topic(r, "west", "clicks.unified", 1);
        unify_gw_start(r, "dedup", gw_args);
        repl_produce(r, "west", "clicks", "c", sent, BATCH, 0, NULL, 0);
        sent += BATCH;
        repl_expect_size(r, "west", "clicks.unified", sent, TIMEOUT_MS);

        /* An input whose output is not there: the stage makes it. */
        repl_create_topic(r, "west", "views", 1);
        repl_produce(r, "west", "views", "v", 0, VIEWS, 0, NULL, 0);
        struct repl_paced p =
            repl_pace(r, "west", "clicks", 0, "west", "clicks.unified", &sent,
                      BATCH, COPY_MS, WINDOW_MS, views_unified);
        print_message("# %d batches while views.unified was made, slowest "
                      "unified in %" PRId64 " ms\n",
                      p.batches, p.worst_ms);
        repl_expect_size(r, "west", "views.unified", VIEWS, TIMEOUT_MS);
        /* The slow path was taken: the making refused by silence, then
         * auto-created. */
        assert_true(repl_log_has(r, "does not create topics through the "
                                    "Admin API"));
        /* The wait spans several batches (3 s of request timeout). */
        assert_true(p.batches >= 3);
        assert_int_equal(p.slow, 0);
        repl_expect_size(r, "west", "clicks.unified", sent, TIMEOUT_MS);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_output_made_beside, repl_setup,
                                            repl_teardown),
        };
        static const char *const all[] = {"test_output_made_beside", NULL};
        size_t n = repl_mock_only_tests(tests, sizeof(tests) / sizeof(tests[0]),
                                        all, MOCK_ONLY);

        return n ? _cmocka_run_group_tests("unify-discover", tests, n, NULL,
                                           NULL)
                 : 0;
}
