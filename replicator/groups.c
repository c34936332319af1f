/*
 * replicator/groups.c: consumer groups through the Admin API (committed
 * offsets, commits) and the child probes that list groups and members
 * (a child process each: librdkafka 2.0 could hang in those calls, and
 * 2.8.0 aborts the whole process when its embedded mock cluster answers
 * DescribeConsumerGroups, which the demo and the mock suites run on; a
 * child can be killed, and its abort is only a missing answer).
 */
#include "replicator_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* The mm2 thread's stop flag, for the blocking calls below when they run
 * on it (NULL on any other thread: the commands wait their timeouts). */
static _Thread_local atomic_bool *cancel_flag;

static bool cancelled(void) {
        return cancel_flag && atomic_load(cancel_flag);
}

void groups_cancel_on(atomic_bool *flag) {
        cancel_flag = flag;
}

/* -------------------------------------------------------- GROUP OFFSETS -- */

/* Wait for an admin result; the error text of a failed one goes to
 * errstr.  Returns the event (caller destroys) or NULL. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, int timeout_ms,
                                    const char *what, char *errstr,
                                    size_t errstr_size) {
        rd_kafka_event_t *ev = NULL;
        /* In slices, so that a stopping mm2 thread need not wait out an
         * unreachable cluster's timeout. */
        for (int waited = 0; !ev && waited < timeout_ms + 1000; waited += 100) {
                if (cancelled()) {
                        snprintf(errstr, errstr_size, "%s: stopping", what);
                        return NULL;
                }
                ev = rd_kafka_queue_poll(q, 100);
        }
        if (!ev) {
                snprintf(errstr, errstr_size, "%s: no answer within %d ms",
                         what, timeout_ms);
                return NULL;
        }
        if (rd_kafka_event_error(ev)) {
                snprintf(errstr, errstr_size, "%s: %s", what,
                         rd_kafka_event_error_string(ev));
                rd_kafka_event_destroy(ev);
                return NULL;
        }
        return ev;
}

/* The commit's metadata string, into a list element librdkafka frees. */
static void copy_metadata(rd_kafka_topic_partition_t       *dst,
                          const rd_kafka_topic_partition_t *src) {
        free(dst->metadata);
        dst->metadata      = NULL;
        dst->metadata_size = 0;
        if (src->metadata && src->metadata_size &&
            (dst->metadata = malloc(src->metadata_size))) {
                memcpy(dst->metadata, src->metadata, src->metadata_size);
                dst->metadata_size = src->metadata_size;
        }
}

/* Options for one Admin call of kind @p op that waits @p timeout_ms. */
static rd_kafka_AdminOptions_t *admin_options(rd_kafka_t *rk,
                                              rd_kafka_admin_op_t op,
                                              int timeout_ms) {
        rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, op);
        char                     e[256];

        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, e, sizeof(e));
        return o;
}

/* Free what an Admin call leaves: its event (NULL if none came), options
 * and queue. */
static void admin_done(rd_kafka_event_t *ev, rd_kafka_AdminOptions_t *o,
                       rd_kafka_queue_t *q) {
        if (ev)
                rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
}

/* The groups a group call's result event answered for
 * (rd_kafka_ListConsumerGroupOffsets_result_groups() and its like: their
 * result types are the event). */
typedef const rd_kafka_group_result_t **group_results_t(
    const rd_kafka_event_t *result, size_t *cnt);

/* Wait on @p q for the answer of call @p what on @p group's offsets.
 * @returns true with the partitions it answered (NULL: none) in *@p got,
 * or false with "<what>[ <group>]: <why>" in @p errstr.  *@p ev is the
 * event, which the caller destroys (NULL if none came). */
static bool group_answer(rd_kafka_queue_t *q, int timeout_ms, const char *what,
                         group_results_t *results, const char *group,
                         rd_kafka_event_t                      **ev,
                         const rd_kafka_topic_partition_list_t **got,
                         char *errstr, size_t errstr_size) {
        const rd_kafka_group_result_t **gr;
        const rd_kafka_error_t         *ge;
        size_t                          n = 0;

        *got = NULL;
        if (!(*ev = admin_wait(q, timeout_ms, what, errstr, errstr_size)))
                return false;
        gr = results(*ev, &n);
        ge = n ? rd_kafka_group_result_error(gr[0]) : NULL;
        if (!n || ge) {
                snprintf(errstr, errstr_size, "%s %s: %s", what, group,
                         ge ? rd_kafka_error_string(ge) : "empty answer");
                return false;
        }
        *got = rd_kafka_group_result_partitions(gr[0]);
        return true;
}

