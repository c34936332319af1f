/*
 * tests/unit/test_store.c: the RocksDB store (real RocksDB in a temp dir).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "aagw_dedup.h"

static char tmpl[] = "/tmp/aagw-store-XXXXXX";

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

static aagw_store_t *open_store(const char *sub, aagw_statedir_t **sdp) {
        char                   dir[512], err[512] = "";
        struct aagw_store_opts o = {.cache_mb = 16};

        snprintf(dir, sizeof(dir), "%s/%s", tmpl, sub);
        *sdp = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(*sdp);
        aagw_store_t *st = aagw_store_open(*sdp, &o, err, sizeof(err));
        if (!st)
                fail_msg("store open: %s", err);
        return st;
}

static void test_positions_round_trip(void **state) {
        aagw_statedir_t *sd;
        aagw_store_t    *st = open_store("rt", &sd);
        struct aagw_pos  pos;
        char             err[512];
        (void)state;

        assert_int_equal(aagw_store_pos_get(st, "repl:east->west", "clicks", 3,
                                            &pos, err, sizeof(err)),
                         AAGW_ERR_NOENT);
        struct aagw_pos_entry e[] = {
            {"repl:east->west", "clicks", 3, {1234, 99}},
            {"repl:east->west", "clicks", 4, {5, 6}},
            {"repl:east->west", "clicks.x", 3, {7, 8}},
            {"repl:west->east", "clicks", 3, {INT64_MAX, -1}},
        };
        assert_int_equal(aagw_store_pos_put(st, e, 4, err, sizeof(err)),
                         AAGW_OK);
        /* Same scope/topic prefixes must not collide. */
        assert_int_equal(aagw_store_pos_get(st, "repl:east->west", "clicks", 3,
                                            &pos, err, sizeof(err)),
                         AAGW_OK);
        assert_int_equal(pos.next, 1234);
        assert_int_equal(pos.out_next, 99);
        assert_int_equal(aagw_store_pos_get(st, "repl:east->west", "clicks.x",
                                            3, &pos, err, sizeof(err)),
                         AAGW_OK);
        assert_int_equal(pos.next, 7);
        assert_int_equal(aagw_store_pos_get(st, "repl:west->east", "clicks", 3,
                                            &pos, err, sizeof(err)),
                         AAGW_OK);
        assert_true(pos.next == INT64_MAX);
        assert_int_equal(pos.out_next, -1);
        /* Overwrite. */
        e[0].pos.next = 2000;
        assert_int_equal(aagw_store_pos_put(st, e, 1, err, sizeof(err)),
                         AAGW_OK);
        aagw_store_close(st);

        /* Reopen: it persisted. */
        st = aagw_store_open(sd, NULL, err, sizeof(err));
        assert_non_null(st);
        assert_int_equal(aagw_store_pos_get(st, "repl:east->west", "clicks", 3,
                                            &pos, err, sizeof(err)),
                         AAGW_OK);
        assert_int_equal(pos.next, 2000);
        aagw_store_close(st);
        aagw_statedir_close(sd);
}

/* A write that returned survives SIGKILL of the writer (WAL, no fsync). */
static void test_survives_sigkill(void **state) {
        char  dir[512];
        int   pfd[2];
        pid_t child;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/killed", tmpl);
        assert_int_equal(pipe(pfd), 0);
        child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                char             err[256];
                aagw_statedir_t *sd = aagw_statedir_open(dir, err, sizeof(err));
                aagw_store_t    *st = sd ? aagw_store_open(sd, NULL, err,
                                                           sizeof(err))
                                         : NULL;
                char ok = 'n';
                if (st) {
                        for (int i = 0; i < 1000; i++) {
                                struct aagw_pos_entry e = {
                                    "s", "t", i % 8, {i, i * 2}};
                                if (aagw_store_pos_put(st, &e, 1, err,
                                                       sizeof(err)))
                                        break;
                                ok = 'y';
                        }
                }
                if (write(pfd[1], &ok, 1) != 1)
                        _exit(3);
                pause();
                _exit(0);
        }
        close(pfd[1]);
        char ok = 0;
        assert_int_equal(read(pfd[0], &ok, 1), 1);
        close(pfd[0]);
        assert_int_equal(ok, 'y');
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);

        aagw_statedir_t *sd;
        aagw_store_t    *st = open_store("killed", &sd);
        struct aagw_pos  pos;
        char             err[256];
        for (int p = 0; p < 8; p++) {
                assert_int_equal(
                    aagw_store_pos_get(st, "s", "t", p, &pos, err, sizeof(err)),
                    AAGW_OK);
                /* The last write to partition p was i = 992 + p. */
                assert_int_equal(pos.next, 992 + p);
                assert_int_equal(pos.out_next, 2 * (992 + p));
        }
        aagw_store_close(st);
        aagw_statedir_close(sd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_positions_round_trip),
            cmocka_unit_test(test_survives_sigkill),
        };
        return cmocka_run_group_tests_name("store", tests, group_setup,
                                           group_teardown);
}
