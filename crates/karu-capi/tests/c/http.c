/* Batches, probes and cancellation against the HTTP test server (karu_testkit RangeServer).
 * Usage: http <base URL> <local copy of obj.bin> <scratch directory> */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

#define SIZE (1 << 20)
static unsigned char *expected;
static const char *base;

static karu_locator *resolve(const char *route) {
  char url[512];
  snprintf(url, sizeof url, "%s/%s", base, route);
  karu_locator *loc = NULL;
  karu_status s = karu_resolve(url, &loc);
  CHECK(s == KARU_OK, "resolve %s", url);
  return loc;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static char etag[256];

static void probes(karu_client *client) {
  karu_locator *loc = resolve("ok/obj.bin");
  CHECK(karu_locator_is_remote(loc) == 1, "an http locator is remote");
  uint64_t size = 0;
  EXPECT_OK(karu_client_size(client, loc, &size));
  CHECK(size == SIZE, "size over HTTP %llu", (unsigned long long)size);
  karu_object_info info = KARU_OBJECT_INFO_INIT;
  EXPECT_OK(karu_client_stat(client, loc, &info));
  CHECK(info.size == SIZE && info.etag[0] == '"', "stat: size and strong ETag %s", info.etag);
  strcpy(etag, info.etag);
  struct { size_t struct_size; uint64_t size; uint64_t canary; } small = {16, 0, 99};
  EXPECT_OK(karu_client_stat(client, loc, (karu_object_info *)&small));
  CHECK(small.size == SIZE && small.canary == 99, "stat through a 16-byte karu_object_info");
  unsigned char head[300], tail[200];
  small.size = 0;
  EXPECT_OK(karu_client_read_ends(client, loc, head, sizeof head, tail, sizeof tail,
                                  (karu_object_info *)&small));
  CHECK(small.size == SIZE && small.canary == 99 && memcmp(head, expected, sizeof head) == 0 &&
            memcmp(tail, expected + SIZE - sizeof tail, sizeof tail) == 0,
        "read_ends through a 16-byte karu_object_info");
  memset(&info.etag, 0, sizeof info.etag);
  EXPECT_OK(karu_client_read_ends(client, loc, head, 10, NULL, 0, &info));
  CHECK(strcmp(info.etag, etag) == 0 && memcmp(head, expected, 10) == 0, "read_ends head only, ETag");
  karu_locator_free(loc);

  loc = resolve("ok/missing.bin");
  EXPECT(karu_client_size(client, loc, &size), KARU_ERR_NOT_FOUND, base);
  karu_locator_free(loc);
  loc = resolve("ok/obj.bin?secret=hunter2");
  EXPECT_OK(karu_client_size(client, loc, &size));
  karu_locator_free(loc);
  loc = resolve("status/flaky.bin?size=1000&code=404&times=100");
  EXPECT(karu_client_stat(client, loc, &info), KARU_ERR_NOT_FOUND, base);
  CHECK(strstr(karu_last_error(), "secret") == NULL, "no secret in messages");
  karu_locator_free(loc);

  karu_download_result r = KARU_DOWNLOAD_RESULT_INIT;
  loc = resolve("ok/obj.bin");
  karu_status s = karu_client_download(client, loc, "/nonexistent-dir/x/y", NULL, &r);
  CHECK(s == KARU_ERR_IO && r.size == 0, "download into a missing directory: IO, result untouched (%d '%s')",
        s, karu_last_error());
  karu_locator_free(loc);
}

struct progress { int calls; uint64_t last_done, last_total; int cancel_after; };
static int on_progress(void *ud, uint64_t done, uint64_t total) {
  struct progress *p = ud;
  p->calls++;
  p->last_done = done;
  p->last_total = total;
  return p->cancel_after == 0 || p->calls < p->cancel_after;
}

static int same_file(const char *path, uint64_t n) {
  unsigned char *back = malloc(n + 1);
  FILE *f = fopen(path, "rb");
  int ok = f && fread(back, 1, n + 1, f) == n && memcmp(back, expected, n) == 0;
  if (f) fclose(f);
  free(back);
  return ok;
}

static void download(karu_client *client, const char *dir) {
  char dest[4096];
  snprintf(dest, sizeof dest, "%s/downloaded.bin", dir);
  remove(dest);
  karu_locator *loc = resolve("ok/obj.bin");
  struct progress p = {0, 0, 0, 0};
  karu_download_options o = KARU_DOWNLOAD_OPTIONS_INIT;
  o.chunk_size = 256 * 1024;
  o.parallelism = 3;
  o.progress = on_progress;
  o.progress_user_data = &p;
  karu_download_result r = KARU_DOWNLOAD_RESULT_INIT;
  EXPECT_OK(karu_client_download(client, loc, dest, &o, &r));
  CHECK(r.size == SIZE && r.downloaded == SIZE && strcmp(r.etag, etag) == 0 &&
            r.received_bytes >= SIZE,
        "download result: size %llu downloaded %llu etag %s", (unsigned long long)r.size,
        (unsigned long long)r.downloaded, r.etag);
  CHECK(same_file(dest, SIZE), "downloaded file equals the object");
  CHECK(p.calls >= 2 && p.last_done == SIZE && p.last_total == SIZE, "progress called %d times, last %llu/%llu",
        p.calls, (unsigned long long)p.last_done, (unsigned long long)p.last_total);
  EXPECT(karu_client_download(client, loc, dest, NULL, NULL), KARU_ERR_IO, dest);
  o.overwrite = 1;
  o.progress = NULL;
  struct { size_t struct_size; uint64_t size; uint64_t canary; } small = {16, 0, 5};
  EXPECT_OK(karu_client_download(client, loc, dest, &o, (karu_download_result *)&small));
  CHECK(small.size == SIZE && small.canary == 5, "overwrite, result through a 16-byte struct");
  remove(dest);
  p = (struct progress){0, 0, 0, 2};
  o.progress = on_progress;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_CANCELLED, dest);
  FILE *f = fopen(dest, "rb");
  CHECK(f == NULL, "a cancelled download publishes nothing ('%s')", karu_last_error());
  if (f) fclose(f);
  karu_locator_free(loc);
}

