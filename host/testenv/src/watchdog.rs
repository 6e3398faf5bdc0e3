//! Runs a component under a shell watchdog that stops it when our end of its stdin closes.
//!
//! The pipe closes when the owning process exits for any reason (a panic, `abort`, SIGKILL),
//! so servers never outlive the test run. This needs no signal handlers and no unsafe
//! `pre_exec`, and unlike `PR_SET_PDEATHSIG` it does not fire when merely the spawning
//! thread (a test's thread) ends. The watchdog exits with the component, so a crashed server
//! is noticed at once.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// `$@` is the component. A reader subshell waits on our pipe (fd 3) and kills the component
/// when it closes; the watchdog itself waits on the component and exits with its status.
const WATCHDOG: &str = r#"exec 3<&0
"$@" </dev/null 3<&- &
child=$!
( read -r _ <&3; kill "$child" 2>/dev/null; sleep 10; kill -9 "$child" 2>/dev/null ) &
reader=$!
exec 3<&-
wait "$child"
status=$?
kill "$reader" 2>/dev/null
exit "$status""#;

/// How long a stopped component gets before the watchdog is killed outright.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// A running component.
pub(crate) struct Watched {
    pub(crate) name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Watched {
    /// Starts `program args` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(name: &'static str, program: &Path, args: &[String], log: &Path) -> std::io::Result<Watched> {
        let out = File::options().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("wasmloop-watchdog")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()?;
        let stdin = child.stdin.take();
        Ok(Watched { name, child, stdin })
    }

    /// True while the component runs.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the component and waits for it (killing it if it ignores SIGTERM).
    pub(crate) fn stop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        let started = Instant::now();
        while self.running() {
            if started.elapsed() > STOP_GRACE {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.wait();
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.stop();
    }
}
