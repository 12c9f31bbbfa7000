//! Web identity (spec §5.9 step 3): the token file's contents exchanged at STS with
//! `AssumeRoleWithWebIdentity` for temporary keys.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use http::Method;
use quick_xml::events::Event;

use super::{LoadContext, endpoint_url, future_expiry};
use crate::config::Credentials;
use crate::credentials::http::{CONNECT_TIMEOUT, Call};
use crate::error::{Error, Result, Status};

/// STS when `AWS_STS_ENDPOINT` is unset.
const DEFAULT_STS: &str = "https://sts.amazonaws.com/";

/// Assumes `role` with the token in `token_file`, as session `session` (default
/// `karu-<unix time>`).
pub(super) fn load(
    ctx: &LoadContext,
    role: &str,
    token_file: &str,
    session: Option<&str>,
) -> Result<Credentials> {
    let fail =
        |status: Status, message: String| Error::new(status, format!("{}: {message}", ctx.path));
    let path = ctx.settings.expand_home(token_file);
    let token = ctx.read_file("AWS web identity token file", &path)?;
    let session = match session {
        Some(s) => s.to_owned(),
        None => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            format!("karu-{}", now.as_secs())
        }
    };

    let endpoint = match ctx.option("AWS_STS_ENDPOINT") {
        // A host alone gets https, as service endpoints do.
        Some(v) if !v.contains("://") => format!("https://{v}"),
        Some(v) => v.to_owned(),
        None => DEFAULT_STS.to_owned(),
    };
    let url = endpoint_url(ctx, "AWS_STS_ENDPOINT", &endpoint)?;
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("Action", "AssumeRoleWithWebIdentity")
        .append_pair("Version", "2011-06-15")
        .append_pair("RoleArn", role)
        .append_pair("RoleSessionName", &session)
        .append_pair("WebIdentityToken", token.trim())
        .finish();
    let call =
        Call::new(Method::POST, url.as_str()).body("application/x-www-form-urlencoded", form);
    let answer = ctx.http.send(call, CONNECT_TIMEOUT, ctx.deadline)?;

    let fields = elements(
        &answer.body,
        &[
            "Code",
            "AccessKeyId",
            "SecretAccessKey",
            "SessionToken",
            "Expiration",
        ],
    );
    let field = |name: &str| {
        fields
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    if !(200..300).contains(&answer.status) {
        let code = shown_code(field("Code"));
        return Err(fail(
            Status::Credentials,
            format!("AWS STS returned HTTP {}{code}", answer.status),
        ));
    }
    match (
        field("AccessKeyId"),
        field("SecretAccessKey"),
        field("SessionToken"),
        future_expiry(field("Expiration")),
    ) {
        (Some(id), Some(secret), Some(token), Some(expires_at)) => Ok(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
            session_token: token.to_owned(),
            expires_at: Some(expires_at),
            ..Credentials::default()
        }),
        _ => Err(fail(
            Status::Credentials,
            "AWS web identity response is incomplete".to_owned(),
        )),
    }
}

/// " (<Code>)" for a message: STS names the problem in `<Code>` (InvalidIdentityToken,
/// AccessDenied, ...). Only such a name is shown, so that an endpoint echoing the request
/// cannot put the web identity token into the message.
fn shown_code(code: Option<&str>) -> String {
    code.filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map(|c| format!(" ({c})"))
        .unwrap_or_default()
}

/// The text of the first element with each of `names` (local names, any namespace), with
/// entities resolved. Malformed XML yields what was read before the error.
pub(crate) fn elements(body: &[u8], names: &[&str]) -> HashMap<String, String> {
    let mut found = HashMap::new();
    let mut reader = quick_xml::Reader::from_reader(body);
    let mut current: Option<(String, String)> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                current = (names.contains(&name.as_str()) && !found.contains_key(&name))
                    .then(|| (name, String::new()));
            }
            Ok(Event::Text(t)) => {
                if let (Some((_, text)), Ok(s)) = (&mut current, t.decode()) {
                    text.push_str(&s);
                }
            }
            Ok(Event::CData(t)) => {
                if let (Some((_, text)), Ok(s)) = (&mut current, t.decode()) {
                    text.push_str(&s);
                }
            }
            Ok(Event::GeneralRef(r)) => {
                if let Some((_, text)) = &mut current {
                    match r.resolve_char_ref() {
                        Ok(Some(c)) => text.push(c),
                        _ => {
                            let entity = r.decode().unwrap_or_default();
                            text.push_str(
                                quick_xml::escape::resolve_predefined_entity(&entity)
                                    .unwrap_or_default(),
                            );
                        }
                    }
                }
            }
            Ok(Event::End(_)) => {
                if let Some((name, text)) = current.take() {
                    found.insert(name, text.trim().to_owned());
                }
            }
            Ok(Event::Eof) | Err(_) => return found,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_error_codes_are_shown() {
        assert_eq!(
            shown_code(Some("InvalidIdentityToken")),
            " (InvalidIdentityToken)"
        );
        assert_eq!(shown_code(None), "");
        assert_eq!(shown_code(Some("WebIdentityToken=eyJhbGciOi.x.y")), "");
        assert_eq!(shown_code(Some(&"A".repeat(65))), "");
    }

    #[test]
    fn xml_fields_by_local_name() {
        let body = br#"<?xml version="1.0"?>
<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <sts:Credentials xmlns:sts="x">
      <sts:AccessKeyId> ASIA1 </sts:AccessKeyId>
      <SecretAccessKey>a&amp;b&#x2F;c&lt;</SecretAccessKey>
      <SessionToken><![CDATA[tok<en>]]></SessionToken>
    </sts:Credentials>
    <AccessKeyId>second-is-ignored</AccessKeyId>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#;
        let f = elements(
            body,
            &[
                "AccessKeyId",
                "SecretAccessKey",
                "SessionToken",
                "Expiration",
            ],
        );
        assert_eq!(f["AccessKeyId"], "ASIA1");
        assert_eq!(f["SecretAccessKey"], "a&b/c<");
        assert_eq!(f["SessionToken"], "tok<en>");
        assert!(!f.contains_key("Expiration"));
        // Truncated XML keeps what was complete.
        let f = elements(b"<a><AccessKeyId>K</AccessKeyId><Secret", &["AccessKeyId"]);
        assert_eq!(f["AccessKeyId"], "K");
    }
}
