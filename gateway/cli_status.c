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

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void usage(FILE *out) {
        fprintf(out,
                "Usage: aagw status [--admin HOST:PORT] [--state-dir DIR] "
                "[--token T] [--json]\n"
                "\n"
                "Print a running gateway's state: flows, counters, lag.\n"
                "  --admin HOST:PORT   the gateway's admin endpoint (default: "
                "read from\n"
                "                      DIR/admin.addr, written by the "
                "gateway at start)\n"
                "  --state-dir DIR     the gateway's state dir (default "
                "aagw-state)\n"
                "  --token T           bearer token (default: "
                "$AAGW_ADMIN_TOKEN; prefer the\n"
                "                      variable: a command line is "
                "visible to all local users)\n"
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

/* GET 'path' from 'addr' ("HOST:PORT" or "[V6]:PORT").  Returns the HTTP
 * status and the malloc()ed body, or -1 with the reason in errstr. */
static int http_get(const char *addr, const char *path, const char *token,
                    char **bodyp, char *errstr, size_t errstr_size) {
        char             host[256], req[1024];
        const char      *colon;
        struct addrinfo  hints, *res = NULL, *ai;
        int              fd = -1, rc, status;
        char            *buf = NULL;
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
                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                            ai->ai_protocol);
                if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                rc = errno;
                if (fd >= 0)
                        close(fd);
                fd = -1;
        }
        freeaddrinfo(res);
        if (fd < 0) {
                snprintf(errstr, errstr_size,
                         "cannot reach the admin endpoint at %s: %s (is the "
                         "gateway running with --admin?)",
                         addr, strerror(rc));
                return -1;
        }
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.0\r\nHost: %s\r\n%s%s%s"
                         "Connection: close\r\n\r\n",
                         path, addr, token ? "Authorization: Bearer " : "",
                         token ? token : "", token ? "\r\n" : "");
        if (write(fd, req, (size_t)n) != n) {
                snprintf(errstr, errstr_size, "%s: write: %s", addr,
                         strerror(errno));
                close(fd);
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
                ssize_t r = read(fd, buf + len, cap - len - 1);
                if (r <= 0)
                        break;
                len += (size_t)r;
        }
        close(fd);
        if (!buf || sscanf(buf, "HTTP/%*s %d", &status) != 1) {
                free(buf);
                snprintf(errstr, errstr_size, "%s: not an HTTP answer", addr);
                return -1;
        }
        buf[len]   = '\0';
        char *body = strstr(buf, "\r\n\r\n");
        body       = strdup(body ? body + 4 : "");
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
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        const char *addr = NULL, *dir = "aagw-state";
        const char *token = getenv("AAGW_ADMIN_TOKEN");
        bool        json  = false;
        char        fileaddr[256], err[1024], *body = NULL;
        int         opt, status;

        optind = 1;
        opterr = 0;
        while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
                switch (opt) {
                case 'a': addr = optarg; break;
                case 's': dir = optarg; break;
                case 't': token = optarg; break;
                case 'j': json = true; break;
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
        if (addr && !addr_ok(addr)) {
                gw_errorf("--admin: expected HOST:PORT with a port of "
                          "1..65535, got \"%s\"",
                          addr);
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
                addr = fileaddr;
                if (!addr_ok(addr)) {
                        gw_errorf("%s: not an admin address: \"%s\"", path,
                                  addr);
                        return EXIT_RUNTIME;
                }
        }
        status = http_get(addr, json ? "/status" : "/status?format=text",
                          token, &body, err, sizeof(err));
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
