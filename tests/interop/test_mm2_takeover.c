/*
 * tests/interop/test_mm2_takeover.c: aagw replaces a running MirrorMaker 2,
 * then the source cluster dies and a group fails over from the target
 * side alone; real Kafka, real MM2, clusters of the test's own.
 *
 * Takeover.  Real MM2 (dedicated mode, default offset.lag.max, so its
 * newest offset-sync is behind) replicates east's topic T (3 partitions)
 * to west's east.T; Kafka's VerifiableProducer writes to T continuously
 * (400 records/s, 2,400 records) and MM2 is killed (SIGKILL) while it
 * copies that stream; aagw starts for the same flow with an empty state
 * dir while the producer keeps writing, and 100 more records per
 * partition follow.  Asserted: west's east.T holds every
 * record of T exactly once, in its partition and order (no re-copy of
 * the history, no gap at the hand-over), and aagw's log says per
 * partition that it took over, from which offsets, and that the target's
 * last record was found at the source (never the fallback that repeats
 * records).
 *
 * Failover with the source down.  Group g commits offsets at east in the
 * part aagw replicated; once aagw's checkpoints of them are at west, aagw
 * is stopped and east's broker is shut down.  `aagw failover` then says
 * it runs in target-only mode, refuses without --force, and with it
 * commits the checkpoint offsets at west; a consumer of g at west starts
 * exactly at the record after the last one g consumed at east (by the
 * provenance of the copy it reads first), in every partition.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aagw_policy.h"
#include "aagw_replicator.h"
#include "interop.h"

#define NPART 3

static struct io io;
static char      topic[128], remote[160];

static int teardown(void **state) {
        (void)state;
        if (io.dir)
                io_end(&io);
        return 0;
}

static void nap_ms(long ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

static harness_proc_t *start_mm2(void) {
        return io_mm2(&io, topic, NULL);
}

/* ------------------------------------------------------------ RECORDS -- */

/* The values of one partition, in offset order. */
struct vals {
        char  **v;
        int64_t *origin; /* provenance source offset, -1 none */
        size_t  n, cap;
};

static void vals_free(struct vals *vs) {
        for (size_t i = 0; i < vs->n; i++)
                free(vs->v[i]);
        free(vs->v);
        free(vs->origin);
        memset(vs, 0, sizeof(*vs));
}

/* The source offset in a copy's "aagw.prov" header, -1 without one. */
static int64_t origin_of(const rd_kafka_message_t *m) {
        rd_kafka_headers_t *h;
        const void         *v;
        size_t              n;
        char                buf[512], *semi;

        if (rd_kafka_message_headers(m, &h) ||
            rd_kafka_header_get_last(h, "aagw.prov", &v, &n))
                return -1;
        snprintf(buf, sizeof(buf), "%.*s", (int)n, (const char *)v);
        /* "1;PATH;TOPIC:P:O;HLC;ID" */
        if (!(semi = strchr(buf, ';')) || !(semi = strchr(semi + 1, ';')))
                return -1;
        char *end = strchr(semi + 1, ';');
        if (end)
                *end = '\0';
        return strtoll(strrchr(semi, ':') + 1, NULL, 10);
}

static void on_val(void *arg, const rd_kafka_message_t *m) {
        struct vals *vs = arg;
        if (vs->n == vs->cap) {
                vs->cap    = vs->cap ? 2 * vs->cap : 1024;
                vs->v      = realloc(vs->v, vs->cap * sizeof(*vs->v));
                vs->origin = realloc(vs->origin,
                                     vs->cap * sizeof(*vs->origin));
                assert_non_null(vs->v);
                assert_non_null(vs->origin);
        }
        vs->v[vs->n]      = strndup(m->payload ? m->payload : "", m->len);
        vs->origin[vs->n] = origin_of(m);
        vs->n++;
}

/* Produce 'cnt' records to every partition of T, tagged "<tag>p<P>". */
static void produce_all(const char *tag, int cnt) {
        for (int p = 0; p < NPART; p++) {
                char t[64];
                snprintf(t, sizeof(t), "%sp%d", tag, p);
                io_produce(&io, "east", topic, p, cnt, t);
        }
}

