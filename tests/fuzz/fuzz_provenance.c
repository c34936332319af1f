/* tests/fuzz/fuzz_provenance.c: arbitrary header sets into provenance
 * decode/validate/encode, the per-record verdict, resolve and the id rules.
 *
 * Input layout (all optional; a short input just means fewer parts):
 *
 *   byte 0   policy: bit 0 identity, bit 1 multi_hop, bits 2-3 action on
 *            bad provenance (mod 3), bit 4 allow_unknown_sites, bit 5
 *            on_missing_id dead-letter
 *   byte 1   verdict flags (bits 0-1) and id rule (bits 2-4, mod 5)
 *   byte 2   source (mod 3) and target (/3 mod 3) among east, west, north
 *   byte 3   topic: index into a table, or 7 = "len byte + bytes" follow
 *   then chunks until the end:
 *            selector byte (mod 10): 0-1 the provenance header
 *            "aagw.prov", 2-4 reserved names ("aagw.origin", "aagw.path":
 *            the draft format's, "aagw.hop"), 5 "event-id", 6
 *            "aagw.other", 7 an arbitrary name ("len byte + bytes"), 8 the
 *            record value, 9 the record key;
 *            a 2-byte little-endian length, 0xffff meaning null;
 *            that many bytes (fewer if the input ends)
 *
 * Beyond "no crash, no sanitizer report", it checks invariants that would
 * show a real bug: what decodes and validates re-encodes to the same bytes
 * (but for an id spelled out that is the derived one: it is left out),
 * every REPLICATE verdict carries provenance that decodes and validates at
 * the target, every reason is in range. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aagw_policy.h"

#define MAX_HDRS 64
#define CHECK(cond)                                                            \
        do {                                                                   \
                if (!(cond)) {                                                 \
                        fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
                                __FILE__, __LINE__, #cond);                    \
                        abort();                                               \
                }                                                              \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const sites[]  = {"east", "west", "north"};
static const char *const names[]  = {"aagw.prov", "aagw.prov", "aagw.origin",
                                     "aagw.path", "aagw.hop",  "event-id",
                                     "aagw.other"};
static const char *const topics[] = {
    "clicks",        "east.clicks", "west.east.clicks", "north.west.clicks",
    "aagw.dlq.east", "x.unified",   "east.east.clicks"};
static const char *const id_specs[] = {"derived", "header:event-id", "key",
                                       "json:id", "hash"};

/* 64 policies (every combination of byte 0's bits) and the id rules,
 * built once: compiling regexes per input would drown the fuzzer. */
static aagw_repl_policy_t *policies[64];
static aagw_id_rule_t     *rules[5];

static void init_once(void) {
        static int done;
        char       err[256];

        if (done)
                return;
        done = 1;
        for (int i = 0; i < 64; i++) {
                struct aagw_repl_conf c;
                aagw_repl_conf_init(&c);
                c.sites    = sites;
                c.site_cnt = 3;
                c.naming = (i & 1) ? AAGW_NAMING_IDENTITY : AAGW_NAMING_PREFIX;
                c.multi_hop           = (i & 2) != 0;
                c.on_bad_provenance   = (aagw_bad_action_t)(((i >> 2) & 3) % 3);
                c.allow_unknown_sites = (i & 16) != 0;
                c.on_missing_id =
                    (i & 32) ? AAGW_BAD_DEAD_LETTER : AAGW_BAD_PASS;
                policies[i] = aagw_repl_policy_new(&c, err, sizeof(err));
                CHECK(policies[i]);
        }
        for (int i = 0; i < 5; i++) {
                rules[i] = aagw_id_rule_new(id_specs[i], err, sizeof(err));
                CHECK(rules[i]);
        }
}

/* Byte reader that never runs past the input. */
struct in {
        const uint8_t *p;
        size_t         left;
};

static int byte(struct in *in) {
        if (!in->left)
                return -1;
        in->left--;
        return *in->p++;
}

static const uint8_t *take(struct in *in, size_t want, size_t *got) {
        const uint8_t *p = in->p;
        *got             = want < in->left ? want : in->left;
        in->p += *got;
        in->left -= *got;
        return p;
}

/* Decode -> validate -> encode -> decode: the same provenance, and the
 * same bytes as the input header (less a spelled-out derived id). */
