/*
 * aagw - active-active replication gateway for Kafka
 *
 * tests/soak/soak_util.c: string map, HTTP GET, Prometheus and JSON
 * helpers of the soak program (see soak_util.h).
 */
#include "soak_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------- STRING MAP ------------------------------- */

static uint64_t hash(const char *s, size_t len) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char)s[i];
                h *= 1099511628211ULL;
        }
        return h ^ (h >> 29);
}

static size_t slot(const struct smap *m, const char *key, size_t len) {
        size_t i = (size_t)hash(key, len) & (m->cap - 1);
        while (m->k[i] &&
               !(m->klen[i] == len && !memcmp(m->k[i], key, len)))
                i = (i + 1) & (m->cap - 1);
        return i;
}

static void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n, size);
        if (!p) {
                fprintf(stderr, "soak: out of memory\n");
                abort();
        }
        return p;
}

static void grow(struct smap *m) {
        struct smap n = {.cap = m->cap ? m->cap * 2 : 1024};

        n.k    = xcalloc(n.cap, sizeof(*n.k));
        n.klen = xcalloc(n.cap, sizeof(*n.klen));
        n.v    = xcalloc(n.cap, sizeof(*n.v));
        for (size_t i = 0; i < m->cap; i++) {
                if (!m->k[i])
                        continue;
                size_t j  = slot(&n, m->k[i], m->klen[i]);
                n.k[j]    = m->k[i];
                n.klen[j] = m->klen[i];
                n.v[j]    = m->v[i];
        }
        n.cnt = m->cnt;
        free(m->k);
        free(m->klen);
        free(m->v);
        *m = n;
}

int64_t *smap_get(const struct smap *m, const char *key, size_t len) {
        if (!m->cap)
                return NULL;
        size_t i = slot(m, key, len);
        return m->k[i] ? &m->v[i] : NULL;
}

int64_t *smap_put(struct smap *m, const char *key, size_t len, int64_t init) {
        if ((m->cnt + 1) * 2 > m->cap)
                grow(m);
        size_t i = slot(m, key, len);
        if (!m->k[i]) {
                m->k[i] = xcalloc(1, len + 1);
                memcpy(m->k[i], key, len);
                m->klen[i] = len;
                m->v[i]    = init;
                m->cnt++;
        }
        return &m->v[i];
}

bool smap_next(const struct smap *m, size_t *i) {
        for (; *i < m->cap; (*i)++)
                if (m->k[*i])
                        return true;
        return false;
}

void smap_deinit(struct smap *m) {
        for (size_t i = 0; i < m->cap; i++)
                free(m->k[i]);
        free(m->k);
        free(m->klen);
        free(m->v);
        memset(m, 0, sizeof(*m));
}

/* ------------------------------- HTTP ---------------------------------- */

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for 'events' on 'fd' until 'deadline'. @returns true if ready. */
static bool wait_fd(int fd, short events, int64_t deadline) {
        for (;;) {
                int64_t left = deadline - now_ms();
                if (left <= 0)
                        return false;
                struct pollfd p = {.fd = fd, .events = events};
                int           r = poll(&p, 1, (int)left);
                if (r > 0)
                        return true;
                if (r < 0 && errno != EINTR)
                        return false;
        }
}

int soak_http_get(const char *addr, const char *path, int timeout_ms,
                  char **body) {
        int64_t            deadline = now_ms() + timeout_ms;
        char               host[64], req[512];
        const char        *colon = strrchr(addr, ':');
        struct sockaddr_in sa    = {.sin_family = AF_INET};
        char              *buf   = NULL;
        size_t             len = 0, cap = 0;
        int                fd, code = -1;

        if (body)
                *body = NULL;
        if (!colon || (size_t)(colon - addr) >= sizeof(host))
                return -1;
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        sa.sin_port        = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
                return -1;
        if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         0)) < 0)
                return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int       e = 0;
                socklen_t l = sizeof(e);
                if (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline) ||
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) || e)
                        goto out;
        }
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr);
        for (int off = 0; off < n;) {
                if (!wait_fd(fd, POLLOUT, deadline))
                        goto out;
                ssize_t w = send(fd, req + off, (size_t)(n - off),
                                 MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR)
                        goto out;
                if (w > 0)
                        off += (int)w;
        }
        for (;;) {
                if (len + 4096 + 1 > cap) {
                        cap      = cap ? cap * 2 : 65536;
                        char *nb = realloc(buf, cap);
                        if (!nb)
                                goto out;
                        buf = nb;
                }
                if (!wait_fd(fd, POLLIN, deadline))
                        goto out;
                ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
                if (r == 0)
                        break;
                if (r < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                continue;
                        goto out;
                }
                len += (size_t)r;
        }
        buf[len] = '\0';
        if (sscanf(buf, "HTTP/%*d.%*d %d", &code) != 1)
                code = -1;
        if (body && code > 0) {
                char *b = strstr(buf, "\r\n\r\n");
                *body   = strdup(b ? b + 4 : "");
        }
