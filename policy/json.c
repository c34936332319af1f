/* policy/json.c: a bounded JSON scanner for the json:FIELD id rule.
 *
 * Why not json-c: it builds a tree of malloc()ed objects for every value,
 * and the id rule runs once per record on the replication hot path.  What
 * we need is narrow: one top-level field of an object.  This scanner
 * validates the whole value against RFC 8259 in one pass, keeps no state
 * but a bit stack for nesting (at most JSON_MAX_DEPTH levels, deeper counts
 * as not JSON), copies only the field's value into the caller's buffer and
 * allocates nothing.  It reads each byte at most twice, never past 'len'.
 *
 * Deliberate strictness: the whole value must be valid JSON, not just the
 * part before the field (so "{"id":"a"} trailing" is refused), and a field
 * that appears twice is refused rather than resolved, since JSON parsers
 * disagree on which copy wins and the id must be the same for every
 * reader.  Bytes >= 0x80 are passed through unchecked (no UTF-8
 * validation); "\u" escapes are decoded to UTF-8 and a lone surrogate
 * makes the field unusable. */
#include "policy_int.h"

#include <string.h>

#define JSON_MAX_DEPTH 512 /* levels, the top-level object included */

struct js {
        const unsigned char *p;
        const unsigned char *end;
};

static void skip_ws(struct js *j) {
        while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
                                 *j->p == '\n' || *j->p == '\r'))
                j->p++;
}

