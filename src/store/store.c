/*
** store.c -- every run of shardq in one SQLite file. See store.h and the
** docs/reports.md, the store.
**
** Each write is one BEGIN IMMEDIATE ... COMMIT: IMMEDIATE takes the write
** lock up front (waiting up to the busy timeout), so a transaction never
** fails half-way for a lock, and any failure inside it is rolled back before
** we return. Error sentences name the file; the message of the failing
** sqlite call is taken before the rollback, which would replace it.
**
** A file is opened only if its schema is shardq's: every entry of its
** sqlite_schema (type, name, table, CREATE text) must be one that the
** migrations below create at the file's user_version, and every one they
** create must be there (check_schema builds that reference on an in-memory
** database). A trigger, a view or a table of someone else's would run or
** answer in the place of shardq's own SQL -- a trigger AFTER INSERT ON
** step_metrics could delete every row a replay writes -- so a file edited by
** hand is refused, read-only or not, before anything is written to it (and
** checked again after a migration). ANALYZE's sqlite_stat tables are let be.
**
** While a store is open its file, -wal, -shm and -journal are registered
** (sq_protect.h): no output file of the process may replace them.
*/
#include "shardq/store.h"
#include "shardq/codec.h"
#include "store/store_query.h"
#include "trace/wfile.h"
#include "sq_protect.h"
#include "shardq/world.h"

#include <sqlite3.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

struct sq_store {
    sqlite3 *db;
    char *path;
    int busy_ms;
    int version; /* user_version once opened (and migrated) */
    char notice[1024]; /* what the last sq_store_run_begin replaced, or "" */
    sq_error err;      /* the last failure: sq_store_error */
    int registered;    /* the path is in sq_protect's registry */
    /* sq_store_limit_queries: the limit of one statement (0: none), the
    ** statement under the clock (NULL: none) and when it must end */
    double query_limit;
    sqlite3_stmt *timed;
    double deadline;
};

/* ------------------------------------------------------------------------ */
/* The schema and its migrations                                            */
/* ------------------------------------------------------------------------ */

/* Version 0 -> 1: the first schema. The child tables lead their primary
** keys with run_id, which is also the index the ON DELETE CASCADE uses. */
static const char schema_v1[] =
    "CREATE TABLE runs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  kind TEXT NOT NULL,\n"
    "  key TEXT,\n"
    "  sweep TEXT,\n"
    "  status TEXT NOT NULL CHECK(status IN ('running','done','failed')),\n"
    "  config TEXT NOT NULL,\n"
    "  preset TEXT,\n"
    "  scheme TEXT,\n"
    "  topo TEXT,\n"
    "  device TEXT,\n"
    "  trace TEXT,\n"
    "  seed INTEGER NOT NULL,\n"
    "  version TEXT NOT NULL,\n"
    "  host TEXT NOT NULL,\n"
    "  pid INTEGER NOT NULL,\n"
    "  started TEXT NOT NULL,\n"
    "  ended TEXT,\n"
    "  error TEXT\n"
    ") STRICT;\n"
    "CREATE UNIQUE INDEX runs_key ON runs(key) WHERE key IS NOT NULL;\n"
    "CREATE INDEX runs_sweep ON runs(sweep);\n"
    "CREATE INDEX runs_status ON runs(status);\n"
    "CREATE INDEX runs_kind ON runs(kind);\n"
    "CREATE TABLE params(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  key TEXT NOT NULL,\n"
    "  value TEXT,\n"
    "  PRIMARY KEY(run_id, key)\n"
    ") STRICT;\n"
    "CREATE TABLE step_metrics(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  path TEXT NOT NULL CHECK(path IN ('grad','weight')),\n"
    "  elements INTEGER NOT NULL,\n"
    "  rel_l2 REAL, mse REAL, max_abs REAL, snr_db REAL, cosine REAL,\n"
    "  mean_signed REAL, frac_zeroed REAL, frac_clipped REAL, seconds REAL,\n"
    "  PRIMARY KEY(run_id, step, path)\n"
    ") STRICT;\n"
    "CREATE TABLE tensor_stats(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  path TEXT NOT NULL CHECK(path IN ('grad','weight')),\n"
    "  tensor TEXT NOT NULL,\n"
    "  elements INTEGER NOT NULL,\n"
    "  rel_l2 REAL, mse REAL, max_abs REAL, snr_db REAL, cosine REAL,\n"
    "  mean_signed REAL, frac_zeroed REAL, frac_clipped REAL, seconds REAL,\n"
    "  PRIMARY KEY(run_id, step, path, tensor)\n"
    ") STRICT;\n"
    "CREATE TABLE bytes(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  collective TEXT NOT NULL,\n"
    "  link TEXT NOT NULL,\n"
    "  sent_codes INTEGER NOT NULL,\n"
    "  sent_meta INTEGER NOT NULL,\n"
    "  recv_codes INTEGER NOT NULL,\n"
    "  recv_meta INTEGER NOT NULL,\n"
    "  sent_elems INTEGER NOT NULL,\n"
    "  messages INTEGER NOT NULL,\n"
    "  bits_per_elem REAL,\n"
    "  PRIMARY KEY(run_id, collective, link)\n"
    ") STRICT;\n"
    "CREATE TABLE timings(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  op TEXT NOT NULL,\n"
    "  calls INTEGER NOT NULL,\n"
    "  seconds REAL NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  gb_per_s REAL,\n"
    "  PRIMARY KEY(run_id, op)\n"
    ") STRICT;\n";

/* Version 1 -> 2: training runs. One row per optimizer step: the training
** loss of that step's global batch, and the validation loss where the step
** evaluated one (NULL elsewhere), so a loss curve is one SELECT. */
static const char schema_v2[] =
    "CREATE TABLE train_steps(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  step INTEGER NOT NULL,\n"
    "  tokens INTEGER NOT NULL,\n"
    "  loss REAL NOT NULL,\n"
    "  val_loss REAL,\n"
    "  lr REAL NOT NULL,\n"
    "  grad_norm REAL NOT NULL,\n"
    "  seconds REAL NOT NULL,\n"
    "  PRIMARY KEY(run_id, step)\n"
    ") STRICT;\n";

/* Version 2 -> 3: what `shardq bench` measured (one row per operation,
** thread count and size, beside the copy bandwidth of the same run), and
** what `shardq model` predicted (one row per scheme and GPU count), so that
** the report draws both and the cost model can read measured throughput. */
static const char schema_v3[] =
    "CREATE TABLE bench_results(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  op TEXT NOT NULL,\n"
    "  threads INTEGER NOT NULL,\n"
    "  elements INTEGER NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  gb_per_s REAL NOT NULL,\n"
    "  gb_per_s_std REAL,\n"
    "  copy_gb_per_s REAL NOT NULL,\n"
    "  PRIMARY KEY(run_id, op, threads, elements)\n"
    ") STRICT;\n"
    "CREATE TABLE model_results(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  scheme TEXT NOT NULL,\n"
    "  gpus INTEGER NOT NULL,\n"
    "  compute_s REAL NOT NULL,\n"
    "  tp_s REAL NOT NULL,\n"
    "  bubble_s REAL NOT NULL,\n"
    "  weight_s REAL NOT NULL,\n"
    "  grad_s REAL NOT NULL,\n"
    "  quant_s REAL NOT NULL,\n"
    "  optimizer_s REAL NOT NULL,\n"
    "  iteration_s REAL NOT NULL,\n"
    "  tflops REAL NOT NULL,\n"
    "  speedup REAL,\n"
    "  inter_bytes_per_node INTEGER NOT NULL,\n"
    "  PRIMARY KEY(run_id, scheme, gpus)\n"
    ") STRICT;\n";

/* Version 3 -> 4: telling a live writer from a dead one. A pid alone is
** reused by the system, and means nothing on another host; so a 'running'
** row also keeps its process's start time (pid_start: clock ticks after
** boot, /proc/PID/stat field 22) and the boot it ran under (boot_id:
** /proc/sys/kernel/random/boot_id). heartbeat is the time of the run's
** last write (UTC ISO 8601), all that can be known of a process on another
** host. NULL: not known (a row of an older shardq, or no /proc). */
static const char schema_v4[] =
    "ALTER TABLE runs ADD COLUMN pid_start INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN boot_id TEXT;\n"
    "ALTER TABLE runs ADD COLUMN heartbeat TEXT;\n";

