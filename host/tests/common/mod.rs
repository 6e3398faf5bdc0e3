//! What the host's integration tests share: the built components, the `wasmloop run`
//! process, and foo-deployment's objects.

#![allow(dead_code)] // each test binary uses its own part

pub mod cgroup;
pub mod wasmplugin;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmloop_testenv::{eventually, shared, wait_for_event};

/// foo-deployment's CRD.
pub const FOO_CRD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins/foo-deployment/deploy/crd.yaml");

/// The cargo target directory.
pub fn target_dir() -> PathBuf {
    wasmloop_testenv::components::target_dir()
}

/// A plugin component, built on first use (see [`wasmloop_testenv::components`]).
pub fn component(name: &str) -> PathBuf {
    wasmloop_testenv::components::component(name)
}

/// A `wasmloop` process against the shared control plane, its stderr collected; killed
/// when the test ends, and its output printed if the test failed.
pub struct Host {
    child: Child,
    output: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
}

fn collect(stream: impl std::io::Read + Send + 'static, sink: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
            let mut out = sink.lock().unwrap();
            out.push_str(&line);
            out.push('\n');
        }
    });
}

/// `args` as the tests run the host: `run`, `dev` and `record` get their metrics and probes on
/// one loopback port, and `run` acts as the host (the test's admin) unless the arguments say
/// `--plugin-identity`: the tests of impersonation (`run_identity`) say so, the others test
/// something else.
fn host_args(args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let identity_given = args.iter().any(|a| a.to_string_lossy().starts_with("--plugin-identity"));
    if let Some(run) = args.iter().position(|a| a == "run" || a == "dev" || a == "record") {
        let endpoints = ["--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"];
        args.splice(run + 1..run + 1, endpoints.map(OsString::from));
        if args[run] == "run" && !identity_given {
            args.splice(run + 1..run + 1, ["--plugin-identity", "host"].map(OsString::from));
        }
    }
    args
}

impl Host {
    /// `wasmloop run --plugin <component>...`.
    pub fn run(plugins: &[&str]) -> Host {
        let mut args: Vec<PathBuf> = Vec::new();
        for plugin in plugins {
            args.push("--plugin".into());
            args.push(component(plugin));
        }
        Host::start(std::iter::once(PathBuf::from("run")).chain(args))
    }

