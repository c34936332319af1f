/*
 * gateway/cli_status.c: `aagw status`: ask a running gateway's admin
 * endpoint for its state and print it as sectioned key:value text (or the
 * JSON with --json).
 *
 * The address comes from --admin, or from the file the gateway writes in
 * its state dir (admin.addr), so on the gateway's host `aagw status` alone
 * works.  A tiny HTTP/1.0 client over a TCP socket is all this needs.
 */
#include "gateway_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

static void usage(FILE *out) {
        fprintf(out,
                "Usage: aagw status [--admin [https://]HOST:PORT] "
                "[--state-dir DIR] [--token T]\n"
                "                   [--cacert FILE] [--cert FILE --key FILE] "
                "[--json]\n"
                "\n"
                "Print a running gateway's state: flows, counters, lag.\n"
                "  --admin HOST:PORT   the gateway's admin endpoint (default: "
                "read from\n"
                "                      DIR/admin.addr, written by the "
                "gateway at start);\n"
                "                      https://HOST:PORT for one with TLS "
                "(admin.tls.cert)\n"
                "  --state-dir DIR     the gateway's state dir (default "
                "aagw-state)\n"
                "  --token T           bearer token (default: "
                "$AAGW_ADMIN_TOKEN; prefer the\n"
                "                      variable: a command line is "
                "visible to all local users)\n"
                "  --cacert FILE       HTTPS: the CA certificates (PEM) that "
                "the endpoint's\n"
                "                      certificate must chain to (default: "
                "the system's)\n"
                "  --cert FILE         HTTPS: a client certificate (PEM), for "
                "an endpoint\n"
                "                      with admin.tls.client_ca\n"
                "  --key FILE          HTTPS: the unencrypted private key of "
                "--cert (PEM)\n"
                "  --json              the /status JSON instead of text\n"
                "Exit status: 0 shown, 1 gateway unreachable or a flow "
                "failed, 2 usage.\n");
}

/* true if 'addr' is HOST:PORT or [V6]:PORT with a port of 1..65535 in
 * decimal digits.  getaddrinfo() would take "99999" and wrap it to
 * another port (34463), where whoever listens would get the token. */
static bool addr_ok(const char *addr) {
        char        host[256];
        const char *colon = gw_split_hostport(addr, host, sizeof(host));
        long        port  = 0;

        if (!colon || !*host || strlen(colon + 1) > 5)
                return false;
        for (const char *p = colon + 1; *p; p++) {
                if (*p < '0' || *p > '9')
                        return false;
                port = port * 10 + (*p - '0');
        }
        return port >= 1 && port <= 65535;
}

/* Drop an "http://" or "https://" in front of 'addr' (and a "/" after
 * it), as the gateway writes it in admin.addr and as people paste it:
 * HOST:PORT in 'out', true in '*tls' for https. */
static bool addr_parse(const char *addr, char *out, size_t size, bool *tls) {
        size_t len;

        *tls = !strncmp(addr, "https://", 8);
        if (*tls)
                addr += 8;
        else if (!strncmp(addr, "http://", 7))
                addr += 7;
        len = strlen(addr);
        if (len && addr[len - 1] == '/')
                len--;
        if (len >= size)
                return false;
        snprintf(out, size, "%.*s", (int)len, addr);
        return addr_ok(out);
}

/* ---------------------------------------------------------- TRANSPORT --- */

/* What the request goes over: a socket, with a TLS session on it for an
 * https:// endpoint. */
struct conn {
        int                              fd;
        gnutls_session_t                 tls;
        gnutls_certificate_credentials_t cred;
};

struct tls_files {
        const char *cacert, *cert, *key; /* NULL: unset */
};

static void conn_close(struct conn *cn) {
        if (cn->tls) {
                gnutls_bye(cn->tls, GNUTLS_SHUT_WR);
                gnutls_deinit(cn->tls);
        }
        if (cn->cred)
                gnutls_certificate_free_credentials(cn->cred);
        if (cn->fd >= 0)
                close(cn->fd);
        memset(cn, 0, sizeof(*cn));
        cn->fd = -1;
}

/* Why the TLS session with 'addr' failed (GnuTLS error 'rc'), into
 * 'errstr'.  With TLS 1.3 a client learns that its certificate was
 * refused only after its own handshake is done, when it reads: the same
 * words serve both. */
