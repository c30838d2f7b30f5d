# agentd's command worker: a long-lived Perl process on the remote machine that starts the
# shell commands of every session on the connection (commands.rs drives it). One frame each
# way per event: TYPE (1 byte), ID (u32, big-endian), LENGTH (u32), then LENGTH bytes.
#
# In:  S id "CWD\0COMMAND\0NAME=VALUE\0..."  start `/bin/bash -c COMMAND` in CWD with exactly
#                                            those variables, in a new session (setsid)
#      K id                                  stop its group: TERM, KILL after the grace
#      D id                                  done: close its pipes, send nothing more for it
# Out: H 0 "agentd-worker 1"                 ready
#      G id PGID | F id REASON               started (its group) | not started
#      O id BYTES | E id BYTES               stdout | stderr (empty: that pipe's end)
#      X id "c CODE" | "s SIGNAL"            the command exited (what it left in its group is
#                                            stopped like a K)
#      Y id                                  a K's stop is over: the group is gone
# When stdin closes (the daemon went away or the connection dropped), every group is stopped
# and the worker exits once they are gone or killed.
use strict;
use warnings;
use POSIX ();
use Fcntl ();
use Time::HiRes ();

my $grace = $ARGV[0];
my $max_in = 1 << 20;
$SIG{PIPE} = 'IGNORE';
binmode STDIN;
binmode STDOUT;
pipe(my $wake_r, my $wake_w) or die "pipe: $!";
fcntl($_, Fcntl::F_SETFL(), Fcntl::O_NONBLOCK()) for $wake_r, $wake_w;
# A child's exit wakes the select below, even when it came just before it.
$SIG{CHLD} = sub { syswrite($wake_w, 'x') };

my (%cmd, %by_pid);
my ($in, $closing, $deaf, $drop) = ('', 0, 0, '');

# Frames wait in $out until the loop is about to sleep, so what one wake-up produced (a
# command's last output, its pipes' ends and its exit) leaves in one write and one packet.
my $out = '';

sub send_frame {
    my ($type, $id, $payload) = @_;
    $out .= pack('aNN', $type, $id, length $payload) . $payload unless $deaf;
}

sub flush {
    while (length $out) {
        my $n = syswrite(STDOUT, $out);
        if (!defined $n) {
            next if $!{EINTR};
            ($deaf, $out) = (1, '');
            close_all();
            return;
        }
        substr($out, 0, $n) = '';
    }
}

# Whether the group has a member that is not a zombie (a killed member is one until whoever
# inherited it reaps it). /proc is read only when the kernel still counts a member.
sub group_alive {
    my $pid = shift;
    return 0 unless kill(0, -$pid);
    opendir(my $d, '/proc') or return 1;
    for my $p (grep { /^\d+$/ } readdir $d) {
        open(my $f, '<', "/proc/$p/stat") or next;
        my $s = <$f>;
        next unless defined $s && $s =~ /.*\)\s+(\S)\s+-?\d+\s+(-?\d+)/;
        return 1 if $2 == $pid && $1 ne 'Z' && $1 ne 'X';
    }
    0;
}

# TERM to the group (or the process, before its setsid), KILL after the grace period.
sub stop {
    my $c = shift;
    return if $c->{kill_at} || $c->{stopped};
    if (kill('TERM', -$c->{pid}) || kill('TERM', $c->{pid})) {
        $c->{kill_at} = Time::HiRes::time() + $grace;
    } else {
        stopped($c);
    }
}

sub stopped {
    my $c = shift;
    delete $c->{kill_at};
    delete $c->{killed};
    $c->{stopped} = 1;
    send_frame('Y', $c->{id}, '') if delete $c->{asked};
    forget($c);
}

sub close_pipe {
    my ($c, $k) = @_;
    close(delete $c->{$k}) if $c->{$k};
}

sub forget {
    my $c = shift;
    delete $cmd{$c->{id}}
      if $c->{exited} && !$c->{kill_at} && !$c->{o} && !$c->{e} && !$c->{asked};
}

sub close_all {
    return if $closing;
    $closing = 1;
    for my $c (values %cmd) {
        $c->{done} = 1;
        close_pipe($c, $_) for qw(o e);
        if (group_alive($c->{pid}) || !$c->{exited}) { stop($c) } else { forget($c) }
    }
}

