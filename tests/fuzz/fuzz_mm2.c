/* tests/fuzz/fuzz_mm2.c: MirrorMaker 2's record formats (heartbeats,
 * offset-syncs, checkpoints), decoded from arbitrary bytes as aagw reads
 * them from topics that MM2, aagw or anyone else may have written.
 *
 * Input: byte 0 picks the record type (mod 3); bytes 1-2 are the key's
 * length (little-endian, cut to what is there); then the key, then the
 * value (the rest).
 *
 * Beyond "no crash, no sanitizer report": whatever decodes re-encodes, and
 * the re-encoded record decodes to the same fields (a decoder that accepts
 * what the encoder cannot reproduce, or reads past what it validated,
 * shows here). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aagw_policy.h"

#define CHECK(cond)                                                            \
        do {                                                                   \
                if (!(cond)) {                                                 \
                        fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
                                __FILE__, __LINE__, #cond);                    \
                        abort();                                               \
                }                                                              \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void heartbeat(const uint8_t *k, size_t kl, const uint8_t *v,
                      size_t vl) {
        struct aagw_mm2_heartbeat hb, again;
        uint8_t                   kb[600], vb[64];
        size_t                    kn, vn;

        if (!aagw_mm2_heartbeat_decode(k, kl, v, vl, &hb))
                return;
        CHECK(memchr(hb.source, '\0', sizeof(hb.source)));
        CHECK(memchr(hb.target, '\0', sizeof(hb.target)));
        kn = aagw_mm2_heartbeat_key(hb.source, hb.target, kb, sizeof(kb));
        vn = aagw_mm2_heartbeat_value(hb.timestamp_ms, vb, sizeof(vb));
        CHECK(kn > 0 && kn <= sizeof(kb) && vn > 0 && vn <= sizeof(vb));
        CHECK(aagw_mm2_heartbeat_decode(kb, kn, vb, vn, &again));
        CHECK(!strcmp(hb.source, again.source));
        CHECK(!strcmp(hb.target, again.target));
        CHECK(hb.timestamp_ms == again.timestamp_ms);
}

static void sync_rec(const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl) {
        struct aagw_mm2_sync s, again;
        uint8_t              kb[600], vb[64];
        size_t               kn, vn;

        if (!aagw_mm2_sync_decode(k, kl, v, vl, &s))
                return;
        CHECK(memchr(s.topic, '\0', sizeof(s.topic)));
        kn = aagw_mm2_sync_key(s.topic, s.partition, kb, sizeof(kb));
        vn = aagw_mm2_sync_value(s.upstream, s.downstream, vb, sizeof(vb));
        CHECK(kn > 0 && kn <= sizeof(kb) && vn > 0 && vn <= sizeof(vb));
        CHECK(aagw_mm2_sync_decode(kb, kn, vb, vn, &again));
        CHECK(!strcmp(s.topic, again.topic));
        CHECK(s.partition == again.partition);
        CHECK(s.upstream == again.upstream &&
              s.downstream == again.downstream);
}

static void checkpoint(const uint8_t *k, size_t kl, const uint8_t *v,
                       size_t vl) {
        struct aagw_mm2_checkpoint c, again;
        uint8_t                    kb[1200], vb[600];
        size_t                     kn, vn;

        if (!aagw_mm2_checkpoint_decode(k, kl, v, vl, &c))
                return;
        CHECK(memchr(c.group, '\0', sizeof(c.group)));
        CHECK(memchr(c.topic, '\0', sizeof(c.topic)));
        CHECK(memchr(c.metadata, '\0', sizeof(c.metadata)));
        kn = aagw_mm2_checkpoint_key(c.group, c.topic, c.partition, kb,
                                     sizeof(kb));
        vn = aagw_mm2_checkpoint_value(c.upstream, c.downstream, c.metadata,
                                       vb, sizeof(vb));
        CHECK(kn > 0 && kn <= sizeof(kb) && vn > 0 && vn <= sizeof(vb));
        CHECK(aagw_mm2_checkpoint_decode(kb, kn, vb, vn, &again));
        CHECK(!strcmp(c.group, again.group) && !strcmp(c.topic, again.topic));
        CHECK(c.partition == again.partition);
        CHECK(c.upstream == again.upstream &&
              c.downstream == again.downstream);
        CHECK(!strcmp(c.metadata, again.metadata));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t         kl;
        const uint8_t *k, *v;

        if (size < 3)
                return 0;
        kl = (size_t)data[1] | (size_t)data[2] << 8;
        if (kl > size - 3)
                kl = size - 3;
        k = data + 3;
        v = k + kl;
        /* Copies of exactly the given length, so ASan sees any read past
         * the end of the key or the value. */
        uint8_t *kc = malloc(kl ? kl : 1), *vc = malloc(size - 3 - kl + 1);
        if (!kc || !vc) {
                free(kc);
                free(vc);
                return 0;
        }
        memcpy(kc, k, kl);
        memcpy(vc, v, size - 3 - kl);
        switch (data[0] % 3) {
        case 0: heartbeat(kc, kl, vc, size - 3 - kl); break;
        case 1: sync_rec(kc, kl, vc, size - 3 - kl); break;
        default: checkpoint(kc, kl, vc, size - 3 - kl); break;
        }
        free(kc);
        free(vc);
        return 0;
}
