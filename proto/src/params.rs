//! Parameters and results of every method. Params are always a JSON object (named params);
//! an absent `params` is accepted where every field is optional.
//!
//! **`null` means absent, for every optional field** (Emacs sends `nil` and Python `None` as
//! `null`): optional fields are `Option`s, and the few with a non-`None` default read `null`
//! as that default through [`null_default`] / [`null_one`]. The one exception is
//! `ConfigPatch::reasoning_effort`, where `null` explicitly selects the provider's default.

use crate::config::ConfigPatch;
use crate::names::names;
use crate::{
    EntryId, HistoryEntry, ImageData, ImageInfo, InputId, ProfileId, SessionConfig, SessionId,
    Usage,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

names! {
    /// A session's lifecycle state (spec 2.3).
    pub enum SessionState ("session state") {
        /// Waiting for input.
        Idle = "idle",
        /// Running the agentic loop.
        Processing = "processing",
        /// Running, and waiting for a client to answer a pending request (an approval, a
        /// question, a client tool call); `session/get` lists them.
        AwaitingInput = "awaiting_input",
        /// Terminated; takes no more input.
        Closed = "closed",
    }
}

impl SessionState {
    /// Whether the session is working on an input (`processing` or `awaiting_input`).
    pub fn is_working(self) -> bool {
        matches!(self, Self::Processing | Self::AwaitingInput)
    }
}

/// What `session/submit` does when the session is already processing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WhenBusy {
    /// Queue the text as a follow-up, run after the current input completes.
    #[default]
    Queue,
    /// Queue the text as steering, injected after the current tool round.
    Steer,
    /// Fail with `session_busy`.
    Reject,
}

/// What happened to a submitted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// Processing started with this input.
    Started,
    /// Queued as a follow-up.
    FollowUp,
    /// Queued as steering.
    Steering,
}

/// An input waiting in a queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueuedInput {
    /// Its id.
    pub input_id: InputId,
    /// Its text.
    pub text: String,
    /// Its images: their type and size (their data goes to the model with the text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageInfo>,
}

/// The steering and follow-up queues of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueContents {
    /// Injected after the current tool round, in order.
    pub steering: Vec<QueuedInput>,
    /// Processed after the current input completes, in order.
    pub follow_up: Vec<QueuedInput>,
}

/// A configured provider, as listed by `daemon/info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProviderInfo {
    /// The name used in `session/create`.
    pub name: String,
    /// The API family.
    pub kind: crate::ProviderKind,
    /// Base URL requests go to.
    pub base_url: String,
    /// Whether a key is configured (the key itself is never sent).
    pub has_key: bool,
    /// Where the key comes from, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_source: Option<KeySource>,
    /// The environment variable the daemon reads this provider's key from.
    #[serde(default)]
    pub key_env: String,
    /// Whether sessions can use it now: it has a key, or its base URL is not the vendor's
    /// (a gateway or a local server, which may need none).
    #[serde(default)]
    pub ready: bool,
    /// When it is not ready: why, and what to do about it, for the way this daemon was
    /// started (the same words as the `provider_not_configured` error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready: Option<String>,
    /// The model used when a session names none.
    pub default_model: String,
    /// Models listed in the configuration (informational; any model name may be used).
    pub models: Vec<String>,
}

/// Where a provider's key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// The credentials file `agentctl login` writes (it wins over the environment).
    Credentials,
    /// The daemon's environment (`key_env`), as it was when the daemon started.
    Environment,
}

impl ProviderInfo {
    /// Its readiness in words, as `agentd --check-config`, `agentctl doctor` and
    /// `agentctl models` print it.
    pub fn status(&self) -> String {
        match (self.ready, self.key_source) {
            (true, Some(KeySource::Credentials)) => "ready (key from agentctl login)".into(),
            (true, Some(KeySource::Environment)) => format!("ready (key from {})", self.key_env),
            (true, None) => "ready (no key needed)".into(),
            (false, _) => "no key".into(),
        }
    }
}

