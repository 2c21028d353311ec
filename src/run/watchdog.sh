#!/usr/bin/env bash
# The watchdog of `shardbridge run`: a process of its own, so that a supervisor that is
# frozen (SIGSTOP), starved or killed cannot leave its child running past the lease.
#
# The supervisor feeds it on stdin, one line at a time:
#   arm PGID MS [CGROUP]  kill process group PGID (and every process in the cgroup
#                         directory CGROUP) if no newer line comes within MS milliseconds
#   disarm                the group is gone (or stopped by the supervisor): nothing to guard
# Each "arm" restates the whole time left, measured by the supervisor as it writes, so
# the watchdog needs no clock of its own: bash's `read -t` is its timer.
# End of input (the supervisor died, its end of the pipe closed by the kernel) with a
# group armed kills the group at once: pdeathsig kills the direct child only.
#
# Each kill is reported on stderr as one JSON line.
set -u
pgid=""
cgroup=""
seconds=""

# KILL the group, and through cgroup.kill everything in the cgroup; then remove the
# emptied cgroup (its processes take a moment to go).
kill_all() {
  kill -KILL -- "-$pgid" 2>/dev/null
  if [ -n "$cgroup" ]; then
    echo 1 > "$cgroup/cgroup.kill" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      rmdir "$cgroup" 2>/dev/null && break
      sleep 0.02
    done
  fi
}

report() {
  printf '{"ev":"watchdog-kill","pgid":%s,"why":"%s"}\n' "$1" "$2" >&2
}

while :; do
  if [ -n "$pgid" ]; then
    if IFS=' ' read -r -t "$seconds" cmd a b c; then
      :
    else
      rc=$?
      kill_all
      if [ "$rc" -gt 128 ]; then
        report "$pgid" "deadline"
        pgid=""
        continue
      fi
      report "$pgid" "supervisor-gone"
      exit 0
    fi
  else
    IFS=' ' read -r cmd a b c || exit 0
  fi
  case "$cmd" in
    arm)
      pgid="$a"
      ms="$b"
      cgroup="${c:-}"
      [ "$ms" -lt 1 ] && ms=1
      seconds=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
      ;;
    disarm)
      pgid=""
      cgroup=""
      ;;
  esac
done
