/*
 * tests/wan/test_wan_realkafka.c: scripts/kafka-clusters --wan-delay on
 * real Kafka (suite `kafka`).
 *
 * One launcher: a 2-broker cluster with SCRAM-SHA-512 on its gateway
 * listener and a 40 ms WAN (`--brokers 2 --security east=scram-sha-512
 * --wan-delay 40`, the build's wan-proxy).  A librdkafka 2.8 client with
 * the launcher's gateway settings bootstraps from
 * AAGW_TEST_WAN_BOOTSTRAPS_EAST and must
 *
 *   - see in the metadata exactly the proxy's ports for both brokers
 *     (so it stays behind the proxy for every broker connection),
 *   - log in with SCRAM over TLS through the proxy, create a topic,
 *   - pay at least the round trip on every produce request, and not
 *     much more at best,
 *   - read back every record it wrote, once;
 *
 * and the variables (WAN bootstraps, AAGW_TEST_WAN_DELAY_MS) are in the
 * launcher's env file.  Then three gateways at once copy a topic each
 * from the cluster over the WAN (SCRAM, as east) to the same cluster
 * directly (plaintext, as west):
 *
 *   - with replication.fetch_window auto (the default) a flow measures
 *     the round trip (at least RTT_MS, `aagw status --json`), sizes its
 *     window from it over the partitions it copies (logged; larger than
 *     the base at 40 ms), spreads them over 4 source consumers (the
 *     broker's send buffer, Kafka's default, lets one connection bring
 *     200 KiB per round trip) and copies every record once;
 *   - with `fixed` it measures the same but keeps the base (1 MiB per
 *     partition) and one consumer;
 *   - with queued.max.messages.kbytes set by hand for the source's
 *     consumers it measures, and leaves the window to the operator (0).
 *
 * Needs Java and Maven (scripts/kafka-fetch), like the rest of the suite.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <librdkafka/rdkafka.h>

#include "aagw_replicator.h"
#include "bench_util.h"
#include "harness.h"
#include "wan_test.h"

#define MS 1000000LL
#define RTT_MS 40
#define PARTITIONS 4
#define PINGS 20
#define RECORDS 500
#define TOTAL (1 + PINGS + RECORDS)
#define READY_TIMEOUT_MS 240000
#define KAFKA_TIMEOUT_MS 60000

#define GATEWAYS 3

struct fx {
        char           *dir, *env_path, *bs_path, *log_path;
        harness_proc_t *launcher;
        harness_proc_t *gw[GATEWAYS];
        rd_kafka_t     *check;        /* plaintext, for the copies' offsets */
        char           *env;          /* the env file's text */
        rd_kafka_t     *prod, *cons;
        _Atomic int     delivered, failed;
        _Atomic int64_t dr_ns;
        char            errstr[1024];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        if (!f || !(f->dir = harness_tmpdir_new("wan-realkafka"))) {
                free(f);
                return -1;
        }
        f->env_path = harness_path_join(f->dir, "env");
        f->bs_path  = harness_path_join(f->dir, "bootstraps");
        f->log_path = harness_path_join(f->dir, "launcher.log");
        *state      = f;
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
        if (f->check)
                rd_kafka_destroy(f->check);
        for (int i = 0; i < GATEWAYS; i++)
                harness_proc_destroy(f->gw[i]);
        if (f->launcher) {
                harness_proc_signal(f->launcher, SIGTERM);
                harness_proc_wait(f->launcher, 60000, NULL);
                harness_proc_destroy(f->launcher);
        }
        free(f->env);
        if (!getenv("AAGW_TEST_KEEP"))
                harness_rmtree(f->dir);
        free(f->dir);
        free(f->env_path);
        free(f->bs_path);
        free(f->log_path);
        free(f);
        return 0;
}

/* A variable of the launcher's env file (NAME=VALUE lines), copied into
 * 'out'; fails the test if it is not there. */
