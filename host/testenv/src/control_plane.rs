//! Starting, stopping and talking to the control plane.
//!
//! One plane per test binary ([`crate::shared`]), one namespace per test. etcd keeps its data
//! on tmpfs and runs with `--unsafe-no-fsync` (a test cluster lives for one run); at the next
//! start, run directories beyond the last four, kept for inspection, are removed, and so is
//! every finished run's etcd data. kube-apiserver runs with `--endpoint-reconciler-type=none`
//! (a current server refuses a loopback advertise address for its endpoint reconciler; envtest
//! passes the same). kube-controller-manager runs garbage collection, namespaces, service
//! accounts and role aggregation ([`Controllers::Core`]); a test binary that needs Deployments
//! to become Pods starts its own plane with [`Controllers::WithWorkloads`]
//! (`host/tests/run_deploy.rs`), so no other test's hand-set Deployment status is overwritten.
//! A panic in any test prints where the component logs are. Supported versions:
//! `docs/kubernetes-versions.md`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::binaries::{Binaries, BinariesError};
use crate::watchdog::Watched;

/// How long a component may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// No binaries.
    #[error(transparent)]
    Binaries(#[from] BinariesError),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A component did not become ready.
    #[error("{component} did not become ready within {secs} s: {detail}; its log is {log}", secs = READY_TIMEOUT.as_secs())]
    NotReady {
        /// Which component.
        component: &'static str,
        /// The last error seen.
        detail: String,
        /// Its log file.
        log: String,
    },
    /// The kube client could not be built.
    #[error("cannot build a client for the control plane: {0}")]
    Client(String),
}

/// Which controllers kube-controller-manager runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Controllers {
    /// Garbage collection, namespace deletion, service accounts and their tokens, and role
    /// aggregation: what the host relies on. Nothing acts on Deployments, so a test may set
    /// a Deployment's status by hand.
    #[default]
    Core,
    /// Core, and the Deployment and ReplicaSet controllers: a Deployment gets its ReplicaSet and
    /// Pods (created, never run: there is no kubelet), through admission such as PodSecurity.
    WithWorkloads,
}

impl Controllers {
    fn flag(self) -> &'static str {
        match self {
            Controllers::Core => {
                "--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token,clusterrole-aggregation"
            }
            Controllers::WithWorkloads => {
                "--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token,clusterrole-aggregation,deployment,replicaset"
            }
        }
    }
}

/// The audit log's file name in the run directory.
const AUDIT_LOG: &str = "audit.log";

/// Metadata of every request, once it completes.
const AUDIT_POLICY: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ControlPlaneError {
    let what = what.into();
    move |source| ControlPlaneError::Io { what, source }
}

/// `N` distinct free ports on 127.0.0.1. Every listener is held until all are chosen: a port
/// released before the next bind can be handed out again, and two components given one port
/// fail the start with "address already in use".
fn free_ports<const N: usize>() -> Result<[u16; N], ControlPlaneError> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0; N];
    for port in &mut ports {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(io("cannot find a free port on 127.0.0.1"))?;
        *port = listener.local_addr().map_err(io("cannot read a bound port"))?.port();
        listeners.push(listener);
    }
    Ok(ports)
}

fn token() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("wasmloop-{:x}{:x}", nanos, std::process::id())
}

/// A running control plane: etcd, kube-apiserver and (when its binary is present)
/// kube-controller-manager, all on 127.0.0.1.
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    token: String,
    binaries: Binaries,
    apiserver_args: Vec<String>,
    apiserver: Mutex<Option<Watched>>,
    others: Mutex<Vec<Watched>>,
    /// The controller manager's binary and arguments, to start it again after an outage.
    kcm: Mutex<Option<(PathBuf, Vec<String>)>>,
    kcm_process: Mutex<Option<Watched>>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane").field("server", &self.server).field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// The pid in a run directory's name (`run-<pid>-<token>`), if that process is alive.
