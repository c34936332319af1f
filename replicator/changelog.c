/*
 * replicator/changelog.c: the records of the scale-out unify stage's
 * changelog topics, the settings of its ids topics, and their restore
 * (the format is described above changelog_encode() in
 * replicator_int.h).  Kept apart from unify.c so that the restore
 * benchmark (tests/bench/bench_restore.c) times the very code a new owner
 * runs.
 */
#include "replicator_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- CODEC --- */

static uint8_t *put_u64(uint8_t *p, uint64_t v) {
        for (int i = 7; i >= 0; i--)
                *p++ = (uint8_t)(v >> (8 * i));
        return p;
}

static uint8_t *put_u32(uint8_t *p, uint32_t v) {
        for (int i = 3; i >= 0; i--)
                *p++ = (uint8_t)(v >> (8 * i));
        return p;
}

static uint64_t get_u64(const uint8_t *p) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | p[i];
        return v;
}

static uint32_t get_u32(const uint8_t *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
               (uint32_t)p[2] << 8 | p[3];
}

/* Copy 'n' bytes of 'src' into 'dst' (room for 'size' with the NUL);
 * false if they do not fit. */
static bool take_str(char *dst, size_t size, const uint8_t *src, size_t n) {
        if (n >= size)
                return false;
        memcpy(dst, src, n);
        dst[n] = '\0';
        return true;
}

void changelog_encode(const struct changelog_rec *c, uint8_t *key,
                      size_t *klen, uint8_t *val, size_t *vlen) {
        uint8_t *k = key, *v = val;
        size_t   ol = strnlen(c->origin, AAGW_ALIAS_MAX);

        *k++ = CHANGELOG_VERSION;
        *k++ = (uint8_t)c->kind;
        if (c->kind == CHANGELOG_POS || c->kind == CHANGELOG_RPOS) {
                size_t tl = strnlen(c->topic, AAGW_TOPIC_MAX);
                k = put_u32(k, (uint32_t)c->partition);
                memcpy(k, c->topic, tl);
                k += tl;
                v = put_u64(v, (uint64_t)c->offset);
        } else {
                memcpy(k, c->key, 16);
                k += 16;
                v = put_u64(v, c->hlc);
                v = put_u64(v, (uint64_t)c->time_ms);
                if (c->kind == CHANGELOG_ID) {
                        size_t tl = strnlen(c->topic, AAGW_TOPIC_MAX);
                        v = put_u32(v, (uint32_t)c->partition);
                        v = put_u64(v, (uint64_t)c->offset);
                        *v++ = (uint8_t)ol;
                        memcpy(v, c->origin, ol);
                        v += ol;
                        memcpy(v, c->topic, tl);
                        v += tl;
                } else {
                        size_t il = c->id_len < AAGW_ID_MAX ? c->id_len
                                                            : AAGW_ID_MAX;
                        *v++ = c->tombstone;
                        *v++ = (uint8_t)ol;
                        memcpy(v, c->origin, ol);
                        v += ol;
                        memcpy(v, c->id, il);
                        v += il;
                }
        }
        *klen = (size_t)(k - key);
        *vlen = (size_t)(v - val);
}

