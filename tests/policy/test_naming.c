/* tests/policy/test_naming.c: topic naming, the topic-name loop rules and
 * the policy's configuration checks. */
#include "policy_test.h"

/* MirrorMaker 2 takes any string; ".a." is a seed document's. */
static const char *const seps[]  = {".", "_", "--", ".a."};
static const char *const two[]   = {"east", "west"};
static const char *const three[] = {"east", "west", "north"};

/* Write 'tmpl' with every '|' replaced by 'sep' into 'buf'. */
static const char *sub(char *buf, size_t size, const char *tmpl,
                       const char *sep) {
        size_t k = 0, sl = strlen(sep);

        for (const char *p = tmpl; *p; p++) {
                if (*p == '|') {
                        assert_true(k + sl < size);
                        memcpy(buf + k, sep, sl);
                        k += sl;
                } else {
                        assert_true(k + 1 < size);
                        buf[k++] = *p;
                }
        }
        buf[k] = '\0';
        return buf;
}

/* ------------------------------- NAMING -------------------------------- */

static void test_remote_topic_prefix(void **state) {
        (void)state;
        for (size_t s = 0; s < ARRAY_LEN(seps); s++) {
                aagw_repl_policy_t *pol =
                    mkpol(three, 3, AAGW_NAMING_PREFIX, seps[s], false);
                char buf[AAGW_TOPIC_MAX + 1], want[64];

                assert_int_equal(aagw_repl_remote_topic(pol, "east", "clicks",
                                                        buf, sizeof(buf)),
                                 AAGW_OK);
                assert_string_equal(
                    buf, sub(want, sizeof(want), "east|clicks", seps[s]));
                /* Multi-hop: the new alias goes in front. */
                assert_int_equal(
                    aagw_repl_remote_topic(
                        pol, "west",
                        sub(want, sizeof(want), "east|clicks", seps[s]), buf,
                        sizeof(buf)),
                    AAGW_OK);
                assert_string_equal(
                    buf, sub(want, sizeof(want), "west|east|clicks", seps[s]));
                aagw_repl_policy_destroy(pol);
        }
}

static void test_remote_topic_limits(void **state) {
        aagw_repl_policy_t *pol = mkpol(two, 2, AAGW_NAMING_PREFIX, ".", false);
        char                topic[300], buf[AAGW_TOPIC_MAX + 1];
        char                small[12];
        (void)state;

        /* "east." + 244 = 249 bytes: the longest legal name. */
        fill(topic, 't', 244);
        assert_int_equal(
            aagw_repl_remote_topic(pol, "east", topic, buf, sizeof(buf)),
            AAGW_OK);
        assert_int_equal(strlen(buf), 249);
        fill(topic, 't', 245);
        assert_int_equal(
            aagw_repl_remote_topic(pol, "east", topic, buf, sizeof(buf)),
            AAGW_ERR_INVAL);
        /* "east.clicks" needs 12 bytes with the NUL. */
        assert_int_equal(
            aagw_repl_remote_topic(pol, "east", "clicks", small, 11),
            AAGW_ERR_INVAL);
        assert_int_equal(
            aagw_repl_remote_topic(pol, "east", "clicks", small, 12), AAGW_OK);
        assert_string_equal(small, "east.clicks");
        assert_int_equal(
            aagw_repl_remote_topic(pol, "ea st", "clicks", buf, sizeof(buf)),
            AAGW_ERR_INVAL);
        assert_int_equal(
            aagw_repl_remote_topic(pol, "", "clicks", buf, sizeof(buf)),
            AAGW_ERR_INVAL);
        assert_int_equal(
            aagw_repl_remote_topic(pol, NULL, "clicks", buf, sizeof(buf)),
            AAGW_ERR_INVAL);
        aagw_repl_policy_destroy(pol);
}

static void test_remote_topic_identity(void **state) {
        aagw_repl_policy_t *pol =
            mkpol(two, 2, AAGW_NAMING_IDENTITY, ".", false);
        char buf[AAGW_TOPIC_MAX + 1], small[6];
        (void)state;

        assert_int_equal(
            aagw_repl_remote_topic(pol, "east", "clicks", buf, sizeof(buf)),
            AAGW_OK);
        assert_string_equal(buf, "clicks");
        assert_int_equal(
            aagw_repl_remote_topic(pol, "east", "clicks", small, sizeof(small)),
            AAGW_ERR_INVAL);
        aagw_repl_policy_destroy(pol);
}

