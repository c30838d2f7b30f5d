# agentd's command worker in a container (POSIX sh: busybox's is enough). Exec'd once per
# container; reads requests on stdin, one a line, and answers on stdout, one a line (each
# written at once, so the lines of concurrent commands never mix). $1: the control directory
# (the daemon's, mounted read-only), or - on a remote engine, $2: the grace period in tenths
# of a second.
#   S id      start $1/id.sh in a new session and process group, stdout and stderr to the
#             FIFOs $1/id.out and $1/id.err the daemon made and is reading
#   K id pgid stop the group: TERM, KILL after the grace period
# On a remote engine the daemon execs each command itself (no S); its runner writes its G and
# X lines to a FIFO this worker makes and relays, named by the first answer: H /path.
# Answers: H (ready), G id pgid (started: the FIFOs are open), F id why (not started),
# X id status (exited; what it left in its group is stopped), Z id (stopped).
# Each runs in a process of its own, orphaned at once so the init reaps it (this shell never
# waits). When stdin closes (the daemon went away) every process in the container is stopped.
d=$1
t=$2
# (No `--` before a group: busybox's kill takes it for a number.)
stop() {
  kill -TERM "-$1" 2>/dev/null || return 0
  i=0
  while [ "$i" -lt "$t" ] && kill -0 "-$1" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
  kill -KILL "-$1" 2>/dev/null
  # Until the group is gone (the init reaps what dies), a second at most.
  i=0
  while [ "$i" -lt 10 ] && kill -0 "-$1" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
  return 0
}
start() {
  # A failed redirection of `exec` would end this shell without a word: check first.
  [ -p "$d/$1.out" ] && [ -w "$d/$1.out" ] && [ -p "$d/$1.err" ] && [ -w "$d/$1.err" ] ||
    { echo "F $1 cannot open the output pipes in $d"; return; }
  exec 3>"$d/$1.out" 4>"$d/$1.err"
  setsid sh "$d/$1.sh" </dev/null >&3 2>&4 3>&- 4>&- &
  g=$!
  exec 3>&- 4>&-
  echo "G $1 $g"
  wait "$g"
  s=$?
  echo "X $1 $s"
  stop "$g"
}
if [ "$d" = - ]; then
  a=$(mktemp -d "${TMPDIR:-/tmp}/.agentd-XXXXXX") && mkfifo -m 600 "$a/reports" ||
    { echo "E cannot make a FIFO in ${TMPDIR:-/tmp}"; exit 1; }
  # Reopened after each writer closes it; each line is one write, so lines never mix.
  ( while :; do while IFS= read -r l; do echo "$l"; done <"$a/reports"; done ) </dev/null &
  echo "H $a/reports"
else
  echo H
fi
while read -r op id arg; do
  case $op in
    S) ( start "$id" & ) ;;
    K) ( { stop "$arg"; echo "Z $id"; } & ) ;;
  esac
done
kill -TERM -1 2>/dev/null
sleep 1
kill -KILL -1 2>/dev/null