/// Everything about a session except its history and events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSnapshot {
    /// Its id.
    pub session_id: SessionId,
    /// Title given at creation.
    pub title: Option<String>,
    /// Working directory.
    pub cwd: String,
    /// Tool profile.
    pub profile: ProfileId,
    /// Lifecycle state.
    pub state: SessionState,
    /// Current configuration.
    pub config: SessionConfig,
    /// Queued steering and follow-ups.
    pub queue: QueueContents,
    /// Tokens used so far.
    pub usage: Usage,
    /// Turns in the history.
    pub turns: usize,
    /// Seq of the newest event (0 if none).
    pub last_seq: u64,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Time of the newest event (RFC 3339).
    pub updated: String,
    /// The newest entry of the current branch (`None` while the history is empty).
    pub leaf: Option<EntryId>,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// The session that spawned this one as a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<SessionId>,
    /// Requests waiting for a client's answer (`session/respond`), oldest first.
    #[serde(default)]
    pub pending: Vec<crate::PendingRequest>,
    /// Its own git worktree, when it was created with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<Worktree>,
    /// Where its tools run (absent: locally).
    #[serde(default, skip_serializing_if = "Environment::is_local")]
    pub environment: Environment,
    /// The Agent Skills it found, and whether each is active (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<crate::SkillInfo>,
}

/// Where a forked session came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ForkOrigin {
    /// The session forked.
    pub session_id: SessionId,
    /// The last entry copied (`None` when the history was empty).
    pub entry_id: Option<EntryId>,
}

/// One line of `session/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSummary {
    /// Its id.
    pub session_id: SessionId,
    /// Title given at creation.
    pub title: Option<String>,
    /// Working directory.
    pub cwd: String,
    /// Lifecycle state.
    pub state: SessionState,
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Time of the newest event (RFC 3339).
    pub updated: String,
    /// Tokens used so far.
    pub usage: Usage,
    /// The session that spawned this one as a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<SessionId>,
}

/// `daemon/info` takes no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Result of `daemon/info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DaemonInfo {
    /// agentd's version.
    pub version: String,
    /// Protocol version ([`crate::PROTOCOL_VERSION`]).
    pub protocol: u32,
    /// The daemon's process id.
    pub pid: u32,
    /// Milliseconds since the daemon started.
    pub uptime_ms: u64,
    /// The socket it serves.
    pub socket: String,
    /// Sessions it holds.
    pub sessions: usize,
    /// Sessions processing now.
    pub sessions_processing: usize,
    /// Sessions loaded in memory; the others cost only their record until next used (idle
    /// ones are unloaded after `[daemon] evict_idle_secs`).
    #[serde(default)]
    pub sessions_loaded: usize,
    /// Client connections open now (this one included).
    pub connections: usize,
    /// Configured providers.
    pub providers: Vec<ProviderInfo>,
    /// The config file in use, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<String>,
    /// Where sessions are stored (`None`: in memory only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
    /// How the daemon was started, which decides how it is restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<StartedBy>,
}

/// How the daemon was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartedBy {
    /// A systemd unit (socket activation or the service): `systemctl --user` owns its life.
    Systemd,
    /// `agentctl`, because nothing answered on the socket (or `agentctl daemon restart`).
    Agentctl,
    /// Anything else: by hand from a shell, a script, another supervisor.
    Hand,
}

/// Result of `daemon/reload`: the config now used for new sessions. A file that does not
/// load is an `invalid_config` error instead, and the daemon keeps the config it had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReloadResponse {
    /// The config file read, if any (none: built-in defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<String>,
    /// The providers new sessions can choose from.
    pub providers: Vec<ProviderInfo>,
    /// Problems worth fixing that did not stop the reload (a world-writable file).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Keys whose new values apply only when the daemon starts again; empty when none
    /// changed.
    #[serde(default)]
    pub restart_needed: Vec<RestartKey>,
}

