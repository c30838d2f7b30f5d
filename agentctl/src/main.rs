//! `agentctl`: the command-line client of agentd.
//!
//! When no daemon answers on the socket, `agentctl` starts `agentd` in the background (set
//! `AGENTD_NO_AUTOSTART=1` to never do so).
//!
//! Exit codes: 0 success; 1 the daemon answered with an error (or the work ended in one);
//! 2 bad usage; 3 the answer was cut off at the output-token limit (`processing_end
//! {reason: "max_tokens"}`); 69 the daemon cannot be reached; 77 the daemon refused this user;
//! 130 interrupted (Ctrl-C aborted the work).

mod client;
mod daemon;
mod render;

use agentd_proto::methods as m;
use agentd_proto::{
    AbortParams, CreateParams, Empty, EntryId, EventBody, ForkParams, HistoryParams, ListParams,
    ProcessingEndReason, RollbackParams, SessionId, SessionParams, SessionState, StreamItem,
    SubmitParams, SubscribeParams, TextParams, WhenBusy,
};
use clap::{Parser, Subcommand, ValueEnum};
use client::Connection;
use jsonrpsee::core::ClientError;
use serde::Serialize;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

/// Control agentd sessions from the shell.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]
    #[arg(long, global = true, env = "AGENTD_SOCKET")]
    socket: Option<PathBuf>,
    /// Print machine-readable NDJSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct NewArgs {
    /// Working directory [default: the current directory]
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Provider name (see `agentctl status`).
    #[arg(long)]
    provider: Option<String>,
    /// Model.
    #[arg(long)]
    model: Option<String>,
    /// Tool profile.
    #[arg(long)]
    profile: Option<String>,
    /// Title shown in lists.
    #[arg(long)]
    title: Option<String>,
    /// Extra instructions appended to the system prompt.
    #[arg(long)]
    instructions: Option<String>,
    /// Refuse file writes and deletes (commands still run).
    #[arg(long)]
    read_only: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum BusyArg {
    Queue,
    Steer,
    Reject,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Online(Online),
    #[command(flatten)]
    Offline(Offline),
}