fn live_pid(name: &str) -> Option<u32> {
    let pid: u32 = name.split('-').nth(1)?.parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// Keeps the last few finished runs' directories for inspection, removes older ones, and
/// removes etcd data left on tmpfs by runs whose process is gone (a shared plane lives in a
/// static and is never dropped). Runs whose process is alive are never touched.
fn prune_old_runs(root: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let mut runs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| live_pid(&e.file_name().to_string_lossy()).is_none())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    runs.sort();
    let excess = runs.len().saturating_sub(keep);
    for (_, path) in runs.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(path);
    }
    let Ok(shm) = std::fs::read_dir("/dev/shm") else { return };
    for entry in shm.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.strip_prefix("wasmloop-etcd-").is_some_and(|run| live_pid(run).is_none()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn run_dir() -> Result<PathBuf, ControlPlaneError> {
    let root = std::env::temp_dir().join("wasmloop-testenv");
    std::fs::create_dir_all(&root).map_err(io(format!("cannot create {}", root.display())))?;
    prune_old_runs(&root, 4);
    let dir = root.join(format!("run-{}-{}", std::process::id(), token()));
    std::fs::create_dir_all(dir.join("certs")).map_err(io(format!("cannot create {}", dir.display())))?;
    Ok(dir)
}

/// etcd's data on tmpfs when there is one: the tests write thousands of objects.
fn etcd_data_dir(dir: &Path) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        shm.join(format!("wasmloop-etcd-{name}"))
    } else {
        dir.join("etcd")
    }
}

impl ControlPlane {
    /// Finds the binaries and starts the control plane, blocking until kube-apiserver's
    /// `/readyz` answers. Safe to call from async code: the waiting happens on its own
    /// thread.
    ///
    /// # Errors
    /// Missing binaries, a component that exits or does not become ready (with its log
    /// path), or a file that cannot be written.
    pub fn start_blocking() -> Result<ControlPlane, ControlPlaneError> {
        ControlPlane::start_blocking_with(Controllers::Core)
    }

