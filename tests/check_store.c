/*
** check_store.c -- the SQLite store: the schema as docs/reports.md describes it
** (STRICT tables, user_version), refusal of newer and foreign files, a run
** written and read back with plain SQL, the resumption rules of keyed runs,
** and the file staying consistent whatever happens to the writers: several
** processes at once, a lock held by someone else, a read-only file, a full
** disk, a process killed half-way.
**
** Everything is read back with sqlite directly, never through store.c.
*/
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/store.h"
#include "trace/wfile.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Fixture: a scratch directory per test                                    */
/* ------------------------------------------------------------------------ */

static char dir[512];
static char db_path[600];

static void setup(void)
{
    ck_assert_int_eq(sqt_mkdtemp(dir, sizeof dir, "check_store"), 0);
    snprintf(db_path, sizeof db_path, "%s/shardq.db", dir);
}

static void teardown(void)
{
    sqt_rm_tree(dir);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* A store call whose failure sentence (sq_store_error) goes into buf, as
** the calls wrote it themselves before the error convention. */
static int store_call(int rc, sq_store *h, char *buf, size_t len)
{
    if (rc < 0) snprintf(buf, len, "%s", sq_store_error(h));
    return rc;
}
#define SQ(h, buf, call) store_call((call), (h), (buf), sizeof(buf))

static int open_err(const char *path, int busy_ms, int ro, sq_store **s, char *buf, size_t len)
{
    sq_error e = {0};
    int rc = sq_store_open(path, busy_ms, ro, s, &e);
    if (rc < 0) snprintf(buf, len, "%s", sq_error_message(&e));
    return rc;
}


static sq_store *open_store(const char *path, int busy_ms)
{
    sq_store *s = NULL;
    char err[512] = "";
    int rc = open_err(path, busy_ms, 0, &s, err, sizeof err);
    ck_assert_msg(rc == 0 && s, "open %s: %s", path, err);
    return s;
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    ck_assert_msg(rc == SQLITE_OK, "sqlite3_open %s: %s", path, db ? sqlite3_errmsg(db) : "");
    sqlite3_busy_timeout(db, 10000);
    return db;
}

static void raw_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
    sqlite3_free(msg);
}

/* The first column of the first row of sql as an integer (-1: no row). */
static int64_t q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    int64_t v = -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The same as text into buf ("" for NULL, "(no row)" for none). */
static const char *q_text(sqlite3 *db, const char *sql, char *buf, size_t len)
{
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    snprintf(buf, len, "(no row)");
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(buf, len, "%s", t ? (const char *)t : "");
    }
    sqlite3_finalize(st);
    return buf;
}

/* Integer result of sql on a fresh connection to path. */
static int64_t file_int(const char *path, const char *sql)
{
    sqlite3 *db = raw_open(path);
    int64_t v = q_int(db, sql);
    sqlite3_close(db);
    return v;
}

static void assert_intact(const char *path)
{
    char buf[256];
    sqlite3 *db = raw_open(path);
    ck_assert_str_eq(q_text(db, "PRAGMA integrity_check", buf, sizeof buf), "ok");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    sqlite3_close(db);
}

static sq_run_info run_info(const char *key)
{
    sq_run_info r;
    memset(&r, 0, sizeof r);
    r.kind = "replay";
    r.key = key;
    r.sweep = "s1";
    r.config = "{\"scheme\":\"sdp4bit\"}";
    r.preset = "sdp4bit";
    r.scheme = "weight.mode=diff";
    r.topo = "2x4";
    r.device = "cpu";
    r.trace = "/data/traces/gpt2";
    r.seed = 42;
    return r;
}

static int64_t begin_run(sq_store *s, const char *key)
{
    sq_run_info r = run_info(key);
    sq_store_kv p[2] = {{"lr", "0.5"}, {"note", NULL}};
    int64_t id = -1;
    char err[512] = "";
    int rc = SQ(s, err, sq_store_run_begin(s, &r, p, 2, &id));
    ck_assert_msg(rc == SQ_STORE_STARTED, "run_begin %s: %d %s", key ? key : "(none)", rc, err);
    ck_assert_int_gt(id, 0);
    return id;
}

/* A stats row whose figures all derive from x, so they can be checked. */
static sq_stat_row stat_row(uint64_t step, const char *path, const char *tensor, double x)
{
    sq_stat_row r;
    memset(&r, 0, sizeof r);
    r.step = step;
    r.path = path;
    r.tensor = tensor;
    r.st.n = 1000 + step;
    r.st.rel_l2 = x;
    r.st.mse = x * x;
    r.st.max_abs = 2 * x;
    r.st.snr_db = 20 + x;
    r.st.cosine = 1 - x;
    r.st.mean_signed = -x / 8;
    r.st.frac_zeroed = x / 4;
    r.frac_clipped = x / 16;
    r.seconds = 0.125;
    r.ef_residual = NAN; /* no error feedback */
    return r;
}

/* Adds steps 1..nsteps, grad and weight, plus one tensor row per step. */
static void add_steps(sq_store *s, int64_t id, int nsteps)
{
    sq_stat_row rows[3 * 64];
    size_t n = 0;
    for (int t = 1; t <= nsteps && n + 3 <= 3 * 64; t++) {
        rows[n++] = stat_row((uint64_t)t, "grad", NULL, 0.01 * t);
        rows[n++] = stat_row((uint64_t)t, "weight", NULL, 0.001 * t);
        rows[n++] = stat_row((uint64_t)t, "grad", "layer0.w", 0.02 * t);
    }
    char err[512] = "";
    ck_assert_msg(SQ(s, err, sq_store_add_stats(s, id, rows, n)) == 0, "add_stats: %s", err);
}

static void end_run(sq_store *s, int64_t id, const char *status)
{
    sq_bytes_row b[2] = {{"grad_reducescatter", "inter", 1000, 24, 1000, 24, 2000, 8, 1600},
                         {"weight_allgather", "intra", 0, 0, 0, 0, 0, 0, 0}};
    sq_timing_row t[3] = {{"grad_reducescatter", 4, 0.5, 1000000000},
                          {"weight_allgather", 4, 0.0, 100},
                          {"read", 1, 0.25, 0}};
    char err[512] = "";
    ck_assert_msg(SQ(s, err, sq_store_run_end(s, id, status, strcmp(status, "failed") ? NULL : "boom", b, 2,
                                   t, 3)) == 0,
                  "run_end: %s", err);
}

/* Counts of run id's rows in every child table. */
static int64_t child_rows(sqlite3 *db, int64_t id)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM params WHERE run_id = %1$lld)"
             " + (SELECT count(*) FROM step_metrics WHERE run_id = %1$lld)"
             " + (SELECT count(*) FROM tensor_stats WHERE run_id = %1$lld)"
             " + (SELECT count(*) FROM bytes WHERE run_id = %1$lld)"
             " + (SELECT count(*) FROM timings WHERE run_id = %1$lld)",
             (long long)id);
    return q_int(db, sql);
}

static void write_file(const char *path, const char *text, size_t reps)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < reps; i++) fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static int wait_child(pid_t pid)
{
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Takes a current file back to version v, as an older shardq left it. */
static void downgrade(sqlite3 *db, int v)
{
    if (v < 8)
        raw_exec(db, "ALTER TABLE step_metrics DROP COLUMN ef_residual; ALTER TABLE tensor_stats"
                     " DROP COLUMN ef_residual; ALTER TABLE train_steps DROP COLUMN ef_residual");
    if (v < 7) raw_exec(db, "ALTER TABLE runs DROP COLUMN grid; ALTER TABLE runs DROP COLUMN recipe");
    if (v < 6) raw_exec(db, "DROP TABLE netbench_results");
    if (v < 5)
        raw_exec(db, "ALTER TABLE bytes DROP COLUMN sent_params; ALTER TABLE bytes DROP COLUMN"
                     " bits_per_param");
    if (v < 4)
        raw_exec(db, "ALTER TABLE runs DROP COLUMN pid_start; ALTER TABLE runs DROP COLUMN"
                     " boot_id; ALTER TABLE runs DROP COLUMN heartbeat");
    if (v < 3) raw_exec(db, "DROP TABLE bench_results; DROP TABLE model_results");
    if (v < 2) raw_exec(db, "DROP TABLE train_steps");
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
    raw_exec(db, sql);
}

/* db_path holding one run, 'old', of two steps (ended 'done' when `done`);
** returns its id. */
static int64_t write_old_run(int done)
{
    sq_store *s = open_store(db_path, 0);
    int64_t old = begin_run(s, "old");
    add_steps(s, old, 2);
    if (done) end_run(s, old, "done");
    sq_store_close(s);
    return old;
}

/* write_old_run(0)'s file taken back to version v, then opened: migrated
** to this version. */
static sq_store *migrated_from(int v)
{
    write_old_run(0);
    sqlite3 *db = raw_open(db_path);
    downgrade(db, v);
    sqlite3_close(db);
    sq_store *s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    return s;
}

/* fork() with a pipe from the child (which writes out[1]; its out[0] is
** closed) to the parent (which reads out[0]). */
static pid_t fork_piped(int out[2])
{
    ck_assert_int_eq(pipe(out), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) close(out[0]);
    return pid;
}

/* This process's start time in clock ticks after boot, read here on its
** own from /proc/self/stat (field 22, counted after the command's ')'). */
static long long self_start(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    ck_assert_ptr_nonnull(p);
    long long v = -1;
    char *tok, *save = NULL;
    int field = 3;
    for (tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++)
        if (field == 22) v = atoll(tok);
    ck_assert_int_gt(v, 0);
    return v;
}

static void self_boot(char *buf, size_t len)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, (int)len, f));
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* Inserts a 'running' row with key, as written by the process (host, pid,
** start, boot); start < 0 and boot NULL are stored as NULL. */
static int64_t insert_running(sqlite3 *db, const char *key, const char *host, long long pid,
                              long long start, const char *boot)
{
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "INSERT INTO runs(kind, key, status, config, seed, version,"
                                        " host, pid, started, pid_start, boot_id) VALUES ('bench',"
                                        " ?1, 'running', '{}', 1, '0', ?2, ?3,"
                                        " '2026-01-01T00:00:00.000Z', ?4, ?5)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, pid);
    if (start >= 0) sqlite3_bind_int64(st, 4, start);
    sqlite3_bind_text(st, 5, boot, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    return sqlite3_last_insert_rowid(db);
}

static void my_host(char *buf, size_t len)
{
    ck_assert_int_eq(gethostname(buf, len), 0);
    buf[len - 1] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Schema                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_schema)
{
    sq_store *s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    ck_assert_str_eq(sq_store_path(s), db_path);
    ck_assert_ptr_nonnull(sq_store_db(s));
    sq_store_close(s);

    char buf[256];
    sqlite3 *db = raw_open(db_path);
    ck_assert_int_eq(q_int(db, "PRAGMA user_version"), SQ_STORE_VERSION);
    ck_assert_str_eq(q_text(db, "PRAGMA journal_mode", buf, sizeof buf), "wal");
    ck_assert_str_eq(q_text(db,
                            "SELECT group_concat(name, ',') FROM (SELECT name FROM "
                            "pragma_table_list WHERE schema = 'main' AND type = 'table' AND "
                            "name NOT LIKE 'sqlite_%' ORDER BY name)",
                            buf, sizeof buf),
                     "bench_results,bytes,model_results,netbench_results,params,runs,step_metrics,"
                     "tensor_stats,timings,train_steps");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_table_list WHERE schema = 'main' AND "
                               "type = 'table' AND name NOT LIKE 'sqlite_%' AND strict = 0"),
                     0);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                               "name = 'runs_key' AND sql LIKE '%UNIQUE%WHERE key IS NOT NULL%'"),
                     1);

    /* STRICT: a wrong type is refused, not converted */
    const char *bad[] = {
        "INSERT INTO runs(kind, status, config, seed, version, host, pid, started) VALUES "
        "('k', 'done', '{}', 'abc', 'v', 'h', 1, 't')",
        "INSERT INTO runs(kind, status, config, seed, version, host, pid, started) VALUES "
        "('k', 'done', '{}', 1.5, 'v', 'h', 1, 't')",
        "INSERT INTO runs(kind, status, config, seed, version, host, pid, started) VALUES "
        "('k', 'maybe', '{}', 1, 'v', 'h', 1, 't')",
    };
    const char *why[] = {"cannot store TEXT value in INTEGER column", "cannot store REAL value",
                         "CHECK constraint failed"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_ne(sqlite3_exec(db, bad[i], NULL, NULL, NULL), SQLITE_OK);
        ck_assert_msg(strstr(sqlite3_errmsg(db), why[i]), "%s: %s", bad[i], sqlite3_errmsg(db));
    }
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs"), 0);
    sqlite3_close(db);

    /* reopening a current file changes nothing; its runs stay */
    s = open_store(db_path, 0);
    int64_t id = begin_run(s, NULL);
    sq_store_close(s);
    s = open_store(db_path, 0);
    sq_store_close(s);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(file_int(db_path, "SELECT max(id) FROM runs"), id);
}
END_TEST

