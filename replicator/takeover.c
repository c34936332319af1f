/*
 * replicator/takeover.c: taking over from a running MirrorMaker 2.
 *
 * A flow partition with no stored position whose target partition ends
 * with a record this flow did not write was replicated by someone else:
 * MirrorMaker 2, when aagw replaces it.  Copying from the source log start
 * would write the whole history a second time, so the flow asks here
 * where the other replicator stopped.
 *
 * What is known: MM2's offset-syncs (mm2-offset-syncs.<target>.internal
 * at the source by default, same location rules as aagw's own), each
 * saying "source record u is at target offset d", written every
 * offset.lag.max (100) records or so, so the newest is usually behind;
 * and the target partition, which MM2 fills without transactions, one
 * record per source record, in order.  With the newest sync (u, d) and
 * the target's end hi, the records after u that MM2 copied are the
 * hi - 1 - d records at d+1 .. hi-1, so:
 *
 *   next = u + (hi - d)        when source offsets after u are contiguous.
 *
 * Not trusted blindly: the target's last record (timestamp, key, value,
 * which MM2 copies as they are) must equal the source record at next - 1.
 * A source with gaps (transaction markers, compaction) puts that record
 * further on, never before; so the source is read forward from the guess
 * (at most SCAN_MAX records) for the record equal to the target's last,
 * and the flow resumes after it.  Found either way: exact, nothing copied
 * twice, nothing skipped.  Not found (no such record within reach, or a
 * read failed): the flow resumes at u + 1, which repeats at most the
 * hi - 1 - d records MM2 copied after its newest sync (the log says how
 * many).  No sync for the partition (MM2 writes none before its
 * offset-syncs topic exists, which it creates only after it started
 * copying, and drops those it could not write): the guess counts from the
 * source's log start, where MM2 starts a partition, and the same search
 * decides; not found, -1, and the caller copies from the log start as
 * before (the log says so).
 */
#include "replicator_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_TIMEOUT_MS 10000
#define SCAN_MAX 100000 /* source records read looking for the last copy */

struct tk_sync {
        char    topic[AAGW_TOPIC_MAX + 1];
        int32_t partition;
        int64_t upstream, downstream;
};

struct takeover {
        const struct aagw_flow_conf *conf; /* the flow's: borrowed */
        char                         name[2 * AAGW_ALIAS_MAX + 3];
        char                         syncs_topic[AAGW_TOPIC_MAX + 1];
        rd_kafka_t                  *src; /* assign-only source consumer */
        bool                         loaded;
        struct tk_sync              *syncs; /* newest per partition */
        size_t                       n, cap;
};

/* One record's identity as MM2 copies it. */
struct rec {
        int64_t offset, ts;
        char   *key, *val;
        size_t  klen, vlen;
        bool    has_key, has_val;
        bool    got;
};

static void rec_free(struct rec *r) {
        free(r->key);
        free(r->val);
        memset(r, 0, sizeof(*r));
}

static int rec_copy(struct rec *r, const rd_kafka_message_t *m) {
        memset(r, 0, sizeof(*r));
        r->offset  = m->offset;
        r->ts      = rd_kafka_message_timestamp(m, NULL);
        r->has_key = m->key != NULL;
        r->has_val = m->payload != NULL;
        r->klen    = m->key_len;
        r->vlen    = m->len;
        if ((r->klen && !(r->key = malloc(r->klen))) ||
            (r->vlen && !(r->val = malloc(r->vlen)))) {
                rec_free(r);
                return -1;
        }
        if (r->klen)
                memcpy(r->key, m->key, r->klen);
        if (r->vlen)
                memcpy(r->val, m->payload, r->vlen);
        return 0;
}

static bool rec_equal(const struct rec *a, const rd_kafka_message_t *m) {
        return a->ts == rd_kafka_message_timestamp(m, NULL) &&
               a->has_key == (m->key != NULL) &&
               a->has_val == (m->payload != NULL) && a->klen == m->key_len &&
               a->vlen == m->len &&
               (!a->klen || !memcmp(a->key, m->key, a->klen)) &&
               (!a->vlen || !memcmp(a->val, m->payload, a->vlen));
}

/* Read 'topic' ['partition'] of 'rk' over ['from', 'to'), calling 'fn'
 * per record until it returns false.  Returns 0 once the range was read
 * or 'fn' stopped it, -1 on a timeout (no progress for READ_TIMEOUT_MS),
 * a stop or a failure. */