/* Version 4 -> 5: the cost per real parameter. sent_elems counts the
** padding a world adds to its n elements (docs/conventions.md);
** sent_params counts the model's own elements among them
** (sq_link_traffic), and bits_per_param = 8 x bytes / sent_params is
** what a link costs per parameter of the model. NULL: a row written before
** this version (readers fall back to bits_per_elem), or, for
** bits_per_param, a link that carried padding alone. */
static const char schema_v5[] =
    "ALTER TABLE bytes ADD COLUMN sent_params INTEGER;\n"
    "ALTER TABLE bytes ADD COLUMN bits_per_param REAL;\n";

/* Version 5 -> 6: what `shardq netbench` measured between MPI ranks, one
** row per collective, link level and size, as nccl-tests reports it: bytes
** is its "size" (the whole buffer of one rank), count the elements per
** rank's block (the count given to MPI), seconds the mean time of one call
** on the slowest rank, algbw = bytes / seconds and busbw = algbw (n-1)/n in
** GB/s, n the ranks of one communicator of the level and comms how many of
** those ran at once. A new table: every older row stays as it was. */
static const char schema_v6[] =
    "CREATE TABLE netbench_results(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  op TEXT NOT NULL,\n"
    "  level TEXT NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  count INTEGER NOT NULL,\n"
    "  ranks INTEGER NOT NULL,\n"
    "  comms INTEGER NOT NULL,\n"
    "  iters INTEGER NOT NULL,\n"
    "  seconds REAL NOT NULL,\n"
    "  algbw_gb_s REAL NOT NULL,\n"
    "  busbw_gb_s REAL NOT NULL,\n"
    "  PRIMARY KEY(run_id, op, level, bytes)\n"
    ") STRICT;\n";

/* Version 6 -> 7: where a run of a sweep came from. grid is the [grid
** NAME] of the recipe that produced the configuration ("sweep": the [sweep]
** section), recipe the text of that recipe file as it was read, so that
** runs of two grids that share presets stay apart in the figures and a
** run says how it was asked for. NULL: not a sweep's run, or a row written
** before this version. Every older row stays as it was. */
static const char schema_v7[] =
    "ALTER TABLE runs ADD COLUMN grid TEXT;\n"
    "ALTER TABLE runs ADD COLUMN recipe TEXT;\n";

/* Version 7 -> 8: error feedback's state. ef_residual is the residual's L2
** norm relative to the gradient's after the step's reduce, the mean over
** workers (world.h, sq_world_residual_rel), of a run whose scheme feeds
** back its encoding error (grad.ef); NULL without error feedback, on the
** weight path, or in a row written before this version. */
static const char schema_v8[] =
    "ALTER TABLE step_metrics ADD COLUMN ef_residual REAL;\n"
    "ALTER TABLE tensor_stats ADD COLUMN ef_residual REAL;\n"
    "ALTER TABLE train_steps ADD COLUMN ef_residual REAL;\n";

/* migrations[i] takes user_version i to i + 1. */
static const char *const migrations[SQ_STORE_VERSION] = {schema_v1, schema_v2, schema_v3,
                                                          schema_v4, schema_v5, schema_v6,
                                                          schema_v7, schema_v8};

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* The errno behind an I/O error. sqlite3_system_errno misses a write that
** failed at COMMIT, so the files' own last errno is asked too: the WAL's
** (where commits are written), then the database's. */
static int io_errno(sqlite3 *db)
{
    int e = sqlite3_system_errno(db);
    sqlite3_file *wal = NULL;
    if (!e && sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK &&
        wal && wal->pMethods)
        wal->pMethods->xFileControl(wal, SQLITE_FCNTL_LAST_ERRNO, &e);
    if (!e) sqlite3_file_control(db, "main", SQLITE_FCNTL_LAST_ERRNO, &e);
    return e;
}

/* The kind of a failed sqlite call: a lock is BUSY, a file that is not
** a database (or a damaged one) FORMAT, an allocation NOMEM, and every
** refusal of the file system (a full disk, a read-only file) IO. */
static int db_kind(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return SQ_ERR_BUSY;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_SCHEMA:
    case SQLITE_ERROR: return SQ_ERR_FORMAT; /* SQL the file's schema cannot run */
    case SQLITE_NOMEM: return SQ_ERR_NOMEM;
    case SQLITE_INTERRUPT: return SQ_ERR_INTERRUPTED; /* sq_store_limit_queries */
    case SQLITE_NOTFOUND: return SQ_ERR_NOTFOUND;
    case SQLITE_CONSTRAINT: return SQ_ERR_CONFLICT; /* a row that is there already */
    default: return SQ_ERR_IO;
    }
}

