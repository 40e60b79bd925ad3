/*
** clock.c -- the monotonic clock of sq_clock.h.
*/
#include "sq_clock.h"

#include <time.h>

double sq_clock_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