static const char *env_get(struct fx *f, const char *name, char *out,
                           size_t size) {
        size_t      nl = strlen(name);
        const char *p  = f->env;

        for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (!strncmp(p, name, nl) && p[nl] == '=') {
                        const char *v = p + nl + 1;
                        size_t      n = strcspn(v, "\n");
                        if (n >= size)
                                fail_msg("%s: value too long", name);
                        memcpy(out, v, n);
                        out[n] = '\0';
                        return out;
                }
        fail_msg("%s is not in the launcher's env file:\n%s", name, f->env);
        return NULL;
}

/* Whether 'addr' is one of the comma-separated 'list'. */
static bool in_list(const char *list, const char *addr) {
        size_t n = strlen(addr);
        for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1
                                                          : NULL)
                if (!strncmp(p, addr, n) && (p[n] == ',' || !p[n]))
                        return true;
        return false;
}

static bool launcher_ready(void *arg) {
        struct fx *f = arg;
        return harness_wait_file(f->bs_path, 0) ||
               harness_proc_wait(f->launcher, 0, NULL) != AAGW_ERR_TIMEOUT;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct fx *f = opaque;
        (void)rk;
        atomic_fetch_add(m->err ? &f->failed : &f->delivered, 1);
        atomic_store(&f->dr_ns, wan_now_ns());
}

/* A client of the WAN listener with the launcher's gateway settings
 * (SCRAM-SHA-512 over TLS) from 'props_path', plus 'props'. */
