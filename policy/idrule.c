/* policy/idrule.c: where a record's global message id comes from, and the
 * fixed-size key it is stored under.
 *
 * A rule is compiled once per topic at configuration time; applying it is
 * per record, so it copies into the caller's buffer.  Only the json rule
 * allocates: json-c builds the parsed value, and json.c frees it before
 * returning. */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include "policy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum id_kind {
        ID_DERIVED,
        ID_KEY,
        ID_HASH,
        ID_HEADER,
        ID_JSON,
};

struct aagw_id_rule {
        enum id_kind kind;
        char         arg[AAGW_ID_ARG_MAX + 1]; /* header NAME, json FIELD */
};

/* ------------------------------- RULES --------------------------------- */

/* One rule as written: its form, its argument (NAME, FIELD) and the
 * argument's length. */
struct spec {
        const char  *text; /* never NULL */
        enum id_kind kind;
        const char  *arg;
        size_t       len;
        bool         bad_len; /* argument out of 1..AAGW_ID_ARG_MAX */
};

/* The grammar, parsed once for aagw_id_rule_new() and
 * aagw_id_rule_check().  Returns false if no form matches. */
static bool parse(const char *text, struct spec *sp) {
        static const struct {
                const char  *word;
                enum id_kind kind;
                bool         arg;
        } forms[] = {
            {"derived", ID_DERIVED, false}, {"key", ID_KEY, false},
            {"hash", ID_HASH, false},       {"header:", ID_HEADER, true},
            {"json:", ID_JSON, true},
        };

        memset(sp, 0, sizeof(*sp));
        sp->text = text ? text : "";
        for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
                size_t wl = strlen(forms[i].word);
                if (forms[i].arg ? strncmp(sp->text, forms[i].word, wl)
                                 : strcmp(sp->text, forms[i].word))
                        continue;
                sp->kind    = forms[i].kind;
                sp->arg     = sp->text + wl;
                sp->len     = forms[i].arg ? strlen(sp->arg) : 0;
                sp->bad_len = forms[i].arg &&
                              (sp->len < 1 || sp->len > AAGW_ID_ARG_MAX);
                return true;
        }
        return false;
}

aagw_id_rule_t *aagw_id_rule_new(const char *text, char *errstr,
                                 size_t errstr_size) {
        aagw_id_rule_t *rule;
        struct spec     sp;

        if (!parse(text, &sp)) {
                snprintf(errstr, errstr_size,
                         "id rule \"%s\": expected header:NAME, key, "
                         "json:FIELD, hash or derived",
                         sp.text);
                return NULL;
        }
        if (sp.bad_len) {
                snprintf(errstr, errstr_size,
                         "id rule \"%s\": %s must be 1 to %d bytes", sp.text,
                         sp.kind == ID_HEADER ? "NAME" : "FIELD",
                         AAGW_ID_ARG_MAX);
                return NULL;
        }
        rule = calloc(1, sizeof(*rule));
        if (!rule) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        rule->kind = sp.kind;
        memcpy(rule->arg, sp.arg, sp.len);
        return rule;
}

bool aagw_id_rule_check(const char *text, bool entity_key, char *errstr,
                        size_t errstr_size) {
        struct spec sp;

        if (parse(text, &sp) && !sp.bad_len &&
            (!entity_key || sp.kind == ID_KEY || sp.kind == ID_JSON))
                return true;
        snprintf(errstr, errstr_size,
                 entity_key ? "expected key or json:FIELD, got \"%s\""
                            : "expected header:NAME, key, json:FIELD, hash or "
                              "derived, got \"%s\"",
                 sp.text);
        return false;
}

void aagw_id_rule_destroy(aagw_id_rule_t *rule) {
        free(rule);
}

/* ------------------------------ EXTRACTION ----------------------------- */

/* Snprintf-style append of 'len' bytes at position '*k'. */
static void append(char *buf, size_t size, size_t *k, const char *s,
                   size_t len) {
        if (*k < size) {
                size_t room = size - *k;
                memcpy(buf + *k, s, len < room ? len : room);
        }
        *k += len;
}

static void append_dec(char *buf, size_t size, size_t *k, int64_t v) {
        char     tmp[21];
        size_t   n = 0;
        uint64_t u = (uint64_t)v;

        if (v < 0) {
                tmp[n++] = '-';
                u        = 0 - u;
        }
        n += policy_fmt_dec(tmp + n, u);
        append(buf, size, k, tmp, n);
}

size_t aagw_id_derive(const char *origin, const char *topic, int32_t partition,
                      int64_t offset, char *buf, size_t size) {
        size_t k = 0;

        /* ':' appears in neither aliases nor topic names, so the four
         * parts can always be told apart again. */
        append(buf, size, &k, origin, strlen(origin));
        append(buf, size, &k, ":", 1);
        append(buf, size, &k, topic, strlen(topic));
        append(buf, size, &k, ":", 1);
        append_dec(buf, size, &k, partition);
        append(buf, size, &k, ":", 1);
        append_dec(buf, size, &k, offset);
        if (size)
                buf[k < size ? k : size - 1] = '\0';
        return k;
}

static const char hexdig[] = "0123456789abcdef";

/* The hash rule: XXH3-128 over, for the key then the value, an 8-byte
 * little-endian length (all ones for null) followed by the bytes.  The
 * lengths keep ("ab", "c") and ("a", "bc") apart, and a null key apart
 * from an empty one.  Hex of the canonical (big-endian) digest. */
