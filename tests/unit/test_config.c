/*
 * tests/unit/test_config.c: the YAML config, flag overrides, validation,
 * redaction, the normalized dump and the generated reference.
 *
 * Error messages are asserted verbatim, line and column included: they are
 * the interface an operator reads.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "config.h"
#include "config_int.h"  /* gw_cfg_key_exact */
#include "gateway_int.h" /* gw_policy_new */

struct fixture {
        aagw_config_t *cfg;
};

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));
        f->cfg            = aagw_config_new();
        assert_non_null(f->cfg);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        aagw_config_destroy(f->cfg);
        free(f);
        return 0;
}

static aagw_err_t load(struct fixture *f, const char *yaml) {
        return aagw_config_load_string(f->cfg, "gw.yaml", yaml, strlen(yaml));
}

/* Load, validate and return the full error text. */
static const char *errors_of(struct fixture *f, const char *yaml) {
        load(f, yaml);
        aagw_config_validate(f->cfg);
        return aagw_config_errors(f->cfg);
}

static char *dump(const aagw_config_t *cfg) {
        char  *buf = NULL;
        size_t len = 0;
        FILE  *m   = open_memstream(&buf, &len);
        aagw_config_dump(cfg, m);
        fclose(m);
        return buf;
}

static const char two_clusters[] = "clusters:\n"
                                   "  east:\n"
                                   "    bootstrap_servers: 127.0.0.1:9092\n"
                                   "  west:\n"
                                   "    bootstrap_servers: 127.0.0.1:9093\n";

/* ------------------------------- DEFAULTS ------------------------------ */

static void test_defaults(void **state) {
        struct fixture     *f = *state;
        const char *const *items;

        assert_string_equal(aagw_config_str(f->cfg, "gateway.mode"),
                            "active-active");
        assert_string_equal(aagw_config_str(f->cfg, "gateway.id"), "aagw");
        assert_string_equal(aagw_config_str(f->cfg, "replication.policy"),
                            "prefix");
        assert_string_equal(aagw_config_str(f->cfg, "replication.separator"),
                            ".");
        assert_int_equal(aagw_config_duration_ms(f->cfg, "unify.window"),
                         86400000);
        assert_int_equal(aagw_config_duration_ms(
                             f->cfg, "replication.refresh_topics_interval"),
                         5000);
        assert_int_equal(aagw_config_int(f->cfg, "unify.cache_mb"), 64);
        assert_false(aagw_config_bool(f->cfg, "replication.multi_hop"));
        assert_true(aagw_config_bool(f->cfg, "replication.loop_check_topics"));
        assert_int_equal(aagw_config_list(f->cfg, "replication.topics", &items),
                         1);
        assert_string_equal(items[0], ".*");
        assert_int_equal(
            aagw_config_list(f->cfg, "replication.groups_exclude", &items), 3);
        assert_string_equal(items[1], "connect-.*");
        assert_null(aagw_config_str(f->cfg, "gateway.site"));
        assert_false(aagw_config_is_set(f->cfg, "gateway.mode"));
        assert_int_equal(aagw_config_instance_cnt(f->cfg, "clusters"), 0);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
}

/* ----------------------------- VALID FILES ----------------------------- */

static void test_valid_file(void **state) {
        struct fixture     *f = *state;
        const char *const *items;
        const char *const *kv;

        setenv("AAGW_TEST_PW", "s3cr3t", 1);
        assert_int_equal(
            load(f, "gateway:\n"
                    "  id: clicks-gw\n"
                    "  mode: active-passive\n"
                    "  primary: east\n"
                    "  site: west\n"
                    "clusters:\n"
                    "  east:\n"
                    "    bootstrap_servers: \"10.0.0.1:9092,10.0.0.2:9092\"\n"
                    "    properties:\n"
                    "      security.protocol: SASL_SSL\n"
                    "      sasl.mechanisms: SCRAM-SHA-512\n"
                    "      sasl.password: ${AAGW_TEST_PW}\n"
                    "  west:\n"
                    "    bootstrap_servers: 10.1.0.1:9092\n"
                    "replication:\n"
                    "  policy: identity\n"
                    "  topics: [clicks, 'profile-.*']\n"
                    "  flows:\n"
                    "    - east -> west\n"
                    "  multi_hop: yes\n"
                    "  refresh_topics_interval: 1m30s\n"
                    "unify:\n"
                    "  window: 2h\n"
                    "  topics:\n"
                    "    profiles:\n"
                    "      mode: lww\n"
                    "      entity_key: json:user_id\n"),
            AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        assert_string_equal(aagw_config_errors(f->cfg), "");

        assert_string_equal(aagw_config_str(f->cfg, "gateway.id"), "clicks-gw");
        assert_string_equal(aagw_config_str(f->cfg, "gateway.site"), "west");
        assert_true(aagw_config_is_set(f->cfg, "gateway.mode"));
        assert_string_equal(aagw_config_str(f->cfg, "replication.policy"),
                            "identity");
        assert_true(aagw_config_bool(f->cfg, "replication.multi_hop"));
        assert_int_equal(aagw_config_duration_ms(
                             f->cfg, "replication.refresh_topics_interval"),
                         90000);
        assert_int_equal(aagw_config_list(f->cfg, "replication.topics", &items),
                         2);
        assert_string_equal(items[0], "clicks");
        assert_string_equal(items[1], "profile-.*");
        /* Flows are normalized: spaces around the arrow dropped. */
        assert_int_equal(aagw_config_list(f->cfg, "replication.flows", &items),
                         1);
        assert_string_equal(items[0], "east->west");

        assert_int_equal(aagw_config_instance_cnt(f->cfg, "clusters"), 2);
        assert_string_equal(aagw_config_instance(f->cfg, "clusters", 0),
                            "east");
        assert_string_equal(aagw_config_instance(f->cfg, "clusters", 1),
                            "west");
        assert_null(aagw_config_instance(f->cfg, "clusters", 2));
        assert_string_equal(
            aagw_config_str(f->cfg, "clusters.east.bootstrap_servers"),
            "10.0.0.1:9092,10.0.0.2:9092");
        assert_int_equal(aagw_config_cluster_props(f->cfg, "east", &kv), 3);
        assert_string_equal(kv[0], "security.protocol");
        assert_string_equal(kv[1], "SASL_SSL");
        assert_string_equal(kv[4], "sasl.password");
        assert_string_equal(kv[5], "s3cr3t");
        assert_int_equal(aagw_config_cluster_props(f->cfg, "west", &kv), 0);

        assert_int_equal(aagw_config_instance_cnt(f->cfg, "unify.topics"), 1);
        assert_string_equal(aagw_config_instance(f->cfg, "unify.topics", 0),
                            "profiles");
        assert_string_equal(aagw_config_str(f->cfg, "unify.topics.profiles.mode"),
                            "lww");
        assert_string_equal(
            aagw_config_str(f->cfg, "unify.topics.profiles.entity_key"),
            "json:user_id");
        assert_null(aagw_config_str(f->cfg, "unify.topics.profiles.id"));
        assert_int_equal(aagw_config_duration_ms(f->cfg, "unify.window"),
                         7200000);
}

static void test_empty_and_null(void **state) {
        struct fixture *f = *state;

        assert_int_equal(load(f, ""), AAGW_OK);
        assert_int_equal(load(f, "# only a comment\n"), AAGW_OK);
        /* A null value resets a key to its default. */
        assert_int_equal(load(f, "replication:\n  policy: identity\n"),
                         AAGW_OK);
        assert_int_equal(load(f, "gateway:\nreplication:\n  policy: ~\n"),
                         AAGW_OK);
        assert_string_equal(aagw_config_str(f->cfg, "replication.policy"),
                            "identity");
        assert_string_equal(aagw_config_errors(f->cfg), "");
}

/* -------------------------------- ERRORS ------------------------------- */

static void test_err_syntax(void **state) {
        struct fixture *f = *state;
        assert_int_equal(load(f, "gateway:\n  id: [a,\n"), AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(f->cfg),
                            "gw.yaml:2:7: did not find expected node content "
                            "while parsing a flow node; the file ends (at "
                            "3:1) before what starts here is closed\n");
}

/* A [ or { left open at the end of the file: the error points at it, not
 * at the end (which says nothing about where to look). */
static void test_err_unclosed_at_end(void **state) {
        struct fixture *f = *state;
        assert_int_equal(load(f, "gateway:\n  mode: active-active\n"
                                 "replication:\n  topics: [a, b\n"),
                         AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(f->cfg),
                            "gw.yaml:4:11: did not find expected ',' or ']' "
                            "while parsing a flow sequence; the file ends "
                            "(at 5:1) before what starts here is closed\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_int_equal(load(f, "unify:\n  topics: {clicks: {mode: lww}\n"),
                         AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(f->cfg),
                            "gw.yaml:2:11: did not find expected ',' or '}' "
                            "while parsing a flow mapping; the file ends "
                            "(at 3:1) before what starts here is closed\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_int_equal(load(f, "gateway:\n  id: \"abc\n"), AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(f->cfg),
                            "gw.yaml:2:7: found unexpected end of stream "
                            "while scanning a quoted scalar; the file ends "
                            "(at 3:1) before what starts here is closed\n");
}

/* Invalid UTF-8 and control characters: libyaml gives a byte offset, not
 * a mark; the line and column (in characters) are those of the byte. */
static void test_err_bad_bytes_located(void **state) {
        static const struct {
                const char *yaml, *want;
        } cases[] = {
            {"gateway:\n  mode: active-active\n  id: \"ab\xff\"\n",
             "gw.yaml:3:10: invalid leading UTF-8 octet (byte 0xFF)\n"},
            {"gateway:\n  id: ab\x01" "c\n",
             "gw.yaml:2:9: control characters are not allowed (byte "
             "0x01)\n"},
            /* "é" is one character, two bytes. */
            {"a: 1\n# caf\xc3\xa9 \x07\n",
             "gw.yaml:2:8: control characters are not allowed (byte "
             "0x07)\n"},
            {"gateway:\n  id: x\xc3(\n",
             "gw.yaml:2:9: invalid trailing UTF-8 octet (byte 0x28)\n"},
        };
        struct fixture *f = *state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                aagw_config_destroy(f->cfg);
                f->cfg = aagw_config_new();
                assert_int_equal(load(f, cases[i].yaml), AAGW_ERR_CONFIG);
                assert_string_equal(aagw_config_errors(f->cfg), cases[i].want);
        }
}