names! {
    /// A config key the daemon reads only when it starts.
    pub enum RestartKey ("config key") {
        /// The `[server]` table.
        Server = "server",
        /// `log_level`.
        LogLevel = "log_level",
        /// `[daemon] evict_idle_secs`.
        EvictIdleSecs = "daemon.evict_idle_secs",
    }
}

/// Result of `daemon/shutdown`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShutdownResponse {
    /// Sessions whose work was aborted.
    pub aborted: usize,
}

/// Parameters of `session/create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// Working directory (absolute) the session's tools run in. Required for a local
    /// environment; an ssh environment names its remote directory in `environment.cwd`, and
    /// this, when given, must be the same path.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(with = "Option<String>")]
    pub cwd: String,
    /// Where the session's tools run: this machine (the default) or a host over SSH.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Environment::is_local"
    )]
    #[schemars(with = "Option<Environment>")]
    pub environment: Environment,
    /// Provider name; the configured default if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model; the provider's default if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tool profile; the provider's own if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileId>,
    /// Overrides of the configured session defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigPatch>,
    /// A title for lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Instructions appended last to the system prompt (spec 6.1, layer 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Refuse every file write and delete (commands still run).
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    #[schemars(with = "Option<bool>")]
    pub read_only: bool,
    /// Run the session in a new git worktree of `cwd`'s repository, on a new branch
    /// `agentd/NAME` from its HEAD, under agentd's state directory: `true` (agentd picks
    /// NAME) or NAME. Local sessions only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRequest>,
}

/// `session/create`'s `worktree`: `true` for a name agentd picks, or the name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum WorktreeRequest {
    /// `true`: a worktree with a name agentd picks (`false`: none).
    Flag(bool),
    /// A worktree whose branch is `agentd/NAME`.
    Name(String),
}

/// A session's own git worktree (`session/create {worktree}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Worktree {
    /// Its directory (the session's `cwd`).
    pub path: String,
    /// Its branch.
    pub branch: String,
    /// The working tree of the repository it belongs to.
    pub repository: String,
    /// The commit it started from.
    pub base: String,
}

/// Where a session's tools read, write and run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Environment {
    /// The daemon's own machine.
    #[default]
    Local,
    /// A machine reached with the system's OpenSSH client over one multiplexed connection.
    Ssh(SshEnvironment),
    /// A container of the session's own on a Docker or Podman engine, with the workspace
    /// (`cwd`) bind-mounted at the same path.
    Container(ContainerEnvironment),
}

impl Environment {
    /// Whether this is the daemon's own machine.
    pub fn is_local(&self) -> bool {
        matches!(self, Self::Local)
    }
}

/// An SSH environment: which host, as whom, and the remote working directory. Host keys are
/// verified against the known-hosts files, never accepted blindly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshEnvironment {
    /// A host named in the daemon's config (`[hosts.NAME]`), else a host name, address or
    /// alias of the ssh configuration.
    pub host: String,
    /// The remote user; the host entry's or ssh configuration's if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The port; the host entry's or ssh configuration's (22) if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// A private key file on the daemon's machine; the host entry's or ssh configuration's
    /// (and the ssh agent's keys) if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<String>,
    /// The working directory on the remote machine (absolute).
    pub cwd: String,
}

/// A container environment: which image, on which engine, with which limits. The container
/// is made when the session is created and removed when it ends; the session's `cwd` (on the
/// daemon's machine) is bind-mounted at the same path. Unset limits come from the
/// `[containers.NAME]` entry, else the defaults (network off, 4096 MiB, 1024 processes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerEnvironment {
    /// A container named in the daemon's config (`[containers.NAME]`), else an image the
    /// engine has (agentd never pulls one).
    pub image: String,
    /// The engine's address (`unix:///run/docker.sock`, `tcp://HOST:2375`,
    /// `ssh://[USER@]HOST[:PORT]` with HOST a `[hosts.NAME]` entry or a host ssh knows, or a
    /// socket's path); the entry's, else `DOCKER_HOST`, else `unix:///var/run/docker.sock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Whether commands may reach the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Memory cap in MiB, swap included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Most processes at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<u64>,
    /// CPU share in thousandths of a CPU (1500: one and a half).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub millicpus: Option<u64>,
}

