/*
** device_none.c -- the device probe of a build without CUDA: no devices.
*/
#include "backend/device.h"

int sq_device_count(void)
{
    return 0;
}

int sq_device_name(int dev, char *buf, size_t len)
{
    (void)dev;
    if (buf && len) buf[0] = '\0';
    return -1;
}

const char *sq_device_unavailable_reason(void)
{
    return "built without CUDA";
}

int sq_device_selftest(int dev)
{
    (void)dev;
    return -1;
}
