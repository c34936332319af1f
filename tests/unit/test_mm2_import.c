/*
 * tests/unit/test_mm2_import.c: MirrorMaker 2 properties files as aagw
 * config (gateway/mm2_import.c, mm2_security.c): Java properties syntax,
 * the key translation with its line numbers, ignored and refused keys,
 * the Java client's key and trust stores and JAAS logins as librdkafka's
 * settings (PKCS#12 trust stores made with openssl at test time),
 * detection by content, and `aagw config import-mm2` against `-c
 * mm2.properties` (the printed YAML must give the same effective
 * config).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static char tmpdir[] = "/tmp/aagw-mm2imp-XXXXXX";

/* A file as operators write them: comments, blank separators, a
 * continuation line, a JAAS login, per-cluster and global keys. */
static const char example[] =
    "# MirrorMaker 2, dedicated mode\n"
    "clusters = east, west\n"
    "east.bootstrap.servers = k-east-1:9092,k-east-2:9092\n"
    "west.bootstrap.servers: k-west-1:9092\n"
    "east.security.protocol=SASL_SSL\n"
    "east.sasl.mechanism=SCRAM-SHA-512\n"
    "east.sasl.jaas.config=org.apache.kafka.common.security.scram."
    "ScramLoginModule required \\\n"
    "    username=\"mm2\" password=\"s3cret\";\n"
    "west.consumer.fetch.min.bytes=1\n"
    "west.offset.flush.interval.ms=1000\n"
    "\n"
    "east->west.enabled = true\n"
    "west->east.enabled = true\n"
    "topics = clicks.*, orders\\\\d+\n"
    "topics.exclude = .*-tmp\n"
    "groups = app-.*\n"
    "replication.policy.separator = _\n"
    "replication.factor = 3\n"
    "emit.heartbeats.interval.seconds = 2\n"
    "emit.checkpoints.interval.seconds = 5\n"
    "sync.group.offsets.enabled = true\n"
    "refresh.topics.interval.seconds = 30\n"
    "tasks.max = 4\n"
    "offset-syncs.topic.location = target\n"
    "west->east.emit.checkpoints.interval.seconds = 5\n"
    "sync.topic.acls.enabled = false\n"
    "sync.topic.configs.interval.seconds = 60\n"
    "config.properties.exclude = segment\\\\..*, retention\\\\.bytes\n";

static aagw_config_t *load(const char *text, aagw_err_t want) {
        aagw_config_t *cfg = aagw_config_new();

        assert_non_null(cfg);
        assert_int_equal(aagw_config_load_mm2(cfg, "mm2.properties", text,
                                              strlen(text)),
                         want);
        return cfg;
}

