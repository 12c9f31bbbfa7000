//! `StsServer`: STS's `AssumeRoleWithWebIdentity` on loopback. It checks the form as STS
//! does (action, version, role ARN, session name syntax, the expected web identity token)
//! and answers with fresh numbered keys (prefix `sts`) or an STS error document.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::endpoint::{Endpoint, Reply, Request};
use crate::keys::{Issuer, Keys};

/// A loopback STS; stops when dropped.
pub struct StsServer {
    endpoint: Endpoint,
    state: Arc<Mutex<State>>,
}

struct State {
    token: String,
    issuer: Issuer,
    forms: Vec<Vec<(String, String)>>,
}

impl StsServer {
    /// Accepts `token` as the only valid web identity token; keys live `lifetime_secs`.
    pub fn start(token: &str, lifetime_secs: i64) -> StsServer {
        let state = Arc::new(Mutex::new(State {
            token: token.to_owned(),
            issuer: Issuer::new("sts", lifetime_secs),
            forms: Vec::new(),
        }));
        let shared = state.clone();
        let endpoint = Endpoint::start(
            "karu-testkit-sts",
            Arc::new(move |req: &Request| answer(&mut lock(&shared), req)),
        );
        StsServer { endpoint, state }
    }

    /// The endpoint, `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("{}/", self.endpoint.root())
    }

    /// Requests received.
    pub fn requests(&self) -> u64 {
        self.endpoint.requests()
    }

    /// Keys handed out, oldest first.
    pub fn issued(&self) -> Vec<Keys> {
        self.state().issuer.issued()
    }

    /// The form fields of every request, in order.
    pub fn forms(&self) -> Vec<Vec<(String, String)>> {
        self.state().forms.clone()
    }

    /// The `RoleSessionName` of every request, in order.
    pub fn session_names(&self) -> Vec<String> {
        self.state()
            .forms
            .iter()
            .map(|f| field(f, "RoleSessionName").unwrap_or_default().to_owned())
            .collect()
    }

    /// Lifetime of keys issued from now on (negative: already expired).
    pub fn set_lifetime(&self, secs: i64) {
        self.state().issuer.set_lifetime(secs);
    }

    /// Leaves one element (`AccessKeyId`, `SessionToken`, `Expiration`, ...) out of later
    /// answers.
    pub fn set_omit(&self, element: Option<&str>) {
        self.state().issuer.set_omit(element);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// STS's rule for session names: 2 to 64 of `[\w+=,.@-]`.
fn valid_session_name(name: &str) -> bool {
    (2..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::new(
        status,
        "text/xml",
        format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
             <Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
             <RequestId>testkit</RequestId></ErrorResponse>"
        ),
    )
}

fn answer(state: &mut State, req: &Request) -> Reply {
    let form: Vec<(String, String)> = form_urlencoded::parse(&req.body).into_owned().collect();
    state.forms.push(form.clone());
    if req.method != "POST" || req.path != "/" {
        return error(405, "InvalidAction", "POST / only");
    }
    let form_type = req
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return error(400, "InvalidParameterValue", "expected a form");
    }
    let get = |name| field(&form, name);
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
    Reply::new(
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
