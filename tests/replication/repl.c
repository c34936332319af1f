/* tests/replication/repl.c: the shared fixture of the replication e2e
 * tests (see repl.h).  Everything here asserts with cmocka, so a helper
 * that fails stops the test at the line that called it. */
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
#include "repl.h"

/* ------------------------------- FIXTURE -------------------------------- */

/* One logical name and its scoped form, both in 'buf'. */
struct repl_name {
        struct repl_name *next;
        const char       *scoped;
        char              buf[]; /* logical NUL scoped NUL */
};


struct repl *repl_new(const char *const *sites, size_t nsites) {
        struct repl *r;
        char         err[512];

        assert_true(nsites <= REPL_MAX_SITES);
        /* kcat is an optional tool: without it these tests skip. */
        if (!harness_kcat_available())
                skip();
        assert_non_null(harness_aagw_bin());
        r = calloc(1, sizeof(*r));
        assert_non_null(r);
        r->hc = harness_clusters_new(sites, nsites, REPL_BROKERS, err,
                                     sizeof(err));
        if (!r->hc) {
                free(r);
                fail_msg("clusters: %s", err);
                return NULL; /* (fail_msg() does not return) */
        }
        for (size_t i = 0; i < nsites; i++)
                r->sites[i] = sites[i];
        r->nsites = nsites;
        /* Real clusters are shared and keep topics: names unique to the
         * run.  The embedded ones are this test's alone: the plain names
         * (records keep their sizes, which the mock's ~5 MiB retention
         * per partition is sized for). */
        r->scope  = harness_clusters_are_real(r->hc) ? harness_unique_name("t")
                                                     : strdup("");
        r->dir    = harness_tmpdir_new("repl");
        r->state  = r->dir ? harness_path_join(r->dir, "state") : NULL;
        if (!r->state || !r->scope) {
                repl_destroy(r, false);
                fail_msg("cannot make a temporary directory");
        }
        return r;
}

void repl_destroy(struct repl *r, bool keep) {
        if (!r)
                return;
        harness_proc_destroy(r->gw);
        for (size_t i = 0; i < REPL_MAX_SITES; i++)
                if (r->wm[i])
                        rd_kafka_destroy(r->wm[i]);
        harness_clusters_destroy(r->hc);
        if (r->dir && (keep || getenv("AAGW_TEST_KEEP")))
                fprintf(stderr, "# kept %s for inspection\n", r->dir);
        else if (r->dir)
                harness_rmtree(r->dir);
        free(r->dir);
        free(r->state);
        free(r->scope);
        while (r->names) {
                struct repl_name *n = r->names;

                r->names = n->next;
                free(n);
        }
        free(r);
}

/* ----------------------------- TOPIC NAMES ------------------------------ */

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);

        return n >= m && !strcmp(s + n - m, suffix);
}

void repl_share_scope(struct repl *r, const struct repl *from) {
        char *scope = strdup(from->scope);

        assert_non_null(scope);
        assert_null(r->names);
        free(r->scope);
        r->scope = scope;
}

const char *repl_gateway_id(const struct repl *r) {
        return *r->scope ? r->scope : "aagw";
}

bool repl_real(const struct repl *r) {
        return harness_clusters_are_real(r->hc);
}

size_t repl_mock_only_tests(struct CMUnitTest *tests, size_t cnt,
                            const char *const *names, const char *why) {
        size_t n = 0;

        if (!getenv("AAGW_TEST_BOOTSTRAPS_EAST"))
                return cnt;
        for (size_t i = 0; i < cnt; i++) {
                size_t k = 0;

                while (names[k] && strcmp(names[k], tests[i].name))
                        k++;
                if (names[k])
                        printf("# skip on real clusters: %s: %s\n",
                               tests[i].name, why);
                else
                        tests[n++] = tests[i];
        }
        if (!n)
                printf("1..0 # SKIP on real clusters: %s\n", why);
        fflush(stdout);
        return n;
}

void repl_mock_only(struct repl *r, const char *why) {
        if (!repl_real(r))
                return;
        print_message("# skip on real clusters: %s\n", why);
        skip();
}

