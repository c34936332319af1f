/*
 * tests/bench_dedup/bench_dedup.c: the dedup store benchmark.
 *
 * What the unify stage does per batch of records, on one thread:
 * aagw_store_seen_lookup() of the batch's ids, then one batch with a seen
 * entry per new id, an audit entry (DROPPED) per duplicate and one
 * position, committed (WAL, no fsync).  A batch holds --batch ids
 * (default 1,000) of which --dup (default 10%) are duplicates drawn
 * uniformly from the ids in the window: the worst case for RocksDB, every
 * duplicate is a random read; retries in real traffic are mostly recent.
 *
 * "N ids in the window": the store's clock is virtual and advances by
 * window / N per new id, so after the prefill the window holds N ids and
 * from then on each new id pushes the oldest one out, as in steady traffic
 * (filter slices rotate, the compaction filter drops expired entries).
 * The prefill runs the same loop; the measurement is the next --measure
 * ids (default N / 2, at least 1M).
 *
 * Every answer is checked: a duplicate reported new, or a new id reported
 * seen, fails the run (exit 1).
 *
 * Reports ids/s (wall clock), the main thread's CPU share (the "one core"),
 * process CPU per million ids (all threads: RocksDB's compactions and the
 * store's indexer included), peak RSS (VmHWM), disk (du of the state dir)
 * and the filter's figures.  --reopen also closes and reopens the store at
 * the end and reports how long the filter rebuild takes.
 *
 * Linked with the aagw program's allocator (jemalloc in a normal build):
 * RocksDB, the store and its indexer allocate per batch and per file, and
 * the figures should be those of the gateway, not of glibc's malloc.
 *
 *   build-dedup-rel/tests/bench_dedup/bench_dedup --ids 10000000
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aagw_dedup.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

static _Atomic int64_t vclock;
static int64_t         virtual_clock(void *opaque) {
                (void)opaque;
                return atomic_load_explicit(&vclock, memory_order_relaxed);
}

static double mono_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double proc_cpu_s(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* A field of /proc/self/status in kB, or -1. */
static long status_kb(const char *field) {
        char  line[256];
        long  kb = -1;
        FILE *f  = fopen("/proc/self/status", "r");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (!strncmp(line, field, strlen(field))) {
                        kb = strtol(line + strlen(field) + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return kb;
}

/* CPU seconds per thread name (RocksDB's pools, the store's threads, the
 * main thread), summed over /proc/self/task. */
static void print_threads(void) {
        char           names[16][32];
        double         secs[16];
        int            n  = 0;
        long           hz = sysconf(_SC_CLK_TCK);
        DIR           *d  = opendir("/proc/self/task");
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d))) {
                char  path[300], comm[32] = "", stat[1024];
                FILE *f;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
                         de->d_name);
                if ((f = fopen(path, "r"))) {
                        if (fgets(comm, sizeof(comm), f))
                                comm[strcspn(comm, "\n")] = '\0';
                        fclose(f);
                }
                snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
                         de->d_name);
                if (!(f = fopen(path, "r")))
                        continue;
                size_t len = fread(stat, 1, sizeof(stat) - 1, f);
                fclose(f);
                stat[len] = '\0';
                /* Fields after the ")" of the comm: state is 3rd,
                 * utime/stime are the 14th and 15th. */
                char         *p  = strrchr(stat, ')');
                unsigned long ut = 0, stt = 0;
                if (!p || sscanf(p + 2,
                                 "%*c %*d %*d %*d %*d %*d %*u %*u "
                                 "%*u %*u %*u %lu %lu",
                                 &ut, &stt) != 2)
                        continue;
                int i;
                for (i = 0; i < n && strcmp(names[i], comm); i++)
                        ;
                if (i == n) {
                        if (n == 16)
                                continue;
                        snprintf(names[n], sizeof(names[n]), "%s", comm);
                        secs[n++] = 0;
                }
                secs[i] += (double)(ut + stt) / (double)hz;
        }
        closedir(d);
        printf("CPU by thread (whole run):");
        for (int i = 0; i < n; i++)
                printf(" %s %.1f s;", names[i], secs[i]);
        printf("\n");
}

static uint64_t du_bytes;
static int      du_cb(const char *path, const struct stat *sb, int flag,
                      struct FTW *ftw) {
             (void)path;
             (void)ftw;
             if (flag == FTW_F)
                du_bytes += (uint64_t)sb->st_blocks * 512;
        return 0;
}

