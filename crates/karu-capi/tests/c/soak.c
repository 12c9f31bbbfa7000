/* The C ABI's fault soak: many batched reads from the test kit server's `chaos` route, which
 * faults a share of the requests (truncation, reset, wrong Content-Range, 200 for 206, 503 with
 * Retry-After, version change, trickle, redirects), from two threads, with every byte of every
 * successful read checked against local copies of both versions of each object. Even batches
 * read into caller buffers pinned to version 0's ETag and must return version 0; odd batches
 * let karu allocate, pin nothing, and each read must be one version whole.
 * Usage: soak <base URL> <dir holding obj-N.bin and obj-N.v1.bin> <reads> <seed> <per mille> */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define OBJECTS 4
#define OBJ_SIZE (1u << 20)
#define SLOT 8192u
#define MAX_READ 4096u
#define SLOTS (OBJECTS * (OBJ_SIZE / SLOT))
#define BATCH 250u
#define THREADS 2
/* Longer than a read's own deadline (KARU_REQUEST_TIMEOUT, 120 s): a read still pending then
 * is hung. */
#define WATCHDOG_MS 240000

static unsigned char *v0[OBJECTS], *v1[OBJECTS];
static char etags[OBJECTS][256];
static karu_locator *locs[OBJECTS];
static karu_client *client;
static uint64_t reads, seed, batches, next_batch;

struct tally {
  uint64_t reads, ok, new_version, failed, http, precondition, other, wrong_reads, wrong_bytes,
      hung, retries, throttled, resumed;
};
static struct tally total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static unsigned char *load(const char *path) {
  unsigned char *data = malloc(OBJ_SIZE);
  FILE *f = fopen(path, "rb");
  int ok = data && f && fread(data, 1, OBJ_SIZE, f) == OBJ_SIZE;
  if (f) fclose(f);
  CHECK(ok, "load %s", path);
  if (!ok) exit(1);
  return data;
}

static uint64_t differing(const unsigned char *a, const unsigned char *b, uint64_t n) {
  uint64_t d = 0;
  for (uint64_t i = 0; i < n; i++) d += a[i] != b[i];
  return d;
}

static void run_batch(uint64_t b, struct tally *t) {
  uint64_t n = reads - b * BATCH < BATCH ? reads - b * BATCH : BATCH;
  int pinned = b % 2 == 0;
  /* n distinct slots (a partial Fisher-Yates shuffle); each read inside its own slot. */
  uint32_t slots[SLOTS];
  uint64_t r = mix(seed ^ (b * 0x9e3779b97f4a7c15ull));
  for (uint32_t i = 0; i < SLOTS; i++) slots[i] = i;
  karu_req *reqs = calloc(n, sizeof *reqs);
  unsigned char *buffers = pinned ? malloc(n * MAX_READ) : NULL;
  if (!reqs || (pinned && !buffers)) {
    CHECK(0, "allocate batch %" PRIu64, b);
    exit(1);
  }
  for (uint64_t i = 0; i < n; i++) {
    r = mix(r);
    uint64_t j = i + r % (SLOTS - i);
    uint32_t s = slots[i];
    slots[i] = slots[j];
    slots[j] = s;
    uint32_t o = slots[i] / (OBJ_SIZE / SLOT);
    r = mix(r);
    uint64_t off = (uint64_t)(slots[i] % (OBJ_SIZE / SLOT)) * SLOT + r % (SLOT - MAX_READ);
    uint64_t len = 1 + (r >> 32) % MAX_READ;
    reqs[i] = (karu_req){locs[o], off, len, pinned ? buffers + i * MAX_READ : NULL,
                         (void *)(uintptr_t)i, pinned ? etags[o] : NULL};
  }
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  so.coalesce_gap = 0;
  karu_batch *batch = NULL;
  karu_status s = karu_client_submit_with(client, reqs, n, &so, &batch);
  CHECK(s == KARU_OK, "submit batch %" PRIu64 " (%d '%s')", b, s, karu_last_error());
  if (s != KARU_OK) exit(1);
  t->reads += n;
  uint64_t seen = 0;
  karu_done d;
  while ((s = karu_batch_next(batch, &d, WATCHDOG_MS)) == KARU_OK) {
    seen++;
    uint64_t i = (uintptr_t)d.tag;
    const karu_req *q = &reqs[i];
    uint32_t o = 0;
    while (locs[o] != q->locator) o++;
    const unsigned char *want = v0[o] + q->offset;
    if (d.status == KARU_OK) {
      if (d.got == q->length && memcmp(d.buffer, want, q->length) == 0) {
        t->ok++;
      } else if (!pinned && d.got == q->length &&
                 memcmp(d.buffer, v1[o] + q->offset, q->length) == 0) {
        t->ok++;
        t->new_version++;
      } else {
        t->wrong_reads++;
        t->wrong_bytes += d.got == q->length ? differing(d.buffer, want, q->length) : q->length;
        printf("FAIL - batch %" PRIu64 " read %" PRIu64 ": wrong bytes\n", b, i);
      }
    } else {
      t->failed++;
      if (d.status == KARU_ERR_HTTP) t->http++;
      else if (d.status == KARU_ERR_PRECONDITION) t->precondition++;
      else {
        t->other++;
        printf("FAIL - batch %" PRIu64 " read %" PRIu64 ": unexpected status %d (%s)\n", b, i,
               d.status, karu_status_string(d.status));
      }
      /* A failed read's kept prefix must be right too. */
      if (d.got > 0 && (d.got > q->length || memcmp(d.buffer, want, d.got) != 0)) {
        t->wrong_reads++;
        t->wrong_bytes += d.got;
      }
    }
    if (!pinned) karu_free(d.buffer);
  }
  if (s == KARU_TIMEOUT) {
    /* Its reads may never end, so the batch cannot be freed: count them and leave. */
    t->hung += n - seen;
    printf("FAIL - batch %" PRIu64 ": %" PRIu64 " reads hung\n", b, n - seen);
    fflush(stdout);
    _exit(1);
  }
  karu_batch_stats st = KARU_BATCH_STATS_INIT;
  if (karu_batch_get_stats(batch, &st) == KARU_OK) {
    t->retries += st.retries;
    t->throttled += st.throttled;
    t->resumed += st.resumed;
  }
  karu_batch_free(batch);
  free(reqs);
  free(buffers);
}

