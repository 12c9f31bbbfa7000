/* karu.hpp: the C++ facade of libkaru, header-only, built only on the C ABI of karu.h.
 *
 * Errors come back as values: Result<T> is std::expected<T, karu::Error> where the standard
 * library has it (C++23), and otherwise a small stand-in with the same observers
 * (has_value, operator bool, value, error, operator*, operator->, value_or), so the facade
 * also compiles as C++17. Spans are std::span (C++20) or, before it, karu::Span with the
 * same (pointer, size) and container constructors. Every handle is move-only and frees its
 * C object on destruction.
 *
 * Buffers handed to a Batch (each Read's destination) belong to it until it is destroyed:
 * karu writes them from its own threads and never reads them, they may be uninitialised,
 * and the destinations of one submit must not overlap (INVALID). */
#ifndef KARU_HPP
#define KARU_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#if __has_include(<version>)
#include <version>
#endif
#if defined(__cpp_lib_expected) && __cpp_lib_expected >= 202202L
#include <expected>
#endif
#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L
#include <span>
#endif

#include "karu.h"

namespace karu {

/* A failed call: the C status and its message (copied from karu_last_error()). */
struct Error {
  karu_status status = KARU_OK;
  std::string message;
};

namespace detail {

/* The failure of the calling thread's last C call. */
inline Error last_error(karu_status status) { return Error{status, karu_last_error()}; }

}  // namespace detail

#if defined(__cpp_lib_expected) && __cpp_lib_expected >= 202202L

template <class T>
using Result = std::expected<T, Error>;

namespace detail {
inline std::unexpected<Error> failure(Error e) { return std::unexpected<Error>(std::move(e)); }
}  // namespace detail

#else

namespace detail {
/* What a failed Result is built from (std::unexpected's role). */
struct Failure {
  Error error;
};
inline Failure failure(Error e) { return Failure{std::move(e)}; }
}  // namespace detail

/* Before C++23: a value or an Error. value() of a failed Result throws
 * std::bad_variant_access (std::expected throws std::bad_expected_access). */
template <class T>
class [[nodiscard]] Result {
 public:
  using value_type = T;
  using error_type = Error;

  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(detail::Failure f) : v_(std::in_place_index<1>, std::move(f.error)) {}

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return *std::get_if<0>(&v_); }
  const T& operator*() const& { return *std::get_if<0>(&v_); }
  T&& operator*() && { return std::move(*std::get_if<0>(&v_)); }
  T* operator->() { return std::get_if<0>(&v_); }
  const T* operator->() const { return std::get_if<0>(&v_); }
  const Error& error() const& { return *std::get_if<1>(&v_); }
  Error&& error() && { return std::move(*std::get_if<1>(&v_)); }
  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? **this : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Error> v_;
};

/* Success without a value, or an Error. */
template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  using error_type = Error;

  Result() = default;
  Result(detail::Failure f) : error_(std::move(f.error)) {}

  bool has_value() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  void value() const {
    if (error_) throw std::bad_variant_access();
  }
  void operator*() const noexcept {}
  const Error& error() const& { return *error_; }
  Error&& error() && { return std::move(*error_); }

 private:
  std::optional<Error> error_;
};

#endif

#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L

template <class T>
using Span = std::span<T>;

#else

/* Before C++20: a contiguous view, std::span's dynamic-extent subset. */
template <class T>
class Span {
 public:
  using element_type = T;
  using size_type = std::size_t;

  constexpr Span() noexcept = default;
  constexpr Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr Span(T (&array)[N]) noexcept : data_(array), size_(N) {}
  template <class C, class = std::enable_if_t<
                         !std::is_array_v<std::remove_reference_t<C>> &&
                         std::is_convertible_v<decltype(std::declval<C&>().data()), T*>>>
  constexpr Span(C& container) noexcept : data_(container.data()), size_(container.size()) {}
  template <class U, class = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  constexpr Span(const Span<U>& other) noexcept : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

#endif

/* The writable bytes of any object or array of `size` bytes, as a destination span. */
inline Span<std::byte> writable_bytes(void* data, std::size_t size) noexcept {
  return Span<std::byte>(static_cast<std::byte*>(data), size);
}

/* A configuration builder (karu_config), move-only. */
class Config {
 public:
  /* A builder from a snapshot of the environment, with default credential discovery. */
  [[nodiscard]] static Result<Config> from_environment() { return make(karu_config_create); }
  /* A hermetic builder: no environment, home directory, CA bundle or discovery. */
  [[nodiscard]] static Result<Config> empty() { return make(karu_config_create_empty); }

