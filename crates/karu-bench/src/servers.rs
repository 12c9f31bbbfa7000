//! The servers the readers read from, and their server-side counts of requests, bytes and
//! connections (never the client's own counters: a reader could under-report). The S3 emulator
//! keeps no log, so its counts come from the latency proxy always put in front of it, which
//! parses the HTTP/1.1 it forwards.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use karu_testkit::{LatencyProxy, RangeServer, content};
use object_store::ObjectStoreExt as _;

use crate::readers::{self, Target};
use crate::sigv4::S3Access;
use crate::workload::{MIB, Workload};
use crate::{Cap, GBIT, Profile};
use crate::{cleanup, plain, say};

/// Round trips [`Server::measure_rtt`] times.
pub const RTT_PROBES: usize = 20;

pub struct Counted {
    pub requests: u64,
    pub bytes: u64,
    pub conns: u64,
}

pub enum Server {
    Testkit {
        server: RangeServer,
        sizes: HashMap<String, u64>,
    },
    Nginx {
        base: String,
        dir: PathBuf,
        /// Set when this program started nginx (and so stops it).
        env_file: Option<PathBuf>,
    },
    /// s3s-fs (strict SigV4), reached path style.
    S3 {
        base: String,
        access: S3Access,
        sizes: HashMap<String, u64>,
        /// Set when this program started it with `scripts/s3.sh` (and so stops it).
        env_file: Option<PathBuf>,
    },
}

/// Where a count starts.
pub enum Mark {
    /// The test kit server's connections accepted and body bytes sent.
    Testkit(u64, u64),
    Nginx(u64),
    /// The proxy's requests, response body bytes and connections.
    Proxy(u64, u64, u64),
}

/// The `export NAME=value` lines of a start script's env file.
fn read_env(file: &Path) -> Result<HashMap<String, String>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.trim_start_matches("export ").split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches(['"', '\'']).to_string()))
        .collect())
}

/// The workloads the S3 rows run: all but S, whose question (what the planner's coalescing
/// costs) does not depend on the server, and whose 1 GiB object would only lengthen the upload.
pub fn on_s3(w: &Workload) -> bool {
    w.id != 'S'
}

impl Server {
    pub fn testkit(workloads: &[Workload]) -> Server {
        let server = RangeServer::start();
        let mut sizes = HashMap::new();
        // A written file is not the test kit's content, which is all this server serves.
        for w in workloads.iter().filter(|w| w.written().is_none()) {
            for (name, size) in &w.objects {
                server.register(name, *size);
                sizes.insert(name.clone(), *size);
            }
        }
        Server::Testkit { server, sizes }
    }