/// Commands that work without a daemon.
#[derive(Subcommand)]
enum Offline {
    /// Check the setup: socket, daemon, config, providers (never prints keys).
    Doctor,
    /// Print a shell completion script: `agentctl completions bash > ~/.local/share/bash-completion/completions/agentctl`.
    Completions { shell: clap_complete::Shell },
    /// Print the man page, or write every page into a directory.
    Man {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// Commands that talk to the daemon (starting it if needed).
#[derive(Subcommand)]
enum Online {
    /// Daemon version, uptime, sessions and providers.
    Status,
    /// Configured providers and their models.
    Models,
    /// Create a session and print its id.
    New(NewArgs),
    /// List sessions.
    Ls {
        /// Only sessions in this state (idle, processing, closed).
        #[arg(long)]
        state: Option<String>,
        /// Show subagents indented under the session that spawned them.
        #[arg(long)]
        tree: bool,
    },
    /// Show one session.
    Show { session: String },
    /// Submit a prompt: `submit SESSION [PROMPT]` or `submit --new [PROMPT]`; without PROMPT it
    /// is read from stdin.
    Submit {
        /// Create a new session for this prompt.
        #[arg(long)]
        new: bool,
        /// Stream the work until it ends; Ctrl-C aborts it.
        #[arg(long, short)]
        follow: bool,
        /// What to do if the session is busy.
        #[arg(long, value_enum, default_value = "queue")]
        when_busy: BusyArg,
        /// Idempotency key: a repeated submit with the same key does nothing.
        #[arg(long)]
        client_input_id: Option<String>,
        #[command(flatten)]
        new_args: NewArgs,
        /// SESSION (unless --new), then the prompt.
        args: Vec<String>,
    },
    /// Inject a message after the current tool round.
    Steer { session: String, text: Vec<String> },
    /// Queue a message to run after the current input completes.
    FollowUp { session: String, text: Vec<String> },
    /// Show (or with --clear remove) queued steering and follow-ups.
    Queue {
        session: String,
        #[arg(long)]
        clear: bool,
    },
    /// Stop the session's current work (it stays open unless --close).
    Abort {
        session: String,
        #[arg(long)]
        close: bool,
    },
    /// Close a session.
    Close { session: String },
    /// Print a session's events.
    Events {
        session: String,
        /// Only events with a greater seq [default: 0, all]
        #[arg(long, default_value_t = 0)]
        since: u64,
        /// Keep streaming new events.
        #[arg(long, short)]
        follow: bool,
    },
    /// Print the conversation.
    History {
        session: String,
        #[arg(long, default_value_t = 0)]
        offset: usize,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Copy a session's conversation, up to an entry, into a new session.
    Fork {
        session: String,
        /// The last history entry to copy [default: the newest]
        #[arg(long)]
        at: Option<String>,
        /// Title of the new session.
        #[arg(long)]
        title: Option<String>,
    },
    /// Undo the last user inputs and what followed them (nothing is deleted; `fork --at`
    /// reaches it).
    Rollback {
        session: String,
        /// How many user inputs to undo.
        #[arg(long, default_value_t = 1)]
        turns: usize,
    },
    /// Replace older turns with a summary written by the session's model.
    Compact { session: String },
    /// Delete sessions with their stored history and events (running ones are aborted).
    Rm {
        #[arg(required = true)]
        sessions: Vec<String>,
    },
    /// Delete closed sessions not updated for a while.
    Gc {
        /// Minimum age since the last update, such as 7d, 12h or 30m.
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// Only print what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A failure and the exit code it maps to.
struct Failure(u8, String);

const EX_UNAVAILABLE: u8 = 69;
const EX_NOPERM: u8 = 77;
/// The answer was cut off at the output-token limit: distinct from 1 so that scripts can ask
/// again with a higher `max_output_tokens` or for a shorter answer.
const EX_MAX_TOKENS: u8 = 3;

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Call(err) => {
                let kind = err
                    .data()
                    .and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
                    .and_then(|d| d["kind"].as_str().map(str::to_owned));
                match kind {
                    Some(kind) if kind == "unauthorized" => {
                        Failure(EX_NOPERM, format!("{} ({kind})", err.message()))
                    }
                    Some(kind) => Failure(1, format!("{} ({kind})", err.message())),
                    None => Failure(1, err.message().to_owned()),
                }
            }
            ClientError::RestartNeeded(_) | ClientError::Transport(_) => Failure(
                EX_UNAVAILABLE,
                format!("lost the connection to agentd: {e}"),
            ),
            other => Failure(1, other.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, Failure>;

fn main() -> ExitCode {
    // `agentctl events | head` must end quietly when the reader goes away, like any Unix tool,
    // instead of panicking on the broken pipe.
    // SAFETY: no other thread exists yet, and SIG_DFL installs no Rust handler.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentctl: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(Failure(code, message)) => {
            eprintln!("agentctl: {message}");
            ExitCode::from(code)
        }
    }
}

async fn connect(socket: Option<&std::path::Path>, autostart: bool) -> Result<Connection> {
    let socket = daemon::socket_path(socket);
    let first = match Connection::connect(&socket).await {
        Ok(conn) => return Ok(conn),
        Err(e) => e,
    };
    let unreachable = |detail: String| {
        Failure(
            EX_UNAVAILABLE,
            format!(
                "cannot reach agentd at {}: {detail}\nstart it with `agentd &` (or `systemctl --user start agentd.socket`)",
                socket.display()
            ),
        )
    };
    let nothing_there = matches!(
        first.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    );
    if !(autostart && nothing_there && daemon::autostart_allowed()) {
        return Err(unreachable(first.to_string()));
    }
    let log = daemon::start(&socket)
        .map_err(|e| unreachable(format!("{first}; starting agentd failed: {e}")))?;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if let Ok(conn) = Connection::connect(&socket).await {
            return Ok(conn);
        }
    }
    Err(unreachable(format!(
        "{first}; agentd was started but did not answer within 5 s (see {})",
        log.display()
    )))
}

fn print<T: Serialize>(json: bool, value: &T, human: impl FnOnce(&T)) {
    if json {
        println!("{}", serde_json::to_string(value).unwrap_or_default());
    } else {
        human(value);
    }
}

fn join_text(words: &[String]) -> Result<String> {
    let text = if words.is_empty() || words == ["-"] {
        let mut text = String::new();
        if std::io::stdin().is_terminal() {
            eprintln!("(reading the prompt from stdin; end with Ctrl-D)");
        }
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure(1, format!("cannot read stdin: {e}")))?;
        text
    } else {
        words.join(" ")
    };
    if text.trim().is_empty() {
        return Err(Failure(2, "the prompt is empty".into()));
    }
    Ok(text)
}

/// Accepts a full session id or a unique prefix of one.
async fn resolve(conn: &Connection, id: &str) -> Result<SessionId> {
    let list = conn.call::<m::SessionList>(ListParams::default()).await?;
    if list.sessions.iter().any(|s| s.session_id.as_str() == id) {
        return Ok(SessionId::from(id));
    }
    let matches: Vec<_> = list
        .sessions
        .iter()
        .filter(|s| s.session_id.as_str().starts_with(id))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.session_id.clone()),
        [] => Ok(SessionId::from(id)),
        _ => Err(Failure(
            2,
            format!(
                "session prefix {id:?} is ambiguous ({} sessions match)",
                matches.len()
            ),
        )),
    }
}

