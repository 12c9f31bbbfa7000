//! The `credential_process` runner (spec §5.11): a shell command in its own process group,
//! its stdout read up to 1 MiB, the whole group killed at the read's deadline, and the JSON
//! it prints turned into credentials.

use std::io::Read;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{LoadContext, timestamp};
use crate::config::Credentials;
use crate::error::{Error, Result, Status};

/// Largest output read from a helper.
const OUTPUT_LIMIT: usize = 1 << 20;

/// Runs `command` for `ctx.path` and parses what it prints. `label` ("AWS" or "Source")
/// starts every message.
pub(super) fn credentials(ctx: &LoadContext, label: &str, command: &str) -> Result<Credentials> {
    let fail = |status: Status, what: &str| {
        Error::new(
            status,
            format!("{}: {label} credential_process {what}", ctx.path),
        )
    };
    let output = match run(command, ctx.deadline) {
        Ok(out) => out,
        Err(Failure::Start(e)) => {
            return Err(fail(Status::Credentials, &format!("could not start: {e}")));
        }
        Err(Failure::Timeout) => {
            return Err(fail(Status::Timeout, "exceeded the request timeout"));
        }
        Err(Failure::TooLarge) => {
            return Err(fail(Status::Credentials, "returned more than 1 MiB"));
        }
        Err(Failure::Exit(code)) => {
            return Err(fail(
                Status::Credentials,
                &format!("exited with status {code}"),
            ));
        }
    };
    parse(&output).map_err(|what| fail(Status::Credentials, what))
}

/// The credentials in a helper's output (version 1 JSON), or what is wrong with it, for
/// "<label> credential_process <what>". The output holds secrets: no message quotes it.
pub(crate) fn parse(output: &[u8]) -> std::result::Result<Credentials, &'static str> {
    let json: Value = serde_json::from_slice(output).map_err(|_| "response is not valid JSON")?;
    let field = |name: &str| {
        json.get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let (Some(id), Some(secret)) = (field("AccessKeyId"), field("SecretAccessKey")) else {
        return Err("response is incomplete");
    };
    let expires_at = match field("Expiration") {
        None => None,
        Some(text) => Some(timestamp::parse(text).ok_or("response has an invalid Expiration")?),
    };
    Ok(Credentials {
        access_key_id: id.to_owned(),
        secret_access_key: secret.to_owned(),
        session_token: field("Token")
            .or_else(|| field("SessionToken"))
            .unwrap_or_default()
            .to_owned(),
        expires_at,
        ..Credentials::default()
    })
}

/// Why a helper produced no usable output.
#[derive(Debug)]
enum Failure {
    /// It could not be spawned.
    Start(std::io::Error),
    /// The deadline passed; its group was killed.
    Timeout,
    /// It printed more than [`OUTPUT_LIMIT`]; its group was killed.
    TooLarge,
    /// It exited unsuccessfully: its status, or 128 + the signal that ended it.
    Exit(i32),
}

/// Runs `command` through the platform shell and returns its standard output.
fn run(command: &str, deadline: Option<Instant>) -> std::result::Result<Vec<u8>, Failure> {
    if deadline.is_some_and(|d| d <= Instant::now()) {
        return Err(Failure::Timeout);
    }
    let mut child = platform::shell(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(Failure::Start)?;
    let mut stdout = child.stdout.take().expect("stdout is piped");

    // A reader thread lets this one wait for output with a deadline.
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("karu-credential-process".into())
        .spawn(move || {
            let mut out = Vec::new();
            let read = (&mut stdout)
                .take(OUTPUT_LIMIT as u64 + 1)
                .read_to_end(&mut out);
            let _ = tx.send(read.map(|_| out));
        })
        .map_err(|e| {
            platform::kill_group(&mut child);
            Failure::Start(e)
        })?;

    let received = match deadline {
        Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
        None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
    };
    let output = match received {
        Ok(Ok(out)) if out.len() <= OUTPUT_LIMIT => out,
        Ok(Ok(_)) => return Err(stop(&mut child, Failure::TooLarge)),
        // A failed read of the pipe leaves nothing to parse; the exit status says why.
        Ok(Err(_)) => Vec::new(),
        Err(mpsc::RecvTimeoutError::Timeout) => return Err(stop(&mut child, Failure::Timeout)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Vec::new(),
    };
    match wait(&mut child, deadline) {
        Some(status) if status.success() => Ok(output),
        Some(status) => Err(Failure::Exit(platform::exit_code(status))),
        None => Err(stop(&mut child, Failure::Timeout)),
    }
}

/// Kills the helper's group, reaps it, and returns `why`.
fn stop(child: &mut Child, why: Failure) -> Failure {
    platform::kill_group(child);
    let _ = child.wait();
    why
}

/// Waits for the helper to exit, until `deadline`.
fn wait(child: &mut Child, deadline: Option<Instant>) -> Option<ExitStatus> {
    let Some(deadline) = deadline else {
        return child.wait().ok();
    };
    // Output has ended, so the exit is normally a moment away: poll briefly.
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            _ => return None,
        }
    }
}