    /// `wasmloop <args>`, as [`host_args`] completes them.
    pub fn start(args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Host {
        Host::start_with(shared().kubeconfig(), args)
    }

    /// As [`Host::start`], with environment variables `env` set (`POD_NAME`, say).
    pub fn start_env(env: &[(&str, &str)], args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Host {
        Host::start_full(shared().kubeconfig(), env, args)
    }

    /// As [`Host::start`], acting as `kubeconfig` says (see [`kubeconfig_as`]).
    pub fn start_with(kubeconfig: &std::path::Path, args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Host {
        Host::start_full(kubeconfig, &[], args)
    }

    fn start_full(
        kubeconfig: &std::path::Path,
        env: &[(&str, &str)],
        args: impl IntoIterator<Item = impl AsRef<OsStr>>,
    ) -> Host {
        let mut command = Command::new(env!("CARGO_BIN_EXE_wasmloop"));
        command.args(host_args(args)).env("KUBECONFIG", kubeconfig).env("WASMLOOP_LOG", "info");
        command.envs(env.iter().copied());
        Host::spawn(command)
    }

    /// As [`Host::start_with`], inside `cgroup`: held to the limits of the host's pod.
    pub fn start_in(
        cgroup: &cgroup::PodCgroup,
        kubeconfig: &Path,
        args: impl IntoIterator<Item = impl AsRef<OsStr>>,
    ) -> Host {
        let mut command = cgroup.command(Path::new(env!("CARGO_BIN_EXE_wasmloop")), &host_args(args));
        command.env("KUBECONFIG", kubeconfig).env("WASMLOOP_LOG", "info");
        Host::spawn(command)
    }

    /// Runs `command` (a `wasmloop` invocation, perhaps wrapped) with its output collected.
    pub fn spawn(mut command: Command) -> Host {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("wasmloop starts");
        let (output, stdout) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
        collect(child.stderr.take().expect("piped"), output.clone());
        collect(child.stdout.take().expect("piped"), stdout.clone());
        Host { child, output, stdout }
    }

    /// Waits until the host has logged `text`.
    pub async fn logged(&self, text: &str) {
        let output = self.output.clone();
        eventually(Duration::from_secs(60), &format!("the host to log {text:?}"), || {
            let found = output.lock().unwrap().contains(text);
            async move { if found { Ok(()) } else { Err("not yet".into()) } }
        })
        .await;
    }

    /// How much the host has logged so far: a mark for [`Host::logged_since`].
    pub fn mark(&self) -> usize {
        self.output.lock().unwrap().len()
    }

    /// Waits until the host has logged `text` after `mark`, for a line that may also have
    /// been logged earlier for another reason.
    pub async fn logged_since(&self, mark: usize, text: &str) {
        let output = self.output.clone();
        eventually(Duration::from_secs(60), &format!("the host to log {text:?} after the mark"), || {
            // Lines are appended whole, so a mark always falls between two of them.
            let found = output.lock().unwrap()[mark..].contains(text);
            async move { if found { Ok(()) } else { Err("not yet".into()) } }
        })
        .await;
    }

    /// Waits until the host has printed `text` on stdout, and returns all it printed.
    pub async fn printed(&self, text: &str) -> String {
        let stdout = self.stdout.clone();
        eventually(Duration::from_secs(60), &format!("the host to print {text:?}"), || {
            let printed = stdout.lock().unwrap().clone();
            async move { if printed.contains(text) { Ok(printed) } else { Err("not yet".into()) } }
        })
        .await
    }

    /// The address of the host's metrics and probes, once it listens.
    pub async fn address(&self) -> String {
        let output = self.output.clone();
        eventually(Duration::from_secs(60), "the host to serve metrics and probes", || {
            let output = output.lock().unwrap();
            let line = output.lines().find(|l| l.contains("serving metrics and health probes")).map(str::to_owned);
            async move {
                let line = line.ok_or("not yet")?;
                let start = line.find("127.0.0.1:").ok_or("no address in the line")?;
                let address: String =
                    line[start..].chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect();
                Ok(address)
            }
        })
        .await
    }

    /// `GET path` on the host's endpoints: the status code and the body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        use http_body_util::BodyExt;
        let url = format!("http://{}{path}", self.address().await);
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let response = client.get(url.parse().unwrap()).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// Waits until `/readyz` answers 200, `what` naming the wait in a timeout's message.
    pub async fn ready(&self, within: Duration, what: &str) {
        eventually(within, what, || async move {
            let (status, body) = self.get("/readyz").await;
            if status == 200 { Ok(()) } else { Err(format!("{status} {body}")) }
        })
        .await;
    }

    /// The value of one series of `/metrics`, written as in the exposition
    /// (`wasmloop_x_total{plugin="p"}`). Panics when the host does not serve it, so a
    /// misspelt series fails the test instead of reading as zero.
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        series_value(&text, series).unwrap_or_else(|| panic!("/metrics has no series {series}:\n{text}"))
    }

    /// Waits until series `series` of `/metrics` passes `check` (0 for a counter that has not
    /// counted yet): a positive signal, where a log line would only say the same later.
    pub async fn metric_until(&self, series: &str, what: &str, check: impl Fn(f64) -> bool) -> f64 {
        eventually(Duration::from_secs(60), what, || {
            let check = &check;
            async move {
                let value = self.metric_or_zero(series).await;
                if check(value) { Ok(value) } else { Err(format!("{series} is {value}")) }
            }
        })
        .await
    }

    /// As [`Host::metric`], 0 for a counter that has not counted yet.
    pub async fn metric_or_zero(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        series_value(&text, series).unwrap_or(0.0)
    }

    /// Reconciles of `plugin` that have ended, whatever their result. Panics when the host
    /// has no series for the plugin (it creates them when the plugin starts), so a misspelt
    /// name fails the test instead of reading as none.
    pub async fn reconciles(&self, plugin: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        ["success", "retry", "failed"]
            .into_iter()
            .map(|result| {
                let series = format!(r#"wasmloop_reconciles_total{{plugin="{plugin}",result="{result}"}}"#);
                series_value(&text, &series).unwrap_or_else(|| panic!("/metrics has no series {series}:\n{text}"))
            })
            .sum()
    }

    /// Kills the process with SIGKILL, as a node failure would.
    /// The host's resident memory now and at its peak, in KiB (`/proc/PID/status`).
    pub fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {status}"))
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// The CPU time the host has used so far, all its threads, user and system
    /// (`/proc/PID/stat`, in clock ticks of 10 ms).
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The command name may hold spaces: fields are counted after its closing parenthesis.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }

    /// Starts the host's peak resident memory afresh from what it holds now.
    pub fn reset_peak_memory(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
    }

    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends SIGTERM, as the kubelet does to stop a pod, and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill -TERM failed");
        self.child.wait().unwrap()
    }

    /// Sends SIGTERM without waiting: a test then waits for the exit it expects.
    pub fn send_sigterm(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill -TERM failed");
    }

    /// The exit status of a process that has ended.
    pub fn exit_status(&mut self) -> std::process::ExitStatus {
        self.child.try_wait().unwrap().expect("the process has ended")
    }

    /// Everything logged on stderr so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits up to `timeout` for the process to end (`what` names the wait) and returns how.
    pub async fn exited_within(&mut self, timeout: Duration, what: &str) -> std::process::ExitStatus {
        eventually(timeout, what, || {
            let running = self.is_running();
            async move { if running { Err("still running".to_owned()) } else { Ok(()) } }
        })
        .await;
        self.exit_status()
    }

    /// JSON log lines (with `--log-format json`) inside the reconcile span of `object`
    /// (`namespace/name`) whose message contains `text`.
    pub fn reconcile_lines(&self, object: &str, text: &str) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|l| l["span"]["object"] == object)
            .filter(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(text)))
            .collect()
    }

    /// Waits until [`Host::reconcile_lines`] holds `count` lines, and returns them.
    pub async fn wait_reconcile_lines(&self, object: &str, text: &str, count: usize) -> Vec<Value> {
        eventually(Duration::from_secs(60), &format!("{count} {text:?} lines for {object}"), || {
            let lines = self.reconcile_lines(object, text);
            async move { if lines.len() >= count { Ok(lines) } else { Err(format!("{} so far", lines.len())) } }
        })
        .await
    }

    /// The lines logged so far that parse as JSON (with `--log-format json`).
    pub fn json_lines(&self) -> Vec<Value> {
        self.output.lock().unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- wasmloop stderr ---\n{}", self.output.lock().unwrap());
            eprintln!("--- wasmloop stdout ---\n{}", self.stdout.lock().unwrap());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// When a JSON log line (with `--log-format json`) was written: a full UTC timestamp, so
/// lines compare and subtract correctly across midnight.
pub fn logged_time(line: &Value) -> Timestamp {
    let text = line["timestamp"].as_str().unwrap_or_else(|| panic!("a log line without a timestamp: {line}"));
    text.parse::<Timestamp>().unwrap_or_else(|e| panic!("the log timestamp {text:?}: {e}"))
}

/// A JSON log line's time in milliseconds since the Unix epoch, for differences between lines.
pub fn millis(line: &Value) -> f64 {
    logged_time(line).as_microsecond() as f64 / 1000.0
}

fn series_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .map(|v| v.parse().unwrap())
}

