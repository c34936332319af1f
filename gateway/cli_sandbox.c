/* gateway/cli_sandbox.c: `aagw sandbox`, embedded Kafka clusters on
 * loopback for trying aagw, kcat or any other client by hand, and for
 * scripts and tests that need clusters in another process.
 *
 * The command validates everything before it starts a cluster, prints the
 * bootstraps (and writes them to a file if asked) once every topic exists,
 * then idles until SIGINT or SIGTERM. */
#include "gateway_int.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CLUSTERS "east,west"
#define DEFAULT_BROKERS 3
#define DEFAULT_PARTITIONS 8

static void usage(FILE *out) {
        fprintf(out,
                "Usage: aagw sandbox [OPTIONS]\n"
                "\n"
                "Start embedded Kafka clusters (librdkafka mock brokers) on "
                "127.0.0.1, print\n"
                "one `alias=bootstraps` line per cluster on stdout, and run "
                "until SIGINT\n"
                "(Ctrl-C) or SIGTERM.  Data is kept in memory only (about 5 "
                "MiB per\n"
                "partition) and is gone when the sandbox stops.\n"
                "\n"
                "Options:\n"
                "  -c, --clusters A,B,...   cluster aliases, 1..%d of "
                "[A-Za-z0-9_-]+\n"
                "                           (default: %s)\n"
                "  -b, --brokers N          brokers per cluster, 1..16 "
                "(default: %d)\n"
                "  -p, --partitions N       partitions of every --topic, "
                "1..10000 (default: %d)\n"
                "  -t, --topic NAME         create NAME on every cluster; "
                "repeat for more topics\n"
                "  -f, --bootstraps-file F  also write the bootstraps lines "
                "to F, atomically;\n"
                "                           F is removed again on exit\n"
                "  -l, --log-level LEVEL    debug, info, warn, error or off "
                "(default: info)\n"
                "  -h, --help               print this help and exit\n"
                "\n"
                "Example:\n"
                "  aagw sandbox --topic clicks --bootstraps-file /tmp/aagw.bs "
                "&\n"
                "  kcat -L -b \"$(sed -n 's/^east=//p' /tmp/aagw.bs)\"\n",
                AAGW_SANDBOX_MAX_CLUSTERS, DEFAULT_CLUSTERS, DEFAULT_BROKERS,
                DEFAULT_PARTITIONS);
}

/* Report a usage error the way every aagw command does: "aagw: reason",
 * then the usage, on stderr.  @returns EXIT_USAGE. */
static int misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int misuse(const char *fmt, ...) {
        char    msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        gw_errorf("%s", msg);
        usage(stderr);
        return EXIT_USAGE;
}

/* Parse a whole decimal integer in [min, max]; "8x", "" and "99999999999"
 * are rejected rather than silently truncated. */
static bool parse_int(const char *s, int min, int max, int *out) {
        char *end;
        long  v;

        errno = 0;
        v     = strtol(s, &end, 10);
        if (errno || end == s || *end != '\0' || v < min || v > max)
                return false;
        *out = (int)v;
        return true;
}

/* Same rules as the sandbox applies.  Checked here too so that a bad alias
 * is a usage error (exit 2) found before any cluster starts, rather than a
 * runtime failure (exit 1). */
static bool name_ok(const char *s, const char *extra, size_t max_len) {
        size_t len = strlen(s);

        if (len == 0 || len > max_len)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || strchr(extra, c)))
                        return false;
        }
        return true;
}

/* @returns true if 's' is one of the 'cnt' strings in 'v'. */
static bool str_in(const char *const *v, size_t cnt, const char *s) {
        for (size_t i = 0; i < cnt; i++)
                if (!strcmp(v[i], s))
                        return true;
        return false;
}

/* Split 'list' ("east,west") in place into 'aliases'.  @returns the count,
 * or -1 after printing the usage error. */
static int split_aliases(char *list, const char **aliases, size_t max) {
        size_t cnt = 0;
        char  *p   = list;

        for (;;) {
                char *comma = strchr(p, ',');

                if (comma)
                        *comma = '\0';
                if (!name_ok(p, "_-", 64)) {
                        misuse("--clusters: invalid alias '%s': use 1..64 of "
                               "A-Z a-z 0-9 _ -",
                               p);
                        return -1;
                }
                if (str_in(aliases, cnt, p)) {
                        misuse("--clusters: duplicate alias '%s'", p);
                        return -1;
                }
                if (cnt == max) {
                        misuse("--clusters: at most %zu clusters", max);
                        return -1;
                }
                aliases[cnt++] = p;
                if (!comma)
                        break;
                p = comma + 1;
        }
        return (int)cnt;
}