    /// [`ControlPlane::start_blocking`], with kube-controller-manager running `controllers`.
    ///
    /// # Errors
    /// As [`ControlPlane::start_blocking`].
    pub fn start_blocking_with(controllers: Controllers) -> Result<ControlPlane, ControlPlaneError> {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(io("cannot build a runtime to wait for readiness"))?;
            runtime.block_on(ControlPlane::start_with(controllers))
        })
        .join()
        .unwrap_or_else(|_| Err(ControlPlaneError::Client("the start-up thread panicked".into())))
    }

    /// Async form of [`ControlPlane::start_blocking`].
    ///
    /// # Errors
    /// As [`ControlPlane::start_blocking`].
    pub async fn start() -> Result<ControlPlane, ControlPlaneError> {
        ControlPlane::start_with(Controllers::Core).await
    }

    /// Async form of [`ControlPlane::start_blocking_with`].
    ///
    /// # Errors
    /// As [`ControlPlane::start_blocking`].
    pub async fn start_with(controllers: Controllers) -> Result<ControlPlane, ControlPlaneError> {
        let binaries = Binaries::find()?;
        let dir = run_dir()?;
        let plane = ControlPlane::launch(binaries, dir, controllers).await;
        if let Err(e) = &plane {
            eprintln!("wasmloop-testenv: the control plane failed to start: {e}");
        }
        plane
    }

    async fn launch(
        binaries: Binaries,
        dir: PathBuf,
        controllers: Controllers,
    ) -> Result<ControlPlane, ControlPlaneError> {
        crate::binaries::check_supported(&binaries.kube_apiserver)?;
        let [etcd_port, etcd_peer, api_port] = free_ports::<3>()?;
        let token = token();
        std::fs::write(dir.join("tokens.csv"), format!("{token},admin,admin-uid,\"system:masters\"\n"))
            .map_err(io("cannot write the token file"))?;
        let sa_key = dir.join("sa.key");
        let openssl = std::process::Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&sa_key)
            .arg("2048")
            .output()
            .map_err(io("cannot run openssl to make the service-account signing key (install openssl)"))?;
        if !openssl.status.success() {
            return Err(ControlPlaneError::Io {
                what: "openssl genrsa failed making the service-account signing key".into(),
                source: std::io::Error::other(String::from_utf8_lossy(&openssl.stderr).into_owned()),
            });
        }

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let etcd_args: Vec<String> = vec![
            "--name=default".into(),
            format!("--data-dir={}", etcd_data_dir(&dir).display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            // A test cluster lives for one run: durability buys nothing, and fsync on a shared
            // 2-core machine stalls writes for seconds (envtest's etcd does the same).
            "--unsafe-no-fsync=true".into(),
        ];
        let etcd = Watched::spawn("etcd", &binaries.etcd, &etcd_args, &dir.join("etcd.log"))
            .map_err(io("cannot start etcd"))?;

        // Every request the API server serves goes to an audit log at Metadata level (who, verb,
        // path; no bodies), so a test can prove what the host did, and did not, ask for.
        std::fs::write(dir.join("audit-policy.yaml"), AUDIT_POLICY).map_err(io("cannot write the audit policy"))?;
        let server = format!("https://127.0.0.1:{api_port}");
        let apiserver_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // 1.37's endpoint reconciler refuses a loopback advertise address; with one API
            // server and no Service traffic it has nothing to do.
            "--endpoint-reconciler-type=none".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", dir.join("certs").display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-key-file={}", sa_key.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
            format!("--audit-policy-file={}", dir.join("audit-policy.yaml").display()),
            format!("--audit-log-path={}", dir.join(AUDIT_LOG).display()),
        ];
        let kubeconfig = dir.join("kubeconfig");
        let plane = ControlPlane {
            kubeconfig: kubeconfig.clone(),
            server: server.clone(),
            token: token.clone(),
            apiserver_args,
            apiserver: Mutex::new(None),
            others: Mutex::new(vec![etcd]),
            kcm: Mutex::new(None),
            kcm_process: Mutex::new(None),
            binaries,
            dir,
        };
        plane.launch_apiserver()?;
        // The serving certificate (with its CA) appears once the API server has started.
        let ca = plane.dir.join("certs/apiserver.crt");
        wait_for_file(&ca, &plane.log("kube-apiserver")).await?;
        crate::kubeconfig::write(&kubeconfig, &server, &ca, &token).map_err(io("cannot write the kubeconfig"))?;
        plane.wait_ready().await?;

        if let Some(kcm) = plane.binaries.kube_controller_manager.clone() {
            let args: Vec<String> = vec![
                format!("--kubeconfig={}", kubeconfig.display()),
                controllers.flag().into(),
                format!("--service-account-private-key-file={}", sa_key.display()),
                format!("--root-ca-file={}", ca.display()),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--bind-address=127.0.0.1".into(),
            ];
            *plane.kcm.lock().expect("lock") = Some((kcm, args));
            plane.launch_controller_manager()?;
        }
        plane.install_panic_note();
        Ok(plane)
    }

    /// Starts kube-controller-manager unless it runs. It exits when it loses the API server
    /// for long, so an outage ends with a fresh one.
    fn launch_controller_manager(&self) -> Result<(), ControlPlaneError> {
        let Some((binary, args)) = self.kcm.lock().expect("lock").clone() else { return Ok(()) };
        let mut running = self.kcm_process.lock().expect("lock");
        if running.as_mut().is_some_and(Watched::running) {
            return Ok(());
        }
        let watched = Watched::spawn("kube-controller-manager", &binary, &args, &self.log("kube-controller-manager"))
            .map_err(io("cannot start kube-controller-manager"))?;
        *running = Some(watched);
        Ok(())
    }

    fn launch_apiserver(&self) -> Result<(), ControlPlaneError> {
        let watched = Watched::spawn(
            "kube-apiserver",
            &self.binaries.kube_apiserver,
            &self.apiserver_args,
            &self.log("kube-apiserver"),
        )
        .map_err(io("cannot start kube-apiserver"))?;
        *self.apiserver.lock().expect("lock") = Some(watched);
        Ok(())
    }

    /// Prints where the logs are when a test panics, once per panic.
    fn install_panic_note(&self) {
        let dir = self.dir.clone();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            eprintln!(
                "wasmloop-testenv: control-plane logs: {}/{{etcd,kube-apiserver,kube-controller-manager}}.log",
                dir.display()
            );
        }));
    }

    fn log(&self, component: &str) -> PathBuf {
        self.dir.join(format!("{component}.log"))
    }

    /// Waits until `/readyz` answers `ok`.
    async fn wait_ready(&self) -> Result<(), ControlPlaneError> {
        let started = Instant::now();
        let mut detail = String::from("no answer yet");
        while started.elapsed() < READY_TIMEOUT {
            if let Some(dead) = self.exited_component() {
                return Err(ControlPlaneError::NotReady {
                    component: dead,
                    detail: "it exited".into(),
                    log: self.log(dead).display().to_string(),
                });
            }
            match self.readyz().await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => detail = body,
                Err(e) => detail = e,
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(ControlPlaneError::NotReady {
            component: "kube-apiserver",
            detail,
            log: self.log("kube-apiserver").display().to_string(),
        })
    }

    /// The first component that is no longer running, if any.
    fn exited_component(&self) -> Option<&'static str> {
        let mut api = self.apiserver.lock().expect("lock");
        let mut others = self.others.lock().expect("lock");
        api.iter_mut().chain(others.iter_mut()).find_map(|c| (!c.running()).then_some(c.name))
    }

    async fn readyz(&self) -> Result<String, String> {
        let client = self.client().await.map_err(|e| e.to_string())?;
        let request = http_get("/readyz");
        client.request_text(request).await.map_err(|e| e.to_string())
    }

    /// The kubeconfig (admin, `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// kubectl of the control plane's release, when the binaries include it (those
    /// `scripts/kube-binaries` builds do).
    pub fn kubectl(&self) -> Option<&Path> {
        self.binaries.kubectl.as_deref()
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The CA bundle that verifies the API server's certificate (as a pod finds it in
    /// `/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`).
    pub fn ca_certificate(&self) -> PathBuf {
        self.dir.join("certs/apiserver.crt")
    }

    /// The admin bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The directory with the component logs, certificates and kubeconfig.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The audited requests (as [`ControlPlane::audited_requests`]) whose line holds `part`,
    /// read once every request made before this call is in the log: it makes a request of its
    /// own and waits until that one is audited, and the API server writes an entry before it
    /// answers. So a test that proves a request was *not* made reads a log that has caught up.
    ///
    /// # Panics
    /// When the marker is not audited within 30 s.
    pub async fn audited_after_marker(&self, part: &str) -> Vec<String> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let marker = format!("audit-marker-{nanos}");
        let namespaces: Api<Namespace> = Api::all(self.client().await.expect("an admin client"));
        assert!(namespaces.get_opt(&marker).await.expect("the marker request").is_none());
        crate::eventually(Duration::from_secs(30), "the marker audited", || {
            let found = self.audited_requests().iter().any(|r| r.contains(&marker));
            async move { if found { Ok(()) } else { Err("not yet".to_owned()) } }
        })
        .await;
        self.audited_requests().into_iter().filter(|r| r.contains(part)).collect()
    }

    /// The request URIs the API server has audited so far, each with the user who sent it
    /// (`user GET /api/v1/...`): every request it served, at Metadata level. An entry is
    /// written once a request completes, so a test that proves a request was *not* made first
    /// waits for one made after it.
    pub fn audited_requests(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.join(AUDIT_LOG)).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .map(|entry| {
                let field = |p: &str| entry.pointer(p).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
                format!("{} {} {}", field("/user/username"), field("/verb"), field("/requestURI"))
            })
            .collect()
    }

    /// An admin client.
    ///
    /// # Errors
    /// When the kubeconfig cannot be read or the client cannot be built.
    pub async fn client(&self) -> Result<Client, ControlPlaneError> {
        let kubeconfig =
            Kubeconfig::read_from(&self.kubeconfig).map_err(|e| ControlPlaneError::Client(e.to_string()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| ControlPlaneError::Client(e.to_string()))?;
        Client::try_from(config).map_err(|e| ControlPlaneError::Client(e.to_string()))
    }

    /// Creates a namespace of its own for one test.
    ///
    /// # Errors
    /// When the client cannot be built or the namespace cannot be created.
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace, ControlPlaneError> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!("{prefix}-{}-{}", std::process::id() % 10_000, COUNTER.fetch_add(1, Ordering::Relaxed));
        let client = self.client().await?;
        let namespace = Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|e| ControlPlaneError::Client(format!("cannot create namespace {name}: {e}")))?;
        Ok(TestNamespace { name, client })
    }

    /// Stops kube-apiserver (etcd and the controller manager keep running).
    pub fn stop_apiserver(&self) {
        if let Some(mut api) = self.apiserver.lock().expect("lock").take() {
            api.stop();
        }
    }

    /// Starts kube-apiserver again on the same port and waits for it to be ready.
    ///
    /// # Errors
    /// When it does not become ready.
    pub async fn restart_apiserver(&self) -> Result<(), ControlPlaneError> {
        self.stop_apiserver();
        self.launch_apiserver()?;
        self.wait_ready().await?;
        self.launch_controller_manager()
    }

    /// Stops every component.
    pub fn stop(&self) {
        if let Some(mut kcm) = self.kcm_process.lock().expect("lock").take() {
            kcm.stop();
        }
        self.stop_apiserver();
        for mut c in self.others.lock().expect("lock").drain(..).rev() {
            c.stop();
        }
        let _ = std::fs::remove_dir_all(etcd_data_dir(&self.dir));
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

fn http_get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).expect("a valid request")
}

async fn wait_for_file(path: &Path, log: &Path) -> Result<(), ControlPlaneError> {
    let started = Instant::now();
    while started.elapsed() < READY_TIMEOUT {
        if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ControlPlaneError::NotReady {
        component: "kube-apiserver",
        detail: format!("it wrote no serving certificate at {}", path.display()),
        log: log.display().to_string(),
    })
}

/// A namespace created for one test.
#[derive(Clone)]
pub struct TestNamespace {
    /// Its name.
    pub name: String,
    /// An admin client.
    pub client: Client,
}

impl TestNamespace {
    /// A namespaced API for kind `K` in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}