aagw_err_t aagw_kafka_group_offsets(rd_kafka_t *admin, const char *group,
                                    rd_kafka_topic_partition_list_t *parts,
                                    int timeout_ms, char *errstr,
                                    size_t errstr_size) {
        rd_kafka_queue_t        *q = rd_kafka_queue_new(admin);
        rd_kafka_AdminOptions_t *o = admin_options(
            admin, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS, timeout_ms);
        rd_kafka_ListConsumerGroupOffsets_t *req =
            rd_kafka_ListConsumerGroupOffsets_new(group, parts);
        const rd_kafka_topic_partition_list_t *got;
        rd_kafka_event_t                      *ev;

        rd_kafka_ListConsumerGroupOffsets(admin, &req, 1, o, q);
        bool ok = group_answer(q, timeout_ms, "ListConsumerGroupOffsets",
                               rd_kafka_ListConsumerGroupOffsets_result_groups,
                               group, &ev, &got, errstr, errstr_size);
        for (int i = 0; ok && i < parts->cnt; i++) {
                rd_kafka_topic_partition_t *tp = &parts->elems[i];

                tp->offset = RD_KAFKA_OFFSET_INVALID;
                for (int k = 0; got && k < got->cnt; k++)
                        if (got->elems[k].partition == tp->partition &&
                            !strcmp(got->elems[k].topic, tp->topic)) {
                                tp->offset = got->elems[k].offset;
                                tp->err    = got->elems[k].err;
                                copy_metadata(tp, &got->elems[k]);
                        }
        }
        admin_done(ev, o, q);
        rd_kafka_ListConsumerGroupOffsets_destroy(req);
        return ok ? AAGW_OK : AAGW_ERR_KAFKA;
}

aagw_err_t aagw_kafka_group_commit(rd_kafka_t *admin, const char *group,
                                   const rd_kafka_topic_partition_list_t *parts,
                                   int timeout_ms, char *errstr,
                                   size_t errstr_size) {
        rd_kafka_queue_t        *q = rd_kafka_queue_new(admin);
        rd_kafka_AdminOptions_t *o = admin_options(
            admin, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS, timeout_ms);
        rd_kafka_AlterConsumerGroupOffsets_t *req =
            rd_kafka_AlterConsumerGroupOffsets_new(group, parts);
        const rd_kafka_topic_partition_list_t *got;
        rd_kafka_event_t                      *ev;

        rd_kafka_AlterConsumerGroupOffsets(admin, &req, 1, o, q);
        bool ok = group_answer(q, timeout_ms, "AlterConsumerGroupOffsets",
                               rd_kafka_AlterConsumerGroupOffsets_result_groups,
                               group, &ev, &got, errstr, errstr_size);
        for (int i = 0; ok && got && i < got->cnt; i++)
                if (got->elems[i].err) {
                        snprintf(errstr, errstr_size,
                                 "commit %s [%d] for group %s: %s (a group "
                                 "with active members refuses it)",
                                 got->elems[i].topic,
                                 (int)got->elems[i].partition, group,
                                 rd_kafka_err2str(got->elems[i].err));
                        ok = false;
                }
        admin_done(ev, o, q);
        rd_kafka_AlterConsumerGroupOffsets_destroy(req);
        return ok ? AAGW_OK : AAGW_ERR_KAFKA;
}

/* ------------------------------------------------------- MEMBERS PROBE -- */

int aagw_kafka_group_members_probe(const char        *bootstraps,
                                   const char *const *props, size_t prop_cnt,
                                   const char *group, int timeout_ms) {
        char             err[512];
        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(bootstraps, "probe", err, sizeof(err));
        rd_kafka_t *rk;

        if (!conf || aagw_kafka_conf_apply(conf, "admin", props, prop_cnt, err,
                                           sizeof(err))) {
                printf("error %s\n", err);
                return 1;
        }
        if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
                printf("error %s\n", err);
                return 1;
        }
        rd_kafka_queue_t        *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o =
            admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
                          timeout_ms);
        const char *groups[] = {group};
        rd_kafka_DescribeConsumerGroups(rk, groups, 1, o, q);
        rd_kafka_event_t *ev = admin_wait(
            q, timeout_ms, "DescribeConsumerGroups", err, sizeof(err));
        if (!ev) {
                printf("unsupported %s\n", err);
                fflush(stdout);
                _exit(0); /* the handle may hang: do not destroy it */
        }
        size_t                                      n = 0;
        const rd_kafka_ConsumerGroupDescription_t **d =
            rd_kafka_DescribeConsumerGroups_result_groups(
                rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
        const rd_kafka_error_t *ge =
            n ? rd_kafka_ConsumerGroupDescription_error(d[0]) : NULL;
        if (!n || ge)
                printf("unsupported %s\n",
                       ge ? rd_kafka_error_string(ge) : "empty answer");
        else if (rd_kafka_ConsumerGroupDescription_state(d[0]) ==
                 RD_KAFKA_CONSUMER_GROUP_STATE_UNKNOWN)
                printf("unsupported group state unknown\n");
        else
                printf("members %zu\n",
                       rd_kafka_ConsumerGroupDescription_member_count(d[0]));
        fflush(stdout);
        _exit(0);
}

