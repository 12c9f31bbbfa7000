//! Azure Blob and Data Lake reads.
//!
//! Against azurite (started by `scripts/azure.sh`, which `scripts/test.sh` runs): Shared Key,
//! SAS, connection strings and anonymous reads, stat, read_ends and batches, a wrong key
//! (`Auth`), a missing blob (`NotFound`), `If-Match` (`Precondition`), Data Lake paths against
//! the blob endpoint; every byte checked. Without `KARU_TEST_AZURITE_URL` those tests print a
//! skip line and pass, except under `CI`, where they fail.
//!
//! Against the test kit (always): the request plan of `read_ends` (no suffix range, the tail
//! pinned by `If-Match`), `x-ms-version` on every request, each credential chain step end to
//! end with expiry, refresh and single flight, the refresh after a 401, and bad input failing
//! only the reads it affects.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{
    MEDIUM, ONE, Rng, SMALL, client, client_plus, collect, random_spans, read_all, read_each,
};
use karu::{
    Client, Config, Credentials, CredentialsKind, CredentialsProvider, Locator, Read, Status,
};
use karu_testkit::app_service_identity::AppServiceIdentity;
use karu_testkit::azure_imds::AzureImds;
use karu_testkit::microsoft_token::{MicrosoftTokenServer, Registration};
use karu_testkit::server::etag;
use karu_testkit::{RangeServer, content};

/// The blob `scripts/azure.sh` uploads to both containers besides the common `ONE`, `SMALL`
/// and `MEDIUM` (name, size).
const NESTED: (&str, u64) = ("dir/a b.bin", 4096);

/// The running azurite.
struct Azurite {
    url: String,
    account: String,
    key: String,
    sas: String,
    container: String,
    public: String,
}

/// The running azurite, or `None` after a skip line (a panic under CI).
fn azurite() -> Option<Azurite> {
    let env = common::started("KARU_TEST_AZURITE_URL", "azure")?;
    Some(Azurite {
        account: env.require("KARU_TEST_AZURITE_ACCOUNT"),
        key: env.require("KARU_TEST_AZURITE_KEY"),
        sas: env.require("KARU_TEST_AZURITE_SAS"),
        container: env.require("KARU_TEST_AZURITE_CONTAINER"),
        public: env.require("KARU_TEST_AZURITE_PUBLIC_CONTAINER"),
        url: env.url,
    })
}

impl Azurite {
    fn blob(&self, name: &str) -> Locator {
        Locator::parse(&format!("az://{}/{name}", self.container)).unwrap()
    }

    /// Shared Key through the endpoint option.
    fn shared_key(&self) -> Client {
        client(&[
            ("AZURE_STORAGE_ENDPOINT", &self.url),
            ("AZURE_STORAGE_ACCOUNT", &self.account),
            ("AZURE_STORAGE_ACCESS_KEY", &self.key),
        ])
    }
}

/// Reads, stat and read_ends of every blob with one client.
fn check_blobs(client: &Client, container: &str) {
    for (name, size) in [SMALL, MEDIUM, NESTED, ONE] {
        let object = Locator::parse(&format!("az://{container}/{name}")).unwrap();
        let info = client.stat(&object).unwrap();
        assert_eq!(info.size, size, "{name}");
        let tag = info.etag.expect("azurite sends strong ETags");
        assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
        let all = client.read(&object, 0, size).unwrap();
        content::check(name, 0, &all).unwrap();
        let ends = client.read_ends(&object, 100, 64).unwrap();
        assert_eq!(ends.info.size, size);
        assert_eq!(ends.head, content::bytes(name, 0, 100.min(size) as usize));
        let t = 64.min(size);
        assert_eq!(ends.tail, content::bytes(name, size - t, t as usize));
    }
}