/// `wasmloop --log-format json run --plugin hostile --config {mode} EXTRA...`: the hostile test
/// plugin misbehaving in `mode` (a YAML flow mapping's content: `mode: requeue, intervalMs: 100`
/// or just the mode) on every ConfigMap. The config file lives as long as the host.
pub fn hostile(mode: &str, extra: &[&OsStr]) -> (Host, tempfile::NamedTempFile) {
    hostile_with(shared().kubeconfig(), mode, "", extra)
}

/// As [`hostile`], on the ConfigMaps of `namespace` only (`plugins.hostile.namespace`): a fast
/// ticker there does not multiply by every ConfigMap of the cluster.
pub fn confined_hostile(namespace: &str, mode: &str, extra: &[&OsStr]) -> (Host, tempfile::NamedTempFile) {
    hostile_with(shared().kubeconfig(), mode, &format!("    namespace: {namespace}\n"), extra)
}

/// As [`confined_hostile`], the host acting as `kubeconfig` says (see [`kubeconfig_as`]).
pub fn confined_hostile_as(
    kubeconfig: &std::path::Path,
    namespace: &str,
    mode: &str,
    extra: &[&OsStr],
) -> (Host, tempfile::NamedTempFile) {
    hostile_with(kubeconfig, mode, &format!("    namespace: {namespace}\n"), extra)
}

