//! The arguments of the commands that need the `cluster` feature.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::SandboxArgs;
use crate::endpoints::BindAddress;
use crate::leader::LeaderArgs;

/// The commands that need a cluster, a registry or the host's machinery.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Run plugins against a cluster (kubeconfig, or the in-cluster service account).
    Run(RunArgs),
    /// Run one plugin against a cluster and reload it whenever its file or crate changes.
    Dev(DevArgs),
    /// Print the ConfigMap that ships a plugin to a cluster (`| kubectl apply --server-side -f -`).
    Bundle(BundleArgs),
    /// Push a plugin component to an OCI registry, for plugins too large for a ConfigMap; print
    /// the reference pinned to what was pushed (for `bundle --ref`).
    Push(PushArgs),
    /// Record a plugin's reconciles on a live cluster and write nothing to it: `dev --dry-run`
    /// with `--record-dir`, for a version that is not deployed yet.
    Record(RecordArgs),
    /// Run recorded reconciles (`--record-dir`) again, offline, against another version of
    /// their plugin, and say what changed. Exit 0: all the same; 2: any changed; 1: bad input.
    Replay(ReplayArgs),
}

/// Whom plugins' requests act as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PluginIdentity {
    /// Each plugin impersonates its own ServiceAccount.
    Impersonate,
    /// Every plugin uses the host's credentials.
    Host,
}

/// `wasmloop record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// A plugin component (.wasm), or a plugin crate's directory (rebuilt on change, as `dev`).
    pub path: PathBuf,
    /// Host options; `--record-dir` is required.
    #[command(flatten)]
    pub host: HostArgs,
}

/// `wasmloop replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The plugin version to replay the cases with (.wasm).
    #[arg(long)]
    pub plugin: PathBuf,
    /// The record directory (`--record-dir`), or one plugin's directory in it. Cases of
    /// other plugins are skipped.
    pub dir: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ReplayOutput::Text)]
    pub output: ReplayOutput,
    /// Sandbox options.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// `replay`'s output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplayOutput {
    /// One line per case, diffs indented under it, and a summary line.
    Text,
    /// One JSON document: every case's result, diff and unanswered look-ups, and the counts.
    Json,
}

/// `wasmloop run`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("sources").required(true).multiple(true).args(["plugins", "plugin_namespaces"])))]
pub struct RunArgs {
    /// A plugin component (.wasm). Repeatable.
    #[arg(long = "plugin")]
    pub plugins: Vec<PathBuf>,
    /// Load plugins from ConfigMaps labelled `wasmloop.dev/plugin` in this namespace, and
    /// follow their changes. Repeatable.
    #[arg(long = "plugin-namespace", value_name = "NAMESPACE")]
    pub plugin_namespaces: Vec<wasmloop_contract::names::Namespace>,
    /// Load a ConfigMap plugin only if a key of this file signed its component (minisign
    /// public keys: `minisign.pub` files one after the other). File plugins are the
    /// operator's own and are not checked.
    #[arg(long, value_name = "FILE", requires = "plugin_namespaces")]
    pub trusted_keys: Option<PathBuf>,
    /// Call the component at PATH beside plugin NAME's serving version on every reconcile,
    /// and compare their actions; the shadow writes nothing. Repeatable, one per plugin.
    #[arg(long = "shadow", value_name = "NAME=PATH", value_parser = parse_shadow)]
    pub shadows: Vec<ShadowArg>,
    /// Pull ConfigMap plugins' references (data["plugin.ref"]) from this registry
    /// (HOST[:PORT]), over HTTPS. Repeatable; `*` allows any. Without it (and without
    /// --insecure-registry), no reference is pulled.
    #[arg(long = "allowed-registry", value_name = "HOST[:PORT]", requires = "plugin_namespaces", value_parser = parse_allowed_registry)]
    pub allowed_registries: Vec<String>,
    /// Pull from this registry (HOST[:PORT]) too, over plain HTTP, not HTTPS: a registry on
    /// loopback or a trusted network. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]", requires = "plugin_namespaces", value_parser = crate::oci::registry_name)]
    pub insecure_registries: Vec<String>,
    /// How long one pull of a plugin reference may take, in seconds, waits for a turn included.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub pull_timeout_seconds: u64,
    /// Host options.
    #[command(flatten)]
    pub host: HostArgs,
}

/// An `--allowed-registry`: a registry, or `*` for any.
fn parse_allowed_registry(text: &str) -> Result<String, crate::oci::BadRegistry> {
    if text == "*" { Ok(text.to_owned()) } else { crate::oci::registry_name(text) }
}

/// Why a flag's value is refused; clap prints it after the flag and the value.
#[derive(Debug, thiserror::Error)]
enum ValueError {
    #[error("expected NAME=PATH: the plugin's name, then the candidate's file")]
    ShadowNotPair,
    #[error("plugin name {name:?}: {why}")]
    ShadowName { name: String, why: String },
    #[error("no file after {0}=; expected NAME=PATH")]
    ShadowWithoutFile(String),
    #[error("expected a byte count: digits, optionally followed by Ki, Mi or Gi")]
    NotBytes,
    #[error("too large")]
    TooManyBytes,
    #[error("at least 16Mi: one small plugin's instance")]
    TooFewBytes,
    #[error("expected CPUs between 0.01 and 1024: a decimal such as 0.5, or millicores such as 500m")]
    NotCpus,
}