out:
        free(buf);
        close(fd);
        return code;
}

/* ---------------------------- PROMETHEUS ------------------------------- */

/* Call 'fn' for each sample line of 'name'. */
static void each_sample(const char *text, const char *name,
                        void (*fn)(void *arg, const char *labels, size_t llen,
                                   double v),
                        void *arg) {
        size_t      nlen = strlen(name);
        const char *p    = text;

        while (p && *p) {
                const char *eol = strchr(p, '\n');
                size_t      len = eol ? (size_t)(eol - p) : strlen(p);
                if (len > nlen && !strncmp(p, name, nlen) &&
                    (p[nlen] == '{' || p[nlen] == ' ')) {
                        const char *labels = p + nlen, *sp;
                        size_t      llen   = 0;
                        if (*labels == '{') {
                                const char *close = memchr(labels, '}', len);
                                llen = close ? (size_t)(close - labels) + 1 : 0;
                        }
                        sp = labels + llen;
                        fn(arg, labels, llen, strtod(sp, NULL));
                }
                p = eol ? eol + 1 : NULL;
        }
}

struct sum_arg {
        double sum, min;
        bool   found;
};

static void sum_fn(void *arg, const char *labels, size_t llen, double v) {
        struct sum_arg *s = arg;
        (void)labels;
        (void)llen;
        if (!s->found || v < s->min)
                s->min = v;
        s->sum += v;
        s->found = true;
}

double soak_metric_sum(const char *text, const char *name, bool *found,
                       double *min) {
        struct sum_arg s = {0};
        each_sample(text, name, sum_fn, &s);
        if (found)
                *found = s.found;
        if (min)
                *min = s.min;
        return s.sum;
}

struct lines_arg {
        const char *shortname;
        char       *out;
        size_t      size;
};

static void lines_fn(void *arg, const char *labels, size_t llen, double v) {
        struct lines_arg *l    = arg;
        size_t            used = strlen(l->out);
        if (used + 1 >= l->size)
                return;
        snprintf(l->out + used, l->size - used, "%s%.*s=%g ", l->shortname,
                 (int)llen, labels, v);
}

void soak_metric_lines(const char *text, const char *name, char *out,
                       size_t size) {
        struct lines_arg l = {
            .shortname = strncmp(name, "aagw_", 5) ? name : name + 5,
            .out       = out,
            .size      = size};
        each_sample(text, name, lines_fn, &l);
}

/* ------------------------------- JSON ---------------------------------- */

static const char *field_at(const char *json, size_t len, const char *field) {
        char pat[64];
        int  n = snprintf(pat, sizeof(pat), "\"%s\":", field);
        if (n <= 0 || (size_t)n >= sizeof(pat))
                return NULL;
        const char *p = memmem(json, len, pat, (size_t)n);
        return p ? p + n : NULL;
}

int64_t soak_json_int(const char *json, size_t len, const char *field,
                      int64_t dflt) {
        const char *p = field_at(json, len, field);
        return p ? strtoll(p, NULL, 10) : dflt;
}

bool soak_json_str(const char *json, size_t len, const char *field, char *out,
                   size_t size) {
        const char *p = field_at(json, len, field), *end;
        if (!p || p >= json + len || *p != '"')
                return false;
        p++;
        end = memchr(p, '"', (size_t)(json + len - p));
        if (!end || (size_t)(end - p) >= size)
                return false;
        memcpy(out, p, (size_t)(end - p));
        out[end - p] = '\0';
        return true;
}
