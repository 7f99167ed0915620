#!/bin/sh
# Run the libFuzzer harnesses side by side and report (used by `make fuzz-ci` / `fuzz-long`):
#   fuzz/run.sh FUZZ_DIR CORPUS REGRESSIONS "EXTRA_FLAGS" runs|seconds NAME:N:MAX_LEN[:JOBS] ...
# Each harness starts from the seed corpus (CORPUS/NAME) and the regression inputs
# (REGRESSIONS/NAME, if any), writes what it finds into FUZZ_DIR/work/NAME (emptied first) and
# stops after N executions (runs) or N seconds. JOBS (default 1) runs it as that many
# processes side by side, each with its own work directory and, if EXTRA_FLAGS has -seed=S,
# seed S + job, sharing the N executions (runs) or each running N seconds: the slow harness is
# split so that it no longer sets the wall time alone. A crash, a timeout or a leak fails the
# run and names the input to keep as a regression.
set -u
dir=$1 corpus=$2 regressions=$3 extra=$4 mode=$5
shift 5
start=$(date +%s)
pids=""
for spec in "$@"; do
    name=${spec%%:*} rest=${spec#*:}
    n=${rest%%:*} rest=${rest#*:}
    max_len=${rest%%:*} jobs=1
    [ "$rest" != "$max_len" ] && jobs=${rest#*:}
    job=1
    while [ "$job" -le "$jobs" ]; do
        tag=$name
        [ "$jobs" -gt 1 ] && tag=$name.$job
        work=$dir/work/$tag
        rm -rf "$work" && mkdir -p "$work"
        if [ "$mode" = runs ]; then
            share=$(( n / jobs ))
            [ "$job" -le $(( n % jobs )) ] && share=$(( share + 1 ))
            limit="-runs=$share"
        else
            limit="-max_total_time=$n"
        fi
        flags=$extra
        case " $extra " in
            *" -seed="*) seed=$(echo "$extra" | sed -n 's/.*-seed=\([0-9]*\).*/\1/p')
                flags=$(echo "$extra" | sed "s/-seed=[0-9]*/-seed=$(( seed + job - 1 ))/") ;;
        esac
        reg=""
        [ -d "$regressions/$name" ] && reg="$regressions/$name"
        timer=""
        [ -x /usr/bin/time ] && timer="/usr/bin/time -f cpu_seconds:%U:%S -o $dir/$tag.cpu"
        # shellcheck disable=SC2086
        $timer "$dir/fuzz_$name" $flags $limit -max_len="$max_len" -timeout=25 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$dir/crash-$tag-" "$work" "$corpus/$name" $reg \
            >"$dir/$tag.log" 2>&1 &
        pids="$pids $!:$tag:$name"
        job=$(( job + 1 ))
    done
done
status=0 total=0
for entry in $pids; do
    pid=${entry%%:*} rest=${entry#*:}
    tag=${rest%%:*} name=${rest#*:}
    if wait "$pid"; then
        units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$tag.log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/$tag.log")
        cov=$(grep -o 'cov: [0-9]*' "$dir/$tag.log" | tail -1)
        total=$((total + ${units:-0}))
        cpu=""
        if [ -f "$dir/$tag.cpu" ]; then # CPU seconds: the rate on an otherwise idle core
            cpu=$(awk -F: -v u="${units:-0}" '/cpu_seconds/ {s = $2 + $3;
                printf ", %.0f CPU s (%.0f exec per CPU s)", s, (s > 0 ? u / s : 0)}' \
                "$dir/$tag.cpu")
        fi
        echo "fuzz_$tag: ${units:-?} executions, ${rate:-?} exec/s$cpu, $cov, no crash"
    else
        status=1
        echo "fuzz_$tag: FAILED; the input: $(ls "$dir"/crash-"$tag"-* "$dir"/timeout-* \
            "$dir"/leak-* "$dir"/oom-* 2>/dev/null | head -1)"
        grep -E 'ERROR|SUMMARY|fuzz_[a-z]+: ' "$dir/$tag.log" | head -5
        echo "  reproduce: $dir/fuzz_$name INPUT; keep the input as a regression:" \
            "cp INPUT ../fixtures/fuzz/$name/ (make test replays it)"
    fi
done
echo "fuzzing: $total executions in $(($(date +%s) - start)) s"
exit $status
