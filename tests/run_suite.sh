#!/usr/bin/env bash
# run_suite.sh BUILD_DIR LABEL [ctest arguments...]: runs one build's suite with ctest, then
# prints what failed and why (each failed test's sanitizer SUMMARY lines and cmocka failures,
# from ctest's own log) and one closing line, "LABEL: N passed, M failed". Exits as ctest did.
set -u
build=$1 label=$2
shift 2
cd "$build" || exit 2
rm -f Testing/Temporary/LastTestsFailed.log # ctest leaves the last failing run's list behind
ctest "$@"
rc=$?
log=Testing/Temporary/LastTest.log
failed=Testing/Temporary/LastTestsFailed.log
total=$(grep -c '^[0-9]*/[0-9]* Testing: ' "$log" 2>/dev/null || echo 0)
nfailed=0
if [ -s "$failed" ]; then
    nfailed=$(wc -l <"$failed")
    echo "$label: why each test failed (from $build/$log):"
    while IFS=: read -r _ name; do
        # The test's section of the log: from its "Testing:" line to its "end time" line.
        why=$(awk -v t="$name" '
            $0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" { on = 1; next }
            on && $0 ~ "^\"" t "\" end time" { on = 0 }
            on && /SUMMARY: [A-Za-z]+Sanitizer|ERROR: [A-Za-z]+Sanitizer|\[  FAILED  \]|validation error|Test timeout/ { print "    " $0 }
        ' "$log" | sort -u | head -n 8)
        echo "  $name"
        [ -n "$why" ] && echo "$why"
    done <"$failed"
fi
echo "$label: $((total - nfailed)) passed, $nfailed failed"
exit $rc
