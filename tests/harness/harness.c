/* tests/harness/harness.c: shared machinery of the end-to-end tests and the
 * benchmarks (see harness.h for the contract of each helper).
 *
 * Child processes are started with fork() + execve() rather than
 * posix_spawn() because the child must arm PR_SET_PDEATHSIG: a test that
 * dies on a failed assertion must not leave an `aagw sandbox` behind
 * holding ports and memory.  Between fork() and execve() the child only
 * makes async-signal-safe calls, since librdkafka threads may hold locks in
 * the parent at the moment of the fork. */
#include "harness.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aagw_replicator.h"

extern char **environ;

/* Shortest and longest pause between two polls of a condition. */
#define POLL_MIN_MS 1
#define POLL_MAX_MS 50

/* kcat record and key separators for harness_kcat_produce(): ASCII record
 * and unit separators, which no test needs inside keys or values, unlike
 * '\n' (multi-line JSON values) or ':' (ids). */
#define KCAT_REC_SEP '\x1e'
#define KCAT_KEY_SEP '\x1f'
#define KCAT_REC_SEP_ARG "\\x1e"
#define KCAT_KEY_SEP_ARG "\\x1f"

/* ---------------------------- TIME AND NAMES ---------------------------- */

int64_t harness_now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleep 'ms' milliseconds; only ever called between two polls of a
 * condition that has its own deadline. */
static void nap_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

char *harness_unique_name(const char *prefix) {
        static atomic_uint seq;
        struct timespec    ts;
        char              *name;

        clock_gettime(CLOCK_REALTIME, &ts);
        /* pid + counter is unique within a boot; the wall-clock part keeps
         * names apart across runs against long-lived real clusters, where
         * pids get reused. */
        if (asprintf(&name, "%s-%d-%u-%lld%03ld", prefix, (int)getpid(),
                     atomic_fetch_add(&seq, 1) + 1,
                     (long long)ts.tv_sec % 100000, ts.tv_nsec / 1000000) == -1)
                return NULL;
        return name;
}

/* -------------------------- FILES AND DIRECTORIES ------------------------ */

char *harness_tmpdir_new(const char *tag) {
        const char *base = getenv("TMPDIR");
        char       *path;

        if (!base || !*base)
                base = "/tmp";
        if (asprintf(&path, "%s/aagw-%s-XXXXXX", base, tag) == -1)
                return NULL;
        if (!mkdtemp(path)) {
                int e = errno;
                free(path);
                errno = e;
                return NULL;
        }
        return path;
}

static int rmtree_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path) == -1 ? errno : 0;
}

int harness_rmtree(const char *path) {
        /* FTW_DEPTH: children before their directory; FTW_PHYS: remove a
         * symlink, never what it points to. */
        int rc = nftw(path, rmtree_one, 16, FTW_DEPTH | FTW_PHYS);

        if (rc > 0) {
                errno = rc;
                return -1;
        }
        return rc;
}

char *harness_path_join(const char *dir, const char *name) {
        char *path;

        if (asprintf(&path, "%s/%s", dir, name) == -1)
                return NULL;
        return path;
}

char *harness_read_file(const char *path, size_t *lenp) {
        FILE  *f   = fopen(path, "rbe");
        char  *buf = NULL;
        size_t len = 0, cap = 0;

        if (!f)
                return NULL;
        for (;;) {
                if (cap - len < 4096 + 1) {
                        char *nb = realloc(buf, cap ? cap * 2 : 8192);
                        if (!nb) {
                                free(buf);
                                fclose(f);
                                errno = ENOMEM;
                                return NULL;
                        }
                        buf = nb;
                        cap = cap ? cap * 2 : 8192;
                }
                size_t n = fread(buf + len, 1, cap - len - 1, f);
                len += n;
                if (n == 0)
                        break;
        }
        if (ferror(f)) {
                free(buf);
                fclose(f);
                errno = EIO;
                return NULL;
        }
        fclose(f);
        buf[len] = '\0';
        if (lenp)
                *lenp = len;
        return buf;
}

/* -------------------------------- WAITING -------------------------------- */

bool harness_wait_until(harness_cond_t *cond, void *arg, int timeout_ms) {
        int64_t deadline = harness_now_ms() + timeout_ms;
        int     step     = POLL_MIN_MS;

        for (;;) {
                if (cond(arg))
                        return true;
                int64_t left = deadline - harness_now_ms();
                if (left <= 0)
                        return cond(arg);
                nap_ms(left < step ? (int)left : step);
                step = step * 2 > POLL_MAX_MS ? POLL_MAX_MS : step * 2;
        }
}

static bool file_ready(void *arg) {
        struct stat st;

        return stat((const char *)arg, &st) == 0 && S_ISREG(st.st_mode) &&
               st.st_size > 0;
}

bool harness_wait_file(const char *path, int timeout_ms) {
        return harness_wait_until(file_ready, (void *)path, timeout_ms);
}

/* ---------------------------- CHILD PROCESSES ---------------------------- */

struct harness_proc {
        pid_t pid;
        bool  reaped;
        int   status;
};

/* Resolve 'name' the way execvp() would, but here, before fork(): the
 * child may not allocate.  @returns a malloc()ed path or NULL. */
static char *find_exe(const char *name) {
        const char *path = getenv("PATH");
        char       *dirs, *save = NULL, *found = NULL;

        if (strchr(name, '/'))
                return strdup(name);
        if (!path || !*path)
                path = "/usr/local/bin:/usr/bin:/bin";
        dirs = strdup(path);
        if (!dirs)
                return NULL;
        for (char *d = strtok_r(dirs, ":", &save); d && !found;
             d       = strtok_r(NULL, ":", &save)) {
                struct stat st;
                char       *cand = harness_path_join(*d ? d : ".", name);

                if (cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
                    access(cand, X_OK) == 0)
                        found = cand;
                else
                        free(cand);
        }
        free(dirs);
        return found;
}

/* Make sure 'fd' is not one of 0..2, which the child is about to replace,
 * so that one dup2() can not clobber the source of the next. */
