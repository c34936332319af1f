/*
 * tests/wan/wan_proxy.c: a TCP proxy that puts a WAN's delay between a
 * client and a server on one machine, for tests and benchmarks.
 *
 *   wan-proxy [--rtt MS | --up-delay MS --down-delay MS]
 *             [--max-queued BYTES] [--ready-file F] [-v]
 *             LISTEN=UPSTREAM...
 *
 * Each LISTEN=UPSTREAM pair is a listener on 127.0.0.1 (LISTEN is PORT or
 * 127.0.0.1:PORT; port 0 takes a free one) whose connections are passed
 * on to UPSTREAM (HOST:PORT).  One process serves many pairs, so one
 * proxy stands in front of every broker of a cluster.
 *
 * What it promises, per connection:
 *
 *   - Delay.  Every chunk one read() returned is written on no earlier
 *     than the direction's delay after it was read: --up-delay for client
 *     -> upstream, --down-delay for upstream -> client.  --rtt MS is the
 *     round trip, split evenly (MS/2 each way): a request and its answer
 *     together take at least MS longer than without the proxy.  Chunks
 *     are timed one by one, so a steady stream flows at its own rate,
 *     shifted by the delay; there is no bandwidth cap.
 *   - Order.  Chunks leave in the order they were read, per direction.
 *   - Close.  An end of stream (the peer's FIN, a half-close) travels like
 *     data: it is passed on (shutdown(SHUT_WR)) after the chunks read
 *     before it, delayed as they are; the other direction keeps flowing.
 *     Once both directions passed their end, both sockets are closed.  A
 *     reset or an error on either socket, or an upstream that refuses the
 *     connection, aborts both at once: the other peer gets a reset (not
 *     delayed).
 *   - Bounded memory.  At most --max-queued bytes (data plus a small
 *     header per chunk) wait per direction; beyond that the proxy stops
 *     reading that side, and TCP's flow control holds the sender back.
 *     That bound is also the most a direction can have in flight, so it
 *     caps throughput at BYTES / delay (16 MiB / 50 ms = 320 MiB/s by
 *     default): far above what brokers on this machine move.
 *
 * Not emulated: the extra round trip of a TCP handshake (the client's
 * connect() succeeds at once; the first bytes pay the delay), loss,
 * jitter, and a real WAN's window-limited throughput.
 *
 * One thread, epoll; level-triggered.  Timing from CLOCK_MONOTONIC; a
 * timerfd armed at the earliest due chunk wakes the loop.  SIGTERM or
 * SIGINT closes every connection and exits 0.
 *
 * Exit status: 0 stopped by a signal, 1 runtime failure (a listen port in
 * use, ...), 2 usage (a bad address, a bad option).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

#define PROG "wan-proxy"
#define MAX_PAIRS 64
#define READ_SIZE 65536     /* one read(): at most one chunk this big */
#define READS_PER_EVENT 16  /* then the other sockets get their turn */
#define DEFAULT_MAX_QUEUED ((size_t)16 << 20)
#define MAX_DELAY_MS 600000.0
#define LISTEN_BACKLOG 512

/* --------------------------------------------------------------- TYPES -- */

/* What an epoll event points at: every registered object starts with
 * one of these. */
enum handle_kind { H_LISTENER, H_CLIENT, H_UPSTREAM, H_SIGNAL, H_TIMER };
struct handle {
        enum handle_kind kind;
};

/* One read()'s bytes, or (len 0) the end of the stream. */
struct chunk {
        struct chunk *next;
        int64_t       due_ns; /* monotonic: not written before */
        size_t        len, off;
        unsigned char data[];
};

/* The memory a chunk of 'len' bytes counts against --max-queued. */
#define CHUNK_COST(len) (sizeof(struct chunk) + (len))

struct pair {
        struct handle           h; /* H_LISTENER */
        int                     fd;
        bool                    paused; /* out of fds: not accepting */
        uint16_t                port;   /* bound */
        const char             *listen_spec, *upstream_spec; /* argv */
        struct sockaddr_storage up_addr;
        socklen_t               up_len;
};

struct conn;

struct side {
        struct handle h; /* H_CLIENT or H_UPSTREAM */
        struct conn  *conn;
        int           fd;
        uint32_t      events; /* registered with epoll; 0: not */
        bool          rd_eof; /* read() returned 0 */
        bool          hup;    /* EPOLLHUP seen: only reads still matter */
};

