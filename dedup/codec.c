/*
 * dedup/codec.c: the byte layout of stored values and journal entries,
 * the last-write-wins order, verdict names.  Pure functions, no I/O.
 *
 * Values start with a format byte (DEDUP_VALUE_V1) and the entry's time
 * (BE64), so the compaction filter reads every kind the same way.  All
 * integers are big-endian; strings are a length byte (ids and keys: BE16)
 * followed by the bytes, no NUL.  Decoders check every length against
 * what is left and refuse trailing bytes: a short or corrupt value is
 * reported, never read past.
 */
#include "dedup_int.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------- GROWING BUFFER --------------------------- */

int dedup_buf_reserve(struct dedup_buf *b, size_t n) {
        if (b->cap - b->len >= n)
                return 0;
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
                if (cap > SIZE_MAX / 2)
                        return -1;
                cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p)
                return -1;
        b->p   = p;
        b->cap = cap;
        return 0;
}

void dedup_buf_free(struct dedup_buf *b) {
        free(b->p);
        memset(b, 0, sizeof(*b));
}

/* -------------------------------- ENTRIES ------------------------------ */

const uint8_t *dedup_entry_next(const uint8_t *p, const uint8_t *end,
                                struct dedup_entry *e) {
        if (end - p < DEDUP_ENTRY_HDR)
                return NULL;
        e->kind = p[0];
        e->klen = p[1];
        e->vlen = dedup_get_be16(p + 2);
        if (e->kind < DK_SEEN || e->kind >= DK__CNT)
                return NULL;
        if ((e->kind == DK_SEEN || e->kind == DK_LWW)
                ? e->klen != 16
                : e->klen != DEDUP_IDXKEY_LEN)
                return NULL;
        if ((size_t)(end - p) - DEDUP_ENTRY_HDR < e->klen + e->vlen)
                return NULL;
        e->key = p + DEDUP_ENTRY_HDR;
        e->val = e->key + e->klen;
        return e->val + e->vlen;
}

int dedup_entry_put(struct dedup_buf *b, int kind, const uint8_t *key,
                    size_t klen, const uint8_t *val, size_t vlen) {
        if (klen > 255 || vlen > 65535)
                return -2;
        if (dedup_buf_reserve(b, DEDUP_ENTRY_HDR + klen + vlen))
                return -1;
        uint8_t *p = b->p + b->len;
        p[0]       = (uint8_t)kind;
        p[1]       = (uint8_t)klen;
        dedup_put_be16(p + 2, (uint16_t)vlen);
        memcpy(p + DEDUP_ENTRY_HDR, key, klen);
        if (vlen)
                memcpy(p + DEDUP_ENTRY_HDR + klen, val, vlen);
        b->len += DEDUP_ENTRY_HDR + klen + vlen;
        return 0;
}

/* ------------------------------- ENCODING ------------------------------ */

/* Length of the NUL-terminated string in an array of 'size' bytes, or -1
 * if it is not terminated there. */
static ssize_t arr_len(const char *s, size_t size) {
        size_t n = strnlen(s, size);
        return n == size ? -1 : (ssize_t)n;
}

static void put_str8(uint8_t **pp, const char *s, size_t n) {
        **pp = (uint8_t)n;
        memcpy(*pp + 1, s, n);
        *pp += 1 + n;
}

int dedup_seen_encode(struct dedup_buf *b, const struct aagw_seen *s,
                      int64_t time_ms, const char **why) {
        ssize_t sl = arr_len(s->site, sizeof(s->site));
        ssize_t ol = arr_len(s->origin, sizeof(s->origin));
        ssize_t tl = arr_len(s->topic, sizeof(s->topic));

        if (sl < 0 || ol < 0 || tl < 0) {
                *why = "seen: site, origin or topic is not NUL-terminated";
                return -2;
        }
        if (dedup_buf_reserve(b, 29 + 3 + (size_t)(sl + ol + tl)))
                return -1;
        uint8_t *p = b->p + b->len;
        p[0]       = DEDUP_VALUE_V1;
        dedup_put_be64(p + 1, (uint64_t)time_ms);
        dedup_put_be64(p + 9, s->hlc);
        dedup_put_be32(p + 17, (uint32_t)s->partition);
        dedup_put_be64(p + 21, (uint64_t)s->offset);
        p += 29;
        put_str8(&p, s->site, (size_t)sl);
        put_str8(&p, s->origin, (size_t)ol);
        put_str8(&p, s->topic, (size_t)tl);
        b->len = (size_t)(p - b->p);
        return 0;
}

