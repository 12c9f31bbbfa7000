/* Fork safety (spec §1.10): a child reads on the inherited client (its engine is rebuilt);
 * an inherited batch returns INVALID and its free is a no-op.
 * Usage: fork <base URL> <local copy of obj.bin> */
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static int read_both(karu_client *client, const char *url, const char *path, unsigned char *a,
                     unsigned char *b) {
  karu_locator *remote = NULL, *local = NULL;
  if (karu_resolve(url, &remote) != KARU_OK || karu_resolve(path, &local) != KARU_OK) return -100;
  karu_req reqs[2] = {{remote, 1000, 64, a, NULL, NULL}, {local, 1000, 64, b, NULL, NULL}};
  karu_status s = karu_client_fetch(client, reqs, 2);
  karu_locator_free(remote);
  karu_locator_free(local);
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: fork <base URL> <local copy>\n"); return 2; }
  char url[512], trickle[512];
  snprintf(url, sizeof url, "%s/ok/obj.bin", argv[1]);
  snprintf(trickle, sizeof trickle, "%s/trickle/slow.bin?size=100000&rate=1000", argv[1]);
  karu_config *cfg = NULL;
  karu_client *client = NULL;
  karu_config_create_empty(&cfg);
  karu_client_create(cfg, &client);
  karu_config_free(cfg);

  unsigned char a[64], b[64];
  EXPECT(read_both(client, url, argv[2], a, b), KARU_OK, "");
  CHECK(memcmp(a, b, 64) == 0, "parent: remote and local bytes agree");

  /* A batch in flight at fork time. */
  karu_locator *slow = NULL;
  karu_resolve(trickle, &slow);
  karu_req req = {slow, 0, 50000, NULL, NULL, NULL};
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit(client, &req, 1, &batch));
  fflush(stdout);

  pid_t pid = fork();
  if (pid == 0) {
    failures = 0;
    karu_done d;
    EXPECT(karu_batch_next(batch, &d, 0), KARU_ERR_INVALID, "karu_batch_next: ");
    CHECK(strstr(karu_last_error(), "batches do not cross fork()") != NULL,
          "child: inherited batch message '%s'", karu_last_error());
    karu_batch_stats st = KARU_BATCH_STATS_INIT;
    EXPECT(karu_batch_get_stats(batch, &st), KARU_ERR_INVALID, "karu_batch_get_stats: ");
    karu_batch_free(batch); /* a no-op in the child */
    CHECK(1, "child: freeing the inherited batch returned");
    unsigned char ca[64], cb[64];
    memset(ca, 0, sizeof ca);
    EXPECT(read_both(client, url, argv[2], ca, cb), KARU_OK, "");
    CHECK(memcmp(ca, a, 64) == 0 && memcmp(cb, b, 64) == 0, "child: reads on the inherited client");
    karu_client_free(client);
    karu_locator_free(slow);
    CHILD_DONE();
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child passed (status %d)", status);
  /* The parent's batch is unaffected by the child. */
  karu_done d;
  karu_batch_stats st = KARU_BATCH_STATS_INIT;
  EXPECT_OK(karu_batch_get_stats(batch, &st));
  CHECK(st.requested_bytes == 50000, "parent: its batch still answers");
  karu_batch_free(batch);
  (void)d;
  EXPECT(read_both(client, url, argv[2], a, b), KARU_OK, "");
  karu_locator_free(slow);
  karu_client_free(client);
  DONE();
}
