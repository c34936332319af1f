/*
 * replicator/members.c: who shares a site's work, as Kafka sees it.
 *
 * Under scale-out every stage's ownership is the assignment of its owner
 * group (replicator/owner.c).  A process knows what it owns itself; what
 * the others own only the group coordinator knows.  This thread asks it
 * (DescribeConsumerGroups) for every owner group of the site at an
 * interval, and keeps the last answer for /status and /metrics.  Nothing
 * here decides anything: it is a view.
 */
#include "replicator_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DESCRIBE_TIMEOUT_MS 5000

struct aagw_members {
        rd_kafka_t             *admin;
        size_t                  n;
        struct aagw_group_info *view;  /* n, under 'lock' */
        struct aagw_group_info *fresh; /* n, the thread's scratch */
        pthread_mutex_t         lock;
        pthread_cond_t          wake;
        bool                    stop;
        int                     interval_ms;
        pthread_t               thread;
        bool                    started;
        bool                    refused; /* a description failed */
};

/* The member's name and instance from its owner consumer's client.id
 * ("aagw-MEMBER-owner~INSTANCE", see owner.c; "aagw-MEMBER-owner" from
 * a version before instances): the client id itself and no instance if
 * it has another shape (another tool in the group). */
static void member_name(const char *client_id, struct aagw_member_info *m) {
        const char *tilde = strrchr(client_id, '~');
        size_t      len   = tilde ? (size_t)(tilde - client_id)
                                  : strlen(client_id);

        m->instance[0] = '\0';
        if (len > 11 && !strncmp(client_id, "aagw-", 5) &&
            !strncmp(client_id + len - 6, "-owner", 6)) {
                snprintf(m->member, sizeof(m->member), "%.*s",
                         (int)(len - 11), client_id + 5);
                if (tilde)
                        snprintf(m->instance, sizeof(m->instance), "%s",
                                 tilde + 1);
        } else {
                snprintf(m->member, sizeof(m->member), "%s", client_id);
        }
}

static int cmp_part(const void *a, const void *b) {
        int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
        return (x > y) - (x < y);
}

static void take_group(struct aagw_group_info *g,
                       const rd_kafka_ConsumerGroupDescription_t *d) {
        const rd_kafka_error_t *e = rd_kafka_ConsumerGroupDescription_error(d);
        size_t                  cnt;

        g->n = 0;
        if (e) {
                snprintf(g->error, sizeof(g->error), "%s",
                         rd_kafka_error_string(e));
                snprintf(g->state, sizeof(g->state), "unknown");
                return;
        }
        g->error[0] = '\0';
        snprintf(g->state, sizeof(g->state), "%s",
                 rd_kafka_consumer_group_state_name(
                     rd_kafka_ConsumerGroupDescription_state(d)));
        cnt = rd_kafka_ConsumerGroupDescription_member_count(d);
        for (size_t i = 0; i < cnt && g->n < AAGW_MEMBERS_MAX; i++) {
                const rd_kafka_MemberDescription_t *md =
                    rd_kafka_ConsumerGroupDescription_member(d, i);
                const rd_kafka_topic_partition_list_t *pl =
                    rd_kafka_MemberAssignment_partitions(
                        rd_kafka_MemberDescription_assignment(md));
                struct aagw_member_info *m = &g->m[g->n++];

                member_name(rd_kafka_MemberDescription_client_id(md), m);
                snprintf(m->id, sizeof(m->id), "%s",
                         rd_kafka_MemberDescription_consumer_id(md));
                snprintf(m->host, sizeof(m->host), "%s",
                         rd_kafka_MemberDescription_host(md));
                m->nparts = 0;
                for (int k = 0; pl && k < pl->cnt &&
                                m->nparts < AAGW_MEMBERS_PARTS_MAX;
                     k++)
                        m->parts[m->nparts++] = pl->elems[k].partition;
                qsort(m->parts, (size_t)m->nparts, sizeof(m->parts[0]),
                      cmp_part);
        }
}