const char *repl_topic(struct repl *r, const char *name) {
        const char       *rest = name;
        struct repl_name *n;
        size_t            len  = strlen(name), cut, need;
        bool              more = true;

        if (!*r->scope || strstr(name, r->scope) || !strncmp(name, "__", 2) ||
            !strncmp(name, "aagw.", 5) || ends_with(name, ".internal") ||
            ends_with(name, "heartbeats"))
                return name;
        for (n = r->names; n; n = n->next)
                if (!strcmp(n->buf, name))
                        return n->scoped;
        /* Skip the site prefixes: "west.east.clicks" -> "clicks". */
        while (more) {
                more = false;
                for (size_t i = 0; i < r->nsites; i++) {
                        size_t sl = strlen(r->sites[i]);
                        size_t pl = *r->sep ? strlen(r->sep) : 1;
                        bool   is_sep =
                            *r->sep ? !strncmp(rest + sl, r->sep, pl)
                                    : rest[sl] && strchr("._-", rest[sl]);

                        if (!strncmp(rest, r->sites[i], sl) && is_sep &&
                            rest[sl + pl]) {
                                rest += sl + pl;
                                more = true;
                                break;
                        }
                }
        }
        cut  = (size_t)(rest - name);
        need = len + 1 + len + strlen(r->scope) + 2;
        n    = malloc(sizeof(*n) + need);
        assert_non_null(n);
        memcpy(n->buf, name, len + 1);
        n->scoped = n->buf + len + 1;
        snprintf(n->buf + len + 1, need - len - 1, "%.*s%s-%s", (int)cut, name,
                 r->scope, rest);
        n->next  = r->names;
        r->names = n;
        return n->scoped;
}

const char *repl_bs(struct repl *r, const char *alias) {
        const char *bs = harness_clusters_bootstraps(r->hc, alias);

        assert_non_null(bs);
        return bs;
}

void repl_set_brokers(struct repl *r, const char *alias, bool up) {
        rd_kafka_mock_cluster_t *mc =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), alias);

        assert_non_null(mc);
        for (int b = 1; b <= REPL_BROKERS; b++)
                assert_int_equal(up ? rd_kafka_mock_broker_set_up(mc, b)
                                    : rd_kafka_mock_broker_set_down(mc, b),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
}

void repl_set_rtt(struct repl *r, const char *alias, int rtt_ms) {
        rd_kafka_mock_cluster_t *mc =
            aagw_sandbox_mock(harness_clusters_sandbox(r->hc), alias);

        assert_non_null(mc);
        assert_int_equal(rd_kafka_mock_broker_set_rtt(mc, -1, rtt_ms),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
}

void repl_create_topic(struct repl *r, const char *alias, const char *topic,
                       int parts) {
        topic = repl_topic(r, topic);
        if (harness_clusters_create_topic(r->hc, alias, topic, parts, r->errstr,
                                          sizeof(r->errstr)))
                fail_msg("create %s at %s: %s", topic, alias ? alias : "all",
                         r->errstr);
}

/* ------------------------------- GATEWAY -------------------------------- */

void repl_gw_start(struct repl *r, const char *const *extra) {
        const char *argv[192];
        char        props[REPL_MAX_SITES][2][160];
        char        topics[200];
        size_t      a = 0;

        assert_null(r->gw);
        argv[a++] = harness_aagw_bin();
        argv[a++] = "run";
        for (size_t i = 0; i < r->nsites; i++) {
                /* The cluster as the gateway sees it: its secured
                 * listener and settings, if it has one. */
                size_t n = harness_clusters_gw_args(
                    r->hc, r->sites[i], argv + a,
                    sizeof(argv) / sizeof(argv[0]) - a - 64);

                assert_true(n > 0);
                a += n;
                /* A SIGKILLed member blocks the group until its session
                 * times out: keep that short. */
                snprintf(props[i][0], sizeof(props[i][0]),
                         "clusters.%s.properties.consumer.session.timeout.ms="
                         "3000",
                         r->sites[i]);
                snprintf(props[i][1], sizeof(props[i][1]),
                         "clusters.%s.properties.consumer.heartbeat.interval."
                         "ms=500",
                         r->sites[i]);
                argv[a++] = "--set";
                argv[a++] = props[i][0];
                argv[a++] = "--set";
                argv[a++] = props[i][1];
        }
        argv[a++] = "--state-dir";
        argv[a++] = r->state;
        argv[a++] = "--set";
        argv[a++] = "replication.refresh_topics_interval=1s";
        /* Replication alone: no unified outputs among the topics the
         * tests list and count. */
        argv[a++] = "--unify";
        argv[a++] = "off";
        /* The replication tests count records and stop timings exactly:
         * no heartbeat records among them (tests/offsets turns them on). */
        argv[a++] = "--set";
        argv[a++] = "mm2.heartbeats_interval=0s";
        if (*r->scope) {
                /* This test's topics only (see repl_topic()): on shared
                 * clusters the others belong to other tests. */
                snprintf(topics, sizeof(topics), "replication.topics=.*%s.*",
                         r->scope);
                argv[a++] = "--set";
                argv[a++] = topics;
        }
        /* The gateway id names its consumer groups (aagw.<id>.<flow>):
         * one per test on shared clusters, or the tests' gateways would
         * share groups. */
        argv[a++] = "--gateway-id";
        argv[a++] = repl_gateway_id(r);
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[a++] = extra[i];
        }
        argv[a] = NULL;

        r->gw_runs++;
        snprintf(r->log, sizeof(r->log), "%s/gw-%d.log", r->dir, r->gw_runs);
        r->gw = harness_proc_spawn(argv, NULL, r->log, r->errstr,
                                   sizeof(r->errstr));
        if (!r->gw)
                fail_msg("aagw: %s", r->errstr);
}