/* One direction: chunks read from 'src' waiting for their time to be
 * written to 'dst'. */
struct dir {
        struct side  *src, *dst;
        struct chunk *head, *tail;
        size_t        queued;   /* CHUNK_COST of the chunks held */
        int64_t       delay_ns;
        bool          blocked;  /* dst refused a due chunk: wait EPOLLOUT */
        bool          fin_sent; /* the end of stream was passed on */
        uint64_t      bytes;    /* written to dst */
};

struct conn {
        struct conn *next, *prev;
        struct pair *pair;
        uint64_t     id;
        struct side  cli, up;
        struct dir   c2u, u2c;
        bool         connecting; /* upstream connect() in progress */
        bool         dead;       /* closed; freed after the event batch */
};

struct proxy {
        int           ep, sfd, tfd;
        struct handle sig_h, timer_h;
        struct pair   pairs[MAX_PAIRS];
        int           npairs;
        struct conn  *conns, *graveyard;
        uint64_t      next_id, opened, closed, aborted;
        uint64_t      bytes_up, bytes_down;
        int64_t       up_ns, down_ns;
        size_t        max_queued;
        int64_t       armed_ns; /* timerfd's expiry; 0 disarmed */
        int           paused;   /* listeners out of fds */
        bool          verbose, stop;
        unsigned char buf[READ_SIZE];
};

/* ------------------------------------------------------------- HELPERS -- */

static int64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
        char    line[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s: %s\n", PROG, line);
}

/* Parse a delay of 0..MAX_DELAY_MS milliseconds (fractions allowed, so
 * that an odd round trip splits evenly) into nanoseconds. */
static bool parse_ms(const char *s, int64_t *ns) {
        char  *end;
        double v;

        errno = 0;
        v     = strtod(s, &end);
        if (errno || end == s || *end || !isfinite(v) || v < 0 ||
            v > MAX_DELAY_MS)
                return false;
        *ns = (int64_t)llround(v * 1e6);
        return true;
}

/* Parse "[127.0.0.1:]PORT" into 'port'.  Any other host is refused: the
 * proxy is a test tool and must not listen beyond the machine. */
static bool parse_listen(const char *s, uint16_t *port, char *errstr,
                         size_t errstr_size) {
        const char   *p = s;
        char         *end;
        unsigned long v;

        if (!strncmp(p, "127.0.0.1:", 10))
                p += 10;
        else if (strchr(p, ':')) {
                snprintf(errstr, errstr_size,
                         "listen address '%s': only 127.0.0.1 is allowed", s);
                return false;
        }
        errno = 0;
        v     = strtoul(p, &end, 10);
        if (errno || end == p || *end || *p == '-' || *p == '+' ||
            v > 65535) {
                snprintf(errstr, errstr_size,
                         "listen address '%s': expected [127.0.0.1:]PORT", s);
                return false;
        }
        *port = (uint16_t)v;
        return true;
}

/* Resolve "HOST:PORT" ("[V6]:PORT" too) once, at start. */
static bool parse_upstream(const char *s, struct sockaddr_storage *ss,
                           socklen_t *len, char *errstr, size_t errstr_size) {
        struct addrinfo hints = {0}, *res = NULL;
        char            host[256];
        const char     *colon = strrchr(s, ':'), *h = s;
        size_t          hl;
        int             rc;

        if (!colon || colon == s || !colon[1]) {
                snprintf(errstr, errstr_size,
                         "upstream '%s': expected HOST:PORT", s);
                return false;
        }
        hl = (size_t)(colon - s);
        if (*h == '[' && hl >= 2 && colon[-1] == ']') {
                h++;
                hl -= 2;
        }
        if (hl >= sizeof(host)) {
                snprintf(errstr, errstr_size, "upstream '%s': host too long",
                         s);
                return false;
        }
        memcpy(host, h, hl);
        host[hl]         = '\0';
        hints.ai_family   = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags    = AI_NUMERICSERV;
        rc = getaddrinfo(host, colon + 1, &hints, &res);
        if (rc) {
                snprintf(errstr, errstr_size, "upstream '%s': %s", s,
                         gai_strerror(rc));
                return false;
        }
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
        return true;
}

