/*
 * tests/realkafka/test_topics.c: the remote topics aagw keeps at the
 * target, as MirrorMaker 2 keeps them (replicator/topics.c), on two
 * single-broker KRaft clusters with an authorizer (StandardAuthorizer):
 *
 *   east: super.users=User:ANONYMOUS (everyone on PLAINTEXT is
 *         ANONYMOUS, aagw and the test included);
 *   west: allow.everyone.if.no.acl.found=true, no super user, so that
 *         the test can deny aagw one operation on one topic.  The test
 *         gives ANONYMOUS ALL on the topics under "east." (a PREFIXED
 *         ACL: the copied LITERAL ACLs would otherwise lock aagw out).
 *
 * Phase 1, replication.sync_topic_acls=false: east's `noacl` (ALLOW READ
 * for User:alice) is copied, and east.noacl gets no ACL.
 *
 * Phase 2, ACL and config sync on, intervals 1 s, replication.factor 1:
 *  (a) `cfg` (6 partitions, cleanup.policy=compact, retention.ms,
 *      min.insync.replicas) -> east.cfg has 6 partitions, replication
 *      factor 1, compact, the same retention.ms, no min.insync.replicas
 *      override; retention.ms changed at east reaches west;
 *  (d) cfg's ACLs ALLOW READ and ALLOW WRITE for alice -> east.cfg has
 *      ALLOW READ for alice and no ALLOW WRITE;
 *  (b) `grow` gets partitions (2 -> 5) while VerifiableProducer writes to
 *      it: east.grow gets the 3 new ones and holds every record of every
 *      partition once, in order;
 *  (c) `few` has 4 partitions, west's east.few 2 and a DENY ALTER for
 *      aagw: reported in /status (with the fix command), in the metric
 *      aagw_topic_partitions_missing and in the log; partitions 0-1 are
 *      copied meanwhile (as is everything above); once the DENY goes,
 *      aagw grows east.few and copies partitions 2-3 from their first
 *      record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aagw_replicator.h"
#include "rk.h"

#define ADMIN_MS 10000

static rd_kafka_t *adm(struct rk *r, const char *alias) {
        for (size_t i = 0; i < r->ncl; i++)
                if (!strcmp(r->c[i].alias, alias))
                        return r->c[i].admin;
        fail_msg("no cluster %s", alias);
        return NULL;
}

static rd_kafka_event_t *admin_result(rd_kafka_queue_t *q, const char *what) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, ADMIN_MS + 5000);
        if (!ev)
                fail_msg("%s: no answer", what);
        if (rd_kafka_event_error(ev))
                fail_msg("%s: %s", what, rd_kafka_event_error_string(ev));
        return ev;
}

/* Create 'topic' with 'parts' partitions and the configs 'kv' (name,
 * value, ..., NULL), wait until its partitions have leaders. */
static void topic_create(struct rk *r, const char *alias, const char *topic,
                         int parts, const char *const *kv) {
        rd_kafka_t          *rk = adm(r, alias);
        char                 why[256];
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, parts, 1, why,
                                                        sizeof(why));
        rd_kafka_queue_t    *q  = rd_kafka_queue_new(rk);
        size_t               n;

        assert_non_null(nt);
        for (size_t i = 0; kv && kv[i]; i += 2)
                assert_int_equal(
                    rd_kafka_NewTopic_set_config(nt, kv[i], kv[i + 1]), 0);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        rd_kafka_event_t *ev = admin_result(q, "CreateTopics");
        const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(
            rd_kafka_event_CreateTopics_result(ev), &n);
        assert_int_equal(n, 1);
        if (rd_kafka_topic_result_error(tr[0]))
                fail_msg("create %s at %s: %s", topic, alias,
                         rd_kafka_topic_result_error_string(tr[0]));
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewTopic_destroy(nt);
        assert_true(rk_wait_isr(r, alias, topic, 1, 60000));
}