#[test]
fn shared_key_reads_stat_read_ends_and_batches() {
    let Some(az) = azurite() else { return };
    let c = az.shared_key();
    check_blobs(&c, &az.container);
    // A batch of scattered reads, merged and not, over the large blob.
    let mut spans = random_spans(&mut Rng(12_345), MEDIUM.1, 200, 5000);
    spans.push((MEDIUM.1 - 1, 1));
    read_all(&c, &az.blob(MEDIUM.0), MEDIUM.0, &spans);
    // Through a connection string instead of options.
    let cs = format!(
        "DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={};",
        az.account, az.key, az.url
    );
    let c = client(&[("AZURE_STORAGE_CONNECTION_STRING", &cs)]);
    read_all(
        &c,
        &az.blob(NESTED.0),
        NESTED.0,
        &[(0, 4096), (4000, 96), (17, 1)],
    );
}

#[test]
fn sas_and_anonymous_reads() {
    let Some(az) = azurite() else { return };
    for sas in [
        az.sas.clone(),
        format!("?{}", az.sas),
        format!("&{}", az.sas),
    ] {
        let c = client(&[
            ("AZURE_STORAGE_ENDPOINT", &az.url),
            ("AZURE_STORAGE_SAS_TOKEN", &sas),
        ]);
        read_all(
            &c,
            &az.blob(SMALL.0),
            SMALL.0,
            &[(0, 10), (990, 10), (5, 500)],
        );
    }
    let c = client(&[
        ("AZURE_STORAGE_ENDPOINT", &az.url),
        ("AZURE_STORAGE_SAS_TOKEN", &az.sas),
    ]);
    check_blobs(&c, &az.container);
    // Anonymous: the public container reads, the private one is refused.
    let anon = client(&[
        ("AZURE_STORAGE_ENDPOINT", &az.url),
        ("AZURE_NO_SIGN_REQUEST", "YES"),
    ]);
    check_blobs(&anon, &az.public);
    let e = anon.read(&az.blob(SMALL.0), 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Auth, "{e}");
}

#[test]
fn read_ends_of_short_blobs_tails_and_windows() {
    let Some(az) = azurite() else { return };
    let c = az.shared_key();
    let one = az.blob(ONE.0);
    let ends = c.read_ends(&one, 10, 10).unwrap();
    assert_eq!(ends.head, content::bytes(ONE.0, 0, 1));
    assert_eq!(ends.tail, ends.head);
    // Tail only, and a window.
    let ends = c.read_ends(&az.blob(MEDIUM.0), 0, 5000).unwrap();
    assert!(ends.head.is_empty());
    content::check(MEDIUM.0, MEDIUM.1 - 5000, &ends.tail).unwrap();
    let w = Locator::parse(&format!("az://{}/{}#bytes=1000-", az.container, SMALL.0)).unwrap();
    let ends = c.read_ends(&w, 0, 10).unwrap();
    assert_eq!(ends.info.size, 0);
    let w = Locator::parse(&format!("az://{}/{}#bytes=100-", az.container, SMALL.0)).unwrap();
    let ends = c.read_ends(&w, 10, 10).unwrap();
    assert_eq!(ends.info.size, 900);
    assert_eq!(ends.head, content::bytes(SMALL.0, 100, 10));
    assert_eq!(ends.tail, content::bytes(SMALL.0, 990, 10));
}

#[test]
fn wrong_key_missing_blob_and_if_match() {
    let Some(az) = azurite() else { return };
    // A valid base64 key that is not the account's.
    let wrong = client(&[
        ("AZURE_STORAGE_ENDPOINT", &az.url),
        ("AZURE_STORAGE_ACCOUNT", &az.account),
        ("AZURE_STORAGE_ACCESS_KEY", "d3Jvbmcga2V5"),
    ]);
    let object = az.blob(SMALL.0);
    let e = wrong.read(&object, 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Auth, "{e}");
    assert!(!e.message().contains("d3Jvbmcga2V5"));
    assert_eq!(wrong.stat(&object).unwrap_err().status(), Status::Auth);
    let c = az.shared_key();
    let missing = az.blob("no/such blob");
    assert_eq!(
        c.read(&missing, 0, 10).unwrap_err().status(),
        Status::NotFound
    );
    assert_eq!(c.stat(&missing).unwrap_err().status(), Status::NotFound);
    let tag = c.stat(&object).unwrap().etag.unwrap();
    let batch = c
        .submit(vec![
            Read::new(&object, 0, 100).tag(0).if_match(&tag),
            Read::new(&object, 500, 100)
                .tag(1)
                .if_match("\"0x8D000000000000\""),
        ])
        .unwrap();
    let done = collect(&batch);
    content::check(SMALL.0, 0, done[0].bytes()).unwrap();
    assert_eq!(
        done[1].result.as_ref().unwrap_err().status(),
        Status::Precondition
    );
}

