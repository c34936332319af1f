/*
 * tests/wan/test_wan_proxy.c: the WAN delay proxy (tests/wan/wan_proxy.c)
 * between clients in this test and servers on threads of it, over
 * loopback.
 *
 * Both ends live in this process, so one monotonic clock times a byte's
 * send and its arrival.  What is checked are outcomes: the bytes each
 * side received (exact, both ways at once, through a queue bound far
 * smaller than the payload, with the proxy's peak memory), their order,
 * the one-way delays of each direction and the round trip, how an end of
 * stream, a half-close, a close and a reset travel, an upstream that
 * refuses, many connections at once, SIGTERM, and the errors for bad
 * input.  Waits are polls against deadlines; nothing sleeps to
 * synchronise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "harness.h"
#include "wan_test.h"

/* ASan's allocator keeps freed memory in quarantine, so a sanitized
 * proxy's RSS says nothing about what it holds. */
#if defined(__SANITIZE_ADDRESS__)
#define WAN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WAN_ASAN 1
#endif
#endif

#define MS 1000000LL              /* ns */
#define IO_TIMEOUT_MS 20000       /* one test's transfers */
#define MAX_CONNS 128             /* per server */
#define SLACK_NS (30 * MS)        /* the best sample over the delay */
#define MEDIAN_NS (100 * MS)      /* the median sample over the delay */
#define SPREAD_NS (3000 * MS)     /* the worst sample over the delay */

/* -------------------------------------------------------------- BYTES -- */

/* 'len' bytes of a sequence fixed by 'seed' (xorshift64*). */
static unsigned char *random_bytes(size_t len, uint64_t seed) {
        unsigned char *b = malloc(len ? len : 1);
        uint64_t       x = seed * 0x9E3779B97F4A7C15ULL + 1;

        for (size_t i = 0; b && i < len; i++) {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                b[i] = (unsigned char)((x * 0x2545F4914F6CDD1DULL) >> 56);
        }
        return b;
}

/* FNV-1a, for messages that name what differs. */
static uint64_t checksum(const unsigned char *b, size_t len) {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t i = 0; i < len; i++)
                h = (h ^ b[i]) * 0x100000001b3ULL;
        return h;
}

static void assert_bytes_equal(const unsigned char *got, size_t got_len,
                               const unsigned char *want, size_t want_len,
                               const char *what) {
        if (got_len != want_len || memcmp(got, want, want_len)) {
                size_t i = 0;
                while (i < got_len && i < want_len && got[i] == want[i])
                        i++;
                fail_msg("%s: %zu bytes (checksum %016" PRIx64
                         ") where %zu (checksum %016" PRIx64
                         ") were sent; first difference at byte %zu",
                         what, got_len, checksum(got, got_len), want_len,
                         checksum(want, want_len), i);
        }
}

/* ---------------------------------------------------------- TRANSFERS -- */

/* One socket's transfer: send 'out' then half-close, meanwhile read
 * until the peer's end. */
struct xfer {
        int                  fd;
        const unsigned char *out;
        size_t               out_len, sent;
        unsigned char       *in;
        size_t               in_cap, in_len;
        bool                 eof, shut;
        int                  err;           /* errno of a failure, or 0 */
        int64_t              t_shut, t_eof; /* wan_now_ns() */
};

static bool xfer_over(const struct xfer *x) {
        return x->err || (x->eof && x->shut);
}

static void xfer_recv(struct xfer *x) {
        for (;;) {
                unsigned char spill;
                size_t        room = x->in_cap - x->in_len;
                ssize_t r = recv(x->fd, room ? x->in + x->in_len : &spill,
                                 room ? room : 1, 0);
                if (r > 0 && !room) {
                        x->err = EOVERFLOW; /* more than expected */
                        return;
                }
                if (r > 0) {
                        x->in_len += (size_t)r;
                        continue;
                }
                if (!r) {
                        x->eof   = true;
                        x->t_eof = wan_now_ns();
                } else if (errno != EAGAIN && errno != EINTR) {
                        x->err = errno;
                }
                return;
        }
}

static void xfer_send(struct xfer *x) {
        while (x->sent < x->out_len) {
                ssize_t w = send(x->fd, x->out + x->sent, x->out_len - x->sent,
                                 MSG_NOSIGNAL);
                if (w < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                x->err = errno;
                        return;
                }
                x->sent += (size_t)w;
        }
        if (!x->shut) {
                x->t_shut = wan_now_ns();
                shutdown(x->fd, SHUT_WR);
                x->shut = true;
        }
}

/* Run the 'n' transfers of 'x' at once until each is over (an error,
 * or everything sent and the peer's end read), 'deadline_ms' passes or
 * '*stop' is set.  @returns 0, or ETIMEDOUT. */