static void assert_list(const aagw_config_t *cfg, const char *key,
                        const char *const *want, size_t n) {
        const char *const *items;
        size_t             got = aagw_config_list(cfg, key, &items);

        assert_int_equal(got, n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(items[i], want[i]);
}

/* ------------------------------------------------------------- syntax -- */

static void test_translation(void **state) {
        static const char *const topics[] = {"clicks.*", "orders\\d+"};
        static const char *const flows[]  = {"east->west", "west->east"};
        static const char *const excl[]   = {".*-tmp"};
        static const char *const cexcl[]  = {"segment\\..*",
                                             "retention\\.bytes"};
        aagw_config_t           *cfg      = load(example, AAGW_OK);
        const char *const       *kv;
        size_t                   n;
        (void)state;

        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        assert_string_equal(aagw_config_str(cfg, "clusters.east."
                                                 "bootstrap_servers"),
                            "k-east-1:9092,k-east-2:9092");
        assert_string_equal(aagw_config_str(cfg, "clusters.west."
                                                 "bootstrap_servers"),
                            "k-west-1:9092");
        assert_list(cfg, "replication.topics", topics, 2);
        assert_list(cfg, "replication.topics_exclude", excl, 1);
        assert_list(cfg, "replication.flows", flows, 2);
        assert_string_equal(aagw_config_str(cfg, "replication.separator"),
                            "_");
        assert_int_equal(aagw_config_duration_ms(cfg,
                                                 "mm2.heartbeats_interval"),
                         2000);
        assert_int_equal(aagw_config_duration_ms(cfg,
                                                 "mm2.checkpoints_interval"),
                         5000);
        assert_int_equal(
            aagw_config_duration_ms(cfg,
                                    "replication.refresh_topics_interval"),
            30000);
        assert_true(aagw_config_bool(cfg, "mm2.sync_group_offsets"));
        assert_string_equal(aagw_config_str(cfg, "mm2.offset_syncs_location"),
                            "target");
        /* Remote topics: replication factor, config and ACL sync. */
        assert_int_equal(aagw_config_int(cfg, "replication.factor"), 3);
        assert_false(aagw_config_bool(cfg, "replication.sync_topic_acls"));
        assert_true(aagw_config_bool(cfg, "replication.sync_topic_configs"));
        assert_int_equal(
            aagw_config_duration_ms(cfg,
                                    "replication.sync_topic_configs_interval"),
            60000);
        assert_list(cfg, "replication.topic_configs_exclude", cexcl, 2);
        /* MM2 has no unified topics: the translation creates none. */
        assert_string_equal(aagw_config_str(cfg, "unify.mode"), "off");
        /* The JAAS line (with its continuation) becomes librdkafka's
         * SASL pair; role-prefixed properties keep their role. */
        n = aagw_config_cluster_props(cfg, "east", &kv);
        assert_int_equal(n, 4);
        assert_string_equal(kv[0], "security.protocol");
        assert_string_equal(kv[4], "sasl.username");
        assert_string_equal(kv[5], "mm2");
        assert_string_equal(kv[6], "sasl.password");
        assert_string_equal(kv[7], "s3cret");
        n = aagw_config_cluster_props(cfg, "west", &kv);
        assert_int_equal(n, 1);
        assert_string_equal(kv[0], "consumer.fetch.min.bytes");
        /* Keys aagw does not apply are warnings with their line. */
        assert_string_equal(
            aagw_config_warnings(cfg),
            "mm2.properties:10: west.offset.flush.interval.ms: ignored: a "
            "Kafka Connect worker setting; aagw keeps its state in the state "
            "directory\n"
            "mm2.properties:23: tasks.max: ignored: each aagw flow is one "
            "consumer and one producer; run more aagw processes to scale\n");
        aagw_config_destroy(cfg);
}

/* java.util.Properties rules: '!' comments, ':' and blank separators,
 * \uXXXX, "\d" reads as "d" (a regex backslash is written "\\"), CRLF,
 * a continuation's leading blanks dropped, the last duplicate wins. */
static void test_properties_syntax(void **state) {
        static const char text[] =
            "! another comment style\r\n"
            "clusters east,west\r\n"
            "east.bootstrap.servers=a:1\r\n"
            "west.bootstrap.servers   b:2\n"
            "east->west.enabled=true\n"
            "topics = x\n"
            "topics = \\u0063licks, orders\\d+, \\\n"
            "         pay\\\\w+\n";
        static const char *const want[] = {"clicks", "ordersd+", "pay\\w+"};
        aagw_config_t           *cfg    = load(text, AAGW_OK);
        (void)state;

        assert_list(cfg, "replication.topics", want, 3);
        assert_string_equal(aagw_config_str(cfg, "clusters.west."
                                                 "bootstrap_servers"),
                            "b:2");
        aagw_config_destroy(cfg);

        cfg = load("clusters=a,b\na.bootstrap.servers=x:1\n"
                   "b.bootstrap.servers=y:1\na->b.enabled=true\n"
                   "topics=\\u00zz\n",
                   AAGW_ERR_CONFIG);
        assert_string_equal(aagw_config_errors(cfg),
                            "mm2.properties:5:1: malformed \\uXXXX escape\n");
        aagw_config_destroy(cfg);
}

/* The file is ISO 8859-1, as Properties.load() reads a stream: a byte
 * >= 0x80 is a Latin-1 character (kept as UTF-8, so the config and its
 * dump stay valid UTF-8); \u escapes of a surrogate pair are one
 * character.  Found by fuzz_config: raw bytes made a dump that did not
 * load back. */
static void test_latin1_and_surrogates(void **state) {
        static const char text[] = "clusters=a,b\n"
                                   "a.bootstrap.servers=x:1\n"
                                   "b.bootstrap.servers=y:1\n"
                                   "a->b.enabled=true\n"
                                   "topics=caf\xe9, \\uD83D\\uDE00, \\uD83D\n";
        static const char *const want[] = {"caf\xc3\xa9", "\xf0\x9f\x98\x80",
                                           "\xef\xbf\xbd"};
        aagw_config_t           *cfg    = load(text, AAGW_OK);
        (void)state;

        assert_list(cfg, "replication.topics", want, 3);
        aagw_config_destroy(cfg);
}

/* Refused keys: errors at their line, nothing applied. */
static void test_refused(void **state) {
        static const char text[] =
            "clusters = east, west\n"
            "east.bootstrap.servers = a:1\n"
            "west.bootstrap.servers = b:1\n"
            "east->west.enabled = true\n"
            "west->east.enabled = true\n"
            "replication.policy.class = com.acme.MyPolicy\n"
            "east.ssl.truststore.location = /etc/ts.jks\n"
            "east->west.groups = a.*\n"
            "west->east.groups = b.*\n"
            "east.sasl.jaas.config = x.OAuthBearerLoginModule required;\n"
            "topic.filter.class = com.acme.Filter\n"
            "config.providers = file\n";
        aagw_config_t *cfg = load(text, AAGW_ERR_CONFIG);
        const char    *e   = aagw_config_errors(cfg);
        (void)state;

        assert_non_null(strstr(e, "mm2.properties:6:1: "
                                  "replication.policy.class: refused: only "
                                  "MM2's DefaultReplicationPolicy"));
        assert_non_null(strstr(e, "mm2.properties:7:1: "
                                  "east.ssl.truststore.location: refused: "
                                  "/etc/ts.jks is a JKS trust store, which "
                                  "librdkafka cannot read"));
        assert_non_null(strstr(e, "mm2.properties:8:1: east->west.groups: "
                                  "refused: the enabled flows do not agree "
                                  "on groups"));
        assert_non_null(strstr(e, "mm2.properties:10:1: "
                                  "east.sasl.jaas.config: refused: an "
                                  "OAUTHBEARER login converts as OIDC"));
        assert_non_null(strstr(e, "mm2.properties:11:1: topic.filter.class: "
                                  "refused: a custom Java class"));
        assert_non_null(strstr(e, "mm2.properties:12:1: config.providers: "
                                  "refused: aagw does not run MM2's config "
                                  "providers"));
        /* Nothing was applied: the defaults stand. */
        assert_false(aagw_config_is_set(cfg, "clusters.east."
                                             "bootstrap_servers"));
        aagw_config_destroy(cfg);

        cfg = load("clusters = a, b\na.bootstrap.servers = x:1\n",
                   AAGW_ERR_CONFIG);
        e   = aagw_config_errors(cfg);
        assert_non_null(strstr(e, "mm2.properties:1:1: clusters: no flow is "
                                  "enabled"));
        assert_non_null(strstr(e, "mm2.properties:1:1: b.bootstrap.servers: "
                                  "cluster b has no bootstrap servers"));
        aagw_config_destroy(cfg);
}

/* A flow that is not enabled has its keys ignored, not applied; a global
 * value the enabled flows share is applied once. */
static void test_flow_scope(void **state) {
        static const char text[] = "clusters = a, b\n"
                                   "a.bootstrap.servers = x:1\n"
                                   "b.bootstrap.servers = y:1\n"
                                   "a->b.enabled = true\n"
                                   "a->b.topics = t1, t2\n"
                                   "b->a.topics = other\n"
                                   "a->b.emit.heartbeats.enabled = false\n"
                                   "a->b.bogus = 1\n";
        static const char *const want[] = {"t1", "t2"};
        aagw_config_t           *cfg    = load(text, AAGW_OK);
        (void)state;

        assert_list(cfg, "replication.topics", want, 2);
        assert_int_equal(aagw_config_duration_ms(cfg,
                                                 "mm2.heartbeats_interval"),
                         0);
        assert_string_equal(
            aagw_config_warnings(cfg),
            "mm2.properties:6: b->a.topics: ignored: its flow is not "
            "enabled\n"
            "mm2.properties:8: a->b.bogus: ignored: not a per-flow "
            "MirrorMaker 2 setting aagw knows\n");
        aagw_config_destroy(cfg);
}

/* Topic lists that differ between flows become per-flow lists
 * (replication.per_flow); the global ones stay global, a flow without
 * its own uses them, and nothing is refused or ignored.  The old name
 * topics.whitelist is read as MM2 3.x read it, with a warning that MM2
 * 4.x no longer does. */
static void test_per_flow_topics(void **state) {
        static const char text[] = "clusters = a, b, c\n"
                                   "a.bootstrap.servers = x:1\n"
                                   "b.bootstrap.servers = y:1\n"
                                   "c.bootstrap.servers = z:1\n"
                                   "a->b.enabled = true\n"
                                   "b->a.enabled = true\n"
                                   "a->c.enabled = true\n"
                                   "topics = shared.*\n"
                                   "a->b.topics = orders, clicks\\\\d+\n"
                                   "b->a.topics.exclude = secret.*\n"
                                   "a->c.topics.whitelist = audit\n";
        static const char *const ab[] = {"orders", "clicks\\d+"};
        static const char *const ba[] = {"secret.*"};
        static const char *const ac[] = {"audit"};
        static const char *const gl[] = {"shared.*"};
        aagw_config_t           *cfg  = load(text, AAGW_OK);
        (void)state;

        assert_string_equal(aagw_config_errors(cfg), "");
        assert_string_equal(
            aagw_config_warnings(cfg),
            "mm2.properties:11: a->c.topics.whitelist: read as MirrorMaker 2 "
            "before Kafka 4.0 read it: topics.whitelist is the old name of "
            "topics, which Kafka 4.0 removed: MM2 4.x ignores this line; "
            "rename the key to keep MM2 and aagw alike\n");
        assert_list(cfg, "replication.per_flow.a->b.topics", ab, 2);
        assert_list(cfg, "replication.per_flow.b->a.topics_exclude", ba, 1);
        assert_list(cfg, "replication.per_flow.a->c.topics", ac, 1);
        assert_list(cfg, "replication.topics", gl, 1);
        assert_false(aagw_config_is_set(cfg,
                                        "replication.per_flow.b->a.topics"));
        assert_false(aagw_config_is_set(cfg, "replication.topics_exclude"));
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        aagw_config_destroy(cfg);
}

/* Top-level security settings go to every cluster that has none of its
 * own, as MM2's client configs do. */
static void test_top_level_client_props(void **state) {
        static const char text[] = "clusters = a, b\n"
                                   "a.bootstrap.servers = x:1\n"
                                   "b.bootstrap.servers = y:1\n"
                                   "a->b.enabled = true\n"
                                   "security.protocol = SSL\n"
                                   "b.security.protocol = PLAINTEXT\n";
        aagw_config_t     *cfg = load(text, AAGW_OK);
        const char *const *kv;
        (void)state;

        assert_int_equal(aagw_config_cluster_props(cfg, "a", &kv), 1);
        assert_string_equal(kv[0], "security.protocol");
        assert_string_equal(kv[1], "SSL");
        assert_int_equal(aagw_config_cluster_props(cfg, "b", &kv), 1);
        assert_string_equal(kv[1], "PLAINTEXT");
        aagw_config_destroy(cfg);
}

static void test_detection(void **state) {
        static const char *const mm2[] = {
            "clusters = a, b\n", "# c\nclusters=a\n",
            "x.bootstrap.servers: h:1\n", "  clusters : a,b\n"};
        static const char *const yaml[] = {
            "clusters:\n  east:\n    bootstrap_servers: h:1\n",
            "clusters: {east: {bootstrap_servers: h:1}}\n",
            "gateway:\n  id: x\n", "", "# clusters = a\n"};
        (void)state;

        for (size_t i = 0; i < sizeof(mm2) / sizeof(mm2[0]); i++)
                assert_true(aagw_config_is_mm2_properties(mm2[i],
                                                          strlen(mm2[i])));
        for (size_t i = 0; i < sizeof(yaml) / sizeof(yaml[0]); i++)
                assert_false(aagw_config_is_mm2_properties(yaml[i],
                                                           strlen(yaml[i])));
}

static void slurp(const char *path, char *buf, size_t size);

/* ----------------------------------------------------------- security -- */

/* The value librdkafka property 'name' of cluster 'alias' got, or NULL. */
static const char *prop_of(const aagw_config_t *cfg, const char *alias,
                           const char *name) {
        const char *const *kv;
        size_t             n = aagw_config_cluster_props(cfg, alias, &kv);

        for (size_t i = 0; i < n; i++)
                if (!strcmp(kv[2 * i], name))
                        return kv[2 * i + 1];
        return NULL;
}

/* The YAML `config import-mm2` prints for 'text' (PEM files, if any, in
 * 'pem_dir'); 'want' the result.  The caller frees it. */
static char *to_yaml(aagw_config_t *cfg, const char *text, bool secrets,
                     const char *pem_dir, aagw_err_t want) {
        char  *buf = NULL;
        size_t len = 0;
        FILE  *m   = open_memstream(&buf, &len);

        assert_non_null(m);
        assert_int_equal(aagw_config_mm2_to_yaml(cfg, "mm2.properties", text,
                                                 strlen(text), secrets, pem_dir,
                                                 m),
                         want);
        fclose(m);
        return buf;
}

/* A production pair as MM2 users write it: SCRAM over TLS with a PEM
 * trust store and no host name check on us-east, mutual TLS with a
 * PKCS#12 keystore and a PEM trust store on us-west. */
static const char secure[] =
    "clusters = us-east, us-west\n"
    "us-east.bootstrap.servers = east-1:9093,east-2:9093\n"
    "us-west.bootstrap.servers = west-1:9094\n"
    "us-east.security.protocol = SASL_SSL\n"
    "us-east.sasl.mechanism = SCRAM-SHA-512\n"
    "us-east.sasl.jaas.config = org.apache.kafka.common.security.scram."
    "ScramLoginModule required \\\n"
    "    username=\"mm2\" password=\"east-s3cret\";\n"
    "us-east.ssl.truststore.type = PEM\n"
    "us-east.ssl.truststore.location = /etc/kafka/east-ca.pem\n"
    "us-east.ssl.endpoint.identification.algorithm =\n"
    "us-west.security.protocol = SSL\n"
    "us-west.ssl.keystore.type = PKCS12\n"
    "us-west.ssl.keystore.location = /etc/kafka/mm2-west.p12\n"
    "us-west.ssl.keystore.password = ks-s3cret\n"
    "us-west.ssl.key.password = ks-s3cret\n"
    "us-west.ssl.truststore.type = PEM\n"
    "us-west.ssl.truststore.location = /etc/kafka/west-ca.pem\n"
    "us-west.ssl.endpoint.identification.algorithm = https\n"
    "us-east->us-west.enabled = true\n"
    "us-west->us-east.enabled = true\n"
    "topics = orders.*\n";

static void test_secure_clusters(void **state) {
        aagw_config_t *cfg = load(secure, AAGW_OK);
        char          *yaml;
        (void)state;

        assert_string_equal(aagw_config_errors(cfg), "");
        assert_string_equal(aagw_config_warnings(cfg), "");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        assert_string_equal(prop_of(cfg, "us-east", "security.protocol"),
                            "SASL_SSL");
        assert_string_equal(prop_of(cfg, "us-east", "sasl.username"), "mm2");
        assert_string_equal(prop_of(cfg, "us-east", "sasl.password"),
                            "east-s3cret");
        assert_string_equal(prop_of(cfg, "us-east", "ssl.ca.location"),
                            "/etc/kafka/east-ca.pem");
        assert_string_equal(
            prop_of(cfg, "us-east", "ssl.endpoint.identification.algorithm"),
            "none");
        assert_string_equal(prop_of(cfg, "us-west", "ssl.keystore.location"),
                            "/etc/kafka/mm2-west.p12");
        assert_string_equal(prop_of(cfg, "us-west", "ssl.keystore.password"),
                            "ks-s3cret");
        assert_string_equal(prop_of(cfg, "us-west", "ssl.ca.location"),
                            "/etc/kafka/west-ca.pem");
        assert_string_equal(
            prop_of(cfg, "us-west", "ssl.endpoint.identification.algorithm"),
            "https");
        /* Java's names that librdkafka does not have are not passed on. */
        assert_null(prop_of(cfg, "us-west", "ssl.key.password"));
        assert_null(prop_of(cfg, "us-west", "ssl.keystore.type"));
        assert_null(prop_of(cfg, "us-east", "ssl.truststore.location"));
        aagw_config_destroy(cfg);

        /* The YAML: every secret as a reference, each line with its
         * source. */
        cfg  = aagw_config_new();
        yaml = to_yaml(cfg, secure, false, NULL, AAGW_OK);
        assert_null(strstr(yaml, "s3cret"));
        assert_non_null(strstr(
            yaml, "  us-east:\n"
                  "    bootstrap_servers: \"east-1:9093,east-2:9093\"  # "
                  "mm2.properties:2 us-east.bootstrap.servers\n"
                  "    properties:\n"
                  "      ssl.ca.location: \"/etc/kafka/east-ca.pem\"  # "
                  "mm2.properties:9 us-east.ssl.truststore.location\n"));
        assert_non_null(strstr(
            yaml, "      sasl.username: \"${MM2_US_EAST_SASL_USERNAME}\"  # "
                  "mm2.properties:6 us-east.sasl.jaas.config\n"
                  "      sasl.password: \"${MM2_US_EAST_SASL_PASSWORD}\"  # "
                  "mm2.properties:6 us-east.sasl.jaas.config\n"
                  "      ssl.endpoint.identification.algorithm: \"none\"  # "
                  "mm2.properties:10 "
                  "us-east.ssl.endpoint.identification.algorithm\n"));
        assert_non_null(strstr(
            yaml, "      ssl.keystore.location: \"/etc/kafka/mm2-west.p12\"  # "
                  "mm2.properties:13 us-west.ssl.keystore.location\n"
                  "      ssl.keystore.password: "
                  "\"${MM2_US_WEST_SSL_KEYSTORE_PASSWORD}\"  # "
                  "mm2.properties:14 us-west.ssl.keystore.password\n"
                  "      ssl.ca.location: \"/etc/kafka/west-ca.pem\"  # "
                  "mm2.properties:17 us-west.ssl.truststore.location\n"));
        free(yaml);
        aagw_config_destroy(cfg);
}

/* Trust stores in PEM: a file is ssl.ca.location, inline certificates
 * (written on one logical line, as Kafka allows) ssl.ca.pem in the
 * layout OpenSSL reads; a PEM trust store has no password. */
static void test_pem_trust_store(void **state) {
        static const char text[] =
            "clusters = a, b\n"
            "a.bootstrap.servers = x:1\n"
            "b.bootstrap.servers = y:1\n"
            "a->b.enabled = true\n"
            "a.ssl.truststore.type = pem\n"
            "a.ssl.truststore.location = /etc/ca.crt\n"
            "a.ssl.truststore.password = unused\n"
            "b.ssl.truststore.type = PEM\n"
            "b.ssl.truststore.certificates = -----BEGIN CERTIFICATE----- \\\n"
            "   QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJz"
            "dHV2d3h5ejAxMjM0NTY3ODkrLw== \\\n"
            "   -----END CERTIFICATE----- -----BEGIN CERTIFICATE----- "
            "QUJD -----END CERTIFICATE-----\n";
        aagw_config_t *cfg = load(text, AAGW_OK);
        (void)state;

        assert_string_equal(prop_of(cfg, "a", "ssl.ca.location"),
                            "/etc/ca.crt");
        assert_string_equal(
            prop_of(cfg, "b", "ssl.ca.pem"),
            "-----BEGIN CERTIFICATE-----\n"
            "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2\n"
            "d3h5ejAxMjM0NTY3ODkrLw==\n"
            "-----END CERTIFICATE-----\n"
            "-----BEGIN CERTIFICATE-----\n"
            "QUJD\n"
            "-----END CERTIFICATE-----\n");
        assert_string_equal(aagw_config_warnings(cfg),
                            "mm2.properties:7: a.ssl.truststore.password: "
                            "ignored: a PEM trust store has no password\n");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        aagw_config_destroy(cfg);
}

/* Keystores: PKCS#12 by type or by its .p12/.pfx name, PEM as a file
 * (key and chain in one) or inline. */
static void test_key_stores(void **state) {
        static const char text[] =
            "clusters = a, b, c\n"
            "a.bootstrap.servers = x:1\n"
            "b.bootstrap.servers = y:1\n"
            "c.bootstrap.servers = z:1\n"
            "a->b.enabled = true\n"
            "b->c.enabled = true\n"
            "a.ssl.keystore.location = /etc/ks.pfx\n"
            "a.ssl.keystore.password = ks-pw\n"
            "b.ssl.keystore.type = PEM\n"
            "b.ssl.keystore.location = /etc/client.pem\n"
            "b.ssl.key.password = key-pw\n"
            "c.ssl.keystore.type = PEM\n"
            "c.ssl.keystore.key = -----BEGIN ENCRYPTED PRIVATE KEY----- "
            "S0VZ -----END ENCRYPTED PRIVATE KEY-----\n"
            "c.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE----- "
            "Q0VSVA== -----END CERTIFICATE-----\n"
            "c.ssl.key.password = c-key-pw\n";
        aagw_config_t *cfg = load(text, AAGW_OK);
        char          *yaml;
        (void)state;

        assert_string_equal(aagw_config_warnings(cfg), "");
        assert_string_equal(prop_of(cfg, "a", "ssl.keystore.location"),
                            "/etc/ks.pfx");
        assert_string_equal(prop_of(cfg, "a", "ssl.keystore.password"),
                            "ks-pw");
        assert_string_equal(prop_of(cfg, "b", "ssl.key.location"),
                            "/etc/client.pem");
        assert_string_equal(prop_of(cfg, "b", "ssl.certificate.location"),
                            "/etc/client.pem");
        assert_string_equal(prop_of(cfg, "b", "ssl.key.password"), "key-pw");
        assert_string_equal(prop_of(cfg, "c", "ssl.key.pem"),
                            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nS0VZ\n"
                            "-----END ENCRYPTED PRIVATE KEY-----\n");
        assert_string_equal(prop_of(cfg, "c", "ssl.certificate.pem"),
                            "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n"
                            "-----END CERTIFICATE-----\n");
        assert_string_equal(prop_of(cfg, "c", "ssl.key.password"), "c-key-pw");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        aagw_config_destroy(cfg);

        /* An inline key is a secret in the YAML (librdkafka marks
         * ssl.key.pem sensitive); the certificate is not. */
        cfg  = aagw_config_new();
        yaml = to_yaml(cfg, text, false, NULL, AAGW_OK);
        assert_non_null(strstr(yaml, "ssl.key.pem: \"${MM2_C_SSL_KEY_PEM}\""));
        assert_null(strstr(yaml, "S0VZ"));
        assert_non_null(strstr(yaml, "ssl.certificate.pem: "
                                     "\"-----BEGIN CERTIFICATE-----\\nQ0VSVA"
                                     "==\\n-----END CERTIFICATE-----\\n\""));
        free(yaml);
        aagw_config_destroy(cfg);
}

/* JKS and other Java store types: refused with the keytool command for
 * that file and the keys to set after, at the key's line, named as the
 * file writes it.  A top-level store applies to every cluster but is
 * refused once. */
static void test_jks_refused(void **state) {
        static const char text[] =
            "clusters = us-east, us-west\n"
            "us-east.bootstrap.servers = x:1\n"
            "us-west.bootstrap.servers = y:1\n"
            "us-east->us-west.enabled = true\n"
            "us-east.ssl.truststore.location = /etc/kafka/truststore.jks\n"
            "us-east.ssl.truststore.password = ts-pw\n"
            "us-west.ssl.keystore.type = JKS\n"
            "us-west.ssl.keystore.location = /etc/kafka/west keys\n"
            "us-west.ssl.keystore.password = ks-pw\n"
            "us-west.ssl.truststore.type = JCEKS\n"
            "us-west.ssl.truststore.location = /etc/kafka/west.jceks\n";
        aagw_config_t *cfg = load(text, AAGW_ERR_CONFIG);
        (void)state;

        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:5:1: us-east.ssl.truststore.location: refused: "
            "/etc/kafka/truststore.jks is a JKS trust store, which librdkafka "
            "cannot read; convert it to PKCS#12 with `keytool -importkeystore "
            "-srckeystore /etc/kafka/truststore.jks -destkeystore "
            "/etc/kafka/truststore.p12 -deststoretype PKCS12`, then set "
            "us-east.ssl.truststore.location = /etc/kafka/truststore.p12 and "
            "us-east.ssl.truststore.type = PKCS12 (aagw converts a PKCS#12 "
            "trust store to PEM)\n"
            "mm2.properties:8:1: us-west.ssl.keystore.location: refused: "
            "/etc/kafka/west keys is a JKS keystore, which librdkafka cannot "
            "read; convert it to PKCS#12 with `keytool -importkeystore "
            "-srckeystore '/etc/kafka/west keys' -destkeystore "
            "'/etc/kafka/west keys.p12' -deststoretype PKCS12`, then set "
            "us-west.ssl.keystore.location = /etc/kafka/west keys.p12 and "
            "us-west.ssl.keystore.type = PKCS12\n"
            "mm2.properties:11:1: us-west.ssl.truststore.location: refused: "
            "/etc/kafka/west.jceks is a JCEKS trust store, which librdkafka "
            "cannot read; convert it to PKCS#12 with `keytool -importkeystore "
            "-srckeystore /etc/kafka/west.jceks -srcstoretype JCEKS "
            "-destkeystore /etc/kafka/west.p12 -deststoretype PKCS12`, then "
            "set us-west.ssl.truststore.location = /etc/kafka/west.p12 and "
            "us-west.ssl.truststore.type = PKCS12 (aagw converts a PKCS#12 "
            "trust store to PEM)\n");
        /* Nothing else about those keys: they are accounted for. */
        assert_string_equal(aagw_config_warnings(cfg), "");
        aagw_config_destroy(cfg);

        /* A top-level store is read by both clusters, refused once, with
         * the key as the file writes it. */
        cfg = load("clusters = a, b\na.bootstrap.servers = x:1\n"
                   "b.bootstrap.servers = y:1\na->b.enabled = true\n"
                   "ssl.keystore.location = /etc/all.jks\n",
                   AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:5:1: ssl.keystore.location: refused: /etc/all.jks "
            "is a JKS keystore, which librdkafka cannot read; convert it to "
            "PKCS#12 with `keytool -importkeystore -srckeystore /etc/all.jks "
            "-destkeystore /etc/all.p12 -deststoretype PKCS12`, then set "
            "ssl.keystore.location = /etc/all.p12 and ssl.keystore.type = "
            "PKCS12\n");
        aagw_config_destroy(cfg);
}

