/* Every function of spec §1.7 on local files: argument errors (exact status and message
 * prefix), NULL cases, status strings, batches, stats, overrides, fetch, probes, providers.
 * Usage: api <scratch directory> */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

#define FILE_SIZE 100000
static unsigned char expected[FILE_SIZE];
static char path[4096];

static void make_file(const char *dir) {
  snprintf(path, sizeof path, "%s/api-data.bin", dir);
  for (size_t i = 0; i < FILE_SIZE; i++) expected[i] = (unsigned char)((i * 7 + i / 251) & 0xff);
  FILE *f = fopen(path, "wb");
  fwrite(expected, 1, FILE_SIZE, f);
  fclose(f);
}

static karu_client *new_client(void) {
  karu_config *cfg = NULL;
  karu_client *c = NULL;
  karu_config_create_empty(&cfg);
  karu_client_create(cfg, &c);
  karu_config_free(cfg);
  return c;
}

static void versions_and_errors(void) {
  CHECK(karu_api_version() == 1, "karu_api_version");
  CHECK(strlen(karu_version_string()) > 0, "karu_version_string '%s'", karu_version_string());
  CHECK(strlen(karu_http_backend()) > 0, "karu_http_backend '%s'", karu_http_backend());
  static const struct { karu_status s; const char *text; } table[] = {
      {KARU_OK, "ok"}, {KARU_END, "batch drained"}, {KARU_TIMEOUT, "timed out"},
      {KARU_ERR_URI, "malformed URI"}, {KARU_ERR_UNSUPPORTED, "unsupported virtual filesystem"},
      {KARU_ERR_INVALID, "invalid argument"}, {KARU_ERR_NOMEM, "out of memory"},
      {KARU_ERR_IO, "file error"}, {KARU_ERR_NETWORK, "network error"},
      {KARU_ERR_HTTP, "http error"}, {KARU_ERR_RANGE, "range past end of object"},
      {KARU_ERR_AUTH, "not authorized"}, {KARU_ERR_CANCELLED, "cancelled"},
      {KARU_ERR_CONFIG, "invalid configuration"}, {KARU_ERR_CREDENTIALS, "credentials unavailable"},
      {KARU_ERR_NOT_FOUND, "object not found"}, {KARU_ERR_PRECONDITION, "precondition failed"},
      {3, "unknown status"}, {-15, "unknown status"}, {1000, "unknown status"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    CHECK(strcmp(karu_status_string(table[i].s), table[i].text) == 0, "status_string(%d) = '%s'",
          table[i].s, karu_status_string(table[i].s));

  CHECK(karu_last_error()[0] == 0, "last error starts empty");
  EXPECT(karu_config_create(NULL), KARU_ERR_INVALID, "karu_config_create: null output");
  karu_clear_error();
  CHECK(karu_last_error()[0] == 0, "karu_clear_error empties it");
  EXPECT(karu_config_create(NULL), KARU_ERR_INVALID, "karu_config_create: null output");
  karu_config *cfg = NULL;
  EXPECT_OK(karu_config_create_empty(&cfg));
  CHECK(karu_last_error()[0] == 0, "a status call clears the last error");
  /* A 1000-byte unknown name gives a message cut to 511 bytes. */
  char name[1001];
  memset(name, 'X', 1000);
  name[1000] = 0;
  EXPECT(karu_config_set_option(cfg, name, "1"), KARU_ERR_CONFIG, "unknown Karu option 'XXX");
  CHECK(strlen(karu_last_error()) == 511, "last error capped at 511 bytes (%zu)",
        strlen(karu_last_error()));
  karu_config_free(cfg);
  /* Free functions and accessors do not clear it. */
  karu_free(NULL);
  CHECK(strlen(karu_last_error()) == 511, "karu_free does not clear the last error");
  karu_free(malloc(16));
}

static karu_status provider_cb(void *ud, karu_credentials_kind kind, const char *p,
                               karu_credentials *out) {
  (void)ud; (void)kind; (void)p;
  out->access_key_id = "id";
  return KARU_OK;
}
/* Release runs on whichever thread drops the last reference (an engine thread winding down,
 * possibly after karu_batch_free returned), hence atomics and a bounded wait. */
static atomic_int released[8];
static void release_cb(void *ud) { atomic_fetch_add(&released[(int)(intptr_t)ud], 1); }
static int wait_released(int i) {
  for (int waited = 0; atomic_load(&released[i]) == 0 && waited < 10000; waited += 10) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&released[i]);
}

static void config_functions(void) {
  karu_config *cfg = (karu_config *)1;
  EXPECT(karu_config_create_empty(NULL), KARU_ERR_INVALID, "karu_config_create_empty: null output");
  EXPECT_OK(karu_config_create(&cfg));
  CHECK(cfg != NULL, "karu_config_create gives a builder");
  karu_config_free(cfg);
  karu_config_free(NULL);
  EXPECT_OK(karu_config_create_empty(&cfg));

  EXPECT(karu_config_set_option(NULL, "KARU_CONCURRENCY", "1"), KARU_ERR_INVALID,
         "karu_config_set_option: null argument");
  EXPECT(karu_config_set_option(cfg, NULL, "1"), KARU_ERR_INVALID,
         "karu_config_set_option: null argument");
  EXPECT(karu_config_set_option(cfg, "", "1"), KARU_ERR_CONFIG, "option name is empty");
  EXPECT(karu_config_set_option(cfg, "NOPE", "1"), KARU_ERR_CONFIG, "unknown Karu option 'NOPE'");
  EXPECT_OK(karu_config_set_option(cfg, "KARU_CONCURRENCY", "7"));
  EXPECT_OK(karu_config_set_option(cfg, "karu_max_attempts", "3"));
  EXPECT_OK(karu_config_set_option(cfg, "KARU_COALESCE_GAP", "4096"));
  EXPECT_OK(karu_config_set_option(cfg, "KARU_IO_THREADS", NULL));

  EXPECT(karu_config_set_path_option(NULL, "/vsis3/b", "AWS_REGION", "x"), KARU_ERR_INVALID,
         "karu_config_set_path_option: null argument");
  EXPECT(karu_config_set_path_option(cfg, NULL, "AWS_REGION", "x"), KARU_ERR_INVALID,
         "karu_config_set_path_option: null argument");
  EXPECT(karu_config_set_path_option(cfg, "/vsis3/b", NULL, "x"), KARU_ERR_INVALID,
         "karu_config_set_path_option: null argument");
  EXPECT(karu_config_set_path_option(cfg, "", "AWS_REGION", "x"), KARU_ERR_CONFIG,
         "path-specific option has an empty prefix");
  EXPECT(karu_config_set_path_option(cfg, "/vsis3/b", "", "x"), KARU_ERR_CONFIG,
         "option name is empty");
  EXPECT(karu_config_set_path_option(cfg, "/vsis3/b", "NOPE", "x"), KARU_ERR_CONFIG,
         "unknown Karu option 'NOPE'");
  EXPECT(karu_config_set_path_option(cfg, "/vsis3/b", "KARU_CONCURRENCY", "1"), KARU_ERR_CONFIG,
         "KARU_CONCURRENCY is client-wide and cannot be path-specific");
  EXPECT_OK(karu_config_set_path_option(cfg, "s3://b/p", "AWS_REGION", "eu-west-1"));
  EXPECT_OK(karu_config_set_path_option(cfg, "s3://b/p", "AWS_REGION", NULL));

  /* Clients. */
  karu_client *client = (karu_client *)1;
  EXPECT(karu_client_create(NULL, &client), KARU_ERR_INVALID, "karu_client_create: null argument");
  CHECK(client == (karu_client *)1, "out not touched before the argument checks pass");
  EXPECT(karu_client_create(cfg, NULL), KARU_ERR_INVALID, "karu_client_create: null argument");
  EXPECT_OK(karu_client_create(cfg, &client));
  CHECK(karu_client_concurrency(client) == 7, "concurrency 7 (%d)", karu_client_concurrency(client));
  CHECK(karu_client_max_attempts(client) == 3, "max_attempts 3");
  CHECK(karu_client_coalesce_gap(client) == 4096, "coalesce_gap 4096");
  CHECK(karu_client_concurrency(NULL) == 0 && karu_client_max_attempts(NULL) == 0 &&
            karu_client_coalesce_gap(NULL) == 0,
        "client getters give 0 for NULL");

  int match = 5;
  EXPECT(karu_client_matches_config(NULL, cfg, &match), KARU_ERR_INVALID,
         "karu_client_matches_config: null argument");
  EXPECT(karu_client_matches_config(client, NULL, &match), KARU_ERR_INVALID,
         "karu_client_matches_config: null argument");
  EXPECT(karu_client_matches_config(client, cfg, NULL), KARU_ERR_INVALID,
         "karu_client_matches_config: null argument");
  EXPECT_OK(karu_client_matches_config(client, cfg, &match));
  CHECK(match == 1, "matches the config it was built from");
  EXPECT_OK(karu_config_set_option(cfg, "KARU_CONCURRENCY", "8"));
  EXPECT_OK(karu_client_matches_config(client, cfg, &match));
  CHECK(match == 0, "a changed config does not match");
  EXPECT_OK(karu_config_set_option(cfg, "KARU_CONCURRENCY", "many"));
  match = 5;
  EXPECT(karu_client_matches_config(client, cfg, &match), KARU_ERR_CONFIG, "KARU_CONCURRENCY");
  CHECK(match == 0, "out_match is 0 after a failure");
  karu_client *bad = (karu_client *)1;
  EXPECT(karu_client_create(cfg, &bad), KARU_ERR_CONFIG, "KARU_CONCURRENCY");
  CHECK(bad == NULL, "out is NULL after a failed create");
  karu_client_free(client);
  karu_client_free(NULL);
  karu_config_free(cfg);

  /* Credentials providers: registration rules and release exactly once. */
  EXPECT_OK(karu_config_create_empty(&cfg));
  EXPECT(karu_config_set_credentials_provider(NULL, 1, provider_cb, NULL, NULL), KARU_ERR_INVALID,
         "karu_config_set_credentials_provider: null config");
  EXPECT(karu_config_set_credentials_provider(cfg, 0, provider_cb, NULL, NULL), KARU_ERR_CONFIG,
         "unknown credentials kind");
  EXPECT(karu_config_set_credentials_provider(cfg, 5, provider_cb, (void *)7, release_cb),
         KARU_ERR_CONFIG, "unknown credentials kind");
  CHECK(released[7] == 0, "a rejected registration is not released");
  EXPECT(karu_config_set_credentials_provider(cfg, 1, NULL, (void *)1, NULL), KARU_ERR_CONFIG,
         "clearing a credentials provider requires null user_data and release");
  EXPECT(karu_config_set_credentials_provider(cfg, 1, NULL, NULL, release_cb), KARU_ERR_CONFIG,
         "clearing a credentials provider requires null user_data and release");
  EXPECT_OK(karu_config_set_credentials_provider(cfg, 1, NULL, NULL, NULL));
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_AWS, provider_cb, (void *)1, release_cb));
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_AWS, provider_cb, (void *)2, release_cb));
  CHECK(released[1] == 1, "replacing a provider releases the old one once");
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_AWS, NULL, NULL, NULL));
  CHECK(released[2] == 1, "clearing a provider releases it once");
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_GCS, provider_cb, (void *)3, release_cb));
  EXPECT_OK(karu_client_create(cfg, &client));
  karu_config_free(cfg);
  CHECK(released[3] == 0, "the client snapshot keeps the provider");
  karu_locator *loc = NULL;
  EXPECT_OK(karu_resolve(path, &loc));
  unsigned char buf[10];
  karu_req req = {loc, 0, 10, buf, NULL, NULL};
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit(client, &req, 1, &batch));
  karu_client_free(client);
  karu_locator_free(loc);
  CHECK(released[3] == 0, "a live batch keeps the provider (through its engine)");
  karu_done done;
  EXPECT_OK(karu_batch_next(batch, &done, -1));
  karu_batch_free(batch);
  CHECK(wait_released(3) == 1, "released once when the last reference goes (%d)",
        atomic_load(&released[3]));
  EXPECT_OK(karu_config_create_empty(&cfg));
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_AZURE, provider_cb, (void *)4, NULL));
  EXPECT_OK(karu_config_set_credentials_provider(cfg, KARU_CREDENTIALS_SOURCE, provider_cb, (void *)5, release_cb));
  karu_config_free(cfg);
  CHECK(released[5] == 1, "freeing the builder releases its provider once");
  CHECK(released[1] == 1 && released[2] == 1 && released[3] == 1, "no second release");
}

