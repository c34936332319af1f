/* policy/provenance.c: the provenance header (wire format in
 * aagw_policy.h), and the reason codes for provenance and ids.
 *
 * Producers' headers are untrusted: decoding never allocates, reads the
 * value only within its stated size, scans each field no further than its
 * limit, stops at the first problem and reports it as a reason code the
 * caller can count and act on. */
#include "policy_int.h"

#include <string.h>

/* Longest valid fields: 16 aliases and 15 '>'; "TOPIC:PART:OFFSET";
 * "MS:COUNTER". */
#define PATH_TEXT_MAX (AAGW_PROV_MAX_HOPS * (AAGW_ALIAS_MAX + 1) - 1)
#define SRC_TEXT_MAX (AAGW_TOPIC_MAX + 1 + 10 + 1 + 19)
#define HLC_TEXT_MAX (15 + 1 + 5)
/* "1;" PATH ";" SRC ";" HLC ";" ID */
#define PROV_TEXT_MAX                                                          \
        (2 + PATH_TEXT_MAX + 1 + SRC_TEXT_MAX + 1 + HLC_TEXT_MAX + 1 +          \
         AAGW_ID_MAX)
/* The derived id "ORIGIN:TOPIC:PART:OFFSET". */
#define DERIVED_ID_MAX (AAGW_ALIAS_MAX + 1 + SRC_TEXT_MAX)

/* The encoder writes the value and a NUL. */
_Static_assert(PROV_TEXT_MAX + 1 <= AAGW_PROV_ENC_MAX,
               "AAGW_PROV_ENC_MAX too small for the largest provenance");
_Static_assert(DERIVED_ID_MAX <= AAGW_ID_MAX, "derived id exceeds the id limit");
_Static_assert(AAGW_PROV_HDR_CNT == 1, "the wire format has one header");

/* ------------------------------- REASONS ------------------------------- */

/* clang-format off */
static const struct {
        const char *name;
        const char *desc;
} reasons[AAGW_REASON_COUNT] = {
    [AAGW_REASON_OK] = {"ok", "no problem"},
    [AAGW_REASON_PROV_NULL_VALUE] = {"prov_null_value",
                                     "the provenance header has a null "
                                     "value"},
    [AAGW_REASON_PROV_DUPLICATE] = {"prov_duplicate",
                                    "the provenance header appears twice"},
    [AAGW_REASON_PROV_INCOMPLETE] = {"prov_incomplete",
                                     "the provenance header lacks fields"},
    [AAGW_REASON_PROV_VERSION] = {"prov_version",
                                  "the provenance header is not version 1 "
                                  "(does not start with \"1;\")"},
    [AAGW_REASON_PROV_PATH_INVALID] = {"prov_path_invalid",
                                       "provenance path has an empty hop or "
                                       "a hop that is not a site alias"},
    [AAGW_REASON_PROV_PATH_TOO_LONG] = {"prov_path_too_long",
                                        "provenance path has more than 16 "
                                        "hops or 1039 bytes"},
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
                                         "provenance origin (the first hop) "
                                         "is not a configured site"},
    [AAGW_REASON_PROV_PATH_UNKNOWN_SITE] = {"prov_path_unknown_site",
                                            "provenance path names a site "
                                            "that is not configured"},
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

/* true if header 'name' is the provenance header. */
static bool is_prov(const aagw_repl_policy_t *pol, const char *name) {
        return name && !strcmp(name, pol->prov_name);
}

/* The field that starts at 'p' and ends at the next ';', which must come
 * within 'max' + 1 bytes and before 'end'.  Returns the ';', or NULL with
 * the reason in '*r': 'too_long' if the field already exceeds 'max' bytes,
 * else INCOMPLETE (the value ends inside the field).  Never looks past
 * 'max' + 1 bytes, so a huge value costs no more than a valid one. */
static const char *field_end(const char *p, const char *end, size_t max,
                             aagw_reason_t too_long, aagw_reason_t *r) {
        size_t      rem  = (size_t)(end - p);
        const char *semi = memchr(p, ';', rem < max + 1 ? rem : max + 1);

        if (!semi)
                *r = rem > max ? too_long : AAGW_REASON_PROV_INCOMPLETE;
        return semi;
}