/* Other store refusals: a PKCS#12 keystore without its password, or with
 * a key password librdkafka cannot take, a PKCS#12 trust store aagw
 * cannot read (the exact openssl command instead), a bad host name
 * check; inline and file settings together. */
static void test_store_refusals(void **state) {
        static const char text[] =
            "clusters = a, b, c\n"
            "a.bootstrap.servers = x:1\n"
            "b.bootstrap.servers = y:1\n"
            "c.bootstrap.servers = z:1\n"
            "a->b.enabled = true\n"
            "b->c.enabled = true\n"
            "a.ssl.keystore.location = /etc/a.p12\n"
            "b.ssl.keystore.type = PKCS12\n"
            "b.ssl.keystore.location = /etc/b.p12\n"
            "b.ssl.keystore.password = pw-ONE\n"
            "b.ssl.key.password = pw-TWO\n"
            "c.ssl.truststore.type = PKCS12\n"
            "c.ssl.truststore.location = /nonexistent/c.p12\n"
            "c.ssl.truststore.password = pw\n"
            "c.ssl.endpoint.identification.algorithm = sometimes\n"
            "a.ssl.truststore.certificates = -----BEGIN CERTIFICATE----- "
            "QUJD -----END CERTIFICATE-----\n"
            "a.ssl.truststore.location = /etc/a-ca.pem\n"
            "b.ssl.truststore.certificates = not a certificate\n";
        aagw_config_t *cfg = load(text, AAGW_ERR_CONFIG);
        const char    *e   = aagw_config_errors(cfg);
        (void)state;

        assert_non_null(strstr(e, "mm2.properties:7:1: "
                                  "a.ssl.keystore.location: refused: "
                                  "librdkafka opens a PKCS#12 keystore with "
                                  "its password: set "
                                  "a.ssl.keystore.password\n"));
        assert_non_null(strstr(e, "mm2.properties:11:1: b.ssl.key.password: "
                                  "refused: librdkafka opens a PKCS#12 "
                                  "keystore and its key with "
                                  "b.ssl.keystore.password alone, and this "
                                  "password differs: remove "
                                  "b.ssl.key.password or make it equal to "
                                  "b.ssl.keystore.password\n"));
        assert_non_null(strstr(
            e, "mm2.properties:13:1: c.ssl.truststore.location: refused: "
               "cannot read PKCS#12 trust store /nonexistent/c.p12 (No such "
               "file or directory) to convert it to the PEM librdkafka "
               "reads; convert it with `openssl pkcs12 -in /nonexistent/c.p12 "
               "-nokeys -out /nonexistent/c.pem` (add -legacy for a store "
               "written by Java 8 to 11), then set c.ssl.truststore.location "
               "= /nonexistent/c.pem and c.ssl.truststore.type = PEM\n"));
        assert_non_null(strstr(e, "mm2.properties:15:1: "
                                  "c.ssl.endpoint.identification.algorithm: "
                                  "refused: expected https, or nothing to "
                                  "turn the broker host name check off\n"));
        assert_non_null(strstr(e, "mm2.properties:17:1: "
                                  "a.ssl.truststore.location: refused: "
                                  "a.ssl.truststore.certificates is set too, "
                                  "which the Java client refuses: keep one "
                                  "of the two\n"));
        assert_non_null(strstr(e, "mm2.properties:18:1: "
                                  "b.ssl.truststore.certificates: refused: "
                                  "not PEM text"));
        /* No secret in any message. */
        assert_null(strstr(e, "pw-"));
        aagw_config_destroy(cfg);
}

