/*
 * tests/unit/test_implicit_ack.c: a delivery report without an offset
 * (replicator_implicit_ack()): with librdkafka 2.8.0 or later it counts
 * as delivered and is logged at most once a minute per flow or stage,
 * with how many came since; with an older one the flow or stage fails
 * closed, naming the record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "replicator_int.h"

struct seen {
        int  warns, errors;
        char last[2048];
};

static void sink(aagw_log_level_t level, const char *line, void *opaque) {
        struct seen *s = opaque;

        if (level == AAGW_LOG_WARN)
                s->warns++;
        if (level == AAGW_LOG_ERROR)
                s->errors++;
        snprintf(s->last, sizeof(s->last), "%s", line);
}

static void test_trusted_counted_and_logged_once(void **state) {
        struct replicator_ctl ctl;
        struct seen           s = {0};

        (void)state;
        memset(&ctl, 0, sizeof(ctl));
        replicator_ctl_init(&ctl, "UNIFY", "unify@east");
        aagw_log_set_sink(sink, &s);
        assert_true(replicator_implicit_ack_lib(&ctl, 0x020800ff,
                                                "clicks.unified", 0, "clicks",
                                                1, 821));
        assert_int_equal(s.warns, 1);
        assert_non_null(strstr(s.last, "unify@east: clicks.unified [0]: the "
                                       "copy of clicks [1] offset 821 and 0 "
                                       "other record(s)"));
        assert_non_null(strstr(s.last, "counted delivered"));
        /* More within the minute: counted, not logged again. */
        for (int i = 0; i < 5; i++)
                assert_true(replicator_implicit_ack_lib(
                    &ctl, 0x020a00ff, "clicks.unified", 0, "clicks", 1,
                    822 + i));
        assert_int_equal(s.warns, 1);
        assert_int_equal(ctl.implicit_acks, 5);
        /* A minute later: the next says how many came since. */
        ctl.implicit_logged_ms -= 60000;
        assert_true(replicator_implicit_ack_lib(&ctl, 0x020800ff,
                                                "clicks.unified", 0, "clicks",
                                                1, 900));
        assert_int_equal(s.warns, 2);
        assert_non_null(strstr(s.last, "offset 900 and 5 other record(s)"));
        assert_int_equal(s.errors, 0);
        assert_false(atomic_load(&ctl.stop));
        assert_int_not_equal(atomic_load(&ctl.state), AAGW_FLOW_FAILED);
        aagw_log_set_sink(NULL, NULL);
        replicator_ctl_deinit(&ctl);
}

static void test_old_library_fails_closed(void **state) {
        struct replicator_ctl ctl;
        struct seen           s = {0};
        char                  err[1024];

        (void)state;
        memset(&ctl, 0, sizeof(ctl));
        replicator_ctl_init(&ctl, "FLOW", "east->west");
        aagw_log_set_sink(sink, &s);
        assert_false(replicator_implicit_ack_lib(&ctl, 0x020002ff,
                                                 "east.clicks", 3, "clicks", 3,
                                                 1011));
        assert_int_equal(atomic_load(&ctl.state), AAGW_FLOW_FAILED);
        assert_true(atomic_load(&ctl.stop));
        replicator_ctl_error(&ctl, err, sizeof(err));
        assert_non_null(strstr(err, "east.clicks [3]: the copy of clicks [3] "
                                    "offset 1011 was reported delivered "
                                    "without an offset"));
        assert_non_null(strstr(err, "librdkafka 2.0.2 does that also"));
        assert_int_equal(s.errors, 1);
        aagw_log_set_sink(NULL, NULL);
        replicator_ctl_deinit(&ctl);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_trusted_counted_and_logged_once),
            cmocka_unit_test(test_old_library_fails_closed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
