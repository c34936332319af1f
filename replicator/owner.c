/*
 * replicator/owner.c: who owns which partition of a work topic, and
 * transactions only the owner can commit (scale-out within a site: the
 * replication flows use it, replicator/flow_scale.c).
 *
 * One owner is one process's membership in the owners' consumer group
 * plus its one transactional producer, both on the cluster the
 * transactions write to.  The group's assignment of the work topic is
 * the ownership.  Every commit carries the offsets of owned work
 * partitions with the consumer group metadata of the assignment
 * (send_offsets_to_transaction, KIP-447), so the group coordinator
 * refuses the commit of a member the group has moved on from: a process
 * that stalled past max.poll.interval.ms comes back, still believes it
 * owns its partitions, and its transaction fails with "Unknown member"
 * or "Illegal generation"; its records stay aborted.  Checked on
 * librdkafka 2.0.2 + Kafka 4.1 (tests/realkafka/test_owner.c).  No
 * transactional.id per partition is needed: the fence is the group's
 * generation, not the producer epoch.
 *
 * The consumer reads nothing: its partitions are paused as soon as they
 * are assigned, and any record fetched before the pause is dropped.
 * Owners read the work partition's content through another handle.
 *
 * Rebalances are eager by default (a rebalance revokes everything, then
 * assigns): the group metadata taken at the assignment then names the
 * generation under which every owned partition was given, and a commit
 * with it is refused as soon as the group has moved on, for whatever
 * reason.
 *
 * With owner_conf.cooperative (cooperative-sticky, KIP-429) a rebalance
 * takes only the partitions that move, and the generation moves while
 * partitions stay, so each commit takes the metadata fresh.  That still
 * fences, because of how the protocol and librdkafka move a partition:
 * the coordinator gives a partition to its next owner only in a
 * generation after the one that took it from this member, and this
 * member rejoins for that generation only after the application has
 * answered the revocation (librdkafka waits for incremental_unassign(),
 * also when the assignment was lost).  So whenever the fresh metadata
 * names a live member and generation, every partition this owner still
 * counts as its own is nobody else's in that generation.  The one fresh
 * copy that does not fence is a consumer that left the group (max.poll.
 * interval.ms passed, or it was told it is unknown): "generation -1, no
 * member id", which the coordinator takes from anyone while the group is
 * empty.  Such a commit is never sent (fresh_cgmd()).  The caller is
 * asked to commit before every change of the assignment (on_revoking),
 * so that a change never finds a transaction open.
 */
#include "replicator_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Bounds of the steps of owner_destroy() and of a single abort. */
#define ABORT_MS 5000
#define CLOSE_MS 5000

struct owner {
        char *group, *topic, *member;
        /* What owner_renew() makes its producer from ('props' borrowed:
         * owner_conf says they outlive the owner). */
        char              *bootstraps, *txn_id;
        const char *const *props;
        size_t             prop_cnt;
        int                txn_timeout_ms, init_timeout_ms;
        void (*dr_msg_cb)(rd_kafka_t *rk, const rd_kafka_message_t *m,
                          void *opaque);
        void *dr_opaque;
        rd_kafka_t *consumer, *producer;
        /* The metadata of the assignment that gave 'owned' (NULL while
         * nothing is owned). */
        rd_kafka_consumer_group_metadata_t *cgmd;
        rd_kafka_topic_partition_list_t    *owned;
        int64_t assignments;
        int64_t dropped; /* records the membership consumer fetched */
        bool    in_txn;
        bool    fatal;   /* the producer failed for good */
        bool    abort_failed; /* the last abort timed out or failed */
        bool    changed; /* ownership changed during this owner_poll() */
        bool    name_check; /* name_free() before a producer is made */
        bool    cooperative; /* cooperative-sticky (the top of the file) */
        /* This owner's instance, in its consumer's client.id
         * ("aagw-MEMBER-owner~INSTANCE"): tells its own membership from
         * another process's of the same name, whatever member id the
         * group gave either at the moment. */
        char instance[AAGW_MEMBER_INSTANCE_MAX];
        int     commit_timeout_ms;
        void (*on_gained)(void *opaque,
                          const rd_kafka_topic_partition_list_t *parts);
        void (*on_lost)(void *opaque,
                        const rd_kafka_topic_partition_list_t *parts);
        void (*on_revoking)(void *opaque,
                            const rd_kafka_topic_partition_list_t *parts);
        void *opaque;
};

/* ------------------------------------------------------------ HELPERS --- */

static int64_t remains(int64_t deadline) {
        int64_t r = deadline - aagw_mono_ms();
        return r > 0 ? r : 0;
}

/* What is left of 'deadline' as a librdkafka timeout: at least 1 ms,
 * since 0 (RD_POLL_NOWAIT) makes send_offsets_to_transaction() wait for
 * its answer without a bound. */
static int left_ms(int64_t deadline) {
        int64_t r = remains(deadline);
        return r > 0 ? (int)r : 1;
}

/* At most half a second of what is left of 'deadline' (at least 1 ms). */
static int slice_ms(int64_t deadline) {
        int ms = left_ms(deadline);
        return ms > 500 ? 500 : ms;
}

/* 'deadline', or sooner once the process stops: wait_ms() from the
 * first look that saw the stop ('*stop_by', -1 until then). */
static int64_t stop_bound(int64_t deadline, int64_t *stop_by);

/* A wait on the coordinator once the process stops: a healthy cluster
 * answers a commit, an abort or a leave within milliseconds, and one
 * that is gone would hold the stop for the whole of the usual wait (10 s
 * a commit, 5 s an abort, 5 s a leave: a stop has 5 s in all).  What is
 * not committed then is aborted by the coordinator and copied again. */
static int wait_ms(int ms) {
        return aagw_kafka_stop_wait_ms(ms);
}

/* rd_kafka_abort_transaction() within 'ms'; with no time left (a stop's
 * budget spent) not tried: the coordinator aborts it after its timeout. */
static rd_kafka_error_t *abort_within(rd_kafka_t *p, int ms) {
        return ms > 0 ? rd_kafka_abort_transaction(p, ms)
                      : rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT,
                                           "no time left in the stop");
}

static int64_t stop_bound(int64_t deadline, int64_t *stop_by) {
        if (!aagw_kafka_process_stopping())
                return deadline;
        if (*stop_by < 0)
                *stop_by = aagw_mono_ms() + wait_ms(AAGW_STOP_WAIT_MS);
        return *stop_by < deadline ? *stop_by : deadline;
}

static void ms_str(char *buf, size_t size, int ms, int def) {
        snprintf(buf, size, "%d", ms > 0 ? ms : def);
}

/* "[0], [1]" for the log and messages. */
static void parts_str(const rd_kafka_topic_partition_list_t *l, char *buf,
                      size_t size) {
        size_t n = 0;

        buf[0] = '\0';
        for (int i = 0; l && i < l->cnt && n < size; i++)
                n += (size_t)snprintf(buf + n, size - n, "%s[%" PRId32 "]",
                                      i ? ", " : "", l->elems[i].partition);
        if (!l || !l->cnt)
                snprintf(buf, size, "none");
}

/* Forget every owned partition and tell the caller (nothing to tell when
 * nothing was owned: a revocation after owner_commit() found the member
 * fenced). */