static int xfers_run(struct xfer *x, int n, int64_t deadline_ms,
                     const atomic_bool *stop) {
        struct pollfd pfd[MAX_CONNS];
        int           idx[MAX_CONNS];

        for (int i = 0; i < n; i++) {
                fcntl(x[i].fd, F_SETFL, fcntl(x[i].fd, F_GETFL) | O_NONBLOCK);
                xfer_send(&x[i]); /* an empty 'out' half-closes at once */
        }
        for (;;) {
                int cnt = 0, left = (int)(deadline_ms - harness_now_ms());

                for (int i = 0; i < n; i++) {
                        if (xfer_over(&x[i]))
                                continue;
                        pfd[cnt].fd     = x[i].fd;
                        pfd[cnt].events = (short)((x[i].eof ? 0 : POLLIN) |
                                                  (x[i].shut ? 0 : POLLOUT));
                        idx[cnt++]      = i;
                }
                if (!cnt)
                        return 0;
                if (left <= 0 || (stop && atomic_load(stop)))
                        return ETIMEDOUT;
                if (poll(pfd, (nfds_t)cnt, left < 50 ? left : 50) < 0 &&
                    errno != EINTR)
                        return errno;
                for (int k = 0; k < cnt; k++) {
                        struct xfer *t = &x[idx[k]];
                        if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
                                xfer_recv(t);
                        if (!t->err && (pfd[k].revents & (POLLOUT | POLLERR)))
                                xfer_send(t);
                }
        }
}

/* recv() with a deadline.  @returns the bytes read (0 at the peer's
 * end), or -errno (-ETIMEDOUT at the deadline). */
static ssize_t recv_until(int fd, void *buf, size_t len, int64_t deadline_ms) {
        for (;;) {
                struct pollfd p    = {.fd = fd, .events = POLLIN};
                int           left = (int)(deadline_ms - harness_now_ms());
                if (left <= 0)
                        return -ETIMEDOUT;
                if (poll(&p, 1, left) > 0) {
                        ssize_t r = recv(fd, buf, len, MSG_DONTWAIT);
                        if (r >= 0)
                                return r;
                        if (errno != EAGAIN && errno != EINTR)
                                return -errno;
                }
        }
}

static int connect_port(uint16_t port) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port   = htons(port)};
        int                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int                one = 1;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0)
                return -1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
                close(fd);
                return -1;
        }
        return fd;
}

static void close_reset(int fd) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(fd);
}

/* ------------------------------------------------------------- SERVER -- */

enum srv_mode {
        SRV_EXCHANGE, /* send 'payload' and half-close, meanwhile read all */
        SRV_ECHO,     /* write back what arrives; half-close at its end */
        SRV_STAMP,    /* stamp records: note arrivals and order, echo them */
        SRV_HALF,     /* read to the end, then send 'payload' and close */
        SRV_CLOSE,    /* close at once: an orderly end */
        SRV_RESET,    /* close at once with a reset */
        SRV_READ,     /* read to the end or an error, note which */
};

struct server;

/* One accepted connection and what its handler saw (read by the test
 * once the server's 'done' counts it). */
struct srv_conn {
        struct server *s;
        int            fd;
        pthread_t      thr;
        unsigned char *in;
        size_t         in_len;
        int            end_err; /* 0: an orderly end; else its errno */
        int64_t        t_end;   /* the peer's end read */
        int64_t        t_close; /* (CLOSE, HALF) our own end sent */
        long           recs, disorder;
        int64_t        min_up_ns, max_up_ns;
};

struct server {
        int                  lfd;
        uint16_t             port;
        enum srv_mode        mode;
        const unsigned char *payload;
        size_t               payload_len, in_cap;
        pthread_t            thr;
        bool                 running;
        atomic_bool          stop;
        atomic_int           accepted, done;
        struct srv_conn      conns[MAX_CONNS];
};

/* The stamp records of the delay test: the client's send time, then the
 * server's arrival time (which it fills in when echoing). */
struct stamp {
        uint64_t seq;
        int64_t  sent_ns, srv_ns;
};

