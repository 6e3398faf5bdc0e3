//! `wasmloop-control-plane up|down|env|serve`: a local control plane for trying plugins
//! without a cluster. `scripts/control-plane` wraps it.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use wasmloop_testenv::ControlPlane;

/// Runs etcd, kube-apiserver and kube-controller-manager on 127.0.0.1.
#[derive(Parser)]
#[command(name = "wasmloop-control-plane", about)]
struct Cli {
    /// Where the running plane keeps its state (pid, kubeconfig, log).
    #[arg(long, env = "WASMLOOP_CONTROL_PLANE_DIR")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the control plane in the background and print the `export KUBECONFIG=...` line.
    Up,
    /// Stop it.
    Down,
    /// Print the `export KUBECONFIG=...` line of the running plane.
    Env,
    /// Run it in the foreground until interrupted (what `up` starts).
    Serve,
}

fn state_dir(cli: &Cli) -> anyhow::Result<PathBuf> {
    let dir = match &cli.state_dir {
        Some(d) => d.clone(),
        None => dirs::cache_dir().context("no user cache directory; pass --state-dir")?.join("wasmloop/control-plane"),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

fn running_pid(dir: &std::path::Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join("pid")).ok()?.trim().parse().ok()?;
    PathBuf::from(format!("/proc/{pid}")).exists().then_some(pid)
}

fn env_line(dir: &std::path::Path) -> String {
    format!("export KUBECONFIG={}", dir.join("kubeconfig").display())
}

fn up(dir: &std::path::Path) -> anyhow::Result<()> {
    if running_pid(dir).is_some() && dir.join("ready").exists() {
        println!("{}", env_line(dir));
        return Ok(());
    }
    let _ = std::fs::remove_file(dir.join("ready"));
    let log = std::fs::File::create(dir.join("serve.log"))?;
    let mut child = Command::new("setsid")
        .arg(std::env::current_exe()?)
        .arg("--state-dir")
        .arg(dir)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("cannot start the control plane in the background (is setsid installed?)")?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(600) {
        if dir.join("ready").exists() {
            eprintln!("control plane is up; stop it with scripts/control-plane down");
            println!("{}", env_line(dir));
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!("the control plane exited ({status}); see {}", dir.join("serve.log").display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("the control plane did not start within 10 minutes; see {}", dir.join("serve.log").display())
}

fn down(dir: &std::path::Path) -> anyhow::Result<()> {
    let Some(pid) = running_pid(dir) else {
        eprintln!("no control plane is running");
        return Ok(());
    };
    Command::new("kill").arg(pid.to_string()).status()?;
    let started = Instant::now();
    while PathBuf::from(format!("/proc/{pid}")).exists() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(dir.join("ready"));
    eprintln!("control plane stopped");
    Ok(())
}

async fn serve(dir: &std::path::Path) -> anyhow::Result<()> {
    let plane = ControlPlane::start().await?;
    std::fs::copy(plane.kubeconfig(), dir.join("kubeconfig"))?;
    std::fs::write(dir.join("pid"), std::process::id().to_string())?;
    std::fs::write(dir.join("ready"), plane.server())?;
    eprintln!("control plane at {} (logs in {})", plane.server(), plane.dir().display());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    plane.stop();
    let _ = std::fs::remove_file(dir.join("ready"));
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let dir = state_dir(&cli)?;
    match cli.command {
        Cmd::Up => up(&dir),
        Cmd::Down => down(&dir),
        Cmd::Env => match running_pid(&dir) {
            Some(_) => {
                println!("{}", env_line(&dir));
                Ok(())
            }
            None => bail!("no control plane is running; start one with scripts/control-plane up"),
        },
        Cmd::Serve => tokio::runtime::Runtime::new()?.block_on(serve(&dir)),
    }
}