static rd_kafka_t *wan_client(struct fx *f, rd_kafka_type_t type,
                              const char *bs, const char *props_path,
                              const char *const *props) {
        rd_kafka_conf_t      *conf = rd_kafka_conf_new();
        harness_bootstraps_t *kv =
            harness_bootstraps_load(props_path, f->errstr, sizeof(f->errstr));
        rd_kafka_t *rk;

        if (!kv)
                fail_msg("%s", f->errstr);
        rd_kafka_conf_set_opaque(conf, f);
        if (type == RD_KAFKA_PRODUCER)
                rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        for (size_t k = 0; k < harness_bootstraps_cnt(kv); k++) {
                const char *key = harness_bootstraps_alias(kv, k);
                if (rd_kafka_conf_set(conf, key,
                                      harness_bootstraps_get(kv, key),
                                      f->errstr, sizeof(f->errstr)))
                        fail_msg("%s", f->errstr);
        }
        harness_bootstraps_destroy(kv);
        if (rd_kafka_conf_set(conf, "bootstrap.servers", bs, f->errstr,
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

static void produce(struct fx *f, int i) {
        char key[32], val[32];
        int  kl = snprintf(key, sizeof(key), "k%d", i);
        int  vl = snprintf(val, sizeof(val), "v%06d", i);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            f->prod, RD_KAFKA_V_TOPIC("wan-real"),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, (size_t)kl), RD_KAFKA_V_VALUE(val, (size_t)vl),
            RD_KAFKA_V_END);
        if (err)
                fail_msg("produce %d: %s", i, rd_kafka_err2str(err));
}

static void wait_delivered(struct fx *f, int want) {
        int64_t deadline = harness_now_ms() + KAFKA_TIMEOUT_MS;
        while (atomic_load(&f->delivered) + atomic_load(&f->failed) < want &&
               harness_now_ms() < deadline)
                rd_kafka_poll(f->prod, 1);
        assert_int_equal(atomic_load(&f->failed), 0);
        assert_int_equal(atomic_load(&f->delivered), want);
}

/* ------------------------------------------------ aagw over the WAN -- */

struct gwcase {
        const char *name;  /* gateway id, state dir, log */
        const char *topic; /* what it copies, made here */
        int         partitions, records;
        const char *set; /* one more --set, or NULL */
};

static const struct gwcase gwcases[GATEWAYS] = {
    {"wan-auto", "wan-real", PARTITIONS, TOTAL, NULL},
    {"wan-fixed", "wan-fixed", 2, 50, "replication.fetch_window=fixed"},
    {"wan-hand", "wan-hand", 3, 50,
     "clusters.east.properties.consumer.queued.max.messages.kbytes=32768"},
};

/* The gateway of case 'i': east is the cluster over the WAN with the
 * launcher's gateway settings (each line of 'props_path' a --set), west
 * the same cluster directly. */
static void gateway_start(struct fx *f, int i, const char *wan,
                          const char *plain, const char *props_path) {
        const struct gwcase *c = &gwcases[i];
        const char          *argv[64];
        char                 ceast[300], cwest[300], topic[64];
        harness_bootstraps_t *kv =
            harness_bootstraps_load(props_path, f->errstr, sizeof(f->errstr));
        char                *sets[16];
        char                *state = harness_path_join(f->dir, c->name);
        char                 log[4200];
        int                  n = 0, ns = 0;

        if (!kv)
                fail_msg("%s", f->errstr);
        snprintf(ceast, sizeof(ceast), "east=%s", wan);
        snprintf(cwest, sizeof(cwest), "west=%s", plain);
        snprintf(topic, sizeof(topic), "^%s$", c->topic);
        snprintf(log, sizeof(log), "%s.log", state);
        argv[n++] = harness_aagw_bin();
        argv[n++] = "--cluster";
        argv[n++] = ceast;
        argv[n++] = "--cluster";
        argv[n++] = cwest;
        argv[n++] = "--mode";
        argv[n++] = "active-passive";
        argv[n++] = "--primary";
        argv[n++] = "east";
        argv[n++] = "--topic";
        argv[n++] = topic;
        argv[n++] = "--unify";
        argv[n++] = "off";
        argv[n++] = "--gateway-id";
        argv[n++] = c->name;
        argv[n++] = "--state-dir";
        argv[n++] = state;
        argv[n++] = "--admin";
        argv[n++] = "127.0.0.1:0";
        /* The three share the cluster: no heartbeats topic, which each
         * would copy into the same east.heartbeats (and the window is
         * then sized over exactly the case's partitions). */
        argv[n++] = "--set";
        argv[n++] = "mm2.heartbeats_interval=0s";
        for (size_t k = 0; k < harness_bootstraps_cnt(kv) && ns < 16; k++) {
                const char *key = harness_bootstraps_alias(kv, k);
                assert_true(asprintf(&sets[ns],
                                     "clusters.east.properties.%s=%s", key,
                                     harness_bootstraps_get(kv, key)) > 0);
                argv[n++] = "--set";
                argv[n++] = sets[ns++];
        }
        if (c->set) {
                argv[n++] = "--set";
                argv[n++] = c->set;
        }
        argv[n] = NULL;
        f->gw[i] =
            harness_proc_spawn(argv, NULL, log, f->errstr, sizeof(f->errstr));
        if (!f->gw[i])
                fail_msg("%s: %s", c->name, f->errstr);
        for (int k = 0; k < ns; k++)
                free(sets[k]);
        harness_bootstraps_destroy(kv);
        free(state);
}

/* `aagw status --json` of case 'i''s gateway, parsed; NULL while it
 * does not answer yet. */
static json_object *gateway_status(struct fx *f, int i) {
        char       *state  = harness_path_join(f->dir, gwcases[i].name);
        const char *argv[] = {
            harness_aagw_bin(), "status", "--state-dir", state, "--json", NULL};
        harness_output_t o;
        json_object     *st = NULL;

        if (harness_run(argv, NULL, 0, 30000, &o, f->errstr,
                        sizeof(f->errstr)) == AAGW_OK &&
            harness_exit_code(o.status) == 0)
                st = json_tokener_parse(o.out);
        harness_output_deinit(&o);
        free(state);
        return st;
}

/* The first flow of a status, or NULL. */
static json_object *first_flow(json_object *st) {
        json_object *fl;
        if (!st || !json_object_object_get_ex(st, "flows", &fl) ||
            json_object_array_length(fl) < 1)
                return NULL;
        return json_object_array_get_idx(fl, 0);
}

/* Records of 'topic''s copy (east.<topic>), all partitions, asked on
 * the plaintext listener; -1 while the copy is not there. */
static int64_t copied(struct fx *f, const char *topic, int partitions) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t               *rkt;
        char                            copy[128];
        int64_t                         sum = 0;
        bool                            there;

        snprintf(copy, sizeof(copy), "east.%s", topic);
        /* Asked each time: a client caches a topic it was told is
         * missing, and the copy is made while this waits. */
        rkt   = rd_kafka_topic_new(f->check, copy, NULL);
        there = rkt && !rd_kafka_metadata(f->check, 0, rkt, &md, 5000) &&
                md->topic_cnt == 1 && !md->topics[0].err &&
                md->topics[0].partition_cnt == partitions;
        if (md)
                rd_kafka_metadata_destroy(md);
        if (rkt)
                rd_kafka_topic_destroy(rkt);
        if (!there)
                return -1;
        for (int p = 0; p < partitions; p++) {
                int64_t lo, hi;
                if (rd_kafka_query_watermark_offsets(f->check, copy, p, &lo,
                                                     &hi, 5000))
                        return -1;
                sum += hi - lo;
        }
        return sum;
}