/* Runs 'cmd' in the temp dir with sh; 0 if it exited 0. */
static int sh(const char *cmd) {
        char line[2048];
        snprintf(line, sizeof(line), "cd '%s' && { %s; } >/dev/null 2>&1",
                 tmpdir, cmd);
        return system(line);
}

/* A PKCS#12 trust store, which librdkafka cannot read, is converted with
 * its password: inline (ssl.ca.pem) when the file is loaded, a PEM file
 * next to the YAML (ssl.ca.location) when it is imported, and a note
 * says so.  Stores in the format of Java 8 to 11 (RC2-40, OpenSSL's
 * legacy provider) too.  The stores are made here with openssl. */
static void test_pkcs12_trust_store_converted(void **state) {
        char           text[2048], ca[4096], path[600], *yaml, *written;
        aagw_config_t *cfg;
        const char    *w;
        (void)state;

        if (sh("command -v openssl"))
                skip();
        assert_int_equal(
            sh("openssl req -x509 -newkey ec -pkeyopt "
               "ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem "
               "-subj /CN=aagw-test-ca -days 2 && "
               "openssl pkcs12 -export -nokeys -in ca.pem -out ts.p12 "
               "-passout pass:changeit && "
               "openssl pkcs12 -export -legacy -nokeys -in ca.pem -out ts.pfx "
               "-passout pass:changeit && mkdir -p pems"),
            0);
        snprintf(path, sizeof(path), "%s/ca.pem", tmpdir);
        slurp(path, ca, sizeof(ca));
        assert_non_null(strstr(ca, "-----BEGIN CERTIFICATE-----\n"));
        snprintf(text, sizeof(text),
                 "clusters = a, b\n"
                 "a.bootstrap.servers = x:1\n"
                 "b.bootstrap.servers = y:1\n"
                 "a->b.enabled = true\n"
                 "a.ssl.truststore.type = PKCS12\n"
                 "a.ssl.truststore.location = %s/ts.p12\n"
                 "a.ssl.truststore.password = changeit\n"
                 "b.ssl.truststore.location = %s/ts.pfx\n"
                 "b.ssl.truststore.password = changeit\n",
                 tmpdir, tmpdir);

        cfg = load(text, AAGW_OK);
        assert_string_equal(prop_of(cfg, "a", "ssl.ca.pem"), ca);
        assert_string_equal(prop_of(cfg, "b", "ssl.ca.pem"), ca);
        assert_null(prop_of(cfg, "a", "ssl.ca.location"));
        w = aagw_config_warnings(cfg);
        snprintf(path, sizeof(path),
                 "mm2.properties:6: a.ssl.truststore.location: converted: "
                 "the 1 certificate(s) of PKCS#12 trust store %s/ts.p12 are "
                 "given to librdkafka as ssl.ca.pem for cluster a\n",
                 tmpdir);
        assert_non_null(strstr(w, path));
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        aagw_config_destroy(cfg);

        cfg = aagw_config_new();
        snprintf(path, sizeof(path), "%s/pems", tmpdir);
        yaml = to_yaml(cfg, text, false, path, AAGW_OK);
        snprintf(path, sizeof(path),
                 "      ssl.ca.location: \"%s/pems/a-truststore.pem\"  # "
                 "mm2.properties:6 a.ssl.truststore.location (PKCS#12 trust "
                 "store converted to PEM)\n",
                 tmpdir);
        assert_non_null(strstr(yaml, path));
        snprintf(path, sizeof(path),
                 "mm2.properties:8: b.ssl.truststore.location: converted: "
                 "the 1 certificate(s) of PKCS#12 trust store %s/ts.pfx are "
                 "written to %s/pems/b-truststore.pem (PEM), which "
                 "ssl.ca.location of cluster b names\n",
                 tmpdir, tmpdir);
        assert_non_null(strstr(aagw_config_warnings(cfg), path));
        written = malloc(sizeof(ca));
        assert_non_null(written);
        snprintf(path, sizeof(path), "%s/pems/a-truststore.pem", tmpdir);
        slurp(path, written, sizeof(ca));
        assert_string_equal(written, ca);
        snprintf(path, sizeof(path), "%s/pems/b-truststore.pem", tmpdir);
        slurp(path, written, sizeof(ca));
        assert_string_equal(written, ca);
        free(written);
        free(yaml);
        aagw_config_destroy(cfg);

        /* A wrong password: refused with the command, nothing written. */
        assert_int_equal(sh("rm -f pems/*"), 0);
        snprintf(text, sizeof(text),
                 "clusters = a, b\n"
                 "a.bootstrap.servers = x:1\n"
                 "b.bootstrap.servers = y:1\n"
                 "a->b.enabled = true\n"
                 "a.ssl.truststore.location = %s/ts.p12\n"
                 "a.ssl.truststore.password = wrong\n",
                 tmpdir);
        cfg = aagw_config_new();
        snprintf(path, sizeof(path), "%s/pems", tmpdir);
        yaml = to_yaml(cfg, text, false, path, AAGW_ERR_CONFIG);
        assert_string_equal(yaml, "");
        snprintf(path, sizeof(path),
                 "mm2.properties:5:1: a.ssl.truststore.location: refused: "
                 "cannot read PKCS#12 trust store %s/ts.p12 (cannot open it: "
                 "mac verify failure) to convert it to the PEM librdkafka "
                 "reads; convert it with `openssl pkcs12 -in %s/ts.p12 "
                 "-nokeys -out %s/ts.pem`",
                 tmpdir, tmpdir, tmpdir);
        assert_non_null(strstr(aagw_config_errors(cfg), path));
        assert_int_not_equal(sh("ls pems/*.pem"), 0);
        free(yaml);
        aagw_config_destroy(cfg);

        /* No type and a name that does not tell: the first bytes do. */
        assert_int_equal(sh("cp ts.p12 trust.store && cp ca.pem ca.bundle"),
                         0);
        snprintf(text, sizeof(text),
                 "clusters = a, b\n"
                 "a.bootstrap.servers = x:1\n"
                 "b.bootstrap.servers = y:1\n"
                 "a->b.enabled = true\n"
                 "a.ssl.truststore.location = %s/trust.store\n"
                 "a.ssl.truststore.password = changeit\n"
                 "b.ssl.truststore.location = %s/ca.bundle\n",
                 tmpdir, tmpdir);
        cfg = load(text, AAGW_OK);
        assert_string_equal(prop_of(cfg, "a", "ssl.ca.pem"), ca);
        snprintf(path, sizeof(path), "%s/ca.bundle", tmpdir);
        assert_string_equal(prop_of(cfg, "b", "ssl.ca.location"), path);
        aagw_config_destroy(cfg);

        /* Only a regular file is read: a FIFO would block the import. */
        assert_int_equal(sh("mkfifo fifo.p12"), 0);
        snprintf(text, sizeof(text),
                 "clusters = a, b\n"
                 "a.bootstrap.servers = x:1\n"
                 "b.bootstrap.servers = y:1\n"
                 "a->b.enabled = true\n"
                 "a.ssl.truststore.location = %s/fifo.p12\n"
                 "b.ssl.truststore.location = %s/fifo\n",
                 tmpdir, tmpdir);
        cfg = load(text, AAGW_ERR_CONFIG);
        snprintf(path, sizeof(path),
                 "(not a regular file of at most 1024 KiB)");
        assert_non_null(strstr(aagw_config_errors(cfg), path));
        /* With no type and no telling name, not read: JKS, Kafka's
         * default. */
        assert_non_null(strstr(aagw_config_errors(cfg),
                               "b.ssl.truststore.location: refused: "));
        assert_non_null(strstr(aagw_config_errors(cfg), "is a JKS trust "));
        aagw_config_destroy(cfg);
}

