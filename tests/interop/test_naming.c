/*
 * tests/interop/test_naming.c: MirrorMaker 2's internal topic names with a
 * custom separator (Kafka >= 3.0 builds them from
 * replication.policy.separator, checked against MM2's own code in
 * test_aagw_to_mm2), and aagw treating them as internal, as MM2's
 * isInternalTopic() does.  No broker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aagw_policy.h"

static aagw_repl_policy_t *policy(const char *sep) {
        const char *const     sites[] = {"east", "west"};
        struct aagw_repl_conf c;
        char                  err[256];

        aagw_repl_conf_init(&c);
        c.sites     = sites;
        c.site_cnt  = 2;
        c.separator = sep;
        aagw_repl_policy_t *p = aagw_repl_policy_new(&c, err, sizeof(err));
        assert_non_null(p);
        return p;
}

static void test_names(void **state) {
        char b[64];
        (void)state;

        assert_int_equal(aagw_mm2_checkpoints_topic_sep("_", "east", b, sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "east_checkpoints_internal");
        assert_int_equal(aagw_mm2_offset_syncs_topic_sep("_", "west", b, sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "mm2-offset-syncs_west_internal");
        assert_int_equal(aagw_mm2_checkpoints_topic_sep("--", "east", b, sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "east--checkpoints--internal");
        /* Any string MM2 takes: ".a." (a seed document's) in place of
         * each dot, as DefaultReplicationPolicy 4.1.1 names them. */
        assert_int_equal(aagw_mm2_checkpoints_topic_sep(".a.", "east", b,
                                                        sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "east.a.checkpoints.a.internal");
        assert_int_equal(aagw_mm2_offset_syncs_topic_sep(".a.", "west", b,
                                                         sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "mm2-offset-syncs.a.west.a.internal");
        /* The default and NULL are MM2's dots, as before. */
        assert_int_equal(aagw_mm2_checkpoints_topic_sep(NULL, "east", b, sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "east.checkpoints.internal");
        assert_int_equal(aagw_mm2_offset_syncs_topic_sep(".", "west", b, sizeof(b)),
                         AAGW_OK);
        assert_string_equal(b, "mm2-offset-syncs.west.internal");
        /* Too long for the buffer. */
        assert_int_equal(aagw_mm2_offset_syncs_topic_sep("_", "west", b, 20),
                         AAGW_ERR_INVAL);
}

static void test_internal_with_separator(void **state) {
        aagw_repl_policy_t *us = policy("_"), *dot = policy(NULL);
        (void)state;

        assert_string_equal(aagw_repl_separator(us), "_");
        assert_string_equal(aagw_repl_separator(dot), ".");
        /* MM2 with "_" writes these; never replicate them. */
        assert_true(aagw_repl_topic_is_internal(us, "mm2-offset-syncs_west_internal"));
        assert_true(aagw_repl_topic_is_internal(us, "east_checkpoints_internal"));
        assert_false(aagw_repl_topic_allowed(us, "east_checkpoints_internal"));
        assert_int_equal(aagw_repl_topic_check(us, "east", "west",
                                               "mm2-offset-syncs_west_internal"),
                         AAGW_SKIP_INTERNAL);
        /* What MM2's DefaultReplicationPolicy calls internal whatever the
         * separator stays internal. */
        assert_true(aagw_repl_topic_is_internal(us, "mm2-offset-syncs.west.internal"));
        assert_true(aagw_repl_topic_is_internal(us, "connect-offsets-internal"));
        /* "_internal" is only internal where "_" is the separator, as in
         * MM2 (isMM2InternalTopic: endsWith(separator + "internal")). */
        assert_false(aagw_repl_topic_is_internal(dot, "east_checkpoints_internal"));
        assert_false(aagw_repl_topic_is_internal(us, "clicks"));
        assert_false(aagw_repl_topic_is_internal(us, "internal"));
        assert_false(aagw_repl_topic_is_internal(us, "xinternal"));
        aagw_repl_policy_destroy(us);
        aagw_repl_policy_destroy(dot);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_names),
            cmocka_unit_test(test_internal_with_separator),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
