//! The daemon's configuration: built-in defaults, then `~/.config/agentd/config.toml`, then
//! environment variables, then the keys of the credentials file (`agentctl login`). A bad
//! file is an error that names the key, never a panic. Errors about keys, providers and the
//! config say what to do in the terms of how the daemon was started ([`StartedBy`]).

use crate::hooks::{Hook, Trusted};
use agentd_proto::credentials::{self, Credentials};
use agentd_proto::{
    ConfigPatch, KeySource, McpServerConfig, ProviderInfo, ProviderKind, SandboxMode,
    SessionConfig, StartedBy,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable naming another config file.
pub(crate) const CONFIG_ENV: &str = "AGENTD_CONFIG";

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key, for the one place that puts it in a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// One provider the daemon can use.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The name sessions use.
    pub name: String,
    /// The API family.
    pub kind: ProviderKind,
    /// Base URL, without the `/v1/...` path.
    pub base_url: String,
    /// The key in use, when there is one: the credentials file's, else the environment's.
    pub api_key: Option<ApiKey>,
    /// Where `api_key` comes from.
    pub key_source: Option<KeySource>,
    /// The key the environment gave when the daemon started (used when the credentials file
    /// has none for this provider).
    env_key: Option<ApiKey>,
    /// Where the key is read from, for error messages.
    pub api_key_env: String,
    /// Whether the base URL was set explicitly (a gateway or local server may need no key).
    pub custom_base_url: bool,
    /// Model used when a session names none.
    pub default_model: String,
    /// Context window of the default model, in tokens.
    pub context_window_tokens: u64,
    /// Models to list (informational).
    pub models: Vec<String>,
    /// Anthropic beta flags, sent as the `anthropic-beta` header.
    pub beta_headers: Vec<String>,
    /// Whether its models take images in user input (`images`; by default the vendors' APIs
    /// do and OpenAI-compatible endpoints, often text-only models, do not).
    pub images: bool,
    /// Timeouts and size caps of its calls (`idle_timeout_secs`, `request_timeout_secs`,
    /// `max_line_bytes`, `max_response_bytes`).
    pub limits: crate::llm::Limits,
}

/// Built-in facts per family: the conventional base URL (as each vendor's SDK spells it), the
/// environment variables, a default model and its context window.
struct FamilyDefaults {
    base_url: Option<&'static str>,
    env_prefix: &'static str,
    default_model: &'static str,
    context_window_tokens: u64,
}

fn family(kind: ProviderKind) -> FamilyDefaults {
    match kind {
        ProviderKind::Anthropic => FamilyDefaults {
            base_url: Some("https://api.anthropic.com"),
            env_prefix: "ANTHROPIC",
            default_model: "claude-sonnet-4-5",
            context_window_tokens: 200_000,
        },
        ProviderKind::Openai => FamilyDefaults {
            base_url: Some("https://api.openai.com/v1"),
            env_prefix: "OPENAI",
            default_model: "gpt-5.1",
            context_window_tokens: 400_000,
        },
        ProviderKind::Gemini => FamilyDefaults {
            base_url: Some("https://generativelanguage.googleapis.com"),
            env_prefix: "GEMINI",
            default_model: "gemini-2.5-pro",
            context_window_tokens: 1_048_576,
        },
        // An endpoint you run or name: its base URL and model come from the config file.
        ProviderKind::OpenaiChat => FamilyDefaults {
            base_url: None,
            env_prefix: "OPENAI",
            default_model: "",
            context_window_tokens: 128_000,
        },
    }
}

/// The built-in providers, present without any config file.
const BUILT_IN: [ProviderKind; 3] = [
    ProviderKind::Anthropic,
    ProviderKind::Openai,
    ProviderKind::Gemini,
];

impl ProviderConfig {
    /// Whether requests can be sent: a key is set, or a custom endpoint that may need none
    /// (local servers usually take no key).
    pub fn is_usable(&self) -> bool {
        self.api_key.is_some() || self.custom_base_url
    }

    /// What a user must do to make this provider usable, for a daemon started by
    /// `started_by`: `agentctl login` works at once whatever started it; the environment
    /// variable needs a restart, done the way that daemon is restarted.
    pub fn setup_hint(&self, started_by: StartedBy) -> String {
        let variable = match started_by {
            StartedBy::Systemd => format!(
                "or put {}=... in ~/.config/agentd/env (the unit's EnvironmentFile) and run \
                 `systemctl --user restart agentd.service`",
                self.api_key_env
            ),
            StartedBy::Agentctl | StartedBy::Hand => format!(
                "or export {} and run `agentctl daemon restart`, which starts agentd again with \
                 your shell's environment",
                self.api_key_env
            ),
        };
        format!(
            "provider {:?} has no API key: run `agentctl login {}` (it applies to the next \
             session, no restart needed), {variable}",
            self.name, self.name
        )
    }

    /// The provider as listed by `daemon/info`.
    pub fn info(&self, started_by: StartedBy) -> ProviderInfo {
        ProviderInfo {
            name: self.name.clone(),
            kind: self.kind,
            base_url: self.base_url.clone(),
            has_key: self.api_key.is_some(),
            key_source: self.key_source,
            key_env: self.api_key_env.clone(),
            ready: self.is_usable(),
            not_ready: (!self.is_usable()).then(|| self.setup_hint(started_by)),
            default_model: self.default_model.clone(),
            models: self.models.clone(),
        }
    }
}

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output, reasoning included.
    pub output: f64,
    /// Input read from the cache (default: the input price).
    pub cache_read: Option<f64>,
    /// Input written to the cache (default: the input price).
    pub cache_write: Option<f64>,
}

