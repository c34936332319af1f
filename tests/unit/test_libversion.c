/*
 * tests/unit/test_libversion.c: the librdkafka aagw runs with.  It is
 * built against one recent enough for SCRAM logins to Kafka 4 (>= 2.6.1)
 * and finds it through its RUNPATH; `aagw --version` names the one it
 * loaded, and a run that loads an older one in its place (through
 * LD_LIBRARY_PATH) refuses a SCRAM configuration at start, naming the
 * file, line, column, key, the version loaded and where from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

/* Debian's own librdkafka (2.0.2 in Debian 12) comes with kcat, which
 * the suite installs. */
static const char *const old_dirs[] = {"/usr/lib/x86_64-linux-gnu",
                                       "/usr/lib/aarch64-linux-gnu",
                                       "/usr/lib64", "/usr/lib", NULL};

/* Run 'argv' with LD_LIBRARY_PATH set to 'ld' (unset if NULL); its
 * stdout and stderr together in 'out'.  Returns the exit status. */
static int run(const char *const *argv, const char *ld, char *out,
               size_t size) {
        int    fd[2], st;
        size_t n = 0;
        pid_t  pid;

        assert_int_equal(pipe(fd), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(fd[1], 1);
                dup2(fd[1], 2);
                close(fd[0]);
                if (ld)
                        setenv("LD_LIBRARY_PATH", ld, 1);
                else
                        unsetenv("LD_LIBRARY_PATH");
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        close(fd[1]);
        for (ssize_t r; n + 1 < size &&
                        ((r = read(fd[0], out + n, size - n - 1)) > 0 ||
                         (r == -1 && errno == EINTR));)
                if (r > 0)
                        n += (size_t)r;
        out[n] = '\0';
        close(fd[0]);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *bin(void) {
        const char *b = getenv("AAGW_BIN");
        assert_non_null(b);
        return b;
}

/* The librdkafka version `aagw --version` reports under 'ld'. */
static void version_under(const char *ld, char *ver, size_t size) {
        char        out[4096];
        const char *argv[] = {bin(), "--version", NULL};
        const char *p;

        assert_int_equal(run(argv, ld, out, sizeof(out)), 0);
        assert_non_null(p = strstr(out, "librdkafka "));
        snprintf(ver, size, "%.*s", (int)strcspn(p + 11, "\n"), p + 11);
}

static void test_runs_with_its_own(void **state) {
        char ver[64];

        (void)state;
        version_under(NULL, ver, sizeof(ver));
        /* The same library this test was linked with: the build's. */
        assert_string_equal(ver, rd_kafka_version_str());
        assert_true(rd_kafka_version() >= 0x020601ff);
}

/* A config of one SCRAM cluster: its path in 'path'. */
static void write_config(char *path, size_t size, const char *mechanism) {
        FILE *f;
        int   fd;

        snprintf(path, size, "%s/aagw-libversion-XXXXXX.yaml",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        assert_true((fd = mkstemps(path, 5)) >= 0);
        assert_non_null(f = fdopen(fd, "w"));
        fprintf(f,
                "clusters:\n"
                "  east:\n"
                "    bootstrap_servers: 127.0.0.1:1\n"
                "    properties:\n"
                "      security.protocol: SASL_SSL\n"
                "      sasl.mechanism: %s\n"
                "      sasl.username: aagw\n"
                "      sasl.password: not-a-real-password\n"
                "  west:\n"
                "    bootstrap_servers: 127.0.0.1:2\n",
                mechanism);
        fclose(f);
}

static void test_old_library_refuses_scram(void **state) {
        char        lib[512], ver[64], path[512], out[8192], want[1024];
        const char *dir = NULL;

        (void)state;
        for (const char *const *d = old_dirs; *d && !dir; d++) {
                snprintf(lib, sizeof(lib), "%s/librdkafka.so.1", *d);
                if (access(lib, R_OK) == 0)
                        dir = *d;
        }
        if (!dir) {
                fprintf(stderr, "# no system librdkafka.so.1 to load in "
                                "aagw's place\n");
                skip();
        }
        version_under(dir, ver, sizeof(ver));
        unsigned a = 0, b = 0, c = 0;
        assert_true(sscanf(ver, "%u.%u.%u", &a, &b, &c) >= 2);
        if ((a << 16 | b << 8 | c) >= (2u << 16 | 6u << 8 | 1u)) {
                /* (A recent system library: nothing old to load.) */
                fprintf(stderr, "# the system's librdkafka is %s\n", ver);
                skip();
        }

        const char *check[] = {bin(), "config", "check", "-c", path, NULL};
        write_config(path, sizeof(path), "SCRAM-SHA-512");
        assert_int_equal(run(check, dir, out, sizeof(out)), 2);
        snprintf(want, sizeof(want),
                 "%s:6:23: clusters.east.properties.sasl.mechanism: "
                 "SCRAM-SHA-512 needs librdkafka >= 2.6.1, but this aagw "
                 "runs with librdkafka %s (%s",
                 path, ver, dir);
        if (!strstr(out, want))
                fail_msg("expected\n  %s\nin\n%s", want, out);
        /* The run refuses too, before it connects anywhere. */
        const char *runv[] = {bin(), "run", "-c", path, NULL};
        assert_int_equal(run(runv, dir, out, sizeof(out)), 2);
        assert_non_null(strstr(out, "needs librdkafka >= 2.6.1"));
        /* Its own library logs in with SCRAM: no refusal. */
        assert_int_equal(run(check, NULL, out, sizeof(out)), 0);
        unlink(path);

        /* PLAIN works with the old library: no refusal. */
        write_config(path, sizeof(path), "PLAIN");
        assert_int_equal(run(check, dir, out, sizeof(out)), 0);
        unlink(path);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_runs_with_its_own),
            cmocka_unit_test(test_old_library_refuses_scram),
        };
        return cmocka_run_group_tests_name("libversion", tests, NULL, NULL);
}
