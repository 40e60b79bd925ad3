/*
** sq_json.h -- JSON values written to a stream (json.c): what the
** commands' --json output and the modules that print their results share,
** so that every string is escaped and every number read back alike.
*/
#ifndef SQ_JSON_H
#define SQ_JSON_H

#include <stdio.h>

/* A string literal with its quotes, '"', '\\' and control characters
** escaped (\n, \t, \u00XX). */
void sq_json_str(FILE *f, const char *s);

/* A number in the shortest of %.15g .. %.17g that reads back exactly, or
** null when it is NaN or +-Inf (which JSON cannot say). */
void sq_json_num(FILE *f, double v);

#endif
