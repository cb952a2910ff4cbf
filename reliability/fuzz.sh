#!/usr/bin/env bash
# `make fuzz` (docs/reliability.md): builds the cargo-fuzz targets in fuzz/ (libFuzzer, AddressSanitizer,
# debug assertions) and runs each for FUZZ_SECONDS (default 60). The corpora grow in
# fuzz/corpus/<target>/ (only the seed-* files are committed); a crash stops the run with its
# input in fuzz/artifacts/<target>/, to become a regression test in the crate's own suite.
# cargo-fuzz needs nightly flags: on the stable toolchain RUSTC_BOOTSTRAP=1 allows them.
# FUZZ_TARGETS limits the run to some targets; FUZZ_JOBS runs parallel workers per target.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-1}
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

FUZZ_ARGS=(--sanitizer address --debug-assertions)
cargo fuzz build "${FUZZ_ARGS[@]}"
TARGETS=${FUZZ_TARGETS:-$(cargo fuzz list | tr '\n' ' ')}
SUMMARY=target/fuzz-summary.tsv
mkdir -p target
printf 'target\tseconds\truns\texec_per_s\tcoverage\tfeatures\tcorpus\tresult\n' >"$SUMMARY"
failed=""
for t in $TARGETS; do
	log="target/fuzz-$t.log"
	mkdir -p "fuzz/corpus/$t"
	echo "fuzz: $t for ${SECONDS_EACH}s"
	set +e
	# -jobs makes libFuzzer write each worker's output to fuzz-N.log: only for FUZZ_JOBS > 1.
	parallel=()
	[[ $JOBS -gt 1 ]] && parallel=(-jobs="$JOBS" -workers="$JOBS")
	cargo fuzz run "${FUZZ_ARGS[@]}" "$t" -- -max_total_time="$SECONDS_EACH" "${parallel[@]}" \
		-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1
	code=$?
	set -e
	runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s+=$2} END {print s+0}')
	secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | awk '{s=$5} END {print s+0}')
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n1 | awk '{print $2}')
	corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
	result=ok
	if [[ $code -ne 0 ]]; then
		result="CRASH (exit $code, see $log and fuzz/artifacts/$t/)"
		failed="$failed $t"
		tail -n 40 "$log"
	fi
	eps=$((runs / (secs > 0 ? secs : SECONDS_EACH)))
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${secs:-$SECONDS_EACH}" "$runs" "$eps" "${cov:-?}" "${ft:-?}" "$corpus" "$result" >>"$SUMMARY"
done
column -t -s $'\t' "$SUMMARY"
if [[ -n $failed ]]; then
	echo "fuzz: crashes in:$failed"
	exit 1
fi