static void batches(karu_client *client) {
  karu_locator *loc = resolve("ok/obj.bin");
  enum { N = 5 };
  static unsigned char mine[2][4096];
  uint64_t offs[N] = {0, 100000, 104096, 500000, SIZE - 100};
  karu_req reqs[N];
  for (int i = 0; i < N; i++)
    reqs[i] = (karu_req){loc, offs[i], 4096, i < 2 ? mine[i] : NULL, (void *)(intptr_t)i, NULL};
  reqs[1].if_match = etag;
  reqs[3].if_match = "\"not-the-etag\"";
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit(client, reqs, N, &batch));
  karu_locator_free(loc);
  karu_done d;
  int seen = 0;
  while (karu_batch_next(batch, &d, -1) == KARU_OK) {
    int i = (int)(intptr_t)d.tag;
    seen |= 1 << i;
    if (i < 2) CHECK(d.buffer == mine[i], "caller buffer back for %d", i);
    if (i == 3) {
      CHECK(d.status == KARU_ERR_PRECONDITION && d.got == 0 && starts_with(karu_last_error(), base),
            "a wrong If-Match: PRECONDITION '%s'", karu_last_error());
    } else if (i == 4) {
      CHECK(d.status == KARU_ERR_RANGE && d.got == 100 &&
                memcmp(d.buffer, expected + SIZE - 100, 100) == 0,
            "past the end: RANGE with the 100-byte prefix (%d, %llu)", d.status,
            (unsigned long long)d.got);
    } else {
      CHECK(d.status == KARU_OK && d.got == 4096 && memcmp(d.buffer, expected + offs[i], 4096) == 0,
            "read %d ok with correct bytes (%d '%s')", i, d.status, karu_last_error());
    }
    if (i >= 2) karu_free(d.buffer);
  }
  CHECK(seen == 0x1f, "every read completed");
  karu_batch_stats st = KARU_BATCH_STATS_INIT;
  EXPECT_OK(karu_batch_get_stats(batch, &st));
  CHECK(st.requested_bytes == 5 * 4096 && st.transfers_finished == st.transfers &&
            st.received_bytes >= 3 * 4096 + 100 && st.transfers <= 5,
        "stats: transfers %llu requested %llu received %llu new_connections %llu",
        (unsigned long long)st.transfers, (unsigned long long)st.requested_bytes,
        (unsigned long long)st.received_bytes, (unsigned long long)st.new_connections);
  karu_batch_free(batch);

  /* submit_with: merging on by default, off with gap 0. */
  loc = resolve("ok/obj.bin");
  static unsigned char a[1000], b[1000];
  karu_req two[2] = {{loc, 0, 1000, a, NULL, NULL}, {loc, 2000, 1000, b, NULL, NULL}};
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  EXPECT_OK(karu_client_submit_with(client, two, 2, &so, &batch));
  while (karu_batch_next(batch, &d, -1) == KARU_OK) CHECK(d.status == KARU_OK, "merged read ok");
  karu_batch_get_stats(batch, &st);
  CHECK(st.transfers == 1 && st.received_bytes == 3000, "merged into one transfer of 3000 bytes");
  karu_batch_free(batch);
  so.coalesce_gap = 0;
  EXPECT_OK(karu_client_submit_with(client, two, 2, &so, &batch));
  while (karu_batch_next(batch, &d, -1) == KARU_OK) CHECK(d.status == KARU_OK, "separate read ok");
  karu_batch_get_stats(batch, &st);
  CHECK(st.transfers == 2 && st.received_bytes == 2000, "gap 0: two transfers");
  karu_batch_free(batch);
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  EXPECT_OK(karu_client_fetch_with(client, two, 2, &so));
  CHECK(memcmp(a, expected, 1000) == 0 && memcmp(b, expected + 2000, 1000) == 0, "fetch_with over HTTP");
  two[1].if_match = "\"other\"";
  EXPECT(karu_client_fetch(client, two, 2), KARU_ERR_PRECONDITION, base);
  karu_locator_free(loc);
}

