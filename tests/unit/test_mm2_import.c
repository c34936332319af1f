/*
 * tests/unit/test_mm2_import.c: MirrorMaker 2 properties files as aagw
 * config (gateway/mm2_import.c): Java properties syntax, the key
 * translation with its line numbers, ignored and refused keys, detection
 * by content, and `aagw config import-mm2` against `-c mm2.properties`
 * (the printed YAML must give the same effective config).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                                  "librdkafka has no Java trust store"));
        assert_non_null(strstr(e, "mm2.properties:8:1: east->west.groups: "
                                  "refused: the enabled flows do not agree "
                                  "on groups"));
        assert_non_null(strstr(e, "mm2.properties:10:1: "
                                  "east.sasl.jaas.config: refused: only "
                                  "PLAIN and SCRAM"));
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
 * its own uses them, and nothing is refused or ignored. */
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
        assert_string_equal(aagw_config_warnings(cfg), "");
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
static void run5(struct result *r, const char *const *env, const char *a1,
                 const char *a2, const char *a3, const char *a4,
                 const char *a5) {
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
                execl(getenv("AAGW_BIN"), "aagw", a1, a2, a3, a4, a5,
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
        run5(r, env, a1, a2, a3, a4, NULL);
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
            cmocka_unit_test(test_cli_round_trip),
        };
        return cmocka_run_group_tests_name("mm2_import", tests, group_setup,
                                           group_teardown);
}
