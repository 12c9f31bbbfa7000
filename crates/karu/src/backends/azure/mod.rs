//! Azure Blob Storage and Data Lake Storage Gen2 (spec §5.8): endpoint selection (option,
//! connection string, account and suffix), the field-by-field credential merge, and request
//! authentication in the reference's order: anonymous, SAS, bearer, Shared Key. Every
//! request carries `x-ms-version`, anonymous and SAS ones too: without it Azure answers as
//! version 2009-09-19, whose unquoted ETags `stat` would discard.

mod connection_string;
mod shared_key;

use super::{ByteRange, Prepared, Signing};
use crate::config::{Settings, check_managed_headers};
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::{Backend, Locator, encode_key};
use crate::transport::{MAX_REDIRECTS, RedirectPolicy, Request};

use connection_string::ConnectionString;
use shared_key::{ToSign, VERSION};

/// Option `name` for `path`, empty values treated as unset.
fn option<'s>(settings: &'s Settings, name: &str, path: &str) -> Option<&'s str> {
    settings.option(name, path).filter(|v| !v.is_empty())
}

fn config_error(locator: &Locator, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Config, format!("{}: {why}", locator.display()))
}

fn credentials_error(locator: &Locator, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Credentials, format!("{}: {why}", locator.display()))
}

/// What a request authenticates with after the merge: the credential stage's fields win,
/// empty ones fall back to the options, then to the connection string.
#[derive(Debug, Default, PartialEq, Eq)]
struct Merged {
    account: String,
    key: String,
    sas: String,
    token: String,
}

fn merge(auth: &Auth, settings: &Settings, path: &str, conn: &ConnectionString) -> Merged {
    let given = match auth {
        Auth::Signed(r) => Some(&r.credentials),
        Auth::Anonymous | Auth::Missing => None,
    };
    let pick = |from_auth: Option<&str>, name: &str, from_conn: &str| {
        from_auth
            .filter(|v| !v.is_empty())
            .or_else(|| option(settings, name, path))
            .unwrap_or(from_conn)
            .to_owned()
    };
    Merged {
        account: pick(
            given.map(|c| c.account_name.as_str()),
            "AZURE_STORAGE_ACCOUNT",
            &conn.account,
        ),
        key: pick(
            given.map(|c| c.secret_access_key.as_str()),
            "AZURE_STORAGE_ACCESS_KEY",
            &conn.key,
        ),
        sas: pick(
            given.map(|c| c.sas_token.as_str()),
            "AZURE_STORAGE_SAS_TOKEN",
            &conn.sas,
        ),
        token: pick(
            given.map(|c| c.bearer_token.as_str()),
            "AZURE_STORAGE_ACCESS_TOKEN",
            "",
        ),
    }
}

/// The connection string configured for the locator's path (empty when none).
fn connection_string(settings: &Settings, locator: &Locator) -> Result<ConnectionString> {
    match option(
        settings,
        "AZURE_STORAGE_CONNECTION_STRING",
        locator.identity(),
    ) {
        None => Ok(ConnectionString::default()),
        Some(text) => ConnectionString::parse(text).map_err(|why| {
            config_error(
                locator,
                format_args!("AZURE_STORAGE_CONNECTION_STRING is malformed: {why}"),
            )
        }),
    }
}