/* Records the failed sqlite call rc on s (its kind and sentence) and
** returns the kind: locks, full disks and read-only files get the words a
** user searches for; anything else is "PATH: WHAT: sqlite's message". */
static int db_error(sq_store *s, int rc, const char *what)
{
    int primary = rc & 0xff;
    int sys = primary == SQLITE_IOERR ? io_errno(s->db) : 0;
    int kind = db_kind(rc);
    if (primary == SQLITE_BUSY)
        return sq_error_set(&s->err, kind, "%s: database is locked (busy for more than %d ms)",
                            s->path, s->busy_ms);
    if (primary == SQLITE_FULL) /* sqlite says FULL for ENOSPC and for a partial write */
        return sq_error_set(&s->err, kind, "%s: database or disk is full", s->path);
    if (primary == SQLITE_IOERR && (sys == ENOSPC || sys == EFBIG || sys == EDQUOT))
        /* a write refused outright: a file size limit, a quota */
        return sq_error_set(&s->err, kind, "%s: database or disk is full (%s)", s->path,
                            strerror(sys));
    if (primary == SQLITE_IOERR && sys)
        return sq_error_set(&s->err, kind, "%s: %s: %s (%s)", s->path, what,
                            sqlite3_errmsg(s->db), strerror(sys));
    return sq_error_set(&s->err, kind, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int too_big(uint64_t v) { return v > (uint64_t)INT64_MAX; }

/* ------------------------------------------------------------------------ */
/* Statements and transactions                                              */
/* ------------------------------------------------------------------------ */

static int exec(sq_store *s, const char *sql) { return sqlite3_exec(s->db, sql, NULL, NULL, NULL); }

/* Ends a failed transaction; a no-op when sqlite already rolled it back
** (it does so itself after some I/O errors). */
static void rollback(sq_store *s)
{
    if (!sqlite3_get_autocommit(s->db)) exec(s, "ROLLBACK");
}

static int begin(sq_store *s)
{
    int rc = exec(s, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) {
        int kind = db_error(s, rc, "cannot write");
        rollback(s);
        return kind;
    }
    return SQ_OK;
}

static int commit(sq_store *s)
{
    int rc = exec(s, "COMMIT");
    if (rc != SQLITE_OK) {
        int kind = db_error(s, rc, "cannot write");
        rollback(s);
        return kind;
    }
    return SQ_OK;
}

/* Reads PRAGMA user_version into *v; returns the sqlite status. */
static int read_version(sq_store *s, int *v)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

/* NaN means "not measured": NULL. sqlite would store a bound NaN as NULL
** too; saying so keeps that from depending on it. */
static int bind_real(sqlite3_stmt *st, int i, double v)
{
    return isnan(v) ? sqlite3_bind_null(st, i) : sqlite3_bind_double(st, i, v);
}

/* Steps a statement that returns no row, then resets it for the next use. */
static int step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

static int newer_error(sq_store *s, int v)
{
    return sq_error_set(&s->err, SQ_ERR_FORMAT,
                        "%s: schema version %d is newer than this shardq (%d): upgrade shardq",
                        s->path, v, SQ_STORE_VERSION);
}

/* Brings the file to SQ_STORE_VERSION, one version per transaction. The
** version is read again under the write lock: another process may have
** migrated the file since we looked. */
static int migrate(sq_store *s)
{
    for (;;) {
        int rc = begin(s);
        if (rc) return rc;
        int v = 0;
        rc = read_version(s, &v);
        if (rc != SQLITE_OK) {
            int kind = db_error(s, rc, "cannot read the schema version");
            rollback(s);
            return kind;
        }
        if (v >= SQ_STORE_VERSION) {
            rollback(s);
            if (v > SQ_STORE_VERSION) return newer_error(s, v);
            s->version = v;
            return SQ_OK;
        }
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if ((rc = exec(s, migrations[v])) != SQLITE_OK || (rc = exec(s, bump)) != SQLITE_OK) {
            char what[96];
            snprintf(what, sizeof what, "cannot migrate the schema from version %d to %d", v,
                     v + 1);
            int kind = db_error(s, rc, what);
            rollback(s);
            return kind;
        }
        if ((rc = commit(s))) return rc;
    }
}

static const char *column_str(sqlite3_stmt *st, int i);

/* "a table", "an index": for a schema entry's type in a sentence. */
static const char *article(const char *type)
{
    return type[0] && strchr("aeiou", type[0]) ? "an" : "a";
}

/* The tail of a refusal of a schema: what such a file could do, and, for
** an entry of its own, the way out. */
#define EDITED "a database edited by hand could change or delete rows"
#define DROP_IT "(" EDITED "; drop it with sqlite3 if you trust the file)"

/* Whether the file's schema is the one shardq's migrations create at
** version v (the comment at the top): SQ_OK, else SQ_ERR_FORMAT with the
** sentence in s->err naming the first entry at fault. The reference is
** built on an in-memory database by the same migrations, so it is what this
** build of sqlite makes of them, ALTER TABLE's edits of the CREATE text
** included; a file at version 0 must hold nothing (a new file). Run inside
** the caller's read transaction: the version and the schema are of one
** state of the file. */
static int check_schema(sq_store *s, int v)
{
    sqlite3 *ref = NULL;
    sqlite3_stmt *mine = NULL, *theirs = NULL;
    int kind = SQ_OK, n = 0, r;
    int rc = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    for (int i = 0; rc == SQLITE_OK && i < v; i++)
        rc = sqlite3_exec(ref, migrations[i], NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(ref,
                                "SELECT tbl_name IS ?3 AND sql IS ?4 FROM sqlite_schema"
                                " WHERE type = ?1 AND name = ?2",
                                -1, &mine, NULL);
    if (rc != SQLITE_OK) {
        kind = sq_error_set(&s->err, db_kind(rc),
                            "%s: cannot build shardq's schema of version %d to compare: %s",
                            s->path, v, ref ? sqlite3_errmsg(ref) : "out of memory");
        goto done;
    }
    rc = sqlite3_prepare_v2(s->db,
                            "SELECT type, name, tbl_name, sql FROM main.sqlite_schema"
                            " WHERE NOT (type = 'table' AND name GLOB 'sqlite_stat[0-9]*')",
                            -1, &theirs, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(theirs)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        n++;
        for (int c = 0; c < 4; c++)
            sqlite3_bind_value(mine, c + 1, sqlite3_column_value(theirs, c));
        r = sqlite3_step(mine);
        int same = r == SQLITE_ROW && sqlite3_column_int(mine, 0);
        sqlite3_reset(mine);
        if (same) continue;
        const char *type = column_str(theirs, 0), *name = column_str(theirs, 1);
        if (v == 0)
            kind = sq_error_set(&s->err, SQ_ERR_FORMAT,
                                "%s: not a shardq store: it holds %s %s '%s' but no shardq "
                                "schema (user_version 0): refused",
                                s->path, article(type), type, name);
        else if (r == SQLITE_ROW)
            kind = sq_error_set(&s->err, SQ_ERR_FORMAT,
                                "%s: the schema's %s '%s' is not the one shardq creates at "
                                "version %d (its definition differs): refused (" EDITED ")",
                                s->path, type, name, v);
        else
            kind = sq_error_set(&s->err, SQ_ERR_FORMAT,
                                "%s: the schema holds %s %s '%s' that shardq did not create: "
                                "refused " DROP_IT,
                                s->path, article(type), type, name);
        goto done;
    }
    if (rc != SQLITE_DONE) {
        kind = db_error(s, rc, "cannot read the schema");
        goto done;
    }
    /* every entry of the file is one of shardq's, each (type, name) once:
    ** fewer than shardq creates means one is missing */
    sqlite3_finalize(mine);
    sqlite3_finalize(theirs);
    mine = theirs = NULL;
    rc = sqlite3_prepare_v2(ref, "SELECT type, name FROM sqlite_schema", -1, &mine, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT 1 FROM main.sqlite_schema WHERE type = ?1 AND name = ?2",
                                -1, &theirs, NULL);
    int total = 0;
    r = SQLITE_DONE;
    while (rc == SQLITE_OK && (r = sqlite3_step(mine)) == SQLITE_ROW) {
        total++;
        sqlite3_bind_value(theirs, 1, sqlite3_column_value(mine, 0));
        sqlite3_bind_value(theirs, 2, sqlite3_column_value(mine, 1));
        int there = sqlite3_step(theirs) == SQLITE_ROW;
        sqlite3_reset(theirs);
        if (!there) {
            const char *type = column_str(mine, 0);
            kind = sq_error_set(&s->err, SQ_ERR_FORMAT,
                                "%s: the schema lacks %s %s '%s' that shardq creates at version "
                                "%d: refused (the file was edited by hand, or is damaged)",
                                s->path, article(type), type, column_str(mine, 1), v);
            goto done;
        }
    }
    if (rc != SQLITE_OK)
        kind = db_error(s, rc, "cannot read the schema");
    else if (r != SQLITE_DONE)
        kind = sq_error_set(&s->err, db_kind(r),
                            "%s: cannot read shardq's schema of version %d: %s", s->path, v,
                            sqlite3_errmsg(ref));
    else if (n != total) /* each of shardq's is there: some twice */
        kind = sq_error_set(&s->err, SQ_ERR_FORMAT,
                            "%s: the schema holds %d entries where shardq creates %d at version "
                            "%d: refused (the file was edited by hand, or is damaged)",
                            s->path, n, total, v);
done:
    sqlite3_finalize(mine);
    sqlite3_finalize(theirs);
    sqlite3_close(ref);
    return kind;
}

/* In one read transaction: the file's version into *v, a newer one
** refused, and its schema checked against that version. The first read of
** the file: it also tells a database from anything else. */
static int verify(sq_store *s, int *v)
{
    int rc = exec(s, "BEGIN");
    if (rc == SQLITE_OK) rc = read_version(s, v);
    if (rc != SQLITE_OK) {
        int kind = (rc & 0xff) == SQLITE_NOTADB
                       ? sq_error_set(&s->err, SQ_ERR_FORMAT, "%s: file is not a database", s->path)
                       : db_error(s, rc, "cannot read the schema version");
        rollback(s);
        return kind;
    }
    int kind = *v > SQ_STORE_VERSION ? newer_error(s, *v) : check_schema(s, *v);
    rollback(s);
    return kind;
}

/* WAL lets readers and one writer work at once; a file system that cannot
** share memory between processes refuses it, and we say so rather than run
** without it. Switching a new file to WAL upgrades a read lock to a write
** lock, which sqlite reports busy at once rather than wait (another process
** may be opening the same new file): so we wait here, up to busy_ms. */
static int use_wal(sq_store *s)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_OK;
    for (int waited = 0;; waited += 10) {
        rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        if ((rc & 0xff) != SQLITE_BUSY || waited >= s->busy_ms) break;
        sqlite3_finalize(st);
        st = NULL;
        sqlite3_sleep(10);
    }
    if (rc != SQLITE_ROW) {
        int kind = db_error(s, rc, "cannot use WAL mode");
        sqlite3_finalize(st);
        return kind;
    }
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    int ok = mode && sqlite3_stricmp(mode, "wal") == 0;
        if (!ok)
        sq_error_set(&s->err, SQ_ERR_IO, "%s: cannot use WAL mode (the journal mode stays '%s')",
                     s->path, mode ? mode : "?");
    sqlite3_finalize(st);
    return ok ? SQ_OK : SQ_ERR_IO;
}

static int open_db(sq_store *s, int readonly)
{
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (readonly) {
        /* SQLITE_OPEN_READONLY would fail on a missing file too, but with
        ** "unable to open database file": say what is wrong */
        struct stat sb;
        if (stat(s->path, &sb) != 0) {
                if (errno == ENOENT)
                return sq_error_set(&s->err, SQ_ERR_NOTFOUND, "%s: no such database", s->path);
            return sq_error_set(&s->err, SQ_ERR_IO, "%s: cannot open: %s", s->path,
                                strerror(errno));
        }
    }
    int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (s->db) return db_error(s, rc, "cannot open");
        return sq_error_set(&s->err, SQ_ERR_NOMEM, "%s: cannot open: out of memory", s->path);
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, s->busy_ms);
    /* a user's SQL runs on these connections (db export, report --runs):
    ** it must not load a library (load_extension() would run its code), and
    ** a file from elsewhere must not have its schema call functions */
    int off = 0, on = 1;
    if (sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, &off) != SQLITE_OK ||
        off != 0 || sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, &on) != SQLITE_OK ||
        sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL) != SQLITE_OK) {
        return sq_error_set(&s->err, SQ_ERR_UNSUPPORTED, "%s: cannot set up the connection safely",
                            s->path);
    }

    /* A newer schema, or one that is not shardq's, is refused before
    ** anything is written (not even the switch to WAL). */
    int v = 0;
    if ((rc = verify(s, &v))) return rc;
    s->version = v;
    if (readonly) return SQ_OK;

    if ((rc = use_wal(s))) return rc;
    if ((rc = exec(s, "PRAGMA synchronous=NORMAL")) != SQLITE_OK ||
        (rc = exec(s, "PRAGMA foreign_keys=ON")) != SQLITE_OK) {
        return db_error(s, rc, "cannot set up the connection");
    }
    if (v == SQ_STORE_VERSION) return SQ_OK;
    /* what the migrations made, ours or another process's meanwhile */
    if ((rc = migrate(s)) || (rc = verify(s, &v))) return rc;
    s->version = v;
    return SQ_OK;
}

