/*
 * tests/unit/test_probe_env.c: the environment of the group probes
 * (replicator/groups.c).  aagw asks a cluster for its consumer groups in
 * a child process; that child must not inherit the variables the
 * config's ${VAR} references read (aagw_kafka_child_env_hide()), since
 * they hold the passwords, and it still gets the client properties
 * through its pipe.
 *
 * This binary is its own probe: run as `SELF offsets probe-group ...` it
 * answers as the real probe would, with what it inherited.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aagw_replicator.h"

static const char *self_exe;

/* The probe's side: read the properties (NAME NUL VALUE NUL ...) to EOF,
 * then answer "members N" with N the number of properties, or
 * "unsupported WHY" when the environment is not the expected one. */
static int fake_probe(void) {
        size_t nul = 0;

        for (int c; (c = getchar()) != EOF;)
                nul += c == '\0';
        if (getenv("AAGW_T_HIDDEN"))
                printf("unsupported inherited AAGW_T_HIDDEN=%s\n",
                       getenv("AAGW_T_HIDDEN"));
        else if (!getenv("AAGW_T_KEPT"))
                printf("unsupported lost AAGW_T_KEPT\n");
        else
                printf("members %zu\n", nul / 2);
        return 0;
}

static aagw_err_t probe(int *members, char *err, size_t size) {
        static const char *const props[] = {"sasl.username", "u",
                                            "sasl.password", "S3CRET-pw"};

        *members = -1;
        return aagw_kafka_group_members(self_exe, "127.0.0.1:1", props, 2,
                                        "g", 5000, members, err, size);
}

static void test_hidden_variables_not_inherited(void **state) {
        static const char *const hide[]   = {"AAGW_T_OTHER", "AAGW_T_HIDDEN"};
        static const char *const prefix[] = {"AAGW_T_HID"};
        char                     err[512];
        int                      members;
        (void)state;

        setenv("AAGW_T_HIDDEN", "S3CRET-pw", 1);
        setenv("AAGW_T_KEPT", "k", 1);

        /* Nothing hidden: the child sees the variable (the fake probe
         * notices, so the checks below are not vacuous). */
        assert_int_equal(aagw_kafka_child_env_hide(NULL, 0), AAGW_OK);
        assert_int_equal(probe(&members, err, sizeof(err)),
                         AAGW_ERR_UNSUPPORTED);
        assert_non_null(strstr(err, "inherited AAGW_T_HIDDEN=S3CRET-pw"));

        /* A name is hidden whole, not as a prefix of another. */
        assert_int_equal(aagw_kafka_child_env_hide(prefix, 1), AAGW_OK);
        assert_int_equal(probe(&members, err, sizeof(err)),
                         AAGW_ERR_UNSUPPORTED);
        assert_non_null(strstr(err, "inherited AAGW_T_HIDDEN"));

        /* Hidden: gone from the child, the rest of the environment kept,
         * and both properties still arrive through the pipe. */
        assert_int_equal(aagw_kafka_child_env_hide(hide, 2), AAGW_OK);
        assert_int_equal(probe(&members, err, sizeof(err)), AAGW_OK);
        assert_int_equal(members, 2);
        /* The parent's own environment is left as it was. */
        assert_string_equal(getenv("AAGW_T_HIDDEN"), "S3CRET-pw");
        assert_int_equal(aagw_kafka_child_env_hide(NULL, 0), AAGW_OK);
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hidden_variables_not_inherited),
        };

        if (argc >= 3 && !strcmp(argv[1], "offsets"))
                return fake_probe();
        self_exe = "/proc/self/exe";
        return cmocka_run_group_tests_name("probe_env", tests, NULL, NULL);
}
