# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_agentctl_global_optspecs
    string join \n socket= json h/help V/version
end

function __fish_agentctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_agentctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_agentctl_using_subcommand
    set -l cmd (__fish_agentctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c agentctl -n "__fish_agentctl_needs_command" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_needs_command" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_needs_command" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_needs_command" -s V -l version -d 'Print version'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "status" -d 'Daemon version, uptime, sessions and providers'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "models" -d 'Configured providers and their models'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "new" -d 'Create a session and print its id'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "ls" -d 'List sessions'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "show" -d 'Show one session'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "submit" -d 'Submit a prompt: `submit SESSION [PROMPT]` or `submit --new [PROMPT]`; without PROMPT it is read from stdin'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "steer" -d 'Inject a message after the current tool round'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "follow-up" -d 'Queue a message to run after the current input completes'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "queue" -d 'Show (or with --clear remove) queued steering and follow-ups'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "commands" -d 'The skills and prompt commands a session\'s input may start with (`/name`)'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "abort" -d 'Stop the session\'s current work (it stays open unless --close)'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "close" -d 'Close a session'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "events" -d 'Print a session\'s events'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "history" -d 'Print the conversation'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "fork" -d 'Copy a session\'s conversation, up to an entry, into a new session'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "rollback" -d 'Undo the last user inputs and what followed them (nothing is deleted; `fork --at` reaches it)'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "undo" -d 'Undo the last user inputs with the files the agent changed in them: `undo [SESSION] [--turns N] [--force]`. Files you changed since are never overwritten without --force'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "redo" -d 'Bring back what the last undo (or rollback) took away, files and conversation'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "diff" -d 'Show what the agent changed in the files for an input, as a unified diff'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "compact" -d 'Replace older turns with a summary written by the session\'s model'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "rm" -d 'Delete sessions with their stored history and events (running ones are aborted)'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "gc" -d 'Delete closed sessions not updated for a while'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "config" -d 'Show a session\'s config, or change it from the next LLM call: `config SESSION max-turns=20 effort=high`'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "pending" -d 'List the requests a session waits on: approvals, questions, client tool calls'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "respond" -d 'Answer a pending request: `respond SESSION REQUEST allow|allow_always|deny [--message TEXT]`, or the answer to a question'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "mcp" -d 'MCP servers: `mcp list SESSION` shows a session\'s, each one\'s state and tools; `mcp list` the config file\'s, each started and stopped (no daemon needed)'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "acp" -d 'Speak the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, Emacs): each ACP session is an agentd session. Only ACP goes to stdout'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "socket-path" -d 'Print the socket of your agentd, starting it if nothing answers, once it is checked to run as you: how editor plugins find the daemon'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "doctor" -d 'Check the setup: socket, daemon, config, providers (never prints keys; never starts the daemon)'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "login" -d 'Store a provider\'s API key for the daemon (read from stdin, or typed at a prompt that does not echo; never an argument). New sessions use it at once; it wins over the provider\'s environment variable'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "logout" -d 'Remove a provider\'s stored API key'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "trust" -d 'Trust a workspace (default: the current directory), so that its `.agents/hooks.toml` runs, as it is now; `--list` and `--remove DIR`. Kept in the config file; a running daemon reloads it'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "daemon" -d 'The daemon itself: status, stop, restart, reload'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "mcp-server" -d 'Speak the Model Context Protocol on stdin/stdout, so MCP clients hand work to agentd'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "completions" -d 'Print a shell completion script: `agentctl completions bash > ~/.local/share/bash-completion/completions/agentctl`'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "man" -d 'Print the man page, or write every page into a directory'
complete -c agentctl -n "__fish_agentctl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentctl -n "__fish_agentctl_using_subcommand status" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand status" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand status" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand models" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand models" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand models" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l cwd -d 'Working directory [default: the current directory]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l ssh -d 'Run the session\'s tools on another machine over SSH: `[USER@]HOST:/remote/dir`, where HOST is a `[hosts.NAME]` entry of the daemon\'s config or a host the ssh configuration knows. Host keys must already be in known_hosts' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l container -d 'Run the session\'s commands in a container of its own with the working directory mounted: an image the engine has, or a `[containers.NAME]` entry of the daemon\'s config (its engine and limits). The engine is the entry\'s, else DOCKER_HOST\'s, else the local socket' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l ssh-port -d 'The SSH port (with --ssh) [default: the host entry\'s or ssh configuration\'s]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l ssh-identity -d 'The private key file (with --ssh) [default: the host entry\'s, ssh agent\'s or configuration\'s]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l provider -d 'Provider name (see `agentctl models`)' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l model -d 'Model [default: the provider\'s default model]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l effort -d 'Reasoning effort [default: the provider\'s default]' -r -f -a "low\t''
medium\t''
high\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l max-turns -d 'Most model turns in the session; 0 is unlimited. Reaching it exits 3 with --follow' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l max-rounds -d 'Most tool rounds for one input; 0 is unlimited. Reaching it exits 4 with --follow' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l timeout -d 'Time limit of a shell command that sets none, such as 30s or 5m (raises the session\'s max-timeout to match if it is lower)' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l profile -d 'Tool profile (default: the provider\'s own)' -r -f -a "openai\t''
anthropic\t''
gemini\t''
bash\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l title -d 'Title shown in lists' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l instructions -d 'Extra instructions appended to the system prompt' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l worktree -d 'Run in a new git worktree of the directory\'s repository, on a new branch `agentd/NAME` from HEAD (NAME picked when not given); `agentctl rm` removes it only when nothing in it would be lost' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l approval -d '`ask`: every command and file change waits for approval (answered at the terminal with --follow, or with `agentctl respond`); `auto` runs them' -r -f -a "auto\t''
ask\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l allow -d 'A call that runs without asking, as `tool` or `tool(pattern)`: `--allow \'shell(git status*)\'`. Repeatable' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l deny -d 'A call that is refused without asking, in every mode: `--deny \'shell(rm *)\'`. Repeatable; deny wins over allow' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l sandbox -d 'What commands and file tools may write: read-only (only their temp dir), workspace-write (the working directory, the temp dir and --writable-roots) or off [default: the configured one, workspace-write unless changed]' -r -f -a "read-only\t''
workspace-write\t''
off\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l writable-roots -d 'More directories the workspace-write sandbox may write under (absolute; repeat or separate with commas)' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l container-network -d 'Let the container\'s commands reach the network (with --container) [default: off]'
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l read-only -d 'Refuse file writes and deletes; commands run in the read_only sandbox'
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l sandbox-network -d 'Let sandboxed commands open TCP connections and listen'
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand new" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand ls" -l state -d 'Only sessions in this state (idle, processing, awaiting_input, closed, or damaged: stored sessions whose record cannot be read)' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand ls" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand ls" -l tree -d 'Show subagents indented under the session that spawned them'
complete -c agentctl -n "__fish_agentctl_using_subcommand ls" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand ls" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand show" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand show" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand show" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l when-busy -d 'What to do if the session is busy' -r -f -a "queue\t''
steer\t''
reject\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l client-input-id -d 'Idempotency key: a repeated submit with the same key does nothing' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l image -d 'Send an image with the text (png, jpeg, gif or webp; repeatable, at most 10, each at most 5 MiB and 7 MiB in all). The session\'s provider must take images' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l cwd -d 'Working directory [default: the current directory]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l ssh -d 'Run the session\'s tools on another machine over SSH: `[USER@]HOST:/remote/dir`, where HOST is a `[hosts.NAME]` entry of the daemon\'s config or a host the ssh configuration knows. Host keys must already be in known_hosts' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l container -d 'Run the session\'s commands in a container of its own with the working directory mounted: an image the engine has, or a `[containers.NAME]` entry of the daemon\'s config (its engine and limits). The engine is the entry\'s, else DOCKER_HOST\'s, else the local socket' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l ssh-port -d 'The SSH port (with --ssh) [default: the host entry\'s or ssh configuration\'s]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l ssh-identity -d 'The private key file (with --ssh) [default: the host entry\'s, ssh agent\'s or configuration\'s]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l provider -d 'Provider name (see `agentctl models`)' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l model -d 'Model [default: the provider\'s default model]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l effort -d 'Reasoning effort [default: the provider\'s default]' -r -f -a "low\t''
medium\t''
high\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l max-turns -d 'Most model turns in the session; 0 is unlimited. Reaching it exits 3 with --follow' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l max-rounds -d 'Most tool rounds for one input; 0 is unlimited. Reaching it exits 4 with --follow' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l timeout -d 'Time limit of a shell command that sets none, such as 30s or 5m (raises the session\'s max-timeout to match if it is lower)' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l profile -d 'Tool profile (default: the provider\'s own)' -r -f -a "openai\t''
anthropic\t''
gemini\t''
bash\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l title -d 'Title shown in lists' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l instructions -d 'Extra instructions appended to the system prompt' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l worktree -d 'Run in a new git worktree of the directory\'s repository, on a new branch `agentd/NAME` from HEAD (NAME picked when not given); `agentctl rm` removes it only when nothing in it would be lost' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l approval -d '`ask`: every command and file change waits for approval (answered at the terminal with --follow, or with `agentctl respond`); `auto` runs them' -r -f -a "auto\t''
ask\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l allow -d 'A call that runs without asking, as `tool` or `tool(pattern)`: `--allow \'shell(git status*)\'`. Repeatable' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l deny -d 'A call that is refused without asking, in every mode: `--deny \'shell(rm *)\'`. Repeatable; deny wins over allow' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l sandbox -d 'What commands and file tools may write: read-only (only their temp dir), workspace-write (the working directory, the temp dir and --writable-roots) or off [default: the configured one, workspace-write unless changed]' -r -f -a "read-only\t''
workspace-write\t''
off\t''"
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l writable-roots -d 'More directories the workspace-write sandbox may write under (absolute; repeat or separate with commas)' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l new -d 'Create a new session for this prompt (the options below apply to it)'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -s f -l follow -d 'Stream the work until it ends; Ctrl-C aborts it'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l container-network -d 'Let the container\'s commands reach the network (with --container) [default: off]'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l read-only -d 'Refuse file writes and deletes; commands run in the read_only sandbox'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l sandbox-network -d 'Let sandboxed commands open TCP connections and listen'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand submit" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand steer" -l image -d 'Send an image with the text (png, jpeg, gif or webp; repeatable, at most 10, each at most 5 MiB and 7 MiB in all). The session\'s provider must take images' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand steer" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand steer" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand steer" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand follow-up" -l image -d 'Send an image with the text (png, jpeg, gif or webp; repeatable, at most 10, each at most 5 MiB and 7 MiB in all). The session\'s provider must take images' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand follow-up" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand follow-up" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand follow-up" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand queue" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand queue" -l clear
complete -c agentctl -n "__fish_agentctl_using_subcommand queue" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand queue" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand commands" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand commands" -l names -d 'Print only `/name`, one a line (for shell completion)'
complete -c agentctl -n "__fish_agentctl_using_subcommand commands" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand commands" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand abort" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand abort" -l close -d 'Close the session too'
complete -c agentctl -n "__fish_agentctl_using_subcommand abort" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand abort" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand close" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand close" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand close" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand events" -l since -d 'Only events with a greater seq [default: 0, all]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand events" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand events" -s f -l follow -d 'Keep streaming new events'
complete -c agentctl -n "__fish_agentctl_using_subcommand events" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand events" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand history" -l offset -d 'Skip this many entries' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand history" -l limit -d 'Show at most this many entries [default: 100]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand history" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand history" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand history" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand fork" -l at -d 'The last history entry to copy [default: the newest]' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand fork" -l title -d 'Title of the new session' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand fork" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand fork" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand fork" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand rollback" -l turns -d 'How many user inputs to undo' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand rollback" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand rollback" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand rollback" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand undo" -l turns -d 'How many user inputs to undo, each with everything that followed it' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand undo" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand undo" -l force -d 'Restore files the user changed since the agent did too (their versions are kept for `agentctl redo`)'
complete -c agentctl -n "__fish_agentctl_using_subcommand undo" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand undo" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand redo" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand redo" -l force -d 'Overwrite files changed since the undo too'
complete -c agentctl -n "__fish_agentctl_using_subcommand redo" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand redo" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand diff" -l input -d 'The input (`user_input`\'s `input_id`, as `agentctl history` shows it); default: the newest' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand diff" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand diff" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand diff" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand compact" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand compact" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand compact" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand rm" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand rm" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand rm" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand gc" -l older-than -d 'Minimum age since the last update, such as 7d, 12h or 30m' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand gc" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand gc" -l dry-run -d 'Only print what would be deleted'
complete -c agentctl -n "__fish_agentctl_using_subcommand gc" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand gc" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand config" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand config" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand config" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand pending" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand pending" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand pending" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand respond" -s m -l message -d 'With deny: a message for the model (what to do instead)' -r
complete -c agentctl -n "__fish_agentctl_using_subcommand respond" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand respond" -l error -d 'For a client tool: the output describes a failure'
complete -c agentctl -n "__fish_agentctl_using_subcommand respond" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand respond" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -f -a "list" -d 'A session\'s MCP servers: state, tools, or why one failed. Without a session, the config file\'s servers, each started (as a session would), listed and stopped'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and __fish_seen_subcommand_from list" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and __fish_seen_subcommand_from list" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "list" -d 'A session\'s MCP servers: state, tools, or why one failed. Without a session, the config file\'s servers, each started (as a session would), listed and stopped'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentctl -n "__fish_agentctl_using_subcommand acp" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand acp" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand acp" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand socket-path" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand socket-path" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand socket-path" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand doctor" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand doctor" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand login" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand login" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand login" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand logout" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand logout" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand logout" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand trust" -l remove -d 'Stop trusting DIR' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand trust" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand trust" -l list -d 'List the trusted workspaces'
complete -c agentctl -n "__fish_agentctl_using_subcommand trust" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand trust" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -f -a "status" -d 'Whether agentd runs, and its version, uptime, sessions and providers (exit 69 if not)'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -f -a "stop" -d 'Stop agentd gracefully: running work is aborted, sessions stay stored'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -f -a "restart" -d 'Stop agentd and start it again from this shell, with this shell\'s environment'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -f -a "reload" -d 'Read config.toml again (as SIGHUP does): new sessions get the new config, running ones keep theirs; a file that does not load is refused and the old config stays'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and not __fish_seen_subcommand_from status stop restart reload help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from status" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from status" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from stop" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from stop" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from stop" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from restart" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from restart" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from restart" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from reload" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from reload" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from reload" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from help" -f -a "status" -d 'Whether agentd runs, and its version, uptime, sessions and providers (exit 69 if not)'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from help" -f -a "stop" -d 'Stop agentd gracefully: running work is aborted, sessions stay stored'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from help" -f -a "restart" -d 'Stop agentd and start it again from this shell, with this shell\'s environment'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from help" -f -a "reload" -d 'Read config.toml again (as SIGHUP does): new sessions get the new config, running ones keep theirs; a file that does not load is refused and the old config stays'
complete -c agentctl -n "__fish_agentctl_using_subcommand daemon; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp-server" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp-server" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand mcp-server" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agentctl -n "__fish_agentctl_using_subcommand completions" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand completions" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand completions" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand man" -l dir -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand man" -l socket -d 'Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]' -r -F
complete -c agentctl -n "__fish_agentctl_using_subcommand man" -l json -d 'Print machine-readable NDJSON instead of text'
complete -c agentctl -n "__fish_agentctl_using_subcommand man" -s h -l help -d 'Print help'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "status" -d 'Daemon version, uptime, sessions and providers'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "models" -d 'Configured providers and their models'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "new" -d 'Create a session and print its id'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "ls" -d 'List sessions'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "show" -d 'Show one session'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "submit" -d 'Submit a prompt: `submit SESSION [PROMPT]` or `submit --new [PROMPT]`; without PROMPT it is read from stdin'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "steer" -d 'Inject a message after the current tool round'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "follow-up" -d 'Queue a message to run after the current input completes'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "queue" -d 'Show (or with --clear remove) queued steering and follow-ups'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "commands" -d 'The skills and prompt commands a session\'s input may start with (`/name`)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "abort" -d 'Stop the session\'s current work (it stays open unless --close)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "close" -d 'Close a session'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "events" -d 'Print a session\'s events'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "history" -d 'Print the conversation'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "fork" -d 'Copy a session\'s conversation, up to an entry, into a new session'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "rollback" -d 'Undo the last user inputs and what followed them (nothing is deleted; `fork --at` reaches it)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "undo" -d 'Undo the last user inputs with the files the agent changed in them: `undo [SESSION] [--turns N] [--force]`. Files you changed since are never overwritten without --force'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "redo" -d 'Bring back what the last undo (or rollback) took away, files and conversation'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "diff" -d 'Show what the agent changed in the files for an input, as a unified diff'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "compact" -d 'Replace older turns with a summary written by the session\'s model'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "rm" -d 'Delete sessions with their stored history and events (running ones are aborted)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "gc" -d 'Delete closed sessions not updated for a while'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "config" -d 'Show a session\'s config, or change it from the next LLM call: `config SESSION max-turns=20 effort=high`'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "pending" -d 'List the requests a session waits on: approvals, questions, client tool calls'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "respond" -d 'Answer a pending request: `respond SESSION REQUEST allow|allow_always|deny [--message TEXT]`, or the answer to a question'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "mcp" -d 'MCP servers: `mcp list SESSION` shows a session\'s, each one\'s state and tools; `mcp list` the config file\'s, each started and stopped (no daemon needed)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "acp" -d 'Speak the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, Emacs): each ACP session is an agentd session. Only ACP goes to stdout'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "socket-path" -d 'Print the socket of your agentd, starting it if nothing answers, once it is checked to run as you: how editor plugins find the daemon'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "doctor" -d 'Check the setup: socket, daemon, config, providers (never prints keys; never starts the daemon)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "login" -d 'Store a provider\'s API key for the daemon (read from stdin, or typed at a prompt that does not echo; never an argument). New sessions use it at once; it wins over the provider\'s environment variable'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "logout" -d 'Remove a provider\'s stored API key'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "trust" -d 'Trust a workspace (default: the current directory), so that its `.agents/hooks.toml` runs, as it is now; `--list` and `--remove DIR`. Kept in the config file; a running daemon reloads it'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "daemon" -d 'The daemon itself: status, stop, restart, reload'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "mcp-server" -d 'Speak the Model Context Protocol on stdin/stdout, so MCP clients hand work to agentd'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "completions" -d 'Print a shell completion script: `agentctl completions bash > ~/.local/share/bash-completion/completions/agentctl`'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "man" -d 'Print the man page, or write every page into a directory'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and not __fish_seen_subcommand_from status models new ls show submit steer follow-up queue commands abort close events history fork rollback undo redo diff compact rm gc config pending respond mcp acp socket-path doctor login logout trust daemon mcp-server completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and __fish_seen_subcommand_from mcp" -f -a "list" -d 'A session\'s MCP servers: state, tools, or why one failed. Without a session, the config file\'s servers, each started (as a session would), listed and stopped'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and __fish_seen_subcommand_from daemon" -f -a "status" -d 'Whether agentd runs, and its version, uptime, sessions and providers (exit 69 if not)'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and __fish_seen_subcommand_from daemon" -f -a "stop" -d 'Stop agentd gracefully: running work is aborted, sessions stay stored'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and __fish_seen_subcommand_from daemon" -f -a "restart" -d 'Stop agentd and start it again from this shell, with this shell\'s environment'
complete -c agentctl -n "__fish_agentctl_using_subcommand help; and __fish_seen_subcommand_from daemon" -f -a "reload" -d 'Read config.toml again (as SIGHUP does): new sessions get the new config, running ones keep theirs; a file that does not load is refused and the old config stays'

# agentctl's addition: `agentctl submit SESSION /<TAB>` completes the session's skills and
# prompt commands, from `agentctl commands --names SESSION`.
function __agentctl_slash_commands
    set -l tokens (commandline -opc)
    set -l socket
    set -l found
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case --socket
                set socket --socket $tokens[(math $i + 1)]
                set i (math $i + 2)
            case '-*'
                set i (math $i + 1)
            case '*'
                break
        end
    end
    test "$tokens[$i]" = submit; or return
    set i (math $i + 1)
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case --new
                return
            case --socket
                set socket --socket $tokens[(math $i + 1)]
                set i (math $i + 1)
            case --when-busy --client-input-id --image --cwd --ssh --container --ssh-port --ssh-identity --provider --model --effort --max-turns --max-rounds --timeout --profile --title --instructions --worktree --approval --allow --deny --sandbox --writable-roots
                set i (math $i + 1)
            case '-*'
            case '*'
                set -a found $tokens[$i]
        end
        set i (math $i + 1)
    end
    test (count $found) -eq 1; or return
    $tokens[1] $socket commands --names -- $found[1] 2>/dev/null
end
complete -c agentctl -n '__fish_agentctl_using_subcommand submit; and string match -q -- "/*" (commandline -ct)' -f -a '(__agentctl_slash_commands)'