int sq_store_open(const char *path, int busy_ms, int readonly, sq_store **out, sq_error *err)
{
    *out = NULL;
    if (!path || !*path) return sq_error_set(err, SQ_ERR_ARG, "empty database file name");
    sq_store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    s->busy_ms = busy_ms <= 0 ? SQ_STORE_BUSY_MS : busy_ms;
    int rc = open_db(s, readonly);
    if (!rc && (rc = sq_protect_path(s->path)) == SQ_OK)
        s->registered = 1;
    else if (!rc)
        rc = sq_error_set(&s->err, rc, "%s: out of memory", path);
    if (rc) {
        /* the handle goes: its error goes to the caller's */
        if (err) *err = s->err;
        sq_store_close(s);
        return rc;
    }
    *out = s;
    return SQ_OK;
}

const char *sq_store_error(const sq_store *s)
{
    return s ? sq_error_message(&s->err) : sq_strerror(SQ_ERR_ARG);
}

int sq_store_status(const sq_store *s) { return s ? s->err.status : SQ_ERR_ARG; }

/* The tables of the schema, in the order of their creation, each with the
** columns of its primary key (the order of a full export). */
static const sq_store_table tables[] = {
    {"runs", "id"},
    {"params", "run_id, key"},
    {"step_metrics", "run_id, step, path"},
    {"tensor_stats", "run_id, step, path, tensor"},
    {"bytes", "run_id, collective, link"},
    {"timings", "run_id, op"},
    {"train_steps", "run_id, step"},
    {"bench_results", "run_id, op, threads, elements"},
    {"model_results", "run_id, scheme, gpus"},
    {"netbench_results", "run_id, op, level, bytes"},
};

const sq_store_table *sq_store_tables(size_t *n)
{
    if (n) *n = sizeof tables / sizeof tables[0];
    return tables;
}

void sq_store_close(sq_store *s)
{
    if (!s) return;
    sqlite3_close_v2(s->db);
    if (s->registered) sq_unprotect_path(s->path);
    free(s->path);
    free(s);
}

const char *sq_store_path(const sq_store *s) { return s->path; }

struct sqlite3 *sq_store_db(sq_store *s) { return s->db; }

int sq_store_version(const sq_store *s) { return s->version; }

/* store_query.h: the limit in force, for the sentence that says it */
double sq_store_query_limit(const sq_store *s) { return s->query_limit; }

/* sq_store_limit_queries: the statement that begins while none is under the
** clock is put under it (SQLITE_TRACE_STMT: its first step after a prepare
** or a reset; the trigger programs and nested statements that begin inside
** it share its deadline), and leaves it when it ends (SQLITE_TRACE_PROFILE:
** its last step, a reset, a finalize). The progress handler, every 1000
** virtual machine instructions, interrupts it once the deadline is past. */
static int query_trace(unsigned type, void *ctx, void *p, void *x)
{
    sq_store *s = ctx;
    (void)x;
    if (type == SQLITE_TRACE_STMT && !s->timed) {
        s->timed = p;
        s->deadline = sq_clock_s() + s->query_limit;
    } else if (type == SQLITE_TRACE_PROFILE && p == s->timed) {
        s->timed = NULL;
    }
    return 0;
}

static int query_progress(void *ctx)
{
    const sq_store *s = ctx;
    return s->timed && sq_clock_s() > s->deadline;
}

int sq_store_limit_queries(sq_store *s, double seconds)
{
    if (!s) return SQ_ERR_ARG;
    s->timed = NULL;
    s->query_limit = seconds > 0 ? seconds : 0; /* NaN too: no limit */
    if (s->query_limit > 0) {
        sqlite3_trace_v2(s->db, SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE, query_trace, s);
        sqlite3_progress_handler(s->db, 1000, query_progress, s);
    } else {
        sqlite3_trace_v2(s->db, 0, NULL, NULL);
        sqlite3_progress_handler(s->db, 0, NULL, NULL);
    }
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */
/* ------------------------------------------------------------------------ */

/* UTC ISO 8601 with milliseconds: "2026-11-23T08:01:02.345Z". */
static void utc_now(char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t t = ts.tv_sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t k = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + k, len - k, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0) snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Processes: who writes a run, and whether it still does                   */
/* ------------------------------------------------------------------------ */

/* The start time of process pid in clock ticks after boot (field 22 of
** /proc/PID/stat), or -1 when it cannot be read (no such process, no
** /proc). The command name, field 2, is in parentheses and may hold blanks
** and parentheses itself: the fields after it are counted from its last ')'. */
#define START_UNKNOWN (-1)
static int64_t proc_start(int64_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return START_UNKNOWN;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p) return START_UNKNOWN;
    p++;
    for (int field = 3; field < 22; field++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    return end == p || errno || v < 0 ? START_UNKNOWN : v;
}

/* Whether process pid has ended but not been waited for yet (a zombie, state
** Z or X in /proc/PID/stat): it runs nothing, though kill(pid, 0) still
** finds it. A job process killed with its parent stays one until its new
** parent reaps it, which may take a while. */
static int proc_ended(int64_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p) return 0;
    while (*++p == ' ') {
    }
    return *p == 'Z' || *p == 'X';
}

/* This boot of the machine ("" when unknown): a pid and a start time are
** only comparable within one boot. */
static void boot_id(char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(buf, (int)len, f)) buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* What identifies a process beyond its pid. */
typedef struct proc_id {
    char host[256];
    int64_t pid;
    int64_t start; /* -1: unknown */
    char boot[64]; /* "": unknown */
} proc_id;

static void proc_self(proc_id *me)
{
    host_name(me->host, sizeof me->host);
    me->pid = (int64_t)getpid();
    me->start = proc_start(me->pid);
    boot_id(me->boot, sizeof me->boot);
}

/* SQ_PROC_ALIVE only when host, boot, pid and start time all match a live
** process here. A start time that cannot be read now (the process ended
** meanwhile, or /proc hides it) leaves the answer to kill(pid, 0), which
** also says EPERM for a process of another user. */
static int proc_state(const proc_id *me, const char *host, int64_t pid, int64_t start,
                      const char *boot)
{
    if (!host || strcmp(host, me->host) != 0) return SQ_PROC_ELSEWHERE;
    if (boot && *boot && *me->boot && strcmp(boot, me->boot) != 0) return SQ_PROC_GONE;
    if (pid <= 0 || pid > INT_MAX) return SQ_PROC_GONE; /* kill(0) or kill(-1) would mean groups */
    if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return SQ_PROC_GONE;
    if (proc_ended(pid)) return SQ_PROC_GONE;
    int64_t now = start >= 0 && me->start >= 0 ? proc_start(pid) : -1;
    if (now >= 0 && now != start) return SQ_PROC_GONE; /* the pid was given to another */
    return SQ_PROC_ALIVE;
}

