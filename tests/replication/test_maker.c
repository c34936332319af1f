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
 * sent during the wait took 3 s and more.
 *
 * Then the start of a new topic's copy: where each of its partitions
 * resumes is found against the target (the stored position, the end of
 * the target partition and its settling, a scan of its tail: round trips
 * to the target) beside the copying too.  West answers RECONCILE_RTT_MS
 * late, so that finding it takes seconds; `views` appears at east with
 * its copy already at west, and each batch of `clicks` must still be
 * copied within RECONCILE_COPY_MS until the copy of `views` holds its
 * records.  With the reconciliation in the flow thread a batch waited
 * for all of it (2.3 s with 2 partitions at this round trip). */
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
#define RECONCILE_RTT_MS 100
/* A batch at RECONCILE_RTT_MS: a produce request and its answer, and
 * the reader's fetch, a few round trips; the reconciliation of a topic
 * of VIEWS_PARTS, dozens. */
#define RECONCILE_COPY_MS 1500
#define VIEWS_PARTS 8

static const char *const sites[] = {"east", "west"};

/* The gateway copying `clicks` (PARTS partitions, the copy made
 * beforehand) from east to west, one batch copied; '*sent' records. */
static struct repl *clicks_copied(void **state, const char *mock_only,
                                  int *sent) {
        struct repl             *r       = repl_new(sites, 2);
        static const char *const extra[] = {
            "--set", "replication.refresh_topics_interval=500ms", NULL};

        *state = r;
        repl_mock_only(r, mock_only);
        repl_create_topic(r, "east", "clicks", PARTS);
        repl_create_topic(r, "west", "east.clicks", PARTS);
        repl_gw_start(r, extra);
        repl_produce(r, "east", "clicks", "c", 0, BATCH, 0, NULL, -1);
        *sent = BATCH;
        repl_expect_size(r, "west", "east.clicks", *sent, REPL_TIMEOUT_MS);
        return r;
}

#define MAKER_MOCK_ONLY                                                        \
        "needs a cluster whose Admin API never answers (real brokers "         \
        "create a copy in milliseconds)"

static bool views_replicating(struct repl *r) {
        return repl_log_has(r, "replicating views");
}

static void test_copy_made_beside(void **state) {
        int          sent;
        struct repl *r = clicks_copied(state, MAKER_MOCK_ONLY, &sent);

        /* A topic without a copy: the flow asks for one. */
        repl_create_topic(r, "east", "views", 2);
        repl_produce(r, "east", "views", "v", 0, 3, 0, NULL, -1);
        struct repl_paced p =
            repl_pace(r, "east", "clicks", -1, "west", "east.clicks", &sent,
                      BATCH, COPY_MS, WINDOW_MS, views_replicating);
        print_message("# %d batches while the copy of views was made, "
                      "slowest copied in %" PRId64 " ms\n",
                      p.batches, p.worst_ms);
        repl_expect_log(r, "replicating views", 0);
        /* The slow path was taken: creation refused by silence, then
         * auto-created. */
        assert_true(repl_log_has(r, "does not create topics through the "
                                    "Admin API"));
        /* The wait spans several batches (3 s of request timeout). */
        assert_true(p.batches >= 3);
        assert_int_equal(p.slow, 0);
        repl_expect_size(r, "west", "east.views", 3, REPL_TIMEOUT_MS);
        repl_expect_size(r, "west", "east.clicks", sent, REPL_TIMEOUT_MS);
}

#define RTT_MOCK_ONLY "needs a cluster whose round trip can be stretched"

static bool views_copied(struct repl *r) {
        return repl_size(r, "west", "east.views") >= 3;
}

static void test_reconciled_beside(void **state) {
        int          sent;
        struct repl *r = clicks_copied(state, RTT_MOCK_ONLY, &sent);

        /* A new topic whose copy exists: nothing to make, only to find
         * where each partition resumes, at a distant target. */
        repl_set_rtt(r, "west", RECONCILE_RTT_MS);
        repl_create_topic(r, "west", "east.views", VIEWS_PARTS);
        repl_create_topic(r, "east", "views", VIEWS_PARTS);
        repl_produce(r, "east", "views", "v", 0, 3, 0, NULL, -1);
        struct repl_paced p =
            repl_pace(r, "east", "clicks", -1, "west", "east.clicks", &sent,
                      BATCH, RECONCILE_COPY_MS, WINDOW_MS, views_copied);
        print_message("# %d batches while views was picked up at a %d ms "
                      "round trip, slowest copied in %" PRId64 " ms\n",
                      p.batches, RECONCILE_RTT_MS, p.worst_ms);
        repl_expect_size(r, "west", "east.views", 3, REPL_TIMEOUT_MS);
        assert_true(repl_log_has(r, "replicating views"));
        assert_int_equal(p.slow, 0);
        repl_set_rtt(r, "west", 0);
        repl_expect_size(r, "west", "east.clicks", sent, REPL_TIMEOUT_MS);
}

int main(void) {
        struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_copy_made_beside, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_reconciled_beside, repl_setup,
                                            repl_teardown),
        };
        static const char *const only[] = {"test_copy_made_beside",
                                           "test_reconciled_beside", NULL};
        size_t                   n      = repl_mock_only_tests(
                                   tests, 2, only,
                                   "needs embedded clusters (an Admin API that never answers, a "
                                                          "round trip that can be stretched)");

        return _cmocka_run_group_tests("replication-maker", tests, n, NULL,
                                       NULL);
}
