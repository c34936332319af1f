/*
 * gateway/pkcs12.c: the certificates of a PKCS#12 trust store, as PEM.
 *
 * Java clients, and so MirrorMaker 2 files, often keep the CAs they trust
 * in a PKCS#12 trust store (ssl.truststore.type = PKCS12).  librdkafka
 * reads trusted CAs from PEM only (ssl.ca.location, ssl.ca.pem), so the
 * MM2 import converts such a store, once, with OpenSSL's PKCS#12 API.
 * That is the only reason aagw links libcrypto itself; librdkafka brings
 * its own use of it for TLS.
 *
 * Stores written by Java 8 to 11 encrypt their certificates with
 * RC2-40, which OpenSSL 3 keeps in its "legacy" provider.  The provider
 * is loaded into a private library context, made the default of the
 * calling thread only for the duration of the read, so the rest of the
 * process (librdkafka's TLS) sees OpenSSL exactly as it was.
 */
#include "config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/x509.h>

/* OpenSSL's reason for the last failure (then its error queue is
 * emptied, so that nothing stale reaches librdkafka on this thread). */
static void ossl_why(const char *what, char *why, size_t why_size) {
        unsigned long e      = ERR_peek_last_error();
        const char   *reason = e ? ERR_reason_error_string(e) : NULL;

        snprintf(why, why_size, "%s%s%s", what, reason ? ": " : "",
                 reason ? reason : "");
        ERR_clear_error();
}

/* Read 'path' with 'pass' (NULL: none) in the current default context. */
static int read_store(const char *path, const char *pass, char **pemp,
                      size_t *ncertsp, char *why, size_t why_size) {
        int             fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        FILE           *f;
        struct stat     st;
        PKCS12         *p12;
        EVP_PKEY       *key   = NULL;
        X509           *cert  = NULL;
        STACK_OF(X509) *chain = NULL;
        BIO            *mem   = NULL;
        char           *data;
        long            len;
        int             rc = -1;

        if (fd < 0) {
                snprintf(why, why_size, "%s", strerror(errno));
                return -1;
        }
        /* A trust store is a file of a few kilobytes: no FIFO to wait on
         * (hence O_NONBLOCK), no device to read without end. */
        if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
            st.st_size > GW_STORE_MAX || !(f = fdopen(fd, "rb"))) {
                snprintf(why, why_size, "not a regular file of at most %d KiB",
                         GW_STORE_MAX / 1024);
                close(fd);
                return -1;
        }
        p12 = d2i_PKCS12_fp(f, NULL);
        fclose(f);
        if (!p12) {
                ossl_why("not a PKCS#12 file", why, why_size);
                return -1;
        }
        /* Without a private key in the store, every certificate lands in
         * 'chain'; with one, its own certificate is in 'cert' and is not
         * a CA: only 'chain' is trusted. */
        if (!PKCS12_parse(p12, pass, &key, &cert, &chain)) {
                ossl_why("cannot open it", why, why_size);
                goto out;
        }
        if (!(mem = BIO_new(BIO_s_mem())))
                goto oom;
        *ncertsp = 0;
        for (int i = 0; chain && i < sk_X509_num(chain); i++) {
                if (!PEM_write_bio_X509(mem, sk_X509_value(chain, i)))
                        goto oom;
                (*ncertsp)++;
        }
        len = BIO_get_mem_data(mem, &data);
        if (!(*pemp = malloc((size_t)len + 1)))
                goto oom;
        memcpy(*pemp, data, (size_t)len);
        (*pemp)[len] = '\0';
        rc           = 0;
        goto out;
oom:
        ossl_why("out of memory", why, why_size);
out:
        BIO_free(mem);
        EVP_PKEY_free(key);
        X509_free(cert);
        sk_X509_pop_free(chain, X509_free);
        PKCS12_free(p12);
        return rc;
}

int gw_pkcs12_certs_pem(const char *path, const char *pass, char **pemp,
                        size_t *ncertsp, char *why, size_t why_size) {
        OSSL_LIB_CTX  *ctx = OSSL_LIB_CTX_new(), *prev;
        OSSL_PROVIDER *dflt, *legacy;
        int            rc;

        *pemp    = NULL;
        *ncertsp = 0;
        if (!ctx) {
                ossl_why("out of memory", why, why_size);
                return -1;
        }
        dflt = OSSL_PROVIDER_load(ctx, "default");
        /* Missing on some systems: then only modern stores (AES) read. */
        legacy = OSSL_PROVIDER_load(ctx, "legacy");
        ERR_clear_error();
        prev = OSSL_LIB_CTX_set0_default(ctx);
        rc   = read_store(path, pass, pemp, ncertsp, why, why_size);
        OSSL_LIB_CTX_set0_default(prev);
        if (legacy)
                OSSL_PROVIDER_unload(legacy);
        if (dflt)
                OSSL_PROVIDER_unload(dflt);
        OSSL_LIB_CTX_free(ctx);
        return rc;
}