/* Errors past the first AAGW_CONFIG_ERRORS_SHOWN are counted on one last
 * line. */
static void test_err_count_capped(void **state) {
        struct fixture *f = *state;
        char            yaml[4096], want[4096];
        size_t          yl = 0, wl = 0;

        for (int i = 0; i < 25; i++) {
                yl += (size_t)snprintf(yaml + yl, sizeof(yaml) - yl,
                                       "k%d: 1\n", i);
                if (i < AAGW_CONFIG_ERRORS_SHOWN)
                        wl += (size_t)snprintf(want + wl, sizeof(want) - wl,
                                               "gw.yaml:%d:1: k%d: unknown "
                                               "key\n",
                                               i + 1, i);
        }
        snprintf(want + wl, sizeof(want) - wl,
                 "... and 5 more errors (only the first 20 are listed)\n");
        assert_int_equal(load(f, yaml), AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(f->cfg), want);
}

/* 200,000 keys in one mapping load in linear time (the duplicate check
 * compared each key with all before it: over a minute), and a duplicate
 * among them is still found.  CPU time, not wall time: the bound must
 * hold on a loaded machine too (about 1 s here, 5 s under ASan). */
static void test_many_keys_fast(void **state) {
        struct fixture *f = *state;
        enum { N = 200000 };
        char           *yaml = malloc((size_t)N * 24 + 64), *p = yaml;
        struct timespec t0, t1;

        assert_non_null(yaml);
        for (int i = 0; i < N; i++)
                p += sprintf(p, "k%d: 1\n", i);
        p += sprintf(p, "k7: 2\n");
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        assert_int_equal(load(f, yaml), AAGW_ERR_CONFIG);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) +
                   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (s > 20.0)
                fail_msg("200,000 keys took %.1f s of CPU", s);
        assert_non_null(strstr(aagw_config_errors(f->cfg),
                               "\n... and 199981 more errors (only the first "
                               "20 are listed)\n"));
        /* Properties too (the same check, its own loop). */
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        p = yaml + sprintf(yaml, "clusters:\n  east:\n    properties:\n");
        for (int i = 0; i < N; i++)
                p += sprintf(p, "      p%d: 1\n", i);
        sprintf(p, "      p9: 2\n");
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        assert_int_equal(load(f, yaml), AAGW_ERR_CONFIG);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        s = (double)(t1.tv_sec - t0.tv_sec) +
            (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (s > 20.0)
                fail_msg("200,000 properties took %.1f s of CPU", s);
        char want[128];
        snprintf(want, sizeof(want),
                 "gw.yaml:%d:7: clusters.east.properties.p9: duplicate key\n",
                 N + 4);
        assert_string_equal(aagw_config_errors(f->cfg), want);
        free(yaml);
}

static void test_err_syntax_tab(void **state) {
        struct fixture *f = *state;
        assert_int_equal(load(f, "gateway:\n\tid: x\n"), AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(f->cfg),
                            "gw.yaml:2:1: found character that cannot start "
                            "any token while scanning for the next token\n");
}

static void test_err_unknown_key_suggests(void **state) {
        struct fixture *f = *state;
        assert_string_equal(errors_of(f, "gateway:\n  mdoe: active-active\n"
                                         "replicaton:\n  policy: prefix\n"
                                         "unify:\n  totally_new: 1\n"),
                            "gw.yaml:2:3: gateway.mdoe: unknown key (did you "
                            "mean 'mode'?)\n"
                            "gw.yaml:3:1: replicaton: unknown key (did you "
                            "mean 'replication'?)\n"
                            "gw.yaml:6:3: unify.totally_new: unknown key\n");
}

static void test_err_types(void **state) {
        struct fixture *f = *state;
        assert_string_equal(
            errors_of(f, "gateway:\n"
                         "  mode: both\n"
                         "  id: [a]\n"
                         "  state_dir: \"\"\n"
                         "replication: 5\n"
                         "unify:\n"
                         "  cache_mb: 1\n"
                         "  window: 10ms\n"
                         "  id: \"json:\"\n"
                         "  entity_key: hash\n"
                         "admin:\n"
                         "  listen: localhost\n"),
            "gw.yaml:2:9: gateway.mode: expected one of active-active, "
            "active-passive, aggregate, got \"both\"\n"
            "gw.yaml:3:7: gateway.id: expected a scalar value, got a list\n"
            "gw.yaml:4:14: gateway.state_dir: expected a non-empty string\n"
            "gw.yaml:5:14: replication: expected a mapping, got a scalar\n"
            "gw.yaml:7:13: unify.cache_mb: expected an integer from 8 to "
            "65536, got 1\n"
            "gw.yaml:8:11: unify.window: expected a duration from 1s to 365d, "
            "got \"10ms\"\n"
            "gw.yaml:9:7: unify.id: expected header:NAME, key, json:FIELD, "
            "hash or derived, got \"json:\"\n"
            "gw.yaml:10:15: unify.entity_key: expected key or json:FIELD, got "
            "\"hash\"\n"
            "gw.yaml:12:11: admin.listen: expected HOST:PORT or [IPV6]:PORT, "
            "got \"localhost\"\n");
}

static void test_err_replication_values(void **state) {
        struct fixture *f = *state;
        assert_string_equal(
            errors_of(f, "replication:\n"
                         "  topics: ['clicks(', ok]\n"
                         "  separator: /\n"
                         "  refresh_topics_interval: 5 seconds\n"
                         "  multi_hop: maybe\n"
                         "  flows: [east->east]\n"
                         "  bad_provenance: drop\n"),
            "gw.yaml:2:12: replication.topics: invalid regular expression "
            "\"clicks(\": missing closing parenthesis at offset 7\n"
            "gw.yaml:3:14: replication.separator: expected 1 to 112 of the "
            "characters of a topic name (A-Z a-z 0-9 . _ -), got \"/\"\n"
            "gw.yaml:4:28: replication.refresh_topics_interval: expected a "
            "duration such as 500ms, 5s, 10m, 24h or 7d, got \"5 seconds\"\n"
            "gw.yaml:5:14: replication.multi_hop: expected true or false, got "
            "\"maybe\"\n"
            "gw.yaml:6:11: replication.flows: a flow needs two different "
            "clusters, got \"east->east\"\n"
            "gw.yaml:7:19: replication.bad_provenance: expected one of pass, "
            "dead-letter, fail, got \"drop\"\n");
}

/* Separators are any string of topic characters MirrorMaker 2 can name
 * topics with ("." "_" "--" ".a."), checked against the aliases by
 * `config check` as the policy checks them at start: one that occurs in
 * an alias, or starts inside one (MM2 splits a name at the separator's
 * first occurrence), or leaves MM2's offset-syncs topic name too long. */
