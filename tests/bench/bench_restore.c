/*
 * tests/bench/bench_restore.c: how long a new owner takes to restore one
 * unify changelog partition (scale-out, replicator/unify.c "SCALE-OUT")
 * holding N dedup ids (10,000,000 by default) on a real Kafka cluster.
 *
 * It fills partition 0 of a fresh compacted topic with N id records in
 * the changelog's own format (changelog_encode(), a plain idempotent
 * producer: the records of committed transactions read the same), then
 * times the restore twice with the code a new owner runs
 * (changelog_read()): once only reading and decoding, once folding every
 * id into a decider on a fresh RocksDB store (aagw_decider_restore() and
 * aagw_decider_fold_commit(), as the stage does).  Run by hand:
 *
 *   scripts/kafka-clusters west -- build/tests/bench/bench_restore
 *   build/tests/bench/bench_restore --bootstrap HOST:PORT --ids 1000000
 *
 * Prints one line per phase: records, MB, seconds, records/s.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aagw_dedup.h"
#include "replicator_int.h"

#include "harness.h"

struct fold {
        aagw_decider_t  *d;
        struct aagw_prov prov;
        int64_t          n;
        bool             failed;
        char             err[512];
};

static bool count_only(void *arg, const struct changelog_rec *c) {
        (void)c;
        ((struct fold *)arg)->n++;
        return true;
}

static bool fold_one(void *arg, const struct changelog_rec *c) {
        struct fold          *f = arg;
        struct aagw_unify_rec r;

        memset(&r, 0, sizeof(r));
        r.mode = AAGW_UNIFY_DEDUP;
        memcpy(r.key, c->key, 16);
        snprintf(f->prov.origin, sizeof(f->prov.origin), "%s", c->origin);
        f->prov.hlc = c->hlc;
        r.prov      = &f->prov;
        r.topic     = c->topic;
        r.partition = c->partition;
        r.offset    = c->offset;
        if (aagw_decider_restore(f->d, &r, c->time_ms, f->err,
                                 sizeof(f->err)) ||
            (!(++f->n & 1023) &&
             aagw_decider_fold_commit(f->d, false, f->err, sizeof(f->err)))) {
                f->failed = true;
                return false;
        }
        return true;
}

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        (void)rk;
        if (m->err)
                (*(int64_t *)opaque)++;
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *bs,
                          const char *const *kv, void *opaque) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        rd_kafka_conf_set(conf, "bootstrap.servers", bs, err, sizeof(err));
        for (size_t i = 0; kv && kv[i]; i += 2)
                if (rd_kafka_conf_set(conf, kv[i], kv[i + 1], err,
                                      sizeof(err)) != RD_KAFKA_CONF_OK) {
                        fprintf(stderr, "bench_restore: %s\n", err);
                        exit(1);
                }
        if (type == RD_KAFKA_PRODUCER && opaque) {
                rd_kafka_conf_set_dr_msg_cb(conf, dr);
                rd_kafka_conf_set_opaque(conf, opaque);
        }
        rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
        if (!rk) {
                fprintf(stderr, "bench_restore: %s\n", err);
                exit(1);
        }
        return rk;
}

static void line(const char *what, int64_t n, int64_t bytes, int64_t ms) {
        double s = (double)ms / 1000.0;
        printf("%-28s %10" PRId64 " records %8.1f MB %7.1f s %10.0f records/s\n",
               what, n, (double)bytes / 1e6, s, s > 0 ? (double)n / s : 0.0);
        fflush(stdout);
}

int main(int argc, char **argv) {
        const char *bs  = getenv("AAGW_TEST_BOOTSTRAPS_WEST");
        int64_t     ids = 10000000;
        char        err[512], topic[128];
        int         opt;

        if (!bs)
                bs = getenv("AAGW_TEST_BOOTSTRAPS_EAST");
        static const struct option longopts[] = {
            {"bootstrap", required_argument, NULL, 'b'},
            {"ids", required_argument, NULL, 'n'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        while ((opt = getopt_long(argc, argv, ":b:n:h", longopts, NULL)) !=
               -1) {
                switch (opt) {
                case 'b': bs = optarg; break;
                case 'n': ids = strtoll(optarg, NULL, 10); break;
                case 'h':
                        printf("usage: %s [--bootstrap HOST:PORT] "
                               "[--ids N]\n",
                               argv[0]);
                        return 0;
                default:
                        fprintf(stderr, "usage: %s [--bootstrap HOST:PORT] "
                                        "[--ids N]\n",
                                argv[0]);
                        return 2;
                }
        }
        if (!bs || ids <= 0) {
                fprintf(stderr, "bench_restore: no cluster (--bootstrap, or "
                                "run it under scripts/kafka-clusters)\n");
                return 2;
        }
        snprintf(topic, sizeof(topic), "aagw.bench.state.%d", (int)getpid());

        /* The changelog: one partition, compacted, as the stage makes it. */
        static const char *const conf[] = {"cleanup.policy", "compact", NULL};
        rd_kafka_t *admin = client(RD_KAFKA_PRODUCER, bs, NULL, NULL);
        if (aagw_kafka_topic_create_conf(admin, topic, 1, conf, 30000, err,
                                         sizeof(err))) {
                fprintf(stderr, "bench_restore: creating %s: %s\n", topic,
                        err);
                return 1;
        }

        /* Fill. */
        int64_t                   failed = 0, bytes = 0;
        static const char *const  pkv[]  = {
            "enable.idempotence", "true", "linger.ms", "50",
            "batch.size", "1000000", "compression.type", "lz4",
            "queue.buffering.max.messages", "1000000", NULL};
        rd_kafka_t          *p = client(RD_KAFKA_PRODUCER, bs, pkv, &failed);
        struct changelog_rec c;
        uint8_t              key[CHANGELOG_KEY_MAX], val[CHANGELOG_VAL_MAX];
        size_t               klen, vlen;
        int64_t              t0 = harness_now_ms(), now_ms = aagw_wall_ms();

        memset(&c, 0, sizeof(c));
        c.kind = CHANGELOG_ID;
        snprintf(c.origin, sizeof(c.origin), "east");
        snprintf(c.topic, sizeof(c.topic), "clicks");
        for (int64_t i = 0; i < ids; i++) {
                char idb[32];
                int  il = snprintf(idb, sizeof(idb), "click-%" PRId64, i);
                aagw_scoped_key("west", idb, (size_t)il, c.key);
                c.hlc       = (uint64_t)now_ms << 16;
                c.time_ms   = now_ms;
                c.partition = (int32_t)(i % 12);
                c.offset    = i / 12;
                changelog_encode(&c, key, &klen, val, &vlen);
                bytes += (int64_t)(klen + vlen);
                while (rd_kafka_producev(
                           p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                           RD_KAFKA_V_KEY(key, klen),
                           RD_KAFKA_V_VALUE(val, vlen),
                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                           RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                        rd_kafka_poll(p, 10);
                rd_kafka_poll(p, 0);
        }
        rd_kafka_flush(p, 600000);
        rd_kafka_destroy(p);
        if (failed) {
                fprintf(stderr, "bench_restore: %" PRId64 " records not "
                                "written\n",
                        failed);
                return 1;
        }
        line("fill (produce, acks=all)", ids, bytes, harness_now_ms() - t0);

        /* Restore: read and decode only, then into a decider's store. */
        static const char *const rkv[] = {
            "group.id", "aagw-bench-restore", "enable.auto.commit", "false",
            "enable.partition.eof", "true",
            "isolation.level", "read_committed",
            "fetch.max.bytes", "52428800",
            "max.partition.fetch.bytes", "16777216", NULL};
        rd_kafka_t *reader = client(RD_KAFKA_CONSUMER, bs, rkv, NULL);
        static const char *const hkv[] = {
            "group.id", "aagw-bench-restore-hw",
            "isolation.level", "read_uncommitted", NULL};
        rd_kafka_t *hw = client(RD_KAFKA_CONSUMER, bs, hkv, NULL);
        struct fold f;
        int64_t     n = 0, b = 0;
        memset(&f, 0, sizeof(f));
        t0 = harness_now_ms();
        if (changelog_read(reader, hw, topic, 0, -1, 60000, NULL, count_only, NULL,
                           &f, &n, &b, err, sizeof(err)) != CHANGELOG_DONE ||
            f.n != ids) {
                fprintf(stderr, "bench_restore: read %" PRId64 " of %" PRId64
                                ": %s\n",
                        f.n, ids, err);
                return 1;
        }
        line("restore: read + decode", n, b, harness_now_ms() - t0);

        char            *dir = harness_tmpdir_new("bench-restore");
        aagw_statedir_t *sd  = aagw_statedir_open(dir, err, sizeof(err));
        aagw_store_t    *st  = sd ? aagw_store_open(sd, NULL, err, sizeof(err))
                                  : NULL;
        struct aagw_decider_conf dc = {.store = st, .site = "west"};
        if (!st || !(f.d = aagw_decider_new(&dc, err, sizeof(err)))) {
                fprintf(stderr, "bench_restore: store: %s\n", err);
                return 1;
        }
        f.n = n = b = 0;
        t0      = harness_now_ms();
        if (changelog_read(reader, hw, topic, 0, -1, 60000, NULL, fold_one, NULL, &f,
                           &n, &b, err, sizeof(err)) != CHANGELOG_DONE ||
            f.failed ||
            aagw_decider_fold_commit(f.d, true, f.err, sizeof(f.err))) {
                fprintf(stderr, "bench_restore: restore: %s\n",
                        f.failed ? f.err : err);
                return 1;
        }
        line("restore: into the store", n, b, harness_now_ms() - t0);

        aagw_decider_destroy(f.d);
        aagw_store_close(st);
        aagw_statedir_close(sd);
        harness_rmtree(dir);
        free(dir);
        rd_kafka_consumer_close(reader);
        rd_kafka_destroy(reader);
        rd_kafka_destroy(hw);
        rd_kafka_destroy(admin);
        return 0;
}