/* A sanitizer build of aagw reports into its log (UBSan does not even
 * stop): any report fails the test, whatever the exit code was. */
static void check_sanitizers(struct repl *r) {
        static const char *const marks[] = {
            "runtime error:", "AddressSanitizer", "LeakSanitizer"};
        char *text = repl_log_text(r);

        const char *at = NULL;

        for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
                const char *p = strstr(text, marks[i]);
                if (p && (!at || p < at))
                        at = p;
        }
        if (at) {
                /* The whole report (the log goes with the test's temp
                 * dir): its first lines say what leaked, from where. */
                while (at > text && at[-1] != '\n')
                        at--;
                fprintf(stderr, "# ---- %s, from the sanitizer report ----\n%s",
                        r->log, at);
                free(text);
                fail_msg("aagw: sanitizer report in %s", r->log);
        }
        free(text);
}

int repl_gw_stop(struct repl *r, int sig, int timeout_ms) {
        int status, code = -1;

        assert_non_null(r->gw);
        harness_proc_signal(r->gw, sig);
        if (harness_proc_wait(r->gw, timeout_ms, &status) == AAGW_OK)
                code = harness_exit_code(status);
        harness_proc_destroy(r->gw);
        r->gw = NULL;
        check_sanitizers(r);
        /* Most callers expect 0: what the process said last shows why
         * not (a CI failure keeps only the test's stderr). */
        if (code != 0) {
                fprintf(stderr, "# aagw exit %d after signal %d; its log:\n",
                        code, sig);
                repl_dump_log(r, 25);
        }
        return code;
}

bool repl_gw_running(struct repl *r) {
        return r->gw && harness_proc_wait(r->gw, 0, NULL) == AAGW_ERR_TIMEOUT;
}

int repl_gw_wait_exit(struct repl *r, int timeout_ms) {
        int status;

        assert_non_null(r->gw);
        if (harness_proc_wait(r->gw, timeout_ms, &status) != AAGW_OK)
                return -1;
        harness_proc_destroy(r->gw);
        r->gw = NULL;
        check_sanitizers(r);
        return harness_exit_code(status);
}

char *repl_log_text(struct repl *r) {
        char *text = r->log[0] ? harness_read_file(r->log, NULL) : NULL;

        return text ? text : strdup("");
}

bool repl_log_has(struct repl *r, const char *what) {
        char *text = repl_log_text(r);
        bool  has  = strstr(text, what) != NULL;

        free(text);
        return has;
}

struct log_want {
        struct repl *r;
        const char  *what;
};

static bool log_has(void *arg) {
        struct log_want *w = arg;
        return repl_log_has(w->r, w->what);
}

void repl_expect_log(struct repl *r, const char *what, int timeout_ms) {
        struct log_want w = {r, what};

        if (!harness_wait_until(log_has, &w, timeout_ms)) {
                repl_dump_log(r, 30);
                fail_msg("%s lacks: %s", r->log, what);
        }
}

void repl_dump_log(struct repl *r, int lines) {
        char       *text = repl_log_text(r);
        const char *p    = text + strlen(text);
        int         n    = 0;

        while (p > text && n <= lines)
                if (*--p == '\n')
                        n++;
        fprintf(stderr, "# ---- %s (last %d lines) ----\n%s\n", r->log, lines,
                p);
        free(text);
}

