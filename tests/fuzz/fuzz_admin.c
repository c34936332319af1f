/* tests/fuzz/fuzz_admin.c: the admin endpoint's request path on arbitrary
 * bytes: libmicrohttpd's parser, then aagw's handler (Host and Origin
 * checks, the bearer token, methods, routes, /flows/NAME/ACTION, query
 * arguments, bodies) and its answers (/status JSON and text, /metrics,
 * /healthz, the page).
 *
 * Two endpoints are started once, on 127.0.0.1 with port 0: one without
 * a token, one with the token "fuzz-token".  Input: byte 0 bit 0 picks the
 * endpoint; the rest is written as it is to a new TCP connection, whose
 * write side is then shut down, and the answer is read until the server
 * closes (bounded: 5 s, 4 MiB).
 *
 * Beyond "no crash, no sanitizer report": every answer is HTTP (starts
 * with "HTTP/1."), and the endpoint still answers a plain GET /healthz
 * afterwards with 200 (one bad request must not take it down). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway_int.h"

#define CHECK(cond)                                                            \
        do {                                                                   \
                if (!(cond)) {                                                 \
                        fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
                                __FILE__, __LINE__, #cond);                    \
                        abort();                                               \
                }                                                              \
        } while (0)

#define ANSWER_MAX (4u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gw_admin     *adm[2];
static uint16_t             port[2];
static struct gw_admin_view view;
static char                *answer;
static unsigned             calls;

static void start(void) {
        char err[512];

        view.gateway_id = "fuzz";
        view.mode       = "active-active";
        view.started    = time(NULL);
        answer          = malloc(ANSWER_MAX);
        CHECK(answer);
        for (int i = 0; i < 2; i++) {
                int fd = gw_admin_listen("127.0.0.1:0", err, sizeof(err));
                if (fd < 0) {
                        fprintf(stderr, "fuzz_admin: %s\n", err);
                        abort();
                }
                struct gw_admin_conf conf = {
                    .fd = fd, .health_fd = -1,
                    .token = i ? "fuzz-token" : NULL};
                adm[i] = gw_admin_start(&conf, &view, err, sizeof(err));
                if (!adm[i]) {
                        fprintf(stderr, "fuzz_admin: %s\n", err);
                        abort();
                }
                const char *colon = strrchr(gw_admin_addr(adm[i]), ':');
                CHECK(colon);
                port[i] = (uint16_t)atoi(colon + 1);
        }
}

/* Wait until 'fd' is ready for 'events' or 'deadline' passes.  libFuzzer's
 * SIGALRM (its unit-timeout check, every -timeout/2+1 s: 601 s by
 * default) interrupts poll() with EINTR; that is a signal, not an answer,
 * so the wait goes on to the same deadline.  Until this was handled the
 * 10M-input runs stopped at ~600 s with "r == 1" (sessions 9 and 10);
 * -timeout=4 reproduces that within 3 s. */
static void wait_for(int fd, short events, int64_t deadline) {
        for (;;) {
                struct pollfd p    = {.fd = fd, .events = events};
                int64_t       left = deadline - aagw_mono_ms();
                CHECK(left > 0); /* the server must answer and close */
                int r = poll(&p, 1, (int)left);
                if (r == 1)
                        return;
                CHECK(r == -1 && errno == EINTR);
        }
}

/* Send 'len' bytes on a new connection to endpoint 'i', shut the write
 * side, read the answer into 'answer'; its length.  The server must
 * answer and close within 30 s (a hang, told apart from a niced run on a
 * busy machine). */
static size_t exchange(int i, const void *req, size_t len) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port   = htons(port[i])};
        size_t             got      = 0;
        int64_t            deadline = aagw_mono_ms() + 30000;
        int                fd       = socket(AF_INET, SOCK_STREAM, 0);

        CHECK(fd >= 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
                /* Interrupted: the connection goes on being made. */
                int       e  = 0;
                socklen_t el = sizeof(e);
                CHECK(errno == EINTR);
                wait_for(fd, POLLOUT, deadline);
                CHECK(!getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el));
                CHECK(e == 0);
        }
        for (size_t off = 0; off < len;) {
                ssize_t n = send(fd, (const char *)req + off, len - off,
                                 MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break; /* the server closed early: fine */
                off += (size_t)n;
        }
        shutdown(fd, SHUT_WR);
        for (;;) {
                wait_for(fd, POLLIN, deadline);
                ssize_t n = recv(fd, answer + got, ANSWER_MAX - got, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
                CHECK(got < ANSWER_MAX);
        }
        close(fd);
        return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char health[] = "GET /healthz HTTP/1.1\r\n"
                                     "Host: 127.0.0.1\r\n"
                                     "Authorization: Bearer fuzz-token\r\n"
                                     "Connection: close\r\n\r\n";
        size_t got;

        if (!adm[0])
                start();
        if (!size)
                return 0;
        got = exchange(data[0] & 1, data + 1, size - 1);
        if (got)
                CHECK(got >= 7 && !memcmp(answer, "HTTP/1.", 7));
        /* Still serving: every 64th input, a plain health check. */
        if (!(++calls & 63)) {
                int i = (calls >> 6) & 1;
                got   = exchange(i, health, sizeof(health) - 1);
                CHECK(got > 12 && !memcmp(answer + 9, "200", 3));
        }
        return 0;
}
