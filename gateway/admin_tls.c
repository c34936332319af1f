/*
 * gateway/admin_tls.c: the admin endpoint's certificate, key and client
 * CA, read and checked at start.
 *
 * libmicrohttpd takes TLS material as PEM text in memory, and when it
 * refuses it (a key that does not belong to the certificate, say) it
 * says only that the daemon did not start.  So the files are read here,
 * once, before anything else starts, and each is checked with GnuTLS
 * (which libmicrohttpd uses underneath) on its own: the error names the
 * config key, the file and what is wrong with it.  The key/certificate
 * match is checked with the very call libmicrohttpd makes, so what
 * passes here is what it accepts.
 */
#include "gateway_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "config.h"

/* A PEM bundle of a few certificates is a few kB; a file larger than this
 * is something else. */
#define TLS_FILE_MAX (1u << 20)

/* The whole of 'path' as a NUL-terminated string, or NULL with
 * "KEY: PATH: why" in 'errstr'.  Only text with a PEM header passes. */
static char *read_pem(const char *key, const char *path, char *errstr,
                      size_t size) {
        FILE  *f = fopen(path, "r");
        char  *buf;
        size_t len;

        if (!f) {
                snprintf(errstr, size, "%s: %s: cannot read: %s", key, path,
                         strerror(errno));
                return NULL;
        }
        if (!(buf = malloc(TLS_FILE_MAX + 1))) {
                fclose(f);
                snprintf(errstr, size, "%s: %s: out of memory", key, path);
                return NULL;
        }
        len = fread(buf, 1, TLS_FILE_MAX + 1, f);
        if (ferror(f)) { /* a directory: EISDIR */
                snprintf(errstr, size, "%s: %s: cannot read: %s", key, path,
                         strerror(errno));
                fclose(f);
                free(buf);
                return NULL;
        }
        fclose(f);
        if (len > TLS_FILE_MAX) {
                snprintf(errstr, size,
                         "%s: %s: larger than %u bytes: not a "
                         "PEM file",
                         key, path, TLS_FILE_MAX);
                free(buf);
                return NULL;
        }
        buf[len] = '\0';
        if (memchr(buf, '\0', len) || !strstr(buf, "-----BEGIN ")) {
                snprintf(errstr, size,
                         "%s: %s: not a PEM file (no "
                         "\"-----BEGIN\" line; DER files must be converted "
                         "to PEM)",
                         key, path);
                free(buf);
                return NULL;
        }
        return buf;
}

static gnutls_datum_t datum(const char *pem) {
        gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
        return d;
}

/* At least one X.509 certificate in 'pem' (the file 'path' of 'key'). */
static int check_certs(const char *key, const char *path, const char *pem,
                       char *errstr, size_t size) {
        gnutls_x509_crt_t *crts = NULL;
        unsigned           n    = 0;
        gnutls_datum_t     d    = datum(pem);
        int                rc =
            gnutls_x509_crt_list_import2(&crts, &n, &d, GNUTLS_X509_FMT_PEM, 0);

        if (rc < 0) {
                snprintf(errstr, size,
                         "%s: %s: no PEM certificate in it "
                         "(%s)%s",
                         key, path, gnutls_strerror(rc),
                         strstr(pem, "PRIVATE KEY-----")
                             ? "; it holds a private key: cert and key "
                               "swapped?"
                             : "");
                return -1;
        }
        for (unsigned i = 0; i < n; i++)
                gnutls_x509_crt_deinit(crts[i]);
        gnutls_free(crts);
        return 0;
}

/* The private key in 't->key' loads, with a password exactly when it is
 * encrypted. */