#[cfg(unix)]
mod platform {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Child, Command, ExitStatus};

    /// `/bin/sh -c <command>` as the leader of a new process group.
    pub(super) fn shell(command: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(command).process_group(0);
        c
    }

    /// Kills every process of the helper's group (the shell and what it started).
    pub(super) fn kill_group(child: &mut Child) {
        if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) takes plain integers; a negative pid names the group the
            // helper leads, which only it and its descendants are in.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    /// The exit status, or 128 + the signal number for a helper ended by a signal.
    pub(super) fn exit_code(status: ExitStatus) -> i32 {
        status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(-1)
    }
}

#[cfg(not(unix))]
mod platform {
    use std::process::{Child, Command, ExitStatus};

    /// `%COMSPEC% /D /S /C <command>` (default `C:\Windows\System32\cmd.exe`).
    pub(super) fn shell(command: &str) -> Command {
        let comspec =
            std::env::var_os("COMSPEC").unwrap_or_else(|| r"C:\Windows\System32\cmd.exe".into());
        let mut c = Command::new(comspec);
        c.args(["/D", "/S", "/C"]).arg(command);
        c
    }

    /// Kills the helper (std has no job objects: its own children may outlive it).
    pub(super) fn kill_group(child: &mut Child) {
        let _ = child.kill();
    }

    /// The exit status.
    pub(super) fn exit_code(status: ExitStatus) -> i32 {
        status.code().unwrap_or(-1)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::credentials::test_support::{settings, with_context};
    use std::time::{SystemTime, UNIX_EPOCH};

    const PATH: &str = "/vsis3/b/k";

    fn run_for(command: &str, timeout: Option<Duration>) -> Result<Credentials> {
        let deadline = timeout.map(|t| Instant::now() + t);
        with_context(&settings(&[]), PATH, deadline, |ctx| {
            credentials(ctx, "AWS", command)
        })
    }

    fn failure(command: &str) -> Error {
        run_for(command, Some(Duration::from_secs(10))).unwrap_err()
    }

    #[test]
    fn parses_keys_token_and_expiration() {
        let c = run_for(
            r#"echo '{"Version": 1, "AccessKeyId": "AK", "SecretAccessKey": "SK",
                "SessionToken": "ST", "Expiration": "2030-01-02T03:04:05Z"}'"#,
            Some(Duration::from_secs(10)),
        )
        .unwrap();
        assert_eq!(c.access_key_id, "AK");
        assert_eq!(c.secret_access_key, "SK");
        assert_eq!(c.session_token, "ST");
        assert_eq!(
            c.expires_at,
            Some(UNIX_EPOCH + Duration::from_secs(1_893_553_445))
        );

        // `Token` wins over `SessionToken`; no deadline, no Expiration.
        let c = run_for(
            r#"printf '{"AccessKeyId":"AK","SecretAccessKey":"SK","Token":"T","SessionToken":"S"}'"#,
            None,
        )
        .unwrap();
        assert_eq!((c.session_token.as_str(), c.expires_at), ("T", None));
    }

