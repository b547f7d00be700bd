use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (by PID) when dropped; its output goes to a log file that is
/// printed when a test fails.
pub struct Proc {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, String)],
        log_dir: &Path,
    ) -> Proc {
        let log = log_dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("create log");
        let err = out.try_clone().expect("clone log");
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({}): {e}", program.display()));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics (with the log) if the process has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited with {status}:\n{}", self.name, self.tail(60));
        }
    }

    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the process to stop (SIGTERM) and returns at once.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Asks the process to stop (SIGTERM), then kills it after `grace`.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test blocks until its child exits: nothing else on its runtime needs to run meanwhile"
    )]
    pub fn stop(&mut self, grace: Duration) {
        self.terminate();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- {} log (last 80 lines) ----\n{}",
                self.name,
                self.tail(80)
            );
        }
    }
}

/// Polls `url` until it answers 200 or `timeout` passes.
pub async fn wait_http_ok(url: &str, timeout: Duration) -> bool {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(r) = client.get(url).send().await
            && r.status().is_success()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