int sq_store_proc_state(const char *host, int64_t pid, int64_t start, const char *boot)
{
    proc_id me;
    proc_self(&me);
    return proc_state(&me, host, pid, start, boot);
}

static int64_t column_or(sqlite3_stmt *st, int i, int64_t none)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? none : sqlite3_column_int64(st, i);
}

static const char *column_str(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? t : "";
}

/* The state of the writer of the row st is on, whose columns from i on are
** host, pid, pid_start, boot_id. */
static int row_state(const proc_id *me, sqlite3_stmt *st, int i)
{
    return proc_state(me, (const char *)sqlite3_column_text(st, i), sqlite3_column_int64(st, i + 1),
                      column_or(st, i + 2, -1), (const char *)sqlite3_column_text(st, i + 3));
}

/* Looks for the run with key; *outcome is SQ_STORE_DONE, or SQ_ERR_BUSY
** (said in s->err), when the caller must not start it, *id that run. A failed run, or one
** left running by a process that is gone, is deleted here (its rows go with
** it); s->notice says so for the latter. Returns the sqlite status. */
static int settle_key(sq_store *s, const char *key, const proc_id *me, int *outcome, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, status, host, pid, pid_start, boot_id, started"
                                " FROM runs WHERE key = ?1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int64_t old = -1;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        old = sqlite3_column_int64(st, 0);
        const char *status = column_str(st, 1);
        if (strcmp(status, "done") == 0) {
            *outcome = SQ_STORE_DONE;
        } else if (strcmp(status, "running") == 0) {
            int state = row_state(me, st, 2);
            if (state != SQ_PROC_GONE) {
                *outcome = SQ_ERR_BUSY;
                sq_error_set(&s->err, SQ_ERR_BUSY,
                             "run %lld with this key is under way: pid %lld on %s%s (since %s)",
                             (long long)old, (long long)sqlite3_column_int64(st, 3),
                             column_str(st, 2), state == SQ_PROC_ELSEWHERE ? ", another host" : "",
                             column_str(st, 6));
            } else
                snprintf(s->notice, sizeof s->notice,
                         "run %lld was left 'running' by pid %lld on %s (since %s), a process "
                         "that is gone: it starts afresh",
                         (long long)old, (long long)sqlite3_column_int64(st, 3), column_str(st, 2),
                         column_str(st, 6));
        }
        *id = old;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK || old < 0 || *outcome != SQ_STORE_STARTED) return rc;

    if ((rc = sqlite3_prepare_v2(s->db, "DELETE FROM runs WHERE id = ?1", -1, &st, NULL)))
        return rc;
    sqlite3_bind_int64(st, 1, old);
    rc = step_done(st);
    sqlite3_finalize(st);
    return rc;
}

/* Marks 'failed' every run left 'running' by a process of this host that
** is gone (killed, crashed, or from before a reboot). A run without a key
** (a benchmark) never comes again under the same identity, so it would
** otherwise stay 'running' for ever; a keyed one is replaced when its key
** comes. Its rows stay, to be looked at; nothing counts a failed run.
** Inside the caller's transaction. */
static int reap_gone(sq_store *s, const proc_id *me)
{
    static const char why[] = "interrupted: its process ended before the run did";
    sqlite3_stmt *st, *up = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, host, pid, pid_start, boot_id FROM runs"
                                " WHERE status = 'running' AND host = ?1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_text(st, 1, me->host, -1, SQLITE_STATIC);
    int64_t *gone = NULL;
    size_t n = 0, cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (row_state(me, st, 1) != SQ_PROC_GONE) continue;
        if (n == cap) {
            int64_t *p = realloc(gone, (cap = cap ? 2 * cap : 16) * sizeof *p);
            if (!p) {
                rc = SQLITE_NOMEM;
                break;
            }
            gone = p;
        }
        gone[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    char now[40];
    utc_now(now, sizeof now);
    if (rc == SQLITE_OK && n)
        rc = sqlite3_prepare_v2(s->db,
                                "UPDATE runs SET status = 'failed', ended = ?2, error = ?3"
                                " WHERE id = ?1 AND status = 'running'",
                                -1, &up, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_bind_int64(up, 1, gone[i]);
        sqlite3_bind_text(up, 2, now, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 3, why, -1, SQLITE_STATIC);
        rc = step_done(up);
    }
    sqlite3_finalize(up);
    free(gone);
    return rc;
}

static int insert_run(sq_store *s, const sq_run_info *info, const proc_id *me, int64_t *id)
{
    static const char sql[] =
        "INSERT INTO runs(kind, key, sweep, status, config, preset, scheme, topo, device, trace,"
        " seed, version, host, pid, started, pid_start, boot_id, heartbeat, grid, recipe) VALUES"
        " (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?14,"
        " ?17, ?18)";
    char now[40];
    utc_now(now, sizeof now);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    bind_text(st, 1, info->kind);
    bind_text(st, 2, info->key);
    bind_text(st, 3, info->sweep);
    bind_text(st, 4, info->config);
    bind_text(st, 5, info->preset);
    bind_text(st, 6, info->scheme);
    bind_text(st, 7, info->topo);
    bind_text(st, 8, info->device);
    bind_text(st, 9, info->trace);
    sqlite3_bind_int64(st, 10, (int64_t)info->seed);
    bind_text(st, 11, SHARDQ_VERSION_STRING);
    bind_text(st, 12, me->host);
    sqlite3_bind_int64(st, 13, me->pid);
    bind_text(st, 14, now);
    if (me->start >= 0) sqlite3_bind_int64(st, 15, me->start);
    bind_text(st, 16, *me->boot ? me->boot : NULL);
    bind_text(st, 17, info->grid);
    bind_text(st, 18, info->recipe);
    rc = step_done(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_OK) *id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

static int insert_params(sq_store *s, int64_t id, const sq_store_kv *p, size_t np)
{
    if (np == 0) return SQLITE_OK;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO params(run_id, key, value) VALUES (?1, ?2, ?3)",
                                -1, &st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < np; i++) {
        sqlite3_bind_int64(st, 1, id);
        bind_text(st, 2, p[i].key);
        bind_text(st, 3, p[i].value);
        rc = step_done(st);
    }
    sqlite3_finalize(st);
    return rc;
}

int sq_store_run_begin(sq_store *s, const sq_run_info *info, const sq_store_kv *p, size_t np,
                       int64_t *run_id)
{
    if (!info->kind || !info->config) {
        return sq_error_set(&s->err, SQ_ERR_ARG, "%s: a run needs a kind and a config", s->path);
    }
    if (too_big(info->seed)) {
        return sq_error_set(&s->err, SQ_ERR_RANGE,
                            "%s: seed %llu is larger than 2^63-1, the most the store holds",
                            s->path, (unsigned long long)info->seed);
    }
    for (size_t i = 0; i < np; i++)
        if (!p[i].key) {
            return sq_error_set(&s->err, SQ_ERR_ARG, "%s: parameter %zu has no name", s->path, i);
        }
    if (run_id) *run_id = 0;
    proc_id me;
    proc_self(&me);
    s->notice[0] = '\0';
    int rc = begin(s);
    if (rc) return rc;
    int outcome = SQ_STORE_STARTED;
    int64_t id = -1;
    if (info->key) rc = settle_key(s, info->key, &me, &outcome, &id);
    if (rc == SQLITE_OK && outcome != SQ_STORE_STARTED) {
        rollback(s); /* nothing was written */
        if (run_id) *run_id = id;
        return outcome;
    }
    if (rc == SQLITE_OK) rc = reap_gone(s, &me);
    if (rc == SQLITE_OK) rc = insert_run(s, info, &me, &id);
    if (rc == SQLITE_OK) rc = insert_params(s, id, p, np);
    if (rc != SQLITE_OK) {
        int kind = db_error(s, rc, "cannot write");
        rollback(s);
        s->notice[0] = '\0';
        return kind;
    }
    if ((rc = commit(s))) {
        s->notice[0] = '\0';
        return rc;
    }
    if (run_id) *run_id = id;
    return SQ_STORE_STARTED;
}

const char *sq_store_notice(const sq_store *s) { return s->notice[0] ? s->notice : NULL; }

/* Sets run's heartbeat to now, as every write of its rows does (inside the
** transaction): what another host can see of a process it cannot check.
** SQLITE_NOTFOUND when there is no such run. */
static int touch_run(sq_store *s, int64_t run)
{
    char now[40];
    utc_now(now, sizeof now);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "UPDATE runs SET heartbeat = ?2 WHERE id = ?1", -1, &st,
                                NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, now, -1, SQLITE_STATIC);
    rc = step_done(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && sqlite3_changes(s->db) == 0) rc = SQLITE_NOTFOUND;
    return rc;
}

