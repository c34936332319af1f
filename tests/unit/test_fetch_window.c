/* tests/unit/test_fetch_window.c: how a flow's fetch window is sized from
 * the round trip to its source (aagw_fetch_window_size()) and when the
 * operator's consumer properties take it over
 * (aagw_fetch_window_set_by_hand()). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "aagw_replicator.h"

#define MIB (1LL << 20)

/* Near the cluster, or with the round trip unknown: librdkafka's 1 MiB
 * per partition and aagw's 16 MiB queue, the sizes every benchmark on
 * loopback was measured with. */
static void test_base_near(void **state) {
        struct aagw_fetch_window w;
        const int64_t            rtts[] = {-1, 0, 200, 1000, 3000};
        (void)state;

        for (size_t i = 0; i < sizeof(rtts) / sizeof(rtts[0]); i++) {
                aagw_fetch_window_size(&w, rtts[i], 16);
                assert_true(w.base);
                assert_int_equal(w.partition_bytes, MIB);
                assert_int_equal(w.queue_kbytes, 16384);
                assert_int_equal(w.window_bytes, 16 * MIB);
                assert_string_equal(w.partition_s, "1048576");
                assert_string_equal(w.queue_s, "16384");
        }
        /* 50 ms over 16 partitions: 16 MiB is what the base brings. */
        aagw_fetch_window_size(&w, 50000, 16);
        assert_int_equal(w.partition_bytes, MIB);
        assert_false(w.base); /* the queue: one and a half windows */
        assert_int_equal(w.queue_kbytes, 16 * 1024 * 3 / 2);
}

/* 100 ms: 32 MiB per round trip, spread over the partitions, the queue
 * one and a half times that; fewer partitions get more each. */
static void test_long_link(void **state) {
        struct aagw_fetch_window w;
        (void)state;

        aagw_fetch_window_size(&w, 100000, 16);
        assert_false(w.base);
        assert_int_equal(w.rtt_us, 100000);
        assert_int_equal(w.partitions, 16);
        assert_int_equal(w.partition_bytes, 2 * MIB);
        assert_int_equal(w.window_bytes, 32 * MIB);
        assert_int_equal(w.queue_kbytes, 48 * 1024);
        assert_string_equal(w.partition_s, "2097152");
        assert_string_equal(w.queue_s, "49152");

        aagw_fetch_window_size(&w, 100000, 4);
        assert_int_equal(w.partition_bytes, 8 * MIB);
        assert_int_equal(w.window_bytes, 32 * MIB);

        /* Unknown partition count (nothing to copy yet): taken as 16. */
        aagw_fetch_window_size(&w, 100000, 0);
        assert_int_equal(w.partitions, 16);
        assert_int_equal(w.partition_bytes, 2 * MIB);

        /* Many partitions: never below 1 MiB each (the window grows). */
        aagw_fetch_window_size(&w, 100000, 64);
        assert_int_equal(w.partition_bytes, MIB);
        assert_int_equal(w.window_bytes, 64 * MIB);

        /* Odd sizes round up to 64 KiB. */
        aagw_fetch_window_size(&w, 100000, 3);
        assert_int_equal(w.partition_bytes % 65536, 0);
        assert_true(w.partition_bytes * 3 >= 32 * MIB);
        assert_true(w.partition_bytes * 3 < 32 * MIB + 3 * 65536);
}

/* Beyond 200 ms the window stops growing: its memory is bounded. */
static void test_capped(void **state) {
        struct aagw_fetch_window w;
        (void)state;

        aagw_fetch_window_size(&w, 200000, 16);
        assert_int_equal(w.window_bytes, AAGW_FETCH_WINDOW_MAX);
        aagw_fetch_window_size(&w, 600000, 16);
        assert_int_equal(w.window_bytes, AAGW_FETCH_WINDOW_MAX);
        assert_int_equal(w.queue_kbytes, AAGW_FETCH_WINDOW_MAX * 3 / 2 / 1024);
        aagw_fetch_window_size(&w, 600000, 1);
        assert_int_equal(w.partition_bytes, AAGW_FETCH_WINDOW_MAX);
}

/* The operator's consumer properties for the source cluster: any of the
 * three window properties, bare or for the consumer, takes the window
 * over; another role's or another property does not. */
static void test_set_by_hand(void **state) {
        const char *const none[] = {"security.protocol",
                                    "SASL_SSL",
                                    "consumer.session.timeout.ms",
                                    "3000",
                                    "producer.max.partition.fetch.bytes",
                                    "1"};
        const char *const bare[] = {"max.partition.fetch.bytes", "4194304"};
        const char *const cons[] = {"security.protocol", "SSL",
                                    "consumer.queued.max.messages.kbytes",
                                    "65536"};
        const char *const fmb[]  = {"consumer.fetch.max.bytes", "1000000"};
        const char *const adm[]  = {"admin.fetch.max.bytes", "1000000"};
        (void)state;

        assert_false(aagw_fetch_window_set_by_hand(none, 3, "consumer"));
        assert_false(aagw_fetch_window_set_by_hand(NULL, 0, "consumer"));
        assert_true(aagw_fetch_window_set_by_hand(bare, 1, "consumer"));
        assert_true(aagw_fetch_window_set_by_hand(cons, 2, "consumer"));
        assert_true(aagw_fetch_window_set_by_hand(fmb, 1, "consumer"));
        assert_false(aagw_fetch_window_set_by_hand(adm, 1, "consumer"));
}