static void set_nodelay(int fd) {
        int one = 1;
        /* Small requests go out at once: Nagle's wait would add its own
         * delay to the one we are asked for. */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Close 'fd' so that the peer gets a reset, not an orderly end. */
static void close_reset(int fd) {
        struct linger lg = {1, 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(fd);
}

/* --------------------------------------------------------- CONNECTIONS -- */

static void set_events(struct proxy *px, struct side *s, uint32_t want) {
        struct epoll_event ev = {.events = want, .data.ptr = &s->h};
        int                op;

        if (want == s->events)
                return;
        op = !want ? EPOLL_CTL_DEL : s->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
        if (epoll_ctl(px->ep, op, s->fd, &ev) == 0 || op == EPOLL_CTL_DEL)
                s->events = want;
        else
                logf_("conn %" PRIu64 ": epoll_ctl: %s", s->conn->id,
                      strerror(errno));
}

static void dir_free_chunks(struct dir *d) {
        struct chunk *c = d->head, *n;
        for (; c; c = n) {
                n = c->next;
                free(c);
        }
        d->head = d->tail = NULL;
        d->queued         = 0;
}

static void listeners_resume(struct proxy *px);

/* Close both sockets and retire 'c' (freed after the current batch of
 * events, which may still point at it).  With 'reset', both peers get a
 * reset; 'why' (NULL: an expected end) is logged. */
static void conn_close(struct proxy *px, struct conn *c, bool reset,
                       const char *why) {
        if (c->dead)
                return;
        if (why)
                logf_("conn %" PRIu64 " (%s -> %s) aborted: %s", c->id,
                      c->pair->listen_spec, c->pair->upstream_spec, why);
        else if (px->verbose)
                logf_("conn %" PRIu64 " %s: %" PRIu64 " bytes up, %" PRIu64
                      " down",
                      c->id, reset ? "reset" : "closed", c->c2u.bytes,
                      c->u2c.bytes);
        if (reset) {
                close_reset(c->cli.fd);
                close_reset(c->up.fd);
        } else {
                close(c->cli.fd);
                close(c->up.fd);
        }
        c->cli.fd = c->up.fd = -1;
        dir_free_chunks(&c->c2u);
        dir_free_chunks(&c->u2c);
        px->bytes_up += c->c2u.bytes;
        px->bytes_down += c->u2c.bytes;
        if (reset)
                px->aborted++;
        else
                px->closed++;
        c->dead = true;
        if (c->prev)
                c->prev->next = c->next;
        else
                px->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next       = px->graveyard;
        px->graveyard = c;
        listeners_resume(px);
}

static void conn_abort_errno(struct proxy *px, struct conn *c,
                             const char *what, int err) {
        char why[256];
        snprintf(why, sizeof(why), "%s: %s", what, strerror(err));
        conn_close(px, c, true, why);
}

static void dir_init(struct dir *d, struct side *src, struct side *dst,
                     int64_t delay_ns) {
        memset(d, 0, sizeof(*d));
        d->src      = src;
        d->dst      = dst;
        d->delay_ns = delay_ns;
}

/* A new client on 'p': connect to its upstream (without waiting). */
static void conn_new(struct proxy *px, struct pair *p, int fd) {
        struct conn *c = calloc(1, sizeof(*c));
        int          ufd;

        if (!c) {
                logf_("%s: out of memory; connection dropped", p->listen_spec);
                close_reset(fd);
                return;
        }
        c->pair      = p;
        c->id        = ++px->next_id;
        c->cli.h.kind = H_CLIENT;
        c->cli.conn  = c;
        c->cli.fd    = fd;
        c->up.h.kind = H_UPSTREAM;
        c->up.conn   = c;
        dir_init(&c->c2u, &c->cli, &c->up, px->up_ns);
        dir_init(&c->u2c, &c->up, &c->cli, px->down_ns);
        set_nodelay(fd);
        ufd = socket(p->up_addr.ss_family,
                     SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        c->up.fd = ufd;
        c->next  = px->conns;
        if (px->conns)
                px->conns->prev = c;
        px->conns = c;
        px->opened++;
        if (ufd < 0) {
                conn_abort_errno(px, c, "upstream socket", errno);
                return;
        }
        set_nodelay(ufd);
        if (connect(ufd, (struct sockaddr *)&p->up_addr, p->up_len) < 0) {
                if (errno != EINPROGRESS) {
                        conn_abort_errno(px, c, "connect to upstream", errno);
                        return;
                }
                c->connecting = true;
        }
        if (px->verbose)
                logf_("conn %" PRIu64 " opened: %s -> %s", c->id,
                      p->listen_spec, p->upstream_spec);
}

/* Read what 'd->src' has, as chunks due after the delay, while the
 * direction has room. */
static void dir_read(struct proxy *px, struct conn *c, struct dir *d) {
        for (int k = 0; k < READS_PER_EVENT && !d->src->rd_eof &&
                        d->queued < px->max_queued;
             k++) {
                size_t        room = px->max_queued - d->queued;
                struct chunk *ch;
                ssize_t       r;

                room = room > CHUNK_COST(0) ? room - CHUNK_COST(0) : 1;
                r    = recv(d->src->fd, px->buf,
                            room < sizeof(px->buf) ? room : sizeof(px->buf), 0);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                conn_abort_errno(px, c,
                                                 d->src == &c->cli
                                                     ? "read from client"
                                                     : "read from upstream",
                                                 errno);
                        return;
                }
                ch = malloc(CHUNK_COST((size_t)r));
                if (!ch) {
                        conn_close(px, c, true, "out of memory");
                        return;
                }
                ch->next   = NULL;
                ch->len    = (size_t)r;
                ch->off    = 0;
                ch->due_ns = now_ns() + d->delay_ns;
                memcpy(ch->data, px->buf, (size_t)r);
                if (d->tail)
                        d->tail->next = ch;
                else
                        d->head = ch;
                d->tail = ch;
                d->queued += CHUNK_COST((size_t)r);
                if (!r)
                        d->src->rd_eof = true; /* passed on as a chunk */
        }
}

/* Write the chunks of 'd' that are due by 'now', in order, until the
 * destination's socket is full.  @returns -1 if 'c' was closed. */
static int dir_write(struct proxy *px, struct conn *c, struct dir *d,
                     int64_t now) {
        struct chunk *ch;

        while (!d->blocked && (ch = d->head) && ch->due_ns <= now) {
                if (!ch->len) {
                        /* The peer's end of stream, after everything
                         * read before it.  shutdown() can fail on a
                         * socket the other end already reset; the reset
                         * shows as an error on its own. */
                        (void)shutdown(d->dst->fd, SHUT_WR);
                        d->fin_sent = true;
                } else {
                        ssize_t w = send(d->dst->fd, ch->data + ch->off,
                                         ch->len - ch->off, MSG_NOSIGNAL);
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                        d->blocked = true;
                                        break;
                                }
                                if ((errno == EPIPE || errno == ECONNRESET) &&
                                    d->dst->rd_eof) {
                                        /* The peer ended and closed with
                                         * bytes still on their way to it,
                                         * as clients do when they stop:
                                         * its kernel answers them with a
                                         * reset, which goes on to the
                                         * other side as it would over a
                                         * real WAN.  Not worth a line. */
                                        if (px->verbose)
                                                logf_("conn %" PRIu64
                                                      ": %s closed with bytes "
                                                      "in flight to it",
                                                      c->id,
                                                      d->dst == &c->cli
                                                          ? "client"
                                                          : "upstream");
                                        conn_close(px, c, true, NULL);
                                        return -1;
                                }
                                conn_abort_errno(px, c,
                                                 d->dst == &c->cli
                                                     ? "write to client"
                                                     : "write to upstream",
                                                 errno);
                                return -1;
                        }
                        ch->off += (size_t)w;
                        d->bytes += (uint64_t)w;
                        if (ch->off < ch->len) {
                                d->blocked = true; /* the socket is full */
                                break;
                        }
                }
                d->head = ch->next;
                if (!d->head)
                        d->tail = NULL;
                d->queued -= CHUNK_COST(ch->len);
                free(ch);
        }
        return 0;
}