/* ------------------------------ WATERMARKS ------------------------------ */

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac,
                      const char *buf) {
        (void)rk;
        (void)level;
        (void)fac;
        (void)buf;
}

static rd_kafka_t *wm_client(struct repl *r, const char *alias) {
        rd_kafka_conf_t *conf;
        size_t           i;

        for (i = 0; i < r->nsites; i++)
                if (!strcmp(r->sites[i], alias))
                        break;
        assert_true(i < r->nsites);
        if (r->wm[i])
                return r->wm[i];
        conf = aagw_kafka_conf_new(repl_bs(r, alias), "test-watermarks",
                                   r->errstr, sizeof(r->errstr));
        assert_non_null(conf);
        /* Broker outages are injected on purpose: keep stderr readable. */
        rd_kafka_conf_set_log_cb(conf, quiet_log);
        r->wm[i] =
            rd_kafka_new(RD_KAFKA_PRODUCER, conf, r->errstr, sizeof(r->errstr));
        assert_non_null(r->wm[i]);
        return r->wm[i];
}

int64_t repl_size(struct repl *r, const char *alias, const char *topic) {
        rd_kafka_t                     *rk    = wm_client(r, alias);
        const struct rd_kafka_metadata *md    = NULL;
        int                             parts = 0;
        int64_t                         sum   = 0;

        topic = repl_topic(r, topic);
        /* All topics: a metadata request naming the topic creates it. */
        if (rd_kafka_metadata(rk, 1, NULL, &md, 10000))
                return -1;
        for (int i = 0; i < md->topic_cnt; i++)
                if (!strcmp(md->topics[i].topic, topic) && !md->topics[i].err)
                        parts = md->topics[i].partition_cnt;
        rd_kafka_metadata_destroy(md);
        for (int p = 0; p < parts; p++) {
                int64_t lo, hi;

                if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi,
                                                     10000))
                        return -1;
                sum += hi - lo;
        }
        return sum;
}

struct size_cond {
        struct repl *r;
        const char  *alias, *topic;
        int64_t      want, last;
};

static bool size_reached(void *arg) {
        struct size_cond *c = arg;

        c->last = repl_size(c->r, c->alias, c->topic);
        return c->last >= c->want;
}

bool repl_wait_size(struct repl *r, const char *alias, const char *topic,
                    int64_t want, int timeout_ms) {
        struct size_cond c = {r, alias, topic, want, 0};

        return harness_wait_until(size_reached, &c, timeout_ms);
}

void repl_expect_size(struct repl *r, const char *alias, const char *topic,
                      int64_t want, int timeout_ms) {
        struct size_cond c = {r, alias, topic, want, 0};

        if (!harness_wait_until(size_reached, &c, timeout_ms)) {
                repl_dump_log(r, 40);
                fail_msg("%s at %s holds %" PRId64 " records after %d ms, "
                         "expected %" PRId64,
                         topic, alias, c.last, timeout_ms, want);
        }
}

bool repl_topic_listed(struct repl *r, const char *alias, const char *topic) {
        int n = harness_kcat_partition_cnt(repl_bs(r, alias),
                                           repl_topic(r, topic),
                                           REPL_KCAT_TIMEOUT_MS, r->errstr,
                                           sizeof(r->errstr));

        if (n < 0)
                fail_msg("kcat -L at %s: %s", alias, r->errstr);
        return n > 0;
}

/* ------------------------------- PRODUCE -------------------------------- */

void repl_produce(struct repl *r, const char *alias, const char *topic,
                  const char *tag, int from, int cnt, int keys,
                  const char *const *headers, int partition) {
        harness_record_t *recs = calloc((size_t)cnt, sizeof(*recs));
        char(*kv)[2][48]       = calloc((size_t)cnt, sizeof(*kv));

        assert_non_null(recs);
        assert_non_null(kv);
        topic = repl_topic(r, topic);
        for (int i = 0; i < cnt; i++) {
                int n = from + i;

                snprintf(kv[i][0], sizeof(kv[i][0]), "k%d",
                         keys ? n % keys : 0);
                snprintf(kv[i][1], sizeof(kv[i][1]), "%s-%07d", tag, n);
                recs[i].key   = keys ? kv[i][0] : NULL;
                recs[i].value = kv[i][1];
        }
        if (harness_kcat_produce(repl_bs(r, alias), topic, recs, (size_t)cnt,
                                 headers, partition, REPL_KCAT_TIMEOUT_MS,
                                 r->errstr, sizeof(r->errstr)))
                fail_msg("produce to %s at %s: %s", topic, alias, r->errstr);
        free(recs);
        free(kv);
}

