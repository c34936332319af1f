/* tests/fuzz/fuzz_idrule.c: id and entity-key rules (policy/idrule.c) on
 * arbitrary rule texts and records: the rule grammar, header lookup, the
 * JSON field of a value (json-c), the content hash, the derived id.
 *
 * Input: the rule spec up to the first '\n' (so "json:id\n..."), then
 * chunks as in fuzz_provenance: a selector byte (mod 4: 0 a header named
 * "event-id", 1 a header with an arbitrary name "len byte + bytes", 2 the
 * value, 3 the key), a 2-byte little-endian length (0xffff: null), and
 * that many bytes.
 *
 * Beyond "no crash": a rule that compiles gives an id of at most
 * AAGW_ID_MAX bytes, NUL-terminated at its length, or a reason in range;
 * the same record gives the same id twice (no hidden state). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aagw_policy.h"

#define MAX_HDRS 32
#define CHECK(cond)                                                            \
        do {                                                                   \
                if (!(cond)) {                                                 \
                        fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
                                __FILE__, __LINE__, #cond);                    \
                        abort();                                               \
                }                                                              \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t     *nl = memchr(data, '\n', size);
        size_t             sl = nl ? (size_t)(nl - data) : size;
        char              *spec, err[512], id1[AAGW_ID_MAX + 1],
            id2[AAGW_ID_MAX + 1];
        char               names[MAX_HDRS][256];
        struct aagw_header hdrs[MAX_HDRS];
        struct aagw_rec    rec = {.topic        = "clicks",
                                  .partition    = 3,
                                  .offset       = 42,
                                  .timestamp_ms = 1714557600123,
                                  .hdrs         = hdrs};
        aagw_id_rule_t    *rule;
        size_t             p = nl ? sl + 1 : size, l1, l2;
        aagw_reason_t      r1, r2;

        if (sl > 600)
                return 0;
        spec = malloc(sl + 1);
        if (!spec)
                return 0;
        memcpy(spec, data, sl);
        spec[sl] = '\0';
        rule     = aagw_id_rule_new(spec, err, sizeof(err));
        free(spec);
        if (!rule) {
                CHECK(memchr(err, '\0', sizeof(err)));
                return 0;
        }
        while (p < size) {
                int            sel = data[p++] % 4;
                char          *name = NULL;
                size_t         len;
                const uint8_t *bytes;
                bool           null;

                if (sel == 1) {
                        size_t nlen;
                        if (p >= size || rec.hdr_cnt == MAX_HDRS)
                                break;
                        nlen = data[p++];
                        if (nlen > size - p)
                                nlen = size - p;
                        name = names[rec.hdr_cnt];
                        memcpy(name, data + p, nlen);
                        name[nlen] = '\0';
                        p += nlen;
                }
                if (size - p < 2)
                        break;
                len  = (size_t)data[p] | (size_t)data[p + 1] << 8;
                p   += 2;
                null = len == 0xffff;
                if (null)
                        len = 0;
                if (len > size - p)
                        len = size - p;
                bytes = data + p;
                p += len;
                switch (sel) {
                case 0:
                case 1:
                        if (rec.hdr_cnt == MAX_HDRS)
                                break;
                        hdrs[rec.hdr_cnt].name  = name ? name : "event-id";
                        hdrs[rec.hdr_cnt].value = null ? NULL : bytes;
                        hdrs[rec.hdr_cnt].size  = len;
                        rec.hdr_cnt++;
                        break;
                case 2:
                        rec.value     = null ? NULL : bytes;
                        rec.value_len = len;
                        break;
                default:
                        rec.key     = null ? NULL : bytes;
                        rec.key_len = len;
                        break;
                }
        }
        r1 = aagw_id_extract(rule, "east", &rec, id1, sizeof(id1), &l1);
        r2 = aagw_id_extract(rule, "east", &rec, id2, sizeof(id2), &l2);
        CHECK((int)r1 >= 0 && (int)r1 < AAGW_REASON_COUNT);
        CHECK(r1 == r2);
        if (r1 == AAGW_REASON_OK) {
                CHECK(l1 <= AAGW_ID_MAX && id1[l1] == '\0');
                CHECK(l1 == l2 && !memcmp(id1, id2, l1));
        }
        aagw_id_rule_destroy(rule);
        return 0;
}
