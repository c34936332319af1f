/*
 * tests/replication/test_owner_mock.c: the work-ownership module
 * (replicator/owner.c) on a librdkafka mock cluster in this process.
 *
 * The mock accepts transactions but does not enforce them (a record of
 * an aborted transaction is visible to read_committed readers,
 * the shared MOCK-CLUSTER.md): owner_txn_enforced() must say "not
 * enforced", with a message that says why, since scale-out will be
 * refused on such a cluster with it.  And the owner's mechanics that do
 * not need enforcement: a single member is given every work partition,
 * commits a transaction with their offsets, also through two
 * "coordinator not available" answers; a commit without offsets that
 * would fence it is aborted, as is one the group's ACL refuses (the
 * ownership stands); one naming a partition it does not own is refused
 * as fenced, its ownership left as it was; and an injected "illegal
 * generation" is taken as fenced, both partitions reported lost.  The
 * fencing by a real coordinator needs a real broker:
 * tests/realkafka/test_owner.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "replicator_int.h"

struct mock {
        rd_kafka_t              *rk;
        rd_kafka_mock_cluster_t *mc;
        const char              *bs;
};

static int setup(void **state) {
        static struct mock m;
        char               err[256];
        rd_kafka_conf_t   *conf = rd_kafka_conf_new();

        rd_kafka_conf_set(conf, "log_level", "0", NULL, 0);
        m.rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!m.rk)
                return -1;
        if (!(m.mc = rd_kafka_mock_cluster_new(m.rk, 1)))
                return -1;
        m.bs = rd_kafka_mock_cluster_bootstraps(m.mc);
        if (rd_kafka_mock_topic_create(m.mc, "probe", 1, 1) ||
            rd_kafka_mock_topic_create(m.mc, "work", 2, 1) ||
            rd_kafka_mock_topic_create(m.mc, "out", 1, 1))
                return -1;
        *state = &m;
        return 0;
}

static int teardown(void **state) {
        struct mock *m = *state;

        rd_kafka_mock_cluster_destroy(m->mc);
        rd_kafka_destroy(m->rk);
        return 0;
}

/* Quiet clients: the owner's and the probe's log through aagw_log. */
static const char *const quiet[] = {"log_level", "3"};

static void test_probe_not_enforced(void **state) {
        struct mock *m = *state;
        char         err[512] = "";

        int rc = owner_txn_enforced(m->bs, quiet, 1, "probe", err, sizeof(err));
        print_message("# owner_txn_enforced on the mock: %d: %s\n", rc, err);
        assert_int_equal(rc, 0);
        assert_non_null(strstr(err, "does not enforce transactions"));
        assert_non_null(strstr(err, "visible to read_committed"));
}

struct seen {
        int gained, lost;
};

static void on_gained(void *opaque,
                      const rd_kafka_topic_partition_list_t *parts) {
        ((struct seen *)opaque)->gained += parts->cnt;
}

static void on_lost(void *opaque, const rd_kafka_topic_partition_list_t *parts) {
        ((struct seen *)opaque)->lost += parts->cnt;
}

/* Kafka's API keys of the requests whose errors the tests inject. */
#define API_HEARTBEAT 12
#define API_END_TXN           26
#define API_TXN_OFFSET_COMMIT 28

/* A transaction of 'o' that wrote one record to out, committed with
 * 'offs'. */