static void test_separators(void **state) {
        struct fixture *f = *state;
        char            yaml[1024], want[1024];
        char            longest[AAGW_SEP_MAX + 1];

        snprintf(yaml, sizeof(yaml), "%sreplication:\n  separator: .a.\n",
                 two_clusters);
        assert_string_equal(errors_of(f, yaml), "");
        assert_string_equal(aagw_config_str(f->cfg, "replication.separator"),
                            ".a.");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        memset(longest, '-', AAGW_SEP_MAX);
        longest[AAGW_SEP_MAX] = '\0';
        snprintf(yaml, sizeof(yaml),
                 "clusters:\n  a:\n    bootstrap_servers: h:1\n"
                 "  b:\n    bootstrap_servers: h:2\n"
                 "replication:\n  separator: \"%s\"\n",
                 longest);
        assert_string_equal(errors_of(f, yaml), "");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        /* One more than any alias allows. */
        snprintf(yaml, sizeof(yaml),
                 "%sreplication:\n  separator: \"%s-\"\n", two_clusters,
                 longest);
        snprintf(want, sizeof(want),
                 "gw.yaml:7:14: replication.separator: expected 1 to 112 of "
                 "the characters of a topic name (A-Z a-z 0-9 . _ -), got "
                 "\"%s-\"\n",
                 longest);
        assert_string_equal(errors_of(f, yaml), want);
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        /* 112 fits a one-character alias, not "east": 24 + 2 * 112 + 4. */
        snprintf(yaml, sizeof(yaml), "%sreplication:\n  separator: \"%s\"\n",
                 two_clusters, longest);
        assert_string_equal(
            errors_of(f, yaml),
            "gw.yaml:7:14: replication.separator: 112 characters are too many "
            "with site \"east\": MirrorMaker 2's topic "
            "mm2-offset-syncs<separator>east<separator>internal would have "
            "252 characters, Kafka allows 249\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_string_equal(
            errors_of(f, "clusters:\n  us-east:\n    bootstrap_servers: h:1\n"
                         "  us-west:\n    bootstrap_servers: h:2\n"
                         "replication:\n  separator: '-'\n"),
            "gw.yaml:7:14: replication.separator: sites[0]: \"us-east\" "
            "contains the separator \"-\"\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_string_equal(
            errors_of(f, "clusters:\n  a:\n    bootstrap_servers: h:1\n"
                         "  b:\n    bootstrap_servers: h:2\n"
                         "replication:\n  separator: aa\n"),
            "gw.yaml:7:14: replication.separator: sites[0]: \"a\" followed "
            "by the separator \"aa\" holds the separator earlier "
            "(\"aaa\"): MirrorMaker 2 would read the source alias as "
            "\"\"\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        /* The identity policy peels no alias off names: only the length
         * of MM2's internal names counts. */
        assert_string_equal(
            errors_of(f, "clusters:\n  us-east:\n    bootstrap_servers: h:1\n"
                         "  us-west:\n    bootstrap_servers: h:2\n"
                         "replication:\n  policy: identity\n"
                         "  separator: '-'\n"),
            "");
}

static void test_err_duplicate_key(void **state) {
        struct fixture *f = *state;
        assert_string_equal(errors_of(f, "gateway:\n  id: a\n  id: b\n"),
                            "gw.yaml:3:3: gateway.id: duplicate key (the "
                            "first one is kept)\n");
        assert_string_equal(aagw_config_str(f->cfg, "gateway.id"), "a");
}

static void test_err_two_documents(void **state) {
        struct fixture *f = *state;
        assert_string_equal(errors_of(f, "gateway:\n  id: a\n---\nx: 1\n"),
                            "gw.yaml:4:1: only one YAML document is allowed\n");
}

static void test_err_clusters(void **state) {
        struct fixture *f = *state;
        assert_string_equal(
            errors_of(f, "clusters:\n"
                         "  east:\n"
                         "    bootstrap_servers: h:1\n"
                         "    properties:\n"
                         "      security.protocol: SASL_SSSL\n"
                         "      group.id: mine\n"
                         "      no.such.prop: 1\n"
                         "      sasl.password: a\n"
                         "      sasl.password: b\n"
                         "  west:\n"
                         "    properties: {}\n"
                         "  \"bad alias!\":\n"
                         "    bootstrap_servers: x\n"),
            "gw.yaml:9:7: clusters.east.properties.sasl.password: duplicate "
            "key\n"
            "gw.yaml:12:3: clusters.bad alias!: not a valid cluster alias (1 "
            "to 64 of A-Z a-z 0-9 _ -)\n"
            "gw.yaml:5:26: clusters.east.properties.security.protocol: "
            "librdkafka: Invalid value \"SASL_SSSL\" for configuration "
            "property \"security.protocol\"\n"
            "gw.yaml:6:7: clusters.east.properties.group.id: managed by aagw "
            "(aagw names its consumer groups from gateway.id)\n"
            "gw.yaml:7:21: clusters.east.properties.no.such.prop: librdkafka: "
            "No such configuration property: \"no.such.prop\"\n"
            "gw.yaml:10:3: clusters.west.bootstrap_servers: required key is "
            "missing\n");
}

/* One produce request in flight is what keeps librdkafka 2.0.2 from
 * acknowledging records never written: not the user's to raise. */
static void test_err_in_flight(void **state) {
        struct fixture *f = *state;

        /* 1-5 are the operator's to choose (librdkafka's default with
         * idempotence, 5, is aagw's); more is refused at the line. */
        assert_string_equal(
            errors_of(f, "clusters:\n"
                         "  east:\n"
                         "    bootstrap_servers: 127.0.0.1:9092\n"
                         "    properties:\n"
                         "      producer.max.in.flight.requests.per.connection: 1\n"
                         "      max.in.flight: 6\n"
                         "  west:\n"
                         "    bootstrap_servers: 127.0.0.1:9093\n"),
            "gw.yaml:6:22: clusters.east.properties.max.in.flight: at most 5 "
            "with the idempotent producer aagw uses (got 6)\n");
}

static void test_err_references(void **state) {
        struct fixture *f = *state;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml),
                 "%sgateway:\n  site: north\n  central: south\n"
                 "replication:\n  flows: [east->north, west->east, "
                 "west->east]\n",
                 two_clusters);
        assert_string_equal(
            errors_of(f, yaml),
            "gw.yaml:7:9: gateway.site: no cluster named \"north\" is "
            "configured\n"
            "gw.yaml:8:12: gateway.central: no cluster named \"south\" is "
            "configured\n"
            "gw.yaml:10:11: replication.flows: no cluster named \"north\" is "
            "configured\n"
            "gw.yaml:10:36: replication.flows: flow west->east is listed "
            "twice\n");
}

static void test_err_mode_needs(void **state) {
        struct fixture *f = *state;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml), "%sgateway:\n  mode: active-passive\n",
                 two_clusters);
        assert_string_equal(errors_of(f, yaml),
                            "gw.yaml:7:9: gateway.primary: active-passive "
                            "needs gateway.primary (--primary) or "
                            "replication.flows\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        snprintf(yaml, sizeof(yaml), "%sgateway:\n  mode: aggregate\n",
                 two_clusters);
        assert_string_equal(errors_of(f, yaml),
                            "gw.yaml:7:9: gateway.central: aggregate needs "
                            "gateway.central (--central) or "
                            "replication.flows\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_string_equal(
            errors_of(f, "clusters:\n  east:\n    bootstrap_servers: h:1\n"),
            "gw.yaml:2:3: clusters: at least two clusters are needed to "
            "replicate\n");
}

static void test_err_admin_needs_token(void **state) {
        struct fixture *f = *state;
        assert_string_equal(errors_of(f, "admin:\n  listen: 0.0.0.0:9644\n"),
                            "gw.yaml:2:11: admin.listen: a non-loopback "
                            "address needs admin.token\n");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_string_equal(
            errors_of(f, "admin:\n  listen: 0.0.0.0:9644\n"
                         "  token: abcdefghijklmnopqrstuvwxyz\n"),
            "");
        aagw_config_destroy(f->cfg);
        f->cfg = aagw_config_new();
        assert_string_equal(errors_of(f, "admin:\n  listen: 127.0.0.1:0\n"),
                            "");
        /* Loopback means a loopback address, not a name that looks like
         * one: 127.example.com may resolve anywhere. */
        static const char *const loopback[] = {
            "127.0.0.1:9644", "127.3.4.5:0", "localhost:9644", "\"[::1]:9644\"",
            "\"[::ffff:127.0.0.1]:9644\""};
        static const char *const other[] = {
            "127.example.com:9644", "localhost.example.com:9644",
            "10.0.0.1:9644", "\"[::]:9644\"", "\"[::ffff:10.0.0.1]:9644\"",
            "128.0.0.1:9644"};
        char yaml[128];
        for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++) {
                aagw_config_destroy(f->cfg);
                f->cfg = aagw_config_new();
                snprintf(yaml, sizeof(yaml), "admin:\n  listen: %s\n",
                         loopback[i]);
                assert_string_equal(errors_of(f, yaml), "");
        }
        for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
                aagw_config_destroy(f->cfg);
                f->cfg = aagw_config_new();
                snprintf(yaml, sizeof(yaml), "admin:\n  listen: %s\n",
                         other[i]);
                assert_string_equal(errors_of(f, yaml),
                                    "gw.yaml:2:11: admin.listen: a "
                                    "non-loopback address needs admin.token\n");
        }
}

/* ---------------------------- ENVIRONMENT ------------------------------ */

static void test_env_substitution(void **state) {
        struct fixture *f = *state;

        setenv("AAGW_T_ID", "from-env", 1);
        unsetenv("AAGW_T_UNSET");
        assert_int_equal(load(f, "gateway:\n"
                                 "  id: ${AAGW_T_ID}\n"
                                 "  state_dir: /x/${AAGW_T_UNSET:-def}/$${y}\n"),
                         AAGW_OK);
        assert_string_equal(aagw_config_str(f->cfg, "gateway.id"), "from-env");
        assert_string_equal(aagw_config_str(f->cfg, "gateway.state_dir"),
                            "/x/def/${y}");
}

/* The variables ${VAR} read are listed once each, property values
 * included, so the program can keep them from its children; an unset one
 * that fell back to its default read nothing. */
static void test_env_refs(void **state) {
        struct fixture     *f = *state;
        const char *const *names;

        setenv("AAGW_T_ID", "from-env", 1);
        setenv("AAGW_T_PW", "pw-from-env", 1);
        unsetenv("AAGW_T_UNSET");
        assert_int_equal(load(f, "gateway:\n"
                                 "  id: ${AAGW_T_ID}\n"
                                 "  state_dir: /x/${AAGW_T_UNSET:-def}\n"
                                 "clusters:\n"
                                 "  east:\n"
                                 "    bootstrap_servers: h:1\n"
                                 "    properties:\n"
                                 "      sasl.password: ${AAGW_T_PW}\n"
                                 "      sasl.username: u-${AAGW_T_ID}\n"),
                         AAGW_OK);
        assert_int_equal(aagw_config_env_refs(f->cfg, &names), 2);
        assert_string_equal(names[0], "AAGW_T_ID");
        assert_string_equal(names[1], "AAGW_T_PW");
}

