/* tests/policy/test_filter.c: topic and group filters, internal topics. */
#include "policy_test.h"

static const char *const two[] = {"east", "west"};

static aagw_repl_policy_t *with_topics(const char *const *inc, size_t ni,
                                       const char *const *exc, size_t ne) {
        struct aagw_repl_conf c;

        aagw_repl_conf_init(&c);
        c.sites              = two;
        c.site_cnt           = 2;
        c.topics_include     = inc;
        c.topics_include_cnt = ni;
        c.topics_exclude     = exc;
        c.topics_exclude_cnt = ne;
        return must_policy(&c);
}

static void test_internal_topics(void **state) {
        static const char *const internal[] = {"__consumer_offsets",
                                               "__transaction_state",
                                               ".hidden",
                                               "mm2-offset-syncs.west.internal",
                                               "west.checkpoints.internal",
                                               "connect-offsets-internal",
                                               "aagw.dlq.east",
                                               "aagw.anything",
                                               "clicks.unified",
                                               "east.clicks.unified"};
        static const char *const normal[]   = {
              "clicks",      "east.clicks", "_single", "internal",
              "x.internals", "aagw",        "aagw-x",  "clicks.unifiedx",
              "unified",     "x.replica"};
        aagw_repl_policy_t *pol = with_topics(NULL, 0, NULL, 0);
        (void)state;

        for (size_t i = 0; i < ARRAY_LEN(internal); i++)
                if (!aagw_repl_topic_is_internal(pol, internal[i]))
                        fail_msg("%s should be internal", internal[i]);
        for (size_t i = 0; i < ARRAY_LEN(normal); i++)
                if (aagw_repl_topic_is_internal(pol, normal[i]))
                        fail_msg("%s should not be internal", normal[i]);
        aagw_repl_policy_destroy(pol);
}

static void test_custom_suffix_and_prefix(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites          = two;
        c.site_cnt       = 2;
        c.unified_suffix = "-all";
        c.own_prefix     = "gw_";
        pol              = must_policy(&c);
        assert_true(aagw_repl_topic_is_internal(pol, "clicks-all"));
        assert_false(aagw_repl_topic_is_internal(pol, "clicks.unified"));
        assert_true(aagw_repl_topic_is_internal(pol, "gw_dlq.east"));
        assert_false(aagw_repl_topic_is_internal(pol, "aagw.dlq.east"));
        assert_false(aagw_repl_topic_allowed(pol, "clicks-all"));
        assert_true(aagw_repl_topic_allowed(pol, "clicks.unified"));
        aagw_repl_policy_destroy(pol);
}

static void test_default_topic_filter(void **state) {
        aagw_repl_policy_t *pol = with_topics(NULL, 0, NULL, 0);
        (void)state;

        assert_true(aagw_repl_topic_allowed(pol, "clicks"));
        assert_true(aagw_repl_topic_allowed(pol, "east.clicks"));
        assert_true(aagw_repl_topic_allowed(pol, "a"));
        /* MM2's default excludes */
        assert_false(aagw_repl_topic_allowed(pol, "__x"));
        assert_false(aagw_repl_topic_allowed(pol, "x-internal"));
        assert_false(aagw_repl_topic_allowed(pol, "x.internal"));
        assert_false(aagw_repl_topic_allowed(pol, "x.replica"));
        assert_true(aagw_repl_topic_allowed(pol, "x-replica"));
        assert_true(aagw_repl_topic_allowed(pol, "xinternal"));
        /* aagw's own */
        assert_false(aagw_repl_topic_allowed(pol, "clicks.unified"));
        assert_false(aagw_repl_topic_allowed(pol, "aagw.dlq.west"));
        aagw_repl_policy_destroy(pol);
}

