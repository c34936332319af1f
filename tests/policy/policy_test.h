/* tests/policy/policy_test.h: helpers shared by the policy unit tests. */
#ifndef AAGW_POLICY_TEST_H
#define AAGW_POLICY_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aagw_policy.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Build a policy from 'c' or fail the test with the policy's reason. */
static inline aagw_repl_policy_t *must_policy(const struct aagw_repl_conf *c) {
        char                errstr[512] = "";
        aagw_repl_policy_t *pol =
            aagw_repl_policy_new(c, errstr, sizeof(errstr));
        if (!pol)
                fail_msg("aagw_repl_policy_new: %s", errstr);
        return pol;
}

/* A policy over 'sites' with the given naming, separator and multi_hop;
 * everything else default. */
static inline aagw_repl_policy_t *mkpol(const char *const *sites, size_t n,
                                        aagw_naming_t naming, const char *sep,
                                        bool multi_hop) {
        struct aagw_repl_conf c;

        aagw_repl_conf_init(&c);
        c.sites     = sites;
        c.site_cnt  = n;
        c.naming    = naming;
        c.separator = sep;
        c.multi_hop = multi_hop;
        return must_policy(&c);
}

/* Expect aagw_repl_policy_new() to refuse 'c' with exactly 'msg'. */
static inline void expect_conf_error(const struct aagw_repl_conf *c,
                                     const char *msg) {
        char                errstr[512] = "";
        aagw_repl_policy_t *pol =
            aagw_repl_policy_new(c, errstr, sizeof(errstr));
        if (pol) {
                aagw_repl_policy_destroy(pol);
                fail_msg("expected \"%s\", got a policy", msg);
        }
        assert_string_equal(errstr, msg);
}

/* The same for a message that starts with 'prefix'. */
static inline void expect_conf_error_prefix(const struct aagw_repl_conf *c,
                                            const char *prefix) {
        char                errstr[512] = "";
        aagw_repl_policy_t *pol =
            aagw_repl_policy_new(c, errstr, sizeof(errstr));
        if (pol) {
                aagw_repl_policy_destroy(pol);
                fail_msg("expected \"%s...\", got a policy", prefix);
        }
        if (strncmp(errstr, prefix, strlen(prefix)))
                fail_msg("expected \"%s...\", got \"%s\"", prefix, errstr);
}

/* A header whose value is the C string 'v' (NULL: null value). */
static inline struct aagw_header hdr(const char *name, const char *v) {
        struct aagw_header h = {name, v, v ? strlen(v) : 0};
        return h;
}

/* A string of 'n' copies of 'c' in 'buf' (NUL-terminated). */
static inline char *fill(char *buf, char c, size_t n) {
        memset(buf, c, n);
        buf[n] = '\0';
        return buf;
}

#endif /* AAGW_POLICY_TEST_H */