static void test_env_errors(void **state) {
        struct fixture *f = *state;

        unsetenv("AAGW_T_UNSET");
        assert_string_equal(
            errors_of(f, "gateway:\n"
                         "  id: ${AAGW_T_UNSET}\n"
                         "  state_dir: ${oops\n"
                         "  log_level: ${1BAD}\n"),
            "gw.yaml:2:7: gateway.id: environment variable AAGW_T_UNSET is "
            "not set\n"
            "gw.yaml:3:14: gateway.state_dir: unterminated ${ in \"${oops\"\n"
            "gw.yaml:4:14: gateway.log_level: bad environment variable name "
            "in \"${1BAD}\"\n");
}

/* ------------------------------- FLAGS --------------------------------- */

static void test_flags_override_file(void **state) {
        struct fixture     *f = *state;
        const char *const *items;

        assert_int_equal(load(f, "replication:\n"
                                 "  policy: prefix\n"
                                 "  topics: [a, b]\n"
                                 "clusters:\n"
                                 "  east:\n"
                                 "    bootstrap_servers: h:1\n"),
                         AAGW_OK);
        assert_int_equal(aagw_config_set(f->cfg, "replication.policy",
                                         "identity", "--policy"),
                         AAGW_OK);
        /* The first flag replaces the file's list, later ones add to it. */
        assert_int_equal(
            aagw_config_set(f->cfg, "replication.topics", "c", "--topic"),
            AAGW_OK);
        assert_int_equal(
            aagw_config_set(f->cfg, "replication.topics", "d.*", "--topic"),
            AAGW_OK);
        assert_int_equal(aagw_config_set(f->cfg,
                                         "clusters.east.bootstrap_servers",
                                         "h:9", "--cluster"),
                         AAGW_OK);
        assert_int_equal(aagw_config_set(f->cfg,
                                         "clusters.west.bootstrap_servers",
                                         "h:10", "--cluster"),
                         AAGW_OK);
        assert_int_equal(aagw_config_set(f->cfg,
                                         "clusters.west.properties.linger.ms",
                                         "5", "--set"),
                         AAGW_OK);
        assert_int_equal(aagw_config_set(f->cfg, "replication.multi_hop", "on",
                                         "--set"),
                         AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);

        assert_string_equal(aagw_config_str(f->cfg, "replication.policy"),
                            "identity");
        assert_int_equal(aagw_config_list(f->cfg, "replication.topics", &items),
                         2);
        assert_string_equal(items[0], "c");
        assert_string_equal(items[1], "d.*");
        assert_string_equal(
            aagw_config_str(f->cfg, "clusters.east.bootstrap_servers"), "h:9");
        assert_int_equal(aagw_config_instance_cnt(f->cfg, "clusters"), 2);
        assert_string_equal(aagw_config_instance(f->cfg, "clusters", 1),
                            "west");
        assert_true(aagw_config_bool(f->cfg, "replication.multi_hop"));
        const char *const *kv;
        assert_int_equal(aagw_config_cluster_props(f->cfg, "west", &kv), 1);
        assert_string_equal(kv[0], "linger.ms");
        assert_string_equal(kv[1], "5");
}

static void test_flag_errors(void **state) {
        struct fixture *f = *state;

        assert_int_equal(aagw_config_set(f->cfg, "replication.policy", "idk",
                                         "--policy"),
                         AAGW_ERR_CONFIG);
        assert_int_equal(
            aagw_config_set(f->cfg, "replication.polcy", "x", "--set"),
            AAGW_ERR_CONFIG);
        assert_int_equal(aagw_config_set(f->cfg,
                                         "clusters.no way.bootstrap_servers",
                                         "h:1", "--cluster"),
                         AAGW_ERR_CONFIG);
        assert_int_equal(aagw_config_set(f->cfg, "admin.token", "short",
                                         "--set"),
                         AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(f->cfg),
            "--policy: replication.policy: expected one of prefix, identity, "
            "got \"idk\"\n"
            "--set: replication.polcy: unknown key (did you mean "
            "'replication.policy'?)\n"
            "--cluster: clusters.no way.bootstrap_servers: not a valid "
            "cluster alias (1 to 64 of A-Z a-z 0-9 _ -)\n"
            "--set: admin.token: expected 16 to 256 characters\n");
        /* The failed flags changed nothing. */
        assert_string_equal(aagw_config_str(f->cfg, "replication.policy"),
                            "prefix");
}

/* ------------------------------ REDACTION ------------------------------ */

/* Secrets by name (password, secret, token) and every property librdkafka
 * 2.8.0 marks sensitive, with or without a client prefix: `config check`
 * printed an inline private key (ssl.key.pem) in full before. */