static void test_whole_name_match(void **state) {
        static const char *const inc[] = {"clicks", "profile-.*", "a|b",
                                          "^anchored$", "v[0-9]+"};
        aagw_repl_policy_t      *pol   = with_topics(inc, 5, NULL, 0);
        (void)state;

        assert_true(aagw_repl_topic_allowed(pol, "clicks"));
        assert_false(aagw_repl_topic_allowed(pol, "clicks2"));
        assert_false(aagw_repl_topic_allowed(pol, "xclicks"));
        assert_false(aagw_repl_topic_allowed(pol, "east.clicks"));
        assert_true(aagw_repl_topic_allowed(pol, "profile-"));
        assert_true(aagw_repl_topic_allowed(pol, "profile-eu"));
        assert_false(aagw_repl_topic_allowed(pol, "old-profile-eu"));
        /* alternation is wrapped as a whole, not "^a" | "b$" */
        assert_true(aagw_repl_topic_allowed(pol, "a"));
        assert_true(aagw_repl_topic_allowed(pol, "b"));
        assert_false(aagw_repl_topic_allowed(pol, "ab"));
        assert_false(aagw_repl_topic_allowed(pol, "ax"));
        assert_false(aagw_repl_topic_allowed(pol, "xb"));
        assert_true(aagw_repl_topic_allowed(pol, "anchored"));
        assert_true(aagw_repl_topic_allowed(pol, "v12"));
        assert_false(aagw_repl_topic_allowed(pol, "v12x"));
        assert_false(aagw_repl_topic_allowed(pol, "v"));
        aagw_repl_policy_destroy(pol);
}

static void test_user_excludes_add_to_builtins(void **state) {
        static const char *const exc[] = {"tmp-.*", "clicks"};
        aagw_repl_policy_t      *pol   = with_topics(NULL, 0, exc, 2);
        (void)state;

        assert_false(aagw_repl_topic_allowed(pol, "tmp-1"));
        assert_false(aagw_repl_topic_allowed(pol, "clicks"));
        assert_true(aagw_repl_topic_allowed(pol, "clicks-v2"));
        assert_false(aagw_repl_topic_allowed(pol, "x.replica"));
        assert_false(aagw_repl_topic_allowed(pol, "__y"));
        aagw_repl_policy_destroy(pol);
}

static void test_empty_include_list(void **state) {
        static const char *const none[] = {"unused"};
        aagw_repl_policy_t      *pol    = with_topics(none, 0, NULL, 0);
        (void)state;

        /* An explicit empty list includes nothing (NULL means ".*"). */
        assert_false(aagw_repl_topic_allowed(pol, "clicks"));
        aagw_repl_policy_destroy(pol);
}

static void test_bad_regex(void **state) {
        static const char *const open_paren[] = {"("};
        static const char *const bad_brace[]  = {"ok", "a{2,1}"};
        static const char *const bad_brack[]  = {"[a"};
        static const char *const rparen[]     = {"a)b"};
        static const char *const empty[]      = {"x", ""};
        static const char *const null_pat[]   = {NULL};
        static const char *const fine[] = {"a\\)b", "[)]x",    "[[:digit:]]+",
                                           "[]a]",  "(x|(y))", "z[^])]"};
        struct aagw_repl_conf    c;
        aagw_repl_policy_t      *pol;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites              = two;
        c.site_cnt           = 2;
        c.topics_include     = open_paren;
        c.topics_include_cnt = 1;
        expect_conf_error(&c, "topics.include[0] \"(\": missing closing "
                              "parenthesis at offset 1");
        c.topics_include     = NULL;
        c.topics_exclude     = bad_brace;
        c.topics_exclude_cnt = 2;
        expect_conf_error(&c, "topics.exclude[1] \"a{2,1}\": numbers out of "
                              "order in {} quantifier at offset 5");
        c.topics_exclude     = NULL;
        c.groups_include     = bad_brack;
        c.groups_include_cnt = 1;
        expect_conf_error(&c, "groups.include[0] \"[a\": missing terminating ] "
                              "for character class at offset 2");
        c.groups_include     = NULL;
        c.groups_exclude     = rparen;
        c.groups_exclude_cnt = 1;
        /* An unmatched ')' is an error in Java and PCRE2 alike. */
        expect_conf_error(&c, "groups.exclude[0] \"a)b\": unmatched closing "
                              "parenthesis at offset 1");
        c.groups_exclude     = empty;
        c.groups_exclude_cnt = 2;
        expect_conf_error(&c,
                          "groups.exclude[1] \"\": empty regular expression");
        c.groups_exclude     = null_pat;
        c.groups_exclude_cnt = 1;
        expect_conf_error(&c,
                          "groups.exclude[0] \"\": empty regular expression");

        c.groups_exclude     = fine;
        c.groups_exclude_cnt = ARRAY_LEN(fine);
        pol                  = must_policy(&c);
        assert_false(aagw_repl_group_allowed(pol, "a)b"));
        assert_false(aagw_repl_group_allowed(pol, ")x"));
        assert_false(aagw_repl_group_allowed(pol, "123"));
        assert_false(aagw_repl_group_allowed(pol, "]"));
        assert_false(aagw_repl_group_allowed(pol, "a"));
        assert_false(aagw_repl_group_allowed(pol, "x"));
        assert_false(aagw_repl_group_allowed(pol, "y"));
        assert_true(aagw_repl_group_allowed(pol, "ax"));
        assert_true(aagw_repl_group_allowed(pol, "a1"));
        assert_true(aagw_repl_group_allowed(pol, "xy"));
        assert_false(aagw_repl_group_allowed(pol, "zq"));
        assert_true(aagw_repl_group_allowed(pol, "z)"));
        aagw_repl_policy_destroy(pol);
}