struct repl_paced repl_pace(struct repl *r, const char *alias,
                            const char *topic, int partition,
                            const char *to_alias, const char *to_topic,
                            int *sent, int batch, int each_ms, int window_ms,
                            bool (*done)(struct repl *r)) {
        struct repl_paced p     = {0};
        int64_t           until = harness_now_ms() + window_ms;

        while (!done(r) && harness_now_ms() < until) {
                repl_produce(r, alias, topic, "c", *sent, batch, 0, NULL,
                             partition);
                *sent += batch;
                int64_t t0 = harness_now_ms();
                if (!repl_wait_size(r, to_alias, to_topic, *sent, each_ms))
                        p.slow++;
                int64_t took = harness_now_ms() - t0;
                if (took > p.worst_ms)
                        p.worst_ms = took;
                p.batches++;
        }
        return p;
}

/* ------------------------------- RECORDS -------------------------------- */

void repl_read(struct repl *r, const char *alias, const char *topic,
               struct rrecs *out) {
        memset(out, 0, sizeof(*out));
        topic = repl_topic(r, topic);
        snprintf(out->topic, sizeof(out->topic), "%s", topic);
        if (harness_kcat_consume(repl_bs(r, alias), topic,
                                 "%p|%o|%T|%k|%s|%h\n", REPL_KCAT_TIMEOUT_MS,
                                 &out->lines, r->errstr, sizeof(r->errstr)))
                fail_msg("read %s at %s: %s", topic, alias, r->errstr);
        out->v = calloc(out->lines.cnt + 1, sizeof(*out->v));
        assert_non_null(out->v);
        for (size_t i = 0; i < out->lines.cnt; i++) {
                char        *f[6], *s = out->lines.v[i];
                struct rrec *rec = &out->v[i];

                /* Five '|' split the six fields; headers may hold more. */
                for (int k = 0; k < 5; k++) {
                        char *bar = strchr(s, '|');

                        if (!bar)
                                fail_msg("%s at %s: bad kcat line '%s'", topic,
                                         alias, out->lines.v[i]);
                        f[k] = s;
                        *bar = '\0';
                        s    = bar + 1;
                }
                f[5]      = s;
                rec->p    = (int32_t)atoi(f[0]);
                rec->o    = strtoll(f[1], NULL, 10);
                rec->ts   = strtoll(f[2], NULL, 10);
                rec->key  = f[3];
                rec->val  = f[4];
                rec->hdrs = f[5];
        }
        out->cnt = out->lines.cnt;
}

void rrecs_deinit(struct rrecs *rs) {
        harness_lines_deinit(&rs->lines);
        free(rs->v);
        memset(rs, 0, sizeof(*rs));
}

int rrec_hdr(const struct rrec *rec, const char *name, char *buf, size_t size) {
        size_t      nlen = strlen(name);
        const char *s    = rec->hdrs;
        int         cnt  = 0;

        if (buf && size)
                buf[0] = '\0';
        while (*s) {
                size_t len = strcspn(s, ",");

                if (len > nlen && !strncmp(s, name, nlen) && s[nlen] == '=') {
                        if (cnt++ == 0 && buf)
                                snprintf(buf, size, "%.*s",
                                         (int)(len - nlen - 1), s + nlen + 1);
                }
                s += len;
                if (*s == ',')
                        s++;
        }
        return cnt;
}