/* Write 'len' bytes of 'p' to 'fd' without dying of SIGPIPE if the reader
 * is gone (the signal is blocked in this thread for the write, and a
 * pending one taken back).  false if not everything was written. */
static bool write_all_quiet(int fd, const char *p, size_t len) {
        sigset_t        pipe_set, old;
        struct timespec zero = {0, 0};
        bool            ok   = true;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        while (len) {
                ssize_t w = write(fd, p, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        ok = false;
                        break;
                }
                p += w;
                len -= (size_t)w;
        }
        if (!ok && errno == EPIPE)
                while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
                        ;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return ok;
}

/* ----------------------------------------------- THE CHILD'S ENVIRONMENT -- */

/* Variables the children must not inherit (aagw_kafka_child_env_hide()):
 * set once at start-up, read by every prober thread after. */
static char **hidden_vars;
static size_t hidden_cnt;

aagw_err_t aagw_kafka_child_env_hide(const char *const *names, size_t cnt) {
        char **v = cnt ? calloc(cnt, sizeof(*v)) : NULL;

        if (cnt && !v)
                return AAGW_ERR_NOMEM;
        for (size_t i = 0; i < cnt; i++)
                if (!(v[i] = strdup(names[i]))) {
                        while (i--)
                                free(v[i]);
                        free(v);
                        return AAGW_ERR_NOMEM;
                }
        for (size_t i = 0; i < hidden_cnt; i++)
                free(hidden_vars[i]);
        free(hidden_vars);
        hidden_vars = v;
        hidden_cnt  = cnt;
        return AAGW_OK;
}

/* True if the environment entry 'entry' ("NAME=value") is a hidden one. */
static bool env_hidden(const char *entry) {
        size_t n = strcspn(entry, "=");

        for (size_t i = 0; i < hidden_cnt; i++)
                if (strlen(hidden_vars[i]) == n &&
                    !strncmp(entry, hidden_vars[i], n))
                        return true;
        return false;
}

/* The environment for a child: this process's, less the hidden variables.
 * A malloc()ed array of borrowed entries, built before fork() (the child
 * of a threaded process may not allocate), or NULL when out of memory. */
static char **child_env(void) {
        size_t n = 0, o = 0;
        char **env;

        while (environ[n])
                n++;
        if (!(env = malloc((n + 1) * sizeof(*env))))
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!env_hidden(environ[i]))
                        env[o++] = environ[i];
        env[o] = NULL;
        return env;
}

/*
 * Run 'argv' with the client properties on its stdin and its stdout to a
 * pipe; collect up to 'size' - 1 bytes until EOF or 'timeout_ms', then
 * SIGKILL and reap it.  The properties (NAME NUL VALUE NUL ...) go
 * through the pipe, never the command line: argv is world-readable in
 * /proc/PID/cmdline and ps, and the properties hold passwords.
 */