/* An empty file is a database of version 0: it is migrated. */
START_TEST(test_empty_file_migrated)
{
    write_file(db_path, "", 0);
    sq_store *s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    sq_store_close(s);
    ck_assert_int_eq(file_int(db_path, "PRAGMA user_version"), SQ_STORE_VERSION);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs"), 0);
}
END_TEST

/* A version-1 file (before training runs) gains train_steps and keeps its
** runs; train rows round trip, NaN validation loss as NULL, and go with
** their run. */
START_TEST(test_migrate_v1_and_train_rows)
{
    sq_store *s = migrated_from(1);
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM step_metrics"), 4);
    int64_t id = begin_run(s, "train");
    sq_train_row rows[3] = {
        {.step = 0, .tokens = 100, .loss = 5.5, .val_loss = NAN, .lr = 1e-4, .grad_norm = 2,
         .seconds = 0.5},
        {.step = 1, .tokens = 200, .loss = 5.0, .val_loss = 5.25, .lr = 2e-4, .grad_norm = 1,
         .seconds = 1.0},
        {.step = 2, .tokens = 300, .loss = 4.5, .val_loss = NAN, .lr = 3e-4, .grad_norm = 0.5,
         .seconds = 1.5},
    };
    char err[512];
    ck_assert_msg(SQ(s, err, sq_store_add_train(s, id, rows, 3)) == 0, "%s", err);
    /* the same step twice is refused, and the first rows stay */
    ck_assert_int_eq(SQ(s, err, sq_store_add_train(s, id, rows, 1)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, db_path) != NULL, "%s", err);
    sqlite3 *h = sq_store_db(s);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM train_steps"), 3);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM train_steps WHERE val_loss IS NULL"), 2);
    ck_assert_int_eq(q_int(h, "SELECT tokens FROM train_steps WHERE step = 2"), 300);
    ck_assert_int_eq(q_int(h, "SELECT val_loss = 5.25 FROM train_steps WHERE step = 1"), 1);
    ck_assert_int_eq(SQ(s, err, sq_store_run_delete(s, id)), 0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM train_steps"), 0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM runs"), 1);
    sq_store_close(s);
}
END_TEST

/* A version-4 file (before the count of real parameters) keeps every row
** of every table; its bytes rows read NULL in the new columns, which a
** read-only open of the old file does not have; new rows fill them. */
START_TEST(test_migrate_v4_bytes_per_param)
{
    write_old_run(1);
    sq_store *s;
    static const char *const tables[] = {"runs", "params", "step_metrics", "tensor_stats",
                                         "bytes", "timings"};
    int64_t before[6];
    char sql[256], buf[512], err[512];
    for (int i = 0; i < 6; i++) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        before[i] = file_int(db_path, sql);
    }
    ck_assert_int_eq(before[4], 2);
    sqlite3 *db = raw_open(db_path);
    downgrade(db, 4);
    char v4[512];
    q_text(db, "SELECT group_concat(printf('%s/%s:%d,%d,%d,%d,%d,%d,%s', collective, link, "
               "sent_codes, sent_meta, recv_codes, recv_meta, sent_elems, messages, "
               "ifnull(bits_per_elem, 'NULL')), ';') FROM (SELECT * FROM bytes ORDER BY "
               "collective)", v4, sizeof v4);
    sqlite3_close(db);

    ck_assert_int_eq(open_err(db_path, 0, 1, &s, err, sizeof err), 0);
    ck_assert_int_eq(sq_store_version(s), 4);
    sq_store_close(s);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM pragma_table_info('bytes')"
                                       " WHERE name = 'sent_params'"), 0);

    s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    sqlite3 *h = sq_store_db(s);
    for (int i = 0; i < 6; i++) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        ck_assert_msg(q_int(h, sql) == before[i], "%s: %lld rows, were %lld", tables[i],
                      (long long)q_int(h, sql), (long long)before[i]);
    }
    ck_assert_str_eq(q_text(h, "SELECT group_concat(printf('%s/%s:%d,%d,%d,%d,%d,%d,%s', "
                               "collective, link, sent_codes, sent_meta, recv_codes, recv_meta, "
                               "sent_elems, messages, ifnull(bits_per_elem, 'NULL')), ';') FROM "
                               "(SELECT * FROM bytes ORDER BY collective)", buf, sizeof buf),
                     v4);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM bytes WHERE sent_params IS NULL AND"
                              " bits_per_param IS NULL"), 2);
    int64_t id = begin_run(s, "new");
    end_run(s, id, "done");
    snprintf(sql, sizeof sql, "SELECT sent_params FROM bytes WHERE run_id = %lld AND link = "
             "'inter'", (long long)id);
    ck_assert_int_eq(q_int(h, sql), 1600);
    sq_store_close(s);
}
END_TEST

/* A version-5 file (before netbench) keeps every row of every table and
** gains netbench_results; its rows round trip, a NaN time (NOT NULL) and a
** duplicate size are refused with the file named, and they go with their
** run. */
START_TEST(test_migrate_v5_netbench_rows)
{
    sq_store *s = open_store(db_path, 0);
    int64_t old = begin_run(s, "old");
    add_steps(s, old, 3);
    end_run(s, old, "done");
    sq_model_row m = {.scheme = "baseline", .gpus = 8, .iteration_s = 1, .tflops = 9,
                      .speedup = 1};
    char err[512], sql[256];
    ck_assert_msg(SQ(s, err, sq_store_add_model(s, old, &m, 1)) == 0, "%s", err);
    sq_store_close(s);
    static const char *const tables[] = {"runs",    "params",       "step_metrics",
                                         "tensor_stats", "bytes", "timings",
                                         "model_results"};
    enum { NT = sizeof tables / sizeof *tables };
    int64_t before[NT];
    for (int i = 0; i < NT; i++) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        before[i] = file_int(db_path, sql);
        ck_assert_int_gt(before[i], 0);
    }
    sqlite3 *db = raw_open(db_path);
    downgrade(db, 5);
    sqlite3_close(db);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM pragma_table_list"
                                       " WHERE name = 'netbench_results'"), 0);

    s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    sqlite3 *h = sq_store_db(s);
    for (int i = 0; i < NT; i++) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        ck_assert_msg(q_int(h, sql) == before[i], "%s: %lld rows, were %lld", tables[i],
                      (long long)q_int(h, sql), (long long)before[i]);
    }
    int64_t id = begin_run(s, "netbench");
    sq_netbench_row r[2] = {
        {.op = "allgather", .level = "intra", .bytes = 8, .count = 1, .ranks = 2, .comms = 2,
         .iters = 20, .seconds = 2.5e-6, .algbw_gb_s = 0.0032, .busbw_gb_s = 0.0016},
        {.op = "allgather", .level = "intra", .bytes = 1ull << 30, .count = 1ull << 27,
         .ranks = 2, .comms = 2, .iters = 1, .seconds = 0.25, .algbw_gb_s = 4.294967296,
         .busbw_gb_s = 2.147483648},
    };
    ck_assert_msg(SQ(s, err, sq_store_add_netbench(s, id, r, 2)) == 0, "%s", err);
    ck_assert_int_eq(SQ(s, err, sq_store_add_netbench(s, id, r + 1, 1)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, db_path) != NULL, "%s", err);
    sq_netbench_row nan_row = r[0];
    nan_row.bytes = 16, nan_row.seconds = NAN;
    ck_assert_int_ne(SQ(s, err, sq_store_add_netbench(s, id, &nan_row, 1)), 0);
    ck_assert_msg(strstr(err, "NOT NULL") != NULL, "%s", err);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM netbench_results"), 2);
    ck_assert_int_eq(q_int(h, "SELECT count FROM netbench_results WHERE bytes = 1073741824"),
                     1ll << 27);
    ck_assert_int_eq(q_int(h, "SELECT busbw_gb_s = 2.147483648 AND seconds = 0.25 FROM"
                              " netbench_results WHERE iters = 1"), 1);
    ck_assert_int_eq(SQ(s, err, sq_store_run_delete(s, id)), 0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM netbench_results"), 0);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld", (long long)old);
    ck_assert_int_eq(q_int(h, sql), 1);
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