#[test]
fn data_lake_paths_against_the_blob_endpoint() {
    let Some(az) = azurite() else { return };
    let c = az.shared_key();
    for uri in [
        format!("abfs://{}/{}", az.container, NESTED.0),
        format!("/vsiadls/{}/{}", az.container, NESTED.0),
    ] {
        let object = Locator::parse(&uri).unwrap();
        assert_eq!(c.stat(&object).unwrap().size, NESTED.1);
        read_all(&c, &object, NESTED.0, &[(0, 4096), (1000, 24)]);
    }
    // A DfsEndpoint in the connection string serves Data Lake paths.
    let cs = format!(
        "AccountName={};AccountKey={};DfsEndpoint={}",
        az.account, az.key, az.url
    );
    let c = client(&[("AZURE_STORAGE_CONNECTION_STRING", &cs)]);
    let object = Locator::parse(&format!("abfs://{}/{}", az.container, SMALL.0)).unwrap();
    read_all(&c, &object, SMALL.0, &[(0, 1000)]);
}

// ---------------------------------------------------------------------------------------------
// Test kit: request plans, headers and credential chains end to end.

/// A client whose Azure endpoint is `/ok` on `server` (blob `ctr/<name>` is object
/// `ctr/<name>` there), anonymous.
fn kit_client(server: &RangeServer, fault: &str, extra: &[(&str, &str)]) -> Client {
    client_plus(&[("AZURE_STORAGE_ENDPOINT", &server.url(fault))], extra)
}

#[test]
fn read_ends_on_azure_reads_the_head_then_the_tail_pinned_by_its_etag() {
    let server = RangeServer::start();
    server.register("ctr/obj", 50_000);
    let c = kit_client(&server, "ok", &[("AZURE_NO_SIGN_REQUEST", "YES")]);
    let object = Locator::parse("az://ctr/obj").unwrap();
    let ends = c.read_ends(&object, 100, 200).unwrap();
    assert_eq!(ends.head, content::bytes("ctr/obj", 0, 100));
    assert_eq!(ends.tail, content::bytes("ctr/obj", 49_800, 200));
    let tag = etag("ctr/obj", 50_000, 0);
    assert_eq!(ends.info.etag.as_deref(), Some(tag.as_str()));
    let log = server.log();
    let plan: Vec<(Option<&str>, Option<&str>)> = log
        .iter()
        .map(|r| (r.range.as_deref(), r.header("if-match")))
        .collect();
    assert_eq!(
        plan,
        [
            (Some("bytes=0-99"), None),
            (Some("bytes=49800-49999"), Some(tag.as_str()))
        ]
    );
    assert!(
        log.iter()
            .all(|r| r.header("x-ms-version") == Some("2023-11-03"))
    );
    // Tail only: one byte tells the size first.
    server.clear_log();
    let ends = c.read_ends(&object, 0, 10).unwrap();
    assert_eq!(ends.tail, content::bytes("ctr/obj", 49_990, 10));
    let ranges: Vec<String> = server.log().into_iter().filter_map(|r| r.range).collect();
    assert_eq!(ranges, ["bytes=0-0", "bytes=49990-49999"]);
    // A head that covers the object needs no second request.
    server.register("ctr/short", 300);
    server.clear_log();
    let ends = c
        .read_ends(&Locator::parse("az://ctr/short").unwrap(), 1000, 100)
        .unwrap();
    assert_eq!(ends.tail, content::bytes("ctr/short", 200, 100));
    assert_eq!(server.log().len(), 1);
    // An empty object (416 with `bytes */0`; azurite answers `bytes 0--1/0` instead, which
    // real Azure does not, so this runs against the test kit).
    server.register("ctr/empty", 0);
    let empty = Locator::parse("az://ctr/empty").unwrap();
    assert_eq!(c.stat(&empty).unwrap().size, 0);
    let ends = c.read_ends(&empty, 10, 10).unwrap();
    assert_eq!(
        (ends.head.len(), ends.tail.len(), ends.info.size),
        (0, 0, 0)
    );
    let ends = c.read_ends(&empty, 0, 10).unwrap();
    assert_eq!((ends.tail.len(), ends.info.size), (0, 0));
}

