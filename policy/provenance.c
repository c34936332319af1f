/* policy/provenance.c: the provenance headers (wire format in
 * aagw_policy.h), and the reason codes for provenance and ids.
 *
 * Producers' headers are untrusted: decoding never allocates, reads each
 * value only within its stated size, stops at the first problem and
 * reports it as a reason code the caller can count and act on. */
#include "policy_int.h"

#include <string.h>

/* Longest valid values: 16 aliases and 15 '>'; "TOPIC:PART:OFFSET". */
#define PATH_TEXT_MAX (AAGW_PROV_MAX_HOPS * (AAGW_ALIAS_MAX + 1) - 1)
#define SRC_TEXT_MAX (AAGW_TOPIC_MAX + 1 + 10 + 1 + 19)
#define HLC_TEXT_MAX (15 + 1 + 5)

/* The encoder writes at most these bytes, each value NUL-terminated. */
_Static_assert((AAGW_ALIAS_MAX + 1) + (PATH_TEXT_MAX + 1) + (AAGW_ID_MAX + 1) +
                       (SRC_TEXT_MAX + 1) + (HLC_TEXT_MAX + 1) <=
                   AAGW_PROV_ENC_MAX,
               "AAGW_PROV_ENC_MAX too small for the largest provenance");

/* ------------------------------- REASONS ------------------------------- */

/* clang-format off */
static const struct {
        const char *name;
        const char *desc;
} reasons[AAGW_REASON_COUNT] = {
    [AAGW_REASON_OK] = {"ok", "no problem"},
    [AAGW_REASON_PROV_NULL_VALUE] = {"prov_null_value",
                                     "a provenance header has a null value"},
    [AAGW_REASON_PROV_DUPLICATE] = {"prov_duplicate",
                                    "a provenance header appears twice"},
    [AAGW_REASON_PROV_INCOMPLETE] = {"prov_incomplete",
                                     "some provenance headers are missing"},
    [AAGW_REASON_PROV_ORIGIN_INVALID] = {"prov_origin_invalid",
                                         "provenance origin is not a site "
                                         "alias"},
    [AAGW_REASON_PROV_ORIGIN_TOO_LONG] = {"prov_origin_too_long",
                                          "provenance origin is longer than "
                                          "64 bytes"},
    [AAGW_REASON_PROV_PATH_INVALID] = {"prov_path_invalid",
                                       "provenance path has an empty hop or "
                                       "a hop that is not a site alias"},
    [AAGW_REASON_PROV_PATH_TOO_LONG] = {"prov_path_too_long",
                                        "provenance path has more than 16 "
                                        "hops"},
    [AAGW_REASON_PROV_ID_EMPTY] = {"prov_id_empty", "provenance id is empty"},
    [AAGW_REASON_PROV_ID_TOO_LONG] = {"prov_id_too_long",
                                      "provenance id is longer than 1024 "
                                      "bytes"},
    [AAGW_REASON_PROV_SRC_INVALID] = {"prov_src_invalid",
                                      "provenance coordinates are not "
                                      "TOPIC:PARTITION:OFFSET with a valid "
                                      "topic name"},
    [AAGW_REASON_PROV_SRC_TOO_LONG] = {"prov_src_too_long",
                                       "provenance coordinates are too long"},
    [AAGW_REASON_PROV_SRC_PARTITION_INVALID] =
        {"prov_src_partition_invalid",
         "provenance partition is not a number from 0 to 2147483647"},
    [AAGW_REASON_PROV_SRC_OFFSET_INVALID] =
        {"prov_src_offset_invalid",
         "provenance offset is not a number from 0 to 2^63-1"},
    [AAGW_REASON_PROV_HLC_INVALID] = {"prov_hlc_invalid",
                                      "provenance clock is not MS:COUNTER"},
    [AAGW_REASON_PROV_ORIGIN_UNKNOWN] = {"prov_origin_unknown",
                                         "provenance origin is not a "
                                         "configured site"},
    [AAGW_REASON_PROV_PATH_UNKNOWN_SITE] = {"prov_path_unknown_site",
                                            "provenance path names a site "
                                            "that is not configured"},
    [AAGW_REASON_PROV_PATH_NOT_FROM_ORIGIN] = {"prov_path_not_from_origin",
                                               "provenance path does not "
                                               "start at the origin"},
    [AAGW_REASON_PROV_PATH_REPEATS_SITE] = {"prov_path_repeats_site",
                                            "provenance path repeats a "
                                            "site"},
    [AAGW_REASON_PROV_PATH_NOT_AT_SITE] = {"prov_path_not_at_site",
                                           "provenance path does not end at "
                                           "the site the record was read "
                                           "from"},
    [AAGW_REASON_ID_NO_HEADER] = {"id_no_header",
                                  "the id header is missing"},
    [AAGW_REASON_ID_NULL_HEADER] = {"id_null_header",
                                    "the id header has a null value"},
    [AAGW_REASON_ID_NO_KEY] = {"id_no_key", "the record key is null"},
    [AAGW_REASON_ID_NO_VALUE] = {"id_no_value",
                                 "the record value is null (tombstone)"},
    [AAGW_REASON_ID_NOT_JSON] = {"id_not_json",
                                 "the record value is not valid JSON"},
    [AAGW_REASON_ID_NOT_OBJECT] = {"id_not_object",
                                   "the record value is JSON but not an "
                                   "object"},
    [AAGW_REASON_ID_NO_FIELD] = {"id_no_field",
                                 "the id field is missing from the JSON "
                                 "object"},
    [AAGW_REASON_ID_DUP_FIELD] = {"id_dup_field",
                                  "the id field appears twice in the JSON "
                                  "object"},
    [AAGW_REASON_ID_FIELD_INVALID] = {"id_field_invalid",
                                      "the id field is not a string or an "
                                      "integer"},
    [AAGW_REASON_ID_EMPTY] = {"id_empty", "the id is empty"},
    [AAGW_REASON_ID_TOO_LONG] = {"id_too_long",
                                 "the id is longer than 1024 bytes"},
};
/* clang-format on */