static void test_redaction(void **state) {
        struct fixture *f = *state;
        char           *out;

        assert_int_equal(
            load(f, "admin:\n"
                    "  listen: 127.0.0.1:9644\n"
                    "  token: TOKEN-abcdefghijklmnop\n"
                    "clusters:\n"
                    "  east:\n"
                    "    bootstrap_servers: h:1\n"
                    "    properties:\n"
                    "      security.protocol: SASL_SSL\n"
                    "      sasl.password: PW-east-123\n"
                    "      ssl.key.password: PW-key-456\n"
                    "      ssl.keystore.password: PW-ks-789\n"
                    "      sasl.username: PW-user\n"
                    "      ssl.key.pem: |\n"
                    "        -----BEGIN PRIVATE KEY-----\n"
                    "        PW-KEYDATA\n"
                    "        -----END PRIVATE KEY-----\n"
                    "      consumer.ssl.key.pem: PW-consumer-key\n"
                    "      ssl.key.location: /etc/PW-key-path.pem\n"
                    "      ssl.ca.pem: PW-ca\n"
                    "      ssl.certificate.location: /etc/aagw/cert.pem\n"
                    "  west:\n"
                    "    bootstrap_servers: h:2\n"
                    "    properties:\n"
                    "      sasl.oauthbearer.config: principal=PW-alice\n"
                    "      sasl.oauthbearer.client.secret: PW-oidc\n"),
            AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        out = dump(f->cfg);
        assert_null(strstr(out, "TOKEN-"));
        assert_null(strstr(out, "PW-"));
        assert_non_null(strstr(out, "\"sasl.password\": \"[redacted]\""));
        assert_non_null(strstr(out, "\"ssl.key.password\": \"[redacted]\""));
        assert_non_null(strstr(out, "token: \"[redacted]\""));
        assert_non_null(strstr(out, "\"ssl.key.pem\": \"[redacted]\""));
        assert_non_null(strstr(out, "\"consumer.ssl.key.pem\": "
                                    "\"[redacted]\""));
        assert_non_null(strstr(out, "\"sasl.username\": \"[redacted]\""));
        assert_non_null(strstr(out, "\"sasl.oauthbearer.config\": "
                                    "\"[redacted]\""));
        /* Not secrets: shown as given. */
        assert_non_null(strstr(out, "\"security.protocol\": \"SASL_SSL\""));
        assert_non_null(strstr(out, "\"ssl.certificate.location\": "
                                    "\"/etc/aagw/cert.pem\""));
        free(out);
        /* The getters still hand the real secret to the code that needs
         * it. */
        assert_string_equal(aagw_config_str(f->cfg, "admin.token"),
                            "TOKEN-abcdefghijklmnop");
}

/* The rule itself: librdkafka's sensitive names match whole dotted
 * components at the end of a path, in any case. */
static void test_secret_names(void **state) {
        static const char *const secret[] = {
            "ssl.keystore.password", "sasl.oauthbearer.client.SECRET",
            "admin.token", "ssl.key.pem", "ssl_key", "ssl.key.password",
            "ssl.key.location", "ssl.ca.pem", "sasl.username", "sasl.password",
            "sasl.oauthbearer.config", "producer.ssl.key.pem",
            "clusters.east.properties.SSL.KEY.PEM"};
        static const char *const plain[] = {
            "bootstrap_servers", "ssl.certificate.pem", "ssl.ca.location",
            "ssl.keystore.location", "sasl.mechanism", "xssl.key.pem",
            "ssl.key.pem.backup", "sasl.oauthbearer.client.id"};
        (void)state;

        for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
                if (!aagw_key_is_secret(secret[i]))
                        fail_msg("%s: not secret", secret[i]);
        for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
                if (aagw_key_is_secret(plain[i]))
                        fail_msg("%s: secret", plain[i]);
}

/* A bad secret is reported without its value, but with what was
 * expected: a short admin token names the minimum. */
static void test_secret_not_echoed_in_errors(void **state) {
        struct fixture *f = *state;
        errors_of(f, "admin:\n  token: tiny-PW\n");
        assert_string_equal(aagw_config_errors(f->cfg),
                            "gw.yaml:2:10: admin.token: expected 16 to 256 "
                            "characters\n");
}

/* ------------------------------ ROUND TRIP ----------------------------- */

static void test_dump_round_trip(void **state) {
        struct fixture *f = *state;
        char           *first, *second;
        aagw_config_t  *again;

        assert_int_equal(
            load(f, "gateway:\n  id: rt\n  site: west\n"
                    "clusters:\n"
                    "  east:\n"
                    "    bootstrap_servers: \"h:1\"\n"
                    "    properties:\n"
                    "      linger.ms: 5\n"
                    "      client.rack: \"rack \\\"1\\\"\"\n"
                    "  west:\n"
                    "    bootstrap_servers: h:2\n"
                    "replication:\n"
                    "  topics: ['a|b', \"c\\\\d\"]\n"
                    "  separator: _\n"
                    "  refresh_topics_interval: 120s\n"
                    "unify:\n"
                    "  topics:\n"
                    "    t1:\n"
                    "      mode: lww\n"),
            AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        first = dump(f->cfg);
        /* Durations come out in their largest exact unit. */
        assert_non_null(strstr(first, "refresh_topics_interval: 2m\n"));
        again = aagw_config_new();
        assert_int_equal(
            aagw_config_load_string(again, "dump", first, strlen(first)),
            AAGW_OK);
        assert_int_equal(aagw_config_validate(again), AAGW_OK);
        second = dump(again);
        assert_string_equal(first, second);
        assert_string_equal(aagw_config_str(again, "clusters.east.bootstrap_servers"),
                            "h:1");
        const char *const *kv;
        assert_int_equal(aagw_config_cluster_props(again, "east", &kv), 2);
        assert_string_equal(kv[3], "rack \"1\"");
        free(first);
        free(second);
        aagw_config_destroy(again);
}

/* ------------------------------ DURATIONS ------------------------------ */

static void test_durations(void **state) {
        int64_t ms;
        char    buf[32];
        (void)state;

        assert_int_equal(aagw_duration_parse("500ms", &ms), 0);
        assert_int_equal(ms, 500);
        assert_int_equal(aagw_duration_parse("1h30m", &ms), 0);
        assert_int_equal(ms, 5400000);
        assert_int_equal(aagw_duration_parse("7d", &ms), 0);
        assert_int_equal(ms, 604800000);
        assert_int_equal(aagw_duration_parse("5", &ms), -1);
        assert_int_equal(aagw_duration_parse("5x", &ms), -1);
        assert_int_equal(aagw_duration_parse("", &ms), -1);
        assert_int_equal(aagw_duration_parse("-5s", &ms), -1);
        assert_int_equal(aagw_duration_parse("99999999999999999999d", &ms), -1);
        aagw_duration_format(90000, buf, sizeof(buf));
        assert_string_equal(buf, "90s");
        aagw_duration_format(86400000, buf, sizeof(buf));
        assert_string_equal(buf, "1d");
        aagw_duration_format(1500, buf, sizeof(buf));
        assert_string_equal(buf, "1500ms");
}

/* --------------------------- REFERENCE / DOCS -------------------------- */

static void test_reference_lists_every_key(void **state) {
        char  *buf = NULL;
        size_t len = 0;
        FILE  *m   = open_memstream(&buf, &len);
        (void)state;

        aagw_config_reference(m, true);
        fclose(m);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                char head[256];
                snprintf(head, sizeof(head), "### `%s`\n", k->path);
                assert_non_null(strstr(buf, head));
                if (!strpbrk(k->desc, "<>"))
                        assert_non_null(strstr(buf, k->desc));
        }
        free(buf);
}

/* docs/configuration.md embeds the generated reference between two marker
 * lines; it must be byte-identical to what the table produces now. */
static void test_docs_match_key_table(void **state) {
        const char *root = getenv("AAGW_SOURCE_ROOT");
        char        path[4096], *doc = NULL, *gen = NULL;
        size_t      len = 0, glen = 0;
        (void)state;

        assert_non_null(root);
        snprintf(path, sizeof(path), "%s/docs/configuration.md", root);
        FILE *fp = fopen(path, "rb");
        assert_non_null(fp);
        doc = calloc(1, 1 << 20);
        len = fread(doc, 1, (1 << 20) - 1, fp);
        fclose(fp);
        assert_true(len > 0);
        const char *begin = strstr(doc, "<!-- BEGIN GENERATED KEYS -->\n");
        const char *end   = strstr(doc, "<!-- END GENERATED KEYS -->");
        assert_non_null(begin);
        assert_non_null(end);
        begin += strlen("<!-- BEGIN GENERATED KEYS -->\n");

        FILE *m = open_memstream(&gen, &glen);
        aagw_config_reference(m, true);
        fclose(m);
        if ((size_t)(end - begin) != glen || memcmp(begin, gen, glen))
                fail_msg("docs/configuration.md is out of date with the key "
                         "table: run scripts/gen-config-docs");
        free(gen);
        free(doc);
}

/* The replication policy is built from every replication.* key, whatever
 * else the file holds.  It used to stop reading at the first unify.topics
 * entry, so with the documented complete example `bad_provenance: fail`
 * became dead-letter and `groups: [g1]` let every group through. */
static void check_policy_keys(struct fixture *f, const char *unify) {
        char                 yaml[1024];
        char                 err[512];
        aagw_repl_policy_t  *pol;
        struct aagw_header   h   = {"aagw.prov", "1;garbage", 9};
        struct aagw_rec      rec = {.topic        = "clicks",
                                    .partition    = 0,
                                    .offset       = 7,
                                    .timestamp_ms = 1714557600123,
                                    .hdrs         = &h,
                                    .hdr_cnt      = 1};
        struct aagw_verdict  v;

        snprintf(yaml, sizeof(yaml),
                 "%s"
                 "replication:\n"
                 "  groups: [g1]\n"
                 "  groups_exclude: [g1-tmp]\n"
                 "  topic_configs_exclude: ['retention\\..*']\n"
                 "  bad_provenance: fail\n"
                 "  missing_id: fail\n"
                 "%s",
                 two_clusters, unify);
        assert_int_equal(load(f, yaml), AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        pol = gw_policy_new(f->cfg, err, sizeof(err));
        assert_non_null(pol);
        assert_true(aagw_repl_group_allowed(pol, "g1"));
        assert_false(aagw_repl_group_allowed(pol, "g2"));
        assert_false(aagw_repl_config_allowed(pol, "retention.ms"));
        assert_false(aagw_repl_config_allowed(pol, "min.insync.replicas"));
        assert_true(aagw_repl_config_allowed(pol, "cleanup.policy"));
        assert_int_equal(aagw_repl_verdict(pol, "east", "west", &rec, NULL, 0,
                                           &v),
                         AAGW_OK);
        assert_int_equal(v.kind, AAGW_VERDICT_REJECT);
        assert_int_equal(v.action, AAGW_BAD_FAIL);
        aagw_repl_policy_destroy(pol);
}

/* Values that the dump must write so that they load back as they were,
 * found by fuzz_config: a literal "${" (written "$${" in the file), C1
 * controls and YAML's other line breaks (U+0085, U+2028), and a value
 * longer than 511 bytes, which was cut to 511 on the way in. */
static void test_dump_round_trip_hard_values(void **state) {
        struct fixture *f = *state;
        char            yaml[2048], longv[1001], *first, *second;
        aagw_config_t  *again;
        const char     *v;

        memset(longv, 'h', 1000);
        longv[1000] = '\0';
        longv[4]    = ':';
        longv[5]    = '1';
        longv[6]    = ',';
        snprintf(yaml, sizeof(yaml),
                 "%s"
                 "    properties:\n"
                 "      client.rack: \"r$${x} \\x8b \\N \\L end\"\n"
                 "gateway:\n"
                 "  state_dir: \"%s\"\n",
                 two_clusters, longv);
        assert_int_equal(load(f, yaml), AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        v = aagw_config_str(f->cfg, "gateway.state_dir");
        assert_non_null(v);
        assert_int_equal(strlen(v), 1000);
        first = dump(f->cfg);
        again = aagw_config_new();
        assert_int_equal(
            aagw_config_load_string(again, "dump", first, strlen(first)),
            AAGW_OK);
        assert_int_equal(aagw_config_validate(again), AAGW_OK);
        second = dump(again);
        assert_string_equal(first, second);
        {
                const char *const *kv;
                assert_int_equal(aagw_config_cluster_props(again, "west", &kv),
                                 1);
                assert_string_equal(kv[1], "r${x} \xc2\x8b \xc2\x85 "
                                           "\xe2\x80\xa8 end");
        }
        free(first);
        free(second);
        aagw_config_destroy(again);
}

static void test_policy_keys_without_unify_topics(void **state) {
        check_policy_keys(*state, "");
}

static void test_policy_keys_with_unify_topics(void **state) {
        check_policy_keys(*state, "unify:\n"
                                  "  topics:\n"
                                  "    profiles:\n"
                                  "      mode: lww\n"
                                  "      entity_key: key\n");
}

/* replication.per_flow: a flow's own topic lists replace the global
 * ones for that flow only (gw_policy_new_flow, used by the engine and the
 * offsets commands); the others keep replication.topics. */
static void test_per_flow_topics(void **state) {
        struct fixture     *f = *state;
        char                yaml[1024], err[512], *first, *second;
        aagw_repl_policy_t *ew, *we, *glob;
        aagw_config_t      *again;

        snprintf(yaml, sizeof(yaml),
                 "%s"
                 "replication:\n"
                 "  topics: [\"shared.*\"]\n"
                 "  topics_exclude: [shared-tmp]\n"
                 "  per_flow:\n"
                 "    east->west:\n"
                 "      topics: [orders, \"clicks\\\\d+\"]\n"
                 "    west->east:\n"
                 "      topics_exclude: [\"shared-x.*\"]\n",
                 two_clusters);
        assert_int_equal(load(f, yaml), AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        assert_true(gw_flow_has_own_topics(f->cfg, "east", "west"));
        assert_true(gw_flow_has_own_topics(f->cfg, "west", "east"));
        ew   = gw_policy_new_flow(f->cfg, "east", "west", err, sizeof(err));
        we   = gw_policy_new_flow(f->cfg, "west", "east", err, sizeof(err));
        glob = gw_policy_new(f->cfg, err, sizeof(err));
        assert_non_null(ew);
        assert_non_null(we);
        assert_non_null(glob);
        assert_true(aagw_repl_topic_allowed(ew, "orders"));
        assert_true(aagw_repl_topic_allowed(ew, "clicks42"));
        assert_false(aagw_repl_topic_allowed(ew, "shared-a"));
        assert_false(aagw_repl_topic_allowed(we, "orders"));
        assert_true(aagw_repl_topic_allowed(we, "shared-tmp"));
        assert_false(aagw_repl_topic_allowed(we, "shared-x1"));
        assert_true(aagw_repl_topic_allowed(glob, "shared-a"));
        assert_false(aagw_repl_topic_allowed(glob, "shared-tmp"));
        assert_false(aagw_repl_topic_allowed(glob, "orders"));
        aagw_repl_policy_destroy(ew);
        aagw_repl_policy_destroy(we);
        aagw_repl_policy_destroy(glob);

        /* The dump loads back to the same config. */
        first = dump(f->cfg);
        assert_non_null(strstr(first, "  per_flow:\n    east->west:\n"
                                      "      topics:\n        - \"orders\"\n"));
        again = aagw_config_new();
        assert_int_equal(
            aagw_config_load_string(again, "dump", first, strlen(first)),
            AAGW_OK);
        second = dump(again);
        assert_string_equal(first, second);
        free(first);
        free(second);
        aagw_config_destroy(again);
}

static void test_err_per_flow(void **state) {
        struct fixture *f = *state;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml),
                 "%s"
                 "replication:\n"
                 "  flows: [east->west]\n"
                 "  per_flow:\n"
                 "    east->west: {topics: [a]}\n"
                 "    west->east: {topics: [b]}\n"
                 "    east->north: {topics: [c]}\n"
                 "    eastwest: {topics: [d]}\n"
                 "    east->east: {topics: [e]}\n"
                 "    east->west2: {topicz: [f]}\n",
                 two_clusters);
        assert_string_equal(
            errors_of(f, yaml),
            "gw.yaml:12:5: replication.per_flow.eastwest: not a flow "
            "SOURCE->TARGET of two cluster aliases\n"
            "gw.yaml:13:5: replication.per_flow.east->east: not a flow "
            "SOURCE->TARGET of two cluster aliases\n"
            "gw.yaml:14:19: replication.per_flow.east->west2.topicz: unknown "
            "key (did you mean 'topics'?)\n"
            "gw.yaml:10:5: replication.per_flow: flow west->east is not one "
            "of replication.flows\n"
            "gw.yaml:11:5: replication.per_flow: flow east->north names a "
            "cluster that is not configured\n"
            "gw.yaml:14:5: replication.per_flow: flow east->west2 names a "
            "cluster that is not configured\n");
        assert_int_equal(aagw_config_set(f->cfg,
                                         "replication.per_flow.east-west."
                                         "topics",
                                         "x", "--set"),
                         AAGW_ERR_CONFIG);
}

/* ------------------------------- ADMIN TLS ----------------------------- */

/* admin.tls.* is dumped as a "tls:" mapping under admin, the password
 * redacted, and loads back. */
static void test_admin_tls_dump(void **state) {
        struct fixture *f = *state;
        char           *first, *second;
        aagw_config_t  *again;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml),
                 "%sadmin:\n"
                 "  listen: 127.0.0.1:9644\n"
                 "  health_listen: 127.0.0.1:9645\n"
                 "  tls:\n"
                 "    cert: /etc/aagw/admin.pem\n"
                 "    key: /etc/aagw/admin.key\n"
                 "    key_password: PW-tls-123\n"
                 "    client_ca: /etc/aagw/clients-ca.pem\n",
                 two_clusters);
        assert_int_equal(load(f, yaml), AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        first = dump(f->cfg);
        assert_non_null(strstr(first,
                               "admin:\n"
                               "  listen: \"127.0.0.1:9644\"\n"
                               "  # token: (unset)\n"
                               "  tls:\n"
                               "    cert: \"/etc/aagw/admin.pem\"\n"
                               "    key: \"/etc/aagw/admin.key\"\n"
                               "    key_password: \"[redacted]\"\n"
                               "    client_ca: \"/etc/aagw/clients-ca.pem\"\n"
                               "  health_listen: \"127.0.0.1:9645\"\n"));
        assert_null(strstr(first, "PW-tls"));
        again = aagw_config_new();
        assert_int_equal(
            aagw_config_load_string(again, "dump", first, strlen(first)),
            AAGW_OK);
        assert_int_equal(aagw_config_validate(again), AAGW_OK);
        second = dump(again);
        assert_string_equal(first, second);
        assert_string_equal(aagw_config_str(again, "admin.tls.client_ca"),
                            "/etc/aagw/clients-ca.pem");
        free(first);
        free(second);
        aagw_config_destroy(again);
}

/* What goes together, reported at the key that is set. */
static void test_admin_tls_rules(void **state) {
        struct fixture *f = *state;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml),
                 "%sadmin:\n  listen: 127.0.0.1:9644\n  tls:\n"
                 "    key: /k.pem\n    key_password: PW-x-123\n",
                 two_clusters);
        assert_string_equal(errors_of(f, yaml),
                            "gw.yaml:9:10: admin.tls.key: admin.tls.cert and "
                            "admin.tls.key go together: set both or neither\n");
}

