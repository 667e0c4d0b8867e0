#!/bin/sh
# seeds_up_to_date.sh — ctest fuzz_seeds.up_to_date: the committed fuzz seeds are what make_seeds writes today.
#   sh harness/fuzz/seeds_up_to_date.sh <attncheck_fuzz_make_seeds> <scratch dir> <corpus/seeds>
# Fails (exit 1), naming each file, where a seed make_seeds writes differs from the committed one (a generator's
# defaults changed: ties 2 -> 4 did; a parameter was removed) or where a committed seed is one make_seeds no longer
# writes (a renamed generator). Seeds added by hand (regression-*: inputs a campaign found) are not make_seeds' and
# are left out. On failure it prints the command that regenerates them. Names with spaces are read whole.
gen=$1 out=$2 src=$3
rm -rf "$out" && "$gen" "$out" >/dev/null || { echo "seeds_up_to_date: $gen $out failed"; exit 1; }
bad=0
written=$(cd "$out" && find . -type f | sort)
[ -n "$written" ] || { echo "seeds_up_to_date: make_seeds wrote nothing into $out"; exit 1; }
while IFS= read -r f; do
  cmp -s "$out/$f" "$src/$f" || { echo "corpus/seeds/${f#./} differs from what make_seeds writes"; bad=1; }
done <<LIST
$written
LIST
committed=$(cd "$src" && find . -type f ! -name 'regression-*' | sort)
while IFS= read -r f; do
  [ -z "$f" ] || [ -e "$out/$f" ] || { echo "corpus/seeds/${f#./}: make_seeds no longer writes it"; bad=1; }
done <<LIST
$committed
LIST
[ $bad = 0 ] || echo "regenerate (and delete what it no longer writes): '$gen' '$src'"
exit $bad
