/*
** sq_protect.h -- the files that no output of this process may replace: the
** databases it has open, with their -wal, -shm and -journal files.
**
** A store registers its file when it opens it and removes it when it
** closes (src/store/store.c); the safe file writer (sq_wfile_open, through
** which every output file of the command goes) asks first, so that `shardq
** db export -o shardq.db` cannot replace the database it reads with CSV.
**
** A path is one of those files when, existing, it is the same file (device
** and inode, symbolic links followed: a link to the database, a hard link
** too), or, not existing yet, its canonical name (realpath of its
** directory, then its last component; a dangling link followed to what it
** would create) is the database's canonical name with one of the suffixes:
** `-o shardq.db-wal` is refused before SQLite has made that file.
**
** libc only. The registry is one per process, guarded by a mutex; a child
** forked by a sweep inherits it, which is what it should protect too.
*/
#ifndef SQ_PROTECT_H
#define SQ_PROTECT_H

#include <stddef.h>

/* Adds db (a path as the store was given it; the same path may be added
** more than once, by two stores) to the registry. SQ_OK, or SQ_ERR_NOMEM. */
int sq_protect_path(const char *db);
/* Removes one entry added with the same text of db; none: a no-op. */
void sq_unprotect_path(const char *db);
/* 1 when writing path would replace a registered database or one of its
** files, with which[0..len) naming that file as the store was given it
** plus its suffix ("s.db", "s.db-wal"); 0 otherwise (which = ""). */
int sq_path_is_protected(const char *path, char *which, size_t len);

#endif