static owner_result_t txn(struct owner *o,
                          const rd_kafka_topic_partition_list_t *offs,
                          char *err, size_t err_size) {
        owner_result_t rc = owner_begin(o, err, err_size);

        if (rc)
                return rc;
        assert_int_equal(
            rd_kafka_producev(owner_producer(o), RD_KAFKA_V_TOPIC("out"),
                              RD_KAFKA_V_VALUE("M", 1),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
        return owner_commit(o, offs, err, err_size);
}

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* owner_new() with 'c', served until it owns both work partitions (or
 * the test fails); '*ms' (may be NULL) gets how long that took. */
static struct owner *owner_owning_both(const struct owner_conf *c,
                                       int64_t                 *ms) {
        char          err[512] = "";
        struct owner *o        = owner_new(c, err, sizeof(err));

        if (!o)
                fail_msg("owner_new: %s", err);
        int64_t t0 = mono_ms();
        while (owner_partitions(o)->cnt < 2 && mono_ms() - t0 < 30000)
                assert_int_equal(owner_poll(o, 200, err, sizeof(err)), 0);
        if (ms)
                *ms = mono_ms() - t0;
        assert_true(owner_owned(o, 0) && owner_owned(o, 1));
        return o;
}

/* The offsets of work [0] and [1], at 0: a commit's fence. */
static rd_kafka_topic_partition_list_t *both_offsets(void) {
        rd_kafka_topic_partition_list_t *offs =
            rd_kafka_topic_partition_list_new(2);

        rd_kafka_topic_partition_list_add(offs, "work", 0)->offset = 0;
        rd_kafka_topic_partition_list_add(offs, "work", 1)->offset = 0;
        return offs;
}

static void test_owner_single_member(void **state) {
        struct mock      *m = *state;
        char              err[512] = "";
        struct seen       seen     = {0, 0};
        struct owner_conf c        = {
                   .bootstraps         = m->bs,
                   .props              = quiet,
                   .prop_cnt           = 1,
                   .group              = "owners",
                   .topic              = "work",
                   .member             = "m1",
                   .transactional_id   = "aagw.test.m1",
                   .session_timeout_ms = 3000,
                   /* The mock cannot describe groups. */
                   .no_name_check      = true,
                   .on_gained          = on_gained,
                   .on_lost            = on_lost,
                   .opaque             = &seen};
        int64_t       t0;
        struct owner *o = owner_owning_both(&c, &t0);

        print_message("# the only member owns %d work partitions after "
                      "%" PRId64 " ms\n",
                      owner_partitions(o)->cnt, t0);
        assert_int_equal(seen.gained, 2);
        assert_int_equal(owner_assignments(o), 1);

        /* A transaction with both offsets commits. */
        rd_kafka_topic_partition_list_t *offs = both_offsets();
        assert_int_equal(owner_begin(o, err, sizeof(err)), AAGW_OWNER_OK);
        assert_int_equal(
            rd_kafka_producev(owner_producer(o), RD_KAFKA_V_TOPIC("out"),
                              RD_KAFKA_V_VALUE("M1", 2),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
        owner_result_t rc = owner_commit(o, offs, err, sizeof(err));
        if (rc != AAGW_OWNER_OK)
                fail_msg("owner_commit: %d: %s", rc, err);

        /* No offsets, or a logical one: nothing would fence the
         * transaction.  Aborted; the ownership stands. */
        rd_kafka_topic_partition_list_t *none =
            rd_kafka_topic_partition_list_new(1);
        assert_int_equal(owner_begin(o, err, sizeof(err)), AAGW_OWNER_OK);
        assert_int_equal(owner_commit(o, none, err, sizeof(err)),
                         AAGW_OWNER_ABORTED);
        assert_non_null(strstr(err, "at least one owned work partition"));
        rd_kafka_topic_partition_list_add(none, "work", 0)->offset =
            RD_KAFKA_OFFSET_END;
        assert_int_equal(owner_begin(o, err, sizeof(err)), AAGW_OWNER_OK);
        assert_int_equal(owner_commit(o, none, err, sizeof(err)),
                         AAGW_OWNER_ABORTED);
        rd_kafka_topic_partition_list_destroy(none);
        assert_true(owner_owned(o, 0) && owner_owned(o, 1));
        assert_int_equal(seen.lost, 0);

        /* The coordinator unavailable twice at the commit: retried,
         * committed. */
        rd_kafka_mock_push_request_errors(
            m->mc, API_END_TXN, 2, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE);
        rc = txn(o, offs, err, sizeof(err));
        if (rc != AAGW_OWNER_OK)
                fail_msg("commit through 2 unavailable coordinators: %d: %s",
                         rc, err);
        /* An abortable error that says nothing of the ownership. */
        rd_kafka_mock_push_request_errors(
            m->mc, API_TXN_OFFSET_COMMIT, 1,
            RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED);
        rc = txn(o, offs, err, sizeof(err));
        print_message("# commit refused by the group's ACL: %d: %s\n", rc,
                      err);
        assert_int_equal(rc, AAGW_OWNER_ABORTED);
        assert_true(owner_owned(o, 0) && owner_owned(o, 1));

        /* A partition it was not given: refused as fenced; what it
         * owns stays its own. */
        rd_kafka_topic_partition_list_add(offs, "work", 7)->offset = 0;
        assert_int_equal(owner_begin(o, err, sizeof(err)), AAGW_OWNER_OK);
        rc = owner_commit(o, offs, err, sizeof(err));
        print_message("# commit for work [7]: %d: %s\n", rc, err);
        assert_int_equal(rc, AAGW_OWNER_FENCED);
        assert_non_null(strstr(err, "work [7] is not owned by m1"));
        assert_int_equal(seen.lost, 0);
        assert_true(owner_owned(o, 0) && owner_owned(o, 1));

        /* The coordinator says the generation moved on: fenced, both
         * reported lost. */
        offs->cnt = 2;
        rd_kafka_mock_push_request_errors(
            m->mc, API_TXN_OFFSET_COMMIT, 1,
            RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
        rc = txn(o, offs, err, sizeof(err));
        print_message("# commit of a stale generation: %d: %s\n", rc, err);
        assert_int_equal(rc, AAGW_OWNER_FENCED);
        assert_non_null(strstr(err, "ILLEGAL_GENERATION"));
        assert_int_equal(seen.lost, 2);
        assert_int_equal(owner_partitions(o)->cnt, 0);
        rd_kafka_topic_partition_list_destroy(offs);

        t0 = mono_ms();
        owner_destroy(o);
        print_message("# owner_destroy took %" PRId64 " ms\n", mono_ms() - t0);
        assert_true(mono_ms() - t0 < 15000);
}

/* Cooperative (scale_out.rebalance): each commit takes the group's
 * metadata fresh (read back from its written form); a generation that
 * moved on is a rebalance under way, not a fence; a consumer out of the
 * group sends no commit; an unknown member is fenced. */
static void test_owner_cooperative(void **state) {
        struct mock      *m        = *state;
        char              err[512] = "";
        struct seen       seen     = {0, 0};
        struct owner_conf c        = {.bootstraps         = m->bs,
                                      .props              = quiet,
                                      .prop_cnt           = 1,
                                      .group              = "owners-coop",
                                      .topic              = "work",
                                      .member             = "m3",
                                      .transactional_id   = "aagw.test.m3",
                                      .session_timeout_ms = 3000,
                                      .no_name_check      = true,
                                      .cooperative        = true,
                                      .on_gained          = on_gained,
                                      .on_lost            = on_lost,
                                      .opaque             = &seen};
        struct owner     *o        = owner_owning_both(&c, NULL);

        assert_int_equal(seen.gained, 2);
        rd_kafka_topic_partition_list_t *offs = both_offsets();
        owner_result_t                   rc   = txn(o, offs, err, sizeof(err));
        if (rc != AAGW_OWNER_OK)
                fail_msg("cooperative commit: %d: %s", rc, err);

        rd_kafka_mock_push_request_errors(m->mc, API_TXN_OFFSET_COMMIT, 1,
                                          RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
        rc = txn(o, offs, err, sizeof(err));
        print_message("# cooperative, generation moved on: %d: %s\n", rc, err);
        assert_int_equal(rc, AAGW_OWNER_ABORTED);
        assert_non_null(strstr(err, "a rebalance under way"));
        assert_int_equal(seen.lost, 0);
        assert_true(owner_owned(o, 0) && owner_owned(o, 1));

        /* Out of the group (its heartbeat told it is unknown): its
         * metadata would say generation -1 and no member id, which the
         * coordinator takes from anyone while the group is empty.  Never
         * sent: aborted before the offsets go out.  The next poll
         * reports both lost, and the rejoin gives them back. */
        rd_kafka_mock_push_request_errors(m->mc, API_HEARTBEAT, 1,
                                          RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID);
        int64_t t0 = mono_ms();
        do
                rc = txn(o, offs, err, sizeof(err));
        while (rc == AAGW_OWNER_OK && mono_ms() - t0 < 15000);
        print_message("# cooperative, out of the group: %d: %s\n", rc, err);
        assert_int_equal(rc, AAGW_OWNER_ABORTED);
        assert_non_null(strstr(err, "m3 is not a member of group "
                                    "owners-coop"));
        while ((seen.lost < 2 || owner_partitions(o)->cnt < 2) &&
               mono_ms() - t0 < 30000)
                assert_int_equal(owner_poll(o, 200, err, sizeof(err)), 0);
        assert_int_equal(seen.lost, 2);
        assert_int_equal(seen.gained, 4);
        rc = txn(o, offs, err, sizeof(err));
        if (rc != AAGW_OWNER_OK)
                fail_msg("commit after the rejoin: %d: %s", rc, err);

        rd_kafka_mock_push_request_errors(m->mc, API_TXN_OFFSET_COMMIT, 1,
                                          RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID);
        rc = txn(o, offs, err, sizeof(err));
        print_message("# cooperative, unknown member: %d: %s\n", rc, err);
        assert_int_equal(rc, AAGW_OWNER_FENCED);
        assert_int_equal(seen.lost, 4);
        assert_int_equal(owner_partitions(o)->cnt, 0);
        rd_kafka_topic_partition_list_destroy(offs);
        owner_destroy(o);
}

static void test_owner_bad_conf(void **state) {
        struct mock      *m = *state;
        char              err[512] = "";
        struct owner_conf c        = {.bootstraps           = m->bs,
                                      .group                = "owners",
                                      .topic                = "work",
                                      .member               = "m2",
                                      .transactional_id     = "aagw.test.m2",
                                      .session_timeout_ms   = 6000,
                                      .max_poll_interval_ms = 5000,
                                      .no_name_check        = true};

        assert_null(owner_new(&c, err, sizeof(err)));
        assert_string_equal(err, "max.poll.interval.ms (5000) must be at "
                                 "least session.timeout.ms (6000)");
        c.max_poll_interval_ms = 0;
        c.transactional_id     = NULL;
        assert_null(owner_new(&c, err, sizeof(err)));
        assert_non_null(strstr(err, "transactional.id"));
        static const char *const bad[] = {"producer.no.such.property", "1"};
        c.transactional_id             = "aagw.test.m2";
        c.props                        = bad;
        c.prop_cnt                     = 1;
        assert_null(owner_new(&c, err, sizeof(err)));
        assert_non_null(strstr(err, "no.such.property"));
        static const char *const coop[] = {"consumer.partition.assignment."
                                           "strategy",
                                           "cooperative-sticky"};
        c.props = coop;
        assert_null(owner_new(&c, err, sizeof(err)));
        assert_non_null(strstr(err, "scale_out.rebalance's to choose"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_probe_not_enforced),
            cmocka_unit_test(test_owner_single_member),
            cmocka_unit_test(test_owner_cooperative),
            cmocka_unit_test(test_owner_bad_conf),
        };
        return cmocka_run_group_tests_name("owner_mock", tests, setup,
                                           teardown);
}