static void lose_all(struct owner *o, const char *why) {
        char                             parts[256];
        rd_kafka_topic_partition_list_t *lost = o->owned;

        o->owned = rd_kafka_topic_partition_list_new(0);
        if (o->cgmd) {
                rd_kafka_consumer_group_metadata_destroy(o->cgmd);
                o->cgmd = NULL;
        }
        if (lost->cnt) {
                parts_str(lost, parts, sizeof(parts));
                aagw_log(AAGW_LOG_INFO, "OWNER", "%s: lost %s %s: %s",
                         o->member, o->topic, parts, why);
                o->changed = true;
                if (o->on_lost)
                        o->on_lost(o->opaque, lost);
        }
        rd_kafka_topic_partition_list_destroy(lost);
}

/* The generation and member id in 'md' (rd_kafka_consumer_group_metadata_
 * write()'s form: "CGMDv2:", the generation as a native int32, then the
 * group id and the member id, each NUL-terminated).  false if the form is
 * not that one (owner_new() refuses cooperative then) or the member id
 * does not fit 'member'. */
static bool cgmd_read(const rd_kafka_consumer_group_metadata_t *md,
                      int32_t *generation, char *member, size_t member_size) {
        void             *buf  = NULL;
        size_t            size = 0;
        rd_kafka_error_t *e =
            rd_kafka_consumer_group_metadata_write(md, &buf, &size);
        bool ok = false;

        if (e) {
                rd_kafka_error_destroy(e);
                return false;
        }
        const char *b = buf;
        if (size >= 11 && !memcmp(b, "CGMDv2:", 7)) {
                memcpy(generation, b + 7, sizeof(*generation));
                const char *g = b + 11, *end = b + size;
                const char *gz = memchr(g, '\0', (size_t)(end - g));
                const char *m  = gz ? gz + 1 : NULL;
                const char *mz =
                    m && m < end ? memchr(m, '\0', (size_t)(end - m)) : NULL;
                if (mz && (size_t)(mz - m) < member_size) {
                        memcpy(member, m, (size_t)(mz - m));
                        member[mz - m] = '\0';
                        ok             = true;
                }
        }
        rd_kafka_mem_free(NULL, buf);
        return ok;
}

/* Cooperative: the consumer's group metadata now, or NULL if it does not
 * fence (the consumer is not a member of a generation: the top of the
 * file). */
static rd_kafka_consumer_group_metadata_t *fresh_cgmd(struct owner *o) {
        rd_kafka_consumer_group_metadata_t *md =
            rd_kafka_consumer_group_metadata(o->consumer);
        int32_t gen = -1;
        char    member[256];

        if (md && (!cgmd_read(md, &gen, member, sizeof(member)) || gen < 0 ||
                   !member[0])) {
                rd_kafka_consumer_group_metadata_destroy(md);
                md = NULL;
        }
        return md;
}

/* Whether this librdkafka writes group metadata in the form cgmd_read()
 * reads (a generation and a member id made up here come back). */
static bool cgmd_readable(void) {
        rd_kafka_consumer_group_metadata_t *md =
            rd_kafka_consumer_group_metadata_new_with_genid("g", 4711, "m-1",
                                                            NULL);
        int32_t gen = -1;
        char    member[16];
        bool    ok = md && cgmd_read(md, &gen, member, sizeof(member)) &&
                  gen == 4711 && !strcmp(member, "m-1");

        if (md)
                rd_kafka_consumer_group_metadata_destroy(md);
        return ok;
}

/* ---------------------------------------------------------- REBALANCE --- */

/* Cooperative: let go of 'parts' in the consumer (the answer librdkafka
 * waits for before it rejoins). */
static void unassign_some(rd_kafka_t *rk,
                          const rd_kafka_topic_partition_list_t *parts) {
        rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, parts);

        if (e)
                rd_kafka_error_destroy(e);
}

/* Cooperative: the assignment grows by 'parts' (possibly none: a
 * rebalance that left this member's partitions as they were) or loses
 * them.  The caller commits first (on_revoking, with the whole owned
 * set: what it holds is still its own in this generation). */
static void rebalance_incremental(struct owner *o, rd_kafka_t *rk,
                                  rd_kafka_resp_err_t              err,
                                  rd_kafka_topic_partition_list_t *parts) {
        char s[256];
        bool lost = err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS &&
                    rd_kafka_assignment_lost(rk);

        if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && !lost) {
                if (o->on_revoking && o->owned->cnt)
                        o->on_revoking(o->opaque, o->owned);
                rd_kafka_topic_partition_list_t *gone =
                    rd_kafka_topic_partition_list_new(parts->cnt);
                for (int i = 0; i < parts->cnt; i++) {
                        rd_kafka_topic_partition_t *p = &parts->elems[i];
                        if (strcmp(p->topic, o->topic) ||
                            !rd_kafka_topic_partition_list_del(
                                o->owned, p->topic, p->partition))
                                continue;
                        rd_kafka_topic_partition_list_add(gone, p->topic,
                                                          p->partition);
                }
                if (gone->cnt) {
                        /* A change like an assignment: what waits on the
                         * ownership (a restore, a read of positions)
                         * starts again. */
                        o->assignments++;
                        parts_str(gone, s, sizeof(s));
                        aagw_log(AAGW_LOG_INFO, "OWNER",
                                 "%s: gives up %s %s (a cooperative "
                                 "rebalance moves them)",
                                 o->member, o->topic, s);
                        o->changed = true;
                        if (o->on_lost)
                                o->on_lost(o->opaque, gone);
                }
                rd_kafka_topic_partition_list_destroy(gone);
                unassign_some(rk, parts);
                return;
        }
        if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
                lose_all(o, lost ? "the group moved on without this member"
                                 : rd_kafka_err2str(err));
                unassign_some(rk, parts);
                return;
        }
        rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, parts);
        if (e) {
                aagw_log(AAGW_LOG_WARN, "OWNER", "%s: incremental assign: %s",
                         o->member, rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
        }
        rd_kafka_pause_partitions(rk, parts);
        if (!parts->cnt)
                return;
        if (o->on_revoking && o->owned->cnt)
                o->on_revoking(o->opaque, o->owned);
        rd_kafka_topic_partition_list_t *got =
            rd_kafka_topic_partition_list_new(parts->cnt);
        for (int i = 0; i < parts->cnt; i++)
                if (!strcmp(parts->elems[i].topic, o->topic) &&
                    !owner_owned(o, parts->elems[i].partition)) {
                        rd_kafka_topic_partition_list_add(
                            o->owned, o->topic, parts->elems[i].partition);
                        rd_kafka_topic_partition_list_add(
                            got, o->topic, parts->elems[i].partition);
                }
        rd_kafka_topic_partition_list_sort(o->owned, NULL, NULL);
        o->assignments++;
        o->changed = true;
        parts_str(got, s, sizeof(s));
        char all[256];
        parts_str(o->owned, all, sizeof(all));
        aagw_log(AAGW_LOG_INFO, "OWNER",
                 "%s: gains %s %s, owns %s (assignment %" PRId64
                 " in group %s, cooperative)",
                 o->member, o->topic, s, all, o->assignments, o->group);
        if (o->on_gained && got->cnt)
                o->on_gained(o->opaque, got);
        rd_kafka_topic_partition_list_destroy(got);
}

