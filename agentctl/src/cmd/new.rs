//! `agentctl new`: create a session. Its options are shared with `submit --new`; the ones that
//! set the session's config map onto `session/create`'s `config` patch, with the same names
//! `agentctl config` takes.

use super::config::{in_our_words, parse_duration};
use super::{Context, print};
use crate::client::Connection;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    ApprovalMode, ApprovalPatch, ApprovalRule, ConfigPatch, ContainerEnvironment, CreateParams,
    Environment, ProfileId, ReasoningEffort, SandboxMode, SessionSnapshot, SetConfigParams,
    SshEnvironment, WorktreeRequest,
};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::path::PathBuf;

/// `--sandbox`: the values of [`SandboxMode`].
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum Sandbox {
    ReadOnly,
    WorkspaceWrite,
    Off,
}

impl From<Sandbox> for SandboxMode {
    fn from(s: Sandbox) -> Self {
        match s {
            Sandbox::ReadOnly => SandboxMode::ReadOnly,
            Sandbox::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            Sandbox::Off => SandboxMode::Off,
        }
    }
}

/// `--effort`: the values of [`ReasoningEffort`].
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum Effort {
    Low,
    Medium,
    High,
}

impl From<Effort> for ReasoningEffort {
    fn from(e: Effort) -> Self {
        match e {
            Effort::Low => ReasoningEffort::Low,
            Effort::Medium => ReasoningEffort::Medium,
            Effort::High => ReasoningEffort::High,
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// Working directory [default: the current directory]
    #[arg(long, conflicts_with = "ssh")]
    cwd: Option<PathBuf>,
    /// Run the session's tools on another machine over SSH: `[USER@]HOST:/remote/dir`, where
    /// HOST is a `[hosts.NAME]` entry of the daemon's config or a host the ssh configuration
    /// knows. Host keys must already be in known_hosts.
    #[arg(long, value_name = "[USER@]HOST:DIR", value_parser = parse_ssh)]
    ssh: Option<(Option<String>, String, String)>,
    /// Run the session's commands in a container of its own with the working directory
    /// mounted: an image the engine has, or a `[containers.NAME]` entry of the daemon's config
    /// (its engine and limits). The engine is the entry's, else DOCKER_HOST's, else the local
    /// socket.
    #[arg(long, value_name = "IMAGE|NAME", conflicts_with = "ssh")]
    container: Option<String>,
    /// Let the container's commands reach the network (with --container) [default: off]
    #[arg(long, requires = "container")]
    container_network: bool,
    /// The SSH port (with --ssh) [default: the host entry's or ssh configuration's]
    #[arg(long, value_name = "PORT", requires = "ssh")]
    ssh_port: Option<u16>,
    /// The private key file (with --ssh) [default: the host entry's, ssh agent's or
    /// configuration's]
    #[arg(long, value_name = "FILE", requires = "ssh")]
    ssh_identity: Option<PathBuf>,
    /// Provider name (see `agentctl models`).
    #[arg(long)]
    provider: Option<String>,
    /// Model [default: the provider's default model]
    #[arg(long)]
    model: Option<String>,
    /// Reasoning effort [default: the provider's default]
    #[arg(long, value_enum)]
    effort: Option<Effort>,
    /// Most model turns in the session; 0 is unlimited. Reaching it exits 3 with --follow.
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// Most tool rounds for one input; 0 is unlimited. Reaching it exits 4 with --follow.
    #[arg(long, value_name = "N")]
    max_rounds: Option<u32>,
    /// Time limit of a shell command that sets none, such as 30s or 5m (raises the session's
    /// max-timeout to match if it is lower).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<std::time::Duration>,
    /// Tool profile (default: the provider's own).
    #[arg(long, value_parser = PossibleValuesParser::new(ProfileId::NAMES).try_map(|p| p.parse::<ProfileId>()))]
    profile: Option<ProfileId>,
    /// Title shown in lists.
    #[arg(long)]
    title: Option<String>,
    /// Extra instructions appended to the system prompt.
    #[arg(long)]
    instructions: Option<String>,
    /// Refuse file writes and deletes; commands run in the read_only sandbox.
    #[arg(long)]
    read_only: bool,
    /// Run in a new git worktree of the directory's repository, on a new branch
    /// `agentd/NAME` from HEAD (NAME picked when not given); `agentctl rm` removes it only
    /// when nothing in it would be lost.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    worktree: Option<String>,
    /// `ask`: every command and file change waits for approval (answered at the terminal
    /// with --follow, or with `agentctl respond`); `auto` runs them.
    #[arg(long, value_enum, value_name = "MODE")]
    approval: Option<ApprovalArg>,
    /// A call that runs without asking, as `tool` or `tool(pattern)`: `--allow 'shell(git
    /// status*)'`. Repeatable.
    #[arg(long, value_name = "RULE")]
    allow: Vec<String>,
    /// A call that is refused without asking, in every mode: `--deny 'shell(rm *)'`.
    /// Repeatable; deny wins over allow.
    #[arg(long, value_name = "RULE")]
    deny: Vec<String>,
    /// What commands and file tools may write: read-only (only their temp dir),
    /// workspace-write (the working directory, the temp dir and --writable-roots) or off
    /// [default: the configured one, workspace-write unless changed]
    #[arg(long, value_enum, value_name = "MODE")]
    sandbox: Option<Sandbox>,
    /// More directories the workspace-write sandbox may write under (absolute; repeat or
    /// separate with commas).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    writable_roots: Vec<PathBuf>,
    /// Let sandboxed commands open TCP connections and listen.
    #[arg(long)]
    sandbox_network: bool,
}

/// `--approval`: the values of [`ApprovalMode`].
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum ApprovalArg {
    Auto,
    Ask,
}

impl From<ApprovalArg> for ApprovalMode {
    fn from(a: ApprovalArg) -> Self {
        match a {
            ApprovalArg::Auto => ApprovalMode::Auto,
            ApprovalArg::Ask => ApprovalMode::Ask,
        }
    }
}

impl NewArgs {
    /// The `session/create` params these options ask for.
    pub(crate) fn params(self) -> Result<CreateParams> {
        let absolute = |p: &PathBuf| {
            std::path::absolute(p)
                .map_err(|e| Failure::failed(format!("cannot resolve {}: {e}", p.display())))
        };
        let (cwd, environment) = match self.ssh {
            Some((user, host, dir)) => {
                let identity_file = match self.ssh_identity {
                    Some(file) => Some(
                        std::path::absolute(file)
                            .map_err(|e| {
                                Failure::failed(format!("cannot resolve --ssh-identity: {e}"))
                            })?
                            .display()
                            .to_string(),
                    ),
                    None => None,
                };
                (
                    String::new(),
                    Environment::Ssh(SshEnvironment {
                        host,
                        user,
                        port: self.ssh_port,
                        identity_file,
                        cwd: dir,
                    }),
                )
            }
            None => {
                let cwd = match &self.cwd {
                    Some(c) => std::path::absolute(c),
                    None => std::env::current_dir(),
                }
                .map_err(|e| {
                    Failure::failed(format!("cannot resolve the working directory: {e}"))
                })?;
                let environment = match self.container {
                    Some(image) => Environment::Container(ContainerEnvironment {
                        image,
                        engine: None,
                        network: self.container_network.then_some(true),
                        memory_mb: None,
                        pids_limit: None,
                        millicpus: None,
                    }),
                    None => Environment::Local,
                };
                (cwd.display().to_string(), environment)
            }
        };
        let rules =
            |r: Vec<String>| (!r.is_empty()).then(|| r.into_iter().map(ApprovalRule).collect());
        let approval = ApprovalPatch {
            mode: self.approval.map(Into::into),
            allow: rules(self.allow),
            deny: rules(self.deny),
            ..ApprovalPatch::default()
        };
        let patch = ConfigPatch {
            approval: (approval != ApprovalPatch::default()).then_some(approval),
            reasoning_effort: self.effort.map(|e| Some(e.into())),
            max_turns: self.max_turns,
            max_tool_rounds_per_input: self.max_rounds,
            default_command_timeout_ms: self
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            sandbox: self.sandbox.map(Into::into),
            sandbox_writable_roots: (!self.writable_roots.is_empty())
                .then(|| self.writable_roots.iter().map(absolute).collect())
                .transpose()?,
            sandbox_network: self.sandbox_network.then_some(true),
            ..ConfigPatch::default()
        };
        Ok(CreateParams {
            cwd,
            environment,
            provider: self.provider,
            model: self.model,
            profile: self.profile,
            config: (patch != ConfigPatch::default()).then_some(patch),
            title: self.title,
            instructions: self.instructions,
            read_only: self.read_only,
            worktree: self.worktree.map(|name| match name.as_str() {
                "" => WorktreeRequest::Flag(true),
                _ => WorktreeRequest::Name(name),
            }),
        })
    }
}

/// Parses `--ssh [USER@]HOST:DIR` into (user, host, dir).
fn parse_ssh(value: &str) -> std::result::Result<(Option<String>, String, String), String> {
    let (destination, dir) = value
        .split_once(':')
        .ok_or_else(|| format!("{value:?} is not [USER@]HOST:DIR (no ':' before the directory)"))?;
    if !dir.starts_with('/') {
        return Err(format!(
            "the remote directory must be absolute, got {dir:?} (as in buildbox:/src/app)"
        ));
    }
    let (user, host) = match destination.rsplit_once('@') {
        Some((user, host)) => (Some(user.to_owned()), host),
        None => (None, destination),
    };
    if host.is_empty() || user.as_deref() == Some("") {
        return Err(format!("{value:?} has an empty user or host"));
    }
    Ok((user, host.to_owned(), dir.to_owned()))
}

/// Creates the session. A `--timeout` above the session's max-timeout raises that too, since
/// the daemon caps every command at max-timeout and the flag would otherwise do nothing.
pub(crate) async fn create(conn: &Connection, params: CreateParams) -> Result<SessionSnapshot> {
    let snapshot = match conn.call::<m::SessionCreate>(params).await {
        Ok(s) => s,
        Err(e) => {
            let mut f = Failure::from(e);
            f.message = in_our_words(&f.message, true);
            if f.message.starts_with("cwd ") {
                f.message = format!("--{}", f.message);
            }
            return Err(f);
        }
    };
    let c = &snapshot.config;
    if c.default_command_timeout_ms <= c.max_command_timeout_ms {
        return Ok(snapshot);
    }
    let raise = ConfigPatch {
        max_command_timeout_ms: Some(c.default_command_timeout_ms),
        ..ConfigPatch::default()
    };
    Ok(conn
        .call::<m::SessionSetConfig>(SetConfigParams {
            session_id: snapshot.session_id.clone(),
            config: raise,
        })
        .await?)
}

pub(crate) async fn run(args: NewArgs, ctx: &Context) -> Result<u8> {
    let snapshot = create(&ctx.conn, args.params()?).await?;
    print(ctx.json, &snapshot, |s| println!("{}", s.session_id));
    Ok(0)
}
