/*
 * tests/unit/test_mm2_seeds.c: the MirrorMaker 2 files of the seed
 * documents (tests/unit/mm2-seeds/, each naming where it came from)
 * through `aagw config import-mm2`, and the ways a properties file says
 * something other than what MM2 reads, which those files show: a
 * "# comment" after a value, a regex backslash the format drops, old key
 * names, blanks after a value, a separator key MM2 does not have.  aagw
 * reads each as MirrorMaker 2 (Kafka 4.1.1) does and says so with the
 * line; tests/interop/test_mm2_config.c checks the same files against
 * MM2's own code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "config.h"

static char tmpdir[] = "/tmp/aagw-mm2seeds-XXXXXX";

/* The fixture 'name' of tests/unit/mm2-seeds, whole; caller frees. */
static char *seed(const char *name) {
        const char *root = getenv("AAGW_SOURCE_ROOT");
        char        path[1024];
        FILE       *f;
        char       *buf;
        long        n;

        assert_non_null(root);
        snprintf(path, sizeof(path), "%s/tests/unit/mm2-seeds/%s", root, name);
        f = fopen(path, "rb");
        if (!f)
                fail_msg("cannot open %s", path);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        rewind(f);
        buf = malloc((size_t)n + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static aagw_config_t *load(const char *file, const char *text,
                           aagw_err_t want) {
        aagw_config_t *cfg = aagw_config_new();

        assert_non_null(cfg);
        assert_int_equal(aagw_config_load_mm2(cfg, file, text, strlen(text)),
                         want);
        return cfg;
}

static void assert_list(const aagw_config_t *cfg, const char *key,
                        const char *const *want, size_t n) {
        const char *const *items;
        size_t             got = aagw_config_list(cfg, key, &items);

        if (got != n)
                fail_msg("%s: %zu items, expected %zu", key, got, n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(items[i], want[i]);
}

static char *dump(const aagw_config_t *cfg) {
        char  *buf = NULL;
        size_t len = 0;
        FILE  *m   = open_memstream(&buf, &len);

        aagw_config_dump(cfg, m);
        fclose(m);
        return buf;
}

/* import-mm2's YAML for 'text' (no warnings asserted here), checked to
 * load back to the effective config of 'direct'; returns the YAML. */
static char *yaml_of(const char *file, const char *text,
                     const aagw_config_t *direct) {
        aagw_config_t *cfg = aagw_config_new(), *back = aagw_config_new();
        char          *yaml = NULL, *a, *b;
        size_t         len  = 0;
        FILE          *m    = open_memstream(&yaml, &len);

        assert_int_equal(aagw_config_mm2_to_yaml(cfg, file, text, strlen(text),
                                                 false, NULL, m),
                         AAGW_OK);
        fclose(m);
        assert_int_equal(aagw_config_load_string(back, "aagw.yaml", yaml, len),
                         AAGW_OK);
        assert_int_equal(aagw_config_validate(back), AAGW_OK);
        a = dump(direct);
        b = dump(back);
        assert_string_equal(b, a);
        free(a);
        free(b);
        aagw_config_destroy(cfg);
        aagw_config_destroy(back);
        return yaml;
}

/* ------------------------------------------------------------ the seeds -- */

/* The complete deployment file: one flow (us-east->us-west), its own
 * topic and group lists, heartbeats every 5 s, group offsets synced,
 * replication factor 3.  Line 10, "us-west->us-east.enabled = false
 * # Active-Passive ...", is read as MM2 reads it (the flow off) with a
 * warning; so are the backslash in ".*\.internal" and the old names
 * topics.blacklist / groups.blacklist. */
static void test_seed_complete(void **state) {
        static const char *const flows[]  = {"us-east->us-west"};
        static const char *const topics[] = {"orders.*", "payments.*",
                                             "inventory.*"};
        static const char *const texcl[]  = {".*.internal",
                                             "__consumer_offsets"};
        static const char *const groups[] = {"payment-consumer-group",
                                             "order-processor-group"};
        static const char *const gexcl[]  = {"console-consumer-.*"};
        char                    *text     = seed("complete.properties");
        aagw_config_t           *cfg = load("complete.properties", text, AAGW_OK);
        char                    *yaml;
        (void)state;

        assert_string_equal(aagw_config_errors(cfg), "");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        assert_string_equal(
            aagw_config_warnings(cfg),
            "complete.properties:10: us-west->us-east.enabled: read as "
            "false, the flow not enabled: a properties file has no comment "
            "after a value, so the value is all of \"false    # ...\", which "
            "MirrorMaker 2's connectors refuse as neither true nor false: "
            "MM2 runs none of this flow either\n"
            "complete.properties:14: us-east->us-west.topics.blacklist: read "
            "as MirrorMaker 2 before Kafka 4.0 read it: topics.blacklist is "
            "the old name of topics.exclude, which Kafka 4.0 removed: MM2 "
            "4.x ignores this line; rename the key to keep MM2 and aagw "
            "alike\n"
            "complete.properties:14: us-east->us-west.topics.blacklist: read "
            "as MirrorMaker 2 reads it: a properties file drops the "
            "backslash before \".\", so the regexes are \".*.internal, "
            "__consumer_offsets\"; write \"\\\\.\" in the file for the regex "
            "\"\\.\"\n"
            "complete.properties:18: us-east->us-west.groups.blacklist: read "
            "as MirrorMaker 2 before Kafka 4.0 read it: groups.blacklist is "
            "the old name of groups.exclude, which Kafka 4.0 removed: MM2 "
            "4.x ignores this line; rename the key to keep MM2 and aagw "
            "alike\n"
            "complete.properties:22: "
            "us-east->us-west.sync.group.offsets.interval.seconds: ignored: "
            "aagw commits synced group offsets with each checkpoint "
            "(mm2.checkpoints_interval)\n"
            "complete.properties:37: checkpoints.topic.replication.factor: "
            "ignored: aagw creates its internal topics with the target "
            "broker's default replication factor\n"
            "complete.properties:38: heartbeats.topic.replication.factor: "
            "ignored: aagw creates its internal topics with the target "
            "broker's default replication factor\n"
            "complete.properties:39: offset-syncs.topic.replication.factor: "
            "ignored: aagw creates its internal topics with the target "
            "broker's default replication factor\n"
            "complete.properties:43: config.storage.topic: ignored: a Kafka "
            "Connect worker or REST setting; aagw keeps its state in the "
            "state directory\n"
            "complete.properties:44: offset.storage.topic: ignored: a Kafka "
            "Connect worker or REST setting; aagw keeps its state in the "
            "state directory\n"
            "complete.properties:45: status.storage.topic: ignored: a Kafka "
            "Connect worker or REST setting; aagw keeps its state in the "
            "state directory\n"
            "complete.properties:46: config.storage.replication.factor: "
            "ignored: a Kafka Connect worker or REST setting; aagw keeps its "
            "state in the state directory\n"
            "complete.properties:47: offset.storage.replication.factor: "
            "ignored: a Kafka Connect worker or REST setting; aagw keeps its "
            "state in the state directory\n"
            "complete.properties:48: status.storage.replication.factor: "
            "ignored: a Kafka Connect worker or REST setting; aagw keeps its "
            "state in the state directory\n");
        assert_list(cfg, "replication.flows", flows, 1);
        assert_string_equal(aagw_config_str(cfg, "clusters.us-east."
                                                 "bootstrap_servers"),
                            "kafka-east-1:9092,kafka-east-2:9092,"
                            "kafka-east-3:9092");
        assert_string_equal(aagw_config_str(cfg, "clusters.us-west."
                                                 "bootstrap_servers"),
                            "kafka-west-1:9092,kafka-west-2:9092,"
                            "kafka-west-3:9092");
        /* One flow: its own lists are the lists. */
        assert_list(cfg, "replication.topics", topics, 3);
        assert_list(cfg, "replication.topics_exclude", texcl, 2);
        assert_list(cfg, "replication.groups", groups, 2);
        assert_list(cfg, "replication.groups_exclude", gexcl, 1);
        assert_string_equal(aagw_config_str(cfg, "replication.policy"),
                            "prefix");
        assert_string_equal(aagw_config_str(cfg, "replication.separator"),
                            ".");
        assert_int_equal(aagw_config_int(cfg, "replication.factor"), 3);
        assert_int_equal(
            aagw_config_duration_ms(cfg, "mm2.heartbeats_interval"), 5000);
        assert_true(aagw_config_bool(cfg, "mm2.sync_group_offsets"));
        assert_string_equal(aagw_config_str(cfg, "unify.mode"), "off");

        yaml = yaml_of("complete.properties", text, cfg);
        assert_string_equal(
            yaml,
            "# aagw configuration converted from MirrorMaker 2's "
            "complete.properties\n"
            "# (aagw config import-mm2); each line names the MM2 key it came "
            "from.\n"
            "clusters:\n"
            "  us-east:\n"
            "    bootstrap_servers: "
            "\"kafka-east-1:9092,kafka-east-2:9092,kafka-east-3:9092\"  # "
            "complete.properties:5 us-east.bootstrap.servers\n"
            "  us-west:\n"
            "    bootstrap_servers: "
            "\"kafka-west-1:9092,kafka-west-2:9092,kafka-west-3:9092\"  # "
            "complete.properties:6 us-west.bootstrap.servers\n"
            "replication:\n"
            "  flows:\n"
            "    - \"us-east->us-west\"  # complete.properties:9 "
            "us-east->us-west.enabled\n"
            "  topics:\n"
            "    - \"orders.*\"  # complete.properties:13 "
            "us-east->us-west.topics\n"
            "    - \"payments.*\"  # complete.properties:13 "
            "us-east->us-west.topics\n"
            "    - \"inventory.*\"  # complete.properties:13 "
            "us-east->us-west.topics\n"
            "  topics_exclude:\n"
            "    - \".*.internal\"  # complete.properties:14 "
            "us-east->us-west.topics.blacklist\n"
            "    - \"__consumer_offsets\"  # complete.properties:14 "
            "us-east->us-west.topics.blacklist\n"
            "  groups:\n"
            "    - \"payment-consumer-group\"  # complete.properties:17 "
            "us-east->us-west.groups\n"
            "    - \"order-processor-group\"  # complete.properties:17 "
            "us-east->us-west.groups\n"
            "  groups_exclude:\n"
            "    - \"console-consumer-.*\"  # complete.properties:18 "
            "us-east->us-west.groups.blacklist\n"
            "  policy: \"prefix\"  # complete.properties:34 "
            "replication.policy.class\n"
            "  factor: \"3\"  # complete.properties:29 "
            "us-east->us-west.replication.factor\n"
            "unify:\n"
            "  mode: \"off\"  # complete.properties:3 (MirrorMaker 2 has no "
            "unify stage)\n"
            "mm2:\n"
            "  heartbeats_interval: \"5s\"  # complete.properties:26 "
            "us-east->us-west.emit.heartbeats.interval.seconds\n"
            "  sync_group_offsets: \"true\"  # complete.properties:21 "
            "us-east->us-west.sync.group.offsets.enabled\n");
        free(yaml);
        aagw_config_destroy(cfg);
        free(text);
}

/* The aggregation topology: three edge clusters into central, nothing
 * back; nothing to warn about. */
static void test_seed_aggregation(void **state) {
        static const char *const flows[] = {"factory-a->central",
                                            "factory-b->central",
                                            "factory-c->central"};
        char                    *text    = seed("aggregation.properties");
        aagw_config_t           *cfg =
            load("aggregation.properties", text, AAGW_OK);
        char *yaml;
        (void)state;

        assert_string_equal(aagw_config_errors(cfg), "");
        assert_string_equal(aagw_config_warnings(cfg), "");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        assert_list(cfg, "replication.flows", flows, 3);
        assert_int_equal(aagw_config_instance_cnt(cfg, "clusters"), 4);
        assert_string_equal(aagw_config_str(cfg, "clusters.central."
                                                 "bootstrap_servers"),
                            "central-kafka-1:9092,central-kafka-2:9092");
        assert_string_equal(aagw_config_str(cfg, "clusters.factory-b."
                                                 "bootstrap_servers"),
                            "factory-b-kafka:9092");
        /* No filters: every topic, as MM2's default. */
        assert_false(aagw_config_is_set(cfg, "replication.topics"));
        assert_string_equal(aagw_config_str(cfg, "replication.separator"),
                            ".");
        yaml = yaml_of("aggregation.properties", text, cfg);
        assert_non_null(strstr(yaml, "replication:\n  flows:\n"
                                     "    - \"factory-a->central\"  # "
                                     "aggregation.properties:9 "
                                     "factory-a->central.enabled\n"));
        assert_null(strstr(yaml, "central->factory"));
        free(yaml);
        aagw_config_destroy(cfg);
        free(text);
}

/* The Active-Passive and Active-Active snippets have no "clusters" line,
 * which MM2 refuses too ("Missing required configuration"); the error
 * names the clusters to add.  With the complete file's clusters in
 * front (three lines) they import as their topology. */
static void test_seed_snippets(void **state) {
        static const char clusters[] =
            "clusters = us-east, us-west\n"
            "us-east.bootstrap.servers = kafka-east-1:9092\n"
            "us-west.bootstrap.servers = kafka-west-1:9092\n";
        static const char *const ap[] = {"us-east->us-west"};
        static const char *const aa[] = {"us-east->us-west",
                                         "us-west->us-east"};
        const char *const names[2]    = {"active-passive.properties",
                                         "active-active.properties"};
        (void)state;

        for (int i = 0; i < 2; i++) {
                char          *text = seed(names[i]), err[512];
                char          *whole;
                aagw_config_t *cfg = load(names[i], text, AAGW_ERR_CONFIG);

                snprintf(err, sizeof(err),
                         "%s:1:1: clusters: no 'clusters = A, B' line, which "
                         "MirrorMaker 2 requires as well: the flows name "
                         "us-east, us-west; add 'clusters = us-east, "
                         "us-west' and each one's <alias>.bootstrap.servers\n",
                         names[i]);
                assert_string_equal(aagw_config_errors(cfg), err);
                aagw_config_destroy(cfg);

                assert_true(asprintf(&whole, "%s%s", clusters, text) > 0);
                cfg = load(names[i], whole, AAGW_OK);
                assert_string_equal(aagw_config_warnings(cfg), "");
                assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
                if (i == 0)
                        assert_list(cfg, "replication.flows", ap, 1);
                else
                        assert_list(cfg, "replication.flows", aa, 2);
                free(yaml_of(names[i], whole, cfg));
                aagw_config_destroy(cfg);
                free(whole);
                free(text);
        }
}

/* The second seed's aggregation (and active-active) examples give each
 * connector its own "replication.policy.topic.name.separator" (".a.",
 * ".b."): a key MirrorMaker 2 does not have, so MM2 names the copies with
 * its default "." (A.events-topic at C).  aagw does the same and says
 * so.  With MM2's real key the two flows disagree on the separator,
 * which one aagw process cannot honour: refused, with the line. */
static void test_seed_connector_separators(void **state) {
        static const char *const flows[]  = {"A->C", "B->C"};
        static const char *const topics[] = {"events-topic"};
        char                    *text = seed("connectors-aggregation.properties");
        aagw_config_t           *cfg;
        char                    *p, *real;
        (void)state;

        cfg = load("connectors-aggregation.properties", text, AAGW_OK);
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        assert_list(cfg, "replication.flows", flows, 2);
        assert_list(cfg, "replication.topics", topics, 1);
        assert_string_equal(aagw_config_str(cfg, "replication.separator"),
                            ".");
        assert_string_equal(
            aagw_config_warnings(cfg),
            "connectors-aggregation.properties:14: "
            "A->C.replication.policy.topic.name.separator: ignored: "
            "MirrorMaker 2 has no such key and ignores it too: its separator "
            "is replication.policy.separator, so MM2 names remote topics "
            "<alias>.<topic> with this file\n"
            "connectors-aggregation.properties:17: "
            "B->C.replication.policy.topic.name.separator: ignored: "
            "MirrorMaker 2 has no such key and ignores it too: its separator "
            "is replication.policy.separator, so MM2 names remote topics "
            "<alias>.<topic> with this file\n");
        aagw_config_destroy(cfg);

        /* The key MM2 reads, per flow, as the example meant it. */
        real = strdup(text);
        while ((p = strstr(real, "policy.topic.name.separator")))
                memmove(p + 7, p + 18, strlen(p + 18) + 1);
        assert_non_null(strstr(real, "A->C.replication.policy.separator = .a."));
        cfg = load("connectors-aggregation.properties", real, AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "connectors-aggregation.properties:14:1: "
            "A->C.replication.policy.separator: refused: the enabled flows "
            "do not agree on replication.policy.separator (a per-flow value "
            "differs, or only some flows set it); aagw applies one value to "
            "every flow: set it once for all\n");
        aagw_config_destroy(cfg);
        free(real);
        free(text);
}

/* --------------------------------------------------- reading as MM2 -- */

static const char head[] = "clusters = a, b\n"
                           "a.bootstrap.servers = x:1\n"
                           "b.bootstrap.servers = y:1\n";

/* A separator of any string MM2 can name topics with, ".a." included,
 * goes through; one that MM2 would use for its internal topics only with
 * dots (replication.policy.internal.topic.separator.enabled = false) is
 * refused, as aagw names them with the separator; the switch is harmless
 * with "." or when true. */
static void test_separator_keys(void **state) {
        aagw_config_t *cfg;
        char           text[1024];
        (void)state;

        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\nb->a.enabled = true\n"
                 "replication.policy.separator = .a.\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_OK);
        assert_string_equal(aagw_config_warnings(cfg), "");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        assert_string_equal(aagw_config_str(cfg, "replication.separator"),
                            ".a.");
        aagw_config_destroy(cfg);

        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\n"
                 "replication.policy.separator = .a.\n"
                 "replication.policy.internal.topic.separator.enabled = "
                 "false\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:6:1: "
            "replication.policy.internal.topic.separator.enabled: refused: "
            "with the separator \".a.\" (line 5) MirrorMaker 2 would name "
            "its internal topics with dots "
            "(mm2-offset-syncs.<cluster>.internal), aagw names them with the "
            "separator, as MM2 does by default: remove the line, or write "
            "replication.policy.separator = .\n");
        aagw_config_destroy(cfg);

        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\n"
                 "replication.policy.separator = .a.\n"
                 "replication.policy.internal.topic.separator.enabled = "
                 "true\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_OK);
        assert_string_equal(aagw_config_warnings(cfg), "");
        aagw_config_destroy(cfg);
        /* MM2 reads the switch only when the file sets a separator. */
        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\n"
                 "replication.policy.internal.topic.separator.enabled = "
                 "false\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_OK);
        assert_string_equal(aagw_config_warnings(cfg), "");
        assert_string_equal(aagw_config_str(cfg, "replication.separator"),
                            ".");
        aagw_config_destroy(cfg);

        /* Blanks after the value: MM2 hands the separator on untrimmed,
         * and no topic name holds them. */
        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\n"
                 "replication.policy.separator = _  \n",
                 head);
        cfg = load("mm2.properties", text, AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:5:1: replication.separator: expected 1 to 112 of "
            "the characters of a topic name (A-Z a-z 0-9 . _ -), got \"_  \"\n");
        aagw_config_destroy(cfg);
}

/* "# comment" after values of every kind.  A flow's "enabled": off, as
 * MM2 runs none of it (a warning, whatever precedes the '#').  A list:
 * the comment is part of its last item, as in MM2 (a warning).  A
 * number, boolean, class or separator aagw applies: refused, as MM2's
 * ConfigDef refuses it or it would name topics with it; the reason says
 * so.  A key aagw ignores: ignored, saying what MM2 does.  bootstrap
 * servers: refused. */
static void test_comment_after_values(void **state) {
        static const char *const topics[] = {"orders.*",
                                             "payments.*  # money only"};
        static const char *const flows[]  = {"a->b"};
        aagw_config_t           *cfg;
        char                     text[2048];
        (void)state;

        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\n"
                 "b->a.enabled = true   # both ways\n"
                 "topics = orders.*, payments.*  # money only\n"
                 "tasks.max = 4 # per worker\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_OK);
        assert_list(cfg, "replication.flows", flows, 1);
        assert_list(cfg, "replication.topics", topics, 2);
        assert_string_equal(
            aagw_config_warnings(cfg),
            "mm2.properties:5: b->a.enabled: read as false, the flow not "
            "enabled: a properties file has no comment after a value, so the "
            "value is all of \"true   # ...\", which MirrorMaker 2's "
            "connectors refuse as neither true nor false: MM2 runs none of "
            "this flow either\n"
            "mm2.properties:6: topics: read as MirrorMaker 2 reads it: a "
            "properties file has no comment after a value, so \"payments.*  "
            "# money only\" is one of the regexes, comment included\n"
            "mm2.properties:7: tasks.max: ignored: each aagw flow is one "
            "consumer and one producer; run more aagw processes to scale; "
            "the value is all of \"4 # ...\": a properties file has no "
            "comment after a value, and MirrorMaker 2 refuses it too: not a "
            "number; put the comment on a line of its own\n");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        free(yaml_of("mm2.properties", text, cfg));
        aagw_config_destroy(cfg);

        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true\n"
                 "replication.factor = 3    # three brokers\n"
                 "sync.group.offsets.enabled = true # checkpoints\n"
                 "replication.policy.separator = .a. # like the guide\n"
                 "replication.policy.class = org.apache.kafka.connect.mirror."
                 "DefaultReplicationPolicy # prefix\n"
                 "offset-syncs.topic.location = target # at the target\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:8:1: replication.policy.class: refused: only MM2's "
            "DefaultReplicationPolicy (aagw's prefix policy) and "
            "IdentityReplicationPolicy (identity) have an equivalent; the "
            "value is all of \"org.apache.kafka.connect.mirror."
            "DefaultReplicationPolicy # ...\": a properties file has no "
            "comment after a value, and MirrorMaker 2 refuses it too: no "
            "class has that name; put the comment on a line of its own\n"
            "mm2.properties:7:1: replication.policy.separator: refused: the "
            "separator is part of every remote topic name, and no topic name "
            "holds a blank or '#'; the value is all of \".a. # ...\": a "
            "properties file has no comment after a value, and MirrorMaker 2 "
            "keeps all of it as well; put the comment on a line of its own\n"
            "mm2.properties:6:1: sync.group.offsets.enabled: refused: "
            "expected true or false; the value is all of \"true # ...\": a "
            "properties file has no comment after a value, and MirrorMaker 2 "
            "refuses it too: neither true nor false; put the comment on a "
            "line of its own\n"
            "mm2.properties:9:1: offset-syncs.topic.location: refused: "
            "expected source or target; the value is all of \"target # "
            "...\": a properties file has no comment after a value, and "
            "MirrorMaker 2 refuses it too: neither source nor target; put "
            "the comment on a line of its own\n"
            "mm2.properties:5:1: replication.factor: refused: expected a "
            "replication factor of 1 to 32767; the value is all of \"3    # "
            "...\": a properties file has no comment after a value, and "
            "MirrorMaker 2 refuses it too: not a number; put the comment on "
            "a line of its own\n");
        aagw_config_destroy(cfg);

        cfg = load("mm2.properties",
                   "clusters = a, b\n"
                   "a.bootstrap.servers = x:1 # east\n"
                   "b.bootstrap.servers = y:1\n"
                   "a->b.enabled = true\n",
                   AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:2:1: a.bootstrap.servers: refused: the value is "
            "all of \"x:1 # ...\": a properties file has no comment after a "
            "value, and MirrorMaker 2's clients refuse it too (not a "
            "host:port); put the comment on a line of its own\n");
        aagw_config_destroy(cfg);
        /* The alias "b   # two sites" leaves flow a->b without its
         * target, as in MM2. */
        cfg = load("mm2.properties",
                   "clusters = a, b   # two sites\n"
                   "a.bootstrap.servers = x:1\n"
                   "b.bootstrap.servers = y:1\n"
                   "a->b.enabled = true\n",
                   AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:1:1: clusters: refused: cluster alias \"b   # two "
            "sites\": aagw aliases are 1 to 64 of A-Z a-z 0-9 _ - (a "
            "properties file has no comment after a value: MirrorMaker 2 "
            "reads that alias as well; put the comment on a line of its "
            "own)\n"
            "mm2.properties:4:1: a->b.enabled: refused: the flow does not "
            "name two different clusters of 'clusters'\n"
            "mm2.properties:1:1: clusters: no flow is enabled (A->B.enabled "
            "= true): MirrorMaker 2 would replicate nothing\n");
        aagw_config_destroy(cfg);
}