impl Price {
    /// What `usage` costs.
    pub fn cost(&self, usage: &agentd_proto::Usage) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(usage.input_tokens, self.input)
            + per(usage.output_tokens, self.output)
            + per(
                usage.cache_read_tokens,
                self.cache_read.unwrap_or(self.input),
            )
            + per(
                usage.cache_write_tokens,
                self.cache_write.unwrap_or(self.input),
            )
    }
}

/// The daemon's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Provider used when `session/create` names none.
    pub default_provider: String,
    /// Every provider, by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Overrides of the built-in session defaults.
    pub session_defaults: ConfigPatch,
    /// `tracing` filter, e.g. `info` or `agentd=debug`.
    pub log_level: String,
    /// Prices by model name, to report costs.
    pub pricing: BTreeMap<String, Price>,
    /// Limits on client connections (`[server]`).
    pub server: ServerConfig,
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    /// A loaded session that is idle or closed, unwatched and unused this long is unloaded
    /// (its memory freed; it loads again on its next use). `None`: never (`[daemon]
    /// evict_idle_secs = 0`).
    pub evict_idle_after: Option<Duration>,
    /// `[tools]`: what commands run with.
    pub tools: ToolsConfig,
    /// `[hosts.NAME]`: machines sessions may run on over SSH, by name.
    pub hosts: BTreeMap<String, HostConfig>,
    /// `[containers.NAME]`: images sessions may run in, by name, with their engine and limits.
    pub containers: BTreeMap<String, ContainerConfig>,
    /// `[mcp_servers.NAME]`: the MCP servers every new session takes tools from.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `[[hooks.EVENT]]`: the user's programs run at points of every new session's loop.
    pub hooks: Vec<Hook>,
    /// `[trusted_workspaces."DIR"]`: where a project's `.agents/hooks.toml` may run.
    pub trusted_workspaces: Trusted,
    /// `[checkpoints]`: the files recorded for undo.
    pub checkpoints: CheckpointsConfig,
    /// Problems that do not stop the daemon but should be fixed (a config file others can
    /// write); logged at start and printed by `--check-config`.
    pub warnings: Vec<String>,
    /// The file asked for (`--config`, `AGENTD_CONFIG` or the default), read again by a reload.
    pub requested: Option<PathBuf>,
    /// Whether `requested` was named explicitly (then it must exist).
    pub explicit: bool,
    /// The credentials file read when sessions are created (`None`: no home directory).
    pub credentials_path: Option<PathBuf>,
    /// The credentials applied to `providers`.
    pub credentials: Credentials,
    /// How the daemon was started, for the hints in errors.
    pub started_by: StartedBy,
}

/// `[tools]`: the environment commands run with. Secrets are kept out by default patterns
/// (`exec::DEFAULT_SECRET_PATTERNS`) and by the names the daemon reads keys from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// More variables to keep out: names or patterns with `*`, case-insensitive.
    #[serde(default)]
    pub env_deny: Vec<String>,
    /// Variables to pass although a pattern matches them: exact names, case-insensitive.
    /// A provider's key variable is never passed.
    #[serde(default)]
    pub env_allow: Vec<String>,
}

/// `[checkpoints]`: the workspace's files recorded before and after each tool round that
/// may change them, for `session/rollback {files: true}`, redo and diff.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointsConfig {
    /// Record checkpoints (default true).
    pub enabled: bool,
    /// Larger files are not recorded, and an undo says it could not restore them (10 MiB).
    pub max_file_bytes: u64,
    /// The disk all sessions' checkpoints take together; the oldest go first (2 GiB).
    pub max_total_bytes: u64,
}

impl Default for CheckpointsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_file_bytes: 10 << 20,
            max_total_bytes: 2 << 30,
        }
    }
}

/// `[hosts.NAME]`: a machine sessions may run on over SSH, named by clients as
/// `{"kind": "ssh", "host": "NAME", "cwd": ...}`. Every key is optional; what is absent comes
/// from the ssh configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// The host name or address to connect to (default: NAME, which the ssh configuration
    /// may resolve as an alias).
    pub hostname: Option<String>,
    /// The remote user.
    pub user: Option<String>,
    /// The port.
    pub port: Option<u16>,
    /// A private key file.
    pub identity_file: Option<PathBuf>,
    /// The ssh configuration file (`ssh -F`) instead of `~/.ssh/config`.
    pub ssh_config: Option<PathBuf>,
    /// The known-hosts file host keys are checked against instead of `~/.ssh/known_hosts`.
    pub known_hosts: Option<PathBuf>,
    /// How long one file operation, grep or glob may take on the host before it fails and is
    /// ended there (default 30 s).
    pub file_timeout_secs: Option<u64>,
}

