//! Temporary keys as the credential endpoints hand them out: a fresh, numbered set per call,
//! with an expiry a configurable number of seconds away (negative: already expired) and,
//! to test incomplete answers, one field left out on request.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One set of keys handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// The access key id, `<PREFIX>-AKID-<n>` (n counting from 1).
    pub access_key_id: String,
    /// The secret, `<prefix>-secret-<n>`.
    pub secret_access_key: String,
    /// The session token, `<prefix>-token-<n>`.
    pub session_token: String,
    /// When the keys expire.
    pub expires_at: SystemTime,
}

impl Keys {
    /// The expiry as ISO 8601 UTC (`2026-11-29T16:47:39Z`).
    pub fn expiration(&self) -> String {
        iso8601(self.expires_at)
    }
}

/// Issues numbered keys and remembers them.
pub(crate) struct Issuer {
    prefix: &'static str,
    lifetime_secs: i64,
    omit: Option<String>,
    issued: Vec<Keys>,
}

impl Issuer {
    /// Keys named after `prefix`, living `lifetime_secs` seconds.
    pub(crate) fn new(prefix: &'static str, lifetime_secs: i64) -> Issuer {
        Issuer {
            prefix,
            lifetime_secs,
            omit: None,
            issued: Vec::new(),
        }
    }

    /// Sets the lifetime of keys issued from now on (negative: already expired).
    pub(crate) fn set_lifetime(&mut self, secs: i64) {
        self.lifetime_secs = secs;
    }

    /// Leaves the named answer field out from now on (`None` puts it back).
    pub(crate) fn set_omit(&mut self, field: Option<&str>) {
        self.omit = field.map(str::to_owned);
    }

    /// Whether an answer should carry `field`.
    pub(crate) fn includes(&self, field: &str) -> bool {
        self.omit.as_deref() != Some(field)
    }

    /// Issues the next keys.
    pub(crate) fn next(&mut self) -> Keys {
        let n = self.issued.len() + 1;
        let now = SystemTime::now();
        let offset = Duration::from_secs(self.lifetime_secs.unsigned_abs());
        let expires_at = if self.lifetime_secs >= 0 {
            now + offset
        } else {
            now - offset
        };
        let keys = Keys {
            access_key_id: format!("{}-AKID-{n}", self.prefix.to_ascii_uppercase()),
            secret_access_key: format!("{}-secret-{n}", self.prefix),
            session_token: format!("{}-token-{n}", self.prefix),
            expires_at,
        };
        self.issued.push(keys.clone());
        keys
    }

    /// Every set issued so far, oldest first.
    pub(crate) fn issued(&self) -> Vec<Keys> {
        self.issued.clone()
    }

    /// The keys as the JSON the container and instance endpoints answer with.
    pub(crate) fn json(&self, keys: &Keys, extra: &[(&str, &str)]) -> String {
        let expiration = keys.expiration();
        let mut fields: Vec<(&str, &str)> = extra.to_vec();
        fields.extend([
            ("AccessKeyId", keys.access_key_id.as_str()),
            ("SecretAccessKey", keys.secret_access_key.as_str()),
            ("Token", keys.session_token.as_str()),
            ("Expiration", expiration.as_str()),
        ]);
        let body: Vec<String> = fields
            .iter()
            .filter(|(name, _)| self.includes(name))
            .map(|(name, value)| format!("\"{name}\": \"{value}\""))
            .collect();
        format!("{{{}}}", body.join(", "))
    }
}

/// Formats `t` as ISO 8601 UTC with whole seconds.
pub fn iso8601(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_dates() {
        let at = |s| iso8601(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_970_859), "2026-11-29T16:47:39Z");
        assert_eq!(at(1_893_553_445), "2030-01-02T03:04:05Z");
    }

    #[test]
    fn issues_numbered_keys() {
        let mut issuer = Issuer::new("ecs", 60);
        let first = issuer.next();
        issuer.set_lifetime(-5);
        issuer.set_omit(Some("Token"));
        let second = issuer.next();
        assert_eq!(first.access_key_id, "ECS-AKID-1");
        assert_eq!(second.secret_access_key, "ecs-secret-2");
        assert!(first.expires_at > SystemTime::now());
        assert!(second.expires_at < SystemTime::now());
        assert_eq!(issuer.issued(), vec![first, second.clone()]);
        let json = issuer.json(&second, &[("Code", "Success")]);
        assert!(json.starts_with(r#"{"Code": "Success", "AccessKeyId": "ECS-AKID-2""#));
        assert!(!json.contains("Token"));
    }
}
