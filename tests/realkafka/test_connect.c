/*
 * tests/realkafka/test_connect.c: what aagw says when it cannot log in to
 * a secured cluster, or may not do there what it needs, before it runs
 * (`aagw config check --connect`) and while it runs (the access registry
 * on the ACCESS log lines, /healthz, /status and /metrics).
 *
 * One launcher, two single-node clusters with a secured listener each
 * beside their plaintext one: east SASL_SSL with SCRAM-SHA-512 (users
 * aagw, a super user, and denied, without ACLs), west SSL with client
 * certificates (mutual TLS).  Every case changes the settings of one
 * cluster; the other keeps the launcher's good ones:
 *
 *   wrong password, unknown user, unsupported sasl.mechanism (east);
 *   a CA that did not sign the brokers' certificates (made here with
 *   openssl), no client certificate, a client certificate of that CA,
 *   PLAINTEXT against the TLS listener (west); TLS against east's
 *   plaintext listener; the user denied.
 *
 * `config check --connect` passes with the good pair (exit 0, each
 * check's line), and fails (exit 1) naming the cluster and the cause for
 * each login case, and naming each denied operation for denied.  Then
 * one `aagw run` per case, all at once: each must log an ERROR of
 * facility ACCESS naming the cluster and the cause (the words of
 * docs/security.md's table), answer /healthz 503 naming the cluster and
 * the cause (not "cannot reach"), show the cause in /status clusters[]
 * and aagw_cluster_access_failing{cluster,cause} 1 within 10 s of its
 * start (its first request is the refused one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rk.h"

#define WITHIN_MS 10000

/* A way to get it wrong: the settings of 'alias' from the launcher's
 * file ('base': good or denied), without the keys in 'drop', with the
 * lines of 'set' added; on the plaintext listener if 'plain'. */
struct kase {
        const char *name, *alias;
        bool        denied, plain, gw_only;
        const char *drop[3];
        const char *set;
        const char *cause; /* /status and the metric's name for it */
        const char *words; /* in the ACCESS line and /healthz */
};