/// `[containers.NAME]`: a container sessions may run in, named by clients as
/// `{"kind": "container", "image": "NAME"}` or `agentctl new --container NAME`. A client's
/// values override the entry's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerConfig {
    /// The image (which the engine must have: agentd never pulls).
    pub image: String,
    /// The engine's address (`unix:///PATH`, `tcp://HOST:PORT`, `ssh://[USER@]HOST[:PORT]`
    /// with HOST a `[hosts.NAME]` entry or a host ssh knows, or a socket's path); default
    /// `DOCKER_HOST`, else `unix:///var/run/docker.sock`.
    pub engine: Option<String>,
    /// Whether commands may reach the network (default false).
    pub network: Option<bool>,
    /// Memory cap in MiB, swap included (default 4096).
    pub memory_mb: Option<u64>,
    /// Most processes at once (default 1024).
    pub pids_limit: Option<u64>,
    /// CPU share in thousandths of a CPU (default: no cap).
    pub millicpus: Option<u64>,
    /// The user commands run as in the container (`UID[:GID]` or a name the image knows);
    /// default the daemon's uid and gid, so the workspace's files stay the user's.
    pub user: Option<String>,
}

/// The default of `[hosts.NAME] file_timeout_secs`.
pub(crate) const DEFAULT_FILE_TIMEOUT: Duration = Duration::from_secs(30);

impl HostConfig {
    /// How long one file operation, grep or glob may take on the host.
    pub fn file_timeout(&self) -> Duration {
        self.file_timeout_secs
            .map_or(DEFAULT_FILE_TIMEOUT, Duration::from_secs)
    }
}

/// A configuration problem; the message names the file and key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has a bad key or value.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key and line.
        message: String,
    },
    /// A value is out of range or refers to something that does not exist.
    #[error("invalid config: {0}")]
    Invalid(String),
    /// The credentials file cannot be used; the message never holds a key.
    #[error("credentials file {path}: {message}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
}

/// The `[server]` table: what clients may hold. Absent keys keep the server's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Connections served at once (lowered to fit the file descriptor limit).
    pub max_connections: Option<usize>,
    /// Seconds after which a connection with no subscription and no call in flight that
    /// completes no message is closed; 0 never closes one.
    pub idle_timeout_secs: Option<u64>,
    /// MiB of requests held at once across all connections (being read or handled).
    pub max_buffered_input_mb: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    default_provider: Option<String>,
    log_level: Option<String>,
    #[serde(default)]
    providers: BTreeMap<String, FileProvider>,
    #[serde(default)]
    session: ConfigPatch,
    #[serde(default)]
    pricing: BTreeMap<String, Price>,
    #[serde(default)]
    daemon: FileDaemon,
    #[serde(default)]
    server: ServerConfig,
    #[serde(default)]
    tools: ToolsConfig,
    #[serde(default)]
    hosts: BTreeMap<String, HostConfig>,
    #[serde(default)]
    containers: BTreeMap<String, ContainerConfig>,
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServerConfig>,
    #[serde(default)]
    hooks: crate::hooks::HooksTable,
    #[serde(default)]
    trusted_workspaces: BTreeMap<String, crate::hooks::TrustTable>,
    #[serde(default)]
    checkpoints: CheckpointsConfig,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileDaemon {
    evict_idle_secs: Option<u64>,
}

/// How long a session stays loaded with nothing to do before it is unloaded to its files.
pub(crate) const DEFAULT_EVICT_IDLE: Duration = Duration::from_secs(600);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProvider {
    kind: Option<ProviderKind>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    default_model: Option<String>,
    context_window_tokens: Option<u64>,
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    beta_headers: Vec<String>,
    images: Option<bool>,
    idle_timeout_secs: Option<u64>,
    request_timeout_secs: Option<u64>,
    max_line_bytes: Option<u64>,
    max_response_bytes: Option<u64>,
}

/// The provider's call limits: the defaults, with the file's values; each must be at least 1.
fn limits(name: &str, p: Option<&FileProvider>) -> Result<crate::llm::Limits, Error> {
    let mut limits = crate::llm::Limits::default();
    let Some(p) = p else {
        return Ok(limits);
    };
    let positive = |key: &str, value: Option<u64>| match value {
        Some(0) => Err(Error::Invalid(format!(
            "providers.{name}.{key} must be at least 1"
        ))),
        other => Ok(other),
    };
    // A size past the address space is no limit at all.
    let bytes = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    if let Some(s) = positive("idle_timeout_secs", p.idle_timeout_secs)? {
        limits.idle_timeout = Duration::from_secs(s);
    }
    if let Some(s) = positive("request_timeout_secs", p.request_timeout_secs)? {
        limits.request_timeout = Duration::from_secs(s);
    }
    if let Some(b) = positive("max_line_bytes", p.max_line_bytes)? {
        limits.max_line_bytes = bytes(b);
    }
    if let Some(b) = positive("max_response_bytes", p.max_response_bytes)? {
        limits.max_response_bytes = bytes(b);
    }
    Ok(limits)
}

/// The spec's defaults (spec 2.2) for a session on `provider` with `model`.
pub(crate) fn default_session_config(provider: &str, model: &str) -> SessionConfig {
    SessionConfig {
        provider: provider.into(),
        model: model.into(),
        reasoning_effort: None,
        max_output_tokens: 16_000,
        max_turns: 0,
        max_tool_rounds_per_input: 0,
        default_command_timeout_ms: 10_000,
        max_command_timeout_ms: 600_000,
        tool_output_limits: BTreeMap::new(),
        tool_line_limits: BTreeMap::new(),
        enable_loop_detection: true,
        loop_detection_window: 10,
        context_window_tokens: 200_000,
        auto_compact_percent: 80,
        max_subagent_depth: 1,
        max_concurrent_subagents: 4,
        approval: agentd_proto::ApprovalConfig::default(),
        client_tools: Vec::new(),
        sandbox: SandboxMode::WorkspaceWrite,
        sandbox_writable_roots: Vec::new(),
        sandbox_network: false,
        mcp_servers: BTreeMap::new(),
    }
}