/* A version-7 file (before error feedback) keeps its step, tensor and
** train rows, NULL in ef_residual; new rows store theirs, a NaN as NULL. */
START_TEST(test_migrate_v7_ef_residual)
{
    sq_store *s = open_store(db_path, 0);
    int64_t old = begin_run(s, "old");
    add_steps(s, old, 2);
    sq_train_row tr = {.step = 0, .tokens = 10, .loss = 3, .val_loss = NAN, .lr = 1e-3,
                       .grad_norm = 1, .seconds = 0.5, .ef_residual = 0.25};
    char err[512];
    ck_assert_msg(SQ(s, err, sq_store_add_train(s, old, &tr, 1)) == 0, "%s", err);
    sq_store_close(s);
    sqlite3 *db = raw_open(db_path);
    downgrade(db, 7);
    sqlite3_close(db);
    s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    sqlite3 *h = sq_store_db(s);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM step_metrics WHERE ef_residual IS NULL"), 4);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM tensor_stats WHERE ef_residual IS NULL"), 2);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM train_steps WHERE ef_residual IS NULL"), 1);
    int64_t id = begin_run(s, "ef");
    sq_stat_row r[3] = {stat_row(1, "grad", NULL, 0.5), stat_row(1, "weight", NULL, 0.5),
                        stat_row(1, "grad", "w", 0.5)};
    r[0].ef_residual = 0.375, r[2].ef_residual = 0.125;
    ck_assert_msg(SQ(s, err, sq_store_add_stats(s, id, r, 3)) == 0, "%s", err);
    tr.step = 1, tr.ef_residual = 0.0625;
    ck_assert_msg(SQ(s, err, sq_store_add_train(s, id, &tr, 1)) == 0, "%s", err);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT ef_residual = 0.375 FROM step_metrics WHERE run_id = %lld"
             " AND path = 'grad'", (long long)id);
    ck_assert_int_eq(q_int(h, sql), 1);
    snprintf(sql, sizeof sql, "SELECT ef_residual IS NULL FROM step_metrics WHERE run_id = %lld"
             " AND path = 'weight'", (long long)id);
    ck_assert_int_eq(q_int(h, sql), 1);
    snprintf(sql, sizeof sql, "SELECT ef_residual = 0.125 FROM tensor_stats WHERE run_id = %lld",
             (long long)id);
    ck_assert_int_eq(q_int(h, sql), 1);
    snprintf(sql, sizeof sql, "SELECT ef_residual = 0.0625 FROM train_steps WHERE run_id = %lld",
             (long long)id);
    ck_assert_int_eq(q_int(h, sql), 1);
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

/* A version-2 file (before bench and model rows) gains both tables; their
** rows round trip (a NaN std and speedup as NULL), a duplicate is refused
** with the file named, and they go with their run. */
START_TEST(test_migrate_v2_bench_model_rows)
{
    sq_store *s = migrated_from(2);
    sqlite3 *h = sq_store_db(s);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM step_metrics"), 4);
    int64_t id = begin_run(s, "bench");
    sq_bench_row b[2] = {
        {.op = "quantize", .threads = 1, .elements = 1024, .bytes = 4608, .gb_per_s = 2.5,
         .gb_per_s_std = 0.25, .copy_gb_per_s = 10},
        {.op = "copy", .threads = 1, .elements = 1024, .bytes = 8192, .gb_per_s = 10,
         .gb_per_s_std = NAN, .copy_gb_per_s = 10},
    };
    char err[512];
    ck_assert_msg(SQ(s, err, sq_store_add_bench(s, id, b, 2)) == 0, "%s", err);
    ck_assert_int_eq(SQ(s, err, sq_store_add_bench(s, id, b, 1)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, db_path) != NULL, "%s", err);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM bench_results WHERE gb_per_s_std IS NULL"), 1);
    ck_assert_int_eq(q_int(h, "SELECT bytes FROM bench_results WHERE op = 'quantize'"), 4608);
    sq_model_row m[2] = {
        {.scheme = "baseline", .gpus = 64, .compute_s = 0.2, .weight_s = 0.2, .grad_s = 0.4,
         .iteration_s = 0.8, .tflops = 24, .speedup = 1, .inter_bytes_per_node = 7770000000ull},
        {.scheme = "sdp4bit", .gpus = 64, .compute_s = 0.2, .weight_s = 0.05, .grad_s = 0.03,
         .quant_s = 0.01, .iteration_s = 0.3, .tflops = 60, .speedup = NAN,
         .inter_bytes_per_node = 1310000000ull},
    };
    ck_assert_msg(SQ(s, err, sq_store_add_model(s, id, m, 2)) == 0, "%s", err);
    ck_assert_int_eq(SQ(s, err, sq_store_add_model(s, id, m + 1, 1)), SQ_ERR_CONFLICT);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM model_results WHERE speedup IS NULL"), 1);
    ck_assert_int_eq(q_int(h, "SELECT inter_bytes_per_node FROM model_results"
                              " WHERE scheme = 'baseline'"), 7770000000ll);
    ck_assert_int_eq(SQ(s, err, sq_store_run_delete(s, id)), 0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM bench_results"), 0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM model_results"), 0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM runs"), 1);
    sq_store_close(s);
}
END_TEST

/* A version-3 file (before liveness by start time and boot) gains the
** columns pid_start, boot_id and heartbeat, NULL in its old rows, which stay;
** read-only it stays as it is. A new run fills them in: this process's start
** time and boot, and a heartbeat equal to its start. An old 'running' row
** (no start time known) falls back to whether its pid exists. */
START_TEST(test_migrate_v3_liveness)
{
    int64_t old = write_old_run(1);
    sq_store *s;
    char host[256], buf[256], boot[64];
    my_host(host, sizeof host);
    self_boot(boot, sizeof boot);
    sqlite3 *db = raw_open(db_path);
    downgrade(db, 3);
    /* left running by this (live) process, and by one that is gone, as a
    ** version-3 shardq wrote them: host and pid only */
    raw_exec(db, "INSERT INTO runs(kind, key, status, config, seed, version, host, pid, started)"
                 " SELECT 'replay', 'live', 'running', '{}', 1, '0', host, 0, started FROM runs;"
                 " INSERT INTO runs(kind, key, status, config, seed, version, host, pid, started)"
                 " SELECT 'replay', 'dead', 'running', '{}', 1, '0', host, 0, started FROM runs"
                 " WHERE key = 'old'");
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE runs SET pid = %lld WHERE key = 'live'", (long long)getpid());
    raw_exec(db, sql);
    pid_t dead = fork();
    ck_assert_int_ge(dead, 0);
    if (dead == 0) _exit(0);
    wait_child(dead);
    snprintf(sql, sizeof sql, "UPDATE runs SET pid = %lld WHERE key = 'dead'", (long long)dead);
    raw_exec(db, sql);
    sqlite3_close(db);

    char err[512];
    ck_assert_int_eq(open_err(db_path, 0, 1, &s, err, sizeof err), 0);
    ck_assert_int_eq(sq_store_version(s), 3);
    sq_store_close(s);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM pragma_table_info('runs')"
                                       " WHERE name = 'pid_start'"), 0);

    s = open_store(db_path, 0);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    sqlite3 *h = sq_store_db(s);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN"
                              " ('pid_start', 'boot_id', 'heartbeat')"), 3);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM runs WHERE pid_start IS NULL AND boot_id"
                              " IS NULL AND heartbeat IS NULL"), 3);
    ck_assert_int_eq(child_rows(h, old), 2 + 4 + 2 + 2 + 3);

    sq_run_info r = run_info("live");
    int64_t got;
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_BUSY);
    r.key = "dead";
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)) == SQ_STORE_STARTED,
                  "%s", err);
    snprintf(sql, sizeof sql, "SELECT pid_start FROM runs WHERE id = %lld", (long long)got);
    ck_assert_int_eq(q_int(h, sql), self_start());
    snprintf(sql, sizeof sql, "SELECT boot_id FROM runs WHERE id = %lld", (long long)got);
    ck_assert_str_eq(q_text(h, sql, buf, sizeof buf), boot);
    snprintf(sql, sizeof sql, "SELECT heartbeat = started FROM runs WHERE id = %lld",
             (long long)got);
    ck_assert_int_eq(q_int(h, sql), 1);
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

START_TEST(test_newer_refused)
{
    sqlite3 *db = raw_open(db_path);
    raw_exec(db, "CREATE TABLE future(x); PRAGMA user_version = 9");
    sqlite3_close(db);
    char want[700], err[512];
    snprintf(want, sizeof want,
             "%s: schema version 9 is newer than this shardq (%d): upgrade shardq", db_path,
             SQ_STORE_VERSION);
    for (int ro = 0; ro <= 1; ro++) {
        sq_store *s = (sq_store *)1;
        ck_assert_int_eq(open_err(db_path, 0, ro, &s, err, sizeof err), SQ_ERR_FORMAT);
        ck_assert_ptr_null(s);
        ck_assert_str_eq(err, want);
    }
    /* untouched: same version, no tables added, not switched to WAL */
    char buf[64];
    db = raw_open(db_path);
    ck_assert_int_eq(q_int(db, "PRAGMA user_version"), 9);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM sqlite_schema"), 1);
    ck_assert_str_eq(q_text(db, "PRAGMA journal_mode", buf, sizeof buf), "delete");
    sqlite3_close(db);
}
END_TEST

