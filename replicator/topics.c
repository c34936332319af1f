/*
 * replicator/topics.c: the remote topics of one flow, as MirrorMaker 2
 * keeps them: created with the source's partition count, a replication
 * factor and the source's topic configs; grown when the source grows;
 * their configs and ACLs kept in line with the source's.
 *
 * The Admin API work of a flow lives here, on two admin handles of its
 * own (one per cluster), never on the data path's clients:
 *   - topics_create() and topics_grow() run on the flow's maker thread
 *     (flow_topics.c) when discovery finds a new topic or more source
 *     partitions (each call is bounded by ADMIN_TIMEOUT_MS; a cluster that
 *     lacks the API, such as the embedded one, is remembered and not asked
 *     again);
 *   - config and ACL sync run on a thread of their own (topics_track()
 *     hands it the topics), first when a topic is tracked, then every
 *     configured interval, so a slow DescribeConfigs never stalls a copy.
 *
 * Configs.  Only the source topic's own overrides are copied (config
 * source DYNAMIC_TOPIC_CONFIG: what `kafka-configs --alter` or
 * CreateTopics set on the topic), minus what aagw_repl_config_allowed()
 * refuses (MM2's default exclusions plus the user's list), with
 * IncrementalAlterConfigs: a value that differs is set, an override of a
 * copied name that the source no longer has is deleted, and the target's
 * own overrides of excluded names (a min.insync.replicas set at the
 * target) are never named, so they stay.  Sent only when something
 * differs.
 *
 * ACLs.  As MM2's sync.topic.acls: the LITERAL topic ACLs of a replicated
 * topic are created for its remote name, with ALLOW ALL turned into ALLOW
 * READ and ALLOW WRITE left out (only aagw writes a copy).  ACLs are added,
 * never deleted (as MM2).  A cluster without an authorizer answers
 * SECURITY_DISABLED: logged once, ACL sync then rests for that flow.
 */
#include "replicator_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ADMIN_TIMEOUT_MS 3000
#define MAX_CONFIGS 128

struct ttopic {
        char *topic, *remote;
        bool  fresh; /* not synced yet */
};

struct topics {
        char                      name[2 * AAGW_ALIAS_MAX + 3];
        const aagw_repl_policy_t *pol;
        struct aagw_topics_conf   conf;
        rd_kafka_t               *src, *tgt; /* admin handles, owned */

        /* What a cluster was found to lack (set once, by either thread). */
        atomic_bool create_unsupported, grow_unsupported, describe_unsupported,
            acls_unsupported;
        atomic_bool quit; /* topics_stop(): abandon calls in progress */

        pthread_t       thread;
        bool            thread_started;
        pthread_mutex_t lock; /* list, stop, wake */
        pthread_cond_t  cond;
        bool            stop, wake;
        struct ttopic  *list;
        size_t          n, cap;

        _Atomic uint64_t configs_synced, acls_synced, sync_errors;
};

/* --------------------------------------------------------- ADMIN CALLS -- */

static rd_kafka_AdminOptions_t *admin_opts(rd_kafka_t *rk,
                                           rd_kafka_admin_op_t op) {
        char                     why[256];
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, op);

        rd_kafka_AdminOptions_set_request_timeout(o, ADMIN_TIMEOUT_MS, why,
                                                  sizeof(why));
        if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS ||
            op == RD_KAFKA_ADMIN_OP_CREATEPARTITIONS)
                rd_kafka_AdminOptions_set_operation_timeout(
                    o, ADMIN_TIMEOUT_MS, why, sizeof(why));
        return o;
}

/* Wait for the answer on 'q', in slices, so that a flow being stopped
 * does not wait out a cluster that never answers (the embedded one). */
static rd_kafka_event_t *admin_poll(struct topics *t, rd_kafka_queue_t *q) {
        int64_t           deadline = aagw_mono_ms() + ADMIN_TIMEOUT_MS + 2000;
        rd_kafka_event_t *ev       = NULL;

        while (!ev && !atomic_load(&t->quit) && aagw_mono_ms() < deadline)
                ev = rd_kafka_queue_poll(q, 100);
        return ev;
}

/* The result event of a request on 'q', or NULL with the reason in
 * 'errstr' (no answer, or an error for the whole request). */