/* Eager protocol (see the top of the file): an assignment replaces
 * everything, a revocation takes everything.  The assigned partitions
 * are paused at once: the consumer is for membership only. */
static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts,
                         void *opaque) {
        struct owner *o = opaque;
        char          s[256];

        if (o->cooperative) {
                rebalance_incremental(o, rk, err, parts);
                return;
        }
        if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
                rd_kafka_assign(rk, parts);
                rd_kafka_pause_partitions(rk, parts);
                for (int i = 0; i < parts->cnt; i++)
                        if (parts->elems[i].err)
                                aagw_log(AAGW_LOG_WARN, "OWNER",
                                         "%s: pause %s [%" PRId32 "]: %s "
                                         "(its records are fetched and "
                                         "dropped)",
                                         o->member, parts->elems[i].topic,
                                         parts->elems[i].partition,
                                         rd_kafka_err2str(
                                             parts->elems[i].err));
                lose_all(o, "assignment replaced");
                for (int i = 0; i < parts->cnt; i++)
                        if (!strcmp(parts->elems[i].topic, o->topic))
                                rd_kafka_topic_partition_list_add(
                                    o->owned, o->topic,
                                    parts->elems[i].partition);
                rd_kafka_topic_partition_list_sort(o->owned, NULL, NULL);
                o->cgmd = rd_kafka_consumer_group_metadata(rk);
                o->assignments++;
                o->changed = true;
                parts_str(o->owned, s, sizeof(s));
                aagw_log(AAGW_LOG_INFO, "OWNER",
                         "%s: owns %s %s (assignment %" PRId64 " in group %s)",
                         o->member, o->topic, s, o->assignments, o->group);
                if (o->on_gained && o->owned->cnt)
                        o->on_gained(o->opaque, o->owned);
                return;
        }
        /* Before letting go: the caller's last commit under this
         * assignment (it may find itself fenced, and lose all first). */
        if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && o->on_revoking &&
            o->owned->cnt && !rd_kafka_assignment_lost(rk))
                o->on_revoking(o->opaque, o->owned);
        lose_all(o, err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS
                        ? (rd_kafka_assignment_lost(rk)
                               ? "the group moved on without this member"
                               : "revoked by a rebalance")
                        : rd_kafka_err2str(err));
        rd_kafka_assign(rk, NULL);
}

/* ------------------------------------------------------------ CLIENTS --- */

static rd_kafka_t *owner_consumer(struct owner *o, const struct owner_conf *c,
                                  char *errstr, size_t errstr_size) {
        char        name[256], session[16], poll_iv[16], hb[16];
        int         sess = c->session_timeout_ms > 0 ? c->session_timeout_ms
                                                     : 10000;
        const char *extra[] = {
            "group.id", c->group,
            "session.timeout.ms", session,
            "max.poll.interval.ms", poll_iv,
            "heartbeat.interval.ms", hb,
            /* Eager unless asked (the top of the file says why). */
            "partition.assignment.strategy",
            c->cooperative ? "cooperative-sticky" : "roundrobin",
            "enable.auto.commit", "false",
            "enable.auto.offset.store", "false",
            "auto.offset.reset", "latest",
            "isolation.level", "read_committed",
            /* Nothing is read; whatever slips in before the pause is
             * dropped: keep what could be fetched small. */
            "queued.max.messages.kbytes", "64",
            "max.partition.fetch.bytes", "65536",
            NULL};
        struct aagw_kafka_client kc = {.type         = RD_KAFKA_CONSUMER,
                                       .bootstraps   = c->bootstraps,
                                       .name         = name,
                                       .role         = "consumer",
                                       .props        = c->props,
                                       .prop_cnt     = c->prop_cnt,
                                       .extra        = extra,
                                       .opaque       = o,
                                       .rebalance_cb = rebalance_cb};
        rd_kafka_topic_partition_list_t *sub;
        rd_kafka_resp_err_t              err;
        rd_kafka_t                      *rk;

        snprintf(name, sizeof(name), "%s-owner~%s", c->member, o->instance);
        snprintf(session, sizeof(session), "%d", sess);
        ms_str(poll_iv, sizeof(poll_iv), c->max_poll_interval_ms, 30000);
        /* A third of the session, at most librdkafka's 3 s default. */
        snprintf(hb, sizeof(hb), "%d", sess / 3 < 3000 ? sess / 3 : 3000);
        if (!(rk = aagw_kafka_client_new(&kc, errstr, errstr_size)))
                return NULL;
        rd_kafka_poll_set_consumer(rk);
        sub = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(sub, c->topic, RD_KAFKA_PARTITION_UA);
        err = rd_kafka_subscribe(rk, sub);
        rd_kafka_topic_partition_list_destroy(sub);
        if (err) {
                snprintf(errstr, errstr_size, "subscribe to %s: %s", c->topic,
                         rd_kafka_err2str(err));
                rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
                return NULL;
        }
        return rk;
}

/* A transactional producer of 'member' with id 'txn_id', its
 * transactions initialised within 'init_ms'; used by owners and the
 * probe.  'dr' (may be NULL) gets delivery reports, 'opaque' theirs. */
static rd_kafka_t *txn_producer(const char *bootstraps,
                                const char *const *props, size_t prop_cnt,
                                const char *member, const char *txn_id,
                                int txn_timeout_ms, int init_ms,
                                void (*dr)(rd_kafka_t *,
                                           const rd_kafka_message_t *,
                                           void *),
                                void *opaque, char *errstr,
                                size_t errstr_size) {
        char        name[256], txn_to[16];
        /* The settings aagw's data path needs (aagw_kafka_producer_props,
         * kconf.c); not its infinite message.timeout.ms: librdkafka wants it within the transaction
         * timeout, and takes that when it is left unset. */
        const char *extra[] = {
            "enable.idempotence", "true",
            "acks", "all",
            "linger.ms", "2",
            "transactional.id", txn_id,
            "transaction.timeout.ms", txn_to,
            NULL};
        struct aagw_kafka_client kc = {.type       = RD_KAFKA_PRODUCER,
                                       .bootstraps = bootstraps,
                                       .name       = name,
                                       .role       = "producer",
                                       .props      = props,
                                       .prop_cnt   = prop_cnt,
                                       .extra      = extra,
                                       .opaque     = opaque,
                                       .dr_msg_cb  = dr};
        rd_kafka_error_t *e;
        rd_kafka_t       *rk;

        snprintf(name, sizeof(name), "%s-txn", member);
        ms_str(txn_to, sizeof(txn_to), txn_timeout_ms, 10000);
        if (!(rk = aagw_kafka_client_new(&kc, errstr, errstr_size)))
                return NULL;
        /* In slices (a call that timed out resumes where it was), so
         * that a stop is not held up by a coordinator that is gone: a
         * producer renewed while the cluster was down waited out the
         * whole 30 s after SIGTERM. */
        int64_t deadline = aagw_mono_ms() + (init_ms > 0 ? init_ms : 30000);
        for (;;) {
                e = rd_kafka_init_transactions(rk, slice_ms(deadline));
                /* A slice that ends while librdkafka retries returns the
                 * error it is retrying on (NOT_COORDINATOR while the
                 * transaction log loads), not a timeout. */
                if (!e ||
                    (rd_kafka_error_code(e) != RD_KAFKA_RESP_ERR__TIMED_OUT &&
                     !rd_kafka_error_is_retriable(e)) ||
                    !remains(deadline))
                        break;
                rd_kafka_error_destroy(e);
                if (aagw_kafka_process_stopping() || replicator_stopping()) {
                        e = rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT,
                                               "not done when the stop came");
                        break;
                }
        }
        if (e) {
                replicator_note_authz_rk(rk, rd_kafka_error_code(e), "WRITE",
                                         "transactional.id %s", txn_id);
                snprintf(errstr, errstr_size,
                         "init_transactions (transactional.id %s): %s%s",
                         txn_id, rd_kafka_error_string(e),
                         rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT
                             ? " (is the transaction coordinator up, with "
                               "enough replicas for the transaction state "
                               "log?)"
                             : "");
                rd_kafka_error_destroy(e);
                rd_kafka_destroy(rk);
                return NULL;
        }
        return rk;
}

