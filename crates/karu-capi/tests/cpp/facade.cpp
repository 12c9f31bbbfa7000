// The C++ facade (karu/karu.hpp) over libkaru, compiled as C++17 and as C++23: every call of
// spec §2, with exact statuses, message prefixes and every byte, on a local file and over
// HTTP against the test kit's range server.
// Usage: facade <base URL> <local copy of obj.bin> <scratch directory>
#include <karu/karu.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "../c/check.h"

#if defined(__cpp_lib_expected) && __cpp_lib_expected >= 202202L
static_assert(std::is_same_v<karu::Result<int>, std::expected<int, karu::Error>>,
              "C++23: Result is std::expected");
#endif
#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L
static_assert(std::is_same_v<karu::Span<std::byte>, std::span<std::byte>>, "C++20: Span is std::span");
#endif
static_assert(!std::is_copy_constructible_v<karu::Client> && std::is_nothrow_move_constructible_v<karu::Client>,
              "Client is move-only");
static_assert(!std::is_copy_constructible_v<karu::Config> && !std::is_copy_constructible_v<karu::Object> &&
                  !std::is_copy_constructible_v<karu::Batch>,
              "handles are move-only");

namespace {

constexpr std::uint64_t SIZE = 1 << 20;
std::vector<std::byte> expected;
std::string base, local_path, scratch;

// A failed Result with this status and a message starting with `prefix`.
#define EXPECT_ERR(expr, st, prefix)                                                           \
  do {                                                                                         \
    auto r_ = (expr);                                                                          \
    CHECK(!r_.has_value() && r_.error().status == (st) &&                                      \
              starts_with(r_.error().message.c_str(), (prefix)),                               \
          "%s -> %d '%s' (want %d '%s')", #expr, r_ ? 0 : r_.error().status,                   \
          r_ ? "" : r_.error().message.c_str(), (int)(st), (prefix));                          \
  } while (0)

#define EXPECT_VALUE(expr)                                                                     \
  do {                                                                                         \
    auto r_ = (expr);                                                                          \
    CHECK(r_.has_value(), "%s succeeds ('%s')", #expr, r_ ? "" : r_.error().message.c_str()); \
  } while (0)

bool same(const std::byte* got, std::uint64_t offset, std::size_t n) {
  return offset + n <= SIZE && std::memcmp(got, expected.data() + offset, n) == 0;
}

karu::Object parse(const std::string& uri) {
  auto o = karu::Object::parse(uri);
  CHECK(o.has_value(), "parse %s", uri.c_str());
  if (!o) std::exit(1);
  return std::move(*o);
}

karu::Client make_client() {
  auto cfg = karu::Config::empty();
  CHECK(cfg && cfg->set("KARU_MAX_ATTEMPTS", "2"), "an empty config with KARU_MAX_ATTEMPTS=2");
  auto c = karu::Client::create(*cfg);
  CHECK(c.has_value(), "Client::create");
  if (!c) std::exit(1);
  return std::move(*c);
}

int released = 0;
karu_status no_credentials(void*, karu_credentials_kind, const char*, karu_credentials*) {
  return KARU_ERR_CREDENTIALS;
}
void release(void* counter) { ++*static_cast<int*>(counter); }

void config() {
  auto env = karu::Config::from_environment();
  CHECK(env.has_value() && env->native_handle() != nullptr, "Config::from_environment");
  auto made = karu::Config::empty();
  CHECK(made.has_value(), "Config::empty");
  karu::Config cfg = std::move(*made);
  CHECK(made->native_handle() == nullptr && cfg.native_handle() != nullptr, "a moved-from Config is empty");
  EXPECT_ERR(cfg.set("NOPE_OPTION", "1"), KARU_ERR_CONFIG, "unknown Karu option 'NOPE_OPTION'");
  EXPECT_ERR(cfg.set("", "1"), KARU_ERR_CONFIG, "option name is empty");
  EXPECT_VALUE(cfg.set("karu_max_attempts", "7"));
  EXPECT_VALUE(cfg.unset("KARU_MAX_ATTEMPTS"));
  EXPECT_ERR(cfg.set_path("", "AWS_REGION", "x"), KARU_ERR_CONFIG,
             "path-specific option has an empty prefix");
  EXPECT_ERR(cfg.set_path("s3://bucket/", "KARU_MAX_ATTEMPTS", "3"), KARU_ERR_CONFIG,
             "KARU_MAX_ATTEMPTS is client-wide and cannot be path-specific");
  EXPECT_VALUE(cfg.set_path("s3://bucket/", "AWS_REGION", "eu-west-1"));
  EXPECT_VALUE(cfg.unset_path("s3://bucket/", "AWS_REGION"));
  EXPECT_ERR(cfg.set_credentials_provider(9, no_credentials, nullptr), KARU_ERR_CONFIG,
             "unknown credentials kind");
  EXPECT_ERR(cfg.set_credentials_provider(KARU_CREDENTIALS_AWS, nullptr, &released), KARU_ERR_CONFIG,
             "clearing a credentials provider requires null user_data and release");
  EXPECT_VALUE(cfg.set_credentials_provider(KARU_CREDENTIALS_GCS, no_credentials, &released, release));
  EXPECT_VALUE(cfg.clear_credentials_provider(KARU_CREDENTIALS_AZURE));
  {
    auto client = karu::Client::create(cfg);
    CHECK(client.has_value(), "a client from a config with a provider");
    cfg = std::move(*karu::Config::empty());
    CHECK(released == 0, "the client keeps the provider registered (%d)", released);
  }
  CHECK(released == 1, "release ran once when nothing referenced the provider (%d)", released);
  EXPECT_VALUE(cfg.set("KARU_MAX_ATTEMPTS", "many"));
  EXPECT_ERR(karu::Client::create(cfg), KARU_ERR_CONFIG, "");
  auto bad = karu::Client::create(cfg);
  CHECK(!bad && bad.error().message.find("KARU_MAX_ATTEMPTS") != std::string::npos,
        "a bad value is named: '%s'", bad ? "" : bad.error().message.c_str());
}

void objects() {
  EXPECT_ERR(karu::Object::parse("/vsinope/x"), KARU_ERR_UNSUPPORTED, "");
  EXPECT_ERR(karu::Object::parse(""), KARU_ERR_URI, "");
  karu::Object window = parse(local_path + "#bytes=10-109");
  CHECK(!window.is_remote() && window.window_offset() == 10 && window.window_length() == 100,
        "a local window: offset %llu length %llu", (unsigned long long)window.window_offset(),
        (unsigned long long)window.window_length());
  CHECK(window.uri() == karu_locator_uri(window.native_handle()) && !window.uri().empty(),
        "uri() is the canonical identity '%.*s'", (int)window.uri().size(), window.uri().data());
  karu::Object remote = parse(base + "/ok/obj.bin");
  CHECK(remote.is_remote() && remote.window_offset() == 0 && remote.window_length() == KARU_TO_END,
        "a remote object, unbounded");
  karu::Object moved = std::move(remote);
  CHECK(remote.native_handle() == nullptr && moved.is_remote(), "a moved-from Object is empty");
}

void client_getters(const karu::Client& c) {
  CHECK(c.max_attempts() == 2 && c.concurrency() == karu_client_concurrency(c.native_handle()) &&
            c.concurrency() > 0 && c.coalesce_gap() == karu_client_coalesce_gap(c.native_handle()),
        "getters: attempts %d concurrency %d gap %llu", c.max_attempts(), c.concurrency(),
        (unsigned long long)c.coalesce_gap());
  auto same_cfg = karu::Config::empty();
  CHECK(same_cfg && same_cfg->set("KARU_MAX_ATTEMPTS", "2"), "a second config");
  auto yes = c.matches(*same_cfg);
  CHECK(yes.has_value() && *yes, "matches the same settings");
  CHECK(same_cfg->set("KARU_MAX_ATTEMPTS", "3"), "change it");
  auto no = c.matches(*same_cfg);
  CHECK(no.has_value() && !*no, "does not match other settings");
}

void probes(const karu::Client& c, const karu::Object& o, bool remote) {
  const char* what = remote ? "http" : "local";
  auto size = c.size(o);
  CHECK(size && *size == SIZE, "%s size", what);
  auto info = c.stat(o);
  karu_object_info direct = KARU_OBJECT_INFO_INIT;
  karu_client_stat(c.native_handle(), o.native_handle(), &direct);
  CHECK(info && info->size == SIZE && info->etag == direct.etag && (info->etag.empty() != remote) &&
            (!remote || info->etag.front() == '"'),
        "%s stat: size %llu etag '%s'", what, info ? (unsigned long long)info->size : 0ULL,
        info ? info->etag.c_str() : "");
  std::vector<std::byte> head(100), tail(50);
  auto ends = c.read_ends(o, head, tail);
  CHECK(ends && ends->size == SIZE && ends->etag == direct.etag && same(head.data(), 0, 100) &&
            same(tail.data(), SIZE - 50, 50),
        "%s read_ends: both ends exact", what);
  auto only = c.read_ends(o, {}, {});
  CHECK(only && only->size == SIZE, "%s read_ends with empty spans is a stat", what);
}

void reads(const karu::Client& c, const karu::Object& o, bool remote) {
  const char* what = remote ? "http" : "local";
  auto bytes = c.read(o, 1000, 5000);
  CHECK(bytes && bytes->size() == 5000 && same(bytes->data(), 1000, 5000), "%s read: 5000 exact bytes", what);
  auto past = c.read(o, SIZE - 10, 20);
  CHECK(!past && past.error().status == KARU_ERR_RANGE, "%s read past the end: RANGE '%s'", what,
        past ? "" : past.error().message.c_str());
  auto none = c.read(o, 0, 0);
  CHECK(none && none->empty(), "%s read of 0 bytes: empty", what);
  std::byte into[64];
  EXPECT_VALUE(c.read_into(o, 4096, into));
  CHECK(same(into, 4096, sizeof into), "%s read_into a C array: exact bytes", what);
  CHECK(c.read_into(o, 0, karu::writable_bytes(into, 8)) && same(into, 0, 8), "%s read_into writable_bytes", what);
  if (!remote) return;
  auto info = c.stat(o);
  auto pinned = c.read(o, 300, 700, info ? info->etag : std::string());
  CHECK(pinned && same(pinned->data(), 300, 700), "http read pinned to its ETag");
  EXPECT_ERR(c.read(o, 300, 700, "\"other\""), KARU_ERR_PRECONDITION, base.c_str());
  EXPECT_ERR(c.read_into(o, 0, into, "\"other\""), KARU_ERR_PRECONDITION, base.c_str());
}

void missing(const karu::Client& c) {
  karu::Object gone = parse(scratch + "/no-such-file.bin");
  std::byte buf[10];
  EXPECT_VALUE(c.read_into(gone, 0, karu::Span<std::byte>()));  // no I/O for an empty span
  EXPECT_ERR(c.read_into(gone, 0, buf), KARU_ERR_IO, (scratch + "/no-such-file.bin").c_str());
  EXPECT_ERR(c.size(gone), KARU_ERR_IO, "");
  karu::Object absent = parse(base + "/ok/missing");
  EXPECT_ERR(c.stat(absent), KARU_ERR_NOT_FOUND, base.c_str());
}

void fetches(const karu::Client& c, const karu::Object& o) {
  std::vector<std::vector<std::byte>> bufs(4, std::vector<std::byte>(3000));
  const std::uint64_t offs[4] = {0, 2000, 500000, SIZE - 3000};
  std::vector<karu::Read> reads;
  for (int i = 0; i < 4; i++) reads.push_back(karu::Read{&o, offs[i], bufs[i], nullptr, {}});
  EXPECT_VALUE(c.fetch(reads));
  bool all = true;
  for (int i = 0; i < 4; i++) all = all && same(bufs[i].data(), offs[i], 3000);
  CHECK(all, "fetch: four reads, every byte");
  karu::SubmitOptions apart;
  apart.coalesce_gap = 0;
  EXPECT_VALUE(c.fetch(reads, apart));
  karu::SubmitOptions bad;
  bad.coalesce_limit = 0;
  EXPECT_ERR(c.fetch(reads, bad), KARU_ERR_INVALID, "karu_client_fetch_with: coalesce_limit must be at least 1");
  EXPECT_ERR(c.submit(reads, bad), KARU_ERR_INVALID, "karu_client_submit_with: coalesce_limit must be at least 1");
  reads[2].object = nullptr;
  EXPECT_ERR(c.fetch(reads), KARU_ERR_INVALID, "read has no object");
  EXPECT_ERR(c.submit(reads), KARU_ERR_INVALID, "read has no object");
  reads[2].object = &o;
  reads[3].destination = {};
  EXPECT_ERR(c.fetch(reads), KARU_ERR_INVALID, "read has an empty destination");
  reads[3].destination = karu::Span<std::byte>(bufs[0].data() + 100, 100);
  EXPECT_ERR(c.fetch(reads), KARU_ERR_INVALID, "karu_client_fetch_with: request 3's buffer overlaps request 0's");
  reads[3].destination = bufs[3];
  reads[1].offset = SIZE - 1000;
  EXPECT_ERR(c.fetch(reads), KARU_ERR_RANGE, "");
  EXPECT_VALUE(c.fetch(karu::Span<const karu::Read>()));
}

void batches(const karu::Client& c, const karu::Object& o, bool remote) {
  const char* what = remote ? "http" : "local";
  enum { N = 5 };
  const std::uint64_t offs[N] = {0, 4096, 100000, 700000, SIZE - 100};
  std::vector<std::vector<std::byte>> bufs(N, std::vector<std::byte>(4096));
  std::vector<karu::Read> reads;
  for (int i = 0; i < N; i++)
    reads.push_back(karu::Read{&o, offs[i], bufs[i], reinterpret_cast<void*>(static_cast<std::intptr_t>(100 + i)), {}});
  auto submitted = c.submit(reads);
  CHECK(submitted.has_value(), "%s submit", what);
  if (!submitted) return;
  karu::Batch batch = std::move(*submitted);
  int seen = 0;
  for (;;) {
    auto e = batch.next();
    CHECK(e.has_value(), "%s next", what);
    if (!e || e->state != karu::BatchState::ready) {
      CHECK(e && e->state == karu::BatchState::end, "%s: the batch ends", what);
      break;
    }
    int i = static_cast<int>(reinterpret_cast<std::intptr_t>(e->tag)) - 100;
    CHECK(i >= 0 && i < N && !(seen & (1 << i)), "%s completion tag %d", what, i);
    if (i < 0 || i >= N) continue;
    seen |= 1 << i;
    if (i == N - 1)
      CHECK(e->status == KARU_ERR_RANGE && e->bytes_read == 100 && same(bufs[i].data(), SIZE - 100, 100) &&
                !e->message.empty(),
            "%s: past the end: RANGE, the exact 100-byte prefix, '%s'", what, e->message.c_str());
    else
      CHECK(e->status == KARU_OK && e->bytes_read == 4096 && same(bufs[i].data(), offs[i], 4096) &&
                e->message.empty(),
            "%s read %d: ok, every byte", what, i);
  }
  CHECK(seen == (1 << N) - 1, "%s: every read completed once", what);
  auto again = batch.next(0);
  CHECK(again && again->state == karu::BatchState::end, "%s: END again", what);
  auto st = batch.stats();
  CHECK(st && st->requested_bytes == N * 4096 && st->transfers_finished == st->transfers && st->transfers >= 1 &&
            st->received_bytes >= 4 * 4096 + 100 && st->retries == 0,
        "%s stats: requested %llu transfers %llu/%llu received %llu", what,
        st ? (unsigned long long)st->requested_bytes : 0ULL, st ? (unsigned long long)st->transfers_finished : 0ULL,
        st ? (unsigned long long)st->transfers : 0ULL, st ? (unsigned long long)st->received_bytes : 0ULL);
  karu::Batch moved = std::move(batch);
  CHECK(batch.native_handle() == nullptr && moved.native_handle() != nullptr, "a moved-from Batch is empty");

  // Overrides: two touching reads merge by default and not with gap 0.
  std::vector<karu::Read> two{{&o, 0, bufs[0], nullptr, {}}, {&o, 4096, bufs[1], nullptr, {}}};
  std::uint64_t transfers[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    karu::SubmitOptions so;
    if (k == 1) so.coalesce_gap = 0;
    auto b = c.submit(two, so);
    CHECK(b.has_value(), "%s submit with options", what);
    if (!b) continue;
    int ok = 0;
    for (auto e = b->next(); e && e->state == karu::BatchState::ready; e = b->next()) ok += e->status == KARU_OK;
    transfers[k] = b->stats() ? b->stats()->transfers : 0;
    CHECK(ok == 2 && same(bufs[0].data(), 0, 4096) && same(bufs[1].data(), 4096, 4096), "%s: both reads exact", what);
  }
  CHECK(transfers[0] == 1 && transfers[1] == 2, "%s: merged by default (%llu), apart with gap 0 (%llu)", what,
        (unsigned long long)transfers[0], (unsigned long long)transfers[1]);
}

// A wait that expires is a state; destroying a batch in flight returns promptly.
void timeouts(const karu::Client& c) {
  karu::Object slow = parse(base + "/trickle/slow.bin?size=1000000&rate=2000");
  std::vector<std::byte> buf(100000);
  std::vector<karu::Read> one{{&slow, 0, buf, nullptr, {}}};
  auto start = std::chrono::steady_clock::now();
  {
    auto b = c.submit(one);
    CHECK(b.has_value(), "submit on a trickling route");
    if (!b) return;
    auto e = b->next(200);
    CHECK(e && e->state == karu::BatchState::timeout, "next(200) times out");
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(took < 20.0, "a batch destroyed in flight returned after %.3f s", took);
}

void downloads(const karu::Client& c, const karu::Object& o) {
  std::string dest = scratch + "/facade-download.bin";
  std::remove(dest.c_str());
  auto info = c.stat(o);
  karu::DownloadOptions opts;
  opts.chunk_size = 256 << 10;
  opts.parallelism = 3;
  auto r = c.download(o, dest, opts);
  CHECK(r && r->size == SIZE && r->downloaded == SIZE && r->received_bytes >= SIZE && info &&
            r->etag == info->etag && !r->etag.empty(),
        "download: size %llu downloaded %llu etag '%s'", r ? (unsigned long long)r->size : 0ULL,
        r ? (unsigned long long)r->downloaded : 0ULL, r ? r->etag.c_str() : "");
  std::ifstream in(dest, std::ios::binary);
  std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(file.size() == SIZE && std::memcmp(file.data(), expected.data(), SIZE) == 0, "downloaded file: every byte");
  auto exists = c.download(o, dest);
  CHECK(!exists && exists.error().message.find("already exists") != std::string::npos,
        "no overwrite by default: '%s'", exists ? "" : exists.error().message.c_str());
  opts.overwrite = true;
  EXPECT_VALUE(c.download(o, dest, opts));
  std::remove(dest.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: facade <base URL> <local copy> <scratch dir>\n");
    return 2;
  }
  base = argv[1];
  local_path = argv[2];
  scratch = argv[3];
  std::ifstream in(local_path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() != SIZE) {
    std::fprintf(stderr, "cannot read %s\n", argv[2]);
    return 2;
  }
  expected.resize(SIZE);
  std::memcpy(expected.data(), raw.data(), SIZE);
  std::printf("C++ %ld\n", static_cast<long>(__cplusplus));
  config();
  objects();
  karu::Client client = make_client();
  client_getters(client);
  karu::Object local = parse(local_path), remote = parse(base + "/ok/obj.bin");
  for (bool is_remote : {false, true}) {
    const karu::Object& o = is_remote ? remote : local;
    probes(client, o, is_remote);
    reads(client, o, is_remote);
    fetches(client, o);
    batches(client, o, is_remote);
  }
  missing(client);
  timeouts(client);
  downloads(client, remote);
  karu::Client moved = std::move(client);
  CHECK(client.native_handle() == nullptr && moved.max_attempts() == 2, "a moved-from Client is empty");
  DONE();
}
