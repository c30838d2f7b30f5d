//! The `agentd` binary: parses arguments, loads the configuration, binds (or adopts) the
//! socket, and runs the server until SIGTERM, SIGINT or `daemon/shutdown`. SIGHUP reloads the
//! config for new sessions, as `daemon/reload` does.

use agentd_core::{Config, Registry, Store, default_config_path, default_state_dir};
#[cfg(feature = "count-allocations")]
mod allocations;
mod server;

use agentd_proto::StartedBy;
use agentd_proto::socket::STARTED_BY_ENV;
use server::{Daemon, Limits, Listener};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Hosts coding-agent sessions and serves them over JSON-RPC on a Unix socket.
#[derive(Parser)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[command(version, about)]
struct Args {
    /// Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]
    #[arg(long, env = ENV[0])]
    socket: Option<PathBuf>,
    /// Config file [default: ~/.config/agentd/config.toml]
    #[arg(long, env = ENV[1])]
    config: Option<PathBuf>,
    /// Where sessions are stored [default: $XDG_STATE_HOME/agentd]
    #[arg(long, env = ENV[2])]
    state_dir: Option<PathBuf>,
    /// Validate the config file and environment, then exit.
    #[arg(long)]
    check_config: bool,
    /// Start each MCP server of the config file, list its tools, stop it, and say which
    /// failed (exit status 1 when one did).
    #[arg(long)]
    check_mcp: bool,
    /// With --check-mcp: a JSON array, one object per configured server (disabled ones
    /// too): `{server, state: ready|failed|disabled, reason?, tools, left_out}`.
    #[arg(long, requires = "check_mcp")]
    json: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The variables standing for `--socket`, `--config` and `--state-dir`.
const ENV: [&str; 3] = ["AGENTD_SOCKET", "AGENTD_CONFIG", "AGENTD_STATE_DIR"];

impl Args {
    /// The arguments. A daemon started bare (as systemd and agentctl start it) takes only
    /// [`ENV`], read here: clap's parser would map about 0.4 MB of its code in for nothing.
    fn get() -> Self {
        if std::env::args_os().len() > 1 {
            return Self::parse();
        }
        Self::bare(ENV.map(std::env::var_os)).unwrap_or_else(Self::parse)
    }