/* A member name belongs to one running process: it is in the
 * transactional.id, and initialising a transactional.id fences every
 * other producer of it, so two processes with one name would fence each
 * other at every renewal.  Before this process uses the name, no other
 * member of the group may carry it.  A run of this process killed just
 * before stays in the group until its session times out: waited for, up
 * to 'wait_ms' (then, or at once with 0, refused).  This owner's own
 * membership is told by its instance, not by its member id: a consumer
 * the group dropped (a pause past the session) rejoins under a new id,
 * and while it does the id it reports and the one the group lists
 * differ.  Returns 0 (the name is free, or the group could not be
 * described: logged, and not in the way), or -1 with the reason in
 * 'errstr'. */
#define NAME_POLL_MS 1000

static int name_free(struct owner *o, int wait_ms,
                     const atomic_bool *stop, char *errstr,
                     size_t errstr_size) {
        char                     name[256];
        struct aagw_kafka_client kc = {.type       = RD_KAFKA_PRODUCER,
                                       .bootstraps = o->bootstraps,
                                       .name       = name,
                                       .role       = "admin",
                                       .props      = o->props,
                                       .prop_cnt   = o->prop_cnt};
        struct aagw_group_info  *g  = calloc(1, sizeof(*g));
        int64_t                  t0 = aagw_mono_ms();
        bool                     waited = false;
        int                      rc     = 0;
        bool                     described = true;
        rd_kafka_t              *admin;

        snprintf(name, sizeof(name), "%s-namecheck", o->member);
        if (!g) {
                snprintf(errstr, errstr_size, "out of memory");
                return -1;
        }
        if (!(admin = aagw_kafka_client_new(&kc, errstr, errstr_size))) {
                free(g);
                return -1;
        }
        snprintf(g->group, sizeof(g->group), "%s", o->group);
        for (;;) {
                const struct aagw_member_info *dup = NULL;

                described = members_describe(admin, g, 1, 5000);
                if (!described) {
                        aagw_log(AAGW_LOG_WARN, "OWNER",
                                 "%s: cannot tell whether another process "
                                 "runs as member %s (describing group %s: "
                                 "%s); going on",
                                 o->member, o->member, o->group, g->error);
                        break;
                }
                for (size_t i = 0; i < g->n && !dup; i++)
                        if (!strcmp(g->m[i].member, o->member) &&
                            strcmp(g->m[i].instance, o->instance))
                                dup = &g->m[i];
                int64_t ms = aagw_mono_ms() - t0;
                if (!dup) {
                        if (waited)
                                aagw_log(AAGW_LOG_INFO, "OWNER",
                                         "%s: the earlier member of this "
                                         "name left group %s after %" PRId64
                                         " ms",
                                         o->member, o->group, ms);
                        break;
                }
                if (ms >= wait_ms) {
                        char left[64] = "";
                        if (wait_ms > 0)
                                snprintf(left, sizeof(left),
                                         ", which did not leave within %d s",
                                         wait_ms / 1000);
                        snprintf(errstr, errstr_size,
                                 "member name %s is taken: group %s has "
                                 "another member of that name (host %s)%s; "
                                 "another process runs with it. Every "
                                 "process of a site needs its own "
                                 "scale_out.member (--member)",
                                 o->member, o->group, dup->host, left);
                        rc = -1;
                        break;
                }
                if (!waited)
                        aagw_log(AAGW_LOG_WARN, "OWNER",
                                 "%s: group %s still has a member of this "
                                 "name (host %s): waiting up to %d s for it "
                                 "to leave (a run killed just before leaves "
                                 "when its session times out)",
                                 o->member, o->group, dup->host,
                                 wait_ms / 1000);
                waited = true;
                for (int64_t until = aagw_mono_ms() + NAME_POLL_MS;
                     aagw_mono_ms() < until;) {
                        if (stop && atomic_load(stop)) {
                                snprintf(errstr, errstr_size,
                                         "stopped while waiting for member "
                                         "name %s to be free",
                                         o->member);
                                rc = -1;
                                goto out;
                        }
                        struct timespec ts = {0, 50 * 1000000L};
                        nanosleep(&ts, NULL);
                }
        }
out:
        /* (Left, not destroyed, after a failed description: see
         * members_describe().) */
        if (described)
                rd_kafka_destroy(admin);
        free(g);
        return rc;
}

/* ---------------------------------------------------------- LIFECYCLE --- */

/* 64 random bits in hex (the process id and the clock where the kernel
 * has no randomness to give). */
static void new_instance(char *buf, size_t size) {
        uint64_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                v = ((uint64_t)getpid() << 40) ^ (uint64_t)ts.tv_sec << 20 ^
                    (uint64_t)ts.tv_nsec;
        }
        snprintf(buf, size, "%016" PRIx64, v);
}