/* topic template, expected source alias (NULL: local), expected upstream */
static const struct {
        const char *topic;
        const char *source;
        const char *upstream;
} source_cases[] = {
    {"clicks", NULL, NULL},
    {"east|clicks", "east", "clicks"},
    {"west|clicks", "west", "clicks"},
    {"north|clicks", "north", "clicks"},
    {"west|east|clicks", "west", "east|clicks"},
    {"east|west|north|clicks", "east", "west|north|clicks"},
    /* Not a configured site: a local topic that contains the separator. */
    {"web|clicks", NULL, NULL},
    {"eas|clicks", NULL, NULL},
    {"eastern|clicks", NULL, NULL},
    {"EAST|clicks", NULL, NULL},
    /* Nothing after the separator: not a remote name (as in MM2). */
    {"east|", NULL, NULL},
    {"east", NULL, NULL},
    /* The rest may itself start with the separator. */
    {"east||clicks", "east", "|clicks"},
    {"east|my|topic", "east", "my|topic"},
};

static void test_topic_source(void **state) {
        (void)state;
        for (size_t s = 0; s < ARRAY_LEN(seps); s++) {
                aagw_repl_policy_t *pol =
                    mkpol(three, 3, AAGW_NAMING_PREFIX, seps[s], false);
                for (size_t i = 0; i < ARRAY_LEN(source_cases); i++) {
                        char        t[128], up[128];
                        const char *got;

                        sub(t, sizeof(t), source_cases[i].topic, seps[s]);
                        got = aagw_repl_topic_source(pol, t);
                        if (!source_cases[i].source) {
                                if (got)
                                        fail_msg("sep %s topic %s: got %s",
                                                 seps[s], t, got);
                                assert_null(aagw_repl_topic_upstream(pol, t));
                                assert_false(aagw_repl_topic_is_remote(pol, t));
                                continue;
                        }
                        assert_non_null(got);
                        assert_string_equal(got, source_cases[i].source);
                        assert_true(aagw_repl_topic_is_remote(pol, t));
                        assert_string_equal(aagw_repl_topic_upstream(pol, t),
                                            sub(up, sizeof(up),
                                                source_cases[i].upstream,
                                                seps[s]));
                }
                aagw_repl_policy_destroy(pol);
        }
}

/* Separator-specific cases: aliases with '-' or '_' where the separator
 * allows them. */
static void test_topic_source_alias_chars(void **state) {
        static const char *const dash[]  = {"us-east", "us-west"};
        static const char *const under[] = {"us_east", "us_west"};
        aagw_repl_policy_t      *pol;
        (void)state;

        pol = mkpol(dash, 2, AAGW_NAMING_PREFIX, "--", false);
        assert_string_equal(aagw_repl_topic_source(pol, "us-east--clicks"),
                            "us-east");
        assert_string_equal(aagw_repl_topic_upstream(pol, "us-east--clicks"),
                            "clicks");
        assert_null(aagw_repl_topic_source(pol, "us-east-clicks"));
        assert_string_equal(aagw_repl_topic_source(pol, "us-east---x"),
                            "us-east");
        assert_string_equal(aagw_repl_topic_upstream(pol, "us-east---x"), "-x");
        aagw_repl_policy_destroy(pol);

        pol = mkpol(under, 2, AAGW_NAMING_PREFIX, ".", false);
        assert_string_equal(aagw_repl_topic_source(pol, "us_west.a_b"),
                            "us_west");
        aagw_repl_policy_destroy(pol);

        /* ".a.": what MirrorMaker 2's DefaultReplicationPolicy (Kafka
         * 4.1.1) answers for the same names: topicSource("east.a.a.x") is
         * east, upstreamTopic "a.x"; "west.a.east.a.c" is west's copy of
         * "east.a.c". */
        pol = mkpol(two, 2, AAGW_NAMING_PREFIX, ".a.", false);
        assert_string_equal(aagw_repl_topic_source(pol, "east.a.a.x"), "east");
        assert_string_equal(aagw_repl_topic_upstream(pol, "east.a.a.x"), "a.x");
        assert_string_equal(aagw_repl_topic_source(pol, "west.a.east.a.c"),
                            "west");
        assert_string_equal(aagw_repl_topic_upstream(pol, "west.a.east.a.c"),
                            "east.a.c");
        /* Dots alone are not the separator. */
        assert_null(aagw_repl_topic_source(pol, "east.clicks"));
        assert_int_equal(aagw_repl_topic_check(pol, "west", "east",
                                               "east.a.clicks"),
                         AAGW_SKIP_TOPIC_FROM_TARGET);
        assert_int_equal(aagw_repl_topic_check(pol, "east", "west",
                                               "east.clicks"),
                         AAGW_SKIP_NONE);
        assert_true(aagw_repl_topic_is_internal(pol,
                                                "east.a.checkpoints.a.internal"));
        assert_true(aagw_repl_topic_is_internal(
            pol, "mm2-offset-syncs.a.west.a.internal"));
        aagw_repl_policy_destroy(pol);

        pol = mkpol(dash, 2, AAGW_NAMING_PREFIX, "_", false);
        assert_string_equal(aagw_repl_topic_source(pol, "us-west_a_b"),
                            "us-west");
        assert_string_equal(aagw_repl_topic_upstream(pol, "us-west_a_b"),
                            "a_b");
        aagw_repl_policy_destroy(pol);
}