static int lift_fd(int fd) {
        return fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

/* Child side of spawn(): async-signal-safe calls only.  Never returns. */
static void child_exec(const char *exe, const char *const argv[], int in_fd,
                       int out_fd, int err_fd, int report_fd, pid_t parent) {
        struct sigaction sa;
        sigset_t         none;
        int              e;

        /* Die with the test.  The getppid() check closes the race where
         * the parent died before prctl() ran. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != parent)
                goto fail;
        /* Dispositions set to SIG_IGN and the signal mask survive exec();
         * the program under test must start as if from a shell. */
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        for (int s = 1; s < NSIG; s++)
                sigaction(s, &sa, NULL); /* EINVAL for KILL/STOP: fine */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        if ((in_fd = lift_fd(in_fd)) == -1 ||
            (out_fd = lift_fd(out_fd)) == -1 ||
            (err_fd = lift_fd(err_fd)) == -1)
                goto fail;
        if (dup2(in_fd, 0) == -1 || dup2(out_fd, 1) == -1 ||
            dup2(err_fd, 2) == -1)
                goto fail;
        execve(exe, (char *const *)argv, environ);
fail:
        e = errno;
        while (write(report_fd, &e, sizeof(e)) == -1 && errno == EINTR)
                ;
        _exit(127);
}

/* Start 'argv' with the given descriptors as its stdin, stdout and stderr
 * (the caller keeps and closes its copies).  A CLOEXEC pipe carries errno
 * back if execve() fails, so "no such program" is an error here instead
 * of a mysterious exit status 127 later.  @returns the pid or -1. */
static pid_t spawn(const char *const argv[], int in_fd, int out_fd, int err_fd,
                   char *errstr, size_t errstr_size) {
        pid_t   parent = getpid();
        char   *exe;
        int     report[2];
        int     child_errno = 0;
        ssize_t n;
        pid_t   pid;

        if (!argv || !argv[0]) {
                snprintf(errstr, errstr_size, "spawn: empty argv");
                return -1;
        }
        exe = find_exe(argv[0]);
        if (!exe) {
                snprintf(errstr, errstr_size, "%s: not found in PATH", argv[0]);
                return -1;
        }
        if (pipe2(report, O_CLOEXEC) == -1) {
                snprintf(errstr, errstr_size, "pipe: %s", strerror(errno));
                free(exe);
                return -1;
        }
        pid = fork();
        if (pid == 0)
                child_exec(exe, argv, in_fd, out_fd, err_fd, report[1], parent);
        free(exe);
        close(report[1]);
        if (pid == -1) {
                snprintf(errstr, errstr_size, "fork: %s", strerror(errno));
                close(report[0]);
                return -1;
        }
        do
                n = read(report[0], &child_errno, sizeof(child_errno));
        while (n == -1 && errno == EINTR);
        close(report[0]);
        if (n > 0) {
                snprintf(errstr, errstr_size, "cannot execute %s: %s", argv[0],
                         strerror(child_errno));
                while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
                        ;
                return -1;
        }
        return pid;
}

/* Open 'path' (or /dev/null) for a child's output, appending. */
static int open_out(const char *path, char *errstr, size_t errstr_size) {
        int fd = open(path ? path : "/dev/null",
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

        if (fd == -1)
                snprintf(errstr, errstr_size, "%s: %s",
                         path ? path : "/dev/null", strerror(errno));
        return fd;
}

harness_proc_t *harness_proc_spawn(const char *const argv[],
                                   const char       *stdout_path,
                                   const char *stderr_path, char *errstr,
                                   size_t errstr_size) {
        harness_proc_t *p = calloc(1, sizeof(*p));
        int             in_fd, out_fd = -1, err_fd = -1;

        if (!p) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in_fd == -1) {
                snprintf(errstr, errstr_size, "/dev/null: %s", strerror(errno));
                goto fail;
        }
        if ((out_fd = open_out(stdout_path, errstr, errstr_size)) == -1 ||
            (err_fd = open_out(stderr_path, errstr, errstr_size)) == -1)
                goto fail;
        p->pid = spawn(argv, in_fd, out_fd, err_fd, errstr, errstr_size);
        if (p->pid == -1)
                goto fail;
        close(in_fd);
        close(out_fd);
        close(err_fd);
        return p;
fail:
        if (in_fd != -1)
                close(in_fd);
        if (out_fd != -1)
                close(out_fd);
        if (err_fd != -1)
                close(err_fd);
        free(p);
        return NULL;
}

pid_t harness_proc_pid(const harness_proc_t *p) {
        return p->pid;
}

int harness_proc_signal(harness_proc_t *p, int sig) {
        /* After the reap the pid may belong to a stranger. */
        if (p->reaped)
                return 0;
        return kill(p->pid, sig);
}

/* Reap 'p' without blocking.  @returns 1 if it has exited, 0 if it runs,
 * -1 on error (ECHILD: somebody else reaped it). */
static int try_reap(harness_proc_t *p) {
        pid_t r;

        if (p->reaped)
                return 1;
        do
                r = waitpid(p->pid, &p->status, WNOHANG);
        while (r == -1 && errno == EINTR);
        if (r == p->pid) {
                p->reaped = true;
                return 1;
        }
        return r == 0 ? 0 : -1;
}

static bool proc_exited(void *arg) {
        /* An error counts as "done" so the wait ends; the caller sorts it
         * out with a last try_reap(). */
        return try_reap(arg) != 0;
}

aagw_err_t harness_proc_wait(harness_proc_t *p, int timeout_ms, int *status) {
        if (!harness_wait_until(proc_exited, p, timeout_ms))
                return AAGW_ERR_TIMEOUT;
        if (try_reap(p) != 1)
                return AAGW_ERR_NOENT;
        if (status)
                *status = p->status;
        return AAGW_OK;
}

void harness_proc_destroy(harness_proc_t *p) {
        if (!p)
                return;
        if (!p->reaped) {
                kill(p->pid, SIGKILL);
                while (waitpid(p->pid, &p->status, 0) == -1 && errno == EINTR)
                        ;
        }
        free(p);
}

int harness_exit_code(int status) {
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return -1;
}

/* --------------------------- RUN TO COMPLETION --------------------------- */

struct buf {
        char  *p;
        size_t len, cap;
};

/* Read what 'fd' has into 'b'.  @returns 1 while open, 0 at EOF, -1 on
 * error (ENOMEM included). */
static int buf_read(struct buf *b, int fd) {
        if (b->cap - b->len < 4096 + 1) {
                size_t cap = b->cap ? b->cap * 2 : 16384;
                char  *np  = realloc(b->p, cap);
                if (!np)
                        return -1;
                b->p         = np;
                b->cap       = cap;
                b->p[b->len] = '\0'; /* in case EOF comes first */
        }
        ssize_t n = read(fd, b->p + b->len, b->cap - b->len - 1);
        if (n > 0) {
                b->len += (size_t)n;
                b->p[b->len] = '\0';
                return 1;
        }
        if (n == 0)
                return 0;
        return errno == EINTR || errno == EAGAIN ? 1 : -1;
}

/* Give 'o' NUL-terminated buffers even when nothing was read. */
static void buf_give(struct buf *b, char **out, size_t *len) {
        if (!b->p)
                b->p = calloc(1, 1);
        *out = b->p;
        *len = b->p ? b->len : 0;
}

static void close_fd(int *fd) {
        if (*fd != -1)
                close(*fd);
        *fd = -1;
}

aagw_err_t harness_run(const char *const argv[], const void *in, size_t in_len,
                       int timeout_ms, harness_output_t *o, char *errstr,
                       size_t errstr_size) {
        int64_t    deadline = harness_now_ms() + timeout_ms;
        struct buf out = {0}, err = {0};
        int    in_sv[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
        size_t in_off       = 0;
        aagw_err_t     rc   = AAGW_OK;
        harness_proc_t proc = {0};

        memset(o, 0, sizeof(*o));
        /* stdin is a socket rather than a pipe so that we can write with
         * MSG_NOSIGNAL: a child that exits without reading all of it must
         * give us EPIPE, not a SIGPIPE that kills the test. */
        if (in) {
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_sv) ==
                    -1) {
                        snprintf(errstr, errstr_size, "socketpair: %s",
                                 strerror(errno));
                        return AAGW_ERR_INVAL;
                }
        } else if ((in_sv[1] = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1) {
                snprintf(errstr, errstr_size, "/dev/null: %s", strerror(errno));
                return AAGW_ERR_INVAL;
        }
        if (pipe2(out_p, O_CLOEXEC) == -1 || pipe2(err_p, O_CLOEXEC) == -1) {
                snprintf(errstr, errstr_size, "pipe: %s", strerror(errno));
                rc = AAGW_ERR_INVAL;
                goto out;
        }
        proc.pid =
            spawn(argv, in_sv[1], out_p[1], err_p[1], errstr, errstr_size);
        close_fd(&in_sv[1]);
        close_fd(&out_p[1]);
        close_fd(&err_p[1]);
        if (proc.pid == -1) {
                rc = AAGW_ERR_INVAL;
                goto out;
        }
        if (in_sv[0] != -1)
                fcntl(in_sv[0], F_SETFL, O_NONBLOCK);
        if (in_sv[0] != -1 && in_len == 0)
                close_fd(&in_sv[0]); /* EOF right away */

        /* Feed stdin and drain stdout/stderr together: a child blocked on
         * a full stdout pipe would never read the rest of its input. */
        while (in_sv[0] != -1 || out_p[0] != -1 || err_p[0] != -1) {
                struct pollfd pfd[3];
                int           n    = 0;
                int64_t       left = deadline - harness_now_ms();

                if (left <= 0) {
                        rc = AAGW_ERR_TIMEOUT;
                        break;
                }
                if (in_sv[0] != -1)
                        pfd[n++] = (struct pollfd){in_sv[0], POLLOUT, 0};
                if (out_p[0] != -1)
                        pfd[n++] = (struct pollfd){out_p[0], POLLIN, 0};
                if (err_p[0] != -1)
                        pfd[n++] = (struct pollfd){err_p[0], POLLIN, 0};
                if (poll(pfd, (nfds_t)n, (int)left) == -1) {
                        if (errno == EINTR)
                                continue;
                        snprintf(errstr, errstr_size, "poll: %s",
                                 strerror(errno));
                        rc = AAGW_ERR_INVAL;
                        break;
                }
                for (int i = 0; i < n; i++) {
                        if (!pfd[i].revents)
                                continue;
                        if (pfd[i].fd == in_sv[0]) {
                                ssize_t w =
                                    send(in_sv[0], (const char *)in + in_off,
                                         in_len - in_off,
                                         MSG_NOSIGNAL | MSG_DONTWAIT);
                                if (w > 0)
                                        in_off += (size_t)w;
                                /* EPIPE etc.: the child stopped reading;
                                 * its exit status tells why. */
                                if ((w == -1 && errno != EAGAIN &&
                                     errno != EINTR) ||
                                    in_off == in_len)
                                        close_fd(&in_sv[0]);
                        } else {
                                bool        is_out = pfd[i].fd == out_p[0];
                                struct buf *b      = is_out ? &out : &err;
                                int        *fd = is_out ? &out_p[0] : &err_p[0];
                                int         r  = buf_read(b, *fd);
                                if (r == -1 && errno == ENOMEM) {
                                        snprintf(errstr, errstr_size,
                                                 "out of memory");
                                        rc = AAGW_ERR_NOMEM;
                                        goto reap;
                                }
                                if (r <= 0)
                                        close_fd(fd);
                        }
                }
        }
        if (rc == AAGW_OK) {
                int64_t left = deadline - harness_now_ms();
                rc = harness_proc_wait(&proc, left > 0 ? (int)left : 0,
                                       &o->status);
                if (rc == AAGW_ERR_NOENT) {
                        proc.reaped = true; /* the pid is not ours now */
                        snprintf(errstr, errstr_size,
                                 "%s: child %d was reaped elsewhere", argv[0],
                                 (int)proc.pid);
                }
        }
        if (rc == AAGW_ERR_TIMEOUT)
                snprintf(errstr, errstr_size,
                         "%s did not finish within %d ms; killed", argv[0],
                         timeout_ms);
reap:
        if (!proc.reaped) {
                kill(proc.pid, SIGKILL);
                while (waitpid(proc.pid, &o->status, 0) == -1 && errno == EINTR)
                        ;
        }
out:
        close_fd(&in_sv[0]);
        close_fd(&in_sv[1]);
        close_fd(&out_p[0]);
        close_fd(&out_p[1]);
        close_fd(&err_p[0]);
        close_fd(&err_p[1]);
        buf_give(&out, &o->out, &o->out_len);
        buf_give(&err, &o->err, &o->err_len);
        return rc;
}

void harness_output_deinit(harness_output_t *o) {
        free(o->out);
        free(o->err);
        memset(o, 0, sizeof(*o));
}

/* --------------------------------- LINES --------------------------------- */

int harness_lines_split(const char *text, harness_lines_t *l) {
        size_t cnt = 0;

        memset(l, 0, sizeof(*l));
        for (const char *p = text; *p; p++)
                if (*p == '\n' || !p[1])
                        cnt++;
        l->v = calloc(cnt + 1, sizeof(*l->v));
        if (!l->v)
                return -1;
        for (const char *p = text; *p;) {
                const char *nl  = strchr(p, '\n');
                size_t      len = nl ? (size_t)(nl - p) : strlen(p);

                l->v[l->cnt] = strndup(p, len);
                if (!l->v[l->cnt]) {
                        harness_lines_deinit(l);
                        return -1;
                }
                l->cnt++;
                p += len + (nl ? 1 : 0);
        }
        return 0;
}

void harness_lines_deinit(harness_lines_t *l) {
        for (size_t i = 0; l->v && i < l->cnt; i++)
                free(l->v[i]);
        free(l->v);
        memset(l, 0, sizeof(*l));
}

/* ------------------------------- BOOTSTRAPS ------------------------------ */

struct harness_bootstraps {
        size_t cnt;
        char **alias;
        char **bootstraps;
};

/* Trim spaces, tabs and a CR (files edited on Windows) at both ends. */
static char *trim(char *s) {
        char *e;

        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

harness_bootstraps_t *harness_bootstraps_parse(const char *text, char *errstr,
                                               size_t errstr_size) {
        harness_bootstraps_t *b = calloc(1, sizeof(*b));
        harness_lines_t       lines;

        if (!b || harness_lines_split(text, &lines) == -1) {
                free(b);
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        b->alias      = calloc(lines.cnt + 1, sizeof(*b->alias));
        b->bootstraps = calloc(lines.cnt + 1, sizeof(*b->bootstraps));
        if (!b->alias || !b->bootstraps) {
                snprintf(errstr, errstr_size, "out of memory");
                goto fail;
        }
        for (size_t i = 0; i < lines.cnt; i++) {
                char *line = trim(lines.v[i]);
                char *eq   = strchr(line, '=');
                char *alias, *list;

                if (!*line || *line == '#')
                        continue;
                if (!eq) {
                        snprintf(errstr, errstr_size,
                                 "line %zu: expected alias=bootstraps", i + 1);
                        goto fail;
                }
                *eq   = '\0';
                alias = trim(line);
                list  = trim(eq + 1);
                if (!*alias || !*list) {
                        snprintf(errstr, errstr_size, "line %zu: empty %s",
                                 i + 1, *alias ? "bootstrap list" : "alias");
                        goto fail;
                }
                if (harness_bootstraps_get(b, alias)) {
                        snprintf(errstr, errstr_size,
                                 "line %zu: duplicate alias '%s'", i + 1,
                                 alias);
                        goto fail;
                }
                b->alias[b->cnt]      = strdup(alias);
                b->bootstraps[b->cnt] = strdup(list);
                if (!b->alias[b->cnt] || !b->bootstraps[b->cnt]) {
                        b->cnt++; /* so destroy() frees the half */
                        snprintf(errstr, errstr_size, "out of memory");
                        goto fail;
                }
                b->cnt++;
        }
        if (b->cnt == 0) {
                snprintf(errstr, errstr_size, "no alias=bootstraps lines");
                goto fail;
        }
        harness_lines_deinit(&lines);
        return b;
fail:
        harness_lines_deinit(&lines);
        harness_bootstraps_destroy(b);
        return NULL;
}

harness_bootstraps_t *harness_bootstraps_load(const char *path, char *errstr,
                                              size_t errstr_size) {
        harness_bootstraps_t *b;
        char                 *text = harness_read_file(path, NULL);
        char                  why[256];

        if (!text) {
                snprintf(errstr, errstr_size, "%s: %s", path, strerror(errno));
                return NULL;
        }
        b = harness_bootstraps_parse(text, why, sizeof(why));
        free(text);
        if (!b)
                snprintf(errstr, errstr_size, "%s: %s", path, why);
        return b;
}

size_t harness_bootstraps_cnt(const harness_bootstraps_t *b) {
        return b->cnt;
}

const char *harness_bootstraps_alias(const harness_bootstraps_t *b,
                                     size_t                      idx) {
        return idx < b->cnt ? b->alias[idx] : NULL;
}

const char *harness_bootstraps_get(const harness_bootstraps_t *b,
                                   const char                 *alias) {
        for (size_t i = 0; i < b->cnt; i++)
                if (!strcmp(b->alias[i], alias))
                        return b->bootstraps[i];
        return NULL;
}

void harness_bootstraps_destroy(harness_bootstraps_t *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->cnt; i++) {
                free(b->alias[i]);
                free(b->bootstraps[i]);
        }
        free(b->alias);
        free(b->bootstraps);
        free(b);
}

/* -------------------------------- PROGRAMS ------------------------------- */

const char *harness_aagw_bin(void) {
        const char *bin = getenv("AAGW_BIN");
        return bin && *bin ? bin : NULL;
}

const char *harness_kcat_bin(void) {
        const char *bin = getenv("KCAT");
        return bin && *bin ? bin : "kcat";
}

bool harness_kcat_available(void) {
        char *exe = find_exe(harness_kcat_bin());
        bool  ok  = exe && access(exe, X_OK) == 0;

        free(exe);
        return ok;
}

/* --------------------------------- KCAT ---------------------------------- */

/* Put the first line of kcat's stderr (its "% ERROR: ..." line) or its
 * exit status into 'errstr'. */
static void kcat_failed(const char *what, const harness_output_t *o,
                        char *errstr, size_t errstr_size) {
        const char *msg = o->err && *o->err ? o->err : "(no message)";
        int         len = (int)strcspn(msg, "\n");

        snprintf(errstr, errstr_size, "kcat %s: exit %d: %.*s", what,
                 harness_exit_code(o->status), len, msg);
}

aagw_err_t harness_kcat_produce(const char *bootstraps, const char *topic,
                                const harness_record_t *recs, size_t cnt,
                                const char *const *headers, int partition,
                                int timeout_ms, char *errstr,
                                size_t errstr_size) {
        const char     **argv;
        char             part[16];
        char            *in  = NULL;
        size_t           len = 0, hcnt = 0, a = 0;
        FILE            *mem;
        harness_output_t o;
        aagw_err_t       rc;

        for (size_t i = 0; i < cnt; i++) {
                const char *k = recs[i].key, *v = recs[i].value;
                if (!v || strchr(v, KCAT_REC_SEP) || strchr(v, KCAT_KEY_SEP) ||
                    (k &&
                     (strchr(k, KCAT_REC_SEP) || strchr(k, KCAT_KEY_SEP)))) {
                        snprintf(errstr, errstr_size,
                                 "record %zu: no value, or \\x1e / \\x1f "
                                 "in key or value",
                                 i);
                        return AAGW_ERR_INVAL;
                }
                /* kcat silently skips an empty input record. */
                if (!k && !*v) {
                        snprintf(errstr, errstr_size,
                                 "record %zu: kcat can not send an empty "
                                 "value without a key",
                                 i);
                        return AAGW_ERR_INVAL;
                }
        }
        mem = open_memstream(&in, &len);
        if (!mem) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        /* Without the key separator kcat sends a NULL key. */
        for (size_t i = 0; i < cnt; i++) {
                if (recs[i].key)
                        fprintf(mem, "%s%c", recs[i].key, KCAT_KEY_SEP);
                fprintf(mem, "%s%c", recs[i].value, KCAT_REC_SEP);
        }
        if (fclose(mem) != 0) {
                free(in);
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }

        while (headers && headers[hcnt])
                hcnt++;
        argv = calloc(20 + 2 * hcnt, sizeof(*argv));
        if (!argv) {
                free(in);
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        argv[a++] = harness_kcat_bin();
        argv[a++] = "-P";
        argv[a++] = "-q";
        argv[a++] = "-b";
        argv[a++] = bootstraps;
        argv[a++] = "-t";
        argv[a++] = topic;
        argv[a++] = "-K";
        argv[a++] = KCAT_KEY_SEP_ARG;
        argv[a++] = "-D";
        argv[a++] = KCAT_REC_SEP_ARG;
        argv[a++] = "-X";
        argv[a++] = "reconnect.backoff.max.ms=1000";
        /* Retries after a fault-injected error must neither duplicate nor
         * reorder records, or order assertions would fail spuriously. */
        argv[a++] = "-X";
        argv[a++] = "enable.idempotence=true";
        for (size_t i = 0; i < hcnt; i++) {
                argv[a++] = "-H";
                argv[a++] = headers[i];
        }
        if (partition >= 0) {
                snprintf(part, sizeof(part), "%d", partition);
                argv[a++] = "-p";
                argv[a++] = part;
        }
        argv[a] = NULL;

        rc = harness_run(argv, in, len, timeout_ms, &o, errstr, errstr_size);
        if (rc == AAGW_OK && harness_exit_code(o.status) != 0) {
                kcat_failed("-P", &o, errstr, errstr_size);
                rc = AAGW_ERR_KAFKA;
        }
        harness_output_deinit(&o);
        free(argv);
        free(in);
        return rc;
}

aagw_err_t harness_kcat_consume(const char *bootstraps, const char *topic,
                                const char *format, int timeout_ms,
                                harness_lines_t *lines, char *errstr,
                                size_t errstr_size) {
        const char *argv[] = {harness_kcat_bin(), "-C", "-q", "-b", bootstraps,
                              "-t", topic, "-o", "beginning", "-e", "-f",
                              format, "-X", "reconnect.backoff.max.ms=1000",
                              /* -e needs one empty fetch per partition;
                               * the broker holds that for the full wait
                               * (default 500 ms, ~1 s end to end). */
                              "-X", "fetch.wait.max.ms=50", NULL};
        harness_output_t o;
        aagw_err_t       rc;

        memset(lines, 0, sizeof(*lines));
        rc = harness_run(argv, NULL, 0, timeout_ms, &o, errstr, errstr_size);
        if (rc == AAGW_OK && harness_exit_code(o.status) != 0) {
                /* A topic not made yet holds nothing: real brokers and
                 * the embedded ones (since librdkafka 2.x's mock honours
                 * a consumer's "do not auto-create") both say so. */
                if (o.err && strstr(o.err, "Unknown topic or partition")) {
                        harness_output_deinit(&o);
                        return AAGW_OK;
                }
                kcat_failed("-C", &o, errstr, errstr_size);
                rc = AAGW_ERR_KAFKA;
        }
        if (rc == AAGW_OK && harness_lines_split(o.out, lines) == -1) {
                snprintf(errstr, errstr_size, "out of memory");
                rc = AAGW_ERR_NOMEM;
        }
        harness_output_deinit(&o);
        return rc;
}

int harness_kcat_partition_cnt(const char *bootstraps, const char *topic,
                               int timeout_ms, char *errstr,
                               size_t errstr_size) {
        /* All topics, not `-t topic`: a metadata request naming a topic
         * makes the mock (and brokers with auto.create.topics.enable)
         * create it. */
        const char      *argv[] = {harness_kcat_bin(), "-L", "-q", "-b",
                                   bootstraps,         NULL};
        harness_output_t o;
        char            *needle;
        const char      *hit;
        int              cnt = -1;

        if (harness_run(argv, NULL, 0, timeout_ms, &o, errstr, errstr_size)) {
                harness_output_deinit(&o);
                return -1;
        }
        if (harness_exit_code(o.status) != 0) {
                kcat_failed("-L", &o, errstr, errstr_size);
                harness_output_deinit(&o);
                return -1;
        }
        if (asprintf(&needle, "topic \"%s\" with ", topic) == -1) {
                snprintf(errstr, errstr_size, "out of memory");
                harness_output_deinit(&o);
                return -1;
        }
        /* '  topic "clicks" with 8 partitions:' */
        hit = strstr(o.out, needle);
        if (!hit)
                cnt = 0;
        else if (sscanf(hit + strlen(needle), "%d", &cnt) != 1 || cnt < 0) {
                snprintf(errstr, errstr_size,
                         "kcat -L: cannot parse the line of topic %s", topic);
                cnt = -1;
        }
        free(needle);
        harness_output_deinit(&o);
        return cnt;
}

/* ------------------------------- CLUSTERS -------------------------------- */

struct harness_clusters {
        aagw_sandbox_t *sb; /* NULL for real clusters */
        size_t          cnt;
        char           *alias[AAGW_SANDBOX_MAX_CLUSTERS];
        char           *bootstraps[AAGW_SANDBOX_MAX_CLUSTERS]; /* real only */
        /* A secured listener for the gateway, if the cluster has one (real
         * only; NULL otherwise), its kind and the Java clients' settings
         * file. */
        char *gw_bootstraps[AAGW_SANDBOX_MAX_CLUSTERS];
        char *security[AAGW_SANDBOX_MAX_CLUSTERS];
        char *java_props[AAGW_SANDBOX_MAX_CLUSTERS];
        char *gw_props[AAGW_SANDBOX_MAX_CLUSTERS]; /* librdkafka's */
        /* What harness_clusters_gw_args() hands out: "--cluster",
         * "ALIAS=BOOTSTRAPS", then "--set", "clusters.ALIAS.properties.K=V"
         * per librdkafka setting; made once, so the pointers stay valid. */
        char  **gw_words[AAGW_SANDBOX_MAX_CLUSTERS];
        size_t  gw_nwords[AAGW_SANDBOX_MAX_CLUSTERS];
};

/* "<prefix>" + alias in upper case with '-' as '_', since shells do not
 * allow '-' in variable names. */
static void var_name(const char *prefix, const char *alias, char *buf,
                     size_t size) {
        size_t n = (size_t)snprintf(buf, size, "%s", prefix);

        for (; *alias && n + 1 < size; alias++)
                buf[n++] =
                    *alias == '-' ? '_' : (char)toupper((unsigned char)*alias);
        buf[n] = '\0';
}

/* Where the variables come from: the environment, or a file a launcher
 * wrote (scripts/kafka-clusters --env-file). */
struct var_src {
        const harness_bootstraps_t *file; /* NULL: getenv() */
};

static const char *var_get(const struct var_src *vs, const char *prefix,
                           const char *alias) {
        char        name[160];
        const char *v;

        var_name(prefix, alias, name, sizeof(name));
        v = vs->file ? harness_bootstraps_get(vs->file, name) : getenv(name);
        return v && *v ? v : NULL;
}

/* Append one malloc()ed word to cluster i's gateway words. */
static bool gw_word_add(harness_clusters_t *hc, size_t i, char *word) {
        char **v;

        if (!word)
                return false;
        v = realloc(hc->gw_words[i], (hc->gw_nwords[i] + 2) * sizeof(*v));
        if (!v) {
                free(word);
                return false;
        }
        v[hc->gw_nwords[i]++] = word;
        v[hc->gw_nwords[i]]   = NULL;
        hc->gw_words[i]       = v;
        return true;
}

static char *__attribute__((format(printf, 1, 2)))
str_printf(const char *fmt, ...) {
        va_list ap;
        char   *s;
        int     n;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0 || !(s = malloc((size_t)n + 1)))
                return NULL;
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
        return s;
}

/* Cluster i's gateway words: --cluster with the listener the gateway is
 * to use, and a --set per line of the librdkafka settings file 'props'
 * (NULL: none). */
static aagw_err_t gw_words_make(harness_clusters_t *hc, size_t i,
                                const char *props, char *errstr,
                                size_t errstr_size) {
        const char *alias = hc->alias[i];
        const char *bs    = harness_clusters_gw_bootstraps(hc, alias);
        harness_bootstraps_t *kv = NULL;
        char                  why[512];

        if (!gw_word_add(hc, i, strdup("--cluster")) ||
            !gw_word_add(hc, i, str_printf("%s=%s", alias, bs)))
                goto oom;
        if (!props)
                return AAGW_OK;
        /* key=value lines, the format of a bootstraps file. */
        if (!(kv = harness_bootstraps_load(props, why, sizeof(why)))) {
                snprintf(errstr, errstr_size,
                         "cluster %s: librdkafka settings: %s", alias, why);
                return AAGW_ERR_CONFIG;
        }
        for (size_t k = 0; k < harness_bootstraps_cnt(kv); k++) {
                const char *key = harness_bootstraps_alias(kv, k);

                if (!gw_word_add(hc, i, strdup("--set")) ||
                    !gw_word_add(hc, i,
                                 str_printf("clusters.%s.properties.%s=%s",
                                            alias, key,
                                            harness_bootstraps_get(kv, key)))) {
                        harness_bootstraps_destroy(kv);
                        goto oom;
                }
        }
        harness_bootstraps_destroy(kv);
        return AAGW_OK;
oom:
        snprintf(errstr, errstr_size, "out of memory");
        return AAGW_ERR_NOMEM;
}

static harness_clusters_t *clusters_new(const struct var_src *vs,
                                        const char *const *aliases,
                                        size_t alias_cnt, int brokers,
                                        char *errstr, size_t errstr_size) {
        harness_clusters_t *hc;
        size_t              set = 0;

        if (alias_cnt < 1 || alias_cnt > AAGW_SANDBOX_MAX_CLUSTERS) {
                snprintf(errstr, errstr_size,
                         "number of clusters must be 1..%d, not %zu",
                         AAGW_SANDBOX_MAX_CLUSTERS, alias_cnt);
                return NULL;
        }
        for (size_t i = 0; i < alias_cnt; i++)
                if (var_get(vs, "AAGW_TEST_BOOTSTRAPS_", aliases[i]))
                        set++;
        if (set != 0 && set != alias_cnt) {
                snprintf(errstr, errstr_size,
                         "AAGW_TEST_BOOTSTRAPS_<ALIAS> is set for %zu of %zu "
                         "clusters: set it for all of them or for none",
                         set, alias_cnt);
                return NULL;
        }
        if (set == 0 && vs->file) {
                snprintf(errstr, errstr_size,
                         "no AAGW_TEST_BOOTSTRAPS_<ALIAS> line for cluster %s",
                         aliases[0]);
                return NULL;
        }
        hc = calloc(1, sizeof(*hc));
        if (!hc) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        if (set == 0) {
                hc->sb = aagw_sandbox_new(aliases, alias_cnt, brokers, errstr,
                                          errstr_size);
                if (!hc->sb) {
                        free(hc);
                        return NULL;
                }
        }
        for (size_t i = 0; i < alias_cnt; i++) {
                const char *props = NULL;
                bool        ok;

                hc->cnt++;
                hc->alias[i] = strdup(aliases[i]);
                ok           = hc->alias[i] != NULL;
                if (!hc->sb && ok) {
                        const char *gw, *sec, *java;

                        hc->bootstraps[i] = strdup(
                            var_get(vs, "AAGW_TEST_BOOTSTRAPS_", aliases[i]));
                        ok &= hc->bootstraps[i] != NULL;
                        gw    = var_get(vs, "AAGW_TEST_GW_BOOTSTRAPS_",
                                        aliases[i]);
                        sec   = var_get(vs, "AAGW_TEST_SECURITY_", aliases[i]);
                        java  = var_get(vs, "AAGW_TEST_JAVA_PROPS_",
                                        aliases[i]);
                        props = var_get(vs, "AAGW_TEST_GW_PROPS_", aliases[i]);
                        if (gw)
                                ok &= !!(hc->gw_bootstraps[i] = strdup(gw));
                        if (sec)
                                ok &= !!(hc->security[i] = strdup(sec));
                        if (java)
                                ok &= !!(hc->java_props[i] = strdup(java));
                        if (props)
                                ok &= !!(hc->gw_props[i] = strdup(props));
                }
                if (!ok) {
                        snprintf(errstr, errstr_size, "out of memory");
                        harness_clusters_destroy(hc);
                        return NULL;
                }
                if (gw_words_make(hc, i, props, errstr, errstr_size)) {
                        harness_clusters_destroy(hc);
                        return NULL;
                }
        }
        return hc;
}

harness_clusters_t *harness_clusters_new(const char *const *aliases,
                                         size_t alias_cnt, int brokers,
                                         char *errstr, size_t errstr_size) {
        struct var_src vs = {NULL};

        return clusters_new(&vs, aliases, alias_cnt, brokers, errstr,
                            errstr_size);
}

harness_clusters_t *harness_clusters_load(const char        *env_file,
                                          const char *const *aliases,
                                          size_t alias_cnt, char *errstr,
                                          size_t errstr_size) {
        char                why[512];
        harness_clusters_t *hc;
        struct var_src      vs;

        vs.file = harness_bootstraps_load(env_file, why, sizeof(why));
        if (!vs.file) {
                snprintf(errstr, errstr_size, "%s", why);
                return NULL;
        }
        hc = clusters_new(&vs, aliases, alias_cnt, 1, errstr, errstr_size);
        harness_bootstraps_destroy((harness_bootstraps_t *)vs.file);
        return hc;
}

bool harness_clusters_are_real(const harness_clusters_t *hc) {
        return hc->sb == NULL;
}

static int alias_idx(const harness_clusters_t *hc, const char *alias) {
        for (size_t i = 0; i < hc->cnt; i++)
                if (!strcmp(hc->alias[i], alias))
                        return (int)i;
        return -1;
}

const char *harness_clusters_bootstraps(const harness_clusters_t *hc,
                                        const char               *alias) {
        int i;

        if (hc->sb)
                return aagw_sandbox_bootstraps(hc->sb, alias);
        i = alias_idx(hc, alias);
        return i < 0 ? NULL : hc->bootstraps[i];
}

const char *harness_clusters_gw_bootstraps(const harness_clusters_t *hc,
                                           const char               *alias) {
        int i = alias_idx(hc, alias);

        if (i >= 0 && hc->gw_bootstraps[i])
                return hc->gw_bootstraps[i];
        return harness_clusters_bootstraps(hc, alias);
}

size_t harness_clusters_gw_args(const harness_clusters_t *hc,
                                const char *alias, const char **argv,
                                size_t room) {
        int i = alias_idx(hc, alias);

        if (i < 0 || hc->gw_nwords[i] > room)
                return 0;
        for (size_t k = 0; k < hc->gw_nwords[i]; k++)
                argv[k] = hc->gw_words[i][k];
        return hc->gw_nwords[i];
}

const char *harness_clusters_security(const harness_clusters_t *hc,
                                      const char               *alias) {
        int i = alias_idx(hc, alias);

        return i >= 0 && hc->security[i] ? hc->security[i] : "plaintext";
}

const char *harness_clusters_java_props(const harness_clusters_t *hc,
                                        const char               *alias) {
        int i = alias_idx(hc, alias);

        return i >= 0 ? hc->java_props[i] : NULL;
}

const char *harness_clusters_gw_props(const harness_clusters_t *hc,
                                      const char               *alias) {
        int i = alias_idx(hc, alias);

        return i >= 0 ? hc->gw_props[i] : NULL;
}

aagw_sandbox_t *harness_clusters_sandbox(const harness_clusters_t *hc) {
        return hc->sb;
}

/* State of one "is the topic there yet?" poll on a real cluster. */
struct topic_probe {
        rd_kafka_t *rk;
        const char *topic;
        int         partitions; /* -1: not (fully) there yet */
};

/* True once metadata lists the topic with every partition led: only then
 * will a producer started right after not fail or stall on it. */
static bool topic_ready(void *arg) {
        struct topic_probe             *tp = arg;
        const struct rd_kafka_metadata *md;

        tp->partitions = -1;
        /* All topics: naming one could auto-create it. */
        if (rd_kafka_metadata(tp->rk, 1, NULL, &md, 5000))
                return false;
        for (int i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *t   = &md->topics[i];
                bool                                  led = !t->err;

                if (strcmp(t->topic, tp->topic))
                        continue;
                for (int p = 0; led && p < t->partition_cnt; p++)
                        led = t->partitions[p].leader >= 0;
                if (led && t->partition_cnt > 0)
                        tp->partitions = t->partition_cnt;
        }
        rd_kafka_metadata_destroy(md);
        return tp->partitions > 0;
}

/* CreateTopics on a real cluster with the broker's default replication
 * factor (-1, Kafka >= 2.4), then wait for the metadata to catch up. */
static aagw_err_t real_create_topic(const char *alias, const char *bootstraps,
                                    const char *topic, int partitions,
                                    char *errstr, size_t errstr_size) {
        rd_kafka_conf_t                *conf;
        rd_kafka_t                     *rk;
        rd_kafka_NewTopic_t            *nt;
        rd_kafka_AdminOptions_t        *opts;
        rd_kafka_queue_t               *q;
        rd_kafka_event_t               *ev;
        const rd_kafka_topic_result_t **res;
        size_t                          res_cnt = 0;
        struct topic_probe              tp;
        char                            why[512];
        aagw_err_t                      rc = AAGW_OK;

        conf = aagw_kafka_conf_new(bootstraps, "test-admin", why, sizeof(why));
        if (!conf) {
                snprintf(errstr, errstr_size, "cluster %s: %s", alias, why);
                return AAGW_ERR_CONFIG;
        }
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
        if (!rk) {
                rd_kafka_conf_destroy(conf);
                snprintf(errstr, errstr_size, "cluster %s: %s", alias, why);
                return AAGW_ERR_KAFKA;
        }
        nt = rd_kafka_NewTopic_new(topic, partitions, -1, why, sizeof(why));
        if (!nt) {
                snprintf(errstr, errstr_size, "cluster %s: topic %s: %s", alias,
                         topic, why);
                rd_kafka_destroy(rk);
                return AAGW_ERR_CONFIG;
        }
        opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_request_timeout(opts, 30000, NULL, 0);
        rd_kafka_AdminOptions_set_operation_timeout(opts, 30000, NULL, 0);
        q = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, opts, q);
        ev = rd_kafka_queue_poll(q, 35000);
        if (!ev) {
                snprintf(errstr, errstr_size,
                         "cluster %s: CreateTopics %s: no answer in 35 s",
                         alias, topic);
                rc = AAGW_ERR_TIMEOUT;
        } else if (rd_kafka_event_error(ev)) {
                snprintf(errstr, errstr_size, "cluster %s: CreateTopics %s: %s",
                         alias, topic, rd_kafka_event_error_string(ev));
                rc = AAGW_ERR_KAFKA;
        } else {
                res = rd_kafka_CreateTopics_result_topics(
                    rd_kafka_event_CreateTopics_result(ev), &res_cnt);
                if (res_cnt == 1 && rd_kafka_topic_result_error(res[0]) &&
                    rd_kafka_topic_result_error(res[0]) !=
                        RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                        snprintf(errstr, errstr_size,
                                 "cluster %s: CreateTopics %s: %s", alias,
                                 topic,
                                 rd_kafka_topic_result_error_string(res[0]));
                        rc = AAGW_ERR_KAFKA;
                }
        }
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(opts);
        rd_kafka_NewTopic_destroy(nt);

        if (rc == AAGW_OK) {
                tp = (struct topic_probe){rk, topic, -1};
                if (!harness_wait_until(topic_ready, &tp, 30000)) {
                        snprintf(errstr, errstr_size,
                                 "cluster %s: topic %s not in the metadata "
                                 "after 30 s",
                                 alias, topic);
                        rc = AAGW_ERR_TIMEOUT;
                } else if (tp.partitions != partitions) {
                        snprintf(errstr, errstr_size,
                                 "cluster %s: topic %s already exists with %d "
                                 "partitions, not %d",
                                 alias, topic, tp.partitions, partitions);
                        rc = AAGW_ERR_CONFIG;
                }
        }
        rd_kafka_destroy(rk);
        return rc;
}

aagw_err_t harness_clusters_create_topic(harness_clusters_t *hc,
                                         const char *alias, const char *topic,
                                         int partitions, char *errstr,
                                         size_t errstr_size) {
        bool found = false;

        /* The mock creates synchronously: its metadata is right at once. */
        if (hc->sb)
                return aagw_sandbox_create_topic(
                    hc->sb, alias, topic, partitions, errstr, errstr_size);
        for (size_t i = 0; i < hc->cnt; i++) {
                aagw_err_t rc;

                if (alias && strcmp(alias, hc->alias[i]))
                        continue;
                found = true;
                rc = real_create_topic(hc->alias[i], hc->bootstraps[i], topic,
                                       partitions, errstr, errstr_size);
                if (rc)
                        return rc;
        }
        if (!found) {
                snprintf(errstr, errstr_size, "no cluster '%s'", alias);
                return AAGW_ERR_NOENT;
        }
        return AAGW_OK;
}

void harness_clusters_destroy(harness_clusters_t *hc) {
        if (!hc)
                return;
        aagw_sandbox_destroy(hc->sb);
        for (size_t i = 0; i < hc->cnt; i++) {
                free(hc->alias[i]);
                free(hc->bootstraps[i]);
                free(hc->gw_bootstraps[i]);
                free(hc->security[i]);
                free(hc->java_props[i]);
                free(hc->gw_props[i]);
                for (size_t k = 0; k < hc->gw_nwords[i]; k++)
                        free(hc->gw_words[i][k]);
                free(hc->gw_words[i]);
        }
        free(hc);
}
