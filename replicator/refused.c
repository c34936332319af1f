/*
 * replicator/refused.c: the records a transaction was aborted for, so
 * that its redo does not meet them again (scale-out).
 *
 * In a transaction, a record the broker refuses makes the whole
 * transaction abortable: its records are thrown away, the flow or stage
 * goes back to its committed positions and reads the same records again.
 * Sent as they were, the refused record would be refused again at every
 * redo.  So the coordinates of each refused record are kept here, and
 * the redo writes its replacement instead (the flow: its dead-letter
 * copy; the unify stage: its stand-in).
 *
 * The broker refuses a batch, not a record (one record over a topic's
 * max.message.bytes, and every record librdkafka batched with it gets
 * the refusal), so a refusal first makes a record a suspect.  A suspect
 * is sent alone at the redo: refused alone, it is refused for good
 * (confirmed); acknowledged alone, it was a neighbour, and is forgotten.
 *
 * A record's replacement belongs to the open transaction: when it
 * commits, the record is forgotten (refused_each() from the commit); when
 * it aborts, the mark goes and the next redo writes it again.
 *
 * One thread uses a set (the flow's or the stage's).  Chained hashing:
 * lookups happen on the data path while the set is not empty (a redo).
 */
#include "replicator_int.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

struct refused_node {
        struct refused_rec   rec;
        struct refused_node *next;
};

struct refused {
        struct refused_node **buckets;
        size_t                nbuckets; /* power of two */
        size_t                count, max;
};

#define BUCKETS_MIN 64

bool replicator_refused_for_good(rd_kafka_resp_err_t err) {
        switch (err) {
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:   /* the record, or its
                                                        batch, over
                                                        max.message.bytes */
        case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
        case RD_KAFKA_RESP_ERR_INVALID_RECORD:       /* e.g. no key in a
                                                        compacted topic */
        case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:    /* outside
                                                        message.timestamp.
                                                        *.max.ms */
                return true;
        default:
                return false;
        }
}

static size_t slot_of(const struct refused *rs, const char *topic,
                      int32_t partition, int64_t offset) {
        uint64_t h = XXH3_64bits_withSeed(topic, strlen(topic),
                                          (uint64_t)offset * 31 +
                                              (uint64_t)(uint32_t)partition);
        return (size_t)(h & (rs->nbuckets - 1));
}

struct refused *refused_new(size_t max) {
        struct refused *rs = calloc(1, sizeof(*rs));

        if (!rs)
                return NULL;
        rs->nbuckets = BUCKETS_MIN;
        rs->max      = max;
        if (!(rs->buckets = calloc(rs->nbuckets, sizeof(*rs->buckets)))) {
                free(rs);
                return NULL;
        }
        return rs;
}

void refused_destroy(struct refused *rs) {
        if (!rs)
                return;
        refused_each(rs, NULL, NULL);
        free(rs->buckets);
        free(rs);
}

size_t refused_count(const struct refused *rs) {
        return rs ? rs->count : 0;
}

struct refused_rec *refused_find(struct refused *rs, const char *topic,
                                 int32_t partition, int64_t offset) {
        if (!rs || !rs->count)
                return NULL;
        for (struct refused_node *n =
                 rs->buckets[slot_of(rs, topic, partition, offset)];
             n; n = n->next)
                if (n->rec.offset == offset && n->rec.partition == partition &&
                    !strcmp(n->rec.topic, topic))
                        return &n->rec;
        return NULL;
}

/* Twice the buckets when the chains grow long; staying as it is when
 * memory is short only makes them longer. */
static void grow(struct refused *rs) {
        size_t                nb = rs->nbuckets * 2;
        struct refused_node **b  = calloc(nb, sizeof(*b));

        if (!b)
                return;
        struct refused_node **old  = rs->buckets;
        size_t                oldn = rs->nbuckets;
        rs->buckets  = b;
        rs->nbuckets = nb;
        for (size_t i = 0; i < oldn; i++)
                for (struct refused_node *n = old[i], *next; n; n = next) {
                        next = n->next;
                        size_t s = slot_of(rs, n->rec.topic, n->rec.partition,
                                           n->rec.offset);
                        n->next = b[s];
                        b[s]    = n;
                }
        free(old);
}

struct refused_rec *refused_add(struct refused *rs, const char *topic,
                                int32_t partition, int64_t offset) {
        struct refused_rec *r = refused_find(rs, topic, partition, offset);

        if (r)
                return r;
        if (rs->count >= rs->max || strlen(topic) > AAGW_TOPIC_MAX)
                return NULL;
        struct refused_node *n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        memcpy(n->rec.topic, topic, strlen(topic) + 1);
        n->rec.partition = partition;
        n->rec.offset    = offset;
        if (rs->count >= rs->nbuckets * 2)
                grow(rs);
        size_t s       = slot_of(rs, topic, partition, offset);
        n->next        = rs->buckets[s];
        rs->buckets[s] = n;
        rs->count++;
        return &n->rec;
}

void refused_del(struct refused *rs, struct refused_rec *r) {
        size_t s = slot_of(rs, r->topic, r->partition, r->offset);

        for (struct refused_node **pp = &rs->buckets[s]; *pp;
             pp = &(*pp)->next)
                if (&(*pp)->rec == r) {
                        struct refused_node *n = *pp;
                        *pp = n->next;
                        free(n);
                        rs->count--;
                        return;
                }
}

void refused_each(struct refused *rs,
                  bool (*keep)(void *arg, struct refused_rec *r), void *arg) {
        for (size_t i = 0; rs->count && i < rs->nbuckets; i++)
                for (struct refused_node **pp = &rs->buckets[i]; *pp;) {
                        struct refused_node *n = *pp;
                        if (keep && keep(arg, &n->rec)) {
                                pp = &n->next;
                                continue;
                        }
                        *pp = n->next;
                        free(n);
                        rs->count--;
                }
}