static void test_topic_chain(void **state) {
        (void)state;
        for (size_t s = 0; s < ARRAY_LEN(seps); s++) {
                aagw_repl_policy_t *pol =
                    mkpol(three, 3, AAGW_NAMING_PREFIX, seps[s], false);
                const char *chain[4] = {NULL};
                const char *base;
                char        t[64];

                /* west.east.clicks: east wrote it, then west copied it. */
                sub(t, sizeof(t), "west|east|clicks", seps[s]);
                assert_int_equal(aagw_repl_topic_chain(pol, t, chain, 4, &base),
                                 2);
                assert_string_equal(chain[0], "east");
                assert_string_equal(chain[1], "west");
                assert_string_equal(base, "clicks");

                sub(t, sizeof(t), "north|west|east|clicks", seps[s]);
                assert_int_equal(aagw_repl_topic_chain(pol, t, chain, 4, &base),
                                 3);
                assert_string_equal(chain[0], "east");
                assert_string_equal(chain[1], "west");
                assert_string_equal(chain[2], "north");
                assert_string_equal(base, "clicks");

                /* Too small: the count is still complete, the origin end
                 * of the chain is filled. */
                chain[0] = chain[1] = NULL;
                assert_int_equal(aagw_repl_topic_chain(pol, t, chain, 2, NULL),
                                 3);
                assert_string_equal(chain[0], "east");
                assert_string_equal(chain[1], "west");
                assert_int_equal(aagw_repl_topic_chain(pol, t, NULL, 0, &base),
                                 3);
                assert_string_equal(base, "clicks");

                /* A local name: no hops, base is the name. */
                sub(t, sizeof(t), "web|clicks", seps[s]);
                assert_int_equal(aagw_repl_topic_chain(pol, t, chain, 4, &base),
                                 0);
                assert_ptr_equal(base, t);

                /* A repeated site is reported as it is. */
                sub(t, sizeof(t), "east|east|clicks", seps[s]);
                assert_int_equal(aagw_repl_topic_chain(pol, t, chain, 4, &base),
                                 2);
                assert_string_equal(chain[0], "east");
                assert_string_equal(chain[1], "east");
                aagw_repl_policy_destroy(pol);
        }
}

static void test_identity_names_carry_nothing(void **state) {
        aagw_repl_policy_t *pol =
            mkpol(three, 3, AAGW_NAMING_IDENTITY, ".", false);
        const char *base = NULL;
        (void)state;

        assert_null(aagw_repl_topic_source(pol, "east.clicks"));
        assert_null(aagw_repl_topic_upstream(pol, "east.clicks"));
        assert_false(aagw_repl_topic_is_remote(pol, "east.clicks"));
        assert_int_equal(
            aagw_repl_topic_chain(pol, "west.east.clicks", NULL, 0, &base), 0);
        assert_string_equal(base, "west.east.clicks");
        aagw_repl_policy_destroy(pol);
}

