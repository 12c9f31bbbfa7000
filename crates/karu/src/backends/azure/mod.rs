//! Azure Blob Storage and Data Lake Storage Gen2 (spec §5.8): endpoint selection (option,
//! connection string, account and suffix), the field-by-field credential merge, and request
//! authentication in the reference's order: anonymous, SAS, bearer, Shared Key. Every
//! request carries `x-ms-version`, anonymous and SAS ones too: without it Azure answers as
//! version 2009-09-19, whose unquoted ETags `stat` would discard.

pub(super) mod connection_string;
mod shared_key;

use ::http::header::{AUTHORIZATION, HeaderName, HeaderValue};

use super::attempt::Attempt;
use super::endpoint::Endpoint;
use super::{Prepared, profile};
use crate::config::Credentials;
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::{Backend, Locator, encode_key};
use crate::transport::RedirectPolicy;

use connection_string::ConnectionString;
use shared_key::{ToSign, VERSION};

fn config_error(locator: &Locator, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Config, format!("{}: {why}", locator.display()))
}

fn credentials_error(locator: &Locator, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Credentials, format!("{}: {why}", locator.display()))
}

/// What a request authenticates with after the merge: the credential stage's fields win,
/// empty ones fall back to the options, then to the connection string.
#[derive(Debug, Default, PartialEq, Eq)]
struct Merged<'a> {
    account: &'a str,
    key: &'a str,
    sas: &'a str,
    token: &'a str,
}

fn merge<'a>(
    a: &Attempt<'a>,
    options: &'a profile::Azure,
    conn: &'a ConnectionString,
) -> Merged<'a> {
    let given = match a.signing.auth {
        Auth::Signed(r) => Some(&r.credentials),
        Auth::Anonymous | Auth::Missing => None,
    };
    let pick = |field: fn(&Credentials) -> &str, option: &'a Option<String>, from_conn: &'a str| {
        given
            .map(field)
            .filter(|v| !v.is_empty())
            .or(option.as_deref())
            .unwrap_or(from_conn)
    };
    Merged {
        account: pick(|c| &c.account_name, &options.account, &conn.account),
        key: pick(|c| &c.secret_access_key, &options.key, &conn.key),
        sas: pick(|c| &c.sas_token, &options.sas, &conn.sas),
        token: pick(|c| &c.bearer_token, &options.token, ""),
    }
}

/// The connection string configured for the locator's path (empty when none).
fn connection_string<'p>(a: &Attempt, options: &'p profile::Azure) -> Result<&'p ConnectionString> {
    options.connection_string.as_ref().map_err(|why| {
        config_error(
            a.locator,
            format_args!("AZURE_STORAGE_CONNECTION_STRING is malformed: {why}"),
        )
    })
}

/// The service root, in the spec's order: `AZURE_STORAGE_ENDPOINT`, the connection string's
/// `BlobEndpoint` (`DfsEndpoint` for Data Lake), then `<protocol>://<account>.blob.<suffix>`
/// (`.dfs.` for Data Lake).
fn endpoint(
    a: &Attempt,
    options: &profile::Azure,
    conn: &ConnectionString,
    account: &str,
) -> Result<Endpoint> {
    if let Some(checked) = &options.endpoint {
        return a.endpoint(checked).cloned();
    }
    let locator = a.locator;
    let dfs = locator.backend() == Backend::AzureDataLake;
    let (given, key) = if dfs {
        (&conn.dfs_endpoint, "DfsEndpoint")
    } else {
        (&conn.blob_endpoint, "BlobEndpoint")
    };
    if !given.is_empty() {
        return a.parse_endpoint(&format!("AZURE_STORAGE_CONNECTION_STRING {key}"), given);
    }
    if account.is_empty() {
        return Err(config_error(
            locator,
            "Azure needs AZURE_STORAGE_ACCOUNT or an explicit endpoint",
        ));
    }
    let protocol = match conn.protocol.to_ascii_lowercase().as_str() {
        "" | "https" => "https",
        "http" => "http",
        _ => {
            return Err(config_error(
                locator,
                "AZURE_STORAGE_CONNECTION_STRING DefaultEndpointsProtocol must be http or https",
            ));
        }
    };
    let suffix = if conn.suffix.is_empty() {
        "core.windows.net"
    } else {
        &conn.suffix
    };
    let service = if dfs { "dfs" } else { "blob" };
    a.parse_endpoint(
        "the Azure account endpoint",
        &format!("{protocol}://{account}.{service}.{suffix}"),
    )
}

