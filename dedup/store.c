/*
 * dedup/store.c: the RocksDB database of a state directory.
 *
 * Column families:
 *   positions   (scope, topic, partition) -> (next input offset, output end)
 * Keys are scope '\0' topic '\0' partition (4 bytes, big-endian) so one
 * scope's entries sort together; values are fixed-size big-endian.
 */
#include "aagw_dedup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

enum { CF_DEFAULT, CF_POSITIONS, CF_COUNT };
static const char *const cf_names[CF_COUNT] = {"default", "positions"};

struct aagw_store {
        rocksdb_t                          *db;
        rocksdb_options_t                  *opts;
        rocksdb_block_based_table_options_t *topts;
        rocksdb_cache_t                    *cache;
        rocksdb_writeoptions_t             *wopts;
        rocksdb_readoptions_t              *ropts;
        rocksdb_column_family_handle_t     *cf[CF_COUNT];
};

/* RocksDB hands us a malloc()ed message in 'err'; it is ours to free. */
static int take_rocks_err(char *err, const char *op, char *errstr,
                          size_t errstr_size) {
        if (!err)
                return 0;
        snprintf(errstr, errstr_size, "%s: %s", op, err);
        rocksdb_free(err);
        return -1;
}

aagw_store_t *aagw_store_open(const aagw_statedir_t *sd,
                              const struct aagw_store_opts *o, char *errstr,
                              size_t errstr_size) {
        aagw_store_t             *st = calloc(1, sizeof(*st));
        const rocksdb_options_t *cf_opts[CF_COUNT];
        char                      path[4096];
        char                     *err = NULL;
        size_t                    mb  = o && o->cache_mb >= 8 ? o->cache_mb : 64;

        if (!st) {
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        snprintf(path, sizeof(path), "%s/db", aagw_statedir_path(sd));

        /* Memory is bounded by configuration: half the budget for the block
         * cache, the rest for write buffers (two per column family). */
        st->cache = rocksdb_cache_create_lru(mb * 1024 * 1024 / 2);
        st->topts = rocksdb_block_based_options_create();
        rocksdb_block_based_options_set_block_cache(st->topts, st->cache);
        rocksdb_block_based_options_set_cache_index_and_filter_blocks(
            st->topts, 1);
        st->opts = rocksdb_options_create();
        rocksdb_options_set_block_based_table_factory(st->opts, st->topts);
        rocksdb_options_set_create_if_missing(st->opts, 1);
        rocksdb_options_set_create_missing_column_families(st->opts, 1);
        rocksdb_options_set_write_buffer_size(
            st->opts, mb * 1024 * 1024 / 2 / (2 * CF_COUNT));
        rocksdb_options_set_max_write_buffer_number(st->opts, 2);
        rocksdb_options_set_max_background_jobs(st->opts, 2);
        rocksdb_options_set_info_log_level(st->opts, 2 /* WARN */);
        rocksdb_options_set_keep_log_file_num(st->opts, 2);
        for (int i = 0; i < CF_COUNT; i++)
                cf_opts[i] = st->opts;

        st->db = rocksdb_open_column_families(st->opts, path, CF_COUNT,
                                              cf_names, cf_opts, st->cf, &err);
        if (take_rocks_err(err, "rocksdb_open", errstr, errstr_size)) {
                st->db = NULL;
                aagw_store_close(st);
                return NULL;
        }
        st->wopts = rocksdb_writeoptions_create();
        rocksdb_writeoptions_set_sync(st->wopts, 0);
        st->ropts = rocksdb_readoptions_create();
        return st;
}

void aagw_store_close(aagw_store_t *st) {
        if (!st)
                return;
        if (st->db) {
                rocksdb_cancel_all_background_work(st->db, 1);
                for (int i = 0; i < CF_COUNT; i++)
                        if (st->cf[i])
                                rocksdb_column_family_handle_destroy(st->cf[i]);
                rocksdb_close(st->db);
        }
        if (st->wopts)
                rocksdb_writeoptions_destroy(st->wopts);
        if (st->ropts)
                rocksdb_readoptions_destroy(st->ropts);
        if (st->opts)
                rocksdb_options_destroy(st->opts);
        if (st->topts)
                rocksdb_block_based_options_destroy(st->topts);
        if (st->cache)
                rocksdb_cache_destroy(st->cache);
        free(st);
}

/* ------------------------------ POSITIONS ------------------------------ */

static void put_be64(unsigned char *p, int64_t v) {
        uint64_t u = (uint64_t)v;
        for (int i = 7; i >= 0; i--, u >>= 8)
                p[i] = (unsigned char)u;
}

static int64_t get_be64(const unsigned char *p) {
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
                u = (u << 8) | p[i];
        return (int64_t)u;
}

static size_t pos_key(char *buf, size_t size, const char *scope,
                      const char *topic, int32_t partition) {
        size_t sl = strlen(scope), tl = strlen(topic);
        if (sl + tl + 6 > size)
                return 0;
        memcpy(buf, scope, sl + 1);
        memcpy(buf + sl + 1, topic, tl + 1);
        uint32_t p = (uint32_t)partition;
        unsigned char *q = (unsigned char *)buf + sl + tl + 2;
        q[0] = (unsigned char)(p >> 24);
        q[1] = (unsigned char)(p >> 16);
        q[2] = (unsigned char)(p >> 8);
        q[3] = (unsigned char)p;
        return sl + tl + 6;
}

aagw_err_t aagw_store_pos_get(aagw_store_t *st, const char *scope,
                              const char *topic, int32_t partition,
                              struct aagw_pos *pos, char *errstr,
                              size_t errstr_size) {
        char   key[1024], *err = NULL, *val;
        size_t klen = pos_key(key, sizeof(key), scope, topic, partition), vlen;

        if (!klen) {
                snprintf(errstr, errstr_size, "position key too long");
                return AAGW_ERR_INVAL;
        }
        val = rocksdb_get_cf(st->db, st->ropts, st->cf[CF_POSITIONS], key, klen,
                             &vlen, &err);
        if (take_rocks_err(err, "rocksdb_get(positions)", errstr, errstr_size))
                return AAGW_ERR_STORE;
        if (!val)
                return AAGW_ERR_NOENT;
        if (vlen != 16) {
                rocksdb_free(val);
                snprintf(errstr, errstr_size,
                         "position of %s %s [%d] is corrupt (%zu bytes)", scope,
                         topic, (int)partition, vlen);
                return AAGW_ERR_STORE;
        }
        pos->next     = get_be64((unsigned char *)val);
        pos->out_next = get_be64((unsigned char *)val + 8);
        rocksdb_free(val);
        return AAGW_OK;
}

aagw_err_t aagw_store_pos_put(aagw_store_t *st,
                              const struct aagw_pos_entry *e, size_t cnt,
                              char *errstr, size_t errstr_size) {
        rocksdb_writebatch_t *wb  = rocksdb_writebatch_create();
        char                 *err = NULL;

        for (size_t i = 0; i < cnt; i++) {
                char          key[1024];
                unsigned char val[16];
                size_t        klen = pos_key(key, sizeof(key), e[i].scope,
                                             e[i].topic, e[i].partition);
                if (!klen) {
                        rocksdb_writebatch_destroy(wb);
                        snprintf(errstr, errstr_size, "position key too long");
                        return AAGW_ERR_INVAL;
                }
                put_be64(val, e[i].pos.next);
                put_be64(val + 8, e[i].pos.out_next);
                rocksdb_writebatch_put_cf(wb, st->cf[CF_POSITIONS], key, klen,
                                          (const char *)val, sizeof(val));
        }
        rocksdb_write(st->db, st->wopts, wb, &err);
        rocksdb_writebatch_destroy(wb);
        if (take_rocks_err(err, "rocksdb_write(positions)", errstr,
                           errstr_size))
                return AAGW_ERR_STORE;
        return AAGW_OK;
}