bool changelog_decode(const void *key, size_t klen, const void *val,
                      size_t vlen, struct changelog_rec *c) {
        const uint8_t *k = key, *v = val;

        if (klen < 2 || k[0] != CHANGELOG_VERSION || !v)
                return false;
        c->kind      = (enum changelog_kind)k[1];
        c->id_len    = 0; /* (only a winner has these) */
        c->id[0]     = '\0';
        c->tombstone = false;
        c->origin[0] = '\0';
        if (c->kind == CHANGELOG_POS || c->kind == CHANGELOG_RPOS) {
                if (klen < 6 || vlen != 8)
                        return false;
                c->partition = (int32_t)get_u32(k + 2);
                c->offset    = (int64_t)get_u64(v);
                return take_str(c->topic, sizeof(c->topic), k + 6, klen - 6);
        }
        if ((c->kind != CHANGELOG_ID && c->kind != CHANGELOG_WIN) ||
            klen != 18 || vlen < 16)
                return false;
        memcpy(c->key, k + 2, 16);
        c->hlc     = get_u64(v);
        c->time_ms = (int64_t)get_u64(v + 8);
        v += 16;
        vlen -= 16;
        if (c->kind == CHANGELOG_ID) {
                if (vlen < 13 || vlen - 13 < v[12])
                        return false;
                c->partition = (int32_t)get_u32(v);
                c->offset    = (int64_t)get_u64(v + 4);
                size_t ol    = v[12];
                return take_str(c->origin, sizeof(c->origin), v + 13, ol) &&
                       take_str(c->topic, sizeof(c->topic), v + 13 + ol,
                                vlen - 13 - ol);
        }
        if (vlen < 2 || vlen - 2 < v[1])
                return false;
        c->tombstone = v[0] != 0;
        size_t ol    = v[1];
        c->id_len    = vlen - 2 - ol;
        return take_str(c->origin, sizeof(c->origin), v + 2, ol) &&
               take_str(c->id, sizeof(c->id), v + 2 + ol, c->id_len);
}

/* ----------------------------------------------------------- RESTORE --- */

#define TICK_MS 200
#define READ_WAIT_MS 5

changelog_end_t changelog_read(rd_kafka_t *reader, rd_kafka_t *hw,
                               const char *topic, int32_t partition,
                               int64_t from, int idle_ms,
                               const atomic_bool *stop,
                               bool (*fn)(void *arg,
                                          const struct changelog_rec *c),
                               bool (*tick)(void *arg), void *arg,
                               int64_t *records, int64_t *bytes,
                               char *errstr, size_t errstr_size) {
        rd_kafka_topic_partition_list_t *a;
        rd_kafka_message_t              *msgs[1024];
        rd_kafka_queue_t                *q;
        struct changelog_rec             c;
        changelog_end_t                  end = CHANGELOG_DONE;
        rd_kafka_resp_err_t              err;
        int64_t lo, hi, at, skipped = 0;
        int64_t now = aagw_mono_ms(), idle_until = now + idle_ms,
                next_tick = now + TICK_MS;

        /* A changelog made moments ago (or whose leader moves) answers
         * "not leader" or "unknown" for a while: ask again.  A broker
         * that does not answer is given 10 s, asked a second at a time
         * so that a stop is not held up by it. */
        int64_t answer_by = now + 10000;
        for (;;) {
                if ((stop && atomic_load(stop)) || (tick && !tick(arg)))
                        return CHANGELOG_ABANDONED;
                err = replicator_watermarks(hw, topic, partition,
                                                       &lo, &hi, 1000);
                bool moving = err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
                              err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
                              err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                              err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                              err ==
                                  RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION;
                bool silent = err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
                              err == RD_KAFKA_RESP_ERR__TRANSPORT;
                if (!err || !(moving || silent) ||
                    aagw_mono_ms() >= (moving ? idle_until : answer_by))
                        break;
                if (moving) {
                        replicator_refresh_leaders(hw, topic, 1000);
                        struct timespec ts = {0, 100 * 1000000L};
                        nanosleep(&ts, NULL);
                }
        }
        if (err) {
                snprintf(errstr, errstr_size, "reading the end of %s [%d]: %s",
                         topic, (int)partition, rd_kafka_err2str(err));
                return CHANGELOG_FAILED;
        }
        if (from > lo)
                lo = from;
        if (hi <= lo)
                return CHANGELOG_DONE;
        at = lo; /* the next offset reached */
        a = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, topic, partition)->offset =
            from > 0 ? lo : RD_KAFKA_OFFSET_BEGINNING;
        err = rd_kafka_assign(reader, a);
        rd_kafka_topic_partition_list_destroy(a);
        if (err) {
                snprintf(errstr, errstr_size, "assigning %s [%d]: %s", topic,
                         (int)partition, rd_kafka_err2str(err));
                return CHANGELOG_FAILED;
        }
        q = rd_kafka_queue_get_consumer(reader);
        while (at < hi) {
                if (stop && atomic_load(stop)) {
                        end = CHANGELOG_ABANDONED;
                        break;
                }
                now = aagw_mono_ms();
                if (tick && now >= next_tick) {
                        next_tick = now + TICK_MS;
                        if (!tick(arg)) {
                                end = CHANGELOG_ABANDONED;
                                break;
                        }
                }
                if (now >= idle_until) {
                        snprintf(errstr, errstr_size,
                                 "reading %s [%d] up to %" PRId64
                                 ": no progress for %d s at %" PRId64
                                 " (a transaction of a previous owner "
                                 "still open?)",
                                 topic, (int)partition, hi, idle_ms / 1000,
                                 at);
                        end = CHANGELOG_FAILED;
                        break;
                }
                /* A batch call waits its whole timeout unless the batch
                 * fills: a partition's last records (and the end-of-
                 * partition event) would wait TICK_MS each read, which
                 * restoring several partitions one after the other
                 * added up to seconds.  Ask often instead. */
                ssize_t n =
                    rd_kafka_consume_batch_queue(q, READ_WAIT_MS, msgs, 1024);
                for (ssize_t i = 0; i < n; i++) {
                        rd_kafka_message_t *m = msgs[i];
                        if (end != CHANGELOG_DONE || m->partition != partition) {
                                rd_kafka_message_destroy(m);
                                continue;
                        }
                        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                                /* The last stable offset: past 'hi' once
                                 * every transaction open at the start
                                 * ended. */
                                if (m->offset >= hi)
                                        at = hi;
                        } else if (m->err) {
                                aagw_log(AAGW_LOG_WARN, "UNIFY",
                                         "restoring %s [%d]: %s", topic,
                                         (int)partition,
                                         rd_kafka_message_errstr(m));
                        } else if (m->offset >= at) {
                                at = m->offset + 1;
                                idle_until = aagw_mono_ms() + idle_ms;
                                (*records)++;
                                *bytes += (int64_t)(m->key_len + m->len);
                                if (!changelog_decode(m->key, m->key_len,
                                                      m->payload, m->len,
                                                      &c)) {
                                        if (!skipped++)
                                                aagw_log(
                                                    AAGW_LOG_WARN, "UNIFY",
                                                    "restoring %s [%d]: "
                                                    "offset %" PRId64
                                                    " is not a changelog "
                                                    "record of version %d: "
                                                    "skipped",
                                                    topic, (int)partition,
                                                    m->offset,
                                                    CHANGELOG_VERSION);
                                } else if (!fn(arg, &c)) {
                                        end = CHANGELOG_ABANDONED;
                                }
                        }
                        rd_kafka_message_destroy(m);
                }
                if (end != CHANGELOG_DONE)
                        break;
        }
        rd_kafka_queue_destroy(q);
        rd_kafka_assign(reader, NULL);
        return end;
}

