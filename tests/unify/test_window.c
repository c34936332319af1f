/*
 * tests/unify/test_window.c: ids are remembered for the window, not for
 * ever (documented behaviour).
 *
 * With unify.window=3s: an id is delivered once; the same id again
 * inside the window is dropped; once the window has passed since the
 * first delivery, the same id is delivered again.
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

#include "unify.h"

#define WINDOW_MS 3000

struct want {
        struct repl *r;
        int64_t      dropped, accepted;
};

static bool counts(void *arg) {
        struct want *w = arg;
        struct ustat st;
        return unify_stat(w->r, "east", &st) && st.dropped >= w->dropped &&
               st.accepted >= w->accepted && st.inflight == 0;
}

static bool past(void *arg) {
        return harness_now_ms() >= *(int64_t *)arg;
}

static void send_x(struct repl *r, const char *tag) {
        char        val[128];
        struct urec rec = {"x-1", val, 0, 0};
        snprintf(val, sizeof(val), "{\"event_id\":\"x-1\",\"try\":\"%s\"}",
                 tag);
        unify_produce(r, "east", "clicks", &rec, 1, NULL, NULL);
}

static void expect(struct repl *r, int64_t accepted, int64_t dropped) {
        struct want w = {r, dropped, accepted};
        struct ustat st;
        if (!harness_wait_until(counts, &w, 60000)) {
                repl_dump_log(r, 40);
                fail_msg("want accepted %lld dropped %lld",
                         (long long)accepted, (long long)dropped);
        }
        assert_true(unify_stat(r, "east", &st));
        assert_int_equal(st.accepted, accepted);
        assert_int_equal(st.dropped, dropped);
}

static void window_expiry(void **state, const char *filter) {
        static const char *const sites[] = {"east", "west"};
        const char *const        extra[] = {"--id",  "json:event_id",
                                            "--set", "unify.window=3s",
                                            "--set", filter,
                                            NULL};
        struct repl             *r = repl_new(sites, 2);
        struct rrecs             rs;

        *state = r;
        repl_create_topic(r, NULL, "clicks", 1);
        repl_create_topic(r, "west", "east.clicks", 1);
        repl_create_topic(r, "east", "west.clicks", 1);
        unify_gw_start(r, "dedup", extra);

        send_x(r, "first");
        /* east's stream reads x-1 from clicks only: its copy goes to
         * west (east.clicks there) and never comes back. */
        expect(r, 1, 0);
        int64_t first = harness_now_ms();
        send_x(r, "retry-inside-window");
        expect(r, 1, 1);
        /* The window runs from the first delivery. */
        int64_t after = first + WINDOW_MS + 500;
        harness_wait_until(past, &after, WINDOW_MS + 5000);
        send_x(r, "retry-after-window");
        expect(r, 2, 1);

        repl_read(r, "east", "clicks.unified", &rs);
        assert_int_equal(rs.cnt, 2);
        assert_non_null(strstr(rs.v[0].val, "\"first\""));
        assert_non_null(strstr(rs.v[1].val, "\"retry-after-window\""));
        rrecs_deinit(&rs);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

static void test_window_expiry(void **state) {
        window_expiry(state, "unify.filter=bloom");
}

/* The same with the exact filter: the retry inside the window is known
 * without a read, the one after it is not mistaken for a duplicate. */
static void test_window_expiry_exact(void **state) {
        window_expiry(state, "unify.filter=exact");
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_window_expiry, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_window_expiry_exact,
                                            repl_setup, repl_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