sub start {
    my ($id, $payload) = @_;
    my ($cwd, $command, @env) = split /\0/, $payload, -1;
    return send_frame('F', $id, 'malformed start request') unless defined $command;
    return send_frame('F', $id, "cannot enter $cwd: $!") unless chdir $cwd;
    my ($or, $ow, $er, $ew);
    unless (pipe($or, $ow) && pipe($er, $ew)) {
        chdir '/';
        return send_frame('F', $id, "cannot make pipes: $!");
    }
    my $pid = fork;
    if (!defined $pid) {
        chdir '/';
        return send_frame('F', $id, "cannot fork: $!");
    }
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(PIPE CHLD);
        POSIX::setsid();
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>&', $ow);
        open(STDERR, '>&', $ew);
        %ENV = ();
        for (@env) {
            my ($k, $v) = split /=/, $_, 2;
            $ENV{$k} = $v if defined $v && length $k;
        }
        { no warnings 'exec'; exec { '/bin/bash' } 'bash', '-c', $command; }
        print STDERR "cannot run /bin/bash: $!\n";
        POSIX::_exit(127);
    }
    chdir '/';
    close $ow;
    close $ew;
    $cmd{$id} = { id => $id, pid => $pid, o => $or, e => $er };
    $by_pid{$pid} = $id;
    send_frame('G', $id, $pid);
}

sub request {
    my ($type, $id, $payload) = @_;
    my $c = $cmd{$id};
    if ($type eq 'S') {
        start($id, $payload) unless $c;
    } elsif ($type eq 'K') {
        if (!$c || $c->{stopped} || !(group_alive($c->{pid}) || !$c->{exited})) {
            $c->{stopped} = 1 if $c;
            send_frame('Y', $id, '');
            forget($c) if $c;
        } else {
            $c->{asked} = 1;
            stop($c);
        }
    } elsif ($type eq 'D') {
        return unless $c;
        $c->{done} = 1;
        close_pipe($c, $_) for qw(o e);
        forget($c);
    } else {
        close_all();
    }
}

sub reap {
    while ((my $pid = waitpid(-1, POSIX::WNOHANG())) > 0) {
        my $id = delete $by_pid{$pid};
        my $c = defined $id ? $cmd{$id} : undef;
        next unless $c;
        my $s = $?;
        $c->{exited} = 1;
        send_frame('X', $id, ($s & 127) ? 's ' . ($s & 127) : 'c ' . ($s >> 8)) unless $c->{done};
        if (group_alive($pid)) { stop($c) } else { forget($c) unless $c->{kill_at} }
    }
}

send_frame('H', 0, 'agentd-worker 1');
while (1) {
    reap();
    my $now = Time::HiRes::time();
    my $stopping = 0;
    for my $c (values %cmd) {
        next unless $c->{kill_at};
        if (!group_alive($c->{pid})) {
            stopped($c);
        } elsif ($now >= $c->{kill_at} && $c->{killed}) {
            stopped($c);    # a member that SIGKILL does not end (uninterruptible sleep)
        } elsif ($now >= $c->{kill_at}) {
            kill('KILL', -$c->{pid});
            kill('KILL', $c->{pid});
            $c->{killed} = 1;
            $c->{kill_at} = $now + 1;
            $stopping = 1;
        } else {
            $stopping = 1;
        }
    }
    flush();
    last if $closing && !$stopping;
    my $rin = '';
    vec($rin, fileno(STDIN), 1) = 1 unless $closing;
    vec($rin, fileno($wake_r), 1) = 1;
    for my $c (values %cmd) {
        vec($rin, fileno($c->{$_}), 1) = 1 for grep { $c->{$_} } qw(o e);
    }
    my $n = select(my $rout = $rin, undef, undef, $stopping ? 0.01 : undef);
    next if $n <= 0;
    1 while sysread($wake_r, $drop, 4096);
    for my $c (values %cmd) {
        for my $k (qw(o e)) {
            next unless $c->{$k} && vec($rout, fileno($c->{$k}), 1);
            my $got = sysread($c->{$k}, my $buf, 65536);
            next if !defined $got && $!{EINTR};
            send_frame($k eq 'o' ? 'O' : 'E', $c->{id}, $got ? $buf : '') unless $c->{done};
            close_pipe($c, $k) unless $got;
        }
        forget($c);
    }
    next if $closing || !vec($rout, fileno(STDIN), 1);
    my $got = sysread(STDIN, $in, 65536, length $in);
    next if !defined $got && $!{EINTR};
    if (!$got) {
        close_all();
        next;
    }
    while (length($in) >= 9) {
        my ($type, $id, $len) = unpack('aNN', $in);
        if ($len > $max_in) {
            close_all();
            last;
        }
        last if length($in) < 9 + $len;
        my $payload = substr($in, 9, $len);
        substr($in, 0, 9 + $len) = '';
        request($type, $id, $payload);
    }
}
