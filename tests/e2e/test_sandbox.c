/* tests/e2e/test_sandbox.c: the embedded clusters, end to end.
 *
 *  - the sandbox API in this process: real librdkafka clients produce and
 *    consume over loopback, clusters are isolated, bad input is refused
 *    with the documented message;
 *  - the `aagw sandbox` program: bootstraps on stdout and in the file,
 *    topics visible to kcat, data round-trips through kcat, clean exit on
 *    SIGTERM, usage errors;
 *  - the harness itself (clusters from the environment or a sandbox, kcat
 *    options, bootstraps parsing, run deadlines), since every later e2e
 *    test leans on it.
 *
 * Needs AAGW_BIN (set by meson) and kcat (KCAT or PATH; tests that need it
 * skip without it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "aagw_replicator.h"
#include "harness.h"

/* Generous for ASan builds on a loaded 2-core CI machine; a healthy run
 * needs a fraction of each. */
#define START_TIMEOUT_MS 20000
#define KCAT_TIMEOUT_MS 30000
#define KAFKA_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 10000

#define PARTITIONS 8

/* Per-test resources, released by teardown even when an assertion fails
 * half-way (cmocka longjmps out of the test, then runs teardown). */
struct fx {
        char                 *dir;
        char                 *topic;
        aagw_sandbox_t       *sb;
        harness_clusters_t   *hc;
        harness_proc_t       *proc;
        harness_bootstraps_t *bs_out, *bs_file;
        rd_kafka_t           *rk;
        harness_lines_t       lines;
        harness_output_t      out;
        char                 *text1, *text2;
        char                 *out_path, *err_path, *bs_path;
        struct rec           *recs;
        char                  errstr[512];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        f->dir = harness_tmpdir_new("e2e-sandbox");
        if (!f->dir) {
                free(f);
                return -1;
        }
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;

        harness_proc_destroy(f->proc);
        if (f->rk)
                rd_kafka_destroy(f->rk);
        aagw_sandbox_destroy(f->sb);
        harness_clusters_destroy(f->hc);
        harness_bootstraps_destroy(f->bs_out);
        harness_bootstraps_destroy(f->bs_file);
        harness_lines_deinit(&f->lines);
        harness_output_deinit(&f->out);
        free(f->text1);
        free(f->text2);
        free(f->out_path);
        free(f->err_path);
        free(f->bs_path);
        free(f->recs);
        free(f->topic);
        harness_rmtree(f->dir);
        free(f->dir);
        free(f);
        return 0;
}

/* --------------------------- KAFKA CLIENT HELPERS ------------------------ */

/* A consumed record, as much of it as the checks need. */
struct rec {
        int32_t partition;
        int64_t offset;
        int     key; /* the N of "key-N" */
        int     seq; /* the N of "value-N" */
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        int *counts = opaque; /* [0] delivered, [1] failed */

        (void)rk;
        counts[m->err ? 1 : 0]++;
}

/* Produce 'cnt' records "key-<i % keys>" -> "value-<i>" with an idempotent
 * librdkafka producer and wait for every delivery report. */