/* OAUTHBEARER logins: Kafka's OIDC login (the JAAS options and the token
 * endpoint) as librdkafka's oidc method; the unsecured test login as
 * librdkafka's built-in unsecured token. */
static void test_oauthbearer(void **state) {
        static const char text[] =
            "clusters = a, b\n"
            "a.bootstrap.servers = x:1\n"
            "b.bootstrap.servers = y:1\n"
            "a->b.enabled = true\n"
            "sasl.mechanism = OAUTHBEARER\n"
            "a.sasl.login.callback.handler.class = org.apache.kafka.common."
            "security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
            "a.sasl.oauthbearer.token.endpoint.url = "
            "https://idp.example/oauth2/token\n"
            "a.sasl.jaas.config = org.apache.kafka.common.security."
            "oauthbearer.OAuthBearerLoginModule required clientId=\"mm2\" "
            "clientSecret=\"oidc-s3cret\" scope=\"kafka\" "
            "extension_logicalCluster=\"lkc-1\" extension_pool='p-2';\n"
            "a.sasl.login.refresh.buffer.seconds = 300\n"
            "b.sasl.jaas.config = org.apache.kafka.common.security."
            "oauthbearer.OAuthBearerLoginModule required \\\n"
            "  unsecuredLoginStringClaim_sub=\"alice\" \\\n"
            "  unsecuredLoginListClaim_scope=\"|read|write\" \\\n"
            "  unsecuredLoginLifetimeSeconds=\"600\" \\\n"
            "  unsecuredLoginExtension_trace=\"t1\" \\\n"
            "  unsecuredLoginNumberClaim_n=\"1\";\n";
        aagw_config_t *cfg = load(text, AAGW_OK);
        char          *yaml;
        (void)state;

        assert_string_equal(prop_of(cfg, "a", "sasl.mechanism"), "OAUTHBEARER");
        assert_string_equal(prop_of(cfg, "a", "sasl.oauthbearer.method"),
                            "oidc");
        assert_string_equal(prop_of(cfg, "a", "sasl.oauthbearer.client.id"),
                            "mm2");
        assert_string_equal(prop_of(cfg, "a", "sasl.oauthbearer.client.secret"),
                            "oidc-s3cret");
        assert_string_equal(prop_of(cfg, "a", "sasl.oauthbearer.scope"),
                            "kafka");
        assert_string_equal(prop_of(cfg, "a", "sasl.oauthbearer.extensions"),
                            "logicalCluster=lkc-1,pool=p-2");
        assert_string_equal(
            prop_of(cfg, "a", "sasl.oauthbearer.token.endpoint.url"),
            "https://idp.example/oauth2/token");
        assert_null(prop_of(cfg, "a", "sasl.oauthbearer.config"));
        assert_string_equal(prop_of(cfg, "b", "sasl.oauthbearer.config"),
                            "principal=alice scope=read,write lifeSeconds=600 "
                            "extension_trace=t1");
        assert_string_equal(
            prop_of(cfg, "b", "enable.sasl.oauthbearer.unsecure.jwt"), "true");
        assert_null(prop_of(cfg, "b", "sasl.oauthbearer.method"));
        assert_string_equal(
            aagw_config_warnings(cfg),
            "mm2.properties:9: a.sasl.login.refresh.buffer.seconds: ignored: "
            "tunes the Java client's own OAUTHBEARER login or its check of "
            "the token; librdkafka fetches and refreshes the token itself and "
            "the broker checks it\n"
            "mm2.properties:10: b.sasl.jaas.config: ignored: JAAS option "
            "unsecuredLoginNumberClaim_n: librdkafka's unsecured token "
            "carries only the principal, scope, lifetime and extensions\n");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        aagw_config_destroy(cfg);

        cfg  = aagw_config_new();
        yaml = to_yaml(cfg, text, false, NULL, AAGW_OK);
        assert_null(strstr(yaml, "s3cret"));
        assert_null(strstr(yaml, "alice"));
        assert_non_null(strstr(yaml, "sasl.oauthbearer.client.secret: "
                                     "\"${MM2_A_SASL_OAUTHBEARER_CLIENT_"
                                     "SECRET}\""));
        assert_non_null(strstr(yaml, "sasl.oauthbearer.config: "
                                     "\"${MM2_B_SASL_OAUTHBEARER_CONFIG}\""));
        free(yaml);
        aagw_config_destroy(cfg);

        /* Neither kind, or OIDC without its endpoint: refused. */
        cfg = load("clusters = a, b\na.bootstrap.servers = x:1\n"
                   "b.bootstrap.servers = y:1\na->b.enabled = true\n"
                   "a.sasl.jaas.config = x.OAuthBearerLoginModule required "
                   "clientId=\"c\" clientSecret=\"s\";\n"
                   "b.sasl.jaas.config = x.OAuthBearerLoginModule required;\n",
                   AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:5:1: a.sasl.jaas.config: refused: an OIDC login "
            "needs the JAAS options clientId=\"...\" and "
            "clientSecret=\"...\" and "
            "a.sasl.oauthbearer.token.endpoint.url = https://...; "
            "a.sasl.oauthbearer.token.endpoint.url is missing\n"
            "mm2.properties:6:1: b.sasl.jaas.config: refused: an OAUTHBEARER "
            "login converts as OIDC (JAAS options clientId and clientSecret, "
            "and b.sasl.oauthbearer.token.endpoint.url) or as Kafka's "
            "unsecured test login (unsecuredLoginStringClaim_sub="
            "\"PRINCIPAL\"); this one is neither\n");
        aagw_config_destroy(cfg);

        /* Kerberos, and a login handler of one's own: refused. */
        cfg = load("clusters = a, b\na.bootstrap.servers = x:1\n"
                   "b.bootstrap.servers = y:1\na->b.enabled = true\n"
                   "a.sasl.jaas.config = com.sun.security.auth.module."
                   "Krb5LoginModule required useKeyTab=true "
                   "keyTab=\"/etc/mm2.keytab\";\n"
                   "b.sasl.login.callback.handler.class = com.acme.Login\n",
                   AAGW_ERR_CONFIG);
        assert_string_equal(
            aagw_config_errors(cfg),
            "mm2.properties:5:1: a.sasl.jaas.config: refused: only PLAIN, "
            "SCRAM and OAUTHBEARER logins convert, not Krb5LoginModule; set "
            "librdkafka's sasl.* properties under clusters.a.properties\n"
            "mm2.properties:6:1: b.sasl.login.callback.handler.class: "
            "refused: a custom Java class has no aagw equivalent; Kafka's "
            "OAuthBearerLoginCallbackHandler (OIDC) converts\n");
        aagw_config_destroy(cfg);
}