static const struct kase cases[] = {
    {"wrong password", "east", false, false, false, {"sasl.password"},
     "sasl.password=not-the-password", "authentication",
     "authentication failed: login refused: wrong sasl.username or "
     "sasl.password"},
    {"unknown user", "east", false, false, false, {"sasl.username"},
     "sasl.username=nobody", "authentication",
     "authentication failed: login refused: wrong sasl.username or "
     "sasl.password"},
    {"unsupported sasl.mechanism", "east", false, false, false,
     {"sasl.mechanism"}, "sasl.mechanism=SCRAM-SHA-256", "authentication",
     "authentication failed: the broker does not offer this sasl.mechanism"},
    {"wrong CA", "west", false, false, false, {"ssl.ca.location"},
     "ssl.ca.location=%1$s", "tls",
     "TLS handshake failed: the broker's certificate is not signed by a CA "
     "aagw trusts"},
    {"no client certificate", "west", false, false, false,
     {"ssl.certificate.location", "ssl.key.location"}, NULL, "tls",
     "TLS handshake failed: the broker requires a client certificate and "
     "aagw sends none"},
    {"untrusted client certificate", "west", false, false, false,
     {"ssl.certificate.location", "ssl.key.location"},
     "ssl.certificate.location=%2$s\nssl.key.location=%3$s", "tls",
     "TLS handshake failed: the broker rejected aagw's client certificate"},
    {"PLAINTEXT against TLS", "west", false, false, false,
     {"security.protocol", "ssl."}, "security.protocol=PLAINTEXT",
     "security_protocol",
     "security.protocol does not match the listener: the listener speaks "
     "TLS or SASL"},
    {"TLS against plaintext", "east", false, true, false,
     {"sasl.", "security.protocol"}, "security.protocol=SSL",
     "security_protocol",
     "security.protocol does not match the listener: the listener does not "
     "speak TLS"},
    {"user denied", "east", true, false, true, {NULL}, NULL, "authorization",
     "not authorized: "},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct gw {
        struct rk_gw g;
        const struct kase *k;
        int64_t      t0;
        int64_t      seen[4]; /* ms after t0: log, healthz, status, metric */
        char         health[1024];
};

struct fx {
        struct rk          *r;
        harness_proc_t     *launcher;
        harness_clusters_t *hc;
        char               *denied_props; /* east's, user denied */
        char               *ca;           /* a CA of nobody's */
        char *cert, *key; /* a client certificate it signed, its key */
        char               *props[NCASES];
        struct gw           gw[NCASES];
};

static int teardown(void **state) {
        struct fx *f = *state;

        if (!f)
                return 0;
        for (size_t i = 0; i < NCASES; i++) {
                if (f->gw[i].g.proc) {
                        harness_proc_signal(f->gw[i].g.proc, SIGKILL);
                        harness_proc_destroy(f->gw[i].g.proc);
                }
                free(f->props[i]);
        }
        harness_clusters_destroy(f->hc);
        if (f->launcher) {
                harness_proc_signal(f->launcher, SIGTERM);
                if (harness_proc_wait(f->launcher, 60000, NULL))
                        harness_proc_signal(f->launcher, SIGKILL);
                harness_proc_destroy(f->launcher);
        }
        free(f->denied_props);
        free(f->ca);
        free(f->cert);
        free(f->key);
        rk_destroy(f->r);
        free(f);
        *state = NULL;
        return 0;
}

/* ------------------------------------------------------------ CLUSTERS -- */

struct ready {
        struct fx  *f;
        const char *bs_file;
        bool        died;
};

static bool ready(void *arg) {
        struct ready *a = arg;

        if (harness_proc_wait(a->f->launcher, 0, NULL) != AAGW_ERR_TIMEOUT) {
                a->died = true;
                return true;
        }
        return harness_wait_file(a->bs_file, 0);
}

static void start_clusters(struct fx *f) {
        char       *bs_file = rk_path(f->r, "bootstraps");
        char       *env     = rk_path(f->r, "clusters.env");
        char       *log     = rk_path(f->r, "launcher.log");
        char       *dir     = rk_path(f->r, "kafka");
        char        script[4096];
        const char *aliases[] = {"east", "west"};
        int64_t     t = harness_now_ms();
        const char *argv[20];
        size_t      a = 0;

        argv[a++] = script;
        for (const char *const *w = (const char *const[]){
                 "--heap", "256", "--security", "east=scram-sha-512",
                 "--security", "west=mtls", NULL};
             *w; w++)
                argv[a++] = *w;
        argv[a++] = "--dir";
        argv[a++] = dir;
        argv[a++] = "--env-file";
        argv[a++] = env;
        argv[a++] = "--bootstraps-file";
        argv[a++] = bs_file;
        if (getenv("AAGW_TEST_KEEP"))
                argv[a++] = "--keep";
        argv[a++] = "east";
        argv[a++] = "west";
        argv[a]   = NULL;
        snprintf(script, sizeof(script), "%s/scripts/kafka-clusters",
                 f->r->src);
        f->launcher = harness_proc_spawn(argv, log, log, f->r->errstr,
                                         sizeof(f->r->errstr));
        if (!f->launcher)
                fail_msg("kafka-clusters: %s", f->r->errstr);
        struct ready ra = {f, bs_file, false};
        if (!harness_wait_until(ready, &ra, 180000) || ra.died) {
                char *text = harness_read_file(log, NULL);
                fail_msg("the clusters did not start (%s):\n%s",
                         ra.died ? "the launcher exited" : "180 s",
                         text ? text : "");
        }
        f->hc = harness_clusters_load(env, aliases, 2, f->r->errstr,
                                      sizeof(f->r->errstr));
        if (!f->hc)
                fail_msg("%s", f->r->errstr);
        /* The user without ACLs: a line of the same file. */
        char       *text = harness_read_file(env, NULL);
        const char *k    = "AAGW_TEST_DENIED_PROPS_EAST=";
        char       *p    = text ? strstr(text, k) : NULL;
        if (!p)
                fail_msg("%s: no %s", env, k);
        p += strlen(k);
        f->denied_props = strndup(p, strcspn(p, "\n"));
        free(text);
        print_message("# east (scram-sha-512) and west (mtls) ready in "
                      "%.1f s\n",
                      (double)(harness_now_ms() - t) / 1000.0);
        free(bs_file);
        free(env);
        free(log);
        free(dir);
}

static void openssl(struct fx *f, const char *const *argv) {
        harness_output_t o;

        memset(&o, 0, sizeof(o));
        if (harness_run(argv, NULL, 0, 30000, &o, f->r->errstr,
                        sizeof(f->r->errstr)) ||
            harness_exit_code(o.status))
                fail_msg("openssl %s: %s %s", argv[1], f->r->errstr,
                         o.err ? o.err : "");
        harness_output_deinit(&o);
}

/* A CA that signed nothing the brokers present, and a client
 * certificate it signed (the brokers trust the launcher's CA only). */
static void make_other_ca(struct fx *f) {
        char *cakey = rk_path(f->r, "other-ca.key");
        char *csr   = rk_path(f->r, "other-client.csr");

        f->ca   = rk_path(f->r, "other-ca.pem");
        f->cert = rk_path(f->r, "other-client.pem");
        f->key  = rk_path(f->r, "other-client.key");
        openssl(f, (const char *const[]){
                       "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                       "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                       cakey, "-out", f->ca, "-days", "1", "-subj",
                       "/CN=not-the-brokers-ca", "-addext",
                       "basicConstraints=critical,CA:TRUE", NULL});
        openssl(f, (const char *const[]){
                       "openssl", "req", "-newkey", "ec", "-pkeyopt",
                       "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                       f->key, "-out", csr, "-subj", "/CN=aagw", NULL});
        openssl(f, (const char *const[]){
                       "openssl", "x509", "-req", "-in", csr, "-CA", f->ca,
                       "-CAkey", cakey, "-set_serial", "7", "-days", "1",
                       "-out", f->cert, NULL});
        free(cakey);
        free(csr);
}

/* The settings file of case 'k'. */
static char *case_props(struct fx *f, const struct kase *k, size_t idx) {
        const char *base = k->denied ? f->denied_props
                                     : harness_clusters_gw_props(f->hc,
                                                                 k->alias);
        char       *text = harness_read_file(base, NULL), *save = NULL;
        char        out[4096] = "", name[64], set[700];

        assert_non_null(text);
        for (char *l = strtok_r(text, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save)) {
                bool drop = false;
                for (int d = 0; d < 3 && k->drop[d]; d++)
                        drop |= !strncmp(l, k->drop[d], strlen(k->drop[d]));
                if (!drop)
                        snprintf(out + strlen(out), sizeof(out) - strlen(out),
                                 "%s\n", l);
        }
        if (k->set) {
                snprintf(set, sizeof(set), k->set, f->ca, f->cert, f->key);
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s\n",
                         set);
        }
        free(text);
        snprintf(name, sizeof(name), "case-%zu.properties", idx);
        return rk_write(f->r, name, out);
}

/* --------------------------------------------------------------- AAGW -- */

/* The aagw words for both clusters: the launcher's settings, those of
 * 'k' (may be NULL) for its cluster.  Stored in 'argv' from 'a'; the
 * strings live in 'store' (freed by the caller with free_words()). */
static size_t cluster_words(struct fx *f, const struct kase *k,
                            const char *props, const char **argv, size_t a,
                            char **store, size_t *nstore) {
        const char *aliases[] = {"east", "west"};

        for (int i = 0; i < 2; i++) {
                const char *al = aliases[i];
                if (!k || strcmp(k->alias, al)) {
                        a += harness_clusters_gw_args(f->hc, al, argv + a, 32);
                        continue;
                }
                char *text = harness_read_file(props, NULL), *save = NULL;
                char  w[1200];
                assert_non_null(text);
                snprintf(w, sizeof(w), "%s=%s", al,
                         k->plain ? harness_clusters_bootstraps(f->hc, al)
                                  : harness_clusters_gw_bootstraps(f->hc, al));
                argv[a++] = "--cluster";
                argv[a++] = store[(*nstore)++] = strdup(w);
                for (char *l = strtok_r(text, "\n", &save); l;
                     l = strtok_r(NULL, "\n", &save)) {
                        snprintf(w, sizeof(w), "clusters.%s.properties.%s",
                                 al, l);
                        argv[a++] = "--set";
                        argv[a++] = store[(*nstore)++] = strdup(w);
                }
                free(text);
        }
        return a;
}

static void free_words(char **store, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(store[i]);
}

/* `aagw config check --connect` with the settings of 'k' (NULL: the good
 * ones) and 'extra' words (NULL-terminated, may be NULL); its output in
 * 'o'.  Returns its exit code. */
static int connect_check(struct fx *f, const struct kase *k,
                         const char *props, const char *const *extra,
                         harness_output_t *o) {
        const char *argv[128];
        char       *store[64];
        size_t      a = 0, ns = 0;
        int64_t     t = harness_now_ms();

        argv[a++] = harness_aagw_bin();
        argv[a++] = "config";
        argv[a++] = "check";
        argv[a++] = "--connect";
        a = cluster_words(f, k, props, argv, a, store, &ns);
        argv[a++] = "--topic";
        argv[a++] = "clicks";
        for (size_t i = 0; extra && extra[i]; i++)
                argv[a++] = extra[i];
        argv[a] = NULL;
        memset(o, 0, sizeof(*o));
        if (harness_run(argv, NULL, 0, 60000, o, f->r->errstr,
                        sizeof(f->r->errstr)))
                fail_msg("config check --connect: %s", f->r->errstr);
        free_words(store, ns);
        print_message("# config check --connect (%s): exit %d in %.1f s\n",
                      k ? k->name : "good settings",
                      harness_exit_code(o->status),
                      (double)(harness_now_ms() - t) / 1000.0);
        return harness_exit_code(o->status);
}

static void expect_line(const harness_output_t *o, const char *what,
                        const char *line) {
        if (!strstr(o->out, line))
                fail_msg("%s: no \"%s\" in the output:\n%s\nstderr:\n%s",
                         what, line, o->out, o->err);
}

static void gw_start(struct fx *f, struct gw *g, const struct kase *k,
                     const char *props, size_t idx) {
        const char *argv[128];
        char       *store[64], name[32];
        size_t      a = 0, ns = 0;

        snprintf(name, sizeof(name), "c%zu", idx);
        snprintf(g->g.name, sizeof(g->g.name), "%s", name);
        char *st = rk_path(f->r, name);
        snprintf(g->g.state, sizeof(g->g.state), "%s", st);
        free(st);
        snprintf(g->g.log, sizeof(g->g.log), "%s/gw-%s.log", f->r->dir, name);
        g->k = k;
        argv[a++] = harness_aagw_bin();
        argv[a++] = "run";
        a = cluster_words(f, k, props, argv, a, store, &ns);
        const char *const tail[] = {
            "--topic", "clicks", "--unify", "off", "--gateway-id", name,
            "--state-dir", g->g.state, "--admin", "127.0.0.1:0", "--set",
            "replication.refresh_topics_interval=1s", NULL};
        for (size_t i = 0; tail[i]; i++)
                argv[a++] = tail[i];
        argv[a] = NULL;
        g->t0     = harness_now_ms();
        g->g.proc = harness_proc_spawn(argv, NULL, g->g.log, f->r->errstr,
                                       sizeof(f->r->errstr));
        free_words(store, ns);
        if (!g->g.proc)
                fail_msg("aagw: %s", f->r->errstr);
}

/* Whether /status names 'cause' as the access of 'alias'. */
static bool status_says(const char *body, const char *alias,
                        const char *cause) {
        json_object *j = body ? json_tokener_parse(body) : NULL, *cl, *a;
        bool         yes = false;

        if (j && json_object_object_get_ex(j, "clusters", &cl))
                for (size_t i = 0; i < json_object_array_length(cl); i++) {
                        json_object *c = json_object_array_get_idx(cl, i);
                        if (json_object_object_get_ex(c, "alias", &a) &&
                            !strcmp(json_object_get_string(a), alias) &&
                            json_object_object_get_ex(c, "access", &a))
                                yes = !strcmp(json_object_get_string(a),
                                              cause);
                }
        json_object_put(j);
        return yes;
}

/* The denials the user denied meets at east, each named with its
 * operation and resource (docs/security.md's table), as the source of
 * east->west and the target of west->east; true once all are logged. */
static const char *const denials[] = {
    "use of consumer group aagw.%s.east-west denied: allow aagw's principal "
    "READ on it",
    "create topic west.clicks denied: allow aagw's principal CREATE on it",
    "write to topic heartbeats denied: allow aagw's principal WRITE on it",
    "a producer id denied: allow aagw's principal IDEMPOTENT_WRITE on the "
    "cluster, or WRITE on the topics it writes",
    NULL};

static bool denials_logged(const struct gw *g) {
        char fmt[512], needle[600];

        for (size_t i = 0; g->k->denied && denials[i]; i++) {
                snprintf(fmt, sizeof(fmt), " E [ACCESS] cluster east: not "
                                           "authorized: %s",
                         denials[i]);
                snprintf(needle, sizeof(needle), fmt, g->g.name);
                if (!rk_log_count(g->g.log, needle))
                        return false;
        }
        return true;
}

/* Whether the gateway 'arg' met denials again after it logged them: its
 * /status counts 5 more at east than it logged ACCESS lines. */
static bool retried(void *arg) {
        struct gw   *g    = arg;
        char        *body = rk_gwn_http_get(&g->g, "/status");
        json_object *j = body ? json_tokener_parse(body) : NULL, *cl, *a;
        int64_t      n = -1;

        if (j && json_object_object_get_ex(j, "clusters", &cl))
                for (size_t i = 0; i < json_object_array_length(cl); i++) {
                        json_object *c = json_object_array_get_idx(cl, i);
                        if (json_object_object_get_ex(c, "alias", &a) &&
                            !strcmp(json_object_get_string(a), "east") &&
                            json_object_object_get_ex(c, "access_failures",
                                                      &a))
                                n = json_object_get_int64(a);
                }
        json_object_put(j);
        free(body);
        return n >= rk_log_count(g->g.log, " E [ACCESS] cluster east:") + 5;
}

/* One poll of every gateway: what each shows already, and when it first
 * did (ms after its start). */
static bool all_shown(void *arg) {
        struct fx *f    = arg;
        bool       done = true;

        for (size_t i = 0; i < NCASES; i++) {
                struct gw         *g = &f->gw[i];
                const struct kase *k = g->k;
                int64_t            at = harness_now_ms() - g->t0;
                char               needle[512], *body;
                int                st;

                snprintf(needle, sizeof(needle),
                         " E [ACCESS] cluster %s: %s", k->alias, k->words);
                if (!g->seen[0] && rk_log_count(g->g.log, needle) &&
                    denials_logged(g))
                        g->seen[0] = at;
                if (!g->seen[1] &&
                    (body = rk_gwn_http_get_status(&g->g, "/healthz", &st))) {
                        snprintf(needle, sizeof(needle), "cluster %s",
                                 k->alias);
                        char cant[96];
                        snprintf(cant, sizeof(cant), "cannot reach %s",
                                 k->alias);
                        const char *cause =
                            !strcmp(k->cause, "authorization")
                                ? "not authorized"
                            : !strcmp(k->cause, "authentication")
                                ? "authentication failed"
                            : !strcmp(k->cause, "tls")
                                ? "TLS handshake failed"
                                : "security.protocol does not match";
                        snprintf(g->health, sizeof(g->health), "%d %s", st,
                                 body);
                        if (st == 503 && strstr(body, needle) &&
                            strstr(body, cause) && !strstr(body, cant))
                                g->seen[1] = at;
                        free(body);
                }
                if (!g->seen[2] &&
                    (body = rk_gwn_http_get(&g->g, "/status"))) {
                        if (status_says(body, k->alias, k->cause))
                                g->seen[2] = at;
                        free(body);
                }
                if (!g->seen[3] &&
                    (body = rk_gwn_http_get(&g->g, "/metrics"))) {
                        snprintf(needle, sizeof(needle),
                                 "aagw_cluster_access_failing{cluster=\"%s\","
                                 "cause=\"%s\"} 1",
                                 k->alias, k->cause);
                        if (strstr(body, needle))
                                g->seen[3] = at;
                        free(body);
                }
                for (int s = 0; s < 4; s++)
                        done &= g->seen[s] > 0;
        }
        return done;
}

/* ---------------------------------------------------------------- TEST -- */

static void test_connect(void **state) {
        struct fx       *f = calloc(1, sizeof(*f));
        harness_output_t o;

        assert_non_null(f);
        *state = f;
        f->r   = rk_new("rk-connect");
        start_clusters(f);
        make_other_ca(f);
        for (int i = 0; i < 2; i++)
                if (harness_clusters_create_topic(f->hc, i ? "west" : "east",
                                                  "clicks", 2, f->r->errstr,
                                                  sizeof(f->r->errstr)))
                        fail_msg("%s", f->r->errstr);
        for (size_t i = 0; i < NCASES; i++)
                f->props[i] = case_props(f, &cases[i], i);

        /* (a) The good pair: every check passes, each has its line. */
        if (connect_check(f, NULL, NULL, NULL, &o))
                fail_msg("good settings: exit %d:\n%s\n%s",
                         harness_exit_code(o.status), o.out, o.err);
        const char *const good[] = {
            "east: login ok (SASL_SSL, SCRAM-SHA-512 as aagw; 1 broker, "
            "cluster id ",
            "east: describe cluster ok (controller 1; cluster-wide rights: ",
            "east: read topics (replicated from east): allowed (clicks",
            "east: consumer groups: allowed (aagw.aagw.east-west, "
            "aagw.aagw.east-west.lease, aagw.aagw.unify.east)",
            "east: create topics: allowed (west.clicks validated, nothing "
            "created)",
            "east: idempotent writes: allowed",
            "west: login ok (SSL, client certificate CN=aagw; 1 broker, "
            "cluster id ",
            "west: describe cluster ok",
            "west: read topics (replicated from west): allowed (clicks",
            "west: consumer groups: allowed (aagw.aagw.west-east, "
            "aagw.aagw.west-east.lease, aagw.aagw.unify.west)",
            "west: create topics: allowed (east.clicks validated",
            "west: idempotent writes: allowed",
            NULL};
        for (size_t i = 0; good[i]; i++)
                expect_line(&o, "good settings", good[i]);
        assert_null(strstr(o.out, "DENIED"));
        assert_null(strstr(o.out, "FAILED"));
        harness_output_deinit(&o);
        /* Scale-out at west adds its transactions. */
        const char *const scale[] = {"--site", "west", "--set",
                                     "scale_out.enabled=true", NULL};
        if (connect_check(f, NULL, NULL, scale, &o))
                fail_msg("good settings, scale-out: exit %d:\n%s\n%s",
                         harness_exit_code(o.status), o.out, o.err);
        expect_line(&o, "scale-out", "west: transactions: allowed "
                                     "(init_transactions for "
                                     "transactional.id "
                                     "aagw.aagw.connect-check.");
        harness_output_deinit(&o);

        /* (a) Each login case: exit 1, the cluster and the cause. */
        for (size_t i = 0; i < NCASES; i++) {
                const struct kase *k = &cases[i];
                char               line[512], err[128];

                if (k->gw_only)
                        continue;
                if (connect_check(f, k, f->props[i], NULL, &o) != 1)
                        fail_msg("%s: exit %d, not 1:\n%s\n%s", k->name,
                                 harness_exit_code(o.status), o.out, o.err);
                snprintf(line, sizeof(line), "%s: login FAILED: %s", k->alias,
                         k->words);
                expect_line(&o, k->name, line);
                snprintf(err, sizeof(err), "failed: %s: login", k->alias);
                if (!strstr(o.err, err))
                        fail_msg("%s: stderr does not name \"%s\": %s",
                                 k->name, err, o.err);
                /* The other cluster is still checked, and passes. */
                snprintf(line, sizeof(line), "%s: login ok",
                         strcmp(k->alias, "east") ? "east" : "west");
                expect_line(&o, k->name, line);
                harness_output_deinit(&o);
        }

        /* (b) The user denied: let in, every operation refused. */
        const struct kase *dk = &cases[NCASES - 1];
        if (connect_check(f, dk, f->props[NCASES - 1], NULL, &o) != 1)
                fail_msg("denied: exit %d, not 1:\n%s\n%s",
                         harness_exit_code(o.status), o.out, o.err);
        const char *const denied[] = {
            "east: login ok (SASL_SSL, SCRAM-SHA-512 as denied; ",
            "east: describe cluster ok (controller 1; cluster-wide rights: "
            "none)",
            "east: read topics (replicated from east): DENIED (clicks: "
            "Broker: Topic authorization failed; allow User:denied READ, "
            "DESCRIBE",
            "east: consumer groups: DENIED (aagw.aagw.east-west: Broker: "
            "Group authorization failed",
            "east: create topics: DENIED (west.clicks: ",
            "east: idempotent writes: DENIED (no IDEMPOTENT_WRITE on the "
            "cluster",
            "west: login ok", NULL};
        for (size_t i = 0; denied[i]; i++)
                expect_line(&o, "denied", denied[i]);
        if (!strstr(o.err, "east: read topics") ||
            !strstr(o.err, "east: create topics"))
                fail_msg("denied: stderr does not name the operations: %s",
                         o.err);
        harness_output_deinit(&o);
        const char *const scale_east[] = {"--site", "east", "--set",
                                          "scale_out.enabled=true", NULL};
        if (connect_check(f, dk, f->props[NCASES - 1], scale_east, &o) != 1)
                fail_msg("denied, scale-out: exit %d, not 1:\n%s\n%s",
                         harness_exit_code(o.status), o.out, o.err);
        expect_line(&o, "denied, scale-out",
                    "east: transactions: DENIED (transactional.id "
                    "aagw.aagw.connect-check.");
        expect_line(&o, "denied, scale-out", "Transactional Id "
                                             "authorization failed");
        harness_output_deinit(&o);

        /* (c), (d) The running gateway, one per case, all at once. */
        for (size_t i = 0; i < NCASES; i++)
                gw_start(f, &f->gw[i], &cases[i], f->props[i], i);
        bool all = harness_wait_until(all_shown, f, WITHIN_MS + 5000);
        for (size_t i = 0; i < NCASES; i++) {
                struct gw *g = &f->gw[i];
                print_message("# gateway, %-29s ACCESS line %5.1f s, "
                              "/healthz %5.1f s, /status %5.1f s, metric "
                              "%5.1f s after its start\n",
                              g->k->name, (double)g->seen[0] / 1000.0,
                              (double)g->seen[1] / 1000.0,
                              (double)g->seen[2] / 1000.0,
                              (double)g->seen[3] / 1000.0);
        }
        for (size_t i = 0; i < NCASES; i++) {
                struct gw  *g     = &f->gw[i];
                const char *what[] = {"the ACCESS line", "/healthz",
                                      "/status", "the metric"};
                for (int s = 0; s < 4; s++)
                        if (!all || !g->seen[s] || g->seen[s] > WITHIN_MS) {
                                rk_grep_file(g->g.log, NULL,
                                             (const char *const[]){
                                                 " E [", " W [", NULL});
                                fail_msg("gateway, %s: %s not as expected "
                                         "within %d s (%.1f s; /healthz: "
                                         "%s)",
                                         g->k->name, what[s],
                                         WITHIN_MS / 1000,
                                         (double)g->seen[s] / 1000.0,
                                         g->health);
                        }
        }
        /* A denial met again at every retry (the copy's creation, at each
         * discovery, every second) is logged once. */
        struct gw *dg = &f->gw[NCASES - 1];
        if (!harness_wait_until(retried, dg, WITHIN_MS))
                fail_msg("user denied: no denials met again after the "
                         "first (/status access_failures)");
        const char *again = " E [ACCESS] cluster east: not authorized: create "
                            "topic west.clicks denied";
        if (rk_log_count(dg->g.log, again) != 1)
                fail_msg("user denied: \"%s\" logged %d times in %.1f s, "
                         "not once",
                         again, rk_log_count(dg->g.log, again),
                         (double)(harness_now_ms() - dg->t0) / 1000.0);

        /* They keep running, and stop cleanly. */
        for (size_t i = 0; i < NCASES; i++) {
                assert_int_equal(harness_proc_wait(f->gw[i].g.proc, 0, NULL),
                                 AAGW_ERR_TIMEOUT);
                harness_proc_signal(f->gw[i].g.proc, SIGTERM);
        }
        for (size_t i = 0; i < NCASES; i++) {
                int st = -1;
                if (harness_proc_wait(f->gw[i].g.proc, 45000, &st))
                        fail_msg("gateway, %s: no exit 45 s after SIGTERM",
                                 f->gw[i].k->name);
                if (harness_exit_code(st) != 0)
                        fail_msg("gateway, %s: exit %d after SIGTERM (%s)",
                                 f->gw[i].k->name, harness_exit_code(st),
                                 f->gw[i].g.log);
                harness_proc_destroy(f->gw[i].g.proc);
                f->gw[i].g.proc = NULL;
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_connect, teardown),
        };
        return cmocka_run_group_tests_name("kafka-connect", tests, NULL, NULL);
}
