//! A command on a remote engine, which shares no file system with the daemon: exec'd by the
//! daemon through the engine's API with its output on the exec's attach stream, which a task
//! splits into two bounded in-memory pipes that the shared loop (`exec/child.rs`) reads as it
//! reads a local command's. The exec's runner starts the command in a new session and
//! process group and reports the group and the exit status to the worker's FIFO, so the
//! worker follows, times out and stops it as it does a command it started itself.

use super::engine::Engine;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures::StreamExt;
use tokio::io::{AsyncWriteExt, DuplexStream};

/// The runner: `$1` the worker's report FIFO, `$2` the command's id, `$3` its script, `$4`
/// the grace period in tenths of a second, `$5` 1 when the script reads the exec's stdin
/// (an asynchronous list's stdin is `/dev/null` unless redirected). `[ -p ]` first: a
/// report never creates a file.
const RUNNER: &str = r#"if [ "$5" = 1 ]; then
  exec 3<&0
  setsid sh -c "$3" <&3 3<&- &
else
  setsid sh -c "$3" </dev/null &
fi
g=$!
[ -p "$1" ] && echo "G $2 $g" >"$1"
wait "$g"
s=$?
[ -p "$1" ] && echo "X $2 $s" >"$1"
# What the command left in its group goes with it: TERM, KILL after the grace period.
kill -TERM "-$g" 2>/dev/null || exit 0
i=0
while [ "$i" -lt "$4" ] && kill -0 "-$g" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -KILL "-$g" 2>/dev/null
exit 0
"#;
/// What the pump holds of one stream that the loop has not read yet: output past it waits
/// in the engine's stream (and the engine's buffers), not in the daemon.
const PIPE_BUFFER: usize = 64 * 1024;

/// Execs command `id`'s `script` in `container`, reporting to `fifo`, with `stdin` (else
/// `/dev/null`) on its stdin; returns the read ends of its stdout and stderr, fed by a task
/// until the exec's stream ends or the reader goes.
pub(super) async fn start(
    engine: &Engine,
    container: &str,
    fifo: &str,
    id: u64,
    script: &str,
    stdin: Option<Vec<u8>>,
) -> Result<(DuplexStream, DuplexStream), String> {
    let id = id.to_string();
    let grace = (super::super::child::KILL_GRACE.as_millis() / 100).to_string();
    let options = CreateExecOptions {
        cmd: Some(vec![
            "/bin/sh",
            "-c",
            RUNNER,
            "agentd-run",
            fifo,
            &id,
            script,
            &grace,
            if stdin.is_some() { "1" } else { "0" },
        ]),
        attach_stdin: Some(stdin.is_some()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..CreateExecOptions::default()
    };
    let docker = engine.docker();
    let created = docker
        .create_exec(container, options)
        .await
        .map_err(|e| format!("cannot exec the command: {e}"))?;
    let (mut output, mut input) = match docker.start_exec(&created.id, None).await {
        Ok(StartExecResults::Attached { output, input }) => (output, input),
        Ok(StartExecResults::Detached) => return Err("the command's exec detached".to_owned()),
        Err(e) => return Err(format!("cannot start the command: {e}")),
    };
    if let Some(stdin) = stdin {
        // Until it is all written or the script went; the script reads the length it was
        // told, so no end of stream is needed.
        tokio::spawn(tokio::time::timeout(super::tree::TIMEOUT, async move {
            let _ = input.write_all(&stdin).await;
            let _ = input.flush().await;
        }));
    }
    let (mut out, out_reader) = tokio::io::duplex(PIPE_BUFFER);
    let (mut err, err_reader) = tokio::io::duplex(PIPE_BUFFER);
    tokio::spawn(async move {
        // Ends with the stream, at its first error (garbage from the engine), or once the
        // readers are gone.
        while let Some(Ok(frame)) = output.next().await {
            let written = match frame {
                LogOutput::StdOut { message } => out.write_all(&message).await,
                LogOutput::StdErr { message } => err.write_all(&message).await,
                _ => Ok(()),
            };
            // The readers go together, when the command's run is over.
            if written.is_err() {
                break;
            }
        }
    });
    Ok((out_reader, err_reader))
}