/* Register what each socket of 'c' waits for now. */
static void conn_interest(struct proxy *px, struct conn *c) {
        uint32_t cli = 0, up = 0;

        if (!c->cli.rd_eof && c->c2u.queued < px->max_queued)
                cli |= EPOLLIN;
        if (c->u2c.blocked)
                cli |= EPOLLOUT;
        if (c->connecting) {
                up = EPOLLOUT;
        } else {
                if (!c->up.rd_eof && c->u2c.queued < px->max_queued)
                        up |= EPOLLIN;
                if (c->c2u.blocked)
                        up |= EPOLLOUT;
        }
        /* A hung-up socket (its peer's end read, ours shut) reports
         * EPOLLHUP for as long as it is registered: keep it out unless
         * there is something left to read. */
        if (c->cli.hup && !(cli & EPOLLIN))
                cli = 0;
        if (c->up.hup && !(up & EPOLLIN))
                up = 0;
        set_events(px, &c->cli, cli);
        set_events(px, &c->up, up);
}

/* Release what is due, close 'c' once both ends were passed on, update
 * its interest; lower '*next' to its earliest chunk still waiting for
 * its time. */
static void conn_pump(struct proxy *px, struct conn *c, int64_t now,
                      int64_t *next) {
        struct dir *dirs[2] = {&c->c2u, &c->u2c};

        for (int i = 0; i < 2; i++) {
                if (dirs[i] == &c->c2u && c->connecting)
                        continue;
                if (dir_write(px, c, dirs[i], now))
                        return;
        }
        if (c->c2u.fin_sent && c->u2c.fin_sent) {
                conn_close(px, c, false, NULL);
                return;
        }
        conn_interest(px, c);
        for (int i = 0; i < 2; i++) {
                struct chunk *h = dirs[i]->head;
                if (h && !dirs[i]->blocked && h->due_ns > now &&
                    (!*next || h->due_ns < *next))
                        *next = h->due_ns;
        }
}

