/* policy/json.c: the json:FIELD id rule, on json-c.
 *
 * The record value is untrusted producer data.  json-c's tokener parses
 * all of it in strict mode (JSON_TOKENER_STRICT) with a nesting bound of
 * JSON_MAX_DEPTH levels, the top-level object included; deeper counts as
 * not JSON.  The whole value must be exactly one JSON value, with nothing
 * but whitespace after it, and it must be an object.  We take its
 * top-level member FIELD: a string gives its bytes, an integer its decimal
 * text.  Everything json-c allocates (the tokener and the object tree) is
 * freed before we return: there is no state between calls, so any thread
 * may call this.  The cost is memory proportional to the value for the
 * duration of the call, and a few hundred nanoseconds per typical record
 * more than the hand-written scanner this replaced.
 *
 * What json-c 0.16 (Debian 12) decides for us, and the id rule inherits:
 *   - a member that appears twice: the last one wins, as in most parsers
 *     (JSON.parse, Python's json, Go's encoding/json).  json-c keeps no
 *     trace of the earlier copy, so duplicates cannot be refused;
 *   - a key is cut at an escaped NUL: "id\u0000x" is the key "id";
 *   - "\u" escapes are decoded to UTF-8; a lone UTF-16 surrogate becomes
 *     U+FFFD (EF BF BD), so ids that differ only in which lone surrogate
 *     they hold are equal; other bytes pass unchecked (no UTF-8
 *     validation);
 *   - strict mode still accepts some text RFC 8259 does not: raw control
 *     characters in strings, "-01" (as -1), "1." and "01.5" (as fractions),
 *     NaN, Infinity and -Infinity (as fractions);
 *   - an integer outside int64/uint64 range is clamped to INT64_MIN or
 *     UINT64_MAX.  As a field we refuse those two values
 *     (AAGW_REASON_ID_FIELD_INVALID): an overflow must not collapse
 *     distinct ids into one.  (json-c 0.17 and later refuse the overflow
 *     in strict mode, which makes the whole value not JSON.)
 *   - "-0" is the integer 0, so its id is "0". */
#include "policy_int.h"

#include <json-c/json.h>
#include <limits.h>
#include <string.h>

#define JSON_MAX_DEPTH 512 /* levels, the top-level object included */

/* Parse all 'len' bytes of 'v' into '*objp' (NULL for the JSON null),
 * which the caller puts.  A value over INT_MAX bytes (json-c's length is
 * an int; Kafka records are far smaller) and json-c running out of memory
 * count as not JSON: the id rule has no other reason to give. */
static aagw_reason_t parse(const char *v, size_t len, json_object **objp) {
        struct json_tokener    *tok;
        json_object            *obj;
        enum json_tokener_error err;
        size_t                  end;

        if (len >= INT_MAX)
                return AAGW_REASON_ID_NOT_JSON;
        tok = json_tokener_new_ex(JSON_MAX_DEPTH);
        if (!tok)
                return AAGW_REASON_ID_NOT_JSON;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        obj = json_tokener_parse_ex(tok, v, (int)len);
        err = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        if (err == json_tokener_continue) {
                /* All bytes were read and the value is either cut short
                 * or has no end of its own (a bare number or literal):
                 * a NUL tells the tokener that the input ends here. */
                obj = json_tokener_parse_ex(tok, "", 1);
                err = json_tokener_get_error(tok);
                end = len;
        }
        json_tokener_free(tok);
        /* Strict mode refuses trailing text itself, except after a NUL
         * byte, which json-c takes for the end of the input. */
        if (err != json_tokener_success || end != len) {
                json_object_put(obj);
                return AAGW_REASON_ID_NOT_JSON;
        }
        *objp = obj;
        return AAGW_REASON_OK;
}

/* The decimal text of an integer member, or FIELD_INVALID for the two
 * values json-c clamps overflows to. */
static aagw_reason_t int_text(json_object *f, char tmp[21], size_t *n) {
        int64_t  i = json_object_get_int64(f);
        uint64_t u;

        if (i == INT64_MIN)
                return AAGW_REASON_ID_FIELD_INVALID;
        if (i < 0) {
                tmp[0] = '-';
                *n     = 1 + policy_fmt_dec(tmp + 1, (uint64_t)-i);
                return AAGW_REASON_OK;
        }
        /* json-c keeps integers above INT64_MAX as uint64; get_int64()
         * saturates them, get_uint64() does not. */
        u = json_object_get_uint64(f);
        if (u == UINT64_MAX)
                return AAGW_REASON_ID_FIELD_INVALID;
        *n = policy_fmt_dec(tmp, u);
        return AAGW_REASON_OK;
}

aagw_reason_t policy_json_field(const void *v, size_t len, const char *field,
                                char *out, size_t cap, size_t *outlen) {
        json_object  *obj = NULL, *f;
        const char   *s;
        char          tmp[21];
        size_t        n = 0;
        aagw_reason_t r;

        r = parse(v, len, &obj);
        if (r != AAGW_REASON_OK)
                return r;
        if (!json_object_is_type(obj, json_type_object)) {
                r = AAGW_REASON_ID_NOT_OBJECT;
                goto out;
        }
        if (!json_object_object_get_ex(obj, field, &f)) {
                r = AAGW_REASON_ID_NO_FIELD;
                goto out;
        }
        switch (json_object_get_type(f)) { /* NULL f: json_type_null */
        case json_type_string:
                s = json_object_get_string(f);
                n = (size_t)json_object_get_string_len(f);
                break;
        case json_type_int:
                r = int_text(f, tmp, &n);
                if (r != AAGW_REASON_OK)
                        goto out;
                s = tmp;
                break;
        default: /* null, boolean, double (fraction, exponent), object,
                  * array */
                r = AAGW_REASON_ID_FIELD_INVALID;
                goto out;
        }
        if (!n) {
                r = AAGW_REASON_ID_EMPTY;
        } else if (n > cap) {
                r = AAGW_REASON_ID_TOO_LONG;
        } else {
                memcpy(out, s, n);
                *outlen = n;
        }
out:
        json_object_put(obj);
        return r;
}