    /// nginx from `KARU_TEST_NGINX_URL`/`KARU_TEST_NGINX_DIR` if set, else (full runs only)
    /// started with `scripts/nginx.sh`, which generates the workloads' files; written files
    /// (P's) are then put in its `www/`.
    pub fn nginx(workloads: &[Workload], quick: bool) -> Result<Option<Server>, String> {
        let files: Vec<(String, u64)> = workloads
            .iter()
            .filter(|w| w.written().is_none())
            .flat_map(|w| w.objects.iter().cloned())
            .collect();
        if let (Ok(url), Ok(dir)) = (
            std::env::var("KARU_TEST_NGINX_URL"),
            std::env::var("KARU_TEST_NGINX_DIR"),
        ) {
            let dir = PathBuf::from(dir);
            // The given nginx must serve our files; say which are missing rather than fail
            // mid-run.
            let missing: Vec<&str> = files
                .iter()
                .filter(|(n, s)| {
                    std::fs::metadata(dir.join("www").join(n))
                        .map(|m| m.len())
                        .ok()
                        != Some(*s)
                })
                .map(|(n, _)| n.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "KARU_TEST_NGINX_URL is set but its www/ lacks {} (start it with \
                     KARU_NGINX_FILES listing them, or unset it to let karu-bench start one)",
                    missing.join(", ")
                ));
            }
            put_written(&dir, workloads)?;
            return Ok(Some(Server::Nginx {
                base: url.trim_end_matches('/').to_string(),
                dir,
                env_file: None,
            }));
        }
        if quick {
            return Ok(None);
        }
        let env_file =
            std::env::temp_dir().join(format!("karu-bench-nginx-{}.env", std::process::id()));
        let list: Vec<String> = files.iter().map(|(n, s)| format!("{n}:{s}")).collect();
        say!(
            "starting nginx (scripts/nginx.sh) and generating {} files",
            list.len()
        );
        let env = start_script(
            "scripts/nginx.sh",
            &env_file,
            &[("KARU_NGINX_FILES", list.join(" "))],
        )?;
        let (Some(url), Some(dir)) = (
            env.get("KARU_TEST_NGINX_URL"),
            env.get("KARU_TEST_NGINX_DIR"),
        ) else {
            cleanup::stop(&env_file);
            return Err(format!("{} lacks the nginx endpoints", env_file.display()));
        };
        let server = Server::Nginx {
            base: url.trim_end_matches('/').to_string(),
            dir: PathBuf::from(dir),
            env_file: Some(env_file),
        };
        // On an error, dropping the server stops it.
        put_written(&PathBuf::from(dir), workloads)?;
        Ok(Some(server))
    }

    /// s3s-fs from `KARU_TEST_S3S_URL` and its keys and bucket if set, else started with
    /// `scripts/s3.sh`; then the objects of the workloads that run on it are uploaded (through
    /// object_store, which s3s-fs then serves with a stored ETag) unless already there.
    pub fn s3(workloads: &[Workload]) -> Result<Server, String> {
        const VARS: [&str; 4] = [
            "KARU_TEST_S3S_URL",
            "KARU_TEST_S3S_ACCESS_KEY_ID",
            "KARU_TEST_S3S_SECRET_ACCESS_KEY",
            "KARU_TEST_S3_BUCKET",
        ];
        let given: HashMap<String, String> = VARS
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect();
        let (env, env_file) = if given.len() == VARS.len() {
            (given, None)
        } else {
            let script = crate::repo_root().join("scripts/s3.sh");
            if !script.exists() {
                return Err("scripts/s3.sh is not in this checkout".into());
            }
            let env_file =
                std::env::temp_dir().join(format!("karu-bench-s3-{}.env", std::process::id()));
            say!("starting the S3 emulators (scripts/s3.sh)");
            (
                start_script("scripts/s3.sh", &env_file, &[])?,
                Some(env_file),
            )
        };
        let [url, key_id, secret, bucket] = VARS.map(|k| env.get(k).cloned());
        let (Some(url), Some(key_id), Some(secret), Some(bucket)) = (url, key_id, secret, bucket)
        else {
            if let Some(f) = &env_file {
                cleanup::stop(f);
            }
            return Err("the S3 env file lacks an endpoint or a key".into());
        };
        let server = Server::S3 {
            base: url.trim_end_matches('/').to_string(),
            access: S3Access {
                key_id,
                secret,
                bucket,
            },
            sizes: workloads
                .iter()
                .filter(|w| on_s3(w))
                .flat_map(|w| w.objects.iter().cloned())
                .collect(),
            env_file,
        };
        // On an error, dropping the server stops what was started.
        server.upload(workloads)?;
        Ok(server)
    }

    /// Puts every object the S3 rows read that is not there yet with its size, and every
    /// written file (which a size does not identify).
    fn upload(&self, workloads: &[Workload]) -> Result<(), String> {
        let store = readers::store(&self.target(self.base()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let objects = workloads
            .iter()
            .filter(|w| on_s3(w))
            .flat_map(|w| w.objects.iter().map(move |o| (o, w.written())));
        rt.block_on(async {
            for ((name, size), written) in objects {
                let path = object_store::path::Path::from(name.as_str());
                if written.is_none() && store.head(&path).await.is_ok_and(|m| m.size == *size) {
                    continue;
                }
                say!("uploading {name} ({} MiB) to s3s-fs", size / MIB);
                let data = written
                    .cloned()
                    .unwrap_or_else(|| content::bytes(name, 0, *size as usize).into());
                store
                    .put(&path, data.into())
                    .await
                    .map_err(|e| format!("upload of {name}: {e}"))?;
            }
            Ok(())
        })
    }

    /// Whether this server runs `w` under `profile`. The test kit server carries the full
    /// matrix; the whole matrix again for each other server would not fit the run-time
    /// budget, so nginx and s3s-fs run the uncapped profiles at 0 and 20 ms, and s3s-fs also
    /// the 1 Gbit/s one at 20 ms; in quick mode s3s-fs runs RTT 0 only (its start and upload
    /// already take a share of the two minutes).
    /// P (issue 16) runs at RTT 0, 20 ms, and 20 ms at 1 Gbit/s on both (RTT 0 in quick mode).
    pub fn runs(&self, w: &Workload, profile: Profile, quick: bool) -> bool {
        let at = |rtt_ms, cap| profile == Profile::new(rtt_ms, cap);
        let gbit = Some(Cap::Total(GBIT));
        if w.written().is_some() {
            return self.serves(w) && (at(0, None) || !quick && (at(20, None) || at(20, gbit)));
        }
        self.serves(w)
            && match self {
                Server::Testkit { .. } => true,
                Server::Nginx { .. } => at(0, None) || at(20, None),
                Server::S3 { .. } => at(0, None) || !quick && (at(20, None) || at(20, gbit)),
            }
    }

    /// Whether this server has `w`'s objects at all (s3s-fs gets no S; the test kit server,
    /// whose objects are its generated content, no written file).
    pub fn serves(&self, w: &Workload) -> bool {
        match self {
            Server::Testkit { .. } => w.written().is_none(),
            Server::Nginx { .. } => true,
            Server::S3 { .. } => on_s3(w),
        }
    }

    /// Whether every request must go through a proxy, which then does the counting.
    pub fn counted_by_proxy(&self) -> bool {
        matches!(self, Server::S3 { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Server::Testkit { .. } => "testkit",
            Server::Nginx { .. } => "nginx",
            Server::S3 { .. } => "s3s-fs",
        }
    }

    /// The readers' view of this server's objects when its requests go to `base`.
    pub fn target(&self, base: String) -> Target {
        match self {
            Server::Testkit { .. } => Target {
                base,
                prefix: "ok/".into(),
                s3: None,
            },
            Server::Nginx { .. } => Target {
                base,
                prefix: String::new(),
                s3: None,
            },
            Server::S3 { access, .. } => Target {
                base,
                prefix: String::new(),
                s3: Some(access.clone()),
            },
        }
    }

    pub fn base(&self) -> String {
        match self {
            Server::Testkit { server, .. } => format!("http://{}", server.addr()),
            Server::Nginx { base, .. } | Server::S3 { base, .. } => base.clone(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        plain::addr_of(&self.base())
    }

    /// The largest object the server holds: what the yardsticks read.
    fn yardstick(&self) -> (String, u64) {
        match self {
            Server::Testkit { sizes, .. } | Server::S3 { sizes, .. } => {
                sizes.iter().max_by_key(|e| e.1)
            }
            Server::Nginx { .. } => None,
        }
        .map(|(n, s)| (n.clone(), *s))
        .unwrap_or_else(|| self.largest_nginx_file())
    }

    /// The smallest round trip of a 1-byte range GET on one keep-alive connection to `base`
    /// ([`RTT_PROBES`] one after another; the first, which opens the connection, not counted).
    /// The proxy's delays end on tokio's millisecond ticks, so its round trips run longer than
    /// the profile says (5 ms: 6.3 ms at least, 20 ms: 21.6 ms; 2026-12-07).
    pub fn measure_rtt(&self, base: &str) -> Duration {
        let (name, _) = self.yardstick();
        let target = self.target(base.to_string());
        let path = target.path(&name);
        let mut c = plain::Conn::open(plain::addr_of(base), target.s3.as_ref());
        let mut body = Vec::new();
        c.get(&path, "0-0", &mut body);
        (0..RTT_PROBES)
            .map(|_| {
                let t = Instant::now();
                c.get(&path, "0-0", &mut body);
                t.elapsed()
            })
            .min()
            .unwrap_or_default()
    }

    /// Bytes per second a plain client with 16 connections gets from the largest object on
    /// `base` (256 MiB in 8 MiB ranges, best of two).
    pub fn measure_bandwidth(&self, base: &str) -> f64 {
        let (name, size) = self.yardstick();
        let chunk = 8 * MIB;
        let ranges: Vec<(u64, u64)> = (0..32)
            .map(|i| ((i * chunk) % (size / chunk).max(1) * chunk, chunk.min(size)))
            .collect();
        let target = self.target(base.to_string());
        let path = target.path(&name);
        (0..2)
            .map(|_| {
                let (wall, bytes) =
                    plain::parallel(plain::addr_of(base), &path, &ranges, 16, target.s3.as_ref());
                bytes as f64 / wall.as_secs_f64()
            })
            .fold(0.0, f64::max)
    }

    fn largest_nginx_file(&self) -> (String, u64) {
        let Server::Nginx { dir, .. } = self else {
            unreachable!()
        };
        std::fs::read_dir(dir.join("www"))
            .expect("nginx www")
            .flatten()
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.metadata().ok()?.len())))
            .max_by_key(|e| e.1)
            .expect("a file")
    }

    /// Starts a count; `proxy` is the one in front of the server for this profile.
    pub fn begin(&self, proxy: Option<&LatencyProxy>) -> Mark {
        match self {
            Server::S3 { .. } => {
                let p = proxy.expect("s3s-fs is always behind a proxy");
                Mark::Proxy(p.requests(), p.response_body_bytes(), p.connections())
            }
            Server::Testkit { server, .. } => {
                server.clear_log();
                Mark::Testkit(server.connections_accepted(), server.body_bytes_sent())
            }
            Server::Nginx { dir, .. } => {
                Mark::Nginx(std::fs::metadata(dir.join("access.log")).map_or(0, |m| m.len()))
            }
        }
    }

    pub fn end(&self, mark: Mark, proxy: Option<&LatencyProxy>) -> Counted {
        match (self, mark) {
            (Server::S3 { .. }, Mark::Proxy(r, b, c)) => {
                let p = proxy.expect("s3s-fs is always behind a proxy");
                Counted {
                    requests: p.requests() - r,
                    bytes: p.response_body_bytes() - b,
                    conns: p.connections() - c,
                }
            }
            (Server::Testkit { server, .. }, Mark::Testkit(c0, b0)) => Counted {
                requests: server.log().len() as u64,
                bytes: server.body_bytes_sent() - b0,
                conns: server.connections_accepted() - c0,
            },
            (Server::Nginx { dir, .. }, Mark::Nginx(at)) => {
                // nginx writes each access-log line when the request ends; the child has
                // exited, so its lines are all there.
                let text = std::fs::read(dir.join("access.log")).unwrap_or_default();
                let new =
                    String::from_utf8_lossy(&text[(at as usize).min(text.len())..]).into_owned();
                let mut requests = 0;
                let mut bytes = 0;
                let mut conns = HashSet::new();
                for line in new.lines() {
                    // ... "GET /x HTTP/1.1" 206 65536 range="..." if_match="..." conn=N/M
                    let Some(req_end) = line.find("HTTP/1.1\" ") else {
                        continue;
                    };
                    let mut f = line[req_end + 10..].split(' ');
                    let _status = f.next();
                    bytes += f.next().and_then(|b| b.parse::<u64>().ok()).unwrap_or(0);
                    if let Some(c) = line.rsplit_once("conn=").map(|(_, c)| c) {
                        conns.insert(c.split('/').next().unwrap_or("").to_string());
                    }
                    requests += 1;
                }
                Counted {
                    requests,
                    bytes,
                    conns: conns.len() as u64,
                }
            }
            _ => unreachable!("a mark from another server"),
        }
    }
}

/// Stops the servers this program started (see [`cleanup`] for the other ways out).
impl Drop for Server {
    fn drop(&mut self) {
        if let Server::Nginx {
            env_file: Some(f), ..
        }
        | Server::S3 {
            env_file: Some(f), ..
        } = self
        {
            cleanup::stop(f);
        }
    }
}

/// Writes the workloads' written files (P's) into nginx's `www/` under `dir`.
fn put_written(dir: &Path, workloads: &[Workload]) -> Result<(), String> {
    for w in workloads {
        if let Some(bytes) = w.written() {
            for (name, _) in &w.objects {
                let path = dir.join("www").join(name);
                std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Runs `script start ENV_FILE` (see [`cleanup::start`]) and reads the env file it wrote; on a
/// failure, stops what it may have started.
fn start_script(
    script: &'static str,
    env_file: &Path,
    vars: &[(&str, String)],
) -> Result<HashMap<String, String>, String> {
    let env = match cleanup::start(script, env_file, vars) {
        Ok(s) if s.success() => read_env(env_file),
        Ok(s) => Err(format!("{script} start: {s}")),
        Err(e) => Err(format!("{script}: {e}")),
    };
    if env.is_err() {
        cleanup::stop(env_file);
    }
    env
}