struct gwwait {
        struct fx *f;
        int        i;
};

/* Case i copied all its records and says it measured the round trip. */
static bool gateway_done(void *arg) {
        struct gwwait       *w = arg;
        const struct gwcase *c = &gwcases[w->i];
        json_object         *st, *fl, *rtt;
        bool                 ok;

        if (copied(w->f, c->topic, c->partitions) != c->records)
                return false;
        st = gateway_status(w->f, w->i);
        fl = first_flow(st);
        ok = fl && json_object_object_get_ex(fl, "source_rtt_ms", &rtt) && rtt;
        json_object_put(st);
        return ok;
}

static void gateways(struct fx *f, const char *wan, const char *plain,
                     const char *props_path) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        if (rd_kafka_conf_set(conf, "bootstrap.servers", plain, f->errstr,
                              sizeof(f->errstr)) ||
            !(f->check = rd_kafka_new(RD_KAFKA_PRODUCER, conf, f->errstr,
                                      sizeof(f->errstr))))
                fail_msg("%s", f->errstr);
        for (int i = 1; i < GATEWAYS; i++) {
                const struct gwcase *c = &gwcases[i];
                if (bench_topic_create(f->prod, c->topic, c->partitions,
                                       f->errstr, sizeof(f->errstr)))
                        fail_msg("%s", f->errstr);
                for (int k = 0; k < c->records; k++) {
                        char v[32];
                        int  vl = snprintf(v, sizeof(v), "%s-%d", c->topic, k);
                        if (rd_kafka_producev(
                                f->prod, RD_KAFKA_V_TOPIC(c->topic),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_VALUE(v, (size_t)vl),
                                RD_KAFKA_V_END))
                                fail_msg("produce to %s", c->topic);
                }
        }
        atomic_store(&f->delivered, 0);
        wait_delivered(f, gwcases[1].records + gwcases[2].records);
        for (int i = 0; i < GATEWAYS; i++)
                gateway_start(f, i, wan, plain, props_path);
        for (int i = 0; i < GATEWAYS; i++) {
                const struct gwcase     *c = &gwcases[i];
                struct gwwait            w = {f, i};
                struct aagw_fetch_window base;
                json_object             *st, *fl, *rtt, *win, *con;
                char *state = harness_path_join(f->dir, c->name);
                char  log[4200];
                char *text;

                snprintf(log, sizeof(log), "%s.log", state);
                free(state);
                if (!harness_wait_until(gateway_done, &w, KAFKA_TIMEOUT_MS)) {
                        text = harness_read_file(log, NULL);
                        fail_msg("%s: %" PRId64 " of %d records copied, or "
                                 "no round trip in its status; log:\n%s",
                                 c->name, copied(f, c->topic, c->partitions),
                                 c->records, text ? text : "");
                }
                st = gateway_status(f, i);
                fl = first_flow(st);
                assert_non_null(fl);
                assert_true(
                    json_object_object_get_ex(fl, "source_rtt_ms", &rtt));
                assert_true(
                    json_object_object_get_ex(fl, "fetch_window_bytes", &win));
                assert_true(
                    json_object_object_get_ex(fl, "fetch_connections", &con));
                double  ms     = json_object_get_double(rtt);
                int64_t window = json_object_get_int64(win);
                int     conns  = json_object_get_int(con);
                print_message("# %s: round trip %.1f ms, fetch window %" PRId64
                              " bytes, %d connection%s\n",
                              c->name, ms, window, conns,
                              conns == 1 ? "" : "s");
                /* The round trip measured is the WAN's. */
                assert_true(ms >= RTT_MS && ms < RTT_MS + 200);
                text = harness_read_file(log, NULL);
                assert_non_null(text);
                if (i == 0) {
                        struct aagw_fetch_window w;
                        aagw_fetch_window_size(&w, (int64_t)(ms * 1000 + 0.5),
                                               c->partitions);
                        assert_false(w.base);
                        assert_int_equal(window, w.window_bytes);
                        assert_non_null(strstr(text, "fetch window"));
                        /* The launcher's brokers keep Kafka's default
                         * socket.send.buffer.bytes, 100 KiB: a connection
                         * brings at most 200 KiB per round trip, far
                         * below the 12.8 MiB of 40 ms, so the most the
                         * flow opens by itself (over its 4 partitions). */
                        int64_t need = AAGW_FETCH_WINDOW_RATE *
                                       (int64_t)(ms * 1000 + 0.5) / 1000000;
                        assert_int_equal(conns, aagw_fetch_connections(
                                                    need,
                                                    aagw_fetch_connection_bytes(
                                                        aagw_tcp_receive_max(),
                                                        102400, 50LL << 20),
                                                    c->partitions, 0));
                        assert_int_equal(conns, 4);
                        assert_non_null(strstr(text, "over 4 connections"));
                } else if (i == 1) {
                        aagw_fetch_window_size(&base, -1, c->partitions);
                        assert_int_equal(window, base.window_bytes);
                        assert_null(strstr(text, "fetch window"));
                        /* fixed: as near the cluster, one connection */
                        assert_int_equal(conns, 1);
                } else {
                        assert_int_equal(window, 0);
                        assert_null(strstr(text, "fetch window"));
                        /* the operator's window: one connection */
                        assert_int_equal(conns, 1);
                }
                free(text);
                json_object_put(st);
        }
        /* Every record once: the copies hold what the sources hold. */
        for (int i = 0; i < GATEWAYS; i++) {
                int status = -1;
                harness_proc_signal(f->gw[i], SIGTERM);
                assert_int_equal(harness_proc_wait(f->gw[i], 30000, &status),
                                 AAGW_OK);
                assert_int_equal(harness_exit_code(status), 0);
                assert_int_equal(
                    copied(f, gwcases[i].topic, gwcases[i].partitions),
                    gwcases[i].records);
        }
}