struct drain { karu_batch *batch; int count; int end; };
static void *drainer(void *p) {
  struct drain *dr = p;
  karu_done d;
  karu_status s;
  while ((s = karu_batch_next(dr->batch, &d, 20)) == KARU_OK || s == KARU_TIMEOUT) {
    if (s != KARU_OK) continue;
    uint64_t off = (uint64_t)(intptr_t)d.tag;
    if (d.status == KARU_OK && d.got == 2048 && memcmp(d.buffer, expected + off, 2048) == 0) dr->count++;
    karu_free(d.buffer);
  }
  dr->end = (s == KARU_END);
  return NULL;
}

static void threads(karu_client *client) {
  karu_locator *loc = resolve("ok/obj.bin");
  enum { N = 64, T = 4 };
  karu_req reqs[N];
  for (int i = 0; i < N; i++) {
    uint64_t off = (uint64_t)i * 16000;
    reqs[i] = (karu_req){loc, off, 2048, NULL, (void *)(intptr_t)off, NULL};
  }
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  so.coalesce_gap = 0;
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit_with(client, reqs, N, &so, &batch));
  karu_locator_free(loc);
  pthread_t th[T];
  struct drain dr[T];
  for (int i = 0; i < T; i++) {
    dr[i] = (struct drain){batch, 0, 0};
    pthread_create(&th[i], NULL, drainer, &dr[i]);
  }
  int total = 0, ends = 0;
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    total += dr[i].count;
    ends += dr[i].end;
  }
  CHECK(total == N && ends == T, "%d pthreads drained %d/%d completions, %d saw END", T, total, N, ends);
  karu_batch_free(batch);
}

/* Free while requests are in flight on a trickling route: returns promptly, and the caller's
 * buffers may be freed right afterwards (valgrind would see a late write). */
static void cancellation(karu_client *client) {
  karu_locator *loc = resolve("trickle/slow.bin?size=1000000&rate=2000");
  enum { N = 4 };
  karu_req reqs[N];
  unsigned char *bufs[N];
  for (int i = 0; i < N; i++) {
    bufs[i] = i % 2 ? malloc(100000) : NULL; /* caller and library buffers */
    reqs[i] = (karu_req){loc, (uint64_t)i * 200000, 100000, bufs[i], NULL, NULL};
  }
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  so.coalesce_gap = 0;
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit_with(client, reqs, N, &so, &batch));
  karu_done d;
  EXPECT(karu_batch_next(batch, &d, 300), KARU_TIMEOUT, "");
  double t0 = now();
  karu_batch_free(batch);
  double took = now() - t0;
  CHECK(took < 20.0, "free while in flight returned after %.3f s", took);
  for (int i = 0; i < N; i++) {
    if (bufs[i]) memset(bufs[i], 0xee, 100000);
    free(bufs[i]);
  }
  /* The client still works afterwards. */
  unsigned char x[16];
  karu_locator *ok = resolve("ok/obj.bin");
  karu_req one = {ok, 77, 16, x, NULL, NULL};
  EXPECT_OK(karu_client_fetch(client, &one, 1));
  CHECK(memcmp(x, expected + 77, 16) == 0, "client works after a cancellation");
  karu_locator_free(ok);
  karu_locator_free(loc);
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: http <base URL> <local copy> <scratch dir>\n"); return 2; }
  base = argv[1];
  expected = malloc(SIZE);
  FILE *f = fopen(argv[2], "rb");
  if (!f || fread(expected, 1, SIZE, f) != SIZE) { fprintf(stderr, "cannot read %s\n", argv[2]); return 2; }
  fclose(f);
  karu_config *cfg = NULL;
  karu_client *client = NULL;
  karu_config_create_empty(&cfg);
  EXPECT_OK(karu_config_set_option(cfg, "KARU_MAX_ATTEMPTS", "2"));
  EXPECT_OK(karu_client_create(cfg, &client));
  karu_config_free(cfg);
  probes(client);
  batches(client);
  threads(client);
  cancellation(client);
  download(client, argv[3]);
  karu_client_free(client);
  free(expected);
  DONE();
}