static int count_in(const char *text, const char *needle) {
        int n = 0;
        for (const char *p = text; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* ---------------------------------------------------------- CHECKPOINTS -- */

struct cks {
        int64_t up[NPART], down[NPART];
};

static void on_ck(void *arg, const rd_kafka_message_t *m) {
        struct cks                *c = arg;
        struct aagw_mm2_checkpoint ck;
        if (aagw_mm2_checkpoint_decode(m->key, m->key_len, m->payload, m->len,
                                       &ck) &&
            !strcmp(ck.group, "g") && !strcmp(ck.topic, remote) &&
            ck.partition >= 0 && ck.partition < NPART) {
                c->up[ck.partition]   = ck.upstream;
                c->down[ck.partition] = ck.downstream;
        }
}

/* ----------------------------------------------------------------- TEST -- */

static void test_takeover_then_failover(void **state) {
        int64_t t_start = harness_now_ms();
        (void)state;

        io_begin(&io, "interop-takeover");
        char *name = harness_unique_name("t");
        snprintf(topic, sizeof(topic), "%s", name);
        snprintf(remote, sizeof(remote), "east.%s", name);
        free(name);
        io_topic(&io, "east", topic, NPART);
        io_topic(&io, "west", remote, NPART);
        produce_all("a", 300);

        /* MM2 replicates; then a producer writes continuously (Kafka's
         * VerifiableProducer, 400 records/s) and MM2 is killed while it
         * copies that stream. */
        harness_proc_t *mm2      = start_mm2();
        int64_t         deadline = harness_now_ms() + 150000;
        for (;;) {
                bool copied = true;
                for (int p = 0; p < NPART; p++)
                        copied &= io_end_offset(&io, "west", remote, p) >= 300;
                if (copied)
                        break;
                if (harness_now_ms() > deadline)
                        fail_msg("MirrorMaker 2 did not replicate %s in time "
                                 "(see mm2.log in %s)",
                                 topic, io.dir);
                if (harness_proc_wait(mm2, 0, NULL) == AAGW_OK)
                        fail_msg("MirrorMaker 2 exited (see mm2-jvm.log in "
                                 "%s)",
                                 io.dir);
                nap_ms(300);
        }
        const char *pargs[] = {"--bootstrap-server", io_bs(&io, "east"),
                               "--topic", topic, "--max-messages", "2400",
                               "--throughput", "400", "--acks", "-1",
                               "--value-prefix", "7"};
        const char *pargv[40];
        io_java_argv(&io, pargv, "producer.log",
                     "org.apache.kafka.tools.VerifiableProducer", pargs, 12);
        harness_proc_t *prod = io_spawn(&io, "producer", pargv);
        deadline             = harness_now_ms() + 60000;
        for (;;) {
                int64_t n = 0;
                for (int p = 0; p < NPART; p++)
                        n += io_end_offset(&io, "east", topic, p) - 300;
                if (n >= 600)
                        break;
                if (harness_now_ms() > deadline)
                        fail_msg("the producer wrote %lld records in 60 s "
                                 "(see producer.log)",
                                 (long long)n);
                nap_ms(100);
        }
        harness_proc_signal(mm2, SIGKILL);
        assert_int_equal(harness_proc_wait(mm2, 20000, NULL), AAGW_OK);
        int64_t by_mm2[NPART], at_kill[NPART];
        for (int p = 0; p < NPART; p++) {
                by_mm2[p]  = io_end_offset(&io, "west", remote, p);
                at_kill[p] = io_end_offset(&io, "east", topic, p);
        }
        print_message("# MM2 killed mid-stream: west holds %lld/%lld/%lld of "
                      "%lld/%lld/%lld\n",
                      (long long)by_mm2[0], (long long)by_mm2[1],
                      (long long)by_mm2[2], (long long)at_kill[0],
                      (long long)at_kill[1], (long long)at_kill[2]);

        /* aagw for the same flow, empty state dir. */
        char groups[64];
        snprintf(groups, sizeof(groups), "replication.groups=g");
        const char *extra[] = {"--topic", topic, "--set", groups,
                               "--set", "mm2.heartbeats_interval=0s", NULL};
        harness_proc_t *gw = io_gateway(&io, "aagw", "east", extra);
        if (harness_proc_wait(prod, 90000, NULL) != AAGW_OK)
                fail_msg("the producer did not finish (see producer.log)");
        produce_all("r", 100);
        int64_t end[NPART];
        deadline = harness_now_ms() + 90000;
        for (;;) {
                bool all = true;
                for (int p = 0; p < NPART; p++) {
                        end[p] = io_end_offset(&io, "east", topic, p);
                        all &= io_end_offset(&io, "west", remote, p) >= end[p];
                }
                if (all)
                        break;
                if (harness_now_ms() > deadline ||
                    harness_proc_wait(gw, 0, NULL) == AAGW_OK)
                        fail_msg("aagw did not catch up (see aagw.log in %s)",
                                 io.dir);
                nap_ms(300);
        }

        /* Every record exactly once, in order, per partition. */
        for (int p = 0; p < NPART; p++) {
                struct vals src = {0}, dst = {0};
                assert_true(io_read(&io, "east", topic, p, on_val, &src) > 0);
                assert_true(io_read(&io, "west", remote, p, on_val, &dst) > 0);
                if (dst.n != src.n)
                        fail_msg("partition %d: %zu records at east, %zu "
                                 "copies at west (%lld by MM2)",
                                 p, src.n, dst.n, (long long)by_mm2[p]);
                for (size_t i = 0; i < src.n; i++) {
                        if (strcmp(src.v[i], dst.v[i]))
                                fail_msg("partition %d offset %zu: east has "
                                         "%s, west %s",
                                         p, i, src.v[i], dst.v[i]);
                        /* MM2's copies carry no aagw provenance; aagw's
                         * name their source offset. */
                        if ((int64_t)i < by_mm2[p])
                                assert_int_equal(dst.origin[i], -1);
                        else
                                assert_int_equal(dst.origin[i], (int64_t)i);
                }
                print_message("# partition %d: %zu records, %lld copied by "
                              "MM2, %lld by aagw, each once\n",
                              p, src.n, (long long)by_mm2[p],
                              (long long)((int64_t)src.n - by_mm2[p]));
                vals_free(&src);
                vals_free(&dst);
        }
        char *log = harness_path_join(io.dir, "aagw.log");
        char *text = harness_read_file(log, NULL);
        assert_non_null(text);
        assert_int_equal(count_in(text, "taking over from another "
                                        "replicator"),
                         NPART);
        assert_int_equal(count_in(text, "the target's last record is source "
                                        "record"),
                         NPART);
        assert_null(strstr(text, "copies again at most"));
        free(text);
        print_message("# takeover checked %lld ms after the start\n",
                      (long long)(harness_now_ms() - t_start));

        /* g consumed part of what aagw replicated; its checkpoints. */
        int64_t committed[NPART];
        for (int p = 0; p < NPART; p++) {
                committed[p] = end[p] - 30 - 7 * p;
                io_commit(&io, "east", "g", topic, p, committed[p]);
        }
        struct cks c;
        deadline = harness_now_ms() + 60000;
        for (;;) {
                bool all = true;
                memset(&c, 0xff, sizeof(c));
                io_read(&io, "west", "east.checkpoints.internal", 0, on_ck, &c);
                for (int p = 0; p < NPART; p++)
                        all &= c.up[p] == committed[p];
                if (all)
                        break;
                if (harness_now_ms() > deadline)
                        fail_msg("no checkpoint of g's commits at west (see "
                                 "aagw.log in %s)",
                                 io.dir);
                nap_ms(500);
        }
        harness_proc_signal(gw, SIGTERM);
        assert_int_equal(harness_proc_wait(gw, 30000, NULL), AAGW_OK);

        /* The disaster: east's broker goes away. */
        io_ctl(&io, "term", "east");
        harness_output_t o;
        const char *fw[] = {"failover", "--group", "g", "--from", "east",
                            "--to", "west", "--source-timeout", "3", NULL,
                            NULL};
        int rc = io_aagw(&io, fw, &o);
        io_show("failover, east down", rc, &o, false);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(o.out, "mode: target-only: east did not "
                                      "answer in 3 s"));
        assert_non_null(strstr(o.err, "east is unreachable"));
        harness_output_deinit(&o);
        fw[9] = "--force";
        rc    = io_aagw(&io, fw, &o);
        io_show("--force", rc, &o, true);
        assert_int_equal(rc, 0);
        assert_non_null(strstr(o.out, "committed group g at west"));
        harness_output_deinit(&o);

        /* g at west resumes right after what it consumed at east. */
        rd_kafka_conf_t *cf = rd_kafka_conf_new();
        char             err[256];
        rd_kafka_conf_set(cf, "bootstrap.servers", io_bs(&io, "west"), err,
                          sizeof(err));
        rd_kafka_conf_set(cf, "group.id", "g", err, sizeof(err));
        rd_kafka_conf_set(cf, "enable.auto.commit", "false", err, sizeof(err));
        rd_kafka_conf_set(cf, "auto.offset.reset", "earliest", err,
                          sizeof(err));
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, cf, err, sizeof(err));
        assert_non_null(rk);
        rd_kafka_poll_set_consumer(rk);
        rd_kafka_topic_partition_list_t *sub =
            rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(sub, remote, RD_KAFKA_PARTITION_UA);
        assert_int_equal(rd_kafka_subscribe(rk, sub), 0);
        rd_kafka_topic_partition_list_destroy(sub);
        int64_t first[NPART] = {-1, -1, -1};
        int     got          = 0;
        deadline             = harness_now_ms() + 60000;
        while (got < NPART && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
                if (!m)
                        continue;
                if (!m->err && m->partition < NPART &&
                    first[m->partition] == -1) {
                        first[m->partition] = origin_of(m);
                        got++;
                }
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        for (int p = 0; p < NPART; p++) {
                print_message("# [%d] g committed %lld at east; first record "
                              "at west copies source offset %lld\n",
                              p, (long long)committed[p], (long long)first[p]);
                assert_int_equal(first[p], committed[p]);
        }
        print_message("# whole test: %lld ms\n",
                      (long long)(harness_now_ms() - t_start));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_takeover_then_failover, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
