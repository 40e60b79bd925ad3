/*
** device.h -- which CUDA devices this build of shardq can use.
**
** Plain C, callable whether or not shardq was built with CUDA: without it
** (src/backend/device_none.c) there are simply no devices. Nothing here
** aborts or prints; a caller that finds no device asks why with
** sq_device_unavailable_reason().
*/
#ifndef SQ_BACKEND_DEVICE_H
#define SQ_BACKEND_DEVICE_H

#include "shardq/codec.h" /* SQ_BEGIN_DECLS */

#include <stddef.h>

SQ_BEGIN_DECLS

/* Number of usable CUDA devices: 0 when there is none, when the driver is
** missing or too old, or when shardq was built without CUDA. */
int sq_device_count(void);

/* Writes the name of device dev, NUL-terminated and truncated to len bytes,
** into buf. Returns SQ_OK, SQ_ERR_ARG when dev is out of range (or buf is
** NULL), SQ_ERR_DEVICE when CUDA fails. */
int sq_device_name(int dev, char *buf, size_t len);

/* Why sq_device_count() returned 0 (or why the last call above failed): a
** static string such as "built without CUDA" or the CUDA runtime's own
** message. Never NULL. */
const char *sq_device_unavailable_reason(void);

/* Copies a small buffer host -> device, transforms it with a kernel and
** copies it back, which proves the binary holds code this GPU can run.
** Returns SQ_OK when the result is right, SQ_ERR_ARG for no such device,
** SQ_ERR_NOMEM, or SQ_ERR_DEVICE (a CUDA call failed or the data came back
** wrong). */
int sq_device_selftest(int dev);

SQ_END_DECLS

#endif