START_TEST(test_not_a_database)
{
    write_file(db_path, "this is a text file, not a database at all.\n", 100);
    struct stat before, after;
    ck_assert_int_eq(stat(db_path, &before), 0);
    char want[700], err[512];
    snprintf(want, sizeof want, "%s: file is not a database", db_path);
    for (int ro = 0; ro <= 1; ro++) {
        sq_store *s = NULL;
        ck_assert_int_eq(open_err(db_path, 0, ro, &s, err, sizeof err), SQ_ERR_FORMAT);
        ck_assert_str_eq(err, want);
    }
    ck_assert_int_eq(stat(db_path, &after), 0);
    ck_assert_int_eq(after.st_size, before.st_size);
}
END_TEST

START_TEST(test_readonly_missing)
{
    char want[700], err[512];
    sq_store *s = NULL;
    snprintf(want, sizeof want, "%s: no such database", db_path);
    ck_assert_int_eq(open_err(db_path, 0, 1, &s, err, sizeof err), SQ_ERR_NOTFOUND);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(access(db_path, F_OK), -1); /* not created */

    /* a directory that does not exist: read-write cannot create it either */
    char path[700];
    snprintf(path, sizeof path, "%s/no/such/dir.db", dir);
    ck_assert_int_eq(open_err(path, 0, 0, &s, err, sizeof err), SQ_ERR_IO);
    ck_assert_msg(strstr(err, path) && strstr(err, "cannot open"), "%s", err);
}
END_TEST

/* The bytes of the file at path (malloc'd), *len their count. */
static char *file_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = NULL;
    size_t n = 0, cap = 0, k;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            ck_assert_ptr_nonnull(buf = realloc(buf, cap));
        }
        k = fread(buf + n, 1, cap - n, f);
        n += k;
    } while (k > 0);
    fclose(f);
    *len = n;
    return buf;
}

/* A schema that shardq did not create is refused, read-only or not, with
** a sentence that names the entry, and the file is not touched: not
** migrated, not switched to WAL, its rows kept -- a trigger would have
** deleted those the next run wrote. */
START_TEST(test_schema_not_shardq)
{
    static const struct {
        const char *sql, *want;
    } edits[] = {
        {"CREATE TRIGGER t AFTER INSERT ON step_metrics BEGIN DELETE FROM step_metrics; END",
         "the schema holds a trigger 't' that shardq did not create: refused (a database edited "
         "by hand could change or delete rows; drop it with sqlite3 if you trust the file)"},
        {"CREATE VIEW v AS SELECT * FROM runs", "holds a view 'v' that shardq did not create"},
        {"CREATE TABLE notes(x)", "holds a table 'notes' that shardq did not create"},
        {"CREATE INDEX by_host ON runs(host)", "holds an index 'by_host' that shardq did not"},
        {"ALTER TABLE runs ADD COLUMN extra TEXT",
         "the schema's table 'runs' is not the one shardq creates at version 8 (its definition "
         "differs)"},
        {"DROP INDEX runs_status", "lacks an index 'runs_status' that shardq creates at version 8"},
        {"DROP TABLE timings", "lacks a table 'timings'"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        unlink(db_path);
        sq_store *s = open_store(db_path, 0);
        int64_t id = begin_run(s, NULL);
        add_steps(s, id, 3);
        sq_store_close(s);
        sqlite3 *db = raw_open(db_path);
        raw_exec(db, edits[i].sql);
        sqlite3_close(db);
        size_t n0, n1;
        char *before = file_bytes(db_path, &n0), err[512];
        for (int ro = 1; ro >= 0; ro--) {
            s = (sq_store *)1;
            ck_assert_int_eq(open_err(db_path, 0, ro, &s, err, sizeof err), SQ_ERR_FORMAT);
            ck_assert_ptr_null(s);
            ck_assert_msg(strncmp(err, db_path, strlen(db_path)) == 0 && strstr(err, edits[i].want),
                          "%s: %s", edits[i].sql, err);
        }
        char *after = file_bytes(db_path, &n1);
        ck_assert_msg(n0 == n1 && memcmp(before, after, n0) == 0, "%s: the file changed",
                      edits[i].sql);
        free(before);
        free(after);
        ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM step_metrics"), 6);
    }
    /* a file of version 0 is a new store only when it holds nothing */
    unlink(db_path);
    sqlite3 *db = raw_open(db_path);
    raw_exec(db, "CREATE TABLE runs(x)");
    sqlite3_close(db);
    char err[512];
    sq_store *s = NULL;
    ck_assert_int_eq(open_err(db_path, 0, 0, &s, err, sizeof err), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err, "not a shardq store: it holds a table 'runs' but no shardq schema"),
                  "%s", err);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM sqlite_schema"), 1);
    /* ANALYZE's statistics are not the file's own schema */
    unlink(db_path);
    s = open_store(db_path, 0);
    sq_store_close(s);
    db = raw_open(db_path);
    raw_exec(db, "ANALYZE");
    ck_assert_int_gt(q_int(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'"),
                     0);
    sqlite3_close(db);
    s = open_store(db_path, 0);
    sq_store_close(s);
}
END_TEST

/* Older versions are checked against their own schema, migrated, and the
** result checked again: a file downgraded by hand to each version opens. */
START_TEST(test_schema_each_version)
{
    for (int v = 1; v < SQ_STORE_VERSION; v++) {
        unlink(db_path);
        sq_store *s = open_store(db_path, 0);
        sq_store_close(s);
        sqlite3 *db = raw_open(db_path);
        downgrade(db, v);
        sqlite3_close(db);
        char err[512];
        s = NULL;
        ck_assert_msg(open_err(db_path, 0, 1, &s, err, sizeof err) == 0, "v%d: %s", v, err);
        ck_assert_int_eq(sq_store_version(s), v);
        sq_store_close(s);
        /* one step more than the version says it has: refused */
        db = raw_open(db_path);
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v - 1);
        raw_exec(db, sql);
        sqlite3_close(db);
        ck_assert_int_eq(open_err(db_path, 0, 1, &s, err, sizeof err), SQ_ERR_FORMAT);
        db = raw_open(db_path);
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
        raw_exec(db, sql);
        sqlite3_close(db);
        s = open_store(db_path, 0);
        ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
        sq_store_close(s);
    }
}
END_TEST

/* While a store is open, the safe file writer (every output file of the
** command) refuses its file and its -wal; closed, the file is a file. */
START_TEST(test_store_file_protected)
{
    char wal[700], link[700], err[512];
    snprintf(wal, sizeof wal, "%s-wal", db_path);
    snprintf(link, sizeof link, "%s/link.csv", dir);
    ck_assert_int_eq(symlink(db_path, link), 0);
    sq_store *s = open_store(db_path, 0), *t = NULL;
    int64_t id = begin_run(s, NULL);
    sq_wfile w;
    sq_error e = {0};
    const char *paths[] = {db_path, wal, link};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(sq_wfile_open(&w, paths[i], &e), SQ_ERR_CONFLICT);
        ck_assert_msg(strstr(e.msg, paths[i]) && strstr(e.msg, "is the database in use"), "%s",
                      e.msg);
    }
    /* a second store of the same file, read-only: closing one leaves it guarded */
    ck_assert_int_eq(open_err(db_path, 0, 1, &t, err, sizeof err), 0);
    sq_store_close(s);
    ck_assert_int_eq(sq_wfile_open(&w, link, &e), SQ_ERR_CONFLICT);
    sq_store_close(t);
    ck_assert_int_eq(sq_wfile_open(&w, db_path, &e), 0);
    sq_wfile_abort(&w);
    assert_intact(db_path);
    ck_assert_int_eq(file_int(db_path, "SELECT max(id) FROM runs"), id);
}
END_TEST

/* sq_store_limit_queries: a statement that runs past the limit is
** interrupted, each statement with its own clock; 0 lifts the limit. */
START_TEST(test_limit_queries)
{
    static const char forever[] = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)";
    char sql[256];
    sq_store *s = open_store(db_path, 0);
    sqlite3 *db = sq_store_db(s);
    sqlite3_stmt *st;
    ck_assert_int_eq(sq_store_limit_queries(NULL, 1), SQ_ERR_ARG);
    ck_assert_int_eq(sq_store_limit_queries(s, 0.2), SQ_OK);
    snprintf(sql, sizeof sql, "%s SELECT count(*) FROM c", forever);
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_INTERRUPT);
    ck_assert_int_eq(sqlite3_errcode(db), SQLITE_INTERRUPT);
    sqlite3_finalize(st);
    /* past that deadline, the next statement has a clock of its own */
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs"), 0);
    int64_t id = begin_run(s, NULL); /* the store's own writes */
    add_steps(s, id, 2);
    /* rows forever: the time between the steps counts */
    snprintf(sql, sizeof sql, "%s SELECT x FROM c", forever);
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    int rc, rows = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) rows++;
    ck_assert_int_eq(rc, SQLITE_INTERRUPT);
    ck_assert_int_gt(rows, 0);
    sqlite3_finalize(st);
    /* a long query, stopped under a short limit, runs to its end without */
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000)"
             " SELECT count(*) FROM c");
    ck_assert_int_eq(sq_store_limit_queries(s, 1e-3), SQ_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_INTERRUPT);
    sqlite3_finalize(st);
    ck_assert_int_eq(sq_store_limit_queries(s, 0), SQ_OK);
    ck_assert_int_eq(q_int(db, sql), 1000000);
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A run, written and read back                                             */
/* ------------------------------------------------------------------------ */