bool members_describe(rd_kafka_t *admin, struct aagw_group_info *g,
                      size_t n, int timeout_ms) {
        const char             **names = calloc(n, sizeof(*names));
        rd_kafka_queue_t        *q     = rd_kafka_queue_new(admin);
        rd_kafka_AdminOptions_t *opt   = rd_kafka_AdminOptions_new(
            admin, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
        rd_kafka_event_t        *ev    = NULL;
        char                     err[256] = "";
        int64_t                  now      = aagw_wall_ms();

        if (!names) {
                snprintf(err, sizeof(err), "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                names[i]    = g[i].group;
                g[i].at_ms  = now;
        }
        rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, err,
                                                  sizeof(err));
        rd_kafka_DescribeConsumerGroups(admin, names, n, opt, q);
        bool late;
        ev = aagw_kafka_admin_answer(q, timeout_ms, &late, err, sizeof(err));
        if (ev) {
                const rd_kafka_DescribeConsumerGroups_result_t *res =
                    rd_kafka_event_DescribeConsumerGroups_result(ev);
                size_t cnt = 0;
                const rd_kafka_ConsumerGroupDescription_t **d =
                    res ? rd_kafka_DescribeConsumerGroups_result_groups(res,
                                                                        &cnt)
                        : NULL;
                err[0] = '\0';
                for (size_t i = 0; i < n; i++) {
                        snprintf(g[i].error, sizeof(g[i].error),
                                 "not in the answer");
                        snprintf(g[i].state, sizeof(g[i].state), "unknown");
                        g[i].n = 0;
                        for (size_t k = 0; k < cnt; k++)
                                if (!strcmp(
                                        rd_kafka_ConsumerGroupDescription_group_id(
                                            d[k]),
                                        g[i].group))
                                        take_group(&g[i], d[k]);
                }
        }
out:
        if (err[0])
                for (size_t i = 0; i < n; i++) {
                        snprintf(g[i].error, sizeof(g[i].error), "%s", err);
                        snprintf(g[i].state, sizeof(g[i].state), "unknown");
                        g[i].n = 0;
                }
        bool ok = !err[0];
        for (size_t i = 0; i < n; i++)
                ok &= !g[i].error[0];
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(opt);
        rd_kafka_queue_destroy(q);
        free(names);
        return ok;
}

/* One round for every group into 'fresh', then published. */
static void describe(struct aagw_members *ms) {
        if (!members_describe(ms->admin, ms->fresh, ms->n,
                              DESCRIBE_TIMEOUT_MS))
                ms->refused = true;
        pthread_mutex_lock(&ms->lock);
        memcpy(ms->view, ms->fresh, ms->n * sizeof(*ms->view));
        pthread_mutex_unlock(&ms->lock);
}

static void *members_main(void *arg) {
        struct aagw_members *ms = arg;

        pthread_mutex_lock(&ms->lock);
        while (!ms->stop) {
                struct timespec until;

                pthread_mutex_unlock(&ms->lock);
                describe(ms);
                pthread_mutex_lock(&ms->lock);
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += ms->interval_ms / 1000;
                until.tv_nsec += (long)(ms->interval_ms % 1000) * 1000000L;
                if (until.tv_nsec >= 1000000000L) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000000000L;
                }
                while (!ms->stop &&
                       pthread_cond_timedwait(&ms->wake, &ms->lock, &until) !=
                           ETIMEDOUT)
                        ;
        }
        pthread_mutex_unlock(&ms->lock);
        return NULL;
}

aagw_members_t *aagw_members_new(const struct aagw_members_conf *c,
                                 char *errstr, size_t errstr_size) {
        struct aagw_kafka_client kc = {.type       = RD_KAFKA_PRODUCER,
                                       .bootstraps = c->bootstraps,
                                       .name       = "members",
                                       .role       = "admin",
                                       .props      = c->props,
                                       .prop_cnt   = c->prop_cnt};
        struct aagw_members *ms = calloc(1, sizeof(*ms));

        if (!ms || !c->n) {
                snprintf(errstr, errstr_size,
                         ms ? "no group to describe" : "out of memory");
                free(ms);
                return NULL;
        }
        ms->n           = c->n;
        ms->interval_ms = c->interval_ms > 0 ? c->interval_ms : 5000;
        ms->view        = calloc(c->n, sizeof(*ms->view));
        ms->fresh       = calloc(c->n, sizeof(*ms->fresh));
        pthread_mutex_init(&ms->lock, NULL);
        pthread_cond_init(&ms->wake, NULL);
        if (!ms->view || !ms->fresh) {
                snprintf(errstr, errstr_size, "out of memory");
                aagw_members_destroy(ms);
                return NULL;
        }
        for (size_t i = 0; i < c->n; i++) {
                snprintf(ms->view[i].group, sizeof(ms->view[i].group), "%s",
                         c->groups[i]);
                snprintf(ms->view[i].stage, sizeof(ms->view[i].stage), "%s",
                         c->stages[i]);
                snprintf(ms->view[i].state, sizeof(ms->view[i].state),
                         "unknown");
                snprintf(ms->view[i].error, sizeof(ms->view[i].error),
                         "not described yet");
        }
        memcpy(ms->fresh, ms->view, c->n * sizeof(*ms->view));
        if (!(ms->admin = aagw_kafka_client_new(&kc, errstr, errstr_size))) {
                aagw_members_destroy(ms);
                return NULL;
        }
        if (pthread_create(&ms->thread, NULL, members_main, ms)) {
                snprintf(errstr, errstr_size, "cannot start a thread");
                aagw_members_destroy(ms);
                return NULL;
        }
        (void)pthread_setname_np(ms->thread, "aagw:members");
        ms->started = true;
        return ms;
}

size_t aagw_members_get(aagw_members_t *ms, struct aagw_group_info *out,
                        size_t max) {
        size_t n;

        if (!ms)
                return 0;
        n = ms->n < max ? ms->n : max;
        pthread_mutex_lock(&ms->lock);
        memcpy(out, ms->view, n * sizeof(*out));
        pthread_mutex_unlock(&ms->lock);
        return n;
}

void aagw_members_destroy(aagw_members_t *ms) {
        if (!ms)
                return;
        if (ms->started) {
                pthread_mutex_lock(&ms->lock);
                ms->stop = true;
                pthread_cond_signal(&ms->wake);
                pthread_mutex_unlock(&ms->lock);
                pthread_join(ms->thread, NULL);
        }
        /* librdkafka 2.0.2 can hang destroying a client whose
         * DescribeConsumerGroups the cluster refused or did not know (the
         * embedded mock): such a client is left to the process's exit. */
        if (ms->admin && !ms->refused)
                rd_kafka_destroy(ms->admin);
        pthread_cond_destroy(&ms->wake);
        pthread_mutex_destroy(&ms->lock);
        free(ms->view);
        free(ms->fresh);
        free(ms);
}
