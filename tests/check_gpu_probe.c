/*
** check_gpu_probe.c -- is there a CUDA device, and can this build use it?
**
** Skips (exit 77) when shardq was built without CUDA or no GPU is visible, so
** that `make check` passes on CPU-only machines; on a GPU machine it proves
** the binary carries code for that GPU.
*/
#include "backend/device.h"
#include "check_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_device_name)
{
    char name[256];
    ck_assert_int_eq(sq_device_name(_i, name, sizeof name), 0);
    ck_assert_msg(name[0] != '\0', "device %d has an empty name", _i);
    printf("device %d: %s\n", _i, name);
}
END_TEST

START_TEST(test_device_name_truncates)
{
    char name[4];
    memset(name, 'x', sizeof name);
    ck_assert_int_eq(sq_device_name(_i, name, sizeof name), 0);
    ck_assert_uint_le(strlen(name), sizeof name - 1);
}
END_TEST

START_TEST(test_device_selftest)
{
    ck_assert_msg(sq_device_selftest(_i) == 0, "self-test on device %d: %s", _i,
                  sq_device_unavailable_reason());
}
END_TEST

START_TEST(test_bad_device)
{
    char name[64];
    ck_assert_int_eq(sq_device_name(-1, name, sizeof name), -1);
    ck_assert_int_eq(sq_device_name(sq_device_count(), name, sizeof name), -1);
    ck_assert_int_eq(sq_device_selftest(-1), -1);
}
END_TEST

int main(void)
{
    int n = sqt_devices_or_skip();

    Suite *s = suite_create("gpu_probe");
    TCase *tc = tcase_create("device");
    tcase_add_loop_test(tc, test_device_name, 0, n);
    tcase_add_loop_test(tc, test_device_name_truncates, 0, n);
    tcase_add_loop_test(tc, test_device_selftest, 0, n);
    tcase_add_test(tc, test_bad_device);
    suite_add_tcase(s, tc);

    return sqt_run_nofork(s);
}
