/*
 * tests/realkafka/test_topic_recreate.c: a remote copy deleted while aagw
 * copies into it.
 *
 * One broker per site.  Kafka's VerifiableProducer (acks=all,
 * idempotent) writes to east's clicks for the whole run (--max-messages
 * -1, then SIGTERM); aagw copies it to west's east.clicks and unifies
 * both sites' clicks (dedup, the derived id).  Once the copy holds
 * records, the test deletes east.clicks at west (Admin DeleteTopics).
 *
 * What aagw must do (docs/reliability.md, "Scenario topic-recreate"):
 *  - notice and fail closed: the gateway exits 1 within 60 s with an
 *    error naming the topic and the site, rather than dead-letter the
 *    copies or resume with a gap;
 *  - on the next start, create the topic again (it is a missing target),
 *    see that its end offsets are below the stored copy positions, log
 *    it per partition, count it in aagw_replication_target_resets_total,
 *    and copy the source again from its log start.
 *
 * Asserted by content (aagw.kafka.ReadToEnd, read_committed): east's
 * clicks holds every acked value once; west's new east.clicks exactly the
 * records of east's clicks, once each, same partition and order; both
 * clicks.unified hold each value exactly once (nothing the first run
 * unified is unified again from the second copy).
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

#define THROUGHPUT "400"
#define PARTS      4

/* The producer has @want acks and @topic at @alias holds @size records. */
struct grow_arg {
        struct rk         *r;
        struct rk_counter *acks;
        const char        *alias, *topic;
        int64_t            want, size, now;
};

static bool grown(void *arg) {
        struct grow_arg *a = arg;

        if (rk_count_poll(a->acks) < a->want)
                return false;
        a->now = rk_size(a->r, a->alias, a->topic);
        return a->now >= a->size;
}

static void wait_grown(struct rk *r, struct grow_arg *a, const char *what) {
        if (!harness_wait_until(grown, a, 120000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("%s: %" PRId64 " acks (want %" PRId64 "), %s at %s "
                         "holds %" PRId64 " (want %" PRId64 ")",
                         what, a->acks->cnt, a->want, a->topic, a->alias,
                         a->now, a->size);
        }
}

static bool gw_exited(void *arg) {
        struct rk *r = arg;
        return harness_proc_wait(r->gw, 0, NULL) != AAGW_ERR_TIMEOUT;
}

/* @returns how many lines of the current gateway log hold all of
 * @p needles (NULL-terminated). */
static int log_lines(struct rk *r, const char *const *needles) {
        char *text = harness_read_file(r->gw_log, NULL), *line, *save = NULL;
        int   n    = 0;

        for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
                size_t i = 0;
                while (needles[i] && strstr(line, needles[i]))
                        i++;
                n += !needles[i];
        }
        free(text);
        return n;
}

static void test_topic_recreate(void **state) {
        struct rk *r = rk_new("rk-recreate");

        *state = r;
        rk_clicks_clusters(r, 1, 0, PARTS);

        const char *const gw_args[] = {"--topic", "clicks", "--unify", "dedup",
                                       NULL};
        rk_gw_start(r, gw_args);

        char           *prod_out, *prod_err;
        harness_proc_t *prod = rk_clicks_producer(r, "east", "1", THROUGHPUT,
                                                  &prod_out, &prod_err);
        struct rk_counter acks;
        rk_counter_init(&acks, prod_out, "producer_send_success");

        struct grow_arg g = {r, &acks, "west", "east.clicks", 4000, 3000, 0};
        wait_grown(r, &g, "before the delete");
        int64_t at = acks.cnt, copied = g.now, t_del = harness_now_ms();
        rk_delete_topic(r, "west", "east.clicks");

        /* Fail closed, loudly. */
        if (!harness_wait_until(gw_exited, r, 60000)) {
                rk_gw_dump_log(r, 40);
                fail_msg("aagw still runs 60 s after east.clicks was deleted "
                         "at west");
        }
        double t_fail = (double)(harness_now_ms() - t_del) / 1000.0;
        const char *const gone[] = {" E [FLOW]", "east.clicks", "west", "deleted",
                                    NULL};
        int nlines = log_lines(r, gone);
        if (nlines < 1)
                rk_gw_dump_log(r, 40);
        assert_true(nlines >= 1);
        /* The failed gateway stops by itself (exit 1).  librdkafka 2.0
         * never finished destroying a consumer whose assigned topic was
         * deleted (the unify stage's, which reads the copy); its stops
         * were cut short by a watchdog after 40 s.  Now it stops. */
        assert_int_equal(rk_gw_stop(r, SIGTERM, 10000), 1);
        print_message("# east.clicks deleted at west at %" PRId64 " acks, "
                      "%" PRId64 " records copied; aagw exited %.1f s "
                      "later\n",
                      at, copied, t_fail);

        /* The next start creates it again and copies from the start. */
        int64_t t_start = harness_now_ms();
        rk_gw_start(r, gw_args);
        g = (struct grow_arg){r, &acks, "west", "east.clicks", acks.cnt + 2000,
                              at, 0};
        wait_grown(r, &g, "after the restart");
        double t_back = (double)(harness_now_ms() - t_start) / 1000.0;
        const char *const reset[] = {" E [FLOW]", "east.clicks", "recreated",
                                     NULL};
        int nreset = log_lines(r, reset);
        if (nreset < PARTS)
                rk_gw_dump_log(r, 40);
        assert_true(nreset >= PARTS);

        rk_producer_stop(r, prod, prod_err);
        harness_proc_destroy(prod);
        struct rk_produced pr;
        rk_produced_parse(prod_out, &pr);
        int64_t acked = rk_bag_total(pr.acked);
        bool caught_up =
            rk_wait_size(r, "west", "east.clicks", acked, 120000) &&
            rk_wait_size(r, "east", "clicks.unified", acked, 120000) &&
            rk_wait_size(r, "west", "clicks.unified", acked, 120000);
        rk_gw_expect_running(r);
        if (!caught_up)
                rk_gw_dump_log(r, 40);
        assert_int_equal(rk_gw_stop(r, SIGTERM, 30000), 0);
        bool ok = rk_verify_clicks(r, &pr, NULL, "end");
        print_message("# topic-recreate: %" PRId64 " acked, copy back to "
                      "%" PRId64 " records %.1f s after the restart, wall "
                      "%.1f s\n",
                      acked, at, t_back, rk_elapsed(r));
        assert_true(ok);
        rk_produced_deinit(&pr);
        free(prod_out);
        free(prod_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_topic_recreate, rk_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
