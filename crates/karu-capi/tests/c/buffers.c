/* Caller buffers: uninitialised malloc'd memory is filled exactly (valgrind flags any byte
 * inside `got` that karu left unwritten), locally and over HTTP, through direct, merged and
 * overlapping-range reads; buffers that overlap each other within one submit are refused
 * with INVALID before anything runs.
 * Usage: buffers <base URL> <local copy of obj.bin> */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define SIZE (1 << 20)
static unsigned char *expected;

static karu_locator *resolve(const char *uri) {
  karu_locator *loc = NULL;
  karu_status s = karu_resolve(uri, &loc);
  CHECK(s == KARU_OK, "resolve %s", uri);
  return loc;
}

/* Overlapping buffers fail the whole submit (or fetch) with INVALID; touching ones are fine. */
static void overlaps(karu_client *client, karu_locator *loc) {
  unsigned char *m = malloc(10000);
  karu_batch *batch = (karu_batch *)1;
  karu_req reqs[4] = {{loc, 0, 100, m, NULL, NULL}, {loc, 100, 100, m + 50, NULL, NULL}};
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1's buffer overlaps request 0's");
  CHECK(batch == NULL, "no batch after an overlap");
  EXPECT(karu_client_fetch(client, reqs, 2), KARU_ERR_INVALID,
         "karu_client_fetch: request 1's buffer overlaps request 0's");
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  EXPECT(karu_client_submit_with(client, reqs, 2, &so, &batch), KARU_ERR_INVALID,
         "karu_client_submit_with: request 1's buffer overlaps request 0's");
  EXPECT(karu_client_fetch_with(client, reqs, 2, &so), KARU_ERR_INVALID,
         "karu_client_fetch_with: request 1's buffer overlaps request 0's");
  /* The same buffer twice. */
  reqs[1].buffer = m;
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1's buffer overlaps request 0's");
  /* Out of address order: the later request names the pair, the earlier one second. */
  reqs[0] = (karu_req){loc, 0, 100, m + 5000, NULL, NULL};
  reqs[1] = (karu_req){loc, 0, 100, NULL, NULL, NULL};
  reqs[2] = (karu_req){loc, 0, 100, m, NULL, NULL};
  reqs[3] = (karu_req){loc, 0, 100, m + 4950, NULL, NULL};
  EXPECT(karu_client_submit(client, reqs, 4, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 3's buffer overlaps request 0's");
  reqs[3].buffer = m + 4900; /* touching [4900, 5000) and [5000, 5100): accepted */
  EXPECT_OK(karu_client_submit(client, reqs, 4, &batch));
  karu_done d;
  int ok = 0;
  while (karu_batch_next(batch, &d, -1) == KARU_OK) {
    ok += d.status == KARU_OK && d.got == 100 && memcmp(d.buffer, expected, 100) == 0;
    int mine = d.buffer == m || d.buffer == m + 4900 || d.buffer == m + 5000;
    if (!mine) karu_free(d.buffer);
  }
  CHECK(ok == 4, "touching buffers and a library buffer: 4 exact reads (%d)", ok);
  karu_batch_free(batch);
  /* Per-request checks come first. */
  reqs[3].buffer = m + 4950;
  reqs[1].length = 0;
  EXPECT(karu_client_submit(client, reqs, 4, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1 is empty");
  free(m);
}

/* Reads into one uninitialised malloc'd region cut into disjoint buffers, listed out of
 * address order: plain reads, reads merged into one transfer, reads whose ranges overlap in
 * the object, and one that passes the end. Only the `got` bytes are compared. */
static void uninitialised(karu_client *client, karu_locator *loc, const char *what) {
  enum { N = 8, L = 3000 };
  uint64_t offs[N] = {0, 2000, 2500, 100000, 103000, 700000, 5000, SIZE - 1000};
  unsigned char *m = malloc((size_t)N * L);
  karu_req reqs[N];
  for (int i = 0; i < N; i++)
    reqs[i] = (karu_req){loc, offs[i], L, m + (size_t)(N - 1 - i) * L, (void *)(intptr_t)i, NULL};
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit(client, reqs, N, &batch));
  karu_done d;
  int seen = 0;
  while (karu_batch_next(batch, &d, -1) == KARU_OK) {
    int i = (int)(intptr_t)d.tag;
    seen |= 1 << i;
    CHECK(d.buffer == reqs[i].buffer, "%s: read %d came back in its buffer", what, i);
    if (i == N - 1)
      CHECK(d.status == KARU_ERR_RANGE && d.got == 1000 && memcmp(d.buffer, expected + SIZE - 1000, 1000) == 0,
            "%s: past the end: RANGE with the exact 1000-byte prefix (%d, %llu)", what, d.status,
            (unsigned long long)d.got);
    else
      CHECK(d.status == KARU_OK && d.got == L && memcmp(d.buffer, expected + offs[i], L) == 0,
            "%s: read %d at %llu: every byte (%d '%s')", what, i, (unsigned long long)offs[i], d.status,
            karu_last_error());
  }
  CHECK(seen == (1 << N) - 1, "%s: every read completed once", what);
  karu_batch_free(batch);
  free(m);
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: buffers <base URL> <local copy>\n"); return 2; }
  expected = malloc(SIZE);
  FILE *f = fopen(argv[2], "rb");
  if (!f || fread(expected, 1, SIZE, f) != SIZE) { fprintf(stderr, "cannot read %s\n", argv[2]); return 2; }
  fclose(f);
  karu_config *cfg = NULL;
  karu_client *client = NULL;
  karu_config_create_empty(&cfg);
  EXPECT_OK(karu_client_create(cfg, &client));
  karu_config_free(cfg);
  char url[512];
  snprintf(url, sizeof url, "%s/ok/obj.bin", argv[1]);
  karu_locator *local = resolve(argv[2]), *remote = resolve(url);
  overlaps(client, local);
  uninitialised(client, local, "local");
  uninitialised(client, remote, "http");
  karu_locator_free(local);
  karu_locator_free(remote);
  karu_client_free(client);
  free(expected);
  DONE();
}