int dedup_lww_encode(struct dedup_buf *b, const struct aagw_lww *l,
                     int64_t time_ms, const char **why) {
        ssize_t ol = arr_len(l->v.origin, sizeof(l->v.origin));

        if (ol < 0) {
                *why = "lww: origin is not NUL-terminated";
                return -2;
        }
        if (l->v.id_len > AAGW_ID_MAX) {
                *why = "lww: id longer than AAGW_ID_MAX";
                return -2;
        }
        if (dedup_buf_reserve(b, 18 + 1 + (size_t)ol + 2 + l->v.id_len))
                return -1;
        uint8_t *p = b->p + b->len;
        p[0]       = DEDUP_VALUE_V1;
        dedup_put_be64(p + 1, (uint64_t)time_ms);
        dedup_put_be64(p + 9, l->v.hlc);
        p[17] = l->tombstone ? 1 : 0;
        p += 18;
        put_str8(&p, l->v.origin, (size_t)ol);
        dedup_put_be16(p, (uint16_t)l->v.id_len);
        memcpy(p + 2, l->v.id, l->v.id_len);
        p += 2 + l->v.id_len;
        b->len = (size_t)(p - b->p);
        return 0;
}

int dedup_audit_encode(struct dedup_buf *b, const struct aagw_audit *a,
                       int64_t time_ms, const char **why) {
        const char *site  = a->site ? a->site : "";
        const char *orig  = a->origin ? a->origin : "";
        const char *topic = a->topic ? a->topic : "";
        size_t      sl = strlen(site), ol = strlen(orig), tl = strlen(topic);
        size_t      ekl   = a->ekey ? a->ekey_len : 0;
        bool        trunc = ekl > AAGW_AUDIT_EKEY_MAX;

        if (sl > AAGW_ALIAS_MAX || ol > AAGW_ALIAS_MAX || tl > AAGW_TOPIC_MAX) {
                *why = "audit: site, origin or topic too long";
                return -2;
        }
        if ((unsigned)a->verdict >= AAGW_AUDIT__CNT) {
                *why = "audit: unknown verdict";
                return -2;
        }
        if (a->id_len > AAGW_ID_MAX || (a->id_len && !a->id)) {
                *why = "audit: id longer than AAGW_ID_MAX (or NULL)";
                return -2;
        }
        if (trunc)
                ekl = AAGW_AUDIT_EKEY_MAX;
        if (dedup_buf_reserve(b,
                              30 + 3 + sl + ol + tl + 2 + a->id_len + 3 + ekl))
                return -1;
        uint8_t *p = b->p + b->len;
        p[0]       = DEDUP_VALUE_V1;
        dedup_put_be64(p + 1, (uint64_t)time_ms);
        p[9] = (uint8_t)a->verdict;
        dedup_put_be64(p + 10, a->hlc);
        dedup_put_be32(p + 18, (uint32_t)a->partition);
        dedup_put_be64(p + 22, (uint64_t)a->offset);
        p += 30;
        put_str8(&p, site, sl);
        put_str8(&p, orig, ol);
        put_str8(&p, topic, tl);
        dedup_put_be16(p, (uint16_t)a->id_len);
        if (a->id_len)
                memcpy(p + 2, a->id, a->id_len);
        p += 2 + a->id_len;
        p[0] = (uint8_t)((a->ekey ? 1 : 0) | (trunc ? 2 : 0));
        dedup_put_be16(p + 1, (uint16_t)ekl);
        if (ekl)
                memcpy(p + 3, a->ekey, ekl);
        p += 3 + ekl;
        b->len = (size_t)(p - b->p);
        return 0;
}

/* ------------------------------- DECODING ------------------------------ */