/* Partition count of 'topic' (-1: none) and the replicas of partition 0. */
static int partitions_of(struct rk *r, const char *alias, const char *topic,
                         int *rf) {
        const struct rd_kafka_metadata *md = NULL;
        int                             n  = -1;

        if (rd_kafka_metadata(adm(r, alias), 1, NULL, &md, 5000))
                return -1;
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, topic) && !md->topics[i].err) {
                        n = md->topics[i].partition_cnt;
                        if (rf && n > 0)
                                *rf = md->topics[i].partitions[0].replica_cnt;
                }
        rd_kafka_metadata_destroy(md);
        return n;
}

/* The topic-level override of config 'name' of 'topic' into 'buf' ("" if
 * the topic does not override it). */
static void config_get(struct rk *r, const char *alias, const char *topic,
                       const char *name, char *buf, size_t size) {
        rd_kafka_t                *rk = adm(r, alias);
        rd_kafka_ConfigResource_t *res =
            rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_queue_t          *q = rd_kafka_queue_new(rk);
        size_t                     rn, cn;

        buf[0] = '\0';
        rd_kafka_DescribeConfigs(rk, &res, 1, NULL, q);
        rd_kafka_event_t *ev = admin_result(q, "DescribeConfigs");
        const rd_kafka_ConfigResource_t **rr =
            rd_kafka_DescribeConfigs_result_resources(
                rd_kafka_event_DescribeConfigs_result(ev), &rn);
        assert_int_equal(rn, 1);
        if (!rd_kafka_ConfigResource_error(rr[0])) {
                const rd_kafka_ConfigEntry_t **ce =
                    rd_kafka_ConfigResource_configs(rr[0], &cn);
                for (size_t i = 0; i < cn; i++)
                        if (!strcmp(rd_kafka_ConfigEntry_name(ce[i]), name) &&
                            rd_kafka_ConfigEntry_source(ce[i]) ==
                                RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG)
                                snprintf(buf, size, "%s",
                                         rd_kafka_ConfigEntry_value(ce[i]));
        }
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_ConfigResource_destroy(res);
}

/* Set the overrides of 'topic' to exactly 'kv' (AlterConfigs). */
static void config_set(struct rk *r, const char *alias, const char *topic,
                       const char *const *kv) {
        rd_kafka_t                *rk = adm(r, alias);
        rd_kafka_ConfigResource_t *res =
            rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_queue_t          *q = rd_kafka_queue_new(rk);
        size_t                     rn;

        for (size_t i = 0; kv[i]; i += 2)
                rd_kafka_ConfigResource_set_config(res, kv[i], kv[i + 1]);
        rd_kafka_AlterConfigs(rk, &res, 1, NULL, q);
        rd_kafka_event_t *ev = admin_result(q, "AlterConfigs");
        const rd_kafka_ConfigResource_t **rr =
            rd_kafka_AlterConfigs_result_resources(
                rd_kafka_event_AlterConfigs_result(ev), &rn);
        assert_int_equal(rn, 1);
        assert_int_equal(rd_kafka_ConfigResource_error(rr[0]), 0);
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_ConfigResource_destroy(res);
}

static void acl_create(struct rk *r, const char *alias, const char *topic,
                       rd_kafka_ResourcePatternType_t pat,
                       const char *principal, rd_kafka_AclOperation_t op,
                       rd_kafka_AclPermissionType_t perm) {
        rd_kafka_t            *rk = adm(r, alias);
        char                   why[256];
        rd_kafka_AclBinding_t *b  = rd_kafka_AclBinding_new(
            RD_KAFKA_RESOURCE_TOPIC, topic, pat, principal, "*", op, perm, why,
            sizeof(why));
        rd_kafka_queue_t      *q = rd_kafka_queue_new(rk);
        size_t                 n;

        assert_non_null(b);
        rd_kafka_CreateAcls(rk, &b, 1, NULL, q);
        rd_kafka_event_t *ev = admin_result(q, "CreateAcls");
        const rd_kafka_acl_result_t **ar = rd_kafka_CreateAcls_result_acls(
            rd_kafka_event_CreateAcls_result(ev), &n);
        assert_int_equal(n, 1);
        if (rd_kafka_acl_result_error(ar[0]))
                fail_msg("CreateAcls %s at %s: %s", topic, alias,
                         rd_kafka_error_string(rd_kafka_acl_result_error(ar[0])));
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AclBinding_destroy(b);
}