/* Ends a write transaction that failed with rc (SQLITE_NOTFOUND: no such
** run). Returns the kind of the failure. */
static int write_failed(sq_store *s, int rc, int64_t run)
{
    if (rc == SQLITE_NOTFOUND) {
        rollback(s);
        return sq_error_set(&s->err, SQ_ERR_NOTFOUND, "%s: no run %lld", s->path,
                            (long long)run);
    }
    int kind = db_error(s, rc, "cannot write");
    rollback(s);
    return kind;
}

static void bind_stat(sqlite3_stmt *st, int64_t run, const sq_stat_row *r)
{
    int k = 1;
    sqlite3_bind_int64(st, k++, run);
    sqlite3_bind_int64(st, k++, (int64_t)r->step);
    bind_text(st, k++, r->path);
    if (r->tensor) bind_text(st, k++, r->tensor);
    sqlite3_bind_int64(st, k++, (int64_t)r->st.n);
    const double v[] = {r->st.rel_l2,      r->st.mse,         r->st.max_abs,
                        r->st.snr_db,      r->st.cosine,      r->st.mean_signed,
                        r->st.frac_zeroed, r->frac_clipped,   r->seconds,
                        r->ef_residual};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) bind_real(st, k++, v[i]);
}

int sq_store_add_stats(sq_store *s, int64_t run, const sq_stat_row *rows, size_t n)
{
    static const char step_sql[] =
        "INSERT INTO step_metrics(run_id, step, path, elements, rel_l2, mse, max_abs, snr_db,"
        " cosine, mean_signed, frac_zeroed, frac_clipped, seconds, ef_residual)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
    static const char tensor_sql[] =
        "INSERT INTO tensor_stats(run_id, step, path, tensor, elements, rel_l2, mse, max_abs,"
        " snr_db, cosine, mean_signed, frac_zeroed, frac_clipped, seconds, ef_residual)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
    for (size_t i = 0; i < n; i++)
        if (too_big(rows[i].step) || too_big(rows[i].st.n)) {
            return sq_error_set(&s->err, SQ_ERR_RANGE,
                                "%s: run %lld: step or element count larger than 2^63-1",
                                s->path, (long long)run);
        }
    int rc = begin(s);
    if (rc) return rc;
    sqlite3_stmt *sst = NULL, *tst = NULL;
    rc = touch_run(s, run);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(s->db, step_sql, -1, &sst, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(s->db, tensor_sql, -1, &tst, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_stmt *st = rows[i].tensor ? tst : sst;
        bind_stat(st, run, &rows[i]);
        rc = step_done(st);
    }
    sqlite3_finalize(sst);
    sqlite3_finalize(tst);
    if (rc != SQLITE_OK) return write_failed(s, rc, run);
    return commit(s);
}

/* Inserts rows[0..n) into one table in one transaction: sql binds ?1 to the
** run, bind() the rest of row i. The writers of training, bench and model
** rows are this with their own SQL. */
typedef void (*row_binder)(sqlite3_stmt *st, const void *rows, size_t i);

static int insert_rows(sq_store *s, int64_t run, const char *sql, const void *rows, size_t n,
                       row_binder bind)
{
    int rc = begin(s);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    rc = touch_run(s, run);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_bind_int64(st, 1, run);
        bind(st, rows, i);
        rc = step_done(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) return write_failed(s, rc, run);
    return commit(s);
}

static int count_too_big(sq_store *s, int64_t run, const char *what, int bad)
{
    if (!bad) return SQ_OK;
    return sq_error_set(&s->err, SQ_ERR_RANGE, "%s: run %lld: %s larger than 2^63-1", s->path,
                        (long long)run, what);
}

static void bind_train(sqlite3_stmt *st, const void *rows, size_t i)
{
    const sq_train_row *r = (const sq_train_row *)rows + i;
    sqlite3_bind_int64(st, 2, (int64_t)r->step);
    sqlite3_bind_int64(st, 3, (int64_t)r->tokens);
    bind_real(st, 4, r->loss);
    bind_real(st, 5, r->val_loss);
    bind_real(st, 6, r->lr);
    bind_real(st, 7, r->grad_norm);
    bind_real(st, 8, r->seconds);
    bind_real(st, 9, r->ef_residual);
}

int sq_store_add_train(sq_store *s, int64_t run, const sq_train_row *rows, size_t n)
{
    int big = 0;
    for (size_t i = 0; i < n; i++) big |= too_big(rows[i].step) || too_big(rows[i].tokens);
    int rc = count_too_big(s, run, "step or token count", big);
    if (rc) return rc;
    return insert_rows(s, run,
                       "INSERT INTO train_steps(run_id, step, tokens, loss, val_loss, lr,"
                       " grad_norm, seconds, ef_residual) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
                       " ?9)",
                       rows, n, bind_train);
}

static void bind_bench(sqlite3_stmt *st, const void *rows, size_t i)
{
    const sq_bench_row *r = (const sq_bench_row *)rows + i;
    bind_text(st, 2, r->op);
    sqlite3_bind_int(st, 3, r->threads);
    sqlite3_bind_int64(st, 4, (int64_t)r->elements);
    sqlite3_bind_int64(st, 5, (int64_t)r->bytes);
    bind_real(st, 6, r->gb_per_s);
    bind_real(st, 7, r->gb_per_s_std);
    bind_real(st, 8, r->copy_gb_per_s);
}

int sq_store_add_bench(sq_store *s, int64_t run, const sq_bench_row *rows, size_t n)
{
    int big = 0;
    for (size_t i = 0; i < n; i++) big |= too_big(rows[i].elements) || too_big(rows[i].bytes);
    int rc = count_too_big(s, run, "element or byte count", big);
    if (rc) return rc;
    return insert_rows(s, run,
                       "INSERT INTO bench_results(run_id, op, threads, elements, bytes, gb_per_s,"
                       " gb_per_s_std, copy_gb_per_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                       rows, n, bind_bench);
}

static void bind_model(sqlite3_stmt *st, const void *rows, size_t i)
{
    const sq_model_row *r = (const sq_model_row *)rows + i;
    bind_text(st, 2, r->scheme);
    sqlite3_bind_int(st, 3, r->gpus);
    const double v[] = {r->compute_s, r->tp_s,      r->bubble_s,    r->weight_s, r->grad_s,
                        r->quant_s,   r->optimizer_s, r->iteration_s, r->tflops,   r->speedup};
    for (int k = 0; k < 10; k++) bind_real(st, 4 + k, v[k]);
    sqlite3_bind_int64(st, 14, (int64_t)r->inter_bytes_per_node);
}

int sq_store_add_model(sq_store *s, int64_t run, const sq_model_row *rows, size_t n)
{
    int big = 0;
    for (size_t i = 0; i < n; i++) big |= too_big(rows[i].inter_bytes_per_node);
    int rc = count_too_big(s, run, "byte count", big);
    if (rc) return rc;
    return insert_rows(s, run,
                       "INSERT INTO model_results(run_id, scheme, gpus, compute_s, tp_s, bubble_s,"
                       " weight_s, grad_s, quant_s, optimizer_s, iteration_s, tflops, speedup,"
                       " inter_bytes_per_node) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
                       " ?11, ?12, ?13, ?14)",
                       rows, n, bind_model);
}

static void bind_netbench(sqlite3_stmt *st, const void *rows, size_t i)
{
    const sq_netbench_row *r = (const sq_netbench_row *)rows + i;
    bind_text(st, 2, r->op);
    bind_text(st, 3, r->level);
    sqlite3_bind_int64(st, 4, (int64_t)r->bytes);
    sqlite3_bind_int64(st, 5, (int64_t)r->count);
    sqlite3_bind_int(st, 6, r->ranks);
    sqlite3_bind_int(st, 7, r->comms);
    sqlite3_bind_int(st, 8, r->iters);
    bind_real(st, 9, r->seconds);
    bind_real(st, 10, r->algbw_gb_s);
    bind_real(st, 11, r->busbw_gb_s);
}

int sq_store_add_netbench(sq_store *s, int64_t run, const sq_netbench_row *rows, size_t n)
{
    int big = 0;
    for (size_t i = 0; i < n; i++) big |= too_big(rows[i].bytes) || too_big(rows[i].count);
    int rc = count_too_big(s, run, "byte or element count", big);
    if (rc) return rc;
    return insert_rows(s, run,
                       "INSERT INTO netbench_results(run_id, op, level, bytes, count, ranks,"
                       " comms, iters, seconds, algbw_gb_s, busbw_gb_s) VALUES (?1, ?2, ?3, ?4,"
                       " ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                       rows, n, bind_netbench);
}

void sq_bytes_rows(const sq_traffic *sum, sq_bytes_row *rows)
{
    for (int c = 0; c < SQ_NCOLL; c++)
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_link_traffic *x = &sum->t[c][l];
            rows[c * SQ_NLINK + l] = (sq_bytes_row){
                .collective = sq_coll_name(c), .link = sq_link_name(l),
                .sent_codes = x->sent_codes, .sent_meta = x->sent_meta,
                .recv_codes = x->recv_codes, .recv_meta = x->recv_meta,
                .sent_elems = x->sent_elems, .messages = x->messages,
                .sent_params = x->sent_params};
        }
}

static int insert_bytes(sq_store *s, int64_t run, const sq_bytes_row *b, size_t n)
{
    static const char sql[] =
        "INSERT INTO bytes(run_id, collective, link, sent_codes, sent_meta, recv_codes,"
        " recv_meta, sent_elems, messages, bits_per_elem, sent_params, bits_per_param)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
    if (n == 0) return SQLITE_OK;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        const sq_bytes_row *r = &b[i];
        sqlite3_bind_int64(st, 1, run);
        bind_text(st, 2, r->collective);
        bind_text(st, 3, r->link);
        sqlite3_bind_int64(st, 4, (int64_t)r->sent_codes);
        sqlite3_bind_int64(st, 5, (int64_t)r->sent_meta);
        sqlite3_bind_int64(st, 6, (int64_t)r->recv_codes);
        sqlite3_bind_int64(st, 7, (int64_t)r->recv_meta);
        sqlite3_bind_int64(st, 8, (int64_t)r->sent_elems);
        sqlite3_bind_int64(st, 9, (int64_t)r->messages);
        if (r->sent_elems)
            sqlite3_bind_double(st, 10, 8.0 * ((double)r->sent_codes + (double)r->sent_meta) /
                                            (double)r->sent_elems);
        sqlite3_bind_int64(st, 11, (int64_t)r->sent_params);
        if (r->sent_params)
            sqlite3_bind_double(st, 12, 8.0 * ((double)r->sent_codes + (double)r->sent_meta) /
                                            (double)r->sent_params);
        rc = step_done(st);
    }
    sqlite3_finalize(st);
    return rc;
}

static int insert_timings(sq_store *s, int64_t run, const sq_timing_row *t, size_t n)
{
    static const char sql[] = "INSERT INTO timings(run_id, op, calls, seconds, bytes, gb_per_s)"
                              " VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    if (n == 0) return SQLITE_OK;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        const sq_timing_row *r = &t[i];
        sqlite3_bind_int64(st, 1, run);
        bind_text(st, 2, r->op);
        sqlite3_bind_int64(st, 3, (int64_t)r->calls);
        bind_real(st, 4, r->seconds); /* NaN: NULL, refused by NOT NULL */
        sqlite3_bind_int64(st, 5, (int64_t)r->bytes);
        if (r->seconds > 0 && r->bytes) bind_real(st, 6, (double)r->bytes / r->seconds / 1e9);
        rc = step_done(st);
    }
    sqlite3_finalize(st);
    return rc;
}