struct owner *owner_new(const struct owner_conf *c, char *errstr,
                        size_t errstr_size) {
        struct owner *o;

        if (!c->group || !*c->group || !c->topic || !*c->topic ||
            !c->member || !*c->member || !c->transactional_id ||
            !*c->transactional_id) {
                snprintf(errstr, errstr_size,
                         "an owner needs a group, a work topic, a member "
                         "name and a transactional.id");
                return NULL;
        }
        if (c->max_poll_interval_ms > 0 &&
            c->max_poll_interval_ms <
                (c->session_timeout_ms > 0 ? c->session_timeout_ms : 10000)) {
                snprintf(errstr, errstr_size,
                         "max.poll.interval.ms (%d) must be at least "
                         "session.timeout.ms (%d)",
                         c->max_poll_interval_ms,
                         c->session_timeout_ms > 0 ? c->session_timeout_ms
                                                   : 10000);
                return NULL;
        }
        for (size_t i = 0; i < c->prop_cnt; i++)
                if (!strcmp(aagw_kafka_prop_base(c->props[2 * i]),
                            "partition.assignment.strategy") &&
                    strstr(c->props[2 * i + 1], "cooperative")) {
                        snprintf(errstr, errstr_size,
                                 "%s=%s: the owners' group's protocol is "
                                 "scale_out.rebalance's to choose, not a "
                                 "client property's",
                                 c->props[2 * i], c->props[2 * i + 1]);
                        return NULL;
                }
        if (c->cooperative && !cgmd_readable()) {
                snprintf(errstr, errstr_size,
                         "cooperative rebalancing needs to read the "
                         "generation of the consumer group metadata, which "
                         "this librdkafka (%s) writes in a form aagw does "
                         "not know: use scale_out.rebalance: eager",
                         rd_kafka_version_str());
                return NULL;
        }
        if (!(o = calloc(1, sizeof(*o))) || !(o->group = strdup(c->group)) ||
            !(o->topic = strdup(c->topic)) ||
            !(o->member = strdup(c->member)) ||
            !(o->bootstraps = strdup(c->bootstraps)) ||
            !(o->txn_id = strdup(c->transactional_id))) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        new_instance(o->instance, sizeof(o->instance));
        o->owned     = rd_kafka_topic_partition_list_new(0);
        o->on_gained = c->on_gained;
        o->on_lost   = c->on_lost;
        o->on_revoking = c->on_revoking;
        o->cooperative = c->cooperative;
        o->opaque    = c->opaque;
        o->commit_timeout_ms =
            c->commit_timeout_ms > 0 ? c->commit_timeout_ms : 10000;
        o->props           = c->props;
        o->prop_cnt        = c->prop_cnt;
        o->txn_timeout_ms  = c->txn_timeout_ms;
        o->init_timeout_ms = c->init_timeout_ms > 0 ? c->init_timeout_ms
                                                    : 30000;
        o->dr_msg_cb       = c->dr_msg_cb;
        o->dr_opaque       = c->dr_opaque;
        /* The name before the transactional.id is used (it would fence
         * the other process's producer). */
        int sess = c->session_timeout_ms > 0 ? c->session_timeout_ms : 10000;
        o->name_check = !c->no_name_check;
        if (o->name_check &&
            name_free(o, sess + 5000, c->stop, errstr, errstr_size))
                goto fail;
        /* The producer first: a cluster without working transactions
         * fails here, before this process joins the group and is given
         * partitions it cannot write. */
        o->producer = txn_producer(o->bootstraps, o->props, o->prop_cnt,
                                   o->member, o->txn_id, o->txn_timeout_ms,
                                   o->init_timeout_ms, o->dr_msg_cb,
                                   o->dr_opaque, errstr, errstr_size);
        if (!o->producer)
                goto fail;
        if (!(o->consumer = owner_consumer(o, c, errstr, errstr_size)))
                goto fail;
        aagw_log(AAGW_LOG_INFO, "OWNER",
                 "%s: joining group %s for %s (transactional.id %s)",
                 o->member, o->group, o->topic, c->transactional_id);
        return o;
fail:
        owner_destroy(o);
        return NULL;
}

/* Close the consumer within CLOSE_MS: leave the group (the others need
 * not wait for the session to time out), serving the revocation. */
static void close_consumer(struct owner *o) {
        int               ms = wait_ms(CLOSE_MS);
        rd_kafka_queue_t *q  = rd_kafka_queue_new(o->consumer);
        /* With the stop's budget spent, not even the leave is sent. */
        rd_kafka_error_t *e =
            ms > 0 ? rd_kafka_consumer_close_queue(o->consumer, q) : NULL;
        int64_t deadline = aagw_mono_ms() + ms;
        bool    closed   = ms <= 0;

        if (e) {
                aagw_log(AAGW_LOG_WARN, "OWNER", "%s: leaving group %s: %s",
                         o->member, o->group, rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
        } else {
                while (!(closed = rd_kafka_consumer_closed(o->consumer)) &&
                       remains(deadline) > 0) {
                        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 50);
                        /* The revocation must be answered even now: a
                         * client whose group waits for it never finishes
                         * its destroy. */
                        if (ev && rd_kafka_event_type(ev) ==
                                      RD_KAFKA_EVENT_REBALANCE) {
                                if (o->cooperative)
                                        unassign_some(
                                            o->consumer,
                                            rd_kafka_event_topic_partition_list(
                                                ev));
                                else
                                        rd_kafka_assign(o->consumer, NULL);
                        }
                        if (ev)
                                rd_kafka_event_destroy(ev);
                }
                if (!closed)
                        aagw_log(AAGW_LOG_WARN, "OWNER",
                                 "%s: group %s not left within %d ms; the "
                                 "others take over after its session "
                                 "timeout",
                                 o->member, o->group, ms);
        }
        rd_kafka_queue_destroy(q);
        replicator_destroy_timed(o->consumer,
                                 RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
        o->consumer = NULL;
}

void owner_destroy(struct owner *o) {
        if (!o)
                return;
        /* An abort that failed during the stop fails again: the
         * coordinator aborts the transaction after its timeout anyway. */
        if (o->producer && o->in_txn && !o->fatal &&
            !(o->abort_failed && aagw_kafka_process_stopping())) {
                rd_kafka_error_t *e =
                    abort_within(o->producer, wait_ms(ABORT_MS));
                if (e) {
                        aagw_log(AAGW_LOG_WARN, "OWNER",
                                 "%s: abort at close: %s (the coordinator "
                                 "aborts it after transaction.timeout.ms)",
                                 o->member, rd_kafka_error_string(e));
                        rd_kafka_error_destroy(e);
                }
        }
        if (o->consumer)
                close_consumer(o);
        if (o->producer) {
                rd_kafka_purge(o->producer, RD_KAFKA_PURGE_F_QUEUE |
                                                RD_KAFKA_PURGE_F_INFLIGHT);
                replicator_destroy_timed(o->producer, 0);
        }
        if (o->cgmd)
                rd_kafka_consumer_group_metadata_destroy(o->cgmd);
        if (o->owned)
                rd_kafka_topic_partition_list_destroy(o->owned);
        free(o->group);
        free(o->topic);
        free(o->member);
        free(o->bootstraps);
        free(o->txn_id);
        free(o);
}

owner_result_t owner_renew(struct owner *o, char *errstr,
                           size_t errstr_size) {
        if (o->producer) {
                rd_kafka_purge(o->producer, RD_KAFKA_PURGE_F_QUEUE |
                                                RD_KAFKA_PURGE_F_INFLIGHT);
                replicator_destroy_timed(o->producer, 0);
        }
        o->in_txn   = false;
        o->producer = NULL;
        /* A producer fenced by another process of the same name is not
         * made again (it would fence that one in turn). */
        if (o->name_check && name_free(o, 0, NULL, errstr, errstr_size)) {
                o->fatal = true;
                return AAGW_OWNER_FATAL;
        }
        o->producer = txn_producer(o->bootstraps, o->props, o->prop_cnt,
                                   o->member, o->txn_id, o->txn_timeout_ms,
                                   o->init_timeout_ms, o->dr_msg_cb,
                                   o->dr_opaque, errstr, errstr_size);
        o->fatal    = !o->producer;
        if (o->producer)
                aagw_log(AAGW_LOG_INFO, "OWNER",
                         "%s: new transactional producer (transactional.id "
                         "%s)",
                         o->member, o->txn_id);
        return o->producer ? AAGW_OWNER_OK : AAGW_OWNER_FATAL;
}

/* --------------------------------------------------------- MEMBERSHIP --- */

int owner_poll(struct owner *o, int timeout_ms, char *errstr,
               size_t errstr_size) {
        int64_t deadline = aagw_mono_ms() + timeout_ms;

        o->changed = false;
        do {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(
                    o->consumer, (int)remains(deadline));
                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
                        aagw_kafka_fatal(o->consumer, m->err, errstr,
                                         errstr_size);
                        rd_kafka_message_destroy(m);
                        lose_all(o, "the consumer failed");
                        return AAGW_OWNER_FATAL;
                }
                if (m->err == RD_KAFKA_RESP_ERR_INCONSISTENT_GROUP_PROTOCOL) {
                        /* It would never be given a partition. */
                        snprintf(errstr, errstr_size,
                                 "group %s refuses this member: its "
                                 "members rebalance %s, this process %s "
                                 "(scale_out.rebalance must be the same "
                                 "in every process of the site; change it "
                                 "with the site stopped)",
                                 o->group,
                                 o->cooperative ? "eagerly" : "cooperatively",
                                 o->cooperative ? "cooperatively" : "eagerly");
                        rd_kafka_message_destroy(m);
                        return AAGW_OWNER_FATAL;
                }
                if (m->err == RD_KAFKA_RESP_ERR__MAX_POLL_EXCEEDED)
                        aagw_log(AAGW_LOG_WARN, "OWNER",
                                 "%s: not polled within max.poll.interval.ms: "
                                 "group %s gives its partitions to others",
                                 o->member, o->group);
                else if (m->err) {
                        aagw_log(AAGW_LOG_DEBUG, "OWNER", "%s: %s", o->member,
                                 rd_kafka_message_errstr(m));
                        replicator_note_authz_rk(o->consumer, m->err, "READ",
                                                 "group %s, topic %s",
                                                 o->group, o->topic);
                }
                /* A record fetched before its partition was paused: not
                 * this handle's to read. */
                if (!m->err)
                        o->dropped++;
                rd_kafka_message_destroy(m);
        } while (!o->changed && remains(deadline) > 0);
        return 0;
}