static void blocking_timeouts(int fd) {
        struct timeval tv = {IO_TIMEOUT_MS / 1000, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static bool send_all(int fd, const void *buf, size_t len) {
        const unsigned char *p = buf;
        while (len) {
                ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                p += w;
                len -= (size_t)w;
        }
        return true;
}

/* Read until the end or an error into c->end_err and c->t_end, handing
 * each piece to 'each' (may be NULL). */
static void read_to_end(struct srv_conn *c,
                        void (*each)(struct srv_conn *, unsigned char *,
                                     size_t)) {
        unsigned char buf[65536];
        for (;;) {
                ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        c->end_err = r < 0 ? errno : 0;
                        c->t_end   = wan_now_ns();
                        return;
                }
                if (each)
                        each(c, buf, (size_t)r);
                else
                        c->in_len += (size_t)r;
        }
}

static void echo_piece(struct srv_conn *c, unsigned char *b, size_t n) {
        c->in_len += n;
        if (!send_all(c->fd, b, n))
                c->end_err = errno ? errno : EPIPE;
}

/* Stamp records may arrive split or merged: reassemble, note each one's
 * arrival, check the order, echo it with the arrival time. */
static void stamp_piece(struct srv_conn *c, unsigned char *b, size_t n) {
        static _Thread_local unsigned char part[sizeof(struct stamp)];
        static _Thread_local size_t        have;
        int64_t                            now = wan_now_ns();

        while (n) {
                size_t take = sizeof(part) - have < n ? sizeof(part) - have : n;
                memcpy(part + have, b, take);
                have += take;
                b += take;
                n -= take;
                if (have < sizeof(part))
                        break;
                have = 0;
                struct stamp st;
                memcpy(&st, part, sizeof(st));
                int64_t up = now - st.sent_ns;
                if (st.seq != (uint64_t)c->recs)
                        c->disorder++;
                if (!c->recs || up < c->min_up_ns)
                        c->min_up_ns = up;
                if (!c->recs || up > c->max_up_ns)
                        c->max_up_ns = up;
                c->recs++;
                st.srv_ns = now;
                if (!send_all(c->fd, &st, sizeof(st)))
                        c->end_err = errno ? errno : EPIPE;
        }
}

static void *srv_conn_main(void *arg) {
        struct srv_conn *c = arg;
        struct server   *s = c->s;

        switch (s->mode) {
        case SRV_EXCHANGE: {
                struct xfer x = {.fd      = c->fd,
                                 .out     = s->payload,
                                 .out_len = s->payload_len,
                                 .in      = c->in,
                                 .in_cap  = s->in_cap};
                int rc = xfers_run(&x, 1, harness_now_ms() + IO_TIMEOUT_MS,
                                   &s->stop);
                c->in_len  = x.in_len;
                c->end_err = rc ? rc : x.err;
                c->t_end   = x.t_eof;
                break;
        }
        case SRV_ECHO:
        case SRV_STAMP:
                blocking_timeouts(c->fd);
                read_to_end(c, s->mode == SRV_ECHO ? echo_piece : stamp_piece);
                shutdown(c->fd, SHUT_WR);
                break;
        case SRV_HALF:
                blocking_timeouts(c->fd);
                read_to_end(c, NULL);
                if (!send_all(c->fd, s->payload, s->payload_len))
                        c->end_err = errno;
                c->t_close = wan_now_ns();
                shutdown(c->fd, SHUT_WR);
                break;
        case SRV_CLOSE:
                c->t_close = wan_now_ns();
                close(c->fd);
                c->fd = -1;
                break;
        case SRV_RESET:
                close_reset(c->fd);
                c->fd = -1;
                break;
        case SRV_READ:
                blocking_timeouts(c->fd);
                read_to_end(c, NULL);
                break;
        }
        atomic_fetch_add(&s->done, 1);
        return NULL;
}

static void *srv_main(void *arg) {
        struct server *s = arg;

        while (!atomic_load(&s->stop)) {
                struct pollfd p = {.fd = s->lfd, .events = POLLIN};
                int           n = atomic_load(&s->accepted), fd;
                if (poll(&p, 1, 20) <= 0)
                        continue;
                fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                if (n == MAX_CONNS) {
                        close(fd);
                        continue;
                }
                struct srv_conn *c = &s->conns[n];
                c->s               = s;
                c->fd              = fd;
                if (s->in_cap)
                        c->in = malloc(s->in_cap);
                if (pthread_create(&c->thr, NULL, srv_conn_main, c)) {
                        close(fd);
                        free(c->in);
                        c->in = NULL;
                        continue;
                }
                atomic_store(&s->accepted, n + 1);
        }
        return NULL;
}

/* A server on a free loopback port, its accept loop on a thread. */
static void server_start(struct server *s, enum srv_mode mode,
                         const unsigned char *payload, size_t payload_len,
                         size_t in_cap) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t          sl = sizeof(sa);

        memset(s, 0, sizeof(*s));
        s->mode            = mode;
        s->payload         = payload;
        s->payload_len     = payload_len;
        s->in_cap          = in_cap;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s->lfd             = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s->lfd >= 0);
        assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(s->lfd, MAX_CONNS), 0);
        assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sa, &sl), 0);
        s->port = ntohs(sa.sin_port);
        assert_int_equal(pthread_create(&s->thr, NULL, srv_main, s), 0);
        s->running = true;
}