fn hostile_with(
    kubeconfig: &std::path::Path,
    mode: &str,
    plugin_settings: &str,
    extra: &[&OsStr],
) -> (Host, tempfile::NamedTempFile) {
    let config = tempfile::NamedTempFile::new().unwrap();
    let settings = if mode.contains(':') { mode.to_owned() } else { format!("mode: {mode}") };
    // Its requeue tests tick faster than the default 1 s floor on requeue_after.
    let yaml =
        format!("plugins:\n  hostile:\n    minRequeueAfterMs: 10\n{plugin_settings}    config: {{{settings}}}\n");
    std::fs::write(config.path(), yaml).unwrap();
    let plugin = component("hostile_plugin");
    let mut args: Vec<&OsStr> = vec!["--log-format".as_ref(), "json".as_ref(), "run".as_ref()];
    args.extend(["--plugin".as_ref(), plugin.as_os_str(), "--config".as_ref(), config.path().as_os_str()]);
    args.extend(extra);
    (Host::start_with(kubeconfig, args), config)
}

/// A kubeconfig for the shared control plane that acts as the plain user `user` (the admin
/// impersonating it, in group `system:authenticated` only): a host run with it may do what
/// [`grant_user`] grants, and a test can take that away.
pub fn kubeconfig_as(user: &str) -> tempfile::NamedTempFile {
    let plane = shared();
    let file = tempfile::NamedTempFile::new().unwrap();
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {
            "server": plane.server(), "certificate-authority": plane.ca_certificate()}}],
        "users": [{"name": "user", "user": {
            "token": plane.token(), "as": user, "as-groups": ["system:authenticated"]}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
    });
    // JSON is YAML: kubeconfig readers take either.
    std::fs::write(file.path(), kubeconfig.to_string()).unwrap();
    file
}

/// Grants the plain user `user` the Role `rules` in `ns`, through Role and RoleBinding `name`.
pub async fn grant_user(ns: &wasmloop_testenv::TestNamespace, name: &str, user: &str, rules: Value) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role: Role = serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap();
    ns.api::<Role>().create(&kube::api::PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
    }))
    .unwrap();
    ns.api::<RoleBinding>().create(&kube::api::PostParams::default(), &binding).await.unwrap();
}

/// Creates an empty ConfigMap `name` in `ns`.
pub async fn create_configmap(ns: &wasmloop_testenv::TestNamespace, name: &str) {
    let cm = k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        ..Default::default()
    };
    ns.api::<k8s_openapi::api::core::v1::ConfigMap>().create(&kube::api::PostParams::default(), &cm).await.unwrap();
}

/// Creates Pod `name` in `ns`, once the API server admits it: the namespace's default
/// ServiceAccount is made by the controller manager, shortly after the namespace.
pub async fn create_pod(ns: &wasmloop_testenv::TestNamespace, name: &str) {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}
    }))
    .unwrap();
    eventually(Duration::from_secs(60), "the pod to be admitted", || {
        let (pods, pod) = (pods.clone(), pod.clone());
        async move { pods.create(&kube::api::PostParams::default(), &pod).await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
}

/// Creates a minimal Deployment `name` in `ns`.
pub async fn create_deployment(ns: &wasmloop_testenv::TestNamespace, name: &str) {
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    ns.api::<Deployment>().create(&kube::api::PostParams::default(), &deployment).await.unwrap();
}

/// Waits until the labeler test plugin has labelled Deployment `name` with `version`.
pub async fn labelled(ns: &wasmloop_testenv::TestNamespace, name: &str, version: &str) {
    let deployments: Api<Deployment> = ns.api();
    eventually(Duration::from_secs(60), &format!("{name} labelled {version}"), || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(name).await.map_err(|e| e.to_string())?;
            let label = d.metadata.labels.unwrap_or_default().remove("wasmloop.dev/labeled-by");
            if label.as_deref() == Some(version) { Ok(()) } else { Err(format!("label {label:?}")) }
        }
    })
    .await;
}