static rd_kafka_event_t *admin_wait(struct topics *t, rd_kafka_queue_t *q,
                                    char *errstr, size_t errstr_size) {
        rd_kafka_event_t *ev = admin_poll(t, q);

        if (!ev) {
                snprintf(errstr, errstr_size, "no answer in %d ms",
                         ADMIN_TIMEOUT_MS + 2000);
                return NULL;
        }
        if (rd_kafka_event_error(ev)) {
                snprintf(errstr, errstr_size, "%s",
                         rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
                return NULL;
        }
        return ev;
}

/* Errors that say "this cluster does not offer that": remembered, so the
 * embedded cluster (which times out or answers unsupported) is asked once. */
static bool lacks_feature(rd_kafka_resp_err_t e) {
        return e == RD_KAFKA_RESP_ERR__TIMED_OUT ||
               e == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT ||
               e == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ||
               e == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION ||
               e == RD_KAFKA_RESP_ERR_INVALID_REQUEST ||
               e == RD_KAFKA_RESP_ERR_NOT_CONTROLLER;
}

/* ------------------------------------------------------------- CONFIGS -- */

struct kv {
        char *name, *value;
};

static void kvs_free(struct kv *kv, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(kv[i].name);
                free(kv[i].value);
        }
}

static const char *kv_get(const struct kv *kv, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (!strcmp(kv[i].name, name))
                        return kv[i].value;
        return NULL;
}

/* The overrides of 'topic' at the cluster of 'rk' (config source
 * DYNAMIC_TOPIC_CONFIG, not sensitive) into 'out' (at most MAX_CONFIGS).
 * Returns the count, -1 on error, -2 if the cluster cannot describe
 * configs (reason in 'errstr'). */
