/*
** version.c -- the library's version, for the callers that ask the library
** rather than the header they were compiled with (the Python package).
*/
#include "shardq/codec.h"

const char *sq_version(void) { return SHARDQ_VERSION_STRING; }