/* An event on one of 'c''s sockets. */
static void side_event(struct proxy *px, struct side *s, uint32_t ev) {
        struct conn *c = s->conn;

        if (c->dead)
                return;
        if (s == &c->up && c->connecting) {
                int       err = 0;
                socklen_t len = sizeof(err);
                if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                        err = errno;
                if (err) {
                        conn_abort_errno(px, c, "connect to upstream", err);
                        return;
                }
                if (!(ev & EPOLLOUT))
                        return;
                c->connecting = false;
                return;
        }
        if (ev & EPOLLERR) {
                int       err = 0;
                socklen_t len = sizeof(err);
                if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                        err = errno;
                if (err) {
                        conn_abort_errno(px, c,
                                         s == &c->cli ? "client socket"
                                                      : "upstream socket",
                                         err);
                        return;
                }
        }
        if (ev & EPOLLHUP)
                s->hup = true;
        if (ev & EPOLLOUT) {
                struct dir *in = s == &c->cli ? &c->u2c : &c->c2u;
                in->blocked    = false;
        }
        if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (s->events & EPOLLIN))
                dir_read(px, c, s == &c->cli ? &c->c2u : &c->u2c);
}

/* ----------------------------------------------------------- LISTENERS -- */

static void listener_accept(struct proxy *px, struct pair *p) {
        for (;;) {
                int fd = accept4(p->fd, NULL, NULL,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0) {
                        conn_new(px, p, fd);
                        continue;
                }
                if (errno == EINTR || errno == ECONNABORTED)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return;
                /* Out of descriptors or memory: the pending connection
                 * stays in the backlog and would wake us for ever.  Stop
                 * accepting until a connection closes. */
                logf_("accept on %s: %s; pausing it until a connection "
                      "closes",
                      p->listen_spec, strerror(errno));
                if (epoll_ctl(px->ep, EPOLL_CTL_DEL, p->fd, NULL) == 0) {
                        p->paused = true;
                        px->paused++;
                }
                return;
        }
}

static void listeners_resume(struct proxy *px) {
        for (int i = 0; px->paused && i < px->npairs; i++) {
                struct pair       *p  = &px->pairs[i];
                struct epoll_event ev = {.events   = EPOLLIN,
                                         .data.ptr = &p->h};
                if (p->paused && !epoll_ctl(px->ep, EPOLL_CTL_ADD, p->fd, &ev)) {
                        p->paused = false;
                        px->paused--;
                }
        }
}

