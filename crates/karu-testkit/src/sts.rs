//! `StsServer`: STS's `AssumeRoleWithWebIdentity` on loopback. It checks the form as STS
//! does (action, version, role ARN, session name syntax, the expected web identity token)
//! and answers with fresh numbered keys (prefix `sts`) or an STS error document.

use crate::endpoint::{Answer, Asked, Endpoint};
use crate::keys::{Issuer, Keys};

/// A loopback STS; stops when dropped.
pub struct StsServer {
    endpoint: Endpoint<State>,
}

struct State {
    token: String,
    issuer: Issuer,
}

impl StsServer {
    /// Accepts `token` as the only valid web identity token; keys live `lifetime_secs`.
    pub fn start(token: &str, lifetime_secs: i64) -> StsServer {
        let state = State {
            token: token.to_owned(),
            issuer: Issuer::new("sts", lifetime_secs),
        };
        StsServer {
            endpoint: Endpoint::start("karu-testkit-sts", state, answer),
        }
    }

    /// The endpoint, `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("{}/", self.endpoint.root())
    }

    /// Requests received.
    pub fn requests(&self) -> u64 {
        self.endpoint.log().len() as u64
    }

    /// Keys handed out, oldest first.
    pub fn issued(&self) -> Vec<Keys> {
        self.endpoint.state().issuer.issued()
    }

    /// The form fields of every request, in order.
    pub fn forms(&self) -> Vec<Vec<(String, String)>> {
        self.endpoint.log().into_iter().map(|a| a.form).collect()
    }

    /// The `RoleSessionName` of every request, in order.
    pub fn session_names(&self) -> Vec<String> {
        self.endpoint
            .log()
            .iter()
            .map(|a| a.field("RoleSessionName").unwrap_or_default().to_owned())
            .collect()
    }

    /// Lifetime of keys issued from now on (negative: already expired).
    pub fn set_lifetime(&self, secs: i64) {
        self.endpoint.state().issuer.set_lifetime(secs);
    }

    /// Leaves one element (`AccessKeyId`, `SessionToken`, `Expiration`, ...) out of later
    /// answers.
    pub fn set_omit(&self, element: Option<&str>) {
        self.endpoint.state().issuer.set_omit(element);
    }
}

/// STS's rule for session names: 2 to 64 of `[\w+=,.@-]`.
fn valid_session_name(name: &str) -> bool {
    (2..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

fn error(status: u16, code: &str, message: &str) -> Answer {
    Answer::new(
        status,
        "text/xml",
        format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
             <RequestId>testkit</RequestId></ErrorResponse>"
        ),
    )
}

fn answer(state: &mut State, req: &Asked) -> Answer {
    if req.method != "POST" || req.path != "/" {
        return error(405, "InvalidAction", "POST / only");
    }
    let form_type = req
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return error(400, "InvalidParameterValue", "expected a form");
    }
    let get = |name| req.field(name);
    if get("Action") != Some("AssumeRoleWithWebIdentity") {
        return error(400, "InvalidAction", "unknown action");
    }
    if get("Version") != Some("2011-06-15") {
        return error(400, "InvalidParameterValue", "unknown version");
    }
    if !get("RoleArn").is_some_and(|a| a.starts_with("arn:")) {
        return error(400, "ValidationError", "RoleArn is not an ARN");
    }
    if !get("RoleSessionName").is_some_and(valid_session_name) {
        return error(400, "ValidationError", "RoleSessionName is invalid");
    }
    if get("WebIdentityToken") != Some(state.token.as_str()) {
        return error(400, "InvalidIdentityToken", "the token is not valid");
    }
    let keys = state.issuer.next();
    let expiration = keys.expiration();
    let elements: String = [
        ("AccessKeyId", keys.access_key_id.as_str()),
        ("SecretAccessKey", keys.secret_access_key.as_str()),
        ("SessionToken", keys.session_token.as_str()),
        ("Expiration", expiration.as_str()),
    ]
    .iter()
    .filter(|(name, _)| state.issuer.includes(name))
    .map(|(name, value)| format!("<{name}>{value}</{name}>"))
    .collect();
    Answer::new(
        200,
        "text/xml",
        format!(
            "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <AssumeRoleWithWebIdentityResult><Credentials>{elements}</Credentials>\
             <SubjectFromWebIdentityToken>testkit</SubjectFromWebIdentityToken>\
             </AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
        ),
    )
}