/* Blanks after a value: Properties.load() keeps them, MM2's ConfigDef
 * trims them, except in MirrorMakerConfig.clusterPairs(), which reads
 * "A->B.enabled" with Boolean.parseBoolean(): "true " makes no herder
 * for the pair, which then exists only for heartbeats (on by default).
 * So "true " runs the flow unless the pair's heartbeats are off. */
static void test_trailing_blanks(void **state) {
        static const char *const flows[] = {"a->b"};
        aagw_config_t           *cfg;
        char                     text[1024];
        (void)state;

        snprintf(text, sizeof(text),
                 "%sa->b.enabled = true  \n"
                 "b->a.enabled = true \n"
                 "b->a.emit.heartbeats.enabled = false\n"
                 "replication.factor = 3 \n"
                 "emit.checkpoints.interval.seconds = 5\t\n",
                 head);
        cfg = load("mm2.properties", text, AAGW_OK);
        assert_list(cfg, "replication.flows", flows, 1);
        assert_int_equal(aagw_config_int(cfg, "replication.factor"), 3);
        assert_int_equal(
            aagw_config_duration_ms(cfg, "mm2.checkpoints_interval"), 5000);
        assert_string_equal(
            aagw_config_warnings(cfg),
            "mm2.properties:5: b->a.enabled: read as false, the flow not "
            "enabled: \"true\" followed by blanks is not \"true\" to "
            "MirrorMaker 2's clusterPairs(), and with "
            "b->a.emit.heartbeats.enabled = false (line 6) nothing else "
            "makes MM2 run this flow\n"
            "mm2.properties:6: b->a.emit.heartbeats.enabled: ignored: its "
            "flow is not enabled\n");
        aagw_config_destroy(cfg);
}

