/*
 * tests/unit/test_log.c: the log line format, level filtering, error names.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "aagw_base.h"

static char last_line[4096];
static int  lines;

static void capture(aagw_log_level_t level, const char *line, void *opaque) {
        (void)level;
        (void)opaque;
        snprintf(last_line, sizeof(last_line), "%s", line);
        lines++;
}

static int evaluated;
static int count_eval(void) {
        return ++evaluated;
}

static void test_line_shape(void **state) {
        regex_t re;
        char    want[128];
        (void)state;

        aagw_log_set_sink(capture, NULL);
        aagw_log_level = AAGW_LOG_INFO;
        aagw_log(AAGW_LOG_WARN, "DEDUP", "store %s: %d", "/var/lib/aagw", 42);
        assert_int_equal(regcomp(&re,
                                 "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
                                 "[0-9]{2}\\.[0-9]{3}Z [0-9]+ W \\[DEDUP\\] "
                                 "store /var/lib/aagw: 42$",
                                 REG_EXTENDED | REG_NOSUB),
                         0);
        assert_int_equal(regexec(&re, last_line, 0, NULL, 0), 0);
        regfree(&re);
        snprintf(want, sizeof(want), " %d W [DEDUP]", (int)getpid());
        assert_non_null(strstr(last_line, want));
        aagw_log_set_sink(NULL, NULL);
}

static void test_level_filter_skips_arguments(void **state) {
        (void)state;
        aagw_log_set_sink(capture, NULL);
        aagw_log_level = AAGW_LOG_WARN;
        lines          = 0;
        evaluated      = 0;
        aagw_log(AAGW_LOG_INFO, "X", "%d", count_eval());
        aagw_log(AAGW_LOG_DEBUG, "X", "%d", count_eval());
        assert_int_equal(evaluated, 0);
        assert_int_equal(lines, 0);
        aagw_log(AAGW_LOG_ERROR, "X", "%d", count_eval());
        assert_int_equal(evaluated, 1);
        assert_int_equal(lines, 1);
        aagw_log_level = AAGW_LOG_INFO;
        aagw_log_set_sink(NULL, NULL);
}

static void test_newlines_folded(void **state) {
        (void)state;
        aagw_log_set_sink(capture, NULL);
        aagw_log(AAGW_LOG_ERROR, "KAFKA", "a\nb\r\nc");
        assert_non_null(strstr(last_line, "[KAFKA] a b  c"));
        assert_null(strchr(last_line, '\n'));
        aagw_log_set_sink(NULL, NULL);
}

static void test_levels_and_errors(void **state) {
        (void)state;
        assert_int_equal(aagw_log_level_parse("debug"), AAGW_LOG_DEBUG);
        assert_int_equal(aagw_log_level_parse("WARN"), AAGW_LOG_WARN);
        assert_int_equal(aagw_log_level_parse("warning"), AAGW_LOG_WARN);
        assert_int_equal(aagw_log_level_parse("loud"), -1);
        assert_int_equal(aagw_log_level_letter(AAGW_LOG_ERROR), 'E');
        assert_string_equal(aagw_err2str(AAGW_OK), "success");
        assert_string_equal(aagw_err2str(AAGW_ERR_BUSY), "resource busy");
        assert_string_equal(aagw_err2str((aagw_err_t)-999), "unknown error");
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_line_shape),
            cmocka_unit_test(test_level_filter_skips_arguments),
            cmocka_unit_test(test_newlines_folded),
            cmocka_unit_test(test_levels_and_errors),
        };
        return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
