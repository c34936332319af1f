/*
 * gateway/connect_check.c: `aagw config check --connect`: log in to every
 * configured cluster with its properties and ask each whether aagw may do
 * there what the configuration makes it do.
 *
 * Two rounds, each cluster in a thread of its own, each bounded by
 * CHECK_MS:
 *   1. login: an admin client with the cluster's properties asks
 *      DescribeCluster (with the cluster's authorized operations) and
 *      lists the topics.  A refused login is told from librdkafka's log
 *      lines by the access registry (replicator/access.c), as the running
 *      gateway tells it, and ends the wait at once;
 *   2. operations, on the clusters that let aagw in: what each needs is
 *      derived from the plan of flows and the topics round 1 found
 *      (which topics a source replicates, their copies at the target,
 *      the unified topics): DescribeTopics with authorized operations,
 *      DescribeConsumerGroups for aagw's groups, CreateTopics with
 *      validate_only for a topic aagw would create (nothing is created),
 *      the cluster's IDEMPOTENT_WRITE, and under scale-out a
 *      transactional producer's init_transactions with an id of its own
 *      (aagw.<gateway id>.connect-check.<random>), never one a running
 *      aagw uses, so no running process is fenced.
 * Every check prints one line, "ALIAS: what: result"; the command exits 1
 * if any failed.
 */
#include "gateway_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#define CHECK_MS 10000

/* What aagw does with a topic at a cluster. */
enum { ROLE_SOURCE = 1, ROLE_COPY = 2, ROLE_UNIFIED = 4, ROLE_MM2 = 8 };

#define OP(o) (1u << RD_KAFKA_ACL_OPERATION_##o)

struct need {
        char    *topic;
        unsigned ops;   /* OP() bits it needs */
        unsigned role;
        bool     named; /* in the topic list, not found at the cluster */
};

struct cc {
        const char         *alias, *bootstraps;
        const char *const  *props;
        size_t              nprops;
        const aagw_config_t *cfg;
        rd_kafka_t         *rk;
        bool                in;        /* logged in */
        bool                ops_known; /* the cluster's operations */
        unsigned            cluster_ops;
        char              **seen;      /* topics listed by the cluster */
        size_t              nseen;
        struct need        *need;
        size_t              nneed;
        char              **groups;
        size_t              ngroups;
        char                create[AAGW_TOPIC_MAX + 1]; /* "": no check */
        char                create_mm2[AAGW_TOPIC_MAX + 1]; /* else this */
        bool                writes, txn, source;
        bool                topic_write; /* WRITE on a topic it writes */
        char                who[300]; /* the principal, for the hints */
        FILE               *out;
        char               *text;
        size_t              len;
        int                 checks, failed;
        char                fails[256];
};

/* ----------------------------------------------------------- HELPERS --- */

static const char *prop(const struct cc *c, const char *name) {
        const char *v = NULL;

        /* The last setting wins, as aagw_kafka_conf_apply() applies them;
         * "admin.x" is the admin client's own. */
        for (size_t i = 0; i < c->nprops; i++) {
                const char *k = c->props[2 * i];
                if (!strcmp(aagw_kafka_prop_base(k), name) &&
                    (k == aagw_kafka_prop_base(k) || !strncmp(k, "admin.", 6)))
                        v = c->props[2 * i + 1];
        }
        return v;
}