fn create_params(args: NewArgs) -> Result<CreateParams> {
    let cwd = match args.cwd {
        Some(c) => std::path::absolute(c),
        None => std::env::current_dir(),
    }
    .map_err(|e| Failure(1, format!("cannot resolve the working directory: {e}")))?;
    Ok(CreateParams {
        cwd: cwd.display().to_string(),
        provider: args.provider,
        model: args.model,
        profile: args.profile,
        config: None,
        title: args.title,
        instructions: args.instructions,
        read_only: args.read_only,
    })
}

async fn run(cli: Cli) -> Result<u8> {
    let socket = cli.socket.as_deref();
    let command = match cli.command {
        Command::Offline(Offline::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "agentctl",
                &mut std::io::stdout(),
            );
            return Ok(0);
        }
        Command::Offline(Offline::Man { dir }) => return man_pages(dir.as_deref()),
        Command::Offline(Offline::Doctor) => return doctor(socket).await,
        Command::Online(command) => command,
    };
    let conn = connect(socket, true).await?;
    let json = cli.json;
    match command {
        Online::Status => {
            let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
            print(json, &info, |i| {
                println!(
                    "agentd {} (protocol {}), pid {}, up {}s",
                    i.version,
                    i.protocol,
                    i.pid,
                    i.uptime_ms / 1000
                );
                println!("socket   {}", i.socket);
                println!(
                    "sessions {} ({} processing)",
                    i.sessions, i.sessions_processing
                );
                for p in &i.providers {
                    let key = if p.has_key { "key set" } else { "no key" };
                    println!(
                        "provider {} [{}] {} ({key}, default model {})",
                        p.name, p.kind, p.base_url, p.default_model
                    );
                }
            });
        }
        Online::Models => {
            let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
            if json {
                for p in &info.providers {
                    print(true, p, |_| {});
                }
            } else {
                for p in &info.providers {
                    let key = if p.has_key { "key set" } else { "no key" };
                    let mut models = vec![p.default_model.clone()];
                    models.extend(p.models.iter().filter(|m| **m != p.default_model).cloned());
                    println!(
                        "{:<12} {:<12} {:<8} {}  {}",
                        p.name,
                        p.kind,
                        key,
                        models.join(", "),
                        p.base_url
                    );
                }
            }
        }
        Online::New(args) => {
            let snapshot = conn.call::<m::SessionCreate>(create_params(args)?).await?;
            print(json, &snapshot, |s| println!("{}", s.session_id));
        }
        Online::Ls { state, tree } => {
            let state = match state.as_deref() {
                None => None,
                Some(s) => Some(
                    serde_json::from_value::<SessionState>(serde_json::Value::String(s.into()))
                        .map_err(|_| Failure(2, format!("unknown state {s:?}: use idle, processing, awaiting_input or closed")))?,
                ),
            };
            let list = conn
                .call::<m::SessionList>(ListParams { state, cwd: None })
                .await?;
            if json {
                for s in &list.sessions {
                    print(true, s, |_| {});
                }
            } else {
                let line = |s: &agentd_proto::SessionSummary, depth: usize| {
                    let title = s.title.as_deref().unwrap_or("");
                    println!(
                        "{}{}  {:<10}  {:<20}  {}  {title}",
                        "  ".repeat(depth),
                        s.session_id,
                        format!("{:?}", s.state).to_lowercase(),
                        s.model,
                        s.cwd
                    );
                };
                if tree {
                    print_tree(&list.sessions, None, 0, &line);
                } else {
                    list.sessions.iter().for_each(|s| line(s, 0));
                }
            }
        }
        Online::Show { session } => {
            let session_id = resolve(&conn, &session).await?;
            let s = conn
                .call::<m::SessionGet>(SessionParams { session_id })
                .await?;
            print(json, &s, |s| {
                println!("{}", serde_json::to_string_pretty(s).unwrap_or_default())
            });
        }
        Online::Submit {
            new,
            follow,
            when_busy,
            client_input_id,
            new_args,
            args,
        } => {
            let (session_id, words) = if new {
                let snapshot = conn
                    .call::<m::SessionCreate>(create_params(new_args)?)
                    .await?;
                if !json {
                    eprintln!("session {}", snapshot.session_id);
                }
                (snapshot.session_id, args)
            } else {
                let Some((first, rest)) = args.split_first() else {
                    return Err(Failure(
                        2,
                        "usage: agentctl submit SESSION [PROMPT] or agentctl submit --new [PROMPT]"
                            .into(),
                    ));
                };
                (resolve(&conn, first).await?, rest.to_vec())
            };
            let text = join_text(&words)?;
            let when_busy = match when_busy {
                BusyArg::Queue => WhenBusy::Queue,
                BusyArg::Steer => WhenBusy::Steer,
                BusyArg::Reject => WhenBusy::Reject,
            };
            let params = SubmitParams {
                session_id: session_id.clone(),
                text,
                client_input_id,
                when_busy: Some(when_busy),
            };
            if !follow {
                let r = conn.call::<m::SessionSubmit>(params).await?;
                print(json, &r, |r| println!("{}", r.input_id));
                return Ok(0);
            }
            // Installed before submitting, so no Ctrl-C is lost between here and the loop.
            let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .map_err(|e| Failure(1, format!("cannot handle Ctrl-C: {e}")))?;
            let since = conn
                .call::<m::SessionGet>(SessionParams {
                    session_id: session_id.clone(),
                })
                .await?
                .last_seq;
            let stream = conn
                .subscribe::<m::SessionSubscribe>(SubscribeParams {
                    session_id: session_id.clone(),
                    since_seq: Some(since),
                })
                .await?;
            let submitted = conn.call::<m::SessionSubmit>(params).await?;
            return follow_work(&conn, stream, sigint, session_id, submitted.input_id, json).await;
        }
        Online::Steer { session, text } => {
            let session_id = resolve(&conn, &session).await?;
            let r = conn
                .call::<m::SessionSteer>(TextParams {
                    session_id,
                    text: join_text(&text)?,
                })
                .await?;
            print(json, &r, |r| println!("{}", r.input_id));
        }
        Online::FollowUp { session, text } => {
            let session_id = resolve(&conn, &session).await?;
            let r = conn
                .call::<m::SessionFollowUp>(TextParams {
                    session_id,
                    text: join_text(&text)?,
                })
                .await?;
            print(json, &r, |r| println!("{}", r.input_id));
        }
        Online::Queue { session, clear } => {
            let session_id = resolve(&conn, &session).await?;
            let q = if clear {
                conn.call::<m::SessionQueueClear>(SessionParams { session_id })
                    .await?
            } else {
                conn.call::<m::SessionQueue>(SessionParams { session_id })
                    .await?
            };
            print(json, &q, |q| {
                for i in &q.steering {
                    println!("steer     {}  {}", i.input_id, i.text);
                }
                for i in &q.follow_up {
                    println!("follow-up {}  {}", i.input_id, i.text);
                }
            });
        }
        Online::Abort { session, close } => {
            let session_id = resolve(&conn, &session).await?;
            let r = conn
                .call::<m::SessionAbort>(AbortParams { session_id, close })
                .await?;
            print(json, &r, |r| {
                println!(
                    "{}",
                    if r.aborted {
                        "aborted"
                    } else {
                        "nothing was running"
                    }
                );
                let queued = r.queue.steering.len() + r.queue.follow_up.len();
                if queued > 0 {
                    println!("{queued} queued item(s) kept; see `agentctl queue`");
                }
            });
        }
        Online::Close { session } => {
            let session_id = resolve(&conn, &session).await?;
            let r = conn
                .call::<m::SessionClose>(SessionParams { session_id })
                .await?;
            print(json, &r, |_| println!("closed"));
        }
        Online::Events {
            session,
            since,
            follow,
        } => {
            let session_id = resolve(&conn, &session).await?;
            let last = conn
                .call::<m::SessionGet>(SessionParams {
                    session_id: session_id.clone(),
                })
                .await?
                .last_seq;
            let mut stream = conn
                .subscribe::<m::SessionSubscribe>(SubscribeParams {
                    session_id,
                    since_seq: Some(since),
                })
                .await?;
            if !follow && last <= since {
                return Ok(0);
            }
            while let Some(item) = stream.next().await {
                let item = item.map_err(|e| Failure(1, format!("bad event: {e}")))?;
                match &item {
                    StreamItem::Event(e) => {
                        print(json, e, |e| {
                            println!(
                                "{:>6} {} {} {}",
                                e.seq,
                                e.ts,
                                e.body.kind(),
                                event_data(&e.body)
                            )
                        });
                        if !follow && e.seq >= last {
                            break;
                        }
                    }
                    StreamItem::End(end) => {
                        print(json, &item, |_| {
                            eprintln!("(stream ended: {:?} at seq {})", end.reason, end.last_seq)
                        });
                        break;
                    }
                }
            }
        }
        Online::History {
            session,
            offset,
            limit,
        } => {
            let session_id = resolve(&conn, &session).await?;
            let h = conn
                .call::<m::SessionHistory>(HistoryParams {
                    session_id,
                    offset,
                    limit,
                })
                .await?;
            if json {
                for e in &h.entries {
                    print(true, e, |_| {});
                }
            } else {
                for e in &h.entries {
                    println!(
                        "{}  {}",
                        e.id,
                        serde_json::to_string(&e.turn).unwrap_or_default()
                    );
                }
            }
        }
        Online::Fork { session, at, title } => {
            let session_id = resolve(&conn, &session).await?;
            let snapshot = conn
                .call::<m::SessionFork>(ForkParams {
                    session_id,
                    entry_id: at.map(EntryId),
                    title,
                })
                .await?;
            print(json, &snapshot, |s| println!("{}", s.session_id));
        }
        Online::Rollback { session, turns } => {
            let session_id = resolve(&conn, &session).await?;
            let r = conn
                .call::<m::SessionRollback>(RollbackParams { session_id, turns })
                .await?;
            print(json, &r, |r| {
                println!("{} entries off the branch; {} left", r.removed, r.entries)
            });
        }
        Online::Compact { session } => {
            let session_id = resolve(&conn, &session).await?;
            let r = conn
                .call::<m::SessionCompact>(SessionParams { session_id })
                .await?;
            print(json, &r, |r| {
                println!(
                    "~{} tokens -> ~{} ({} entries summarized, {} kept)",
                    r.tokens_before, r.tokens_after, r.entries_summarized, r.entries_kept
                )
            });
        }
        Online::Rm { sessions } => {
            for session in sessions {
                let session_id = resolve(&conn, &session).await?;
                let r = conn
                    .call::<m::SessionDelete>(SessionParams { session_id })
                    .await?;
                print(json, &r, |r| println!("deleted {}", r.session_id));
            }
        }
        Online::Gc {
            older_than,
            dry_run,
        } => {
            let list = conn
                .call::<m::SessionList>(ListParams {
                    state: Some(SessionState::Closed),
                    cwd: None,
                })
                .await?;
            let cutoff = std::time::SystemTime::now()
                .checked_sub(older_than)
                .unwrap_or(std::time::UNIX_EPOCH);
            for s in list.sessions {
                let updated = humantime::parse_rfc3339(&s.updated).map_err(|e| {
                    Failure(
                        1,
                        format!("session {}: bad time {:?}: {e}", s.session_id, s.updated),
                    )
                })?;
                if updated > cutoff {
                    continue;
                }
                if !dry_run {
                    conn.call::<m::SessionDelete>(SessionParams {
                        session_id: s.session_id.clone(),
                    })
                    .await?;
                }
                let verb = if dry_run { "would delete" } else { "deleted" };
                print(json, &s, |s| {
                    println!("{verb} {}  {}", s.session_id, s.updated)
                });
            }
        }
    }
    Ok(0)
}