/* The option getopt_long() just refused, as the user typed it.  A long
 * option is the whole word getopt moved past ("--bogus", "--help=x"); a
 * short one is shown by its letter, because its word may hold several
 * ("-xh") and getopt does not always move past it.  'prev_optind' is
 * optind before the call; 'buf' holds at least 3 bytes. */
static const char *bad_opt(char **argv, int prev_optind, char *buf) {
        if (optind > prev_optind && !strncmp(argv[optind - 1], "--", 2))
                return argv[optind - 1];
        if (!optopt)
                return "?";
        buf[0] = '-';
        buf[1] = (char)optopt;
        buf[2] = '\0';
        return buf;
}

/* @returns true if we may create files in the directory of 'path'. */
static bool dir_writable(const char *path) {
        char  dir[PATH_MAX];
        char *slash;

        if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
                errno = ENAMETOOLONG;
                return false;
        }
        slash = strrchr(dir, '/');
        if (!slash)
                return access(".", W_OK | X_OK) == 0;
        slash[slash == dir ? 1 : 0] = '\0';
        return access(dir, W_OK | X_OK) == 0;
}

/* The bootstraps file is ours to remove on exit, but only while it is still
 * the file we wrote: if someone replaced it meanwhile, it is theirs. */
static void remove_own_file(const char *path, const struct stat *mine) {
        struct stat st;

        if (stat(path, &st) == 0 && st.st_dev == mine->st_dev &&
            st.st_ino == mine->st_ino && unlink(path) == -1)
                aagw_log(AAGW_LOG_WARN, "SANDBOX", "cannot remove %s: %s", path,
                         strerror(errno));
}

