#!/usr/bin/env bash
# How the archives of earlier releases in tests/data were made, each by that release's
# timewarp-archiver, of a small tree under /timewarp-fixture/src;
# tests/archiver/compat_test.cpp reads them with today's code:
#   format1-archive.tar.gz           KIND format1: the release before format 2 (commit
#                                    593973a, whose timewarp-archiver writes format 1 only)
#   format2-catalog1-archive.tar.gz  KIND format2: the first release of format 2 (commit
#                                    59548d9: catalog schema 1, pack records of version 2),
#                                    with dir/large.log, a file of several chunks
#   format2-catalog2-archive.tar.gz  KIND format2: the release before catalog schema 3
#                                    (commit 825323d: schema 2, no versions.read_after)
# Usage (as root): make-old-archive.sh KIND PATH/TO/OLD/timewarp-archiver OUT.tar.gz
set -euo pipefail
kind=$1
archiver=$2
out=$3
rm -rf /timewarp-fixture
mkdir -p /timewarp-fixture/src/dir/sub
cd /timewarp-fixture/src
printf 'first version\n' >notes.txt
touch -d '2026-01-02 03:04:05.123456789' notes.txt
printf 'tab\there' >$'odd\tname %\xff.txt'
ln -s notes.txt link
printf 'deep\n' >dir/sub/deep.txt
printf 'gone soon\n' >dir/gone.txt
root=/timewarp-fixture/archive
src=/timewarp-fixture/src
req() { printf '%s\n' "$@" | "$archiver" --backup-root=$root --log-level=error; }
first=("1	UPDATE	$src" "2	UPDATE	$src/notes.txt" "3	UPDATE	$src/odd%09name %25%FF.txt"
    "4	UPDATE	$src/link" "5	UPDATE	$src/dir" "6	UPDATE	$src/dir/sub"
    "7	UPDATE	$src/dir/sub/deep.txt" "8	UPDATE	$src/dir/gone.txt")
n=8
if [[ $kind == format2 ]]; then
    # 3 MiB of numbered lines: several chunks, which compress well.
    seq -f 'line %010g of a file of several chunks' 1 80000 >dir/large.log
    truncate -s 3145728 dir/large.log
    first+=("9	UPDATE	$src/dir/large.log")
    n=9
fi
req "${first[@]}"
sleep 1.1
printf 'second version, longer\n' >>notes.txt
rm dir/gone.txt
req "$((n + 1))	UPDATE	$src/notes.txt" "$((n + 2))	DELETE	$src/dir/gone.txt" "$((n + 3))	UPDATE	$src/dir"
cd /timewarp-fixture
tar --owner=0 --group=0 --numeric-owner -czf "$out" archive