#[test]
fn an_object_that_changes_between_head_and_tail_is_a_precondition_failure() {
    let server = RangeServer::start();
    // The SAS becomes the query: `etag-change` with at=1 serves version 1 from the second
    // request on, so the pinned tail gets 412.
    let c = kit_client(
        &server,
        "etag-change",
        &[("AZURE_STORAGE_SAS_TOKEN", "size=50000&at=1")],
    );
    let object = Locator::parse("az://ctr/moving").unwrap();
    let e = c.read_ends(&object, 100, 100).unwrap_err();
    assert_eq!(e.status(), Status::Precondition);
    assert_eq!(
        e.message(),
        "/vsiaz/ctr/moving: the object changed between reading its head and its tail"
    );
}

/// The bearer tokens the storage server saw, in order.
fn bearers(server: &RangeServer) -> Vec<String> {
    server
        .log()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_owned())
        .collect()
}

#[test]
fn imds_tokens_single_flight_then_refresh_after_expiry() {
    let server = RangeServer::start();
    let imds = AzureImds::start();
    // Three seconds of life: reusable until one second before expiry.
    imds.set_knobs(|k| {
        k.lifetime = Duration::from_secs(3);
        k.delay = Duration::from_millis(300);
    });
    let endpoint = imds.endpoint();
    let c = kit_client(
        &server,
        "ok",
        &[
            ("IMDS_ENDPOINT", &endpoint),
            ("AZURE_IMDS_CLIENT_ID", "mi-client"),
            ("KARU_COALESCE_GAP", "0"),
        ],
    );
    let objects: Vec<(Locator, String)> = (0..8)
        .map(|i| {
            let name = format!("ctr/o{i}");
            server.register(&name, 1000);
            (Locator::parse(&format!("az://{name}")).unwrap(), name)
        })
        .collect();
    read_each(&c, &objects, 0, 1000);
    // Eight concurrent lookups in one scope: one token call.
    assert_eq!(imds.issued(), 1);
    assert_eq!(
        imds.selectors(),
        [Some(("client_id".to_owned(), "mi-client".to_owned()))]
    );
    assert!(bearers(&server).iter().all(|b| b == "Bearer imds-token-1"));
    imds.set_knobs(|k| k.delay = Duration::ZERO);
    std::thread::sleep(Duration::from_millis(2300));
    server.clear_log();
    content::check("ctr/o0", 0, &c.read(&objects[0].0, 0, 10).unwrap()).unwrap();
    assert_eq!(imds.issued(), 2);
    assert_eq!(bearers(&server), ["Bearer imds-token-2"]);
}

#[test]
fn path_rules_give_containers_their_own_credential_scope() {
    let server = RangeServer::start();
    server.register("ctr/obj", 100);
    server.register("other/obj", 100);
    let imds = AzureImds::start();
    let mut config = Config::empty();
    config
        .set("AZURE_STORAGE_ENDPOINT", Some(&server.url("ok")))
        .unwrap()
        .set("IMDS_ENDPOINT", Some(&imds.endpoint()))
        .unwrap()
        .set("AZURE_IMDS_CLIENT_ID", Some("shared"))
        .unwrap()
        .set_path("az://other", "AZURE_IMDS_CLIENT_ID", Some("own"))
        .unwrap();
    let c = Client::new(&config).unwrap();
    for _ in 0..2 {
        for name in ["ctr/obj", "other/obj"] {
            let object = Locator::parse(&format!("az://{name}")).unwrap();
            content::check(name, 0, &c.read(&object, 0, 100).unwrap()).unwrap();
        }
    }
    // One token per scope, each asked with its own selector, then reused.
    let selector = |v: &str| Some(("client_id".to_owned(), v.to_owned()));
    assert_eq!(imds.selectors(), [selector("shared"), selector("own")]);
    assert_eq!(
        bearers(&server),
        [
            "Bearer imds-token-1",
            "Bearer imds-token-2",
            "Bearer imds-token-1",
            "Bearer imds-token-2"
        ]
    );
}