static bool hex4(struct js *j, uint32_t *cp) {
        uint32_t v = 0;

        if (j->end - j->p < 4)
                return false;
        for (int i = 0; i < 4; i++) {
                unsigned char c = j->p[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (uint32_t)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (uint32_t)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (uint32_t)(c - 'A' + 10);
                else
                        return false;
        }
        j->p += 4;
        *cp = v;
        return true;
}

/* Store byte 'c' at position 'k' of 'out' if it fits; count it anyway so
 * the caller learns the full decoded length. */
static void emit(char *out, size_t cap, size_t *k, unsigned char c) {
        if (out && *k < cap)
                out[*k] = (char)c;
        (*k)++;
}

static void emit_utf8(char *out, size_t cap, size_t *k, uint32_t cp) {
        if (cp < 0x80) {
                emit(out, cap, k, (unsigned char)cp);
        } else if (cp < 0x800) {
                emit(out, cap, k, (unsigned char)(0xc0 | cp >> 6));
                emit(out, cap, k, (unsigned char)(0x80 | (cp & 0x3f)));
        } else if (cp < 0x10000) {
                emit(out, cap, k, (unsigned char)(0xe0 | cp >> 12));
                emit(out, cap, k, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
                emit(out, cap, k, (unsigned char)(0x80 | (cp & 0x3f)));
        } else {
                emit(out, cap, k, (unsigned char)(0xf0 | cp >> 18));
                emit(out, cap, k, (unsigned char)(0x80 | ((cp >> 12) & 0x3f)));
                emit(out, cap, k, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
                emit(out, cap, k, (unsigned char)(0x80 | (cp & 0x3f)));
        }
}

/* Scan the string whose opening quote is at j->p, decoding it into 'out'
 * (up to 'cap' bytes; 'out' may be NULL).  '*n' gets the full decoded
 * length, which may exceed 'cap'; '*lone' is set if a lone surrogate was
 * seen.  Returns false on a syntax error. */
static bool scan_string(struct js *j, char *out, size_t cap, size_t *n,
                        bool *lone) {
        size_t k = 0;

        j->p++;
        while (j->p < j->end) {
                unsigned char c = *j->p++;
                uint32_t      cp, lo;

                if (c == '"') {
                        *n = k;
                        return true;
                }
                if (c < 0x20)
                        return false;
                if (c != '\\') {
                        emit(out, cap, &k, c);
                        continue;
                }
                if (j->p >= j->end)
                        return false;
                switch (c = *j->p++) {
                case '"':
                case '\\':
                case '/':
                        emit(out, cap, &k, c);
                        break;
                case 'b':
                        emit(out, cap, &k, '\b');
                        break;
                case 'f':
                        emit(out, cap, &k, '\f');
                        break;
                case 'n':
                        emit(out, cap, &k, '\n');
                        break;
                case 'r':
                        emit(out, cap, &k, '\r');
                        break;
                case 't':
                        emit(out, cap, &k, '\t');
                        break;
                case 'u':
                        if (!hex4(j, &cp))
                                return false;
                        if (cp >= 0xdc00 && cp <= 0xdfff) {
                                *lone = true;
                                break;
                        }
                        if (cp >= 0xd800 && cp <= 0xdbff) {
                                const unsigned char *save = j->p;
                                if (j->end - j->p >= 6 && j->p[0] == '\\' &&
                                    j->p[1] == 'u') {
                                        j->p += 2;
                                        if (!hex4(j, &lo))
                                                return false;
                                        if (lo >= 0xdc00 && lo <= 0xdfff) {
                                                cp = 0x10000 +
                                                     ((cp - 0xd800) << 10) +
                                                     (lo - 0xdc00);
                                                emit_utf8(out, cap, &k, cp);
                                                break;
                                        }
                                        /* Not a pair: the second escape
                                         * stands on its own. */
                                        j->p = save;
                                }
                                *lone = true;
                                break;
                        }
                        emit_utf8(out, cap, &k, cp);
                        break;
                default:
                        return false;
                }
        }
        return false;
}

/* Scan a number; '*integer' tells whether it had neither fraction nor
 * exponent. */
static bool scan_number(struct js *j, bool *integer) {
        if (j->p < j->end && *j->p == '-')
                j->p++;
        if (j->p >= j->end)
                return false;
        if (*j->p == '0') {
                j->p++;
        } else if (*j->p >= '1' && *j->p <= '9') {
                while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
                        j->p++;
        } else {
                return false;
        }
        *integer = true;
        if (j->p < j->end && *j->p == '.') {
                const unsigned char *digits = ++j->p;
                while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
                        j->p++;
                if (j->p == digits)
                        return false;
                *integer = false;
        }
        if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
                const unsigned char *digits;
                j->p++;
                if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
                        j->p++;
                digits = j->p;
                while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
                        j->p++;
                if (j->p == digits)
                        return false;
                *integer = false;
        }
        return true;
}

static bool scan_literal(struct js *j, const char *lit, size_t len) {
        if ((size_t)(j->end - j->p) < len || memcmp(j->p, lit, len))
                return false;
        j->p += len;
        return true;
}

/* An object member's key and colon: '"key" :' followed by whitespace. */
static bool scan_key(struct js *j) {
        size_t n;
        bool   lone = false;

        skip_ws(j);
        if (j->p >= j->end || *j->p != '"' ||
            !scan_string(j, NULL, 0, &n, &lone))
                return false;
        skip_ws(j);
        if (j->p >= j->end || *j->p != ':')
                return false;
        j->p++;
        return true;
}

/* Skip one complete value of any type, nested at most 'max_depth' levels.
 * Iterative, so a hostile "[[[[..." costs a bit per level instead of a
 * stack frame. */
static bool skip_value(struct js *j, size_t max_depth) {
        uint8_t is_obj[JSON_MAX_DEPTH / 8] = {0};
        size_t  depth                      = 0;
        size_t  n;
        bool    lone, integer, obj;

        for (;;) {
                skip_ws(j);
                if (j->p >= j->end)
                        return false;
                switch (*j->p) {
                case '{':
                case '[':
                        obj = *j->p == '{';
                        if (depth == max_depth)
                                return false;
                        if (obj)
                                is_obj[depth / 8] |= (uint8_t)(1u << depth % 8);
                        else
                                is_obj[depth / 8] &=
                                    (uint8_t) ~(1u << depth % 8);
                        depth++;
                        j->p++;
                        skip_ws(j);
                        if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
                                j->p++;
                                depth--;
                                break;
                        }
                        if (obj && !scan_key(j))
                                return false;
                        continue;
                case '"':
                        lone = false;
                        if (!scan_string(j, NULL, 0, &n, &lone))
                                return false;
                        break;
                case 't':
                        if (!scan_literal(j, "true", 4))
                                return false;
                        break;
                case 'f':
                        if (!scan_literal(j, "false", 5))
                                return false;
                        break;
                case 'n':
                        if (!scan_literal(j, "null", 4))
                                return false;
                        break;
                default:
                        if (!scan_number(j, &integer))
                                return false;
                        break;
                }
                /* A value ended: close finished containers, then either
                 * stop (depth 0) or go on to the next element. */
                for (;;) {
                        if (!depth)
                                return true;
                        obj = is_obj[(depth - 1) / 8] >> (depth - 1) % 8 & 1;
                        skip_ws(j);
                        if (j->p >= j->end)
                                return false;
                        if (*j->p == ',') {
                                j->p++;
                                if (obj && !scan_key(j))
                                        return false;
                                break;
                        }
                        if (*j->p != (obj ? '}' : ']'))
                                return false;
                        j->p++;
                        depth--;
                }
        }
}

/* The value of the field we look for: a string (decoded) or an integer
 * (its text, as written).  AAGW_REASON_ID_NOT_JSON means a syntax error. */
static aagw_reason_t field_value(struct js *j, char *out, size_t cap,
                                 size_t *outlen) {
        const unsigned char *start = j->p;
        size_t               n;
        bool                 lone = false, integer;

        if (*j->p == '"') {
                if (!scan_string(j, out, cap, &n, &lone))
                        return AAGW_REASON_ID_NOT_JSON;
                if (lone)
                        return AAGW_REASON_ID_FIELD_INVALID;
        } else if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
                if (!scan_number(j, &integer))
                        return AAGW_REASON_ID_NOT_JSON;
                if (!integer)
                        return AAGW_REASON_ID_FIELD_INVALID;
                n = (size_t)(j->p - start);
                if (n <= cap)
                        memcpy(out, start, n);
        } else {
                return skip_value(j, JSON_MAX_DEPTH - 1)
                           ? AAGW_REASON_ID_FIELD_INVALID
                           : AAGW_REASON_ID_NOT_JSON;
        }
        if (!n)
                return AAGW_REASON_ID_EMPTY;
        if (n > cap)
                return AAGW_REASON_ID_TOO_LONG;
        *outlen = n;
        return AAGW_REASON_OK;
}

