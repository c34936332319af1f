/*
 * tests/offsets/mm2_ref.h: an independent reader of MirrorMaker 2's
 * internal records, written in the tests from Kafka's published schemas
 * (org.apache.kafka.connect.mirror Heartbeat, OffsetSync, Checkpoint:
 * Kafka protocol STRING = INT16 length + bytes, big-endian integers).  It
 * shares no code with policy/mm2_format.c, so a mistake there cannot hide here.
 */
#ifndef AAGW_TEST_MM2_REF_H
#define AAGW_TEST_MM2_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* A cursor over one record part; any overrun makes 'ok' false. */
struct ref_cur {
        const uint8_t *b;
        size_t         n, at;
        bool           ok;
};

static inline struct ref_cur ref_cur(const void *b, size_t n) {
        struct ref_cur c = {b, n, 0, b != NULL};
        return c;
}

static inline int64_t ref_int(struct ref_cur *c, int width) {
        uint64_t v = 0;
        if (!c->ok || c->n - c->at < (size_t)width) {
                c->ok = false;
                return 0;
        }
        for (int i = 0; i < width; i++)
                v = (v << 8) | c->b[c->at + (size_t)i];
        c->at += (size_t)width;
        /* sign-extend INT16 / INT32 */
        if (width < 8 && (v >> (8 * width - 1)) & 1)
                v |= ~UINT64_C(0) << (8 * width);
        return (int64_t)v;
}

/* STRING into 'out' (NUL-terminated). */
static inline void ref_string(struct ref_cur *c, char *out, size_t size) {
        int64_t len = ref_int(c, 2);
        if (!c->ok || len < 0 || (size_t)len >= size ||
            c->n - c->at < (size_t)len) {
                c->ok = false;
                return;
        }
        memcpy(out, c->b + c->at, (size_t)len);
        out[len] = 0;
        c->at += (size_t)len;
}

static inline bool ref_end(const struct ref_cur *c) {
        return c->ok && c->at == c->n;
}

struct ref_heartbeat {
        char    source[128], target[128];
        int16_t version;
        int64_t timestamp;
};

static inline bool ref_heartbeat(const void *k, size_t kl, const void *v,
                                 size_t vl, struct ref_heartbeat *h) {
        struct ref_cur ck = ref_cur(k, kl), cv = ref_cur(v, vl);
        ref_string(&ck, h->source, sizeof(h->source));
        ref_string(&ck, h->target, sizeof(h->target));
        h->version   = (int16_t)ref_int(&cv, 2);
        h->timestamp = ref_int(&cv, 8);
        return ref_end(&ck) && ref_end(&cv);
}

struct ref_sync {
        char    topic[256];
        int32_t partition;
        int64_t upstream, downstream;
};

static inline bool ref_sync(const void *k, size_t kl, const void *v, size_t vl,
                            struct ref_sync *s) {
        struct ref_cur ck = ref_cur(k, kl), cv = ref_cur(v, vl);
        ref_string(&ck, s->topic, sizeof(s->topic));
        s->partition  = (int32_t)ref_int(&ck, 4);
        s->upstream   = ref_int(&cv, 8);
        s->downstream = ref_int(&cv, 8);
        return ref_end(&ck) && ref_end(&cv);
}

struct ref_checkpoint {
        char    group[256], topic[256], metadata[256];
        int32_t partition;
        int16_t version;
        int64_t upstream, downstream;
};

static inline bool ref_checkpoint(const void *k, size_t kl, const void *v,
                                  size_t vl, struct ref_checkpoint *c) {
        struct ref_cur ck = ref_cur(k, kl), cv = ref_cur(v, vl);
        ref_string(&ck, c->group, sizeof(c->group));
        ref_string(&ck, c->topic, sizeof(c->topic));
        c->partition  = (int32_t)ref_int(&ck, 4);
        c->version    = (int16_t)ref_int(&cv, 2);
        c->upstream   = ref_int(&cv, 8);
        c->downstream = ref_int(&cv, 8);
        ref_string(&cv, c->metadata, sizeof(c->metadata));
        return ref_end(&ck) && ref_end(&cv);
}

#endif
