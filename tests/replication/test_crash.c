/* tests/replication/test_crash.c: exactly once across crashes (two
 * sites, both directions).
 *
 * Prefix policy: a feeder thread produces 64,000 keyed records (56,000 at
 * east, 8,000 at west) at a steady pace for about half a minute.
 * Meanwhile the gateway is SIGKILLed and restarted on the same state dir
 * five times: four times once it has made progress (records in flight at
 * the kill), once during its start (group join and reconciliation).  Then
 * it is killed once more, its state dir is DELETED, and it is restarted:
 * only the target logs are left to say what was copied.  That last run
 * replicates to the end and stops cleanly.
 *
 * Identity policy, smaller: the same with the copies landing in the
 * target's own "clicks", between the records local producers write there
 * at the same time, so reconciliation must pick aagw's copies out by
 * their provenance.
 *
 * Every source record must then be in the remote copy exactly once, in
 * the same partition and the same order (kcat reads both sides).
 *
 * Restarts resume at once, with the default settings:
 * the flows' consumer session is set to 30 s, the gateway is SIGKILLed
 * with records waiting and restarted, and they must be copied within
 * REJOIN_MS.  A flow whose partitions came from a consumer group waited
 * out the killed member's session first (the whole 30 s); one that
 * assigns itself its partitions reads again at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aagw_replicator.h"
#include "repl.h"

#define PARTS 8
#define KEYS 2000
#define TICK_MS 50
#define PROGRESS 1500 /* records copied by a run before it is killed */
#define REPL_TIMEOUT_MS 90000

static const char *const sites[] = {"east", "west"};

/* ------------------------------- FEEDER --------------------------------- */

/* One scenario. */
struct variant {
        const char *policy;
        int         total[2]; /* records to produce at east, west */
        int         ticks;    /* production spread over ticks * TICK_MS */
        int         kills;    /* with the state dir kept; the one during
                                 the start is the third */
};

struct feeder {
        struct repl          *r;
        const struct variant *v;
        const char           *topic; /* repl_topic(r, "clicks") */
        pthread_t             thread;
        bool                  started;
        atomic_int            produced[2]; /* acknowledged, per site */
        atomic_int            failed;
        atomic_bool           done;
        char                  err[512];
};

static void feeder_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                      void *opaque) {
        atomic_int *counts = opaque; /* [0] ok, [1] failed */

        (void)rk;
        atomic_fetch_add(&counts[m->err ? 1 : 0], 1);
}

static rd_kafka_t *feeder_producer(struct feeder *fd, const char *site,
                                   atomic_int *counts) {
        rd_kafka_conf_t *conf;
        rd_kafka_t      *rk;
        char             err[512];

        conf = aagw_kafka_conf_new(repl_bs(fd->r, site), "test-feeder", err,
                                   sizeof(err));
        if (!conf ||
            aagw_kafka_conf_set(conf, "enable.idempotence", "true", err,
                                sizeof(err)) ||
            aagw_kafka_conf_set(conf, "linger.ms", "5", err, sizeof(err))) {
                snprintf(fd->err, sizeof(fd->err), "%s", err);
                return NULL;
        }
        rd_kafka_conf_set_dr_msg_cb(conf, feeder_dr);
        rd_kafka_conf_set_opaque(conf, counts);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk)
                snprintf(fd->err, sizeof(fd->err), "%s", err);
        return rk;
}