START_TEST(test_round_trip)
{
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, "key-1");
    add_steps(s, id, 3);
    end_run(s, id, "done");
    sq_store_close(s);

    char buf[512], host[256];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    sqlite3 *db = raw_open(db_path);
    ck_assert_str_eq(q_text(db,
                            "SELECT printf('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%d|%s', kind, key, "
                            "sweep, status, config, preset, scheme, topo, device, trace, seed, "
                            "version) FROM runs",
                            buf, sizeof buf),
                     "replay|key-1|s1|done|{\"scheme\":\"sdp4bit\"}|sdp4bit|weight.mode=diff|2x4|"
                     "cpu|/data/traces/gpt2|42|" SHARDQ_VERSION_STRING);
    ck_assert_str_eq(q_text(db, "SELECT host FROM runs", buf, sizeof buf), host);
    ck_assert_int_eq(q_int(db, "SELECT pid FROM runs"), getpid());
    ck_assert_int_eq(q_int(db, "SELECT error IS NULL FROM runs"), 1);
    /* UTC ISO 8601 with milliseconds, ended not before started */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE started GLOB "
                               "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]"
                               ":[0-9][0-9].[0-9][0-9][0-9]Z' AND length(started) = 24"),
                     1);
    ck_assert_int_eq(q_int(db, "SELECT julianday(ended) >= julianday(started) AND "
                               "abs(julianday('now') - julianday(started)) < 0.01 FROM runs"),
                     1);
    ck_assert_str_eq(q_text(db,
                            "SELECT group_concat(key || '=' || ifnull(value, 'NULL'), ';') FROM "
                            "(SELECT * FROM params ORDER BY key)",
                            buf, sizeof buf),
                     "lr=0.5;note=NULL");

    /* the stats rows, each figure as written */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM step_metrics"), 6);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM tensor_stats"), 3);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM step_metrics WHERE path = 'grad' AND "
                               "elements = 1000 + step AND rel_l2 = 0.01 * step AND "
                               "mse = rel_l2 * rel_l2 AND max_abs = 2 * rel_l2 AND "
                               "snr_db = 20 + rel_l2 AND cosine = 1 - rel_l2 AND "
                               "mean_signed = -rel_l2 / 8 AND frac_zeroed = rel_l2 / 4 AND "
                               "frac_clipped = rel_l2 / 16 AND seconds = 0.125"),
                     3);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM step_metrics WHERE path = 'weight' AND "
                               "rel_l2 = 0.001 * step"),
                     3);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM tensor_stats WHERE path = 'grad' AND "
                               "tensor = 'layer0.w' AND rel_l2 = 0.02 * step AND "
                               "elements = 1000 + step"),
                     3);

    /* bytes: bits per element from the sent bytes, NULL for no elements */
    ck_assert_str_eq(q_text(db,
                            "SELECT group_concat(printf('%s/%s:%d,%d,%d,%d,%d,%d,%s', collective,"
                            " link, sent_codes, sent_meta, recv_codes, recv_meta, sent_elems, "
                            "messages, ifnull(bits_per_elem, 'NULL')), ';') FROM "
                            "(SELECT * FROM bytes ORDER BY collective)",
                            buf, sizeof buf),
                     "grad_reducescatter/inter:1000,24,1000,24,2000,8,4.096;"
                     "weight_allgather/intra:0,0,0,0,0,0,NULL");
    /* and per real parameter: NULL where the link carried none */
    ck_assert_str_eq(q_text(db,
                            "SELECT group_concat(printf('%s/%s:%d,%s', collective, link, "
                            "sent_params, ifnull(bits_per_param, 'NULL')), ';') FROM "
                            "(SELECT * FROM bytes ORDER BY collective)",
                            buf, sizeof buf),
                     "grad_reducescatter/inter:1600,5.12;weight_allgather/intra:0,NULL");
    /* timings: GB/s, NULL when the time or the bytes are 0 */
    ck_assert_str_eq(q_text(db,
                            "SELECT group_concat(printf('%s:%d,%s,%d,%s', op, calls, seconds, "
                            "bytes, ifnull(gb_per_s, 'NULL')), ';') FROM "
                            "(SELECT * FROM timings ORDER BY op)",
                            buf, sizeof buf),
                     "grad_reducescatter:4,0.5,1000000000,2.0;read:1,0.25,0,NULL;"
                     "weight_allgather:4,0.0,100,NULL");
    sqlite3_close(db);
}
END_TEST

START_TEST(test_nan_is_null)
{
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, NULL);
    sq_stat_row r[2] = {stat_row(1, "grad", NULL, 0.5), stat_row(1, "weight", "t", 0.5)};
    for (int i = 0; i < 2; i++) {
        r[i].st.snr_db = INFINITY; /* an exact result: kept */
        r[i].st.mean_signed = -INFINITY;
        r[i].st.cosine = NAN;
        r[i].frac_clipped = NAN;
        r[i].seconds = NAN;
    }
    char err[512] = "";
    ck_assert_msg(SQ(s, err, sq_store_add_stats(s, id, r, 2)) == 0, "%s", err);
    sq_store_close(s);
    sqlite3 *db = raw_open(db_path);
    const char *tables[] = {"step_metrics", "tensor_stats"};
    for (int i = 0; i < 2; i++) {
        char sql[512], buf[256];
        snprintf(sql, sizeof sql,
                 "SELECT typeof(cosine) || typeof(frac_clipped) || typeof(seconds) || "
                 "typeof(snr_db) || typeof(rel_l2) FROM %s",
                 tables[i]);
        ck_assert_str_eq(q_text(db, sql, buf, sizeof buf), "nullnullnullrealreal");
        snprintf(sql, sizeof sql, "SELECT snr_db > 1e308 AND mean_signed < -1e308 FROM %s",
                 tables[i]);
        ck_assert_int_eq(q_int(db, sql), 1);
    }
    sqlite3_close(db);
}
END_TEST

START_TEST(test_seed_range)
{
    sq_store *s = open_store(db_path, 0);
    sq_run_info r = run_info(NULL);
    int64_t id;
    char err[512] = "";
    r.seed = (uint64_t)INT64_MAX;
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &id)) == SQ_STORE_STARTED,
                  "%s", err);
    r.seed = (uint64_t)INT64_MAX + 1;
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &id)), SQ_ERR_RANGE);
    ck_assert_msg(strstr(err, db_path) && strstr(err, "seed 9223372036854775808"), "%s", err);
    sq_store_close(s);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(file_int(db_path, "SELECT seed FROM runs"), INT64_MAX);
}
END_TEST

/* Failures inside a write leave nothing of it behind. */
START_TEST(test_write_errors)
{
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, NULL);
    char err[512] = "", want[700];

    sq_stat_row r[3] = {stat_row(1, "grad", NULL, 0.1), stat_row(2, "grad", NULL, 0.1),
                        stat_row(1, "grad", NULL, 0.2)}; /* the third repeats the first */
    ck_assert_int_eq(SQ(s, err, sq_store_add_stats(s, id, r, 3)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, db_path) && strstr(err, "UNIQUE constraint failed"), "%s", err);
    r[2].path = "both"; /* not grad or weight */
    ck_assert_int_eq(SQ(s, err, sq_store_add_stats(s, id, r, 3)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, "CHECK constraint failed"), "%s", err);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM step_metrics"), 0);

    snprintf(want, sizeof want, "%s: no run 999", db_path);
    ck_assert_int_eq(SQ(s, err, sq_store_add_stats(s, 999, r, 1)), SQ_ERR_NOTFOUND);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(SQ(s, err, sq_store_run_end(s, 999, "done", NULL, NULL, 0, NULL, 0)),
                     SQ_ERR_NOTFOUND);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(SQ(s, err, sq_store_run_delete(s, 999)), SQ_ERR_NOTFOUND);
    ck_assert_str_eq(err, want);

    ck_assert_int_eq(SQ(s, err, sq_store_run_end(s, id, "running", NULL, NULL, 0, NULL, 0)),
                     SQ_ERR_ARG);
    ck_assert_msg(strstr(err, "'done' or 'failed'"), "%s", err);

    /* a bad timing row (NaN seconds) undoes the status change too */
    sq_timing_row t = {"read", 1, NAN, 10};
    ck_assert_int_eq(SQ(s, err, sq_store_run_end(s, id, "done", NULL, NULL, 0, &t, 1)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, "NOT NULL constraint failed"), "%s", err);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs WHERE status = 'running' AND "
                                       "ended IS NULL"),
                     1);

    /* a duplicate parameter name: no run is left behind */
    sq_run_info info = run_info("dup");
    sq_store_kv p[2] = {{"a", "1"}, {"a", "2"}};
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &info, p, 2, &id)), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(err, "UNIQUE constraint failed: params"), "%s", err);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs WHERE key = 'dup'"), 0);
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