static void run_child(const char *self_exe, const char **argv,
                      const char *const *props, size_t prop_cnt, char *buf,
                      size_t size, int timeout_ms) {
        int    fds[2], in[2];
        size_t len = 0;
        pid_t  pid;
        char **env;

        buf[0] = '\0';
        /* No environment, no child: better no answer than a child that
         * holds the secrets the config read from the environment. */
        if (!(env = child_env()))
                return;
        /* Close-on-exec: a child that another thread forks meanwhile must
         * not inherit them (a stray write end would keep the probe from
         * seeing the end of its stdin).  dup2() clears the flag on 0, 1. */
        if (pipe2(fds, O_CLOEXEC)) {
                free(env);
                return;
        }
        if (pipe2(in, O_CLOEXEC)) {
                close(fds[0]);
                close(fds[1]);
                free(env);
                return;
        }
        pid = fork();
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(fds[1], 1);
                close(in[0]);
                close(in[1]);
                close(fds[0]);
                close(fds[1]);
                execve(self_exe, (char *const *)argv, env);
                _exit(127);
        }
        free(env);
        close(fds[1]);
        close(in[0]);
        if (pid < 0) {
                close(fds[0]);
                close(in[1]);
                return;
        }
        /* The child reads every property before it does anything else. */
        for (size_t i = 0; i < 2 * prop_cnt; i++)
                if (!write_all_quiet(in[1], props[i], strlen(props[i]) + 1))
                        break;
        close(in[1]);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                fd_set         rs;
                struct timeval tv = {0, 100000};
                FD_ZERO(&rs);
                FD_SET(fds[0], &rs);
                if (select(fds[0] + 1, &rs, NULL, NULL, &tv) > 0) {
                        ssize_t r = read(fds[0], buf + len, size - 1 - len);
                        if (r <= 0)
                                break;
                        len += (size_t)r;
                        if (len == size - 1)
                                break;
                }
                clock_gettime(CLOCK_MONOTONIC, &t);
                if ((t.tv_sec - t0.tv_sec) * 1000 +
                            (t.tv_nsec - t0.tv_nsec) / 1000000 >
                        timeout_ms + 3000 ||
                    cancelled())
                        break;
        }
        buf[len] = '\0';
        close(fds[0]);
        kill(pid, SIGKILL);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
}