/* A filter for the LITERAL ACLs of 'topic' for 'principal' with 'op' and
 * 'perm'. */
static rd_kafka_AclBindingFilter_t *
acl_filter(const char *topic, const char *principal, rd_kafka_AclOperation_t op,
           rd_kafka_AclPermissionType_t perm) {
        char                         why[256];
        rd_kafka_AclBindingFilter_t *f = rd_kafka_AclBindingFilter_new(
            RD_KAFKA_RESOURCE_TOPIC, topic, RD_KAFKA_RESOURCE_PATTERN_LITERAL,
            principal, NULL, op, perm, why, sizeof(why));

        if (!f)
                fail_msg("ACL filter for %s: %s", topic, why);
        return f;
}

static void acl_delete(struct rk *r, const char *alias, const char *topic,
                       const char *principal, rd_kafka_AclOperation_t op,
                       rd_kafka_AclPermissionType_t perm) {
        rd_kafka_t                  *rk = adm(r, alias);
        rd_kafka_AclBindingFilter_t *f  = acl_filter(topic, principal, op, perm);
        rd_kafka_queue_t            *q  = rd_kafka_queue_new(rk);

        rd_kafka_DeleteAcls(rk, &f, 1, NULL, q);
        rd_kafka_event_destroy(admin_result(q, "DeleteAcls"));
        rd_kafka_queue_destroy(q);
        rd_kafka_AclBinding_destroy(f);
}

/* LITERAL ACLs of 'topic' for 'principal' with 'op' and 'perm'. */
static int acl_count(struct rk *r, const char *alias, const char *topic,
                     const char *principal, rd_kafka_AclOperation_t op,
                     rd_kafka_AclPermissionType_t perm) {
        rd_kafka_t                  *rk = adm(r, alias);
        rd_kafka_AclBindingFilter_t *f  = acl_filter(topic, principal, op, perm);
        rd_kafka_queue_t            *q  = rd_kafka_queue_new(rk);
        size_t                       n  = 0;

        rd_kafka_DescribeAcls(rk, f, NULL, q);
        rd_kafka_event_t *ev = admin_result(q, "DescribeAcls");
        rd_kafka_DescribeAcls_result_acls(rd_kafka_event_DescribeAcls_result(ev),
                                          &n);
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AclBinding_destroy(f);
        return (int)n;
}

/* Write 'n' records "<prefix>.<i>" to 'topic', round robin over its
 * 'parts' partitions; every one must be acknowledged. */