START_TEST(test_run_delete)
{
    sq_store *s = open_store(db_path, 0);
    int64_t a = begin_run(s, "a"), b = begin_run(s, "b");
    add_steps(s, a, 4);
    add_steps(s, b, 4);
    end_run(s, a, "done");
    end_run(s, b, "done");
    char err[512] = "";
    ck_assert_msg(SQ(s, err, sq_store_run_delete(s, a)) == 0, "%s", err);
    sqlite3 *db = sq_store_db(s);
    ck_assert_int_eq(child_rows(db, a), 0);
    ck_assert_int_eq(child_rows(db, b), 2 + 8 + 4 + 2 + 3);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs"), 1);
    sq_store_close(s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Keys: resuming                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_key_done_and_busy)
{
    sq_store *s = open_store(db_path, 0);
    sq_run_info r = run_info("k");
    char err[512] = "";
    int64_t id = begin_run(s, "k"), got = -1;

    /* running in this very process: alive */
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_BUSY);
    ck_assert_int_eq(got, id);

    add_steps(s, id, 2);
    end_run(s, id, "done");
    got = -1;
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_STORE_DONE);
    ck_assert_int_eq(got, id);
    /* neither outcome wrote anything */
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(child_rows(sq_store_db(s), id), 2 + 4 + 2 + 2 + 3);

    /* a run on another host cannot be checked: taken as alive */
    raw_exec(sq_store_db(s),
             "INSERT INTO runs(kind, key, status, config, seed, version, host, pid, started) "
             "VALUES ('replay', 'far', 'running', '{}', 1, '0', 'another-host.invalid', 1, "
             "'2026-01-01T00:00:00.000Z')");
    r.key = "far";
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_BUSY);
    ck_assert_int_eq(got, q_int(sq_store_db(s), "SELECT id FROM runs WHERE key = 'far'"));

    /* a live child process holding the key: it says when it has begun the
    ** run, then waits for the end of `hold` */
    int ready[2], hold[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]);
        sq_store *c = NULL;
        sq_run_info ci = run_info("child");
        int64_t cid;
        char cerr[512];
        char ok = open_err(db_path, 0, 0, &c, cerr, sizeof cerr) == 0 &&
                  SQ(c, cerr, sq_store_run_begin(c, &ci, NULL, 0, &cid)) ==
                      SQ_STORE_STARTED;
        sq_store_close(c);
        if (write(ready[1], &ok, 1) != 1) _exit(2);
        char x;
        if (read(hold[0], &x, 1) != 0) _exit(3);
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char ok = 0;
    ck_assert_int_eq(read(ready[0], &ok, 1), 1);
    ck_assert_int_eq(ok, 1);
    r.key = "child";
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_BUSY);
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM runs WHERE key = 'child'"), 1);
    close(hold[1]);
    int status = wait_child(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    close(ready[0]);
    /* once it is gone the same key starts afresh */
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)) == SQ_STORE_STARTED,
                  "%s", err);
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM runs WHERE key = 'child'"), 1);
    sq_store_close(s);
}
END_TEST

/* A child that started a run, wrote some of it, and exited without ending
** it; or a run that failed: both start afresh, without their old rows. */
START_TEST(test_key_stale_and_failed)
{
    sq_store *s = open_store(db_path, 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sq_store *c = NULL;
        char cerr[512];
        sq_run_info ci = run_info("stale");
        sq_store_kv p = {"lr", "1"};
        int64_t cid;
        sq_stat_row r[2] = {stat_row(1, "grad", NULL, 0.1), stat_row(1, "grad", "t0", 0.1)};
        if (open_err(db_path, 0, 0, &c, cerr, sizeof cerr) ||
            SQ(c, cerr, sq_store_run_begin(c, &ci, &p, 1, &cid)) != SQ_STORE_STARTED ||
            SQ(c, cerr, sq_store_add_stats(c, cid, r, 2)))
            _exit(1);
        _exit(0); /* no run_end, no close */
    }
    int status = wait_child(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    sqlite3 *db = sq_store_db(s);
    int64_t old = q_int(db, "SELECT id FROM runs WHERE key = 'stale' AND status = 'running'");
    ck_assert_int_gt(old, 0);
    ck_assert_int_eq(q_int(db, "SELECT pid FROM runs WHERE key = 'stale'"), pid);
    ck_assert_int_eq(child_rows(db, old), 3);

    int64_t other = begin_run(s, "other"); /* a bystander that must survive */
    add_steps(s, other, 1);

    sq_run_info r = run_info("stale");
    int64_t id = -1;
    char err[512] = "";
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &id)) == SQ_STORE_STARTED,
                  "%s", err);
    ck_assert_int_ne(id, -1);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE key = 'stale'"), 1);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT pid FROM runs WHERE id = %lld", (long long)id);
    ck_assert_int_eq(q_int(db, sql), getpid());
    if (old != id) ck_assert_int_eq(child_rows(db, old), 0);
    ck_assert_int_eq(child_rows(db, id), 0); /* no params given this time */
    ck_assert_int_eq(child_rows(db, other), 2 + 3);

    /* failed: restarted the same way */
    add_steps(s, id, 2);
    end_run(s, id, "failed");
    int64_t again = -1;
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &again)) ==
                      SQ_STORE_STARTED,
                  "%s", err);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE key = 'stale'"), 1);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE key = 'stale' AND status = "
                               "'running' AND error IS NULL AND ended IS NULL"),
                     1);
    ck_assert_int_eq(child_rows(db, again), 0);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM step_metrics") +
                         q_int(db, "SELECT count(*) FROM tensor_stats"),
                     3); /* only the bystander's */
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

/* A pid alone is not a process: a 'running' row whose pid is alive (this
** very process) but started at another time, or under another boot of this
** host, was left by a process that is gone; the run starts afresh, saying
** which run it replaced. With the right start time and boot it is busy. */
START_TEST(test_key_pid_reused)
{
    sq_store *s = open_store(db_path, 0);
    sqlite3 *h = sq_store_db(s);
    char host[256], boot[64], err[512] = "";
    my_host(host, sizeof host);
    self_boot(boot, sizeof boot);
    long long me = getpid(), start = self_start();
    int64_t reused = insert_running(h, "reused", host, me, start + 1, boot);
    int64_t reboot = insert_running(h, "reboot", host, me, start, "00000000-another-boot");
    int64_t live = insert_running(h, "live", host, me, start, boot);
    ck_assert_int_eq(sq_store_proc_state(host, me, start + 1, boot), SQ_PROC_GONE);
    ck_assert_int_eq(sq_store_proc_state(host, me, start, "00000000-another-boot"), SQ_PROC_GONE);
    ck_assert_int_eq(sq_store_proc_state(host, me, start, boot), SQ_PROC_ALIVE);
    ck_assert_int_eq(sq_store_proc_state(host, me, -1, NULL), SQ_PROC_ALIVE);
    ck_assert_int_eq(sq_store_proc_state("another-host.invalid", me, start, boot),
                     SQ_PROC_ELSEWHERE);

    sq_run_info r = run_info("reused");
    int64_t got = -1;
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)) == SQ_STORE_STARTED,
                  "%s", err);
    ck_assert_int_ne(got, reused);
    ck_assert_ptr_nonnull(sq_store_notice(s));
    char want[512];
    snprintf(want, sizeof want, "run %lld was left 'running' by pid %lld on %s", (long long)reused,
             me, host);
    ck_assert_msg(strstr(sq_store_notice(s), want), "%s", sq_store_notice(s));
    r.key = "reboot";
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_STORE_STARTED);
    ck_assert_int_ne(got, reboot);
    r.key = "live";
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_BUSY);
    ck_assert_int_eq(got, live);
    ck_assert_ptr_null(sq_store_notice(s));
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM runs WHERE status = 'running'"), 3);
    sq_store_close(s);
}
END_TEST

/* A run without a key (a benchmark) whose process died stays 'running' no
** more: the next run begun marks it 'failed' as interrupted, keeping its
** rows; a live one, and one of another host, are left alone. */
START_TEST(test_reap_unkeyed)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sq_store *c = NULL;
        char cerr[512];
        sq_run_info ci = run_info(NULL);
        int64_t cid;
        sq_stat_row r[1] = {stat_row(1, "grad", NULL, 0.1)};
        if (open_err(db_path, 0, 0, &c, cerr, sizeof cerr) ||
            SQ(c, cerr, sq_store_run_begin(c, &ci, NULL, 0, &cid)) != SQ_STORE_STARTED ||
            SQ(c, cerr, sq_store_add_stats(c, cid, r, 1)))
            _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    int status = wait_child(pid);
    ck_assert_msg(WIFSIGNALED(status), "child status %d", status);
    sq_store *s = open_store(db_path, 0);
    sqlite3 *h = sq_store_db(s);
    int64_t dead = q_int(h, "SELECT id FROM runs WHERE status = 'running'");
    ck_assert_int_gt(dead, 0);
    int64_t mine = begin_run(s, NULL);
    insert_running(h, NULL, "another-host.invalid", 1, 5, NULL);
    int64_t next = begin_run(s, NULL);
    char sql[160], buf[256];
    snprintf(sql, sizeof sql, "SELECT status || ': ' || error FROM runs WHERE id = %lld",
             (long long)dead);
    ck_assert_str_eq(q_text(h, sql, buf, sizeof buf),
                     "failed: interrupted: its process ended before the run did");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM step_metrics WHERE run_id = %lld",
             (long long)dead);
    ck_assert_int_eq(q_int(h, sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE status = 'running' AND id IN"
             " (%lld, %lld)", (long long)mine, (long long)next);
    ck_assert_int_eq(q_int(h, sql), 2);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM runs WHERE host = 'another-host.invalid'"
                              " AND status = 'running'"), 1);
    sq_store_close(s);
}
END_TEST