/* ---------------------------------------------------------- IDS TOPIC --- */

#define MINUTE_MS 60000

/* The margin covers the clocks: an id's TIME is the deciding host's wall
 * clock, its record's timestamp (what the broker's retention goes by) is
 * taken a moment later on the same host, and the broker and the next
 * owner compare them with their own clocks.  A tenth of the window, at
 * least a minute; a window shorter than a minute (tests, demos) gets
 * itself as the margin, so that a 20 s window is not kept for 80 s.
 * Segments roll every eighth of the window (at least every minute, to
 * keep the files per partition few), so an id outlives the retention by
 * at most that much, and a restore reads at most about 1.25 windows of
 * ids. */
void changelog_ids_conf(int64_t window_ms, struct changelog_ids_conf *c) {
        int64_t floor  = window_ms < MINUTE_MS ? window_ms : MINUTE_MS;
        int64_t margin = window_ms / 10 > floor ? window_ms / 10 : floor;

        c->retention_ms = window_ms + margin;
        c->segment_ms   = window_ms / 8 > MINUTE_MS ? window_ms / 8
                                                     : MINUTE_MS;
}

/* 's' as a whole decimal int64 into 'v'; false if it is not one. */
static bool parse_i64(const char *s, int64_t *v) {
        char     *end;
        long long n;

        if (!s || !*s)
                return false;
        errno = 0;
        n     = strtoll(s, &end, 10);
        if (errno || *end)
                return false;
        *v = (int64_t)n;
        return true;
}

