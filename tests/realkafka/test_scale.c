/*
 * tests/realkafka/test_scale.c: both sites served by several aagw
 * processes each (scale-out), while processes are killed, added, stopped
 * and frozen past their session timeout.
 *
 * Two single-broker clusters.  At each site three processes
 * (`--site S --scale-out true`, members e1..e3 and w1..w3) share the
 * inbound flow and the unify stage: clicks (dedup by content hash) and
 * profiles (last-write-wins per record key).  VerifiableProducers write
 * clicks at both sites for the whole run; profiles gets bursts of
 * versions of the same keys at both sites between the steps:
 *
 *   1. w2 is killed with SIGKILL; the others go on copying; w2 restarts;
 *   2. a fourth process w4 joins west;
 *   3. w1 is stopped with SIGTERM (exit 0);
 *   4. e2 is frozen with SIGSTOP until east's owner groups have gone on
 *      without it (a zombie), then woken with SIGCONT.
 *
 * Then, with every process stopped, what Kafka's own tools read
 * (read_committed) must hold: each clicks copy every record of its
 * source once, in order; each clicks.unified every acked click of both
 * sites once; both sites' profiles.unified the same winner for every
 * key, from the last burst.  The zombie's writes are looked for: a
 * read_uncommitted reader may see them (aborted), a read_committed one
 * must not (they would be duplicates above).
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

#include "aagw_replicator.h"
#include "rk.h"

#define PARTS     6
#define KEYS      200  /* profiles keys */
#define SESSION_S 6    /* the brokers' group.min.session.timeout.ms */

static const char *const sites[2] = {"east", "west"};

/* ------------------------------------------------------------ PROCESSES -- */

static void start(struct rk *r, struct rk_gw *g, const char *name,
                  const char *site) {
        char session[64];

        snprintf(session, sizeof(session), "scale_out.session_timeout=%ds",
                 SESSION_S);
        const char *const args[] = {
            "--site",  site,
            "--topic", "clicks",
            "--topic", "profiles",
            "--unify", "dedup",
            "--id",    "hash",
            "--set",   "unify.topics.profiles.mode=lww",
            "--scale-out", "true",
            "--set",   session,
            NULL};
        rk_gwn_start(r, g, name, args);
}

static void stop(struct rk *r, struct rk_gw *g, int sig) {
        int code = rk_gwn_stop(r, g, sig, 60000);

        if (sig == SIGTERM && code != 0)
                fail_msg("%s: exit %d after SIGTERM", g->name, code);
}

/* ------------------------------------------------------------ PROFILES -- */

/* A burst of KEYS versions at 'site': key "k<j>", value
 * "<site>.<burst>.<j>" (the value names its key). */