static int describe_overrides(struct topics *t, rd_kafka_t *rk,
                              const char *topic,
                              struct kv *out, char *errstr,
                              size_t errstr_size) {
        rd_kafka_ConfigResource_t *res =
            rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_queue_t        *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o =
            admin_opts(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
        rd_kafka_event_t        *ev;
        int                      n = 0;

        rd_kafka_DescribeConfigs(rk, &res, 1, o, q);
        ev = admin_wait(t, q, errstr, errstr_size);
        if (!ev) {
                n = -2;
        } else {
                size_t                            rn, cn;
                const rd_kafka_ConfigResource_t **rr =
                    rd_kafka_DescribeConfigs_result_resources(
                        rd_kafka_event_DescribeConfigs_result(ev), &rn);
                rd_kafka_resp_err_t e =
                    aagw_kafka_config_err(rr, rn, errstr, errstr_size);
                if (e) {
                        replicator_note_authz_rk(rk, e, "DESCRIBE_CONFIGS",
                                                 "topic %s", topic);
                        n = lacks_feature(e) ? -2 : -1;
                } else {
                        const rd_kafka_ConfigEntry_t **ce =
                            rd_kafka_ConfigResource_configs(rr[0], &cn);
                        for (size_t i = 0; i < cn && n < MAX_CONFIGS; i++) {
                                const char *v =
                                    rd_kafka_ConfigEntry_value(ce[i]);
                                if (!v ||
                                    rd_kafka_ConfigEntry_source(ce[i]) !=
                                        RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG ||
                                    rd_kafka_ConfigEntry_is_sensitive(ce[i]))
                                        continue;
                                out[n].name =
                                    strdup(rd_kafka_ConfigEntry_name(ce[i]));
                                out[n].value = strdup(v);
                                if (out[n].name && out[n].value)
                                        n++;
                                else
                                        kvs_free(&out[n], 1);
                        }
                }
                rd_kafka_event_destroy(ev);
        }
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        rd_kafka_ConfigResource_destroy(res);
        return n;
}

/* The source overrides of 'topic' that are copied, into 'out'.  Returns
 * the count; 0 as well when the source cannot describe configs (logged
 * once: copies then keep the target's defaults). */
static int source_configs(struct topics *t, const char *topic,
                          struct kv *out) {
        struct kv all[MAX_CONFIGS];
        char      err[256];
        int       n, k = 0;

        if (atomic_load(&t->describe_unsupported))
                return 0;
        n = describe_overrides(t, t->src, topic, all, err, sizeof(err));
        if (n < 0 && atomic_load(&t->quit))
                return -1; /* stopping: no verdict on the cluster */
        if (n == -2) {
                atomic_store(&t->describe_unsupported, true);
                aagw_log(AAGW_LOG_WARN, "TOPICS",
                         "%s: the source does not describe topic configs (%s); "
                         "remote topics get the target's defaults",
                         t->name, err);
                return 0;
        }
        if (n < 0) {
                aagw_log(AAGW_LOG_WARN, "TOPICS",
                         "%s: describing the configs of %s: %s", t->name,
                         topic, err);
                return -1;
        }
        for (int i = 0; i < n; i++) {
                if (aagw_repl_config_allowed(t->pol, all[i].name))
                        out[k++] = all[i];
                else
                        kvs_free(&all[i], 1);
        }
        return k;
}

/* Bring the overrides of 'remote' at the target in line with those of
 * 'topic' at the source (see the file comment). */
static void sync_configs(struct topics *t, const char *topic,
                         const char *remote) {
        struct kv want[MAX_CONFIGS], have[MAX_CONFIGS];
        int       nw, nh;
        bool      differ = false;
        char      err[256];

        if ((nw = source_configs(t, topic, want)) < 0) {
                atomic_fetch_add(&t->sync_errors, 1);
                return;
        }
        if (atomic_load(&t->describe_unsupported))
                return;
        nh = describe_overrides(t, t->tgt, remote, have, err, sizeof(err));
        if (nh < 0) {
                aagw_log(AAGW_LOG_WARN, "TOPICS",
                         "%s: describing the configs of %s at the target: %s",
                         t->name, remote, err);
                atomic_fetch_add(&t->sync_errors, 1);
                kvs_free(want, (size_t)nw);
                return;
        }
        for (int i = 0; i < nw && !differ; i++) {
                const char *v = kv_get(have, (size_t)nh, want[i].name);
                differ = !v || strcmp(v, want[i].value);
        }
        for (int i = 0; i < nh && !differ; i++)
                differ = aagw_repl_config_allowed(t->pol, have[i].name) &&
                         !kv_get(want, (size_t)nw, have[i].name);
        if (differ) {
                rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(
                    RD_KAFKA_RESOURCE_TOPIC, remote);
                rd_kafka_queue_t        *q = rd_kafka_queue_new(t->tgt);
                rd_kafka_AdminOptions_t *o = admin_opts(
                    t->tgt, RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS);
                rd_kafka_event_t        *ev;
                rd_kafka_error_t        *e1 = NULL;

                for (int i = 0; i < nw && !e1; i++) {
                        const char *v = kv_get(have, (size_t)nh, want[i].name);
                        if (!v || strcmp(v, want[i].value))
                                e1 = rd_kafka_ConfigResource_add_incremental_config(
                                    res, want[i].name,
                                    RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET,
                                    want[i].value);
                }
                for (int i = 0; i < nh && !e1; i++)
                        if (aagw_repl_config_allowed(t->pol, have[i].name) &&
                            !kv_get(want, (size_t)nw, have[i].name))
                                e1 = rd_kafka_ConfigResource_add_incremental_config(
                                    res, have[i].name,
                                    RD_KAFKA_ALTER_CONFIG_OP_TYPE_DELETE, NULL);
                if (e1) {
                        /* (Only for a name librdkafka finds malformed.) */
                        snprintf(err, sizeof(err), "%s",
                                 rd_kafka_error_string(e1));
                        rd_kafka_error_destroy(e1);
                        ev = NULL;
                } else {
                        rd_kafka_IncrementalAlterConfigs(t->tgt, &res, 1, o, q);
                        ev = admin_wait(t, q, err, sizeof(err));
                }
                if (ev) {
                        size_t                            rn;
                        const rd_kafka_ConfigResource_t **rr =
                            rd_kafka_IncrementalAlterConfigs_result_resources(
                                rd_kafka_event_IncrementalAlterConfigs_result(
                                    ev),
                                &rn);
                        rd_kafka_resp_err_t e =
                            aagw_kafka_config_err(rr, rn, err, sizeof(err));
                        rd_kafka_event_destroy(ev);
                        replicator_note_authz_rk(t->tgt, e, "ALTER_CONFIGS",
                                                 "topic %s", remote);
                        if (!e) {
                                atomic_fetch_add(&t->configs_synced, 1);
                                aagw_log(AAGW_LOG_INFO, "TOPICS",
                                         "%s: configs of %s applied to %s "
                                         "(%d copied)",
                                         t->name, topic, remote, nw);
                        } else
                                ev = NULL;
                }
                if (!ev) {
                        atomic_fetch_add(&t->sync_errors, 1);
                        aagw_log(AAGW_LOG_WARN, "TOPICS",
                                 "%s: altering the configs of %s at the "
                                 "target: %s",
                                 t->name, remote, err);
                }
                rd_kafka_AdminOptions_destroy(o);
                rd_kafka_queue_destroy(q);
                rd_kafka_ConfigResource_destroy(res);
        }
        kvs_free(want, (size_t)nw);
        kvs_free(have, (size_t)nh);
}

/* ---------------------------------------------------------------- ACLS -- */

/* The LITERAL ACLs of topic 'name' at the cluster of 'rk' into '*acls'
 * ('*cnt' of them), owned by '*evp' (rd_kafka_event_destroy() frees
 * both).  Returns 0, or -1 with the error in '*errp' and the reason in
 * 'errstr'. */
static int describe_acls(struct topics *t, rd_kafka_t *rk, const char *name,
                         rd_kafka_event_t **evp,
                         const rd_kafka_AclBinding_t ***acls, size_t *cnt,
                         rd_kafka_resp_err_t *errp, char *errstr,
                         size_t errstr_size) {
        char                         why[256];
        rd_kafka_AclBindingFilter_t *flt = rd_kafka_AclBindingFilter_new(
            RD_KAFKA_RESOURCE_TOPIC, name, RD_KAFKA_RESOURCE_PATTERN_LITERAL,
            NULL, NULL, RD_KAFKA_ACL_OPERATION_ANY,
            RD_KAFKA_ACL_PERMISSION_TYPE_ANY, why, sizeof(why));
        rd_kafka_queue_t        *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o =
            admin_opts(rk, RD_KAFKA_ADMIN_OP_DESCRIBEACLS);
        rd_kafka_event_t        *ev;
        int                      rc = -1;

        *evp  = NULL;
        *acls = NULL;
        *cnt  = 0;
        *errp = RD_KAFKA_RESP_ERR__FAIL;
        if (!flt) {
                snprintf(errstr, errstr_size, "%s", why);
                goto out;
        }
        rd_kafka_DescribeAcls(rk, flt, o, q);
        ev = admin_poll(t, q);
        if (!ev) {
                *errp = RD_KAFKA_RESP_ERR__TIMED_OUT;
                snprintf(errstr, errstr_size, "no answer");
        } else if ((*errp = rd_kafka_event_error(ev))) {
                replicator_note_authz_rk(rk, *errp, "DESCRIBE",
                                         "the ACLs of topic %s", name);
                snprintf(errstr, errstr_size, "%s",
                         rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
        } else {
                *evp  = ev;
                *acls = rd_kafka_DescribeAcls_result_acls(
                    rd_kafka_event_DescribeAcls_result(ev), cnt);
                if (!*acls)
                        *cnt = 0;
                rc = 0;
        }
out:
        rd_kafka_AclBinding_destroy(flt);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        return rc;
}

static bool same_acl(const rd_kafka_AclBinding_t *a, const char *principal,
                     const char *host, rd_kafka_AclOperation_t op,
                     rd_kafka_AclPermissionType_t perm) {
        return !strcmp(rd_kafka_AclBinding_principal(a), principal) &&
               !strcmp(rd_kafka_AclBinding_host(a), host) &&
               rd_kafka_AclBinding_operation(a) == op &&
               rd_kafka_AclBinding_permission_type(a) == perm;
}

/* Give 'remote' at the target the source ACLs of 'topic' (file comment). */
static void sync_acls(struct topics *t, const char *topic, const char *remote) {
        rd_kafka_event_t            *sev = NULL, *tev = NULL;
        const rd_kafka_AclBinding_t **sa, **ta;
        int                          rc;
        size_t                       sn = 0, tn = 0, nnew = 0;
        rd_kafka_AclBinding_t       *nb[64];
        rd_kafka_resp_err_t          e;
        char                         err[256], why[256];

        if (atomic_load(&t->acls_unsupported))
                return;
        rc = describe_acls(t, t->src, topic, &sev, &sa, &sn, &e, err, sizeof(err));
        if (!rc)
                rc = describe_acls(t, t->tgt, remote, &tev, &ta, &tn, &e, err,
                                   sizeof(err));
        if (rc && atomic_load(&t->quit))
                goto out;
        if (rc) {
                if (e == RD_KAFKA_RESP_ERR_SECURITY_DISABLED ||
                    lacks_feature(e)) {
                        atomic_store(&t->acls_unsupported, true);
                        aagw_log(AAGW_LOG_INFO, "TOPICS",
                                 "%s: no topic ACL sync: %s (no authorizer, "
                                 "or no ACL API)",
                                 t->name, err);
                } else {
                        atomic_fetch_add(&t->sync_errors, 1);
                        aagw_log(AAGW_LOG_WARN, "TOPICS",
                                 "%s: describing the ACLs of %s / %s: %s",
                                 t->name, topic, remote, err);
                }
                goto out;
        }
        for (size_t i = 0; i < sn && nnew < 64; i++) {
                rd_kafka_AclOperation_t op =
                    rd_kafka_AclBinding_operation(sa[i]);
                rd_kafka_AclPermissionType_t perm =
                    rd_kafka_AclBinding_permission_type(sa[i]);
                const char *principal = rd_kafka_AclBinding_principal(sa[i]);
                const char *host      = rd_kafka_AclBinding_host(sa[i]);
                bool        have      = false;

                if (perm == RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW) {
                        /* Only aagw writes a copy: no ALLOW WRITE, and
                         * ALLOW ALL becomes ALLOW READ (as MM2). */
                        if (op == RD_KAFKA_ACL_OPERATION_WRITE)
                                continue;
                        if (op == RD_KAFKA_ACL_OPERATION_ALL)
                                op = RD_KAFKA_ACL_OPERATION_READ;
                }
                for (size_t j = 0; j < tn && !have; j++)
                        have = same_acl(ta[j], principal, host, op, perm);
                if (have)
                        continue;
                nb[nnew] = rd_kafka_AclBinding_new(
                    RD_KAFKA_RESOURCE_TOPIC, remote,
                    RD_KAFKA_RESOURCE_PATTERN_LITERAL, principal, host, op,
                    perm, why, sizeof(why));
                if (nb[nnew])
                        nnew++;
        }
        if (nnew) {
                rd_kafka_queue_t        *q = rd_kafka_queue_new(t->tgt);
                rd_kafka_AdminOptions_t *o =
                    admin_opts(t->tgt, RD_KAFKA_ADMIN_OP_CREATEACLS);
                rd_kafka_event_t        *ev;
                size_t                   rn = 0, bad = 0;

                rd_kafka_CreateAcls(t->tgt, nb, nnew, o, q);
                ev = admin_wait(t, q, err, sizeof(err));
                if (ev) {
                        const rd_kafka_acl_result_t **rr =
                            rd_kafka_CreateAcls_result_acls(
                                rd_kafka_event_CreateAcls_result(ev), &rn);
                        for (size_t i = 0; i < rn; i++) {
                                const rd_kafka_error_t *re =
                                    rd_kafka_acl_result_error(rr[i]);
                                if (re && !bad++) {
                                        snprintf(err, sizeof(err), "%s",
                                                 rd_kafka_error_string(re));
                                        replicator_note_authz_rk(
                                            t->tgt, rd_kafka_error_code(re),
                                            "ALTER", "the ACLs of topic %s",
                                            remote);
                                }
                        }
                        rd_kafka_event_destroy(ev);
                } else
                        bad = nnew;
                if (bad) {
                        atomic_fetch_add(&t->sync_errors, 1);
                        aagw_log(AAGW_LOG_WARN, "TOPICS",
                                 "%s: creating %zu of %zu ACLs of %s: %s",
                                 t->name, bad, nnew, remote, err);
                } else {
                        atomic_fetch_add(&t->acls_synced, nnew);
                        aagw_log(AAGW_LOG_INFO, "TOPICS",
                                 "%s: %zu ACLs of %s created for %s",
                                 t->name, nnew, topic, remote);
                }
                rd_kafka_AdminOptions_destroy(o);
                rd_kafka_queue_destroy(q);
                rd_kafka_AclBinding_destroy_array(nb, nnew);
        }
out:
        if (sev)
                rd_kafka_event_destroy(sev);
        if (tev)
                rd_kafka_event_destroy(tev);
}

/* ------------------------------------------------------ CREATE / GROW -- */

int topics_create(struct topics *t, const char *topic, const char *remote,
                  int partitions, char *errstr, size_t errstr_size) {
        struct kv   cf[MAX_CONFIGS];
        const char *kv[2 * MAX_CONFIGS + 1];
        int         ncf = 0, rc;

        if (atomic_load(&t->create_unsupported)) {
                snprintf(errstr, errstr_size,
                         "the target does not create topics through the "
                         "Admin API");
                return -2;
        }
        if (t->conf.sync_configs && (ncf = source_configs(t, topic, cf)) < 0)
                ncf = 0; /* created without; the sync applies them later */
        for (int i = 0; i < ncf; i++) {
                kv[2 * i]     = cf[i].name;
                kv[2 * i + 1] = cf[i].value;
        }
        kv[2 * ncf] = NULL;
        rc = aagw_kafka_topic_create_rf(t->tgt, remote, partitions,
                                        t->conf.replication_factor, kv,
                                        ADMIN_TIMEOUT_MS, errstr, errstr_size);
        if (rc == -2)
                atomic_store(&t->create_unsupported, true);
        if (rc == 0)
                aagw_log(AAGW_LOG_INFO, "TOPICS",
                         "%s: created %s with %d partitions, replication "
                         "factor %d (0: the broker's default), %d configs of "
                         "%s",
                         t->name, remote, partitions,
                         t->conf.replication_factor > 0
                             ? t->conf.replication_factor
                             : 0,
                         ncf, topic);
        kvs_free(cf, (size_t)ncf);
        return rc;
}

int topics_grow(struct topics *t, const char *remote, int partitions,
                char *errstr, size_t errstr_size) {
        rd_kafka_NewPartitions_t *np;
        rd_kafka_queue_t         *q;
        rd_kafka_AdminOptions_t  *o;
        rd_kafka_event_t         *ev;
        char                      why[256];
        int                       rc;

        if (atomic_load(&t->grow_unsupported)) {
                snprintf(errstr, errstr_size,
                         "the target does not add partitions through the "
                         "Admin API");
                return -2;
        }
        np = rd_kafka_NewPartitions_new(remote, (size_t)partitions, why,
                                        sizeof(why));
        if (!np) {
                snprintf(errstr, errstr_size, "%s", why);
                return -1;
        }
        q = rd_kafka_queue_new(t->tgt);
        o = admin_opts(t->tgt, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
        rd_kafka_CreatePartitions(t->tgt, &np, 1, o, q);
        ev = admin_wait(t, q, errstr, errstr_size);
        if (!ev) {
                rc = -2;
        } else {
                size_t                          n;
                const rd_kafka_topic_result_t **tr =
                    rd_kafka_CreatePartitions_result_topics(
                        rd_kafka_event_CreatePartitions_result(ev), &n);
                rd_kafka_resp_err_t e = n ? rd_kafka_topic_result_error(tr[0])
                                          : RD_KAFKA_RESP_ERR__FAIL;
                rc = !e ? 0 : lacks_feature(e) ? -2 : -1;
                replicator_note_authz_rk(t->tgt, e, "ALTER", "topic %s",
                                         remote);
                if (rc)
                        snprintf(errstr, errstr_size, "%s",
                                 n && rd_kafka_topic_result_error_string(tr[0])
                                     ? rd_kafka_topic_result_error_string(tr[0])
                                     : rd_kafka_err2str(e));
                rd_kafka_event_destroy(ev);
        }
        if (rc == -2)
                atomic_store(&t->grow_unsupported, true);
        else if (rc == 0)
                aagw_log(AAGW_LOG_INFO, "TOPICS",
                         "%s: %s grown to %d partitions at the target",
                         t->name, remote, partitions);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        rd_kafka_NewPartitions_destroy(np);
        return rc;
}

/* ---------------------------------------------------------- THE THREAD -- */

static void *topics_main(void *arg) {
        struct topics *t = arg;
        int64_t        next_cfg = 0, next_acl = 0;

        replicator_thread_stop_flag(&t->quit);
        pthread_mutex_lock(&t->lock);
        while (!t->stop) {
                int64_t now = aagw_mono_ms();
                bool    do_cfg = t->conf.sync_configs && now >= next_cfg;
                bool    do_acl = t->conf.sync_acls && now >= next_acl;

                /* One topic at a time, the list unlocked around the calls
                 * (topics_track() only appends; entries never move out). */
                for (size_t i = 0; i < t->n && !t->stop; i++) {
                        bool  fresh = t->list[i].fresh;
                        char *topic = t->list[i].topic;
                        char *remote = t->list[i].remote;

                        if (!fresh && !do_cfg && !do_acl)
                                continue;
                        t->list[i].fresh = false;
                        pthread_mutex_unlock(&t->lock);
                        if (t->conf.sync_configs && (fresh || do_cfg))
                                sync_configs(t, topic, remote);
                        if (t->conf.sync_acls && (fresh || do_acl))
                                sync_acls(t, topic, remote);
                        pthread_mutex_lock(&t->lock);
                }
                now = aagw_mono_ms();
                if (do_cfg)
                        next_cfg = now + t->conf.configs_interval_ms;
                if (do_acl)
                        next_acl = now + t->conf.acls_interval_ms;
                if (t->wake) {
                        t->wake = false;
                        continue;
                }
                int64_t due = INT64_MAX;
                if (t->conf.sync_configs)
                        due = next_cfg;
                if (t->conf.sync_acls && next_acl < due)
                        due = next_acl;
                int64_t wait = due == INT64_MAX ? 60000 : due - now;
                if (wait > 60000)
                        wait = 60000;
                if (wait > 0) {
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += wait / 1000;
                        ts.tv_nsec += (wait % 1000) * 1000000L;
                        if (ts.tv_nsec >= 1000000000L) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000L;
                        }
                        if (!t->wake && !t->stop)
                                pthread_cond_timedwait(&t->cond, &t->lock, &ts);
                        t->wake = false;
                }
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

void topics_track(struct topics *t, const char *topic, const char *remote) {
        if (!t || (!t->conf.sync_configs && !t->conf.sync_acls))
                return;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->n; i++)
                if (!strcmp(t->list[i].topic, topic)) {
                        pthread_mutex_unlock(&t->lock);
                        return;
                }
        if (t->n == t->cap) {
                size_t         ncap = t->cap ? t->cap * 2 : 16;
                struct ttopic *nl   = realloc(t->list, ncap * sizeof(*nl));
                if (!nl) {
                        pthread_mutex_unlock(&t->lock);
                        return;
                }
                t->list = nl;
                t->cap  = ncap;
        }
        t->list[t->n].topic  = strdup(topic);
        t->list[t->n].remote = strdup(remote);
        t->list[t->n].fresh  = true;
        if (t->list[t->n].topic && t->list[t->n].remote)
                t->n++;
        else {
                free(t->list[t->n].topic);
                free(t->list[t->n].remote);
        }
        t->wake = true;
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->lock);
}

/* ----------------------------------------------------------- LIFECYCLE -- */

struct topics *topics_new(const char *name, const aagw_repl_policy_t *pol,
                          const struct aagw_topics_conf *c, rd_kafka_t *src,
                          rd_kafka_t *tgt) {
        struct topics *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->pol  = pol;
        t->conf = *c;
        if (t->conf.configs_interval_ms <= 0)
                t->conf.configs_interval_ms = 600000;
        if (t->conf.acls_interval_ms <= 0)
                t->conf.acls_interval_ms = 600000;
        t->src = src;
        t->tgt = tgt;
        pthread_mutex_init(&t->lock, NULL);
        pthread_cond_init(&t->cond, NULL);
        return t;
}

int topics_start(struct topics *t, char *errstr, size_t errstr_size) {
        int rc;

        if (!t->conf.sync_configs && !t->conf.sync_acls)
                return 0;
        rc = pthread_create(&t->thread, NULL, topics_main, t);
        if (rc) {
                snprintf(errstr, errstr_size, "cannot start thread: %s",
                         strerror(rc));
                return -1;
        }
        t->thread_started = true;
        return 0;
}

void topics_stop(struct topics *t) {
        if (!t)
                return;
        atomic_store(&t->quit, true);
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->lock);
}

void topics_destroy(struct topics *t) {
        if (!t)
                return;
        topics_stop(t);
        if (t->thread_started)
                pthread_join(t->thread, NULL);
        for (size_t i = 0; i < t->n; i++) {
                free(t->list[i].topic);
                free(t->list[i].remote);
        }
        free(t->list);
        replicator_destroy_clients(
            (const struct replicator_doomed[]){{t->src, 0}, {t->tgt, 0}}, 2);
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        free(t);
}

void topics_stats(const struct topics *tc, struct aagw_flow_stats *st) {
        struct topics *t = (struct topics *)tc;

        if (!t)
                return;
        st->topic_configs_synced = atomic_load(&t->configs_synced);
        st->topic_acls_synced    = atomic_load(&t->acls_synced);
        st->topic_sync_errors    = atomic_load(&t->sync_errors);
}