static void server_stop(struct server *s) {
        int n;

        if (!s->running)
                return;
        atomic_store(&s->stop, true);
        pthread_join(s->thr, NULL);
        n = atomic_load(&s->accepted);
        for (int i = 0; i < n; i++) {
                /* Unblock a handler stuck on a peer that never ends. */
                if (s->conns[i].fd >= 0)
                        shutdown(s->conns[i].fd, SHUT_RDWR);
                pthread_join(s->conns[i].thr, NULL);
                if (s->conns[i].fd >= 0)
                        close(s->conns[i].fd);
                free(s->conns[i].in);
        }
        close(s->lfd);
        s->running = false;
}

struct done_arg {
        struct server *s;
        int            want;
};

static bool server_done(void *arg) {
        struct done_arg *d = arg;
        return atomic_load(&d->s->done) >= d->want;
}

static bool server_accepted(void *arg) {
        return atomic_load(&((struct server *)arg)->accepted) > 0;
}

/* Wait until 'want' connections of 's' were handled to their end. */
static void server_wait(struct server *s, int want) {
        struct done_arg d = {s, want};
        if (!harness_wait_until(server_done, &d, IO_TIMEOUT_MS))
                fail_msg("the server handled %d of %d connections in %d ms",
                         atomic_load(&s->done), want, IO_TIMEOUT_MS);
}

/* ------------------------------------------------------------ FIXTURE -- */

#define MAX_SERVERS 6

struct fx {
        char            *dir;
        struct wan_proxy proxy;
        struct server    srv[MAX_SERVERS];
        unsigned char   *a, *b, *in;
        struct xfer     *x;
        int              nx;
        char             pairs[MAX_SERVERS][64];
        char             errstr[2048];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        if (!f || !(f->dir = harness_tmpdir_new("wan-proxy"))) {
                free(f);
                return -1;
        }
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;

        for (int i = 0; i < f->nx; i++)
                if (f->x[i].fd >= 0)
                        close(f->x[i].fd);
        wan_proxy_stop(&f->proxy);
        for (int i = 0; i < MAX_SERVERS; i++)
                server_stop(&f->srv[i]);
        free(f->x);
        free(f->a);
        free(f->b);
        free(f->in);
        harness_rmtree(f->dir);
        free(f->dir);
        free(f);
        return 0;
}

/* "0=127.0.0.1:PORT": a pair to 'port' on a free listener. */
static const char *pair_to(struct fx *f, int i, uint16_t port) {
        snprintf(f->pairs[i], sizeof(f->pairs[i]), "0=127.0.0.1:%u",
                 (unsigned)port);
        return f->pairs[i];
}

static void proxy_start(struct fx *f, const char *const *args) {
        if (wan_proxy_start(&f->proxy, f->dir, args, f->errstr,
                            sizeof(f->errstr)))
                fail_msg("%s", f->errstr);
}

/* Assert the proxy logged no aborted connection. */
static void assert_no_abort(struct fx *f) {
        char *log = harness_read_file(f->proxy.err, NULL);
        if (log && strstr(log, "aborted"))
                fail_msg("the proxy aborted a connection:\n%s", log);
        free(log);
}

/* -------------------------------------------------------------- TESTS -- */

/* 8 MiB of random bytes each way at once through a 256 KiB bound per
 * direction: every byte arrives, in order, both ways, and the proxy's
 * memory stays near the bound (it had to stop reading and let TCP hold
 * the senders back, for 32 times its bound). */
static void test_bytes_exact_both_ways(void **state) {
        struct fx   *f    = *state;
        const size_t size = 8u << 20, bound = 256u << 10;
        char         q[32];
        long         hwm0, hwm1;

        f->a  = random_bytes(size, 1);
        f->b  = random_bytes(size, 2);
        f->in = malloc(size);
        assert_non_null(f->a);
        assert_non_null(f->b);
        assert_non_null(f->in);
        server_start(&f->srv[0], SRV_EXCHANGE, f->b, size, size);
        snprintf(q, sizeof(q), "%zu", bound);
        const char *args[] = {"--rtt", "20", "--max-queued", q,
                              pair_to(f, 0, f->srv[0].port), NULL};
        proxy_start(f, args);
        hwm0 = bench_proc_hwm_kib(harness_proc_pid(f->proxy.proc));

        f->x  = calloc(1, sizeof(*f->x));
        f->nx = 1;
        f->x->fd = connect_port(f->proxy.ports[0]);
        assert_true(f->x->fd >= 0);
        f->x->out     = f->a;
        f->x->out_len = size;
        f->x->in      = f->in;
        f->x->in_cap  = size;
        assert_int_equal(xfers_run(f->x, 1, harness_now_ms() + IO_TIMEOUT_MS,
                                   NULL),
                         0);
        assert_int_equal(f->x->err, 0);
        assert_true(f->x->eof);
        assert_bytes_equal(f->in, f->x->in_len, f->b, size,
                           "upstream -> client");

        server_wait(&f->srv[0], 1);
        assert_int_equal(f->srv[0].conns[0].end_err, 0);
        assert_bytes_equal(f->srv[0].conns[0].in, f->srv[0].conns[0].in_len,
                           f->a, size, "client -> upstream");

        hwm1 = bench_proc_hwm_kib(harness_proc_pid(f->proxy.proc));
        print_message("# proxy peak RSS %ld KiB before, %ld KiB after "
                      "2 x %zu MiB (bound %zu KiB per direction)\n",
                      hwm0, hwm1, size >> 20, bound >> 10);
#ifdef WAN_ASAN
        print_message("# peak RSS not checked under AddressSanitizer\n");
#else
        assert_true(hwm0 > 0 && hwm1 > 0);
        /* Two directions at the bound, plus malloc's slack. */
        assert_in_range(hwm1 - hwm0, 0, 4096);
#endif
        assert_no_abort(f);
}