  Config(Config&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Config& operator=(Config&& other) noexcept {
    if (this != &other) {
      karu_config_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;
  ~Config() { karu_config_free(handle_); }

  /* Sets an option's explicit value (validated when a client is created). */
  [[nodiscard]] Result<void> set(std::string_view name, std::string_view value) {
    std::string n(name), v(value);
    return check(karu_config_set_option(handle_, n.c_str(), v.c_str()));
  }
  /* Removes an option's explicit value. */
  [[nodiscard]] Result<void> unset(std::string_view name) {
    std::string n(name);
    return check(karu_config_set_option(handle_, n.c_str(), nullptr));
  }
  /* Sets an option for every path under `prefix`. */
  [[nodiscard]] Result<void> set_path(std::string_view prefix, std::string_view name,
                                      std::string_view value) {
    std::string p(prefix), n(name), v(value);
    return check(karu_config_set_path_option(handle_, p.c_str(), n.c_str(), v.c_str()));
  }
  /* Removes an option from the rule of `prefix`. */
  [[nodiscard]] Result<void> unset_path(std::string_view prefix, std::string_view name) {
    std::string p(prefix), n(name);
    return check(karu_config_set_path_option(handle_, p.c_str(), n.c_str(), nullptr));
  }
  /* Installs or replaces the credentials callback of `kind`; `release(user_data)` runs once
   * nothing references the registration any more. */
  [[nodiscard]] Result<void> set_credentials_provider(karu_credentials_kind kind,
                                                      karu_credentials_provider provider,
                                                      void* user_data,
                                                      karu_credentials_provider_free release = nullptr) {
    return check(karu_config_set_credentials_provider(handle_, kind, provider, user_data, release));
  }
  /* Removes the credentials callback of `kind`. */
  [[nodiscard]] Result<void> clear_credentials_provider(karu_credentials_kind kind) {
    return check(karu_config_set_credentials_provider(handle_, kind, nullptr, nullptr, nullptr));
  }

  karu_config* native_handle() const noexcept { return handle_; }

 private:
  explicit Config(karu_config* handle) noexcept : handle_(handle) {}
  static Result<Config> make(karu_status (*create)(karu_config**)) {
    karu_config* handle = nullptr;
    karu_status s = create(&handle);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return Config(handle);
  }
  static Result<void> check(karu_status s) {
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return {};
  }

  karu_config* handle_;
};

/* A parsed object locator (karu_locator), move-only. */
class Object {
 public:
  /* Parses a URI or path (no I/O): ERR_URI, or ERR_UNSUPPORTED for an unknown /vsi handler. */
  [[nodiscard]] static Result<Object> parse(std::string_view uri) {
    std::string u(uri);
    karu_locator* handle = nullptr;
    karu_status s = karu_resolve(u.c_str(), &handle);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return Object(handle);
  }

  Object(Object&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Object& operator=(Object&& other) noexcept {
    if (this != &other) {
      karu_locator_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  ~Object() { karu_locator_free(handle_); }

  /* The canonical identity. */
  std::string_view uri() const noexcept { return karu_locator_uri(handle_); }
  bool is_remote() const noexcept { return karu_locator_is_remote(handle_) != 0; }
  std::uint64_t window_offset() const noexcept { return karu_locator_window_offset(handle_); }
  /* KARU_TO_END for an unbounded window. */
  std::uint64_t window_length() const noexcept { return karu_locator_window_length(handle_); }
  const karu_locator* native_handle() const noexcept { return handle_; }

 private:
  explicit Object(karu_locator* handle) noexcept : handle_(handle) {}
  karu_locator* handle_;
};

/* Visible size and strong ETag (quotes included; empty for local files and weak tags). */
struct ObjectInfo {
  std::uint64_t size = 0;
  std::string etag;
};

struct DownloadOptions {
  std::uint64_t chunk_size = KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT;
  std::uint64_t parallelism = KARU_DOWNLOAD_PARALLELISM_DEFAULT;
  bool overwrite = false;
  /* Called with (user data, completed, total); returning 0 cancels the download. */
  karu_download_progress progress = nullptr;
  void* progress_user_data = nullptr;
};

struct DownloadResult {
  std::uint64_t size = 0;
  std::uint64_t downloaded = 0;
  std::uint64_t received_bytes = 0;
  std::uint64_t retries = 0;
  std::uint64_t throttled = 0;
  std::uint64_t new_connections = 0;
  std::uint64_t resumed = 0;
  std::uint64_t credential_refreshes = 0;
  /* The strong ETag that pinned every range, or empty. */
  std::string etag;
};

/* One read: `destination.size()` bytes at `offset` (relative to the object's window). */
struct Read {
  const Object* object = nullptr;
  std::uint64_t offset = 0;
  Span<std::byte> destination;
  void* tag = nullptr;
  /* A strong ETag the object must match; empty for none. */
  std::string_view if_match;
};

/* Per-batch planner overrides; an unset field inherits the client's setting. */
struct SubmitOptions {
  std::optional<std::uint64_t> coalesce_gap;
  std::optional<std::uint64_t> coalesce_limit;
  std::optional<std::uint64_t> coalesce_parts;
  std::optional<std::uint64_t> coalesce_amplification;
};

struct BatchStats {
  std::uint64_t transfers = 0;
  std::uint64_t transfers_finished = 0;
  std::uint64_t requested_bytes = 0;
  std::uint64_t received_bytes = 0;
  std::uint64_t retries = 0;
  std::uint64_t throttled = 0;
  std::uint64_t new_connections = 0;
  std::uint64_t resumed = 0;
  std::uint64_t credential_refreshes = 0;
};

/* What Batch::next found: a completion, the end of the batch, or an expired wait. */
enum class BatchState { ready, end, timeout };

struct BatchEvent {
  BatchState state = BatchState::end;
  void* tag = nullptr;
  karu_status status = KARU_OK;
  /* Defined bytes at the start of the read's destination. */
  std::uint64_t bytes_read = 0;
  /* The failure's message; empty for successful reads. */
  std::string message;
};

/* A submitted batch (karu_batch), move-only. Destroying it cancels what is left and waits
 * until no karu thread touches its destinations. */
class Batch {
 public:
  Batch(Batch&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Batch& operator=(Batch&& other) noexcept {
    if (this != &other) {
      karu_batch_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() { karu_batch_free(handle_); }

  /* The next completion; a negative timeout waits forever, 0 polls. The end of the batch
   * and an expired wait are states, not errors. */
  [[nodiscard]] Result<BatchEvent> next(int timeout_ms = -1) {
    karu_done done{};
    karu_status s = karu_batch_next(handle_, &done, timeout_ms);
    switch (s) {
      case KARU_OK:
        return BatchEvent{BatchState::ready, done.tag, done.status, done.got,
                          done.status != KARU_OK ? karu_last_error() : ""};
      case KARU_END:
        return BatchEvent{BatchState::end, nullptr, KARU_OK, 0, {}};
      case KARU_TIMEOUT:
        return BatchEvent{BatchState::timeout, nullptr, KARU_OK, 0, {}};
      default:
        return detail::failure(detail::last_error(s));
    }
  }

  /* The batch's counters, each read independently. */
  [[nodiscard]] Result<BatchStats> stats() const {
    karu_batch_stats st = KARU_BATCH_STATS_INIT;
    karu_status s = karu_batch_get_stats(handle_, &st);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return BatchStats{st.transfers, st.transfers_finished, st.requested_bytes,
                      st.received_bytes, st.retries, st.throttled,
                      st.new_connections, st.resumed, st.credential_refreshes};
  }

  karu_batch* native_handle() const noexcept { return handle_; }

 private:
  friend class Client;
  explicit Batch(karu_batch* handle) noexcept : handle_(handle) {}
  karu_batch* handle_;
};

/* A client (karu_client), move-only; thread safe to share by reference. */
class Client {
 public:
  /* Freezes `config` (every value validated: ERR_CONFIG names a bad one). */
  [[nodiscard]] static Result<Client> create(const Config& config) {
    karu_client* handle = nullptr;
    karu_status s = karu_client_create(config.native_handle(), &handle);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return Client(handle);
  }

  Client(Client&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Client& operator=(Client&& other) noexcept {
    if (this != &other) {
      karu_client_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() { karu_client_free(handle_); }

  /* Whether `config` would build a client with exactly these settings (no I/O). */
  [[nodiscard]] Result<bool> matches(const Config& config) const {
    int match = 0;
    karu_status s = karu_client_matches_config(handle_, config.native_handle(), &match);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return match != 0;
  }

  /* The visible size (a bounded window's length without I/O). */
  [[nodiscard]] Result<std::uint64_t> size(const Object& object) const {
    std::uint64_t size = 0;
    karu_status s = karu_client_size(handle_, object.native_handle(), &size);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return size;
  }

  /* Size and strong ETag in one round trip. */
  [[nodiscard]] Result<ObjectInfo> stat(const Object& object) const {
    karu_object_info info = KARU_OBJECT_INFO_INIT;
    karu_status s = karu_client_stat(handle_, object.native_handle(), &info);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return to_info(info);
  }

  /* The first head.size() and last tail.size() bytes (each span receives
   * min(its size, object size) bytes), with size and ETag. */
  [[nodiscard]] Result<ObjectInfo> read_ends(const Object& object, Span<std::byte> head,
                                             Span<std::byte> tail) const {
    karu_object_info info = KARU_OBJECT_INFO_INIT;
    karu_status s = karu_client_read_ends(handle_, object.native_handle(), head.data(), head.size(),
                                          tail.data(), tail.size(), &info);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return to_info(info);
  }

  /* Downloads the whole object to `destination`, pinned to one version, published
   * atomically. */
  [[nodiscard]] Result<DownloadResult> download(const Object& object, std::string_view destination,
                                                const DownloadOptions& options = {}) const {
    karu_download_options o = KARU_DOWNLOAD_OPTIONS_INIT;
    o.chunk_size = options.chunk_size;
    o.parallelism = options.parallelism;
    o.overwrite = options.overwrite ? 1 : 0;
    o.progress = options.progress;
    o.progress_user_data = options.progress_user_data;
    karu_download_result r = KARU_DOWNLOAD_RESULT_INIT;
    std::string path(destination);
    karu_status s = karu_client_download(handle_, object.native_handle(), path.c_str(), &o, &r);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return DownloadResult{r.size,    r.downloaded, r.received_bytes, r.retries, r.throttled,
                          r.new_connections, r.resumed, r.credential_refreshes, etag_of(r.etag)};
  }

  /* Reads destination.size() bytes at `offset` into `destination`; an empty span succeeds
   * without I/O. */
  [[nodiscard]] Result<void> read_into(const Object& object, std::uint64_t offset,
                                       Span<std::byte> destination,
                                       std::string_view if_match = {}) const {
    if (destination.empty()) return {};
    Read one{&object, offset, destination, nullptr, if_match};
    return fetch(Span<const Read>(&one, 1));
  }

  /* Reads `length` bytes at `offset` into a new vector. */
  [[nodiscard]] Result<std::vector<std::byte>> read(const Object& object, std::uint64_t offset,
                                                    std::uint64_t length,
                                                    std::string_view if_match = {}) const {
    std::vector<std::byte> bytes;
    try {
      if (length > bytes.max_size()) throw std::bad_alloc();
      bytes.resize(static_cast<std::size_t>(length));
    } catch (const std::exception&) {
      return detail::failure(Error{KARU_ERR_NOMEM, "cannot allocate " + std::to_string(length) +
                                                       " bytes"});
    }
    Result<void> done = read_into(object, offset, Span<std::byte>(bytes.data(), bytes.size()),
                                  if_match);
    if (!done) return detail::failure(std::move(done).error());
    return Result<std::vector<std::byte>>(std::move(bytes));
  }

  /* Runs reads to the end (karu_client_fetch_with): OK, or the first failure in completion
   * order. After a failure every destination is unspecified. */
  [[nodiscard]] Result<void> fetch(Span<const Read> reads, const SubmitOptions& options = {}) const {
    Requests r;
    if (auto bad = r.build(reads)) return detail::failure(std::move(*bad));
    karu_submit_options o = to_options(options);
    karu_status s = karu_client_fetch_with(handle_, r.reqs.data(), r.reqs.size(), &o);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return {};
  }

  /* Submits reads and returns at once (karu_client_submit_with); each destination belongs
   * to the batch until it is destroyed. */
  [[nodiscard]] Result<Batch> submit(Span<const Read> reads, const SubmitOptions& options = {}) const {
    Requests r;
    if (auto bad = r.build(reads)) return detail::failure(std::move(*bad));
    karu_submit_options o = to_options(options);
    karu_batch* handle = nullptr;
    karu_status s = karu_client_submit_with(handle_, r.reqs.data(), r.reqs.size(), &o, &handle);
    if (s != KARU_OK) return detail::failure(detail::last_error(s));
    return Batch(handle);
  }

  int concurrency() const noexcept { return karu_client_concurrency(handle_); }
  std::uint64_t coalesce_gap() const noexcept { return karu_client_coalesce_gap(handle_); }
  int max_attempts() const noexcept { return karu_client_max_attempts(handle_); }
  karu_client* native_handle() const noexcept { return handle_; }

 private:
  explicit Client(karu_client* handle) noexcept : handle_(handle) {}

  /* C requests for a call, with NUL-terminated copies of the conditions kept alive. */
  struct Requests {
    std::vector<karu_req> reqs;
    std::vector<std::string> conditions;

    std::optional<Error> build(Span<const Read> reads) {
      try {
        reqs.reserve(reads.size());
        conditions.reserve(reads.size());  // no reallocation: the c_str() pointers stay valid
        for (const Read& read : reads) {
          if (read.object == nullptr) return Error{KARU_ERR_INVALID, "read has no object"};
          if (read.destination.empty())
            return Error{KARU_ERR_INVALID, "read has an empty destination"};
          const char* condition = nullptr;
          if (!read.if_match.empty()) {
            conditions.emplace_back(read.if_match);
            condition = conditions.back().c_str();
          }
          reqs.push_back(karu_req{read.object->native_handle(), read.offset,
                                  static_cast<std::uint64_t>(read.destination.size()),
                                  read.destination.data(), read.tag, condition});
        }
      } catch (const std::exception&) {
        return Error{KARU_ERR_NOMEM, "cannot allocate the requests"};
      }
      return std::nullopt;
    }
  };

  static karu_submit_options to_options(const SubmitOptions& options) {
    karu_submit_options o = KARU_SUBMIT_OPTIONS_INIT;
    o.coalesce_gap = options.coalesce_gap.value_or(KARU_INHERIT);
    o.coalesce_limit = options.coalesce_limit.value_or(KARU_INHERIT);
    o.coalesce_parts = options.coalesce_parts.value_or(KARU_INHERIT);
    o.coalesce_amplification = options.coalesce_amplification.value_or(KARU_INHERIT);
    return o;
  }

  static std::string etag_of(const char (&etag)[256]) {
    const void* nul = std::memchr(etag, 0, sizeof etag);
    return std::string(etag, nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - etag)
                                  : sizeof etag);
  }

  static ObjectInfo to_info(const karu_object_info& info) {
    return ObjectInfo{info.size, etag_of(info.etag)};
  }

  karu_client* handle_;
};

}  // namespace karu

#endif