/* MirrorMaker 2 compiles its lists with java.util.regex: the escapes,
 * inline flags and quantifiers of that dialect mean the same here.  Under
 * POSIX regcomp() "orders\d+" matched "ordersd" and "(?i)" did not
 * compile at all. */
static void test_java_dialect(void **state) {
        static const char *const inc[] = {"orders\\d+", "(?i)clicks",
                                          "a.*?z", "\\w+-v\\d{1,2}",
                                          "(?!tmp-)logs-.*"};
        aagw_repl_policy_t      *pol   = with_topics(inc, ARRAY_LEN(inc),
                                                     NULL, 0);
        (void)state;

        assert_true(aagw_repl_topic_allowed(pol, "orders12"));
        assert_false(aagw_repl_topic_allowed(pol, "ordersd"));
        assert_false(aagw_repl_topic_allowed(pol, "orders"));
        assert_true(aagw_repl_topic_allowed(pol, "CLICKS"));
        assert_true(aagw_repl_topic_allowed(pol, "Clicks"));
        /* a lazy quantifier still has to reach the end of the name */
        assert_true(aagw_repl_topic_allowed(pol, "abzcz"));
        assert_false(aagw_repl_topic_allowed(pol, "abzc"));
        assert_true(aagw_repl_topic_allowed(pol, "pay_2-v7"));
        assert_false(aagw_repl_topic_allowed(pol, "pay-v123"));
        assert_true(aagw_repl_topic_allowed(pol, "logs-a"));
        assert_false(aagw_repl_topic_allowed(pol, "tmp-logs-a"));
        aagw_repl_policy_destroy(pol);
}

/* A hostile pattern is a config error, never a crash: 20,000 nested
 * groups overflowed the stack in regcomp(); PCRE2 stops at its nesting
 * limit.  A catastrophic-backtracking pattern is bounded by the match
 * limit and simply does not match. */