static int cmp_i64(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

/* Each direction's delay applies to every chunk on its own: stamped
 * records reach the server no sooner than the up delay, their echoes the
 * client no sooner than the down delay after the server sent them, in
 * order, and a paced stream is shifted by the delay, not stretched by it. */
static void test_delay_and_order(void **state) {
        struct fx        *f    = *state;
        const int64_t     up   = 40 * MS, down = 20 * MS;
        enum { ping = 3, stream = 200 };
        struct stamp      st;
        int64_t           min_rtt = INT64_MAX, max_rtt = 0, min_down = INT64_MAX;
        int64_t           rtts[ping + stream];
        int64_t           deadline, next;
        int               fd, sent = 0, got = 0, disorder = 0;
        unsigned char     part[sizeof(st)];
        size_t            have = 0;

        server_start(&f->srv[0], SRV_STAMP, NULL, 0, 0);
        const char *args[] = {"--up-delay", "40", "--down-delay", "20",
                              pair_to(f, 0, f->srv[0].port), NULL};
        proxy_start(f, args);
        fd = connect_port(f->proxy.ports[0]);
        assert_true(fd >= 0);
        f->x     = calloc(1, sizeof(*f->x));
        f->nx    = 1;
        f->x->fd = fd;

        /* A few pings one at a time, then a stream paced at 1 ms; echoes
         * are read as they come, the loop waking for the next send or
         * the next echo, whichever is first. */
        deadline = harness_now_ms() + IO_TIMEOUT_MS;
        next     = wan_now_ns();
        while (got < ping + stream && harness_now_ms() < deadline) {
                int64_t now = wan_now_ns();
                bool    may = sent < ping ? got == sent : sent < ping + stream;
                if (may && now >= next) {
                        memset(&st, 0, sizeof(st));
                        st.seq     = (uint64_t)sent;
                        st.sent_ns = wan_now_ns();
                        assert_true(send_all(fd, &st, sizeof(st)));
                        sent++;
                        next = st.sent_ns + 1 * MS;
                        continue;
                }
                int wait_ms = may ? (int)((next - now) / MS) : 50;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, wait_ms) <= 0)
                        continue;
                ssize_t r = recv(fd, part + have, sizeof(part) - have,
                                 MSG_DONTWAIT);
                assert_true(r > 0);
                have += (size_t)r;
                if (have < sizeof(part))
                        continue;
                have = 0;
                now  = wan_now_ns();
                memcpy(&st, part, sizeof(st));
                if (st.seq != (uint64_t)got)
                        disorder++;
                int64_t rtt = now - st.sent_ns, d = now - st.srv_ns;
                rtts[got++] = rtt;
                min_rtt     = rtt < min_rtt ? rtt : min_rtt;
                max_rtt     = rtt > max_rtt ? rtt : max_rtt;
                min_down    = d < min_down ? d : min_down;
        }
        assert_int_equal(got, ping + stream);
        qsort(rtts, (size_t)got, sizeof(rtts[0]), cmp_i64);
        print_message("# round trip min %.1f median %.1f max %.1f ms "
                      "(configured %.0f); down min %.1f ms\n",
                      (double)min_rtt / MS, (double)rtts[got / 2] / MS,
                      (double)max_rtt / MS, (double)(up + down) / MS,
                      (double)min_down / MS);
        assert_int_equal(disorder, 0);
        assert_true(min_rtt >= up + down);
        assert_true(min_rtt < up + down + SLACK_NS);
        assert_true(rtts[got / 2] < up + down + MEDIAN_NS);
        /* 200 records 1 ms apart: delays served one after the other
         * would take 200 x 60 ms. */
        assert_true(max_rtt < up + down + SPREAD_NS);
        assert_true(min_down >= down);

        /* Our end: the server echoes it, so its end reaches us. */
        shutdown(fd, SHUT_WR);
        assert_int_equal(recv_until(fd, part, sizeof(part),
                                    harness_now_ms() + IO_TIMEOUT_MS),
                         0);
        server_wait(&f->srv[0], 1);
        const struct srv_conn *c = &f->srv[0].conns[0];
        print_message("# up min %.1f max %.1f ms (configured %.0f)\n",
                      (double)c->min_up_ns / MS, (double)c->max_up_ns / MS,
                      (double)up / MS);
        assert_int_equal(c->end_err, 0);
        assert_int_equal(c->recs, ping + stream);
        assert_int_equal(c->disorder, 0);
        assert_true(c->min_up_ns >= up);
        assert_true(c->min_up_ns < up + SLACK_NS);
        assert_no_abort(f);
}

