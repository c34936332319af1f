/*
 * tests/unit/test_statedir.c: one owner per state directory.
 *
 * A second gateway on the same state dir must be refused with a message
 * that names the holder; a holder killed with SIGKILL must not leave a lock
 * that blocks the restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "aagw_dedup.h"

static char tmpl[] = "/tmp/aagw-statedir-XXXXXX";

static int group_setup(void **state) {
        (void)state;
        return mkdtemp(tmpl) ? 0 : -1;
}

static int group_teardown(void **state) {
        char cmd[256];
        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_open_creates_nested_dirs(void **state) {
        char             dir[512], err[512] = "";
        struct stat      st;
        aagw_statedir_t *sd;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/a/b/c", tmpl);
        sd = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(sd);
        assert_string_equal(err, "");
        assert_string_equal(aagw_statedir_path(sd), dir);
        assert_int_equal(stat(dir, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(aagw_statedir_owner(dir), getpid());
        aagw_statedir_close(sd);
        assert_int_equal(aagw_statedir_owner(dir), -1);
}

static void test_second_owner_refused(void **state) {
        char             dir[512], err[512], want[1024];
        aagw_statedir_t *a, *b;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/shared", tmpl);
        a = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(a);
        b = aagw_statedir_open(dir, err, sizeof(err));
        assert_null(b);
        snprintf(want, sizeof(want),
                 "state dir %s is in use by another aagw process (pid %d); "
                 "stop it or choose another state_dir",
                 dir, (int)getpid());
        assert_string_equal(err, want);
        aagw_statedir_close(a);
        /* Released: the next owner gets it. */
        b = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(b);
        aagw_statedir_close(b);
}

static void test_killed_owner_releases(void **state) {
        char             dir[512], err[512], want[1024];
        int              pfd[2];
        pid_t            child;
        aagw_statedir_t *sd;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/killed", tmpl);
        assert_int_equal(pipe(pfd), 0);
        child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                char e[256];
                close(pfd[0]);
                aagw_statedir_t *c = aagw_statedir_open(dir, e, sizeof(e));
                char             ok = c ? 'y' : 'n';
                if (write(pfd[1], &ok, 1) != 1)
                        _exit(3);
                pause(); /* until SIGKILL */
                _exit(0);
        }
        close(pfd[1]);
        char ok = 0;
        assert_int_equal(read(pfd[0], &ok, 1), 1);
        close(pfd[0]);
        assert_int_equal(ok, 'y');

        assert_null(aagw_statedir_open(dir, err, sizeof(err)));
        snprintf(want, sizeof(want),
                 "state dir %s is in use by another aagw process (pid %d); "
                 "stop it or choose another state_dir",
                 dir, (int)child);
        assert_string_equal(err, want);
        assert_int_equal(aagw_statedir_owner(dir), child);

        kill(child, SIGKILL);
        assert_int_equal(waitpid(child, NULL, 0), child);
        sd = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(sd);
        aagw_statedir_close(sd);
}

static void test_not_a_directory(void **state) {
        char  path[512], err[512], want[1024];
        FILE *f;
        (void)state;

        snprintf(path, sizeof(path), "%s/file", tmpl);
        f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
        assert_null(aagw_statedir_open(path, err, sizeof(err)));
        snprintf(want, sizeof(want), "state dir %s is not a directory", path);
        assert_string_equal(err, want);
        assert_null(aagw_statedir_open("", err, sizeof(err)));
        assert_string_equal(err, "state dir path is empty");
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_open_creates_nested_dirs),
            cmocka_unit_test(test_second_owner_refused),
            cmocka_unit_test(test_killed_owner_releases),
            cmocka_unit_test(test_not_a_directory),
        };
        return cmocka_run_group_tests_name("statedir", tests, group_setup,
                                           group_teardown);
}