int gw_cmd_sandbox(int argc, char **argv) {
        static const struct option longopts[] = {
            {"clusters", required_argument, NULL, 'c'},
            {"brokers", required_argument, NULL, 'b'},
            {"partitions", required_argument, NULL, 'p'},
            {"topic", required_argument, NULL, 't'},
            {"bootstraps-file", required_argument, NULL, 'f'},
            {"log-level", required_argument, NULL, 'l'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char     *aliases[AAGW_SANDBOX_MAX_CLUSTERS];
        char            clusters_buf[1024];
        const char     *clusters   = DEFAULT_CLUSTERS;
        int             brokers    = DEFAULT_BROKERS;
        int             partitions = DEFAULT_PARTITIONS;
        const char     *bs_file    = NULL;
        int             level      = AAGW_LOG_INFO;
        const char    **topics;
        size_t          topic_cnt = 0;
        aagw_sandbox_t *sb;
        struct stat     bs_stat;
        char            errstr[512];
        char            what[64];
        int             alias_cnt;
        char            oname[3];
        int             opt, prev_optind;
        int             rc = EXIT_RUNTIME;

        /* Every --topic could be a topic: argc bounds the count. */
        topics = calloc((size_t)argc + 1, sizeof(*topics));
        if (!topics) {
                gw_errorf("out of memory");
                return EXIT_RUNTIME;
        }
        /* 0 makes glibc re-initialise getopt, in case another command
         * parsed before us in this process (tests do that). */
        optind      = 0;
        opterr      = 0;
        prev_optind = 1;
        while ((opt = getopt_long(argc, argv, ":c:b:p:t:f:l:h", longopts,
                                  NULL)) != -1) {
                switch (opt) {
                case 'c':
                        clusters = optarg;
                        break;
                case 'b':
                        if (!parse_int(optarg, 1, 16, &brokers)) {
                                rc = misuse("--brokers: expected an integer "
                                            "1..16, got '%s'",
                                            optarg);
                                goto out;
                        }
                        break;
                case 'p':
                        if (!parse_int(optarg, 1, 10000, &partitions)) {
                                rc = misuse("--partitions: expected an "
                                            "integer 1..10000, got '%s'",
                                            optarg);
                                goto out;
                        }
                        break;
                case 't':
                        if (!name_ok(optarg, "._-", 249) ||
                            !strcmp(optarg, ".") || !strcmp(optarg, "..")) {
                                rc = misuse("--topic: invalid topic name "
                                            "'%s': use 1..249 of A-Z a-z "
                                            "0-9 . _ -",
                                            optarg);
                                goto out;
                        }
                        if (!str_in(topics, topic_cnt, optarg))
                                topics[topic_cnt++] = optarg;
                        break;
                case 'f':
                        if (!*optarg) {
                                rc = misuse("--bootstraps-file: empty path");
                                goto out;
                        }
                        bs_file = optarg;
                        break;
                case 'l':
                        level = aagw_log_level_parse(optarg);
                        if (level < 0) {
                                rc = misuse("--log-level: expected debug, "
                                            "info, warn, error or off, got "
                                            "'%s'",
                                            optarg);
                                goto out;
                        }
                        break;
                case 'h':
                        usage(stdout);
                        rc = EXIT_OK;
                        goto out;
                case ':':
                        rc = misuse("option '%s' requires an argument",
                                    bad_opt(argv, prev_optind, oname));
                        goto out;
                default:
                        rc = misuse("unknown option '%s'",
                                    bad_opt(argv, prev_optind, oname));
                        goto out;
                }
                prev_optind = optind;
        }
        if (optind < argc) {
                rc = misuse("unexpected argument '%s'", argv[optind]);
                goto out;
        }
        if (strlen(clusters) >= sizeof(clusters_buf)) {
                rc = misuse("--clusters: list too long");
                goto out;
        }
        memcpy(clusters_buf, clusters, strlen(clusters) + 1);
        alias_cnt =
            split_aliases(clusters_buf, aliases, AAGW_SANDBOX_MAX_CLUSTERS);
        if (alias_cnt < 0) {
                rc = EXIT_USAGE;
                goto out;
        }

        /* A bootstraps file we could not write would fail us after the
         * clusters started and stdout announced them; find out first. */
        if (bs_file && !dir_writable(bs_file)) {
                gw_errorf("cannot write %s: %s", bs_file, strerror(errno));
                goto out;
        }

        gw_log_init((aagw_log_level_t)level);
        /* Before the clusters start: a Ctrl-C during start-up must still
         * take the clean path below, not kill us with brokers half up. */
        gw_signals_install();

        sb = aagw_sandbox_new(aliases, (size_t)alias_cnt, brokers, errstr,
                              sizeof(errstr));
        if (!sb) {
                gw_errorf("%s", errstr);
                goto out;
        }
        for (size_t i = 0; i < topic_cnt; i++) {
                if (aagw_sandbox_create_topic(sb, NULL, topics[i], partitions,
                                              errstr, sizeof(errstr))) {
                        gw_errorf("%s", errstr);
                        goto out_sb;
                }
        }

        /* stdout is the interface for scripts (a pipe or a file they read
         * while we run): flush now, the process may idle for hours. */
        aagw_sandbox_print(sb, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                gw_errorf("cannot write to stdout: %s", strerror(errno));
                goto out_sb;
        }
        if (bs_file) {
                if (aagw_sandbox_write_file(sb, bs_file, errstr,
                                            sizeof(errstr))) {
                        gw_errorf("%s", errstr);
                        goto out_sb;
                }
                if (stat(bs_file, &bs_stat) == -1)
                        bs_file = NULL; /* gone already: nothing to clean */
        }

        if (topic_cnt)
                snprintf(what, sizeof(what), "%zu topic%s of %d partitions",
                         topic_cnt, topic_cnt == 1 ? "" : "s", partitions);
        else
                snprintf(what, sizeof(what), "no topics");
        aagw_log(AAGW_LOG_INFO, "SANDBOX",
                 "ready: %d cluster%s of %d broker%s, %s%s%s; stop with "
                 "Ctrl-C or `kill %d`",
                 alias_cnt, alias_cnt == 1 ? "" : "s", brokers,
                 brokers == 1 ? "" : "s", what,
                 bs_file ? ", bootstraps in " : "", bs_file ? bs_file : "",
                 (int)getpid());

        while (!gw_wait_stop(1000))
                ;

        aagw_log(AAGW_LOG_INFO, "SANDBOX", "stopping on %s",
                 gw_stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
        if (bs_file)
                remove_own_file(bs_file, &bs_stat);
        rc = EXIT_OK;
out_sb:
        aagw_sandbox_destroy(sb);
out:
        free(topics);
        return rc;
}