/* Whether the comma-separated list 's' holds 'word'. */
static bool has_word(const char *s, const char *word) {
        size_t n = strlen(word);

        for (const char *p = s; p && *p;) {
                p += strspn(p, " ,");
                size_t len = strcspn(p, ", ");
                if (len == n && !strncmp(p, word, n))
                        return true;
                p += len;
        }
        return false;
}

changelog_ids_state_t changelog_ids_check(const struct changelog_ids_conf *want,
                                          const char *cleanup_policy,
                                          const char *retention_ms,
                                          const char *retention_bytes,
                                          const char *segment_ms) {
        int64_t ret, bytes, seg;

        if (!cleanup_policy || !has_word(cleanup_policy, "delete"))
                return CHANGELOG_IDS_DIFFERS; /* never removed */
        /* Deleting: removed too early is the danger. */
        if (parse_i64(retention_ms, &ret) && ret >= 0 &&
            ret < want->retention_ms)
                return CHANGELOG_IDS_UNSAFE;
        if (parse_i64(retention_bytes, &bytes) && bytes >= 0)
                return CHANGELOG_IDS_UNSAFE;
        /* Compacted as well, another retention or segment time: kept
         * longer than needed. */
        if (strcmp(cleanup_policy, "delete") ||
            !parse_i64(retention_ms, &ret) || ret != want->retention_ms ||
            !parse_i64(retention_bytes, &bytes) ||
            !parse_i64(segment_ms, &seg) || seg != want->segment_ms)
                return CHANGELOG_IDS_DIFFERS;
        return CHANGELOG_IDS_AS_WANTED;
}

/* The names changelog_ids_topic() sets, in changelog_ids_check()'s
 * order. */
static const char *const ids_names[] = {"cleanup.policy", "retention.ms",
                                        "retention.bytes", "segment.ms"};
#define IDS_NAMES 4

static void ids_values(const struct changelog_ids_conf *want,
                       char val[IDS_NAMES][24]) {
        snprintf(val[0], sizeof(val[0]), "delete");
        snprintf(val[1], sizeof(val[1]), "%" PRId64, want->retention_ms);
        snprintf(val[2], sizeof(val[2]), "-1");
        snprintf(val[3], sizeof(val[3]), "%" PRId64, want->segment_ms);
}

static rd_kafka_AdminOptions_t *admin_options(rd_kafka_t *rk,
                                              rd_kafka_admin_op_t op,
                                              int timeout_ms) {
        char                     why[256];
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, op);

        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, why,
                                                  sizeof(why));
        return o;
}