/// Parameters of every method that names only a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    /// The session.
    pub session_id: SessionId,
}

/// Parameters of `session/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only sessions in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SessionState>,
    /// Only sessions with this working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Result of `session/list`, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListResponse {
    /// The sessions.
    pub sessions: Vec<SessionSummary>,
    /// Stored sessions whose record cannot be read, so they cannot be loaded. Listed only
    /// when no filter is given (their state and directory are unknown). Every method but
    /// `session/delete` answers `session_damaged` for them; `session/delete` removes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<DamagedSession>,
}

/// What is wrong with a stored session's record (`session.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DamageKind {
    /// The file cannot be read (permissions, an I/O error).
    Unreadable,
    /// The file is not a session record: corrupt or truncated JSON, a missing field or a
    /// field of the wrong type.
    Invalid,
    /// The record was written by a newer agentd, in a format this one does not read.
    NewerFormat,
    /// The record names another session than its directory does.
    WrongId,
}

/// A stored session that cannot be loaded, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DamagedSession {
    /// Its id (its directory's name).
    pub session_id: SessionId,
    /// What is wrong.
    pub damage: DamageKind,
    /// The details: what the OS or the JSON parser said, or the format or id found.
    pub reason: String,
    /// The file at fault.
    pub path: String,
}

/// Parameters of `session/submit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitParams {
    /// The session.
    pub session_id: SessionId,
    /// The input.
    pub text: String,
    /// Images sent with the text (at most 10: png, jpeg, gif or webp; each at most 5 MiB
    /// and all together at most 7 MiB, decoded). The session's provider must take images.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(with = "Option<Vec<ImageData>>")]
    pub images: Vec<ImageData>,
    /// A client-chosen key: a second submit with the same key returns the first result and
    /// queues nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_input_id: Option<String>,
    /// What to do if the session is processing (default `queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_busy: Option<WhenBusy>,
}

/// Result of `session/submit`, `session/steer` and `session/follow_up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubmitResponse {
    /// The input's id.
    pub input_id: InputId,
    /// What happened to it.
    pub disposition: Disposition,
    /// Whether it waits in a queue (`disposition` is not `started`).
    pub queued: bool,
}

/// Parameters of `session/steer` and `session/follow_up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextParams {
    /// The session.
    pub session_id: SessionId,
    /// The message.
    pub text: String,
    /// Images sent with the text (at most 10: png, jpeg, gif or webp; each at most 5 MiB
    /// and all together at most 7 MiB, decoded). The session's provider must take images.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(with = "Option<Vec<ImageData>>")]
    pub images: Vec<ImageData>,
}

/// Parameters of `session/abort`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AbortParams {
    /// The session.
    pub session_id: SessionId,
    /// Also close the session.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(with = "Option<bool>")]
    pub close: bool,
}

/// Result of `session/abort`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AbortResponse {
    /// Whether work was running and has been stopped.
    pub aborted: bool,
    /// The state after the abort (`idle`, or `closed`).
    pub state: SessionState,
    /// Items still queued. They are not run by themselves; the next submit runs them, or
    /// `session/queue_clear` removes them.
    pub queue: QueueContents,
}

/// Result of `session/close`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CloseResponse {
    /// Always `closed`.
    pub state: SessionState,
}

/// Parameters of `session/set_config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetConfigParams {
    /// The session.
    pub session_id: SessionId,
    /// Fields to change; they apply from the next LLM call.
    pub config: ConfigPatch,
}

