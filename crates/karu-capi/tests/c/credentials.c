/* Credential provider callbacks through the C ABI (spec §1.5, §5.10): called per canonical
 * path, reused within cache_prefix until expires_at, a fresh call without a prefix, and a
 * fork while a credential worker is blocked inside the callback.
 * The S3 backend signs path-style requests to the HTTP test server, which serves them.
 * Usage: credentials <base URL> <local copy of obj.bin> */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static unsigned char expected[1 << 20];

/* What the callback does, set per phase by the test. */
static const char *prefix;  /* cache_prefix to return, or NULL */
static int64_t lifetime;    /* expires_at = now + lifetime seconds; 0 = never */
static atomic_int calls;
static atomic_int blocked;  /* the callback blocks while this is set */
static atomic_int inside;   /* a callback is running */
static char last_path[512];
static pthread_mutex_t path_lock = PTHREAD_MUTEX_INITIALIZER;

static karu_status provider(void *ud, karu_credentials_kind kind, const char *path,
                            karu_credentials *out) {
  (void)ud;
  if (kind != KARU_CREDENTIALS_AWS) return KARU_ERR_CREDENTIALS;
  atomic_fetch_add(&calls, 1);
  atomic_store(&inside, 1);
  while (atomic_load(&blocked)) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  pthread_mutex_lock(&path_lock);
  snprintf(last_path, sizeof last_path, "%s", path);
  pthread_mutex_unlock(&path_lock);
  out->access_key_id = "AKIDEXAMPLE";
  out->secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  out->cache_prefix = prefix;
  out->expires_at = lifetime ? (int64_t)time(NULL) + lifetime : 0;
  atomic_store(&inside, 0);
  return KARU_OK;
}

static karu_client *client_for(const char *base) {
  karu_config *cfg = NULL;
  karu_client *client = NULL;
  EXPECT_OK(karu_config_create_empty(&cfg));
  EXPECT_OK(karu_config_set_option(cfg, "AWS_S3_ENDPOINT", base));
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_AWS, provider, NULL, NULL));
  EXPECT_OK(karu_client_create(cfg, &client));
  karu_config_free(cfg);
  return client;
}

/* One read of 64 bytes at `offset` of s3://ok/obj.bin (its own batch, so its own transfer). */
static karu_status read_at(karu_client *client, uint64_t offset) {
  karu_locator *loc = NULL;
  if (karu_resolve("s3://ok/obj.bin", &loc) != KARU_OK) return KARU_ERR_INVALID;
  unsigned char buf[64];
  karu_req req = {loc, offset, sizeof buf, buf, NULL, NULL};
  karu_status s = karu_client_fetch(client, &req, 1);
  karu_locator_free(loc);
  if (s == KARU_OK && memcmp(buf, expected + offset, sizeof buf) != 0) return KARU_ERR_IO;
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: credentials <base URL> <local copy>\n"); return 2; }
  FILE *f = fopen(argv[2], "rb");
  CHECK(f && fread(expected, 1, sizeof expected, f) == sizeof expected, "local copy read");
  if (f) fclose(f);

  /* Reused within the prefix while not expiring: one call for three transfers. */
  karu_client *client = client_for(argv[1]);
  prefix = "s3://ok";
  lifetime = 0;
  for (int i = 0; i < 3; i++) EXPECT(read_at(client, 1000 * i), KARU_OK, "");
  CHECK(atomic_load(&calls) == 1, "one callback for three transfers under its prefix (%d)",
        atomic_load(&calls));
  CHECK(strcmp(last_path, "/vsis3/ok/obj.bin") == 0, "the callback gets the canonical path '%s'",
        last_path);
  karu_client_free(client);

  /* Expiring in 3 s (whole seconds, so 2-3 s away): reusable until the last second (the 1 s
   * minimum margin), then called again. */
  atomic_store(&calls, 0);
  client = client_for(argv[1]);
  lifetime = 3;
  EXPECT(read_at(client, 0), KARU_OK, "");
  EXPECT(read_at(client, 64), KARU_OK, "");
  int before = atomic_load(&calls);
  struct timespec wait = {2, 200 * 1000 * 1000};
  nanosleep(&wait, NULL);
  EXPECT(read_at(client, 128), KARU_OK, "");
  CHECK(before == 1 && atomic_load(&calls) == 2,
        "reused until expires_at, then called again (%d then %d)", before, atomic_load(&calls));
  karu_client_free(client);

  /* Without a prefix: one call per transfer. */
  atomic_store(&calls, 0);
  client = client_for(argv[1]);
  prefix = NULL;
  lifetime = 0;
  for (int i = 0; i < 3; i++) EXPECT(read_at(client, 10 * i), KARU_OK, "");
  CHECK(atomic_load(&calls) == 3, "no prefix: a call per transfer (%d)", atomic_load(&calls));

  /* Fork while a credential worker is blocked inside the callback: the child rebuilds the
   * engine and reads; the parent's read completes once the callback returns. */
  atomic_store(&blocked, 1);
  karu_locator *loc = NULL;
  EXPECT_OK(karu_resolve("s3://ok/obj.bin", &loc));
  unsigned char buf[64];
  karu_req req = {loc, 4096, sizeof buf, buf, NULL, NULL};
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit(client, &req, 1, &batch));
  for (int waited = 0; !atomic_load(&inside) && waited < 5000; waited += 5) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(atomic_load(&inside), "a credential worker is inside the callback");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    failures = 0;
    atomic_store(&blocked, 0); /* the child's own callbacks must not block */
    EXPECT(read_at(client, 2048), KARU_OK, "");
    karu_client_free(client);
    CHILD_DONE();
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child read with a rebuilt engine");
  atomic_store(&blocked, 0);
  karu_done d;
  EXPECT_OK(karu_batch_next(batch, &d, -1));
  CHECK(d.status == KARU_OK && memcmp(buf, expected + 4096, sizeof buf) == 0,
        "parent: the blocked read completes after the callback returns");
  karu_batch_free(batch);
  karu_locator_free(loc);
  karu_client_free(client);
  DONE();
}
