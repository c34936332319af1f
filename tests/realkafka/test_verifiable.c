/*
 * tests/realkafka/test_verifiable.c: Kafka's own VerifiableProducer
 * through aagw, with aagw SIGKILLed and restarted KILLS times while it
 * replicates.
 *
 * Two single-broker clusters, east and west.  aagw runs both directions
 * and the unify stage (dedup by `--id hash`: the hash of key and value.
 * VerifiableProducer's values are unique per site, "1.<i>" at east and
 * "2.<i>" at west, so "each acked value exactly once" is exactly what
 * dedup by content promises, also for a value a client wrote twice;
 * the derived id would instead make two writes of one value two events).
 * VerifiableProducer (acks=all, enable.idempotence=true, retries on)
 * writes NEAST records at east and NWEST at west.  aagw gets SIGKILL
 * and is started again on the same state dir KILLS times: alternately
 * once the east producer passed another 1/(KILLS+1) of its run (and aagw
 * copied something since its start), and at the first record the
 * restarted gateway adds to west's clicks.unified (in its catch-up).
 *
 * Asserted from the tools' JSON events only (producer_send_success, and
 * aagw.kafka.ReadToEnd's record_data read with read_committed), nothing
 * from aagw's figures:
 *  - each site's clicks holds every value acked there once;
 *  - the remote copies (west's east.clicks, east's west.clicks) hold
 *    exactly their source's records, each once, same partition and order;
 *  - clicks.unified at west and at east hold every acked value of both
 *    sites exactly once and nothing else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rk.h"

#define NEAST 40000
#define NWEST 10000
#define PARTS 4
#define KILLS 6

static const char PRODUCER_CONFIG[] =
    "acks=all\n"
    "enable.idempotence=true\n"
    "retries=2147483647\n"
    "max.in.flight.requests.per.connection=5\n"
    "delivery.timeout.ms=120000\n"
    "linger.ms=5\n";

static harness_proc_t *producer(struct rk *r, const char *alias,
                                const char *prefix, int n, const char *tput,
                                const char *pconf, char **out, char **err) {
        char name[64], nrec[16];

        snprintf(name, sizeof(name), "producer-%s.out", alias);
        *out = rk_path(r, name);
        snprintf(name, sizeof(name), "producer-%s.err", alias);
        *err = rk_path(r, name);
        snprintf(nrec, sizeof(nrec), "%d", n);
        const char *const args[] = {
            "--bootstrap-server", rk_bs(r, alias), "--topic", "clicks",
            "--max-messages", nrec, "--throughput", tput, "--acks", "-1",
            "--producer.config", pconf, "--value-prefix", prefix,
            "--repeating-keys", "500", NULL};
        return rk_java_spawn(r, "org.apache.kafka.tools.VerifiableProducer",
                             args, *out, *err);
}

/* Time to kill.  Odd kills: the east producer passed @want acks and
 * aagw copied something to west since it was started (@topic =
 * east.clicks grew past @base).  Even kills: the first record the
 * restarted gateway adds to west's clicks.unified (@want 0, @topic =
 * clicks.unified): mid-way through its catch-up, right after the
 * start-up scan. */
struct kill_arg {
        struct rk         *r;
        struct rk_counter *acks;
        harness_proc_t    *prod;
        const char        *topic;
        int64_t            want, base, now;
        bool               exited;
};

static bool kill_time(void *arg) {
        struct kill_arg *a = arg;

        if (harness_proc_wait(a->prod, 0, NULL) != AAGW_ERR_TIMEOUT) {
                a->exited = true;
                return true;
        }
        if (rk_count_poll(a->acks) < a->want)
                return false;
        a->now = rk_size(a->r, "west", a->topic);
        return a->now > a->base;
}

