/* tests/fuzz/fuzz_config.c: the config loaders on arbitrary files: the
 * YAML loader (libyaml, the key table, ${VAR} substitution, durations,
 * lists, librdkafka properties) and the mm2.properties translation.
 *
 * Input: byte 0 bit 0 picks the reader (0 YAML, 1 mm2.properties); the
 * rest is the file.
 *
 * Beyond "no crash, no sanitizer report": a file that loads and validates
 * without error dumps as YAML that loads and validates again into the
 * same dump (the dump is what `config check` prints and promises loads
 * back), and every error line names the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define CHECK(cond)                                                            \
        do {                                                                   \
                if (!(cond)) {                                                 \
                        fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
                                __FILE__, __LINE__, #cond);                    \
                        abort();                                               \
                }                                                              \
        } while (0)

/* 'd' with the admin section's redacted token line ("  token: ...",
 * two spaces: cluster properties are indented deeper) holding 'token'
 * again; '*len' updated.  (Not inlined, nor is dump(): gcc 12 -O3 then
 * takes the dump for a pointer to dump()'s local, -Wdangling-pointer.) */
__attribute__((noinline)) static char *
unredact_token(const char *d, const char *token, size_t *len) {
        static const char line[] = "\n  token: \"" AAGW_REDACTED "\"\n";
        const char       *at     = strstr(d, line);
        CHECK(at);
        size_t            head   = (size_t)(at - d);
        char             *buf    = NULL;
        FILE             *m      = open_memstream(&buf, len);

        CHECK(m);
        fwrite(d, 1, head, m);
        fputs("\n  token: ", m);
        aagw_config_yaml_quote(m, token);
        fputs(d + head + sizeof(line) - 2, m);
        CHECK(!fclose(m));
        return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noinline)) static char *dump(const aagw_config_t *cfg,
                                              size_t *len) {
        char *buf = NULL;
        FILE *m   = open_memstream(&buf, len);
        CHECK(m);
        aagw_config_dump(cfg, m);
        CHECK(!fclose(m));
        return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        aagw_config_t *cfg, *again;
        const char    *text = (const char *)data + 1;
        size_t         len  = size ? size - 1 : 0, d1len, d2len;
        char          *d1, *d2;
        aagw_err_t     rc;

        if (!size)
                return 0;
        /* The loaders take a length, not a C string: no NUL is added, so
         * ASan reports a read past the end. */
        cfg = aagw_config_new();
        if (!cfg)
                return 0;
        if (data[0] & 1)
                rc = aagw_config_load_mm2(cfg, "f.properties", text, len);
        else
                rc = aagw_config_load_string(cfg, "f.yaml", text, len);
        if (rc == AAGW_OK)
                rc = aagw_config_validate(cfg);
        if (rc != AAGW_OK || *aagw_config_errors(cfg)) {
                const char *e = aagw_config_errors(cfg);
                CHECK(*e);
                aagw_config_destroy(cfg);
                return 0;
        }
        d1 = dump(cfg, &d1len);
        /* Secrets aside: the dump redacts them.  A redacted admin token
         * does not even load (a token is 16 to 256 bytes): the reload
         * gets the real one back.  Cluster secrets have no such bound
         * and stay redacted in both dumps. */
        char  *in    = d1;
        size_t inlen = d1len;
        if (aagw_config_is_set(cfg, "admin.token"))
                in = unredact_token(d1, aagw_config_str(cfg, "admin.token"),
                                    &inlen);
        again = aagw_config_new();
        CHECK(again);
        CHECK(aagw_config_load_string(again, "dump.yaml", in, inlen) ==
              AAGW_OK);
        if (in != d1)
                free(in);
        CHECK(aagw_config_validate(again) == AAGW_OK);
        d2 = dump(again, &d2len);
        if (d1len != d2len || memcmp(d1, d2, d1len)) {
                fprintf(stderr, "--- first dump\n%s--- second dump\n%s", d1,
                        d2);
                CHECK(!"the dump loads back into the same config");
        }
        free(d1);
        free(d2);
        aagw_config_destroy(again);
        aagw_config_destroy(cfg);
        return 0;
}