static void test_admin_tls_needs_listen(void **state) {
        struct fixture *f = *state;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml),
                 "%sadmin:\n  health_listen: 127.0.0.1:9645\n"
                 "  tls:\n    client_ca: /ca.pem\n",
                 two_clusters);
        assert_string_equal(
            errors_of(f, yaml),
            "gw.yaml:9:16: admin.tls.client_ca: set admin.listen (--admin) "
            "as well: without it there is no admin endpoint\n"
            "gw.yaml:7:18: admin.health_listen: set admin.listen (--admin) "
            "as well: without it there is no admin endpoint\n"
            "gw.yaml:9:16: admin.tls.client_ca: client certificates need "
            "TLS: set admin.tls.cert and admin.tls.key as well\n");
}

static void test_admin_health_listen_loopback(void **state) {
        struct fixture *f = *state;
        char            yaml[1024];

        snprintf(yaml, sizeof(yaml),
                 "%sadmin:\n  listen: 127.0.0.1:9644\n"
                 "  health_listen: 0.0.0.0:9645\n",
                 two_clusters);
        assert_string_equal(errors_of(f, yaml),
                            "gw.yaml:8:18: admin.health_listen: must be a "
                            "loopback address: it answers without token or "
                            "client certificate\n");
}

/* ------------------------------- SETTINGS ------------------------------ */

/* The binding is checked from the key table itself, so a key added later
 * is covered without touching these tests: every row has a field of the
 * storage its type needs, named as the key, that gets the key's default
 * and a value set on top of it, as the getters read them. */

static enum cfg_ftype storage_of(enum cfg_type t) {
        switch (t) {
        case CT_INT:
        case CT_DURATION:
                return FT_I64;
        case CT_BOOL:
                return FT_BOOL;
        case CT_ENUM:
                return FT_ENUM;
        case CT_LIST:
        case CT_REGEXES:
        case CT_FLOWS:
                return FT_LIST;
        case CT_PROPS:
                return FT_PROPS;
        default:
                return FT_STR;
        }
}

/* "clusters" for "clusters.*.bootstrap_servers", "" for a plain key. */
static void kind_of(const struct cfg_key *k, char *buf, size_t size) {
        const char *star = strstr(k->path, ".*.");
        snprintf(buf, size, "%.*s", star ? (int)(star - k->path) : 0, k->path);
}

/* Where row 'k's field is in 's': a plain key's in 's' itself, an
 * instance key's in the entry named 'inst'. */
static const char *field_at(const struct aagw_settings *s,
                            const struct cfg_key *k, const char *inst) {
        char        kind[64];
        const void *base = s;

        kind_of(k, kind, sizeof(kind));
        if (!strcmp(kind, "clusters"))
                base = aagw_settings_cluster(s, inst);
        else if (!strcmp(kind, "replication.per_flow"))
                base = aagw_settings_per_flow(s, "east", "west");
        else if (!strcmp(kind, "unify.topics"))
                base = aagw_settings_unify_topic(s, inst);
        else if (*kind)
                fail_msg("%s: an instance mapping the test does not know",
                         k->path);
        assert_non_null(base);
        return (const char *)base + k->off;
}

/* Check the field of 'k' at 'at' against the config's stored 'value'
 * ('path' concrete), converted here on the test's own, and against what
 * the getters return for 'path'. */