int rrec_prov(const struct rrec *rec, struct rprov *out) {
        char        v[4096];
        const char *f[5];
        size_t      len[5], k = 0;
        int         cnt = rrec_hdr(rec, "aagw.prov", v, sizeof(v));
        const char *s   = v;

        memset(out, 0, sizeof(*out));
        if (cnt != 1 || strncmp(v, "1;", 2))
                return cnt;
        s += 2;
        /* PATH ; SRC ; HLC ; then the id, which may hold ';' */
        for (; k < 3; k++) {
                const char *semi = strchr(s, ';');
                if (!semi)
                        return cnt;
                f[k]   = s;
                len[k] = (size_t)(semi - s);
                s      = semi + 1;
        }
        f[3]   = s;
        len[3] = strlen(s);
        snprintf(out->path, sizeof(out->path), "%.*s", (int)len[0], f[0]);
        snprintf(out->origin, sizeof(out->origin), "%.*s",
                 (int)strcspn(out->path, ">"), out->path);
        snprintf(out->src, sizeof(out->src), "%.*s", (int)len[1], f[1]);
        snprintf(out->hlc, sizeof(out->hlc), "%.*s", (int)len[2], f[2]);
        snprintf(out->id_raw, sizeof(out->id_raw), "%.*s", (int)len[3], f[3]);
        if (len[3])
                snprintf(out->id, sizeof(out->id), "%s", out->id_raw);
        else
                snprintf(out->id, sizeof(out->id), "%s:%s", out->origin,
                         out->src);
        return cnt;
}

void rrec_hdrs_without(const struct rrec *rec, const char *prefix, char *buf,
                       size_t size) {
        size_t      plen = strlen(prefix), n = 0;
        const char *s = rec->hdrs;

        buf[0] = '\0';
        while (*s) {
                size_t len = strcspn(s, ",");

                if (strncmp(s, prefix, plen)) {
                        int w = snprintf(buf + n, size - n, "%s%.*s",
                                         n ? "," : "", (int)len, s);
                        assert_true(w >= 0 && (size_t)w < size - n);
                        n += (size_t)w;
                }
                s += len;
                if (*s == ',')
                        s++;
        }
}

size_t rrecs_count_tag(const struct rrecs *rs, const char *tag) {
        size_t tlen = strlen(tag), n = 0;

        for (size_t i = 0; i < rs->cnt; i++)
                if (!strncmp(rs->v[i].val, tag, tlen) &&
                    rs->v[i].val[tlen] == '-')
                        n++;
        return n;
}

static int by_partition_offset(const void *a, const void *b) {
        const struct rrec *x = *(const struct rrec *const *)a;
        const struct rrec *y = *(const struct rrec *const *)b;

        if (x->p != y->p)
                return x->p < y->p ? -1 : 1;
        return x->o < y->o ? -1 : x->o > y->o;
}

/* Pointers to the records of 'rs' (those with provenance origin 'origin'
 * if not NULL), sorted by partition then offset. */
static const struct rrec **sorted(const struct rrecs *rs, const char *origin,
                                  size_t *cntp) {
        const struct rrec **v = calloc(rs->cnt + 1, sizeof(*v));
        size_t              n = 0;
        struct rprov        pv;

        assert_non_null(v);
        for (size_t i = 0; i < rs->cnt; i++) {
                if (origin) {
                        rrec_prov(&rs->v[i], &pv);
                        if (strcmp(pv.origin, origin))
                                continue;
                }
                v[n++] = &rs->v[i];
        }
        qsort(v, n, sizeof(*v), by_partition_offset);
        *cntp = n;
        return v;
}

void repl_expect_clicks_copied(struct repl *r, const char *from,
                               const char *to, int64_t want) {
        struct rrecs src, copy;
        char         remote[80], path[80];

        snprintf(remote, sizeof(remote), "%s.clicks", from);
        snprintf(path, sizeof(path), "%s>%s", from, to);
        repl_read(r, from, "clicks", &src);
        repl_read(r, to, remote, &copy);
        assert_int_equal(src.cnt, want);
        repl_check_copy(&src, "clicks", from, &copy, path);
        assert_int_equal(copy.cnt, want);
        rrecs_deinit(&src);
        rrecs_deinit(&copy);
}