#[test]
fn client_secret_and_app_service_tokens_reach_the_storage_server() {
    let server = RangeServer::start();
    server.register("ctr/obj", 1000);
    let object = Locator::parse("az://ctr/obj").unwrap();
    let token = MicrosoftTokenServer::start(Registration {
        tenant: "t1".into(),
        client_id: "c1".into(),
        scope: "https://storage.azure.com/.default".into(),
        secret: Some("s1".into()),
        assertion: None,
    });
    let authority = token.authority();
    let c = kit_client(
        &server,
        "ok",
        &[
            ("AZURE_TENANT_ID", "t1"),
            ("AZURE_CLIENT_ID", "c1"),
            ("AZURE_CLIENT_SECRET", "s1"),
            ("AZURE_AUTHORITY_HOST", &authority),
        ],
    );
    content::check("ctr/obj", 0, &c.read(&object, 0, 1000).unwrap()).unwrap();
    c.stat(&object).unwrap();
    assert_eq!(token.issued(), 1);
    assert!(bearers(&server).iter().all(|b| b == "Bearer ms-token-1"));

    server.clear_log();
    let identity = AppServiceIdentity::start("hdr");
    let endpoint = identity.endpoint();
    let c = kit_client(
        &server,
        "ok",
        &[("IDENTITY_ENDPOINT", &endpoint), ("IDENTITY_HEADER", "hdr")],
    );
    content::check("ctr/obj", 0, &c.read(&object, 0, 1000).unwrap()).unwrap();
    assert_eq!(bearers(&server), ["Bearer app-token-1"]);
    // A rejected identity header fails the read with a credentials error.
    let c = kit_client(
        &server,
        "ok",
        &[("IDENTITY_ENDPOINT", &endpoint), ("IDENTITY_HEADER", "bad")],
    );
    let e = c.read(&object, 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Credentials);
    assert_eq!(
        e.message(),
        "/vsiaz/ctr/obj: credential endpoint returned HTTP 401"
    );
}

/// A provider that hands out a SAS (which the test kit reads as its query) and counts calls.
struct CountingSas {
    sas: String,
    calls: AtomicU64,
}

impl CredentialsProvider for CountingSas {
    fn credentials(&self, _kind: CredentialsKind, _path: &str) -> karu::Result<Credentials> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Credentials {
            sas_token: self.sas.clone(),
            cache_prefix: Some("az://ctr".into()),
            ..Credentials::default()
        })
    }
}

fn with_provider(server: &RangeServer, sas: &str) -> (Client, Arc<CountingSas>) {
    let provider = Arc::new(CountingSas {
        sas: sas.into(),
        calls: AtomicU64::new(0),
    });
    let mut config = Config::empty();
    config
        .set("AZURE_STORAGE_ENDPOINT", Some(&server.url("status")))
        .unwrap();
    config.set_credentials_provider(CredentialsKind::Azure, Some(provider.clone()));
    (Client::new(&config).unwrap(), provider)
}