static void profiles_burst(struct rk *r, const char *site, int burst) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           rk_bs(r, site), err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "enable.idempotence", "true",
                                           err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        assert_non_null(p);
        for (int j = 0; j < KEYS; j++) {
                char k[16], v[64];
                int  kl = snprintf(k, sizeof(k), "k%d", j);
                int  vl = snprintf(v, sizeof(v), "%s.%d.%d", site, burst, j);
                assert_int_equal(
                    rd_kafka_producev(p, RD_KAFKA_V_TOPIC("profiles"),
                                      RD_KAFKA_V_KEY(k, (size_t)kl),
                                      RD_KAFKA_V_VALUE(v, (size_t)vl),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
        }
        assert_int_equal(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_destroy(p);
}

/* The last value per key of a topic read in partition order: a key's
 * versions share a partition (the output is partitioned by key). */
static void last_per_key(const struct rk_read *rd, char **last) {
        for (int p = 0; p < rd->nparts; p++)
                for (size_t i = 0; i < rd->part_cnt[p]; i++) {
                        const char *v = rd->part[p][i];
                        const char *dot = strrchr(v, '.');
                        int         j   = dot ? atoi(dot + 1) : -1;
                        if (j < 0 || j >= KEYS)
                                fail_msg("profiles.unified: unexpected value "
                                         "%s",
                                         v);
                        free(last[j]);
                        last[j] = strdup(v);
                }
}

/* ------------------------------------------------------------- COUNTING -- */

/* Records of every partition of 'topic' at 'site', read to the end with
 * 'isolation' (a transaction's markers take offsets: watermarks would
 * over-count). */
static int64_t count(struct rk *r, const char *site, const char *topic,
                     const char *isolation) {
        char             err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        int64_t          n    = 0;
        int              eof  = 0;

        rd_kafka_conf_set(conf, "bootstrap.servers", rk_bs(r, site), err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "group.id", "test-scale-count", err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err,
                          sizeof(err));
        rd_kafka_conf_set(conf, "isolation.level", isolation, err,
                          sizeof(err));
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        assert_non_null(c);
        rd_kafka_topic_partition_list_t *a =
            rd_kafka_topic_partition_list_new(PARTS);
        for (int p = 0; p < PARTS; p++)
                rd_kafka_topic_partition_list_add(a, topic, p)->offset =
                    RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(c, a);
        rd_kafka_topic_partition_list_destroy(a);
        int64_t deadline = harness_now_ms() + 60000;
        while (eof < PARTS && harness_now_ms() < deadline) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
                if (!m)
                        continue;
                if (!m->err)
                        n++;
                else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        eof++;
                rd_kafka_message_destroy(m);
        }
        rd_kafka_consumer_close(c);
        rd_kafka_destroy(c);
        if (eof < PARTS)
                fail_msg("%s at %s: not read to the end within 60 s", topic,
                         site);
        return n;
}

struct settled {
        struct rk *r;
        int64_t    want[2][3]; /* per site: clicks copy, clicks.unified,
                                  profiles.unified lower bound */
        int64_t    got[2][3];
};

/* Everything produced has reached every copy and unified topic. */
static bool settled(void *arg) {
        struct settled *s = arg;

        for (int i = 0; i < 2; i++) {
                char copy[32];
                snprintf(copy, sizeof(copy), "%s.clicks", sites[!i]);
                s->got[i][0] = count(s->r, sites[i], copy, "read_committed");
                s->got[i][1] =
                    count(s->r, sites[i], "clicks.unified", "read_committed");
                if (s->got[i][0] != s->want[i][0] ||
                    s->got[i][1] != s->want[i][1])
                        return false;
        }
        return true;
}

/* -------------------------------------------------------- OWNER GROUPS -- */

struct without {
        aagw_members_t         *ms;
        struct aagw_group_info *g;
        size_t                  n;
        const char             *member;
};

/* Every owner group described, Stable, and 'member' in none of them. */
static bool gone_from_groups(void *arg) {
        struct without *w = arg;
        size_t          n = aagw_members_get(w->ms, w->g, w->n);

        for (size_t i = 0; i < n; i++) {
                if (w->g[i].error[0] || strcmp(w->g[i].state, "Stable"))
                        return false;
                for (size_t k = 0; k < w->g[i].n; k++)
                        if (!strcmp(w->g[i].m[k].member, w->member))
                                return false;
        }
        return n == w->n;
}

/* --------------------------------------------------------------- THE TEST -- */

/* What the zombie e2's log must say once it runs again: each of its
 * stages lost its work partitions because the group moved on without it,
 * or its producer failed (the coordinator aborted the transaction that
 * timed out while it stood still and bumped the epoch), or the group
 * coordinator fenced its offsets of the transaction (the owner's
 * "fenced by the group coordinator"), or its commit was refused first
 * ("member e2 fenced": the coordinator answered "Unknown member"): the
 * same news by different ways, whichever of the coordinators answered
 * the zombie first. */
struct zombie_news {
        const char *log;
        const char *missing; /* the stage not heard from yet */
};

static bool zombie_heard(void *arg) {
        struct zombie_news      *z = arg;
        static const char *const lost[] = {"e2: lost aagw.aagw.west-east.work",
                                           "e2: lost aagw.aagw.east.unify.work"};
        char                    *text = harness_read_file(z->log, NULL);
        bool                     ok   = text != NULL;

        for (size_t i = 0; ok && i < 2; i++) {
                const char *at = strstr(text, lost[i]);
                if ((!at || (!strstr(at, "the group moved on without this "
                                         "member") &&
                             !strstr(at, "the producer failed") &&
                             !strstr(at, "fenced by the group coordinator"))) &&
                    !strstr(text, "member e2 fenced")) {
                        z->missing = lost[i];
                        ok         = false;
                }
        }
        free(text);
        return ok;
}

static void test_scale(void **state) {
        struct rk   *r = rk_new("rk-scale");
        struct rk_gw e[4], w[5];
        char         err[512];

        *state = r;
        memset(e, 0, sizeof(e));
        memset(w, 0, sizeof(w));
        static const char *const small[] = {
            "offsets.topic.num.partitions=4",
            "transaction.state.log.num.partitions=4", NULL};
        for (int i = 0; i < 2; i++) {
                char copy[32];
                rk_cluster_start_with(r, sites[i], 1, small);
                rk_create_topic(r, sites[i], "clicks", PARTS, 1, 0);
                rk_create_topic(r, sites[i], "clicks.unified", PARTS, 1, 0);
                rk_create_topic(r, sites[i], "profiles", PARTS, 1, 0);
                rk_create_topic(r, sites[i], "profiles.unified", PARTS, 1, 0);
                snprintf(copy, sizeof(copy), "%s.clicks", sites[!i]);
                rk_create_topic(r, sites[i], copy, PARTS, 1, 0);
                snprintf(copy, sizeof(copy), "%s.profiles", sites[!i]);
                rk_create_topic(r, sites[i], copy, PARTS, 1, 0);
        }
        for (int k = 0; k < 3; k++) {
                char name[8];
                snprintf(name, sizeof(name), "e%d", k + 1);
                start(r, &e[k], name, "east");
                snprintf(name, sizeof(name), "w%d", k + 1);
                start(r, &w[k], name, "west");
        }
        char *pe_out, *pe_err, *pw_out, *pw_err;
        harness_proc_t *pe =
            rk_clicks_producer(r, "east", "1", "150", &pe_out, &pe_err);
        harness_proc_t *pw =
            rk_clicks_producer(r, "west", "2", "100", &pw_out, &pw_err);
        profiles_burst(r, "east", 0);
        profiles_burst(r, "west", 0);
        rk_expect_size(r, "west", "east.clicks", 100, 120000);
        rk_expect_size(r, "east", "west.clicks", 100, 120000);
        rk_expect_size(r, "west", "clicks.unified", 200, 120000);
        rk_expect_size(r, "east", "clicks.unified", 200, 120000);
        print_message("# 3 + 3 processes copy and unify at %.1f s\n",
                      rk_elapsed(r));

        /* 1. kill -9 w2: the others take its share within the session
         * timeout plus the restore; then it comes back. */
        int64_t before = rk_size(r, "west", "east.clicks");
        int64_t t      = harness_now_ms();
        stop(r, &w[1], SIGKILL);
        rk_expect_size(r, "west", "east.clicks", before + 1000, 120000);
        print_message("# w2 killed: east.clicks at west grew by 1000 in "
                      "%.1f s\n",
                      (harness_now_ms() - t) / 1000.0);
        start(r, &w[1], NULL, "west");

        /* 2. a fourth process at west. */
        start(r, &w[3], "w4", "west");
        profiles_burst(r, "east", 1);
        profiles_burst(r, "west", 1);

        /* 3. w1 stops cleanly. */
        before = rk_size(r, "west", "clicks.unified");
        stop(r, &w[0], SIGTERM);
        rk_expect_size(r, "west", "clicks.unified", before + 500, 120000);

        /* 4. e2 frozen until east's owner groups went on without it,
         * then woken: a zombie that believes it still owns its share. */
        const char *const groups[] = {"aagw.aagw.west-east.owners",
                                      "aagw.aagw.east.unify"};
        const char *const stages[] = {"west->east", "unify@east"};
        struct aagw_members_conf mc = {.bootstraps  = rk_bs(r, "east"),
                                       .groups      = groups,
                                       .stages      = stages,
                                       .n           = 2,
                                       .interval_ms = 500};
        struct without wo = {.n = 2, .member = "e2"};
        wo.ms = aagw_members_new(&mc, err, sizeof(err));
        wo.g  = calloc(2, sizeof(*wo.g));
        assert_non_null(wo.ms);
        assert_non_null(wo.g);
        harness_proc_signal(e[1].proc, SIGSTOP);
        t = harness_now_ms();
        if (!harness_wait_until(gone_from_groups, &wo, 60000))
                fail_msg("east's owner groups still list e2 60 s after "
                         "SIGSTOP (%s: %s, %zu members)",
                         wo.g[0].stage, wo.g[0].state, wo.g[0].n);
        print_message("# e2 stopped: east's groups went on without it after "
                      "%.1f s\n",
                      (harness_now_ms() - t) / 1000.0);
        before = rk_size(r, "east", "west.clicks");
        rk_expect_size(r, "east", "west.clicks", before + 300, 120000);
        harness_proc_signal(e[1].proc, SIGCONT);
        aagw_members_destroy(wo.ms);
        free(wo.g);
        profiles_burst(r, "east", 2);
        profiles_burst(r, "west", 2);
        /* The zombie runs on (it rejoins): more traffic through all. */
        before = rk_size(r, "east", "clicks.unified");
        rk_expect_size(r, "east", "clicks.unified", before + 500, 120000);
        /* Both of its stages learnt that the group went on without it
         * (awaited: the zombie writes it as it wakes, and traffic through
         * the others may be done before). */
        struct zombie_news zn = {.log = e[1].log};
        if (!harness_wait_until(zombie_heard, &zn, 60000)) {
                rk_gwn_dump_log(&e[1], 40);
                fail_msg("%s does not say: %s ...: the group moved on "
                         "without this member (or the producer failed)",
                         e[1].log, zn.missing);
        }

        /* The end: producers stop, everything settles, processes stop. */
        rk_producer_stop(r, pe, pe_err);
        rk_producer_stop(r, pw, pw_err);
        harness_proc_destroy(pe);
        harness_proc_destroy(pw);
        struct rk_produced east, west;
        rk_produced_parse(pe_out, &east);
        rk_produced_parse(pw_out, &west);
        struct settled s = {.r = r};
        int64_t ne = rk_bag_total(east.acked), nw = rk_bag_total(west.acked);
        s.want[0][0] = nw; /* west.clicks at east */
        s.want[1][0] = ne;
        s.want[0][1] = s.want[1][1] = ne + nw;
        if (!harness_wait_until(settled, &s, 120000))
                fail_msg("not settled 120 s after the producers stopped: "
                         "east: west.clicks %" PRId64 "/%" PRId64
                         ", clicks.unified %" PRId64 "/%" PRId64
                         "; west: east.clicks %" PRId64 "/%" PRId64
                         ", clicks.unified %" PRId64 "/%" PRId64,
                         s.got[0][0], s.want[0][0], s.got[0][1], s.want[0][1],
                         s.got[1][0], s.want[1][0], s.got[1][1],
                         s.want[1][1]);
        struct rk_gw *all[] = {&e[0], &e[1], &e[2], &w[1], &w[2], &w[3]};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                stop(r, all[i], SIGTERM);

        /* The zombie's writes: a read_uncommitted reader may see them. */
        int64_t unc[2], com[2];
        for (int i = 0; i < 2; i++) {
                unc[i] = count(r, sites[i], "clicks.unified",
                               "read_uncommitted");
                com[i] = count(r, sites[i], "clicks.unified", "read_committed");
                print_message("# %s clicks.unified: read_committed %" PRId64
                              ", read_uncommitted %" PRId64 "\n",
                              sites[i], com[i], unc[i]);
        }
        assert_true(rk_verify_clicks(r, &east, &west, "end"));

        /* last-write-wins: both sites agree on every key's winner, the
         * last burst's. */
        char *last[2][KEYS];
        memset(last, 0, sizeof(last));
        for (int i = 0; i < 2; i++) {
                const char *const topics[] = {"profiles.unified", NULL};
                char              name[64];
                struct rk_read    rd;
                snprintf(name, sizeof(name), "read-profiles-%s", sites[i]);
                char *out = rk_read_topics(r, sites[i], name, topics);
                rk_read_parse(out, "profiles.unified", &rd);
                assert_true(rd.done);
                last_per_key(&rd, last[i]);
                rk_read_deinit(&rd);
                free(out);
        }
        int agree = 0;
        for (int j = 0; j < KEYS; j++) {
                if (!last[0][j] || !last[1][j])
                        fail_msg("profiles.unified: key k%d missing at %s", j,
                                 last[0][j] ? "west" : "east");
                if (strcmp(last[0][j], last[1][j]))
                        fail_msg("profiles.unified: k%d is %s at east, %s at "
                                 "west",
                                 j, last[0][j], last[1][j]);
                if (!strstr(last[0][j], ".2."))
                        fail_msg("profiles.unified: k%d ends on %s, not a "
                                 "version of the last burst",
                                 j, last[0][j]);
                agree++;
                free(last[0][j]);
                free(last[1][j]);
        }
        print_message("# profiles.unified: %d of %d keys, the same winner of "
                      "the last burst at both sites; wall %.1f s\n",
                      agree, KEYS, rk_elapsed(r));
        rk_produced_deinit(&east);
        rk_produced_deinit(&west);
        free(pe_out);
        free(pe_err);
        free(pw_out);
        free(pw_err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_scale, rk_teardown)};
        return cmocka_run_group_tests(tests, NULL, NULL);
}