/// The message when signing was wanted and nothing can sign.
fn no_credentials(locator: &Locator) -> Error {
    credentials_error(
        locator,
        "no Azure credentials; configure a SAS, access token or account key, install a \
         custom provider, or set AZURE_NO_SIGN_REQUEST=YES",
    )
}

/// Builds one attempt's GET: `<endpoint>/<container>/<encoded blob>` with `Range`,
/// `If-Match`, `x-ms-version` and the authentication the credential stage and the options
/// allow, plus the configured headers.
pub(super) fn prepare(a: &Attempt, options: &profile::Azure) -> Result<Prepared> {
    let locator = a.locator;
    let conn = connection_string(a, options)?;
    let creds = merge(a, options, conn);
    let endpoint = endpoint(a, options, conn, creds.account)?;
    let resource = format!(
        "/{}/{}",
        encode_key(locator.container()),
        encode_key(locator.key())
    );
    let mut url = format!("{}{resource}", endpoint.root());
    let version = || {
        (
            HeaderName::from_static("x-ms-version"),
            HeaderValue::from_static(VERSION),
        )
    };
    let (redirect, mut headers, uri) = if matches!(a.signing.auth, Auth::Anonymous) {
        (a.follow_redirects(), a.read_headers()?, a.uri(&url)?)
    } else if !sas(creds.sas).is_empty() {
        url.push('?');
        url.push_str(sas(creds.sas));
        // A token that is no valid URL query would fail in the transport, whose message
        // shows the URL: refuse it here without echoing the secret.
        let Ok(uri) = crate::transport::parse_url(&url) else {
            return Err(credentials_error(
                locator,
                "the Azure SAS token contains characters not allowed in a URL",
            ));
        };
        (RedirectPolicy::Never, a.read_headers()?, uri)
    } else if !creds.token.is_empty() {
        let mut headers = a.read_headers()?;
        a.header(
            &mut headers,
            AUTHORIZATION,
            &format!("Bearer {}", creds.token),
        )?;
        (RedirectPolicy::Never, headers, a.uri(&url)?)
    } else if !creds.account.is_empty() && !creds.key.trim().is_empty() {
        let key = shared_key::decode_key(creds.key)
            .ok_or_else(|| credentials_error(locator, "AZURE_STORAGE_ACCESS_KEY is not base64"))?;
        let date = httpdate::fmt_http_date(a.signing.now);
        let authorization = ToSign {
            account: creds.account,
            path: &format!("{}{resource}", endpoint.path),
            range: &a.range.header(),
            if_match: a.if_match(),
            if_unmodified_since: a.if_unmodified_since(),
            date: &date,
        }
        .authorization(&key);
        let mut headers = a.read_headers()?;
        a.header(&mut headers, HeaderName::from_static("x-ms-date"), &date)?;
        let (name, value) = version();
        headers.insert(name, value);
        a.header(&mut headers, AUTHORIZATION, &authorization)?;
        (RedirectPolicy::Never, headers, a.uri(&url)?)
    } else {
        return Err(no_credentials(locator));
    };
    // Every request names the version (the Shared Key one did before signing).
    let (name, value) = version();
    headers.insert(name, value);
    a.finish(uri, headers, redirect, true)
}

/// A SAS token as a query: leading `?` and `&` stripped, so `sv=..`, `?sv=..` and `&sv=..`
/// all give `?sv=..`.
fn sas(token: &str) -> &str {
    token.trim().trim_start_matches(['?', '&'])
}

#[cfg(test)]
mod tests;