/* Role-prefixed stores apply to that kind of client only; top-level ones
 * to every cluster that has none of its own. */
static void test_store_layers(void **state) {
        static const char text[] = "clusters = a, b\n"
                                   "a.bootstrap.servers = x:1\n"
                                   "b.bootstrap.servers = y:1\n"
                                   "a->b.enabled = true\n"
                                   "ssl.truststore.type = PEM\n"
                                   "ssl.truststore.location = /etc/all.pem\n"
                                   "b.ssl.truststore.location = /etc/b.pem\n"
                                   "a.consumer.ssl.truststore.location = "
                                   "/etc/a-consumer.pem\n";
        aagw_config_t    *cfg    = load(text, AAGW_OK);
        (void)state;

        assert_string_equal(prop_of(cfg, "a", "ssl.ca.location"),
                            "/etc/all.pem");
        assert_string_equal(prop_of(cfg, "a", "consumer.ssl.ca.location"),
                            "/etc/a-consumer.pem");
        assert_string_equal(prop_of(cfg, "b", "ssl.ca.location"), "/etc/b.pem");
        assert_string_equal(aagw_config_warnings(cfg), "");
        assert_int_equal(aagw_config_validate(cfg), AAGW_OK);
        aagw_config_destroy(cfg);
}

/* ---------------------------------------------------------------- CLI -- */