static void result(struct cc *c, bool ok, const char *check,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* One line "ALIAS: CHECK: TEXT"; a failure is counted and named. */
static void result(struct cc *c, bool ok, const char *check, const char *fmt,
                   ...) {
        va_list ap;

        c->checks++;
        /* "east: login ok (...)", "east: create topics: allowed (...)" */
        fprintf(c->out, "%s: %s%s", c->alias, check,
                strcmp(check, "login") && strcmp(check, "describe cluster")
                    ? ": "
                    : " ");
        va_start(ap, fmt);
        vfprintf(c->out, fmt, ap);
        va_end(ap);
        fputc('\n', c->out);
        if (ok)
                return;
        c->failed++;
        size_t l = strlen(c->fails);
        snprintf(c->fails + l, sizeof(c->fails) - l, "%s%s: %s",
                 l ? "; " : "", c->alias, check);
}

static bool seen(const struct cc *c, const char *topic) {
        for (size_t i = 0; i < c->nseen; i++)
                if (!strcmp(c->seen[i], topic))
                        return true;
        return false;
}

static int add_need(struct cc *c, const char *topic, unsigned ops,
                    unsigned role, bool named) {
        for (size_t i = 0; i < c->nneed; i++)
                if (!strcmp(c->need[i].topic, topic)) {
                        c->need[i].ops |= ops;
                        c->need[i].role |= role;
                        return 0;
                }
        struct need *n = realloc(c->need, (c->nneed + 1) * sizeof(*n));
        if (!n)
                return -1;
        c->need = n;
        n       = &c->need[c->nneed];
        if (!(n->topic = strdup(topic)))
                return -1;
        n->ops   = ops;
        n->role  = role;
        n->named = named;
        c->nneed++;
        return 0;
}

static int add_group(struct cc *c, const char *group) {
        for (size_t i = 0; i < c->ngroups; i++)
                if (!strcmp(c->groups[i], group))
                        return 0;
        char **g = realloc(c->groups, (c->ngroups + 1) * sizeof(*g));
        if (!g)
                return -1;
        c->groups = g;
        if (!(g[c->ngroups] = strdup(group)))
                return -1;
        c->ngroups++;
        return 0;
}

/* "READ, DESCRIBE" for the bits of 'ops' into 'buf'. */
static const char *ops_str(unsigned ops, char *buf, size_t size) {
        size_t n = 0;

        buf[0] = '\0';
        for (int o = 0; o < RD_KAFKA_ACL_OPERATION__CNT; o++)
                if (ops & (1u << o) && n < size)
                        n += (size_t)snprintf(buf + n, size - n, "%s%s",
                                              n ? ", " : "",
                                              rd_kafka_AclOperation_name(o));
        return buf;
}

static unsigned ops_bits(const rd_kafka_AclOperation_t *ops, size_t n) {
        unsigned b = 0;

        for (size_t i = 0; ops && i < n; i++)
                if (ops[i] > 0 && ops[i] < RD_KAFKA_ACL_OPERATION__CNT)
                        b |= 1u << ops[i];
        return b;
}

/* Wait for the answer to a request on 'q' until 'deadline'; NULL if none
 * came (or, while 'login' is set, once a refused login was noted). */
static rd_kafka_event_t *wait_event(struct cc *c, rd_kafka_queue_t *q,
                                    int64_t deadline, bool login) {
        struct aagw_access acc;

        while (aagw_mono_ms() < deadline) {
                rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 100);
                if (ev)
                        return ev;
                if (login && aagw_access_get(c->alias, &acc) &&
                    acc.cause != AAGW_ACCESS_OK &&
                    acc.cause != AAGW_ACCESS_AUTHORIZATION)
                        return NULL;
        }
        return NULL;
}

static rd_kafka_AdminOptions_t *options(struct cc *c, rd_kafka_admin_op_t op,
                                        int64_t deadline, bool ops) {
        char                     why[256];
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(c->rk, op);
        int64_t                  left = deadline - aagw_mono_ms();
        rd_kafka_error_t        *e = NULL;

        rd_kafka_AdminOptions_set_request_timeout(
            o, left > 100 ? (int)left : 100, why, sizeof(why));
        if (ops)
                e = rd_kafka_AdminOptions_set_include_authorized_operations(o,
                                                                            1);
        if (e)
                rd_kafka_error_destroy(e);
        return o;
}

/* Who aagw is at the cluster, in words for the login line and the
 * hints: "SCRAM-SHA-512 as aagw", "client certificate CN=aagw". */
static void describe_identity(struct cc *c, char *how, size_t size) {
        const char *proto = prop(c, "security.protocol");
        const char *mech  = prop(c, "sasl.mechanism");
        const char *user  = prop(c, "sasl.username");
        const char *cert  = prop(c, "ssl.certificate.location");
        bool        sasl  = proto && !strncasecmp(proto, "sasl", 4);
        bool        tls   = proto && strcasestr(proto, "ssl");

        if (!proto)
                proto = "PLAINTEXT";
        if (sasl && user && (!mech || strcasecmp(mech, "OAUTHBEARER"))) {
                snprintf(how, size, "%s, %s as %s", proto,
                         mech ? mech : "GSSAPI", user);
                snprintf(c->who, sizeof(c->who), "User:%s", user);
                return;
        }
        if (sasl) {
                snprintf(how, size, "%s, %s", proto, mech ? mech : "GSSAPI");
                snprintf(c->who, sizeof(c->who), "aagw's principal");
                return;
        }
        snprintf(c->who, sizeof(c->who), "aagw's principal");
        if (tls && cert) {
                char  dn[256] = "";
                FILE *f       = fopen(cert, "r");
                X509 *x       = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
                BIO *b = x ? BIO_new(BIO_s_mem()) : NULL;
                if (b && X509_NAME_print_ex(b, X509_get_subject_name(x), 0,
                                            XN_FLAG_RFC2253) >= 0) {
                        int l = BIO_read(b, dn, (int)sizeof(dn) - 1);
                        dn[l > 0 ? l : 0] = '\0';
                }
                BIO_free(b);
                X509_free(x);
                if (f)
                        fclose(f);
                snprintf(how, size, "%s, client certificate %s", proto,
                         *dn ? dn : cert);
                if (*dn)
                        snprintf(c->who, sizeof(c->who),
                                 "the principal of certificate %s", dn);
        } else if (tls && prop(c, "ssl.keystore.location")) {
                snprintf(how, size, "%s, client certificate from %s", proto,
                         prop(c, "ssl.keystore.location"));
        } else {
                snprintf(how, size, "%s%s", proto,
                         tls ? ", no client certificate" : "");
        }
}