static aagw_reason_t decode_path(const char *v, size_t len,
                                 struct aagw_prov *out) {
        size_t n = 0, start = 0;

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

/* Parse one provenance value of 'len' bytes into 'out', fields in wire
 * order; the first problem wins. */
static aagw_reason_t decode_value(const char *v, size_t len,
                                  struct aagw_prov *out) {
        const char   *end = v + len, *p, *semi;
        aagw_reason_t r;

        /* The version field: exactly "1".  Anything else is a format this
         * aagw does not know, not a broken version 1. */
        if (!len || v[0] != '1' || (len > 1 && v[1] != ';'))
                return AAGW_REASON_PROV_VERSION;
        if (len == 1)
                return AAGW_REASON_PROV_INCOMPLETE;
        p = v + 2;

        semi = field_end(p, end, PATH_TEXT_MAX, AAGW_REASON_PROV_PATH_TOO_LONG,
                         &r);
        if (!semi)
                return r;
        r = decode_path(p, (size_t)(semi - p), out);
        if (r != AAGW_REASON_OK)
                return r;
        p = semi + 1;

        semi = field_end(p, end, SRC_TEXT_MAX, AAGW_REASON_PROV_SRC_TOO_LONG,
                         &r);
        if (!semi)
                return r;
        r = decode_src(p, (size_t)(semi - p), out);
        if (r != AAGW_REASON_OK)
                return r;
        p = semi + 1;

        semi = field_end(p, end, HLC_TEXT_MAX, AAGW_REASON_PROV_HLC_INVALID,
                         &r);
        if (!semi)
                return r;
        if (!aagw_hlc_parse(p, (size_t)(semi - p), &out->hlc))
                return AAGW_REASON_PROV_HLC_INVALID;
        p = semi + 1;

        /* The id is the rest, any bytes, ';' included.  Empty stands for
         * the derived id, which every record without an id rule has: it
         * is rebuilt here rather than sent, and always fits. */
        len = (size_t)(end - p);
        if (len > AAGW_ID_MAX)
                return AAGW_REASON_PROV_ID_TOO_LONG;
        memcpy(out->origin, out->path[0], strlen(out->path[0]) + 1);
        if (len) {
                memcpy(out->id, p, len);
                out->id[len] = '\0';
                out->id_len  = len;
        } else {
                out->id_len =
                    aagw_id_derive(out->origin, out->src_topic,
                                   out->src_partition, out->src_offset,
                                   out->id, sizeof(out->id));
        }
        return AAGW_REASON_OK;
}

aagw_reason_t aagw_prov_decode(const aagw_repl_policy_t *pol,
                               const struct aagw_header *hdrs, size_t cnt,
                               struct aagw_prov *out) {
        const struct aagw_header *h = NULL;
        aagw_reason_t             r;

        out->path_len = 0;
        /* The header set first, in header order: a repeated or null
         * provenance header is refused outright rather than resolved by
         * picking one, since two readers picking differently is how
         * forged provenance would slip past one of them. */
        for (size_t i = 0; i < cnt; i++) {
                if (!is_prov(pol, hdrs[i].name))
                        continue;
                if (h)
                        return AAGW_REASON_PROV_DUPLICATE;
                if (!hdrs[i].value)
                        return AAGW_REASON_PROV_NULL_VALUE;
                h = &hdrs[i];
        }
        if (!h)
                return AAGW_REASON_OK;
        r = decode_value(h->value, h->size, out);
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
        /* The origin is the first hop (decoding sets p->origin to it). */
        if (!site_known(pol, p->path[0]))
                return AAGW_REASON_PROV_ORIGIN_UNKNOWN;
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

aagw_err_t aagw_prov_encode(const aagw_repl_policy_t *pol,
                            const struct aagw_prov *p,
                            struct aagw_prov_hdrs *out) {
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
        policy_prov_encode_valid(pol, p, out);
        return AAGW_OK;
}

void policy_prov_encode_valid(const aagw_repl_policy_t *pol,
                              const struct aagw_prov *p,
                              struct aagw_prov_hdrs *out) {
        size_t n = 0, dlen, olen, src;
        char  *b;

        /* Everything is validated: the value fits by the static assert. */
        b      = out->buf;
        b[n++] = '1';
        b[n++] = ';';
        /* stpcpy: one pass over each name, not strlen and then memcpy.
         * path[0] is the origin (validated), so its length is olen. */
        olen = (size_t)(stpcpy(b + n, p->path[0]) - (b + n));
        n += olen;
        for (size_t i = 1; i < p->path_len; i++) {
                b[n++] = '>';
                n      = (size_t)(stpcpy(b + n, p->path[i]) - b);
        }
        b[n++] = ';';
        src    = n;
        n      = (size_t)(stpcpy(b + n, p->src_topic) - b);
        b[n++] = ':';
        n += policy_fmt_dec(b + n, (uint64_t)p->src_partition);
        b[n++] = ':';
        n += policy_fmt_dec(b + n, (uint64_t)p->src_offset);
        /* The derived id is ORIGIN ':' followed by the src field just
         * written (aagw_id_derive()); it is left out, the reader rebuilds
         * it.  Compared in place, not formatted a second time. */
        dlen   = n - src;
        bool derived = p->id_len == olen + 1 + dlen &&
                       !memcmp(p->id, p->origin, olen) && p->id[olen] == ':' &&
                       !memcmp(p->id + olen + 1, b + src, dlen);
        b[n++] = ';';
        n += aagw_hlc_format(p->hlc, b + n, AAGW_PROV_ENC_MAX - n);
        b[n++] = ';';
        if (!derived) {
                memcpy(b + n, p->id, p->id_len);
                n += p->id_len;
        }
        /* The NUL keeps the value printable in a debugger and is not part
         * of the header. */
        b[n]                = '\0';
        out->cnt            = 1;
        out->hdrs[0].name   = pol->prov_name;
        out->hdrs[0].value  = b;
        out->hdrs[0].size   = n;
}

bool aagw_prov_is_own_header(const aagw_repl_policy_t *pol, const char *name) {
        return name && !strncmp(name, pol->hprefix, pol->hprefix_len);
}