static int set_status(sq_store *s, int64_t run, const char *status, const char *error)
{
    char now[40];
    utc_now(now, sizeof now);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(
        s->db, "UPDATE runs SET status = ?2, error = ?3, ended = ?4, heartbeat = ?4 WHERE id = ?1",
        -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    sqlite3_bind_int64(st, 1, run);
    bind_text(st, 2, status);
    bind_text(st, 3, error);
    bind_text(st, 4, now);
    rc = step_done(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && sqlite3_changes(s->db) == 0) rc = SQLITE_NOTFOUND;
    return rc;
}

int sq_store_run_end(sq_store *s, int64_t run, const char *status, const char *error,
                     const sq_bytes_row *bytes, size_t nbytes, const sq_timing_row *timings,
                     size_t ntimings)
{
    if (!status || (strcmp(status, "done") != 0 && strcmp(status, "failed") != 0)) {
        return sq_error_set(&s->err, SQ_ERR_ARG,
                            "%s: run %lld: a run ends 'done' or 'failed', not '%s'", s->path,
                            (long long)run, status ? status : "(null)");
    }
    for (size_t i = 0; i < nbytes; i++) {
        const sq_bytes_row *r = &bytes[i];
        if (too_big(r->sent_codes) || too_big(r->sent_meta) || too_big(r->recv_codes) ||
            too_big(r->recv_meta) || too_big(r->sent_elems) || too_big(r->messages) ||
            too_big(r->sent_params)) {
            return sq_error_set(&s->err, SQ_ERR_RANGE,
                                "%s: run %lld: a byte count is larger than 2^63-1", s->path,
                                (long long)run);
        }
    }
    for (size_t i = 0; i < ntimings; i++)
        if (too_big(timings[i].calls) || too_big(timings[i].bytes)) {
            return sq_error_set(&s->err, SQ_ERR_RANGE,
                                "%s: run %lld: a timing count is larger than 2^63-1", s->path,
                                (long long)run);
        }
    int rc = begin(s);
    if (rc) return rc;
    rc = set_status(s, run, status, error);
    if (rc == SQLITE_OK) rc = insert_bytes(s, run, bytes, nbytes);
    if (rc == SQLITE_OK) rc = insert_timings(s, run, timings, ntimings);
    if (rc != SQLITE_OK) return write_failed(s, rc, run);
    return commit(s);
}

int sq_store_run_delete(sq_store *s, int64_t run)
{
    int rc = begin(s);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = sqlite3_prepare_v2(s->db, "DELETE FROM runs WHERE id = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        rc = step_done(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_OK && sqlite3_changes(s->db) == 0) rc = SQLITE_NOTFOUND;
    }
    if (rc != SQLITE_OK) return write_failed(s, rc, run);
    return commit(s);
}

/* ------------------------------------------------------------------------ */
/* Who holds a key                                                          */
/* ------------------------------------------------------------------------ */

int sq_store_key_holder(sq_store *s, const char *key, sq_run_holder *h)
{
    memset(h, 0, sizeof *h);
    h->idle_s = NAN;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT id, status, host, pid, pid_start, boot_id, started, coalesce(heartbeat, started),"
        " (julianday('now') - julianday(coalesce(heartbeat, started))) * 86400.0"
        " FROM runs WHERE key = ?1",
        -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    if (rc == SQLITE_ROW) {
        proc_id me;
        proc_self(&me);
        h->id = sqlite3_column_int64(st, 0);
        snprintf(h->status, sizeof h->status, "%s", column_str(st, 1));
        snprintf(h->host, sizeof h->host, "%s", column_str(st, 2));
        h->pid = sqlite3_column_int64(st, 3);
        snprintf(h->started, sizeof h->started, "%s", column_str(st, 6));
        snprintf(h->heartbeat, sizeof h->heartbeat, "%s", column_str(st, 7));
        if (sqlite3_column_type(st, 8) != SQLITE_NULL) h->idle_s = sqlite3_column_double(st, 8);
        h->state = strcmp(h->status, "running") == 0 ? row_state(&me, st, 2) : SQ_PROC_GONE;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? SQ_OK : db_error(s, rc, "cannot read");
}

int sq_store_run_takeover(sq_store *s, const sq_run_holder *h, const char *why)
{
    char now[40];
    utc_now(now, sizeof now);
    int rc = begin(s);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = sqlite3_prepare_v2(s->db,
                                "UPDATE runs SET status = 'failed', ended = ?4, error = ?5"
                                " WHERE id = ?1 AND status = 'running' AND host = ?2 AND pid = ?3",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, h->id);
        sqlite3_bind_text(st, 2, h->host, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, h->pid);
        sqlite3_bind_text(st, 4, now, -1, SQLITE_STATIC);
        bind_text(st, 5, why);
        rc = step_done(st);
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_OK) return write_failed(s, rc, h->id);
    int taken = sqlite3_changes(s->db) == 1;
    if ((rc = commit(s))) return rc;
    return taken ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* Importing a run from another file                                        */
/* ------------------------------------------------------------------------ */

/* The schema name under which sq_store_import_run attaches its file. */
#define IMPORT_DB "sq_import"

/* "c1, c2, ..." of table t in schema db, leaving out the column `skip`
** (NULL: none), with `first` as it is in place of the first column kept
** when first is not NULL (a parameter: the run_id of a child table,
** remapped). The names come from the schema of this build, so a column
** added by a later migration is copied without a change here. */
static int column_list(sq_store *s, const char *db, const char *t, const char *skip,
                       const char *first, char *buf, size_t len)
{
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA %s.table_info(%s)", db, t);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    size_t k = 0;
    buf[0] = '\0';
    int n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = column_str(st, 1);
        if (skip && strcmp(name, skip) == 0) continue;
        int w = n == 0 && first ? snprintf(buf + k, len - k, "%s", first)
                                : snprintf(buf + k, len - k, "%s\"%s\"", n ? ", " : "", name);
        if (w < 0 || (size_t)w >= len - k) {
            rc = SQLITE_TOOBIG;
            break;
        }
        k += (size_t)w;
        n++;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) rc = n ? SQLITE_OK : SQLITE_ERROR;
    return rc;
}

/* Copies the run's rows of one child table (run_id first in every one). */
static int import_rows(sq_store *s, const char *t, int64_t from_run, int64_t to_run)
{
    char cols[2048], sel[2048], sql[4400];
    int rc = column_list(s, "main", t, NULL, NULL, cols, sizeof cols);
    if (rc == SQLITE_OK) rc = column_list(s, "main", t, NULL, "?2", sel, sizeof sel);
    if (rc != SQLITE_OK) return rc;
    snprintf(sql, sizeof sql, "INSERT INTO main.%s(%s) SELECT %s FROM " IMPORT_DB ".%s"
             " WHERE run_id = ?1", t, cols, sel, t);
    sqlite3_stmt *st;
    if ((rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) != SQLITE_OK) return rc;
    sqlite3_bind_int64(st, 1, from_run);
    sqlite3_bind_int64(st, 2, to_run);
    rc = step_done(st);
    sqlite3_finalize(st);
    return rc;
}

/* Inside the transaction: the key settled, the runs row copied, then its
** rows. *outcome as sq_store_run_begin's; s->err says why on failure. */
static int import_tx(sq_store *s, const char *from, int64_t run, int *outcome, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "SELECT key, status FROM " IMPORT_DB ".runs WHERE id = ?1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return db_error(s, rc, "cannot read the run to import");
    sqlite3_bind_int64(st, 1, run);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) return db_error(s, rc, "cannot read the run to import");
        return sq_error_set(&s->err, SQ_ERR_NOTFOUND, "%s: no run %lld", from, (long long)run);
    }
    char *key = sqlite3_column_type(st, 0) == SQLITE_NULL
                    ? NULL
                    : strdup((const char *)sqlite3_column_text(st, 0));
    char status[16];
    snprintf(status, sizeof status, "%s", column_str(st, 1));
    int nokey = sqlite3_column_type(st, 0) != SQLITE_NULL && !key;
    sqlite3_finalize(st);
    if (nokey) return sq_error_set(&s->err, SQ_ERR_NOMEM, "%s: out of memory", s->path);
    if (strcmp(status, "done") != 0 && strcmp(status, "failed") != 0) {
        free(key);
        return sq_error_set(&s->err, SQ_ERR_FORMAT,
                            "%s: run %lld: field 'status' is '%s': only a run that ended "
                            "('done' or 'failed') is imported", from, (long long)run, status);
    }
    proc_id me;
    proc_self(&me);
    int64_t old = -1;
    rc = key ? settle_key(s, key, &me, outcome, &old) : SQLITE_OK;
    free(key);
    if (rc != SQLITE_OK) return db_error(s, rc, "cannot write");
    if (*outcome != SQ_STORE_STARTED) {
        *id = old;
        return *outcome == SQ_ERR_BUSY ? SQ_ERR_BUSY : SQ_OK;
    }
    if ((rc = reap_gone(s, &me)) != SQLITE_OK) return db_error(s, rc, "cannot write");

    char cols[2048], sql[4400];
    rc = column_list(s, "main", "runs", "id", NULL, cols, sizeof cols);
    if (rc == SQLITE_OK) {
        snprintf(sql, sizeof sql, "INSERT INTO main.runs(%s) SELECT %s FROM " IMPORT_DB ".runs"
                 " WHERE id = ?1", cols, cols);
        rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    }
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        rc = step_done(st);
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_OK) return db_error(s, rc, "cannot import the run");
    *id = sqlite3_last_insert_rowid(s->db);
    size_t nt;
    const sq_store_table *t = sq_store_tables(&nt);
    for (size_t i = 0; i < nt; i++) {
        if (strcmp(t[i].name, "runs") == 0) continue;
        if ((rc = import_rows(s, t[i].name, run, *id)) != SQLITE_OK) {
            char what[96];
            snprintf(what, sizeof what, "cannot import the rows of table %s", t[i].name);
            return db_error(s, rc, what);
        }
    }
    return SQ_OK;
}