/* ------------------------------------------------------------- LOGIN --- */

static void *login_main(void *arg) {
        struct cc               *c = arg;
        char                     err[512], how[400];
        int64_t                  deadline = aagw_mono_ms() + CHECK_MS;
        rd_kafka_conf_t         *conf;
        rd_kafka_queue_t        *q;
        rd_kafka_AdminOptions_t *o;
        rd_kafka_event_t        *ev;
        struct aagw_access       acc;

        describe_identity(c, how, sizeof(how));
        conf = aagw_kafka_conf_new(c->bootstraps, "connect-check", err,
                                   sizeof(err));
        if (!conf || aagw_kafka_conf_apply(conf, "admin", c->props, c->nprops,
                                           err, sizeof(err)) ||
            !(c->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err,
                                   sizeof(err)))) {
                if (conf)
                        rd_kafka_conf_destroy(conf);
                result(c, false, "login", "FAILED: %s", err);
                return NULL;
        }
        q = rd_kafka_queue_new(c->rk);
        o = options(c, RD_KAFKA_ADMIN_OP_DESCRIBECLUSTER, deadline, true);
        rd_kafka_DescribeCluster(c->rk, o, q);
        ev = wait_event(c, q, deadline, true);
        if (aagw_access_get(c->alias, &acc) && acc.cause != AAGW_ACCESS_OK &&
            acc.cause != AAGW_ACCESS_AUTHORIZATION) {
                result(c, false, "login", "FAILED: %s: %s (%s)",
                       aagw_access_cause_text(acc.cause), acc.what,
                       acc.reason);
        } else if (!ev || rd_kafka_event_error(ev)) {
                result(c, false, "login",
                       "FAILED: %s from %s within %d s (%s)",
                       ev ? "an error" : "no answer", c->bootstraps,
                       CHECK_MS / 1000,
                       ev ? rd_kafka_event_error_string(ev)
                          : "the cluster does not answer: a wrong address, "
                            "a firewall, or brokers that are down");
        } else {
                const rd_kafka_DescribeCluster_result_t *r =
                    rd_kafka_event_DescribeCluster_result(ev);
                size_t                         nn = 0, no = 0;
                const rd_kafka_AclOperation_t *ops =
                    rd_kafka_DescribeCluster_result_authorized_operations(r,
                                                                          &no);
                const rd_kafka_Node_t *ctl =
                    rd_kafka_DescribeCluster_result_controller(r);
                const struct rd_kafka_metadata *md = NULL;
                char                            list[512];

                rd_kafka_DescribeCluster_result_nodes(r, &nn);
                c->in          = true;
                c->ops_known   = ops != NULL;
                c->cluster_ops = ops_bits(ops, no);
                result(c, true, "login",
                       "ok (%s; %zu broker%s, cluster id %s)", how, nn,
                       nn == 1 ? "" : "s",
                       rd_kafka_DescribeCluster_result_cluster_id(r)
                           ? rd_kafka_DescribeCluster_result_cluster_id(r)
                           : "?");
                result(c, true, "describe cluster",
                       "ok (controller %d; cluster-wide rights: %s)",
                       ctl ? rd_kafka_Node_id(ctl) : -1,
                       !c->ops_known ? "not told"
                       : c->cluster_ops
                           ? ops_str(c->cluster_ops, list, sizeof(list))
                           : "none");
                /* The topics aagw would see: only those it may
                 * DESCRIBE are listed. */
                int64_t left = deadline - aagw_mono_ms();
                if (!rd_kafka_metadata(c->rk, 1, NULL, &md,
                                       left > 1000 ? (int)left : 1000)) {
                        c->seen = calloc((size_t)md->topic_cnt + 1,
                                         sizeof(*c->seen));
                        for (int i = 0; c->seen && i < md->topic_cnt; i++)
                                if (!md->topics[i].err &&
                                    (c->seen[c->nseen] =
                                         strdup(md->topics[i].topic)))
                                        c->nseen++;
                        rd_kafka_metadata_destroy(md);
                }
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        return NULL;
}

/* ---------------------------------------------------------- THE PLAN --- */

static struct cc *cc_of(struct cc *cs, size_t n, const char *alias) {
        for (size_t i = 0; i < n; i++)
                if (!strcmp(cs[i].alias, alias))
                        return &cs[i];
        return NULL;
}

/* A pattern that only matches itself: a topic the user named, to be
 * asked about even when the cluster does not list it (a principal
 * without DESCRIBE on a topic does not see it). */