/// Parameters of `session/history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryParams {
    /// The session.
    pub session_id: SessionId,
    /// Index of the first entry to return.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(with = "Option<usize>")]
    pub offset: usize,
    /// Most entries to return (default 100). A page also ends early, after at least one
    /// entry, before it would pass 32 MiB (images are large): read on from `offset` plus the
    /// entries returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only the entry of this input (a user or steering entry, anywhere in the session's
    /// tree, rolled-back branches included), for the images a `user_input` or
    /// `steering_injected` event lists; `offset` and `limit` then do not apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_id: Option<InputId>,
}

/// Result of `session/history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryResponse {
    /// The entries, oldest first.
    pub entries: Vec<HistoryEntry>,
    /// How many entries the history has in all (with `input_id`: how many were found).
    pub total: usize,
}

/// Parameters of `session/subscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscribeParams {
    /// The session.
    pub session_id: SessionId,
    /// Replay events with a greater seq first. Absent: live events only; 0: everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seq: Option<u64>,
}

/// Parameters of `session/fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkParams {
    /// The session to fork.
    pub session_id: SessionId,
    /// The last entry to copy, on the session's current branch; absent: its newest entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<EntryId>,
    /// Title of the new session; absent: the original's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Parameters of `session/rollback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackParams {
    /// The session (idle).
    pub session_id: SessionId,
    /// How many user inputs to undo, each with everything that followed it (default 1).
    #[serde(default = "one", deserialize_with = "null_one")]
    #[schemars(with = "Option<usize>")]
    pub turns: usize,
    /// Also put back the files the agent changed in those inputs, from the session's
    /// checkpoints. Files the user changed since are never overwritten: the whole rollback
    /// is refused, naming them, unless `force`.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    #[schemars(with = "Option<bool>")]
    pub files: bool,
    /// With `files`: restore files the user changed since the agent did too; their current
    /// versions are kept in the checkpoint store, and `session/redo` brings them back.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    #[schemars(with = "Option<bool>")]
    pub force: bool,
}

fn one() -> usize {
    1
}

/// Reads `null` as the type's default, like an absent field.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// Reads `null` as 1, like an absent field defaulting to [`one`].
fn null_one<'de, D>(d: D) -> Result<usize, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Option::<usize>::deserialize(d).map(|v| v.unwrap_or_else(one))
}

/// Result of `session/rollback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RollbackResponse {
    /// The new leaf (`None`: the branch is now empty).
    pub leaf: Option<EntryId>,
    /// Entries left on the current branch.
    pub entries: usize,
    /// Entries taken off the branch. They stay in the tree, so a fork can reach them.
    pub removed: usize,
    /// With `files`: what happened to the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesRestored>,
}

/// What an undo or a redo did to the workspace's files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FilesRestored {
    /// Paths (relative to the session's directory) put back.
    pub restored: Vec<String>,
    /// Paths that could not be, each with why (not recorded: over `max_file_bytes`; a
    /// directory in the way; the checkpoint was removed under the disk cap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_restored: Vec<String>,
    /// Paths the user had changed since, restored under `force`: their versions are in the
    /// checkpoint store, and a redo brings them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}

/// Parameters of `session/redo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedoParams {
    /// The session (idle).
    pub session_id: SessionId,
    /// Overwrite files changed since the undo too (their versions stay in the checkpoint
    /// store).
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    #[schemars(with = "Option<bool>")]
    pub force: bool,
}

/// Result of `session/redo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RedoResponse {
    /// The leaf again.
    pub leaf: Option<EntryId>,
    /// Entries on the current branch.
    pub entries: usize,
    /// What happened to the files (when the undo put files back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesRestored>,
}

/// Parameters of `session/diff`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    /// The session.
    pub session_id: SessionId,
    /// The input (`user_input`'s `input_id`); absent: the newest input on the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_id: Option<InputId>,
}