struct result {
        int  status;
        char out[65536], err[65536];
};

static void slurp(const char *path, char *buf, size_t size) {
        FILE  *f = fopen(path, "rb");
        size_t n = f ? fread(buf, 1, size - 1, f) : 0;
        buf[n]   = '\0';
        if (f)
                fclose(f);
}

/* Run aagw with the arguments and the NULL-terminated "NAME=VALUE" list
 * 'env' (may be NULL) added to the environment. */
static void run6(struct result *r, const char *const *env, const char *a1,
                 const char *a2, const char *a3, const char *a4, const char *a5,
                 const char *a6) {
        char  outp[512], errp[512];
        pid_t pid;
        int   st;

        snprintf(outp, sizeof(outp), "%s/out", tmpdir);
        snprintf(errp, sizeof(errp), "%s/err", tmpdir);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (!freopen(outp, "w", stdout) || !freopen(errp, "w", stderr))
                        _exit(99);
                for (size_t i = 0; env && env[i]; i++)
                        putenv((char *)env[i]);
                execl(getenv("AAGW_BIN"), "aagw", a1, a2, a3, a4, a5, a6,
                      (char *)NULL);
                _exit(98);
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        slurp(outp, r->out, sizeof(r->out));
        slurp(errp, r->err, sizeof(r->err));
}

static void run(struct result *r, const char *const *env, const char *a1,
                const char *a2, const char *a3, const char *a4) {
        run6(r, env, a1, a2, a3, a4, NULL, NULL);
}