static void locators(void) {
  karu_locator *loc = (karu_locator *)1;
  EXPECT(karu_resolve(NULL, &loc), KARU_ERR_INVALID, "karu_resolve: null argument");
  CHECK(loc == (karu_locator *)1, "out untouched on a null argument");
  EXPECT(karu_resolve("x", NULL), KARU_ERR_INVALID, "karu_resolve: null argument");
  EXPECT(karu_resolve("", &loc), KARU_ERR_URI, "");
  CHECK(loc == NULL && strlen(karu_last_error()) > 0, "empty URI: URI with a message '%s'",
        karu_last_error());
  EXPECT(karu_resolve("/vsinope/x", &loc), KARU_ERR_UNSUPPORTED, "");
  CHECK(strlen(karu_last_error()) > 0, "unknown handler message '%s'", karu_last_error());
  EXPECT_OK(karu_resolve("s3://bucket/key", &loc));
  CHECK(strcmp(karu_locator_uri(loc), "/vsis3/bucket/key") == 0, "canonical identity '%s'",
        karu_locator_uri(loc));
  CHECK(karu_locator_is_remote(loc) == 1, "s3 is remote");
  CHECK(karu_locator_window_offset(loc) == 0 && karu_locator_window_length(loc) == KARU_TO_END,
        "unbounded window");
  karu_locator_free(loc);
  EXPECT_OK(karu_resolve("/vsisubfile/5_10,s3://bucket/key#bytes=100-199", &loc));
  CHECK(karu_locator_window_offset(loc) == 105 && karu_locator_window_length(loc) == 10,
        "subfile window offset 105 length 10");
  karu_locator_free(loc);
  EXPECT_OK(karu_resolve(path, &loc));
  CHECK(karu_locator_is_remote(loc) == 0, "a local file is not remote");
  CHECK(strstr(karu_locator_uri(loc), "api-data.bin") != NULL, "local identity '%s'",
        karu_locator_uri(loc));
  karu_locator_free(loc);
  karu_locator_free(NULL);
  CHECK(strcmp(karu_locator_uri(NULL), "") == 0 && karu_locator_is_remote(NULL) == 0 &&
            karu_locator_window_offset(NULL) == 0 && karu_locator_window_length(NULL) == 0,
        "locator accessors on NULL");
}