/* Every write sets the run's heartbeat. The holder of a key tells who runs
** it and how long ago it last wrote; taking over a run of another host
** marks it failed (once), and its key then starts afresh. */
START_TEST(test_heartbeat_and_takeover)
{
    sq_store *s = open_store(db_path, 0);
    sqlite3 *h = sq_store_db(s);
    char err[512] = "", buf[256];
    int64_t id = begin_run(s, "k");
    raw_exec(h, "UPDATE runs SET heartbeat = '2000-01-01T00:00:00.000Z'");
    add_steps(s, id, 1);
    ck_assert_int_eq(q_int(h, "SELECT heartbeat > '2001' AND heartbeat >= started FROM runs"), 1);

    sq_run_holder who;
    ck_assert_int_eq(SQ(s, err, sq_store_key_holder(s, "k", &who)), 0);
    ck_assert_int_eq(who.id, id);
    ck_assert_str_eq(who.status, "running");
    ck_assert_int_eq(who.pid, getpid());
    ck_assert_int_eq(who.state, SQ_PROC_ALIVE);
    ck_assert_msg(who.idle_s >= 0 && who.idle_s < 3600, "%g", who.idle_s);
    ck_assert_int_eq(SQ(s, err, sq_store_key_holder(s, "none", &who)), 0);
    ck_assert_int_eq(who.id, 0);

    int64_t far = insert_running(h, "far", "another-host.invalid", 1, 5, NULL);
    raw_exec(h, "UPDATE runs SET heartbeat = '2000-01-01T00:00:00.000Z' WHERE key = 'far'");
    ck_assert_int_eq(SQ(s, err, sq_store_key_holder(s, "far", &who)), 0);
    ck_assert_int_eq(who.id, far);
    ck_assert_int_eq(who.state, SQ_PROC_ELSEWHERE);
    ck_assert_str_eq(who.host, "another-host.invalid");
    ck_assert_str_eq(who.heartbeat, "2000-01-01T00:00:00.000Z");
    ck_assert_msg(who.idle_s > 86400.0 * 365, "%g", who.idle_s);
    ck_assert_int_eq(SQ(s, err, sq_store_run_takeover(s, &who, "taken over")), 0);
    ck_assert_int_eq(SQ(s, err, sq_store_run_takeover(s, &who, "taken over")), 1);
    ck_assert_str_eq(q_text(h, "SELECT status || ': ' || error FROM runs WHERE key = 'far'", buf,
                            sizeof buf),
                     "failed: taken over");
    sq_run_info r = run_info("far");
    int64_t got;
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_STORE_STARTED);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM runs WHERE key = 'far'"), 1);
    sq_store_close(s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The file under stress                                                    */
/* ------------------------------------------------------------------------ */

#define WRITERS 6
#define RUNS_EACH 20

/* Six processes open the new file at the same moment (so they race to
** create and migrate it too) and each writes 20 whole runs. */
START_TEST(test_concurrent_writers)
{
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0) {
            close(go[1]);
            char x;
            if (read(go[0], &x, 1) != 0) _exit(5); /* wait for the start */
            sq_store *c = NULL;
            char cerr[512];
            if (open_err(db_path, 0, 0, &c, cerr, sizeof cerr)) {
                fprintf(stderr, "writer %d: %s\n", w, cerr);
                _exit(1);
            }
            for (int i = 0; i < RUNS_EACH; i++) {
                char key[32];
                snprintf(key, sizeof key, "w%d-r%d", w, i);
                sq_run_info ri = run_info(key);
                sq_store_kv p = {"writer", key};
                int64_t id;
                sq_stat_row rows[4] = {
                    stat_row(1, "grad", NULL, 0.1), stat_row(1, "weight", NULL, 0.1),
                    stat_row(2, "grad", NULL, 0.1), stat_row(2, "grad", "t", 0.1)};
                sq_bytes_row b = {"grad_reducescatter", "intra", 1, 2, 3, 4, 5, 6, 5};
                sq_timing_row t = {"read", 1, 0.5, 10};
                if (SQ(c, cerr, sq_store_run_begin(c, &ri, &p, 1, &id)) != SQ_STORE_STARTED ||
                    SQ(c, cerr, sq_store_add_stats(c, id, rows, 2)) ||
                    SQ(c, cerr, sq_store_add_stats(c, id, rows + 2, 2)) ||
                    SQ(c, cerr, sq_store_run_end(c, id, "done", NULL, &b, 1, &t, 1))) {
                    fprintf(stderr, "writer %d run %d: %s\n", w, i, cerr);
                    _exit(2);
                }
            }
            sq_store_close(c);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]); /* all start now */
    for (int w = 0; w < WRITERS; w++) {
        int status = wait_child(pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d: status %d", w,
                      status);
    }
    assert_intact(db_path);
    sqlite3 *db = raw_open(db_path);
    const int N = WRITERS * RUNS_EACH;
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs"), N);
    ck_assert_int_eq(q_int(db, "SELECT count(DISTINCT key) FROM runs WHERE status = 'done'"), N);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM params"), N);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM step_metrics"), 3 * N);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM tensor_stats"), N);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM bytes"), N);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM timings"), N);
    /* every run's rows are its own: the param names the run's key */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs r JOIN params p ON p.run_id = r.id "
                               "AND p.value = r.key"),
                     N);
    for (int w = 0; w < WRITERS; w++)
        for (int i = 0; i < RUNS_EACH; i++) {
            char sql[128];
            snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE key = 'w%d-r%d'", w, i);
            SQT_CHECK(q_int(db, sql) == 1, "run w%d-r%d is not there exactly once", w, i);
        }
    ck_assert_int_eq(q_int(db, "PRAGMA user_version"), SQ_STORE_VERSION);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_locked)
{
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, "before");
    sq_store_close(s);

    sqlite3 *other = raw_open(db_path);
    raw_exec(other, "BEGIN EXCLUSIVE");
    raw_exec(other, "UPDATE runs SET error = 'held' WHERE id = 1");

    s = open_store(db_path, 200); /* opening needs no write lock */
    sq_run_info r = run_info("after");
    char err[512] = "", want[700];
    int64_t got;
    double t0 = now_s();
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_BUSY);
    double waited = now_s() - t0;
    snprintf(want, sizeof want, "%s: database is locked (busy for more than 200 ms)", db_path);
    ck_assert_str_eq(err, want);
    ck_assert_msg(waited >= 0.15 && waited < 5, "waited %.3f s", waited);
    sq_stat_row row = stat_row(1, "grad", NULL, 0.1);
    ck_assert_int_eq(SQ(s, err, sq_store_add_stats(s, id, &row, 1)), SQ_ERR_BUSY);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(SQ(s, err, sq_store_run_end(s, id, "done", NULL, NULL, 0, NULL, 0)),
                     SQ_ERR_BUSY);
    ck_assert_str_eq(err, want);
    /* reading still works meanwhile (WAL), and sees the committed state */
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM runs WHERE error IS NULL"), 1);

    raw_exec(other, "ROLLBACK");
    sqlite3_close(other);
    /* the lock gone, the same calls go through */
    ck_assert_msg(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)) == SQ_STORE_STARTED,
                  "%s", err);
    ck_assert_msg(SQ(s, err, sq_store_add_stats(s, id, &row, 1)) == 0, "%s", err);
    sq_store_close(s);
    assert_intact(db_path);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs"), 2);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM step_metrics"), 1);
}
END_TEST

/* Every write call on a read-only store fails cleanly and names the file. */
static void assert_writes_refused(sq_store *s, int64_t id)
{
    char err[512] = "", want[700];
    snprintf(want, sizeof want, "%s: cannot write: attempt to write a readonly database",
             sq_store_path(s));
    sq_run_info r = run_info("ro");
    int64_t got;
    sq_stat_row row = stat_row(9, "grad", NULL, 0.1);
    ck_assert_int_eq(SQ(s, err, sq_store_run_begin(s, &r, NULL, 0, &got)), SQ_ERR_IO);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(SQ(s, err, sq_store_add_stats(s, id, &row, 1)), SQ_ERR_IO);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(SQ(s, err, sq_store_run_end(s, id, "done", NULL, NULL, 0, NULL, 0)),
                     SQ_ERR_IO);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(SQ(s, err, sq_store_run_delete(s, id)), SQ_ERR_IO);
    ck_assert_str_eq(err, want);
    /* reading works */
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM runs"), 1);
}

START_TEST(test_readonly_open)
{
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, "k");
    add_steps(s, id, 2);
    sq_store_close(s);

    char err[512] = "";
    ck_assert_msg(open_err(db_path, 0, 1, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(sq_store_version(s), SQ_STORE_VERSION);
    assert_writes_refused(s, id);
    sq_store_close(s);
    assert_intact(db_path);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs WHERE status = 'running'"), 1);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM step_metrics"), 4);
}
END_TEST

/* A file its user may not write (mode 0444). root may write anything, so as
** root the writer is a child that gives up root for 'nobody' first: the
** permission is then enforced by the kernel, as for any user. */
START_TEST(test_readonly_file)
{
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, "k");
    add_steps(s, id, 2);
    sq_store_close(s);
    ck_assert_int_eq(chmod(db_path, 0444), 0);
    /* the directory stays writable, so sqlite may make its -shm beside it */
    ck_assert_int_eq(chmod(dir, 0777), 0);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(40);
        if (geteuid() == 0) _exit(41);
        if (access(db_path, R_OK) != 0) _exit(44);
        int fd = open(db_path, O_WRONLY);
        if (fd >= 0) _exit(42); /* the file must really be read-only for us */
        char err[512] = "";
        sq_store *c = NULL;
        /* opening for writing succeeds (sqlite falls back to reading) */
        if (open_err(db_path, 0, 0, &c, err, sizeof err) != 0) {
            fprintf(stderr, "open: %s\n", err);
            _exit(43);
        }
        assert_writes_refused(c, id); /* ck_assert in a child: exit status */
        sq_store_close(c);
        _exit(0);
    }
    int status = wait_child(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child status %d (40: cannot drop root; 42: the file is writable; 44: "
                  "'nobody' cannot read it: is $TMPDIR searchable by all?)",
                  status);
    ck_assert_int_eq(chmod(db_path, 0644), 0);
    assert_intact(db_path);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(file_int(db_path, "SELECT count(*) FROM step_metrics"), 4);
}
END_TEST