static void *worker(void *arg) {
  (void)arg;
  struct tally t = {0};
  for (;;) {
    pthread_mutex_lock(&lock);
    uint64_t b = next_batch++;
    pthread_mutex_unlock(&lock);
    if (b >= batches) break;
    run_batch(b, &t);
  }
  pthread_mutex_lock(&lock);
  uint64_t *sum = (uint64_t *)&total, *mine = (uint64_t *)&t;
  for (size_t i = 0; i < sizeof t / sizeof(uint64_t); i++) sum[i] += mine[i];
  pthread_mutex_unlock(&lock);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s BASE DIR READS SEED PER_MILLE\n", argv[0]);
    return 2;
  }
  const char *base = argv[1], *dir = argv[2];
  reads = strtoull(argv[3], NULL, 10);
  seed = strtoull(argv[4], NULL, 10);
  unsigned per_mille = (unsigned)strtoul(argv[5], NULL, 10);
  batches = (reads + BATCH - 1) / BATCH;

  karu_config *cfg = NULL;
  EXPECT_OK(karu_config_create_empty(&cfg));
  EXPECT_OK(karu_client_create(cfg, &client));
  karu_config_free(cfg);
  if (!client) return 1;
  for (int o = 0; o < OBJECTS; o++) {
    char path[4096], url[1024];
    snprintf(path, sizeof path, "%s/obj-%d.bin", dir, o);
    v0[o] = load(path);
    snprintf(path, sizeof path, "%s/obj-%d.v1.bin", dir, o);
    v1[o] = load(path);
    /* Version 0's ETag, from the plain route (a chaos answer could be the next version). */
    snprintf(url, sizeof url, "%s/ok/csoak/obj-%d.bin?size=%u", base, o, OBJ_SIZE);
    karu_locator *plain = NULL;
    EXPECT_OK(karu_resolve(url, &plain));
    karu_object_info info = KARU_OBJECT_INFO_INIT;
    EXPECT_OK(karu_client_stat(client, plain, &info));
    karu_locator_free(plain);
    snprintf(etags[o], sizeof etags[o], "%s", info.etag);
    snprintf(url, sizeof url, "%s/chaos/csoak/obj-%d.bin?size=%u&seed=%" PRIu64 "&per_mille=%u",
             base, o, OBJ_SIZE, seed, per_mille);
    EXPECT_OK(karu_resolve(url, &locs[o]));
  }

  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, worker, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);

  printf("soak: reads=%" PRIu64 " ok=%" PRIu64 " new_version=%" PRIu64 " failed=%" PRIu64
         " http=%" PRIu64 " precondition=%" PRIu64 " other=%" PRIu64 " wrong_reads=%" PRIu64
         " wrong_bytes=%" PRIu64 " hung=%" PRIu64 " retries=%" PRIu64 " throttled=%" PRIu64
         " resumed=%" PRIu64 "\n",
         total.reads, total.ok, total.new_version, total.failed, total.http, total.precondition,
         total.other, total.wrong_reads, total.wrong_bytes, total.hung, total.retries,
         total.throttled, total.resumed);
  CHECK(total.reads == reads && total.ok + total.failed == reads, "every read completed once");
  CHECK(total.wrong_bytes == 0 && total.wrong_reads == 0, "no wrong byte");
  CHECK(total.other == 0, "failures only as the faults explain (HTTP, PRECONDITION)");
  CHECK(total.ok * 10 >= reads * 9, "at least 90 %% of the reads succeed");
  CHECK(per_mille == 0 || total.retries > 0, "faults were retried");

  for (int o = 0; o < OBJECTS; o++) {
    karu_locator_free(locs[o]);
    free(v0[o]);
    free(v1[o]);
  }
  karu_client_free(client);
  DONE();
}