int sq_store_import_run(sq_store *s, const char *from, int64_t run, int64_t *new_id)
{
    int64_t id = 0;
    if (new_id) *new_id = 0;
    s->notice[0] = '\0';
    if (!from || !*from) return sq_error_set(&s->err, SQ_ERR_ARG, "%s: no file to import", s->path);
    /* ATTACH would create a missing file: say what is wrong instead */
    struct stat sb;
    if (stat(from, &sb) != 0)
        return sq_error_set(&s->err, errno == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO,
                            "%s: cannot import: %s", from, strerror(errno));
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "ATTACH DATABASE ?1 AS " IMPORT_DB, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, from, -1, SQLITE_STATIC);
        rc = step_done(st);
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_OK) {
        /* sqlite reads the header here: the fault is the file's */
        if ((rc & 0xff) == SQLITE_NOTADB)
            return sq_error_set(&s->err, SQ_ERR_FORMAT, "%s: file is not a database", from);
        return sq_error_set(&s->err, db_kind(rc), "%s: cannot attach it to %s: %s", from,
                            s->path, sqlite3_errmsg(s->db));
    }
    /* the first read of the file: is it a database, and of this schema? */
    int v = -1, kind;
    rc = sqlite3_prepare_v2(s->db, "PRAGMA " IMPORT_DB ".user_version", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        if ((rc = sqlite3_step(st)) == SQLITE_ROW) v = sqlite3_column_int(st, 0), rc = SQLITE_OK;
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_NOTADB)
            kind = sq_error_set(&s->err, SQ_ERR_FORMAT, "%s: file is not a database", from);
        else
            kind = db_error(s, rc, "cannot read the file to import");
    } else if (v != SQ_STORE_VERSION) {
        kind = sq_error_set(&s->err, SQ_ERR_FORMAT,
                            "%s: schema version %d, this shardq writes %d: a run is imported "
                            "from a file of the same version", from, v, SQ_STORE_VERSION);
    } else if (!(kind = begin(s))) {
        int outcome = SQ_STORE_STARTED;
        kind = import_tx(s, from, run, &outcome, &id);
        if (kind || outcome != SQ_STORE_STARTED) {
            rollback(s);
            s->notice[0] = '\0';
            if (!kind) kind = outcome;
            if (kind != SQ_STORE_DONE && !(kind == SQ_ERR_BUSY && outcome == SQ_ERR_BUSY)) id = 0;
        } else if ((kind = commit(s))) {
            s->notice[0] = '\0';
            id = 0;
        }
    }
    exec(s, "DETACH DATABASE " IMPORT_DB);
    if (new_id) *new_id = id;
    return kind;
}
