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
#include <rocksdb/c.h>

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

/* A primary records its window; a secondary opened without one uses it
 * (and cuts its queries there), one opened with a window keeps its own,
 * and a store that recorded none falls back to 24 h. */
static void test_secondary_window(void **state) {
        char                   dir[512], err[512] = "";
        struct aagw_store_opts o = {.cache_mb = 8, .window_ms = 90 * 60000};
        aagw_statedir_t       *sd;
        aagw_store_t          *st, *sec;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/window", tmpl);
        sd = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(sd);
        st = aagw_store_open(sd, &o, err, sizeof(err));
        if (!st)
                fail_msg("store open: %s", err);
        assert_int_equal(aagw_store_window_ms(st), 90 * 60000);

        /* While the primary is open, and with opts NULL. */
        sec = aagw_store_open_secondary(dir, NULL, err, sizeof(err));
        if (!sec)
                fail_msg("secondary: %s", err);
        assert_int_equal(aagw_store_window_ms(sec), 90 * 60000);
        aagw_store_close(sec);

        /* An explicit window wins over the recorded one. */
        struct aagw_store_opts so = {.cache_mb = 8, .window_ms = 30000};
        sec = aagw_store_open_secondary(dir, &so, err, sizeof(err));
        if (!sec)
                fail_msg("secondary: %s", err);
        assert_int_equal(aagw_store_window_ms(sec), 30000);
        aagw_store_close(sec);

        /* The last primary open counts: reopen with 2 h, then stop. */
        aagw_store_close(st);
        o.window_ms = 2 * 3600000;
        st          = aagw_store_open(sd, &o, err, sizeof(err));
        if (!st)
                fail_msg("store reopen: %s", err);
        aagw_store_close(st);
        aagw_statedir_close(sd);
        so.window_ms = 0;
        sec          = aagw_store_open_secondary(dir, &so, err, sizeof(err));
        if (!sec)
                fail_msg("secondary after stop: %s", err);
        assert_int_equal(aagw_store_window_ms(sec), 2 * 3600000);
        aagw_store_close(sec);

        /* A state dir written before the window was recorded: 24 h. */
        char                            path[600], *rerr = NULL;
        rocksdb_options_t              *ro = rocksdb_options_create();
        rocksdb_column_family_handle_t *cf;
        size_t                          ncf;
        char                          **have = NULL;
        snprintf(path, sizeof(path), "%s/db", dir);
        have = rocksdb_list_column_families(ro, path, &ncf, &rerr);
        assert_null(rerr);
        /* Every family must be named to open the database for writing. */
        const rocksdb_options_t        **all = calloc(ncf, sizeof(*all));
        rocksdb_column_family_handle_t **h   = calloc(ncf, sizeof(*h));
        for (size_t i = 0; i < ncf; i++)
                all[i] = ro;
        rocksdb_t *db = rocksdb_open_column_families(
            ro, path, (int)ncf, (const char *const *)have, all, h, &rerr);
        if (rerr)
                fail_msg("raw open: %s", rerr);
        cf = h[0]; /* "default" is always listed first */
        assert_string_equal(have[0], "default");
        rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
        rocksdb_delete_cf(db, wo, cf, "window", 6, &rerr);
        assert_null(rerr);
        rocksdb_writeoptions_destroy(wo);
        for (size_t i = 0; i < ncf; i++)
                rocksdb_column_family_handle_destroy(h[i]);
        rocksdb_close(db);
        rocksdb_list_column_families_destroy(have, ncf);
        free(all);
        free(h);
        rocksdb_options_destroy(ro);
        sec = aagw_store_open_secondary(dir, NULL, err, sizeof(err));
        if (!sec)
                fail_msg("secondary without a recorded window: %s", err);
        assert_int_equal(aagw_store_window_ms(sec), 24 * 3600000);
        aagw_store_close(sec);
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_positions_round_trip),
            cmocka_unit_test(test_survives_sigkill),
            cmocka_unit_test(test_secondary_window),
        };
        return cmocka_run_group_tests_name("store", tests, group_setup,
                                           group_teardown);
}