    /// What clap makes of no arguments and `vars` (the values of [`ENV`]); `None` when an
    /// empty one (which clap refuses) leaves it to clap.
    fn bare(vars: [Option<std::ffi::OsString>; 3]) -> Option<Self> {
        if vars.iter().flatten().any(|v| v.is_empty()) {
            return None;
        }
        let [socket, config, state_dir] = vars.map(|v| v.map(PathBuf::from));
        Some(Self {
            socket,
            config,
            state_dir,
            check_config: false,
            check_mcp: false,
            json: false,
            command: None,
        })
    }
}

#[derive(Subcommand)]
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Command {
    /// Print the protocol's JSON Schema (or, with --markdown, its reference).
    Schema {
        /// Print the Markdown reference instead.
        #[arg(long)]
        markdown: bool,
    },
}

/// sysexits: configuration error.
const EX_CONFIG: u8 = 78;

fn main() -> ExitCode {
    // First of all: the provider keys are in this process's environment and memory, and
    // commands run as the same user. Not dumpable, `/proc/<pid>/environ`, `mem` and ptrace are
    // closed to them (and to everything but root), whatever the session's sandbox.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("agentd: cannot make the process non-dumpable: {e}");
        return ExitCode::FAILURE;
    }
    // Before any thread exists: it edits the environment.
    let systemd_fd = server::take_systemd_fd();
    let fd_limit = raise_fd_limit();
    fix_mmap_threshold();
    let args = Args::get();
    if let Some(Command::Schema { markdown: true }) = args.command {
        print!("{}", agentd_proto::schema::protocol_markdown());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Schema { markdown: false }) = args.command {
        println!(
            "{}",
            serde_json::to_string_pretty(&agentd_proto::schema::protocol_schema())
                .unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    let explicit = args.config.is_some();
    let config_path = args.config.clone().or_else(default_config_path);
    let mut config = match Config::load(config_path.as_deref(), explicit) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentd: {e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    config.started_by = started_by(systemd_fd.is_some());
    if args.check_mcp {
        return check_mcp(&config, args.json);
    }
    if args.check_config {
        let source = config
            .source
            .as_ref()
            .map_or("built-in defaults (no config file)".into(), |p| {
                p.display().to_string()
            });
        println!("config ok: {source}");
        for warning in &config.warnings {
            println!("  warning: {warning}");
        }
        if let Some(path) = &config.credentials_path {
            println!("credentials: {}", path.display());
        }
        for p in config.providers.values() {
            let info = p.info(config.started_by);
            println!(
                "  provider {}: {}; {} {}, default model {}",
                p.name,
                info.status(),
                p.kind.as_str(),
                p.base_url,
                p.default_model
            );
        }
        return ExitCode::SUCCESS;
    }
    let filter =
        tracing_subscriber::EnvFilter::try_new(&config.log_level).unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // Under systemd the journal stamps every line itself.
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        logs.without_time().init();
    } else {
        logs.init();
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    // Orphans of the commands (a `setsid` double fork, a shell's background children) become
    // the daemon's children, so it reaps them at once and can find them to kill them.
    if let Err(e) = agentd_core::process::become_subreaper() {
        tracing::warn!("cannot become a child subreaper: {e}; orphaned processes go to init");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(state_dir) = args.state_dir.or_else(default_state_dir) else {
        eprintln!("agentd: no state directory: set --state-dir, AGENTD_STATE_DIR or HOME");
        return ExitCode::from(EX_CONFIG);
    };
    match fd_limit {
        Ok((from, to)) if from != to => tracing::info!(from, to, "raised the open file limit"),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open file limit: {e}"),
    }
    let nofile = fd_limit.map_or(1024, |(_, to)| to);
    let limits = limits(&config, nofile);
    let served = runtime.block_on(serve(args.socket, systemd_fd, config, &state_dir, limits));
    // Every session has been saved by now. Whatever still runs on the blocking pool (a file
    // operation an abort abandoned, stuck in the kernel) is not waited for beyond this.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(
    socket: Option<PathBuf>,
    systemd_fd: Option<i32>,
    config: Config,
    state_dir: &std::path::Path,
    limits: Limits,
) -> anyhow::Result<()> {
    let uid = nix::unistd::geteuid().as_raw();
    // It holds the default socket and the SSH control sockets.
    if agentd_proto::socket::runtime_dir_is_fallback() {
        server::ensure_runtime_dir(&agentd_proto::socket::runtime_dir(uid))?;
    }
    let listener = match systemd_fd {
        Some(fd) => {
            tracing::info!(fd, "adopting the socket passed by systemd");
            Listener::adopt_systemd(fd)?
        }
        None => {
            let path = socket.unwrap_or_else(|| agentd_proto::socket::default_socket_path(uid));
            Listener::bind(&path)?
        }
    };
    let store = match Store::open(state_dir) {
        Ok(store) => store,
        Err(e) => {
            listener.remove_file();
            anyhow::bail!("cannot use the state directory: {e}");
        }
    };
    // Made now, so commands' namespaces hide it from the first command on: a key stored
    // later (`agentctl login`) lands in a directory already hidden, even from a process an
    // earlier command left running in namespaces built before.
    if let Some(dir) = agentd_core::default_config_dir()
        && let Err(e) = agentd_core::process::create_protected_dir(&dir)
    {
        tracing::warn!("cannot make the config directory {}: {e}", dir.display());
    }
    // After the store made the state directory, so its real path is known.
    let protected = protected_paths(&config, state_dir, &listener.path);
    end_leftovers(&store).await;
    tokio::spawn(agentd_core::process::reap_orphans_forever());
    let shutdown = CancellationToken::new();
    let daemon = Arc::new(Daemon {
        registry: Registry::new(config, Some(store), protected),
        started: Instant::now(),
        socket: listener.path.clone(),
        shutdown: shutdown.clone(),
        streams_closed: CancellationToken::new(),
        connections: Default::default(),
    });
    tokio::spawn(stop_on_signal(shutdown));
    tokio::spawn(reload_on_hangup(daemon.registry.clone()));
    #[cfg(feature = "count-allocations")]
    tokio::spawn(allocations::report_on_signal());
    let socket_display = listener.path.display().to_string();
    server::run(listener, daemon, limits, || {
        tracing::info!(socket = %socket_display, pid = std::process::id(), "agentd ready");
        if std::env::var_os("NOTIFY_SOCKET").is_some()
            && let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready])
        {
            tracing::warn!("sd_notify READY=1 failed: {e}");
        }
    })
    .await;
    tracing::info!("agentd stopped");
    Ok(())
}

/// agentd's own files, which no tool may open whatever its sandbox: the runtime directory
/// (and the socket, wherever it is), the state directory, the config directory, the config
/// file and the credentials file.
fn protected_paths(
    config: &Config,
    state_dir: &std::path::Path,
    socket: &std::path::Path,
) -> agentd_core::ProtectedPaths {
    let uid = nix::unistd::geteuid().as_raw();
    let paths = [
        Some(agentd_proto::socket::runtime_dir(uid)),
        Some(socket.to_owned()),
        Some(state_dir.to_owned()),
        agentd_core::default_config_dir(),
        config.source.clone(),
        config.requested.clone(),
    ];
    agentd_core::ProtectedPaths::new(paths.into_iter().flatten(), config.credentials_path.clone())
}

/// Raises the soft open-file limit to the hard one: every client connection is a descriptor,
/// and the usual soft default (1024) would lock clients out long before memory runs short.
/// Returns the limit before and after.
fn raise_fd_limit() -> nix::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    // macOS refuses more than OPEN_MAX for an unlimited hard limit.
    let target = if cfg!(target_os = "macos") {
        hard.min(10_240)
    } else {
        hard
    };
    if target <= soft {
        return Ok((soft, soft));
    }
    setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    Ok((soft, target))
}

/// Makes glibc serve every allocation of 128 KiB or more (message buffers, large events)
/// with its own mapping, returned to the OS on free. By default the threshold rises with the
/// largest block freed (up to 32 MiB), after which large buffers come from the heap and a
/// burst of big messages leaves the RSS at its high-water mark for good (measured: 21 → 53 MiB
/// over four floods of malformed messages; 23 MiB with the threshold fixed).
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called before any thread exists; mallopt only sets an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// The server's limits: the config's `[server]` table over the defaults, with the connection
/// cap fitted to the file descriptor limit.
fn limits(config: &Config, nofile: u64) -> Limits {
    let mut limits = Limits::default();
    if let Some(max) = config.server.max_connections {
        limits.max_connections = max;
    }
    if let Some(mb) = config.server.max_buffered_input_mb {
        limits.max_buffered_input = mb.saturating_mul(1024 * 1024);
    }
    if let Some(secs) = config.server.idle_timeout_secs {
        limits.idle_timeout = (secs > 0).then(|| std::time::Duration::from_secs(secs));
    }
    limits.fit_fd_limit(nofile)
}

/// Ends the process groups a crashed run left behind (recorded in the state directory), before
/// this run serves and records its own.
async fn end_leftovers(store: &Store) {
    let leftovers = match store.leftover_processes() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot read the previous run's process groups: {e}");
            return;
        }
    };
    let groups: Vec<agentd_core::process::ProcessId> = leftovers
        .groups
        .iter()
        .map(|g| agentd_core::process::ProcessId {
            pid: g.pgid,
            start_time: g.start_time,
        })
        .collect();
    let ended = agentd_core::process::end_leftovers(&groups, &leftovers.run).await;
    if ended > 0 {
        tracing::warn!(ended, "ended processes a previous agentd left running");
    }
}