int aagw_kafka_list_groups_probe(const char        *bootstraps,
                                 const char *const *props, size_t prop_cnt,
                                 int timeout_ms) {
        char             err[512];
        rd_kafka_conf_t *conf =
            aagw_kafka_conf_new(bootstraps, "probe", err, sizeof(err));
        rd_kafka_t *rk;

        if (!conf ||
            aagw_kafka_conf_apply(conf, "admin", props, prop_cnt, err,
                                  sizeof(err)) ||
            !(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
                printf("unsupported %s\n", err);
                return 1;
        }
        rd_kafka_queue_t        *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o = admin_options(
            rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS, timeout_ms);
        rd_kafka_ListConsumerGroups(rk, o, q);
        rd_kafka_event_t *ev =
            admin_wait(q, timeout_ms, "ListConsumerGroups", err, sizeof(err));
        size_t                                      cnt = 0, nerr = 0;
        const rd_kafka_ListConsumerGroups_result_t *r =
            ev ? rd_kafka_event_ListConsumerGroups_result(ev) : NULL;
        const rd_kafka_ConsumerGroupListing_t **ls =
            r ? rd_kafka_ListConsumerGroups_result_valid(r, &cnt) : NULL;
        const rd_kafka_error_t **errs =
            r ? rd_kafka_ListConsumerGroups_result_errors(r, &nerr) : NULL;
        if (!ev)
                printf("unsupported %s\n", err);
        else if (nerr && !cnt)
                printf("unsupported ListConsumerGroups: %s\n",
                       rd_kafka_error_string(errs[0]));
        else {
                printf("groups %zu\n", cnt);
                for (size_t i = 0; i < cnt; i++)
                        printf("%s\n",
                               rd_kafka_ConsumerGroupListing_group_id(ls[i]));
        }
        fflush(stdout);
        _exit(0); /* the handle may be broken: do not destroy it */
}

aagw_err_t aagw_kafka_list_groups(const char *self_exe, const char *bootstraps,
                                  const char *const *props, size_t prop_cnt,
                                  int timeout_ms, char ***groups, size_t *cnt,
                                  char *errstr, size_t errstr_size) {
        char         tmo[32], *buf = malloc(65536);
        const char **argv = calloc(8, sizeof(*argv));
        size_t       a = 0, n = 0;

        *groups = NULL;
        *cnt    = 0;
        if (!buf || !argv) {
                free(buf);
                free(argv);
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        snprintf(tmo, sizeof(tmo), "%d", timeout_ms);
        argv[a++] = self_exe;
        argv[a++] = "offsets";
        argv[a++] = "probe-groups";
        argv[a++] = bootstraps;
        argv[a++] = tmo;
        argv[a]   = NULL;
        run_child(self_exe, argv, props, prop_cnt, buf, 65536, timeout_ms);
        free(argv);
        if (strncmp(buf, "groups ", 7)) {
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(errstr, errstr_size, "%s",
                         !strncmp(buf, "unsupported ", 12)
                             ? buf + 12
                             : "no answer (the call hangs or aborts on some "
                               "clusters)");
                free(buf);
                return AAGW_ERR_UNSUPPORTED;
        }
        size_t want = strtoul(buf + 7, NULL, 10);
        char **v    = calloc(want + 1, sizeof(*v));
        char  *line = strchr(buf, '\n');
        while (v && line && n < want) {
                char *end = strchr(line + 1, '\n');
                if (!end)
                        break; /* cut off: not a whole line */
                *end   = '\0';
                v[n++] = strdup(line + 1);
                line   = end;
        }
        free(buf);
        *groups = v;
        *cnt    = n;
        return AAGW_OK;
}

aagw_err_t aagw_kafka_group_members(const char        *self_exe,
                                    const char        *bootstraps,
                                    const char *const *props, size_t prop_cnt,
                                    const char *group, int timeout_ms,
                                    int *members, char *errstr,
                                    size_t errstr_size) {
        char         buf[1024], tmo[32];
        const char **argv = calloc(8, sizeof(*argv));
        size_t       a    = 0;

        if (!argv) {
                snprintf(errstr, errstr_size, "out of memory");
                return AAGW_ERR_NOMEM;
        }
        snprintf(tmo, sizeof(tmo), "%d", timeout_ms);
        argv[a++] = self_exe;
        argv[a++] = "offsets";
        argv[a++] = "probe-group";
        argv[a++] = bootstraps;
        argv[a++] = group;
        argv[a++] = tmo;
        argv[a]   = NULL;
        run_child(self_exe, argv, props, prop_cnt, buf, sizeof(buf),
                  timeout_ms);
        free(argv);
        buf[strcspn(buf, "\n")] = '\0';
        if (!strncmp(buf, "members ", 8)) {
                *members = atoi(buf + 8);
                return AAGW_OK;
        }
        if (!strncmp(buf, "unsupported ", 12)) {
                snprintf(errstr, errstr_size, "DescribeConsumerGroups: %s",
                         buf + 12);
                return AAGW_ERR_UNSUPPORTED;
        }
        snprintf(errstr, errstr_size,
                 "DescribeConsumerGroups gave no answer within %d ms%s%.200s "
                 "(the call hangs or aborts on some clusters, the embedded "
                 "one among them)",
                 timeout_ms, buf[0] ? ": " : "", buf);
        return AAGW_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------ THE CHILD -- */

/* Read NAME NUL VALUE NUL ... from stdin to EOF (the parent's pipe). */
static char **read_props(size_t *pairs) {
        char  *buf = NULL, **kv = NULL;
        size_t len = 0, cap = 0, n = 0;

        *pairs = 0;
        for (;;) {
                if (len == cap) {
                        char *nb = realloc(buf, cap ? cap * 2 : 4096);
                        if (!nb)
                                goto fail;
                        buf = nb;
                        cap = cap ? cap * 2 : 4096;
                }
                ssize_t r = read(0, buf + len, cap - len);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        goto fail;
                if (r == 0)
                        break;
                len += (size_t)r;
        }
        for (size_t i = 0; i < len; i++)
                n += buf[i] == '\0';
        if (n % 2 || (len && buf[len - 1]))
                goto fail; /* cut off */
        if (!(kv = calloc(n + 1, sizeof(*kv))))
                goto fail;
        for (size_t i = 0, at = 0; i < n; i++) {
                kv[i] = buf + at; /* into buf, which stays allocated */
                at += strlen(buf + at) + 1;
        }
        *pairs = n / 2;
        if (!n)
                free(buf);
        return kv;
fail:
        free(buf);
        free(kv);
        return NULL;
}

int aagw_kafka_probe_main(int argc, char **argv) {
        size_t pairs;
        char **kv;

        if (argc < 2)
                return 2;
        if (!(kv = read_props(&pairs))) {
                printf("unsupported cannot read the client properties\n");
                return 1;
        }
        /* probe-group BOOTSTRAPS GROUP TIMEOUT_MS */
        if (!strcmp(argv[1], "probe-group") && argc == 5)
                return aagw_kafka_group_members_probe(
                    argv[2], (const char *const *)kv, pairs, argv[3],
                    atoi(argv[4]));
        /* probe-groups BOOTSTRAPS TIMEOUT_MS */
        if (!strcmp(argv[1], "probe-groups") && argc == 4)
                return aagw_kafka_list_groups_probe(
                    argv[2], (const char *const *)kv, pairs, atoi(argv[3]));
        return 2;
}