static void produce_keyed(struct fx *f, const char *bootstraps,
                          const char *topic, int cnt, int keys) {
        rd_kafka_conf_t *conf;
        int              counts[2] = {0, 0};

        conf = aagw_kafka_conf_new(bootstraps, "test-producer", f->errstr,
                                   sizeof(f->errstr));
        assert_non_null(conf);
        assert_int_equal(aagw_kafka_conf_set(conf, "enable.idempotence", "true",
                                             f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(aagw_kafka_conf_set(conf, "linger.ms", "5", f->errstr,
                                             sizeof(f->errstr)),
                         AAGW_OK);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, counts);
        f->rk =
            rd_kafka_new(RD_KAFKA_PRODUCER, conf, f->errstr, sizeof(f->errstr));
        assert_non_null(f->rk);

        for (int i = 0; i < cnt; i++) {
                char key[32], val[32];

                snprintf(key, sizeof(key), "key-%d", i % keys);
                snprintf(val, sizeof(val), "value-%04d", i);
                assert_int_equal(
                    rd_kafka_producev(f->rk, RD_KAFKA_V_TOPIC(topic),
                                      RD_KAFKA_V_KEY(key, strlen(key)),
                                      RD_KAFKA_V_VALUE(val, strlen(val)),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
                rd_kafka_poll(f->rk, 0);
        }
        assert_int_equal(rd_kafka_flush(f->rk, KAFKA_TIMEOUT_MS),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
        assert_int_equal(counts[1], 0);
        assert_int_equal(counts[0], cnt);
        rd_kafka_destroy(f->rk);
        f->rk = NULL;
}

/* Parse "<prefix><int>" or fail the test. */
static int num_after(const char *s, size_t len, const char *prefix) {
        size_t plen = strlen(prefix);
        char   buf[32];

        assert_true(len > plen && len - plen < sizeof(buf));
        assert_memory_equal(s, prefix, plen);
        memcpy(buf, s + plen, len - plen);
        buf[len - plen] = '\0';
        return atoi(buf);
}

/* Read every partition of 'topic' from the beginning to its end (no
 * consumer group: assign() + partition EOF), into f->recs.
 * @returns the number of records read. */
static size_t consume_all(struct fx *f, const char *bootstraps,
                          const char *topic, int partitions, size_t max) {
        rd_kafka_topic_partition_list_t *parts;
        rd_kafka_conf_t                 *conf;
        int64_t deadline        = harness_now_ms() + KAFKA_TIMEOUT_MS;
        bool    eof[PARTITIONS] = {false};
        int     eof_cnt         = 0;
        size_t  got             = 0;

        assert_true(partitions <= PARTITIONS);
        f->recs = realloc(f->recs, max * sizeof(*f->recs));
        assert_non_null(f->recs);
        conf = aagw_kafka_conf_new(bootstraps, "test-consumer", f->errstr,
                                   sizeof(f->errstr));
        assert_non_null(conf);
        assert_int_equal(aagw_kafka_conf_set(conf, "enable.partition.eof",
                                             "true", f->errstr,
                                             sizeof(f->errstr)),
                         AAGW_OK);
        /* The end of a partition is seen through an empty fetch, which
         * the broker holds for fetch.wait.max.ms (500 ms by default). */
        assert_int_equal(aagw_kafka_conf_set(conf, "fetch.wait.max.ms", "50",
                                             f->errstr, sizeof(f->errstr)),
                         AAGW_OK);
        /* assign() needs a group id even though no group is joined. */
        assert_int_equal(aagw_kafka_conf_set(conf, "group.id", topic, f->errstr,
                                             sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(aagw_kafka_conf_set(conf, "enable.auto.commit",
                                             "false", f->errstr,
                                             sizeof(f->errstr)),
                         AAGW_OK);
        f->rk =
            rd_kafka_new(RD_KAFKA_CONSUMER, conf, f->errstr, sizeof(f->errstr));
        assert_non_null(f->rk);
        parts = rd_kafka_topic_partition_list_new(partitions);
        for (int p = 0; p < partitions; p++)
                rd_kafka_topic_partition_list_add(parts, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(f->rk, parts),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_topic_partition_list_destroy(parts);

        /* Everything was acknowledged before we started, so EOF on every
         * partition means we have it all. */
        while (eof_cnt < partitions && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(f->rk, 100);

                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                        if (!eof[m->partition]) {
                                eof[m->partition] = true;
                                eof_cnt++;
                        }
                } else if (m->err) {
                        fail_msg("consume %s: %s", topic,
                                 rd_kafka_message_errstr(m));
                } else {
                        assert_true(got < max);
                        assert_non_null(m->key);
                        assert_non_null(m->payload);
                        f->recs[got].partition = m->partition;
                        f->recs[got].offset    = m->offset;
                        f->recs[got].key =
                            num_after(m->key, m->key_len, "key-");
                        f->recs[got].seq =
                            num_after(m->payload, m->len, "value-");
                        got++;
                }
                rd_kafka_message_destroy(m);
        }
        assert_int_equal(eof_cnt, partitions);
        rd_kafka_consumer_close(f->rk);
        rd_kafka_destroy(f->rk);
        f->rk = NULL;
        return got;
}

/* Sum of the high watermarks of 'topic' on 'bootstraps': how many records
 * it holds, without consuming them. */
static int64_t topic_size(struct fx *f, const char *bootstraps,
                          const char *topic, int partitions) {
        rd_kafka_conf_t *conf;
        int64_t          sum = 0;

        conf = aagw_kafka_conf_new(bootstraps, "test-watermarks", f->errstr,
                                   sizeof(f->errstr));
        assert_non_null(conf);
        f->rk =
            rd_kafka_new(RD_KAFKA_PRODUCER, conf, f->errstr, sizeof(f->errstr));
        assert_non_null(f->rk);
        for (int p = 0; p < partitions; p++) {
                int64_t lo, hi;
                assert_int_equal(
                    rd_kafka_query_watermark_offsets(f->rk, topic, p, &lo, &hi,
                                                     KAFKA_TIMEOUT_MS),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
                sum += hi - lo;
        }
        rd_kafka_destroy(f->rk);
        f->rk = NULL;
        return sum;
}

/* The checks every round trip must pass: each of the 'cnt' records exactly
 * once with its own key, one partition per key, and within a partition
 * the produce order (offsets and sequence numbers both increasing). */
static void check_records(const struct rec *r, size_t got, int cnt, int keys) {
        int     *seen     = calloc((size_t)cnt, sizeof(*seen));
        int32_t *key_part = malloc((size_t)keys * sizeof(*key_part));
        int      last_seq[PARTITIONS];
        int64_t  last_off[PARTITIONS];
        int      used_parts = 0;

        assert_non_null(seen);
        assert_non_null(key_part);
        for (int k = 0; k < keys; k++)
                key_part[k] = -1;
        for (int p = 0; p < PARTITIONS; p++) {
                last_seq[p] = -1;
                last_off[p] = -1;
        }
        assert_int_equal(got, cnt);
        for (size_t i = 0; i < got; i++) {
                int p = r[i].partition;

                assert_in_range(p, 0, PARTITIONS - 1);
                assert_in_range(r[i].seq, 0, cnt - 1);
                assert_int_equal(seen[r[i].seq]++, 0);
                assert_int_equal(r[i].key, r[i].seq % keys);
                if (key_part[r[i].key] == -1)
                        key_part[r[i].key] = p;
                assert_int_equal(key_part[r[i].key], p);
                assert_true(r[i].offset > last_off[p]);
                assert_true(r[i].seq > last_seq[p]);
                if (last_seq[p] == -1)
                        used_parts++;
                last_off[p] = r[i].offset;
                last_seq[p] = r[i].seq;
        }
        /* The keys did drive the partitioner: with this many keys, all of
         * them landing in one or two partitions would mean keys were lost. */
        assert_true(used_parts > PARTITIONS / 2);
        free(seen);
        free(key_part);
}

/* ------------------------------ SANDBOX API ------------------------------ */

static const char *const east_west[] = {"east", "west"};

/* Two clusters, 1000 keyed records through real librdkafka clients. */
static void test_api_roundtrip(void **state) {
        struct fx  *f    = *state;
        const char *ls[] = {"ls", "-A", f->dir, NULL};
        const char *east, *west;
        char        want[512];
        char       *path;
        size_t      printed_len = 0;
        FILE       *mem;
        aagw_err_t  err;

        f->sb = aagw_sandbox_new(east_west, 2, 3, f->errstr, sizeof(f->errstr));
        assert_non_null(f->sb);
        assert_int_equal(aagw_sandbox_cluster_cnt(f->sb), 2);
        assert_string_equal(aagw_sandbox_alias(f->sb, 0), "east");
        assert_string_equal(aagw_sandbox_alias(f->sb, 1), "west");
        assert_null(aagw_sandbox_alias(f->sb, 2));
        east = aagw_sandbox_bootstraps(f->sb, "east");
        west = aagw_sandbox_bootstraps(f->sb, "west");
        assert_non_null(east);
        assert_non_null(west);
        assert_string_not_equal(east, west);
        assert_non_null(strstr(east, "127.0.0.1:"));
        assert_null(aagw_sandbox_bootstraps(f->sb, "north"));
        assert_non_null(aagw_sandbox_mock(f->sb, "east"));
        assert_null(aagw_sandbox_mock(f->sb, "north"));

        f->topic = harness_unique_name("sbx-api");
        assert_non_null(f->topic);
        err = aagw_sandbox_create_topic(f->sb, NULL, f->topic, PARTITIONS,
                                        f->errstr, sizeof(f->errstr));
        assert_int_equal(err, AAGW_OK);
        /* The mock refuses a second create; the sandbox makes the same
         * count idempotent and names a different one. */
        err = aagw_sandbox_create_topic(f->sb, "east", f->topic, PARTITIONS,
                                        f->errstr, sizeof(f->errstr));
        assert_int_equal(err, AAGW_OK);
        err = aagw_sandbox_create_topic(f->sb, NULL, f->topic, 4, f->errstr,
                                        sizeof(f->errstr));
        assert_int_equal(err, AAGW_ERR_CONFIG);
        assert_non_null(strstr(f->errstr, "already exists with 8 partitions, "
                                          "not 4"));
        err = aagw_sandbox_create_topic(f->sb, "north", f->topic, PARTITIONS,
                                        f->errstr, sizeof(f->errstr));
        assert_int_equal(err, AAGW_ERR_NOENT);
        assert_string_equal(f->errstr, "no cluster 'north'");

        /* print and write_file agree, and the write leaves no temp file. */
        mem = open_memstream(&f->text1, &printed_len);
        assert_non_null(mem);
        aagw_sandbox_print(f->sb, mem);
        assert_int_equal(fclose(mem), 0);
        snprintf(want, sizeof(want), "east=%s\nwest=%s\n", east, west);
        assert_string_equal(f->text1, want);
        path = harness_path_join(f->dir, "bootstraps");
        assert_non_null(path);
        err =
            aagw_sandbox_write_file(f->sb, path, f->errstr, sizeof(f->errstr));
        f->text2 = harness_read_file(path, NULL);
        free(path);
        assert_int_equal(err, AAGW_OK);
        assert_non_null(f->text2);
        assert_string_equal(f->text2, want);
        assert_int_equal(harness_run(ls, NULL, 0, 10000, &f->out, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(f->out.status), 0);
        assert_string_equal(f->out.out, "bootstraps\n");

        produce_keyed(f, east, f->topic, 1000, 100);
        check_records(f->recs, consume_all(f, east, f->topic, PARTITIONS, 1000),
                      1000, 100);
        assert_int_equal(topic_size(f, east, f->topic, PARTITIONS), 1000);
        /* Isolation: the topic exists on west too, and is empty. */
        assert_int_equal(topic_size(f, west, f->topic, PARTITIONS), 0);
}

/* Bad input is refused up front with a message that names the problem. */
static void test_api_bad_input(void **state) {
        struct fx         *f       = *state;
        static const char *bad[]   = {"east", "we st"};
        static const char *dup[]   = {"east", "west", "east"};
        static const char *empty[] = {""};
        static const char *one[]   = {"solo"};
        static const char *nine[]  = {"a", "b", "c", "d", "e",
                                      "f", "g", "h", "i"};

        assert_null(aagw_sandbox_new(bad, 2, 3, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr, "invalid cluster alias 'we st': use "
                                       "1..64 of A-Z a-z 0-9 _ -");
        assert_null(aagw_sandbox_new(dup, 3, 3, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr, "duplicate cluster alias 'east'");
        assert_null(
            aagw_sandbox_new(empty, 1, 3, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr, "invalid cluster alias '': use 1..64 "
                                       "of A-Z a-z 0-9 _ -");
        assert_null(
            aagw_sandbox_new(east_west, 2, 0, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr,
                            "brokers per cluster must be 1..16, not 0");
        assert_null(
            aagw_sandbox_new(east_west, 2, 17, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr,
                            "brokers per cluster must be 1..16, not 17");
        assert_null(
            aagw_sandbox_new(east_west, 0, 3, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr,
                            "number of clusters must be 1..8, not 0");
        assert_null(aagw_sandbox_new(nine, 9, 1, f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr,
                            "number of clusters must be 1..8, not 9");
        aagw_sandbox_destroy(NULL);

        /* Topic arguments, on a one-broker cluster (rf is capped at 1). */
        f->sb = aagw_sandbox_new(one, 1, 1, f->errstr, sizeof(f->errstr));
        assert_non_null(f->sb);
        assert_int_equal(aagw_sandbox_create_topic(
                             f->sb, NULL, "t", 0, f->errstr, sizeof(f->errstr)),
                         AAGW_ERR_CONFIG);
        assert_string_equal(f->errstr,
                            "topic t: partitions must be 1..10000, not 0");
        assert_int_equal(aagw_sandbox_create_topic(f->sb, NULL, "t", 10001,
                                                   f->errstr,
                                                   sizeof(f->errstr)),
                         AAGW_ERR_CONFIG);
        assert_int_equal(aagw_sandbox_create_topic(f->sb, NULL, "a/b", 1,
                                                   f->errstr,
                                                   sizeof(f->errstr)),
                         AAGW_ERR_CONFIG);
        assert_string_equal(f->errstr, "invalid topic name 'a/b': use 1..249 "
                                       "of A-Z a-z 0-9 . _ -");
        assert_int_equal(aagw_sandbox_create_topic(f->sb, NULL, "..", 1,
                                                   f->errstr,
                                                   sizeof(f->errstr)),
                         AAGW_ERR_CONFIG);
        assert_int_equal(aagw_sandbox_create_topic(f->sb, "solo", "t", 3,
                                                   f->errstr,
                                                   sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(
            topic_size(f, aagw_sandbox_bootstraps(f->sb, "solo"), "t", 3), 0);
}

/* ------------------------------ THE PROGRAM ------------------------------ */

/* Split a "%p\t%o\t%k\t%s" kcat line into a struct rec. */
static void parse_kcat_line(const char *line, struct rec *r) {
        char      key[64], val[64];
        int       p;
        long long off;

        assert_int_equal(
            sscanf(line, "%d\t%lld\t%63[^\t]\t%63s", &p, &off, key, val), 4);
        r->partition = p;
        r->offset    = off;
        r->key       = num_after(key, strlen(key), "user-");
        r->seq       = num_after(val, strlen(val), "click-");
}

/* Storage for the strings of harness_record_t. */
struct kv {
        char key[32], value[32];
};

/* `aagw sandbox` as a user runs it, checked from the outside with kcat. */
static void test_program(void **state) {
        struct fx        *f    = *state;
        const char       *aagw = harness_aagw_bin();
        harness_record_t *recs;
        struct kv        *kv;
        int               status;
        struct stat       st;
        const int         cnt = 2000, keys = 50;

        if (!harness_kcat_available())
                skip();
        assert_non_null(aagw); /* meson sets AAGW_BIN */
        f->out_path = harness_path_join(f->dir, "stdout");
        f->err_path = harness_path_join(f->dir, "stderr");
        f->bs_path  = harness_path_join(f->dir, "bootstraps");
        assert_non_null(f->out_path);
        assert_non_null(f->err_path);
        assert_non_null(f->bs_path);
        {
                const char *argv[] = {
                    aagw,        "sandbox", "--clusters",        "east,west",
                    "--brokers", "3",       "--partitions",      "8",
                    "--topic",   "clicks",  "--bootstraps-file", f->bs_path,
                    NULL};
                f->proc = harness_proc_spawn(argv, f->out_path, f->err_path,
                                             f->errstr, sizeof(f->errstr));
        }
        assert_non_null(f->proc);
        if (!harness_wait_file(f->bs_path, START_TIMEOUT_MS)) {
                char *err = harness_read_file(f->err_path, NULL);
                fail_msg("no bootstraps file after %d ms; stderr: %s",
                         START_TIMEOUT_MS, err ? err : "?");
        }

        /* The file is written after stdout was flushed: both are whole. */
        f->text1 = harness_read_file(f->out_path, NULL);
        f->text2 = harness_read_file(f->bs_path, NULL);
        assert_non_null(f->text1);
        assert_non_null(f->text2);
        assert_string_equal(f->text1, f->text2);
        f->bs_out =
            harness_bootstraps_parse(f->text1, f->errstr, sizeof(f->errstr));
        assert_non_null(f->bs_out);
        assert_int_equal(harness_bootstraps_cnt(f->bs_out), 2);
        assert_string_equal(harness_bootstraps_alias(f->bs_out, 0), "east");
        assert_string_equal(harness_bootstraps_alias(f->bs_out, 1), "west");
        const char *east = harness_bootstraps_get(f->bs_out, "east");
        const char *west = harness_bootstraps_get(f->bs_out, "west");
        /* three brokers each: three comma-separated addresses */
        assert_non_null(strchr(strchr(east, ',') + 1, ','));

        assert_int_equal(harness_kcat_partition_cnt(east, "clicks",
                                                    KCAT_TIMEOUT_MS, f->errstr,
                                                    sizeof(f->errstr)),
                         8);
        assert_int_equal(harness_kcat_partition_cnt(west, "clicks",
                                                    KCAT_TIMEOUT_MS, f->errstr,
                                                    sizeof(f->errstr)),
                         8);

        recs = calloc((size_t)cnt, sizeof(*recs));
        kv   = calloc((size_t)cnt, sizeof(*kv));
        assert_non_null(recs);
        assert_non_null(kv);
        for (int i = 0; i < cnt; i++) {
                snprintf(kv[i].key, sizeof(kv[i].key), "user-%d", i % keys);
                snprintf(kv[i].value, sizeof(kv[i].value), "click-%05d", i);
                recs[i].key   = kv[i].key;
                recs[i].value = kv[i].value;
        }
        aagw_err_t err =
            harness_kcat_produce(east, "clicks", recs, (size_t)cnt, NULL, -1,
                                 KCAT_TIMEOUT_MS, f->errstr, sizeof(f->errstr));
        free(recs);
        free(kv);
        if (err)
                fail_msg("%s", f->errstr);

        if (harness_kcat_consume(east, "clicks", "%p\t%o\t%k\t%s\n",
                                 KCAT_TIMEOUT_MS, &f->lines, f->errstr,
                                 sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
        assert_int_equal(f->lines.cnt, cnt);
        f->recs = calloc(f->lines.cnt, sizeof(*f->recs));
        assert_non_null(f->recs);
        for (size_t i = 0; i < f->lines.cnt; i++)
                parse_kcat_line(f->lines.v[i], &f->recs[i]);
        check_records(f->recs, f->lines.cnt, cnt, keys);
        harness_lines_deinit(&f->lines);

        /* Isolation: west has the topic and none of the records. */
        if (harness_kcat_consume(west, "clicks", "%s\n", KCAT_TIMEOUT_MS,
                                 &f->lines, f->errstr, sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
        if (f->lines.cnt != 0)
                fail_msg("west has %zu records, first: '%s'", f->lines.cnt,
                         f->lines.v[0]);

        /* SIGTERM: exit 0 within the deadline, and the file it wrote (its
         * only state outside memory) is gone. */
        assert_int_equal(harness_proc_signal(f->proc, SIGTERM), 0);
        assert_int_equal(harness_proc_wait(f->proc, STOP_TIMEOUT_MS, &status),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(status), 0);
        assert_int_equal(stat(f->bs_path, &st), -1);
        free(f->text1);
        f->text1 = harness_read_file(f->err_path, NULL);
        assert_non_null(f->text1);
        assert_non_null(strstr(f->text1, "[SANDBOX] ready: 2 clusters"));
        assert_non_null(strstr(f->text1, "[SANDBOX] stopping on SIGTERM"));
}

/* Run `aagw sandbox ARGS...` to completion into f->out. */
static void run_aagw(struct fx *f, const char *a1, const char *a2,
                     const char *a3) {
        const char *argv[] = {harness_aagw_bin(), "sandbox", a1, a2, a3, NULL};

        assert_non_null(argv[0]);
        harness_output_deinit(&f->out);
        assert_int_equal(harness_run(argv, NULL, 0, 10000, &f->out, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
}

/* Misuse exits 2 with "aagw: reason" and the usage on stderr, and starts
 * nothing; --help is data, on stdout, exit 0. */
static void test_program_usage(void **state) {
        struct fx *f = *state;
        static const struct {
                const char *a1, *a2, *a3;
                const char *reason;
        } cases[] = {
            {"--bogus", NULL, NULL, "aagw: unknown option '--bogus'\n"},
            {"-x", NULL, NULL, "aagw: unknown option '-x'\n"},
            {"--brokers", NULL, NULL,
             "aagw: option '--brokers' requires an argument\n"},
            {"-t", NULL, NULL, "aagw: option '-t' requires an argument\n"},
            {"--brokers", "0", NULL,
             "aagw: --brokers: expected an integer 1..16, got '0'\n"},
            {"--partitions", "8x", NULL,
             "aagw: --partitions: expected an integer 1..10000, got '8x'\n"},
            {"--clusters", "east,east", NULL,
             "aagw: --clusters: duplicate alias 'east'\n"},
            {"--clusters", "east,", NULL,
             "aagw: --clusters: invalid alias '': use 1..64 of A-Z a-z 0-9 "
             "_ -\n"},
            {"--topic", "a/b", NULL,
             "aagw: --topic: invalid topic name 'a/b': use 1..249 of A-Z a-z "
             "0-9 . _ -\n"},
            {"--log-level", "loud", NULL,
             "aagw: --log-level: expected debug, info, warn, error or off, "
             "got 'loud'\n"},
            {"stray", NULL, NULL, "aagw: unexpected argument 'stray'\n"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                size_t rlen = strlen(cases[i].reason);

                run_aagw(f, cases[i].a1, cases[i].a2, cases[i].a3);
                if (harness_exit_code(f->out.status) != 2 ||
                    f->out.err_len < rlen ||
                    memcmp(f->out.err, cases[i].reason, rlen))
                        fail_msg("case %zu (%s %s): exit %d, stderr: %s", i,
                                 cases[i].a1, cases[i].a2 ? cases[i].a2 : "",
                                 harness_exit_code(f->out.status), f->out.err);
                assert_non_null(strstr(f->out.err, "Usage: aagw sandbox"));
                assert_int_equal(f->out.out_len, 0);
        }

        run_aagw(f, "--help", NULL, NULL);
        assert_int_equal(harness_exit_code(f->out.status), 0);
        assert_non_null(strstr(f->out.out, "Usage: aagw sandbox"));
        assert_non_null(strstr(f->out.out, "--bootstraps-file"));
        assert_int_equal(f->out.err_len, 0);
        run_aagw(f, "-h", NULL, NULL);
        assert_int_equal(harness_exit_code(f->out.status), 0);
        assert_non_null(strstr(f->out.out, "Usage: aagw sandbox"));
}

/* -------------------------------- HARNESS -------------------------------- */

/* Clusters from AAGW_TEST_BOOTSTRAPS_EAST/WEST when set, else a sandbox;
 * kcat headers and fixed partition; nothing leaks to the other site. */
static void test_harness_clusters(void **state) {
        struct fx       *f = *state;
        harness_record_t recs[200];
        char             vals[200][16];
        const char      *headers[] = {"origin=east", "trace=t1", NULL};
        const char      *east, *west;
        aagw_err_t       err;

        if (!harness_kcat_available())
                skip();
        f->hc =
            harness_clusters_new(east_west, 2, 3, f->errstr, sizeof(f->errstr));
        if (!f->hc)
                fail_msg("%s", f->errstr);
        assert_true(harness_clusters_are_real(f->hc) ==
                    (harness_clusters_sandbox(f->hc) == NULL));
        east = harness_clusters_bootstraps(f->hc, "east");
        west = harness_clusters_bootstraps(f->hc, "west");
        assert_non_null(east);
        assert_non_null(west);
        assert_null(harness_clusters_bootstraps(f->hc, "north"));

        f->topic = harness_unique_name("sbx-harness");
        assert_non_null(f->topic);
        err = harness_clusters_create_topic(f->hc, NULL, f->topic, 4, f->errstr,
                                            sizeof(f->errstr));
        if (err)
                fail_msg("%s", f->errstr);
        assert_int_equal(harness_kcat_partition_cnt(east, f->topic,
                                                    KCAT_TIMEOUT_MS, f->errstr,
                                                    sizeof(f->errstr)),
                         4);
        assert_int_equal(harness_kcat_partition_cnt(east, "no-such-topic",
                                                    KCAT_TIMEOUT_MS, f->errstr,
                                                    sizeof(f->errstr)),
                         0);

        for (int i = 0; i < 200; i++) {
                snprintf(vals[i], sizeof(vals[i]), "v%03d", i);
                recs[i].key   = i % 2 ? NULL : vals[i]; /* half unkeyed */
                recs[i].value = vals[i];
        }
        err =
            harness_kcat_produce(east, f->topic, recs, 200, headers, 2,
                                 KCAT_TIMEOUT_MS, f->errstr, sizeof(f->errstr));
        if (err)
                fail_msg("%s", f->errstr);
        if (harness_kcat_consume(east, f->topic, "%p|%K|%k|%s|%h\n",
                                 KCAT_TIMEOUT_MS, &f->lines, f->errstr,
                                 sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
        assert_int_equal(f->lines.cnt, 200);
        for (size_t i = 0; i < f->lines.cnt; i++) {
                char want[96];

                /* %K is the key length: -1 for a NULL key. */
                if (i % 2)
                        snprintf(want, sizeof(want),
                                 "2|-1||%s|origin=east,trace=t1", vals[i]);
                else
                        snprintf(want, sizeof(want),
                                 "2|4|%s|%s|origin=east,trace=t1", vals[i],
                                 vals[i]);
                assert_string_equal(f->lines.v[i], want);
        }
        harness_lines_deinit(&f->lines);
        if (harness_kcat_consume(west, f->topic, "%s\n", KCAT_TIMEOUT_MS,
                                 &f->lines, f->errstr, sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
        assert_int_equal(f->lines.cnt, 0);

        /* Input kcat would mangle is refused before kcat runs. */
        recs[0].value = "a\x1e"
                        "b";
        assert_int_equal(harness_kcat_produce(east, f->topic, recs, 1, NULL, -1,
                                              KCAT_TIMEOUT_MS, f->errstr,
                                              sizeof(f->errstr)),
                         AAGW_ERR_INVAL);
        recs[0].key   = NULL;
        recs[0].value = "";
        assert_int_equal(harness_kcat_produce(east, f->topic, recs, 1, NULL, -1,
                                              KCAT_TIMEOUT_MS, f->errstr,
                                              sizeof(f->errstr)),
                         AAGW_ERR_INVAL);
}

/* A partial environment is refused rather than half-honoured. */
static void test_harness_clusters_env(void **state) {
        struct fx         *f     = *state;
        static const char *abc[] = {"east", "us-west-2"};

        assert_int_equal(
            setenv("AAGW_TEST_BOOTSTRAPS_US_WEST_2", "127.0.0.1:1", 1), 0);
        if (getenv("AAGW_TEST_BOOTSTRAPS_EAST")) {
                unsetenv("AAGW_TEST_BOOTSTRAPS_US_WEST_2");
                skip(); /* real clusters configured: not ours to change */
        }
        f->hc = harness_clusters_new(abc, 2, 1, f->errstr, sizeof(f->errstr));
        unsetenv("AAGW_TEST_BOOTSTRAPS_US_WEST_2");
        assert_null(f->hc);
        assert_string_equal(f->errstr,
                            "AAGW_TEST_BOOTSTRAPS_<ALIAS> is set for 1 of 2 "
                            "clusters: set it for all of them or for none");
}

static void test_harness_bootstraps_parse(void **state) {
        struct fx *f = *state;

        f->bs_out = harness_bootstraps_parse(
            "# written by hand\r\n\r\n east = h1:9092,h2:9092 \r\nwest=h3:1\n",
            f->errstr, sizeof(f->errstr));
        assert_non_null(f->bs_out);
        assert_int_equal(harness_bootstraps_cnt(f->bs_out), 2);
        assert_string_equal(harness_bootstraps_get(f->bs_out, "east"),
                            "h1:9092,h2:9092");
        assert_string_equal(harness_bootstraps_get(f->bs_out, "west"), "h3:1");
        assert_null(harness_bootstraps_get(f->bs_out, "north"));

        assert_null(harness_bootstraps_parse("east=a:1\nwest\n", f->errstr,
                                             sizeof(f->errstr)));
        assert_string_equal(f->errstr, "line 2: expected alias=bootstraps");
        assert_null(harness_bootstraps_parse("east=a:1\neast=b:1\n", f->errstr,
                                             sizeof(f->errstr)));
        assert_string_equal(f->errstr, "line 2: duplicate alias 'east'");
        assert_null(
            harness_bootstraps_parse("=a:1\n", f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr, "line 1: empty alias");
        assert_null(
            harness_bootstraps_parse("\n# x\n", f->errstr, sizeof(f->errstr)));
        assert_string_equal(f->errstr, "no alias=bootstraps lines");
        assert_null(harness_bootstraps_load("/nonexistent/bs", f->errstr,
                                            sizeof(f->errstr)));
        assert_string_equal(f->errstr,
                            "/nonexistent/bs: No such file or directory");
}

/* harness_run: stdin fed while stdout drains (1 MiB both ways would
 * deadlock a naive write-then-read), deadlines kill, bad programs are
 * reported, exit codes decoded. */
static void test_harness_run(void **state) {
        struct fx  *f  = *state;
        size_t      n  = 1 << 20;
        char       *in = malloc(n);
        int64_t     t0;
        const char *cat[]        = {"cat", NULL};
        const char *sleep_argv[] = {"sleep", "30", NULL};
        const char *nope[]       = {"/nonexistent/prog", NULL};
        const char *sh[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};

        assert_non_null(in);
        for (size_t i = 0; i < n; i++)
                in[i] = (char)('a' + i % 26);
        assert_int_equal(harness_run(cat, in, n, 10000, &f->out, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(f->out.status), 0);
        assert_int_equal(f->out.out_len, n);
        assert_memory_equal(f->out.out, in, n);
        free(in);

        harness_output_deinit(&f->out);
        assert_int_equal(harness_run(sh, NULL, 0, 10000, &f->out, f->errstr,
                                     sizeof(f->errstr)),
                         AAGW_OK);
        assert_int_equal(harness_exit_code(f->out.status), 3);
        assert_string_equal(f->out.out, "out\n");
        assert_string_equal(f->out.err, "err\n");

        harness_output_deinit(&f->out);
        t0 = harness_now_ms();
        assert_int_equal(harness_run(sleep_argv, NULL, 0, 200, &f->out,
                                     f->errstr, sizeof(f->errstr)),
                         AAGW_ERR_TIMEOUT);
        assert_true(harness_now_ms() - t0 < 5000);
        assert_int_equal(harness_exit_code(f->out.status), 128 + SIGKILL);
        assert_string_equal(f->errstr,
                            "sleep did not finish within 200 ms; killed");

        harness_output_deinit(&f->out);
        assert_int_not_equal(harness_run(nope, NULL, 0, 1000, &f->out,
                                         f->errstr, sizeof(f->errstr)),
                             AAGW_OK);
        assert_non_null(strstr(f->errstr, "/nonexistent/prog"));

        /* spawn + signal + wait: a deadline that passes, then a kill. */
        f->proc = harness_proc_spawn(sleep_argv, NULL, NULL, f->errstr,
                                     sizeof(f->errstr));
        assert_non_null(f->proc);
        int status;
        assert_int_equal(harness_proc_wait(f->proc, 50, &status),
                         AAGW_ERR_TIMEOUT);
        assert_int_equal(harness_proc_signal(f->proc, SIGTERM), 0);
        assert_int_equal(harness_proc_wait(f->proc, 10000, &status), AAGW_OK);
        assert_int_equal(harness_exit_code(status), 128 + SIGTERM);
        assert_null(
            harness_proc_spawn(nope, NULL, NULL, f->errstr, sizeof(f->errstr)));
        assert_non_null(strstr(f->errstr, "cannot execute /nonexistent/prog"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_api_roundtrip, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_api_bad_input, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_program, setup, teardown),
            cmocka_unit_test_setup_teardown(test_program_usage, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_harness_clusters, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_harness_clusters_env, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_harness_bootstraps_parse,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_harness_run, setup, teardown),
        };

        return cmocka_run_group_tests_name("sandbox", tests, NULL, NULL);
}