aagw_reason_t policy_json_field(const void *v, size_t len, const char *field,
                                size_t field_len, char *out, size_t cap,
                                size_t *outlen) {
        struct js     j     = {v, (const unsigned char *)v + len};
        aagw_reason_t res   = AAGW_REASON_ID_NO_FIELD;
        bool          found = false, dup = false;
        char          key[AAGW_ID_ARG_MAX];

        skip_ws(&j);
        if (j.p >= j.end)
                return AAGW_REASON_ID_NOT_JSON;
        if (*j.p != '{') {
                if (!skip_value(&j, JSON_MAX_DEPTH))
                        return AAGW_REASON_ID_NOT_JSON;
                skip_ws(&j);
                return j.p == j.end ? AAGW_REASON_ID_NOT_OBJECT
                                    : AAGW_REASON_ID_NOT_JSON;
        }
        j.p++;
        skip_ws(&j);
        if (j.p < j.end && *j.p == '}') {
                j.p++;
        } else {
                for (;;) {
                        size_t kn;
                        bool   lone = false, match;

                        skip_ws(&j);
                        if (j.p >= j.end || *j.p != '"' ||
                            !scan_string(&j, key, sizeof(key), &kn, &lone))
                                return AAGW_REASON_ID_NOT_JSON;
                        /* kn <= sizeof(key) whenever it equals field_len
                         * (<= AAGW_ID_ARG_MAX), so the compared bytes were
                         * all stored. */
                        match = !lone && kn == field_len &&
                                !memcmp(key, field, field_len);
                        skip_ws(&j);
                        if (j.p >= j.end || *j.p != ':')
                                return AAGW_REASON_ID_NOT_JSON;
                        j.p++;
                        skip_ws(&j);
                        if (j.p >= j.end)
                                return AAGW_REASON_ID_NOT_JSON;
                        if (match && !found) {
                                found = true;
                                res   = field_value(&j, out, cap, outlen);
                                if (res == AAGW_REASON_ID_NOT_JSON)
                                        return res;
                        } else {
                                /* Inside the top-level object: one level
                                 * of the budget is used. */
                                dup = dup || match;
                                if (!skip_value(&j, JSON_MAX_DEPTH - 1))
                                        return AAGW_REASON_ID_NOT_JSON;
                        }
                        skip_ws(&j);
                        if (j.p < j.end && *j.p == ',') {
                                j.p++;
                                continue;
                        }
                        if (j.p < j.end && *j.p == '}') {
                                j.p++;
                                break;
                        }
                        return AAGW_REASON_ID_NOT_JSON;
                }
        }
        skip_ws(&j);
        if (j.p != j.end)
                return AAGW_REASON_ID_NOT_JSON;
        if (dup)
                return AAGW_REASON_ID_DUP_FIELD;
        return res;
}
