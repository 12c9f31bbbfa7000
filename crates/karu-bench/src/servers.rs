//! The servers the readers read from, and their server-side counts of requests, bytes and
//! connections (never the client's own counters: a reader could under-report).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use karu_testkit::RangeServer;
use karu_testkit::server::Logged;

use crate::plain;
use crate::workload::{MIB, Workload};

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
}

/// Where a count starts.
pub enum Mark {
    Testkit(u64),
    Nginx(u64),
}

impl Server {
    pub fn testkit(workloads: &[Workload]) -> Server {
        let server = RangeServer::start();
        let mut sizes = HashMap::new();
        for w in workloads {
            for (name, size) in &w.objects {
                server.register(name, *size);
                sizes.insert(name.clone(), *size);
            }
        }
        Server::Testkit { server, sizes }
    }

    /// nginx from `KARU_TEST_NGINX_URL`/`KARU_TEST_NGINX_DIR` if set, else (full runs only)
    /// started with `scripts/nginx.sh`, which generates the workloads' files.
    pub fn nginx(workloads: &[Workload], quick: bool) -> Result<Option<Server>, String> {
        let files: Vec<(String, u64)> = workloads
            .iter()
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
        eprintln!(
            "starting nginx (scripts/nginx.sh) and generating {} files",
            list.len()
        );
        let status = Command::new("bash")
            .arg(crate::repo_root().join("scripts/nginx.sh"))
            .arg("start")
            .arg(&env_file)
            .env("KARU_NGINX_FILES", list.join(" "))
            .status()
            .map_err(|e| format!("scripts/nginx.sh: {e}"))?;
        if !status.success() {
            return Err(format!("scripts/nginx.sh start: {status}"));
        }
        let text = std::fs::read_to_string(&env_file).map_err(|e| e.to_string())?;
        let get = |k: &str| {
            text.lines()
                .filter_map(|l| l.trim_start_matches("export ").split_once('='))
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.trim_matches(['"', '\'']).to_string())
        };
        let (Some(url), Some(dir)) = (get("KARU_TEST_NGINX_URL"), get("KARU_TEST_NGINX_DIR"))
        else {
            return Err(format!("{} lacks the nginx endpoints", env_file.display()));
        };
        Ok(Some(Server::Nginx {
            base: url.trim_end_matches('/').to_string(),
            dir: PathBuf::from(dir),
            env_file: Some(env_file),
        }))
    }

    pub fn stop(self) {
        if let Server::Nginx {
            env_file: Some(env_file),
            ..
        } = self
        {
            let _ = Command::new("bash")
                .arg(crate::repo_root().join("scripts/nginx.sh"))
                .arg("stop")
                .arg(&env_file)
                .status();
            let _ = std::fs::remove_file(env_file);
        }
    }

    pub fn is_nginx(&self) -> bool {
        matches!(self, Server::Nginx { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Server::Testkit { .. } => "testkit",
            Server::Nginx { .. } => "nginx",
        }
    }

    /// The path before an object's name.
    pub fn prefix(&self) -> &'static str {
        match self {
            Server::Testkit { .. } => "ok/",
            Server::Nginx { .. } => "",
        }
    }

    pub fn base(&self) -> String {
        match self {
            Server::Testkit { server, .. } => format!("http://{}", server.addr()),
            Server::Nginx { base, .. } => base.clone(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        plain::addr_of(&self.base())
    }

    /// Bytes per second a plain client with 16 connections gets from the largest object on
    /// `base` (256 MiB in 8 MiB ranges, best of two).
    pub fn measure_bandwidth(&self, base: &str) -> f64 {
        let (name, size) = match self {
            Server::Testkit { sizes, .. } => sizes.iter().max_by_key(|e| e.1),
            Server::Nginx { .. } => None,
        }
        .map(|(n, s)| (n.clone(), *s))
        .unwrap_or_else(|| self.largest_nginx_file());
        let chunk = 8 * MIB;
        let ranges: Vec<(u64, u64)> = (0..32)
            .map(|i| ((i * chunk) % (size / chunk).max(1) * chunk, chunk.min(size)))
            .collect();
        let target = format!("/{}{name}", self.prefix());
        (0..2)
            .map(|_| {
                let (wall, bytes) = plain::parallel(plain::addr_of(base), &target, &ranges, 16);
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

    pub fn begin(&self) -> Mark {
        match self {
            Server::Testkit { server, .. } => {
                server.clear_log();
                Mark::Testkit(server.connections_accepted())
            }
            Server::Nginx { dir, .. } => {
                Mark::Nginx(std::fs::metadata(dir.join("access.log")).map_or(0, |m| m.len()))
            }
        }
    }

    pub fn end(&self, mark: Mark) -> Counted {
        match (self, mark) {
            (Server::Testkit { server, sizes }, Mark::Testkit(c0)) => {
                let log = server.log();
                let bytes = log.iter().map(|l| served(l, sizes)).sum();
                Counted {
                    requests: log.len() as u64,
                    bytes,
                    conns: server.connections_accepted() - c0,
                }
            }
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

/// Body bytes the test kit server sent for one logged request, from its status and range.
fn served(l: &Logged, sizes: &HashMap<String, u64>) -> u64 {
    if l.method == "HEAD" {
        return 0;
    }
    let size = sizes.get(&l.name).copied().unwrap_or(0);
    match (l.status, l.range.as_deref()) {
        (200, _) => size,
        (206, Some(r)) => {
            let Some((f, e)) = r.strip_prefix("bytes=").and_then(|r| r.split_once('-')) else {
                return 0;
            };
            match (f.parse::<u64>(), e.parse::<u64>()) {
                (Ok(f), Ok(e)) => e.min(size - 1) + 1 - f,
                (Ok(f), Err(_)) => size - f,
                (Err(_), Ok(n)) => n.min(size),
                _ => 0,
            }
        }
        _ => 0,
    }
}