/// How this daemon was started: by systemd (it passed a socket, or set `INVOCATION_ID`), by
/// agentctl (which sets `AGENTD_STARTED_BY=agentctl`), or by hand.
fn started_by(systemd_socket: bool) -> StartedBy {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if systemd_socket || set("INVOCATION_ID") {
        StartedBy::Systemd
    } else if std::env::var_os(STARTED_BY_ENV).is_some_and(|v| v == "agentctl") {
        StartedBy::Agentctl
    } else {
        StartedBy::Hand
    }
}

/// Reloads the config on every SIGHUP; a bad file is logged and the config in use stays.
async fn reload_on_hangup(registry: Arc<Registry>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler: reload with `agentctl daemon reload`");
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the config");
        // `reload` logs the outcome, a refusal included.
        let _ = server::reload(&registry).await;
    }
}

async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}

/// `--check-mcp`: one line per enabled server of the config file, `mcp NAME: ok, N tools` or
/// `mcp NAME: FAILED: reason`; with `json`, an array of every configured server.
fn check_mcp(config: &agentd_core::Config, json: bool) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let checks = runtime.block_on(agentd_core::check_mcp_servers(config));
    let failed = checks.iter().any(|c| c.result.is_err());
    if json {
        let servers: Vec<serde_json::Value> = config
            .mcp_servers
            .keys()
            .map(|name| match checks.iter().find(|c| c.server == *name) {
                None => serde_json::json!({"server": name, "state": "disabled", "tools": [], "left_out": []}),
                Some(c) => match &c.result {
                    Ok((tools, left_out)) => serde_json::json!({"server": name, "state": "ready", "tools": tools, "left_out": left_out}),
                    Err(why) => serde_json::json!({"server": name, "state": "failed", "reason": why, "tools": [], "left_out": []}),
                },
            })
            .collect();
        println!("{}", serde_json::Value::Array(servers));
    } else {
        for check in &checks {
            match &check.result {
                Ok((tools, _)) => println!("mcp {}: ok, {} tools", check.server, tools.len()),
                Err(why) => println!("mcp {}: FAILED: {why}", check.server),
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    /// clap's reading of `argv`, the environment left out.
    fn clap(argv: &[&str]) -> Args {
        let command = Args::command().mut_args(|a| a.env(None));
        Args::from_arg_matches(&command.get_matches_from(argv)).unwrap()
    }

    /// The bare path must make what clap makes: an argument given a default or a new
    /// variable would part them.
    #[test]
    fn a_bare_start_reads_what_clap_would() {
        assert_eq!(Args::bare([None, None, None]), Some(clap(&["agentd"])));
        let vars = ["/s", "/c", "/d"].map(|v| Some(v.into()));
        let flags = [
            "agentd",
            "--socket",
            "/s",
            "--config",
            "/c",
            "--state-dir",
            "/d",
        ];
        assert_eq!(Args::bare(vars), Some(clap(&flags)));
        assert_eq!(Args::bare([None, Some("".into()), None]), None);
        let named: Vec<_> = Args::command()
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(named, ENV);
    }
}