static int read_part(rd_kafka_t *rk, const char *topic, int32_t partition,
                     int64_t from, int64_t to, const atomic_bool *stop,
                     bool (*fn)(void *, const rd_kafka_message_t *),
                     void *arg) {
        const struct aagw_kafka_range r = {.topic      = topic,
                                           .partition  = partition,
                                           .from       = from,
                                           .to         = to,
                                           .timeout_ms = READ_TIMEOUT_MS,
                                           .progress   = true,
                                           .stop       = stop,
                                           .fn         = fn,
                                           .arg        = arg};
        int64_t                       n;
        aagw_kafka_range_end_t        end = aagw_kafka_read_range(rk, &r, &n);

        return end == AAGW_RANGE_DONE || end == AAGW_RANGE_ABORTED ? 0 : -1;
}

/* ---------------------------------------------------------- THE SYNCS -- */

static bool on_sync(void *arg, const rd_kafka_message_t *m) {
        struct takeover     *t = arg;
        struct aagw_mm2_sync s;
        size_t               i;

        if (!aagw_mm2_sync_decode(m->key, m->key_len, m->payload, m->len, &s))
                return true;
        for (i = 0; i < t->n; i++)
                if (t->syncs[i].partition == s.partition &&
                    !strcmp(t->syncs[i].topic, s.topic))
                        break;
        if (i == t->n) {
                if (t->n == t->cap) {
                        size_t          nc = t->cap ? 2 * t->cap : 64;
                        struct tk_sync *nv =
                            realloc(t->syncs, nc * sizeof(*nv));
                        if (!nv)
                                return true;
                        t->syncs = nv;
                        t->cap   = nc;
                }
                t->n++;
                snprintf(t->syncs[i].topic, sizeof(t->syncs[i].topic), "%s",
                         s.topic);
                t->syncs[i].partition = s.partition;
        }
        t->syncs[i].upstream   = s.upstream;
        t->syncs[i].downstream = s.downstream;
        return true;
}

/* Read the offset-syncs topic once (MM2 is stopped: it does not change
 * for the partitions that matter).  'reader' is the flow's target
 * reader, used when the syncs live at the target. */
static void load_syncs(struct takeover *t, rd_kafka_t *reader,
                       const atomic_bool *stop) {
        rd_kafka_t *rk = t->conf->mm2.syncs_at_target ? reader : t->src;
        int64_t     lo, hi;

        if (t->loaded)
                return;
        t->loaded = true;
        if (replicator_watermarks(rk, t->syncs_topic, 0, &lo, &hi,
                                             READ_TIMEOUT_MS) ||
            read_part(rk, t->syncs_topic, 0, lo, hi, stop, on_sync, t))
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: takeover: could not read %s at %s", t->name,
                         t->syncs_topic,
                         t->conf->mm2.syncs_at_target ? t->conf->target
                                                      : t->conf->source);
}

/* ----------------------------------------------------------- MATCHING -- */

struct match {
        const struct rec *want;
        int64_t           found; /* source offset of the equal record */
        int64_t           read;
};

static bool on_src(void *arg, const rd_kafka_message_t *m) {
        struct match *mt = arg;
        mt->read++;
        if (rec_equal(mt->want, m)) {
                mt->found = m->offset;
                return false;
        }
        return true;
}

static bool on_tail(void *arg, const rd_kafka_message_t *m) {
        struct rec *r = arg;
        if (!r->got && rec_copy(r, m) == 0)
                r->got = true;
        return false;
}

/* ----------------------------------------------------------------- API -- */

/* The source consumer, made when first needed: most starts never take
 * anything over. */
static int src_client(struct takeover *t) {
        const struct aagw_flow_conf *c = t->conf;
        char                         group[512], errstr[512];

        if (t->src)
                return 0;
        snprintf(group, sizeof(group), "aagw.%s.%s-%s.takeover", c->gateway_id,
                 c->source, c->target);
        const char *extra[] = {"group.id",           group,
                               "enable.auto.commit", "false",
                               "enable.partition.eof", "false",
                               "fetch.wait.max.ms",  "10",
                               NULL};
        char        cname[300];
        snprintf(cname, sizeof(cname), "%s-takeover", t->name);
        struct aagw_kafka_client kc = {.type       = RD_KAFKA_CONSUMER,
                                       .bootstraps = c->source_bootstraps,
                                       .name       = cname,
                                       .role       = "consumer",
                                       .props      = c->source_props,
                                       .prop_cnt   = c->source_prop_cnt,
                                       .extra      = extra};
        if (!(t->src = aagw_kafka_client_new(&kc, errstr, sizeof(errstr)))) {
                aagw_log(AAGW_LOG_ERROR, "FLOW",
                         "%s: takeover: a consumer of %s: %s", t->name,
                         c->source, errstr);
                return -1;
        }
        return 0;
}