void repl_check_copy(const struct rrecs *src, const char *src_topic,
                     const char *origin, const struct rrecs *dst,
                     const char *path) {
        size_t              ns, nd;
        const struct rrec **s = sorted(src, NULL, &ns);
        const struct rrec **d = sorted(dst, origin, &nd);
        char                want[512], got[512], a[4096], b[4096];
        char                all[4096 + 600];
        /* The records name the topic they were read from (scoped). */
        const char *src_name = src->topic[0] ? src->topic : src_topic;

        if (src->topic[0] && !ends_with(src->topic, src_topic))
                fail_msg("check_copy: %s was read from %s", src_topic,
                         src->topic);
        /* Every local record is in the source read; every copy in dst. */
        for (size_t i = 0; i < ns; i++)
                assert_int_equal(rrec_hdr(s[i], "aagw.prov", NULL, 0), 0);
        if (ns != nd)
                fail_msg("%s of %s: %zu source records, %zu copies", src_topic,
                         origin, ns, nd);
        for (size_t i = 0; i < ns; i++) {
                const struct rrec *x = s[i], *y = d[i];

                /* Same partition and, position by position, the same
                 * record: the copies keep the source order. */
                if (x->p != y->p || strcmp(x->val, y->val) ||
                    strcmp(x->key, y->key) || x->ts != y->ts)
                        fail_msg("%s of %s: record %zu: source [%d]@%" PRId64
                                 " %s=%s ts %" PRId64 ", copy [%d]@%" PRId64
                                 " %s=%s ts %" PRId64,
                                 src_topic, origin, i, (int)x->p, x->o, x->key,
                                 x->val, x->ts, (int)y->p, y->o, y->key, y->val,
                                 y->ts);
                if (i > 0 && d[i - 1]->p == y->p)
                        assert_true(d[i - 1]->o < y->o);
                /* Original headers intact and first. */
                rrec_hdrs_without(x, "aagw.", a, sizeof(a));
                rrec_hdrs_without(y, "aagw.", b, sizeof(b));
                assert_string_equal(a, b);
                assert_string_equal(a, x->hdrs);
                assert_int_equal(strncmp(y->hdrs, x->hdrs, strlen(x->hdrs)), 0);
                /* Provenance: one header, exactly this value, after the
                 * producer's headers, and no other aagw.* header. */
                assert_int_equal(rrec_hdr(y, "aagw.prov", got, sizeof(got)), 1);
                snprintf(want, sizeof(want), "1;%s;%s:%d:%" PRId64 ";%" PRId64
                         ":0;", path, src_name, (int)x->p, x->o, x->ts);
                assert_string_equal(got, want);
                snprintf(all, sizeof(all), "%s%saagw.prov=%s", a, *a ? "," : "",
                         want);
                assert_string_equal(y->hdrs, all);
        }
        free(s);
        free(d);
}

/* -------------------------------- TOPICS -------------------------------- */

void repl_expect_topics(struct repl *r, const char *alias,
                        const char *const *want, size_t nwant) {
        const char      *argv[] = {harness_kcat_bin(), "-L", "-q", "-b",
                                   repl_bs(r, alias),  NULL};
        harness_output_t o;
        harness_lines_t  lines;
        size_t           found = 0;

        if (harness_run(argv, NULL, 0, REPL_KCAT_TIMEOUT_MS, &o, r->errstr,
                        sizeof(r->errstr)) ||
            harness_exit_code(o.status) != 0)
                fail_msg("kcat -L at %s: %s %s", alias, r->errstr,
                         o.err ? o.err : "");
        assert_int_equal(harness_lines_split(o.out, &lines), 0);
        /* '  topic "clicks" with 8 partitions:' */
        for (size_t i = 0; i < lines.cnt; i++) {
                const char *q = strstr(lines.v[i], "topic \"");
                size_t      len, k;

                if (!q)
                        continue;
                q += strlen("topic \"");
                len = strcspn(q, "\"");
                /* Kafka's and aagw's own topics are not replicas. */
                if (!strncmp(q, "__", 2) || !strncmp(q, "aagw.", 5))
                        continue;
                /* Only this test's topics: real clusters are shared. */
                if (!memmem(q, len, r->scope, strlen(r->scope)))
                        continue;
                /* Nor are MM2's: heartbeats (and their copies) and the
                 * offset-syncs / checkpoints topics. */
                if ((len >= 10 && !strncmp(q + len - 10, "heartbeats", 10)) ||
                    (len >= 9 && !strncmp(q + len - 9, ".internal", 9)))
                        continue;
                for (k = 0; k < nwant; k++) {
                        const char *w = repl_topic(r, want[k]);

                        if (strlen(w) == len && !strncmp(w, q, len))
                                break;
                }
                if (k == nwant)
                        fail_msg("unexpected topic %.*s at %s", (int)len, q,
                                 alias);
                found++;
        }
        if (found != nwant)
                fail_msg("%zu of %zu expected topics at %s:\n%s", found, nwant,
                         alias, o.out);
        harness_lines_deinit(&lines);
        harness_output_deinit(&o);
}

int repl_setup(void **state) {
        *state = NULL;
        return 0;
}

int repl_teardown(void **state) {
        repl_destroy(*state, false);
        return 0;
}