/* A half-close travels like data, delayed, and leaves the other direction
 * open: the server reads our end no sooner than the up delay after we
 * sent it, still answers 1 MiB, and its close reaches us after that, no
 * sooner than the down delay. */
static void test_half_close(void **state) {
        struct fx    *f     = *state;
        const size_t  size  = 1u << 20;
        const int64_t oneway = 20 * MS;
        static const unsigned char hello[] = "hello";

        f->b  = random_bytes(size, 3);
        f->in = malloc(size);
        server_start(&f->srv[0], SRV_HALF, f->b, size, 0);
        const char *args[] = {"--rtt", "40", pair_to(f, 0, f->srv[0].port),
                              NULL};
        proxy_start(f, args);
        f->x          = calloc(1, sizeof(*f->x));
        f->nx         = 1;
        f->x->fd      = connect_port(f->proxy.ports[0]);
        f->x->out     = hello;
        f->x->out_len = 5;
        f->x->in      = f->in;
        f->x->in_cap  = size;
        assert_true(f->x->fd >= 0);
        assert_int_equal(xfers_run(f->x, 1, harness_now_ms() + IO_TIMEOUT_MS,
                                   NULL),
                         0);
        assert_int_equal(f->x->err, 0);
        assert_bytes_equal(f->in, f->x->in_len, f->b, size,
                           "answer after the client's half-close");

        server_wait(&f->srv[0], 1);
        const struct srv_conn *c = &f->srv[0].conns[0];
        assert_int_equal(c->end_err, 0);
        assert_int_equal(c->in_len, 5);
        print_message("# client's end reached the server after %.1f ms, the "
                      "server's end the client after %.1f ms\n",
                      (double)(c->t_end - f->x->t_shut) / MS,
                      (double)(f->x->t_eof - c->t_close) / MS);
        assert_true(c->t_end - f->x->t_shut >= oneway);
        assert_true(f->x->t_eof - c->t_close >= oneway);
        assert_no_abort(f);
}

/* Ends and resets, one proxy with a pair for each case: an upstream that
 * closes reaches the client as an orderly end (delayed), an upstream
 * reset as a reset, a client reset the upstream as a reset, an upstream
 * that refuses the connection as a reset; and the proxy serves on. */
