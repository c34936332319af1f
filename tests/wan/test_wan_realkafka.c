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
 * launcher's env file.
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

#include <librdkafka/rdkafka.h>

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

struct fx {
        char           *dir, *env_path, *bs_path, *log_path;
        harness_proc_t *launcher;
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
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char            *text = harness_read_file(props_path, NULL);
        char            *line, *save = NULL;
        rd_kafka_t      *rk;

        assert_non_null(text);
        rd_kafka_conf_set_opaque(conf, f);
        if (type == RD_KAFKA_PRODUCER)
                rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        for (line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                char *eq = strchr(line, '=');
                assert_non_null(eq);
                *eq = '\0';
                if (rd_kafka_conf_set(conf, line, eq + 1, f->errstr,
                                      sizeof(f->errstr)))
                        fail_msg("%s", f->errstr);
        }
        free(text);
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
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_wan_listener, setup,
                                            teardown),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests_name("kafka-wan", tests, NULL, NULL);
}