static void test_verifiable(void **state) {
        struct rk *r = rk_new("rk-verifiable");

        *state = r;
        rk_clicks_clusters(r, 1, 0, PARTS);

        const char *const gw_args[] = {"--topic", "clicks", "--unify", "dedup",
                                       "--id",    "hash",   NULL};
        rk_gw_start(r, gw_args);

        char *pconf = rk_write(r, "producer.properties", PRODUCER_CONFIG);
        char *e_out, *e_err, *w_out, *w_err;
        int64_t t_prod = harness_now_ms();
        harness_proc_t *pe =
            producer(r, "east", "1", NEAST, "800", pconf, &e_out, &e_err);
        harness_proc_t *pw =
            producer(r, "west", "2", NWEST, "200", pconf, &w_out, &w_err);
        struct rk_counter acks;
        rk_counter_init(&acks, e_out, "producer_send_success");

        for (int k = 1; k <= KILLS; k++) {
                bool            odd = k % 2;
                struct kill_arg ka  = {
                    r,     &acks, pe,
                    odd ? "east.clicks" : "clicks.unified",
                    odd ? (int64_t)NEAST * k / (KILLS + 1) : 0,
                    rk_size(r, "west", odd ? "east.clicks" : "clicks.unified"),
                    0,     false};
                if (!harness_wait_until(kill_time, &ka, 120000) || ka.exited) {
                        rk_gw_dump_log(r, 40);
                        fail_msg("kill %d: east producer at %" PRId64
                                 " acks (want %" PRId64 "), %s at west %" PRId64
                                 " (was %" PRId64 "): %s",
                                 k, acks.cnt, ka.want, ka.topic, ka.now,
                                 ka.base,
                                 ka.exited ? "the producer exited"
                                           : "deadline passed");
                }
                rk_gw_expect_running(r);
                assert_int_equal(rk_gw_stop(r, SIGKILL, 10000), 128 + SIGKILL);
                print_message("# kill %d: aagw SIGKILLed at %" PRId64
                              " east acks, %s at west %" PRId64 " (%" PRId64
                              " at its start), %.1f s into the run\n",
                              k, acks.cnt, ka.topic, ka.now, ka.base,
                              (double)(harness_now_ms() - t_prod) / 1000.0);
                rk_gw_start(r, gw_args);
        }
        rk_java_expect_exit0(r, pe, "VerifiableProducer at east", e_err,
                             180000);
        rk_java_expect_exit0(r, pw, "VerifiableProducer at west", w_err,
                             60000);
        harness_proc_destroy(pe);
        harness_proc_destroy(pw);

        struct rk_produced east_p, west_p;
        rk_produced_parse(e_out, &east_p);
        rk_produced_parse(w_out, &west_p);
        int64_t ea = rk_bag_total(east_p.acked), wa = rk_bag_total(west_p.acked);
        print_message("# producers: east %d sent, %" PRId64 " acked, %" PRId64
                      " failed; west %d sent, %" PRId64 " acked, %" PRId64
                      " failed; %.1f s\n",
                      NEAST, ea, rk_bag_total(east_p.failed), NWEST, wa,
                      rk_bag_total(west_p.failed),
                      (double)(harness_now_ms() - t_prod) / 1000.0);
        assert_true(ea > 0 && wa > 0);

        bool caught_up =
            rk_wait_size(r, "west", "east.clicks", ea, 120000) &&
            rk_wait_size(r, "east", "west.clicks", wa, 120000) &&
            rk_wait_size(r, "west", "clicks.unified", ea + wa, 120000) &&
            rk_wait_size(r, "east", "clicks.unified", ea + wa, 120000);
        rk_gw_expect_running(r);
        if (!caught_up)
                rk_gw_dump_log(r, 40);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);

        const char *const topics[] = {"clicks", "west.clicks", "east.clicks",
                                      "clicks.unified", NULL};
        const char *const east_topics[] = {topics[0], topics[1], topics[3],
                                           NULL};
        const char *const west_topics[] = {topics[0], topics[2], topics[3],
                                           NULL};
        char *east_out = rk_read_topics(r, "east", "read-east", east_topics);
        char *west_out = rk_read_topics(r, "west", "read-west", west_topics);
        struct rk_read e_src, w_src, w_copy, e_copy, w_uni, e_uni;
        rk_read_parse(east_out, "clicks", &e_src);
        rk_read_parse(east_out, "west.clicks", &e_copy);
        rk_read_parse(east_out, "clicks.unified", &e_uni);
        rk_read_parse(west_out, "clicks", &w_src);
        rk_read_parse(west_out, "east.clicks", &w_copy);
        rk_read_parse(west_out, "clicks.unified", &w_uni);

        /* Every acked value of both sites, and the failed ones (which may
         * or may not have been written). */
        struct rk_bag *all = rk_bag_new(), *maybe = rk_bag_new();
        rk_bag_add_all(all, east_p.acked);
        rk_bag_add_all(all, west_p.acked);
        rk_bag_add_all(maybe, east_p.failed);
        rk_bag_add_all(maybe, west_p.failed);

        bool ok = true;
        ok &= rk_check("east clicks", east_p.acked, east_p.failed, &e_src);
        ok &= rk_check("west clicks", west_p.acked, west_p.failed, &w_src);
        ok &= rk_check("west east.clicks", e_src.values, NULL, &w_copy);
        ok &= rk_check("east west.clicks", w_src.values, NULL, &e_copy);
        ok &= rk_check("west clicks.unified", all, maybe, &w_uni);
        ok &= rk_check("east clicks.unified", all, maybe, &e_uni);
        int64_t order = rk_order_diffs("west east.clicks", &e_src, &w_copy) +
                        rk_order_diffs("east west.clicks", &w_src, &e_copy);
        print_message("# %d aagw kills, %" PRId64 " + %" PRId64
                      " acked, wall %.1f s\n",
                      KILLS, ea, wa, rk_elapsed(r));
        assert_true(ok);
        assert_int_equal(order, 0);

        rk_bag_destroy(all);
        rk_bag_destroy(maybe);
        rk_read_deinit(&e_src);
        rk_read_deinit(&w_src);
        rk_read_deinit(&e_copy);
        rk_read_deinit(&w_copy);
        rk_read_deinit(&e_uni);
        rk_read_deinit(&w_uni);
        rk_produced_deinit(&east_p);
        rk_produced_deinit(&west_p);
        free(east_out);
        free(west_out);
        free(pconf);
        free(e_out);
        free(e_err);
        free(w_out);
        free(w_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_verifiable, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