struct takeover *takeover_new(const struct aagw_flow_conf *c,
                              const aagw_repl_policy_t *pol, const char *name,
                              char *errstr, size_t errstr_size) {
        struct takeover *t = calloc(1, sizeof(*t));

        if (!t) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        t->conf = c;
        snprintf(t->name, sizeof(t->name), "%s", name);
        aagw_mm2_offset_syncs_topic_sep(aagw_repl_separator(pol),
                                        c->mm2.syncs_at_target ? c->source
                                                               : c->target,
                                        t->syncs_topic,
                                        sizeof(t->syncs_topic));
        return t;
}

void takeover_destroy(struct takeover *t) {
        if (!t)
                return;
        if (t->src) {
                rd_kafka_consumer_close(t->src);
                rd_kafka_destroy(t->src);
        }
        free(t->syncs);
        free(t);
}

int64_t takeover_position(struct takeover *t, rd_kafka_t *reader,
                          const char *topic, const char *remote,
                          int32_t partition, int64_t lo, int64_t hi,
                          const atomic_bool *stop, bool *exact) {
        const struct tk_sync *s = NULL;
        struct rec            tail;
        int64_t               guess, slo, shi, next;
        struct match          mt = {NULL, -1, 0};
        char                  how[512];

        *exact = false;
        if (src_client(t))
                return -1;
        load_syncs(t, reader, stop);
        for (size_t i = 0; i < t->n; i++)
                if (t->syncs[i].partition == partition &&
                    !strcmp(t->syncs[i].topic, topic))
                        s = &t->syncs[i];
        if (s && (s->downstream < lo || s->downstream >= hi))
                s = NULL; /* from before the target's log: no use */
        if (replicator_watermarks(t->src, topic, partition, &slo,
                                             &shi, READ_TIMEOUT_MS))
                slo = shi = -1;
        /* With no sync (MM2 writes none until its offset-syncs topic
         * exists, and drops those it could not write), count from the
         * source's log start, where MM2 starts a new partition. */
        if (s) {
                guess = s->upstream + (hi - s->downstream);
                snprintf(how, sizeof(how),
                         "its newest offset-sync maps source %" PRId64
                         " to target %" PRId64,
                         s->upstream, s->downstream);
        } else {
                guess = slo + (hi - lo);
                snprintf(how, sizeof(how),
                         "no offset-sync for it in %s, so counting from the "
                         "source's log start %" PRId64,
                         t->syncs_topic, slo);
        }
        /* The target's last record, looked for at the source from the
         * guess on. */
        memset(&tail, 0, sizeof(tail));
        if (slo >= 0 &&
            !read_part(reader, remote, partition, hi - 1, hi, stop, on_tail,
                       &tail) &&
            tail.got) {
                int64_t from = guess - 1 > slo ? guess - 1 : slo;
                int64_t to   = from + SCAN_MAX < shi ? from + SCAN_MAX : shi;
                mt.want      = &tail;
                read_part(t->src, topic, partition, from, to, stop, on_src,
                          &mt);
        }
        rec_free(&tail);
        if (mt.found >= 0) {
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d]: taking over from another replicator "
                         "(MirrorMaker 2): %s [%d] at %s ends at offset "
                         "%" PRId64 ", %s; the target's last record is "
                         "source record %" PRId64 " (%s); resuming at source "
                         "offset %" PRId64,
                         t->name, topic, (int)partition, remote,
                         (int)partition, t->conf->target, hi, how, mt.found,
                         mt.found == guess - 1
                             ? "as the offsets say"
                             : "found past a gap in the source offsets",
                         mt.found + 1);
                *exact = true;
                return mt.found + 1;
        }
        if (!s) {
                aagw_log(AAGW_LOG_WARN, "FLOW",
                         "%s: %s [%d]: no stored position, and %s [%d] at %s "
                         "(offsets %" PRId64 "..%" PRId64 ") ends with a "
                         "record another replicator wrote; %s, but the "
                         "source record of the target's last one was not "
                         "found: copying from the source log start",
                         t->name, topic, (int)partition, remote,
                         (int)partition, t->conf->target, lo, hi - 1, how);
                return -1;
        }
        next = s->upstream + 1;
        aagw_log(AAGW_LOG_WARN, "FLOW",
                 "%s: %s [%d]: taking over from another replicator "
                 "(MirrorMaker 2): %s [%d] at %s ends at offset %" PRId64
                 ", %s, but the source record of the target's last one was "
                 "not found; unless the target holds copies of this "
                 "flow's, resuming at source offset %" PRId64
                 ", which copies again at most %" PRId64 " records",
                 t->name, topic, (int)partition, remote, (int)partition,
                 t->conf->target, hi, how, next, hi - 1 - s->downstream);
        return next;
}
