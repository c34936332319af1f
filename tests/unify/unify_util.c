/* tests/unify/unify_util.c: the shared fixture of the unify e2e tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <librdkafka/rdkafka.h>

#include "unify.h"

static char *admin_addr(struct repl *r) {
        char *path = harness_path_join(r->state, "admin.addr");
        char *text;

        assert_non_null(path);
        if (!harness_wait_file(path, 30000)) {
                repl_dump_log(r, 60);
                fail_msg("the gateway wrote no %s", path);
        }
        text = harness_read_file(path, NULL);
        free(path);
        assert_non_null(text);
        text[strcspn(text, "\n")] = '\0';
        return text;
}

void unify_gw_start(struct repl *r, const char *mode,
                    const char *const *extra) {
        const char *argv[64];
        size_t      a = 0;
        char       *path = harness_path_join(r->state, "admin.addr");

        /* A stale address file from an earlier (killed) run must not be
         * read as this run's. */
        remove(path);
        free(path);
        argv[a++] = "--unify";
        argv[a++] = mode;
        argv[a++] = "--admin";
        argv[a++] = "127.0.0.1:0";
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(a < sizeof(argv) / sizeof(argv[0]) - 1);
                argv[a++] = extra[i];
        }
        argv[a] = NULL;
        repl_gw_start(r, argv);
}

static int64_t jint(json_object *o, const char *name) {
        json_object *v;
        return json_object_object_get_ex(o, name, &v) ? json_object_get_int64(v)
                                                      : -1;
}

bool unify_stat(struct repl *r, const char *site, struct ustat *out) {
        static char     *addr;
        static char      state_dir[4096];
        static int       addr_run;
        char             url[600], err[256];
        const char      *argv[] = {"curl", "-s", "-m", "5", url, NULL};
        harness_output_t o;
        bool             ok = false;

        memset(out, 0, sizeof(*out));
        /* One gateway at a time: the address is re-read after a start
         * (the file is removed before each). */
        if (!addr || strcmp(state_dir, r->state) || addr_run != r->gw_runs ||
            !repl_gw_running(r)) {
                free(addr);
                addr = NULL;
        }
        if (!repl_gw_running(r))
                return false;
        if (!addr) {
                addr = admin_addr(r);
                snprintf(state_dir, sizeof(state_dir), "%s", r->state);
                addr_run = r->gw_runs;
        }
        snprintf(url, sizeof(url), "http://%s/status", addr);
        if (harness_run(argv, NULL, 0, 10000, &o, err, sizeof(err)) !=
            AAGW_OK)
                return false;
        json_object *root = harness_exit_code(o.status) == 0
                                ? json_tokener_parse(o.out)
                                : NULL;
        json_object *un;
        if (root && json_object_object_get_ex(root, "unify", &un)) {
                for (size_t i = 0; i < json_object_array_length(un); i++) {
                        json_object *s = json_object_array_get_idx(un, i), *v;
                        if (!json_object_object_get_ex(s, "site", &v) ||
                            strcmp(json_object_get_string(v), site))
                                continue;
                        out->found = true;
                        if (json_object_object_get_ex(s, "state", &v))
                                snprintf(out->state, sizeof(out->state), "%s",
                                         json_object_get_string(v));
                        out->records_in  = jint(s, "records_in");
                        out->records_out = jint(s, "records_out");
                        out->accepted    = jint(s, "accepted");
                        out->dropped     = jint(s, "dropped");
                        out->superseded  = jint(s, "superseded");
                        out->identical   = jint(s, "identical");
                        out->rejected    = jint(s, "rejected");
                        out->recovered   = jint(s, "recovered");
                        out->replayed    = jint(s, "replayed");
                        out->inflight    = jint(s, "inflight");
                        out->lag         = jint(s, "lag");
                        out->diverged    = jint(s, "diverged");
                        out->inputs      = jint(s, "inputs");
                        ok               = true;
                }
        }
        json_object_put(root);
        harness_output_deinit(&o);
        return ok;
}

char *unify_http_get(struct repl *r, const char *path) {
        char             url[600], err[256], *addr, *body = NULL;
        const char      *argv[] = {"curl", "-s", "-m", "5", url, NULL};
        harness_output_t o;

        if (!repl_gw_running(r))
                return NULL;
        addr = admin_addr(r);
        snprintf(url, sizeof(url), "http://%s%s", addr, path);
        free(addr);
        if (harness_run(argv, NULL, 0, 10000, &o, err, sizeof(err)) !=
            AAGW_OK)
                return NULL;
        if (harness_exit_code(o.status) == 0 && o.out)
                body = strdup(o.out);
        harness_output_deinit(&o);
        return body;
}

struct idle_arg {
        struct repl *r;
        const char  *site;
        int64_t      min_in;
        struct ustat last;
};

static bool idle(void *arg) {
        struct idle_arg *ia = arg;
        if (!unify_stat(ia->r, ia->site, &ia->last))
                return false;
        if (!strcmp(ia->last.state, "failed"))
                return true; /* reported by the caller */
        return ia->last.lag == 0 && ia->last.inflight == 0 &&
               (ia->min_in < 0 || ia->last.records_in >= ia->min_in);
}