static void produce(struct rk *r, const char *alias, const char *topic,
                    int parts, int n, const char *prefix) {
        char             errstr[512], val[64];
        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(rk_bs(r, alias), "test-producer", errstr,
                                sizeof(errstr));
        assert_non_null(conf);
        assert_int_equal(rd_kafka_conf_set(conf, "acks", "all", errstr,
                                           sizeof(errstr)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p =
            rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        assert_non_null(p);
        for (int i = 0; i < n; i++) {
                snprintf(val, sizeof(val), "%s.%d", prefix, i);
                rd_kafka_resp_err_t e = rd_kafka_producev(
                    p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(i % parts),
                    RD_KAFKA_V_VALUE(val, strlen(val)),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
                if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        rd_kafka_poll(p, 100);
                        i--;
                        continue;
                }
                assert_int_equal(e, 0);
        }
        assert_int_equal(rd_kafka_flush(p, 60000), 0);
        rd_kafka_destroy(p);
}

/* ----------------------------------------------- STATUS AND METRICS -- */

/* /status of the running gateway, through `aagw status --json`. */
static json_object *status_json(struct rk *r) {
        harness_output_t  o;
        const char *const argv[] = {harness_aagw_bin(), "status", "--state-dir",
                                    r->state, "--json", NULL};

        memset(&o, 0, sizeof(o));
        assert_int_equal(
            harness_run(argv, NULL, 0, 10000, &o, r->errstr, sizeof(r->errstr)),
            AAGW_OK);
        json_object *j = json_tokener_parse(o.out ? o.out : "");
        harness_output_deinit(&o);
        return j;
}

/* The entry of 'remote' in the flow's topics_missing_partitions, or NULL
 * (borrowed from 'j'). */
static json_object *missing_entry(json_object *j, const char *remote) {
        json_object *flows, *arr, *v;

        if (!j || !json_object_object_get_ex(j, "flows", &flows))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(flows); i++) {
                json_object *f = json_object_array_get_idx(flows, i);
                if (!json_object_object_get_ex(f, "topics_missing_partitions",
                                               &arr))
                        continue;
                for (size_t k = 0; k < json_object_array_length(arr); k++) {
                        json_object *t = json_object_array_get_idx(arr, k);
                        if (json_object_object_get_ex(t, "remote", &v) &&
                            !strcmp(json_object_get_string(v), remote))
                                return t;
                }
        }
        return NULL;
}

/* GET /metrics from the address the gateway wrote in its state dir. */
static char *metrics(struct rk *r) {
        char  path[700], *addr, *colon, req[128], *buf = NULL;
        size_t len = 0;
        int    fd;

        snprintf(path, sizeof(path), "%s/admin.addr", r->state);
        addr = harness_read_file(path, NULL);
        assert_non_null(addr);
        addr[strcspn(addr, "\n")] = '\0';
        colon = strrchr(addr, ':');
        assert_non_null(colon);
        *colon = '\0';
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port   = htons((uint16_t)atoi(colon + 1))};
        assert_int_equal(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        snprintf(req, sizeof(req),
                 "GET /metrics HTTP/1.0\r\nHost: %s:%s\r\n\r\n", addr,
                 colon + 1);
        assert_true(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
        for (;;) {
                char    chunk[8192];
                ssize_t got = read(fd, chunk, sizeof(chunk));
                if (got <= 0)
                        break;
                buf = realloc(buf, len + (size_t)got + 1);
                memcpy(buf + len, chunk, (size_t)got);
                len += (size_t)got;
                buf[len] = '\0';
        }
        close(fd);
        free(addr);
        assert_non_null(buf);
        return buf;
}

/* ------------------------------------------------------ CONDITIONS -- */

struct cfg_wait {
        struct rk  *r;
        const char *topic, *name, *want;
        char        got[256];
};

static bool config_is(void *arg) {
        struct cfg_wait *w = arg;
        config_get(w->r, "west", w->topic, w->name, w->got, sizeof(w->got));
        return !strcmp(w->got, w->want);
}

struct acl_wait {
        struct rk *r;
        const char *topic;
};

static bool alice_reads(void *arg) {
        struct acl_wait *w = arg;
        return acl_count(w->r, "west", w->topic, "User:alice",
                         RD_KAFKA_ACL_OPERATION_READ,
                         RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW) == 1;
}

struct part_wait {
        struct rk  *r;
        const char *alias, *topic;
        int         want, got;
};

static bool has_partitions(void *arg) {
        struct part_wait *w = arg;
        w->got = partitions_of(w->r, w->alias, w->topic, NULL);
        return w->got == w->want;
}

struct missing_wait {
        struct rk   *r;
        json_object *j;
};

static bool few_reported(void *arg) {
        struct missing_wait *w = arg;
        if (w->j)
                json_object_put(w->j);
        w->j = status_json(w->r);
        return missing_entry(w->j, "east.few") != NULL;
}

static bool log_has(struct rk *r, const char *needle) {
        char *text = harness_read_file(r->gw_log, NULL);
        bool  hit  = text && strstr(text, needle);
        free(text);
        return hit;
}

/* Records of partitions 'from'..'to' of 'topic' at 'alias'. */
static int64_t size_of(struct rk *r, const char *alias, const char *topic,
                       int from, int to) {
        int64_t sum = 0, lo, hi;
        for (int p = from; p <= to; p++) {
                if (rd_kafka_query_watermark_offsets(adm(r, alias), topic, p,
                                                     &lo, &hi, 5000))
                        return -1;
                sum += hi - lo;
        }
        return sum;
}

/* ------------------------------------------------------------- TEST -- */

static const char PRODUCER_CONFIG[] =
    "acks=all\n"
    "enable.idempotence=true\n"
    "retries=2147483647\n"
    "delivery.timeout.ms=120000\n"
    "linger.ms=5\n"
    /* sees the new partitions within a second */
    "metadata.max.age.ms=1000\n";

static void test_topics(void **state) {
        struct rk *r = rk_new("rk-topics");
        *state       = r;

        const char *const east_props[] = {
            "authorizer.class.name=org.apache.kafka.metadata.authorizer."
            "StandardAuthorizer",
            "super.users=User:ANONYMOUS", NULL};
        const char *const west_props[] = {
            "authorizer.class.name=org.apache.kafka.metadata.authorizer."
            "StandardAuthorizer",
            "allow.everyone.if.no.acl.found=true", NULL};
        rk_cluster_start_with(r, "east", 1, east_props);
        rk_cluster_start_with(r, "west", 1, west_props);

        acl_create(r, "west", "east.", RD_KAFKA_RESOURCE_PATTERN_PREFIXED,
                   "User:ANONYMOUS", RD_KAFKA_ACL_OPERATION_ALL,
                   RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW);

        /* ------------------------- phase 1: ACL sync off ------------- */
        topic_create(r, "east", "noacl", 2, NULL);
        acl_create(r, "east", "noacl", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                   "User:alice", RD_KAFKA_ACL_OPERATION_READ,
                   RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW);
        produce(r, "east", "noacl", 2, 100, "n");
        const char *const gw1[] = {
            "--mode", "active-passive", "--primary", "east", "--topic",
            "noacl", "--set", "replication.sync_topic_acls=false", "--set",
            "replication.sync_topic_configs_interval=1s", NULL};
        rk_gw_start(r, gw1);
        rk_expect_size(r, "west", "east.noacl", 100, 60000);
        /* Nothing to await: the ACL would have come with the first sync,
         * which ran before the copy's first record (it starts when the
         * topic is created); give it three intervals more. */
        usleep(3000 * 1000);
        assert_int_equal(acl_count(r, "west", "east.noacl", NULL,
                                   RD_KAFKA_ACL_OPERATION_ANY,
                                   RD_KAFKA_ACL_PERMISSION_TYPE_ANY),
                         0);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);
        print_message("# phase 1 (no ACL sync): east.noacl copied, no ACL, "
                      "%.1f s\n",
                      rk_elapsed(r));

        /* ------------------------- phase 2 --------------------------- */
        const char *const cfg_kv[] = {"cleanup.policy",      "compact",
                                      "retention.ms",        "3600000",
                                      "min.insync.replicas", "1",
                                      NULL};
        topic_create(r, "east", "cfg", 6, cfg_kv);
        acl_create(r, "east", "cfg", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                   "User:alice", RD_KAFKA_ACL_OPERATION_READ,
                   RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW);
        acl_create(r, "east", "cfg", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                   "User:alice", RD_KAFKA_ACL_OPERATION_WRITE,
                   RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW);
        acl_create(r, "east", "cfg", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                   "User:bob", RD_KAFKA_ACL_OPERATION_READ,
                   RD_KAFKA_ACL_PERMISSION_TYPE_DENY);
        acl_create(r, "east", "cfg", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                   "User:carol", RD_KAFKA_ACL_OPERATION_ALL,
                   RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW);
        topic_create(r, "east", "grow", 2, NULL);
        topic_create(r, "east", "few", 4, NULL);
        topic_create(r, "west", "east.few", 2, NULL);
        acl_create(r, "west", "east.few", RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                   "User:ANONYMOUS", RD_KAFKA_ACL_OPERATION_ALTER,
                   RD_KAFKA_ACL_PERMISSION_TYPE_DENY);
        produce(r, "east", "few", 4, 400, "f");

        char *pconf = rk_write(r, "producer.properties", PRODUCER_CONFIG);
        char *g_out = rk_path(r, "producer-grow.out");
        char *g_err = rk_path(r, "producer-grow.err");
        const char *const pargs[] = {
            "--bootstrap-server", rk_bs(r, "east"), "--topic", "grow",
            "--max-messages", "-1", "--throughput", "1000", "--acks", "-1",
            "--producer.config", pconf, "--value-prefix", "1",
            "--repeating-keys", "100", NULL};
        harness_proc_t *prod = rk_java_spawn(
            r, "org.apache.kafka.tools.VerifiableProducer", pargs, g_out, g_err);
        struct rk_counter acks;
        rk_counter_init(&acks, g_out, "producer_send_success");

        const char *const gw2[] = {
            "--mode", "active-passive", "--primary", "east", "--topic",
            "cfg|grow|few", "--admin", "127.0.0.1:0", "--set",
            "replication.factor=1", "--set",
            "replication.sync_topic_configs_interval=1s", "--set",
            "replication.sync_topic_acls_interval=1s",
            /* The same gateway id as phase 1: a restart with another
             * topic list must be assigned the new topics (with static
             * membership, off by default, it was handed phase 1's
             * assignment and never read them; operations.md). */
            NULL};
        rk_gw_start(r, gw2);

        /* (a) the copy of cfg: partitions, replication factor, configs */
        struct part_wait pw = {r, "west", "east.cfg", 6, 0};
        if (!harness_wait_until(has_partitions, &pw, 60000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("east.cfg at west: %d partitions, want 6", pw.got);
        }
        int rf = 0;
        assert_int_equal(partitions_of(r, "west", "east.cfg", &rf), 6);
        assert_int_equal(rf, 1);
        char v[256];
        config_get(r, "west", "east.cfg", "cleanup.policy", v, sizeof(v));
        assert_string_equal(v, "compact");
        config_get(r, "west", "east.cfg", "retention.ms", v, sizeof(v));
        assert_string_equal(v, "3600000");
        config_get(r, "west", "east.cfg", "min.insync.replicas", v, sizeof(v));
        assert_string_equal(v, ""); /* excluded: not copied */
        print_message("# (a) east.cfg: 6 partitions, RF 1, compact, "
                      "retention.ms 3600000, no min.insync.replicas, %.1f s\n",
                      rk_elapsed(r));

        /* (d) ACLs: READ copied, WRITE not */
        struct acl_wait aw = {r, "east.cfg"};
        if (!harness_wait_until(alice_reads, &aw, 30000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("east.cfg at west: no ALLOW READ for User:alice");
        }
        assert_int_equal(acl_count(r, "west", "east.cfg", "User:alice",
                                   RD_KAFKA_ACL_OPERATION_WRITE,
                                   RD_KAFKA_ACL_PERMISSION_TYPE_ANY),
                         0);
        /* DENY as it is; ALLOW ALL as ALLOW READ */
        assert_int_equal(acl_count(r, "west", "east.cfg", "User:bob",
                                   RD_KAFKA_ACL_OPERATION_READ,
                                   RD_KAFKA_ACL_PERMISSION_TYPE_DENY),
                         1);
        assert_int_equal(acl_count(r, "west", "east.cfg", "User:carol",
                                   RD_KAFKA_ACL_OPERATION_READ,
                                   RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW),
                         1);
        assert_int_equal(acl_count(r, "west", "east.cfg", NULL,
                                   RD_KAFKA_ACL_OPERATION_ANY,
                                   RD_KAFKA_ACL_PERMISSION_TYPE_ANY),
                         3);
        print_message("# (d) east.cfg: ALLOW READ alice (no WRITE), DENY "
                      "READ bob, ALLOW READ carol (ALL at east)\n");

        /* Overrides made at the target: an excluded name stays, a copied
         * name the source does not set goes. */
        const char *const west_kv[] = {"cleanup.policy",      "compact",
                                       "retention.ms",        "3600000",
                                       "min.insync.replicas", "1",
                                       "segment.ms",          "600000",
                                       NULL};
        config_set(r, "west", "east.cfg", west_kv);

        /* a config changed at the source reaches the copy */
        const char *const cfg_kv2[] = {"cleanup.policy",      "compact",
                                       "retention.ms",        "7200000",
                                       "min.insync.replicas", "1",
                                       NULL};
        int64_t t_cfg = harness_now_ms();
        config_set(r, "east", "cfg", cfg_kv2);
        struct cfg_wait cw = {r, "east.cfg", "retention.ms", "7200000", ""};
        if (!harness_wait_until(config_is, &cw, 20000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("east.cfg retention.ms at west: %s", cw.got);
        }
        print_message("# (a) retention.ms 7200000 at west %.1f s after the "
                      "change at east\n",
                      (double)(harness_now_ms() - t_cfg) / 1000.0);
        config_get(r, "west", "east.cfg", "min.insync.replicas", v, sizeof(v));
        assert_string_equal(v, "1");
        config_get(r, "west", "east.cfg", "segment.ms", v, sizeof(v));
        assert_string_equal(v, "");
        config_get(r, "west", "east.cfg", "cleanup.policy", v, sizeof(v));
        assert_string_equal(v, "compact");

        /* (c) few: reported while partitions 2-3 cannot be created */
        struct missing_wait mw = {r, NULL};
        if (!harness_wait_until(few_reported, &mw, 30000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("east.few not reported in /status");
        }
        json_object *e = missing_entry(mw.j, "east.few"), *x;
        assert_true(json_object_object_get_ex(e, "source_partitions", &x));
        assert_int_equal(json_object_get_int(x), 4);
        assert_true(json_object_object_get_ex(e, "target_partitions", &x));
        assert_int_equal(json_object_get_int(x), 2);
        assert_true(json_object_object_get_ex(e, "fix", &x));
        char fix[512];
        snprintf(fix, sizeof(fix),
                 "kafka-topics.sh --bootstrap-server %s --alter --topic "
                 "east.few --partitions 4",
                 rk_bs(r, "west"));
        assert_string_equal(json_object_get_string(x), fix);
        json_object_put(mw.j);
        char *m = metrics(r);
        assert_non_null(strstr(m, "aagw_topic_partitions_missing{flow=\"east->"
                                  "west\",topic=\"few\"} 2\n"));
        assert_non_null(strstr(m, "aagw_replication_partitions_missing{flow="
                                  "\"east->west\"} 2\n"));
        free(m);
        assert_true(log_has(r, fix));
        /* partitions 0 and 1 flow meanwhile */
        int64_t want01 = size_of(r, "east", "few", 0, 1);
        rk_expect_size(r, "west", "east.few", want01, 30000);
        print_message("# (c) east.few reported (status, metric, log: %s); "
                      "partitions 0-1 copied (%" PRId64 " records)\n",
                      fix, want01);

        /* (b) grow under load: 2 -> 5 partitions mid-stream */
        struct rk_counter *ac = &acks;
        while (rk_count_poll(ac) < 2000) {
                if (harness_proc_wait(prod, 0, NULL) != AAGW_ERR_TIMEOUT)
                        fail_msg("VerifiableProducer exited");
                usleep(100 * 1000);
        }
        int64_t t_grow = harness_now_ms();
        rk_grow_topic(r, "east", "grow", 5);
        print_message("# (b) grow: 2 -> 5 partitions at %" PRId64 " acks\n",
                      acks.cnt);
        struct part_wait gw_ = {r, "west", "east.grow", 5, 0};
        if (!harness_wait_until(has_partitions, &gw_, 30000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("east.grow at west: %d partitions, want 5", gw_.got);
        }
        print_message("# (b) east.grow has 5 partitions %.1f s after the "
                      "source grew\n",
                      (double)(harness_now_ms() - t_grow) / 1000.0);
        int64_t after = acks.cnt;
        while (rk_count_poll(ac) < after + 3000) {
                if (harness_proc_wait(prod, 0, NULL) != AAGW_ERR_TIMEOUT)
                        fail_msg("VerifiableProducer exited");
                usleep(100 * 1000);
        }
        rk_producer_stop(r, prod, g_err);
        harness_proc_destroy(prod);

        /* (c) the fix: the DENY goes, aagw grows east.few itself */
        acl_delete(r, "west", "east.few", "User:ANONYMOUS",
                   RD_KAFKA_ACL_OPERATION_ALTER,
                   RD_KAFKA_ACL_PERMISSION_TYPE_DENY);
        rk_expect_size(r, "west", "east.few", 400, 60000);

        struct rk_produced gp;
        rk_produced_parse(g_out, &gp);
        int64_t acked = rk_bag_total(gp.acked);
        rk_expect_size(r, "west", "east.grow", rk_size(r, "east", "grow"),
                       60000);
        rk_gw_expect_running(r);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        const char *const et[] = {"grow", "few", NULL};
        const char *const wt[] = {"east.grow", "east.few", NULL};
        char *eo = rk_read_topics(r, "east", "read-east", et);
        char *wo = rk_read_topics(r, "west", "read-west", wt);
        struct rk_read g_src, g_copy, f_src, f_copy;
        rk_read_parse(eo, "grow", &g_src);
        rk_read_parse(wo, "east.grow", &g_copy);
        rk_read_parse(eo, "few", &f_src);
        rk_read_parse(wo, "east.few", &f_copy);
        assert_int_equal(g_src.nparts, 5);
        int64_t in_new = 0;
        for (int p = 2; p < 5; p++)
                in_new += (int64_t)g_src.part_cnt[p];
        print_message("# (b) grow: %" PRId64 " acked, %" PRId64
                      " at the source (%" PRId64 " in the 3 new partitions)\n",
                      acked, g_src.records, in_new);
        assert_true(in_new > 0);
        bool ok = rk_check_source("east grow", gp.acked, gp.failed, &g_src);
        ok &= rk_check("west east.grow", g_src.values, NULL, &g_copy);
        ok &= rk_check("west east.few", f_src.values, NULL, &f_copy);
        int64_t order = rk_order_diffs("west east.grow", &g_src, &g_copy) +
                        rk_order_diffs("west east.few", &f_src, &f_copy);
        print_message("# wall %.1f s\n", rk_elapsed(r));
        assert_true(ok);
        assert_int_equal(order, 0);

        rk_read_deinit(&g_src);
        rk_read_deinit(&g_copy);
        rk_read_deinit(&f_src);
        rk_read_deinit(&f_copy);
        rk_produced_deinit(&gp);
        free(eo);
        free(wo);
        free(pconf);
        free(g_out);
        free(g_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_topics, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