const char *aagw_reason_name(aagw_reason_t r) {
        if ((unsigned)r >= AAGW_REASON_COUNT)
                return "unknown";
        return reasons[r].name;
}

const char *aagw_reason_str(aagw_reason_t r) {
        if ((unsigned)r >= AAGW_REASON_COUNT)
                return "unknown reason";
        return reasons[r].desc;
}

/* ------------------------------- DECODING ------------------------------ */

/* Which provenance field header 'name' is, or -1 if it is none. */
static int field_of(const aagw_repl_policy_t *pol, const char *name) {
        if (!name || strncmp(name, pol->hprefix, pol->hprefix_len))
                return -1;
        for (int f = 0; f < PROV_FIELD_CNT; f++)
                if (!strcmp(name, pol->hname[f]))
                        return f;
        return -1;
}

static aagw_reason_t decode_path(const char *v, size_t len,
                                 struct aagw_prov *out) {
        size_t n = 0, start = 0;

        if (len > PATH_TEXT_MAX)
                return AAGW_REASON_PROV_PATH_TOO_LONG;
        for (size_t i = 0; i <= len; i++) {
                size_t hop;
                if (i < len && v[i] != '>')
                        continue;
                hop = i - start;
                if (n == AAGW_PROV_MAX_HOPS)
                        return AAGW_REASON_PROV_PATH_TOO_LONG;
                if (!policy_alias_valid(v + start, hop))
                        return AAGW_REASON_PROV_PATH_INVALID;
                memcpy(out->path[n], v + start, hop);
                out->path[n][hop] = '\0';
                n++;
                start = i + 1;
        }
        out->path_len = n;
        return AAGW_REASON_OK;
}