static void probes(karu_client *client) {
  karu_locator *loc = NULL, *win = NULL;
  karu_resolve(path, &loc);
  char wpath[4200];
  snprintf(wpath, sizeof wpath, "%s#bytes=10-", path);
  karu_resolve(wpath, &win);
  uint64_t size = 0;
  EXPECT(karu_client_size(NULL, loc, &size), KARU_ERR_INVALID, "karu_client_size: null argument");
  EXPECT(karu_client_size(client, NULL, &size), KARU_ERR_INVALID, "karu_client_size: null argument");
  EXPECT(karu_client_size(client, loc, NULL), KARU_ERR_INVALID, "karu_client_size: null argument");
  EXPECT_OK(karu_client_size(client, loc, &size));
  CHECK(size == FILE_SIZE, "size %llu", (unsigned long long)size);
  EXPECT_OK(karu_client_size(client, win, &size));
  CHECK(size == FILE_SIZE - 10, "size past the window offset");

  karu_object_info info = KARU_OBJECT_INFO_INIT;
  EXPECT(karu_client_stat(NULL, loc, &info), KARU_ERR_INVALID, "karu_client_stat: null argument");
  EXPECT(karu_client_stat(client, NULL, &info), KARU_ERR_INVALID, "karu_client_stat: null argument");
  EXPECT(karu_client_stat(client, loc, NULL), KARU_ERR_INVALID, "karu_client_stat: null argument");
  info.struct_size = sizeof(size_t);
  EXPECT(karu_client_stat(client, loc, &info), KARU_ERR_INVALID,
         "karu_client_stat: struct_size is too small");
  info.struct_size = sizeof info;
  memset(info.etag, 'z', sizeof info.etag);
  EXPECT_OK(karu_client_stat(client, loc, &info));
  CHECK(info.size == FILE_SIZE && info.etag[0] == 0, "stat: size, empty ETag for a local file");
  struct { size_t struct_size; uint64_t size; uint64_t canary; } small = {16, 0, 0xabcdef};
  EXPECT_OK(karu_client_stat(client, loc, (karu_object_info *)&small));
  CHECK(small.size == FILE_SIZE && small.canary == 0xabcdef, "stat through a 16-byte struct");

  unsigned char head[64], tail[64];
  EXPECT(karu_client_read_ends(NULL, loc, head, 4, tail, 4, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: null argument");
  EXPECT(karu_client_read_ends(client, NULL, head, 4, tail, 4, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: null argument");
  EXPECT(karu_client_read_ends(client, loc, head, 4, tail, 4, NULL), KARU_ERR_INVALID,
         "karu_client_read_ends: null argument");
  EXPECT(karu_client_read_ends(client, loc, NULL, 4, tail, 4, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: null argument");
  EXPECT(karu_client_read_ends(client, loc, head, 4, NULL, 4, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: null argument");
  info.struct_size = 8;
  EXPECT(karu_client_read_ends(client, loc, head, 4, tail, 4, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: struct_size is too small");
  info.struct_size = sizeof info;
  EXPECT(karu_client_read_ends(client, loc, head, KARU_TO_END, tail, 4, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: lengths must be finite");
  EXPECT(karu_client_read_ends(client, loc, head, 4, tail, KARU_TO_END, &info), KARU_ERR_INVALID,
         "karu_client_read_ends: lengths must be finite");
  EXPECT_OK(karu_client_read_ends(client, loc, NULL, 0, NULL, 0, &info));
  CHECK(info.size == FILE_SIZE, "read_ends with both lengths 0 is stat");
  small.size = 0;
  EXPECT_OK(karu_client_read_ends(client, loc, head, 64, tail, 64, (karu_object_info *)&small));
  CHECK(small.size == FILE_SIZE && memcmp(head, expected, 64) == 0 &&
            memcmp(tail, expected + FILE_SIZE - 64, 64) == 0 && small.canary == 0xabcdef,
        "read_ends head and tail through a 16-byte struct");

  /* Download: the argument checks of spec §6.1, in order. */
  karu_download_options o = KARU_DOWNLOAD_OPTIONS_INIT;
  karu_download_result r = KARU_DOWNLOAD_RESULT_INIT;
  char dest[4200];
  snprintf(dest, sizeof dest, "%s.download", path);
  EXPECT(karu_client_download(NULL, loc, dest, NULL, NULL), KARU_ERR_INVALID,
         "karu_client_download: null argument");
  EXPECT(karu_client_download(client, NULL, dest, NULL, NULL), KARU_ERR_INVALID,
         "karu_client_download: null argument");
  EXPECT(karu_client_download(client, loc, NULL, NULL, NULL), KARU_ERR_INVALID,
         "karu_client_download: null argument");
  EXPECT(karu_client_download(client, loc, "", NULL, NULL), KARU_ERR_INVALID,
         "karu_client_download: destination is empty");
  r.struct_size = 8;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: result structure is too small");
  r.struct_size = sizeof r;
  o.struct_size = 8;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: download options structure is too small");
  o.struct_size = sizeof o;
  o.overwrite = 2;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: overwrite must be zero or one");
  o.overwrite = 0;
  o.chunk_size = 0;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: chunk_size must be nonzero and finite");
  o.chunk_size = UINT64_MAX;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: chunk_size must be nonzero and finite");
  o.chunk_size = 1 << 20;
  o.parallelism = 0;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: parallelism is outside the supported range");
  o.parallelism = UINT64_C(1) << 62;
  EXPECT(karu_client_download(client, loc, dest, &o, &r), KARU_ERR_INVALID,
         "karu_client_download: chunk_size times parallelism is too large");
  o.parallelism = 0;
  o.struct_size = 16; /* parallelism outside struct_size: default */
  karu_status s = karu_client_download(client, loc, dest, &o, &r);
  CHECK(s != KARU_ERR_INVALID, "fields beyond struct_size take their defaults (%d '%s')", s,
        karu_last_error());
  CHECK(s == KARU_OK && r.size == FILE_SIZE && r.downloaded == FILE_SIZE && r.etag[0] == 0,
        "local download: %d '%s', size %llu", s, karu_last_error(), (unsigned long long)r.size);
  static unsigned char back[FILE_SIZE];
  FILE *f = fopen(dest, "rb");
  CHECK(f && fread(back, 1, FILE_SIZE, f) == FILE_SIZE && memcmp(back, expected, FILE_SIZE) == 0,
        "the downloaded file has the object's bytes");
  if (f) fclose(f);
  EXPECT(karu_client_download(client, loc, dest, NULL, NULL), KARU_ERR_IO, dest);
  CHECK(strstr(karu_last_error(), "destination already exists") != NULL,
        "no overwrite by default: '%s'", karu_last_error());
  remove(dest);
  EXPECT_OK(karu_client_download(client, win, dest, NULL, NULL));
  f = fopen(dest, "rb");
  CHECK(f && fread(back, 1, FILE_SIZE, f) == FILE_SIZE - 10 && memcmp(back, expected + 10, FILE_SIZE - 10) == 0,
        "a window downloads exactly its bytes");
  if (f) fclose(f);
  remove(dest);
  karu_locator_free(loc);
  karu_locator_free(win);
}

static void submit_checks(karu_client *client, karu_locator *loc) {
  unsigned char buf[16];
  karu_batch *batch = (karu_batch *)1;
  karu_req ok = {loc, 0, 16, buf, NULL, NULL};
  EXPECT(karu_client_submit(NULL, &ok, 1, &batch), KARU_ERR_INVALID, "karu_client_submit: null argument");
  CHECK(batch == (karu_batch *)1, "out untouched on a null argument");
  EXPECT(karu_client_submit(client, &ok, 1, NULL), KARU_ERR_INVALID, "karu_client_submit: null argument");
  EXPECT(karu_client_submit(client, NULL, 1, &batch), KARU_ERR_INVALID, "karu_client_submit: null argument");
  karu_req reqs[2] = {ok, ok};
  reqs[1].locator = NULL;
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1 has no locator");
  CHECK(batch == NULL, "out nulled after the argument checks");
  reqs[1] = ok;
  reqs[1].length = 0;
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID, "karu_client_submit: request 1 is empty");
  reqs[1].length = KARU_TO_END;
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1 does not have a finite length");
  reqs[1].length = 16;
  reqs[1].if_match = "\"a\"\r\nX: y";
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1 has an invalid ETag");
  reqs[1].if_match = "\"a\nb\"";
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID,
         "karu_client_submit: request 1 has an invalid ETag");
  reqs[0].length = 0; /* the first bad request is reported */
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_INVALID, "karu_client_submit: request 0 is empty");

  /* A library buffer that cannot be allocated fails the whole submit with NOMEM, and the
   * buffers already allocated for earlier requests are released (valgrind checks). */
  reqs[0] = ok;
  reqs[0].buffer = NULL;
  reqs[1] = ok;
  reqs[1].buffer = NULL;
  reqs[1].length = UINT64_C(1) << 62;
  EXPECT(karu_client_submit(client, reqs, 2, &batch), KARU_ERR_NOMEM,
         "karu_client_submit: cannot allocate");
  CHECK(batch == NULL, "no batch after NOMEM");

  /* count == 0: a batch that ends at once (NULL requests allowed). */
  EXPECT_OK(karu_client_submit(client, NULL, 0, &batch));
  karu_done d = {(void *)9, 9, 9, (void *)9};
  EXPECT(karu_batch_next(batch, &d, 0), KARU_END, "");
  EXPECT(karu_batch_next(batch, &d, -1), KARU_END, "");
  CHECK(d.tag == (void *)9 && d.status == 9 && d.got == 9, "END leaves out unchanged");
  EXPECT(karu_batch_next(NULL, &d, 0), KARU_ERR_INVALID, "karu_batch_next: null argument");
  EXPECT(karu_batch_next(batch, NULL, 0), KARU_ERR_INVALID, "karu_batch_next: null argument");
  karu_batch_stats st = KARU_BATCH_STATS_INIT;
  EXPECT(karu_batch_get_stats(NULL, &st), KARU_ERR_INVALID, "karu_batch_get_stats: null argument");
  EXPECT(karu_batch_get_stats(batch, NULL), KARU_ERR_INVALID, "karu_batch_get_stats: null argument");
  st.struct_size = sizeof(size_t);
  EXPECT(karu_batch_get_stats(batch, &st), KARU_ERR_INVALID, "karu_batch_get_stats: struct_size is too small");
  karu_batch_free(batch);
  karu_batch_free(NULL);

  /* submit_with option checks. */
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  EXPECT(karu_client_submit_with(NULL, &ok, 1, &so, &batch), KARU_ERR_INVALID,
         "karu_client_submit_with: null argument");
  so.struct_size = sizeof(size_t);
  EXPECT(karu_client_submit_with(client, &ok, 1, &so, &batch), KARU_ERR_INVALID,
         "karu_client_submit_with: submit options structure is too small");
  so.struct_size = sizeof so;
  so.coalesce_limit = 0;
  EXPECT(karu_client_submit_with(client, &ok, 1, &so, &batch), KARU_ERR_INVALID,
         "karu_client_submit_with: coalesce_limit must be at least 1");
  so.coalesce_limit = KARU_INHERIT;
  so.coalesce_parts = 0;
  EXPECT(karu_client_submit_with(client, &ok, 1, &so, &batch), KARU_ERR_INVALID,
         "karu_client_submit_with: coalesce_parts is outside the supported range");
  so.coalesce_parts = KARU_INHERIT;
  so.coalesce_amplification = 0;
  EXPECT(karu_client_submit_with(client, &ok, 1, &so, &batch), KARU_ERR_INVALID,
         "karu_client_submit_with: coalesce_amplification must be at least 1");
  so.struct_size = 16; /* the bad amplification lies past struct_size: ignored */
  EXPECT_OK(karu_client_submit_with(client, &ok, 1, &so, &batch));
  karu_batch_free(batch);
  EXPECT_OK(karu_client_submit_with(client, &ok, 1, NULL, &batch));
  karu_batch_free(batch);

  /* fetch checks. */
  EXPECT(karu_client_fetch(NULL, &ok, 1), KARU_ERR_INVALID, "karu_client_fetch: null argument");
  EXPECT(karu_client_fetch(client, NULL, 1), KARU_ERR_INVALID, "karu_client_fetch: null argument");
  EXPECT_OK(karu_client_fetch(client, NULL, 0));
  reqs[0] = ok;
  reqs[0].length = 0;
  reqs[1] = ok;
  reqs[1].buffer = NULL;
  EXPECT(karu_client_fetch(client, reqs, 2), KARU_ERR_INVALID,
         "karu_client_fetch: request 1 has no destination buffer");
  reqs[1].buffer = buf;
  EXPECT(karu_client_fetch(client, reqs, 2), KARU_ERR_INVALID, "karu_client_fetch: request 0 is empty");
  EXPECT(karu_client_fetch_with(NULL, &ok, 1, NULL), KARU_ERR_INVALID, "karu_client_fetch_with: null argument");
  so = (karu_submit_options)KARU_SUBMIT_OPTIONS_INIT;
  so.coalesce_limit = 0;
  EXPECT(karu_client_fetch_with(client, &ok, 1, &so), KARU_ERR_INVALID,
         "karu_client_fetch_with: coalesce_limit must be at least 1");
}

static void batches(karu_client *client) {
  karu_locator *loc = NULL;
  karu_resolve(path, &loc);
  enum { N = 6 };
  static unsigned char mine[3][1000];
  karu_req reqs[N];
  uint64_t offs[N] = {0, 5000, 5500, 90000, 99990, 42};
  for (int i = 0; i < N; i++) {
    reqs[i] = (karu_req){loc, offs[i], 1000, i < 3 ? mine[i] : NULL, (void *)(intptr_t)(100 + i), NULL};
  }
  reqs[5].if_match = "\"v1\""; /* an ETag on a local file: an immediate failure */
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit(client, reqs, N, &batch));
  karu_locator_free(loc); /* the batch keeps its own copy */
  int seen[N] = {0};
  karu_done d;
  karu_status s;
  while ((s = karu_batch_next(batch, &d, -1)) == KARU_OK) {
    int i = (int)((intptr_t)d.tag - 100);
    CHECK(i >= 0 && i < N && !seen[i], "completion tag %d", i);
    if (i < 0 || i >= N) continue;
    seen[i] = 1;
    if (i < 3) CHECK(d.buffer == mine[i], "caller buffer returned for %d", i);
    else CHECK(d.buffer != NULL, "library buffer for %d", i);
    if (i == 4) {
      CHECK(d.status == KARU_ERR_RANGE && d.got == 10 &&
                memcmp(d.buffer, expected + 99990, 10) == 0 && starts_with(karu_last_error(), path),
            "read past the end: RANGE, got the 10-byte prefix, message '%s'", karu_last_error());
    } else if (i == 5) {
      CHECK(d.status == KARU_ERR_UNSUPPORTED && d.got == 0, "ETag on a local file: %d '%s'",
            d.status, karu_last_error());
    } else {
      CHECK(d.status == KARU_OK && d.got == 1000 && memcmp(d.buffer, expected + offs[i], 1000) == 0,
            "read %d: ok, 1000 correct bytes", i);
    }
    if (i >= 3) karu_free(d.buffer);
  }
  CHECK(s == KARU_END, "drained with END");
  CHECK(seen[0] && seen[1] && seen[2] && seen[3] && seen[4] && seen[5], "every read completed once");
  EXPECT(karu_batch_next(batch, &d, 10), KARU_END, "");
  karu_batch_stats st = KARU_BATCH_STATS_INIT;
  EXPECT_OK(karu_batch_get_stats(batch, &st));
  CHECK(st.requested_bytes == 5000 && st.transfers >= 1 && st.transfers_finished == st.transfers &&
            st.received_bytes >= 3510 && st.retries == 0 && st.new_connections == 0,
        "stats: requested %llu transfers %llu/%llu received %llu",
        (unsigned long long)st.requested_bytes, (unsigned long long)st.transfers_finished,
        (unsigned long long)st.transfers, (unsigned long long)st.received_bytes);
  struct { size_t struct_size; uint64_t transfers; uint64_t canary; } small = {16, 0, 77};
  EXPECT_OK(karu_batch_get_stats(batch, (karu_batch_stats *)&small));
  CHECK(small.transfers == st.transfers && small.canary == 77, "stats through a 16-byte struct");
  karu_batch_free(batch);

  /* Overrides: two touching reads merge by default (local files never skip bytes), not with
   * gap 0. */
  karu_resolve(path, &loc);
  static unsigned char a[100], b[100];
  karu_req two[2] = {{loc, 0, 100, a, NULL, NULL}, {loc, 100, 100, b, NULL, NULL}};
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  EXPECT_OK(karu_client_submit_with(client, two, 2, &so, &batch));
  while (karu_batch_next(batch, &d, -1) == KARU_OK) {}
  karu_batch_get_stats(batch, &st);
  CHECK(st.transfers == 1, "inherited gap merges two touching reads (%llu)", (unsigned long long)st.transfers);
  karu_batch_free(batch);
  so.coalesce_gap = 0;
  EXPECT_OK(karu_client_submit_with(client, two, 2, &so, &batch));
  while (karu_batch_next(batch, &d, -1) == KARU_OK) {}
  karu_batch_get_stats(batch, &st);
  CHECK(st.transfers == 2, "gap 0 disables merging (%llu)", (unsigned long long)st.transfers);
  karu_batch_free(batch);
  so = (karu_submit_options)KARU_SUBMIT_OPTIONS_INIT;
  so.coalesce_parts = 1;
  EXPECT_OK(karu_client_submit_with(client, two, 2, &so, &batch));
  while (karu_batch_next(batch, &d, -1) == KARU_OK) {}
  karu_batch_get_stats(batch, &st);
  CHECK(st.transfers == 2, "coalesce_parts 1 keeps reads apart");
  karu_batch_free(batch);

  /* fetch and fetch_with. */
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  EXPECT_OK(karu_client_fetch(client, two, 2));
  CHECK(memcmp(a, expected, 100) == 0 && memcmp(b, expected + 100, 100) == 0, "fetch fills buffers");
  memset(a, 0, sizeof a);
  EXPECT_OK(karu_client_fetch_with(client, two, 2, &so));
  CHECK(memcmp(a, expected, 100) == 0, "fetch_with fills buffers");
  two[1].offset = FILE_SIZE - 50;
  EXPECT(karu_client_fetch(client, two, 2), KARU_ERR_RANGE, path);

  /* Free with undrained library buffers (valgrind checks nothing leaks). */
  karu_req lib[3] = {{loc, 0, 4096, NULL, NULL, NULL}, {loc, 8192, 4096, NULL, NULL, NULL},
                     {loc, 50000, 100, NULL, NULL, NULL}};
  EXPECT_OK(karu_client_submit(client, lib, 3, &batch));
  EXPECT_OK(karu_batch_next(batch, &d, -1));
  karu_free(d.buffer);
  karu_batch_free(batch);
  /* Free without draining at all. */
  EXPECT_OK(karu_client_submit(client, lib, 3, &batch));
  karu_batch_free(batch);
  CHECK(1, "freeing undrained batches");
  karu_locator_free(loc);
}

/* Many threads drain one batch: each completion once, every thread sees END. */
struct drain { karu_batch *batch; int count; int end; };
static void *drainer(void *p) {
  struct drain *dr = p;
  karu_done d;
  karu_status s;
  while ((s = karu_batch_next(dr->batch, &d, 50)) == KARU_OK || s == KARU_TIMEOUT) {
    if (s != KARU_OK) continue;
    uint64_t off = (uint64_t)(intptr_t)d.tag;
    if (d.status == KARU_OK && d.got == 512 && memcmp(d.buffer, expected + off, 512) == 0) dr->count++;
    karu_free(d.buffer);
  }
  dr->end = (s == KARU_END);
  return NULL;
}

static void threads(karu_client *client) {
  karu_locator *loc = NULL;
  karu_resolve(path, &loc);
  enum { N = 300, T = 4 };
  static karu_req reqs[N];
  for (int i = 0; i < N; i++) {
    uint64_t off = (uint64_t)i * 331;
    reqs[i] = (karu_req){loc, off, 512, NULL, (void *)(intptr_t)off, NULL};
  }
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  so.coalesce_gap = 0;
  karu_batch *batch = NULL;
  EXPECT_OK(karu_client_submit_with(client, reqs, N, &so, &batch));
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
  CHECK(total == N, "%d threads drained %d of %d good completions", T, total, N);
  CHECK(ends == T, "every thread saw END");
  karu_batch_free(batch);
  karu_locator_free(loc);
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: api <dir>\n"); return 2; }
  make_file(argv[1]);
  versions_and_errors();
  config_functions();
  locators();
  karu_client *client = new_client();
  karu_locator *loc = NULL;
  karu_resolve(path, &loc);
  probes(client);
  submit_checks(client, loc);
  karu_locator_free(loc);
  batches(client);
  threads(client);
  karu_client_free(client);
  DONE();
}