static void nap(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

/* Produce v->total records evenly over v->ticks ticks: the pace is the
 * point (records keep flowing across every restart). */
static void *feeder_main(void *arg) {
        struct feeder *fd    = arg;
        const int     *total = fd->v->total;
        const int      ticks = fd->v->ticks;
        atomic_int     counts[2][2];
        rd_kafka_t    *rk[2];
        int            next[2] = {0, 0};

        for (int s = 0; s < 2; s++) {
                atomic_init(&counts[s][0], 0);
                atomic_init(&counts[s][1], 0);
                rk[s] = feeder_producer(fd, sites[s], counts[s]);
                if (!rk[s]) {
                        atomic_store(&fd->failed, 1);
                        atomic_store(&fd->done, true);
                        return NULL;
                }
        }
        for (int t = 1; t <= ticks; t++) {
                for (int s = 0; s < 2; s++) {
                        int until = (int)((int64_t)total[s] * t / ticks);

                        for (; next[s] < until; next[s]++) {
                                char key[32], val[32];

                                snprintf(key, sizeof(key), "k%d",
                                         next[s] % KEYS);
                                snprintf(val, sizeof(val), "%s-%07d", sites[s],
                                         next[s]);
                                while (rd_kafka_producev(
                                           rk[s], RD_KAFKA_V_TOPIC(fd->topic),
                                           RD_KAFKA_V_KEY(key, strlen(key)),
                                           RD_KAFKA_V_VALUE(val, strlen(val)),
                                           RD_KAFKA_V_MSGFLAGS(
                                               RD_KAFKA_MSG_F_COPY),
                                           RD_KAFKA_V_END) ==
                                       RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                        rd_kafka_poll(rk[s], 10);
                        }
                        rd_kafka_poll(rk[s], 0);
                        atomic_store(&fd->produced[s],
                                     atomic_load(&counts[s][0]));
                }
                nap(TICK_MS);
        }
        for (int s = 0; s < 2; s++) {
                if (rd_kafka_flush(rk[s], 60000))
                        atomic_store(&fd->failed, 1);
                if (atomic_load(&counts[s][1]) ||
                    atomic_load(&counts[s][0]) != total[s])
                        atomic_store(&fd->failed, 1);
                atomic_store(&fd->produced[s], atomic_load(&counts[s][0]));
                rd_kafka_destroy(rk[s]);
        }
        atomic_store(&fd->done, true);
        return NULL;
}

/* ------------------------------- FIXTURE -------------------------------- */

struct fx {
        struct repl  *r;
        struct feeder fd;
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));

        *state = f;
        return f ? 0 : -1;
}

static int teardown(void **state) {
        struct fx *f = *state;

        if (f->fd.started)
                pthread_join(f->fd.thread, NULL);
        repl_destroy(f->r, false);
        free(f);
        return 0;
}

/* ------------------------------ CONDITIONS ------------------------------ */

/* Where east's records land at west. */
static const char *east_copy_topic(const struct variant *v) {
        return strcmp(v->policy, "identity") ? "east.clicks" : "clicks";
}

/* Copies of east's records at west: under the identity policy the topic
 * also holds west's own records, as many as the feeder got acknowledged
 * (an estimate that lags by at most one tick). */
static int64_t east_copies(struct fx *f) {
        int64_t n = repl_size(f->r, "west", east_copy_topic(f->fd.v));

        if (!strcmp(f->fd.v->policy, "identity"))
                n -= atomic_load(&f->fd.produced[1]);
        return n;
}

struct progress {
        struct fx *f;
        int64_t    base; /* east_copies() when this run started */
};

/* This run copied PROGRESS records in the busy direction (or caught up
 * with a finished feeder). */
static bool made_progress(void *arg) {
        struct progress *pg = arg;
        int64_t          n  = east_copies(pg->f);

        if (n >= pg->base + PROGRESS)
                return true;
        return atomic_load(&pg->f->fd.done) && n >= pg->f->fd.v->total[0];
}

static bool log_has(struct repl *r, const char *needle) {
        char *text = repl_log_text(r);
        bool  hit  = strstr(text, needle) != NULL;

        free(text);
        return hit;
}

/* The flows found their topic: the gateway is joining its groups (and
 * about to reconcile). */
static bool discovering(void *arg) {
        struct repl *r = arg;
        char         needle[300];

        snprintf(needle, sizeof(needle), "east->west: replicating %s",
                 repl_topic(r, "clicks"));
        return log_has(r, needle);
}