static bool plain_name(const char *p) {
        for (; *p; p++)
                if (!(*p == '.' || *p == '_' || *p == '-' ||
                      (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= 'A' && *p <= 'Z')))
                        return false;
        return true;
}

/* What flow 'src'->'dst' needs at both clusters: read its source
 * topics, write their copies (or create them), its groups. */
static int plan_flow(const aagw_config_t *cfg, const aagw_repl_policy_t *pol,
                     struct cc *s, struct cc *d, bool scale) {
        const struct aagw_settings      *set = aagw_config_settings(cfg);
        const struct aagw_flow_settings *f =
            aagw_settings_per_flow(set, s->alias, d->alias);
        const struct aagw_cfg_list *list = &set->replication.topics;
        const char                 *gw   = set->gateway.id;
        bool                        cfgs = set->replication.sync_topic_configs;
        char                        remote[AAGW_TOPIC_MAX + 1], group[600];
        const char *const *pats;
        size_t                      npats;

        if (f && f->topics.set)
                list = &f->topics;
        pats  = list->items;
        npats = list->n;
        /* Every topic the source lists that the flow copies, and the
         * plain names of the topic list that it does not list. */
        for (size_t i = 0; i < s->nseen + npats; i++) {
                const char *t = i < s->nseen ? s->seen[i] : pats[i - s->nseen];
                bool        named = i >= s->nseen;

                if (named && (!plain_name(t) || seen(s, t)))
                        continue;
                if (aagw_repl_topic_check(pol, s->alias, d->alias, t) !=
                    AAGW_SKIP_NONE)
                        continue;
                if (add_need(s, t,
                             OP(READ) | OP(DESCRIBE) |
                                 (cfgs ? OP(DESCRIBE_CONFIGS) : 0),
                             ROLE_SOURCE, named))
                        return -1;
                if (aagw_repl_remote_topic(pol, s->alias, t, remote,
                                           sizeof(remote)))
                        continue;
                if (seen(d, remote)) {
                        if (add_need(d, remote,
                                     OP(READ) | OP(WRITE) | OP(DESCRIBE) |
                                         (cfgs ? OP(ALTER_CONFIGS) : 0),
                                     ROLE_COPY, false))
                                return -1;
                } else if (!d->create[0])
                        snprintf(d->create, sizeof(d->create), "%s", remote);
        }
        /* Nothing to create yet: a name the flow would create later. */
        if (!d->create[0]) {
                char probe[64];
                snprintf(probe, sizeof(probe), "aagw-connect-check-%08x",
                         (unsigned)random());
                if (!aagw_repl_remote_topic(pol, s->alias, probe, remote,
                                            sizeof(remote)))
                        snprintf(d->create, sizeof(d->create), "%s", remote);
        }
        s->source = true;
        snprintf(group, sizeof(group), "aagw.%s.%s-%s", gw, s->alias,
                 d->alias);
        if (add_group(s, group))
                return -1;
        if (!scale) {
                snprintf(group, sizeof(group), "aagw.%s.%s-%s.lease", gw,
                         s->alias, d->alias);
                if (add_group(s, group))
                        return -1;
        }
        /* MirrorMaker 2's heartbeats, written at the source. */
        if (set->mm2.heartbeats_interval_ms > 0) {
                s->writes = true;
                if (seen(s, AAGW_MM2_HEARTBEATS_TOPIC)) {
                        if (add_need(s, AAGW_MM2_HEARTBEATS_TOPIC,
                                     OP(WRITE) | OP(DESCRIBE), ROLE_MM2,
                                     false))
                                return -1;
                } else
                        snprintf(s->create_mm2, sizeof(s->create_mm2), "%s",
                                 AAGW_MM2_HEARTBEATS_TOPIC);
        }
        d->writes = true;
        d->txn |= scale;
        return 0;
}

/* What the unify stage at 'c' needs: write (or create) the unified
 * topics of the topics replicated from it, its group. */
static int plan_unify(const aagw_config_t *cfg, struct cc *c, bool scale) {
        char out[AAGW_TOPIC_MAX + 1], group[600];

        for (size_t i = 0, n = c->nneed; i < n; i++) {
                if (!(c->need[i].role & ROLE_SOURCE) ||
                    gw_unify_topic(cfg, c->need[i].topic, out, sizeof(out)) ==
                        GW_UNIFY_OFF ||
                    !out[0])
                        continue;
                if (seen(c, out)) {
                        if (add_need(c, out,
                                     OP(READ) | OP(WRITE) | OP(DESCRIBE),
                                     ROLE_UNIFIED, false))
                                return -1;
                } else if (!c->create[0])
                        snprintf(c->create, sizeof(c->create), "%s", out);
        }
        snprintf(group, sizeof(group), "aagw.%s.unify.%s",
                 aagw_config_settings(cfg)->gateway.id, c->alias);
        c->writes = true;
        c->txn |= scale;
        return add_group(c, group);
}

