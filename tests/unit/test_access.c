/*
 * tests/unit/test_access.c: denied operations in the access registry
 * (replicator/access.c, replicator_note_authz() in kafka_common.c): which
 * errors count, which resource a message names, the cluster of a client
 * told by its bootstraps, and one ACCESS line per distinct problem.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "replicator_int.h"

/* The ACCESS lines logged, one after the other. */
static char lines[16][1024];
static int  nlines;

static void sink(aagw_log_level_t level, const char *line, void *opaque) {
        (void)level;
        (void)opaque;
        if (strstr(line, "[ACCESS]") && nlines < 16)
                snprintf(lines[nlines++], sizeof(lines[0]), "%s", line);
}

static int setup(void **state) {
        (void)state;
        nlines         = 0;
        aagw_log_level = AAGW_LOG_INFO;
        aagw_log_set_sink(sink, NULL);
        aagw_access_reset();
        aagw_access_register("east", "127.0.0.1:1");
        aagw_access_register("west", "127.0.0.1:2");
        return 0;
}

static int teardown(void **state) {
        (void)state;
        aagw_access_reset();
        aagw_log_set_sink(NULL, NULL);
        return 0;
}

static void test_only_denials_count(void **state) {
        struct aagw_access a;

        (void)state;
        assert_false(replicator_note_authz("east", 0, "READ", "topic t"));
        assert_false(replicator_note_authz(
            "east", RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "READ",
            "topic t"));
        assert_false(replicator_note_authz(
            "east", RD_KAFKA_RESP_ERR__TRANSPORT, "WRITE", "topic t"));
        assert_true(aagw_access_get("east", &a));
        assert_int_equal(a.cause, AAGW_ACCESS_OK);
        assert_int_equal(a.failures, 0);
        assert_int_equal(nlines, 0);
}

/* The resource the error names, out of those the request touched. */
static void test_the_named_resource(void **state) {
        struct aagw_access a;

        (void)state;
        assert_true(replicator_note_authz(
            "east", RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, "READ",
            "topic %s, group %s", "clicks", "aagw.g.east-west"));
        assert_true(aagw_access_current("east", &a));
        assert_int_equal(a.cause, AAGW_ACCESS_AUTHORIZATION);
        assert_string_equal(a.what,
                            "use of consumer group aagw.g.east-west denied: "
                            "allow aagw's principal READ on it");
        assert_string_equal(a.reason, "Broker: Group authorization failed");

        replicator_note_authz("east",
                              RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                              "READ", "topic %s, group %s", "clicks",
                              "aagw.g.east-west");
        aagw_access_get("east", &a);
        assert_string_equal(a.what, "read topic clicks denied: allow aagw's "
                                    "principal READ on it");

        replicator_note_authz("west",
                              RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                              "WRITE", "topic %s", "east.clicks");
        aagw_access_get("west", &a);
        assert_string_equal(a.what, "write to topic east.clicks denied: "
                                    "allow aagw's principal WRITE on it");

        /* A producer's cluster-wide right is IDEMPOTENT_WRITE. */
        replicator_note_authz("west",
                              RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED,
                              "WRITE", "topic %s", "east.clicks");
        aagw_access_get("west", &a);
        assert_string_equal(a.what,
                            "write to topic east.clicks denied: allow aagw's "
                            "principal IDEMPOTENT_WRITE on the cluster");

        replicator_note_authz(
            "west", RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "READ", "transactional.id %s", "aagw.g.east-west.m1");
        aagw_access_get("west", &a);
        assert_string_equal(a.what, "transactions with transactional.id "
                                    "aagw.g.east-west.m1 denied: allow "
                                    "aagw's principal WRITE on it");
        /* An alias nobody registered: counted as a denial, noted nowhere. */
        assert_true(replicator_note_authz(
            "north", RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "READ",
            "topic x"));
        assert_false(aagw_access_get("north", &a));
}

/* One line per distinct problem, however often it is met; each counted. */
static void test_one_line_per_problem(void **state) {
        struct aagw_access a;

        (void)state;
        for (int i = 0; i < 5; i++) {
                replicator_note_authz(
                    "east", RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
                    "CREATE", "topic %s", "west.clicks");
                replicator_note_authz(
                    "east", RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED,
                    "READ", "group %s", "aagw.g.east-west");
        }
        assert_int_equal(nlines, 2);
        assert_non_null(strstr(lines[0], " E [ACCESS] cluster east: not "
                                         "authorized: create topic "
                                         "west.clicks denied: allow aagw's "
                                         "principal CREATE on it (Broker: "
                                         "Topic authorization failed)"));
        assert_non_null(strstr(lines[1], "use of consumer group "
                                         "aagw.g.east-west denied"));
        aagw_access_get("east", &a);
        assert_int_equal(a.failures, 10);
        /* A denial is no login failure: a success does not end it. */
        aagw_access_ok("east", AAGW_ACCESS_OK);
        assert_true(aagw_access_current("east", &a));
        assert_int_equal(a.cause, AAGW_ACCESS_AUTHORIZATION);
}

/* An idle idempotent producer's refused id is only in its log line. */
static void test_producer_id_line(void **state) {
        char what[256];

        (void)state;
        assert_int_equal(
            aagw_access_classify(
                "[thrd:main]: Fatal error: Broker: Cluster authorization "
                "failed: Failed to acquire idempotence PID from broker "
                "sasl_ssl://127.0.0.1:9093/1: Broker: Cluster authorization "
                "failed",
                what, sizeof(what)),
            AAGW_ACCESS_AUTHORIZATION);
        assert_non_null(strstr(what, "IDEMPOTENT_WRITE on the cluster"));
}

/* A client's cluster, by its bootstraps. */
static void test_alias_of_client(void **state) {
        char               err[256], alias[AAGW_ALIAS_MAX + 1] = "";
        rd_kafka_conf_t   *conf = rd_kafka_conf_new();
        struct aagw_access a;

        (void)state;
        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           "127.0.0.1:2", err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                      sizeof(err));
        assert_non_null(rk);
        assert_true(aagw_access_alias_of(rk, alias, sizeof(alias)));
        assert_string_equal(alias, "west");
        assert_true(replicator_note_authz_rk(
            rk, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "ALTER",
            "topic %s", "east.clicks"));
        assert_true(aagw_access_current("west", &a));
        assert_string_equal(a.what, "alter topic east.clicks denied: allow "
                                    "aagw's principal ALTER on it");
        aagw_access_reset();
        assert_false(aagw_access_alias_of(rk, alias, sizeof(alias)));
        rd_kafka_destroy(rk);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_only_denials_count, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_the_named_resource, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_one_line_per_problem, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_producer_id_line, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_alias_of_client, setup,
                                            teardown),
        };
        return cmocka_run_group_tests_name("access", tests, NULL, NULL);
}