static void test_wan_listener(void **state) {
        struct fx  *f = *state;
        char        script[4096], rtt[16], wan[256], plain[256], gw[256];
        char        props[1024], ms[32];
        const char *src  = getenv("AAGW_SOURCE_ROOT");
        const char *prog = getenv("WAN_PROXY");
        const struct rd_kafka_metadata *md = NULL;
        int64_t     min_ns = INT64_MAX, max_ns = 0;
        bool        seen[TOTAL] = {0};
        int         got = 0, dups = 0;

        assert_non_null(src);
        assert_non_null(prog);
        snprintf(script, sizeof(script), "%s/scripts/kafka-clusters", src);
        snprintf(rtt, sizeof(rtt), "%d", RTT_MS);
        const char *argv[] = {script, "--brokers", "2", "--heap", "384",
                              "--security", "east=scram-sha-512",
                              "--wan-delay", rtt, "--wan-proxy", prog,
                              "--env-file", f->env_path,
                              "--bootstraps-file", f->bs_path, "east",
                              NULL};
        f->launcher = harness_proc_spawn(argv, f->log_path, f->log_path,
                                         f->errstr, sizeof(f->errstr));
        if (!f->launcher)
                fail_msg("kafka-clusters: %s", f->errstr);
        if (!harness_wait_until(launcher_ready, f, READY_TIMEOUT_MS) ||
            !harness_wait_file(f->bs_path, 0)) {
                char *log = harness_read_file(f->log_path, NULL);
                fail_msg("the launcher is not ready:\n%s", log ? log : "");
        }
        f->env = harness_read_file(f->env_path, NULL);
        assert_non_null(f->env);
        env_get(f, "AAGW_TEST_WAN_BOOTSTRAPS_EAST", wan, sizeof(wan));
        env_get(f, "AAGW_TEST_BOOTSTRAPS_EAST", plain, sizeof(plain));
        env_get(f, "AAGW_TEST_GW_BOOTSTRAPS_EAST", gw, sizeof(gw));
        env_get(f, "AAGW_TEST_GW_PROPS_EAST", props, sizeof(props));
        assert_string_equal(env_get(f, "AAGW_TEST_WAN_DELAY_MS", ms,
                                    sizeof(ms)),
                            rtt);
        print_message("# east: plaintext %s, SCRAM %s, WAN %s\n", plain, gw,
                      wan);

        /* The metadata through the WAN names the proxy's ports, one per
         * broker, and nothing else. */
        const char *const pprops[] = {"acks", "all",
                                      "enable.idempotence", "true",
                                      "linger.ms", "0",
                                      NULL};
        f->prod = wan_client(f, RD_KAFKA_PRODUCER, wan, props, pprops);
        assert_int_equal(rd_kafka_metadata(f->prod, 1, NULL, &md, 30000), 0);
        assert_int_equal(md->broker_cnt, 2);
        for (int i = 0; i < md->broker_cnt; i++) {
                char addr[64];
                snprintf(addr, sizeof(addr), "%s:%d", md->brokers[i].host,
                         md->brokers[i].port);
                print_message("# broker %d at %s\n", md->brokers[i].id, addr);
                if (!in_list(wan, addr))
                        fail_msg("broker %d advertised %s over the WAN, not "
                                 "one of the proxy's %s",
                                 md->brokers[i].id, addr, wan);
        }
        rd_kafka_metadata_destroy(md);

        /* Logged in (SCRAM over TLS through the proxy): create, write. */
        if (bench_topic_create(f->prod, "wan-real", PARTITIONS, f->errstr,
                               sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
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
        print_message("# produce -> delivered, one at a time: min %.1f max "
                      "%.1f ms (round trip %d ms)\n",
                      (double)min_ns / MS, (double)max_ns / MS, RTT_MS);
        assert_true(min_ns >= RTT_MS * MS);
        assert_true(min_ns < (RTT_MS + 100) * MS);
        for (int i = 1 + PINGS; i < TOTAL; i++)
                produce(f, i);
        wait_delivered(f, TOTAL);

        /* Read it all back over the WAN. */
        const char *const cprops[] = {"group.id", "wan-real",
                                      "enable.auto.commit", "false",
                                      NULL};
        rd_kafka_topic_partition_list_t *asg =
            rd_kafka_topic_partition_list_new(PARTITIONS);
        f->cons = wan_client(f, RD_KAFKA_CONSUMER, wan, props, cprops);
        rd_kafka_poll_set_consumer(f->cons);
        for (int p = 0; p < PARTITIONS; p++)
                rd_kafka_topic_partition_list_add(asg, "wan-real", p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        assert_int_equal(rd_kafka_assign(f->cons, asg), 0);
        rd_kafka_topic_partition_list_destroy(asg);
        int64_t deadline = harness_now_ms() + KAFKA_TIMEOUT_MS;
        while (got < TOTAL && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(f->cons, 100);
                int                 i;
                if (!m)
                        continue;
                if (!m->err && m->len == 7 &&
                    sscanf((const char *)m->payload, "v%6d", &i) == 1 &&
                    i >= 0 && i < TOTAL) {
                        dups += seen[i];
                        got += !seen[i];
                        seen[i] = true;
                } else if (m->err) {
                        print_message("# consumer: %s\n",
                                      rd_kafka_message_errstr(m));
                }
                rd_kafka_message_destroy(m);
        }
        assert_int_equal(got, TOTAL);
        assert_int_equal(dups, 0);

        gateways(f, wan, plain, props);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_wan_listener, setup,
                                            teardown),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests_name("kafka-wan", tests, NULL, NULL);
}