static void test_hostile_patterns(void **state) {
        enum { DEPTH = 20000 };
        static const char *const slow[] = {"(a+)+b"};
        char                    *deep   = malloc(2 * DEPTH + 2);
        const char              *deepv[1];
        struct aagw_repl_conf    c;
        aagw_repl_policy_t      *pol;
        char                     err[512];
        (void)state;

        assert_non_null(deep);
        memset(deep, '(', DEPTH);
        deep[DEPTH] = 'a';
        memset(deep + DEPTH + 1, ')', DEPTH);
        deep[2 * DEPTH + 1] = '\0';
        deepv[0]            = deep;
        aagw_repl_conf_init(&c);
        c.sites              = two;
        c.site_cnt           = 2;
        c.topics_include     = deepv;
        c.topics_include_cnt = 1;
        assert_null(aagw_repl_policy_new(&c, err, sizeof(err)));
        assert_non_null(strstr(err, "parentheses are too deeply nested"));
        assert_int_equal(aagw_regex_check(deep, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "too deeply nested at offset"));
        free(deep);

        pol = with_topics(slow, 1, NULL, 0);
        assert_false(aagw_repl_topic_allowed(
            pol, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac"));
        assert_true(aagw_repl_topic_allowed(pol, "aab"));
        aagw_repl_policy_destroy(pol);

        /* the one check `config check` and `run` share */
        assert_int_equal(aagw_regex_check(")", err, sizeof(err)), -1);
        assert_string_equal(err,
                            "\")\": unmatched closing parenthesis at offset 0");
        assert_int_equal(aagw_regex_check("", err, sizeof(err)), -1);
        assert_string_equal(err, "\"\": empty regular expression");
        assert_int_equal(aagw_regex_check("clicks\\d*", err, sizeof(err)), 0);
}

static void test_group_filter(void **state) {
        static const char *const exc[] = {"app-.*"};
        static const char *const inc[] = {"app-.*", "billing", "connect-x"};
        struct aagw_repl_conf    c;
        aagw_repl_policy_t      *pol;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites    = two;
        c.site_cnt = 2;
        pol        = must_policy(&c);
        /* MM2's defaults */
        assert_true(aagw_repl_group_allowed(pol, "billing"));
        assert_false(aagw_repl_group_allowed(pol, "console-consumer-4711"));
        assert_false(aagw_repl_group_allowed(pol, "connect-sink"));
        assert_false(aagw_repl_group_allowed(pol, "__share"));
        assert_true(aagw_repl_group_allowed(pol, "my-connect-x"));
        /* aagw's own groups */
        assert_false(aagw_repl_group_allowed(pol, "aagw.gw.east-west"));
        aagw_repl_policy_destroy(pol);

        /* A user list replaces the default excludes. */
        c.groups_exclude     = exc;
        c.groups_exclude_cnt = 1;
        pol                  = must_policy(&c);
        assert_true(aagw_repl_group_allowed(pol, "connect-sink"));
        assert_false(aagw_repl_group_allowed(pol, "app-1"));
        assert_false(aagw_repl_group_allowed(pol, "aagw.gw.east-west"));
        aagw_repl_policy_destroy(pol);

        c.groups_exclude     = NULL;
        c.groups_include     = inc;
        c.groups_include_cnt = 3;
        pol                  = must_policy(&c);
        assert_true(aagw_repl_group_allowed(pol, "app-1"));
        assert_true(aagw_repl_group_allowed(pol, "billing"));
        assert_false(aagw_repl_group_allowed(pol, "billing2"));
        /* included, but excluded by default: exclusion wins */
        assert_false(aagw_repl_group_allowed(pol, "connect-x"));
        aagw_repl_policy_destroy(pol);
}

/* Topic configs: MM2's default exclusions always, the user's regexes on
 * top, whole-name matches. */
static void test_config_filter(void **state) {
        static const char *const exc[] = {"retention\\..*", "segment"};
        struct aagw_repl_conf    c;
        aagw_repl_policy_t      *pol;
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites    = two;
        c.site_cnt = 2;
        pol        = must_policy(&c);
        assert_true(aagw_repl_config_allowed(pol, "cleanup.policy"));
        assert_true(aagw_repl_config_allowed(pol, "retention.ms"));
        assert_false(aagw_repl_config_allowed(pol, "min.insync.replicas"));
        assert_false(aagw_repl_config_allowed(pol, "unclean.leader.election.enable"));
        assert_false(aagw_repl_config_allowed(pol, "message.timestamp.type"));
        assert_false(aagw_repl_config_allowed(
            pol, "message.timestamp.difference.max.ms"));
        assert_false(aagw_repl_config_allowed(
            pol, "leader.replication.throttled.replicas"));
        assert_false(aagw_repl_config_allowed(
            pol, "follower.replication.throttled.replicas"));
        /* whole names: a longer name is not the excluded one */
        assert_true(aagw_repl_config_allowed(pol, "min.insync.replicasx"));
        aagw_repl_policy_destroy(pol);

        c.configs_exclude     = exc;
        c.configs_exclude_cnt = 2;
        pol                   = must_policy(&c);
        assert_false(aagw_repl_config_allowed(pol, "retention.ms"));
        assert_false(aagw_repl_config_allowed(pol, "retention.bytes"));
        assert_false(aagw_repl_config_allowed(pol, "segment"));
        assert_true(aagw_repl_config_allowed(pol, "segment.ms"));
        assert_false(aagw_repl_config_allowed(pol, "min.insync.replicas"));
        assert_true(aagw_repl_config_allowed(pol, "cleanup.policy"));
        aagw_repl_policy_destroy(pol);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_internal_topics),
            cmocka_unit_test(test_custom_suffix_and_prefix),
            cmocka_unit_test(test_default_topic_filter),
            cmocka_unit_test(test_whole_name_match),
            cmocka_unit_test(test_user_excludes_add_to_builtins),
            cmocka_unit_test(test_empty_include_list),
            cmocka_unit_test(test_bad_regex),
            cmocka_unit_test(test_java_dialect),
            cmocka_unit_test(test_hostile_patterns),
            cmocka_unit_test(test_group_filter),
            cmocka_unit_test(test_config_filter),
        };
        return cmocka_run_group_tests_name("filter", tests, NULL, NULL);
}