static int check_key(const struct gw_admin_tls *t, const char *path,
                     char *errstr, size_t size) {
        gnutls_x509_privkey_t pk;
        gnutls_datum_t        d = datum(t->key);
        int                   rc;
        bool                  encrypted;

        /* Without a password first: an unencrypted key loads, an
         * encrypted one fails to decrypt. */
        if ((rc = gnutls_x509_privkey_init(&pk)) < 0)
                goto fail;
        rc = gnutls_x509_privkey_import2(pk, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
        gnutls_x509_privkey_deinit(pk);
        encrypted = rc == GNUTLS_E_DECRYPTION_FAILED;
        if (rc < 0 && !encrypted) {
                snprintf(errstr, size,
                         "admin.tls.key: %s: no PEM private "
                         "key in it (%s)%s",
                         path, gnutls_strerror(rc),
                         strstr(t->key, "CERTIFICATE-----")
                             ? "; it holds a certificate: cert and key "
                               "swapped?"
                             : "");
                return -1;
        }
        if (!encrypted && t->key_password) {
                snprintf(errstr, size,
                         "admin.tls.key_password: set, but %s "
                         "(admin.tls.key) is not encrypted",
                         path);
                return -1;
        }
        if (encrypted && !t->key_password) {
                snprintf(errstr, size,
                         "admin.tls.key: %s: the key is "
                         "encrypted: set admin.tls.key_password",
                         path);
                return -1;
        }
        if (!encrypted)
                return 0;
        if ((rc = gnutls_x509_privkey_init(&pk)) < 0)
                goto fail;
        rc = gnutls_x509_privkey_import2(pk, &d, GNUTLS_X509_FMT_PEM,
                                         t->key_password, 0);
        gnutls_x509_privkey_deinit(pk);
        if (rc < 0) {
                snprintf(errstr, size,
                         "admin.tls.key_password: does not "
                         "decrypt %s (admin.tls.key): %s",
                         path, gnutls_strerror(rc));
                return -1;
        }
        return 0;
fail:
        snprintf(errstr, size, "admin.tls.key: %s", gnutls_strerror(rc));
        return -1;
}

/* The key belongs to the certificate: checked by loading both into
 * credentials, as libmicrohttpd does when it starts. */
static int check_pair(const struct gw_admin_tls *t, const char *cert_path,
                      const char *key_path, char *errstr, size_t size) {
        gnutls_certificate_credentials_t cred;
        gnutls_datum_t                   c = datum(t->cert), k = datum(t->key);
        int                              rc;

        if ((rc = gnutls_certificate_allocate_credentials(&cred)) < 0) {
                snprintf(errstr, size, "admin.tls.cert: %s",
                         gnutls_strerror(rc));
                return -1;
        }
        rc = gnutls_certificate_set_x509_key_mem2(
            cred, &c, &k, GNUTLS_X509_FMT_PEM, t->key_password, 0);
        gnutls_certificate_free_credentials(cred);
        if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
                snprintf(errstr, size,
                         "admin.tls.key: %s does not match the "
                         "certificate in %s (admin.tls.cert)",
                         key_path, cert_path);
        else if (rc < 0)
                snprintf(errstr, size,
                         "admin.tls.cert: %s with the key in "
                         "%s: %s",
                         cert_path, key_path, gnutls_strerror(rc));
        return rc < 0 ? -1 : 0;
}

int gw_admin_tls_init(struct gw_admin_tls *t, const aagw_config_t *cfg,
                      char *errstr, size_t errstr_size) {
        const struct aagw_settings *s    = aagw_config_settings(cfg);
        const char                 *cert = s->admin.tls.cert;
        const char                 *key  = s->admin.tls.key;
        const char                 *pw   = s->admin.tls.key_password;
        const char                 *ca   = s->admin.tls.client_ca;

        memset(t, 0, sizeof(*t));
        if (!cert || !key) /* config validation saw to the rest */
                return 0;
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
                snprintf(errstr, errstr_size,
                         "admin.tls.cert: this libmicrohttpd (%s) was built "
                         "without TLS support; use one built with GnuTLS, "
                         "as Debian's is",
                         MHD_get_version());
                return -1;
        }
        if (pw && !MHD_is_feature_supported(MHD_FEATURE_HTTPS_KEY_PASSWORD)) {
                snprintf(errstr, errstr_size,
                         "admin.tls.key_password: this libmicrohttpd (%s) "
                         "cannot decrypt keys; decrypt the key file instead",
                         MHD_get_version());
                return -1;
        }
        if (pw && !(t->key_password = strdup(pw))) {
                snprintf(errstr, errstr_size, "out of memory");
                return -1;
        }
        if (!(t->cert =
                  read_pem("admin.tls.cert", cert, errstr, errstr_size)) ||
            check_certs("admin.tls.cert", cert, t->cert, errstr, errstr_size) ||
            !(t->key = read_pem("admin.tls.key", key, errstr, errstr_size)) ||
            check_key(t, key, errstr, errstr_size) ||
            check_pair(t, cert, key, errstr, errstr_size))
                return -1;
        if (ca && (!(t->client_ca = read_pem("admin.tls.client_ca", ca, errstr,
                                             errstr_size)) ||
                   check_certs("admin.tls.client_ca", ca, t->client_ca, errstr,
                               errstr_size)))
                return -1;
        return 0;
}

/* Overwrite a secret before it goes back to the allocator. */
static void wipe_free(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

void gw_admin_tls_deinit(struct gw_admin_tls *t) {
        if (!t)
                return;
        free(t->cert);
        wipe_free(t->key);
        wipe_free(t->key_password);
        free(t->client_ca);
        memset(t, 0, sizeof(*t));
}