/* -------------------------------------------------------- OPERATIONS --- */

/* Append "sep item" to 'buf' (bounded). */
static void append(char *buf, size_t size, const char *sep, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, const char *sep, const char *fmt,
                   ...) {
        size_t  l = strlen(buf);
        va_list ap;

        if (l + 1 >= size)
                return;
        if (l)
                l += (size_t)snprintf(buf + l, size - l, "%s", sep);
        if (l + 1 >= size)
                return;
        va_start(ap, fmt);
        vsnprintf(buf + l, size - l, fmt, ap);
        va_end(ap);
}

/* The topics of 'role' at 'c', checked against what DescribeTopics told
 * ('descs', 'nd'; 'why' when it did not answer): one line, and one more
 * for topics the user named that do not exist (not a failure: they are
 * copied once they do). */
static void topics_result(struct cc *c, unsigned role, const char *check,
                          const rd_kafka_TopicDescription_t **descs,
                          size_t nd, const char *why) {
        char     ok[512] = "", bad[768] = "", missing[512] = "", opsb[160];
        unsigned want = 0;

        for (size_t i = 0; i < c->nneed; i++) {
                struct need                       *n = &c->need[i];
                const rd_kafka_TopicDescription_t *d = NULL;
                const rd_kafka_AclOperation_t     *ops;
                size_t                             no = 0;
                unsigned                           have;

                if (!(n->role & role))
                        continue;
                want |= n->ops;
                for (size_t k = 0; k < nd && !d; k++)
                        if (!strcmp(rd_kafka_TopicDescription_name(descs[k]),
                                    n->topic))
                                d = descs[k];
                const rd_kafka_error_t *e =
                    d ? rd_kafka_TopicDescription_error(d) : NULL;
                if (!d) {
                        append(bad, sizeof(bad), "; ", "%s: %s", n->topic,
                               why ? why : "not described");
                        continue;
                }
                if (e && rd_kafka_error_code(e) ==
                             RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
                    n->named) {
                        append(missing, sizeof(missing), ", ", "%s",
                               n->topic);
                        continue;
                }
                if (e) {
                        append(bad, sizeof(bad), "; ", "%s: %s", n->topic,
                               rd_kafka_error_string(e));
                        continue;
                }
                /* No operations told (an old broker): not held against
                 * it. */
                ops  = rd_kafka_TopicDescription_authorized_operations(d, &no);
                have = ops ? ops_bits(ops, no) : n->ops;
                if (n->ops & ~have) {
                        append(bad, sizeof(bad), "; ", "%s: no %s", n->topic,
                               ops_str(n->ops & ~have, opsb, sizeof(opsb)));
                        continue;
                }
                if (n->ops & OP(WRITE))
                        c->topic_write = true;
                append(ok, sizeof(ok), ", ", "%s", n->topic);
        }
        if (*bad && why)
                result(c, false, check, "FAILED (%s)", bad);
        else if (*bad)
                result(c, false, check, "DENIED (%s; allow %s %s on them)%s%s",
                       bad, c->who, ops_str(want, opsb, sizeof(opsb)),
                       *ok ? "; allowed: " : "", ok);
        else if (*ok)
                result(c, true, check, "allowed (%s)", ok);
        else if (role == ROLE_SOURCE && c->source && !*missing)
                fprintf(c->out, "%s: %s: none found (aagw sees only the "
                                "topics it may DESCRIBE)\n",
                        c->alias, check);
        if (*missing)
                fprintf(c->out, "%s: %s: not found: %s (copied once they "
                                "exist)\n",
                        c->alias, check, missing);
}

static void check_topics(struct cc *c, int64_t deadline) {
        const char              **names;
        rd_kafka_TopicCollection_t *tc;
        rd_kafka_queue_t         *q;
        rd_kafka_AdminOptions_t  *o;
        rd_kafka_event_t         *ev;
        const rd_kafka_TopicDescription_t **descs = NULL;
        size_t                    nd = 0;
        char                      why[256] = "no answer";
        char                      check[160];

        snprintf(check, sizeof(check), "read topics (replicated from %s)",
                 c->alias);
        if (!c->nneed) {
                topics_result(c, ROLE_SOURCE, check, NULL, 0, NULL);
                return;
        }
        if (!(names = calloc(c->nneed, sizeof(*names))))
                return;
        for (size_t i = 0; i < c->nneed; i++)
                names[i] = c->need[i].topic;
        tc = rd_kafka_TopicCollection_of_topic_names(names, c->nneed);
        q  = rd_kafka_queue_new(c->rk);
        o  = options(c, RD_KAFKA_ADMIN_OP_DESCRIBETOPICS, deadline, true);
        rd_kafka_DescribeTopics(c->rk, tc, o, q);
        ev = wait_event(c, q, deadline, false);
        if (ev && rd_kafka_event_error(ev))
                snprintf(why, sizeof(why), "%s",
                         rd_kafka_event_error_string(ev));
        else if (ev)
                descs = rd_kafka_DescribeTopics_result_topics(
                    rd_kafka_event_DescribeTopics_result(ev), &nd);
        const char *w = ev && !rd_kafka_event_error(ev) ? NULL : why;
        topics_result(c, ROLE_SOURCE, check, descs, nd, w);
        snprintf(check, sizeof(check), "write topics (copies at %s)",
                 c->alias);
        topics_result(c, ROLE_COPY, check, descs, nd, w);
        topics_result(c, ROLE_UNIFIED, "write unified topics", descs, nd, w);
        topics_result(c, ROLE_MM2, "write heartbeats", descs, nd, w);
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        rd_kafka_TopicCollection_destroy(tc);
        free(names);
}