/// An endpoint checked per spec §3.3: `https://` added to a bare host; http or https with a
/// host and no user information, query or fragment. Returns the root without trailing
/// slashes, and its path part (Azurite's path-style roots have one). `what` names the source
/// in errors; values are not echoed.
fn checked_endpoint(locator: &Locator, what: &str, value: &str) -> Result<(String, String)> {
    let value = value.trim();
    let full = if value.contains("://") {
        value.to_owned()
    } else {
        format!("https://{value}")
    };
    let fail = |why: &str| config_error(locator, format_args!("{what} {why}"));
    let url = url::Url::parse(&full).map_err(|_| fail("is not a valid URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(fail("must use http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(fail("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(fail("cannot contain user information"));
    }
    if url.query().is_some() {
        return Err(fail("cannot contain a query"));
    }
    if url.fragment().is_some() {
        return Err(fail("cannot contain a fragment"));
    }
    let root = full.trim_end_matches('/').to_owned();
    let after_scheme = &root[root.find("://").map_or(0, |i| i + 3)..];
    let path = after_scheme
        .find('/')
        .map_or(String::new(), |i| after_scheme[i..].to_owned());
    Ok((root, path))
}

/// The service root, in the spec's order: `AZURE_STORAGE_ENDPOINT`, the connection string's
/// `BlobEndpoint` (`DfsEndpoint` for Data Lake), then `<protocol>://<account>.blob.<suffix>`
/// (`.dfs.` for Data Lake).
fn endpoint(
    settings: &Settings,
    locator: &Locator,
    conn: &ConnectionString,
    account: &str,
) -> Result<(String, String)> {
    if let Some(e) = option(settings, "AZURE_STORAGE_ENDPOINT", locator.identity()) {
        return checked_endpoint(locator, "AZURE_STORAGE_ENDPOINT", e);
    }
    let dfs = locator.backend() == Backend::AzureDataLake;
    let (given, key) = if dfs {
        (&conn.dfs_endpoint, "DfsEndpoint")
    } else {
        (&conn.blob_endpoint, "BlobEndpoint")
    };
    if !given.is_empty() {
        return checked_endpoint(
            locator,
            &format!("AZURE_STORAGE_CONNECTION_STRING {key}"),
            given,
        );
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
    checked_endpoint(
        locator,
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
pub(super) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
    signing: Signing<'_>,
) -> Result<Prepared> {
    let conn = connection_string(settings, locator)?;
    let creds = merge(signing.auth, settings, locator.identity(), &conn);
    let (root, root_path) = endpoint(settings, locator, &conn, &creds.account)?;
    let resource = format!(
        "/{}/{}",
        encode_key(locator.container()),
        encode_key(locator.key())
    );
    let mut url = format!("{root}{resource}");
    let range = range.header();
    let mut headers = vec![("Range".to_owned(), range.clone())];
    if let Some(tag) = if_match {
        headers.push(("If-Match".to_owned(), tag.to_owned()));
    }
    let version = ("x-ms-version".to_owned(), VERSION.to_owned());
    let redirect = if matches!(signing.auth, Auth::Anonymous) {
        headers.push(version);
        RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: settings.has_http_headers(),
        }
    } else if !sas(&creds.sas).is_empty() {
        url.push('?');
        url.push_str(sas(&creds.sas));
        // A token that is no valid URL query would fail in the transport, whose message
        // shows the URL: refuse it here without echoing the secret.
        if url.parse::<http::Uri>().is_err() {
            return Err(credentials_error(
                locator,
                "the Azure SAS token contains characters not allowed in a URL",
            ));
        }
        headers.push(version);
        RedirectPolicy::Never
    } else if !creds.token.is_empty() {
        headers.push((
            "Authorization".to_owned(),
            format!("Bearer {}", creds.token),
        ));
        headers.push(version);
        RedirectPolicy::Never
    } else if !creds.account.is_empty() && !creds.key.trim().is_empty() {
        let key = shared_key::decode_key(&creds.key)
            .ok_or_else(|| credentials_error(locator, "AZURE_STORAGE_ACCESS_KEY is not base64"))?;
        let date = httpdate::fmt_http_date(signing.now);
        let authorization = ToSign {
            account: &creds.account,
            path: &format!("{root_path}{resource}"),
            range: &range,
            if_match,
            date: &date,
        }
        .authorization(&key);
        headers.push(("x-ms-date".to_owned(), date));
        headers.push(version);
        headers.push(("Authorization".to_owned(), authorization));
        RedirectPolicy::Never
    } else {
        return Err(no_credentials(locator));
    };
    let custom = settings.http_headers()?;
    let generated: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    check_managed_headers(custom, &generated, true)?;
    headers.extend(custom.iter().cloned());
    Ok(Prepared {
        request: Request { url, headers },
        redirect,
        region: None,
    })
}

/// A SAS token as a query: leading `?` and `&` stripped, so `sv=..`, `?sv=..` and `&sv=..`
/// all give `?sv=..`.
fn sas(token: &str) -> &str {
    token.trim().trim_start_matches(['?', '&'])
}

#[cfg(test)]
mod tests;