static void hash_kv(const struct aagw_rec *rec, char out[32]) {
        XXH3_state_t       st;
        XXH128_canonical_t c;
        const void        *part[2] = {rec->key, rec->value};
        size_t             plen[2] = {rec->key_len, rec->value_len};

        XXH3_INITSTATE(&st);
        XXH3_128bits_reset(&st);
        for (int i = 0; i < 2; i++) {
                uint64_t      len = part[i] ? (uint64_t)plen[i] : UINT64_MAX;
                unsigned char le[8];
                for (int b = 0; b < 8; b++)
                        le[b] = (unsigned char)(len >> (8 * b));
                XXH3_128bits_update(&st, le, sizeof(le));
                if (part[i] && plen[i])
                        XXH3_128bits_update(&st, part[i], plen[i]);
        }
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
        for (int i = 0; i < 16; i++) {
                out[2 * i]     = hexdig[c.digest[i] >> 4];
                out[2 * i + 1] = hexdig[c.digest[i] & 0xf];
        }
}

/* Copy a candidate id, refusing empty and oversized ones. */
static aagw_reason_t take(const void *v, size_t len, char *buf, size_t cap,
                          size_t *lenp) {
        if (!len)
                return AAGW_REASON_ID_EMPTY;
        if (len > cap)
                return AAGW_REASON_ID_TOO_LONG;
        memcpy(buf, v, len);
        buf[len] = '\0';
        *lenp    = len;
        return AAGW_REASON_OK;
}

aagw_reason_t aagw_id_extract(const aagw_id_rule_t *rule, const char *origin,
                              const struct aagw_rec *rec, char *buf,
                              size_t size, size_t *lenp) {
        /* Room for the id itself; one byte stays for the NUL. */
        size_t        cap = size ? size - 1 : 0;
        size_t        n;
        aagw_reason_t r;
        char          hex[32];

        if (cap > AAGW_ID_MAX)
                cap = AAGW_ID_MAX;
        switch (rule ? rule->kind : ID_DERIVED) {
        case ID_DERIVED:
                n = aagw_id_derive(origin, rec->topic, rec->partition,
                                   rec->offset, buf, size);
                if (n > cap)
                        return AAGW_REASON_ID_TOO_LONG;
                *lenp = n;
                return AAGW_REASON_OK;
        case ID_KEY:
                if (!rec->key)
                        return AAGW_REASON_ID_NO_KEY;
                return take(rec->key, rec->key_len, buf, cap, lenp);
        case ID_HASH:
                hash_kv(rec, hex);
                return take(hex, sizeof(hex), buf, cap, lenp);
        case ID_HEADER:
                /* The last header of that name wins, as Kafka's
                 * Headers.lastHeader() and rd_kafka_header_get_last() do. */
                for (size_t i = rec->hdr_cnt; i-- > 0;) {
                        const struct aagw_header *h = &rec->hdrs[i];
                        if (!h->name || strcmp(h->name, rule->arg))
                                continue;
                        if (!h->value)
                                return AAGW_REASON_ID_NULL_HEADER;
                        return take(h->value, h->size, buf, cap, lenp);
                }
                return AAGW_REASON_ID_NO_HEADER;
        case ID_JSON:
                if (!rec->value)
                        return AAGW_REASON_ID_NO_VALUE;
                r = policy_json_field(rec->value, rec->value_len, rule->arg,
                                      buf, cap, &n);
                if (r != AAGW_REASON_OK)
                        return r;
                buf[n] = '\0';
                *lenp  = n;
                return AAGW_REASON_OK;
        }
        return AAGW_REASON_ID_NO_FIELD;
}

void aagw_id_key(const void *id, size_t len, uint8_t key[AAGW_ID_KEY_LEN]) {
        XXH128_canonical_t c;

        XXH128_canonicalFromHash(&c, XXH3_128bits(id, len));
        memcpy(key, c.digest, AAGW_ID_KEY_LEN);
}

void aagw_scoped_key(const char *scope, const void *data, size_t len,
                     uint8_t key[AAGW_ID_KEY_LEN]) {
        XXH3_state_t       st;
        XXH128_canonical_t c;

        /* The scope and its NUL first: a scope never holds a NUL, so
         * ("a", "\0b") and ("a\0", "b") cannot collide. */
        XXH3_128bits_reset(&st);
        XXH3_128bits_update(&st, scope, strlen(scope) + 1);
        XXH3_128bits_update(&st, data, len);
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
        memcpy(key, c.digest, AAGW_ID_KEY_LEN);
}

size_t aagw_coords_format(char *buf, const char *topic, int32_t partition,
                          int64_t offset) {
        size_t n = strnlen(topic, AAGW_TOPIC_MAX);

        memcpy(buf, topic, n);
        buf[n++] = ':';
        n += policy_fmt_dec(buf + n, (uint64_t)(partition < 0 ? 0 : partition));
        buf[n++] = ':';
        n += policy_fmt_dec(buf + n, (uint64_t)(offset < 0 ? 0 : offset));
        buf[n] = '\0';
        return n;
}

bool aagw_coords_parse(const char *v, size_t len, char *topic, size_t tsize,
                       int32_t *partition, int64_t *offset) {
        const char *c1 = NULL, *c2 = NULL;
        uint64_t    p, o;

        for (size_t i = len; i > 0; i--) {
                if (v[i - 1] != ':')
                        continue;
                if (!c2)
                        c2 = v + i - 1;
                else {
                        c1 = v + i - 1;
                        break;
                }
        }
        if (!c1 || c1 == v || (size_t)(c1 - v) >= tsize ||
            !policy_parse_dec(c1 + 1, (size_t)(c2 - c1 - 1), INT32_MAX, &p) ||
            !policy_parse_dec(c2 + 1, (size_t)(v + len - c2 - 1), INT64_MAX,
                              &o))
                return false;
        memcpy(topic, v, (size_t)(c1 - v));
        topic[c1 - v] = '\0';
        *partition    = (int32_t)p;
        *offset       = (int64_t)o;
        return true;
}