/// Where the config file is looked for by default.
pub fn default_config_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    directories::ProjectDirs::from("", "", "agentd").map(|d| d.config_dir().join("config.toml"))
}

/// The directory of the default config file and the credentials file
/// (`$XDG_CONFIG_HOME/agentd`).
pub fn default_config_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "agentd").map(|d| d.config_dir().to_owned())
}

/// The credentials file: `$AGENTD_CREDENTIALS`, else `credentials.json` beside the default
/// config file.
pub(crate) fn default_credentials_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "agentd")
        .map(|d| credentials::credentials_path(d.config_dir()))
}

/// Reads the credentials file at `path`; a missing file holds no keys. The file must be the
/// user's alone (like ssh, a key others can read is refused rather than used), at most
/// [`credentials::MAX_CREDENTIALS_BYTES`], and every key must pass [`credentials::check_key`].
pub(crate) fn read_credentials(path: &Path) -> Result<Credentials, Error> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let bad = |message: String| Error::Credentials {
        path: path.to_owned(),
        message,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Credentials::default()),
        Err(e) => return Err(bad(format!("cannot read it: {e}"))),
    };
    let meta = file
        .metadata()
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(bad(format!(
            "other users can read or write it (mode {mode:04o}); fix it with `chmod 600 {}`",
            path.display()
        )));
    }
    let mut text = String::new();
    file.take(credentials::MAX_CREDENTIALS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    if text.len() as u64 > credentials::MAX_CREDENTIALS_BYTES {
        return Err(bad(format!(
            "it is larger than {} bytes; `agentctl logout PROVIDER` or delete it",
            credentials::MAX_CREDENTIALS_BYTES
        )));
    }
    // The error names the place and the kind of problem, never the file's text (its keys).
    credentials::parse(&text).map_err(|e| {
        bad(format!(
            "{e}; it is not what `agentctl login` writes: delete it and log in again \
             (`agentctl login PROVIDER`)"
        ))
    })
}

/// Where sessions are stored by default: `$XDG_STATE_HOME/agentd` (`~/.local/state/agentd`),
/// or the platform's local data directory where there is no state directory (macOS).
pub fn default_state_dir() -> Option<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "agentd")?;
    Some(
        dirs.state_dir()
            .unwrap_or_else(|| dirs.data_local_dir())
            .to_owned(),
    )
}