static aagw_reason_t decode_src(const char *v, size_t len,
                                struct aagw_prov *out) {
        const char *c1, *c2, *end = v + len;
        uint64_t    part, off;

        if (len > SRC_TEXT_MAX)
                return AAGW_REASON_PROV_SRC_TOO_LONG;
        /* Topic names cannot contain ':', so the first two colons split. */
        c1 = memchr(v, ':', len);
        if (!c1 || !policy_topic_valid(v, (size_t)(c1 - v)))
                return AAGW_REASON_PROV_SRC_INVALID;
        c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
        if (!c2)
                return AAGW_REASON_PROV_SRC_INVALID;
        if (!policy_parse_dec(c1 + 1, (size_t)(c2 - c1 - 1), INT32_MAX, &part))
                return AAGW_REASON_PROV_SRC_PARTITION_INVALID;
        if (!policy_parse_dec(c2 + 1, (size_t)(end - c2 - 1), INT64_MAX, &off))
                return AAGW_REASON_PROV_SRC_OFFSET_INVALID;
        memcpy(out->src_topic, v, (size_t)(c1 - v));
        out->src_topic[c1 - v] = '\0';
        out->src_partition     = (int32_t)part;
        out->src_offset        = (int64_t)off;
        return AAGW_REASON_OK;
}

aagw_reason_t aagw_prov_decode(const aagw_repl_policy_t *pol,
                               const struct aagw_header *hdrs, size_t cnt,
                               struct aagw_prov *out) {
        const struct aagw_header *h[PROV_FIELD_CNT] = {NULL};
        size_t                    found             = 0;
        const char               *v;
        size_t                    len;
        aagw_reason_t             r;

        out->path_len = 0;
        /* The header set first, in header order: a repeated or null
         * provenance header is refused outright rather than resolved by
         * picking one, since two readers picking differently is how
         * forged provenance would slip past one of them. */
        for (size_t i = 0; i < cnt; i++) {
                int f = field_of(pol, hdrs[i].name);
                if (f < 0)
                        continue;
                if (h[f])
                        return AAGW_REASON_PROV_DUPLICATE;
                if (!hdrs[i].value)
                        return AAGW_REASON_PROV_NULL_VALUE;
                h[f] = &hdrs[i];
                found++;
        }
        if (!found)
                return AAGW_REASON_OK;
        if (found < PROV_FIELD_CNT)
                return AAGW_REASON_PROV_INCOMPLETE;

        v   = h[PROV_ORIGIN]->value;
        len = h[PROV_ORIGIN]->size;
        if (len > AAGW_ALIAS_MAX)
                return AAGW_REASON_PROV_ORIGIN_TOO_LONG;
        if (!policy_alias_valid(v, len))
                return AAGW_REASON_PROV_ORIGIN_INVALID;
        memcpy(out->origin, v, len);
        out->origin[len] = '\0';

        r = decode_path(h[PROV_PATH]->value, h[PROV_PATH]->size, out);
        if (r != AAGW_REASON_OK) {
                out->path_len = 0;
                return r;
        }

        len = h[PROV_ID]->size;
        if (!len || len > AAGW_ID_MAX) {
                out->path_len = 0;
                return len ? AAGW_REASON_PROV_ID_TOO_LONG
                           : AAGW_REASON_PROV_ID_EMPTY;
        }
        memcpy(out->id, h[PROV_ID]->value, len);
        out->id[len] = '\0';
        out->id_len  = len;

        r = decode_src(h[PROV_SRC]->value, h[PROV_SRC]->size, out);
        if (r == AAGW_REASON_OK &&
            (h[PROV_HLC]->size > HLC_TEXT_MAX ||
             !aagw_hlc_parse(h[PROV_HLC]->value, h[PROV_HLC]->size, &out->hlc)))
                r = AAGW_REASON_PROV_HLC_INVALID;
        if (r != AAGW_REASON_OK)
                out->path_len = 0;
        return r;
}

/* ------------------------------ VALIDATION ----------------------------- */

static bool site_known(const aagw_repl_policy_t *pol, const char *s) {
        return pol->allow_unknown_sites ||
               policy_site_index(pol, s, strlen(s)) >= 0;
}