/// Prints the sessions whose parent is `parent` (top-level ones for `None`, and those whose
/// parent is not listed), each followed by its children, indented.
fn print_tree(
    sessions: &[agentd_proto::SessionSummary],
    parent: Option<&SessionId>,
    depth: usize,
    line: &dyn Fn(&agentd_proto::SessionSummary, usize),
) {
    let listed = |id: &SessionId| sessions.iter().any(|s| &s.session_id == id);
    for s in sessions {
        let place = s.parent_id.as_ref().filter(|p| listed(p));
        if place == parent {
            line(s, depth);
            print_tree(sessions, Some(&s.session_id), depth + 1, line);
        }
    }
}

fn man_pages(dir: Option<&std::path::Path>) -> Result<u8> {
    let command = <Cli as clap::CommandFactory>::command();
    let fail = |e: std::io::Error| Failure(1, format!("cannot write man pages: {e}"));
    let Some(dir) = dir else {
        clap_mangen::Man::new(command)
            .render(&mut std::io::stdout())
            .map_err(fail)?;
        return Ok(0);
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut pages = vec![("agentctl".to_owned(), command.clone())];
    pages.extend(command.get_subcommands().map(|sub| {
        let name = format!("agentctl-{}", sub.get_name());
        (name.clone(), sub.clone().name(name))
    }));
    for (name, page) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out).map_err(fail)?;
        std::fs::write(dir.join(format!("{name}.1")), out).map_err(fail)?;
    }
    Ok(0)
}