static void test_close_and_reset(void **state) {
        struct fx         *f = *state;
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t          sl = sizeof(sa);
        unsigned char      buf[16];
        int                dead, fd;
        int64_t            t0;

        server_start(&f->srv[0], SRV_CLOSE, NULL, 0, 0);
        server_start(&f->srv[1], SRV_RESET, NULL, 0, 0);
        server_start(&f->srv[2], SRV_READ, NULL, 0, 0);
        server_start(&f->srv[3], SRV_ECHO, NULL, 0, 0);
        /* A port bound but not listening: connections to it are refused. */
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        dead               = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(dead, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(dead, (struct sockaddr *)&sa, &sl), 0);
        const char *args[] = {"--rtt", "40",
                              pair_to(f, 0, f->srv[0].port),
                              pair_to(f, 1, f->srv[1].port),
                              pair_to(f, 2, f->srv[2].port),
                              pair_to(f, 3, ntohs(sa.sin_port)),
                              pair_to(f, 4, f->srv[3].port), NULL};
        proxy_start(f, args);
        assert_int_equal(f->proxy.nports, 5);

        /* The upstream closes: an orderly end, a one-way delay later. */
        fd = connect_port(f->proxy.ports[0]);
        assert_true(fd >= 0);
        assert_int_equal(recv_until(fd, buf, sizeof(buf),
                                    harness_now_ms() + IO_TIMEOUT_MS),
                         0);
        t0 = wan_now_ns();
        server_wait(&f->srv[0], 1);
        print_message("# upstream's close reached the client after %.1f ms\n",
                      (double)(t0 - f->srv[0].conns[0].t_close) / MS);
        assert_true(t0 - f->srv[0].conns[0].t_close >= 20 * MS);
        close(fd);

        /* The upstream resets: so does the client's connection. */
        fd = connect_port(f->proxy.ports[1]);
        assert_true(fd >= 0);
        assert_int_equal(recv_until(fd, buf, sizeof(buf),
                                    harness_now_ms() + IO_TIMEOUT_MS),
                         -ECONNRESET);
        close(fd);

        /* The client resets: so does the upstream's connection. */
        fd = connect_port(f->proxy.ports[2]);
        assert_true(fd >= 0);
        assert_true(send_all(fd, "x", 1));
        /* A reset means something upstream only once the proxy connected
         * there: wait for the server to accept. */
        assert_true(harness_wait_until(server_accepted, &f->srv[2],
                                       IO_TIMEOUT_MS));
        close_reset(fd);
        server_wait(&f->srv[2], 1);
        assert_int_equal(f->srv[2].conns[0].end_err, ECONNRESET);

        /* The upstream refuses: the client's connection is reset. */
        fd = connect_port(f->proxy.ports[3]);
        assert_true(fd >= 0);
        assert_int_equal(recv_until(fd, buf, sizeof(buf),
                                    harness_now_ms() + IO_TIMEOUT_MS),
                         -ECONNRESET);
        close(fd);
        close(dead);

        /* And the proxy serves on. */
        fd = connect_port(f->proxy.ports[4]);
        assert_true(fd >= 0);
        assert_true(send_all(fd, "ping", 4));
        assert_int_equal(recv_until(fd, buf, 4,
                                    harness_now_ms() + IO_TIMEOUT_MS),
                         4);
        assert_memory_equal(buf, "ping", 4);
        close(fd);
        assert_int_equal(harness_proc_wait(f->proxy.proc, 0, NULL),
                         AAGW_ERR_TIMEOUT);
}

/* 100 connections at once, 128 KiB each way on every one, each with its
 * own bytes: every connection gets exactly its own echo. */
static void test_many_connections(void **state) {
        struct fx   *f = *state;
        const int    n = 100;
        const size_t size = 128u << 10;

        server_start(&f->srv[0], SRV_ECHO, NULL, 0, 0);
        const char *args[] = {"--rtt", "10", pair_to(f, 0, f->srv[0].port),
                              NULL};
        proxy_start(f, args);
        f->a  = malloc((size_t)n * size);
        f->in = malloc((size_t)n * size);
        f->x  = calloc((size_t)n, sizeof(*f->x));
        assert_non_null(f->a);
        assert_non_null(f->in);
        assert_non_null(f->x);
        for (int i = 0; i < n; i++)
                f->x[i].fd = -1;
        f->nx = n;
        for (int i = 0; i < n; i++) {
                unsigned char *p = random_bytes(size, 100 + (uint64_t)i);
                assert_non_null(p);
                memcpy(f->a + (size_t)i * size, p, size);
                free(p);
                f->x[i].fd      = connect_port(f->proxy.ports[0]);
                f->x[i].out     = f->a + (size_t)i * size;
                f->x[i].out_len = size;
                f->x[i].in      = f->in + (size_t)i * size;
                f->x[i].in_cap  = size;
                assert_true(f->x[i].fd >= 0);
        }
        assert_int_equal(xfers_run(f->x, n, harness_now_ms() + IO_TIMEOUT_MS,
                                   NULL),
                         0);
        for (int i = 0; i < n; i++) {
                char what[64];
                snprintf(what, sizeof(what), "connection %d's echo", i);
                assert_int_equal(f->x[i].err, 0);
                assert_bytes_equal(f->x[i].in, f->x[i].in_len, f->x[i].out,
                                   size, what);
        }
        server_wait(&f->srv[0], n);
        for (int i = 0; i < n; i++) {
                assert_int_equal(f->srv[0].conns[i].end_err, 0);
                assert_int_equal(f->srv[0].conns[i].in_len, size);
        }
        assert_no_abort(f);
}

/* SIGTERM with connections open and bytes in flight: exit 0 at once, and
 * the clients see their connections end instead of hanging. */