aagw_reason_t aagw_prov_validate(const aagw_repl_policy_t *pol,
                                 const struct aagw_prov *p, const char *site) {
        if (!p->path_len)
                return AAGW_REASON_OK;
        if (p->path_len > AAGW_PROV_MAX_HOPS)
                return AAGW_REASON_PROV_PATH_TOO_LONG;
        if (!site_known(pol, p->origin))
                return AAGW_REASON_PROV_ORIGIN_UNKNOWN;
        if (strcmp(p->path[0], p->origin))
                return AAGW_REASON_PROV_PATH_NOT_FROM_ORIGIN;
        for (size_t i = 0; i < p->path_len; i++) {
                if (!site_known(pol, p->path[i]))
                        return AAGW_REASON_PROV_PATH_UNKNOWN_SITE;
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(p->path[i], p->path[j]))
                                return AAGW_REASON_PROV_PATH_REPEATS_SITE;
        }
        /* The path names every site holding the record, so a record read
         * at 'site' must end there.  One that does not was copied by
         * something other than aagw (or forged): its path cannot vouch
         * for where the record has been. */
        if (site && strcmp(p->path[p->path_len - 1], site))
                return AAGW_REASON_PROV_PATH_NOT_AT_SITE;
        return AAGW_REASON_OK;
}

/* ------------------------------- ENCODING ------------------------------ */

/* Append 'len' bytes of 'v' as header field 'f'; 'pos' is the write
 * position in out->buf.  The NUL keeps the value printable in a debugger
 * and is not part of the header. */
static void put(const aagw_repl_policy_t *pol, struct aagw_prov_hdrs *out,
                size_t *pos, int f, const char *v, size_t len) {
        char *dst = out->buf + *pos;

        memmove(dst, v, len);
        dst[len]                  = '\0';
        out->hdrs[out->cnt].name  = pol->hname[f];
        out->hdrs[out->cnt].value = dst;
        out->hdrs[out->cnt].size  = len;
        out->cnt++;
        *pos += len + 1;
}

aagw_err_t aagw_prov_encode(const aagw_repl_policy_t *pol,
                            const struct aagw_prov *p,
                            struct aagw_prov_hdrs *out) {
        char   tmp[PATH_TEXT_MAX + 1];
        size_t pos = 0, n = 0;

        if (!pol || !p || !out || p->path_len < 1 ||
            p->path_len > AAGW_PROV_MAX_HOPS ||
            !policy_alias_valid(p->origin,
                                strnlen(p->origin, sizeof(p->origin))) ||
            p->id_len < 1 || p->id_len > AAGW_ID_MAX ||
            !policy_topic_valid(p->src_topic,
                                strnlen(p->src_topic, sizeof(p->src_topic))) ||
            p->src_partition < 0 || p->src_offset < 0)
                return AAGW_ERR_INVAL;
        for (size_t i = 0; i < p->path_len; i++) {
                if (!policy_alias_valid(
                        p->path[i], strnlen(p->path[i], sizeof(p->path[i]))))
                        return AAGW_ERR_INVAL;
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(p->path[i], p->path[j]))
                                return AAGW_ERR_INVAL;
        }
        if (strcmp(p->path[0], p->origin))
                return AAGW_ERR_INVAL;

        out->cnt = 0;
        put(pol, out, &pos, PROV_ORIGIN, p->origin, strlen(p->origin));
        for (size_t i = 0; i < p->path_len; i++) {
                size_t len = strlen(p->path[i]);
                if (i)
                        tmp[n++] = '>';
                memcpy(tmp + n, p->path[i], len);
                n += len;
        }
        put(pol, out, &pos, PROV_PATH, tmp, n);
        put(pol, out, &pos, PROV_ID, p->id, p->id_len);
        n = strlen(p->src_topic);
        memcpy(tmp, p->src_topic, n);
        tmp[n++] = ':';
        n += policy_fmt_dec(tmp + n, (uint64_t)p->src_partition);
        tmp[n++] = ':';
        n += policy_fmt_dec(tmp + n, (uint64_t)p->src_offset);
        put(pol, out, &pos, PROV_SRC, tmp, n);
        n = aagw_hlc_format(p->hlc, tmp, sizeof(tmp));
        put(pol, out, &pos, PROV_HLC, tmp, n);
        return AAGW_OK;
}

bool aagw_prov_is_own_header(const aagw_repl_policy_t *pol, const char *name) {
        return name && !strncmp(name, pol->hprefix, pol->hprefix_len);
}