static void tls_why(struct conn *cn, int rc, const char *addr,
                    const struct tls_files *tf, char *errstr, size_t size) {
        if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                gnutls_datum_t txt = {NULL, 0};
                unsigned st = gnutls_session_get_verify_cert_status(cn->tls);
                size_t   len;
                gnutls_certificate_verification_status_print(
                    st, GNUTLS_CRT_X509, &txt, 0);
                len = txt.data ? strlen((char *)txt.data) : 0;
                while (len && txt.data[len - 1] == ' ')
                        txt.data[--len] = '\0';
                snprintf(errstr, size,
                         "%s: the endpoint's certificate is not trusted: %s "
                         "(%s)",
                         addr, txt.data ? (char *)txt.data : "",
                         tf->cacert ? "is --cacert the CA that signed it?"
                                    : "name the CA that signed it with "
                                      "--cacert");
                gnutls_free(txt.data);
        } else if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
                snprintf(errstr, size,
                         "%s: the endpoint refused the TLS "
                         "session: %s%s",
                         addr, gnutls_alert_get_name(gnutls_alert_get(cn->tls)),
                         tf->cert ? ""
                                  : " (does it require a client "
                                    "certificate? --cert and --key)");
        } else {
                snprintf(errstr, size, "%s: TLS: %s%s", addr,
                         gnutls_strerror(rc),
                         tf->cert ? ""
                                  : " (does it require a client "
                                    "certificate? --cert and --key)");
        }
}

/* Start TLS on 'cn->fd' to 'host' ('addr' for messages): the endpoint's
 * certificate must chain to --cacert (or the system's CAs) and name
 * 'host' (a DNS name, or an IP address in subjectAltName). */
static int tls_start(struct conn *cn, const char *host, const char *addr,
                     const struct tls_files *tf, char *errstr, size_t size) {
        unsigned char ip[16];
        bool          is_ip = inet_pton(AF_INET, host, ip) == 1 ||
                     inet_pton(AF_INET6, host, ip) == 1;
        int rc;

        if ((rc = gnutls_certificate_allocate_credentials(&cn->cred)) < 0) {
                snprintf(errstr, size, "TLS: %s", gnutls_strerror(rc));
                return -1;
        }
        if (tf->cacert) {
                rc = gnutls_certificate_set_x509_trust_file(
                    cn->cred, tf->cacert, GNUTLS_X509_FMT_PEM);
                if (rc <= 0) {
                        snprintf(errstr, size, "--cacert %s: %s", tf->cacert,
                                 rc < 0 ? gnutls_strerror(rc)
                                        : "no PEM certificate in it");
                        return -1;
                }
        } else if ((rc = gnutls_certificate_set_x509_system_trust(cn->cred)) <
                   0) {
                snprintf(errstr, size,
                         "the system's CA certificates: %s "
                         "(name the endpoint's CA with --cacert)",
                         gnutls_strerror(rc));
                return -1;
        }
        if (tf->cert && (rc = gnutls_certificate_set_x509_key_file2(
                             cn->cred, tf->cert, tf->key, GNUTLS_X509_FMT_PEM,
                             NULL, 0)) < 0) {
                snprintf(errstr, size, "--cert %s --key %s: %s", tf->cert,
                         tf->key, gnutls_strerror(rc));
                return -1;
        }
        if ((rc = gnutls_init(&cn->tls, GNUTLS_CLIENT)) < 0 ||
            (rc = gnutls_set_default_priority(cn->tls)) < 0 ||
            (rc = gnutls_credentials_set(cn->tls, GNUTLS_CRD_CERTIFICATE,
                                         cn->cred)) < 0 ||
            /* SNI carries names only, never addresses (RFC 6066). */
            (!is_ip && (rc = gnutls_server_name_set(cn->tls, GNUTLS_NAME_DNS,
                                                    host, strlen(host))) < 0)) {
                snprintf(errstr, size, "TLS: %s", gnutls_strerror(rc));
                return -1;
        }
        gnutls_session_set_verify_cert(cn->tls, host, 0);
        gnutls_transport_set_int(cn->tls, cn->fd);
        gnutls_handshake_set_timeout(cn->tls, GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT);
        do
                rc = gnutls_handshake(cn->tls);
        while (rc < 0 && !gnutls_error_is_fatal(rc));
        if (rc < 0) {
                tls_why(cn, rc, addr, tf, errstr, size);
                return -1;
        }
        return 0;
}