    #[test]
    fn bad_responses() {
        for (command, message) in [
            (
                r#"echo '{"AccessKeyId":"AK"}'"#,
                "AWS credential_process response is incomplete",
            ),
            (
                r#"echo '{"AccessKeyId":"AK","SecretAccessKey":""}'"#,
                "AWS credential_process response is incomplete",
            ),
            (
                r#"echo '{"AccessKeyId":"AK","SecretAccessKey":7}'"#,
                "AWS credential_process response is incomplete",
            ),
            (
                "echo secret-looking-garbage",
                "AWS credential_process response is not valid JSON",
            ),
            ("true", "AWS credential_process response is not valid JSON"),
            (
                r#"echo '{"AccessKeyId":"AK","SecretAccessKey":"SK","Expiration":"later"}'"#,
                "AWS credential_process response has an invalid Expiration",
            ),
            (
                "echo '{}'; exit 3",
                "AWS credential_process exited with status 3",
            ),
            (
                "kill -9 $$",
                "AWS credential_process exited with status 137",
            ),
            (
                "kill -TERM $$",
                "AWS credential_process exited with status 143",
            ),
            (
                "/nonexistent/helper 2>/dev/null",
                "AWS credential_process exited with status 127",
            ),
        ] {
            let e = failure(command);
            assert_eq!(e.status(), Status::Credentials, "{command}");
            assert_eq!(e.message(), format!("{PATH}: {message}"), "{command}");
            assert!(!e.message().contains("secret-looking"));
        }
    }

    #[test]
    fn output_over_one_mib_kills_the_group() {
        let started = Instant::now();
        let e = failure("yes");
        assert_eq!(e.status(), Status::Credentials);
        assert_eq!(
            e.message(),
            format!("{PATH}: AWS credential_process returned more than 1 MiB")
        );
        assert!(started.elapsed() < Duration::from_secs(5));

        // Exactly 1 MiB is accepted (and then is not JSON).
        let e = failure("head -c 1048576 /dev/zero | tr '\\0' ' '");
        assert_eq!(
            e.message(),
            format!("{PATH}: AWS credential_process response is not valid JSON")
        );
    }

    /// True once `pid` is gone or a zombie.
    fn is_dead(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    #[test]
    fn deadline_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // The grandchild holds stdout open and would outlive a shell killed alone.
        let command = format!("sleep 30 & echo $! > '{}'; wait", pid_file.display());
        let started = Instant::now();
        let e = run_for(&command, Some(Duration::from_millis(500))).unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.status(), Status::Timeout);
        assert_eq!(
            e.message(),
            format!("{PATH}: AWS credential_process exceeded the request timeout")
        );
        assert!(took >= Duration::from_millis(500), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let pid = pid.trim();
        let gone_by = Instant::now() + Duration::from_secs(5);
        while !is_dead(pid) && Instant::now() < gone_by {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(is_dead(pid), "grandchild {pid} survived");
    }

    #[test]
    fn deadline_after_output_closed() {
        // The helper closes stdout but keeps running: the wait is bounded too.
        let e = run_for("exec >&-; sleep 30", Some(Duration::from_millis(300))).unwrap_err();
        assert_eq!(e.status(), Status::Timeout);
        // A deadline already past never starts the helper.
        let e = with_context(&settings(&[]), PATH, Some(Instant::now()), |ctx| {
            credentials(ctx, "Source", "echo never")
        })
        .unwrap_err();
        assert_eq!(
            (e.status(), e.message()),
            (
                Status::Timeout,
                "/vsis3/b/k: Source credential_process exceeded the request timeout"
            )
        );
    }

    #[test]
    fn expiration_is_kept_even_when_past() {
        // Rejecting expired values is the cache's business (`load_native`).
        let c = run_for(
            r#"echo '{"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"2000-01-01T00:00:00Z"}'"#,
            None,
        )
        .unwrap();
        assert!(c.expires_at.unwrap() < SystemTime::now());
    }
}
