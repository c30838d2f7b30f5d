//! `agentctl completions SHELL`: clap_complete's script for the CLI's definition, and one
//! addition of agentctl's own, which no static script can know: after `agentctl submit
//! SESSION`, a word starting with `/` completes from that session's skills and prompt
//! commands (`agentctl commands --names SESSION`, asked of the daemon at each TAB). The
//! options of `submit` that take a value are read from the definition too, so that the
//! session is found past them.

use crate::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;

/// Bash: wraps clap's `_agentctl` and registers the wrapper as clap registers its own.
const BASH: &str = r#"
# agentctl's addition: `agentctl submit SESSION /<TAB>` completes the session's skills and
# prompt commands, from `agentctl commands --names SESSION`.
_agentctl_slash() {
    local cur="${COMP_WORDS[COMP_CWORD]}" i=1 socket=() found=()
    if [[ $cur == /* ]]; then
        while (( i < COMP_CWORD )); do
            case "${COMP_WORDS[i]}" in
                --socket) socket=(--socket "${COMP_WORDS[i+1]}"); (( i += 2 )) ;;
                -*) (( i++ )) ;;
                *) break ;;
            esac
        done
        if [[ ${COMP_WORDS[i]} == submit ]]; then
            (( i++ ))
            while (( i < COMP_CWORD )); do
                case "${COMP_WORDS[i]}" in
                    --new) found=(new prompt); break ;;
                    --socket) socket=(--socket "${COMP_WORDS[i+1]}"); (( i++ )) ;;
                    @VALUE_OPTIONS@) (( i++ )) ;;
                    -*) ;;
                    *) found+=("${COMP_WORDS[i]}") ;;
                esac
                (( i++ ))
            done
            if (( ${#found[@]} == 1 )); then
                COMPREPLY=($(compgen -W "$("$1" "${socket[@]}" commands --names -- "${found[0]}" 2>/dev/null)" -- "$cur"))
                return 0
            fi
        fi
    fi
    _agentctl "$@"
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _agentctl_slash -o nosort -o bashdefault -o default agentctl
else
    complete -F _agentctl_slash -o bashdefault -o default agentctl
fi
"#;

/// Zsh: clap's `_agentctl` kept as `_agentctl_clap`, called by the wrapper that takes its
/// name (before the script's last lines call or register `_agentctl`).
const ZSH: &str = r#"
# agentctl's addition: `agentctl submit SESSION /<TAB>` completes the session's skills and
# prompt commands, from `agentctl commands --names SESSION`.
functions[_agentctl_clap]=$functions[_agentctl]
_agentctl() {
    local i=2 socket=() found=() names=()
    if [[ $PREFIX == /* ]]; then
        while (( i < CURRENT )); do
            case "${words[i]}" in
                --socket) socket=(--socket "${words[i+1]}"); (( i += 2 )) ;;
                -*) (( i++ )) ;;
                *) break ;;
            esac
        done
        if [[ ${words[i]} == submit ]]; then
            (( i++ ))
            while (( i < CURRENT )); do
                case "${words[i]}" in
                    --new) found=(new prompt); break ;;
                    --socket) socket=(--socket "${words[i+1]}"); (( i++ )) ;;
                    @VALUE_OPTIONS@) (( i++ )) ;;
                    -*) ;;
                    *) found+=("${words[i]}") ;;
                esac
                (( i++ ))
            done
            if (( ${#found} == 1 )); then
                names=(${(f)"$(_call_program commands ${words[1]} ${(q)socket} commands --names -- ${(q)found[1]} 2>/dev/null)"})
                compadd -a names
                return
            fi
        fi
    fi
    _agentctl_clap "$@"
}

"#;

/// Fish: one more completion rule for `submit`, its candidates from a function.
const FISH: &str = r#"
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
            case @VALUE_OPTIONS@
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
"#;

/// The options of `submit` that take a value, as `--long` and `-s` words.
fn value_options() -> Vec<String> {
    let cli = Cli::command();
    cli.find_subcommand("submit")
        .into_iter()
        .flat_map(clap::Command::get_arguments)
        .filter(|a| !a.is_positional() && a.get_action().takes_values())
        .flat_map(|a| {
            let long = a.get_long().map(|l| format!("--{l}"));
            let short = a.get_short().map(|s| format!("-{s}"));
            long.into_iter().chain(short)
        })
        .collect()
}

/// The completion script for `shell`.
pub(crate) fn script(shell: Shell) -> String {
    let mut generated = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "agentctl", &mut generated);
    let generated = String::from_utf8_lossy(&generated).into_owned();
    let options = value_options();
    match shell {
        Shell::Bash => generated + &BASH.replace("@VALUE_OPTIONS@", &options.join("|")),
        Shell::Zsh => {
            // Before the lines that call or register `_agentctl`, which must be the wrapper.
            let tail = "if [ \"$funcstack[1]\" = \"_agentctl\" ]; then";
            let at = generated.rfind(tail).unwrap_or(generated.len());
            let addition = ZSH.replace("@VALUE_OPTIONS@", &options.join("|"));
            format!("{}{addition}{}", &generated[..at], &generated[at..])
        }
        Shell::Fish => generated + &FISH.replace("@VALUE_OPTIONS@", &options.join(" ")),
        _ => generated,
    }
}