/* Write all of 'buf' to 'addr'; 0, or -1 with the reason in 'errstr'. */
static int conn_write(struct conn *cn, const char *addr, const char *buf,
                      size_t len, char *errstr, size_t size) {
        while (len) {
                ssize_t n = cn->tls ? gnutls_record_send(cn->tls, buf, len)
                                    : write(cn->fd, buf, len);
                if (n < 0 &&
                    (cn->tls ? !gnutls_error_is_fatal((int)n) : errno == EINTR))
                        continue;
                if (n <= 0) {
                        snprintf(errstr, size, "%s: write: %s", addr,
                                 cn->tls ? gnutls_strerror((int)n)
                                         : strerror(errno));
                        return -1;
                }
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Read up to 'len' bytes: the count, 0 at the end, or a negative
 * GnuTLS error (TLS) or -1 (plain).  The endpoint closes after its
 * answer (HTTP/1.0); a TLS close without close_notify counts as the end
 * too, because the answer's length is checked against its Content-Length
 * afterwards. */
static ssize_t conn_read(struct conn *cn, char *buf, size_t len) {
        for (;;) {
                ssize_t n = cn->tls ? gnutls_record_recv(cn->tls, buf, len)
                                    : read(cn->fd, buf, len);
                if (n >= 0)
                        return n;
                if (cn->tls && n == GNUTLS_E_PREMATURE_TERMINATION)
                        return 0;
                if (cn->tls ? !gnutls_error_is_fatal((int)n) : errno == EINTR)
                        continue;
                return n;
        }
}

/* GET 'path' from 'addr' ("HOST:PORT" or "[V6]:PORT"), over TLS when 'tf'
 * is not NULL.  Returns the HTTP status and the malloc()ed body, or -1
 * with the reason in errstr. */
static int http_get(const char *addr, const struct tls_files *tf,
                    const char *path, const char *token, char **bodyp,
                    char *errstr, size_t errstr_size) {
        char             host[256], req[1024];
        const char      *colon, *cl;
        struct addrinfo  hints, *res = NULL, *ai;
        struct conn      cn = {.fd = -1};
        int              rc, status;
        char            *buf = NULL, *body;
        size_t           len = 0, cap = 0;

        if (!(colon = gw_split_hostport(addr, host, sizeof(host)))) {
                snprintf(errstr, errstr_size, "bad admin address %s", addr);
                return -1;
        }
        memset(&hints, 0, sizeof(hints));
        hints.ai_socktype = SOCK_STREAM;
        if ((rc = getaddrinfo(host, colon + 1, &hints, &res))) {
                snprintf(errstr, errstr_size, "%s: %s", addr, gai_strerror(rc));
                return -1;
        }
        for (ai = res; ai; ai = ai->ai_next) {
                cn.fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                               ai->ai_protocol);
                if (cn.fd >= 0 &&
                    connect(cn.fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                rc = errno;
                if (cn.fd >= 0)
                        close(cn.fd);
                cn.fd = -1;
        }
        freeaddrinfo(res);
        if (cn.fd < 0) {
                snprintf(errstr, errstr_size,
                         "cannot reach the admin endpoint at %s: %s (is the "
                         "gateway running with --admin?)",
                         addr, strerror(rc));
                return -1;
        }
        if (tf && tls_start(&cn, host, addr, tf, errstr, errstr_size)) {
                conn_close(&cn);
                return -1;
        }
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.0\r\nHost: %s\r\n%s%s%s"
                         "Connection: close\r\n\r\n",
                         path, addr, token ? "Authorization: Bearer " : "",
                         token ? token : "", token ? "\r\n" : "");
        /* A write error is not final over TLS: the endpoint may have
         * said why it hung up, and the read below gets that. */
        if (conn_write(&cn, addr, req, (size_t)n, errstr, errstr_size) &&
            !cn.tls) {
                conn_close(&cn);
                return -1;
        }
        for (;;) {
                if (len + 4096 > cap) {
                        cap       = (cap + 4096) * 2;
                        char *nb = realloc(buf, cap);
                        if (!nb)
                                break;
                        buf = nb;
                }
                ssize_t r = conn_read(&cn, buf + len, cap - len - 1);
                if (r < 0 && cn.tls && !len) {
                        tls_why(&cn, (int)r, addr, tf, errstr, errstr_size);
                        conn_close(&cn);
                        free(buf);
                        return -1;
                }
                if (r <= 0)
                        break;
                len += (size_t)r;
        }
        conn_close(&cn);
        if (buf)
                buf[len] = '\0';
        if (!buf || sscanf(buf, "HTTP/%*s %d", &status) != 1) {
                free(buf);
                /* A TLS endpoint hangs up on a plain request, and on a
                 * client whose certificate it refuses (libmicrohttpd
                 * sends no alert). */
                if (!tf)
                        snprintf(errstr, errstr_size,
                                 "%s: not an HTTP answer (if the endpoint "
                                 "uses TLS: --admin https://HOST:PORT)",
                                 addr);
                else
                        snprintf(errstr, errstr_size,
                                 "%s: the endpoint closed the TLS connection "
                                 "without an answer (%s)",
                                 addr,
                                 tf->cert ? "is --cert signed by the CA of "
                                            "its admin.tls.client_ca?"
                                          : "does it require a client "
                                            "certificate? --cert and --key");
                return -1;
        }
        body = strstr(buf, "\r\n\r\n");
        body = body ? body + 4 : buf + len;
        /* Content-Length, when sent, must match: an answer cut short
         * (the connection dropped mid-way) is not shown as complete. */
        for (cl = buf; (cl = strchr(cl, '\n')) && cl < body; cl++)
                if (!strncasecmp(cl + 1, "Content-Length:", 15) &&
                    strtoull(cl + 16, NULL, 10) !=
                        (unsigned long long)(buf + len - body)) {
                        free(buf);
                        snprintf(errstr, errstr_size,
                                 "%s: the answer was cut short", addr);
                        return -1;
                }
        body = strdup(body);
        free(buf);
        *bodyp = body;
        return status;
}

int gw_cmd_status(int argc, char **argv) {
        static const struct option longopts[] = {
            {"admin", required_argument, NULL, 'a'},
            {"state-dir", required_argument, NULL, 's'},
            {"token", required_argument, NULL, 't'},
            {"json", no_argument, NULL, 'j'},
            {"cacert", required_argument, NULL, 'C'},
            {"cert", required_argument, NULL, 'E'},
            {"key", required_argument, NULL, 'K'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char      *addr = NULL, *dir = "aagw-state";
        const char      *token = getenv("AAGW_ADMIN_TOKEN");
        bool             json = false, tls = false;
        char             fileaddr[300], hostport[300], err[1024];
        char            *body = NULL;
        struct tls_files tf   = {NULL, NULL, NULL};
        int              opt, status;

        /* A TLS endpoint that refuses this client hangs up while the
         * request is being written: an error to report, not a SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        optind = 1;
        opterr = 0;
        while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
                switch (opt) {
                case 'a': addr = optarg; break;
                case 's': dir = optarg; break;
                case 't': token = optarg; break;
                case 'j': json = true; break;
                case 'C': tf.cacert = optarg; break;
                case 'E': tf.cert = optarg; break;
                case 'K': tf.key = optarg; break;
                case 'h': usage(stdout); return EXIT_OK;
                case ':':
                        gw_errorf("%s requires an argument", argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                default:
                        gw_errorf("unknown option %s", argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                gw_errorf("unexpected argument '%s'", argv[optind]);
                usage(stderr);
                return EXIT_USAGE;
        }
        if (addr && !addr_parse(addr, hostport, sizeof(hostport), &tls)) {
                gw_errorf("--admin: expected HOST:PORT with a port of "
                          "1..65535, got \"%s\"",
                          addr);
                usage(stderr);
                return EXIT_USAGE;
        }
        if (!tf.cert != !tf.key) {
                gw_errorf("--cert and --key go together");
                usage(stderr);
                return EXIT_USAGE;
        }
        if (token && !*token)
                token = NULL;
        if (!addr) {
                char  path[4096];
                FILE *f;
                snprintf(path, sizeof(path), "%s/%s", dir, GW_ADMIN_ADDR_FILE);
                if (!(f = fopen(path, "r")) ||
                    !fgets(fileaddr, sizeof(fileaddr), f)) {
                        gw_errorf("no admin address: %s: %s (start the "
                                  "gateway with --admin HOST:PORT, or pass "
                                  "--admin)",
                                  path, f ? "empty" : strerror(errno));
                        if (f)
                                fclose(f);
                        return EXIT_RUNTIME;
                }
                fclose(f);
                fileaddr[strcspn(fileaddr, "\r\n")] = '\0';
                if (!addr_parse(fileaddr, hostport, sizeof(hostport), &tls)) {
                        gw_errorf("%s: not an admin address: \"%s\"", path,
                                  fileaddr);
                        return EXIT_RUNTIME;
                }
        }
        /* Options the request would ignore are mistakes. */
        if (!tls && (tf.cacert || tf.cert)) {
                gw_errorf("--cacert, --cert and --key are for an https:// "
                          "endpoint; %s is plain HTTP",
                          hostport);
                usage(stderr);
                return EXIT_USAGE;
        }
        addr   = hostport;
        status = http_get(addr, tls ? &tf : NULL,
                          json ? "/status" : "/status?format=text", token,
                          &body, err, sizeof(err));
        if (status < 0) {
                gw_errorf("%s", err);
                return EXIT_RUNTIME;
        }
        if (status != 200) {
                gw_errorf("%s answered %d: %s", addr, status,
                          body ? body : "");
                free(body);
                return EXIT_RUNTIME;
        }
        fputs(body, stdout);
        if (json)
                fputc('\n', stdout);
        /* A failed flow makes the command fail too, for scripts. */
        bool failed = strstr(body, json ? "\"state\":\"failed\""
                                        : "\nstate:failed\n") != NULL;
        free(body);
        return failed ? EXIT_RUNTIME : EXIT_OK;
}