/// A `--shadow NAME=PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowArg {
    /// The plugin shadowed.
    pub name: String,
    /// The candidate component.
    pub path: PathBuf,
}

fn parse_shadow(text: &str) -> Result<ShadowArg, ValueError> {
    let (name, path) = text.split_once('=').ok_or(ValueError::ShadowNotPair)?;
    wasmloop_sandbox::validate::name(name).map_err(|why| ValueError::ShadowName { name: name.to_owned(), why })?;
    if path.is_empty() {
        return Err(ValueError::ShadowWithoutFile(name.to_owned()));
    }
    Ok(ShadowArg { name: name.to_owned(), path: path.into() })
}

/// `wasmloop dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// A plugin component (.wasm), or a plugin crate's directory (built with
    /// `cargo build --release --target wasm32-wasip2` on every source change).
    pub path: PathBuf,
    /// Write nothing: print what each reconcile would write, as YAML diffs against the
    /// cluster computed by the API server (`dryRun=All`).
    #[arg(long)]
    pub dry_run: bool,
    /// Host options.
    #[command(flatten)]
    pub host: HostArgs,
}

/// `wasmloop bundle`.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// The plugin component (.wasm).
    pub plugin: PathBuf,
    /// The plugin's name: the ConfigMap's name and its `wasmloop.dev/plugin` label. Must be
    /// the name in the component's manifest.
    #[arg(long)]
    pub name: String,
    /// The namespace the host watches for plugins (`run --plugin-namespace`).
    #[arg(long, default_value = "wasmloop-system")]
    pub namespace: wasmloop_contract::names::Namespace,
    /// The plugin's configuration (YAML or JSON), shipped as data["config.yaml"].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The component's minisign signature (`minisign -S -m PLUGIN.wasm` writes
    /// PLUGIN.wasm.minisig), shipped as data["plugin.wasm.minisig"] for hosts run with
    /// `--trusted-keys`.
    #[arg(long, value_name = "FILE")]
    pub signature: Option<PathBuf>,
    /// Ship the component as a shadow of plugin NAME: the ConfigMap is named NAME-shadow and
    /// annotated `wasmloop.dev/track: shadow`, and the host calls it beside the serving
    /// version, compares their actions and writes nothing.
    #[arg(long)]
    pub shadow: bool,
    /// The ConfigMap's name, when not NAME (or NAME-shadow): for a candidate beside a promoted
    /// shadow that serves from NAME-shadow, or to update whichever ConfigMap serves.
    #[arg(long, value_name = "CONFIGMAP", conflicts_with = "wasmplugin")]
    pub configmap: Option<String>,
    /// Write a `WasmPlugin` (wasmloop.dev/v1alpha1) named NAME (NAME-shadow for a shadow), with
    /// the ConfigMap NAME-component holding the component, or with `--ref`, the image alone.
    /// The `WasmPlugin` pins the component's digest and carries the configuration.
    #[arg(long)]
    pub wasmplugin: bool,
    /// Ship the component by reference instead of its bytes: the pinned reference `wasmloop
    /// push` printed (oci://REGISTRY/REPO@sha256:...), in data["plugin.ref"]. The host pulls it.
    #[arg(long = "ref", value_name = "REFERENCE", value_parser = parse_pinned_ref)]
    pub reference: Option<crate::oci::PluginRef>,
    /// With `--ref`: the Secret (`kubernetes.io/dockerconfigjson`, in the ConfigMap's
    /// namespace) holding the registry's credentials.
    #[arg(long, value_name = "SECRET", requires = "reference")]
    pub pull_secret: Option<wasmloop_contract::names::Name>,
    /// Sandbox options (the component is validated before it is bundled).
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

fn parse_pinned_ref(text: &str) -> Result<crate::oci::PluginRef, crate::oci::OciError> {
    crate::oci::PluginRef::parse(text).and_then(crate::oci::PluginRef::pinned)
}

/// `wasmloop push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The plugin component (.wasm).
    pub plugin: PathBuf,
    /// Where to push it: oci://REGISTRY/REPO:TAG.
    #[arg(value_parser = crate::oci::PluginRef::parse)]
    pub reference: crate::oci::PluginRef,
    /// The registry's user name; the password is read from standard input.
    #[arg(long, requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the password from standard input (one line).
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// Speak plain HTTP to the registry (a loopback or test registry), not HTTPS.
    #[arg(long)]
    pub plain_http: bool,
    /// Sandbox options (the component is validated before it is pushed).
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// How informers make their initial list (`--initial-list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitialListMode {
    /// Streamed where the server serves it, paged before.
    Auto,
    /// Always in pages.
    Paged,
}

