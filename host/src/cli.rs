//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[cfg(feature = "cluster")]
mod cluster;
#[cfg(feature = "cluster")]
pub use cluster::{
    BundleArgs, ClusterCommand, DevArgs, HostArgs, InitialListMode, PluginIdentity, PushArgs, RecordArgs, ReplayArgs,
    ReplayOutput, RunArgs, ShadowArg,
};

/// A Kubernetes reconcile host whose controller logic is pluggable WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "wasmloop", version, about, long_about = None)]
pub struct Cli {
    /// Log line format on stderr. The level comes from WASMLOOP_LOG or RUST_LOG (default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

/// Reconcile phases, as on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PhaseArg {
    /// The primary exists.
    Apply,
    /// The primary is being deleted and holds the plugin's finalizer.
    Cleanup,
    /// The primary is gone; the object is its last known state.
    Deleted,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a plugin's manifest.
    Inspect(InspectArgs),
    /// Run one reconcile offline, with no cluster, and print the actions.
    Reconcile(ReconcileArgs),
    /// The commands that need a cluster, a registry or the host's machinery.
    #[cfg(feature = "cluster")]
    #[command(flatten)]
    Cluster(ClusterCommand),
}

/// Sandbox options shared by the commands that load plugins.
#[derive(Debug, Clone, Args)]
pub struct SandboxArgs {
    /// Directory of the compiled-component cache [default: the user cache dir, wasmloop/components].
    #[arg(long, env = "WASMLOOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile every time; read and write no compile cache.
    #[arg(long)]
    pub no_compile_cache: bool,
    /// Deadline of one guest call in milliseconds [default: the plugin's, else 1000].
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// Guest memory ceiling in bytes [default: the plugin's, else 64 MiB].
    #[arg(long)]
    pub memory_limit: Option<usize>,
    /// Response size cap in bytes [default: the plugin's, else 4 MiB].
    #[arg(long)]
    pub response_limit: Option<usize>,
    /// Most actions in one response [default: 10000].
    #[arg(long)]
    pub max_actions: Option<usize>,
    /// Bytes of each freed guest memory's resident pages reset in place for the next instance
    /// rather than returned to the kernel [default: 64 KiB; at most 16 MiB]. Each pool slot
    /// used keeps up to this much resident, copied back on every reset: with the kernel's page
    /// scan (Linux 6.7+) more was no faster in the benchmarks (see docs/benchmarks.md).
    #[arg(long, env = "WASMLOOP_KEEP_RESIDENT_BYTES", value_parser = clap::value_parser!(u64).range(0..=16 << 20))]
    pub keep_resident_bytes: Option<u64>,
}

/// `wasmloop inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The plugin component (.wasm).
    pub plugin: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Yaml)]
    pub output: OutputFormat,
    /// Sandbox options.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// `wasmloop reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The plugin component (.wasm).
    #[arg(long)]
    pub plugin: PathBuf,
    /// The primary object (YAML or JSON, one document).
    #[arg(long, required_unless_present = "map")]
    pub object: Option<PathBuf>,
    /// Run `map` instead of `reconcile`, for this changed object of a watched kind (YAML or
    /// JSON, one document), and print the primaries it names. The plugin's cache look-ups see
    /// `--cache`, as for a reconcile.
    #[arg(long, conflicts_with_all = ["object", "owned", "previous"])]
    pub map: Option<PathBuf>,
    /// With `--map`: the object was deleted (or left the watch's selection).
    #[arg(long, requires = "map")]
    pub deleted: bool,
    /// Observed owned children (YAML or JSON; several documents or a List allowed). Repeatable.
    #[arg(long)]
    pub owned: Vec<PathBuf>,
    /// Objects the plugin's cache look-ups see, besides the primary and owned ones. Repeatable.
    #[arg(long)]
    pub cache: Vec<PathBuf>,
    /// The primary as last reconciled, for plugins that ask for `previous`.
    #[arg(long)]
    pub previous: Option<PathBuf>,
    /// The plugin's configuration (YAML or JSON).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The reconcile phase.
    #[arg(long, value_enum, default_value_t = PhaseArg::Apply)]
    pub phase: PhaseArg,
    /// The attempt number (0 on a first try).
    #[arg(long, default_value_t = 0)]
    pub attempt: u32,
    /// Why the call runs (contract 0.3's triggers): a YAML or JSON list, oldest first, in the
    /// form recorded cases keep them (`- relatedChanged: {apiVersion: v1, kind: ConfigMap,
    /// name: settings, namespace: shop}`, `- primaryChanged: {old: 1, new: 2}`, `- resync`).
    #[arg(long, conflicts_with = "map")]
    pub triggers: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Yaml)]
    pub output: OutputFormat,
    /// Sandbox options.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}
