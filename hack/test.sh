#!/usr/bin/env bash
# make test: runs make test's stages (make targets) and prints at the end,
# whatever the outcome (a failure, a timeout, an interrupt), how long each
# stage took and the slowest end-to-end scenarios of the run's report.
#
#   hack/test.sh "BEFORE..." E2E "BESIDE..."
#
# The BEFORE stages run one after the other, stopping at the first that
# fails. Then the E2E stage starts; its scenarios that must run alone come
# first, on an otherwise idle machine, and once they are done (the stage
# creates the file $E2E_SIDE_BY_SIDE, see hack/testlog) the BESIDE stages
# run one after the other beside the scenarios that run side by side, which
# spend most of their time waiting (e2e/README.md). The BESIDE stages'
# lines are prefixed with their name. The E2E stage's go test -json report
# is $E2E_REPORT.
set -uo pipefail

before=$1 e2e=$2 beside=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
: "${E2E_REPORT:?}" "${E2E_SIDE_BY_SIDE:?}"
export E2E_SIDE_BY_SIDE

names=() times=() outcomes=()
# Each stage's output is also kept in $logs/NAME.log.
logs=$root/.cache/test-logs
rm -rf "$logs" && mkdir -p "$logs"
begin=$SECONDS
e2e_pid=
rm -f "$E2E_REPORT" "$E2E_SIDE_BY_SIDE"

summary() {
	local status=$?
	trap - EXIT INT TERM
	if [[ -n $e2e_pid ]] && kill -0 "$e2e_pid" 2>/dev/null; then
		wait "$e2e_pid" 2>/dev/null
	fi
	echo
	echo "make test: stage times"
	local i
	for i in "${!names[@]}"; do
		printf '  %-12s %6ss  %s\n' "${names[$i]}" "${times[$i]}" "${outcomes[$i]}"
	done
	printf '  %-12s %6ss  (stages beside %s overlap it)\n' total $((SECONDS - begin)) "$e2e"
	# What failed, for a reader who sees only the end of the output (a
	# CI's log tail): each failed stage's failing tests, races and panics.
	for i in "${!names[@]}"; do
		if [[ ${outcomes[$i]} == failed* && -s $logs/${names[$i]}.log ]]; then
			echo
			echo "${names[$i]} failed; its failures ($logs/${names[$i]}.log):"
			grep -E -m 40 -e '--- FAIL|^FAIL|^panic:|WARNING: DATA RACE|^ *[A-Za-z0-9_]+\.go:[0-9]+: ' "$logs/${names[$i]}.log" | sed 's/^/  /'
		fi
	done
	if [[ -s $E2E_REPORT && -x $root/bin/testlog ]]; then
		echo
		"$root/bin/testlog" slowest -n 10 "$E2E_REPORT"
	fi
	exit "$status"
}
trap summary EXIT
# An interrupt or a CI's timeout still prints the summary; the stages' own
# processes get the signal too, as members of the same process group.
trap 'exit 130' INT
trap 'exit 143' TERM

# stage NAME [PREFIX]: runs make NAME, timed, its lines prefixed with
# "[NAME] " when PREFIX is set; records its outcome and returns its status.
stage() {
	local name=$1 prefix=${2:-} start=$SECONDS rc i
	i=${#names[@]}
	names+=("$name") times+=(0) outcomes+=(running)
	if [[ -n $prefix ]]; then
		make --no-print-directory "$name" 2>&1 | tee "$logs/$name.log" | sed -u "s/^/[$name] /"
	else
		make --no-print-directory "$name" 2>&1 | tee "$logs/$name.log"
	fi
	rc=$?
	times[i]=$((SECONDS - start))
	if ((rc != 0)); then
		outcomes[i]="failed (exit $rc)"
	else
		outcomes[i]=passed
	fi
	return "$rc"
}

for s in $before; do
	stage "$s" || exit
done

# The end-to-end stage in the background; its outcome is recorded when it
# ends.
e2e_start=$SECONDS
e2e_index=${#names[@]}
names+=("$e2e") times+=(0) outcomes+=(running)
make --no-print-directory "$e2e" > >(tee "$logs/$e2e.log") 2>&1 &
e2e_pid=$!

# Wait until its scenarios that run alone are done, or it ends.
while [[ ! -e $E2E_SIDE_BY_SIDE ]] && kill -0 "$e2e_pid" 2>/dev/null; do
	sleep 1
done
rc=0
if [[ -e $E2E_SIDE_BY_SIDE ]]; then
	for s in $beside; do
		stage "$s" prefix || { rc=$?; break; }
	done
fi
wait "$e2e_pid"
e2e_rc=$?
e2e_pid=
times[e2e_index]=$((SECONDS - e2e_start))
if ((e2e_rc != 0)); then
	outcomes[e2e_index]="failed (exit $e2e_rc)"
else
	outcomes[e2e_index]=passed
fi
if ((e2e_rc != 0)); then
	exit "$e2e_rc"
fi
if ((rc != 0)); then
	exit "$rc"
fi
if [[ ! -e $E2E_SIDE_BY_SIDE ]]; then
	echo "make test: $e2e ended without its scenarios that run side by side: the stages beside it ($beside) did not run"
	exit 1
fi