bool owner_owned(const struct owner *o, int32_t partition) {
        for (int i = 0; i < o->owned->cnt; i++)
                if (o->owned->elems[i].partition == partition)
                        return true;
        return false;
}

const rd_kafka_topic_partition_list_t *owner_partitions(const struct owner *o) {
        return o->owned;
}

int64_t owner_assignments(const struct owner *o) {
        return o->assignments;
}

int64_t owner_dropped(const struct owner *o) {
        return o->dropped;
}

const char *owner_instance(const struct owner *o) {
        return o->instance;
}

/* ------------------------------------------------------- TRANSACTIONS --- */

rd_kafka_t *owner_producer(struct owner *o) {
        return o->producer;
}

/* Whether 'err' (of an abortable error) says the group no longer counts
 * this member as the owner of its assignment. */
static bool fenced_err(rd_kafka_resp_err_t err) {
        return err == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
               err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
               err == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID ||
               err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS;
}

/* Abort the open transaction; false (with the reason appended to
 * 'errstr' from 'n' on) if even that failed. */
static bool abort_txn(struct owner *o, char *errstr, size_t errstr_size,
                      size_t n) {
        rd_kafka_error_t *e =
            abort_within(o->producer, wait_ms(ABORT_MS));

        o->abort_failed = e != NULL;
        if (!e) {
                o->in_txn = false;
                return true;
        }
        if (n < errstr_size)
                snprintf(errstr + n, errstr_size - n, "; abort: %s",
                         rd_kafka_error_string(e));
        if (rd_kafka_error_is_fatal(e))
                o->fatal = true;
        rd_kafka_error_destroy(e);
        return false;
}

/* What failed step 'op' with error 'e' (destroyed here) means for the
 * transaction and the ownership; the reason goes to 'errstr'. */