static bool feeder_done(void *arg) {
        return atomic_load(&((struct feeder *)arg)->done);
}

/* --------------------------------- TEST --------------------------------- */

static void kill_gateway(struct repl *r) {
        assert_true(repl_gw_running(r));
        assert_int_equal(repl_gw_stop(r, SIGKILL, REPL_STOP_TIMEOUT_MS),
                         128 + SIGKILL);
}

/* Under the identity policy: the records of 'rs' written by local
 * producers (no provenance). */
static void local_only(const struct rrecs *rs, struct rrecs *out) {
        memset(out, 0, sizeof(*out));
        memcpy(out->topic, rs->topic, sizeof(out->topic));
        out->v = calloc(rs->cnt + 1, sizeof(*out->v));
        assert_non_null(out->v);
        for (size_t i = 0; i < rs->cnt; i++)
                if (rrec_hdr(&rs->v[i], "aagw.prov", NULL, 0) == 0)
                        out->v[out->cnt++] = rs->v[i];
}

static void run_variant(struct fx *f, const struct variant *v) {
        const char  *extra[]  = {"--policy", v->policy, NULL};
        bool         identity = !strcmp(v->policy, "identity");
        struct repl *r;
        int          kills = 0;

        f->r = r = repl_new(sites, 2);
        repl_create_topic(r, NULL, "clicks", PARTS);
        if (!identity) {
                repl_create_topic(r, "west", "east.clicks", PARTS);
                repl_create_topic(r, "east", "west.clicks", PARTS);
        }

        f->fd.r     = r;
        f->fd.v     = v;
        f->fd.topic = repl_topic(r, "clicks");
        assert_int_equal(
            pthread_create(&f->fd.thread, NULL, feeder_main, &f->fd), 0);
        f->fd.started = true;

        /* Kills after progress, and the third one during the start. */
        for (int run = 0; run < v->kills; run++) {
                struct progress pg = {f, 0};

                pg.base = east_copies(f);
                repl_gw_start(r, extra);
                if (run == 2) {
                        if (!harness_wait_until(discovering, r, 30000)) {
                                repl_dump_log(r, 30);
                                fail_msg("run %d: no topic discovery", run);
                        }
                } else if (!harness_wait_until(made_progress, &pg,
                                               REPL_TIMEOUT_MS)) {
                        repl_dump_log(r, 30);
                        fail_msg("run %d: no progress", run);
                }
                kill_gateway(r);
                kills++;
        }
        assert_false(atomic_load(&f->fd.failed));
        /* Records were still flowing at the last kill. */
        assert_false(atomic_load(&f->fd.done));

        /* Lose the state: positions must come from the target logs. */
        assert_int_equal(harness_rmtree(r->state), 0);
        repl_gw_start(r, extra);
        assert_true(harness_wait_until(feeder_done, &f->fd, REPL_TIMEOUT_MS));
        pthread_join(f->fd.thread, NULL);
        f->fd.started = false;
        assert_false(atomic_load(&f->fd.failed));
        assert_int_equal(atomic_load(&f->fd.produced[0]), v->total[0]);
        assert_int_equal(atomic_load(&f->fd.produced[1]), v->total[1]);
        if (identity) {
                repl_expect_size(r, "west", "clicks", v->total[0] + v->total[1],
                                 REPL_TIMEOUT_MS);
                repl_expect_size(r, "east", "clicks", v->total[0] + v->total[1],
                                 REPL_TIMEOUT_MS);
        } else {
                repl_expect_size(r, "west", "east.clicks", v->total[0],
                                 REPL_TIMEOUT_MS);
                repl_expect_size(r, "east", "west.clicks", v->total[1],
                                 REPL_TIMEOUT_MS);
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);
        assert_int_equal(kills, v->kills);

        for (int s = 0; s < 2; s++) {
                struct rrecs src, copy, local;
                char         remote[64], path[64];

                snprintf(remote, sizeof(remote), "%s%s",
                         identity ? "" : (s ? "west." : "east."), "clicks");
                snprintf(path, sizeof(path), "%s>%s", sites[s], sites[1 - s]);
                repl_read(r, sites[s], "clicks", &src);
                repl_read(r, sites[1 - s], remote, &copy);
                local_only(&src, &local);
                assert_int_equal(local.cnt, v->total[s]);
                /* check_copy counts the copies by origin, so under the
                 * identity policy the target's own records are left out
                 * and any duplicate or loss still shows. */
                repl_check_copy(&local, "clicks", sites[s], &copy, path);
                assert_int_equal(copy.cnt, identity ? v->total[0] + v->total[1]
                                                    : v->total[s]);
                free(local.v);
                rrecs_deinit(&src);
                rrecs_deinit(&copy);
        }
        /* The state-less run did resume from what the target held. */
        assert_true(log_has(r, "target holds copies up to source offset"));
}