/// Reports the setup without changing anything (it never starts the daemon).
async fn doctor(flag: Option<&std::path::Path>) -> Result<u8> {
    let socket = daemon::socket_path(flag);
    println!("agentctl {}", env!("CARGO_PKG_VERSION"));
    let conn = match connect(flag, false).await {
        Ok(conn) => conn,
        Err(Failure(code, _)) => {
            println!("socket   {} (nothing answers)", socket.display());
            println!(
                "hint     run any agentctl command to start agentd, or `systemctl --user start agentd.socket`"
            );
            println!(
                "log      {} (where agentctl-started daemons log)",
                daemon::log_path().display()
            );
            return Ok(code);
        }
    };
    let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
    println!("socket   {} (ok)", info.socket);
    println!(
        "daemon   agentd {} (protocol {}), pid {}, up {}s",
        info.version,
        info.protocol,
        info.pid,
        info.uptime_ms / 1000
    );
    if info.version != env!("CARGO_PKG_VERSION") {
        println!("warning  agentctl and agentd versions differ");
    }
    println!(
        "config   {}",
        info.config_file
            .as_deref()
            .unwrap_or("built-in defaults (no config file)")
    );
    println!(
        "log      {} (when started by agentctl)",
        daemon::log_path().display()
    );
    for p in &info.providers {
        let key = if p.has_key { "key set" } else { "no key" };
        println!(
            "provider {:<12} {:<12} {key:<8} {}",
            p.name, p.kind, p.base_url
        );
    }
    Ok(0)
}