/// Options of the commands that run plugins against a cluster.
#[derive(Debug, Clone, Args)]
pub struct HostArgs {
    /// Host configuration (YAML): resync, shutdown timeout, and per-plugin settings and config.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve Prometheus metrics on /metrics here: HOST:PORT, :PORT for every interface, 0 for off.
    #[arg(long, default_value = "0", value_name = "ADDRESS")]
    pub metrics_bind_address: BindAddress,
    /// Serve /healthz and /readyz here: HOST:PORT, :PORT for every interface, 0 for off.
    #[arg(long, default_value = ":8081", value_name = "ADDRESS")]
    pub health_probe_bind_address: BindAddress,
    /// Whom plugins' requests act as: `impersonate` (each plugin its own ServiceAccount, so
    /// Kubernetes RBAC holds each to its own grants) or `host` (the host's credentials)
    /// [default: impersonate for run, host for dev].
    #[arg(long, value_enum)]
    pub plugin_identity: Option<PluginIdentity>,
    /// Namespace of the ServiceAccounts of plugins loaded from files, unless host.yaml names
    /// one (plugins.<name>.serviceAccount).
    #[arg(long, env = "POD_NAMESPACE", default_value = "wasmloop-system", value_name = "NAMESPACE")]
    pub plugin_identity_namespace: wasmloop_contract::names::Namespace,
    /// The host's own ServiceAccount, which no plugin may act as [default in a pod: from the
    /// POD_NAMESPACE and POD_SERVICE_ACCOUNT variables, which deploy/ sets from the downward
    /// API].
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub host_service_account: Option<wasmloop_runtime::identity::ServiceAccount>,
    /// How informers make their initial list: `auto` streams it (a watch with
    /// `sendInitialEvents`, no page of objects held at once) where the server serves streaming
    /// lists (Kubernetes 1.34 and later) and lists in pages before; `paged` always lists in
    /// pages, for a proxy in front of the server that mishandles streaming lists.
    #[arg(long, value_enum, default_value_t = InitialListMode::Auto)]
    pub initial_list: InitialListMode,
    /// How often each plugin's read access is reviewed again (SubjectAccessReview), in seconds:
    /// a revoked grant stops the plugin within this time.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub access_review_seconds: u64,
    /// Record every reconcile here, as one YAML case per call (request, cache look-ups and
    /// answers, actions or error; Secrets redacted), under a directory per plugin, for
    /// `wasmloop replay`.
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// Cases `--record-dir` keeps per plugin, the newest.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub record_keep: u64,
    /// Bytes `--record-dir` may hold; the oldest cases go first.
    #[arg(long, default_value_t = 256 << 20, value_parser = clap::value_parser!(u64).range((1 << 20)..=(1 << 40)))]
    pub record_max_bytes: u64,
    /// Bytes of memory every plugin's guest instances together may hold (Ki, Mi and Gi
    /// allowed) [default: the container's memory limit less what the host keeps for itself
    /// (192 MiB, or a quarter of a larger limit), or half the machine's memory without a
    /// limit]. A call that finds no room waits, and is tried again later if none comes; a
    /// plugin whose memory limit times its concurrency exceeds it runs with fewer workers.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub guest_memory_budget: Option<u64>,
    /// CPUs every plugin's guest code together may use (0.5, or 500m), shared among the plugins
    /// with calls running by fair share [default: three quarters of the container's CPU
    /// quota, or of the machine's CPUs without one].
    #[arg(long, value_name = "CPUS", value_parser = parse_cpus)]
    pub guest_cpu_budget: Option<f64>,
    /// Leader election.
    #[command(flatten)]
    pub leader: LeaderArgs,
    /// Sandbox options.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// A byte count: digits, optionally followed by Ki, Mi or Gi.
fn parse_bytes(text: &str) -> Result<u64, ValueError> {
    let (digits, shift) = match text.trim() {
        t if t.ends_with("Ki") => (&t[..t.len() - 2], 10),
        t if t.ends_with("Mi") => (&t[..t.len() - 2], 20),
        t if t.ends_with("Gi") => (&t[..t.len() - 2], 30),
        t => (t, 0),
    };
    let n: u64 = digits.parse().map_err(|_| ValueError::NotBytes)?;
    let bytes = n.checked_shl(shift).filter(|b| b >> shift == n).ok_or(ValueError::TooManyBytes)?;
    if bytes < 16 << 20 {
        return Err(ValueError::TooFewBytes);
    }
    Ok(bytes)
}

/// A CPU count: a decimal (0.5) or millicores (500m).
fn parse_cpus(text: &str) -> Result<f64, ValueError> {
    let text = text.trim();
    let cpus = match text.strip_suffix('m') {
        Some(milli) => milli.parse::<u32>().map(|m| f64::from(m) / 1000.0).ok(),
        None => text.parse::<f64>().ok(),
    };
    match cpus {
        Some(cpus) if cpus.is_finite() && (0.01..=1024.0).contains(&cpus) => Ok(cpus),
        _ => Err(ValueError::NotCpus),
    }
}