static owner_result_t txn_failed(struct owner *o, const char *op,
                                 rd_kafka_error_t *e, char *errstr,
                                 size_t errstr_size) {
        rd_kafka_resp_err_t err = rd_kafka_error_code(e);
        char                why[512], parts[256];
        size_t              n;

        if (rd_kafka_error_is_fatal(e)) {
                rd_kafka_resp_err_t ferr =
                    rd_kafka_fatal_error(o->producer, why, sizeof(why));
                replicator_note_authz_rk(o->producer, ferr ? ferr : err,
                                         "WRITE", "transactional.id %s",
                                         o->txn_id);
                snprintf(errstr, errstr_size,
                         "%s: fatal producer error: %s%s", op,
                         ferr ? why : rd_kafka_error_string(e),
                         ferr == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                                 ferr == RD_KAFKA_RESP_ERR__FENCED
                             ? " (another process initialised transactions "
                               "with this transactional.id)"
                             : "");
                rd_kafka_error_destroy(e);
                o->fatal = true;
                lose_all(o, "the producer failed");
                return AAGW_OWNER_FATAL;
        }
        /* Cooperative: a generation that moved on between the metadata
         * and the commit is a rebalance under way, not a fence; what this
         * member owns stays its own unless the rebalance says it lost it
         * (owner_poll()). */
        if (o->cooperative && rd_kafka_error_txn_requires_abort(e) &&
            (err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
             err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS)) {
                n = (size_t)snprintf(errstr, errstr_size,
                                     "%s: %s (a rebalance under way); "
                                     "transaction aborted",
                                     op, rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                return abort_txn(o, errstr, errstr_size, n) ? AAGW_OWNER_ABORTED
                                                            : AAGW_OWNER_FATAL;
        }
        if (rd_kafka_error_txn_requires_abort(e) && fenced_err(err)) {
                parts_str(o->owned, parts, sizeof(parts));
                n = (size_t)snprintf(
                    errstr, errstr_size,
                    "%s: %s: group %s has moved on without this member "
                    "(%s): %s %s are no longer its own; transaction aborted",
                    op, rd_kafka_error_string(e), o->group,
                    rd_kafka_err2name(err), o->topic, parts);
                rd_kafka_error_destroy(e);
                bool aborted = abort_txn(o, errstr, errstr_size, n);
                lose_all(o, "fenced by the group coordinator");
                return aborted ? AAGW_OWNER_FENCED : AAGW_OWNER_FATAL;
        }
        n = (size_t)snprintf(errstr, errstr_size,
                             "%s: %s; transaction aborted", op,
                             rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return abort_txn(o, errstr, errstr_size, n) ? AAGW_OWNER_ABORTED
                                                    : AAGW_OWNER_FATAL;
}

owner_result_t owner_begin(struct owner *o, char *errstr,
                           size_t errstr_size) {
        rd_kafka_error_t *e;

        if (o->fatal) {
                snprintf(errstr, errstr_size,
                         "the transactional producer failed for good");
                return AAGW_OWNER_FATAL;
        }
        if (!(e = rd_kafka_begin_transaction(o->producer))) {
                o->in_txn = true;
                return AAGW_OWNER_OK;
        }
        if (rd_kafka_error_is_fatal(e))
                return txn_failed(o, "begin_transaction", e, errstr,
                                  errstr_size);
        snprintf(errstr, errstr_size, "begin_transaction: %s",
                 rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return AAGW_OWNER_ABORTED;
}

owner_result_t owner_abort(struct owner *o, char *errstr,
                           size_t errstr_size) {
        if (o->fatal) {
                snprintf(errstr, errstr_size,
                         "the transactional producer failed for good");
                return AAGW_OWNER_FATAL;
        }
        if (!o->in_txn)
                return AAGW_OWNER_OK;
        size_t n = (size_t)snprintf(errstr, errstr_size, "%s: abort",
                                    o->member);
        return abort_txn(o, errstr, errstr_size, n) ? AAGW_OWNER_OK
                                                    : AAGW_OWNER_FATAL;
}

owner_result_t owner_commit(struct owner *o,
                            const rd_kafka_topic_partition_list_t *offsets,
                            char *errstr, size_t errstr_size) {
        int64_t           deadline =
            aagw_mono_ms() + wait_ms(o->commit_timeout_ms);
        rd_kafka_error_t *e;
        size_t            n;

        if (o->fatal) {
                snprintf(errstr, errstr_size,
                         "the transactional producer failed for good");
                return AAGW_OWNER_FATAL;
        }
        if (!o->in_txn) {
                snprintf(errstr, errstr_size, "no transaction is open");
                return AAGW_OWNER_ABORTED;
        }
        /* The offsets are the fence: librdkafka sends nothing for an
         * empty list or a logical offset (-1, ...), and the transaction
         * would then commit whoever owns the partitions now. */
        int  nwork             = 0;
        bool fenced_by_offsets = true;
        for (int i = 0; i < offsets->cnt; i++) {
                if (strcmp(offsets->elems[i].topic, o->topic))
                        continue; /* a position of the caller's own */
                nwork++;
                if (offsets->elems[i].offset < 0)
                        fenced_by_offsets = false;
        }
        if (!nwork)
                fenced_by_offsets = false;
        if (!fenced_by_offsets) {
                n = (size_t)snprintf(
                    errstr, errstr_size,
                    "%s: a commit needs the offset of at least one owned "
                    "work partition, each at 0 or more (they are what "
                    "fences a stale owner); transaction aborted",
                    o->topic);
                return abort_txn(o, errstr, errstr_size, n)
                           ? AAGW_OWNER_ABORTED
                           : AAGW_OWNER_FATAL;
        }
        /* Only what this member was given: the broker would take offsets
         * of a partition its generation does not own. */
        for (int i = 0; i < offsets->cnt; i++) {
                const rd_kafka_topic_partition_t *p = &offsets->elems[i];
                if (strcmp(p->topic, o->topic))
                        continue; /* the caller's: any topic but the work
                                     topic (the coordinator takes them
                                     with the fence) */
                if ((!o->cooperative && !o->cgmd) ||
                    !owner_owned(o, p->partition)) {
                        n = (size_t)snprintf(
                            errstr, errstr_size,
                            "%s [%" PRId32 "] is not owned by %s in group "
                            "%s; transaction aborted",
                            p->topic, p->partition, o->member, o->group);
                        /* What it owns stays its own: the group still
                         * gives it those, and would not again. */
                        return abort_txn(o, errstr, errstr_size, n)
                                   ? AAGW_OWNER_FENCED
                                   : AAGW_OWNER_FATAL;
                }
        }
        /* Cooperative: the generation of now (the top of the file says
         * why that fences); none while the consumer is out of the group,
         * which the next owner_poll() reports as the partitions lost. */
        rd_kafka_consumer_group_metadata_t *md = o->cgmd;
        if (o->cooperative && !(md = fresh_cgmd(o))) {
                n = (size_t)snprintf(
                    errstr, errstr_size,
                    "%s is not a member of group %s at the moment (it left "
                    "or was left out); transaction aborted",
                    o->member, o->group);
                return abort_txn(o, errstr, errstr_size, n) ? AAGW_OWNER_ABORTED
                                                            : AAGW_OWNER_FATAL;
        }
        /* librdkafka retries inside each call until its timeout; a
         * retriable error it returns (a timeout among them: the call
         * then resumes where it was) is tried again while the deadline
         * allows.  A call is given half a second at a time, so that a
         * stop that comes meanwhile cuts the wait short. */
        int64_t stop_by = -1;
        for (;;) {
                deadline = stop_bound(deadline, &stop_by);
                e        = rd_kafka_send_offsets_to_transaction(
                           o->producer, offsets, md, slice_ms(deadline));
                if (!e)
                        break;
                if (!rd_kafka_error_is_retriable(e) || !remains(deadline)) {
                        if (md != o->cgmd)
                                rd_kafka_consumer_group_metadata_destroy(md);
                        return txn_failed(o, "send_offsets_to_transaction", e,
                                          errstr, errstr_size);
                }
                rd_kafka_error_destroy(e);
        }
        if (md != o->cgmd)
                rd_kafka_consumer_group_metadata_destroy(md);
        for (;;) {
                deadline = stop_bound(deadline, &stop_by);
                e = rd_kafka_commit_transaction(o->producer,
                                                slice_ms(deadline));
                if (!e) {
                        o->in_txn = false;
                        return AAGW_OWNER_OK;
                }
                if (!rd_kafka_error_is_retriable(e) || !remains(deadline))
                        return txn_failed(o, "commit_transaction", e, errstr,
                                          errstr_size);
                rd_kafka_error_destroy(e);
        }
}

rd_kafka_resp_err_t owner_committed(struct owner                    *o,
                                    rd_kafka_topic_partition_list_t *parts,
                                    int timeout_ms) {
        /* read_committed (librdkafka's default) asks for stable offsets
         * only (KIP-447): while a transaction holds one, the answer is an
         * error to try again on, not an older offset. */
        rd_kafka_resp_err_t err =
            rd_kafka_committed(o->consumer, parts, timeout_ms);
        for (int i = 0; !err && i < parts->cnt; i++)
                err = parts->elems[i].err;
        return err;
}

/* -------------------------------------------------------------- PROBE --- */

/* The probe record's offset, from its delivery report. */
static void probe_dr(rd_kafka_t *rk, const rd_kafka_message_t *m,
                     void *opaque) {
        (void)rk;
        if (!m->err)
                *(int64_t *)opaque = m->offset;
}

/* Read 'topic' [0] from 'from' with 'isolation' until past offset 'at'
 * (the end of the partition beyond it) or 'timeout_ms'.  Returns 1 if a
 * record with value 'val' came, 0 if not, -1 if the reader did not get
 * past 'at' (reason in 'errstr'). */
static int probe_read(const char *bootstraps, const char *const *props,
                      size_t prop_cnt, const char *topic, int64_t from,
                      int64_t at, const char *val, const char *isolation,
                      int timeout_ms, char *errstr, size_t errstr_size) {
        char        name[64], cerr[256] = "";
        const char *extra[] = {"group.id", "aagw-txn-probe",
                               "enable.auto.commit", "false",
                               "enable.partition.eof", "true",
                               "isolation.level", isolation,
                               NULL};
        struct aagw_kafka_client kc = {.type       = RD_KAFKA_CONSUMER,
                                       .bootstraps = bootstraps,
                                       .name       = name,
                                       .role       = "consumer",
                                       .props      = props,
                                       .prop_cnt   = prop_cnt,
                                       .extra      = extra};
        int64_t  deadline = aagw_mono_ms() + timeout_ms, last = -1;
        int      seen     = -1;
        rd_kafka_topic_partition_list_t *a;
        rd_kafka_t                      *rk;

        snprintf(name, sizeof(name), "txn-probe-%s", isolation);
        if (!(rk = aagw_kafka_client_new(&kc, errstr, errstr_size)))
                return -1;
        a = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, topic, 0)->offset = from;
        rd_kafka_assign(rk, a);
        rd_kafka_topic_partition_list_destroy(a);
        while (seen < 0 && remains(deadline) > 0 &&
               !aagw_kafka_process_stopping()) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (!m)
                        continue;
                if (!m->err && m->len == strlen(val) &&
                    !memcmp(m->payload, val, m->len))
                        seen = 1;
                else if (!m->err)
                        last = m->offset;
                else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                         m->offset > at)
                        seen = 0; /* the end, past the record */
                else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        snprintf(cerr, sizeof(cerr), "; last error: %s",
                                 rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
        }
        if (seen < 0)
                snprintf(errstr, errstr_size,
                         "a %s reader of %s [0] did not get past offset "
                         "%" PRId64 " within %d ms (last record read at "
                         "%" PRId64 "%s)",
                         isolation, topic, at, timeout_ms, last, cerr);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        return seen;
}

int owner_txn_enforced(const char *bootstraps, const char *const *props,
                       size_t prop_cnt, const char *topic, char *errstr,
                       size_t errstr_size) {
        char                 txn_id[128], val[128];
        int64_t              lo = -1, hi = -1, at = -1;
        rd_kafka_error_t    *e;
        rd_kafka_resp_err_t  err;
        rd_kafka_t          *p;
        int                  committed, uncommitted;

        errstr[0] = '\0';
        snprintf(txn_id, sizeof(txn_id), "aagw-txn-probe-%s-%ld", topic,
                 (long)getpid());
        snprintf(val, sizeof(val), "aagw transaction probe %ld %" PRId64,
                 (long)getpid(), aagw_wall_ms());
        p = txn_producer(bootstraps, props, prop_cnt, "txn-probe", txn_id,
                         10000, 30000, probe_dr, &at, errstr, errstr_size);
        if (!p)
                return -1;
        err = replicator_watermarks(p, topic, 0, &lo, &hi, 10000);
        if (err) {
                snprintf(errstr, errstr_size, "%s [0]: watermarks: %s", topic,
                         rd_kafka_err2str(err));
                rd_kafka_destroy(p);
                return -1;
        }
        if (!(e = rd_kafka_begin_transaction(p))) {
                err = rd_kafka_producev(
                    p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                    RD_KAFKA_V_VALUE(val, strlen(val)),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
                if (err)
                        e = rd_kafka_error_new(err, "produce to %s [0]: %s",
                                               topic, rd_kafka_err2str(err));
        }
        /* Delivered (its offset known) before the abort. */
        if (!e && rd_kafka_flush(p, 10000))
                e = rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT,
                                       "the probe record was not delivered "
                                       "within 10 s");
        if (!e && at < 0)
                e = rd_kafka_error_new(RD_KAFKA_RESP_ERR__FAIL,
                                       "the probe record was refused");
        if (!e)
                e = rd_kafka_abort_transaction(p, 10000);
        if (e) {
                snprintf(errstr, errstr_size,
                         "transaction probe on %s [0]: %s", topic,
                         rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                rd_kafka_destroy(p);
                return -1;
        }
        rd_kafka_destroy(p);
        uncommitted = probe_read(bootstraps, props, prop_cnt, topic, hi, at,
                                 val, "read_uncommitted", 15000, errstr,
                                 errstr_size);
        if (uncommitted != 1) {
                if (!uncommitted)
                        snprintf(errstr, errstr_size,
                                 "the probe record at %s [%" PRId64 "] was "
                                 "not found by a read_uncommitted reader",
                                 topic, at);
                return -1;
        }
        committed = probe_read(bootstraps, props, prop_cnt, topic, hi, at,
                               val, "read_committed", 15000, errstr,
                               errstr_size);
        if (committed < 0)
                return -1;
        if (committed) {
                snprintf(errstr, errstr_size,
                         "the cluster does not enforce transactions: a "
                         "record of an aborted transaction (%s [0] at "
                         "offset %" PRId64 ") is visible to read_committed "
                         "readers (librdkafka's mock cluster behaves so); "
                         "ownership by transactions cannot fence a "
                         "stalled process there",
                         topic, at);
                return 0;
        }
        return 1;
}

int aagw_scale_out_check(const char *bootstraps, const char *const *props,
                         size_t prop_cnt, const char *gateway_id,
                         const char *site, char *errstr,
                         size_t errstr_size) {
        char                     topic[AAGW_TOPIC_MAX + 1], err[512];
        struct aagw_kafka_client c = {.type       = RD_KAFKA_PRODUCER,
                                      .bootstraps = bootstraps,
                                      .name       = "scale-out-check",
                                      .role       = "admin",
                                      .props      = props,
                                      .prop_cnt   = prop_cnt};
        rd_kafka_t *rk;
        int         rc;

        snprintf(topic, sizeof(topic), "aagw.%s.%s.txn-check", gateway_id,
                 site);
        if (!(rk = aagw_kafka_client_new(&c, err, sizeof(err)))) {
                snprintf(errstr, errstr_size, "client: %s", err);
                return -1;
        }
        rc = aagw_kafka_topic_create(rk, topic, 1, 10000, err, sizeof(err));
        if (rc == -2 && aagw_kafka_topic_autocreate(rk, topic, 5000) > 0)
                rc = 0;
        rd_kafka_destroy(rk);
        if (rc) {
                snprintf(errstr, errstr_size, "cannot create topic %s: %s",
                         topic, err);
                return -1;
        }
        return owner_txn_enforced(bootstraps, props, prop_cnt, topic, errstr,
                                  errstr_size);
}

int owner_work_topic(rd_kafka_t *admin, const char *topic, int want,
                     char *errstr, size_t errstr_size) {
        int64_t deadline = aagw_mono_ms() + 30000;
        char    err[512] = "";
        int     rc       = aagw_kafka_topic_create(admin, topic, want, 10000,
                                                   err, sizeof(err));

        /* -2: no Admin API (the mock): its auto-creation makes it at the
         * first metadata request below. */
        if (rc == -1) {
                snprintf(errstr, errstr_size, "creating %s: %s", topic, err);
                return -1;
        }
        /* A topic just made is not in every broker's metadata at once;
         * one another member made may have another partition count, and
         * that count is the one every member must go by. */
        for (;;) {
                const struct rd_kafka_metadata *md  = NULL;
                rd_kafka_topic_t               *rkt = rd_kafka_topic_new(
                    admin, topic, NULL);
                int                             have = -1;

                if (rkt && !aagw_kafka_metadata(admin, false, rkt, &md, 5000, NULL)) {
                        if (md->topic_cnt == 1 && !md->topics[0].err)
                                have = md->topics[0].partition_cnt;
                        rd_kafka_metadata_destroy(md);
                }
                if (rkt)
                        rd_kafka_topic_destroy(rkt);
                if (have > 0)
                        return have;
                if (aagw_mono_ms() >= deadline) {
                        snprintf(errstr, errstr_size,
                                 "%s: not in the cluster's metadata 30 s "
                                 "after it was created",
                                 topic);
                        return -1;
                }
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
}