/* A group whose coordinator is not ready yet (the offsets topic being
 * made at the first use of groups on a cluster): asked again. */
static bool coordinator_wait(const rd_kafka_error_t *e) {
        rd_kafka_resp_err_t err = e ? rd_kafka_error_code(e) : 0;

        return err == RD_KAFKA_RESP_ERR_NOT_COORDINATOR ||
               err == RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE ||
               err == RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS;
}

static void check_groups(struct cc *c, int64_t deadline) {
        rd_kafka_queue_t *q;
        rd_kafka_event_t *ev = NULL;
        char              ok[512], bad[768];
        bool              again = true;

        if (!c->ngroups)
                return;
        q = rd_kafka_queue_new(c->rk);
        while (again) {
                rd_kafka_AdminOptions_t *o = options(
                    c, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, deadline,
                    true);
                if (ev)
                        rd_kafka_event_destroy(ev);
                rd_kafka_DescribeConsumerGroups(c->rk,
                                                (const char **)c->groups,
                                                c->ngroups, o, q);
                ev = wait_event(c, q, deadline, false);
                rd_kafka_AdminOptions_destroy(o);
                again = false;
                if (!ev || rd_kafka_event_error(ev))
                        break;
                ok[0] = bad[0] = '\0';
                size_t n = 0;
                const rd_kafka_ConsumerGroupDescription_t **gs =
                    rd_kafka_DescribeConsumerGroups_result_groups(
                        rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
                for (size_t i = 0; i < n; i++) {
                        const rd_kafka_error_t *e =
                            rd_kafka_ConsumerGroupDescription_error(gs[i]);
                        size_t                         no = 0;
                        const rd_kafka_AclOperation_t *ops =
                            rd_kafka_ConsumerGroupDescription_authorized_operations(
                                gs[i], &no);
                        const char *g =
                            rd_kafka_ConsumerGroupDescription_group_id(gs[i]);
                        bool allowed =
                            !e && (!ops || (ops_bits(ops, no) & OP(READ)));
                        if (coordinator_wait(e) &&
                            aagw_mono_ms() + 300 < deadline)
                                again = true;
                        if (allowed)
                                append(ok, sizeof(ok), ", ", "%s", g);
                        else
                                append(bad, sizeof(bad), "; ", "%s: %s", g,
                                       e ? rd_kafka_error_string(e)
                                         : "no READ");
                }
                if (again)
                        rd_kafka_queue_poll(q, 200); /* a pause */
        }
        if (!ev || rd_kafka_event_error(ev))
                result(c, false, "consumer groups", "FAILED (%s)",
                       ev ? rd_kafka_event_error_string(ev) : "no answer");
        else if (*bad)
                result(c, false, "consumer groups",
                       "DENIED (%s; allow %s READ and DESCRIBE on the groups, "
                       "e.g. a PREFIXED ACL on aagw.)",
                       bad, c->who);
        else
                result(c, true, "consumer groups", "allowed (%s)", ok);
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
}

/* CreateTopics with validate_only: the broker checks the request,
 * authorization included, and creates nothing. */
static void check_create(struct cc *c, int64_t deadline) {
        char                     why[256];
        rd_kafka_NewTopic_t     *nt;
        rd_kafka_queue_t        *q;
        rd_kafka_AdminOptions_t *o;
        rd_kafka_event_t        *ev;
        rd_kafka_resp_err_t      err = RD_KAFKA_RESP_ERR__TIMED_OUT;
        const char              *es  = "no answer";

        if (!c->create[0])
                memcpy(c->create, c->create_mm2, sizeof(c->create));
        if (!c->create[0])
                return;
        if (!(nt = rd_kafka_NewTopic_new(c->create, 1, -1, why, sizeof(why))))
                return;
        q = rd_kafka_queue_new(c->rk);
        o = options(c, RD_KAFKA_ADMIN_OP_CREATETOPICS, deadline, false);
        rd_kafka_AdminOptions_set_validate_only(o, 1, why, sizeof(why));
        rd_kafka_CreateTopics(c->rk, &nt, 1, o, q);
        ev = wait_event(c, q, deadline, false);
        if (ev && rd_kafka_event_error(ev)) {
                err = rd_kafka_event_error(ev);
                es  = rd_kafka_event_error_string(ev);
        } else if (ev) {
                size_t                          n = 0;
                const rd_kafka_topic_result_t **tr =
                    rd_kafka_CreateTopics_result_topics(
                        rd_kafka_event_CreateTopics_result(ev), &n);
                err = n ? rd_kafka_topic_result_error(tr[0])
                        : RD_KAFKA_RESP_ERR__FAIL;
                es  = n && rd_kafka_topic_result_error_string(tr[0])
                          ? rd_kafka_topic_result_error_string(tr[0])
                          : rd_kafka_err2str(err);
        }
        if (!err || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                result(c, true, "create topics",
                       "allowed (%s validated, nothing created)", c->create);
        else if (err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                 err == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
                result(c, false, "create topics",
                       "DENIED (%s: %s; allow %s CREATE on the cluster, or on "
                       "the topics aagw creates)",
                       c->create, es, c->who);
        else
                result(c, false, "create topics", "FAILED (%s: %s)",
                       c->create, es);
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewTopic_destroy(nt);
}

/* The idempotent producer's id: IDEMPOTENT_WRITE on the cluster, or
 * (Kafka 2.8 and later) WRITE on any topic. */
static void check_idempotent(struct cc *c) {
        if (!c->writes || !c->ops_known)
                return;
        if (c->cluster_ops & OP(IDEMPOTENT_WRITE)) {
                result(c, true, "idempotent writes",
                       "allowed (IDEMPOTENT_WRITE on the cluster)");
                return;
        }
        if (c->topic_write)
                result(c, true, "idempotent writes",
                       "allowed (WRITE on the topics)");
        else
                result(c, false, "idempotent writes",
                       "DENIED (no IDEMPOTENT_WRITE on the cluster: the "
                       "producers get no id unless %s may WRITE to some "
                       "topic; allow IDEMPOTENT_WRITE on the cluster)",
                       c->who);
}

/* init_transactions with a transactional.id of this check's own: never
 * one a running aagw holds, which initialising would fence. */
static void check_txn(struct cc *c, int64_t deadline) {
        char               err[512], id[300], name[64];
        rd_kafka_conf_t   *conf;
        rd_kafka_t        *p;
        rd_kafka_error_t  *e;
        int64_t            t0 = aagw_mono_ms(), left = deadline - t0;

        if (!c->txn)
                return;
        snprintf(id, sizeof(id), "aagw.%s.connect-check.%08x%08x",
                 aagw_config_settings(c->cfg)->gateway.id, (unsigned)random(),
                 (unsigned)random());
        snprintf(name, sizeof(name), "connect-check-txn");
        conf = aagw_kafka_conf_new(c->bootstraps, name, err, sizeof(err));
        if (!conf || aagw_kafka_conf_apply(conf, "producer", c->props,
                                           c->nprops, err, sizeof(err)) ||
            aagw_kafka_conf_set(conf, "transactional.id", id, err,
                                sizeof(err)) ||
            aagw_kafka_conf_set(conf, "transaction.timeout.ms", "10000", err,
                                sizeof(err)) ||
            !(p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
                if (conf)
                        rd_kafka_conf_destroy(conf);
                result(c, false, "transactions", "FAILED (%s)", err);
                return;
        }
        e = rd_kafka_init_transactions(p, left > 1000 ? (int)left : 1000);
        if (!e)
                result(c, true, "transactions",
                       "allowed (init_transactions for transactional.id %s "
                       "in %.1f s)",
                       id, (double)(aagw_mono_ms() - t0) / 1000.0);
        else if (rd_kafka_error_code(e) ==
                     RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED ||
                 rd_kafka_error_code(e) ==
                     RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
                result(c, false, "transactions",
                       "DENIED (transactional.id %s: %s; allow %s WRITE and "
                       "DESCRIBE on the transactional ids aagw.%s., a "
                       "PREFIXED ACL)",
                       id, rd_kafka_error_string(e), c->who,
                       aagw_config_settings(c->cfg)->gateway.id);
        else
                result(c, false, "transactions",
                       "FAILED (transactional.id %s: %s)", id,
                       rd_kafka_error_string(e));
        if (e)
                rd_kafka_error_destroy(e);
        rd_kafka_destroy(p);
}

static void *ops_main(void *arg) {
        struct cc *c        = arg;
        int64_t    deadline = aagw_mono_ms() + CHECK_MS;

        check_topics(c, deadline);
        check_groups(c, deadline);
        check_create(c, deadline);
        check_idempotent(c);
        check_txn(c, deadline);
        return NULL;
}

/* ------------------------------------------------------------ COMMAND --- */

static void run_round(struct cc *cs, size_t n, void *(*fn)(void *)) {
        pthread_t t[AAGW_SITES_MAX];
        bool      own[AAGW_SITES_MAX] = {false};

        for (size_t i = 0; i < n; i++)
                if ((fn == login_main || cs[i].in) &&
                    !(own[i] = !pthread_create(&t[i], NULL, fn, &cs[i])))
                        fn(&cs[i]);
        for (size_t i = 0; i < n; i++)
                if (own[i])
                        pthread_join(t[i], NULL);
}

int gw_connect_check(const aagw_config_t *cfg, FILE *out) {
        const struct aagw_settings *set = aagw_config_settings(cfg);
        size_t                      n   = set->nclusters;
        struct cc                   cs[AAGW_SITES_MAX];
        struct gw_plan              plan;
        aagw_repl_policy_t         *pol = NULL;
        char                        err[700];
        int                         rc = EXIT_RUNTIME, checks = 0, failed = 0;
        bool                        scale = set->scale_out.enabled;

        if (n > AAGW_SITES_MAX)
                n = AAGW_SITES_MAX;
        if (gw_plan_flows(cfg, &plan, err, sizeof(err))) {
                gw_errorf("config check --connect: %s", err);
                return EXIT_USAGE;
        }
        if (!(pol = gw_policy_new(cfg, err, sizeof(err)))) {
                gw_errorf("config check --connect: %s", err);
                return EXIT_USAGE;
        }
        srandom((unsigned)aagw_wall_ms() ^ (unsigned)getpid());
        memset(cs, 0, sizeof(cs));
        /* A refused login is told by the bootstraps of the client that
         * met it, as in the engine. */
        aagw_access_reset();
        for (size_t i = 0; i < n; i++) {
                struct cc *c = &cs[i];
                c->cfg        = cfg;
                c->alias      = set->clusters[i].alias;
                c->bootstraps = set->clusters[i].bootstrap_servers;
                c->nprops     = set->clusters[i].properties.n;
                c->props      = set->clusters[i].properties.kv;
                if (!(c->out = open_memstream(&c->text, &c->len)))
                        goto out;
                aagw_access_register(c->alias, c->bootstraps);
        }
        run_round(cs, n, login_main);

        for (size_t i = 0; i < plan.nflows; i++) {
                struct cc *s = cc_of(cs, n, plan.flows[i].src);
                struct cc *d = cc_of(cs, n, plan.flows[i].dst);
                aagw_repl_policy_t *fp = NULL;
                int                 r;

                if (!s || !d)
                        continue;
                if (gw_flow_has_own_topics(cfg, s->alias, d->alias) &&
                    !(fp = gw_policy_new_flow(cfg, s->alias, d->alias, err,
                                              sizeof(err)))) {
                        gw_errorf("config check --connect: %s", err);
                        goto out;
                }
                r = plan_flow(cfg, fp ? fp : pol, s, d, scale);
                aagw_repl_policy_destroy(fp);
                if (r)
                        goto out;
        }
        if (gw_unify_wanted(cfg)) {
                const char *site = set->gateway.site;
                for (size_t i = 0; i < n; i++)
                        if ((!site || !strcmp(site, cs[i].alias)) &&
                            plan_unify(cfg, &cs[i], scale))
                                goto out;
        }
        run_round(cs, n, ops_main);

        for (size_t i = 0; i < n; i++) {
                fclose(cs[i].out);
                cs[i].out = NULL;
                fwrite(cs[i].text, 1, cs[i].len, out);
                checks += cs[i].checks;
                failed += cs[i].failed;
        }
        fflush(out);
        if (failed) {
                char all[2048] = "";
                for (size_t i = 0, l = 0; i < n && l < sizeof(all); i++)
                        if (cs[i].failed)
                                l += (size_t)snprintf(all + l,
                                                      sizeof(all) - l, "%s%s",
                                                      l ? "; " : "",
                                                      cs[i].fails);
                gw_errorf("config check --connect: %d of %d checks failed: "
                          "%s",
                          failed, checks, all);
        }
        rc = failed ? EXIT_RUNTIME : EXIT_OK;
out:
        for (size_t i = 0; i < n; i++) {
                struct cc *c = &cs[i];
                if (c->out)
                        fclose(c->out);
                free(c->text);
                if (c->rk)
                        rd_kafka_destroy(c->rk);
                for (size_t k = 0; k < c->nseen; k++)
                        free(c->seen[k]);
                free(c->seen);
                for (size_t k = 0; k < c->nneed; k++)
                        free(c->need[k].topic);
                free(c->need);
                for (size_t k = 0; k < c->ngroups; k++)
                        free(c->groups[k]);
                free(c->groups);
        }
        aagw_access_reset();
        aagw_repl_policy_destroy(pol);
        return rc;
}