#define MIB (1LL << 20)

/* As many connections as the window needs at one receive buffer each,
 * within the automatic and absolute bounds and the partitions. */
static void test_connections_auto(void **state) {
        (void)state;
        /* near the cluster, or nothing known: one */
        assert_int_equal(aagw_fetch_connections(0, 6 * MIB, 16, 0), 1);
        assert_int_equal(aagw_fetch_connections(32 * MIB, 0, 16, 0), 1);
        /* a window one buffer holds: one */
        assert_int_equal(aagw_fetch_connections(6 * MIB, 6 * MIB, 16, 0), 1);
        /* 40 ms: 12.8 MiB over 6 MiB buffers, rounded up */
        assert_int_equal(
            aagw_fetch_connections(320 * MIB * 40 / 1000, 6 * MIB, 16, 0), 3);
        /* 100 ms: 32 MiB would want 6; auto stops at 4 */
        assert_int_equal(aagw_fetch_connections(32 * MIB, 6 * MIB, 16, 0),
                         AAGW_FETCH_CONNECTIONS_AUTO_MAX);
        /* never more than the partitions */
        assert_int_equal(aagw_fetch_connections(32 * MIB, 6 * MIB, 2, 0), 2);
        assert_int_equal(aagw_fetch_connections(32 * MIB, 6 * MIB, 0, 0),
                         AAGW_FETCH_CONNECTIONS_AUTO_MAX);
}

/* A number set by hand is taken, within the partitions and the maximum,
 * whatever the window. */
static void test_connections_asked(void **state) {
        (void)state;
        assert_int_equal(aagw_fetch_connections(0, 6 * MIB, 16, 3), 3);
        assert_int_equal(aagw_fetch_connections(64 * MIB, 6 * MIB, 16, 1), 1);
        assert_int_equal(aagw_fetch_connections(0, 6 * MIB, 16, 8), 8);
        assert_int_equal(aagw_fetch_connections(0, 6 * MIB, 16, 20),
                         AAGW_FETCH_CONNECTIONS_MAX);
        assert_int_equal(aagw_fetch_connections(0, 6 * MIB, 2, 8), 2);
}

/* A connection brings what the least of the receiving socket, the
 * broker's send buffer (doubled, as Linux counts it) and one answer
 * allows. */
static void test_connection_bytes(void **state) {
        (void)state;
        /* Kafka's default socket.send.buffer.bytes */
        assert_int_equal(
            aagw_fetch_connection_bytes(32 * MIB, 102400, 50 * MIB), 204800);
        /* the broker's unknown (not allowed to describe it) */
        assert_int_equal(aagw_fetch_connection_bytes(6 * MIB, -1, 50 * MIB),
                         6 * MIB);
        /* -1 at the broker: the system's default */
        assert_int_equal(aagw_fetch_connection_bytes(32 * MIB, 0, 50 * MIB),
                         AAGW_TCP_SEND_DEFAULT_MAX);
        /* large buffers both ends: one answer */
        assert_int_equal(
            aagw_fetch_connection_bytes(64 * MIB, 64 * MIB, 50 * MIB),
            50 * MIB);
        assert_int_equal(aagw_fetch_connection_bytes(0, -1, 50 * MIB),
                         50 * MIB);
        /* 100 ms behind Kafka's default send buffer: 4 connections */
        assert_int_equal(
            aagw_fetch_connections(
                32 * MIB,
                aagw_fetch_connection_bytes(6 * MIB, 102400, 50 * MIB), 16, 0),
            AAGW_FETCH_CONNECTIONS_AUTO_MAX);
}

/* The receive buffer's limit is this host's net.ipv4.tcp_rmem maximum,
 * read here on our own. */
static void test_receive_max(void **state) {
        long long lo, def, max;
        FILE     *fp = fopen("/proc/sys/net/ipv4/tcp_rmem", "r");

        (void)state;
        if (fp && fscanf(fp, "%lld %lld %lld", &lo, &def, &max) == 3)
                assert_int_equal(aagw_tcp_receive_max(), max);
        else
                assert_int_equal(aagw_tcp_receive_max(), 6 * MIB);
        if (fp)
                fclose(fp);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_base_near),
            cmocka_unit_test(test_long_link),
            cmocka_unit_test(test_capped),
            cmocka_unit_test(test_set_by_hand),
            cmocka_unit_test(test_connections_auto),
            cmocka_unit_test(test_connections_asked),
            cmocka_unit_test(test_connection_bytes),
            cmocka_unit_test(test_receive_max),
        };
        return cmocka_run_group_tests_name("fetch_window", tests, NULL, NULL);
}
