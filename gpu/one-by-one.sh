#!/usr/bin/env bash
# Each test of one test binary in a process of its own, each with a time
# limit; for a test that runs out of time, what its processes were doing
# (process tree, kernel wait channel, open files) before it is killed.
# For finding which test hangs on the GPU machine:
#
#     bash gpu/one-by-one.sh BINARY [SECONDS_PER_TEST]
#
# Run after gpu/run-all.sh (same environment: KVIK_CUFILE_LIBRARY, the udev
# entry, INSTA_WORKSPACE_ROOT).
set -u
bin=$1 limit=${2:-60}
for test in $("$bin" --list 2>/dev/null | sed -n 's/: test$//p'); do
  t0=$SECONDS
  "$bin" --exact "$test" --nocapture --test-threads=1 > "/tmp/one-$test.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2> /dev/null && [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 1; done
  if kill -0 "$pid" 2> /dev/null; then
    echo "== $test: still running after ${limit}s; its processes:"
    ps -o pid,ppid,stat,etimes,wchan:30,args --ppid "$pid" -p "$pid" 2>&1 | cut -c1-220
    for child in $(pgrep -P "$pid") $(pgrep -P "$(pgrep -P "$pid" | head -1)" 2> /dev/null); do
      echo "-- $child: $(tr '\0' ' ' < "/proc/$child/cmdline" | cut -c1-300)"
      echo "   syscall: $(cat "/proc/$child/syscall" 2> /dev/null)"
      ls -l "/proc/$child/fd" 2> /dev/null | sed -n '2,12p' | sed 's/^/   /'
    done
    tail -15 "/tmp/one-$test.log" | sed 's/^/   | /'
    pkill -KILL -P "$pid"; kill -KILL "$pid"; wait "$pid" 2> /dev/null
  else
    wait "$pid"; status=$?
    echo "== $test: exit $status in $((SECONDS - t0))s"
    [ "$status" -eq 0 ] || tail -25 "/tmp/one-$test.log" | sed 's/^/   | /'
  fi
done