impl Config {
    /// Loads `path` (a missing default file is fine; a missing explicit one is an error) and
    /// applies the environment.
    pub fn load(path: Option<&Path>, explicit: bool) -> Result<Self, Error> {
        let (file, source) = match path {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(text) => (parse(&text, p)?, Some(p.to_owned())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                    (FileConfig::default(), None)
                }
                Err(e) => {
                    return Err(Error::Read {
                        path: p.to_owned(),
                        source: e,
                    });
                }
            },
            None => (FileConfig::default(), None),
        };
        let mut config = Self::build(file, source, &|k| {
            std::env::var(k).ok().filter(|v| !v.is_empty())
        })?;
        if let Some(path) = &config.source {
            config.warnings.extend(permission_warning(path));
        }
        config.requested = path.map(Path::to_owned);
        config.explicit = explicit;
        config.credentials_path = default_credentials_path();
        if let Some(path) = &config.credentials_path {
            let creds = read_credentials(path)?;
            config = config.with_credentials(creds);
        }
        Ok(config)
    }

    /// The config as its files say now, for a reload: the same files, environment and
    /// start-up facts as this one.
    pub fn reload(&self) -> Result<Self, Error> {
        let mut config = Self::load(self.requested.as_deref(), self.explicit)?;
        config.started_by = self.started_by;
        Ok(config)
    }

    /// This config with `creds` as the credentials file's keys: a provider's key there wins
    /// over its environment variable; without one, the variable's key (if any) is used.
    pub fn with_credentials(&self, creds: Credentials) -> Self {
        let mut config = self.clone();
        for p in config.providers.values_mut() {
            (p.api_key, p.key_source) = match creds.api_keys.get(&p.name) {
                Some(key) => (Some(ApiKey(key.clone())), Some(KeySource::Credentials)),
                None => (
                    p.env_key.clone(),
                    p.env_key.as_ref().map(|_| KeySource::Environment),
                ),
            };
        }
        config.credentials = creds;
        config
    }

    /// The file a user edits to configure this daemon: the one read, else the one looked for.
    pub fn file_to_edit(&self) -> String {
        self.source
            .as_ref()
            .or(self.requested.as_ref())
            .map_or("the config file".into(), |p| p.display().to_string())
    }

    fn build(
        file: FileConfig,
        source: Option<PathBuf>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, Error> {
        let mut entries: Vec<(String, Option<FileProvider>)> = BUILT_IN
            .iter()
            .map(|k| (k.as_str().to_owned(), None))
            .collect();
        for (name, p) in file.providers {
            match entries.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = Some(p),
                None => entries.push((name, Some(p))),
            }
        }
        let mut providers = BTreeMap::new();
        for (name, p) in entries {
            let built_in = BUILT_IN.iter().find(|k| k.as_str() == name).copied();
            let kind = match (p.as_ref().and_then(|p| p.kind), built_in) {
                (Some(k), _) | (None, Some(k)) => k,
                (None, None) => {
                    return Err(Error::Invalid(format!(
                        "providers.{name}.kind is missing (one of: anthropic, openai, openai_chat, gemini)"
                    )));
                }
            };
            let defaults = family(kind);
            let api_key_env = p
                .as_ref()
                .and_then(|p| p.api_key_env.clone())
                .unwrap_or_else(|| format!("{}_API_KEY", defaults.env_prefix));
            // The *_BASE_URL variable belongs to the built-in provider of that family.
            let env_base = if built_in.is_some() {
                env(&format!("{}_BASE_URL", defaults.env_prefix))
            } else {
                None
            };
            let file_base = p.as_ref().and_then(|p| p.base_url.clone());
            let custom_base_url = env_base.is_some() || file_base.is_some();
            let base_url = env_base
                .or(file_base)
                .or(defaults.base_url.map(str::to_owned))
                .ok_or_else(|| Error::Invalid(format!("providers.{name}.base_url is missing (e.g. \"http://127.0.0.1:11434/v1\" for Ollama)")))?;
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(Error::Invalid(format!(
                    "providers.{name}.base_url must start with http:// or https://, got {base_url:?}"
                )));
            }
            let default_model = p
                .as_ref()
                .and_then(|p| p.default_model.clone())
                .unwrap_or_else(|| defaults.default_model.to_owned());
            if default_model.is_empty() {
                return Err(Error::Invalid(format!(
                    "providers.{name}.default_model is missing"
                )));
            }
            let limits = limits(&name, p.as_ref())?;
            let env_key = env(&api_key_env).map(ApiKey);
            let provider = ProviderConfig {
                name: name.clone(),
                limits,
                kind,
                base_url: base_url.trim_end_matches('/').to_owned(),
                api_key: env_key.clone(),
                key_source: env_key.as_ref().map(|_| KeySource::Environment),
                env_key,
                api_key_env,
                custom_base_url,
                default_model,
                context_window_tokens: p
                    .as_ref()
                    .and_then(|p| p.context_window_tokens)
                    .unwrap_or(defaults.context_window_tokens),
                beta_headers: p
                    .as_ref()
                    .map(|p| p.beta_headers.clone())
                    .unwrap_or_default(),
                images: p
                    .as_ref()
                    .and_then(|p| p.images)
                    .unwrap_or(kind != ProviderKind::OpenaiChat),
                models: p.map(|p| p.models).unwrap_or_default(),
            };
            providers.insert(name, provider);
        }
        if file.server.max_connections == Some(0) {
            return Err(Error::Invalid(
                "server.max_connections must be at least 1".into(),
            ));
        }
        if file.server.max_buffered_input_mb == Some(0) {
            return Err(Error::Invalid(
                "server.max_buffered_input_mb must be at least 1".into(),
            ));
        }
        if let Some(name) = file
            .hosts
            .iter()
            .find_map(|(name, h)| (h.file_timeout_secs == Some(0)).then_some(name))
        {
            return Err(Error::Invalid(format!(
                "hosts.{name}.file_timeout_secs must be at least 1"
            )));
        }
        if let Some(bad) = file.tools.env_allow.iter().find(|n| n.contains('*')) {
            return Err(Error::Invalid(format!(
                "tools.env_allow takes exact names, not patterns: {bad:?}"
            )));
        }
        if file.tools.env_deny.iter().any(|p| p.trim().is_empty()) {
            return Err(Error::Invalid(
                "tools.env_deny has an empty name".to_owned(),
            ));
        }
        let default_provider = file.default_provider.unwrap_or_else(|| "anthropic".into());
        if !providers.contains_key(&default_provider) {
            return Err(Error::Invalid(format!(
                "default_provider {default_provider:?} is not a configured provider"
            )));
        }
        let config = Self {
            default_provider,
            providers,
            session_defaults: file.session,
            pricing: file.pricing,
            evict_idle_after: match file.daemon.evict_idle_secs {
                None => Some(DEFAULT_EVICT_IDLE),
                Some(0) => None,
                Some(secs) => Some(Duration::from_secs(secs)),
            },
            server: file.server,
            tools: file.tools,
            hosts: file.hosts,
            containers: file.containers,
            mcp_servers: file.mcp_servers,
            hooks: crate::hooks::check(&file.hooks, crate::hooks::Origin::Config)
                .map_err(Error::Invalid)?,
            trusted_workspaces: crate::hooks::check_trusted(&file.trusted_workspaces)
                .map_err(Error::Invalid)?,
            checkpoints: file.checkpoints,
            warnings: Vec::new(),
            requested: None,
            explicit: false,
            credentials_path: None,
            credentials: Credentials::default(),
            started_by: StartedBy::Hand,
            log_level: env("AGENTD_LOG")
                .or(file.log_level)
                .unwrap_or_else(|| "info".into()),
            source,
        };
        config.session_config(&config.default_provider, None)?;
        Ok(config)
    }

    /// What to say about a provider name that is not configured: the ones that are, and how
    /// to add it without a restart.
    pub fn unknown_provider(&self, name: &str) -> String {
        let known: Vec<&str> = self.providers.keys().map(String::as_str).collect();
        format!(
            "unknown provider {name:?}; configured: {}; to add it, write [providers.{name}] in {} \
             and run `agentctl daemon reload`",
            known.join(", "),
            self.file_to_edit()
        )
    }

    /// The environment variables the daemon reads API keys from: commands never see them.
    pub fn key_variables(&self) -> impl Iterator<Item = &str> {
        self.providers.values().map(|p| p.api_key_env.as_str())
    }

    /// The initial config of a new session on `provider` (default: the configured one), with
    /// the file's session defaults applied and validated.
    pub fn session_config(
        &self,
        provider: &str,
        model: Option<&str>,
    ) -> Result<SessionConfig, Error> {
        let p = self
            .providers
            .get(provider)
            .ok_or_else(|| Error::Invalid(self.unknown_provider(provider)))?;
        let mut config = default_session_config(provider, model.unwrap_or(&p.default_model));
        config.context_window_tokens = p.context_window_tokens;
        config.mcp_servers = self.mcp_servers.clone();
        config.apply(&self.session_defaults);
        validate_session_config(&config)?;
        Ok(config)
    }
}