/* A cursor over a value; every read checks what is left. */
struct rd {
        const uint8_t *p, *end;
        bool           bad;
};

static const uint8_t *rd_take(struct rd *r, size_t n) {
        if (r->bad || (size_t)(r->end - r->p) < n) {
                r->bad = true;
                return NULL;
        }
        const uint8_t *q = r->p;
        r->p += n;
        return q;
}

static void rd_str8(struct rd *r, char *out, size_t size) {
        const uint8_t *l = rd_take(r, 1);
        const uint8_t *s = l ? rd_take(r, *l) : NULL;
        if (!s || *l >= size) {
                r->bad = true;
                out[0] = '\0';
                return;
        }
        memcpy(out, s, *l);
        out[*l] = '\0';
}

static int bad_value(const char *what, const uint8_t *v, size_t len,
                     char *errstr, size_t errstr_size) {
        if (len && v[0] != DEDUP_VALUE_V1)
                snprintf(errstr, errstr_size,
                         "%s value has format %u (this aagw reads %u): "
                         "written by a newer aagw?",
                         what, v[0], DEDUP_VALUE_V1);
        else
                snprintf(errstr, errstr_size,
                         "%s value is corrupt or short (%zu bytes)", what, len);
        return -1;
}

int dedup_value_time(const uint8_t *v, size_t len, int64_t *time_ms) {
        if (len < 9 || v[0] != DEDUP_VALUE_V1)
                return -1;
        *time_ms = (int64_t)dedup_get_be64(v + 1);
        return 0;
}

int dedup_seen_decode(const uint8_t *v, size_t len, struct aagw_seen *out,
                      char *errstr, size_t errstr_size) {
        struct rd      r = {v, v + len, false};
        const uint8_t *h = rd_take(&r, 29);

        if (!h || h[0] != DEDUP_VALUE_V1)
                return bad_value("seen", v, len, errstr, errstr_size);
        out->time_ms   = (int64_t)dedup_get_be64(h + 1);
        out->hlc       = dedup_get_be64(h + 9);
        out->partition = (int32_t)dedup_get_be32(h + 17);
        out->offset    = (int64_t)dedup_get_be64(h + 21);
        rd_str8(&r, out->site, sizeof(out->site));
        rd_str8(&r, out->origin, sizeof(out->origin));
        rd_str8(&r, out->topic, sizeof(out->topic));
        if (r.bad || r.p != r.end)
                return bad_value("seen", v, len, errstr, errstr_size);
        return 0;
}

int dedup_lww_decode(const uint8_t *v, size_t len, struct aagw_lww *out,
                     char *errstr, size_t errstr_size) {
        struct rd      r = {v, v + len, false};
        const uint8_t *h = rd_take(&r, 18), *il, *id;

        if (!h || h[0] != DEDUP_VALUE_V1 || h[17] > 1)
                return bad_value("lww", v, len, errstr, errstr_size);
        out->time_ms   = (int64_t)dedup_get_be64(h + 1);
        out->v.hlc     = dedup_get_be64(h + 9);
        out->tombstone = h[17] == 1;
        rd_str8(&r, out->v.origin, sizeof(out->v.origin));
        il = rd_take(&r, 2);
        if (!il || dedup_get_be16(il) > AAGW_ID_MAX)
                return bad_value("lww", v, len, errstr, errstr_size);
        out->v.id_len = dedup_get_be16(il);
        id            = rd_take(&r, out->v.id_len);
        if (!id || r.bad || r.p != r.end)
                return bad_value("lww", v, len, errstr, errstr_size);
        memcpy(out->v.id, id, out->v.id_len);
        out->v.id[out->v.id_len] = '\0';
        return 0;
}