static void check_decode(const aagw_repl_policy_t *pol,
                         const struct aagw_header *h, size_t n) {
        struct aagw_prov      p, q;
        struct aagw_prov_hdrs out;
        char                  derived[AAGW_ID_MAX + 1];
        size_t                dlen;
        aagw_reason_t         r = aagw_prov_decode(pol, h, n, &p);

        CHECK((unsigned)r < AAGW_REASON_COUNT);
        if (r != AAGW_REASON_OK || !p.path_len)
                return;
        CHECK(p.path_len <= AAGW_PROV_MAX_HOPS);
        CHECK(p.id_len >= 1 && p.id_len <= AAGW_ID_MAX);
        CHECK(!strcmp(p.origin, p.path[0]));
        for (int s = 0; s < 4; s++) {
                r = aagw_prov_validate(pol, &p, s < 3 ? sites[s] : NULL);
                CHECK((unsigned)r < AAGW_REASON_COUNT);
        }
        if (aagw_prov_validate(pol, &p, NULL) != AAGW_REASON_OK)
                return;
        CHECK(aagw_prov_encode(pol, &p, &out) == AAGW_OK);
        CHECK(out.cnt == 1);
        CHECK(aagw_prov_decode(pol, out.hdrs, out.cnt, &q) == AAGW_REASON_OK);
        CHECK(!strcmp(p.origin, q.origin) && p.path_len == q.path_len &&
              p.id_len == q.id_len && !memcmp(p.id, q.id, p.id_len) &&
              !strcmp(p.src_topic, q.src_topic) &&
              p.src_partition == q.src_partition &&
              p.src_offset == q.src_offset && p.hlc == q.hlc);
        /* Canonical wire format: the input header reappears verbatim,
         * except that a spelled-out derived id is left out. */
        dlen = aagw_id_derive(p.origin, p.src_topic, p.src_partition,
                              p.src_offset, derived, sizeof(derived));
        for (size_t i = 0; i < n; i++) {
                const struct aagw_header *o = &out.hdrs[0];
                if (!h[i].name || strcmp(h[i].name, o->name))
                        continue;
                CHECK(!memcmp(h[i].value, o->value, o->size));
                if (h[i].size != o->size) {
                        CHECK(h[i].size == o->size + dlen);
                        CHECK(p.id_len == dlen &&
                              !memcmp(p.id, derived, dlen));
                } else if (p.id_len == dlen && !memcmp(p.id, derived, dlen)) {
                        CHECK(((const char *)o->value)[o->size - 1] == ';');
                }
        }
}

static void check_verdict(const aagw_repl_policy_t *pol, const char *src,
                          const char *dst, const struct aagw_rec *rec,
                          const aagw_id_rule_t *rule, unsigned flags) {
        static struct aagw_verdict v;
        struct aagw_prov           p;
        aagw_err_t err = aagw_repl_verdict(pol, src, dst, rec, rule, flags, &v);

        if (err != AAGW_OK) {
                CHECK(err == AAGW_ERR_INVAL);
                return;
        }
        CHECK((unsigned)v.reason < AAGW_REASON_COUNT);
        CHECK((unsigned)v.id_reason < AAGW_REASON_COUNT);
        switch (v.kind) {
        case AAGW_VERDICT_REPLICATE:
                CHECK(v.skip == AAGW_SKIP_NONE);
                CHECK(v.hdrs.cnt == 1);
                CHECK(aagw_prov_decode(pol, v.hdrs.hdrs, v.hdrs.cnt, &p) ==
                      AAGW_REASON_OK);
                CHECK(aagw_prov_validate(pol, &p, dst) == AAGW_REASON_OK);
                CHECK(p.path_len >= 2);
                CHECK(!strcmp(p.path[p.path_len - 2], src));
                if (v.fresh)
                        CHECK(!strcmp(p.origin, src));
                break;
        case AAGW_VERDICT_SKIP:
                CHECK(v.skip > AAGW_SKIP_NONE && v.skip < AAGW_SKIP_COUNT);
                CHECK(v.hdrs.cnt == 0);
                break;
        case AAGW_VERDICT_REJECT:
                CHECK(v.reason != AAGW_REASON_OK);
                CHECK(v.action == AAGW_BAD_DEAD_LETTER ||
                      v.action == AAGW_BAD_FAIL);
                break;
        default:
                CHECK(!"verdict kind out of range");
        }
        err = aagw_prov_resolve(pol, src, rec, rule, flags, &v);
        CHECK(err == AAGW_OK);
        if (v.kind == AAGW_VERDICT_REPLICATE) {
                CHECK(v.prov.path_len >= 1);
                CHECK(aagw_prov_validate(pol, &v.prov, src) == AAGW_REASON_OK);
        }
}

static void check_ids(const struct aagw_rec *rec) {
        char   buf[AAGW_ID_MAX + 1];
        size_t len;

        for (int i = 0; i < 5; i++) {
                aagw_reason_t r = aagw_id_extract(rules[i], "east", rec, buf,
                                                  sizeof(buf), &len);
                CHECK((unsigned)r < AAGW_REASON_COUNT);
                if (r == AAGW_REASON_OK)
                        CHECK(len >= 1 && len <= AAGW_ID_MAX && !buf[len]);
        }
}