#define REJOIN_PARTS 4
#define REJOIN_RECS  500
#define REJOIN_KILLS 2
#define REJOIN_MS    8000 /* well under the 30 s session below */

static void test_restart_at_once(void **state) {
        struct fx   *f = *state;
        struct repl *r;
        /* A session long enough that waiting it out cannot pass. */
        const char *extra[] = {
            "--set", "clusters.east.properties.consumer.session.timeout.ms=30000",
            "--set", "clusters.west.properties.consumer.session.timeout.ms=30000",
            NULL};
        int64_t     want = 0;
        char        tag[16];

        f->r = r = repl_new(sites, 2);
        repl_create_topic(r, "east", "clicks", REJOIN_PARTS);
        repl_create_topic(r, "west", "east.clicks", REJOIN_PARTS);
        repl_gw_start(r, extra);
        repl_produce(r, "east", "clicks", "r0", 0, REJOIN_RECS, 50, NULL, -1);
        want += REJOIN_RECS;
        repl_expect_size(r, "west", "east.clicks", want, REPL_TIMEOUT_MS);
        for (int k = 1; k <= REJOIN_KILLS; k++) {
                kill_gateway(r);
                snprintf(tag, sizeof(tag), "r%d", k);
                repl_produce(r, "east", "clicks", tag, 0, REJOIN_RECS, 50,
                             NULL, -1);
                want += REJOIN_RECS;
                int64_t t0 = harness_now_ms();
                repl_gw_start(r, extra);
                bool ok = repl_wait_size(r, "west", "east.clicks", want,
                                         REJOIN_MS);
                print_message("# restart %d: %" PRId64 " of %" PRId64
                              " records copied %.1f s after the start\n",
                              k, repl_size(r, "west", "east.clicks"), want,
                              (double)(harness_now_ms() - t0) / 1000.0);
                if (!ok) {
                        repl_dump_log(r, 30);
                        fail_msg("restart %d: the waiting records were not "
                                 "copied within %d ms",
                                 k, REJOIN_MS);
                }
        }
        assert_int_equal(repl_gw_stop(r, SIGTERM, REPL_STOP_TIMEOUT_MS), 0);

        /* Exactly once, in order. */
        repl_expect_clicks_copied(r, "east", "west", want);
}

static void test_sigkill_restarts_prefix(void **state) {
        static const struct variant v = {"prefix", {56000, 8000}, 700, 5};

        run_variant(*state, &v);
}

static void test_sigkill_restarts_identity(void **state) {
        static const struct variant v = {"identity", {16000, 8000}, 360, 3};

        run_variant(*state, &v);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_restart_at_once, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_sigkill_restarts_prefix, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_sigkill_restarts_identity,
                                            setup, teardown),
        };

        return cmocka_run_group_tests_name("replication-crash", tests, NULL,
                                           NULL);
}
