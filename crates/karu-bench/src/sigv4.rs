//! AWS Signature Version 4 for the plain client's ranged GETs, so that the naive reader and the
//! bandwidth yardstick can read from the S3 emulator, which checks every signature. Only what a
//! path-style `GET` with a `Range` needs: the payload is `UNSIGNED-PAYLOAD`, and the keys the
//! benchmark uses need no percent-encoding.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::{digest, hmac};

/// The emulator's region (any region is accepted; the signature must name one).
pub const REGION: &str = "us-east-1";

/// Keys of the S3 emulator and the bucket the benchmark's objects are in.
#[derive(Clone, Debug)]
pub struct S3Access {
    pub bucket: String,
    pub key_id: String,
    pub secret: String,
}

impl S3Access {
    /// The variables through which the parent hands the access to a reader's child.
    pub const ENV: [&'static str; 3] = [
        "KARU_BENCH_S3_BUCKET",
        "KARU_BENCH_S3_ACCESS_KEY_ID",
        "KARU_BENCH_S3_SECRET_ACCESS_KEY",
    ];

    /// The variables to set on a child, with their values.
    pub fn env(&self) -> [(&'static str, &str); 3] {
        [
            (Self::ENV[0], &self.bucket),
            (Self::ENV[1], &self.key_id),
            (Self::ENV[2], &self.secret),
        ]
    }

    /// The access a child was handed, if any (none: an HTTP server).
    pub fn from_env() -> Option<S3Access> {
        let get = |k: &str| std::env::var(k).ok();
        Some(S3Access {
            bucket: get(Self::ENV[0])?,
            key_id: get(Self::ENV[1])?,
            secret: get(Self::ENV[2])?,
        })
    }

    /// `Authorization`, `x-amz-date` and `x-amz-content-sha256` for `GET path` on `host` with
    /// `Range: bytes=<range>`.
    pub fn sign_get(&self, host: &str, path: &str, range: &str) -> Vec<(&'static str, String)> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("a clock after 1970")
            .as_secs();
        let (date, stamp) = amz_date(secs);
        let signed = "host;range;x-amz-content-sha256;x-amz-date";
        let canonical = format!(
            "GET\n{path}\n\nhost:{host}\nrange:bytes={range}\n\
             x-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:{stamp}\n\n{signed}\nUNSIGNED-PAYLOAD"
        );
        let scope = format!("{date}/{REGION}/s3/aws4_request");
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
            hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
        );
        let mac = |key: &[u8], data: &str| {
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        };
        let mut key = mac(format!("AWS4{}", self.secret).as_bytes(), &date);
        for part in [REGION, "s3", "aws4_request"] {
            key = mac(key.as_ref(), part);
        }
        let signature = hex(mac(key.as_ref(), &to_sign).as_ref());
        vec![
            (
                "Authorization",
                format!(
                    "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, \
                     Signature={signature}",
                    self.key_id
                ),
            ),
            ("x-amz-content-sha256", "UNSIGNED-PAYLOAD".into()),
            ("x-amz-date", stamp),
        ]
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// (`YYYYMMDD`, `YYYYMMDDTHHMMSSZ`) of a UNIX time, in UTC: the test kit's ISO 8601 form
/// without its separators.
fn amz_date(secs: u64) -> (String, String) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let stamp: String = karu_testkit::keys::iso8601(t)
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    (stamp[..8].to_owned(), stamp)
}

#[cfg(test)]
mod tests {
    #[test]
    fn amz_dates() {
        assert_eq!(
            super::amz_date(1_440_938_160),
            ("20150830".to_owned(), "20150830T123600Z".to_owned())
        );
    }
}