/// Most extra writable roots a session may list: each is opened for every sandboxed command.
const MAX_WRITABLE_ROOTS: usize = 64;

/// Checks the values a session config may not take.
pub(crate) fn validate_session_config(c: &SessionConfig) -> Result<(), Error> {
    let bad = |key: &str, why: &str| Err(Error::Invalid(format!("{key} {why}")));
    if c.model.trim().is_empty() {
        return bad("model", "must not be empty");
    }
    if c.max_output_tokens == 0 {
        return bad("max_output_tokens", "must be at least 1");
    }
    if c.default_command_timeout_ms == 0 || c.max_command_timeout_ms == 0 {
        return bad(
            "default_command_timeout_ms and max_command_timeout_ms",
            "must be at least 1",
        );
    }
    if c.enable_loop_detection && c.loop_detection_window < 2 {
        return bad("loop_detection_window", "must be at least 2");
    }
    if c.context_window_tokens == 0 {
        return bad("context_window_tokens", "must be at least 1");
    }
    if c.auto_compact_percent > 100 {
        return bad("auto_compact_percent", "must be 0 (off) to 100");
    }
    if c.approval.timeout_ms == 0 {
        return bad("approval.timeout_ms", "must be at least 1");
    }
    crate::agent::approval::validate(&c.approval).map_err(Error::Invalid)?;
    crate::mcp::validate(&c.mcp_servers).map_err(Error::Invalid)?;
    if c.sandbox_writable_roots.len() > MAX_WRITABLE_ROOTS {
        return bad(
            "sandbox_writable_roots",
            &format!("may list at most {MAX_WRITABLE_ROOTS} directories"),
        );
    }
    if let Some(root) = c.sandbox_writable_roots.iter().find(|r| !r.is_absolute()) {
        return bad(
            "sandbox_writable_roots",
            &format!(
                "must hold absolute paths, got {:?}",
                root.display().to_string()
            ),
        );
    }
    Ok(())
}

/// A warning when other users can write the config file: whoever can write it chooses the
/// endpoints that receive your keys and conversations, and what tools may do.
fn permission_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o002 != 0).then(|| {
        format!(
            "config file {} is writable by every user (mode {mode:04o}): anyone on this machine can \
             point your providers at their own server; fix it with `chmod 600 {}`",
            path.display(),
            path.display()
        )
    })
}

/// Parses the config file. The error names the line and column, and never shows the line
/// itself or a string value (toml's own report quotes both): a key pasted into the file would
/// end up in logs and terminals.
fn parse(text: &str, path: &Path) -> Result<FileConfig, Error> {
    parse_toml(text).map_err(|message| Error::Parse {
        path: path.to_owned(),
        message,
    })
}

/// Parses a TOML file of agentd's into `T`: on error, the line, column and key, never the
/// line itself or a string value (see [`parse`]).
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
        let key = e.path().to_string();
        let e = e.into_inner();
        let mut message = String::new();
        if let Some(span) = e.span() {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .unwrap_or_default()
                .chars()
                .count()
                + 1;
            message = format!("line {line}, column {column}: ");
        }
        if key != "." {
            message = format!("{message}{key}: ");
        }
        message.push_str(&without_strings(e.message().trim_end()));
        message
    })
}

/// `message` with every double-quoted string in it (serde quotes the value it did not expect,
/// toml a key) replaced by `"…"`. A quote between backticks is the character itself.
fn without_strings(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars().peekable();
    let mut previous = None;
    while let Some(c) = chars.next() {
        out.push(c);
        let quoted_char = previous == Some('`') && chars.peek() == Some(&'`');
        previous = Some(c);
        if c == '"' && !quoted_char {
            let mut escaped = false;
            for c in chars.by_ref() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => break,
                    _ => escaped = false,
                }
            }
            out.push_str("…\"");
        }
    }
    out
}