/* Topic names from the input, through every naming function. */
static void check_topic(const aagw_repl_policy_t *pol, const char *topic) {
        const char *chain[4], *base;
        char        buf[AAGW_TOPIC_MAX + 1];
        size_t      n = aagw_repl_topic_chain(pol, topic, chain, 4, &base);

        CHECK(n == 0 || aagw_repl_topic_is_remote(pol, topic));
        CHECK(base >= topic && base <= topic + strlen(topic));
        (void)aagw_repl_topic_source(pol, topic);
        (void)aagw_repl_topic_upstream(pol, topic);
        (void)aagw_repl_topic_is_internal(pol, topic);
        (void)aagw_repl_topic_allowed(pol, topic);
        (void)aagw_repl_group_allowed(pol, topic);
        for (int s = 0; s < 3; s++) {
                aagw_skip_t c = aagw_repl_topic_check(
                    pol, sites[s], sites[(s + 1) % 3], topic);
                CHECK((unsigned)c < AAGW_SKIP_COUNT);
                if (aagw_repl_remote_topic(pol, sites[s], topic, buf,
                                           sizeof(buf)) == AAGW_OK)
                        CHECK(strlen(buf) <= AAGW_TOPIC_MAX);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct in                 in = {data, size};
        struct aagw_header        h[MAX_HDRS];
        char                      namebuf[MAX_HDRS][257];
        char                      topic[257];
        size_t                    n = 0, len;
        struct aagw_rec           rec;
        const aagw_repl_policy_t *pol;
        int                       cfg, vf, route, tsel;

        init_once();
        cfg   = byte(&in);
        vf    = byte(&in);
        route = byte(&in);
        tsel  = byte(&in);
        if (cfg < 0 || vf < 0 || route < 0 || tsel < 0)
                return 0;
        pol = policies[cfg & 63];

        memset(&rec, 0, sizeof(rec));
        if (tsel % 8 == 7) {
                const uint8_t *p;
                int            tl = byte(&in);
                if (tl < 0)
                        return 0;
                p = take(&in, (size_t)tl, &len);
                memcpy(topic, p, len);
                topic[len] = '\0'; /* an embedded NUL just shortens it */
                rec.topic  = topic;
        } else {
                rec.topic = topics[tsel % 8 % 7];
        }
        rec.partition    = (int32_t)(route >> 4);
        rec.offset       = (int64_t)size;
        rec.timestamp_ms = (int64_t)cfg * 1000003 - 5;

        while (in.left && n < MAX_HDRS) {
                int            sel = byte(&in) % 10;
                int            lo = byte(&in), hi = byte(&in);
                const uint8_t *v;
                const char    *name = NULL;

                if (sel == 7) {
                        int            nl = lo < 0 ? 0 : lo;
                        const uint8_t *p  = take(&in, (size_t)nl, &len);
                        memcpy(namebuf[n], p, len);
                        namebuf[n][len] = '\0';
                        name            = namebuf[n];
                        lo              = byte(&in);
                        hi              = byte(&in);
                } else if (sel < 7) {
                        name = names[sel];
                }
                if (lo < 0 || hi < 0)
                        break;
                len = (size_t)lo | (size_t)hi << 8;
                if (len == 0xffff) {
                        v   = NULL;
                        len = 0;
                } else {
                        v = take(&in, len, &len);
                }
                if (sel == 8) {
                        rec.value     = v;
                        rec.value_len = len;
                } else if (sel == 9) {
                        rec.key     = v;
                        rec.key_len = len;
                } else {
                        h[n].name  = name;
                        h[n].value = v;
                        h[n].size  = len;
                        n++;
                }
        }
        rec.hdrs    = n ? h : NULL;
        rec.hdr_cnt = n;

        check_decode(pol, h, n);
        check_verdict(pol, sites[route % 3], sites[route / 3 % 3], &rec,
                      rules[(vf >> 2 & 7) % 5], (unsigned)vf & 3);
        check_ids(&rec);
        check_topic(pol, rec.topic);
        for (size_t i = 0; i < n; i++) {
                uint64_t hlc;
                char     buf[32];
                if (h[i].value && aagw_hlc_parse(h[i].value, h[i].size, &hlc)) {
                        CHECK(aagw_hlc_format(hlc, buf, sizeof(buf)) ==
                              h[i].size);
                        CHECK(!memcmp(buf, h[i].value, h[i].size));
                }
        }
        return 0;
}
