/* Tiny TAP-like checks for the C tests: one line per check, exit status = failures. */
#ifndef KARU_TEST_CHECK_H
#define KARU_TEST_CHECK_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "karu.h"

static int failures = 0;

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    int ok_ = (cond) ? 1 : 0;                                                                \
    printf("%s - ", ok_ ? "ok" : "FAIL");                                                    \
    printf(__VA_ARGS__);                                                                     \
    printf("\n");                                                                            \
    fflush(stdout);                                                                          \
    if (!ok_) failures++;                                                                    \
  } while (0)

static inline int starts_with(const char *s, const char *prefix) {
  return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A status-returning call: exact status, and the last error begins with `prefix`. */
#define EXPECT(call, status, prefix)                                                         \
  do {                                                                                       \
    karu_status s_ = (call);                                                                 \
    CHECK(s_ == (status) && starts_with(karu_last_error(), (prefix)),                        \
          "%s -> %d (want %d) '%s' (want prefix '%s')", #call, (int)s_, (int)(status),       \
          karu_last_error(), (prefix));                                                      \
  } while (0)

#define EXPECT_OK(call) EXPECT(call, KARU_OK, "")

#define DONE()                                                                               \
  do {                                                                                       \
    printf("%d failure(s)\n", failures);                                                     \
    return failures == 0 ? 0 : 1;                                                            \
  } while (0)

/* The end of a forked child: its own count, and its exit status for the parent to check. */
#define CHILD_DONE()                                                                         \
  do {                                                                                       \
    printf("child: %d failure(s)\n", failures);                                              \
    fflush(stdout);                                                                          \
    _exit(failures == 0 ? 0 : 1);                                                            \
  } while (0)

#endif