#[cfg(test)]
impl Config {
    /// The config a file holding `text` gives, with no environment variable and no
    /// credentials file: for tests elsewhere in the crate.
    pub(crate) fn from_file_text(text: &str) -> Result<Self, Error> {
        Self::build(parse(text, Path::new("config.toml"))?, None, &|_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(text: &str, env: &[(&str, &str)]) -> Result<Config, Error> {
        let file = parse(text, Path::new("config.toml"))?;
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::build(file, None, &move |k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn a_config_error_shows_neither_the_line_nor_a_string_value() {
        let key = "fake-SECRET0123";
        for (text, says) in [
            (
                format!("[providers.anthropic]\napi_key = \"{key}\"\n"),
                "line 2, column 1: providers.anthropic.api_key: unknown field `api_key`, expected one of",
            ),
            (
                format!("[session]\nmax_turns = \"{key}\"\n"),
                "line 2, column 13: session.max_turns: invalid type: string \"…\", expected",
            ),
            (format!("[session]\n{key}\n"), "line 2, column "),
            (format!("x = \"{key}\n"), "line 1, column "),
        ] {
            let err = parse(&text, Path::new("c.toml")).err().unwrap().to_string();
            assert!(!err.contains("SECRET"), "{text}: {err}");
            assert!(err.contains(says), "{text}: {err}");
        }
        assert_eq!(
            without_strings(r#"expected `"`, `'` or "a\"b" then "c""#),
            r#"expected `"`, `'` or "…" then "…""#
        );
    }

    #[test]
    fn anthropic_is_built_in_and_reads_env() {
        let c = build(
            "",
            &[
                ("ANTHROPIC_API_KEY", "sk"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
            ],
        )
        .unwrap();
        let p = &c.providers["anthropic"];
        assert_eq!(p.base_url, "http://127.0.0.1:9");
        assert_eq!(p.api_key.as_ref().map(ApiKey::expose), Some("sk"));
        assert_eq!(format!("{:?}", p.api_key), "Some(ApiKey(***))");
        assert!(p.is_usable());
        let unusable = build("", &[]).unwrap();
        assert!(!unusable.providers["anthropic"].is_usable());
        assert!(
            unusable.providers["anthropic"]
                .setup_hint(StartedBy::Hand)
                .contains("ANTHROPIC_API_KEY")
        );
    }

    #[test]
    fn unknown_key_is_named() {
        let err = build("[session]\nmax_turnz = 3\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_turnz"), "{err}");
    }

    #[test]
    fn bad_values_are_named() {
        let err = build("[session]\nloop_detection_window = 1\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("loop_detection_window"), "{err}");
        let err = build("default_provider = \"nope\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope"), "{err}");
        let err = build("[providers.local]\nbase_url = \"http://x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("providers.local.kind"), "{err}");
    }

    #[test]
    fn a_host_s_file_timeout_defaults_and_must_be_positive() {
        let c = build(
            "[hosts.a]\nfile_timeout_secs = 5\n[hosts.b]\nport = 22\n",
            &[],
        )
        .unwrap();
        assert_eq!(c.hosts["a"].file_timeout(), Duration::from_secs(5));
        assert_eq!(c.hosts["b"].file_timeout(), DEFAULT_FILE_TIMEOUT);
        let err = build("[hosts.a]\nfile_timeout_secs = 0\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("hosts.a.file_timeout_secs"), "{err}");
    }

    #[test]
    fn prices_turn_tokens_into_dollars() {
        let c = build(
            "[pricing.\"m\"]\ninput = 3.0\noutput = 15.0\ncache_read = 0.3\n",
            &[],
        )
        .unwrap();
        let usage = agentd_proto::Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
            ..Default::default()
        };
        // 3 + 1.5 + 0.3 + 3 (cache writes default to the input price)
        assert!((c.pricing["m"].cost(&usage) - 7.8).abs() < 1e-9);
        let err = build("[pricing.m]\ninput = 1\noutpt = 2\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("outpt"), "{err}");
    }

    #[test]
    fn named_endpoints_need_a_base_url_and_a_model() {
        let c = build("[providers.ollama]\nkind = \"openai_chat\"\nbase_url = \"http://127.0.0.1:11434/v1\"\ndefault_model = \"qwen3\"\n", &[]).unwrap();
        let p = &c.providers["ollama"];
        assert!(p.is_usable(), "local servers need no key");
        assert_eq!(
            (p.kind, p.default_model.as_str()),
            (ProviderKind::OpenaiChat, "qwen3")
        );
        let err = build(
            "[providers.x]\nkind = \"openai_chat\"\ndefault_model = \"m\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("providers.x.base_url is missing"), "{err}");
        let c = build(
            "",
            &[
                ("OPENAI_API_KEY", "k"),
                ("GEMINI_BASE_URL", "http://127.0.0.1:1"),
            ],
        )
        .unwrap();
        assert_eq!(c.providers["openai"].base_url, "https://api.openai.com/v1");
        assert!(c.providers["openai"].is_usable() && c.providers["gemini"].is_usable());
    }

    #[test]
    fn call_limits_have_defaults_and_are_read_per_provider() {
        let c = build(
            "[providers.anthropic]\nidle_timeout_secs = 5\nrequest_timeout_secs = 60\n\
             max_line_bytes = 1024\nmax_response_bytes = 4096\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            c.providers["anthropic"].limits,
            crate::llm::Limits {
                idle_timeout: Duration::from_secs(5),
                request_timeout: Duration::from_secs(60),
                max_line_bytes: 1024,
                max_response_bytes: 4096,
            }
        );
        assert_eq!(c.providers["gemini"].limits, crate::llm::Limits::default());
        for key in [
            "idle_timeout_secs",
            "request_timeout_secs",
            "max_line_bytes",
            "max_response_bytes",
        ] {
            let err = build(&format!("[providers.openai]\n{key} = 0\n"), &[])
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!("invalid config: providers.openai.{key} must be at least 1")
            );
        }
        let err = build("[providers.openai]\nidle_timeout_secs = -1\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("idle_timeout_secs"), "{err}");
    }

    #[test]
    fn tools_env_lists_are_read_and_checked() {
        let c = build(
            "[providers.mine]\nkind = \"openai_chat\"\nbase_url = \"http://127.0.0.1:1\"\ndefault_model = \"m\"\napi_key_env = \"MY_LLM_KEY\"\n[tools]\nenv_deny = [\"CORP_*\"]\nenv_allow = [\"TOKENIZERS_PARALLELISM\"]\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            c.tools,
            ToolsConfig {
                env_deny: vec!["CORP_*".into()],
                env_allow: vec!["TOKENIZERS_PARALLELISM".into()],
            }
        );
        let mut keys: Vec<&str> = c.key_variables().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "ANTHROPIC_API_KEY",
                "GEMINI_API_KEY",
                "MY_LLM_KEY",
                "OPENAI_API_KEY"
            ]
        );
        let err = build("[tools]\nenv_allow = [\"A*\"]\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("tools.env_allow"), "{err}");
        let err = build("[tools]\nenv_denied = []\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("env_denied"), "{err}");
    }

    #[test]
    fn a_world_writable_file_is_named_with_its_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Config::load(Some(&path), true).unwrap().warnings, [""; 0]);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let warnings = Config::load(Some(&path), true).unwrap().warnings;
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains(&path.display().to_string())
                && warnings[0].contains("mode 0666")
                && warnings[0].contains(&format!("chmod 600 {}", path.display())),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_stored_key_wins_over_the_environment_and_logout_falls_back() {
        let c = build("", &[("ANTHROPIC_API_KEY", "env")]).unwrap();
        let creds = Credentials {
            api_keys: [
                ("anthropic".to_owned(), "file".to_owned()),
                ("gemini".to_owned(), "g".to_owned()),
            ]
            .into(),
        };
        let logged_in = c.with_credentials(creds);
        let key = |c: &Config, name: &str| {
            let p = &c.providers[name];
            (
                p.api_key.as_ref().map(|k| k.expose().to_owned()),
                p.key_source,
            )
        };
        assert_eq!(
            key(&logged_in, "anthropic"),
            (Some("file".into()), Some(KeySource::Credentials))
        );
        assert_eq!(
            key(&logged_in, "gemini"),
            (Some("g".into()), Some(KeySource::Credentials))
        );
        assert_eq!(key(&logged_in, "openai"), (None, None));
        let logged_out = logged_in.with_credentials(Credentials::default());
        assert_eq!(
            key(&logged_out, "anthropic"),
            (Some("env".into()), Some(KeySource::Environment))
        );
        assert_eq!(key(&logged_out, "gemini"), (None, None));
    }

    #[test]
    fn a_credentials_file_is_read_only_when_private_small_and_well_formed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.json");
        assert_eq!(read_credentials(&path).unwrap(), Credentials::default());
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write(r#"{"api_keys": {"anthropic": "sk-1"}}"#, 0o600);
        assert_eq!(
            read_credentials(&path).unwrap().api_keys["anthropic"],
            "sk-1"
        );
        write(r#"{"api_keys": {"anthropic": "sk-1"}}"#, 0o640);
        let err = read_credentials(&path).unwrap_err().to_string();
        assert!(
            err.contains("mode 0640") && err.contains("chmod 600"),
            "{err}"
        );
        write(r#"{"api_keys": {"anthropic": "sk secret"}}"#, 0o600);
        let err = read_credentials(&path).unwrap_err().to_string();
        assert!(
            err.contains("line 1, column 39: unusable key") && !err.contains("secret"),
            "{err}"
        );
        write(r#"{"api_keys": {"anthropic": 5}}"#, 0o600);
        let err = read_credentials(&path).unwrap_err().to_string();
        assert!(err.contains("log in again"), "{err}");
        write(
            &" ".repeat(credentials::MAX_CREDENTIALS_BYTES as usize + 1),
            0o600,
        );
        let err = read_credentials(&path).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }

    #[test]
    fn mcp_servers_are_read_checked_and_given_to_sessions() {
        let c = build(
            "[mcp_servers.docs]\ncommand = \"docs-server\"\nargs = [\"--stdio\"]\n\
             [mcp_servers.web]\nurl = \"https://example.com/mcp\"\ntool_timeout_secs = 5\n",
            &[],
        )
        .unwrap();
        let session = c.session_config("anthropic", Some("m")).unwrap();
        assert_eq!(session.mcp_servers.len(), 2);
        assert_eq!(session.mcp_servers["web"].tool_timeout_secs(), 5);
        assert_eq!(session.mcp_servers["docs"].startup_timeout_secs(), 10);
        let err = build("[mcp_servers.web]\nurl = \"file:///x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp_servers.web.url must start with"), "{err}");
        let err = build(
            "[mcp_servers.web]\nurl = \"http://a\"\ntoken = \"x\"\n",
            &[],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.contains("mcp_servers.web.token: unknown field `token`"),
            "{err}"
        );
    }

    #[test]
    fn session_defaults_apply() {
        let c = build("[session]\nmax_turns = 7\n", &[]).unwrap();
        assert_eq!(
            c.session_config("anthropic", Some("m")).unwrap().max_turns,
            7
        );
    }
}