/// A Foo asking for `replicas` of Deployment `deployment`.
pub fn foo(name: &str, deployment: &str, replicas: i32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name},
        "spec": {"deploymentName": deployment, "replicas": replicas}
    }))
    .unwrap()
}

/// Waits until Deployment `name` exists and passes `check`.
pub async fn deployment_with(
    deployments: &Api<Deployment>,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Deployment {
    eventually(Duration::from_secs(90), what, || {
        let deployments = deployments.clone();
        let check = &check;
        async move {
            match deployments.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(d) if check(&d) => Ok(d),
                Some(d) => Err(format!("{:?}", d.spec.replicas)),
                None => Err("no deployment yet".into()),
            }
        }
    })
    .await
}

/// The Deployment's desired replicas.
pub fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.replicas
}

/// Runs `plugin` (a build of foo-deployment) and walks sample-controller's life cycle.
pub async fn sample_controller_parity(namespace: &str, plugin: &Path) {
    let ns = shared().namespace(namespace).await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let _host = Host::start([Path::new("run"), Path::new("--plugin"), plugin]);
    let deployments: Api<Deployment> = ns.api();

    // Create a Foo: the Deployment exists with owner reference, labels and replicas.
    let created = foos.create(&PostParams::default(), &foo("example-foo", "example-foo", 2)).await.unwrap();
    let d = deployment_with(&deployments, "example-foo", "the Deployment", |d| replicas(d) == Some(2)).await;
    let owner = &d.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Foo", created.metadata.uid.as_deref().unwrap(), Some(true))
    );
    let labels = d.spec.template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert_eq!((labels["app"].as_str(), labels["controller"].as_str()), ("nginx", "example-foo"));

    // Change spec.replicas: the Deployment follows.
    foos.patch("example-foo", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    deployment_with(&deployments, "example-foo", "3 replicas", |d| replicas(d) == Some(3)).await;

    // Set the Deployment's available replicas by hand: the Foo's status mirrors it.
    deployments
        .patch_status(
            "example-foo",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 3, "readyReplicas": 3, "replicas": 3}})),
        )
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "the Foo status to mirror availableReplicas", || {
        let foos = foos.clone();
        async move {
            let foo = foos.get("example-foo").await.map_err(|e| e.to_string())?;
            if foo.data["status"]["availableReplicas"] == 3 { Ok(()) } else { Err(foo.data["status"].to_string()) }
        }
    })
    .await;

    // The Synced Event appears.
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(30), "the Synced Event", |e| {
        e.reason.as_deref() == Some("Synced") && e.note.as_deref() == Some("Foo synced successfully")
    })
    .await;

    // Delete the Foo: the garbage collector removes the Deployment.
    foos.delete("example-foo", &DeleteParams::background()).await.unwrap();
    eventually(Duration::from_secs(60), "the garbage collector to remove the Deployment", || {
        let deployments = deployments.clone();
        async move {
            match deployments.get_opt("example-foo").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
}

/// Runs the real `minisign` with `args` in `dir`.
pub fn minisign(dir: &Path, args: &[&str]) {
    let out = Command::new("minisign")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run minisign ({e}): install it (Debian: apt-get install minisign)"));
    assert!(out.status.success(), "minisign {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A `kubernetes.io/dockerconfigjson` Secret with the test registry's credentials.
pub async fn pull_secret(
    ns: &wasmloop_testenv::TestNamespace,
    name: &str,
    registry: &wasmloop_testenv::registry::TestRegistry,
) {
    use base64::Engine as _;
    use k8s_openapi::api::core::v1::Secret;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", registry.username, registry.password));
    let config = json!({"auths": {registry.address.clone(): {"auth": auth}}});
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config.to_string())},
    }))
    .unwrap();
    ns.api::<Secret>().create(&PostParams::default(), &secret).await.unwrap();
}