#[test]
fn a_401_refreshes_the_credentials_once() {
    let server = RangeServer::start();
    let (c, provider) = with_provider(&server, "size=1000&code=401&times=1");
    let object = Locator::parse("az://ctr/once").unwrap();
    let batch = c.submit(vec![Read::new(&object, 0, 1000)]).unwrap();
    let done = collect(&batch);
    content::check("ctr/once", 0, done[0].bytes()).unwrap();
    let stats = batch.stats();
    assert_eq!(stats.credential_refreshes, 1);
    assert_eq!(stats.retries, 0);
    assert_eq!(provider.calls.load(Ordering::SeqCst), 2);
    // A second rejection is final.
    let (c, provider) = with_provider(&server, "size=1000&code=401&times=2");
    let object = Locator::parse("az://ctr/twice").unwrap();
    let batch = c.submit(vec![Read::new(&object, 0, 1000)]).unwrap();
    let done = collect(&batch);
    assert_eq!(done[0].result.as_ref().unwrap_err().status(), Status::Auth);
    assert_eq!(batch.stats().credential_refreshes, 1);
    assert_eq!(provider.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn bad_input_fails_only_the_reads_it_affects() {
    let server = RangeServer::start();
    server.register("good/obj", 1000);
    let mut config = Config::empty();
    config
        .set("AZURE_STORAGE_ENDPOINT", Some(&server.url("ok")))
        .unwrap()
        .set("AZURE_NO_SIGN_REQUEST", Some("YES"))
        .unwrap();
    config
        .set_path(
            "az://badcs",
            "AZURE_STORAGE_CONNECTION_STRING",
            Some("AccountName=a;AccountKey"),
        )
        .unwrap()
        .set_path(
            "az://query",
            "AZURE_STORAGE_ENDPOINT",
            Some("http://h/?sig=x"),
        )
        .unwrap();
    let c = Client::new(&config).unwrap();
    let good = Locator::parse("az://good/obj").unwrap();
    let uris = ["az://badcs/k", "az://query/k"];
    let mut reads = vec![Read::new(&good, 0, 1000).tag(0)];
    for (i, uri) in uris.iter().enumerate() {
        reads.push(Read::new(&Locator::parse(uri).unwrap(), 0, 10).tag(i as u64 + 1));
    }
    let done = collect(&c.submit(reads).unwrap());
    content::check("good/obj", 0, done[0].bytes()).unwrap();
    let messages: Vec<(Status, String)> = done[1..]
        .iter()
        .map(|d| {
            let e = d.result.as_ref().unwrap_err();
            (e.status(), e.message().to_owned())
        })
        .collect();
    assert_eq!(
        messages,
        [
            (
                Status::Config,
                "/vsiaz/badcs/k: AZURE_STORAGE_CONNECTION_STRING is malformed: segment 2 has no '='"
                    .to_owned()
            ),
            (
                Status::Config,
                "/vsiaz/query/k: AZURE_STORAGE_ENDPOINT cannot contain a query".to_owned()
            ),
        ]
    );
    // No endpoint and no account; two IMDS selectors.
    let c = client(&[("AZURE_NO_SIGN_REQUEST", "YES")]);
    let e = c
        .read(&Locator::parse("az://c/k").unwrap(), 0, 1)
        .unwrap_err();
    assert_eq!(
        (e.status(), e.message()),
        (
            Status::Config,
            "/vsiaz/c/k: Azure needs AZURE_STORAGE_ACCOUNT or an explicit endpoint"
        )
    );
    let imds = AzureImds::start();
    let endpoint = imds.endpoint();
    let c = kit_client(
        &server,
        "ok",
        &[
            ("IMDS_ENDPOINT", &endpoint),
            ("AZURE_IMDS_OBJECT_ID", "o"),
            ("AZURE_IMDS_MSI_RES_ID", "r"),
        ],
    );
    let e = c.read(&good, 0, 1).unwrap_err();
    assert_eq!(e.status(), Status::Config, "{e}");
    assert!(imds.requests().is_empty());
    // Nothing to sign with: the exact credentials message.
    let c = kit_client(&server, "ok", &[]);
    let e = c.read(&good, 0, 1).unwrap_err();
    assert_eq!(
        (e.status(), e.message()),
        (
            Status::Credentials,
            "/vsiaz/good/obj: no Azure credentials; configure a SAS, access token or account \
             key, install a custom provider, or set AZURE_NO_SIGN_REQUEST=YES"
        )
    );
}