/// Result of `session/diff`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiffResponse {
    /// The input diffed.
    pub input_id: InputId,
    /// What the agent changed while working on it, as a unified diff in git's style (from
    /// before its first change to after its last); empty when it changed no file.
    pub diff: String,
}

/// Result of `session/compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompactResponse {
    /// Estimated context tokens before.
    pub tokens_before: u64,
    /// Estimated context tokens after.
    pub tokens_after: u64,
    /// History entries the summary replaces.
    pub entries_summarized: usize,
    /// Recent entries kept as they are.
    pub entries_kept: usize,
}

/// Result of `session/delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteResponse {
    /// The deleted session.
    pub session_id: SessionId,
    /// Why its worktree (and branch) were kept: it holds uncommitted or untracked files, or
    /// the branch has commits of its own. Absent when it had none or it was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_kept: Option<String>,
}

/// Parameters of `session/unsubscribe` and `daemon/unsubscribe`. The positional form
/// `[subscription]` (what jsonrpsee clients send) is accepted too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnsubscribeParams {
    /// The subscription id the subscribe call returned.
    pub subscription: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::methods::{self, Method, MethodVisitor, Subscription};
    use serde_json::{Map, Value, json};

    /// A params object for `T` from its schema: required fields get a value of their type,
    /// every optional field (at any depth) gets `null`.
    fn nulls_for<T: schemars::JsonSchema>() -> Value {
        let schema = schemars::schema_for!(T).to_value();
        fill(&schema, &schema)
    }

    fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
        match schema["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            Some(name) => resolve(&root["$defs"][name], root),
            None => schema,
        }
    }

    fn fill(schema: &Value, root: &Value) -> Value {
        let schema = resolve(schema, root);
        if let Some(properties) = schema["properties"].as_object() {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let object: Map<String, Value> = properties
                .iter()
                .map(|(name, field)| {
                    let value = if required.contains(&name.as_str()) {
                        fill(field, root)
                    } else {
                        Value::Null
                    };
                    (name.clone(), value)
                })
                .collect();
            return Value::Object(object);
        }
        match schema["type"].as_str() {
            Some("string") => json!("x"),
            Some("integer") => json!(1),
            Some("boolean") => json!(false),
            Some("object") => json!({}),
            _ => Value::Null,
        }
    }

    struct NullsAccepted(Vec<String>);

    impl MethodVisitor for NullsAccepted {
        fn method<M: Method>(&mut self) {
            let params = nulls_for::<M::Params>();
            if let Err(e) = serde_json::from_value::<M::Params>(params.clone()) {
                self.0.push(format!("{}: {params} -> {e}", M::NAME));
            }
        }
        fn subscription<S: Subscription>(&mut self) {
            let params = nulls_for::<S::Params>();
            if let Err(e) = serde_json::from_value::<S::Params>(params.clone()) {
                self.0.push(format!("{}: {params} -> {e}", S::NAME));
            }
        }
    }

    #[test]
    fn null_is_accepted_for_every_optional_field_of_every_method() {
        let mut check = NullsAccepted(Vec::new());
        methods::for_each_method(&mut check);
        methods::for_each_subscription(&mut check);
        let params = nulls_for::<super::UnsubscribeParams>();
        assert_eq!(params, json!({"subscription": "x"}));
        assert_eq!(check.0, Vec::<String>::new());
    }

    #[test]
    fn null_means_the_default() {
        let p: super::RollbackParams =
            serde_json::from_value(json!({"session_id": "s", "turns": null})).unwrap();
        assert_eq!(p.turns, 1);
        let p: super::HistoryParams =
            serde_json::from_value(json!({"session_id": "s", "offset": null, "limit": null}))
                .unwrap();
        assert_eq!((p.offset, p.limit), (0, None));
        let p: super::AbortParams =
            serde_json::from_value(json!({"session_id": "s", "close": null})).unwrap();
        assert!(!p.close);
    }
}
