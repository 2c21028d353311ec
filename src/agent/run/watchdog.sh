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

# KILL the group, and through cgroup.kill everything in the cgroup.
kill_all() {
  kill -KILL -- "-$pgid" 2>/dev/null
  # Braced, so that 2>/dev/null covers the redirection too: the cgroup removed by the
  # supervisor meanwhile, its error went to the supervisor's log as a watchdog line.
  [ -n "$cgroup" ] && { echo 1 > "$cgroup/cgroup.kill"; } 2>/dev/null
}

# Remove the emptied cgroup (its processes take a moment to go), unless the supervisor,
# woken with us, removed it first: then there is nothing to wait for.
remove_cgroup() {
  [ -n "$cgroup" ] || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    rmdir "$cgroup" 2>/dev/null && break
    [ -d "$cgroup" ] || break
    sleep 0.02
  done
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
        # Said at once (the supervisor reads it, woken or not), the cgroup's removal after.
        report "$pgid" "deadline"
        remove_cgroup
        pgid=""
        continue
      fi
      # Removed first: the report goes to a pipe whose reader is gone (SIGPIPE ends us).
      remove_cgroup
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