/* Bind every listener; @returns 0, or -1 with the reason printed. */
static int listeners_open(struct proxy *px) {
        for (int i = 0; i < px->npairs; i++) {
                struct pair       *p = &px->pairs[i];
                struct sockaddr_in sa;
                socklen_t          sl  = sizeof(sa);
                int                one = 1;

                memset(&sa, 0, sizeof(sa));
                sa.sin_family      = AF_INET;
                sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                sa.sin_port        = htons(p->port);
                p->h.kind          = H_LISTENER;
                p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK |
                                            SOCK_CLOEXEC,
                               0);
                /* SO_REUSEADDR: a restarted proxy may take a port whose
                 * last connections are in TIME_WAIT; a port another
                 * program listens on is still refused. */
                if (p->fd < 0 ||
                    setsockopt(p->fd, SOL_SOCKET, SO_REUSEADDR, &one,
                               sizeof(one)) ||
                    bind(p->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
                    listen(p->fd, LISTEN_BACKLOG) ||
                    getsockname(p->fd, (struct sockaddr *)&sa, &sl)) {
                        fprintf(stderr, "%s: listen on 127.0.0.1:%u: %s\n",
                                PROG, (unsigned)p->port, strerror(errno));
                        return -1;
                }
                p->port = ntohs(sa.sin_port);
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->h};
                if (epoll_ctl(px->ep, EPOLL_CTL_ADD, p->fd, &ev)) {
                        fprintf(stderr, "%s: epoll_ctl: %s\n", PROG,
                                strerror(errno));
                        return -1;
                }
        }
        return 0;
}

/* "127.0.0.1:PORT" per pair, in the order given, written whole (through
 * a rename) once every listener is bound: the "ready" signal. */
static int ready_file_write(const struct proxy *px, const char *path) {
        char  tmp[4096];
        FILE *f;

        if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
                fprintf(stderr, "%s: --ready-file: path too long\n", PROG);
                return -1;
        }
        f = fopen(tmp, "w");
        if (!f) {
                fprintf(stderr, "%s: %s: %s\n", PROG, tmp, strerror(errno));
                return -1;
        }
        for (int i = 0; i < px->npairs; i++)
                fprintf(f, "127.0.0.1:%u\n", (unsigned)px->pairs[i].port);
        if (fclose(f) || rename(tmp, path)) {
                fprintf(stderr, "%s: %s: %s\n", PROG, path, strerror(errno));
                return -1;
        }
        return 0;
}

/* ---------------------------------------------------------------- LOOP -- */

static void timer_arm(struct proxy *px, int64_t due) {
        struct itimerspec its = {{0, 0}, {0, 0}};

        if (due == px->armed_ns)
                return;
        if (due) {
                its.it_value.tv_sec  = due / 1000000000;
                its.it_value.tv_nsec = due % 1000000000;
        }
        if (timerfd_settime(px->tfd, due ? TFD_TIMER_ABSTIME : 0, &its, NULL))
                logf_("timerfd_settime: %s", strerror(errno));
        else
                px->armed_ns = due;
}

static int run(struct proxy *px) {
        struct epoll_event evs[128];

        while (!px->stop) {
                int     n = epoll_wait(px->ep, evs, 128, -1);
                int64_t now, next = 0;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        logf_("epoll_wait: %s", strerror(errno));
                        return -1;
                }
                for (int i = 0; i < n; i++) {
                        struct handle *h = evs[i].data.ptr;
                        switch (h->kind) {
                        case H_LISTENER:
                                listener_accept(px, (struct pair *)h);
                                break;
                        case H_CLIENT:
                        case H_UPSTREAM:
                                side_event(px, (struct side *)h,
                                           evs[i].events);
                                break;
                        case H_SIGNAL: {
                                struct signalfd_siginfo si;
                                if (read(px->sfd, &si, sizeof(si)) > 0)
                                        px->stop = true;
                                break;
                        }
                        case H_TIMER: {
                                uint64_t expirations;
                                if (read(px->tfd, &expirations,
                                         sizeof(expirations)) > 0)
                                        px->armed_ns = 0;
                                break;
                        }
                        }
                }
                /* Every connection, not only those with events: the
                 * timer says only that something is due. */
                now = now_ns();
                for (struct conn *c = px->conns, *nx; c; c = nx) {
                        nx = c->next;
                        conn_pump(px, c, now, &next);
                }
                while (px->graveyard) {
                        struct conn *c = px->graveyard;
                        px->graveyard  = c->next;
                        free(c);
                }
                timer_arm(px, next);
        }
        return 0;
}