/* ----------------------------- CYCLE RULES ----------------------------- */

struct cycle_case {
        const char *source, *target, *topic;
        aagw_skip_t want;
};

static void run_cycle(const char *const *sites, size_t n, bool multi_hop,
                      const struct cycle_case *cases, size_t cnt) {
        for (size_t s = 0; s < ARRAY_LEN(seps); s++) {
                aagw_repl_policy_t *pol =
                    mkpol(sites, n, AAGW_NAMING_PREFIX, seps[s], multi_hop);
                for (size_t i = 0; i < cnt; i++) {
                        char        t[128];
                        aagw_skip_t got;
                        sub(t, sizeof(t), cases[i].topic, seps[s]);
                        got = aagw_repl_topic_check(pol, cases[i].source,
                                                    cases[i].target, t);
                        if (got != cases[i].want)
                                fail_msg("sep \"%s\" multi_hop %d: %s -> %s "
                                         "%s: got %s, want %s",
                                         seps[s], multi_hop, cases[i].source,
                                         cases[i].target, t,
                                         aagw_skip_name(got),
                                         aagw_skip_name(cases[i].want));
                }
                aagw_repl_policy_destroy(pol);
        }
}

static void test_cycle_two_sites(void **state) {
        static const struct cycle_case off[] = {
            {"east", "west", "clicks", AAGW_SKIP_NONE},
            {"west", "east", "clicks", AAGW_SKIP_NONE},
            /* east's copy of west's clicks never goes back to west */
            {"east", "west", "west|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"west", "east", "east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            /* a topic at east that claims to come from east: remote name */
            {"east", "west", "east|clicks", AAGW_SKIP_REMOTE_TOPIC},
            {"east", "west", "web|clicks", AAGW_SKIP_NONE},
            {"west", "east", "west|east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
        };
        static const struct cycle_case on[] = {
            {"east", "west", "clicks", AAGW_SKIP_NONE},
            {"east", "west", "west|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"west", "east", "east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"east", "west", "east|clicks", AAGW_SKIP_CHAIN_REPEATS_SITE},
            {"west", "east", "west|west|clicks", AAGW_SKIP_CHAIN_REPEATS_SITE},
            {"east", "west", "east|west|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
        };
        (void)state;
        run_cycle(two, 2, false, off, ARRAY_LEN(off));
        run_cycle(two, 2, true, on, ARRAY_LEN(on));
}

static void test_cycle_three_sites(void **state) {
        static const struct cycle_case off[] = {
            {"east", "north", "clicks", AAGW_SKIP_NONE},
            {"east", "north", "west|clicks", AAGW_SKIP_REMOTE_TOPIC},
            {"east", "west", "north|clicks", AAGW_SKIP_REMOTE_TOPIC},
            {"east", "west", "west|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"north", "east", "west|east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"north", "west", "west|east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
        };
        static const struct cycle_case on[] = {
            /* east -> west -> north is allowed ... */
            {"west", "north", "east|clicks", AAGW_SKIP_NONE},
            {"west", "east", "north|clicks", AAGW_SKIP_NONE},
            /* ... but west.east.clicks never goes to east or west */
            {"north", "east", "west|east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"north", "west", "west|east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            {"west", "north", "north|east|clicks", AAGW_SKIP_TOPIC_FROM_TARGET},
            /* a chain that holds the source would repeat it */
            {"east", "north", "west|east|clicks", AAGW_SKIP_CHAIN_REPEATS_SITE},
            {"east", "north", "west|west|clicks", AAGW_SKIP_CHAIN_REPEATS_SITE},
            {"north", "east", "north|west|clicks",
             AAGW_SKIP_CHAIN_REPEATS_SITE},
        };
        (void)state;
        run_cycle(three, 3, false, off, ARRAY_LEN(off));
        run_cycle(three, 3, true, on, ARRAY_LEN(on));
}

/* The chain, the source and the target together may name 16 sites. */
static void test_cycle_hop_limit(void **state) {
        char                names[20][8];
        const char         *sites[20];
        char                topic[256];
        size_t              k = 0;
        aagw_repl_policy_t *pol;
        (void)state;

        for (int i = 0; i < 20; i++) {
                snprintf(names[i], sizeof(names[i]), "s%d", i);
                sites[i] = names[i];
        }
        pol = mkpol(sites, 20, AAGW_NAMING_PREFIX, ".", true);
        /* chain s2..s15 (14 hops), newest first in the name */
        for (int i = 15; i >= 2; i--)
                k += (size_t)snprintf(topic + k, sizeof(topic) - k, "s%d.", i);
        snprintf(topic + k, sizeof(topic) - k, "t");
        assert_int_equal(aagw_repl_topic_check(pol, "s1", "s0", topic),
                         AAGW_SKIP_NONE);
        /* one more hop in the chain: 15 + source + target = 17 */
        memmove(topic + 4, topic, strlen(topic) + 1);
        memcpy(topic, "s16.", 4);
        assert_int_equal(aagw_repl_topic_check(pol, "s1", "s0", topic),
                         AAGW_SKIP_TOO_MANY_HOPS);
        aagw_repl_policy_destroy(pol);
}

static void test_check_order_and_name_length(void **state) {
        aagw_repl_policy_t *pol = mkpol(two, 2, AAGW_NAMING_PREFIX, ".", false);
        aagw_repl_policy_t *id =
            mkpol(two, 2, AAGW_NAMING_IDENTITY, ".", false);
        char t[300];
        (void)state;

        /* internal beats filtered beats the name rules */
        assert_int_equal(
            aagw_repl_topic_check(pol, "east", "west", "west.x.internal"),
            AAGW_SKIP_INTERNAL);
        assert_int_equal(
            aagw_repl_topic_check(pol, "east", "west", "west.x.replica"),
            AAGW_SKIP_FILTERED);
        fill(t, 'a', 244);
        assert_int_equal(aagw_repl_topic_check(pol, "east", "west", t),
                         AAGW_SKIP_NONE);
        fill(t, 'a', 245);
        assert_int_equal(aagw_repl_topic_check(pol, "east", "west", t),
                         AAGW_SKIP_NAME_TOO_LONG);
        /* identity: names never grow, and carry no history */
        assert_int_equal(aagw_repl_topic_check(id, "east", "west", t),
                         AAGW_SKIP_NONE);
        assert_int_equal(
            aagw_repl_topic_check(id, "east", "west", "west.clicks"),
            AAGW_SKIP_NONE);
        aagw_repl_policy_destroy(pol);
        aagw_repl_policy_destroy(id);
}

/* ---------------------------- CONFIGURATION ---------------------------- */

static void test_conf_errors(void **state) {
        static const char *const bad_char[] = {"east", "us east"};
        static const char *const dup[]      = {"east", "west", "east"};
        static const char *const under[]    = {"us_east", "west"};
        static const char *const amb[]      = {"a", "a-"};
        static const char *const empty[]    = {"east", ""};
        static const char *const nul[]      = {"east", NULL};
        char                     longname[80];
        const char              *too_long[] = {"east", longname};
        const char              *many[65];
        struct aagw_repl_conf    c;
        (void)state;

        fill(longname, 'x', 65);
        for (size_t i = 0; i < 65; i++)
                many[i] = "x";

        aagw_repl_conf_init(&c);
        expect_conf_error(&c, "sites: expected 1 to 64 site aliases, got 0");
        c.sites    = many;
        c.site_cnt = 65;
        expect_conf_error(&c, "sites: expected 1 to 64 site aliases, got 65");
        c.sites    = bad_char;
        c.site_cnt = 2;
        expect_conf_error(&c, "sites[1]: \"us east\" is not a site alias (1 "
                              "to 64 of A-Z a-z 0-9 _ -)");
        c.sites = empty;
        expect_conf_error(&c, "sites[1]: \"\" is not a site alias (1 to 64 of "
                              "A-Z a-z 0-9 _ -)");
        c.sites = nul;
        expect_conf_error(&c, "sites[1]: \"\" is not a site alias (1 to 64 of "
                              "A-Z a-z 0-9 _ -)");
        c.sites = too_long;
        expect_conf_error(&c, "sites[1]: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                              "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\" is not a "
                              "site alias (1 to 64 of A-Z a-z 0-9 _ -)");
        c.sites    = dup;
        c.site_cnt = 3;
        expect_conf_error(&c, "sites[2]: \"east\" is listed twice");

        c.sites     = under;
        c.site_cnt  = 2;
        c.separator = "_";
        expect_conf_error(&c, "sites[0]: \"us_east\" contains the separator "
                              "\"_\"");
        /* The identity policy never splits names: no conflict. */
        c.naming = AAGW_NAMING_IDENTITY;
        aagw_repl_policy_destroy(must_policy(&c));
        c.naming = AAGW_NAMING_PREFIX;

        c.sites     = amb;
        c.separator = "--";
        expect_conf_error(&c, "sites[1]: \"a-\" and \"a\" are ambiguous with "
                              "the separator \"--\"");
        c.separator = ".";
        aagw_repl_policy_destroy(must_policy(&c));

        c.sites     = two;
        c.separator = "/";
        expect_conf_error(&c, "separator: expected 1 to 112 of A-Z a-z 0-9 . "
                              "_ -, got \"/\"");
        /* MM2 takes "" too, and then reads "e" as the source of
         * "eastclicks". */
        c.separator = "";
        expect_conf_error(&c, "separator: expected 1 to 112 of A-Z a-z 0-9 . "
                              "_ -, got \"\"");
        /* MM2 keeps a value's trailing blanks: no topic name holds them. */
        c.separator = ".a. ";
        expect_conf_error(&c, "separator: expected 1 to 112 of A-Z a-z 0-9 . "
                              "_ -, got \".a. \"");
        {
                char longer[AAGW_SEP_MAX + 2];
                memset(longer, '.', sizeof(longer) - 1);
                longer[sizeof(longer) - 1] = '\0';
                c.separator                = longer;
                expect_conf_error_prefix(&c, "separator: expected 1 to 112 of");
                /* 112 fits a one-character alias only: MM2's offset-syncs
                 * topic with "east" would be 252 characters. */
                longer[AAGW_SEP_MAX] = '\0';
                expect_conf_error(
                    &c, "separator: 112 characters are too many with site "
                        "\"east\": MirrorMaker 2's topic mm2-offset-syncs"
                        "<separator>east<separator>internal would have 252 "
                        "characters, Kafka allows 249");
                /* Under the identity policy too: it names MM2's topics. */
                c.naming = AAGW_NAMING_IDENTITY;
                expect_conf_error_prefix(&c, "separator: 112 characters");
                c.naming = AAGW_NAMING_PREFIX;
                longer[(249 - 24 - 4) / 2] = '\0';
                aagw_repl_policy_destroy(must_policy(&c));
                /* Any alias (64 characters) leaves room for 80. */
                const char *longest[] = {"east", longname};
                fill(longname, 'x', 64);
                c.sites    = longest;
                longer[81] = '\0';
                expect_conf_error_prefix(&c, "separator: 81 characters are "
                                             "too many with site \"xxxx");
                longer[80] = '\0';
                aagw_repl_policy_destroy(must_policy(&c));
                c.sites = two;
        }
        /* Letters: the separator may not start inside an alias, where
         * MM2's split at its first occurrence would cut the alias. */
        {
                static const char *const ab[] = {"a", "b"};
                c.sites                       = ab;
                c.separator                   = "aa";
                expect_conf_error(&c, "sites[0]: \"a\" followed by the "
                                      "separator \"aa\" holds the separator "
                                      "earlier (\"aaa\"): MirrorMaker 2 would "
                                      "read the source alias as \"\"");
                c.separator = "ab";
                aagw_repl_policy_destroy(must_policy(&c));
                c.sites = two;
        }
        c.separator = ".a.";
        aagw_repl_policy_destroy(must_policy(&c));
        c.separator     = NULL;
        c.header_prefix = "";
        expect_conf_error(&c, "header_prefix: expected 1 to 64 of A-Z a-z 0-9 "
                              ". _ -, got \"\"");
        c.header_prefix = "aagw:";
        expect_conf_error(&c, "header_prefix: expected 1 to 64 of A-Z a-z 0-9 "
                              ". _ -, got \"aagw:\"");
        c.header_prefix  = NULL;
        c.unified_suffix = ".uni fied";
        expect_conf_error(&c, "unified_suffix: expected 1 to 64 of A-Z a-z "
                              "0-9 . _ -, got \".uni fied\"");
        c.unified_suffix = NULL;
        c.own_prefix     = "";
        expect_conf_error(&c, "own_prefix: expected 1 to 64 of A-Z a-z 0-9 . "
                              "_ -, got \"\"");
        c.own_prefix = NULL;
        c.naming     = (aagw_naming_t)7;
        expect_conf_error(&c, "naming: unknown value 7");
        c.naming            = AAGW_NAMING_PREFIX;
        c.on_bad_provenance = (aagw_bad_action_t)9;
        expect_conf_error(&c, "on_bad_provenance: unknown action 9");
        c.on_bad_provenance = AAGW_BAD_PASS;
        c.on_missing_id     = (aagw_bad_action_t)3;
        expect_conf_error(&c, "on_missing_id: unknown action 3");
        expect_conf_error(NULL, "no configuration");
        aagw_repl_policy_destroy(NULL);
}

static void test_conf_defaults(void **state) {
        struct aagw_repl_conf c;
        (void)state;

        memset(&c, 0xff, sizeof(c));
        aagw_repl_conf_init(&c);
        assert_null(c.sites);
        assert_int_equal(c.site_cnt, 0);
        assert_int_equal(c.naming, AAGW_NAMING_PREFIX);
        assert_null(c.separator);
        assert_false(c.multi_hop);
        assert_false(c.allow_unknown_sites);
        assert_null(c.header_prefix);
        assert_null(c.topics_include);
        assert_null(c.groups_exclude);
        assert_int_equal(c.on_bad_provenance, AAGW_BAD_DEAD_LETTER);
        assert_int_equal(c.on_missing_id, AAGW_BAD_PASS);
}

static void test_dlq_topic(void **state) {
        struct aagw_repl_conf c;
        aagw_repl_policy_t   *pol;
        char                  buf[AAGW_TOPIC_MAX + 1];
        (void)state;

        aagw_repl_conf_init(&c);
        c.sites    = two;
        c.site_cnt = 2;
        pol        = must_policy(&c);
        assert_int_equal(aagw_repl_dlq_topic(pol, "east", buf, sizeof(buf)),
                         AAGW_OK);
        assert_string_equal(buf, "aagw.dlq.east");
        assert_true(aagw_repl_topic_is_internal(pol, buf));
        assert_int_equal(aagw_repl_dlq_topic(pol, "east", buf, 13),
                         AAGW_ERR_INVAL);
        assert_int_equal(aagw_repl_dlq_topic(pol, "east", buf, 14), AAGW_OK);
        assert_int_equal(aagw_repl_dlq_topic(pol, "e.st", buf, sizeof(buf)),
                         AAGW_ERR_INVAL);
        aagw_repl_policy_destroy(pol);

        c.own_prefix = "ops_gw-";
        pol          = must_policy(&c);
        assert_int_equal(aagw_repl_dlq_topic(pol, "west", buf, sizeof(buf)),
                         AAGW_OK);
        assert_string_equal(buf, "ops_gw-dlq.west");
        assert_true(aagw_repl_topic_is_internal(pol, buf));
        assert_false(aagw_repl_topic_is_internal(pol, "aagw.dlq.west"));
        aagw_repl_policy_destroy(pol);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_remote_topic_prefix),
            cmocka_unit_test(test_remote_topic_limits),
            cmocka_unit_test(test_remote_topic_identity),
            cmocka_unit_test(test_topic_source),
            cmocka_unit_test(test_topic_source_alias_chars),
            cmocka_unit_test(test_topic_chain),
            cmocka_unit_test(test_identity_names_carry_nothing),
            cmocka_unit_test(test_cycle_two_sites),
            cmocka_unit_test(test_cycle_three_sites),
            cmocka_unit_test(test_cycle_hop_limit),
            cmocka_unit_test(test_check_order_and_name_length),
            cmocka_unit_test(test_conf_errors),
            cmocka_unit_test(test_conf_defaults),
            cmocka_unit_test(test_dlq_topic),
        };
        return cmocka_run_group_tests_name("naming", tests, NULL, NULL);
}
