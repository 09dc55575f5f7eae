# Checks for the shell tests (sourced): `check NAME STATUS` prints "ok   NAME"
# when STATUS is 0 and "FAIL NAME" otherwise, counting both in `passed` and
# `failures`. The test prints the counts and fails when `failures` > 0.
passed=0
failures=0
check() {
  if [[ $2 == 0 ]]; then
    echo "ok   $1"
    passed=$((passed + 1))
  else
    echo "FAIL $1"
    failures=$((failures + 1))
  fi
}