/* A child limited to a small file size writes runs until a write fails: the
** error names the file, and the file, reopened here, holds exactly the runs
** committed before the failure, with all their rows. */
START_TEST(test_full_disk)
{
    int out[2];
    pid_t pid = fork_piped(out);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {512 * 1024, 512 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        sq_store *c = NULL;
        char err[512] = "";
        if (open_err(db_path, 0, 0, &c, err, sizeof err)) {
            dprintf(out[1], "-1\n%s\n", err);
            _exit(1);
        }
        int done = 0, failed = 0;
        sq_stat_row rows[64];
        for (int i = 0; i < 10000 && !failed; i++) {
            char key[32];
            snprintf(key, sizeof key, "full-%d", i);
            sq_run_info ri = run_info(key);
            int64_t id;
            for (int k = 0; k < 64; k++) rows[k] = stat_row((uint64_t)k, "grad", "tensor", 0.1);
            failed = SQ(c, err, sq_store_run_begin(c, &ri, NULL, 0, &id)) != 0 ||
                     SQ(c, err, sq_store_add_stats(c, id, rows, 64)) != 0 ||
                     SQ(c, err, sq_store_run_end(c, id, "done", NULL, NULL, 0, NULL, 0)) != 0;
            if (!failed) done++;
        }
        dprintf(out[1], "%d\n%s\n", done, failed ? err : "(no failure)");
        sq_store_close(c);
        _exit(0);
    }
    close(out[1]);
    char buf[1024] = "";
    size_t got = 0;
    ssize_t k;
    while ((k = read(out[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
    buf[got] = '\0';
    close(out[0]);
    int status = wait_child(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d: %s", status,
                  buf);
    int done = atoi(buf);
    const char *msg = strchr(buf, '\n') ? strchr(buf, '\n') + 1 : "";
    ck_assert_msg(done > 0, "no run fit before the limit: %s", buf);
    ck_assert_msg(strncmp(msg, db_path, strlen(db_path)) == 0 &&
                      strstr(msg, ": database or disk is full"),
                  "the error: %s", msg);

    assert_intact(db_path);
    sqlite3 *db = raw_open(db_path);
    /* the run whose write failed may be there as 'running' (its begin
    ** committed) but never half-written as done */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE status = 'done'"), done);
    ck_assert_int_le(q_int(db, "SELECT count(*) FROM runs"), done + 1);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM tensor_stats t JOIN runs r ON r.id = t.run_id "
                               "WHERE r.status = 'done'"),
                     64 * done);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM "
                               "tensor_stats t WHERE t.run_id = r.id) NOT IN (0, 64)"),
                     0);
    for (int i = 0; i < done; i++) {
        char sql[128];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM runs WHERE key = 'full-%d' AND status = 'done'", i);
        SQT_CHECK(q_int(db, sql) == 1, "committed run full-%d is missing", i);
    }
    sqlite3_close(db);
}
END_TEST

/* A run copied from another file (a job's private store, as a sweep across
** ranks ships it): every row under a new id, in one transaction; a key that
** is done here wins, a failed one here is replaced; a run that has not
** ended, a missing file, a file that is not a database or of another
** schema version are refused naming that file, and leave nothing behind. */
START_TEST(test_import_run)
{
    char src[700], bad[700], err[512] = "";
    snprintf(src, sizeof src, "%s/job.db", dir);
    snprintf(bad, sizeof bad, "%s/bad.db", dir);
    sq_store *j = open_store(src, 0);
    int64_t pad = begin_run(j, "pad"); /* ids differ between the files */
    end_run(j, pad, "done");
    int64_t a = begin_run(j, "a");
    add_steps(j, a, 3);
    sq_train_row tr = {.step = 1, .tokens = 10, .loss = 2, .val_loss = NAN, .lr = 1e-3,
                       .grad_norm = 1, .seconds = 0.1};
    ck_assert_msg(SQ(j, err, sq_store_add_train(j, a, &tr, 1)) == 0, "%s", err);
    end_run(j, a, "done");
    int64_t f = begin_run(j, "f");
    add_steps(j, f, 1);
    end_run(j, f, "failed");
    int64_t b = begin_run(j, "b");
    end_run(j, b, "done");
    int64_t r = begin_run(j, "r"); /* never ended */
    add_steps(j, r, 1);
    sq_store_close(j);

    sq_store *s = open_store(db_path, 0);
    sqlite3 *db = sq_store_db(s);
    int64_t other = begin_run(s, "other");
    add_steps(s, other, 1);
    end_run(s, other, "done");
    int64_t id = -1;
    ck_assert_msg(SQ(s, err, sq_store_import_run(s, src, a, &id)) == SQ_STORE_STARTED, "%s", err);
    ck_assert_int_gt(id, other);
    char sql[512], buf[256];
    snprintf(sql, sizeof sql, "SELECT status || ' ' || key || ' ' || sweep FROM runs WHERE id = %lld",
             (long long)id);
    ck_assert_str_eq(q_text(db, sql, buf, sizeof buf), "done a s1");
    ck_assert_int_eq(child_rows(db, id), 2 + 9 + 2 + 3);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM train_steps WHERE run_id = %lld", (long long)id);
    ck_assert_int_eq(q_int(db, sql), 1);
    /* the figures are the file's */
    snprintf(sql, sizeof sql, "SELECT abs(rel_l2 - 0.03) < 1e-12 FROM step_metrics WHERE run_id = %lld AND"
             " step = 3 AND path = 'grad'", (long long)id);
    ck_assert_int_eq(q_int(db, sql), 1);

    /* done here: nothing more is written */
    int64_t again = -1;
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, src, a, &again)), SQ_STORE_DONE);
    ck_assert_int_eq(again, id);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs"), 2);

    /* a failed run imports as failed, and a failed run here is replaced */
    int64_t fid = -1;
    ck_assert_msg(SQ(s, err, sq_store_import_run(s, src, f, &fid)) == SQ_STORE_STARTED, "%s", err);
    snprintf(sql, sizeof sql, "SELECT status || ' ' || error FROM runs WHERE id = %lld",
             (long long)fid);
    ck_assert_str_eq(q_text(db, sql, buf, sizeof buf), "failed boom");
    int64_t fid2 = -1;
    ck_assert_msg(SQ(s, err, sq_store_import_run(s, src, f, &fid2)) == SQ_STORE_STARTED, "%s", err);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE key = 'f'"), 1);
    if (fid2 != fid) ck_assert_int_eq(child_rows(db, fid), 0);
    ck_assert_int_eq(child_rows(db, fid2), 2 + 3 + 2 + 3);

    /* a live process (this one) runs the key here: busy, that run named */
    int64_t live = begin_run(s, "b"), held = -1;
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, src, b, &held)), SQ_ERR_BUSY);
    ck_assert_int_eq(held, live);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs WHERE key = 'b'"), 1);
    ck_assert_int_eq(SQ(s, err, sq_store_run_delete(s, live)), 0);

    /* refusals, each naming the file */
    int64_t none = -1;
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, src, r, &none)), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err, src) && strstr(err, "'running'"), "%s", err);
    ck_assert_int_eq(none, 0);
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, src, 999, &none)), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(err, src) && strstr(err, "no run 999"), "%s", err);
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, bad, a, &none)), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(err, bad) != NULL, "%s", err);
    ck_assert_int_eq(access(bad, F_OK), -1); /* not created */
    write_file(bad, "not a database at all, not at all. ", 200);
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, bad, a, &none)), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err, bad) && strstr(err, "not a database"), "%s", err);
    sqlite3 *old = raw_open(src);
    downgrade(old, 4);
    sqlite3_close(old);
    ck_assert_int_eq(SQ(s, err, sq_store_import_run(s, src, a, &none)), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err, src) && strstr(err, "schema version 4"), "%s", err);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM runs"), 3);
    /* the file was detached every time: the next import attaches again */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM pragma_database_list"), 1);
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

/* A process killed in the middle of a run (and between its writes). */
START_TEST(test_killed_midway)
{
    int out[2];
    pid_t pid = fork_piped(out);
    if (pid == 0) {
        sq_store *c = NULL;
        char err[512];
        sq_run_info ri = run_info("killed");
        int64_t id;
        sq_stat_row rows[8];
        for (int k = 0; k < 8; k++) rows[k] = stat_row((uint64_t)k, "weight", NULL, 0.3);
        if (open_err(db_path, 0, 0, &c, err, sizeof err) ||
            SQ(c, err, sq_store_run_begin(c, &ri, NULL, 0, &id)) != SQ_STORE_STARTED ||
            SQ(c, err, sq_store_add_stats(c, id, rows, 8)))
            _exit(1);
        /* start another write and die inside it */
        sqlite3_exec(sq_store_db(c), "BEGIN IMMEDIATE; INSERT INTO params VALUES (1, 'x', 'y');",
                     NULL, NULL, NULL);
        raise(SIGKILL);
        _exit(2);
    }
    int status = wait_child(pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
    assert_intact(db_path);
    sqlite3 *db = raw_open(db_path);
    ck_assert_int_eq(
        q_int(db, "SELECT count(*) FROM runs WHERE key = 'killed' AND status = 'running'"), 1);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM step_metrics"), 8);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM params"), 0); /* the open write is gone */
    sqlite3_close(db);

    /* and the key restarts cleanly */
    sq_store *s = open_store(db_path, 0);
    int64_t id = begin_run(s, "killed");
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(q_int(sq_store_db(s), "SELECT count(*) FROM step_metrics"), 0);
    add_steps(s, id, 1);
    end_run(s, id, "done");
    sq_store_close(s);
    assert_intact(db_path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("schema");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_schema);
    tcase_add_test(tc, test_empty_file_migrated);
    tcase_add_test(tc, test_newer_refused);
    tcase_add_test(tc, test_migrate_v1_and_train_rows);
    tcase_add_test(tc, test_migrate_v2_bench_model_rows);
    tcase_add_test(tc, test_migrate_v3_liveness);
    tcase_add_test(tc, test_migrate_v4_bytes_per_param);
    tcase_add_test(tc, test_migrate_v5_netbench_rows);
    tcase_add_test(tc, test_migrate_v7_ef_residual);
    tcase_add_test(tc, test_not_a_database);
    tcase_add_test(tc, test_readonly_missing);
    tcase_add_test(tc, test_schema_not_shardq);
    tcase_add_test(tc, test_schema_each_version);
    tcase_add_test(tc, test_store_file_protected);
    tcase_add_test(tc, test_limit_queries);
    suite_add_tcase(s, tc);

    tc = tcase_create("runs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_nan_is_null);
    tcase_add_test(tc, test_seed_range);
    tcase_add_test(tc, test_write_errors);
    tcase_add_test(tc, test_run_delete);
    tcase_add_test(tc, test_key_done_and_busy);
    tcase_add_test(tc, test_key_stale_and_failed);
    tcase_add_test(tc, test_key_pid_reused);
    tcase_add_test(tc, test_reap_unkeyed);
    tcase_add_test(tc, test_heartbeat_and_takeover);
    tcase_add_test(tc, test_import_run);
    suite_add_tcase(s, tc);

    tc = tcase_create("stress");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_concurrent_writers);
    tcase_add_test(tc, test_locked);
    tcase_add_test(tc, test_readonly_open);
    tcase_add_test(tc, test_readonly_file);
    tcase_add_test(tc, test_full_disk);
    tcase_add_test(tc, test_killed_midway);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