static uint64_t du(const char *dir) {
        du_bytes = 0;
        nftw(dir, du_cb, 32, FTW_PHYS);
        return du_bytes;
}

static int rm_cb(const char *path, const struct stat *sb, int flag,
                 struct FTW *ftw) {
        (void)sb;
        (void)flag;
        (void)ftw;
        (void)remove(path);
        return 0;
}

/* xorshift64*: the duplicate picks. */
static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        return rng * 2685821657736338717ull;
}

static void id_key(uint64_t i, uint8_t key[16]) {
        char id[32];
        int  n = snprintf(id, sizeof(id), "bench-%" PRIu64, i);
        aagw_id_key(id, (size_t)n, key);
}

static void usage(FILE *f, const char *prog) {
        fprintf(f,
                "usage: %s [--ids N] [--measure M] [--batch B] [--dup F]\n"
                "          [--cache-mb MB] [--filter-mb MB] [--window-ms MS]\n"
                "          [--audit none|drops] [--dir DIR] [--keep] "
                "[--reopen]\n"
                "          [--probe P]\n"
                "  --ids N        ids in the window (default 1000000)\n"
                "  --measure M    ids measured after the prefill "
                "(default max(N/2, 1M))\n"
                "  --batch B      ids per batch (default 1000)\n"
                "  --dup F        duplicate fraction (default 0.10)\n"
                "  --dup-span S   duplicates come from the newest S of the "
                "window\n"
                "                 (default 1: uniform over the window; 0.01: "
                "recent retries)\n"
                "  --cache-mb MB  store cache_mb (default 256)\n"
                "  --filter-mb MB store filter_mb (default 64)\n"
                "  --exact        exact filter (unify.filter: exact; size "
                "--filter-mb\n"
                "                 at ~26 bytes per id in the window)\n"
                "  --probe P      after the measurement, P lookups of stored "
                "ids only\n"
                "                 (drawn like the duplicates): the read "
                "path's cost\n"
                "  --dir DIR      state dir (default a new dir under "
                "$TMPDIR or /tmp, removed unless --keep)\n",
                prog);
}

struct phase {
        double   t0, cpu0, pcpu0;
        uint64_t ids0;
};