static void run5(struct result *r, const char *const *env, const char *a1,
                 const char *a2, const char *a3, const char *a4,
                 const char *a5) {
        run6(r, env, a1, a2, a3, a4, a5, NULL);
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* `config import-mm2` prints YAML whose effective config (config check)
 * is the one `-c mm2.properties` gives; secrets are not printed unless
 * asked for; refused files exit 2 with nothing on stdout. */
static void test_cli_round_trip(void **state) {
        static struct result imp, direct, viayaml;
        char                 props[600], yaml[600];
        (void)state;

        assert_non_null(getenv("AAGW_BIN"));
        snprintf(props, sizeof(props), "%s/mm2.properties", tmpdir);
        snprintf(yaml, sizeof(yaml), "%s/aagw.yaml", tmpdir);
        write_file(props, example);

        run(&imp, NULL, "config", "import-mm2", props, NULL);
        assert_int_equal(imp.status, 0);
        assert_null(strstr(imp.out, "s3cret"));
        assert_non_null(strstr(imp.out, "sasl.password: "
                                        "\"${MM2_EAST_SASL_PASSWORD}\""));
        /* librdkafka marks the user name sensitive too. */
        assert_non_null(strstr(imp.out, "sasl.username: "
                                        "\"${MM2_EAST_SASL_USERNAME}\""));
        assert_non_null(strstr(imp.err, "tasks.max: ignored"));
        assert_non_null(strstr(imp.out, "unify:\n  mode: \"off\"  # "));
        write_file(yaml, imp.out);

        run(&direct, NULL, "config", "check", "-c", props);
        assert_int_equal(direct.status, 0);
        assert_non_null(strstr(direct.err, "read as a MirrorMaker 2 "
                                           "properties file"));
        run(&viayaml,
            (const char *const[]){"MM2_EAST_SASL_PASSWORD=s3cret",
                                  "MM2_EAST_SASL_USERNAME=mm2", NULL},
            "config", "check", "-c", yaml);
        assert_int_equal(viayaml.status, 0);
        assert_string_equal(viayaml.out, direct.out);

        /* Flags override the file, lists included. */
        run5(&direct, NULL, "config", "check", "-c", props, "--topic=zzz");
        assert_int_equal(direct.status, 0);
        assert_non_null(strstr(direct.out, "  topics:\n    - \"zzz\"\n"));
        assert_null(strstr(direct.out, "clicks.*"));

        run(&imp, NULL, "config", "import-mm2", "--show-secrets", props);
        assert_int_equal(imp.status, 0);
        assert_non_null(strstr(imp.out, "sasl.password: \"s3cret\""));

        write_file(props, "clusters = a, b\na.bootstrap.servers = x:1\n"
                          "b.bootstrap.servers = y:1\na->b.enabled = true\n"
                          "replication.policy.class = com.acme.P\n");
        run(&imp, NULL, "config", "import-mm2", props, NULL);
        assert_int_equal(imp.status, 2);
        assert_string_equal(imp.out, "");
        assert_non_null(strstr(imp.err, ":5:1: replication.policy.class: "
                                        "refused"));
        run(&direct, NULL, "run", "-c", props, NULL);
        assert_int_equal(direct.status, 2);
        assert_non_null(strstr(direct.err, "replication.policy.class: "
                                           "refused"));

        run(&imp, NULL, "config", "import-mm2", NULL, NULL);
        assert_int_equal(imp.status, 2);

        /* Per-flow topic lists print as replication.per_flow and load
         * back to the config `-c mm2.properties` gives. */
        write_file(props, "clusters = a, b\na.bootstrap.servers = x:1\n"
                          "b.bootstrap.servers = y:1\na->b.enabled = true\n"
                          "b->a.enabled = true\na->b.topics = t1, t2\n"
                          "b->a.topics.exclude = t3\n");
        run(&imp, NULL, "config", "import-mm2", props, NULL);
        assert_int_equal(imp.status, 0);
        assert_non_null(strstr(imp.out, "  per_flow:\n    a->b:\n"
                                        "      topics:\n        - \"t1\"  # "));
        write_file(yaml, imp.out);
        run(&direct, NULL, "config", "check", "-c", props);
        assert_int_equal(direct.status, 0);
        run(&viayaml, NULL, "config", "check", "-c", yaml);
        assert_int_equal(viayaml.status, 0);
        assert_string_equal(viayaml.out, direct.out);
        assert_non_null(strstr(direct.out, "    b->a:\n      topics_exclude:\n"
                                           "        - \"t3\"\n"));
}

/* The secure pair through the binary: the YAML, run with its secrets in
 * the environment, is the config `-c mm2.properties` gives; -o writes it
 * for aagw's user only, and a PKCS#12 trust store's PEM file next to it,
 * which the YAML names. */
static void test_cli_secure(void **state) {
        static struct result imp, direct, viayaml;
        char                 props[600], yaml[600], pem[600], text[1024];
        struct stat          st;
        (void)state;

        snprintf(props, sizeof(props), "%s/secure.properties", tmpdir);
        snprintf(yaml, sizeof(yaml), "%s/secure.yaml", tmpdir);
        write_file(props, secure);
        run(&imp, NULL, "config", "import-mm2", props, NULL);
        assert_int_equal(imp.status, 0);
        assert_null(strstr(imp.out, "s3cret"));
        write_file(yaml, imp.out);
        run(&direct, NULL, "config", "check", "-c", props);
        assert_int_equal(direct.status, 0);
        run(&viayaml,
            (const char *const[]){"MM2_US_EAST_SASL_USERNAME=mm2",
                                  "MM2_US_EAST_SASL_PASSWORD=east-s3cret",
                                  "MM2_US_WEST_SSL_KEYSTORE_PASSWORD=ks-s3cret",
                                  NULL},
            "config", "check", "-c", yaml);
        assert_int_equal(viayaml.status, 0);
        assert_string_equal(viayaml.out, direct.out);
        assert_null(strstr(direct.out, "s3cret"));

        /* -o: nothing on stdout, the file mode 0600 (it may hold secrets
         * with --show-secrets). */
        unlink(yaml);
        run6(&imp, NULL, "config", "import-mm2", "--show-secrets", "-o", yaml,
             props);
        assert_int_equal(imp.status, 0);
        assert_string_equal(imp.out, "");
        assert_int_equal(stat(yaml, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        slurp(yaml, imp.out, sizeof(imp.out));
        assert_non_null(strstr(imp.out, "ssl.keystore.password: "
                                        "\"ks-s3cret\""));

        if (sh("command -v openssl"))
                return;
        assert_int_equal(
            sh("mkdir -p conv && openssl req -x509 -newkey ec -pkeyopt "
               "ec_paramgen_curve:prime256v1 -nodes -keyout conv/ca.key "
               "-out conv/ca.pem -subj /CN=aagw-cli-ca -days 2 && "
               "openssl pkcs12 -export -nokeys -in conv/ca.pem "
               "-out conv/ts.p12 -passout pass:changeit"),
            0);
        snprintf(text, sizeof(text),
                 "clusters = a, b\na.bootstrap.servers = x:1\n"
                 "b.bootstrap.servers = y:1\na->b.enabled = true\n"
                 "a.security.protocol = SSL\n"
                 "a.ssl.truststore.location = %s/conv/ts.p12\n"
                 "a.ssl.truststore.password = changeit\n",
                 tmpdir);
        write_file(props, text);
        snprintf(yaml, sizeof(yaml), "%s/conv/aagw.yaml", tmpdir);
        snprintf(pem, sizeof(pem), "%s/conv/a-truststore.pem", tmpdir);
        run5(&imp, NULL, "config", "import-mm2", "-o", yaml, props);
        assert_int_equal(imp.status, 0);
        assert_non_null(strstr(imp.err, "a.ssl.truststore.location: "
                                        "converted: "));
        assert_int_equal(stat(pem, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0644);
        slurp(yaml, imp.out, sizeof(imp.out));
        snprintf(text, sizeof(text), "ssl.ca.location: \"%s\"", pem);
        assert_non_null(strstr(imp.out, text));
        run(&viayaml, NULL, "config", "check", "-c", yaml);
        assert_int_equal(viayaml.status, 0);
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
            cmocka_unit_test(test_translation),
            cmocka_unit_test(test_properties_syntax),
            cmocka_unit_test(test_latin1_and_surrogates),
            cmocka_unit_test(test_refused),
            cmocka_unit_test(test_flow_scope),
            cmocka_unit_test(test_per_flow_topics),
            cmocka_unit_test(test_top_level_client_props),
            cmocka_unit_test(test_detection),
            cmocka_unit_test(test_secure_clusters),
            cmocka_unit_test(test_pem_trust_store),
            cmocka_unit_test(test_key_stores),
            cmocka_unit_test(test_jks_refused),
            cmocka_unit_test(test_store_refusals),
            cmocka_unit_test(test_pkcs12_trust_store_converted),
            cmocka_unit_test(test_oauthbearer),
            cmocka_unit_test(test_store_layers),
            cmocka_unit_test(test_cli_round_trip),
            cmocka_unit_test(test_cli_secure),
        };
        return cmocka_run_group_tests_name("mm2_import", tests, group_setup,
                                           group_teardown);
}