static void test_sigterm(void **state) {
        struct fx    *f = *state;
        unsigned char buf[64];
        int           fds[3], status = 0;
        int64_t       t0;

        server_start(&f->srv[0], SRV_ECHO, NULL, 0, 0);
        const char *args[] = {"--rtt", "2000", pair_to(f, 0, f->srv[0].port),
                              NULL};
        proxy_start(f, args);
        for (int i = 0; i < 3; i++) {
                fds[i] = connect_port(f->proxy.ports[0]);
                assert_true(fds[i] >= 0);
                assert_true(send_all(fds[i], "held for a second", 17));
        }
        t0 = harness_now_ms();
        assert_int_equal(harness_proc_signal(f->proxy.proc, SIGTERM), 0);
        assert_int_equal(harness_proc_wait(f->proxy.proc, WAN_STOP_TIMEOUT_MS,
                                           &status),
                         AAGW_OK);
        print_message("# exited %d in %" PRId64 " ms\n",
                      harness_exit_code(status), harness_now_ms() - t0);
        assert_int_equal(harness_exit_code(status), 0);
        for (int i = 0; i < 3; i++) {
                ssize_t r = recv_until(fds[i], buf, sizeof(buf),
                                       harness_now_ms() + IO_TIMEOUT_MS);
                /* Ended, one way or the other; nothing was echoed yet. */
                assert_true(r == 0 || r == -ECONNRESET);
                close(fds[i]);
        }
}

/* Bad input is refused with a reason and exit 2; a port in use with the
 * port and the system's reason and exit 1. */
static void test_errors(void **state) {
        struct fx *f   = *state;
        const char *bin = getenv("WAN_PROXY");
        struct {
                const char *args[6];
                int         code;
                const char *says;
        } cases[] = {
            {{NULL}, 2, "name at least one LISTEN=UPSTREAM"},
            {{"0.0.0.0:9999=127.0.0.1:1", NULL}, 2,
             "listen address '0.0.0.0:9999': only 127.0.0.1 is allowed"},
            {{"x=127.0.0.1:1", NULL}, 2, "expected [127.0.0.1:]PORT"},
            {{"0=127.0.0.1", NULL}, 2, "upstream '127.0.0.1': expected "
                                       "HOST:PORT"},
            {{"0=127.0.0.1:kafka", NULL}, 2, "upstream '127.0.0.1:kafka'"},
            {{"0", NULL}, 2, "'0': expected LISTEN=UPSTREAM"},
            {{"--rtt", "-1", "0=127.0.0.1:1", NULL}, 2,
             "--rtt: expected milliseconds"},
            {{"--rtt", "10", "--up-delay", "5", "0=127.0.0.1:1", NULL}, 2,
             "exclude each other"},
            {{"--max-queued", "12", "0=127.0.0.1:1", NULL}, 2,
             "--max-queued"},
            {{"--bogus", NULL}, 2, "unknown option --bogus"},
            {{"-h", NULL}, 0, "Usage: wan-proxy"},
        };
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t          sl = sizeof(sa);
        char               pair[64], want[128];
        int                busy;

        assert_non_null(bin);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char      *argv[8] = {bin};
                harness_output_t o       = {0};
                for (int k = 0; cases[i].args[k]; k++)
                        argv[k + 1] = cases[i].args[k];
                assert_int_equal(harness_run(argv, NULL, 0, 10000, &o,
                                             f->errstr, sizeof(f->errstr)),
                                 AAGW_OK);
                if (harness_exit_code(o.status) != cases[i].code ||
                    !strstr(cases[i].code ? o.err : o.out, cases[i].says))
                        fail_msg("case %zu: exit %d, stderr '%s', want exit "
                                 "%d and '%s'",
                                 i, harness_exit_code(o.status), o.err,
                                 cases[i].code, cases[i].says);
                harness_output_deinit(&o);
        }

        /* A port another socket listens on. */
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        busy               = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(busy, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(busy, 1), 0);
        assert_int_equal(getsockname(busy, (struct sockaddr *)&sa, &sl), 0);
        snprintf(pair, sizeof(pair), "%u=127.0.0.1:1",
                 (unsigned)ntohs(sa.sin_port));
        snprintf(want, sizeof(want),
                 "listen on 127.0.0.1:%u: Address already in use",
                 (unsigned)ntohs(sa.sin_port));
        {
                const char      *argv[] = {bin, pair, NULL};
                harness_output_t o      = {0};
                assert_int_equal(harness_run(argv, NULL, 0, 10000, &o,
                                             f->errstr, sizeof(f->errstr)),
                                 AAGW_OK);
                close(busy);
                if (harness_exit_code(o.status) != 1 || !strstr(o.err, want))
                        fail_msg("port in use: exit %d, stderr '%s'",
                                 harness_exit_code(o.status), o.err);
                harness_output_deinit(&o);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_bytes_exact_both_ways, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_delay_and_order, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_half_close, setup, teardown),
            cmocka_unit_test_setup_teardown(test_close_and_reset, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_many_connections, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_sigterm, setup, teardown),
            cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests_name("wan-proxy", tests, NULL, NULL);
}