/* ---------------------------------------------------------------- MAIN -- */

static void usage(FILE *f) {
        fprintf(f,
                "Usage: " PROG " [OPTIONS] LISTEN=UPSTREAM...\n"
                "A TCP proxy that delays every chunk by a WAN's one-way "
                "delay, both ways,\n"
                "order kept (tests/README.md, docs/benchmarks.md).\n"
                "\n"
                "  LISTEN=UPSTREAM       listen on 127.0.0.1:PORT "
                "(LISTEN is PORT or\n"
                "                        127.0.0.1:PORT; 0 picks one) and "
                "pass each\n"
                "                        connection on to UPSTREAM "
                "(HOST:PORT); repeatable\n"
                "  -r, --rtt MS          round trip added: MS/2 each way "
                "(default 0)\n"
                "  -u, --up-delay MS     client -> upstream one way, "
                "instead of --rtt\n"
                "  -d, --down-delay MS   upstream -> client one way, "
                "instead of --rtt\n"
                "  -q, --max-queued B    memory per connection and "
                "direction before the\n"
                "                        proxy stops reading (default "
                "16777216)\n"
                "  -f, --ready-file F    once listening, write the "
                "listeners' addresses\n"
                "                        (127.0.0.1:PORT, one a line, in "
                "order) to F\n"
                "  -v, --verbose         log every connection's open and "
                "close\n"
                "  -h, --help\n"
                "MS may have a fraction (12.5).  SIGTERM or SIGINT stops "
                "it (exit 0).\n");
}