changelog_ids_end_t changelog_ids_topic(rd_kafka_t *admin, const char *topic,
                                        int partitions, bool exists,
                                        const struct changelog_ids_conf *want,
                                        int timeout_ms, char *errstr,
                                        size_t errstr_size) {
        char                       val[IDS_NAMES][24], err[512];
        char                      *have[IDS_NAMES] = {NULL};
        const char                *conf[2 * IDS_NAMES + 1];
        rd_kafka_ConfigResource_t *res, *alter;
        rd_kafka_AdminOptions_t   *o;
        rd_kafka_queue_t          *q;
        rd_kafka_event_t          *ev;
        changelog_ids_end_t        end;
        changelog_ids_state_t      st;
        bool                       late, altered;

        ids_values(want, val);
        if (!exists) {
                for (int i = 0; i < IDS_NAMES; i++) {
                        conf[2 * i]     = ids_names[i];
                        conf[2 * i + 1] = val[i];
                }
                conf[2 * IDS_NAMES] = NULL;
                int rc = aagw_kafka_topic_create_conf(admin, topic, partitions,
                                                      conf, timeout_ms, err,
                                                      sizeof(err));
                if (rc) {
                        snprintf(errstr, errstr_size, "%s", err);
                        return rc == -2 ? CHANGELOG_IDS_RETRY
                                        : CHANGELOG_IDS_REFUSED;
                }
                return CHANGELOG_IDS_CREATED;
        }

        /* The four effective values; the topic's other settings are left
         * alone (IncrementalAlterConfigs sets only what it names). */
        res   = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        alter = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        q     = rd_kafka_queue_new(admin);
        o = admin_options(admin, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout_ms);
        rd_kafka_DescribeConfigs(admin, &res, 1, o, q);
        rd_kafka_AdminOptions_destroy(o);
        ev = aagw_kafka_admin_answer(q, timeout_ms, &late, err, sizeof(err));
        if (ev) {
                size_t                            rn, cn;
                const rd_kafka_ConfigResource_t **rr =
                    rd_kafka_DescribeConfigs_result_resources(
                        rd_kafka_event_DescribeConfigs_result(ev), &rn);
                rd_kafka_resp_err_t e =
                    aagw_kafka_config_err(rr, rn, err, sizeof(err));
                if (e) {
                        rd_kafka_event_destroy(ev);
                        ev = NULL;
                } else {
                        const rd_kafka_ConfigEntry_t **ce =
                            rd_kafka_ConfigResource_configs(rr[0], &cn);
                        for (size_t i = 0; i < cn; i++) {
                                const char *n = rd_kafka_ConfigEntry_name(ce[i]);
                                const char *v = rd_kafka_ConfigEntry_value(ce[i]);
                                for (int k = 0; k < IDS_NAMES; k++)
                                        if (!strcmp(n, ids_names[k]) && v &&
                                            !have[k])
                                                have[k] = strdup(v);
                        }
                }
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        else {
                snprintf(errstr, errstr_size,
                         "describing the configs of %s: %s", topic, err);
                end = late ? CHANGELOG_IDS_RETRY : CHANGELOG_IDS_STALE;
                goto out;
        }
        st = changelog_ids_check(want, have[0], have[1], have[2], have[3]);
        if (st == CHANGELOG_IDS_AS_WANTED) {
                end = CHANGELOG_IDS_KEPT;
                goto out;
        }
        for (int k = 0; k < IDS_NAMES; k++) {
                rd_kafka_error_t *e = rd_kafka_ConfigResource_add_incremental_config(
                    alter, ids_names[k], RD_KAFKA_ALTER_CONFIG_OP_TYPE_SET,
                    val[k]);
                if (e)
                        rd_kafka_error_destroy(e);
        }
        o = admin_options(admin, RD_KAFKA_ADMIN_OP_INCREMENTALALTERCONFIGS,
                          timeout_ms);
        rd_kafka_IncrementalAlterConfigs(admin, &alter, 1, o, q);
        rd_kafka_AdminOptions_destroy(o);
        ev      = aagw_kafka_admin_answer(q, timeout_ms, &late, err, sizeof(err));
        altered = ev != NULL;
        if (ev) {
                size_t                            rn;
                const rd_kafka_ConfigResource_t **rr =
                    rd_kafka_IncrementalAlterConfigs_result_resources(
                        rd_kafka_event_IncrementalAlterConfigs_result(ev),
                        &rn);
                rd_kafka_resp_err_t e =
                    aagw_kafka_config_err(rr, rn, err, sizeof(err));
                rd_kafka_event_destroy(ev);
                altered = !e;
        }
        snprintf(errstr, errstr_size,
                 "%s had cleanup.policy=%s retention.ms=%s "
                 "retention.bytes=%s segment.ms=%s; %s cleanup.policy=%s "
                 "retention.ms=%s retention.bytes=%s segment.ms=%s%s%s",
                 topic, have[0] ? have[0] : "?", have[1] ? have[1] : "?",
                 have[2] ? have[2] : "?", have[3] ? have[3] : "?",
                 altered ? "set to" : "could not set", val[0], val[1],
                 val[2], val[3], altered ? "" : ": ", altered ? "" : err);
        if (altered)
                end = CHANGELOG_IDS_ALTERED;
        else if (late)
                end = CHANGELOG_IDS_RETRY;
        else
                end = st == CHANGELOG_IDS_UNSAFE ? CHANGELOG_IDS_REFUSED
                                                 : CHANGELOG_IDS_STALE;
out:
        for (int k = 0; k < IDS_NAMES; k++)
                free(have[k]);
        rd_kafka_queue_destroy(q);
        rd_kafka_ConfigResource_destroy(res);
        rd_kafka_ConfigResource_destroy(alter);
        return end;
}
