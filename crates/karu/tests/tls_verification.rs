//! TLS is verified by default and no option turns verification off (RELIABILITY.md, security
//! rules): the only TLS options add trust anchors, and the switches other tools use to skip
//! verification are unknown options here, refused at `Config::set`. That an untrusted
//! certificate fails is `transport::tests::tls_trust_and_alpn`.

use karu::{Config, Status};

#[test]
fn no_option_disables_tls_verification() {
    let tls: Vec<&str> = karu::option_names()
        .iter()
        .copied()
        .filter(|n| {
            ["SSL", "TLS", "CERT", "VERIFY", "INSECURE", "CA_"]
                .iter()
                .any(|w| n.contains(w))
        })
        .collect();
    assert_eq!(
        tls,
        [
            "KARU_HTTP_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "SSL_CERT_FILE",
            "KARU_HTTP_CA_PATH"
        ],
        "a new TLS option must not weaken verification"
    );
    for name in [
        "GDAL_HTTP_UNSAFESSL",
        "CURLOPT_SSL_VERIFYPEER",
        "AWS_NO_VERIFY_SSL",
        "KARU_HTTP_INSECURE",
        "KARU_TLS_VERIFY",
    ] {
        let mut config = Config::empty();
        let err = config.set(name, Some("NO")).map(|_| ()).unwrap_err();
        assert_eq!(err.status(), Status::Config, "{name}");
    }
}