int main(int argc, char **argv) {
        static const struct option lo[] = {
            {"rtt", required_argument, NULL, 'r'},
            {"up-delay", required_argument, NULL, 'u'},
            {"down-delay", required_argument, NULL, 'd'},
            {"max-queued", required_argument, NULL, 'q'},
            {"ready-file", required_argument, NULL, 'f'},
            {"verbose", no_argument, NULL, 'v'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        static struct proxy px; /* large (the read buffer): not on the stack */
        const char         *ready = NULL;
        char                errstr[512];
        bool                rtt = false, oneway = false;
        int64_t             ns;
        sigset_t            mask;
        int                 opt, rc;

        px.max_queued = DEFAULT_MAX_QUEUED;
        while ((opt = getopt_long(argc, argv, ":r:u:d:q:f:vh", lo, NULL)) !=
               -1) {
                switch (opt) {
                case 'r':
                        if (!parse_ms(optarg, &ns))
                                goto bad_ms;
                        px.up_ns   = ns / 2;
                        px.down_ns = ns - ns / 2;
                        rtt        = true;
                        break;
                case 'u':
                case 'd':
                        if (!parse_ms(optarg, &ns))
                                goto bad_ms;
                        *(opt == 'u' ? &px.up_ns : &px.down_ns) = ns;
                        oneway = true;
                        break;
                case 'q': {
                        char              *end;
                        unsigned long long v;
                        errno = 0;
                        v     = strtoull(optarg, &end, 10);
                        if (errno || end == optarg || *end || *optarg == '-' ||
                            v < 4096 || v > ((unsigned long long)1 << 40)) {
                                fprintf(stderr,
                                        "%s: --max-queued: expected bytes "
                                        "from 4096 to 2^40, not '%s'\n",
                                        PROG, optarg);
                                usage(stderr);
                                return EXIT_USAGE;
                        }
                        px.max_queued = (size_t)v;
                        break;
                }
                case 'f':
                        ready = optarg;
                        break;
                case 'v':
                        px.verbose = true;
                        break;
                case 'h':
                        usage(stdout);
                        return EXIT_OK;
                case ':':
                        fprintf(stderr, "%s: %s requires an argument\n", PROG,
                                argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                default:
                        fprintf(stderr, "%s: unknown option %s\n", PROG,
                                argv[optind - 1]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
                continue;
        bad_ms:
                fprintf(stderr,
                        "%s: %s: expected milliseconds from 0 to %.0f, not "
                        "'%s'\n",
                        PROG,
                        opt == 'r'   ? "--rtt"
                        : opt == 'u' ? "--up-delay"
                                     : "--down-delay",
                        MAX_DELAY_MS, optarg);
                usage(stderr);
                return EXIT_USAGE;
        }
        if (rtt && oneway) {
                fprintf(stderr, "%s: --rtt and --up-delay/--down-delay "
                                "exclude each other\n",
                        PROG);
                usage(stderr);
                return EXIT_USAGE;
        }
        if (optind == argc) {
                fprintf(stderr, "%s: name at least one LISTEN=UPSTREAM\n",
                        PROG);
                usage(stderr);
                return EXIT_USAGE;
        }
        for (int i = optind; i < argc; i++) {
                struct pair *p  = &px.pairs[px.npairs];
                char        *eq = strchr(argv[i], '=');

                if (px.npairs == MAX_PAIRS) {
                        fprintf(stderr, "%s: at most %d pairs\n", PROG,
                                MAX_PAIRS);
                        return EXIT_USAGE;
                }
                if (!eq) {
                        fprintf(stderr,
                                "%s: '%s': expected LISTEN=UPSTREAM\n", PROG,
                                argv[i]);
                        usage(stderr);
                        return EXIT_USAGE;
                }
                *eq              = '\0';
                p->listen_spec   = argv[i];
                p->upstream_spec = eq + 1;
                if (!parse_listen(p->listen_spec, &p->port, errstr,
                                  sizeof(errstr)) ||
                    !parse_upstream(p->upstream_spec, &p->up_addr, &p->up_len,
                                    errstr, sizeof(errstr))) {
                        fprintf(stderr, "%s: %s\n", PROG, errstr);
                        return EXIT_USAGE;
                }
                px.npairs++;
        }

        /* Signals arrive through a descriptor, so the loop sees them
         * between events and never inside one. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        signal(SIGPIPE, SIG_IGN);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) ||
            (px.ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
            (px.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
            (px.tfd = timerfd_create(CLOCK_MONOTONIC,
                                     TFD_NONBLOCK | TFD_CLOEXEC)) < 0) {
                fprintf(stderr, "%s: setup: %s\n", PROG, strerror(errno));
                return EXIT_RUNTIME;
        }
        px.sig_h.kind   = H_SIGNAL;
        px.timer_h.kind = H_TIMER;
        {
                struct epoll_event se = {.events   = EPOLLIN,
                                         .data.ptr = &px.sig_h};
                struct epoll_event te = {.events   = EPOLLIN,
                                         .data.ptr = &px.timer_h};
                if (epoll_ctl(px.ep, EPOLL_CTL_ADD, px.sfd, &se) ||
                    epoll_ctl(px.ep, EPOLL_CTL_ADD, px.tfd, &te)) {
                        fprintf(stderr, "%s: epoll_ctl: %s\n", PROG,
                                strerror(errno));
                        return EXIT_RUNTIME;
                }
        }
        if (listeners_open(&px) || (ready && ready_file_write(&px, ready)))
                return EXIT_RUNTIME;
        if (px.verbose)
                for (int i = 0; i < px.npairs; i++)
                        logf_("127.0.0.1:%u -> %s, delay %.3f ms up, %.3f "
                              "ms down",
                              (unsigned)px.pairs[i].port,
                              px.pairs[i].upstream_spec,
                              (double)px.up_ns / 1e6,
                              (double)px.down_ns / 1e6);

        rc = run(&px);

        while (px.conns)
                conn_close(&px, px.conns, false, NULL);
        while (px.graveyard) {
                struct conn *c = px.graveyard;
                px.graveyard   = c->next;
                free(c);
        }
        for (int i = 0; i < px.npairs; i++)
                close(px.pairs[i].fd);
        close(px.tfd);
        close(px.sfd);
        close(px.ep);
        if (px.verbose)
                logf_("stopped: %" PRIu64 " connections (%" PRIu64
                      " closed, %" PRIu64 " aborted), %" PRIu64
                      " bytes up, %" PRIu64 " down",
                      px.opened, px.closed, px.aborted, px.bytes_up,
                      px.bytes_down);
        return rc ? EXIT_RUNTIME : EXIT_OK;
}