int main(int argc, char **argv) {
        uint64_t    nwin = 1000000, measure = 0, batch = 1000, probe = 0;
        double      dup = 0.10, span = 1.0;
        size_t      cache_mb = 256, filter_mb = 64;
        int64_t     window_ms = 24 * 3600 * INT64_C(1000);
        const char *dir = NULL, *audit = "drops";
        int         keep = 0, reopen = 0, exact = 0, opt;
        char        err[1024], dirbuf[512];

        static const struct option lopts[] = {
            {"ids", required_argument, NULL, 'n'},
            {"measure", required_argument, NULL, 'm'},
            {"batch", required_argument, NULL, 'b'},
            {"dup", required_argument, NULL, 'd'},
            {"dup-span", required_argument, NULL, 's'},
            {"cache-mb", required_argument, NULL, 'c'},
            {"filter-mb", required_argument, NULL, 'f'},
            {"window-ms", required_argument, NULL, 'w'},
            {"audit", required_argument, NULL, 'a'},
            {"dir", required_argument, NULL, 'D'},
            {"keep", no_argument, NULL, 'k'},
            {"reopen", no_argument, NULL, 'r'},
            {"probe", required_argument, NULL, 'p'},
            {"exact", no_argument, NULL, 'x'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0}};
        while ((opt = getopt_long(argc, argv, ":h", lopts, NULL)) != -1) {
                switch (opt) {
                case 'n':
                        nwin = strtoull(optarg, NULL, 10);
                        break;
                case 'm':
                        measure = strtoull(optarg, NULL, 10);
                        break;
                case 'b':
                        batch = strtoull(optarg, NULL, 10);
                        break;
                case 'd':
                        dup = strtod(optarg, NULL);
                        break;
                case 's':
                        span = strtod(optarg, NULL);
                        break;
                case 'c':
                        cache_mb = strtoul(optarg, NULL, 10);
                        break;
                case 'f':
                        filter_mb = strtoul(optarg, NULL, 10);
                        break;
                case 'w':
                        window_ms = strtoll(optarg, NULL, 10);
                        break;
                case 'a':
                        audit = optarg;
                        break;
                case 'D':
                        dir = optarg;
                        break;
                case 'k':
                        keep = 1;
                        break;
                case 'r':
                        reopen = 1;
                        break;
                case 'p':
                        probe = strtoull(optarg, NULL, 10);
                        break;
                case 'x':
                        exact = 1;
                        break;
                case 'h':
                        usage(stdout, argv[0]);
                        return EXIT_OK;
                default:
                        fprintf(stderr, "%s: bad option %s\n", argv[0],
                                argv[optind - 1]);
                        usage(stderr, argv[0]);
                        return EXIT_USAGE;
                }
        }
        if (!nwin || !batch || batch > 100000 || dup < 0 || dup >= 1 ||
            span <= 0 || span > 1 || window_ms <= 0 ||
            (strcmp(audit, "none") && strcmp(audit, "drops"))) {
                usage(stderr, argv[0]);
                return EXIT_USAGE;
        }
        if (!measure)
                measure = nwin / 2 > 1000000 ? nwin / 2 : 1000000;
        if (!dir) {
                const char *tmp = getenv("TMPDIR");
                snprintf(dirbuf, sizeof(dirbuf), "%s/aagw-bench-XXXXXX",
                         tmp && *tmp ? tmp : "/tmp");
                if (!mkdtemp(dirbuf)) {
                        fprintf(stderr, "%s: mkdtemp: %s\n", argv[0],
                                strerror(errno));
                        return EXIT_RUNTIME;
                }
                dir = dirbuf;
        }

        atomic_store(&vclock, INT64_C(1700000000000));
        struct aagw_store_opts so = {.cache_mb     = cache_mb,
                                     .filter_mb    = filter_mb,
                                     .filter_exact = exact,
                                     .window_ms    = window_ms,
                                     .clock        = virtual_clock,
                                     .clock_opaque = NULL};
        aagw_statedir_t       *sd = aagw_statedir_open(dir, err, sizeof(err));
        aagw_store_t          *st =
            sd ? aagw_store_open(sd, &so, err, sizeof(err)) : NULL;
        if (!st) {
                fprintf(stderr, "%s: %s\n", argv[0], err);
                return EXIT_RUNTIME;
        }
        aagw_store_batch_t *b  = aagw_store_batch_new(st);
        uint8_t(*keys)[16]     = malloc(batch * 16);
        uint64_t    *ids       = malloc(batch * sizeof(*ids));
        bool        *isdup     = malloc(batch);
        bool        *found     = malloc(batch);
        uint64_t     next      = 0; /* ids 0..next-1 are committed */
        uint64_t     processed = 0, wrong = 0;
        double       step     = (double)window_ms / (double)nwin;
        double       vfrac    = 0;
        struct phase ph       = {0};
        double       t_lookup = 0, t_commit = 0, t_build = 0, tb;
        double       c_lookup = 0, c_commit = 0, cb;
        bool         measuring = false;
        int          rc        = EXIT_OK;

        printf("dedup bench: %" PRIu64 " ids in the window, batch %" PRIu64
               ", %.0f%% duplicates from the newest %.0f%% of the window, "
               "cache_mb %zu, filter_mb %zu (%s), audit %s, %s\n",
               nwin, batch, dup * 100, span * 100, cache_mb, filter_mb,
               exact ? "exact" : "bloom", audit, BENCH_ALLOCATOR);
        printf("state dir %s\n", dir);
        fflush(stdout);
        double tprefill = mono_s();
        for (;;) {
                if (!measuring && next >= nwin) {
                        double t = mono_s();
                        printf("prefill: %" PRIu64 " ids in %.1f s "
                               "(%.0f ids/s), RSS %ld kB\n",
                               processed, t - tprefill,
                               (double)processed / (t - tprefill),
                               status_kb("VmRSS:"));
                        fflush(stdout);
                        measuring = true;
                        ph.t0     = mono_s();
                        ph.cpu0   = thread_cpu_s();
                        ph.pcpu0  = proc_cpu_s();
                        ph.ids0   = processed;
                }
                if (measuring && processed - ph.ids0 >= measure)
                        break;
                /* The batch: new ids, and duplicates from the window (not
                 * its oldest 1%: they expire while we work). */
                uint64_t live = next < nwin ? next : nwin - nwin / 100;
                if ((double)live > span * (double)nwin)
                        live = (uint64_t)(span * (double)nwin);
                if (!live && next)
                        live = 1;
                uint64_t base = next - live;
                size_t   nnew = 0;
                for (uint64_t i = 0; i < batch; i++) {
                        isdup[i] =
                            live > 0 &&
                            (double)(rnd() >> 11) / 9007199254740992.0 < dup;
                        ids[i] = isdup[i] ? base + rnd() % live : next + nnew++;
                        id_key(ids[i], keys[i]);
                }
                tb = mono_s();
                cb = thread_cpu_s();
                if (aagw_store_seen_lookup(st, (const uint8_t(*)[16])keys,
                                           batch, found, NULL, err,
                                           sizeof(err))) {
                        fprintf(stderr, "lookup: %s\n", err);
                        rc = EXIT_RUNTIME;
                        break;
                }
                double tl = mono_s();
                if (measuring) {
                        t_lookup += tl - tb;
                        c_lookup += thread_cpu_s() - cb;
                }
                int64_t now = virtual_clock(NULL);
                for (uint64_t i = 0; i < batch; i++) {
                        if (found[i] != isdup[i])
                                wrong++;
                        if (!found[i]) {
                                struct aagw_seen s;
                                memset(&s, 0, sizeof(s));
                                s.time_ms = now;
                                s.hlc     = (uint64_t)now << 16;
                                memcpy(s.site, "east", 5);
                                memcpy(s.origin, "west", 5);
                                memcpy(s.topic, "clicks", 7);
                                s.partition = (int32_t)(ids[i] % 64);
                                s.offset    = (int64_t)ids[i];
                                aagw_store_batch_seen(b, keys[i], &s);
                        } else if (!strcmp(audit, "drops")) {
                                char              id[32];
                                struct aagw_audit a;
                                memset(&a, 0, sizeof(a));
                                a.time_ms   = now;
                                a.verdict   = AAGW_AUDIT_DROPPED;
                                a.site      = "east";
                                a.origin    = "west";
                                a.topic     = "clicks";
                                a.partition = (int32_t)(ids[i] % 64);
                                a.offset    = (int64_t)ids[i];
                                a.hlc       = (uint64_t)now << 16;
                                a.id_len    = (size_t)snprintf(
                                       id, sizeof(id), "bench-%" PRIu64, ids[i]);
                                a.id = id;
                                aagw_store_batch_audit(b, &a);
                        }
                }
                struct aagw_pos pos = {(int64_t)(processed + batch),
                                       (int64_t)(next + nnew)};
                aagw_store_batch_pos(b, "unify:east", "clicks", 0, &pos);
                double tc = mono_s();
                cb        = thread_cpu_s();
                if (measuring)
                        t_build += tc - tl;
                if (aagw_store_batch_commit(b, err, sizeof(err))) {
                        fprintf(stderr, "commit: %s\n", err);
                        rc = EXIT_RUNTIME;
                        break;
                }
                if (measuring) {
                        t_commit += mono_s() - tc;
                        c_commit += thread_cpu_s() - cb;
                }
                next += nnew;
                processed += batch;
                vfrac += step * (double)nnew;
                if (vfrac >= 1) {
                        int64_t adv = (int64_t)vfrac;
                        atomic_fetch_add(&vclock, adv);
                        vfrac -= (double)adv;
                }
                if (processed % 1000000 < batch && processed >= 1000000) {
                        fprintf(stderr, "  %" PRIu64 "M ids\r",
                                processed / 1000000);
                        fflush(stderr);
                }
        }
        double   t1 = mono_s(), cpu1 = thread_cpu_s(), pcpu1 = proc_cpu_s();
        uint64_t n = processed - ph.ids0;
        struct aagw_store_stats s;
        aagw_store_stats_get(st, &s);

        if (measuring && rc == EXIT_OK) {
                double wall = t1 - ph.t0;
                printf("measured: %" PRIu64 " ids in %.2f s: %.0f ids/s\n", n,
                       wall, (double)n / wall);
                printf("main thread CPU: %.2f s (%.0f%% of one core); "
                       "%.0f ids per main-thread CPU second\n",
                       cpu1 - ph.cpu0, 100 * (cpu1 - ph.cpu0) / wall,
                       (double)n / (cpu1 - ph.cpu0));
                printf("process CPU (all threads): %.2f s, %.2f s per "
                       "million ids\n",
                       pcpu1 - ph.pcpu0, (pcpu1 - ph.pcpu0) * 1e6 / (double)n);
                printf("wall per id: lookup %.3f us, building the batch "
                       "%.3f us, commit %.3f us, other (ids, keys) %.3f us\n",
                       t_lookup * 1e6 / (double)n, t_build * 1e6 / (double)n,
                       t_commit * 1e6 / (double)n,
                       (wall - t_lookup - t_build - t_commit) * 1e6 /
                           (double)n);
                printf("main thread CPU per id: lookup %.3f us, commit "
                       "%.3f us\n",
                       c_lookup * 1e6 / (double)n, c_commit * 1e6 / (double)n);
        }
        if (probe && measuring && rc == EXIT_OK) {
                /* Lookups only: duplicates drawn as above (nothing
                 * committed), so each is a read of the stored id. */
                uint64_t live = nwin - nwin / 100;
                if ((double)live > span * (double)nwin)
                        live = (uint64_t)(span * (double)nwin);
                uint64_t pwrong = 0, done = 0;
                double   pc = thread_cpu_s(), pt = mono_s();
                while (done < probe) {
                        for (uint64_t i = 0; i < batch; i++)
                                id_key(next - live + rnd() % live, keys[i]);
                        if (aagw_store_seen_lookup(
                                st, (const uint8_t(*)[16])keys, batch, found,
                                NULL, err, sizeof(err))) {
                                fprintf(stderr, "lookup: %s\n", err);
                                rc = EXIT_RUNTIME;
                                break;
                        }
                        for (uint64_t i = 0; i < batch; i++)
                                pwrong += !found[i];
                        done += batch;
                }
                printf("probe: %" PRIu64 " lookups of stored ids: %.3f us "
                       "main-thread CPU each, %.3f us wall; %" PRIu64
                       " not found\n",
                       done, (thread_cpu_s() - pc) * 1e6 / (double)done,
                       (mono_s() - pt) * 1e6 / (double)done, pwrong);
                wrong += pwrong;
        }
        print_threads();
        long hwm = status_kb("VmHWM:"), rss = status_kb("VmRSS:");
        printf("RSS: peak %ld kB (%.0f MiB), now %ld kB; budget cache_mb + "
               "filter_mb = %zu MiB\n",
               hwm, (double)hwm / 1024, rss, cache_mb + filter_mb);
        printf("filter: %zu bytes, %" PRIu64 " ids in live slices, "
               "ready %d; lookups %" PRIu64 ", answered by the filter "
               "%" PRIu64 " absent and %" PRIu64 " seen, tail hits %" PRIu64
               ", RocksDB reads %" PRIu64 " (hits %" PRIu64 ")\n",
               s.filter_bytes, s.filter_ids, s.filter_ready, s.seen_lookups,
               s.seen_filtered, s.seen_exact_hits, s.seen_tail_hits,
               s.seen_reads, s.seen_read_hits);
        printf("commits %" PRIu64 ", tail runs indexed %" PRIu64
               " in %.2f s, commits waited %.2f s for the indexer, indexer "
               "errors %" PRIu64 ", block cache %zu bytes, table readers "
               "%zu bytes\n",
               s.commits, s.runs_indexed, (double)s.index_us / 1e6,
               (double)s.tail_wait_us / 1e6, s.indexer_errors, s.cache_usage,
               s.readers_bytes);
        printf("disk: %.1f MiB (%.1f bytes per id in the window)\n",
               (double)du(dir) / 1048576, (double)du(dir) / (double)nwin);
        if (wrong) {
                printf("WRONG ANSWERS: %" PRIu64 "\n", wrong);
                rc = EXIT_RUNTIME;
        }
        aagw_store_batch_destroy(b);
        if (reopen && rc == EXIT_OK) {
                double t = mono_s();
                aagw_store_close(st);
                double tc = mono_s();
                st        = aagw_store_open(sd, &so, err, sizeof(err));
                if (!st) {
                        fprintf(stderr, "reopen: %s\n", err);
                        rc = EXIT_RUNTIME;
                } else {
                        double to = mono_s();
                        do {
                                aagw_store_stats_get(st, &s);
                                if (!s.filter_ready)
                                        usleep(10000);
                        } while (!s.filter_ready);
                        printf("reopen: close %.2f s, open %.2f s, filter "
                               "rebuilt after %.2f s more\n",
                               tc - t, to - tc, mono_s() - to);
                }
        }
        aagw_store_close(st);
        aagw_statedir_close(sd);
        if (!keep)
                nftw(dir, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
        free(keys);
        free(ids);
        free(isdup);
        free(found);
        return rc;
}
