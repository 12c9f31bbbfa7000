/* Struct layouts, constants and initializers of spec §1.2–1.6, checked from C. */
#include <stddef.h>
#include <stdint.h>

#include "check.h"

#define SIZE(t, n) CHECK(sizeof(t) == (n), "sizeof(%s) == %d (is %zu)", #t, (n), sizeof(t))
#define OFF(t, f, n) \
  CHECK(offsetof(t, f) == (n), "offsetof(%s, %s) == %d (is %zu)", #t, #f, (n), offsetof(t, f))

int main(void) {
  SIZE(karu_credentials, 64);
  OFF(karu_credentials, access_key_id, 0);
  OFF(karu_credentials, secret_access_key, 8);
  OFF(karu_credentials, session_token, 16);
  OFF(karu_credentials, bearer_token, 24);
  OFF(karu_credentials, sas_token, 32);
  OFF(karu_credentials, account_name, 40);
  OFF(karu_credentials, cache_prefix, 48);
  OFF(karu_credentials, expires_at, 56);

  SIZE(karu_object_info, 272);
  OFF(karu_object_info, struct_size, 0);
  OFF(karu_object_info, size, 8);
  OFF(karu_object_info, etag, 16);
  SIZE(((karu_object_info *)0)->etag, 256);

  SIZE(karu_submit_options, 40);
  OFF(karu_submit_options, struct_size, 0);
  OFF(karu_submit_options, coalesce_gap, 8);
  OFF(karu_submit_options, coalesce_limit, 16);
  OFF(karu_submit_options, coalesce_parts, 24);
  OFF(karu_submit_options, coalesce_amplification, 32);

  SIZE(karu_req, 48);
  OFF(karu_req, locator, 0);
  OFF(karu_req, offset, 8);
  OFF(karu_req, length, 16);
  OFF(karu_req, buffer, 24);
  OFF(karu_req, tag, 32);
  OFF(karu_req, if_match, 40);
  karu_req two[2];
  CHECK((char *)&two[1] - (char *)&two[0] == 48, "karu_req array stride is 48");

  SIZE(karu_done, 32);
  OFF(karu_done, tag, 0);
  OFF(karu_done, status, 8);
  OFF(karu_done, got, 16);
  OFF(karu_done, buffer, 24);
  SIZE(karu_status, 4);

  SIZE(karu_batch_stats, 80);
  OFF(karu_batch_stats, struct_size, 0);
  OFF(karu_batch_stats, transfers, 8);
  OFF(karu_batch_stats, transfers_finished, 16);
  OFF(karu_batch_stats, requested_bytes, 24);
  OFF(karu_batch_stats, received_bytes, 32);
  OFF(karu_batch_stats, retries, 40);
  OFF(karu_batch_stats, throttled, 48);
  OFF(karu_batch_stats, new_connections, 56);
  OFF(karu_batch_stats, resumed, 64);
  OFF(karu_batch_stats, credential_refreshes, 72);

  SIZE(karu_download_options, 48);
  OFF(karu_download_options, struct_size, 0);
  OFF(karu_download_options, chunk_size, 8);
  OFF(karu_download_options, parallelism, 16);
  OFF(karu_download_options, overwrite, 24);
  OFF(karu_download_options, progress, 32);
  OFF(karu_download_options, progress_user_data, 40);

  SIZE(karu_download_result, 328);
  OFF(karu_download_result, struct_size, 0);
  OFF(karu_download_result, size, 8);
  OFF(karu_download_result, downloaded, 16);
  OFF(karu_download_result, received_bytes, 24);
  OFF(karu_download_result, retries, 32);
  OFF(karu_download_result, throttled, 40);
  OFF(karu_download_result, new_connections, 48);
  OFF(karu_download_result, resumed, 56);
  OFF(karu_download_result, credential_refreshes, 64);
  OFF(karu_download_result, etag, 72);

  CHECK(KARU_API_VERSION == 1, "KARU_API_VERSION == 1");
  CHECK(KARU_TO_END == UINT64_MAX, "KARU_TO_END == UINT64_MAX");
  CHECK(KARU_INHERIT == UINT64_MAX, "KARU_INHERIT == UINT64_MAX");
  CHECK(KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT == (UINT64_C(8) << 20), "chunk default 8 MiB");
  CHECK(KARU_DOWNLOAD_PARALLELISM_DEFAULT == 8, "parallelism default 8");
  CHECK(KARU_OK == 0 && KARU_END == 1 && KARU_TIMEOUT == 2, "positive statuses");
  CHECK(KARU_ERR_URI == -1 && KARU_ERR_UNSUPPORTED == -2 && KARU_ERR_INVALID == -3 &&
            KARU_ERR_NOMEM == -4 && KARU_ERR_IO == -5 && KARU_ERR_NETWORK == -6 &&
            KARU_ERR_HTTP == -7 && KARU_ERR_RANGE == -8 && KARU_ERR_AUTH == -9 &&
            KARU_ERR_CANCELLED == -10 && KARU_ERR_CONFIG == -11 &&
            KARU_ERR_CREDENTIALS == -12 && KARU_ERR_NOT_FOUND == -13 &&
            KARU_ERR_PRECONDITION == -14,
        "error statuses -1..-14");
  CHECK(KARU_CREDENTIALS_AWS == 1 && KARU_CREDENTIALS_GCS == 2 && KARU_CREDENTIALS_AZURE == 3 &&
            KARU_CREDENTIALS_SOURCE == 4,
        "credentials kinds 1..4");

  karu_object_info info = KARU_OBJECT_INFO_INIT;
  CHECK(info.struct_size == sizeof info && info.size == 0 && info.etag[0] == 0 &&
            info.etag[255] == 0,
        "KARU_OBJECT_INFO_INIT");
  karu_submit_options so = KARU_SUBMIT_OPTIONS_INIT;
  CHECK(so.struct_size == sizeof so && so.coalesce_gap == KARU_INHERIT &&
            so.coalesce_limit == KARU_INHERIT && so.coalesce_parts == KARU_INHERIT &&
            so.coalesce_amplification == KARU_INHERIT,
        "KARU_SUBMIT_OPTIONS_INIT");
  karu_batch_stats bs = KARU_BATCH_STATS_INIT;
  CHECK(bs.struct_size == sizeof bs && bs.transfers == 0 && bs.credential_refreshes == 0,
        "KARU_BATCH_STATS_INIT");
  karu_download_options dopt = KARU_DOWNLOAD_OPTIONS_INIT;
  CHECK(dopt.struct_size == sizeof dopt && dopt.chunk_size == (UINT64_C(8) << 20) &&
            dopt.parallelism == 8 && dopt.overwrite == 0 && dopt.progress == NULL &&
            dopt.progress_user_data == NULL,
        "KARU_DOWNLOAD_OPTIONS_INIT");
  karu_download_result dres = KARU_DOWNLOAD_RESULT_INIT;
  CHECK(dres.struct_size == sizeof dres && dres.size == 0 && dres.credential_refreshes == 0 &&
            dres.etag[0] == 0,
        "KARU_DOWNLOAD_RESULT_INIT");
  CHECK(karu_api_version() == KARU_API_VERSION, "karu_api_version() == 1");
  DONE();
}