void unify_wait_idle(struct repl *r, const char *site, int64_t min_in,
                     int timeout_ms) {
        struct idle_arg ia = {r, site, min_in, {0}};
        if (!harness_wait_until(idle, &ia, timeout_ms) ||
            !strcmp(ia.last.state, "failed")) {
                repl_dump_log(r, 80);
                fail_msg("unify@%s not idle after %d ms: state %s in %" PRId64
                         " lag %" PRId64 " inflight %" PRId64,
                         site, timeout_ms, ia.last.state, ia.last.records_in,
                         ia.last.lag, ia.last.inflight);
        }
}

struct dr_state {
        size_t   acked, failed;
        int64_t *offsets;
        int32_t *partitions;
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        struct dr_state *st = opaque;
        size_t           i  = (size_t)(uintptr_t)m->_private;
        (void)rk;
        if (m->err) {
                st->failed++;
                return;
        }
        st->acked++;
        if (st->offsets)
                st->offsets[i] = m->offset;
        if (st->partitions)
                st->partitions[i] = m->partition;
}

void unify_produce(struct repl *r, const char *alias, const char *topic,
                   const struct urec *recs, size_t n, int64_t *offsets,
                   int32_t *partitions) {
        char             err[512];
        struct dr_state  st   = {0, 0, offsets, partitions};
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        topic = repl_topic(r, topic); /* scoped: see repl.h */
        assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers",
                                           repl_bs(r, alias), err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "enable.idempotence", "true",
                                           err, sizeof(err)),
                         RD_KAFKA_CONF_OK);
        assert_int_equal(rd_kafka_conf_set(conf, "linger.ms", "5", err,
                                           sizeof(err)),
                         RD_KAFKA_CONF_OK);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, &st);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                      sizeof(err));
        if (!rk)
                fail_msg("producer: %s", err);
        for (size_t i = 0; i < n; i++) {
                const struct urec *u = &recs[i];
                for (;;) {
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                            rk, RD_KAFKA_V_TOPIC(topic),
                            RD_KAFKA_V_PARTITION(u->partition >= 0
                                                     ? u->partition
                                                     : RD_KAFKA_PARTITION_UA),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_KEY(u->key, u->key ? strlen(u->key) : 0),
                            RD_KAFKA_V_VALUE((void *)u->value,
                                             u->value ? strlen(u->value) : 0),
                            RD_KAFKA_V_TIMESTAMP(u->ts),
                            RD_KAFKA_V_OPAQUE((void *)(uintptr_t)i),
                            RD_KAFKA_V_END);
                        if (!e)
                                break;
                        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                fail_msg("produce to %s: %s", topic,
                                         rd_kafka_err2str(e));
                        rd_kafka_poll(rk, 10);
                }
                rd_kafka_poll(rk, 0);
        }
        if (rd_kafka_flush(rk, 60000))
                fail_msg("produce to %s at %s: not acknowledged in 60 s",
                         topic, alias);
        rd_kafka_destroy(rk);
        assert_int_equal(st.failed, 0);
        assert_int_equal(st.acked, n);
}

bool unify_json_field(const char *json, const char *field, char *buf,
                      size_t size) {
        char        pat[128];
        const char *p, *e;
        snprintf(pat, sizeof(pat), "\"%s\":\"", field);
        if (!(p = strstr(json, pat)))
                return false;
        p += strlen(pat);
        if (!(e = strchr(p, '"')) || (size_t)(e - p) >= size)
                return false;
        memcpy(buf, p, (size_t)(e - p));
        buf[e - p] = '\0';
        return true;
}

int unify_audit(struct repl *r, const char *const *args, void **objs,
                size_t max, size_t *n, char *err, size_t errsize) {
        const char      *argv[32];
        size_t           a = 0;
        harness_output_t o;
        char             e[256];
        harness_lines_t  l;

        argv[a++] = harness_aagw_bin();
        argv[a++] = "audit";
        for (size_t i = 0; args[i]; i++)
                argv[a++] = args[i];
        argv[a++] = "--json";
        argv[a++] = "--state-dir";
        argv[a++] = r->state;
        argv[a]   = NULL;
        if (harness_run(argv, NULL, 0, 60000, &o, e, sizeof(e)) != AAGW_OK)
                fail_msg("aagw audit: %s", e);
        *n = 0;
        assert_int_equal(harness_lines_split(o.out, &l), 0);
        for (size_t i = 0; i < l.cnt && *n < max; i++) {
                json_object *j = json_tokener_parse(l.v[i]);
                if (!j)
                        fail_msg("aagw audit: not JSON: %s", l.v[i]);
                objs[(*n)++] = j;
        }
        harness_lines_deinit(&l);
        if (err)
                snprintf(err, errsize, "%s", o.err);
        int code = harness_exit_code(o.status);
        harness_output_deinit(&o);
        return code;
}
