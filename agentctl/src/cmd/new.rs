//! `agentctl new`: create a session. Its options are shared with `submit --new`; the ones that
//! set the session's config map onto `session/create`'s `config` patch, with the same names
//! `agentctl config` takes.

use super::config::{in_our_words, parse_duration};
use super::{Context, daemon_hint, print};
use crate::client::Connection;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    ApprovalMode, ApprovalPatch, ApprovalRule, ConfigPatch, CreateParams, ReasoningEffort,
    SandboxMode, SessionSnapshot, SetConfigParams,
};
use std::path::PathBuf;

/// `--sandbox`: the values of [`SandboxMode`].
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum SandboxArg {
    ReadOnly,
    WorkspaceWrite,
    Off,
}

impl From<SandboxArg> for SandboxMode {
    fn from(s: SandboxArg) -> Self {
        match s {
            SandboxArg::ReadOnly => SandboxMode::ReadOnly,
            SandboxArg::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            SandboxArg::Off => SandboxMode::Off,
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
    #[arg(long)]
    cwd: Option<PathBuf>,
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
    /// Tool profile.
    #[arg(long)]
    profile: Option<String>,
    /// Title shown in lists.
    #[arg(long)]
    title: Option<String>,
    /// Extra instructions appended to the system prompt.
    #[arg(long)]
    instructions: Option<String>,
    /// Refuse file writes and deletes; commands run in the read_only sandbox.
    #[arg(long)]
    read_only: bool,
    /// What commands and file tools may write: read-only (only their temp dir),
    /// workspace-write (the working directory, the temp dir and --writable-roots) or off
    /// [default: the configured one, workspace-write unless changed]
    #[arg(long, value_enum, value_name = "MODE")]
    sandbox: Option<SandboxArg>,
    /// More directories the workspace-write sandbox may write under (absolute; repeat or
    /// separate with commas).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    writable_roots: Vec<PathBuf>,
    /// Let sandboxed commands open TCP connections and listen.
    #[arg(long)]
    sandbox_network: bool,
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
        let cwd = match &self.cwd {
            Some(c) => std::path::absolute(c),
            None => std::env::current_dir(),
        }
        .map_err(|e| Failure::failed(format!("cannot resolve the working directory: {e}")))?;
        let absolute = |p: &PathBuf| {
            std::path::absolute(p)
                .map_err(|e| Failure::failed(format!("cannot resolve {}: {e}", p.display())))
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
            cwd: cwd.display().to_string(),
            provider: self.provider,
            model: self.model,
            profile: self.profile,
            config: (patch != ConfigPatch::default()).then_some(patch),
            title: self.title,
            instructions: self.instructions,
            read_only: self.read_only,
        })
    }
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
            return Err(daemon_hint(conn, f).await);
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