/* ----------------------------------------------------------------- CLI -- */

/* The stdout of shell command 'cmd', which must exit 'want'; caller
 * frees. */
static char *capture(const char *cmd, int want) {
        char  *out = NULL, buf[4096];
        size_t len = 0, n;
        FILE  *m = open_memstream(&out, &len), *p = popen(cmd, "r");
        int    st;

        assert_non_null(p);
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, m);
        st = pclose(p);
        fclose(m);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), want);
        return out;
}

/* `aagw config import-mm2` of the complete file exits 0 with line 10's
 * warning on stderr, and its YAML gives the effective config that
 * `aagw config check -c complete.properties` gives. */
static void test_cli_seed(void **state) {
        const char *bin = getenv("AAGW_BIN"), *root = getenv("AAGW_SOURCE_ROOT");
        char        cmd[4096];
        char       *err, *direct, *viayaml;
        (void)state;

        assert_non_null(bin);
        snprintf(cmd, sizeof(cmd),
                 "'%s' config import-mm2 -o '%s/aagw.yaml' "
                 "'%s/tests/unit/mm2-seeds/complete.properties' 2>&1",
                 bin, tmpdir, root);
        err = capture(cmd, 0);
        assert_non_null(strstr(err, "complete.properties:10: "
                                    "us-west->us-east.enabled: read as "
                                    "false, the flow not enabled: "));
        snprintf(cmd, sizeof(cmd),
                 "'%s' config check -c "
                 "'%s/tests/unit/mm2-seeds/complete.properties' 2>/dev/null",
                 bin, root);
        direct = capture(cmd, 0);
        snprintf(cmd, sizeof(cmd),
                 "'%s' config check -c '%s/aagw.yaml' 2>/dev/null", bin,
                 tmpdir);
        viayaml = capture(cmd, 0);
        assert_non_null(strstr(direct, "  flows:\n    - \"us-east->us-west\"\n"));
        assert_string_equal(viayaml, direct);
        free(err);
        free(direct);
        free(viayaml);
}

static int group_setup(void **state) {
        (void)state;
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
        char cmd[600];
        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_seed_complete),
            cmocka_unit_test(test_seed_aggregation),
            cmocka_unit_test(test_seed_snippets),
            cmocka_unit_test(test_seed_connector_separators),
            cmocka_unit_test(test_separator_keys),
            cmocka_unit_test(test_comment_after_values),
            cmocka_unit_test(test_trailing_blanks),
            cmocka_unit_test(test_cli_seed),
        };
        return cmocka_run_group_tests_name("mm2_seeds", tests, group_setup,
                                           group_teardown);
}
