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

/* Last-write-wins never goes backwards after the window.  With a 3 s
 * window, user u1 gets a version timestamped now; the gateway restarts;
 * once the window has passed, a version 60 s OLDER arrives (a late or
 * replayed copy).  It must be superseded, not accepted: the winner is
 * kept past the window.  It used to expire with the window, and the old
 * version then became u1's last unified record. */
struct lwant {
        struct repl *r;
        int64_t      accepted, superseded;
};

static bool lww_counts(void *arg) {
        struct lwant *w = arg;
        struct ustat  st;
        return unify_stat(w->r, "east", &st) &&
               st.accepted >= w->accepted &&
               st.superseded >= w->superseded && st.inflight == 0;
}

static void lww_expect(struct repl *r, int64_t accepted, int64_t superseded) {
        struct lwant w = {r, accepted, superseded};
        struct ustat st;
        if (!harness_wait_until(lww_counts, &w, 60000)) {
                repl_dump_log(r, 40);
                fail_msg("want accepted %lld superseded %lld",
                         (long long)accepted, (long long)superseded);
        }
        assert_true(unify_stat(r, "east", &st));
        assert_int_equal(st.accepted, accepted);
        assert_int_equal(st.superseded, superseded);
}

static void send_profile(struct repl *r, const char *user, const char *tag,
                         int64_t ts) {
        char        val[160];
        struct urec rec = {user, val, ts, 0};
        snprintf(val, sizeof(val),
                 "{\"user_id\":\"%s\",\"update_id\":\"%s-%s\"}", user,
                 user, tag);
        unify_produce(r, "east", "profiles", &rec, 1, NULL, NULL);
}

static void test_lww_not_backwards_after_window(void **state) {
        static const char *const sites[] = {"east", "west"};
        char                     mode_key[200], id_key[200];
        const char *const        extra[] = {"--set", "unify.window=3s",
                                            "--set", mode_key,
                                            "--set", id_key,
                                            NULL};
        struct repl             *r = repl_new(sites, 2);
        struct rrecs             rs;
        int64_t                  now = harness_now_ms();
        const char              *last_u1 = NULL;

        *state = r;
        snprintf(mode_key, sizeof(mode_key), "unify.topics.%s.mode=lww",
                 repl_topic(r, "profiles"));
        snprintf(id_key, sizeof(id_key), "unify.topics.%s.id=json:update_id",
                 repl_topic(r, "profiles"));
        repl_create_topic(r, NULL, "profiles", 1);
        repl_create_topic(r, "west", "east.profiles", 1);
        repl_create_topic(r, "east", "west.profiles", 1);
        unify_gw_start(r, "dedup", extra);

        send_profile(r, "u1", "new", now);
        lww_expect(r, 1, 0);
        int64_t won = harness_now_ms();

        /* A restart in between: the winner must come from the store. */
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        unify_gw_start(r, "dedup", extra);
        int64_t after = won + WINDOW_MS + 1000;
        harness_wait_until(past, &after, WINDOW_MS + 5000);

        send_profile(r, "u1", "old", now - 60000);
        send_profile(r, "u2", "first", harness_now_ms());
        /* Counters start again with the new process. */
        lww_expect(r, 1, 1);

        repl_read(r, "east", "profiles.unified", &rs);
        for (size_t i = 0; i < rs.cnt; i++)
                if (!strcmp(rs.v[i].key, "u1"))
                        last_u1 = rs.v[i].val;
        assert_non_null(last_u1);
        assert_non_null(strstr(last_u1, "\"u1-new\""));
        assert_null(strstr(last_u1, "\"u1-old\""));
        rrecs_deinit(&rs);
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_lww_not_backwards_after_window,
                                            repl_setup, repl_teardown),
            cmocka_unit_test_setup_teardown(test_window_expiry, repl_setup,
                                            repl_teardown),
            cmocka_unit_test_setup_teardown(test_window_expiry_exact,
                                            repl_setup, repl_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