static void check_field(const aagw_config_t *cfg, const struct cfg_key *k,
                        const char *path, const char *at) {
        const char *const *items;
        size_t             n   = aagw_config_list(cfg, path, &items);
        const char        *str = n ? items[0] : NULL;

        switch (k->ftype) {
        case FT_STR:
                if (!str)
                        assert_null(*(const char *const *)at);
                else
                        assert_string_equal(*(const char *const *)at, str);
                assert_ptr_equal(*(const char *const *)at,
                                 aagw_config_str(cfg, path));
                break;
        case FT_I64: {
                int64_t want = 0;
                if (str && k->type == CT_DURATION)
                        assert_int_equal(aagw_duration_parse(str, &want), 0);
                else if (str)
                        want = strtoll(str, NULL, 10);
                assert_int_equal(*(const int64_t *)at, want);
                assert_int_equal(*(const int64_t *)at,
                                 k->type == CT_DURATION
                                     ? aagw_config_duration_ms(cfg, path)
                                     : aagw_config_int(cfg, path));
                break;
        }
        case FT_BOOL:
                assert_int_equal(*(const bool *)at,
                                 str && !strcmp(str, "true"));
                assert_int_equal(*(const bool *)at,
                                 aagw_config_bool(cfg, path));
                break;
        case FT_ENUM: {
                int want = -1, i = 0;
                for (const char *c = k->choices; str && c; i++) {
                        size_t len = strcspn(c, "|");
                        if (len == strlen(str) && !strncmp(c, str, len))
                                want = i;
                        c = c[len] ? c + len + 1 : NULL;
                }
                assert_true(!str || want >= 0);
                assert_int_equal(*(const int *)at, want);
                break;
        }
        case FT_LIST: {
                const struct aagw_cfg_list *l = (const void *)at;
                assert_int_equal(l->n, n);
                for (size_t i = 0; i < n; i++)
                        assert_string_equal(l->items[i], items[i]);
                assert_int_equal(l->set, aagw_config_is_set(cfg, path));
                break;
        }
        case FT_PROPS: {
                const struct aagw_cfg_props *p = (const void *)at;
                const char *const           *kv;
                char                         alias[64];
                snprintf(alias, sizeof(alias), "%.*s",
                         (int)strcspn(path + strlen("clusters."), "."),
                         path + strlen("clusters."));
                assert_int_equal(p->n,
                                 aagw_config_cluster_props(cfg, alias, &kv));
                for (size_t i = 0; i < 2 * p->n; i++)
                        assert_string_equal(p->kv[i], kv[i]);
                break;
        }
        case FT_NONE:
                fail_msg("%s: not bound", k->path);
        }
}

/* The concrete path of row 'k' for the test's instances: cluster east,
 * flow east->west, topic clicks. */
static void concrete(const struct cfg_key *k, char *buf, size_t size,
                     const char **inst) {
        char kind[64];

        kind_of(k, kind, sizeof(kind));
        *inst = !strcmp(kind, "clusters")               ? "east"
                : !strcmp(kind, "replication.per_flow") ? "east->west"
                : !strcmp(kind, "unify.topics")         ? "clicks"
                                                        : NULL;
        if (*inst)
                snprintf(buf, size, "%s.%s.%s", kind, *inst,
                         k->path + strlen(kind) + 3);
        else
                snprintf(buf, size, "%s", k->path);
}

static void test_settings_rows_bound(void **state) {
        (void)state;
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                char        kind[64], want[256];
                const char *leaf;

                kind_of(k, kind, sizeof(kind));
                leaf = *kind ? k->path + strlen(kind) + 3 : k->path;
                snprintf(want, sizeof(want), "%s%s", leaf,
                         k->type == CT_DURATION ? "_ms" : "");
                if (k->ftype != storage_of(k->type))
                        fail_msg("%s: bound as storage %d, its type needs %d",
                                 k->path, k->ftype, storage_of(k->type));
                assert_non_null(k->field);
                if (strcmp(k->field, want))
                        fail_msg("%s: bound to field %s, expected %s", k->path,
                                 k->field, want);
                /* Two rows never share a field. */
                for (const struct cfg_key *o = aagw_config_keys; o < k; o++) {
                        char okind[64];
                        kind_of(o, okind, sizeof(okind));
                        if (!strcmp(kind, okind) && o->off == k->off)
                                fail_msg("%s and %s share a field", o->path,
                                         k->path);
                }
        }
}

static void test_settings_defaults(void **state) {
        struct fixture             *f = *state;
        const struct aagw_settings *s;

        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        s = aagw_config_settings(f->cfg);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++)
                if (!strchr(k->path, '*'))
                        check_field(f->cfg, k, k->path,
                                    (const char *)s + k->off);
        assert_int_equal(s->nclusters, 0);
        assert_int_equal(s->replication.nper_flow, 0);
        assert_int_equal(s->unify.ntopics, 0);
        /* A few by name, as the program reads them. */
        assert_string_equal(s->gateway.id, "aagw");
        assert_int_equal(s->gateway.mode, GW_MODE_ACTIVE_ACTIVE);
        assert_int_equal(s->replication.refresh_topics_interval_ms, 5000);
        assert_int_equal(s->unify.window_ms, 86400000);
        assert_int_equal(s->replication.groups_exclude.n, 3);
        assert_false(s->replication.groups_exclude.set);
        assert_null(s->gateway.site);
        assert_int_equal(s->replication.factor, 0);
}

/* A valid value of row 'k' other than its default (for an enum its last
 * word, or the first where the last is the default). */
static void other_value(const struct cfg_key *k, char *buf, size_t size) {
        const char *d = k->def;

        switch (k->type) {
        case CT_STR: {
                size_t len = k->min > 12 ? (size_t)k->min : 12;
                if (k->max && len > (size_t)k->max)
                        len = (size_t)k->max;
                snprintf(buf, size, "%.*s", (int)len,
                         "set-value-from-the-test");
                break;
        }
        case CT_NAME:
                snprintf(buf, size, "set.name-1");
                break;
        case CT_ALIAS:
                snprintf(buf, size, "west");
                break;
        case CT_INT:
                snprintf(buf, size, "%" PRId64,
                         d && strtoll(d, NULL, 10) == k->min + 1 ? k->min + 2
                                                                 : k->min + 1);
                break;
        case CT_BOOL:
                snprintf(buf, size, "%s",
                         d && !strcmp(d, "true") ? "false" : "true");
                break;
        case CT_ENUM: {
                const char *last = strrchr(k->choices, '|');
                last             = last ? last + 1 : k->choices;
                if (d && !strcmp(last, d))
                        snprintf(buf, size, "%.*s",
                                 (int)strcspn(k->choices, "|"), k->choices);
                else
                        snprintf(buf, size, "%s", last);
                break;
        }
        case CT_DURATION: {
                int64_t def = 0;
                if (d)
                        aagw_duration_parse(d, &def);
                snprintf(buf, size, "%" PRId64 "ms",
                         def == k->min + 1000 ? k->min + 2000 : k->min + 1000);
                break;
        }
        case CT_HOSTPORT:
                snprintf(buf, size, "127.0.0.1:1234");
                break;
        case CT_IDRULE:
                snprintf(buf, size, "header:x-id");
                break;
        case CT_KEYRULE:
                snprintf(buf, size, "json:user");
                break;
        case CT_SEP:
                snprintf(buf, size, "_");
                break;
        case CT_LIST:
                snprintf(buf, size, "set-item");
                break;
        case CT_REGEXES:
                snprintf(buf, size, "set-.*");
                break;
        case CT_FLOWS:
                snprintf(buf, size, "east->west");
                break;
        case CT_PROPS:
                snprintf(buf, size, "client.rack");
                break;
        }
}

static void test_settings_set_values(void **state) {
        struct fixture             *f = *state;
        const struct aagw_settings *s;

        assert_int_equal(load(f, two_clusters), AAGW_OK);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                char        path[256], value[256], prop[520];
                const char *inst;

                concrete(k, path, sizeof(path), &inst);
                other_value(k, value, sizeof(value));
                if (k->type == CT_PROPS) {
                        snprintf(prop, sizeof(prop), "%s.%s", path, value);
                        assert_int_equal(
                            aagw_config_set(f->cfg, prop, "r1", "--set"),
                            AAGW_OK);
                } else if (aagw_config_set(f->cfg, path, value, "--set"))
                        fail_msg("%s=%s: %s", path, value,
                                 aagw_config_errors(f->cfg));
        }
        /* Cross-checks may object (a TLS key without its files): the
         * settings are bound whatever they find. */
        aagw_config_validate(f->cfg);
        s = aagw_config_settings(f->cfg);
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                char        path[256], value[256];
                const char *inst;

                concrete(k, path, sizeof(path), &inst);
                assert_true(aagw_config_is_set(f->cfg, path));
                check_field(f->cfg, k, path, field_at(s, k, inst));
                /* And it is the value set, not the default. */
                other_value(k, value, sizeof(value));
                if (k->ftype == FT_STR && k->type != CT_DURATION)
                        assert_string_equal(
                            *(const char *const *)field_at(s, k, inst), value);
        }
        assert_int_equal(s->nclusters, 2);
        assert_string_equal(s->clusters[1].alias, "west");
        assert_string_equal(s->clusters[1].bootstrap_servers, "127.0.0.1:9093");
        assert_int_equal(s->clusters[0].properties.n, 1);
        assert_string_equal(s->clusters[0].properties.kv[0], "client.rack");
        assert_string_equal(s->clusters[0].properties.kv[1], "r1");
        assert_true(s->replication.topics.set);
        assert_string_equal(s->replication.topics.items[0], "set-.*");
        assert_int_equal(s->replication.nper_flow, 1);
        assert_true(s->replication.per_flow[0].topics_exclude.set);
        assert_null(aagw_settings_per_flow(s, "west", "east"));
        assert_null(aagw_settings_cluster(s, "north"));
        assert_int_equal(s->unify.topics[0].mode, GW_UNIFY_OFF);
}

/* An instance key left unset reads as "inherit": NULL, GW_UNIFY_INHERIT,
 * a list not set. */
