#!/bin/sh
# Run the libFuzzer harnesses side by side and report (used by `make fuzz-ci` / `fuzz-long`):
#   fuzz/run.sh FUZZ_DIR CORPUS REGRESSIONS "EXTRA_FLAGS" runs|seconds NAME:N:MAX_LEN ...
# Each harness starts from the seed corpus (CORPUS/NAME) and the regression inputs
# (REGRESSIONS/NAME, if any), writes what it finds into FUZZ_DIR/work/NAME (emptied first) and
# stops after N executions (runs) or N seconds. A crash, a timeout or a leak fails the run
# and names the input to keep as a regression.
set -u
dir=$1 corpus=$2 regressions=$3 extra=$4 mode=$5
shift 5
start=$(date +%s)
pids=""
for spec in "$@"; do
    name=${spec%%:*} rest=${spec#*:}
    n=${rest%%:*} max_len=${rest#*:}
    work=$dir/work/$name
    rm -rf "$work" && mkdir -p "$work"
    if [ "$mode" = runs ]; then limit="-runs=$n"; else limit="-max_total_time=$n"; fi
    reg=""
    [ -d "$regressions/$name" ] && reg="$regressions/$name"
    timer=""
    [ -x /usr/bin/time ] && timer="/usr/bin/time -f cpu_seconds:%U:%S -o $dir/$name.cpu"
    # shellcheck disable=SC2086
    $timer "$dir/fuzz_$name" $extra $limit -max_len="$max_len" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/crash-$name-" "$work" "$corpus/$name" $reg \
        >"$dir/$name.log" 2>&1 &
    pids="$pids $!:$name"
done
status=0 total=0
for entry in $pids; do
    pid=${entry%%:*} name=${entry#*:}
    if wait "$pid"; then
        units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$name.log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/$name.log")
        cov=$(grep -o 'cov: [0-9]*' "$dir/$name.log" | tail -1)
        total=$((total + ${units:-0}))
        cpu=""
        if [ -f "$dir/$name.cpu" ]; then # CPU seconds: the rate on an otherwise idle core
            cpu=$(awk -F: -v u="${units:-0}" '/cpu_seconds/ {s = $2 + $3;
                printf ", %.0f CPU s (%.0f exec per CPU s)", s, (s > 0 ? u / s : 0)}' \
                "$dir/$name.cpu")
        fi
        echo "fuzz_$name: ${units:-?} executions, ${rate:-?} exec/s$cpu, $cov, no crash"
    else
        status=1
        echo "fuzz_$name: FAILED; the input: $(ls "$dir"/crash-"$name"-* "$dir"/timeout-* \
            "$dir"/leak-* "$dir"/oom-* 2>/dev/null | head -1)"
        grep -E 'ERROR|SUMMARY|fuzz_[a-z]+: ' "$dir/$name.log" | head -5
        echo "  reproduce: $dir/fuzz_$name INPUT; keep the input as a regression:" \
            "cp INPUT ../fixtures/fuzz/$name/ (make test replays it)"
    fi
done
echo "fuzzing: $total executions in $(($(date +%s) - start)) s"
exit $status