int dedup_audit_decode(const uint8_t *v, size_t len,
                       struct aagw_audit_decoded *out, char *errstr,
                       size_t errstr_size) {
        struct rd          r = {v, v + len, false};
        const uint8_t     *h = rd_take(&r, 30), *il, *id, *ek, *ekey;
        struct aagw_audit *a = &out->a;

        if (!h || h[0] != DEDUP_VALUE_V1 || h[9] >= AAGW_AUDIT__CNT)
                return bad_value("audit", v, len, errstr, errstr_size);
        memset(a, 0, sizeof(*a));
        a->time_ms   = (int64_t)dedup_get_be64(h + 1);
        a->verdict   = (aagw_audit_verdict_t)h[9];
        a->hlc       = dedup_get_be64(h + 10);
        a->partition = (int32_t)dedup_get_be32(h + 18);
        a->offset    = (int64_t)dedup_get_be64(h + 22);
        rd_str8(&r, out->site, sizeof(out->site));
        rd_str8(&r, out->origin, sizeof(out->origin));
        rd_str8(&r, out->topic, sizeof(out->topic));
        il = rd_take(&r, 2);
        if (!il || dedup_get_be16(il) > AAGW_ID_MAX)
                return bad_value("audit", v, len, errstr, errstr_size);
        a->id_len = dedup_get_be16(il);
        id        = rd_take(&r, a->id_len);
        ek        = rd_take(&r, 3);
        if (!ek || ek[0] > 3 || dedup_get_be16(ek + 1) > AAGW_AUDIT_EKEY_MAX)
                return bad_value("audit", v, len, errstr, errstr_size);
        a->ekey_len = dedup_get_be16(ek + 1);
        ekey        = rd_take(&r, a->ekey_len);
        if (r.bad || r.p != r.end || (!(ek[0] & 1) && a->ekey_len))
                return bad_value("audit", v, len, errstr, errstr_size);
        a->site   = out->site;
        a->origin = out->origin;
        a->topic  = out->topic;
        a->id     = id;
        a->ekey   = (ek[0] & 1) ? (ekey ? ekey : (const void *)"") : NULL;
        a->ekey_truncated = (ek[0] & 2) != 0;
        return 0;
}

int dedup_entry_time(int cf, const uint8_t *key, size_t klen,
                     const uint8_t *val, size_t vlen, int64_t *time_ms) {
        switch (cf) {
        case CF_SEEN:
        case CF_LWW:
                return dedup_value_time(val, vlen, time_ms);
        case CF_AUDIT:
                if (klen != DEDUP_AKEY_LEN)
                        return -1;
                *time_ms = (int64_t)dedup_get_be64(key);
                return 0;
        case CF_AUDIT_ID:
        case CF_AUDIT_KEY:
                if (klen != DEDUP_IDXKEY_LEN)
                        return -1;
                *time_ms = (int64_t)dedup_get_be64(key + 16);
                return 0;
        case CF_AUDIT_VERDICT:
                if (klen != 1 + DEDUP_AKEY_LEN)
                        return -1;
                *time_ms = (int64_t)dedup_get_be64(key + 1);
                return 0;
        default:
                return -1;
        }
}

void dedup_hex(const uint8_t *p, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i]     = digits[p[i] >> 4];
                out[2 * i + 1] = digits[p[i] & 15];
        }
        out[2 * n] = '\0';
}

const char *aagw_audit_verdict_name(aagw_audit_verdict_t v) {
        static const char *const names[AAGW_AUDIT__CNT] = {
            "accepted", "dropped", "superseded", "identical", "rejected",
            "diverged"};
        return (unsigned)v < AAGW_AUDIT__CNT ? names[v] : "unknown";
}

/* ------------------------------- PUBLIC -------------------------------- */

ssize_t aagw_audit_encode(const struct aagw_audit *a, uint8_t **buf,
                          size_t *cap, const char **why) {
        struct dedup_buf b = {*buf, 0, *cap};
        int              rc;

        *why = NULL;
        rc   = dedup_audit_encode(&b, a, a->time_ms, why);
        *buf = b.p;
        *cap = b.cap;
        return rc ? -1 : (ssize_t)b.len;
}

aagw_err_t aagw_audit_decode(const void *v, size_t len,
                             struct aagw_audit_decoded *out, char *errstr,
                             size_t errstr_size) {
        return dedup_audit_decode(v, len, out, errstr, errstr_size)
                   ? AAGW_ERR_STORE
                   : AAGW_OK;
}