static void test_settings_instance_unset(void **state) {
        struct fixture                         *f = *state;
        char                                    yaml[512];
        const struct aagw_settings             *s;
        const struct aagw_unify_topic_settings *t;
        const struct aagw_flow_settings        *fl;

        snprintf(yaml, sizeof(yaml),
                 "%s"
                 "replication:\n"
                 "  per_flow:\n"
                 "    west->east:\n"
                 "      topics: []\n"
                 "unify:\n"
                 "  topics:\n"
                 "    clicks:\n"
                 "      output: all-clicks\n",
                 two_clusters);
        assert_int_equal(load(f, yaml), AAGW_OK);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        s = aagw_config_settings(f->cfg);
        assert_non_null(t = aagw_settings_unify_topic(s, "clicks"));
        assert_int_equal(t->mode, GW_UNIFY_INHERIT);
        assert_null(t->id);
        assert_null(t->entity_key);
        assert_string_equal(t->output, "all-clicks");
        assert_null(aagw_settings_unify_topic(s, "profiles"));
        assert_non_null(fl = aagw_settings_per_flow(s, "west", "east"));
        /* An empty list given is set: that flow replicates nothing. */
        assert_true(fl->topics.set);
        assert_int_equal(fl->topics.n, 0);
        assert_false(fl->topics_exclude.set);
        assert_null(s->clusters[0].properties.kv);
}

/* Binding goes over the values once: looking each instance key up by
 * path made it quadratic (20,000 unify.topics took 51 s to validate;
 * 5,000 about 1 s, against 3 ms). */
static void test_settings_many_instances_fast(void **state) {
        struct fixture *f = *state;
        enum { N = 5000 };
        char           *yaml = malloc((size_t)N * 64 + 256), *p = yaml;
        struct timespec t0, t1;
        double          secs;

        assert_non_null(yaml);
        p += sprintf(p, "%sunify:\n  topics:\n", two_clusters);
        for (int i = 0; i < N; i++)
                p +=
                    sprintf(p, "    t%d:\n      mode: lww\n      id: key\n", i);
        assert_int_equal(load(f, yaml), AAGW_OK);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        assert_int_equal(aagw_config_validate(f->cfg), AAGW_OK);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        secs = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (secs > 0.5)
                fail_msg("validating %d unify.topics took %.2f s of CPU", N,
                         secs);
        const struct aagw_settings *s = aagw_config_settings(f->cfg);
        assert_int_equal(s->unify.ntopics, N);
        assert_string_equal(s->unify.topics[N - 1].name, "t4999");
        assert_int_equal(s->unify.topics[N - 1].mode, GW_UNIFY_LWW);
        assert_string_equal(s->unify.topics[N - 1].id, "key");
        assert_null(s->unify.topics[N - 1].output);
        free(yaml);
}

/* The C constants the program compares enum fields with, against the
 * words of the key table: every word of every enum key must be listed
 * here, so a word added to a key needs its constant. */
static void test_settings_enum_constants(void **state) {
        static const struct {
                const char *path, *word;
                int         value;
        } words[] = {
            {"gateway.mode", "active-active", GW_MODE_ACTIVE_ACTIVE},
            {"gateway.mode", "active-passive", GW_MODE_ACTIVE_PASSIVE},
            {"gateway.mode", "aggregate", GW_MODE_AGGREGATE},
            {"gateway.log_level", "debug", AAGW_LOG_DEBUG},
            {"gateway.log_level", "info", AAGW_LOG_INFO},
            {"gateway.log_level", "warn", AAGW_LOG_WARN},
            {"gateway.log_level", "error", AAGW_LOG_ERROR},
            {"replication.policy", "prefix", AAGW_NAMING_PREFIX},
            {"replication.policy", "identity", AAGW_NAMING_IDENTITY},
            {"replication.fetch_window", "auto", GW_FETCH_WINDOW_AUTO},
            {"replication.fetch_window", "fixed", GW_FETCH_WINDOW_FIXED},
            /* an int: the number of connections, auto 0 */
            {"replication.fetch_connections", "auto", 0},
            {"replication.fetch_connections", "1", 1},
            {"replication.fetch_connections", "2", 2},
            {"replication.fetch_connections", "3", 3},
            {"replication.fetch_connections", "4", 4},
            {"replication.fetch_connections", "5", 5},
            {"replication.fetch_connections", "6", 6},
            {"replication.fetch_connections", "7", 7},
            {"replication.fetch_connections", "8", 8},
            {"replication.bad_provenance", "pass", AAGW_BAD_PASS},
            {"replication.bad_provenance", "dead-letter", AAGW_BAD_DEAD_LETTER},
            {"replication.bad_provenance", "fail", AAGW_BAD_FAIL},
            {"replication.missing_id", "derive", AAGW_BAD_PASS},
            {"replication.missing_id", "dead-letter", AAGW_BAD_DEAD_LETTER},
            {"replication.missing_id", "fail", AAGW_BAD_FAIL},
            {"replication.on_truncation", "resume", GW_TRUNCATION_RESUME},
            {"replication.on_truncation", "fail", GW_TRUNCATION_FAIL},
            {"unify.mode", "dedup", GW_UNIFY_DEDUP},
            {"unify.mode", "lww", GW_UNIFY_LWW},
            {"unify.mode", "off", GW_UNIFY_OFF},
            {"unify.filter", "bloom", GW_FILTER_BLOOM},
            {"unify.filter", "exact", GW_FILTER_EXACT},
            {"unify.topics.*.mode", "dedup", GW_UNIFY_DEDUP},
            {"unify.topics.*.mode", "lww", GW_UNIFY_LWW},
            {"unify.topics.*.mode", "off", GW_UNIFY_OFF},
            {"mm2.offset_syncs_location", "source", GW_SYNCS_AT_SOURCE},
            {"mm2.offset_syncs_location", "target", GW_SYNCS_AT_TARGET},
            {"scale_out.rebalance", "eager", GW_REBALANCE_EAGER},
            {"scale_out.rebalance", "cooperative", GW_REBALANCE_COOPERATIVE},
        };
        size_t nwords = sizeof(words) / sizeof(words[0]);

        (void)state;
        for (const struct cfg_key *k = aagw_config_keys; k->path; k++) {
                if (k->type != CT_ENUM)
                        continue;
                for (const char *c = k->choices; c;) {
                        size_t len   = strcspn(c, "|");
                        bool   found = false;
                        for (size_t i = 0; i < nwords; i++)
                                found |= !strcmp(words[i].path, k->path) &&
                                         strlen(words[i].word) == len &&
                                         !strncmp(words[i].word, c, len);
                        if (!found)
                                fail_msg("%s: word %.*s has no constant in "
                                         "this test",
                                         k->path, (int)len, c);
                        c = c[len] ? c + len + 1 : NULL;
                }
        }
        for (size_t i = 0; i < nwords; i++) {
                aagw_config_t              *cfg = aagw_config_new();
                const struct cfg_key       *k = gw_cfg_key_exact(words[i].path);
                const struct aagw_settings *s;
                char                        path[256], buf[64];
                const char                 *inst, *at;

                assert_non_null(k);
                concrete(k, path, sizeof(path), &inst);
                assert_int_equal(aagw_config_load_string(cfg, "gw.yaml",
                                                         two_clusters,
                                                         strlen(two_clusters)),
                                 AAGW_OK);
                assert_int_equal(
                    aagw_config_set(cfg, path, words[i].word, "--set"),
                    AAGW_OK);
                aagw_config_validate(cfg);
                s  = aagw_config_settings(cfg);
                at = field_at(s, k, inst);
                if (*(const int *)at != words[i].value)
                        fail_msg("%s: %s binds to %d, the constant is %d", path,
                                 words[i].word, *(const int *)at,
                                 words[i].value);
                if (!inst)
                        assert_string_equal(
                            aagw_settings_word(s, at, buf, sizeof(buf)),
                            words[i].word);
                aagw_config_destroy(cfg);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
            T(test_defaults),
            T(test_valid_file),
            T(test_empty_and_null),
            T(test_err_syntax),
            T(test_err_syntax_tab),
            T(test_err_unclosed_at_end),
            T(test_err_bad_bytes_located),
            T(test_err_count_capped),
            T(test_many_keys_fast),
            T(test_err_unknown_key_suggests),
            T(test_err_types),
            T(test_err_replication_values),
            T(test_separators),
            T(test_err_duplicate_key),
            T(test_err_two_documents),
            T(test_err_clusters),
            T(test_err_in_flight),
            T(test_err_references),
            T(test_err_mode_needs),
            T(test_err_admin_needs_token),
            T(test_env_substitution),
            T(test_env_refs),
            T(test_env_errors),
            T(test_flags_override_file),
            T(test_flag_errors),
            T(test_redaction),
            T(test_secret_names),
            T(test_secret_not_echoed_in_errors),
            T(test_dump_round_trip),
            T(test_durations),
            T(test_reference_lists_every_key),
            T(test_docs_match_key_table),
            T(test_dump_round_trip_hard_values),
            T(test_policy_keys_without_unify_topics),
            T(test_policy_keys_with_unify_topics),
            T(test_per_flow_topics),
            T(test_err_per_flow),
            T(test_admin_tls_dump),
            T(test_admin_tls_rules),
            T(test_admin_tls_needs_listen),
            T(test_admin_health_listen_loopback),
            T(test_settings_rows_bound),
            T(test_settings_defaults),
            T(test_settings_set_values),
            T(test_settings_instance_unset),
            T(test_settings_many_instances_fast),
            T(test_settings_enum_constants),
#undef T
        };
        return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
