/*
 * replicator/changelog.c: the records of the scale-out unify stage's
 * changelog topics and their restore (the format is described above
 * changelog_encode() in replicator_int.h).  Kept apart from unify.c so
 * that the restore benchmark (tests/bench/bench_restore.c) times the very
 * code a new owner runs.
 */
#include "replicator_int.h"

#include <inttypes.h>
#include <stdio.h>
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
        if (c->kind == CHANGELOG_POS) {
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
        if (c->kind == CHANGELOG_POS) {
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

changelog_end_t changelog_read(rd_kafka_t *reader, rd_kafka_t *hw,
                               const char *topic,
                               int32_t partition, int idle_ms,
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
         * "not leader" or "unknown" for a while: ask again. */
        while ((err = rd_kafka_query_watermark_offsets(
                    hw, topic, partition, &lo, &hi, 10000)) &&
               (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
                err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
                err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION) &&
               aagw_mono_ms() < idle_until) {
                if ((stop && atomic_load(stop)) || (tick && !tick(arg)))
                        return CHANGELOG_ABANDONED;
                replicator_refresh_leaders(hw, topic, 1000);
                struct timespec ts = {0, 100 * 1000000L};
                nanosleep(&ts, NULL);
        }
        if (err) {
                snprintf(errstr, errstr_size, "reading the end of %s [%d]: %s",
                         topic, (int)partition, rd_kafka_err2str(err));
                return CHANGELOG_FAILED;
        }
        if (hi <= lo)
                return CHANGELOG_DONE;
        at = lo; /* the next offset reached */
        a = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(a, topic, partition)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
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
                ssize_t n = rd_kafka_consume_batch_queue(q, TICK_MS, msgs,
                                                         1024);
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