fn event_data(body: &EventBody) -> String {
    let v = serde_json::to_value(body).unwrap_or_default();
    let s = v.get("data").map(|d| d.to_string()).unwrap_or_default();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(199).collect::<String>())
    } else {
        s
    }
}

/// Renders the session's events until the work that includes `input_id` ends. Ctrl-C aborts
/// that work.
async fn follow_work(
    conn: &Connection,
    mut stream: jsonrpsee::core::client::Subscription<StreamItem>,
    mut sigint: tokio::signal::unix::Signal,
    session_id: SessionId,
    input_id: agentd_proto::InputId,
    json: bool,
) -> Result<u8> {
    let mut renderer = render::Renderer::default();
    let mut seen_input = false;
    let mut interrupted = false;
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            _ = ticker.tick(), if renderer.animated() && !json => {
                renderer.tick();
                continue;
            }
            _ = sigint.recv(), if !interrupted => {
                interrupted = true;
                eprintln!("\n(aborting…)");
                conn.call::<m::SessionAbort>(AbortParams { session_id: session_id.clone(), close: false }).await?;
                continue;
            }
        };
        let Some(item) = item else {
            return Err(Failure(
                EX_UNAVAILABLE,
                "the daemon closed the event stream".into(),
            ));
        };
        let item = item.map_err(|e| Failure(1, format!("bad event: {e}")))?;
        let event = match item {
            StreamItem::Event(e) => e,
            StreamItem::End(end) => {
                print(json, &StreamItem::End(end.clone()), |_| {});
                return Ok(if interrupted { 130 } else { 1 });
            }
        };
        if json {
            print(true, &event, |_| {});
        } else {
            renderer.event(&event);
        }
        match &event.body {
            EventBody::UserInput { input_id: id, .. } if *id == input_id => seen_input = true,
            EventBody::ProcessingEnd { reason } if seen_input || interrupted => {
                return Ok(match reason {
                    _ if interrupted => 130,
                    ProcessingEndReason::Completed | ProcessingEndReason::TurnLimit => 0,
                    ProcessingEndReason::Aborted => 130,
                    ProcessingEndReason::Error => 1,
                    ProcessingEndReason::MaxTokens => EX_MAX_TOKENS,
                });
            }
            EventBody::SessionEnd { .. } => return Ok(if interrupted { 130 } else { 1 }),
            _ => {}
        }
    }
}
